/*
 * window_api.c — the windowed-stream part of the public API:
 * sl_window(keyed, assigner) with its settings (trigger, evictor, allowed
 * lateness, late-data side output), then reduce / aggregate / process add
 * a window operator node to the stream graph.
 *
 * Builder errors (bad assigner parameters, a missing function ...) are
 * recorded on the environment; the windowed handle is still returned so
 * calls can be chained, and the final call then returns NULL.  Handles are
 * owned by the environment (sl_env_own).  A windowed handle may feed more
 * than one window function: each node gets its own copy of the assigner,
 * trigger and evictor.
 */
#include <stdio.h>

#include "common/common.h"
#include "graph/stream_graph.h"
#include "windowing/window.h"
#include "types/schema_int.h"

static void windowed_free(void *p) {
    sl_windowed_t *w = p;
    sl_assigner_free(w->assigner);
    sl_trigger_free(w->trigger);
    sl_evictor_free(w->evictor);
    sl_free(w->late_tag);
    sl_free(w);
}

sl_windowed_t *sl_window(sl_keyed_t *k, sl_window_assigner_t *a) {
    if (!k) {
        sl_assigner_free(a);
        return NULL;
    }
    sl_windowed_t *w = sl_calloc(1, sizeof *w);
    w->k = k;
    w->env = k->s->env;
    w->assigner = a;
    sl_env_own(w->env, w, windowed_free);
    char err[256];
    if (sl_assigner_validate(a, err, sizeof err) < 0) {
        sl_env_errorf(w->env, "window: %s", err);
        w->bad = true;
    }
    return w;
}

sl_windowed_t *sl_window_trigger(sl_windowed_t *w, sl_trigger_t *t) {
    if (!w) {
        sl_trigger_free(t);
        return NULL;
    }
    char err[256];
    if (sl_trigger_validate(t, err, sizeof err) < 0) {
        sl_env_errorf(w->env, "window trigger: %s", err);
        w->bad = true;
    }
    sl_trigger_free(w->trigger);
    w->trigger = t;
    return w;
}

sl_windowed_t *sl_window_evictor(sl_windowed_t *w, sl_evictor_t *e) {
    if (!w) {
        sl_evictor_free(e);
        return NULL;
    }
    char err[256];
    if (sl_evictor_validate(e, err, sizeof err) < 0) {
        sl_env_errorf(w->env, "window evictor: %s", err);
        w->bad = true;
    }
    sl_evictor_free(w->evictor);
    w->evictor = e;
    return w;
}

sl_windowed_t *sl_window_allowed_lateness(sl_windowed_t *w, int64_t ms) {
    if (!w) return NULL;
    if (ms < 0) {
        sl_env_errorf(w->env, "window: the allowed lateness cannot be negative (got %lld ms)", (long long)ms);
        w->bad = true;
        return w;
    }
    w->allowed_lateness = ms;
    return w;
}

sl_windowed_t *sl_window_late_output(sl_windowed_t *w, const char *tag) {
    if (!w) return NULL;
    if (!tag || !*tag) {
        sl_env_errorf(w->env, "window: the late-data side output needs a tag name");
        w->bad = true;
        return w;
    }
    if (sl_env_tag(w->env, tag, w->k->s->schema) < 0) { /* the error is recorded */
        w->bad = true;
        return w;
    }
    sl_free(w->late_tag);
    w->late_tag = sl_strdup(tag);
    return w;
}

/* "Window(TumblingEventTimeWindows(300000), EventTimeTrigger, aggregate)" */
static void node_name(const sl_windowed_t *w, const char *fn, char *buf, size_t cap) {
    char a[128], t[256], e[128] = "";
    sl_assigner_describe(w->assigner, a, sizeof a);
    if (w->trigger)
        sl_trigger_describe(w->trigger, t, sizeof t);
    else
        snprintf(t, sizeof t, "%s", w->assigner->event_time ? "EventTimeTrigger" : "ProcessingTimeTrigger");
    if (w->evictor) {
        e[0] = ',';
        e[1] = ' ';
        sl_evictor_describe(w->evictor, e + 2, sizeof e - 2);
    }
    snprintf(buf, cap, "Window(%s, %s%s, %s)", a, t, e, fn);
}

