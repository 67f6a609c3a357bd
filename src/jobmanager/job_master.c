/*
 * job_master.c — the JobManager side of a job (job_master.h): scheduling
 * onto slots, deployment, the checkpoint coordinator's hooks (metadata
 * assembled from acknowledgements, committed here), restarts.
 */
#include "jobmanager/job_master.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "checkpoint/metadata.h"
#include "checkpoint/state_schemas.h"
#include "checkpoint/storage.h"
#include "common/common.h"
#include "jobmanager/job_metrics.h"
#include "jobmanager/restart_strategy.h"

#define MAX_TMS 256
#define SAVEPOINTS_KEPT 64

/* A savepoint asked for (sl_jm_savepoint) and how it ended. */
typedef struct jm_savepoint {
    int64_t id;                 /* 0: free */
    int kind;
    char dir[4096];             /* the parent directory asked for */
    bool done;
    char location[4200];        /* its directory, once written */
    char failure[1024];
} jm_savepoint_t;
#define JM_STATS_KEPT 64       /* checkpoint figures of ended attempts kept for the REST API */
#define JM_EXCEPTIONS_KEPT 16  /* failures kept (Flink's web.exception-history-size) */

typedef struct jm_tm {
    sl_jm_taskmanager_t gw;
    char *id, *host;
} jm_tm_t;

struct sl_job_master {
    sl_plan_t *plan;
    char *artifact;
    int nargs;
    char **args;
    sl_buf_t plan_bytes;
    uint64_t fingerprint;
    jm_tm_t tms[MAX_TMS];       /* of the current attempt; guarded by mu while it changes */
    int ntms;
    int (*list_tms)(void *ctx, sl_jm_taskmanager_t *out, int cap);
    void *list_ctx;
    int64_t slot_wait_ms;
    bool evenly;                /* cluster.evenly-spread-out-slots */
    const char *status;         /* Flink's JobStatus name */
    int *placement;             /* per task index: which TaskManager */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    int attempt;
    int *state;                 /* per task index: sl_task_state_t of the current attempt */
    int nterminal;
    bool failed, canceled, cancel_requested;
    int fail_rc;
    char fail_msg[1024];
    char *restore_path;         /* of the current attempt, or NULL */
    int64_t restore_id;
    int64_t *rec_in, *rec_out, *rec_skipped; /* per node, this attempt */
    bool *eod;                  /* per task index: a source reported the end of its input */
    int neod, nsources;
    int64_t max_sync_ns;

    /* checkpoints (coordinator's hooks) */
    sl_coordinator_t *coord;    /* the current attempt's; coord_mu guards the pointer */
    pthread_mutex_t coord_mu;   /* held around every coordinator call from a message, so that the
                                 * run thread never destroys it under one */
    sl_ckpt_storage_t *storage;
    pthread_mutex_t ckpt_mu;
    sl_ckpt_metadata_t *pending_md[64]; /* being assembled, by id % 64 */
    sl_msg_op_state_t **final_state;    /* per task index: its state at its end */
    int *nfinal;

    /* savepoints: sp_trigger_mu serializes sl_jm_savepoint; sp_mu guards the rest */
    bool allow_nrs;             /* --allowNonRestoredState */
    int64_t next_ckpt_id;       /* the first id the next attempt may issue (run thread) */
    pthread_mutex_t sp_trigger_mu, sp_mu;
    const char *sp_next_dir;    /* while sl_jm_savepoint triggers: its directory */
    jm_savepoint_t sp[SAVEPOINTS_KEPT];
    int64_t nsp;
    char *stopped_at;           /* a completed stop-with-savepoint: restarts restore from it */
    /* for the REST API (guarded by coord_mu): the checkpoint figures of
     * earlier attempts, the restores, and (under mu) the failures */
    sl_ckpt_stats_t arch[JM_STATS_KEPT];         /* ring, by narch */
    sl_ckpt_task_stats_t *arch_tasks;            /* [JM_STATS_KEPT][ntasks] alongside */
    int64_t narch;
    int64_t arch_total, arch_completed, arch_failed; /* counts of the ended attempts */
    int64_t coord_first_id;                      /* the current coordinator's first checkpoint id */
    int64_t nrestored, restored_id, restore_ts;
    char restored_path[1024];
    sl_jm_exception_t exc[JM_EXCEPTIONS_KEPT];   /* ring, by nexc (under mu) */
    int64_t nexc;
    sl_job_metrics_t *live;     /* live metrics (job_metrics.h) */
    /* high availability (sl_jm_config_t.ha): the stores outside this process */
    sl_jm_ha_t ha;
    bool has_ha;
    bool suspended;             /* sl_jm_suspend: this JobManager stopped leading (under mu) */
    bool deploying;             /* between an attempt's DEPLOYs and its RUNNING (under mu): its tasks may
                                 * already run; a savepoint asked for then waits for RUNNING */
};

/* sp_mu held. */
static jm_savepoint_t *sp_find(sl_job_master_t *jm, int64_t id) {
    for (int i = 0; i < SAVEPOINTS_KEPT; i++)
        if (jm->sp[i].id == id && id > 0) return &jm->sp[i];
    return NULL;
}

/* Savepoint id failed (aborted, or could not start). */
static void sp_end(sl_job_master_t *jm, int64_t id, const char *failure) {
    pthread_mutex_lock(&jm->sp_mu);
    jm_savepoint_t *sp = sp_find(jm, id);
    if (sp && !sp->done) {
        sp->done = true;
        snprintf(sp->failure, sizeof sp->failure, "%s", failure && failure[0] ? failure : "failed");
    }
    pthread_mutex_unlock(&jm->sp_mu);
}

static void tm_send(sl_job_master_t *jm, int tm, sl_msg_t *m) { jm->tms[tm].gw.send(jm->tms[tm].gw.ctx, m); }
static void note_failure(sl_job_master_t *jm, const char *name, const char *msg, int task);
static void note_attempt_start(sl_job_master_t *jm);
static void archive_stats(sl_job_master_t *jm, sl_coordinator_t *coord);
static bool cancel_requested(sl_job_master_t *jm);
static void refresh_tms(sl_job_master_t *jm);
static void set_status(sl_job_master_t *jm, const char *st) {
    pthread_mutex_lock(&jm->mu);
    jm->status = st;
    jm->deploying = false;
    pthread_mutex_unlock(&jm->mu);
}

/* jm->tms changes only between attempts, under mu; senders take a copy. */
static void send_all(sl_job_master_t *jm, sl_msg_t *proto, void (*fill)(sl_msg_t *, const void *), const void *arg) {
    pthread_mutex_lock(&jm->mu);
    int n = jm->ntms;
    sl_jm_taskmanager_t gw[MAX_TMS];
    for (int i = 0; i < n; i++) gw[i] = jm->tms[i].gw;
    pthread_mutex_unlock(&jm->mu);
    for (int i = 0; i < n; i++) {
        sl_msg_t *m = sl_msg_new(proto->type);
        fill(m, arg);
        gw[i].send(gw[i].ctx, m);
    }
}

/* ---- messages to the TaskManagers ---- */

typedef struct notify_arg {
    const sl_job_master_t *jm;
    int attempt;
    int64_t id, ts;
    const char *reason;
    int kind;
} notify_arg_t;

static void fill_trigger(sl_msg_t *m, const void *p) {
    const notify_arg_t *a = p;
    m->u.trigger.job_id = sl_strdup(a->jm->plan->job_id);
    m->u.trigger.attempt = a->attempt;
    m->u.trigger.checkpoint_id = a->id;
    m->u.trigger.timestamp = a->ts;
    m->u.trigger.kind = a->kind;
}

static void fill_notify(sl_msg_t *m, const void *p) {
    const notify_arg_t *a = p;
    m->u.notify.job_id = sl_strdup(a->jm->plan->job_id);
    m->u.notify.attempt = a->attempt;
    m->u.notify.checkpoint_id = a->id;
    m->u.notify.reason = sl_strdup(a->reason ? a->reason : "");
}

static void fill_cancel(sl_msg_t *m, const void *p) {
    const notify_arg_t *a = p;
    m->u.cancel.job_id = sl_strdup(a->jm->plan->job_id);
    m->u.cancel.attempt = a->attempt;
    m->u.cancel.reason = sl_strdup(a->reason ? a->reason : "");
}

static int current_attempt(sl_job_master_t *jm) {
    pthread_mutex_lock(&jm->mu);
    int a = jm->attempt;
    pthread_mutex_unlock(&jm->mu);
    return a;
}

/* To every TaskManager, for the current attempt (the coordinator's hooks:
 * a coordinator only lives during its attempt). */
static void broadcast(sl_job_master_t *jm, int type, void (*fill)(sl_msg_t *, const void *), int64_t id, int64_t ts,
                      const char *reason, int kind) {
    sl_msg_t proto = {.type = type};
    notify_arg_t a = {jm, current_attempt(jm), id, ts, reason, kind};
    send_all(jm, &proto, fill, &a);
}

/* Cancels attempt `attempt` everywhere.  The attempt is named, not taken
 * from the current one: the run thread may have started the next attempt
 * by the time a failure's cancellation goes out. */
static void cancel_everywhere(sl_job_master_t *jm, int attempt, const char *why) {
    sl_msg_t proto = {.type = SL_MSG_CANCEL};
    notify_arg_t a = {jm, attempt, 0, 0, why, 0};
    send_all(jm, &proto, fill_cancel, &a);
}

