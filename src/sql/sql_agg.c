/*
 * sql_agg.c — Flink SQL's non-windowed GROUP BY (stream-exec-group-aggregate_1)
 * as a sluice keyed process function, and the key selector of SQL's HASH
 * exchanges.
 *
 * Semantics follow Flink's GroupAggFunction: per group key one accumulator
 * (a row of acc_schema in keyed value state, so it goes through the state
 * backend: heap or RocksDB, checkpoints, rescaling by key group).  A record
 * of kind +I/+U accumulates, -U/-D retracts; the first row of a key emits
 * +I, a change emits (-U old if the plan's generateUpdateBefore) +U new, an
 * unchanged result emits nothing, and when the record count of a key falls
 * to zero (retraction) -D old is emitted and the state cleared.  A
 * retraction for a key without state is ignored.
 *
 * Aggregates: COUNT(*), COUNT(x), SUM, AVG (integers and DOUBLE; Flink's
 * types: SUM(INT) is INT with Java's wrapping, AVG of integers is integer
 * division of a BIGINT sum, NULL when nothing was counted), MIN and MAX
 * (insert-only input), each optionally DISTINCT (a keyed map state per
 * call: value -> count, the aggregate sees a value when its count leaves 0
 * and loses it when it returns to 0) and with FILTER (a BOOLEAN input
 * column; only TRUE counts).  NULL arguments are skipped.
 *
 * Row kinds: a SQL row of an updating stream carries its kind (Flink's
 * RowKind byte: 0 +I, 1 -U, 2 +U, 3 -D) in a trailing hidden INT field
 * after its columns' flat fields (sql_int.h: SQL_KIND_*).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "graph/stream_graph.h"
#include "sql/sql_int.h"

typedef enum { AGG_COUNT_STAR, AGG_COUNT, AGG_SUM, AGG_AVG, AGG_MIN, AGG_MAX } agg_fn_t;

typedef struct agg_call {
    agg_fn_t fn;
    char *name;
    int nargs;
    int arg_flat[8];
    const sql_type_t *arg_type[8];
    int filter_flat; /* -1: none */
    bool distinct;
    const sql_type_t *rtype; /* the output column's type */
    sql_type_t *acc_type;    /* SUM/AVG: the sum's type; MIN/MAX: the value's */
    int acc_f;               /* first field of this call in the accumulator row */
} agg_call_t;

struct sql_agg {
    char *desc;
    int ngroup;
    int group_col[64];
    int group_flat[64];
    const sql_type_t *group_type[64];
    int ncalls;
    agg_call_t *calls;
    bool gen_ub;
    int in_kind; /* flat field of the input's row kind, -1: insert-only input */
    int out_width;
    sl_schema_t *acc_schema;
    sql_type_t *t_bigint;
    char *state_name;
    sql_key_t key; /* the grouping columns */
};


void sql_agg_free(sql_agg_t *a) {
    if (!a) return;
    for (int i = 0; a->calls && i < a->ncalls; i++) {
        sl_free(a->calls[i].name);
        sql_type_free(a->calls[i].acc_type);
    }
    sl_free(a->calls);
    if (a->acc_schema) sl_schema_unref(a->acc_schema);
    sql_type_free(a->t_bigint);
    sl_free(a->state_name);
    sl_free(a->desc);
    sl_free(a);
}

static bool minmax_kind(sql_kind_t k) {
    return sql_kind_integral(k) || k == SK_DOUBLE || k == SK_DECIMAL || sql_kind_string(k) || k == SK_TIMESTAMP ||
           k == SK_BOOLEAN;
}

