/*
 * taskmanager.c — the TaskManager's handling of the JobManager's messages
 * (taskmanager.h): DEPLOY builds and starts a deployment, CANCEL, TRIGGER,
 * COMPLETE and ABORTED go to the deployment of that job attempt, and
 * STATE_QUERY to the task it names (state_query.h).
 */
#include "taskmanager/taskmanager.h"

#include <pthread.h>
#include <stdio.h>

#include "common/common.h"
#include "metrics/prom.h"
#include "taskmanager/deployment.h"
#include "taskmanager/state_query.h"

struct sl_taskmanager {
    sl_tm_config_t cfg;
    char *id;
    sl_deployment_t **deps;      /* at most one per job: the newest attempt */
    int ndeps;
    pthread_mutex_t deps_mu;     /* held while deps changes (and by sl_tm_prom_render) */
};

sl_taskmanager_t *sl_tm_new(const sl_tm_config_t *cfg) {
    sl_taskmanager_t *tm = sl_calloc(1, sizeof *tm);
    tm->cfg = *cfg;
    tm->id = sl_strdup(cfg->id ? cfg->id : "tm");
    tm->cfg.id = tm->id;
    pthread_mutex_init(&tm->deps_mu, NULL);
    return tm;
}

static int find(sl_taskmanager_t *tm, const char *job) {
    for (int i = 0; i < tm->ndeps; i++)
        if (!strcmp(sl_deployment_job(tm->deps[i]), job)) return i;
    return -1;
}

static sl_deployment_t *find_attempt(sl_taskmanager_t *tm, const char *job, int attempt) {
    int i = job ? find(tm, job) : -1;
    return i >= 0 && sl_deployment_attempt(tm->deps[i]) == attempt ? tm->deps[i] : NULL;
}

/* The deployment could not be built: every subtask it names fails with
 * the reason. */
static void refuse(sl_taskmanager_t *tm, const sl_msg_deploy_t *d, int rc, const char *why) {
    for (int i = 0; i < d->ntasks; i++) {
        sl_msg_t *m = sl_msg_new(SL_MSG_TASK_STATE);
        sl_msg_task_state_t *s = &m->u.task_state;
        s->job_id = sl_strdup(d->job_id);
        s->attempt = d->attempt;
        s->task = d->tasks[i];
        s->state = SL_TASK_FAILED;
        s->error_code = rc;
        s->message = sl_strdup(why);
        tm->cfg.send(tm->cfg.send_ctx, m);
    }
}

static void deploy(sl_taskmanager_t *tm, const sl_msg_deploy_t *d) {
    int i = find(tm, d->job_id);
    if (i >= 0) { /* the previous attempt has ended (the JobManager waited for it): release it */
        sl_deployment_cancel(tm->deps[i]);
        pthread_mutex_lock(&tm->deps_mu);
        sl_deployment_t *old = tm->deps[i];
        tm->deps[i] = tm->deps[--tm->ndeps];
        pthread_mutex_unlock(&tm->deps_mu);
        sl_deployment_destroy(old);
    }
    char err[1024] = "";
    const sl_plan_t *plan = NULL;
    const sl_job_code_t *code = NULL;
    int rc = tm->cfg.resolve(tm->cfg.resolve_ctx, d, &plan, &code, err, sizeof err);
    if (rc == 0 && sl_plan_fingerprint(plan) != d->plan_fingerprint) {
        rc = sl_errf(err, sizeof err, SL_EINVAL,
                     "TaskManager %s refuses job '%s': the job it built has plan fingerprint %016llx, the "
                     "JobManager's is %016llx (a different artifact, arguments or version)",
                     tm->id, d->job_id, (unsigned long long)sl_plan_fingerprint(plan),
                     (unsigned long long)d->plan_fingerprint);
    }
    sl_deployment_t *dep = NULL;
    if (rc == 0)
        rc = sl_deployment_new(plan, code, d, tm->cfg.dp, tm->cfg.send, tm->cfg.send_ctx, &dep, err, sizeof err);
    if (rc < 0) {
        refuse(tm, d, rc, err);
        return;
    }
    sl_deployment_set_tm_id(dep, tm->id);
    if (tm->cfg.dp) { /* a cluster TaskManager says what it runs */
        char what[2048];
        size_t k = 0;
        what[0] = 0;
        for (int t = 0; t < d->ntasks && k < sizeof what; t++) {
            const sl_plan_vertex_t *v = &plan->vertices[d->tasks[t].vertex];
            k += (size_t)snprintf(what + k, sizeof what - k, "%s%s (%d/%d)", t ? ", " : "", v->name,
                                  d->tasks[t].subtask + 1, v->parallelism);
        }
        fprintf(stderr, "sluice taskmanager %s: deploying job '%s' attempt %d%s: %s\n", tm->id, d->job_id, d->attempt,
                d->restore_path[0] ? " from its checkpoint" : "", what);
    }
    pthread_mutex_lock(&tm->deps_mu);
    tm->deps = sl_realloc(tm->deps, (size_t)(tm->ndeps + 1) * sizeof *tm->deps);
    tm->deps[tm->ndeps++] = dep;
    pthread_mutex_unlock(&tm->deps_mu);
    sl_deployment_start(dep, err, sizeof err); /* a task that cannot start reports its failure */
}

