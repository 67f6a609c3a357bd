package sluice.nexmark;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.configuration.CheckpointingOptions;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.ExternalizedCheckpointRetention;
import org.apache.flink.configuration.MemorySize;
import org.apache.flink.configuration.PipelineOptions;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.configuration.TaskManagerOptions;
import org.apache.flink.core.execution.CheckpointingMode;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;

import java.time.Duration;

/**
 * The Nexmark queries on Apache Flink in one JVM (a MiniCluster), the
 * counterpart of sluice's `nexmark` driver: same options, same output line.
 *
 *   java -jar target/nexmark-flink.jar --query q5 --events 10M -p 2 [--backend hashmap|rocksdb]
 *        [--checkpoint-interval 10000 --checkpoint-dir /tmp/ck] [--rate R --latency --duration S]
 *   java -jar target/nexmark-flink.jar --gen-checksum 1M
 *
 * Throughput is measured from the first generated event to the end of the
 * job (the MiniCluster's start-up before it is left out); CPU time is the
 * whole JVM's (all threads: tasks, JIT, GC) over the same span.
 */
public final class NexmarkFlink {
    public static long count(String s) {
        double m = 1;
        char c = s.charAt(s.length() - 1);
        if (c == 'K' || c == 'k') m = 1e3;
        else if (c == 'M' || c == 'm') m = 1e6;
        else if (c == 'G' || c == 'g') m = 1e9;
        if (m != 1) s = s.substring(0, s.length() - 1);
        return (long) (Double.parseDouble(s) * m);
    }

    /** " eps_2h=... eps_per_core_2h=...": throughput over the second half of the events (from when every
     * split had emitted half of its own to the end of the job), past the JIT's warm-up; "" if unknown. */
    public static String secondHalf(long events, long wallEnd, long cpuEnd) {
        long hw = NexmarkSource.HALF_EMIT_NS.get(), hc = NexmarkSource.HALF_CPU_NS.get();
        if (hw == 0 || wallEnd <= hw || cpuEnd <= hc) return "";
        double half = events / 2.0;
        return String.format(" eps_2h=%.0f eps_per_core_2h=%.0f", half / ((wallEnd - hw) / 1e9), half / ((cpuEnd - hc) / 1e9));
    }

    /** The number of the last completed checkpoint: the highest chk-N under dir (0: none). */
    public static long lastCheckpoint(String dir) throws java.io.IOException {
        if (dir == null || !java.nio.file.Files.isDirectory(java.nio.file.Paths.get(dir))) return 0;
        try (java.util.stream.Stream<java.nio.file.Path> s = java.nio.file.Files.walk(java.nio.file.Paths.get(dir), 3)) {
            return s.map(x -> x.getFileName().toString()).filter(n -> n.matches("chk-[0-9]+"))
                    .mapToLong(n -> Long.parseLong(n.substring(4))).max().orElse(0);
        }
    }

    public static void main(String[] args) throws Exception {
        String query = null, backend = "hashmap", ckDir = null;
        long events = 10_000_000, ckMs = 0, genChecksum = -1, wmBound = 4000;
        double rate = 0, duration = 10, eventRate = 1e6, timeScale = 100;
        int p = 1;
        boolean latency = false;
        long seed = 42;
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            switch (a) {
                case "--query": query = args[++i]; break;
                case "--events": events = count(args[++i]); break;
                case "-p": case "--parallelism": p = (int) count(args[++i]); break;
                case "--backend": backend = args[++i]; break;
                case "--checkpoint-interval": ckMs = count(args[++i]); break;
                case "--checkpoint-dir": ckDir = args[++i]; break;
                case "--rate": rate = count(args[++i]); break;
                case "--latency": latency = true; break;
                case "--duration": duration = Double.parseDouble(args[++i]); break;
                case "--event-rate": eventRate = count(args[++i]); break;
                case "--time-scale": timeScale = Double.parseDouble(args[++i]); break;
                case "--wm-bound": wmBound = count(args[++i]); break;
                case "--seed": seed = count(args[++i]); break;
                case "--gen-checksum": genChecksum = count(args[++i]); break;
                default:
                    System.err.println("nexmark-flink: unknown argument '" + a + "'");
                    System.exit(2);
            }
        }
        NexmarkGenerator.Config cfg = new NexmarkGenerator.Config();
        cfg.seed = seed;
        cfg.interEventDelayUs = 1e6 / eventRate;
        if (genChecksum >= 0) {
            NexmarkGenerator g = NexmarkGenerator.of(cfg);
            Event e = new Event();
            long c = 0;
            long[] kinds = new long[3];
            for (long n = 0; n < genChecksum; n++) {
                g.event(n, e);
                c = NexmarkGenerator.fold(c, NexmarkGenerator.hash(e));
                kinds[e.type]++;
            }
            System.out.printf("engine=flink gen_events=%d persons=%d auctions=%d bids=%d gen_checksum=%016x%n",
                    genChecksum, kinds[0], kinds[1], kinds[2], c);
            return;
        }
        if (query == null) {
            System.err.println("nexmark-flink: --query is required");
            System.exit(2);
        }
        if (latency && rate <= 0) {
            System.err.println("nexmark-flink: --latency needs --rate");
            System.exit(2);
        }
        if (latency) {
            events = (long) (rate * duration);
            cfg.interEventDelayUs = 1e6 / rate * timeScale; // event time follows the schedule, timeScale x faster
            cfg.stampEmitNs = true;
        }
        Stats.latency = latency;
        Stats.perRecord = Queries.perRecord(query);
        Stats.wmBoundMs = wmBound;
        Stats.baseTimeMs = cfg.baseTimeMs;
        Stats.delayUs = cfg.interEventDelayUs;
        Stats.rate = rate;
        Stats.warmupNs = (long) (Math.min(2.0, duration / 4) * 1e9);
        Stats.schedNs = rate > 0 ? (long) (events / rate * 1e9) : Long.MAX_VALUE / 4;

