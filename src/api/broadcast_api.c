/*
 * broadcast_api.c — the builder of broadcast state (Flink's
 * BroadcastStream, BroadcastConnectedStream): sl_broadcast_stream,
 * sl_connect_broadcast and sl_broadcast_process check their arguments and
 * add the KeyedBroadcastProcess node; the running operator is
 * operators/broadcast_op.c.  User's thread, before execution.
 */
#include "api/env_int.h"
#include "common/common.h"
#include "graph/stream_graph.h"
#include "operators/broadcast_op.h"
#include "sluice/broadcast.h"

struct sl_broadcast {
    sl_stream_t *s;     /* the broadcast-partitioned stream */
    char **names;
    int nnames;
};

struct sl_bconnected {
    sl_keyed_t *keyed;
    sl_broadcast_t *b;
};

static void free_names(char **names, int n) {
    for (int i = 0; i < n; i++) sl_free(names[i]);
    sl_free(names);
}

static void free_broadcast(void *p) {
    sl_broadcast_t *b = p;
    free_names(b->names, b->nnames);
    sl_free(b);
}

static void free_plain(void *p) { sl_free(p); }

sl_broadcast_t *sl_broadcast_stream(sl_stream_t *s, const char *const *names, int n) {
    if (!s) return NULL;
    if (n < 1 || !names) {
        sl_env_errorf(s->env, "broadcast stream: at least one broadcast state name is needed");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!names[i] || !names[i][0]) {
            sl_env_errorf(s->env, "broadcast stream: broadcast state name %d is empty", i + 1);
            return NULL;
        }
        for (int j = 0; j < i; j++)
            if (strcmp(names[i], names[j]) == 0) {
                sl_env_errorf(s->env, "broadcast stream: broadcast state '%s' is declared twice", names[i]);
                return NULL;
            }
    }
    sl_broadcast_t *b = sl_calloc(1, sizeof *b);
    b->s = sl_broadcast(s);
    b->names = sl_calloc((size_t)n, sizeof *b->names);
    for (int i = 0; i < n; i++) b->names[i] = sl_strdup(names[i]);
    b->nnames = n;
    sl_env_own(s->env, b, free_broadcast);
    return b;
}

sl_bconnected_t *sl_connect_broadcast(sl_keyed_t *keyed, sl_broadcast_t *b) {
    if (!keyed || !b) {
        sl_env_t *env = keyed ? keyed->s->env : b ? b->s->env : NULL;
        if (env)
            sl_env_errorf(env, "connect_broadcast: the %s side is missing (an earlier error?)",
                          keyed ? "broadcast" : "keyed");
        return NULL;
    }
    if (keyed->s->env != b->s->env) {
        sl_env_errorf(keyed->s->env, "connect_broadcast: the two streams belong to different environments");
        return NULL;
    }
    /* The handles are typed, but a stream handle can be re-partitioned after
     * it was wrapped; check what the edges will say. */
    for (int i = 0; i < keyed->s->nins; i++)
        if (!keyed->s->ins[i].keyed || keyed->s->ins[i].part != SL_PART_HASH) {
            sl_env_errorf(keyed->s->env, "connect_broadcast: the keyed side is not a keyed stream");
            return NULL;
        }
    for (int i = 0; i < b->s->nins; i++)
        if (b->s->ins[i].part != SL_PART_BROADCAST) {
            sl_env_errorf(keyed->s->env, "connect_broadcast: the broadcast side is not broadcast");
            return NULL;
        }
    sl_bconnected_t *c = sl_calloc(1, sizeof *c);
    c->keyed = keyed;
    c->b = b;
    sl_env_own(keyed->s->env, c, free_plain);
    return c;
}

sl_stream_t *sl_broadcast_process(sl_bconnected_t *c, sl_broadcast_process_fn_t fn, sl_schema_t *out) {
    if (!c) {
        sl_schema_unref(out);
        return NULL;
    }
    sl_env_t *env = c->keyed->s->env;
    if (!fn.process_element || !fn.process_broadcast_element) {
        sl_env_errorf(env, "broadcast process: %s is required",
                      !fn.process_element ? "process_element" : "process_broadcast_element");
        sl_schema_unref(out);
        return NULL;
    }
    sl_broadcast_spec_t *spec = sl_calloc(1, sizeof *spec);
    spec->fn = fn;
    spec->nnames = c->b->nnames;
    spec->names = sl_calloc((size_t)spec->nnames, sizeof *spec->names);
    for (int i = 0; i < spec->nnames; i++) spec->names[i] = sl_strdup(c->b->names[i]);
    /* Added unkeyed, then input 0 is made keyed: only the keyed side has a
     * key selector (the operator gets a keyed backend and timers for it). */
    sl_stream_t *r = sl_graph_add_operator(c->keyed->s, c->b->s, false, "KeyedBroadcastProcess",
                                           sl_broadcast_op_create, spec, sl_broadcast_spec_free, out);
    sl_schema_unref(out);
    if (!r) return NULL;
    sl_node_t *n = env->nodes[r->node];
    n->keyed[0] = true;
    n->key[0] = c->keyed->s->ins[0].key;
    return r;
}
