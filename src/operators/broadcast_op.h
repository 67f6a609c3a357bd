/*
 * broadcast_op.h — what the broadcast-state builder (api/broadcast_api.c)
 * hands the running operator (broadcast_op.c): its spec and factory.
 */
#ifndef SL_BROADCAST_OP_H
#define SL_BROADCAST_OP_H

#include "operators/operator.h"
#include "sluice/broadcast.h"

/* The node's spec: the user's functions and the broadcast state names
 * (read-only while the job runs). */
typedef struct sl_broadcast_spec {
    sl_broadcast_process_fn_t fn;
    char **names;       /* owned copy */
    int nnames;
} sl_broadcast_spec_t;

void sl_broadcast_spec_free(void *spec);
/* sl_op_create_fn of the operator (input 0 keyed, input 1 broadcast). */
sl_operator_t *sl_broadcast_op_create(const void *spec, const sl_op_init_t *init);

#endif
