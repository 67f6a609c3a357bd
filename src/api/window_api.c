/*
 * window_api.c — the builder of windows (Flink's WindowedStream):
 * sl_window(keyed, assigner) with its settings (trigger, evictor, allowed
 * lateness, late-data side output), then reduce / aggregate / process /
 * window_agg add a window operator node (windowing/window_operator.c) to
 * the stream graph.  sl_window_agg compiles its list of aggregates here
 * into the aggregate function of windowing/builtin_agg.c.
 *
 * Builder errors (bad assigner parameters, a missing function ...) are
 * recorded on the environment; the windowed handle is still returned so
 * calls can be chained, and the final call then returns NULL.  Handles are
 * owned by the environment (sl_env_own).  A windowed handle may feed more
 * than one window function: each node gets its own copy of the assigner,
 * trigger and evictor.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "common/common.h"
#include "graph/stream_graph.h"
#include "types/schema_int.h"
#include "windowing/builtin_agg.h"
#include "windowing/window.h"

/* The windowed stream handle. */

struct sl_windowed {
    sl_keyed_t *k;
    sl_env_t *env;
    sl_window_assigner_t *assigner; /* owned */
    sl_trigger_t *trigger;          /* owned; NULL: the assigner's default */
    sl_evictor_t *evictor;          /* owned; may be NULL */
    int64_t allowed_lateness;
    char *late_tag;                 /* owned; may be NULL */
    bool bad;                       /* a builder error was recorded */
};

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

/* ---- sl_window_agg: compiling the list of aggregates ---- */

static const char *skip_ws(const char *p) {
    while (*p && isspace((unsigned char)*p)) p++;
    return p;
}

/* An identifier at p into buf; returns the end (p itself when none). */
static const char *ident(const char *p, char *buf, size_t cap) {
    size_t n = 0;
    while (*p && (isalnum((unsigned char)*p) || *p == '_')) {
        if (n + 1 < cap) buf[n++] = *p;
        p++;
    }
    buf[n] = 0;
    return p;
}

static bool add_out(sl_schema_t *out, const char *name, sl_type_t t, bool nullable, const char *aggs, int col,
                    sl_env_t *env) {
    if (sl_schema_index(out, name) >= 0) {
        sl_env_errorf(env, "window_agg(\"%s\"): column %d: output column '%s' appears twice (use AS to rename)", aggs,
                      col, name);
        return false;
    }
    sl_schema_add(out, name, t, nullable);
    return true;
}

