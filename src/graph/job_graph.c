/* job_graph.c — chaining and validation (see job_graph.h). */
#include "graph/job_graph.h"

#include <stdio.h>

#include "common/common.h"

static int in_degree(const sl_env_t *env, int node) {
    int n = 0;
    for (int i = 0; i < env->nedges; i++) n += env->edges[i].dst == node;
    return n;
}

int sl_job_graph_build(const sl_env_t *env, sl_job_graph_t *jg, char *err, size_t errlen) {
    memset(jg, 0, sizeof *jg);
    int nn = env->nnodes;
    jg->vertex_of = sl_calloc((size_t)nn, sizeof(int));
    jg->index_in_vertex = sl_calloc((size_t)nn, sizeof(int));
    jg->chained = sl_calloc((size_t)(env->nedges ? env->nedges : 1), sizeof(bool));
    jg->part = sl_calloc((size_t)(env->nedges ? env->nedges : 1), sizeof(sl_partitioning_t));
    jg->v = sl_calloc((size_t)nn, sizeof *jg->v);
    jg->max_parallelism = sl_env_max_parallelism(env);

    for (int i = 0; i < nn; i++) {
        int p = sl_env_node_parallelism(env, env->nodes[i]);
        if (p > jg->max_parallelism)
            return sl_errf(err, errlen, SL_EINVAL,
                           "operator '%s': parallelism %d exceeds the max parallelism %d (pipeline.max-parallelism)",
                           env->nodes[i]->name, p, jg->max_parallelism);
    }
    /* resolve partitioning and check inputs */
    for (int e = 0; e < env->nedges; e++) {
        const sl_edge_t *ed = &env->edges[e];
        const sl_node_t *s = env->nodes[ed->src], *d = env->nodes[ed->dst];
        int ps = sl_env_node_parallelism(env, s), pd = sl_env_node_parallelism(env, d);
        sl_partitioning_t p = ed->part;
        if (p == SL_PART_DEFAULT) p = ps == pd ? SL_PART_FORWARD : SL_PART_REBALANCE;
        if (p == SL_PART_FORWARD && ps != pd)
            return sl_errf(err, errlen, SL_EINVAL,
                           "forward partitioning from '%s' (parallelism %d) to '%s' (parallelism %d) needs equal "
                           "parallelism; use rebalance or rescale",
                           s->name, ps, d->name, pd);
        if (s->kind == SL_NODE_SINK)
            return sl_errf(err, errlen, SL_EINVAL, "sink '%s' cannot feed another operator", s->name);
        jg->part[e] = p;
    }
    /* slot sharing groups: explicit, else the inputs' when they agree */
    jg->group = sl_calloc((size_t)(nn ? nn : 1), sizeof *jg->group);
    for (int i = 0; i < nn; i++) {
        const sl_node_t *n = env->nodes[i];
        const char *g = n->slot_group;
        for (int e = 0; e < env->nedges && !n->slot_group; e++) {
            if (env->edges[e].dst != i) continue;
            const char *ig = jg->group[env->edges[e].src];
            if (!g) g = ig;
            else if (strcmp(g, ig) != 0) g = "default";
        }
        jg->group[i] = g ? g : "default";
    }
    for (int i = 0; i < nn; i++) {
        const sl_node_t *n = env->nodes[i];
        if (n->kind != SL_NODE_SOURCE && in_degree(env, i) == 0)
            return sl_errf(err, errlen, SL_EINVAL, "operator '%s' has no input", n->name);
    }
    /* chain */
    for (int i = 0; i < nn; i++) {
        const sl_node_t *n = env->nodes[i];
        int chain_to = -1;
        if (env->chaining && n->kind != SL_NODE_SOURCE && n->ninputs == 1 && !n->new_chain && in_degree(env, i) == 1) {
            for (int e = 0; e < env->nedges; e++) {
                if (env->edges[e].dst != i) continue;
                const sl_node_t *s = env->nodes[env->edges[e].src];
                if (jg->part[e] == SL_PART_FORWARD &&
                    sl_env_node_parallelism(env, s) == sl_env_node_parallelism(env, n) &&
                    strcmp(jg->group[env->edges[e].src], jg->group[i]) == 0) {
                    chain_to = env->edges[e].src;
                    jg->chained[e] = true;
                }
            }
        }
        sl_job_vertex_t *v;
        if (chain_to >= 0) {
            v = &jg->v[jg->vertex_of[chain_to]];
        } else {
            v = &jg->v[jg->nv];
            v->id = jg->nv++;
            v->parallelism = sl_env_node_parallelism(env, n);
        }
        v->nodes = sl_realloc(v->nodes, (size_t)(v->nnodes + 1) * sizeof(int));
        jg->index_in_vertex[i] = v->nnodes;
        v->nodes[v->nnodes++] = i;
        jg->vertex_of[i] = v->id;
        size_t l = strlen(v->name);
        snprintf(v->name + l, sizeof v->name - l, "%s%s%s", l ? " -> " : "",
                 n->kind == SL_NODE_SOURCE ? "Source: " : n->kind == SL_NODE_SINK ? "Sink: " : "", n->name);
    }
    return 0;
}

void sl_job_graph_free(sl_job_graph_t *jg) {
    for (int i = 0; i < jg->nv; i++) sl_free(jg->v[i].nodes);
    sl_free(jg->v);
    sl_free(jg->vertex_of);
    sl_free(jg->index_in_vertex);
    sl_free(jg->chained);
    sl_free(jg->part);
    sl_free(jg->group);
    memset(jg, 0, sizeof *jg);
}
