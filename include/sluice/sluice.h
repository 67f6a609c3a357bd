/*
 * sluice.h — the public C DataStream API.
 *
 * A job is built on an environment (sl_env_t) as a graph of streams, then
 * run with sl_env_execute().  Every builder call records an error on the
 * environment instead of failing loudly; sl_env_execute() refuses a job
 * that had one and sl_env_error() names it.  Streams, keyed streams and
 * windowed streams are handles owned by the environment: never free them.
 *
 * Schemas: builder functions that take an output schema (sl_map,
 * sl_flat_map, sl_keyed_process, sl_co_process, sl_window_aggregate,
 * sl_window_process, sl_output_tag) take over the caller's reference, so
 * sl_schema_parse(...) can be passed inline.  Connector constructors
 * (sl_file_source) take their own reference; the caller keeps theirs.
 *
 * User functions receive a user context pointer (ctx).  Parallel subtasks
 * run on different threads.  A function that keeps mutable data in ctx
 * should give each subtask its own instance, as Flink copies a function
 * per subtask: pass SL_FN_COPY(&my_struct) (each subtask gets a copy of
 * its bytes, freed by the engine) or a ctx_clone (and ctx_free) for deep
 * copies.  Keyed-state handles (sl_state_*) may stay in a shared ctx: an
 * access always reaches the state of the subtask that runs it.
 */
#ifndef SLUICE_H
#define SLUICE_H

#include "row.h"

