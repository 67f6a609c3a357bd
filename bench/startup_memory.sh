#!/usr/bin/env bash
# bench/startup_memory.sh — start-up time of a job and memory per key of keyed
# state, sluice next to Apache Flink 2.2 (MiniCluster in one JVM), on this
# machine, one run at a time.
#
#   bench/startup_memory.sh                 10M keys, 5 start-up runs per configuration
#   bench/startup_memory.sh --quick         1M keys, 3 start-up runs
#   bench/startup_memory.sh --keys 2M --runs 5 --only memory
#   bench/startup_memory.sh --table FILE    re-print the tables of an earlier raw file
#
# Options
#   --keys N        distinct keys of the memory runs (default 10M; --quick 1M)
#   --runs R        start-up runs per configuration; the table shows medians (default 5; --quick 3)
#   --only WHAT     startup or memory (default: both)
#   --no-build      use the existing builds
#
# Start-up (bench/startup_memory/keymem.c `startup`, Startup.java): a trivial
# bounded job — 5 BIGINT records -> key_by -> keyed process function with a
# value state (sum per key) -> a sink — at parallelism 1.  `keymem launch`
# reads CLOCK_REALTIME, forks and execs the program and waits for it; the
# program prints the wall clock when main starts, when the first record
# reaches its sink, and when the job has ended (sl_env_execute / execute
# returned); also when the job is built and execute is called (Flink starts
# its MiniCluster inside execute).  Times are from the launch; the process exit is the launcher's
# wait4.  Also the `sluice` command (the S1 fraud job, 5 events), from the
# launch to its exit.  Flink runs with the JVM's default options.
#
# Memory (keymem `memory`, KeyMemory.java): keys 0 .. N-1 (BIGINT) each once
# -> key_by -> one value state entry per key (a BIGINT: the running sum of
# the record's value, = the key) -> at a marker record after the last key, the
# process measures itself: VmRSS, VmHWM (peak), and for Flink the heap used
# after System.gc(); for RocksDB the bytes of the files in the database
# directory.  bytes/key = (figure at N keys - figure at 0 keys) / N.  Flink
# runs with -Xmx8g.  RocksDB on both: a 64 MiB block cache and 8 MiB of
# memtables (2 x 4 MiB), Flink's managed memory for RocksDB off so that these
# apply; no write-ahead log on either, so at most the memtables' content is
# not yet on disk when the size is taken.
#
# Builds: the release build of keymem and sluice in build-keymem-bench/ and the
# jar bench/nexmark/target/nexmark-flink.jar (mvn; rebuilt when its sources
# are newer).  Raw key=value lines go to build-keymem-bench/startup-memory-<date>.txt.
set -euo pipefail

ROOT="${KEYMEM_ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)}"
BUILD="${KEYMEM_BUILD_DIR:-$ROOT/build-keymem-bench}"
JAR="${KEYMEM_JAR:-$ROOT/bench/nexmark/target/nexmark-flink.jar}"
MEM_JAVA_OPTS="${KEYMEM_JAVA_OPTS:--Xmx8g}"
CACHE=$((64 << 20))
WBUF=$((8 << 20))

KEYS=""
RUNS=""
ONLY=""
BUILD_IT=1
QUICK=0
TABLE_ONLY=""
while [ $# -gt 0 ]; do
    a="$1"; shift
    case "$a" in
    --quick) QUICK=1 ;;
    --keys) KEYS="$1"; shift ;;
    --runs) RUNS="$1"; shift ;;
    --only) ONLY="$1"; shift ;;
    --no-build) BUILD_IT=0 ;;
    --table) TABLE_ONLY="$1"; shift ;;
    -h | --help) sed -n '2,41p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "startup_memory.sh: unknown argument '$a' (--help)" >&2; exit 2 ;;
    esac
done
if [ "$QUICK" = 1 ]; then KEYS="${KEYS:-1M}"; RUNS="${RUNS:-3}"; fi
KEYS="${KEYS:-10M}"
RUNS="${RUNS:-5}"
case "$ONLY" in "" | startup | memory) ;; *) echo "startup_memory.sh: --only: '$ONLY' is not startup or memory" >&2; exit 2 ;; esac

