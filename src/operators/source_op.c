/*
 * source_op.c — sources and event time.
 *
 * The source operator polls its reader and pushes each row down the chain.
 * Per split it keeps a watermark generator (bounded out-of-orderness B:
 * max_ts - B - 1; monotonous: B = 0) and idleness; the source's watermark is
 * the minimum over active splits, emitted every auto-watermark-interval of
 * processing time (or after every record when the interval is 0), never
 * backwards; also after each polled batch when it advanced (Flink allows
 * emitting more often than the interval).  A split with no records for idle_timeout is idle and left out;
 * its next record makes it active again at once.  When every split is idle
 * the source declares itself idle downstream.  At the end of a bounded
 * reader the source emits the maximum watermark.
 */
#include "operators/source_op.h"

#include "common/common.h"

sl_watermark_strategy_t sl_wm_none(void) {
    sl_watermark_strategy_t w;
    memset(&w, 0, sizeof w);
    w.kind = SL_WM_NONE;
    return w;
}

sl_watermark_strategy_t sl_wm_bounded(const char *ts_field, int64_t bound) {
    sl_watermark_strategy_t w = sl_wm_none();
    w.kind = SL_WM_BOUNDED;
    w.timestamp_field = ts_field;
    w.max_out_of_orderness_ms = bound;
    return w;
}

sl_watermark_strategy_t sl_wm_monotonous(const char *ts_field) {
    sl_watermark_strategy_t w = sl_wm_bounded(ts_field, 0);
    w.kind = SL_WM_MONOTONOUS;
    return w;
}

/* ---- shared: timestamp assignment and generation ---- */

typedef struct wm_spec {
    const sl_source_t *src;     /* sources only: the connector (job code, owned by the builder) */
    sl_watermark_strategy_t ws;
    int ts_field;               /* -1: none */
} wm_spec_t;

static void spec_init(wm_spec_t *s, const sl_schema_t *schema, sl_watermark_strategy_t ws) {
    s->ws = ws;
    s->ts_field = ws.timestamp_field ? sl_schema_index(schema, ws.timestamp_field) : -1;
    s->ws.timestamp_field = NULL; /* the caller's string need not outlive the builder */
    if (ws.kind == SL_WM_MONOTONOUS) s->ws.max_out_of_orderness_ms = 0;
}

static inline int64_t assign_ts(const wm_spec_t *s, const sl_row_t *row, int64_t given) {
    if (s->ts_field >= 0) return sl_row_is_null(row, s->ts_field) ? given : sl_row_i64(row, s->ts_field);
    if (s->ws.timestamp_fn) return s->ws.timestamp_fn(s->ws.timestamp_ctx, row);
    return given;
}

typedef struct split_gen {
    int64_t max_ts;
    int64_t last_active;
    bool had_data;
    bool idle;
    bool finished;
} split_gen_t;

static inline int64_t gen_wm(const wm_spec_t *s, const split_gen_t *g) {
    if (g->max_ts == INT64_MIN) return SL_MIN_WATERMARK;
    return g->max_ts - s->ws.max_out_of_orderness_ms - 1;
}

/* ---- source operator ---- */

struct sl_source_output {
    struct source_op *op;       /* NULL in test capture mode */
    sl_row_writer_t w;
    /* capture mode */
    const sl_schema_t *schema;
    sl_buf_t rows;
    int64_t *offs;
    int64_t *ts;
    int *splits;
    int64_t n, cap;
    bool finished[256];
    int64_t skipped;
    int64_t idle_until_ns; /* set by sl_src_idle_until during a poll, else 0 */
};

typedef struct source_op {
    sl_operator_t base;
    const wm_spec_t *spec;
    void *reader;
    int nsplits;
    split_gen_t *splits;
    sl_source_output_t out;
    int64_t interval;
    int64_t next_tick;
    int64_t emitted_wm;
    bool out_idle;
    bool ended;
    sl_buf_t restored_time; /* restore_time's copy, applied in open */
} source_op_t;

