#!/usr/bin/env bash
# bench/run.sh — builds sluice (Release) in build-bench and runs the pipeline
# benchmarks: every workload 5 times in throughput mode and 3 times in
# latency mode, then prints medians and min/max as tables.
#
#   bench/run.sh            full run (~6-8 minutes on a 2-core machine)
#   bench/run.sh --quick    smoke run, one short run of each (~1 minute)
#   bench/run.sh --no-build skip the build step (combines with --quick)
#   bench/run.sh --table F  only print the tables of an earlier raw file F
#
# Raw result lines go to build-bench/bench-results-<date>.txt (one
# key=value line per run, as printed by bench_pipelines; the latest is also
# copied to build-bench/bench-results.txt); the tables go to stdout.
# Environment: BENCH_BUILD_DIR overrides build-bench; BENCH_FILTER=regex runs
# only the configurations whose label matches; BENCH_CHAIN_EVENTS,
# BENCH_MF_EVENTS, BENCH_WIN_EVENTS, BENCH_WIN10M_EVENTS set the event counts
# of the throughput runs.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
BUILD="${BENCH_BUILD_DIR:-$ROOT/build-bench}"
QUICK=0
BUILD_IT=1
TABLE_ONLY=""
while [ $# -gt 0 ]; do
    a="$1"; shift
    case "$a" in
    --quick) QUICK=1 ;;
    --no-build) BUILD_IT=0 ;;
    --table)
        TABLE_ONLY="${1:-}"; shift || true
        [ -f "$TABLE_ONLY" ] || { echo "run.sh: --table needs a results file" >&2; exit 2; }
        ;;
    -h | --help)
        sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'
        exit 0
        ;;
    *)
        echo "run.sh: unknown argument '$a'" >&2
        exit 2
        ;;
    esac
done

