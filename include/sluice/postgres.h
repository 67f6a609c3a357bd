/*
 * sluice/postgres.h — the PostgreSQL sink (libpq).
 *
 * Rows of the sink's input schema go to the columns of the same names
 * (exact match first, then ignoring case) of an existing table, or of one
 * the sink creates.  Two modes:
 *
 * Exactly-once (SL_PG_EXACTLY_ONCE, two-phase commit on checkpoints).
 *   Each subtask writes its rows inside one transaction per checkpoint
 *   (streamed with COPY).  On checkpoint n's barrier the transaction also
 *   inserts its global id into a commit log table (default
 *   sluice_commits) and is made durable but invisible with
 *   PREPARE TRANSACTION '<gid>'; when checkpoint n completed it becomes
 *   visible with COMMIT PREPARED.  The gid is
 *
 *       sl:<job_id>:<operator_id>:<subtask>:<checkpoint>:<attempt>
 *
 *   with <attempt> 16 hex digits unique to one opening of the writer, so a
 *   gid is never reused.  Before the job starts (and after every restart)
 *   the sink lists pg_prepared_xacts by the prefix sl:<job_id>:<operator_id>:
 *   and commits those whose checkpoint the restored checkpoint covers,
 *   rolling back the rest (0 on a fresh start: all).  An ambiguous
 *   "prepared transaction does not exist" on COMMIT PREPARED (the server
 *   committed it but the answer was lost, or someone rolled it back) is
 *   resolved with the commit log: the gid's row is visible iff the
 *   transaction committed; if not, its rows are lost and the task fails
 *   with a non-retriable error.  After a restore, every transaction the
 *   restored checkpoint names (the writer's checkpointed state) is checked
 *   the same way.  The server must have max_prepared_transactions > 0
 *   (startup is refused otherwise).
 *
 *   A restored checkpoint whose writers committed transactions of later
 *   checkpoints (restoring would write those rows again) is refused.
 *
 *   End of a bounded input: with checkpointing, the rest is prepared by the
 *   final checkpoint (the engine takes one after the end of input, Flink's
 *   FLIP-147) and committed when it completes, so a crash after the end of
 *   input repeats nothing.  Without checkpointing the sink commits the rest
 *   at the end of input (finish).
 *
 *   Fencing: writers hold a shared session advisory lock keyed by
 *   (job_id, operator_id); recovery takes it exclusively, so it waits
 *   until every connection of an earlier run is gone (a killed process's
 *   backends finish their last statement first), and fails after
 *   lock_timeout_ms if some other process still writes for the same ids.
 *   Two jobs that run at the same time need different job ids.
 *
 * Upsert (SL_PG_UPSERT, at-least-once, idempotent).
 *   Rows are buffered and written in batches — when the buffer is full, on
 *   every checkpoint barrier, and at the end of input — with
 *   INSERT ... ON CONFLICT (key) DO UPDATE (the last row of a batch wins
 *   for a key).  The key is key_columns or the table's primary key.
 *   Replaying rows after a restore leaves the same table.
 *
 * Types: BIGINT -> bigint/numeric, INT -> integer/bigint/numeric, DOUBLE ->
 * double precision/real/numeric, BOOLEAN -> boolean, VARCHAR -> any type
 * that accepts its text (text, varchar, json, uuid, ...), BYTES -> bytea,
 * TIMESTAMP(3) -> timestamp (UTC wall time) or timestamptz.  A created
 * table uses bigint, integer, double precision, boolean, text, bytea and
 * timestamp(3), NOT NULL as in the schema, and the key columns (if any) as
 * primary key.
 *
 * Connection loss is retried max_retries times with exponential backoff
 * (reconnect, then resend: an exactly-once transaction is replayed from a
 * copy kept in memory up to max_replay_bytes); after that the task fails
 * with a retriable error so the job's restart strategy takes over.
 */
#ifndef SLUICE_POSTGRES_H
#define SLUICE_POSTGRES_H

#include "sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { SL_PG_EXACTLY_ONCE = 0, SL_PG_UPSERT = 1 } sl_pg_mode_t;

typedef struct sl_pg_sink_opts {
    const char *conninfo;      /* libpq connection string or URI (required) */
    const char *table;         /* [schema.]table, as in SQL (required) */
    sl_pg_mode_t mode;
    /* gid parts, [A-Za-z0-9_.-]{1,63}: job_id required in exactly-once
     * mode; operator_id defaults to the table name (non-matching
     * characters become '_'). */
    const char *job_id;
    const char *operator_id;
    bool create_table;         /* create the table if it does not exist */
    const char *key_columns;   /* "a,b": upsert key (default: primary key) */
    const char *commit_table;  /* commit log (default "sluice_commits") */
    int max_retries;           /* reconnects per operation (default 5) */
    int64_t retry_backoff_ms;  /* first backoff, doubled up to 5 s (default 100) */
    size_t batch_bytes;        /* upsert batch / COPY chunk (default 1 MiB) */
    size_t max_replay_bytes;   /* exactly-once replay copy (default 64 MiB) */
    int64_t lock_timeout_ms;   /* fencing wait (default 30 s) */
    int64_t commit_log_retention_s; /* rows older than this are dropped (default 1 day) */
} sl_pg_sink_opts_t;

/* Defaults: exactly-once, everything else as documented above. */
SL_API sl_pg_sink_opts_t sl_pg_sink_defaults(void);
/* The sink copies every string it needs.  Bad options are reported when
 * the job starts (sl_env_execute fails naming the option). */
SL_API sl_sink_t sl_pg_sink(const sl_pg_sink_opts_t *opts);

#ifdef __cplusplus
}
#endif
#endif
