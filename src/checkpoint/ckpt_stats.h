/*
 * ckpt_stats.h — the figures of a checkpoint (Flink's checkpoint
 * statistics): per task what it reported with its acknowledgement, per
 * checkpoint the sums and maxima.  The coordinator (jobmanager/) keeps
 * them; the job's result (protocol/job_result.h) and the API report them.
 */
#ifndef SL_CKPT_STATS_H
#define SL_CKPT_STATS_H

#include <stdbool.h>
#include <stdint.h>

/* What one task reports with its acknowledgement. */
typedef struct sl_ckpt_task_stats {
    int64_t align_us;        /* first barrier to last (0: one input or a source) */
    int64_t sync_us;         /* synchronous phase */
    int64_t async_us;        /* asynchronous phase: persisting */
    int64_t state_bytes;     /* bytes persisted: state files and blobs */
    int64_t inflight_bytes;  /* of which in-flight data (unaligned) */
    bool unaligned;
    bool acked;
    int64_t ack_ms;          /* wall clock when the JobManager got the acknowledgement (0: not known) */
} sl_ckpt_task_stats_t;

typedef struct sl_ckpt_stats {
    int64_t id;
    int64_t trigger_ms;      /* wall clock */
    int64_t duration_ms;     /* trigger to complete */
    int acks;
    bool completed;
    bool aborted;
    /* over the tasks that acknowledged: sums and maxima */
    int64_t state_bytes, inflight_bytes;
    int64_t max_align_us, max_sync_us, max_async_us;
    int unaligned_tasks;
    uint8_t kind;            /* sl_snapshot_kind_t (ckpt_config.h) */
} sl_ckpt_stats_t;

#endif
