/*
 * sql_rank.c — Flink SQL's Top-N (stream-exec-rank_1: ROW_NUMBER() OVER
 * (PARTITION BY p ORDER BY s) ... WHERE rn <= N) as a sluice keyed process
 * function, keyed by the partition columns.
 *
 * State: per partition a keyed map state (the plan's state name, e.g.
 * "rankState") from the canonical bytes of a sort key to the rows of that
 * sort key in arrival order (each a u32 little-endian length, then the
 * row's bytes), so it goes through the state backend (heap or RocksDB,
 * checkpoints, rescaling by key group).  A record reads the partition's
 * entries and orders them by the plan's orderBy (per field ascending or
 * descending, NULLs first or last independently of the direction, strings
 * by their UTF-8 bytes, as Flink's generated sort-key comparator).
 *
 * Strategy AppendFast (insert-only input), as Flink's AppendOnlyTopNFunction:
 * a record whose sort key is better than the worst kept one, or any record
 * while fewer than rankEnd rows are kept, is appended to its sort key's
 * rows.  With the rank number in the output (or a rankStart > 1) the rows
 * whose rank moves emit, rank slot by rank slot, (-U old if the plan's
 * generateUpdateBefore) +U new, the new last slot +I, and the sort keys
 * beyond rankEnd are dropped from state; without it, the row pushed out
 * of the top N is -D and the new one +I.  Only ranks in
 * [rankStart, rankEnd] are emitted.
 *
 * Refused by name: RANK / DENSE_RANK, a variable rank range, the
 * Retract and UpdateFast strategies, an updating input, state TTL.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "graph/stream_graph.h"
#include "sql/sql_int.h"

typedef struct order_field {
    int flat;
    const sql_type_t *type;
    bool asc, nulls_last;
} order_field_t;

struct sql_rank {
    char *desc;
    char *state_name;
    sql_key_t part;  /* the partition columns */
    sql_key_t skey;  /* the sort key columns (their canonical bytes are map keys) */
    int norder;
    order_field_t order[64];
    int64_t start, end;
    bool out_rank;   /* the rank number is an output column */
    bool gen_ub;
    int in_width;    /* flat fields of the input */
};

void sql_rank_free(sql_rank_t *r) {
    if (!r) return;
    sl_free(r->state_name);
    sl_free(r->desc);
    sl_free(r);
}

bool sql_rank_out_rank(const sql_rank_t *r) { return r->out_rank; }

static bool orderable(sql_kind_t k) {
    return sql_kind_integral(k) || k == SK_DOUBLE || k == SK_DECIMAL || sql_kind_string(k) || k == SK_TIMESTAMP ||
           k == SK_BOOLEAN || k == SK_DATE || k == SK_TIME;
}

