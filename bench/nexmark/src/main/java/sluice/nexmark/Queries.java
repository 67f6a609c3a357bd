package sluice.nexmark;

import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ListState;
import org.apache.flink.api.common.state.ListStateDescriptor;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.streaming.api.functions.co.KeyedCoProcessFunction;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.assigners.EventTimeSessionWindows;
import org.apache.flink.streaming.api.windowing.assigners.SlidingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.util.Collector;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;

import static sluice.nexmark.NexmarkGenerator.field;
import static sluice.nexmark.NexmarkGenerator.text;

/**
 * The Nexmark queries of sluice's examples/nexmark/ on Flink's DataStream
 * API, operator for operator (see the comments there for the SQL).  Each
 * result type hashes its fields like sluice's nx_row_hash (schema order,
 * emit_ns and order-dependent fields left out).
 */
public final class Queries {
    public static final long WINDOW_MS = 10000, SLIDE_MS = 2000, SESSION_GAP_MS = 10000, Q4_RETENTION_MS = 1000;

    /** An output row. */
    public interface Result {
        long hash();

        default long emitNs() { return Event.NO_EMIT; }
    }

    public static DataStream<? extends Result> build(String q, DataStream<Event> ev) {
        switch (q) {
            case "q0": return q0(ev);
            case "q1": return q1(ev);
            case "q2": return q2(ev);
            case "q3": return q3(ev);
            case "q4": return q4(ev);
            case "q5": return q5(ev);
            case "q7": return q7(ev);
            case "q8": return q8(ev);
            case "q11": return q11(ev);
            default: return Toolkit.build(q, ev);
        }
    }

    public static boolean perRecord(String q) {
        return q.equals("q0") || q.equals("q1") || q.equals("q2") || q.equals("q3");
    }

    // ---- q0, q1, q2 ------------------------------------------------------------

    public static class BidRow implements Result {
        public long auction, bidder, price, dateTime, emitNs;
        public String channel, url;

        public BidRow() {}

        BidRow(Event e) {
            auction = e.bidAuction;
            bidder = e.bidder;
            price = e.price;
            channel = e.channel;
            url = e.url;
            dateTime = e.dateTime;
            emitNs = e.emitNs;
        }

        public long hash() {
            return field(0, auction) + field(1, bidder) + field(2, price) + field(3, text(channel))
                    + field(4, text(url)) + field(5, dateTime);
        }

        public long emitNs() { return emitNs; }
    }

    public static class EuroBidRow implements Result {
        public long auction, bidder, dateTime, emitNs;
        public double price;
        public String channel, url;

        public EuroBidRow() {}

        public long hash() {
            return field(0, auction) + field(1, bidder) + field(2, Double.doubleToRawLongBits(price))
                    + field(3, text(channel)) + field(4, text(url)) + field(5, dateTime);
        }

        public long emitNs() { return emitNs; }
    }

    public static class Q2Row implements Result {
        public long auction, price, emitNs;

        public Q2Row() {}

        public long hash() { return field(0, auction) + field(1, price); }

        public long emitNs() { return emitNs; }
    }

    static DataStream<BidRow> q0(DataStream<Event> ev) {
        return ev.filter(e -> e.type == Event.BID).name("bids").map(BidRow::new).returns(BidRow.class).name("q0");
    }

    static DataStream<EuroBidRow> q1(DataStream<Event> ev) {
        return ev.filter(e -> e.type == Event.BID).name("bids").map(e -> {
            EuroBidRow r = new EuroBidRow();
            r.auction = e.bidAuction;
            r.bidder = e.bidder;
            r.price = (double) e.price * 0.908;
            r.channel = e.channel;
            r.url = e.url;
            r.dateTime = e.dateTime;
            r.emitNs = e.emitNs;
            return r;
        }).returns(EuroBidRow.class).name("q1");
    }

    static DataStream<Q2Row> q2(DataStream<Event> ev) {
        return ev.filter(e -> e.type == Event.BID && e.bidAuction % 123 == 0).name("auction % 123 == 0").map(e -> {
            Q2Row r = new Q2Row();
            r.auction = e.bidAuction;
            r.price = e.price;
            r.emitNs = e.emitNs;
            return r;
        }).returns(Q2Row.class).name("q2");
    }

    // ---- q3 ------------------------------------------------------------------

    public static class Q3Row implements Result {
        public String name, city, state;
        public long id, emitNs;

        public Q3Row() {}

        Q3Row(String[] p, long id, long emitNs) {
            name = p[0];
            city = p[1];
            state = p[2];
            this.id = id;
            this.emitNs = emitNs;
        }

