/*
 * temporal_join_op.h — what the temporal join's builder
 * (api/temporal_join_api.c) hands its running operator (temporal_join.c):
 * the spec, the statistics they share, and the factory.
 */
#ifndef SL_TEMPORAL_JOIN_OP_H
#define SL_TEMPORAL_JOIN_OP_H

#include <stdatomic.h>

#include "operators/operator.h"
#include "sluice/temporal_join.h"

/* Totals over the subtasks, added by each at close (any thread reads
 * them; owned by the environment). */
struct sl_temporal_join_stats {
    atomic_llong emitted, unmatched, dropped;
    atomic_llong versions_end, probes_end;
    atomic_int ended_subtasks;
};

typedef struct sl_temporal_join_spec {
    sl_temporal_join_kind_t kind;
    int delete_field;          /* index in the changelog schema, or -1 */
    int *vfields;              /* changelog field of each version output field */
    int nv;
    int nprobe;                /* probe fields (the output starts with them) */
    sl_temporal_join_stats_t *stats;
} sl_temporal_join_spec_t;

void sl_temporal_join_spec_free(void *spec);
/* sl_op_create_fn of the operator (input 0 probe, input 1 changelog). */
sl_operator_t *sl_temporal_join_op_create(const void *spec, const sl_op_init_t *init);

#endif
