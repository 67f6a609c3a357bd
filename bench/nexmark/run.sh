#!/usr/bin/env bash
# bench/nexmark/run.sh — Nexmark on sluice and on Apache Flink, head to head on
# this machine: every query on both engines, one after the other, over the
# same events (the same generator, ported; the harness checks both produce
# the same event checksum and, per query, the same result count and result
# checksum), at the same parallelism.
#
#   bench/nexmark/run.sh                      all queries, all configurations, 3 runs each (long)
#   bench/nexmark/run.sh --quick              1 run, 1M events, fewer configurations (~10 minutes)
#   bench/nexmark/run.sh --queries q0,q5 --events 5M --runs 3
#   bench/nexmark/run.sh --configs sluice,flink-hashmap --no-latency
#   bench/nexmark/run.sh --table FILE         re-print the tables of an earlier raw file
#
# Options
#   --queries LIST     q0,q1,q2,q3,q4,q5,q7,q8,q11 (default: all), and ij, cep (the interval
#                      join and CEP queries of Toolkit.java / examples/nexmark/ij.c, cep.c)
#   --events N         events per throughput run (default 5M; --quick 1M)
#   --runs R           runs per configuration; the tables show medians (default 3; --quick 1)
#   -p P               parallelism of both engines (default 2)
#   --configs LIST     sluice, sluice-ck, sluice-rocksdb, sluice-rocksdb-ck, flink-hashmap,
#                      flink-hashmap-ck, flink-rocksdb, flink-rocksdb-ck, flink-sql, flink-sql-ck,
#                      flink-sql-rocksdb, flink-sql-rocksdb-ck (default: all; --quick: sluice-ck,
#                      flink-hashmap-ck, flink-sql-ck, flink-rocksdb-ck).  -ck: exactly-once
#                      checkpoints every 10 s; sluice = heap state, flink-hashmap = Flink's heap;
#                      flink-sql = the official Nexmark SQL on Flink's planner with the Nexmark
#                      project's own settings (mini-batch, two-phase aggregation, object reuse;
#                      sql/compiler's NexmarkBench), HashMap state or RocksDB
#   --ck-interval MS   checkpoint interval of the -ck configurations (default 10000; a run
#                      shorter than it completes no checkpoint: the tables show how many did)
#   --event-rate E     events per second of event time (default 1M; see README)
#   --lat-rate R       latency runs: the input rate both engines get (default 20K); each engine
#                      also runs at half of its own saturation (its median throughput above)
#   --lat-duration S   latency runs: seconds (default 10)
#   --no-latency       skip the latency runs
#   --latency-only     only the latency runs; "half its saturation" from --saturation-from FILE
#   --saturation-from FILE  raw results whose throughput runs set the half-saturation rates
#   --no-build         use the existing builds
#
# Throughput: events / wall second and events / CPU second ("per core": user +
# sys of the whole process — sluice: around sl_env_execute; Flink: the whole
# JVM from the first generated event to the end of the job, so the
# MiniCluster's start-up is left out but JIT and GC are in).  Peak RSS is the
# process's high-water mark.  Flink's rows also give its throughput over the second half of
# the events ("2nd half": from when every source split had emitted half of its events), past
# the JIT's warm-up.  checkpoints: completed checkpoints (sluice's
# count; Flink: the number of its last completed checkpoint), median.  ratio = sluice per core / Flink per core, with
# the state backend and checkpoints matched (flink-hashmap[-ck] against
# sluice[-ck], flink-rocksdb[-ck] against sluice-rocksdb[-ck], or the heap
# run when there is none); the summary table at the end divides by the faster Flink
# variant (DataStream or SQL) of each setting, over the whole run and over its second half.
# flink-sql's result count is compared only for append-only queries (updates=0): an
# updating query's changelog depends on mini-batching.  Latency: the input is emitted at a fixed rate, event time follows
# the schedule; a result's latency is measured from when it could first be
# produced (see examples/nexmark/nexmark_main.c); p50/p99 over the run minus
# a warm-up.
#
# Raw key=value lines go to build-nexmark-bench/nexmark-<date>.txt.
set -euo pipefail

