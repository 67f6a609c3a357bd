/*
 * tm_process.c — the TaskManager process (tm_process.h): registration,
 * heartbeats and reconnection on the RPC loop thread, the JobManager's
 * messages on a worker thread, the data plane.
 */
#include "taskmanager/tm_process.h"

#include <dirent.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "common/common.h"
#include "common/tls.h"
#include "common/workq.h"
#include "metrics/prom.h"
#include "protocol/artifact.h"
#include "protocol/rpc.h"
#include "taskmanager/net/data_plane.h"

enum { ITEM_MSG, ITEM_JM_LOST, ITEM_CHANNEL_FAILED };

typedef struct item {
    int kind;
    sl_msg_t *msg;
    uint64_t id;
    char *why;
} item_t;

struct sl_tm_process {
    sl_tm_process_config_t cfg;
    char *id, *jm_host, *secret, *host;
    sl_rpc_t *rpc;
    sl_data_plane_t *dp;
    sl_taskmanager_t *tm;
    sl_prom_server_t *prom;
    sl_rpc_timer_t *timer;
    pthread_mutex_t mu;          /* conn, registered, the times */
    sl_workq_t work;             /* the JobManager's messages, on their own thread */
    bool work_started;
    sl_rpc_conn_t *conn;
    bool registered;
    int64_t last_jm_hb_ms, last_hb_sent_ms, next_connect_ms;
    int64_t hb_seq;
    bool stop;
    char artifacts[4096];        /* the artifact cache (created at the first download; "" until then) */
    /* the JobManager followed (under mu): jm_host:jm_port, or with HA the
     * leader retrieved, whose fencing token REGISTERED must carry */
    char target_host[256], token[64];
    int target_port;
};

/* The JobManager followed now (any thread). */
static void target(sl_tm_process_t *p, char *host, size_t cap, int *port) {
    pthread_mutex_lock(&p->mu);
    snprintf(host, cap, "%s", p->target_host);
    *port = p->target_port;
    pthread_mutex_unlock(&p->mu);
}

static int64_t now_ms(void) { return sl_mono_ns() / 1000000; }

static void enqueue(sl_tm_process_t *p, int kind, sl_msg_t *m, uint64_t id, const char *why) {
    item_t *it = sl_calloc(1, sizeof *it);
    it->kind = kind;
    it->msg = m;
    it->id = id;
    it->why = why ? sl_strdup(why) : NULL;
    sl_workq_post(&p->work, it);
}

static void drop_item(void *ctx, void *item) {
    item_t *it = item;
    if (it->msg) sl_msg_destroy(it->msg);
    sl_free(it->why);
    sl_free(it);
}

/* The worker thread: one item at a time, in order. */
static void run_item(void *ctx, void *item) {
    sl_tm_process_t *p = ctx;
    item_t *it = item;
    if (it->kind == ITEM_MSG) {
        sl_tm_handle(p->tm, it->msg);
        it->msg = NULL;
    }
    if (it->kind == ITEM_JM_LOST) sl_tm_cancel_all(p->tm, it->why);
    if (it->kind == ITEM_CHANNEL_FAILED) sl_tm_channel_failed(p->tm, it->id, it->why);
    drop_item(ctx, it);
}

/* To the JobManager (any thread; dropped while there is none). */
static void send_to_jm(void *ctx, sl_msg_t *m) {
    sl_tm_process_t *p = ctx;
    pthread_mutex_lock(&p->mu);
    sl_rpc_conn_t *conn = p->conn;
    if (conn) sl_rpc_conn_retain(conn);
    pthread_mutex_unlock(&p->mu);
    sl_buf_t b = {0};
    char err[256];
    if (conn && sl_msg_encode(m, &b, err, sizeof err) == 0) sl_rpc_send(conn, b.p, b.len);
    if (conn) sl_rpc_conn_release(conn);
    sl_buf_free(&b);
    sl_msg_destroy(m);
}

static void on_channel_failed(void *ctx, uint64_t id, const char *message) {
    enqueue(ctx, ITEM_CHANNEL_FAILED, NULL, id, message);
}

