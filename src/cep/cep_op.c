/*
 * cep_op.c — the CEP operator (Flink's CepOperator); its builder, sl_cep,
 * is api/cep_api.c.
 *
 * It is a keyed process function, so its state is ordinary keyed state of
 * the operator's backend (heap or RocksDB): checkpointed, restored and
 * rescaled by key group like any other.  Per key:
 *
 *   cep-events  map (ts, seq) -> event row: the shared buffer.  An event is
 *               put here when it arrives and stays while it is waiting for
 *               the watermark or some partial / completed match refers to
 *               it; matches hold only its (ts, seq).
 *   cep-key     value: the key's arrival counter (seq; equal timestamps
 *               are fed in arrival order), done_upto (the watermark up to
 *               which its events were fed, so a timer that finds nothing
 *               new costs one lookup) and the (ts, seq) of the events that
 *               wait for the watermark (no scan of the buffer)
 *   cep-nfa     value: the NFA (nfa.c) in its serialized form
 *
 * and an event-time timer at each buffered event's timestamp and at the
 * next timeout.  When one fires (the watermark W passed it), the events
 * with done_upto < ts <= W are fed in (ts, seq) order, with time advanced
 * to every timeout deadline in between first (a deadline at t comes before
 * the events at t, as Flink's advanceTime before processing them).  An
 * event with ts <= the watermark when it arrives is late.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "cep/cep_int.h"
#include "operators/basic_ops.h"

typedef struct cep_rt {
    const cep_od_t *od;
    void *uctx;
    sl_operator_t *op;
    sl_state_t *kst, *events, *nfa;
    sl_buf_t ser;
    sl_buf_t rows;
    sl_row_t *mrows;
    int64_t *mts;
    int capm;
    sl_collector_t *out;
    /* the event being fed (a copy) and the partial-match view for
     * iterative conditions */
    sl_buf_t cur;
    int64_t cur_ts;
    sl_buf_t irows;
    sl_row_t *irow;
    int64_t *its;
    int capi;
} cep_rt_t;

struct sl_cep_match {
    const cep_def_t *d;
    int first[CEP_MAX_STAGES], cnt[CEP_MAX_STAGES];
    const sl_row_t *rows;
    const int64_t *ts;
};

/* ---- match accessors ---- */

int sl_cep_match_stages(const sl_cep_match_t *m) { return m->d->n; }
const char *sl_cep_match_stage_name(const sl_cep_match_t *m, int s) {
    return s >= 0 && s < m->d->n ? m->d->st[s].name : NULL;
}
int sl_cep_match_stage_index(const sl_cep_match_t *m, const char *name) {
    for (int i = 0; name && i < m->d->n; i++)
        if (strcmp(m->d->st[i].name, name) == 0) return i;
    return -1;
}
int sl_cep_match_count(const sl_cep_match_t *m, int s) { return s >= 0 && s < m->d->n ? m->cnt[s] : 0; }
sl_row_t sl_cep_match_event(const sl_cep_match_t *m, int s, int i, int64_t *ts) {
    if (s < 0 || s >= m->d->n || i < 0 || i >= m->cnt[s]) {
        if (ts) *ts = SL_NO_TIMESTAMP;
        return (sl_row_t){0};
    }
    int k = m->first[s] + i;
    if (ts) *ts = m->ts[k];
    return m->rows[k];
}

/* ---- state keys ---- */

static void evkey(cep_evid_t e, uint8_t k[16]) {
    uint64_t t = (uint64_t)e.ts ^ (1ULL << 63); /* bytewise order = ts order */
    for (int i = 0; i < 8; i++) k[i] = (uint8_t)(t >> (56 - 8 * i));
    for (int i = 0; i < 8; i++) k[8 + i] = (uint8_t)(e.seq >> (56 - 8 * i));
}

/* ---- the runtime context (one per subtask) ---- */

static void *rt_clone(const void *ctx) {
    const cep_od_t *od = ctx;
    cep_rt_t *rt = sl_calloc(1, sizeof *rt);
    rt->od = od;
    rt->uctx = sl_fn_ctx_acquire(&od->fn.opts);
    return rt;
}

