/*
 * test_sql_plan.c — the compiled-plan parser (src/sql/sql_plan.c) without a
 * JVM, on plans Flink's planner compiled (tests/data/sql/plans/, from the
 * Nexmark q1, q17 and q21 scripts and agg_retract.sql by sql/compiler's jar):
 *   - window aggregates (q11.plan.json, win_hop.plan.json, win_attached.plan.json)
 *     parse; a window offset, the SESSION TVF, processing time, early firing,
 *     row-count windows, an unsupported aggregate are refused by name;
 *   - every unsupported part is refused by name before a job exists: a node
 *     type, a node version, a function, a UDF, a type, a source or sink
 *     connector, a connector option, a changelog mode, the Flink version;
 *     node-level messages name the statement's file and line;
 *   - damaged plans (truncated, bytes changed, any value replaced by one of
 *     another JSON type) are refused with a message or, when still valid,
 *     build — never a crash (run under ASan in CI).
 */
#include <jansson.h>
#include <stdlib.h>
#include <time.h>

#include "sluice/sluice.h"
#include "sluice/sql.h"
#include "test.h"

static char g_dir[1024];
static unsigned g_seed;

static char *slurp(const char *name, size_t *len) {
    char path[1200];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    if (fread(b, 1, (size_t)n, f) != (size_t)n) n = 0;
    b[n] = 0;
    fclose(f);
    *len = (size_t)n;
    return b;
}

static json_t *load(const char *name) {
    size_t n;
    char *b = slurp(name, &n);
    if (!b) return NULL;
    json_t *j = json_loadb(b, n, 0, NULL);
    free(b);
    return j;
}

/* Parses j; returns the error (empty if it parsed). */
static const char *try_parse(json_t *j) {
    static char err[2048];
    err[0] = 0;
    char *d = json_dumps(j, JSON_COMPACT);
    sl_sql_plan_t *p = sl_sql_plan_parse(d, strlen(d), err, sizeof err);
    free(d);
    if (p) {
        sl_sql_plan_free(p);
        err[0] = 0;
    }
    return err;
}

static json_t *node_of_type(json_t *plan, const char *prefix) {
    json_t *nodes = json_object_get(plan, "nodes");
    for (size_t i = 0; i < json_array_size(nodes); i++) {
        json_t *n = json_array_get(nodes, i);
        const char *t = json_string_value(json_object_get(n, "type"));
        if (t && !strncmp(t, prefix, strlen(prefix))) return n;
    }
    return NULL;
}

/* The first CALL whose internalName is name, anywhere under j. */
static json_t *find_call(json_t *j, const char *name) {
    if (json_is_object(j)) {
        const char *in = json_string_value(json_object_get(j, "internalName"));
        if (in && !strcmp(in, name)) return j;
        const char *k;
        json_t *v;
        json_object_foreach(j, k, v) {
            json_t *r = find_call(v, name);
            if (r) return r;
        }
    } else if (json_is_array(j)) {
        for (size_t i = 0; i < json_array_size(j); i++) {
            json_t *r = find_call(json_array_get(j, i), name);
            if (r) return r;
        }
    }
    return NULL;
}

TEST(valid_plans_parse) {
    const char *names[] = {"q1.plan.json",  "q21.plan.json",     "q17.plan.json",         "agg_retract.plan.json",
                           "q11.plan.json", "win_hop.plan.json", "win_attached.plan.json"};
    for (int i = 0; i < 7; i++) {
        json_t *j = load(names[i]);
        CHECK(j != NULL);
        const char *e = try_parse(j);
        if (e[0]) fprintf(stderr, "%s: %s\n", names[i], e);
        CHECK(e[0] == 0);
        json_decref(j);
    }
    char err[256];
    CHECK(sl_sql_plan_load("/nonexistent/plan.json", err, sizeof err) == NULL);
    CHECK_CONTAINS(err, "/nonexistent/plan.json");
}

