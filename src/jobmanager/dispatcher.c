/*
 * dispatcher.c — the JobManager process (dispatcher.h): TaskManager
 * registry and heartbeats over the RPC transport, jobs in job masters, the
 * REST provider.
 */
#include "jobmanager/dispatcher.h"

#include <openssl/rand.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/auth.h"
#include "checkpoint/s3_client.h"
#include "common/common.h"
#include "ha/ha_services.h"
#include "jobmanager/job_master.h"
#include "jobmanager/job_metrics.h"
#include "jobmanager/rest.h"
#include "jobmanager/state_query.h"
#include "metrics/prom.h"
#include "protocol/artifact.h"
#include "protocol/messages.h"
#include "protocol/rpc.h"

#define MAX_TMS 256
#define MAX_JOBS 1024
#define MAX_OPS 256                /* asynchronous operations remembered (the oldest ended ones go first) */
#define OP_TRIGGER_WAIT_MS 60000   /* a checkpoint trigger that finds no room for this long fails */

typedef enum { OP_CHECKPOINT = 0, OP_SAVEPOINT = 1 } op_kind_t;

/* One asynchronous operation (a trigger id's request). */
typedef struct dop {
    char tid[33];                /* 32 hex digits */
    char job[33];                /* the dispatcher's job id */
    op_kind_t kind;
    bool done;
    int64_t ckpt_id;             /* -1: not known (yet) */
    char location[4096];         /* success: the savepoint's directory */
    char failure[1024];          /* failed: why ("" = succeeded) */
    int64_t created_ms;
} dop_t;

typedef struct dtm {
    sl_dispatcher_t *d;
    char id[128], host[256];
    int data_port, slots;
    int64_t pid;
    sl_rpc_conn_t *conn;         /* NULL once lost */
    bool alive;
    int64_t last_hb_ms;
    int64_t registered_ms;
    /* its process figures from its latest heartbeat, and the CPU share
     * between its last two (-1 until two) */
    int64_t rss_bytes, cpu_ns, threads, hb_cpu_ms;
    double cpu_usage;
} dtm_t;

typedef struct djob {
    sl_dispatcher_t *d;
    char id[33];                 /* Flink's JobID */
    sl_job_master_t *jm;
    pthread_t thread;
    bool done;
    sl_job_result_t res;
    int64_t start_ms, end_ms;
    sl_jm_ha_t ha;               /* the job master's HA hooks (ctx: this job) */
    bool adopted;                /* sl_dispatcher_adopt: jm runs and is destroyed elsewhere */
} djob_t;

struct sl_dispatcher {
    sl_dispatcher_config_t cfg;
    char *secret;
    sl_rpc_t *rpc;
    sl_rest_t *rest;
    sl_prom_server_t *prom;
    sl_rpc_timer_t *timer;
    pthread_mutex_t mu;
    dtm_t *tms[MAX_TMS];         /* never freed before the dispatcher: job masters hold them as gateways */
    int ntms;
    djob_t *jobs[MAX_JOBS];
    int njobs;
    int64_t hb_seq, last_hb_sent_ms;
    pthread_mutex_t ops_mu;      /* guards ops (taken before a job master's locks, never inside them) */
    dop_t *ops[MAX_OPS];
    int nops;
    bool deposed;                /* HA: the session was lost; everything was suspended (under mu) */
};

static int64_t now_ms(void) { return sl_mono_ns() / 1000000; }

/* ---- sending to a TaskManager ---- */

static void send_msg(sl_rpc_conn_t *conn, sl_msg_t *m) {
    sl_buf_t b = {0};
    char err[256];
    if (conn && sl_msg_encode(m, &b, err, sizeof err) == 0) sl_rpc_send(conn, b.p, b.len);
    sl_buf_free(&b);
    sl_msg_destroy(m);
}

/* A job master's gateway to a TaskManager (any thread). */
static void gw_send(void *ctx, sl_msg_t *m) {
    dtm_t *t = ctx;
    pthread_mutex_lock(&t->d->mu);
    sl_rpc_conn_t *conn = t->alive ? t->conn : NULL;
    if (conn) sl_rpc_conn_retain(conn);
    pthread_mutex_unlock(&t->d->mu);
    send_msg(conn, m);
    if (conn) sl_rpc_conn_release(conn);
}

static int list_tms(void *ctx, sl_jm_taskmanager_t *out, int cap) {
    sl_dispatcher_t *d = ctx;
    pthread_mutex_lock(&d->mu);
    int n = 0;
    for (int i = 0; i < d->ntms && n < cap; i++) {
        dtm_t *t = d->tms[i];
        if (!t->alive) continue;
        out[n++] = (sl_jm_taskmanager_t){.id = t->id,
                                         .slots = t->slots,
                                         .send = gw_send,
                                         .ctx = t,
                                         .host = t->host,
                                         .data_port = t->data_port};
    }
    pthread_mutex_unlock(&d->mu);
    return n;
}

/* ---- TaskManagers ---- */

/* t is gone: every running job hears of it (mu not held). */
static void lost(sl_dispatcher_t *d, dtm_t *t, const char *why) {
    pthread_mutex_lock(&d->mu);
    if (!t->alive) {
        pthread_mutex_unlock(&d->mu);
        return;
    }
    t->alive = false;
    sl_rpc_conn_t *conn = t->conn;
    t->conn = NULL;
    sl_job_master_t *jms[MAX_JOBS];
    int n = 0;
    for (int i = 0; i < d->njobs; i++)
        if (!d->jobs[i]->done) jms[n++] = d->jobs[i]->jm;
    pthread_mutex_unlock(&d->mu);
    fprintf(stderr, "sluice jobmanager: %s\n", why);
    if (conn) {
        sl_rpc_close(conn, why);
        sl_rpc_conn_release(conn);
    }
    for (int i = 0; i < n; i++) sl_jm_taskmanager_lost(jms[i], t->id, why);
}

static dtm_t *tm_by_conn(sl_dispatcher_t *d, sl_rpc_conn_t *conn) {
    for (int i = 0; i < d->ntms; i++)
        if (d->tms[i]->alive && d->tms[i]->conn == conn) return d->tms[i];
    return NULL;
}

static void on_register(sl_dispatcher_t *d, sl_rpc_conn_t *conn, const sl_msg_register_t *r) {
    sl_msg_t *reply = sl_msg_new(SL_MSG_REGISTERED);
    /* with HA the leader's fencing token: the TaskManager accepts this
     * JobManager only if it is the leader it retrieved */
    reply->u.registered.jm_id = sl_strdup(d->cfg.ha ? sl_ha_election_token(d->cfg.ha) : "jobmanager");
    pthread_mutex_lock(&d->mu);
    dtm_t *t = NULL;
    for (int i = 0; i < d->ntms; i++)
        if (!strcmp(d->tms[i]->id, r->tm_id)) t = d->tms[i];
    char reason[400] = "";
    if (t && t->alive && t->conn != conn)
        snprintf(reason, sizeof reason, "TaskManager id '%s' is registered already (from %s)", r->tm_id, t->host);
    else if (!t && d->ntms == MAX_TMS)
        snprintf(reason, sizeof reason, "too many TaskManagers (%d)", MAX_TMS);
    else if (r->slots < 1 || r->data_port < 1)
        snprintf(reason, sizeof reason, "a TaskManager needs at least one slot and a data port");
    if (!reason[0]) {
        if (!t) {
            t = sl_calloc(1, sizeof *t);
            t->d = d;
            snprintf(t->id, sizeof t->id, "%s", r->tm_id);
            d->tms[d->ntms++] = t;
        }
        snprintf(t->host, sizeof t->host, "%s", r->host);
        t->data_port = r->data_port;
        t->slots = r->slots;
        t->pid = r->pid;
        if (t->conn != conn) {
            sl_rpc_conn_retain(conn);
            if (t->conn) sl_rpc_conn_release(t->conn);
            t->conn = conn;
        }
        t->alive = true;
        t->last_hb_ms = t->registered_ms = now_ms();
    }
    pthread_mutex_unlock(&d->mu);
    reply->u.registered.accepted = !reason[0];
    reply->u.registered.reason = sl_strdup(reason);
    if (reason[0])
        fprintf(stderr, "sluice jobmanager: refused TaskManager %s from %s: %s\n", r->tm_id, sl_rpc_conn_peer(conn),
                reason);
    else
        fprintf(stderr, "sluice jobmanager: registered TaskManager %s at %s (data port %d, %d slot%s)\n", r->tm_id,
                r->host, r->data_port, r->slots, r->slots == 1 ? "" : "s");
    send_msg(conn, reply);
}

