#!/usr/bin/env bash
# bench/checkpoints.sh — checkpoint benchmarks (BENCHMARKS.md, "Checkpoints"):
#   1. bench_checkpoint at 100 MB and 1 GB of keyed state: heap, RocksDB (full) and RocksDB
#      incremental — synchronous phase, end-to-end duration, bytes, bytes after 1% changed,
#      restore time; then RocksDB full checkpoints of 1M and 4M keys with a value cache of
#      64 MiB and 1 GiB (the synchronous phase of every checkpoint while the cache is full of
#      changed values);
#   2. the S1 window (bench_pipelines) with checkpoints every 10 s: none, exactly-once,
#      at-least-once, on the heap and on RocksDB.
#   bench/checkpoints.sh [--quick]     (--quick: 20 MB and short runs)
# Needs a Release build in build-bench (bench/run.sh makes one) or BENCH_BUILD_DIR.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
B="${BENCH_BUILD_DIR:-$ROOT/build-bench}"
if [ ! -x "$B/bench_checkpoint" ]; then
  cmake -S "$ROOT" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  ninja -C "$B" bench_checkpoint bench_pipelines >/dev/null
fi
QUICK=0; [ "${1:-}" = "--quick" ] && QUICK=1
if [ $QUICK = 1 ]; then SIZES="20"; EV=4M; else SIZES="100 1024"; EV=60M; fi
echo "== state size: heap / rocksdb / rocksdb incremental (p=1)"
for mb in $SIZES; do
  "$B/bench_checkpoint" --state-mb "$mb"
  vb=100; [ "$mb" -ge 1024 ] && vb=1000   # RocksDB loads 1 GB as 1M values of 1 KB (10M puts take minutes)
  "$B/bench_checkpoint" --state-mb "$mb" --value-bytes $vb --backend rocksdb
  "$B/bench_checkpoint" --state-mb "$mb" --value-bytes $vb --backend rocksdb --incremental
done
echo "== RocksDB full checkpoints: synchronous phase by value cache size (syncs_ms: every checkpoint's)"
if [ $QUICK = 1 ]; then RC_MB="20"; else RC_MB="100 400"; fi   # 1M and 4M keys of 100 bytes
for mb in $RC_MB; do
  for vc in 64 1024; do
    "$B/bench_checkpoint" --state-mb "$mb" --value-bytes 100 --backend rocksdb --value-cache-mb $vc --skip-restore
  done
done
echo "== S1 window, 100K keys, checkpoints every 10 s"
for be in heap rocksdb; do
  ev=$EV; [ $be = rocksdb ] && ev=${RDB_EVENTS:-3M}
  for mode in none eo alo; do
    args=(window --keys 100K --events "$ev" --ts-step-ms 0.005 --backend $be)
    [ $mode = eo ] && args+=(--checkpoint-ms 10000)
    [ $mode = alo ] && args+=(--checkpoint-ms 10000 --at-least-once)
    "$B/bench_pipelines" "${args[@]}" | tail -1
  done
done
