/*
 * operator_state_api.c — the builder side of operator state
 * (include/sluice/operator_state.h): sl_checkpointed writes a user's
 * CheckpointedFunction callbacks into the spec of the node a stream handle
 * configures; the running side is
 * operators/operator_state.c.  User's thread, before execution.
 */
#include "api/env_int.h"
#include "common/common.h"
#include "graph/stream_graph.h"
#include "operators/basic_ops.h"

sl_stream_t *sl_checkpointed(sl_stream_t *st, sl_checkpointed_fn_t cf) {
    if (!st) return NULL;
    sl_env_t *env = st->env;
    if (st->node < 0) {
        sl_env_errorf(env, "checkpointed: a union of streams has no operator to give operator state to");
        return NULL;
    }
    sl_node_t *n = env->nodes[st->node];
    const char *name = n->name ? n->name : "?";
    sl_checkpointed_fn_t *dst = NULL;
    if (n->create == sl_basic_op_create)
        dst = &((sl_basic_spec_t *)n->spec)->cp;
    else if (n->create == sl_process_op_create)
        dst = &((sl_process_spec_t *)n->spec)->cp;
    else if (n->create == sl_async_op_create)
        dst = sl_async_spec_cp(n->spec);
    if (!dst) {
        sl_env_errorf(env,
                      "checkpointed: operator '%s' is not a map, filter, flat_map, process, co-process or async "
                      "operator (sources and sinks keep operator state through their connector's snapshot/restore)",
                      name);
        return NULL;
    }
    if (!cf.initialize_state && !cf.snapshot_state) {
        sl_env_errorf(env, "checkpointed: operator '%s': neither initialize_state nor snapshot_state given", name);
        return NULL;
    }
    if (dst->initialize_state || dst->snapshot_state) {
        sl_env_errorf(env, "checkpointed: operator '%s' already has operator-state callbacks", name);
        return NULL;
    }
    *dst = cf;
    return st;
}
