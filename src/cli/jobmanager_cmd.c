/*
 * jobmanager_cmd.c — `sluice jobmanager`: a dispatcher whose plans come from
 * the job loader.  With high availability (high-availability.type:
 * zookeeper) the process joins the leader election and stands by; once
 * elected it starts the dispatcher, publishes its addresses with its
 * fencing token and recovers every job of the job graph store; when its
 * ZooKeeper session is lost it drops the dispatcher (its jobs suspended)
 * and joins the election again as a standby, with a new session.
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cluster.h"
#include "common/common.h"
#include "common/tls.h"
#include "config/config.h"
#include "ha/ha_services.h"
#include "jobmanager/dispatcher.h"
#include "runtime/job_loader.h"

/* ---- the JobManager: builds plans ---- */

static int compile(void *ctx, const char *artifact, int nargs, char **args, sl_plan_t **plan, char *err,
                   size_t errlen) {
    (void)ctx;
    sl_loaded_job_t *j = NULL;
    int rc = sl_job_load(artifact, nargs, args, &j, err, errlen);
    if (rc < 0) return rc;
    *plan = j->plan; /* the plan is data: it outlives the environment that built it */
    j->plan = NULL;
    sl_loaded_job_free(j);
    return 0;
}

static volatile sig_atomic_t g_stop;
static void on_signal(int sig) { (void)sig, g_stop = 1; }

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* One term as leader or standby: joins the election on a new session,
 * waits to lead, leads until the session is lost or a signal comes.
 * Returns 0 to stand for election again, 1 to stop, -1 on a dispatcher
 * that cannot start (its message printed). */
static int ha_term(const sl_ha_config_t *hc, const sl_dispatcher_config_t *dc0) {
    char err[1024];
    sl_ha_t *ha = NULL;
    if (sl_ha_open(hc, &ha, err, sizeof err) < 0 || sl_ha_election_join(ha, err, sizeof err) < 0) {
        fprintf(stderr, "sluice jobmanager: high availability: %s; trying again in 1 s\n", err);
        sl_ha_close(ha);
        sleep_ms(1000);
        return g_stop ? 1 : 0;
    }
    fprintf(stderr, "sluice jobmanager: standing by for leadership of cluster '%s' (ZooKeeper at %s)\n",
            hc->cluster_id, hc->quorum);
    int leading = 0;
    while (!g_stop && !sl_ha_lost(ha)) {
        leading = sl_ha_election_leading(ha, err, sizeof err);
        if (leading == 1) break;
        sleep_ms(100);
    }
    if (leading != 1) {
        sl_ha_close(ha);
        return g_stop ? 1 : 0;
    }
    sl_dispatcher_config_t dc = *dc0;
    dc.ha = ha;
    sl_dispatcher_t *d = NULL;
    if (sl_dispatcher_new(&dc, &d, err, sizeof err) < 0) {
        fprintf(stderr, "sluice jobmanager: %s\n", err);
        sl_ha_close(ha);
        return -1;
    }
    char rest[300];
    bool recovery_failed = false;
    snprintf(rest, sizeof rest, "http://%s:%d", dc.rest_host, sl_dispatcher_rest_port(d));
    int rc = sl_ha_election_publish(ha, dc.rpc_host, sl_dispatcher_rpc_port(d), rest, err, sizeof err);
    if (rc == 0) {
        fprintf(stderr, "sluice jobmanager: leading (fencing token %s): RPC at %s:%d, REST at %s\n",
                sl_ha_election_token(ha), dc.rpc_host, sl_dispatcher_rpc_port(d), rest);
        int n = sl_dispatcher_recover_jobs(d, err, sizeof err);
        recovery_failed = n < 0;
        if (n < 0) /* a leader without its jobs would leave them unrun: another term (here or elsewhere) tries */
            fprintf(stderr, "sluice jobmanager: cannot recover the jobs (%s): giving up leadership\n", err);
        else if (n > 0)
            fprintf(stderr, "sluice jobmanager: recovered %d job%s\n", n, n == 1 ? "" : "s");
        while (n >= 0 && !g_stop && !sl_dispatcher_deposed(d)) sleep_ms(100);
    } else {
        fprintf(stderr, "sluice jobmanager: cannot publish the leader's address: %s\n", err);
    }
    bool stop = g_stop;
    fprintf(stderr, "sluice jobmanager: %s\n", stop ? "stopping" : "no longer the leader: standing by again");
    sl_dispatcher_destroy(d);
    sl_ha_close(ha); /* ends the session: the next JobManager leads */
    if (rc == 0 && recovery_failed) sleep_ms(1000);
    return stop ? 1 : 0;
}

