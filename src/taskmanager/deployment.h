/*
 * deployment.h — the TaskManager side of one attempt of a job (Flink's
 * tasks of one ExecutionGraph attempt on a TaskExecutor): the subtasks a
 * DEPLOY message gave this TaskManager, with their operators, input gates,
 * record writers and channels, one thread per task, restored from the
 * checkpoint the message names, and the writer that persists their
 * snapshots to checkpoint storage and acknowledges them.
 *
 * It talks to the JobManager only through messages (protocol/messages.h),
 * which it hands to `send`: TASK_STATE when a task runs, finishes, is
 * cancelled or fails; ACK with the state handles of a persisted snapshot;
 * DECLINE.  It reads the plan (plan/plan.h) and the job's code
 * (plan/job_code.h); it never sees the builder or the JobManager.
 *
 * Pointwise edges (forward, rescale) connect subtask i upstream to the
 * downstream subtasks Flink would connect; all-to-all edges (hash,
 * rebalance, broadcast) connect every pair.  Channels between two local
 * subtasks are in memory.
 *
 * Threads: new/start/join/destroy belong to the TaskManager's thread that
 * owns the deployment; trigger, notify and cancel may be called from any
 * thread (they post mail to the tasks); `send` is called from task threads
 * and the writer thread.
 */
#ifndef SL_DEPLOYMENT_H
#define SL_DEPLOYMENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plan/job_code.h"
#include "plan/plan.h"
#include "protocol/messages.h"

typedef struct sl_deployment sl_deployment_t;
typedef struct sl_data_plane sl_data_plane_t;

/* Takes ownership of m. */
typedef void (*sl_dep_send_fn)(void *ctx, sl_msg_t *m);

/* Builds the subtasks d->tasks of the plan (restoring state when
 * d->restore_path is set) and settles what two-phase-commit sinks left
 * behind.  A channel to or from a subtask that another TaskManager runs
 * (d->placements, d->peers) goes through the data plane dp; without one
 * (embedded mode) such a deployment is refused.  plan and code must
 * outlive the deployment.  0, or an error with the message in err
 * (nothing was started). */
/* Live metrics: while its tasks run, a deployment sends METRICS (every
 * local subtask's cumulative figures) every SL_METRICS_REPORT_INTERVAL_MS
 * (messages.h), and each task's final figures just before its terminal
 * TASK_STATE. */
/* The TaskManager id the deployment's METRICS reports name (before start). */
void sl_deployment_set_tm_id(sl_deployment_t *dep, const char *tm_id);
/* Prometheus metric families of a TaskManager (taskmanager.c names them):
 * per operator, then per task (accumulated times, ms). */
enum {
    SL_PROM_OP_IN, SL_PROM_OP_OUT, SL_PROM_OP_IN_WM, SL_PROM_OP_OUT_WM, SL_PROM_OP_LATE, SL_PROM_OP_PENDING,
    /* keyed operators' state memory (samples only where known) */
    SL_PROM_OP_STATE_MEM, SL_PROM_OP_RDB_MEMTABLES, SL_PROM_OP_RDB_READERS, SL_PROM_OP_RDB_BLOCK_CACHE,
    SL_PROM_OP_RDB_LIVE_DATA,
    SL_PROM_TASK_BUSY, SL_PROM_TASK_IDLE, SL_PROM_TASK_BP, SL_PROM_TASK_BYTES_IN, SL_PROM_TASK_BYTES_OUT,
    SL_PROM_NFAMILIES
};
/* Appends family's samples (named `name`) for the deployment's subtasks
 * (any thread: reads what the tasks published). */
void sl_deployment_prom_family(sl_deployment_t *dep, int family, const char *name, const char *tm_id, sl_buf_t *out);
int sl_deployment_new(const sl_plan_t *plan, const sl_job_code_t *code, const sl_msg_deploy_t *d,
                      sl_data_plane_t *dp, sl_dep_send_fn send, void *send_ctx, sl_deployment_t **out, char *err,
                      size_t errlen);
/* A remote channel of this deployment failed (the data plane said why):
 * the deployment fails with that message.  Any thread. */
void sl_deployment_fail(sl_deployment_t *dep, int rc, const char *why);
/* Whether channel id is one of this deployment's remote channels. */
bool sl_deployment_has_channel(const sl_deployment_t *dep, uint64_t id);
/* Starts every task's thread and the snapshot writer. */
int sl_deployment_start(sl_deployment_t *dep, char *err, size_t errlen);
/* Blocks until every task has ended, then stops the writer (snapshots not
 * yet persisted are dropped: the attempt is over). */
void sl_deployment_join(sl_deployment_t *dep);
/* Source tasks (and tasks whose inputs all ended) inject barrier `id`. */
void sl_deployment_trigger(sl_deployment_t *dep, int64_t id, int64_t ts, int kind);
/* Checkpoint `id` completed (or was aborted): every task is told. */
void sl_deployment_notify(sl_deployment_t *dep, int64_t id, bool complete);
/* Cancels every task (and fails every blocked producer). */
void sl_deployment_cancel(sl_deployment_t *dep);
void sl_deployment_destroy(sl_deployment_t *dep);
/* The task of subtask `subtask` of `vertex` when this deployment runs it,
 * else NULL (state queries post their lookup to it).  Any thread. */
struct sl_task *sl_deployment_local_task(sl_deployment_t *dep, int vertex, int subtask);
/* The job and attempt it runs. */
const char *sl_deployment_job(const sl_deployment_t *dep);
int sl_deployment_attempt(const sl_deployment_t *dep);

#endif
