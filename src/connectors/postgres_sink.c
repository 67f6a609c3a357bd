/*
 * postgres_sink.c — the PostgreSQL sink (libpq): exactly-once through two-
 * phase commit on checkpoints, or idempotent upserts (at-least-once).  What
 * users see (modes, gid format, fencing, types) is documented in
 * include/sluice/postgres.h; this comment is about how it works.
 *
 * Sessions.  A writer (one per subtask) has a data session: BEGIN and
 * COPY ... FROM STDIN when its first row of a checkpoint arrives, rows
 * streamed in chunks of batch_bytes, and on the barrier the end of the COPY,
 * the commit-log row and PREPARE TRANSACTION in one round trip.  In
 * exactly-once mode it also has a control session for COMMIT PREPARED and
 * the checks after a restore: when checkpoint n's completion arrives, the
 * data session is usually already inside checkpoint n+1's transaction, and
 * COMMIT PREPARED cannot run in a transaction block.  Both sessions hold
 * the job's shared fencing lock (pg_advisory_lock_shared); recovery takes
 * it exclusively.
 *
 * Failures.  Every step returns 0, PG_RETRY (connection lost, or a
 * transient server error: reconnect and run the step again, at most
 * max_retries times with exponential backoff), or a negative SL_E* code
 * with a message.  A reconnect first waits until the server has ended the
 * lost connection's backend, so a statement that backend was still running
 * (PREPARE, COMMIT PREPARED) has finished and what the new session sees is
 * final.  The data session keeps the COPY text of the open transaction
 * (up to max_replay_bytes): after a reconnect the transaction is begun
 * again and resent; a PREPARE whose answer was lost is looked up in
 * pg_prepared_xacts first.  A COMMIT PREPARED that finds no such
 * transaction is resolved with the commit log (see resolve_missing).
 *
 * Threads: the writer's functions run on its task's thread; recover runs
 * on the thread that starts the job, before any writer opens.
 */
#include <inttypes.h>
#include <libpq-fe.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "sluice/postgres.h"

#define PG_RETRY 1           /* internal: reconnect and try the step again */
#define PG_ID_MAX 63         /* job and operator ids */
#define PG_GID_MAX 200       /* PostgreSQL's limit for a gid */
#define PG_SEND_CHUNK (4u << 20)
#define PG_BACKOFF_MAX_MS 5000

/* ---- the sink's configuration ------------------------------------------ */

typedef struct pg_ctx {
    sl_pg_sink_opts_t o; /* string members point at the copies below */
    char *conninfo, *table, *job, *op, *keys, *commit_table;
    char prefix[PG_ID_MAX * 2 + 8]; /* "sl:<job>:<op>:" */
    int64_t lock_key;               /* fencing advisory lock */
    int64_t restored_id;            /* set by recover: the checkpoint this run resumes from */
    int cfg_rc;                     /* bad options: reported by recover and open */
    char cfg_err[320];
} pg_ctx_t;

/* ---- sessions ----------------------------------------------------------- */

typedef struct pg_session {
    const pg_ctx_t *ctx;
    PGconn *c;
    int pid;      /* backend of c */
    int lost_pid; /* backend of a dropped connection, waited for at reconnect */
    char appname[64];
    /* Runs after every (re)connect: fencing lock, per-session objects. */
    int (*setup)(void *arg, char *err, size_t errlen);
    void *setup_arg;
} pg_session_t;

typedef int (*pg_step_fn)(void *arg, char *err, size_t errlen);

static void quiet_notices(void *arg, const char *msg) { SL_UNUSED(arg); SL_UNUSED(msg); }

static void sleep_ms(int64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {}
}

/* Copies a server or libpq message without its trailing newline. */
static void msg_copy(char *out, size_t cap, const char *m) {
    snprintf(out, cap, "%s", m && *m ? m : "unknown error");
    size_t n = strlen(out);
    while (n && (out[n - 1] == '\n' || out[n - 1] == ' ')) out[--n] = 0;
    for (char *p = out; *p; p++)
        if (*p == '\n' || *p == '\t') *p = ' ';
}

/* What a failed result means: PG_RETRY when a new connection may succeed,
 * else the code to fail with. */
static int classify(PGconn *c, const PGresult *r) {
    if (!c || PQstatus(c) == CONNECTION_BAD) return PG_RETRY;
    const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    if (!st) return PG_RETRY; /* a client-side failure: the connection broke */
    if (!strncmp(st, "08", 2) || !strncmp(st, "57P", 3) || !strncmp(st, "53", 2) || !strcmp(st, "40001") ||
        !strcmp(st, "40P01"))
        return PG_RETRY;
    if (!strncmp(st, "22", 2) || !strncmp(st, "23", 2)) return SL_EFORMAT; /* a value the table refuses */
    if (!strncmp(st, "42", 2) || !strncmp(st, "28", 2) || !strncmp(st, "3D", 2)) return SL_EINVAL;
    return SL_EIO;
}

static const char *sqlstate(const PGresult *r) {
    const char *st = r ? PQresultErrorField(r, PG_DIAG_SQLSTATE) : NULL;
    return st ? st : "";
}

/* Formats "postgres sink: WHAT: <server message> (SQLSTATE x)" into err and
 * returns the classification of the failure. */
static int pg_fail(pg_session_t *s, const PGresult *r, const char *what, char *err, size_t errlen) {
    char m[400];
    msg_copy(m, sizeof m, r && PQresultErrorMessage(r)[0] ? PQresultErrorMessage(r) : PQerrorMessage(s->c));
    int rc = classify(s->c, r);
    const char *st = sqlstate(r);
    sl_errf(err, errlen, rc < 0 ? rc : SL_EIO, "postgres sink: %s: %s%s%s%s", what, m, *st ? " (SQLSTATE " : "", st,
            *st ? ")" : "");
    return rc;
}

/* Runs sql (with text parameters if np > 0) and expects status `want`.
 * Returns 0 and hands the result to *out (or clears it), or the failure. */
static int pg_run(pg_session_t *s, const char *sql, int np, const char *const *pv, ExecStatusType want,
                  PGresult **out, const char *what, char *err, size_t errlen) {
    PGresult *r = np ? PQexecParams(s->c, sql, np, NULL, pv, NULL, NULL, 0) : PQexec(s->c, sql);
    if (!r || PQresultStatus(r) != want) {
        int rc = pg_fail(s, r, what, err, errlen);
        PQclear(r);
        return rc;
    }
    if (out)
        *out = r;
    else
        PQclear(r);
    return 0;
}

/* Closes the connection; its backend is remembered so that the next
 * connect waits until the server has ended it. */
static void session_drop(pg_session_t *s) {
    if (!s->c) return;
    if (s->pid) s->lost_pid = s->pid;
    PQfinish(s->c);
    s->c = NULL;
    s->pid = 0;
}

static void session_close(pg_session_t *s) {
    if (s->c) PQfinish(s->c);
    s->c = NULL;
    s->pid = 0;
}

/* Waits until the backend of a lost connection has exited (it finishes the
 * statement it is running, then notices the closed socket). */
static int wait_backend_gone(pg_session_t *s, char *err, size_t errlen) {
    char pid[16];
    snprintf(pid, sizeof pid, "%d", s->lost_pid);
    const char *pv[] = {pid};
    int64_t deadline = sl_mono_ns() / 1000000 + s->ctx->o.lock_timeout_ms;
    for (;;) {
        PGresult *r = NULL;
        int rc = pg_run(s, "SELECT 1 FROM pg_stat_activity WHERE pid = $1::int", 1, pv, PGRES_TUPLES_OK, &r,
                        "waiting for the backend of a lost connection", err, errlen);
        if (rc) return rc;
        int n = PQntuples(r);
        PQclear(r);
        if (!n) break;
        if (sl_mono_ns() / 1000000 > deadline)
            return sl_errf(err, errlen, SL_EIO,
                           "postgres sink: the server still runs backend %d of a lost connection after %lld ms",
                           s->lost_pid, (long long)s->ctx->o.lock_timeout_ms);
        sleep_ms(5);
    }
    s->lost_pid = 0;
    return 0;
}

