/*
 * datagen.c — the built-in generator of card transactions (scenario S1).
 *
 * Event `i` of split `k` is a pure function of (seed, k, i) and the shape
 * options: four counter-based random numbers (the splitmix64 finalizer of
 * key(seed, k) + (4i + j) * golden-gamma) give the card, the amount, the
 * late/on-time draw and the disorder.  So a split produces the same events
 * whichever subtask reads it and however many subtasks there are; split k
 * goes to subtask k % parallelism.
 *
 * Event time: base(i) = start_ts + i * ts_step_ms; an on-time event has
 * ts = base(i) - U[0, max_disorder_ms], a late one
 * ts = base(i) - late_by_ms - U[0, max_disorder_ms].
 *
 * Rate limiting: a reader owning m of the n splits emits at rate * m / n
 * events per second measured from its first poll, and returns SL_SRC_IDLE
 * when it is ahead of that schedule (it never sleeps or spins).
 */
#include <math.h>

#include "common/common.h"
#include "connectors/connectors.h"

#define DG_GAMMA 0x9e3779b97f4a7c15ULL
#define DG_BATCH 64 /* events per split per turn of the round-robin */

enum { F_CARD = 0, F_AMOUNT = 1, F_TS = 2 };

sl_datagen_opts_t sl_datagen_defaults(void) {
    sl_datagen_opts_t o = {
        .seed = 42,
        .count = 1000000,
        .cards = 10000,
        .splits = 4,
        .rate = 0,
        .start_ts = 1767225600000LL, /* 2026-01-01T00:00:00Z */
        .ts_step_ms = 1,
        .max_disorder_ms = 4000,
        .late_fraction = 0.001,
        .late_by_ms = 600000,
    };
    return o;
}

sl_schema_t *sl_datagen_schema(void) {
    sl_schema_t *s = sl_schema_new();
    sl_schema_add(s, "card_id", SL_BIGINT, false);
    sl_schema_add(s, "amount", SL_DOUBLE, false);
    sl_schema_add(s, "ts", SL_TIMESTAMP, false);
    return s;
}

int sl_datagen_check(const sl_datagen_opts_t *o, char *err, size_t errlen) {
    const char *bad = NULL;
    if (o->splits < 1) bad = "splits must be >= 1";
    else if (o->count < -1) bad = "count must be >= 0, or -1 for unbounded";
    else if (o->cards < 1) bad = "cards must be >= 1";
    else if (!(o->rate >= 0) || isinf(o->rate)) bad = "rate must be >= 0 (0: unlimited)";
    else if (!(o->ts_step_ms >= 0) || isinf(o->ts_step_ms)) bad = "ts_step_ms must be >= 0";
    else if (o->max_disorder_ms < 0) bad = "max_disorder_ms must be >= 0";
    else if (!(o->late_fraction >= 0 && o->late_fraction <= 1)) bad = "late_fraction must be in [0, 1]";
    else if (o->late_by_ms < 0) bad = "late_by_ms must be >= 0";
    return bad ? sl_errf(err, errlen, SL_EINVAL, "datagen: %s", bad) : 0;
}

int64_t sl_datagen_split_count(const sl_datagen_opts_t *o, int split) {
    if (o->count < 0) return -1;
    return o->count / o->splits + (split < o->count % o->splits ? 1 : 0);
}

/* ---- the event function ----------------------------------------------- */