sql_rank_t *sql_rank_parse(const json_t *jn, const sql_input_t *in, bool in_changelog, const char *desc, char *err,
                           size_t errlen) {
    sql_rank_t *r = sl_calloc(1, sizeof *r);
    r->desc = sl_strdup(desc);
    r->in_width = sql_flat_of(in, in->ncols);
    const char *rt = json_string_value(json_object_get(jn, "rankType"));
    if (!rt || strcmp(rt, "ROW_NUMBER")) {
        sql_perr(err, errlen, "%s: rankType %s is not supported yet (ROW_NUMBER is)", desc, rt ? rt : "(missing)");
        goto fail;
    }
    const char *strat = json_string_value(json_object_get(json_object_get(jn, "rankStrategy"), "type"));
    if (!strat || strcmp(strat, "AppendFast")) {
        sql_perr(err, errlen, "%s: rankStrategy %s is not supported yet (AppendFast is)", desc, strat ? strat : "(missing)");
        goto fail;
    }
    if (in_changelog) {
        sql_perr(err, errlen, "%s: rankStrategy AppendFast over an updating input", desc);
        goto fail;
    }
    json_t *rr = json_object_get(jn, "rankRange");
    const char *rrt = json_string_value(json_object_get(rr, "type"));
    if (!rrt || strcmp(rrt, "Constant")) {
        sql_perr(err, errlen, "%s: rankRange of type %s is not supported yet (Constant is)", desc, rrt ? rrt : "(missing)");
        goto fail;
    }
    json_t *js = json_object_get(rr, "start"), *je = json_object_get(rr, "end");
    if (!json_is_integer(js) || !json_is_integer(je) || json_integer_value(js) < 1 ||
        json_integer_value(je) < json_integer_value(js)) {
        sql_perr(err, errlen, "%s: rankRange needs integers 1 <= start <= end", desc);
        goto fail;
    }
    r->start = json_integer_value(js);
    r->end = json_integer_value(je);
    json_t *orn = json_object_get(jn, "outputRowNumber"), *ub = json_object_get(jn, "generateUpdateBefore");
    if (!json_is_boolean(orn) || !json_is_boolean(ub)) {
        sql_perr(err, errlen, "%s: \"outputRowNumber\" and \"generateUpdateBefore\" must be booleans", desc);
        goto fail;
    }
    r->out_rank = json_is_true(orn);
    r->gen_ub = json_is_true(ub);
    json_t *state = json_array_get(json_object_get(jn, "state"), 0);
    const char *ttl = json_string_value(json_object_get(state, "ttl"));
    if (ttl && strcmp(ttl, "0 ms")) {
        sql_perr(err, errlen, "%s: state TTL '%s' (table.exec.state.ttl) is not supported yet for Top-N", desc, ttl);
        goto fail;
    }
    const char *sn = json_string_value(json_object_get(state, "name"));
    r->state_name = sl_strdup(sn ? sn : "rankState");
    json_t *pf = json_object_get(json_object_get(jn, "partition"), "fields");
    json_t *of = json_object_get(json_object_get(jn, "orderBy"), "fields");
    if (!json_is_array(pf) || json_array_size(pf) > 64 || !json_is_array(of) || json_array_size(of) == 0 ||
        json_array_size(of) > 64) {
        sql_perr(err, errlen, "%s: \"partition.fields\" and \"orderBy.fields\" (1 to 64) are needed", desc);
        goto fail;
    }
    r->part.n = (int)json_array_size(pf);
    r->part.desc = r->desc;
    for (int i = 0; i < r->part.n; i++) {
        json_t *g = json_array_get(pf, (size_t)i);
        if (!json_is_integer(g) || json_integer_value(g) < 0 || json_integer_value(g) >= in->ncols ||
            in->cols[json_integer_value(g)]->kind == SK_ROW) {
            sql_perr(err, errlen, "%s: partition.fields[%d] is not a (non-ROW) column of the input", desc, i);
            goto fail;
        }
        int c = (int)json_integer_value(g);
        r->part.flat[i] = sql_flat_of(in, c);
        r->part.types[i] = in->cols[c];
    }
    r->norder = (int)json_array_size(of);
    r->skey.n = r->norder;
    r->skey.desc = r->desc;
    for (int i = 0; i < r->norder; i++) {
        json_t *o = json_array_get(of, (size_t)i);
        json_t *ix = json_object_get(o, "index");
        if (!json_is_integer(ix) || json_integer_value(ix) < 0 || json_integer_value(ix) >= in->ncols) {
            sql_perr(err, errlen, "%s: orderBy.fields[%d] is not a column of the input", desc, i);
            goto fail;
        }
        int c = (int)json_integer_value(ix);
        if (!orderable(in->cols[c]->kind)) {
            sql_perr(err, errlen, "%s: ordering by %s is not supported", desc, in->cols[c]->text);
            goto fail;
        }
        r->order[i] = (order_field_t){.flat = sql_flat_of(in, c),
                                      .type = in->cols[c],
                                      .asc = json_is_true(json_object_get(o, "isAscending")),
                                      .nulls_last = json_is_true(json_object_get(o, "nullIsLast"))};
        r->skey.flat[i] = r->order[i].flat;
        r->skey.types[i] = in->cols[c];
    }
    return r;
fail:
    sql_rank_free(r);
    return NULL;
}

