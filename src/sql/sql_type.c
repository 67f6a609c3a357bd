/*
 * sql_type.c — Flink's logical types as a compiled plan writes them (the
 * serializable string of LogicalType, or its JSON object form), their flat
 * layout in sluice rows (sql_int.h) and the decimal helpers.
 */
#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "common/common.h"
#include "sql/sql_int.h"

typedef struct tparser {
    const char *s, *p;
    char *err;
    size_t errlen;
    int depth;
} tparser_t;

static void tp_ws(tparser_t *t) {
    while (*t->p && isspace((unsigned char)*t->p)) t->p++;
}

/* Matches keyword kw (case-insensitive, whole word). */
static bool tp_kw(tparser_t *t, const char *kw) {
    tp_ws(t);
    size_t n = strlen(kw);
    if (strncasecmp(t->p, kw, n) != 0) return false;
    char c = t->p[n];
    if (isalnum((unsigned char)c) || c == '_') return false;
    t->p += n;
    return true;
}

static bool tp_ch(tparser_t *t, char c) {
    tp_ws(t);
    if (*t->p != c) return false;
    t->p++;
    return true;
}

static bool tp_int(tparser_t *t, int *out) {
    tp_ws(t);
    if (!isdigit((unsigned char)*t->p)) return false;
    long v = 0;
    while (isdigit((unsigned char)*t->p)) {
        v = v * 10 + (*t->p++ - '0');
        if (v > 2147483647L) return false;
    }
    *out = (int)v;
    return true;
}

static sql_type_t *tp_fail(tparser_t *t, const char *what) {
    if (t->err && !t->err[0])
        snprintf(t->err, t->errlen, "type \"%s\": %s at offset %d", t->s, what, (int)(t->p - t->s));
    return NULL;
}

static sql_type_t *type_new(sql_kind_t k) {
    sql_type_t *ty = sl_calloc(1, sizeof *ty);
    ty->kind = k;
    ty->nullable = true;
    ty->width = 1;
    return ty;
}

/* (n) or (p, s) after a type name; def when absent. */
static bool tp_params(tparser_t *t, int *a, int *b, int defa, int defb) {
    *a = defa;
    if (b) *b = defb;
    if (!tp_ch(t, '(')) return true;
    if (!tp_int(t, a)) return false;
    if (b && tp_ch(t, ',')) {
        if (!tp_int(t, b)) return false;
    }
    return tp_ch(t, ')');
}

static sql_type_t *tp_type(tparser_t *t);

static sql_type_t *tp_row(tparser_t *t, sql_type_t *ty) {
    if (!tp_ch(t, '<') && !tp_ch(t, '(')) return tp_fail(t, "ROW wants <");
    char close = t->p[-1] == '<' ? '>' : ')';
    int cap = 0;
    for (;;) {
        tp_ws(t);
        char name[256];
        size_t n = 0;
        if (*t->p == '`') {
            t->p++;
            while (*t->p && !(*t->p == '`' && t->p[1] != '`')) {
                if (*t->p == '`') t->p++; /* `` is one ` */
                if (n + 1 < sizeof name) name[n++] = *t->p;
                t->p++;
            }
            if (*t->p != '`') return tp_fail(t, "unterminated field name");
            t->p++;
        } else {
            while (isalnum((unsigned char)*t->p) || *t->p == '_') {
                if (n + 1 < sizeof name) name[n++] = *t->p;
                t->p++;
            }
        }
        name[n] = 0;
        if (!n) return tp_fail(t, "ROW field without a name");
        sql_type_t *f = tp_type(t);
        if (!f) return NULL;
        tp_ws(t);
        if (*t->p == '\'') { /* a description */
            t->p++;
            while (*t->p && !(*t->p == '\'' && t->p[1] != '\'')) t->p += *t->p == '\'' ? 2 : 1;
            if (*t->p) t->p++;
        }
        if (ty->nfields == cap) {
            cap = cap ? 2 * cap : 8;
            ty->names = sl_realloc(ty->names, (size_t)cap * sizeof *ty->names);
            ty->fields = sl_realloc(ty->fields, (size_t)cap * sizeof *ty->fields);
        }
        ty->names[ty->nfields] = sl_strdup(name);
        ty->fields[ty->nfields++] = f;
        if (tp_ch(t, ',')) continue;
        if (tp_ch(t, close)) break;
        return tp_fail(t, "expected , or end of ROW");
    }
    ty->width = 0;
    for (int i = 0; i < ty->nfields; i++) ty->width += ty->fields[i]->width;
    return ty;
}

