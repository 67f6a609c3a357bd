/*
 * operator.h — the stream operator interface and what every operator shares.
 *
 * An operator instance belongs to one subtask and runs only on that task's
 * thread (the task's mailbox loop), and reaches the task only through its
 * context (operators/operator_context.h).  Operators in one
 * chain call each other directly through sl_op_output_t: no serialization,
 * no queue.  The last operator of a chain emits into a record writer that
 * serializes into network buffers (taskmanager/record_writer.h).
 *
 * Watermarks: the chain calls sl_op_watermark(op, input, wm) for each
 * input; the base keeps the per-input watermark and idleness, combines them
 * (minimum over active inputs) and calls vt->advance_watermark when the
 * combined watermark grows.  An operator that fires event-time timers does
 * so there and then forwards with sl_op_emit_watermark.
 *
 * Errors: vt functions return 0 or a negative code; the message goes into
 * the task's error text through sl_op_fail().
 */
#ifndef SL_OPERATOR_H
#define SL_OPERATOR_H

#include <stdbool.h>
#include <stdint.h>

#include "common/common.h"
#include "operators/operator_context.h"
#include "sluice/operator_state.h"
#include "sluice/sluice.h"
#include "state/key_group.h"
#include "state/state_backend.h"
#include "state/timer_service.h"

typedef struct sl_operator sl_operator_t;
typedef struct sl_op_output sl_op_output_t;

/* Tag 0 is the main output; side-output tags are numbered from 1 by the
 * environment (sl_tag_table_t). */
struct sl_op_output {
    void (*record)(sl_op_output_t *o, int tag, const sl_record_t *rec);
    void (*watermark)(sl_op_output_t *o, int64_t wm);
    void (*status)(sl_op_output_t *o, bool idle);
};

typedef struct sl_tag {
    char *name;
    sl_schema_t *schema;
} sl_tag_t;

typedef struct sl_tag_table {
    sl_tag_t *tags; /* tags[0] unused (main output) */
    int n;          /* number of entries including [0] */
} sl_tag_table_t;

/* Returns the tag id for name, or SL_ENOTFOUND. */
int sl_tag_lookup(const sl_tag_table_t *t, const char *name);

/* How a keyed operator finds the key of a record. */
typedef struct sl_key_selector {
    int field;      /* >= 0: this field's bytes are the key */
    sl_key_fn fn;   /* else this function */
    void *ctx;
} sl_key_selector_t;

#define SL_MAX_KEY_LEN 1024
/* Fields of a key made by sl_key_by_fields (api/fields.c). */
#define SL_KEY_MAX_FIELDS 16

/* Whether the key is made of fields of the row (sl_key_by or
 * sl_key_by_fields); if so their indices (up to SL_KEY_MAX_FIELDS) and
 * number.  A key function's key is not. */
bool sl_key_is_fields(const sl_key_selector_t *ks, int *idx, int *n);
/* Writes the key fields that `key` (of such a selector, over rows of
 * schema) encodes into w's fields out_idx[0..n).  0 or SL_EFORMAT/EINVAL. */
int sl_key_decode_fields(const sl_key_selector_t *ks, const sl_schema_t *schema, const uint8_t *key, uint32_t len,
                         sl_row_writer_t *w, const int *out_idx);

/* Extracts the key of row: sets *key and *len (pointing into the row or into
 * buf, which has SL_MAX_KEY_LEN bytes).  Returns 0 or < 0. */
int sl_key_extract(const sl_key_selector_t *ks, const sl_row_t *row, uint8_t *buf, const uint8_t **key,
                   uint32_t *len);

