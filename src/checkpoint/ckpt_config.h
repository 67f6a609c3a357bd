/*
 * ckpt_config.h — how a job checkpoints (Flink's CheckpointConfig): the
 * mode, interval, timeout, pauses, concurrency, tolerated failures and
 * unaligned barriers.  The JobManager's coordinator reads it to trigger and
 * time out checkpoints; the TaskManager's barrier handler reads the mode
 * and the unaligned settings.  Both sides include it, neither includes the
 * other.
 */
#ifndef SL_CKPT_CONFIG_H
#define SL_CKPT_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

typedef enum { SL_CKPT_EXACTLY_ONCE = 0, SL_CKPT_AT_LEAST_ONCE = 1 } sl_ckpt_mode_t;

/* What a barrier takes (Flink's SnapshotType).  Every kind but a checkpoint
 * is a savepoint: aligned always, state in the canonical format, files in
 * its own directory.  An intermediate savepoint (SAVEPOINT) commits no side
 * effect: the tasks are not told it completed (Flink 1.15+), so sinks keep
 * its transactions for the next checkpoint.  SUSPEND and TERMINATE are
 * stop-with-savepoint (synchronous): after the barrier a task processes
 * nothing more, waits for the savepoint to complete (its sinks commit on
 * that notification) and ends; TERMINATE (--drain) first advances event
 * time to the end (every window fires, every event-time timer runs). */
typedef enum sl_snapshot_kind {
    SL_SNAP_CHECKPOINT = 0,
    SL_SNAP_SAVEPOINT = 1,
    SL_SNAP_SAVEPOINT_SUSPEND = 2,   /* stop, no drain */
    SL_SNAP_SAVEPOINT_TERMINATE = 3, /* stop --drain */
} sl_snapshot_kind_t;
#define SL_SNAP_KIND_MAX 3
/* A savepoint's kind may carry SL_SNAP_NATIVE (--type native): keyed state
 * on RocksDB is written in RocksDB's own format (its SST files, copied
 * into the savepoint: self-contained), which restores into RocksDB only,
 * but is faster to take and to restore than the canonical format. */
#define SL_SNAP_NATIVE 0x10
static inline int sl_snap_base(int kind) { return kind & ~SL_SNAP_NATIVE; }
static inline bool sl_snap_native(int kind) { return (kind & SL_SNAP_NATIVE) != 0; }
/* A kind as messages and barriers may carry it. */
static inline bool sl_snap_kind_valid(int kind) {
    return kind >= 0 && sl_snap_base(kind) <= SL_SNAP_KIND_MAX &&
           !(sl_snap_native(kind) && sl_snap_base(kind) == SL_SNAP_CHECKPOINT);
}
static inline bool sl_snap_is_savepoint(int kind) { return sl_snap_base(kind) != SL_SNAP_CHECKPOINT; }
static inline bool sl_snap_is_sync(int kind) {
    return sl_snap_base(kind) == SL_SNAP_SAVEPOINT_SUSPEND || sl_snap_base(kind) == SL_SNAP_SAVEPOINT_TERMINATE;
}

typedef struct sl_ckpt_config {
    int64_t interval_ms;       /* 0: no periodic checkpoints */
    sl_ckpt_mode_t mode;
    int64_t timeout_ms;        /* default 10 min */
    int64_t min_pause_ms;      /* between the end of one and the start of the next */
    int max_concurrent;        /* default 1 */
    int tolerable_failed;      /* failures in a row before the job fails (default 0) */
    bool unaligned;            /* exactly-once only: barriers overtake in-flight data */
    int64_t aligned_timeout_ms; /* unaligned: start aligned, switch after this (0: unaligned at once) */
} sl_ckpt_config_t;

static inline void sl_ckpt_config_defaults(sl_ckpt_config_t *c) {
    memset(c, 0, sizeof *c);
    c->mode = SL_CKPT_EXACTLY_ONCE;
    c->timeout_ms = 10 * 60 * 1000;
    c->max_concurrent = 1;
}

#endif
