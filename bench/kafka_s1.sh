#!/usr/bin/env bash
# bench/kafka_s1.sh — the S1 fraud pipeline from Kafka to Kafka, end to end,
# on a throwaway Apache Kafka broker (scripts/kafka.sh) on this machine.
#
#   bench/kafka_s1.sh [throughput|latency|all]     (default all)
#
# throughput  N transactions (default 3M) pre-produced into `events`
#             (12 partitions, one empty), then the job runs bounded:
#             Kafka source -> 5-minute windows per card -> decisions to a
#             Kafka topic EXACTLY-ONCE, checkpoints every 10 s, p=2.  Prints
#             records/s (records read / wall time of the job, start-up
#             included) and records/s per core (records / CPU seconds of the
#             job process; the broker's CPU is not counted).
# latency     the job unbounded, AT-LEAST-ONCE, 10-second windows so a short
#             run fires many; a producer writes RATE transactions/s (default
#             20000, below saturation) stamped with the wall clock.  A window
#             [s, e) can first fire when every non-empty partition got a
#             transaction with ts >= e + 5 s (its watermark max_ts - 5 s - 1
#             then reaches e - 1); latency = when a consumer receives the
#             decision row - that moment (bench/kafka_s1/latency.c).  p50 and
#             p99 over every decision row.
#
# Each is run RUNS times (default 3) and the median printed.  Environment:
# BUILD (default build-bench-kafka, a Release build made here), N, RATE,
# DURATION (latency run length in s, default 90), RUNS, CARDS (default 10000).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
what=${1:-all}
build=${BUILD:-$root/build-bench-kafka}
N=${N:-3000000}
RATE=${RATE:-20000}
SECONDS_RUN=${DURATION:-90}
RUNS=${RUNS:-3}
CARDS=${CARDS:-10000}
work=$(mktemp -d "${TMPDIR:-/tmp}/kafka-s1-bench.XXXXXX")
export SLUICE_KAFKA_DIR=$work/kafka

if [ ! -x "$build/fraud_kafka" ] || [ ! -x "$build/kafka_s1_latency" ] || [ -z "${BUILD:-}" ]; then
    cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
    ninja -C "$build" -j2 fraud_kafka kafka_s1_latency >/dev/null
fi
bin=$build/fraud_kafka

cleanup() {
    "$root/scripts/kafka.sh" stop >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)"
bootstrap=$("$root/scripts/kafka.sh" start | tail -1)
echo "broker: Apache Kafka (scripts/kafka.sh) at $bootstrap"

median() { sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
val() { sed -n "s/^$1=//p" "$2"; }
kv() { tr ' ' '\n' < "$2" | sed -n "s/^$1=//p"; }

if [ "$what" = all ] || [ "$what" = throughput ]; then
    echo "== throughput: $N transactions, $CARDS cards, Kafka -> Kafka exactly-once, checkpoints every 10 s, p=2"
    "$root/scripts/kafka.sh" topic events 12 >/dev/null
    t0=$(date +%s.%N)
    "$bin" produce --bootstrap "$bootstrap" --topic events --events "$N" --cards "$CARDS" --span-min 360 --batch 1000 >/dev/null
    echo "   produced in $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}') s"
    : > "$work/tp.txt"
    for i in $(seq 1 "$RUNS"); do
        "$root/scripts/kafka.sh" topic "decisions-$i" 12 >/dev/null
        "$root/scripts/kafka.sh" topic "late-$i" 1 >/dev/null
        "$bin" run --bootstrap "$bootstrap" --events-topic events --decisions-topic "decisions-$i" \
            --late-topic "late-$i" --job-id "tp-$i" -p 2 --checkpoint-interval 10000 \
            --checkpoint-dir "$work/ck-$i" --bounded --fetch-kb 1024 --restarts 0 > "$work/run-$i.txt" 2>"$work/run-$i.err"
        recs=$(val records_out "$work/run-$i.txt"); secs=$(val seconds "$work/run-$i.txt"); cpu=$(val cpu_seconds "$work/run-$i.txt")
        ck=$(val checkpoints "$work/run-$i.txt"); dec=$(val decisions "$work/run-$i.txt")
        rps=$(awk -v r="$recs" -v s="$secs" 'BEGIN {printf "%d", r / s}')
        rpc=$(awk -v r="$recs" -v s="$cpu" 'BEGIN {printf "%d", r / s}')
        echo "   run $i: $recs records, $dec decisions, $ck checkpoints in $secs s (CPU $cpu s): $rps records/s, $rpc records/s per core"
        echo "$rps $rpc" >> "$work/tp.txt"
    done
    echo "   median: $(cut -d' ' -f1 "$work/tp.txt" | median) records/s, $(cut -d' ' -f2 "$work/tp.txt" | median) records/s per core of CPU used"
fi

if [ "$what" = all ] || [ "$what" = latency ]; then
    echo "== latency: $RATE transactions/s for $SECONDS_RUN s, at-least-once, 10-second windows, p=2"
    : > "$work/lat.txt"
    for i in $(seq 1 "$RUNS"); do
        "$root/scripts/kafka.sh" topic "lat-events-$i" 12 >/dev/null
        "$root/scripts/kafka.sh" topic "lat-decisions-$i" 12 >/dev/null
        "$root/scripts/kafka.sh" topic "lat-late-$i" 1 >/dev/null
        "$build/kafka_s1_latency" "$bootstrap" "lat-events-$i" "lat-decisions-$i" $((SECONDS_RUN + 25)) 10000 5000 \
            > "$work/lat-$i.txt" &
        probe=$!
        "$bin" run --bootstrap "$bootstrap" --events-topic "lat-events-$i" --decisions-topic "lat-decisions-$i" \
            --late-topic "lat-late-$i" --job-id "lat-$i" -p 2 --checkpoint-interval 10000 \
            --checkpoint-dir "$work/lck-$i" --delivery at-least-once --window-ms 10000 --idle-timeout 2000 \
            --fetch-kb 64 --restarts 0 > /dev/null 2>"$work/lat-run-$i.err" &
        job=$!
        sleep 3
        "$bin" produce --bootstrap "$bootstrap" --topic "lat-events-$i" --wall-clock --rate "$RATE" \
            --events $((RATE * SECONDS_RUN)) --cards "$CARDS" --batch 1000 >/dev/null
        sleep 15
        kill "$job" 2>/dev/null || true
        wait "$job" 2>/dev/null || true
        wait "$probe" || true
        echo "   run $i: $(cat "$work/lat-$i.txt")"
        echo "$(kv p50_ms "$work/lat-$i.txt") $(kv p99_ms "$work/lat-$i.txt")" >> "$work/lat.txt"
    done
    echo "   median: p50 $(cut -d' ' -f1 "$work/lat.txt" | median) ms, p99 $(cut -d' ' -f2 "$work/lat.txt" | median) ms"
fi
