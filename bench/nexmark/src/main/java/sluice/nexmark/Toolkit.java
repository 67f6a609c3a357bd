package sluice.nexmark;

import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.cep.CEP;
import org.apache.flink.cep.functions.PatternProcessFunction;
import org.apache.flink.cep.nfa.aftermatch.AfterMatchSkipStrategy;
import org.apache.flink.cep.pattern.Pattern;
import org.apache.flink.cep.pattern.conditions.SimpleCondition;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.functions.co.ProcessJoinFunction;
import org.apache.flink.util.Collector;

import java.time.Duration;
import java.util.List;
import java.util.Map;

import static sluice.nexmark.NexmarkGenerator.field;

/**
 * Two queries beyond Nexmark that measure the DataStream toolkit, written
 * the same way on sluice (examples/nexmark/ij.c, cep.c):
 *
 * ij  — interval join: every bid joined with its auction when the bid comes
 *       at most IJ_UPPER_MS after the auction (auction.dateTime <=
 *       bid.dateTime <= auction.dateTime + IJ_UPPER_MS, both inclusive);
 *       one row (auction, seller, bidder, price, bid time) per pair.
 * cep — FlinkCEP per bidder: a bid below CEP_CHEAP followed (relaxed
 *       contiguity) by a bid above CEP_DEAR within CEP_WITHIN_MS, skipping
 *       past the last event of each match; one row (bidder, cheap time,
 *       dear time, dear price) per match.
 */
public final class Toolkit {
    public static final long IJ_UPPER_MS = 1000;
    public static final long CEP_CHEAP = 10_000, CEP_DEAR = 1_000_000, CEP_WITHIN_MS = 1000;

    private Toolkit() {}

    public static DataStream<? extends Queries.Result> build(String q, DataStream<Event> ev) {
        switch (q) {
            case "ij": return ij(ev);
            case "cep": return cep(ev);
            default: throw new IllegalArgumentException("unknown query " + q);
        }
    }

    // ---- ij ------------------------------------------------------------------

    public static class IjRow implements Queries.Result {
        public long auction, seller, bidder, price, dateTime;

        public IjRow() {}

        public long hash() { return field(0, auction) + field(1, seller) + field(2, bidder) + field(3, price) + field(4, dateTime); }
    }

    static class IjJoin extends ProcessJoinFunction<Event, Event, IjRow> {
        @Override
        public void processElement(Event a, Event b, Context ctx, Collector<IjRow> out) {
            IjRow r = new IjRow();
            r.auction = a.auctionId;
            r.seller = a.seller;
            r.bidder = b.bidder;
            r.price = b.price;
            r.dateTime = b.dateTime;
            out.collect(r);
        }
    }

    static DataStream<IjRow> ij(DataStream<Event> ev) {
        DataStream<Event> auctions = ev.filter(e -> e.type == Event.AUCTION).name("auctions");
        DataStream<Event> bids = ev.filter(e -> e.type == Event.BID).name("bids");
        return auctions.keyBy(e -> e.auctionId, Types.LONG)
                .intervalJoin(bids.keyBy(e -> e.bidAuction, Types.LONG))
                .between(Duration.ZERO, Duration.ofMillis(IJ_UPPER_MS))
                .process(new IjJoin()).returns(IjRow.class).name("ij").uid("ij-interval-join");
    }

    // ---- cep -----------------------------------------------------------------

    public static class CepRow implements Queries.Result {
        public long bidder, cheapTime, dearTime, price;

        public CepRow() {}

        public long hash() { return field(0, bidder) + field(1, cheapTime) + field(2, dearTime) + field(3, price); }
    }

    static class CepSelect extends PatternProcessFunction<Event, CepRow> {
        @Override
        public void processMatch(Map<String, List<Event>> match, Context ctx, Collector<CepRow> out) {
            Event cheap = match.get("cheap").get(0), dear = match.get("dear").get(0);
            CepRow r = new CepRow();
            r.bidder = dear.bidder;
            r.cheapTime = cheap.dateTime;
            r.dearTime = dear.dateTime;
            r.price = dear.price;
            out.collect(r);
        }
    }

    static DataStream<CepRow> cep(DataStream<Event> ev) {
        Pattern<Event, Event> p = Pattern.<Event>begin("cheap", AfterMatchSkipStrategy.skipPastLastEvent())
                .where(SimpleCondition.of(e -> e.price < CEP_CHEAP))
                .followedBy("dear").where(SimpleCondition.of(e -> e.price > CEP_DEAR))
                .within(Duration.ofMillis(CEP_WITHIN_MS));
        return CEP.pattern(ev.filter(e -> e.type == Event.BID).name("bids").keyBy(e -> e.bidder, Types.LONG), p)
                .process(new CepSelect()).returns(CepRow.class).name("cep").uid("cep-pattern");
    }
}
