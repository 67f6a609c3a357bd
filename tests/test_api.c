/*
 * test_api.c — the parts of the public API that make mistakes hard:
 *   - keyed-state handles kept in a context shared by subtasks reach each
 *     subtask's own state (no assertion, correct counts at parallelism 4);
 *   - SL_FN_COPY gives each subtask its own copy of a plain context;
 *   - typed fields by name (sl_field_*) and their build-time errors;
 *   - composite keys (sl_key_by_fields) with the built-in window aggregates
 *     (sl_window_agg) on tumbling, sliding (sliced) and session windows,
 *     compared with a brute-force reference computed here;
 *   - sl_window_reduce_with: the window's metadata in a reduce's result;
 *   - the build-time errors of sl_window_agg, with their positions.
 */
#include <math.h>

#include "pipeline_util.h"
#include "test.h"

/* ---- a deterministic input: row i of n, fields derived from i ---------- */

static uint64_t h64(uint64_t x) {
    x += 0x9e3779b97f4a7c15ULL;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

typedef struct gen_row {
    int64_t a;      /* key part 1 (NULL when a_null) */
    bool a_null;
    int32_t b;      /* key part 2 */
    bool v_null;
    double v;       /* value (NULL when v_null) */
    int64_t iv;     /* integer value */
    int64_t ts;
} gen_row_t;

static uint64_t g_seed;

static gen_row_t gen(int64_t id) {
    uint64_t x = h64((uint64_t)id ^ g_seed);
    gen_row_t r;
    r.a = (int64_t)(x % 5);
    r.a_null = (x >> 8) % 11 == 0;
    r.b = (int32_t)((x >> 16) % 3);
    r.v_null = (x >> 24) % 7 == 0;
    r.v = (double)((x >> 32) % 1000) / 8.0 - 40.0;
    r.iv = (int64_t)((x >> 40) % 2001) - 1000;
    r.ts = id * 7 + (int64_t)((x >> 50) % 40); /* disorder below 40 ms */
    return r;
}

static const char *GEN_DDL = "a BIGINT, b INT NOT NULL, v DOUBLE, iv BIGINT NOT NULL, ts BIGINT NOT NULL";

static int gen_map(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    gen_row_t r = gen(sl_row_i64(&in->row, 0));
    if (r.a_null)
        sl_rw_set_null(out, 0);
    else
        sl_rw_set_i64(out, 0, r.a);
    sl_rw_set_i32(out, 1, r.b);
    if (r.v_null)
        sl_rw_set_null(out, 2);
    else
        sl_rw_set_f64(out, 2, r.v);
    sl_rw_set_i64(out, 3, r.iv);
    sl_rw_set_i64(out, 4, r.ts);
    return 0;
}

static sl_stream_t *gen_stream(sl_env_t *env, int64_t n, int splits) {
    sl_stream_t *s = sl_from_source(env, counter_source(n, splits), sl_wm_none(), "ids");
    s = sl_map(s, gen_map, NULL, sl_schema_parse(GEN_DDL, NULL, 0));
    return sl_assign_timestamps(s, sl_wm_bounded("ts", 200)); /* above the disorder: nothing is late */
}

/* ---- shared context with state handles ---------------------------------- */

typedef struct shared_ctx {
    sl_state_t *count; /* written by every subtask's open: the mistake */
} shared_ctx_t;

static int sh_open(void *ctx, sl_rt_t *rt) {
    shared_ctx_t *c = ctx;
    c->count = sl_state_value(rt, "count");
    return c->count ? 0 : SL_EINVAL;
}

static int sh_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    shared_ctx_t *c = ctx;
    uint32_t len;
    const void *v = sl_value_get(c->count, &len);
    int64_t n = 0;
    if (v) memcpy(&n, v, 8);
    n++;
    sl_value_put(c->count, &n, 8);
    sl_row_writer_t *w = sl_out_row(out);
    sl_rw_set_i64(w, 0, sl_row_i64(&in->row, 0) % 10);
    sl_rw_set_i64(w, 1, n);
    sl_emit(out);
    return 0;
}

static int64_t mod10_key_of(const sl_row_t *r) { return sl_row_i64(r, 0) % 10; }

static int mod10(void *ctx, const sl_row_t *row, uint8_t *key, int cap) {
    int64_t k = mod10_key_of(row);
    memcpy(key, &k, 8);
    return 8;
}

