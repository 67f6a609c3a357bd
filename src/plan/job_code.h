/*
 * job_code.h — the user code a plan refers to, resolved in the process
 * that runs subtasks: per plan node its operator factory and spec, key
 * selectors, schemas, and for sources and sinks the connector objects;
 * per plan edge its key selector.  The plan (plan.h) is data and names
 * nodes and edges by index; this table is what those indexes resolve to.
 *
 * Embedded mode takes it from the environment that built the plan
 * (api/plan_build.c).  In a cluster each TaskManager builds the job from
 * its artifact with the same arguments, and uses the resulting table only
 * after the rebuilt plan's fingerprint matched the JobManager's.
 *
 * Everything it points to is owned by whoever built the job (the
 * environment) and must outlive every deployment that uses it.
 */
#ifndef SL_JOB_CODE_H
#define SL_JOB_CODE_H

#include "common/common.h"
#include "operators/operator.h"
#include "sluice/sluice.h"

typedef struct sl_code_node {
    sl_op_create_fn create;
    const void *spec;
    bool keyed[2];
    const sl_key_selector_t *key[2];
    const sl_schema_t *in_schema[2];
    const sl_schema_t *out_schema;
    const sl_source_ops_t *source_ops; /* sources */
    const sl_sink_t *sink;             /* sinks */
} sl_code_node_t;

typedef struct sl_job_code {
    int nnodes;
    sl_code_node_t *nodes;               /* by plan node id */
    int nedges;
    const sl_key_selector_t **edge_key;  /* by plan edge index (HASH edges) */
    const sl_tag_table_t *tags;
    sl_clock_fn clock;
    void *clock_ctx;
} sl_job_code_t;

static inline void sl_job_code_free(sl_job_code_t *c) {
    if (!c) return;
    sl_free(c->nodes);
    sl_free((void *)c->edge_key);
    c->nodes = NULL;
    c->edge_key = NULL;
}

#endif