/* ---- coordinator hooks (coordinator's thread or the handling thread) ---- */

static void hook_trigger(void *ctx, int64_t id, int64_t ts, int kind) {
    broadcast(ctx, SL_MSG_TRIGGER, fill_trigger, id, ts, NULL, kind);
}

/* An intermediate savepoint tells no task (Flink 1.15+: it commits no side
 * effect, and a failure restores the latest checkpoint, not it); a
 * stop-with-savepoint does, and from then on it is what a restart restores. */
static void hook_complete(void *ctx, int64_t id, int kind) {
    sl_job_master_t *jm = ctx;
    if (sl_snap_is_savepoint(kind)) {
        pthread_mutex_lock(&jm->sp_mu);
        jm_savepoint_t *sp = sp_find(jm, id);
        if (sp) sp->done = true;
        if (sp && sl_snap_is_sync(kind)) {
            sl_free(jm->stopped_at);
            jm->stopped_at = sl_strdup(sp->location);
        }
        pthread_mutex_unlock(&jm->sp_mu);
    }
    if (sl_snap_base(kind) != SL_SNAP_SAVEPOINT) broadcast(jm, SL_MSG_COMPLETE, fill_notify, id, 0, NULL, kind);
}

static void hook_aborted(void *ctx, int64_t id, const char *why) {
    sl_job_master_t *jm = ctx;
    sp_end(jm, id, why);
    broadcast(jm, SL_MSG_ABORTED, fill_notify, id, 0, why, 0);
}

static void hook_fail(void *ctx, const char *why) {
    sl_job_master_t *jm = ctx;
    pthread_mutex_lock(&jm->mu);
    bool first = !jm->failed && !jm->canceled;
    int attempt = jm->attempt;
    if (first) {
        jm->failed = true;
        jm->fail_rc = SL_EIO;
        snprintf(jm->fail_msg, sizeof jm->fail_msg, "%s", why);
        note_failure(jm, "sluice.CheckpointException", why, -1);
    }
    pthread_mutex_unlock(&jm->mu);
    if (first) cancel_everywhere(jm, attempt, why);
}

static int hook_prepare(void *ctx, int64_t id, int64_t ts, int kind, char *err, size_t errlen) {
    sl_job_master_t *jm = ctx;
    if (sl_snap_is_savepoint(kind)) { /* sl_jm_savepoint is triggering it, with its directory */
        pthread_mutex_lock(&jm->sp_mu);
        jm_savepoint_t *sp = &jm->sp[jm->nsp++ % SAVEPOINTS_KEPT];
        memset(sp, 0, sizeof *sp);
        sp->id = id;
        sp->kind = kind;
        snprintf(sp->dir, sizeof sp->dir, "%s", jm->sp_next_dir ? jm->sp_next_dir : "");
        pthread_mutex_unlock(&jm->sp_mu);
        if (!jm->storage) {
            sp_end(jm, id, "the job has no checkpoint directory (execution.checkpointing.dir) to stage it in");
            return sl_errf(err, errlen, SL_ESTATE, "a savepoint needs execution.checkpointing.dir");
        }
    }
    if (jm->has_ha && jm->ha.issue_checkpoint_id) { /* never an id another leader issued, nor twice */
        int hrc = jm->ha.issue_checkpoint_id(jm->ha.ctx, id, err, errlen);
        if (hrc < 0) {
            if (sl_snap_is_savepoint(kind)) sp_end(jm, id, err);
            return hrc;
        }
    }
    if (!jm->storage) return 0;
    int rc = jm->storage->ops->create_checkpoint(jm->storage, id, err, errlen);
    if (rc < 0) return rc;
    const sl_plan_t *p = jm->plan;
    sl_ckpt_metadata_t *md = sl_ckpt_metadata_new(id, p->job_id, p->job_name, p->cfg.max_parallelism);
    md->trigger_ts = ts;
    if (sl_snap_is_savepoint(kind)) {
        md->type = SL_CKPT_SAVEPOINT;
        md->format = SL_CKPT_FORMAT_CANONICAL;
    }
    sl_ckpt_metadata_set_str(&md->backend, "heap");
    for (int i = 0; i < p->nnodes; i++)
        sl_ckpt_metadata_add_operator(md, p->nodes[i].uid, p->nodes[i].id, p->nodes[i].parallelism,
                                      p->cfg.max_parallelism);
    pthread_mutex_lock(&jm->ckpt_mu);
    sl_ckpt_metadata_free(jm->pending_md[id % 64]);
    jm->pending_md[id % 64] = md;
    pthread_mutex_unlock(&jm->ckpt_mu);
    return 0;
}

/* A finished task acknowledges implicitly: its final operator state goes
 * into the checkpoint where it did not acknowledge itself (ckpt_mu held). */
static void add_final_state(sl_job_master_t *jm, sl_ckpt_metadata_t *md) {
    for (int i = 0; i < jm->plan->ntasks; i++) {
        for (int k = 0; k < jm->nfinal[i]; k++) {
            const sl_msg_op_state_t *os = &jm->final_state[i][k];
            sl_ckpt_operator_t *op = sl_ckpt_metadata_find_operator(md, os->uid);
            if (!op || os->st.index < 0 || os->st.index >= op->parallelism) continue;
            sl_ckpt_subtask_t *st = &op->subtasks[os->st.index];
            for (int b = 0; b < os->st.nblobs; b++)
                if (!sl_ckpt_find_blob(st->blobs, st->nblobs, os->st.blobs[b].name))
                    sl_ckpt_subtask_add_blob(st, os->st.blobs[b].name,
                                             (sl_ckpt_distribution_t)os->st.blobs[b].distribution,
                                             os->st.blobs[b].data, os->st.blobs[b].len);
        }
    }
}

static int hook_finalize(void *ctx, int64_t id, int kind, char *err, size_t errlen) {
    sl_job_master_t *jm = ctx;
    pthread_mutex_lock(&jm->mu);
    bool stopping = jm->failed || jm->canceled;
    pthread_mutex_unlock(&jm->mu);
    if (stopping) return sl_errf(err, errlen, SL_ECANCELED, "the job is failing or cancelled");
    if (!jm->storage) return 0;
    pthread_mutex_lock(&jm->ckpt_mu);
    sl_ckpt_metadata_t *md = jm->pending_md[id % 64];
    if (md && md->checkpoint_id == id)
        jm->pending_md[id % 64] = NULL;
    else
        md = NULL;
    if (md) add_final_state(jm, md);
    pthread_mutex_unlock(&jm->ckpt_mu);
    if (!md) return sl_errf(err, errlen, SL_ESTATE, "checkpoint %lld: no metadata being assembled", (long long)id);
    md->completion_ts = sl_wall_ms();
    if (jm->has_ha && jm->ha.check_leadership) { /* a deposed leader writes no _metadata */
        int hrc = jm->ha.check_leadership(jm->ha.ctx, err, errlen);
        if (hrc < 0) {
            sl_ckpt_metadata_free(md);
            return hrc;
        }
    }
    if (sl_snap_is_savepoint(kind)) {
        char dir[4096] = "", loc[4200] = "";
        pthread_mutex_lock(&jm->sp_mu);
        jm_savepoint_t *sp = sp_find(jm, id);
        if (sp) snprintf(dir, sizeof dir, "%s", sp->dir);
        pthread_mutex_unlock(&jm->sp_mu);
        int rc = jm->storage->ops->commit_savepoint(jm->storage, md, dir, loc, sizeof loc, err, errlen);
        sl_ckpt_metadata_free(md);
        if (rc < 0) return rc; /* the coordinator aborts it: hook_aborted records why */
        pthread_mutex_lock(&jm->sp_mu);
        if ((sp = sp_find(jm, id))) snprintf(sp->location, sizeof sp->location, "%s", loc);
        pthread_mutex_unlock(&jm->sp_mu);
        return 0;
    }
    int rc = jm->storage->ops->commit(jm->storage, md, err, errlen);
    sl_ckpt_metadata_free(md);
    if (rc < 0) return rc;
    if (jm->has_ha && jm->ha.checkpoint_completed) { /* the pointer goes in after _metadata is written */
        char dir[4200];
        snprintf(dir, sizeof dir, "%s/%s/chk-%lld", jm->plan->cfg.ckpt_dir, jm->plan->job_id, (long long)id);
        rc = jm->ha.checkpoint_completed(jm->ha.ctx, id, dir, jm->plan->cfg.ckpt_retained, err, errlen);
        if (rc < 0) return rc;
    }
    char rerr[256];
    sl_ckpt_storage_retain(jm->storage, jm->plan->cfg.ckpt_retained, rerr, sizeof rerr); /* best effort */
    return 0;
}

/* ---- messages from the TaskManagers ---- */

