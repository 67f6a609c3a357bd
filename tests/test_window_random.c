/*
 * test_window_random.c — randomized end-to-end check of event-time windows.
 *
 * Each case builds a real job:
 *
 *   scripted source (parallelism 1, 1..4 splits, a virtual clock the reader
 *   advances, watermark strategy bounded(B) with an idle timeout)
 *     -> key_by(k) -> window (tumbling / sliding / session, allowed lateness
 *        0 or > 0, late records to side output "late") at parallelism P
 *     -> aggregate count and sum per (key, window) -> collecting sink
 *     -> side output "late" -> collecting sink
 *
 * and compares every window firing and every late record, as multisets,
 * with the brute-force model in window_reference.h fed the very same reader
 * actions.  Each window subtask gets its records and watermarks through one
 * channel in source order, and the source reads only the virtual clock, so
 * the result is deterministic.
 *
 * The input: per split, events out of order within B, a share behind the
 * bound (a little, often within the allowed lateness, or far), jumps in
 * event time (session gaps), pauses while the other splits go on (idleness;
 * a turn in which every split pauses advances the clock by 1 ms), empty
 * splits and splits that end early; sometimes negative timestamps, negative
 * offsets, sliding sizes that are not a multiple of the slide (or smaller
 * than it: events in no window).  Then some events are moved onto the edges
 * of the rules with the watermark they will meet (see aim_at_edges).
 * Watermarks: auto-watermark-interval 0 (after every record) in 3 of 4
 * cases, else periodic in virtual ms (checked when a poll returns), which
 * also reaches "every split idle".
 *
 * Extra checks on the engine output: every firing carries the timestamp
 * end - 1 (Flink's window.maxTimestamp()); firings of one (key, window)
 * come out with strictly growing counts; late records are the input rows
 * with their timestamps; for tumbling and sliding windows the final firings
 * plus the late records account for every (event, window) pair; the window
 * operator counted every record in; every sink subtask finished.  The model
 * checks itself: every event is late, or counted in the final firing of
 * every window it went into.
 *
 * Environment:
 *   SLUICE_SOAK_SEEDS=n   run n cases instead of 40 (soak runs)
 *   SLUICE_RAND_SEED=s    base seed (default 0x5eed)
 *   SLUICE_RAND_CASE=i    run only case i (reproduce a failure)
 *   SLUICE_RAND_VERBOSE=1 one line per case
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <time.h>

#include "pipeline_util.h"
#include "test.h"
#include "window_reference.h"

/* ---- random numbers ---- */

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* uniform in [lo, hi] */
static int64_t rnd(uint64_t *s, int64_t lo, int64_t hi) {
    if (hi <= lo) return lo;
    return lo + (int64_t)(rng_next(s) % (uint64_t)(hi - lo + 1));
}

static double rndf(uint64_t *s) { return (double)(rng_next(s) >> 11) / 9007199254740992.0; }

/* ---- a case ---- */

typedef struct rcase {
    int idx;
    uint64_t seed;
    int P;
    int max_poll;
    int K;
    double late_frac;
    wr_params_t p;
    wr_event_t *ev;
    int nev;
    wr_action_t *act;
    int nact;
    int split_len[8];
    int split_pauses[8];
    int edge_events; /* moved onto a rule's edge */
    bool negative;   /* event times start below 0 */
    atomic_llong clock;
    /* restore mode: checkpoints, one injected failure, a restart */
    bool restore;
    int fail_id;          /* the map fails once on the event with this id */
    atomic_int failed;
    atomic_int restored;  /* the source resumed from a checkpoint */
    /* rescale mode: no restart; the failed job is restored by a second one
     * at another parallelism.  The source waits at the start of the poll
     * that holds the failing event (fail_batch) until a checkpoint has been
     * committed (commits of *committed), so that there is one to restore. */
    bool rescale;
    int fail_batch;
    txn_collected_t *committed;
} rcase_t;

static const char *kind_name(int k) { return k == WR_TUMBLING ? "tumbling" : k == WR_SLIDING ? "sliding" : "session"; }

static void case_describe(const rcase_t *c, char *buf, size_t cap) {
    const wr_params_t *p = &c->p;
    int n = snprintf(buf, cap, "case %d seed=0x%" PRIx64 " %s", c->idx, c->seed, kind_name(p->kind));
    if (p->kind == WR_TUMBLING)
        n += snprintf(buf + n, cap - (size_t)n, "(size=%lld offset=%lld)", (long long)p->size, (long long)p->offset);
    else if (p->kind == WR_SLIDING)
        n += snprintf(buf + n, cap - (size_t)n, "(size=%lld slide=%lld offset=%lld)", (long long)p->size,
                      (long long)p->slide, (long long)p->offset);
    else
        n += snprintf(buf + n, cap - (size_t)n, "(gap=%lld)", (long long)p->gap);
    n += snprintf(buf + n, cap - (size_t)n,
                  " L=%lld P=%d splits=%d keys=%d B=%lld idle_timeout=%lld wm_interval=%lld max_poll=%d events=%d "
                  "late_frac=%.3f edge_events=%d%s split_len=[",
                  (long long)p->lateness, c->P, p->nsplits, c->K, (long long)p->bound, (long long)p->idle_timeout,
                  (long long)p->interval, c->max_poll, c->nev, c->late_frac, c->edge_events,
                  c->negative ? " negative_ts" : "");
    for (int i = 0; i < p->nsplits; i++)
        n += snprintf(buf + n, cap - (size_t)n, "%s%d/%dp", i ? " " : "", c->split_len[i], c->split_pauses[i]);
    snprintf(buf + n, cap - (size_t)n, "]");
}

/* Moves some events onto the edges of the rules, using the watermark each
 * event will meet (from the model).  Only events that do not raise their
 * split's max timestamp are moved, and only to timestamps that do not raise
 * it either, so the watermark sequence stays the same.  For a watermark W
 * at arrival, the event's last window (largest end) gets max timestamp m:
 *   m = W - L      cleanup == W: late (tumbling, m itself: ts + L == W)
 *   m = W - L + 1  cleanup == W + 1: kept
 *   m = W          fires at once (with L > 0)
 *   m = W + 1      waits for the next watermark
 * and for sessions also m = W - L + j, 1 < j < gap: kept, with a start
 * that may touch a session of the key already cleaned up. */
static void aim_at_edges(rcase_t *c, uint64_t *s) {
    const wr_params_t *p = &c->p;
    wr_result_t r;
    wr_run(p, c->ev, c->nev, c->act, c->nact, &r);
    int64_t maxts[4];
    for (int i = 0; i < 4; i++) maxts[i] = WR_MIN;
    double frac = rndf(s) < 0.2 ? 0 : 0.5;
    int64_t step = p->kind == WR_SLIDING ? p->slide : p->size;
    int64_t span = p->size < step ? p->size : step; /* ts with the same latest window */
    for (int a = 0; a < c->nact; a++) {
        if (c->act[a].kind != WR_EMIT) continue;
        wr_event_t *e = &c->ev[c->act[a].ev];
        int64_t before = maxts[e->split];
        if (e->ts > maxts[e->split]) maxts[e->split] = e->ts;
        int64_t W = r.wm_at[e->id];
        if (W == WR_MIN || before == WR_MIN || e->ts > before || rndf(s) >= frac) continue;
        /* sessions, a fifth: kept, but up to a gap behind W - L, where it
         * can touch a session of its key that was just cleaned up (which
         * must not come back: the event starts a session of its own) */
        int64_t ms[5] = {W - p->lateness, W - p->lateness + 1, W, W + 1,
                         W - p->lateness + (p->kind == WR_SESSION && p->gap > 2 ? rnd(s, 2, p->gap - 1) : 1)};
        int nms = p->kind == WR_SESSION ? 5 : 4;
        int first = (int)rnd(s, 0, nms - 1);
        for (int k = 0; k < nms; k++) {
            int64_t m = ms[(first + k) % nms], ts;
            if (p->kind == WR_SESSION) {
                ts = m - p->gap + 1;
            } else {
                /* ts whose latest window is [m + 1 - size, m + 1) */
                int64_t lo = m + 1 - p->size;
                if (wr_floor_mod(lo - p->offset, step) != 0) continue;
                ts = rndf(s) < 0.5 ? lo + span - 1 : lo + rnd(s, 0, span - 1);
            }
            if ((ts < 0 && !c->negative) || ts > before) continue;
            e->ts = ts;
            c->edge_events++;
            break;
        }
    }
    wr_free(&r);
}