# ---- tables ---------------------------------------------------------------
tables() {
awk '
function field(line, key,    m) {
    if (match(line, "(^| )" key "=[^ ]*")) { m = substr(line, RSTART, RLENGTH); sub(/^ /, "", m); return substr(m, length(key) + 2) }
    return ""
}
function median(n, a,    i, j, t) {
    if (!n) return ""
    for (i = 2; i <= n; i++) { t = a[i]; for (j = i - 1; j >= 1 && a[j] > t; j--) a[j + 1] = a[j]; a[j + 1] = t }
    return (n % 2) ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2
}
# median over the runs of label l of (field k1 - field k0) / scale; "" when absent
function mdiff(l, k1, k0, scale,    i, n, v, a) {
    n = 0
    for (i = 1; i <= cnt[l]; i++) {
        if (field(rows[l, i], k1) == "" || (k0 != "" && field(rows[l, i], k0) == "")) continue
        v = field(rows[l, i], k1) - (k0 == "" ? 0 : field(rows[l, i], k0))
        a[++n] = v / scale
    }
    return median(n, a)
}
function fmt(v, f) { return v == "" ? "-" : sprintf(f, v) }
/^machine: / { print; next }
{
    if (!match($0, /^label="[^"]*"/)) next
    label = substr($0, 8, RLENGTH - 8)
    if (!(label in cnt)) { order[++nl] = label; cnt[label] = 0 }
    if ($0 ~ / FAILED/) { failed[label]++; next }
    rows[label, ++cnt[label]] = $0
}
END {
    hdr = 0
    for (k = 1; k <= nl; k++) {
        l = order[k]; split(l, f, "|"); if (f[1] != "startup") continue
        if (!hdr) {
            print ""
            print "Start-up: launch (fork + exec) to ... in ms, median of the runs; CPU = user + sys of the whole process"
            print ""
            print "| engine | runs | main() | execute() called | first record at the sink | job end | process exit | CPU s | peak RSS MB | load1 |"
            print "|---|---|---|---|---|---|---|---|---|---|"
            hdr = 1
        }
        fl = failed[l] ? sprintf(" (%d failed)", failed[l]) : ""
        printf "| %s | %d%s | %s | %s | %s | %s | %s | %s | %s | %s |\n", f[2], cnt[l], fl,
            fmt(mdiff(l, "main_ns", "launch_ns", 1e6), "%.1f"), fmt(mdiff(l, "execute_ns", "launch_ns", 1e6), "%.1f"),
            fmt(mdiff(l, "first_record_ns", "launch_ns", 1e6), "%.1f"),
            fmt(mdiff(l, "end_ns", "launch_ns", 1e6), "%.1f"), fmt(mdiff(l, "exit_ns", "launch_ns", 1e6), "%.1f"),
            fmt(mdiff(l, "child_cpu_s", "", 1), "%.3f"), fmt(mdiff(l, "child_max_rss_kb", "", 1024), "%.0f"),
            fmt(mdiff(l, "load1", "", 1), "%.1f")
    }
    hdr = 0
    for (k = 1; k <= nl; k++) {
        l = order[k]; split(l, f, "|"); if (f[1] != "memory" || f[3] == "0") continue
        b = "memory|" f[2] "|0"
        if (!cnt[l] || !cnt[b]) { printf "| %s | FAILED | | | | | | |\n", f[2]; continue }
        n = field(rows[l, 1], "keys") + 0
        if (!hdr) {
            print ""
            printf "Memory per key: %d keys, one BIGINT value state entry per BIGINT key; (figure at %d keys - figure at 0 keys) / keys\n", n, n
            print ""
            print "| engine, state backend | load s | keys/s | RSS after load MB | RSS bytes/key | peak RSS bytes/key | heap after GC bytes/key | disk bytes/key | RSS 0 keys MB |"
            print "|---|---|---|---|---|---|---|---|---|"
            hdr = 1
        }
        r = rows[l, 1]; z = rows[b, 1]
        rss = (field(r, "rss_kb") - field(z, "rss_kb")) * 1024 / n
        hwm = (field(r, "hwm_kb") - field(z, "hwm_kb")) * 1024 / n
        heap = field(r, "heap_used_bytes") == "" ? "-" : sprintf("%.1f", (field(r, "heap_used_bytes") - field(z, "heap_used_bytes")) / n)
        disk = field(r, "backend") == "rocksdb" ? sprintf("%.1f", (field(r, "disk_bytes") - field(z, "disk_bytes")) / n) : "-"
        load = field(r, "load_s")
        rate = "-"
        if (load > 0) rate = sprintf("%.0f", n / load)
        printf "| %s | %.1f | %s | %.0f | %.1f | %.1f | %s | %s | %.0f |\n", f[2], load, rate,
            field(r, "rss_kb") / 1024, rss, hwm, heap, disk, field(z, "rss_kb") / 1024
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
    ninja -C "$BUILD" -j2 keymem sluice_cli >/dev/null
    if [ ! -f "$JAR" ] || [ -n "$(find "$ROOT/bench/nexmark/src" "$ROOT/bench/nexmark/pom.xml" -newer "$JAR" 2>/dev/null)" ]; then
        mvn -q -B -f "$ROOT/bench/nexmark/pom.xml" package
    fi
fi
KEYMEM="$BUILD/keymem"
SLUICE_CLI="$BUILD/sluice"
for f in "$KEYMEM" "$SLUICE_CLI"; do
    [ -x "$f" ] || { echo "startup_memory.sh: $f not built (drop --no-build)" >&2; exit 1; }
done
[ -f "$JAR" ] || { echo "startup_memory.sh: $JAR not built (mvn -q -f bench/nexmark/pom.xml package)" >&2; exit 1; }
unzip -l "$JAR" sluice/nexmark/KeyMemory.class >/dev/null 2>&1 ||
    { echo "startup_memory.sh: $JAR has no sluice/nexmark/KeyMemory.class: rebuild it (mvn -q -f bench/nexmark/pom.xml package)" >&2; exit 1; }

mkdir -p "$BUILD"
RAW="$BUILD/startup-memory-$(date +%Y%m%d-%H%M%S).txt"
: >"$RAW"
WORK="$(mktemp -d /tmp/keymem-bench.XXXXXX)"
trap 'rm -rf "$WORK"' EXIT

machine="machine: $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(free -g | awk '/^Mem:/ {print $2}') GiB, load $(cut -d' ' -f1-3 /proc/loadavg), $(java -version 2>&1 | head -1)"
echo "$machine" | tee -a "$RAW" >&2
echo "keymem: $KEYMEM; flink: $JAR; keys=$KEYS runs=$RUNS" >&2

# One measured run: the label, then the command; every key=value the command
# prints (its own line and the launcher's) goes on one raw line.
run_one() {
    local label="$1"; shift
    local out
    if out="$(cd "$WORK" && "$@" 2>>"$RAW.stderr")" && echo "$out" | grep -q '^launch_ns=\|^engine='; then
        local line
        line="$(echo "$out" | grep '^engine=\|^launch_ns=' | tr '\n' ' ' | sed 's/ $//')"
        echo "label=\"$label\" $line" >>"$RAW"
        echo "  [$label] $(echo "$line" | grep -o ' \(rss_kb\|heap_used_bytes\|disk_bytes\|load_s\|child_cpu_s\|exit_status\)=[^ ]*' | tr '\n' ' ')" >&2
    else
        echo "label=\"$label\" FAILED" >>"$RAW"
        echo "  [$label] FAILED (see $RAW.stderr)" >&2
    fi
}

# ---- start-up ---------------------------------------------------------------
if [ "$ONLY" != memory ]; then
    echo "start-up: $RUNS runs each" >&2
    for ((r = 1; r <= RUNS; r++)); do
        run_one "startup|sluice (embedded, heap)" "$KEYMEM" launch "$KEYMEM" startup --backend heap
        run_one "startup|sluice (embedded, rocksdb)" "$KEYMEM" launch "$KEYMEM" startup --backend rocksdb
        run_one "startup|sluice CLI (S1 fraud job, 5 events)" "$KEYMEM" launch "$SLUICE_CLI" --events 5 --cards 5 \
            --splits 1 -p 1 --output "$WORK/w.jsonl" --late-output "$WORK/l.jsonl"
        run_one "startup|flink (MiniCluster, hashmap)" "$KEYMEM" launch java -cp "$JAR" sluice.nexmark.Startup --backend hashmap
        run_one "startup|flink (MiniCluster, rocksdb)" "$KEYMEM" launch java -cp "$JAR" sluice.nexmark.Startup --backend rocksdb
    done
fi

# ---- memory per key ---------------------------------------------------------
if [ "$ONLY" != startup ]; then
    echo "memory: 0 and $KEYS keys per configuration" >&2
    for n in 0 "$KEYS"; do
        run_one "memory|sluice heap|$n" "$KEYMEM" memory --keys "$n" --backend heap
        run_one "memory|sluice rocksdb|$n" "$KEYMEM" memory --keys "$n" --backend rocksdb \
            --block-cache "$CACHE" --write-buffer "$WBUF"
        # shellcheck disable=SC2086
        run_one "memory|flink hashmap|$n" java $MEM_JAVA_OPTS -cp "$JAR" sluice.nexmark.KeyMemory --keys "$n" \
            --backend hashmap
        # shellcheck disable=SC2086
        run_one "memory|flink rocksdb|$n" java $MEM_JAVA_OPTS -cp "$JAR" sluice.nexmark.KeyMemory --keys "$n" \
            --backend rocksdb --block-cache "$CACHE" --write-buffer "$WBUF"
    done
fi

tables "$RAW"
echo "raw results: $RAW" >&2