TEST(unsupported_refused_by_name) {
    json_t *base = load("q21.plan.json");
    CHECK(base != NULL);
    json_t *j;
    const char *e;

    j = json_deep_copy(base); /* a node type */
    json_object_set_new(node_of_type(j, "stream-exec-calc"), "type", json_string("stream-exec-window-join_1"));
    e = try_parse(j);
    CHECK_CONTAINS(e, "stream-exec-window-join");
    CHECK_CONTAINS(e, "not supported");
    CHECK_CONTAINS(e, "q21.sql:18"); /* the statement */
    json_decref(j);

    j = json_deep_copy(base); /* a node version */
    json_object_set_new(node_of_type(j, "stream-exec-calc"), "type", json_string("stream-exec-calc_2"));
    CHECK_CONTAINS(try_parse(j), "version 2 of stream-exec-calc");
    json_decref(j);

    j = json_deep_copy(base); /* a function */
    json_object_set_new(find_call(j, "$LOWER$1"), "internalName", json_string("$INITCAP$1"));
    e = try_parse(j);
    CHECK_CONTAINS(e, "function $INITCAP$1 is not supported");
    CHECK_CONTAINS(e, "stream-exec-calc_1");
    json_decref(j);

    j = json_deep_copy(base); /* a function version */
    json_object_set_new(find_call(j, "$LOWER$1"), "internalName", json_string("$LOWER$2"));
    CHECK_CONTAINS(try_parse(j), "$LOWER$2: version 2");
    json_decref(j);

    j = json_deep_copy(base); /* a user-defined function */
    json_object_set_new(find_call(j, "$LOWER$1"), "catalogName", json_string("`cat`.`db`.`f`"));
    CHECK_CONTAINS(try_parse(j), "user-defined functions");
    json_decref(j);

    j = json_deep_copy(base); /* a sink connector */
    json_t *sink = node_of_type(j, "stream-exec-sink");
    json_t *opts = json_object_get(json_object_get(json_object_get(json_object_get(sink, "dynamicTableSink"), "table"),
                                                   "resolvedTable"), "options");
    json_object_set_new(opts, "connector", json_string("kafka"));
    e = try_parse(j);
    CHECK_CONTAINS(e, "sink connector 'kafka'");
    CHECK_CONTAINS(e, "nexmark_q21");
    json_decref(j);

    j = json_deep_copy(base); /* a source connector option */
    json_t *scan = node_of_type(j, "stream-exec-table-source-scan");
    opts = json_object_get(json_object_get(json_object_get(json_object_get(scan, "scanTableSource"), "table"),
                                           "resolvedTable"), "options");
    json_object_set_new(opts, "rate.shape", json_string("sine"));
    CHECK_CONTAINS(try_parse(j), "nexmark option 'rate.shape'");
    json_object_del(opts, "rate.shape");
    json_object_set_new(opts, "connector", json_string("datagen"));
    CHECK_CONTAINS(try_parse(j), "source connector 'datagen'");
    json_decref(j);

    j = json_deep_copy(base); /* a changelog mode */
    sink = node_of_type(j, "stream-exec-sink");
    json_object_set_new(sink, "inputChangelogMode", json_pack("[s, s]", "INSERT", "UPSERT"));
    CHECK_CONTAINS(try_parse(j), "changelog mode UPSERT");
    json_decref(j);

    j = json_deep_copy(base); /* a type */
    json_t *calc = node_of_type(j, "stream-exec-calc");
    json_object_set_new(calc, "outputType", json_string("ROW<`a` DATE>"));
    e = try_parse(j);
    CHECK_CONTAINS(e, "DATE");
    CHECK_CONTAINS(e, "not supported");
    json_decref(j);

    j = json_deep_copy(base); /* the Flink version */
    json_object_set_new(j, "flinkVersion", json_string("1.15"));
    CHECK_CONTAINS(try_parse(j), "flinkVersion 1.15 is not supported");
    json_decref(j);

    j = json_deep_copy(base); /* an exchange that needs a hash shuffle */
    json_t *edges = json_object_get(j, "edges");
    json_object_set_new(json_object_get(json_array_get(edges, 0), "shuffle"), "type", json_string("HASH"));
    CHECK_CONTAINS(try_parse(j), "shuffle HASH");
    json_decref(j);
    json_decref(base);

    /* group aggregates: what is not supported is refused by name */
    base = load("agg_retract.plan.json"); /* the second aggregate's input is updating */
    CHECK(base != NULL);
    json_t *nodes = json_object_get(base, "nodes");
    json_t *outer = NULL;
    for (size_t i = 0; i < json_array_size(nodes); i++) {
        json_t *n = json_array_get(nodes, i);
        const char *t = json_string_value(json_object_get(n, "type"));
        if (t && !strncmp(t, "stream-exec-group-aggregate", 27)) outer = n; /* the last one */
    }
    CHECK(outer != NULL);
    size_t oi = 0;
    for (; oi < json_array_size(nodes) && json_array_get(nodes, oi) != outer; oi++) {}

    j = json_deep_copy(base); /* MIN over an updating input (SUM(s) made MIN(s)) */
    json_t *call = json_array_get(json_object_get(json_array_get(json_object_get(j, "nodes"), oi), "aggCalls"), 3);
    json_object_set_new(call, "internalName", json_string("$MIN$1"));
    e = try_parse(j);
    CHECK_CONTAINS(e, "MIN over an updating input");
    CHECK_CONTAINS(e, "agg_retract.sql:17");
    json_decref(j);

    j = json_deep_copy(base); /* an aggregate function */
    call = json_array_get(json_object_get(json_array_get(json_object_get(j, "nodes"), oi), "aggCalls"), 3);
    json_object_set_new(call, "internalName", json_string("$LISTAGG$1"));
    CHECK_CONTAINS(try_parse(j), "aggregate function $LISTAGG$1 is not supported");
    json_decref(j);

    j = json_deep_copy(base); /* mini-batch */
    json_object_set_new(json_object_get(json_array_get(json_object_get(j, "nodes"), oi), "configuration"),
                        "table.exec.mini-batch.enabled", json_string("true"));
    CHECK_CONTAINS(try_parse(j), "table.exec.mini-batch.enabled");
    json_decref(j);

    j = json_deep_copy(base); /* state TTL */
    json_object_set_new(json_array_get(json_object_get(json_array_get(json_object_get(j, "nodes"), oi), "state"), 0),
                        "ttl", json_string("3600000 ms"));
    CHECK_CONTAINS(try_parse(j), "state TTL '3600000 ms'");
    json_decref(j);

    j = json_deep_copy(base); /* an exchange distribution */
    json_t *ex = node_of_type(j, "stream-exec-exchange");
    json_object_set_new(json_object_get(json_array_get(json_object_get(ex, "inputProperties"), 0), "requiredDistribution"),
                        "type", json_string("BROADCAST"));
    CHECK_CONTAINS(try_parse(j), "distribution BROADCAST is not supported");
    json_decref(j);

    j = json_deep_copy(base); /* a hash exchange into a node other than a group aggregate */
    ex = node_of_type(j, "stream-exec-exchange");
    json_int_t exid = json_integer_value(json_object_get(ex, "id"));
    for (size_t i = 0; i < json_array_size(json_object_get(j, "edges")); i++) {
        json_t *e1 = json_array_get(json_object_get(j, "edges"), i);
        if (json_integer_value(json_object_get(e1, "source")) != exid) continue;
        json_int_t tid = json_integer_value(json_object_get(e1, "target"));
        for (size_t k = 0; k < json_array_size(json_object_get(j, "nodes")); k++) {
            json_t *t = json_array_get(json_object_get(j, "nodes"), k);
            if (json_integer_value(json_object_get(t, "id")) == tid) json_object_set_new(t, "type", json_string("stream-exec-calc_1"));
        }
    }
    e = try_parse(j);
    CHECK_CONTAINS(e, "HASH exchange");
    CHECK_CONTAINS(e, "only into aggregates, deduplicate and rank");
    json_decref(j);

    j = json_deep_copy(base); /* an updating input into a node that takes none: UNION ALL of the aggregate */
    json_t *u = json_deep_copy(json_array_get(json_object_get(j, "nodes"), oi + 1));
    json_object_set_new(u, "id", json_integer(999));
    json_object_set_new(u, "type", json_string("stream-exec-union_1"));
    json_array_insert_new(json_object_get(j, "nodes"), oi + 1, u);
    json_t *ed = json_object_get(j, "edges");
    json_int_t oid = json_integer_value(json_object_get(outer, "id"));
    json_array_append_new(ed, json_pack("{s:I, s:I, s:{s:s}, s:s}", "source", oid, "target", (json_int_t)999, "shuffle",
                                        "type", "FORWARD", "shuffleMode", "PIPELINED"));
    json_array_append_new(ed, json_pack("{s:I, s:I, s:{s:s}, s:s}", "source", oid, "target", (json_int_t)999, "shuffle",
                                        "type", "FORWARD", "shuffleMode", "PIPELINED"));
    CHECK_CONTAINS(try_parse(j), "an updating input");
    json_decref(j);
    json_decref(base);
}

