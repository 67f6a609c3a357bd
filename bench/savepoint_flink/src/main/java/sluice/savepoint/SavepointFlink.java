package sluice.savepoint;

import org.apache.flink.api.common.JobID;
import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.PrimitiveArrayTypeInfo;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.ReaderOutput;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SourceSplit;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.core.execution.SavepointFormatType;
import org.apache.flink.core.io.InputStatus;
import org.apache.flink.core.io.SimpleVersionedSerializer;
import org.apache.flink.runtime.jobgraph.JobGraph;
import org.apache.flink.runtime.jobgraph.SavepointRestoreSettings;
import org.apache.flink.runtime.minicluster.MiniCluster;
import org.apache.flink.runtime.minicluster.MiniClusterConfiguration;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.streaming.api.graph.StreamGraph;
import org.apache.flink.util.Collector;

import java.io.IOException;
import java.net.URI;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.Comparator;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import java.util.stream.Stream;

/**
 * Flink's side of the savepoint benchmark (BENCHMARKS.md, "Savepoints", issue 11): the job of
 * bench/bench_savepoint.c on Apache Flink 2.2, in one JVM (a MiniCluster with one task manager of
 * P slots), on the heap (hashmap) backend and on RocksDB.
 *
 *   java -jar target/savepoint-flink.jar [--mb 100,1000] [--backends heap,rocksdb] [--runs 3]
 *        [--p 2] [--value 100] [--warmup 1]
 *
 * The job: a source of K distinct keys (K = MB * 2^20 / (value + 16), sluice's formula), each
 * once, then idle without ending -> keyBy -> a KeyedProcessFunction that puts a value of --value
 * bytes (the same bytes as sluice's) into ValueState per key and emits nothing -> a discarding
 * sink; parallelism P, operator uids "keys", "state", "none".  Once every key is in state
 * (counted in processElement), an intermediate savepoint is taken
 * (MiniCluster.triggerSavepoint, SavepointFormatType.CANONICAL: trigger until the future
 * completes, i.e. the savepoint's _metadata is written and the checkpoint coordinator completed
 * it), then the job is stopped with a savepoint (MiniCluster.stopWithSavepoint, CANONICAL:
 * trigger until its future completes, after the job has finished), and a new job restores that
 * one at the same parallelism: the restore time runs from building the job graph (the
 * equivalent of sluice's sl_env_execute) through submitJob to open() of the keyed function on
 * every subtask (keyed state is restored in initializeState, before open).  The size is that of
 * the intermediate savepoint's directory.  "start" is the first job's build-and-submit -> open()
 * on every subtask: the restore's path with no state to load.  Wall clock.
 *
 * Each backend gets its own MiniCluster and first runs --warmup uncounted rounds at the smallest
 * size (the JIT and the MiniCluster's first job), printed as "warmup" lines.  Every counted run
 * prints a "result engine=flink ..." line, the format bench/savepoints.sh reads.
 */
public final class SavepointFlink {

    static final AtomicLong PUTS = new AtomicLong();
    static final AtomicInteger OPENED = new AtomicInteger();
    static final long[] OPEN_NS = new long[64];
    /** The class of the keyed function's ValueState (HeapValueState / RocksDBValueState): which backend ran. */
    static volatile String STATE_CLASS = "?";

    // ---- a source of keys subtask, subtask + P, ... < K, once each, then idle forever ----

    /** The source has no splits: reader i of P emits keys i, i + P, ... (none when restored). */
    public static final class NoSplit implements SourceSplit {
        @Override
        public String splitId() {
            return "none";
        }
    }

    static final class NoSplitSerializer implements SimpleVersionedSerializer<NoSplit> {
        @Override
        public int getVersion() {
            return 1;
        }

        @Override
        public byte[] serialize(NoSplit s) {
            return new byte[0];
        }

        @Override
        public NoSplit deserialize(int version, byte[] b) {
            return new NoSplit();
        }
    }

    static final class IntSerializer implements SimpleVersionedSerializer<Integer> {
        @Override
        public int getVersion() {
            return 1;
        }