sql_agg_t *sql_agg_parse(const json_t *jn, const sql_input_t *in, bool in_changelog, int ncols,
                         sql_type_t *const *cols, const char *desc, char *err, size_t errlen) {
    sql_agg_t *a = sl_calloc(1, sizeof *a);
    a->desc = sl_strdup(desc);
    char m[256];
    a->t_bigint = sql_type_parse_str("BIGINT NOT NULL", m, sizeof m);
    int in_width = sql_flat_of(in, in->ncols);
    a->in_kind = in_changelog ? in_width : -1;
    json_t *cfg = json_object_get(jn, "configuration");
    const char *mb = json_string_value(json_object_get(cfg, "table.exec.mini-batch.enabled"));
    if (mb && strcmp(mb, "false")) {
        sql_perr(err, errlen, "%s: table.exec.mini-batch.enabled = '%s' is not supported yet", desc, mb);
        goto fail;
    }
    json_t *state = json_array_get(json_object_get(jn, "state"), 0);
    const char *ttl = json_string_value(json_object_get(state, "ttl"));
    if (ttl && strcmp(ttl, "0 ms")) {
        sql_perr(err, errlen, "%s: state TTL '%s' (table.exec.state.ttl) is not supported yet for aggregates", desc, ttl);
        goto fail;
    }
    const char *sn = json_string_value(json_object_get(state, "name"));
    a->state_name = sl_strdup(sn ? sn : "groupAggregateState");
    json_t *ub = json_object_get(jn, "generateUpdateBefore");
    if (!json_is_boolean(ub)) {
        sql_perr(err, errlen, "%s: \"generateUpdateBefore\" is missing or not a boolean", desc);
        goto fail;
    }
    a->gen_ub = json_is_true(ub);
    json_t *grp = json_object_get(jn, "grouping");
    if (!json_is_array(grp) || json_array_size(grp) > 64) {
        sql_perr(err, errlen, "%s: \"grouping\" is missing or not an array (of at most 64 columns)", desc);
        goto fail;
    }
    a->ngroup = (int)json_array_size(grp);
    for (int i = 0; i < a->ngroup; i++) {
        json_t *g = json_array_get(grp, (size_t)i);
        if (!json_is_integer(g) || json_integer_value(g) < 0 || json_integer_value(g) >= in->ncols) {
            sql_perr(err, errlen, "%s: grouping[%d] is not a column of the input", desc, i);
            goto fail;
        }
        int c = (int)json_integer_value(g);
        if (in->cols[c]->kind == SK_ROW) {
            sql_perr(err, errlen, "%s: grouping by a ROW column is not supported", desc);
            goto fail;
        }
        a->group_col[i] = c;
        a->group_flat[i] = sql_flat_of(in, c);
        a->group_type[i] = in->cols[c];
        a->key.flat[i] = a->group_flat[i];
        a->key.types[i] = in->cols[c];
    }
    a->key.n = a->ngroup;
    a->key.desc = a->desc;
    json_t *calls = json_object_get(jn, "aggCalls");
    json_t *retr = json_object_get(jn, "aggCallNeedRetractions");
    if (!json_is_array(calls)) {
        sql_perr(err, errlen, "%s: \"aggCalls\" is missing or not an array", desc);
        goto fail;
    }
    a->ncalls = (int)json_array_size(calls);
    if (ncols != a->ngroup + a->ncalls) {
        sql_perr(err, errlen, "%s: %d output columns for %d grouping columns and %d aggregates", desc, ncols, a->ngroup,
             a->ncalls);
        goto fail;
    }
    for (int i = 0; i < a->ngroup; i++)
        if (cols[i]->kind != a->group_type[i]->kind) {
            sql_perr(err, errlen, "%s: output column %d is not of its grouping column's type", desc, i);
            goto fail;
        }
    a->calls = sl_calloc((size_t)a->ncalls + 1, sizeof *a->calls);
    a->acc_schema = sl_schema_new();
    sl_schema_add(a->acc_schema, "count1", SL_BIGINT, false);
    for (int i = 0; i < a->ncalls; i++) {
        json_t *jc = json_array_get(calls, (size_t)i);
        agg_call_t *c = &a->calls[i];
        const char *iname = json_string_value(json_object_get(jc, "internalName"));
        const char *nm = json_string_value(json_object_get(jc, "name"));
        c->name = sl_strdup(nm ? nm : "?");
        c->rtype = cols[a->ngroup + i];
        json_t *args = json_object_get(jc, "argList");
        json_t *fa = json_object_get(jc, "filterArg");
        if (!iname || !json_is_array(args) || !json_is_integer(fa)) {
            sql_perr(err, errlen, "%s: aggCalls[%d] needs \"internalName\", \"argList\" and \"filterArg\"", desc, i);
            goto fail;
        }
        if (json_is_true(json_object_get(jc, "approximate"))) {
            sql_perr(err, errlen, "%s: approximate aggregate %s is not supported", desc, iname);
            goto fail;
        }
        c->distinct = json_is_true(json_object_get(jc, "distinct"));
        c->nargs = (int)json_array_size(args);
        if (c->nargs > 8) {
            sql_perr(err, errlen, "%s: aggregate %s with %d arguments", desc, iname, c->nargs);
            goto fail;
        }
        for (int k = 0; k < c->nargs; k++) {
            json_t *ja = json_array_get(args, (size_t)k);
            if (!json_is_integer(ja) || json_integer_value(ja) < 0 || json_integer_value(ja) >= in->ncols) {
                sql_perr(err, errlen, "%s: aggCalls[%d].argList[%d] is not a column of the input", desc, i, k);
                goto fail;
            }
            int col = (int)json_integer_value(ja);
            c->arg_type[k] = in->cols[col];
            c->arg_flat[k] = sql_flat_of(in, col);
            if (in->cols[col]->kind == SK_ROW) {
                sql_perr(err, errlen, "%s: aggregate %s of a ROW column is not supported", desc, iname);
                goto fail;
            }
        }
        int f = (int)json_integer_value(fa);
        c->filter_flat = -1;
        if (f >= 0) {
            if (f >= in->ncols || in->cols[f]->kind != SK_BOOLEAN) {
                sql_perr(err, errlen, "%s: aggCalls[%d].filterArg is not a BOOLEAN column of the input", desc, i);
                goto fail;
            }
            c->filter_flat = sql_flat_of(in, f);
        }
        bool need_retract = json_is_true(json_array_get(retr, (size_t)i));
        const sql_type_t *a0 = c->nargs ? c->arg_type[0] : NULL;
        sql_kind_t rk = c->rtype->kind;
        if (!strcmp(iname, "$COUNT$1")) {
            c->fn = c->nargs == 0 ? AGG_COUNT_STAR : AGG_COUNT;
            if (rk != SK_BIGINT) {
                sql_perr(err, errlen, "%s: COUNT returning %s", desc, c->rtype->text);
                goto fail;
            }
            if (c->nargs > 1 && !c->distinct) {
                sql_perr(err, errlen, "%s: COUNT of %d arguments is not supported", desc, c->nargs);
                goto fail;
            }
        } else if (!strcmp(iname, "$SUM$1") || !strcmp(iname, "$SUM0$1") || !strcmp(iname, "$AVG$1")) {
            bool avg = !strcmp(iname, "$AVG$1");
            c->fn = avg ? AGG_AVG : AGG_SUM;
            if (!strcmp(iname, "$SUM0$1")) {
                sql_perr(err, errlen, "%s: aggregate $SUM0 is not supported yet", desc);
                goto fail;
            }
            if (c->nargs != 1 || !((sql_kind_integral(a0->kind) && sql_kind_integral(rk)) ||
                                   (a0->kind == SK_DOUBLE && rk == SK_DOUBLE))) {
                sql_perr(err, errlen, "%s: %s of %s returning %s is not supported (integers and DOUBLE are)", desc,
                     avg ? "AVG" : "SUM", a0 ? a0->text : "nothing", c->rtype->text);
                goto fail;
            }
            /* Flink: SUM keeps the result type; AVG of integers sums in BIGINT */
            c->acc_type = sql_type_parse_str(rk == SK_DOUBLE ? "DOUBLE" : avg ? "BIGINT" : c->rtype->text, m, sizeof m);
        } else if (!strcmp(iname, "$MIN$1") || !strcmp(iname, "$MAX$1")) {
            c->fn = !strcmp(iname, "$MIN$1") ? AGG_MIN : AGG_MAX;
            if (c->nargs != 1 || !minmax_kind(a0->kind) || a0->kind != rk) {
                sql_perr(err, errlen, "%s: %s of %s is not supported", desc, iname + 1, a0 ? a0->text : "nothing");
                goto fail;
            }
            if (need_retract && !c->distinct) {
                sql_perr(err, errlen, "%s: %s over an updating input (MIN/MAX with retraction) is not supported yet",
                     desc, c->fn == AGG_MIN ? "MIN" : "MAX");
                goto fail;
            }
            c->acc_type = sql_type_parse_str(a0->text, m, sizeof m);
        } else {
            sql_perr(err, errlen, "%s: aggregate function %s is not supported yet", desc, iname);
            goto fail;
        }
        if (c->acc_type && c->acc_type->width != 1) {
            sql_perr(err, errlen, "%s: aggregate %s: unsupported type", desc, iname);
            goto fail;
        }
        if (c->acc_type) c->acc_type->nullable = true;
        /* accumulator fields: [value] [count] */
        c->acc_f = sl_schema_field_count(a->acc_schema);
        char fname[64];
        if (c->acc_type) {
            snprintf(fname, sizeof fname, "v%d", i);
            sql_type_add_fields(c->acc_type, fname, a->acc_schema);
        }
        snprintf(fname, sizeof fname, "n%d", i);
        sl_schema_add(a->acc_schema, fname, SL_BIGINT, false);
    }
    return a;
fail:
    sql_agg_free(a);
    return NULL;
}