ROOT="${NEXMARK_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}"
BUILD="${NEXMARK_BUILD_DIR:-$ROOT/build-nexmark-bench}"
JAR="$ROOT/bench/nexmark/target/nexmark-flink.jar"
JAVA_OPTS="${NEXMARK_JAVA_OPTS:--Xms2g -Xmx2g}"

QUERIES="q0,q1,q2,q3,q4,q5,q7,q8,q11"
EVENTS=""
RUNS=""
P=2
CONFIGS=""
EVENT_RATE=1M
CK_MS=10000
LAT_RATE=20K
LAT_DURATION=10
LATENCY=1
LAT_ONLY=0
SAT_FILE=""
BUILD_IT=1
QUICK=0
TABLE_ONLY=""
while [ $# -gt 0 ]; do
    a="$1"; shift
    case "$a" in
    --quick) QUICK=1 ;;
    --queries) QUERIES="$1"; shift ;;
    --events) EVENTS="$1"; shift ;;
    --runs) RUNS="$1"; shift ;;
    -p) P="$1"; shift ;;
    --configs) CONFIGS="$1"; shift ;;
    --event-rate) EVENT_RATE="$1"; shift ;;
    --ck-interval) CK_MS="$1"; shift ;;
    --lat-rate) LAT_RATE="$1"; shift ;;
    --lat-duration) LAT_DURATION="$1"; shift ;;
    --no-latency) LATENCY=0 ;;
    --latency-only) LAT_ONLY=1 ;;
    --saturation-from) SAT_FILE="$1"; shift ;;
    --no-build) BUILD_IT=0 ;;
    --table) TABLE_ONLY="$1"; shift ;;
    -h | --help) sed -n '2,44p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run.sh: unknown argument '$a' (--help)" >&2; exit 2 ;;
    esac
done
if [ "$QUICK" = 1 ]; then
    EVENTS="${EVENTS:-1M}"; RUNS="${RUNS:-1}"
    CONFIGS="${CONFIGS:-sluice-ck,flink-hashmap-ck,flink-sql-ck,flink-rocksdb-ck}"
    LAT_DURATION=5
fi
EVENTS="${EVENTS:-5M}"
RUNS="${RUNS:-3}"
CONFIGS="${CONFIGS:-sluice,sluice-ck,sluice-rocksdb,sluice-rocksdb-ck,flink-hashmap,flink-hashmap-ck,flink-rocksdb,flink-rocksdb-ck,flink-sql,flink-sql-ck,flink-sql-rocksdb,flink-sql-rocksdb-ck}"