#ifdef __cplusplus
extern "C" {
#endif

#define SL_NO_TIMESTAMP INT64_MIN
#define SL_MAX_WATERMARK INT64_MAX
#define SL_MIN_WATERMARK INT64_MIN

typedef struct sl_env sl_env_t;
typedef struct sl_stream sl_stream_t;
typedef struct sl_keyed sl_keyed_t;
typedef struct sl_windowed sl_windowed_t;
typedef struct sl_connected sl_connected_t;
typedef struct sl_collector sl_collector_t;
typedef struct sl_pctx sl_pctx_t;          /* process-function context */
typedef struct sl_rt sl_rt_t;              /* runtime context (open) */

/* A record as user functions see it: a row and its event timestamp
 * (SL_NO_TIMESTAMP when none has been assigned). */
typedef struct sl_record {
    sl_row_t row;
    int64_t ts;
} sl_record_t;

typedef void *(*sl_ctx_clone_fn)(const void *ctx);
typedef void (*sl_ctx_free_fn)(void *ctx);

/* ---- environment ----------------------------------------------------- */

SL_API sl_env_t *sl_env_new(void);
SL_API void sl_env_destroy(sl_env_t *env);
SL_API void sl_env_set_parallelism(sl_env_t *env, int p);
/* Fixes the number of key groups.  0 (default): Flink's rule, i.e.
 * roundUpToPowerOfTwo(p + p/2) clamped to [128, 32768]. */
SL_API void sl_env_set_max_parallelism(sl_env_t *env, int maxp);
/* Network buffer size in bytes (default 32 KiB) and buffers per channel
 * (default 4): together they bound the memory between two subtasks. */
SL_API void sl_env_set_buffer_size(sl_env_t *env, int bytes);
SL_API void sl_env_set_buffers_per_channel(sl_env_t *env, int n);
/* Flink's setBufferTimeout (execution.buffer-timeout.interval, default
 * 100 ms): the longest a record waits in a partly filled output buffer
 * while its task stays busy (a task with nothing to do flushes at once);
 * 0 flushes after every batch the task processed, -1 only full buffers. */
SL_API void sl_env_set_buffer_timeout(sl_env_t *env, int64_t ms);
/* How often sources emit generated watermarks (ms of processing time,
 * default 200, like pipeline.auto-watermark-interval).  0 emits after
 * every record. */
SL_API void sl_env_set_auto_watermark_interval(sl_env_t *env, int64_t ms);
/* Checkpoints: barriers injected at the sources every interval_ms, aligned
 * (exactly-once) or not (at-least-once) at tasks with several inputs.
 * (State persistence and restore arrive with checkpoint storage.) */
typedef enum { SL_CHECKPOINT_EXACTLY_ONCE = 0, SL_CHECKPOINT_AT_LEAST_ONCE = 1 } sl_checkpoint_mode_t;
SL_API void sl_env_enable_checkpointing(sl_env_t *env, int64_t interval_ms, sl_checkpoint_mode_t mode);
/* execution.checkpointing.timeout / .min-pause / .max-concurrent-checkpoints
 * / .tolerable-failed-checkpoints (defaults 10 min, 0, 1, 0). */
SL_API void sl_env_set_checkpoint_options(sl_env_t *env, int64_t timeout_ms, int64_t min_pause_ms, int max_concurrent,
                                          int tolerable_failed);
/* Where keyed state lives (state.backend.type): on the heap (hashmap, the
 * default: fastest, bounded by memory, copy-on-write snapshots) or in
 * RocksDB (state larger than memory; one database per keyed operator
 * subtask under a local directory).  Both restore each other's
 * checkpoints unless they are incremental. */
typedef enum sl_state_backend_kind {
    SL_STATE_BACKEND_HASHMAP = 0,
    SL_STATE_BACKEND_ROCKSDB = 1,
} sl_state_backend_kind_t;
SL_API void sl_env_set_state_backend(sl_env_t *env, sl_state_backend_kind_t kind);
/* RocksDB settings (state.backend.rocksdb.localdir, .block.cache-size,
 * .writebuffer.size): the local working directory (default: the system's
 * temporary directory), the block cache shared by every RocksDB backend of
 * the job, and each database's memtable budget.  0 / NULL: the defaults
 * (TMPDIR, 64 MiB, 64 MiB).  Memory of RocksDB state is bounded by cache +
 * number of keyed subtasks x write buffer. */
SL_API void sl_env_set_rocksdb_options(sl_env_t *env, const char *local_dir, int64_t block_cache_bytes,
                                       int64_t write_buffer_bytes);
/* The write-back cache of value state (ValueState, reducing/aggregating
 * state, window contents of aggregate and reduce windows) in front of each
 * RocksDB database: reads of hot keys are served from memory and their
 * changes reach RocksDB when evicted or at the next checkpoint.  bytes per
 * keyed subtask; 0: the default (as large as the write buffer); < 0: off
 * (every access goes to RocksDB).  Memory of RocksDB state is then bounded
 * by cache + keyed subtasks x (write buffer + value cache). */
SL_API void sl_env_set_rocksdb_value_cache(sl_env_t *env, int64_t bytes);
/* Incremental checkpoints (execution.checkpointing.incremental, RocksDB
 * only): a checkpoint uploads only the RocksDB files that earlier
 * checkpoints of the same database did not, and refers to those; shared
 * files are deleted when no retained checkpoint needs them.  Such
 * checkpoints hold RocksDB's own files, so they restore into RocksDB only. */
SL_API void sl_env_set_incremental_checkpoints(sl_env_t *env, bool enabled);

/* Unaligned checkpoints (execution.checkpointing.unaligned.enabled,
 * .aligned-checkpoint-timeout): with exactly-once, a barrier overtakes the
 * records queued in channels; a task snapshots at the first barrier and
 * the overtaken records (in-flight data) are stored in the checkpoint and
 * replayed on restore, so checkpoints complete quickly under backpressure.
 * aligned_timeout_ms > 0 starts each checkpoint aligned and switches to
 * unaligned once it is older than that.  Needs max concurrent checkpoints
 * 1.  A checkpoint holding in-flight data restores only at the same
 * parallelism (take an aligned one to rescale). */
SL_API void sl_env_set_unaligned_checkpoints(sl_env_t *env, bool enabled, int64_t aligned_timeout_ms);
/* Where checkpoints are written (execution.checkpointing.dir): each
 * completed checkpoint is dir/<job>/chk-<n>/ with its _metadata written
 * last, durably.  Without a directory checkpoints are taken but not
 * persisted. */
SL_API void sl_env_set_checkpoint_dir(sl_env_t *env, const char *dir);
/* Completed checkpoints kept (execution.checkpointing.num-retained, default 1). */
SL_API void sl_env_set_checkpoints_retained(sl_env_t *env, int n);
/* What happens to the retained checkpoints when the job ends
 * (execution.checkpointing.externalized-checkpoint-retention):
 *   SL_CHECKPOINTS_NOT_RETAINED (NO_EXTERNALIZED_CHECKPOINTS, Flink's
 *     default): deleted when the job finishes, is cancelled or fails
 *     for good — kept only if the process dies;
 *   SL_CHECKPOINTS_DELETE_ON_CANCELLATION: kept when the job fails, deleted
 *     when it finishes or is cancelled;
 *   SL_CHECKPOINTS_RETAIN_ON_CANCELLATION: always kept, so the job can be
 *     restored from its latest checkpoint after any end. */
typedef enum sl_checkpoint_retention {
    SL_CHECKPOINTS_NOT_RETAINED = 0,
    SL_CHECKPOINTS_DELETE_ON_CANCELLATION = 1,
    SL_CHECKPOINTS_RETAIN_ON_CANCELLATION = 2,
} sl_checkpoint_retention_t;
SL_API void sl_env_set_checkpoint_retention(sl_env_t *env, sl_checkpoint_retention_t r);
/* Restores the job from a completed checkpoint or a savepoint: PATH is a
 * chk-<n> or savepoint directory (or a job's checkpoint directory: its
 * latest complete one), as Flink's `run -s PATH`
 * (execution.savepoint.path).  Operators are matched by uid; keyed state
 * is split by key group, so the parallelism may change (the max
 * parallelism may not); sources resume from their positions and
 * two-phase-commit sinks recover.  State of an operator that is not in
 * the job is refused when the job starts, naming it, unless
 * sl_env_set_allow_non_restored_state. */
SL_API int sl_env_restore_from(sl_env_t *env, const char *path);
/* -n / --allowNonRestoredState (execution.savepoint.ignore-unclaimed-state):
 * drop, with a warning, restored state whose operator is not in the job. */
SL_API void sl_env_set_allow_non_restored_state(sl_env_t *env, bool allow);
/* The default directory of savepoints (execution.checkpointing.savepoint-dir);
 * an absolute path. */
SL_API void sl_env_set_savepoint_dir(sl_env_t *env, const char *dir);
/* While sl_env_execute runs on another thread: takes a savepoint (aligned,
 * in the canonical format unless sl_env_set_savepoint_format says NATIVE)
 * into a new directory savepoint-<job>-<random> under dir (NULL: the
 * default directory) and blocks until it completed; its path goes to path.  The job
 * goes on; an intermediate savepoint commits no sink transaction (Flink
 * 1.15+).  Needs checkpointing with a checkpoint directory (savepoints are
 * staged there).  0, or < 0 with sl_env_error saying why (SL_ESTATE: no
 * job running, or it cannot take one now). */
SL_API int sl_env_trigger_savepoint(sl_env_t *env, const char *dir, char *path, size_t cap);
/* Same, and the job stops with it (Flink's stop-with-savepoint):
 * sl_env_execute returns 0 once every task ended.  Sinks commit the
 * savepoint's transactions, so nothing is pending or repeated across an
 * upgrade from it.  drain: event time first advances to its end (every
 * window fires, every event-time timer runs); without drain, open windows
 * and timers travel in the savepoint.  If the savepoint fails, the job goes
 * on running and the call returns the error. */
SL_API int sl_env_stop_with_savepoint(sl_env_t *env, const char *dir, bool drain, char *path, size_t cap);
/* The format of the savepoints the two calls above take (Flink's --type):
 * CANONICAL (default) restores into either state backend; NATIVE writes
 * RocksDB's keyed state as RocksDB's own SST files, copied into the
 * savepoint (self-contained), which is quicker to take and to restore but
 * restores into RocksDB only (a heap job refuses it by name).  Heap state
 * is canonical in both.  Builder or any thread before the call. */
typedef enum sl_savepoint_format { SL_SAVEPOINT_CANONICAL = 0, SL_SAVEPOINT_NATIVE = 1 } sl_savepoint_format_t;
SL_API void sl_env_set_savepoint_format(sl_env_t *env, sl_savepoint_format_t format);
/* Restart strategy (restart-strategy.type: fixed-delay): after a
 * retriable failure (a user function error, I/O, state) the job restarts
 * from its latest completed checkpoint, at most `attempts` times, waiting
 * delay_ms before each.  Default: 3 attempts, 1 s, when checkpointing is
 * enabled; none otherwise.  attempts = 0 disables restarts. */
SL_API void sl_env_set_restart_fixed_delay(sl_env_t *env, int attempts, int64_t delay_ms);
/* restart-strategy.type: exponential-delay.  The first restart waits
 * initial_backoff_ms, each further one multiplier times longer, at most
 * max_backoff_ms, each +/- jitter (0..1) of itself at random; after
 * reset_threshold_ms without a failure the delay is back to the initial
 * one.  At most max_attempts restarts in a row (INT32_MAX: no limit).
 * Flink's defaults: 1 s, 1 min, 1.5, 1 h, 0.1, no limit. */
SL_API void sl_env_set_restart_exponential_delay(sl_env_t *env, int64_t initial_backoff_ms, int64_t max_backoff_ms,
                                                 double multiplier, int64_t reset_threshold_ms, double jitter,
                                                 int max_attempts);
/* restart-strategy.type: failure-rate.  Restarts, delay_ms after each
 * failure, while at most max_failures failures fall within any
 * interval_ms; one more fails the job.  Flink's defaults: 1, 1 min, 1 s. */
SL_API void sl_env_set_restart_failure_rate(sl_env_t *env, int max_failures, int64_t interval_ms, int64_t delay_ms);
/* restart-strategy.type: none.  A failure fails the job. */
SL_API void sl_env_set_restart_none(sl_env_t *env);
/* Restarts in the last sl_env_execute. */
SL_API int sl_env_restarts(const sl_env_t *env);
/* Longest synchronous phase of a task's snapshot in the last run (µs):
 * barrier forwarded -> copy-on-write views taken -> processing resumes. */
SL_API int64_t sl_env_checkpoint_max_sync_us(const sl_env_t *env);
/* Statistics of the most recent checkpoints of the last run (newest last):
 * id, trigger time (wall ms), trigger-to-completion duration (ms), whether it
 * completed or was aborted.  Returns how many were copied (<= cap). */
typedef struct sl_checkpoint_stat {
    int64_t id;
    int64_t trigger_ms;
    int64_t duration_ms;
    bool completed;
    bool aborted;
    /* over the tasks that acknowledged */
    int64_t state_bytes;     /* persisted: state files, operator state, in-flight data */
    int64_t inflight_bytes;  /* in-flight data of unaligned snapshots */
    int64_t max_align_us, max_sync_us, max_async_us;
    int unaligned_tasks;     /* tasks that snapshotted unaligned */
} sl_checkpoint_stat_t;
SL_API int sl_env_checkpoint_stats(const sl_env_t *env, sl_checkpoint_stat_t *out, int cap);
/* Per task, for one of those checkpoints (Flink's per-subtask checkpoint
 * details): returns the number of tasks written (<= cap), or < 0 when the
 * checkpoint is not among the kept ones. */
typedef struct sl_checkpoint_task_stat {
    const char *task;        /* "Map -> Sink: out (2/4)"; valid while env lives */
    bool acknowledged;
    bool unaligned;
    int64_t align_us, sync_us, async_us;
    int64_t state_bytes, inflight_bytes;
} sl_checkpoint_task_stat_t;
SL_API int sl_env_checkpoint_task_stats(const sl_env_t *env, int64_t id, sl_checkpoint_task_stat_t *out, int cap);
/* Checkpoints completed in the last run. */
SL_API int64_t sl_env_checkpoints_completed(const sl_env_t *env);
/* Disables operator chaining (every operator in its own task). */
SL_API void sl_env_disable_chaining(sl_env_t *env);
/* Runs the job and blocks until it ends: 0 when every source finished and
 * every operator drained, else the first error. */
SL_API int sl_env_execute(sl_env_t *env, const char *job_name);
/* The first error, with what it was about; "" when none. */
SL_API const char *sl_env_error(const sl_env_t *env);
/* Asks a running job to stop (thread-safe; sl_env_execute returns
 * SL_ECANCELED). */
SL_API void sl_env_cancel(sl_env_t *env);
/* Serves Flink's REST API and web UI for this job while sl_env_execute
 * runs (Flink's MiniCluster with rest.port set; the configuration keys
 * rest.port and rest.bind-address do the same through sl_env_configure):
 * /overview, /jobs, /jobs/:jobid (and its checkpoints, config,
 * exceptions, vertex metrics, savepoints, cancel), /taskmanagers (none:
 * the embedded TaskManager does not register over RPC).  The server starts
 * with the job and stops when sl_env_execute returns; it takes no uploads
 * and runs no other job.  bind_address NULL = 127.0.0.1; port 0 = a free
 * port (see sl_env_rest_port), -1 = no server (the default).
 * SLUICE_REST_TOKEN in the environment makes every request need
 * "Authorization: Bearer <token>", as for a JobManager.  A port that
 * cannot be bound fails sl_env_execute, naming it.  Call before
 * sl_env_execute. */
SL_API void sl_env_set_rest_endpoint(sl_env_t *env, const char *bind_address, int port);
/* The port the REST API listens on while the job runs, else -1 (any
 * thread). */
SL_API int sl_env_rest_port(const sl_env_t *env);

/* Records in/out of the operator with this uid or name, summed over its
 * subtasks, after sl_env_execute returned.  SL_ENOTFOUND if no such. */
SL_API int sl_env_operator_metrics(const sl_env_t *env, const char *uid_or_name, int64_t *records_in,
                                   int64_t *records_out);

/* Records a source skipped as malformed (SL_ON_ERROR_SKIP) in the last run. */
SL_API int64_t sl_env_records_skipped(const sl_env_t *env, const char *uid_or_name);

/* Processing-time clock.  Tests may install their own (ctx is theirs). */
typedef int64_t (*sl_clock_fn)(void *ctx);
SL_API void sl_env_set_clock(sl_env_t *env, sl_clock_fn fn, void *ctx);
SL_API int64_t sl_now_ms(void);

/* ---- event time ------------------------------------------------------ */

typedef int64_t (*sl_timestamp_fn)(void *ctx, const sl_row_t *row);

/* What the source (or sl_assign_timestamps) does for event time.  Build it
 * with one of the constructors below and adjust fields as needed. */
typedef struct sl_watermark_strategy {
    enum { SL_WM_NONE = 0, SL_WM_BOUNDED, SL_WM_MONOTONOUS } kind;
    int64_t max_out_of_orderness_ms; /* B: watermark = max_ts - B - 1 */
    const char *timestamp_field;     /* BIGINT/TIMESTAMP field, or NULL */
    sl_timestamp_fn timestamp_fn;    /* used when timestamp_field is NULL */
    void *timestamp_ctx;
    int64_t idle_timeout_ms;         /* 0: a split is never marked idle */
} sl_watermark_strategy_t;

SL_API sl_watermark_strategy_t sl_wm_none(void);
SL_API sl_watermark_strategy_t sl_wm_bounded(const char *ts_field, int64_t max_out_of_orderness_ms);
SL_API sl_watermark_strategy_t sl_wm_monotonous(const char *ts_field);

/* ---- sources and sinks (connector interface) -------------------------- */

typedef struct sl_source_output sl_source_output_t;

enum { SL_SRC_MORE = 1, SL_SRC_IDLE = 2, SL_SRC_END = 3 };

/* A source is split into readers, one per parallel subtask.  A reader owns
 * any number of splits (numbered 0..nsplits-1 locally); watermarks are
 * generated per split and combined (minimum over active splits). */
typedef struct sl_source_ops {
    const char *name;
    /* Creates the reader of subtask `subtask` of `parallelism`; sets
     * *nsplits.  Returns 0 or an error with a message in err. */
    int (*create_reader)(void *ctx, int subtask, int parallelism, void **reader, int *nsplits,
                         char *err, size_t errlen);
    /* Emits up to max records through out.  Returns SL_SRC_MORE (call
     * again), SL_SRC_IDLE (nothing now), SL_SRC_END (reader finished), or
     * a negative error with a message in err. */
    int (*poll)(void *reader, sl_source_output_t *out, int max, char *err, size_t errlen);
    void (*destroy_reader)(void *reader);
    void (*destroy)(void *ctx);
    /* Optional: checkpoint `id` — the reader writes its position (split
     * offsets) through put.  Called on the task's thread between polls, at
     * the point where barrier `id` enters the stream. */
    int (*snapshot)(void *reader, int64_t id, void (*put)(void *put_ctx, const void *p, size_t n), void *put_ctx);
    /* Optional: a restored job's reader resumes from what snapshot wrote.
     * state is the union over every subtask of the checkpoint — for each,
     * a u32 (little-endian) length and the bytes its snapshot wrote — and
     * the reader takes the splits it owns now, so a restore may change the
     * parallelism (Flink's union list state).  Called once, right after
     * create_reader. */
    int (*restore)(void *reader, const void *state, size_t len, char *err, size_t errlen);
    /* Optional: checkpoint `id` completed (every task acknowledged it and
     * its metadata is durable); the positions the reader's snapshot(id)
     * wrote are in a complete checkpoint.  On the task's thread, between
     * polls; a later id covers the earlier ones, some of which may never be
     * notified.  For side effects such as committing offsets to a consumer
     * group for monitoring — never for correctness. */
    void (*notify_checkpoint_complete)(void *reader, int64_t id);
    /* Optional: records the reader's splits hold beyond its position, as
     * far as it knows without asking anyone (Flink's pendingRecords, e.g.
     * a Kafka consumer's lag), or -1 when unknown.  On the task's thread,
     * between polls; must not block. */
    int64_t (*pending_records)(void *reader);
} sl_source_ops_t;

typedef struct sl_source {
    const sl_source_ops_t *ops;
    void *ctx;
    sl_schema_t *schema; /* of the rows it emits; the source holds a ref */
} sl_source_t;

/* Inside poll: get the writer, fill a row of the source schema, emit it. */
SL_API sl_row_writer_t *sl_src_row(sl_source_output_t *out);
/* Emits the row just written for split `split`.  ts: its event time if the
 * connector knows it (e.g. Kafka's record timestamp), else SL_NO_TIMESTAMP;
 * the watermark strategy's assigner wins when one is set. */
SL_API void sl_src_emit(sl_source_output_t *out, int split, int64_t ts);
/* A split ended: it no longer holds the watermark back. */
SL_API void sl_src_split_finished(sl_source_output_t *out, int split);
/* Inside poll: the reader found a new split (e.g. a partition of a topic
 * that grew).  Its number is the next after the current ones (returned;
 * -1 outside a source operator); its watermark generator starts empty and
 * active, like the others'. */
SL_API int sl_src_add_split(sl_source_output_t *out);
/* Counts a skipped record (bad input under a skip policy). */
SL_API void sl_src_count_skipped(sl_source_output_t *out, int64_t n);
/* Inside a poll that returns SL_SRC_IDLE: the reader knows when it next has
 * data (CLOCK_MONOTONIC nanoseconds, e.g. a rate-limited reader's next
 * due record), and the task sleeps until exactly then instead of polling
 * again within a millisecond.  Input from the mailbox (a checkpoint, a
 * cancel) still wakes it at once. */
SL_API void sl_src_idle_until(sl_source_output_t *out, int64_t mono_ns);

typedef struct sl_sink_ops {
    const char *name;
    int (*open)(void *ctx, int subtask, int parallelism, const sl_schema_t *schema, void **writer,
                char *err, size_t errlen);
    int (*write)(void *writer, const sl_record_t *rec, char *err, size_t errlen);
    /* End of input (bounded job): flush everything.  For a sink with
     * pre_commit in a checkpointing job, it runs after the final checkpoint
     * (FLIP-147) committed everything the sink wrote: there is nothing left
     * to commit then. */
    int (*finish)(void *writer, char *err, size_t errlen);
    void (*close)(void *writer);
    void (*destroy)(void *ctx);
    /* Two-phase commit (optional; exactly-once sinks).  pre_commit runs on
     * checkpoint `id`'s barrier: make everything written since the last
     * pre-commit durable but invisible, and start a new transaction.
     * commit runs when checkpoint `id` completed: make every pre-committed
     * transaction up to `id` visible; it must be idempotent (it is repeated
     * after a restore).  Nothing is visible downstream before the
     * checkpoint that covers it has completed. */
    int (*pre_commit)(void *writer, int64_t id, char *err, size_t errlen);
    int (*commit)(void *writer, int64_t id, char *err, size_t errlen);
    /* Before the subtasks of a run open, in every process that runs some
     * of them (once in embedded mode; on a cluster once per TaskManager,
     * possibly while another TaskManager's subtasks of the same run already
     * write): commit what was pre-committed for checkpoints up to
     * `restored_id` (the checkpoint being restored; 0 on a fresh start)
     * and abort everything newer or never pre-committed — lingering
     * transactions of an earlier run, never anything of this one. */
    int (*recover)(void *ctx, int64_t restored_id, char *err, size_t errlen);
    /* Optional: state of the writer in checkpoint `id` (Flink's sink
     * writer state), written through put right after pre_commit — e.g.
     * what a sink must re-send if the commit of `id` is lost.  restore gets
     * the union over every subtask of the restored checkpoint (for each, a
     * u32 little-endian length and the bytes), right after open, so a
     * restore may change the parallelism; each writer takes its share. */
    int (*snapshot)(void *writer, int64_t id, void (*put)(void *put_ctx, const void *p, size_t n), void *put_ctx);
    int (*restore)(void *writer, const void *state, size_t len, char *err, size_t errlen);
} sl_sink_ops_t;

typedef struct sl_sink {
    const sl_sink_ops_t *ops;
    void *ctx;
} sl_sink_t;

/* ---- streams ---------------------------------------------------------- */

SL_API sl_stream_t *sl_from_source(sl_env_t *env, sl_source_t src, sl_watermark_strategy_t ws,
                                   const char *name);
SL_API const sl_schema_t *sl_stream_schema(const sl_stream_t *s);

/* Operator settings; each returns its argument so calls can be chained. */
SL_API sl_stream_t *sl_uid(sl_stream_t *s, const char *uid);
SL_API sl_stream_t *sl_name(sl_stream_t *s, const char *name);
SL_API sl_stream_t *sl_parallelism(sl_stream_t *s, int p);
/* Starts a new chain at this operator. */
SL_API sl_stream_t *sl_start_new_chain(sl_stream_t *s);
/* Puts the operator into a slot sharing group (Flink's slotSharingGroup):
 * one slot runs one parallel slice of every operator of a group; operators
 * of different groups never share a slot (nor a chain), so a job with
 * groups "source", "window" and "sinks" needs a slot from each, which the
 * scheduler may place on different TaskManagers.  An operator without a
 * group takes its inputs' group when they all have the same one, else
 * "default".  Builder thread. */
SL_API sl_stream_t *sl_slot_sharing_group(sl_stream_t *s, const char *group);

typedef struct sl_fn_opts {
    void *ctx;
    sl_ctx_clone_fn ctx_clone;
    sl_ctx_free_fn ctx_free;
    /* With ctx_clone NULL and ctx_size > 0, each subtask gets its own copy
     * of the ctx_size bytes at ctx (a shallow copy, freed by the engine
     * after close); SL_FN_COPY sets both. */
    size_t ctx_size;
} sl_fn_opts_t;

/* Options whose context is copied for every subtask:
 * sl_map_ex(s, fn, SL_FN_COPY(&counter), schema). */
#define SL_FN_COPY(p) ((sl_fn_opts_t){.ctx = (p), .ctx_size = sizeof *(p)})

/* map: fill exactly one output row of out_schema.  Return 0, or < 0 to
 * fail the task. */
typedef int (*sl_map_fn)(void *ctx, const sl_record_t *in, sl_row_writer_t *out);
/* filter: 1 keeps, 0 drops, < 0 fails. */
typedef int (*sl_filter_fn)(void *ctx, const sl_record_t *in);
/* flat_map: emit any number of rows through the collector. */
typedef int (*sl_flat_map_fn)(void *ctx, const sl_record_t *in, sl_collector_t *out);

SL_API sl_stream_t *sl_map(sl_stream_t *s, sl_map_fn fn, void *ctx, sl_schema_t *out_schema);
SL_API sl_stream_t *sl_filter(sl_stream_t *s, sl_filter_fn fn, void *ctx);
SL_API sl_stream_t *sl_flat_map(sl_stream_t *s, sl_flat_map_fn fn, void *ctx, sl_schema_t *out_schema);
/* Same, with a per-subtask context (clone/free). */
SL_API sl_stream_t *sl_map_ex(sl_stream_t *s, sl_map_fn fn, sl_fn_opts_t o, sl_schema_t *out_schema);
SL_API sl_stream_t *sl_filter_ex(sl_stream_t *s, sl_filter_fn fn, sl_fn_opts_t o);
SL_API sl_stream_t *sl_flat_map_ex(sl_stream_t *s, sl_flat_map_fn fn, sl_fn_opts_t o,
                                   sl_schema_t *out_schema);

/* Assigns timestamps and generates watermarks downstream of a source. */
SL_API sl_stream_t *sl_assign_timestamps(sl_stream_t *s, sl_watermark_strategy_t ws);

/* Partitioning. */
SL_API sl_stream_t *sl_rebalance(sl_stream_t *s);
SL_API sl_stream_t *sl_rescale(sl_stream_t *s);
SL_API sl_stream_t *sl_broadcast(sl_stream_t *s);
SL_API sl_stream_t *sl_forward(sl_stream_t *s);
/* Unites streams of equal schema. */
SL_API sl_stream_t *sl_union(sl_stream_t *a, sl_stream_t *b);

/* Side outputs: declare a tag with its schema on the environment, emit to
 * it from a process function or window (late data), then select it from
 * the producing operator's stream. */
SL_API int sl_output_tag(sl_env_t *env, const char *tag, sl_schema_t *schema);
SL_API sl_stream_t *sl_side_output(sl_stream_t *s, const char *tag);

/* Sinks.  The stream handle returned is the sink's, for uid/name/parallelism. */
SL_API sl_stream_t *sl_sink_to(sl_stream_t *s, sl_sink_t sink, const char *name);

/* ---- collectors and timers (inside functions) -------------------------- */

/* Writer for the next output row (of the operator's output schema); then
 * sl_emit.  sl_emit_side emits to a side output declared with
 * sl_output_tag; the writer must be begun with that tag's schema first via
 * sl_side_row. */
SL_API sl_row_writer_t *sl_out_row(sl_collector_t *c);
SL_API void sl_emit(sl_collector_t *c);
SL_API sl_row_writer_t *sl_side_row(sl_collector_t *c, const char *tag);
SL_API void sl_emit_side(sl_collector_t *c, const char *tag);
/* Overrides the timestamp of the next emitted record (default: input's). */
SL_API void sl_out_set_timestamp(sl_collector_t *c, int64_t ts);

/* ---- keyed streams and keyed state ------------------------------------ */

/* Key selector: write the key bytes for the row into key (cap bytes);
 * return the length, or < 0 on error. */
typedef int (*sl_key_fn)(void *ctx, const sl_row_t *row, uint8_t *key, int cap);

SL_API sl_keyed_t *sl_key_by(sl_stream_t *s, const char *field);
SL_API sl_keyed_t *sl_key_by_fn(sl_stream_t *s, sl_key_fn fn, void *ctx);
/* A key of several fields, named in a comma-separated list
 * ("card_id, merchant"): rows with equal values in all of them (NULL equal
 * to NULL) have the same key.  The key bytes that functions see
 * (sl_pctx_key, window results) encode the fields in order; the built-in
 * window aggregates (sl_window_agg) write them back as columns.  Unknown or
 * repeated fields are reported when the job is built. */
SL_API sl_keyed_t *sl_key_by_fields(sl_stream_t *s, const char *fields);

/* Typed field handles (row.h), resolved by name when the job is built: an
 * unknown field (with a "did you mean") or a field of another type is
 * recorded on env and the job refused; the handle is then invalid.  i64:
 * BIGINT or TIMESTAMP; str: VARCHAR or BYTES.  Builder thread. */
SL_API sl_field_i64_t sl_field_i64(sl_env_t *env, const sl_schema_t *schema, const char *name);
SL_API sl_field_i32_t sl_field_i32(sl_env_t *env, const sl_schema_t *schema, const char *name);
SL_API sl_field_f64_t sl_field_f64(sl_env_t *env, const sl_schema_t *schema, const char *name);
SL_API sl_field_bool_t sl_field_bool(sl_env_t *env, const sl_schema_t *schema, const char *name);
SL_API sl_field_str_t sl_field_str(sl_env_t *env, const sl_schema_t *schema, const char *name);

typedef struct sl_state sl_state_t;
typedef enum { SL_TIME_EVENT = 0, SL_TIME_PROCESSING = 1 } sl_time_domain_t;

/* Keyed state, declared in open() of a keyed function; access is scoped to
 * the key of the record or timer being processed.
 *
 * value: one byte string per key.  list: appendable list of byte strings.
 * map: user-key → value.  reducing / aggregating: a fixed-size accumulator
 * of acc_size bytes folded by the given function.
 *
 * Pointers that reads return (sl_value_get, sl_map_get, sl_fold_get) and
 * that foreach callbacks receive stay valid until the next call on the same
 * state (for any key) and never beyond the current process / on_timer
 * call: copy what you keep.  A foreach callback must not call functions of
 * the state it iterates. */
typedef void (*sl_reduce_bytes_fn)(void *ctx, void *acc, const void *value);
SL_API sl_state_t *sl_state_value(sl_rt_t *rt, const char *name);
SL_API sl_state_t *sl_state_list(sl_rt_t *rt, const char *name);
SL_API sl_state_t *sl_state_map(sl_rt_t *rt, const char *name);
SL_API sl_state_t *sl_state_reducing(sl_rt_t *rt, const char *name, uint32_t size,
                                     sl_reduce_bytes_fn fn, void *ctx);
SL_API sl_state_t *sl_state_aggregating(sl_rt_t *rt, const char *name, uint32_t acc_size,
                                        void (*init)(void *ctx, void *acc),
                                        sl_reduce_bytes_fn add, void *ctx);

/* Typed keyed state and its evolution (Flink's state with a POJO or Avro
 * schema).  Declares, when the job is built, that keyed state `state` of
 * the keyed operator that returned `op` (sl_keyed_process, sl_co_process
 * on keyed inputs) holds rows of `schema`: the values of a value state,
 * the elements of a list state, the values of a map state (map keys stay
 * bytes).  Checkpoints and savepoints record the schema.  A restore from
 * one whose state had another schema migrates every value when the change
 * is compatible — fields are matched by name: a field added must be
 * nullable and starts NULL, a field removed is dropped, INT widens to
 * BIGINT or DOUBLE, BIGINT to DOUBLE, VARCHAR and BYTES convert, NOT NULL
 * may become nullable — and refuses the job before it starts otherwise,
 * naming the operator, the state, the field and both types.  Writing a
 * value that is not a row of the schema fails the task, naming the state.
 * A typed state is a value, list or map state (another kind is reported
 * when it is declared in open), with or without a TTL (sl_state_value_ttl
 * and the others below: the rows expire as bytes do, and a migration keeps
 * each row's TTL timestamp).  Builder thread; returns op. */
SL_API sl_stream_t *sl_keyed_state_schema(sl_stream_t *op, const char *state, const sl_schema_t *schema);
/* A typed state's schema (NULL: a state of bytes): build its rows with it. */
SL_API const sl_schema_t *sl_state_schema(sl_state_t *st);
/* A typed value state's row; false when absent (or the state is not
 * typed).  The row's bytes are valid as sl_value_get's are. */
SL_API bool sl_value_get_row(sl_state_t *st, sl_row_t *out);
/* Writes a row of the state's schema (another schema fails the task). */
SL_API int sl_value_put_row(sl_state_t *st, const sl_row_t *row);

/* State time-to-live (Flink's StateTtlConfig; processing time).  A state
 * declared with a TTL forgets each value, list element and map entry ttl_ms
 * after it was last written (OnCreateAndWrite) or last read or written
 * (OnReadAndWrite): reads never see it again — get returns NULL, foreach
 * skips it, a reducing/aggregating state starts a new accumulator — and it
 * is removed from the state
 *   - when a read meets it;
 *   - by incremental cleanup (Flink's cleanupIncrementally): every access of
 *     the state also examines cleanup_size more of its keys, and with
 *     cleanup_every_record so does every record the operator processes; the
 *     examination walks every key in turn, so the state of keys that never
 *     come back goes away too (heap state backend);
 *   - from checkpoints: what has expired when a checkpoint is taken is left
 *     out of it (Flink's cleanupFullSnapshot; always on).
 * Time is the job's processing time (sl_env_set_clock).  Timestamps are
 * stored with the state, so state restored from a checkpoint expires when
 * it would have without the restore.  TTL may be turned on or off for a
 * state that a checkpoint or savepoint holds (as in Flink 2.2): when open
 * declares the restored state with the other setting, its values, list
 * elements and map values (typed rows too) are migrated before open
 * returns — turned on, each gets the processing time of that moment as
 * its last access, so it expires ttl_ms after the restore; turned off,
 * its timestamp is dropped and it never expires.  A changed ttl_ms needs
 * no migration: the stored timestamp is the last access, the duration
 * applies from then.  (Checkpoints written before sluice recorded whether
 * a state's items carry a timestamp restore as before: the declaration
 * decides, except for typed states, whose recorded TTL does.)
 *
 * Zero fields are Flink's defaults: sl_state_ttl(ms) is
 * (sl_state_ttl_t){.ttl_ms = ms}; set other fields as needed. */
typedef enum sl_ttl_update_type {
    SL_TTL_UPDATE_ON_CREATE_AND_WRITE = 0, /* OnCreateAndWrite (default) */
    SL_TTL_UPDATE_ON_READ_AND_WRITE = 1    /* OnReadAndWrite: a read refreshes what it returns */
} sl_ttl_update_type_t;
typedef enum sl_ttl_visibility {
    SL_TTL_NEVER_RETURN_EXPIRED = 0,            /* NeverReturnExpired (default) */
    SL_TTL_RETURN_EXPIRED_IF_NOT_CLEANED_UP = 1 /* a read returns an expired item not removed yet (once:
                                                 * it is removed then) */
} sl_ttl_visibility_t;
typedef struct sl_state_ttl {
    int64_t ttl_ms;                   /* > 0 */
    sl_ttl_update_type_t update_type;
    sl_ttl_visibility_t visibility;
    int cleanup_size;                 /* keys examined per access: 0 = 5 (Flink's default), < 0 = none */
    bool cleanup_every_record;        /* also cleanup_size keys per record the operator processes
                                       * (Flink's runCleanupForEveryRecord) */
} sl_state_ttl_t;
SL_API sl_state_ttl_t sl_state_ttl(int64_t ttl_ms);
/* The declarations above with a TTL.  A bad TTL (ttl_ms <= 0, an unknown
 * enum value) or a name declared before with another kind or TTL fails the
 * task (NULL). */
SL_API sl_state_t *sl_state_value_ttl(sl_rt_t *rt, const char *name, sl_state_ttl_t ttl);
SL_API sl_state_t *sl_state_list_ttl(sl_rt_t *rt, const char *name, sl_state_ttl_t ttl);
SL_API sl_state_t *sl_state_map_ttl(sl_rt_t *rt, const char *name, sl_state_ttl_t ttl);
SL_API sl_state_t *sl_state_reducing_ttl(sl_rt_t *rt, const char *name, uint32_t size, sl_reduce_bytes_fn fn,
                                         void *ctx, sl_state_ttl_t ttl);
SL_API sl_state_t *sl_state_aggregating_ttl(sl_rt_t *rt, const char *name, uint32_t acc_size,
                                            void (*init)(void *ctx, void *acc), sl_reduce_bytes_fn add,
                                            void *ctx, sl_state_ttl_t ttl);

/* value */
SL_API const void *sl_value_get(sl_state_t *st, uint32_t *len);          /* NULL: absent */
SL_API int sl_value_put(sl_state_t *st, const void *v, uint32_t len);
SL_API void sl_state_clear(sl_state_t *st);                              /* any kind */
/* list */
SL_API int sl_list_add(sl_state_t *st, const void *v, uint32_t len);
/* Iterates the list: returns the number of elements; fn may be NULL. */
SL_API int sl_list_foreach(sl_state_t *st, void (*fn)(void *c, const void *v, uint32_t len), void *c);
/* map */
SL_API const void *sl_map_get(sl_state_t *st, const void *k, uint32_t klen, uint32_t *vlen);
SL_API int sl_map_put(sl_state_t *st, const void *k, uint32_t klen, const void *v, uint32_t vlen);
SL_API int sl_map_remove(sl_state_t *st, const void *k, uint32_t klen);
SL_API int sl_map_foreach(sl_state_t *st,
                          void (*fn)(void *c, const void *k, uint32_t kl, const void *v, uint32_t vl),
                          void *c);
/* reducing / aggregating */
SL_API int sl_fold_add(sl_state_t *st, const void *value);
SL_API const void *sl_fold_get(sl_state_t *st);                          /* NULL: empty */

/* Process-function context: current key, time, timers. */
SL_API const uint8_t *sl_pctx_key(sl_pctx_t *pc, uint32_t *len);
SL_API int64_t sl_pctx_timestamp(sl_pctx_t *pc);       /* record or timer time */
SL_API int64_t sl_pctx_watermark(sl_pctx_t *pc);       /* current watermark */
SL_API int64_t sl_pctx_now(sl_pctx_t *pc);             /* processing time */
SL_API void sl_timer_event(sl_pctx_t *pc, int64_t ts);
SL_API void sl_timer_processing(sl_pctx_t *pc, int64_t ts);
SL_API void sl_timer_delete_event(sl_pctx_t *pc, int64_t ts);
SL_API void sl_timer_delete_processing(sl_pctx_t *pc, int64_t ts);
SL_API int sl_rt_subtask(sl_rt_t *rt);
SL_API int sl_rt_parallelism(sl_rt_t *rt);

/* KeyedProcessFunction. */
typedef struct sl_process_fn {
    int (*open)(void *ctx, sl_rt_t *rt);
    int (*process)(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out);
    int (*on_timer)(void *ctx, sl_pctx_t *pc, int64_t ts, sl_time_domain_t domain, sl_collector_t *out);
    void (*close)(void *ctx);
    sl_fn_opts_t opts;
} sl_process_fn_t;

SL_API sl_stream_t *sl_keyed_process(sl_keyed_t *k, sl_process_fn_t fn, sl_schema_t *out_schema);

/* Two inputs: connect(a, b) then process.  When both are keyed the
 * function has keyed state and timers; process1/process2 get each side. */
typedef struct sl_co_process_fn {
    int (*open)(void *ctx, sl_rt_t *rt);
    int (*process1)(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out);
    int (*process2)(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out);
    int (*on_timer)(void *ctx, sl_pctx_t *pc, int64_t ts, sl_time_domain_t domain, sl_collector_t *out);
    void (*close)(void *ctx);
    sl_fn_opts_t opts;
} sl_co_process_fn_t;

SL_API sl_connected_t *sl_connect(sl_stream_t *a, sl_stream_t *b);
SL_API sl_connected_t *sl_connect_keyed(sl_keyed_t *a, sl_keyed_t *b);
SL_API sl_stream_t *sl_co_process(sl_connected_t *c, sl_co_process_fn_t fn, sl_schema_t *out_schema);

/* ---- windows ---------------------------------------------------------- */

typedef struct sl_window {
    int64_t start;
    int64_t end; /* exclusive; max timestamp = end - 1 */
} sl_window_t;

typedef struct sl_window_assigner sl_window_assigner_t;
typedef struct sl_trigger sl_trigger_t;
typedef struct sl_evictor sl_evictor_t;

SL_API sl_window_assigner_t *sl_tumbling_event_time(int64_t size_ms, int64_t offset_ms);
SL_API sl_window_assigner_t *sl_sliding_event_time(int64_t size_ms, int64_t slide_ms, int64_t offset_ms);
SL_API sl_window_assigner_t *sl_session_event_time(int64_t gap_ms);
SL_API sl_window_assigner_t *sl_tumbling_processing_time(int64_t size_ms, int64_t offset_ms);
SL_API sl_window_assigner_t *sl_sliding_processing_time(int64_t size_ms, int64_t slide_ms, int64_t offset_ms);
SL_API sl_window_assigner_t *sl_session_processing_time(int64_t gap_ms);

SL_API sl_trigger_t *sl_trigger_event_time(void);
SL_API sl_trigger_t *sl_trigger_processing_time(void);
SL_API sl_trigger_t *sl_trigger_count(int64_t n);
SL_API sl_trigger_t *sl_trigger_purging(sl_trigger_t *inner); /* takes ownership of inner */

SL_API sl_evictor_t *sl_evictor_count(int64_t n, bool after);
SL_API sl_evictor_t *sl_evictor_time(int64_t keep_ms, bool after);

/* The windowed stream takes ownership of the assigner/trigger/evictor. */
SL_API sl_windowed_t *sl_window(sl_keyed_t *k, sl_window_assigner_t *a);
SL_API sl_windowed_t *sl_window_trigger(sl_windowed_t *w, sl_trigger_t *t);
SL_API sl_windowed_t *sl_window_evictor(sl_windowed_t *w, sl_evictor_t *e);
SL_API sl_windowed_t *sl_window_allowed_lateness(sl_windowed_t *w, int64_t ms);
/* Late records (input schema) go to this side-output tag instead of being
 * dropped; the tag is declared automatically with the input schema. */
SL_API sl_windowed_t *sl_window_late_output(sl_windowed_t *w, const char *tag);

/* reduce: fold `in` into `acc` (both rows of the input schema); write the
 * folded row into out.  The first element of a window is the initial acc. */
typedef int (*sl_reduce_fn)(void *ctx, const sl_row_t *acc, const sl_row_t *in, sl_row_writer_t *out);
SL_API sl_stream_t *sl_window_reduce(sl_windowed_t *w, sl_reduce_fn fn, void *ctx);
/* reduce with the window's metadata (Flink's reduce(ReduceFunction,
 * ProcessWindowFunction)): when the window fires, result turns the reduced
 * row, the key and the window into a row of out_schema (taken over). */
typedef int (*sl_reduce_result_fn)(void *ctx, const sl_row_t *reduced, const uint8_t *key, uint32_t keylen,
                                   const sl_window_t *win, sl_row_writer_t *out);
SL_API sl_stream_t *sl_window_reduce_with(sl_windowed_t *w, sl_reduce_fn fn, sl_reduce_result_fn result, void *ctx,
                                          sl_schema_t *out_schema);

/* AggregateFunction over a fixed-size accumulator (acc_size bytes). */
typedef struct sl_aggregate_fn {
    uint32_t acc_size;
    void (*init)(void *ctx, void *acc);
    int (*add)(void *ctx, void *acc, const sl_record_t *in);
    /* Folds `other` into acc.  Needed for session windows; with it, sliding
     * event-time windows are sliced: a record updates one pane of
     * gcd(size, slide) instead of size / slide windows, and a firing merges
     * the window's panes (Flink SQL's slicing). */
    void (*merge)(void *ctx, void *acc, const void *other);
    /* Writes the result row; key and window describe what fired. */
    int (*result)(void *ctx, const void *acc, const uint8_t *key, uint32_t keylen,
                  const sl_window_t *win, sl_row_writer_t *out);
    void *ctx;
} sl_aggregate_fn_t;
SL_API sl_stream_t *sl_window_aggregate(sl_windowed_t *w, sl_aggregate_fn_t fn, sl_schema_t *out_schema);

/* Built-in aggregates, as SQL has them: aggs is a comma-separated list of
 * count(*), count(f), sum(f), min(f), max(f), avg(f), each optionally
 * "AS name" (default: count, count_f, sum_f, ...).  The output rows are the
 * key's fields (keys by sl_key_by / sl_key_by_fields; none for a key
 * function), window_start and window_end (TIMESTAMP NOT NULL), then one
 * column per aggregate: count BIGINT NOT NULL; sum of an INT/BIGINT field
 * BIGINT, of a DOUBLE DOUBLE; min/max of the field's type (INT, BIGINT,
 * DOUBLE, TIMESTAMP); avg DOUBLE.  NULL inputs are skipped; sum/min/max/avg
 * over no non-NULL input are NULL.  The accumulators merge, so sliding
 * event-time windows are sliced and session windows work.  A bad list (an
 * unknown function or field, a type that cannot be summed) is reported
 * with its position when the job is built. */
SL_API sl_stream_t *sl_window_agg(sl_windowed_t *w, const char *aggs);

/* ProcessWindowFunction: sees every element of the window. */
typedef struct sl_window_elements sl_window_elements_t;
SL_API int sl_window_elements_count(const sl_window_elements_t *e);
SL_API sl_record_t sl_window_elements_get(const sl_window_elements_t *e, int i);
typedef int (*sl_window_process_fn)(void *ctx, const uint8_t *key, uint32_t keylen, const sl_window_t *win,
                                    const sl_window_elements_t *elems, sl_collector_t *out);
SL_API sl_stream_t *sl_window_process(sl_windowed_t *w, sl_window_process_fn fn, void *ctx,
                                      sl_schema_t *out_schema);

/* ---- built-in connectors ---------------------------------------------- */

/* Card transactions of scenario S1: {card_id BIGINT, amount DOUBLE,
 * ts TIMESTAMP(3)}.  Deterministic for a seed. */
typedef struct sl_datagen_opts {
    uint64_t seed;
    int64_t count;            /* total events over all splits; -1 unbounded */
    int64_t cards;            /* distinct card ids */
    int splits;               /* total splits, spread over subtasks */
    double rate;              /* events/s over all splits; 0 = unlimited */
    int64_t start_ts;         /* event time of the first event */
    double ts_step_ms;        /* event-time step per event per split (may be fractional) */
    int64_t max_disorder_ms;  /* events out of order within this bound */
    double late_fraction;     /* share of events far behind (late) */
    int64_t late_by_ms;       /* how far behind a late event is */
} sl_datagen_opts_t;
SL_API sl_datagen_opts_t sl_datagen_defaults(void);
SL_API sl_source_t sl_datagen_source(sl_datagen_opts_t opts);
SL_API sl_schema_t *sl_datagen_schema(void);

typedef enum { SL_FMT_JSON = 0, SL_FMT_CSV = 1 } sl_format_t;
typedef enum { SL_ON_ERROR_FAIL = 0, SL_ON_ERROR_SKIP = 1 } sl_error_policy_t;

/* Reads one or more files (comma-separated paths), one split per file. */
SL_API sl_source_t sl_file_source(const char *paths, sl_format_t fmt, sl_schema_t *schema,
                                  sl_error_policy_t policy);
/* Writes path (parallelism 1) or path.<subtask> files. */
SL_API sl_sink_t sl_file_sink(const char *path, sl_format_t fmt);
/* Exactly-once file sink (two-phase commit on checkpoints): writes into
 * hidden in-progress files in dir; on a checkpoint's barrier the file
 * becomes a hidden pending file; when the checkpoint completes it is
 * renamed to dir/part-<subtask>-<checkpoint>.  At the end of a bounded
 * input the rest goes into the final checkpoint's part file (the engine
 * takes one after the end of input, FLIP-147); without checkpointing it is
 * committed as dir/part-<subtask>-end.  The directory never shows a
 * partial or duplicate part file. */
SL_API sl_sink_t sl_exactly_once_file_sink(const char *dir, sl_format_t fmt);
/* Prints rows to stdout, prefixed with `prefix` (may be NULL). */
SL_API sl_sink_t sl_print_sink(const char *prefix);
/* Counts records (and, if latency is on, event-creation-to-sink latency). */
typedef struct sl_counting_sink_stats sl_counting_sink_stats_t;
SL_API sl_sink_t sl_counting_sink(sl_counting_sink_stats_t **stats_out);
SL_API int64_t sl_counting_sink_count(const sl_counting_sink_stats_t *s);
/* Releases the caller's reference to the statistics that stats_out gave
 * (the sink holds its own until the environment is destroyed). */
SL_API void sl_counting_sink_stats_free(sl_counting_sink_stats_t *s);

#ifdef __cplusplus
}
#endif
#endif