int sl_cli_jobmanager(int argc, char **argv) {
    sl_config_t cfg;
    sl_config_defaults(&cfg);
    int rc = sl_cli_cluster_parse("jobmanager", argc, argv, &cfg, NULL);
    sl_cli_register_builtin_jobs();
    if (rc) {
        sl_config_free(&cfg);
        return rc;
    }
    char err[1024];
    sl_tls_ctx_t *tls = NULL; /* security.ssl.internal.*: the keystore and truststore are checked now */
    if (sl_config_tls_ctx(&cfg, &tls, err, sizeof err) < 0) {
        fprintf(stderr, "sluice jobmanager: %s\n", err);
        sl_config_free(&cfg);
        return 2;
    }
    if (tls) fprintf(stderr, "sluice jobmanager: internal connections use TLS as %s\n", sl_tls_ctx_subject(tls));
    char artifacts[1024];
    snprintf(artifacts, sizeof artifacts, "%s/sluice-artifacts-%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp",
             (int)getpid());
    sl_dispatcher_config_t dc = {.rpc_host = sl_cli_host(cfg.jobmanager_address),
                                 .rpc_port = cfg.jobmanager_port,
                                 .rest_host = sl_cli_host(cfg.rest_bind_address),
                                 .rest_port = cfg.rest_port,
                                 .artifact_dir = artifacts,
                                 /* the REST API's bearer token, as the client sends it */
                                 .rest_token = getenv("SLUICE_REST_TOKEN"),
                                 .secret = cfg.internal_secret,
                                 .heartbeat_interval_ms = cfg.heartbeat_interval_ms,
                                 .heartbeat_timeout_ms = cfg.heartbeat_timeout_ms,
                                 .slot_request_timeout_ms = cfg.slot_request_timeout_ms,
                                 .evenly_spread_out_slots = cfg.evenly_spread_out_slots,
                                 .savepoint_dir = cfg.savepoint_dir,
                                 .compile = compile,
                                 .prom_port = cfg.prom_enabled ? cfg.prom_port : NULL,
                                 .tls = tls};
    sl_dispatcher_t *d = NULL;
    sl_ha_config_t hc;
    if (sl_ha_config_from(&cfg, true, &hc, err, sizeof err) < 0) {
        fprintf(stderr, "sluice jobmanager: %s\n", err);
        sl_config_free(&cfg);
        sl_tls_ctx_release(tls);
        return 2;
    }
    if (hc.enabled) { /* terms as standby and leader until a signal */
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        signal(SIGPIPE, SIG_IGN);
        int rc = 0;
        while (rc == 0) rc = ha_term(&hc, &dc);
        sl_config_free(&cfg);
        sl_tls_ctx_release(tls);
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", artifacts);
        if (system(cmd) != 0) fprintf(stderr, "sluice jobmanager: could not remove %s\n", artifacts);
        return rc < 0 ? 1 : 0;
    }
    if (sl_dispatcher_new(&dc, &d, err, sizeof err) < 0) {
        fprintf(stderr, "sluice jobmanager: %s\n", err);
        sl_config_free(&cfg);
        sl_tls_ctx_release(tls);
        return 1;
    }
    fprintf(stderr, "sluice jobmanager: RPC at %s:%d, REST at http://%s:%d (heartbeat %lld ms, timeout %lld ms)\n",
            dc.rpc_host, sl_dispatcher_rpc_port(d), dc.rest_host, sl_dispatcher_rest_port(d),
            (long long)cfg.heartbeat_interval_ms, (long long)cfg.heartbeat_timeout_ms);
    if (sl_dispatcher_prom_port(d) > 0)
        fprintf(stderr, "sluice jobmanager: Prometheus metrics at http://0.0.0.0:%d/metrics\n", sl_dispatcher_prom_port(d));
    sl_cli_wait_for_signal();
    fprintf(stderr, "sluice jobmanager: stopping\n");
    sl_dispatcher_destroy(d);
    sl_config_free(&cfg);
    sl_tls_ctx_release(tls);
    /* the uploads were this process's (a directory it made for itself): they go with it */
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", artifacts);
    if (system(cmd) != 0) fprintf(stderr, "sluice jobmanager: could not remove %s\n", artifacts);
    return 0;
}