static void on_ack(sl_job_master_t *jm, sl_msg_ack_t *a) {
    if (a->task.index < 0 || a->task.index >= jm->plan->ntasks) return;
    pthread_mutex_lock(&jm->ckpt_mu);
    sl_ckpt_metadata_t *md = jm->pending_md[a->checkpoint_id % 64];
    if (md && md->checkpoint_id == a->checkpoint_id) {
        for (int k = 0; k < a->nops; k++) {
            sl_msg_op_state_t *os = &a->ops[k];
            sl_ckpt_operator_t *op = sl_ckpt_metadata_find_operator(md, os->uid);
            if (op && os->st.index >= 0 && os->st.index < op->parallelism)
                sl_ckpt_subtask_move(&op->subtasks[os->st.index], &os->st);
        }
    }
    pthread_mutex_unlock(&jm->ckpt_mu);
    sl_ckpt_task_stats_t ts = {.align_us = a->align_us,
                               .sync_us = a->sync_us,
                               .async_us = a->async_us,
                               .state_bytes = a->state_bytes,
                               .inflight_bytes = a->inflight_bytes,
                               .unaligned = a->unaligned,
                               .ack_ms = sl_wall_ms()};
    pthread_mutex_lock(&jm->coord_mu);
    if (jm->coord) sl_coordinator_ack_stats(jm->coord, a->checkpoint_id, a->task.index, &ts);
    pthread_mutex_unlock(&jm->coord_mu);
}

static void on_task_state(sl_job_master_t *jm, sl_msg_task_state_t *s) {
    int i = s->task.index;
    if (i < 0 || i >= jm->plan->ntasks) return;
    pthread_mutex_lock(&jm->coord_mu);
    if (s->end_of_data && !jm->eod[i]) { /* FLIP-147: every source is done: the final checkpoint now */
        jm->eod[i] = true;
        if (++jm->neod == jm->nsources && jm->coord) sl_coordinator_request_final(jm->coord);
    }
    if (s->state == SL_TASK_FINISHED && jm->coord) {
        pthread_mutex_lock(&jm->ckpt_mu);
        jm->final_state[i] = s->final_state;
        jm->nfinal[i] = s->nfinal;
        s->final_state = NULL;
        s->nfinal = 0;
        pthread_mutex_unlock(&jm->ckpt_mu);
        sl_coordinator_task_finished(jm->coord, i);
    }
    pthread_mutex_unlock(&jm->coord_mu);
    bool cancel = false;
    char why[1024] = "";
    pthread_mutex_lock(&jm->mu);
    int old = jm->state[i];
    bool terminal = s->state >= SL_TASK_FINISHED;
    if (terminal && old < SL_TASK_FINISHED) {
        jm->state[i] = s->state;
        jm->nterminal++;
        for (int k = 0; k < s->nmetrics; k++) {
            int n = s->metrics[k].node;
            if (n < 0 || n >= jm->plan->nnodes) continue;
            jm->rec_in[n] += s->metrics[k].records_in;
            jm->rec_out[n] += s->metrics[k].records_out;
            jm->rec_skipped[n] += s->metrics[k].records_skipped;
        }
        if (s->max_sync_ns > jm->max_sync_ns) jm->max_sync_ns = s->max_sync_ns;
        if (s->state == SL_TASK_FAILED && !jm->failed && !jm->canceled) {
            jm->failed = true;
            jm->fail_rc = s->error_code < 0 ? s->error_code : SL_EIO;
            snprintf(jm->fail_msg, sizeof jm->fail_msg, "%s", s->message ? s->message : "task failed");
            snprintf(why, sizeof why, "%s", jm->fail_msg);
            note_failure(jm, "sluice.TaskException", jm->fail_msg, i);
            cancel = true;
        } else if (s->state == SL_TASK_CANCELED && !jm->failed && !jm->canceled) {
            /* nobody asked for it (e.g. a channel to another TaskManager failed before the
             * TaskManager said why): the attempt cannot complete */
            jm->failed = true;
            jm->fail_rc = SL_EIO;
            snprintf(jm->fail_msg, sizeof jm->fail_msg, "subtask %d of vertex '%s' was cancelled on its TaskManager",
                     s->task.subtask + 1, jm->plan->vertices[s->task.vertex < jm->plan->nvertices ? s->task.vertex : 0].name);
            snprintf(why, sizeof why, "%s", jm->fail_msg);
            note_failure(jm, "sluice.TaskCanceledException", jm->fail_msg, i);
            cancel = true;
        }
        pthread_cond_broadcast(&jm->cv);
    } else if (!terminal && old < SL_TASK_FINISHED) {
        jm->state[i] = s->state;
    }
    pthread_mutex_unlock(&jm->mu);
    if (cancel) cancel_everywhere(jm, s->attempt, why);
}

void sl_jm_handle(sl_job_master_t *jm, sl_msg_t *m) {
    int attempt = -1;
    switch (m->type) {
    case SL_MSG_ACK: attempt = m->u.ack.attempt; break;
    case SL_MSG_DECLINE: attempt = m->u.decline.attempt; break;
    case SL_MSG_TASK_STATE: attempt = m->u.task_state.attempt; break;
    case SL_MSG_METRICS: attempt = m->u.metrics.attempt; break;
    default: break;
    }
    if (attempt == current_attempt(jm)) { /* a message of an earlier attempt is stale */
        if (m->type == SL_MSG_ACK) on_ack(jm, &m->u.ack);
        if (m->type == SL_MSG_DECLINE) {
            pthread_mutex_lock(&jm->coord_mu);
            if (jm->coord)
                sl_coordinator_decline(jm->coord, m->u.decline.checkpoint_id, m->u.decline.task.index,
                                       m->u.decline.reason);
            pthread_mutex_unlock(&jm->coord_mu);
        }
        if (m->type == SL_MSG_TASK_STATE) on_task_state(jm, &m->u.task_state);
        if (m->type == SL_MSG_METRICS) sl_job_metrics_update(jm->live, &m->u.metrics);
    }
    sl_msg_destroy(m);
}

void sl_jm_cancel(sl_job_master_t *jm) {
    pthread_mutex_lock(&jm->mu);
    jm->cancel_requested = true;
    bool first = !jm->failed && !jm->canceled && jm->attempt >= 0;
    int attempt = jm->attempt;
    if (first) jm->canceled = true;
    pthread_cond_broadcast(&jm->cv);
    pthread_mutex_unlock(&jm->mu);
    if (first) cancel_everywhere(jm, attempt, "cancelled");
}

void sl_jm_suspend(sl_job_master_t *jm) {
    pthread_mutex_lock(&jm->mu);
    jm->suspended = true;
    pthread_mutex_unlock(&jm->mu);
    sl_jm_cancel(jm);
}

bool sl_jm_suspended(sl_job_master_t *jm) {
    pthread_mutex_lock(&jm->mu);
    bool s = jm->suspended;
    pthread_mutex_unlock(&jm->mu);
    return s;
}

/* ---- scheduling ---- */

/* Slot sharing: slot i of a group runs subtask i of each of its vertices,
 * so a group needs as many slots as its widest vertex; slots are taken
 * from the TaskManagers in order. */
static int schedule(sl_job_master_t *jm, char *err, size_t errlen) {
    const sl_plan_t *p = jm->plan;
    int ng = 0;
    const char **groups = sl_calloc((size_t)(p->nvertices ? p->nvertices : 1), sizeof *groups);
    int *width = sl_calloc((size_t)(p->nvertices ? p->nvertices : 1), sizeof *width);
    int *group_of = sl_calloc((size_t)(p->nvertices ? p->nvertices : 1), sizeof *group_of);
    for (int v = 0; v < p->nvertices; v++) {
        int g = 0;
        while (g < ng && strcmp(groups[g], p->vertices[v].slot_group) != 0) g++;
        if (g == ng) groups[ng++] = p->vertices[v].slot_group;
        group_of[v] = g;
        if (p->vertices[v].parallelism > width[g]) width[g] = p->vertices[v].parallelism;
    }
    int needed = 0, have = 0;
    for (int g = 0; g < ng; g++) needed += width[g];
    for (int t = 0; t < jm->ntms; t++) have += jm->tms[t].gw.slots;
    int rc = 0;
    if (needed > have) {
        rc = sl_errf(err, errlen, SL_EINVAL,
                     "job '%s' needs %d slots (%d slot sharing group%s), the cluster has %d on %d TaskManager%s",
                     p->job_name, needed, ng, ng == 1 ? "" : "s", have, jm->ntms, jm->ntms == 1 ? "" : "s");
    } else {
        /* slot (g, i) -> TaskManager */
        int **slot_tm = sl_calloc((size_t)(ng ? ng : 1), sizeof *slot_tm);
        int tm = 0, used = 0;
        int *taken = sl_calloc((size_t)(jm->ntms ? jm->ntms : 1), sizeof *taken);
        for (int g = 0; g < ng; g++) {
            slot_tm[g] = sl_calloc((size_t)width[g], sizeof **slot_tm);
            for (int i = 0; i < width[g]; i++) {
                if (jm->evenly) { /* cluster.evenly-spread-out-slots: the least used TaskManager */
                    int best = -1;
                    for (int t = 0; t < jm->ntms; t++)
                        if (taken[t] < jm->tms[t].gw.slots &&
                            (best < 0 || taken[t] * jm->tms[best].gw.slots < taken[best] * jm->tms[t].gw.slots))
                            best = t;
                    slot_tm[g][i] = best;
                    taken[best]++;
                    continue;
                }
                while (used >= jm->tms[tm].gw.slots) { /* fill one TaskManager after the other */
                    tm++;
                    used = 0;
                }
                slot_tm[g][i] = tm;
                used++;
            }
        }
        sl_free(taken);
        for (int v = 0; v < p->nvertices; v++)
            for (int s = 0; s < p->vertices[v].parallelism; s++)
                jm->placement[p->first_task[v] + s] = slot_tm[group_of[v]][s];
        for (int g = 0; g < ng; g++) sl_free(slot_tm[g]);
        sl_free(slot_tm);
    }
    sl_free(groups);
    sl_free(width);
    sl_free(group_of);
    return rc;
}