static void on_open(void *ctx, sl_rpc_conn_t *conn) {
    sl_tm_process_t *p = ctx;
    sl_msg_t *m = sl_msg_new(SL_MSG_REGISTER);
    m->u.reg.tm_id = sl_strdup(p->id);
    m->u.reg.host = sl_strdup(p->host);
    m->u.reg.data_port = sl_data_plane_port(p->dp);
    m->u.reg.slots = p->cfg.slots;
    m->u.reg.pid = getpid();
    send_to_jm(p, m);
}

static void on_message(void *ctx, sl_rpc_conn_t *conn, const uint8_t *bytes, size_t len) {
    sl_tm_process_t *p = ctx;
    char where[300], err[1024];
    snprintf(where, sizeof where, "the JobManager at %s", sl_rpc_conn_peer(conn));
    sl_msg_t *m = sl_calloc(1, sizeof *m);
    if (sl_msg_decode(bytes, len, where, m, err, sizeof err) < 0) {
        fprintf(stderr, "sluice taskmanager %s: refused: %s; closing the connection\n", p->id, err);
        sl_msg_destroy(m);
        sl_rpc_close(conn, "bad control message");
        return;
    }
    pthread_mutex_lock(&p->mu);
    bool current = conn == p->conn;
    if (current) p->last_jm_hb_ms = now_ms(); /* any message shows the JobManager alive */
    bool fenced = p->cfg.leader && (!current || (m->type != SL_MSG_REGISTERED && !p->registered));
    char token[64];
    snprintf(token, sizeof token, "%s", p->token);
    pthread_mutex_unlock(&p->mu);
    if (fenced) { /* HA: only the leader this TaskManager registered with is heard */
        fprintf(stderr, "sluice taskmanager %s: refused a %s message from %s: not the leader it follows\n", p->id,
                sl_msg_type_name(m->type), sl_rpc_conn_peer(conn));
        sl_msg_destroy(m);
        return;
    }
    if (m->type == SL_MSG_REGISTERED && p->cfg.leader && m->u.registered.accepted &&
        strcmp(m->u.registered.jm_id ? m->u.registered.jm_id : "", token)) {
        fprintf(stderr, "sluice taskmanager %s: the JobManager at %s is not the leader (fencing token %s, the leader's "
                        "is %s); closing the connection\n",
                p->id, sl_rpc_conn_peer(conn), m->u.registered.jm_id ? m->u.registered.jm_id : "", token);
        sl_msg_destroy(m);
        sl_rpc_close(conn, "fencing token mismatch");
        return;
    }
    if (m->type == SL_MSG_REGISTERED) {
        pthread_mutex_lock(&p->mu);
        p->registered = m->u.registered.accepted;
        pthread_mutex_unlock(&p->mu);
        if (m->u.registered.accepted)
            fprintf(stderr, "sluice taskmanager %s: registered at %s (%d slot%s, data port %d)\n", p->id,
                    sl_rpc_conn_peer(conn), p->cfg.slots, p->cfg.slots == 1 ? "" : "s", sl_data_plane_port(p->dp));
        else
            fprintf(stderr, "sluice taskmanager %s: the JobManager refused the registration: %s\n", p->id,
                    m->u.registered.reason);
        sl_msg_destroy(m);
        if (!p->registered) sl_rpc_close(conn, "registration refused");
        return;
    }
    if (m->type == SL_MSG_HEARTBEAT) {
        sl_msg_destroy(m);
        return;
    }
    enqueue(p, ITEM_MSG, m, 0, NULL);
}