        @Override
        public byte[] serialize(Integer i) {
            return new byte[0];
        }

        @Override
        public Integer deserialize(int version, byte[] b) {
            return 0;
        }
    }

    public static final class KeysSource implements Source<Long, NoSplit, Integer> {
        final long keys;
        final boolean emit; // false in the restoring job: everything was read before the savepoint

        KeysSource(long keys, boolean emit) {
            this.keys = keys;
            this.emit = emit;
        }

        @Override
        public Boundedness getBoundedness() {
            return Boundedness.CONTINUOUS_UNBOUNDED;
        }

        @Override
        public SourceReader<Long, NoSplit> createReader(SourceReaderContext ctx) {
            long first = emit ? ctx.getIndexOfSubtask() : keys;
            return new KeysReader(first, ctx.currentParallelism(), keys);
        }

        @Override
        public SplitEnumerator<NoSplit, Integer> createEnumerator(SplitEnumeratorContext<NoSplit> ctx) {
            return new NoEnumerator();
        }

        @Override
        public SplitEnumerator<NoSplit, Integer> restoreEnumerator(SplitEnumeratorContext<NoSplit> ctx, Integer ck) {
            return new NoEnumerator();
        }

        @Override
        public SimpleVersionedSerializer<NoSplit> getSplitSerializer() {
            return new NoSplitSerializer();
        }

        @Override
        public SimpleVersionedSerializer<Integer> getEnumeratorCheckpointSerializer() {
            return new IntSerializer();
        }
    }

    static final class NoEnumerator implements SplitEnumerator<NoSplit, Integer> {
        @Override
        public void start() {}

        @Override
        public void handleSplitRequest(int subtask, String host) {}

        @Override
        public void addSplitsBack(List<NoSplit> splits, int subtask) {}

        @Override
        public void addReader(int subtask) {}

        @Override
        public Integer snapshotState(long id) {
            return 0;
        }

        @Override
        public void close() {}
    }

    static final class KeysReader implements SourceReader<Long, NoSplit> {
        long next;
        final long stride, keys;
        /** Never completes: once every key is out, the reader is idle (checkpoints still pass). */
        final CompletableFuture<Void> never = new CompletableFuture<>();

        KeysReader(long first, long stride, long keys) {
            this.next = first;
            this.stride = stride;
            this.keys = keys;
        }

        @Override
        public void start() {}

        @Override
        public InputStatus pollNext(ReaderOutput<Long> out) {
            if (next >= keys) return InputStatus.NOTHING_AVAILABLE;
            out.collect(next);
            next += stride;
            return next < keys ? InputStatus.MORE_AVAILABLE : InputStatus.NOTHING_AVAILABLE;
        }

        @Override
        public List<NoSplit> snapshotState(long id) {
            return Collections.emptyList();
        }

        @Override
        public CompletableFuture<Void> isAvailable() {
            return next < keys ? CompletableFuture.completedFuture(null) : never;
        }

        @Override
        public void addSplits(List<NoSplit> splits) {}

        @Override
        public void notifyNoMoreSplits() {}

        @Override
        public void close() {}
    }

    // ---- the keyed function ----

    public static final class PutOnce extends KeyedProcessFunction<Long, Long, Long> {
        final int value;
        transient ValueState<byte[]> v;

        PutOnce(int value) {
            this.value = value;
        }

        @Override
        public void open(OpenContext ctx) {
            v = getRuntimeContext().getState(
                    new ValueStateDescriptor<>("v", PrimitiveArrayTypeInfo.BYTE_PRIMITIVE_ARRAY_TYPE_INFO));
            STATE_CLASS = v.getClass().getSimpleName();
            int i = OPENED.getAndIncrement();
            if (i < OPEN_NS.length) OPEN_NS[i] = System.nanoTime();
        }

        @Override
        public void processElement(Long k, Context ctx, Collector<Long> out) throws Exception {
            byte[] buf = new byte[value];
            long key = k;
            for (int i = 0; i < value; i++) buf[i] = (byte) (key * 31 + i);
            v.update(buf);
            PUTS.incrementAndGet();
        }
    }