static void rt_free(void *ctx) {
    cep_rt_t *rt = ctx;
    if (!rt) return;
    sl_fn_ctx_release(&rt->od->fn.opts, rt->uctx);
    sl_buf_free(&rt->ser);
    sl_buf_free(&rt->rows);
    sl_buf_free(&rt->cur);
    sl_buf_free(&rt->irows);
    sl_free(rt->irow);
    sl_free(rt->its);
    sl_free(rt->mrows);
    sl_free(rt->mts);
    sl_free(rt);
}

static int cep_open(void *ctx, sl_rt_t *r) {
    cep_rt_t *rt = ctx;
    rt->op = r->op;
    rt->events = sl_state_map(r, "cep-events");
    rt->kst = sl_state_value(r, "cep-key");
    rt->nfa = sl_state_value(r, "cep-nfa");
    if (!rt->events || !rt->kst || !rt->nfa) return SL_EINVAL;
    return 0;
}

/* cep-key: u64 next seq, i64 done_upto, then the (ts, seq) of the events
 * that wait for the watermark (i64, u64 each, arrival order). */
typedef struct keyst {
    uint64_t seq;
    int64_t upto;
    cep_evid_t *pend;
    int npend, cap;
} keyst_t;

static int key_get(cep_rt_t *rt, keyst_t *k) {
    uint32_t len;
    const uint8_t *v = sl_value_get(rt->kst, &len);
    memset(k, 0, sizeof *k);
    k->upto = INT64_MIN;
    if (!v) return 0;
    if (len < 16 || (len - 16) % 16) return sl_op_fail(rt->op, SL_EFORMAT, "CEP: malformed key state");
    k->seq = sl_ld64(v);
    k->upto = (int64_t)sl_ld64(v + 8);
    k->npend = k->cap = (int)((len - 16) / 16);
    if (k->npend) {
        k->pend = sl_malloc((size_t)k->cap * sizeof *k->pend);
        for (int i = 0; i < k->npend; i++)
            k->pend[i] = (cep_evid_t){(int64_t)sl_ld64(v + 16 + 16 * i), sl_ld64(v + 24 + 16 * i)};
    }
    return 0;
}

static int key_put(cep_rt_t *rt, const keyst_t *k) {
    rt->ser.len = 0;
    sl_buf_reserve(&rt->ser, 16 + 16 * (size_t)k->npend);
    uint8_t h[16];
    sl_st64(h, k->seq);
    sl_st64(h + 8, (uint64_t)k->upto);
    sl_buf_append(&rt->ser, h, 16);
    for (int i = 0; i < k->npend; i++) {
        sl_st64(h, (uint64_t)k->pend[i].ts);
        sl_st64(h + 8, k->pend[i].seq);
        sl_buf_append(&rt->ser, h, 16);
    }
    return sl_value_put(rt->kst, rt->ser.p, (uint32_t)rt->ser.len);
}

/* The event at ts arrives: the key state's arrival counter grows and the
 * event joins the pending list — the stored bytes extended in place, not
 * parsed and written again entry by entry (key_get/key_put), which made
 * every event cost the whole pending list. */
static int key_append(cep_rt_t *rt, int64_t ts, cep_evid_t *e) {
    uint32_t len = 0;
    const uint8_t *v = sl_value_get(rt->kst, &len);
    if (v && (len < 16 || (len - 16) % 16)) return sl_op_fail(rt->op, SL_EFORMAT, "CEP: malformed key state");
    rt->ser.len = 0;
    sl_buf_reserve(&rt->ser, (v ? len : 16) + 16);
    uint8_t h[16];
    if (v) {
        sl_buf_append(&rt->ser, v, len);
    } else {
        sl_st64(h, 0);
        sl_st64(h + 8, (uint64_t)INT64_MIN);
        sl_buf_append(&rt->ser, h, 16);
    }
    uint64_t seq = sl_ld64(rt->ser.p);
    sl_st64(rt->ser.p, seq + 1);
    *e = (cep_evid_t){ts, seq};
    sl_st64(h, (uint64_t)ts);
    sl_st64(h + 8, seq);
    sl_buf_append(&rt->ser, h, 16);
    return sl_value_put(rt->kst, rt->ser.p, (uint32_t)rt->ser.len);
}

