/*
 * cep.h — complex event processing on keyed streams (Flink's FlinkCEP).
 *
 * A pattern is a sequence of named stages.  Each stage has a condition on
 * the event (where / or), a quantifier (once, times, one_or_more, ...),
 * and a contiguity to the stage before it:
 *
 *   next             strict: the stage's first event comes right after the
 *                    previous stage's last event
 *   followed_by      relaxed: events in between are skipped, but only
 *                    while they do not satisfy the stage's condition
 *   followed_by_any  non-deterministic relaxed: any event may be skipped
 *
 * Looping stages (times, one_or_more, times_or_more) are relaxed between
 * their own events too, unless consecutive (strict) or allow_combinations
 * (non-deterministic relaxed).  within(ms) bounds a match's span in event
 * time: last event ts - first event ts < ms.
 *
 * sl_cep applies a pattern to a keyed stream in event time: per key,
 * events are buffered in keyed state and fed to the NFA in timestamp order
 * (equal timestamps: arrival order) when the watermark passes them.  An
 * event at or behind the watermark when it arrives is late (late side
 * output, or dropped).  Every match goes to the select function; with an
 * after-match skip strategy other than NO_SKIP a match is emitted only
 * once no partial match that started earlier is pending, and the strategy
 * then discards overlapping partial and completed matches (Flink's order
 * of emission).  Partial matches whose within() ran out go to the timeout
 * function.  The NFA's partial matches and its buffer of events live in
 * keyed state (heap or RocksDB), so they are checkpointed and rescaled by
 * key group; partial matches refer to buffered events, they do not copy
 * them.
 *
 * Negations (not_next, not_followed_by) sit between two stages that are
 * not optional, never first or last.  greedy is not supported; like every
 * mistake it is refused by name when the job is built.
 *
 * Where this differs from Flink on purpose: time is advanced to every
 * timeout deadline in order, so timeouts (and what the skip strategy
 * releases because of them) do not depend on how often watermarks come;
 * matches with the same first event released together come out in a fixed
 * order (by last event, then events); a partial match that Flink keeps as
 * two branches with the same events (e.g. after a looping stage's last
 * event) is one here, so it times out once; after a times(n, m) stage a
 * not_followed_by event ends the partial match also while it waits for an
 * optional further event (Flink's branch that skipped an event there
 * survives it).
 *
 * Threads: build a pattern on the user's thread before sl_env_execute.
 * Condition functions run on the task threads of every subtask at once,
 * with the ctx given here: they must only read it.  Select and timeout
 * functions run on task threads; their ctx follows sl_fn_opts_t (one
 * instance per subtask with SL_FN_COPY or a ctx_clone).
 */
#ifndef SLUICE_CEP_H
#define SLUICE_CEP_H

#include "sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_pattern sl_pattern_t;
typedef struct sl_cep_match sl_cep_match_t;

/* A simple condition: 1 when the event satisfies it, 0 when not, < 0 to
 * fail the task. */
typedef int (*sl_cep_cond_fn)(void *ctx, const sl_row_t *event, int64_t ts);

/* ---- building a pattern (user thread) ---------------------------------- */

/* Starts a pattern whose first stage is `name`.  The caller owns the
 * pattern until sl_cep takes it (or frees it with sl_pattern_free).  The
 * builder functions below return p, record the first mistake in it (the
 * job then refuses to build, naming it) and copy the names they get. */
SL_API sl_pattern_t *sl_pattern_begin(const char *name);
/* Appends a stage with strict, relaxed or non-deterministic relaxed
 * contiguity to the stage before it. */
SL_API sl_pattern_t *sl_pattern_next(sl_pattern_t *p, const char *name);
SL_API sl_pattern_t *sl_pattern_followed_by(sl_pattern_t *p, const char *name);
SL_API sl_pattern_t *sl_pattern_followed_by_any(sl_pattern_t *p, const char *name);
/* Negated stages, between the last stage and the next one; the following
 * where / or give the negated stage's (simple) condition.  not_next: the
 * event right after the last stage's last event must not satisfy it;
 * not_followed_by: no event after the last stage's first event, up to and
 * including the next stage's first event, may satisfy it.  A partial match
 * that meets such an event ends (Flink's stop state). */
SL_API sl_pattern_t *sl_pattern_not_next(sl_pattern_t *p, const char *name);
SL_API sl_pattern_t *sl_pattern_not_followed_by(sl_pattern_t *p, const char *name);

/* Conditions of the last stage: where ANDs a condition, or ORs one (with
 * everything given so far).  A stage without a condition takes any event.
 * ctx is borrowed (it must outlive the job) and only read. */
SL_API sl_pattern_t *sl_pattern_where(sl_pattern_t *p, sl_cep_cond_fn fn, void *ctx);
SL_API sl_pattern_t *sl_pattern_or(sl_pattern_t *p, sl_cep_cond_fn fn, void *ctx);
/* Iterative conditions (Flink's IterativeCondition): fn also gets the
 * partial match the event would extend (the events taken so far, by
 * stage; empty for a match's first event), e.g. to compare with the
 * events of another stage.  Combined with where / or like the others. */
