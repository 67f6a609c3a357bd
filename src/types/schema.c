/* schema.c — row schemas: fields, types, nullability, and a small DDL
 * parser ("card_id BIGINT NOT NULL, amount DOUBLE, ts TIMESTAMP(3)"). */
#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "common/common.h"
#include "types/schema_int.h"

sl_schema_t *sl_schema_new(void) {
    sl_schema_t *s = sl_calloc(1, sizeof *s);
    atomic_init(&s->refs, 1);
    s->bitmap_bytes = sl__row_bitmap_bytes(0);
    return s;
}

int sl_schema_add(sl_schema_t *s, const char *name, sl_type_t type, bool nullable) {
    if (!s || !name || !*name || (int)type < 0 || type > SL_TIMESTAMP) return SL_EINVAL;
    if (sl_schema_index(s, name) >= 0) return SL_EINVAL;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 8;
        s->fields = sl_realloc(s->fields, (size_t)s->cap * sizeof *s->fields);
    }
    s->fields[s->n].name = sl_strdup(name);
    s->fields[s->n].type = type;
    s->fields[s->n].nullable = nullable;
    s->n++;
    s->bitmap_bytes = sl__row_bitmap_bytes(s->n);
    s->fixed_len = sl__row_slot(s->n, s->n);
    s->tmpl = sl_realloc(s->tmpl, s->fixed_len);
    memset(s->tmpl, 0, s->fixed_len);
    for (int i = 0; i < s->n; i++)
        if (s->fields[i].nullable) s->tmpl[i >> 3] |= (uint8_t)(1u << (i & 7));
    return SL_OK;
}

sl_schema_t *sl_schema_ref(sl_schema_t *s) {
    if (s) atomic_fetch_add(&s->refs, 1);
    return s;
}

void sl_schema_unref(sl_schema_t *s) {
    if (!s || atomic_fetch_sub(&s->refs, 1) != 1) return;
    for (int i = 0; i < s->n; i++) sl_free(s->fields[i].name);
    sl_free(s->fields);
    sl_free(s->tmpl);
    sl_free(s);
}

int sl_schema_field_count(const sl_schema_t *s) { return s ? s->n : 0; }

int sl_schema_index(const sl_schema_t *s, const char *name) {
    for (int i = 0; s && name && i < s->n; i++)
        if (strcmp(s->fields[i].name, name) == 0) return i;
    return SL_ENOTFOUND;
}

const char *sl_schema_field_name(const sl_schema_t *s, int i) { return s->fields[i].name; }
sl_type_t sl_schema_field_type(const sl_schema_t *s, int i) { return s->fields[i].type; }
bool sl_schema_field_nullable(const sl_schema_t *s, int i) { return s->fields[i].nullable; }

bool sl_schema_equal(const sl_schema_t *a, const sl_schema_t *b) {
    if (a == b) return true;
    if (!a || !b || a->n != b->n) return false;
    for (int i = 0; i < a->n; i++)
        if (a->fields[i].type != b->fields[i].type || a->fields[i].nullable != b->fields[i].nullable ||
            strcmp(a->fields[i].name, b->fields[i].name) != 0)
            return false;
    return true;
}

static const char *type_names[] = {"BIGINT", "INT", "DOUBLE", "BOOLEAN", "VARCHAR", "BYTES", "TIMESTAMP(3)"};

const char *sl_type_name(sl_type_t t) {
    return (int)t >= 0 && t <= SL_TIMESTAMP ? type_names[t] : "?";
}

size_t sl_schema_format(const sl_schema_t *s, char *buf, size_t cap) {
    size_t n = 0;
    if (cap) buf[0] = 0;
    for (int i = 0; i < s->n; i++) {
        int w = snprintf(buf + n, n < cap ? cap - n : 0, "%s%s %s%s", i ? ", " : "", s->fields[i].name,
                         sl_type_name(s->fields[i].type), s->fields[i].nullable ? "" : " NOT NULL");
        if (w > 0) n += (size_t)w;
        if (n >= cap) n = cap ? cap - 1 : 0;
    }
    return n;
}

/* ---- DDL parser ---- */

