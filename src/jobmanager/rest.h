/*
 * rest.h — the JobManager's REST API: Flink's paths and JSON shapes over
 * HTTP (libmicrohttpd), so that `curl`, Flink's habits and tooling that
 * speaks Flink's REST API carry over to sluice.
 *
 *   GET    /config                  dashboard configuration (flink-version, features)
 *   GET    /overview                cluster overview (taskmanagers, slots, job counts)
 *   GET    /jobs                    {"jobs":[{"id","status"}]}
 *   GET    /jobs/overview           {"jobs":[{"jid","name","state","start-time",...}]}
 *   GET    /jobs/:jobid             job details with its vertices
 *   PATCH  /jobs/:jobid?mode=cancel cancel (202 Accepted)
 *   GET    /taskmanagers            {"taskmanagers":[{"id","path","dataPort",...}]}
 *   POST   /jars/upload             multipart/form-data, field "jarfile"
 *   GET    /jars                    the uploaded artifacts
 *   POST   /jars/:jarid/run         {"entryClass","programArgs"|"programArgsList",
 *                                    "parallelism","savepointPath",
 *                                    "allowNonRestoredState"} -> {"jobid"}
 *   DELETE /jars/:jarid             removes an uploaded artifact
 * Every path may also be written with Flink's "/v1" prefix.  Errors are
 * Flink's {"errors":["..."]} with 400, 401, 404, 405, 409, 413 or 500.
 *
 * The server knows nothing of jobs: a provider (callbacks filled by the
 * JobManager) answers for them; the server owns HTTP, the JSON shapes,
 * authentication and the artifact directory.
 *
 * Artifacts: an upload is stored as <artifact_dir>/<id>_<name>, where id is
 * 32 random hex digits and name a sanitized copy of the client's base name
 * (only [A-Za-z0-9._-], at most 100 characters, never "..", never starting
 * with '.'); that "<id>_<name>" is the jar id of the other /jars paths.  No
 * path a client sends is ever used to open or write a file: a jar id in a
 * URL is looked up among the stored ids.  The reserved jar id "builtin"
 * names no file: POST /jars/builtin/run runs the built-in job named by
 * entryClass (the provider gets artifact_path NULL).  Files already in the
 * directory with a well-formed name (from an earlier run) are listed again
 * at start-up.
 *
 * Threads: the server runs its own thread (libmicrohttpd's internal
 * polling thread); every provider callback is called on that thread, one
 * at a time, so a provider must not block for long.  sl_rest_new and
 * sl_rest_destroy may be called from any thread, sl_rest_port from any
 * thread while the server lives.
 */
#ifndef SL_JOBMANAGER_REST_H
#define SL_JOBMANAGER_REST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_REST_DEFAULT_PORT 8081
#define SL_REST_DEFAULT_MAX_UPLOAD (256ll * 1024 * 1024)
#define SL_REST_BUILTIN_JAR "builtin"

typedef struct sl_rest sl_rest_t;

typedef struct sl_rest_config {
    const char *bind_address; /* rest.bind-address; NULL = "127.0.0.1" */
    int port;                 /* rest.port; -1 = 8081, 0 = ephemeral (see sl_rest_port) */
    const char *token;        /* NULL or "": no authentication; else every request needs
                               * "Authorization: Bearer <token>" (else 401) */
    const char *artifact_dir; /* where uploads are stored (created if missing); required */
    int64_t max_upload;       /* bytes; 0 = SL_REST_DEFAULT_MAX_UPLOAD; larger bodies get 413 */
    const char *version;      /* reported as "sluice <version>"; NULL = "0.1.0" */
} sl_rest_config_t;

/* Fills cfg with the defaults above (artifact_dir NULL). */
void sl_rest_config_defaults(sl_rest_config_t *cfg);

/* Flink's JobStatus names (CREATED, RUNNING, FAILING, FAILED, CANCELLING,
 * CANCELED, FINISHED, RESTARTING, SUSPENDED, RECONCILING, INITIALIZING) are
 * used as they are in `state`; a vertex's `status` is an ExecutionState
 * name (CREATED, SCHEDULED, DEPLOYING, RUNNING, FINISHED, CANCELING,
 * CANCELED, FAILED, INITIALIZING). */
typedef struct sl_rest_vertex {
    char id[64];
    char name[256];
    int parallelism;
    int max_parallelism;      /* 0 = not known (left out) */
    char status[24];
} sl_rest_vertex_t;