        public long hash() { return field(0, text(name)) + field(1, text(city)) + field(2, text(state)) + field(3, id); }

        public long emitNs() { return emitNs; }
    }

    static class Q3Join extends KeyedCoProcessFunction<Long, Event, Event, Q3Row> {
        transient ValueState<String[]> person;
        transient ListState<long[]> pending;

        @Override
        public void open(OpenContext ctx) {
            person = getRuntimeContext().getState(new ValueStateDescriptor<>("person", String[].class));
            pending = getRuntimeContext().getListState(new ListStateDescriptor<>("pending-auctions", long[].class));
        }

        @Override
        public void processElement1(Event a, Context ctx, Collector<Q3Row> out) throws Exception {
            String[] p = person.value();
            if (p != null) out.collect(new Q3Row(p, a.auctionId, a.emitNs));
            else pending.add(new long[] {a.auctionId, a.emitNs});
        }

        @Override
        public void processElement2(Event p, Context ctx, Collector<Q3Row> out) throws Exception {
            String[] v = {p.personName, p.personCity, p.personState};
            person.update(v);
            boolean any = false;
            for (long[] a : pending.get()) {
                out.collect(new Q3Row(v, a[0], p.emitNs));
                any = true;
            }
            if (any) pending.clear();
        }
    }

    static DataStream<Q3Row> q3(DataStream<Event> ev) {
        DataStream<Event> auctions = ev.filter(e -> e.type == Event.AUCTION && e.category == 10)
                .name("auctions of category 10");
        DataStream<Event> persons = ev.filter(e -> e.type == Event.PERSON
                && (e.personState.equals("OR") || e.personState.equals("ID") || e.personState.equals("CA")))
                .name("persons in OR, ID, CA");
        return auctions.keyBy(e -> e.seller, Types.LONG).connect(persons.keyBy(e -> e.personId, Types.LONG))
                .process(new Q3Join()).returns(Q3Row.class).name("q3").uid("q3-join");
    }

    // ---- q4 ------------------------------------------------------------------

    public static class Q4Final {
        public long auction, category, fin;

        public Q4Final() {}
    }

    public static class Q4Row implements Result {
        public long category, auctions;
        public double avg;

        public Q4Row() {}

        public long hash() { return field(0, category) + field(1, auctions); } // avg depends on arrival order
    }

    /** Auction state: {dateTime, expires, category, maxPrice (-1: none), closed}. */
    static class Q4Winning extends KeyedProcessFunction<Long, Event, Q4Final> {
        transient ValueState<long[]> auction;
        transient ListState<long[]> early; // {ts, price}

        @Override
        public void open(OpenContext ctx) {
            auction = getRuntimeContext().getState(new ValueStateDescriptor<>("auction", long[].class));
            early = getRuntimeContext().getListState(new ListStateDescriptor<>("early-bids", long[].class));
        }

        @Override
        public void processElement(Event e, Context ctx, Collector<Q4Final> out) throws Exception {
            if (e.type == Event.AUCTION) {
                long[] a = {e.dateTime, e.expires, e.category, -1, 0};
                boolean any = false;
                for (long[] b : early.get()) {
                    any = true;
                    if (b[0] >= a[0] && b[0] <= a[1] && b[1] > a[3]) a[3] = b[1];
                }
                if (any) early.clear();
                ctx.timerService().registerEventTimeTimer(a[1]);
                auction.update(a);
                return;
            }
            long[] a = auction.value();
            if (a != null) {
                if (a[4] == 0 && e.dateTime >= a[0] && e.dateTime <= a[1] && e.price > a[3]) {
                    a[3] = e.price;
                    auction.update(a);
                }
                return;
            }
            ctx.timerService().registerEventTimeTimer(e.dateTime);
            early.add(new long[] {e.dateTime, e.price});
        }

        @Override
        public void onTimer(long ts, OnTimerContext ctx, Collector<Q4Final> out) throws Exception {
            long[] a = auction.value();
            if (a != null) {
                if (a[4] == 0 && ts >= a[1]) {
                    if (a[3] >= 0) {
                        Q4Final f = new Q4Final();
                        f.auction = ctx.getCurrentKey();
                        f.category = a[2];
                        f.fin = a[3];
                        out.collect(f);
                    }
                    a[4] = 1;
                    ctx.timerService().registerEventTimeTimer(a[1] + Q4_RETENTION_MS);
                    auction.update(a);
                } else if (a[4] != 0 && ts >= a[1] + Q4_RETENTION_MS) {
                    auction.clear();
                }
                return;
            }
            List<long[]> keep = new ArrayList<>();
            int n = 0;
            for (long[] b : early.get()) {
                n++;
                if (b[0] > ts) keep.add(b);
            }
            if (n > 0 && keep.size() < n) early.update(keep);
        }
    }

