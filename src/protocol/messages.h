/*
 * messages.h — the control plane between the JobManager and its
 * TaskManagers (Flink's JobMaster <-> TaskExecutor RPCs), as typed
 * messages.  Embedded mode passes them over an in-memory transport
 * (runtime/local.c), a cluster over TCP; both encode every message with
 * codec.c, so the embedded suite exercises the same bytes a cluster sends.
 *
 * Direction and meaning:
 *   TM -> JM  REGISTER      a TaskManager offers its slots
 *   JM -> TM  REGISTERED    accepted (or refused, with the reason)
 *   both      HEARTBEAT     liveness; a TaskManager's carries its slot report
 *   JM -> TM  DEPLOY        run these subtasks of this plan (attempt n)
 *   JM -> TM  CANCEL        cancel every subtask of the job's attempt
 *   TM -> JM  TASK_STATE    a subtask is running / finished / canceled / failed
 *   JM -> TM  TRIGGER       source subtasks: inject barrier `checkpoint_id` (of a
 *                           checkpoint or a savepoint, `kind`)
 *   TM -> JM  ACK           a subtask persisted its part of a checkpoint:
 *                           state handles (files it wrote itself) and small
 *                           inline blobs, never the state's bulk
 *   TM -> JM  DECLINE       it could not
 *   JM -> TM  COMPLETE      checkpoint complete (_metadata is durable)
 *   JM -> TM  ABORTED       checkpoint aborted
 *   TM -> JM  METRICS       live figures of the running subtasks of a job
 *                           attempt, cumulative (the JobManager turns
 *                           successive reports into rates)
 *   JM -> TM  STATE_QUERY   look up one key's keyed state in a running
 *                           subtask (answered by the task's own thread)
 *   TM -> JM  STATE_QUERY_RESULT  the answer: a status, and the key's
 *                           entries as one canonical keyed-state block
 *
 * Ownership: a message owns every string, array and buffer reachable from
 * it; sl_msg_free releases them (and not the sl_msg_t itself when it was
 * not allocated by sl_msg_new).  Strings are NUL-terminated UTF-8.
 */
#ifndef SL_PROTOCOL_MESSAGES_H
#define SL_PROTOCOL_MESSAGES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "checkpoint/metadata.h"
#include "common/common.h"

/* Bumped when a message changes in a way an older peer must not misread;
 * a frame of a newer version is refused by name. */
#define SL_PROTOCOL_VERSION 1u

typedef enum sl_msg_type {
    SL_MSG_REGISTER = 1,
    SL_MSG_REGISTERED = 2,
    SL_MSG_HEARTBEAT = 3,
    SL_MSG_DEPLOY = 4,
    SL_MSG_CANCEL = 5,
    SL_MSG_TASK_STATE = 6,
    SL_MSG_TRIGGER = 7,
    SL_MSG_ACK = 8,
    SL_MSG_DECLINE = 9,
    SL_MSG_COMPLETE = 10,
    SL_MSG_ABORTED = 11,
    SL_MSG_METRICS = 12,
    SL_MSG_STATE_QUERY = 13,
    SL_MSG_STATE_QUERY_RESULT = 14,
} sl_msg_type_t;
#define SL_MSG_TYPE_MAX 14

/* The name of a message type ("DEPLOY"), or "unknown". */
const char *sl_msg_type_name(int type);

typedef enum sl_task_state {
    SL_TASK_DEPLOYING = 0,
    SL_TASK_RUNNING = 1,
    SL_TASK_FINISHED = 2,
    SL_TASK_CANCELED = 3,
    SL_TASK_FAILED = 4,
} sl_task_state_t;

const char *sl_task_state_name(int state);

/* A subtask: vertex of the plan and subtask index; `index` is its place in
 * the job's task numbering (vertex-major, as plan.h defines). */
typedef struct sl_msg_task_ref {
    int32_t vertex, subtask, index;
} sl_msg_task_ref_t;

