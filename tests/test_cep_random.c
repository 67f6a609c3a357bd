/*
 * test_cep_random.c — randomized end-to-end check of CEP (sluice/cep.h)
 * against a brute-force reference written here, independently of the NFA.
 *
 * Each case builds a real job:
 *
 *   scripted source (parallelism 1, one split, bounded(B) watermarks after
 *   every record) [-> a map that fails once, in restore cases]
 *     -> key_by(k) -> sl_cep(random pattern) at parallelism P
 *     -> matches, timed-out partial matches (side output "timeout") and late
 *        events (side output "late") -> transactional collecting sinks
 *
 * The random pattern has 1..4 stages: single, times(n), times(n, m),
 * one_or_more, times_or_more(n), each maybe optional; next / followed_by /
 * followed_by_any; looping stages relaxed, consecutive or
 * allow_combinations; conditions where / or / where on an event type from
 * a small alphabet (so matches are frequent); within or not; one of the
 * five skip strategies.  Events: a few keys, timestamps out of order within
 * B, some behind the watermark (late), many equal timestamps.
 *
 * The reference, per key:
 *   1. late events: ts <= (max ts of the records before it) - B - 1 — the
 *      watermark that reached the operator before the record (one channel,
 *      in source order);
 *   2. the sequence: the key's other events sorted by (ts, arrival);
 *   3. every assignment of a subsequence to stages (stage numbers never
 *      decrease) that obeys counts, conditions, contiguity (strict: no
 *      event in between; relaxed: no event in between satisfies the later
 *      event's stage condition; non-deterministic: anything in between)
 *      and within (last ts - first ts < within), enumerated depth-first:
 *      the prefixes; the complete ones are the candidate matches;
 *   4. Flink's order of emission, simulated over time points (the event
 *      times, and every timeout deadline first ts + within, a deadline
 *      before the events at its time): a prefix is pending from its last
 *      event until no continuation is possible any more (its death,
 *      computed from the gap rules), its deadline, or its pruning; a
 *      complete prefix joins the queue at its last event; with a skip
 *      strategy the queue's earliest (by first event, then last event,
 *      then events) is emitted once no pending prefix started earlier, and
 *      prunes by first event (<= for to-next / past-last, < for to-first /
 *      to-last); pending prefixes at a deadline are timed out.
 * and compares the multisets of matches, timed-out partial matches and
 * late events.  Restore cases: checkpoints, a failure injected right after
 * a checkpoint taken at a chosen record completed, no restart, then a new
 * job restored from the retained checkpoint at another parallelism; only
 * committed output counts and it must equal the reference exactly.  Some
 * cases use the RocksDB backend.
 *
 * Environment: SLUICE_CEP_CASES=n (default 300; a sixth of that on
 * RocksDB), SLUICE_CEP_RESTORE_CASES=n (default 12), SLUICE_CEP_SEED=s,
 * SLUICE_CEP_CASE=i (only case i: 0.., 100000.. RocksDB, 200000.. restore),
 * SLUICE_CEP_VERBOSE=1.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <time.h>

#include "cep/cep_int.h" /* sl_cep_test_state_left */
#include "pipeline_util.h"
#include "sluice/cep.h"
#include "test.h"

/* ---- random numbers ---- */

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static int64_t rnd(uint64_t *s, int64_t lo, int64_t hi) {
    return hi <= lo ? lo : lo + (int64_t)(rng_next(s) % (uint64_t)(hi - lo + 1));
}
static double rndf(uint64_t *s) { return (double)(rng_next(s) >> 11) / 9007199254740992.0; }

/* ---- a case ---- */

#define MAXST 4
#define MAXEV 64
#define INF 100000

enum { C_STRICT, C_RELAXED, C_ANY };
enum { Q_ONE, Q_TIMES, Q_RANGE, Q_ONEPLUS, Q_TIMESPLUS };

typedef struct stage {
    int q, n, m;      /* quantifier and its numbers */
    int min, max;     /* resulting counts when present */
    bool optional;
    int outer, inner; /* contiguities */
    uint32_t where1, or1, where2; /* masks over types; or1/where2 0 = not given */
    bool iter;        /* and the iterative condition (id + events of this stage so far) % 3 != 0 */
    uint32_t until;   /* stop condition: type in this mask (unbounded stages); 0: none */
    int idx;          /* the stage's index (context of its iterative condition) */
    int neg;          /* a negated stage after this one: 0 none, 1 not_next, 2 not_followed_by */
    uint32_t neg_mask;/* its condition: type in this mask */
} stage_t;

typedef struct ev {
    int64_t k, id, ty, ts;
} ev_t;

typedef struct tcase {
    int idx;
    uint64_t seed;
    int nst;
    stage_t st[MAXST];
    int64_t within;   /* 0: none */
    int skip, skip_stage;
    int ntypes;
    int64_t B;
    int nev;
    ev_t ev[MAXEV];
    int P, P2;
    bool rocksdb, restore;
    /* restore plumbing */
    int run, pause_at;
    atomic_llong snap_in_pause, notified;
    atomic_int failed;
} tcase_t;

/* The stage's condition on event e, when the partial match it would
 * extend has `cnt` events of this stage already. */
static bool cond_of(const stage_t *s, const ev_t *e, int cnt) {
    bool v = (s->where1 >> e->ty) & 1u;
    if (s->or1) v = v || ((s->or1 >> e->ty) & 1u);
    if (s->where2) v = v && ((s->where2 >> e->ty) & 1u);
    if (s->iter) v = v && (e->id + cnt) % 3 != 0;
    return v;
}
static bool until_of(const stage_t *s, const ev_t *e) { return s->until && ((s->until >> e->ty) & 1u); }

