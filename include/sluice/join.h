/*
 * sluice/join.h — joins of two keyed streams (Flink's DataStream joins and
 * the SQL regular join).
 *
 *   interval join   left.intervalJoin(right).between(lower, upper): a right
 *                   row r joins a left row l of the same key when
 *                   l.ts + lower <= r.ts <= l.ts + upper (each bound may be
 *                   made exclusive).  Rows wait in keyed state and are
 *                   removed by event-time timers as soon as the watermark
 *                   says no future row of the other side can join them.
 *   window join     left.join(right).where(..).equalTo(..).window(..):
 *                   every pair of one key's left and right rows in one
 *                   window; co-group: both lists, once per key and window.
 *   regular join    every left row joins every right row of the same key,
 *                   whichever came first (Flink SQL's unbounded inner
 *                   join); an optional state TTL bounds the state.
 *
 * Both inputs are keyed streams (sl_key_by / sl_key_by_fn); the key bytes
 * of the two sides must mean the same thing.  When both are keyed by a
 * field, the fields must have the same type: the builder refuses the job
 * otherwise (sl_env_execute reports it).  Builder handles are owned by the
 * environment, like streams; every builder call runs on the user's thread
 * before sl_env_execute.  Every builder function takes over the reference
 * of the out_schema it is given, like sl_map.
 *
 * User functions run on the task threads of the join's subtasks; give each
 * subtask its own ctx (SL_FN_COPY, or ctx_clone / ctx_free in sl_fn_opts_t)
 * when it holds mutable data.
 */
#ifndef SLUICE_JOIN_H
#define SLUICE_JOIN_H

#include "sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A joined pair: both rows with their timestamps (left->ts, right->ts) and
 * the key they share.  Emit any number of rows of the join's output schema
 * through out (sl_out_row / sl_emit).  The output timestamp is set by the
 * join (interval join: max(left->ts, right->ts), as Flink; regular join:
 * the timestamp of the row that arrived last) unless the function calls
 * sl_out_set_timestamp.  Return 0, or < 0 to fail the task. */
typedef int (*sl_join_pair_fn)(void *ctx, const uint8_t *key, uint32_t keylen, const sl_record_t *left,
                               const sl_record_t *right, sl_collector_t *out);

/* A process-join function (Flink's ProcessJoinFunction).  open (optional)
 * may declare keyed state of its own; close (optional) runs at the end. */
typedef struct sl_join_fn {
    int (*open)(void *ctx, sl_rt_t *rt);
    sl_join_pair_fn join;
    void (*close)(void *ctx);
    sl_fn_opts_t opts;
} sl_join_fn_t;

/* ---- interval join ----------------------------------------------------- */

typedef struct sl_interval_join sl_interval_join_t;

/* left.intervalJoin(right).between(lower_ms, upper_ms), bounds inclusive.
 * Any signs are allowed; lower must not exceed upper (after exclusivity).
 * Both inputs need event-time timestamps; a row without one fails the task
 * with a message naming the join. */
SL_API sl_interval_join_t *sl_interval_join(sl_keyed_t *left, sl_keyed_t *right, int64_t lower_ms,
                                            int64_t upper_ms);
/* Makes the lower / upper bound exclusive (lowerBoundExclusive(),
 * upperBoundExclusive()).  Return their argument. */
SL_API sl_interval_join_t *sl_interval_join_lower_exclusive(sl_interval_join_t *j);
SL_API sl_interval_join_t *sl_interval_join_upper_exclusive(sl_interval_join_t *j);
/* Late rows — behind the join's watermark when they arrive (ts < wm) —
 * are dropped, as in Flink; with these tags they go to side outputs
 * instead (left rows with the left schema, right rows with the right
 * schema; the tags are declared here).  Select them with sl_side_output
 * on the join's stream.  NULL leaves that side dropping. */
SL_API sl_interval_join_t *sl_interval_join_late_outputs(sl_interval_join_t *j, const char *left_tag,
                                                         const char *right_tag);
/* Adds the join operator; returns its output stream (NULL after an error
 * recorded on the environment). */
SL_API sl_stream_t *sl_interval_join_process(sl_interval_join_t *j, sl_join_fn_t fn, sl_schema_t *out_schema);

/* ---- window join and co-group ------------------------------------------ */

typedef struct sl_window_join sl_window_join_t;

/* left.join(right).where(left's key).equalTo(right's key).window(a): the
 * handle takes ownership of the assigner (tumbling, sliding, session; event
 * or processing time).  Built as Flink does it: both inputs, tagged, are
 * united into one window operator whose elements state holds both sides. */
SL_API sl_window_join_t *sl_window_join(sl_keyed_t *left, sl_keyed_t *right, sl_window_assigner_t *a);
/* allowedLateness: windows stay this long after they fired; a late row
 * for a kept window fires it again with every pair (as Flink). */
SL_API sl_window_join_t *sl_window_join_allowed_lateness(sl_window_join_t *j, int64_t ms);

/* join: called for every (left, right) pair of a key in a window; the
 * output timestamp is the window's last timestamp (end - 1). */
typedef int (*sl_window_join_fn)(void *ctx, const uint8_t *key, uint32_t keylen, const sl_window_t *win,
                                 const sl_record_t *left, const sl_record_t *right, sl_collector_t *out);
/* co-group: called once per key and window with both sides' rows (one of
 * the lists may be empty, never both), in arrival order per side. */
typedef int (*sl_cogroup_fn)(void *ctx, const uint8_t *key, uint32_t keylen, const sl_window_t *win,
                             const sl_record_t *left, int nleft, const sl_record_t *right, int nright,
                             sl_collector_t *out);
/* Add the window operator; ctx is shared by every subtask (read-only). */
SL_API sl_stream_t *sl_window_join_apply(sl_window_join_t *j, sl_window_join_fn fn, void *ctx,
                                         sl_schema_t *out_schema);
SL_API sl_stream_t *sl_window_cogroup_apply(sl_window_join_t *j, sl_cogroup_fn fn, void *ctx,
                                            sl_schema_t *out_schema);

/* ---- regular (unbounded) inner join ------------------------------------ */

typedef struct sl_regular_join sl_regular_join_t;

SL_API sl_regular_join_t *sl_regular_join(sl_keyed_t *left, sl_keyed_t *right);
/* State time-to-live of both sides (sl_state_ttl; processing time): a row
 * is forgotten ttl_ms after it arrived and joins no later row.  Without
 * it, state grows with the number of distinct rows, as in Flink SQL. */
SL_API sl_regular_join_t *sl_regular_join_ttl(sl_regular_join_t *j, sl_state_ttl_t ttl);
SL_API sl_stream_t *sl_regular_join_process(sl_regular_join_t *j, sl_join_fn_t fn, sl_schema_t *out_schema);

#ifdef __cplusplus
}
#endif
#endif
