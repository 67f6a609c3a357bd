/*
 * csv.c — the CSV line format (RFC 4180; rules in format.h).
 *
 * A record is split into fields by a small scanner: an unquoted field runs
 * to the next ',' and may not contain '"'; a quoted field runs to the
 * closing quote, which must be followed by ',' or the end, and '""' inside
 * it is one quote.  Field bytes point into the line when no unescaping is
 * needed, else into the decoder's scratch buffer.
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "formats/format.h"

typedef struct csv_field {
    const char *p;
    size_t n;
    bool quoted;
    bool in_scratch; /* p points into the scratch buffer (writable) */
} csv_field_t;

/* Scans the field at *pos.  Sets *more when a ',' followed it.  Returns 0,
 * or -1 with the reason in *why. */
static int next_field(const char *line, size_t len, size_t *pos, sl_buf_t *scratch, csv_field_t *f, bool *more,
                      const char **why) {
    size_t i = *pos;
    *more = false;
    f->quoted = f->in_scratch = false;
    if (i < len && line[i] == '"') {
        size_t start = ++i;
        bool escapes = false;
        for (;;) {
            const char *q = i < len ? memchr(line + i, '"', len - i) : NULL;
            if (!q) {
                *why = "unterminated quoted field";
                return -1;
            }
            i = (size_t)(q - line) + 1;
            if (i < len && line[i] == '"') {
                escapes = true;
                i++;
                continue;
            }
            break;
        }
        size_t end = i - 1; /* the closing quote */
        f->quoted = true;
        if (!escapes) {
            f->p = line + start;
            f->n = end - start;
        } else {
            scratch->len = 0;
            sl_buf_reserve(scratch, end - start);
            for (size_t k = start; k < end; k++) {
                scratch->p[scratch->len++] = (uint8_t)line[k];
                if (line[k] == '"') k++;
            }
            f->p = (const char *)scratch->p;
            f->n = scratch->len;
            f->in_scratch = true;
        }
        if (i < len && line[i] != ',') {
            *why = "unexpected character after a closing quote";
            return -1;
        }
    } else {
        const char *c = i < len ? memchr(line + i, ',', len - i) : NULL;
        size_t end = c ? (size_t)(c - line) : len;
        if (end > i && memchr(line + i, '"', end - i)) {
            *why = "'\"' inside an unquoted field (quote the whole field)";
            return -1;
        }
        f->p = line + i;
        f->n = end - i;
        i = end;
    }
    if (i < len) { /* at a ',' */
        *more = true;
        i++;
    }
    *pos = i;
    return 0;
}

static bool is_blank(char c) { return c == ' ' || c == '\t'; }

/* 0, -1 (syntax) or -2 (out of range). */
static int parse_i64(const char *p, size_t n, int64_t *out) {
    size_t i = 0;
    bool neg = false;
    if (i < n && (p[i] == '-' || p[i] == '+')) neg = p[i++] == '-';
    if (i == n) return -1;
    uint64_t v = 0, lim = neg ? (uint64_t)INT64_MAX + 1 : (uint64_t)INT64_MAX;
    int rc = 0;
    for (; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return -1;
        unsigned dgt = (unsigned)(p[i] - '0');
        if (v > (lim - dgt) / 10) rc = -2;
        else v = v * 10 + dgt;
    }
    if (rc) return rc;
    *out = neg ? (int64_t)(0 - v) : (int64_t)v;
    return 0;
}

/* 0, -1 (syntax) or -2 (out of range). */
static int parse_f64(const char *p, size_t n, double *out) {
    size_t i = (n && (p[0] == '-' || p[0] == '+')) ? 1 : 0;
    if (n - i == 3 && strncasecmp(p + i, "nan", 3) == 0) {
        *out = NAN;
        return 0;
    }
    if ((n - i == 3 && strncasecmp(p + i, "inf", 3) == 0) || (n - i == 8 && strncasecmp(p + i, "infinity", 8) == 0)) {
        *out = p[0] == '-' ? -INFINITY : INFINITY;
        return 0;
    }
    if (i == n || n > 4096) return -1;
    for (size_t k = i; k < n; k++)
        if (!((p[k] >= '0' && p[k] <= '9') || p[k] == '.' || p[k] == 'e' || p[k] == 'E' || p[k] == '-' ||
              p[k] == '+'))
            return -1;
    /* Fast path (Clinger): up to 15 digits and no exponent is an exact
     * integer divided by an exact power of ten, so one correctly rounded
     * division gives what strtod would. */
    static const double pow10[] = {1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15};
    int64_t m = 0;
    int nd = 0, frac = -1;
    size_t k = i;
    for (; k < n && nd <= 15; k++) {
        if (p[k] == '.' && frac < 0) frac = 0;
        else if (p[k] >= '0' && p[k] <= '9') m = m * 10 + (p[k] - '0'), nd++, frac += frac >= 0;
        else break;
    }
    if (k == n && nd >= 1 && nd <= 15) {
        double v = (double)m / pow10[frac > 0 ? frac : 0];
        *out = p[0] == '-' ? -v : v;
        return 0;
    }
    char local[128];
    char *tmp = n < sizeof local ? local : sl_malloc(n + 1);
    memcpy(tmp, p, n);
    tmp[n] = 0;
    char *end;
    errno = 0;
    double v = strtod(tmp, &end);
    int rc = end == tmp + n ? 0 : -1;
    if (!rc && errno == ERANGE && isinf(v)) rc = -2;
    if (tmp != local) sl_free(tmp);
    if (!rc) *out = v;
    return rc;
}

