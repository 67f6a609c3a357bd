/* barrier_handler.c — see barrier_handler.h. */
#include "taskmanager/barrier_handler.h"

#include "common/common.h"

void sl_bh_init(sl_barrier_handler_t *h, int nch, sl_ckpt_mode_t mode) {
    memset(h, 0, sizeof *h);
    h->mode = mode;
    h->nch = nch;
    h->arrived = sl_calloc((size_t)(nch ? nch : 1), sizeof(bool));
    h->ended = sl_calloc((size_t)(nch ? nch : 1), sizeof(bool));
    h->current = -1;
    h->last_triggered = -1;
}

void sl_bh_free(sl_barrier_handler_t *h) {
    sl_free(h->arrived);
    sl_free(h->ended);
    h->arrived = h->ended = NULL;
}

static void reset(sl_barrier_handler_t *h) {
    h->current = -1;
    h->snapshotted = false;
    h->narrived = 0;
    for (int i = 0; i < h->nch; i++) {
        h->arrived[i] = false;
        if (h->ended[i]) h->narrived++;
    }
}

static sl_bh_action_t check(sl_barrier_handler_t *h) {
    if (h->current >= 0 && h->narrived == h->nch) {
        h->last_triggered = h->current;
        return h->snapshotted ? SL_BH_UNALIGNED_DONE : SL_BH_TRIGGER;
    }
    return SL_BH_NONE;
}

static sl_bh_action_t go_unaligned(sl_barrier_handler_t *h) {
    h->snapshotted = true;
    h->unaligned_count++;
    return SL_BH_TRIGGER_UNALIGNED;
}

void sl_bh_set_unaligned(sl_barrier_handler_t *h, bool on, int64_t aligned_timeout_ms) {
    h->unaligned = on && h->mode == SL_CKPT_EXACTLY_ONCE;
    h->aligned_timeout_ms = aligned_timeout_ms > 0 ? aligned_timeout_ms : 0;
}

sl_bh_action_t sl_bh_timeout(sl_barrier_handler_t *h, int64_t now_ms) {
    if (!h->unaligned || h->current < 0 || h->snapshotted || h->narrived == h->nch || h->current_kind)
        return SL_BH_NONE;
    if (now_ms - h->current_ts < h->aligned_timeout_ms) return SL_BH_NONE;
    return go_unaligned(h);
}

sl_bh_action_t sl_bh_barrier(sl_barrier_handler_t *h, int ch, int64_t id, int64_t *aborted_id) {
    return sl_bh_barrier_ts(h, ch, id, INT64_MAX, aborted_id);
}

sl_bh_action_t sl_bh_barrier_ts(sl_barrier_handler_t *h, int ch, int64_t id, int64_t ts, int64_t *aborted_id) {
    return sl_bh_barrier_kind(h, ch, id, ts, SL_SNAP_CHECKPOINT, aborted_id);
}

sl_bh_action_t sl_bh_barrier_kind(sl_barrier_handler_t *h, int ch, int64_t id, int64_t ts, int kind,
                                  int64_t *aborted_id) {
    *aborted_id = -1;
    if (id <= h->last_triggered) return SL_BH_NONE; /* stale */
    if (h->current >= 0 && id < h->current) return SL_BH_NONE;
    if (h->current >= 0 && id > h->current) { /* a newer checkpoint overtook: give up the older */
        *aborted_id = h->current;
        h->aborted++;
        reset(h);
    }
    if (h->current < 0) {
        reset(h);
        h->current = id;
        h->current_ts = ts;
        h->current_kind = kind;
        h->align_start_ns = sl_mono_ns();
    }
    if (!h->arrived[ch] && !h->ended[ch]) {
        h->arrived[ch] = true;
        h->narrived++;
    }
    sl_bh_action_t a = check(h);
    if (a != SL_BH_NONE) return a;
    /* Unaligned: snapshot at the first barrier (timeout 0) or once the
     * checkpoint is older than the aligned timeout. */
    if (h->unaligned && !h->snapshotted && h->current_kind == SL_SNAP_CHECKPOINT &&
        (h->aligned_timeout_ms == 0 || (ts != INT64_MAX && sl_wall_ms() - ts >= h->aligned_timeout_ms)))
        return go_unaligned(h);
    return SL_BH_NONE;
}

sl_bh_action_t sl_bh_end(sl_barrier_handler_t *h, int ch) {
    if (h->ended[ch]) return SL_BH_NONE;
    h->ended[ch] = true;
    if (h->current >= 0 && !h->arrived[ch]) h->narrived++;
    return check(h);
}

void sl_bh_release(sl_barrier_handler_t *h) { reset(h); }