static sl_job_master_t *job_of(sl_dispatcher_t *d, const char *plan_job_id) {
    sl_job_master_t *jm = NULL;
    pthread_mutex_lock(&d->mu);
    for (int i = 0; i < d->njobs && !jm; i++)
        if (!d->jobs[i]->done && !strcmp(sl_jm_job_id(d->jobs[i]->jm), plan_job_id)) jm = d->jobs[i]->jm;
    pthread_mutex_unlock(&d->mu);
    return jm;
}

static void rpc_on_open(void *ctx, sl_rpc_conn_t *conn) { (void)ctx, (void)conn; }

/* A TaskManager's artifact download (protocol/artifact.h): the artifact
 * of a job this JobManager runs, found by the job's id, never by a path. */
static void serve_artifact(sl_dispatcher_t *d, sl_rpc_conn_t *conn, const uint8_t *bytes, size_t len) {
    char id[256], err[600] = "", path[4200] = "";
    sl_buf_t out = {0}, file = {0};
    int rc = sl_artifact_request_decode(bytes, len, id, sizeof id, err, sizeof err);
    if (rc == 0) {
        pthread_mutex_lock(&d->mu);
        for (int i = d->njobs - 1; i >= 0 && !path[0]; i--)
            if (!strcmp(sl_jm_job_id(d->jobs[i]->jm), id))
                snprintf(path, sizeof path, "%s", sl_jm_artifact(d->jobs[i]->jm));
        pthread_mutex_unlock(&d->mu);
        if (!path[0] || !strncmp(path, "builtin:", 8))
            rc = sl_errf(err, sizeof err, SL_ENOTFOUND, "no job '%s' with an artifact here", id);
    }
    if (rc == 0) rc = sl_artifact_read_file(path, &file, err, sizeof err);
    if (rc < 0) fprintf(stderr, "sluice jobmanager: artifact request from %s refused: %s\n", sl_rpc_conn_peer(conn), err);
    else fprintf(stderr, "sluice jobmanager: sent the artifact of job %s (%zu bytes) to %s\n", id, file.len,
                 sl_rpc_conn_peer(conn));
    sl_artifact_answer_encode(file.p, file.len, rc < 0 ? err : NULL, &out);
    sl_rpc_send(conn, out.p, out.len);
    sl_buf_free(&out);
    sl_buf_free(&file);
}

static void rpc_on_message(void *ctx, sl_rpc_conn_t *conn, const uint8_t *bytes, size_t len) {
    sl_dispatcher_t *d = ctx;
    char where[300], err[1024];
    if (sl_rpc_conn_kind(conn) == SL_AUTH_ARTIFACT) {
        serve_artifact(d, conn, bytes, len);
        return;
    }
    snprintf(where, sizeof where, "%s", sl_rpc_conn_peer(conn));
    sl_msg_t *m = sl_calloc(1, sizeof *m);
    if (sl_msg_decode(bytes, len, where, m, err, sizeof err) < 0) {
        fprintf(stderr, "sluice jobmanager: refused: %s; closing the connection\n", err);
        sl_msg_destroy(m);
        sl_rpc_close(conn, "bad control message");
        return;
    }
    const char *job = NULL;
    switch (m->type) {
    case SL_MSG_REGISTER: on_register(d, conn, &m->u.reg); break;
    case SL_MSG_HEARTBEAT: {
        pthread_mutex_lock(&d->mu);
        dtm_t *t = tm_by_conn(d, conn);
        if (t) {
            const sl_msg_heartbeat_t *h = &m->u.heartbeat;
            int64_t now = now_ms();
            t->cpu_usage = t->hb_cpu_ms && now > t->hb_cpu_ms && h->cpu_ns >= t->cpu_ns
                               ? 100.0 * (double)(h->cpu_ns - t->cpu_ns) / 1e6 / (double)(now - t->hb_cpu_ms)
                               : -1;
            t->hb_cpu_ms = now;
            t->last_hb_ms = now;
            t->rss_bytes = h->rss_bytes;
            t->cpu_ns = h->cpu_ns;
            t->threads = h->threads;
        }
        pthread_mutex_unlock(&d->mu);
        break;
    }
    case SL_MSG_TASK_STATE: job = m->u.task_state.job_id; break;
    case SL_MSG_ACK: job = m->u.ack.job_id; break;
    case SL_MSG_DECLINE: job = m->u.decline.job_id; break;
    case SL_MSG_METRICS: job = m->u.metrics.job_id; break;
    case SL_MSG_STATE_QUERY_RESULT: { /* to the query waiting for it (state_query.h) */
        pthread_mutex_lock(&d->mu);
        bool known = tm_by_conn(d, conn) != NULL;
        pthread_mutex_unlock(&d->mu);
        if (known) {
            sl_sq_deliver(m);
            return;
        }
        break;
    }
    default:
        fprintf(stderr, "sluice jobmanager: ignored a %s message from %s\n", sl_msg_type_name(m->type), where);
        break;
    }
    if (job) {
        pthread_mutex_lock(&d->mu);
        bool known = tm_by_conn(d, conn) != NULL;
        pthread_mutex_unlock(&d->mu);
        sl_job_master_t *jm = known ? job_of(d, job) : NULL;
        if (jm) {
            sl_jm_handle(jm, m); /* takes m */
            return;
        }
    }
    sl_msg_destroy(m);
}

static void rpc_on_closed(void *ctx, sl_rpc_conn_t *conn, const char *why) {
    sl_dispatcher_t *d = ctx;
    pthread_mutex_lock(&d->mu);
    dtm_t *t = tm_by_conn(d, conn);
    pthread_mutex_unlock(&d->mu);
    if (t) {
        char msg[800];
        snprintf(msg, sizeof msg, "lost TaskManager %s at %s: its connection failed (%s)", t->id,
                 sl_rpc_conn_peer(conn), why);
        lost(d, t, msg);
    }
    sl_rpc_conn_release(conn);
}

/* Every 100 ms on the loop thread: heartbeats out every interval, and
 * TaskManagers silent for longer than the timeout declared lost. */
static void ops_advance(sl_dispatcher_t *d);

static void suspend_all(sl_dispatcher_t *d);

static void on_tick(void *ctx) {
    sl_dispatcher_t *d = ctx;
    if (d->cfg.ha && sl_ha_lost(d->cfg.ha)) {
        suspend_all(d);
        return;
    }
    ops_advance(d);
    int64_t now = now_ms();
    bool send = now - d->last_hb_sent_ms >= d->cfg.heartbeat_interval_ms;
    if (send) d->last_hb_sent_ms = now;
    dtm_t *late[MAX_TMS];
    int nlate = 0;
    pthread_mutex_lock(&d->mu);
    for (int i = 0; i < d->ntms; i++) {
        dtm_t *t = d->tms[i];
        if (!t->alive) continue;
        if (now - t->last_hb_ms > d->cfg.heartbeat_timeout_ms) {
            late[nlate++] = t;
            continue;
        }
        if (send) {
            sl_msg_t *m = sl_msg_new(SL_MSG_HEARTBEAT);
            m->u.heartbeat.sender = sl_strdup("jobmanager");
            m->u.heartbeat.seq = ++d->hb_seq;
            send_msg(t->conn, m);
        }
    }
    pthread_mutex_unlock(&d->mu);
    for (int i = 0; i < nlate; i++) {
        char msg[600];
        snprintf(msg, sizeof msg, "lost TaskManager %s at %s: no heartbeat for %lld ms (heartbeat.timeout %lld ms)",
                 late[i]->id, late[i]->host, (long long)(now - late[i]->last_hb_ms),
                 (long long)d->cfg.heartbeat_timeout_ms);
        lost(d, late[i], msg);
    }
}

/* ---- jobs ---- */

/* ---- high availability: the job master's hooks (ha_services.h) ---- */

static int ha_issue(void *ctx, int64_t id, char *err, size_t errlen) {
    djob_t *j = ctx;
    return sl_ha_counter_issue(j->d->cfg.ha, j->id, id, err, errlen);
}

static int ha_completed(void *ctx, int64_t id, const char *dir, int retain, char *err, size_t errlen) {
    djob_t *j = ctx;
    return sl_ha_checkpoint_add(j->d->cfg.ha, j->id, id, dir, retain, err, errlen);
}

static int64_t ha_next_id(void *ctx) {
    djob_t *j = ctx;
    int64_t next = 0;
    char err[512];
    if (sl_ha_counter_get(j->d->cfg.ha, j->id, &next, err, sizeof err) < 0) {
        fprintf(stderr, "sluice jobmanager: job %s: %s\n", j->id, err);
        return 0;
    }
    return next;
}

static int ha_latest(void *ctx, char *dir, size_t cap) {
    djob_t *j = ctx;
    int64_t id;
    char err[512];
    int rc = sl_ha_checkpoint_latest(j->d->cfg.ha, j->id, &id, dir, cap, err, sizeof err);
    if (rc < 0 && rc != SL_ENOTFOUND) fprintf(stderr, "sluice jobmanager: job %s: %s\n", j->id, err);
    return rc;
}