void *sl_source_spec_new(const sl_source_t *src, sl_watermark_strategy_t ws) {
    wm_spec_t *s = sl_calloc(1, sizeof *s);
    spec_init(s, src->schema, ws);
    s->src = src;
    return s;
}

void sl_source_spec_free(void *spec) { sl_free(spec); }

static void emit_status(source_op_t *op, bool idle) {
    if (op->out_idle == idle) return;
    op->out_idle = idle;
    op->base.out->status(op->base.out, idle);
}

/* Recomputes the combined watermark; emits it if it advanced. */
static void combine_and_emit(source_op_t *op) {
    if (op->spec->ws.kind == SL_WM_NONE) return;
    bool any_active = false, any_open = false;
    int64_t m = SL_MAX_WATERMARK;
    for (int i = 0; i < op->nsplits; i++) {
        split_gen_t *g = &op->splits[i];
        if (g->finished) continue;
        any_open = true;
        if (g->idle) continue;
        any_active = true;
        int64_t w = gen_wm(op->spec, g);
        if (w < m) m = w;
    }
    if (!any_open) return; /* all finished: the end emits the maximum */
    if (!any_active) {
        emit_status(op, true);
        return;
    }
    if (m > op->emitted_wm) {
        emit_status(op, false);
        op->emitted_wm = m;
        sl_op_emit_watermark(&op->base, m);
    }
}

static void tick(source_op_t *op, int64_t now) {
    int64_t timeout = op->spec->ws.idle_timeout_ms;
    for (int i = 0; i < op->nsplits; i++) {
        split_gen_t *g = &op->splits[i];
        if (g->had_data) {
            g->had_data = false;
            g->last_active = now;
        } else if (timeout > 0 && !g->finished && !g->idle && now - g->last_active >= timeout) {
            g->idle = true;
        }
    }
    combine_and_emit(op);
}

sl_row_writer_t *sl_src_row(sl_source_output_t *out) {
    sl_rw_begin(&out->w, out->op ? out->op->base.out_schema : out->schema);
    return &out->w;
}

static void capture(sl_source_output_t *o, int split, int64_t ts) {
    if (o->n == o->cap) {
        o->cap = o->cap ? o->cap * 2 : 64;
        o->offs = sl_realloc(o->offs, (size_t)o->cap * sizeof *o->offs);
        o->ts = sl_realloc(o->ts, (size_t)o->cap * sizeof *o->ts);
        o->splits = sl_realloc(o->splits, (size_t)o->cap * sizeof *o->splits);
    }
    o->offs[o->n] = (int64_t)o->rows.len;
    o->ts[o->n] = ts;
    o->splits[o->n] = split;
    o->n++;
    sl_buf_append(&o->rows, o->w.buf, o->w.len);
}

void sl_src_emit(sl_source_output_t *out, int split, int64_t ts) {
    source_op_t *op = out->op;
    if (!op) {
        capture(out, split, ts);
        return;
    }
    if (SL_UNLIKELY(out->w.err)) {
        sl_op_fail(&op->base, out->w.err, "source wrote a bad row (%s)", sl_strerror(out->w.err));
        return;
    }
    sl_record_t rec = {sl_rw_row(&out->w), ts};
    const wm_spec_t *s = op->spec;
    if (s->ws.kind != SL_WM_NONE) {
        rec.ts = assign_ts(s, &rec.row, ts);
        if (SL_UNLIKELY(split < 0 || split >= op->nsplits)) {
            sl_op_fail(&op->base, SL_EINVAL, "source emitted for split %d of %d", split, op->nsplits);
            return;
        }
        split_gen_t *g = &op->splits[split];
        if (rec.ts > g->max_ts) g->max_ts = rec.ts;
        g->had_data = true;
        if (SL_UNLIKELY(g->idle)) {
            g->idle = false;
            g->last_active = sl_op_now(&op->base);
            emit_status(op, false);
        }
    }
    sl_op_emit(&op->base, 0, &rec);
    if (op->interval == 0 && s->ws.kind != SL_WM_NONE) {
        if (s->ws.idle_timeout_ms > 0)
            tick(op, sl_op_now(&op->base));
        else
            combine_and_emit(op);
    }
}