/* ---- keys ------------------------------------------------------------------ */

/* Appends the canonical bytes of v (type t): a NULL byte, then the value. */
static int enc_val(const sql_type_t *t, const sql_val_t *v, uint8_t *buf, int cap, int k) {
    if (k + 1 > cap) return -1;
    buf[k++] = v->null ? 1 : 0;
    if (v->null) return k;
    if (sql_kind_string(t->kind) || t->kind == SK_BINARY || t->kind == SK_VARBINARY) {
        if (k + 4 + (int)v->len > cap) return -1;
        memcpy(buf + k, &v->len, 4);
        if (v->len) memcpy(buf + k + 4, v->s, v->len);
        return k + 4 + (int)v->len;
    }
    if (t->kind == SK_DECIMAL) {
        if (k + 16 > cap) return -1;
        memcpy(buf + k, &v->dec, 16);
        return k + 16;
    }
    if (k + 8 > cap) return -1;
    if (t->kind == SK_DOUBLE) memcpy(buf + k, &v->d, 8);
    else memcpy(buf + k, &v->i, 8);
    return k + 8;
}

int sql_key_encode(const sql_key_t *key, const sl_row_t *row, uint8_t *buf, int cap) {
    int k = 0;
    for (int i = 0; i < key->n; i++) {
        sql_val_t v;
        memset(&v, 0, sizeof v);
        sql_val_read(key->types[i], row, key->flat[i], &v);
        k = enc_val(key->types[i], &v, buf, cap, k);
        if (k < 0) return SL_EINVAL;
    }
    return k;
}

