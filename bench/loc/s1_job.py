# Scenario S1 on PyFlink, the job of examples/s1_minimal.c (bench/loc/count.sh compares their lines).
import sys

from pyflink.common import Duration, Encoder, Types, WatermarkStrategy
from pyflink.common.watermark_strategy import TimestampAssigner
from pyflink.datastream import OutputTag, StreamExecutionEnvironment
from pyflink.datastream.functions import AggregateFunction, ProcessWindowFunction
from pyflink.datastream.connectors.file_system import FileSink
from pyflink.datastream.window import TumblingEventTimeWindows
from pyflink.common.time import Time

def txn_type():  # a fresh one per use: an OutputTag cannot pickle a type already used by the job
    return Types.TUPLE([Types.LONG(), Types.DOUBLE(), Types.LONG()])


class Ts(TimestampAssigner):
    def extract_timestamp(self, value, record_timestamp):
        return value[2]


class CountAndSum(AggregateFunction):
    def create_accumulator(self):
        return (0, 0.0)

    def add(self, t, acc):
        return (acc[0] + 1, acc[1] + t[1])

    def get_result(self, acc):
        return acc

    def merge(self, a, b):
        return (a[0] + b[0], a[1] + b[1])


class WithWindow(ProcessWindowFunction):
    def process(self, card, ctx, accs):
        for count, total in accs:
            yield f'{{"card_id": {card}, "window_start": {ctx.window().start}, ' \
                  f'"window_end": {ctx.window().end}, "txn_count": {count}, "total_amount": {total}}}'


def main():
    env = StreamExecutionEnvironment.get_execution_environment()
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000000
    txns = env.from_collection(
        [(i % 10000, (i * 7919 % 100000) / 100.0, 1767225600000 + i) for i in range(n)], txn_type())
    late = OutputTag("late", txn_type())
    windows = txns.assign_timestamps_and_watermarks(
        WatermarkStrategy.for_bounded_out_of_orderness(Duration.of_seconds(5)).with_timestamp_assigner(Ts())) \
        .key_by(lambda t: t[0], key_type=Types.LONG()) \
        .window(TumblingEventTimeWindows.of(Time.minutes(5))) \
        .side_output_late_data(late) \
        .aggregate(CountAndSum(), WithWindow(), accumulator_type=Types.TUPLE([Types.LONG(), Types.DOUBLE()]),
                   output_type=Types.STRING())
    windows.sink_to(FileSink.for_row_format("s1-windows", Encoder.simple_string_encoder()).build())
    windows.get_side_output(late).map(str, Types.STRING()) \
        .sink_to(FileSink.for_row_format("s1-late", Encoder.simple_string_encoder()).build())
    env.execute("s1")


if __name__ == "__main__":
    main()