        Configuration conf = new Configuration();
        conf.set(StateBackendOptions.STATE_BACKEND, backend);
        conf.set(PipelineOptions.OBJECT_REUSE, true);
        conf.set(TaskManagerOptions.MANAGED_MEMORY_SIZE, MemorySize.parse("512m"));
        if (ckDir != null) {
            conf.set(CheckpointingOptions.CHECKPOINT_STORAGE, "filesystem");
            conf.set(CheckpointingOptions.CHECKPOINTS_DIRECTORY, "file://" + ckDir);
            // kept after the job so that the number of the last completed checkpoint can be read
            conf.set(CheckpointingOptions.EXTERNALIZED_CHECKPOINT_RETENTION,
                    ExternalizedCheckpointRetention.RETAIN_ON_CANCELLATION);
        }
        if (latency) conf.set(PipelineOptions.AUTO_WATERMARK_INTERVAL, Duration.ofMillis(1));
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(p);
        if (ckMs > 0) env.enableCheckpointing(ckMs, CheckpointingMode.EXACTLY_ONCE);
        // latency runs: flush network buffers within 1 ms (default 100 ms), as sluice flushes when idle
        if (latency) env.setBufferTimeout(1);

        NexmarkSource src = new NexmarkSource(cfg, events, 0, rate);
        WatermarkStrategy<Event> wm = WatermarkStrategy.<Event>forBoundedOutOfOrderness(Duration.ofMillis(wmBound))
                .withTimestampAssigner((e, t) -> e.dateTime);
        DataStream<Event> ev = env.fromSource(src, wm, "nexmark").uid("nexmark-source");
        @SuppressWarnings("unchecked")
        DataStream<Queries.Result> out = (DataStream<Queries.Result>) Queries.build(query, ev);
        out.sinkTo(new Queries.ResultSink<>()).name("results").uid("results");

        long w0 = System.nanoTime(), c0 = Stats.processCpuNs();
        env.execute("nexmark-" + query);
        long w1 = System.nanoTime(), c1 = Stats.processCpuNs();
        long ws = NexmarkSource.FIRST_EMIT_NS.get(), cs = NexmarkSource.FIRST_CPU_NS.get();
        if (ws == 0) {
            ws = w0;
            cs = c0;
        }
        double wall = (w1 - ws) / 1e9, cpu = (c1 - cs) / 1e9, wallTotal = (w1 - w0) / 1e9, cpuTotal = (c1 - c0) / 1e9;
        double load1 = java.lang.management.ManagementFactory.getOperatingSystemMXBean().getSystemLoadAverage();
        StringBuilder sb = new StringBuilder();
        sb.append(String.format("engine=flink query=%s backend=%s checkpoint_ms=%d p=%d events=%d wall_s=%.3f cpu_s=%.3f "
                        + "eps=%.0f eps_per_core=%.0f max_rss_mb=%.0f out=%d checksum=%016x job_wall_s=%.3f job_cpu_s=%.3f",
                query, backend, ckMs, p, events, wall, cpu, events / wall, events / cpu, Stats.peakRssMb(), Stats.count,
                Stats.checksum, wallTotal, cpuTotal));
        sb.append(secondHalf(events, w1, c1));
        sb.append(String.format(" checkpoints=%d", lastCheckpoint(ckDir)));
        if (latency)
            sb.append(String.format(" rate=%.0f latency_samples=%d p50_us=%.1f p99_us=%.1f max_us=%.1f", rate,
                    Stats.latCount, Stats.quantile(0.5) / 1e3, Stats.quantile(0.99) / 1e3, Stats.latMax / 1e3));
        sb.append(String.format(" load1=%.2f", load1));
        System.out.println(sb);
        System.exit(0);
    }
}
