/*
 * plan_build.c — the builder's last step: the environment's stream graph,
 * chained (graph/job_graph.c), becomes a job plan (plan/plan.h) — data only
 * — and a table of the user code its nodes name (plan/job_code.h).  Nothing
 * that runs the job looks at the environment afterwards.
 */
#include "api/plan_build.h"

#include <ctype.h>
#include <stdio.h>

#include "graph/job_graph.h"
#include "operators/basic_ops.h"

/* The uid of a node the user gave none (Flink's generated operator ids):
 * derived from its place in the graph — its kind, name and inputs (their
 * uids, output tags and partitioning), and how many earlier nodes had the
 * same of all that — never from creation order or parallelism.  So adding
 * an operator elsewhere, or rescaling, keeps it; changing what is upstream
 * of it changes it (as in Flink: set sl_uid on stateful operators).
 * "<name>-<16 hex digits>", the name cut to [A-Za-z0-9_-]. */
static void derive_uids(const sl_env_t *env, char **uids) {
    uint64_t *h = sl_calloc((size_t)(env->nnodes ? env->nnodes : 1), sizeof *h);
    for (int i = 0; i < env->nnodes; i++) { /* inputs are created before the nodes that read them */
        const sl_node_t *n = env->nodes[i];
        sl_buf_t b = {0};
        uint8_t kind = (uint8_t)n->kind;
        sl_buf_append(&b, &kind, 1);
        const char *name = n->name ? n->name : "";
        sl_buf_append(&b, name, strlen(name) + 1);
        for (int in = 0; in < 2; in++) /* each input's edges, in the order they were added */
            for (int e = 0; e < env->nedges; e++) {
                const sl_edge_t *ed = &env->edges[e];
                if (ed->dst != n->id || ed->dst_input != in || ed->src < 0 || ed->src >= env->nnodes) continue;
                const char *su = uids[ed->src];
                int32_t v[3] = {ed->dst_input, ed->tag, (int32_t)ed->part};
                sl_buf_append(&b, su, strlen(su) + 1);
                sl_buf_append(&b, v, sizeof v);
            }
        h[i] = sl_hash_bytes(b.p, b.len);
        sl_buf_free(&b);
        uint64_t same = 0;
        for (int k = 0; k < i; k++) same += h[k] == h[i];
        uint64_t d = h[i] ^ (same * 0x9E3779B97F4A7C15ull);
        char slug[40];
        size_t o = 0;
        for (const char *c = name; *c && o + 1 < sizeof slug; c++)
            slug[o++] = (isalnum((unsigned char)*c) || *c == '-' || *c == '_') ? (char)tolower((unsigned char)*c) : '-';
        slug[o] = 0;
        char uid[80];
        snprintf(uid, sizeof uid, "%s-%016llx", o ? slug : "op", (unsigned long long)d);
        uids[i] = sl_strdup(n->uid ? n->uid : uid);
    }
    sl_free(h);
}

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

/* How input 0's key is made (plan.h, sl_plan_node_t.key). */
static char *plan_key(const sl_node_t *n) {
    if (!n->keyed[0]) return sl_strdup("");
    int idx[SL_KEY_MAX_FIELDS], nf = 0;
    const sl_schema_t *in = n->in_schema[0];
    if (!in || !sl_key_is_fields(&n->key[0], idx, &nf)) return sl_strdup("function");
    sl_schema_t *ks = sl_schema_new();
    for (int k = 0; k < nf; k++)
        sl_schema_add(ks, sl_schema_field_name(in, idx[k]), sl_schema_field_type(in, idx[k]),
                      sl_schema_field_nullable(in, idx[k]));
    char ddl[4096];
    sl_schema_format(ks, ddl, sizeof ddl);
    sl_schema_unref(ks);
    char *out = sl_malloc(strlen(ddl) + 8);
    sprintf(out, "%s %s", n->key[0].field >= 0 ? "field" : "fields", ddl);
    return out;
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
    c->buffer_timeout_ms = env->buffer_timeout_ms;
    c->wm_interval_ms = env->wm_interval_ms;
    c->ckpt_enabled = env->ckpt_enabled;
    c->ckpt = env->ckpt;
    c->ckpt_dir = sl_strdup(env->ckpt_dir ? env->ckpt_dir : "");
    c->savepoint_dir = sl_strdup(env->savepoint_dir ? env->savepoint_dir : "");
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
    char **uids = sl_calloc((size_t)(env->nnodes ? env->nnodes : 1), sizeof *uids);
    derive_uids(env, uids);
    for (int i = 0; i < env->nnodes; i++) {
        const sl_node_t *n = env->nodes[i];
        sl_plan_node_t *pn = &p->nodes[i];
        pn->id = n->id;
        pn->kind = n->kind == SL_NODE_SOURCE ? SL_PLAN_SOURCE : n->kind == SL_NODE_SINK ? SL_PLAN_SINK : SL_PLAN_OPERATOR;
        pn->name = sl_strdup(n->name ? n->name : "");
        pn->uid = uids[i];
        uids[i] = NULL;
        pn->has_user_uid = n->uid != NULL;
        pn->parallelism = sl_env_node_parallelism(env, n);
        pn->ninputs = n->ninputs;
        pn->keyed[0] = n->keyed[0];
        pn->keyed[1] = n->keyed[1];
        pn->slot_group = sl_strdup(jg.group[i]);
        char ddl[4096] = "";
        if (n->out_schema) sl_schema_format(n->out_schema, ddl, sizeof ddl);
        pn->out_schema = sl_strdup(ddl);
        pn->nstate_schemas = n->nstate_schemas;
        pn->state_schemas = n->nstate_schemas ? sl_calloc((size_t)n->nstate_schemas, sizeof *pn->state_schemas) : NULL;
        for (int k = 0; k < n->nstate_schemas; k++) {
            sl_schema_format(n->state_schemas[k], ddl, sizeof ddl);
            pn->state_schemas[k].name = sl_strdup(n->state_names[k]);
            pn->state_schemas[k].schema = sl_strdup(ddl);
        }
        pn->key = plan_key(n);

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
    sl_free(uids);
    sl_job_graph_free(&jg);
    sl_plan_index(p);
    if (env->restore_path) {
        char names[2000];
        if (sl_plan_derived_uids(p, names, sizeof names) > 0)
            fprintf(stderr, "sluice: restoring job '%s': operators without sl_uid, whose state is matched by a uid "
                            "derived from their place in the graph (it changes when what is upstream of them "
                            "changes): %s\n",
                    p->job_name, names);
    }
    *out = p;
    return 0;
}