static inline uint64_t mix(uint64_t z) { /* splitmix64's finalizer */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, n) from 64 random bits (Lemire's multiply-shift). */
static inline uint64_t below(uint64_t r, uint64_t n) { return (uint64_t)(((unsigned __int128)r * n) >> 64); }

static inline uint64_t split_key(uint64_t seed, int split) {
    return mix(seed ^ mix((uint64_t)(split + 1) * DG_GAMMA));
}

static inline void gen(const sl_datagen_opts_t *o, uint64_t key, int64_t i, sl_datagen_event_t *ev) {
    uint64_t c = key + (uint64_t)i * 4 * DG_GAMMA;
    uint64_t r1 = mix(c + DG_GAMMA), r2 = mix(c + 2 * DG_GAMMA), r3 = mix(c + 3 * DG_GAMMA),
             r4 = mix(c + 4 * DG_GAMMA);
    ev->card_id = (int64_t)below(r1, (uint64_t)o->cards);
    ev->amount = (double)(100 + (int64_t)below(r2, 49901)) / 100.0;
    ev->late = (double)(r3 >> 11) * 0x1.0p-53 < o->late_fraction;
    int64_t ts = o->start_ts + (int64_t)((double)i * o->ts_step_ms) - (int64_t)below(r4, (uint64_t)o->max_disorder_ms + 1);
    ev->ts = ev->late ? ts - o->late_by_ms : ts;
}

void sl_datagen_event(const sl_datagen_opts_t *o, int split, int64_t index, sl_datagen_event_t *ev) {
    gen(o, split_key(o->seed, split), index, ev);
}

/* ---- the reader ------------------------------------------------------- */

typedef struct dg_split {
    uint64_t key;
    int64_t next;
    int64_t end; /* -1: unbounded */
    bool done;
} dg_split_t;

typedef struct dg_reader {
    const sl_datagen_opts_t *o;
    dg_split_t *splits;
    int n, cur, live;
    double rate;     /* this reader's share, events/s; 0 = unlimited */
    int64_t t0;      /* monotonic ns of the first poll */
    int64_t emitted;
    bool restored_done; /* restored splits already finished: report them on the first poll */
    int subtask, parallelism;
} dg_reader_t;

static int dg_create_reader(void *ctx, int subtask, int parallelism, void **reader, int *nsplits, char *err,
                            size_t errlen) {
    const sl_datagen_opts_t *o = ctx;
    int rc = sl_datagen_check(o, err, errlen);
    if (rc) return rc;
    if (parallelism < 1 || subtask < 0 || subtask >= parallelism)
        return sl_errf(err, errlen, SL_EINVAL, "datagen: subtask %d of %d", subtask, parallelism);
    dg_reader_t *r = sl_calloc(1, sizeof *r);
    r->o = o;
    r->subtask = subtask;
    r->parallelism = parallelism;
    r->n = subtask < o->splits ? (o->splits - subtask + parallelism - 1) / parallelism : 0;
    r->live = r->n;
    r->splits = sl_calloc((size_t)(r->n ? r->n : 1), sizeof *r->splits);
    for (int j = 0; j < r->n; j++) {
        int k = subtask + j * parallelism;
        r->splits[j].key = split_key(o->seed, k);
        r->splits[j].end = sl_datagen_split_count(o, k);
    }
    r->rate = o->rate * r->n / o->splits;
    *reader = r;
    *nsplits = r->n;
    return 0;
}

static int dg_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t errlen) {
    dg_reader_t *r = reader;
    const sl_datagen_opts_t *o = r->o;
    if (SL_UNLIKELY(r->restored_done)) {
        r->restored_done = false;
        for (int j = 0; j < r->n; j++)
            if (r->splits[j].done) sl_src_split_finished(out, j);
    }
    if (!r->live) return SL_SRC_END;
    int64_t budget = max > 0 ? max : 1;
    if (r->rate > 0) {
        int64_t now = sl_mono_ns();
        if (!r->t0) r->t0 = now;
        int64_t allowed = (int64_t)((double)(now - r->t0) * r->rate / 1e9) + 1 - r->emitted;
        if (allowed <= 0) return SL_SRC_IDLE;
        budget = SL_MIN(budget, allowed);
    }
    while (budget > 0 && r->live > 0) {
        dg_split_t *sp = &r->splits[r->cur];
        if (!sp->done) {
            int64_t b = SL_MIN(budget, DG_BATCH);
            if (sp->end >= 0) b = SL_MIN(b, sp->end - sp->next);
            for (int64_t k = 0; k < b; k++) {
                sl_datagen_event_t ev;
                gen(o, sp->key, sp->next++, &ev);
                sl_row_writer_t *w = sl_src_row(out);
                sl_rw_set_i64(w, F_CARD, ev.card_id);
                sl_rw_set_f64(w, F_AMOUNT, ev.amount);
                sl_rw_set_i64(w, F_TS, ev.ts);
                sl_src_emit(out, r->cur, ev.ts);
            }
            budget -= b;
            r->emitted += b;
            if (sp->end >= 0 && sp->next >= sp->end) {
                sp->done = true;
                r->live--;
                sl_src_split_finished(out, r->cur);
            }
        }
        r->cur = (r->cur + 1) % r->n;
    }
    return r->live ? SL_SRC_MORE : SL_SRC_END;
}

