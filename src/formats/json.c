/*
 * json.c — the JSON line format (one object per line), plus the value
 * helpers both formats share: ISO-8601 timestamps, shortest round-trip
 * doubles, UTF-8 checks and the "got ..." text of error messages.
 *
 * Parsing goes through jansson (json_loadb on exactly the line's bytes, so
 * trailing garbage, bad escapes, invalid UTF-8 and NULs are its errors).
 * Writing is done here, straight into the output buffer: it is on the sink
 * hot path, and it lets doubles be written in their shortest exact form
 * (jansson writes %.17g, i.e. 12.34 as 12.339999999999999).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include <jansson.h>

#include "formats/format.h"

/* ---- decoder object (both formats) ---------------------------------- */

void sl_decoder_init(sl_decoder_t *d, sl_format_t fmt, const sl_schema_t *schema) {
    memset(d, 0, sizeof *d);
    d->fmt = fmt;
    d->schema = schema;
}

void sl_decoder_free(sl_decoder_t *d) { sl_buf_free(&d->scratch); }

/* ---- shared value helpers ------------------------------------------- */

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant). */
static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m > 2 ? m - 3 : m + 9) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = (int64_t)yoe + era * 400 + (*m <= 2);
}

static bool is_leap(int64_t y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

/* Reads exactly n digits at s[*i]; -1 when they are not all digits. */
static int digits(const char *s, size_t len, size_t *i, int n) {
    int v = 0;
    if (*i + (size_t)n > len) return -1;
    for (int k = 0; k < n; k++) {
        char c = s[*i + (size_t)k];
        if (c < '0' || c > '9') return -1;
        v = v * 10 + (c - '0');
    }
    *i += (size_t)n;
    return v;
}

int sl_parse_iso_ts(const char *s, size_t len, int64_t *ms) {
    static const unsigned mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    size_t i = 0;
    int y = digits(s, len, &i, 4);
    if (y < 0 || i >= len || s[i++] != '-') return -1;
    int mo = digits(s, len, &i, 2);
    if (mo < 1 || mo > 12 || i >= len || s[i++] != '-') return -1;
    int d = digits(s, len, &i, 2);
    if (d < 1 || (unsigned)d > mdays[mo - 1] + (mo == 2 && is_leap(y))) return -1;
    int h = 0, mi = 0, sec = 0;
    int64_t frac = 0, off = 0;
    if (i < len) {
        if (s[i] != 'T' && s[i] != 't' && s[i] != ' ') return -1;
        i++;
        h = digits(s, len, &i, 2);
        if (h < 0 || h > 23 || i >= len || s[i++] != ':') return -1;
        mi = digits(s, len, &i, 2);
        if (mi < 0 || mi > 59) return -1;
        if (i < len && s[i] == ':') {
            i++;
            sec = digits(s, len, &i, 2);
            if (sec < 0 || sec > 59) return -1;
            if (i < len && (s[i] == '.' || s[i] == ',')) {
                i++;
                int nd = 0;
                while (i < len && s[i] >= '0' && s[i] <= '9') {
                    if (nd < 3) frac = frac * 10 + (s[i] - '0');
                    nd++, i++;
                }
                if (nd < 1 || nd > 9) return -1;
                for (; nd < 3; nd++) frac *= 10;
            }
        }
        if (i < len) {
            if (s[i] == 'Z' || s[i] == 'z') {
                i++;
            } else if (s[i] == '+' || s[i] == '-') {
                int sign = s[i++] == '-' ? -1 : 1;
                int oh = digits(s, len, &i, 2);
                if (oh < 0 || oh > 23) return -1;
                if (i < len && s[i] == ':') i++;
                int om = digits(s, len, &i, 2);
                if (om < 0 || om > 59) return -1;
                off = sign * (oh * 3600 + om * 60);
            } else {
                return -1;
            }
        }
    }
    if (i != len) return -1;
    int64_t secs = days_from_civil(y, (unsigned)mo, (unsigned)d) * 86400 + h * 3600 + mi * 60 + sec - off;
    *ms = secs * 1000 + frac;
    return 0;
}

size_t sl_format_iso_ts(int64_t ms, char *buf) {
    /* years 0000..9999 only: other values are written as integers */
    static const int64_t lo = -62167219200000LL;  /* 0000-01-01T00:00:00Z */
    static const int64_t hi = 253402300800000LL;  /* 10000-01-01T00:00:00Z */
    if (ms < lo || ms >= hi) return 0;
    int64_t secs = ms / 1000, rem = ms % 1000;
    if (rem < 0) rem += 1000, secs--;
    int64_t days = secs / 86400, sod = secs % 86400;
    if (sod < 0) sod += 86400, days--;
    int64_t y;
    unsigned m, d;
    civil_from_days(days, &y, &m, &d);
    /* "YYYY-MM-DDTHH:MM:SS.mmmZ" without printf: this is on the sink hot path */
    char *p = buf;
    unsigned v[] = {(unsigned)y, m, d, (unsigned)(sod / 3600), (unsigned)(sod / 60 % 60), (unsigned)(sod % 60),
                    (unsigned)rem};
    static const char width[] = {4, 2, 2, 2, 2, 2, 3}, sep[] = "--T::.Z";
    for (int k = 0; k < 7; k++) {
        for (int j = width[k] - 1; j >= 0; j--, v[k] /= 10) p[j] = (char)('0' + v[k] % 10);
        p += width[k];
        *p++ = sep[k];
    }
    *p = 0;
    return (size_t)(p - buf);
}

size_t sl_format_i64(int64_t v, char *buf) {
    char tmp[24];
    int n = 0;
    uint64_t u = v < 0 ? 0 - (uint64_t)v : (uint64_t)v;
    do tmp[n++] = (char)('0' + u % 10);
    while (u /= 10);
    size_t o = 0;
    if (v < 0) buf[o++] = '-';
    while (n) buf[o++] = tmp[--n];
    buf[o] = 0;
    return o;
}

size_t sl_format_double(double v, char *buf) {
    if (isnan(v)) return (size_t)snprintf(buf, 32, "NaN");
    if (isinf(v)) return (size_t)snprintf(buf, 32, v > 0 ? "Infinity" : "-Infinity");
    if (v == 0) return (size_t)snprintf(buf, 32, signbit(v) ? "-0.0" : "0.0");
    /* Fast path, same text as below: v is the double nearest to c / 10^k
     * for an integer c of at most 15 digits (amounts, prices...).  The
     * smallest such k wins, so c has no trailing zero. */
    static const double pow10[] = {1, 10, 100, 1e3, 1e4, 1e5, 1e6};
    double a = fabs(v);
    if (a >= 1e-4 && a < 1e15) {
        for (int k = 0; k < 7; k++) {
            double scaled = a * pow10[k];
            if (scaled >= 1e15) break;
            int64_t c = (int64_t)(scaled + 0.5);
            if ((double)c / pow10[k] != a) continue;
            char digits[24];
            size_t nd = sl_format_i64(c, digits), o = 0;
            if (v < 0) buf[o++] = '-';
            if ((int)nd <= k) { /* 0.00ddd */
                buf[o++] = '0';
                buf[o++] = '.';
                for (int z = 0; z < k - (int)nd; z++) buf[o++] = '0';
                memcpy(buf + o, digits, nd);
                o += nd;
            } else {
                memcpy(buf + o, digits, nd - (size_t)k);
                o += nd - (size_t)k;
                buf[o++] = '.';
                memcpy(buf + o, digits + nd - k, (size_t)k);
                o += (size_t)k;
                if (k == 0) buf[o++] = '0';
            }
            buf[o] = 0;
            return o;
        }
    }
    int n = 0;
    for (int prec = 15; prec <= 17; prec++) {
        n = snprintf(buf, 32, "%.*g", prec, v);
        if (strtod(buf, NULL) == v) break;
    }
    if (!strpbrk(buf, ".e")) {
        memcpy(buf + n, ".0", 3);
        n += 2;
    }
    return (size_t)n;
}

/* Length of the valid UTF-8 sequence at p (n bytes available), 0 if none. */
static size_t utf8_len(const uint8_t *p, size_t n) {
    uint8_t c = p[0];
    if (c < 0x80) return 1;
    size_t k;
    uint32_t cp;
    if (c >= 0xc2 && c <= 0xdf) k = 2, cp = c & 0x1f;
    else if (c >= 0xe0 && c <= 0xef) k = 3, cp = c & 0x0f;
    else if (c >= 0xf0 && c <= 0xf4) k = 4, cp = c & 0x07;
    else return 0;
    if (k > n) return 0;
    for (size_t j = 1; j < k; j++) {
        if ((p[j] & 0xc0) != 0x80) return 0;
        cp = (cp << 6) | (p[j] & 0x3f);
    }
    if ((k == 3 && (cp < 0x800 || (cp >= 0xd800 && cp <= 0xdfff))) || (k == 4 && (cp < 0x10000 || cp > 0x10ffff)))
        return 0;
    return k;
}

void sl_format_got(const char *s, size_t len, char *buf, size_t cap) {
    const uint8_t *p = (const uint8_t *)s;
    size_t o = 0, i = 0;
    if (cap < 16) {
        if (cap) buf[0] = 0;
        return;
    }
    buf[o++] = '"';
    while (i < len && i < 40 && o + 12 < cap) {
        size_t k = utf8_len(p + i, len - i);
        if (k == 1 && p[i] >= 0x20 && p[i] < 0x7f) {
            if (p[i] == '"' || p[i] == '\\') buf[o++] = '\\';
            buf[o++] = (char)p[i++];
        } else if (k > 1) {
            memcpy(buf + o, p + i, k);
            o += k, i += k;
        } else {
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", p[i++]);
        }
    }
    buf[o++] = '"';
    if (i < len) o += (size_t)snprintf(buf + o, cap - o, "... (%zu bytes)", len);
    buf[o < cap ? o : cap - 1] = 0;
}

/* ---- base64 ------------------------------------------------------------ */

static const char b64_chars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

static void b64_encode(const uint8_t *p, size_t n, sl_buf_t *out) {
    sl_buf_reserve(out, (n + 2) / 3 * 4);
    char *o = (char *)out->p + out->len;
    size_t i = 0;
    for (; i + 3 <= n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (uint32_t)p[i + 1] << 8 | p[i + 2];
        *o++ = b64_chars[v >> 18];
        *o++ = b64_chars[(v >> 12) & 63];
        *o++ = b64_chars[(v >> 6) & 63];
        *o++ = b64_chars[v & 63];
    }
    if (i < n) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0);
        *o++ = b64_chars[v >> 18];
        *o++ = b64_chars[(v >> 12) & 63];
        *o++ = i + 1 < n ? b64_chars[(v >> 6) & 63] : '=';
        *o++ = '=';
    }
    out->len = (size_t)((uint8_t *)o - out->p);
}

