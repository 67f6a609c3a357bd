/*
 * sql_plan.c — Flink's compiled plans (FLIP-190 JSON) parsed, checked and
 * built into a sluice job with the builder API.
 *
 * sl_sql_plan_parse reads "flinkVersion", "nodes" and "edges", checks every
 * node's type and version against what this executor implements, parses
 * the output types and compiles every expression (sql_expr.c), so that a
 * plan that parses is a plan that builds: anything unsupported is refused
 * here, by name, with the node, its description and — when the plan came
 * from sql/compiler — the statement's file and line.
 *
 * Nodes:
 *   stream-exec-table-source-scan_1  connector 'nexmark' (the official DDL's table)
 *   stream-exec-calc_1               flat_map: condition, then projection (the
 *                                    row kind of an updating input passes through)
 *   stream-exec-watermark-assigner_1 sl_assign_timestamps, rowtime - INTERVAL
 *   stream-exec-exchange_1           FORWARD / UNKNOWN: nothing; HASH[keys] and
 *                                    SINGLETON only into a group aggregate, which
 *                                    keys by its grouping columns (the same; none:
 *                                    one key, one subtask, as SINGLETON routes)
 *   stream-exec-group-aggregate_1    sql_agg.c (keyed state, changelog output)
 *   stream-exec-group-window-aggregate_1, stream-exec-window-aggregate_1,
 *   stream-exec-local-window-aggregate_1 + exchange +
 *   stream-exec-global-window-aggregate_1
 *                                    sql_window.c (event-time windows of
 *                                    sluice's window operator; the local node
 *                                    and its exchange pass rows through)
 *   stream-exec-deduplicate_1        sql_dedup.c (keyed by the unique key: keep first /
 *                                    last row on rowtime or proctime, changelog output)
 *   stream-exec-rank_1               sql_rank.c (Top-N, ROW_NUMBER, AppendFast: keyed by
 *                                    the partition, map state sort key -> rows)
 *   stream-exec-union_1              sl_union (insert-only inputs)
 *   stream-exec-sink_1               'blackhole', 'print' (or every sink to a
 *                                    collect file, sl_sql_opts_t.collect_path),
 *                                    insert-only or updating input (+I -U +U -D)
 *
 * Changelogs: a node whose output is an updating stream (a group aggregate
 * and what follows it) has pnode.changelog set and its rows carry the row
 * kind in a trailing hidden field (sql_int.h, SQL_KIND_FIELD).
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "graph/stream_graph.h"
#include "sluice/nexmark.h"
#include "sluice/sql.h"
#include "sql/sql_int.h"

typedef enum {
    N_SCAN, N_CALC, N_WATERMARK, N_EXCHANGE, N_UNION, N_SINK, N_GROUP_AGG, N_GROUP_WINDOW, N_WINDOW_AGG, N_LOCAL_WAGG,
    N_GLOBAL_WAGG, N_DEDUP, N_RANK
} ntype_t;

/* Nodes that key their input (a HASH / SINGLETON exchange may feed them): aggregates by their
 * grouping columns, deduplicate by its unique key, rank by its partition. */
static bool keyed_node(ntype_t t) {
    return t == N_GROUP_AGG || t == N_GROUP_WINDOW || t == N_WINDOW_AGG || t == N_GLOBAL_WAGG || t == N_DEDUP ||
           t == N_RANK;
}

static const struct {
    const char *name;
    ntype_t t;
    int version;
} NODE_TYPES[] = {
    {"stream-exec-table-source-scan", N_SCAN, 1}, {"stream-exec-calc", N_CALC, 1},
    {"stream-exec-watermark-assigner", N_WATERMARK, 1}, {"stream-exec-exchange", N_EXCHANGE, 1},
    {"stream-exec-union", N_UNION, 1}, {"stream-exec-sink", N_SINK, 1},
    {"stream-exec-group-aggregate", N_GROUP_AGG, 1}, {"stream-exec-group-window-aggregate", N_GROUP_WINDOW, 1},
    {"stream-exec-window-aggregate", N_WINDOW_AGG, 1}, {"stream-exec-local-window-aggregate", N_LOCAL_WAGG, 1},
    {"stream-exec-global-window-aggregate", N_GLOBAL_WAGG, 1},
    {"stream-exec-deduplicate", N_DEDUP, 1},
    {"stream-exec-rank", N_RANK, 1},
};

enum { DIST_ANY, DIST_HASH, DIST_SINGLETON };

typedef enum { SINK_BLACKHOLE, SINK_PRINT } sink_kind_t;

typedef struct pnode {
    int id;
    ntype_t t;
    char *desc;  /* "node 4 (stream-exec-calc_1: Calc(...))" for messages */
    char *line;  /* for sl_sql_plan_node_desc */
    char *name;  /* operator name */
    int ncols;   /* output columns */
    sql_type_t **cols;
    int width;   /* flat fields */
    sl_schema_t *schema;
    int *inputs; /* node indexes */
    int ninputs;
    /* calc */
    sql_expr_t *cond;
    sql_expr_t **proj;
    int nproj;
    /* watermark */
    int rowtime_flat;
    int64_t wm_delay_ms;
    /* scan */
    sl_nexmark_opts_t nx;
    /* sink */
    sink_kind_t sink;
    char *print_id;
    bool print_stderr;
    bool not_null_enforce;
    char *table;
    /* changelog: rows carry a kind field (flat index width); in_kind: the input's, or -1 */
    bool changelog;
    int in_kind;
    /* exchange */
    int dist;
    sql_key_t key;
    /* group aggregate */
    sql_agg_t *agg;
    /* window aggregates (sql_window.c); a local window aggregate keeps its node (spec) for its global one */
    sql_window_t *win;
    json_t *spec;
    bool borrowed_cols; /* cols are the input's (a local window aggregate and its exchange pass rows through) */
    /* deduplicate, rank */
    sql_dedup_t *dedup;
    sql_rank_t *rank;
} pnode_t;

struct sl_sql_plan {
    atomic_int refs;
    int n;
    pnode_t *nodes;
    pthread_mutex_t out_mu; /* one collect / print line at a time */
};

/* ---- errors ---------------------------------------------------------------- */

int sql_perr(char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen && !err[0]) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, errlen, fmt, ap);
        va_end(ap);
    }
    return SL_EINVAL;
}

static void node_free(pnode_t *n) {
    sl_free(n->desc);
    sl_free(n->line);
    sl_free(n->name);
    if (!n->borrowed_cols) {
        for (int i = 0; i < n->ncols; i++) sql_type_free(n->cols[i]);
        sl_free(n->cols);
    }
    sql_window_free(n->win);
    json_decref(n->spec);
    if (n->schema) sl_schema_unref(n->schema);
    sl_free(n->inputs);
    sql_expr_free(n->cond);
    for (int i = 0; i < n->nproj; i++) sql_expr_free(n->proj[i]);
    sl_free(n->proj);
    sl_free(n->print_id);
    sl_free(n->table);
    sql_agg_free(n->agg);
    sql_dedup_free(n->dedup);
    sql_rank_free(n->rank);
}

static void plan_release(void *p) {
    sl_sql_plan_t *plan = p;
    if (!plan || atomic_fetch_sub(&plan->refs, 1) != 1) return;
    for (int i = 0; i < plan->n; i++) node_free(&plan->nodes[i]);
    sl_free(plan->nodes);
    pthread_mutex_destroy(&plan->out_mu);
    sl_free(plan);
}

void sl_sql_plan_free(sl_sql_plan_t *plan) { plan_release(plan); }

int sl_sql_plan_node_count(const sl_sql_plan_t *plan) { return plan ? plan->n : 0; }
const char *sl_sql_plan_node_desc(const sl_sql_plan_t *plan, int i) {
    return plan && i >= 0 && i < plan->n ? plan->nodes[i].line : NULL;
}

sl_sql_opts_t sl_sql_opts_default(void) { return (sl_sql_opts_t){.collect_path = NULL, .nexmark_events = -1}; }

/* ---- output types ------------------------------------------------------------ */

