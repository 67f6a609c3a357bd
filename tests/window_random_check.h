/*
 * window_random_check.h — the comparison of a window job's output with the
 * brute-force model (window_reference.h) for a case of window_random_gen.h:
 * every firing and every late record as multisets, the firing timestamps
 * (end - 1), growing counts per (key, window) in emission order, the late
 * records against the input rows, and for tumbling and sliding windows the
 * accounting of every (event, window) pair.  The output comes in as plain
 * arrays, whether a test collected it in memory (test_window_random.c) or
 * read it back from committed files (test_cluster_window_random.c).
 */
#ifndef SL_TEST_WINDOW_RANDOM_CHECK_H
#define SL_TEST_WINDOW_RANDOM_CHECK_H

#include "window_random_gen.h"

/* a firing of the engine: (key, window, count, sum), its record timestamp,
 * the sink subtask and its arrival order there (growing along a subtask's
 * output) */
typedef struct efire {
    wr_firing_t f;
    int64_t ts;
    int subtask;
    int64_t seq; /* arrival order at the sink */
} efire_t;

/* a record of the late output: its row and its record timestamp */
typedef struct elate {
    int64_t k, amount, ts, id, rec_ts;
} elate_t;

static inline int cmp_firing(const wr_firing_t *a, const wr_firing_t *b) {
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    if (a->start != b->start) return a->start < b->start ? -1 : 1;
    if (a->end != b->end) return a->end < b->end ? -1 : 1;
    if (a->cnt != b->cnt) return a->cnt < b->cnt ? -1 : 1;
    if (a->sum != b->sum) return a->sum < b->sum ? -1 : 1;
    return 0;
}

static inline int cmp_firing_q(const void *a, const void *b) { return cmp_firing(a, b); }

static inline int cmp_efire_q(const void *a, const void *b) {
    const efire_t *x = a, *y = b;
    int c = cmp_firing(&x->f, &y->f);
    if (c) return c;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static inline int cmp_i64_q(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static inline bool same_window(const wr_firing_t *a, const wr_firing_t *b) {
    return a->key == b->key && a->start == b->start && a->end == b->end;
}

static inline const char *outcome_name(int o) {
    return o == WR_LATE      ? "late"
           : o == WR_PARTIAL ? "added (some windows already gone)"
           : o == WR_DROPPED ? "dropped (in no window, not late)"
                             : "added";
}

static inline void fmt_wm(int64_t wm, char *buf, size_t cap) {
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
static inline void explain(const rcase_t *c, const wr_result_t *r, int64_t key, int64_t lo, int64_t hi, int64_t mlo,
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

static inline int64_t explain_margin(const rcase_t *c) {
    const wr_params_t *p = &c->p;
    return p->kind == WR_SESSION ? p->gap : p->size;
}

/* Compares one case; returns the number of problems (and prints them). */
static inline int compare_case(const rcase_t *c, const wr_result_t *r, efire_t *eng, int64_t ne, const elate_t *lt,
                               int64_t nl, const char *desc) {
    int problems = 0;
    const wr_params_t *p = &c->p;
#define PROBLEM_HEADER()                                                                           \
    do {                                                                                           \
        if (problems++ == 0) fprintf(stderr, "  MISMATCH in %s\n", desc);                          \
    } while (0)

    /* engine firings */
    int bad_ts = 0;
    for (int64_t i = 0; i < ne; i++) {
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
    int64_t *lid = calloc((size_t)nl + 1, sizeof *lid);
    int bad_late_rows = 0;
    for (int64_t i = 0; i < nl; i++) {
        int64_t id = lt[i].id;
        lid[i] = id;
        if (id < 0 || id >= c->nev) {
            PROBLEM_HEADER();
            fprintf(stderr, "    late output has a record with unknown id %lld\n", (long long)id);
            bad_late_rows++;
            continue;
        }
        const wr_event_t *e = &c->ev[id];
        if (lt[i].k != e->key || lt[i].amount != e->amount || lt[i].ts != e->ts || lt[i].rec_ts != e->ts) {
            PROBLEM_HEADER();
            if (bad_late_rows < 5)
                fprintf(stderr, "    late record id=%lld is (k=%lld amount=%lld ts=%lld rec.ts=%lld), input was "
                        "(k=%lld amount=%lld ts=%lld)\n",
                        (long long)id, (long long)lt[i].k, (long long)lt[i].amount, (long long)lt[i].ts,
                        (long long)lt[i].rec_ts, (long long)e->key,
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

    free(exp);
    free(lid);
    free(xl);
    return problems;
#undef PROBLEM_HEADER
}

#endif
