/*
 * broadcast.h — broadcast state (Flink's broadcast-state pattern).
 *
 * A low-volume stream (rules, thresholds, configuration) is broadcast to
 * every parallel subtask of an operator that also reads a keyed stream:
 *
 *     const char *names[] = {"thresholds"};
 *     sl_broadcast_t *b = sl_broadcast_stream(rules, names, 1);
 *     sl_bconnected_t *c = sl_connect_broadcast(sl_key_by(txns, "card_id"), b);
 *     sl_stream_t *alerts = sl_broadcast_process(c, fn, out_schema);
 *
 * Every subtask receives every broadcast element, so when the function
 * changes broadcast state only from what the elements say (and not from
 * keyed data), every subtask's broadcast state is the same — as in Flink,
 * that is the user's contract.  Broadcast state is a set of map states
 * (key bytes -> value bytes) declared by name on the broadcast stream.
 *
 *  - process_element (the keyed side) sees the broadcast state read-only,
 *    and has keyed state and timers exactly as sl_keyed_process.
 *  - process_broadcast_element reads and writes the broadcast state, and
 *    may visit every key of a keyed state of its subtask
 *    (sl_bctx_apply_to_keyed_state: Flink's applyToKeyedState).
 *
 * There is no order between the two inputs (they come from different
 * channels): a broadcast element takes effect for the keyed elements that
 * reach the subtask after it.  A function that needs a defined order uses
 * event time (buffer keyed elements until the watermark) — see
 * examples/fraud_rules.c and tests/test_broadcast_state.c.
 *
 * Checkpoints: the broadcast state is the operator's non-keyed state; each
 * subtask writes its copy, and on a restore at any parallelism every new
 * subtask loads one of the old copies (they are equal).  Keyed state and
 * timers are restored by key group as for any keyed operator.
 *
 * Threads: builder functions run on the user's thread before execution;
 * the sl_bstate_* and sl_bctx_* functions only inside the user callbacks
 * of the operator (its task's thread).
 */
#ifndef SLUICE_BROADCAST_H
#define SLUICE_BROADCAST_H

#include "sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_broadcast sl_broadcast_t;     /* a broadcast stream with its state names */
typedef struct sl_bconnected sl_bconnected_t;   /* keyed stream + broadcast stream */
typedef struct sl_bstate sl_bstate_t;           /* one broadcast map state of a subtask */
typedef struct sl_bctx sl_bctx_t;               /* context of process_broadcast_element */

/* Makes s a broadcast stream carrying the broadcast map states named in
 * names[0..n-1] (Flink's MapStateDescriptor; at least one, unique, non
 * empty).  The names are copied.  The handle is owned by the environment.
 * Errors (NULL stream, no or duplicate names) are recorded on the
 * environment by name and NULL is returned.  User's thread. */
SL_API sl_broadcast_t *sl_broadcast_stream(sl_stream_t *s, const char *const *names, int n);

/* Connects a keyed stream (input 1: process_element) with a broadcast
 * stream (input 2: process_broadcast_element).  Both must come from the
 * same environment; a NULL side is an error recorded on the environment.
 * Owned by the environment.  User's thread. */
SL_API sl_bconnected_t *sl_connect_broadcast(sl_keyed_t *keyed, sl_broadcast_t *b);

/* KeyedBroadcastProcessFunction. */
typedef struct sl_broadcast_process_fn {
    /* Optional: called once per subtask before any element; declare keyed
     * state (sl_state_value ...) and look up broadcast states
     * (sl_bstate_get_state) here. */
    int (*open)(void *ctx, sl_rt_t *rt);
    /* Required: an element of the keyed side; keyed state is scoped to its
     * key; broadcast state is read-only. */
    int (*process_element)(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out);
    /* Required: an element of the broadcast side; broadcast state is
     * read-write; keyed state only through sl_bctx_apply_to_keyed_state. */
    int (*process_broadcast_element)(void *ctx, sl_bctx_t *bc, const sl_record_t *in, sl_collector_t *out);
    /* Optional: a timer registered from process_element fired. */
    int (*on_timer)(void *ctx, sl_pctx_t *pc, int64_t ts, sl_time_domain_t domain, sl_collector_t *out);
    void (*close)(void *ctx);
    sl_fn_opts_t opts;
} sl_broadcast_process_fn_t;

/* Adds the broadcast process operator (default name "KeyedBroadcastProcess").
 * Takes over the caller's reference of out_schema.  Missing callbacks are
 * refused by name on the environment.  User's thread. */
SL_API sl_stream_t *sl_broadcast_process(sl_bconnected_t *c, sl_broadcast_process_fn_t fn, sl_schema_t *out_schema);

/* The broadcast state called name in this subtask, valid until close.  A
 * name that the broadcast stream did not declare fails the task with that
 * name (NULL).  Inside open or any callback of the function.  Like keyed
 * state handles, the handle may be kept in a context shared by every
 * subtask (no ctx_clone): each access reaches the state of the subtask that
 * runs it. */
SL_API sl_bstate_t *sl_bstate_get_state(sl_rt_t *rt, const char *name);

/* Reads: any callback.  The returned pointer stays valid until the next
 * change of the same state. */
SL_API const void *sl_bstate_get(sl_bstate_t *st, const void *k, uint32_t klen, uint32_t *vlen); /* NULL: absent */
SL_API bool sl_bstate_contains(sl_bstate_t *st, const void *k, uint32_t klen);
SL_API int64_t sl_bstate_size(sl_bstate_t *st);
/* Visits every entry in bytewise key order; returns the number visited.
 * fn must not change the state. */
SL_API int64_t sl_bstate_foreach(sl_bstate_t *st,
                                 void (*fn)(void *c, const void *k, uint32_t kl, const void *v, uint32_t vl),
                                 void *c);
/* Writes: only inside process_broadcast_element (elsewhere they fail the
 * task, naming the state, and return SL_EINVAL).  Bytes are copied. */
SL_API int sl_bstate_put(sl_bstate_t *st, const void *k, uint32_t klen, const void *v, uint32_t vlen);
SL_API int sl_bstate_remove(sl_bstate_t *st, const void *k, uint32_t klen);
SL_API int sl_bstate_clear(sl_bstate_t *st);

/* Event timestamp of the broadcast element and the operator's current
 * watermark. */
SL_API int64_t sl_bctx_timestamp(sl_bctx_t *bc);
SL_API int64_t sl_bctx_watermark(sl_bctx_t *bc);
SL_API int64_t sl_bctx_now(sl_bctx_t *bc);

/* Flink's applyToKeyedState: calls fn once for every key of this subtask
 * that has a value (list, map ...) in keyed state st, with st scoped to
 * that key, in no defined order.  fn may read, change or clear st and
 * other keyed states for that key; it returns 0 to go on, or non-zero to
 * stop (returned; < 0 fails the task).  Works through the state backend
 * (heap and RocksDB).  Only inside process_broadcast_element. */
typedef int (*sl_keyed_visit_fn)(void *c, const uint8_t *key, uint32_t keylen, sl_state_t *st);
SL_API int sl_bctx_apply_to_keyed_state(sl_bctx_t *bc, sl_state_t *st, sl_keyed_visit_fn fn, void *c);

#ifdef __cplusplus
}
#endif
#endif