TEST(shared_context_state_handles) {
    const int64_t N = 20000;
    shared_ctx_t ctx = {0};
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 4);
    sl_stream_t *s = sl_from_source(env, counter_source(N, 4), sl_wm_none(), "ids");
    sl_process_fn_t fn = {.open = sh_open, .process = sh_process, .opts = {.ctx = &ctx}};
    s = sl_keyed_process(sl_key_by_fn(s, mod10, NULL), fn, sl_schema_parse("k BIGINT, n BIGINT", NULL, 0));
    collected_t *c = collected_new();
    sl_sink_to(s, collect_sink(c), "out");
    int rc = sl_env_execute(env, "shared-ctx");
    if (rc != 0) fprintf(stderr, "%s\n", sl_env_error(env));
    CHECK_EQ(rc, 0);
    CHECK_EQ(c->n, N);
    /* per key, the counts seen are exactly 1..(records of the key) */
    sl_schema_t *os = sl_schema_parse("k BIGINT, n BIGINT", NULL, 0);
    int64_t maxn[10] = {0}, sum[10] = {0};
    for (int64_t i = 0; i < c->n; i++) {
        sl_row_t r = collected_row(c, i, os);
        int64_t k = sl_row_i64(&r, 0), n = sl_row_i64(&r, 1);
        CHECK(k >= 0 && k < 10);
        if (n > maxn[k]) maxn[k] = n;
        sum[k] += n;
    }
    for (int k = 0; k < 10; k++) {
        CHECK_EQ(maxn[k], N / 10);
        CHECK_EQ(sum[k], (N / 10) * (N / 10 + 1) / 2);
    }
    sl_schema_unref(os);
    collected_free(c);
    sl_env_destroy(env);
}

/* ---- SL_FN_COPY ------------------------------------------------------------ */

typedef struct seq_ctx {
    int64_t seen;
} seq_ctx_t;

static int seq_flat(void *ctx, const sl_record_t *in, sl_collector_t *out) {
    seq_ctx_t *c = ctx;
    c->seen++;
    sl_row_writer_t *w = sl_out_row(out);
    sl_rw_set_i64(w, 0, sl_row_i64(&in->row, 0));
    sl_rw_set_i64(w, 1, c->seen);
    sl_emit(out);
    return 0;
}

TEST(fn_copy_gives_each_subtask_its_context) {
    const int64_t N = 40000;
    seq_ctx_t proto = {.seen = 0};
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 4);
    sl_stream_t *s = sl_from_source(env, counter_source(N, 4), sl_wm_none(), "ids");
    /* chained with the source: subtask k sees ids k, k+4, ... in order */
    s = sl_flat_map_ex(s, seq_flat, SL_FN_COPY(&proto), sl_schema_parse("id BIGINT, seen BIGINT", NULL, 0));
    collected_t *c = collected_new();
    sl_sink_to(s, collect_sink(c), "out");
    CHECK_EQ(sl_env_execute(env, "fn-copy"), 0);
    CHECK_EQ(c->n, N);
    sl_schema_t *os = sl_schema_parse("id BIGINT, seen BIGINT", NULL, 0);
    for (int64_t i = 0; i < c->n; i++) {
        sl_row_t r = collected_row(c, i, os);
        CHECK_EQ(sl_row_i64(&r, 1), sl_row_i64(&r, 0) / 4 + 1);
    }
    CHECK_EQ(proto.seen, 0); /* the user's own struct is never written */
    sl_schema_unref(os);
    collected_free(c);
    sl_env_destroy(env);
}

/* ---- typed fields ------------------------------------------------------------ */

typedef struct fsum_ctx {
    sl_field_f64_t v;
    sl_field_i64_t iv;
    sl_field_f64_t out_x;
} fsum_ctx_t;

static int fields_map(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    const fsum_ctx_t *c = ctx;
    double x = (double)sl_get_i64(&in->row, c->iv);
    if (!sl_row_is_null(&in->row, c->v.i)) x += sl_get_f64(&in->row, c->v);
    sl_set_f64(out, c->out_x, x);
    return 0;
}

