/*
 * window_operator.c — the keyed window operator: Flink's WindowOperator and
 * EvictingWindowOperator in one (see SEMANTICS.md, "Windows").
 *
 * State (keyed, in the operator's backend; a window namespace is 16 bytes,
 * see window.h):
 *   "window-contents"     per (key, state window): the aggregate's
 *                         accumulator (VALUE, acc_size bytes), the reduced
 *                         row (VALUE), or — for a process function or an
 *                         evictor — every element (LIST of [i64 ts][row]).
 *   "window-trigger-<i>"  per (key, window): an int64 of trigger i
 *                         (CountTrigger's count).
 *   "merging-window-set"  per key, empty namespace, session windows only:
 *                         the key's windows and their state windows
 *                         (merging_window_set.c).
 *
 * Timers (namespace = window): the trigger's (event time at max timestamp,
 * processing time at max timestamp) and the cleanup timer at
 * max + allowed lateness (event time) or max (processing time).  When the
 * two coincide they are one timer, so a window fires and is cleaned up
 * exactly once.  Event-time timers fire in advance_watermark before the
 * watermark goes downstream; processing-time timers in on_processing_time,
 * with wake-ups asked for through sl_op_schedule_processing.
 *
 * Event-time sessions with EventTimeTrigger (session_fast).  A record that
 * extends a session moves the old window's trigger and cleanup timers to
 * the grown window in place (sl_timers_replace; merge_fast) instead of
 * deleting them and registering new ones, and a record inside a live
 * session registers nothing: its window's timers are known to be pending.
 * The timers afterwards, and so every firing, are Flink's.
 *
 * Fast path.  For a non-merging assigner, no evictor, an aggregate or
 * reduce function and the assigner's default trigger, an element costs a
 * window computation, one get_mut (+ put) and no allocation; timers are
 * registered only when get_mut created the window's contents.  That is
 * exactly what the general path does: the trigger and cleanup timers of a
 * window are registered with its first element and stay until its cleanup
 * removes the contents; a later element registers the same timers again
 * (no-ops), except where EventTimeTrigger fires at once instead
 * (max <= watermark), which the fast path does too.  At cleanup the
 * default trigger has nothing left to clear (its one timer, at
 * max <= cleanup time, has fired), so that lookup is skipped as well.
 * With the heap backend, values from get_mut are changed in place and the
 * put that the interface asks for is a documented no-op: it is skipped.
 *
 * Window buckets (event-time fast path).  Every key of a tumbling or
 * sliding window shares the window's firing time (max timestamp) and
 * cleanup time, so instead of two timers per (key, window) the operator
 * keeps, per window, the list of keys that created contents for it.  When
 * the watermark reaches a window's max timestamp the list is walked once
 * (each key's result is emitted), and at its cleanup time once more (each
 * key's contents removed; with no allowed lateness both happen in one
 * walk).  Emitted results and late firings are exactly those of the timer
 * path; only the order among keys of one window differs (insertion order
 * instead of heap order), which Flink leaves unspecified too.  The lists
 * are derived data: a restore can rebuild them from the window-contents
 * state (each entry's namespace is its window).
 *
 * Sliced sliding windows (event-time fast path with an aggregate function
 * that has merge).  A sliding window of size S and slide L is a union of
 * panes of gcd(S, L); instead of adding every record to S / L windows,
 * the operator adds it to its one pane ("window-panes" state, namespace =
 * the pane) and, when a window fires, merges the key's panes of that window
 * (Flink SQL's slicing windows).  Buckets hold the keys per pane.  A window
 * fires when the watermark passes its max timestamp, for every key with
 * contents in one of its panes; a record for a window that has fired but
 * is within its allowed lateness fires that window again for its key; a
 * pane is removed when the last window containing it is cleaned up.  The
 * results are exactly those of the per-window path.
 *
 * Everything runs on the task's thread.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/common.h"
#include "windowing/window.h"

typedef struct win_op win_op_t;

/* The keys that have contents for one window (fast path, event time). */
typedef struct win_bucket {
    sl_window_t w;
    int64_t fire_ts;    /* the window's max timestamp */
    int64_t cleanup_ts; /* max + allowed lateness (INT64_MAX on overflow) */
    bool fired;
    sl_buf_t keys;      /* entries: u64 key hash, u32 length, key bytes, padded to 8 */
    int64_t nkeys;
} win_bucket_t;

typedef struct win_tctx {
    sl_trigger_ctx_t c; /* first */
    win_op_t *op;
} win_tctx_t;

struct win_op {
    sl_operator_t base; /* first */
    const sl_window_spec_t *spec;
    const sl_window_assigner_t *assigner;
    const sl_trigger_t *trigger;
    const sl_evictor_t *evictor;
    bool event_time;
    bool merging;
    bool session_fast; /* event-time sessions with EventTimeTrigger (see merge_fast) */
    bool list_state; /* contents are the elements (process function or evictor) */
    bool fast;
    bool tumbling;
    bool put_after_mut; /* the backend needs put after changing a get_mut value */
    int64_t lateness; /* 0 for processing time */
    int late_tag;     /* > 0: side-output tag for late records */
    bool late_tag_missing;
    const sl_schema_t *in_schema;
    bool in_fixed; /* input rows have no variable-length fields */
    uint32_t in_fixed_len;

    int sid_contents, sid_merge;
    int *sid_trigger;
    int ntrigger;

    /* scratch, reused (grows, never shrinks) */
    sl_window_t *wins;
    int wins_cap;
    sl_row_writer_t rw, rw2, rw3; /* rw3: reduce_result's output */
    sl_buf_t buf;
    sl_window_elem_t *elems;
    int elems_cap;
    const void **vals;
    uint32_t *lens;
    int vals_cap;
    void *acc; /* acc_size bytes: aggregate over an evicting window */
    sl_mws_t mws;
    sl_buf_t mws_buf;
    sl_collector_t col;
    win_tctx_t tctx;

    int64_t proc_wakeup; /* earliest processing-time wake-up asked for */
    int64_t late_dropped;

    /* event-time fast path: the keys with contents per window, instead of
     * two timers per (key, window); sorted by window start */
    win_bucket_t *buckets;
    int nbuckets, buckets_cap;
    int last_bucket;

    /* sliced sliding windows: buckets are panes (see the file comment) */
    bool sliced;
    int64_t pane;     /* gcd(size, slide) */
    int64_t fired_wm; /* windows with max timestamp <= this have fired */
    void *sacc;       /* acc_size bytes: the merged panes of one window */
    uint32_t seen_cap;
    uint64_t *seen_h; /* keys of the window being fired (open addressing) */
    const uint8_t **seen_k;
    uint32_t *seen_l;
    uint32_t *seen_order; /* slots in the order the keys were met */
    uint8_t *seen_acc;    /* seen_cap accumulators */
};

static const sl_operator_vt_t window_vt;

static inline sl_keyed_backend_t *KB(win_op_t *op) { return op->base.kb; }

/* ---- time ------------------------------------------------------------- */

/* Flink's cleanupTime: max + allowed lateness (event time, INT64_MAX on
 * overflow) or max (processing time). */
static inline int64_t cleanup_time(const win_op_t *op, const sl_window_t *w) {
    int64_t max = sl_window_max_ts(w), c;
    if (!op->event_time) return max;
    if (SL_UNLIKELY(__builtin_add_overflow(max, op->lateness, &c))) return INT64_MAX;
    return c;
}

static inline bool window_late(const win_op_t *op, const sl_window_t *w) {
    return op->event_time && cleanup_time(op, w) <= op->base.wm;
}

static void timer_register(win_op_t *op, sl_time_domain_t d, const sl_window_t *w, int64_t ts) {
    uint8_t ns[SL_WINDOW_NS_LEN];
    sl_window_to_ns(w, ns);
    sl_keyed_backend_t *kb = KB(op);
    sl_timers_register_hashed(op->base.timers, d, kb->kg, kb->keyhash, kb->key, kb->keylen, ns, SL_WINDOW_NS_LEN, ts);
    if (d == SL_TIME_PROCESSING && ts < op->proc_wakeup) {
        op->proc_wakeup = ts;
        sl_op_schedule_processing(&op->base, ts);
    }
}

static void timer_delete(win_op_t *op, sl_time_domain_t d, const sl_window_t *w, int64_t ts) {
    uint8_t ns[SL_WINDOW_NS_LEN];
    sl_window_to_ns(w, ns);
    sl_keyed_backend_t *kb = KB(op);
    sl_timers_delete_hashed(op->base.timers, d, kb->kg, kb->keyhash, kb->key, kb->keylen, ns, SL_WINDOW_NS_LEN, ts);
}

