/*
 * temporal_join_api.c — the builder of the event-time temporal join
 * (include/sluice/temporal_join.h): sl_temporal_join checks the two keyed
 * inputs and the options, resolves the output's fields and adds the
 * TemporalJoin node; the running operator is operators/temporal_join.c.
 * User's thread, before execution.
 */
#include <stdio.h>

#include "api/env_int.h"
#include "common/common.h"
#include "graph/stream_graph.h"
#include "operators/temporal_join_op.h"
#include "sluice/temporal_join.h"

static void free_stats(void *p) { sl_free(p); }

sl_stream_t *sl_temporal_join(sl_keyed_t *probe, sl_keyed_t *versions, const sl_temporal_join_opts_t *opts) {
    if (!probe || !versions) {
        sl_env_t *env = probe ? probe->s->env : versions ? versions->s->env : NULL;
        if (env) sl_env_errorf(env, "temporal join: the %s side is missing (an earlier error?)", probe ? "versions" : "probe");
        return NULL;
    }
    sl_env_t *env = probe->s->env;
    sl_temporal_join_opts_t o = {0};
    if (opts) o = *opts;
    if (o.kind != SL_TEMPORAL_INNER && o.kind != SL_TEMPORAL_LEFT) {
        sl_env_errorf(env, "temporal join: unknown join kind %d", (int)o.kind);
        return NULL;
    }
    const sl_schema_t *ps = probe->s->schema, *vs = versions->s->schema;
    const sl_key_selector_t *pk = &probe->s->ins[0].key, *vk = &versions->s->ins[0].key;
    if (pk->field >= 0 && vk->field >= 0 &&
        sl_schema_field_type(ps, pk->field) != sl_schema_field_type(vs, vk->field)) {
        sl_env_errorf(env, "temporal join: the probe key '%s' is %s but the versions key '%s' is %s (equal keys must "
                      "have equal types)",
                      sl_schema_field_name(ps, pk->field), sl_type_name(sl_schema_field_type(ps, pk->field)),
                      sl_schema_field_name(vs, vk->field), sl_type_name(sl_schema_field_type(vs, vk->field)));
        return NULL;
    }
    int del = -1;
    if (o.delete_field) {
        del = sl_schema_index(vs, o.delete_field);
        if (del < 0) {
            sl_env_errorf(env, "temporal join: delete field '%s' is not in the changelog's schema", o.delete_field);
            return NULL;
        }
        if (sl_schema_field_type(vs, del) != SL_BOOLEAN) {
            sl_env_errorf(env, "temporal join: delete field '%s' must be BOOLEAN, not %s", o.delete_field,
                          sl_type_name(sl_schema_field_type(vs, del)));
            return NULL;
        }
    }
    int nvs = sl_schema_field_count(vs);
    int *vf = sl_calloc((size_t)(nvs + (o.nversion_fields > 0 ? o.nversion_fields : 0) + 1), sizeof *vf);
    int nv = 0;
    if (o.version_fields) {
        if (o.nversion_fields < 0) {
            sl_env_errorf(env, "temporal join: negative number of version fields");
            sl_free(vf);
            return NULL;
        }
        for (int i = 0; i < o.nversion_fields; i++) {
            int f = o.version_fields[i] ? sl_schema_index(vs, o.version_fields[i]) : -1;
            if (f < 0) {
                sl_env_errorf(env, "temporal join: version field '%s' is not in the changelog's schema",
                              o.version_fields[i] ? o.version_fields[i] : "(null)");
                sl_free(vf);
                return NULL;
            }
            vf[nv++] = f;
        }
    } else {
        for (int f = 0; f < nvs; f++)
            if (f != del) vf[nv++] = f;
    }
    /* output schema: probe fields, then the version fields */
    sl_schema_t *out = sl_schema_new();
    int np = sl_schema_field_count(ps);
    for (int i = 0; i < np; i++)
        sl_schema_add(out, sl_schema_field_name(ps, i), sl_schema_field_type(ps, i), sl_schema_field_nullable(ps, i));
    for (int j = 0; j < nv; j++) {
        char name[256];
        snprintf(name, sizeof name, "%s%s", o.version_prefix ? o.version_prefix : "", sl_schema_field_name(vs, vf[j]));
        if (sl_schema_index(out, name) >= 0) {
            sl_env_errorf(env, "temporal join: output field '%s' would appear twice (choose version_fields or a "
                          "version_prefix)", name);
            sl_schema_unref(out);
            sl_free(vf);
            return NULL;
        }
        bool nullable = o.kind == SL_TEMPORAL_LEFT || sl_schema_field_nullable(vs, vf[j]);
        sl_schema_add(out, name, sl_schema_field_type(vs, vf[j]), nullable);
    }
    sl_temporal_join_spec_t *spec = sl_calloc(1, sizeof *spec);
    spec->kind = o.kind;
    spec->delete_field = del;
    spec->vfields = vf;
    spec->nv = nv;
    spec->nprobe = np;
    spec->stats = sl_calloc(1, sizeof *spec->stats);
    atomic_init(&spec->stats->versions_end, 0);
    sl_env_own(env, spec->stats, free_stats);
    if (o.stats_out) *o.stats_out = spec->stats;
    sl_stream_t *r = sl_graph_add_operator(probe->s, versions->s, true, "TemporalJoin", sl_temporal_join_op_create, spec,
                                           sl_temporal_join_spec_free, out);
    sl_schema_unref(out);
    return r;
}
