/*
 * cep_api.c — the builder of CEP (Flink's CEP.pattern(...).select(...)):
 * sl_cep compiles the pattern (cep/pattern.c), records what is wrong on the
 * environment, and adds the CEP operator (cep/cep_op.c) as a keyed process
 * function of the stream.  User's thread, before execution.
 */
#include "cep/cep_int.h"
#include "common/common.h"
#include "graph/stream_graph.h"

sl_stream_t *sl_cep(sl_keyed_t *k, sl_pattern_t *p, sl_cep_fn_t fn, sl_schema_t *out) {
    if (!k) {
        sl_pattern_free(p);
        sl_schema_unref(out);
        return NULL;
    }
    sl_env_t *env = k->s->env;
    char err[320];
    cep_def_t *d = cep_compile(p, err, sizeof err);
    sl_pattern_free(p);
    if (!d) {
        sl_env_errorf(env, "%s", err);
        sl_schema_unref(out);
        return NULL;
    }
    if (!fn.select) {
        sl_env_errorf(env, "CEP: no select function");
        cep_def_free(d);
        sl_schema_unref(out);
        return NULL;
    }
    if (fn.late_tag && sl_env_tag(env, fn.late_tag, k->s->schema) < 0) {
        cep_def_free(d);
        sl_schema_unref(out);
        return NULL;
    }
    cep_od_t *od = sl_calloc(1, sizeof *od);
    od->def = d;
    od->fn = fn;
    od->late_tag = fn.late_tag ? sl_strdup(fn.late_tag) : NULL;
    od->fn.late_tag = od->late_tag;
    sl_env_own(env, od, cep_od_free);
    sl_stream_t *r = sl_keyed_process(k, cep_process_fn(od), out);
    if (r) sl_name(r, "CEP");
    return r;
}
