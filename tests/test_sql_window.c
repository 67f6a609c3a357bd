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
#include "test.h"

static char g_src[1024]; /* tests/ of the source tree */
static char g_jar[1200];
static unsigned g_seed;

static void paths_init(void) {
    snprintf(g_src, sizeof g_src, "%s", __FILE__);
    char *s = strrchr(g_src, '/');
    if (s) *s = 0;
    else snprintf(g_src, sizeof g_src, ".");
#ifdef SLUICE_SQL_JAR
    snprintf(g_jar, sizeof g_jar, "%s", SLUICE_SQL_JAR);
#else
    const char *e = getenv("SLUICE_SQL_JAR");
    if (e && *e) snprintf(g_jar, sizeof g_jar, "%s", e);
    else snprintf(g_jar, sizeof g_jar, "%s/../sql/compiler/target/sluice-sql-compiler.jar", g_src);
#endif
}

typedef struct lines {
    char **v;
    size_t n, cap;
} lines_t;

static void lines_add(lines_t *l, const char *s) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 1024;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n++] = strdup(s);
}

static void lines_free(lines_t *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The file's lines, sorted. */
static bool read_lines(const char *path, lines_t *l) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) >= 0) {
        if (n > 0 && line[n - 1] == '\n') line[--n] = 0;
        lines_add(l, line);
    }
    free(line);
    fclose(f);
    qsort(l->v, l->n, sizeof *l->v, cmp_str);
    return true;
}

/* Sorted multisets equal; prints the first difference. */
static bool same_lines(const char *what, lines_t *a, lines_t *b) {
    qsort(a->v, a->n, sizeof *a->v, cmp_str);
    qsort(b->v, b->n, sizeof *b->v, cmp_str);
    size_t i = 0, j = 0;
    while (i < a->n && j < b->n) {
        int c = strcmp(a->v[i], b->v[j]);
        if (c == 0) {
            i++;
            j++;
            continue;
        }
        fprintf(stderr, "%s: %s has a row the other lacks: %s\n", what, c < 0 ? "sluice" : "flink",
                c < 0 ? a->v[i] : b->v[j]);
        return false;
    }
    if (i < a->n || j < b->n) {
        fprintf(stderr, "%s: sluice %zu rows, flink %zu rows\n", what, a->n, b->n);
        return false;
    }
    return true;
}

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

/* Flink's rows (reference) and the compiled plan of query q. */
static bool flink_side(const char *q, const char *args, const char *ref, const char *plan) {
    char cmd[8192];
    snprintf(cmd, sizeof cmd, "java -jar '%s' run %s > '%s' 2> '%s.err'", g_jar, args, ref, ref);
    if (system(cmd) != 0) {
        fprintf(stderr, "%s: the reference run failed: %s (see %s.err)\n", q, cmd, ref);
        return false;
    }
    snprintf(cmd, sizeof cmd, "java -jar '%s' compile -o '%s' %s", g_jar, plan, args);
    if (system(cmd) != 0) {
        fprintf(stderr, "%s: compiling failed: %s\n", q, cmd);
        return false;
    }
    return true;
}

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

static txn_collected_t *g_txn;
static atomic_int g_armed;
static atomic_long g_written;
static sl_sink_ops_t g_fail_ops;

/* The transactional sink's write; armed, it slows down until a completed
 * checkpoint committed rows, then fails once, some rows later. */
static int failing_write(void *w, const sl_record_t *rec, char *err, size_t el) {
    if (atomic_load(&g_armed)) {
        pthread_mutex_lock(&g_txn->mu);
        int64_t committed = g_txn->out->n; /* rows delivered by a completed checkpoint */
        pthread_mutex_unlock(&g_txn->mu);
        if (committed == 0) {
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        } else if (atomic_fetch_add(&g_written, 1) >= 200 && atomic_exchange(&g_armed, 0)) {
            snprintf(err, el, "injected failure");
            return SL_EUSER;
        }
    }
    return txn_collect_ops.write(w, rec, err, el);
}

static sl_schema_t *g_sink_schema;