static int ha_check_leadership(void *ctx, char *err, size_t errlen) {
    djob_t *j = ctx;
    int rc = sl_ha_election_leading(j->d->cfg.ha, err, errlen);
    if (rc == 0) rc = sl_errf(err, errlen, SL_ESTATE, "this JobManager is no longer the leader");
    return rc < 0 ? rc : 0;
}

/* The session is lost: stop acting.  Every job is suspended (its
 * checkpoints and its entry in the job graph store stay, for the next
 * leader) and every TaskManager dropped, so that no subtask waits for
 * this JobManager.  Loop thread. */
static void lost(sl_dispatcher_t *d, dtm_t *t, const char *why);

static void suspend_all(sl_dispatcher_t *d) {
    pthread_mutex_lock(&d->mu);
    bool first = !d->deposed;
    d->deposed = true;
    sl_job_master_t *jms[MAX_JOBS];
    int n = 0;
    for (int i = 0; first && i < d->njobs; i++)
        if (!d->jobs[i]->done) jms[n++] = d->jobs[i]->jm;
    dtm_t *tms[MAX_TMS];
    int nt = 0;
    for (int i = 0; first && i < d->ntms; i++)
        if (d->tms[i]->alive) tms[nt++] = d->tms[i];
    pthread_mutex_unlock(&d->mu);
    if (!first) return;
    fprintf(stderr, "sluice jobmanager: lost the ZooKeeper session: no longer the leader; suspending %d job%s\n", n,
            n == 1 ? "" : "s");
    for (int i = 0; i < n; i++) sl_jm_suspend(jms[i]);
    for (int i = 0; i < nt; i++) lost(d, tms[i], "this JobManager is no longer the leader");
}

bool sl_dispatcher_deposed(sl_dispatcher_t *d) {
    pthread_mutex_lock(&d->mu);
    bool r = d->deposed;
    pthread_mutex_unlock(&d->mu);
    return r;
}

static void *job_main(void *arg) {
    djob_t *j = arg;
    sl_jm_run(j->jm, &j->res);
    if (j->d->cfg.ha && !sl_jm_suspended(j->jm)) { /* finished, cancelled or failed for good: no leader resumes it */
        char err[600];
        if (sl_ha_job_remove(j->d->cfg.ha, j->id, err, sizeof err) < 0)
            fprintf(stderr, "sluice jobmanager: job %s: could not remove it from the HA stores: %s\n", j->id, err);
    }
    pthread_mutex_lock(&j->d->mu);
    j->done = true;
    j->end_ms = sl_wall_ms();
    pthread_mutex_unlock(&j->d->mu);
    fprintf(stderr, "sluice jobmanager: job %s (%s) %s%s%s\n", j->id, sl_jm_job_name(j->jm),
            sl_jm_status(j->jm, NULL), j->res.rc < 0 ? ": " : "", j->res.rc < 0 ? j->res.err : "");
    return NULL;
}

/* Submits a job under id (NULL: a new random one); recovered: it comes
 * from the job graph store (HA), restore_path its latest checkpoint. */
static int submit_as(sl_dispatcher_t *d, const char *given_id, bool recovered, const char *artifact, int nargs,
                     char **args, const char *restore_path, bool allow_nrs, char *job_id, size_t idcap, char *err,
                     size_t errlen) {
    if (sl_dispatcher_deposed(d)) return sl_errf(err, errlen, SL_ESTATE, "this JobManager is no longer the leader");
    sl_plan_t *plan = NULL;
    int rc = d->cfg.compile(d->cfg.compile_ctx, artifact, nargs, args, &plan, err, errlen);
    if (rc < 0) return rc;
    if (job_of(d, plan->job_id)) {
        rc = sl_errf(err, errlen, SL_ESTATE, "a job named '%s' is running already", plan->job_name);
        sl_plan_free(plan);
        sl_free(plan);
        return rc;
    }
    djob_t *j = sl_calloc(1, sizeof *j);
    j->d = d;
    uint8_t rnd[16];
    RAND_bytes(rnd, sizeof rnd);
    for (int i = 0; i < 16; i++) snprintf(j->id + 2 * i, 3, "%02x", rnd[i]);
    if (given_id) snprintf(j->id, sizeof j->id, "%s", given_id);
    char stored[4400];
    if (d->cfg.ha) {
        j->ha = (sl_jm_ha_t){.ctx = j,
                             .issue_checkpoint_id = ha_issue,
                             .checkpoint_completed = ha_completed,
                             .next_checkpoint_id = ha_next_id,
                             .latest_checkpoint = ha_latest,
                             .check_leadership = ha_check_leadership};
        if (!recovered) { /* into the job graph store before it runs: a new leader would run it again */
            sl_ha_job_t hj = {.artifact = (char *)artifact,
                              .nargs = nargs,
                              .args = args,
                              .restore_path = (char *)restore_path,
                              .allow_nrs = allow_nrs};
            snprintf(hj.id, sizeof hj.id, "%s", j->id);
            rc = sl_ha_job_put(d->cfg.ha, &hj, stored, sizeof stored, err, errlen);
            if (rc < 0) {
                sl_plan_free(plan);
                sl_free(plan);
                sl_free(j);
                return rc;
            }
            /* the copy in a local high-availability.storageDir outlives this
             * process; an s3:// one is for the next leader, this one runs
             * the file it has */
            if (!sl_s3_is_uri(stored)) artifact = stored;
        }
    }
    sl_jm_config_t jc = {.artifact = artifact,
                         .nargs = nargs,
                         .args = args,
                         .restore_path = restore_path,
                         .allow_non_restored_state = allow_nrs,
                         .list_taskmanagers = list_tms,
                         .list_ctx = d,
                         .slot_request_timeout_ms = d->cfg.slot_request_timeout_ms,
                         .evenly_spread_out_slots = d->cfg.evenly_spread_out_slots,
                         .ha = d->cfg.ha ? &j->ha : NULL};
    rc = sl_jm_new(plan, &jc, &j->jm, err, errlen);
    sl_plan_free(plan);
    sl_free(plan);
    if (rc < 0) {
        sl_free(j);
        return rc;
    }
    j->start_ms = sl_wall_ms();
    j->end_ms = -1;
    pthread_mutex_lock(&d->mu);
    if (d->njobs == MAX_JOBS) {
        pthread_mutex_unlock(&d->mu);
        sl_jm_destroy(j->jm);
        sl_free(j);
        return sl_errf(err, errlen, SL_ESTATE, "too many jobs (%d)", MAX_JOBS);
    }
    d->jobs[d->njobs++] = j;
    pthread_mutex_unlock(&d->mu);
    if (pthread_create(&j->thread, NULL, job_main, j) != 0) abort();
    snprintf(job_id, idcap, "%s", j->id);
    fprintf(stderr, "sluice jobmanager: job %s (%s) %s: %s%s%s\n", j->id, sl_jm_job_name(j->jm),
            recovered ? "recovered" : "submitted", artifact, restore_path ? ", from " : "",
            restore_path ? restore_path : "");
    return 0;
}

int sl_dispatcher_adopt(sl_dispatcher_t *d, struct sl_job_master *jm, char *err, size_t errlen) {
    djob_t *j = sl_calloc(1, sizeof *j);
    j->d = d;
    j->jm = jm;
    j->adopted = true;
    j->start_ms = sl_wall_ms();
    uint8_t rnd[16]; /* a JobID as Flink's, 32 hex digits */
    RAND_bytes(rnd, sizeof rnd);
    for (int i = 0; i < 16; i++) snprintf(j->id + 2 * i, 3, "%02x", rnd[i]);
    pthread_mutex_lock(&d->mu);
    bool room = d->njobs < MAX_JOBS;
    if (room) d->jobs[d->njobs++] = j;
    pthread_mutex_unlock(&d->mu);
    if (!room) {
        sl_free(j);
        return sl_errf(err, errlen, SL_ESTATE, "too many jobs");
    }
    return 0;
}

int sl_dispatcher_submit(sl_dispatcher_t *d, const char *artifact, int nargs, char **args, const char *restore_path,
                         bool allow_nrs, char *job_id, size_t idcap, char *err, size_t errlen) {
    return submit_as(d, NULL, false, artifact, nargs, args, restore_path, allow_nrs, job_id, idcap, err, errlen);
}