/* The node's "outputType": a ROW type (string or object) -> columns. */
static int parse_output(pnode_t *n, json_t *jn, char *err, size_t errlen) {
    json_t *ot = json_object_get(jn, "outputType");
    if (!ot) return sql_perr(err, errlen, "%s: no \"outputType\"", n->desc);
    char m[512];
    sql_type_t *t = sql_type_parse(ot, m, sizeof m);
    if (!t) return sql_perr(err, errlen, "%s: outputType: %s", n->desc, m);
    if (t->kind != SK_ROW) {
        sql_type_free(t);
        return sql_perr(err, errlen, "%s: outputType is not a ROW", n->desc);
    }
    n->ncols = t->nfields;
    n->cols = t->fields;
    n->schema = sl_schema_new();
    n->width = 0;
    for (int i = 0; i < t->nfields; i++) {
        if (sql_type_storable(t->fields[i], m, sizeof m) < 0) {
            int rc = sql_perr(err, errlen, "%s: column %s: %s", n->desc, t->names[i], m);
            t->fields = NULL;
            t->nfields = 0;
            for (int k = 0; k < n->ncols; k++) sl_free(t->names[k]);
            sl_free(t->names);
            t->names = NULL;
            sql_type_free(t);
            return rc;
        }
        sql_type_add_fields(t->fields[i], t->names[i], n->schema);
        n->width += t->fields[i]->width;
    }
    if (n->changelog) sl_schema_add(n->schema, SQL_KIND_FIELD, SL_INT, false);
    /* keep the column types, drop the ROW shell */
    for (int k = 0; k < n->ncols; k++) sl_free(t->names[k]);
    sl_free(t->names);
    t->names = NULL;
    t->fields = NULL;
    t->nfields = 0;
    sql_type_free(t);
    return 0;
}

/* ---- nexmark ------------------------------------------------------------------ */

/* The official DDL's columns (nexmark-flink ddl_gen.sql), flattened in order. */
static const char *const NX_LAYOUT =
    "ROW<`event_type` INT, "
    "`person` ROW<`id` BIGINT, `name` VARCHAR(2147483647), `emailAddress` VARCHAR(2147483647), "
    "`creditCard` VARCHAR(2147483647), `city` VARCHAR(2147483647), `state` VARCHAR(2147483647), "
    "`dateTime` TIMESTAMP(3), `extra` VARCHAR(2147483647)>, "
    "`auction` ROW<`id` BIGINT, `itemName` VARCHAR(2147483647), `description` VARCHAR(2147483647), "
    "`initialBid` BIGINT, `reserve` BIGINT, `dateTime` TIMESTAMP(3), `expires` TIMESTAMP(3), `seller` BIGINT, "
    "`category` BIGINT, `extra` VARCHAR(2147483647)>, "
    "`bid` ROW<`auction` BIGINT, `bidder` BIGINT, `price` BIGINT, `channel` VARCHAR(2147483647), "
    "`url` VARCHAR(2147483647), `dateTime` TIMESTAMP(3), `extra` VARCHAR(2147483647)>>";

enum { NXM_NULL = -1, NXM_TIME_PERSON = -2, NXM_TIME_AUCTION = -3, NXM_TIME_BID = -4 };
static const int NX_MAP[] = {
    SL_NXF_EVENT_TYPE,
    SL_NXF_PERSON_ID, SL_NXF_PERSON_NAME, SL_NXF_PERSON_EMAIL, SL_NXF_PERSON_CREDIT_CARD, SL_NXF_PERSON_CITY,
    SL_NXF_PERSON_STATE, NXM_TIME_PERSON, NXM_NULL,
    SL_NXF_AUCTION_ID, SL_NXF_AUCTION_ITEM_NAME, SL_NXF_AUCTION_DESCRIPTION, SL_NXF_AUCTION_INITIAL_BID,
    SL_NXF_AUCTION_RESERVE, NXM_TIME_AUCTION, SL_NXF_AUCTION_EXPIRES, SL_NXF_AUCTION_SELLER, SL_NXF_AUCTION_CATEGORY,
    NXM_NULL,
    SL_NXF_BID_AUCTION, SL_NXF_BID_BIDDER, SL_NXF_BID_PRICE, SL_NXF_BID_CHANNEL, SL_NXF_BID_URL, NXM_TIME_BID,
    NXM_NULL,
};

static bool same_type(const sql_type_t *a, const sql_type_t *b) {
    if (a->kind != b->kind || a->nfields != b->nfields) return false;
    if (a->kind == SK_TIMESTAMP && a->precision != b->precision) return false;
    for (int i = 0; i < a->nfields; i++)
        if (strcmp(a->names[i], b->names[i]) || !same_type(a->fields[i], b->fields[i])) return false;
    return true;
}

/* Flink option text -> number; false if malformed. */
static bool opt_num(json_t *opts, const char *key, double *out) {
    const char *s = json_string_value(json_object_get(opts, key));
    if (!s) return true;
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (!*s || *end || errno) return false;
    *out = v;
    return true;
}

static int parse_scan(pnode_t *n, json_t *jn, char *err, size_t errlen) {
    json_t *sts = json_object_get(jn, "scanTableSource");
    json_t *table = json_object_get(sts, "table");
    const char *ident = json_string_value(json_object_get(table, "identifier"));
    json_t *rt = json_object_get(table, "resolvedTable");
    json_t *opts = json_object_get(rt, "options");
    if (!json_is_object(opts))
        return sql_perr(err, errlen, "%s: scanTableSource.table.resolvedTable.options is missing (compile the plan "
                    "with table.plan.compile.catalog-objects = 'ALL', the default)", n->desc);
    n->table = sl_strdup(ident ? ident : "?");
    json_t *ab = json_object_get(sts, "abilities");
    if (ab && json_array_size(ab) > 0) {
        const char *t = json_string_value(json_object_get(json_array_get(ab, 0), "type"));
        return sql_perr(err, errlen, "%s: source ability %s is not supported", n->desc, t ? t : "?");
    }
    const char *conn = json_string_value(json_object_get(opts, "connector"));
    if (!conn) return sql_perr(err, errlen, "%s: table %s has no 'connector' option", n->desc, n->table);
    if (strcmp(conn, "nexmark"))
        return sql_perr(err, errlen, "%s: table %s: source connector '%s' is not supported yet (only 'nexmark')",
                    n->desc, n->table, conn);
    const char *known[] = {"connector", "events.num", "first-event.rate", "next-event.rate", "person.proportion",
                           "auction.proportion", "bid.proportion", "seed", "base-time.ms"};
    const char *key;
    json_t *val;
    json_object_foreach(opts, key, val) {
        bool ok = false;
        for (size_t i = 0; i < sizeof known / sizeof known[0]; i++) ok |= !strcmp(known[i], key);
        if (!ok) return sql_perr(err, errlen, "%s: table %s: nexmark option '%s' is not supported", n->desc, n->table, key);
        if (!json_is_string(val))
            return sql_perr(err, errlen, "%s: table %s: option '%s' is not a string", n->desc, n->table, key);
    }
    double events = 100000000, first = 10000000, next = 10000000, pp = 1, ap = 3, bp = 46, seed = 42,
           base = 1767225600000.0;
    if (!opt_num(opts, "events.num", &events) || !opt_num(opts, "first-event.rate", &first) ||
        !opt_num(opts, "next-event.rate", &next) || !opt_num(opts, "person.proportion", &pp) ||
        !opt_num(opts, "auction.proportion", &ap) || !opt_num(opts, "bid.proportion", &bp) ||
        !opt_num(opts, "seed", &seed) || !opt_num(opts, "base-time.ms", &base))
        return sql_perr(err, errlen, "%s: table %s: a nexmark option is not a number", n->desc, n->table);
    if (pp != 1 || ap != 3 || bp != 46)
        return sql_perr(err, errlen, "%s: table %s: only the proportions 1:3:46 (person:auction:bid) are supported",
                    n->desc, n->table);
    if (first != next)
        return sql_perr(err, errlen, "%s: table %s: 'next-event.rate' must equal 'first-event.rate'", n->desc, n->table);
    if (!(first > 0)) return sql_perr(err, errlen, "%s: table %s: 'first-event.rate' must be > 0", n->desc, n->table);
    if (events < 0) return sql_perr(err, errlen, "%s: table %s: 'events.num' must be >= 0", n->desc, n->table);
    n->nx = sl_nexmark_defaults();
    n->nx.events = (int64_t)events;
    n->nx.seed = (uint64_t)(int64_t)seed;
    n->nx.base_time_ms = (int64_t)base;
    n->nx.inter_event_delay_us = 1e6 / first;
    char m[256];
    if (sl_nexmark_check(&n->nx, m, sizeof m) < 0) return sql_perr(err, errlen, "%s: table %s: %s", n->desc, n->table, m);
    int rc = parse_output(n, jn, err, errlen);
    if (rc < 0) return rc;
    sql_type_t *want = sql_type_parse_str(NX_LAYOUT, m, sizeof m);
    bool ok = want && want->nfields == n->ncols;
    for (int i = 0; ok && i < n->ncols; i++) ok = same_type(want->fields[i], n->cols[i]);
    sql_type_free(want);
    if (!ok)
        return sql_perr(err, errlen, "%s: table %s: the nexmark connector produces the columns of the official DDL "
                    "(event_type INT, person ROW<...>, auction ROW<...>, bid ROW<...>, as in nexmark-flink's "
                    "ddl_gen.sql); this table's are different", n->desc, n->table);
    return 0;
}

