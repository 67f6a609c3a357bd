/*
 * state_schemas.h — the row schemas of typed keyed state in checkpoints and
 * savepoints, and the migrations a restore applies (schema evolution).
 *
 * Every subtask of an operator with typed states (sl_keyed_state_schema)
 * writes the blob "state-schemas" next to its keyed state:
 *
 *   "SLS2", u32 count, then per state: u32 len, name, u32 len, schema
 *   DDL, i64 TTL in ms (0: no TTL, -1: not known to this subtask — the
 *   state was neither declared in its run nor restored)
 *   (little-endian; DDL as sl_schema_format writes it).  The first
 *   version, without the magic and the TTL, is read too: typed states had
 *   no TTL then.
 *
 * A typed state with a TTL stores the 8-byte timestamp (ttl.h) in front of
 * every row; its migration keeps the timestamp and migrates the row after
 * it.  Whether a block's items carry the timestamp is what the block says
 * (state_backend.h, version 2); a version-1 block does not say, and the TTL
 * recorded here decides (sl_state_migrations_apply writes it into the
 * rewritten block).  Turning the TTL on or off between the recording and
 * the restoring job is Flink 2.2's TTL migration: the backend adds or
 * strips the timestamps when open declares the state (register_state,
 * sl_kb_ttl_migrate), after the rows were migrated here.
 *
 * A restore compiles, for every typed state of the new job, a migration
 * from the schema the blob recorded (row_migration.h): the JobManager to
 * refuse an incompatible change before the job starts, the TaskManager to
 * rewrite the values while it loads them (sl_kbf_migrate).  A state the
 * blob does not name (it had no schema, or did not exist) is checked to be
 * rows of the new schema; a state that had a schema and has none now is
 * loaded as bytes.
 */
#ifndef SL_STATE_SCHEMAS_H
#define SL_STATE_SCHEMAS_H

#include "checkpoint/metadata.h"
#include "common/common.h"
#include "sluice/row.h"

#define SL_STATE_SCHEMAS_BLOB "state-schemas"

typedef struct sl_state_migrations sl_state_migrations_t;

/* Appends the blob for these states to out; ttls[i] is state i's TTL in
 * ms (0 none, -1 unknown); ttls NULL: all unknown. */
void sl_state_schemas_encode(int n, const char *const *names, sl_schema_t *const *schemas, const int64_t *ttls,
                             sl_buf_t *out);

/* The migrations of operator `uid` (mo: its entry in the restored
 * metadata, NULL when it had none) to the typed states (names, schemas).
 * 0 with *out (NULL when n == 0); SL_EINVAL naming the operator, the state,
 * the field and both types when a change is incompatible; SL_EFORMAT for a
 * damaged blob.  *changed: some state's schema differs (a rewrite is
 * needed, not only a check). */
int sl_state_migrations_new(const sl_ckpt_operator_t *mo, const char *uid, int n, const char *const *names,
                            sl_schema_t *const *schemas, sl_state_migrations_t **out, bool *changed, char *err,
                            size_t errlen);
void sl_state_migrations_free(sl_state_migrations_t *m);
/* The TTL (ms; 0 none) that the snapshot recorded for typed state i (the
 * order given to sl_state_migrations_new), -1 when it recorded none. */
int64_t sl_state_migrations_ttl(const sl_state_migrations_t *m, int i);
/* The TTL operator mo recorded for state `name`: 1 with *ttl_ms (0: no
 * TTL), 0 when it recorded none, SL_EFORMAT when the blob is damaged. */
int sl_state_ttl_recorded(const sl_ckpt_operator_t *mo, const char *name, int64_t *ttl_ms);
/* The schema operator mo recorded for state `name`: 1 with *out (a new
 * reference), 0 when it recorded none, SL_EFORMAT when the blob or the
 * DDL is damaged. */
int sl_state_schema_recorded(const sl_ckpt_operator_t *mo, const char *name, sl_schema_t **out);
/* Rewrites one canonical keyed-state block (state_backend.h) into out. */
int sl_state_migrations_apply(const sl_state_migrations_t *m, const uint8_t *block, size_t len, int max_parallelism,
                              int kg, sl_buf_t *out, char *err, size_t errlen);

#endif