void sl_src_split_finished(sl_source_output_t *out, int split) {
    if (!out->op) {
        if (split >= 0 && split < 256) out->finished[split] = true;
        return;
    }
    if (split >= 0 && split < out->op->nsplits) out->op->splits[split].finished = true;
}

int sl_src_add_split(sl_source_output_t *out) {
    if (!out->op) return -1; /* capture mode keeps no split table */
    source_op_t *op = out->op;
    op->splits = sl_realloc(op->splits, (size_t)(op->nsplits + 1) * sizeof *op->splits);
    split_gen_t *g = &op->splits[op->nsplits];
    memset(g, 0, sizeof *g);
    g->max_ts = INT64_MIN;
    g->last_active = sl_op_now(&op->base);
    return op->nsplits++;
}

void sl_src_idle_until(sl_source_output_t *out, int64_t mono_ns) { out->idle_until_ns = mono_ns; }

void sl_src_count_skipped(sl_source_output_t *out, int64_t n) {
    if (out->op)
        out->op->base.records_skipped += n;
    else
        out->skipped += n;
}

/* Event-time state: the emitted watermark and status, the tick schedule
 * and each split's generator (times relative to processing time now):
 *   i64 emitted_wm, u8 out_idle, i64 next_tick - now (or INT64_MAX),
 *   u32 nsplits, per split: i64 max_ts, i64 now - last_active,
 *   u8 had_data | idle << 1 | finished << 2 */
static void src_snapshot_time(sl_operator_t *o, sl_buf_t *out) {
    source_op_t *op = (source_op_t *)o;
    int64_t now = sl_op_now(o);
    uint8_t b[21];
    sl_st64(b, (uint64_t)op->emitted_wm);
    b[8] = op->out_idle;
    sl_st64(b + 9, (uint64_t)(op->next_tick == INT64_MAX ? INT64_MAX : op->next_tick - now));
    sl_st32(b + 17, (uint32_t)op->nsplits);
    sl_buf_append(out, b, sizeof b);
    for (int i = 0; i < op->nsplits; i++) {
        uint8_t s[17];
        sl_st64(s, (uint64_t)op->splits[i].max_ts);
        sl_st64(s + 8, (uint64_t)(now - op->splits[i].last_active));
        s[16] = (uint8_t)(op->splits[i].had_data | op->splits[i].idle << 1 | op->splits[i].finished << 2);
        sl_buf_append(out, s, sizeof s);
    }
}

static void src_restore_time(sl_operator_t *o, const uint8_t *p, size_t n) {
    source_op_t *op = (source_op_t *)o;
    op->restored_time.len = 0;
    sl_buf_append(&op->restored_time, p, n);
}

/* After open made the splits: the restored generators, when the reader has
 * the same splits as before (anything else starts afresh). */
static void apply_restored_time(source_op_t *op, int64_t now) {
    const uint8_t *p = op->restored_time.p;
    size_t n = op->restored_time.len;
    if (n < 21) return;
    uint32_t ns = sl_ld32(p + 17);
    if ((int)ns != op->nsplits || n != 21 + (size_t)ns * 17) return;
    op->emitted_wm = (int64_t)sl_ld64(p);
    if (p[8]) emit_status(op, true); /* downstream starts with every channel active: say it again */
    int64_t nt = (int64_t)sl_ld64(p + 9);
    if (op->next_tick != INT64_MAX && nt != INT64_MAX) op->next_tick = now + nt;
    for (uint32_t i = 0; i < ns; i++) {
        const uint8_t *s = p + 21 + (size_t)i * 17;
        op->splits[i].max_ts = (int64_t)sl_ld64(s);
        op->splits[i].last_active = now - (int64_t)sl_ld64(s + 8);
        op->splits[i].had_data = s[16] & 1;
        op->splits[i].idle = (s[16] >> 1) & 1;
        op->splits[i].finished = (s[16] >> 2) & 1;
    }
}

