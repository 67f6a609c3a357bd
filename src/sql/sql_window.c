/*
 * sql_window.c — Flink SQL's window aggregates on sluice's window operator:
 *
 *   stream-exec-group-window-aggregate_1  the legacy GROUP BY TUMBLE / HOP /
 *                                         SESSION(rowtime, ...) with
 *                                         TUMBLE_START/END/ROWTIME, ...
 *   stream-exec-window-aggregate_1        GROUP BY window_start, window_end
 *                                         over the TVFs TUMBLE, HOP and CUMULATE
 *   stream-exec-local-window-aggregate_1  the two-phase form Flink plans by
 *   + exchange + stream-exec-global-      default: built as one window aggregate
 *   window-aggregate_1                    from the local node's calls over the
 *                                         local node's input (the local node and
 *                                         its exchange pass rows through), with the
 *                                         global node's output columns
 *
 * Each becomes sql_key_by(grouping columns) -> sl_window(event-time tumbling,
 * sliding, cumulative (windowing/window.h) or session assigner) -> sl_window_process: the window's rows live in
 * the operator's window state (the state backend: heap or RocksDB,
 * checkpoints, rescaling by key group), allowed lateness 0 as Flink SQL has
 * it (a record whose windows have all fired is dropped), and when the
 * watermark passes a window's end the aggregates are computed over its rows:
 * COUNT(*), COUNT(x), SUM, $SUM0, AVG, MIN, MAX, each optionally DISTINCT and
 * with FILTER, with sql_agg.c's types and rules (NULL arguments skipped, SUM
 * of INT is INT with Java's wrapping, AVG of integers is the integer division
 * of a BIGINT sum, SUM/MIN/MAX/AVG of nothing are NULL).  The output row is
 * the grouping columns, the aggregates, then the window properties in the
 * plan's order: start, end (TIMESTAMP(3)), rowtime (end - 1); a trailing
 * proctime property of the legacy node (TIMESTAMP_LTZ, which sluice does not
 * store) is dropped from the node's columns (nothing downstream reads it).
 *
 * Refused by name, with the node and the statement's line: a window offset,
 * the SESSION TVF, proctime and count windows, early/late firing
 * (table.exec.emit.*), a window TVF whose rows were attached to windows by
 * an earlier node (WindowAttached), updating inputs, unsupported aggregates.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "sql/sql_int.h"
#include "windowing/window.h"

typedef enum { W_COUNT_STAR, W_COUNT, W_SUM, W_SUM0, W_AVG, W_MIN, W_MAX } wfn_t;
typedef enum { WK_TUMBLE, WK_HOP, WK_CUMULATE, WK_SESSION } wkind_t;
typedef enum { WP_START, WP_END, WP_ROWTIME } wprop_t;

typedef struct wcall {
    wfn_t fn;
    int nargs;
    int arg_flat[8];
    const sql_type_t *arg_type[8];
    int filter_flat; /* -1: none */
    bool distinct;
    const sql_type_t *rtype;
} wcall_t;

struct sql_window {
    char *desc;
    wkind_t kind;
    int64_t size, slide, gap;
    bool attached; /* WindowAttached: each row names its window (window_end column end_flat) */
    int end_flat;
    int ngroup;
    int group_flat[64];
    sql_key_t key;
    int ncalls;
    wcall_t *calls;
    int nprops;
    wprop_t props[8];
    int out_width;
};

void sql_window_free(sql_window_t *w) {
    if (!w) return;
    sl_free(w->calls);
    sl_free(w->desc);
    sl_free(w);
}

/* Java's Duration.toString ("PT10S", "PT0.5S", "PT1H30M") in ms; -1 if malformed. */
static int64_t parse_duration(const char *s) {
    if (!s || strncmp(s, "PT", 2)) return -1;
    const char *p = s + 2;
    int64_t ms = 0;
    if (!*p) return -1;
    while (*p) {
        char *end;
        double v = strtod(p, &end);
        if (end == p || v < 0) return -1;
        switch (*end) {
        case 'H': ms += (int64_t)(v * 3600000.0 + 0.5); break;
        case 'M': ms += (int64_t)(v * 60000.0 + 0.5); break;
        case 'S': ms += (int64_t)(v * 1000.0 + 0.5); break;
        default: return -1;
        }
        p = end + 1;
    }
    return ms;
}