static bool has_any(const tcase_t *c) {
    for (int i = 0; i < c->nst; i++)
        if ((i > 0 && c->st[i].outer == C_ANY) || (c->st[i].max > 1 && c->st[i].inner == C_ANY)) return true;
    return false;
}

static void gen_case(tcase_t *c, int idx, uint64_t seed, bool restore) {
    memset(c, 0, sizeof *c);
    c->idx = idx;
    c->seed = seed;
    uint64_t s = seed;
    c->ntypes = (int)rnd(&s, 2, 3);
    c->nst = (int)rnd(&s, 1, MAXST);
    uint32_t full = (1u << c->ntypes) - 1;
    for (int i = 0; i < c->nst; i++) {
        stage_t *st = &c->st[i];
        double r = rndf(&s);
        st->q = r < 0.4 ? Q_ONE : r < 0.55 ? Q_TIMES : r < 0.7 ? Q_RANGE : r < 0.85 ? Q_ONEPLUS : Q_TIMESPLUS;
        switch (st->q) {
        case Q_ONE: st->min = st->max = 1; break;
        case Q_TIMES: st->n = (int)rnd(&s, 1, 3), st->min = st->max = st->n; break;
        case Q_RANGE: st->n = (int)rnd(&s, 1, 2), st->m = st->n + (int)rnd(&s, 0, 2), st->min = st->n, st->max = st->m; break;
        case Q_ONEPLUS: st->min = 1, st->max = INF; break;
        default: st->n = (int)rnd(&s, 1, 2), st->min = st->n, st->max = INF; break;
        }
        st->optional = rndf(&s) < 0.25;
        r = rndf(&s);
        st->outer = r < 0.3 ? C_STRICT : r < 0.7 ? C_RELAXED : C_ANY;
        r = rndf(&s);
        st->inner = st->q == Q_ONE ? C_RELAXED : r < 0.5 ? C_RELAXED : r < 0.75 ? C_STRICT : C_ANY;
        st->where1 = rndf(&s) < 0.15 ? full : (uint32_t)rnd(&s, 1, full);
        if (rndf(&s) < 0.25) st->or1 = (uint32_t)rnd(&s, 1, full);
        if (rndf(&s) < 0.15) st->where2 = (uint32_t)rnd(&s, 1, full);
        st->iter = rndf(&s) < 0.15;
        if (st->max == INF && rndf(&s) < 0.35) st->until = (uint32_t)rnd(&s, 1, full);
        st->idx = i;
    }
    bool all_opt = true;
    for (int i = 0; i < c->nst; i++) all_opt &= c->st[i].optional;
    if (all_opt) c->st[rnd(&s, 0, c->nst - 1)].optional = false;
    for (int i = 0; i + 1 < c->nst; i++)
        if (!c->st[i].optional && !c->st[i + 1].optional && rndf(&s) < 0.3) {
            c->st[i].neg = (int)rnd(&s, 1, 2);
            c->st[i].neg_mask = (uint32_t)rnd(&s, 1, full);
        }
    c->within = rndf(&s) < 0.35 ? 0 : rnd(&s, 2, 30);
    c->skip = (int)rnd(&s, 0, 4);
    c->skip_stage = (int)rnd(&s, 0, c->nst - 1);
    c->B = rnd(&s, 0, 5);
    int keys = (int)rnd(&s, 1, 4);
    int per_key_max = has_any(c) ? 8 : 13;
    int cap = keys * per_key_max < MAXEV ? keys * per_key_max : MAXEV;
    c->nev = (int)rnd(&s, restore ? (cap < 24 ? cap : 24) : 4, cap); /* restores: enough state at the checkpoint */
    int64_t clock = rnd(&s, -20, 20);
    double late_frac = rndf(&s) * 0.15;
    for (int i = 0; i < c->nev; i++) {
        ev_t *e = &c->ev[i];
        e->k = rnd(&s, 0, keys - 1);
        e->id = i;
        e->ty = rnd(&s, 0, c->ntypes - 1);
        clock += rnd(&s, 0, 2);
        if (rndf(&s) < late_frac)
            e->ts = clock - c->B - rnd(&s, 1, 6); /* probably behind the watermark */
        else
            e->ts = clock - rnd(&s, 0, c->B);     /* out of order within the bound */
    }
    c->P = (int)rnd(&s, 1, 3);
    c->P2 = c->P == 1 ? (int)rnd(&s, 2, 3) : c->P == 3 ? (int)rnd(&s, 1, 2) : (rndf(&s) < 0.5 ? 1 : 3);
    c->rocksdb = rndf(&s) < 0.25;
    c->pause_at = (int)rnd(&s, c->nev / 3, c->nev - 1);
}

static const char *skip_name(int k) {
    static const char *n[] = {"no-skip", "skip-to-next", "skip-past-last", "skip-to-first", "skip-to-last"};
    return n[k];
}

static void describe(const tcase_t *c, char *buf, size_t cap) {
    size_t k = (size_t)snprintf(buf, cap, "case %d seed %#" PRIx64 ": P=%d%s%s B=%lld within=%lld %s(%d) pattern:",
                                c->idx, c->seed, c->P, c->restore ? " restore" : "", c->rocksdb ? " rocksdb" : "",
                                (long long)c->B, (long long)c->within, skip_name(c->skip), c->skip_stage);
    static const char *cn[] = {"next", "followed_by", "followed_by_any"}, *in[] = {"consecutive", "relaxed", "combinations"};
    for (int i = 0; i < c->nst && k < cap; i++) {
        const stage_t *s = &c->st[i];
        k += (size_t)snprintf(buf + k, cap - k, " %s s%d[%u|%u&%u%s]{%d,%d}%s%s until=%u", i ? cn[s->outer] : "begin", i,
                              s->where1, s->or1, s->where2, s->iter ? "&iter" : "", s->min, s->max == INF ? -1 : s->max,
                              s->optional ? "?" : "", s->max > 1 ? in[s->inner] : "", s->until);
        if (s->neg && k < cap)
            k += (size_t)snprintf(buf + k, cap - k, " %s[%u]", s->neg == 1 ? "not_next" : "not_followed_by", s->neg_mask);
    }
}