static int src_open(sl_operator_t *o) {
    source_op_t *op = (source_op_t *)o;
    const sl_source_t *src = op->spec->src;
    char err[512] = "";
    int nsplits = 0;
    int rc = src->ops->create_reader(src->ctx, o->subtask, o->parallelism, &op->reader, &nsplits, err, sizeof err);
    if (rc < 0) return sl_op_fail(o, rc, "cannot open source: %s", err[0] ? err : sl_strerror(rc));
    if (o->restored_state) {
        if (!src->ops->restore)
            return sl_op_fail(o, SL_EINVAL, "the checkpoint has a position for this source, but source '%s' cannot restore",
                              src->ops->name ? src->ops->name : "?");
        rc = src->ops->restore(op->reader, o->restored_state, o->restored_len, err, sizeof err);
        if (rc < 0) return sl_op_fail(o, rc, "cannot restore the source's position: %s", err);
    }
    op->nsplits = nsplits;
    op->splits = sl_calloc((size_t)(nsplits > 0 ? nsplits : 1), sizeof *op->splits);
    int64_t now = sl_op_now(o);
    for (int i = 0; i < nsplits; i++) {
        op->splits[i].max_ts = INT64_MIN;
        op->splits[i].last_active = now;
    }
    op->next_tick = op->spec->ws.kind == SL_WM_NONE || op->interval == 0 ? INT64_MAX : now + op->interval;
    apply_restored_time(op, now);
    if (nsplits == 0) op->ended = false; /* a reader with no splits ends on its first poll */
    return 0;
}

int sl_source_op_poll(sl_operator_t *o, int max) {
    source_op_t *op = (source_op_t *)o;
    if (op->ended) return SL_SRC_END;
    char err[512] = "";
    op->out.idle_until_ns = 0;
    int rc = op->spec->src->ops->poll(op->reader, &op->out, max, err, sizeof err);
    if (rc < 0) return sl_op_fail(o, rc, "%s", err[0] ? err : sl_strerror(rc));
    if (op->next_tick != INT64_MAX) {
        int64_t now = sl_op_now(o);
        if (now >= op->next_tick) {
            tick(op, now);
            op->next_tick = now + op->interval;
        } else {
            /* More often than the interval is allowed (never ahead of the
             * generators): after each batch, so a fast source does not run
             * a whole interval ahead of its watermark. */
            combine_and_emit(op);
        }
    }
    if (rc == SL_SRC_END) {
        op->ended = true;
        emit_status(op, false);
        sl_op_emit_watermark(o, SL_MAX_WATERMARK);
    }
    return rc;
}

int64_t sl_source_op_next_tick(sl_operator_t *o) { return ((source_op_t *)o)->next_tick; }

void sl_source_op_drain(sl_operator_t *o) {
    source_op_t *op = (source_op_t *)o;
    if (op->emitted_wm == SL_MAX_WATERMARK) return;
    op->emitted_wm = SL_MAX_WATERMARK;
    op->next_tick = INT64_MAX;
    emit_status(op, false);
    sl_op_emit_watermark(o, SL_MAX_WATERMARK);
}

int64_t sl_source_op_idle_until_ns(sl_operator_t *o) { return ((source_op_t *)o)->out.idle_until_ns; }
int64_t sl_source_op_skipped(sl_operator_t *o) { return o->records_skipped; }

int64_t sl_source_op_pending(sl_operator_t *o) {
    source_op_t *op = (source_op_t *)o;
    const sl_source_ops_t *ops = op->spec->src->ops;
    if (!ops->pending_records) return -1;
    if (op->ended) return 0; /* also after close: the final report */
    return op->reader ? ops->pending_records(op->reader) : -1;
}

