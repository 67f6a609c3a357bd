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
import org.apache.flink.table.types.logical.LogicalType;
import org.apache.flink.table.types.logical.RowType;

import java.io.PrintStream;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;

/**
 * The 'sluice-collect' sink of the reference runs: prints every row it gets
 * in sluice's canonical text form (RowFormat), one line per row, on stdout.
 * Main puts it in place of the script's sink tables when it runs a script.
 */
public class CollectTableFactory implements DynamicTableSinkFactory {
    static final PrintStream OUT = System.out;

    @Override
    public String factoryIdentifier() { return "sluice-collect"; }

    @Override
    public Set<ConfigOption<?>> requiredOptions() { return new HashSet<>(); }

    @Override
    public Set<ConfigOption<?>> optionalOptions() { return new HashSet<>(); }

    @Override
    public DynamicTableSink createDynamicTableSink(Context context) {
        RowType t = (RowType) context.getCatalogTable().getResolvedSchema().toPhysicalRowDataType().getLogicalType();
        return new Collect(t.getChildren());
    }

    /** Writes each row's canonical line to stdout (lines of concurrent writers never interleave). */
    static final class CollectSink implements Sink<RowData> {
        final ArrayList<LogicalType> types;

        CollectSink(ArrayList<LogicalType> types) { this.types = types; }

        @Override
        public SinkWriter<RowData> createWriter(WriterInitContext c) {
            final RowFormat f = new RowFormat(types);
            return new SinkWriter<RowData>() {
                @Override
                public void write(RowData row, Context cx) {
                    String line = f.format(row);
                    synchronized (OUT) { OUT.println(line); }
                }

                @Override
                public void flush(boolean endOfInput) { OUT.flush(); }

                @Override
                public void close() { OUT.flush(); }
            };
        }
    }

    /**
     * Accepts every changelog mode (the row kind is the line's first field).  An
     * insert-only input is written by one writer; an updating one by writers at
     * the input's parallelism, forwarded, so that each key's changes stay in order
     * (Flink requires a primary key to reshuffle an updating stream to one writer).
     */
    static final class Collect implements DynamicTableSink {
        final List<LogicalType> types;
        boolean insertOnly = true;

        Collect(List<LogicalType> types) { this.types = types; }

        @Override
        public ChangelogMode getChangelogMode(ChangelogMode requested) {
            insertOnly = requested.containsOnly(org.apache.flink.types.RowKind.INSERT);
            return requested;
        }

        @Override
        public SinkRuntimeProvider getSinkRuntimeProvider(Context ctx) {
            CollectSink s = new CollectSink(new ArrayList<>(types));
            return insertOnly ? SinkV2Provider.of(s, 1) : SinkV2Provider.of(s);
        }

        @Override
        public DynamicTableSink copy() {
            Collect c = new Collect(types);
            c.insertOnly = insertOnly;
            return c;
        }

        @Override
        public String asSummaryString() { return "sluice-collect"; }
    }
}