static int session_connect(pg_session_t *s, char *err, size_t errlen) {
    session_drop(s);
    /* keywords before dbname are defaults the connection string may
     * override; application_name after it names this session */
    const char *kw[] = {"connect_timeout", "keepalives",  "keepalives_idle", "keepalives_interval",
                        "keepalives_count", "dbname",     "application_name", NULL};
    const char *val[] = {"10", "1", "30", "10", "3", s->ctx->conninfo, s->appname, NULL};
    s->c = PQconnectdbParams(kw, val, 1);
    if (!s->c || PQstatus(s->c) != CONNECTION_OK) {
        char m[400];
        msg_copy(m, sizeof m, s->c ? PQerrorMessage(s->c) : "out of memory");
        sl_errf(err, errlen, SL_EIO, "postgres sink: cannot connect to the server (%s): %s",
                s->c && PQhost(s->c) ? PQhost(s->c) : "?", m);
        if (s->c) PQfinish(s->c);
        s->c = NULL;
        return PG_RETRY;
    }
    PQsetNoticeProcessor(s->c, quiet_notices, NULL);
    s->pid = PQbackendPID(s->c);
    int rc = 0;
    if (s->lost_pid) rc = wait_backend_gone(s, err, errlen);
    if (!rc && s->setup) rc = s->setup(s->setup_arg, err, errlen);
    if (rc == PG_RETRY) session_drop(s);
    return rc;
}

/* Runs step(arg) on session s, reconnecting and running it again after a
 * lost connection or a transient error, at most max_retries times. */
static int with_retries(pg_session_t *s, const char *what, pg_step_fn step, void *arg, char *err, size_t errlen) {
    const sl_pg_sink_opts_t *o = &s->ctx->o;
    int64_t backoff = o->retry_backoff_ms;
    for (int tries = 0;; tries++) {
        int rc = 0;
        if (!s->c || PQstatus(s->c) != CONNECTION_OK) rc = session_connect(s, err, errlen);
        if (rc == 0) {
            rc = step(arg, err, errlen);
            if (rc == PG_RETRY) session_drop(s);
        }
        if (rc != PG_RETRY) return rc;
        if (tries >= o->max_retries) {
            char last[400];
            snprintf(last, sizeof last, "%s", err);
            return sl_errf(err, errlen, SL_EIO, "%s (%s: gave up after %d reconnect%s)", last, what, tries,
                           tries == 1 ? "" : "s");
        }
        sleep_ms(backoff);
        backoff = SL_MIN(backoff * 2, PG_BACKOFF_MAX_MS);
    }
}

/* Takes the job's fencing lock on s (shared for writers, exclusive for
 * recovery), waiting at most lock_timeout_ms. */
static int fence_lock(pg_session_t *s, bool exclusive, char *err, size_t errlen) {
    char sql[200];
    snprintf(sql, sizeof sql, "SET lock_timeout = '%lldms'; SELECT pg_advisory_lock%s(%lld); RESET lock_timeout",
             (long long)s->ctx->o.lock_timeout_ms, exclusive ? "" : "_shared", (long long)s->ctx->lock_key);
    PGresult *r = PQexec(s->c, sql);
    int rc = 0;
    if (!r || PQresultStatus(r) != PGRES_COMMAND_OK) {
        if (!strcmp(sqlstate(r), "55P03"))
            rc = sl_errf(err, errlen, SL_EIO,
                         "postgres sink: job '%s', operator '%s': waited %lld ms for %s — %s", s->ctx->job,
                         s->ctx->op, (long long)s->ctx->o.lock_timeout_ms,
                         exclusive ? "connections of an earlier run to end before recovering its transactions"
                                   : "a recovery of the same job id to finish",
                         "is another process running a job with the same job id?");
        else
            rc = pg_fail(s, r, "taking the fencing lock", err, errlen);
    }
    PQclear(r);
    return rc;
}

/* ---- the writer ----------------------------------------------------------- */

typedef struct pg_col {
    int field;     /* index in the input schema */
    sl_type_t type;
    char *qname;   /* quoted column name */
} pg_col_t;

typedef struct pg_pending {
    int64_t ckpt;
    char gid[PG_GID_MAX + 1];
} pg_pending_t;

typedef struct pg_writer {
    const pg_ctx_t *ctx;
    int subtask, parallelism;
    const sl_schema_t *schema;
    pg_session_t data, ctl;
    uint64_t attempt;
    char *qtable;  /* the table's name as the server prints it */
    char *qcommit; /* the commit log's */
    pg_col_t *cols;
    int ncols;
    char **keys;   /* quoted key columns (upsert) */
    int nkeys;
    char *copy_sql, *upsert_sql, *stage_sql;
    /* the open transaction (exactly-once) or batch (upsert) */
    sl_buf_t buf;     /* COPY text; [0, sent) is on the server already */
    size_t sent;
    bool txn_open;    /* BEGIN and COPY ran on the data session */
    bool replay_lost; /* buf no longer holds the whole open transaction */
    bool prepare_sent;
    int64_t txn_rows, txn_bytes, seq;
    /* pre-committed transactions not yet known to be committed */
    pg_pending_t *pending;
    int npending;
    int64_t last_ckpt;  /* highest checkpoint id seen on a barrier */
    int64_t cleanup_ms; /* last commit-log cleanup */
    /* arguments of the step being run */
    const char *step_gid;
    int64_t step_ckpt;
} pg_writer_t;

static uint64_t new_attempt(int subtask) {
    static atomic_uint_fast64_t counter;
    uint64_t n = atomic_fetch_add(&counter, 1);
    return sl_mix64((uint64_t)sl_wall_ms() ^ ((uint64_t)sl_mono_ns() << 7) ^ ((uint64_t)getpid() << 32) ^ (n << 48) ^
                    (uint64_t)subtask);
}

static char *quote_ident(PGconn *c, const char *name) {
    char *q = PQescapeIdentifier(c, name, strlen(name));
    if (!q) return NULL;
    char *r = sl_strdup(q);
    PQfreemem(q);
    return r;
}

static void free_description(pg_writer_t *w) {
    for (int i = 0; i < w->ncols; i++) sl_free(w->cols[i].qname);
    sl_free(w->cols);
    w->cols = NULL;
    w->ncols = 0;
    for (int i = 0; i < w->nkeys; i++) sl_free(w->keys[i]);
    sl_free(w->keys);
    w->keys = NULL;
    w->nkeys = 0;
    sl_free(w->qtable);
    sl_free(w->copy_sql);
    sl_free(w->upsert_sql);
    sl_free(w->stage_sql);
    w->qtable = w->copy_sql = w->upsert_sql = w->stage_sql = NULL;
}

static bool type_fits(sl_type_t t, const char *pg) {
#define IS(x) (!strcmp(pg, x))
    switch (t) {
    case SL_BIGINT: return IS("int8") || IS("numeric");
    case SL_INT: return IS("int4") || IS("int8") || IS("numeric");
    case SL_DOUBLE: return IS("float8") || IS("float4") || IS("numeric");
    case SL_BOOLEAN: return IS("bool");
    case SL_VARCHAR: return true; /* any type that parses the text */
    case SL_BYTES: return IS("bytea");
    case SL_TIMESTAMP: return IS("timestamp") || IS("timestamptz");
    }
#undef IS
    return false;
}

static const char *create_type(sl_type_t t) {
    switch (t) {
    case SL_BIGINT: return "bigint";
    case SL_INT: return "integer";
    case SL_DOUBLE: return "double precision";
    case SL_BOOLEAN: return "boolean";
    case SL_VARCHAR: return "text";
    case SL_BYTES: return "bytea";
    case SL_TIMESTAMP: return "timestamp(3)";
    }
    return "text";
}

/* Splits "a, b" into trimmed names; returns the count (names owned by *out). */
static int split_names(const char *list, char ***out) {
    int n = 0;
    char **v = NULL;
    const char *p = list;
    while (p && *p) {
        while (*p == ' ' || *p == ',') p++;
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ',') e++;
        const char *t = e;
        while (t > p && t[-1] == ' ') t--;
        v = sl_realloc(v, (size_t)(n + 1) * sizeof *v);
        v[n++] = sl_strndup(p, (size_t)(t - p));
        p = e;
    }
    *out = v;
    return n;
}