int sl_dispatcher_recover_jobs(sl_dispatcher_t *d, char *err, size_t errlen) {
    if (!d->cfg.ha) return 0;
    char **ids;
    int n, rc = sl_ha_job_ids(d->cfg.ha, &ids, &n, err, errlen);
    if (rc < 0) return rc;
    int recovered = 0;
    for (int i = 0; i < n && rc >= 0; i++) {
        sl_ha_job_t hj;
        char e[1024], dir[4200], id[64];
        int64_t ck = 0;
        rc = sl_ha_job_get(d->cfg.ha, ids[i], &hj, err, errlen);
        if (rc == SL_ENOTFOUND) { /* removed meanwhile (it ended) */
            rc = 0;
            continue;
        }
        if (rc == SL_EFORMAT) { /* a pointer no JobManager can read: reported, the others go on */
            fprintf(stderr, "sluice jobmanager: could not recover job %s: %s\n", ids[i], err);
            rc = 0;
            continue;
        }
        if (rc < 0) break;
        int lrc = sl_ha_checkpoint_latest(d->cfg.ha, hj.id, &ck, dir, sizeof dir, e, sizeof e);
        if (lrc < 0 && lrc != SL_ENOTFOUND) {
            rc = sl_errf(err, errlen, lrc, "job %s: %s", hj.id, e);
            sl_ha_job_clear(&hj);
            break;
        }
        /* an artifact in S3 is fetched into this JobManager's directory; the
         * store unreachable (after the client's retries) fails the recovery,
         * an object that is gone fails only this job */
        int arc = sl_ha_job_localize(d->cfg.ha, &hj, d->cfg.artifact_dir ? d->cfg.artifact_dir
                                                               : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
                                     e, sizeof e);
        if (arc == SL_EIO) {
            rc = sl_errf(err, errlen, arc, "%s", e);
            sl_ha_job_clear(&hj);
            break;
        }
        if (arc < 0) {
            fprintf(stderr, "sluice jobmanager: could not recover job %s: %s\n", hj.id, e);
            sl_ha_job_clear(&hj);
            continue;
        }
        const char *from = lrc == 0 ? dir : hj.restore_path;
        int src = submit_as(d, hj.id, true, hj.artifact, hj.nargs, hj.args, from, hj.allow_nrs, id, sizeof id, e,
                            sizeof e);
        if (src < 0) /* it cannot run here (its artifact is gone, ...): reported, the others go on */
            fprintf(stderr, "sluice jobmanager: could not recover job %s: %s\n", hj.id, e);
        else
            recovered++;
        sl_ha_job_clear(&hj);
    }
    sl_zk_free_names(ids, n);
    return rc < 0 ? rc : recovered;
}

/* d->mu held. */
static djob_t *job_by_id(sl_dispatcher_t *d, const char *id) {
    for (int i = 0; i < d->njobs; i++)
        if (!strcmp(d->jobs[i]->id, id)) return d->jobs[i];
    return NULL;
}

/* ---- REST provider (libmicrohttpd's thread) ---- */

/* The plan's edges between vertices (the non-chained ones), as each
 * vertex's inputs: the REST "plan" of GET /jobs/:jobid. */
static int vertex_of_node(const sl_plan_t *p, int node) {
    for (int v = 0; v < p->nvertices; v++)
        for (int k = 0; k < p->vertices[v].nnodes; k++)
            if (p->vertices[v].nodes[k] == node) return v;
    return -1;
}

static void fill_plan_inputs(const sl_plan_t *p, sl_rest_vertex_t *vs) {
    for (int e = 0; e < p->nedges; e++) {
        const sl_plan_edge_t *pe = &p->edges[e];
        if (pe->chained) continue;
        int a = vertex_of_node(p, pe->src), b = vertex_of_node(p, pe->dst);
        if (a < 0 || b < 0 || a == b || vs[b].ninputs == SL_REST_MAX_INPUTS) continue;
        vs[b].inputs[vs[b].ninputs].vertex = a;
        snprintf(vs[b].inputs[vs[b].ninputs].ship_strategy, sizeof vs[b].inputs[0].ship_strategy, "%s",
                 sl_plan_part_name(pe->part));
        vs[b].ninputs++;
    }
}

static void fill_job(djob_t *j, sl_rest_job_t *o, bool vertices) {
    memset(o, 0, sizeof *o);
    snprintf(o->id, sizeof o->id, "%s", j->id);
    snprintf(o->name, sizeof o->name, "%s", sl_jm_job_name(j->jm));
    int attempt = 0;
    const char *st = sl_jm_status(j->jm, &attempt);
    snprintf(o->state, sizeof o->state, "%s", st);
    o->num_restarts = attempt > 0 ? attempt : 0;
    o->start_time = j->start_ms;
    o->end_time = j->done ? j->end_ms : -1;
    o->duration = -1;
    const sl_plan_t *p = sl_jm_plan(j->jm);
    o->tasks_total = p->ntasks;
    o->tasks_running = !strcmp(st, "RUNNING") ? p->ntasks : 0;
    o->max_parallelism = p->cfg.max_parallelism;
    if (!vertices) return;
    o->vertices = calloc((size_t)(p->nvertices ? p->nvertices : 1), sizeof *o->vertices);
    o->nvertices = p->nvertices;
    for (int v = 0; v < p->nvertices; v++) {
        sl_rest_vertex_t *rv = &o->vertices[v];
        snprintf(rv->id, sizeof rv->id, "%016llx%016x", (unsigned long long)sl_plan_fingerprint(p), v);
        snprintf(rv->name, sizeof rv->name, "%s", p->vertices[v].name);
        rv->parallelism = p->vertices[v].parallelism;
        rv->max_parallelism = p->cfg.max_parallelism;
        snprintf(rv->status, sizeof rv->status, "%s",
                 !strcmp(st, "RESTARTING") ? "CANCELED" : !strcmp(st, "CREATED") ? "CREATED" : st);
    }
    fill_plan_inputs(p, o->vertices);
}

static int rest_overview(void *ud, sl_rest_overview_t *o, char *err, size_t errlen) {
    sl_dispatcher_t *d = ud;
    memset(o, 0, sizeof *o);
    pthread_mutex_lock(&d->mu);
    for (int i = 0; i < d->ntms; i++)
        if (d->tms[i]->alive) {
            o->taskmanagers++;
            o->slots_total += d->tms[i]->slots;
        }
    int used = 0;
    for (int i = 0; i < d->njobs; i++) {
        const char *st = sl_jm_status(d->jobs[i]->jm, NULL);
        if (!d->jobs[i]->done) {
            o->jobs_running++;
            used += sl_jm_plan(d->jobs[i]->jm)->ntasks; /* an upper bound: slot sharing packs them */
        } else if (!strcmp(st, "FINISHED"))
            o->jobs_finished++;
        else if (!strcmp(st, "CANCELED"))
            o->jobs_cancelled++;
        else
            o->jobs_failed++;
    }
    pthread_mutex_unlock(&d->mu);
    o->slots_available = o->slots_total > used ? o->slots_total - used : 0;
    return 0;
}

static int rest_list_jobs(void *ud, sl_rest_job_t **jobs, int *njobs, char *err, size_t errlen) {
    sl_dispatcher_t *d = ud;
    pthread_mutex_lock(&d->mu);
    *jobs = calloc((size_t)(d->njobs ? d->njobs : 1), sizeof **jobs);
    *njobs = d->njobs;
    for (int i = 0; i < d->njobs; i++) fill_job(d->jobs[i], &(*jobs)[i], false);
    pthread_mutex_unlock(&d->mu);
    return 0;
}

static int rest_job_detail(void *ud, const char *id, sl_rest_job_t *out, char *err, size_t errlen) {
    sl_dispatcher_t *d = ud;
    pthread_mutex_lock(&d->mu);
    djob_t *j = job_by_id(d, id);
    if (j) fill_job(j, out, true);
    pthread_mutex_unlock(&d->mu);
    return j ? 0 : sl_errf(err, errlen, SL_ENOTFOUND, "Job %s not found", id);
}

