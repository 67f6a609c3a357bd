/* row.c — reading and writing binary rows (layout in sluice/row.h). */
#include <inttypes.h>
#include <stdio.h>

#include "common/common.h"
#include "types/schema_int.h"

static inline const uint8_t *slot(const sl_row_t *r, int i) {
    return r->data + sl__row_slot(r->schema->n, i);
}



const uint8_t *sl_row_bytes(const sl_row_t *r, int i, uint32_t *len) {
    const uint8_t *s = slot(r, i);
    uint32_t off = sl_ld32(s);
    if (len) *len = sl_ld32(s + 4);
    return r->data + off;
}

const char *sl_row_str(const sl_row_t *r, int i, uint32_t *len) {
    return (const char *)sl_row_bytes(r, i, len);
}

const uint8_t *sl_row_field_key(const sl_row_t *r, int i, uint32_t *len) {
    if (sl_row_is_null(r, i)) {
        *len = 0;
        return r->data;
    }
    sl_type_t t = r->schema->fields[i].type;
    if (t == SL_VARCHAR || t == SL_BYTES) return sl_row_bytes(r, i, len);
    *len = t == SL_INT ? 4 : t == SL_BOOLEAN ? 1 : 8;
    return slot(r, i);
}

int sl_row_validate(const sl_row_t *r) {
    const sl_schema_t *s = r->schema;
    if (!r->data || r->len < s->fixed_len) return SL_EFORMAT;
    for (int i = 0; i < s->n; i++) {
        bool null = sl_row_is_null(r, i);
        if (null) {
            if (!s->fields[i].nullable) return SL_EFORMAT;
            continue;
        }
        sl_type_t t = s->fields[i].type;
        if (t == SL_VARCHAR || t == SL_BYTES) {
            const uint8_t *sl = slot(r, i);
            uint64_t off = sl_ld32(sl), len = sl_ld32(sl + 4);
            if (off < s->fixed_len || off + len > r->len) return SL_EFORMAT;
        } else if (t == SL_BOOLEAN && *slot(r, i) > 1) {
            return SL_EFORMAT;
        }
    }
    /* bits past the last field must be clear */
    for (int i = s->n; i < (int)sl__row_bitmap_bytes(s->n) * 8; i++)
        if (sl_row_is_null(r, i)) return SL_EFORMAT;
    return SL_OK;
}

/* ---- writer ---- */

void sl_rw_init(sl_row_writer_t *w) { memset(w, 0, sizeof *w); }

void sl_rw_free(sl_row_writer_t *w) {
    sl_free(w->buf);
    memset(w, 0, sizeof *w);
}

static void rw_reserve(sl_row_writer_t *w, uint32_t need) {
    if (need <= w->cap) return;
    uint32_t nc = w->cap ? w->cap : 64;
    while (nc < need) nc *= 2;
    w->buf = sl_realloc(w->buf, nc);
    w->cap = nc;
}

void sl_rw_begin(sl_row_writer_t *w, const sl_schema_t *s) {
    w->schema = s;
    w->nfields = s->n;
    w->err = 0;
    rw_reserve(w, s->fixed_len);
    if (s->fixed_len) memcpy(w->buf, s->tmpl, s->fixed_len);
    w->len = s->fixed_len;
}

#define wslot sl__wslot

void sl_rw_set_null(sl_row_writer_t *w, int i) {
    if (i < 0 || i >= w->nfields) { w->err = SL_EINVAL; return; }
    if (!w->schema->fields[i].nullable) { w->err = SL_EINVAL; return; }
    memset(w->buf + sl__row_slot(w->nfields, i), 0, 8);
    w->buf[i >> 3] |= (uint8_t)(1u << (i & 7));
}





void sl_rw_set_bytes(sl_row_writer_t *w, int i, const void *p, uint32_t len) {
    uint32_t off = w->len;
    rw_reserve(w, off + len);
    if (len) memcpy(w->buf + off, p, len);
    w->len = off + len;
    uint8_t *s = wslot(w, i);
    sl_st32(s, off);
    sl_st32(s + 4, len);
}

void sl_rw_set_str(sl_row_writer_t *w, int i, const char *s, uint32_t len) { sl_rw_set_bytes(w, i, s, len); }

void sl_rw_copy_field(sl_row_writer_t *w, int i, const sl_row_t *src, int si) {
    if (sl_row_is_null(src, si)) {
        sl_rw_set_null(w, i);
        return;
    }
    sl_type_t t = src->schema->fields[si].type;
    if (t == SL_VARCHAR || t == SL_BYTES) {
        uint32_t len;
        const uint8_t *p = sl_row_bytes(src, si, &len);
        sl_rw_set_bytes(w, i, p, len);
    } else {
        memcpy(wslot(w, i), slot(src, si), 8);
    }
}

void sl_rw_copy_row(sl_row_writer_t *w, const sl_row_t *src) {
    w->schema = src->schema;
    w->nfields = src->schema->n;
    w->err = 0;
    rw_reserve(w, src->len);
    memcpy(w->buf, src->data, src->len);
    w->len = src->len;
}

sl_row_t sl_rw_row(const sl_row_writer_t *w) {
    sl_row_t r = {w->buf, w->len, w->schema};
    return r;
}

size_t sl_row_format_field(const sl_row_t *r, int i, char *buf, size_t cap) {
    int n = 0;
    if (sl_row_is_null(r, i)) {
        n = snprintf(buf, cap, "null");
    } else {
        uint32_t len;
        switch (r->schema->fields[i].type) {
        case SL_BIGINT:
        case SL_TIMESTAMP: n = snprintf(buf, cap, "%" PRId64, sl_row_i64(r, i)); break;
        case SL_INT: n = snprintf(buf, cap, "%" PRId32, sl_row_i32(r, i)); break;
        case SL_DOUBLE: n = snprintf(buf, cap, "%.17g", sl_row_f64(r, i)); break;
        case SL_BOOLEAN: n = snprintf(buf, cap, "%s", sl_row_bool(r, i) ? "true" : "false"); break;
        case SL_VARCHAR: {
            const char *s = sl_row_str(r, i, &len);
            n = snprintf(buf, cap, "%.*s", (int)len, s);
            break;
        }
        case SL_BYTES: {
            const uint8_t *p = sl_row_bytes(r, i, &len);
            size_t o = 0;
            for (uint32_t k = 0; k < len && o + 3 < cap; k++) o += (size_t)snprintf(buf + o, cap - o, "%02x", p[k]);
            return o;
        }
        }
    }
    if (n < 0) return 0;
    return (size_t)n < cap ? (size_t)n : (cap ? cap - 1 : 0);
}