/* ---- nodes ---------------------------------------------------------------------- */

static sql_input_t input_of(const sl_sql_plan_t *p, const pnode_t *n) {
    const pnode_t *in = &p->nodes[n->inputs[0]];
    return (sql_input_t){in->ncols, in->cols};
}

static int parse_calc(sl_sql_plan_t *p, pnode_t *n, json_t *jn, char *err, size_t errlen) {
    int rc = parse_output(n, jn, err, errlen);
    if (rc < 0) return rc;
    sql_input_t in = input_of(p, n);
    json_t *proj = json_object_get(jn, "projection");
    if (!json_is_array(proj)) return sql_perr(err, errlen, "%s: \"projection\" is not an array", n->desc);
    if ((int)json_array_size(proj) != n->ncols)
        return sql_perr(err, errlen, "%s: %zu projections for %d output columns", n->desc, json_array_size(proj), n->ncols);
    n->proj = sl_calloc((size_t)n->ncols + 1, sizeof *n->proj);
    char m[512];
    for (int i = 0; i < n->ncols; i++) {
        n->proj[i] = sql_expr_compile(json_array_get(proj, (size_t)i), &in, n->desc, m, sizeof m);
        if (!n->proj[i]) return sql_perr(err, errlen, "%s (projection %d)", m, i);
        n->nproj = i + 1;
        const sql_type_t *et = sql_expr_type(n->proj[i]);
        int first, width;
        if (n->cols[i]->kind == SK_ROW ? !sql_expr_flat_ref(n->proj[i], &first, &width) || width != n->cols[i]->width
                                       : et->kind != n->cols[i]->kind && et->kind != SK_NULL &&
                                             !(sql_kind_string(et->kind) && sql_kind_string(n->cols[i]->kind)))
            return sql_perr(err, errlen, "%s: projection %d is of type %s but the output column is %s", n->desc, i,
                        et->text, n->cols[i]->text);
    }
    json_t *cond = json_object_get(jn, "condition");
    if (cond && !json_is_null(cond)) {
        n->cond = sql_expr_compile(cond, &in, n->desc, m, sizeof m);
        if (!n->cond) return sql_perr(err, errlen, "%s (condition)", m);
        if (sql_expr_type(n->cond)->kind != SK_BOOLEAN)
            return sql_perr(err, errlen, "%s: the condition is not BOOLEAN", n->desc);
    }
    return 0;
}

static int parse_watermark(sl_sql_plan_t *p, pnode_t *n, json_t *jn, char *err, size_t errlen) {
    int rc = parse_output(n, jn, err, errlen);
    if (rc < 0) return rc;
    const pnode_t *in = &p->nodes[n->inputs[0]];
    if (in->width != n->width) return sql_perr(err, errlen, "%s: output type differs from its input's", n->desc);
    json_t *ri = json_object_get(jn, "rowtimeFieldIndex");
    if (!json_is_integer(ri) || json_integer_value(ri) < 0 || json_integer_value(ri) >= n->ncols)
        return sql_perr(err, errlen, "%s: \"rowtimeFieldIndex\" is missing or out of range", n->desc);
    int rt = (int)json_integer_value(ri);
    if (n->cols[rt]->kind != SK_TIMESTAMP) return sql_perr(err, errlen, "%s: the rowtime column is not a TIMESTAMP", n->desc);
    n->rowtime_flat = 0;
    for (int i = 0; i < rt; i++) n->rowtime_flat += n->cols[i]->width;
    /* watermarkExpr: rowtime, or rowtime - INTERVAL literal */
    json_t *we = json_object_get(jn, "watermarkExpr");
    sql_input_t sin = input_of(p, n);
    char m[512];
    sql_expr_t *e = sql_expr_compile(we, &sin, n->desc, m, sizeof m);
    if (!e) return sql_perr(err, errlen, "%s (watermarkExpr)", m);
    sql_expr_free(e);
    const char *kind = json_string_value(json_object_get(we, "kind"));
    const char *fn = json_string_value(json_object_get(we, "internalName"));
    json_t *ops = json_object_get(we, "operands");
    bool ok = false;
    if (kind && !strcmp(kind, "INPUT_REF")) {
        ok = json_integer_value(json_object_get(we, "inputIndex")) == rt;
        n->wm_delay_ms = 0;
    } else if (kind && !strcmp(kind, "CALL") && fn && !strcmp(fn, "$-$1") && json_array_size(ops) == 2) {
        json_t *a = json_array_get(ops, 0), *b = json_array_get(ops, 1);
        const char *ak = json_string_value(json_object_get(a, "kind")), *bk = json_string_value(json_object_get(b, "kind"));
        const char *bt = json_string_value(json_object_get(b, "type"));
        const char *bv = json_string_value(json_object_get(b, "value"));
        if (ak && !strcmp(ak, "INPUT_REF") && json_integer_value(json_object_get(a, "inputIndex")) == rt && bk &&
            !strcmp(bk, "LITERAL") && bt && !strncmp(bt, "INTERVAL", 8) && !strstr(bt, "YEAR") && !strstr(bt, "MONTH")) {
            char *end;
            long long v = bv ? strtoll(bv, &end, 10) : json_integer_value(json_object_get(b, "value"));
            ok = (bv ? (*bv && !*end) : json_is_integer(json_object_get(b, "value"))) && v >= 0;
            n->wm_delay_ms = v;
        }
    }
    if (!ok)
        return sql_perr(err, errlen, "%s: only watermarks of the form rowtime or rowtime - INTERVAL '...' are supported",
                    n->desc);
    return 0;
}

/* A node that passes its input's rows through unchanged in sluice (its columns are the input's). */
static void borrow_input(sl_sql_plan_t *p, pnode_t *n) {
    const pnode_t *in = &p->nodes[n->inputs[0]];
    n->borrowed_cols = true;
    n->ncols = in->ncols;
    n->cols = in->cols;
    n->width = in->width;
    n->schema = sl_schema_ref(in->schema);
}

