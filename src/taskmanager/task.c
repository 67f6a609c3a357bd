/*
 * task.c — the task's thread (Flink's StreamTask + mailbox loop).
 *
 * One thread owns everything in a task.  Each turn of the loop it:
 *   1. runs its mail (control messages posted by other threads) and stops
 *      if cancelled or failed;
 *   2. fires due processing-time wake-ups of its operators;
 *   3. a source task polls its reader for a batch; other tasks take at most
 *      one buffer from each input channel and run its elements through the
 *      operator chain (records, watermarks through the valve, status, end);
 *   4. when there was nothing to do it flushes partly filled output buffers
 *      and sleeps until input, mail or the next timer wakes it.
 * When every input has ended it ends the chain in order (end_input), sends
 * end-of-partition downstream and closes its operators.
 */
#include <stdio.h>

#include "common/common.h"
#include "operators/source_op.h"
#include "state/state_backend.h"
#include "taskmanager/task_int.h"
#include "windowing/window.h"

#define SOURCE_BATCH 512
#define MAX_IDLE_WAIT_NS 50000000LL

int64_t sl_task_now(sl_task_t *t) { return t->clock(t->clock_ctx); }

void sl_task_fail(sl_task_t *t, int rc, const char *msg) {
    if (t->failed) return;
    t->failed = true;
    t->rc = rc < 0 ? rc : SL_EINVAL;
    snprintf(t->err, sizeof t->err, "%s: %s", t->name, msg);
}

/* ---- the operator context (operators/operator_context.h) ---- */

static void ctx_schedule(void *owner, sl_operator_t *op, int64_t ts) {
    sl_task_t *t = owner;
    int i = op->chain_index;
    if (ts < t->wake[i]) t->wake[i] = ts;
}
static void ctx_fail(void *owner, int rc, const char *msg) { sl_task_fail(owner, rc, msg); }
static void ctx_post(void *owner, sl_op_mail_fn fn, void *arg) {
    sl_task_t *t = owner;
    sl_mailbox_post(&t->mailbox, fn, arg);
}
/* Not the mail of a source task: a checkpoint trigger would snapshot the
 * source in the middle of a record. */
static bool ctx_yield(void *owner, int64_t deadline_ns) {
    sl_task_t *t = owner;
    if (atomic_load(&t->cancel) || t->failed) return true;
    if (!t->is_source) sl_mailbox_drain(&t->mailbox, t);
    if (atomic_load(&t->cancel) || t->failed) return true;
    sl_waker_wait(&t->waker, deadline_ns);
    return atomic_load(&t->cancel) || t->failed;
}

void sl_task_init_context(sl_task_t *t) {
    t->opctx = (sl_op_context_t){.clock = t->clock,
                                 .clock_ctx = t->clock_ctx,
                                 .name = t->name,
                                 .owner = t,
                                 .schedule_processing = ctx_schedule,
                                 .fail = ctx_fail,
                                 .post = ctx_post,
                                 .yield = ctx_yield};
}

static void cancel_mail(void *owner, void *arg) {
    sl_task_t *t = owner;
    atomic_store(&t->cancel, true);
}

void sl_task_cancel(sl_task_t *t) {
    atomic_store(&t->cancel, true);
    sl_mailbox_post(&t->mailbox, cancel_mail, NULL);
}

/* ---- checkpoints ---- */

void sl_inflight_put(sl_buf_t *out, int kind, const char *uid, int subtask, int gate, int index, const void *data,
                     uint32_t len) {
    uint8_t k = (uint8_t)kind;
    uint32_t ul = (uint32_t)strlen(uid), v[4] = {(uint32_t)subtask, (uint32_t)gate, (uint32_t)index, len};
    sl_buf_append(out, &k, 1);
    sl_buf_append(out, &ul, 4);
    sl_buf_append(out, uid, ul);
    sl_buf_append(out, v, sizeof v);
    sl_buf_append(out, data, len);
}

/* Should barrier `id` (triggered at wall time ts) overtake the queued
 * output?  Unaligned from the start (timeout 0), or once it is older than
 * the aligned-checkpoint timeout. */
static bool overtake(const sl_task_t *t, int64_t ts, int kind) {
    if (!t->bh.unaligned || kind != SL_SNAP_CHECKPOINT) return false;
    return t->bh.aligned_timeout_ms == 0 || sl_wall_ms() - ts >= t->bh.aligned_timeout_ms;
}

/* Barrier `id` passed this task: forward it (ahead of the queued output
 * when unaligned, capturing what it overtook), then the synchronous phase
 * of the snapshot.  Returns the snapshot, or NULL when the task failed. */