static int hexval(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Decodes hex into dst (may be src itself: writing trails reading). */
static int hex_decode(const char *src, size_t n, uint8_t *dst) {
    if (n % 2) return -1;
    for (size_t k = 0; k < n / 2; k++) {
        int hi = hexval(src[2 * k]), lo = hexval(src[2 * k + 1]);
        if (hi < 0 || lo < 0) return -1;
        dst[k] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

/* Converts one field into field i of the row. */
static int set_field(sl_decoder_t *d, sl_row_writer_t *w, int i, csv_field_t *f, int64_t lineno, char *err,
                     size_t errlen) {
    const sl_schema_t *s = d->schema;
    const char *name = sl_schema_field_name(s, i);
    sl_type_t t = sl_schema_field_type(s, i);
    const char *p = f->p;
    size_t n = f->n;
    char got[128];
    if (!f->quoted && n == 0) {
        if (sl_schema_field_nullable(s, i)) {
            sl_rw_set_null(w, i);
            return 0;
        }
        if (t != SL_VARCHAR && t != SL_BYTES)
            return sl_errf(err, errlen, SL_EFORMAT, "line %" PRId64 ", field '%s': empty, but the field is NOT NULL",
                           lineno, name);
    }
    if (t != SL_VARCHAR && t != SL_BYTES) {
        while (n && is_blank(p[0])) p++, n--;
        while (n && is_blank(p[n - 1])) n--;
    }
    const char *expected = NULL;
    int64_t v;
    double dv;
    int rc;
    switch (t) {
    case SL_BIGINT:
    case SL_INT:
        rc = parse_i64(p, n, &v);
        if (rc == 0 && t == SL_INT && (v < INT32_MIN || v > INT32_MAX)) rc = -2;
        if (rc == -1) {
            expected = "an integer";
        } else if (rc == -2) {
            sl_format_got(p, n, got, sizeof got);
            return sl_errf(err, errlen, SL_EFORMAT, "line %" PRId64 ", field '%s': %s is out of range for %s", lineno,
                           name, got, sl_type_name(t));
        } else if (t == SL_INT) {
            sl_rw_set_i32(w, i, (int32_t)v);
        } else {
            sl_rw_set_i64(w, i, v);
        }
        break;
    case SL_DOUBLE:
        rc = parse_f64(p, n, &dv);
        if (rc == -1) {
            expected = "a number";
        } else if (rc == -2) {
            sl_format_got(p, n, got, sizeof got);
            return sl_errf(err, errlen, SL_EFORMAT, "line %" PRId64 ", field '%s': %s is out of range for DOUBLE",
                           lineno, name, got);
        } else {
            sl_rw_set_f64(w, i, dv);
        }
        break;
    case SL_BOOLEAN:
        if (n == 4 && strncasecmp(p, "true", 4) == 0) sl_rw_set_bool(w, i, true);
        else if (n == 5 && strncasecmp(p, "false", 5) == 0) sl_rw_set_bool(w, i, false);
        else expected = "true or false";
        break;
    case SL_VARCHAR:
        sl_rw_set_str(w, i, p, (uint32_t)n);
        break;
    case SL_BYTES: {
        uint8_t *dst;
        if (f->in_scratch) {
            dst = (uint8_t *)p; /* decode in place */
        } else {
            d->scratch.len = 0;
            sl_buf_reserve(&d->scratch, n / 2 + 1);
            dst = d->scratch.p;
        }
        if (hex_decode(p, n, dst) != 0) expected = "hex bytes";
        else sl_rw_set_bytes(w, i, dst, (uint32_t)(n / 2));
        break;
    }
    case SL_TIMESTAMP:
        if (parse_i64(p, n, &v) == 0 || sl_parse_iso_ts(p, n, &v) == 0) sl_rw_set_i64(w, i, v);
        else expected = "a timestamp (epoch millis or ISO-8601)";
        break;
    }
    if (expected) {
        sl_format_got(p, n, got, sizeof got);
        return sl_errf(err, errlen, SL_EFORMAT, "line %" PRId64 ", field '%s': expected %s, got %s", lineno, name,
                       expected, got);
    }
    return 0;
}

int sl_csv_decode(sl_decoder_t *d, const char *line, size_t len, int64_t lineno, sl_row_writer_t *w, char *err,
                  size_t errlen) {
    const sl_schema_t *s = d->schema;
    int n = sl_schema_field_count(s);
    size_t pos = 0;
    bool more = true;
    if (len > SL_FORMAT_MAX_RECORD)
        return sl_errf(err, errlen, SL_EFORMAT, "line %" PRId64 ": record too long (%zu bytes, the limit is %u)",
                       lineno, len, SL_FORMAT_MAX_RECORD);
    sl_rw_begin(w, s);
    for (int i = 0; i < n; i++) {
        if (!more)
            return sl_errf(err, errlen, SL_EFORMAT,
                           "line %" PRId64 ", field '%s': missing (the record has %d of %d fields)", lineno,
                           sl_schema_field_name(s, i), i, n);
        csv_field_t f;
        const char *why;
        if (next_field(line, len, &pos, &d->scratch, &f, &more, &why) != 0)
            return sl_errf(err, errlen, SL_EFORMAT, "line %" PRId64 ", field '%s': %s", lineno,
                           sl_schema_field_name(s, i), why);
        int rc = set_field(d, w, i, &f, lineno, err, errlen);
        if (rc) return rc;
    }
    if (more) return sl_errf(err, errlen, SL_EFORMAT, "line %" PRId64 ": too many fields (the schema has %d)", lineno, n);
    return 0;
}

bool sl_csv_is_header(const sl_schema_t *s, const char *line, size_t len) {
    int n = sl_schema_field_count(s);
    sl_buf_t scratch = {0};
    size_t pos = 0;
    bool more = true, ok = true;
    for (int i = 0; i < n && ok; i++) {
        csv_field_t f;
        const char *why;
        const char *name = sl_schema_field_name(s, i);
        ok = more && next_field(line, len, &pos, &scratch, &f, &more, &why) == 0;
        if (ok) {
            while (f.n && is_blank(f.p[0])) f.p++, f.n--;
            while (f.n && is_blank(f.p[f.n - 1])) f.n--;
            ok = f.n == strlen(name) && strncasecmp(f.p, name, f.n) == 0;
        }
    }
    sl_buf_free(&scratch);
    return ok && !more;
}

bool sl_csv_record_open(const char *line, size_t len, bool open) {
    bool in_q = open, at_start = !open;
    for (size_t i = 0; i < len; i++) {
        char c = line[i];
        if (in_q) {
            if (c == '"') {
                if (i + 1 < len && line[i + 1] == '"') i++;
                else in_q = false;
            }
        } else if (c == '"' && at_start) {
            in_q = true;
            at_start = false;
        } else {
            at_start = c == ',';
        }
    }
    return in_q;
}

/* ---- encoding ---------------------------------------------------------- */

static void csv_string(sl_buf_t *b, const char *p, size_t n) {
    bool quote = n == 0;
    for (size_t k = 0; k < n && !quote; k++) quote = p[k] == ',' || p[k] == '"' || p[k] == '\n' || p[k] == '\r';
    if (!quote) {
        sl_buf_append(b, p, n);
        return;
    }
    sl_buf_reserve(b, n + 2);
    b->p[b->len++] = '"';
    size_t run = 0;
    for (size_t k = 0; k < n; k++) {
        if (p[k] != '"') continue;
        sl_buf_append(b, p + run, k + 1 - run); /* includes the quote */
        run = k;                                /* ... which is written again */
    }
    sl_buf_append(b, p + run, n - run);
    sl_buf_append(b, "\"", 1);
}

void sl_csv_encode(const sl_row_t *row, sl_buf_t *out) {
    static const char hex[] = "0123456789abcdef";
    const sl_schema_t *s = row->schema;
    int n = sl_schema_field_count(s);
    char num[40];
    for (int i = 0; i < n; i++) {
        if (i) sl_buf_append(out, ",", 1);
        if (sl_row_is_null(row, i)) continue;
        uint32_t len;
        size_t nl = 0;
        switch (sl_schema_field_type(s, i)) {
        case SL_BIGINT: nl = sl_format_i64(sl_row_i64(row, i), num); break;
        case SL_INT: nl = sl_format_i64(sl_row_i32(row, i), num); break;
        case SL_DOUBLE: nl = sl_format_double(sl_row_f64(row, i), num); break;
        case SL_BOOLEAN: nl = (size_t)snprintf(num, sizeof num, "%s", sl_row_bool(row, i) ? "true" : "false"); break;
        case SL_VARCHAR: {
            const char *p = sl_row_str(row, i, &len);
            csv_string(out, p, len);
            break;
        }
        case SL_BYTES: {
            const uint8_t *p = sl_row_bytes(row, i, &len);
            if (!len) {
                sl_buf_append(out, "\"\"", 2);
                break;
            }
            sl_buf_reserve(out, (size_t)len * 2);
            for (uint32_t k = 0; k < len; k++) {
                out->p[out->len++] = (uint8_t)hex[p[k] >> 4];
                out->p[out->len++] = (uint8_t)hex[p[k] & 15];
            }
            break;
        }
        case SL_TIMESTAMP: {
            int64_t ms = sl_row_i64(row, i);
            nl = sl_format_iso_ts(ms, num);
            if (!nl) nl = sl_format_i64(ms, num);
            break;
        }
        }
        sl_buf_append(out, num, nl);
    }
}