static int parse_exchange(sl_sql_plan_t *p, pnode_t *n, json_t *jn, char *err, size_t errlen) {
    json_t *ip = json_array_get(json_object_get(jn, "inputProperties"), 0);
    json_t *rd = json_object_get(ip, "requiredDistribution");
    const char *d = json_string_value(json_object_get(rd, "type"));
    if (p->nodes[n->inputs[0]].t == N_LOCAL_WAGG) {
        /* between a local and a global window aggregate: the global one keys the local one's input */
        borrow_input(p, n);
        n->dist = d && !strcmp(d, "HASH") ? DIST_HASH : d && !strcmp(d, "SINGLETON") ? DIST_SINGLETON : DIST_ANY;
        n->key.desc = n->desc;
        return 0;
    }
    int rc = parse_output(n, jn, err, errlen);
    if (rc < 0) return rc;
    if (p->nodes[n->inputs[0]].width != n->width) return sql_perr(err, errlen, "%s: output type differs from its input's", n->desc);
    n->dist = DIST_ANY;
    n->key.desc = n->desc;
    if (d && !strcmp(d, "HASH")) {
        json_t *keys = json_object_get(rd, "keys");
        if (!json_is_array(keys) || json_array_size(keys) == 0 || json_array_size(keys) > 64)
            return sql_perr(err, errlen, "%s: requiredDistribution HASH needs \"keys\" (1 to 64 columns)", n->desc);
        n->dist = DIST_HASH;
        n->key.n = (int)json_array_size(keys);
        for (int i = 0; i < n->key.n; i++) {
            json_t *k = json_array_get(keys, (size_t)i);
            if (!json_is_integer(k) || json_integer_value(k) < 0 || json_integer_value(k) >= n->ncols)
                return sql_perr(err, errlen, "%s: requiredDistribution.keys[%d] is not a column", n->desc, i);
            int c = (int)json_integer_value(k), f = 0;
            if (n->cols[c]->kind == SK_ROW) return sql_perr(err, errlen, "%s: hash on a ROW column is not supported", n->desc);
            for (int q = 0; q < c; q++) f += n->cols[q]->width;
            n->key.flat[i] = f;
            n->key.types[i] = n->cols[c];
        }
    } else if (d && !strcmp(d, "SINGLETON")) {
        n->dist = DIST_SINGLETON;
    } else if (d && strcmp(d, "UNKNOWN") && strcmp(d, "ANY")) {
        return sql_perr(err, errlen, "%s: exchange with distribution %s is not supported yet", n->desc, d);
    }
    return 0;
}

static int parse_group_agg(sl_sql_plan_t *p, pnode_t *n, json_t *jn, char *err, size_t errlen) {
    n->changelog = true;
    int rc = parse_output(n, jn, err, errlen);
    if (rc < 0) return rc;
    sql_input_t in = input_of(p, n);
    char m[512] = "";
    n->agg = sql_agg_parse(jn, &in, n->in_kind >= 0, n->ncols, n->cols, n->desc, m, sizeof m);
    if (!n->agg) return sql_perr(err, errlen, "%s", m);
    return 0;
}

/* The node's JSON with a trailing proctime window property column dropped (sql_window.c). */
static json_t *without_proctime(json_t *jn) {
    json_t *c = json_deep_copy(jn);
    json_t *props = json_object_get(c, "namedWindowProperties");
    json_t *last = json_array_get(props, json_array_size(props) - 1);
    const char *k = json_string_value(json_object_get(json_object_get(last, "property"), "kind"));
    json_t *fields = json_object_get(json_object_get(c, "outputType"), "fields");
    if (k && !strcmp(k, "Proctime") && json_array_size(fields) > 0) json_array_remove(fields, json_array_size(fields) - 1);
    return c;
}

static int parse_window(sl_sql_plan_t *p, pnode_t *n, json_t *jn, char *err, size_t errlen) {
    if (n->t == N_LOCAL_WAGG) {
        borrow_input(p, n);
        n->spec = json_deep_copy(jn);
        return 0;
    }
    json_t *spec = jn;
    const pnode_t *src = &p->nodes[n->inputs[0]];
    if (n->t == N_GLOBAL_WAGG) {
        if (src->t == N_EXCHANGE && src->ninputs == 1) src = &p->nodes[src->inputs[0]];
        if (src->t != N_LOCAL_WAGG)
            return sql_perr(err, errlen, "%s: its input is not a local window aggregate (behind an exchange)", n->desc);
        spec = src->spec;
        const char *strat = json_string_value(json_object_get(json_object_get(jn, "windowing"), "strategy"));
        const char *lstrat = json_string_value(json_object_get(json_object_get(spec, "windowing"), "strategy"));
        bool attached = lstrat && !strcmp(lstrat, "WindowAttached");
        if (!strat || strcmp(strat, attached ? "WindowAttached" : "SliceAttached"))
            return sql_perr(err, errlen, "%s: windowing strategy %s is not supported here (%s is)", n->desc,
                            strat ? strat : "?", attached ? "WindowAttached" : "SliceAttached");
    }
    json_t *c = without_proctime(jn);
    int rc = parse_output(n, c, err, errlen);
    json_decref(c);
    if (rc < 0) return rc;
    sql_input_t in = {src->ncols, src->cols};
    if (n->t != N_GLOBAL_WAGG) in = input_of(p, n);
    char m[2048] = "";
    n->win = sql_window_parse(jn, spec, n->t == N_GROUP_WINDOW, &in, n->ncols, n->cols, n->desc, m, sizeof m);
    if (!n->win) return sql_perr(err, errlen, "%s", m);
    return 0;
}

/* The output's flat fields are the input's (then, for a rank, the rank number). */
static int check_passthrough(sl_sql_plan_t *p, pnode_t *n, bool rank_col, char *err, size_t errlen) {
    const pnode_t *in = &p->nodes[n->inputs[0]];
    bool ok = n->ncols == in->ncols + (rank_col ? 1 : 0) && n->width == in->width + (rank_col ? 1 : 0);
    for (int f = 0; ok && f < in->width; f++)
        ok = sl_schema_field_type(n->schema, f) == sl_schema_field_type(in->schema, f);
    if (ok && rank_col) ok = n->cols[n->ncols - 1]->kind == SK_BIGINT;
    if (!ok)
        return sql_perr(err, errlen, "%s: the output columns are not the input's%s", n->desc,
                        rank_col ? " and a BIGINT rank number" : "");
    return 0;
}

static int parse_dedup(sl_sql_plan_t *p, pnode_t *n, json_t *jn, char *err, size_t errlen) {
    sql_input_t in = input_of(p, n);
    char m[512] = "";
    n->dedup = sql_dedup_parse(jn, &in, n->in_kind >= 0, n->desc, m, sizeof m);
    if (!n->dedup) return sql_perr(err, errlen, "%s", m);
    n->changelog = sql_dedup_out_changelog(n->dedup);
    int rc = parse_output(n, jn, err, errlen);
    return rc < 0 ? rc : check_passthrough(p, n, false, err, errlen);
}

static int parse_rank(sl_sql_plan_t *p, pnode_t *n, json_t *jn, char *err, size_t errlen) {
    sql_input_t in = input_of(p, n);
    char m[512] = "";
    n->rank = sql_rank_parse(jn, &in, n->in_kind >= 0, n->desc, m, sizeof m);
    if (!n->rank) return sql_perr(err, errlen, "%s", m);
    n->changelog = true;
    int rc = parse_output(n, jn, err, errlen);
    return rc < 0 ? rc : check_passthrough(p, n, sql_rank_out_rank(n->rank), err, errlen);
}

