/*
 * local.c — embedded mode (local.h): a JobManager and a TaskManager over
 * two in-memory queues, one per direction, each drained in order by its
 * own thread.
 */
#include "runtime/local.h"

#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "common/common.h"
#include "common/workq.h"
#include "jobmanager/dispatcher.h"
#include "jobmanager/job_master.h"
#include "jobmanager/job_metrics.h"
#include "jobmanager/state_query.h"
#include "taskmanager/taskmanager.h"

/* One direction of the in-memory transport: encoded frames, delivered in
 * order by the queue's thread. */
typedef struct pipe {
    const char *name;            /* "to the TaskManager", for errors */
    sl_workq_t q;
    void (*deliver)(void *ctx, sl_msg_t *m);
    void *ctx;
} pipe_t;

struct sl_local_job {
    const sl_plan_t *plan;
    const sl_job_code_t *code;
    sl_job_master_t *jm;
    sl_taskmanager_t *tm;
    pipe_t to_tm, to_jm;
    sl_dispatcher_t *rest;       /* sl_local_job_serve_rest: the REST API's server, or NULL */
};

/* Encodes m into the pipe (the receiving thread decodes it). */
static void pipe_send(pipe_t *p, sl_msg_t *m) {
    sl_buf_t *frame = sl_calloc(1, sizeof *frame);
    char err[512];
    if (sl_msg_encode(m, frame, err, sizeof err) < 0) {
        fprintf(stderr, "sluice: embedded transport: cannot encode a %s message %s: %s\n", sl_msg_type_name(m->type),
                p->name, err);
        abort(); /* a message this process built must encode: a bug, not an input error */
    }
    sl_msg_destroy(m);
    sl_workq_post(&p->q, frame); /* refused (and dropped) once the other side is gone */
}

static void drop_frame(void *ctx, void *item) {
    (void)ctx;
    sl_buf_free(item);
    sl_free(item);
}

static void deliver_frame(void *ctx, void *item) {
    pipe_t *p = ctx;
    sl_buf_t *frame = item;
    sl_msg_t *m = sl_calloc(1, sizeof *m);
    char err[512];
    if (sl_msg_decode(frame->p, frame->len, p->name, m, err, sizeof err) < 0) {
        fprintf(stderr, "sluice: embedded transport: %s\n", err);
        abort(); /* the frame came from this process: a bug */
    }
    drop_frame(NULL, frame);
    p->deliver(p->ctx, m);
}

static void pipe_init(pipe_t *p, const char *name, void (*deliver)(void *, sl_msg_t *), void *ctx) {
    memset(p, 0, sizeof *p);
    p->name = name;
    p->deliver = deliver;
    p->ctx = ctx;
    if (sl_workq_start(&p->q, deliver_frame, drop_frame, p) < 0) abort();
}

static void send_to_tm(void *ctx, sl_msg_t *m) { pipe_send(&((sl_local_job_t *)ctx)->to_tm, m); }
static void send_to_jm(void *ctx, sl_msg_t *m) { pipe_send(&((sl_local_job_t *)ctx)->to_jm, m); }
static void deliver_tm(void *ctx, sl_msg_t *m) { sl_tm_handle(((sl_local_job_t *)ctx)->tm, m); }
static void deliver_jm(void *ctx, sl_msg_t *m) {
    if (m->type == SL_MSG_STATE_QUERY_RESULT) { /* to the query waiting for it (state_query.h) */
        sl_sq_deliver(m);
        return;
    }
    sl_jm_handle(((sl_local_job_t *)ctx)->jm, m);
}

/* The embedded TaskManager runs the environment's own code; the shipped
 * plan must still decode to the same plan. */
static int resolve(void *ctx, const sl_msg_deploy_t *d, const sl_plan_t **plan, const sl_job_code_t **code, char *err,
                   size_t errlen) {
    sl_local_job_t *j = ctx;
    sl_plan_t *shipped = NULL;
    int rc = sl_plan_decode(d->plan.p, d->plan.len, &shipped, err, errlen);
    if (rc < 0) return rc;
    uint64_t fp = sl_plan_fingerprint(shipped);
    sl_plan_free(shipped);
    sl_free(shipped);
    if (fp != sl_plan_fingerprint(j->plan))
        return sl_errf(err, errlen, SL_EINVAL, "the deployed plan is not the plan this process built");
    *plan = j->plan;
    *code = j->code;
    return 0;
}