/* The live metrics of vertex vid of job id (vertex ids as fill_job writes them). */
static int rest_vertex_metrics(void *ud, const char *id, const char *vid, sl_rest_vertex_metrics_t *out, char *err,
                               size_t errlen) {
    sl_dispatcher_t *d = ud;
    pthread_mutex_lock(&d->mu);
    djob_t *j = job_by_id(d, id);
    sl_rest_job_t jo;
    int v = -1;
    if (j) {
        fill_job(j, &jo, true);
        for (int i = 0; i < jo.nvertices && v < 0; i++)
            if (!strcmp(jo.vertices[i].id, vid)) v = i;
        if (v >= 0) out->vertex = jo.vertices[v];
        free(jo.vertices);
    }
    if (!j || v < 0) {
        pthread_mutex_unlock(&d->mu);
        return j ? sl_errf(err, errlen, SL_ENOTFOUND, "Vertex %s of job %s not found", vid, id)
                 : sl_errf(err, errlen, SL_ENOTFOUND, "Job %s not found", id);
    }
    const sl_plan_t *p = sl_jm_plan(j->jm);
    int attempt = 0;
    sl_jm_status(j->jm, &attempt);
    sl_job_metrics_t *live = sl_jm_live_metrics(j->jm);
    int par = p->vertices[v].parallelism;
    out->subtasks = calloc((size_t)(par ? par : 1), sizeof *out->subtasks);
    for (int s = 0; s < par; s++) {
        sl_rest_subtask_metrics_t *o = &out->subtasks[s];
        sl_jm_subtask_metrics_t m;
        snprintf(o->status, sizeof o->status, "%s", out->vertex.status);
        o->attempt = attempt > 0 ? attempt : 0;
        o->start_time = j->start_ms;
        o->busy = o->backpressured = o->idle = -1;
        if (!sl_job_metrics_subtask(live, p->first_task[v] + s, &m) || !m.reported) continue;
        o->reported = true;
        snprintf(o->tm_id, sizeof o->tm_id, "%s", m.tm_id);
        o->busy = m.busy_ms_per_s;
        o->backpressured = m.bp_ms_per_s;
        o->idle = m.idle_ms_per_s;
        o->busy_ms = m.busy_ns / 1000000;
        o->backpressured_ms = m.backpressured_ns / 1000000;
        o->idle_ms = m.idle_ns / 1000000;
        o->bytes_in = m.bytes_in;
        o->bytes_out = m.bytes_out;
        o->nops = m.nops < SL_REST_MAX_CHAIN ? m.nops : SL_REST_MAX_CHAIN;
        for (int k = 0; k < o->nops; k++) {
            const sl_msg_op_metrics_t *x = &m.ops[k];
            sl_rest_op_metrics_t *y = &o->ops[k];
            snprintf(y->name, sizeof y->name, "%s", x->node >= 0 && x->node < p->nnodes ? p->nodes[x->node].name : "?");
            y->records_in = x->records_in;
            y->records_out = x->records_out;
            y->in_watermark = x->in_watermark;
            y->out_watermark = x->out_watermark;
            y->late_dropped = x->late_dropped;
            y->pending_records = x->pending_records;
            y->state_memory_bytes = x->state_memory_bytes;
            y->rdb_mem_tables = x->rdb_mem_tables;
            y->rdb_table_readers = x->rdb_table_readers;
            y->rdb_block_cache = x->rdb_block_cache;
            y->rdb_live_data = x->rdb_live_data;
        }
    }
    pthread_mutex_unlock(&d->mu);
    return 0;
}

static int rest_taskmanagers(void *ud, sl_rest_taskmanager_t **tms, int *ntms, char *err, size_t errlen) {
    sl_dispatcher_t *d = ud;
    pthread_mutex_lock(&d->mu);
    *tms = calloc((size_t)(d->ntms ? d->ntms : 1), sizeof **tms);
    *ntms = 0;
    int64_t now = now_ms();
    for (int i = 0; i < d->ntms; i++) {
        dtm_t *t = d->tms[i];
        if (!t->alive) continue;
        sl_rest_taskmanager_t *o = &(*tms)[(*ntms)++];
        snprintf(o->id, sizeof o->id, "%s", t->id);
        snprintf(o->path, sizeof o->path, "%s", t->conn ? sl_rpc_conn_peer(t->conn) : t->host);
        o->data_port = t->data_port;
        o->slots_number = t->slots;
        o->free_slots = t->slots;
        o->time_since_last_heartbeat = now - t->last_hb_ms;
    }
    pthread_mutex_unlock(&d->mu);
    return 0;
}

/* GET /taskmanagers/:tmid/metrics: the process figures of its latest heartbeat. */
static int rest_taskmanager_metrics(void *ud, const char *tm_id, sl_rest_tm_metrics_t *out, char *err,
                                    size_t errlen) {
    sl_dispatcher_t *d = ud;
    int rc = SL_ENOTFOUND;
    pthread_mutex_lock(&d->mu);
    for (int i = 0; i < d->ntms && rc; i++) {
        const dtm_t *t = d->tms[i];
        if (!t->alive || strcmp(t->id, tm_id)) continue;
        *out = (sl_rest_tm_metrics_t){.rss_bytes = t->rss_bytes,
                                      .cpu_ms = t->cpu_ns / 1000000,
                                      .cpu_usage = t->cpu_usage,
                                      .threads = t->threads,
                                      .slots_total = t->slots,
                                      .slots_free = t->slots};
        rc = 0;
    }
    pthread_mutex_unlock(&d->mu);
    if (rc) sl_errf(err, errlen, rc, "TaskManager %s does not exist", tm_id);
    return rc;
}

static int rest_run(void *ud, const sl_rest_run_t *req, char *job_id, size_t idcap, char *err, size_t errlen) {
    sl_dispatcher_t *d = ud;
    if (!d->cfg.compile)
        return sl_errf(err, errlen, SL_EINVAL,
                       "this REST API serves one embedded job (sl_env_execute with rest.port set): it runs no other");
    char artifact[4200];
    if (!req->artifact_path) {
        if (!req->entry_class || !req->entry_class[0])
            return sl_errf(err, errlen, SL_EINVAL, "a built-in job needs its name in entryClass");
        snprintf(artifact, sizeof artifact, "builtin:%s", req->entry_class);
    } else {
        snprintf(artifact, sizeof artifact, "%s", req->artifact_path);
    }
    if (req->parallelism > 0)
        return sl_errf(err, errlen, SL_EINVAL,
                       "parallelism %d: a job's parallelism is set by the job itself (sl_env_set_parallelism); "
                       "pass it as one of the job's arguments",
                       req->parallelism);
    return sl_dispatcher_submit(d, artifact, req->nargs, req->args, req->savepoint_path, req->allow_non_restored_state,
                                job_id, idcap, err, errlen);
}

static int rest_cancel(void *ud, const char *id, char *err, size_t errlen) {
    sl_dispatcher_t *d = ud;
    pthread_mutex_lock(&d->mu);
    djob_t *j = job_by_id(d, id);
    bool done = j && j->done;
    pthread_mutex_unlock(&d->mu);
    if (!j) return sl_errf(err, errlen, SL_ENOTFOUND, "Job %s not found", id);
    if (done) return sl_errf(err, errlen, SL_ESTATE, "Job %s has ended", id);
    sl_jm_cancel(j->jm);
    return 0;
}

/* ---- asynchronous operations: checkpoint (and savepoint) triggers ----
 *
 * A trigger id names one request.  dispatcher_operation_new registers it
 * (IN_PROGRESS) and writes its id; dispatcher_operation_complete records
 * the outcome: success with a checkpoint id (>= 0 when known) and/or a
 * location, or failure with a message.  GET .../checkpoints/:triggerid and
 * .../savepoints/:triggerid read it (rest_operation).  Checkpoint triggers
 * are driven here (ops_advance, on every tick and every poll): triggered
 * when the coordinator has room, then completed from the checkpoint's fate.
 * A savepoint registers with OP_SAVEPOINT and the savepoint's checkpoint id
 * (rest_savepoint); ops_advance completes it from the job master's record
 * of how it ended (sl_jm_savepoint_result).  Any thread; ops_mu is taken before a job master's
 * locks, never under them. */

static dop_t *op_find(sl_dispatcher_t *d, const char *tid) {
    for (int i = 0; i < d->nops; i++)
        if (!strcmp(d->ops[i]->tid, tid)) return d->ops[i];
    return NULL;
}

/* Registers an operation of job job_id; its trigger id into tid[33]. */
static void dispatcher_operation_new(sl_dispatcher_t *d, const char *job_id, op_kind_t kind, char tid[33]) {
    dop_t *o = sl_calloc(1, sizeof *o);
    uint8_t rnd[16];
    RAND_bytes(rnd, sizeof rnd);
    for (int i = 0; i < 16; i++) snprintf(o->tid + 2 * i, 3, "%02x", rnd[i]);
    snprintf(o->job, sizeof o->job, "%s", job_id);
    o->kind = kind;
    o->ckpt_id = -1;
    o->created_ms = now_ms();
    pthread_mutex_lock(&d->ops_mu);
    if (d->nops == MAX_OPS) { /* forget the oldest ended one, else the oldest */
        int victim = 0;
        for (int i = d->nops - 1; i >= 0; i--)
            if (d->ops[i]->done) victim = i;
        sl_free(d->ops[victim]);
        memmove(&d->ops[victim], &d->ops[victim + 1], (size_t)(d->nops - victim - 1) * sizeof *d->ops);
        d->nops--;
    }
    d->ops[d->nops++] = o;
    pthread_mutex_unlock(&d->ops_mu);
    snprintf(tid, 33, "%s", o->tid);
}

/* Ends operation tid (ops_mu held): failure NULL or "" = success. */
static void op_complete_locked(dop_t *o, int64_t ckpt_id, const char *location, const char *failure) {
    if (!o || o->done) return;
    o->done = true;
    if (ckpt_id >= 0) o->ckpt_id = ckpt_id;
    snprintf(o->location, sizeof o->location, "%s", location ? location : "");
    snprintf(o->failure, sizeof o->failure, "%s", failure ? failure : "");
}