/* Builds the events of every split and the reader's interleaving.  Splits
 * are visited round-robin, one event per turn; a split in a pause skips its
 * turns; a split whose events are used up is finished at its next turn. */
static void case_generate(rcase_t *c, int idx, uint64_t seed) {
    memset(c, 0, sizeof *c);
    c->idx = idx;
    c->seed = seed;
    static const int Ps[3] = {1, 2, 4};
    wr_params_t *p = &c->p;
    p->kind = idx % 3;
    c->P = Ps[(idx / 3) % 3];
    uint64_t s = seed;
    p->nsplits = (int)rnd(&s, 1, 4);
    c->K = rndf(&s) < 0.8 ? (int)rnd(&s, 1, 6) : (int)rnd(&s, 7, 64);
    p->bound = rndf(&s) < 0.15 ? 0 : rnd(&s, 1, 40);
    p->idle_timeout = rndf(&s) < 0.15 ? 0 : rnd(&s, 5, 40);
    p->clock0 = 1000;
    /* auto-watermark interval: mostly 0 (after every record); else periodic
     * in virtual ms, checked when a poll returns */
    p->interval = rndf(&s) < 0.75 ? 0 : rndf(&s) < 0.5 ? 1 : rnd(&s, 2, 30);
    c->max_poll = (int)rnd(&s, 1, 64);
    int64_t scale;
    if (p->kind == WR_TUMBLING) {
        p->size = rnd(&s, 5, 150);
        p->offset = rndf(&s) < 0.3 ? rnd(&s, -(p->size - 1), p->size - 1) : 0;
        scale = p->size;
    } else if (p->kind == WR_SLIDING) {
        p->slide = rnd(&s, 3, 50);
        int shape = (idx / 9) % 5; /* every shape within the default 40 cases */
        if (shape == 0) /* not a multiple of the slide */
            p->size = p->slide * rnd(&s, 1, 4) + rnd(&s, 1, p->slide - 1);
        else if (shape == 1) /* smaller than the slide: some events are in no window */
            p->size = rnd(&s, 1, p->slide - 1);
        else
            p->size = p->slide * (rndf(&s) < 0.2 ? 1 : rnd(&s, 2, 5));
        p->offset = rndf(&s) < 0.3 ? rnd(&s, -(p->slide - 1), p->slide - 1) : 0;
        scale = p->size > p->slide ? p->size : p->slide;
    } else {
        p->gap = rnd(&s, 3, 80);
        scale = p->gap;
    }
    p->lateness = rndf(&s) < 0.5 ? 0 : rnd(&s, 1, 2 * scale);
    c->late_frac = rndf(&s) * 0.15;
    double jump_frac = rndf(&s) < 0.3 ? 0 : rndf(&s) * 0.06; /* gaps in event time */
    int total = (int)rnd(&s, 200, p->kind == WR_SLIDING ? 1500 : 2500);
    c->negative = rndf(&s) < 0.2;
    int64_t origin = c->negative ? -3000 : 1000;

    /* per split: events and pauses (in turns) before some events */
    int nsplit = p->nsplits;
    int *len = c->split_len;
    int *pause_before[4] = {0};
    int cap = total + 64;
    c->ev = calloc((size_t)cap * 4, sizeof *c->ev);
    int first[4];
    for (int i = 0; i < nsplit; i++) {
        double r = rndf(&s);
        if (r < 0.10)
            len[i] = 0; /* empty */
        else if (r < 0.25)
            len[i] = (int)rnd(&s, 1, 30); /* ends early */
        else
            len[i] = (int)rnd(&s, total / (2 * nsplit) + 1, 2 * total / nsplit + 1);
        bool pausy = rndf(&s) < 0.5;
        int64_t pause_every = rnd(&s, 10, 120);
        int64_t mean_step = rnd(&s, 1, 4);
        int64_t base = origin + rnd(&s, 0, 200);
        pause_before[i] = calloc((size_t)len[i] + 1, sizeof(int));
        first[i] = c->nev;
        if (pausy && rndf(&s) < 0.25) { /* starts late */
            pause_before[i][0] = (int)rnd(&s, 5, 80);
            c->split_pauses[i]++;
        }
        for (int j = 0; j < len[i]; j++) {
            wr_event_t *e = &c->ev[c->nev];
            e->id = c->nev;
            e->split = i;
            e->key = rnd(&s, 0, c->K - 1);
            e->amount = rnd(&s, -20, 100);
            base += rnd(&s, 0, 2 * mean_step);
            if (jump_frac > 0 && rndf(&s) < jump_frac) base += rnd(&s, scale, 4 * scale);
            double lr = rndf(&s);
            if (lr < c->late_frac / 2) /* a little behind the bound: often within the lateness */
                e->ts = base - rnd(&s, p->bound + 1, p->bound + scale);
            else if (lr < c->late_frac) /* far behind */
                e->ts = base - rnd(&s, p->bound + scale, p->bound + 4 * scale);
            else
                e->ts = base + rnd(&s, 0, p->bound);
            if (e->ts < 0 && !c->negative) e->ts = 0;
            if (pausy && j > 0 && rnd(&s, 1, pause_every) == 1) {
                pause_before[i][j] = (int)rnd(&s, 1, 60);
                c->split_pauses[i]++;
            }
            c->nev++;
        }
    }
    /* the interleaving; a turn in which no split emits advances the
     * virtual clock by 1 ms */
    int act_cap = c->nev + nsplit + 64;
    c->act = calloc((size_t)act_cap, sizeof *c->act);
#define PUSH_ACT(k, sp, e)                                                                         \
    do {                                                                                           \
        if (c->nact == act_cap) {                                                                  \
            act_cap *= 2;                                                                          \
            c->act = realloc(c->act, (size_t)act_cap * sizeof *c->act);                            \
        }                                                                                          \
        c->act[c->nact++] = (wr_action_t){k, sp, e};                                               \
    } while (0)
    int pos[4] = {0}, pause_left[4] = {0};
    bool done[4] = {0}, paused_at[4] = {0};
    int ndone = 0;
    while (ndone < nsplit) {
        bool emitted = false;
        for (int i = 0; i < nsplit; i++) {
            if (done[i]) continue;
            if (pause_left[i] > 0) {
                pause_left[i]--;
                continue;
            }
            if (pos[i] == len[i]) {
                PUSH_ACT(WR_FINISH, i, -1);
                done[i] = true;
                ndone++;
                continue;
            }
            if (pause_before[i][pos[i]] > 0 && !paused_at[i]) {
                pause_left[i] = pause_before[i][pos[i]] - 1; /* this turn is the first */
                paused_at[i] = true;
                continue;
            }
            paused_at[i] = false;
            PUSH_ACT(WR_EMIT, i, first[i] + pos[i]);
            pos[i]++;
            emitted = true;
        }
        if (!emitted && ndone < nsplit) PUSH_ACT(WR_ADVANCE, -1, -1);
    }
    /* the reader returns from poll after max_poll records, after a turn in
     * which no split emitted, and at the end */
    {
        wr_action_t *seq = c->act;
        int n = c->nact, emitted = 0;
        act_cap = n * 2 + 2;
        c->act = calloc((size_t)act_cap, sizeof *c->act);
        c->nact = 0;
        for (int a = 0; a < n; a++) {
            c->act[c->nact++] = seq[a];
            if (seq[a].kind == WR_EMIT) emitted++;
            if ((seq[a].kind == WR_EMIT && emitted == c->max_poll) || seq[a].kind == WR_ADVANCE) {
                PUSH_ACT(WR_POLL_END, -1, -1);
                emitted = 0;
            }
        }
        if (c->nact == 0 || c->act[c->nact - 1].kind != WR_POLL_END) PUSH_ACT(WR_POLL_END, -1, -1);
        free(seq);
    }
#undef PUSH_ACT
    for (int i = 0; i < nsplit; i++) free(pause_before[i]);
    aim_at_edges(c, &s);
}