static sl_ckpt_task_snap_t *take_snapshot(sl_task_t *t, int64_t id, int64_t ts, bool unaligned, int kind) {
    sl_ckpt_task_snap_t *snap = sl_calloc(1, sizeof *snap);
    snap->task = t;
    snap->id = id;
    snap->kind = kind;
    snap->nops = t->nops;
    int64_t t0 = sl_mono_ns();
    if (unaligned || overtake(t, ts, kind)) {
        snap->unaligned = true;
        for (int i = 0; i < t->nwriters; i++) {
            sl_record_writer_t *w = t->writers[i];
            sl_buf_t *caps = sl_calloc((size_t)(w->nch ? w->nch : 1), sizeof *caps);
            sl_record_writer_barrier_priority(w, id, ts, caps);
            for (int c = 0; c < w->nch; c++) {
                if (caps[c].len) {
                    char uid[300];
                    sl_deployment_head_uid(t->dep, w->dst[c].vertex, uid, sizeof uid);
                    sl_inflight_put(&snap->inflight, SL_INFLIGHT_OUTPUT, uid, w->dst[c].subtask, w->dst[c].gate,
                                    w->dst[c].index, caps[c].p, (uint32_t)caps[c].len);
                }
                sl_buf_free(&caps[c]);
            }
            sl_free(caps);
        }
    } else {
        for (int i = 0; i < t->nwriters; i++) sl_record_writer_barrier(t->writers[i], id, ts, kind);
    }
    snap->blobs = sl_calloc((size_t)t->nops, sizeof *snap->blobs);
    snap->keyed = sl_calloc((size_t)t->nops, sizeof *snap->keyed);
    snap->timers = sl_calloc((size_t)t->nops, sizeof *snap->timers);
    snap->ranges = sl_calloc((size_t)t->nops, sizeof *snap->ranges);
    snap->times = sl_calloc((size_t)t->nops, sizeof *snap->times);
    snap->native = sl_calloc((size_t)t->nops, sizeof *snap->native);
    for (int i = 0; i < t->nops && !t->failed; i++) {
        sl_operator_t *op = t->ops[i];
        /* No event time once it is at its end — after --drain (Flink keeps no
         * watermark in a savepoint, and the next job must not start at the
         * end of time) and after the input ended (the final checkpoint): a
         * restored task must pass the maximum watermark on again when its
         * restored sources end again, which it would not if it had it
         * already (downstream at another parallelism would never see it). */
        if (sl_snap_base(kind) != SL_SNAP_SAVEPOINT_TERMINATE && !t->data_ended)
            sl_op_snapshot_time(op, &snap->times[i]);
        if (op->vt->snapshot_state) {
            int rc = op->vt->snapshot_state(op, id, &snap->blobs[i]);
            if (rc < 0 && !t->failed) sl_task_fail(t, rc, "snapshot failed");
        }
        if (op->kb) { /* synchronous phase: copy-on-write views, O(key groups) */
            snap->ranges[i] = op->kg_range;
            char nerr[600] = "";
            /* a savepoint is canonical unless it asked for RocksDB's own format (self-contained then) */
            int rc = kind == SL_SNAP_CHECKPOINT || sl_snap_native(kind)
                         ? sl_deployment_native_snapshot(t->dep, t, i, sl_snap_native(kind), &snap->native[i], nerr,
                                                         sizeof nerr)
                         : 0;
            if (rc < 0 && !t->failed) sl_task_fail(t, rc, nerr);
            if (rc == 0 && !snap->native[i]) rc = op->kb->ops->snapshot(op->kb, &snap->keyed[i]);
            if (rc == 0 && op->timers) rc = sl_timers_snapshot(op->timers, &snap->timers[i]);
            if (rc < 0 && !t->failed) sl_task_fail(t, rc, "keyed state snapshot failed");
        }
    }
    if (t->failed) {
        sl_deployment_task_snapshot(NULL, snap); /* frees it */
        return NULL;
    }
    t->checkpoints++;
    if (id > t->last_snap_id) t->last_snap_id = id;
    if (sl_snap_is_sync(kind)) t->sync_id = id; /* stop-with-savepoint: nothing more until it completes */
    if (t->data_ended && !t->final_id) t->final_id = id; /* the final checkpoint: it covers the end of input */
    snap->sync_ns = sl_mono_ns() - t0;
    if (snap->sync_ns > t->max_sync_ns) t->max_sync_ns = snap->sync_ns;
    return snap;
}

static void submit(sl_task_t *t, sl_ckpt_task_snap_t *snap) {
    if (t->bh.current >= 0 && t->bh.align_start_ns) snap->align_ns = sl_mono_ns() - t->bh.align_start_ns;
    sl_deployment_task_snapshot(t->dep, snap);
}

/* Aligned (or at-least-once, or a source's trigger): snapshot and hand
 * over at once. */
static void perform_checkpoint(sl_task_t *t, int64_t id, int64_t ts, int kind) {
    sl_ckpt_task_snap_t *snap = take_snapshot(t, id, ts, false, kind);
    if (snap) submit(t, snap);
}

/* Unaligned: snapshot now; the in-flight data of the channels still
 * without the barrier is captured until it arrives (finish_unaligned). */
static void start_unaligned(sl_task_t *t, int64_t id, int64_t ts) {
    if (t->pending) { /* cannot happen with one checkpoint at a time; never leak it */
        sl_deployment_task_snapshot(NULL, t->pending);
        t->pending = NULL;
    }
    t->pending = take_snapshot(t, id, ts, true, SL_SNAP_CHECKPOINT);
    for (int i = 0; i < t->nincap; i++) t->incap[i].len = 0;
}

static void finish_unaligned(sl_task_t *t) {
    sl_ckpt_task_snap_t *snap = t->pending;
    t->pending = NULL;
    if (!snap) return;
    char uid[300];
    sl_deployment_head_uid(t->dep, t->vertex, uid, sizeof uid);
    for (int gi = 0; gi < t->ngates; gi++) {
        sl_input_gate_t *g = &t->gates[gi];
        for (int c = 0; c < g->nch; c++) {
            sl_buf_t *b = &t->incap[g->first + c];
            if (b->len)
                sl_inflight_put(&snap->inflight, SL_INFLIGHT_INPUT, uid, t->subtask, gi, c, b->p, (uint32_t)b->len);
            b->len = 0;
        }
    }
    submit(t, snap);
}