/* ---- the reference ---- */

typedef struct pfx {
    int parent;     /* index into the prefix table, -1 for none */
    int n;
    int start, last, stage, count;
    bool complete;
    int death;      /* first sequence position after which it is not pending (last: never pending) */
    int64_t deadline;
} pfx_t;

typedef struct ref {
    const tcase_t *c;
    const ev_t *seq[MAXEV];
    int n;
    pfx_t *p;
    int np, cap;
    bool overflow;
} ref_t;

/* Whether the events strictly between from and to may be skipped on the
 * way to a `target` event (cnt: events of target in the partial match;
 * inner: a further event of the same stage, where until events stop). */
static bool gap_ok(const ref_t *r, int contig, int target, int from, int to, int cnt, bool inner) {
    if (contig == C_STRICT) return to == from + 1;
    const stage_t *s = &r->c->st[target];
    for (int g = from + 1; g < to; g++) {
        if (inner && until_of(s, r->seq[g])) return false;
        if (contig == C_RELAXED && cond_of(s, r->seq[g], cnt)) return false;
    }
    return true;
}

/* A negated stage after the prefix's stage: the position of the event that
 * ends the prefix for good (INF: none).  not_followed_by: any later event
 * of the negated condition (the prefix has no such event after its
 * stage's first one, or it would not exist); not_next: the very next event,
 * once the stage has its minimum. */
static int kill_of(const ref_t *r, const pfx_t *x) {
    const stage_t *s = &r->c->st[x->stage];
    if (s->neg == 2) {
        for (int g = x->last + 1; g < r->n; g++)
            if ((s->neg_mask >> r->seq[g]->ty) & 1u) return g;
    } else if (s->neg == 1 && x->count >= s->min && x->last + 1 < r->n &&
               ((s->neg_mask >> r->seq[x->last + 1]->ty) & 1u)) {
        return x->last + 1;
    }
    return INF;
}

/* Death: the first position q > last such that no option survives events
 * last+1..q (an option targets the stage continuing or a later stage), or
 * the negated stage's event. */
static int death_of(const ref_t *r, const pfx_t *x) {
    const tcase_t *c = r->c;
    int best = x->last; /* no option: never pending */
    for (int t = x->stage; t < c->nst; t++) {
        int contig;
        if (t == x->stage) {
            if (x->count >= c->st[t].max) continue;
            contig = c->st[t].inner;
        } else {
            if (x->count < c->st[x->stage].min) break;
            bool between_optional = true;
            for (int j = x->stage + 1; j < t; j++) between_optional &= c->st[j].optional;
            if (!between_optional) break;
            contig = c->st[t].outer;
        }
        int d = INF, cnt = t == x->stage ? x->count : 0;
        if (contig == C_STRICT)
            d = x->last + 1;
        else
            for (int g = x->last + 1; g < r->n; g++)
                if ((t == x->stage && until_of(&c->st[t], r->seq[g])) ||
                    (contig == C_RELAXED && cond_of(&c->st[t], r->seq[g], cnt))) { /* the option closes there */
                    d = g;
                    break;
                }
        if (d > best) best = d;
    }
    int k = kill_of(r, x);
    return k < best ? k : best;
}

static void add_pfx(ref_t *r, int parent, int pos, int stage, int count);

static void extend_all(ref_t *r, int xi) {
    const tcase_t *c = r->c;
    pfx_t x = r->p[xi];
    int kill = kill_of(r, &x);
    for (int j = x.last + 1; j < r->n && j < kill; j++) {
        if (c->within && r->seq[j]->ts - r->seq[x.start]->ts >= c->within) break;
        for (int t = x.stage; t < c->nst; t++) {
            int contig, cnt;
            if (t == x.stage) {
                if (x.count >= c->st[t].max) continue;
                contig = c->st[t].inner;
                cnt = x.count + 1;
            } else {
                if (x.count < c->st[x.stage].min) break;
                bool ok = true;
                for (int q = x.stage + 1; q < t; q++) ok &= c->st[q].optional;
                if (!ok) break;
                contig = c->st[t].outer;
                cnt = 1;
            }
            int have = t == x.stage ? x.count : 0;
            if (!cond_of(&c->st[t], r->seq[j], have) || until_of(&c->st[t], r->seq[j]) ||
                !gap_ok(r, contig, t, x.last, j, have, t == x.stage))
                continue;
            add_pfx(r, xi, j, t, cnt);
            if (r->overflow) return;
        }
    }
}

static void add_pfx(ref_t *r, int parent, int pos, int stage, int count) {
    const tcase_t *c = r->c;
    if (r->np == r->cap) {
        if (r->cap >= 400000) {
            r->overflow = true;
            return;
        }
        r->cap = r->cap ? r->cap * 2 : 256;
        r->p = realloc(r->p, (size_t)r->cap * sizeof *r->p);
    }
    pfx_t x = {.parent = parent, .last = pos, .stage = stage, .count = count};
    x.n = parent >= 0 ? r->p[parent].n + 1 : 1;
    x.start = parent >= 0 ? r->p[parent].start : pos;
    x.complete = count >= c->st[stage].min;
    for (int j = stage + 1; j < c->nst; j++) x.complete &= c->st[j].optional;
    x.deadline = c->within ? r->seq[x.start]->ts + c->within : INT64_MAX;
    int xi = r->np++;
    r->p[xi] = x;
    r->p[xi].death = death_of(r, &r->p[xi]);
    extend_all(r, xi);
}

