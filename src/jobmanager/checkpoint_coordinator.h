/*
 * coordinator.h — the checkpoint coordinator (Flink's CheckpointCoordinator
 * and PendingCheckpoint): triggers checkpoint n (periodically or on
 * demand) by asking every source task to inject barrier n, collects each
 * task's acknowledgement, and when all have acknowledged declares n
 * complete and has every task notified.  A checkpoint that does not
 * complete within the timeout is aborted and the tasks are told; more than
 * the tolerated number of failures in a row fails the job.
 *
 * Today completion is recorded in memory; checkpoint storage (state files,
 * `_metadata` written durably before the notification) plugs in at
 * `complete()` — the notification is sent only after it returned.
 *
 * Threads: the coordinator has its own timer thread; ack/decline/finished
 * may be called from any task thread.  The hooks run on the coordinator's
 * thread or the acknowledging thread, never with the coordinator's lock
 * held.
 */
#ifndef SL_COORDINATOR_H
#define SL_COORDINATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "checkpoint/ckpt_config.h"
#include "checkpoint/ckpt_stats.h"

typedef struct sl_coordinator_hooks {
    void *ctx;
    /* Ask every running source task to inject barrier `id` of this kind
     * (sl_snapshot_kind_t, checkpoint/ckpt_config.h). */
    void (*trigger)(void *ctx, int64_t id, int64_t ts, int kind);
    /* Checkpoint `id` is complete: notify every task (an intermediate
     * savepoint: the hook decides; Flink tells no task). */
    void (*complete)(void *ctx, int64_t id, int kind);
    /* Checkpoint `id` was aborted (timeout, decline): tell every task. */
    void (*aborted)(void *ctx, int64_t id, const char *why);
    /* Too many failed checkpoints: fail the job with this message. */
    void (*fail_job)(void *ctx, const char *why);
    /* Optional: before the trigger (e.g. create chk-<id>); < 0 aborts it. */
    int (*prepare)(void *ctx, int64_t id, int64_t ts, int kind, char *err, size_t errlen);
    /* Optional: every task acknowledged; make the checkpoint durable (write
     * _metadata last).  Only when it returns 0 is `complete` called; < 0
     * aborts the checkpoint. */
    int (*finalize)(void *ctx, int64_t id, int kind, char *err, size_t errlen);
} sl_coordinator_hooks_t;

typedef struct sl_coordinator sl_coordinator_t;

sl_coordinator_t *sl_coordinator_new(const sl_ckpt_config_t *cfg, int ntasks, sl_coordinator_hooks_t hooks);
void sl_coordinator_destroy(sl_coordinator_t *c);
/* After a restore from checkpoint n: the next checkpoint is n + 1 (an id
 * lower than the next one already is changes nothing). */
void sl_coordinator_set_next_id(sl_coordinator_t *c, int64_t next);
/* The id the next checkpoint would get. */
int64_t sl_coordinator_next_id(sl_coordinator_t *c);
/* Starts periodic triggering (if an interval is set). */
void sl_coordinator_start(sl_coordinator_t *c);
/* Stops the timer thread; pending checkpoints are dropped. */
void sl_coordinator_stop(sl_coordinator_t *c);
/* Triggers a checkpoint now; returns its id, or -1 when too many are pending. */
int64_t sl_coordinator_trigger(sl_coordinator_t *c);
/* Triggers a snapshot of this kind now (a savepoint is not held back by
 * max concurrent checkpoints or the minimum pause); returns its id, or -1
 * when it could not start (too many pending, a stop-with-savepoint already
 * under way, or its prepare failed: the aborted hook said why).  While a
 * stop-with-savepoint is pending no periodic checkpoint starts; once it
 * completed none starts again. */
int64_t sl_coordinator_trigger_kind(sl_coordinator_t *c, int kind);
/* Every source's input ended (FLIP-147): the final checkpoint, which lets
 * the tasks finish, starts now rather than at the next interval — at once
 * if no checkpoint is pending, else as soon as the timer thread can.  Any
 * thread. */
void sl_coordinator_request_final(sl_coordinator_t *c);
/* Task `task` (0..ntasks-1) acknowledged checkpoint `id`. */
void sl_coordinator_ack(sl_coordinator_t *c, int64_t id, int task);
/* Same, with the task's figures (kept per task for the recent checkpoints). */
void sl_coordinator_ack_stats(sl_coordinator_t *c, int64_t id, int task, const sl_ckpt_task_stats_t *ts);
/* The per-task figures of a recent checkpoint: out[ntasks]; 0, or
 * SL_ENOTFOUND when id is no longer (or never was) kept. */
int sl_coordinator_task_stats(sl_coordinator_t *c, int64_t id, sl_ckpt_task_stats_t *out);
void sl_coordinator_decline(sl_coordinator_t *c, int64_t id, int task, const char *why);
/* Task `task` finished: it acknowledges every later checkpoint implicitly. */
void sl_coordinator_task_finished(sl_coordinator_t *c, int task);
/* Completed checkpoints so far, and the latest completed id (-1: none). */
int64_t sl_coordinator_completed(const sl_coordinator_t *c, int64_t *latest);
/* Copies up to cap recent stats (newest last); returns how many. */
int sl_coordinator_stats(sl_coordinator_t *c, sl_ckpt_stats_t *out, int cap);

#endif
