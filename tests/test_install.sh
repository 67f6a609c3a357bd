#!/usr/bin/env bash
# tests/test_install.sh BUILD_DIR SOURCE_DIR [SANITIZERS] — ctest test_install.
#
# Installs the build in BUILD_DIR into a temporary prefix
# (`cmake --install BUILD_DIR --prefix P`), then, against P alone (no
# include path into the source tree):
#   - checks the installed files: every public header, libsluice.a,
#     libsluice.so, bin/sluice, lib/pkgconfig/sluice.pc; and that no
#     installed header includes anything but the system's and its siblings;
#   - compiles a user's job with `pkg-config --cflags --libs sluice` (shared
#     library) and once with `--static` and libsluice.a (and checks that
#     binary does not need libsluice.so);
#   - runs both.  The job (datagen -> map -> key_by -> tumbling event-time
#     window count/sum -> file sink, the mapped rows also to a second file
#     sink; parallelism and a job key read from a config.yaml through
#     sluice/config.h) checks its window results against a brute-force
#     reference it computes from the second file, and prints "OK <n>".
# SANITIZERS (e.g. address,undefined) is what the build was compiled with:
# the job is compiled with it too, since the installed libraries need it.
set -euo pipefail
build=${1:?build dir}
src=${2:?source dir}
san=${3:-}
tmp_base=${SLUICE_TEST_TMP:-/tmp}
mkdir -p "$tmp_base"
work=$(mktemp -d "$tmp_base/install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix
fail() { echo "test_install: FAIL: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 || { cat "$work/install.log" >&2; fail "cmake --install"; }

# ---- the installed tree -------------------------------------------------
libdir=$(dirname "$(find "$prefix" -name sluice.pc -path '*pkgconfig*' | head -1)")
[ -n "$libdir" ] && [ -f "$libdir/sluice.pc" ] || fail "no sluice.pc under $prefix"
libdir=$(cd "$libdir/.." && pwd)
for f in "$libdir/libsluice.a" "$libdir/libsluice.so" "$prefix/bin/sluice"; do
  [ -f "$f" ] || fail "missing $f"
done
for h in "$src"/include/sluice/*.h; do
  [ -f "$prefix/include/sluice/$(basename "$h")" ] || fail "header $(basename "$h") not installed"
done
# public headers include only system headers and each other
while read -r line; do
  inc=${line#*\"}; inc=${inc%%\"*}
  [ -f "$prefix/include/sluice/$inc" ] || fail "an installed header includes \"$inc\", which is not installed: $line"
done < <(grep -h '^#include "' "$prefix"/include/sluice/*.h || true)
"$prefix/bin/sluice" --version | grep -q '^sluice ' || fail "installed sluice --version"

export PKG_CONFIG_PATH=$libdir/pkgconfig
export PKG_CONFIG_LIBDIR=$libdir/pkgconfig:/usr/lib/x86_64-linux-gnu/pkgconfig:/usr/lib/pkgconfig:/usr/share/pkgconfig
pkg-config --exists sluice || fail "pkg-config does not find sluice"
cflags=$(pkg-config --cflags sluice)
case "$cflags" in *"-I$src/include"* | *"-I$src/src"*) fail "pkg-config --cflags points into the source tree: $cflags" ;; esac

# ---- a user's job ---------------------------------------------------------
cat >"$work/job.c" <<'EOF'
/* A user's job: compiled against the installed headers alone. */
#include <sluice/config.h>
#include <sluice/sluice.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define WINDOW_MS 60000

/* amount -> 2 * amount, ts -> ts_ms (BIGINT) */
static int doubled(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    sl_rw_set_i64(out, 0, sl_row_i64(&in->row, 0));
    sl_rw_set_f64(out, 1, 2 * sl_row_f64(&in->row, 1));
    sl_rw_set_i64(out, 2, sl_row_i64(&in->row, 2));
    return 0;
}

typedef struct { int64_t n; double sum; } acc_t;
static void a_init(void *ctx, void *acc) { memset(acc, 0, sizeof(acc_t)); }
static int a_add(void *ctx, void *acc, const sl_record_t *in) {
    ((acc_t *)acc)->n++;
    ((acc_t *)acc)->sum += sl_row_f64(&in->row, 1);
    return 0;
}
static int a_result(void *ctx, const void *acc, const uint8_t *key, uint32_t keylen, const sl_window_t *w,
                    sl_row_writer_t *out) {
    int64_t card;
    memcpy(&card, key, sizeof card);
    sl_rw_set_i64(out, 0, w->start);
    sl_rw_set_i64(out, 1, card);
    sl_rw_set_i64(out, 2, ((const acc_t *)acc)->n);
    sl_rw_set_f64(out, 3, ((const acc_t *)acc)->sum);
    return 0;
}

/* The reference: per (window start, card) count and sum from the rows. */
typedef struct { int64_t start, card, n; double sum; int seen; } cell_t;
static cell_t cells[200000];
static int ncells;
static cell_t *cell(int64_t start, int64_t card) {
    for (int i = 0; i < ncells; i++)
        if (cells[i].start == start && cells[i].card == card) return &cells[i];
    if (ncells == 200000) exit(3);
    cells[ncells] = (cell_t){start, card, 0, 0, 0};
    return &cells[ncells++];
}

int main(int argc, char **argv) {
    char err[2048];
    sl_config_t *cfg = sl_config_new();
    if (sl_config_add_namespace(cfg, "job", err, sizeof err) || sl_config_load_file(cfg, argv[1], err, sizeof err)) {
        fprintf(stderr, "config: %s\n", err);
        return 1;
    }
    int64_t events = 0;
    if (sl_config_get_int(cfg, "job.events", &events, err, sizeof err)) {
        fprintf(stderr, "config: %s\n", err);
        return 1;
    }
    sl_env_t *env = sl_env_new();
    sl_env_configure(env, cfg);
    sl_config_destroy(cfg);

    sl_datagen_opts_t g = sl_datagen_defaults();
    g.count = events;
    g.cards = 50;
    g.splits = 2;
    g.late_fraction = 0;
    g.max_disorder_ms = 0;
    g.ts_step_ms = 100;
    sl_stream_t *tx = sl_from_source(env, sl_datagen_source(g), sl_wm_bounded("ts", 0), "transactions");
    sl_stream_t *m = sl_map(tx, doubled, NULL,
                            sl_schema_parse("card_id BIGINT NOT NULL, amount2 DOUBLE NOT NULL, ts_ms BIGINT NOT NULL",
                                            NULL, 0));
    sl_aggregate_fn_t fn = {.acc_size = sizeof(acc_t), .init = a_init, .add = a_add, .result = a_result};
    sl_stream_t *w = sl_window_aggregate(
        sl_window(sl_key_by(m, "card_id"), sl_tumbling_event_time(WINDOW_MS, 0)), fn,
        sl_schema_parse("start BIGINT NOT NULL, card_id BIGINT NOT NULL, n BIGINT NOT NULL, total DOUBLE NOT NULL",
                        NULL, 0));
    sl_parallelism(sl_sink_to(w, sl_file_sink(argv[2], SL_FMT_JSON), "windows"), 1);
    sl_parallelism(sl_sink_to(m, sl_file_sink(argv[3], SL_FMT_JSON), "rows"), 1);
    if (sl_env_execute(env, "installed-job") < 0) {
        fprintf(stderr, "job failed: %s\n", sl_env_error(env));
        return 1;
    }
    sl_env_destroy(env);

    char line[512];
    FILE *f = fopen(argv[3], "r");
    int64_t rows = 0;
    while (f && fgets(line, sizeof line, f)) {
        long long card, ts;
        double a;
        if (sscanf(line, "{\"card_id\":%lld,\"amount2\":%lf,\"ts_ms\":%lld}", &card, &a, &ts) != 3) {
            fprintf(stderr, "bad row line: %s", line);
            return 2;
        }
        int64_t start = ts - ((ts % WINDOW_MS) + WINDOW_MS) % WINDOW_MS;
        cell_t *c = cell(start, card);
        c->n++;
        c->sum += a;
        rows++;
    }
    if (f) fclose(f);
    if (rows != events) {
        fprintf(stderr, "%lld rows, expected %lld\n", (long long)rows, (long long)events);
        return 2;
    }
    f = fopen(argv[2], "r");
    int nw = 0;
    while (f && fgets(line, sizeof line, f)) {
        long long start, card, n;
        double total;
        if (sscanf(line, "{\"start\":%lld,\"card_id\":%lld,\"n\":%lld,\"total\":%lf}", &start, &card, &n, &total) != 4) {
            fprintf(stderr, "bad window line: %s", line);
            return 2;
        }
        cell_t *c = cell(start, card);
        double d = c->sum - total;
        if (c->seen++ || c->n != n || d > 1e-6 * (1 + (c->sum < 0 ? -c->sum : c->sum)) || -d > 1e-6 * (1 + (c->sum < 0 ? -c->sum : c->sum))) {
            fprintf(stderr, "window %lld card %lld: got n=%lld total=%.17g, reference n=%lld sum=%.17g (seen %d)\n", start,
                    card, n, total, (long long)c->n, c->sum, c->seen);
            return 2;
        }
        nw++;
    }
    if (f) fclose(f);
    if (nw != ncells) {
        fprintf(stderr, "%d windows, the reference has %d\n", nw, ncells);
        return 2;
    }
    printf("OK %d windows\n", nw);
    return 0;
}
EOF

printf 'parallelism.default: 2\njob:\n  events: 20000\n' >"$work/config.yaml"

sanflags=()
[ -n "$san" ] && sanflags=(-fsanitize="$san" -fno-omit-frame-pointer)

run_job() { # name, then the command
  local name=$1; shift
  rm -f "$work/windows-$name.jsonl" "$work/rows-$name.jsonl"
  "$@" "$work/config.yaml" "$work/windows-$name.jsonl" "$work/rows-$name.jsonl" >"$work/$name.out" 2>&1 ||
    { cat "$work/$name.out" >&2; fail "$name job failed"; }
  grep -q '^OK ' "$work/$name.out" || { cat "$work/$name.out" >&2; fail "$name job: no OK"; }
  echo "test_install: $name: $(cat "$work/$name.out")"
}

# shared: the README's line
# shellcheck disable=SC2046
cc -std=c11 -Wall -Wextra -Wno-unused-parameter -Werror "${sanflags[@]}" "$work/job.c" -o "$work/job_shared" $(pkg-config --cflags --libs sluice) \
  2>"$work/cc_shared.log" || { cat "$work/cc_shared.log" >&2; fail "compiling against libsluice.so"; }
LD_LIBRARY_PATH=$libdir run_job shared "$work/job_shared"

# static: libsluice.a and the private dependencies from --static
static_libs=$(pkg-config --libs --static sluice)
static_libs=${static_libs/-lsluice/-l:libsluice.a}
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Wno-unused-parameter -Werror "${sanflags[@]}" "$work/job.c" -o "$work/job_static" $(pkg-config --cflags sluice) \
  $static_libs 2>"$work/cc_static.log" || { cat "$work/cc_static.log" >&2; fail "linking libsluice.a with --static"; }
if ldd "$work/job_static" | grep -q libsluice; then fail "the static job needs libsluice.so"; fi
run_job static "$work/job_static"
echo "test_install: ok"