/* A newer checkpoint overtook the one whose unaligned snapshot waits. */
static void drop_pending(sl_task_t *t, int64_t aborted) {
    if (!t->pending || t->pending->id != aborted) return;
    sl_deployment_task_snapshot(NULL, t->pending);
    t->pending = NULL;
    for (int i = 0; i < t->nincap; i++) t->incap[i].len = 0;
}

/* What the barrier handler decided. */
static void on_barrier_action(sl_task_t *t, sl_bh_action_t a, int64_t id, int64_t ts) {
    switch (a) {
    case SL_BH_TRIGGER:
        perform_checkpoint(t, id, ts, t->bh.current_kind);
        sl_bh_release(&t->bh);
        break;
    case SL_BH_TRIGGER_UNALIGNED: start_unaligned(t, id, ts); break;
    case SL_BH_UNALIGNED_DONE:
        finish_unaligned(t);
        sl_bh_release(&t->bh);
        break;
    case SL_BH_NONE: break;
    }
}

typedef struct ckpt_mail {
    int64_t id, ts;
    int kind;
} ckpt_mail_t;

static bool inputs_ended(const sl_task_t *t);

/* A trigger: source tasks inject the barrier, and so does a task whose
 * every input has ended (Flink's FLIP-147: the running tasks whose
 * predecessors all finished are the sources of the rest of the graph) —
 * with unaligned checkpoints a predecessor's final barrier may overtake its
 * end of data, so the task's own final checkpoint may come after every
 * predecessor finished.  Stop with --drain: event time first advances to
 * its end, so every window fires and every event-time timer runs before
 * the barrier, and their output is in the savepoint's transactions. */
static void trigger_mail(void *owner, void *arg) {
    sl_task_t *t = owner;
    ckpt_mail_t *m = arg;
    bool acts = t->is_source || (t->ngates > 0 && inputs_ended(t));
    if (!acts && m->id > t->late_id) { /* see run_loop: taken when the inputs end without its barrier */
        t->late_id = m->id;
        t->late_ts = m->ts;
        t->late_kind = m->kind;
    }
    if (acts && !t->failed && !t->finished && !t->sync_id) {
        if (sl_snap_base(m->kind) == SL_SNAP_SAVEPOINT_TERMINATE && t->is_source) sl_source_op_drain(t->ops[0]);
        if (!t->failed) perform_checkpoint(t, m->id, m->ts, m->kind);
    }
    sl_free(m);
}

static void complete_mail(void *owner, void *arg) {
    sl_task_t *t = owner;
    ckpt_mail_t *m = arg;
    for (int i = 0; i < t->nops && !t->failed; i++) {
        sl_operator_t *op = t->ops[i];
        if (!op->vt->notify_checkpoint_complete) continue;
        int rc = op->vt->notify_checkpoint_complete(op, m->id);
        if (rc < 0 && !t->failed) sl_task_fail(t, rc, "notify checkpoint complete failed");
    }
    if (t->sync_id && m->id >= t->sync_id && !t->failed) t->stopped = true; /* stop-with-savepoint done */
    if (t->final_id && m->id >= t->final_id && !t->final_done) {
        t->final_done = true;
        sl_fault_point("task.after-final-checkpoint"); /* committed; the task has not ended yet */
    }
    sl_free(m);
}

static void aborted_mail(void *owner, void *arg) {
    sl_task_t *t = owner;
    ckpt_mail_t *m = arg;
    for (int i = 0; i < t->nops && !t->failed; i++) {
        sl_operator_t *op = t->ops[i];
        if (op->vt->notify_checkpoint_aborted) op->vt->notify_checkpoint_aborted(op, m->id);
    }
    if (t->sync_id == m->id) t->sync_id = 0; /* the stop failed: the job goes on */
    sl_free(m);
}

static void post(sl_task_t *t, sl_mail_fn fn, int64_t id, int64_t ts, int kind) {
    ckpt_mail_t *m = sl_malloc(sizeof *m);
    m->id = id;
    m->ts = ts;
    m->kind = kind;
    sl_mailbox_post_owned(&t->mailbox, fn, m);
}

void sl_task_post_trigger(sl_task_t *t, int64_t id, int64_t ts, int kind) { post(t, trigger_mail, id, ts, kind); }
void sl_task_post_complete(sl_task_t *t, int64_t id) { post(t, complete_mail, id, 0, 0); }
void sl_task_post_aborted(sl_task_t *t, int64_t id) { post(t, aborted_mail, id, 0, 0); }

/* ---- chain output ---- */

static void out_record(sl_op_output_t *o, int tag, const sl_record_t *rec) {
    sl_chain_out_t *co = (sl_chain_out_t *)o;
    if (SL_UNLIKELY(tag >= co->ntags)) return;
    sl_tag_route_t *r = &co->tags[tag];
    for (int i = 0; i < r->nops; i++) {
        sl_operator_t *op = r->ops[i].op;
        op->records_in++;
        int rc = op->vt->process(op, r->ops[i].input, rec);
        if (SL_UNLIKELY(rc < 0) && !co->task->failed) sl_task_fail(co->task, rc, sl_strerror(rc));
    }
    for (int i = 0; i < r->nw; i++) {
        int rc = sl_record_writer_emit(r->w[i], rec);
        if (SL_UNLIKELY(rc < 0) && rc != SL_ECANCELED && !co->task->failed)
            sl_task_fail(co->task, rc, "key selector failed in partitioner");
    }
}

