#!/usr/bin/env bash
# bench/savepoints.sh — savepoints on sluice and on Apache Flink 2.2, side by side
# (BENCHMARKS.md, "Savepoints: time to take one and to restore it, by state size", issue 11).
#
#   bench/savepoints.sh [--mb 100,1000] [--runs 3] [--backends heap,rocksdb] [--p 2] [--no-build]
#
# Runs, one after the other in this one invocation, sluice's bench_savepoint and Flink's
# bench/savepoint_flink (the same job on a MiniCluster, heap = Flink's hashmap backend), each
# --runs times per state size and backend, then prints one table of medians (min–max).  The
# job on both: K = MB * 2^20 / 116 distinct keys, each put once as a 100-byte value into keyed
# value state of a keyed process function, parallelism P; once every key is in state an
# intermediate savepoint (canonical format), then stop-with-savepoint, then a new job restores
# it at the same parallelism.  Columns:
#   size      bytes of the intermediate savepoint's directory
#   savepoint trigger -> the savepoint is complete (sluice: sl_env_trigger_savepoint returns,
#             _metadata durable; Flink: MiniCluster.triggerSavepoint's future completes)
#   stop      the stop-with-savepoint call until it returns (sluice: sl_env_stop_with_savepoint;
#             Flink: MiniCluster.stopWithSavepoint's future, which completes once the job finished)
#   restore   from starting the new job (sluice: sl_env_execute; Flink: building the job graph,
#             then submitJob) to open() of the keyed function on every subtask
#   start     the same for the first job, which has no state to load: the fixed cost inside
#             "restore" (scheduling, deployment, operator set-up)
# Flink runs in one JVM per backend (FLINK_JAVA_OPTS, default -Xms2g -Xmx8g) after one
# uncounted warm-up round at the smallest size (its lines start with "warmup").  uptime is
# recorded before and after.  Raw lines go to $BUILD/savepoints-<date>.txt.
# Needs a Release build (BENCH_BUILD_DIR, default build-bench; made here unless --no-build),
# Java 17 and Maven (the jar builds offline from ~/.m2, which scripts/install-deps.sh fills).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
B="${BENCH_BUILD_DIR:-$ROOT/build-bench}"
JAR="$ROOT/bench/savepoint_flink/target/savepoint-flink.jar"
JAVA_OPTS="${FLINK_JAVA_OPTS:--Xms2g -Xmx8g}"
MB=100,1000
RUNS=3
BACKENDS=heap,rocksdb
P=2
BUILD_IT=1
while [ $# -gt 0 ]; do
  case "$1" in
    --mb) MB="$2"; shift 2 ;;
    --runs) RUNS="$2"; shift 2 ;;
    --backends) BACKENDS="$2"; shift 2 ;;
    --p) P="$2"; shift 2 ;;
    --no-build) BUILD_IT=0; shift ;;
    *) sed -n '2,27p' "$0" >&2; exit 2 ;;
  esac
done

if [ $BUILD_IT = 1 ]; then
  cmake -S "$ROOT" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
  ninja -C "$B" bench_savepoint >/dev/null
  if [ ! -f "$JAR" ] || [ -n "$(find "$ROOT/bench/savepoint_flink/pom.xml" "$ROOT/bench/savepoint_flink/src" \
        -newer "$JAR" -type f 2>/dev/null | head -1)" ]; then
    (cd "$ROOT/bench/savepoint_flink" && { mvn -q -o -B package >/dev/null 2>&1 || mvn -q -B package >/dev/null; })
  fi
fi
[ -x "$B/bench_savepoint" ] || { echo "savepoints.sh: no $B/bench_savepoint (drop --no-build)" >&2; exit 1; }
[ -f "$JAR" ] || { echo "savepoints.sh: no $JAR (drop --no-build)" >&2; exit 1; }

