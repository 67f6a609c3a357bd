package sluice.sql;

import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.configuration.ConfigOption;
import org.apache.flink.table.connector.ChangelogMode;
import org.apache.flink.table.connector.sink.DynamicTableSink;
import org.apache.flink.table.connector.sink.SinkV2Provider;
import org.apache.flink.table.data.RowData;
import org.apache.flink.table.factories.DynamicTableSinkFactory;
import org.apache.flink.types.RowKind;

import java.util.HashSet;
import java.util.Set;
import java.util.concurrent.atomic.AtomicLong;

/**
 * The 'sluice-count' sink of NexmarkBench: as cheap as Flink's blackhole, but
 * it counts what it gets — insert rows and update/delete rows apart — into
 * JVM-wide totals (the MiniCluster runs in the benchmark's JVM), added when
 * each writer closes.
 */
public class CountTableFactory implements DynamicTableSinkFactory {
    static final AtomicLong INSERTS = new AtomicLong(), UPDATES = new AtomicLong();

    @Override
    public String factoryIdentifier() { return "sluice-count"; }

    @Override
    public Set<ConfigOption<?>> requiredOptions() { return new HashSet<>(); }

    @Override
    public Set<ConfigOption<?>> optionalOptions() { return new HashSet<>(); }

    @Override
    public DynamicTableSink createDynamicTableSink(Context context) { return new Count(); }

    static final class CountSink implements Sink<RowData> {
        @Override
        public SinkWriter<RowData> createWriter(WriterInitContext c) {
            return new SinkWriter<RowData>() {
                long inserts, updates;

                @Override
                public void write(RowData row, Context cx) {
                    if (row.getRowKind() == RowKind.INSERT) inserts++;
                    else updates++;
                }

                @Override
                public void flush(boolean endOfInput) {}

                @Override
                public void close() {
                    INSERTS.addAndGet(inserts);
                    UPDATES.addAndGet(updates);
                    inserts = updates = 0;
                }
            };
        }
    }

    static final class Count implements DynamicTableSink {
        @Override
        public ChangelogMode getChangelogMode(ChangelogMode requested) { return requested; }

        @Override
        public SinkRuntimeProvider getSinkRuntimeProvider(Context ctx) { return SinkV2Provider.of(new CountSink()); }

        @Override
        public DynamicTableSink copy() { return new Count(); }

        @Override
        public String asSummaryString() { return "sluice-count"; }
    }
}
