/*
 * fields.c — fields by name, resolved and type-checked when the job is
 * built (sl_field_i64 ... in row.h's typed handles), and keys made of
 * several fields (sl_key_by_fields).
 *
 * A mistake — an unknown field, a field of another type — is recorded on
 * the environment with the schema and a suggestion, so sl_env_execute
 * refuses the job before anything runs; the handle returned then has index
 * -1 and must not be used.  Builder thread only.
 */
#include <stdio.h>
#include <string.h>

#include "api/env_int.h"
#include "common/common.h"
#include "config/suggest.h"
#include "graph/stream_graph.h"

/* Records "what: no field 'x' in (schema) (did you mean 'y'?)". */
static void no_field(sl_env_t *env, const char *what, const sl_schema_t *s, const char *name) {
    char sc[512];
    sl_schema_format(s, sc, sizeof sc);
    int n = sl_schema_field_count(s);
    const char **names = sl_calloc((size_t)(n ? n : 1), sizeof *names);
    for (int i = 0; i < n; i++) names[i] = sl_schema_field_name(s, i);
    const char *sug = name ? sl_suggest(name, names, n, true) : NULL;
    if (sug)
        sl_env_errorf(env, "%s: no field '%s' in (%s) (did you mean '%s'?)", what, name ? name : "(null)", sc, sug);
    else
        sl_env_errorf(env, "%s: no field '%s' in (%s)", what, name ? name : "(null)", sc);
    sl_free(names);
}

/* The index of `name` in s if its type is one of ok[0..nok), else -1 with
 * the error recorded. */
static int resolve(sl_env_t *env, const sl_schema_t *s, const char *name, const sl_type_t *ok, int nok,
                   const char *accessor) {
    if (!env) return -1;
    char what[160];
    snprintf(what, sizeof what, "%s(\"%s\")", accessor, name ? name : "(null)");
    if (!s) {
        sl_env_errorf(env, "%s: no schema given", what);
        return -1;
    }
    int i = name ? sl_schema_index(s, name) : -1;
    if (i < 0) {
        no_field(env, what, s, name);
        return -1;
    }
    sl_type_t t = sl_schema_field_type(s, i);
    for (int k = 0; k < nok; k++)
        if (ok[k] == t) return i;
    char want[96] = "";
    for (int k = 0; k < nok; k++)
        snprintf(want + strlen(want), sizeof want - strlen(want), "%s%s", k ? " or " : "", sl_type_name(ok[k]));
    sl_env_errorf(env, "%s: field '%s' is %s, not %s", what, name, sl_type_name(t), want);
    return -1;
}

sl_field_i64_t sl_field_i64(sl_env_t *env, const sl_schema_t *s, const char *name) {
    static const sl_type_t ok[] = {SL_BIGINT, SL_TIMESTAMP};
    return (sl_field_i64_t){resolve(env, s, name, ok, 2, "sl_field_i64")};
}
sl_field_i32_t sl_field_i32(sl_env_t *env, const sl_schema_t *s, const char *name) {
    static const sl_type_t ok[] = {SL_INT};
    return (sl_field_i32_t){resolve(env, s, name, ok, 1, "sl_field_i32")};
}
sl_field_f64_t sl_field_f64(sl_env_t *env, const sl_schema_t *s, const char *name) {
    static const sl_type_t ok[] = {SL_DOUBLE};
    return (sl_field_f64_t){resolve(env, s, name, ok, 1, "sl_field_f64")};
}
sl_field_bool_t sl_field_bool(sl_env_t *env, const sl_schema_t *s, const char *name) {
    static const sl_type_t ok[] = {SL_BOOLEAN};
    return (sl_field_bool_t){resolve(env, s, name, ok, 1, "sl_field_bool")};
}
sl_field_str_t sl_field_str(sl_env_t *env, const sl_schema_t *s, const char *name) {
    static const sl_type_t ok[] = {SL_VARCHAR, SL_BYTES};
    return (sl_field_str_t){resolve(env, s, name, ok, 2, "sl_field_str")};
}

/* ---- keys of several fields ---- */

/* The key selector of sl_key_by_fields: the fields' key bytes, each as a
 * marker byte (0 NULL, 1 a value), for VARCHAR/BYTES a u32 little-endian
 * length, then the bytes (fixed-size types: the bytes sl_row_field_key
 * gives, 4 for INT, 1 for BOOLEAN, 8 otherwise).  The same
 * row gives the same bytes on every process and host. */
typedef struct sl_fields_key {
    int n;
    int idx[SL_KEY_MAX_FIELDS];
} sl_fields_key_t;

static int fields_key(void *ctx, const sl_row_t *row, uint8_t *key, int cap) {
    const sl_fields_key_t *fk = ctx;
    int len = 0;
    for (int k = 0; k < fk->n; k++) {
        int i = fk->idx[k];
        if (sl_row_is_null(row, i)) {
            if (len + 1 > cap) return SL_EINVAL;
            key[len++] = 0;
            continue;
        }
        uint32_t fl;
        const uint8_t *p = sl_row_field_key(row, i, &fl);
        sl_type_t t = sl_schema_field_type(row->schema, i);
        bool var = t == SL_VARCHAR || t == SL_BYTES;
        if (len + 1 + (var ? 4 : 0) + (int)fl > cap) return SL_EINVAL; /* longer than SL_MAX_KEY_LEN */
        key[len++] = 1;
        if (var) {
            for (int b = 0; b < 4; b++) key[len + b] = (uint8_t)(fl >> (8 * b));
            len += 4;
        }
        memcpy(key + len, p, fl);
        len += (int)fl;
    }
    return len;
}