/* The events of prefix xi as "stage:id ..." */
static void pfx_str(const ref_t *r, int xi, char *buf, size_t cap) {
    int pos[MAXEV], st[MAXEV], n = 0;
    for (int i = xi; i >= 0; i = r->p[i].parent) pos[n] = r->p[i].last, st[n] = r->p[i].stage, n++;
    size_t k = 0;
    buf[0] = 0;
    for (int i = n - 1; i >= 0 && k < cap; i--)
        k += (size_t)snprintf(buf + k, cap - k, "%s%d:%lld", k ? " " : "", st[i], (long long)r->seq[pos[i]]->id);
}

/* (pos, stage) list of a prefix, in order */
static int pfx_list(const ref_t *r, int xi, int *pos, int *st) {
    int n = r->p[xi].n;
    for (int i = xi, k = n - 1; i >= 0; i = r->p[i].parent, k--) pos[k] = r->p[i].last, st[k] = r->p[i].stage;
    return n;
}

static const ref_t *cmp_ref;
static int match_order(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    const pfx_t *px = &cmp_ref->p[x], *py = &cmp_ref->p[y];
    if (px->start != py->start) return px->start < py->start ? -1 : 1;
    if (px->last != py->last) return px->last < py->last ? -1 : 1;
    int pa[MAXEV], sa[MAXEV], pb[MAXEV], sb[MAXEV];
    int na = pfx_list(cmp_ref, x, pa, sa), nb = pfx_list(cmp_ref, y, pb, sb);
    for (int i = 0; i < na && i < nb; i++) {
        if (pa[i] != pb[i]) return pa[i] < pb[i] ? -1 : 1;
        if (sa[i] != sb[i]) return sa[i] < sb[i] ? -1 : 1;
    }
    return na < nb ? -1 : na > nb ? 1 : 0;
}

typedef struct strs {
    char **v;
    int n, cap;
} strs_t;

static void strs_add(strs_t *s, const char *x) {
    if (s->n == s->cap) s->v = realloc(s->v, (size_t)(s->cap = s->cap ? 2 * s->cap : 64) * sizeof *s->v);
    s->v[s->n++] = strdup(x);
}
static int strp_cmp(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }
static void strs_free(strs_t *s) {
    for (int i = 0; i < s->n; i++) free(s->v[i]);
    free(s->v);
    memset(s, 0, sizeof *s);
}

/* The simulation of one key.  Returns false on overflow (too many prefixes). */
static bool ref_key(const tcase_t *c, int64_t key, const bool *late, strs_t *matches, strs_t *timeouts, int *left) {
    ref_t r = {.c = c};
    for (int i = 0; i < c->nev; i++)
        if (c->ev[i].k == key && !late[i]) r.seq[r.n++] = &c->ev[i];
    /* (ts, arrival) order: insertion sort keeps arrival order on ties */
    for (int i = 1; i < r.n; i++)
        for (int j = i; j > 0 && r.seq[j - 1]->ts > r.seq[j]->ts; j--) {
            const ev_t *t = r.seq[j];
            r.seq[j] = r.seq[j - 1];
            r.seq[j - 1] = t;
        }
    for (int j = 0; j < r.n && !r.overflow; j++)
        for (int t = 0; t < c->nst; t++) {
            if (cond_of(&c->st[t], r.seq[j], 0) && !until_of(&c->st[t], r.seq[j])) add_pfx(&r, -1, j, t, 1);
            if (!c->st[t].optional || r.overflow) break;
        }
    if (r.overflow) {
        free(r.p);
        return false;
    }
    bool *pruned = calloc((size_t)r.n + 1, 1); /* by start position */
    bool *timed = calloc((size_t)r.np + 1, 1);
    int *queue = malloc(((size_t)r.np + 1) * sizeof *queue), nq = 0;
    int done = -1; /* events processed: positions <= done */
    char buf[2048], kb[32];
    snprintf(kb, sizeof kb, "%lld|", (long long)key);
#define PENDING(i) (r.p[i].last <= done && r.p[i].death > done && !timed[i] && !pruned[r.p[i].start])
    for (int step = 0;; step++) {
        /* next time point: the earliest deadline of a pending prefix, if not after the next event */
        int64_t dl = INT64_MAX;
        for (int i = 0; i < r.np; i++)
            if (PENDING(i) && r.p[i].deadline < dl) dl = r.p[i].deadline;
        int64_t et = done + 1 < r.n ? r.seq[done + 1]->ts : INT64_MAX;
        if (dl == INT64_MAX && et == INT64_MAX) break;
        if (dl != INT64_MAX && dl <= et) {
            for (int i = 0; i < r.np; i++)
                if (PENDING(i) && r.p[i].deadline <= dl) {
                    timed[i] = true;
                    pfx_str(&r, i, buf, sizeof buf);
                    char line[2100];
                    snprintf(line, sizeof line, "%s%s", kb, buf);
                    strs_add(timeouts, line);
                }
        } else {
            done++;
            for (int i = 0; i < r.np; i++)
                if (r.p[i].last == done && r.p[i].complete && !pruned[r.p[i].start]) queue[nq++] = i;
        }
        /* release */
        cmp_ref = &r;
        if (nq > 1) qsort(queue, (size_t)nq, sizeof *queue, match_order);
        while (nq > 0) {
            int m = queue[0];
            if (c->skip != 0) {
                bool earlier = false;
                for (int i = 0; i < r.np && !earlier; i++) earlier = PENDING(i) && r.p[i].start < r.p[m].start;
                if (earlier) break;
            }
            memmove(queue, queue + 1, (size_t)(nq - 1) * sizeof *queue);
            nq--;
            pfx_str(&r, m, buf, sizeof buf);
            char line[2100];
            snprintf(line, sizeof line, "%s%s", kb, buf);
            strs_add(matches, line);
            int pos[MAXEV], st[MAXEV], n = pfx_list(&r, m, pos, st);
            int pid = -1;
            bool incl = true;
            if (c->skip == 1) pid = pos[0];
            if (c->skip == 2) pid = pos[n - 1];
            if (c->skip == 3 || c->skip == 4) {
                incl = false;
                for (int i = 0; i < n; i++)
                    if (st[i] == c->skip_stage && (pid < 0 || c->skip == 4)) pid = pos[i];
            }
            if (pid >= 0) {
                for (int s = 0; s < r.n; s++)
                    if (s < pid || (incl && s == pid)) pruned[s] = true;
                int k = 0;
                for (int i = 0; i < nq; i++)
                    if (!pruned[r.p[queue[i]].start]) queue[k++] = queue[i];
                nq = k;
            }
        }
        (void)step;
    }
    /* state left at the end: pending partial matches, or completed ones held back */
    bool any = nq > 0;
    for (int i = 0; i < r.np && !any; i++) any = PENDING(i);
    *left += any;
#undef PENDING
    free(pruned);
    free(timed);
    free(queue);
    free(r.p);
    return true;
}

