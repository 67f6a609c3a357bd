/*
 * test_sql_window.c — Flink SQL's window aggregates on sluice (src/sql/sql_window.c):
 * the window TVFs TUMBLE, HOP and CUMULATE under GROUP BY window_start,
 * window_end (Flink's default two-phase plan: local + exchange + global
 * window aggregate, and the one-phase stream-exec-window-aggregate; an
 * aggregate over a window aggregate's rows, WindowAttached), and the
 * legacy GROUP BY TUMBLE / HOP (...) group windows (SESSION: Nexmark q11 in
 * test_sql_nexmark), with and without keys, with filters, COUNT / SUM / MIN /
 * MAX / AVG / COUNT DISTINCT, window_start / window_end / window_time.
 * Each query (tests/data/sql/win_*.sql) is compiled by Flink's planner
 * (sql/compiler's jar) and run on sluice and on Flink (the jar's `run`: a
 * MiniCluster over the same generated events); the rows must be equal as
 * multisets.  Event counts, rates, parallelism and the state backend (heap or
 * RocksDB) are drawn at random.  One window job is checkpointed, failed
 * after a completed checkpoint and restored at another parallelism into the
 * transactional sink: the committed rows equal Flink's exactly.  What sluice
 * does not run (a window offset, early firing, processing-time windows, the
 * SESSION TVF, an unsupported aggregate) is refused before a job exists,
 * naming the node and the statement's line.  Each query costs two JVM
 * runs, so a run checks two of the six queries, drawn by the seed
 * (SLUICE_TEST_SEED), besides the restore and the refusals;
 * SLUICE_SQL_WINDOW_ALL=1 checks all six.
 *
 * The jar comes from SLUICE_SQL_JAR (a compile definition or the
 * environment), else sql/compiler/target/ of this source tree.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

#include "sluice/sluice.h"
#include "sluice/sql.h"
#include "pipeline_util.h"
#include "sql_util.h"
#include "test.h"

static unsigned g_seed;

/* The -D arguments and files of tests/data/sql/<q>.sql (or a path). */
static void query_args(const char *q, int64_t events, long tps, char *buf, size_t cap) {
    const char *d = g_src;
    char file[1200];
    if (q[0] == '/') snprintf(file, sizeof file, "%s", q);
    else snprintf(file, sizeof file, "%s/data/sql/%s.sql", d, q);
    snprintf(buf, cap,
             "-D TPS=%ld -D EVENTS_NUM=%lld -D PERSON_PROPORTION=1 -D AUCTION_PROPORTION=3 -D BID_PROPORTION=46 "
             "-D NEXMARK_TABLE=datagen %s/data/sql/nexmark/ddl_gen.sql %s/data/sql/nexmark/ddl_views.sql '%s'",
             tps, (long long)events, d, d, file);
}

/* Event-time spans of 2.5 s to 60 s: windows of 1 to 10 s open and fire many times. */
static const long TPS[] = {500, 1000, 2000, 5000};

/* Whether the plan has a node whose type starts with t. */
static bool plan_has(const char *plan, const char *t) {
    FILE *f = fopen(plan, "r");
    if (!f) return false;
    char line[4096];
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) found = strstr(line, t) != NULL;
    fclose(f);
    return found;
}

/* Runs query q on both engines; node: a node type the plan must contain. */
static bool check_query(const char *q, const char *node) {
    int64_t events = 5000 + rand_r(&g_seed) % 25000;
    long tps = TPS[rand_r(&g_seed) % 4];
    int p = 1 + rand_r(&g_seed) % 3;
    bool rocks = rand_r(&g_seed) % 2;
    char args[4096], ref[700], plan_path[700], out[700];
    query_args(q, events, tps, args, sizeof args);
    snprintf(ref, sizeof ref, "%s/%s.flink", sl_test_tmpdir(), q);
    snprintf(plan_path, sizeof plan_path, "%s/%s.plan.json", sl_test_tmpdir(), q);
    snprintf(out, sizeof out, "%s/%s.sluice", sl_test_tmpdir(), q);
    fprintf(stderr, "  %s: %lld events, rate %ld, parallelism %d%s\n", q, (long long)events, tps, p,
            rocks ? ", RocksDB" : "");
    if (!flink_side(q, args, ref, plan_path)) return false;
    if (!plan_has(plan_path, node)) {
        fprintf(stderr, "%s: the plan has no %s node\n", q, node);
        return false;
    }
    char err[2048];
    sl_sql_plan_t *plan = sl_sql_plan_load(plan_path, err, sizeof err);
    if (!plan) {
        fprintf(stderr, "%s: %s\n", q, err);
        return false;
    }
    remove(out);
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, p);
    if (rocks) sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);
    sl_sql_opts_t o = sl_sql_opts_default();
    o.collect_path = out;
    int rc = sl_sql_plan_build(env, plan, &o);
    sl_sql_plan_free(plan);
    if (rc == 0) rc = sl_env_execute(env, q);
    if (rc < 0) fprintf(stderr, "%s: %s\n", q, sl_env_error(env));
    sl_env_destroy(env);
    if (rc < 0) return false;
    lines_t a = {0}, b = {0};
    bool ok = read_lines(out, &a) && read_lines(ref, &b) && b.n > 0 && same_lines(q, &a, &b);
    if (ok) fprintf(stderr, "  %s: %zu rows equal\n", q, a.n);
    lines_free(&a);
    lines_free(&b);
    return ok;
}