/* One operator's part of a subtask's snapshot or final state: its uid and
 * the metadata entry the JobManager puts into _metadata as it is
 * (handles to files the TaskManager wrote, inline blobs). */
typedef struct sl_msg_op_state {
    char *uid;
    sl_ckpt_subtask_t st;        /* st.index = subtask index */
} sl_msg_op_state_t;

/* Per-operator counters a terminal TASK_STATE reports (and METRICS, with
 * the watermarks and late records too). */
typedef struct sl_msg_op_metrics {
    int32_t node;                /* plan node id */
    int64_t records_in, records_out, records_skipped;
    int64_t in_watermark, out_watermark; /* METRICS: current input / output watermark (ms; INT64_MIN: none) */
    int64_t late_dropped;        /* METRICS: late records a window operator dropped */
    int64_t pending_records;     /* METRICS: a source's pendingRecords (-1: unknown; TASK_STATE: -1) */
    /* METRICS: a keyed operator's stateMemoryBytes, and its RocksDB native
     * metrics (rocksdb.cur-size-all-mem-tables, .estimate-table-readers-mem,
     * .block-cache-usage, .estimate-live-data-size); -1: none (no keyed
     * state / not RocksDB / not read yet) */
    int64_t state_memory_bytes;
    int64_t rdb_mem_tables, rdb_table_readers, rdb_block_cache, rdb_live_data;
} sl_msg_op_metrics_t;

typedef struct sl_msg_register {
    char *tm_id;                 /* e.g. "tm-2" (unique in the cluster) */
    char *host;                  /* address other TaskManagers reach its data port at */
    int32_t data_port;
    int32_t slots;
    int64_t pid;
} sl_msg_register_t;

typedef struct sl_msg_registered {
    bool accepted;
    char *reason;                /* when refused */
    char *jm_id;
} sl_msg_registered_t;

typedef struct sl_msg_heartbeat {
    char *sender;                /* tm id or "jobmanager" */
    int64_t seq;
    int32_t slots_total, slots_free; /* TaskManager's slot report */
    /* a TaskManager's process figures (0 from the JobManager) */
    int64_t rss_bytes;           /* resident set size */
    int64_t cpu_ns;              /* CPU time used (user + system) since the process started */
    int32_t threads;
} sl_msg_heartbeat_t;

/* Where another TaskManager's data port is, for the channels of a
 * deployment that cross processes. */
typedef struct sl_msg_peer {
    char *tm_id;
    char *host;
    int32_t data_port;
} sl_msg_peer_t;

typedef struct sl_msg_placement {
    sl_msg_task_ref_t task;
    int32_t peer;                /* index into peers; -1: the receiving TaskManager itself */
} sl_msg_placement_t;

typedef struct sl_msg_deploy {
    char *job_id;
    int32_t attempt;             /* 0 for the first run, +1 per restart */
    char *artifact;              /* what builds the job: a built-in name or a stored artifact */
    int32_t nargs;
    char **args;                 /* the job's arguments (the TaskManager rebuilds the plan) */
    uint64_t plan_fingerprint;   /* the JobManager's plan; the rebuilt one must match */
    sl_buf_t plan;               /* the encoded plan (plan.h) */
    char *restore_path;          /* chk-<n> directory to restore from, or "" */
    int64_t restore_checkpoint;  /* its id, or 0 */
    int32_t ntasks;
    sl_msg_task_ref_t *tasks;    /* the subtasks this TaskManager runs */
    int32_t nplacements;
    sl_msg_placement_t *placements; /* every subtask of the job and where it runs */
    int32_t npeers;
    sl_msg_peer_t *peers;
} sl_msg_deploy_t;

typedef struct sl_msg_cancel {
    char *job_id;
    int32_t attempt;
    char *reason;
} sl_msg_cancel_t;