static void on_closed(void *ctx, sl_rpc_conn_t *conn, const char *why) {
    sl_tm_process_t *p = ctx;
    pthread_mutex_lock(&p->mu);
    bool current = p->conn == conn;
    bool was = p->registered;
    if (current) {
        p->conn = NULL;
        p->registered = false;
        p->next_connect_ms = now_ms() + 1000;
    }
    pthread_mutex_unlock(&p->mu);
    char host[256];
    int port;
    target(p, host, sizeof host, &port);
    if (current) {
        char msg[600];
        snprintf(msg, sizeof msg, "lost the JobManager at %s:%d (%s)", host, port, why);
        if (was) fprintf(stderr, "sluice taskmanager %s: %s; connecting again\n", p->id, msg);
        enqueue(p, ITEM_JM_LOST, NULL, 0, msg);
        sl_rpc_conn_release(conn);
    }
}

static void connect_jm(sl_tm_process_t *p) {
    sl_rpc_callbacks_t cbs = {.on_open = on_open, .on_message = on_message, .on_closed = on_closed, .ctx = p};
    sl_rpc_conn_t *conn = NULL;
    char host[256];
    int port;
    target(p, host, sizeof host, &port);
    if (port > 0 && sl_rpc_connect(p->rpc, host, port, &cbs, &conn) == 0) {
        pthread_mutex_lock(&p->mu);
        p->conn = conn;
        p->last_jm_hb_ms = now_ms();
        pthread_mutex_unlock(&p->mu);
    }
}

/* The process's own figures for the JobManager (/taskmanagers/:id/metrics):
 * resident memory and threads from /proc/self, CPU time from getrusage. */
static void process_figures(sl_msg_heartbeat_t *h) {
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) == 0)
        h->cpu_ns = ((int64_t)ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1000000000LL +
                    ((int64_t)ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1000LL;
    FILE *f = fopen("/proc/self/statm", "r");
    long long size = 0, rss = 0;
    if (f && fscanf(f, "%lld %lld", &size, &rss) == 2 && rss > 0) h->rss_bytes = rss * (int64_t)sysconf(_SC_PAGESIZE);
    if (f) fclose(f);
    f = fopen("/proc/self/status", "r");
    char line[256];
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, "Threads:", 8)) h->threads = atoi(line + 8);
    if (f) fclose(f);
}

/* HA: a new leader is followed at once; the old one is dropped (its
 * tasks cancelled, as when a JobManager is lost).  Loop thread. */
static void follow_leader(sl_tm_process_t *p) {
    char host[256] = "", token[64] = "";
    int port = 0;
    if (!p->cfg.leader(p->cfg.leader_ctx, host, sizeof host, &port, token, sizeof token)) return;
    pthread_mutex_lock(&p->mu);
    bool changed = strcmp(token, p->token) || strcmp(host, p->target_host) || port != p->target_port;
    sl_rpc_conn_t *old = changed ? p->conn : NULL;
    bool was = p->registered;
    if (changed) {
        snprintf(p->target_host, sizeof p->target_host, "%s", host);
        snprintf(p->token, sizeof p->token, "%s", token);
        p->target_port = port;
        p->conn = NULL;
        p->registered = false;
        p->next_connect_ms = 0;
    }
    pthread_mutex_unlock(&p->mu);
    if (!changed) return;
    fprintf(stderr, "sluice taskmanager %s: following the leader at %s:%d (fencing token %s)\n", p->id, host, port,
            token);
    if (old) {
        if (was) enqueue(p, ITEM_JM_LOST, NULL, 0, "the JobManager is no longer the leader");
        sl_rpc_close(old, "another JobManager leads");
        sl_rpc_conn_release(old);
    }
}