static void deploy(sl_job_master_t *jm) {
    const sl_plan_t *p = jm->plan;
    for (int t = 0; t < jm->ntms; t++) {
        sl_msg_t *m = sl_msg_new(SL_MSG_DEPLOY);
        sl_msg_deploy_t *d = &m->u.deploy;
        d->job_id = sl_strdup(p->job_id);
        d->attempt = jm->attempt;
        d->artifact = sl_strdup(jm->artifact);
        d->nargs = jm->nargs;
        d->args = sl_calloc((size_t)(jm->nargs ? jm->nargs : 1), sizeof *d->args);
        for (int i = 0; i < jm->nargs; i++) d->args[i] = sl_strdup(jm->args[i]);
        d->plan_fingerprint = jm->fingerprint;
        sl_buf_append(&d->plan, jm->plan_bytes.p, jm->plan_bytes.len);
        d->restore_path = sl_strdup(jm->restore_path ? jm->restore_path : "");
        d->restore_checkpoint = jm->restore_id;
        d->tasks = sl_calloc((size_t)(p->ntasks ? p->ntasks : 1), sizeof *d->tasks);
        d->placements = sl_calloc((size_t)(p->ntasks ? p->ntasks : 1), sizeof *d->placements);
        for (int v = 0; v < p->nvertices; v++)
            for (int s = 0; s < p->vertices[v].parallelism; s++) {
                int i = p->first_task[v] + s;
                sl_msg_task_ref_t ref = {v, s, i};
                if (jm->placement[i] == t) d->tasks[d->ntasks++] = ref;
                d->placements[d->nplacements++] = (sl_msg_placement_t){ref, jm->placement[i] == t ? -1 : jm->placement[i]};
            }
        d->peers = sl_calloc((size_t)(jm->ntms ? jm->ntms : 1), sizeof *d->peers);
        for (int i = 0; i < jm->ntms; i++) {
            if (!jm->tms[i].host[0] || jm->tms[i].gw.data_port <= 0) continue; /* embedded: no data port */
            d->peers[d->npeers++] = (sl_msg_peer_t){sl_strdup(jm->tms[i].id), sl_strdup(jm->tms[i].host),
                                                    jm->tms[i].gw.data_port};
        }
        for (int i = 0; i < d->nplacements; i++) { /* TaskManager index -> peer index */
            int pt = d->placements[i].peer;
            if (pt < 0) continue;
            int pi = -1;
            for (int q = 0; q < d->npeers; q++)
                if (!strcmp(d->peers[q].tm_id, jm->tms[pt].id)) pi = q;
            d->placements[i].peer = pi; /* every cluster TaskManager announces its data port */
        }
        if (d->ntasks == 0) {
            sl_msg_destroy(m);
            continue;
        }
        tm_send(jm, t, m);
    }
}

/* ---- the job's life ---- */

/* State in the checkpoint that no operator of the plan takes is refused
 * (Flink: --allowNonRestoredState). */
/* The typed states of plan node n against what the restored operator mo
 * recorded (state_schemas.h): an incompatible change refuses the job. */
static int check_state_schemas(const sl_plan_node_t *n, const sl_ckpt_operator_t *mo, char *err, size_t errlen) {
    if (!n->nstate_schemas || !mo) return 0;
    const char **names = sl_calloc((size_t)n->nstate_schemas, sizeof *names);
    sl_schema_t **schemas = sl_calloc((size_t)n->nstate_schemas, sizeof *schemas);
    int rc = 0;
    for (int i = 0; i < n->nstate_schemas && rc == 0; i++) {
        char serr[300];
        names[i] = n->state_schemas[i].name;
        if (!(schemas[i] = sl_schema_parse(n->state_schemas[i].schema, serr, sizeof serr)))
            rc = sl_errf(err, errlen, SL_EFORMAT, "job plan: operator '%s', state '%s': %s", n->uid, names[i], serr);
    }
    sl_state_migrations_t *m = NULL;
    bool changed = false;
    if (rc == 0) rc = sl_state_migrations_new(mo, n->uid, n->nstate_schemas, names, schemas, &m, &changed, err, errlen);
    sl_state_migrations_free(m);
    for (int i = 0; i < n->nstate_schemas; i++) sl_schema_unref(schemas[i]);
    sl_free(schemas);
    sl_free(names);
    return rc;
}

static int check_restore(sl_job_master_t *jm, char *err, size_t errlen) {
    char path[4400];
    snprintf(path, sizeof path, "%s/%s", jm->restore_path, SL_CKPT_METADATA_NAME);
    sl_ckpt_metadata_t *md = NULL;
    int rc = sl_ckpt_metadata_read_file(path, &md, err, errlen);
    if (rc < 0) return rc;
    jm->restore_id = md->checkpoint_id;
    for (int i = 0; i < md->noperators && rc == 0; i++) {
        const sl_ckpt_operator_t *mo = &md->operators[i];
        bool has_state = mo->nblobs > 0;
        for (int st = 0; st < mo->parallelism; st++)
            has_state = has_state || mo->subtasks[st].nblobs > 0 || mo->subtasks[st].nhandles > 0;
        bool matched = false;
        for (int k = 0; k < jm->plan->nnodes && !matched; k++) matched = strcmp(jm->plan->nodes[k].uid, mo->uid) == 0;
        bool keyed = false;
        for (int st = 0; st < mo->parallelism; st++)
            for (int h = 0; h < mo->subtasks[st].nhandles; h++) keyed = true;
        const char *what = md->type == SL_CKPT_SAVEPOINT ? "savepoint" : "checkpoint";
        if (has_state && !matched && !jm->allow_nrs)
            rc = sl_errf(err, errlen, SL_EINVAL,
                         "restore: %s %lld (%s) holds state for operator '%s', which is not in this job; "
                         "run with -n (--allowNonRestoredState) to drop it",
                         what, (long long)md->checkpoint_id, jm->restore_path, mo->uid);
        else if (has_state && !matched)
            fprintf(stderr, "sluice: restore: dropping the state of operator '%s' (not in this job; "
                            "--allowNonRestoredState)\n", mo->uid);
        else if (keyed && mo->max_parallelism != jm->plan->cfg.max_parallelism)
            rc = sl_errf(err, errlen, SL_EINVAL,
                         "restore: operator '%s' has keyed state for max parallelism %d in %s %lld, the job has %d: "
                         "keyed state is split into max-parallelism key groups, so pipeline.max-parallelism "
                         "must not change",
                         mo->uid, mo->max_parallelism, what, (long long)md->checkpoint_id,
                         jm->plan->cfg.max_parallelism);
    }
    /* typed states: a change of schema must be one a restore can migrate */
    for (int k = 0; k < jm->plan->nnodes && rc == 0; k++)
        rc = check_state_schemas(&jm->plan->nodes[k], sl_ckpt_metadata_find_operator(md, jm->plan->nodes[k].uid),
                                 err, errlen);
    sl_ckpt_metadata_free(md);
    return rc;
}

static void reset_attempt(sl_job_master_t *jm) {
    const sl_plan_t *p = jm->plan;
    pthread_mutex_lock(&jm->mu);
    jm->attempt++;
    sl_job_metrics_reset(jm->live);
    memset(jm->state, 0, (size_t)(p->ntasks ? p->ntasks : 1) * sizeof *jm->state);
    jm->nterminal = 0;
    jm->failed = false;
    jm->canceled = jm->cancel_requested;
    jm->fail_rc = 0;
    jm->fail_msg[0] = 0;
    jm->max_sync_ns = 0;
    memset(jm->rec_in, 0, (size_t)(p->nnodes ? p->nnodes : 1) * sizeof *jm->rec_in);
    memset(jm->rec_out, 0, (size_t)(p->nnodes ? p->nnodes : 1) * sizeof *jm->rec_out);
    memset(jm->rec_skipped, 0, (size_t)(p->nnodes ? p->nnodes : 1) * sizeof *jm->rec_skipped);
    pthread_mutex_unlock(&jm->mu);
    pthread_mutex_lock(&jm->coord_mu);
    memset(jm->eod, 0, (size_t)(p->ntasks ? p->ntasks : 1) * sizeof *jm->eod);
    jm->neod = 0;
    pthread_mutex_unlock(&jm->coord_mu);
    pthread_mutex_lock(&jm->ckpt_mu);
    for (int i = 0; i < p->ntasks; i++) {
        for (int k = 0; k < jm->nfinal[i]; k++) {
            sl_free(jm->final_state[i][k].uid);
            sl_ckpt_subtask_clear(&jm->final_state[i][k].st);
        }
        sl_free(jm->final_state[i]);
        jm->final_state[i] = NULL;
        jm->nfinal[i] = 0;
    }
    for (int i = 0; i < 64; i++) {
        sl_ckpt_metadata_free(jm->pending_md[i]);
        jm->pending_md[i] = NULL;
    }
    pthread_mutex_unlock(&jm->ckpt_mu);
}

/* One attempt: deploy, coordinate, wait for every task to end.  Returns
 * its outcome (message in res->err). */