/* ---- the job ---- */

typedef struct src_reader {
    tcase_t *c;
    int pos;
    bool released;
} src_reader_t;

static int sr_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    src_reader_t *r = calloc(1, sizeof *r);
    r->c = ctx;
    *reader = r;
    *nsplits = 1;
    return 0;
}

static int sr_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    src_reader_t *r = reader;
    tcase_t *c = r->c;
    if (c->restore) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    int emitted = 0, lim = c->restore ? 2 : max;
    while (emitted < lim && r->pos < c->nev) {
        if (c->restore && c->run == 1 && r->pos == c->pause_at && !r->released) {
            long long snap = atomic_load(&c->snap_in_pause);
            if (!snap || atomic_load(&c->notified) < snap) return SL_SRC_MORE;
            r->released = true;
        }
        const ev_t *e = &c->ev[r->pos++];
        sl_row_writer_t *w = sl_src_row(out);
        sl_rw_set_i64(w, 0, e->k);
        sl_rw_set_i64(w, 1, e->id);
        sl_rw_set_i64(w, 2, e->ty);
        sl_rw_set_i64(w, 3, e->ts);
        sl_src_emit(out, 0, e->ts);
        emitted++;
    }
    return r->pos == c->nev ? SL_SRC_END : SL_SRC_MORE;
}

static int sr_snapshot(void *reader, int64_t id, void (*put)(void *, const void *, size_t), void *pc) {
    src_reader_t *r = reader;
    tcase_t *c = r->c;
    if (c->run == 1 && r->pos == c->pause_at && !atomic_load(&c->snap_in_pause)) atomic_store(&c->snap_in_pause, id);
    int32_t pos = r->pos;
    put(pc, &pos, 4);
    return 0;
}

static int sr_restore(void *reader, const void *state, size_t len, char *err, size_t el) {
    src_reader_t *r = reader;
    uint32_t blen;
    int32_t pos;
    if (len != 8) return SL_EFORMAT;
    memcpy(&blen, state, 4);
    memcpy(&pos, (const uint8_t *)state + 4, 4);
    if (blen != 4) return SL_EFORMAT;
    r->pos = pos;
    return 0;
}

static void sr_notify(void *reader, int64_t id) { atomic_store(&((src_reader_t *)reader)->c->notified, id); }
static void sr_destroy_reader(void *reader) { free(reader); }
static void sr_destroy(void *ctx) { (void)ctx; }

static const sl_source_ops_t src_ops = {.name = "cep-script",
                                        .create_reader = sr_create,
                                        .poll = sr_poll,
                                        .destroy_reader = sr_destroy_reader,
                                        .destroy = sr_destroy,
                                        .snapshot = sr_snapshot,
                                        .restore = sr_restore,
                                        .notify_checkpoint_complete = sr_notify};