/* What a new operator instance is told about its place in the job. */
typedef struct sl_op_init {
    int subtask;
    int parallelism;
    int max_parallelism;
    int ninputs;                        /* 0 for a source, 1 or 2 */
    const sl_key_selector_t *key[2];    /* non-NULL for a keyed input */
    const sl_schema_t *in_schema[2];
    const sl_schema_t *out_schema;
    const sl_tag_table_t *tags;
    const char *name;
    const char *uid;
    const sl_op_context_t *ctx;         /* the task's (NULL in unit tests) */
    int64_t wm_interval_ms;             /* pipeline.auto-watermark-interval */
    /* Makes a keyed operator's backend (NULL: the heap backend).  On
     * failure it returns NULL with a message in err (backend_err): the
     * operator gets a heap backend so that it can be destroyed, and its
     * creator must fail with that message. */
    sl_keyed_backend_t *(*make_backend)(void *ctx, const struct sl_op_init *init, sl_kg_range_t range, char *err,
                                        size_t errlen);
    void *make_backend_ctx;
    char *backend_err;  /* where make_backend writes (cap 512), or NULL */
    bool final_checkpoint; /* the job checkpoints: the end of input waits for a final checkpoint */
} sl_op_init_t;

typedef struct sl_operator_vt {
    const char *kind;
    int (*open)(sl_operator_t *op);
    /* A record on input 0 or 1. */
    int (*process)(sl_operator_t *op, int input, const sl_record_t *rec);
    /* Optional: n consecutive records of one input, as they came out of a
     * network buffer (a head operator only).  Same effect as n calls to
     * process; lets keyed operators prefetch state for the whole batch. */
    int (*process_batch)(sl_operator_t *op, int input, const sl_record_t *recs, int n);
    /* The combined input watermark rose to wm (op->wm already set).  NULL:
     * just forward it. */
    int (*advance_watermark)(sl_operator_t *op, int64_t wm);
    /* Processing time reached a time the operator asked for. NULL: none. */
    int (*on_processing_time)(sl_operator_t *op, int64_t now);
    /* Input `input` is finished (bounded input). NULL: nothing to do. */
    int (*end_input)(sl_operator_t *op, int input);
    /* Optional: event-time progress of the operator's own beyond the base's
     * watermarks (a source: its per-split watermark generators), appended to
     * the checkpoint (sl_op_snapshot_time), and given back on a restore at
     * the same parallelism, before open (restore_time keeps a copy). */
    void (*snapshot_time)(sl_operator_t *op, sl_buf_t *out);
    void (*restore_time)(sl_operator_t *op, const uint8_t *p, size_t n);
    void (*close)(sl_operator_t *op);
    void (*destroy)(sl_operator_t *op);
    /* Checkpoint `id` (barriers aligned, or the source's trigger): the
     * synchronous snapshot of the operator's own (non-keyed) state into
     * out.  NULL: no operator state. */
    int (*snapshot_state)(sl_operator_t *op, int64_t id, sl_buf_t *out);
    /* Checkpoint `id` is complete (every task acknowledged it). */
    int (*notify_checkpoint_complete)(sl_operator_t *op, int64_t id);
    /* Checkpoint `id` was aborted. */
    int (*notify_checkpoint_aborted)(sl_operator_t *op, int64_t id);
    /* With checkpointing, a bounded input ends in two steps (Flink's
     * FLIP-147): end_input first, then the final checkpoint covers what the
     * operator emitted, and once every task was told it completed, the task
     * calls after_final_checkpoint just before it ends.  A two-phase-commit
     * sink defers its finish to here, so its last transaction is committed
     * by the final checkpoint's notification, not at the end of input.
     * NULL: nothing to do. */
    int (*after_final_checkpoint)(sl_operator_t *op);
} sl_operator_vt_t;