/* Creates the table from the input schema (idempotent, serialized). */
static int create_table(pg_writer_t *w, char *err, size_t errlen) {
    pg_session_t *s = &w->data;
    sl_buf_t sql = {0};
    char tmp[512];
    snprintf(tmp, sizeof tmp, "SELECT pg_advisory_xact_lock(%lld); CREATE TABLE IF NOT EXISTS %s (",
             (long long)(int64_t)sl_hash_bytes(w->ctx->table, strlen(w->ctx->table)), w->ctx->table);
    sl_buf_append(&sql, tmp, strlen(tmp));
    int nf = sl_schema_field_count(w->schema);
    for (int i = 0; i < nf; i++) {
        char *q = quote_ident(s->c, sl_schema_field_name(w->schema, i));
        if (!q) {
            sl_buf_free(&sql);
            return pg_fail(s, NULL, "quoting a column name", err, errlen);
        }
        snprintf(tmp, sizeof tmp, "%s%s %s%s", i ? ", " : "", q, create_type(sl_schema_field_type(w->schema, i)),
                 sl_schema_field_nullable(w->schema, i) ? "" : " NOT NULL");
        sl_free(q);
        sl_buf_append(&sql, tmp, strlen(tmp));
    }
    char **keys = NULL;
    int nk = w->ctx->keys ? split_names(w->ctx->keys, &keys) : 0;
    for (int i = 0; i < nk; i++) {
        char *q = quote_ident(s->c, keys[i]);
        snprintf(tmp, sizeof tmp, "%s%s", i ? ", " : ", PRIMARY KEY (", q ? q : "?");
        sl_free(q);
        sl_buf_append(&sql, tmp, strlen(tmp));
    }
    for (int i = 0; i < nk; i++) sl_free(keys[i]);
    sl_free(keys);
    sl_buf_append(&sql, nk ? "))" : ")", nk ? 3 : 2);
    snprintf(tmp, sizeof tmp, "creating table %s", w->ctx->table);
    int rc = pg_run(s, (const char *)sql.p, 0, NULL, PGRES_COMMAND_OK, NULL, tmp, err, errlen);
    sl_buf_free(&sql);
    return rc;
}

/* The commit log: one row per exactly-once transaction, written inside it. */
static int ensure_commit_table(pg_session_t *s, char **qname, char *err, size_t errlen) {
    const pg_ctx_t *ctx = s->ctx;
    const char *pv[] = {ctx->commit_table};
    for (int round = 0; round < 2; round++) {
        PGresult *r = NULL;
        int rc = pg_run(s, "SELECT to_regclass($1)::text", 1, pv, PGRES_TUPLES_OK, &r, "looking up the commit log",
                        err, errlen);
        if (rc) return rc;
        if (!PQgetisnull(r, 0, 0)) {
            sl_free(*qname);
            *qname = sl_strdup(PQgetvalue(r, 0, 0));
            PQclear(r);
            return 0;
        }
        PQclear(r);
        char sql[700];
        snprintf(sql, sizeof sql,
                 "SELECT pg_advisory_xact_lock(%lld); CREATE TABLE IF NOT EXISTS %s (gid text PRIMARY KEY, "
                 "job text NOT NULL, operator text NOT NULL, subtask integer NOT NULL, checkpoint bigint NOT NULL, "
                 "created_at timestamptz NOT NULL DEFAULT now())",
                 (long long)(int64_t)sl_hash_bytes(ctx->commit_table, strlen(ctx->commit_table)), ctx->commit_table);
        rc = pg_run(s, sql, 0, NULL, PGRES_COMMAND_OK, NULL, "creating the commit log", err, errlen);
        if (rc) return rc;
    }
    return sl_errf(err, errlen, SL_EINVAL, "postgres sink: commit log table '%s' cannot be found after creating it",
                   ctx->commit_table);
}

static int check_max_prepared(pg_session_t *s, char *err, size_t errlen) {
    PGresult *r = NULL;
    int rc = pg_run(s, "SHOW max_prepared_transactions", 0, NULL, PGRES_TUPLES_OK, &r,
                    "reading max_prepared_transactions", err, errlen);
    if (rc) return rc;
    long n = atol(PQgetvalue(r, 0, 0));
    PQclear(r);
    if (n <= 0)
        return sl_errf(err, errlen, SL_EINVAL,
                       "postgres sink: the server (%s:%s) has max_prepared_transactions = 0, so exactly-once mode "
                       "cannot PREPARE TRANSACTION; set max_prepared_transactions in postgresql.conf to at least "
                       "twice the sink's parallelism and restart the server, or use upsert mode",
                       PQhost(s->c) ? PQhost(s->c) : "?", PQport(s->c) ? PQport(s->c) : "?");
    return 0;
}

/* Looks the table up (creating it if asked), maps the input fields to its
 * columns, finds the key and builds the statements. */
