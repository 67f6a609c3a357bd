#!/usr/bin/env bash
# scripts/build.sh [DIR [SANITIZERS]] — configures and builds sluice.
#   scripts/build.sh                       -> build/ (RelWithDebInfo)
#   scripts/build.sh build-asan address,undefined
#   scripts/build.sh build-tsan thread
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build}
san=${2:-}
cmake -S . -B "$dir" -G Ninja -DSLUICE_SANITIZE="$san" >/dev/null
ninja -C "$dir" >/dev/null
