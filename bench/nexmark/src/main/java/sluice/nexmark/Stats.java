package sluice.nexmark;

import java.lang.management.ManagementFactory;
import java.nio.file.Files;
import java.nio.file.Paths;

/** Result counts, checksums and latency, merged from every sink writer of the JVM. */
public final class Stats {
    static final int H_SUB = 64, H_BUCKETS = H_SUB + 58 * H_SUB;

    public static long count, checksum, latMax;
    public static final long[] lat = new long[H_BUCKETS];
    public static long latCount;

    /** Latency settings, set by main before the job runs (same JVM as the MiniCluster). */
    public static volatile boolean latency, perRecord;
    public static volatile long wmBoundMs, baseTimeMs, warmupNs, schedNs;
    public static volatile double delayUs, rate;

    /** sl_nexmark_due_ns: when the first event with dateTime >= tMs was due. */
    static long dueNs(long t0, long tMs) {
        double n = Math.ceil((double) (tMs - baseTimeMs) * 1000.0 / delayUs);
        if (n < 0) n = 0;
        return t0 + (long) (n * 1e9 / rate);
    }

    static int hIndex(long v) {
        if (v < 0) v = 0;
        if (v < H_SUB) return (int) v;
        int e = 63 - Long.numberOfLeadingZeros(v);
        return H_SUB + (e - 6) * H_SUB + (int) (v >>> (e - 6)) - H_SUB;
    }

    static double hMid(int i) {
        if (i < H_SUB) return i;
        int e = (i - H_SUB) / H_SUB + 6, sub = (i - H_SUB) % H_SUB;
        return (double) ((long) (H_SUB + sub) << (e - 6)) + (double) (1L << (e - 6)) / 2;
    }

    static synchronized double quantile(double q) {
        if (latCount == 0) return Double.NaN;
        long want = Math.max(1, (long) Math.ceil(q * latCount)), c = 0;
        for (int i = 0; i < H_BUCKETS; i++) {
            c += lat[i];
            if (c >= want) return Math.min(hMid(i), (double) latMax);
        }
        return latMax;
    }

    static synchronized void merge(long n, long sum, long[] h, long hc, long hmax) {
        count += n;
        checksum += sum;
        if (h != null) {
            for (int i = 0; i < H_BUCKETS; i++) lat[i] += h[i];
            latCount += hc;
            latMax = Math.max(latMax, hmax);
        }
    }

    public static long processCpuNs() {
        return ((com.sun.management.OperatingSystemMXBean) ManagementFactory.getOperatingSystemMXBean())
                .getProcessCpuTime();
    }

    /** Peak resident set of the process (VmHWM), MB. */
    public static double peakRssMb() {
        try {
            for (String l : Files.readAllLines(Paths.get("/proc/self/status")))
                if (l.startsWith("VmHWM:")) return Long.parseLong(l.replaceAll("[^0-9]", "")) / 1024.0;
        } catch (Exception e) {
            // fall through
        }
        return -1;
    }
}
