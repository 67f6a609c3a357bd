/*
 * async_api.c — the builder of async I/O (Flink's AsyncDataStream):
 * sl_async_wait checks its arguments and adds an AsyncWait node whose spec
 * the running operator (operators/async_op.c) is created from.  User's
 * thread, before execution.
 */
#include "common/common.h"
#include "graph/stream_graph.h"
#include "operators/basic_ops.h"
#include "sluice/async.h"

sl_stream_t *sl_async_wait(sl_stream_t *s, sl_async_fn_t fn, int capacity, int64_t timeout_ms, sl_async_mode_t mode,
                           sl_schema_t *out_schema) {
    if (!s) {
        sl_schema_unref(out_schema);
        return NULL;
    }
    const char *why = !fn.invoke                                                 ? "no invoke function given"
                      : capacity <= 0                                            ? "capacity must be > 0"
                      : timeout_ms <= 0                                          ? "timeout_ms must be > 0"
                      : (mode != SL_ASYNC_ORDERED && mode != SL_ASYNC_UNORDERED) ? "unknown mode"
                      : !out_schema                                              ? "no output schema given"
                                                                                 : NULL;
    if (why) {
        sl_env_errorf(s->env, "async_wait: %s (capacity %d, timeout %lld ms)", why, capacity, (long long)timeout_ms);
        sl_schema_unref(out_schema);
        return NULL;
    }
    void *spec = sl_async_spec_new(fn, capacity, timeout_ms, mode);
    sl_stream_t *r = sl_graph_add_operator(s, NULL, false, mode == SL_ASYNC_ORDERED ? "AsyncWait(ordered)"
                                                                                    : "AsyncWait(unordered)",
                                           sl_async_op_create, spec, sl_async_spec_free, out_schema);
    sl_schema_unref(out_schema);
    return r;
}
