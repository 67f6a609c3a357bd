/*
 * sql_util.h — what the Flink SQL tests (test_sql_nexmark.c,
 * test_sql_window.c) share: the paths of the source tree and of
 * sql/compiler's jar, sorted line sets and their comparison, Flink's side
 * of a query (the jar's reference `run` and its `compile`), and the
 * checkpoint / failure / restore harness: a transactional collecting sink
 * that fails once after a checkpoint committed rows, one attempt of a plan
 * into it, and the committed rows as the jar's canonical lines.
 *
 * The jar comes from SLUICE_SQL_JAR (a compile definition or the
 * environment), else sql/compiler/target/ of this source tree.
 */
#ifndef SL_TEST_SQL_UTIL_H
#define SL_TEST_SQL_UTIL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pipeline_util.h"
#include "sluice/sluice.h"
#include "sluice/sql.h"

static char g_src[1024] __attribute__((unused)); /* tests/ of the source tree */
static char g_jar[1200] __attribute__((unused));

static inline void paths_init(void) {
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

static inline void lines_add(lines_t *l, const char *s) {
    if (l->n == l->cap) {
        l->cap = l->cap ? 2 * l->cap : 1024;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
    }
    l->v[l->n++] = strdup(s);
}

static inline void lines_free(lines_t *l) {
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
    memset(l, 0, sizeof *l);
}

static inline int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Reads the file's lines, in order. */
static inline bool read_lines_ordered(const char *path, lines_t *l) {
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
    return true;
}

/* Reads the file's lines, sorted. */
static inline bool read_lines(const char *path, lines_t *l) {
    if (!read_lines_ordered(path, l)) return false;
    qsort(l->v, l->n, sizeof *l->v, cmp_str);
    return true;
}

/* Multisets equal (both are sorted first); prints the first difference. */
static inline bool same_lines(const char *what, lines_t *a, lines_t *b) {
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

/* Flink's rows (reference, into ref) and the compiled plan of query q. */
static inline bool flink_side(const char *q, const char *args, const char *ref, const char *plan) {
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

/* ---- checkpoint, failure, restore at another parallelism ---- */

static txn_collected_t *g_txn __attribute__((unused));
static atomic_int g_armed __attribute__((unused));
static atomic_long g_written __attribute__((unused));
static sl_sink_ops_t g_fail_ops __attribute__((unused));
static sl_schema_t *g_sink_schema __attribute__((unused)); /* the last sink's input schema */

/* The transactional sink's write; armed, it slows down until a completed
 * checkpoint committed rows, then fails once, some rows later. */
static inline int failing_write(void *w, const sl_record_t *rec, char *err, size_t el) {
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

static inline sl_sink_t txn_override(void *ctx, int i, const sl_schema_t *schema) {
    (void)i;
    if (g_sink_schema) sl_schema_unref(g_sink_schema);
    g_sink_schema = sl_schema_ref((sl_schema_t *)schema);
    return (sl_sink_t){&g_fail_ops, ctx};
}

/* The committed rows as the jar's canonical lines ("+I|v|..."; the kind
 * from a trailing "$rowkind" field when there is one, else +I; TIMESTAMP(3)
 * as yyyy-MM-dd HH:mm:ss.SSS, NULL as \N). */
static inline void committed_lines(collected_t *c, const sl_schema_t *sc, lines_t *l) {
    static const char *const K[] = {"+I", "-U", "+U", "-D"};
    int nf = sl_schema_field_count(sc);
    bool kind = nf > 0 && !strcmp(sl_schema_field_name(sc, nf - 1), "$rowkind");
    for (int64_t i = 0; i < c->n; i++) {
        sl_row_t r = collected_row(c, i, sc);
        char buf[4096];
        int k = snprintf(buf, sizeof buf, "%s", kind ? K[sl_row_i32(&r, nf - 1) & 3] : "+I");
        for (int f = 0; f < nf - (kind ? 1 : 0) && k < (int)sizeof buf - 64; f++) {
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

/* One attempt of the plan as job `job` into the failing transactional sink
 * (checkpoints every 20 ms into ck, retained on cancellation, no restart;
 * restored from the job's checkpoints when restore); the nexmark source in
 * `splits` splits. */
static inline int run_restore_attempt(sl_sql_plan_t *plan, const char *job, int splits, int p, const char *ck,
                                      bool restore, bool rocks) {
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, p);
    if (rocks) sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);
    sl_env_enable_checkpointing(env, 20, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, ck);
    sl_env_set_checkpoint_retention(env, SL_CHECKPOINTS_RETAIN_ON_CANCELLATION);
    sl_env_set_restart_none(env);
    char path[1100];
    snprintf(path, sizeof path, "%s/%s", ck, job); /* the job's checkpoints */
    int rc = restore ? sl_env_restore_from(env, path) : 0;
    sl_sql_opts_t o = sl_sql_opts_default();
    o.sink_override = txn_override;
    o.sink_ctx = g_txn;
    o.nexmark_splits = splits;
    if (rc == 0) rc = sl_sql_plan_build(env, plan, &o);
    if (rc == 0) rc = sl_env_execute(env, job);
    if (rc < 0) fprintf(stderr, "  attempt at parallelism %d%s: %s\n", p, restore ? " (restored)" : "", sl_env_error(env));
    sl_env_destroy(env);
    return rc;
}

/* Arms the failing sink over a new transactional collection (g_txn). */
static inline void restore_arm(void) {
    g_txn = txn_collected_new();
    g_fail_ops = txn_collect_ops;
    g_fail_ops.write = failing_write;
    atomic_store(&g_armed, 1);
    atomic_store(&g_written, 0);
}

#endif