static int run_attempt(sl_job_master_t *jm, sl_job_result_t *res) {
    const sl_plan_t *p = jm->plan;
    reset_attempt(jm);
    int rc = 0;
    if (jm->restore_path) rc = check_restore(jm, res->err, sizeof res->err);
    if (rc == 0 && p->cfg.ckpt_enabled && p->cfg.ckpt_dir[0]) {
        rc = sl_ckpt_storage_open(p->cfg.ckpt_dir, p->job_id, &jm->storage, res->err, sizeof res->err);
        if (rc == 0) { /* what an earlier run left half done: incomplete checkpoints and
                        * the shared files only they had uploaded (best effort) */
            char gerr[300];
            sl_ckpt_storage_abort_all_pending(jm->storage, gerr, sizeof gerr);
            sl_ckpt_storage_gc_shared(jm->storage, gerr, sizeof gerr);
        }
    }
    if (rc == 0) {
        /* slots: wait up to slot.request.timeout for enough of them */
        int64_t deadline = sl_mono_ns() / 1000000 + jm->slot_wait_ms;
        for (;;) {
            refresh_tms(jm);
            rc = schedule(jm, res->err, sizeof res->err);
            if (rc == 0 || sl_mono_ns() / 1000000 >= deadline || cancel_requested(jm)) break;
            struct timespec ts = {0, 200 * 1000000L};
            nanosleep(&ts, NULL);
        }
        if (rc < 0 && jm->slot_wait_ms > 0) {
            size_t l = strlen(res->err);
            snprintf(res->err + l, sizeof res->err - l, " (waited %lld ms, slot.request.timeout)",
                     (long long)jm->slot_wait_ms);
        }
    }
    if (rc < 0) {
        if (jm->storage) jm->storage->ops->destroy(jm->storage);
        jm->storage = NULL;
        pthread_mutex_lock(&jm->mu);
        note_failure(jm, "sluice.JobException", res->err, -1);
        pthread_mutex_unlock(&jm->mu);
        return rc;
    }
    sl_coordinator_t *coord = NULL;
    if (p->cfg.ckpt_enabled) {
        sl_coordinator_hooks_t hooks = {jm, hook_trigger, hook_complete, hook_aborted, hook_fail, hook_prepare,
                                        hook_finalize};
        coord = sl_coordinator_new(&p->cfg.ckpt, p->ntasks, hooks);
        /* ids never repeat within the job (Flink's CheckpointIDCounter): an
         * attempt restored from checkpoint n goes on after n and after every id
         * an earlier attempt issued, so no trigger, savepoint record or
         * transaction name is reused */
        if (jm->restore_path) sl_coordinator_set_next_id(coord, jm->restore_id + 1);
        sl_coordinator_set_next_id(coord, jm->next_ckpt_id);
        if (jm->has_ha && jm->ha.next_checkpoint_id) { /* above every id any leader issued */
            int64_t n = jm->ha.next_checkpoint_id(jm->ha.ctx);
            if (n > 0) sl_coordinator_set_next_id(coord, n);
        }
        pthread_mutex_lock(&jm->coord_mu);
        jm->coord = coord;
        note_attempt_start(jm);
        pthread_mutex_unlock(&jm->coord_mu);
    }
    pthread_mutex_lock(&jm->mu);
    jm->deploying = true;
    pthread_mutex_unlock(&jm->mu);
    deploy(jm);
    set_status(jm, "RUNNING");
    pthread_mutex_lock(&jm->mu);
    bool cancel_now = jm->canceled;
    pthread_mutex_unlock(&jm->mu);
    if (cancel_now) cancel_everywhere(jm, jm->attempt, "cancelled");
    if (coord) sl_coordinator_start(coord);
    pthread_mutex_lock(&jm->mu);
    while (jm->nterminal < p->ntasks) pthread_cond_wait(&jm->cv, &jm->mu);
    bool failed = jm->failed, canceled = jm->canceled;
    int fail_rc = jm->fail_rc;
    pthread_mutex_unlock(&jm->mu);
    if (coord) {
        pthread_mutex_lock(&jm->coord_mu);
        archive_stats(jm, coord);
        jm->coord = NULL;
        pthread_mutex_unlock(&jm->coord_mu);
        sl_coordinator_stop(coord);
        if (jm->storage) { /* no checkpoint is pending any more */
            char gerr[300];
            sl_ckpt_storage_gc_shared(jm->storage, gerr, sizeof gerr);
        }
        pthread_mutex_lock(&jm->sp_mu);
        for (int i = 0; i < SAVEPOINTS_KEPT; i++)
            if (jm->sp[i].id && !jm->sp[i].done) {
                jm->sp[i].done = true;
                snprintf(jm->sp[i].failure, sizeof jm->sp[i].failure, "%s",
                             failed ? "the job failed before the savepoint completed"
                                    : canceled ? "the job was cancelled before the savepoint completed"
                                               : "the job ended before the savepoint completed");
            }
        pthread_mutex_unlock(&jm->sp_mu);
        res->ckpts_completed = sl_coordinator_completed(coord, NULL);
        res->nckpt_stats = sl_coordinator_stats(coord, res->ckpt_stats, 64);
        sl_free(res->task_stats);
        res->ntasks = p->ntasks;
        res->task_stats = sl_calloc((size_t)(res->nckpt_stats ? res->nckpt_stats : 1) * (size_t)(p->ntasks ? p->ntasks : 1),
                                    sizeof *res->task_stats);
        for (int i = 0; i < res->nckpt_stats; i++)
            sl_coordinator_task_stats(coord, res->ckpt_stats[i].id, &res->task_stats[(size_t)i * (size_t)p->ntasks]);
        jm->next_ckpt_id = sl_coordinator_next_id(coord);
        sl_coordinator_destroy(coord);
    }
    if (jm->storage) jm->storage->ops->destroy(jm->storage);
    jm->storage = NULL;
    res->max_sync_ns = jm->max_sync_ns;
    for (int i = 0; i < p->nnodes; i++) {
        res->records_in[i] = jm->rec_in[i];
        res->records_out[i] = jm->rec_out[i];
        res->records_skipped[i] = jm->rec_skipped[i];
    }
    if (failed) {
        pthread_mutex_lock(&jm->mu);
        snprintf(res->err, sizeof res->err, "%s", jm->fail_msg[0] ? jm->fail_msg : "job failed");
        pthread_mutex_unlock(&jm->mu);
        return fail_rc ? fail_rc : SL_EIO;
    }
    if (canceled) {
        snprintf(res->err, sizeof res->err, "job '%s' was canceled", p->job_name);
        return SL_ECANCELED;
    }
    return 0;
}

static void backoff(sl_job_master_t *jm, int64_t ms);

/* Before a restart: the latest completed checkpoint of this job (if any)
 * becomes the state to restore. */
static int prepare_restart(sl_job_master_t *jm, char *err, size_t errlen) {
    const sl_plan_t *p = jm->plan;
    pthread_mutex_lock(&jm->sp_mu);
    char *stopped = jm->stopped_at ? sl_strdup(jm->stopped_at) : NULL;
    pthread_mutex_unlock(&jm->sp_mu);
    if (stopped) { /* its sinks committed: nothing older may be restored */
        sl_free(jm->restore_path);
        jm->restore_path = stopped;
        return 0;
    }
    if (!p->cfg.ckpt_dir[0]) return 0;
    if (jm->has_ha && jm->ha.latest_checkpoint) { /* the completed checkpoint store decides */
        char dir[4200];
        int rc = SL_EIO;
        /* ZooKeeper unreachable: wait for it; if this JobManager's session is
         * lost meanwhile, the dispatcher suspends the job, which ends the wait */
        for (int tries = 0; rc == SL_EIO && !cancel_requested(jm); tries++) {
            if (tries) backoff(jm, 500);
            rc = jm->ha.latest_checkpoint(jm->ha.ctx, dir, sizeof dir);
        }
        if (rc == SL_ENOTFOUND) return 0;
        if (rc < 0) return sl_errf(err, errlen, rc, "restart: the completed checkpoint store cannot be read");
        sl_free(jm->restore_path);
        jm->restore_path = sl_strdup(dir);
        return 0;
    }
    sl_ckpt_storage_t *st = NULL;
    char serr[600];
    if (sl_ckpt_storage_open(p->cfg.ckpt_dir, p->job_id, &st, serr, sizeof serr) < 0) return 0;
    sl_ckpt_metadata_t *md = NULL;
    int rc = sl_ckpt_storage_load_latest(st, &md, serr, sizeof serr);
    st->ops->destroy(st);
    if (rc == SL_ENOTFOUND) return 0; /* none yet: the restored one (if any) or a fresh start */
    if (rc < 0) return sl_errf(err, errlen, rc, "restart: %s", serr);
    char chk[4200];
    snprintf(chk, sizeof chk, "%s/%s/chk-%lld", p->cfg.ckpt_dir, p->job_id, (long long)md->checkpoint_id);
    sl_ckpt_metadata_free(md);
    sl_free(jm->restore_path);
    jm->restore_path = sl_strdup(chk);
    return 0;
}

/* The job ended with rc: its checkpoints go or stay as the retention
 * policy says (Flink's CheckpointProperties: discard on finished /
 * cancelled / failed).  Errors are reported, never fatal. */