# ---- tables ---------------------------------------------------------------
tables() {
awk '
function field(line, key,    m) {
    if (match(line, " " key "=[^ ]*")) return substr(line, RSTART + length(key) + 2, RLENGTH - length(key) - 2)
    return ""
}
function median(label, key, scale,    n, i, j, t, v, a) {
    n = 0
    for (i = 1; i <= cnt[label]; i++) { v = field(rows[label, i], key); if (v == "" || v == "nan") continue; a[++n] = v / scale }
    if (!n) return ""
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
function range(label, key, scale, fmt,    i, v, lo, hi) {
    lo = ""; hi = ""
    for (i = 1; i <= cnt[label]; i++) { v = field(rows[label, i], key); if (v == "" || v == "nan") continue; v /= scale
        if (lo == "" || v < lo) lo = v; if (hi == "" || v > hi) hi = v }
    if (cnt[label] < 2 || lo == "") return ""
    return sprintf(" (" fmt "-" fmt ")", lo, hi)
}
/^gen / { gen[++ngen] = $0; next }
{
    if (!match($0, /^label="[^"]*"/)) next
    label = substr($0, 8, RLENGTH - 8)
    if ($0 ~ / FAILED/) { failed[label]++; if (!(label in cnt)) { order[++nl] = label; cnt[label] = 0 } ; next }
    if (!(label in cnt)) order[++nl] = label
    rows[label, ++cnt[label]] = $0
}
END {
    for (i = 1; i <= ngen; i++) print gen[i]
    # per query
    nq = 0
    for (k = 1; k <= nl; k++) { split(order[k], f, "|"); q = f[1]; if (!(q in seenq)) { seenq[q] = 1; qs[++nq] = q } }
    for (iq = 1; iq <= nq; iq++) {
        q = qs[iq]
        print ""
        print "### " q
        print ""
        print "| engine, state, checkpoints | runs | M events/s | M events/s per core | per core, 2nd half | CPU s | peak RSS MB | results | checkpoints | sluice/Flink per core | load1 |"
        print "|---|---|---|---|---|---|---|---|---|---|---|"
        delete base; ref = ""; refout = ""
        for (k = 1; k <= nl; k++) {
            split(order[k], f, "|"); if (f[1] != q || f[2] != "tput") continue
            if (f[3] ~ /^sluice/) base[f[3]] = median(order[k], "eps_per_core", 1)
        }
        for (k = 1; k <= nl; k++) {
            split(order[k], f, "|"); if (f[1] != q || f[2] != "tput") continue
            l = order[k]; c = f[3]
            ok = ""
            for (i = 1; i <= cnt[l] && c !~ /^flink-sql/; i++) {
                r = field(rows[l, i], "out") ":" field(rows[l, i], "checksum")
                if (ref == "") { ref = r; refout = field(rows[l, i], "out") }
                if (r != ref) ok = "MISMATCH"
            }
            if (ok == "" && cnt[l]) ok = "ok " field(rows[l, 1], "out")
            if (c ~ /^flink-sql/ && cnt[l]) {
                # SQL rows have other columns (no common checksum): the count of an append-only result
                for (i = 1; i <= cnt[l]; i++) {
                    if (field(rows[l, i], "updates") != "0") { ok = "updating (" field(rows[l, i], "out") " + " field(rows[l, i], "updates") " changes)"; break }
                    if (refout != "" && field(rows[l, i], "out") != refout) { ok = "COUNT MISMATCH " field(rows[l, i], "out"); break }
                }
            }
            if (failed[l]) ok = ok " " failed[l] " failed"
            ratio = "-"
            pc = median(l, "eps_per_core", 1)
            if (c ~ /^flink/ && pc != "") {
                ck = (c ~ /-ck$/) ? "-ck" : ""
                st = (c ~ /rocksdb/) ? "rocksdb" : "heap"
                b = ""
                if (c ~ /rocksdb/ && base["sluice-rocksdb" ck] != "") b = base["sluice-rocksdb" ck]
                else if (base["sluice" ck] != "") b = base["sluice" ck]
                if (b != "") ratio = sprintf("%.1fx", b / pc)
                # the faster Flink variant of this setting, for the summary
                key = q "|" st ck
                if (!(key in best) || pc > best[key]) { best[key] = pc; bestc[key] = c }
                h = median(l, "eps_per_core_2h", 1)
                if (h != "" && (!(key in best2) || h > best2[key])) { best2[key] = h; best2c[key] = c }
                if (b != "") sl[key] = b
                if (!(key in seenk)) { seenk[key] = 1; keys[++nkeys] = key }
            }
            if (!cnt[l]) { printf "| %s | 0 | | | | | | %s | | | |\n", c, ok; continue }
            nck = median(l, "checkpoints", 1)
            h = median(l, "eps_per_core_2h", 1)
            printf "| %s | %d | %.2f%s | %.2f%s | %s | %.2f | %.0f | %s | %s | %s | %.1f |\n", c, cnt[l],
                median(l, "eps", 1e6), range(l, "eps", 1e6, "%.2f"), pc / 1e6, range(l, "eps_per_core", 1e6, "%.2f"),
                (h == "" ? "-" : sprintf("%.2f", h / 1e6)),
                median(l, "cpu_s", 1), median(l, "max_rss_mb", 1), ok, (nck == "" ? "-" : nck), ratio, median(l, "load1", 1)
        }
        hdr = 0
        for (k = 1; k <= nl; k++) {
            split(order[k], f, "|"); if (f[1] != q || f[2] != "lat") continue
            l = order[k]
            if (!hdr) { print ""; print "| latency @ rate | runs | p50 us | p99 us | max us | samples |"; print "|---|---|---|---|---|---|"; hdr = 1 }
            if (!cnt[l]) { printf "| %s | 0 (failed) | | | | |\n", f[3]; continue }
            printf "| %s @ %s/s | %d | %.1f%s | %.1f%s | %.0f | %d |\n", f[3], field(rows[l, 1], "rate"), cnt[l],
                median(l, "p50_us", 1), range(l, "p50_us", 1, "%.1f"), median(l, "p99_us", 1), range(l, "p99_us", 1, "%.1f"),
                median(l, "max_us", 1), median(l, "latency_samples", 1)
        }
    }
    if (nkeys) {
        print ""
        print "### sluice against the faster Flink variant (DataStream or SQL), per core"
        print ""
        print "| query | state, checkpoints | sluice M ev/s per core | faster Flink (whole run) | **ratio** | faster Flink (2nd half) | **ratio** |"
        print "|---|---|---|---|---|---|---|"
        for (k = 1; k <= nkeys; k++) {
            key = keys[k]; split(key, f, "|")
            if (!(key in sl)) continue
            r2 = "-"; b2 = "-"
            if (key in best2) { b2 = sprintf("%.2f (%s)", best2[key] / 1e6, best2c[key]); r2 = sprintf("**%.1fx**", sl[key] / best2[key]) }
            printf "| %s | %s | %.2f | %.2f (%s) | **%.1fx** | %s | %s |\n", f[1], f[2], sl[key] / 1e6,
                best[key] / 1e6, bestc[key], sl[key] / best[key], b2, r2
        }
    }
    print ""
}' "$1"
}

if [ -n "$TABLE_ONLY" ]; then
    tables "$TABLE_ONLY"
    exit 0
fi

# ---- build ----------------------------------------------------------------
if [ "$BUILD_IT" = 1 ]; then
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release >/dev/null
    ninja -C "$BUILD" -j2 nexmark >/dev/null
    if [ ! -f "$JAR" ] || [ -n "$(find "$ROOT/bench/nexmark/src" "$ROOT/bench/nexmark/pom.xml" -newer "$JAR" 2>/dev/null)" ]; then
        (cd "$ROOT/bench/nexmark" && mvn -q -B package)
    fi
    sqljar="$ROOT/sql/compiler/target/sluice-sql-compiler.jar"
    case ",$CONFIGS," in *,flink-sql*)
        if [ ! -f "$sqljar" ] || [ -n "$(find "$ROOT/sql/compiler/src" "$ROOT/sql/compiler/pom.xml" "$ROOT/bench/nexmark/src" -newer "$sqljar" 2>/dev/null)" ]; then
            (cd "$ROOT/sql/compiler" && mvn -q -B package)
        fi ;;
    esac
fi
SLUICE="$BUILD/nexmark"
[ -x "$SLUICE" ] || { echo "run.sh: $SLUICE not built" >&2; exit 1; }
[ -f "$JAR" ] || { echo "run.sh: $JAR not built (cd bench/nexmark && mvn -q package)" >&2; exit 1; }
FLINK=(java $JAVA_OPTS -jar "$JAR")
SQLJAR="$ROOT/sql/compiler/target/sluice-sql-compiler.jar"
FLINK_SQL=(java $JAVA_OPTS -cp "$SQLJAR" sluice.sql.NexmarkBench --queries-dir "$ROOT/tests/data/sql/nexmark")
case ",$CONFIGS," in *,flink-sql*)
    [ -f "$SQLJAR" ] || { echo "run.sh: $SQLJAR not built (scripts/build.sh builds it)" >&2; exit 1; } ;;