static sql_type_t *tp_type(tparser_t *t) {
    if (++t->depth > 32) return tp_fail(t, "nested too deeply");
    tp_ws(t);
    const char *start = t->p;
    sql_type_t *ty = NULL;
    int a, b;
#define PARAMS(da, db, bp)                                                       \
    do {                                                                         \
        if (!tp_params(t, &a, bp, da, db)) {                                     \
            sql_type_free(ty);                                                   \
            return tp_fail(t, "bad type parameters");                            \
        }                                                                        \
    } while (0)
    if (tp_kw(t, "BOOLEAN")) ty = type_new(SK_BOOLEAN);
    else if (tp_kw(t, "TINYINT")) ty = type_new(SK_TINYINT);
    else if (tp_kw(t, "SMALLINT")) ty = type_new(SK_SMALLINT);
    else if (tp_kw(t, "INTEGER") || tp_kw(t, "INT")) ty = type_new(SK_INT);
    else if (tp_kw(t, "BIGINT")) ty = type_new(SK_BIGINT);
    else if (tp_kw(t, "FLOAT")) ty = type_new(SK_FLOAT);
    else if (tp_kw(t, "DOUBLE")) {
        ty = type_new(SK_DOUBLE);
        tp_kw(t, "PRECISION");
    } else if (tp_kw(t, "DECIMAL") || tp_kw(t, "DEC") || tp_kw(t, "NUMERIC")) {
        ty = type_new(SK_DECIMAL);
        PARAMS(10, 0, &b);
        ty->precision = a;
        ty->scale = b;
        if (a < 1 || a > 38 || b < 0 || b > a) {
            sql_type_free(ty);
            return tp_fail(t, "DECIMAL precision must be 1..38 and scale 0..precision");
        }
    } else if (tp_kw(t, "CHAR")) {
        ty = type_new(SK_CHAR);
        PARAMS(1, 0, NULL);
        ty->precision = a;
    } else if (tp_kw(t, "VARCHAR")) {
        ty = type_new(SK_VARCHAR);
        PARAMS(1, 0, NULL);
        ty->precision = a;
    } else if (tp_kw(t, "STRING")) {
        ty = type_new(SK_VARCHAR);
        ty->precision = 2147483647;
    } else if (tp_kw(t, "BINARY")) {
        ty = type_new(SK_BINARY);
        PARAMS(1, 0, NULL);
        ty->precision = a;
    } else if (tp_kw(t, "VARBINARY")) {
        ty = type_new(SK_VARBINARY);
        PARAMS(1, 0, NULL);
        ty->precision = a;
    } else if (tp_kw(t, "BYTES")) {
        ty = type_new(SK_VARBINARY);
        ty->precision = 2147483647;
    } else if (tp_kw(t, "TIMESTAMP_LTZ")) {
        ty = type_new(SK_TIMESTAMP_LTZ);
        PARAMS(6, 0, NULL);
        ty->precision = a;
    } else if (tp_kw(t, "TIMESTAMP")) {
        ty = type_new(SK_TIMESTAMP);
        PARAMS(6, 0, NULL);
        ty->precision = a;
        if (tp_kw(t, "WITH")) {
            if (!tp_kw(t, "LOCAL") || !tp_kw(t, "TIME") || !tp_kw(t, "ZONE")) {
                sql_type_free(ty);
                return tp_fail(t, "bad TIMESTAMP WITH ... TIME ZONE");
            }
            ty->kind = SK_TIMESTAMP_LTZ;
        } else if (tp_kw(t, "WITHOUT")) {
            if (!tp_kw(t, "TIME") || !tp_kw(t, "ZONE")) {
                sql_type_free(ty);
                return tp_fail(t, "bad TIMESTAMP WITHOUT TIME ZONE");
            }
        }
        if (a > 9) {
            sql_type_free(ty);
            return tp_fail(t, "TIMESTAMP precision must be 0..9");
        }
    } else if (tp_kw(t, "DATE")) ty = type_new(SK_DATE);
    else if (tp_kw(t, "TIME")) {
        ty = type_new(SK_TIME);
        PARAMS(0, 0, NULL);
        ty->precision = a;
    } else if (tp_kw(t, "INTERVAL")) {
        /* INTERVAL SECOND(6), INTERVAL DAY(2) TO SECOND(3), INTERVAL YEAR(2) TO MONTH, ... */
        ty = type_new(SK_INTERVAL_DT);
        bool ym = false;
        for (;;) {
            if (tp_kw(t, "YEAR") || tp_kw(t, "MONTH")) ym = true;
            else if (!(tp_kw(t, "DAY") || tp_kw(t, "HOUR") || tp_kw(t, "MINUTE") || tp_kw(t, "SECOND")))
                break;
            PARAMS(2, 0, NULL);
            if (!tp_kw(t, "TO")) break;
        }
        if (ym) ty->kind = SK_INTERVAL_YM;
    } else if (tp_kw(t, "ROW")) {
        ty = type_new(SK_ROW);
        if (!tp_row(t, ty)) {
            sql_type_free(ty);
            return NULL;
        }
    } else if (tp_kw(t, "NULL")) {
        ty = type_new(SK_NULL);
    } else {
        return tp_fail(t, "unknown type");
    }
#undef PARAMS
    if (tp_kw(t, "NOT")) {
        if (!tp_kw(t, "NULL")) {
            sql_type_free(ty);
            return tp_fail(t, "NOT without NULL");
        }
        ty->nullable = false;
    } else {
        tp_kw(t, "NULL");
    }
    t->depth--;
    ty->text = sl_strndup(start, (size_t)(t->p - start));
    return ty;
}