    // ---- the harness ----

    static Map<String, String> jobConf(String backend, Path ck) {
        Map<String, String> m = new HashMap<>();
        m.put("state.backend.type", backend.equals("rocksdb") ? "rocksdb" : "hashmap");
        m.put("execution.checkpointing.dir", ck.toUri().toString());
        m.put("execution.checkpointing.interval", "1 h"); // as sluice's: enabled, never due
        m.put("restart-strategy.type", "none");
        return m;
    }

    static JobGraph job(String backend, Path ck, int p, int value, long keys, String restore) {
        Configuration conf = Configuration.fromMap(jobConf(backend, ck));
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(p);
        env.fromSource(new KeysSource(keys, restore == null), WatermarkStrategy.noWatermarks(), "keys", Types.LONG)
                .uid("keys")
                .keyBy(k -> k, Types.LONG)
                .process(new PutOnce(value), Types.LONG)
                .uid("state")
                .sinkTo(new DiscardingSink<>())
                .uid("none");
        StreamGraph sg = env.getStreamGraph();
        if (restore != null) sg.setSavepointRestoreSettings(SavepointRestoreSettings.forPath(restore, false));
        return sg.getJobGraph();
    }

    static void rmrf(Path p) throws IOException {
        if (!Files.exists(p)) return;
        try (Stream<Path> s = Files.walk(p)) {
            for (Path q : (Iterable<Path>) s.sorted(Comparator.reverseOrder())::iterator) Files.delete(q);
        }
    }

    static long dirBytes(String savepoint) throws IOException {
        Path p = savepoint.contains(":") ? Paths.get(URI.create(savepoint)) : Paths.get(savepoint);
        long n = 0;
        try (Stream<Path> s = Files.walk(p)) {
            for (Path q : (Iterable<Path>) s::iterator) if (Files.isRegularFile(q)) n += Files.size(q);
        }
        return n;
    }

    /** One run: fill, savepoint, stop with savepoint, restore; {bytes, savepoint, stop, restore, start ms}. */
    static long[] run(MiniCluster mc, String backend, Path tmp, int p, int value, long keys) throws Exception {
        rmrf(tmp);
        Path ck = tmp.resolve("ck"), spd = tmp.resolve("sp");
        Files.createDirectories(ck);
        Files.createDirectories(spd);
        String spDir = spd.toUri().toString();
        PUTS.set(0);
        OPENED.set(0);
        long t00 = System.nanoTime();
        JobGraph g = job(backend, ck, p, value, keys, null);
        JobID id = g.getJobID();
        mc.submitJob(g).get();
        while (PUTS.get() < keys) {
            if (mc.getJobStatus(id).get().isGloballyTerminalState())
                throw new IllegalStateException("job ended: " + mc.requestJobResult(id).get());
            Thread.sleep(20);
        }
        while (OPENED.get() < p) Thread.sleep(1);
        long startNs = 0;
        for (int i = 0; i < p; i++) startNs = Math.max(startNs, OPEN_NS[i] - t00);
        long t0 = System.nanoTime();
        String sp = mc.triggerSavepoint(id, spDir, false, SavepointFormatType.CANONICAL).get();
        long spNs = System.nanoTime() - t0;
        long bytes = dirBytes(sp);
        long t1 = System.nanoTime();
        String sp2 = mc.stopWithSavepoint(id, spDir, false, SavepointFormatType.CANONICAL).get();
        long stopNs = System.nanoTime() - t1;
        mc.requestJobResult(id).get();

        OPENED.set(0);
        long t2 = System.nanoTime();
        JobGraph r = job(backend, ck, p, value, keys, sp2);
        mc.submitJob(r).get();
        while (OPENED.get() < p) {
            if (mc.getJobStatus(r.getJobID()).get().isGloballyTerminalState())
                throw new IllegalStateException("restore ended: " + mc.requestJobResult(r.getJobID()).get());
            Thread.sleep(1);
        }
        long last = 0;
        for (int i = 0; i < p; i++) last = Math.max(last, OPEN_NS[i] - t2);
        mc.cancelJob(r.getJobID()).get();
        mc.requestJobResult(r.getJobID()).get();
        rmrf(tmp);
        System.gc();
        return new long[] {bytes, spNs / 1_000_000, stopNs / 1_000_000, last / 1_000_000, startNs / 1_000_000};
    }

