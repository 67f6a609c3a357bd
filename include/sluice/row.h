/*
 * sluice/row.h — typed rows and their schemas.
 *
 * A row is a flat, self-describing byte image (the "binary row"): a null
 * bitmap, one 8-byte slot per field, then a variable-length area for
 * VARCHAR and BYTES.  The same bytes are the in-memory form, the form
 * stored in state, and the form written into network buffers, so moving a
 * row between tasks is a memcpy.  Layout, for n fields:
 *
 *     [ null bitmap: 8 * ceil(n / 64) bytes ][ n * 8-byte slots ][ var area ]
 *
 * A fixed-width field lives in its slot (little-endian).  A VARCHAR/BYTES
 * slot holds (u32 offset from row start, u32 length).  All multi-byte reads
 * go through memcpy, so a row may sit at any address in a buffer.
 */
#ifndef SLUICE_ROW_H
#define SLUICE_ROW_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define SL_API __attribute__((visibility("default")))
#else
#define SL_API
#endif

/* Error codes: 0 is success, every error is negative. */
enum {
    SL_OK = 0,
    SL_EINVAL = -1,    /* bad argument, job, config or schema (fatal) */
    SL_ENOMEM = -2,    /* out of memory (fatal) */
    SL_EIO = -3,       /* I/O error (retriable) */
    SL_EFORMAT = -4,   /* malformed record or file (fatal unless skipped) */
    SL_ESTATE = -5,    /* state backend failure (retriable) */
    SL_EUSER = -6,     /* a user function reported failure (retriable) */
    SL_ECANCELED = -7, /* the job was cancelled */
    SL_ENOTFOUND = -8, /* no such field, tag, key ... */
};
SL_API const char *sl_strerror(int rc);
/* True when a restart may cure the error (I/O, state, user function). */
SL_API bool sl_err_retriable(int rc);

typedef enum sl_type {
    SL_BIGINT = 0,
    SL_INT,
    SL_DOUBLE,
    SL_BOOLEAN,
    SL_VARCHAR,
    SL_BYTES,
    SL_TIMESTAMP, /* milliseconds since the epoch, UTC (TIMESTAMP(3)) */
} sl_type_t;

SL_API const char *sl_type_name(sl_type_t t);

/* ---- schema ---------------------------------------------------------- */

typedef struct sl_schema sl_schema_t;

/* A new, empty schema with one reference.  Schemas are immutable once a
 * job uses them; reference counts are atomic so tasks may share them. */
SL_API sl_schema_t *sl_schema_new(void);
/* Parses "card_id BIGINT NOT NULL, amount DOUBLE, ts TIMESTAMP(3)".
 * On error returns NULL and writes a message naming the offending part
 * into err (if errlen > 0). */
SL_API sl_schema_t *sl_schema_parse(const char *ddl, char *err, size_t errlen);
SL_API int sl_schema_add(sl_schema_t *s, const char *name, sl_type_t type, bool nullable);
SL_API sl_schema_t *sl_schema_ref(sl_schema_t *s);
SL_API void sl_schema_unref(sl_schema_t *s);
SL_API int sl_schema_field_count(const sl_schema_t *s);
/* Index of the field called name, or SL_ENOTFOUND. */
SL_API int sl_schema_index(const sl_schema_t *s, const char *name);
SL_API const char *sl_schema_field_name(const sl_schema_t *s, int i);
SL_API sl_type_t sl_schema_field_type(const sl_schema_t *s, int i);
SL_API bool sl_schema_field_nullable(const sl_schema_t *s, int i);
SL_API bool sl_schema_equal(const sl_schema_t *a, const sl_schema_t *b);
/* Writes "a BIGINT NOT NULL, b VARCHAR" into buf; returns the length. */
SL_API size_t sl_schema_format(const sl_schema_t *s, char *buf, size_t cap);

/* ---- rows (read side) -------------------------------------------------- */

