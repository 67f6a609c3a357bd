/*
 * job_metrics.h — the JobManager's view of a job's live metrics: the
 * latest METRICS report of every subtask, and the time shares
 * (busyTimeMsPerSecond, ...) computed from successive reports, as Flink's
 * MetricStore keeps them for the REST API.  Thread-safe (own mutex).
 */
#ifndef SL_JOB_METRICS_H
#define SL_JOB_METRICS_H

#include "plan/plan.h"
#include "protocol/messages.h"
#include "sluice/metrics.h"

/* Operators of one chain that the store keeps (a longer chain keeps its first ones). */
#define SL_METRICS_MAX_CHAIN 16

typedef struct sl_job_metrics sl_job_metrics_t;

/* One subtask as of its latest report. */
typedef struct sl_jm_subtask_metrics {
    bool reported;               /* a report arrived this attempt */
    int64_t time_ns;             /* the report's TaskManager clock */
    int64_t busy_ns, idle_ns, backpressured_ns; /* cumulative */
    int64_t bytes_in, bytes_out;                /* cumulative */
    double busy_ms_per_s, bp_ms_per_s, idle_ms_per_s; /* -1 until two reports */
    int nops;
    sl_msg_op_metrics_t ops[SL_METRICS_MAX_CHAIN];
    char tm_id[64];
} sl_jm_subtask_metrics_t;

/* A store for plan's tasks (plan outlives it). */
sl_job_metrics_t *sl_job_metrics_new(const sl_plan_t *plan);
void sl_job_metrics_free(sl_job_metrics_t *m);
/* A new attempt: forget every subtask's figures. */
void sl_job_metrics_reset(sl_job_metrics_t *m);
/* A METRICS report of the current attempt (entries naming tasks that are
 * not in the plan are ignored); calls the listener for each subtask. */
void sl_job_metrics_update(sl_job_metrics_t *m, const sl_msg_metrics_t *r);
void sl_job_metrics_set_listener(sl_job_metrics_t *m, sl_metrics_listener_fn fn, void *ctx);
/* Copies the figures of task `index` (the plan's numbering); false when
 * out of range. */
bool sl_job_metrics_subtask(sl_job_metrics_t *m, int index, sl_jm_subtask_metrics_t *out);

#endif
