/*
 * sq_counter_job.h — the job of the state query tests (test_state_query.c
 * embedded, and cluster_job.so --state-query on a cluster): a source of N
 * deterministic records (sqj_record) that then idles forever, so the job
 * keeps running with known state, into three keyed process functions:
 *
 *   uid "counter"    key_by(card) (VARCHAR): value states "count" and "sum"
 *                    (i64 little-endian), list state "last" (the amount,
 *                    i64 LE, of every record with grp 0, in order),
 *                    map state "parity" ("even"/"odd" -> i64 LE count of
 *                    amounts of that parity)
 *   uid "pair"       key_by_fields(card, grp) (VARCHAR, INT): "count"
 *   uid "by_amount"  key_by(amount) (BIGINT): "count"
 *   uid "ttl"        key_by(card): value states "fresh" (TTL 1 hour) and
 *                    "stale" (TTL 1 ms), each the card's count (i64 LE)
 *   uid "slow"       key_by(card): "count"; with a hold (embedded tests),
 *                    the last record (seq N-1) keeps its subtask busy
 *                    while *hold is non-zero (it reads no mail meanwhile)
 *
 * The source runs at parallelism 1 (so every key sees its records in
 * order), the functions at the job's parallelism.  Public API only (the
 * cluster job is built without libsluice).
 */
#ifndef SL_TEST_SQ_COUNTER_JOB_H
#define SL_TEST_SQ_COUNTER_JOB_H

#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice/sluice.h"

#define SQJ_SCHEMA "card VARCHAR NOT NULL, amount BIGINT NOT NULL, grp INT NOT NULL, seq BIGINT NOT NULL"

/* Record i of the source: its card (written into card, cap bytes), amount
 * and group. */
static inline void sqj_record(int64_t i, int ncards, char *card, size_t cap, int64_t *amount, int32_t *grp) {
    uint64_t h = (uint64_t)i * 0x9E3779B97F4A7C15ull;
    h ^= h >> 29;
    int c = (int)(h % (uint64_t)ncards);
    if (c % 10 == 7) /* a key that needs URL encoding and is not ASCII */
        snprintf(card, cap, "card %d/\xc3\xa9&x", c);
    else
        snprintf(card, cap, "card-%d", c);
    *amount = (i * 7919) % 1000;
    *grp = (int32_t)(i % 3);
}

typedef struct sqj_src {
    int64_t n;
    int ncards;
    atomic_int *gate; /* when set: no record before *gate is non-zero (embedded tests) */
} sqj_src_t;

typedef struct sqj_reader {
    int64_t next, n;
    int ncards;
    atomic_int *gate;
} sqj_reader_t;

static int sqj_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    const sqj_src_t *s = ctx;
    sqj_reader_t *r = calloc(1, sizeof *r);
    r->n = subtask == 0 ? s->n : 0; /* the source runs at parallelism 1 */
    r->ncards = s->ncards;
    r->gate = s->gate;
    *reader = r;
    *nsplits = 1;
    return 0;
}

static int sqj_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    sqj_reader_t *r = reader;
    if (r->next >= r->n || (r->gate && !atomic_load(r->gate))) { /* done (or not yet): idle, the job keeps running */
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        sl_src_idle_until(out, (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec + (r->gate ? 2000000 : 50000000));
        return SL_SRC_IDLE;
    }
    for (int k = 0; k < max && r->next < r->n; k++, r->next++) {
        char card[64];
        int64_t amount;
        int32_t grp;
        sqj_record(r->next, r->ncards, card, sizeof card, &amount, &grp);
        sl_row_writer_t *w = sl_src_row(out);
        sl_rw_set_str(w, 0, card, (uint32_t)strlen(card));
        sl_rw_set_i64(w, 1, amount);
        sl_rw_set_i32(w, 2, grp);
        sl_rw_set_i64(w, 3, r->next);
        sl_src_emit(out, 0, SL_NO_TIMESTAMP);
    }
    return SL_SRC_MORE;
}

static void sqj_destroy_reader(void *reader) { free(reader); }
static void sqj_destroy(void *ctx) { free(ctx); }

static const sl_source_ops_t sqj_src_ops = {.name = "sq-counter",
                                            .create_reader = sqj_create,
                                            .poll = sqj_poll,
                                            .destroy_reader = sqj_destroy_reader,
                                            .destroy = sqj_destroy};

/* ---- the keyed functions ---- */

typedef struct sqj_fn {
    int mode; /* 0 counter, 1 pair / by_amount / slow (count only), 2 ttl */
    sl_state_t *count, *sum, *last, *parity;
    atomic_int *hold; /* slow: the last record waits while *hold */
    int64_t last_seq;
} sqj_fn_t;