static int b64_val(char c) {
    if (c >= 'A' && c <= 'Z') return c - 'A';
    if (c >= 'a' && c <= 'z') return c - 'a' + 26;
    if (c >= '0' && c <= '9') return c - '0' + 52;
    if (c == '+') return 62;
    if (c == '/') return 63;
    return -1;
}

/* Decodes standard base64 (padding optional) into out (reset first). */
static int b64_decode(const char *s, size_t n, sl_buf_t *out) {
    out->len = 0;
    if (n % 4 == 0 && n > 0 && s[n - 1] == '=') n -= 1 + (s[n - 2] == '=');
    if (n % 4 == 1) return -1;
    sl_buf_reserve(out, n / 4 * 3 + 3);
    uint8_t *o = out->p;
    uint32_t acc = 0;
    int bits = 0;
    for (size_t i = 0; i < n; i++) {
        int v = b64_val(s[i]);
        if (v < 0) return -1;
        acc = (acc << 6) | (uint32_t)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            *o++ = (uint8_t)(acc >> bits);
        }
    }
    out->len = (size_t)(o - out->p);
    return 0;
}

/* ---- decoding ---------------------------------------------------------- */

static void describe(const json_t *v, char *buf, size_t cap) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: snprintf(buf, cap, "an object"); break;
    case JSON_ARRAY: snprintf(buf, cap, "an array"); break;
    case JSON_STRING: sl_format_got(json_string_value(v), json_string_length(v), buf, cap); break;
    case JSON_INTEGER: snprintf(buf, cap, "%" JSON_INTEGER_FORMAT, json_integer_value(v)); break;
    case JSON_REAL: {
        char d[32];
        sl_format_double(json_real_value(v), d);
        snprintf(buf, cap, "%s", d);
        break;
    }
    case JSON_TRUE: snprintf(buf, cap, "true"); break;
    case JSON_FALSE: snprintf(buf, cap, "false"); break;
    case JSON_NULL: snprintf(buf, cap, "null"); break;
    }
}

