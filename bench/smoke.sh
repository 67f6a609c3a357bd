#!/usr/bin/env bash
# bench/smoke.sh [RELEASE_DIR] [REFERENCE_DIR] — the benchmarks' smoke run in CI.
#
# The benchmark harnesses build with -O3 (CMAKE_BUILD_TYPE=Release), the
# tests with -O2: this builds the benchmark programs the way the harnesses do
# (so a warning that only -O3 raises fails CI, not the next benchmark run),
# runs each Nexmark query and each bench_pipelines workload briefly, and
# checks the results: the Nexmark result counts and checksums must equal those
# of the test build (REFERENCE_DIR, default build/) — the same code at another
# optimisation level, and with and without the source's projection — and every
# bench_pipelines line must say check=ok.  No timing is asserted.
set -euo pipefail
cd "$(dirname "$0")/.."
rel=${1:-build-release}
ref=${2:-build}
cmake -S . -B "$rel" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
ninja -C "$rel" nexmark bench_pipelines bench_checkpoint bench_savepoint bench_data_plane bench_interval_join \
    fraud_kafka >/dev/null
[ -x "$ref/nexmark" ] || ninja -C "$ref" nexmark >/dev/null
fail=0
for q in q0 q1 q2 q3 q4 q5 q7 q8 q11 ij cep; do
    a=$("$rel/nexmark" --query "$q" --events 300K -p 1 --checkpoint-interval 50 | grep -o 'out=[^ ]* checksum=[^ ]*')
    b=$("$ref/nexmark" --query "$q" --events 300K -p 1 --no-projection | grep -o 'out=[^ ]* checksum=[^ ]*')
    if [ "$a" = "$b" ] && [ -n "$a" ]; then
        echo "smoke: nexmark $q: $a"
    else
        echo "smoke: nexmark $q: -O3 with projection and checkpoints gave '$a', -O2 without projection '$b'" >&2
        fail=1
    fi
done
for w in passthrough map_filter window; do
    line=$("$rel/bench_pipelines" "$w" --events 1M)
    case "$line" in
    *check=ok*) echo "smoke: bench_pipelines $w: check=ok" ;;
    *) echo "smoke: bench_pipelines $w: $line" >&2; fail=1 ;;
    esac
done
[ "$fail" = 0 ] && echo "smoke: benchmarks build with -O3 and give the test build's results"
exit "$fail"
