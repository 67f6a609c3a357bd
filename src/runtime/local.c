/*
 * local.c — embedded mode (local.h): a JobManager and a TaskManager over
 * two in-memory queues, one per direction, each drained in order by its
 * own thread.
 */
#include "runtime/local.h"

#include <pthread.h>
#include <stdio.h>

#include "common/common.h"
#include "jobmanager/job_master.h"
#include "taskmanager/taskmanager.h"

/* One direction of the in-memory transport: frames in order. */
typedef struct pipe_item {
    sl_buf_t frame;
    struct pipe_item *next;
} pipe_item_t;

typedef struct pipe {
    const char *name;            /* "to the TaskManager", for errors */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pipe_item_t *head, *tail;
    bool stop;
    pthread_t thread;
    void (*deliver)(void *ctx, sl_msg_t *m);
    void *ctx;
} pipe_t;

struct sl_local_job {
    const sl_plan_t *plan;
    const sl_job_code_t *code;
    sl_job_master_t *jm;
    sl_taskmanager_t *tm;
    pipe_t to_tm, to_jm;
};

/* Encodes m into the pipe (the receiving thread decodes it). */
static void pipe_send(pipe_t *p, sl_msg_t *m) {
    pipe_item_t *it = sl_calloc(1, sizeof *it);
    char err[512];
    if (sl_msg_encode(m, &it->frame, err, sizeof err) < 0) {
        fprintf(stderr, "sluice: embedded transport: cannot encode a %s message %s: %s\n", sl_msg_type_name(m->type),
                p->name, err);
        sl_msg_destroy(m);
        sl_free(it);
        abort(); /* a message this process built must encode: a bug, not an input error */
    }
    sl_msg_destroy(m);
    pthread_mutex_lock(&p->mu);
    if (p->stop) { /* the other side is gone (the job is over) */
        pthread_mutex_unlock(&p->mu);
        sl_buf_free(&it->frame);
        sl_free(it);
        return;
    }
    if (p->tail)
        p->tail->next = it;
    else
        p->head = it;
    p->tail = it;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

static void *pipe_main(void *arg) {
    pipe_t *p = arg;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->head && !p->stop) pthread_cond_wait(&p->cv, &p->mu);
        if (!p->head) break;
        pipe_item_t *it = p->head;
        p->head = it->next;
        if (!p->head) p->tail = NULL;
        pthread_mutex_unlock(&p->mu);
        sl_msg_t *m = sl_calloc(1, sizeof *m);
        char err[512];
        if (sl_msg_decode(it->frame.p, it->frame.len, p->name, m, err, sizeof err) < 0) {
            fprintf(stderr, "sluice: embedded transport: %s\n", err);
            abort(); /* the frame came from this process: a bug */
        }
        sl_buf_free(&it->frame);
        sl_free(it);
        p->deliver(p->ctx, m);
        pthread_mutex_lock(&p->mu);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

static void pipe_init(pipe_t *p, const char *name, void (*deliver)(void *, sl_msg_t *), void *ctx) {
    memset(p, 0, sizeof *p);
    p->name = name;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->deliver = deliver;
    p->ctx = ctx;
}

/* Delivers what was queued, then ends the thread. */
static void pipe_stop(pipe_t *p) {
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
    pthread_join(p->thread, NULL);
}

static void pipe_free(pipe_t *p) {
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->cv);
}

static void send_to_tm(void *ctx, sl_msg_t *m) { pipe_send(&((sl_local_job_t *)ctx)->to_tm, m); }
static void send_to_jm(void *ctx, sl_msg_t *m) { pipe_send(&((sl_local_job_t *)ctx)->to_jm, m); }
static void deliver_tm(void *ctx, sl_msg_t *m) { sl_tm_handle(((sl_local_job_t *)ctx)->tm, m); }
static void deliver_jm(void *ctx, sl_msg_t *m) { sl_jm_handle(((sl_local_job_t *)ctx)->jm, m); }

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

int sl_local_job_new(const sl_plan_t *plan, const sl_job_code_t *code, const char *restore_path, sl_local_job_t **out,
                     char *err, size_t errlen) {
    *out = NULL;
    sl_local_job_t *j = sl_calloc(1, sizeof *j);
    j->plan = plan;
    j->code = code;
    sl_jm_config_t jc = {.artifact = "embedded", .restore_path = restore_path}; /* the code is this process's */
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
    if (pthread_create(&j->to_tm.thread, NULL, pipe_main, &j->to_tm) != 0 ||
        pthread_create(&j->to_jm.thread, NULL, pipe_main, &j->to_jm) != 0)
        abort();
    *out = j;
    return 0;
}

int sl_local_job_run(sl_local_job_t *j, sl_job_result_t *res) { return sl_jm_run(j->jm, res); }

void sl_local_job_cancel(sl_local_job_t *j) { sl_jm_cancel(j->jm); }

void sl_local_job_destroy(sl_local_job_t *j) {
    if (!j) return;
    /* every task has ended: drain the TaskManager's side, release its
     * deployments, then the JobManager's side */
    pipe_stop(&j->to_tm);
    sl_tm_destroy(j->tm);
    pipe_stop(&j->to_jm);
    sl_jm_destroy(j->jm);
    pipe_free(&j->to_tm);
    pipe_free(&j->to_jm);
    sl_free(j);
}