static sl_sink_t txn_override(void *ctx, int i, const sl_schema_t *schema) {
    (void)i;
    if (g_sink_schema) sl_schema_unref(g_sink_schema);
    g_sink_schema = sl_schema_ref((sl_schema_t *)schema);
    return (sl_sink_t){&g_fail_ops, ctx};
}

/* Committed insert-only rows as the jar's canonical lines ("+I|v|...";
 * TIMESTAMP(3) as yyyy-MM-dd HH:mm:ss.SSS, NULL as \N). */
static void committed_lines(collected_t *c, const sl_schema_t *sc, lines_t *l) {
    int nf = sl_schema_field_count(sc);
    for (int64_t i = 0; i < c->n; i++) {
        sl_row_t r = collected_row(c, i, sc);
        char buf[4096];
        int k = snprintf(buf, sizeof buf, "+I");
        for (int f = 0; f < nf && k < (int)sizeof buf - 64; f++) {
            sl_type_t t = sl_schema_field_type(sc, f);
            if (sl_row_is_null(&r, f)) k += snprintf(buf + k, sizeof buf - (size_t)k, "|\\N");
            else if (t == SL_BIGINT) k += snprintf(buf + k, sizeof buf - (size_t)k, "|%lld", (long long)sl_row_i64(&r, f));
            else if (t == SL_INT) k += snprintf(buf + k, sizeof buf - (size_t)k, "|%d", sl_row_i32(&r, f));
            else if (t == SL_TIMESTAMP) {
                int64_t ms = sl_row_i64(&r, f);
                time_t s = (time_t)(ms >= 0 ? ms / 1000 : (ms - 999) / 1000);
                struct tm tm;
                gmtime_r(&s, &tm);
                k += (int)strftime(buf + k, sizeof buf - (size_t)k, "|%Y-%m-%d %H:%M:%S", &tm);
                k += snprintf(buf + k, sizeof buf - (size_t)k, ".%03d", (int)(((ms % 1000) + 1000) % 1000));
            } else {
                uint32_t len;
                const char *str = sl_row_str(&r, f, &len);
                k += snprintf(buf + k, sizeof buf - (size_t)k, "|%.*s", (int)(len > 1000 ? 1000 : len), str);
            }
        }
        lines_add(l, buf);
    }
}

static int run_restore_attempt(sl_sql_plan_t *plan, int p, const char *ck, bool restore, bool rocks) {
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, p);
    if (rocks) sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);
    sl_env_enable_checkpointing(env, 20, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, ck);
    sl_env_set_checkpoint_retention(env, SL_CHECKPOINTS_RETAIN_ON_CANCELLATION);
    sl_env_set_restart_none(env);
    char path[1100];
    snprintf(path, sizeof path, "%s/sql-window-restore", ck); /* the job's checkpoints */
    int rc = restore ? sl_env_restore_from(env, path) : 0;
    sl_sql_opts_t o = sl_sql_opts_default();
    o.sink_override = txn_override;
    o.sink_ctx = g_txn;
    o.nexmark_splits = 6; /* as many per subtask at parallelism 1, 2 and 3: the splits keep step */
    if (rc == 0) rc = sl_sql_plan_build(env, plan, &o);
    if (rc == 0) rc = sl_env_execute(env, "sql-window-restore");
    if (rc < 0) fprintf(stderr, "  attempt at parallelism %d%s: %s\n", p, restore ? " (restored)" : "", sl_env_error(env));
    sl_env_destroy(env);
    return rc;
}

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
    g_txn = txn_collected_new();
    g_fail_ops = txn_collect_ops;
    g_fail_ops.write = failing_write;
    atomic_store(&g_armed, 1);
    atomic_store(&g_written, 0);
    int rc1 = run_restore_attempt(plan, p1, ck, false, rocks);
    fprintf(stderr, "  run 1: rc %d, %lld commits, %lld rows committed\n", rc1, (long long)g_txn->commits,
            (long long)g_txn->out->n);
    CHECK(rc1 != 0); /* the injected failure */
    CHECK(!atomic_load(&g_armed));
    CHECK(g_txn->commits > 0);
    int64_t before = g_txn->out->n;
    CHECK(before > 0);
    int rc2 = run_restore_attempt(plan, p2, ck, true, rocks);
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
