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
 *   GET    /jobs/:jobid/config      {"jid","name","execution-config":{...}}
 *   GET    /jobs/:jobid/exceptions  root-exception, all-exceptions, exceptionHistory
 *                                    (?maxExceptions=N keeps the N newest)
 *   GET    /jobs/:jobid/checkpoints            counts, summary, latest, history
 *   GET    /jobs/:jobid/checkpoints/config     the job's checkpointing settings
 *   GET    /jobs/:jobid/checkpoints/details/:checkpointid          per vertex
 *   GET    /jobs/:jobid/checkpoints/details/:checkpointid/subtasks/:vertexid
 *   POST   /jobs/:jobid/checkpoints            triggers one -> 202 {"request-id"}
 *   GET    /jobs/:jobid/checkpoints/:triggerid {"status":{"id"},"operation":{...}}
 *   POST   /jobs/:jobid/savepoints  {"target-directory","cancel-job","formatType"}
 *                                    -> 202 {"request-id"}
 *   POST   /jobs/:jobid/stop        {"targetDirectory","drain","formatType"}
 *                                    -> 202 {"request-id"}
 *   GET    /jobs/:jobid/savepoints/:triggerid  like .../checkpoints/:triggerid
 *   GET    /jobs/:jobid/metrics[?get=a,b]      job metrics: [{"id"}] / [{"id","value"}]
 *   GET    /jobs/:jobid/vertices/:vertexid     per-subtask status and I/O "metrics"
 *   GET    /jobs/:jobid/vertices/:vertexid/metrics[?get=a,b]   "<subtask>.<name>" and
 *                                    "<subtask>.<operator>.<name>" ids
 *   GET    /jobs/:jobid/vertices/:vertexid/backpressure  backpressureLevel, per subtask ratio
 *   GET    /jobs/:jobid/vertices/:vertexid/watermarks    [{"id":"<i>.currentInputWatermark","value"}]
 *   GET    /jobs/:jobid/state?uid=UID&key=K[&state=NAME][&namespace=NS][&timeout=MS]
 *                                    a running job's keyed state for one key (not Flink's:
 *                                    its queryable state is gone) -> {"entries":[...]};
 *                                    400 bad key, 404 no operator / state / value, 409 not
 *                                    running, 504 the subtask did not answer (state_query.h)
 * A savepoint directory a client names must be absolute, without a ".."
 * component (400 otherwise); bodies name the field that is wrong (400).
 * A job without checkpointing answers the checkpoint statistics paths
 * with 404, as Flink does.
 * GET /jobs/:jobid also carries Flink's "plan": {"jid","name","type",
 * "nodes":[{"id","parallelism","description","operator","inputs":[{"num",
 * "id","ship_strategy","exchange"}]}]}, one node per vertex, in the vertices' order.
 *
 * The web UI (web/, embedded at build time into web_assets.c, see
 * web_assets.h): GET / is web/index.html, GET /web/<file> one of the
 * embedded files, looked up by exact name in the embedded table (never a
 * file the client names), with its Content-Type, Cache-Control: no-cache
 * and an ETag (If-None-Match -> 304).  REST paths take precedence; the
 * UI's files need no token (the page asks for it and sends it as a
 * Bearer header on its REST calls).
 * Every path may also be written with Flink's "/v1" prefix.  Errors are
 * Flink's {"errors":["..."]} with 400, 401, 404, 405, 409, 413 or 500
 * (and 502 / 504 from a state query).
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
#define SL_REST_MAX_INPUTS 8 /* plan edges kept per vertex */

typedef struct sl_rest sl_rest_t;

typedef struct sl_rest_config {
    const char *bind_address; /* rest.bind-address; NULL or "localhost" = "127.0.0.1" */
    int port;                 /* rest.port; -1 = 8081, 0 = ephemeral (see sl_rest_port) */
    const char *token;        /* NULL or "": no authentication; else every request needs
                               * "Authorization: Bearer <token>" (else 401) */
    const char *artifact_dir; /* where uploads are stored (created if missing); NULL: no uploads
                               * (an embedded job's server: POST /jars/upload answers 400) */
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
    /* The job plan's edges into this vertex (GET /jobs/:jobid "plan"):
     * the index of the vertex each comes from (in the job's vertex order)
     * and its ship strategy ("HASH", "REBALANCE", "FORWARD"...). */
    int ninputs;
    struct { int vertex; char ship_strategy[16]; } inputs[SL_REST_MAX_INPUTS];
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
    int num_restarts;         /* restarts so far (numRestarts) */
} sl_rest_job_t;

