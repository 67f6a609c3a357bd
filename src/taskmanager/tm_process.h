/*
 * tm_process.h — a TaskManager process (Flink's TaskManagerRunner): it
 * connects to the JobManager's RPC port, registers its slots and its data
 * port, exchanges heartbeats, and hands the JobManager's messages to a
 * TaskManager (taskmanager.h) on a worker thread of its own, so that a slow
 * deployment (a restore, a sink's recovery) never delays a heartbeat.  It
 * runs the data plane (net/data_plane.h) for channels to other TaskManagers.
 *
 * When it loses its JobManager — the connection fails, or no heartbeat
 * came for heartbeat.timeout — it cancels its tasks and connects again
 * every second, registering anew once the JobManager answers.
 *
 * With high availability (`leader` set) it follows the leader instead of
 * a fixed address: when the published leader changes it drops the old
 * JobManager (cancelling its tasks) and registers with the new one, and it
 * accepts a JobManager only if its REGISTERED carries the leader's fencing
 * token; messages from any other connection are refused.
 *
 * Threads: the RPC loop thread (connection, heartbeats), the worker thread
 * (deployments), the data plane's loop thread; new/destroy from the thread
 * that owns the process.
 */
#ifndef SL_TM_PROCESS_H
#define SL_TM_PROCESS_H

#include <stdbool.h>
#include <stdint.h>

#include "taskmanager/taskmanager.h"

typedef struct sl_tm_process sl_tm_process_t;

typedef struct sl_tm_process_config {
    const char *id;                /* unique in the cluster, e.g. "tm-2" */
    const char *jm_host;           /* jobmanager.rpc.address */
    int jm_port;                   /* jobmanager.rpc.port */
    const char *secret;            /* the cluster's shared secret */
    const char *host;              /* taskmanager.host: the data port's bind and announced address */
    int data_port;                 /* taskmanager.data.port, 0 = ephemeral */
    int slots;                     /* taskmanager.numberOfTaskSlots */
    int64_t heartbeat_interval_ms; /* heartbeat.interval */
    int64_t heartbeat_timeout_ms;  /* heartbeat.timeout */
    int (*resolve)(void *ctx, const sl_msg_deploy_t *d, const sl_plan_t **plan, const sl_job_code_t **code, char *err,
                   size_t errlen);
    void *resolve_ctx;
    /* metrics.reporter.prom.port when metrics.reporter.prom.enabled (a port
     * or a range); NULL: no Prometheus endpoint */
    const char *prom_port;
    /* High availability: the leader now (false while none is known), its
     * RPC address and fencing token; called on the RPC loop thread every
     * tick, must not block.  NULL: jm_host:jm_port. */
    bool (*leader)(void *ctx, char *host, size_t hcap, int *port, char *token, size_t tcap);
    void *leader_ctx;
    /* TLS with mutual authentication on the connection to the JobManager,
     * artifact downloads and the data plane, common/tls.h; NULL: plain TCP.
     * Used during sl_tm_process_new only (the rpc and the data plane keep
     * their own references). */
    struct sl_tls_ctx *tls;
} sl_tm_process_config_t;

int sl_tm_process_new(const sl_tm_process_config_t *cfg, sl_tm_process_t **out, char *err, size_t errlen);
/* Whether the JobManager has accepted the registration (any thread). */
bool sl_tm_process_registered(sl_tm_process_t *p);
int sl_tm_process_data_port(const sl_tm_process_t *p);
/* The Prometheus endpoint's port, or -1 when there is none. */
int sl_tm_process_prom_port(const sl_tm_process_t *p);
void sl_tm_process_destroy(sl_tm_process_t *p);

#endif