static void buf_put(void *ctx, const void *p, size_t n) { sl_buf_append(ctx, p, n); }

/* Checkpoint: the reader's position becomes the source's operator state. */
static int src_snapshot(sl_operator_t *o, int64_t id, sl_buf_t *out) {
    source_op_t *op = (source_op_t *)o;
    const sl_source_ops_t *ops = op->spec->src->ops;
    if (!ops->snapshot || !op->reader) return 0;
    int rc = ops->snapshot(op->reader, id, buf_put, out);
    if (rc < 0) return sl_op_fail(o, rc, "source snapshot for checkpoint %lld failed", (long long)id);
    return 0;
}

static void src_close(sl_operator_t *o) {
    source_op_t *op = (source_op_t *)o;
    if (op->reader) op->spec->src->ops->destroy_reader(op->reader);
    op->reader = NULL;
}

static void src_destroy(sl_operator_t *o) {
    source_op_t *op = (source_op_t *)o;
    src_close(o);
    sl_free(op->splits);
    sl_buf_free(&op->restored_time);
    sl_rw_free(&op->out.w);
    sl_op_base_free(o);
    sl_free(op);
}

static int src_notify_complete(sl_operator_t *o, int64_t id) {
    source_op_t *op = (source_op_t *)o;
    const sl_source_ops_t *ops = op->spec->src->ops;
    if (op->reader && ops->notify_checkpoint_complete) ops->notify_checkpoint_complete(op->reader, id);
    return 0;
}

static const sl_operator_vt_t source_vt = {.kind = "Source",
                                           .open = src_open,
                                           .close = src_close,
                                           .destroy = src_destroy,
                                           .snapshot_state = src_snapshot,
                                           .notify_checkpoint_complete = src_notify_complete,
                                           .snapshot_time = src_snapshot_time,
                                           .restore_time = src_restore_time};

sl_operator_t *sl_source_op_create(const void *spec, const sl_op_init_t *init) {
    source_op_t *op = sl_calloc(1, sizeof *op);
    op->spec = spec;
    sl_op_base_init(&op->base, &source_vt, init);
    op->out.op = op;
    sl_rw_init(&op->out.w);
    op->emitted_wm = SL_MIN_WATERMARK;
    op->interval = init->wm_interval_ms;
    return &op->base;
}

/* ---- capture mode (connector unit tests) ---- */

sl_source_output_t *sl_src_output_test_new(const sl_schema_t *schema) {
    sl_source_output_t *o = sl_calloc(1, sizeof *o);
    o->schema = schema;
    sl_rw_init(&o->w);
    return o;
}

int64_t sl_src_output_test_count(const sl_source_output_t *o) { return o->n; }

sl_record_t sl_src_output_test_get(const sl_source_output_t *o, int64_t i) {
    int64_t end = i + 1 < o->n ? o->offs[i + 1] : (int64_t)o->rows.len;
    sl_record_t r = {{o->rows.p + o->offs[i], (uint32_t)(end - o->offs[i]), o->schema}, o->ts[i]};
    return r;
}

int sl_src_output_test_split(const sl_source_output_t *o, int64_t i) { return o->splits[i]; }
bool sl_src_output_test_finished(const sl_source_output_t *o, int split) {
    return split >= 0 && split < 256 && o->finished[split];
}
int64_t sl_src_output_test_skipped(const sl_source_output_t *o) { return o->skipped; }

void sl_src_output_test_clear(sl_source_output_t *o) {
    o->n = 0;
    o->rows.len = 0;
}

void sl_src_output_test_free(sl_source_output_t *o) {
    if (!o) return;
    sl_buf_free(&o->rows);
    sl_free(o->offs);
    sl_free(o->ts);
    sl_free(o->splits);
    sl_rw_free(&o->w);
    sl_free(o);
}

