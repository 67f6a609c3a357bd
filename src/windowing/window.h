/*
 * window.h — windowing internals (Flink's windowing package): window
 * assigners, triggers, evictors and the spec of a window operator.  The
 * builder of windowed streams (sl_window() ... sl_window_process(),
 * sl_window_agg()) is api/window_api.c; it hands the operator a spec.
 *
 * Modules:
 *   assigner.c          which windows an element belongs to
 *   trigger.c           when a window fires or purges (pure: all state and
 *                       timers go through sl_trigger_ctx_t)
 *   evictor.c           which elements leave a window around its function
 *   merging_window_set.c  the per-key set of session windows and how a new
 *                       window merges into it (pure; the operator applies
 *                       the merge to state, timers and trigger)
 *   window_operator.c   the keyed operator (WindowOperator and
 *                       EvictingWindowOperator in one)
 *   builtin_agg.c       the aggregate function of sl_window_agg (builtin_agg.h)
 *
 * Windows are half-open [start, end); a window's max timestamp is end - 1.
 * As state namespace and timer namespace a window is 16 bytes: start then
 * end, each a little-endian int64.
 */
#ifndef SL_WINDOW_H
#define SL_WINDOW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "operators/operator.h"
#include "sluice/sluice.h"

/* ---- windows ------------------------------------------------------------ */

#define SL_WINDOW_NS_LEN 16

static inline int64_t sl_window_max_ts(const sl_window_t *w) { return w->end - 1; }

static inline void sl_window_to_ns(const sl_window_t *w, uint8_t ns[SL_WINDOW_NS_LEN]) {
    uint64_t s = (uint64_t)w->start, e = (uint64_t)w->end;
    memcpy(ns, &s, 8);
    memcpy(ns + 8, &e, 8);
}

static inline sl_window_t sl_window_from_ns(const uint8_t *ns) {
    uint64_t s, e;
    memcpy(&s, ns, 8);
    memcpy(&e, ns + 8, 8);
    sl_window_t w = {(int64_t)s, (int64_t)e};
    return w;
}

static inline bool sl_window_eq(const sl_window_t *a, const sl_window_t *b) {
    return a->start == b->start && a->end == b->end;
}

/* Flink's TimeWindow.intersects: touching windows ([0,10) and [10,20))
 * intersect, so sessions that touch merge. */
static inline bool sl_window_intersects(const sl_window_t *a, const sl_window_t *b) {
    return a->start <= b->end && a->end >= b->start;
}

static inline sl_window_t sl_window_cover(const sl_window_t *a, const sl_window_t *b) {
    sl_window_t w = {a->start < b->start ? a->start : b->start, a->end > b->end ? a->end : b->end};
    return w;
}

/* ---- assigners (assigner.c) --------------------------------------------- */

typedef enum sl_assigner_kind {
    SL_ASSIGNER_TUMBLING = 1,
    SL_ASSIGNER_SLIDING,
    SL_ASSIGNER_SESSION,
    SL_ASSIGNER_CUMULATIVE, /* Flink SQL's CUMULATE: [start, start + k * slide) for k = 1 .. size / slide */
} sl_assigner_kind_t;

struct sl_window_assigner {
    sl_assigner_kind_t kind;
    bool event_time;  /* else processing time */
    int64_t size;     /* tumbling/sliding/cumulative: size (cumulative: the max size); session: gap */
    int64_t slide;    /* sliding; cumulative: the step */
    int64_t offset;   /* tumbling/sliding/cumulative */
};

/* Event-time cumulative windows (Flink SQL's CUMULATE window table
 * function): an element at t belongs to [s, s + k * step) for every k with
 * s + k * step > t, k <= max_size / step, where s is the start of the
 * max_size-window holding t.  max_size must be a multiple of step (checked
 * by sl_assigner_validate).  Internal: used by src/sql/. */
sl_window_assigner_t *sl_cumulative_event_time(int64_t max_size_ms, int64_t step_ms, int64_t offset_ms);

/* Start of the window of `size` (offset `offset`) that holds t:
 * t - ((t - offset) mod size) with a non-negative mod, computed without
 * overflow.  size > 0. */
int64_t sl_window_start(int64_t t, int64_t offset, int64_t size);

/* 0 when the parameters are valid, else SL_EINVAL with a message naming
 * the assigner in err. */
int sl_assigner_validate(const sl_window_assigner_t *a, char *err, size_t cap);

/* The windows of an element at time t (its timestamp, or the processing
 * time for processing-time assigners), in Flink's order (sliding: latest
 * start first).  Writes at most cap windows into out and returns how many
 * there are (may be more than cap, or 0 for a sliding window with
 * slide > size whose gap holds t). */
int sl_assigner_assign(const sl_window_assigner_t *a, int64_t t, sl_window_t *out, int cap);

/* Upper bound of sl_assigner_assign's count for this assigner. */
int64_t sl_assigner_max_windows(const sl_window_assigner_t *a);