/* Records the outcome of operation tid (see above); unknown ids are ignored. */
__attribute__((unused)) static void dispatcher_operation_complete(sl_dispatcher_t *d, const char *tid, int64_t ckpt_id,
                                                                  const char *location, const char *failure) {
    pthread_mutex_lock(&d->ops_mu);
    op_complete_locked(op_find(d, tid), ckpt_id, location, failure);
    pthread_mutex_unlock(&d->ops_mu);
}

static djob_t *job_by_id(sl_dispatcher_t *d, const char *id);

/* Moves every checkpoint trigger on: triggers it when there is room,
 * completes it when its checkpoint completed or failed. */
static void ops_advance(sl_dispatcher_t *d) {
    pthread_mutex_lock(&d->ops_mu);
    for (int i = 0; i < d->nops; i++) {
        dop_t *o = d->ops[i];
        if (o->done) continue;
        pthread_mutex_lock(&d->mu);
        djob_t *j = job_by_id(d, o->job);
        bool ended = !j || j->done;
        pthread_mutex_unlock(&d->mu);
        char why[1024] = "";
        if (o->kind == OP_SAVEPOINT) { /* the job master records how it ended */
            char loc[4200] = "";
            int rc = j ? sl_jm_savepoint_result(j->jm, o->ckpt_id, loc, sizeof loc, why, sizeof why) : SL_ENOTFOUND;
            if (rc == 1) op_complete_locked(o, o->ckpt_id, loc, why);
            else if (rc < 0 || ended)
                op_complete_locked(o, o->ckpt_id, NULL, rc < 0 ? "the savepoint is no longer known"
                                                               : "the job ended before the savepoint completed");
            continue;
        }
        if (o->ckpt_id < 0) {
            if (ended) {
                op_complete_locked(o, -1, NULL, "the job ended before the checkpoint could be triggered");
                continue;
            }
            int64_t id = -1;
            if (sl_jm_trigger_checkpoint(j->jm, &id, why, sizeof why) < 0) op_complete_locked(o, -1, NULL, why);
            else if (id >= 0) o->ckpt_id = id;
            else if (now_ms() - o->created_ms > OP_TRIGGER_WAIT_MS)
                op_complete_locked(o, -1, NULL, "the checkpoint could not be triggered: as many checkpoints as "
                                                "allowed stayed pending (execution.checkpointing.max-concurrent-checkpoints)");
            if (o->ckpt_id < 0) continue;
        }
        int rc = sl_jm_checkpoint_outcome(j->jm, o->ckpt_id, why, sizeof why);
        if (rc == 1) op_complete_locked(o, o->ckpt_id, NULL, NULL);
        else if (rc < 0) op_complete_locked(o, o->ckpt_id, NULL, why);
        else if (ended) op_complete_locked(o, o->ckpt_id, NULL, "the job ended before the checkpoint completed");
    }
    pthread_mutex_unlock(&d->ops_mu);
}

/* ---- REST provider: checkpoints, configuration, exceptions ---- */

/* The job (done or not), or NULL with SL_ENOTFOUND in err. */
static djob_t *rest_job(sl_dispatcher_t *d, const char *id, char *err, size_t errlen) {
    pthread_mutex_lock(&d->mu);
    djob_t *j = job_by_id(d, id);
    pthread_mutex_unlock(&d->mu);
    if (!j) sl_errf(err, errlen, SL_ENOTFOUND, "Job %s not found", id);
    return j;
}

static int rest_checkpoints(void *ud, const char *id, sl_rest_checkpoints_t *out, char *err, size_t errlen) {
    sl_dispatcher_t *d = ud;
    djob_t *j = rest_job(d, id, err, errlen);
    if (!j) return SL_ENOTFOUND;
    const sl_plan_t *p = sl_jm_plan(j->jm);
    if (!p->cfg.ckpt_enabled) return sl_errf(err, errlen, SL_ESTATE, "Checkpointing is not enabled for job %s", id);
    sl_jm_ckpt_view_t v;
    sl_jm_checkpoint_view(j->jm, &v);
    memset(out, 0, sizeof *out);
    out->nvertices = p->nvertices;
    out->vertices = calloc((size_t)(p->nvertices ? p->nvertices : 1), sizeof *out->vertices);
    for (int k = 0; k < p->nvertices; k++) {
        snprintf(out->vertices[k].id, sizeof out->vertices[k].id, "%016llx%016x",
                 (unsigned long long)sl_plan_fingerprint(p), k);
        snprintf(out->vertices[k].name, sizeof out->vertices[k].name, "%s", p->vertices[k].name);
        out->vertices[k].parallelism = p->vertices[k].parallelism;
    }
    out->history = calloc((size_t)(v.nstats ? v.nstats : 1), sizeof *out->history);
    out->nhistory = v.nstats;
    int newer_completed = 0; /* completed checkpoints newer than the one at hand: beyond the retained, discarded */
    for (int i = v.nstats - 1; i >= 0; i--) {
        const sl_ckpt_stats_t *st = &v.stats[i];
        sl_rest_checkpoint_t *c = &out->history[i];
        c->id = st->id;
        snprintf(c->status, sizeof c->status, "%s", st->completed ? "COMPLETED" : st->aborted ? "FAILED" : "IN_PROGRESS");
        snprintf(c->type, sizeof c->type, "%s",
                 sl_snap_is_sync(st->kind)        ? "SYNC_SAVEPOINT"
                 : sl_snap_is_savepoint(st->kind) ? "SAVEPOINT"
                 : st->unaligned_tasks > 0        ? "UNALIGNED_CHECKPOINT"
                                                  : "CHECKPOINT");
        c->is_savepoint = sl_snap_is_savepoint(st->kind);
        c->trigger_timestamp = st->trigger_ms;
        c->end_to_end_duration = st->completed ? st->duration_ms : -1;
        if (st->completed && c->is_savepoint) { /* in its own directory, never discarded by retention */
            char why[64];
            sl_jm_savepoint_result(j->jm, st->id, c->external_path, sizeof c->external_path, why, sizeof why);
        } else if (st->completed) {
            if (p->cfg.ckpt_dir[0])
                snprintf(c->external_path, sizeof c->external_path, "%s/%s/chk-%lld", p->cfg.ckpt_dir, p->job_id,
                         (long long)st->id);
            c->discarded = p->cfg.ckpt_retained > 0 && newer_completed >= p->cfg.ckpt_retained;
            newer_completed++;
        }
        c->subtasks = calloc((size_t)(v.ntasks ? v.ntasks : 1), sizeof *c->subtasks);
        for (int t = 0; t < v.ntasks; t++) {
            const sl_ckpt_task_stats_t *ts = &v.tasks[(size_t)i * (size_t)v.ntasks + (size_t)t];
            sl_rest_ckpt_subtask_t *o = &c->subtasks[t];
            /* a finished task acknowledges implicitly: acknowledged, with no figures */
            o->acked = ts->acked || st->completed;
            o->ack_timestamp = ts->acked && ts->ack_ms ? ts->ack_ms : st->trigger_ms + st->duration_ms;
            o->sync_ms = ts->sync_us / 1000;
            o->async_ms = ts->async_us / 1000;
            o->align_ms = ts->align_us / 1000;
            o->state_size = o->checkpointed_size = ts->state_bytes;
            o->persisted_data = ts->inflight_bytes;
            o->unaligned = ts->unaligned;
        }
    }
    out->total = v.total;
    out->completed = v.completed;
    out->failed = v.failed;
    out->in_progress = v.in_progress;
    out->restored = v.restored;
    out->has_restored = v.restored > 0;
    out->restored_id = v.restored_id;
    out->restore_timestamp = v.restore_ts;
    snprintf(out->restored_path, sizeof out->restored_path, "%s", v.restored_path);
    sl_jm_ckpt_view_free(&v);
    return 0;
}

static int rest_checkpoint_config(void *ud, const char *id, sl_rest_ckpt_config_t *o, char *err, size_t errlen) {
    sl_dispatcher_t *d = ud;
    djob_t *j = rest_job(d, id, err, errlen);
    if (!j) return SL_ENOTFOUND;
    const sl_plan_config_t *c = &sl_jm_plan(j->jm)->cfg;
    if (!c->ckpt_enabled) return sl_errf(err, errlen, SL_ESTATE, "Checkpointing is not enabled for job %s", id);
    memset(o, 0, sizeof *o);
    o->exactly_once = c->ckpt.mode == SL_CKPT_EXACTLY_ONCE;
    o->interval = c->ckpt.interval_ms;
    o->timeout = c->ckpt.timeout_ms;
    o->min_pause = c->ckpt.min_pause_ms;
    o->max_concurrent = c->ckpt.max_concurrent;
    o->tolerable_failed = c->ckpt.tolerable_failed;
    o->unaligned = c->ckpt.unaligned;
    o->aligned_checkpoint_timeout = c->ckpt.aligned_timeout_ms;
    o->externalized = c->ckpt_retention != 0;             /* SL_CHECKPOINTS_NOT_RETAINED */
    o->delete_on_cancellation = c->ckpt_retention == 1;   /* SL_CHECKPOINTS_DELETE_ON_CANCELLATION */
    o->after_tasks_finish = true;                          /* finished tasks acknowledge implicitly */
    snprintf(o->state_backend, sizeof o->state_backend, "%s",
             c->backend == 1 ? "EmbeddedRocksDBStateBackend" : "HashMapStateBackend");
    snprintf(o->checkpoint_storage, sizeof o->checkpoint_storage, "%s",
             c->ckpt_dir[0] ? "FileSystemCheckpointStorage" : "JobManagerCheckpointStorage");
    return 0;
}

