/* test_pipeline.c — end-to-end jobs on the embedded runtime: chaining,
 * partitioners, keyed state, timers, side outputs, union, connect,
 * failures and backpressure. */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "common/common.h"
#include "connectors/connectors.h"
#include "pipeline_util.h"
#include "test.h"

static int double_map(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    sl_rw_set_i64(out, 0, sl_row_i64(&in->row, 0) * 2);
    sl_rw_set_i64(out, 1, sl_row_i64(&in->row, 1));
    return 0;
}

static int keep_mod4(void *ctx, const sl_record_t *in) { return sl_row_i64(&in->row, 0) % 4 == 0; }

static sl_schema_t *id_ts(void) { return sl_schema_parse("id BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0); }

static void check_ids(collected_t *c, const sl_schema_t *s, int64_t n, int64_t mult, int64_t mod, int copies) {
    (void)s;
}

TEST(map_filter_chain) {
    for (int p = 1; p <= 3; p++) {
        sl_env_t *env = sl_env_new();
        sl_env_set_parallelism(env, p);
        collected_t *c = collected_new();
        sl_stream_t *s = sl_from_source(env, counter_source(10000, 4), sl_wm_none(), "numbers");
        s = sl_map(s, double_map, NULL, id_ts());
        s = sl_filter(s, keep_mod4, NULL);
        sl_sink_to(s, collect_sink(c), "collect");
        int rc = sl_env_execute(env, "chain");
        CHECK_STR(sl_env_error(env), "");
        CHECK_EQ(rc, 0);
        CHECK_EQ(c->n, 5000);
        char *seen = calloc(20000, 1);
        sl_schema_t *sc = id_ts();
        for (int64_t i = 0; i < c->n; i++) {
            sl_row_t r = collected_row(c, i, sc);
            int64_t v = sl_row_i64(&r, 0);
            CHECK(v % 4 == 0 && v < 20000);
            CHECK(!seen[v]);
            seen[v] = 1;
        }
        CHECK_EQ(c->finished, p);
        int64_t in = 0, out = 0;
        CHECK_EQ(sl_env_operator_metrics(env, "Filter", &in, &out), 0);
        CHECK_EQ(in, 10000);
        CHECK_EQ(out, 5000);
        free(seen);
        sl_schema_unref(sc);
        collected_free(c);
        sl_env_destroy(env);
    }
}

/* keyed process: count per key in value state, emit (key, count) */
static sl_state_t *count_state;
typedef struct counter_fn {
    sl_state_t *count;
} counter_fn_t;

static void *counter_clone(const void *ctx) { return calloc(1, sizeof(counter_fn_t)); }
static void counter_free(void *ctx) { free(ctx); }

static int counter_open(void *ctx, sl_rt_t *rt) {
    counter_fn_t *f = ctx;
    f->count = sl_state_value(rt, "count");
    return f->count ? 0 : SL_EINVAL;
}

static int counter_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    counter_fn_t *f = ctx;
    uint32_t len;
    const int64_t *v = sl_value_get(f->count, &len);
    int64_t n = v ? *v + 1 : 1;
    sl_value_put(f->count, &n, sizeof n);
    sl_row_writer_t *w = sl_out_row(out);
    sl_rw_set_i64(w, 0, sl_row_i64(&in->row, 0) % 10);
    sl_rw_set_i64(w, 1, n);
    sl_emit(out);
    return 0;
}

static int mod10_key(void *ctx, const sl_row_t *row, uint8_t *key, int cap) {
    int64_t k = sl_row_i64(row, 0) % 10;
    memcpy(key, &k, 8);
    return 8;
}

TEST(keyed_state_counts) {
    (void)count_state;
    for (int p = 1; p <= 4; p += 3) {
        sl_env_t *env = sl_env_new();
        sl_env_set_parallelism(env, p);
        collected_t *c = collected_new();
        sl_stream_t *s = sl_from_source(env, counter_source(5000, 3), sl_wm_none(), "numbers");
        sl_process_fn_t fn = {.open = counter_open, .process = counter_process,
                              .opts = {NULL, counter_clone, counter_free}};
        sl_stream_t *o = sl_keyed_process(sl_key_by_fn(s, mod10_key, NULL), fn,
                                          sl_schema_parse("k BIGINT NOT NULL, n BIGINT NOT NULL", NULL, 0));
        sl_sink_to(o, collect_sink(c), "collect");
        CHECK_EQ(sl_env_execute(env, "keyed"), 0);
        CHECK_EQ(c->n, 5000);
        int64_t maxn[10] = {0};
        sl_schema_t *sc = sl_schema_parse("k BIGINT NOT NULL, n BIGINT NOT NULL", NULL, 0);
        for (int64_t i = 0; i < c->n; i++) {
            sl_row_t r = collected_row(c, i, sc);
            int64_t k = sl_row_i64(&r, 0), n = sl_row_i64(&r, 1);
            if (n > maxn[k]) maxn[k] = n;
        }
        for (int k = 0; k < 10; k++) CHECK_EQ(maxn[k], 500);
        sl_schema_unref(sc);
        collected_free(c);
        sl_env_destroy(env);
    }
}

/* event-time timers: each record registers a timer at ts + 1000 of its key;
 * on_timer emits (key, timer ts).  With the end-of-input max watermark all
 * fire, once per (key, ts). */
static int timer_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    sl_timer_event(pc, (in->ts / 100) * 100 + 1000);
    return 0;
}