static inline bool sl_assigner_is_merging(const sl_window_assigner_t *a) { return a->kind == SL_ASSIGNER_SESSION; }

/* Flink's toString: "TumblingEventTimeWindows(300000)". */
size_t sl_assigner_describe(const sl_window_assigner_t *a, char *buf, size_t cap);

sl_window_assigner_t *sl_assigner_clone(const sl_window_assigner_t *a);
void sl_assigner_free(sl_window_assigner_t *a);

/* ---- triggers (trigger.c) ----------------------------------------------- */

typedef enum sl_trigger_kind {
    SL_TRIGGER_EVENT_TIME = 1,
    SL_TRIGGER_PROCESSING_TIME,
    SL_TRIGGER_COUNT,
    SL_TRIGGER_PURGING,
} sl_trigger_kind_t;

struct sl_trigger {
    sl_trigger_kind_t kind;
    int64_t count;        /* COUNT: fire every `count` elements */
    sl_trigger_t *inner;  /* PURGING: owned */
    int slot;             /* COUNT: index of its partitioned state (sl_trigger_assign_slots) */
};

/* Bit 0: fire, bit 1: purge. */
typedef enum sl_trigger_result {
    SL_TRIGGER_CONTINUE = 0,
    SL_TRIGGER_FIRE = 1,
    SL_TRIGGER_PURGE = 2,
    SL_TRIGGER_FIRE_AND_PURGE = 3,
} sl_trigger_result_t;

/* What a trigger may touch (Flink's Trigger.TriggerContext).  Timers and
 * partitioned state are scoped to the current key (set by the caller) and
 * to c->window. */
typedef struct sl_trigger_ctx sl_trigger_ctx_t;
typedef struct sl_trigger_ctx_ops {
    void (*register_timer)(sl_trigger_ctx_t *c, sl_time_domain_t d, int64_t ts);
    void (*delete_timer)(sl_trigger_ctx_t *c, sl_time_domain_t d, int64_t ts);
    int64_t (*processing_time)(sl_trigger_ctx_t *c);
    /* Partitioned state: one int64 per (slot, key, window w).  get returns
     * false when absent; add creates it (from 0) and returns the new value. */
    bool (*state_get)(sl_trigger_ctx_t *c, int slot, const sl_window_t *w, int64_t *v);
    int64_t (*state_add)(sl_trigger_ctx_t *c, int slot, const sl_window_t *w, int64_t delta);
    void (*state_clear)(sl_trigger_ctx_t *c, int slot, const sl_window_t *w);
} sl_trigger_ctx_ops_t;

struct sl_trigger_ctx {
    const sl_trigger_ctx_ops_t *ops;
    sl_window_t window;  /* the window the call is about */
    int64_t watermark;   /* current event time */
};

sl_trigger_result_t sl_trigger_on_element(const sl_trigger_t *t, sl_trigger_ctx_t *c, int64_t ts);
sl_trigger_result_t sl_trigger_on_event_time(const sl_trigger_t *t, sl_trigger_ctx_t *c, int64_t time);
sl_trigger_result_t sl_trigger_on_processing_time(const sl_trigger_t *t, sl_trigger_ctx_t *c, int64_t time);
/* c->window is the merge result; merged[0..n) the windows merged into it. */
void sl_trigger_on_merge(const sl_trigger_t *t, sl_trigger_ctx_t *c, const sl_window_t *merged, int n);
/* Deletes the timers and state the trigger keeps for c->window. */
void sl_trigger_clear(const sl_trigger_t *t, sl_trigger_ctx_t *c);

/* Numbers the partitioned states of the trigger tree from `first`; returns
 * the next free number (so the tree uses [first, result)). */
int sl_trigger_assign_slots(sl_trigger_t *t, int first);
int sl_trigger_validate(const sl_trigger_t *t, char *err, size_t cap);
/* Flink's names: "EventTimeTrigger", "PurgingTrigger(CountTrigger(3))". */
size_t sl_trigger_describe(const sl_trigger_t *t, char *buf, size_t cap);
sl_trigger_t *sl_trigger_clone(const sl_trigger_t *t);
void sl_trigger_free(sl_trigger_t *t);

/* ---- evictors (evictor.c) ----------------------------------------------- */

typedef enum sl_evictor_kind { SL_EVICTOR_COUNT = 1, SL_EVICTOR_TIME } sl_evictor_kind_t;

struct sl_evictor {
    sl_evictor_kind_t kind;
    int64_t n;   /* COUNT: elements kept; TIME: keep_ms */
    bool after;  /* evict after the window function, else before */
};

/* One element of a window as evictors and process functions see it. */
typedef struct sl_window_elem {
    int64_t ts;           /* SL_NO_TIMESTAMP when none */
    const uint8_t *data;  /* row bytes */
    uint32_t len;
} sl_window_elem_t;

/* What sl_window_process_fn receives. */
struct sl_window_elements {
    const sl_window_elem_t *v;
    int n;
    const sl_schema_t *schema;
};