static void end_of_job_checkpoints(sl_job_master_t *jm, int rc) {
    const sl_plan_t *p = jm->plan;
    if (!p->cfg.ckpt_dir[0] || !p->cfg.ckpt_enabled) return;
    bool failed = rc < 0 && rc != SL_ECANCELED;
    bool discard = p->cfg.ckpt_retention == 0 /* SL_CHECKPOINTS_NOT_RETAINED */ ||
                   (p->cfg.ckpt_retention == 1 /* DELETE_ON_CANCELLATION */ && !failed);
    if (!discard) return;
    char err[600];
    sl_ckpt_storage_t *st = NULL;
    if (sl_ckpt_storage_open(p->cfg.ckpt_dir, p->job_id, &st, err, sizeof err) < 0 ||
        st->ops->discard_all(st, err, sizeof err) < 0)
        fprintf(stderr, "sluice: could not delete the checkpoints of job '%s': %s\n", p->job_name, err);
    if (st) st->ops->destroy(st);
}

static bool cancel_requested(sl_job_master_t *jm) {
    pthread_mutex_lock(&jm->mu);
    bool c = jm->cancel_requested;
    pthread_mutex_unlock(&jm->mu);
    return c;
}

/* Sleeps ms, waking early when the job is cancelled. */
static void backoff(sl_job_master_t *jm, int64_t ms) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += (time_t)(ms / 1000);
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&jm->mu);
    while (!jm->cancel_requested && pthread_cond_timedwait(&jm->cv, &jm->mu, &until) != ETIMEDOUT) {
    }
    pthread_mutex_unlock(&jm->mu);
}

/* The job ends with rc: SUSPENDED when this JobManager stopped leading
 * (the next leader goes on from its checkpoints, even if a restart was
 * waiting for the completed checkpoint store when the session went),
 * otherwise FINISHED, CANCELED or FAILED, its checkpoints kept or
 * discarded as the retention policy says. */
static int end_job(sl_job_master_t *jm, sl_job_result_t *res, int rc) {
    const sl_plan_t *p = jm->plan;
    pthread_mutex_lock(&jm->mu);
    bool suspended = jm->suspended;
    pthread_mutex_unlock(&jm->mu);
    if (suspended) {
        res->rc = SL_ECANCELED;
        snprintf(res->err, sizeof res->err, "job '%s' was suspended: this JobManager is no longer the leader",
                 p->job_name);
        set_status(jm, "SUSPENDED");
        return SL_ECANCELED;
    }
    if (rc == SL_ECANCELED && !res->err[0]) snprintf(res->err, sizeof res->err, "job '%s' was canceled", p->job_name);
    end_of_job_checkpoints(jm, rc);
    res->rc = rc;
    set_status(jm, rc == 0 ? "FINISHED" : rc == SL_ECANCELED ? "CANCELED" : "FAILED");
    return rc;
}

int sl_jm_run(sl_job_master_t *jm, sl_job_result_t *res) {
    const sl_plan_t *p = jm->plan;
    memset(res, 0, sizeof *res);
    res->records_in = sl_calloc((size_t)(p->nnodes ? p->nnodes : 1), sizeof *res->records_in);
    res->records_out = sl_calloc((size_t)(p->nnodes ? p->nnodes : 1), sizeof *res->records_out);
    res->records_skipped = sl_calloc((size_t)(p->nnodes ? p->nnodes : 1), sizeof *res->records_skipped);
    res->nnodes = p->nnodes;
    sl_restart_strategy_t strat;
    sl_restart_init(&strat, &p->cfg.restart, (uint64_t)sl_mono_ns());
    for (;;) {
        res->err[0] = 0;
        int rc = run_attempt(jm, res);
        if (rc == 0 || rc == SL_ECANCELED || !sl_err_retriable(rc) || cancel_requested(jm) ||
            !sl_restart_notify_failure(&strat, sl_mono_ns() / 1000000)) {
            if (rc < 0 && rc != SL_ECANCELED && sl_err_retriable(rc) && p->cfg.restart.kind != SL_RESTART_NONE &&
                !cancel_requested(jm))
                fprintf(stderr, "sluice: job '%s' failed (%s); restart strategy %s gives up after %d restart%s\n",
                        p->job_name, res->err, sl_restart_kind_name(p->cfg.restart.kind), res->restarts,
                        res->restarts == 1 ? "" : "s");
            sl_restart_free(&strat);
            return end_job(jm, res, rc);
        }
        fprintf(stderr, "sluice: job '%s' failed (%s); restarting from the latest checkpoint in %lld ms "
                        "(restart %d, %s)\n",
                p->job_name, res->err, (long long)strat.backoff_ms, res->restarts + 1,
                sl_restart_kind_name(p->cfg.restart.kind));
        res->restarts++;
        set_status(jm, "RESTARTING");
        if (strat.backoff_ms > 0) backoff(jm, strat.backoff_ms);
        int prc = prepare_restart(jm, res->err, sizeof res->err);
        if (prc < 0) { /* cancelled or suspended while it waited for the store: that is how the job ends */
            sl_restart_free(&strat);
            bool canceled = cancel_requested(jm);
            if (canceled) res->err[0] = 0;
            return end_job(jm, res, canceled ? SL_ECANCELED : SL_EINVAL);
        }
    }
}

int sl_jm_new(const sl_plan_t *plan, const sl_jm_config_t *cfg, sl_job_master_t **out, char *err, size_t errlen) {
    *out = NULL;
    sl_job_master_t *jm = sl_calloc(1, sizeof *jm);
    int rc = sl_plan_encode(plan, &jm->plan_bytes, err, errlen);
    if (rc == 0) rc = sl_plan_decode(jm->plan_bytes.p, jm->plan_bytes.len, &jm->plan, err, errlen);
    if (rc < 0) {
        sl_buf_free(&jm->plan_bytes);
        sl_free(jm);
        return rc;
    }
    jm->fingerprint = sl_plan_fingerprint(jm->plan);
    jm->artifact = sl_strdup(cfg && cfg->artifact ? cfg->artifact : "");
    jm->nargs = cfg ? cfg->nargs : 0;
    jm->args = sl_calloc((size_t)(jm->nargs ? jm->nargs : 1), sizeof *jm->args);
    for (int i = 0; i < jm->nargs; i++) jm->args[i] = sl_strdup(cfg->args[i]);
    if (cfg && cfg->restore_path) jm->restore_path = sl_strdup(cfg->restore_path);
    jm->allow_nrs = cfg && cfg->allow_non_restored_state;
    pthread_mutex_init(&jm->sp_trigger_mu, NULL);
    pthread_mutex_init(&jm->sp_mu, NULL);
    int nt = jm->plan->ntasks ? jm->plan->ntasks : 1, nn = jm->plan->nnodes ? jm->plan->nnodes : 1;
    jm->placement = sl_calloc((size_t)nt, sizeof *jm->placement);
    jm->state = sl_calloc((size_t)nt, sizeof *jm->state);
    jm->final_state = sl_calloc((size_t)nt, sizeof *jm->final_state);
    jm->nfinal = sl_calloc((size_t)nt, sizeof *jm->nfinal);
    jm->rec_in = sl_calloc((size_t)nn, sizeof *jm->rec_in);
    jm->rec_out = sl_calloc((size_t)nn, sizeof *jm->rec_out);
    jm->rec_skipped = sl_calloc((size_t)nn, sizeof *jm->rec_skipped);
    jm->eod = sl_calloc((size_t)nt, sizeof *jm->eod);
    for (int v = 0; v < jm->plan->nvertices; v++)
        if (jm->plan->nodes[jm->plan->vertices[v].nodes[0]].kind == SL_PLAN_SOURCE)
            jm->nsources += jm->plan->vertices[v].parallelism;
    jm->arch_tasks = sl_calloc((size_t)JM_STATS_KEPT * (size_t)nt, sizeof *jm->arch_tasks);
    jm->attempt = -1;
    jm->live = sl_job_metrics_new(jm->plan);
    jm->status = "CREATED";
    jm->list_tms = cfg ? cfg->list_taskmanagers : NULL;
    jm->list_ctx = cfg ? cfg->list_ctx : NULL;
    jm->slot_wait_ms = cfg ? cfg->slot_request_timeout_ms : 0;
    jm->evenly = cfg && cfg->evenly_spread_out_slots;
    if (cfg && cfg->ha) {
        jm->ha = *cfg->ha;
        jm->has_ha = true;
    }
    pthread_mutex_init(&jm->mu, NULL);
    pthread_cond_init(&jm->cv, NULL);
    pthread_mutex_init(&jm->ckpt_mu, NULL);
    pthread_mutex_init(&jm->coord_mu, NULL);
    *out = jm;
    return 0;
}

void sl_jm_add_taskmanager(sl_job_master_t *jm, const sl_jm_taskmanager_t *tm) {
    if (jm->ntms == MAX_TMS) return;
    jm_tm_t *t = &jm->tms[jm->ntms++];
    t->gw = *tm;
    t->id = sl_strdup(tm->id ? tm->id : "tm");
    t->host = sl_strdup(tm->host ? tm->host : "");
    t->gw.id = t->id;
    t->gw.host = t->host;
}

static void clear_tms(sl_job_master_t *jm) {
    for (int i = 0; i < jm->ntms; i++) {
        sl_free(jm->tms[i].id);
        sl_free(jm->tms[i].host);
    }
    jm->ntms = 0;
}