/* A view of a row: borrowed bytes, valid for the duration of the callback
 * that received it unless the documentation says otherwise. */
typedef struct sl_row {
    const uint8_t *data;
    uint32_t len;
    const sl_schema_t *schema;
} sl_row_t;

static inline uint32_t sl__row_bitmap_bytes(int nfields) { return (uint32_t)(((nfields + 63) / 64) * 8); }
static inline uint32_t sl__row_slot(int nfields, int i) { return sl__row_bitmap_bytes(nfields) + (uint32_t)i * 8u; }

/* Field accessors are inline: a schema starts with this header (private
 * otherwise), so a field's slot is found without a call. */
typedef struct sl_schema_hdr {
    int nfields;
    uint32_t bitmap_bytes; /* 8 * ceil(nfields / 64) */
} sl_schema_hdr_t;

static inline const uint8_t *sl__rslot(const sl_row_t *r, int i) {
    return r->data + ((const sl_schema_hdr_t *)(const void *)r->schema)->bitmap_bytes + (uint32_t)i * 8u;
}
static inline bool sl_row_is_null(const sl_row_t *r, int i) { return (r->data[i >> 3] >> (i & 7)) & 1; }
/* BIGINT, TIMESTAMP */
static inline int64_t sl_row_i64(const sl_row_t *r, int i) {
    int64_t v;
    memcpy(&v, sl__rslot(r, i), 8);
    return v;
}
/* INT */
static inline int32_t sl_row_i32(const sl_row_t *r, int i) {
    int32_t v;
    memcpy(&v, sl__rslot(r, i), 4);
    return v;
}
/* DOUBLE */
static inline double sl_row_f64(const sl_row_t *r, int i) {
    double v;
    memcpy(&v, sl__rslot(r, i), 8);
    return v;
}
/* BOOLEAN */
static inline bool sl_row_bool(const sl_row_t *r, int i) { return *sl__rslot(r, i) != 0; }
/* VARCHAR / BYTES: pointer into the row (not NUL-terminated) and length. */
SL_API const char *sl_row_str(const sl_row_t *r, int i, uint32_t *len);
SL_API const uint8_t *sl_row_bytes(const sl_row_t *r, int i, uint32_t *len);
/* The raw bytes that identify field i as a key (slot for fixed types, the
 * payload for VARCHAR/BYTES, empty for NULL). */
SL_API const uint8_t *sl_row_field_key(const sl_row_t *r, int i, uint32_t *len);
/* Checks that the bytes are a well-formed row of the schema (bounds,
 * offsets).  Used on every row that comes from outside. */
SL_API int sl_row_validate(const sl_row_t *r);

/* ---- rows (write side) ------------------------------------------------- */

/* A row writer owns a growable buffer; after sl_rw_begin the fields may be
 * set in any order.  Unset fields are NULL (or zero for NOT NULL fields).
 * sl_rw_row() returns a view valid until the next sl_rw_begin. */
typedef struct sl_row_writer {
    uint8_t *buf;
    uint32_t cap;
    uint32_t len;  /* bytes used: fixed part + var area written so far */
    const sl_schema_t *schema;
    int nfields;
    int err;       /* sticky: first error (e.g. SL_ENOMEM) */
} sl_row_writer_t;