sql_type_t *sql_type_parse_str(const char *s, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    tparser_t t = {s, s, err, errlen, 0};
    sql_type_t *ty = tp_type(&t);
    if (!ty) {
        if (err && errlen && !err[0]) snprintf(err, errlen, "type \"%s\" is malformed", s);
        return NULL;
    }
    tp_ws(&t);
    if (*t.p) {
        sql_type_free(ty);
        return tp_fail(&t, "unexpected text after the type");
    }
    sl_free(ty->text);
    ty->text = sl_strdup(s);
    return ty;
}

sql_type_t *sql_type_parse(const json_t *j, char *err, size_t errlen) {
    if (err && errlen) err[0] = 0;
    if (json_is_string(j)) return sql_type_parse_str(json_string_value(j), err, errlen);
    if (!json_is_object(j)) {
        snprintf(err, errlen, "a type must be a string or an object");
        return NULL;
    }
    const char *root = json_string_value(json_object_get(j, "type"));
    if (!root) {
        snprintf(err, errlen, "a type object without a string \"type\"");
        return NULL;
    }
    json_t *jn = json_object_get(j, "nullable");
    bool nullable = jn ? json_is_true(jn) : true;
    json_t *jp = json_object_get(j, "precision");
    int precision = json_is_integer(jp) ? (int)json_integer_value(jp) : -1;
    sql_type_t *ty = NULL;
    if (!strcmp(root, "ROW")) {
        json_t *fs = json_object_get(j, "fields");
        if (!json_is_array(fs)) {
            snprintf(err, errlen, "ROW type object without a \"fields\" array");
            return NULL;
        }
        ty = type_new(SK_ROW);
        ty->width = 0;
        size_t n = json_array_size(fs);
        ty->names = sl_calloc(n ? n : 1, sizeof *ty->names);
        ty->fields = sl_calloc(n ? n : 1, sizeof *ty->fields);
        for (size_t i = 0; i < n; i++) {
            json_t *f = json_array_get(fs, i);
            const char *name = json_string_value(json_object_get(f, "name"));
            sql_type_t *ft = name ? sql_type_parse(json_object_get(f, "fieldType"), err, errlen) : NULL;
            if (!ft) {
                if (!name) snprintf(err, errlen, "ROW field %zu without a \"name\"", i);
                sql_type_free(ty);
                return NULL;
            }
            ty->names[i] = sl_strdup(name);
            ty->fields[i] = ft;
            ty->nfields++;
            ty->width += ft->width;
        }
    } else if (!strcmp(root, "TIMESTAMP_WITHOUT_TIME_ZONE") || !strcmp(root, "TIMESTAMP_WITH_LOCAL_TIME_ZONE")) {
        ty = type_new(!strcmp(root, "TIMESTAMP_WITHOUT_TIME_ZONE") ? SK_TIMESTAMP : SK_TIMESTAMP_LTZ);
        ty->precision = precision < 0 ? 6 : precision;
        if (ty->precision > 9) {
            snprintf(err, errlen, "TIMESTAMP precision %d is out of range", ty->precision);
            sql_type_free(ty);
            return NULL;
        }
    } else {
        snprintf(err, errlen, "type %s (object form) is not supported", root);
        return NULL;
    }
    ty->nullable = nullable;
    char *dump = json_dumps(j, JSON_COMPACT);
    ty->text = sl_strdup(dump ? dump : "?");
    free(dump);
    return ty;
}

