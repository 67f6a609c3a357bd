package sluice.nexmark;

import org.apache.flink.api.connector.source.Boundedness;
import org.apache.flink.api.connector.source.Source;
import org.apache.flink.api.connector.source.SourceReader;
import org.apache.flink.api.connector.source.SourceReaderContext;
import org.apache.flink.api.connector.source.SplitEnumerator;
import org.apache.flink.api.connector.source.SplitEnumeratorContext;
import org.apache.flink.api.connector.source.lib.util.IteratorSourceEnumerator;
import org.apache.flink.api.connector.source.lib.util.IteratorSourceReader;
import org.apache.flink.api.connector.source.lib.util.IteratorSourceSplit;
import org.apache.flink.core.io.SimpleVersionedSerializer;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.DataInputStream;
import java.io.DataOutputStream;
import java.io.IOException;
import java.util.ArrayList;
import java.util.Collection;
import java.util.Iterator;
import java.util.List;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.locks.LockSupport;

/**
 * The Nexmark generator as a FLIP-27 source, split like sluice's: split k of
 * S carries events k, k + S, k + 2S, ... in order; a split's position (the
 * next local index) is checkpointed by the iterator-source machinery.
 *
 * Rate (latency runs): event n is due at FIRST_EMIT_NS + n / rate, the same
 * schedule as sluice's source; the iterator waits for it (parks, then spins
 * the last 50 us).  Flink's RateLimitedSourceReader was not used: its Guava
 * limiter stores up to a second of permits before the first poll and then
 * runs ahead of any fixed schedule.
 */
public class NexmarkSource implements Source<Event, NexmarkSource.Split, Collection<NexmarkSource.Split>> {

    /** First emission (System.nanoTime) of any reader in this JVM: the origin of latency runs' schedule. */
    public static final AtomicLong FIRST_EMIT_NS = new AtomicLong();
    /** Process CPU time (ns) when the first event was generated. */
    public static final AtomicLong FIRST_CPU_NS = new AtomicLong();
    /** When every split of the JVM had emitted half of its events (wall ns, process CPU ns): the
     * origin of the "second half" throughput, which leaves the JIT's warm-up out. */
    public static final AtomicLong HALF_EMIT_NS = new AtomicLong(), HALF_CPU_NS = new AtomicLong();
    static final java.util.concurrent.atomic.AtomicInteger HALF_SPLITS = new java.util.concurrent.atomic.AtomicInteger();

    final NexmarkGenerator.Config cfg;
    final long events;
    final int splits; // 0: one per source subtask
    final double rate; // events/s over all readers; 0: unlimited

    public NexmarkSource(NexmarkGenerator.Config cfg, long events, int splits, double rate) {
        this.cfg = cfg;
        this.events = events;
        this.splits = splits;
        this.rate = rate;
    }

    @Override
    public Boundedness getBoundedness() { return Boundedness.BOUNDED; }

    @Override
    public SourceReader<Event, Split> createReader(SourceReaderContext ctx) {
        return new IteratorSourceReader<>(ctx);
    }

    @Override
    public SplitEnumerator<Split, Collection<Split>> createEnumerator(SplitEnumeratorContext<Split> ctx) {
        int total = splits > 0 ? splits : ctx.currentParallelism();
        List<Split> list = new ArrayList<>();
        for (int k = 0; k < total; k++) {
            long n = k >= events ? 0 : (events - k + total - 1) / total;
            list.add(new Split(cfg, rate, k, total, 0, n));
        }
        return new IteratorSourceEnumerator<>(ctx, list);
    }

    @Override
    public SplitEnumerator<Split, Collection<Split>> restoreEnumerator(SplitEnumeratorContext<Split> ctx,
                                                                      Collection<Split> checkpoint) {
        return new IteratorSourceEnumerator<>(ctx, checkpoint);
    }

    @Override
    public SimpleVersionedSerializer<Split> getSplitSerializer() { return new SplitSerializer(); }

    @Override
    public SimpleVersionedSerializer<Collection<Split>> getEnumeratorCheckpointSerializer() {
        return new CheckpointSerializer();
    }

    /** Split k of total, from local index next (inclusive) to end (exclusive). */
    public static final class Split implements IteratorSourceSplit<Event, It> {
        final NexmarkGenerator.Config cfg;
        final double rate;
        final int k, total;
        final long next, end;

        Split(NexmarkGenerator.Config cfg, double rate, int k, int total, long next, long end) {
            this.cfg = cfg;
            this.rate = rate;
            this.k = k;
            this.total = total;
            this.next = next;
            this.end = end;
        }

        @Override
        public String splitId() { return Integer.toString(k); }

        @Override
        public It getIterator() { return new It(this); }

        @Override
        public IteratorSourceSplit<Event, It> getUpdatedSplitForIterator(It it) {
            return new Split(cfg, rate, k, total, it.next, end);
        }
    }