static inline sl_time_domain_t window_domain(const win_op_t *op) {
    return op->event_time ? SL_TIME_EVENT : SL_TIME_PROCESSING;
}

static void register_cleanup(win_op_t *op, const sl_window_t *w) {
    int64_t c = cleanup_time(op, w);
    if (c == INT64_MAX) return; /* no cleanup timer for "end of time" (Flink) */
    timer_register(op, window_domain(op), w, c);
}

static void delete_cleanup(win_op_t *op, const sl_window_t *w) {
    int64_t c = cleanup_time(op, w);
    if (c == INT64_MAX) return;
    timer_delete(op, window_domain(op), w, c);
}

/* ---- the trigger context ---------------------------------------------- */

static void tc_register(sl_trigger_ctx_t *c, sl_time_domain_t d, int64_t ts) {
    timer_register(((win_tctx_t *)c)->op, d, &c->window, ts);
}

static void tc_delete(sl_trigger_ctx_t *c, sl_time_domain_t d, int64_t ts) {
    timer_delete(((win_tctx_t *)c)->op, d, &c->window, ts);
}

static int64_t tc_now(sl_trigger_ctx_t *c) { return sl_op_now(&((win_tctx_t *)c)->op->base); }

static bool tc_get(sl_trigger_ctx_t *c, int slot, const sl_window_t *w, int64_t *v) {
    win_op_t *op = ((win_tctx_t *)c)->op;
    uint8_t ns[SL_WINDOW_NS_LEN];
    sl_window_to_ns(w, ns);
    uint32_t len = 0;
    const void *p = KB(op)->ops->get(KB(op), op->sid_trigger[slot], ns, SL_WINDOW_NS_LEN, &len);
    if (!p || len != 8) return false;
    memcpy(v, p, 8);
    return true;
}

static int64_t tc_add(sl_trigger_ctx_t *c, int slot, const sl_window_t *w, int64_t delta) {
    win_op_t *op = ((win_tctx_t *)c)->op;
    sl_keyed_backend_t *kb = KB(op);
    uint8_t ns[SL_WINDOW_NS_LEN];
    sl_window_to_ns(w, ns);
    int sid = op->sid_trigger[slot];
    void *p = kb->ops->get_mut(kb, sid, ns, SL_WINDOW_NS_LEN, 8, NULL);
    if (!p) {
        sl_op_fail(&op->base, SL_ESTATE, "cannot update trigger state");
        return delta;
    }
    int64_t v;
    memcpy(&v, p, 8);
    v += delta;
    memcpy(p, &v, 8);
    if (op->put_after_mut) kb->ops->put(kb, sid, ns, SL_WINDOW_NS_LEN, p, 8);
    return v;
}

static void tc_clear(sl_trigger_ctx_t *c, int slot, const sl_window_t *w) {
    win_op_t *op = ((win_tctx_t *)c)->op;
    uint8_t ns[SL_WINDOW_NS_LEN];
    sl_window_to_ns(w, ns);
    KB(op)->ops->remove(KB(op), op->sid_trigger[slot], ns, SL_WINDOW_NS_LEN);
}

static const sl_trigger_ctx_ops_t tctx_ops = {
    .register_timer = tc_register,
    .delete_timer = tc_delete,
    .processing_time = tc_now,
    .state_get = tc_get,
    .state_add = tc_add,
    .state_clear = tc_clear,
};

/* The trigger context, pointed at window w. */
static inline sl_trigger_ctx_t *tctx(win_op_t *op, const sl_window_t *w) {
    op->tctx.c.window = *w;
    op->tctx.c.watermark = op->base.wm;
    return &op->tctx.c;
}

/* ---- failures ---------------------------------------------------------- */

static int fail_user(win_op_t *op, int rc, const char *what) {
    return sl_op_fail(&op->base, rc, "window %s function failed (%s)", what, sl_strerror(rc));
}

static int fail_state(win_op_t *op, const char *what) {
    return sl_op_fail(&op->base, SL_ESTATE, "window state: %s failed", what);
}

/* ---- window contents ---------------------------------------------------- */

/* Adds rec to the contents in namespace sw; *created (optional) tells
 * whether the contents did not exist before.  Lists cannot tell, so
 * *created is false for them (the fast path never uses lists). */
static int contents_add(win_op_t *op, const sl_window_t *sw, const sl_record_t *rec, bool *created) {
    sl_keyed_backend_t *kb = KB(op);
    uint8_t ns[SL_WINDOW_NS_LEN];
    sl_window_to_ns(sw, ns);
    bool cr = false;
    int sid = op->sid_contents;
    if (op->list_state) {
        op->buf.len = 0;
        sl_buf_reserve(&op->buf, 8 + (size_t)rec->row.len);
        sl_st64(op->buf.p, (uint64_t)rec->ts);
        memcpy(op->buf.p + 8, rec->row.data, rec->row.len);
        if (kb->ops->list_add(kb, sid, ns, SL_WINDOW_NS_LEN, op->buf.p, 8 + rec->row.len) < 0)
            return fail_state(op, "list add");
    } else if (op->spec->fn_kind == SL_WINDOW_FN_AGGREGATE) {
        const sl_aggregate_fn_t *f = &op->spec->agg;
        void *acc = kb->ops->get_mut(kb, sid, ns, SL_WINDOW_NS_LEN, f->acc_size, &cr);
        if (SL_UNLIKELY(!acc)) return fail_state(op, "get_mut");
        if (cr && f->init) f->init(f->ctx, acc);
        int rc = f->add(f->ctx, acc, rec);
        if (op->put_after_mut) kb->ops->put(kb, sid, ns, SL_WINDOW_NS_LEN, acc, f->acc_size);
        if (SL_UNLIKELY(rc < 0)) return fail_user(op, rc, "aggregate add");
    } else { /* reduce */
        uint32_t len = rec->row.len;
        if (op->in_fixed && len == op->in_fixed_len) {
            void *v = kb->ops->get_mut(kb, sid, ns, SL_WINDOW_NS_LEN, len, &cr);
            if (SL_UNLIKELY(!v)) return fail_state(op, "get_mut");
            if (cr) {
                memcpy(v, rec->row.data, len);
                if (op->put_after_mut) kb->ops->put(kb, sid, ns, SL_WINDOW_NS_LEN, v, len);
            } else {
                sl_row_t acc = {v, len, op->in_schema};
                sl_rw_begin(&op->rw, op->in_schema);
                int rc = op->spec->reduce(op->spec->ctx, &acc, &rec->row, &op->rw);
                if (SL_UNLIKELY(rc < 0)) return fail_user(op, rc, "reduce");
                if (SL_UNLIKELY(op->rw.err)) return fail_user(op, op->rw.err, "reduce (bad output row)");
                if (op->rw.len == len) {
                    memcpy(v, op->rw.buf, len);
                    if (op->put_after_mut) kb->ops->put(kb, sid, ns, SL_WINDOW_NS_LEN, v, len);
                } else {
                    kb->ops->put(kb, sid, ns, SL_WINDOW_NS_LEN, op->rw.buf, op->rw.len);
                }
            }
        } else {
            uint32_t vlen = 0;
            const void *v = kb->ops->get(kb, sid, ns, SL_WINDOW_NS_LEN, &vlen);
            if (!v) {
                cr = true;
                kb->ops->put(kb, sid, ns, SL_WINDOW_NS_LEN, rec->row.data, len);
            } else {
                sl_row_t acc = {v, vlen, op->in_schema};
                sl_rw_begin(&op->rw, op->in_schema);
                int rc = op->spec->reduce(op->spec->ctx, &acc, &rec->row, &op->rw);
                if (SL_UNLIKELY(rc < 0)) return fail_user(op, rc, "reduce");
                if (SL_UNLIKELY(op->rw.err)) return fail_user(op, op->rw.err, "reduce (bad output row)");
                kb->ops->put(kb, sid, ns, SL_WINDOW_NS_LEN, op->rw.buf, op->rw.len);
            }
        }
    }
    if (created) *created = cr;
    return 0;
}

static void contents_clear(win_op_t *op, const sl_window_t *sw) {
    uint8_t ns[SL_WINDOW_NS_LEN];
    sl_window_to_ns(sw, ns);
    KB(op)->ops->remove(KB(op), op->sid_contents, ns, SL_WINDOW_NS_LEN);
}

typedef struct collect {
    win_op_t *op;
    int n;
} collect_t;