static int timer_fire(void *ctx, sl_pctx_t *pc, int64_t ts, sl_time_domain_t d, sl_collector_t *out) {
    uint32_t kl;
    const uint8_t *k = sl_pctx_key(pc, &kl);
    int64_t key;
    memcpy(&key, k, 8);
    sl_row_writer_t *w = sl_out_row(out);
    sl_rw_set_i64(w, 0, key);
    sl_rw_set_i64(w, 1, ts);
    sl_emit(out);
    /* the watermark has passed the timer */
    return sl_pctx_watermark(pc) >= ts ? 0 : SL_EINVAL;
}

TEST(event_time_timers) {
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 2);
    collected_t *c = collected_new();
    sl_stream_t *s = sl_from_source(env, counter_source(2000, 2), sl_wm_bounded("ts", 10), "numbers");
    sl_process_fn_t fn = {.process = timer_process, .on_timer = timer_fire};
    sl_stream_t *o = sl_keyed_process(sl_key_by_fn(s, mod10_key, NULL), fn,
                                      sl_schema_parse("k BIGINT NOT NULL, t BIGINT NOT NULL", NULL, 0));
    sl_sink_to(o, collect_sink(c), "collect");
    CHECK_EQ(sl_env_execute(env, "timers"), 0);
    CHECK_STR(sl_env_error(env), "");
    /* distinct (id % 10, (id/100)*100 + 1000) for id < 2000: 10 keys * 20 buckets */
    CHECK_EQ(c->n, 200);
    collected_free(c);
    sl_env_destroy(env);
}

/* processing-time timers in a running job (the operator context's timer
 * path) and the buffer timeout: a source that is never idle (one record
 * per poll, 1 ms apart, so only the 100 ms buffer timeout sends its partly
 * filled buffers) feeds a keyed process function that registers a
 * processing-time timer 5..15 ms ahead (rounded to 10 ms, so registrations
 * of one key repeat) for every record but the last 50; the source idles
 * 400 ms before it ends, so every timer is due before the input ends.
 * Every registered (key, ts) fires exactly once, never before its time. */
#define PT_N 400
static pthread_mutex_t pt_mu = PTHREAD_MUTEX_INITIALIZER;
static uint8_t pt_registered[10][4096], pt_fired[10][4096]; /* by key and (ts - base) / 10 */
static int64_t pt_base;
static int pt_early, pt_bad;

static _Thread_local int64_t pt_ended_ms; /* per source subtask (its own thread): when its input ran out */

static int pt_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    struct timespec ts = {0, 1000000L};
    nanosleep(&ts, NULL);
    if (pt_ended_ms) /* idle (so the task flushes) for 400 ms before the end: every timer comes due first */
        return sl_wall_ms() - pt_ended_ms < 400 ? SL_SRC_IDLE : SL_SRC_END;
    int rc = counter_poll(reader, out, 1, err, el);
    if (rc == SL_SRC_END) {
        pt_ended_ms = sl_wall_ms();
        return SL_SRC_IDLE;
    }
    return rc;
}

static sl_source_t pt_source(void) {
    static sl_source_ops_t ops;
    ops = counter_ops;
    ops.poll = pt_poll;
    sl_source_t s = counter_source(PT_N, 2);
    s.ops = &ops;
    return s;
}

static int pt_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    int64_t id = sl_row_i64(&in->row, 0);
    if (id >= PT_N - 50) return 0;
    int64_t t = (sl_pctx_now(pc) + 15) / 10 * 10, slot = (t - pt_base) / 10;
    pthread_mutex_lock(&pt_mu);
    if (slot >= 0 && slot < 4096) pt_registered[id % 10][slot] = 1;
    else pt_bad++;
    pthread_mutex_unlock(&pt_mu);
    sl_timer_processing(pc, t);
    return 0;
}