static void out_watermark(sl_op_output_t *o, int64_t wm) {
    sl_chain_out_t *co = (sl_chain_out_t *)o;
    co->out_wm = wm;
    for (int t = 0; t < co->ntags; t++) {
        sl_tag_route_t *r = &co->tags[t];
        for (int i = 0; i < r->nops; i++) {
            int rc = sl_op_watermark(r->ops[i].op, r->ops[i].input, wm);
            if (rc < 0 && !co->task->failed) sl_task_fail(co->task, rc, sl_strerror(rc));
        }
        for (int i = 0; i < r->nw; i++) sl_record_writer_watermark(r->w[i], wm);
    }
}

static void out_status(sl_op_output_t *o, bool idle) {
    sl_chain_out_t *co = (sl_chain_out_t *)o;
    for (int t = 0; t < co->ntags; t++) {
        sl_tag_route_t *r = &co->tags[t];
        for (int i = 0; i < r->nops; i++) sl_op_status(r->ops[i].op, r->ops[i].input, idle);
        for (int i = 0; i < r->nw; i++) sl_record_writer_status(r->w[i], idle);
    }
}

void sl_chain_out_init(sl_chain_out_t *co, sl_task_t *t, int ntags) {
    co->base.record = out_record;
    co->base.watermark = out_watermark;
    co->base.status = out_status;
    co->task = t;
    co->ntags = ntags;
    co->out_wm = INT64_MIN;
    co->tags = sl_calloc((size_t)ntags, sizeof *co->tags);
}

/* ---- input gates ---- */

static void gate_on_wm(void *ctx, int64_t wm) {
    sl_input_gate_t *g = ctx;
    sl_operator_t *head = g->task->ops[0];
    int rc = sl_op_watermark(head, g->input, wm);
    if (rc < 0 && !g->task->failed) sl_task_fail(g->task, rc, sl_strerror(rc));
}

static void gate_on_status(void *ctx, bool idle) {
    sl_input_gate_t *g = ctx;
    sl_op_status(g->task->ops[0], g->input, idle);
}

void sl_gate_init(sl_input_gate_t *g, sl_task_t *t, int input, const sl_schema_t *schema) {
    g->task = t;
    g->input = input;
    g->schema = schema;
}

void sl_gate_add_channel(sl_input_gate_t *g, sl_channel_t *ch) {
    g->ch = sl_realloc(g->ch, (size_t)(g->nch + 1) * sizeof *g->ch);
    g->ch[g->nch++] = ch;
}

void sl_gate_finalize(sl_input_gate_t *g) {
    g->ended = sl_calloc((size_t)(g->nch ? g->nch : 1), sizeof(bool));
    g->data_done = sl_calloc((size_t)(g->nch ? g->nch : 1), sizeof(bool));
    g->held = sl_calloc((size_t)(g->nch ? g->nch : 1), sizeof *g->held);
    g->held_off = sl_calloc((size_t)(g->nch ? g->nch : 1), sizeof *g->held_off);
    sl_valve_init(&g->valve, g->nch, gate_on_wm, gate_on_status, g);
}

void sl_gate_free(sl_input_gate_t *g) {
    for (int c = 0; g->held && c < g->nch; c++)
        if (g->held[c]) sl_channel_recycle(g->ch[c], g->held[c]);
    sl_free(g->held);
    sl_free(g->held_off);
    sl_free(g->ch);
    sl_free(g->ended);
    sl_free(g->data_done);
    sl_valve_free(&g->valve);
}

#define BATCH 32

/* Hands a run of records to the head operator. */
static void run_batch(sl_task_t *t, sl_input_gate_t *g, const sl_record_t *recs, int n) {
    sl_operator_t *head = t->ops[0];
    head->records_in += n;
    if (head->vt->process_batch) {
        int rc = head->vt->process_batch(head, g->input, recs, n);
        if (SL_UNLIKELY(rc < 0) && !t->failed) sl_task_fail(t, rc, sl_strerror(rc));
        return;
    }
    for (int i = 0; i < n && !t->failed; i++) {
        int rc = head->vt->process(head, g->input, &recs[i]);
        if (SL_UNLIKELY(rc < 0) && !t->failed) sl_task_fail(t, rc, sl_strerror(rc));
    }
}

enum { CONSUMED = 0, HELD = 1 };

/* Channel c of g will deliver no more data (end of data, or the end). */
static void data_done(sl_input_gate_t *g, int c) {
    if (g->data_done[c]) return;
    g->data_done[c] = true;
    g->ndone++;
}

/* In-flight data of an unaligned checkpoint: the bytes [from, to) of a
 * buffer of global channel gc, when that channel is being captured. */
static inline void capture(sl_task_t *t, int gc, const uint8_t *from, const uint8_t *to) {
    if (to > from && sl_bh_capturing(&t->bh, gc)) sl_buf_append(&t->incap[gc], from, (size_t)(to - from));
}

/* Runs a buffer's elements, from *off, through the head operator: runs of
 * records in batches, then each watermark, status, end or barrier in
 * order.  Returns HELD with *off after a barrier that blocked the channel
 * (aligned checkpoint), else CONSUMED.  While an unaligned snapshot waits
 * for this channel's barrier, what the channel delivers is captured. */
