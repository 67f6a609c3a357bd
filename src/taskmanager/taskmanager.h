/*
 * taskmanager.h — a TaskManager (Flink's TaskExecutor): it offers slots,
 * and runs the deployments the JobManager sends it — one per job attempt
 * (deployment.h) — answering in messages (protocol/messages.h).
 *
 * The job's code comes from `resolve`: given a DEPLOY, it returns the plan
 * to run and the code its nodes name.  Embedded mode resolves to the
 * environment's own plan and code; a cluster TaskManager builds the job
 * from its artifact.  Either way the plan used must have the fingerprint
 * the DEPLOY carries, or the deployment is refused with a message saying so.
 *
 * Threads: sl_tm_handle is called by the transport, one message at a time
 * and in the order the JobManager sent them; `send` may be called from any
 * thread of the TaskManager.
 */
#ifndef SL_TASKMANAGER_H
#define SL_TASKMANAGER_H

#include "plan/job_code.h"
#include "plan/plan.h"
#include "protocol/messages.h"

typedef struct sl_taskmanager sl_taskmanager_t;

typedef struct sl_tm_config {
    const char *id;              /* "tm-1" */
    int slots;
    /* to the JobManager; takes ownership of m */
    void (*send)(void *ctx, sl_msg_t *m);
    void *send_ctx;
    /* the plan and code of a deployment: 0, or an error in err */
    int (*resolve)(void *ctx, const sl_msg_deploy_t *d, const sl_plan_t **plan, const sl_job_code_t **code, char *err,
                   size_t errlen);
    void *resolve_ctx;
    /* the data plane for channels to other TaskManagers (NULL in embedded mode) */
    struct sl_data_plane *dp;
} sl_tm_config_t;

sl_taskmanager_t *sl_tm_new(const sl_tm_config_t *cfg);
/* A message from the JobManager (ownership passes). */
void sl_tm_handle(sl_taskmanager_t *tm, sl_msg_t *m);
/* The JobManager is gone: every deployment is cancelled (Flink's
 * TaskExecutor fails its tasks when it loses its JobManager).  On the
 * thread that calls sl_tm_handle. */
void sl_tm_cancel_all(sl_taskmanager_t *tm, const char *why);
/* Remote channel id failed: the deployment that has it fails with the
 * message.  On the thread that calls sl_tm_handle. */
void sl_tm_channel_failed(sl_taskmanager_t *tm, uint64_t id, const char *why);
/* Cancels and joins every deployment, then frees. */
void sl_tm_destroy(sl_taskmanager_t *tm);

/* Prometheus text of every subtask this TaskManager runs (flink_taskmanager_job_task_* names); any thread. */
void sl_tm_prom_render(sl_taskmanager_t *tm, sl_buf_t *out);

#endif