static int collect_elem(void *c, const void *v, uint32_t len) {
    collect_t *cc = c;
    win_op_t *op = cc->op;
    if (SL_UNLIKELY(len < 8)) return SL_ESTATE;
    if (cc->n == op->elems_cap) {
        op->elems_cap = op->elems_cap ? op->elems_cap * 2 : 64;
        op->elems = sl_realloc(op->elems, (size_t)op->elems_cap * sizeof *op->elems);
    }
    sl_window_elem_t *e = &op->elems[cc->n++];
    e->ts = (int64_t)sl_ld64(v);
    e->data = (const uint8_t *)(uintptr_t)(op->buf.len + 8); /* an offset until buf stops moving */
    e->len = len - 8;
    sl_buf_append(&op->buf, v, len);
    return 0;
}

/* Copies the elements of namespace sw into op->elems (data in op->buf);
 * returns their number or < 0. */
static int elements_load(win_op_t *op, const sl_window_t *sw) {
    uint8_t ns[SL_WINDOW_NS_LEN];
    sl_window_to_ns(sw, ns);
    collect_t cc = {op, 0};
    op->buf.len = 0;
    int rc = KB(op)->ops->list_foreach(KB(op), op->sid_contents, ns, SL_WINDOW_NS_LEN, collect_elem, &cc);
    if (rc < 0) return fail_state(op, "list read");
    for (int i = 0; i < cc.n; i++) op->elems[i].data = op->buf.p + (uintptr_t)op->elems[i].data;
    return cc.n;
}

/* Rewrites the list of namespace sw with v[0..n) (after eviction). */
static int elements_store(win_op_t *op, const sl_window_t *sw, const sl_window_elem_t *v, int n) {
    uint8_t ns[SL_WINDOW_NS_LEN];
    sl_window_to_ns(sw, ns);
    if (n > op->vals_cap) {
        op->vals_cap = n;
        op->vals = sl_realloc(op->vals, (size_t)n * sizeof *op->vals);
        op->lens = sl_realloc(op->lens, (size_t)n * sizeof *op->lens);
    }
    for (int i = 0; i < n; i++) {
        op->vals[i] = v[i].data - 8; /* the [ts] header precedes the row in buf */
        op->lens[i] = v[i].len + 8;
    }
    if (KB(op)->ops->list_replace(KB(op), op->sid_contents, ns, SL_WINDOW_NS_LEN, n, op->vals, op->lens) < 0)
        return fail_state(op, "list replace");
    return 0;
}

/* ---- emitting results ---------------------------------------------------- */

static int emit_aggregate(win_op_t *op, const sl_window_t *w, const void *acc) {
    const sl_aggregate_fn_t *f = &op->spec->agg;
    sl_keyed_backend_t *kb = KB(op);
    sl_rw_begin(&op->rw, op->base.out_schema);
    int rc = f->result(f->ctx, acc, kb->key, kb->keylen, w, &op->rw);
    if (SL_UNLIKELY(rc < 0)) return fail_user(op, rc, "aggregate result");
    if (SL_UNLIKELY(op->rw.err)) return fail_user(op, op->rw.err, "aggregate result (bad output row)");
    sl_record_t out = {sl_rw_row(&op->rw), sl_window_max_ts(w)};
    sl_op_emit(&op->base, 0, &out);
    return 0;
}

/* Emits the reduced row of window w, through reduce_result if given. */
static int emit_reduced(win_op_t *op, const sl_window_t *w, sl_row_t row) {
    const sl_window_spec_t *s = op->spec;
    if (s->reduce_result) {
        sl_keyed_backend_t *kb = KB(op);
        sl_rw_begin(&op->rw3, op->base.out_schema);
        int rc = s->reduce_result(s->ctx, &row, kb->key, kb->keylen, w, &op->rw3);
        if (SL_UNLIKELY(rc < 0)) return fail_user(op, rc, "reduce result");
        if (SL_UNLIKELY(op->rw3.err)) return fail_user(op, op->rw3.err, "reduce result (bad output row)");
        row = sl_rw_row(&op->rw3);
    }
    sl_record_t r = {row, sl_window_max_ts(w)};
    sl_op_emit(&op->base, 0, &r);
    return 0;
}

/* Applies the window function to elements v[0..n) (a list-state window). */
static int apply_elements(win_op_t *op, const sl_window_t *w, const sl_window_elem_t *v, int n) {
    const sl_window_spec_t *s = op->spec;
    sl_keyed_backend_t *kb = KB(op);
    switch (s->fn_kind) {
    case SL_WINDOW_FN_PROCESS: {
        sl_window_elements_t el = {v, n, op->in_schema};
        sl_collector_reset(&op->col, sl_window_max_ts(w));
        int rc = s->process(s->ctx, kb->key, kb->keylen, w, &el, &op->col);
        if (SL_UNLIKELY(rc < 0)) return fail_user(op, rc, "process");
        return 0;
    }
    case SL_WINDOW_FN_AGGREGATE: {
        /* Flink's AggregateApplyWindowFunction: a fresh accumulator over
         * the elements that remain (a result even when none remain). */
        const sl_aggregate_fn_t *f = &s->agg;
        memset(op->acc, 0, f->acc_size);
        if (f->init) f->init(f->ctx, op->acc);
        for (int i = 0; i < n; i++) {
            sl_record_t r = {{v[i].data, v[i].len, op->in_schema}, v[i].ts};
            int rc = f->add(f->ctx, op->acc, &r);
            if (SL_UNLIKELY(rc < 0)) return fail_user(op, rc, "aggregate add");
        }
        return emit_aggregate(op, w, op->acc);
    }
    case SL_WINDOW_FN_REDUCE: {
        if (n == 0) return 0;
        sl_row_t cur = {v[0].data, v[0].len, op->in_schema};
        sl_row_writer_t *ws[2] = {&op->rw, &op->rw2};
        for (int i = 1; i < n; i++) {
            sl_row_writer_t *out = ws[i & 1];
            sl_row_t in = {v[i].data, v[i].len, op->in_schema};
            sl_rw_begin(out, op->in_schema);
            int rc = s->reduce(s->ctx, &cur, &in, out);
            if (SL_UNLIKELY(rc < 0)) return fail_user(op, rc, "reduce");
            if (SL_UNLIKELY(out->err)) return fail_user(op, out->err, "reduce (bad output row)");
            cur = sl_rw_row(out);
        }
        return emit_reduced(op, w, cur);
    }
    }
    return 0;
}

/* FIRE: emits the result of window w whose contents are in namespace sw.
 * Nothing is emitted when the window has no contents (e.g. purged). */
static int emit_window(win_op_t *op, const sl_window_t *w, const sl_window_t *sw) {
    sl_keyed_backend_t *kb = KB(op);
    if (op->list_state) {
        int n = elements_load(op, sw);
        if (n <= 0) return n;
        int n0 = n;
        n = sl_evictor_evict_before(op->evictor, op->elems, n);
        int rc = apply_elements(op, w, op->elems, n);
        if (rc < 0) return rc;
        n = sl_evictor_evict_after(op->evictor, op->elems, n);
        return n != n0 ? elements_store(op, sw, op->elems, n) : 0;
    }
    uint8_t ns[SL_WINDOW_NS_LEN];
    sl_window_to_ns(sw, ns);
    uint32_t len = 0;
    const void *v = kb->ops->get(kb, op->sid_contents, ns, SL_WINDOW_NS_LEN, &len);
    if (!v) return 0;
    if (op->spec->fn_kind == SL_WINDOW_FN_AGGREGATE) return emit_aggregate(op, w, v);
    return emit_reduced(op, w, (sl_row_t){v, len, op->in_schema});
}

/* ---- late records ---------------------------------------------------------- */

/* A record that no window took: late when event time passed its timestamp
 * plus the allowed lateness (Flink's isSkippedElement && isElementLate). */
static void late_record(win_op_t *op, const sl_record_t *rec) {
    if (!op->event_time) return;
    int64_t t;
    if (__builtin_add_overflow(rec->ts, op->lateness, &t)) t = INT64_MAX;
    if (t > op->base.wm) return; /* in no window at all (sliding windows with gaps): dropped, as in Flink */
    if (op->late_tag > 0)
        sl_op_emit(&op->base, op->late_tag, rec);
    else
        op->late_dropped++;
}

/* ---- merging windows ---------------------------------------------------- */

static int mws_load(win_op_t *op) {
    uint32_t len = 0;
    const void *p = KB(op)->ops->get(KB(op), op->sid_merge, "", 0, &len);
    if (sl_mws_load(&op->mws, p, p ? len : 0) < 0) return fail_state(op, "merging window set (corrupt)");
    return 0;
}

static int mws_persist(win_op_t *op) {
    if (!op->mws.dirty) return 0;
    op->mws.dirty = false;
    if (op->mws.n == 0) {
        KB(op)->ops->remove(KB(op), op->sid_merge, "", 0);
        return 0;
    }
    op->mws_buf.len = 0;
    sl_buf_reserve(&op->mws_buf, (size_t)op->mws.n * SL_MWS_ENTRY_BYTES);
    uint32_t len = sl_mws_store(&op->mws, op->mws_buf.p);
    if (KB(op)->ops->put(KB(op), op->sid_merge, "", 0, op->mws_buf.p, len) < 0)
        return fail_state(op, "merging window set put");
    return 0;
}

