package sluice.sql;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.configuration.ConfigOptions;
import org.apache.flink.configuration.ReadableConfig;
import org.apache.flink.streaming.api.datastream.DataStream;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.table.api.ValidationException;
import org.apache.flink.table.connector.ChangelogMode;
import org.apache.flink.table.connector.ProviderContext;
import org.apache.flink.table.connector.source.DataStreamScanProvider;
import org.apache.flink.table.connector.source.DynamicTableSource;
import org.apache.flink.table.connector.source.ScanTableSource;
import org.apache.flink.table.data.GenericRowData;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.data.StringData;
import org.apache.flink.table.data.TimestampData;
import org.apache.flink.table.factories.DynamicTableSourceFactory;
import org.apache.flink.table.factories.FactoryUtil;
import sluice.nexmark.Event;
import sluice.nexmark.NexmarkGenerator;
import sluice.nexmark.NexmarkSource;

import java.util.HashSet;
import java.util.Set;

/**
 * The 'nexmark' table connector: the official Nexmark DDL's table (event_type,
 * person, auction, bid ROW columns) over sluice's shared Nexmark generator
 * (bench/nexmark's Java port, bit-identical to src/connectors/nexmark.c).
 * The planner needs it to compile a plan; on Flink it runs the generator
 * (bounded: 'events.num' events), which makes the reference of the SQL tests.
 * Options are those of Flink's nexmark connector that the generator honours;
 * the rate defines event time (inter-event delay = 1e6 / rate us), as in
 * Nexmark, and does not throttle.  sluice's executor (src/sql/) reads the
 * same options from the compiled plan.
 */
public class NexmarkTableFactory implements DynamicTableSourceFactory {
    static final ConfigOption<Long> EVENTS = ConfigOptions.key("events.num").longType().defaultValue(100_000_000L);
    static final ConfigOption<Double> FIRST_RATE = ConfigOptions.key("first-event.rate").doubleType().defaultValue(10_000_000.0);
    static final ConfigOption<Double> NEXT_RATE = ConfigOptions.key("next-event.rate").doubleType().defaultValue(10_000_000.0);
    static final ConfigOption<Integer> PERSON_P = ConfigOptions.key("person.proportion").intType().defaultValue(1);
    static final ConfigOption<Integer> AUCTION_P = ConfigOptions.key("auction.proportion").intType().defaultValue(3);
    static final ConfigOption<Integer> BID_P = ConfigOptions.key("bid.proportion").intType().defaultValue(46);
    static final ConfigOption<Long> SEED = ConfigOptions.key("seed").longType().defaultValue(42L);
    static final ConfigOption<Long> BASE_TIME = ConfigOptions.key("base-time.ms").longType().defaultValue(1767225600000L);

    @Override
    public String factoryIdentifier() { return "nexmark"; }

    @Override
    public Set<ConfigOption<?>> requiredOptions() { return new HashSet<>(); }

    @Override
    public Set<ConfigOption<?>> optionalOptions() {
        Set<ConfigOption<?>> s = new HashSet<>();
        s.add(EVENTS); s.add(FIRST_RATE); s.add(NEXT_RATE); s.add(PERSON_P); s.add(AUCTION_P); s.add(BID_P);
        s.add(SEED); s.add(BASE_TIME);
        return s;
    }

    @Override
    public DynamicTableSource createDynamicTableSource(Context context) {
        FactoryUtil.TableFactoryHelper helper = FactoryUtil.createTableFactoryHelper(this, context);
        helper.validate();
        ReadableConfig o = helper.getOptions();
        if (o.get(PERSON_P) != 1 || o.get(AUCTION_P) != 3 || o.get(BID_P) != 46)
            throw new ValidationException("nexmark: only the proportions 1:3:46 (person:auction:bid) are supported");
        if (!o.get(FIRST_RATE).equals(o.get(NEXT_RATE)))
            throw new ValidationException("nexmark: 'next-event.rate' must equal 'first-event.rate'");
        if (!(o.get(FIRST_RATE) > 0)) throw new ValidationException("nexmark: 'first-event.rate' must be > 0");
        NexmarkGenerator.Config cfg = new NexmarkGenerator.Config();
        cfg.seed = o.get(SEED);
        cfg.baseTimeMs = o.get(BASE_TIME);
        cfg.interEventDelayUs = 1e6 / o.get(FIRST_RATE);
        return new Scan(cfg, o.get(EVENTS));
    }

    static final class Scan implements ScanTableSource {
        final NexmarkGenerator.Config cfg;
        final long events;

        Scan(NexmarkGenerator.Config cfg, long events) { this.cfg = cfg; this.events = events; }

        @Override
        public ChangelogMode getChangelogMode() { return ChangelogMode.insertOnly(); }

        @Override
        public ScanRuntimeProvider getScanRuntimeProvider(ScanContext ctx) {
            final NexmarkGenerator.Config c = cfg;
            final long n = events;
            return new DataStreamScanProvider() {
                @Override
                public DataStream<RowData> produceDataStream(ProviderContext pc, StreamExecutionEnvironment env) {
                    return env.fromSource(new NexmarkSource(c, n, 0, 0), WatermarkStrategy.noWatermarks(), "nexmark")
                            .map(Scan::toRow).returns(RowData.class);
                }

                @Override
                public boolean isBounded() { return true; }
            };
        }

        static StringData s(String v) { return v == null ? null : StringData.fromString(v); }

        static TimestampData ts(long ms) { return TimestampData.fromEpochMillis(ms); }

        /** One event as the DDL's row; the padding column 'extra' is NULL (the generator has none). */
        static RowData toRow(Event e) {
            GenericRowData r = new GenericRowData(4);
            r.setField(0, e.type);
            if (e.type == Event.PERSON) {
                r.setField(1, GenericRowData.of(e.personId, s(e.personName), s(e.personEmail), s(e.personCreditCard),
                        s(e.personCity), s(e.personState), ts(e.dateTime), null));
            } else if (e.type == Event.AUCTION) {
                r.setField(2, GenericRowData.of(e.auctionId, s(e.itemName), s(e.description), e.initialBid, e.reserve,
                        ts(e.dateTime), ts(e.expires), e.seller, e.category, null));
            } else {
                r.setField(3, GenericRowData.of(e.bidAuction, e.bidder, e.price, s(e.channel), s(e.url), ts(e.dateTime),
                        null));
            }
            return r;
        }

        @Override
        public DynamicTableSource copy() { return new Scan(cfg, events); }

        @Override
        public String asSummaryString() { return "nexmark"; }
    }
}
