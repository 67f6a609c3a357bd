/*
 * nfa.c — the CEP NFA of one key (see cep_int.h for the model).
 *
 * Semantics follow FlinkCEP's NFA:
 *   - every event may start a match (the start state never ignores);
 *   - a partial match whose stage count reaches the stage's minimum and
 *     whose later stages are all optional is also a completed match (Flink's
 *     "proceed to final" right after a take);
 *   - within: a partial match times out at first_ts + within; time is
 *     advanced to every deadline in order, before the events of that time;
 *   - skip strategies: completed matches wait in `done` until no partial
 *     match that started earlier is left; the earliest is emitted and prunes
 *     partial and completed matches by their first event (Flink's
 *     processMatchesAccordingToSkipStrategy).
 * Where Flink leaves an order open (several matches with the same first
 * event emitted at once), this one is fixed: by last event, then by the
 * events and their stages lexicographically.
 */
#include <stdlib.h>

#include "cep/cep_int.h"

void cep_nfa_init(cep_nfa_t *a) { memset(a, 0, sizeof *a); }

static void pm_free(cep_pm_t *m) {
    sl_free(m->ev);
    sl_free(m->evst);
    m->ev = NULL;
    m->evst = NULL;
}

void cep_nfa_clear(cep_nfa_t *a) {
    for (int i = 0; i < a->npm; i++) pm_free(&a->pm[i]);
    for (int i = 0; i < a->ndone; i++) pm_free(&a->done[i]);
    sl_free(a->pm);
    sl_free(a->done);
    cep_nfa_init(a);
}

bool cep_nfa_empty(const cep_nfa_t *a) { return a->npm == 0 && a->ndone == 0; }

static void push(cep_pm_t **arr, int *n, int *cap, cep_pm_t m) {
    if (*n == *cap) {
        *cap = *cap ? *cap * 2 : 8;
        *arr = sl_realloc(*arr, (size_t)*cap * sizeof **arr);
    }
    (*arr)[(*n)++] = m;
}

/* The options open right after a stage-`t` event that is the stage's c-th. */
static uint32_t options_after(const cep_def_t *d, int t, int c) {
    uint32_t o = 0;
    if (c < d->st[t].max) o |= 1u;
    if (c >= d->st[t].min)
        for (int j = t + 1; j < d->n; j++) {
            o |= 1u << (j - t);
            if (!d->st[j].optional) break;
        }
    return o;
}

static bool completes(const cep_def_t *d, int t, int c) {
    if (c < d->st[t].min) return false;
    for (int j = t + 1; j < d->n; j++)
        if (!d->st[j].optional) return false;
    return true;
}

static cep_pm_t extend(const cep_pm_t *parent, cep_evid_t e, int t, int c) {
    cep_pm_t m = {.stage = t, .count = c, .fresh = true};
    int n = parent ? parent->n : 0;
    m.n = n + 1;
    m.ev = sl_malloc((size_t)m.n * sizeof *m.ev);
    m.evst = sl_malloc((size_t)m.n);
    if (n) {
        memcpy(m.ev, parent->ev, (size_t)n * sizeof *m.ev);
        memcpy(m.evst, parent->evst, (size_t)n);
    }
    m.ev[n] = e;
    m.evst[n] = (uint8_t)t;
    return m;
}

static cep_pm_t pm_copy(const cep_pm_t *m) {
    cep_pm_t c = *m;
    c.ev = sl_malloc((size_t)m->n * sizeof *c.ev);
    c.evst = sl_malloc((size_t)m->n);
    memcpy(c.ev, m->ev, (size_t)m->n * sizeof *c.ev);
    memcpy(c.evst, m->evst, (size_t)m->n);
    return c;
}

/* Order of emission among completed matches: first event, last event,
 * then events and stages lexicographically (shorter first on a tie). */
static int match_cmp(const void *pa, const void *pb) {
    const cep_pm_t *a = pa, *b = pb;
    int r = cep_evid_cmp(a->ev[0], b->ev[0]);
    if (r) return r;
    r = cep_evid_cmp(a->ev[a->n - 1], b->ev[b->n - 1]);
    if (r) return r;
    for (int i = 0; i < a->n && i < b->n; i++) {
        r = cep_evid_cmp(a->ev[i], b->ev[i]);
        if (r) return r;
        if (a->evst[i] != b->evst[i]) return a->evst[i] < b->evst[i] ? -1 : 1;
    }
    return a->n < b->n ? -1 : a->n > b->n ? 1 : 0;
}