    static class Q4Average extends KeyedProcessFunction<Long, Q4Final, Q4Row> {
        transient ValueState<long[]> acc; // {sum, count}

        @Override
        public void open(OpenContext ctx) {
            acc = getRuntimeContext().getState(new ValueStateDescriptor<>("sum-count", long[].class));
        }

        @Override
        public void processElement(Q4Final f, Context ctx, Collector<Q4Row> out) throws Exception {
            long[] a = acc.value();
            if (a == null) a = new long[2];
            a[0] += f.fin;
            a[1]++;
            acc.update(a);
            Q4Row r = new Q4Row();
            r.category = f.category;
            r.avg = (double) a[0] / (double) a[1];
            r.auctions = a[1];
            out.collect(r);
        }
    }

    static DataStream<Q4Row> q4(DataStream<Event> ev) {
        DataStream<Q4Final> finals = ev.filter(e -> e.type == Event.AUCTION || e.type == Event.BID)
                .name("auctions and bids")
                .keyBy(e -> e.type == Event.AUCTION ? e.auctionId : e.bidAuction, Types.LONG)
                .process(new Q4Winning()).returns(Q4Final.class).name("q4 winning bids").uid("q4-winning-bids");
        return finals.keyBy(f -> f.category, Types.LONG).process(new Q4Average()).returns(Q4Row.class).name("q4")
                .uid("q4-average");
    }

    // ---- q5 ------------------------------------------------------------------

    public static class Q5Row implements Result {
        public long auction, num, start, end;

        public Q5Row() {}

        Q5Row(long auction, long num, long start, long end) {
            this.auction = auction;
            this.num = num;
            this.start = start;
            this.end = end;
        }

        public long hash() { return field(0, auction) + field(1, num) + field(2, start) + field(3, end); }
    }

    static class Count implements AggregateFunction<Event, long[], Long> {
        public long[] createAccumulator() { return new long[1]; }

        public long[] add(Event e, long[] a) {
            a[0]++;
            return a;
        }

        public Long getResult(long[] a) { return a[0]; }

        public long[] merge(long[] a, long[] b) {
            a[0] += b[0];
            return a;
        }
    }

    static class Q5Counts extends ProcessWindowFunction<Long, Q5Row, Long, TimeWindow> {
        @Override
        public void process(Long key, Context ctx, Iterable<Long> counts, Collector<Q5Row> out) {
            for (Long n : counts) out.collect(new Q5Row(key, n, ctx.window().getStart(), ctx.window().getEnd()));
        }
    }

    static class Q5Top extends KeyedProcessFunction<Long, Q5Row, Q5Row> {
        transient ValueState<Long> max;
        transient ListState<Long> top;

        @Override
        public void open(OpenContext ctx) {
            max = getRuntimeContext().getState(new ValueStateDescriptor<>("max-count", Long.class));
            top = getRuntimeContext().getListState(new ListStateDescriptor<>("top-auctions", Long.class));
        }

        @Override
        public void processElement(Q5Row r, Context ctx, Collector<Q5Row> out) throws Exception {
            Long m = max.value();
            if (m == null) ctx.timerService().registerEventTimeTimer(r.end - 1);
            if (m == null || r.num > m) {
                top.clear();
                max.update(r.num);
            } else if (r.num < m) {
                return;
            }
            top.add(r.auction);
        }

        @Override
        public void onTimer(long ts, OnTimerContext ctx, Collector<Q5Row> out) throws Exception {
            Long m = max.value();
            if (m == null) return;
            for (Long a : top.get()) out.collect(new Q5Row(a, m, ts + 1 - WINDOW_MS, ts + 1));
            top.clear();
            max.clear();
        }
    }

    static DataStream<Q5Row> q5(DataStream<Event> ev) {
        DataStream<Q5Row> counts = ev.filter(e -> e.type == Event.BID).name("bids")
                .keyBy(e -> e.bidAuction, Types.LONG)
                .window(SlidingEventTimeWindows.of(Duration.ofMillis(WINDOW_MS), Duration.ofMillis(SLIDE_MS)))
                .aggregate(new Count(), new Q5Counts()).name("q5 bids per auction").uid("q5-counts");
        return counts.keyBy(r -> r.end, Types.LONG).process(new Q5Top()).returns(Q5Row.class).name("q5")
                .uid("q5-hot-items");
    }

