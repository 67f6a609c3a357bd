/*
 * operator_state.h — operator (non-keyed) state of user functions, as
 * Flink's CheckpointedFunction with ListState and union ListState.
 *
 * A function that is not keyed (or that wants state per subtask rather than
 * per key) keeps lists of byte strings, by name, for its subtask.  It
 * registers two callbacks on the operator with sl_checkpointed(), right
 * after building it:
 *
 *   initialize_state(ctx, rt)   once per subtask, before the first record
 *                               (and before a process function's own open):
 *                               declare the lists here and read what a
 *                               restore gave back (Flink's initializeState);
 *   snapshot_state(ctx, rt, id) on the barrier of every checkpoint `id`
 *                               (id 0: the final state of a finished task):
 *                               write the current items (clear, then add;
 *                               Flink's snapshotState).
 *
 * ctx is the function's per-subtask context (its ctx, or the per-subtask
 * copy that sl_fn_opts_t asks for: ctx_clone, or SL_FN_COPY).  A process function may also declare lists in
 * its own open and change them while it processes, without callbacks: each
 * checkpoint then writes them as they are.  State is matched by the
 * operator's uid on restore (set one with sl_uid).
 *
 * Available to map, filter, flat_map (sl_map_ex, sl_filter_ex,
 * sl_flat_map_ex), keyed process and co-process functions, and async
 * functions (include/sluice/async.h).  Everything runs on the subtask's own
 * thread; handles belong to the operator and live as long as it does.
 *
 * Redistribution when a job restores at another parallelism:
 *   split list (sl_opstate_list, Flink's getListState): the items of every
 *     old subtask, concatenated in old subtask order, are cut into
 *     contiguous shares of equal size (the first `total % p` subtasks get
 *     one more), as Flink's RoundRobinOperatorStateRepartitioner; each item
 *     is restored in exactly one subtask.  At the same parallelism every
 *     subtask gets exactly its own items back.
 *   union list (sl_opstate_union_list, Flink's getUnionListState): every
 *     new subtask gets every item of every old subtask.
 * A list that a checkpoint holds but the restored function does not declare
 * again is kept as it is (its share) and written into the next checkpoints.
 *
 * Sources and sinks (sl_source_ops_t, sl_sink_ops_t) do not use this API:
 * their connector hooks snapshot/restore already are operator state with
 * union semantics — restore receives, for every old subtask, a u32
 * little-endian length followed by the bytes its snapshot wrote, and each
 * reader or writer keeps its share (for split semantics: the entries it now
 * owns, e.g. by split number modulo the parallelism; for union semantics:
 * everything).  sl_opstate_union_next below walks that format.
 *
 * Checkpoint format (the operator's operator-state blob), little-endian:
 *   u8 version (1), u32 subtask, u32 parallelism, u32 number of lists;
 *   per list: u8 mode (0 split, 1 union), u32 name length, name,
 *   u32 number of items; per item: u32 length, bytes.
 * A malformed blob fails the restore with a message naming the operator.
 */
#ifndef SLUICE_OPERATOR_STATE_H
#define SLUICE_OPERATOR_STATE_H

#include "sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_opstate_list sl_opstate_list_t;

/* Flink's CheckpointedFunction.  Either callback may be NULL; a return
 * < 0 fails the task. */
typedef struct sl_checkpointed_fn {
    int (*initialize_state)(void *ctx, sl_rt_t *rt);
    int (*snapshot_state)(void *ctx, sl_rt_t *rt, int64_t checkpoint_id);
} sl_checkpointed_fn_t;

/* Gives the operator that produced s (a map, filter, flat_map, keyed
 * process, co-process or async operator) operator state through cf.  On the
 * builder's thread, before sl_env_execute.  Returns s; a stream of another
 * operator, a union, no callbacks, or a second call for the same operator
 * is recorded as an error on the environment (named) and returns NULL. */
SL_API sl_stream_t *sl_checkpointed(sl_stream_t *s, sl_checkpointed_fn_t cf);

/* Declares (or finds again) the split list state `name` of this subtask
 * (Flink's getListState).  Call from initialize_state or a function's open,
 * on the task's thread.  Returns the handle (owned by the operator), or NULL
 * after failing the task when the name is empty, already declared as a
 * union list, or the checkpoint holds it as a union list. */
SL_API sl_opstate_list_t *sl_opstate_list(sl_rt_t *rt, const char *name);
/* The same for a union list state (Flink's getUnionListState): on restore
 * every subtask gets every item of every old subtask. */
SL_API sl_opstate_list_t *sl_opstate_union_list(sl_rt_t *rt, const char *name);
/* Whether the operator was restored from a checkpoint that holds its
 * operator state (Flink's FunctionInitializationContext.isRestored).  On
 * the task's thread. */
SL_API bool sl_opstate_is_restored(sl_rt_t *rt);

/* Number of items in the list.  The items restored into this subtask are
 * there from the declaration on. */
SL_API int sl_opstate_count(const sl_opstate_list_t *l);
/* Item i (0 <= i < count): its bytes and length; NULL when out of range.
 * The pointer stays valid until the list is next changed. */
SL_API const void *sl_opstate_get(const sl_opstate_list_t *l, int i, uint32_t *len);
/* Appends a copy of v (len bytes).  Returns 0. */
SL_API int sl_opstate_add(sl_opstate_list_t *l, const void *v, uint32_t len);
/* Removes every item. */
SL_API void sl_opstate_clear(sl_opstate_list_t *l);

/* For connector restore hooks: walks the union of old subtasks' blobs
 * (u32 little-endian length + bytes each).  *pos starts at 0; each call sets
 * *blob / *blob_len to the next old subtask's bytes and returns 1, 0 at the
 * end, or SL_EFORMAT when the union is truncated.  Any thread. */
SL_API int sl_opstate_union_next(const void *state, size_t len, size_t *pos, const void **blob, size_t *blob_len);

#ifdef __cplusplus
}
#endif
#endif