void sql_type_free(sql_type_t *t) {
    if (!t) return;
    for (int i = 0; i < t->nfields; i++) {
        sl_free(t->names[i]);
        sql_type_free(t->fields[i]);
    }
    sl_free(t->names);
    sl_free(t->fields);
    free(t->text); /* strdup or json_dumps: both malloc */
    sl_free(t);
}

bool sql_kind_integral(sql_kind_t k) { return k == SK_TINYINT || k == SK_SMALLINT || k == SK_INT || k == SK_BIGINT; }
bool sql_kind_string(sql_kind_t k) { return k == SK_CHAR || k == SK_VARCHAR; }
bool sql_kind_numeric(sql_kind_t k) {
    return sql_kind_integral(k) || k == SK_FLOAT || k == SK_DOUBLE || k == SK_DECIMAL;
}

int sql_type_storable(const sql_type_t *t, char *err, size_t errlen) {
    switch (t->kind) {
    case SK_BOOLEAN: case SK_TINYINT: case SK_SMALLINT: case SK_INT: case SK_BIGINT: case SK_DOUBLE:
    case SK_DECIMAL: case SK_CHAR: case SK_VARCHAR: case SK_BINARY: case SK_VARBINARY:
        return 0;
    case SK_TIMESTAMP:
        if (t->precision <= 3) return 0;
        snprintf(err, errlen, "type %s is not supported (TIMESTAMP precision above 3)", t->text ? t->text : "?");
        return SL_EINVAL;
    case SK_ROW:
        for (int i = 0; i < t->nfields; i++)
            if (sql_type_storable(t->fields[i], err, errlen) < 0) return SL_EINVAL;
        return 0;
    default:
        snprintf(err, errlen, "type %s is not supported yet", t->text ? t->text : "?");
        return SL_EINVAL;
    }
}

void sql_type_add_fields(const sql_type_t *t, const char *prefix, sl_schema_t *s) {
    if (t->kind == SK_ROW) {
        for (int i = 0; i < t->nfields; i++) {
            char name[512];
            snprintf(name, sizeof name, "%s.%s", prefix, t->names[i]);
            sql_type_add_fields(t->fields[i], name, s);
        }
        return;
    }
    sl_type_t st = SL_VARCHAR;
    switch (t->kind) {
    case SK_BOOLEAN: st = SL_BOOLEAN; break;
    case SK_TINYINT: case SK_SMALLINT: case SK_INT: st = SL_INT; break;
    case SK_BIGINT: st = SL_BIGINT; break;
    case SK_DOUBLE: st = SL_DOUBLE; break;
    case SK_DECIMAL: case SK_BINARY: case SK_VARBINARY: st = SL_BYTES; break;
    case SK_TIMESTAMP: st = SL_TIMESTAMP; break;
    default: st = SL_VARCHAR;
    }
    char name[512];
    snprintf(name, sizeof name, "%s", prefix);
    /* names are unique by construction (column index prefix), but be safe */
    if (sl_schema_index(s, name) >= 0) snprintf(name, sizeof name, "%s#%d", prefix, sl_schema_field_count(s));
    sl_schema_add(s, name, st, true);
}

/* ---- decimals ----------------------------------------------------------- */

#define P10(n) ((sql_i128)n)
const sql_i128 sql_pow10[39] = {
    P10(1),
    P10(10),
    P10(100),
    P10(1000),
    P10(10000),
    P10(100000),
    P10(1000000),
    P10(10000000),
    P10(100000000),
    P10(1000000000),
    P10(10000000000LL),
    P10(100000000000LL),
    P10(1000000000000LL),
    P10(10000000000000LL),
    P10(100000000000000LL),
    P10(1000000000000000LL),
    P10(10000000000000000LL),
    P10(100000000000000000LL),
    P10(1000000000000000000LL),
    P10(1000000000000000000LL) * 10,
    P10(1000000000000000000LL) * 100,
    P10(1000000000000000000LL) * 1000,
    P10(1000000000000000000LL) * 10000,
    P10(1000000000000000000LL) * 100000,
    P10(1000000000000000000LL) * 1000000,
    P10(1000000000000000000LL) * 10000000,
    P10(1000000000000000000LL) * 100000000,
    P10(1000000000000000000LL) * 1000000000,
    P10(1000000000000000000LL) * 10000000000LL,
    P10(1000000000000000000LL) * 100000000000LL,
    P10(1000000000000000000LL) * 1000000000000LL,
    P10(1000000000000000000LL) * 10000000000000LL,
    P10(1000000000000000000LL) * 100000000000000LL,
    P10(1000000000000000000LL) * 1000000000000000LL,
    P10(1000000000000000000LL) * 10000000000000000LL,
    P10(1000000000000000000LL) * 100000000000000000LL,
    P10(1000000000000000000LL) * 1000000000000000000LL,
    P10(1000000000000000000LL) * 1000000000000000000LL * 10,
    P10(1000000000000000000LL) * 1000000000000000000LL * 100,
};

