/*
 * job_graph.h — the stream graph after chaining (Flink's JobGraph): each
 * vertex is a chain of stream-graph nodes that run in one task, calling
 * each other directly.  A node joins its upstream's chain when chaining is
 * on, it has exactly one input edge, that edge is forward (or default with
 * equal parallelism), the parallelism is equal, and it did not ask for a
 * new chain, and both are in the same slot sharing group.  Node ids are already in topological order (an operator can
 * only be built from streams that exist), so vertices are too.
 */
#ifndef SL_JOB_GRAPH_H
#define SL_JOB_GRAPH_H

#include "api/env_int.h"

typedef struct sl_job_vertex {
    int id;
    int *nodes;        /* chain members in topological order; nodes[0] is the head */
    int nnodes;
    int parallelism;
    char name[256];    /* "Source: x -> Map -> Filter" */
} sl_job_vertex_t;

typedef struct sl_job_graph {
    sl_job_vertex_t *v;
    int nv;
    int *vertex_of;    /* per node */
    int *index_in_vertex; /* per node: position in its chain */
    bool *chained;     /* per edge */
    sl_partitioning_t *part; /* per edge: resolved partitioning */
    const char **group;      /* per node: its slot sharing group (points into the nodes, or "default") */
    int max_parallelism;
} sl_job_graph_t;

int sl_job_graph_build(const sl_env_t *env, sl_job_graph_t *jg, char *err, size_t errlen);
void sl_job_graph_free(sl_job_graph_t *jg);

#endif
