/*
 * basic_ops.c — map, filter, flat_map and the sink operator.  They are
 * stateless and chain freely: a record passes through them as direct calls
 * with the row bytes untouched until a map writes a new row.
 */
#include "operators/basic_ops.h"

#include "common/common.h"

#include <string.h>

void *sl_fn_ctx_acquire(const sl_fn_opts_t *o) {
    if (o->ctx_clone) return o->ctx_clone(o->ctx);
    if (o->ctx_size && o->ctx) {
        void *c = sl_malloc(o->ctx_size);
        memcpy(c, o->ctx, o->ctx_size);
        return c;
    }
    return o->ctx;
}

void sl_fn_ctx_release(const sl_fn_opts_t *o, void *ctx) {
    if (o->ctx_clone) {
        if (o->ctx_free) o->ctx_free(ctx);
    } else if (o->ctx_size && o->ctx) {
        sl_free(ctx);
    }
}

typedef struct basic_op {
    sl_operator_t base;
    sl_basic_spec_t spec;
    void *ctx;
    sl_row_writer_t w;
    sl_collector_t col;
} basic_op_t;

static int map_process(sl_operator_t *o, int input, const sl_record_t *rec) {
    basic_op_t *op = (basic_op_t *)o;
    sl_rw_begin(&op->w, o->out_schema);
    int rc = ((sl_map_fn)op->spec.fn)(op->ctx, rec, &op->w);
    if (SL_UNLIKELY(rc < 0)) return sl_op_fail(o, rc, "map function failed (%s)", sl_strerror(rc));
    if (SL_UNLIKELY(op->w.err)) return sl_op_fail(o, op->w.err, "map wrote a bad row (%s)", sl_strerror(op->w.err));
    sl_record_t out = {sl_rw_row(&op->w), rec->ts};
    sl_op_emit(o, 0, &out);
    return 0;
}

static int filter_process(sl_operator_t *o, int input, const sl_record_t *rec) {
    basic_op_t *op = (basic_op_t *)o;
    int rc = ((sl_filter_fn)op->spec.fn)(op->ctx, rec);
    if (SL_UNLIKELY(rc < 0)) return sl_op_fail(o, rc, "filter function failed (%s)", sl_strerror(rc));
    if (rc) sl_op_emit(o, 0, rec);
    return 0;
}

static int flat_map_process(sl_operator_t *o, int input, const sl_record_t *rec) {
    basic_op_t *op = (basic_op_t *)o;
    sl_collector_reset(&op->col, rec->ts);
    int rc = ((sl_flat_map_fn)op->spec.fn)(op->ctx, rec, &op->col);
    if (SL_UNLIKELY(rc < 0)) return sl_op_fail(o, rc, "flat_map function failed (%s)", sl_strerror(rc));
    return 0;
}

/* Operator state (operator_state.c): only when the function has it. */
static int basic_open(sl_operator_t *o) {
    basic_op_t *op = (basic_op_t *)o;
    return sl_opstate_wanted(o, &op->spec.cp) ? sl_opstate_attach(o, &op->spec.cp, op->ctx) : 0;
}

static void basic_destroy(sl_operator_t *o) {
    basic_op_t *op = (basic_op_t *)o;
    sl_opstate_free(o);
    sl_fn_ctx_release(&op->spec.opts, op->ctx);
    sl_rw_free(&op->w);
    sl_collector_free(&op->col);
    sl_op_base_free(o);
    sl_free(op);
}

static const sl_operator_vt_t map_vt = {.kind = "Map",
                                        .open = basic_open,
                                        .process = map_process,
                                        .destroy = basic_destroy,
                                        .snapshot_state = sl_opstate_snapshot};
static const sl_operator_vt_t filter_vt = {.kind = "Filter",
                                           .open = basic_open,
                                           .process = filter_process,
                                           .destroy = basic_destroy,
                                           .snapshot_state = sl_opstate_snapshot};
static const sl_operator_vt_t flat_map_vt = {.kind = "FlatMap",
                                             .open = basic_open,
                                             .process = flat_map_process,
                                             .destroy = basic_destroy,
                                             .snapshot_state = sl_opstate_snapshot};

sl_operator_t *sl_basic_op_create(const void *spec, const sl_op_init_t *init) {
    const sl_basic_spec_t *s = spec;
    basic_op_t *op = sl_calloc(1, sizeof *op);
    op->spec = *s;
    const sl_operator_vt_t *vt = s->kind == SL_BASIC_MAP ? &map_vt : s->kind == SL_BASIC_FILTER ? &filter_vt : &flat_map_vt;
    sl_op_base_init(&op->base, vt, init);
    op->ctx = sl_fn_ctx_acquire(&op->spec.opts);
    sl_rw_init(&op->w);
    sl_collector_init(&op->col, &op->base);
    return &op->base;
}

/* ---- sink ---- */

typedef struct sink_op {
    sl_operator_t base;
    sl_sink_t sink;
    void *writer;
    bool finish_deferred; /* end of input under checkpointing: finish after the final checkpoint */
} sink_op_t;