esac

mkdir -p "$BUILD"
RAW="$BUILD/nexmark-$(date +%Y%m%d-%H%M%S).txt"
: >"$RAW"
CK_BASE="$(mktemp -d /tmp/nexmark-ck.XXXXXX)"
trap 'rm -rf "$CK_BASE"' EXIT

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
echo "sluice: $SLUICE; flink: $JAR ($JAVA_OPTS); p=$P events=$EVENTS runs=$RUNS event-rate=$EVENT_RATE" >&2

# ---- the generators agree -------------------------------------------------
g1="$("$SLUICE" --gen-checksum 1M --event-rate "$EVENT_RATE")"
g2="$("${FLINK[@]}" --gen-checksum 1M --event-rate "$EVENT_RATE")"
c1="$(echo "$g1" | grep -o 'gen_checksum=[0-9a-f]*')"
c2="$(echo "$g2" | grep -o 'gen_checksum=[0-9a-f]*')"
if [ "$c1" = "$c2" ]; then verdict="same events"; else verdict="DIFFERENT EVENTS"; fi
echo "gen first 1M events: sluice $c1, flink $c2: $verdict" | tee -a "$RAW" >&2
[ "$c1" = "$c2" ] || { echo "run.sh: the generators disagree; fix before comparing" >&2; exit 1; }