static bool minmax_kind(sql_kind_t k) {
    return sql_kind_integral(k) || k == SK_DOUBLE || k == SK_DECIMAL || sql_kind_string(k) || k == SK_TIMESTAMP ||
           k == SK_BOOLEAN;
}

/* The time attribute's type (an object with "kind": "ROWTIME" / "PROCTIME"). */
static int check_time_attr(const json_t *t, const char *desc, char *err, size_t errlen) {
    const char *k = json_string_value(json_object_get(t, "kind"));
    const char *ty = json_string_value(json_object_get(t, "type"));
    if (k && !strcmp(k, "PROCTIME"))
        return sql_perr(err, errlen, "%s: processing-time windows are not supported yet (event-time windows are)", desc);
    if (ty && strcmp(ty, "TIMESTAMP_WITHOUT_TIME_ZONE"))
        return sql_perr(err, errlen, "%s: windows over a %s time attribute are not supported yet (TIMESTAMP(3) is)",
                        desc, ty);
    return 0;
}

/* The legacy node's "window" (LogicalWindow). */
static int parse_legacy_window(sql_window_t *w, const json_t *jw, const sql_input_t *in, int *time_col, char *err,
                               size_t errlen) {
    const char *desc = w->desc;
    const char *kind = json_string_value(json_object_get(jw, "kind"));
    if (!kind) return sql_perr(err, errlen, "%s: \"window\".\"kind\" is missing", desc);
    if (json_is_false(json_object_get(jw, "isTimeWindow")))
        return sql_perr(err, errlen, "%s: row-count windows are not supported yet (time windows are)", desc);
    json_t *tf = json_object_get(jw, "timeField");
    json_t *fi = json_object_get(tf, "fieldIndex");
    if (!json_is_integer(fi) || json_integer_value(fi) < 0 || json_integer_value(fi) >= in->ncols)
        return sql_perr(err, errlen, "%s: \"window\".\"timeField\".\"fieldIndex\" is missing or not a column", desc);
    *time_col = (int)json_integer_value(fi);
    int rc = check_time_attr(json_object_get(tf, "fieldType"), desc, err, errlen);
    if (rc < 0) return rc;
    if (!strcmp(kind, "TUMBLING")) {
        w->kind = WK_TUMBLE;
        w->size = parse_duration(json_string_value(json_object_get(jw, "size")));
    } else if (!strcmp(kind, "SLIDING")) {
        w->kind = WK_HOP;
        w->size = parse_duration(json_string_value(json_object_get(jw, "size")));
        w->slide = parse_duration(json_string_value(json_object_get(jw, "slide")));
    } else if (!strcmp(kind, "SESSION")) {
        w->kind = WK_SESSION;
        w->gap = parse_duration(json_string_value(json_object_get(jw, "gap")));
        if (w->gap <= 0) return sql_perr(err, errlen, "%s: the session gap is missing or not a positive duration", desc);
        return 0;
    } else {
        return sql_perr(err, errlen, "%s: window kind %s is not supported yet", desc, kind);
    }
    if (w->size <= 0 || (w->kind == WK_HOP && w->slide <= 0))
        return sql_perr(err, errlen, "%s: the window size/slide is missing or not a positive duration", desc);
    return 0;
}

