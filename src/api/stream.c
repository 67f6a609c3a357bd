/*
 * stream.c — the DataStream builder: sources, transformations, keying,
 * partitioning, unions, side outputs and sinks add nodes and edges to the
 * environment's stream graph.
 */
#include <stdio.h>

#include "api/env_int.h"
#include "common/common.h"
#include "operators/basic_ops.h"
#include "operators/source_op.h"
#include "types/schema_int.h"

static void free_stream(void *p) {
    sl_stream_t *s = p;
    sl_free(s->ins);
    sl_free(s);
}

static void free_plain(void *p) { sl_free(p); }

static sl_stream_t *stream_new(sl_env_t *env, int node, int nins, const sl_schema_t *schema) {
    sl_stream_t *s = sl_calloc(1, sizeof *s);
    s->env = env;
    s->node = node;
    s->nins = nins;
    s->ins = sl_calloc((size_t)(nins ? nins : 1), sizeof *s->ins);
    s->schema = schema;
    sl_env_own(env, s, free_stream);
    return s;
}

static sl_stream_t *stream_copy(const sl_stream_t *in) {
    sl_stream_t *s = stream_new(in->env, in->node, in->nins, in->schema);
    memcpy(s->ins, in->ins, (size_t)in->nins * sizeof *s->ins);
    return s;
}

static sl_node_t *node_new(sl_env_t *env, sl_node_kind_t kind, const char *name) {
    sl_node_t *n = sl_calloc(1, sizeof *n);
    n->id = env->nnodes;
    n->kind = kind;
    n->name = sl_strdup(name ? name : "operator");
    n->key[0].field = n->key[1].field = -1;
    env->nodes = sl_realloc(env->nodes, (size_t)(env->nnodes + 1) * sizeof *env->nodes);
    env->nodes[env->nnodes++] = n;
    return n;
}

static void add_edge(sl_env_t *env, const sl_stream_input_t *in, int dst, int dst_input) {
    if (env->nedges == env->edges_cap) {
        env->edges_cap = env->edges_cap ? env->edges_cap * 2 : 16;
        env->edges = sl_realloc(env->edges, (size_t)env->edges_cap * sizeof *env->edges);
    }
    sl_edge_t *e = &env->edges[env->nedges++];
    e->src = in->node;
    e->tag = in->tag;
    e->dst = dst;
    e->dst_input = dst_input;
    e->part = in->part;
    e->key = in->key;
}

static sl_stream_t *node_stream(sl_env_t *env, sl_node_t *n) {
    sl_stream_t *s = stream_new(env, n->id, 1, n->out_schema);
    s->ins[0].node = n->id;
    s->ins[0].tag = 0;
    s->ins[0].part = SL_PART_DEFAULT;
    s->ins[0].key.field = -1;
    return s;
}

sl_stream_t *sl_from_source(sl_env_t *env, sl_source_t src, sl_watermark_strategy_t ws, const char *name) {
    char schema_err[512];
    if (!src.ops || !src.schema) {
        if (!src.schema && sl__schema_take_parse_error(schema_err, sizeof schema_err))
            sl_env_errorf(env, "source '%s': %s", name ? name : "", schema_err); /* sl_schema_parse(bad DDL) */
        else
            sl_env_errorf(env, "source '%s': no source given", name ? name : "");
        if (src.ops && src.ops->destroy) src.ops->destroy(src.ctx);
        sl_schema_unref(src.schema);
        return NULL;
    }
    if (ws.kind != SL_WM_NONE && ws.timestamp_field &&
        sl_schema_index(src.schema, ws.timestamp_field) < 0) {
        sl_env_errorf(env, "source '%s': timestamp field '%s' is not in its schema", name ? name : src.ops->name,
                      ws.timestamp_field);
    } else if (ws.kind != SL_WM_NONE && ws.timestamp_field) {
        sl_type_t t = sl_schema_field_type(src.schema, sl_schema_index(src.schema, ws.timestamp_field));
        if (t != SL_BIGINT && t != SL_TIMESTAMP)
            sl_env_errorf(env, "source '%s': timestamp field '%s' must be BIGINT or TIMESTAMP, not %s",
                          name ? name : src.ops->name, ws.timestamp_field, sl_type_name(t));
    }
    if (ws.max_out_of_orderness_ms < 0 || ws.idle_timeout_ms < 0)
        sl_env_errorf(env, "source '%s': negative out-of-orderness or idle timeout", name ? name : src.ops->name);
    sl_node_t *n = node_new(env, SL_NODE_SOURCE, name ? name : src.ops->name);
    n->source = src;
    n->wm = ws;
    if (ws.timestamp_field) n->wm.timestamp_field = NULL; /* resolved into the spec below */
    n->out_schema = sl_schema_ref(src.schema);
    n->spec = sl_source_spec_new(&n->source, ws);
    n->free_spec = sl_source_spec_free;
    n->create = sl_source_op_create;
    return node_stream(env, n);
}