typedef struct sl_msg_task_state {
    char *job_id;
    int32_t attempt;
    sl_msg_task_ref_t task;
    int32_t state;               /* sl_task_state_t */
    int32_t error_code;          /* SL_E* when failed */
    char *message;               /* the failure, or "" */
    /* FINISHED: operator state at the task's end (a finished source's final
     * position), which later checkpoints carry in its place */
    int32_t nfinal;
    sl_msg_op_state_t *final_state;
    int32_t nmetrics;            /* terminal states: per chained operator */
    sl_msg_op_metrics_t *metrics;
    int64_t max_sync_ns;         /* longest synchronous snapshot phase */
    bool end_of_data;            /* RUNNING: a source's input ended (its final checkpoint may start) */
} sl_msg_task_state_t;

typedef struct sl_msg_trigger {
    char *job_id;
    int32_t attempt;
    int64_t checkpoint_id, timestamp;
    int32_t kind;                /* sl_snapshot_kind_t: checkpoint or a kind of savepoint */
} sl_msg_trigger_t;

typedef struct sl_msg_ack {
    char *job_id;
    int32_t attempt;
    int64_t checkpoint_id;
    sl_msg_task_ref_t task;
    /* the task's figures (coordinator's sl_ckpt_task_stats_t) */
    int64_t align_us, sync_us, async_us, state_bytes, inflight_bytes;
    bool unaligned;
    int32_t nops;
    sl_msg_op_state_t *ops;      /* per chained operator that has state */
} sl_msg_ack_t;

typedef struct sl_msg_decline {
    char *job_id;
    int32_t attempt;
    int64_t checkpoint_id;
    sl_msg_task_ref_t task;
    char *reason;
} sl_msg_decline_t;

/* One running subtask's figures in a METRICS report, cumulative since it
 * started: time spent busy, idle (waiting for input) and back-pressured
 * (waiting for a free output buffer), and per chained operator its
 * counters. */
typedef struct sl_msg_subtask_metrics {
    sl_msg_task_ref_t task;
    int64_t time_ns;             /* the TaskManager's monotonic clock when the times were sampled (0: not started) */
    int64_t busy_ns, idle_ns, backpressured_ns;
    int64_t bytes_in, bytes_out; /* numBytesIn / numBytesOut: buffer bytes read and written */
    int32_t nops;
    sl_msg_op_metrics_t *ops;
} sl_msg_subtask_metrics_t;

/* How often a TaskManager reports METRICS for a running deployment. */
#define SL_METRICS_REPORT_INTERVAL_MS 200

typedef struct sl_msg_metrics {
    char *job_id;
    int32_t attempt;
    char *tm_id;
    int64_t time_ns;             /* the TaskManager's monotonic clock when it sampled */
    int32_t nsubtasks;
    sl_msg_subtask_metrics_t *subtasks;
} sl_msg_metrics_t;

/* COMPLETE and ABORTED */
typedef struct sl_msg_notify {
    char *job_id;
    int32_t attempt;
    int64_t checkpoint_id;
    char *reason;                /* ABORTED: why */
} sl_msg_notify_t;

/* STATE_QUERY (JM -> TM): the keyed state of `key` in operator `uid` of
 * subtask `task` of a running attempt (jobmanager/state_query.h).  The
 * key is its serialized form (what the job's key selector produces), so
 * it lies in a key group of that subtask's range. */
#define SL_MSG_STATE_QUERY_MAX_KEY 1024   /* = SL_MAX_KEY_LEN of the operators */
#define SL_MSG_STATE_QUERY_MAX_NS 65536
typedef struct sl_msg_state_query {
    char *job_id;
    int32_t attempt;
    sl_msg_task_ref_t task;
    uint64_t request_id;         /* non-zero; the result names it */
    char *uid;                   /* the operator */
    char *state;                 /* one state's name, or "": every state of the operator */
    sl_buf_t key;                /* 0..SL_MSG_STATE_QUERY_MAX_KEY bytes */
    bool has_namespace;          /* false: the empty namespace (a process function's) */
    sl_buf_t ns;
} sl_msg_state_query_t;