/* A window TVF's "windowing" (WindowingStrategy) of a window or local window aggregate. */
static int parse_windowing(sql_window_t *w, const json_t *jw, const sql_input_t *in, int *time_col, char *err,
                           size_t errlen) {
    const char *desc = w->desc;
    const char *strat = json_string_value(json_object_get(jw, "strategy"));
    if (!strat) return sql_perr(err, errlen, "%s: \"windowing\".\"strategy\" is missing", desc);
    if (strcmp(strat, "TimeAttribute") && strcmp(strat, "WindowAttached"))
        return sql_perr(err, errlen,
                        "%s: windowing strategy %s is not supported yet (TimeAttribute: a window TVF under GROUP BY "
                        "window_start, window_end, and WindowAttached: an aggregate over an earlier window's rows, are)",
                        desc, strat);
    if (!json_is_true(json_object_get(jw, "isRowtime")))
        return sql_perr(err, errlen, "%s: processing-time windows are not supported yet (event-time windows are)", desc);
    int rc = check_time_attr(json_object_get(jw, "timeAttributeType"), desc, err, errlen);
    if (rc < 0) return rc;
    w->attached = !strcmp(strat, "WindowAttached");
    json_t *ti = json_object_get(jw, w->attached ? "windowEnd" : "timeAttributeIndex");
    if (!json_is_integer(ti) || json_integer_value(ti) < 0 || json_integer_value(ti) >= in->ncols)
        return sql_perr(err, errlen, "%s: \"windowing\".\"%s\" is missing or not a column", desc,
                        w->attached ? "windowEnd" : "timeAttributeIndex");
    *time_col = (int)json_integer_value(ti);
    w->end_flat = sql_flat_of(in, *time_col);
    json_t *win = json_object_get(jw, "window");
    const char *type = json_string_value(json_object_get(win, "type"));
    if (!type) return sql_perr(err, errlen, "%s: \"windowing\".\"window\".\"type\" is missing", desc);
    json_t *off = json_object_get(win, "offset");
    if (off && !json_is_null(off) && parse_duration(json_string_value(off)) != 0)
        return sql_perr(err, errlen, "%s: a window offset (%s) is not supported yet", desc,
                        json_is_string(off) ? json_string_value(off) : "?");
    if (!strcmp(type, "TumblingWindow")) {
        w->kind = WK_TUMBLE;
        w->size = parse_duration(json_string_value(json_object_get(win, "size")));
    } else if (!strcmp(type, "HoppingWindow")) {
        w->kind = WK_HOP;
        w->size = parse_duration(json_string_value(json_object_get(win, "size")));
        w->slide = parse_duration(json_string_value(json_object_get(win, "slide")));
    } else if (!strcmp(type, "CumulativeWindow")) {
        w->kind = WK_CUMULATE;
        w->size = parse_duration(json_string_value(json_object_get(win, "maxSize")));
        w->slide = parse_duration(json_string_value(json_object_get(win, "step")));
        if (w->size > 0 && w->slide > 0 && w->size % w->slide)
            return sql_perr(err, errlen, "%s: the CUMULATE window's max size is not a multiple of its step", desc);
    } else if (!strcmp(type, "SessionWindow")) {
        return sql_perr(err, errlen, "%s: the SESSION window table function is not supported yet (TUMBLE, HOP and "
                        "CUMULATE are; GROUP BY SESSION(...) is)", desc);
    } else {
        return sql_perr(err, errlen, "%s: window %s is not supported yet", desc, type);
    }
    if (w->size <= 0 || (w->kind != WK_TUMBLE && w->slide <= 0))
        return sql_perr(err, errlen, "%s: the window size/slide/step is missing or not a positive duration", desc);
    return 0;
}