/* jansson's messages quote the input near the error: keep them printable. */
static void printable(char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || (unsigned char)*s >= 0x7f) *s = '?';
}

static bool str_is(const json_t *v, const char *s) {
    return json_string_length(v) == strlen(s) && memcmp(json_string_value(v), s, strlen(s)) == 0;
}

int sl_json_decode(sl_decoder_t *d, const char *line, size_t len, int64_t lineno, sl_row_writer_t *w,
                   char *err, size_t errlen) {
    const sl_schema_t *s = d->schema;
    json_error_t je;
    if (len > SL_FORMAT_MAX_RECORD)
        return sl_errf(err, errlen, SL_EFORMAT, "line %" PRId64 ": record too long (%zu bytes, the limit is %u)",
                       lineno, len, SL_FORMAT_MAX_RECORD);
    /* jansson skips raw NUL bytes ("1\0002" would read as 12): refuse them */
    const char *nul = len ? memchr(line, 0, len) : NULL;
    if (nul)
        return sl_errf(err, errlen, SL_EFORMAT, "line %" PRId64 ": invalid JSON: NUL byte at offset %zu", lineno,
                       (size_t)(nul - line));
    json_t *root = json_loadb(line, len, JSON_DECODE_ANY | JSON_REJECT_DUPLICATES | JSON_ALLOW_NUL, &je);
    char got[128];
    if (!root) {
        printable(je.text);
        if (je.column <= 0)
            return sl_errf(err, errlen, SL_EFORMAT, "line %" PRId64 ": invalid JSON: %s", lineno, je.text);
        return sl_errf(err, errlen, SL_EFORMAT, "line %" PRId64 ": invalid JSON: %s (column %d)", lineno, je.text,
                       je.column);
    }
    if (!json_is_object(root)) {
        describe(root, got, sizeof got);
        json_decref(root);
        return sl_errf(err, errlen, SL_EFORMAT, "line %" PRId64 ": expected a JSON object, got %s", lineno, got);
    }
    int rc = 0;
    const char *name = "";
    const char *expected = NULL; /* set: "expected <this>, got <value>" */
    json_t *v = NULL;
    sl_rw_begin(w, s);
    int n = sl_schema_field_count(s);
    for (int i = 0; i < n && !rc && !expected; i++) {
        name = sl_schema_field_name(s, i);
        v = json_object_get(root, name);
        if (!v || json_is_null(v)) {
            if (sl_schema_field_nullable(s, i)) {
                sl_rw_set_null(w, i);
                continue;
            }
            rc = sl_errf(err, errlen, SL_EFORMAT, "line %" PRId64 ", field '%s': %s, but the field is NOT NULL",
                         lineno, name, v ? "null" : "missing");
            break;
        }
        switch (sl_schema_field_type(s, i)) {
        case SL_BIGINT:
            if (json_is_integer(v)) sl_rw_set_i64(w, i, json_integer_value(v));
            else expected = "an integer";
            break;
        case SL_INT:
            if (!json_is_integer(v)) {
                expected = "an integer";
            } else if (json_integer_value(v) < INT32_MIN || json_integer_value(v) > INT32_MAX) {
                describe(v, got, sizeof got);
                rc = sl_errf(err, errlen, SL_EFORMAT, "line %" PRId64 ", field '%s': %s is out of range for INT",
                             lineno, name, got);
            } else {
                sl_rw_set_i32(w, i, (int32_t)json_integer_value(v));
            }
            break;
        case SL_DOUBLE:
            if (json_is_number(v)) sl_rw_set_f64(w, i, json_number_value(v));
            else if (json_is_string(v) && str_is(v, "NaN")) sl_rw_set_f64(w, i, NAN);
            else if (json_is_string(v) && str_is(v, "Infinity")) sl_rw_set_f64(w, i, INFINITY);
            else if (json_is_string(v) && str_is(v, "-Infinity")) sl_rw_set_f64(w, i, -INFINITY);
            else expected = "a number";
            break;
        case SL_BOOLEAN:
            if (json_is_boolean(v)) sl_rw_set_bool(w, i, json_is_true(v));
            else expected = "true or false";
            break;
        case SL_VARCHAR:
            if (!json_is_string(v)) expected = "a string";
            else sl_rw_set_str(w, i, json_string_value(v), (uint32_t)json_string_length(v));
            break;
        case SL_BYTES:
            if (!json_is_string(v) || b64_decode(json_string_value(v), json_string_length(v), &d->scratch) != 0)
                expected = "base64 bytes";
            else
                sl_rw_set_bytes(w, i, d->scratch.p, (uint32_t)d->scratch.len);
            break;
        case SL_TIMESTAMP: {
            int64_t ms;
            if (json_is_integer(v)) sl_rw_set_i64(w, i, json_integer_value(v));
            else if (json_is_string(v) && sl_parse_iso_ts(json_string_value(v), json_string_length(v), &ms) == 0)
                sl_rw_set_i64(w, i, ms);
            else expected = "a timestamp (epoch millis or ISO-8601)";
            break;
        }
        }
    }
    if (expected) {
        describe(v, got, sizeof got);
        rc = sl_errf(err, errlen, SL_EFORMAT, "line %" PRId64 ", field '%s': expected %s, got %s", lineno, name,
                     expected, got);
    }
    json_decref(root);
    return rc;
}