/* ---- runtime ------------------------------------------------------------------ */

/* One sort key of the partition and its rows (copies), in arrival order. */
typedef struct entry {
    uint8_t *key;
    uint32_t kl;
    int n, cap;
    uint8_t **rows;
    uint32_t *lens;
    bool dirty;
} entry_t;

typedef struct rank_ctx {
    const sql_rank_t *r;
    const sl_schema_t *in_schema;
    sl_state_t *st;
    entry_t *e;
    int ne, ecap;
    uint8_t *buf; /* serialization of one entry */
    size_t bcap;
    bool bad;
} rank_ctx_t;

static void *rank_clone(const void *c) {
    const rank_ctx_t *p = c;
    rank_ctx_t *x = sl_calloc(1, sizeof *x);
    x->r = p->r;
    return x;
}

static void entries_clear(rank_ctx_t *x) {
    for (int i = 0; i < x->ne; i++) {
        for (int k = 0; k < x->e[i].n; k++) sl_free(x->e[i].rows[k]);
        sl_free(x->e[i].rows);
        sl_free(x->e[i].lens);
        sl_free(x->e[i].key);
    }
    x->ne = 0;
}

static void rank_ctx_free(void *c) {
    rank_ctx_t *x = c;
    entries_clear(x);
    sl_free(x->e);
    sl_free(x->buf);
    sl_free(x);
}

static int rank_open(void *ctx, sl_rt_t *rt) {
    rank_ctx_t *x = ctx;
    x->st = sl_state_map(rt, x->r->state_name);
    return x->st ? 0 : SL_EINVAL;
}

static entry_t *entry_new(rank_ctx_t *x, const void *k, uint32_t kl) {
    if (x->ne == x->ecap) {
        x->ecap = x->ecap ? 2 * x->ecap : 16;
        x->e = sl_realloc(x->e, (size_t)x->ecap * sizeof *x->e);
    }
    entry_t *e = &x->e[x->ne++];
    memset(e, 0, sizeof *e);
    e->key = sl_malloc(kl ? kl : 1);
    if (kl) memcpy(e->key, k, kl);
    e->kl = kl;
    return e;
}

static void entry_add(entry_t *e, const void *row, uint32_t len) {
    if (e->n == e->cap) {
        e->cap = e->cap ? 2 * e->cap : 4;
        e->rows = sl_realloc(e->rows, (size_t)e->cap * sizeof *e->rows);
        e->lens = sl_realloc(e->lens, (size_t)e->cap * sizeof *e->lens);
    }
    e->rows[e->n] = sl_malloc(len ? len : 1);
    memcpy(e->rows[e->n], row, len);
    e->lens[e->n++] = len;
}

static void load_one(void *c, const void *k, uint32_t kl, const void *v, uint32_t vl) {
    rank_ctx_t *x = c;
    entry_t *e = entry_new(x, k, kl);
    const uint8_t *p = v;
    uint32_t off = 0;
    while (off + 4 <= vl) {
        uint32_t len;
        memcpy(&len, p + off, 4);
        if (len > vl - off - 4) break;
        entry_add(e, p + off + 4, len);
        off += 4 + len;
    }
    if (off != vl || e->n == 0) x->bad = true;
}

static sl_row_t row_of(const rank_ctx_t *x, const entry_t *e, int k) {
    return (sl_row_t){.data = e->rows[k], .len = e->lens[k], .schema = x->in_schema};
}

static int cmp_val(const sql_type_t *t, const sql_val_t *a, const sql_val_t *b) {
    if (t->kind == SK_DOUBLE) return a->d < b->d ? -1 : a->d > b->d;
    if (t->kind == SK_DECIMAL) return a->dec < b->dec ? -1 : a->dec > b->dec;
    if (sql_kind_string(t->kind)) {
        uint32_t n = a->len < b->len ? a->len : b->len;
        int c = n ? memcmp(a->s, b->s, n) : 0;
        return c ? c : a->len < b->len ? -1 : a->len > b->len;
    }
    return a->i < b->i ? -1 : a->i > b->i;
}