static sl_schema_t *ev_schema(void) {
    return sl_schema_parse("k BIGINT NOT NULL, id BIGINT NOT NULL, ty BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0);
}
static sl_schema_t *out_schema(void) { return sl_schema_parse("k BIGINT NOT NULL, m STRING NOT NULL", NULL, 0); }

static int fail_once(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    tcase_t *c = ctx;
    if (c->run == 1 && sl_row_i64(&in->row, 1) == c->ev[c->pause_at].id && !atomic_exchange(&c->failed, 1))
        return SL_EUSER;
    sl_rw_copy_row(out, &in->row);
    return 0;
}

static int type_cond(void *ctx, const sl_row_t *e, int64_t ts) {
    (void)ts;
    uint32_t mask = *(const uint32_t *)ctx;
    return (int)((mask >> sl_row_i64(e, 2)) & 1u);
}

static int iter_cond(void *ctx, const sl_row_t *e, int64_t ts, const sl_cep_match_t *so_far) {
    const stage_t *s = ctx;
    return (sl_row_i64(e, 1) + sl_cep_match_count(so_far, s->idx)) % 3 != 0;
}

static int fmt_match(const sl_cep_match_t *m, char *buf, size_t cap, int64_t *key) {
    size_t k = 0;
    buf[0] = 0;
    *key = -1;
    for (int s = 0; s < sl_cep_match_stages(m); s++)
        for (int i = 0; i < sl_cep_match_count(m, s); i++) {
            int64_t ts;
            sl_row_t row = sl_cep_match_event(m, s, i, &ts);
            if (ts != sl_row_i64(&row, 3)) return SL_EINVAL; /* the event's own timestamp */
            *key = sl_row_i64(&row, 0);
            k += (size_t)snprintf(buf + k, cap - k, "%s%d:%lld", k ? " " : "", s, (long long)sl_row_i64(&row, 1));
        }
    return 0;
}

static int on_match(void *ctx, const sl_cep_match_t *m, sl_collector_t *out) {
    (void)ctx;
    char buf[2048];
    int64_t key;
    if (fmt_match(m, buf, sizeof buf, &key) < 0) return SL_EINVAL;
    sl_row_writer_t *w = sl_out_row(out);
    sl_rw_set_i64(w, 0, key);
    sl_rw_set_str(w, 1, buf, (uint32_t)strlen(buf));
    sl_emit(out);
    return 0;
}

static int on_timeout(void *ctx, const sl_cep_match_t *m, int64_t ts, sl_collector_t *out) {
    tcase_t *c = ctx;
    char buf[2048];
    int64_t key;
    if (fmt_match(m, buf, sizeof buf, &key) < 0) return SL_EINVAL;
    int64_t first;
    for (int s = 0; s < sl_cep_match_stages(m); s++)
        if (sl_cep_match_count(m, s)) {
            sl_cep_match_event(m, s, 0, &first);
            break;
        }
    if (ts != first + c->within) return SL_EINVAL; /* timed out at first + within */
    sl_row_writer_t *w = sl_side_row(out, "timeout");
    sl_rw_set_i64(w, 0, key);
    sl_rw_set_str(w, 1, buf, (uint32_t)strlen(buf));
    sl_emit_side(out, "timeout");
    return 0;
}

static sl_pattern_t *build_pattern(tcase_t *c) {
    sl_pattern_t *p = NULL;
    for (int i = 0; i < c->nst; i++) {
        stage_t *s = &c->st[i];
        char name[16];
        snprintf(name, sizeof name, "s%d", i);
        if (i == 0)
            p = sl_pattern_begin(name);
        else if (s->outer == C_STRICT)
            p = sl_pattern_next(p, name);
        else if (s->outer == C_RELAXED)
            p = sl_pattern_followed_by(p, name);
        else
            p = sl_pattern_followed_by_any(p, name);
        sl_pattern_where(p, type_cond, &s->where1);
        if (s->or1) sl_pattern_or(p, type_cond, &s->or1);
        if (s->where2) sl_pattern_where(p, type_cond, &s->where2);
        if (s->iter) sl_pattern_where_iterative(p, iter_cond, s);
        switch (s->q) {
        case Q_TIMES: sl_pattern_times(p, s->n); break;
        case Q_RANGE: sl_pattern_times_range(p, s->n, s->m); break;
        case Q_ONEPLUS: sl_pattern_one_or_more(p); break;
        case Q_TIMESPLUS: sl_pattern_times_or_more(p, s->n); break;
        default: break;
        }
        if (s->until) sl_pattern_until(p, type_cond, &s->until);
        if (s->q != Q_ONE && s->inner == C_STRICT) sl_pattern_consecutive(p);
        if (s->q != Q_ONE && s->inner == C_ANY) sl_pattern_allow_combinations(p);
        if (s->optional) sl_pattern_optional(p);
        if (s->neg) {
            snprintf(name, sizeof name, "n%d", i);
            if (s->neg == 1)
                sl_pattern_not_next(p, name);
            else
                sl_pattern_not_followed_by(p, name);
            sl_pattern_where(p, type_cond, &s->neg_mask);
        }
    }
    if (c->within) sl_pattern_within(p, c->within);
    char sk[16];
    snprintf(sk, sizeof sk, "s%d", c->skip_stage);
    sl_pattern_skip(p, (sl_cep_skip_t)c->skip, c->skip >= 3 ? sk : NULL);
    return p;
}

static int build_and_run(tcase_t *c, int p, const char *ck, bool restore_from, txn_collected_t *tm,
                         txn_collected_t *tt, txn_collected_t *tl) {
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, p);
    sl_env_set_max_parallelism(env, 128);
    sl_env_set_auto_watermark_interval(env, 0);
    if (c->rocksdb) {
        char rdb[1200];
        snprintf(rdb, sizeof rdb, "%s/rocks-%d", sl_test_tmpdir(), c->idx);
        sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);
        sl_env_set_rocksdb_options(env, rdb, 8 << 20, 2 << 20);
    }
    if (c->restore) {
        sl_env_enable_checkpointing(env, 10, SL_CHECKPOINT_EXACTLY_ONCE);
        sl_env_set_checkpoint_dir(env, ck);
        sl_env_set_checkpoint_retention(env, SL_CHECKPOINTS_RETAIN_ON_CANCELLATION);
        sl_env_set_restart_none(env);
        if (restore_from) {
            char path[1300];
            snprintf(path, sizeof path, "%s/cep-random", ck);
            if (sl_env_restore_from(env, path) < 0) {
                fprintf(stderr, "    restore: %s\n", sl_env_error(env));
                sl_env_destroy(env);
                return -100;
            }
        }
    }
    sl_output_tag(env, "timeout", out_schema());
    sl_source_t src = {&src_ops, c, ev_schema()};
    sl_stream_t *in = sl_uid(sl_parallelism(sl_from_source(env, src, sl_wm_bounded("ts", c->B), "events"), 1), "events");
    if (c->restore) in = sl_uid(sl_parallelism(sl_map(in, fail_once, c, ev_schema()), 1), "fail-once");
    sl_cep_fn_t fn = {.select = on_match, .timeout = on_timeout, .opts = {.ctx = c}, .late_tag = "late"};
    sl_stream_t *o = sl_cep(sl_key_by(in, "k"), build_pattern(c), fn, out_schema());
    int rc = SL_EINVAL;
    if (o) {
        sl_uid(o, "cep");
        sl_uid(sl_sink_to(o, txn_collect_sink(tm), "matches"), "matches");
        sl_uid(sl_parallelism(sl_sink_to(sl_side_output(o, "timeout"), txn_collect_sink(tt), "timeouts"), 1), "timeouts");
        sl_uid(sl_parallelism(sl_sink_to(sl_side_output(o, "late"), txn_collect_sink(tl), "late"), 1), "late");
        rc = sl_env_execute(env, "cep-random");
    }
    if (rc != 0 && !(c->restore && !restore_from)) fprintf(stderr, "    run failed: rc=%d %s\n", rc, sl_env_error(env));
    if (c->restore && !restore_from && sl_env_checkpoints_completed(env) < 1) rc = -101;
    sl_env_destroy(env);
    return rc;
}

