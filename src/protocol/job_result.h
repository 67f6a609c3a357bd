/*
 * job_result.h — how a job ended, as the JobManager reports it (Flink's
 * JobResult with the figures its web UI shows): the outcome, restarts,
 * the last attempt's checkpoint statistics and per-operator counters.
 * Embedded mode hands it to the environment; a cluster serves it over REST.
 */
#ifndef SL_JOB_RESULT_H
#define SL_JOB_RESULT_H

#include <stdint.h>
#include <stdlib.h>

#include "checkpoint/ckpt_stats.h"

typedef struct sl_job_result {
    int rc;                       /* 0, SL_ECANCELED, or the failure */
    char err[1024];
    int restarts;
    int64_t ckpts_completed;      /* of the last attempt */
    sl_ckpt_stats_t ckpt_stats[64];
    int nckpt_stats;
    sl_ckpt_task_stats_t *task_stats; /* [nckpt_stats][ntasks] */
    int ntasks;
    int64_t max_sync_ns;          /* longest synchronous snapshot phase */
    int nnodes;
    int64_t *records_in, *records_out, *records_skipped; /* per plan node, last attempt */
} sl_job_result_t;

static inline void sl_job_result_free(sl_job_result_t *r) {
    free(r->task_stats);
    free(r->records_in);
    free(r->records_out);
    free(r->records_skipped);
    r->task_stats = NULL;
    r->records_in = r->records_out = r->records_skipped = NULL;
}

#endif