static void on_tick(void *ctx) {
    sl_tm_process_t *p = ctx;
    if (p->cfg.leader) follow_leader(p);
    int64_t now = now_ms();
    pthread_mutex_lock(&p->mu);
    bool connect = !p->conn && now >= p->next_connect_ms && !p->stop;
    bool send = p->registered && now - p->last_hb_sent_ms >= p->cfg.heartbeat_interval_ms;
    bool silent = p->conn && p->registered && now - p->last_jm_hb_ms > p->cfg.heartbeat_timeout_ms;
    sl_rpc_conn_t *conn = p->conn;
    if (conn) sl_rpc_conn_retain(conn);
    if (send) p->last_hb_sent_ms = now;
    int64_t seq = ++p->hb_seq;
    pthread_mutex_unlock(&p->mu);
    if (connect) connect_jm(p);
    if (silent && conn) {
        char why[200];
        snprintf(why, sizeof why, "no heartbeat from the JobManager for %lld ms", (long long)p->cfg.heartbeat_timeout_ms);
        sl_rpc_close(conn, why);
    } else if (send) {
        sl_msg_t *m = sl_msg_new(SL_MSG_HEARTBEAT);
        m->u.heartbeat.sender = sl_strdup(p->id);
        m->u.heartbeat.seq = seq;
        m->u.heartbeat.slots_total = p->cfg.slots;
        m->u.heartbeat.slots_free = p->cfg.slots;
        process_figures(&m->u.heartbeat);
        send_to_jm(p, m);
    }
    if (conn) sl_rpc_conn_release(conn);
}

/* Prometheus (its server's thread): what this TaskManager's subtasks published. */
static void prom_render(void *ctx, sl_buf_t *out) { sl_tm_prom_render(((sl_tm_process_t *)ctx)->tm, out); }

/* Deployments (worker thread): the job's artifact is downloaded from the
 * JobManager (protocol/artifact.h) into this process's cache, and the job
 * is built from that copy — a TaskManager on another host has no access to
 * the JobManager's files.  Built-in jobs need no artifact. */
static int resolve_fetching(void *ctx, const sl_msg_deploy_t *d, const sl_plan_t **plan, const sl_job_code_t **code,
                            char *err, size_t errlen) {
    sl_tm_process_t *p = ctx;
    if (!d->artifact || !d->artifact[0] || !strncmp(d->artifact, "builtin:", 8))
        return p->cfg.resolve(p->cfg.resolve_ctx, d, plan, code, err, errlen);
    if (!p->artifacts[0]) {
        const char *tmp = getenv("TMPDIR");
        snprintf(p->artifacts, sizeof p->artifacts, "%s/sluice-%s-artifacts-XXXXXX", tmp && *tmp ? tmp : "/tmp", p->id);
        if (!mkdtemp(p->artifacts)) {
            int e = errno;
            p->artifacts[0] = 0;
            return sl_errf(err, errlen, SL_EIO, "cannot create the artifact cache under %s: %s",
                           tmp && *tmp ? tmp : "/tmp", strerror(e));
        }
    }
    char path[4400], host[256];
    int port;
    target(p, host, sizeof host, &port); /* the JobManager that deployed it */
    int rc = sl_artifact_fetch(p->rpc, host, port, d->job_id, p->artifacts, 60000, path, sizeof path, err, errlen);
    if (rc < 0) return rc;
    sl_msg_deploy_t local = *d; /* the same deployment, built from the local copy */
    local.artifact = path;
    return p->cfg.resolve(p->cfg.resolve_ctx, &local, plan, code, err, errlen);
}

static void remove_artifacts(sl_tm_process_t *p) {
    if (!p->artifacts[0]) return;
    DIR *dir = opendir(p->artifacts);
    struct dirent *e;
    while (dir && (e = readdir(dir))) {
        if (e->d_name[0] == '.' && (!e->d_name[1] || (e->d_name[1] == '.' && !e->d_name[2]))) continue;
        char f[4400];
        snprintf(f, sizeof f, "%s/%s", p->artifacts, e->d_name);
        unlink(f);
    }
    if (dir) closedir(dir);
    rmdir(p->artifacts);
}