static int parse_sink(sl_sql_plan_t *p, pnode_t *n, json_t *jn, char *err, size_t errlen) {
    json_t *dts = json_object_get(jn, "dynamicTableSink");
    json_t *table = json_object_get(dts, "table");
    const char *ident = json_string_value(json_object_get(table, "identifier"));
    n->table = sl_strdup(ident ? ident : "?");
    json_t *opts = json_object_get(json_object_get(table, "resolvedTable"), "options");
    if (!json_is_object(opts)) return sql_perr(err, errlen, "%s: dynamicTableSink.table.resolvedTable.options is missing", n->desc);
    json_t *ab = json_object_get(dts, "abilities");
    if (ab && json_array_size(ab) > 0) {
        const char *t = json_string_value(json_object_get(json_array_get(ab, 0), "type"));
        return sql_perr(err, errlen, "%s: sink ability %s is not supported", n->desc, t ? t : "?");
    }
    json_t *cm = json_object_get(jn, "inputChangelogMode");
    for (size_t i = 0; i < json_array_size(cm); i++) {
        const char *k = json_string_value(json_array_get(cm, i));
        if (!k || (strcmp(k, "INSERT") && strcmp(k, "UPDATE_BEFORE") && strcmp(k, "UPDATE_AFTER") && strcmp(k, "DELETE")))
            return sql_perr(err, errlen, "%s: changelog mode %s is not supported", n->desc, k ? k : "?");
    }
    if (json_is_true(json_object_get(jn, "upsertMaterialize")))
        return sql_perr(err, errlen, "%s: the sink's upsert materializer (SinkUpsertMaterializer) is not supported yet",
                    n->desc);
    const char *conn = json_string_value(json_object_get(opts, "connector"));
    if (!conn) return sql_perr(err, errlen, "%s: table %s has no 'connector' option", n->desc, n->table);
    const char *key;
    json_t *val;
    if (!strcmp(conn, "blackhole")) {
        n->sink = SINK_BLACKHOLE;
        json_object_foreach(opts, key, val) if (strcmp(key, "connector"))
            return sql_perr(err, errlen, "%s: table %s: blackhole option '%s' is not supported", n->desc, n->table, key);
    } else if (!strcmp(conn, "print")) {
        n->sink = SINK_PRINT;
        json_object_foreach(opts, key, val) {
            const char *v = json_string_value(val);
            if (!strcmp(key, "connector")) continue;
            if (!strcmp(key, "print-identifier") && v) n->print_id = sl_strdup(v);
            else if (!strcmp(key, "standard-error") && v) n->print_stderr = !strcasecmp(v, "true");
            else return sql_perr(err, errlen, "%s: table %s: print option '%s' is not supported", n->desc, n->table, key);
        }
    } else {
        return sql_perr(err, errlen, "%s: table %s: sink connector '%s' is not supported yet (blackhole, print)", n->desc,
                    n->table, conn);
    }
    json_t *cfg = json_object_get(jn, "configuration");
    const char *nn = json_string_value(json_object_get(cfg, "table.exec.sink.not-null-enforcer"));
    n->not_null_enforce = !nn || !strcmp(nn, "ERROR");
    if (nn && strcmp(nn, "ERROR") && strcmp(nn, "DROP"))
        return sql_perr(err, errlen, "%s: table.exec.sink.not-null-enforcer '%s' is not supported", n->desc, nn);
    const char *um = json_string_value(json_object_get(cfg, "table.exec.sink.upsert-materialize"));
    if (um && strcmp(um, "AUTO") && strcmp(um, "NONE"))
        return sql_perr(err, errlen, "%s: table.exec.sink.upsert-materialize '%s' is not supported", n->desc, um);
    int rc = parse_output(n, jn, err, errlen);
    if (rc < 0) return rc;
    for (int i = 0; i < n->ncols; i++)
        if (n->cols[i]->kind == SK_ROW) return sql_perr(err, errlen, "%s: sinking ROW columns is not supported yet", n->desc);
    if (p->nodes[n->inputs[0]].width != n->width) return sql_perr(err, errlen, "%s: output type differs from its input's", n->desc);
    return 0;
}

/* Same flat field types (names may differ: UNION ALL takes its first input's). */
static bool same_flat_types(const sl_schema_t *a, const sl_schema_t *b) {
    if (sl_schema_field_count(a) != sl_schema_field_count(b)) return false;
    for (int i = 0; i < sl_schema_field_count(a); i++)
        if (sl_schema_field_type(a, i) != sl_schema_field_type(b, i)) return false;
    return true;
}

/* ---- the plan --------------------------------------------------------------------- */

static const char *supported_versions[] = {"1.19", "1.20", "2.0", "2.1", "2.2"};

