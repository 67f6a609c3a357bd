/* schema_int.h — the schema struct (private to types/ and the hot paths
 * that need the fixed length without a call). */
#ifndef SL_SCHEMA_INT_H
#define SL_SCHEMA_INT_H

#include <stdatomic.h>

#include "sluice/row.h"

typedef struct sl_field {
    char *name;
    sl_type_t type;
    bool nullable;
} sl_field_t;

struct sl_schema {
    int n;                 /* first two fields: sl_schema_hdr_t (row.h) */
    uint32_t bitmap_bytes;
    atomic_int refs;
    int cap;
    sl_field_t *fields;
    uint32_t fixed_len; /* bitmap + slots */
    uint8_t *tmpl;      /* a fresh row's fixed part: NULL bits of nullable fields set */
};

/* When the last sl_schema_parse on this thread failed with no err buffer
 * (a schema parsed inline as a builder's argument), copies its message into
 * buf, forgets it and returns true; a successful parse forgets it too.
 * Builders that take a schema call this when given NULL, so the job's error
 * says what was wrong with the DDL. */
bool sl__schema_take_parse_error(char *buf, size_t cap);

#endif