const sl_schema_t *sl_stream_schema(const sl_stream_t *s) { return s ? s->schema : NULL; }

static sl_node_t *configurable(sl_stream_t *s, const char *what) {
    if (!s) return NULL;
    if (s->node < 0) {
        sl_env_errorf(s->env, "%s: cannot be set on a union or partitioning; set it on an operator", what);
        return NULL;
    }
    return s->env->nodes[s->node];
}

sl_stream_t *sl_uid(sl_stream_t *s, const char *uid) {
    sl_node_t *n = configurable(s, "uid");
    if (!n) return s;
    for (int i = 0; i < s->env->nnodes; i++)
        if (s->env->nodes[i] != n && s->env->nodes[i]->uid && strcmp(s->env->nodes[i]->uid, uid) == 0) {
            sl_env_errorf(s->env, "uid '%s' is used by two operators ('%s' and '%s')", uid, s->env->nodes[i]->name,
                          n->name);
            return s;
        }
    sl_free(n->uid);
    n->uid = sl_strdup(uid);
    return s;
}

sl_stream_t *sl_keyed_state_schema(sl_stream_t *s, const char *state, const sl_schema_t *schema) {
    sl_node_t *n = configurable(s, "keyed state schema");
    if (!n) return s;
    if (!state || !*state || !schema) {
        sl_env_errorf(s->env, "operator '%s': a typed keyed state needs a name and a schema", n->name);
        return s;
    }
    if (n->kind != SL_NODE_OPERATOR || !(n->keyed[0] || n->keyed[1])) {
        sl_env_errorf(s->env, "operator '%s': state '%s' has a schema, but the operator is not keyed (declare typed "
                      "state on the stream a keyed operator returns)", n->name, state);
        return s;
    }
    for (int k = 0; k < n->nstate_schemas; k++)
        if (strcmp(n->state_names[k], state) == 0) {
            sl_env_errorf(s->env, "operator '%s': state '%s' is given a schema twice", n->name, state);
            return s;
        }
    if (sl_schema_field_count(schema) == 0) {
        sl_env_errorf(s->env, "operator '%s': state '%s' has a schema without fields", n->name, state);
        return s;
    }
    n->state_names = sl_realloc(n->state_names, (size_t)(n->nstate_schemas + 1) * sizeof *n->state_names);
    n->state_schemas = sl_realloc(n->state_schemas, (size_t)(n->nstate_schemas + 1) * sizeof *n->state_schemas);
    n->state_names[n->nstate_schemas] = sl_strdup(state);
    n->state_schemas[n->nstate_schemas++] = sl_schema_ref((sl_schema_t *)schema);
    return s;
}

sl_stream_t *sl_name(sl_stream_t *s, const char *name) {
    sl_node_t *n = configurable(s, "name");
    if (n) {
        sl_free(n->name);
        n->name = sl_strdup(name);
    }
    return s;
}

sl_stream_t *sl_parallelism(sl_stream_t *s, int p) {
    sl_node_t *n = configurable(s, "parallelism");
    if (!n) return s;
    if (p < 1 || p > 32768)
        sl_env_errorf(s->env, "operator '%s': parallelism %d is out of range [1, 32768]", n->name, p);
    else
        n->parallelism = p;
    return s;
}

