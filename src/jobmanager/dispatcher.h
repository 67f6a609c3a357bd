/*
 * dispatcher.h — the JobManager process (Flink's Dispatcher with its
 * ResourceManager and heartbeat services, in one object): it accepts
 * TaskManagers on its RPC port (REGISTER, HEARTBEAT), keeps the slots they
 * offer, runs each submitted job in a job master (job_master.h) over the
 * live TaskManagers, routes the TaskManagers' messages to their job, and
 * declares a TaskManager lost when its connection fails or no heartbeat
 * came for heartbeat.timeout — its subtasks then fail and the job's restart
 * strategy decides.  The REST API (rest.h) is served from here.
 *
 * It never runs user code itself: `compile` (given by the process that
 * wires it, src/cli/) turns an artifact and its arguments into the plan.
 *
 * Threads: the RPC loop thread runs every message and timer; each job runs
 * on its own thread; the REST server on libmicrohttpd's.  `mu` guards the
 * TaskManager and job tables.
 */
#ifndef SL_DISPATCHER_H
#define SL_DISPATCHER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plan/plan.h"

typedef struct sl_dispatcher sl_dispatcher_t;

typedef struct sl_dispatcher_config {
    const char *rpc_host;            /* jobmanager.rpc.address (bind), default 127.0.0.1 */
    int rpc_port;                    /* jobmanager.rpc.port, 0 = ephemeral */
    const char *rest_host;           /* rest.bind-address, default 127.0.0.1 */
    int rest_port;                   /* rest.port, 0 = ephemeral, -1 = 8081 */
    const char *rest_token;          /* NULL: none */
    const char *artifact_dir;        /* where uploads are kept */
    const char *secret;              /* the cluster's shared secret */
    int64_t heartbeat_interval_ms;   /* heartbeat.interval (10 s) */
    int64_t heartbeat_timeout_ms;    /* heartbeat.timeout (50 s) */
    int64_t slot_request_timeout_ms; /* slot.request.timeout (5 min) */
    bool evenly_spread_out_slots;    /* cluster.evenly-spread-out-slots */
    const char *savepoint_dir;       /* execution.checkpointing.savepoint-dir of the cluster: where a
                                      * savepoint goes when neither the request nor the job names a
                                      * directory (NULL: none) */
    /* The plan of an artifact built with its arguments (the JobManager's
     * side of the job loader).  artifact is "builtin:NAME" or a path. */
    int (*compile)(void *ctx, const char *artifact, int nargs, char **args, sl_plan_t **plan, char *err,
                   size_t errlen);
    void *compile_ctx;
    /* metrics.reporter.prom.port when metrics.reporter.prom.enabled: a
     * port or a range ("9249-9260"); NULL: no Prometheus endpoint */
    const char *prom_port;
    /* High availability (src/ha/ha_services.h): the services of a
     * JobManager that was elected leader (NULL: none).  Then REGISTERED
     * carries the leader's fencing token, every submitted job goes into the
     * job graph store, its checkpoint ids come from the counter and its
     * completed checkpoints go into the store; when the ZooKeeper session is
     * lost the dispatcher stops acting (sl_dispatcher_deposed).  Not owned. */
    struct sl_ha *ha;
    /* Embedded mode's REST server (runtime/local.c): no RPC port is opened
     * (no TaskManager registers; the timers still run), and the one job is
     * handed over with sl_dispatcher_adopt.  compile may then be NULL: the
     * REST API runs no other job. */
    bool no_rpc_listener;
    /* TLS with mutual authentication on the RPC port (control connections
     * and artifact downloads), common/tls.h; NULL: plain TCP.  Used during
     * sl_dispatcher_new only (the rpc keeps its own reference). */
    struct sl_tls_ctx *tls;
} sl_dispatcher_config_t;

int sl_dispatcher_new(const sl_dispatcher_config_t *cfg, sl_dispatcher_t **out, char *err, size_t errlen);
int sl_dispatcher_rpc_port(const sl_dispatcher_t *d);
int sl_dispatcher_rest_port(const sl_dispatcher_t *d);
/* The Prometheus endpoint's port, or -1 when there is none. */
int sl_dispatcher_prom_port(const sl_dispatcher_t *d);
/* Submits a job; its 32-hex id goes to job_id.  restore_path: a chk-<n>
 * or savepoint directory to start from (NULL: none); allow_nrs:
 * --allowNonRestoredState.  Any thread. */
int sl_dispatcher_submit(sl_dispatcher_t *d, const char *artifact, int nargs, char **args, const char *restore_path,
                         bool allow_nrs, char *job_id, size_t idcap, char *err, size_t errlen);
/* Serves a job master that runs elsewhere (embedded mode's, which
 * sl_local_job_run drives) through the REST API under its own job id:
 * overview, details, checkpoints, metrics, cancel, savepoints.  The
 * dispatcher neither runs, cancels on destroy, nor destroys it; destroy
 * the dispatcher before the job master.  Any thread. */
struct sl_job_master;
int sl_dispatcher_adopt(sl_dispatcher_t *d, struct sl_job_master *jm, char *err, size_t errlen);
/* With high availability: restarts every job of the job graph store (a new
 * leader's first act), each from its latest completed checkpoint, under
 * its id.  Returns how many, or < 0.  Any thread. */
int sl_dispatcher_recover_jobs(sl_dispatcher_t *d, char *err, size_t errlen);
/* With high availability: true once the ZooKeeper session was lost; the
 * dispatcher has then suspended its jobs and dropped its TaskManagers, and
 * only sl_dispatcher_destroy is left to call.  Any thread. */
bool sl_dispatcher_deposed(sl_dispatcher_t *d);
/* Cancels every job (with high availability: suspends it, for the next
 * leader), waits for them, stops the servers. */
void sl_dispatcher_destroy(sl_dispatcher_t *d);

#endif