/* The pruning rule of the skip strategy after match m: partial and
 * completed matches whose first event is <= (or <) the returned event go. */
static bool pruning_id(const cep_def_t *d, const cep_pm_t *m, cep_evid_t *id, bool *inclusive) {
    switch (d->skip) {
    case SL_CEP_SKIP_TO_NEXT:
        *id = m->ev[0];
        *inclusive = true;
        return true;
    case SL_CEP_SKIP_PAST_LAST_EVENT:
        *id = m->ev[m->n - 1];
        *inclusive = true;
        return true;
    case SL_CEP_SKIP_TO_FIRST:
    case SL_CEP_SKIP_TO_LAST: {
        bool found = false;
        for (int i = 0; i < m->n; i++)
            if (m->evst[i] == d->skip_stage) {
                if (!found || d->skip == SL_CEP_SKIP_TO_LAST) *id = m->ev[i];
                found = true;
            }
        *inclusive = false;
        return found;
    }
    default:
        return false;
    }
}

static void prune(cep_pm_t *arr, int *n, cep_evid_t id, bool inclusive) {
    int k = 0;
    for (int i = 0; i < *n; i++) {
        int r = cep_evid_cmp(arr[i].ev[0], id);
        if (r < 0 || (inclusive && r == 0))
            pm_free(&arr[i]);
        else
            arr[k++] = arr[i];
    }
    *n = k;
}

/* Emits what the skip strategy lets go (Flink: completed matches are
 * emitted in order of their first event once no partial match started
 * earlier). */
static int release(const cep_def_t *d, cep_nfa_t *a, int64_t ts, cep_emit_fn emit, void *c) {
    if (a->ndone > 1) qsort(a->done, (size_t)a->ndone, sizeof *a->done, match_cmp);
    if (d->skip == SL_CEP_NO_SKIP) {
        for (int i = 0; i < a->ndone; i++) {
            int rc = emit(c, &a->done[i], false, ts);
            pm_free(&a->done[i]);
            if (rc < 0) {
                for (int j = i + 1; j < a->ndone; j++) pm_free(&a->done[j]);
                a->ndone = 0;
                return rc;
            }
        }
        a->ndone = 0;
        return 0;
    }
    while (a->ndone > 0) {
        cep_pm_t m = a->done[0];
        for (int i = 0; i < a->npm; i++)
            if (cep_evid_cmp(a->pm[i].ev[0], m.ev[0]) < 0) return 0; /* an earlier one may still complete */
        memmove(a->done, a->done + 1, (size_t)(a->ndone - 1) * sizeof *a->done);
        a->ndone--;
        cep_evid_t id;
        bool incl;
        if (pruning_id(d, &m, &id, &incl)) {
            prune(a->pm, &a->npm, id, incl);
            prune(a->done, &a->ndone, id, incl);
        }
        int rc = emit(c, &m, false, ts);
        pm_free(&m);
        if (rc < 0) return rc;
    }
    return 0;
}

/* Whether stage t's condition holds for the event, extending so_far. */
static int cond_of(const cep_evctx_t *x, const cep_pm_t *so_far, int t) {
    if (!((x->iter >> t) & 1u)) return (int)((x->simple >> t) & 1u);
    return x->eval(x->c, so_far, t);
}

/* A new partial match: so_far (NULL: none) plus e as the cnt-th event of
 * stage t; also a completed match when it completes the pattern. */
static void spawn(const cep_def_t *d, cep_nfa_t *a, const cep_pm_t *so_far, cep_evid_t e, int t, int cnt,
                  cep_pm_t **next, int *nnext, int *capnext) {
    cep_pm_t x = extend(so_far, e, t, cnt);
    x.opts = options_after(d, t, cnt);
    if (completes(d, t, cnt)) push(&a->done, &a->ndone, &a->capdone, pm_copy(&x));
    if (x.opts)
        push(next, nnext, capnext, x);
    else
        pm_free(&x);
}

