/*
 * process_op.c — KeyedProcessFunction and (Keyed)CoProcessFunction: user
 * callbacks with keyed state, event-time and processing-time timers and
 * side outputs.  Event-time timers fire when the combined input watermark
 * passes them, before the watermark is forwarded (as in Flink).
 */
#include "common/common.h"
#include "operators/basic_ops.h"

typedef struct process_op {
    sl_operator_t base;
    sl_process_spec_t spec;
    const sl_fn_opts_t *opts;
    int (*open_fn)(void *, sl_rt_t *);
    int (*on_timer)(void *, sl_pctx_t *, int64_t, sl_time_domain_t, sl_collector_t *);
    void (*close_fn)(void *);
    void *ctx;
    sl_collector_t col;
    sl_rt_t rt;
    sl_pctx_t pc;
    bool opened;
} process_op_t;

static int p_open(sl_operator_t *o) {
    process_op_t *op = (process_op_t *)o;
    op->opened = true;
    if (sl_opstate_wanted(o, &op->spec.cp)) { /* operator state first (initialize_state) */
        int rc = sl_opstate_attach(o, &op->spec.cp, op->ctx);
        if (rc < 0) return rc;
    }
    if (!op->open_fn) return 0;
    int rc = op->open_fn(op->ctx, &op->rt);
    if (rc < 0) return sl_op_fail(o, rc, "open failed (%s)", sl_strerror(rc));
    return 0;
}

static int p_process(sl_operator_t *o, int input, const sl_record_t *rec) {
    process_op_t *op = (process_op_t *)o;
    if (o->kb) {
        int kg = sl_op_set_key_from(o, input, &rec->row);
        if (kg < 0) return kg;
        op->pc.key = o->kb->key;
        op->pc.keylen = o->kb->keylen;
    }
    op->pc.ts = rec->ts;
    sl_collector_reset(&op->col, rec->ts);
    int rc;
    if (!op->spec.two_inputs)
        rc = op->spec.one.process(op->ctx, &op->pc, rec, &op->col);
    else if (input == 0)
        rc = op->spec.two.process1(op->ctx, &op->pc, rec, &op->col);
    else
        rc = op->spec.two.process2(op->ctx, &op->pc, rec, &op->col);
    if (SL_UNLIKELY(rc < 0)) return sl_op_fail(o, rc, "process function failed (%s)", sl_strerror(rc));
    return 0;
}

static int fire(process_op_t *op, sl_time_domain_t d, int64_t upto) {
    sl_operator_t *o = &op->base;
    sl_timer_t t;
    while (sl_timers_pop(o->timers, d, upto, &t)) {
        sl_kb_set_key_hashed(o->kb, t.key, t.keylen, t.keyhash);
        op->pc.key = o->kb->key;
        op->pc.keylen = o->kb->keylen;
        op->pc.ts = t.ts;
        /* Records emitted from a timer carry the timer's timestamp (event
         * time) or none (processing time), as in Flink. */
        sl_collector_reset(&op->col, d == SL_TIME_EVENT ? t.ts : SL_NO_TIMESTAMP);
        if (op->on_timer) {
            int rc = op->on_timer(op->ctx, &op->pc, t.ts, d, &op->col);
            if (rc < 0) return sl_op_fail(o, rc, "on_timer failed (%s)", sl_strerror(rc));
        }
    }
    return 0;
}

static int p_watermark(sl_operator_t *o, int64_t wm) {
    process_op_t *op = (process_op_t *)o;
    if (o->timers) {
        int rc = fire(op, SL_TIME_EVENT, wm);
        if (rc < 0) return rc;
    }
    sl_op_emit_watermark(o, wm);
    return 0;
}

static int p_proc_time(sl_operator_t *o, int64_t now) {
    process_op_t *op = (process_op_t *)o;
    if (!o->timers) return 0;
    int rc = fire(op, SL_TIME_PROCESSING, now);
    int64_t next = sl_timers_peek(o->timers, SL_TIME_PROCESSING);
    if (next != INT64_MAX) sl_op_schedule_processing(o, next);
    return rc;
}

static void p_close(sl_operator_t *o) {
    process_op_t *op = (process_op_t *)o;
    if (op->opened && op->close_fn) op->close_fn(op->ctx);
    op->opened = false;
}

static void p_destroy(sl_operator_t *o) {
    process_op_t *op = (process_op_t *)o;
    p_close(o);
    sl_opstate_free(o);
    sl_fn_ctx_release(op->opts, op->ctx);
    sl_collector_free(&op->col);
    sl_op_base_free(o);
    sl_free(op);
}

static const sl_operator_vt_t process_vt = {.kind = "Process",
                                            .open = p_open,
                                            .process = p_process,
                                            .advance_watermark = p_watermark,
                                            .on_processing_time = p_proc_time,
                                            .close = p_close,
                                            .destroy = p_destroy,
                                            .snapshot_state = sl_opstate_snapshot};

sl_operator_t *sl_process_op_create(const void *spec, const sl_op_init_t *init) {
    const sl_process_spec_t *s = spec;
    process_op_t *op = sl_calloc(1, sizeof *op);
    op->spec = *s;
    sl_op_base_init(&op->base, &process_vt, init);
    if (s->two_inputs) {
        op->opts = &op->spec.two.opts;
        op->open_fn = op->spec.two.open;
        op->on_timer = op->spec.two.on_timer;
        op->close_fn = op->spec.two.close;
    } else {
        op->opts = &op->spec.one.opts;
        op->open_fn = op->spec.one.open;
        op->on_timer = op->spec.one.on_timer;
        op->close_fn = op->spec.one.close;
    }
    op->ctx = sl_fn_ctx_acquire(op->opts);
    sl_collector_init(&op->col, &op->base);
    op->rt.op = &op->base;
    op->pc.op = &op->base;
    return &op->base;
}