static int key_fn(void *ctx, const sl_row_t *row, uint8_t *key, int cap) {
    int n = sql_key_encode(ctx, row, key, cap);
    if (n < 0)
        fprintf(stderr, "sluice sql: %s: a key is longer than %d bytes (not supported)\n", ((sql_key_t *)ctx)->desc,
                cap);
    return n;
}

sl_keyed_t *sql_key_by(sl_stream_t *s, const sql_key_t *key) { return sl_key_by_fn(s, key_fn, (void *)key); }

/* ---- runtime ------------------------------------------------------------------ */

typedef struct agg_ctx {
    const sql_agg_t *a;
    const sl_schema_t *out_schema;
    sl_state_t *acc;
    sl_state_t **dist;
    sl_row_writer_t accw, prevw, neww, compw;
    uint8_t *kbuf;
    size_t kcap;
} agg_ctx_t;

static void *agg_clone(const void *c) {
    const agg_ctx_t *p = c;
    agg_ctx_t *x = sl_calloc(1, sizeof *x);
    x->a = p->a;
    x->out_schema = p->out_schema;
    x->dist = sl_calloc((size_t)x->a->ncalls + 1, sizeof *x->dist);
    sl_rw_init(&x->accw);
    sl_rw_init(&x->prevw);
    sl_rw_init(&x->neww);
    sl_rw_init(&x->compw);
    return x;
}

static void agg_ctx_free(void *c) {
    agg_ctx_t *x = c;
    sl_rw_free(&x->accw);
    sl_rw_free(&x->prevw);
    sl_rw_free(&x->neww);
    sl_rw_free(&x->compw);
    sl_free(x->dist);
    sl_free(x->kbuf);
    sl_free(x);
}

static int agg_open(void *ctx, sl_rt_t *rt) {
    agg_ctx_t *x = ctx;
    x->acc = sl_state_value(rt, x->a->state_name);
    if (!x->acc) return SL_EINVAL;
    for (int i = 0; i < x->a->ncalls; i++) {
        if (!x->a->calls[i].distinct) continue;
        char name[64];
        snprintf(name, sizeof name, "distinct-%d", i);
        x->dist[i] = sl_state_map(rt, name);
        if (!x->dist[i]) return SL_EINVAL;
    }
    return 0;
}