    public static final class It implements Iterator<Event> {
        final NexmarkGenerator gen;
        final boolean stamp;
        final double nsPerEvent; // 0: no rate
        final int k, total;
        long next;
        final long end;

        It(Split s) {
            gen = NexmarkGenerator.of(s.cfg);
            stamp = s.cfg.stampEmitNs;
            nsPerEvent = s.rate > 0 ? 1e9 / s.rate : 0;
            k = s.k;
            total = s.total;
            next = s.next;
            end = s.end;
        }

        @Override
        public boolean hasNext() { return next < end; }

        @Override
        public Event next() {
            if (FIRST_CPU_NS.get() == 0) {
                long now = System.nanoTime();
                FIRST_EMIT_NS.compareAndSet(0, now);
                FIRST_CPU_NS.compareAndSet(0, Stats.processCpuNs());
            }
            long n = k + next * (long) total;
            if (nsPerEvent > 0) {
                long due = FIRST_EMIT_NS.get() + (long) (n * nsPerEvent);
                for (long now = System.nanoTime(); now < due; now = System.nanoTime())
                    if (due - now > 60_000) LockSupport.parkNanos(due - now - 50_000);
            }
            Event e = new Event();
            gen.event(n, e);
            if (next == end / 2 && HALF_SPLITS.incrementAndGet() == total) {
                HALF_EMIT_NS.set(System.nanoTime());
                HALF_CPU_NS.set(Stats.processCpuNs());
            }
            next++;
            if (stamp) e.emitNs = System.nanoTime();
            return e;
        }
    }

    static void writeCfg(DataOutputStream o, NexmarkGenerator.Config c) throws IOException {
        o.writeLong(c.seed);
        o.writeLong(c.baseTimeMs);
        o.writeDouble(c.interEventDelayUs);
        o.writeInt(c.numActivePeople);
        o.writeInt(c.numInFlightAuctions);
        o.writeInt(c.hotAuctionRatio);
        o.writeInt(c.hotSellersRatio);
        o.writeInt(c.hotBiddersRatio);
        o.writeBoolean(c.stampEmitNs);
    }

    static NexmarkGenerator.Config readCfg(DataInputStream in) throws IOException {
        NexmarkGenerator.Config c = new NexmarkGenerator.Config();
        c.seed = in.readLong();
        c.baseTimeMs = in.readLong();
        c.interEventDelayUs = in.readDouble();
        c.numActivePeople = in.readInt();
        c.numInFlightAuctions = in.readInt();
        c.hotAuctionRatio = in.readInt();
        c.hotSellersRatio = in.readInt();
        c.hotBiddersRatio = in.readInt();
        c.stampEmitNs = in.readBoolean();
        return c;
    }

    static void writeSplit(DataOutputStream o, Split s) throws IOException {
        writeCfg(o, s.cfg);
        o.writeDouble(s.rate);
        o.writeInt(s.k);
        o.writeInt(s.total);
        o.writeLong(s.next);
        o.writeLong(s.end);
    }

    static Split readSplit(DataInputStream in) throws IOException {
        NexmarkGenerator.Config c = readCfg(in);
        double rate = in.readDouble();
        int k = in.readInt(), total = in.readInt();
        long next = in.readLong(), end = in.readLong();
        return new Split(c, rate, k, total, next, end);
    }

    static final class SplitSerializer implements SimpleVersionedSerializer<Split> {
        @Override
        public int getVersion() { return 1; }

        @Override
        public byte[] serialize(Split s) throws IOException {
            ByteArrayOutputStream b = new ByteArrayOutputStream();
            try (DataOutputStream o = new DataOutputStream(b)) {
                writeSplit(o, s);
            }
            return b.toByteArray();
        }

        @Override
        public Split deserialize(int version, byte[] bytes) throws IOException {
            return readSplit(new DataInputStream(new ByteArrayInputStream(bytes)));
        }
    }

    static final class CheckpointSerializer implements SimpleVersionedSerializer<Collection<Split>> {
        @Override
        public int getVersion() { return 1; }

        @Override
        public byte[] serialize(Collection<Split> splits) throws IOException {
            ByteArrayOutputStream b = new ByteArrayOutputStream();
            try (DataOutputStream o = new DataOutputStream(b)) {
                o.writeInt(splits.size());
                for (Split s : splits) writeSplit(o, s);
            }
            return b.toByteArray();
        }

        @Override
        public Collection<Split> deserialize(int version, byte[] bytes) throws IOException {
            DataInputStream in = new DataInputStream(new ByteArrayInputStream(bytes));
            int n = in.readInt();
            List<Split> l = new ArrayList<>(n);
            for (int i = 0; i < n; i++) l.add(readSplit(in));
            return l;
        }
    }
}