static int consume(sl_task_t *t, sl_input_gate_t *g, int c, const sl_nbuf_t *b, uint32_t *off) {
    const uint8_t *p = b->data + *off, *end = b->data + b->len, *cap_from = p;
    const int gc = g->first + c;
    sl_record_t recs[BATCH];
    int n = 0;
    while (p < end && !t->failed) {
        if (*p != SL_EL_RECORD && n) {
            run_batch(t, g, recs, n);
            n = 0;
            continue;
        }
        switch (*p) {
        case SL_EL_RECORD: {
            if (SL_UNLIKELY(end - p < SL_REC_HEADER)) goto corrupt;
            sl_record_t *rec = &recs[n];
            rec->row.schema = g->schema;
            rec->ts = (int64_t)sl_ld64(p + 1);
            rec->row.len = sl_ld32(p + 9);
            if (SL_UNLIKELY((uint64_t)(end - p - SL_REC_HEADER) < rec->row.len)) goto corrupt;
            rec->row.data = p + SL_REC_HEADER;
            p += SL_REC_HEADER + rec->row.len;
            if (++n == BATCH) {
                run_batch(t, g, recs, n);
                n = 0;
            }
            break;
        }
        case SL_EL_WATERMARK:
            if (end - p < 9) goto corrupt;
            sl_valve_watermark(&g->valve, c, (int64_t)sl_ld64(p + 1));
            p += 9;
            break;
        case SL_EL_STATUS:
            if (end - p < 2) goto corrupt;
            sl_valve_status(&g->valve, c, p[1] != 0);
            p += 2;
            break;
        case SL_EL_END_OF_DATA: /* stays in the stream (and in captured in-flight data): barriers follow */
            data_done(g, c);
            p += 1;
            break;
        case SL_EL_END:
            if (t->replaying) goto corrupt;
            capture(t, gc, cap_from, p);
            data_done(g, c);
            if (!g->ended[c]) {
                g->ended[c] = true;
                g->nended++;
            }
            p += 1;
            cap_from = p;
            on_barrier_action(t, sl_bh_end(&t->bh, gc), t->bh.current, t->bh.current_ts);
            break;
        case SL_EL_BARRIER: {
            if (end - p < SL_BARRIER_LEN) goto corrupt;
            int64_t id = (int64_t)sl_ld64(p + 1), ts = (int64_t)sl_ld64(p + 9), aborted;
            int kind = p[17];
            if (!sl_snap_kind_valid(kind)) goto corrupt;
            if (t->replaying) { /* a barrier inside restored in-flight data is history */
                p += SL_BARRIER_LEN;
                break;
            }
            capture(t, gc, cap_from, p);
            p += SL_BARRIER_LEN;
            cap_from = p;
            sl_bh_action_t a = sl_bh_barrier_kind(&t->bh, gc, id, ts, kind, &aborted);
            if (aborted >= 0) drop_pending(t, aborted);
            if (a != SL_BH_NONE) {
                on_barrier_action(t, a, id, ts);
                if (t->sync_id) { /* stopped with a savepoint: the rest waits (and is never read) */
                    *off = (uint32_t)(p - b->data);
                    return p < end ? HELD : CONSUMED;
                }
            } else if (sl_bh_blocked(&t->bh, gc)) {
                *off = (uint32_t)(p - b->data);
                return p < end ? HELD : CONSUMED;
            }
            break;
        }
        default:
            goto corrupt;
        }
    }
    if (n && !t->failed) run_batch(t, g, recs, n);
    capture(t, gc, cap_from, p);
    return CONSUMED;
corrupt:
    sl_task_fail(t, SL_EFORMAT, t->replaying ? "corrupt in-flight data in the restored checkpoint (bad element)"
                                             : "corrupt network buffer (bad element)");
    return CONSUMED;
}

/* Restore of an unaligned checkpoint: its in-flight data goes through the
 * task before anything live. */
static void replay_inflight(sl_task_t *t) {
    t->replaying = true;
    for (int i = 0; i < t->nreplay && !t->failed; i++) {
        sl_replay_t *r = &t->replay[i];
        sl_nbuf_t b = {.data = r->data.p, .len = (uint32_t)r->data.len, .cap = (uint32_t)r->data.len};
        uint32_t off = 0;
        consume(t, &t->gates[r->gate], r->index, &b, &off);
    }
    t->replaying = false;
}

static void flush_all(sl_task_t *t) {
    for (int i = 0; i < t->nwriters; i++) sl_record_writer_flush(t->writers[i]);
    if (t->buffer_timeout_ns >= 0) t->last_flush_ns = sl_mono_ns();
}

/* A busy task (it never runs out of work, so the idle flush never comes)
 * flushes once its last flush is older than the buffer timeout, so a
 * record never waits longer than that in a partly filled buffer (Flink's
 * OutputFlusher, here checked once per batch instead of by a thread). */
static inline void flush_if_timed_out(sl_task_t *t) {
    if (t->buffer_timeout_ns < 0 || !t->nwriters) return;
    if (sl_mono_ns() - t->last_flush_ns >= t->buffer_timeout_ns) flush_all(t);
}