/* Every (container, key) of j, for mutation. */
typedef struct slot {
    json_t *parent;
    const char *key; /* object member, or NULL */
    size_t index;    /* array element */
} slot_t;

static void collect(json_t *j, slot_t **v, size_t *n, size_t *cap) {
    if (json_is_object(j)) {
        const char *k;
        json_t *c;
        json_object_foreach(j, k, c) {
            if (*n == *cap) *v = realloc(*v, (*cap = *cap ? 2 * *cap : 256) * sizeof **v);
            (*v)[(*n)++] = (slot_t){j, k, 0};
            collect(c, v, n, cap);
        }
    } else if (json_is_array(j)) {
        for (size_t i = 0; i < json_array_size(j); i++) {
            if (*n == *cap) *v = realloc(*v, (*cap = *cap ? 2 * *cap : 256) * sizeof **v);
            (*v)[(*n)++] = (slot_t){j, NULL, i};
            collect(json_array_get(j, i), v, n, cap);
        }
    }
}

static json_t *random_value(void) {
    switch (rand_r(&g_seed) % 9) {
    case 0: return json_integer(rand_r(&g_seed) % 7 - 2);
    case 1: return json_integer(INT64_MAX);
    case 2: return json_string("x");
    case 3: return json_null();
    case 4: return json_array();
    case 5: return json_object();
    case 6: return json_true();
    case 7: return json_string("ROW<`a` BIGINT>");
    default: return json_real(1.5);
    }
}