SL_API void sl_rw_init(sl_row_writer_t *w);
SL_API void sl_rw_free(sl_row_writer_t *w);
SL_API void sl_rw_begin(sl_row_writer_t *w, const sl_schema_t *s);
SL_API void sl_rw_set_null(sl_row_writer_t *w, int i);
static inline uint8_t *sl__wslot(sl_row_writer_t *w, int i) {
    w->buf[i >> 3] &= (uint8_t) ~(1u << (i & 7));
    return w->buf + sl__row_bitmap_bytes(w->nfields) + (uint32_t)i * 8u;
}
static inline void sl_rw_set_i64(sl_row_writer_t *w, int i, int64_t v) { memcpy(sl__wslot(w, i), &v, 8); }
static inline void sl_rw_set_i32(sl_row_writer_t *w, int i, int32_t v) {
    int64_t wide = (int64_t)(uint32_t)v; /* the slot's high half stays zero */
    memcpy(sl__wslot(w, i), &wide, 8);
}
static inline void sl_rw_set_f64(sl_row_writer_t *w, int i, double v) { memcpy(sl__wslot(w, i), &v, 8); }
static inline void sl_rw_set_bool(sl_row_writer_t *w, int i, bool v) {
    int64_t b = v ? 1 : 0;
    memcpy(sl__wslot(w, i), &b, 8);
}
SL_API void sl_rw_set_str(sl_row_writer_t *w, int i, const char *s, uint32_t len);
SL_API void sl_rw_set_bytes(sl_row_writer_t *w, int i, const void *p, uint32_t len);
/* Copies field src_i of row src into field i (same type required). */
SL_API void sl_rw_copy_field(sl_row_writer_t *w, int i, const sl_row_t *src, int src_i);
/* Copies a whole row of the same schema. */
SL_API void sl_rw_copy_row(sl_row_writer_t *w, const sl_row_t *src);
SL_API sl_row_t sl_rw_row(const sl_row_writer_t *w);

/* ---- fields by name, type-checked when the job is built ------------------
 *
 * A typed handle of a field, resolved once (sl_field_f64(env, schema,
 * "amount") in sluice.h: an unknown name or another type is reported by
 * name and the job refused) and then used on every row at the cost of an
 * index:  double a = sl_get_f64(&rec->row, amount).  Each type has its own
 * handle, so reading a field as the wrong type does not compile. */
typedef struct sl_field_i64 { int i; } sl_field_i64_t;   /* BIGINT or TIMESTAMP */
typedef struct sl_field_i32 { int i; } sl_field_i32_t;   /* INT */
typedef struct sl_field_f64 { int i; } sl_field_f64_t;   /* DOUBLE */
typedef struct sl_field_bool { int i; } sl_field_bool_t; /* BOOLEAN */
typedef struct sl_field_str { int i; } sl_field_str_t;   /* VARCHAR or BYTES */

static inline int64_t sl_get_i64(const sl_row_t *r, sl_field_i64_t f) { return sl_row_i64(r, f.i); }
static inline int32_t sl_get_i32(const sl_row_t *r, sl_field_i32_t f) { return sl_row_i32(r, f.i); }
static inline double sl_get_f64(const sl_row_t *r, sl_field_f64_t f) { return sl_row_f64(r, f.i); }
static inline bool sl_get_bool(const sl_row_t *r, sl_field_bool_t f) { return sl_row_bool(r, f.i); }
static inline const char *sl_get_str(const sl_row_t *r, sl_field_str_t f, uint32_t *len) {
    return sl_row_str(r, f.i, len);
}
static inline void sl_set_i64(sl_row_writer_t *w, sl_field_i64_t f, int64_t v) { sl_rw_set_i64(w, f.i, v); }
static inline void sl_set_i32(sl_row_writer_t *w, sl_field_i32_t f, int32_t v) { sl_rw_set_i32(w, f.i, v); }
static inline void sl_set_f64(sl_row_writer_t *w, sl_field_f64_t f, double v) { sl_rw_set_f64(w, f.i, v); }
static inline void sl_set_bool(sl_row_writer_t *w, sl_field_bool_t f, bool v) { sl_rw_set_bool(w, f.i, v); }
static inline void sl_set_str(sl_row_writer_t *w, sl_field_str_t f, const char *s, uint32_t len) {
    sl_rw_set_str(w, f.i, s, len);
}

/* Formats field i as text (for print sinks and error messages). */
SL_API size_t sl_row_format_field(const sl_row_t *r, int i, char *buf, size_t cap);

#ifdef __cplusplus
}
#endif
#endif
