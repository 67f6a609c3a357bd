package sluice.nexmark;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.sink.v2.DiscardingSink;
import org.apache.flink.util.Collector;

import java.io.IOException;
import java.lang.management.ManagementFactory;
import java.lang.management.MemoryUsage;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.stream.Stream;

/**
 * Memory per key of keyed state on Apache Flink, the counterpart of sluice's
 * `keymem memory` (bench/startup_memory/keymem.c), for bench/startup_memory.sh:
 *
 *   java -Xmx8g -cp target/nexmark-flink.jar sluice.nexmark.KeyMemory --keys 10M
 *        [--backend hashmap|rocksdb] [--rocksdb-dir DIR] [--block-cache 64m --write-buffer 8m]
 *
 * The job, at parallelism 1 in a MiniCluster: fromSequence(0, N) gives the
 * keys 0 .. N-1 (BIGINT, Long) and then the marker N; keyBy(the value); a
 * KeyedProcessFunction keeps one ValueState<Long> entry per key, the running
 * sum of the values (= the key here, so every stored value is its own Long
 * object: a constant count of 1 would be Java's one cached Long and hide the
 * value's cost).  At the marker, processed after every key, it writes no state
 * and measures: the JVM heap used after a full GC (System.gc() twice, then
 * MemoryMXBean), VmRSS and VmHWM of the process, and with RocksDB the size of
 * the files under the local directory.  N = 0 is the baseline.
 *
 * RocksDB runs with Flink's managed memory for RocksDB switched off so that
 * the budgets are set explicitly and match sluice's: a block cache of
 * --block-cache bytes and two memtables of --write-buffer / 2 each.  The
 * write-ahead log is off (Flink never writes one), so what is still in the
 * memtables is not on disk: a small write buffer keeps that small.
 */
public final class KeyMemory {
    /** What the function measured at the marker (one subtask, read after execute). */
    static volatile String measured;
    static volatile long created, loadStartNs, loadEndNs;

    static final class SumFn extends KeyedProcessFunction<Long, Long, Long> {
        final long marker;
        final String rocksDir;
        transient ValueState<Long> sum;
        long n, records;

        SumFn(long marker, String rocksDir) {
            this.marker = marker;
            this.rocksDir = rocksDir;
        }

        @Override
        public void open(OpenContext ctx) {
            sum = getRuntimeContext().getState(new ValueStateDescriptor<>("sum", Types.LONG));
        }

