/*
 * test_join_api.c — the joins' builder checks (user mistakes reported by
 * name before the job runs), bad input (rows without timestamps), and the
 * regular join's state TTL against a reference.
 */
#include <stdatomic.h>
#include <time.h>

#include "pipeline_util.h"
#include "sluice/join.h"
#include "test.h"

static int nop_join(void *ctx, const uint8_t *key, uint32_t keylen, const sl_record_t *l, const sl_record_t *r,
                    sl_collector_t *out) {
    return 0;
}

static int to_text(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    sl_rw_set_str(out, 0, "x", 1);
    sl_rw_set_i64(out, 1, sl_row_i64(&in->row, 1));
    return 0;
}

static sl_schema_t *pair_schema(void) { return sl_schema_parse("a BIGINT, b BIGINT", NULL, 0); }

typedef enum {
    M_KEY_TYPES,
    M_BOUNDS,
    M_EXCLUSIVE_EMPTY,
    M_NO_FN,
    M_NO_ASSIGNER,
    M_BAD_TTL,
    M_NO_KEYED,
} mistake_t;

/* Builds a job with one mistake; returns sl_env_execute's code and copies
 * the error. */
static int build_mistake(mistake_t m, char *err, size_t cap) {
    sl_env_t *env = sl_env_new();
    sl_stream_t *a = sl_from_source(env, counter_source(10, 1), sl_wm_monotonous("ts"), "a");
    sl_stream_t *b = sl_from_source(env, counter_source(10, 1), sl_wm_monotonous("ts"), "b");
    sl_keyed_t *ka = sl_key_by(a, "id"), *kb = sl_key_by(b, "id");
    if (m == M_KEY_TYPES)
        kb = sl_key_by(sl_map(b, to_text, NULL, sl_schema_parse("name VARCHAR, ts BIGINT", NULL, 0)), "name");
    sl_join_fn_t fn = {.join = nop_join};
    sl_stream_t *o = NULL;
    switch (m) {
    case M_KEY_TYPES:
    case M_BOUNDS:
        o = sl_interval_join_process(sl_interval_join(ka, kb, m == M_BOUNDS ? 5 : -1, m == M_BOUNDS ? 4 : 1), fn,
                                     pair_schema());
        break;
    case M_EXCLUSIVE_EMPTY:
        o = sl_interval_join_process(
            sl_interval_join_upper_exclusive(sl_interval_join_lower_exclusive(sl_interval_join(ka, kb, 3, 4))), fn,
            pair_schema());
        break;
    case M_NO_FN:
        o = sl_regular_join_process(sl_regular_join(ka, kb), (sl_join_fn_t){0}, pair_schema());
        break;
    case M_NO_ASSIGNER:
        o = sl_window_join_apply(sl_window_join(ka, kb, NULL), NULL, NULL, pair_schema());
        break;
    case M_BAD_TTL:
        o = sl_regular_join_process(sl_regular_join_ttl(sl_regular_join(ka, kb), sl_state_ttl(0)), fn,
                                    pair_schema());
        break;
    case M_NO_KEYED:
        o = sl_interval_join_process(sl_interval_join(ka, NULL, 0, 1), fn, pair_schema());
        break;
    }
    if (o) sl_sink_to(o, sl_print_sink(NULL), "print");
    int rc = sl_env_execute(env, "mistake");
    snprintf(err, cap, "%s", sl_env_error(env));
    sl_env_destroy(env);
    return rc;
}