/* The live TaskManagers, when a cluster supplies them. */
static void refresh_tms(sl_job_master_t *jm) {
    if (!jm->list_tms) return;
    sl_jm_taskmanager_t *live = sl_calloc(MAX_TMS, sizeof *live);
    int n = jm->list_tms(jm->list_ctx, live, MAX_TMS);
    pthread_mutex_lock(&jm->mu);
    clear_tms(jm);
    for (int i = 0; i < n; i++) sl_jm_add_taskmanager(jm, &live[i]);
    pthread_mutex_unlock(&jm->mu);
    sl_free(live);
}

void sl_jm_taskmanager_lost(sl_job_master_t *jm, const char *tm_id, const char *why) {
    pthread_mutex_lock(&jm->mu);
    int tm = -1;
    for (int i = 0; i < jm->ntms; i++)
        if (!strcmp(jm->tms[i].id, tm_id)) tm = i;
    int attempt = jm->attempt;
    bool cancel = false;
    for (int i = 0; tm >= 0 && i < jm->plan->ntasks; i++) {
        if (jm->placement[i] != tm || jm->state[i] >= SL_TASK_FINISHED) continue;
        if (!jm->failed && !jm->canceled) {
            jm->failed = true;
            jm->fail_rc = SL_EIO;
            snprintf(jm->fail_msg, sizeof jm->fail_msg, "%s", why);
            note_failure(jm, "sluice.TaskManagerLostException", why, i);
            cancel = true;
        }
        jm->state[i] = SL_TASK_FAILED;
        jm->nterminal++;
    }
    pthread_cond_broadcast(&jm->cv);
    pthread_mutex_unlock(&jm->mu);
    if (cancel) cancel_everywhere(jm, attempt, why);
}

const char *sl_jm_job_id(const sl_job_master_t *jm) { return jm->plan->job_id; }
const char *sl_jm_job_name(const sl_job_master_t *jm) { return jm->plan->job_name; }
const char *sl_jm_artifact(const sl_job_master_t *jm) { return jm->artifact; }
const sl_plan_t *sl_jm_plan(const sl_job_master_t *jm) { return jm->plan; }

int sl_jm_task_gateway(sl_job_master_t *jm, int task, sl_jm_taskmanager_t *gw, int *attempt, char *tm_id,
                       size_t tmcap, char *err, size_t errlen) {
    int rc = 0;
    pthread_mutex_lock(&jm->mu);
    if (strcmp(jm->status, "RUNNING") != 0)
        rc = sl_errf(err, errlen, SL_ESTATE, "job '%s' is %s, not RUNNING", jm->plan->job_name, jm->status);
    else if (task < 0 || task >= jm->plan->ntasks || !jm->placement || !jm->state)
        rc = sl_errf(err, errlen, SL_EINVAL, "job '%s' has no task %d", jm->plan->job_name, task);
    else if (jm->state[task] >= SL_TASK_FINISHED) /* deployed ones count as running: only ends are reported */
        rc = sl_errf(err, errlen, SL_ESTATE, "its subtask is %s", sl_task_state_name(jm->state[task]));
    else if (jm->placement[task] < 0 || jm->placement[task] >= jm->ntms)
        rc = sl_errf(err, errlen, SL_ESTATE, "its subtask is not placed on a TaskManager");
    else {
        *gw = jm->tms[jm->placement[task]].gw;
        snprintf(tm_id, tmcap, "%s", gw->id ? gw->id : "");
        gw->id = gw->host = NULL; /* freed when the attempt's TaskManagers change: tm_id is the copy */
        *attempt = jm->attempt;
    }
    pthread_mutex_unlock(&jm->mu);
    return rc;
}

const char *sl_jm_status(sl_job_master_t *jm, int *attempt) {
    pthread_mutex_lock(&jm->mu);
    const char *s = jm->status;
    if (attempt) *attempt = jm->attempt;
    pthread_mutex_unlock(&jm->mu);
    return s;
}

void sl_jm_destroy(sl_job_master_t *jm) {
    if (!jm) return;
    reset_attempt(jm); /* frees final states and pending metadata */
    clear_tms(jm);
    for (int i = 0; i < jm->nargs; i++) sl_free(jm->args[i]);
    sl_free(jm->args);
    sl_free(jm->artifact);
    sl_free(jm->restore_path);
    sl_free(jm->placement);
    sl_free(jm->state);
    sl_free(jm->final_state);
    sl_free(jm->nfinal);
    sl_free(jm->rec_in);
    sl_free(jm->rec_out);
    sl_free(jm->rec_skipped);
    sl_free(jm->eod);
    sl_free(jm->arch_tasks);
    sl_buf_free(&jm->plan_bytes);
    sl_plan_free(jm->plan);
    sl_free(jm->plan);
    pthread_mutex_destroy(&jm->mu);
    sl_job_metrics_free(jm->live);
    pthread_cond_destroy(&jm->cv);
    pthread_mutex_destroy(&jm->ckpt_mu);
    pthread_mutex_destroy(&jm->coord_mu);
    pthread_mutex_destroy(&jm->sp_trigger_mu);
    pthread_mutex_destroy(&jm->sp_mu);
    sl_free(jm->stopped_at);
    sl_free(jm);
}

int sl_jm_savepoint(sl_job_master_t *jm, const char *dir, int kind, int64_t *id, char *err, size_t errlen) {
    *id = 0;
    if (!sl_snap_is_savepoint(kind) || !sl_snap_kind_valid(kind))
        return sl_errf(err, errlen, SL_EINVAL, "savepoint: kind %d is not a kind of savepoint", kind);
    const sl_plan_t *p = jm->plan;
    if (!dir || !dir[0]) dir = p->cfg.savepoint_dir;
    if (!dir || !dir[0])
        return sl_errf(err, errlen, SL_EINVAL,
                       "savepoint: no target directory given and the job has no "
                       "execution.checkpointing.savepoint-dir");
    if (dir[0] != '/' && strncmp(dir, "s3://", 5) != 0)
        return sl_errf(err, errlen, SL_EINVAL, "savepoint: the target directory '%s' is not an absolute path or s3:// URI",
                       dir);
    for (const char *q = dir; (q = strstr(q, "..")); q += 2)
        if ((q == dir || q[-1] == '/') && (q[2] == 0 || q[2] == '/'))
            return sl_errf(err, errlen, SL_EINVAL, "savepoint: the target directory '%s' contains '..'", dir);
    if (!p->cfg.ckpt_enabled)
        return sl_errf(err, errlen, SL_ESTATE,
                       "savepoint: job '%s' runs without checkpointing (execution.checkpointing.interval); sluice "
                       "takes savepoints through the checkpoint coordinator",
                       p->job_name);
    if (!p->cfg.ckpt_dir[0])
        return sl_errf(err, errlen, SL_ESTATE,
                       "savepoint: job '%s' has no execution.checkpointing.dir, where its savepoints are staged",
                       p->job_name);
    /* an attempt whose tasks are being deployed (and may already run) is
     * RUNNING in a moment: wait for that rather than refuse (at most 5 s) */
    pthread_mutex_lock(&jm->mu);
    for (int i = 0; jm->deploying && i < 5000; i++) {
        pthread_mutex_unlock(&jm->mu);
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
        pthread_mutex_lock(&jm->mu);
    }
    pthread_mutex_unlock(&jm->mu);
    pthread_mutex_lock(&jm->sp_trigger_mu);
    pthread_mutex_lock(&jm->coord_mu);
    int rc = 0;
    const char *status = sl_jm_status(jm, NULL);
    if (!jm->coord || strcmp(status, "RUNNING") != 0) {
        rc = sl_errf(err, errlen, SL_ESTATE, "savepoint: job '%s' is %s, not RUNNING", p->job_name, status);
    } else {
        pthread_mutex_lock(&jm->sp_mu);
        jm->sp_next_dir = dir;
        pthread_mutex_unlock(&jm->sp_mu);
        int64_t before = jm->nsp;
        *id = sl_coordinator_trigger_kind(jm->coord, kind);
        pthread_mutex_lock(&jm->sp_mu);
        jm->sp_next_dir = NULL;
        if (*id < 0 && jm->nsp > before) { /* prepare refused it: it has its record with the reason */
            jm_savepoint_t *sp = &jm->sp[(jm->nsp - 1) % SAVEPOINTS_KEPT];
            rc = sl_errf(err, errlen, SL_ESTATE, "savepoint: %s", sp->failure[0] ? sp->failure : "could not start");
        } else if (*id < 0) {
            rc = sl_errf(err, errlen, SL_ESTATE,
                         "savepoint: cannot start now (a stop-with-savepoint is under way, or too many "
                         "checkpoints are pending)");
        }
        pthread_mutex_unlock(&jm->sp_mu);
    }
    pthread_mutex_unlock(&jm->coord_mu);
    pthread_mutex_unlock(&jm->sp_trigger_mu);
    if (rc < 0) *id = 0;
    return rc;
}

int sl_jm_savepoint_result(sl_job_master_t *jm, int64_t id, char *location, size_t lcap, char *failure, size_t fcap) {
    pthread_mutex_lock(&jm->sp_mu);
    jm_savepoint_t *sp = sp_find(jm, id);
    int rc = SL_ENOTFOUND;
    if (sp) {
        rc = sp->done ? 1 : 0;
        if (location && lcap) snprintf(location, lcap, "%s", sp->done && !sp->failure[0] ? sp->location : "");
        if (failure && fcap) snprintf(failure, fcap, "%s", sp->done ? sp->failure : "");
    }
    pthread_mutex_unlock(&jm->sp_mu);
    return rc;
}


/* ---- for the REST API ---- */