static int cep_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    cep_rt_t *rt = ctx;
    if (in->ts == SL_NO_TIMESTAMP)
        return sl_op_fail(pc->op, SL_EINVAL, "CEP: a record without an event timestamp (give the source a watermark "
                                             "strategy with a timestamp)");
    if (in->ts <= sl_pctx_watermark(pc)) { /* late (Flink: ts <= current watermark) */
        if (rt->od->late_tag) {
            sl_row_writer_t *w = sl_side_row(out, rt->od->late_tag);
            sl_rw_copy_row(w, &in->row);
            sl_emit_side(out, rt->od->late_tag);
        }
        return 0;
    }
    cep_evid_t e = {0, 0};
    int rc = key_append(rt, in->ts, &e);
    uint8_t k[16];
    evkey(e, k);
    if (rc == 0) rc = sl_map_put(rt->events, k, 16, in->row.data, in->row.len);
    if (rc < 0) return rc;
    sl_timer_event(pc, in->ts);
    return 0;
}

/* ---- feeding the NFA ---- */

static int evid_qcmp(const void *a, const void *b) { return cep_evid_cmp(*(const cep_evid_t *)a, *(const cep_evid_t *)b); }

/* Builds in *mm the view of m's events (NULL: no event), copying their
 * rows out of the buffer into buf / rows / ts (grown as needed). */
static int materialize(cep_rt_t *rt, const cep_pm_t *m, sl_buf_t *buf, sl_row_t **rows, int64_t **ts, int *cap,
                       sl_cep_match_t *mm) {
    const cep_def_t *d = rt->od->def;
    int n = m ? m->n : 0;
    if (n > *cap) {
        *cap = n * 2;
        *rows = sl_realloc(*rows, (size_t)*cap * sizeof **rows);
        *ts = sl_realloc(*ts, (size_t)*cap * sizeof **ts);
    }
    buf->len = 0;
    for (int i = 0; i < n; i++) {
        uint8_t k[16];
        evkey(m->ev[i], k);
        uint32_t vl;
        const void *v = sl_map_get(rt->events, k, 16, &vl);
        if (!v)
            return sl_op_fail(rt->op, SL_ESTATE, "CEP: event (ts %lld, seq %llu) of a match is missing from the buffer",
                              (long long)m->ev[i].ts, (unsigned long long)m->ev[i].seq);
        (*rows)[i].data = (const uint8_t *)(uintptr_t)buf->len; /* offset until buf stops moving */
        (*rows)[i].len = vl;
        sl_buf_append(buf, v, vl);
    }
    *mm = (sl_cep_match_t){.d = d, .rows = *rows, .ts = *ts};
    for (int i = n - 1; i >= 0; i--) {
        (*rows)[i] = (sl_row_t){buf->p + (uintptr_t)(*rows)[i].data, (*rows)[i].len, rt->op->in_schema[0]};
        (*ts)[i] = m->ev[i].ts;
        mm->first[m->evst[i]] = i;
        mm->cnt[m->evst[i]]++;
    }
    return 0;
}

/* Hands a match (or timed-out partial match) to the user function. */
static int emit_match(void *c, const cep_pm_t *m, bool timed_out, int64_t ts) {
    cep_rt_t *rt = c;
    if (timed_out && !rt->od->fn.timeout) return 0;
    sl_cep_match_t mm;
    int rc = materialize(rt, m, &rt->rows, &rt->mrows, &rt->mts, &rt->capm, &mm);
    if (rc < 0) return rc;
    sl_out_set_timestamp(rt->out, ts);
    rc = timed_out ? rt->od->fn.timeout(rt->uctx, &mm, ts, rt->out) : rt->od->fn.select(rt->uctx, &mm, rt->out);
    if (rc < 0)
        return sl_op_fail(rt->op, rc, "CEP: %s function failed (%s)", timed_out ? "timeout" : "select", sl_strerror(rc));
    return 0;
}