TEST(builder_mistakes_are_named) {
    char err[1024];
    CHECK_EQ(build_mistake(M_KEY_TYPES, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "interval join: keys are incompatible: left key 'id' is BIGINT, right key 'name' is VARCHAR");
    CHECK_EQ(build_mistake(M_BOUNDS, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "lower bound 5 is above the upper bound 4");
    CHECK_EQ(build_mistake(M_EXCLUSIVE_EMPTY, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "lower bound 3 (exclusive) is above the upper bound 4 (exclusive)");
    CHECK_EQ(build_mistake(M_NO_FN, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "regular join: no join function given");
    CHECK_EQ(build_mistake(M_NO_ASSIGNER, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "window join: no window assigner given");
    CHECK_EQ(build_mistake(M_BAD_TTL, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "regular join: the state TTL must be > 0 ms");
    CHECK_EQ(build_mistake(M_NO_KEYED, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "interval join: the right input is not a keyed stream");
}

/* ---- regular join with a state TTL ----
 *
 * One source (parallelism 1) emits tagged rows (side, key, ts, id) in two
 * phases, split into the two inputs by filters.  Phase 1 runs at
 * processing time 0; every key of it has rows on both sides, so once the
 * sink holds every phase-1 pair, every phase-1 row has been processed.
 * Then the clock jumps by ten TTLs and phase 2 comes: its rows must join
 * only each other, because phase 1's rows have expired.  Reference: the
 * pairs within each phase. */

typedef struct trow {
    int64_t side, key, id;
} trow_t;

typedef struct ttl_case {
    trow_t *rows;
    int n, phase1;       /* rows[0..phase1) are phase 1 */
    int64_t want1;       /* phase-1 pairs */
    collected_t *sink;
    atomic_llong clock;
    int64_t ttl;
} ttl_case_t;

typedef struct ttl_reader {
    ttl_case_t *c;
    int pos;
} ttl_reader_t;

static int tr_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    ttl_reader_t *r = calloc(1, sizeof *r);
    r->c = ctx;
    *reader = r;
    *nsplits = 1;
    return 0;
}

static int tr_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    ttl_reader_t *r = reader;
    ttl_case_t *c = r->c;
    int emitted = 0;
    while (emitted < max && r->pos < c->n) {
        if (r->pos == c->phase1 && atomic_load(&c->clock) == 0) {
            pthread_mutex_lock(&c->sink->mu);
            int64_t got = c->sink->n;
            pthread_mutex_unlock(&c->sink->mu);
            if (got < c->want1) {
                struct timespec ts = {0, 1000000};
                nanosleep(&ts, NULL);
                return SL_SRC_IDLE; /* nothing now: the task flushes its output */
            }
            atomic_store(&c->clock, 10 * c->ttl);
        }
        const trow_t *t = &c->rows[r->pos++];
        sl_row_writer_t *w = sl_src_row(out);
        sl_rw_set_i64(w, 0, t->side);
        sl_rw_set_i64(w, 1, t->key);
        sl_rw_set_i64(w, 2, r->pos);
        sl_rw_set_i64(w, 3, t->id);
        sl_src_emit(out, 0, SL_NO_TIMESTAMP);
        emitted++;
    }
    return r->pos == c->n ? SL_SRC_END : SL_SRC_MORE;
}

static void tr_destroy_reader(void *r) { free(r); }
static void tr_destroy(void *c) { (void)c; }

static const sl_source_ops_t ttl_src_ops = {.name = "ttl-script",
                                            .create_reader = tr_create,
                                            .poll = tr_poll,
                                            .destroy_reader = tr_destroy_reader,
                                            .destroy = tr_destroy};

static int64_t ttl_clock(void *ctx) { return atomic_load(&((ttl_case_t *)ctx)->clock); }

static int is_left(void *ctx, const sl_record_t *in) { return sl_row_i64(&in->row, 0) == 0; }
static int is_right(void *ctx, const sl_record_t *in) { return sl_row_i64(&in->row, 0) == 1; }

static int id_pair(void *ctx, const uint8_t *key, uint32_t keylen, const sl_record_t *l, const sl_record_t *r,
                   sl_collector_t *out) {
    sl_row_writer_t *w = sl_out_row(out);
    sl_rw_set_i64(w, 0, sl_row_i64(&l->row, 3));
    sl_rw_set_i64(w, 1, sl_row_i64(&r->row, 3));
    sl_emit(out);
    return 0;
}

static uint64_t trng = 88172645463325252ULL;
static int64_t trnd(int64_t lo, int64_t hi) {
    trng ^= trng << 13;
    trng ^= trng >> 7;
    trng ^= trng << 17;
    return lo + (int64_t)(trng % (uint64_t)(hi - lo + 1));
}

static int cmp_pair(const void *a, const void *b) {
    const int64_t *x = a, *y = b;
    return x[0] != y[0] ? (x[0] < y[0] ? -1 : 1) : x[1] != y[1] ? (x[1] < y[1] ? -1 : 1) : 0;
}

static bool ttl_case_run(int p, bool rocksdb) {
    ttl_case_t c = {0};
    c.ttl = 1000;
    int keys = (int)trnd(1, 5);
    c.rows = calloc(400, sizeof *c.rows);
    int64_t id = 0;
    for (int phase = 0; phase < 2; phase++) {
        int start = c.n;
        for (int k = 0; k < keys; k++)
            for (int side = 0; side < 2; side++)
                for (int i = (int)trnd(1, 3); i > 0; i--) c.rows[c.n++] = (trow_t){side, k, id++};
        for (int i = c.n - 1; i > start; i--) { /* shuffle the phase */
            int j = start + (int)trnd(0, i - start);
            trow_t t = c.rows[i];
            c.rows[i] = c.rows[j];
            c.rows[j] = t;
        }
        if (phase == 0) c.phase1 = c.n;
    }
    /* reference */
    int64_t (*want)[2] = calloc(400 * 400, sizeof *want), nwant = 0;
    for (int i = 0; i < c.n; i++)
        for (int j = 0; j < c.n; j++)
            if (c.rows[i].side == 0 && c.rows[j].side == 1 && c.rows[i].key == c.rows[j].key &&
                (i < c.phase1) == (j < c.phase1)) {
                want[nwant][0] = c.rows[i].id;
                want[nwant++][1] = c.rows[j].id;
                if (i < c.phase1) c.want1++;
            }
    c.sink = collected_new();
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, p);
    sl_env_set_clock(env, ttl_clock, &c);
    if (rocksdb) {
        char rdb[1200];
        snprintf(rdb, sizeof rdb, "%s/ttl-rocks", sl_test_tmpdir());
        sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);
        sl_env_set_rocksdb_options(env, rdb, 8 << 20, 2 << 20);
    }
    sl_source_t src = {&ttl_src_ops, &c,
                       sl_schema_parse("side BIGINT NOT NULL, key BIGINT NOT NULL, ts BIGINT NOT NULL, "
                                       "id BIGINT NOT NULL",
                                       NULL, 0)};
    sl_stream_t *s = sl_parallelism(sl_from_source(env, src, sl_wm_none(), "rows"), 1);
    sl_keyed_t *l = sl_key_by(sl_filter(s, is_left, NULL), "key"), *r = sl_key_by(sl_filter(s, is_right, NULL), "key");
    sl_join_fn_t fn = {.join = id_pair};
    sl_stream_t *o = sl_regular_join_process(sl_regular_join_ttl(sl_regular_join(l, r), sl_state_ttl(c.ttl)), fn,
                                             sl_schema_parse("l BIGINT NOT NULL, r BIGINT NOT NULL", NULL, 0));
    sl_parallelism(sl_sink_to(o, collect_sink(c.sink), "out"), 1);
    int rc = sl_env_execute(env, "ttl");
    if (rc) fprintf(stderr, "  ttl job: %s\n", sl_env_error(env));
    sl_env_destroy(env);
    int64_t (*got)[2] = calloc((size_t)c.sink->n + 1, sizeof *got);
    sl_schema_t *os = sl_schema_parse("l BIGINT NOT NULL, r BIGINT NOT NULL", NULL, 0);
    for (int64_t i = 0; i < c.sink->n; i++) {
        sl_row_t row = collected_row(c.sink, i, os);
        got[i][0] = sl_row_i64(&row, 0);
        got[i][1] = sl_row_i64(&row, 1);
    }
    qsort(want, (size_t)nwant, sizeof *want, cmp_pair);
    qsort(got, (size_t)c.sink->n, sizeof *got, cmp_pair);
    bool ok = rc == 0 && c.sink->n == nwant && memcmp(want, got, (size_t)nwant * sizeof *want) == 0;
    if (!ok)
        fprintf(stderr, "  ttl p=%d %s: %lld pairs, want %lld (phase 1: %lld)\n", p, rocksdb ? "rocksdb" : "heap",
                (long long)c.sink->n, (long long)nwant, (long long)c.want1);
    sl_schema_unref(os);
    free(got);
    free(want);
    free(c.rows);
    collected_free(c.sink);
    return ok;
}

/* A row without an event timestamp fails the task with a message naming
 * the join and the side. */
TEST(rows_without_timestamps_fail_by_name) {
    ttl_case_t c = {0};
    trow_t rows[3] = {{0, 1, 1}, {0, 2, 2}, {0, 1, 3}};
    c.rows = rows;
    c.n = c.phase1 = 3;
    sl_env_t *env = sl_env_new();
    sl_source_t src = {&ttl_src_ops, &c,
                       sl_schema_parse("side BIGINT NOT NULL, key BIGINT NOT NULL, ts BIGINT NOT NULL, "
                                       "id BIGINT NOT NULL",
                                       NULL, 0)};
    sl_stream_t *a = sl_from_source(env, src, sl_wm_none(), "a");
    sl_stream_t *b = sl_from_source(env, counter_source(10, 1), sl_wm_monotonous("ts"), "b");
    sl_join_fn_t fn = {.join = nop_join};
    sl_stream_t *o = sl_interval_join_process(sl_interval_join(sl_key_by(a, "key"), sl_key_by(b, "id"), -2, 2), fn,
                                              pair_schema());
    sl_sink_to(o, sl_print_sink(NULL), "print");
    int rc = sl_env_execute(env, "no-timestamps");
    CHECK(rc < 0);
    CHECK_CONTAINS(sl_env_error(env), "IntervalJoin[-2, 2]: a left row has no timestamp");
    sl_env_destroy(env);
}

TEST(regular_join_ttl_forgets_rows) {
    for (int i = 0; i < 6; i++) CHECK(ttl_case_run(1 + i % 3, i % 2 == 1));
}

int main(void) {
    RUN(builder_mistakes_are_named);
    RUN(rows_without_timestamps_fail_by_name);
    RUN(regular_join_ttl_forgets_rows);
    TEST_MAIN_END();
}