static int parse_calls(sql_window_t *w, const json_t *spec, const sql_input_t *in, sql_type_t *const *cols,
                       char *err, size_t errlen) {
    const char *desc = w->desc;
    json_t *calls = json_object_get(spec, "aggCalls");
    if (!json_is_array(calls)) return sql_perr(err, errlen, "%s: \"aggCalls\" is missing or not an array", desc);
    w->ncalls = (int)json_array_size(calls);
    w->calls = sl_calloc((size_t)w->ncalls + 1, sizeof *w->calls);
    for (int i = 0; i < w->ncalls; i++) {
        json_t *jc = json_array_get(calls, (size_t)i);
        wcall_t *c = &w->calls[i];
        const char *iname = json_string_value(json_object_get(jc, "internalName"));
        json_t *args = json_object_get(jc, "argList");
        json_t *fa = json_object_get(jc, "filterArg");
        if (!iname || !json_is_array(args) || !json_is_integer(fa))
            return sql_perr(err, errlen, "%s: aggCalls[%d] needs \"internalName\", \"argList\" and \"filterArg\"", desc, i);
        if (json_is_true(json_object_get(jc, "approximate")))
            return sql_perr(err, errlen, "%s: approximate aggregate %s is not supported", desc, iname);
        c->rtype = cols[w->ngroup + i];
        c->distinct = json_is_true(json_object_get(jc, "distinct"));
        c->nargs = (int)json_array_size(args);
        if (c->nargs > 8) return sql_perr(err, errlen, "%s: aggregate %s with %d arguments", desc, iname, c->nargs);
        for (int k = 0; k < c->nargs; k++) {
            json_t *ja = json_array_get(args, (size_t)k);
            if (!json_is_integer(ja) || json_integer_value(ja) < 0 || json_integer_value(ja) >= in->ncols)
                return sql_perr(err, errlen, "%s: aggCalls[%d].argList[%d] is not a column of the input", desc, i, k);
            int col = (int)json_integer_value(ja);
            if (in->cols[col]->kind == SK_ROW)
                return sql_perr(err, errlen, "%s: aggregate %s of a ROW column is not supported", desc, iname);
            c->arg_type[k] = in->cols[col];
            c->arg_flat[k] = sql_flat_of(in, col);
        }
        int f = (int)json_integer_value(fa);
        c->filter_flat = -1;
        if (f >= 0) {
            if (f >= in->ncols || in->cols[f]->kind != SK_BOOLEAN)
                return sql_perr(err, errlen, "%s: aggCalls[%d].filterArg is not a BOOLEAN column of the input", desc, i);
            c->filter_flat = sql_flat_of(in, f);
        }
        const sql_type_t *a0 = c->nargs ? c->arg_type[0] : NULL;
        sql_kind_t rk = c->rtype->kind;
        if (!strcmp(iname, "$COUNT$1")) {
            c->fn = c->nargs == 0 ? W_COUNT_STAR : W_COUNT;
            if (rk != SK_BIGINT) return sql_perr(err, errlen, "%s: COUNT returning %s", desc, c->rtype->text);
            if (c->nargs > 1 && !c->distinct)
                return sql_perr(err, errlen, "%s: COUNT of %d arguments is not supported", desc, c->nargs);
        } else if (!strcmp(iname, "$SUM$1") || !strcmp(iname, "$SUM0$1") || !strcmp(iname, "$AVG$1")) {
            c->fn = !strcmp(iname, "$AVG$1") ? W_AVG : !strcmp(iname, "$SUM0$1") ? W_SUM0 : W_SUM;
            if (c->nargs != 1 || !((sql_kind_integral(a0->kind) && sql_kind_integral(rk)) ||
                                   (a0->kind == SK_DOUBLE && rk == SK_DOUBLE)))
                return sql_perr(err, errlen, "%s: %s of %s returning %s is not supported (integers and DOUBLE are)", desc,
                                iname + 1, a0 ? a0->text : "nothing", c->rtype->text);
        } else if (!strcmp(iname, "$MIN$1") || !strcmp(iname, "$MAX$1")) {
            c->fn = !strcmp(iname, "$MIN$1") ? W_MIN : W_MAX;
            if (c->nargs != 1 || !minmax_kind(a0->kind) || a0->kind != rk)
                return sql_perr(err, errlen, "%s: %s of %s is not supported", desc, iname + 1, a0 ? a0->text : "nothing");
        } else {
            return sql_perr(err, errlen, "%s: aggregate function %s is not supported yet in window aggregates", desc,
                            iname);
        }
    }
    return 0;
}