static int pt_fire(void *ctx, sl_pctx_t *pc, int64_t ts, sl_time_domain_t d, sl_collector_t *out) {
    uint32_t kl;
    const uint8_t *k = sl_pctx_key(pc, &kl);
    int64_t key;
    memcpy(&key, k, 8);
    int64_t slot = (ts - pt_base) / 10;
    pthread_mutex_lock(&pt_mu);
    if (d != SL_TIME_PROCESSING || key < 0 || key >= 10 || slot < 0 || slot >= 4096) pt_bad++;
    else pt_fired[key][slot]++;
    if (sl_pctx_now(pc) < ts) pt_early++;
    pthread_mutex_unlock(&pt_mu);
    return 0;
}

TEST(processing_time_timers) {
    memset(pt_registered, 0, sizeof pt_registered);
    memset(pt_fired, 0, sizeof pt_fired);
    pt_early = pt_bad = 0;
    pt_base = sl_wall_ms() / 10 * 10 - 1000;
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 2);
    collected_t *c = collected_new();
    sl_stream_t *s = sl_from_source(env, pt_source(), sl_wm_none(), "numbers");
    sl_process_fn_t fn = {.process = pt_process, .on_timer = pt_fire};
    sl_stream_t *o = sl_keyed_process(sl_key_by_fn(s, mod10_key, NULL), fn, id_ts());
    sl_sink_to(o, collect_sink(c), "collect");
    CHECK_EQ(sl_env_execute(env, "processing-timers"), 0);
    CHECK_STR(sl_env_error(env), "");
    int registered = 0, fired = 0, missing = 0, twice = 0;
    for (int k = 0; k < 10; k++)
        for (int i = 0; i < 4096; i++) {
            registered += pt_registered[k][i];
            fired += pt_fired[k][i] > 0;
            missing += pt_registered[k][i] && !pt_fired[k][i];
            twice += pt_fired[k][i] > 1 || (pt_fired[k][i] && !pt_registered[k][i]);
        }
    fprintf(stderr, "  %d processing-time timers registered, %d fired\n", registered, fired);
    CHECK(registered >= 10); /* every key registered one at least */
    CHECK_EQ(missing, 0);
    CHECK_EQ(twice, 0);
    CHECK_EQ(pt_early, 0);
    CHECK_EQ(pt_bad, 0);
    collected_free(c);
    sl_env_destroy(env);
}

/* side outputs from a process function + union + broadcast */
static int split_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    if (sl_row_i64(&in->row, 0) % 3 == 0) {
        sl_row_writer_t *w = sl_side_row(out, "threes");
        sl_rw_copy_row(w, &in->row);
        sl_emit_side(out, "threes");
    } else {
        sl_row_writer_t *w = sl_out_row(out);
        sl_rw_copy_row(w, &in->row);
        sl_emit(out);
    }
    return 0;
}

TEST(side_output_union_broadcast) {
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 2);
    collected_t *main_c = collected_new(), *side_c = collected_new(), *bc = collected_new();
    CHECK_EQ(sl_output_tag(env, "threes", id_ts()), 0);
    sl_stream_t *a = sl_from_source(env, counter_source(300, 2), sl_wm_none(), "a");
    sl_stream_t *b = sl_from_source(env, counter_source(300, 1), sl_wm_none(), "b");
    sl_stream_t *u = sl_union(a, b);
    sl_process_fn_t fn = {.process = split_process};
    sl_stream_t *o = sl_keyed_process(sl_key_by(u, "id"), fn, id_ts());
    sl_sink_to(o, collect_sink(main_c), "main");
    sl_sink_to(sl_side_output(o, "threes"), collect_sink(side_c), "side");
    sl_stream_t *bs = sl_sink_to(sl_broadcast(sl_side_output(o, "threes")), collect_sink(bc), "bcast");
    sl_parallelism(bs, 3);
    CHECK_EQ(sl_env_execute(env, "side"), 0);
    CHECK_STR(sl_env_error(env), "");
    CHECK_EQ(side_c->n, 200);     /* 100 multiples of 3 from each source */
    CHECK_EQ(main_c->n, 400);
    CHECK_EQ(bc->n, 600);         /* every side record to all 3 subtasks */
    collected_free(main_c);
    collected_free(side_c);
    collected_free(bc);
    sl_env_destroy(env);
}