/* A plan that parses must also build (never run here). */
static void parse_and_build(const char *text, size_t len, long *refused, long *accepted) {
    char err[2048];
    err[0] = 0;
    sl_sql_plan_t *p = sl_sql_plan_parse(text, len, err, sizeof err);
    if (!p) {
        (*refused)++;
        if (!err[0]) fprintf(stderr, "refused without a message: %.200s\n", text);
        if (!err[0]) abort();
        return;
    }
    (*accepted)++;
    sl_env_t *env = sl_env_new();
    sl_sql_opts_t o = sl_sql_opts_default();
    o.nexmark_events = 10;
    sl_sql_plan_build(env, p, &o);
    sl_env_destroy(env);
    sl_sql_plan_free(p);
}

/* Window aggregates (q11.plan.json: GROUP BY SESSION; win_hop.plan.json: HOP, two phases): what
 * sluice does not run is refused naming the node and the statement's line. */
static json_t *window_spec(json_t *plan) { /* the local window aggregate's "windowing" */
    return json_object_get(node_of_type(plan, "stream-exec-local-window-aggregate"), "windowing");
}

TEST(window_unsupported_refused_by_name) {
    json_t *base = load("win_hop.plan.json");
    CHECK(base != NULL);
    json_t *j;
    const char *e;

    j = json_deep_copy(base); /* a window offset */
    json_object_set_new(json_object_get(window_spec(j), "window"), "offset", json_string("PT1S"));
    e = try_parse(j);
    CHECK_CONTAINS(e, "stream-exec-global-window-aggregate_1");
    CHECK_CONTAINS(e, "window offset (PT1S) is not supported");
    CHECK_CONTAINS(e, "win_hop.sql:14");
    json_decref(j);

    j = json_deep_copy(base); /* the SESSION window TVF */
    json_object_set_new(json_object_get(window_spec(j), "window"), "type", json_string("SessionWindow"));
    e = try_parse(j);
    CHECK_CONTAINS(e, "SESSION window table function is not supported");
    CHECK_CONTAINS(e, "win_hop.sql:14");
    json_decref(j);

    j = json_deep_copy(base); /* processing time */
    json_object_set_new(window_spec(j), "isRowtime", json_false());
    e = try_parse(j);
    CHECK_CONTAINS(e, "processing-time windows are not supported");
    CHECK_CONTAINS(e, "win_hop.sql:14");
    json_decref(j);

    j = json_deep_copy(base); /* a CUMULATE whose size is not a multiple of its step */
    json_object_set_new(window_spec(j), "window", json_pack("{s:s, s:s, s:s}", "type", "CumulativeWindow", "maxSize",
                                                            "PT10S", "step", "PT3S"));
    CHECK_CONTAINS(try_parse(j), "max size is not a multiple of its step");
    json_decref(j);

    j = json_deep_copy(base); /* an aggregate sluice does not run */
    json_object_set_new(find_call(node_of_type(j, "stream-exec-local-window-aggregate"), "$MAX$1"), "internalName",
                        json_string("$FIRST_VALUE$1"));
    e = try_parse(j);
    CHECK_CONTAINS(e, "aggregate function $FIRST_VALUE$1 is not supported");
    CHECK_CONTAINS(e, "win_hop.sql:14");
    json_decref(j);

    j = json_deep_copy(base); /* a global aggregate without its local one */
    json_object_set_new(node_of_type(j, "stream-exec-local-window-aggregate"), "type", json_string("stream-exec-calc_1"));
    CHECK(try_parse(j)[0] != 0);
    json_decref(j);
    json_decref(base);

    base = load("q11.plan.json");
    CHECK(base != NULL);
    j = json_deep_copy(base); /* early firing: only the planner's description says it */
    json_t *gw = node_of_type(j, "stream-exec-group-window-aggregate");
    char d[4096];
    snprintf(d, sizeof d, "%s, emit=[early delay 1000 millisecond])", json_string_value(json_object_get(gw, "description")));
    json_object_set_new(gw, "description", json_string(d));
    e = try_parse(j);
    CHECK_CONTAINS(e, "stream-exec-group-window-aggregate_1");
    CHECK_CONTAINS(e, "early/late firing");
    CHECK_CONTAINS(e, "q11.sql:19");
    json_decref(j);

    j = json_deep_copy(base); /* a row-count window */
    gw = node_of_type(j, "stream-exec-group-window-aggregate");
    json_object_set_new(json_object_get(gw, "window"), "isTimeWindow", json_false());
    CHECK_CONTAINS(try_parse(j), "row-count windows are not supported");
    json_decref(j);

    j = json_deep_copy(base); /* table.exec.emit.* in the node's configuration */
    gw = node_of_type(j, "stream-exec-group-window-aggregate");
    json_object_set_new(json_object_get(gw, "configuration"), "table.exec.emit.late-fire.enabled", json_string("true"));
    CHECK_CONTAINS(try_parse(j), "table.exec.emit.late-fire.enabled = 'true' is not supported");
    json_decref(j);
    json_decref(base);
}

