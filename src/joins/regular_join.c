/*
 * regular_join.c — the regular (unbounded) inner join of two keyed streams
 * (Flink SQL's StreamingJoinOperator for an inner join of append-only
 * inputs): every left row joins every right row of the same key, whichever
 * arrives first.
 *
 * Each side's rows are a keyed list state (element: i64 timestamp + row
 * bytes).  A new row is appended to its side's list and joined with every
 * element of the other side's list.  The output timestamp is the arriving
 * row's (the later of the pair).  Without a TTL the state grows with the
 * input, as in Flink SQL; with sl_regular_join_ttl each element expires
 * ttl_ms (processing time) after it was written and joins nothing after
 * that (the existing state TTL: never returned once expired, cleaned up
 * incrementally and left out of checkpoints).
 *
 * This file is the running join (a keyed co-process function); its builder
 * (sl_regular_join ...) is api/join_api.c.
 */
#include <string.h>

#include "common/common.h"
#include "joins/join_int.h"
#include "operators/basic_ops.h"
#include "operators/operator.h"

typedef sl_regular_join_spec_t rj_spec_t;

typedef struct rj_inst {
    const rj_spec_t *spec;
    void *uctx;
    sl_state_t *rows[2];
    sl_buf_t scratch;
    int err;
} rj_inst_t;

static void *rj_clone(const void *ctx) {
    const rj_spec_t *s = ctx;
    rj_inst_t *in = sl_calloc(1, sizeof *in);
    in->spec = s;
    in->uctx = sl_fn_ctx_acquire(&s->fn.opts);
    return in;
}

static void rj_free(void *ctx) {
    rj_inst_t *in = ctx;
    sl_fn_ctx_release(&in->spec->fn.opts, in->uctx);
    sl_buf_free(&in->scratch);
    sl_free(in);
}

static int rj_open(void *ctx, sl_rt_t *rt) {
    rj_inst_t *in = ctx;
    static const char *names[2] = {"regular-join-left", "regular-join-right"};
    for (int i = 0; i < 2; i++)
        in->rows[i] = in->spec->has_ttl ? sl_state_list_ttl(rt, names[i], in->spec->ttl) : sl_state_list(rt, names[i]);
    if (!in->rows[0] || !in->rows[1]) return SL_EINVAL;
    if (in->spec->fn.open) return in->spec->fn.open(in->uctx, rt);
    return 0;
}

static void rj_close(void *ctx) {
    rj_inst_t *in = ctx;
    if (sl_join_test_state_enabled())
        sl_join_test_state_add(sl_join_state_entries(in->rows[0]) + sl_join_state_entries(in->rows[1]));
    if (in->spec->fn.close) in->spec->fn.close(in->uctx);
}

typedef struct rj_probe {
    rj_inst_t *in;
    int side;
    const sl_record_t *rec;
    const uint8_t *key;
    uint32_t keylen;
    sl_collector_t *out;
    const sl_schema_t *other_schema;
} rj_probe_t;

static void probe_one(void *c, const void *v, uint32_t len) {
    rj_probe_t *p = c;
    if (p->in->err || len < 8) return;
    sl_record_t other;
    memcpy(&other.ts, v, 8);
    other.row = (sl_row_t){(const uint8_t *)v + 8, len - 8, p->other_schema};
    const sl_record_t *l = p->side == 0 ? p->rec : &other, *r = p->side == 0 ? &other : p->rec;
    sl_collector_reset(p->out, p->rec->ts);
    int rc = p->in->spec->fn.join(p->in->uctx, p->key, p->keylen, l, r, p->out);
    if (rc < 0) p->in->err = rc;
}

static int rj_process(rj_inst_t *in, int side, sl_pctx_t *pc, const sl_record_t *rec, sl_collector_t *out) {
    in->scratch.len = 0;
    sl_buf_append(&in->scratch, &rec->ts, 8);
    sl_buf_append(&in->scratch, rec->row.data, rec->row.len);
    int rc = sl_list_add(in->rows[side], in->scratch.p, (uint32_t)in->scratch.len);
    if (rc < 0) return rc;
    rj_probe_t p = {.in = in, .side = side, .rec = rec, .out = out, .other_schema = pc->op->in_schema[1 - side]};
    p.key = sl_pctx_key(pc, &p.keylen);
    in->err = 0;
    sl_list_foreach(in->rows[1 - side], probe_one, &p);
    return in->err;
}

static int rj_left(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    return rj_process(ctx, 0, pc, in, out);
}

static int rj_right(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    return rj_process(ctx, 1, pc, in, out);
}

/* ---- what the builder (api/join_api.c) uses ---- */

sl_co_process_fn_t sl_regular_join_fn(sl_regular_join_spec_t *s) {
    sl_co_process_fn_t co = {.open = rj_open, .process1 = rj_left, .process2 = rj_right, .close = rj_close};
    co.opts.ctx = s;
    co.opts.ctx_clone = rj_clone;
    co.opts.ctx_free = rj_free;
    return co;
}
