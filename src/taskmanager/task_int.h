/*
 * task_int.h — the task's insides, shared by task.c (the loop, the chain's
 * outputs, the input gates) and executor.c (which builds tasks).
 */
#ifndef SL_TASK_INT_H
#define SL_TASK_INT_H

#include "taskmanager/barrier_handler.h"
#include "taskmanager/channel.h"
#include "taskmanager/mailbox.h"
#include "taskmanager/record_writer.h"
#include "taskmanager/task.h"
#include "taskmanager/watermark_valve.h"

/* Where one operator's output goes, per tag: chained operators (direct
 * calls) and record writers (to other tasks). */
typedef struct sl_chain_target {
    sl_operator_t *op;
    int input;
} sl_chain_target_t;

typedef struct sl_tag_route {
    sl_chain_target_t *ops;
    int nops;
    sl_record_writer_t **w;
    int nw;
} sl_tag_route_t;

typedef struct sl_chain_out {
    sl_op_output_t base;
    sl_task_t *task;
    sl_tag_route_t *tags; /* indexed by tag id */
    int ntags;
    int64_t out_wm;       /* the last watermark the operator emitted (INT64_MIN: none) */
} sl_chain_out_t;

/*
 * Live metrics (Flink's task and operator metrics): the task thread counts
 * in its own plain variables and publishes copies here once per loop turn
 * (sl_task_publish_metrics) with relaxed atomic stores; the deployment's
 * metrics reporter reads them from another thread with relaxed loads.
 * Every value is monotone or a level on its own; a report is not a
 * consistent cut across values (as in Flink).  No per-record atomics.
 */
typedef struct sl_op_pub {
    atomic_llong records_in, records_out, records_skipped;
    atomic_llong in_wm, out_wm;  /* combined input / last output watermark */
    atomic_llong late_dropped;   /* window operators: late records dropped */
    atomic_llong pending;        /* sources: pendingRecords (-1: unknown) */
    /* keyed operators: stateMemoryBytes (-1: no keyed state) and, on
     * RocksDB, its native metrics (-1 otherwise; sl_kb_memory_t) */
    atomic_llong state_mem;
    atomic_llong rdb_mem_tables, rdb_table_readers, rdb_block_cache, rdb_live_data;
} sl_op_pub_t;

typedef struct sl_task_pub {
    atomic_llong start_ns;       /* when the task thread started (0: not yet) */
    atomic_llong time_ns;        /* when the figures below were published */
    atomic_llong busy_ns, idle_ns, backpressured_ns; /* since the task started */
    atomic_llong bytes_in, bytes_out;                /* buffers read from its inputs / handed to its outputs */
    sl_op_pub_t *ops;            /* per chained operator (allocated with the task) */
} sl_task_pub_t;

/* Consuming end of one logical input of the head operator (Flink's
 * InputGate): its channels and their watermark valve. */
typedef struct sl_input_gate {
    sl_task_t *task;
    int input;
    sl_channel_t **ch;
    bool *ended;
    int nch;
    int nended;
    bool *data_done;             /* end of data (or the end) seen on the channel */
    int ndone;
    const sl_schema_t *schema;
    sl_valve_t valve;
    int first;                   /* global index of ch[0] in the task's barrier handler */
    sl_nbuf_t **held;            /* a buffer whose rest waits behind a barrier (aligned) */
    uint32_t *held_off;
} sl_input_gate_t;