    // ---- q7 ------------------------------------------------------------------

    static final int Q7_MAX_TIES = 4;

    public static class Q7Partial {
        public long auction, price, end;
        public long[] ties; // bidder, ts pairs

        public Q7Partial() {}
    }

    public static class Q7Row implements Result {
        public long auction, price, bidder, dateTime;

        public Q7Row() {}

        public long hash() { return field(0, auction) + field(1, price) + field(2, bidder) + field(3, dateTime); }
    }

    /** Accumulator: {maxPrice (-1: empty), n, overflow, bidder0, ts0, ... bidder3, ts3}. */
    static class Highest implements AggregateFunction<Event, long[], long[]> {
        public long[] createAccumulator() {
            long[] a = new long[3 + 2 * Q7_MAX_TIES];
            a[0] = -1;
            return a;
        }

        public long[] add(Event e, long[] a) {
            if (e.price < a[0]) return a;
            if (e.price > a[0]) {
                a[0] = e.price;
                a[1] = 0;
            }
            if (a[1] == Q7_MAX_TIES) {
                a[2] = 1;
                return a;
            }
            int i = (int) a[1];
            a[3 + 2 * i] = e.bidder;
            a[4 + 2 * i] = e.dateTime;
            a[1]++;
            return a;
        }

        public long[] getResult(long[] a) { return a; }

        public long[] merge(long[] a, long[] b) { throw new UnsupportedOperationException(); }
    }

    static class Q7PerAuction extends ProcessWindowFunction<long[], Q7Partial, Long, TimeWindow> {
        @Override
        public void process(Long key, Context ctx, Iterable<long[]> accs, Collector<Q7Partial> out) {
            for (long[] a : accs) {
                if (a[2] != 0)
                    throw new IllegalStateException("q7: more than " + Q7_MAX_TIES + " bids on auction " + key
                            + " share its highest price in window " + ctx.window());
                Q7Partial p = new Q7Partial();
                p.auction = key;
                p.price = a[0];
                p.end = ctx.window().getEnd();
                p.ties = new long[(int) (2 * a[1])];
                System.arraycopy(a, 3, p.ties, 0, p.ties.length);
                out.collect(p);
            }
        }
    }

    static class Q7Top extends KeyedProcessFunction<Long, Q7Partial, Q7Row> {
        transient ValueState<Long> max;
        transient ListState<long[]> top; // {auction, bidder, ts}

        @Override
        public void open(OpenContext ctx) {
            max = getRuntimeContext().getState(new ValueStateDescriptor<>("max-price", Long.class));
            top = getRuntimeContext().getListState(new ListStateDescriptor<>("top-bids", long[].class));
        }

        @Override
        public void processElement(Q7Partial p, Context ctx, Collector<Q7Row> out) throws Exception {
            Long m = max.value();
            if (m == null) ctx.timerService().registerEventTimeTimer(p.end - 1);
            if (m == null || p.price > m) {
                top.clear();
                max.update(p.price);
            } else if (p.price < m) {
                return;
            }
            for (int i = 0; i + 1 < p.ties.length; i += 2) top.add(new long[] {p.auction, p.ties[i], p.ties[i + 1]});
        }

        @Override
        public void onTimer(long ts, OnTimerContext ctx, Collector<Q7Row> out) throws Exception {
            Long m = max.value();
            if (m == null) return;
            for (long[] b : top.get()) {
                Q7Row r = new Q7Row();
                r.auction = b[0];
                r.price = m;
                r.bidder = b[1];
                r.dateTime = b[2];
                out.collect(r);
            }
            top.clear();
            max.clear();
        }
    }

    static DataStream<Q7Row> q7(DataStream<Event> ev) {
        DataStream<Q7Partial> perAuction = ev.filter(e -> e.type == Event.BID).name("bids")
                .keyBy(e -> e.bidAuction, Types.LONG)
                .window(TumblingEventTimeWindows.of(Duration.ofMillis(WINDOW_MS)))
                .aggregate(new Highest(), new Q7PerAuction()).name("q7 highest bid per auction").uid("q7-per-auction");
        return perAuction.keyBy(p -> p.end, Types.LONG).process(new Q7Top()).returns(Q7Row.class).name("q7")
                .uid("q7-highest-bid");
    }

    // ---- q8 ------------------------------------------------------------------

    public static class Q8Acc {
        public boolean person, auction;
        public String name = "";

        public Q8Acc() {}
    }

    public static class Q8Row implements Result {
        public long id, start;
        public String name;
        public boolean matched;

