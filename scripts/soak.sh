#!/usr/bin/env bash
# Long soak of the randomized window test: many seeds (SLUICE_SOAK_SEEDS,
# default 2000) in the release and the ASan+UBSan builds.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
export SLUICE_SOAK_SEEDS=${SLUICE_SOAK_SEEDS:-2000}
scripts/build.sh build
./build/test_window_random
scripts/build.sh build-asan address,undefined
./build-asan/test_window_random