TEST(typed_fields) {
    sl_env_t *env = sl_env_new();
    sl_stream_t *s = gen_stream(env, 1000, 1);
    sl_schema_t *out = sl_schema_parse("x DOUBLE NOT NULL", NULL, 0);
    fsum_ctx_t fc = {.v = sl_field_f64(env, sl_stream_schema(s), "v"),
                     .iv = sl_field_i64(env, sl_stream_schema(s), "iv"),
                     .out_x = sl_field_f64(env, out, "x")};
    CHECK_STR(sl_env_error(env), "");
    CHECK(fc.v.i == 2 && fc.iv.i == 3 && fc.out_x.i == 0);
    s = sl_map(s, fields_map, &fc, out);
    collected_t *c = collected_new();
    sl_sink_to(s, collect_sink(c), "out");
    CHECK_EQ(sl_env_execute(env, "fields"), 0);
    CHECK_EQ(c->n, 1000);
    double got = 0, want = 0;
    sl_schema_t *os = sl_schema_parse("x DOUBLE NOT NULL", NULL, 0);
    for (int64_t i = 0; i < c->n; i++) {
        sl_row_t r = collected_row(c, i, os);
        got += sl_row_f64(&r, 0);
    }
    for (int64_t i = 0; i < 1000; i++) {
        gen_row_t g = gen(i);
        want += (double)g.iv + (g.v_null ? 0 : g.v);
    }
    CHECK_DBL(got, want);
    sl_schema_unref(os);
    collected_free(c);
    sl_env_destroy(env);

    /* mistakes are reported when the job is built, by name */
    env = sl_env_new();
    s = gen_stream(env, 10, 1);
    sl_field_i64_t bad = sl_field_i64(env, sl_stream_schema(s), "v");
    CHECK_EQ(bad.i, -1);
    CHECK(strstr(sl_env_error(env), "sl_field_i64(\"v\"): field 'v' is DOUBLE, not BIGINT or TIMESTAMP") != NULL);
    CHECK(sl_env_execute(env, "bad") < 0);
    sl_env_destroy(env);
    env = sl_env_new();
    s = gen_stream(env, 10, 1);
    sl_field_f64_t typo = sl_field_f64(env, sl_stream_schema(s), "vv");
    CHECK_EQ(typo.i, -1);
    CHECK(strstr(sl_env_error(env), "no field 'vv'") != NULL);
    CHECK(strstr(sl_env_error(env), "(did you mean 'v'?)") != NULL);
    sl_env_destroy(env);
}

/* ---- composite keys and the built-in aggregates, against a reference ------- */

/* The reference: for every row, every window it belongs to; per (a, b,
 * window): count(*), count(v), sum(v), min(v), max(v), avg(v), sum(iv),
 * min(iv), max(iv), max(ts). */
typedef struct ref_agg {
    int64_t a;
    bool a_null;
    int32_t b;
    int64_t start, end;
    int64_t cnt, cnt_v;
    double sum_v, min_v, max_v;
    int64_t sum_iv, min_iv, max_iv, max_ts;
} ref_agg_t;

typedef struct ref_set {
    ref_agg_t *r;
    int n, cap;
} ref_set_t;

static ref_agg_t *ref_find(ref_set_t *rs, const gen_row_t *g, int64_t start, int64_t end) {
    for (int i = 0; i < rs->n; i++) {
        ref_agg_t *x = &rs->r[i];
        if (x->a_null == g->a_null && (g->a_null || x->a == g->a) && x->b == g->b && x->start == start &&
            x->end == end)
            return x;
    }
    if (rs->n == rs->cap) {
        rs->cap = rs->cap ? rs->cap * 2 : 256;
        rs->r = realloc(rs->r, (size_t)rs->cap * sizeof *rs->r);
    }
    ref_agg_t *x = &rs->r[rs->n++];
    memset(x, 0, sizeof *x);
    x->a = g->a_null ? 0 : g->a;
    x->a_null = g->a_null;
    x->b = g->b;
    x->start = start;
    x->end = end;
    return x;
}

static void ref_add(ref_agg_t *x, const gen_row_t *g) {
    if (x->cnt == 0 || g->iv < x->min_iv) x->min_iv = g->iv;
    if (x->cnt == 0 || g->iv > x->max_iv) x->max_iv = g->iv;
    if (x->cnt == 0 || g->ts > x->max_ts) x->max_ts = g->ts;
    x->cnt++;
    x->sum_iv += g->iv;
    if (!g->v_null) {
        if (x->cnt_v == 0 || g->v < x->min_v) x->min_v = g->v;
        if (x->cnt_v == 0 || g->v > x->max_v) x->max_v = g->v;
        x->cnt_v++;
        x->sum_v += g->v;
    }
}