int sl_tm_process_new(const sl_tm_process_config_t *cfg, sl_tm_process_t **out, char *err, size_t errlen) {
    *out = NULL;
    sl_tm_process_t *p = sl_calloc(1, sizeof *p);
    p->cfg = *cfg;
    char id[64];
    snprintf(id, sizeof id, "tm-%d", (int)getpid());
    p->id = sl_strdup(cfg->id && cfg->id[0] ? cfg->id : id);
    p->jm_host = sl_strdup(cfg->jm_host ? cfg->jm_host : "127.0.0.1");
    p->secret = sl_strdup(cfg->secret ? cfg->secret : "");
    p->host = sl_strdup(cfg->host && cfg->host[0] ? cfg->host : "127.0.0.1");
    if (!cfg->leader) { /* without HA: the configured JobManager, always */
        snprintf(p->target_host, sizeof p->target_host, "%s", p->jm_host);
        p->target_port = cfg->jm_port;
    }
    if (p->cfg.slots < 1) p->cfg.slots = 1;
    if (p->cfg.heartbeat_interval_ms <= 0) p->cfg.heartbeat_interval_ms = 10000;
    if (p->cfg.heartbeat_timeout_ms <= 0) p->cfg.heartbeat_timeout_ms = 50000;
    pthread_mutex_init(&p->mu, NULL);
    sl_data_plane_config_t dc = {.host = p->host,
                                 .port = cfg->data_port,
                                 .secret = p->secret,
                                 .on_channel_failed = on_channel_failed,
                                 .ctx = p,
                                 .tls = cfg->tls,
                                 /* security.ssl.internal.handshake-timeout bounds TLS + secret */
                                 .handshake_timeout_ms = cfg->tls ? sl_tls_ctx_handshake_timeout_ms(cfg->tls) : 0};
    int rc = sl_data_plane_new(&dc, &p->dp, err, errlen);
    if (rc == 0) {
        sl_tm_config_t tc = {.id = p->id,
                             .slots = p->cfg.slots,
                             .send = send_to_jm,
                             .send_ctx = p,
                             .resolve = resolve_fetching,
                             .resolve_ctx = p,
                             .dp = p->dp};
        p->tm = sl_tm_new(&tc);
        rc = sl_workq_start(&p->work, run_item, drop_item, p);
        p->work_started = rc == 0;
        if (rc < 0) sl_errf(err, errlen, rc, "cannot start the TaskManager's worker thread");
    }
    if (rc == 0 && cfg->prom_port) rc = sl_prom_server_new(NULL, cfg->prom_port, prom_render, p, &p->prom, err, errlen);
    if (rc == 0) {
        sl_rpc_config_t rcfg = {.secret = p->secret, .name = p->id, .tls = cfg->tls};
        rc = sl_rpc_new(&rcfg, &p->rpc, err, errlen);
    }
    if (rc == 0) {
        p->timer = sl_rpc_every(p->rpc, 100, on_tick, p); /* connects at its first tick */
        if (!p->timer) rc = sl_errf(err, errlen, SL_EIO, "cannot start the heartbeat timer");
    }
    if (rc < 0) {
        sl_tm_process_destroy(p);
        return rc;
    }
    *out = p;
    return 0;
}

bool sl_tm_process_registered(sl_tm_process_t *p) {
    pthread_mutex_lock(&p->mu);
    bool r = p->registered;
    pthread_mutex_unlock(&p->mu);
    return r;
}

int sl_tm_process_data_port(const sl_tm_process_t *p) { return sl_data_plane_port(p->dp); }

int sl_tm_process_prom_port(const sl_tm_process_t *p) { return p->prom ? sl_prom_server_port(p->prom) : -1; }

void sl_tm_process_destroy(sl_tm_process_t *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->stop = true;
    pthread_mutex_unlock(&p->mu);
    if (p->rpc) sl_rpc_destroy(p->rpc); /* closes the connection: on_closed queues the cancellation */
    if (p->work_started) sl_workq_stop(&p->work); /* runs what is queued, the cancellation included */
    sl_prom_server_destroy(p->prom); /* before the TaskManager it reads */
    if (p->tm) sl_tm_destroy(p->tm);
    if (p->dp) sl_data_plane_destroy(p->dp);
    if (p->work_started) sl_workq_free(&p->work);
    remove_artifacts(p);
    pthread_mutex_destroy(&p->mu);
    sl_free(p->id);
    sl_free(p->jm_host);
    sl_free(p->secret);
    sl_free(p->host);
    sl_free(p);
}
