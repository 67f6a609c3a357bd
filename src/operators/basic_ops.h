/*
 * basic_ops.h — specs and factories of the stateless operators (map,
 * filter, flat_map), the (keyed) process and co-process operators, and the
 * sink operator.
 */
#ifndef SL_BASIC_OPS_H
#define SL_BASIC_OPS_H

#include "operators/operator.h"
#include "sluice/async.h"

enum { SL_BASIC_MAP = 1, SL_BASIC_FILTER, SL_BASIC_FLAT_MAP };

typedef struct sl_basic_spec {
    int kind;
    void *fn;
    sl_fn_opts_t opts;
    sl_checkpointed_fn_t cp; /* operator state (sl_checkpointed) */
} sl_basic_spec_t;
sl_operator_t *sl_basic_op_create(const void *spec, const sl_op_init_t *init);

typedef struct sl_process_spec {
    sl_process_fn_t one;
    sl_co_process_fn_t two;
    bool two_inputs;
    sl_checkpointed_fn_t cp; /* operator state (sl_checkpointed) */
} sl_process_spec_t;
sl_operator_t *sl_process_op_create(const void *spec, const sl_op_init_t *init);

typedef struct sl_sink_spec {
    sl_sink_t sink;
} sl_sink_spec_t;
sl_operator_t *sl_sink_op_create(const void *spec, const sl_op_init_t *init);
void sl_sink_spec_free(void *spec);

/* The async I/O operator (async_op.c); its spec's operator-state callbacks. */
sl_operator_t *sl_async_op_create(const void *spec, const sl_op_init_t *init);
sl_checkpointed_fn_t *sl_async_spec_cp(void *spec);
/* A spec for sl_async_op_create (sl_async_wait's, checked there). */
void *sl_async_spec_new(sl_async_fn_t fn, int capacity, int64_t timeout_ms, int mode);
void sl_async_spec_free(void *spec);

/* Per-subtask copy of a user context (clone when asked). */
void *sl_fn_ctx_acquire(const sl_fn_opts_t *o);
void sl_fn_ctx_release(const sl_fn_opts_t *o, void *ctx);

#endif