typedef struct sl_rest_job {
    char id[64];              /* Flink's JobID: 32 hex digits */
    char name[256];
    char state[24];
    int64_t start_time;       /* ms since the epoch */
    int64_t end_time;         /* ms since the epoch; -1 while not ended */
    int64_t duration;         /* ms; -1 = computed (end or now - start) */
    int64_t last_modification; /* ms since the epoch; 0 = start_time */
    int tasks_total;          /* subtasks; -1 = not known */
    int tasks_running;        /* subtasks running; -1 = not known */
    int max_parallelism;      /* 0 = not known (left out) */
    /* Job detail only: an array the provider allocates with malloc (or
     * sl_malloc); the server frees it with free(). */
    sl_rest_vertex_t *vertices;
    int nvertices;
} sl_rest_job_t;

typedef struct sl_rest_taskmanager {
    char id[128];
    char path[256];           /* Flink's "akka.tcp://..." / "pekko..."; here host:port */
    int data_port;
    int slots_number;
    int free_slots;
    int64_t time_since_last_heartbeat; /* Flink reports the time of the last heartbeat, ms */
} sl_rest_taskmanager_t;

typedef struct sl_rest_overview {
    int taskmanagers, slots_total, slots_available;
    int jobs_running, jobs_finished, jobs_cancelled, jobs_failed;
} sl_rest_overview_t;

/* POST /jars/:jarid/run, as the provider gets it (everything borrowed for
 * the duration of the call). */
typedef struct sl_rest_run {
    const char *jar_id;        /* "<id>_<name>", or SL_REST_BUILTIN_JAR */
    const char *artifact_path; /* the stored file; NULL for the built-in jar */
    const char *entry_class;   /* entryClass: the job's name; NULL if not given */
    char **args;               /* program arguments (programArgsList, or programArgs split */
    int nargs;                 /*   like a shell: blanks, '...' and "...") */
    int parallelism;           /* 0 = not given (the job's / cluster's default) */
    const char *savepoint_path; /* NULL = none */
    bool allow_non_restored_state;
} sl_rest_run_t;

/*
 * The JobManager's side.  Every callback may be NULL (its paths then
 * answer 500 "not supported").  A callback returns 0, SL_ENOTFOUND (404),
 * SL_EINVAL (400), SL_ECANCELED/SL_ESTATE for "not in a state to do that"
 * (409) or another negative code (500), with a message in err when not 0
 * (the message becomes the response's "errors" entry).
 */
typedef struct sl_rest_provider {
    void *ud;
    int (*overview)(void *ud, sl_rest_overview_t *out, char *err, size_t errlen);
    /* Every job known (running and ended), vertices not needed: *jobs is an
     * array allocated with malloc, freed by the server with free(). */
    int (*list_jobs)(void *ud, sl_rest_job_t **jobs, int *njobs, char *err, size_t errlen);
    /* One job, with its vertices; SL_ENOTFOUND if there is no such job. */
    int (*job_detail)(void *ud, const char *job_id, sl_rest_job_t *out, char *err, size_t errlen);
    /* Allocated like list_jobs' array. */
    int (*taskmanagers)(void *ud, sl_rest_taskmanager_t **tms, int *ntms, char *err, size_t errlen);
    /* Submits a job; writes its id (NUL-terminated) into job_id. */
    int (*run)(void *ud, const sl_rest_run_t *req, char *job_id, size_t idcap, char *err, size_t errlen);
    /* Starts cancelling; SL_ENOTFOUND if no such job, SL_ESTATE if it has ended. */
    int (*cancel)(void *ud, const char *job_id, char *err, size_t errlen);
} sl_rest_provider_t;

/* Starts the server: binds cfg's address and port, lists the artifact
 * directory, starts its thread.  Copies cfg and *p (p->ud is borrowed and
 * must outlive the server).  0, or SL_EINVAL (bad config) / SL_EIO (cannot
 * bind, cannot create the directory) with a message in err. */
int sl_rest_new(const sl_rest_config_t *cfg, const sl_rest_provider_t *p, sl_rest_t **out, char *err,
                size_t errlen);

/* The port the server listens on (the ephemeral one when cfg->port was 0). */
int sl_rest_port(const sl_rest_t *r);

/* Stops the thread (requests under way finish first), closes the socket
 * and frees r.  The uploaded files stay.  NULL-safe. */
void sl_rest_destroy(sl_rest_t *r);

/* Sanitizes a client's file name into the stored name's tail: base name
 * only, [A-Za-z0-9._-], no "..", no leading '.', at most 100 characters,
 * "artifact" when it is empty.  Exposed for tests. */
void sl_rest_sanitize_name(const char *client_name, char *out, size_t cap);

#endif