typedef int (*sl_cep_iter_cond_fn)(void *ctx, const sl_row_t *event, int64_t ts, const sl_cep_match_t *so_far);
SL_API sl_pattern_t *sl_pattern_where_iterative(sl_pattern_t *p, sl_cep_iter_cond_fn fn, void *ctx);
SL_API sl_pattern_t *sl_pattern_or_iterative(sl_pattern_t *p, sl_cep_iter_cond_fn fn, void *ctx);
/* Stop condition of a one_or_more / times_or_more stage (given after the
 * quantifier): an event that satisfies it is not taken by the stage and
 * ends it (no later event is taken either); the next stage may take it. */
SL_API sl_pattern_t *sl_pattern_until(sl_pattern_t *p, sl_cep_cond_fn fn, void *ctx);

/* Quantifiers of the last stage (one of times / times_range / one_or_more
 * / times_or_more; optional combines with any of them: 0 events or the
 * quantifier's range). */
SL_API sl_pattern_t *sl_pattern_times(sl_pattern_t *p, int n);                 /* exactly n >= 1 */
SL_API sl_pattern_t *sl_pattern_times_range(sl_pattern_t *p, int n, int m);    /* 1 <= n <= m */
SL_API sl_pattern_t *sl_pattern_one_or_more(sl_pattern_t *p);
SL_API sl_pattern_t *sl_pattern_times_or_more(sl_pattern_t *p, int n);         /* n >= 1 */
SL_API sl_pattern_t *sl_pattern_optional(sl_pattern_t *p);
/* Inner contiguity of a looping stage: strict, or non-deterministic. */
SL_API sl_pattern_t *sl_pattern_consecutive(sl_pattern_t *p);
SL_API sl_pattern_t *sl_pattern_allow_combinations(sl_pattern_t *p);
/* Refused when the job is built (not supported yet). */
SL_API sl_pattern_t *sl_pattern_greedy(sl_pattern_t *p);

/* The whole pattern's time bound in event time (ms > 0). */
SL_API sl_pattern_t *sl_pattern_within(sl_pattern_t *p, int64_t ms);

/* After-match skip strategies (Flink's AfterMatchSkipStrategy).  TO_FIRST
 * and TO_LAST name a stage; a match without events of that stage prunes
 * nothing. */
typedef enum sl_cep_skip {
    SL_CEP_NO_SKIP = 0,         /* every match */
    SL_CEP_SKIP_TO_NEXT,        /* drop matches starting at or before this match's first event */
    SL_CEP_SKIP_PAST_LAST_EVENT,/* drop matches starting at or before its last event */
    SL_CEP_SKIP_TO_FIRST,       /* drop matches starting before the first event of `stage` */
    SL_CEP_SKIP_TO_LAST,        /* drop matches starting before the last event of `stage` */
} sl_cep_skip_t;
SL_API sl_pattern_t *sl_pattern_skip(sl_pattern_t *p, sl_cep_skip_t strategy, const char *stage);

/* Frees a pattern that was not given to sl_cep.  NULL is fine. */
SL_API void sl_pattern_free(sl_pattern_t *p);

/* ---- matches (inside select / timeout functions) ----------------------- */

/* A match: for each stage of the pattern (in pattern order), the events it
 * took, in event-time order.  Borrowed: valid during the callback only. */
SL_API int sl_cep_match_stages(const sl_cep_match_t *m);
SL_API const char *sl_cep_match_stage_name(const sl_cep_match_t *m, int stage);
/* Stage index by name, or -1. */
SL_API int sl_cep_match_stage_index(const sl_cep_match_t *m, const char *name);
/* Number of events of stage `stage` (0 for a stage the match skipped). */
SL_API int sl_cep_match_count(const sl_cep_match_t *m, int stage);
/* Event i of a stage (input schema), and its timestamp in *ts (may be NULL). */
SL_API sl_row_t sl_cep_match_event(const sl_cep_match_t *m, int stage, int i, int64_t *ts);

/* ---- applying a pattern ------------------------------------------------ */

typedef struct sl_cep_fn {
    /* Called for every match; emits rows of the output schema through out
     * (sl_out_row / sl_emit).  0, or < 0 to fail the task.  Required. */
    int (*select)(void *ctx, const sl_cep_match_t *m, sl_collector_t *out);
    /* Called for every partial match that timed out (within), with the
     * time it timed out (first event ts + within); emits to side outputs
     * (sl_side_row / sl_emit_side).  NULL: timed-out matches are dropped. */
    int (*timeout)(void *ctx, const sl_cep_match_t *partial, int64_t timeout_ts, sl_collector_t *out);
    sl_fn_opts_t opts;
    /* Side-output tag for late events (its schema must be the input's;
     * declared on the environment with sl_output_tag, or here implicitly).
     * NULL: late events are dropped. */
    const char *late_tag;
} sl_cep_fn_t;

/* Applies pattern p (ownership passes to the environment, also on error)
 * to the keyed stream k with event time.  Matches are emitted with the
 * timestamp of the event (or time) that completed them; out_schema: as for
 * sl_keyed_process.  Returns the operator's stream, or NULL after recording
 * an error on the environment (a mistake in the pattern, named). */
SL_API sl_stream_t *sl_cep(sl_keyed_t *k, sl_pattern_t *p, sl_cep_fn_t fn, sl_schema_t *out_schema);

#ifdef __cplusplus
}
#endif

#endif