sql_window_t *sql_window_parse(const json_t *jn, const json_t *spec, bool legacy, const sql_input_t *in, int ncols,
                               sql_type_t *const *cols, const char *desc, char *err, size_t errlen) {
    sql_window_t *w = sl_calloc(1, sizeof *w);
    w->desc = sl_strdup(desc);
    int rc = 0, time_col = -1;
    /* options Flink's window operators honour that this one does not */
    json_t *cfgs[2] = {json_object_get(jn, "configuration"), json_object_get(spec, "configuration")};
    for (int k = 0; k < 2 && rc == 0; k++) {
        const char *key;
        json_t *val;
        json_object_foreach(cfgs[k], key, val) {
            const char *v = json_string_value(val);
            if (!strncmp(key, "table.exec.emit.", 16) && v && strcmp(v, "false") && strcmp(v, "0 ms") &&
                strcmp(v, "0")) {
                rc = sql_perr(err, errlen, "%s: %s = '%s' is not supported yet", desc, key, v);
                break;
            }
            if (!strcmp(key, "table.exec.mini-batch.enabled") && v && strcmp(v, "false")) {
                rc = sql_perr(err, errlen, "%s: table.exec.mini-batch.enabled = '%s' is not supported yet", desc, v);
                break;
            }
        }
    }
    if (rc < 0) goto fail;
    /* early/late firing of legacy group windows is not an option in the plan: the planner writes it
     * into the description ("emit=[early delay 1000 millisecond]") */
    const char *d = json_string_value(json_object_get(jn, "description"));
    const char *emit = d ? strstr(d, "emit=[") : NULL;
    if (emit) {
        const char *e = strchr(emit, ']');
        rc = sql_perr(err, errlen, "%s: early/late firing is not supported yet (%.*s: table.exec.emit.*)", desc,
                      e ? (int)(e - emit + 1) : 6, emit);
        goto fail;
    }
    if (legacy) rc = parse_legacy_window(w, json_object_get(spec, "window"), in, &time_col, err, errlen);
    else rc = parse_windowing(w, json_object_get(spec, "windowing"), in, &time_col, err, errlen);
    if (rc < 0) goto fail;
    if (in->cols[time_col]->kind != SK_TIMESTAMP) {
        rc = sql_perr(err, errlen, "%s: the window's time attribute is not a TIMESTAMP", desc);
        goto fail;
    }
    json_t *grp = json_object_get(spec, "grouping");
    if (!json_is_array(grp) || json_array_size(grp) > 64) {
        rc = sql_perr(err, errlen, "%s: \"grouping\" is missing or not an array (of at most 64 columns)", desc);
        goto fail;
    }
    w->ngroup = (int)json_array_size(grp);
    for (int i = 0; i < w->ngroup; i++) {
        json_t *g = json_array_get(grp, (size_t)i);
        if (!json_is_integer(g) || json_integer_value(g) < 0 || json_integer_value(g) >= in->ncols) {
            rc = sql_perr(err, errlen, "%s: grouping[%d] is not a column of the input", desc, i);
            goto fail;
        }
        int c = (int)json_integer_value(g);
        if (in->cols[c]->kind == SK_ROW) {
            rc = sql_perr(err, errlen, "%s: grouping by a ROW column is not supported", desc);
            goto fail;
        }
        if (i < ncols && cols[i]->kind != in->cols[c]->kind) {
            rc = sql_perr(err, errlen, "%s: output column %d is not of its grouping column's type", desc, i);
            goto fail;
        }
        w->group_flat[i] = sql_flat_of(in, c);
        w->key.flat[i] = w->group_flat[i];
        w->key.types[i] = in->cols[c];
    }
    w->key.n = w->ngroup;
    w->key.desc = w->desc;
    json_t *calls = json_object_get(spec, "aggCalls");
    int ncalls = (int)json_array_size(calls);
    json_t *props = json_object_get(jn, "namedWindowProperties");
    if (!json_is_array(props) || json_array_size(props) > 8) {
        rc = sql_perr(err, errlen, "%s: \"namedWindowProperties\" is missing or not an array", desc);
        goto fail;
    }
    for (size_t i = 0; i < json_array_size(props); i++) {
        const char *k = json_string_value(json_object_get(json_object_get(json_array_get(props, i), "property"), "kind"));
        if (!k) {
            rc = sql_perr(err, errlen, "%s: namedWindowProperties[%zu] has no kind", desc, i);
            goto fail;
        }
        if (!strcmp(k, "Proctime") && i + 1 == json_array_size(props)) break; /* dropped (see the header) */
        if (!strcmp(k, "WindowStart")) w->props[w->nprops++] = WP_START;
        else if (!strcmp(k, "WindowEnd")) w->props[w->nprops++] = WP_END;
        else if (!strcmp(k, "Rowtime")) w->props[w->nprops++] = WP_ROWTIME;
        else {
            rc = sql_perr(err, errlen, "%s: window property %s is not supported", desc, k);
            goto fail;
        }
    }
    if (ncols != w->ngroup + ncalls + w->nprops) {
        rc = sql_perr(err, errlen, "%s: %d output columns for %d grouping columns, %d aggregates and %d window properties",
                      desc, ncols, w->ngroup, ncalls, w->nprops);
        goto fail;
    }
    for (int i = 0; i < w->nprops; i++)
        if (cols[w->ngroup + ncalls + i]->kind != SK_TIMESTAMP) {
            rc = sql_perr(err, errlen, "%s: window property column %d is not a TIMESTAMP", desc, w->ngroup + ncalls + i);
            goto fail;
        }
    rc = parse_calls(w, spec, in, cols, err, errlen);
    if (rc < 0) goto fail;
    return w;
fail:
    sql_window_free(w);
    return NULL;
}

