package sluice.nexmark;

import org.apache.flink.api.common.eventtime.WatermarkStrategy;
import org.apache.flink.api.common.functions.AggregateFunction;
import org.apache.flink.api.common.serialization.SimpleStringEncoder;
import org.apache.flink.api.common.typeinfo.Types;
import org.apache.flink.api.java.tuple.Tuple2;
import org.apache.flink.api.java.tuple.Tuple3;
import org.apache.flink.connector.datagen.source.DataGeneratorSource;
import org.apache.flink.connector.file.sink.FileSink;
import org.apache.flink.core.fs.Path;
import org.apache.flink.streaming.api.datastream.SingleOutputStreamOperator;
import org.apache.flink.streaming.api.environment.StreamExecutionEnvironment;
import org.apache.flink.streaming.api.functions.windowing.ProcessWindowFunction;
import org.apache.flink.streaming.api.windowing.assigners.TumblingEventTimeWindows;
import org.apache.flink.streaming.api.windowing.windows.TimeWindow;
import org.apache.flink.util.Collector;
import org.apache.flink.util.OutputTag;

import java.time.Duration;

/** Scenario S1 on Flink, the job of examples/s1_minimal.c (bench/loc/count.sh compares their lines). */
public class S1Job {
    public static void main(String[] args) throws Exception {
        StreamExecutionEnvironment env = StreamExecutionEnvironment.getExecutionEnvironment();
        long events = args.length > 0 ? Long.parseLong(args[0]) : 1_000_000;
        DataGeneratorSource<Tuple3<Long, Double, Long>> gen = new DataGeneratorSource<>(
                n -> Tuple3.of(n % 10_000, (n * 7919 % 100_000) / 100.0, 1767225600000L + n),
                events, Types.TUPLE(Types.LONG, Types.DOUBLE, Types.LONG));
        OutputTag<Tuple3<Long, Double, Long>> late = new OutputTag<>("late",
                Types.TUPLE(Types.LONG, Types.DOUBLE, Types.LONG));

        SingleOutputStreamOperator<String> windows = env
                .fromSource(gen, WatermarkStrategy.<Tuple3<Long, Double, Long>>forBoundedOutOfOrderness(
                        Duration.ofSeconds(5)).withTimestampAssigner((t, ts) -> t.f2), "transactions")
                .keyBy(t -> t.f0)
                .window(TumblingEventTimeWindows.of(Duration.ofMinutes(5)))
                .sideOutputLateData(late)
                .aggregate(new CountAndSum(), new WithWindow());
        windows.sinkTo(FileSink.forRowFormat(new Path("s1-windows"), new SimpleStringEncoder<String>()).build());
        windows.getSideOutput(late).map(Tuple3::toString)
                .sinkTo(FileSink.forRowFormat(new Path("s1-late"), new SimpleStringEncoder<String>()).build());
        env.execute("s1");
    }

    static class CountAndSum implements AggregateFunction<Tuple3<Long, Double, Long>, Tuple2<Long, Double>,
            Tuple2<Long, Double>> {
        public Tuple2<Long, Double> createAccumulator() { return Tuple2.of(0L, 0.0); }

        public Tuple2<Long, Double> add(Tuple3<Long, Double, Long> t, Tuple2<Long, Double> a) {
            return Tuple2.of(a.f0 + 1, a.f1 + t.f1);
        }

        public Tuple2<Long, Double> getResult(Tuple2<Long, Double> a) { return a; }

        public Tuple2<Long, Double> merge(Tuple2<Long, Double> a, Tuple2<Long, Double> b) {
            return Tuple2.of(a.f0 + b.f0, a.f1 + b.f1);
        }
    }

    static class WithWindow extends ProcessWindowFunction<Tuple2<Long, Double>, String, Long, TimeWindow> {
        @Override
        public void process(Long card, Context ctx, Iterable<Tuple2<Long, Double>> in, Collector<String> out) {
            Tuple2<Long, Double> a = in.iterator().next();
            out.collect(String.format("{\"card_id\": %d, \"window_start\": %d, \"window_end\": %d, "
                    + "\"txn_count\": %d, \"total_amount\": %f}", card, ctx.window().getStart(),
                    ctx.window().getEnd(), a.f0, a.f1));
        }
    }
}
