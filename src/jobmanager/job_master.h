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

/* High availability (the dispatcher wires src/ha/'s stores in here): the
 * checkpoint id counter and the completed checkpoint store live outside
 * the job master, so a new leader goes on where this one stopped.  Each
 * hook runs on the coordinator's or the run thread; ctx is the caller's. */
typedef struct sl_jm_ha {
    void *ctx;
    /* Before checkpoint (or savepoint) id is triggered: issue the id; < 0
     * refuses it (it was issued already: this JobManager is no longer the
     * one running the job) and the checkpoint is aborted with err. */
    int (*issue_checkpoint_id)(void *ctx, int64_t id, char *err, size_t errlen);
    /* Checkpoint id's _metadata is written in dir: add it to the completed
     * checkpoint store (keeping `retain`); < 0 fails the checkpoint, which
     * is then not acknowledged to any task. */
    int (*checkpoint_completed)(void *ctx, int64_t id, const char *dir, int retain, char *err, size_t errlen);
    /* At each attempt's start: the first id this job may issue (<= 0: no
     * opinion). */
    int64_t (*next_checkpoint_id)(void *ctx);
    /* Before a restart: the latest completed checkpoint's directory; 0, or
     * SL_ENOTFOUND when there is none. */
    int (*latest_checkpoint)(void *ctx, char *dir, size_t cap);
    /* Before a checkpoint's _metadata is written: < 0 when this JobManager
     * cannot show it still leads (one round trip to ZooKeeper), and the
     * checkpoint is aborted. */
    int (*check_leadership)(void *ctx, char *err, size_t errlen);
} sl_jm_ha_t;