    static MiniCluster cluster(String backend, int p) throws Exception {
        Map<String, String> m = jobConf(backend, Paths.get(System.getProperty("java.io.tmpdir")));
        m.remove("execution.checkpointing.dir");
        m.put("taskmanager.memory.managed.size", "512m"); // RocksDB's block cache and write buffers
        MiniCluster mc = new MiniCluster(new MiniClusterConfiguration.Builder()
                .setConfiguration(Configuration.fromMap(m))
                .setNumTaskManagers(1)
                .setNumSlotsPerTaskManager(p)
                .build());
        mc.start();
        return mc;
    }

    public static void main(String[] args) throws Exception {
        String mbs = "100,1000", backends = "heap,rocksdb";
        int runs = 3, p = 2, value = 100, warmup = 1;
        for (int i = 0; i + 1 < args.length; i += 2) {
            switch (args[i]) {
                case "--mb": mbs = args[i + 1]; break;
                case "--backends": backends = args[i + 1]; break;
                case "--runs": runs = Integer.parseInt(args[i + 1]); break;
                case "--p": p = Integer.parseInt(args[i + 1]); break;
                case "--value": value = Integer.parseInt(args[i + 1]); break;
                case "--warmup": warmup = Integer.parseInt(args[i + 1]); break;
                default:
                    System.err.println("usage: savepoint-flink [--mb 100,1000] [--backends heap,rocksdb] [--runs 3]"
                            + " [--p 2] [--value 100] [--warmup 1]");
                    System.exit(2);
            }
        }
        if (args.length % 2 != 0 || p < 1 || p > OPEN_NS.length || runs < 1 || value < 1) System.exit(2);
        String tmpRoot = System.getenv("TMPDIR") != null ? System.getenv("TMPDIR") : "/tmp";
        Path tmp = Paths.get(tmpRoot, "sluice-bench-savepoint-flink." + ProcessHandle.current().pid());
        int[] sizes = Arrays.stream(mbs.split(",")).mapToInt(Integer::parseInt).toArray();
        int smallest = Arrays.stream(sizes).min().getAsInt();
        System.out.printf("# savepoint-flink: Flink %s, p=%d, value %d bytes, %d runs, %d warm-up; wall clock ms%n",
                org.apache.flink.runtime.util.EnvironmentInformation.getVersion(), p, value, runs, warmup);
        for (String backend : backends.split(",")) {
            MiniCluster mc = cluster(backend, p);
            try {
                for (int w = 0; w < warmup; w++) {
                    long keys = (long) smallest * 1048576 / (value + 16);
                    long[] x = run(mc, backend, tmp, p, value, keys);
                    System.out.printf("warmup engine=flink backend=%s mb=%d keys=%d bytes=%d savepoint_ms=%d "
                            + "stop_ms=%d restore_ms=%d start_ms=%d state=%s%n", backend, smallest, keys, x[0], x[1], x[2], x[3], x[4],
                            STATE_CLASS);
                }
                for (int mb : sizes) {
                    long keys = (long) mb * 1048576 / (value + 16);
                    List<long[]> rs = new ArrayList<>();
                    for (int r = 0; r < runs; r++) {
                        long[] x = run(mc, backend, tmp, p, value, keys);
                        rs.add(x);
                        System.out.printf("result engine=flink backend=%s mb=%d keys=%d bytes=%d savepoint_ms=%d "
                                + "stop_ms=%d restore_ms=%d start_ms=%d state=%s%n", backend, mb, keys, x[0], x[1], x[2], x[3],
                                x[4], STATE_CLASS);
                        System.out.flush();
                    }
                }
            } finally {
                mc.closeAsync().get();
            }
        }
        rmrf(tmp);
        System.exit(0);
    }
}