struct sl_operator {
    const sl_operator_vt_t *vt;
    sl_op_output_t *out;
    const sl_op_context_t *ctx; /* the task's seam (operator_context.h); NULL in unit tests */
    const sl_tag_table_t *tags;
    const char *name;
    const char *uid;
    int subtask, parallelism, max_parallelism;
    int ninputs;
    int64_t in_wm[2];
    bool in_idle[2];
    bool in_ended[2];
    bool out_idle;
    bool final_checkpoint;  /* the job checkpoints: the end of input waits for a final checkpoint */
    int64_t wm; /* combined input watermark; SL_MIN_WATERMARK at start */
    const sl_schema_t *in_schema[2];
    const sl_schema_t *out_schema;
    /* keyed operators only (NULL otherwise) */
    const sl_key_selector_t *key[2];
    sl_keyed_backend_t *kb;
    sl_timer_service_t *timers;
    sl_kg_range_t kg_range;
    /* user-visible keyed state handles (sl_state_value ...), freed with the op */
    struct sl_state **states;
    int nstates;
    /* counters */
    int64_t records_in, records_out, records_skipped;
    int chain_index;
    /* restored operator state (owned by the executor; NULL: fresh start) */
    const uint8_t *restored_state;
    size_t restored_len;  /* position in its task's chain (set by the task) */
    /* operator state of a user function (operator_state.c); NULL: none */
    struct sl_opstate *opstate;
    /* typed keyed states: names and row schemas as the plan declares them
     * (sl_op_set_state_schemas; owned) */
    int ntyped;
    char **typed_names;
    sl_schema_t **typed_schemas;
    /* per typed state: the TTL (ms, 0 none) its stored items have, -1 not
     * known — the restore sets what the snapshot recorded, open's
     * declaration what it declares (a different one is migrated by the backend); the checkpoint
     * writer reads it (atomic loads and stores) */
    int64_t *typed_ttl;
};

/* Gives a keyed operator the row schemas of its typed states (the plan's
 * sl_keyed_state_schema declarations); takes copies / references.  Before
 * open, on the thread that builds the task. */
void sl_op_set_state_schemas(sl_operator_t *op, int n, const char *const *names, sl_schema_t *const *schemas);
/* The declared schema of state `name`, or NULL. */
const sl_schema_t *sl_op_state_schema(const sl_operator_t *op, const char *name);

/*
 * Operator (non-keyed) state of user functions (operator_state.c, public
 * API in sluice/operator_state.h).  An operator that offers it calls
 * sl_opstate_attach from its open (parses op->restored_state, fails by name
 * when it is malformed, then calls cf->initialize_state), sl_opstate_snapshot
 * from vt->snapshot_state and sl_opstate_free from destroy.  Operators may
 * keep internal lists the same way (sl_opstate_declare), e.g. the async
 * operator's requests in flight.  Task thread only.
 */
int sl_opstate_attach(sl_operator_t *op, const sl_checkpointed_fn_t *cf, void *ctx);
/* Whether op has restored state or a function with callbacks (attach needed). */
bool sl_opstate_wanted(const sl_operator_t *op, const sl_checkpointed_fn_t *cf);
/* mode: 0 split, 1 union.  NULL after sl_op_fail when it conflicts. */
sl_opstate_list_t *sl_opstate_declare(sl_operator_t *op, const char *name, int mode);
int sl_opstate_snapshot(sl_operator_t *op, int64_t id, sl_buf_t *out);
void sl_opstate_free(sl_operator_t *op);

/* Event-time progress in checkpoints (event_time_state.c), so that a
 * restored job judges lateness exactly as the uninterrupted one would: the
 * combined and per-input watermarks (and vt->snapshot_time's part).  A
 * restore at the same parallelism is exact; at another one each subtask
 * takes the minimum of the old subtasks' watermarks (never ahead of any
 * of them) and sources start their generators afresh. */
void sl_op_snapshot_time(sl_operator_t *op, sl_buf_t *out);
/* blobs[i], lens[i]: what sl_op_snapshot_time wrote in old subtask i of n;
 * exact: same parallelism, blobs[0] is this subtask's.  0 or SL_EFORMAT. */
int sl_op_restore_time(sl_operator_t *op, const uint8_t *const *blobs, const size_t *lens, int n, bool exact);

/* Initializes the base; creates the keyed backend and timer service when
 * init->key[0] (or key[1]) is set. */
void sl_op_base_init(sl_operator_t *op, const sl_operator_vt_t *vt, const sl_op_init_t *init);
/* Frees what sl_op_base_init created (call from destroy). */
void sl_op_base_free(sl_operator_t *op);