/* Flink's sort-key order of rows a and b. */
static int cmp_rows(const sql_rank_t *r, const sl_row_t *a, const sl_row_t *b) {
    for (int i = 0; i < r->norder; i++) {
        const order_field_t *o = &r->order[i];
        sql_val_t va, vb;
        memset(&va, 0, sizeof va);
        memset(&vb, 0, sizeof vb);
        sql_val_read(o->type, a, o->flat, &va);
        sql_val_read(o->type, b, o->flat, &vb);
        int c;
        if (va.null && vb.null) c = 0;
        else if (va.null) c = o->nulls_last ? 1 : -1;
        else if (vb.null) c = o->nulls_last ? -1 : 1;
        else {
            c = cmp_val(o->type, &va, &vb);
            if (!o->asc) c = -c;
        }
        if (c) return c;
    }
    return 0;
}

static _Thread_local const rank_ctx_t *t_sort; /* qsort has no context: set under the sort only */

static int cmp_entries(const void *pa, const void *pb) {
    const entry_t *a = pa, *b = pb;
    sl_row_t ra = row_of(t_sort, a, 0), rb = row_of(t_sort, b, 0);
    return cmp_rows(t_sort->r, &ra, &rb);
}

/* Writes entry e back to state (or removes it when it has no rows). */
static int store(rank_ctx_t *x, entry_t *e) {
    if (e->n == 0) return sl_map_remove(x->st, e->key, e->kl);
    size_t need = 0;
    for (int k = 0; k < e->n; k++) need += 4 + e->lens[k];
    if (need > x->bcap) {
        x->bcap = need * 2;
        x->buf = sl_realloc(x->buf, x->bcap);
    }
    size_t off = 0;
    for (int k = 0; k < e->n; k++) {
        memcpy(x->buf + off, &e->lens[k], 4);
        memcpy(x->buf + off + 4, e->rows[k], e->lens[k]);
        off += 4 + e->lens[k];
    }
    return sl_map_put(x->st, e->key, e->kl, x->buf, (uint32_t)off);
}

/* Emits row (of the input schema) with kind and, if the output has it, the rank. */
static void emit(rank_ctx_t *x, sl_collector_t *out, const sl_row_t *row, int64_t rank, int kind) {
    const sql_rank_t *r = x->r;
    if (rank < r->start || rank > r->end) return;
    if (kind == SQL_KIND_UPDATE_BEFORE && !r->gen_ub) return;
    sl_row_writer_t *w = sl_out_row(out);
    for (int f = 0; f < r->in_width; f++) {
        if (sl_row_is_null(row, f)) sl_rw_set_null(w, f);
        else sl_rw_copy_field(w, f, row, f);
    }
    int kf = r->in_width;
    if (r->out_rank) sl_rw_set_i64(w, kf++, rank);
    sl_rw_set_i32(w, kf, kind);
    sl_emit(out);
}