typedef struct sl_rest_taskmanager {
    char id[128];
    char path[256];           /* Flink's "akka.tcp://..." / "pekko..."; here host:port */
    int data_port;
    int slots_number;
    int free_slots;
    int64_t time_since_last_heartbeat; /* Flink reports the time of the last heartbeat, ms */
} sl_rest_taskmanager_t;

/* GET /taskmanagers/:tmid/metrics: a TaskManager process's figures (its
 * latest heartbeat). */
typedef struct sl_rest_tm_metrics {
    int64_t rss_bytes, cpu_ms, threads;
    double cpu_usage; /* percent of one core between its last two heartbeats; -1 unknown */
    int slots_total, slots_free;
} sl_rest_tm_metrics_t;

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

/* ---- checkpoints, configuration, exceptions, savepoints ------------------
 * The JSON shapes (summaries, percentiles, per-vertex sums, newest-first
 * order) are computed by the server from the raw figures below, so that a
 * provider only copies what it keeps. */

/* One subtask's part of one checkpoint (Flink's units: ms and bytes). */
typedef struct sl_rest_ckpt_subtask {
    bool acked;                /* false: pending (or the checkpoint failed before it acked) */
    int64_t ack_timestamp;     /* ms since the epoch */
    int64_t sync_ms, async_ms; /* synchronous and asynchronous phase */
    int64_t align_ms;          /* first barrier to last */
    int64_t start_delay_ms;    /* trigger to the first barrier (0: not known) */
    int64_t state_size;        /* bytes of state the checkpoint refers to */
    int64_t checkpointed_size; /* bytes this checkpoint persisted (incremental: the new part) */
    int64_t processed_data;    /* bytes processed during the alignment (0: not known) */
    int64_t persisted_data;    /* in-flight bytes persisted (unaligned) */
    bool unaligned;
} sl_rest_ckpt_subtask_t;

typedef struct sl_rest_checkpoint {
    int64_t id;
    char status[16];           /* "IN_PROGRESS", "COMPLETED", "FAILED" */
    bool is_savepoint;
    char type[24];             /* "CHECKPOINT", "UNALIGNED_CHECKPOINT", "SAVEPOINT" */
    int64_t trigger_timestamp; /* ms since the epoch */
    int64_t end_to_end_duration; /* ms, completed ones; else computed from the acks */
    char external_path[1024];  /* completed: where it is ("" = kept in memory: "<checkpoint-not-externally-addressable>") */
    bool discarded;            /* completed: deleted since (retention) */
    int64_t failure_timestamp; /* failed: ms since the epoch (0: not known) */
    char failure_message[512]; /* failed: why ("" = not known) */
    /* [ntasks] in the vertices' order (vertex-major, as the plan numbers
     * tasks); malloc'ed by the provider, freed by the server. */
    sl_rest_ckpt_subtask_t *subtasks;
} sl_rest_checkpoint_t;

typedef struct sl_rest_checkpoints {
    /* id, name and parallelism of each vertex (status unused); malloc'ed */
    sl_rest_vertex_t *vertices;
    int nvertices;
    /* the checkpoints kept (at most the provider's history size), in any
     * order; malloc'ed, each one's subtasks too */
    sl_rest_checkpoint_t *history;
    int nhistory;
    /* counts since the job started (the history may hold fewer) */
    int64_t total, completed, failed, in_progress, restored;
    /* the checkpoint the job was last restored from */
    bool has_restored;
    int64_t restored_id, restore_timestamp;
    bool restored_is_savepoint;
    char restored_path[1024];
} sl_rest_checkpoints_t;

