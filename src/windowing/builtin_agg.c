/*
 * builtin_agg.c — sl_window_agg: count / sum / min / max / avg over a
 * window, as SQL has them, without user callbacks.
 *
 * The list ("count(*), sum(amount) AS total, avg(amount)") is compiled when
 * the job is built into an ordinary sl_aggregate_fn_t whose accumulator is
 * one 16-byte slot per aggregate: the number of non-NULL inputs (i64) and
 * the running value (i64 for integer sums and integer/timestamp min/max,
 * double otherwise).  The accumulator has merge, so the window operator
 * slices sliding windows and merges sessions with it.  The result row is
 * the key's fields, window_start, window_end, then the aggregates.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "api/env_int.h"
#include "common/common.h"
#include "graph/stream_graph.h"
#include "windowing/window.h"

typedef enum { AGG_COUNT_STAR, AGG_COUNT, AGG_SUM, AGG_MIN, AGG_MAX, AGG_AVG } agg_kind_t;

typedef struct agg_item {
    agg_kind_t kind;
    int field;        /* input field; -1 for count(*) */
    bool fp;          /* the running value is a double */
    sl_type_t in_type;
    int out;          /* output field */
} agg_item_t;

#define AGG_SLOT 16

typedef struct builtin_agg {
    int n;
    agg_item_t items[64];
    sl_key_selector_t key;  /* the keyed stream's selector (a copy) */
    const sl_schema_t *in;  /* input schema (the stream's; lives as long as the env) */
    int nkeys;
    int key_out[SL_KEY_MAX_FIELDS];
    int win_start, win_end; /* output fields */
} builtin_agg_t;

static int64_t slot_count(const uint8_t *a) { return (int64_t)sl_ld64(a); }

static void ba_init(void *ctx, void *acc) {
    const builtin_agg_t *b = ctx;
    memset(acc, 0, (size_t)b->n * AGG_SLOT);
}

static double in_f64(const sl_row_t *r, const agg_item_t *it) {
    return it->in_type == SL_DOUBLE ? sl_row_f64(r, it->field)
           : it->in_type == SL_INT  ? (double)sl_row_i32(r, it->field)
                                    : (double)sl_row_i64(r, it->field);
}

static int64_t in_i64(const sl_row_t *r, const agg_item_t *it) {
    return it->in_type == SL_INT ? (int64_t)sl_row_i32(r, it->field) : sl_row_i64(r, it->field);
}

/* Folds one value (or another slot: cnt > 1) into slot a. */
static void fold_i64(uint8_t *a, const agg_item_t *it, int64_t cnt, int64_t v) {
    int64_t c = slot_count(a);
    int64_t cur = (int64_t)sl_ld64(a + 8);
    int64_t nv = v;
    if (c > 0) {
        if (it->kind == AGG_SUM || it->kind == AGG_AVG)
            nv = (int64_t)((uint64_t)cur + (uint64_t)v); /* wraps like Flink's BIGINT sum */
        else if (it->kind == AGG_MIN)
            nv = v < cur ? v : cur;
        else if (it->kind == AGG_MAX)
            nv = v > cur ? v : cur;
    }
    sl_st64(a, (uint64_t)(c + cnt));
    sl_st64(a + 8, (uint64_t)nv);
}

static void fold_f64(uint8_t *a, const agg_item_t *it, int64_t cnt, double v) {
    int64_t c = slot_count(a);
    double cur;
    memcpy(&cur, a + 8, 8);
    double nv = v;
    if (c > 0) {
        if (it->kind == AGG_SUM || it->kind == AGG_AVG)
            nv = cur + v;
        else if (it->kind == AGG_MIN)
            nv = v < cur ? v : cur;
        else if (it->kind == AGG_MAX)
            nv = v > cur ? v : cur;
    }
    sl_st64(a, (uint64_t)(c + cnt));
    memcpy(a + 8, &nv, 8);
}

static int ba_add(void *ctx, void *acc, const sl_record_t *in) {
    const builtin_agg_t *b = ctx;
    uint8_t *a = acc;
    for (int k = 0; k < b->n; k++, a += AGG_SLOT) {
        const agg_item_t *it = &b->items[k];
        if (it->kind == AGG_COUNT_STAR) {
            sl_st64(a, (uint64_t)(slot_count(a) + 1));
            continue;
        }
        if (sl_row_is_null(&in->row, it->field)) continue;
        if (it->kind == AGG_COUNT)
            sl_st64(a, (uint64_t)(slot_count(a) + 1));
        else if (it->fp)
            fold_f64(a, it, 1, in_f64(&in->row, it));
        else
            fold_i64(a, it, 1, in_i64(&in->row, it));
    }
    return 0;
}