/* connect: keyed co-process joining two streams by id */
typedef struct join_fn {
    sl_state_t *seen;
} join_fn_t;
static void *join_clone(const void *c) { return calloc(1, sizeof(join_fn_t)); }
static int join_open(void *ctx, sl_rt_t *rt) {
    ((join_fn_t *)ctx)->seen = sl_state_value(rt, "seen");
    return 0;
}
static int join_side(join_fn_t *f, const sl_record_t *in, sl_collector_t *out, int64_t side) {
    uint32_t len;
    const int64_t *v = sl_value_get(f->seen, &len);
    if (v && *v != side) {
        sl_row_writer_t *w = sl_out_row(out);
        sl_rw_set_i64(w, 0, sl_row_i64(&in->row, 0));
        sl_rw_set_i64(w, 1, side);
        sl_emit(out);
        sl_state_clear(f->seen);
    } else {
        sl_value_put(f->seen, &side, 8);
    }
    return 0;
}
static int join1(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) { return join_side(ctx, in, out, 1); }
static int join2(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) { return join_side(ctx, in, out, 2); }

TEST(connect_keyed) {
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 3);
    collected_t *c = collected_new();
    sl_stream_t *a = sl_from_source(env, counter_source(1000, 2), sl_wm_none(), "a");
    sl_stream_t *b = sl_from_source(env, counter_source(500, 3), sl_wm_none(), "b");
    sl_co_process_fn_t fn = {.open = join_open, .process1 = join1, .process2 = join2,
                             .opts = {NULL, join_clone, free}};
    sl_stream_t *o = sl_co_process(sl_connect_keyed(sl_key_by(a, "id"), sl_key_by(b, "id")), fn, id_ts());
    sl_sink_to(o, collect_sink(c), "joined");
    CHECK_EQ(sl_env_execute(env, "join"), 0);
    CHECK_EQ(c->n, 500); /* ids 0..499 appear on both sides exactly once */
    collected_free(c);
    sl_env_destroy(env);
}

/* a failing user function fails the job with a message naming it */
static int failing_map(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    if (sl_row_i64(&in->row, 0) == 777) return SL_EUSER;
    sl_rw_copy_row(out, &in->row);
    return 0;
}

TEST(user_failure) {
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 2);
    collected_t *c = collected_new();
    sl_stream_t *s = sl_from_source(env, counter_source(100000, 2), sl_wm_none(), "numbers");
    s = sl_name(sl_map(sl_rebalance(s), failing_map, NULL, id_ts()), "explode");
    sl_sink_to(s, collect_sink(c), "collect");
    int rc = sl_env_execute(env, "fail");
    CHECK_EQ(rc, SL_EUSER);
    CHECK_CONTAINS(sl_env_error(env), "explode");
    CHECK_CONTAINS(sl_env_error(env), "map function failed");
    collected_free(c);
    sl_env_destroy(env);
}

TEST(builder_errors) {
    sl_env_t *env = sl_env_new();
    sl_stream_t *s = sl_from_source(env, counter_source(10, 1), sl_wm_bounded("nope", 5), "numbers");
    CHECK_CONTAINS(sl_env_error(env), "timestamp field 'nope'");
    CHECK(sl_env_execute(env, "bad") == SL_EINVAL);
    sl_env_destroy(env);
    env = sl_env_new();
    s = sl_from_source(env, counter_source(10, 1), sl_wm_none(), "numbers");
    CHECK(sl_key_by(s, "missing") == NULL);
    CHECK_CONTAINS(sl_env_error(env), "no field 'missing'");
    sl_env_destroy(env);
    env = sl_env_new();
    s = sl_from_source(env, counter_source(10, 1), sl_wm_none(), "numbers");
    sl_stream_t *m = sl_parallelism(sl_map(sl_forward(s), double_map, NULL, id_ts()), 2);
    sl_sink_to(m, collect_sink(NULL), "x");
    CHECK(sl_env_execute(env, "fwd") == SL_EINVAL);
    CHECK_CONTAINS(sl_env_error(env), "forward partitioning");
    sl_env_destroy(env);
}

/* ---- backpressure: a slow sink slows the source; in-flight data stays
 * bounded by the channel buffers; nothing is lost. ---- */
typedef struct bp_src {
    atomic_llong emitted;
    int64_t n;
} bp_src_t;
static atomic_llong bp_received;
static atomic_llong bp_max_gap;
static bp_src_t *bp;

