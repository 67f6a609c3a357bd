/*
 * local.h — embedded mode (Flink's MiniCluster): one JobManager and one
 * TaskManager in this process, connected by an in-memory transport of the
 * same messages a cluster sends over TCP.  Every message is encoded to its
 * frame and decoded on the other side (protocol/codec.c), so embedded runs
 * exercise the wire format too.  This is the only file that sees both the
 * JobManager and the TaskManager side.
 */
#ifndef SL_LOCAL_H
#define SL_LOCAL_H

#include "sluice/metrics.h"
#include "plan/job_code.h"
#include "plan/plan.h"
#include "protocol/job_result.h"

typedef struct sl_local_job sl_local_job_t;

/* plan and code must outlive the job.  restore_path: a chk-<n> or
 * savepoint directory or NULL; allow_nrs: --allowNonRestoredState. */
int sl_local_job_new(const sl_plan_t *plan, const sl_job_code_t *code, const char *restore_path, bool allow_nrs,
                     sl_local_job_t **out, char *err, size_t errlen);
/* Takes a savepoint of kind (sl_snapshot_kind_t: a savepoint, or a stop
 * with one) under dir (NULL: the job's default) and blocks until it ended:
 * 0 with its directory in path, or < 0 with the reason in err.  Any thread
 * while sl_local_job_run runs; j must outlive the call. */
int sl_local_job_savepoint(sl_local_job_t *j, const char *dir, int kind, char *path, size_t cap, char *err,
                           size_t errlen);
/* Runs the job to its end (restarts included) and fills *res. */
int sl_local_job_run(sl_local_job_t *j, sl_job_result_t *res);
/* Any thread. */
void sl_local_job_cancel(sl_local_job_t *j);
/* Live metrics of the job go to fn (sluice/metrics.h); before running. */
void sl_local_job_set_metrics_listener(sl_local_job_t *j, sl_metrics_listener_fn fn, void *ctx);
/* Looks up the keyed state of key in operator uid of the running job
 * (jobmanager/state_query.h): returns the HTTP status the REST API would
 * give, *body the JSON answer (sl_malloc'ed).  Any thread while
 * sl_local_job_run runs; j must outlive the call. */
int sl_local_job_query_state(sl_local_job_t *j, const char *uid, const char *state, const char *key, const char *ns,
                             int64_t timeout_ms, char **body);
/* Serves the REST API (jobmanager/rest.h, through a dispatcher without an
 * RPC port that adopts this job's master) on bind_address:port (NULL =
 * 127.0.0.1, 0 = a free port) until sl_local_job_destroy; the port it
 * bound goes to *bound.  token: NULL or a bearer token every request
 * needs.  Before sl_local_job_run. */
int sl_local_job_serve_rest(sl_local_job_t *j, const char *bind_address, int port, const char *token, int *bound,
                            char *err, size_t errlen);
void sl_local_job_destroy(sl_local_job_t *j);

#endif