static int stage_fail(cep_rt_t *rt, int s, int r, const char *what) {
    return sl_op_fail(rt->op, r, "CEP: %s of stage '%s' failed (%s)", what, rt->od->def->st[s].name, sl_strerror(r));
}

/* An iterative condition: stage s on the current event, extending so_far. */
static int eval_iter(void *c, const cep_pm_t *so_far, int s) {
    cep_rt_t *rt = c;
    sl_cep_match_t mm;
    int rc = materialize(rt, so_far, &rt->irows, &rt->irow, &rt->its, &rt->capi, &mm);
    if (rc < 0) return rc;
    sl_row_t row = {rt->cur.p, (uint32_t)rt->cur.len, rt->op->in_schema[0]};
    int r = cep_stage_eval(&rt->od->def->st[s], &row, rt->cur_ts, &mm);
    return r < 0 ? stage_fail(rt, s, r, "condition") : r;
}

static int feed(cep_rt_t *rt, cep_nfa_t *a, cep_evid_t e) {
    const cep_def_t *d = rt->od->def;
    uint8_t k[16];
    evkey(e, k);
    uint32_t vl;
    const void *v = sl_map_get(rt->events, k, 16, &vl);
    if (!v) return sl_op_fail(rt->op, SL_ESTATE, "CEP: buffered event (ts %lld) is missing", (long long)e.ts);
    rt->cur.len = 0;
    sl_buf_append(&rt->cur, v, vl); /* the map's pointer does not outlive the next lookup */
    rt->cur_ts = e.ts;
    sl_row_t row = {rt->cur.p, vl, rt->op->in_schema[0]};
    cep_evctx_t x = {.eval = eval_iter, .c = rt};
    for (int s = 0; s < d->n; s++) {
        const cep_stage_t *st = &d->st[s];
        if (st->iterative) {
            x.iter |= 1u << s;
        } else {
            int r = cep_stage_eval(st, &row, e.ts, NULL);
            if (r < 0) return stage_fail(rt, s, r, "condition");
            if (r) x.simple |= 1u << s;
        }
        if (st->neg) {
            int r = cep_neg_eval(st, &row, e.ts);
            if (r < 0) return stage_fail(rt, s, r, "condition of the negated stage after");
            if (r) x.neg |= 1u << s;
        }
        if (st->until) {
            int r = st->until(st->until_ctx, &row, e.ts);
            if (r < 0) return stage_fail(rt, s, r, "until condition");
            if (r) x.until |= 1u << s;
        }
    }
    return cep_nfa_step(d, a, e, &x, emit_match, rt);
}