int cep_nfa_step(const cep_def_t *d, cep_nfa_t *a, cep_evid_t e, const cep_evctx_t *x, cep_emit_fn emit, void *c) {
    cep_pm_t *next = NULL;
    int nnext = 0, capnext = 0, rc = 0;
    for (int i = 0; i < a->npm; i++) {
        cep_pm_t *m = &a->pm[i];
        /* a negated stage after m's stage: the event kills the partial match
         * and everything it would lead to (Flink's stop state discards the
         * path).  not_followed_by: any event after the stage's first one up
         * to and with the next stage's first; not_next: the event right
         * after the stage's last one (once the stage may end there). */
        const cep_stage_t *ms = &d->st[m->stage];
        if (((x->neg >> m->stage) & 1u) &&
            (ms->neg == CEP_NEG_NOT_FOLLOWED_BY || (ms->neg == CEP_NEG_NOT_NEXT && m->fresh && m->count >= ms->min))) {
            pm_free(m);
            continue;
        }
        uint32_t keep = 0;
        for (int b = 0; b < 32 && rc == 0; b++) {
            if (!(m->opts & (1u << b))) continue;
            int t = m->stage + b;
            bool inner = b == 0;
            int cv = cond_of(x, m, t);
            if (cv < 0) {
                rc = cv;
                break;
            }
            /* until (looping stages): the stop event is neither taken nor
             * skipped by the stage; before its first event it does not count
             * (Flink extends take and the inner ignore with !until) */
            bool stop = (x->until >> t) & 1u;
            bool take = cv && !stop;
            if (take) spawn(d, a, m, e, t, inner ? m->count + 1 : 1, &next, &nnext, &capnext);
            cep_contig_t ct = inner ? d->st[t].inner : d->st[t].outer;
            bool skip_ok = ct == CEP_ANY || (ct == CEP_RELAXED && !cv);
            if (inner && stop) skip_ok = false;
            if (skip_ok) keep |= 1u << b;
        }
        if (keep && rc == 0) {
            m->opts = keep;
            m->fresh = false;
            push(&next, &nnext, &capnext, *m);
        } else {
            pm_free(m);
        }
    }
    /* the start state: the first stage, or a later one after optional ones */
    for (int t = 0; t < d->n && rc == 0; t++) {
        int cv = cond_of(x, NULL, t);
        if (cv < 0) {
            rc = cv;
            break;
        }
        if (cv && !((x->until >> t) & 1u)) spawn(d, a, NULL, e, t, 1, &next, &nnext, &capnext);
        if (!d->st[t].optional) break;
    }
    sl_free(a->pm);
    a->pm = next;
    a->npm = nnext;
    a->cappm = capnext;
    if (rc < 0) return rc;
    return release(d, a, e.ts, emit, c);
}

static int64_t deadline(const cep_def_t *d, const cep_pm_t *m) {
    int64_t s = m->ev[0].ts;
    return s > INT64_MAX - d->within ? INT64_MAX : s + d->within;
}

int64_t cep_nfa_next_deadline(const cep_def_t *d, const cep_nfa_t *a) {
    if (!d->within) return INT64_MAX;
    int64_t t = INT64_MAX;
    for (int i = 0; i < a->npm; i++) t = SL_MIN(t, deadline(d, &a->pm[i]));
    return t;
}

int cep_nfa_advance(const cep_def_t *d, cep_nfa_t *a, int64_t t, cep_emit_fn emit, void *c) {
    if (d->within) {
        int k = 0, rc = 0;
        for (int i = 0; i < a->npm; i++) {
            cep_pm_t *m = &a->pm[i];
            int64_t dl = deadline(d, m);
            if (dl <= t) {
                if (rc == 0) rc = emit(c, m, true, dl);
                pm_free(m);
            } else {
                a->pm[k++] = *m;
            }
        }
        a->npm = k;
        if (rc < 0) return rc;
    }
    return release(d, a, t, emit, c);
}

/* ---- serialized form ----
 *   u32 magic 'CEP2'  u32 npm pm*  u32 ndone pm*
 *   pm := i32 stage  i32 count  u32 opts  u8 fresh  u32 n  (i64 ts  u64 seq  u8 stage)*n
 * little-endian (host order; the machines we run on). */
#define CEP_MAGIC 0x32504543u /* "CEP2" */

static void put32(sl_buf_t *b, uint32_t v) { sl_buf_append(b, &v, 4); }
static void put64(sl_buf_t *b, uint64_t v) { sl_buf_append(b, &v, 8); }

