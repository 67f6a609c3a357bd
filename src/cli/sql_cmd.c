/*
 * sql_cmd.c — `sluice sql` and `sluice run PLAN.json`: Flink SQL through
 * Flink's compiled plans (include/sluice/sql.h).
 *
 *   sluice sql --compile FILE.sql... -o PLAN.json [-D NAME=VALUE]...
 *       runs sql/compiler's jar (Flink's planner, in a JVM) on the script(s)
 *       and writes the compiled plan;
 *   sluice sql -f FILE.sql... [-D NAME=VALUE]... [run options]
 *       compiles, then runs the plan embedded;
 *   sluice run PLAN.json [run options]
 *       runs a compiled plan, with no JVM.
 * Run options: -p N (parallelism), --collect FILE (every sink's rows in the
 * canonical text form instead, for comparisons), --events N (override every
 * nexmark table's 'events.num').
 *
 * The jar is found at $SLUICE_SQL_JAR, else the build's SLUICE_SQL_JAR_PATH,
 * else next to the executable (../sql/compiler/target/, ../share/sluice/).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "sluice/sluice.h"
#include "sluice/sql.h"

int sl_sql_cli_main(int argc, char **argv);
int sl_sql_cli_run_plan(int argc, char **argv);
int sl_sql_cli_is_plan(const char *arg);

static const char *JAR_NAME = "sluice-sql-compiler.jar";

static bool file_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISREG(st.st_mode);
}

/* Finds the compiler jar; writes where it looked into tried on failure. */
static bool find_jar(char *out, size_t cap, char *tried, size_t tcap) {
    const char *env = getenv("SLUICE_SQL_JAR");
    tried[0] = 0;
    if (env && *env) {
        snprintf(out, cap, "%s", env);
        if (file_exists(out)) return true;
        snprintf(tried, tcap, "$SLUICE_SQL_JAR=%s", env);
        return false;
    }
#ifdef SLUICE_SQL_JAR_PATH
    snprintf(out, cap, "%s", SLUICE_SQL_JAR_PATH);
    if (file_exists(out)) return true;
    snprintf(tried + strlen(tried), tcap - strlen(tried), "%s, ", out);
#endif
    char exe[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    if (n > 0) {
        exe[n] = 0;
        char *slash = strrchr(exe, '/');
        if (slash) *slash = 0;
        const char *rel[] = {"../sql/compiler/target", "../share/sluice", "."};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            int k = snprintf(out, cap, "%s/%s/%s", exe, rel[i], JAR_NAME);
            if (k > 0 && (size_t)k < cap && file_exists(out)) return true;
            size_t l = strlen(tried);
            snprintf(tried + l, tcap - l, "%s%s", out, i + 1 < sizeof rel / sizeof rel[0] ? ", " : "");
        }
    }
    return false;
}

/* Runs java -jar JAR compile -o plan [-D ...] files...; 0 or 1 with a message. */
static int run_compiler(char **files, int nfiles, char **defs, int ndefs, const char *plan_out) {
    char jar[PATH_MAX], tried[4 * PATH_MAX];
    if (!find_jar(jar, sizeof jar, tried, sizeof tried)) {
        fprintf(stderr,
                "sluice sql: the SQL compiler jar (%s) was not found (looked at %s); build it with "
                "scripts/build.sh (needs Maven and a JDK) or set SLUICE_SQL_JAR\n",
                JAR_NAME, tried);
        return 1;
    }
    const char *java = getenv("JAVA") ? getenv("JAVA") : "java";
    int argc = 0;
    char **av = calloc((size_t)(8 + nfiles + 2 * ndefs), sizeof *av);
    av[argc++] = (char *)java;
    av[argc++] = "-jar";
    av[argc++] = jar;
    av[argc++] = "compile";
    av[argc++] = "-o";
    av[argc++] = (char *)plan_out;
    for (int i = 0; i < ndefs; i++) {
        av[argc++] = "-D";
        av[argc++] = defs[i];
    }
    for (int i = 0; i < nfiles; i++) av[argc++] = files[i];
    av[argc] = NULL;
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "sluice sql: fork: %s\n", strerror(errno));
        free(av);
        return 1;
    }
    if (pid == 0) {
        execvp(java, av);
        fprintf(stderr, "sluice sql: cannot run %s (%s): the SQL compiler needs a Java 17+ runtime (set JAVA or PATH)\n",
                java, strerror(errno));
        _exit(127);
    }
    free(av);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    if (!(WIFEXITED(st) && WEXITSTATUS(st) == 127)) fprintf(stderr, "sluice sql: compiling failed\n");
    return 1;
}

typedef struct run_opts {
    int parallelism;
    const char *collect;
    int64_t events;
} run_opts_t;