static int rest_job_config(void *ud, const char *id, sl_rest_job_config_t *o, char *err, size_t errlen) {
    sl_dispatcher_t *d = ud;
    djob_t *j = rest_job(d, id, err, errlen);
    if (!j) return SL_ENOTFOUND;
    const sl_plan_t *p = sl_jm_plan(j->jm);
    const sl_restart_config_t *r = &p->cfg.restart;
    memset(o, 0, sizeof *o);
    snprintf(o->name, sizeof o->name, "%s", p->job_name);
    snprintf(o->execution_mode, sizeof o->execution_mode, "PIPELINED");
    switch (r->kind) {
    case SL_RESTART_NONE: snprintf(o->restart_strategy, sizeof o->restart_strategy, "Restart deactivated."); break;
    case SL_RESTART_FIXED_DELAY:
        snprintf(o->restart_strategy, sizeof o->restart_strategy, "Restart with fixed delay (%lld ms). #%d restart attempts.",
                 (long long)r->delay_ms, r->attempts);
        break;
    case SL_RESTART_EXPONENTIAL_DELAY:
        snprintf(o->restart_strategy, sizeof o->restart_strategy,
                 "Restart with exponential delay: initial backoff %lld ms, maximum backoff %lld ms, multiplier %g.",
                 (long long)r->initial_backoff_ms, (long long)r->max_backoff_ms, r->multiplier);
        break;
    case SL_RESTART_FAILURE_RATE:
        snprintf(o->restart_strategy, sizeof o->restart_strategy,
                 "Failure rate restart with maximum of %d failures within interval %lld ms and fixed delay %lld ms.",
                 r->max_failures, (long long)r->interval_ms, (long long)r->delay_ms);
        break;
    }
    for (int v = 0; v < p->nvertices; v++)
        if (p->vertices[v].parallelism > o->parallelism) o->parallelism = p->vertices[v].parallelism;
    return 0;
}

static int rest_exceptions(void *ud, const char *id, sl_rest_exception_t **out, int *n, char *err, size_t errlen) {
    sl_dispatcher_t *d = ud;
    djob_t *j = rest_job(d, id, err, errlen);
    if (!j) return SL_ENOTFOUND;
    sl_jm_exception_t e[32];
    *n = sl_jm_exceptions(j->jm, e, 32);
    *out = calloc((size_t)(*n ? *n : 1), sizeof **out);
    for (int i = 0; i < *n; i++) {
        sl_rest_exception_t *x = &(*out)[i];
        snprintf(x->name, sizeof x->name, "%.63s", e[i].name);
        snprintf(x->stacktrace, sizeof x->stacktrace, "%.63s: %.1023s", e[i].name, e[i].message);
        x->timestamp = e[i].timestamp;
        snprintf(x->task_name, sizeof x->task_name, "%.299s", e[i].task);
        snprintf(x->location, sizeof x->location, "%.299s", e[i].location);
        snprintf(x->tm_id, sizeof x->tm_id, "%.127s", e[i].tm_id);
    }
    return 0;
}

static int rest_checkpoint(void *ud, const char *id, char *tid, size_t cap, char *err, size_t errlen) {
    sl_dispatcher_t *d = ud;
    djob_t *j = rest_job(d, id, err, errlen);
    if (!j) return SL_ENOTFOUND;
    pthread_mutex_lock(&d->mu);
    bool done = j->done;
    pthread_mutex_unlock(&d->mu);
    if (done) return sl_errf(err, errlen, SL_ESTATE, "Job %s has ended", id);
    if (!sl_jm_plan(j->jm)->cfg.ckpt_enabled)
        return sl_errf(err, errlen, SL_ESTATE, "Checkpointing is not enabled for job %s", id);
    char t[33];
    dispatcher_operation_new(d, id, OP_CHECKPOINT, t);
    ops_advance(d); /* triggered at once when there is room */
    snprintf(tid, cap, "%s", t);
    return 0;
}

/* POST /jobs/:jobid/savepoints and /stop.  "cancel-job" (Flink's
 * deprecated cancel-with-savepoint) stops the job with the savepoint, as
 * stop without drain does. */
static int rest_savepoint(void *ud, const char *id, const sl_rest_savepoint_req_t *req, char *tid, size_t cap,
                          char *err, size_t errlen) {
    sl_dispatcher_t *d = ud;
    djob_t *j = rest_job(d, id, err, errlen);
    if (!j) return SL_ENOTFOUND;
    pthread_mutex_lock(&d->mu);
    bool done = j->done;
    pthread_mutex_unlock(&d->mu);
    if (done) return sl_errf(err, errlen, SL_ESTATE, "Job %s has ended", id);
    int kind = req->stop ? (req->drain ? SL_SNAP_SAVEPOINT_TERMINATE : SL_SNAP_SAVEPOINT_SUSPEND)
                         : req->cancel_job ? SL_SNAP_SAVEPOINT_SUSPEND : SL_SNAP_SAVEPOINT;
    if (req->native) kind |= SL_SNAP_NATIVE; /* formatType NATIVE: RocksDB's own files */
    int64_t sid = 0;
    const char *dir = req->target_dir; /* the request's, else the job's, else the cluster's */
    if (!dir && !sl_jm_plan(j->jm)->cfg.savepoint_dir[0]) dir = d->cfg.savepoint_dir;
    int rc = sl_jm_savepoint(j->jm, dir, kind, &sid, err, errlen);
    if (rc < 0) return rc;
    char names[2000];
    if (sl_plan_derived_uids(sl_jm_plan(j->jm), names, sizeof names) > 0)
        fprintf(stderr, "sluice: savepoint of job %s: operators without sl_uid, whose state is kept under a uid "
                        "derived from their place in the graph (it changes when what is upstream of them "
                        "changes): %s\n",
                id, names);
    char t[33];
    dispatcher_operation_new(d, id, OP_SAVEPOINT, t);
    pthread_mutex_lock(&d->ops_mu);
    dop_t *o = op_find(d, t);
    if (o) o->ckpt_id = sid;
    pthread_mutex_unlock(&d->ops_mu);
    snprintf(tid, cap, "%s", t);
    return 0;
}

static int rest_operation(void *ud, const char *id, const char *tid, sl_rest_operation_t *out, char *err,
                          size_t errlen) {
    sl_dispatcher_t *d = ud;
    if (!rest_job(d, id, err, errlen)) return SL_ENOTFOUND;
    ops_advance(d);
    pthread_mutex_lock(&d->ops_mu);
    dop_t *o = op_find(d, tid);
    if (o && strcmp(o->job, id)) o = NULL;
    if (o) {
        out->done = o->done;
        out->checkpoint_id = o->ckpt_id;
        snprintf(out->location, sizeof out->location, "%s", o->location);
        snprintf(out->failure, sizeof out->failure, "%s", o->failure);
    }
    pthread_mutex_unlock(&d->ops_mu);
    return o ? 0 : sl_errf(err, errlen, SL_ENOTFOUND, "Operation not found under key: %s", tid);
}

/* ---- Prometheus (its server's thread) ---- */

/* The JobManager's metrics of every job (Flink's flink_jobmanager_job_*),
 * labelled job_id (the REST API's) and job_name. */
/* GET /jobs/:jobid/state (REST's own thread for it: it blocks until the
 * answer).  A job master lives as long as the dispatcher. */
static int rest_state_query(void *ud, const char *id, const char *uid, const char *state, const char *key,
                            const char *ns, int64_t timeout_ms, int *http, char **body, char *err, size_t errlen) {
    sl_dispatcher_t *d = ud;
    pthread_mutex_lock(&d->mu);
    djob_t *j = job_by_id(d, id);
    sl_job_master_t *jm = j && !j->done ? j->jm : NULL;
    char st[32] = "";
    if (j && j->done) snprintf(st, sizeof st, "%s", sl_jm_status(j->jm, NULL));
    pthread_mutex_unlock(&d->mu);
    if (!j) return sl_errf(err, errlen, SL_ENOTFOUND, "Job %s not found", id);
    if (!jm)
        return sl_errf(err, errlen, SL_ESTATE,
                       "job %s has ended (%s): only a running job's state can be queried (sluice state read reads a "
                       "retained checkpoint or savepoint)",
                       id, st);
    sl_sq_request_t rq = {.uid = uid, .state = state, .key = key, .ns = ns, .timeout_ms = timeout_ms};
    sl_sq_answer_t a;
    sl_sq_query(jm, &rq, &a);
    *http = a.http;
    *body = strdup(a.body); /* the server frees it with free() */
    sl_free(a.body);
    if (!*body) abort();
    return 0;
}

