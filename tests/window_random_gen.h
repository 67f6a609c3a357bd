/*
 * window_random_gen.h — the random cases of the window tests: a case's
 * parameters (window kind, size / slide / offset / gap, allowed lateness,
 * out-of-orderness bound, idle timeout, watermark interval, splits, keys),
 * its events and the exact sequence of reader actions (emit / finish /
 * advance the virtual clock / return from poll) that the scripted source
 * replays, drawn from (case number, seed) alone; and the pipeline's pieces
 * (schemas, the count-and-sum aggregate).
 *
 * Shared by tests/test_window_random.c (embedded) and the cluster job
 * tests/tools/window_random_job.c (every process that builds the job draws
 * the same case from the same arguments), so that the brute-force reference
 * of window_reference.h is computed in the test from exactly the input the
 * job reads.  Public API only (sluice/sluice.h): the job is compiled
 * without libsluice's private headers.
 */
#ifndef SL_TEST_WINDOW_RANDOM_GEN_H
#define SL_TEST_WINDOW_RANDOM_GEN_H

#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sluice/sluice.h"
#include "window_reference.h"

struct txn_collected;

/* ---- random numbers ---- */

static inline uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* uniform in [lo, hi] */
static inline int64_t rnd(uint64_t *s, int64_t lo, int64_t hi) {
    if (hi <= lo) return lo;
    return lo + (int64_t)(rng_next(s) % (uint64_t)(hi - lo + 1));
}

static inline double rndf(uint64_t *s) { return (double)(rng_next(s) >> 11) / 9007199254740992.0; }

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
    /* the runs' fields (set by the test or the job, not by case_generate):
     * the virtual clock the scripted source advances */
    atomic_llong clock;
    /* test_window_random's restore mode: checkpoints, one injected failure, a restart */
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
    struct txn_collected *committed; /* pipeline_util.h's txn_collected_t */
} rcase_t;

static inline const char *kind_name(int k) { return k == WR_TUMBLING ? "tumbling" : k == WR_SLIDING ? "sliding" : "session"; }

static inline void case_describe(const rcase_t *c, char *buf, size_t cap) {
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
static inline void aim_at_edges(rcase_t *c, uint64_t *s) {
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
static inline void case_generate(rcase_t *c, int idx, uint64_t seed) {
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

static inline void case_free(rcase_t *c) {
    free(c->ev);
    free(c->act);
}

/* ---- the scripted source's poll ---- */

/* Emits the script's actions from *pos up to the end of the current poll
 * (WR_POLL_END) into out, advancing c->clock 1 virtual ms per event and per
 * WR_ADVANCE: SL_SRC_END when the script is done, SL_SRC_MORE, or
 * SL_EINVAL (message in err) when a batch is larger than max. */
static inline int case_emit_poll(rcase_t *c, int *pos, sl_source_output_t *out, int max, const char *who, char *err,
                                 size_t el) {
    int emitted = 0;
    while (*pos < c->nact) {
        const wr_action_t *a = &c->act[(*pos)++];
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
            snprintf(err, el, "%sthe script's batch is larger than the %d records poll allows", who, max);
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
    return *pos == c->nact ? SL_SRC_END : SL_SRC_MORE;
}

/* ---- the pipeline's schemas and aggregate ---- */

static inline sl_schema_t *in_schema(void) {
    return sl_schema_parse("k BIGINT NOT NULL, amount BIGINT NOT NULL, ts BIGINT NOT NULL, id BIGINT NOT NULL",
                           NULL, 0);
}

static inline sl_schema_t *out_schema(void) {
    return sl_schema_parse(
        "k BIGINT NOT NULL, wstart BIGINT NOT NULL, wend BIGINT NOT NULL, cnt BIGINT NOT NULL, total BIGINT NOT NULL",
        NULL, 0);
}

/* ---- the aggregate: count and sum ---- */

typedef struct acc {
    int64_t cnt, sum;
} acc_t;

static inline void agg_init(void *ctx, void *a) { memset(a, 0, sizeof(acc_t)); }

static inline int agg_add(void *ctx, void *a, const sl_record_t *in) {
    acc_t *x = a;
    x->cnt++;
    x->sum += sl_row_i64(&in->row, 1);
    return 0;
}

static inline void agg_merge(void *ctx, void *a, const void *b) {
    acc_t *x = a;
    const acc_t *y = b;
    x->cnt += y->cnt;
    x->sum += y->sum;
}

static inline int agg_result(void *ctx, const void *a, const uint8_t *key, uint32_t keylen, const sl_window_t *win,
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

#endif
