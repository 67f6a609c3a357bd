/*
 * sql_int.h — internals of the SQL executor (src/sql/): Flink's logical types
 * as a compiled plan writes them, their flat layout in sluice rows, and the
 * expression evaluator over Flink's RexNode trees.
 *
 * Layout: a node's output row (Flink's RowData) becomes one flat sluice row.
 * Each column takes type->width flat fields: 1 for a scalar, the sum of its
 * children's for a ROW (nested rows are flattened in order; a NULL ROW is a
 * ROW whose fields are all NULL — ROW values are only passed through and
 * accessed by field, never compared or sunk).  Storage of a scalar:
 *   BOOLEAN -> SL_BOOLEAN; TINYINT/SMALLINT/INT -> SL_INT; BIGINT -> SL_BIGINT;
 *   DOUBLE -> SL_DOUBLE; DECIMAL(p,s) -> SL_BYTES, 16 bytes: the unscaled
 *   value as a little-endian two's complement 128-bit integer;
 *   CHAR/VARCHAR -> SL_VARCHAR; BINARY/VARBINARY -> SL_BYTES;
 *   TIMESTAMP(p <= 3) -> SL_TIMESTAMP (ms since the epoch, no zone).
 */
#ifndef SL_SQL_INT_H
#define SL_SQL_INT_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "sluice/sluice.h"

__extension__ typedef __int128 sql_i128;

typedef enum sql_kind {
    SK_BOOLEAN, SK_TINYINT, SK_SMALLINT, SK_INT, SK_BIGINT, SK_FLOAT, SK_DOUBLE, SK_DECIMAL,
    SK_CHAR, SK_VARCHAR, SK_BINARY, SK_VARBINARY, SK_TIMESTAMP, SK_TIMESTAMP_LTZ, SK_DATE, SK_TIME,
    SK_INTERVAL_DT, SK_INTERVAL_YM, SK_ROW, SK_NULL, SK_OTHER
} sql_kind_t;

typedef struct sql_type {
    sql_kind_t kind;
    bool nullable;
    int precision; /* DECIMAL/TIMESTAMP/TIME precision, CHAR/VARCHAR/BINARY length */
    int scale;     /* DECIMAL */
    int nfields;   /* ROW */
    char **names;
    struct sql_type **fields;
    int width;     /* flat sluice fields */
    char *text;    /* as written in the plan (messages) */
} sql_type_t;

/* Parses a type as the plan writes it: a string ("DECIMAL(23, 3) NOT NULL",
 * "ROW<`a` BIGINT, ...>") or an object ({"type": "TIMESTAMP_WITHOUT_TIME_ZONE",
 * "precision": 3, ...}).  NULL and a message on error. */
sql_type_t *sql_type_parse(const json_t *j, char *err, size_t errlen);
sql_type_t *sql_type_parse_str(const char *s, char *err, size_t errlen);
void sql_type_free(sql_type_t *t);
/* 0 if the type can be stored in a sluice row (see the layout above), else
 * SL_EINVAL with a message naming the type. */
/* SL_EINVAL, with the message written to err unless err already holds one
 * (the first error of a plan wins); sql_plan.c. */