enum { W_TUMBLING, W_SLIDING, W_SESSION };

/* Session windows: per key, the rows sorted by time; a row opens [ts,
 * ts + gap) and joins the session when it starts at or before the
 * session's end. */
static int cmp_ts(const void *a, const void *b) {
    int64_t x = ((const gen_row_t *)a)->ts, y = ((const gen_row_t *)b)->ts;
    return x < y ? -1 : x > y;
}

static ref_set_t reference(int kind, int64_t n, int64_t size, int64_t slide) {
    ref_set_t rs = {0};
    if (kind != W_SESSION) {
        for (int64_t i = 0; i < n; i++) {
            gen_row_t g = gen(i);
            int64_t step = kind == W_TUMBLING ? size : slide;
            int64_t last = g.ts - ((g.ts % step) + step) % step;
            for (int64_t st = last; st > g.ts - size; st -= step) ref_add(ref_find(&rs, &g, st, st + size), &g);
        }
        return rs;
    }
    for (int an = 0; an < 6; an++)
        for (int32_t b = 0; b < 3; b++) {
            gen_row_t *rows = malloc((size_t)n * sizeof *rows);
            int m = 0;
            for (int64_t i = 0; i < n; i++) {
                gen_row_t g = gen(i);
                bool is_null_key = an == 5;
                if (g.b != b || g.a_null != is_null_key || (!is_null_key && g.a != an)) continue;
                rows[m++] = g;
            }
            qsort(rows, (size_t)m, sizeof *rows, cmp_ts);
            int i = 0;
            while (i < m) {
                int j = i + 1;
                int64_t end = rows[i].ts + size;
                while (j < m && rows[j].ts <= end) { /* Flink's TimeWindow.intersects: touching windows merge */
                    if (rows[j].ts + size > end) end = rows[j].ts + size;
                    j++;
                }
                ref_agg_t *x = ref_find(&rs, &rows[i], rows[i].ts, end);
                for (int k = i; k < j; k++) ref_add(x, &rows[k]);
                i = j;
            }
            free(rows);
        }
    return rs;
}

static const char *AGGS = "count(*), count(v) AS nv, sum(v), min(v), max(v), avg(v), sum(iv), min(iv), max(iv), "
                          "max(ts) AS last_ts";