run_one() { # label, command...
    local label="$1"; shift
    local line
    if line="$("$@" 2>>"$RAW.stderr" | grep '^engine=')"; then
        echo "label=\"$label\" $line" >>"$RAW"
        echo "  [$label] $(echo "$line" | grep -o ' \(eps\|eps_per_core\|max_rss_mb\|out\|p50_us\|p99_us\|load1\)=[^ ]*' | tr -d '\n')" >&2
    else
        echo "label=\"$label\" FAILED" >>"$RAW"
        echo "  [$label] FAILED (see $RAW.stderr)" >&2
    fi
}

half_saturation() { # query, config: half the median eps of its throughput runs (or its -ck runs)
    awk -v a="label=\"$1|tput|$2\"" -v b="label=\"$1|tput|$2-ck\"" '
        index($0, a " ") == 1 || index($0, b " ") == 1 {
            if (match($0, / eps=[0-9.]+/)) v[++n] = substr($0, RSTART + 5, RLENGTH - 5) }
        END { if (!n) exit; for (i = 2; i <= n; i++) { t = v[i]; for (j = i - 1; j >= 1 && v[j] > t; j--) v[j + 1] = v[j]; v[j + 1] = t }
              m = (n % 2) ? v[(n + 1) / 2] : (v[n / 2] + v[n / 2 + 1]) / 2; printf "%d", m / 2 }' "${SAT_FILE:-$RAW}"
}

engine_cmd() { # config -> command line prefix (without query/events)
    local c="$1" ck=""
    case "$c" in *-ck) ck="--checkpoint-interval $CK_MS --checkpoint-dir $CK_BASE/$c" ;; esac
    case "$c" in
    sluice | sluice-ck) echo "$SLUICE $ck" ;;
    sluice-rocksdb | sluice-rocksdb-ck) echo "$SLUICE --backend rocksdb $ck" ;;
    flink-hashmap | flink-hashmap-ck) echo "${FLINK[*]} --backend hashmap $ck" ;;
    flink-rocksdb | flink-rocksdb-ck) echo "${FLINK[*]} --backend rocksdb $ck" ;;
    flink-sql | flink-sql-ck) echo "${FLINK_SQL[*]} --backend hashmap $ck" ;;
    flink-sql-rocksdb | flink-sql-rocksdb-ck) echo "${FLINK_SQL[*]} --backend rocksdb $ck" ;;
    *) echo "run.sh: unknown configuration '$c'" >&2; exit 2 ;;
    esac
}

IFS=, read -r -a QS <<<"$QUERIES"
IFS=, read -r -a CS <<<"$CONFIGS"
for q in "${QS[@]}"; do
    for ((r = 1; r <= RUNS && !LAT_ONLY; r++)); do
        for c in "${CS[@]}"; do
            # shellcheck disable=SC2046
            run_one "$q|tput|$c" $(engine_cmd "$c") --query "$q" --events "$EVENTS" -p "$P" --event-rate "$EVENT_RATE"
            rm -rf "${CK_BASE:?}/$c"
        done
    done
    if [ "$LATENCY" = 1 ]; then
        # the same fixed rate for both engines, then each at half of its own
        # saturation (the median wall-clock rate of its throughput runs above)
        for ((r = 1; r <= RUNS; r++)); do
            for c in sluice flink-hashmap; do
                # shellcheck disable=SC2046
                run_one "$q|lat|$c" $(engine_cmd "$c") --query "$q" -p "$P" --rate "$LAT_RATE" --latency \
                    --duration "$LAT_DURATION"
            done
        done
        for c in sluice flink-hashmap; do
            half="$(half_saturation "$q" "$c")"
            [ -n "$half" ] || continue
            for ((r = 1; r <= RUNS; r++)); do
                # shellcheck disable=SC2046
                run_one "$q|lat|$c at half its saturation" $(engine_cmd "$c") --query "$q" -p "$P" --rate "$half" \
                    --latency --duration "$LAT_DURATION"
            done
        done
    fi
done

tables "$RAW"
echo "raw results: $RAW" >&2