# ---- tables: median (min-max) per label ----
tables() {
awk '
function field(line, key,    m) {
    if (match(line, " " key "=[^ ]*")) { m = substr(line, RSTART + length(key) + 2, RLENGTH - length(key) - 2); return m }
    return ""
}
function med(label, key, fmt,    r) {
    r = stat(label, key, 1, fmt)
    sub(/ \(.*$/, "", r)
    return r
}
function stat(label, key, scale, fmt,    n, i, j, t, v, a, md) {
    n = 0
    for (i = 1; i <= cnt[label]; i++) {
        v = field(rows[label, i], key)
        if (v == "" || v == "-") continue
        a[++n] = v / scale
    }
    if (!n) return "-"
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    md = (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
    if (n == 1) return sprintf(fmt, md)
    return sprintf(fmt " (" fmt "-" fmt ")", md, a[1], a[n])
}
{
    if (!match($0, /^label="[^"]*"/)) next
    label = substr($0, 8, RLENGTH - 8)
    if ($0 ~ / FAILED$/) { failed[label]++; next }
    mode = field($0, "mode")
    if (!(label in cnt)) { order[++nl] = label; modes[label] = mode }
    rows[label, ++cnt[label]] = $0
}
END {
    print ""
    print "Throughput: median of the runs (min-max); M = 10^6 events/s; per core = events / CPU seconds (user+sys)"
    print ""
    print "| workload | runs | M events/s (wall) | M events/s per core | CPU s | RSS MB | load1 | check |"
    print "|---|---|---|---|---|---|---|---|"
    for (k = 1; k <= nl; k++) {
        l = order[k]; if (modes[l] != "throughput") continue
        ok = "ok"; for (i = 1; i <= cnt[l]; i++) if (field(rows[l, i], "check") != "ok") ok = "MISMATCH"
        if (failed[l]) ok = ok ", " failed[l] " failed"
        printf "| %s | %d | %s | %s | %s | %s | %s | %s |\n", l, cnt[l], stat(l, "eps", 1e6, "%.2f"), stat(l, "eps_per_core", 1e6, "%.2f"), stat(l, "cpu_s", 1, "%.2f"), med(l, "max_rss_mb", "%.0f"), med(l, "load1", "%.1f"), ok
    }
    print ""
    print "Latency: median of the runs (min-max); p50/p99 in microseconds; fire delay/span in ms (window only)"
    print ""
    print "| workload | runs | p50 us | p99 us | sched p50 us | sched p99 us | fire delay ms | fire span ms | load1 |"
    print "|---|---|---|---|---|---|---|---|---|"
    for (k = 1; k <= nl; k++) {
        l = order[k]; if (modes[l] != "latency") continue
        printf "| %s | %d | %s | %s | %s | %s | %s | %s | %s |\n", l, cnt[l], stat(l, "p50_us", 1, "%.1f"), stat(l, "p99_us", 1, "%.1f"), stat(l, "sched_p50_us", 1, "%.0f"), stat(l, "sched_p99_us", 1, "%.0f"), stat(l, "fire_delay_ms", 1, "%.1f"), stat(l, "fire_span_ms", 1, "%.1f"), med(l, "load1", "%.1f")
    }
    print ""
}' "$1"
}

if [ -n "$TABLE_ONLY" ]; then
    tables "$TABLE_ONLY"
    exit 0
fi

# The window workload needs the window operator (sl_window_aggregate); until
# it exists the bench is built with BENCH_NO_WINDOW and skips it.
HAVE_WINDOW=1
if ! grep -qs -l 'sl_window_aggregate' "$ROOT"/src/windowing/*.c; then
    HAVE_WINDOW=0
fi

if [ "$BUILD_IT" = 1 ]; then
    FLAGS=""
    [ "$HAVE_WINDOW" = 0 ] && FLAGS="-DBENCH_NO_WINDOW"
    cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release "-DCMAKE_C_FLAGS=$FLAGS" >/dev/null
    ninja -C "$BUILD" bench_pipelines >/dev/null
fi
BIN="$BUILD/bench_pipelines"
[ -x "$BIN" ] || { echo "run.sh: $BIN not built" >&2; exit 1; }

RAW="$BUILD/bench-results-$(date +%Y%m%d-%H%M%S).txt"
: >"$RAW"

# Event counts are sized so that one run takes ~1-5 s.  Each can be
# overridden from the environment.
if [ "$QUICK" = 1 ]; then
    TRUNS=1; LRUNS=1
    CHAIN_EVENTS=10M; MF_EVENTS=5M; WIN_EVENTS=1M; WIN10M_EVENTS=500K
    CHAIN_LAT="--duration 2"; WIN_LAT="--duration 4"
else
    TRUNS=5; LRUNS=3
    CHAIN_EVENTS=50M; MF_EVENTS=30M; WIN_EVENTS=10M; WIN10M_EVENTS=4M
    CHAIN_LAT="--duration 5"; WIN_LAT="--duration 10"
fi
CHAIN_EVENTS="${BENCH_CHAIN_EVENTS:-$CHAIN_EVENTS}"
MF_EVENTS="${BENCH_MF_EVENTS:-$MF_EVENTS}"
WIN_EVENTS="${BENCH_WIN_EVENTS:-$WIN_EVENTS}"
WIN10M_EVENTS="${BENCH_WIN10M_EVENTS:-$WIN10M_EVENTS}"

# label | arguments
THROUGHPUT=(
    "passthrough p=1|passthrough --events $CHAIN_EVENTS"
    "passthrough_net p=1|passthrough_net --events $CHAIN_EVENTS"
    "map_filter p=1|map_filter --events $MF_EVENTS"
)
LATENCY=(
    "passthrough p=1 @1M/s|passthrough --latency --rate 1M $CHAIN_LAT"
    "passthrough_net p=1 @1M/s|passthrough_net --latency --rate 1M $CHAIN_LAT"
    "map_filter p=1 @1M/s|map_filter --latency --rate 1M $CHAIN_LAT"
)
if [ "$HAVE_WINDOW" = 1 ]; then
    for keys in 100K 10M; do
        for p in 1 2; do
            ev="$WIN_EVENTS"; [ "$keys" = 10M ] && ev="$WIN10M_EVENTS"
            # S1's density: 200K events/s of event time over all splits
            # (0.005 ms per event; each split gets every p-th event)
            step=$(awk -v p="$p" 'BEGIN { printf "%g", 0.005 * p }')
            THROUGHPUT+=("window keys=$keys p=$p S1 density|window --keys $keys -p $p --events $ev --ts-step-ms $step")
            THROUGHPUT+=("window keys=$keys p=$p sparse (1 ev/ms/split)|window --keys $keys -p $p --events $ev")
            LATENCY+=("window keys=$keys p=$p @200K/s|window --latency --keys $keys -p $p --rate 200K $WIN_LAT")
        done
    done
else
    echo "note: no window operator in src/windowing yet: window workloads skipped" >&2
fi

run_set() { # runs label|args entries, each $1 times
    local runs="$1"; shift
    local entry label args i line
    for entry in "$@"; do
        label="${entry%%|*}"
        args="${entry#*|}"
        if [ -n "${BENCH_FILTER:-}" ] && ! [[ "$label" =~ $BENCH_FILTER ]]; then continue; fi
        for ((i = 1; i <= runs; i++)); do
            # shellcheck disable=SC2086
            if line="$("$BIN" $args)"; then
                echo "label=\"$label\" $line" >>"$RAW"
                echo "  [$label] run $i/$runs: $(echo "$line" | grep -o ' \(eps\|eps_per_core\|p50_us\|p99_us\|load1\)=[^ ]*' | tr -d '\n')" >&2
            else
                echo "  [$label] run $i/$runs FAILED" >&2
                echo "label=\"$label\" FAILED" >>"$RAW"
            fi
        done
    done
}

echo "machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), load $(cut -d' ' -f1-3 /proc/loadavg)" >&2
run_set "$TRUNS" "${THROUGHPUT[@]}"
run_set "$LRUNS" "${LATENCY[@]}"

tables "$RAW"
cp "$RAW" "$BUILD/bench-results.txt"
echo "raw results: $RAW" >&2