static int describe(pg_writer_t *w, char *err, size_t errlen) {
    pg_session_t *s = &w->data;
    const pg_ctx_t *ctx = w->ctx;
    free_description(w);
    const char *pv[] = {ctx->table};
    PGresult *r = NULL;
    int rc;
    for (int round = 0;; round++) {
        rc = pg_run(s, "SELECT to_regclass($1)::oid::text, to_regclass($1)::text", 1, pv, PGRES_TUPLES_OK, &r,
                    "looking up the table", err, errlen);
        if (rc) return rc;
        if (!PQgetisnull(r, 0, 0)) break;
        PQclear(r);
        if (!ctx->o.create_table || round > 0)
            return sl_errf(err, errlen, SL_EINVAL,
                           "postgres sink: table '%s' does not exist (create it, or set create_table)", ctx->table);
        rc = create_table(w, err, errlen);
        if (rc) return rc;
    }
    char oid[32];
    snprintf(oid, sizeof oid, "%s", PQgetvalue(r, 0, 0));
    w->qtable = sl_strdup(PQgetvalue(r, 0, 1));
    PQclear(r);
    const char *ov[] = {oid};
    rc = pg_run(s,
                "SELECT a.attname, CASE WHEN t.typtype = 'd' THEN (SELECT b.typname FROM pg_type b WHERE b.oid = "
                "t.typbasetype) ELSE t.typname END, format_type(a.atttypid, a.atttypmod) FROM pg_attribute a JOIN "
                "pg_type t ON t.oid = a.atttypid WHERE a.attrelid = $1::oid AND a.attnum > 0 AND NOT a.attisdropped "
                "ORDER BY a.attnum",
                1, ov, PGRES_TUPLES_OK, &r, "reading the table's columns", err, errlen);
    if (rc) return rc;
    int nt = PQntuples(r), nf = sl_schema_field_count(w->schema);
    w->cols = sl_calloc((size_t)(nf ? nf : 1), sizeof *w->cols);
    for (int i = 0; i < nf && !rc; i++) {
        const char *name = sl_schema_field_name(w->schema, i);
        int hit = -1;
        for (int k = 0; k < nt && hit < 0; k++)
            if (!strcmp(PQgetvalue(r, k, 0), name)) hit = k;
        for (int k = 0; k < nt && hit < 0; k++)
            if (!strcasecmp(PQgetvalue(r, k, 0), name)) hit = k;
        sl_type_t t = sl_schema_field_type(w->schema, i);
        if (hit < 0) {
            sl_buf_t names = {0};
            for (int k = 0; k < nt; k++) {
                if (k) sl_buf_append(&names, ", ", 2);
                sl_buf_append(&names, PQgetvalue(r, k, 0), strlen(PQgetvalue(r, k, 0)));
            }
            sl_buf_append(&names, "", 1);
            rc = sl_errf(err, errlen, SL_EINVAL, "postgres sink: field '%s' of the input has no column in table %s "
                         "(columns: %s)", name, w->qtable, (const char *)names.p);
            sl_buf_free(&names);
        } else if (!type_fits(t, PQgetvalue(r, hit, 1))) {
            rc = sl_errf(err, errlen, SL_EINVAL,
                         "postgres sink: field '%s' (%s) cannot be written to column %s of table %s, which is %s",
                         name, sl_type_name(t), PQgetvalue(r, hit, 0), w->qtable, PQgetvalue(r, hit, 2));
        } else {
            w->cols[w->ncols].field = i;
            w->cols[w->ncols].type = t;
            w->cols[w->ncols].qname = quote_ident(s->c, PQgetvalue(r, hit, 0));
            if (!w->cols[w->ncols].qname) rc = pg_fail(s, NULL, "quoting a column name", err, errlen);
            w->ncols++;
        }
    }
    PQclear(r);
    if (rc) return rc;
    if (!w->ncols) return sl_errf(err, errlen, SL_EINVAL, "postgres sink: the input has no fields to write");

    /* COPY column list */
    sl_buf_t cl = {0};
    for (int i = 0; i < w->ncols; i++) {
        if (i) sl_buf_append(&cl, ", ", 2);
        sl_buf_append(&cl, w->cols[i].qname, strlen(w->cols[i].qname));
    }
    sl_buf_append(&cl, "", 1);
    const char *cols = (const char *)cl.p;
    size_t n = strlen(cols) * 4 + strlen(w->qtable) + 400;
    if (ctx->o.mode == SL_PG_EXACTLY_ONCE) {
        w->copy_sql = sl_malloc(n);
        snprintf(w->copy_sql, n, "COPY %s (%s) FROM STDIN", w->qtable, cols);
        sl_buf_free(&cl);
        return 0;
    }

    /* upsert: the key, a staging table per session, the merge statement */
    char **names = NULL;
    int nk = 0;
    if (ctx->keys) {
        nk = split_names(ctx->keys, &names);
        for (int i = 0; i < nk && !rc; i++) {
            int hit = -1;
            for (int k = 0; k < w->ncols && hit < 0; k++) {
                const char *fname = sl_schema_field_name(w->schema, w->cols[k].field);
                char *q = quote_ident(s->c, names[i]);
                if (!strcasecmp(fname, names[i]) || (q && !strcmp(q, w->cols[k].qname))) hit = k;
                sl_free(q);
            }
            if (hit < 0)
                rc = sl_errf(err, errlen, SL_EINVAL, "postgres sink: key column '%s' is not a field of the input",
                             names[i]);
            else {
                w->keys = sl_realloc(w->keys, (size_t)(w->nkeys + 1) * sizeof *w->keys);
                w->keys[w->nkeys++] = sl_strdup(w->cols[hit].qname);
            }
        }
        for (int i = 0; i < nk; i++) sl_free(names[i]);
        sl_free(names);
    } else {
        rc = pg_run(s,
                    "SELECT a.attname FROM pg_index i JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = "
                    "ANY(i.indkey) WHERE i.indrelid = $1::oid AND i.indisprimary ORDER BY "
                    "array_position(i.indkey::int2[], a.attnum)",
                    1, ov, PGRES_TUPLES_OK, &r, "reading the table's primary key", err, errlen);
        if (!rc) {
            for (int k = 0; k < PQntuples(r) && !rc; k++) {
                char *q = quote_ident(s->c, PQgetvalue(r, k, 0));
                int hit = -1;
                for (int c = 0; c < w->ncols && q && hit < 0; c++)
                    if (!strcmp(q, w->cols[c].qname)) hit = c;
                if (hit < 0)
                    rc = sl_errf(err, errlen, SL_EINVAL,
                                 "postgres sink: primary key column %s of table %s is not a field of the input",
                                 PQgetvalue(r, k, 0), w->qtable);
                w->keys = sl_realloc(w->keys, (size_t)(w->nkeys + 1) * sizeof *w->keys);
                w->keys[w->nkeys++] = q ? q : sl_strdup("?");
            }
            PQclear(r);
        }
    }
    if (!rc && !w->nkeys)
        rc = sl_errf(err, errlen, SL_EINVAL,
                     "postgres sink: upsert into %s needs a key: the table has no primary key and key_columns is not "
                     "set", w->qtable);
    if (rc) {
        sl_buf_free(&cl);
        return rc;
    }
    sl_buf_t kl = {0}, set = {0};
    for (int i = 0; i < w->nkeys; i++) {
        if (i) sl_buf_append(&kl, ", ", 2);
        sl_buf_append(&kl, w->keys[i], strlen(w->keys[i]));
    }
    sl_buf_append(&kl, "", 1);
    for (int c = 0; c < w->ncols; c++) {
        bool key = false;
        for (int i = 0; i < w->nkeys; i++) key = key || !strcmp(w->keys[i], w->cols[c].qname);
        if (key) continue;
        char tmp[300];
        snprintf(tmp, sizeof tmp, "%s%s = EXCLUDED.%s", set.len ? ", " : "", w->cols[c].qname, w->cols[c].qname);
        sl_buf_append(&set, tmp, strlen(tmp));
    }
    sl_buf_append(&set, "", 1);
    n += strlen((const char *)kl.p) * 3 + strlen((const char *)set.p);
    w->stage_sql = sl_malloc(n);
    snprintf(w->stage_sql, n,
             "DROP TABLE IF EXISTS pg_temp.sl_stage; CREATE TEMP TABLE sl_stage ON COMMIT DELETE ROWS AS SELECT "
             "0::bigint AS _sl_seq, %s FROM %s WITH NO DATA",
             cols, w->qtable);
    w->copy_sql = sl_malloc(n);
    snprintf(w->copy_sql, n, "COPY pg_temp.sl_stage (_sl_seq, %s) FROM STDIN", cols);
    w->upsert_sql = sl_malloc(n);
    snprintf(w->upsert_sql, n,
             "INSERT INTO %s (%s) SELECT DISTINCT ON (%s) %s FROM pg_temp.sl_stage ORDER BY %s, _sl_seq DESC "
             "ON CONFLICT (%s) DO %s%s; COMMIT",
             w->qtable, cols, (const char *)kl.p, cols, (const char *)kl.p, (const char *)kl.p,
             set.len > 1 ? "UPDATE SET " : "NOTHING", set.len > 1 ? (const char *)set.p : "");
    sl_buf_free(&cl);
    sl_buf_free(&kl);
    sl_buf_free(&set);
    return pg_run(s, w->stage_sql, 0, NULL, PGRES_COMMAND_OK, NULL, "creating the staging table", err, errlen);
}

static int data_setup(void *arg, char *err, size_t errlen) {
    pg_writer_t *w = arg;
    w->txn_open = false; /* a new connection has no transaction */
    int rc = fence_lock(&w->data, false, err, errlen);
    /* A row waiting for a lock held by a prepared transaction (a duplicate
     * primary key across checkpoints) would wait for a commit that this
     * very thread has to run: fail instead of hanging. */
    if (!rc) {
        char sql[64];
        snprintf(sql, sizeof sql, "SET lock_timeout = '%lldms'", (long long)w->ctx->o.lock_timeout_ms);
        rc = pg_run(&w->data, sql, 0, NULL, PGRES_COMMAND_OK, NULL, "setting lock_timeout", err, errlen);
    }
    if (!rc && w->stage_sql)
        rc = pg_run(&w->data, w->stage_sql, 0, NULL, PGRES_COMMAND_OK, NULL, "creating the staging table", err,
                    errlen);
    return rc;
}

static int ctl_setup(void *arg, char *err, size_t errlen) {
    pg_writer_t *w = arg;
    return fence_lock(&w->ctl, false, err, errlen);
}

static int open_step(void *arg, char *err, size_t errlen) {
    pg_writer_t *w = arg;
    int rc = 0;
    if (w->ctx->o.mode == SL_PG_EXACTLY_ONCE) {
        rc = check_max_prepared(&w->data, err, errlen);
        if (!rc) rc = ensure_commit_table(&w->data, &w->qcommit, err, errlen);
    }
    if (!rc) rc = describe(w, err, errlen);
    return rc;
}

/* ---- COPY text -------------------------------------------------------------- */

static inline void put(sl_buf_t *b, const void *p, size_t n) { sl_buf_append(b, p, n); }

static void put_i64(sl_buf_t *b, int64_t v) {
    char t[24];
    int n = snprintf(t, sizeof t, "%" PRId64, v);
    put(b, t, (size_t)n);
}

/* Text with COPY's escapes; -1 on a NUL byte (PostgreSQL text cannot hold it). */
static int put_text(sl_buf_t *b, const char *s, uint32_t n) {
    uint32_t from = 0;
    for (uint32_t i = 0; i < n; i++) {
        char c = s[i], e;
        switch (c) {
        case '\\': e = '\\'; break;
        case '\n': e = 'n'; break;
        case '\r': e = 'r'; break;
        case '\t': e = 't'; break;
        case '\0': return -1;
        default: continue;
        }
        put(b, s + from, i - from);
        char esc[2] = {'\\', e};
        put(b, esc, 2);
        from = i + 1;
    }
    put(b, s + from, n - from);
    return 0;
}

static void put_timestamp(sl_buf_t *b, int64_t ms) {
    int64_t secs = ms / 1000, rem = ms % 1000;
    if (rem < 0) {
        rem += 1000;
        secs--;
    }
    time_t t = (time_t)secs;
    struct tm tm;
    gmtime_r(&t, &tm);
    long year = (long)tm.tm_year + 1900;
    bool bc = year <= 0;
    char s[64];
    int n = snprintf(s, sizeof s, "%04ld-%02d-%02d %02d:%02d:%02d.%03d+00%s", bc ? 1 - year : year, tm.tm_mon + 1,
                     tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, (int)rem, bc ? " BC" : "");
    put(b, s, (size_t)n);
}