/* Position: for each of the reader's splits, its global id and the next
 * event index. */
static int dg_snapshot(void *reader, int64_t id, void (*put)(void *, const void *, size_t), void *pc) {
    dg_reader_t *r = reader;
    uint32_t n = (uint32_t)r->n;
    put(pc, &n, sizeof n);
    for (int j = 0; j < r->n; j++) {
        uint32_t k = (uint32_t)(r->subtask + j * r->parallelism);
        put(pc, &k, sizeof k);
        put(pc, &r->splits[j].next, sizeof r->splits[j].next);
    }
    return 0;
}

/* Takes, from every old subtask's position, the splits this reader owns. */
static int dg_restore(void *reader, const void *state, size_t len, char *err, size_t errlen) {
    dg_reader_t *r = reader;
    const uint8_t *p = state, *end = p + len;
    while (p < end) {
        uint32_t blen, n;
        if (end - p < 4) goto bad;
        memcpy(&blen, p, 4);
        p += 4;
        if ((size_t)(end - p) < blen || blen < 4) goto bad;
        const uint8_t *q = p, *qend = p + blen;
        p += blen;
        memcpy(&n, q, 4);
        q += 4;
        if ((size_t)(qend - q) != (size_t)n * 12) goto bad;
        for (uint32_t i = 0; i < n; i++, q += 12) {
            uint32_t k;
            int64_t next;
            memcpy(&k, q, 4);
            memcpy(&next, q + 4, 8);
            if ((int)k >= r->o->splits) goto bad;
            if ((int)k % r->parallelism != r->subtask) continue; /* another subtask's split now */
            dg_split_t *sp = &r->splits[((int)k - r->subtask) / r->parallelism];
            if (next < 0 || (sp->end >= 0 && next > sp->end)) goto bad;
            sp->next = next;
            if (sp->end >= 0 && next >= sp->end && !sp->done) {
                sp->done = true;
                r->live--;
                r->restored_done = true;
            }
        }
    }
    r->t0 = 0; /* the rate restarts from now */
    r->emitted = 0;
    return 0;
bad:
    return sl_errf(err, errlen, SL_EFORMAT, "datagen: restored positions are malformed");
}

static void dg_destroy_reader(void *reader) {
    dg_reader_t *r = reader;
    if (!r) return;
    sl_free(r->splits);
    sl_free(r);
}

static void dg_destroy(void *ctx) { sl_free(ctx); }

static const sl_source_ops_t datagen_ops = {
    .name = "datagen",
    .create_reader = dg_create_reader,
    .snapshot = dg_snapshot,
    .restore = dg_restore,
    .poll = dg_poll,
    .destroy_reader = dg_destroy_reader,
    .destroy = dg_destroy,
};

sl_source_t sl_datagen_source(sl_datagen_opts_t opts) {
    sl_datagen_opts_t *ctx = sl_malloc(sizeof *ctx);
    *ctx = opts;
    sl_source_t s = {&datagen_ops, ctx, sl_datagen_schema()};
    return s;
}
