#!/usr/bin/env bash
# Installs what is needed, builds sluice and runs the S1 fraud job on the
# built-in generator (no external service).  Extra arguments go to sluice.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
scripts/build.sh build
mkdir -p out
exec ./build/sluice --output out/fraud-windows.jsonl --late-output out/fraud-late.jsonl "$@"