int sql_perr(char *err, size_t errlen, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

int sql_type_storable(const sql_type_t *t, char *err, size_t errlen);
/* Adds the flat fields of t to schema s, named prefix, prefix.child, ... */
void sql_type_add_fields(const sql_type_t *t, const char *prefix, sl_schema_t *s);
bool sql_kind_integral(sql_kind_t k);  /* TINYINT..BIGINT */
bool sql_kind_string(sql_kind_t k);    /* CHAR, VARCHAR */
bool sql_kind_numeric(sql_kind_t k);   /* integral, FLOAT, DOUBLE, DECIMAL */

/* ---- values and decimals ------------------------------------------------- */

/* A scalar value; which member holds it follows the static type: BOOLEAN,
 * integers, TIMESTAMP and INTERVAL in i (intervals in ms or months), DOUBLE
 * in d, DECIMAL in dec (unscaled, at the type's scale), strings in s/len. */
typedef struct sql_val {
    bool null;
    int64_t i;
    double d;
    sql_i128 dec;
    const char *s;
    uint32_t len;
} sql_val_t;

extern const sql_i128 sql_pow10[39];
/* Unscaled v at scale from -> scale to, rounding HALF_UP; false on overflow. */
bool sql_dec_rescale(sql_i128 v, int from, int to, sql_i128 *out);
/* |v| < 10^precision */
bool sql_dec_fits(sql_i128 v, int precision);
/* Plain text with exactly `scale` fraction digits; returns the length. */
int sql_dec_format(sql_i128 v, int scale, char *buf, size_t cap);
/* Parses "[-]digits[.digits]" into unscaled at scale (HALF_UP); false if bad or too big. */
bool sql_dec_parse(const char *s, size_t len, int scale, sql_i128 *out);

/* ---- expressions ----------------------------------------------------------- */

typedef struct sql_expr sql_expr_t;

/* The input a compiled expression reads: a row of `nfields` columns of
 * these types (flat offsets computed from their widths). */
typedef struct sql_input {
    int ncols;
    sql_type_t **cols;
} sql_input_t;

/* The flat field where input column col starts. */
static inline int sql_flat_of(const sql_input_t *in, int col) {
    int f = 0;
    for (int i = 0; i < col; i++) f += in->cols[i]->width;
    return f;
}

/* Compiles a RexNode (JSON) against the input columns; where (e.g. "node 4
 * (Calc(...))") prefixes messages.  NULL and a message naming the function,
 * type or field that is not supported or malformed. */
sql_expr_t *sql_expr_compile(const json_t *rex, const sql_input_t *in, const char *where, char *err,
                             size_t errlen);
void sql_expr_free(sql_expr_t *e);
const sql_type_t *sql_expr_type(const sql_expr_t *e);
/* The flat field range a pass-through of a ROW (INPUT_REF or FIELD_ACCESS
 * of one) covers; false if e is not such a reference. */
bool sql_expr_flat_ref(const sql_expr_t *e, int *first, int *width);

/* Per-thread scratch of evaluation: string results live here until reset. */
typedef struct sql_scratch {
    struct sql_chunk *chunks;
    char err[256];
} sql_scratch_t;
void sql_scratch_reset(sql_scratch_t *sc);
void sql_scratch_free(sql_scratch_t *sc);

/* Evaluates e over row (whose schema is the input's flat schema).  0, or
 * SL_EINVAL with a message in sc->err (division by zero, a bad CAST). */
int sql_eval(const sql_expr_t *e, const sl_row_t *row, sql_scratch_t *sc, sql_val_t *out);
/* Writes v (of type t) into flat field i of w. */
void sql_val_write(const sql_type_t *t, const sql_val_t *v, sl_row_writer_t *w, int i);
/* Reads flat field i of row as a value of type t. */
void sql_val_read(const sql_type_t *t, const sl_row_t *row, int i, sql_val_t *v);
/* Canonical text of a value (RowFormat.java's): \N, TRUE/FALSE, decimal, ... */
int sql_val_format(const sql_type_t *t, const sql_val_t *v, char *buf, size_t cap);

/* ---- changelogs, keys, group aggregates (sql_agg.c) -------------------------- */

/* A row of an updating stream carries its kind (Flink's RowKind byte) in a
 * trailing hidden INT field, SQL_KIND_FIELD, after its columns' flat fields. */
enum { SQL_KIND_INSERT = 0, SQL_KIND_UPDATE_BEFORE = 1, SQL_KIND_UPDATE_AFTER = 2, SQL_KIND_DELETE = 3 };
#define SQL_KIND_FIELD "$rowkind"

/* The key of a HASH exchange or a GROUP BY: flat fields of these types. */
typedef struct sql_key {
    int n;
    int flat[64];
    const sql_type_t *types[64];
    const char *desc; /* the node, for messages */
} sql_key_t;
/* Canonical bytes of row's key (a NULL byte then the value per field); the
 * length, or SL_EINVAL if longer than cap. */
int sql_key_encode(const sql_key_t *key, const sl_row_t *row, uint8_t *buf, int cap);
/* keyBy with that encoding (key must outlive the job). */
sl_keyed_t *sql_key_by(sl_stream_t *s, const sql_key_t *key);

typedef struct sql_agg sql_agg_t;
/* Parses a stream-exec-group-aggregate_1 node over input `in` (in_changelog:
 * its rows carry a kind) with output columns cols; NULL and a message
 * naming what is not supported. */
sql_agg_t *sql_agg_parse(const json_t *jn, const sql_input_t *in, bool in_changelog, int ncols,
                         sql_type_t *const *cols, const char *desc, char *err, size_t errlen);
void sql_agg_free(sql_agg_t *a);
/* The keyed process operator of the aggregate, keyed by its grouping
 * columns (none: one key, so one subtask, as Flink's SINGLETON); out_schema
 * is the node's flat schema with the kind field last. */
sl_stream_t *sql_agg_build(sl_env_t *env, sl_stream_t *in, sql_agg_t *a, sl_schema_t *out_schema);
/* v narrowed to the integer kind k, wrapping as Java does. */
int64_t sql_narrow_int(int64_t v, sql_kind_t k);
/* The total order of MIN/MAX values of type t (strings by their UTF-8
 * bytes, as Flink's BinaryStringData): < 0, 0, > 0. */
int sql_cmp_val(const sql_type_t *t, const sql_val_t *a, const sql_val_t *b);

/* ---- window aggregates (sql_window.c) ------------------------------------------ */

typedef struct sql_window sql_window_t;
/* Parses a window aggregate over input `in` with output columns cols: jn is
 * the node (its configuration and namedWindowProperties), spec the node that
 * carries grouping, aggCalls and the window (jn itself, or the local node of
 * a local/global pair); legacy: stream-exec-group-window-aggregate's
 * "window", else a window TVF's "windowing".  NULL and a message naming
 * what is not supported. */
sql_window_t *sql_window_parse(const json_t *jn, const json_t *spec, bool legacy, const sql_input_t *in, int ncols,
                               sql_type_t *const *cols, const char *desc, char *err, size_t errlen);
void sql_window_free(sql_window_t *w);
/* The event-time window operator of the aggregate, keyed by its grouping
 * columns (none: one key); out_schema is the node's flat schema. */
sl_stream_t *sql_window_build(sl_env_t *env, sl_stream_t *in, sql_window_t *w, sl_schema_t *out_schema);

/* ---- deduplication (sql_dedup.c) and Top-N (sql_rank.c) ---------------------- */

typedef struct sql_dedup sql_dedup_t;
/* Parses a stream-exec-deduplicate_1 node over input `in`; NULL and a
 * message naming what is not supported (mini-batch, an updating input, ...). */
sql_dedup_t *sql_dedup_parse(const json_t *jn, const sql_input_t *in, bool in_changelog, const char *desc, char *err,
                             size_t errlen);
void sql_dedup_free(sql_dedup_t *d);
/* Whether the output carries a row kind (false: insert-only, keep-first on proctime). */
bool sql_dedup_out_changelog(const sql_dedup_t *d);
/* The keyed process operator, keyed by the unique key; out_schema is the
 * input's flat schema (plus the kind field if the output is a changelog). */
sl_stream_t *sql_dedup_build(sl_env_t *env, sl_stream_t *in, sql_dedup_t *d, sl_schema_t *out_schema);

typedef struct sql_rank sql_rank_t;
/* Parses a stream-exec-rank_1 node over input `in`; NULL and a message
 * naming what is not supported (RANK, a strategy, a variable range, ...). */
sql_rank_t *sql_rank_parse(const json_t *jn, const sql_input_t *in, bool in_changelog, const char *desc, char *err,
                           size_t errlen);
void sql_rank_free(sql_rank_t *r);
/* Whether the output has the rank number column (after the input's). */
bool sql_rank_out_rank(const sql_rank_t *r);
/* The keyed process operator, keyed by the partition columns; out_schema is
 * the input's flat fields, the rank number if any, then the kind field. */
sl_stream_t *sql_rank_build(sl_env_t *env, sl_stream_t *in, sql_rank_t *r, sl_schema_t *out_schema);

#endif
