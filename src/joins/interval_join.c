/*
 * interval_join.c — the interval join of two keyed streams (Flink's
 * KeyedStream.intervalJoin(..).between(lower, upper), IntervalJoinOperator).
 *
 * A right row r joins a left row l of the same key when
 *     l.ts + lower <= r.ts <= l.ts + upper
 * (an exclusive bound is moved inwards by 1 ms).  Each side's rows wait in
 * a keyed list state whose namespace is the timestamp (8 bytes): one list
 * (bucket) of rows per (key, timestamp), so adding a row is an append,
 * whatever the number of rows of that key and timestamp (a hot key at a
 * high event rate puts hundreds into one bucket).  Next to each buffer, a
 * keyed value state holds the sorted
 * timestamps of its buckets (the bucket index), so that a row finds the
 * other side's buckets within its relative bounds (left: [lower, upper],
 * right: [-upper, -lower]) by a binary search and reads only those — Flink
 * scans every bucket of the key, which on RocksDB also steps over the
 * tombstones of the buckets cleaned up before.  A new row first goes into
 * its own side's buffer, then is joined with those buckets.
 *
 * Cleanup (Flink's rule): a row of timestamp t with relative upper bound
 * u can only meet rows of the other side up to t + u; once the watermark
 * passes that, it is removed by an event-time timer.  Flink fires the
 * timer at t + max(u, 0), i.e. when the watermark *reaches* t + u, and
 * then loses the pair with a row of timestamp exactly t + u that arrives
 * with the watermark at t + u — not late, since lateness is ts < wm.  We
 * fire at t + max(u, 0) + 1 instead, which keeps every pair of non-late
 * rows: the result is exactly "all pairs of non-late rows within the
 * bounds" whatever the interleaving of the two inputs.
 *
 * Late rows (ts < the join's watermark on arrival) are dropped as in Flink,
 * or go to the side outputs given with sl_interval_join_late_outputs.
 * The output timestamp is max(l.ts, r.ts).
 *
 * This file is the running join (a keyed co-process function); its builder
 * (sl_interval_join ...) is api/join_api.c.
 */
#include <stdio.h>
#include <string.h>

#include "common/common.h"
#include "joins/join_int.h"
#include "operators/basic_ops.h"
#include "operators/operator.h"

typedef sl_interval_join_spec_t ij_spec_t;

/* One subtask's join (the co-process function's context). */
typedef struct ij_inst {
    const ij_spec_t *spec;
    void *uctx;
    sl_state_t *buf[2]; /* 0 left, 1 right: list of rows, namespace = ts */
    sl_state_t *idx[2]; /* sorted int64 timestamps of buf's buckets */
    sl_buf_t scratch;
    int err;
    int64_t late[2];
} ij_inst_t;