/* Frees what a provider put into c (the arrays), not c. */
void sl_rest_checkpoints_clear(sl_rest_checkpoints_t *c);

typedef struct sl_rest_ckpt_config {
    bool exactly_once;
    int64_t interval, timeout, min_pause, aligned_checkpoint_timeout; /* ms */
    int max_concurrent, tolerable_failed;
    bool externalized, delete_on_cancellation;
    bool unaligned, after_tasks_finish;
    char state_backend[64];      /* "HashMapStateBackend", "EmbeddedRocksDBStateBackend" */
    char checkpoint_storage[64]; /* "FileSystemCheckpointStorage", "JobManagerCheckpointStorage" */
} sl_rest_ckpt_config_t;

typedef struct sl_rest_kv {
    char key[128];
    char value[512];
} sl_rest_kv_t;

typedef struct sl_rest_job_config {
    char name[256];
    char execution_mode[24];     /* "PIPELINED" */
    char restart_strategy[256];  /* a sentence, as Flink writes it */
    int parallelism;
    bool object_reuse;
    sl_rest_kv_t *user_config;   /* malloc'ed, freed by the server */
    int nuser_config;
} sl_rest_job_config_t;

/* One failure of the job (Flink's exception history entry). */
typedef struct sl_rest_exception {
    char name[128];              /* exceptionName */
    char stacktrace[2048];       /* the cause, as text */
    int64_t timestamp;           /* ms since the epoch */
    char task_name[300];         /* "" = not a task's failure (null) */
    char location[300];          /* host:port of the TaskManager, "" = null */
    char tm_id[128];             /* "" = null */
} sl_rest_exception_t;

typedef struct sl_rest_savepoint_req {
    const char *target_dir;   /* "target-directory" (POST /savepoints) or "targetDirectory"
                               * (POST /stop); NULL = the job's execution.checkpointing.savepoint-dir */
    bool stop;                /* POST /jobs/:jobid/stop: stop with a savepoint */
    bool drain;               /* "drain" (stop only): MAX_WATERMARK before the savepoint */
    bool cancel_job;          /* "cancel-job" (POST /savepoints): cancel once it completed */
    bool native;              /* "formatType": "NATIVE" (default "CANONICAL") */
} sl_rest_savepoint_req_t;

typedef struct sl_rest_operation {
    bool done;                /* false: IN_PROGRESS */
    char location[4096];      /* done, success: the savepoint's directory */
    int64_t checkpoint_id;    /* done, success, checkpoint triggers: the id */
    char failure[1024];       /* done, failed: why (non-empty = failed) */
} sl_rest_operation_t;

/* ---- live metrics (rest_metrics.c) ---------------------------------------
 * Flink's names: per operator numRecordsIn/Out, currentInputWatermark,
 * currentOutputWatermark, numLateRecordsDropped; per subtask the time
 * shares busyTimeMsPerSecond, backPressuredTimeMsPerSecond,
 * idleTimeMsPerSecond (ms per second, -1 until known) and the accumulated
 * times. */
#define SL_REST_MAX_CHAIN 16
typedef struct sl_rest_op_metrics {
    char name[128];
    int64_t records_in, records_out;
    int64_t in_watermark, out_watermark; /* INT64_MIN: none yet */
    int64_t late_dropped;
    int64_t pending_records; /* -1: not a source that knows it */
    /* stateMemoryBytes and RocksDB's native metrics (-1: none; see
     * sl_msg_op_metrics_t) */
    int64_t state_memory_bytes;
    int64_t rdb_mem_tables, rdb_table_readers, rdb_block_cache, rdb_live_data;
} sl_rest_op_metrics_t;

typedef struct sl_rest_subtask_metrics {
    bool reported;             /* false: no report yet (figures 0, shares -1) */
    char status[24];           /* ExecutionState name */
    int attempt;
    char tm_id[128];           /* "" = not known */
    int64_t start_time;        /* ms since the epoch */
    double busy, backpressured, idle;        /* ms per second, -1 = not known */
    int64_t busy_ms, backpressured_ms, idle_ms; /* accumulated */
    int64_t bytes_in, bytes_out;               /* numBytesIn / numBytesOut */
    int nops;
    sl_rest_op_metrics_t ops[SL_REST_MAX_CHAIN]; /* the chain, head first */
} sl_rest_subtask_metrics_t;