TEST(damaged_plans_never_crash) {
    const char *names[] = {"q1.plan.json",  "q21.plan.json",     "q17.plan.json",         "agg_retract.plan.json",
                           "q11.plan.json", "win_hop.plan.json", "win_attached.plan.json"};
    long refused = 0, accepted = 0;
    for (int f = 0; f < 7; f++) {
        size_t len;
        char *text = slurp(names[f], &len);
        CHECK(text != NULL);
        for (int i = 0; i < 300; i++) /* truncated */
            parse_and_build(text, (size_t)rand_r(&g_seed) % len, &refused, &accepted);
        char *copy = malloc(len + 1);
        for (int i = 0; i < 300; i++) { /* bytes changed */
            memcpy(copy, text, len + 1);
            int k = 1 + rand_r(&g_seed) % 4;
            for (int q = 0; q < k; q++) copy[rand_r(&g_seed) % len] = "{}[]\",:0a-9 \\"[rand_r(&g_seed) % 13];
            parse_and_build(copy, len, &refused, &accepted);
        }
        free(copy);
        json_t *base = json_loadb(text, len, 0, NULL);
        CHECK(base != NULL);
        for (int i = 0; i < 1500; i++) { /* a value of another type */
            json_t *j = json_deep_copy(base);
            slot_t *v = NULL;
            size_t n = 0, cap = 0;
            collect(j, &v, &n, &cap);
            slot_t s = v[rand_r(&g_seed) % n];
            if (s.key) json_object_set_new(s.parent, s.key, random_value());
            else json_array_set_new(s.parent, s.index, random_value());
            free(v);
            char *d = json_dumps(j, JSON_COMPACT);
            parse_and_build(d, strlen(d), &refused, &accepted);
            free(d);
            json_decref(j);
        }
        json_decref(base);
        free(text);
    }
    fprintf(stderr, "  %ld damaged plans refused, %ld still valid (built)\n", refused, accepted);
    CHECK(refused > 1000);
}

int main(void) {
    snprintf(g_dir, sizeof g_dir, "%s", __FILE__);
    char *s = strrchr(g_dir, '/');
    if (s) *s = 0;
    else snprintf(g_dir, sizeof g_dir, ".");
    size_t l = strlen(g_dir);
    snprintf(g_dir + l, sizeof g_dir - l, "/data/sql/plans");
    g_seed = (unsigned)time(NULL);
    const char *e = getenv("SLUICE_TEST_SEED");
    if (e) g_seed = (unsigned)strtoul(e, NULL, 10);
    fprintf(stderr, "seed %u (SLUICE_TEST_SEED to repeat)\n", g_seed);
    RUN(valid_plans_parse);
    RUN(unsupported_refused_by_name);
    RUN(window_unsupported_refused_by_name);
    RUN(damaged_plans_never_crash);
    TEST_MAIN_END();
}