sl_stream_t *sl_start_new_chain(sl_stream_t *s) {
    sl_node_t *n = configurable(s, "start_new_chain");
    if (n) n->new_chain = true;
    return s;
}

sl_stream_t *sl_slot_sharing_group(sl_stream_t *s, const char *group) {
    sl_node_t *n = configurable(s, "slot_sharing_group");
    if (!n) return s;
    if (!group || !group[0] || strlen(group) > 200) {
        sl_env_errorf(s->env, "operator '%s': slot sharing group must be a name of 1 to 200 characters", n->name);
        return s;
    }
    sl_free(n->slot_group);
    n->slot_group = sl_strdup(group);
    return s;
}

sl_stream_t *sl_graph_add_operator(sl_stream_t *in, sl_stream_t *in2, bool keyed, const char *default_name,
                                   sl_op_create_fn create, void *spec, void (*free_spec)(void *),
                                   const sl_schema_t *out_schema) {
    if (!in || (in2 && in2->env != in->env)) {
        if (free_spec) free_spec(spec);
        return NULL;
    }
    sl_env_t *env = in->env;
    char schema_err[512];
    if (!out_schema && sl__schema_take_parse_error(schema_err, sizeof schema_err)) {
        /* the schema argument was sl_schema_parse(...) of bad DDL */
        sl_env_errorf(env, "%s: %s", default_name, schema_err);
        if (free_spec) free_spec(spec);
        return NULL;
    }
    sl_node_t *n = node_new(env, SL_NODE_OPERATOR, default_name);
    n->ninputs = in2 ? 2 : 1;
    n->create = create;
    n->spec = spec;
    n->free_spec = free_spec;
    n->out_schema = sl_schema_ref((sl_schema_t *)(out_schema ? out_schema : in->schema));
    sl_stream_t *ins[2] = {in, in2};
    for (int k = 0; k < n->ninputs; k++) {
        n->in_schema[k] = ins[k]->schema;
        n->keyed[k] = keyed;
        if (keyed) {
            if (!ins[k]->ins[0].keyed) {
                sl_env_errorf(env, "operator '%s': input %d is not a keyed stream", default_name, k + 1);
                continue;
            }
            n->key[k] = ins[k]->ins[0].key;
        }
        for (int i = 0; i < ins[k]->nins; i++) add_edge(env, &ins[k]->ins[i], n->id, k);
    }
    return node_stream(env, n);
}

/* ---- simple transformations ---- */

static sl_stream_t *add_basic(sl_stream_t *s, int kind, void *fn, sl_fn_opts_t o, sl_schema_t *out, const char *name) {
    if (!s) {
        sl_schema_unref(out);
        return NULL;
    }
    if (!fn) {
        sl_env_errorf(s->env, "%s: no function given", name);
        sl_schema_unref(out);
        return NULL;
    }
    sl_basic_spec_t *spec = sl_calloc(1, sizeof *spec);
    spec->kind = kind;
    spec->fn = fn;
    spec->opts = o;
    sl_stream_t *r = sl_graph_add_operator(s, NULL, false, name, sl_basic_op_create, spec, free_plain, out);
    sl_schema_unref(out);
    return r;
}

static sl_fn_opts_t plain(void *ctx) {
    sl_fn_opts_t o = {.ctx = ctx};
    return o;
}