/* Evicts (when the evictor acts at this point: before or after) from
 * v[0..n), keeping the order of the rest; returns the new count. */
int sl_evictor_evict_before(const sl_evictor_t *e, sl_window_elem_t *v, int n);
int sl_evictor_evict_after(const sl_evictor_t *e, sl_window_elem_t *v, int n);
int sl_evictor_validate(const sl_evictor_t *e, char *err, size_t cap);
size_t sl_evictor_describe(const sl_evictor_t *e, char *buf, size_t cap);
sl_evictor_t *sl_evictor_clone(const sl_evictor_t *e);
void sl_evictor_free(sl_evictor_t *e);

/* ---- merging window set (merging_window_set.c) -------------------------- */

/* A window of the set and the window whose namespace holds its contents
 * (Flink's MergingWindowSet mapping). */
typedef struct sl_mws_entry {
    sl_window_t window;
    sl_window_t state;
} sl_mws_entry_t;

#define SL_MWS_ENTRY_BYTES 32

/* The set of one key; entries are kept sorted by window start and no two
 * windows of the set intersect. */
typedef struct sl_mws {
    sl_mws_entry_t *v;
    int n, cap;
    bool dirty;        /* changed since load */
    sl_window_t *mw;   /* scratch for sl_mws_merge_t */
    int mw_cap;
} sl_mws_t;

/* What adding a window did. */
typedef struct sl_mws_merge {
    sl_window_t result;        /* the window the element belongs to now */
    bool merged;               /* existing windows were merged into result */
    bool existed;              /* result is a window the set had, unchanged */
    sl_window_t state_window;  /* merged: the namespace that keeps the contents */
    /* merged: the windows merged away (result's trigger merges their state)
     * and the namespaces whose contents go into state_window.  Both point
     * into storage owned by the set, valid until the next add. */
    const sl_window_t *merged_windows;
    int nmerged;
    const sl_window_t *merged_states;
    int nmerged_states;
} sl_mws_merge_t;

void sl_mws_init(sl_mws_t *s);
void sl_mws_free(sl_mws_t *s);
/* Loads the set from its serialized form (n * 32 bytes); len 0 empties. */
int sl_mws_load(sl_mws_t *s, const void *p, uint32_t len);
/* Serialized form: writes into buf (at least n * 32 bytes); returns length. */
uint32_t sl_mws_store(const sl_mws_t *s, void *buf);
/* Adds window w, merging every window that intersects it (Flink's
 * MergingWindowSet.addWindow with TimeWindow.mergeWindows).  Fills *m. */
void sl_mws_add(sl_mws_t *s, const sl_window_t *w, sl_mws_merge_t *m);
/* The entry of window w, or NULL. */
const sl_mws_entry_t *sl_mws_find(const sl_mws_t *s, const sl_window_t *w);
/* Removes window w (no-op when absent). */
void sl_mws_retire(sl_mws_t *s, const sl_window_t *w);

/* ---- the window operator (window_operator.c) ---------------------------- */

typedef enum sl_window_fn_kind {
    SL_WINDOW_FN_REDUCE = 1,
    SL_WINDOW_FN_AGGREGATE,
    SL_WINDOW_FN_PROCESS,
} sl_window_fn_kind_t;

/* Everything a window operator instance is built from.  Immutable once
 * the job runs; shared by the subtasks. */
typedef struct sl_window_spec {
    sl_window_assigner_t *assigner; /* owned */
    sl_trigger_t *trigger;          /* owned, never NULL, slots assigned */
    sl_evictor_t *evictor;          /* owned, may be NULL */
    int64_t allowed_lateness;       /* event time only */
    char *late_tag;                 /* owned; NULL: late records are dropped and counted */
    sl_window_fn_kind_t fn_kind;
    sl_reduce_fn reduce;
    sl_reduce_result_fn reduce_result; /* NULL: the reduced row is the result */
    sl_aggregate_fn_t agg;
    sl_window_process_fn process;
    void *ctx;                      /* reduce / process context (aggregate: agg.ctx) */
    int trigger_slots;              /* partitioned trigger states */
} sl_window_spec_t;

/* A spec with copies of a, t (NULL: the assigner's default trigger) and
 * e (may be NULL); set the function fields afterwards. */
sl_window_spec_t *sl_window_spec_new(const sl_window_assigner_t *a, const sl_trigger_t *t, const sl_evictor_t *e,
                                     int64_t allowed_lateness, const char *late_tag);
void sl_window_spec_free(void *spec);

/* sl_op_create_fn of the window operator. */
sl_operator_t *sl_window_op_create(const void *spec, const sl_op_init_t *init);

/* Records the operator dropped as late (no late output tag); Flink's
 * numLateRecordsDropped. */
int64_t sl_window_op_late_dropped(const sl_operator_t *op);
/* Timers pending, counted as Flink would hold them (per key and window:
 * trigger and cleanup timers), whether kept as timers or window buckets. */
int64_t sl_window_op_pending_timers(const sl_operator_t *op);

#endif