static int sink_open(sl_operator_t *o) {
    sink_op_t *op = (sink_op_t *)o;
    char err[512] = "";
    int rc = op->sink.ops->open(op->sink.ctx, o->subtask, o->parallelism, o->in_schema[0], &op->writer, err, sizeof err);
    if (rc < 0) return sl_op_fail(o, rc, "cannot open sink: %s", err[0] ? err : sl_strerror(rc));
    if (o->restored_state) {
        if (!op->sink.ops->restore)
            return sl_op_fail(o, SL_EINVAL, "the checkpoint has state for this sink, but sink '%s' cannot restore",
                              op->sink.ops->name ? op->sink.ops->name : "?");
        rc = op->sink.ops->restore(op->writer, o->restored_state, o->restored_len, err, sizeof err);
        if (rc < 0) return sl_op_fail(o, rc, "cannot restore the sink's state: %s", err);
    }
    return 0;
}

static int sink_process(sl_operator_t *o, int input, const sl_record_t *rec) {
    sink_op_t *op = (sink_op_t *)o;
    char err[512];
    int rc = op->sink.ops->write(op->writer, rec, err, sizeof err);
    if (SL_UNLIKELY(rc < 0)) return sl_op_fail(o, rc, "%s", err);
    return 0;
}

static int sink_finish(sink_op_t *op) {
    char err[512] = "";
    if (!op->sink.ops->finish) return 0;
    int rc = op->sink.ops->finish(op->writer, err, sizeof err);
    if (rc < 0) return sl_op_fail(&op->base, rc, "%s", err[0] ? err : sl_strerror(rc));
    return 0;
}

/* End of input.  A two-phase-commit sink of a checkpointing job does not
 * commit here: what it wrote since its last pre-commit goes into the final
 * checkpoint's transaction, committed when that checkpoint completes
 * (FLIP-147), so a crash after the end of input repeats nothing. */
static int sink_end(sl_operator_t *o, int input) {
    sink_op_t *op = (sink_op_t *)o;
    if (o->final_checkpoint && op->sink.ops->pre_commit) {
        op->finish_deferred = true;
        return 0;
    }
    return sink_finish(op);
}

/* Every transaction was committed by the final checkpoint: finish has
 * nothing left to commit, and flushes what a sink keeps besides. */
static int sink_after_final(sl_operator_t *o) {
    sink_op_t *op = (sink_op_t *)o;
    if (!op->finish_deferred) return 0;
    op->finish_deferred = false;
    return sink_finish(op);
}

static void sink_close(sl_operator_t *o) {
    sink_op_t *op = (sink_op_t *)o;
    if (op->writer && op->sink.ops->close) op->sink.ops->close(op->writer);
    op->writer = NULL;
}

static void sink_destroy(sl_operator_t *o) {
    sink_close(o);
    sl_op_base_free(o);
    sl_free(o);
}

static int sink_watermark(sl_operator_t *o, int64_t wm) { return 0; }

static void sink_buf_put(void *ctx, const void *p, size_t n) { sl_buf_append(ctx, p, n); }

/* Checkpoint barrier: phase one of the sink's two-phase commit. */
static int sink_snapshot(sl_operator_t *o, int64_t id, sl_buf_t *out) {
    sink_op_t *op = (sink_op_t *)o;
    if (!op->writer) return 0;
    char err[512] = "";
    int rc = 0;
    if (op->sink.ops->pre_commit) rc = op->sink.ops->pre_commit(op->writer, id, err, sizeof err);
    if (rc < 0) return sl_op_fail(o, rc, "pre-commit of checkpoint %lld: %s", (long long)id, err);
    /* Sinks whose transactions are named by checkpoint need no state: their
     * recover commits what the restored checkpoint covers.  Others keep in
     * the checkpoint what they must re-send (snapshot). */
    if (op->sink.ops->snapshot) {
        rc = op->sink.ops->snapshot(op->writer, id, sink_buf_put, out);
        if (rc < 0) return sl_op_fail(o, rc, "snapshot of the sink in checkpoint %lld failed", (long long)id);
    }
    return 0;
}

/* Checkpoint complete: phase two. */
static int sink_notify(sl_operator_t *o, int64_t id) {
    sink_op_t *op = (sink_op_t *)o;
    if (!op->sink.ops->commit || !op->writer) return 0;
    char err[512] = "";
    int rc = op->sink.ops->commit(op->writer, id, err, sizeof err);
    if (rc < 0) return sl_op_fail(o, rc, "commit of checkpoint %lld: %s", (long long)id, err);
    return 0;
}

static const sl_operator_vt_t sink_vt = {.kind = "Sink",
                                         .open = sink_open,
                                         .process = sink_process,
                                         .advance_watermark = sink_watermark,
                                         .end_input = sink_end,
                                         .close = sink_close,
                                         .destroy = sink_destroy,
                                         .snapshot_state = sink_snapshot,
                                         .notify_checkpoint_complete = sink_notify,
                                         .after_final_checkpoint = sink_after_final};

sl_operator_t *sl_sink_op_create(const void *spec, const sl_op_init_t *init) {
    const sl_sink_spec_t *s = spec;
    sink_op_t *op = sl_calloc(1, sizeof *op);
    op->sink = s->sink;
    sl_op_base_init(&op->base, &sink_vt, init);
    return &op->base;
}

void sl_sink_spec_free(void *spec) {
    sl_sink_spec_t *s = spec;
    if (s->sink.ops->destroy) s->sink.ops->destroy(s->sink.ctx);
    sl_free(s);
}
