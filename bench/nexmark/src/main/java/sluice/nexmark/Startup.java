package sluice.nexmark;

import org.apache.flink.api.common.functions.OpenContext;
import org.apache.flink.api.common.state.ValueState;
import org.apache.flink.api.common.state.ValueStateDescriptor;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.connector.sink2.Sink;
import org.apache.flink.api.connector.sink2.SinkWriter;
import org.apache.flink.api.connector.sink2.WriterInitContext;
import org.apache.flink.configuration.Configuration;
import org.apache.flink.configuration.StateBackendOptions;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.KeyedProcessFunction;
import org.apache.flink.util.Collector;

import java.time.Instant;
import java.util.concurrent.atomic.AtomicLong;

/**
 * Start-up time of a trivial bounded job on Apache Flink (a MiniCluster in
 * this JVM), the counterpart of sluice's `keymem startup`
 * (bench/startup_memory/keymem.c), for bench/startup_memory.sh:
 *
 *   keymem launch java -cp target/nexmark-flink.jar sluice.nexmark.Startup [--records 5]
 *        [--backend hashmap|rocksdb]
 *
 * The job: fromData(0 .. N-1) (BIGINT, Long) -> keyBy(the value) -> a
 * KeyedProcessFunction with a ValueState<Long> (sum per key) that emits the
 * sum -> a sink that reads the wall clock when its first record arrives.
 * Prints main_ns (main entered), execute_ns (the job is built, execute
 * called: the MiniCluster starts inside it), first_record_ns and end_ns
 * (execute returned), epoch nanoseconds (Instant.now(): microsecond resolution on
 * Linux), the same clock as the launcher's CLOCK_REALTIME.
 */
public final class Startup {
    static final AtomicLong FIRST_NS = new AtomicLong(), COUNT = new AtomicLong();

    static long realNs() {
        Instant t = Instant.now();
        return t.getEpochSecond() * 1_000_000_000L + t.getNano();
    }

    static final class SumFn extends KeyedProcessFunction<Long, Long, Long> {
        transient ValueState<Long> sum;

        @Override
        public void open(OpenContext ctx) {
            sum = getRuntimeContext().getState(new ValueStateDescriptor<>("sum", Types.LONG));
        }

        @Override
        public void processElement(Long v, Context ctx, Collector<Long> out) throws Exception {
            Long cur = sum.value();
            long s = (cur == null ? 0L : cur) + v;
            sum.update(s);
            out.collect(s);
        }
    }

    static final class FirstRecordSink implements Sink<Long> {
        @Override
        public SinkWriter<Long> createWriter(WriterInitContext ctx) {
            return new SinkWriter<Long>() {
                @Override
                public void write(Long v, Context c) {
                    if (COUNT.getAndIncrement() == 0) FIRST_NS.set(realNs());
                }

                @Override
                public void flush(boolean endOfInput) {}

                @Override
                public void close() {}
            };
        }
    }

    public static void main(String[] args) throws Exception {
        long mainNs = realNs();
        long records = 5;
        String backend = "hashmap";
        for (int i = 0; i < args.length; i++) {
            String a = args[i];
            if (i + 1 >= args.length) {
                System.err.println("Startup: '" + a + "' needs a value");
                System.exit(2);
            }
            switch (a) {
                case "--records": records = NexmarkFlink.count(args[++i]); break;
                case "--backend": backend = args[++i]; break;
                default:
                    System.err.println("Startup: unknown argument '" + a + "'");
                    System.exit(2);
            }
        }
        if (records < 1) {
            System.err.println("Startup: --records must be at least 1 (the first record is what is timed)");
            System.exit(2);
        }
        Long[] data = new Long[(int) records];
        for (int i = 0; i < data.length; i++) data[i] = (long) i;

        Configuration conf = new Configuration();
        conf.set(StateBackendOptions.STATE_BACKEND, backend);
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment(conf);
        env.setParallelism(1);
        env.fromData(data).name("numbers").uid("numbers")
                .keyBy(v -> v, Types.LONG)
                .process(new SumFn()).returns(Types.LONG).name("sum").uid("sum")
                .sinkTo(new FirstRecordSink()).name("first-record").uid("first-record");
        long executeNs = realNs();
        env.execute("startup");
        long endNs = realNs();
        if (COUNT.get() != records) {
            System.err.printf("Startup: the sink got %d records, expected %d%n", COUNT.get(), records);
            System.exit(1);
        }
        System.out.printf("engine=flink mode=startup backend=%s records=%d out=%d main_ns=%d execute_ns=%d "
                + "first_record_ns=%d end_ns=%d%n", backend, records, COUNT.get(), mainNs, executeNs, FIRST_NS.get(),
                endNs);
        System.exit(0);
    }
}
