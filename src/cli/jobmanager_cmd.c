/* jobmanager_cmd.c — `sluice jobmanager`: a dispatcher whose plans come from the job loader. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli/cluster.h"
#include "common/common.h"
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

int sl_cli_jobmanager(int argc, char **argv) {
    sl_config_t cfg;
    sl_config_defaults(&cfg);
    int rc = sl_cli_cluster_parse("jobmanager", argc, argv, &cfg, NULL);
    sl_cli_register_builtin_jobs();
    if (rc) {
        sl_config_free(&cfg);
        return rc;
    }
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
                                 .prom_port = cfg.prom_enabled ? cfg.prom_port : NULL};
    sl_dispatcher_t *d = NULL;
    char err[1024];
    if (sl_dispatcher_new(&dc, &d, err, sizeof err) < 0) {
        fprintf(stderr, "sluice jobmanager: %s\n", err);
        sl_config_free(&cfg);
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
    /* the uploads were this process's (a directory it made for itself): they go with it */
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", artifacts);
    if (system(cmd) != 0) fprintf(stderr, "sluice jobmanager: could not remove %s\n", artifacts);
    return 0;
}