static int64_t fire_timers(sl_task_t *t) {
    int64_t next = INT64_MAX;
    bool any = false;
    for (int i = 0; i < t->nops; i++) any = any || t->wake[i] != INT64_MAX;
    if (!any) return next;
    int64_t now = sl_task_now(t);
    for (int i = 0; i < t->nops && !t->failed; i++) {
        if (t->wake[i] <= now) {
            t->wake[i] = INT64_MAX;
            sl_operator_t *op = t->ops[i];
            if (op->vt->on_processing_time) {
                int rc = op->vt->on_processing_time(op, now);
                if (rc < 0 && !t->failed) sl_task_fail(t, rc, sl_strerror(rc));
            }
        }
        if (t->wake[i] < next) next = t->wake[i];
    }
    return next;
}

/* Sleeps until something arrives or until processing time `next_ms`. */
static void wait_for_work(sl_task_t *t, int64_t next_ms, int64_t until_ns) {
    int64_t deadline = sl_mono_ns() + MAX_IDLE_WAIT_NS;
    if (until_ns > 0) {
        if (until_ns <= sl_mono_ns()) return;
        if (until_ns < deadline) deadline = until_ns;
    }
    if (next_ms != INT64_MAX) {
        int64_t delta_ms = next_ms - sl_task_now(t);
        if (delta_ms <= 0) return;
        int64_t d = sl_mono_ns() + delta_ms * 1000000LL;
        if (d < deadline) deadline = d;
    }
    int64_t t0 = sl_mono_ns();
    sl_waker_wait(&t->waker, deadline);
    t->idle_ns += sl_mono_ns() - t0;
}

static bool inputs_ended(const sl_task_t *t) {
    for (int i = 0; i < t->ngates; i++)
        if (t->gates[i].nended < t->gates[i].nch) return false;
    return true;
}

static bool data_ended_all(const sl_task_t *t) {
    for (int i = 0; i < t->ngates; i++)
        if (t->gates[i].ndone < t->gates[i].nch) return false;
    return true;
}

static void end_of_data(sl_task_t *t);

/* ---- live metrics ---- */

void sl_task_pub_init(sl_task_t *t) {
    t->pub.ops = sl_calloc((size_t)(t->nops ? t->nops : 1), sizeof *t->pub.ops);
    atomic_init(&t->pub.start_ns, 0);
    atomic_init(&t->pub.time_ns, 0);
    atomic_init(&t->pub.busy_ns, 0);
    atomic_init(&t->pub.idle_ns, 0);
    atomic_init(&t->pub.backpressured_ns, 0);
    atomic_init(&t->pub.bytes_in, 0);
    atomic_init(&t->pub.bytes_out, 0);
    for (int i = 0; i < t->nops; i++) {
        sl_op_pub_t *p = &t->pub.ops[i];
        atomic_init(&p->records_in, 0);
        atomic_init(&p->records_out, 0);
        atomic_init(&p->records_skipped, 0);
        atomic_init(&p->in_wm, INT64_MIN);
        atomic_init(&p->out_wm, INT64_MIN);
        atomic_init(&p->late_dropped, 0);
        atomic_init(&p->pending, -1);
        atomic_init(&p->state_mem, -1);
        atomic_init(&p->rdb_mem_tables, -1);
        atomic_init(&p->rdb_table_readers, -1);
        atomic_init(&p->rdb_block_cache, -1);
        atomic_init(&p->rdb_live_data, -1);
    }
}

void sl_task_pub_free(sl_task_t *t) {
    sl_free(t->pub.ops);
    t->pub.ops = NULL;
}

#define PUB(field, v) atomic_store_explicit(&(field), (v), memory_order_relaxed)

/* State memory of a keyed operator (stateMemoryBytes, RocksDB's native
 * metrics).  The heap backend counts its bytes as it allocates: read every
 * turn.  RocksDB answers property queries (microseconds each): at most
 * every SL_STATE_MEM_INTERVAL_NS per task, and always for the final
 * figures (the task resets t->state_mem_ns before them). */
#define SL_STATE_MEM_INTERVAL_NS (50 * 1000000LL)
static bool publish_state_memory(const sl_operator_t *op, sl_op_pub_t *p, bool rdb_due) {
    int64_t heap = sl_heap_backend_memory(op->kb);
    if (heap >= 0) {
        PUB(p->state_mem, heap);
        return false;
    }
    sl_kb_memory_t m;
    if (!rdb_due || sl_kb_memory(op->kb, &m) != SL_OK) return false;
    PUB(p->state_mem, m.state_bytes);
    PUB(p->rdb_mem_tables, m.rocksdb_cur_size_all_mem_tables);
    PUB(p->rdb_table_readers, m.rocksdb_estimate_table_readers_mem);
    PUB(p->rdb_block_cache, m.rocksdb_block_cache_usage);
    PUB(p->rdb_live_data, m.rocksdb_estimate_live_data_size);
    return true;
}

