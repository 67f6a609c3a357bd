/*
 * test_sql_nexmark.c — the official Nexmark SQL queries (nexmark-flink's
 * q0, q1, q2, q21, q22 and its ddl_gen.sql / ddl_views.sql, unchanged, in
 * tests/data/sql/nexmark/) through sluice's SQL path: Flink's planner
 * compiles them (sql/compiler's jar), sluice runs the plan, and the rows
 * equal Flink's own run of the same SQL over the same events (the jar's
 * `run`: a MiniCluster, the shared Java port of the generator), compared as
 * multisets of canonical lines; the same for UNION ALL (union_all.sql).
 * Event counts, rates and parallelism are
 * drawn at random.  Also the CLI: `sluice sql -f`, `sluice sql --compile`
 * + `sluice run PLAN.json`, syntax and validation errors reported with the
 * file and line (Flink's "line L, column C" made positions in the file),
 * and a missing jar reported by name.
 *
 * The jar comes from SLUICE_SQL_JAR (a compile definition or the
 * environment), else sql/compiler/target/ of this source tree.
 */
#include <errno.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>

#include "sluice/sluice.h"
#include "sluice/sql.h"
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

static bool exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

typedef struct lines {
    char **v;
    size_t n, cap;
} lines_t;

static void lines_free(lines_t *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Reads the file's lines, sorted. */
static bool read_lines(const char *path, lines_t *l) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    char *line = NULL;
    size_t cap = 0;
    ssize_t n;
    while ((n = getline(&line, &cap, f)) >= 0) {
        if (n > 0 && line[n - 1] == '\n') line[--n] = 0;
        if (l->n == l->cap) {
            l->cap = l->cap ? 2 * l->cap : 1024;
            l->v = realloc(l->v, l->cap * sizeof *l->v);
        }
        l->v[l->n++] = strdup(line);
    }
    free(line);
    fclose(f);
    qsort(l->v, l->n, sizeof *l->v, cmp_str);
    return true;
}

/* Multisets equal; prints the first difference. */
static bool same_lines(const char *what, lines_t *a, lines_t *b) {
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

/* The -D arguments and files of query q (tests/data/sql/nexmark/q.sql, or tests/data/sql/q.sql). */
static void query_args(const char *q, int64_t events, long tps, char *buf, size_t cap) {
    bool ours = q[0] != 'q';
    const char *d = g_src;
    snprintf(buf, cap,
             "-D TPS=%ld -D EVENTS_NUM=%lld -D PERSON_PROPORTION=1 -D AUCTION_PROPORTION=3 -D BID_PROPORTION=46 "
             "-D NEXMARK_TABLE=datagen %s/data/sql/nexmark/ddl_gen.sql %s/data/sql/nexmark/ddl_views.sql "
             "%s/data/sql/%s%s.sql",
             tps, (long long)events, d, d, d, ours ? "" : "nexmark/", q);
}

static const long TPS[] = {1000, 37000, 10000000};

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

static bool check_query(const char *q) {
    int64_t events = 2000 + rand_r(&g_seed) % 28000;
    long tps = TPS[rand_r(&g_seed) % 3];
    int p = 1 + rand_r(&g_seed) % 3;
    char args[4096], ref[700], plan_path[700], out[700];
    query_args(q, events, tps, args, sizeof args);
    snprintf(ref, sizeof ref, "%s/%s.flink", sl_test_tmpdir(), q);
    snprintf(plan_path, sizeof plan_path, "%s/%s.plan.json", sl_test_tmpdir(), q);
    snprintf(out, sizeof out, "%s/%s.sluice", sl_test_tmpdir(), q);
    fprintf(stderr, "  %s: %lld events, rate %ld, parallelism %d\n", q, (long long)events, tps, p);
    if (!flink_side(q, args, ref, plan_path)) return false;
    char err[2048];
    sl_sql_plan_t *plan = sl_sql_plan_load(plan_path, err, sizeof err);
    if (!plan) {
        fprintf(stderr, "%s: %s\n", q, err);
        return false;
    }
    remove(out);
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, p);
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
    if (!exists(g_jar)) fprintf(stderr, "the SQL compiler jar %s is missing: build it with scripts/build.sh\n", g_jar);
    CHECK(exists(g_jar));
}

