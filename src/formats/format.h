/*
 * format.h — record formats: one line of text <-> one binary row.
 *
 * Two formats (sl_format_t in sluice.h):
 *
 *   JSON  one object per line, field names -> values (parsed by jansson).
 *         A missing or null field is NULL when the field is nullable and an
 *         error when it is NOT NULL; names not in the schema are ignored.
 *         BIGINT/INT: integers; DOUBLE: numbers or "NaN"/"Infinity"/
 *         "-Infinity"; BOOLEAN: true/false; VARCHAR: strings; BYTES: base64
 *         strings; TIMESTAMP: integer epoch millis or an ISO-8601 string.
 *   CSV   RFC 4180: fields in schema order separated by ',', optionally
 *         enclosed in '"' with '""' for a quote; a quoted field may span
 *         lines.  An empty unquoted field is NULL (nullable fields) or ""
 *         (NOT NULL VARCHAR/BYTES); BYTES are hex; BOOLEAN true/false (any
 *         case); TIMESTAMP integer millis or ISO-8601.  Spaces around
 *         unquoted non-string values are ignored.
 *
 * Timestamps are written as "2026-12-01T10:00:00.123Z" (or as integer
 * millis outside years 0000..9999); the parser also takes a space for 'T',
 * no fraction or up to 9 fraction digits (truncated to ms), and 'Z',
 * "+hh:mm", "+hhmm" or no zone (UTC).  Doubles are written in the
 * shortest form that reads back to the same bits.
 *
 * A record longer than SL_FORMAT_MAX_RECORD bytes is refused (rows address
 * their bytes with 32-bit offsets).
 *
 * Errors are SL_EFORMAT with a message "line N, field 'f': reason" (or
 * "line N: reason" when no field is to blame); the caller supplies N and
 * prefixes the file or topic.  Decoding never reads past `len`, accepts
 * any bytes (NULs, invalid UTF-8, huge lines) and never crashes.
 *
 * Threads: a decoder is used by one thread at a time; encoders are pure.
 */
#ifndef SL_FORMAT_H
#define SL_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "sluice/sluice.h"

#define SL_FORMAT_MAX_RECORD (1u << 30)

/* A decoder for one schema and format.  It borrows the schema (which must
 * outlive it) and owns a scratch buffer reused between lines. */
typedef struct sl_decoder {
    sl_format_t fmt;
    const sl_schema_t *schema;
    sl_buf_t scratch;
} sl_decoder_t;

void sl_decoder_init(sl_decoder_t *d, sl_format_t fmt, const sl_schema_t *schema);
void sl_decoder_free(sl_decoder_t *d);

/* Decodes one record (`len` bytes, without the line terminator; a CSV
 * record may contain the newlines of a multi-line quoted field) into w,
 * which it begins with the decoder's schema.  Returns 0, or SL_EFORMAT with
 * the reason in err; on error the writer holds a partial row to discard. */
int sl_json_decode(sl_decoder_t *d, const char *line, size_t len, int64_t lineno, sl_row_writer_t *w,
                   char *err, size_t errlen);
int sl_csv_decode(sl_decoder_t *d, const char *line, size_t len, int64_t lineno, sl_row_writer_t *w,
                  char *err, size_t errlen);
static inline int sl_decode_line(sl_decoder_t *d, const char *line, size_t len, int64_t lineno,
                                 sl_row_writer_t *w, char *err, size_t errlen) {
    return d->fmt == SL_FMT_CSV ? sl_csv_decode(d, line, len, lineno, w, err, errlen)
                                : sl_json_decode(d, line, len, lineno, w, err, errlen);
}

/* Appends row (a valid row) as one line of the format to out, without a
 * line terminator.  JSON strings that are not valid UTF-8 get U+FFFD for
 * each bad byte. */
void sl_json_encode(const sl_row_t *row, sl_buf_t *out);
void sl_csv_encode(const sl_row_t *row, sl_buf_t *out);
static inline void sl_encode_row(sl_format_t fmt, const sl_row_t *row, sl_buf_t *out) {
    if (fmt == SL_FMT_CSV) sl_csv_encode(row, out);
    else sl_json_encode(row, out);
}

/* CSV framing.  True when the line (a CSV header) consists of exactly the
 * schema's field names in order (case-insensitive, optionally quoted). */
bool sl_csv_is_header(const sl_schema_t *s, const char *line, size_t len);
/* True when the text ends inside a quoted field, i.e. the next line
 * continues the record.  `open`: the text itself continues an open record
 * (so scanning a long record line by line stays linear). */
bool sl_csv_record_open(const char *line, size_t len, bool open);

/* Shared value helpers (json.c). */
/* Parses an ISO-8601 timestamp (whole string) into epoch millis: 0 or -1. */
int sl_parse_iso_ts(const char *s, size_t len, int64_t *ms);
/* Writes "YYYY-MM-DDTHH:MM:SS.mmmZ" (24 chars + NUL) into buf (>= 32
 * bytes) and returns its length; outside years 0..9999 returns 0. */
size_t sl_format_iso_ts(int64_t ms, char *buf);
/* Decimal digits of v into buf (>= 21 bytes); returns the length. */
size_t sl_format_i64(int64_t v, char *buf);
/* Shortest "%.{15,16,17}g" that reads back exactly, with ".0" added to
 * integral values; NaN/Infinity/-Infinity spelled out.  buf >= 32 bytes. */
size_t sl_format_double(double d, char *buf);
/* Describes a raw input value for an error message: "\"abc\"" with
 * non-printable bytes escaped and long values cut. */
void sl_format_got(const char *p, size_t len, char *buf, size_t cap);

#endif
