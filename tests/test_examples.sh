#!/usr/bin/env bash
# tests/test_examples.sh BUILD_DIR — runs the example programs of the README
# ("Examples") as a user would and checks what they print or write against
# what their input implies.  Each check names the example that failed.
set -euo pipefail
BUILD="$(cd "$1" && pwd)"
WORK="$(mktemp -d "${TMPDIR:-/tmp}/sluice-examples.XXXXXX")"
trap 'rm -rf "$WORK"' EXIT
cd "$WORK"
fail() { echo "test_examples: $*" >&2; exit 1; }

# s1_minimal: every generated transaction is in exactly one window or late.
"$BUILD/s1_minimal" 200000 >/dev/null || fail "s1_minimal exited with $?"
python3 - <<'PY' || fail "s1_minimal: windows + late != events"
import json
n = sum(json.loads(l)["txn_count"] for l in open("s1-windows.jsonl"))
late = sum(1 for _ in open("s1-late.jsonl"))
assert n + late == 200000 and late > 0 and n > 0, (n, late)
PY
echo "ok   s1_minimal"

# fraud_rules: rules change while transactions flow; the run reports them.
out="$("$BUILD/fraud_rules" 2>&1)" || fail "fraud_rules exited with $?: $out"
echo "$out" | grep -Eq '^[0-9]+ transactions, [1-9][0-9]* rule changes, [1-9][0-9]* alerts' ||
    fail "fraud_rules: unexpected summary: $out"
echo "ok   fraud_rules"