static int drive(cep_rt_t *rt, sl_pctx_t *pc, sl_collector_t *out) {
    const cep_def_t *d = rt->od->def;
    int64_t W = sl_pctx_watermark(pc);
    rt->out = out;
    uint32_t klen = 0;
    const uint8_t *kv = sl_value_get(rt->kst, &klen);
    if (kv && klen >= 16 && W <= (int64_t)sl_ld64(kv + 8))
        return 0; /* another timer of this key at this watermark did the work (checked before parsing it all) */
    keyst_t ks;
    int rc = key_get(rt, &ks);
    if (rc < 0) return rc;
    if (W <= ks.upto) { /* another timer of this key at this watermark did the work */
        sl_free(ks.pend);
        return 0;
    }
    cep_nfa_t a;
    uint32_t len;
    const void *v = sl_value_get(rt->nfa, &len);
    if (v) {
        if (cep_nfa_read(&a, v, len) < 0) {
            sl_free(ks.pend);
            return sl_op_fail(rt->op, SL_EFORMAT, "CEP: malformed NFA state");
        }
    } else {
        cep_nfa_init(&a);
    }
    /* the events the watermark passed, in (ts, seq) order; the rest wait */
    struct {
        cep_evid_t *v;
        int n;
    } p = {sl_malloc((size_t)(ks.npend ? ks.npend : 1) * sizeof(cep_evid_t)), 0};
    int keep = 0;
    for (int j = 0; j < ks.npend; j++)
        if (ks.pend[j].ts <= W)
            p.v[p.n++] = ks.pend[j];
        else
            ks.pend[keep++] = ks.pend[j];
    ks.npend = keep;
    if (p.n > 1) qsort(p.v, (size_t)p.n, sizeof *p.v, evid_qcmp);
    int nold;
    cep_evid_t *old = cep_nfa_refs(&a, &nold);
    int i = 0;
    while (rc == 0) {
        int64_t dl = cep_nfa_next_deadline(d, &a);
        int64_t et = i < p.n ? p.v[i].ts : INT64_MAX;
        if (dl != INT64_MAX && dl <= W && dl <= et) {
            rc = cep_nfa_advance(d, &a, dl, emit_match, rt);
        } else if (i < p.n) {
            rc = feed(rt, &a, p.v[i]);
            i++;
        } else {
            break;
        }
    }
    /* events nothing refers to any more leave the buffer */
    int nnew;
    cep_evid_t *now = cep_nfa_refs(&a, &nnew);
    for (int pass = 0; pass < 2 && rc == 0; pass++) {
        const cep_evid_t *cand = pass ? p.v : old;
        int nc = pass ? i : nold;
        for (int j = 0; j < nc; j++) {
            if (nnew && bsearch(&cand[j], now, (size_t)nnew, sizeof *now, evid_qcmp)) continue;
            uint8_t k[16];
            evkey(cand[j], k);
            sl_map_remove(rt->events, k, 16);
        }
    }
    if (rc == 0) { /* a key with nothing left leaves no state behind */
        ks.upto = W;
        if (cep_nfa_empty(&a) && ks.npend == 0)
            sl_state_clear(rt->kst);
        else
            rc = key_put(rt, &ks);
    }
    if (rc == 0) {
        if (cep_nfa_empty(&a)) {
            sl_state_clear(rt->nfa);
        } else {
            rt->ser.len = 0;
            cep_nfa_write(&a, &rt->ser);
            rc = sl_value_put(rt->nfa, rt->ser.p, (uint32_t)rt->ser.len);
        }
        int64_t next = cep_nfa_next_deadline(d, &a);
        if (next != INT64_MAX && next > W) sl_timer_event(pc, next);
    }
    sl_free(old);
    sl_free(now);
    sl_free(p.v);
    sl_free(ks.pend);
    cep_nfa_clear(&a);
    return rc;
}

static atomic_llong left_events, left_nfa, left_key;

void sl_cep_test_state_left(int64_t *events, int64_t *nfa, int64_t *key) {
    *events = atomic_load(&left_events);
    *nfa = atomic_load(&left_nfa);
    *key = atomic_load(&left_key);
}

void sl_cep_test_state_reset(void) {
    atomic_store(&left_events, 0);
    atomic_store(&left_nfa, 0);
    atomic_store(&left_key, 0);
}

static int64_t keys_with(const sl_state_t *st) {
    sl_keyed_backend_t *kb = st ? st->op->kb : NULL;
    return kb ? kb->ops->count(kb, st->sid) : 0;
}

static void cep_close(void *ctx) {
    cep_rt_t *rt = ctx;
    if (!rt->op) return;
    atomic_fetch_add(&left_events, keys_with(rt->events));
    atomic_fetch_add(&left_nfa, keys_with(rt->nfa));
    atomic_fetch_add(&left_key, keys_with(rt->kst));
}

static int cep_on_timer(void *ctx, sl_pctx_t *pc, int64_t ts, sl_time_domain_t dom, sl_collector_t *out) {
    SL_UNUSED(ts);
    if (dom != SL_TIME_EVENT) return 0;
    return drive(ctx, pc, out);
}

/* ---- what the builder (api/cep_api.c) uses ---- */

void cep_od_free(void *p) {
    cep_od_t *od = p;
    cep_def_free(od->def);
    sl_free(od->late_tag);
    sl_free(od);
}

sl_process_fn_t cep_process_fn(cep_od_t *od) {
    return (sl_process_fn_t){.open = cep_open,
                             .process = cep_process,
                             .on_timer = cep_on_timer,
                             .close = cep_close,
                             .opts = {.ctx = od, .ctx_clone = rt_clone, .ctx_free = rt_free}};
}