static int rank_process(void *ctx, sl_pctx_t *pc, const sl_record_t *rec, sl_collector_t *out) {
    (void)pc;
    rank_ctx_t *x = ctx;
    const sql_rank_t *r = x->r;
    const sl_row_t *in = &rec->row;
    x->in_schema = in->schema;
    entries_clear(x);
    x->bad = false;
    int rc = sl_map_foreach(x->st, load_one, x);
    if (rc < 0) return rc;
    if (x->bad) {
        fprintf(stderr, "sluice sql: %s: a malformed Top-N entry in state\n", r->desc);
        return SL_ESTATE;
    }
    t_sort = x;
    if (x->ne > 1) qsort(x->e, (size_t)x->ne, sizeof *x->e, cmp_entries);
    t_sort = NULL;
    int64_t total = 0;
    for (int i = 0; i < x->ne; i++) total += x->e[i].n;
    /* in the buffer's range: better than the worst kept sort key, or room left */
    if (x->ne > 0) {
        sl_row_t worst = row_of(x, &x->e[x->ne - 1], 0);
        if (cmp_rows(r, in, &worst) >= 0 && total >= r->end) return 0;
    }
    uint8_t kb[4096];
    int kl = sql_key_encode(&r->skey, in, kb, (int)sizeof kb);
    if (kl < 0) {
        fprintf(stderr, "sluice sql: %s: a sort key longer than %zu bytes (not supported)\n", r->desc, sizeof kb);
        return SL_EINVAL;
    }
    /* append to its sort key's rows (a new sort key goes to its place in the order) */
    int at = -1;
    for (int i = 0; i < x->ne && at < 0; i++)
        if (x->e[i].kl == (uint32_t)kl && !memcmp(x->e[i].key, kb, (size_t)kl)) at = i;
    if (at < 0) {
        entry_new(x, kb, (uint32_t)kl);
        entry_t ne = x->e[x->ne - 1];
        at = x->ne - 1;
        while (at > 0) {
            sl_row_t prev = row_of(x, &x->e[at - 1], 0);
            if (cmp_rows(r, &prev, in) <= 0) break;
            x->e[at] = x->e[at - 1];
            at--;
        }
        x->e[at] = ne;
    }
    entry_t *e = &x->e[at];
    entry_add(e, in->data, in->len);
    rc = store(x, e);
    if (rc < 0) return rc;
    total++;
    if (r->out_rank || r->start > 1) {
        /* rank slots from the new row's on move down by one */
        int64_t rank = 0;
        int i = 0;
        sl_row_t cur = *in;
        for (; i < x->ne && rank <= r->end; i++) {
            entry_t *q = &x->e[i];
            if (i < at) {
                rank += q->n;
            } else if (i == at) {
                rank += q->n;
            } else {
                for (int k = 0; k < q->n && rank <= r->end; k++) {
                    sl_row_t prev = row_of(x, q, k);
                    emit(x, out, &prev, rank, SQL_KIND_UPDATE_BEFORE);
                    emit(x, out, &cur, rank, SQL_KIND_UPDATE_AFTER);
                    cur = prev;
                    rank++;
                }
            }
        }
        if (rank <= r->end) emit(x, out, &cur, rank, SQL_KIND_INSERT);
        /* the sort keys not reached are beyond rankEnd */
        for (; i < x->ne; i++) {
            for (int k = 0; k < x->e[i].n; k++) sl_free(x->e[i].rows[k]);
            x->e[i].n = 0;
            rc = store(x, &x->e[i]);
            if (rc < 0) return rc;
        }
        return 0;
    }
    if (total > r->end) {
        /* the last row leaves the top N */
        entry_t *last = &x->e[x->ne - 1];
        bool is_new = x->ne - 1 == at; /* the new row was appended to the last sort key */
        sl_row_t gone = row_of(x, last, last->n - 1);
        if (!is_new) emit(x, out, &gone, 1, SQL_KIND_DELETE);
        last->n--;
        rc = store(x, last);
        sl_free(last->rows[last->n]);
        if (rc < 0) return rc;
        if (is_new) return 0;
    }
    emit(x, out, in, 1, SQL_KIND_INSERT);
    return 0;
}

sl_stream_t *sql_rank_build(sl_env_t *env, sl_stream_t *in, sql_rank_t *r, sl_schema_t *out_schema) {
    rank_ctx_t *proto = sl_calloc(1, sizeof *proto); /* cloned for each subtask */
    proto->r = r;
    sl_env_own(env, proto, sl_free);
    sl_process_fn_t fn = {.open = rank_open,
                          .process = rank_process,
                          .opts = {.ctx = proto, .ctx_clone = rank_clone, .ctx_free = rank_ctx_free}};
    return sl_keyed_process(sql_key_by(in, &r->part), fn, sl_schema_ref(out_schema));
}