TEST(q0_passthrough) { CHECK(check_query("q0")); }
TEST(q1_currency) { CHECK(check_query("q1")); }
TEST(q2_selection) { CHECK(check_query("q2")); }
TEST(q21_channel_id) { CHECK(check_query("q21")); }
TEST(q22_url_dirs) { CHECK(check_query("q22")); }
/* UNION ALL of two branches named differently (tests/data/sql/union_all.sql). */
TEST(union_all) { CHECK(check_query("union_all")); }
/* EXECUTE STATEMENT SET with a SET: one plan, two sinks (tests/data/sql/statement_set.sql). */
TEST(statement_set) { CHECK(check_query("statement_set")); }

/* `sluice sql -f` (compile + run) and `sluice sql --compile` + `sluice run PLAN.json`. */
TEST(cli_sql_and_run_plan) {
    char args[4096], ref[700], plan[700], out1[700], out2[700], cmd[9000];
    query_args("q21", 5000, 1000, args, sizeof args);
    snprintf(ref, sizeof ref, "%s/cli.flink", sl_test_tmpdir());
    snprintf(plan, sizeof plan, "%s/cli.plan.json", sl_test_tmpdir());
    snprintf(out1, sizeof out1, "%s/cli1.sluice", sl_test_tmpdir());
    snprintf(out2, sizeof out2, "%s/cli2.sluice", sl_test_tmpdir());
    snprintf(cmd, sizeof cmd, "java -jar '%s' run %s > '%s'", g_jar, args, ref);
    CHECK_EQ(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "SLUICE_SQL_JAR='%s' '%s' sql -f %s -p 2 --collect '%s'", g_jar, SLUICE_BIN, args, out1);
    CHECK_EQ(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "SLUICE_SQL_JAR='%s' '%s' sql --compile %s -o '%s'", g_jar, SLUICE_BIN, args, plan);
    CHECK_EQ(system(cmd), 0);
    /* no JVM here: PATH without java */
    snprintf(cmd, sizeof cmd, "PATH=/nonexistent '%s' run '%s' -p 3 --collect '%s'", SLUICE_BIN, plan, out2);
    CHECK_EQ(system(cmd), 0);
    lines_t r = {0}, a = {0}, b = {0};
    bool ok = read_lines(ref, &r) && read_lines(out1, &a) && read_lines(out2, &b) && r.n > 0 &&
              same_lines("sql -f", &a, &r) && same_lines("run plan", &b, &r);
    lines_free(&r);
    lines_free(&a);
    lines_free(&b);
    CHECK(ok);
}

static bool read_file(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, cap - 1, f);
    buf[n] = 0;
    fclose(f);
    return true;
}

/* Flink's 'print' connector: sluice prints the same lines as Flink (parallelism 1: no subtask prefix). */
TEST(print_sink_like_flink) {
    char args[4096], flink[700], plan[700], out[700], cmd[9000];
    int64_t events = 1000 + rand_r(&g_seed) % 9000;
    snprintf(args, sizeof args,
             "-D TPS=%ld -D EVENTS_NUM=%lld -D PERSON_PROPORTION=1 -D AUCTION_PROPORTION=3 -D BID_PROPORTION=46 "
             "-D NEXMARK_TABLE=datagen %s/data/sql/nexmark/ddl_gen.sql %s/data/sql/nexmark/ddl_views.sql "
             "%s/data/sql/print_sink.sql",
             TPS[rand_r(&g_seed) % 3], (long long)events, g_src, g_src, g_src);
    snprintf(flink, sizeof flink, "%s/print.flink", sl_test_tmpdir());
    snprintf(plan, sizeof plan, "%s/print.plan.json", sl_test_tmpdir());
    snprintf(out, sizeof out, "%s/print.sluice", sl_test_tmpdir());
    snprintf(cmd, sizeof cmd, "java -jar '%s' run --flink-sinks %s > '%s'", g_jar, args, flink);
    CHECK_EQ(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "java -jar '%s' compile -o '%s' %s", g_jar, plan, args);
    CHECK_EQ(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "'%s' run '%s' -p 1 > '%s'", SLUICE_BIN, plan, out);
    CHECK_EQ(system(cmd), 0);
    lines_t a = {0}, b = {0};
    bool ok = read_lines(out, &a) && read_lines(flink, &b) && b.n > 0 && same_lines("print", &a, &b);
    if (ok) fprintf(stderr, "  %zu printed lines equal\n", a.n);
    lines_free(&a);
    lines_free(&b);
    CHECK(ok);
}

/* A syntax error names the file and the statement's line; a missing jar is named;
 * a sink connector sluice does not run yet is refused with the statement's line. */