/* What became of a STATE_QUERY. */
typedef enum sl_sq_status {
    SL_SQ_OK = 0,                /* block holds the key's entries (maybe none) */
    SL_SQ_NO_OPERATOR = 1,       /* no operator with that uid in the subtask's chain, or not keyed */
    SL_SQ_NO_STATE = 2,          /* the operator has no state of that name */
    SL_SQ_NOT_RUNNING = 3,       /* the TaskManager does not run that subtask of that attempt */
    SL_SQ_FAILED = 4,            /* the lookup failed (message says why) */
} sl_sq_status_t;
#define SL_SQ_STATUS_MAX 4

typedef struct sl_msg_state_query_result {
    char *job_id;
    int32_t attempt;
    sl_msg_task_ref_t task;
    uint64_t request_id;
    int32_t status;              /* sl_sq_status_t */
    char *message;               /* not OK: why ("" when OK) */
    int32_t key_group;           /* OK: the key's key group */
    /* OK: one canonical keyed-state block (state_backend.h, "SLKS") of
     * key_group holding the queried states, each with the key's entries
     * only; the JobManager checks and parses it (sl_kbf_parse) */
    sl_buf_t block;
} sl_msg_state_query_result_t;

typedef struct sl_msg {
    int32_t type;                /* sl_msg_type_t */
    union {
        sl_msg_register_t reg;
        sl_msg_registered_t registered;
        sl_msg_heartbeat_t heartbeat;
        sl_msg_deploy_t deploy;
        sl_msg_cancel_t cancel;
        sl_msg_task_state_t task_state;
        sl_msg_trigger_t trigger;
        sl_msg_ack_t ack;
        sl_msg_decline_t decline;
        sl_msg_notify_t notify;  /* COMPLETE, ABORTED */
        sl_msg_metrics_t metrics;
        sl_msg_state_query_t state_query;
        sl_msg_state_query_result_t state_query_result;
    } u;
} sl_msg_t;

/* A zeroed message of this type on the heap. */
sl_msg_t *sl_msg_new(int type);
/* Frees what m owns (not m). */
void sl_msg_free(sl_msg_t *m);
/* sl_msg_free and free(m). */
void sl_msg_destroy(sl_msg_t *m);

/* ---- the wire (codec.c) ----------------------------------------------------
 * A frame: u32 magic "SLCM" (0x4d434c53 little-endian), u16 version, u16 type,
 * u32 payload length, then the payload: the message as protobuf
 * (protocol/sluice.proto, through protobuf-c).  At most SL_MSG_MAX_FRAME (16 MiB)
 * bytes in all. */
#define SL_MSG_MAGIC 0x4d434c53u
#define SL_MSG_HEADER 12
#define SL_MSG_MAX_FRAME (16u << 20)

/* Appends m's frame to out.  0, or SL_EINVAL naming the field that cannot
 * be encoded (e.g. a string that is not NUL-terminated within bounds). */
int sl_msg_encode(const sl_msg_t *m, sl_buf_t *out, char *err, size_t errlen);
/* The length of the frame that starts at p (header included), once the
 * header is there: 0 when fewer than SL_MSG_HEADER bytes are given; < 0
 * with a message when the header is bad (magic, newer version, unknown
 * type, over SL_MSG_MAX_FRAME).  `where` names the connection in errors. */
int64_t sl_msg_frame_length(const uint8_t *p, size_t len, const char *where, char *err, size_t errlen);
/* Decodes exactly one whole frame into *m (zeroed first; free with
 * sl_msg_free, also after an error).  Every count, index and string is
 * checked; SL_EFORMAT names the message type and the field that was wrong. */
int sl_msg_decode(const uint8_t *p, size_t len, const char *where, sl_msg_t *m, char *err, size_t errlen);
/* A deep copy (through encode and decode). */
int sl_msg_copy(const sl_msg_t *m, sl_msg_t *out, char *err, size_t errlen);

#endif