bool sl_key_is_fields(const sl_key_selector_t *ks, int *idx, int *n) {
    if (ks->field >= 0) {
        if (idx) idx[0] = ks->field;
        if (n) *n = 1;
        return true;
    }
    if (ks->fn != fields_key) return false;
    const sl_fields_key_t *fk = ks->ctx;
    if (idx) memcpy(idx, fk->idx, (size_t)fk->n * sizeof *idx);
    if (n) *n = fk->n;
    return true;
}

int sl_key_decode_fields(const sl_key_selector_t *ks, const sl_schema_t *schema, const uint8_t *key, uint32_t len,
                         sl_row_writer_t *w, const int *out_idx) {
    int idx[SL_KEY_MAX_FIELDS], n;
    if (!sl_key_is_fields(ks, idx, &n)) return SL_EINVAL;
    uint32_t off = 0;
    for (int k = 0; k < n; k++) {
        sl_type_t t = sl_schema_field_type(schema, idx[k]);
        bool var = t == SL_VARCHAR || t == SL_BYTES;
        const uint8_t *p;
        uint32_t fl;
        if (ks->field >= 0) { /* one field: the bare key bytes (empty: NULL of a fixed-size type) */
            if (!var && len == 0) {
                sl_rw_set_null(w, out_idx[k]);
                continue;
            }
            p = key;
            fl = len;
        } else {
            if (off >= len) return SL_EFORMAT;
            if (key[off++] == 0) {
                sl_rw_set_null(w, out_idx[k]);
                continue;
            }
            if (var) {
                if (off + 4 > len) return SL_EFORMAT;
                fl = (uint32_t)key[off] | (uint32_t)key[off + 1] << 8 | (uint32_t)key[off + 2] << 16 |
                     (uint32_t)key[off + 3] << 24;
                off += 4;
            } else {
                fl = t == SL_INT ? 4 : t == SL_BOOLEAN ? 1 : 8;
            }
            if (off + fl > len) return SL_EFORMAT;
            p = key + off;
            off += fl;
        }
        if (var) {
            if (t == SL_VARCHAR)
                sl_rw_set_str(w, out_idx[k], (const char *)p, fl);
            else
                sl_rw_set_bytes(w, out_idx[k], p, fl);
        } else if (t == SL_INT) {
            if (fl != 4) return SL_EFORMAT;
            int32_t v;
            memcpy(&v, p, 4);
            sl_rw_set_i32(w, out_idx[k], v);
        } else if (t == SL_BOOLEAN) {
            if (fl != 1) return SL_EFORMAT;
            sl_rw_set_bool(w, out_idx[k], p[0] != 0);
        } else {
            if (fl != 8) return SL_EFORMAT;
            if (t == SL_DOUBLE) {
                double d;
                memcpy(&d, p, 8);
                sl_rw_set_f64(w, out_idx[k], d);
            } else {
                int64_t v;
                memcpy(&v, p, 8);
                sl_rw_set_i64(w, out_idx[k], v);
            }
        }
    }
    return 0;
}

sl_keyed_t *sl_key_by_fields(sl_stream_t *s, const char *fields) {
    if (!s) return NULL;
    if (!fields || !*fields) {
        sl_env_errorf(s->env, "key_by_fields: no fields given");
        return NULL;
    }
    sl_fields_key_t *fk = sl_calloc(1, sizeof *fk);
    sl_env_own(s->env, fk, sl_free);
    const char *p = fields;
    while (*p) {
        while (*p == ' ' || *p == '\t' || *p == ',') p++;
        if (!*p) break;
        const char *e = p;
        while (*e && *e != ',' && *e != ' ' && *e != '\t') e++;
        char name[256];
        size_t nl = (size_t)(e - p) < sizeof name - 1 ? (size_t)(e - p) : sizeof name - 1;
        memcpy(name, p, nl);
        name[nl] = 0;
        p = e;
        int i = sl_schema_index(s->schema, name);
        if (i < 0) {
            no_field(s->env, "key_by_fields", s->schema, name);
            return NULL;
        }
        for (int k = 0; k < fk->n; k++)
            if (fk->idx[k] == i) {
                sl_env_errorf(s->env, "key_by_fields(\"%s\"): field '%s' is named twice", fields, name);
                return NULL;
            }
        if (fk->n == SL_KEY_MAX_FIELDS) {
            sl_env_errorf(s->env, "key_by_fields(\"%s\"): at most %d fields", fields, SL_KEY_MAX_FIELDS);
            return NULL;
        }
        fk->idx[fk->n++] = i;
    }
    if (fk->n == 0) {
        sl_env_errorf(s->env, "key_by_fields: no fields given");
        return NULL;
    }
    if (fk->n == 1) return sl_key_by(s, sl_schema_field_name(s->schema, fk->idx[0]));
    return sl_key_by_fn(s, fields_key, fk);
}
