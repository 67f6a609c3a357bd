/*
 * bench_interval_join.c — throughput of the interval join (sluice/join.h)
 * on a simple generated input.
 *
 *   bench_interval_join [rows_per_side [keys [lower upper [p [rocksdb]]]]]
 *
 * Two generated sources (parallelism 1 each) emit rows_per_side rows
 * (key BIGINT, ts BIGINT, v BIGINT): ts advances 1 ms per row with up to
 * 4 ms of disorder, keys are uniform in [0, keys); watermarks are bounded
 * by 5 ms.  The join (parallelism p, heap or RocksDB) pairs rows with
 * l.ts + lower <= r.ts <= l.ts + upper and emits (left v, right v) into a
 * counting sink.  Prints input records per second through the join (both
 * sides) and per join subtask, and the number of pairs.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/join.h"
#include "sluice/sluice.h"

typedef struct gen {
    int64_t n, keys;
    uint64_t seed;
} gen_t;

typedef struct gen_reader {
    gen_t *g;
    int64_t i;
    uint64_t s;
} gen_reader_t;

static uint64_t xs(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static int g_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    gen_reader_t *r = calloc(1, sizeof *r);
    r->g = ctx;
    r->s = r->g->seed;
    *reader = r;
    *nsplits = 1;
    return 0;
}

static int g_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    gen_reader_t *r = reader;
    int k = 0;
    while (k < max && r->i < r->g->n) {
        uint64_t x = xs(&r->s);
        int64_t ts = r->i - (int64_t)(x % 5);
        sl_row_writer_t *w = sl_src_row(out);
        sl_rw_set_i64(w, 0, (int64_t)((x >> 8) % (uint64_t)r->g->keys));
        sl_rw_set_i64(w, 1, ts < 0 ? 0 : ts);
        sl_rw_set_i64(w, 2, r->i);
        sl_src_emit(out, 0, ts < 0 ? 0 : ts);
        r->i++;
        k++;
    }
    return r->i == r->g->n ? SL_SRC_END : SL_SRC_MORE;
}

static void g_destroy_reader(void *r) { free(r); }
static void g_destroy(void *g) { free(g); }

static const sl_source_ops_t gen_ops = {.name = "join-gen",
                                        .create_reader = g_create,
                                        .poll = g_poll,
                                        .destroy_reader = g_destroy_reader,
                                        .destroy = g_destroy};

static int pair(void *ctx, const uint8_t *key, uint32_t keylen, const sl_record_t *l, const sl_record_t *r,
                sl_collector_t *out) {
    sl_row_writer_t *w = sl_out_row(out);
    sl_rw_set_i64(w, 0, sl_row_i64(&l->row, 2));
    sl_rw_set_i64(w, 1, sl_row_i64(&r->row, 2));
    sl_emit(out);
    return 0;
}

int main(int argc, char **argv) {
    int64_t n = argc > 1 ? atoll(argv[1]) : 1000000;
    int64_t keys = argc > 2 ? atoll(argv[2]) : 10000;
    int64_t lower = argc > 3 ? atoll(argv[3]) : -5, upper = argc > 4 ? atoll(argv[4]) : 5;
    int p = argc > 5 ? atoi(argv[5]) : 1;
    int rocks = argc > 6 ? atoi(argv[6]) : 0;
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, p);
    if (rocks) sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);
    sl_keyed_t *k[2];
    for (int side = 0; side < 2; side++) {
        gen_t *g = calloc(1, sizeof *g);
        g->n = n;
        g->keys = keys;
        g->seed = 0x9E3779B97F4A7C15ULL + (uint64_t)side;
        sl_source_t src = {&gen_ops, g,
                           sl_schema_parse("key BIGINT NOT NULL, ts BIGINT NOT NULL, v BIGINT NOT NULL", NULL, 0)};
        sl_stream_t *s = sl_parallelism(sl_from_source(env, src, sl_wm_bounded("ts", 5), side ? "right" : "left"), 1);
        k[side] = sl_key_by(s, "key");
    }
    sl_join_fn_t fn = {.join = pair};
    sl_stream_t *o = sl_interval_join_process(sl_interval_join(k[0], k[1], lower, upper), fn,
                                              sl_schema_parse("l BIGINT NOT NULL, r BIGINT NOT NULL", NULL, 0));
    sl_counting_sink_stats_t *st = NULL;
    sl_sink_to(o, sl_counting_sink(&st), "count");
    int64_t t0 = sl_now_ms();
    int rc = sl_env_execute(env, "bench-interval-join");
    int64_t ms = sl_now_ms() - t0;
    if (rc) {
        fprintf(stderr, "failed: %s\n", sl_env_error(env));
        return 1;
    }
    double rps = 2.0 * (double)n / ((double)(ms ? ms : 1) / 1000.0);
    printf("interval join [%lld, %lld], %lld rows per side, %lld keys, p=%d, %s: %lld ms, %.0f records/s "
           "(%.0f per join subtask), %lld pairs\n",
           (long long)lower, (long long)upper, (long long)n, (long long)keys, p, rocks ? "rocksdb" : "heap",
           (long long)ms, rps, rps / p, (long long)sl_counting_sink_count(st));
    sl_env_destroy(env);
    return 0;
}