/* Merges the contents of namespaces src[0..n) into target and removes
 * them (Flink's mergeNamespaces: target first, then the sources). */
static int contents_merge(win_op_t *op, const sl_window_t *target, const sl_window_t *src, int n) {
    sl_keyed_backend_t *kb = KB(op);
    int sid = op->sid_contents;
    uint8_t tns[SL_WINDOW_NS_LEN], ns[SL_WINDOW_NS_LEN];
    sl_window_to_ns(target, tns);
    if (op->list_state) {
        for (int i = 0; i < n; i++) {
            int k = elements_load(op, &src[i]);
            if (k < 0) return k;
            sl_window_to_ns(&src[i], ns);
            kb->ops->remove(kb, sid, ns, SL_WINDOW_NS_LEN);
            for (int j = 0; j < k; j++)
                if (kb->ops->list_add(kb, sid, tns, SL_WINDOW_NS_LEN, op->elems[j].data - 8, op->elems[j].len + 8) < 0)
                    return fail_state(op, "list add");
        }
        return 0;
    }
    /* Copy the sources out (pointers die with the next change), drop them. */
    op->buf.len = 0;
    int k = 0;
    if (n > op->elems_cap) {
        op->elems_cap = n;
        op->elems = sl_realloc(op->elems, (size_t)n * sizeof *op->elems);
    }
    for (int i = 0; i < n; i++) {
        sl_window_to_ns(&src[i], ns);
        uint32_t len = 0;
        const void *v = kb->ops->get(kb, sid, ns, SL_WINDOW_NS_LEN, &len);
        if (!v) continue;
        op->elems[k].data = (const uint8_t *)(uintptr_t)op->buf.len;
        op->elems[k].len = len;
        k++;
        sl_buf_append(&op->buf, v, len);
        kb->ops->remove(kb, sid, ns, SL_WINDOW_NS_LEN);
    }
    if (k == 0) return 0;
    for (int i = 0; i < k; i++) op->elems[i].data = op->buf.p + (uintptr_t)op->elems[i].data;

    if (op->spec->fn_kind == SL_WINDOW_FN_AGGREGATE) {
        const sl_aggregate_fn_t *f = &op->spec->agg;
        bool created = false;
        void *acc = kb->ops->get_mut(kb, sid, tns, SL_WINDOW_NS_LEN, f->acc_size, &created);
        if (!acc) return fail_state(op, "get_mut");
        int i = 0;
        if (created) memcpy(acc, op->elems[i++].data, f->acc_size);
        for (; i < k; i++) f->merge(f->ctx, acc, op->elems[i].data);
        if (op->put_after_mut) kb->ops->put(kb, sid, tns, SL_WINDOW_NS_LEN, acc, f->acc_size);
        return 0;
    }
    /* reduce: fold the sources' rows into the target's */
    uint32_t tlen = 0;
    const void *tv = kb->ops->get(kb, sid, tns, SL_WINDOW_NS_LEN, &tlen);
    int i = 0;
    sl_row_t cur;
    if (tv) {
        cur = (sl_row_t){tv, tlen, op->in_schema};
    } else {
        cur = (sl_row_t){op->elems[0].data, op->elems[0].len, op->in_schema};
        i = 1;
    }
    sl_row_writer_t *ws[2] = {&op->rw, &op->rw2};
    for (int j = 0; i < k; i++, j++) {
        sl_row_writer_t *out = ws[j & 1];
        sl_row_t in = {op->elems[i].data, op->elems[i].len, op->in_schema};
        sl_rw_begin(out, op->in_schema);
        int rc = op->spec->reduce(op->spec->ctx, &cur, &in, out);
        if (rc < 0) return fail_user(op, rc, "reduce");
        if (out->err) return fail_user(op, out->err, "reduce (bad output row)");
        cur = sl_rw_row(out);
    }
    if (kb->ops->put(kb, sid, tns, SL_WINDOW_NS_LEN, cur.data, cur.len) < 0) return fail_state(op, "put");
    return 0;
}

/* The merge function of Flink's WindowOperator: the trigger merges into
 * the result window, the merged windows lose their trigger state and
 * cleanup timers, and their contents join the surviving state window. */
static int apply_merge(win_op_t *op, const sl_mws_merge_t *m) {
    sl_trigger_on_merge(op->trigger, tctx(op, &m->result), m->merged_windows, m->nmerged);
    for (int i = 0; i < m->nmerged; i++) {
        sl_trigger_clear(op->trigger, tctx(op, &m->merged_windows[i]));
        delete_cleanup(op, &m->merged_windows[i]);
    }
    return contents_merge(op, &m->state_window, m->merged_states, m->nmerged_states);
}

/* apply_merge for event-time sessions with the default trigger, when the
 * result is not late: the same timers afterwards, fewer timer calls.
 *
 * Flink's sequence for a merge of windows O1..Ok into R registers R's
 * trigger timer (onMerge, if max(R) > watermark), deletes each Oi's trigger
 * timer (max(Oi)) and cleanup timer (max(Oi) + lateness), and then, for the
 * element, registers R's trigger timer again (onElement, or fires at once
 * when max(R) <= watermark) and R's cleanup timer.  No Oi is R (a merge
 * result is larger than each window it merges), so these act on distinct
 * timers and their order does not matter.  Here O1's timers are moved to
 * R's (sl_timers_replace: in place, without freeing and allocating), the
 * other windows' timers are deleted, and process_merging skips the two
 * registrations that would find R's timers present. */
static int merge_fast(win_op_t *op, const sl_mws_merge_t *m) {
    sl_keyed_backend_t *kb = KB(op);
    sl_timer_service_t *ts = op->base.timers;
    uint8_t rns[SL_WINDOW_NS_LEN], ons[SL_WINDOW_NS_LEN];
    sl_window_to_ns(&m->result, rns);
    /* R's timers: trigger (if ahead of the watermark) and cleanup, once
     * when they coincide (no allowed lateness). */
    int64_t nt[2];
    int nn = 0;
    int64_t rmax = sl_window_max_ts(&m->result), rclean = cleanup_time(op, &m->result);
    if (rmax > op->base.wm) nt[nn++] = rmax;
    if (rclean != INT64_MAX && (nn == 0 || rclean != rmax)) nt[nn++] = rclean;
    for (int i = 0; i < m->nmerged; i++) {
        const sl_window_t *o = &m->merged_windows[i];
        sl_window_to_ns(o, ons);
        int64_t ot[2];
        int on = 0;
        int64_t omax = sl_window_max_ts(o), oclean = cleanup_time(op, o);
        ot[on++] = omax;
        if (oclean != INT64_MAX && oclean != omax) ot[on++] = oclean;
        int j = 0;
        if (i == 0) /* the first window's timers become R's */
            for (; j < on && j < nn; j++)
                sl_timers_replace(ts, SL_TIME_EVENT, kb->kg, kb->keyhash, kb->key, kb->keylen, ons, SL_WINDOW_NS_LEN,
                                  ot[j], rns, SL_WINDOW_NS_LEN, nt[j]);
        for (int r = j; r < on; r++)
            sl_timers_delete_hashed(ts, SL_TIME_EVENT, kb->kg, kb->keyhash, kb->key, kb->keylen, ons, SL_WINDOW_NS_LEN,
                                    ot[r]);
        if (i == 0)
            for (; j < nn; j++)
                sl_timers_register_hashed(ts, SL_TIME_EVENT, kb->kg, kb->keyhash, kb->key, kb->keylen, rns,
                                          SL_WINDOW_NS_LEN, nt[j]);
    }
    return contents_merge(op, &m->state_window, m->merged_states, m->nmerged_states);
}

/* ---- elements ---------------------------------------------------------- */

/* Makes room for n windows in op->wins. */
static void wins_reserve(win_op_t *op, int n) {
    if (n <= op->wins_cap) return;
    op->wins_cap = n;
    op->wins = sl_realloc(op->wins, (size_t)n * sizeof *op->wins);
}

static int assign(win_op_t *op, int64_t t) {
    int n = sl_assigner_assign(op->assigner, t, op->wins, op->wins_cap);
    if (n > op->wins_cap) {
        wins_reserve(op, n);
        n = sl_assigner_assign(op->assigner, t, op->wins, op->wins_cap);
    }
    return n;
}

/* ---- window buckets (event-time fast path) ---------------------------- */