bool sql_dec_rescale(sql_i128 v, int from, int to, sql_i128 *out) {
    if (to == from) {
        *out = v;
        return true;
    }
    if (to > from) {
        int d = to - from;
        if (d > 38) return v == 0 ? (*out = 0, true) : false;
        sql_i128 r;
        if (__builtin_mul_overflow(v, sql_pow10[d], &r)) return false;
        *out = r;
        return true;
    }
    int d = from - to;
    if (d <= 0 || d > 38) { /* d <= 0 cannot happen (handled above); it tells -O3 the index is in range */
        *out = d <= 0 ? v : 0;
        return true;
    }
    sql_i128 q = v / sql_pow10[d], rem = v % sql_pow10[d];
    sql_i128 arem = rem < 0 ? -rem : rem;
    if (arem * 2 >= sql_pow10[d]) q += v < 0 ? -1 : 1; /* HALF_UP: away from zero at .5 */
    *out = q;
    return true;
}

bool sql_dec_fits(sql_i128 v, int precision) {
    sql_i128 a = v < 0 ? -v : v;
    return precision >= 38 ? a < sql_pow10[38] : a < sql_pow10[precision];
}

int sql_dec_format(sql_i128 v, int scale, char *buf, size_t cap) {
    char digits[48];
    int n = 0;
    bool neg = v < 0;
    unsigned __int128 a = neg ? (unsigned __int128)0 - (unsigned __int128)v : (unsigned __int128)v;
    do {
        digits[n++] = (char)('0' + (int)(a % 10));
        a /= 10;
    } while (a);
    while (n <= scale) digits[n++] = '0';
    char tmp[64];
    int k = 0;
    if (neg) tmp[k++] = '-';
    for (int i = n - 1; i >= 0; i--) {
        tmp[k++] = digits[i];
        if (i == scale && scale > 0) tmp[k++] = '.';
    }
    tmp[k] = 0;
    return snprintf(buf, cap, "%s", tmp);
}

bool sql_dec_parse(const char *s, size_t len, int scale, sql_i128 *out) {
    size_t i = 0;
    while (i < len && isspace((unsigned char)s[i])) i++;
    while (len > i && isspace((unsigned char)s[len - 1])) len--;
    bool neg = false;
    if (i < len && (s[i] == '-' || s[i] == '+')) neg = s[i++] == '-';
    sql_i128 v = 0;
    int frac = -1, nd = 0, exp10 = 0;
    for (; i < len; i++) {
        char c = s[i];
        if (c == '.' && frac < 0) {
            frac = 0;
            continue;
        }
        if (c == 'e' || c == 'E') {
            i++;
            bool eneg = false;
            if (i < len && (s[i] == '-' || s[i] == '+')) eneg = s[i++] == '-';
            if (i >= len) return false;
            for (; i < len; i++) {
                if (!isdigit((unsigned char)s[i]) || exp10 > 1000) return false;
                exp10 = exp10 * 10 + (s[i] - '0');
            }
            if (eneg) exp10 = -exp10;
            break;
        }
        if (!isdigit((unsigned char)c)) return false;
        nd++;
        if (__builtin_mul_overflow(v, (sql_i128)10, &v) || __builtin_add_overflow(v, (sql_i128)(c - '0'), &v))
            return false;
        if (frac >= 0) frac++;
    }
    if (!nd) return false;
    int have = (frac < 0 ? 0 : frac) - exp10;
    if (neg) v = -v;
    if (have < 0) {
        if (!sql_dec_rescale(v, 0, -have, &v)) return false;
        have = 0;
    }
    return sql_dec_rescale(v, have, scale, out);
}
