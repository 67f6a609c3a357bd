/*
 * join_int.h — what the three joins of include/sluice/join.h share.
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

#include "graph/stream_graph.h"
#include "sluice/join.h"

/* Checks, on the user's thread while the job is built, that left and right
 * are keyed streams of one environment whose keys can match: two field
 * keys must have the same type.  Records an error naming `what` on the
 * environment and returns false otherwise. */
bool sl_join_check_keys(sl_keyed_t *left, sl_keyed_t *right, const char *what);

/* The environment of a keyed stream (NULL for NULL). */
static inline sl_env_t *sl_join_env(sl_keyed_t *k) { return k && k->s ? k->s->env : NULL; }

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