static sl_stream_t *add_window(sl_windowed_t *w, sl_window_spec_t *spec, const char *fn, sl_schema_t *out) {
    char name[512];
    node_name(w, fn, name, sizeof name);
    sl_stream_t *r =
        sl_graph_add_operator(w->k->s, NULL, true, name, sl_window_op_create, spec, sl_window_spec_free, out);
    sl_schema_unref(out);
    return r;
}

static sl_window_spec_t *spec_for(const sl_windowed_t *w) {
    return sl_window_spec_new(w->assigner, w->trigger, w->evictor, w->allowed_lateness, w->late_tag);
}

sl_stream_t *sl_window_reduce(sl_windowed_t *w, sl_reduce_fn fn, void *ctx) {
    if (!w || w->bad) return NULL;
    if (!fn) {
        sl_env_errorf(w->env, "window reduce: no reduce function given");
        return NULL;
    }
    sl_window_spec_t *spec = spec_for(w);
    spec->fn_kind = SL_WINDOW_FN_REDUCE;
    spec->reduce = fn;
    spec->ctx = ctx;
    return add_window(w, spec, "reduce", NULL);
}

sl_stream_t *sl_window_reduce_with(sl_windowed_t *w, sl_reduce_fn fn, sl_reduce_result_fn result, void *ctx,
                                   sl_schema_t *out_schema) {
    if (!w || w->bad) {
        sl_schema_unref(out_schema);
        return NULL;
    }
    char schema_err[512];
    const char *bad = !fn ? "no reduce function given" : !result ? "no result function given" : NULL;
    if (!bad && !out_schema)
        bad = sl__schema_take_parse_error(schema_err, sizeof schema_err) ? schema_err : "no output schema given";
    if (bad) {
        sl_env_errorf(w->env, "window reduce: %s", bad);
        sl_schema_unref(out_schema);
        return NULL;
    }
    sl_window_spec_t *spec = spec_for(w);
    spec->fn_kind = SL_WINDOW_FN_REDUCE;
    spec->reduce = fn;
    spec->reduce_result = result;
    spec->ctx = ctx;
    return add_window(w, spec, "reduce", out_schema);
}

sl_stream_t *sl_window_aggregate(sl_windowed_t *w, sl_aggregate_fn_t fn, sl_schema_t *out_schema) {
    const char *bad = NULL;
    if (!w || w->bad) {
        sl_schema_unref(out_schema);
        return NULL;
    }
    char schema_err[512];
    if (!out_schema)
        bad = sl__schema_take_parse_error(schema_err, sizeof schema_err) ? schema_err : "no output schema given";
    else if (fn.acc_size == 0)
        bad = "acc_size must be > 0";
    else if (!fn.add || !fn.result)
        bad = "add and result are required";
    else if (sl_assigner_is_merging(w->assigner) && !fn.merge)
        bad = "session windows merge accumulators: merge is required";
    if (bad) {
        sl_env_errorf(w->env, "window aggregate: %s", bad);
        sl_schema_unref(out_schema);
        return NULL;
    }
    sl_window_spec_t *spec = spec_for(w);
    spec->fn_kind = SL_WINDOW_FN_AGGREGATE;
    spec->agg = fn;
    return add_window(w, spec, "aggregate", out_schema);
}

sl_stream_t *sl_window_process(sl_windowed_t *w, sl_window_process_fn fn, void *ctx, sl_schema_t *out_schema) {
    if (!w || w->bad) {
        sl_schema_unref(out_schema);
        return NULL;
    }
    char schema_err[512];
    if (!fn || !out_schema) {
        bool parsed = !out_schema && sl__schema_take_parse_error(schema_err, sizeof schema_err);
        sl_env_errorf(w->env, "window process: %s",
                      !fn ? "no process function given" : parsed ? schema_err : "no output schema given");
        sl_schema_unref(out_schema);
        return NULL;
    }
    sl_window_spec_t *spec = spec_for(w);
    spec->fn_kind = SL_WINDOW_FN_PROCESS;
    spec->process = fn;
    spec->ctx = ctx;
    return add_window(w, spec, "process", out_schema);
}
