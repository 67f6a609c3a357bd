/* schema.c — row schemas: fields, types, nullability, and a small DDL
 * parser ("card_id BIGINT NOT NULL, amount DOUBLE, ts TIMESTAMP(3)"). */
#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "common/common.h"
#include "config/suggest.h"
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

/* ---- DDL parser ----
 *
 * field [, field ...] where field is: name TYPE [(n)] [NOT NULL | NULL].
 * Types (any case): BIGINT; INT, INTEGER; DOUBLE; BOOLEAN, BOOL; VARCHAR,
 * STRING (an optional length is accepted and ignored); BYTES, VARBINARY;
 * TIMESTAMP(3) (milliseconds; TIMESTAMP alone means the same).  Every
 * message gives the 1-based column of the offending word; an unknown type
 * gets the closest known one as a suggestion. */

typedef struct {
    const char *p, *start;
} lexer_t;

static void skip_ws(lexer_t *l) {
    while (isspace((unsigned char)*l->p)) l->p++;
}

/* 1-based column of the lexer's position (of where, if given). */
static size_t column(const lexer_t *l, const char *where) { return (size_t)((where ? where : l->p) - l->start) + 1; }

/* A name ([A-Za-z0-9_]+) into out; returns its length (the whole length,
 * also when it does not fit in cap: the caller rejects it). */
static size_t word(lexer_t *l, char *out, size_t cap) {
    skip_ws(l);
    size_t n = 0;
    while (isalnum((unsigned char)*l->p) || *l->p == '_') {
        if (n + 1 < cap) out[n] = *l->p;
        n++;
        l->p++;
    }
    out[n < cap ? n : cap - 1] = 0;
    return n;
}

static const struct {
    const char *name;
    sl_type_t t;
} TYPE_WORDS[] = {{"BIGINT", SL_BIGINT},   {"INT", SL_INT},         {"INTEGER", SL_INT},
                  {"DOUBLE", SL_DOUBLE},   {"BOOLEAN", SL_BOOLEAN}, {"BOOL", SL_BOOLEAN},
                  {"VARCHAR", SL_VARCHAR}, {"STRING", SL_VARCHAR},  {"BYTES", SL_BYTES},
                  {"VARBINARY", SL_BYTES}, {"TIMESTAMP", SL_TIMESTAMP}};

static int parse_type(const char *w, sl_type_t *t) {
    for (size_t i = 0; i < SL_ARRAY_LEN(TYPE_WORDS); i++)
        if (strcasecmp(w, TYPE_WORDS[i].name) == 0) {
            *t = TYPE_WORDS[i].t;
            return 0;
        }
    return -1;
}

/* " (did you mean X?)" for an unknown type word, or "". */
static const char *type_hint(const char *w, char *buf, size_t cap) {
    const char *names[SL_ARRAY_LEN(TYPE_WORDS)];
    for (size_t i = 0; i < SL_ARRAY_LEN(TYPE_WORDS); i++) names[i] = TYPE_WORDS[i].name;
    const char *best = sl_suggest(w, names, (int)SL_ARRAY_LEN(TYPE_WORDS), true);
    if (best) snprintf(buf, cap, " (did you mean %s?)", best);
    else snprintf(buf, cap, " (known types: BIGINT, INT, DOUBLE, BOOLEAN, VARCHAR, BYTES, TIMESTAMP(3))");
    return buf;
}

/* The message of the last sl_schema_parse of this thread that failed with
 * nowhere to put it (no err buffer), for the builder it was passed to. */
static _Thread_local char pending_error[512];

bool sl__schema_take_parse_error(char *buf, size_t cap) {
    if (!pending_error[0]) return false;
    if (cap) snprintf(buf, cap, "%s", pending_error);
    pending_error[0] = 0;
    return true;
}

#define FAIL(...)                                                                                                      \
    do {                                                                                                               \
        sl_errf(msg, sizeof msg, SL_EINVAL, __VA_ARGS__);                                                              \
        goto fail;                                                                                                     \
    } while (0)