static void collected_strs(const collected_t *col, strs_t *out) {
    sl_schema_t *s = out_schema();
    for (int64_t i = 0; i < col->n; i++) {
        sl_row_t row = collected_row(col, i, s);
        uint32_t len;
        const char *m = sl_row_str(&row, 1, &len);
        char line[2100];
        snprintf(line, sizeof line, "%lld|%.*s", (long long)sl_row_i64(&row, 0), (int)len, m);
        strs_add(out, line);
    }
    sl_schema_unref(s);
}

static int compare(const char *what, strs_t *want, strs_t *got, const char *desc, bool *described) {
    if (want->n) qsort(want->v, (size_t)want->n, sizeof *want->v, strp_cmp);
    if (got->n) qsort(got->v, (size_t)got->n, sizeof *got->v, strp_cmp);
    int i = 0, j = 0, bad = 0;
    while (i < want->n || j < got->n) {
        int r = i >= want->n ? 1 : j >= got->n ? -1 : strcmp(want->v[i], got->v[j]);
        if (r == 0) {
            i++, j++;
            continue;
        }
        if (!*described) fprintf(stderr, "  %s\n", desc), *described = true;
        if (bad < 6) fprintf(stderr, "    %s %s: %s\n", what, r < 0 ? "missing" : "unexpected", r < 0 ? want->v[i] : got->v[j]);
        bad++;
        if (r < 0) i++;
        else j++;
    }
    if (bad) fprintf(stderr, "    %s: %d differences (want %d, got %d)\n", what, bad, want->n, got->n);
    return bad;
}

typedef struct stats {
    int cases, skipped_big;
    int64_t matches, timeouts, late;
} stats_t;

static int run_case(tcase_t *c, stats_t *st, bool verbose) {
    char desc[1024];
    describe(c, desc, sizeof desc);
    /* reference */
    bool late[MAXEV];
    int64_t maxts = INT64_MIN;
    for (int i = 0; i < c->nev; i++) {
        late[i] = maxts != INT64_MIN && c->ev[i].ts <= maxts - c->B - 1;
        if (c->ev[i].ts > maxts) maxts = c->ev[i].ts;
    }
    strs_t wm = {0}, wt = {0}, wl = {0}, gm = {0}, gt = {0}, gl = {0};
    int want_left = 0;
    for (int64_t key = 0; key < 4; key++)
        if (!ref_key(c, key, late, &wm, &wt, &want_left)) {
            strs_free(&wm), strs_free(&wt);
            st->skipped_big++;
            return -1; /* too many prefixes for the brute force: the caller draws another case */
        }
    for (int i = 0; i < c->nev; i++)
        if (late[i]) {
            char line[64];
            snprintf(line, sizeof line, "%lld", (long long)c->ev[i].id);
            strs_add(&wl, line);
        }
    if (!c->within) strs_free(&wt);
    /* engine */
    txn_collected_t *tm = txn_collected_new(), *tt = txn_collected_new(), *tl = txn_collected_new();
    char ck[1024];
    snprintf(ck, sizeof ck, "%s/ck-%d", sl_test_tmpdir(), c->idx);
    int problems = 0;
    bool described = false;
    c->run = 1;
    sl_cep_test_state_reset();
    int rc = build_and_run(c, c->P, ck, false, tm, tt, tl);
    if (c->restore) {
        if (rc >= 0 || rc == -101 || !atomic_load(&c->failed)) {
            fprintf(stderr, "  %s\n    run 1 did not fail after a checkpoint (rc %d)\n", desc, rc);
            described = true;
            problems++;
        }
        c->run = 2;
        sl_cep_test_state_reset();
        rc = build_and_run(c, c->P2, ck, true, tm, tt, tl);
    }
    if (rc != 0) {
        if (!described) fprintf(stderr, "  %s\n", desc), described = true;
        fprintf(stderr, "    the job failed (rc %d)\n", rc);
        problems++;
    }
    collected_strs(tm->out, &gm);
    collected_strs(tt->out, &gt);
    sl_schema_t *es = ev_schema();
    for (int64_t i = 0; i < tl->out->n; i++) {
        sl_row_t row = collected_row(tl->out, i, es);
        char line[64];
        snprintf(line, sizeof line, "%lld", (long long)sl_row_i64(&row, 1));
        strs_add(&gl, line);
        if (tl->out->ts[i] != sl_row_i64(&row, 3)) problems++; /* late events keep their timestamps */
    }
    sl_schema_unref(es);
    /* state: keys with anything left after the maximum watermark, in each of
     * the three states (nothing at all with within) */
    int64_t le, ln, lk;
    sl_cep_test_state_left(&le, &ln, &lk);
    if (rc == 0 && (le != want_left || ln != want_left || lk != want_left)) {
        if (!described) fprintf(stderr, "  %s\n", desc), described = true;
        fprintf(stderr, "    keys with state left: events %lld, nfa %lld, key %lld; want %d each\n", (long long)le,
                (long long)ln, (long long)lk, want_left);
        problems++;
    }
    problems += compare("match", &wm, &gm, desc, &described);
    problems += compare("timeout", &wt, &gt, desc, &described);
    problems += compare("late", &wl, &gl, desc, &described);
    if (verbose)
        fprintf(stderr, "  %s: %d matches, %d timeouts, %d late%s\n", desc, wm.n, wt.n, wl.n, problems ? " FAILED" : "");
    st->cases++;
    st->matches += wm.n;
    st->timeouts += wt.n;
    st->late += wl.n;
    strs_free(&wm), strs_free(&wt), strs_free(&wl), strs_free(&gm), strs_free(&gt), strs_free(&gl);
    txn_collected_free(tm), txn_collected_free(tt), txn_collected_free(tl);
    return problems;
}