sl_sql_plan_t *sl_sql_plan_parse(const char *json, size_t len, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    json_error_t je;
    json_t *root = json_loadb(json, len, JSON_REJECT_DUPLICATES, &je);
    if (!root) {
        sql_perr(err, errlen, "plan: not valid JSON: %s at line %d, column %d", je.text, je.line, je.column);
        return NULL;
    }
    sl_sql_plan_t *p = sl_calloc(1, sizeof *p);
    atomic_init(&p->refs, 1);
    pthread_mutex_init(&p->out_mu, NULL);
    int rc = 0;
    const char *ver = json_string_value(json_object_get(root, "flinkVersion"));
    json_t *nodes = json_object_get(root, "nodes"), *edges = json_object_get(root, "edges");
    json_t *stmts = json_object_get(root, "sluiceStatements");
    char stmt[512] = "";
    if (json_array_size(stmts) == 1) {
        json_t *s = json_array_get(stmts, 0);
        const char *f = json_string_value(json_object_get(s, "file"));
        snprintf(stmt, sizeof stmt, " (in the statement at %s:%lld)", f ? f : "?",
                 (long long)json_integer_value(json_object_get(s, "line")));
    }
    if (!json_is_object(root)) {
        rc = sql_perr(err, errlen, "plan: the top level is not a JSON object");
        goto out;
    }
    if (!ver) {
        rc = sql_perr(err, errlen, "plan: \"flinkVersion\" is missing or not a string");
        goto out;
    }
    bool vok = false;
    for (size_t i = 0; i < sizeof supported_versions / sizeof supported_versions[0]; i++) vok |= !strcmp(ver, supported_versions[i]);
    if (!vok) {
        rc = sql_perr(err, errlen, "plan: flinkVersion %s is not supported (1.19 .. 2.2 are)", ver);
        goto out;
    }
    if (!json_is_array(nodes) || json_array_size(nodes) == 0) {
        rc = sql_perr(err, errlen, "plan: \"nodes\" is missing, empty or not an array");
        goto out;
    }
    if (!json_is_array(edges)) {
        rc = sql_perr(err, errlen, "plan: \"edges\" is missing or not an array");
        goto out;
    }
    size_t nn = json_array_size(nodes);
    if (nn > 100000) {
        rc = sql_perr(err, errlen, "plan: too many nodes");
        goto out;
    }
    p->nodes = sl_calloc(nn, sizeof *p->nodes);
    size_t nsinks = 0;
    for (size_t i = 0; i < nn; i++) {
        json_t *jn = json_array_get(nodes, i);
        pnode_t *n = &p->nodes[i];
        p->n = (int)i + 1;
        json_t *jid = json_object_get(jn, "id");
        const char *type = json_string_value(json_object_get(jn, "type"));
        const char *desc = json_string_value(json_object_get(jn, "description"));
        if (!json_is_object(jn) || !json_is_integer(jid) || !type) {
            rc = sql_perr(err, errlen, "plan: nodes[%zu]: needs an integer \"id\" and a string \"type\"", i);
            goto out;
        }
        n->id = (int)json_integer_value(jid);
        for (size_t k = 0; k < i; k++)
            if (p->nodes[k].id == n->id) {
                rc = sql_perr(err, errlen, "plan: nodes[%zu]: id %d appears twice", i, n->id);
                goto out;
            }
        char buf[1024];
        if (json_array_size(stmts) > 1 && !strncmp(type, "stream-exec-sink", 16)) {
            /* a statement set: its sinks come in the order of its INSERTs */
            json_t *st = json_array_get(stmts, nsinks++);
            const char *f = json_string_value(json_object_get(st, "file"));
            snprintf(stmt, sizeof stmt, st ? " (in the statement at %s:%lld)" : "", f ? f : "?",
                     (long long)json_integer_value(json_object_get(st, "line")));
        } else if (json_array_size(stmts) > 1) {
            stmt[0] = 0;
        }
        snprintf(buf, sizeof buf, "plan node %d (%s: %.300s)%s", n->id, type, desc ? desc : "", stmt);
        n->desc = sl_strdup(buf);
        snprintf(buf, sizeof buf, "%d %s %.400s", n->id, type, desc ? desc : "");
        n->line = sl_strdup(buf);
        snprintf(buf, sizeof buf, "%.200s", desc ? desc : type);
        n->name = sl_strdup(buf);
        const char *us = strrchr(type, '_');
        size_t bl = us ? (size_t)(us - type) : strlen(type);
        int version = us ? atoi(us + 1) : 0;
        int ti = -1;
        for (size_t k = 0; k < sizeof NODE_TYPES / sizeof NODE_TYPES[0]; k++)
            if (strlen(NODE_TYPES[k].name) == bl && !strncmp(NODE_TYPES[k].name, type, bl)) ti = (int)k;
        if (ti < 0) {
            rc = sql_perr(err, errlen, "%s: node type %.*s is not supported yet", n->desc, (int)bl, type);
            goto out;
        }
        if (version != NODE_TYPES[ti].version) {
            rc = sql_perr(err, errlen, "%s: version %d of %s is not supported (version %d is)", n->desc, version,
                      NODE_TYPES[ti].name, NODE_TYPES[ti].version);
            goto out;
        }
        n->t = NODE_TYPES[ti].t;
        /* inputs from the edges (in edge order) */
        for (size_t k = 0; k < json_array_size(edges); k++) {
            json_t *e = json_array_get(edges, k);
            json_t *js = json_object_get(e, "source"), *jt = json_object_get(e, "target");
            if (!json_is_integer(js) || !json_is_integer(jt)) {
                rc = sql_perr(err, errlen, "plan: edges[%zu]: needs integer \"source\" and \"target\"", k);
                goto out;
            }
            if (json_integer_value(jt) != n->id) continue;
            int src = -1;
            for (size_t q = 0; q < i; q++)
                if (p->nodes[q].id == json_integer_value(js)) src = (int)q;
            if (src < 0) {
                rc = sql_perr(err, errlen, "plan: edges[%zu]: source %lld is not a node listed before node %d", k,
                          (long long)json_integer_value(js), n->id);
                goto out;
            }
            const char *sh = json_string_value(json_object_get(json_object_get(e, "shuffle"), "type"));
            if (sh && strcmp(sh, "FORWARD")) {
                rc = sql_perr(err, errlen, "plan: edges[%zu]: shuffle %s is not supported yet", k, sh);
                goto out;
            }
            const char *sm = json_string_value(json_object_get(e, "shuffleMode"));
            if (sm && strcmp(sm, "PIPELINED")) {
                rc = sql_perr(err, errlen, "plan: edges[%zu]: shuffleMode %s is not supported (PIPELINED is)", k, sm);
                goto out;
            }
            n->inputs = sl_realloc(n->inputs, (size_t)(n->ninputs + 1) * sizeof *n->inputs);
            n->inputs[n->ninputs++] = src;
        }
        int want = n->t == N_SCAN ? 0 : 1;
        if (n->t == N_UNION ? n->ninputs < 2 : n->ninputs != want) {
            rc = sql_perr(err, errlen, "%s: has %d inputs", n->desc, n->ninputs);
            goto out;
        }
        /* an updating input makes an updating output (calc, exchange, sink pass the kind through) */
        n->in_kind = -1;
        for (int k = 0; k < n->ninputs; k++) {
            const pnode_t *src = &p->nodes[n->inputs[k]];
            if (src->t == N_EXCHANGE && src->dist != DIST_ANY && !keyed_node(n->t)) {
                rc = sql_perr(err, errlen, "%s: a %s exchange (%s) into it is not supported yet (only into aggregates, deduplicate and rank)",
                          n->desc, src->dist == DIST_HASH ? "HASH" : "SINGLETON", src->desc);
                goto out;
            }
            if (!src->changelog) continue;
            if (n->t == N_WATERMARK || n->t == N_UNION || n->t == N_GROUP_WINDOW || n->t == N_WINDOW_AGG ||
                n->t == N_LOCAL_WAGG) {
                rc = sql_perr(err, errlen, "%s: an updating input (from %s) is not supported here (insert-only inputs are)",
                          n->desc, src->desc);
                goto out;
            }
            n->changelog = n->t != N_GROUP_AGG;
            n->in_kind = src->width;
        }
        switch (n->t) {
        case N_SCAN: rc = parse_scan(n, jn, err, errlen); break;
        case N_GROUP_AGG: rc = parse_group_agg(p, n, jn, err, errlen); break;
        case N_DEDUP: rc = parse_dedup(p, n, jn, err, errlen); break;
        case N_RANK: rc = parse_rank(p, n, jn, err, errlen); break;
        case N_CALC: rc = parse_calc(p, n, jn, err, errlen); break;
        case N_WATERMARK: rc = parse_watermark(p, n, jn, err, errlen); break;
        case N_EXCHANGE: rc = parse_exchange(p, n, jn, err, errlen); break;
        case N_UNION:
            rc = parse_output(n, jn, err, errlen);
            for (int k = 0; rc == 0 && k < n->ninputs; k++)
                if (!same_flat_types(p->nodes[n->inputs[k]].schema, n->schema))
                    rc = sql_perr(err, errlen, "%s: input %d's type differs from the output's", n->desc, k);
            break;
        case N_SINK: rc = parse_sink(p, n, jn, err, errlen); break;
        case N_GROUP_WINDOW:
        case N_WINDOW_AGG:
        case N_LOCAL_WAGG:
        case N_GLOBAL_WAGG: rc = parse_window(p, n, jn, err, errlen); break;
        }
        if (rc < 0) goto out;
    }
    for (int i = 0; i < p->n; i++) {
        bool consumed = false;
        for (int k = 0; k < p->n; k++)
            for (int q = 0; q < p->nodes[k].ninputs; q++) consumed |= p->nodes[k].inputs[q] == i;
        if (!consumed && p->nodes[i].t != N_SINK) {
            rc = sql_perr(err, errlen, "%s: its output goes nowhere", p->nodes[i].desc);
            goto out;
        }
    }
out:
    json_decref(root);
    if (rc < 0) {
        if (err && errlen && !err[0]) sql_perr(err, errlen, "plan: malformed");
        plan_release(p);
        return NULL;
    }
    return p;
}

sl_sql_plan_t *sl_sql_plan_load(const char *path, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    FILE *f = fopen(path, "rb");
    if (!f) {
        sql_perr(err, errlen, "%s: %s", path, strerror(errno));
        return NULL;
    }
    size_t cap = 1 << 16, n = 0;
    char *buf = sl_malloc(cap);
    size_t r;
    while ((r = fread(buf + n, 1, cap - n, f)) > 0) {
        n += r;
        if (n == cap) buf = sl_realloc(buf, cap *= 2);
    }
    fclose(f);
    if (err && errlen) err[0] = 0;
    sl_sql_plan_t *p = sl_sql_plan_parse(buf, n, err, errlen);
    sl_free(buf);
    return p;
}

/* ---- runtime: nexmark conversion, calc, sinks ------------------------------------------ */

typedef struct {
    const pnode_t *n;
} nx_ctx_t;

static int nx_map(void *ctx, const sl_record_t *in, sl_row_writer_t *w) {
    const sl_row_t *r = &in->row;
    int type = sl_row_i32(r, SL_NXF_EVENT_TYPE);
    for (int i = 0; i < (int)(sizeof NX_MAP / sizeof NX_MAP[0]); i++) {
        int m = NX_MAP[i];
        if (m >= 0) {
            if (sl_row_is_null(r, m)) sl_rw_set_null(w, i);
            else sl_rw_copy_field(w, i, r, m);
        } else if (m == NXM_NULL) {
            sl_rw_set_null(w, i);
        } else {
            int kind = m == NXM_TIME_PERSON ? SL_NX_PERSON : m == NXM_TIME_AUCTION ? SL_NX_AUCTION : SL_NX_BID;
            if (type == kind) sl_rw_set_i64(w, i, sl_row_i64(r, SL_NXF_DATE_TIME));
            else sl_rw_set_null(w, i);
        }
    }
    return 0;
}

/* The same fields under the names of the output schema. */
static int rename_map(void *ctx, const sl_record_t *in, sl_row_writer_t *w) {
    for (int i = 0; i < sl_schema_field_count(in->row.schema); i++) {
        if (sl_row_is_null(&in->row, i)) sl_rw_set_null(w, i);
        else sl_rw_copy_field(w, i, &in->row, i);
    }
    return 0;
}

typedef struct calc_ctx {
    const pnode_t *n;
    sql_scratch_t sc;
} calc_ctx_t;