static void write_pm(sl_buf_t *b, const cep_pm_t *m) {
    put32(b, (uint32_t)m->stage);
    put32(b, (uint32_t)m->count);
    put32(b, m->opts);
    uint8_t f = m->fresh;
    sl_buf_append(b, &f, 1);
    put32(b, (uint32_t)m->n);
    for (int i = 0; i < m->n; i++) {
        put64(b, (uint64_t)m->ev[i].ts);
        put64(b, m->ev[i].seq);
        sl_buf_append(b, &m->evst[i], 1);
    }
}

void cep_nfa_write(const cep_nfa_t *a, sl_buf_t *out) {
    put32(out, CEP_MAGIC);
    put32(out, (uint32_t)a->npm);
    for (int i = 0; i < a->npm; i++) write_pm(out, &a->pm[i]);
    put32(out, (uint32_t)a->ndone);
    for (int i = 0; i < a->ndone; i++) write_pm(out, &a->done[i]);
}

typedef struct rd {
    const uint8_t *p, *end;
} rd_t;

static bool get32(rd_t *r, uint32_t *v) {
    if (r->end - r->p < 4) return false;
    *v = sl_ld32(r->p);
    r->p += 4;
    return true;
}
static bool get64(rd_t *r, uint64_t *v) {
    if (r->end - r->p < 8) return false;
    *v = sl_ld64(r->p);
    r->p += 8;
    return true;
}

static bool read_pms(rd_t *r, cep_pm_t **arr, int *n, int *cap) {
    uint32_t k;
    if (!get32(r, &k) || k > (uint32_t)(r->end - r->p) / 16) return false;
    for (uint32_t i = 0; i < k; i++) {
        uint32_t st, cnt, opts, ne;
        if (!get32(r, &st) || !get32(r, &cnt) || !get32(r, &opts) || r->p == r->end) return false;
        bool fresh = *r->p++ != 0;
        if (!get32(r, &ne)) return false;
        if (st >= CEP_MAX_STAGES || ne == 0 || ne > (uint32_t)(r->end - r->p) / 17) return false;
        cep_pm_t m = {.stage = (int)st, .count = (int)cnt, .opts = opts, .fresh = fresh, .n = (int)ne};
        m.ev = sl_malloc(ne * sizeof *m.ev);
        m.evst = sl_malloc(ne);
        for (uint32_t j = 0; j < ne; j++) {
            uint64_t ts = 0, seq = 0;
            get64(r, &ts);
            get64(r, &seq);
            m.ev[j] = (cep_evid_t){(int64_t)ts, seq};
            m.evst[j] = *r->p++;
        }
        push(arr, n, cap, m);
    }
    return true;
}

int cep_nfa_read(cep_nfa_t *a, const uint8_t *p, size_t n) {
    cep_nfa_init(a);
    rd_t r = {p, p + n};
    uint32_t magic;
    if (!get32(&r, &magic) || magic != CEP_MAGIC) return SL_EFORMAT;
    if (!read_pms(&r, &a->pm, &a->npm, &a->cappm) || !read_pms(&r, &a->done, &a->ndone, &a->capdone) || r.p != r.end) {
        cep_nfa_clear(a);
        return SL_EFORMAT;
    }
    return 0;
}

static int evid_qcmp(const void *a, const void *b) { return cep_evid_cmp(*(const cep_evid_t *)a, *(const cep_evid_t *)b); }

cep_evid_t *cep_nfa_refs(const cep_nfa_t *a, int *n) {
    int tot = 0;
    for (int i = 0; i < a->npm; i++) tot += a->pm[i].n;
    for (int i = 0; i < a->ndone; i++) tot += a->done[i].n;
    cep_evid_t *v = sl_malloc((size_t)(tot ? tot : 1) * sizeof *v);
    int k = 0;
    for (int i = 0; i < a->npm; i++)
        for (int j = 0; j < a->pm[i].n; j++) v[k++] = a->pm[i].ev[j];
    for (int i = 0; i < a->ndone; i++)
        for (int j = 0; j < a->done[i].n; j++) v[k++] = a->done[i].ev[j];
    qsort(v, (size_t)k, sizeof *v, evid_qcmp);
    int u = 0;
    for (int i = 0; i < k; i++)
        if (!u || cep_evid_cmp(v[u - 1], v[i]) != 0) v[u++] = v[i];
    *n = u;
    return v;
}