static int env_int(const char *name, int dflt) {
    const char *v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

static uint64_t base_seed(void) {
    const char *v = getenv("SLUICE_CEP_SEED");
    return v && *v ? strtoull(v, NULL, 0) : 0xce9ce9ULL;
}

static void run_many(bool restore, bool rocks_only, int n, int first_idx) {
    stats_t st = {0};
    bool verbose = env_int("SLUICE_CEP_VERBOSE", 0) != 0;
    int only = env_int("SLUICE_CEP_CASE", -1);
    int failed = 0;
    for (int i = 0; i < n; i++) {
        int idx = first_idx + i;
        if (only >= 0 && idx != only) continue;
        tcase_t *c = calloc(1, sizeof *c);
        uint64_t seed = base_seed() * 1000003ULL + (uint64_t)idx;
        for (int attempt = 0;; attempt++) {
            gen_case(c, idx, seed + (uint64_t)attempt * 0x100000000ULL, restore);
            c->restore = restore;
            if (rocks_only) c->rocksdb = true;
            int p = run_case(c, &st, verbose);
            if (p >= 0) {
                if (p > 0) failed++;
                break;
            }
        }
        free(c);
    }
    fprintf(stderr, "  %d cases (%d redrawn as too big), %lld matches, %lld timeouts, %lld late, %d failed\n", st.cases,
            st.skipped_big, (long long)st.matches, (long long)st.timeouts, (long long)st.late, failed);
    CHECK_EQ(failed, 0);
    if (only < 0) CHECK(st.matches > 0 && (restore || st.timeouts > 0) && (restore || st.late > 0));
}

TEST(random_patterns) { run_many(false, false, env_int("SLUICE_CEP_CASES", 300), 0); }
TEST(random_patterns_rocksdb) { run_many(false, true, env_int("SLUICE_CEP_CASES", 300) / 6, 100000); }
TEST(random_restore_rescale) { run_many(true, false, env_int("SLUICE_CEP_RESTORE_CASES", 12), 200000); }

/* ---- mistakes are refused by name when the job is built ---- */

static int true_cond(void *ctx, const sl_row_t *e, int64_t ts) { return 1; }

static void expect_refused(sl_pattern_t *p, const char *needle, sl_cep_fn_t fn) {
    sl_env_t *env = sl_env_new();
    sl_source_t src = counter_source(10, 1);
    sl_stream_t *in = sl_from_source(env, src, sl_wm_monotonous("ts"), "n");
    sl_cep(sl_key_by(in, "id"), p, fn, out_schema());
    int rc = sl_env_execute(env, "refused");
    if (rc == 0 || !strstr(sl_env_error(env), needle)) {
        fprintf(stderr, "    want an error containing \"%s\", got rc %d: %s\n", needle, rc, sl_env_error(env));
        sl_test_failures++;
    }
    sl_env_destroy(env);
}

TEST(build_time_errors) {
    sl_cep_fn_t fn = {.select = on_match};
    sl_cep_fn_t nosel = {0};
    expect_refused(sl_pattern_not_next(sl_pattern_begin("a"), "b"), "CEP: not_next ('b') as the last stage is not supported", fn);
    expect_refused(sl_pattern_next(sl_pattern_not_followed_by(sl_pattern_optional(sl_pattern_begin("a")), "b"), "c"),
                   "not_followed_by ('b') next to an optional stage ('a') is not supported", fn);
    expect_refused(sl_pattern_times(sl_pattern_not_next(sl_pattern_begin("a"), "b"), 2),
                   "negated stage 'b': times does not apply to a negated stage", fn);
    expect_refused(sl_pattern_not_next(sl_pattern_not_next(sl_pattern_begin("a"), "b"), "c"),
                   "not_next ('c') right after another negated stage is not supported", fn);
    expect_refused(sl_pattern_until(sl_pattern_times(sl_pattern_begin("a"), 2), true_cond, NULL),
                   "stage 'a': until applies only to one_or_more / times_or_more", fn);
    expect_refused(sl_pattern_greedy(sl_pattern_one_or_more(sl_pattern_begin("a"))), "greedy on stage 'a'", fn);
    expect_refused(sl_pattern_consecutive(sl_pattern_begin("a")), "stage 'a': consecutive applies only to a looping", fn);
    expect_refused(sl_pattern_times(sl_pattern_begin("a"), 0), "times(0) must be at least 1", fn);
    expect_refused(sl_pattern_times_range(sl_pattern_begin("a"), 3, 2), "times(3, 2)", fn);
    expect_refused(sl_pattern_next(sl_pattern_begin("a"), "a"), "stage name 'a' is used twice", fn);
    expect_refused(sl_pattern_within(sl_pattern_begin("a"), 0), "within(0) must be > 0", fn);
    expect_refused(sl_pattern_skip(sl_pattern_begin("a"), SL_CEP_SKIP_TO_LAST, "zz"), "stage 'zz' is not in the pattern", fn);
    expect_refused(sl_pattern_optional(sl_pattern_begin("a")), "every stage of the pattern is optional", fn);
    expect_refused(sl_pattern_begin("a"), "CEP: no select function", nosel);
    expect_refused(sl_pattern_one_or_more(sl_pattern_times(sl_pattern_begin("a"), 2)), "after another quantifier", fn);
}

int main(void) {
    RUN(build_time_errors);
    RUN(random_patterns);
    RUN(random_patterns_rocksdb);
    RUN(random_restore_rescale);
    TEST_MAIN_END();
}