        @Override
        public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            if (records++ == 0) loadStartNs = System.nanoTime();
            if (v == marker) {
                loadEndNs = System.nanoTime();
                measured = measure(rocksDir);
                created = n;
                return;
            }
            Long cur = sum.value();
            if (cur == null) n++;
            long s = (cur == null ? 0L : cur) + v;
            sum.update(s); // a new Long (s >= 128 but for the first keys)
        }
    }

    static String measure(String rocksDir) throws IOException {
        System.gc();
        System.gc();
        MemoryUsage heap = ManagementFactory.getMemoryMXBean().getHeapMemoryUsage();
        long[] rss = rssKb();
        long[] disk = rocksDir == null ? new long[3] : dirSize(Paths.get(rocksDir));
        return String.format("heap_used_bytes=%d heap_committed_bytes=%d rss_kb=%d hwm_kb=%d disk_bytes=%d "
                        + "disk_alloc_bytes=%d disk_files=%d", heap.getUsed(), heap.getCommitted(), rss[0], rss[1],
                disk[0], disk[1], disk[2]);
    }

    /** {VmRSS, VmHWM} in KiB. */
    static long[] rssKb() throws IOException {
        long[] r = {-1, -1};
        for (String l : Files.readAllLines(Paths.get("/proc/self/status"))) {
            if (l.startsWith("VmRSS:")) r[0] = Long.parseLong(l.replaceAll("[^0-9]", ""));
            else if (l.startsWith("VmHWM:")) r[1] = Long.parseLong(l.replaceAll("[^0-9]", ""));
        }
        return r;
    }

    /** {bytes, allocated bytes, files} of the regular files under dir. */
    static long[] dirSize(Path dir) throws IOException {
        long[] r = new long[3];
        try (Stream<Path> s = Files.walk(dir)) {
            for (Path p : (Iterable<Path>) s::iterator) {
                if (!Files.isRegularFile(p, java.nio.file.LinkOption.NOFOLLOW_LINKS)) continue;
                try {
                    r[0] += Files.size(p);
                    Object blocks = Files.getAttribute(p, "unix:blocks"); // not on every JDK: fall back to size
                    r[1] += blocks instanceof Long ? (Long) blocks * 512 : Files.size(p);
                } catch (UnsupportedOperationException | IllegalArgumentException | IOException e) {
                    r[1] += Files.size(p); // a file RocksDB removed meanwhile throws IOException: counted 0 above
                }
                r[2]++;
            }
        }
        return r;
    }

    public static void main(String[] args) throws Exception {
        long keys = -1, cache = 64L << 20, wbuf = 8L << 20;
        String backend = "hashmap", rocksDir = null;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (i + 1 >= args.length) {
                System.err.println("KeyMemory: '" + a + "' needs a value");
                System.exit(2);
            }
            switch (a) {
                case "--keys": keys = NexmarkFlink.count(args[++i]); break;
                case "--backend": backend = args[++i]; break;
                case "--rocksdb-dir": rocksDir = args[++i]; break;
                case "--block-cache": cache = NexmarkFlink.count(args[++i]); break;
                case "--write-buffer": wbuf = NexmarkFlink.count(args[++i]); break;
                default:
                    System.err.println("KeyMemory: unknown argument '" + a + "'");
                    System.exit(2);
            }
        }
        if (keys < 0) {
            System.err.println("KeyMemory: --keys N is required");
            System.exit(2);
        }
        boolean rocks = backend.equals("rocksdb");
        if (!rocks && !backend.equals("hashmap")) {
            System.err.println("KeyMemory: --backend: '" + backend + "' is not hashmap or rocksdb");
            System.exit(2);
        }
        Path own = null;
        if (rocks && rocksDir == null) {
            own = Files.createTempDirectory("keymem-flink-rocksdb");
            rocksDir = own.toString();
        }
        long[] rss0 = rssKb();

        Configuration conf = new Configuration();
        conf.set(StateBackendOptions.STATE_BACKEND, backend);
        if (rocks) {
            conf.set(ConfigOptions.key("state.backend.rocksdb.localdir").stringType().noDefaultValue(), rocksDir);
            conf.set(ConfigOptions.key("state.backend.rocksdb.memory.managed").booleanType().noDefaultValue(), false);
            conf.set(ConfigOptions.key("state.backend.rocksdb.block.cache-size").stringType().noDefaultValue(),
                    cache + "b");
            conf.set(ConfigOptions.key("state.backend.rocksdb.writebuffer.size").stringType().noDefaultValue(),
                    (wbuf / 2) + "b");
            conf.set(ConfigOptions.key("state.backend.rocksdb.writebuffer.count").intType().noDefaultValue(), 2);
        }
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(1);
        env.fromSequence(0, keys).name("keys").uid("keys")
                .keyBy(v -> v, Types.LONG)
                .process(new SumFn(keys, rocks ? rocksDir : null)).returns(Types.LONG).name("sum").uid("sum")
                .sinkTo(new DiscardingSink<>()).name("discard").uid("discard");
        long c0 = Stats.processCpuNs(), t0 = System.nanoTime();
        env.execute("keymem");
        long c1 = Stats.processCpuNs(), t1 = System.nanoTime();
        if (own != null) {
            try (Stream<Path> s = Files.walk(own)) {
                s.sorted(java.util.Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
            }
        }
        if (measured == null || created != keys) {
            System.err.printf("KeyMemory: %s: %d state entries created for %d keys (marker %s)%n", backend, created,
                    keys, measured == null ? "never seen" : "seen");
            System.exit(1);
        }
        long[] rssEnd = rssKb();
        System.out.printf("engine=flink mode=memory backend=%s keys=%d value=BIGINT key=BIGINT block_cache=%d "
                        + "write_buffer=%d %s rss_start_kb=%d rss_after_job_kb=%d load_s=%.3f job_s=%.3f cpu_s=%.3f%n",
                backend, keys, rocks ? cache : 0, rocks ? wbuf : 0, measured, rss0[0], rssEnd[0],
                (loadEndNs - loadStartNs) / 1e9, (t1 - t0) / 1e9, (c1 - c0) / 1e9);
        System.exit(0);
    }
}