mkdir -p "$B"
RAW="$B/savepoints-$(date -u +%Y%m%dT%H%M%SZ).txt"
{
  echo "# bench/savepoints.sh --mb $MB --runs $RUNS --backends $BACKENDS --p $P  ($(date -u))"
  echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//'), $(nproc) cores"
  echo "uptime_before $(uptime)"
  "$B/bench_savepoint" --mb "$MB" --runs "$RUNS" --backends "$BACKENDS" --p "$P" --value 100
  # shellcheck disable=SC2086
  java $JAVA_OPTS -jar "$JAR" --mb "$MB" --runs "$RUNS" --backends "$BACKENDS" --p "$P" --value 100 --warmup 1
  echo "uptime_after $(uptime)"
} 2>&1 | tee "$RAW"

echo
echo "raw: $RAW"
awk -v mbs="$MB" -v bes="$BACKENDS" '
function kv(s,   i, a, n) { n = split(s, a, "="); return a[2] }
# median (min-max) of the n values of list key k, in the unit u (ms or s)
function num(v, u) { return u == "ms" ? sprintf("%d", v) : sprintf(u == "s1" ? "%.1f" : "%.2f", v / 1000) }
function unit(v) { return v >= 10000 ? "s1" : v >= 1000 ? "s2" : "ms" }
function fmt(v, u) { u = unit(v); return num(v, u) (u == "ms" ? " ms" : " s") }
function stat(k,   n, i, j, t, u, x) {
  n = cnt[k]; if (n == 0) return "—"
  for (i = 1; i <= n; i++) x[i] = val[k, i]
  for (i = 2; i <= n; i++) { t = x[i]; for (j = i - 1; j >= 1 && x[j] > t; j--) x[j + 1] = x[j]; x[j + 1] = t }
  t = x[int((n + 1) / 2)]; u = unit(t)
  return n == 1 ? fmt(t) : fmt(t) " (" num(x[1], u) "–" num(x[n], u) ")"
}
function size(b) { return b < 0 ? "—" : b >= 1e9 ? sprintf("%.2f GB", b / 1e9) : sprintf("%.1f MB", b / 1e6) }
/^uptime_before/ { sub(/^.*load average: /, ""); lb = $0 }
/^uptime_after/ { sub(/^.*load average: /, ""); la = $0 }
/^result / {
  for (i = 2; i <= NF; i++) { split($i, a, "="); f[a[1]] = a[2] }
  e = f["engine"]; id = f["backend"] SUBSEP f["mb"]
  bytes[e, id] = f["bytes"]
  split("savepoint_ms stop_ms restore_ms start_ms", ms, " ")
  for (m in ms) { k = e SUBSEP id SUBSEP ms[m]; val[k, ++cnt[k]] = f[ms[m]] + 0 }
}
END {
  print "| State | Backend | Size sluice | Size Flink | Savepoint sluice | Savepoint Flink | Stop sluice | Stop Flink | Restore sluice | Restore Flink | Start sluice | Start Flink |"
  print "|---|---|---|---|---|---|---|---|---|---|---|---|"
  nm = split(mbs, M, ","); nb = split(bes, BE, ",")
  for (i = 1; i <= nm; i++) for (j = 1; j <= nb; j++) {
    id = BE[j] SUBSEP M[i]
    st = M[i] >= 1000 ? sprintf("%g GB", M[i] / 1000) : M[i] " MB"
    line = "| " st " | " (BE[j] == "rocksdb" ? "RocksDB" : "heap") " | " \
      size((("sluice", id) in bytes) ? bytes["sluice", id] : -1) " | " size((("flink", id) in bytes) ? bytes["flink", id] : -1)
    split("savepoint_ms stop_ms restore_ms start_ms", ms, " ")
    for (m = 1; m <= 4; m++) line = line " | " stat("sluice" SUBSEP id SUBSEP ms[m]) " | " stat("flink" SUBSEP id SUBSEP ms[m])
    print line " |"
  }
  print ""
  print "medians (min–max) of the counted runs; load average before: " lb "; after: " la
}' "$RAW"
