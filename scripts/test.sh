#!/usr/bin/env bash
# Installs what is needed, builds sluice four times and runs every test:
#   1. RelWithDebInfo                    all tests
#   1b. Release (-O3, as the benchmark harnesses build)  bench/smoke.sh
#   2. AddressSanitizer + UBSan          all tests
#   3. ThreadSanitizer                   the tests of the threaded runtime
# SLUICE_SOAK_SEEDS sets how many seeds the randomized window test runs.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=$(nproc)
run() { # dir label ctest-args...
  local dir=$1 label=$2; shift 2
  echo "== $label"
  ( cd "$dir" && ctest --output-on-failure -j "$jobs" "$@" )
}
scripts/build.sh build
run build "tests (release)"
echo "== benchmark smoke run (-O3 build, results equal to the test build's)"
bench/smoke.sh build-release build
scripts/build.sh build-asan address,undefined
ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 run build-asan "tests (ASan+UBSan)"
scripts/build.sh build-tsan thread
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1 suppressions=$PWD/scripts/tsan.supp" run build-tsan "runtime tests (TSan)" -R 'test_(pipeline|runtime|window_random|fraud|checkpoint_barriers|exactly_once_sink|sequence_check|restart_strategy|operator_state|async_io|postgres_async|rpc|data_plane|savepoint|state_query|rocksdb_cache|timer_service)$'
echo "== all tests passed"