static int64_t sat_add(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/* Relative bounds of a row of side `side` against the other side. */
static void rel_bounds(const ij_spec_t *s, int side, int64_t *lo, int64_t *hi) {
    *lo = side == 0 ? s->lower : -s->upper;
    *hi = side == 0 ? s->upper : -s->lower;
}

/* The timer that removes a row of timestamp ts of side `side`, and back. */
static int64_t cleanup_offset(const ij_spec_t *s, int side) {
    int64_t lo, hi;
    rel_bounds(s, side, &lo, &hi);
    return (hi > 0 ? hi : 0) + 1;
}

static void *ij_clone(const void *ctx) {
    const ij_spec_t *s = ctx;
    ij_inst_t *in = sl_calloc(1, sizeof *in);
    in->spec = s;
    in->uctx = sl_fn_ctx_acquire(&s->fn.opts);
    return in;
}

static void ij_free(void *ctx) {
    ij_inst_t *in = ctx;
    sl_fn_ctx_release(&in->spec->fn.opts, in->uctx);
    sl_buf_free(&in->scratch);
    sl_free(in);
}

static int ij_open(void *ctx, sl_rt_t *rt) {
    ij_inst_t *in = ctx;
    in->buf[0] = sl_state_list(rt, "interval-join-left-rows");
    in->buf[1] = sl_state_list(rt, "interval-join-right-rows");
    in->idx[0] = sl_state_value(rt, "interval-join-left-index");
    in->idx[1] = sl_state_value(rt, "interval-join-right-index");
    if (!in->buf[0] || !in->buf[1] || !in->idx[0] || !in->idx[1]) return SL_EINVAL;
    if (in->spec->fn.open) return in->spec->fn.open(in->uctx, rt);
    return 0;
}

static void ij_close(void *ctx) {
    ij_inst_t *in = ctx;
    if (sl_join_test_state_enabled()) {
        int64_t n = 0;
        for (int i = 0; i < 2; i++) n += sl_join_state_entries(in->buf[i]) + sl_join_state_entries(in->idx[i]);
        sl_join_test_state_add(n);
    }
    if (in->spec->fn.close) in->spec->fn.close(in->uctx);
}

typedef struct ij_probe {
    ij_inst_t *in;
    int side;
    const sl_record_t *rec;
    int64_t lo, hi; /* absolute timestamps the other side's buckets must fall in */
    const uint8_t *key;
    uint32_t keylen;
    sl_collector_t *out;
    const sl_schema_t *other_schema;
    int64_t ts; /* the bucket being probed */
} ij_probe_t;

/* One row of a bucket of the other side (timestamp p->ts): join it with
 * ours.  Returns non-zero to stop (the join function failed). */
static int probe_row(void *c, const void *v, uint32_t n) {
    ij_probe_t *p = c;
    sl_record_t other = {{v, n, p->other_schema}, p->ts};
    const sl_record_t *l = p->side == 0 ? p->rec : &other, *r = p->side == 0 ? &other : p->rec;
    sl_collector_reset(p->out, l->ts > r->ts ? l->ts : r->ts);
    int rc = p->in->spec->fn.join(p->in->uctx, p->key, p->keylen, l, r, p->out);
    if (rc < 0) {
        p->in->err = rc;
        return 1;
    }
    return 0;
}

/* The first position in the sorted index v[0..n) whose value is >= ts. */
static uint32_t idx_lower(const uint8_t *v, uint32_t n, int64_t ts) {
    uint32_t lo = 0, hi = n;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int64_t x;
        memcpy(&x, v + 8u * mid, 8);
        if (x < ts)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

/* Whether the current key's index of `side` holds ts. */
static bool idx_has(ij_inst_t *in, int side, int64_t ts) {
    uint32_t len = 0;
    const uint8_t *v = sl_value_get(in->idx[side], &len);
    if (!v) return false;
    uint32_t n = len / 8, at = idx_lower(v, n, ts);
    int64_t x = 0;
    if (at < n) memcpy(&x, v + 8u * at, 8);
    return at < n && x == ts;
}

/* Adds (add) or removes ts in the current key's index of `side`. */
static int idx_update(ij_inst_t *in, int side, int64_t ts, bool add) {
    uint32_t len = 0;
    const uint8_t *v = sl_value_get(in->idx[side], &len);
    uint32_t n = v ? len / 8 : 0, at = v ? idx_lower(v, n, ts) : 0;
    bool present = false;
    if (at < n) {
        int64_t x;
        memcpy(&x, v + 8u * at, 8);
        present = x == ts;
    }
    if (present == add) return 0;
    if (!add && n == 1) {
        sl_state_clear(in->idx[side]);
        return 0;
    }
    in->scratch.len = 0;
    if (at) sl_buf_append(&in->scratch, v, 8u * at);
    if (add) sl_buf_append(&in->scratch, &ts, 8);
    uint32_t rest = add ? at : at + 1;
    if (rest < n) sl_buf_append(&in->scratch, v + 8u * rest, 8u * (n - rest));
    return sl_value_put(in->idx[side], in->scratch.p, (uint32_t)in->scratch.len);
}

static int ij_process(ij_inst_t *in, int side, sl_pctx_t *pc, const sl_record_t *rec, sl_collector_t *out) {
    const ij_spec_t *s = in->spec;
    sl_operator_t *op = pc->op;
    int64_t ts = rec->ts;
    if (ts == SL_NO_TIMESTAMP)
        return sl_op_fail(op, SL_EINVAL,
                          "%s: a %s row has no timestamp (an interval join needs event time: give the source a "
                          "watermark strategy or use sl_assign_timestamps)",
                          s->name, side == 0 ? "left" : "right");
    int64_t wm = sl_pctx_watermark(pc);
    if (wm != SL_MIN_WATERMARK && ts < wm) { /* late: Flink's isLate */
        in->late[side]++;
        if (s->late_tag[side]) {
            sl_row_writer_t *w = sl_side_row(out, s->late_tag[side]);
            sl_rw_copy_row(w, &rec->row);
            sl_emit_side(out, s->late_tag[side]);
        }
        return 0;
    }
    /* into our buffer: append to the bucket of ts (and index it if new) */
    sl_keyed_backend_t *kb = op->kb;
    uint8_t k[8];
    memcpy(k, &ts, 8);
    int rc = kb->ops->list_add(kb, in->buf[side]->sid, k, 8, rec->row.data, rec->row.len);
    if (rc < 0) return sl_op_fail(op, rc, "%s: cannot buffer a row (%s)", s->name, sl_strerror(rc));
    if ((rc = idx_update(in, side, ts, true)) < 0) return rc;
    /* join with the other side's buckets within the bounds */
    int64_t lo, hi;
    rel_bounds(s, side, &lo, &hi);
    ij_probe_t p = {.in = in, .side = side, .rec = rec, .lo = sat_add(ts, lo), .hi = sat_add(ts, hi), .out = out,
                    .other_schema = op->in_schema[1 - side]};
    p.key = sl_pctx_key(pc, &p.keylen);
    in->err = 0;
    uint32_t ilen = 0;
    const uint8_t *iv = sl_value_get(in->idx[1 - side], &ilen);
    for (uint32_t i = iv ? idx_lower(iv, ilen / 8, p.lo) : 0; iv && i < ilen / 8 && !in->err; i++) {
        int64_t t;
        memcpy(&t, iv + 8u * i, 8);
        if (t > p.hi) break;
        p.ts = t;
        kb->ops->list_foreach(kb, in->buf[1 - side]->sid, iv + 8u * i, 8, probe_row, &p);
    }
    if (in->err) return in->err;
    sl_timer_event(pc, sat_add(ts, cleanup_offset(s, side)));
    return 0;
}

static int ij_left(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    return ij_process(ctx, 0, pc, in, out);
}

static int ij_right(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    return ij_process(ctx, 1, pc, in, out);
}

/* A cleanup timer at t removes the left bucket t - offset(left) and the
 * right bucket t - offset(right): exactly the buckets whose timers are at t
 * (removing one that is absent does nothing). */
static int ij_timer(void *ctx, sl_pctx_t *pc, int64_t t, sl_time_domain_t d, sl_collector_t *out) {
    ij_inst_t *in = ctx;
    if (d != SL_TIME_EVENT) return 0;
    sl_keyed_backend_t *kb = pc->op->kb;
    for (int side = 0; side < 2; side++) {
        int64_t ts = sat_add(t, -cleanup_offset(in->spec, side));
        if (!idx_has(in, side, ts)) continue; /* no bucket: no tombstone either */
        uint8_t k[8];
        memcpy(k, &ts, 8);
        int rc = kb->ops->remove(kb, in->buf[side]->sid, k, 8);
        if (rc < 0 || (rc = idx_update(in, side, ts, false)) < 0) return rc;
    }
    return 0;
}

/* ---- what the builder (api/join_api.c) uses ---- */

void sl_interval_join_spec_free(void *p) {
    ij_spec_t *s = p;
    sl_free(s->late_tag[0]);
    sl_free(s->late_tag[1]);
    sl_free(s);
}

sl_co_process_fn_t sl_interval_join_fn(sl_interval_join_spec_t *s) {
    sl_co_process_fn_t co = {.open = ij_open,
                             .process1 = ij_left,
                             .process2 = ij_right,
                             .on_timer = ij_timer,
                             .close = ij_close};
    co.opts.ctx = s;
    co.opts.ctx_clone = ij_clone;
    co.opts.ctx_free = ij_free;
    return co;
}
