/*
 * pipeline_util.h — test sources and sinks for end-to-end pipeline tests:
 * a scripted source (rows given per split, with optional pauses in a
 * virtual clock) and a collecting sink that keeps every record.
 */
#ifndef SL_PIPELINE_UTIL_H
#define SL_PIPELINE_UTIL_H

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"

/* ---- counter source: split k emits k, k+splits, ... below n ---- */
typedef struct counter_src {
    int64_t n;
    int splits;
    sl_schema_t *schema; /* "id BIGINT NOT NULL, ts BIGINT NOT NULL" */
} counter_src_t;

typedef struct counter_reader {
    counter_src_t *src;
    int first, nsplits, stride;
    int64_t *next;
    int done;
} counter_reader_t;

static int counter_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    counter_src_t *s = ctx;
    counter_reader_t *r = calloc(1, sizeof *r);
    r->src = s;
    int n = 0;
    for (int k = subtask; k < s->splits; k += p) n++;
    r->nsplits = n;
    r->first = subtask;
    r->stride = p;
    r->next = calloc((size_t)(n ? n : 1), sizeof(int64_t));
    for (int i = 0; i < n; i++) r->next[i] = subtask + (int64_t)i * p;
    *reader = r;
    *nsplits = n;
    return 0;
}

static int counter_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    counter_reader_t *r = reader;
    int emitted = 0;
    while (emitted < max && r->done < r->nsplits) {
        for (int i = 0; i < r->nsplits && emitted < max; i++) {
            if (r->next[i] < 0) continue;
            int64_t v = r->next[i];
            if (v >= r->src->n) {
                r->next[i] = -1;
                r->done++;
                sl_src_split_finished(out, i);
                continue;
            }
            sl_row_writer_t *w = sl_src_row(out);
            sl_rw_set_i64(w, 0, v);
            sl_rw_set_i64(w, 1, v);
            sl_src_emit(out, i, v);
            r->next[i] = v + r->src->splits;
            emitted++;
        }
    }
    return r->done == r->nsplits ? SL_SRC_END : SL_SRC_MORE;
}

static void counter_destroy_reader(void *reader) {
    counter_reader_t *r = reader;
    free(r->next);
    free(r);
}

static void counter_destroy(void *ctx) { free(ctx); }

/* Position: per split, its global id and next value (-1: done). */
static int counter_snapshot(void *reader, int64_t id, void (*put)(void *, const void *, size_t), void *pc) {
    counter_reader_t *r = reader;
    uint32_t n = (uint32_t)r->nsplits;
    put(pc, &n, sizeof n);
    for (int i = 0; i < r->nsplits; i++) {
        uint32_t k = (uint32_t)(r->first + i * r->stride);
        put(pc, &k, sizeof k);
        put(pc, &r->next[i], sizeof r->next[i]);
    }
    return 0;
}

/* Union of every old subtask's positions: take the splits we own now. */
static int counter_restore(void *reader, const void *state, size_t len, char *err, size_t el) {
    counter_reader_t *r = reader;
    const uint8_t *p = state, *end = p + len;
    while (p < end) {
        uint32_t blen, n;
        if (end - p < 4) return SL_EFORMAT;
        memcpy(&blen, p, 4);
        p += 4;
        if ((size_t)(end - p) < blen || blen < 4) return SL_EFORMAT;
        memcpy(&n, p, 4);
        if (blen != 4 + n * 12) return SL_EFORMAT;
        for (uint32_t i = 0; i < n; i++) {
            uint32_t k;
            int64_t next;
            memcpy(&k, p + 4 + i * 12, 4);
            memcpy(&next, p + 8 + i * 12, 8);
            if ((int)k % r->stride != r->first) continue;
            int j = ((int)k - r->first) / r->stride;
            if (j >= r->nsplits) return SL_EFORMAT;
            r->next[j] = next;
        }
        p += blen;
    }
    r->done = 0;
    for (int i = 0; i < r->nsplits; i++) r->done += r->next[i] < 0;
    return 0;
}

static const sl_source_ops_t counter_ops = {.name = "counter",
                                            .create_reader = counter_create,
                                            .poll = counter_poll,
                                            .destroy_reader = counter_destroy_reader,
                                            .destroy = counter_destroy,
                                            .snapshot = counter_snapshot,
                                            .restore = counter_restore};

