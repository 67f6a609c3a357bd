/*
 * sql_dedup.c — Flink SQL's deduplication (stream-exec-deduplicate_1: the
 * ROW_NUMBER() OVER (PARTITION BY k ORDER BY time) ... WHERE rn = 1 pattern)
 * as a sluice keyed process function.
 *
 * Semantics follow Flink's non-mini-batch deduplicate functions
 * (DeduplicateFunctionHelper): per unique key one row in keyed value state
 * (so it goes through the state backend: heap or RocksDB, checkpoints,
 * rescaling by key group).
 *   - keep last, proctime: every record replaces the kept row and is
 *     emitted; keep last / keep first, rowtime: a record replaces the kept
 *     row when its rowtime is >= the kept one's (keep last) or < it (keep
 *     first), and is then emitted.  The emission (updateDeduplicateResult):
 *     with generateUpdateBefore or generateInsert (the plan's
 *     table.exec.deduplicate.insert-update-after-sensitive-enabled), the
 *     first row of a key is +I, a later one (-U old if generateUpdateBefore)
 *     +U new; with neither, every emitted row is +U.
 *   - keep first, proctime: the first record of a key is emitted (+I; the
 *     output is insert-only when the plan says outputInsertOnly), the rest
 *     are dropped; the state is a marker.
 * Refused by name: mini-batch (table.exec.mini-batch.enabled), an updating
 * input, state TTL, and rowtime keep-first with an insert-only output (the
 * watermark-buffered variant of Flink 2.x).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "graph/stream_graph.h"
#include "sql/sql_int.h"

struct sql_dedup {
    char *desc;
    char *state_name;
    sql_key_t key;     /* the unique key columns */
    bool rowtime;      /* order by the rowtime attribute, else processing time */
    int rowtime_flat;  /* flat field of the rowtime column */
    bool keep_last;
    bool gen_ub, gen_insert;
    bool out_changelog; /* the output carries a row kind */
    int in_width;      /* flat fields of the input (= output columns) */
};

void sql_dedup_free(sql_dedup_t *d) {
    if (!d) return;
    sl_free(d->state_name);
    sl_free(d->desc);
    sl_free(d);
}

bool sql_dedup_out_changelog(const sql_dedup_t *d) { return d->out_changelog; }

static const char *cfg_str(const json_t *jn, const char *k) {
    return json_string_value(json_object_get(json_object_get(jn, "configuration"), k));
}

sql_dedup_t *sql_dedup_parse(const json_t *jn, const sql_input_t *in, bool in_changelog, const char *desc, char *err,
                             size_t errlen) {
    sql_dedup_t *d = sl_calloc(1, sizeof *d);
    d->desc = sl_strdup(desc);
    d->in_width = sql_flat_of(in, in->ncols);
    const char *mb = cfg_str(jn, "table.exec.mini-batch.enabled");
    if (mb && strcmp(mb, "false")) {
        sql_perr(err, errlen, "%s: mini-batch deduplication (table.exec.mini-batch.enabled = '%s') is not supported yet",
                 desc, mb);
        goto fail;
    }
    if (in_changelog) {
        sql_perr(err, errlen, "%s: deduplication of an updating input is not supported yet", desc);
        goto fail;
    }
    json_t *state = json_array_get(json_object_get(jn, "state"), 0);
    const char *ttl = json_string_value(json_object_get(state, "ttl"));
    if (ttl && strcmp(ttl, "0 ms")) {
        sql_perr(err, errlen, "%s: state TTL '%s' (table.exec.state.ttl) is not supported yet for deduplication", desc,
                 ttl);
        goto fail;
    }
    const char *sn = json_string_value(json_object_get(state, "name"));
    d->state_name = sl_strdup(sn ? sn : "deduplicateState");
    json_t *rt = json_object_get(jn, "isRowtime"), *kl = json_object_get(jn, "keepLastRow"),
           *ub = json_object_get(jn, "generateUpdateBefore"), *oio = json_object_get(jn, "outputInsertOnly");
    if (!json_is_boolean(rt) || !json_is_boolean(kl) || !json_is_boolean(ub)) {
        sql_perr(err, errlen, "%s: \"isRowtime\", \"keepLastRow\" and \"generateUpdateBefore\" must be booleans", desc);
        goto fail;
    }
    d->rowtime = json_is_true(rt);
    d->keep_last = json_is_true(kl);
    d->gen_ub = json_is_true(ub);
    const char *gi = cfg_str(jn, "table.exec.deduplicate.insert-update-after-sensitive-enabled");
    d->gen_insert = !gi || !strcmp(gi, "true");
    bool insert_only = json_is_true(oio) || (!oio && !d->rowtime && !d->keep_last);
    if (insert_only && (d->rowtime || d->keep_last)) {
        sql_perr(err, errlen, "%s: %s deduplication with an insert-only output (outputInsertOnly) is not supported yet",
                 desc, d->rowtime ? "rowtime" : "keep-last");
        goto fail;
    }
    d->out_changelog = !insert_only;
    json_t *uk = json_object_get(jn, "uniqueKeys");
    if (!json_is_array(uk) || json_array_size(uk) > 64) {
        sql_perr(err, errlen, "%s: \"uniqueKeys\" is missing or not an array (of at most 64 columns)", desc);
        goto fail;
    }
    d->key.n = (int)json_array_size(uk);
    d->key.desc = d->desc;
    for (int i = 0; i < d->key.n; i++) {
        json_t *g = json_array_get(uk, (size_t)i);
        if (!json_is_integer(g) || json_integer_value(g) < 0 || json_integer_value(g) >= in->ncols) {
            sql_perr(err, errlen, "%s: uniqueKeys[%d] is not a column of the input", desc, i);
            goto fail;
        }
        int c = (int)json_integer_value(g);
        if (in->cols[c]->kind == SK_ROW) {
            sql_perr(err, errlen, "%s: deduplication on a ROW column is not supported", desc);
            goto fail;
        }
        d->key.flat[i] = sql_flat_of(in, c);
        d->key.types[i] = in->cols[c];
    }
    if (d->rowtime) {
        /* the rowtime attribute: the column whose type is marked "kind": "ROWTIME" */
        json_t *fields = json_object_get(json_object_get(jn, "outputType"), "fields");
        int rc = -1;
        for (size_t i = 0; i < json_array_size(fields); i++) {
            json_t *ft = json_object_get(json_array_get(fields, i), "fieldType");
            const char *k = json_string_value(json_object_get(ft, "kind"));
            if (k && !strcmp(k, "ROWTIME")) {
                if (rc >= 0) {
                    sql_perr(err, errlen, "%s: more than one rowtime attribute in the input", desc);
                    goto fail;
                }
                rc = (int)i;
            }
        }
        if (rc < 0 || rc >= in->ncols || in->cols[rc]->kind != SK_TIMESTAMP) {
            sql_perr(err, errlen, "%s: rowtime deduplication needs a TIMESTAMP rowtime attribute in its input", desc);
            goto fail;
        }
        d->rowtime_flat = sql_flat_of(in, rc);
    }
    return d;
fail:
    sql_dedup_free(d);
    return NULL;
}