TEST(jar_present) {
    struct stat st;
    if (stat(g_jar, &st) != 0) fprintf(stderr, "the SQL compiler jar %s is missing: build it with scripts/build.sh\n", g_jar);
    CHECK(stat(g_jar, &st) == 0);
}

/* TUMBLE by auction: COUNT, SUM, MIN, MAX, AVG (two phases). */
TEST(tvf_tumble_keyed) { CHECK(check_query("win_tumble", "stream-exec-global-window-aggregate")); }
/* HOP with a filter, keyed by a string, COUNT DISTINCT, window_time (two phases). */
TEST(tvf_hop_filter_distinct) { CHECK(check_query("win_hop", "stream-exec-global-window-aggregate")); }
/* CUMULATE without keys (a SINGLETON exchange), COUNT DISTINCT. */
TEST(tvf_cumulate_global) { CHECK(check_query("win_cumulate", "stream-exec-global-window-aggregate")); }
/* TUMBLE planned in one phase (stream-exec-window-aggregate), no keys, a filter. */
TEST(tvf_tumble_one_phase) { CHECK(check_query("win_one_phase", "stream-exec-window-aggregate_1")); }
/* An aggregate over a window aggregate's rows (q5's MaxBids: windowing strategy WindowAttached). */
TEST(tvf_aggregate_over_windows) { CHECK(check_query("win_attached", "\"WindowAttached\"")); }
/* Legacy GROUP BY TUMBLE(...) and HOP(...) with _START/_END/_ROWTIME, in one statement set. */
TEST(legacy_group_windows) { CHECK(check_query("win_legacy", "stream-exec-group-window-aggregate")); }

/* ---- checkpoint, failure, restore at another parallelism ---- */


/* win_tumble.sql (TUMBLE by auction, two phases): run 1 checkpoints and fails after a committed
 * checkpoint, run 2 restores from it at another parallelism; the committed rows equal Flink's.
 * Enough events that the source runs for a while: windows fire (and rows reach the sink) while
 * it runs, so a checkpoint commits rows before the failure. */