static void case_free(rcase_t *c) {
    free(c->ev);
    free(c->act);
}

/* ---- the scripted source: replays c->act ---- */

typedef struct script_reader {
    rcase_t *c;
    int pos;
} script_reader_t;

static int script_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    rcase_t *c = ctx;
    if (p != 1) {
        snprintf(err, el, "the scripted source must run at parallelism 1 (got %d)", p);
        return SL_EINVAL;
    }
    script_reader_t *r = calloc(1, sizeof *r);
    r->c = c;
    atomic_store(&c->clock, c->p.clock0); /* a restart from the start starts the clock over (a restore sets it) */
    *reader = r;
    *nsplits = c->p.nsplits;
    return 0;
}

static int script_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    script_reader_t *r = reader;
    rcase_t *c = r->c;
    int emitted = 0;
    if (c->restore) { /* slow enough in real time for checkpoints to happen in between */
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (c->rescale && r->pos == c->fail_batch && !atomic_load(&c->failed)) {
        pthread_mutex_lock(&c->committed->mu);
        bool any = c->committed->commits > 0;
        pthread_mutex_unlock(&c->committed->mu);
        if (!any) return SL_SRC_MORE; /* nothing read: no watermark, no clock change */
    }
    while (r->pos < c->nact) {
        const wr_action_t *a = &c->act[r->pos++];
        if (a->kind == WR_POLL_END) break;
        if (a->kind == WR_FINISH) {
            sl_src_split_finished(out, a->split);
            continue;
        }
        if (a->kind == WR_ADVANCE) { /* every open split is pausing */
            atomic_fetch_add(&c->clock, 1);
            continue;
        }
        if (emitted == max) {
            snprintf(err, el, "the script's batch is larger than the %d records poll allows", max);
            return SL_EINVAL;
        }
        const wr_event_t *e = &c->ev[a->ev];
        atomic_fetch_add(&c->clock, 1); /* 1 virtual ms per event */
        sl_row_writer_t *w = sl_src_row(out);
        sl_rw_set_i64(w, 0, e->key);
        sl_rw_set_i64(w, 1, e->amount);
        sl_rw_set_i64(w, 2, e->ts);
        sl_rw_set_i64(w, 3, e->id);
        sl_src_emit(out, a->split, e->ts);
        emitted++;
    }
    return r->pos == c->nact ? SL_SRC_END : SL_SRC_MORE;
}

/* The script's position and the virtual clock: a restored run replays the
 * script from there, with processing time where it was. */
static int script_snapshot(void *reader, int64_t id, void (*put)(void *, const void *, size_t), void *pc) {
    script_reader_t *r = reader;
    int64_t e[2] = {r->pos, atomic_load(&r->c->clock)};
    put(pc, e, sizeof e);
    return 0;
}

static int script_restore(void *reader, const void *state, size_t len, char *err, size_t el) {
    script_reader_t *r = reader;
    int64_t e[2];
    if (len != 4 + sizeof e) {
        snprintf(err, el, "script state of %zu bytes", len);
        return SL_EFORMAT;
    }
    memcpy(e, (const uint8_t *)state + 4, sizeof e);
    r->pos = (int)e[0];
    atomic_store(&r->c->clock, e[1]);
    atomic_fetch_add(&r->c->restored, 1);
    return 0;
}

static void script_destroy_reader(void *reader) { free(reader); }
static void script_destroy(void *ctx) { (void)ctx; /* the case is the test's */ }

static const sl_source_ops_t script_ops = {.name = "script",
                                           .create_reader = script_create,
                                           .poll = script_poll,
                                           .destroy_reader = script_destroy_reader,
                                           .destroy = script_destroy,
                                           .snapshot = script_snapshot,
                                           .restore = script_restore};

/* Restore mode: fails once, on event fail_id. */
static int fail_once(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    rcase_t *c = ctx;
    if (sl_row_i64(&in->row, 3) == c->fail_id && !atomic_exchange(&c->failed, 1)) return SL_EUSER;
    for (int i = 0; i < 4; i++) sl_rw_set_i64(out, i, sl_row_i64(&in->row, i));
    return 0;
}

static int64_t virtual_clock(void *ctx) { return atomic_load(&((rcase_t *)ctx)->clock); }

static sl_schema_t *in_schema(void) {
    return sl_schema_parse("k BIGINT NOT NULL, amount BIGINT NOT NULL, ts BIGINT NOT NULL, id BIGINT NOT NULL",
                           NULL, 0);
}

static sl_schema_t *out_schema(void) {
    return sl_schema_parse(
        "k BIGINT NOT NULL, wstart BIGINT NOT NULL, wend BIGINT NOT NULL, cnt BIGINT NOT NULL, total BIGINT NOT NULL",
        NULL, 0);
}

/* ---- the aggregate: count and sum ---- */

typedef struct acc {
    int64_t cnt, sum;
} acc_t;

static void agg_init(void *ctx, void *a) { memset(a, 0, sizeof(acc_t)); }

static int agg_add(void *ctx, void *a, const sl_record_t *in) {
    acc_t *x = a;
    x->cnt++;
    x->sum += sl_row_i64(&in->row, 1);
    return 0;
}

static void agg_merge(void *ctx, void *a, const void *b) {
    acc_t *x = a;
    const acc_t *y = b;
    x->cnt += y->cnt;
    x->sum += y->sum;
}

static int agg_result(void *ctx, const void *a, const uint8_t *key, uint32_t keylen, const sl_window_t *win,
                      sl_row_writer_t *out) {
    acc_t x;
    memcpy(&x, a, sizeof x);
    if (keylen != 8) return SL_EINVAL;
    int64_t k;
    memcpy(&k, key, 8);
    sl_rw_set_i64(out, 0, k);
    sl_rw_set_i64(out, 1, win->start);
    sl_rw_set_i64(out, 2, win->end);
    sl_rw_set_i64(out, 3, x.cnt);
    sl_rw_set_i64(out, 4, x.sum);
    return 0;
}

