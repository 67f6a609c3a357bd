#!/usr/bin/env bash
# scripts/fraud-kafka-demo.sh — the fraud pipeline (scenarios S1-S4) on a
# real Apache Kafka broker and a real PostgreSQL server, on one machine:
#
#   1. starts a throwaway Kafka broker (scripts/kafka.sh) and PostgreSQL
#      cluster (scripts/postgres.sh), creates the topics
#   2. produces the seeded card transactions into `events` (12 partitions,
#      one of them left empty, 1% late events, a few poison records)
#   3. runs `fraud_kafka run --bounded`: Kafka source -> event time with
#      idleness -> key_by(card_id) -> 5-minute tumbling windows -> fraud
#      decisions to `fraud-decisions` (exactly-once) and to the table
#      fraud_decisions (two-phase commit); late events to `fraud-late`,
#      poison records to `fraud-dead-letters`
#   4. prints a few decisions read with a read_committed consumer and rows
#      of the table, then stops both services
#
# Usage: scripts/fraud-kafka-demo.sh [BUILD_DIR]   (default: build; built if missing)
# Environment: EVENTS (default 40000), PARALLELISM (2), KEEP=1 leaves the
# services running (stop them with SLUICE_KAFKA_DIR=... scripts/kafka.sh stop
# and SLUICE_PG_STATE=... scripts/postgres.sh stop).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$root/build}
events=${EVENTS:-40000}
par=${PARALLELISM:-2}
work=$(mktemp -d "${TMPDIR:-/tmp}/fraud-kafka-demo.XXXXXX")
export SLUICE_KAFKA_DIR=$work/kafka
export SLUICE_PG_STATE=$work/postgres

if [ ! -x "$build/fraud_kafka" ]; then
    echo "== building into $build"
    cmake -S "$root" -B "$build" -G Ninja >/dev/null
    ninja -C "$build" -j2 fraud_kafka >/dev/null
fi
bin=$build/fraud_kafka

cleanup() {
    if [ "${KEEP:-0}" = 1 ]; then
        echo "services left running: SLUICE_KAFKA_DIR=$SLUICE_KAFKA_DIR SLUICE_PG_STATE=$SLUICE_PG_STATE"
        return
    fi
    "$root/scripts/kafka.sh" stop >/dev/null 2>&1 || true
    "$root/scripts/postgres.sh" stop >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT

echo "== starting Kafka (scripts/kafka.sh) and PostgreSQL (scripts/postgres.sh)"
bootstrap=$("$root/scripts/kafka.sh" start | tail -1)
conninfo=$("$root/scripts/postgres.sh" start | tail -1)
echo "   Kafka      $bootstrap"
echo "   PostgreSQL $conninfo"
"$root/scripts/kafka.sh" topic events 12 >/dev/null
for t in fraud-decisions fraud-late fraud-dead-letters; do "$root/scripts/kafka.sh" topic "$t" 12 >/dev/null; done

echo "== producing $events transactions into events (partition 11 left empty, 1% late, 3 poison records)"
"$bin" produce --bootstrap "$bootstrap" --events "$events" --poison 3

echo "== running the pipeline (bounded, p=$par, exactly-once to Kafka and PostgreSQL, checkpoints every 2 s)"
"$bin" run --bootstrap "$bootstrap" --conninfo "$conninfo" -p "$par" --bounded \
    --checkpoint-interval 2000 --checkpoint-dir "$work/checkpoints" \
    --on-error dead-letter --throttle 10000 --fetch-kb 8 | sed 's/^/   /'

echo "== fraud-decisions, read with a read_committed consumer (the first 5 of each flag)"
"$bin" read --bootstrap "$bootstrap" --topic fraud-decisions --max 5 --grep '"flagged":true' | sed 's/^/   /'
"$bin" read --bootstrap "$bootstrap" --topic fraud-decisions --max 5 --grep '"flagged":false' | sed 's/^/   /'
echo "== fraud-late (late events, a day behind) and fraud-dead-letters (poison records)"
"$bin" read --bootstrap "$bootstrap" --topic fraud-late --max 2 | sed 's/^/   /'
"$bin" read --bootstrap "$bootstrap" --topic fraud-dead-letters --max 3 | sed 's/^/   /'
echo "== the table fraud_decisions (PostgreSQL)"
"$root/scripts/postgres.sh" psql -c "SELECT count(*) AS decisions, count(*) FILTER (WHERE flagged) AS flagged, sum(txn_count) AS transactions FROM fraud_decisions"
"$root/scripts/postgres.sh" psql -c "SELECT window_start, window_end, card_id, txn_count, total_amount, flagged FROM fraud_decisions WHERE flagged ORDER BY total_amount DESC LIMIT 5"
"$root/scripts/postgres.sh" psql -c "SELECT count(*) AS prepared_transactions_left FROM pg_prepared_xacts"
echo "== stopping the services"