static int bp_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    *reader = ctx;
    *nsplits = 1;
    return 0;
}
static int bp_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    bp_src_t *s = reader;
    for (int i = 0; i < max; i++) {
        int64_t v = atomic_load(&s->emitted);
        if (v >= s->n) return SL_SRC_END;
        sl_row_writer_t *w = sl_src_row(out);
        sl_rw_set_i64(w, 0, v);
        sl_rw_set_i64(w, 1, v);
        atomic_fetch_add(&s->emitted, 1);
        sl_src_emit(out, 0, v);
    }
    return SL_SRC_MORE;
}
static void bp_noop(void *r) {}
static const sl_source_ops_t bp_ops = {
    .name = "bp", .create_reader = bp_create, .poll = bp_poll, .destroy_reader = bp_noop, .destroy = bp_noop};

static int slow_write(void *w, const sl_record_t *rec, char *err, size_t el) {
    int64_t got = atomic_fetch_add(&bp_received, 1) + 1;
    int64_t gap = atomic_load(&bp->emitted) - got;
    int64_t m = atomic_load(&bp_max_gap);
    while (gap > m && !atomic_compare_exchange_weak(&bp_max_gap, &m, gap)) {}
    if (got % 64 == 0) {
        struct timespec ts = {0, 200000};
        nanosleep(&ts, NULL);
    }
    return 0;
}
static int slow_open(void *ctx, int s, int p, const sl_schema_t *sc, void **w, char *err, size_t el) {
    *w = ctx;
    return 0;
}
static const sl_sink_ops_t slow_ops = {.name = "slow", .open = slow_open, .write = slow_write};

TEST(backpressure_bounded) {
    bp = calloc(1, sizeof *bp);
    bp->n = 200000;
    atomic_store(&bp_received, 0);
    atomic_store(&bp_max_gap, 0);
    sl_env_t *env = sl_env_new();
    sl_env_set_buffer_size(env, 4096);
    sl_env_set_buffers_per_channel(env, 2);
    sl_source_t src = {&bp_ops, bp, id_ts()};
    sl_sink_t sink = {&slow_ops, NULL};
    sl_stream_t *s = sl_from_source(env, src, sl_wm_none(), "fast");
    sl_sink_to(sl_rebalance(s), sink, "slow");
    int64_t t0 = sl_now_ms();
    CHECK_EQ(sl_env_execute(env, "bp"), 0);
    (void)t0;
    CHECK_EQ(atomic_load(&bp_received), 200000);
    /* a record is 13 + 24 bytes in a buffer: 2 buffers of 4 KiB hold < 200
     * records, counting the one being filled and the one being read. */
    int64_t bound = 2 * (4096 / 37 + 1) + 4;
    fprintf(stderr, "  max records in flight: %lld (bound %lld)\n", (long long)atomic_load(&bp_max_gap),
            (long long)bound);
    CHECK(atomic_load(&bp_max_gap) <= bound);
    CHECK(atomic_load(&bp_max_gap) > 0);
    sl_env_destroy(env);
    free(bp);
}

/* sl_env_cancel from another thread stops an unbounded job */
static void *cancel_later(void *env) {
    struct timespec ts = {0, 100000000};
    nanosleep(&ts, NULL);
    sl_env_cancel(env);
    return NULL;
}

TEST(cancel_unbounded) {
    sl_datagen_opts_t g = sl_datagen_defaults();
    g.count = -1;
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 2);
    sl_stream_t *s = sl_from_source(env, sl_datagen_source(g), sl_wm_bounded("ts", 1000), "forever");
    sl_counting_sink_stats_t *stats = NULL;
    sl_sink_to(sl_rebalance(s), sl_counting_sink(&stats), "count");
    pthread_t th;
    pthread_create(&th, NULL, cancel_later, env);
    int rc = sl_env_execute(env, "forever");
    pthread_join(th, NULL);
    CHECK_EQ(rc, SL_ECANCELED);
    CHECK_CONTAINS(sl_env_error(env), "canceled");
    CHECK(sl_counting_sink_count(stats) > 0);
    sl_counting_sink_stats_free(stats);
    sl_env_destroy(env);
}

int main(void) {
    RUN(map_filter_chain);
    RUN(keyed_state_counts);
    RUN(event_time_timers);
    RUN(processing_time_timers);
    RUN(side_output_union_broadcast);
    RUN(connect_keyed);
    RUN(user_failure);
    RUN(builder_errors);
    RUN(backpressure_bounded);
    RUN(cancel_unbounded);
    (void)check_ids;
    TEST_MAIN_END();
}