struct sl_task {
    char name[300];
    int vertex, subtask, parallelism;
    sl_deployment_t *dep;        /* the deployment the task belongs to (its TaskManager side) */
    pthread_t thread;
    bool started;
    bool is_source;
    sl_operator_t **ops;
    int nops;
    sl_chain_out_t *outs;        /* one per op */
    sl_input_gate_t gates[2];
    int ngates;
    sl_record_writer_t **writers;
    int nwriters;
    sl_waker_t waker;
    sl_mailbox_t mailbox;
    atomic_bool cancel;       /* also set directly: a producer blocked on a full channel reads no mail */
    int64_t *wake;               /* per op: processing-time wake-up */
    sl_clock_fn clock;
    void *clock_ctx;
    /* outcome (written by the task thread, read after join) */
    int rc;
    char err[1024];
    bool failed;
    bool finished;
    /* checkpoints */
    int index;                   /* among all tasks of the job (the plan's numbering) */
    int local_index;             /* among the tasks of its deployment */
    sl_barrier_handler_t bh;     /* over every input channel of every gate */
    int64_t checkpoints;         /* snapshots taken */
    /* unaligned checkpoints: the snapshot taken at the first barrier waits
     * here for the in-flight data of the channels whose barrier is still
     * to come (incap, by global channel index) */
    struct sl_ckpt_task_snap *pending;
    sl_buf_t *incap;
    int nincap;
    /* restore: in-flight data to run before reading the channels */
    struct sl_replay *replay;
    int nreplay;
    bool replaying;
    int64_t max_sync_ns;         /* longest synchronous phase */
    /* stop-with-savepoint: after the snapshot of savepoint sync_id the task
     * processes nothing more (no input, no timers, a source polls no more)
     * and waits for its completion; then it ends without ending its input
     * (stopped).  An abort of sync_id resumes it.  0: none. */
    int64_t sync_id;
    bool stopped;
    /* the final checkpoint (FLIP-147, with checkpointing on): when its input
     * ended, the task ends its chain's input and sends end of data, then
     * goes on taking checkpoints; the first it took after that (final_id)
     * completing (final_done) lets it send the end and finish */
    bool final_mode;
    /* the buffer timeout (plan cfg.buffer_timeout_ms, -1: none): a busy task
     * flushes its partly filled output buffers when the last flush is this
     * old (monotonic ns) */
    int64_t buffer_timeout_ns, last_flush_ns;
    bool data_ended;
    int64_t final_id;
    bool final_done;
    /* the newest trigger this task saw while it could not act on it (not a
     * source, inputs still open), and the newest snapshot it took: when its
     * inputs then end without that checkpoint's barrier (every predecessor
     * finished before injecting it), the task takes it itself */
    int64_t late_id, late_ts, last_snap_id;
    int late_kind;
    /* metrics */
    int64_t busy_ns, idle_ns;
      int64_t bytes_in;            /* numBytesIn: the bytes of the buffers it read */
    int64_t start_ns;            /* when the task thread started (sl_mono_ns) */
    sl_task_pub_t pub;           /* published copies (see sl_task_pub_t) */
    sl_op_context_t opctx;       /* what the task's operators see of it (sl_task_init_context) */
    int64_t state_mem_ns;        /* when RocksDB state memory was last read (rate-limited) */
};

/* Task thread: publishes the task's counters, times and watermarks to
 * t->pub (relaxed stores; called once per loop turn and at the end). */
void sl_task_publish_metrics(sl_task_t *t);
/* Any thread: t's cumulative busy / idle / back-pressured time as of
 * *at_ns.  A task blocked on a full output channel publishes nothing
 * while it waits; then the wait so far counts as back-pressured and the
 * figures are as of now. */
void sl_task_read_times(const sl_task_t *t, int64_t *at_ns, int64_t *busy, int64_t *idle, int64_t *bp);
/* Allocates / frees t->pub for t->nops operators (the builder's thread,
 * before the task starts / after it was joined). */
void sl_task_pub_init(sl_task_t *t);
void sl_task_pub_free(sl_task_t *t);

/* Fills t->opctx (the operator context, operators/operator_context.h)
 * from t->clock; before the task's operators are created. */
void sl_task_init_context(sl_task_t *t);

void *sl_task_main(void *arg);
void sl_task_cancel(sl_task_t *t);
/* Any thread: asks a source task to inject barrier `id` / tells a task that
 * checkpoint `id` completed or was aborted (mail). */