void sl_task_publish_metrics(sl_task_t *t) {
    if (SL_UNLIKELY(!t->pub.ops)) return;
    /* back-pressure: time blocked for a free buffer on the task's output
     * channels (channel.c counts it per channel) */
    int64_t bp = 0;
    for (int w = 0; w < t->nwriters; w++)
        for (int c = 0; c < t->writers[w]->nch; c++)
            bp += atomic_load_explicit(&t->writers[w]->ch[c]->backpressured_ns, memory_order_relaxed);
    int64_t now = sl_mono_ns();
    int64_t busy = now - t->start_ns - t->idle_ns - bp;
    t->busy_ns = busy > 0 ? busy : 0;
    PUB(t->pub.time_ns, now);
    PUB(t->pub.idle_ns, t->idle_ns);
    PUB(t->pub.backpressured_ns, bp);
    PUB(t->pub.busy_ns, t->busy_ns);
    int64_t out = 0;
    for (int w = 0; w < t->nwriters; w++) out += t->writers[w]->bytes;
    PUB(t->pub.bytes_in, t->bytes_in);
    PUB(t->pub.bytes_out, out);
    const bool rdb_due = !t->state_mem_ns || now - t->state_mem_ns >= SL_STATE_MEM_INTERVAL_NS;
    bool rdb_read = false;
    for (int i = 0; i < t->nops; i++) {
        const sl_operator_t *op = t->ops[i];
        sl_op_pub_t *p = &t->pub.ops[i];
        PUB(p->records_in, op->records_in);
        PUB(p->records_out, op->records_out);
        PUB(p->records_skipped, op->records_skipped);
        PUB(p->in_wm, op->wm);
        PUB(p->out_wm, t->outs[i].out_wm);
        PUB(p->late_dropped, sl_window_op_late_dropped(op));
        if (i == 0 && t->is_source) PUB(p->pending, sl_source_op_pending(t->ops[0]));
        if (op->kb && publish_state_memory(op, p, rdb_due)) rdb_read = true;
    }
    if (rdb_read) t->state_mem_ns = now; /* the chain's operators share one interval */
}

#define LD(field) atomic_load_explicit(&(field), memory_order_relaxed)

void sl_task_read_times(const sl_task_t *t, int64_t *at_ns, int64_t *busy, int64_t *idle, int64_t *bp) {
    *at_ns = LD(t->pub.time_ns);
    *busy = LD(t->pub.busy_ns);
    *idle = LD(t->pub.idle_ns);
    *bp = LD(t->pub.backpressured_ns);
    int64_t start = LD(t->pub.start_ns);
    if (!start || !*at_ns) return;
    int64_t now = sl_mono_ns(), bp_now = 0;
    bool waiting = false;
    for (int w = 0; w < t->nwriters; w++)
        for (int c = 0; c < t->writers[w]->nch; c++) {
            const sl_channel_t *ch = t->writers[w]->ch[c];
            int64_t since = LD(ch->waiting_since_ns);
            bp_now += LD(ch->backpressured_ns);
            if (since > 0 && since >= *at_ns && now > since) {
                waiting = true;
                bp_now += now - since;
            }
        }
    if (!waiting) return;
    /* blocked since after its last publication: not idle meanwhile */
    int64_t b = now - start - *idle - bp_now;
    *at_ns = now;
    *bp = bp_now;
    *busy = b > 0 ? b : 0;
}

static void run_loop(sl_task_t *t) {
    bool source_done = false;
    bool gate_done[2] = {false, false};
    while (!atomic_load_explicit(&t->cancel, memory_order_relaxed) && !t->failed) {
        sl_task_publish_metrics(t);
        if (sl_mailbox_drain(&t->mailbox, t) && (atomic_load(&t->cancel) || t->failed)) break;
        if (SL_UNLIKELY(t->sync_id)) { /* stop-with-savepoint: only mail until it completes */
            if (t->stopped) break;
            flush_all(t);
            wait_for_work(t, INT64_MAX, 0);
            continue;
        }
        int64_t next = fire_timers(t);
        int64_t until_ns = 0; /* an idle source's wake-up time, if it gave one */
        bool did = false;
        if (t->is_source) {
            if (SL_UNLIKELY(t->data_ended)) { /* waiting for the final checkpoint: only mail */
                if (t->final_done) break;
                flush_all(t);
                wait_for_work(t, INT64_MAX, 0);
                continue;
            }
            int r = sl_source_op_poll(t->ops[0], SOURCE_BATCH);
            if (r < 0 || t->failed) break;
            if (r == SL_SRC_END) {
                source_done = true;
                if (!t->final_mode) break;
                end_of_data(t); /* the final checkpoint follows */
                continue;
            }
            did = r == SL_SRC_MORE;
            int64_t tick = sl_source_op_next_tick(t->ops[0]);
            if (tick < next) next = tick;
            /* An idle source (e.g. a rate-limited reader ahead of its
             * schedule) is polled again when it said it has data
             * (sl_src_idle_until), else within 1 ms — not at the next
             * watermark tick or after the 50 ms idle wait. */
            if (r == SL_SRC_IDLE) {
                until_ns = sl_source_op_idle_until_ns(t->ops[0]);
                if (!until_ns && next > sl_task_now(t) + 1) next = sl_task_now(t) + 1;
            }
        } else {
            if (SL_UNLIKELY(t->bh.unaligned && t->bh.current >= 0 && !t->bh.snapshotted))
                on_barrier_action(t, sl_bh_timeout(&t->bh, sl_wall_ms()), t->bh.current, t->bh.current_ts);
            for (int gi = 0; gi < t->ngates; gi++) {
                sl_input_gate_t *g = &t->gates[gi];
                for (int c = 0; c < g->nch && !t->sync_id; c++) {
                    if (sl_bh_blocked(&t->bh, g->first + c)) continue; /* aligning: its data waits */
                    sl_nbuf_t *b = g->held[c];
                    uint32_t off = 0;
                    if (b) {
                        off = g->held_off[c];
                        g->held[c] = NULL;
                    } else if (!(b = sl_channel_poll(g->ch[c]))) {
                        continue;
                    } else {
                        t->bytes_in += b->len; /* numBytesIn: once per buffer */
                    }
                    did = true;
                    if (consume(t, g, c, b, &off) == HELD) {
                        g->held[c] = b;
                        g->held_off[c] = off;
                    } else {
                        sl_channel_recycle(g->ch[c], b);
                    }
                }
                if (!gate_done[gi] && g->ndone == g->nch && !t->failed && !t->sync_id) {
                    gate_done[gi] = true;
                    int rc = sl_op_end_input(t->ops[0], g->input);
                    if (rc < 0 && !t->failed) sl_task_fail(t, rc, sl_strerror(rc));
                }
            }
            if (t->final_mode && !t->data_ended && !t->failed && !t->sync_id && data_ended_all(t)) {
                end_of_data(t);
                did = true;
            }
            /* every input ended while a checkpoint was pending whose barrier no
             * predecessor will send any more (they finished): take it now, with
             * all the input in it (its trigger came while the task could not
             * act on it) */
            if (SL_UNLIKELY(t->final_mode && t->data_ended && !t->final_done && !t->failed && !t->sync_id &&
                            t->late_id > t->last_snap_id && t->late_id > t->bh.last_triggered && t->bh.current < 0 &&
                            inputs_ended(t))) {
                int64_t id = t->late_id;
                t->late_id = 0;
                perform_checkpoint(t, id, t->late_ts, t->late_kind);
                did = true;
            }
            /* without checkpointing the end of input ends the task; with it,
             * the final checkpoint must have completed too */
            if (inputs_ended(t) && !t->sync_id && (!t->final_mode || t->final_done)) break;
        }
        if (!did) {
            flush_all(t);
            wait_for_work(t, next, until_ns);
        } else {
            flush_if_timed_out(t);
        }
    }
    (void)source_done;
}