sl_schema_t *sl_schema_parse(const char *ddl, char *err, size_t errlen) {
    char msg[512];
    if (!ddl) {
        snprintf(msg, sizeof msg, "schema: no text (NULL)");
        goto report;
    }
    sl_schema_t *s = sl_schema_new();
    lexer_t l = {ddl, ddl};
    char name[256], ty[64], w[64], hint[128];
    for (;;) {
        skip_ws(&l);
        if (!*l.p && s->n > 0) break;
        const char *at = l.p;
        size_t nl = word(&l, name, sizeof name);
        if (!nl) {
            if (!*at) FAIL("schema: expected a field name at column %zu (the text is empty)", column(&l, at));
            FAIL("schema: expected a field name at column %zu, found '%c'", column(&l, at), *at);
        }
        if (nl >= sizeof name) FAIL("schema: field name at column %zu is longer than %zu characters", column(&l, at),
                                    sizeof name - 1);
        skip_ws(&l);
        at = l.p;
        size_t tl = word(&l, ty, sizeof ty);
        sl_type_t t;
        if (!tl) {
            if (!*at) FAIL("schema: field '%s': no type (expected a type at column %zu)", name, column(&l, at));
            FAIL("schema: field '%s': expected a type at column %zu, found '%c'", name, column(&l, at), *at);
        }
        if (tl >= sizeof ty || parse_type(ty, &t) != 0)
            FAIL("schema: field '%s': unknown type '%.*s' at column %zu%s", name, (int)SL_MIN(tl, sizeof ty - 1), ty,
                 column(&l, at), type_hint(ty, hint, sizeof hint));
        skip_ws(&l);
        if (*l.p == '(') { /* VARCHAR(n), TIMESTAMP(3) */
            const char *open = l.p++;
            skip_ws(&l);
            const char *digits = l.p;
            long n = 0;
            while (isdigit((unsigned char)*l.p) && n < 1000000) n = n * 10 + (*l.p++ - '0');
            bool none = l.p == digits;
            skip_ws(&l);
            if (none || *l.p != ')')
                FAIL("schema: field '%s': expected a number and ')' after '(' at column %zu", name, column(&l, open));
            l.p++;
            if (t == SL_TIMESTAMP && n != 3)
                FAIL("schema: field '%s': TIMESTAMP(%ld) at column %zu: only TIMESTAMP(3) (milliseconds) is supported",
                     name, n, column(&l, at));
            if (t != SL_TIMESTAMP && t != SL_VARCHAR)
                FAIL("schema: field '%s': type %s at column %zu takes no length", name, sl_type_name(t),
                     column(&l, at));
        }
        bool nullable = true;
        const char *save = l.p;
        skip_ws(&l);
        at = l.p;
        if (word(&l, w, sizeof w) && strcasecmp(w, "NOT") == 0) {
            skip_ws(&l);
            const char *at2 = l.p;
            if (!word(&l, w, sizeof w) || strcasecmp(w, "NULL") != 0)
                FAIL("schema: field '%s': expected NULL after NOT at column %zu", name, column(&l, at2));
            nullable = false;
        } else if (w[0] && strcasecmp(w, "NULL") == 0) {
            nullable = true;
        } else if (w[0]) {
            FAIL("schema: field '%s': unexpected '%s' at column %zu (expected NOT NULL, NULL, ',' or the end)", name,
                 w, column(&l, at));
        } else {
            l.p = save;
        }
        if (sl_schema_add(s, name, t, nullable) != 0) FAIL("schema: duplicate field '%s'", name);
        skip_ws(&l);
        if (*l.p == ',') {
            l.p++;
            skip_ws(&l);
            if (!*l.p) FAIL("schema: expected a field name after ',' at column %zu", column(&l, NULL));
            continue;
        }
        if (*l.p) FAIL("schema: unexpected '%c' at column %zu (expected ',' or the end)", *l.p, column(&l, NULL));
        break;
    }
    pending_error[0] = 0;
    return s;
fail:
    sl_schema_unref(s);
report:
    if (err && errlen) snprintf(err, errlen, "%s", msg);
    else snprintf(pending_error, sizeof pending_error, "%s", msg);
    return NULL;
}
