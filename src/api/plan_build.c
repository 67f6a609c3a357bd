/*
 * plan_build.c — the builder's last step: the environment's stream graph,
 * chained (graph/job_graph.c), becomes a job plan (plan/plan.h) — data only
 * — and a table of the user code its nodes name (plan/job_code.h).  Nothing
 * that runs the job looks at the environment afterwards.
 */
#include "api/plan_build.h"

#include <stdio.h>

#include "graph/job_graph.h"
#include "operators/basic_ops.h"

static int plan_part(sl_partitioning_t p) {
    switch (p) {
    case SL_PART_FORWARD: return SL_PLAN_FORWARD;
    case SL_PART_REBALANCE: return SL_PLAN_REBALANCE;
    case SL_PART_RESCALE: return SL_PLAN_RESCALE;
    case SL_PART_BROADCAST: return SL_PLAN_BROADCAST;
    case SL_PART_HASH: return SL_PLAN_HASH;
    default: return SL_PLAN_REBALANCE;
    }
}

int sl_plan_build(const sl_env_t *env, const char *job_name, sl_plan_t **out, sl_job_code_t *code, char *err,
                  size_t errlen) {
    *out = NULL;
    memset(code, 0, sizeof *code);
    sl_job_graph_t jg;
    int rc = sl_job_graph_build(env, &jg, err, errlen);
    if (rc < 0) {
        sl_job_graph_free(&jg);
        return rc;
    }
    sl_plan_t *p = sl_calloc(1, sizeof *p);
    p->version = SL_PLAN_VERSION;
    p->job_name = sl_strdup(job_name ? job_name : "job");
    char id[300];
    sl_env_job_id(job_name, id, sizeof id);
    p->job_id = sl_strdup(id);

    sl_plan_config_t *c = &p->cfg;
    c->max_parallelism = jg.max_parallelism;
    c->buffer_size = env->buffer_size;
    c->buffers_per_channel = env->buffers_per_channel;
    c->wm_interval_ms = env->wm_interval_ms;
    c->ckpt_enabled = env->ckpt_enabled;
    c->ckpt = env->ckpt;
    c->ckpt_dir = sl_strdup(env->ckpt_dir ? env->ckpt_dir : "");
    c->ckpt_retained = env->ckpt_retained;
    c->ckpt_retention = env->ckpt_retention;
    c->backend = env->backend;
    c->rocksdb_dir = sl_strdup(env->rocksdb_dir ? env->rocksdb_dir : "");
    c->rocksdb_cache_bytes = env->rocksdb_cache_bytes;
    c->rocksdb_write_buffer_bytes = env->rocksdb_write_buffer_bytes;
    c->rocksdb_value_cache_bytes = env->rocksdb_value_cache_bytes;
    c->incremental = env->incremental;
    c->restart = env->restart_set ? env->restart
                                  : sl_restart_defaults(env->ckpt_enabled ? SL_RESTART_FIXED_DELAY : SL_RESTART_NONE);

    p->nnodes = env->nnodes;
    p->nodes = sl_calloc((size_t)(p->nnodes ? p->nnodes : 1), sizeof *p->nodes);
    code->nnodes = env->nnodes;
    code->nodes = sl_calloc((size_t)(p->nnodes ? p->nnodes : 1), sizeof *code->nodes);
    for (int i = 0; i < env->nnodes; i++) {
        const sl_node_t *n = env->nodes[i];
        sl_plan_node_t *pn = &p->nodes[i];
        pn->id = n->id;
        pn->kind = n->kind == SL_NODE_SOURCE ? SL_PLAN_SOURCE : n->kind == SL_NODE_SINK ? SL_PLAN_SINK : SL_PLAN_OPERATOR;
        pn->name = sl_strdup(n->name ? n->name : "");
        char uid[300];
        if (n->uid)
            snprintf(uid, sizeof uid, "%s", n->uid);
        else
            snprintf(uid, sizeof uid, "node-%d", n->id);
        pn->uid = sl_strdup(uid);
        pn->has_user_uid = n->uid != NULL;
        pn->parallelism = sl_env_node_parallelism(env, n);
        pn->ninputs = n->ninputs;
        pn->keyed[0] = n->keyed[0];
        pn->keyed[1] = n->keyed[1];
        pn->slot_group = sl_strdup(jg.group[i]);
        char ddl[4096] = "";
        if (n->out_schema) sl_schema_format(n->out_schema, ddl, sizeof ddl);
        pn->out_schema = sl_strdup(ddl);

        sl_code_node_t *cn = &code->nodes[i];
        cn->create = n->create;
        cn->spec = n->spec;
        for (int k = 0; k < 2; k++) {
            cn->keyed[k] = n->keyed[k];
            cn->key[k] = n->keyed[k] ? &n->key[k] : NULL;
            cn->in_schema[k] = n->in_schema[k];
        }
        cn->out_schema = n->out_schema;
        if (n->kind == SL_NODE_SOURCE) cn->source_ops = n->source.ops;
        if (n->kind == SL_NODE_SINK) cn->sink = &((const sl_sink_spec_t *)n->spec)->sink;
    }
    p->nvertices = jg.nv;
    p->vertices = sl_calloc((size_t)(jg.nv ? jg.nv : 1), sizeof *p->vertices);
    for (int v = 0; v < jg.nv; v++) {
        sl_plan_vertex_t *pv = &p->vertices[v];
        pv->id = v;
        pv->name = sl_strdup(jg.v[v].name);
        pv->parallelism = jg.v[v].parallelism;
        pv->nnodes = jg.v[v].nnodes;
        pv->nodes = sl_calloc((size_t)pv->nnodes, sizeof *pv->nodes);
        memcpy(pv->nodes, jg.v[v].nodes, (size_t)pv->nnodes * sizeof *pv->nodes);
        pv->slot_group = sl_strdup(jg.group[pv->nodes[0]]);
    }
    p->nedges = env->nedges;
    p->edges = sl_calloc((size_t)(env->nedges ? env->nedges : 1), sizeof *p->edges);
    code->nedges = env->nedges;
    code->edge_key = sl_calloc((size_t)(env->nedges ? env->nedges : 1), sizeof *code->edge_key);
    for (int e = 0; e < env->nedges; e++) {
        const sl_edge_t *ed = &env->edges[e];
        p->edges[e] = (sl_plan_edge_t){.src = ed->src,
                                       .dst = ed->dst,
                                       .tag = ed->tag,
                                       .dst_input = ed->dst_input,
                                       .part = plan_part(jg.part[e]),
                                       .chained = jg.chained[e]};
        code->edge_key[e] = &ed->key;
    }
    p->ntags = env->tags.n;
    p->tags = sl_calloc((size_t)(p->ntags ? p->ntags : 1), sizeof *p->tags);
    for (int i = 0; i < p->ntags; i++) p->tags[i] = sl_strdup(i ? env->tags.tags[i].name : "");
    code->tags = &env->tags;
    code->clock = env->clock;
    code->clock_ctx = env->clock_ctx;
    sl_job_graph_free(&jg);
    sl_plan_index(p);
    *out = p;
    return 0;
}
