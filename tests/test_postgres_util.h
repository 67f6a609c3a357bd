/*
 * test_postgres_util.h — helpers of the PostgreSQL tests: the server's
 * connection string and small libpq shortcuts.
 *
 * The server: under ctest the `postgres` fixture started one with
 * scripts/postgres.sh and left its connection string in
 * $SLUICE_PG_STATE/conninfo.  Run by hand (./test_postgres_sink), a test
 * starts its own throwaway cluster the same way and stops it at exit.
 * SLUICE_PG_CONNINFO overrides both.
 */
#ifndef SL_TEST_POSTGRES_UTIL_H
#define SL_TEST_POSTGRES_UTIL_H

#include <libpq-fe.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char pgt_conninfo_buf[512];
static char pgt_own_state[600]; /* a cluster this process started */

static void pgt_stop_own(void) {
    if (!pgt_own_state[0]) return;
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "SLUICE_PG_STATE='%s' '%s' stop", pgt_own_state, SLUICE_PG_SCRIPT);
    if (system(cmd) != 0) fprintf(stderr, "could not stop the test's PostgreSQL cluster\n");
    pgt_own_state[0] = 0;
}

static inline bool pgt_read_line(const char *path, char *out, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f) return false;
    bool ok = fgets(out, (int)cap, f) != NULL;
    fclose(f);
    if (ok) out[strcspn(out, "\n")] = 0;
    return ok && out[0];
}

/* Starts a cluster with scripts/postgres.sh in state directory `state`
 * (max_prepared_transactions = maxprep) and returns its connection string
 * in out.  false on failure. */
static inline bool pgt_start_cluster(const char *state, int maxprep, char *out, size_t cap) {
    char cmd[1400], file[800];
    snprintf(cmd, sizeof cmd, "SLUICE_PG_STATE='%s' SLUICE_PG_MAX_PREPARED=%d '%s' start >/dev/null", state, maxprep,
             SLUICE_PG_SCRIPT);
    if (system(cmd) != 0) return false;
    snprintf(file, sizeof file, "%s/conninfo", state);
    return pgt_read_line(file, out, cap);
}

static inline void pgt_stop_cluster(const char *state) {
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "SLUICE_PG_STATE='%s' '%s' stop", state, SLUICE_PG_SCRIPT);
    if (system(cmd) != 0) fprintf(stderr, "could not stop the cluster in %s\n", state);
}

static const char *pgt_conninfo(void) {
    if (pgt_conninfo_buf[0]) return pgt_conninfo_buf;
    const char *env = getenv("SLUICE_PG_CONNINFO");
    if (env && *env) {
        snprintf(pgt_conninfo_buf, sizeof pgt_conninfo_buf, "%s", env);
        return pgt_conninfo_buf;
    }
    const char *state = getenv("SLUICE_PG_STATE");
    char file[700];
    if (state) {
        snprintf(file, sizeof file, "%s/conninfo", state);
        if (pgt_read_line(file, pgt_conninfo_buf, sizeof pgt_conninfo_buf)) return pgt_conninfo_buf;
    }
    snprintf(pgt_own_state, sizeof pgt_own_state, "/tmp/sluice-pgtest.%d", (int)getpid());
    if (!pgt_start_cluster(pgt_own_state, 64, pgt_conninfo_buf, sizeof pgt_conninfo_buf)) {
        fprintf(stderr, "cannot start a PostgreSQL cluster with %s\n", SLUICE_PG_SCRIPT);
        exit(1);
    }
    atexit(pgt_stop_own);
    return pgt_conninfo_buf;
}

static void pgt_quiet(void *arg, const char *msg) {
    (void)arg;
    (void)msg;
}

static PGconn *pgt_connect(void) {
    PGconn *c = PQconnectdb(pgt_conninfo());
    if (PQstatus(c) != CONNECTION_OK) {
        fprintf(stderr, "cannot connect to %s: %s", pgt_conninfo(), PQerrorMessage(c));
        exit(1);
    }
    PQsetNoticeProcessor(c, pgt_quiet, NULL);
    return c;
}

/* Runs a statement; false (with the error printed) when it failed. */
static bool pgt_exec(PGconn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool pgt_exec(PGconn *c, const char *fmt, ...) {
    char sql[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    PGresult *r = PQexec(c, sql);
    ExecStatusType st = PQresultStatus(r);
    bool ok = st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK;
    if (!ok) fprintf(stderr, "  SQL failed: %s: %s", sql, PQresultErrorMessage(r));
    PQclear(r);
    return ok;
}

/* The first column of the first row as a number; -1 on error, -2 on no row. */
static long long pgt_scalar(PGconn *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static long long pgt_scalar(PGconn *c, const char *fmt, ...) {
    char sql[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(sql, sizeof sql, fmt, ap);
    va_end(ap);
    PGresult *r = PQexec(c, sql);
    long long v = -1;
    if (PQresultStatus(r) != PGRES_TUPLES_OK)
        fprintf(stderr, "  SQL failed: %s: %s", sql, PQresultErrorMessage(r));
    else if (PQntuples(r) == 0)
        v = -2;
    else
        v = atoll(PQgetvalue(r, 0, 0));
    PQclear(r);
    return v;
}

/* Prepared transactions whose gid starts with prefix. */
static inline long long pgt_prepared(PGconn *c, const char *prefix) {
    return pgt_scalar(c, "SELECT count(*) FROM pg_prepared_xacts WHERE gid LIKE '%s%%'", prefix);
}

/* Rolls back the prepared transactions whose gid starts with prefix (left
 * by an earlier, failed run of a test: they hold locks on its tables). */
static inline void pgt_rollback_prepared(PGconn *c, const char *prefix) {
    char sql[300];
    snprintf(sql, sizeof sql, "SELECT gid FROM pg_prepared_xacts WHERE gid LIKE '%s%%'", prefix);
    PGresult *r = PQexec(c, sql);
    for (int i = 0; PQresultStatus(r) == PGRES_TUPLES_OK && i < PQntuples(r); i++) {
        snprintf(sql, sizeof sql, "ROLLBACK PREPARED '%s'", PQgetvalue(r, i, 0));
        PQclear(PQexec(c, sql));
    }
    PQclear(r);
}

/* Terminates the backends whose application_name matches the LIKE pattern;
 * returns how many. */
static inline long long pgt_terminate(PGconn *c, const char *like) {
    return pgt_scalar(c,
                      "SELECT count(*) FROM (SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE "
                      "application_name LIKE '%s' AND pid <> pg_backend_pid()) t",
                      like);
}

#endif