static int encode_row(pg_writer_t *w, const sl_row_t *r, char *err, size_t errlen) {
    sl_buf_t *b = &w->buf;
    size_t start = b->len;
    if (w->ctx->o.mode == SL_PG_UPSERT) {
        put_i64(b, ++w->seq);
        put(b, "\t", 1);
    }
    for (int k = 0; k < w->ncols; k++) {
        if (k) put(b, "\t", 1);
        int f = w->cols[k].field;
        if (sl_row_is_null(r, f)) {
            put(b, "\\N", 2);
            continue;
        }
        switch (w->cols[k].type) {
        case SL_BIGINT: put_i64(b, sl_row_i64(r, f)); break;
        case SL_INT: put_i64(b, sl_row_i32(r, f)); break;
        case SL_TIMESTAMP: put_timestamp(b, sl_row_i64(r, f)); break;
        case SL_BOOLEAN: put(b, sl_row_bool(r, f) ? "t" : "f", 1); break;
        case SL_DOUBLE: {
            double d = sl_row_f64(r, f);
            char t[40];
            int n = isnan(d) ? snprintf(t, sizeof t, "NaN")
                    : isinf(d) ? snprintf(t, sizeof t, "%s", d > 0 ? "Infinity" : "-Infinity")
                               : snprintf(t, sizeof t, "%.17g", d);
            put(b, t, (size_t)n);
            break;
        }
        case SL_VARCHAR: {
            uint32_t n;
            const char *s = sl_row_str(r, f, &n);
            if (put_text(b, s, n) < 0) {
                b->len = start;
                return sl_errf(err, errlen, SL_EFORMAT,
                               "postgres sink: field '%s' holds a NUL byte, which PostgreSQL text cannot store",
                               sl_schema_field_name(w->schema, f));
            }
            break;
        }
        case SL_BYTES: {
            static const char hex[] = "0123456789abcdef";
            uint32_t n;
            const uint8_t *p = sl_row_bytes(r, f, &n);
            sl_buf_reserve(b, 3 + (size_t)n * 2);
            memcpy(b->p + b->len, "\\\\x", 3);
            b->len += 3;
            for (uint32_t i = 0; i < n; i++) {
                b->p[b->len++] = (uint8_t)hex[p[i] >> 4];
                b->p[b->len++] = (uint8_t)hex[p[i] & 15];
            }
            break;
        }
        }
    }
    put(b, "\n", 1);
    return 0;
}

/* ---- exactly-once: transactions --------------------------------------------- */

/* Brings the server's transaction up to the buffer: begins it (again, after
 * a reconnect: replaying the kept copy) and sends what is not sent yet. */
static int eo_send_step(void *arg, char *err, size_t errlen) {
    pg_writer_t *w = arg;
    pg_session_t *s = &w->data;
    if (!w->txn_open) {
        if (w->replay_lost)
            return sl_errf(err, errlen, SL_EIO,
                           "postgres sink: the connection was lost inside the open transaction of subtask %d after "
                           "%lld rows (%lld bytes, more than max_replay_bytes = %zu kept for replay); failing so "
                           "that the job restarts from its last checkpoint",
                           w->subtask, (long long)w->txn_rows, (long long)w->txn_bytes, w->ctx->o.max_replay_bytes);
        int rc = pg_run(s, "BEGIN", 0, NULL, PGRES_COMMAND_OK, NULL, "BEGIN", err, errlen);
        if (!rc) rc = pg_run(s, w->copy_sql, 0, NULL, PGRES_COPY_IN, NULL, "starting COPY", err, errlen);
        if (rc) return rc;
        w->txn_open = true;
        w->sent = 0;
    }
    while (w->sent < w->buf.len) {
        size_t n = SL_MIN(w->buf.len - w->sent, (size_t)PG_SEND_CHUNK);
        if (PQputCopyData(s->c, (const char *)w->buf.p + w->sent, (int)n) != 1)
            return pg_fail(s, NULL, "sending rows (COPY)", err, errlen);
        w->sent += n;
    }
    if (w->buf.len > w->ctx->o.max_replay_bytes) { /* too big to keep for a replay */
        w->replay_lost = true;
        w->buf.len = w->sent = 0;
    }
    return 0;
}

static int is_prepared(pg_session_t *s, const char *gid, bool *yes, char *err, size_t errlen) {
    const char *pv[] = {gid};
    PGresult *r = NULL;
    int rc = pg_run(s, "SELECT 1 FROM pg_prepared_xacts WHERE gid = $1", 1, pv, PGRES_TUPLES_OK, &r,
                    "reading pg_prepared_xacts", err, errlen);
    if (rc) return rc;
    *yes = PQntuples(r) > 0;
    PQclear(r);
    return 0;
}

static int in_commit_log(pg_session_t *s, const char *qcommit, const char *gid, bool *yes, char *err, size_t errlen) {
    char sql[400];
    snprintf(sql, sizeof sql, "SELECT 1 FROM %s WHERE gid = $1", qcommit);
    const char *pv[] = {gid};
    PGresult *r = NULL;
    int rc = pg_run(s, sql, 1, pv, PGRES_TUPLES_OK, &r, "reading the commit log", err, errlen);
    if (rc) return rc;
    *yes = PQntuples(r) > 0;
    PQclear(r);
    return 0;
}

static int64_t gid_checkpoint(const char *gid) {
    /* ...:<subtask>:<checkpoint>:<attempt> */
    const char *a = strrchr(gid, ':');
    if (!a) return -1;
    const char *c = a - 1;
    while (c > gid && *c != ':') c--;
    long long v;
    return sscanf(c, ":%lld:", &v) == 1 ? v : -1;
}

/* "Prepared transaction does not exist" after COMMIT PREPARED: either it
 * committed (this or an earlier attempt whose answer was lost) — then its
 * commit-log row is visible — or it was rolled back and its rows are lost,
 * which no restart can repair: a non-retriable failure. */
static int resolve_missing(pg_session_t *s, const char *qcommit, const char *gid, char *err, size_t errlen) {
    bool committed = false;
    int rc = in_commit_log(s, qcommit, gid, &committed, err, errlen);
    if (rc) return rc;
    if (committed) {
        fprintf(stderr, "postgres sink: transaction '%s' was committed already (commit log %s)\n", gid, qcommit);
        return 0;
    }
    return sl_errf(err, errlen, SL_EINVAL,
                   "postgres sink: exactly-once violated: prepared transaction '%s' (checkpoint %lld) does not exist "
                   "and has no row in commit log %s, so it was rolled back, not committed: its rows are lost (rolled "
                   "back by hand, or the server lost data?)",
                   gid, (long long)gid_checkpoint(gid), qcommit);
}

static int eo_prepare_step(void *arg, char *err, size_t errlen) {
    pg_writer_t *w = arg;
    pg_session_t *s = &w->data;
    int rc;
    if (w->prepare_sent && !w->txn_open) { /* a PREPARE was sent on a connection since lost */
        bool yes = false;
        rc = is_prepared(s, w->step_gid, &yes, err, errlen);
        if (rc) return rc;
        if (yes) return 0;
        w->prepare_sent = false;
    }
    rc = eo_send_step(w, err, errlen);
    if (rc) return rc;
    if (PQputCopyEnd(s->c, NULL) != 1) return pg_fail(s, NULL, "ending COPY", err, errlen);
    PGresult *r;
    char what[300];
    snprintf(what, sizeof what, "COPY into %s", w->qtable);
    while ((r = PQgetResult(s->c))) {
        if (!rc && PQresultStatus(r) != PGRES_COMMAND_OK) rc = pg_fail(s, r, what, err, errlen);
        PQclear(r);
    }
    if (rc) return rc;
    char cleanup[600] = "";
    int64_t now = sl_mono_ns() / 1000000;
    if (w->cleanup_ms == 0) w->cleanup_ms = now;
    if (now - w->cleanup_ms > 60000) { /* now and then: drop old commit-log rows of this writer */
        snprintf(cleanup, sizeof cleanup,
                 " DELETE FROM %s WHERE job = '%s' AND operator = '%s' AND subtask = %d AND checkpoint < %lld AND "
                 "created_at < now() - interval '%lld seconds';",
                 w->qcommit, w->ctx->job, w->ctx->op, w->subtask, (long long)w->step_ckpt,
                 (long long)w->ctx->o.commit_log_retention_s);
        w->cleanup_ms = now;
    }
    char sql[1400];
    snprintf(sql, sizeof sql,
             "INSERT INTO %s (gid, job, operator, subtask, checkpoint) VALUES ('%s', '%s', '%s', %d, %lld);%s "
             "PREPARE TRANSACTION '%s'",
             w->qcommit, w->step_gid, w->ctx->job, w->ctx->op, w->subtask, (long long)w->step_ckpt, cleanup,
             w->step_gid);
    w->prepare_sent = true;
    w->txn_open = false; /* whatever the answer, the transaction block is over */
    rc = pg_run(s, sql, 0, NULL, PGRES_COMMAND_OK, NULL, "PREPARE TRANSACTION", err, errlen);
    if (rc != PG_RETRY) w->prepare_sent = false;
    return rc;
}