int64_t sql_narrow_int(int64_t v, sql_kind_t k) {
    switch (k) {
    case SK_TINYINT: return (int8_t)v;
    case SK_SMALLINT: return (int16_t)v;
    case SK_INT: return (int32_t)v;
    default: return v;
    }
}

/* Total order of MIN/MAX values (strings by their UTF-8 bytes, as Flink's BinaryStringData). */
int sql_cmp_val(const sql_type_t *t, const sql_val_t *a, const sql_val_t *b) {
    if (t->kind == SK_DOUBLE) return a->d < b->d ? -1 : a->d > b->d;
    if (t->kind == SK_DECIMAL) return a->dec < b->dec ? -1 : a->dec > b->dec;
    if (sql_kind_string(t->kind)) {
        uint32_t n = a->len < b->len ? a->len : b->len;
        int c = n ? memcmp(a->s, b->s, n) : 0;
        return c ? c : a->len < b->len ? -1 : a->len > b->len;
    }
    return a->i < b->i ? -1 : a->i > b->i;
}

/* Applies one value (already filtered, non-NULL, distinct-checked) of call c. */
static void apply(agg_ctx_t *x, const agg_call_t *c, const sl_row_t *in, bool add) {
    sl_row_writer_t *w = &x->accw;
    sl_row_t acc = sl_rw_row(w);
    int nf = c->acc_type ? c->acc_f + 1 : c->acc_f;
    int64_t n = sl_row_i64(&acc, nf);
    switch (c->fn) {
    case AGG_COUNT_STAR:
    case AGG_COUNT:
        sl_rw_set_i64(w, nf, n + (add ? 1 : -1));
        return;
    case AGG_SUM:
    case AGG_AVG: {
        sql_val_t v, s;
        memset(&v, 0, sizeof v);
        memset(&s, 0, sizeof s);
        sql_val_read(c->arg_type[0], in, c->arg_flat[0], &v);
        sql_val_read(c->acc_type, &acc, c->acc_f, &s);
        if (s.null) s.i = 0, s.d = 0, s.null = false;
        if (c->acc_type->kind == SK_DOUBLE) s.d = add ? s.d + v.d : s.d - v.d;
        else s.i = sql_narrow_int((int64_t)(add ? (uint64_t)s.i + (uint64_t)v.i : (uint64_t)s.i - (uint64_t)v.i),
                              c->acc_type->kind);
        sql_val_write(c->acc_type, &s, w, c->acc_f);
        sl_rw_set_i64(w, nf, n + (add ? 1 : -1));
        return;
    }
    case AGG_MIN:
    case AGG_MAX: {
        sql_val_t v, cur;
        memset(&v, 0, sizeof v);
        memset(&cur, 0, sizeof cur);
        sql_val_read(c->arg_type[0], in, c->arg_flat[0], &v);
        sql_val_read(c->acc_type, &acc, c->acc_f, &cur);
        int d = cur.null ? 0 : sql_cmp_val(c->acc_type, &v, &cur);
        if (cur.null || (c->fn == AGG_MIN ? d < 0 : d > 0)) sql_val_write(c->acc_type, &v, w, c->acc_f);
        sl_rw_set_i64(w, nf, n + 1);
        return;
    }
    }
}

/* The result of call c over accumulator acc. */
static void result(const agg_call_t *c, const sl_row_t *acc, sql_val_t *out) {
    memset(out, 0, sizeof *out);
    int nf = c->acc_type ? c->acc_f + 1 : c->acc_f;
    int64_t n = sl_row_i64(acc, nf);
    switch (c->fn) {
    case AGG_COUNT_STAR:
    case AGG_COUNT: out->i = n; return;
    case AGG_SUM:
        if (n == 0) out->null = true;
        else sql_val_read(c->acc_type, acc, c->acc_f, out);
        return;
    case AGG_AVG: {
        if (n == 0) {
            out->null = true;
            return;
        }
        sql_val_t s;
        memset(&s, 0, sizeof s);
        sql_val_read(c->acc_type, acc, c->acc_f, &s);
        if (c->acc_type->kind == SK_DOUBLE) out->d = s.d / (double)n;
        else out->i = sql_narrow_int(s.i / n, c->rtype->kind);
        return;
    }
    case AGG_MIN:
    case AGG_MAX: sql_val_read(c->acc_type, acc, c->acc_f, out); return;
    }
}