void sl_tm_handle(sl_taskmanager_t *tm, sl_msg_t *m) {
    sl_deployment_t *dep;
    switch (m->type) {
    case SL_MSG_DEPLOY: deploy(tm, &m->u.deploy); break;
    case SL_MSG_CANCEL:
        if ((dep = find_attempt(tm, m->u.cancel.job_id, m->u.cancel.attempt))) sl_deployment_cancel(dep);
        break;
    case SL_MSG_TRIGGER:
        if ((dep = find_attempt(tm, m->u.trigger.job_id, m->u.trigger.attempt)))
            sl_deployment_trigger(dep, m->u.trigger.checkpoint_id, m->u.trigger.timestamp, m->u.trigger.kind);
        break;
    case SL_MSG_COMPLETE:
    case SL_MSG_ABORTED:
        if ((dep = find_attempt(tm, m->u.notify.job_id, m->u.notify.attempt)))
            sl_deployment_notify(dep, m->u.notify.checkpoint_id, m->type == SL_MSG_COMPLETE);
        break;
    case SL_MSG_STATE_QUERY: /* answered from the task's thread (state_query.c) */
        sl_tm_state_query(find_attempt(tm, m->u.state_query.job_id, m->u.state_query.attempt), tm->id, m,
                          tm->cfg.send, tm->cfg.send_ctx);
        return;
    default:
        fprintf(stderr, "sluice: TaskManager %s ignores a %s message\n", tm->id, sl_msg_type_name(m->type));
        break;
    }
    sl_msg_destroy(m);
}

void sl_tm_cancel_all(sl_taskmanager_t *tm, const char *why) {
    if (tm->ndeps) fprintf(stderr, "sluice: TaskManager %s cancels its tasks: %s\n", tm->id, why);
    for (int i = 0; i < tm->ndeps; i++) sl_deployment_cancel(tm->deps[i]);
}

void sl_tm_channel_failed(sl_taskmanager_t *tm, uint64_t id, const char *why) {
    for (int i = 0; i < tm->ndeps; i++)
        if (sl_deployment_has_channel(tm->deps[i], id)) sl_deployment_fail(tm->deps[i], SL_EIO, why);
}

void sl_tm_destroy(sl_taskmanager_t *tm) {
    if (!tm) return;
    for (int i = 0; i < tm->ndeps; i++) {
        sl_deployment_cancel(tm->deps[i]);
        sl_deployment_destroy(tm->deps[i]);
    }
    sl_free(tm->deps);
    sl_free(tm->id);
    pthread_mutex_destroy(&tm->deps_mu);
    sl_free(tm);
}

void sl_tm_prom_render(sl_taskmanager_t *tm, sl_buf_t *out) {
    static const char *const names[SL_PROM_NFAMILIES] = {
        [SL_PROM_OP_IN] = "flink_taskmanager_job_task_operator_numRecordsIn",
        [SL_PROM_OP_OUT] = "flink_taskmanager_job_task_operator_numRecordsOut",
        [SL_PROM_OP_IN_WM] = "flink_taskmanager_job_task_operator_currentInputWatermark",
        [SL_PROM_OP_OUT_WM] = "flink_taskmanager_job_task_operator_currentOutputWatermark",
        [SL_PROM_OP_LATE] = "flink_taskmanager_job_task_operator_numLateRecordsDropped",
        [SL_PROM_OP_PENDING] = "flink_taskmanager_job_task_operator_pendingRecords",
        [SL_PROM_OP_STATE_MEM] = "flink_taskmanager_job_task_operator_stateMemoryBytes",
        [SL_PROM_OP_RDB_MEMTABLES] = "flink_taskmanager_job_task_operator_rocksdb_cur_size_all_mem_tables",
        [SL_PROM_OP_RDB_READERS] = "flink_taskmanager_job_task_operator_rocksdb_estimate_table_readers_mem",
        [SL_PROM_OP_RDB_BLOCK_CACHE] = "flink_taskmanager_job_task_operator_rocksdb_block_cache_usage",
        [SL_PROM_OP_RDB_LIVE_DATA] = "flink_taskmanager_job_task_operator_rocksdb_estimate_live_data_size",
        [SL_PROM_TASK_BUSY] = "flink_taskmanager_job_task_accumulatedBusyTime",
        [SL_PROM_TASK_IDLE] = "flink_taskmanager_job_task_accumulatedIdleTime",
        [SL_PROM_TASK_BP] = "flink_taskmanager_job_task_accumulatedBackPressuredTime",
        [SL_PROM_TASK_BYTES_IN] = "flink_taskmanager_job_task_numBytesIn",
        [SL_PROM_TASK_BYTES_OUT] = "flink_taskmanager_job_task_numBytesOut",
    };
    pthread_mutex_lock(&tm->deps_mu);
    for (int f = 0; f < SL_PROM_NFAMILIES; f++) {
        sl_prom_type(out, names[f]);
        for (int i = 0; i < tm->ndeps; i++) sl_deployment_prom_family(tm->deps[i], f, names[f], tm->id, out);
    }
    pthread_mutex_unlock(&tm->deps_mu);
}