/* Prepares the open transaction as checkpoint `id`'s. */
static int eo_prepare(pg_writer_t *w, int64_t id, char *err, size_t errlen) {
    if (w->txn_rows == 0) return 0; /* nothing written since the last pre-commit */
    pg_pending_t p = {.ckpt = id};
    snprintf(p.gid, sizeof p.gid, "%s%d:%lld:%016" PRIx64, w->ctx->prefix, w->subtask, (long long)id, w->attempt);
    w->step_gid = p.gid;
    w->step_ckpt = id;
    w->prepare_sent = false;
    char what[64];
    snprintf(what, sizeof what, "pre-commit of checkpoint %lld", (long long)id);
    int rc = with_retries(&w->data, what, eo_prepare_step, w, err, errlen);
    w->step_gid = NULL;
    if (rc) return rc;
    w->pending = sl_realloc(w->pending, (size_t)(w->npending + 1) * sizeof *w->pending);
    w->pending[w->npending++] = p;
    w->buf.len = w->sent = 0;
    w->replay_lost = false;
    w->txn_rows = w->txn_bytes = 0;
    return 0;
}

static int commit_step(void *arg, char *err, size_t errlen) {
    pg_writer_t *w = arg;
    pg_session_t *s = &w->ctl;
    char sql[PG_GID_MAX + 40];
    snprintf(sql, sizeof sql, "COMMIT PREPARED '%s'", w->step_gid);
    if (!PQsendQuery(s->c, sql)) return pg_fail(s, NULL, "COMMIT PREPARED", err, errlen);
    sl_fault_point("sink.during-commit"); /* sent; the answer not read yet */
    PGresult *r, *bad = NULL;
    while ((r = PQgetResult(s->c))) {
        if (!bad && PQresultStatus(r) != PGRES_COMMAND_OK)
            bad = r;
        else
            PQclear(r);
    }
    if (!bad) return 0;
    int rc;
    if (!strcmp(sqlstate(bad), "42704"))
        rc = resolve_missing(s, w->qcommit, w->step_gid, err, errlen);
    else if (!strcmp(sqlstate(bad), "55000")) { /* "is busy": another backend is finishing it */
        pg_fail(s, bad, "COMMIT PREPARED", err, errlen);
        rc = PG_RETRY;
    } else {
        snprintf(sql, sizeof sql, "COMMIT PREPARED '%s'", w->step_gid);
        rc = pg_fail(s, bad, sql, err, errlen);
    }
    PQclear(bad);
    return rc;
}

/* Commits the pending transactions of checkpoints up to `upto`, oldest first. */
static int eo_commit_upto(pg_writer_t *w, int64_t upto, char *err, size_t errlen) {
    int kept = 0, rc = 0;
    for (int i = 0; i < w->npending; i++) {
        pg_pending_t *p = &w->pending[i];
        if (rc || p->ckpt > upto) {
            w->pending[kept++] = *p;
            continue;
        }
        w->step_gid = p->gid;
        w->step_ckpt = p->ckpt;
        char what[64];
        snprintf(what, sizeof what, "commit of checkpoint %lld", (long long)p->ckpt);
        rc = with_retries(&w->ctl, what, commit_step, w, err, errlen);
        w->step_gid = NULL;
        if (rc) w->pending[kept++] = *p;
    }
    w->npending = kept;
    return rc;
}

/* ---- upsert: batches ----------------------------------------------------- */

static int upsert_step(void *arg, char *err, size_t errlen) {
    pg_writer_t *w = arg;
    pg_session_t *s = &w->data;
    int rc = pg_run(s, "BEGIN", 0, NULL, PGRES_COMMAND_OK, NULL, "BEGIN", err, errlen);
    if (!rc) rc = pg_run(s, w->copy_sql, 0, NULL, PGRES_COPY_IN, NULL, "starting COPY", err, errlen);
    if (rc) return rc;
    for (size_t off = 0; off < w->buf.len;) {
        size_t n = SL_MIN(w->buf.len - off, (size_t)PG_SEND_CHUNK);
        if (PQputCopyData(s->c, (const char *)w->buf.p + off, (int)n) != 1)
            return pg_fail(s, NULL, "sending rows (COPY)", err, errlen);
        off += n;
    }
    if (PQputCopyEnd(s->c, NULL) != 1) return pg_fail(s, NULL, "ending COPY", err, errlen);
    PGresult *r;
    while ((r = PQgetResult(s->c))) {
        if (!rc && PQresultStatus(r) != PGRES_COMMAND_OK) rc = pg_fail(s, r, "COPY into the staging table", err, errlen);
        PQclear(r);
    }
    if (rc) return rc;
    char what[300];
    snprintf(what, sizeof what, "upsert into %s", w->qtable);
    return pg_run(s, w->upsert_sql, 0, NULL, PGRES_COMMAND_OK, NULL, what, err, errlen);
}

static int upsert_flush(pg_writer_t *w, char *err, size_t errlen) {
    if (!w->buf.len) return 0;
    int rc = with_retries(&w->data, "upsert", upsert_step, w, err, errlen);
    if (rc) return rc;
    w->buf.len = 0;
    w->txn_rows = 0;
    w->seq = 0;
    return 0;
}

/* ---- sink operations -------------------------------------------------------- */

static void pg_close(void *writer) {
    pg_writer_t *w = writer;
    if (!w) return;
    session_close(&w->data); /* an open transaction is rolled back by the server */
    session_close(&w->ctl);
    free_description(w);
    sl_free(w->qcommit);
    sl_buf_free(&w->buf);
    sl_free(w->pending);
    sl_free(w);
}

static int pg_open(void *vctx, int subtask, int parallelism, const sl_schema_t *schema, void **writer, char *err,
                   size_t errlen) {
    const pg_ctx_t *ctx = vctx;
    if (ctx->cfg_rc) return sl_errf(err, errlen, ctx->cfg_rc, "%s", ctx->cfg_err);
    pg_writer_t *w = sl_calloc(1, sizeof *w);
    w->ctx = ctx;
    w->subtask = subtask;
    w->parallelism = parallelism;
    w->schema = schema;
    w->attempt = new_attempt(subtask);
    w->last_ckpt = ctx->restored_id;
    w->data.ctx = w->ctl.ctx = ctx;
    snprintf(w->data.appname, sizeof w->data.appname, "sluice:%s:%s:%d:data", ctx->job, ctx->op, subtask);
    snprintf(w->ctl.appname, sizeof w->ctl.appname, "sluice:%s:%s:%d:ctl", ctx->job, ctx->op, subtask);
    w->data.setup = data_setup;
    w->ctl.setup = ctl_setup;
    w->data.setup_arg = w->ctl.setup_arg = w;
    int rc = with_retries(&w->data, "opening the sink", open_step, w, err, errlen);
    if (rc) {
        pg_close(w);
        return rc;
    }
    *writer = w;
    return 0;
}

static int pg_write(void *writer, const sl_record_t *rec, char *err, size_t errlen) {
    pg_writer_t *w = writer;
    size_t before = w->buf.len;
    int rc = encode_row(w, &rec->row, err, errlen);
    if (rc) return rc;
    w->txn_rows++;
    w->txn_bytes += (int64_t)(w->buf.len - before);
    if (w->buf.len - w->sent < w->ctx->o.batch_bytes) return 0;
    if (w->ctx->o.mode == SL_PG_UPSERT) return upsert_flush(w, err, errlen);
    return with_retries(&w->data, "writing rows", eo_send_step, w, err, errlen);
}

static int pg_pre_commit(void *writer, int64_t id, char *err, size_t errlen) {
    pg_writer_t *w = writer;
    sl_fault_point("sink.before-precommit");
    if (id > w->last_ckpt) w->last_ckpt = id;
    int rc = w->ctx->o.mode == SL_PG_UPSERT ? upsert_flush(w, err, errlen) : eo_prepare(w, id, err, errlen);
    if (rc) return rc;
    sl_fault_point("sink.after-precommit");
    return 0;
}