/* Records a failure message for the task; returns rc. */
int sl_op_fail(sl_operator_t *op, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Called by the chain: input watermark / idleness / end for input i. */
int sl_op_watermark(sl_operator_t *op, int input, int64_t wm);
int sl_op_status(sl_operator_t *op, int input, bool idle);
int sl_op_end_input(sl_operator_t *op, int input);

static inline void sl_op_emit(sl_operator_t *op, int tag, const sl_record_t *rec) {
    op->records_out++;
    op->out->record(op->out, tag, rec);
}
void sl_op_emit_watermark(sl_operator_t *op, int64_t wm);

/* Processing time (the job's clock) and wake-ups. */
int64_t sl_op_now(sl_operator_t *op);
void sl_op_schedule_processing(sl_operator_t *op, int64_t ts);
/* Task thread: waits for mail or deadline_ns (sl_op_context_t.yield); true
 * when the task is cancelled or failed.  Without a task: true at once. */
bool sl_op_yield(sl_operator_t *op, int64_t deadline_ns);

/* Unit tests drive operators without a task: processing time then comes
 * from this clock, and failures are kept for sl_op_test_last_error(). */
void sl_op_test_set_now(int64_t now);
const char *sl_op_test_last_error(void);

/* For keyed operators: sets the backend's current key from a record of
 * input `input`; returns the key group or < 0. */
int sl_op_set_key_from(sl_operator_t *op, int input, const sl_row_t *row);

/*
 * The collector that user functions emit through (public sl_collector_t).
 * The operator owns it, points `in` at the record being processed, and
 * calls sl_collector_reset before each user call.
 */
struct sl_collector {
    sl_operator_t *op;
    sl_row_writer_t w;
    sl_row_writer_t side_w;
    int side_tag;
    int64_t in_ts;
    int64_t ts;
    bool ts_set;
    bool begun;
    int64_t emitted;
};
void sl_collector_init(sl_collector_t *c, sl_operator_t *op);
void sl_collector_free(sl_collector_t *c);
static inline void sl_collector_reset(sl_collector_t *c, int64_t in_ts) {
    c->in_ts = in_ts;
    c->ts_set = false;
    c->begun = false;
}

/* Keyed user-function plumbing shared by process and window operators. */
struct sl_pctx {
    sl_operator_t *op;
    int64_t ts;          /* record or timer timestamp */
    const uint8_t *key;  /* current key */
    uint32_t keylen;
};
struct sl_rt {
    sl_operator_t *op;
};
/* Keyed state handle as user code sees it; namespace is empty. */
struct sl_state {
    sl_operator_t *op;
    int sid;
    int kind;            /* public kind: 0 value,1 list,2 map,3 reducing,4 aggregating */
    uint32_t size;
    sl_reduce_bytes_fn fn;
    void (*init)(void *ctx, void *acc);
    void *ctx;
    struct sl_ttl_state *ttl; /* time-to-live (state/ttl.h); NULL: none */
    char *name;          /* as declared (owned) */
    const sl_schema_t *schema; /* typed state: its rows' schema (the operator's); NULL: bytes */
};

/* Binds the calling thread to a task (by the context it gave its
 * operators) and its chain (sl_task_main, before anything runs): keyed-state
 * handles that another subtask's instance stored in a shared user context
 * are then resolved to this task's same-named state (operator.c).  NULL
 * unbinds. */
void sl_op_bind_thread(const sl_op_context_t *ctx, sl_operator_t *const *ops, int nops);
/* The instance of `op` (same place in the chain, kind and name) that runs
 * on this thread: op itself when it belongs to this thread's task or no
 * task is bound.  How state handles that user code kept in a shared
 * context find their own subtask's state (keyed state here, broadcast
 * state in broadcast_op.c). */
bool sl_op_thread_is(const sl_operator_t *op);
sl_operator_t *sl_op_thread_instance_slow(sl_operator_t *op);
static inline sl_operator_t *sl_op_thread_instance(sl_operator_t *op) {
    return sl_op_thread_is(op) ? op : sl_op_thread_instance_slow(op);
}

/* Creates one operator instance for a subtask from the node's spec (the
 * factory a plan node's user code resolves to, job_code.h). */
typedef sl_operator_t *(*sl_op_create_fn)(const void *spec, const sl_op_init_t *init);

#endif