TEST(cli_errors_named) {
    char sql[700], plan[700], errf[700], cmd[4096], msg[8192];
    snprintf(sql, sizeof sql, "%s/bad.sql", sl_test_tmpdir());
    snprintf(plan, sizeof plan, "%s/bad.plan.json", sl_test_tmpdir());
    snprintf(errf, sizeof errf, "%s/bad.err", sl_test_tmpdir());
    FILE *f = fopen(sql, "w");
    CHECK(f != NULL);
    fprintf(f, "-- a comment\nCREATE TABLE t (a BIGINT) WITH ('connector' = 'blackhole');\n\n"
               "INSERT INTO t\nSELEC 1;\n");
    fclose(f);
    snprintf(cmd, sizeof cmd, "SLUICE_SQL_JAR='%s' '%s' sql --compile '%s' -o '%s' 2> '%s'", g_jar, SLUICE_BIN, sql, plan,
             errf);
    CHECK(system(cmd) != 0);
    CHECK(read_file(errf, msg, sizeof msg));
    CHECK_CONTAINS(msg, "bad.sql:4");
    /* an unknown column: Flink's position, made a position in the file */
    f = fopen(sql, "w");
    CHECK(f != NULL);
    fprintf(f, "CREATE TABLE t (a BIGINT) WITH ('connector' = 'blackhole');\n-- c\n\nINSERT INTO t\nSELECT nosuch FROM t;\n");
    fclose(f);
    snprintf(cmd, sizeof cmd, "SLUICE_SQL_JAR='%s' '%s' sql --compile '%s' -o '%s' 2> '%s'", g_jar, SLUICE_BIN, sql, plan,
             errf);
    CHECK(system(cmd) != 0);
    CHECK(read_file(errf, msg, sizeof msg));
    CHECK_CONTAINS(msg, "bad.sql:4");
    CHECK_CONTAINS(msg, "line 5, column 8");
    CHECK_CONTAINS(msg, "nosuch");
    snprintf(cmd, sizeof cmd, "SLUICE_SQL_JAR=/nonexistent/x.jar '%s' sql --compile '%s' -o '%s' 2> '%s'", SLUICE_BIN,
             sql, plan, errf);
    CHECK(system(cmd) != 0);
    CHECK(read_file(errf, msg, sizeof msg));
    CHECK_CONTAINS(msg, "sluice-sql-compiler.jar");
    CHECK_CONTAINS(msg, "not found");
    f = fopen(sql, "w");
    CHECK(f != NULL);
    fprintf(f, "CREATE TABLE t (a BIGINT) WITH ('connector' = 'filesystem', 'path' = '%s/fs', 'format' = 'csv');\n"
               "\nINSERT INTO t SELECT auction FROM bid;\n", sl_test_tmpdir());
    fclose(f);
    char cmd2[9000]; /* the official DDL and views, then this INSERT */
    snprintf(cmd2, sizeof cmd2,
             "SLUICE_SQL_JAR='%s' '%s' sql -f -D TPS=1000 -D EVENTS_NUM=100 -D PERSON_PROPORTION=1 "
             "-D AUCTION_PROPORTION=3 -D BID_PROPORTION=46 -D NEXMARK_TABLE=datagen %s/data/sql/nexmark/ddl_gen.sql "
             "%s/data/sql/nexmark/ddl_views.sql '%s' 2> '%s'",
             g_jar, SLUICE_BIN, g_src, g_src, sql, errf);
    CHECK(system(cmd2) != 0);
    CHECK(read_file(errf, msg, sizeof msg));
    CHECK_CONTAINS(msg, "sink connector 'filesystem' is not supported yet");
    CHECK_CONTAINS(msg, "bad.sql:3");
}

int main(void) {
    paths_init();
    g_seed = (unsigned)time(NULL);
    const char *s = getenv("SLUICE_TEST_SEED");
    if (s) g_seed = (unsigned)strtoul(s, NULL, 10);
    fprintf(stderr, "seed %u (SLUICE_TEST_SEED to repeat)\n", g_seed);
    RUN(jar_present);
    if (sl_test_failures) TEST_MAIN_END();
    RUN(q0_passthrough);
    RUN(q1_currency);
    RUN(q2_selection);
    RUN(q21_channel_id);
    RUN(q22_url_dirs);
    RUN(union_all);
    RUN(statement_set);
    RUN(cli_sql_and_run_plan);
    RUN(print_sink_like_flink);
    RUN(cli_errors_named);
    TEST_MAIN_END();
}