sl_stream_t *sl_window_agg(sl_windowed_t *w, const char *aggs) {
    if (!w || w->bad) return NULL;
    sl_env_t *env = w->env;
    const sl_schema_t *in = w->k->s->schema;
    if (!aggs || !*skip_ws(aggs)) {
        sl_env_errorf(env, "window_agg: no aggregates given");
        return NULL;
    }
    sl_builtin_agg_t *b = sl_calloc(1, sizeof *b);
    sl_env_own(env, b, sl_free);
    b->in = in;
    b->key = w->k->s->ins[0].key;
    sl_schema_t *out = sl_schema_new();
    int key_idx[SL_KEY_MAX_FIELDS];
    if (sl_key_is_fields(&b->key, key_idx, &b->nkeys)) {
        for (int k = 0; k < b->nkeys; k++) {
            b->key_out[k] = sl_schema_field_count(out);
            sl_schema_add(out, sl_schema_field_name(in, key_idx[k]), sl_schema_field_type(in, key_idx[k]),
                          sl_schema_field_nullable(in, key_idx[k]));
        }
    } else {
        b->nkeys = 0;
    }
    b->win_start = sl_schema_field_count(out);
    if (!add_out(out, "window_start", SL_TIMESTAMP, false, aggs, 0, env)) goto bad;
    b->win_end = sl_schema_field_count(out);
    if (!add_out(out, "window_end", SL_TIMESTAMP, false, aggs, 0, env)) goto bad;

    const char *p = aggs;
    for (;;) {
        p = skip_ws(p);
        int col = (int)(p - aggs) + 1;
        char fn[32], arg[256], as[256] = "";
        const char *q = ident(p, fn, sizeof fn);
        if (q == p) {
            sl_env_errorf(env, "window_agg(\"%s\"): column %d: expected an aggregate such as sum(field)", aggs, col);
            goto bad;
        }
        for (char *c = fn; *c; c++) *c = (char)tolower((unsigned char)*c);
        sl_agg_item_t it = {.field = -1};
        if (strcmp(fn, "count") == 0) it.kind = SL_AGG_COUNT;
        else if (strcmp(fn, "sum") == 0) it.kind = SL_AGG_SUM;
        else if (strcmp(fn, "min") == 0) it.kind = SL_AGG_MIN;
        else if (strcmp(fn, "max") == 0) it.kind = SL_AGG_MAX;
        else if (strcmp(fn, "avg") == 0) it.kind = SL_AGG_AVG;
        else {
            sl_env_errorf(env, "window_agg(\"%s\"): column %d: unknown aggregate '%s' (count, sum, min, max, avg)",
                          aggs, col, fn);
            goto bad;
        }
        q = skip_ws(q);
        if (*q != '(') {
            sl_env_errorf(env, "window_agg(\"%s\"): column %d: expected '(' after %s", aggs, (int)(q - aggs) + 1, fn);
            goto bad;
        }
        q = skip_ws(q + 1);
        int argcol = (int)(q - aggs) + 1;
        if (*q == '*') {
            if (it.kind != SL_AGG_COUNT) {
                sl_env_errorf(env, "window_agg(\"%s\"): column %d: only count takes *", aggs, argcol);
                goto bad;
            }
            it.kind = SL_AGG_COUNT_STAR;
            q++;
            arg[0] = 0;
        } else {
            const char *e = ident(q, arg, sizeof arg);
            if (e == q) {
                sl_env_errorf(env, "window_agg(\"%s\"): column %d: expected a field name", aggs, argcol);
                goto bad;
            }
            q = e;
            it.field = sl_schema_index(in, arg);
            if (it.field < 0) {
                char sc[512];
                sl_schema_format(in, sc, sizeof sc);
                sl_env_errorf(env, "window_agg(\"%s\"): column %d: no field '%s' in (%s)", aggs, argcol, arg, sc);
                goto bad;
            }
            it.in_type = sl_schema_field_type(in, it.field);
            bool numeric = it.in_type == SL_BIGINT || it.in_type == SL_INT || it.in_type == SL_DOUBLE;
            bool ordered = numeric || it.in_type == SL_TIMESTAMP;
            if ((it.kind == SL_AGG_SUM || it.kind == SL_AGG_AVG) && !numeric) {
                sl_env_errorf(env, "window_agg(\"%s\"): column %d: %s of '%s' (%s): only INT, BIGINT and DOUBLE",
                              aggs, argcol, fn, arg, sl_type_name(it.in_type));
                goto bad;
            }
            if ((it.kind == SL_AGG_MIN || it.kind == SL_AGG_MAX) && !ordered) {
                sl_env_errorf(env,
                              "window_agg(\"%s\"): column %d: %s of '%s' (%s): only INT, BIGINT, DOUBLE and "
                              "TIMESTAMP",
                              aggs, argcol, fn, arg, sl_type_name(it.in_type));
                goto bad;
            }
            it.fp = it.in_type == SL_DOUBLE;
        }
        q = skip_ws(q);
        if (*q != ')') {
            sl_env_errorf(env, "window_agg(\"%s\"): column %d: expected ')'", aggs, (int)(q - aggs) + 1);
            goto bad;
        }
        q = skip_ws(q + 1);
        char kw[8];
        const char *e = ident(q, kw, sizeof kw);
        if (e != q && (kw[0] == 'a' || kw[0] == 'A') && (kw[1] == 's' || kw[1] == 'S') && !kw[2]) {
            q = skip_ws(e);
            e = ident(q, as, sizeof as);
            if (e == q) {
                sl_env_errorf(env, "window_agg(\"%s\"): column %d: expected a name after AS", aggs,
                              (int)(q - aggs) + 1);
                goto bad;
            }
            q = skip_ws(e);
        }
        if (!as[0]) {
            if (it.kind == SL_AGG_COUNT_STAR)
                snprintf(as, sizeof as, "count");
            else
                snprintf(as, sizeof as, "%s_%s", fn, arg);
        }
        if (b->n == (int)SL_ARRAY_LEN(b->items)) {
            sl_env_errorf(env, "window_agg(\"%s\"): at most %d aggregates", aggs, (int)SL_ARRAY_LEN(b->items));
            goto bad;
        }
        it.out = sl_schema_field_count(out);
        sl_type_t ot;
        bool nullable = true;
        switch (it.kind) {
        case SL_AGG_COUNT_STAR:
        case SL_AGG_COUNT: ot = SL_BIGINT; nullable = false; break;
        case SL_AGG_SUM: ot = it.fp ? SL_DOUBLE : SL_BIGINT; break;
        case SL_AGG_AVG: ot = SL_DOUBLE; break;
        default: ot = it.in_type; break;
        }
        if (!add_out(out, as, ot, nullable, aggs, col, env)) goto bad;
        b->items[b->n++] = it;
        if (!*q) break;
        if (*q != ',') {
            sl_env_errorf(env, "window_agg(\"%s\"): column %d: expected ',' between aggregates", aggs,
                          (int)(q - aggs) + 1);
            goto bad;
        }
        p = q + 1;
    }
    return sl_window_aggregate(w, sl_builtin_agg_fn(b), out);
bad:
    sl_schema_unref(out);
    return NULL;
}