static inline sl_source_t counter_source(int64_t n, int splits) {
    counter_src_t *s = calloc(1, sizeof *s);
    s->n = n;
    s->splits = splits;
    sl_source_t src = {&counter_ops, s, sl_schema_parse("id BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0)};
    return src;
}

/* ---- collecting sink ---- */
typedef struct collected {
    pthread_mutex_t mu;
    uint8_t **rows;
    uint32_t *lens;
    int64_t *ts;
    int *subtask;
    int64_t n, cap;
    int finished;
    int64_t delay_us; /* per write, to simulate a slow sink */
} collected_t;

typedef struct collect_writer {
    collected_t *c;
    int subtask;
} collect_writer_t;

static int collect_open(void *ctx, int subtask, int p, const sl_schema_t *s, void **w, char *err, size_t el) {
    collect_writer_t *cw = calloc(1, sizeof *cw);
    cw->c = ctx;
    cw->subtask = subtask;
    *w = cw;
    return 0;
}

static int collect_write(void *w, const sl_record_t *rec, char *err, size_t el) {
    collect_writer_t *cw = w;
    collected_t *c = cw->c;
    if (c->delay_us) {
        struct timespec ts = {0, (long)c->delay_us * 1000};
        nanosleep(&ts, NULL);
    }
    pthread_mutex_lock(&c->mu);
    if (c->n == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 256;
        c->rows = realloc(c->rows, (size_t)c->cap * sizeof *c->rows);
        c->lens = realloc(c->lens, (size_t)c->cap * sizeof *c->lens);
        c->ts = realloc(c->ts, (size_t)c->cap * sizeof *c->ts);
        c->subtask = realloc(c->subtask, (size_t)c->cap * sizeof *c->subtask);
    }
    c->rows[c->n] = malloc(rec->row.len ? rec->row.len : 1);
    memcpy(c->rows[c->n], rec->row.data, rec->row.len);
    c->lens[c->n] = rec->row.len;
    c->ts[c->n] = rec->ts;
    c->subtask[c->n] = cw->subtask;
    c->n++;
    pthread_mutex_unlock(&c->mu);
    return 0;
}

static int collect_finish(void *w, char *err, size_t el) {
    collect_writer_t *cw = w;
    pthread_mutex_lock(&cw->c->mu);
    cw->c->finished++;
    pthread_mutex_unlock(&cw->c->mu);
    return 0;
}

static void collect_close(void *w) { free(w); }

static const sl_sink_ops_t collect_ops = {.name = "collect", .open = collect_open, .write = collect_write, .finish = collect_finish, .close = collect_close};

static inline collected_t *collected_new(void) {
    collected_t *c = calloc(1, sizeof *c);
    pthread_mutex_init(&c->mu, NULL);
    return c;
}

static inline void collected_free(collected_t *c) {
    for (int64_t i = 0; i < c->n; i++) free(c->rows[i]);
    free(c->rows);
    free(c->lens);
    free(c->ts);
    free(c->subtask);
    pthread_mutex_destroy(&c->mu);
    free(c);
}

static inline sl_sink_t collect_sink(collected_t *c) {
    sl_sink_t s = {&collect_ops, c};
    return s;
}

static inline sl_row_t collected_row(const collected_t *c, int64_t i, const sl_schema_t *schema) {
    sl_row_t r = {c->rows[i], c->lens[i], schema};
    return r;
}

/* ---- transactional collecting sink: rows reach `out` only when the
 * checkpoint that covers them completes (two-phase commit in memory); a
 * restart drops what no completed checkpoint covers, so `out` holds what an
 * exactly-once sink would show ---- */
typedef struct txn_row {
    uint8_t *row;
    uint32_t len;
    int64_t ts, ckpt;
    int subtask;
} txn_row_t;

typedef struct txn_collected {
    collected_t *out;
    pthread_mutex_t mu;
    txn_row_t *staged;  /* pre-committed, not yet committed */
    int64_t nstaged, cap;
    int64_t commits, recovered;
} txn_collected_t;

typedef struct txn_writer {
    txn_collected_t *t;
    int subtask;
    txn_row_t *pending;
    int64_t n, cap;
} txn_writer_t;

static void txn_push(txn_row_t **a, int64_t *n, int64_t *cap, txn_row_t r) {
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 64;
        *a = realloc(*a, (size_t)*cap * sizeof **a);
    }
    (*a)[(*n)++] = r;
}

/* Moves a row into out (t->mu held). */
static void txn_deliver(txn_collected_t *t, txn_row_t *r) {
    collect_writer_t cw = {t->out, r->subtask};
    sl_record_t rec;
    memset(&rec, 0, sizeof rec);
    rec.row.data = r->row;
    rec.row.len = r->len;
    rec.ts = r->ts;
    collect_write(&cw, &rec, NULL, 0);
    free(r->row);
}

/* Delivers the staged rows that pass keep(subtask, ckpt) and drops the rest
 * when drop_others (t->mu held). */
static void txn_settle(txn_collected_t *t, int subtask, int64_t upto, bool drop_others) {
    int64_t k = 0;
    for (int64_t i = 0; i < t->nstaged; i++) {
        txn_row_t *r = &t->staged[i];
        if ((subtask < 0 || r->subtask == subtask) && r->ckpt <= upto)
            txn_deliver(t, r);
        else if (drop_others)
            free(r->row);
        else
            t->staged[k++] = *r;
    }
    t->nstaged = k;
}

static int txn_open(void *ctx, int subtask, int p, const sl_schema_t *s, void **w, char *err, size_t el) {
    txn_writer_t *tw = calloc(1, sizeof *tw);
    tw->t = ctx;
    tw->subtask = subtask;
    *w = tw;
    return 0;
}

static int txn_write(void *w, const sl_record_t *rec, char *err, size_t el) {
    txn_writer_t *tw = w;
    txn_row_t r = {malloc(rec->row.len ? rec->row.len : 1), rec->row.len, rec->ts, -1, tw->subtask};
    memcpy(r.row, rec->row.data, rec->row.len);
    txn_push(&tw->pending, &tw->n, &tw->cap, r);
    return 0;
}

static int txn_pre_commit(void *w, int64_t id, char *err, size_t el) {
    txn_writer_t *tw = w;
    pthread_mutex_lock(&tw->t->mu);
    for (int64_t i = 0; i < tw->n; i++) {
        tw->pending[i].ckpt = id;
        txn_push(&tw->t->staged, &tw->t->nstaged, &tw->t->cap, tw->pending[i]);
    }
    tw->n = 0;
    pthread_mutex_unlock(&tw->t->mu);
    return 0;
}

static int txn_commit(void *w, int64_t id, char *err, size_t el) {
    txn_writer_t *tw = w;
    pthread_mutex_lock(&tw->t->mu);
    txn_settle(tw->t, tw->subtask, id, false);
    tw->t->commits++;
    pthread_mutex_unlock(&tw->t->mu);
    return 0;
}

/* End of input: everything this subtask wrote is final. */
static int txn_finish(void *w, char *err, size_t el) {
    txn_writer_t *tw = w;
    pthread_mutex_lock(&tw->t->mu);
    txn_settle(tw->t, tw->subtask, INT64_MAX, false);
    for (int64_t i = 0; i < tw->n; i++) txn_deliver(tw->t, &tw->pending[i]);
    tw->n = 0;
    tw->t->out->finished++;
    pthread_mutex_unlock(&tw->t->mu);
    return 0;
}

static void txn_close(void *w) { /* a failed attempt's open transaction is aborted */
    txn_writer_t *tw = w;
    for (int64_t i = 0; i < tw->n; i++) free(tw->pending[i].row);
    free(tw->pending);
    free(tw);
}

static int txn_recover(void *ctx, int64_t restored_id, char *err, size_t el) {
    txn_collected_t *t = ctx;
    pthread_mutex_lock(&t->mu);
    txn_settle(t, -1, restored_id, true);
    t->recovered++;
    pthread_mutex_unlock(&t->mu);
    return 0;
}

static const sl_sink_ops_t txn_collect_ops = {.name = "txn-collect",
                                              .open = txn_open,
                                              .write = txn_write,
                                              .finish = txn_finish,
                                              .close = txn_close,
                                              .pre_commit = txn_pre_commit,
                                              .commit = txn_commit,
                                              .recover = txn_recover};

static inline txn_collected_t *txn_collected_new(void) {
    txn_collected_t *t = calloc(1, sizeof *t);
    t->out = collected_new();
    pthread_mutex_init(&t->mu, NULL);
    return t;
}

static inline void txn_collected_free(txn_collected_t *t) {
    for (int64_t i = 0; i < t->nstaged; i++) free(t->staged[i].row);
    free(t->staged);
    collected_free(t->out);
    pthread_mutex_destroy(&t->mu);
    free(t);
}

static inline sl_sink_t txn_collect_sink(txn_collected_t *t) {
    sl_sink_t s = {&txn_collect_ops, t};
    return s;
}

#endif