sl_stream_t *sl_map(sl_stream_t *s, sl_map_fn fn, void *ctx, sl_schema_t *out) {
    return add_basic(s, SL_BASIC_MAP, (void *)fn, plain(ctx), out, "Map");
}
sl_stream_t *sl_filter(sl_stream_t *s, sl_filter_fn fn, void *ctx) {
    return add_basic(s, SL_BASIC_FILTER, (void *)fn, plain(ctx), NULL, "Filter");
}
sl_stream_t *sl_flat_map(sl_stream_t *s, sl_flat_map_fn fn, void *ctx, sl_schema_t *out) {
    return add_basic(s, SL_BASIC_FLAT_MAP, (void *)fn, plain(ctx), out, "FlatMap");
}
sl_stream_t *sl_map_ex(sl_stream_t *s, sl_map_fn fn, sl_fn_opts_t o, sl_schema_t *out) {
    return add_basic(s, SL_BASIC_MAP, (void *)fn, o, out, "Map");
}
sl_stream_t *sl_filter_ex(sl_stream_t *s, sl_filter_fn fn, sl_fn_opts_t o) {
    return add_basic(s, SL_BASIC_FILTER, (void *)fn, o, NULL, "Filter");
}
sl_stream_t *sl_flat_map_ex(sl_stream_t *s, sl_flat_map_fn fn, sl_fn_opts_t o, sl_schema_t *out) {
    return add_basic(s, SL_BASIC_FLAT_MAP, (void *)fn, o, out, "FlatMap");
}

sl_stream_t *sl_assign_timestamps(sl_stream_t *s, sl_watermark_strategy_t ws) {
    if (!s) return NULL;
    if (ws.timestamp_field && sl_schema_index(s->schema, ws.timestamp_field) < 0) {
        sl_env_errorf(s->env, "assign_timestamps: field '%s' is not in the stream's schema", ws.timestamp_field);
        return NULL;
    }
    void *spec = sl_timestamps_spec_new(s->schema, ws);
    return sl_graph_add_operator(s, NULL, false, "Timestamps/Watermarks", sl_timestamps_op_create, spec,
                                 sl_timestamps_spec_free, NULL);
}

/* ---- partitioning ---- */

static sl_stream_t *repartition(sl_stream_t *s, sl_partitioning_t p) {
    if (!s) return NULL;
    sl_stream_t *r = stream_copy(s);
    r->node = -1;
    for (int i = 0; i < r->nins; i++) {
        r->ins[i].part = p;
        r->ins[i].keyed = false;
    }
    return r;
}

sl_stream_t *sl_rebalance(sl_stream_t *s) { return repartition(s, SL_PART_REBALANCE); }
sl_stream_t *sl_rescale(sl_stream_t *s) { return repartition(s, SL_PART_RESCALE); }
sl_stream_t *sl_broadcast(sl_stream_t *s) { return repartition(s, SL_PART_BROADCAST); }
sl_stream_t *sl_forward(sl_stream_t *s) { return repartition(s, SL_PART_FORWARD); }

sl_stream_t *sl_union(sl_stream_t *a, sl_stream_t *b) {
    if (!a || !b) return NULL;
    if (!sl_schema_equal(a->schema, b->schema)) {
        char sa[256], sb[256];
        sl_schema_format(a->schema, sa, sizeof sa);
        sl_schema_format(b->schema, sb, sizeof sb);
        sl_env_errorf(a->env, "union: schemas differ: (%s) vs (%s)", sa, sb);
        return NULL;
    }
    sl_stream_t *r = stream_new(a->env, -1, a->nins + b->nins, a->schema);
    memcpy(r->ins, a->ins, (size_t)a->nins * sizeof *r->ins);
    memcpy(r->ins + a->nins, b->ins, (size_t)b->nins * sizeof *r->ins);
    return r;
}

sl_stream_t *sl_side_output(sl_stream_t *s, const char *tag) {
    if (!s) return NULL;
    int id = sl_tag_lookup(&s->env->tags, tag);
    if (id < 0) {
        sl_env_errorf(s->env, "side output '%s' was never declared (sl_output_tag / sl_window_late_output)", tag);
        return NULL;
    }
    if (s->node < 0) {
        sl_env_errorf(s->env, "side output '%s': select it from the operator that emits it", tag);
        return NULL;
    }
    sl_stream_t *r = node_stream(s->env, s->env->nodes[s->node]);
    r->ins[0].tag = id;
    r->schema = s->env->tags.tags[id].schema;
    return r;
}

/* ---- keying ---- */