static void run_agg_case(int kind, int p, int64_t n) {
    int64_t size = kind == W_SESSION ? 60 : 200, slide = 50;
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, p);
    sl_stream_t *s = gen_stream(env, n, 3);
    sl_window_assigner_t *wa = kind == W_TUMBLING  ? sl_tumbling_event_time(size, 0)
                               : kind == W_SLIDING ? sl_sliding_event_time(size, slide, 0)
                                                   : sl_session_event_time(size);
    s = sl_window_agg(sl_window(sl_key_by_fields(s, "a, b"), wa), AGGS);
    CHECK(s != NULL);
    const sl_schema_t *os = sl_stream_schema(s);
    char fmt[1024];
    sl_schema_format(os, fmt, sizeof fmt);
    CHECK_STR(fmt, "a BIGINT, b INT NOT NULL, window_start TIMESTAMP(3) NOT NULL, window_end TIMESTAMP(3) NOT NULL, "
                   "count BIGINT NOT NULL, nv BIGINT NOT NULL, sum_v DOUBLE, min_v DOUBLE, max_v DOUBLE, "
                   "avg_v DOUBLE, sum_iv BIGINT, min_iv BIGINT, max_iv BIGINT, last_ts BIGINT");
    sl_schema_t *osr = sl_schema_ref((sl_schema_t *)os);
    collected_t *c = collected_new();
    sl_sink_to(s, collect_sink(c), "out");
    int rc = sl_env_execute(env, "agg");
    if (rc) fprintf(stderr, "%s\n", sl_env_error(env));
    CHECK_EQ(rc, 0);
    ref_set_t rs = reference(kind, n, size, slide);
    if (c->n != rs.n) fprintf(stderr, "kind %d p %d: %lld results, reference %d\n", kind, p, (long long)c->n, rs.n);
    CHECK_EQ(c->n, rs.n);
    bool *used = calloc((size_t)rs.n + 1, 1);
    for (int64_t i = 0; i < c->n; i++) {
        sl_row_t r = collected_row(c, i, osr);
        gen_row_t key = {.a_null = sl_row_is_null(&r, 0), .a = sl_row_is_null(&r, 0) ? 0 : sl_row_i64(&r, 0),
                         .b = sl_row_i32(&r, 1)};
        int64_t start = sl_row_i64(&r, 2), end = sl_row_i64(&r, 3);
        int before = rs.n;
        ref_agg_t *x = ref_find(&rs, &key, start, end);
        if (rs.n != before) {
            fprintf(stderr, "kind %d p %d: unexpected window a=%lld%s b=%d [%lld, %lld)\n", kind, p, (long long)key.a,
                    key.a_null ? "(null)" : "", key.b, (long long)start, (long long)end);
            CHECK(false);
        }
        int xi = (int)(x - rs.r);
        CHECK(!used[xi]);
        used[xi] = true;
        CHECK_EQ(c->ts[i], end - 1);
        CHECK_EQ(sl_row_i64(&r, 4), x->cnt);
        CHECK_EQ(sl_row_i64(&r, 5), x->cnt_v);
        if (x->cnt_v == 0) {
            for (int f = 6; f <= 9; f++) CHECK(sl_row_is_null(&r, f));
        } else {
            CHECK(fabs(sl_row_f64(&r, 6) - x->sum_v) < 1e-6);
            CHECK_DBL(sl_row_f64(&r, 7), x->min_v);
            CHECK_DBL(sl_row_f64(&r, 8), x->max_v);
            CHECK(fabs(sl_row_f64(&r, 9) - x->sum_v / (double)x->cnt_v) < 1e-9);
        }
        CHECK_EQ(sl_row_i64(&r, 10), x->sum_iv);
        CHECK_EQ(sl_row_i64(&r, 11), x->min_iv);
        CHECK_EQ(sl_row_i64(&r, 12), x->max_iv);
        CHECK_EQ(sl_row_i64(&r, 13), x->max_ts);
    }
    free(used);
    free(rs.r);
    sl_schema_unref(osr);
    collected_free(c);
    sl_env_destroy(env);
}

TEST(window_agg_composite_keys_vs_reference) {
    for (int seed = 1; seed <= 3; seed++) {
        g_seed = (uint64_t)seed * 7919;
        for (int kind = W_TUMBLING; kind <= W_SESSION; kind++)
            for (int p = 1; p <= 3; p += 2) {
                int before = sl_test_failures;
                run_agg_case(kind, p, 3000);
                if (sl_test_failures != before) {
                    fprintf(stderr, "  (seed %d, kind %d, parallelism %d)\n", seed, kind, p);
                    return;
                }
            }
    }
}

/* ---- reduce with the window's metadata ------------------------------------- */

static int max_iv_reduce(void *ctx, const sl_row_t *acc, const sl_row_t *in, sl_row_writer_t *out) {
    sl_rw_copy_row(out, sl_row_i64(in, 3) > sl_row_i64(acc, 3) ? in : acc);
    return 0;
}

static int max_iv_result(void *ctx, const sl_row_t *reduced, const uint8_t *key, uint32_t keylen,
                         const sl_window_t *win, sl_row_writer_t *out) {
    sl_rw_set_i64(out, 0, win->start);
    sl_rw_set_i64(out, 1, win->end);
    sl_rw_set_i32(out, 2, sl_row_i32(reduced, 1));
    sl_rw_set_i64(out, 3, sl_row_i64(reduced, 3));
    return 0;
}

