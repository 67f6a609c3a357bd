/* taskmanager_cmd.c — `sluice taskmanager`: a TaskManager process whose job code comes from the job loader. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cluster.h"
#include "common/common.h"
#include "common/tls.h"
#include "config/config.h"
#include "ha/ha_services.h"
#include "runtime/job_loader.h"
#include "taskmanager/tm_process.h"

/* ---- a TaskManager: builds the job's code for each deployment ---- */

typedef struct resolver {
    pthread_mutex_t mu;
    struct { char *job; sl_loaded_job_t *j; } jobs[64];
    int n;
} resolver_t;

static int resolve(void *ctx, const sl_msg_deploy_t *d, const sl_plan_t **plan, const sl_job_code_t **code, char *err,
                   size_t errlen) {
    resolver_t *r = ctx;
    sl_loaded_job_t *j = NULL;
    int rc = sl_job_load(d->artifact, d->nargs, d->args, &j, err, errlen);
    if (rc < 0) return rc;
    /* one build per job: the previous attempt's deployment is gone by now */
    pthread_mutex_lock(&r->mu);
    int i = 0;
    while (i < r->n && strcmp(r->jobs[i].job, d->job_id) != 0) i++;
    if (i < r->n) {
        sl_loaded_job_free(r->jobs[i].j);
    } else if (r->n < 64) {
        r->jobs[r->n++].job = sl_strdup(d->job_id);
    } else {
        pthread_mutex_unlock(&r->mu);
        sl_loaded_job_free(j);
        return sl_errf(err, errlen, SL_ESTATE, "too many jobs on this TaskManager");
    }
    r->jobs[i].j = j;
    pthread_mutex_unlock(&r->mu);
    *plan = j->plan;
    *code = &j->code;
    return 0;
}

/* High availability: the leader the retrieval service follows. */
static bool current_leader(void *ctx, char *host, size_t hcap, int *port, char *token, size_t tcap) {
    sl_ha_leader_t l;
    if (!sl_leader_retrieval_current(ctx, &l)) return false;
    snprintf(host, hcap, "%s", l.rpc_host);
    *port = l.rpc_port;
    snprintf(token, tcap, "%s", l.token);
    return true;
}

int sl_cli_taskmanager(int argc, char **argv) {
    sl_config_t cfg;
    sl_config_defaults(&cfg);
    const char *id = NULL;
    int rc = sl_cli_cluster_parse("taskmanager", argc, argv, &cfg, &id);
    sl_cli_register_builtin_jobs();
    if (rc) {
        sl_config_free(&cfg);
        return rc;
    }
    char err[1024];
    sl_tls_ctx_t *tls = NULL; /* security.ssl.internal.*: the keystore and truststore are checked now */
    if (sl_config_tls_ctx(&cfg, &tls, err, sizeof err) < 0) {
        fprintf(stderr, "sluice taskmanager: %s\n", err);
        sl_config_free(&cfg);
        return 2;
    }
    if (tls) fprintf(stderr, "sluice taskmanager: internal connections use TLS as %s\n", sl_tls_ctx_subject(tls));
    sl_ha_config_t ha;
    sl_leader_retrieval_t *follower = NULL;
    if (sl_ha_config_from(&cfg, false, &ha, err, sizeof err) < 0 ||
        (ha.enabled && sl_leader_retrieval_start(&ha, &follower, err, sizeof err) < 0)) {
        fprintf(stderr, "sluice taskmanager: %s\n", err);
        sl_config_free(&cfg);
        sl_tls_ctx_release(tls);
        return 2;
    }
    resolver_t r;
    memset(&r, 0, sizeof r);
    pthread_mutex_init(&r.mu, NULL);
    sl_tm_process_config_t tc = {.id = id,
                                 .jm_host = sl_cli_host(cfg.jobmanager_address),
                                 .jm_port = cfg.jobmanager_port,
                                 .secret = cfg.internal_secret,
                                 .host = sl_cli_host(cfg.taskmanager_host),
                                 .data_port = cfg.taskmanager_data_port,
                                 .slots = cfg.task_slots,
                                 .heartbeat_interval_ms = cfg.heartbeat_interval_ms,
                                 .heartbeat_timeout_ms = cfg.heartbeat_timeout_ms,
                                 .resolve = resolve,
                                 .resolve_ctx = &r,
                                 .prom_port = cfg.prom_enabled ? cfg.prom_port : NULL,
                                 .leader = follower ? current_leader : NULL,
                                 .leader_ctx = follower,
                                 .tls = tls};
    sl_tm_process_t *p = NULL;
    if (sl_tm_process_new(&tc, &p, err, sizeof err) < 0) {
        fprintf(stderr, "sluice taskmanager: %s\n", err);
        sl_leader_retrieval_stop(follower);
        sl_config_free(&cfg);
        sl_tls_ctx_release(tls);
        return 1;
    }
    if (follower)
        fprintf(stderr, "sluice taskmanager %s: %d slot%s, data port %s:%d, following the leading JobManager of "
                        "cluster '%s' in ZooKeeper at %s\n",
                id ? id : "", tc.slots, tc.slots == 1 ? "" : "s", tc.host, sl_tm_process_data_port(p), ha.cluster_id,
                ha.quorum);
    else
        fprintf(stderr, "sluice taskmanager %s: %d slot%s, data port %s:%d, JobManager at %s:%d\n", id ? id : "",
                tc.slots, tc.slots == 1 ? "" : "s", tc.host, sl_tm_process_data_port(p), tc.jm_host, tc.jm_port);
    if (sl_tm_process_prom_port(p) > 0)
        fprintf(stderr, "sluice taskmanager %s: Prometheus metrics at http://0.0.0.0:%d/metrics\n", id ? id : "",
                sl_tm_process_prom_port(p));
    sl_cli_wait_for_signal();
    sl_tm_process_destroy(p);
    sl_leader_retrieval_stop(follower);
    for (int i = 0; i < r.n; i++) {
        sl_loaded_job_free(r.jobs[i].j);
        sl_free(r.jobs[i].job);
    }
    pthread_mutex_destroy(&r.mu);
    sl_config_free(&cfg);
    sl_tls_ctx_release(tls);
    return 0;
}