typedef struct sl_jm_config {
    const char *artifact;        /* what TaskManagers build the job from ("" in embedded mode) */
    int nargs;
    char **args;
    const char *restore_path;    /* chk-<n> or savepoint directory to start from, or NULL */
    /* -n / --allowNonRestoredState (execution.savepoint.ignore-unclaimed-state):
     * state of an operator that is not in the job is dropped with a warning
     * instead of refused */
    bool allow_non_restored_state;
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
    /* high availability; NULL: none (copied) */
    const sl_jm_ha_t *ha;
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
/* Cancels the job because this JobManager stopped leading (high
 * availability): as sl_jm_cancel, but its checkpoints stay whatever the
 * retention says (the next leader restores the latest) and sl_jm_run ends
 * with SL_ECANCELED and sl_jm_suspended true.  Any thread. */
void sl_jm_suspend(sl_job_master_t *jm);
bool sl_jm_suspended(sl_job_master_t *jm);
/* Starts a savepoint of the running attempt into a new directory under
 * dir (absolute; NULL or "": execution.checkpointing.savepoint-dir); kind
 * is SL_SNAP_SAVEPOINT, or SL_SNAP_SAVEPOINT_SUSPEND / _TERMINATE to stop
 * the job with it (without / with --drain).  *id is its checkpoint id, for
 * sl_jm_savepoint_result.  SL_ESTATE: the job is not running, or has no
 * checkpoint coordinator or checkpoint directory (a savepoint is staged
 * there) or it cannot start now (a stop is already under way, too many
 * pending); SL_EINVAL: no usable directory.  Any thread. */
int sl_jm_savepoint(sl_job_master_t *jm, const char *dir, int kind, int64_t *id, char *err, size_t errlen);
/* The outcome of savepoint id: 1 when it ended (location set, or failure
 * non-empty), 0 while in progress, SL_ENOTFOUND if not known (the last 64
 * are kept).  Any thread. */
int sl_jm_savepoint_result(sl_job_master_t *jm, int64_t id, char *location, size_t lcap, char *failure, size_t fcap);
/* TaskManager tm_id is gone (missed heartbeats, its connection failed):
 * its subtasks of the current attempt count as failed, with `why` as the
 * cause, and the attempt is cancelled everywhere else.  Any thread. */
void sl_jm_taskmanager_lost(sl_job_master_t *jm, const char *tm_id, const char *why);
/* The job's id (its directory under the checkpoint directory) and name. */
const char *sl_jm_job_id(const sl_job_master_t *jm);
const char *sl_jm_job_name(const sl_job_master_t *jm);
/* The job's artifact as submitted ("builtin:NAME" or the JobManager's copy of the file). */
const char *sl_jm_artifact(const sl_job_master_t *jm);
/* "CREATED", "RUNNING", "RESTARTING", "FINISHED", "FAILED", "CANCELED"
 * (Flink's JobStatus), and the attempt running.  Any thread. */
const char *sl_jm_status(sl_job_master_t *jm, int *attempt);
const sl_plan_t *sl_jm_plan(const sl_job_master_t *jm);
/* Where task index `task` of the running attempt runs: 0 with *gw (a copy:
 * its ctx stays valid until the job master is destroyed) and
 * the attempt; tm_id (tmcap bytes) its TaskManager's id (gw->id and
 * gw->host are NULL: they change between attempts).  SL_ESTATE with the
 * reason when the job is not RUNNING or that subtask is not (state
 * queries, state_query.h).  Any thread. */
int sl_jm_task_gateway(sl_job_master_t *jm, int task, sl_jm_taskmanager_t *gw, int *attempt, char *tm_id,
                       size_t tmcap, char *err, size_t errlen);
void sl_jm_destroy(sl_job_master_t *jm);

/* ---- for the REST API (any thread) ---- */

/* One failure of an attempt (Flink's exception history entry). */
typedef struct sl_jm_exception {
    char name[64];               /* "sluice.TaskException", "sluice.TaskManagerLostException", ... */
    char message[1024];
    int64_t timestamp;           /* ms since the epoch */
    char task[300];              /* "<vertex name> (<subtask + 1>/<parallelism>)", "" = not a task's */
    char tm_id[128];             /* the TaskManager it ran on, "" = none */
    char location[300];          /* that TaskManager's host:data-port, "" = none */
} sl_jm_exception_t;

/* The failures kept (the newest 16), oldest first, into out[cap]; returns how many. */
int sl_jm_exceptions(sl_job_master_t *jm, sl_jm_exception_t *out, int cap);

/* The checkpoints the job master knows, over every attempt: the figures
 * of the recent ones and the counts since the job started. */
typedef struct sl_jm_ckpt_view {
    sl_ckpt_stats_t *stats;      /* oldest first (earlier attempts' first); sl_malloc'ed */
    sl_ckpt_task_stats_t *tasks; /* [nstats][ntasks] alongside; sl_malloc'ed */
    int nstats, ntasks;
    int64_t total, completed, failed, in_progress;
    int64_t restored;            /* attempts that started from a checkpoint */
    int64_t restored_id, restore_ts; /* the last of them (restored > 0) */
    char restored_path[1024];
} sl_jm_ckpt_view_t;

/* Fills *out (free it with sl_jm_ckpt_view_free). */
void sl_jm_checkpoint_view(sl_job_master_t *jm, sl_jm_ckpt_view_t *out);
void sl_jm_ckpt_view_free(sl_jm_ckpt_view_t *v);
/* Triggers a checkpoint now: 0 with its id in *id, or 0 with *id = -1 when
 * as many as allowed are pending (try again later); SL_ESTATE when the job
 * does not run an attempt that checkpoints. */
int sl_jm_trigger_checkpoint(sl_job_master_t *jm, int64_t *id, char *err, size_t errlen);
/* What became of checkpoint id: 1 completed, 0 still pending, < 0 failed
 * or no longer known (why says which). */
int sl_jm_checkpoint_outcome(sl_job_master_t *jm, int64_t id, char *why, size_t cap);

/* The job's live metrics store (job_metrics.h), owned by jm. */
struct sl_job_metrics;
struct sl_job_metrics *sl_jm_live_metrics(sl_job_master_t *jm);

#endif