static void prom_render(void *ctx, sl_buf_t *out) {
    sl_dispatcher_t *d = ctx;
    enum { RESTARTS, UPTIME, LAST_DUR, LAST_SIZE, COMPLETED, FAILED, IN_PROGRESS, NF };
    static const char *const names[NF] = {
        "flink_jobmanager_job_numRestarts",
        "flink_jobmanager_job_uptime",
        "flink_jobmanager_job_lastCheckpointDuration",
        "flink_jobmanager_job_lastCheckpointSize",
        "flink_jobmanager_job_numberOfCompletedCheckpoints",
        "flink_jobmanager_job_numberOfFailedCheckpoints",
        "flink_jobmanager_job_numberOfInProgressCheckpoints",
    };
    pthread_mutex_lock(&d->mu);
    int n = d->njobs;
    sl_rest_job_t *jobs = calloc((size_t)(n ? n : 1), sizeof *jobs);
    for (int i = 0; i < n; i++) fill_job(d->jobs[i], &jobs[i], false);
    pthread_mutex_unlock(&d->mu);
    double (*v)[NF] = calloc((size_t)(n ? n : 1), sizeof *v);
    for (int i = 0; i < n; i++) {
        v[i][RESTARTS] = jobs[i].num_restarts;
        v[i][UPTIME] = jobs[i].end_time >= 0 ? -1 : (double)(sl_wall_ms() - jobs[i].start_time);
        v[i][LAST_DUR] = v[i][LAST_SIZE] = -1;
        sl_rest_checkpoints_t ck;
        memset(&ck, 0, sizeof ck);
        char err[256];
        if (rest_checkpoints(d, jobs[i].id, &ck, err, sizeof err) == 0) {
            v[i][COMPLETED] = (double)ck.completed;
            v[i][FAILED] = (double)ck.failed;
            v[i][IN_PROGRESS] = (double)ck.in_progress;
            int ntasks = 0;
            int64_t last = -1;
            for (int k = 0; k < ck.nvertices; k++) ntasks += ck.vertices[k].parallelism;
            for (int h = 0; h < ck.nhistory; h++) {
                const sl_rest_checkpoint_t *x = &ck.history[h];
                if (strcmp(x->status, "COMPLETED") || x->id <= last) continue;
                last = x->id;
                v[i][LAST_DUR] = (double)x->end_to_end_duration;
                double size = 0;
                for (int t = 0; x->subtasks && t < ntasks; t++) size += (double)x->subtasks[t].checkpointed_size;
                v[i][LAST_SIZE] = size;
            }
        }
        sl_rest_checkpoints_clear(&ck);
    }
    for (int f = 0; f < NF; f++) {
        sl_prom_type(out, names[f]);
        for (int i = 0; i < n; i++) {
            const char *labels[4] = {"job_id", jobs[i].id, "job_name", jobs[i].name};
            sl_prom_sample(out, names[f], labels, 2, v[i][f]);
        }
    }
    free(v);
    free(jobs);
}

/* ---- life ---- */

int sl_dispatcher_new(const sl_dispatcher_config_t *cfg, sl_dispatcher_t **out, char *err, size_t errlen) {
    *out = NULL;
    sl_dispatcher_t *d = sl_calloc(1, sizeof *d);
    d->cfg = *cfg;
    d->cfg.savepoint_dir = cfg->savepoint_dir && cfg->savepoint_dir[0] ? sl_strdup(cfg->savepoint_dir) : NULL;
    d->secret = sl_strdup(cfg->secret ? cfg->secret : "");
    d->cfg.secret = d->secret;
    if (d->cfg.heartbeat_interval_ms <= 0) d->cfg.heartbeat_interval_ms = 10000;
    if (d->cfg.heartbeat_timeout_ms <= 0) d->cfg.heartbeat_timeout_ms = 50000;
    pthread_mutex_init(&d->mu, NULL);
    pthread_mutex_init(&d->ops_mu, NULL);
    sl_rpc_config_t rc = {.secret = d->secret, .name = "jobmanager", .tls = cfg->tls};
    d->cfg.tls = NULL; /* the rpc holds its own reference */
    int r = sl_rpc_new(&rc, &d->rpc, err, errlen);
    sl_rpc_callbacks_t cbs = {rpc_on_open, rpc_on_message, rpc_on_closed, d, SL_AUTH_CONTROL, true};
    if (r == 0 && !cfg->no_rpc_listener)
        r = sl_rpc_listen(d->rpc, cfg->rpc_host ? cfg->rpc_host : "127.0.0.1", cfg->rpc_port, &cbs, err, errlen);
    if (r == 0) {
        sl_rest_config_t rcfg;
        sl_rest_config_defaults(&rcfg);
        rcfg.bind_address = cfg->rest_host;
        rcfg.port = cfg->rest_port;
        rcfg.token = cfg->rest_token;
        rcfg.artifact_dir = cfg->artifact_dir;
        sl_rest_provider_t p = {.ud = d,
                                .overview = rest_overview,
                                .list_jobs = rest_list_jobs,
                                .job_detail = rest_job_detail,
                                .taskmanagers = rest_taskmanagers,
                                .taskmanager_metrics = rest_taskmanager_metrics,
                                .run = rest_run,
                                .cancel = rest_cancel,
                                .checkpoints = rest_checkpoints,
                                .checkpoint_config = rest_checkpoint_config,
                                .job_config = rest_job_config,
                                .exceptions = rest_exceptions,
                                .checkpoint = rest_checkpoint,
                                .operation = rest_operation,
                                .savepoint = rest_savepoint,
                                .vertex_metrics = rest_vertex_metrics,
                                .state_query = rest_state_query};
        r = sl_rest_new(&rcfg, &p, &d->rest, err, errlen);
    }
    if (r == 0 && cfg->prom_port) r = sl_prom_server_new(NULL, cfg->prom_port, prom_render, d, &d->prom, err, errlen);
    if (r == 0) {
        d->timer = sl_rpc_every(d->rpc, 100, on_tick, d);
        if (!d->timer) r = sl_errf(err, errlen, SL_EIO, "cannot start the heartbeat timer");
    }
    if (r < 0) {
        sl_dispatcher_destroy(d);
        return r;
    }
    *out = d;
    return 0;
}

int sl_dispatcher_rpc_port(const sl_dispatcher_t *d) { return sl_rpc_listen_port(d->rpc); }
int sl_dispatcher_rest_port(const sl_dispatcher_t *d) { return d->rest ? sl_rest_port(d->rest) : -1; }

int sl_dispatcher_prom_port(const sl_dispatcher_t *d) { return d->prom ? sl_prom_server_port(d->prom) : -1; }

void sl_dispatcher_destroy(sl_dispatcher_t *d) {
    if (!d) return;
    sl_prom_server_destroy(d->prom);
    sl_rest_destroy(d->rest); /* no new jobs */
    pthread_mutex_lock(&d->mu);
    int n = d->njobs;
    pthread_mutex_unlock(&d->mu);
    /* with HA a JobManager that stops only suspends its jobs: the next leader resumes them */
    for (int i = 0; i < n; i++)
        if (!d->jobs[i]->adopted) (d->cfg.ha ? sl_jm_suspend : sl_jm_cancel)(d->jobs[i]->jm);
    for (int i = 0; i < n; i++)
        if (!d->jobs[i]->adopted) pthread_join(d->jobs[i]->thread, NULL);
    if (d->rpc) sl_rpc_destroy(d->rpc); /* the timer dies with it */
    for (int i = 0; i < d->njobs; i++) {
        if (!d->jobs[i]->adopted) sl_jm_destroy(d->jobs[i]->jm);
        sl_job_result_free(&d->jobs[i]->res);
        sl_free(d->jobs[i]);
    }
    for (int i = 0; i < d->ntms; i++) {
        if (d->tms[i]->conn) sl_rpc_conn_release(d->tms[i]->conn);
        sl_free(d->tms[i]);
    }
    pthread_mutex_destroy(&d->mu);
    for (int i = 0; i < d->nops; i++) sl_free(d->ops[i]);
    pthread_mutex_destroy(&d->ops_mu);
    sl_free(d->secret);
    sl_free((char *)d->cfg.savepoint_dir);
    sl_free(d);
}