static int pg_commit(void *writer, int64_t id, char *err, size_t errlen) {
    pg_writer_t *w = writer;
    if (w->ctx->o.mode == SL_PG_UPSERT) return 0;
    return eo_commit_upto(w, id, err, errlen);
}

/* End of a bounded input.  With checkpointing it runs after the final
 * checkpoint committed everything (nothing is left); without, the rest is
 * prepared and everything is committed. */
static int pg_finish(void *writer, char *err, size_t errlen) {
    pg_writer_t *w = writer;
    if (w->ctx->o.mode == SL_PG_UPSERT) return upsert_flush(w, err, errlen);
    int rc = eo_prepare(w, w->last_ckpt + 1, err, errlen);
    if (!rc) rc = eo_commit_upto(w, INT64_MAX, err, errlen);
    return rc;
}

/* Writer state in checkpoint `id` (after its pre-commit): the gids not yet
 * known to be committed — u32 count, then per gid u16 length and bytes —
 * and the writer's attempt (u64), which ends every gid it names. */
static int pg_snapshot(void *writer, int64_t id, void (*putf)(void *, const void *, size_t), void *pc) {
    pg_writer_t *w = writer;
    uint8_t b8[8];
    sl_st32(b8, (uint32_t)w->npending);
    putf(pc, b8, 4);
    for (int i = 0; i < w->npending; i++) {
        uint16_t n = (uint16_t)strlen(w->pending[i].gid);
        uint8_t b2[2] = {(uint8_t)(n & 0xff), (uint8_t)(n >> 8)};
        putf(pc, b2, 2);
        putf(pc, w->pending[i].gid, n);
    }
    sl_st64(b8, w->attempt);
    putf(pc, b8, 8);
    return 0;
}

/* A writer of the restored checkpoint must have committed nothing after
 * it: such rows are written again by the replay from the checkpoint, so
 * the restore would duplicate them.  It happens when an older checkpoint
 * than the latest is restored.  Refused, loudly. */
static int newer_commits_step(void *arg, char *err, size_t errlen) {
    pg_writer_t *w = arg;
    pg_session_t *s = &w->ctl;
    char sql[600], ck[24];
    snprintf(sql, sizeof sql,
             "SELECT gid, checkpoint FROM %s WHERE job = $1 AND operator = $2 AND checkpoint > $3::bigint AND "
             "right(gid, 16) = $4 ORDER BY checkpoint LIMIT 1",
             w->qcommit);
    snprintf(ck, sizeof ck, "%lld", (long long)w->ctx->restored_id);
    const char *pv[] = {w->ctx->job, w->ctx->op, ck, w->step_gid /* the attempt in hex */};
    PGresult *r = NULL;
    int rc = pg_run(s, sql, 4, pv, PGRES_TUPLES_OK, &r, "reading the commit log", err, errlen);
    if (rc) return rc;
    if (PQntuples(r) > 0)
        rc = sl_errf(err, errlen, SL_EINVAL,
                     "postgres sink: exactly-once violated: transaction '%s' of checkpoint %s was committed after "
                     "the restored checkpoint %lld, so restoring it would write its rows again (is this an older "
                     "checkpoint than the latest?)",
                     PQgetvalue(r, 0, 0), PQgetvalue(r, 0, 1), (long long)w->ctx->restored_id);
    PQclear(r);
    return rc;
}

/* Every transaction a restored checkpoint names must be committed by now
 * (recover committed the prepared ones it covers): its commit-log row is
 * visible.  Still prepared: commit it.  Neither: its rows are lost. */
static int verify_step(void *arg, char *err, size_t errlen) {
    pg_writer_t *w = arg;
    pg_session_t *s = &w->ctl;
    bool yes = false;
    int rc = in_commit_log(s, w->qcommit, w->step_gid, &yes, err, errlen);
    if (rc || yes) return rc;
    rc = is_prepared(s, w->step_gid, &yes, err, errlen);
    if (rc) return rc;
    if (yes) return commit_step(w, err, errlen);
    return sl_errf(err, errlen, SL_EINVAL,
                   "postgres sink: exactly-once violated: transaction '%s' (checkpoint %lld), which the restored "
                   "checkpoint covers, is neither committed (no row in commit log %s) nor prepared: its rows are lost",
                   w->step_gid, (long long)gid_checkpoint(w->step_gid), w->qcommit);
}

static int pg_restore(void *writer, const void *state, size_t len, char *err, size_t errlen) {
    pg_writer_t *w = writer;
    const uint8_t *p = state;
    size_t off = 0;
    for (int idx = 0; off < len; idx++) {
        if (len - off < 4) goto bad;
        uint32_t n = sl_ld32(p + off);
        off += 4;
        if (n > len - off) goto bad;
        const uint8_t *e = p + off, *end = p + off + n;
        off += n;
        if (idx % w->parallelism != w->subtask) continue; /* another writer checks it */
        if (end - e < 4) goto bad;
        uint32_t count = sl_ld32(e);
        e += 4;
        for (uint32_t i = 0; i < count; i++) {
            if (end - e < 2) goto bad;
            uint16_t gl = (uint16_t)(e[0] | (e[1] << 8));
            e += 2;
            if (gl > PG_GID_MAX || end - e < gl) goto bad;
            char gid[PG_GID_MAX + 1];
            memcpy(gid, e, gl);
            gid[gl] = 0;
            e += gl;
            w->step_gid = gid;
            int rc = with_retries(&w->ctl, "checking restored transactions", verify_step, w, err, errlen);
            w->step_gid = NULL;
            if (rc) return rc;
        }
        if (end - e >= 8 && w->ctx->restored_id > 0) {
            char attempt[24];
            snprintf(attempt, sizeof attempt, "%016" PRIx64, sl_ld64(e));
            w->step_gid = attempt;
            int rc = with_retries(&w->ctl, "checking commits after the restored checkpoint", newer_commits_step, w,
                                  err, errlen);
            w->step_gid = NULL;
            if (rc) return rc;
        }
    }
    return 0;
bad:
    return sl_errf(err, errlen, SL_EFORMAT, "postgres sink: the restored writer state is malformed (%zu bytes)", len);
}

/* ---- recovery ------------------------------------------------------------------ */

typedef struct pg_recovery {
    pg_session_t s;
    int64_t restored;
    char *qcommit;
    int committed, rolled_back;
} pg_recovery_t;

static int recover_step(void *arg, char *err, size_t errlen) {
    pg_recovery_t *rv = arg;
    pg_session_t *s = &rv->s;
    const pg_ctx_t *ctx = s->ctx;
    if (ctx->o.mode == SL_PG_UPSERT) return 0; /* reachable: that is all upsert mode needs */
    int rc = check_max_prepared(s, err, errlen);
    if (!rc) rc = ensure_commit_table(s, &rv->qcommit, err, errlen);
    if (!rc) rc = fence_lock(s, true, err, errlen);
    if (rc) return rc;
    char plen[24];
    snprintf(plen, sizeof plen, "%zu", strlen(ctx->prefix));
    const char *pv[] = {ctx->prefix, plen};
    PGresult *r = NULL;
    rc = pg_run(s,
                "SELECT gid FROM pg_prepared_xacts WHERE database = current_database() AND left(gid, $2::int) = $1 "
                "ORDER BY prepared",
                2, pv, PGRES_TUPLES_OK, &r, "listing pg_prepared_xacts", err, errlen);
    if (rc) return rc;
    for (int i = 0; i < PQntuples(r) && !rc; i++) {
        const char *gid = PQgetvalue(r, i, 0);
        int64_t ck = gid_checkpoint(gid);
        if (ck < 0) {
            rc = sl_errf(err, errlen, SL_EINVAL,
                         "postgres sink: prepared transaction '%s' has the job's prefix but not the form "
                         "%s<subtask>:<checkpoint>:<attempt>; resolve it by hand", gid, ctx->prefix);
            break;
        }
        bool commit = ck <= rv->restored;
        char sql[PG_GID_MAX + 40];
        snprintf(sql, sizeof sql, "%s PREPARED '%s'", commit ? "COMMIT" : "ROLLBACK", gid);
        PGresult *x = PQexec(s->c, sql);
        if (x && PQresultStatus(x) == PGRES_COMMAND_OK) {
            if (commit)
                rv->committed++;
            else
                rv->rolled_back++;
        } else if (!strcmp(sqlstate(x), "42704")) { /* finished by someone else meanwhile */
            if (commit) {
                rc = resolve_missing(s, rv->qcommit, gid, err, errlen);
            } else {
                bool yes = false;
                rc = in_commit_log(s, rv->qcommit, gid, &yes, err, errlen);
                if (!rc && yes)
                    rc = sl_errf(err, errlen, SL_EINVAL,
                                 "postgres sink: exactly-once violated: transaction '%s' (checkpoint %lld) was "
                                 "committed by someone else although the restored checkpoint %lld does not cover it",
                                 gid, (long long)ck, (long long)rv->restored);
            }
        } else {
            rc = pg_fail(s, x, sql, err, errlen);
        }
        PQclear(x);
    }
    PQclear(r);
    if (rc) return rc;
    char sql[100];
    snprintf(sql, sizeof sql, "SELECT pg_advisory_unlock(%lld)", (long long)ctx->lock_key);
    return pg_run(s, sql, 0, NULL, PGRES_TUPLES_OK, NULL, "releasing the fencing lock", err, errlen);
}