/* The output row (group columns from the input record, results from acc) into w. */
static void write_out(agg_ctx_t *x, const sl_row_t *in, const sl_row_t *acc, int kind, sl_row_writer_t *w) {
    const sql_agg_t *a = x->a;
    sl_rw_begin(w, x->out_schema);
    int f = 0;
    for (int i = 0; i < a->ngroup; i++, f++) {
        if (sl_row_is_null(in, a->group_flat[i])) sl_rw_set_null(w, f);
        else sl_rw_copy_field(w, f, in, a->group_flat[i]);
    }
    for (int i = 0; i < a->ncalls; i++, f++) {
        sql_val_t v;
        result(&a->calls[i], acc, &v);
        sql_val_write(a->calls[i].rtype, &v, w, f);
    }
    sl_rw_set_i32(w, a->out_width, kind);
}

/* Whether the aggregate results of rows p and q are equal (their fields' bytes). */
static bool same_results(const sql_agg_t *a, const sl_row_t *p, const sl_row_t *q) {
    for (int f = a->ngroup; f < a->out_width; f++) {
        bool pn = sl_row_is_null(p, f), qn = sl_row_is_null(q, f);
        if (pn != qn) return false;
        if (pn) continue;
        uint32_t pl, ql;
        const uint8_t *pb = sl_row_field_key(p, f, &pl), *qb = sl_row_field_key(q, f, &ql);
        if (pl != ql || (pl && memcmp(pb, qb, pl))) return false;
    }
    return true;
}

static void emit_row(sl_collector_t *out, const sl_row_t *r, int kind, int kind_field) {
    sl_row_writer_t *w = sl_out_row(out);
    sl_rw_copy_row(w, r);
    sl_rw_set_i32(w, kind_field, kind);
    sl_emit(out);
}

/* Whether the distinct set of call c lets this value through (and records it). */
static int distinct_step(agg_ctx_t *x, int ci, const sl_row_t *in, bool add, bool *pass) {
    const agg_call_t *c = &x->a->calls[ci];
    sql_key_t key = {.n = c->nargs, .desc = x->a->desc};
    memcpy(key.flat, c->arg_flat, sizeof c->arg_flat);
    memcpy(key.types, c->arg_type, sizeof c->arg_type);
    int need = 0;
    for (int k = 0; k < c->nargs; k++) {
        uint32_t l = 0;
        if (!sl_row_is_null(in, c->arg_flat[k])) sl_row_field_key(in, c->arg_flat[k], &l);
        need += 32 + (int)l;
    }
    if ((size_t)need > x->kcap) {
        x->kcap = (size_t)need * 2;
        x->kbuf = sl_realloc(x->kbuf, x->kcap);
    }
    int kl = sql_key_encode(&key, in, x->kbuf, (int)x->kcap);
    if (kl < 0) return SL_EINVAL;
    uint32_t vl;
    const void *vp = sl_map_get(x->dist[ci], x->kbuf, (uint32_t)kl, &vl);
    int64_t cnt = 0;
    if (vp && vl == 8) memcpy(&cnt, vp, 8);
    int rc = 0;
    if (add) {
        *pass = cnt == 0;
        cnt++;
        rc = sl_map_put(x->dist[ci], x->kbuf, (uint32_t)kl, &cnt, 8);
    } else {
        *pass = cnt == 1;
        if (cnt <= 1) rc = cnt == 1 ? sl_map_remove(x->dist[ci], x->kbuf, (uint32_t)kl) : 0;
        else {
            cnt--;
            rc = sl_map_put(x->dist[ci], x->kbuf, (uint32_t)kl, &cnt, 8);
        }
    }
    return rc;
}