static win_bucket_t *bucket_for(win_op_t *op, const sl_window_t *w) {
    if (op->last_bucket < op->nbuckets && op->buckets[op->last_bucket].w.start == w->start)
        return &op->buckets[op->last_bucket];
    int i = op->nbuckets;
    while (i > 0 && op->buckets[i - 1].w.start > w->start) i--;
    if (i > 0 && op->buckets[i - 1].w.start == w->start) {
        op->last_bucket = i - 1;
        return &op->buckets[i - 1];
    }
    if (op->nbuckets == op->buckets_cap) {
        op->buckets_cap = op->buckets_cap ? op->buckets_cap * 2 : 8;
        op->buckets = sl_realloc(op->buckets, (size_t)op->buckets_cap * sizeof *op->buckets);
    }
    memmove(&op->buckets[i + 1], &op->buckets[i], (size_t)(op->nbuckets - i) * sizeof *op->buckets);
    op->nbuckets++;
    win_bucket_t *b = &op->buckets[i];
    memset(b, 0, sizeof *b);
    b->w = *w;
    b->fire_ts = sl_window_max_ts(w);
    b->cleanup_ts = cleanup_time(op, w);
    b->fired = b->fire_ts <= op->base.wm; /* a window first seen in its lateness period */
    op->last_bucket = i;
    return b;
}

/* The next entry of a bucket's key list at *p (see bucket_add): returns
 * the key, sets its hash and length, and moves *p past it. */
static inline const uint8_t *bucket_next_key(const uint8_t **p, uint64_t *h, uint32_t *len) {
    const uint8_t *e = *p;
    *h = sl_ld64(e);
    *len = sl_ld32(e + 8);
    size_t need = 12 + (size_t)*len;
    *p = e + need + (8 - need % 8) % 8;
    return e + 12;
}

/* The current key got contents for window w. */
static void bucket_add(win_op_t *op, const sl_window_t *w) {
    win_bucket_t *b = bucket_for(op, w);
    sl_keyed_backend_t *kb = KB(op);
    size_t need = 12 + (size_t)kb->keylen, pad = (8 - need % 8) % 8;
    sl_buf_reserve(&b->keys, need + pad);
    uint8_t *p = b->keys.p + b->keys.len;
    sl_st64(p, kb->keyhash);
    sl_st32(p + 8, kb->keylen);
    memcpy(p + 12, kb->key, kb->keylen);
    memset(p + need, 0, pad);
    b->keys.len += need + pad;
    b->nkeys++;
}

/* Walks bucket b: emits each key's result (fire) and/or removes its
 * contents (clear). */
static int bucket_walk(win_op_t *op, win_bucket_t *b, bool fire, bool clear) {
    sl_keyed_backend_t *kb = KB(op);
    uint8_t ns[SL_WINDOW_NS_LEN];
    sl_window_to_ns(&b->w, ns);
    const uint8_t *p = b->keys.p, *end = b->keys.p + b->keys.len;
    while (p < end) {
        uint64_t h;
        uint32_t len;
        const uint8_t *key = bucket_next_key(&p, &h, &len);
        sl_kb_set_key_hashed(kb, key, len, h);
        if (fire) {
            int rc = emit_window(op, &b->w, &b->w);
            if (rc < 0) return rc;
        }
        if (clear) contents_clear(op, &b->w);
    }
    return 0;
}

/* Fires and cleans up every window the watermark has reached, in order. */
static int buckets_advance(win_op_t *op, int64_t wm) {
    int done = 0;
    for (int i = 0; i < op->nbuckets; i++) {
        win_bucket_t *b = &op->buckets[i];
        if (b->fire_ts > wm) break;
        bool fire = !b->fired, clear = b->cleanup_ts <= wm;
        if (fire || clear) {
            int rc = bucket_walk(op, b, fire, clear);
            if (rc < 0) return rc;
        }
        b->fired = true;
        if (clear) {
            sl_buf_free(&b->keys);
            done = i + 1;
        }
    }
    /* Buckets are cleaned up in start order (equal lateness), so the done
     * ones are a prefix. */
    if (done) {
        memmove(op->buckets, op->buckets + done, (size_t)(op->nbuckets - done) * sizeof *op->buckets);
        op->nbuckets -= done;
        op->last_bucket = 0;
    }
    return 0;
}

/* The fast path (see the file comment). */
static int process_fast(win_op_t *op, const sl_record_t *rec, int64_t t) {
    sl_window_t one;
    const sl_window_t *ws;
    int nw;
    if (op->tumbling) {
        one.start = sl_window_start(t, op->assigner->offset, op->assigner->size);
        if (SL_UNLIKELY(__builtin_add_overflow(one.start, op->assigner->size, &one.end))) one.end = INT64_MAX;
        ws = &one;
        nw = 1;
    } else {
        nw = assign(op, t);
        ws = op->wins;
    }
    int64_t wm = op->base.wm;
    bool taken = false;
    for (int i = 0; i < nw; i++) {
        const sl_window_t *w = &ws[i];
        int64_t max = sl_window_max_ts(w), cleanup = cleanup_time(op, w);
        if (op->event_time && cleanup <= wm) continue; /* late window */
        taken = true;
        bool created;
        int rc = contents_add(op, w, rec, &created);
        if (SL_UNLIKELY(rc < 0)) return rc;
        if (op->event_time) {
            if (SL_UNLIKELY(created)) bucket_add(op, w);
            if (SL_UNLIKELY(max <= wm)) { /* EventTimeTrigger: a late firing */
                rc = emit_window(op, w, w);
                if (rc < 0) return rc;
            }
        } else if (SL_UNLIKELY(created)) {
            timer_register(op, SL_TIME_PROCESSING, w, max); /* trigger and cleanup timer */
        }
    }
    if (SL_UNLIKELY(!taken)) late_record(op, rec);
    return 0;
}

/* ---- sliced sliding windows ------------------------------------------ */

static inline sl_window_t pane_of(const win_op_t *op, int64_t t) {
    sl_window_t p;
    p.start = sl_window_start(t, op->assigner->offset, op->pane);
    if (SL_UNLIKELY(__builtin_add_overflow(p.start, op->pane, &p.end))) p.end = INT64_MAX;
    return p;
}

/* The window result of window w for the current key: its panes merged.
 * Nothing when the key has no contents in w. */
static int emit_sliced(win_op_t *op, const sl_window_t *w) {
    const sl_aggregate_fn_t *f = &op->spec->agg;
    sl_keyed_backend_t *kb = KB(op);
    memset(op->sacc, 0, f->acc_size ? f->acc_size : 1);
    if (f->init) f->init(f->ctx, op->sacc);
    bool any = false;
    for (int64_t a = w->start; a < w->end;) {
        sl_window_t p = pane_of(op, a);
        uint8_t ns[SL_WINDOW_NS_LEN];
        sl_window_to_ns(&p, ns);
        uint32_t len = 0;
        const void *v = kb->ops->get(kb, op->sid_contents, ns, SL_WINDOW_NS_LEN, &len);
        if (v) {
            if (SL_UNLIKELY(len != f->acc_size)) return fail_state(op, "pane accumulator of the wrong size");
            f->merge(f->ctx, op->sacc, v);
            any = true;
        }
        if (p.end <= a) break; /* saturated at the end of time */
        a = p.end;
    }
    return any ? emit_aggregate(op, w, op->sacc) : 0;
}

static int process_sliced(win_op_t *op, const sl_record_t *rec, int64_t t) {
    int64_t wm = op->base.wm;
    sl_window_t p = pane_of(op, t);
    /* the windows containing t are those containing its pane */
    int nw = assign(op, t);
    bool taken = false;
    for (int i = 0; i < nw; i++)
        if (cleanup_time(op, &op->wins[i]) > wm) taken = true;
    if (SL_UNLIKELY(!taken)) {
        late_record(op, rec);
        return 0;
    }
    bool created;
    int rc = contents_add(op, &p, rec, &created);
    if (SL_UNLIKELY(rc < 0)) return rc;
    if (SL_UNLIKELY(created)) bucket_add(op, &p);
    /* EventTimeTrigger: a window that has fired fires again at once */
    for (int i = nw - 1; i >= 0; i--) {
        const sl_window_t *w = &op->wins[i];
        if (sl_window_max_ts(w) <= wm && cleanup_time(op, w) > wm) {
            rc = emit_sliced(op, w);
            if (rc < 0) return rc;
        }
    }
    return 0;
}

/* The slot of key (h, k, len) in the table of the window being fired;
 * *fresh tells whether it was added now. */