static int pg_recover(void *vctx, int64_t restored_id, char *err, size_t errlen) {
    pg_ctx_t *ctx = vctx;
    if (ctx->cfg_rc) return sl_errf(err, errlen, ctx->cfg_rc, "%s", ctx->cfg_err);
    ctx->restored_id = restored_id; /* writers number their transactions after it */
    pg_recovery_t rv = {.s = {.ctx = ctx}, .restored = restored_id};
    snprintf(rv.s.appname, sizeof rv.s.appname, "sluice:%s:%s:recover", ctx->job, ctx->op);
    int rc = with_retries(&rv.s, "recovery", recover_step, &rv, err, errlen);
    session_close(&rv.s);
    sl_free(rv.qcommit);
    if (!rc && (rv.committed || rv.rolled_back))
        fprintf(stderr,
                "postgres sink: job '%s', operator '%s': restored checkpoint %lld: committed %d and rolled back %d "
                "prepared transaction%s of an earlier run\n",
                ctx->job, ctx->op, (long long)restored_id, rv.committed, rv.rolled_back,
                rv.committed + rv.rolled_back == 1 ? "" : "s");
    return rc;
}

static void pg_destroy(void *vctx) {
    pg_ctx_t *ctx = vctx;
    sl_free(ctx->conninfo);
    sl_free(ctx->table);
    sl_free(ctx->job);
    sl_free(ctx->op);
    sl_free(ctx->keys);
    sl_free(ctx->commit_table);
    sl_free(ctx);
}

static const sl_sink_ops_t pg_eo_ops = {
    .name = "postgres-exactly-once",
    .open = pg_open,
    .write = pg_write,
    .finish = pg_finish,
    .close = pg_close,
    .destroy = pg_destroy,
    .pre_commit = pg_pre_commit,
    .commit = pg_commit,
    .recover = pg_recover,
    .snapshot = pg_snapshot,
    .restore = pg_restore,
};

static const sl_sink_ops_t pg_upsert_ops = {
    .name = "postgres-upsert",
    .open = pg_open,
    .write = pg_write,
    .finish = pg_finish,
    .close = pg_close,
    .destroy = pg_destroy,
    .pre_commit = pg_pre_commit, /* flush on the barrier */
    .recover = pg_recover,
};

/* ---- construction ---------------------------------------------------------- */

sl_pg_sink_opts_t sl_pg_sink_defaults(void) {
    sl_pg_sink_opts_t o = {0};
    o.mode = SL_PG_EXACTLY_ONCE;
    o.commit_table = "sluice_commits";
    o.max_retries = 5;
    o.retry_backoff_ms = 100;
    o.batch_bytes = 1u << 20;
    o.max_replay_bytes = 64u << 20;
    o.lock_timeout_ms = 30000;
    o.commit_log_retention_s = 86400;
    return o;
}

static bool id_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > PG_ID_MAX) return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '-'))
            return false;
    }
    return true;
}

/* A table name spliced into SQL: [A-Za-z0-9_.$] and balanced double quotes. */
static bool sql_name_ok(const char *s) {
    int quotes = 0;
    if (!*s || strlen(s) > 200) return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        if (c == '"') {
            quotes++;
            continue;
        }
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
              c == '$' || (c == ' ' && quotes % 2)))
            return false;
    }
    return quotes % 2 == 0;
}

sl_sink_t sl_pg_sink(const sl_pg_sink_opts_t *opts) {
    pg_ctx_t *ctx = sl_calloc(1, sizeof *ctx);
    sl_pg_sink_opts_t d = sl_pg_sink_defaults();
    ctx->o = opts ? *opts : d;
    sl_pg_sink_opts_t *o = &ctx->o;
    if (o->retry_backoff_ms <= 0) o->retry_backoff_ms = d.retry_backoff_ms;
    if (o->batch_bytes == 0) o->batch_bytes = d.batch_bytes;
    if (o->max_replay_bytes == 0) o->max_replay_bytes = d.max_replay_bytes;
    if (o->lock_timeout_ms <= 0) o->lock_timeout_ms = d.lock_timeout_ms;
    if (o->commit_log_retention_s <= 0) o->commit_log_retention_s = d.commit_log_retention_s;
    ctx->conninfo = sl_strdup(o->conninfo ? o->conninfo : "");
    ctx->table = sl_strdup(o->table ? o->table : "");
    ctx->commit_table = sl_strdup(o->commit_table && *o->commit_table ? o->commit_table : d.commit_table);
    ctx->keys = o->key_columns && *o->key_columns ? sl_strdup(o->key_columns) : NULL;
    ctx->job = sl_strdup(o->job_id && *o->job_id ? o->job_id : "sluice");
    if (o->operator_id && *o->operator_id) {
        ctx->op = sl_strdup(o->operator_id);
    } else { /* the table name, made fit for a gid */
        ctx->op = sl_strndup(ctx->table, strnlen(ctx->table, PG_ID_MAX));
        for (char *p = ctx->op; *p; p++)
            if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.-", *p)) *p = '_';
    }
    o->conninfo = ctx->conninfo;
    o->table = ctx->table;
    o->commit_table = ctx->commit_table;
    o->key_columns = ctx->keys;
    o->job_id = ctx->job;
    o->operator_id = ctx->op;
    snprintf(ctx->prefix, sizeof ctx->prefix, "sl:%s:%s:", ctx->job, ctx->op);
    ctx->lock_key = (int64_t)sl_hash_bytes(ctx->prefix, strlen(ctx->prefix));
#define BAD(...) (ctx->cfg_rc = sl_errf(ctx->cfg_err, sizeof ctx->cfg_err, SL_EINVAL, __VA_ARGS__))
    if (!opts)
        BAD("postgres sink: no options given");
    else if (o->mode != SL_PG_EXACTLY_ONCE && o->mode != SL_PG_UPSERT)
        BAD("postgres sink: unknown mode %d", (int)o->mode);
    else if (!*ctx->conninfo)
        BAD("postgres sink: conninfo (the libpq connection string) is required");
    else if (!*ctx->table)
        BAD("postgres sink: table is required");
    else if (o->create_table && !sql_name_ok(ctx->table))
        BAD("postgres sink: table '%s' cannot be created: use [schema.]name of letters, digits, '_' and '$' "
            "(double quotes allowed)", ctx->table);
    else if (!sql_name_ok(ctx->commit_table))
        BAD("postgres sink: commit_table '%s' must be [schema.]name of letters, digits, '_' and '$'",
            ctx->commit_table);
    else if (o->mode == SL_PG_EXACTLY_ONCE && !(opts->job_id && *opts->job_id))
        BAD("postgres sink: exactly-once mode needs job_id (it names the job's prepared transactions)");
    else if (!id_ok(ctx->job))
        BAD("postgres sink: job_id '%s' must be 1 to %d characters of [A-Za-z0-9_.-]", ctx->job, PG_ID_MAX);
    else if (!id_ok(ctx->op))
        BAD("postgres sink: operator_id '%s' must be 1 to %d characters of [A-Za-z0-9_.-]", ctx->op, PG_ID_MAX);
    else if (o->max_retries < 0)
        BAD("postgres sink: max_retries must be >= 0, got %d", o->max_retries);
#undef BAD
    sl_sink_t s = {o->mode == SL_PG_UPSERT ? &pg_upsert_ops : &pg_eo_ops, ctx};
    return s;
}