static void *calc_clone(const void *c) {
    calc_ctx_t *x = sl_calloc(1, sizeof *x);
    x->n = ((const calc_ctx_t *)c)->n;
    return x;
}

static void calc_free(void *c) {
    calc_ctx_t *x = c;
    sql_scratch_free(&x->sc);
    sl_free(x);
}

static int calc_fail(calc_ctx_t *x) {
    fprintf(stderr, "sluice sql: %s: %s\n", x->n->desc, x->sc.err);
    return SL_EINVAL;
}

static int calc_fn(void *ctx, const sl_record_t *in, sl_collector_t *out) {
    calc_ctx_t *x = ctx;
    const pnode_t *n = x->n;
    sql_scratch_reset(&x->sc);
    sql_val_t v;
    if (n->cond) {
        if (sql_eval(n->cond, &in->row, &x->sc, &v) < 0) return calc_fail(x);
        if (v.null || !v.i) return 0;
    }
    sl_row_writer_t *w = sl_out_row(out);
    int f = 0;
    for (int i = 0; i < n->nproj; i++) {
        int first, width;
        if (n->cols[i]->kind == SK_ROW && sql_expr_flat_ref(n->proj[i], &first, &width)) {
            for (int k = 0; k < width; k++) {
                if (sl_row_is_null(&in->row, first + k)) sl_rw_set_null(w, f + k);
                else sl_rw_copy_field(w, f + k, &in->row, first + k);
            }
            f += width;
            continue;
        }
        if (sql_eval(n->proj[i], &in->row, &x->sc, &v) < 0) return calc_fail(x);
        sql_val_write(n->cols[i], &v, w, f);
        f += 1;
    }
    if (n->changelog) sl_rw_set_i32(w, n->width, sl_row_i32(&in->row, n->in_kind));
    sl_emit(out);
    return 0;
}

/* The collect file, one FILE for every sink of a job (lines of different
 * sinks never interleave: writes hold the plan's out_mu). */
typedef struct collect_file {
    FILE *f;
    atomic_int refs;
} collect_file_t;

static void collect_release(collect_file_t *cf) {
    if (cf && atomic_fetch_sub(&cf->refs, 1) == 1) {
        fclose(cf->f);
        sl_free(cf);
    }
}

typedef struct sql_sink_ctx {
    const pnode_t *n;
    sl_sql_plan_t *plan;
    collect_file_t *cf; /* or NULL: print to stdout/stderr */
    FILE *f;
    bool collect;
} sql_sink_ctx_t;

typedef struct {
    sql_sink_ctx_t *c;
    int subtask, parallelism;
    char *line;
    size_t cap;
} sql_writer_t;

static int sk_open(void *ctx, int subtask, int parallelism, const sl_schema_t *schema, void **writer, char *err,
                   size_t errlen) {
    sql_writer_t *w = sl_calloc(1, sizeof *w);
    w->c = ctx;
    w->subtask = subtask;
    w->parallelism = parallelism;
    *writer = w;
    return 0;
}

static void line_add(sql_writer_t *w, size_t *len, const char *s, size_t n) {
    if (*len + n + 2 > w->cap) {
        w->cap = (*len + n + 2) * 2;
        w->line = sl_realloc(w->line, w->cap);
    }
    memcpy(w->line + *len, s, n);
    *len += n;
}

/* Java's Double.toString: the shortest digits that read back as d; plain for
 * 1e-3 <= |d| < 1e7 (at least one fraction digit), else d.dddE[-]n. */
static int java_double(double d, char *buf, size_t cap) {
    if (d != d) return snprintf(buf, cap, "NaN");
    if (isinf(d)) return snprintf(buf, cap, "%sInfinity", d < 0 ? "-" : "");
    if (d == 0) return snprintf(buf, cap, "%s", signbit(d) ? "-0.0" : "0.0");
    char e[40];
    int prec = 1;
    for (; prec <= 17; prec++) {
        snprintf(e, sizeof e, "%.*e", prec - 1, d);
        if (strtod(e, NULL) == d) break;
    }
    /* e = [-]D[.DDD]e[+-]XX -> digits and exponent */
    char digits[24];
    int nd = 0, exp10;
    const char *c = e;
    bool neg = *c == '-';
    if (neg) c++;
    for (; *c && *c != 'e'; c++)
        if (*c != '.') digits[nd++] = *c;
    digits[nd] = 0;
    exp10 = atoi(c + 1);
    double a = fabs(d);
    int k = 0;
    if (neg) buf[k++] = '-';
    if (a >= 1e-3 && a < 1e7) {
        if (exp10 >= 0) {
            for (int i = 0; i <= exp10; i++) buf[k++] = i < nd ? digits[i] : '0';
            buf[k++] = '.';
            if (exp10 + 1 >= nd) buf[k++] = '0';
            for (int i = exp10 + 1; i < nd; i++) buf[k++] = digits[i];
        } else {
            buf[k++] = '0';
            buf[k++] = '.';
            for (int i = 0; i < -exp10 - 1; i++) buf[k++] = '0';
            for (int i = 0; i < nd; i++) buf[k++] = digits[i];
        }
        buf[k] = 0;
        return k;
    }
    buf[k++] = digits[0];
    buf[k++] = '.';
    if (nd == 1) buf[k++] = '0';
    for (int i = 1; i < nd; i++) buf[k++] = digits[i];
    buf[k] = 0;
    return k + snprintf(buf + k, cap - (size_t)k, "E%d", exp10);
}

/* Flink's print sink text of one value (Row.toString): null, true/false, LocalDateTime's ISO form. */
static int print_value(const sql_type_t *t, const sql_val_t *v, char *buf, size_t cap) {
    if (v->null) return snprintf(buf, cap, "null");
    if (t->kind == SK_BOOLEAN) return snprintf(buf, cap, "%s", v->i ? "true" : "false");
    if (t->kind == SK_DOUBLE) return java_double(v->d, buf, cap);
    if (t->kind == SK_TIMESTAMP) {
        char b[64];
        sql_val_format(t, v, b, sizeof b);
        b[10] = 'T';
        /* LocalDateTime.toString: HH:mm, then :ss if seconds or fraction, then the fraction */
        int ms = (int)(((v->i % 1000) + 1000) % 1000);
        b[19] = 0;
        if (ms) return snprintf(buf, cap, "%s.%03d", b, ms);
        if (!strcmp(b + 16, ":00")) b[16] = 0;
        return snprintf(buf, cap, "%s", b);
    }
    if (sql_kind_string(t->kind)) return snprintf(buf, cap, "%.*s", (int)v->len, v->s ? v->s : "");
    return sql_val_format(t, v, buf, cap);
}