static sl_keyed_t *keyed_new(sl_stream_t *s, sl_key_selector_t ks) {
    sl_stream_t *r = stream_copy(s);
    r->node = -1;
    for (int i = 0; i < r->nins; i++) {
        r->ins[i].part = SL_PART_HASH;
        r->ins[i].key = ks;
        r->ins[i].keyed = true;
    }
    sl_keyed_t *k = sl_calloc(1, sizeof *k);
    k->s = r;
    sl_env_own(s->env, k, free_plain);
    return k;
}

sl_keyed_t *sl_key_by(sl_stream_t *s, const char *field) {
    if (!s) return NULL;
    int i = sl_schema_index(s->schema, field);
    if (i < 0) {
        char sc[512];
        sl_schema_format(s->schema, sc, sizeof sc);
        sl_env_errorf(s->env, "key_by: no field '%s' in (%s)", field, sc);
        return NULL;
    }
    sl_key_selector_t ks = {i, NULL, NULL};
    return keyed_new(s, ks);
}

sl_keyed_t *sl_key_by_fn(sl_stream_t *s, sl_key_fn fn, void *ctx) {
    if (!s) return NULL;
    if (!fn) {
        sl_env_errorf(s->env, "key_by: no key selector given");
        return NULL;
    }
    sl_key_selector_t ks = {-1, fn, ctx};
    return keyed_new(s, ks);
}

/* ---- process functions ---- */

sl_stream_t *sl_keyed_process(sl_keyed_t *k, sl_process_fn_t fn, sl_schema_t *out) {
    if (!k) {
        sl_schema_unref(out);
        return NULL;
    }
    if (!fn.process) {
        sl_env_errorf(k->s->env, "keyed process: no process callback");
        sl_schema_unref(out);
        return NULL;
    }
    sl_process_spec_t *spec = sl_calloc(1, sizeof *spec);
    spec->one = fn;
    sl_stream_t *r = sl_graph_add_operator(k->s, NULL, true, "KeyedProcess", sl_process_op_create, spec, free_plain, out);
    sl_schema_unref(out);
    return r;
}

struct sl_connected {
    sl_stream_t *a, *b;
    bool keyed;
};

sl_connected_t *sl_connect(sl_stream_t *a, sl_stream_t *b) {
    if (!a || !b) return NULL;
    sl_connected_t *c = sl_calloc(1, sizeof *c);
    c->a = a;
    c->b = b;
    sl_env_own(a->env, c, free_plain);
    return c;
}

sl_connected_t *sl_connect_keyed(sl_keyed_t *a, sl_keyed_t *b) {
    if (!a || !b) return NULL;
    sl_connected_t *c = sl_connect(a->s, b->s);
    c->keyed = true;
    return c;
}

sl_stream_t *sl_co_process(sl_connected_t *c, sl_co_process_fn_t fn, sl_schema_t *out) {
    if (!c) {
        sl_schema_unref(out);
        return NULL;
    }
    if (!fn.process1 || !fn.process2) {
        sl_env_errorf(c->a->env, "co_process: process1 and process2 are both required");
        sl_schema_unref(out);
        return NULL;
    }
    sl_process_spec_t *spec = sl_calloc(1, sizeof *spec);
    spec->two = fn;
    spec->two_inputs = true;
    sl_stream_t *r = sl_graph_add_operator(c->a, c->b, c->keyed, c->keyed ? "KeyedCoProcess" : "CoProcess",
                                           sl_process_op_create, spec, free_plain, out);
    sl_schema_unref(out);
    return r;
}

/* ---- sinks ---- */

sl_stream_t *sl_sink_to(sl_stream_t *s, sl_sink_t sink, const char *name) {
    if (!s || !sink.ops) {
        if (s) sl_env_errorf(s->env, "sink '%s': no sink given", name ? name : "");
        return NULL;
    }
    sl_sink_spec_t *spec = sl_calloc(1, sizeof *spec);
    spec->sink = sink;
    sl_stream_t *r = sl_graph_add_operator(s, NULL, false, name ? name : sink.ops->name, sl_sink_op_create, spec,
                                           sl_sink_spec_free, NULL);
    if (r) s->env->nodes[r->node]->kind = SL_NODE_SINK;
    return r;
}
