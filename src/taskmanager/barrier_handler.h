/*
 * barrier_handler.h — what a task does when checkpoint barriers arrive on
 * its input channels (Flink's CheckpointBarrierHandler):
 *
 *   aligned (exactly-once): the first barrier n blocks its channel; the
 *     channel's later data waits (in its buffers, never dropped) until
 *     barrier n has arrived on every channel; then the task snapshots,
 *     forwards the barrier and every channel is released.
 *   at-least-once: nothing is blocked; the task snapshots when the last
 *     barrier n arrives.
 *   unaligned (exactly-once): the task snapshots at the FIRST barrier n,
 *     forwards it ahead of its queued output, and blocks nothing; until
 *     barrier n arrives on the other channels, what they deliver is
 *     in-flight data of checkpoint n (the task captures it, the checkpoint
 *     stores it, a restore replays it).  With an aligned-checkpoint
 *     timeout > 0 a checkpoint starts aligned and switches to unaligned
 *     once it is older than the timeout (sl_bh_timeout).
 *
 * A savepoint's barrier (sl_bh_barrier_kind) is aligned even when
 * unaligned checkpoints are on, as in Flink.
 *
 * A channel that has ended counts as having delivered every later barrier.
 * A barrier of a newer checkpoint while one is being aligned aborts the
 * older one (it can no longer complete) and starts the newer; an older
 * barrier is ignored.  This is a pure state machine over channel indexes;
 * the task owns the buffers.  Task thread only.
 */
#ifndef SL_BARRIER_HANDLER_H
#define SL_BARRIER_HANDLER_H

#include <stdbool.h>
#include <stdint.h>

#include "checkpoint/ckpt_config.h" /* sl_ckpt_mode_t */

typedef enum {
    SL_BH_NONE = 0,    /* keep going */
    SL_BH_TRIGGER = 1, /* every channel delivered barrier `id`: snapshot now, then sl_bh_release */
    SL_BH_TRIGGER_UNALIGNED = 2, /* snapshot now, forward the barrier ahead of the output, and capture
                                    the channels for which sl_bh_capturing holds */
    SL_BH_UNALIGNED_DONE = 3,    /* the last barrier of an unaligned snapshot: its in-flight data is
                                    complete; hand the snapshot over, then sl_bh_release */
} sl_bh_action_t;

typedef struct sl_barrier_handler {
    sl_ckpt_mode_t mode;
    int nch;
    bool *arrived;   /* barrier `current` seen on this channel */
    bool *ended;
    int narrived;    /* channels arrived or ended */
    int64_t current; /* checkpoint being aligned, or -1 */
    int64_t last_triggered;
    int64_t aborted; /* checkpoints given up because a newer one came */
    int64_t align_start_ns;
    /* unaligned checkpoints */
    bool unaligned;
    int64_t aligned_timeout_ms;  /* 0: unaligned from the first barrier */
    int64_t current_ts;          /* wall-clock time the current checkpoint was triggered */
    int current_kind;            /* sl_snapshot_kind_t of `current`: a savepoint is never unaligned */
    bool snapshotted;            /* the current checkpoint's unaligned snapshot was taken */
    int64_t unaligned_count;     /* checkpoints taken unaligned (metrics, tests) */
} sl_barrier_handler_t;

void sl_bh_init(sl_barrier_handler_t *h, int nch, sl_ckpt_mode_t mode);
void sl_bh_free(sl_barrier_handler_t *h);
/* Barrier `id` on channel ch.  *aborted_id is set (else -1) when an older
 * pending checkpoint was given up. */
sl_bh_action_t sl_bh_barrier(sl_barrier_handler_t *h, int ch, int64_t id, int64_t *aborted_id);
/* Same, with the checkpoint's trigger time (wall ms) for the aligned
 * timeout. */
sl_bh_action_t sl_bh_barrier_ts(sl_barrier_handler_t *h, int ch, int64_t id, int64_t ts, int64_t *aborted_id);
/* Same, with the barrier's kind (sl_snapshot_kind_t): a savepoint's
 * barrier is always aligned, whatever the unaligned settings. */
sl_bh_action_t sl_bh_barrier_kind(sl_barrier_handler_t *h, int ch, int64_t id, int64_t ts, int kind,
                                  int64_t *aborted_id);
/* Turns on unaligned checkpoints (exactly-once mode only). */
void sl_bh_set_unaligned(sl_barrier_handler_t *h, bool on, int64_t aligned_timeout_ms);
/* While aligning: TRIGGER_UNALIGNED once the checkpoint is older than the
 * aligned-checkpoint timeout at wall time now_ms, else NONE. */
sl_bh_action_t sl_bh_timeout(sl_barrier_handler_t *h, int64_t now_ms);
/* True while channel ch's data is in-flight data of an unaligned
 * snapshot (taken, but barrier not yet seen on ch). */
static inline bool sl_bh_capturing(const sl_barrier_handler_t *h, int ch) {
    return h->snapshotted && !h->arrived[ch] && !h->ended[ch];
}
/* Channel ch ended; may complete an alignment. */
sl_bh_action_t sl_bh_end(sl_barrier_handler_t *h, int ch);
/* True while channel ch must not be read (aligned mode only). */
static inline bool sl_bh_blocked(const sl_barrier_handler_t *h, int ch) {
    return h->mode == SL_CKPT_EXACTLY_ONCE && h->current >= 0 && h->arrived[ch] && !h->snapshotted;
}
/* After the snapshot of a TRIGGER: unblocks every channel. */
void sl_bh_release(sl_barrier_handler_t *h);

#endif