/* ---- encoding ---------------------------------------------------------- */

static inline void put(sl_buf_t *b, const void *p, size_t n) { sl_buf_append(b, p, n); }
static inline void putc_(sl_buf_t *b, char c) {
    sl_buf_reserve(b, 1);
    b->p[b->len++] = (uint8_t)c;
}

static void put_json_string(sl_buf_t *b, const uint8_t *p, size_t n) {
    static const char hex[] = "0123456789abcdef";
    sl_buf_reserve(b, n + 2);
    putc_(b, '"');
    size_t run = 0; /* start of bytes copied verbatim */
    for (size_t i = 0; i < n;) {
        uint8_t c = p[i];
        if (c >= 0x20 && c < 0x80 && c != '"' && c != '\\') {
            i++;
            continue;
        }
        size_t k = c >= 0x80 ? utf8_len(p + i, n - i) : 0;
        if (k) {
            i += k;
            continue;
        }
        put(b, p + run, i - run);
        char esc[8] = {'\\', 0};
        size_t el = 2;
        switch (c) {
        case '"': esc[1] = '"'; break;
        case '\\': esc[1] = '\\'; break;
        case '\n': esc[1] = 'n'; break;
        case '\r': esc[1] = 'r'; break;
        case '\t': esc[1] = 't'; break;
        case '\b': esc[1] = 'b'; break;
        case '\f': esc[1] = 'f'; break;
        default:
            if (c < 0x20) memcpy(esc, (char[]){'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]}, 6);
            else memcpy(esc, "\\ufffd", 6); /* not UTF-8 */
            el = 6;
        }
        put(b, esc, el);
        run = ++i;
    }
    put(b, p + run, n - run);
    putc_(b, '"');
}

void sl_json_encode(const sl_row_t *row, sl_buf_t *out) {
    const sl_schema_t *s = row->schema;
    int n = sl_schema_field_count(s);
    char num[40];
    putc_(out, '{');
    for (int i = 0; i < n; i++) {
        if (i) putc_(out, ',');
        const char *name = sl_schema_field_name(s, i);
        put_json_string(out, (const uint8_t *)name, strlen(name));
        putc_(out, ':');
        if (sl_row_is_null(row, i)) {
            put(out, "null", 4);
            continue;
        }
        uint32_t len;
        size_t nl = 0;
        switch (sl_schema_field_type(s, i)) {
        case SL_BIGINT: nl = sl_format_i64(sl_row_i64(row, i), num); break;
        case SL_INT: nl = sl_format_i64(sl_row_i32(row, i), num); break;
        case SL_DOUBLE: {
            double v = sl_row_f64(row, i);
            nl = sl_format_double(v, num);
            if (!isfinite(v)) { /* JSON has no NaN/Infinity: quote them */
                putc_(out, '"');
                put(out, num, nl);
                nl = 0;
                putc_(out, '"');
            }
            break;
        }
        case SL_BOOLEAN: nl = (size_t)snprintf(num, sizeof num, "%s", sl_row_bool(row, i) ? "true" : "false"); break;
        case SL_VARCHAR: {
            const char *p = sl_row_str(row, i, &len);
            put_json_string(out, (const uint8_t *)p, len);
            break;
        }
        case SL_BYTES: {
            const uint8_t *p = sl_row_bytes(row, i, &len);
            putc_(out, '"');
            b64_encode(p, len, out);
            putc_(out, '"');
            break;
        }
        case SL_TIMESTAMP: {
            int64_t ms = sl_row_i64(row, i);
            nl = sl_format_iso_ts(ms, num + 1);
            if (nl) {
                num[0] = '"';
                num[nl + 1] = '"';
                nl += 2;
            } else {
                nl = sl_format_i64(ms, num);
            }
            break;
        }
        }
        put(out, num, nl);
    }
    putc_(out, '}');
}
