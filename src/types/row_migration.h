/*
 * row_migration.h — schema evolution of rows kept in state (Flink's
 * TypeSerializerSchemaCompatibility for its POJO / Avro serializers).
 *
 * A row written with schema `from` is read with schema `to`, fields matched
 * by name:
 *   - a field of `to` not in `from` is NULL, so it must be nullable
 *     (Avro's "a field added needs a default");
 *   - a field of `from` not in `to` is dropped;
 *   - a field kept may widen as Avro promotes: INT to BIGINT or DOUBLE,
 *     BIGINT to DOUBLE, VARCHAR and BYTES into each other; NOT NULL may
 *     become nullable.  Anything else (narrowing, BIGINT to VARCHAR,
 *     nullable to NOT NULL, TIMESTAMP to or from another type) is
 *     incompatible.
 * Equal schemas need no migration (the compiled migration says so).
 */
#ifndef SL_ROW_MIGRATION_H
#define SL_ROW_MIGRATION_H

#include <stdbool.h>
#include <stddef.h>

#include "sluice/row.h"

typedef struct sl_row_migration sl_row_migration_t;

/* Compiles the migration from `from` to `to`.  0 with *out set (free with
 * sl_row_migration_free); SL_EINVAL when incompatible, with `why` naming
 * the field and both types ("field 'n': INT NOT NULL cannot become
 * VARCHAR").  Any thread. */
int sl_row_migration_new(const sl_schema_t *from, const sl_schema_t *to, sl_row_migration_t **out, char *why,
                         size_t cap);
void sl_row_migration_free(sl_row_migration_t *m);
/* True when rows of `from` are already rows of `to` (same fields, types
 * and nullability in the same order). */
bool sl_row_migration_identity(const sl_row_migration_t *m);
const sl_schema_t *sl_row_migration_to(const sl_row_migration_t *m);
/* Every stored item starts with `bytes` bytes that are not part of the row
 * (a TTL state's 8-byte timestamp, ttl.h): a migration of the block keeps
 * them as they are and migrates (or, for an identity, checks) only the row
 * after them.  0 (the default): the item is the row.  Before the
 * migration is used. */
void sl_row_migration_set_prefix(sl_row_migration_t *m, uint32_t bytes);
uint32_t sl_row_migration_prefix(const sl_row_migration_t *m);
/* Rewrites one row of `from` (validated first) into w as a row of `to`.
 * 0, or SL_EFORMAT when the bytes are not a row of `from` (err says why). */
int sl_row_migrate(const sl_row_migration_t *m, const uint8_t *p, uint32_t len, sl_row_writer_t *w, char *err,
                   size_t cap);

#endif