void sl_task_post_trigger(sl_task_t *t, int64_t id, int64_t ts, int kind);
void sl_task_post_complete(sl_task_t *t, int64_t id);
void sl_task_post_aborted(sl_task_t *t, int64_t id);
/* In-flight data of a restored unaligned checkpoint for channel `index`
 * of gate `gate`, run through the task before its live input. */
typedef struct sl_replay {
    int gate, index;
    sl_buf_t data;
} sl_replay_t;

/* In-flight data of an unaligned checkpoint, as stored in the "inflight"
 * blob of a task's head operator: a sequence of
 *   u8 kind (0: input captured by this task, 1: output it overtook)
 *   u32 uid length, uid of the consuming task's head operator,
 *   u32 consumer subtask, u32 gate, u32 channel index in the gate,
 *   u32 length, the buffer bytes (elements as in channel.h).
 * A restore runs, for each channel, the input entries before the output
 * entries (that is their order in the stream). */
enum { SL_INFLIGHT_INPUT = 0, SL_INFLIGHT_OUTPUT = 1 };
void sl_inflight_put(sl_buf_t *out, int kind, const char *uid, int subtask, int gate, int index, const void *data,
                     uint32_t len);

/* What one task hands to the executor's checkpoint writer: copies of its
 * operators' state blobs and, per keyed operator, the copy-on-write views
 * of its keyed state and timers (the asynchronous phase writes them). */
typedef struct sl_ckpt_task_snap {
    sl_task_t *task;
    int64_t id;
    int nops;
    sl_buf_t *blobs;                      /* per operator */
    struct sl_kb_snapshot **keyed;        /* per operator, or NULL */
    struct sl_timers_snapshot **timers;   /* per operator, or NULL */
    sl_kg_range_t *ranges;                /* per operator */
    sl_buf_t inflight;                    /* unaligned: in-flight data (sl_inflight_put) */
    sl_buf_t *times;                      /* per operator: event-time progress (sl_op_snapshot_time) */
    struct sl_native_snap **native;       /* per operator: RocksDB native snapshot (incremental), or NULL */
    bool unaligned;
    int kind;                             /* sl_snapshot_kind_t */
    int64_t sync_ns, align_ns;            /* synchronous phase; alignment (first to last barrier) */
} sl_ckpt_task_snap_t;

/* What a task tells its deployment (deployment.c, the TaskManager side of
 * the job); each may be called from the task's own thread only.
 *
 * The task took the synchronous part of its snapshot of checkpoint id: the
 * deployment's writer persists it to checkpoint storage and acknowledges
 * it to the JobManager with the state handles.  Takes ownership of snap;
 * dep NULL just frees it. */
void sl_deployment_task_snapshot(sl_deployment_t *dep, sl_ckpt_task_snap_t *snap);
/* The task reached its end: its operators' final state (e.g. a finished
 * source's position) stands for it in later checkpoints. */
void sl_deployment_task_final(sl_deployment_t *dep, sl_task_t *t);
/* The task failed (t->rc, t->err): the deployment cancels its other tasks
 * and reports the failure. */
void sl_deployment_task_failed(sl_deployment_t *dep, sl_task_t *t);
/* Incremental checkpoints and native savepoints (force): the native
 * snapshot of t's operator k, or *out = NULL when its state is written in
 * the canonical format (not RocksDB, or neither incremental nor forced). */
int sl_deployment_native_snapshot(sl_deployment_t *dep, sl_task_t *t, int k, bool force, struct sl_native_snap **out,
                                  char *err, size_t errlen);
/* The uid under which the head operator of a vertex keeps its state (from
 * the plan). */
void sl_deployment_head_uid(sl_deployment_t *dep, int vertex, char *buf, size_t cap);
/* A source task's input ended (with checkpointing): the JobManager may
 * start the final checkpoint. */
void sl_deployment_task_end_of_data(sl_deployment_t *dep, sl_task_t *t);
/* The task ended (finished or cancelled) and reports it. */
void sl_deployment_task_done(sl_deployment_t *dep, sl_task_t *t);

#endif