typedef struct {
    const char *p, *start;
} lexer_t;

static void skip_ws(lexer_t *l) {
    while (isspace((unsigned char)*l->p)) l->p++;
}

static int word(lexer_t *l, char *out, size_t cap) {
    skip_ws(l);
    size_t n = 0;
    while (isalnum((unsigned char)*l->p) || *l->p == '_') {
        if (n + 1 < cap) out[n++] = *l->p;
        l->p++;
    }
    out[n] = 0;
    return (int)n;
}

static int parse_type(const char *w, sl_type_t *t) {
    static const struct {
        const char *name;
        sl_type_t t;
    } map[] = {{"BIGINT", SL_BIGINT},   {"INT", SL_INT},         {"INTEGER", SL_INT},
               {"DOUBLE", SL_DOUBLE},   {"BOOLEAN", SL_BOOLEAN}, {"BOOL", SL_BOOLEAN},
               {"VARCHAR", SL_VARCHAR}, {"STRING", SL_VARCHAR},  {"BYTES", SL_BYTES},
               {"VARBINARY", SL_BYTES}, {"TIMESTAMP", SL_TIMESTAMP}};
    for (size_t i = 0; i < SL_ARRAY_LEN(map); i++)
        if (strcasecmp(w, map[i].name) == 0) {
            *t = map[i].t;
            return 0;
        }
    return -1;
}

sl_schema_t *sl_schema_parse(const char *ddl, char *err, size_t errlen) {
    if (!ddl) {
        sl_errf(err, errlen, SL_EINVAL, "schema: no text");
        return NULL;
    }
    sl_schema_t *s = sl_schema_new();
    lexer_t l = {ddl, ddl};
    char name[256], ty[64], w[64];
    for (;;) {
        skip_ws(&l);
        if (!*l.p && s->n > 0) break;
        size_t at = (size_t)(l.p - l.start);
        if (!word(&l, name, sizeof name)) {
            sl_errf(err, errlen, SL_EINVAL, "schema: expected a field name at offset %zu of \"%s\"", at, ddl);
            goto fail;
        }
        at = (size_t)(l.p - l.start);
        sl_type_t t;
        if (!word(&l, ty, sizeof ty) || parse_type(ty, &t) != 0) {
            sl_errf(err, errlen, SL_EINVAL, "schema: field '%s': unknown type '%s' at offset %zu", name, ty, at);
            goto fail;
        }
        skip_ws(&l);
        if (*l.p == '(') { /* VARCHAR(n), TIMESTAMP(3) */
            const char *close = strchr(l.p, ')');
            if (!close) {
                sl_errf(err, errlen, SL_EINVAL, "schema: field '%s': missing ')'", name);
                goto fail;
            }
            if (t == SL_TIMESTAMP && atoi(l.p + 1) != 3) {
                sl_errf(err, errlen, SL_EINVAL, "schema: field '%s': only TIMESTAMP(3) (milliseconds) is supported",
                        name);
                goto fail;
            }
            l.p = close + 1;
        }
        bool nullable = true;
        const char *save = l.p;
        if (word(&l, w, sizeof w) && strcasecmp(w, "NOT") == 0) {
            if (!word(&l, w, sizeof w) || strcasecmp(w, "NULL") != 0) {
                sl_errf(err, errlen, SL_EINVAL, "schema: field '%s': expected NULL after NOT", name);
                goto fail;
            }
            nullable = false;
        } else if (w[0] && strcasecmp(w, "NULL") == 0) {
            nullable = true;
        } else {
            l.p = save;
        }
        if (sl_schema_add(s, name, t, nullable) != 0) {
            sl_errf(err, errlen, SL_EINVAL, "schema: duplicate field '%s'", name);
            goto fail;
        }
        skip_ws(&l);
        if (*l.p == ',') {
            l.p++;
            continue;
        }
        if (*l.p) {
            sl_errf(err, errlen, SL_EINVAL, "schema: unexpected '%c' at offset %zu of \"%s\"", *l.p,
                    (size_t)(l.p - l.start), ddl);
            goto fail;
        }
        break;
    }
    return s;
fail:
    sl_schema_unref(s);
    return NULL;
}
