#!/usr/bin/env bash
# scripts/fuzz-soak.sh [ITERS] — the decoders of everything that crosses a
# process boundary, under AddressSanitizer + UBSan, for much longer than CI
# runs them: control-plane frames (test_protocol), data-plane frames
# (test_data_plane) and job plans (test_plan).
# ITERS (default 5,000,000) is SLUICE_FUZZ_ITERS: mutations per fuzzer.
set -euo pipefail
cd "$(dirname "$0")/.."
iters=${1:-5000000}
scripts/install-deps.sh
scripts/build.sh build-asan address,undefined
export SLUICE_FUZZ_ITERS=$iters ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1
for t in test_protocol test_data_plane test_plan; do
  echo "== $t (SLUICE_FUZZ_ITERS=$iters)"
  (cd build-asan && SLUICE_TEST_TMP=$PWD/tmp ./$t)
done
echo "== fuzz soak passed"
