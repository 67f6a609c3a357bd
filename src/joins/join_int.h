/*
 * join_int.h — what the three joins of include/sluice/join.h share, and
 * what their builders (api/join_api.c) hand them.
 *
 * The joins are built on the engine's own two-input keyed operator (the
 * keyed co-process operator of src/operators/process_op.c) and on the
 * window operator (src/windowing/): the interval and regular joins are a
 * per-subtask join context behind an sl_co_process_fn_t, so their rows
 * live in keyed state of the configured backend and their cleanup timers
 * in the operator's timer service — both checkpointed, restored by key
 * group at any parallelism.  The window join is Flink's tagged union
 * (window_join.c).
 */
#ifndef SL_JOIN_INT_H
#define SL_JOIN_INT_H

#include <stdatomic.h>

#include "operators/operator.h"
#include "sluice/join.h"
#include "windowing/window.h"

/* ---- what the builders (api/join_api.c) hand the running joins ---- */

/* Interval join (interval_join.c): what every subtask shares (read-only
 * while the job runs). */
typedef struct sl_interval_join_spec {
    int64_t lower, upper; /* inclusive, after exclusivity */
    char *late_tag[2];
    sl_join_fn_t fn;
    char name[64];
} sl_interval_join_spec_t;
void sl_interval_join_spec_free(void *spec);
/* The keyed co-process function of the join over s (its shared context). */
sl_co_process_fn_t sl_interval_join_fn(sl_interval_join_spec_t *s);

/* Regular join (regular_join.c). */
typedef struct sl_regular_join_spec {
    bool has_ttl;
    sl_state_ttl_t ttl;
    sl_join_fn_t fn;
} sl_regular_join_spec_t;
sl_co_process_fn_t sl_regular_join_fn(sl_regular_join_spec_t *s);

/* Window join and co-group (window_join.c): the tagging map of one side
 * (its context: sl_window_join_tag_t) and the process-window function over
 * the tagged union (its context: sl_window_join_spec_t). */
typedef struct sl_window_join_tag {
    int side;
    sl_key_selector_t key;
} sl_window_join_tag_t;
typedef struct sl_window_join_spec {
    bool cogroup;
    sl_window_join_fn join;
    sl_cogroup_fn cogroup_fn;
    void *ctx;
    const sl_schema_t *schema[2]; /* of the left and right rows (held by their streams' nodes) */
} sl_window_join_spec_t;
int sl_window_join_tag_row(void *ctx, const sl_record_t *in, sl_row_writer_t *out);
int sl_window_join_window_fn(void *ctx, const uint8_t *key, uint32_t keylen, const sl_window_t *win,
                             const sl_window_elements_t *elems, sl_collector_t *out);

/* For tests: the number of keyed-state entries (key, bucket) the interval
 * and regular joins' subtasks still held when they closed, summed over
 * every subtask since the last reset.  A join whose input ended (maximum
 * watermark) must leave 0: its cleanup timers removed every row. */
int64_t sl_join_test_state_left(void);
void sl_join_test_state_reset(void);
/* Counting is off unless a test turns it on: a count scans the whole state
 * (on RocksDB, every tombstone too). */
void sl_join_test_state_enable(bool on);
bool sl_join_test_state_enabled(void);
/* Called by a closing join subtask (task thread). */
void sl_join_test_state_add(int64_t entries);

/* Entries of state `st` over every key of the subtask (through the
 * backend's count). */
int64_t sl_join_state_entries(sl_state_t *st);

#endif