typedef struct sl_rest_vertex_metrics {
    sl_rest_vertex_t vertex;
    sl_rest_subtask_metrics_t *subtasks; /* [vertex.parallelism], malloc'ed, freed by the server */
} sl_rest_vertex_metrics_t;

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
    /* GET /jobs/:jobid/checkpoints and its details paths: fills *out (the
     * server frees it with sl_rest_checkpoints_clear).  SL_ENOTFOUND: no
     * such job; SL_ESTATE: checkpointing is not enabled for it (404). */
    int (*checkpoints)(void *ud, const char *job_id, sl_rest_checkpoints_t *out, char *err, size_t errlen);
    /* GET /jobs/:jobid/checkpoints/config; errors as checkpoints. */
    int (*checkpoint_config)(void *ud, const char *job_id, sl_rest_ckpt_config_t *out, char *err, size_t errlen);
    /* GET /jobs/:jobid/config; user_config freed by the server with free(). */
    int (*job_config)(void *ud, const char *job_id, sl_rest_job_config_t *out, char *err, size_t errlen);
    /* GET /jobs/:jobid/exceptions: every failure kept, oldest first
     * (*out malloc'ed, freed by the server); SL_ENOTFOUND: no such job. */
    int (*exceptions)(void *ud, const char *job_id, sl_rest_exception_t **out, int *n, char *err, size_t errlen);
    /* POST /jobs/:jobid/savepoints and /stop: starts it, writes a trigger id
     * (NUL-terminated, at most 64 bytes) into trigger_id.  SL_ENOTFOUND: no job;
     * SL_ESTATE: not running; SL_EINVAL: bad request (no target and no default). */
    int (*savepoint)(void *ud, const char *job_id, const sl_rest_savepoint_req_t *req, char *trigger_id,
                     size_t cap, char *err, size_t errlen);
    /* POST /jobs/:jobid/checkpoints: same, for a checkpoint. */
    int (*checkpoint)(void *ud, const char *job_id, char *trigger_id, size_t cap, char *err, size_t errlen);
    /* GET .../savepoints/:triggerid and .../checkpoints/:triggerid: SL_ENOTFOUND if unknown. */
    int (*operation)(void *ud, const char *job_id, const char *trigger_id, sl_rest_operation_t *out,
                     char *err, size_t errlen);
    /* GET /jobs/:jobid/vertices/:vertexid[/metrics|/backpressure|/watermarks]
     * and the "metrics" of /jobs/:jobid's vertices: the live figures of each
     * subtask of the vertex.  SL_ENOTFOUND: no such job or vertex. */
    int (*vertex_metrics)(void *ud, const char *job_id, const char *vertex_id, sl_rest_vertex_metrics_t *out,
                          char *err, size_t errlen);
    /* GET /jobs/:jobid/state?uid=&key=[&state=][&namespace=][&timeout=]: a
     * lookup of the running job's keyed state by key (state_query.h).
     * state and ns NULL when not given.  0 with *http (200, 400, 404, 409,
     * 500, 502, 504) and *body (the JSON answer, malloc'ed, freed by the
     * server); or SL_ENOTFOUND (no such job) / SL_ESTATE (it has ended)
     * with err.  Unlike the other callbacks it blocks until the answer or
     * the timeout, so the server calls it on a thread of its own (the
     * connection suspended meanwhile), concurrently with other callbacks. */
    int (*state_query)(void *ud, const char *job_id, const char *uid, const char *state, const char *key,
                       const char *ns, int64_t timeout_ms, int *http, char **body, char *err, size_t errlen);
    /* GET /taskmanagers/:tmid/metrics[?get=...]: SL_ENOTFOUND for an unknown id. */
    int (*taskmanager_metrics)(void *ud, const char *tm_id, sl_rest_tm_metrics_t *out, char *err, size_t errlen);
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