/* ---- comparison ---- */

typedef struct efire {
    wr_firing_t f;
    int64_t ts;
    int subtask;
    int64_t seq; /* arrival order at the sink */
} efire_t;

static int cmp_firing(const wr_firing_t *a, const wr_firing_t *b) {
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    if (a->end != b->end) return a->end < b->end ? -1 : 1;
    if (a->cnt != b->cnt) return a->cnt < b->cnt ? -1 : 1;
    if (a->sum != b->sum) return a->sum < b->sum ? -1 : 1;
    return 0;
}

static int cmp_firing_q(const void *a, const void *b) { return cmp_firing(a, b); }

static int cmp_efire_q(const void *a, const void *b) {
    const efire_t *x = a, *y = b;
    int c = cmp_firing(&x->f, &y->f);
    if (c) return c;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_i64_q(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static bool same_window(const wr_firing_t *a, const wr_firing_t *b) {
    return a->key == b->key && a->start == b->start && a->end == b->end;
}

static const char *outcome_name(int o) {
    return o == WR_LATE      ? "late"
           : o == WR_PARTIAL ? "added (some windows already gone)"
           : o == WR_DROPPED ? "dropped (in no window, not late)"
                             : "added";
}

static void fmt_wm(int64_t wm, char *buf, size_t cap) {
    if (wm == WR_MIN)
        snprintf(buf, cap, "MIN");
    else if (wm == WR_MAX)
        snprintf(buf, cap, "MAX");
    else
        snprintf(buf, cap, "%lld", (long long)wm);
}

/* Prints the events of key with ts in [lo, hi) in arrival order with the
 * watermark they met and what the model did with them; '*' marks the ones
 * with ts in [mlo, mhi). */
static void explain(const rcase_t *c, const wr_result_t *r, int64_t key, int64_t lo, int64_t hi, int64_t mlo,
                    int64_t mhi) {
    int shown = 0, total = 0;
    for (int a = 0; a < c->nact; a++) {
        if (c->act[a].kind != WR_EMIT) continue;
        const wr_event_t *e = &c->ev[c->act[a].ev];
        if (e->key != key || e->ts < lo || e->ts >= hi) continue;
        total++;
        if (shown >= 30) continue;
        char wm[32];
        fmt_wm(r->wm_at[e->id], wm, sizeof wm);
        fprintf(stderr, "    %c action #%d id=%lld split=%d ts=%lld amount=%lld wm_at_arrival=%s -> %s\n",
                e->ts >= mlo && e->ts < mhi ? '*' : ' ', a, (long long)e->id, e->split, (long long)e->ts,
                (long long)e->amount, wm, outcome_name(r->outcome[e->id]));
        shown++;
    }
    if (total > shown) fprintf(stderr, "      ... %d more\n", total - shown);
}

static int64_t explain_margin(const rcase_t *c) {
    const wr_params_t *p = &c->p;
    return p->kind == WR_SESSION ? p->gap : p->size;
}

/* Compares one case; returns the number of problems (and prints them). */
static int compare_case(const rcase_t *c, const wr_result_t *r, const collected_t *fired, const collected_t *late,
                        const sl_schema_t *osc, const sl_schema_t *isc, const char *desc) {
    int problems = 0;
    const wr_params_t *p = &c->p;
#define PROBLEM_HEADER()                                                                           \
    do {                                                                                           \
        if (problems++ == 0) fprintf(stderr, "  MISMATCH in %s\n", desc);                          \
    } while (0)

    /* engine firings */
    int64_t ne = fired->n;
    efire_t *eng = calloc((size_t)ne + 1, sizeof *eng);
    int bad_ts = 0;
    for (int64_t i = 0; i < ne; i++) {
        sl_row_t row = collected_row(fired, i, osc);
        eng[i].f.key = sl_row_i64(&row, 0);
        eng[i].f.start = sl_row_i64(&row, 1);
        eng[i].f.end = sl_row_i64(&row, 2);
        eng[i].f.cnt = sl_row_i64(&row, 3);
        eng[i].f.sum = sl_row_i64(&row, 4);
        eng[i].ts = fired->ts[i];
        eng[i].subtask = fired->subtask[i];
        eng[i].seq = i;
        if (eng[i].ts != eng[i].f.end - 1) {
            if (bad_ts++ < 5) {
                PROBLEM_HEADER();
                fprintf(stderr,
                        "    firing key=%lld [%lld,%lld) cnt=%lld carries timestamp %lld, expected end-1=%lld\n",
                        (long long)eng[i].f.key, (long long)eng[i].f.start, (long long)eng[i].f.end,
                        (long long)eng[i].f.cnt, (long long)eng[i].ts, (long long)(eng[i].f.end - 1));
            }
        }
    }
    if (bad_ts > 5) fprintf(stderr, "    ... %d firings with a wrong timestamp in all\n", bad_ts);
    problems += bad_ts > 5 ? bad_ts - 5 : 0;

    /* order: firings of one (key, window) in emission order have growing counts */
    qsort(eng, (size_t)ne, sizeof *eng, cmp_efire_q); /* by window, then count, then seq */
    {
        int reported = 0;
        for (int64_t i = 1; i < ne; i++) {
            if (!same_window(&eng[i].f, &eng[i - 1].f)) continue;
            /* sorted by count within the window: seq must grow too, and counts strictly */
            if (eng[i].f.cnt == eng[i - 1].f.cnt || eng[i].seq < eng[i - 1].seq) {
                PROBLEM_HEADER();
                if (reported++ < 5)
                    fprintf(stderr,
                            "    order: key=%lld [%lld,%lld) fired cnt=%lld (sink arrival %lld) and cnt=%lld (sink "
                            "arrival %lld)%s\n",
                            (long long)eng[i].f.key, (long long)eng[i].f.start, (long long)eng[i].f.end,
                            (long long)eng[i - 1].f.cnt, (long long)eng[i - 1].seq, (long long)eng[i].f.cnt,
                            (long long)eng[i].seq,
                            eng[i].f.cnt == eng[i - 1].f.cnt ? " (same count twice)" : " (count went down)");
            }
        }
    }

    /* multiset comparison of firings, grouped by (key, window) */
    wr_firing_t *exp = malloc(((size_t)r->nfire + 1) * sizeof *exp);
    if (r->nfire) memcpy(exp, r->fire, (size_t)r->nfire * sizeof *exp);
    qsort(exp, (size_t)r->nfire, sizeof *exp, cmp_firing_q);
    {
        int64_t i = 0, j = 0;
        int groups_shown = 0, groups_bad = 0;
        int64_t missing = 0, extra = 0;
        while (i < r->nfire || j < ne) {
            /* the next window in either list */
            const wr_firing_t *w;
            if (i < r->nfire && (j >= ne || cmp_firing(&exp[i], &eng[j].f) <= 0))
                w = &exp[i];
            else
                w = &eng[j].f;
            wr_firing_t key = *w;
            int64_t i0 = i, j0 = j;
            while (i < r->nfire && same_window(&exp[i], &key)) i++;
            while (j < ne && same_window(&eng[j].f, &key)) j++;
            bool same = (i - i0) == (j - j0);
            for (int64_t k = 0; same && k < i - i0; k++) same = cmp_firing(&exp[i0 + k], &eng[j0 + k].f) == 0;
            if (same) continue;
            groups_bad++;
            /* count missing / unexpected in this group (multiset difference) */
            int64_t a = i0, b = j0;
            while (a < i || b < j) {
                int cm = a < i && b < j ? cmp_firing(&exp[a], &eng[b].f) : a < i ? -1 : 1;
                if (cm == 0) {
                    a++;
                    b++;
                } else if (cm < 0) {
                    missing++;
                    a++;
                } else {
                    extra++;
                    b++;
                }
            }
            PROBLEM_HEADER();
            if (groups_shown++ < 6) {
                fprintf(stderr, "    key=%lld window [%lld,%lld): expected firings (cnt,sum):", (long long)key.key,
                        (long long)key.start, (long long)key.end);
                for (int64_t k = i0; k < i; k++)
                    fprintf(stderr, " (%lld,%lld)", (long long)exp[k].cnt, (long long)exp[k].sum);
                if (i == i0) fprintf(stderr, " none");
                fprintf(stderr, "\n      engine firings (cnt,sum):");
                for (int64_t k = j0; k < j; k++)
                    fprintf(stderr, " (%lld,%lld)", (long long)eng[k].f.cnt, (long long)eng[k].f.sum);
                if (j == j0) fprintf(stderr, " none");
                fprintf(stderr, "\n");
                if (groups_shown <= 2) {
                    int64_t m = explain_margin(c);
                    fprintf(stderr, "    model trace for key %lld, ts in [%lld,%lld) (* = in the window):\n",
                            (long long)key.key, (long long)(key.start - m), (long long)(key.end + m));
                    explain(c, r, key.key, key.start - m, key.end + m, key.start, key.end);
                }
            }
        }
        if (groups_bad) {
            fprintf(stderr, "    firings: %d window(s) differ; %lld expected firing(s) missing, %lld unexpected "
                    "(expected %d firings, engine %lld)\n",
                    groups_bad, (long long)missing, (long long)extra, r->nfire, (long long)ne);
            problems += groups_bad;
        }
    }

    /* late records */
    int64_t nl = late->n;
    int64_t *lid = calloc((size_t)nl + 1, sizeof *lid);
    int bad_late_rows = 0;
    for (int64_t i = 0; i < nl; i++) {
        sl_row_t row = collected_row(late, i, isc);
        int64_t id = sl_row_i64(&row, 3);
        lid[i] = id;
        if (id < 0 || id >= c->nev) {
            PROBLEM_HEADER();
            fprintf(stderr, "    late output has a record with unknown id %lld\n", (long long)id);
            bad_late_rows++;
            continue;
        }
        const wr_event_t *e = &c->ev[id];
        if (sl_row_i64(&row, 0) != e->key || sl_row_i64(&row, 1) != e->amount || sl_row_i64(&row, 2) != e->ts ||
            late->ts[i] != e->ts) {
            PROBLEM_HEADER();
            if (bad_late_rows < 5)
                fprintf(stderr, "    late record id=%lld is (k=%lld amount=%lld ts=%lld rec.ts=%lld), input was "
                        "(k=%lld amount=%lld ts=%lld)\n",
                        (long long)id, (long long)sl_row_i64(&row, 0), (long long)sl_row_i64(&row, 1),
                        (long long)sl_row_i64(&row, 2), (long long)late->ts[i], (long long)e->key,
                        (long long)e->amount, (long long)e->ts);
            bad_late_rows++;
        }
    }
    problems += bad_late_rows;
    int64_t *xl = malloc(((size_t)r->nlate + 1) * sizeof *xl);
    if (r->nlate) memcpy(xl, r->late, (size_t)r->nlate * sizeof *xl);
    qsort(xl, (size_t)r->nlate, sizeof *xl, cmp_i64_q);
    qsort(lid, (size_t)nl, sizeof *lid, cmp_i64_q);
    {
        int64_t i = 0, j = 0, missing = 0, extra = 0;
        int shown = 0, explained = 0;
        while (i < r->nlate || j < nl) {
            if (i < r->nlate && j < nl && xl[i] == lid[j]) {
                i++;
                j++;
                continue;
            }
            bool is_missing = j >= nl || (i < r->nlate && xl[i] < lid[j]);
            int64_t id = is_missing ? xl[i++] : lid[j++];
            if (is_missing)
                missing++;
            else
                extra++;
            PROBLEM_HEADER();
            if (shown++ < 10) {
                if (id >= 0 && id < c->nev) {
                    const wr_event_t *e = &c->ev[id];
                    char wm[32];
                    fmt_wm(r->wm_at[id], wm, sizeof wm);
                    fprintf(stderr,
                            "    late record id=%lld (key=%lld ts=%lld split=%d, model wm at arrival %s, model: "
                            "%s) %s\n",
                            (long long)id, (long long)e->key, (long long)e->ts, e->split, wm,
                            outcome_name(r->outcome[id]),
                            is_missing ? "expected in the late output but missing"
                                       : "in the late output but not expected");
                    if (explained++ < 2) {
                        int64_t m = explain_margin(c);
                        fprintf(stderr, "    model trace for key %lld, ts in [%lld,%lld) (* = this record):\n",
                                (long long)e->key, (long long)(e->ts - 2 * m), (long long)(e->ts + 2 * m));
                        explain(c, r, e->key, e->ts - 2 * m, e->ts + 2 * m, e->ts, e->ts + 1);
                    }
                } else {
                    fprintf(stderr, "    late record id=%lld unexpected\n", (long long)id);
                }
            }
        }
        if (missing || extra) {
            fprintf(stderr, "    late records: %lld missing, %lld unexpected (expected %d, engine %lld)\n",
                    (long long)missing, (long long)extra, r->nlate, (long long)nl);
            problems += (int)(missing + extra);
        }
    }

    /* accounting on the engine's output (tumbling and sliding): the final
     * (largest) firing of each window plus the late records cover every
     * (event, window) pair, except the pairs whose window was already gone
     * when the event came (from the model) */
    if (p->kind != WR_SESSION) {
        int64_t fin_cnt = 0, fin_sum = 0, late_cnt = 0, late_sum = 0, all_cnt = 0, all_sum = 0;
        for (int64_t i = 0; i < ne; i++)
            if (i + 1 == ne || !same_window(&eng[i].f, &eng[i + 1].f)) {
                fin_cnt += eng[i].f.cnt;
                fin_sum += eng[i].f.sum;
            }
        for (int64_t i = 0; i < nl; i++)
            if (lid[i] >= 0 && lid[i] < c->nev) {
                late_cnt += r->nassigned[lid[i]];
                late_sum += r->nassigned[lid[i]] * c->ev[lid[i]].amount;
            }
        for (int i = 0; i < c->nev; i++) {
            all_cnt += r->nassigned[i];
            all_sum += r->nassigned[i] * c->ev[i].amount;
        }
        int64_t lhs_cnt = fin_cnt + late_cnt + r->partial_pairs;
        int64_t lhs_sum = fin_sum + late_sum + r->partial_sum;
        if (lhs_cnt != all_cnt || lhs_sum != all_sum) {
            PROBLEM_HEADER();
            fprintf(stderr,
                    "    accounting: (event, window) pairs in final firings %lld + of late records %lld + dropped "
                    "%lld = %lld, expected %lld (amounts: %lld vs %lld)\n",
                    (long long)fin_cnt, (long long)late_cnt, (long long)r->partial_pairs, (long long)lhs_cnt,
                    (long long)all_cnt, (long long)lhs_sum, (long long)all_sum);
        }
    }

    free(eng);
    free(exp);
    free(lid);
    free(xl);
    return problems;
#undef PROBLEM_HEADER
}

/* ---- running one case ---- */

typedef struct run_stats {
    int cases, failed;
    int64_t events, firings, late, immediate, idle_marks, reactivations, merges, bridges, partial, dropped,
        dropped_late, all_idle, restarts, restored;
} run_stats_t;

/* One run of the job at parallelism P (window and sinks).  mode 0: no
 * checkpoints; 1: checkpoints and a restart after the injected failure;
 * 2: checkpoints kept in ck, no restart (restore_from: restore from ck). */
static int run_job(rcase_t *c, int P, int mode, const char *ck, const char *restore_from, bool rocksdb,
                   txn_collected_t *tfired, txn_collected_t *tlate, sl_env_t **envp) {
    sl_env_t *env = sl_env_new();
    *envp = env;
    sl_env_set_parallelism(env, P);
    sl_env_set_auto_watermark_interval(env, c->p.interval);
    sl_env_set_clock(env, virtual_clock, c);
    if (mode) {
        sl_env_enable_checkpointing(env, 10, SL_CHECKPOINT_EXACTLY_ONCE);
        sl_env_set_checkpoint_dir(env, ck);
        if (mode == 1) {
            sl_env_set_restart_fixed_delay(env, 1, 0);
        } else {
            sl_env_set_checkpoint_retention(env, SL_CHECKPOINTS_RETAIN_ON_CANCELLATION);
            sl_env_set_restart_none(env);
        }
    }
    if (rocksdb) {
        char rdb[1100];
        snprintf(rdb, sizeof rdb, "%s-rocksdb%s", ck, restore_from ? "-2" : "");
        sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);
        sl_env_set_rocksdb_options(env, rdb, 4 << 20, 1 << 20);
    }
    if (restore_from && sl_env_restore_from(env, restore_from) != 0) return SL_EINVAL;
    sl_watermark_strategy_t ws = sl_wm_bounded("ts", c->p.bound);
    ws.idle_timeout_ms = c->p.idle_timeout;
    sl_source_t src = {&script_ops, c, in_schema()};
    sl_stream_t *s = sl_uid(sl_parallelism(sl_from_source(env, src, ws, "script"), 1), "script");
    if (mode) s = sl_uid(sl_parallelism(sl_map(s, fail_once, c, in_schema()), 1), "fail-once"); /* chained */
    sl_window_assigner_t *as = c->p.kind == WR_TUMBLING  ? sl_tumbling_event_time(c->p.size, c->p.offset)
                               : c->p.kind == WR_SLIDING ? sl_sliding_event_time(c->p.size, c->p.slide, c->p.offset)
                                                         : sl_session_event_time(c->p.gap);
    sl_windowed_t *w = sl_window(sl_key_by(s, "k"), as);
    if (c->p.lateness > 0) w = sl_window_allowed_lateness(w, c->p.lateness);
    w = sl_window_late_output(w, "late");
    sl_aggregate_fn_t agg = {sizeof(acc_t), agg_init, agg_add, agg_merge, agg_result, NULL};
    sl_stream_t *o = sl_window_aggregate(w, agg, out_schema());
    if (!o) return SL_EINVAL;
    sl_parallelism(sl_uid(sl_name(o, "window"), "window"), P);
    sl_uid(sl_parallelism(sl_sink_to(o, txn_collect_sink(tfired), "fired"), P), "fired");
    sl_stream_t *lo = sl_side_output(o, "late");
    if (lo) sl_uid(sl_parallelism(sl_sink_to(lo, txn_collect_sink(tlate), "late"), P), "late");
    return sl_env_execute(env, "window-random");
}

/* restore: 0 none, 1 restart in place, 2 rescale (restore in a new job at
 * another parallelism; every other rescaled case on RocksDB). */
static int run_case(int idx, uint64_t seed, run_stats_t *st, bool verbose, int restore) {
    rcase_t *c = calloc(1, sizeof *c);
    case_generate(c, idx, seed);
    c->restore = restore != 0;
    c->rescale = restore == 2;
    c->fail_id = c->nev > 0 ? c->ev[c->nev / 2 + (int)(seed % (uint64_t)(c->nev - c->nev / 2))].id : -1; /* late enough for a checkpoint */
    c->fail_batch = 0;
    for (int a = 0; a < c->nact; a++) {
        if (c->act[a].kind == WR_POLL_END) c->fail_batch = a + 1;
        if (c->act[a].kind == WR_EMIT && c->ev[c->act[a].ev].id == c->fail_id) break;
    }
    atomic_store(&c->clock, c->p.clock0);
    char desc[1024];
    case_describe(c, desc, sizeof desc);

    wr_result_t ref;
    int problems = 0;
    if (wr_run(&c->p, c->ev, c->nev, c->act, c->nact, &ref) < 0) {
        fprintf(stderr, "  %s\n  %s\n", desc, ref.err);
        problems++;
    }

    char ck[1024];
    snprintf(ck, sizeof ck, "%s/wr-%d-%d", sl_test_tmpdir(), restore, idx);
    txn_collected_t *tfired = txn_collected_new(), *tlate = txn_collected_new();
    collected_t *fired = tfired->out, *late = tlate->out;
    c->committed = tfired;
    static const int other_p[5] = {0, 3, 4, 0, 1}; /* P 1 -> 3, 2 -> 4, 4 -> 1 */
    int P2 = other_p[c->P];
    /* SLUICE_RAND_ROCKSDB=1: every case on the RocksDB backend (and its value cache) */
    bool rocksdb = (c->rescale && idx % 2 == 1) || getenv("SLUICE_RAND_ROCKSDB");
    sl_env_t *env = NULL;
    int rc = run_job(c, c->P, restore, ck, NULL, rocksdb, tfired, tlate, &env);
    if (c->rescale && c->nev > 0) {
        if (rc == 0 || !atomic_load(&c->failed)) {
            fprintf(stderr, "  %s\n    rescale: the first run %s\n", desc,
                    rc == 0 ? "did not fail" : "failed, not by the injected failure");
            problems++;
        }
        sl_env_destroy(env);
        char path[1100];
        snprintf(path, sizeof path, "%s/window-random", ck);
        rc = run_job(c, P2, 2, ck, path, rocksdb, tfired, tlate, &env);
        if (atomic_load(&c->restored) != 1) {
            fprintf(stderr, "  %s\n    rescale: the source resumed %d times from a checkpoint\n", desc,
                    atomic_load(&c->restored));
            problems++;
        }
    }
    int Pend = c->rescale && c->nev > 0 ? P2 : c->P;
    if (rc != 0) {
        fprintf(stderr, "  %s\n    job failed: rc=%d (%s) error: %s\n", desc, rc, sl_strerror(rc), sl_env_error(env));
        problems++;
    } else {
        if (fired->finished != Pend || late->finished != Pend) {
            fprintf(stderr, "  %s\n    sinks finished: %d and %d of %d subtasks\n", desc, fired->finished,
                    late->finished, Pend);
            problems++;
        }
        int64_t in = -1, out = -1;
        if (c->rescale) {
            st->restored += atomic_load(&c->restored);
        } else if (restore) { /* metrics are the last attempt's; what matters is that it failed and restarted */
            if (c->nev > 0 && (sl_env_restarts(env) != 1 || !atomic_load(&c->failed))) {
                fprintf(stderr, "  %s\n    restarts %d, injected failure %s\n", desc, sl_env_restarts(env),
                        atomic_load(&c->failed) ? "happened" : "never happened");
                problems++;
            }
            st->restored += atomic_load(&c->restored);
            st->restarts += sl_env_restarts(env);
        } else if (sl_env_operator_metrics(env, "window", &in, &out) != 0 || in != c->nev) {
            fprintf(stderr, "  %s\n    window operator records_in=%lld, expected %d\n", desc, (long long)in, c->nev);
            problems++;
        }
        sl_schema_t *osc = out_schema(), *isc = in_schema();
        problems += compare_case(c, &ref, fired, late, osc, isc, desc);
        sl_schema_unref(osc);
        sl_schema_unref(isc);
    }
    if (verbose || problems)
        fprintf(stderr, "  %s %s: events=%d firings=%d (engine %lld) late=%d (engine %lld) immediate=%lld idle=%lld "
                "reactivated=%lld merges=%lld wm_advances=%lld final_wm=%lld restored=%d\n",
                problems ? "FAIL" : "ok", desc, c->nev, ref.nfire, (long long)fired->n, ref.nlate, (long long)late->n,
                (long long)ref.immediate_fires, (long long)ref.idle_marks, (long long)ref.reactivations,
                (long long)ref.merges, (long long)ref.wm_advances, (long long)ref.final_wm, atomic_load(&c->restored));
    if (problems)
        fprintf(stderr, "  reproduce: SLUICE_RAND_SEED=0x%" PRIx64 " SLUICE_RAND_CASE=%d\n",
                (uint64_t)(seed - (uint64_t)idx * 0x1000193ULL), idx);
    st->cases++;
    st->failed += problems ? 1 : 0;
    st->events += c->nev;
    st->firings += ref.nfire;
    st->late += ref.nlate;
    st->immediate += ref.immediate_fires;
    st->idle_marks += ref.idle_marks;
    st->reactivations += ref.reactivations;
    st->merges += ref.merges;
    st->bridges += ref.bridges;
    st->partial += ref.partial_pairs;
    st->dropped += ref.dropped;
    st->all_idle += ref.all_idle;
    st->dropped_late += ref.dropped_late;
    wr_free(&ref);
    if (verbose || problems)
        fprintf(stderr, "    sinks: fired commits %lld recovered %lld, late commits %lld\n", (long long)tfired->commits,
                (long long)tfired->recovered, (long long)tlate->commits);
    txn_collected_free(tfired);
    txn_collected_free(tlate);
    sl_env_destroy(env);
    case_free(c);
    free(c);
    return problems;
}

/* ---- a hand-written case for the model itself (no engine) ---- */

TEST(reference_model_sanity) {
    /* one split, B = 0, tumbling 10, L = 5: events 1, 12, 3 (window [0,10)
     * fired at wm 11, kept until 14: late firing), 25 (wm 24 cleans [0,10)
     * and fires [10,20)), 4 (late), 30 */
    wr_event_t ev[] = {{0, 7, 1, 1, 0}, {1, 7, 2, 12, 0}, {2, 7, 4, 3, 0},
                       {3, 7, 8, 25, 0}, {4, 7, 16, 4, 0}, {5, 7, 32, 30, 0}};
    wr_action_t act[8];
    int na = 0;
    for (int i = 0; i < 6; i++) act[na++] = (wr_action_t){WR_EMIT, 0, i};
    act[na++] = (wr_action_t){WR_FINISH, 0, -1};
    wr_params_t p = {.kind = WR_TUMBLING, .nsplits = 1, .bound = 0, .idle_timeout = 20, .clock0 = 0, .size = 10,
                     .lateness = 5};
    wr_result_t r;
    CHECK_EQ(wr_run(&p, ev, 6, act, na, &r), 0);
    /* [0,10): (1,1) at wm 11, (2,5) late firing; [10,20): (1,2) at wm 24;
     * [20,30): (1,8) at wm 29; [30,40): (1,32) at the end */
    CHECK_EQ(r.nfire, 5);
    wr_firing_t want[] = {{7, 0, 10, 1, 1}, {7, 0, 10, 2, 5}, {7, 10, 20, 1, 2}, {7, 20, 30, 1, 8}, {7, 30, 40, 1, 32}};
    for (int i = 0; i < 5; i++) CHECK(cmp_firing(&r.fire[i], &want[i]) == 0);
    CHECK_EQ(r.nlate, 1);
    CHECK_EQ(r.late[0], 4);
    wr_free(&r);

    /* sessions, gap 5, B = 0, L = 0: 1 -> [1,6); 6 touches -> [1,11);
     * 20 -> wm 19 fires [1,11) (2 events); 8 is late alone ([8,13) cleanup
     * 12 <= 19); 16 touches [20,25)? [16,21) overlaps -> [16,25) */
    wr_event_t sv[] = {{0, 1, 1, 1, 0}, {1, 1, 2, 6, 0}, {2, 1, 4, 20, 0}, {3, 1, 8, 8, 0}, {4, 1, 16, 16, 0}};
    na = 0;
    for (int i = 0; i < 5; i++) act[na++] = (wr_action_t){WR_EMIT, 0, i};
    act[na++] = (wr_action_t){WR_FINISH, 0, -1};
    wr_params_t sp = {.kind = WR_SESSION, .nsplits = 1, .bound = 0, .idle_timeout = 0, .clock0 = 0, .gap = 5};
    CHECK_EQ(wr_run(&sp, sv, 5, act, na, &r), 0);
    CHECK_EQ(r.nfire, 2);
    wr_firing_t swant[] = {{1, 1, 11, 2, 3}, {1, 16, 25, 2, 20}};
    for (int i = 0; i < 2; i++) CHECK(cmp_firing(&r.fire[i], &swant[i]) == 0);
    CHECK_EQ(r.nlate, 1);
    CHECK_EQ(r.late[0], 3);
    wr_free(&r);

    /* idleness: split 1 emits once then pauses; timeout 3; split 0 goes on:
     * the watermark follows split 0 once split 1 is idle; split 1's next
     * event (ts 2, far behind) is late */
    wr_event_t iv[] = {{0, 0, 1, 100, 0}, {1, 0, 1, 1, 1}, {2, 0, 1, 110, 0}, {3, 0, 1, 120, 0},
                       {4, 0, 1, 130, 0}, {5, 0, 1, 140, 0}, {6, 0, 1, 2, 1}};
    na = 0;
    for (int i = 0; i < 7; i++) act[na++] = (wr_action_t){WR_EMIT, iv[i].split, i};
    wr_params_t ip = {.kind = WR_TUMBLING, .nsplits = 2, .bound = 0, .idle_timeout = 3, .clock0 = 0, .size = 10};
    CHECK_EQ(wr_run(&ip, iv, 7, act, na, &r), 0);
    /* clock 1: e0; 2: e1 (wm = min(99, 0) = 0); 3: e2; 4: e3; 5: e4 (split 1
     * inactive since 2, 5 - 2 >= 3: idle, wm = 129); 6: e5 (wm 139); 7: e6
     * reactivates split 1 and is late */
    CHECK_EQ(r.idle_marks, 1);
    CHECK_EQ(r.reactivations, 1);
    CHECK_EQ(r.wm_at[4], 0);
    CHECK_EQ(r.wm_at[5], 129);
    CHECK_EQ(r.nlate, 1);
    CHECK_EQ(r.late[0], 6);
    wr_free(&r);

    /* periodic (interval 1, a check at each poll end), timeout 3: both
     * splits pause until both are idle (watermark held at 49); split 1
     * comes back with ts 10 (late) and 200 (wm 199 with split 0 idle);
     * split 0 comes back with ts 101: late, and the watermark stays 199 */
    wr_event_t pv[] = {{0, 0, 1, 100, 0}, {1, 0, 1, 50, 1}, {2, 0, 1, 10, 1}, {3, 0, 1, 200, 1}, {4, 0, 1, 101, 0}};
    wr_action_t pa[] = {{WR_EMIT, 0, 0},    {WR_EMIT, 1, 1},    {WR_POLL_END, -1, -1}, {WR_ADVANCE, -1, -1},
                        {WR_POLL_END, -1, -1}, {WR_ADVANCE, -1, -1}, {WR_POLL_END, -1, -1}, {WR_ADVANCE, -1, -1},
                        {WR_POLL_END, -1, -1}, {WR_ADVANCE, -1, -1}, {WR_POLL_END, -1, -1}, {WR_EMIT, 1, 2},
                        {WR_POLL_END, -1, -1}, {WR_EMIT, 1, 3},    {WR_POLL_END, -1, -1}, {WR_EMIT, 0, 4},
                        {WR_POLL_END, -1, -1}};
    wr_params_t pp = {.kind = WR_TUMBLING, .nsplits = 2, .bound = 0, .idle_timeout = 3, .clock0 = 0, .interval = 1,
                      .size = 10};
    CHECK_EQ(wr_run(&pp, pv, 5, pa, (int)(sizeof pa / sizeof pa[0]), &r), 0);
    CHECK_EQ(r.all_idle, 1);
    CHECK_EQ(r.idle_marks, 2);
    CHECK_EQ(r.reactivations, 2);
    CHECK_EQ(r.wm_at[2], 49);
    CHECK_EQ(r.wm_at[3], 49);
    CHECK_EQ(r.wm_at[4], 199);
    CHECK_EQ(r.nlate, 2);
    CHECK_EQ(r.late[0], 2);
    CHECK_EQ(r.late[1], 4);
    CHECK_EQ(r.final_wm, 199);
    wr_free(&r);
}

TEST(windows_match_reference) {
    int n = 40;
    const char *soak = getenv("SLUICE_SOAK_SEEDS");
    if (soak && atoi(soak) > 0) n = atoi(soak);
    uint64_t base = 0x5eed;
    const char *bs = getenv("SLUICE_RAND_SEED");
    if (bs) base = strtoull(bs, NULL, 0);
    int only = -1;
    const char *oc = getenv("SLUICE_RAND_CASE");
    if (oc) only = atoi(oc);
    bool verbose = getenv("SLUICE_RAND_VERBOSE") != NULL;
    run_stats_t st = {0};
    int64_t t0 = sl_now_ms();
    for (int i = 0; i < n || (only >= 0 && i <= only); i++) {
        if (only >= 0 && i != only) continue;
        uint64_t seed = base + (uint64_t)i * 0x1000193ULL;
        run_case(i, seed, &st, verbose, 0);
    }
    fprintf(stderr,
            "  %d case(s), %d failed, %.1f s: %lld events, %lld firings (%lld fired at once), %lld late records, "
            "%lld (event, window) pairs dropped, %lld events in no window (%lld of them late), %lld session "
            "merges (%lld joining >= 2 windows), %lld splits marked idle, %lld reactivated, %lld times all idle\n",
            st.cases, st.failed, (double)(sl_now_ms() - t0) / 1000.0, (long long)st.events, (long long)st.firings,
            (long long)st.immediate, (long long)st.late, (long long)st.partial,
            (long long)(st.dropped + st.dropped_late), (long long)st.dropped_late,
            (long long)st.merges, (long long)st.bridges,
            (long long)st.idle_marks, (long long)st.reactivations, (long long)st.all_idle);
    CHECK_EQ(st.failed, 0);
}

/* The same comparison with checkpoints every 10 ms, a failure injected at a
 * random event and a restart from the latest checkpoint (or from the start
 * when none completed yet): the results that reached the (transactional)
 * sinks equal the uninterrupted reference exactly — lateness included, as
 * the checkpoints carry the watermarks and the source's generators. */
TEST(windows_match_reference_with_restores) {
    int n = 16;
    const char *soak = getenv("SLUICE_SOAK_SEEDS");
    if (soak && atoi(soak) > 0) n = atoi(soak) / 2 > 0 ? atoi(soak) / 2 : 1;
    uint64_t base = 0xfa11;
    const char *bs = getenv("SLUICE_RAND_RESTORE_SEED");
    if (bs) base = strtoull(bs, NULL, 0);
    bool verbose = getenv("SLUICE_RAND_VERBOSE") != NULL;
    run_stats_t st = {0};
    int64_t t0 = sl_now_ms();
    int only = getenv("SLUICE_RAND_CASE") ? atoi(getenv("SLUICE_RAND_CASE")) : -1;
    for (int i = 0; i < n || (only >= 0 && i <= only); i++)
        if (only < 0 || i == only) run_case(i, base + (uint64_t)i * 0x1000193ULL, &st, verbose, 1);
    fprintf(stderr, "  %d case(s) with restores, %d failed, %.1f s: %lld restarts, %lld from a checkpoint, %lld "
                    "events, %lld firings, %lld late records\n",
            st.cases, st.failed, (double)(sl_now_ms() - t0) / 1000.0, (long long)st.restarts,
            (long long)st.restored, (long long)st.events, (long long)st.firings, (long long)st.late);
    CHECK_EQ(st.failed, 0);
    CHECK(st.restored >= n / 4); /* most restarts resumed from a checkpoint, not from the start */
}

/* Restores at another parallelism: a job with checkpoints kept on
 * cancellation and no restart strategy fails on the injected event (after
 * a checkpoint was committed: the source waits for one); a second job at
 * another parallelism restores the latest checkpoint (sl_env_restore_from,
 * keyed state and timers move by key group).  What the two jobs' sinks
 * committed equals the uninterrupted reference exactly.  Every other case
 * runs on RocksDB. */
TEST(windows_match_reference_rescaled) {
    int n = 12;
    const char *soak = getenv("SLUICE_SOAK_SEEDS");
    if (soak && atoi(soak) > 0) n = atoi(soak) / 2 > 0 ? atoi(soak) / 2 : 1;
    uint64_t base = 0x5ca1e;
    const char *bs = getenv("SLUICE_RAND_RESCALE_SEED");
    if (bs) base = strtoull(bs, NULL, 0);
    bool verbose = getenv("SLUICE_RAND_VERBOSE") != NULL;
    run_stats_t st = {0};
    int64_t t0 = sl_now_ms();
    int only = getenv("SLUICE_RAND_CASE") ? atoi(getenv("SLUICE_RAND_CASE")) : -1;
    for (int i = 0; i < n || (only >= 0 && i <= only); i++)
        if (only < 0 || i == only) run_case(i, base + (uint64_t)i * 0x1000193ULL, &st, verbose, 2);
    fprintf(stderr, "  %d case(s) rescaled, %d failed, %.1f s: %lld restored from a checkpoint, %lld events, %lld "
                    "firings, %lld late records, %lld session merges\n",
            st.cases, st.failed, (double)(sl_now_ms() - t0) / 1000.0, (long long)st.restored, (long long)st.events,
            (long long)st.firings, (long long)st.late, (long long)st.merges);
    CHECK_EQ(st.failed, 0);
}

int main(void) {
    RUN(reference_model_sanity);
    RUN(windows_match_reference);
    RUN(windows_match_reference_with_restores);
    RUN(windows_match_reference_rescaled);
    TEST_MAIN_END();
}