static int agg_process(void *ctx, sl_pctx_t *pc, const sl_record_t *rec, sl_collector_t *out) {
    (void)pc;
    agg_ctx_t *x = ctx;
    const sql_agg_t *a = x->a;
    const sl_row_t *in = &rec->row;
    int kind = a->in_kind >= 0 ? sl_row_i32(in, a->in_kind) : SQL_KIND_INSERT;
    bool add = kind == SQL_KIND_INSERT || kind == SQL_KIND_UPDATE_AFTER;
    uint32_t len = 0;
    const void *b = sl_value_get(x->acc, &len);
    bool first = b == NULL;
    if (first && !add) return 0; /* retraction of nothing */
    sl_rw_begin(&x->accw, a->acc_schema);
    if (first) {
        for (int f = 0; f < sl_schema_field_count(a->acc_schema); f++) {
            if (sl_schema_field_nullable(a->acc_schema, f)) sl_rw_set_null(&x->accw, f);
            else sl_rw_set_i64(&x->accw, f, 0);
        }
    } else {
        sl_row_t old = {.data = b, .len = len, .schema = a->acc_schema};
        if (sl_row_validate(&old) < 0) {
            fprintf(stderr, "sluice sql: %s: a malformed accumulator in state\n", a->desc);
            return SL_ESTATE;
        }
        sl_rw_copy_row(&x->accw, &old);
        sl_row_t acc = sl_rw_row(&x->accw);
        write_out(x, in, &acc, SQL_KIND_UPDATE_BEFORE, &x->prevw);
    }
    {
        sl_row_t acc = sl_rw_row(&x->accw);
        sl_rw_set_i64(&x->accw, 0, sl_row_i64(&acc, 0) + (add ? 1 : -1));
    }
    for (int i = 0; i < a->ncalls; i++) {
        const agg_call_t *c = &a->calls[i];
        if (c->filter_flat >= 0 && (sl_row_is_null(in, c->filter_flat) || !sl_row_bool(in, c->filter_flat))) continue;
        bool null_arg = false;
        for (int k = 0; k < c->nargs; k++) null_arg |= sl_row_is_null(in, c->arg_flat[k]);
        if (null_arg) continue;
        if (c->distinct) {
            bool pass;
            int rc = distinct_step(x, i, in, add, &pass);
            if (rc < 0) return rc;
            if (!pass) continue;
        }
        apply(x, c, in, add);
    }
    if (x->accw.err) return x->accw.err;
    sl_row_t acc = sl_rw_row(&x->accw);
    if (sl_row_i64(&acc, 0) <= 0) {
        /* every record of the key retracted */
        if (!first) {
            sl_row_t prev = sl_rw_row(&x->prevw);
            emit_row(out, &prev, SQL_KIND_DELETE, a->out_width);
        }
        sl_state_clear(x->acc);
        for (int i = 0; i < a->ncalls; i++)
            if (x->dist[i]) sl_state_clear(x->dist[i]);
        return 0;
    }
    /* compacted: a string replaced in place leaves its old bytes behind */
    sl_rw_begin(&x->compw, a->acc_schema);
    for (int f = 0; f < sl_schema_field_count(a->acc_schema); f++) {
        if (sl_row_is_null(&acc, f)) sl_rw_set_null(&x->compw, f);
        else sl_rw_copy_field(&x->compw, f, &acc, f);
    }
    if (x->compw.err) return x->compw.err;
    acc = sl_rw_row(&x->compw);
    int rc = sl_value_put(x->acc, acc.data, acc.len);
    if (rc < 0) return rc;
    write_out(x, in, &acc, first ? SQL_KIND_INSERT : SQL_KIND_UPDATE_AFTER, &x->neww);
    sl_row_t now = sl_rw_row(&x->neww);
    if (first) {
        emit_row(out, &now, SQL_KIND_INSERT, a->out_width);
        return 0;
    }
    sl_row_t prev = sl_rw_row(&x->prevw);
    if (same_results(a, &prev, &now)) return 0;
    if (a->gen_ub) emit_row(out, &prev, SQL_KIND_UPDATE_BEFORE, a->out_width);
    emit_row(out, &now, SQL_KIND_UPDATE_AFTER, a->out_width);
    return 0;
}

sl_stream_t *sql_agg_build(sl_env_t *env, sl_stream_t *in, sql_agg_t *a, sl_schema_t *out_schema) {
    a->out_width = sl_schema_field_count(out_schema) - 1;
    agg_ctx_t *proto = sl_calloc(1, sizeof *proto); /* cloned for each subtask */
    proto->a = a;
    proto->out_schema = out_schema;
    sl_env_own(env, proto, sl_free);
    sl_process_fn_t fn = {.open = agg_open,
                          .process = agg_process,
                          .opts = {.ctx = proto, .ctx_clone = agg_clone, .ctx_free = agg_ctx_free}};
    return sl_keyed_process(sql_key_by(in, &a->key), fn, sl_schema_ref(out_schema));
}