/* Parses one run option at argv[*i]; 1 if it was one, 0 if not, -1 on error. */
static int run_opt(int argc, char **argv, int *i, run_opts_t *o) {
    const char *a = argv[*i];
    bool has = *i + 1 < argc;
    if (!strcmp(a, "-p") || !strcmp(a, "--parallelism")) {
        if (!has) return -1;
        o->parallelism = atoi(argv[++*i]);
        return o->parallelism >= 1 ? 1 : -1;
    }
    if (!strcmp(a, "--collect")) {
        if (!has) return -1;
        o->collect = argv[++*i];
        return 1;
    }
    if (!strcmp(a, "--events")) {
        if (!has) return -1;
        char *end;
        o->events = strtoll(argv[++*i], &end, 10);
        return *end || o->events < 0 ? -1 : 1;
    }
    return 0;
}

static int run_plan_file(const char *path, const run_opts_t *o) {
    char err[2048];
    sl_sql_plan_t *plan = sl_sql_plan_load(path, err, sizeof err);
    if (!plan) {
        fprintf(stderr, "sluice: %s\n", err);
        return 1;
    }
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, o->parallelism);
    sl_sql_opts_t so = sl_sql_opts_default();
    so.collect_path = o->collect;
    so.nexmark_events = o->events;
    if (o->collect) {
        FILE *f = fopen(o->collect, "w"); /* start empty: the sinks append */
        if (!f) {
            fprintf(stderr, "sluice: %s: %s\n", o->collect, strerror(errno));
            sl_sql_plan_free(plan);
            sl_env_destroy(env);
            return 1;
        }
        fclose(f);
    }
    int rc = sl_sql_plan_build(env, plan, &so);
    sl_sql_plan_free(plan);
    if (rc == 0) rc = sl_env_execute(env, path);
    if (rc < 0) fprintf(stderr, "sluice: %s\n", sl_env_error(env));
    sl_env_destroy(env);
    return rc < 0 ? 1 : 0;
}

static void sql_usage(FILE *f) {
    fprintf(f, "usage: sluice sql --compile FILE.sql... -o PLAN.json [-D NAME=VALUE]...\n"
               "       sluice sql -f FILE.sql... [-D NAME=VALUE]... [-p N] [--collect FILE] [--events N]\n"
               "       sluice run PLAN.json [-p N] [--collect FILE] [--events N]\n"
               "Flink SQL, compiled by Flink's planner (a JVM, only while compiling) into a plan\n"
               "that sluice runs natively.  -D substitutes ${NAME} in the scripts.\n");
}

int sl_sql_cli_is_plan(const char *arg) {
    size_t n = arg ? strlen(arg) : 0;
    return n > 5 && !strcmp(arg + n - 5, ".json");
}

int sl_sql_cli_run_plan(int argc, char **argv) {
    run_opts_t o = {2, NULL, -1};
    const char *path = NULL;
    for (int i = 0; i < argc; i++) {
        int r = run_opt(argc, argv, &i, &o);
        if (r < 0) {
            fprintf(stderr, "sluice run: bad value for %s\n", argv[i]);
            return 2;
        }
        if (r) continue;
        if (argv[i][0] == '-' || path) {
            fprintf(stderr, "sluice run: unknown argument %s for a plan\n", argv[i]);
            sql_usage(stderr);
            return 2;
        }
        path = argv[i];
    }
    if (!path) {
        sql_usage(stderr);
        return 2;
    }
    return run_plan_file(path, &o);
}

int sl_sql_cli_main(int argc, char **argv) {
    run_opts_t o = {2, NULL, -1};
    bool compile_only = false, run = false;
    const char *out = NULL;
    char **files = calloc((size_t)argc + 1, sizeof *files), **defs = calloc((size_t)argc + 1, sizeof *defs);
    int nfiles = 0, ndefs = 0, rc = 2;
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        int r = run_opt(argc, argv, &i, &o);
        if (r < 0) {
            fprintf(stderr, "sluice sql: bad value for %s\n", a);
            goto done;
        }
        if (r) continue;
        if (!strcmp(a, "--compile")) compile_only = true;
        else if (!strcmp(a, "-f")) run = true;
        else if (!strcmp(a, "-o") && i + 1 < argc) out = argv[++i];
        else if (!strcmp(a, "-D") && i + 1 < argc) defs[ndefs++] = argv[++i];
        else if (!strncmp(a, "-D", 2) && a[2]) defs[ndefs++] = (char *)a + 2;
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            sql_usage(stdout);
            rc = 0;
            goto done;
        } else if (a[0] == '-') {
            fprintf(stderr, "sluice sql: unknown option %s\n", a);
            sql_usage(stderr);
            goto done;
        } else files[nfiles++] = (char *)a;
    }
    if (nfiles == 0 || compile_only == run || (compile_only && !out)) {
        sql_usage(stderr);
        goto done;
    }
    if (compile_only) {
        rc = run_compiler(files, nfiles, defs, ndefs, out);
        goto done;
    }
    char tmpl[] = "/tmp/sluice-sql-plan-XXXXXX.json";
    int fd = mkstemps(tmpl, 5);
    if (fd < 0) {
        fprintf(stderr, "sluice sql: temporary file: %s\n", strerror(errno));
        rc = 1;
        goto done;
    }
    close(fd);
    rc = run_compiler(files, nfiles, defs, ndefs, tmpl);
    if (rc == 0) rc = run_plan_file(tmpl, &o);
    unlink(tmpl);
done:
    free(files);
    free(defs);
    return rc;
}