static void ba_merge(void *ctx, void *acc, const void *other) {
    const builtin_agg_t *b = ctx;
    uint8_t *a = acc;
    const uint8_t *o = other;
    for (int k = 0; k < b->n; k++, a += AGG_SLOT, o += AGG_SLOT) {
        const agg_item_t *it = &b->items[k];
        int64_t oc = slot_count(o);
        if (oc == 0) continue;
        if (it->kind == AGG_COUNT_STAR || it->kind == AGG_COUNT) {
            sl_st64(a, (uint64_t)(slot_count(a) + oc));
        } else if (it->fp) {
            double v;
            memcpy(&v, o + 8, 8);
            fold_f64(a, it, oc, v);
        } else {
            fold_i64(a, it, oc, (int64_t)sl_ld64(o + 8));
        }
    }
}

static int ba_result(void *ctx, const void *acc, const uint8_t *key, uint32_t keylen, const sl_window_t *win,
                     sl_row_writer_t *out) {
    const builtin_agg_t *b = ctx;
    if (b->nkeys > 0) {
        int rc = sl_key_decode_fields(&b->key, b->in, key, keylen, out, b->key_out);
        if (rc < 0) return rc;
    }
    sl_rw_set_i64(out, b->win_start, win->start);
    sl_rw_set_i64(out, b->win_end, win->end);
    const uint8_t *a = acc;
    for (int k = 0; k < b->n; k++, a += AGG_SLOT) {
        const agg_item_t *it = &b->items[k];
        int64_t c = slot_count(a);
        if (it->kind == AGG_COUNT_STAR || it->kind == AGG_COUNT) {
            sl_rw_set_i64(out, it->out, c);
            continue;
        }
        if (c == 0) {
            sl_rw_set_null(out, it->out);
            continue;
        }
        double d;
        memcpy(&d, a + 8, 8);
        int64_t v = (int64_t)sl_ld64(a + 8);
        if (it->kind == AGG_AVG)
            sl_rw_set_f64(out, it->out, (it->fp ? d : (double)v) / (double)c);
        else if (it->fp)
            sl_rw_set_f64(out, it->out, d);
        else if (it->in_type == SL_INT && it->kind != AGG_SUM)
            sl_rw_set_i32(out, it->out, (int32_t)v);
        else
            sl_rw_set_i64(out, it->out, v);
    }
    return 0;
}

/* ---- compiling the list ---- */

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
    builtin_agg_t *b = sl_calloc(1, sizeof *b);
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
        agg_item_t it = {.field = -1};
        if (strcmp(fn, "count") == 0) it.kind = AGG_COUNT;
        else if (strcmp(fn, "sum") == 0) it.kind = AGG_SUM;
        else if (strcmp(fn, "min") == 0) it.kind = AGG_MIN;
        else if (strcmp(fn, "max") == 0) it.kind = AGG_MAX;
        else if (strcmp(fn, "avg") == 0) it.kind = AGG_AVG;
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
            if (it.kind != AGG_COUNT) {
                sl_env_errorf(env, "window_agg(\"%s\"): column %d: only count takes *", aggs, argcol);
                goto bad;
            }
            it.kind = AGG_COUNT_STAR;
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
            if ((it.kind == AGG_SUM || it.kind == AGG_AVG) && !numeric) {
                sl_env_errorf(env, "window_agg(\"%s\"): column %d: %s of '%s' (%s): only INT, BIGINT and DOUBLE",
                              aggs, argcol, fn, arg, sl_type_name(it.in_type));
                goto bad;
            }
            if ((it.kind == AGG_MIN || it.kind == AGG_MAX) && !ordered) {
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
            if (it.kind == AGG_COUNT_STAR)
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
        case AGG_COUNT_STAR:
        case AGG_COUNT: ot = SL_BIGINT; nullable = false; break;
        case AGG_SUM: ot = it.fp ? SL_DOUBLE : SL_BIGINT; break;
        case AGG_AVG: ot = SL_DOUBLE; break;
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
    sl_aggregate_fn_t fn = {.acc_size = (uint32_t)(b->n * AGG_SLOT),
                            .init = ba_init,
                            .add = ba_add,
                            .merge = ba_merge,
                            .result = ba_result,
                            .ctx = b};
    return sl_window_aggregate(w, fn, out);
bad:
    sl_schema_unref(out);
    return NULL;
}