int sl_local_job_new(const sl_plan_t *plan, const sl_job_code_t *code, const char *restore_path, bool allow_nrs,
                     sl_local_job_t **out, char *err, size_t errlen) {
    *out = NULL;
    sl_local_job_t *j = sl_calloc(1, sizeof *j);
    j->plan = plan;
    j->code = code;
    sl_jm_config_t jc = {.artifact = "embedded", /* the code is this process's */
                         .restore_path = restore_path,
                         .allow_non_restored_state = allow_nrs};
    int rc = sl_jm_new(plan, &jc, &j->jm, err, errlen);
    if (rc < 0) {
        sl_free(j);
        return rc;
    }
    sl_tm_config_t tc = {.id = "tm-local",
                         .slots = plan->ntasks > 0 ? plan->ntasks : 1, /* a MiniCluster offers what the job needs */
                         .send = send_to_jm,
                         .send_ctx = j,
                         .resolve = resolve,
                         .resolve_ctx = j};
    j->tm = sl_tm_new(&tc);
    sl_jm_taskmanager_t gw = {.id = "tm-local", .slots = tc.slots, .send = send_to_tm, .ctx = j};
    sl_jm_add_taskmanager(j->jm, &gw);
    pipe_init(&j->to_tm, "to the embedded TaskManager", deliver_tm, j);
    pipe_init(&j->to_jm, "to the embedded JobManager", deliver_jm, j);
    *out = j;
    return 0;
}

int sl_local_job_run(sl_local_job_t *j, sl_job_result_t *res) { return sl_jm_run(j->jm, res); }

void sl_local_job_cancel(sl_local_job_t *j) { sl_jm_cancel(j->jm); }

int sl_local_job_savepoint(sl_local_job_t *j, const char *dir, int kind, char *path, size_t cap, char *err,
                           size_t errlen) {
    int64_t id = 0;
    char loc[4200] = "", why[1024] = "";
    int rc = sl_jm_savepoint(j->jm, dir, kind, &id, err, errlen);
    while (rc == 0) { /* the outcome is recorded before the job's run returns */
        rc = sl_jm_savepoint_result(j->jm, id, loc, sizeof loc, why, sizeof why);
        if (rc == 1) {
            rc = why[0] ? sl_errf(err, errlen, SL_EIO, "savepoint %lld: %s", (long long)id, why) : 0;
            break;
        }
        if (rc < 0) {
            sl_errf(err, errlen, rc, "savepoint %lld: no longer known", (long long)id);
            break;
        }
        struct timespec ts = {0, 5 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (rc == 0 && path && cap) snprintf(path, cap, "%s", loc);
    return rc;
}

int sl_local_job_serve_rest(sl_local_job_t *j, const char *bind_address, int port, const char *token, int *bound,
                            char *err, size_t errlen) {
    sl_dispatcher_config_t dc = {.rest_host = bind_address,
                                 .rest_port = port,
                                 .rest_token = token && token[0] ? token : NULL,
                                 .no_rpc_listener = true};
    char e[1024];
    int rc = sl_dispatcher_new(&dc, &j->rest, e, sizeof e);
    if (rc == 0) rc = sl_dispatcher_adopt(j->rest, j->jm, e, sizeof e);
    if (rc < 0) {
        sl_dispatcher_destroy(j->rest);
        j->rest = NULL;
        return sl_errf(err, errlen, rc, "REST API of the embedded job (rest.bind-address %s, rest.port %d): %s",
                       bind_address ? bind_address : "127.0.0.1", port, e);
    }
    *bound = sl_dispatcher_rest_port(j->rest);
    return 0;
}

void sl_local_job_destroy(sl_local_job_t *j) {
    if (!j) return;
    sl_dispatcher_destroy(j->rest); /* it reads the job master */
    /* every task has ended: drain the TaskManager's side, release its
     * deployments, then the JobManager's side */
    sl_workq_stop(&j->to_tm.q);
    sl_tm_destroy(j->tm);
    sl_workq_stop(&j->to_jm.q);
    sl_jm_destroy(j->jm);
    sl_workq_free(&j->to_tm.q);
    sl_workq_free(&j->to_jm.q);
    sl_free(j);
}

void sl_local_job_set_metrics_listener(sl_local_job_t *j, sl_metrics_listener_fn fn, void *ctx) {
    sl_job_metrics_set_listener(sl_jm_live_metrics(j->jm), fn, ctx);
}

int sl_local_job_query_state(sl_local_job_t *j, const char *uid, const char *state, const char *key, const char *ns,
                             int64_t timeout_ms, char **body) {
    sl_sq_request_t rq = {.uid = uid, .state = state, .key = key, .ns = ns, .timeout_ms = timeout_ms};
    sl_sq_answer_t a;
    sl_sq_query(j->jm, &rq, &a);
    *body = a.body;
    return a.http;
}