static uint32_t seen_slot(win_op_t *op, uint64_t h, const uint8_t *k, uint32_t len, bool *fresh) {
    uint32_t mask = op->seen_cap - 1;
    for (uint32_t i = (uint32_t)(h >> 32) & mask;; i = (i + 1) & mask) {
        if (!op->seen_k[i]) {
            op->seen_h[i] = h;
            op->seen_k[i] = k;
            op->seen_l[i] = len;
            *fresh = true;
            return i;
        }
        if (op->seen_h[i] == h && op->seen_l[i] == len && memcmp(op->seen_k[i], k, len) == 0) {
            *fresh = false;
            return i;
        }
    }
}

/* Fires window w: walks the keys of its panes once, merging each (key,
 * pane) accumulator into the key's accumulator for w (one lookup per pane
 * entry, none for the panes a key has nothing in), then emits every key's
 * result in the order the keys were first met. */
static int fire_sliced(win_op_t *op, const sl_window_t *w) {
    const sl_aggregate_fn_t *f = &op->spec->agg;
    int lo = 0;
    while (lo < op->nbuckets && op->buckets[lo].w.start < w->start) lo++;
    int hi = lo;
    int64_t nkeys = 0;
    while (hi < op->nbuckets && op->buckets[hi].w.start < w->end) nkeys += op->buckets[hi++].nkeys;
    if (!nkeys) return 0;
    uint32_t cap = 16;
    while (cap < 2 * nkeys) cap *= 2;
    size_t asz = f->acc_size ? f->acc_size : 1;
    if (cap > op->seen_cap) {
        sl_free(op->seen_h);
        sl_free(op->seen_k);
        sl_free(op->seen_l);
        sl_free(op->seen_order);
        sl_free(op->seen_acc);
        op->seen_cap = cap;
        op->seen_h = sl_malloc(cap * sizeof *op->seen_h);
        op->seen_k = sl_malloc(cap * sizeof *op->seen_k);
        op->seen_l = sl_malloc(cap * sizeof *op->seen_l);
        op->seen_order = sl_malloc(cap * sizeof *op->seen_order);
        op->seen_acc = sl_malloc(cap * asz);
    }
    memset(op->seen_k, 0, op->seen_cap * sizeof *op->seen_k);
    sl_keyed_backend_t *kb = KB(op);
    uint32_t n = 0;
    for (int i = lo; i < hi; i++) {
        const win_bucket_t *b = &op->buckets[i];
        uint8_t ns[SL_WINDOW_NS_LEN];
        sl_window_to_ns(&b->w, ns);
        const uint8_t *p = b->keys.p, *end = b->keys.p + b->keys.len;
        while (p < end) {
            uint64_t h;
            uint32_t len;
            const uint8_t *key = bucket_next_key(&p, &h, &len);
            sl_kb_set_key_hashed(kb, key, len, h);
            uint32_t vlen = 0;
            const void *v = kb->ops->get(kb, op->sid_contents, ns, SL_WINDOW_NS_LEN, &vlen);
            if (!v) continue;
            if (SL_UNLIKELY(vlen != f->acc_size)) return fail_state(op, "pane accumulator of the wrong size");
            bool fresh;
            uint32_t slot = seen_slot(op, h, key, len, &fresh);
            uint8_t *acc = op->seen_acc + (size_t)slot * asz;
            if (fresh) {
                memset(acc, 0, asz);
                if (f->init) f->init(f->ctx, acc);
                op->seen_order[n++] = slot;
            }
            f->merge(f->ctx, acc, v);
        }
    }
    for (uint32_t j = 0; j < n; j++) {
        uint32_t slot = op->seen_order[j];
        sl_kb_set_key_hashed(kb, op->seen_k[slot], op->seen_l[slot], op->seen_h[slot]);
        int rc = emit_aggregate(op, w, op->seen_acc + (size_t)slot * asz);
        if (rc < 0) return rc;
    }
    return 0;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* The watermark moved from op->fired_wm to wm: fires the windows whose max
 * timestamp it passed, in order of their end, then drops the panes whose
 * last window is cleaned up. */
static int panes_advance(win_op_t *op, int64_t wm) {
    if (wm <= op->fired_wm) return 0;
    /* the windows to fire: those of existing panes with max in (fired_wm, wm] */
    sl_buf_t *ends = &op->buf;
    ends->len = 0;
    for (int i = 0; i < op->nbuckets; i++) {
        int nw = assign(op, op->buckets[i].w.start);
        for (int k = 0; k < nw; k++) {
            int64_t max = sl_window_max_ts(&op->wins[k]);
            if (max > op->fired_wm && max <= wm) sl_buf_append(ends, &op->wins[k].start, sizeof(int64_t));
        }
    }
    int64_t *starts = (int64_t *)(void *)ends->p;
    size_t n = ends->len / sizeof(int64_t);
    if (n > 1) qsort(starts, n, sizeof *starts, cmp_i64);
    for (size_t i = 0; i < n; i++) {
        if (i && starts[i] == starts[i - 1]) continue;
        sl_window_t w;
        w.start = starts[i];
        if (SL_UNLIKELY(__builtin_add_overflow(w.start, op->assigner->size, &w.end))) w.end = INT64_MAX;
        int rc = fire_sliced(op, &w);
        if (rc < 0) return rc;
    }
    op->fired_wm = wm;
    /* panes in start order; the cleanup time of a pane's last window grows
     * with the pane, so the ones to drop are a prefix */
    int done = 0;
    sl_keyed_backend_t *kb = KB(op);
    for (; done < op->nbuckets; done++) {
        win_bucket_t *b = &op->buckets[done];
        sl_window_t last;
        last.start = sl_window_start(b->w.start, op->assigner->offset, op->assigner->slide);
        if (SL_UNLIKELY(__builtin_add_overflow(last.start, op->assigner->size, &last.end))) last.end = INT64_MAX;
        if (cleanup_time(op, &last) > wm) break;
        const uint8_t *p = b->keys.p, *end = b->keys.p + b->keys.len;
        while (p < end) {
            uint64_t h;
            uint32_t len;
            const uint8_t *key = bucket_next_key(&p, &h, &len);
            sl_kb_set_key_hashed(kb, key, len, h);
            contents_clear(op, &b->w);
        }
        sl_buf_free(&b->keys);
    }
    if (done) {
        memmove(op->buckets, op->buckets + done, (size_t)(op->nbuckets - done) * sizeof *op->buckets);
        op->nbuckets -= done;
        op->last_bucket = 0;
    }
    return 0;
}

/* After the trigger answered r for window w (contents in sw). */
static int act(win_op_t *op, sl_trigger_result_t r, const sl_window_t *w, const sl_window_t *sw) {
    if (r & SL_TRIGGER_FIRE) {
        int rc = emit_window(op, w, sw);
        if (rc < 0) return rc;
    }
    if (r & SL_TRIGGER_PURGE) contents_clear(op, sw);
    return 0;
}

static int process_general(win_op_t *op, const sl_record_t *rec, int64_t t) {
    int nw = assign(op, t);
    bool taken = false;
    for (int i = 0; i < nw; i++) {
        sl_window_t w = op->wins[i];
        if (window_late(op, &w)) continue;
        taken = true;
        int rc = contents_add(op, &w, rec, NULL);
        if (rc < 0) return rc;
        rc = act(op, sl_trigger_on_element(op->trigger, tctx(op, &w), rec->ts), &w, &w);
        if (rc < 0) return rc;
        register_cleanup(op, &w);
    }
    if (!taken) late_record(op, rec);
    return 0;
}

static int process_merging(win_op_t *op, const sl_record_t *rec, int64_t t) {
    int rc = mws_load(op);
    if (rc < 0) return rc;
    int nw = assign(op, t);
    bool taken = false;
    for (int i = 0; i < nw; i++) {
        sl_mws_merge_t m;
        sl_mws_add(&op->mws, &op->wins[i], &m);
        sl_window_t w = m.result;
        /* The result's trigger and cleanup timers are known to be in place
         * (session_fast): after merge_fast, or when the element fell inside
         * a live window — its trigger timer is pending while max >
         * watermark (registered when the window came to be, removed only by
         * firing, a merge or cleanup) and so is its cleanup timer. */
        bool timers_in_place = false;
        if (m.merged) {
            if (op->session_fast && !window_late(op, &w)) {
                rc = merge_fast(op, &m);
                timers_in_place = true;
            } else {
                rc = apply_merge(op, &m);
            }
            if (rc < 0) return rc;
        } else if (m.existed) {
            timers_in_place = op->session_fast;
        }
        if (window_late(op, &w)) {
            sl_mws_retire(&op->mws, &w);
            continue;
        }
        taken = true;
        sl_window_t sw = sl_mws_find(&op->mws, &w)->state;
        if ((rc = contents_add(op, &sw, rec, NULL)) < 0) return rc;
        if (timers_in_place) {
            /* EventTimeTrigger.onElement without its (present) timer */
            sl_trigger_result_t r = sl_window_max_ts(&w) <= op->base.wm ? SL_TRIGGER_FIRE : SL_TRIGGER_CONTINUE;
            if ((rc = act(op, r, &w, &sw)) < 0) return rc;
        } else {
            rc = act(op, sl_trigger_on_element(op->trigger, tctx(op, &w), rec->ts), &w, &sw);
            if (rc < 0) return rc;
            register_cleanup(op, &w);
        }
    }
    if ((rc = mws_persist(op)) < 0) return rc;
    if (!taken) late_record(op, rec);
    return 0;
}

static int w_process_current_key(sl_operator_t *o, const sl_record_t *rec);

static int w_process(sl_operator_t *o, int input, const sl_record_t *rec) {
    int kg = sl_op_set_key_from(o, input, &rec->row);
    if (SL_UNLIKELY(kg < 0)) return kg;
    return w_process_current_key(o, rec);
}

/* A batch from the network: for the tumbling event-time fast path with a
 * key field, first compute every record's key hash and window and ask the
 * backend to prefetch its state, so the cache misses of the whole batch
 * overlap instead of being paid one after another; then process in order. */
static int w_process_batch(sl_operator_t *o, int input, const sl_record_t *recs, int n) {
    win_op_t *op = (win_op_t *)o;
    sl_keyed_backend_t *kb = o->kb;
    const sl_key_selector_t *ks = o->key[input];
    if (!op->fast || !op->tumbling || !op->event_time || !kb->ops->prefetch || ks->field < 0 || n > 64) {
        for (int i = 0; i < n; i++) {
            int rc = w_process(o, input, &recs[i]);
            if (SL_UNLIKELY(rc < 0)) return rc;
        }
        return 0;
    }
    uint64_t hash[64];
    const uint8_t *key[64];
    uint32_t klen[64];
    uint8_t ns[64][SL_WINDOW_NS_LEN];
    bool want[64];
    int64_t wm = o->wm;
    for (int i = 0; i < n; i++) {
        key[i] = sl_row_field_key(&recs[i].row, ks->field, &klen[i]);
        hash[i] = sl_kg_key_hash(key[i], klen[i]);
        int64_t t = recs[i].ts;
        want[i] = false;
        if (SL_UNLIKELY(t == SL_NO_TIMESTAMP)) continue;
        sl_window_t w;
        w.start = sl_window_start(t, op->assigner->offset, op->assigner->size);
        if (SL_UNLIKELY(__builtin_add_overflow(w.start, op->assigner->size, &w.end))) w.end = INT64_MAX;
        if (cleanup_time(op, &w) <= wm) continue; /* late: no state touched */
        sl_window_to_ns(&w, ns[i]);
        want[i] = true;
    }
    /* Software pipeline: keep PREFETCH_AHEAD loads in flight (more than the
     * core's miss buffers only queues them up). */
    enum { PREFETCH_AHEAD = 8 };
    for (int i = 0; i < n && i < PREFETCH_AHEAD; i++)
        if (want[i])
            kb->ops->prefetch(kb, op->sid_contents, sl_kg_of_hash(hash[i], o->max_parallelism), hash[i], ns[i],
                              SL_WINDOW_NS_LEN);
    for (int i = 0; i < n; i++) {
        int j = i + PREFETCH_AHEAD;
        if (j < n && want[j])
            kb->ops->prefetch(kb, op->sid_contents, sl_kg_of_hash(hash[j], o->max_parallelism), hash[j], ns[j],
                              SL_WINDOW_NS_LEN);
        int kg = sl_kb_set_key_hashed(kb, key[i], klen[i], hash[i]);
        if (SL_UNLIKELY(kg < 0)) return sl_op_fail(o, kg, "record's key is outside this subtask's key groups");
        int rc = w_process_current_key(o, &recs[i]);
        if (SL_UNLIKELY(rc < 0)) return rc;
    }
    return 0;
}

static int w_process_current_key(sl_operator_t *o, const sl_record_t *rec) {
    win_op_t *op = (win_op_t *)o;
    int64_t t;
    if (op->event_time) {
        t = rec->ts;
        if (SL_UNLIKELY(t == SL_NO_TIMESTAMP))
            return sl_op_fail(o, SL_EINVAL,
                              "record has no timestamp: event-time windows need timestamps (a watermark strategy "
                              "on the source, or sl_assign_timestamps)");
    } else {
        t = sl_op_now(o);
    }
    if (op->sliced) return process_sliced(op, rec, t);
    if (op->fast) return process_fast(op, rec, t);
    if (op->merging) return process_merging(op, rec, t);
    return process_general(op, rec, t);
}

/* ---- timers ---------------------------------------------------------------- */

static int on_timer(win_op_t *op, sl_time_domain_t d, const sl_timer_t *tm) {
    if (SL_UNLIKELY(tm->nslen != SL_WINDOW_NS_LEN)) return fail_state(op, "timer namespace");
    sl_kb_set_key_hashed(KB(op), tm->key, tm->keylen, tm->keyhash);
    sl_window_t w = sl_window_from_ns(tm->ns), sw = w;
    int64_t time = tm->ts;
    int rc;
    if (op->merging) {
        if ((rc = mws_load(op)) < 0) return rc;
        const sl_mws_entry_t *e = sl_mws_find(&op->mws, &w);
        if (!e) return 0; /* the window merged away or was cleaned up */
        sw = e->state;
    }
    sl_trigger_ctx_t *c = tctx(op, &w);
    sl_trigger_result_t r = d == SL_TIME_EVENT ? sl_trigger_on_event_time(op->trigger, c, time)
                                               : sl_trigger_on_processing_time(op->trigger, c, time);
    if ((rc = act(op, r, &w, &sw)) < 0) return rc;
    if (d == window_domain(op) && time == cleanup_time(op, &w)) {
        /* Flink's clearAllState.  On the fast path (and for sessions with
         * EventTimeTrigger) the trigger has no state and its one timer (at
         * max <= cleanup time) has fired already or is this one: nothing
         * to clear. */
        contents_clear(op, &sw);
        if (!op->fast && !op->session_fast) sl_trigger_clear(op->trigger, tctx(op, &w));
        if (op->merging) sl_mws_retire(&op->mws, &w);
    }
    return op->merging ? mws_persist(op) : 0;
}

static int w_advance_watermark(sl_operator_t *o, int64_t wm) {
    win_op_t *op = (win_op_t *)o;
    if (op->fast && op->event_time) {
        int rc = op->sliced ? panes_advance(op, wm) : buckets_advance(op, wm);
        if (rc < 0) return rc;
    }
    sl_timer_t t;
    while (sl_timers_pop(o->timers, SL_TIME_EVENT, wm, &t)) {
        int rc = on_timer(op, SL_TIME_EVENT, &t);
        if (rc < 0) return rc;
    }
    sl_op_emit_watermark(o, wm);
    return 0;
}

static int w_on_processing_time(sl_operator_t *o, int64_t now) {
    win_op_t *op = (win_op_t *)o;
    op->proc_wakeup = INT64_MAX; /* the task forgot it when it called us */
    sl_timer_t t;
    int rc = 0;
    while (rc >= 0 && sl_timers_pop(o->timers, SL_TIME_PROCESSING, now, &t)) rc = on_timer(op, SL_TIME_PROCESSING, &t);
    int64_t next = sl_timers_peek(o->timers, SL_TIME_PROCESSING);
    if (next != INT64_MAX && next < op->proc_wakeup) {
        op->proc_wakeup = next;
        sl_op_schedule_processing(o, next);
    }
    return rc;
}

/* ---- lifecycle ---------------------------------------------------------------- */

static int rebuild_bucket(void *c, const void *key, uint32_t klen, const void *ns, uint32_t nslen) {
    win_op_t *op = c;
    if (nslen != SL_WINDOW_NS_LEN) return 0;
    sl_window_t w = sl_window_from_ns(ns);
    sl_kb_set_key(KB(op), key, klen);
    bucket_add(op, &w);
    return 0;
}

static int w_open(sl_operator_t *o) {
    win_op_t *op = (win_op_t *)o;
    if (!o->kb || !o->timers) return sl_op_fail(o, SL_EINVAL, "a window operator needs a keyed stream");
    /* state_backend.h: put after get_mut "is a no-op for the heap backend"
     * (values are changed in place); skip that second lookup there. */
    op->put_after_mut = strcmp(o->kb->ops->name, "heap") != 0;
    if (op->late_tag_missing)
        return sl_op_fail(o, SL_EINVAL, "late-data side output '%s' is not declared", op->spec->late_tag);
    /* sliced: another name, so that per-window contents of a checkpoint
     * taken without slicing are never read as panes (and back) */
    sl_state_desc_t d = {.name = op->sliced ? "window-panes" : "window-contents",
                         .kind = op->list_state ? SL_STATE_LIST : SL_STATE_VALUE};
    op->sid_contents = o->kb->ops->register_state(o->kb, &d);
    if (op->sid_contents < 0) return fail_state(op, "registering window-contents");
    for (int i = 0; i < op->ntrigger; i++) {
        char name[32];
        snprintf(name, sizeof name, "window-trigger-%d", i);
        sl_state_desc_t td = {.name = name, .kind = SL_STATE_VALUE};
        op->sid_trigger[i] = o->kb->ops->register_state(o->kb, &td);
        if (op->sid_trigger[i] < 0) return fail_state(op, "registering trigger state");
    }
    if (op->merging) {
        sl_state_desc_t md = {.name = "merging-window-set", .kind = SL_STATE_VALUE};
        op->sid_merge = o->kb->ops->register_state(o->kb, &md);
        if (op->sid_merge < 0) return fail_state(op, "registering merging-window-set");
    }
    op->fired_wm = o->wm; /* restored: the windows up to it have fired */
    /* Restored state: the window buckets are derived from the contents. */
    if (op->fast && op->event_time && o->kb->ops->count(o->kb, op->sid_contents) > 0)
        o->kb->ops->foreach_entry(o->kb, op->sid_contents, rebuild_bucket, op);
    return 0;
}

static void w_destroy(sl_operator_t *o) {
    win_op_t *op = (win_op_t *)o;
    for (int i = 0; i < op->nbuckets; i++) sl_buf_free(&op->buckets[i].keys);
    sl_free(op->buckets);
    sl_free(op->sid_trigger);
    sl_free(op->wins);
    sl_rw_free(&op->rw);
    sl_rw_free(&op->rw2);
    sl_rw_free(&op->rw3);
    sl_buf_free(&op->buf);
    sl_free(op->elems);
    sl_free(op->vals);
    sl_free(op->lens);
    sl_free(op->acc);
    sl_free(op->sacc);
    sl_free(op->seen_h);
    sl_free(op->seen_k);
    sl_free(op->seen_l);
    sl_free(op->seen_order);
    sl_free(op->seen_acc);
    sl_mws_free(&op->mws);
    sl_buf_free(&op->mws_buf);
    sl_collector_free(&op->col);
    sl_op_base_free(o);
    sl_free(op);
}

static const sl_operator_vt_t window_vt = {
    .kind = "Window",
    .open = w_open,
    .process = w_process,
    .process_batch = w_process_batch,
    .advance_watermark = w_advance_watermark,
    .on_processing_time = w_on_processing_time,
    .destroy = w_destroy,
};

static bool schema_fixed(const sl_schema_t *s, uint32_t *len) {
    int n = sl_schema_field_count(s);
    for (int i = 0; i < n; i++) {
        sl_type_t t = sl_schema_field_type(s, i);
        if (t == SL_VARCHAR || t == SL_BYTES) return false;
    }
    *len = sl__row_slot(n, n);
    return true;
}

sl_operator_t *sl_window_op_create(const void *spec_, const sl_op_init_t *init) {
    const sl_window_spec_t *s = spec_;
    win_op_t *op = sl_calloc(1, sizeof *op);
    sl_op_base_init(&op->base, &window_vt, init);
    op->spec = s;
    op->assigner = s->assigner;
    op->trigger = s->trigger;
    op->evictor = s->evictor;
    op->event_time = s->assigner->event_time;
    op->merging = sl_assigner_is_merging(s->assigner);
    op->tumbling = s->assigner->kind == SL_ASSIGNER_TUMBLING;
    op->list_state = s->evictor || s->fn_kind == SL_WINDOW_FN_PROCESS;
    sl_trigger_kind_t def = op->event_time ? SL_TRIGGER_EVENT_TIME : SL_TRIGGER_PROCESSING_TIME;
    op->fast = !op->merging && !op->list_state && s->trigger->kind == def;
    op->session_fast = op->merging && op->event_time && s->trigger->kind == SL_TRIGGER_EVENT_TIME;
    op->lateness = op->event_time ? s->allowed_lateness : 0;
    if (s->late_tag) {
        op->late_tag = sl_tag_lookup(init->tags, s->late_tag);
        if (op->late_tag <= 0) {
            op->late_tag = 0;
            op->late_tag_missing = true;
        }
    }
    op->in_schema = init->in_schema[0];
    op->in_fixed = op->in_schema && schema_fixed(op->in_schema, &op->in_fixed_len);
    op->sid_contents = op->sid_merge = -1;
    op->ntrigger = s->trigger_slots;
    op->sid_trigger = sl_calloc((size_t)(op->ntrigger ? op->ntrigger : 1), sizeof *op->sid_trigger);
    int64_t maxw = sl_assigner_max_windows(s->assigner);
    wins_reserve(op, (int)(maxw < 64 ? maxw : 64));
    sl_rw_init(&op->rw);
    sl_rw_init(&op->rw2);
    sl_rw_init(&op->rw3);
    if (s->fn_kind == SL_WINDOW_FN_AGGREGATE) op->acc = sl_calloc(1, s->agg.acc_size ? s->agg.acc_size : 1);
    if (op->fast && op->event_time && s->assigner->kind == SL_ASSIGNER_SLIDING &&
        s->fn_kind == SL_WINDOW_FN_AGGREGATE && s->agg.merge && s->assigner->slide > 0) {
        int64_t a = s->assigner->size, b = s->assigner->slide;
        while (b) {
            int64_t r = a % b;
            a = b;
            b = r;
        }
        /* merging more than 64 panes per firing costs more than it saves */
        if (a > 0 && s->assigner->size / a <= 64) {
            op->sliced = true;
            op->pane = a;
            op->sacc = sl_calloc(1, s->agg.acc_size ? s->agg.acc_size : 1);
        }
    }
    sl_mws_init(&op->mws);
    sl_collector_init(&op->col, &op->base);
    op->tctx.c.ops = &tctx_ops;
    op->tctx.op = op;
    op->proc_wakeup = INT64_MAX;
    return &op->base;
}

int64_t sl_window_op_pending_timers(const sl_operator_t *o) {
    const win_op_t *op = (const win_op_t *)o;
    int64_t n = sl_timers_count(o->timers, SL_TIME_EVENT) + sl_timers_count(o->timers, SL_TIME_PROCESSING);
    for (int i = 0; i < op->nbuckets; i++) {
        const win_bucket_t *b = &op->buckets[i];
        /* what Flink would hold per key: the trigger timer until it fires,
         * and a separate cleanup timer unless it coincides or is "never" */
        int per = (b->fired ? 0 : 1) +
                  (b->cleanup_ts != INT64_MAX && (b->fired || b->cleanup_ts != b->fire_ts) ? 1 : 0);
        n += b->nkeys * per;
    }
    return n;
}

int64_t sl_window_op_late_dropped(const sl_operator_t *o) {
    return o && o->vt == &window_vt ? ((const win_op_t *)o)->late_dropped : 0;
}

/* ---- the spec ------------------------------------------------------------------ */

sl_window_spec_t *sl_window_spec_new(const sl_window_assigner_t *a, const sl_trigger_t *t, const sl_evictor_t *e,
                                     int64_t allowed_lateness, const char *late_tag) {
    sl_window_spec_t *s = sl_calloc(1, sizeof *s);
    s->assigner = sl_assigner_clone(a);
    s->trigger = t ? sl_trigger_clone(t) : a->event_time ? sl_trigger_event_time() : sl_trigger_processing_time();
    s->evictor = sl_evictor_clone(e);
    s->allowed_lateness = allowed_lateness;
    s->late_tag = sl_strdup(late_tag);
    s->trigger_slots = sl_trigger_assign_slots(s->trigger, 0);
    return s;
}

void sl_window_spec_free(void *p) {
    sl_window_spec_t *s = p;
    if (!s) return;
    sl_assigner_free(s->assigner);
    sl_trigger_free(s->trigger);
    sl_evictor_free(s->evictor);
    sl_free(s->late_tag);
    sl_free(s);
}

/* ---- process-function view of the elements ------------------------------------- */

int sl_window_elements_count(const sl_window_elements_t *e) { return e ? e->n : 0; }

sl_record_t sl_window_elements_get(const sl_window_elements_t *e, int i) {
    sl_record_t r;
    memset(&r, 0, sizeof r);
    r.ts = SL_NO_TIMESTAMP;
    if (!e) return r;
    r.row.schema = e->schema;
    if (i < 0 || i >= e->n) return r;
    r.row.data = e->v[i].data;
    r.row.len = e->v[i].len;
    r.ts = e->v[i].ts;
    return r;
}