TEST(reduce_with_window_metadata) {
    g_seed = 4242;
    const int64_t n = 4000, size = 300;
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 2);
    sl_stream_t *s = gen_stream(env, n, 2);
    s = sl_window_reduce_with(sl_window(sl_key_by(s, "b"), sl_tumbling_event_time(size, 0)), max_iv_reduce,
                              max_iv_result, NULL, sl_schema_parse("ws BIGINT, we BIGINT, b INT, max_iv BIGINT", NULL, 0));
    CHECK(s != NULL);
    collected_t *c = collected_new();
    sl_sink_to(s, collect_sink(c), "out");
    CHECK_EQ(sl_env_execute(env, "reduce-with"), 0);
    /* reference: per (b, window) the max iv */
    int64_t nwin = (n * 7 + 40) / size + 2;
    int64_t *ref = malloc((size_t)(3 * nwin) * sizeof *ref);
    bool *have = calloc((size_t)(3 * nwin), 1);
    for (int64_t i = 0; i < n; i++) {
        gen_row_t g = gen(i);
        int64_t w = g.ts / size;
        int64_t *x = &ref[g.b * nwin + w];
        if (!have[g.b * nwin + w] || g.iv > *x) *x = g.iv;
        have[g.b * nwin + w] = true;
    }
    int64_t expected = 0;
    for (int64_t i = 0; i < 3 * nwin; i++) expected += have[i];
    CHECK_EQ(c->n, expected);
    sl_schema_t *os = sl_schema_parse("ws BIGINT, we BIGINT, b INT, max_iv BIGINT", NULL, 0);
    for (int64_t i = 0; i < c->n; i++) {
        sl_row_t r = collected_row(c, i, os);
        int64_t ws = sl_row_i64(&r, 0), we = sl_row_i64(&r, 1);
        int32_t b = sl_row_i32(&r, 2);
        CHECK_EQ(we - ws, size);
        CHECK_EQ(ws % size, 0);
        CHECK(have[b * nwin + ws / size]);
        CHECK_EQ(sl_row_i64(&r, 3), ref[b * nwin + ws / size]);
        have[b * nwin + ws / size] = false; /* each window once */
    }
    free(ref);
    free(have);
    sl_schema_unref(os);
    collected_free(c);
    sl_env_destroy(env);
}

/* ---- build-time errors of sl_window_agg and sl_key_by_fields ------------- */

static void expect_agg_error(const char *aggs, const char *keys, const char *msg) {
    sl_env_t *env = sl_env_new();
    sl_stream_t *s = gen_stream(env, 10, 1);
    sl_keyed_t *k = sl_key_by_fields(s, keys);
    sl_stream_t *r = sl_window_agg(sl_window(k, sl_tumbling_event_time(100, 0)), aggs);
    if (!strstr(sl_env_error(env), msg))
        fprintf(stderr, "aggs \"%s\" keys \"%s\": got \"%s\", want \"%s\"\n", aggs, keys, sl_env_error(env), msg);
    if (strstr(sl_env_error(env), msg) == NULL) sl_test_failures++;
    if (r) sl_test_failures++;
    if (sl_env_execute(env, "bad") >= 0) sl_test_failures++;
    sl_env_destroy(env);
}

TEST(window_agg_errors) {
    int before = sl_test_failures;
    expect_agg_error("count(*), median(v)", "a", "column 11: unknown aggregate 'median'");
    expect_agg_error("sum(vv)", "a", "column 5: no field 'vv'");
    expect_agg_error("sum(v", "a", "column 6: expected ')'");
    expect_agg_error("sum(*)", "a", "only count takes *");
    expect_agg_error("sum(v) min(v)", "a", "column 8: expected ',' between aggregates");
    expect_agg_error("count(*), count(v) AS count", "a", "output column 'count' appears twice");
    expect_agg_error("count(*)", "a, c", "key_by_fields: no field 'c'");
    expect_agg_error("count(*)", "a, b, a", "field 'a' is named twice");
    expect_agg_error("", "a", "window_agg: no aggregates given");
    CHECK_EQ(sl_test_failures, before);
    /* sum of a VARCHAR */
    sl_env_t *env = sl_env_new();
    sl_schema_t *sc = sl_schema_parse("id BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0);
    sl_stream_t *s = sl_from_source(env, counter_source(10, 1), sl_wm_bounded("ts", 0), "ids");
    s = sl_map(s, gen_map, NULL, sl_schema_parse("a VARCHAR, b INT NOT NULL, v DOUBLE, iv BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0));
    sl_window_agg(sl_window(sl_key_by(s, "b"), sl_tumbling_event_time(100, 0)), "sum(a)");
    CHECK(strstr(sl_env_error(env), "sum of 'a' (VARCHAR): only INT, BIGINT and DOUBLE") != NULL);
    sl_schema_unref(sc);
    sl_env_destroy(env);
}

int main(void) {
    RUN(shared_context_state_handles);
    RUN(fn_copy_gives_each_subtask_its_context);
    RUN(typed_fields);
    RUN(window_agg_composite_keys_vs_reference);
    RUN(reduce_with_window_metadata);
    RUN(window_agg_errors);
    return sl_test_failures ? 1 : 0;
}