static int sk_write(void *writer, const sl_record_t *rec, char *err, size_t errlen) {
    sql_writer_t *w = writer;
    const pnode_t *n = w->c->n;
    size_t len = 0;
    char b[512];
    static const char *const KINDS[] = {"+I", "-U", "+U", "-D"};
    int kind = n->changelog ? sl_row_i32(&rec->row, n->width) : SQL_KIND_INSERT;
    if (kind < 0 || kind > 3) return sl_errf(err, errlen, SL_EINVAL, "%s: a row of unknown kind %d", n->desc, kind);
    if (w->c->collect) {
        line_add(w, &len, KINDS[kind], 2);
    } else {
        if (n->print_id) {
            line_add(w, &len, n->print_id, strlen(n->print_id));
            if (w->parallelism > 1) {
                int k = snprintf(b, sizeof b, ":%d", w->subtask + 1);
                line_add(w, &len, b, (size_t)k);
            }
            line_add(w, &len, "> ", 2);
        } else if (w->parallelism > 1) {
            int k = snprintf(b, sizeof b, "%d> ", w->subtask + 1);
            line_add(w, &len, b, (size_t)k);
        }
        line_add(w, &len, KINDS[kind], 2);
        line_add(w, &len, "[", 1);
    }
    for (int i = 0; i < n->ncols; i++) {
        sql_val_t v;
        memset(&v, 0, sizeof v);
        sql_val_read(n->cols[i], &rec->row, i, &v);
        if (v.null && !n->cols[i]->nullable && n->not_null_enforce)
            return sl_errf(err, errlen, SL_EINVAL, "%s: column %d of table %s is NOT NULL but got NULL", n->desc, i,
                           n->table);
        if (v.null && !n->cols[i]->nullable) return 0; /* DROP */
        int k;
        if (w->c->collect) {
            line_add(w, &len, "|", 1);
            /* strings may be long: format in pieces */
            if (!v.null && (sql_kind_string(n->cols[i]->kind)) && v.len > 200) {
                char *big = sl_malloc((size_t)v.len * 2 + 4);
                k = sql_val_format(n->cols[i], &v, big, (size_t)v.len * 2 + 4);
                line_add(w, &len, big, (size_t)k);
                sl_free(big);
                continue;
            }
            k = sql_val_format(n->cols[i], &v, b, sizeof b);
        } else {
            if (i) line_add(w, &len, ", ", 2);
            k = print_value(n->cols[i], &v, b, sizeof b);
        }
        if (k > (int)sizeof b - 1) k = (int)sizeof b - 1;
        line_add(w, &len, b, (size_t)k);
    }
    if (!w->c->collect) line_add(w, &len, "]", 1);
    line_add(w, &len, "\n", 1);
    pthread_mutex_lock(&w->c->plan->out_mu);
    FILE *f = w->c->f ? w->c->f : n->print_stderr ? stderr : stdout;
    size_t wr = fwrite(w->line, 1, len, f);
    pthread_mutex_unlock(&w->c->plan->out_mu);
    if (wr != len) return sl_errf(err, errlen, SL_EIO, "%s: write failed", n->desc);
    return 0;
}

static int sk_finish(void *writer, char *err, size_t errlen) {
    sql_writer_t *w = writer;
    pthread_mutex_lock(&w->c->plan->out_mu);
    fflush(w->c->f ? w->c->f : stdout);
    pthread_mutex_unlock(&w->c->plan->out_mu);
    return 0;
}

static void sk_close(void *writer) {
    sql_writer_t *w = writer;
    sl_free(w->line);
    sl_free(w);
}

static void sk_destroy(void *ctx) {
    sql_sink_ctx_t *c = ctx;
    collect_release(c->cf);
    plan_release(c->plan);
    sl_free(c);
}

static const sl_sink_ops_t SQL_SINK_OPS = {
    .name = "sql-sink", .open = sk_open, .write = sk_write, .finish = sk_finish, .close = sk_close, .destroy = sk_destroy,
};

/* ---- build ----------------------------------------------------------------------------- */

int sl_sql_plan_build(sl_env_t *env, sl_sql_plan_t *plan, const sl_sql_opts_t *opts) {
    if (!env) return SL_EINVAL;
    if (!plan) {
        sl_env_errorf(env, "sql: no plan");
        return SL_EINVAL;
    }
    sl_sql_opts_t o = opts ? *opts : sl_sql_opts_default();
    atomic_fetch_add(&plan->refs, 1);
    sl_env_own(env, plan, plan_release);
    sl_stream_t **st = sl_calloc((size_t)plan->n, sizeof *st);
    collect_file_t *cf = NULL;
    int rc = 0, nsink = 0;
    for (int i = 0; i < plan->n && rc == 0; i++) {
        pnode_t *n = &plan->nodes[i];
        sl_stream_t *in = n->ninputs ? st[n->inputs[0]] : NULL;
        char uid[64];
        snprintf(uid, sizeof uid, "sql-node-%d", n->id);
        switch (n->t) {
        case N_SCAN: {
            sl_nexmark_opts_t nx = n->nx;
            if (o.nexmark_events >= 0) nx.events = o.nexmark_events;
            if (o.nexmark_splits > 0) nx.splits = o.nexmark_splits;
            sl_stream_t *s = sl_from_source(env, sl_nexmark_source(nx), sl_wm_none(), n->name);
            sl_uid(s, uid);
            st[i] = sl_map(s, nx_map, NULL, sl_schema_ref(n->schema));
            snprintf(uid, sizeof uid, "sql-node-%d-layout", n->id);
            sl_uid(st[i], uid);
            break;
        }
        case N_CALC: {
            calc_ctx_t *proto = sl_calloc(1, sizeof *proto); /* cloned for each subtask when the job starts */
            proto->n = n;
            sl_env_own(env, proto, sl_free);
            sl_fn_opts_t fo = {.ctx = proto, .ctx_clone = calc_clone, .ctx_free = calc_free};
            st[i] = sl_flat_map_ex(in, calc_fn, fo, sl_schema_ref(n->schema));
            break;
        }
        case N_WATERMARK: {
            sl_watermark_strategy_t ws =
                sl_wm_bounded(sl_schema_field_name(n->schema, n->rowtime_flat), n->wm_delay_ms > 0 ? n->wm_delay_ms - 1 : 0);
            st[i] = sl_assign_timestamps(in, ws);
            break;
        }
        case N_EXCHANGE:
            /* FORWARD/ANY: nothing; HASH/SINGLETON feed only keyed nodes (parse checks),
             * which key by the exchange's keys (grouping columns, unique key, partition) */
            st[i] = in;
            continue;
        case N_GROUP_AGG:
            st[i] = sql_agg_build(env, in, n->agg, n->schema);
            break;
        case N_LOCAL_WAGG:
            /* the global window aggregate does both phases over these rows */
            st[i] = in;
            continue;
        case N_GROUP_WINDOW:
        case N_WINDOW_AGG:
        case N_GLOBAL_WAGG:
            st[i] = sql_window_build(env, in, n->win, n->schema);
            break;
        case N_DEDUP:
            st[i] = sql_dedup_build(env, in, n->dedup, n->schema);
            break;
        case N_RANK:
            st[i] = sql_rank_build(env, in, n->rank, n->schema);
            break;
        case N_UNION:
            /* inputs named otherwise are renamed to the union's schema first */
            for (int k = 0; k < n->ninputs; k++) {
                sl_stream_t *sk = st[n->inputs[k]];
                if (!sl_schema_equal(sl_stream_schema(sk), n->schema)) sk = sl_map(sk, rename_map, NULL, sl_schema_ref(n->schema));
                st[i] = k == 0 ? sk : sl_union(st[i], sk);
            }
            break;
        case N_SINK: {
            sl_sink_t sink;
            if (o.collect_path || (n->sink == SINK_PRINT && !o.sink_override)) {
                sql_sink_ctx_t *c = sl_calloc(1, sizeof *c);
                c->n = n;
                c->plan = plan;
                atomic_fetch_add(&plan->refs, 1);
                if (o.collect_path) {
                    if (!cf) {
                        FILE *f = fopen(o.collect_path, "a");
                        if (!f) {
                            sl_env_errorf(env, "sql: %s: cannot open the collect file %s: %s", n->desc,
                                          o.collect_path, strerror(errno));
                            sk_destroy(c);
                            rc = SL_EINVAL;
                            break;
                        }
                        cf = sl_calloc(1, sizeof *cf);
                        cf->f = f;
                        atomic_init(&cf->refs, 1); /* this build's */
                    }
                    c->collect = true;
                    atomic_fetch_add(&cf->refs, 1);
                    c->cf = cf;
                    c->f = cf->f;
                }
                sink = (sl_sink_t){&SQL_SINK_OPS, c};
            } else if (o.sink_override) {
                sink = o.sink_override(o.sink_ctx, nsink, n->schema);
            } else {
                sink = sl_counting_sink(NULL);
            }
            nsink++;
            st[i] = sl_sink_to(in, sink, n->name);
            break;
        }
        }
        if (rc == 0 && !st[i]) {
            sl_env_errorf(env, "sql: %s: could not be built", n->desc);
            rc = SL_EINVAL;
        }
        if (rc == 0 && (n->t == N_CALC || n->t == N_WATERMARK || n->t == N_GROUP_AGG || keyed_node(n->t))) {
            sl_uid(st[i], uid);
            sl_name(st[i], n->name);
        } else if (rc == 0 && n->t == N_SINK) {
            sl_uid(st[i], uid);
        }
    }
    sl_free(st);
    collect_release(cf);
    return rc;
}