/* ---- runtime ---------------------------------------------------------------------- */


/* One distinct candidate: the canonical bytes of the arguments and its row. */
typedef struct dval {
    uint8_t *b;
    int len;
    int row;
} dval_t;

static int cmp_dval(const void *x, const void *y) {
    const dval_t *a = x, *b = y;
    int n = a->len < b->len ? a->len : b->len;
    int c = n ? memcmp(a->b, b->b, (size_t)n) : 0;
    return c ? c : a->len < b->len ? -1 : a->len > b->len;
}

/* Whether row r counts for call c (FILTER TRUE, no NULL argument). */
static bool counts(const wcall_t *c, const sl_row_t *r) {
    if (c->filter_flat >= 0 && (sl_row_is_null(r, c->filter_flat) || !sl_row_bool(r, c->filter_flat))) return false;
    for (int k = 0; k < c->nargs; k++)
        if (sl_row_is_null(r, c->arg_flat[k])) return false;
    return true;
}

/* The rows call c sees: every counting row, or (DISTINCT) one per distinct argument tuple. */
static int call_rows(const sql_window_t *w, const wcall_t *c, const sl_window_elements_t *el, int *rows) {
    int n = sl_window_elements_count(el), m = 0;
    if (!c->distinct) {
        for (int i = 0; i < n; i++) {
            sl_record_t r = sl_window_elements_get(el, i);
            if (counts(c, &r.row)) rows[m++] = i;
        }
        return m;
    }
    sql_key_t key = {.n = c->nargs, .desc = w->desc};
    memcpy(key.flat, c->arg_flat, sizeof c->arg_flat);
    memcpy(key.types, c->arg_type, sizeof c->arg_type);
    dval_t *dv = sl_calloc((size_t)n + 1, sizeof *dv);
    for (int i = 0; i < n; i++) {
        sl_record_t r = sl_window_elements_get(el, i);
        if (!counts(c, &r.row)) continue;
        int need = 0;
        for (int k = 0; k < c->nargs; k++) {
            uint32_t l = 0;
            sl_row_field_key(&r.row, c->arg_flat[k], &l);
            need += 32 + (int)l;
        }
        dv[m].b = sl_malloc((size_t)need);
        dv[m].len = sql_key_encode(&key, &r.row, dv[m].b, need);
        dv[m].row = i;
        m++;
    }
    qsort(dv, (size_t)m, sizeof *dv, cmp_dval);
    int u = 0;
    for (int i = 0; i < m; i++) {
        if (i == 0 || cmp_dval(&dv[i], &dv[i - 1])) rows[u++] = dv[i].row;
    }
    for (int i = 0; i < m; i++) sl_free(dv[i].b);
    sl_free(dv);
    return u;
}