TEST(window_restore_other_parallelism) {
    /* 70-90 s of event time: seven to nine windows fire, so rows still reach the sink after the
     * first checkpoint that committed rows (with three windows, a loaded machine once committed the
     * first rows only when all but the last few had been written, and nothing failed) */
    int64_t events = 700000 + rand_r(&g_seed) % 200000;
    int p1 = 1 + rand_r(&g_seed) % 3, p2 = 1 + (p1 + rand_r(&g_seed) % 2) % 3;
    bool rocks = rand_r(&g_seed) % 2;
    char args[4096], ref[700], plan_path[700], ck[700];
    /* after a restore at a lower parallelism one watermark assigner follows the splits of
     * several old subtasks, checkpointed at somewhat different positions; the watermark delay (4 s
     * of event time: 40000 events at this rate) covers that, as Flink's rules would drop records
     * behind the watermark.  (With 4 splits over 3 subtasks the lone splits run twice as fast as
     * the paired ones, seconds of event time apart by the failure.) */
    query_args("win_tumble", events, 10000, args, sizeof args);
    snprintf(ref, sizeof ref, "%s/restore.flink", sl_test_tmpdir());
    snprintf(plan_path, sizeof plan_path, "%s/restore.plan.json", sl_test_tmpdir());
    snprintf(ck, sizeof ck, "%s/restore-ck", sl_test_tmpdir());
    fprintf(stderr, "  %lld events, parallelism %d then %d%s\n", (long long)events, p1, p2, rocks ? ", RocksDB" : "");
    CHECK(flink_side("win_tumble", args, ref, plan_path));
    char err[2048];
    sl_sql_plan_t *plan = sl_sql_plan_load(plan_path, err, sizeof err);
    if (!plan) fprintf(stderr, "%s\n", err);
    CHECK(plan != NULL);
    restore_arm();
    int rc1 = run_restore_attempt(plan, "sql-window-restore", 6, p1, ck, false, rocks);
    fprintf(stderr, "  run 1: rc %d, %lld commits, %lld rows committed\n", rc1, (long long)g_txn->commits,
            (long long)g_txn->out->n);
    CHECK(rc1 != 0); /* the injected failure */
    CHECK(!atomic_load(&g_armed));
    CHECK(g_txn->commits > 0);
    int64_t before = g_txn->out->n;
    CHECK(before > 0);
    int rc2 = run_restore_attempt(plan, "sql-window-restore", 6, p2, ck, true, rocks);
    CHECK_EQ(rc2, 0);
    fprintf(stderr, "  committed %lld rows before the failure, %lld in all\n", (long long)before,
            (long long)g_txn->out->n);
    sl_schema_t *sc = g_sink_schema;
    g_sink_schema = NULL;
    CHECK(sc != NULL);
    CHECK_EQ(sl_schema_field_count(sc), 8);
    lines_t a = {0}, b = {0};
    committed_lines(g_txn->out, sc, &a);
    char outp[800]; /* kept for a look when they differ */
    snprintf(outp, sizeof outp, "%s/restore.sluice", sl_test_tmpdir());
    FILE *of = fopen(outp, "w");
    for (size_t i = 0; of && i < a.n; i++) fprintf(of, "%s\n", a.v[i]);
    if (of) fclose(of);
    bool ok = read_lines(ref, &b) && b.n > 0 && same_lines("restore", &a, &b);
    if (ok) fprintf(stderr, "  %zu rows equal\n", a.n);
    lines_free(&a);
    lines_free(&b);
    sl_schema_unref(sc);
    sl_sql_plan_free(plan);
    txn_collected_free(g_txn);
    CHECK(ok);
}

/* ---- refused by name ---- */

/* Compiles `body` (after two blank lines: the INSERT is at line 3 of its file) and checks that
 * loading the plan fails naming `node`, `what` and the statement's line. */
static bool refused(const char *name, const char *body, const char *node, const char *what) {
    char sql[700], plan[700], args[4096], cmd[9000], err[2048], line[800];
    snprintf(sql, sizeof sql, "%s/%s.sql", sl_test_tmpdir(), name);
    snprintf(plan, sizeof plan, "%s/%s.plan.json", sl_test_tmpdir(), name);
    FILE *f = fopen(sql, "w");
    if (!f) return false;
    fprintf(f, "%s", body);
    fclose(f);
    query_args(sql, 1000, 1000, args, sizeof args);
    snprintf(cmd, sizeof cmd, "java -jar '%s' compile -o '%s' %s", g_jar, plan, args);
    if (system(cmd) != 0) {
        fprintf(stderr, "%s: compiling failed: %s\n", name, cmd);
        return false;
    }
    sl_sql_plan_t *p = sl_sql_plan_load(plan, err, sizeof err);
    if (p) {
        fprintf(stderr, "%s: the plan was accepted\n", name);
        sl_sql_plan_free(p);
        return false;
    }
    fprintf(stderr, "  %s: %s\n", name, err);
    const char *nl = strstr(body, "INSERT");
    int ln = 1;
    for (const char *c = body; c < nl; c++) ln += *c == '\n';
    snprintf(line, sizeof line, "%s.sql:%d", name, ln);
    bool ok = strstr(err, node) && strstr(err, what) && strstr(err, "not supported") && strstr(err, line);
    if (!ok) fprintf(stderr, "%s: the message lacks '%s', '%s' or '%s'\n", name, node, what, line);
    return ok;
}

#define SINK2 "CREATE TABLE s (a BIGINT, b TIMESTAMP(3)) WITH ('connector' = 'blackhole');\n"