/* End of all input: end the chained operators in order. */
static void end_chain_input(sl_task_t *t) {
    for (int i = 1; i < t->nops && !t->failed; i++) {
        sl_operator_t *op = t->ops[i];
        for (int in = 0; in < (op->ninputs ? op->ninputs : 1); in++) {
            int rc = sl_op_end_input(op, in);
            if (rc < 0 && !t->failed) sl_task_fail(t, rc, sl_strerror(rc));
        }
    }
}

/* With checkpointing, the input's end: end the chain's input, tell
 * downstream that no more data comes, and tell the JobManager (a source:
 * the final checkpoint can start). */
static void end_of_data(sl_task_t *t) {
    end_chain_input(t);
    if (t->failed) return;
    for (int i = 0; i < t->nwriters; i++) sl_record_writer_end_of_data(t->writers[i]);
    t->data_ended = true;
    if (t->is_source) sl_deployment_task_end_of_data(t->dep, t);
    sl_fault_point("task.after-end-of-data");
}

/* The task's end: after the final checkpoint (if any), tell downstream. */
static void finish_chain(sl_task_t *t) {
    if (!t->final_mode) end_chain_input(t);
    for (int i = 0; i < t->nops && !t->failed && t->final_mode; i++) {
        sl_operator_t *op = t->ops[i];
        if (!op->vt->after_final_checkpoint) continue;
        int rc = op->vt->after_final_checkpoint(op);
        if (rc < 0 && !t->failed) sl_task_fail(t, rc, "finishing after the final checkpoint failed");
    }
    if (t->failed) return;
    for (int i = 0; i < t->nwriters; i++) sl_record_writer_end(t->writers[i]);
}

void *sl_task_main(void *arg) {
    sl_task_t *t = arg;
    t->start_ns = sl_mono_ns();
    PUB(t->pub.start_ns, t->start_ns);
    sl_op_bind_thread(&t->opctx, t->ops, t->nops);
    for (int i = t->nops - 1; i >= 0 && !t->failed; i--) {
        sl_operator_t *op = t->ops[i];
        if (op->vt->open) {
            int rc = op->vt->open(op);
            if (rc < 0 && !t->failed) sl_task_fail(t, rc, "open failed");
        }
    }
    for (int gi = 0; gi < t->ngates; gi++) { /* a restored watermark never goes back */
        sl_input_gate_t *g = &t->gates[gi];
        int64_t wm = t->ops[0]->in_wm[g->input];
        if (wm > g->valve.out_wm) g->valve.out_wm = wm;
    }
    if (!t->failed && t->nreplay) replay_inflight(t);
    if (!t->failed) run_loop(t);
    bool canceled = atomic_load(&t->cancel);
    if (!t->failed && !canceled && !t->stopped) { /* stopped with a savepoint: the input did not end */
        finish_chain(t);
        if (!t->failed) sl_deployment_task_final(t->dep, t);
    }
    if (t->pending) { /* cancelled or failed while capturing: the checkpoint cannot complete */
        sl_deployment_task_snapshot(NULL, t->pending);
        t->pending = NULL;
    }
    for (int i = 0; i < t->nops; i++)
        if (t->ops[i]->vt->close) t->ops[i]->vt->close(t->ops[i]);
    t->state_mem_ns = 0;        /* RocksDB state memory too */
    sl_task_publish_metrics(t); /* the final figures, before the task reports its end */
    if (t->failed)
        sl_deployment_task_failed(t->dep, t);
    else {
        t->finished = !canceled;
        sl_deployment_task_done(t->dep, t);
    }
    return NULL;
}