/* The value of call c over the given rows of the window. */
static void call_result(const wcall_t *c, const sl_window_elements_t *el, const int *rows, int m, sql_val_t *out) {
    memset(out, 0, sizeof *out);
    switch (c->fn) {
    case W_COUNT_STAR:
    case W_COUNT: out->i = m; return;
    case W_SUM:
    case W_SUM0:
    case W_AVG: {
        if (m == 0) {
            out->null = c->fn != W_SUM0;
            return;
        }
        uint64_t si = 0;
        double sd = 0;
        for (int i = 0; i < m; i++) {
            sl_record_t r = sl_window_elements_get(el, rows[i]);
            sql_val_t v;
            memset(&v, 0, sizeof v);
            sql_val_read(c->arg_type[0], &r.row, c->arg_flat[0], &v);
            if (c->arg_type[0]->kind == SK_DOUBLE) sd += v.d;
            else si += (uint64_t)v.i;
        }
        if (c->rtype->kind == SK_DOUBLE) out->d = c->fn == W_AVG ? sd / (double)m : sd;
        else if (c->fn == W_AVG) out->i = sql_narrow_int((int64_t)si / m, c->rtype->kind); /* a BIGINT sum, as Flink */
        else out->i = sql_narrow_int((int64_t)si, c->rtype->kind);
        return;
    }
    case W_MIN:
    case W_MAX: {
        out->null = true;
        for (int i = 0; i < m; i++) {
            sl_record_t r = sl_window_elements_get(el, rows[i]);
            sql_val_t v;
            memset(&v, 0, sizeof v);
            sql_val_read(c->arg_type[0], &r.row, c->arg_flat[0], &v);
            int d = out->null ? 0 : sql_cmp_val(c->arg_type[0], &v, out);
            if (out->null || (c->fn == W_MIN ? d < 0 : d > 0)) *out = v;
        }
        return;
    }
    }
}

static int window_fire(void *ctx, const uint8_t *key, uint32_t keylen, const sl_window_t *win_in,
                       const sl_window_elements_t *el, sl_collector_t *out) {
    (void)key;
    (void)keylen;
    const sql_window_t *w = ctx;
    int n = sl_window_elements_count(el);
    if (n == 0) return 0;
    sl_record_t first = sl_window_elements_get(el, 0);
    sl_window_t win = *win_in;
    if (w->attached) {
        /* the rows of [end - step, end) are those of the window ending at end (their rowtime is end - 1) */
        int64_t end = sl_row_is_null(&first.row, w->end_flat) ? INT64_MIN : sl_row_i64(&first.row, w->end_flat);
        if (end != win.end) {
            fprintf(stderr, "sluice sql: %s: a row of window_end %lld has the rowtime %lld (not window_end - 1)\n",
                    w->desc, (long long)end, (long long)first.ts);
            return SL_EINVAL;
        }
        win.start = w->kind == WK_CUMULATE ? sl_window_start(end - 1, 0, w->size) : end - w->size;
    }
    int *rows = sl_malloc(sizeof *rows * (size_t)n);
    sl_row_writer_t *o = sl_out_row(out);
    int f = 0;
    for (int i = 0; i < w->ngroup; i++, f++) {
        if (sl_row_is_null(&first.row, w->group_flat[i])) sl_rw_set_null(o, f);
        else sl_rw_copy_field(o, f, &first.row, w->group_flat[i]);
    }
    for (int i = 0; i < w->ncalls; i++, f++) {
        const wcall_t *c = &w->calls[i];
        int m = call_rows(w, c, el, rows);
        sql_val_t v;
        call_result(c, el, rows, m, &v);
        sql_val_write(c->rtype, &v, o, f);
    }
    for (int i = 0; i < w->nprops; i++, f++) {
        int64_t t = w->props[i] == WP_START ? win.start : w->props[i] == WP_END ? win.end : win.end - 1;
        sl_rw_set_i64(o, f, t);
    }
    sl_free(rows);
    sl_emit(out);
    return 0;
}

sl_stream_t *sql_window_build(sl_env_t *env, sl_stream_t *in, sql_window_t *w, sl_schema_t *out_schema) {
    (void)env;
    w->out_width = sl_schema_field_count(out_schema);
    /* attached: one window per end, so a tumbling window of the step between ends collects a window's rows */
    int64_t step = w->kind == WK_TUMBLE ? w->size : w->slide;
    sl_window_assigner_t *a = w->attached ? sl_tumbling_event_time(step, 0)
                              : w->kind == WK_TUMBLE     ? sl_tumbling_event_time(w->size, 0)
                              : w->kind == WK_HOP      ? sl_sliding_event_time(w->size, w->slide, 0)
                              : w->kind == WK_CUMULATE ? sl_cumulative_event_time(w->size, w->slide, 0)
                                                       : sl_session_event_time(w->gap);
    sl_windowed_t *wd = sl_window(sql_key_by(in, &w->key), a);
    return sl_window_process(wd, window_fire, w, sl_schema_ref(out_schema));
}
