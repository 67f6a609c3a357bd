/*
 * job_master.h — the JobManager side of one job (Flink's JobMaster with its
 * scheduler and CheckpointCoordinator): it places the plan's subtasks on
 * TaskManagers' slots, deploys them, coordinates checkpoints (triggers go
 * out as messages, acknowledgements come back as messages carrying state
 * handles, and _metadata is written here), decides restarts with the
 * job's restart strategy, and redeploys from the latest completed
 * checkpoint.  State never passes through it beyond the handles and the
 * small inline blobs of an acknowledgement.
 *
 * It sees the plan (plan/plan.h), checkpoint storage and metadata, and the
 * messages (protocol/messages.h); never the builder, never a task.
 *
 * Threads: sl_jm_run blocks the caller's thread for the whole job;
 * sl_jm_handle (messages from TaskManagers) and sl_jm_cancel may be called
 * from any thread.  `send` to a TaskManager is called from the run thread,
 * the coordinator's thread and the handling thread; it must not block on
 * the TaskManager.
 */
#ifndef SL_JOB_MASTER_H
#define SL_JOB_MASTER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "jobmanager/checkpoint_coordinator.h"
#include "plan/plan.h"
#include "protocol/job_result.h"
#include "protocol/messages.h"

typedef struct sl_job_master sl_job_master_t;

/* A TaskManager as the JobManager sees it: where its messages go and how
 * many slots it offers.  send takes ownership of m. */
typedef struct sl_jm_taskmanager {
    const char *id;
    int slots;
    void (*send)(void *ctx, sl_msg_t *m);
    void *ctx;
    const char *host;            /* where its data port is ("" in embedded mode) */
    int data_port;
} sl_jm_taskmanager_t;

typedef struct sl_jm_config {
    const char *artifact;        /* what TaskManagers build the job from ("" in embedded mode) */
    int nargs;
    char **args;
    const char *restore_path;    /* chk-<n> directory to start from, or NULL */
    /* A cluster's TaskManagers change: when set, each attempt asks for the
     * live ones (at most cap) instead of using those added before the run.
     * The strings must stay valid until the job master is destroyed. */
    int (*list_taskmanagers)(void *ctx, sl_jm_taskmanager_t *out, int cap);
    void *list_ctx;
    /* slot.request.timeout: how long an attempt waits for enough slots
     * before it fails (0: fail at once) */
    int64_t slot_request_timeout_ms;
    /* cluster.evenly-spread-out-slots: each slot from the least used
     * TaskManager, instead of filling one TaskManager after the other */
    bool evenly_spread_out_slots;
} sl_jm_config_t;

/* Takes a copy of plan (encoded and decoded: what a cluster ships). */
int sl_jm_new(const sl_plan_t *plan, const sl_jm_config_t *cfg, sl_job_master_t **out, char *err, size_t errlen);
/* A TaskManager whose slots the scheduler may use (before sl_jm_run). */
void sl_jm_add_taskmanager(sl_job_master_t *jm, const sl_jm_taskmanager_t *tm);
/* Runs the job to its end (restarts included); fills *res. */
int sl_jm_run(sl_job_master_t *jm, sl_job_result_t *res);
/* A message from a TaskManager (ownership passes). */
void sl_jm_handle(sl_job_master_t *jm, sl_msg_t *m);
void sl_jm_cancel(sl_job_master_t *jm);
/* TaskManager tm_id is gone (missed heartbeats, its connection failed):
 * its subtasks of the current attempt count as failed, with `why` as the
 * cause, and the attempt is cancelled everywhere else.  Any thread. */
void sl_jm_taskmanager_lost(sl_job_master_t *jm, const char *tm_id, const char *why);
/* The job's id (its directory under the checkpoint directory) and name. */
const char *sl_jm_job_id(const sl_job_master_t *jm);
const char *sl_jm_job_name(const sl_job_master_t *jm);
/* "CREATED", "RUNNING", "RESTARTING", "FINISHED", "FAILED", "CANCELED"
 * (Flink's JobStatus), and the attempt running.  Any thread. */
const char *sl_jm_status(sl_job_master_t *jm, int *attempt);
const sl_plan_t *sl_jm_plan(const sl_job_master_t *jm);
void sl_jm_destroy(sl_job_master_t *jm);

#endif