TEST(unsupported_refused_by_name) {
    CHECK(refused("offset",
                  SINK2 "\nINSERT INTO s SELECT COUNT(*), window_start FROM TABLE(TUMBLE(TABLE bid, "
                        "DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND, INTERVAL '1' SECOND))\n"
                        "GROUP BY window_start, window_end;\n",
                  "window-aggregate", "offset"));
    CHECK(refused("early_fire",
                  "SET 'table.exec.emit.early-fire.enabled' = 'true';\nSET 'table.exec.emit.early-fire.delay' = '1 s';\n"
                  SINK2 "INSERT INTO s SELECT COUNT(*), TUMBLE_START(`dateTime`, INTERVAL '10' SECOND) FROM bid\n"
                        "GROUP BY TUMBLE(`dateTime`, INTERVAL '10' SECOND);\n",
                  "stream-exec-group-window-aggregate", "early delay"));
    CHECK(refused("proctime",
                  "CREATE VIEW bp AS SELECT *, PROCTIME() AS pt FROM bid;\n" SINK2
                  "INSERT INTO s SELECT COUNT(*), window_start FROM TABLE(TUMBLE(TABLE bp, DESCRIPTOR(pt), "
                  "INTERVAL '10' SECOND))\nGROUP BY window_start, window_end;\n",
                  "stream-exec-calc", "TIMESTAMP_WITH_LOCAL_TIME_ZONE")); /* PROCTIME() itself, before the window
                                                                           (test_sql_plan: isRowtime false) */
    CHECK(refused("session_tvf",
                  SINK2 "\nINSERT INTO s SELECT COUNT(*), window_start FROM TABLE(SESSION(TABLE bid PARTITION BY bidder, "
                        "DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))\nGROUP BY bidder, window_start, window_end;\n",
                  "window-aggregate", "SESSION"));
    CHECK(refused("first_value",
                  SINK2 "\nINSERT INTO s SELECT FIRST_VALUE(price), window_start FROM TABLE(TUMBLE(TABLE "
                        "bid, DESCRIPTOR(`dateTime`), INTERVAL '10' SECOND))\nGROUP BY window_start, window_end;\n",
                  "window-aggregate", "aggregate function"));
}

int main(void) {
    paths_init();
    g_seed = (unsigned)time(NULL);
    const char *s = getenv("SLUICE_TEST_SEED");
    if (s) g_seed = (unsigned)strtoul(s, NULL, 10);
    fprintf(stderr, "seed %u (SLUICE_TEST_SEED to repeat)\n", g_seed);
    RUN(jar_present);
    if (sl_test_failures) TEST_MAIN_END();
    /* "restore" / "refused": that test alone; "win_hop" etc.: that query alone */
    const char *only = getenv("SLUICE_SQL_WINDOW_ONLY");
    if (only && !strcmp(only, "restore")) {
        RUN(window_restore_other_parallelism);
        TEST_MAIN_END();
    }
    if (only && !strcmp(only, "refused")) {
        RUN(unsupported_refused_by_name);
        TEST_MAIN_END();
    }
    if (only && !strncmp(only, "win_", 4)) { /* one query file: tests/data/sql/<only>.sql */
        bool ok = check_query(only, "window-aggregate");
        fprintf(stderr, "%s %s\n", ok ? "ok  " : "FAIL", only);
        return ok ? 0 : 1;
    }
    /* Each query costs two JVM runs (Flink's reference run and the
     * compile): by default two of the six, drawn by the seed (CI);
     * SLUICE_SQL_WINDOW_ALL=1 runs all of them (the README's soak). */
    struct {
        const char *name;
        void (*fn)(void);
    } qs[] = {{"tvf_tumble_keyed", tvf_tumble_keyed},         {"tvf_hop_filter_distinct", tvf_hop_filter_distinct},
              {"tvf_cumulate_global", tvf_cumulate_global},   {"tvf_tumble_one_phase", tvf_tumble_one_phase},
              {"tvf_aggregate_over_windows", tvf_aggregate_over_windows}, {"legacy_group_windows", legacy_group_windows}};
    int nq = (int)(sizeof qs / sizeof qs[0]);
    bool all = getenv("SLUICE_SQL_WINDOW_ALL") && atoi(getenv("SLUICE_SQL_WINDOW_ALL"));
    int first = (int)(rand_r(&g_seed) % (unsigned)nq), second = (first + 1 + (int)(rand_r(&g_seed) % (unsigned)(nq - 1))) % nq;
    for (int i = 0; i < nq; i++) {
        if (!all && i != first && i != second) continue;
        int before = sl_test_failures;
        sl_test_current = qs[i].name;
        qs[i].fn();
        fprintf(stderr, "%s %s\n", sl_test_failures == before ? "ok  " : "FAIL", qs[i].name);
    }
    RUN(window_restore_other_parallelism);
    RUN(unsupported_refused_by_name);
    TEST_MAIN_END();
}