/* Records a failure (mu held).  task: the task index it happened in, or -1. */
static void note_failure(sl_job_master_t *jm, const char *name, const char *msg, int task) {
    sl_jm_exception_t *e = &jm->exc[jm->nexc++ % JM_EXCEPTIONS_KEPT];
    memset(e, 0, sizeof *e);
    snprintf(e->name, sizeof e->name, "%s", name);
    snprintf(e->message, sizeof e->message, "%s", msg);
    e->timestamp = sl_wall_ms();
    if (task < 0 || task >= jm->plan->ntasks) return;
    int sub = 0, v = sl_plan_task_vertex(jm->plan, task, &sub);
    if (v >= 0)
        snprintf(e->task, sizeof e->task, "%s (%d/%d)", jm->plan->vertices[v].name, sub + 1,
                 jm->plan->vertices[v].parallelism);
    int t = jm->placement[task];
    if (t >= 0 && t < jm->ntms) {
        snprintf(e->tm_id, sizeof e->tm_id, "%s", jm->tms[t].id);
        if (jm->tms[t].host[0])
            snprintf(e->location, sizeof e->location, "%s:%d", jm->tms[t].host, jm->tms[t].gw.data_port);
    }
}

int sl_jm_exceptions(sl_job_master_t *jm, sl_jm_exception_t *out, int cap) {
    pthread_mutex_lock(&jm->mu);
    int64_t first = jm->nexc > JM_EXCEPTIONS_KEPT ? jm->nexc - JM_EXCEPTIONS_KEPT : 0;
    if (jm->nexc - first > cap) first = jm->nexc - cap;
    int n = 0;
    for (int64_t i = first; i < jm->nexc; i++) out[n++] = jm->exc[i % JM_EXCEPTIONS_KEPT];
    pthread_mutex_unlock(&jm->mu);
    return n;
}

/* A coordinator starts (coord_mu held): its first id, and the restore. */
static void note_attempt_start(sl_job_master_t *jm) {
    jm->coord_first_id = jm->restore_path ? jm->restore_id + 1 : 1;
    /* ids from coord_first_id on are given again by the new coordinator:
     * the earlier attempts' checkpoints with those ids (pending ones that
     * failed with their attempt) leave the history; the counts keep them */
    size_t nt = (size_t)jm->plan->ntasks;
    sl_ckpt_stats_t *st = sl_calloc(JM_STATS_KEPT, sizeof *st);
    sl_ckpt_task_stats_t *ts = sl_calloc((size_t)JM_STATS_KEPT * (nt ? nt : 1), sizeof *ts);
    int64_t first = jm->narch > JM_STATS_KEPT ? jm->narch - JM_STATS_KEPT : 0, w = 0;
    for (int64_t i = first; i < jm->narch; i++) { /* oldest first, into st[0..w) */
        if (jm->arch[i % JM_STATS_KEPT].id >= jm->coord_first_id) continue;
        st[w] = jm->arch[i % JM_STATS_KEPT];
        memcpy(&ts[(size_t)w * nt], &jm->arch_tasks[(size_t)(i % JM_STATS_KEPT) * nt], nt * sizeof *ts);
        w++;
    }
    memcpy(jm->arch, st, (size_t)w * sizeof *st);
    memcpy(jm->arch_tasks, ts, (size_t)w * nt * sizeof *ts);
    jm->narch = w;
    sl_free(st);
    sl_free(ts);
    if (!jm->restore_path) return;
    jm->nrestored++;
    jm->restored_id = jm->restore_id;
    jm->restore_ts = sl_wall_ms();
    snprintf(jm->restored_path, sizeof jm->restored_path, "%s", jm->restore_path);
}

/* The figures and counts of a live coordinator (coord_mu held): its stats
 * into st[64] / tasks[64][ntasks]; returns how many. */
static int live_stats(sl_job_master_t *jm, sl_coordinator_t *coord, sl_ckpt_stats_t *st, sl_ckpt_task_stats_t *tasks,
                      int64_t *total, int64_t *completed, int64_t *in_progress) {
    int n = sl_coordinator_stats(coord, st, JM_STATS_KEPT);
    size_t nt = (size_t)jm->plan->ntasks;
    for (int i = 0; i < n; i++)
        if (sl_coordinator_task_stats(coord, st[i].id, &tasks[(size_t)i * nt]) < 0)
            memset(&tasks[(size_t)i * nt], 0, nt * sizeof *tasks);
    *completed = sl_coordinator_completed(coord, NULL);
    *in_progress = 0;
    for (int i = 0; i < n; i++) *in_progress += !st[i].completed && !st[i].aborted;
    *total = n ? st[n - 1].id - jm->coord_first_id + 1 : 0;
    return n;
}

/* The attempt ends (coord_mu held): its figures join the earlier ones;
 * what was pending failed with it. */
static void archive_stats(sl_job_master_t *jm, sl_coordinator_t *coord) {
    size_t nt = (size_t)jm->plan->ntasks;
    sl_ckpt_stats_t *st = sl_calloc(JM_STATS_KEPT, sizeof *st);
    sl_ckpt_task_stats_t *tasks = sl_calloc((size_t)JM_STATS_KEPT * (nt ? nt : 1), sizeof *tasks);
    int64_t total, completed, in_progress;
    int n = live_stats(jm, coord, st, tasks, &total, &completed, &in_progress);
    for (int i = 0; i < n; i++) {
        if (!st[i].completed) st[i].aborted = true;
        int64_t k = jm->narch++ % JM_STATS_KEPT;
        jm->arch[k] = st[i];
        memcpy(&jm->arch_tasks[(size_t)k * nt], &tasks[(size_t)i * nt], nt * sizeof *tasks);
    }
    jm->arch_total += total;
    jm->arch_completed += completed;
    jm->arch_failed += total - completed;
    sl_free(st);
    sl_free(tasks);
}

void sl_jm_checkpoint_view(sl_job_master_t *jm, sl_jm_ckpt_view_t *out) {
    memset(out, 0, sizeof *out);
    size_t nt = (size_t)jm->plan->ntasks;
    out->ntasks = (int)nt;
    out->stats = sl_calloc(2 * JM_STATS_KEPT, sizeof *out->stats);
    out->tasks = sl_calloc((size_t)2 * JM_STATS_KEPT * (nt ? nt : 1), sizeof *out->tasks);
    pthread_mutex_lock(&jm->coord_mu);
    int64_t first = jm->narch > JM_STATS_KEPT ? jm->narch - JM_STATS_KEPT : 0;
    for (int64_t i = first; i < jm->narch; i++, out->nstats++) {
        out->stats[out->nstats] = jm->arch[i % JM_STATS_KEPT];
        memcpy(&out->tasks[(size_t)out->nstats * nt], &jm->arch_tasks[(size_t)(i % JM_STATS_KEPT) * nt],
               nt * sizeof *out->tasks);
    }
    out->total = jm->arch_total;
    out->completed = jm->arch_completed;
    out->failed = jm->arch_failed;
    if (jm->coord) {
        int64_t total, completed, in_progress;
        int n = live_stats(jm, jm->coord, &out->stats[out->nstats], &out->tasks[(size_t)out->nstats * nt], &total,
                           &completed, &in_progress);
        out->nstats += n;
        out->total += total;
        out->completed += completed;
        out->in_progress = in_progress;
        out->failed += total - completed - in_progress;
    }
    out->restored = jm->nrestored;
    out->restored_id = jm->restored_id;
    out->restore_ts = jm->restore_ts;
    snprintf(out->restored_path, sizeof out->restored_path, "%s", jm->restored_path);
    pthread_mutex_unlock(&jm->coord_mu);
}

void sl_jm_ckpt_view_free(sl_jm_ckpt_view_t *v) {
    sl_free(v->stats);
    sl_free(v->tasks);
    v->stats = NULL;
    v->tasks = NULL;
}

int sl_jm_trigger_checkpoint(sl_job_master_t *jm, int64_t *id, char *err, size_t errlen) {
    *id = -1;
    pthread_mutex_lock(&jm->coord_mu);
    int rc = 0;
    if (!jm->coord)
        rc = sl_errf(err, errlen, SL_ESTATE, "job '%s' is not running an attempt that checkpoints (%s)",
                     jm->plan->job_name, jm->plan->cfg.ckpt_enabled ? "not running" : "checkpointing is not enabled");
    else
        *id = sl_coordinator_trigger(jm->coord);
    pthread_mutex_unlock(&jm->coord_mu);
    return rc;
}

int sl_jm_checkpoint_outcome(sl_job_master_t *jm, int64_t id, char *why, size_t cap) {
    sl_jm_ckpt_view_t v;
    sl_jm_checkpoint_view(jm, &v);
    int rc = sl_errf(why, cap, SL_ENOTFOUND, "checkpoint %lld is no longer known", (long long)id);
    for (int i = v.nstats - 1; i >= 0; i--) { /* the newest attempt's first: an id may repeat after a restore */
        if (v.stats[i].id != id) continue;
        if (v.stats[i].completed) rc = 1;
        else if (v.stats[i].aborted)
            rc = sl_errf(why, cap, SL_EIO, "checkpoint %lld failed (aborted, or its attempt ended)", (long long)id);
        else rc = 0;
        break;
    }
    sl_jm_ckpt_view_free(&v);
    return rc;
}

sl_job_metrics_t *sl_jm_live_metrics(sl_job_master_t *jm) { return jm->live; }