static int sqj_open(void *ctx, sl_rt_t *rt) {
    sqj_fn_t *f = ctx;
    if (f->mode == 2) {
        f->count = sl_state_value_ttl(rt, "fresh", sl_state_ttl(3600 * 1000));
        f->sum = sl_state_value_ttl(rt, "stale", sl_state_ttl(1));
        return f->count && f->sum ? 0 : SL_EINVAL;
    }
    f->count = sl_state_value(rt, "count");
    if (f->mode == 0) {
        f->sum = sl_state_value(rt, "sum");
        f->last = sl_state_list(rt, "last");
        f->parity = sl_state_map(rt, "parity");
    }
    return 0;
}

static void sqj_add(sl_state_t *st, int64_t d) {
    uint32_t len = 0;
    const void *p = sl_value_get(st, &len);
    int64_t v = 0;
    if (p && len == 8) memcpy(&v, p, 8);
    v += d;
    sl_value_put(st, &v, 8);
}

static int sqj_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    sqj_fn_t *f = ctx;
    sqj_add(f->count, 1);
    if (f->hold && sl_row_i64(&in->row, 3) == f->last_seq)
        while (atomic_load(f->hold)) {
            struct timespec ts = {0, 1000000L};
            nanosleep(&ts, NULL);
        }
    if (f->mode == 2) { /* the stale copy expires 1 ms after each write */
        uint32_t len = 0;
        const void *p = sl_value_get(f->count, &len);
        if (p && len == 8) sl_value_put(f->sum, p, 8);
        return 0;
    }
    if (f->mode != 0) return 0;
    int64_t amount = sl_row_i64(&in->row, 1);
    sqj_add(f->sum, amount);
    if (sl_row_i32(&in->row, 2) == 0) sl_list_add(f->last, &amount, 8);
    const char *pk = amount % 2 ? "odd" : "even";
    uint32_t len = 0;
    const void *p = sl_map_get(f->parity, pk, (uint32_t)strlen(pk), &len);
    int64_t v = 0;
    if (p && len == 8) memcpy(&v, p, 8);
    v++;
    sl_map_put(f->parity, pk, (uint32_t)strlen(pk), &v, 8);
    return 0;
}

static int sqj_discard(void *w, const sl_record_t *rec, char *err, size_t el) { return 0; }
static int sqj_sink_open(void *ctx, int subtask, int p, const sl_schema_t *s, void **w, char *err, size_t el) {
    *w = NULL;
    return 0;
}
static const sl_sink_ops_t sqj_sink_ops = {.name = "discard", .open = sqj_sink_open, .write = sqj_discard};

/* The job: n records over ncards cards, the functions at parallelism
 * par; with a gate, the source starts once *gate is non-zero; with a
 * hold, "slow" holds its last record while *hold is non-zero. */
static inline void sqj_build_gated(sl_env_t *env, int64_t n, int ncards, int par, atomic_int *gate,
                                   atomic_int *hold) {
    sl_env_set_parallelism(env, par);
    sqj_src_t *ctx = calloc(1, sizeof *ctx);
    ctx->n = n;
    ctx->ncards = ncards;
    ctx->gate = gate;
    /* the source owns this reference of the schema */
    sl_source_t src = {.ops = &sqj_src_ops, .ctx = ctx, .schema = sl_schema_parse(SQJ_SCHEMA, NULL, 0)};
    sl_stream_t *s = sl_parallelism(sl_uid(sl_from_source(env, src, sl_wm_none(), "records"), "records"), 1);
    static const char *const uids[5] = {"counter", "pair", "by_amount", "ttl", "slow"};
    for (int m = 0; m < 5; m++) {
        sl_keyed_t *k = m == 0 || m >= 3 ? sl_key_by(s, "card")
                        : m == 1         ? sl_key_by_fields(s, "card, grp")
                                         : sl_key_by(s, "amount");
        static sqj_fn_t fns[5]; /* SL_FN_COPY copies from here when each subtask starts */
        fns[m] = (sqj_fn_t){.mode = m == 0 ? 0 : m == 3 ? 2 : 1, .hold = m == 4 ? hold : NULL, .last_seq = n - 1};
        sl_process_fn_t pf = {.open = sqj_open, .process = sqj_process, .opts = SL_FN_COPY(&fns[m])};
        sl_stream_t *o = sl_uid(sl_keyed_process(k, pf, sl_schema_parse("x BIGINT", NULL, 0)), uids[m]);
        sl_sink_t sink = {.ops = &sqj_sink_ops};
        char name[32];
        snprintf(name, sizeof name, "%s-out", uids[m]);
        sl_sink_to(o, sink, name);
    }
}

static inline void sqj_build(sl_env_t *env, int64_t n, int ncards, int par) {
    sqj_build_gated(env, n, ncards, par, NULL, NULL);
}

#endif