        public Q8Row() {}

        public long hash() { return field(0, id) + field(1, text(name)) + field(2, start); }
    }

    static class Seen implements AggregateFunction<Event, Q8Acc, Q8Acc> {
        public Q8Acc createAccumulator() { return new Q8Acc(); }

        public Q8Acc add(Event e, Q8Acc a) {
            if (e.type == Event.AUCTION) {
                a.auction = true;
            } else {
                a.person = true;
                a.name = e.personName;
            }
            return a;
        }

        public Q8Acc getResult(Q8Acc a) { return a; }

        public Q8Acc merge(Q8Acc a, Q8Acc b) { throw new UnsupportedOperationException(); }
    }

    static class Q8Window extends ProcessWindowFunction<Q8Acc, Q8Row, Long, TimeWindow> {
        @Override
        public void process(Long key, Context ctx, Iterable<Q8Acc> accs, Collector<Q8Row> out) {
            for (Q8Acc a : accs) {
                Q8Row r = new Q8Row();
                r.id = key;
                r.name = a.name;
                r.start = ctx.window().getStart();
                r.matched = a.person && a.auction;
                out.collect(r);
            }
        }
    }

    static DataStream<Q8Row> q8(DataStream<Event> ev) {
        return ev.filter(e -> e.type == Event.PERSON || e.type == Event.AUCTION).name("persons and auctions")
                .keyBy(e -> e.type == Event.PERSON ? e.personId : e.seller, Types.LONG)
                .window(TumblingEventTimeWindows.of(Duration.ofMillis(WINDOW_MS)))
                .aggregate(new Seen(), new Q8Window()).name("q8 window join").uid("q8-window-join")
                .filter(r -> r.matched).name("q8 matched")
                .map(r -> r).returns(Q8Row.class).name("q8");
    }

    // ---- q11 -----------------------------------------------------------------

    public static class Q11Row implements Result {
        public long bidder, count, start, end;

        public Q11Row() {}

        public long hash() { return field(0, bidder) + field(1, count) + field(2, start) + field(3, end); }
    }

    static class Q11Session extends ProcessWindowFunction<Long, Q11Row, Long, TimeWindow> {
        @Override
        public void process(Long key, Context ctx, Iterable<Long> counts, Collector<Q11Row> out) {
            for (Long n : counts) {
                Q11Row r = new Q11Row();
                r.bidder = key;
                r.count = n;
                r.start = ctx.window().getStart();
                r.end = ctx.window().getEnd();
                out.collect(r);
            }
        }
    }

    static DataStream<Q11Row> q11(DataStream<Event> ev) {
        return ev.filter(e -> e.type == Event.BID).name("bids").keyBy(e -> e.bidder, Types.LONG)
                .window(EventTimeSessionWindows.withGap(Duration.ofMillis(SESSION_GAP_MS)))
                .aggregate(new Count(), new Q11Session()).name("q11").uid("q11-sessions");
    }

    // ---- the result sink ----------------------------------------------------------

    /** Counts results, sums their hashes and measures latency per writer; merged into Stats on close. */
    public static class ResultSink<T extends Result> implements Sink<T> {
        @Override
        public SinkWriter<T> createWriter(WriterInitContext ctx) {
            return new Writer<>();
        }
    }

    static class Writer<T extends Result> implements SinkWriter<T> {
        long count, checksum, hmax, hcount;
        final long[] hist = Stats.latency ? new long[Stats.H_BUCKETS] : null;

        @Override
        public void write(T r, Context ctx) {
            count++;
            checksum += r.hash();
            if (hist == null) return;
            long ref;
            if (Stats.perRecord) {
                ref = r.emitNs();
                if (ref == Event.NO_EMIT) return;
            } else {
                Long ts = ctx.timestamp();
                if (ts == null || ts >= Long.MAX_VALUE / 2) return;
                ref = Stats.dueNs(NexmarkSource.FIRST_EMIT_NS.get(), ts + Stats.wmBoundMs + 1);
            }
            long t0 = NexmarkSource.FIRST_EMIT_NS.get();
            if (ref < t0 + Stats.warmupNs || ref > t0 + Stats.schedNs) return; // warm-up; fired by the end of input
            long v = System.nanoTime() - ref;
            hist[Stats.hIndex(v)]++;
            hcount++;
            if (v > hmax) hmax = v;
        }

        @Override
        public void flush(boolean endOfInput) {}

        @Override
        public void close() {
            Stats.merge(count, checksum, hist, hcount, hmax);
        }
    }
}