/* ---- runtime ------------------------------------------------------------------ */

typedef struct dedup_ctx {
    const sql_dedup_t *d;
    const sl_schema_t *out_schema;
    sl_state_t *st;
    uint8_t *prev; /* a copy of the kept row (state bytes are valid only until the next call) */
    size_t prev_cap;
} dedup_ctx_t;

static void *dedup_clone(const void *c) {
    const dedup_ctx_t *p = c;
    dedup_ctx_t *x = sl_calloc(1, sizeof *x);
    x->d = p->d;
    x->out_schema = p->out_schema;
    return x;
}

static void dedup_ctx_free(void *c) {
    dedup_ctx_t *x = c;
    sl_free(x->prev);
    sl_free(x);
}

static int dedup_open(void *ctx, sl_rt_t *rt) {
    dedup_ctx_t *x = ctx;
    x->st = sl_state_value(rt, x->d->state_name);
    return x->st ? 0 : SL_EINVAL;
}

/* Emits row r (of the input schema) with kind. */
static void emit(dedup_ctx_t *x, sl_collector_t *out, const sl_row_t *r, int kind) {
    sl_row_writer_t *w = sl_out_row(out);
    for (int f = 0; f < x->d->in_width; f++) {
        if (sl_row_is_null(r, f)) sl_rw_set_null(w, f);
        else sl_rw_copy_field(w, f, r, f);
    }
    if (x->d->out_changelog) sl_rw_set_i32(w, x->d->in_width, kind);
    sl_emit(out);
}

static int dedup_process(void *ctx, sl_pctx_t *pc, const sl_record_t *rec, sl_collector_t *out) {
    (void)pc;
    dedup_ctx_t *x = ctx;
    const sql_dedup_t *d = x->d;
    const sl_row_t *in = &rec->row;
    uint32_t len = 0;
    const void *b = sl_value_get(x->st, &len);
    if (!d->rowtime && !d->keep_last) {
        /* proctime keep first: only the first record of a key */
        if (b) return 0;
        uint8_t one = 1;
        int rc = sl_value_put(x->st, &one, 1);
        if (rc < 0) return rc;
        emit(x, out, in, SQL_KIND_INSERT);
        return 0;
    }
    sl_row_t prev = {0};
    if (b) {
        if (len > x->prev_cap) {
            x->prev_cap = (size_t)len * 2;
            x->prev = sl_realloc(x->prev, x->prev_cap);
        }
        memcpy(x->prev, b, len);
        prev = (sl_row_t){.data = x->prev, .len = len, .schema = in->schema};
        if (sl_row_validate(&prev) < 0) {
            fprintf(stderr, "sluice sql: %s: a malformed row in state\n", d->desc);
            return SL_ESTATE;
        }
    }
    if (d->rowtime && b) {
        if (sl_row_is_null(in, d->rowtime_flat)) {
            fprintf(stderr, "sluice sql: %s: a record with a NULL rowtime\n", d->desc);
            return SL_EINVAL;
        }
        int64_t t = sl_row_i64(in, d->rowtime_flat), pt = sl_row_i64(&prev, d->rowtime_flat);
        bool replace = d->keep_last ? pt <= t : t < pt;
        if (!replace) return 0;
    }
    int rc = sl_value_put(x->st, in->data, in->len);
    if (rc < 0) return rc;
    if (d->gen_ub || d->gen_insert) {
        if (!b) {
            emit(x, out, in, SQL_KIND_INSERT);
            return 0;
        }
        if (d->gen_ub) emit(x, out, &prev, SQL_KIND_UPDATE_BEFORE);
    }
    emit(x, out, in, SQL_KIND_UPDATE_AFTER);
    return 0;
}

sl_stream_t *sql_dedup_build(sl_env_t *env, sl_stream_t *in, sql_dedup_t *d, sl_schema_t *out_schema) {
    dedup_ctx_t *proto = sl_calloc(1, sizeof *proto); /* cloned for each subtask */
    proto->d = d;
    proto->out_schema = out_schema;
    sl_env_own(env, proto, sl_free);
    sl_process_fn_t fn = {.open = dedup_open,
                          .process = dedup_process,
                          .opts = {.ctx = proto, .ctx_clone = dedup_clone, .ctx_free = dedup_ctx_free}};
    return sl_keyed_process(sql_key_by(in, &d->key), fn, sl_schema_ref(out_schema));
}
