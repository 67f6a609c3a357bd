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

# cep_login: on a small input whose matches follow from the patterns' rules.
cat > logins.csv <<'CSV'
alice,fail,1000
alice,success,2000
bob,fail,1000
bob,fail,2000
bob,fail,3000
bob,success,4000
carol,fail,1000
carol,success,400000
CSV
out="$("$BUILD/cep_login" logins.csv 2>&1)" || fail "cep_login exited with $?: $out"
n1=$(echo "$out" | grep -c '"pattern":"fail-then-success"' || true)
n2=$(echo "$out" | grep -c '"pattern":"3-fails-then-success"' || true)
[ "$n1" = 2 ] && [ "$n2" = 1 ] || fail "cep_login: $n1 fail-then-success and $n2 3-fails-then-success matches (want 2 and 1): $out"
echo "$out" | grep -q '"user":"bob","pattern":"3-fails-then-success","first_ts":1000,"last_ts":4000,"events":4' ||
    fail "cep_login: bob's three failures and success are not one match: $out"
echo "$out" | grep -q '"user":"carol","pattern":"fail' && fail "cep_login: carol matched beyond 5 minutes: $out"
echo "ok   cep_login"