/* ---- timestamps / watermarks operator (sl_assign_timestamps) ---- */

typedef struct ts_op {
    sl_operator_t base;
    const wm_spec_t *spec;
    split_gen_t gen;
    int64_t emitted_wm;
    int64_t interval;
    bool out_idle;
} ts_op_t;

void *sl_timestamps_spec_new(const sl_schema_t *schema, sl_watermark_strategy_t ws) {
    wm_spec_t *s = sl_calloc(1, sizeof *s);
    spec_init(s, schema, ws);
    return s;
}

void sl_timestamps_spec_free(void *spec) { sl_free(spec); }

static void ts_emit(ts_op_t *op) {
    int64_t w = gen_wm(op->spec, &op->gen);
    if (op->gen.idle) {
        if (!op->out_idle) {
            op->out_idle = true;
            op->base.out->status(op->base.out, true);
        }
        return;
    }
    if (op->out_idle) {
        op->out_idle = false;
        op->base.out->status(op->base.out, false);
    }
    if (w > op->emitted_wm) {
        op->emitted_wm = w;
        sl_op_emit_watermark(&op->base, w);
    }
}

static int ts_open(sl_operator_t *o) {
    ts_op_t *op = (ts_op_t *)o;
    op->gen.last_active = sl_op_now(o);
    if (op->interval > 0 && op->spec->ws.kind != SL_WM_NONE) sl_op_schedule_processing(o, sl_op_now(o) + op->interval);
    return 0;
}

static int ts_process(sl_operator_t *o, int input, const sl_record_t *rec) {
    ts_op_t *op = (ts_op_t *)o;
    sl_record_t r = *rec;
    r.ts = assign_ts(op->spec, &rec->row, rec->ts);
    if (r.ts > op->gen.max_ts) op->gen.max_ts = r.ts;
    op->gen.had_data = true;
    if (op->gen.idle) {
        op->gen.idle = false;
        op->gen.last_active = sl_op_now(o);
    }
    sl_op_emit(o, 0, &r);
    if (op->interval == 0 && op->spec->ws.kind != SL_WM_NONE) ts_emit(op);
    return 0;
}

static int ts_proc_time(sl_operator_t *o, int64_t now) {
    ts_op_t *op = (ts_op_t *)o;
    int64_t timeout = op->spec->ws.idle_timeout_ms;
    if (op->gen.had_data) {
        op->gen.had_data = false;
        op->gen.last_active = now;
    } else if (timeout > 0 && now - op->gen.last_active >= timeout) {
        op->gen.idle = true;
    }
    ts_emit(op);
    sl_op_schedule_processing(o, now + op->interval);
    return 0;
}

/* Upstream watermarks are replaced by generated ones; only the end of
 * input (maximum watermark) passes through. */
static int ts_watermark(sl_operator_t *o, int64_t wm) {
    ts_op_t *op = (ts_op_t *)o;
    if (wm == SL_MAX_WATERMARK && op->emitted_wm != SL_MAX_WATERMARK) {
        op->emitted_wm = wm;
        sl_op_emit_watermark(o, wm);
    }
    return 0;
}

static void ts_destroy(sl_operator_t *o) {
    sl_op_base_free(o);
    sl_free(o);
}

static const sl_operator_vt_t ts_vt = {.kind = "Timestamps/Watermarks",
                                       .open = ts_open,
                                       .process = ts_process,
                                       .advance_watermark = ts_watermark,
                                       .on_processing_time = ts_proc_time,
                                       .destroy = ts_destroy};

sl_operator_t *sl_timestamps_op_create(const void *spec, const sl_op_init_t *init) {
    ts_op_t *op = sl_calloc(1, sizeof *op);
    op->spec = spec;
    sl_op_base_init(&op->base, &ts_vt, init);
    op->gen.max_ts = INT64_MIN;
    op->emitted_wm = SL_MIN_WATERMARK;
    op->interval = init->wm_interval_ms;
    return &op->base;
}
