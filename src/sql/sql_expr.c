/*
 * sql_expr.c — Flink's RexNode expressions (as a compiled plan serializes
 * them) compiled into a small tree and evaluated over flat sluice rows with
 * Flink's semantics: three-valued logic with NULL, Java's wrapping integer
 * arithmetic, DECIMAL(p, s) with HALF_UP rounding and NULL on overflow,
 * CASE, CAST, SEARCH (IN / ranges), and the string functions the Nexmark
 * queries use (and DATE_FORMAT of a TIMESTAMP with a literal pattern of
 * Java's SimpleDateFormat letters y M d H m s S).  Anything else is refused when the expression is compiled,
 * naming the function or type.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"
#include "sql/sql_int.h"

typedef enum {
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_AND, OP_OR, OP_NOT, OP_IS_NULL, OP_IS_NOT_NULL,
    OP_IS_TRUE, OP_IS_NOT_TRUE, OP_IS_FALSE, OP_IS_NOT_FALSE, OP_PLUS, OP_MINUS, OP_TIMES, OP_DIVIDE,
    OP_MOD, OP_NEG, OP_CASE, OP_CAST, OP_LOWER, OP_UPPER, OP_CHAR_LENGTH, OP_CONCAT,
    OP_REGEXP_EXTRACT, OP_SPLIT_INDEX, OP_SEARCH, OP_COALESCE, OP_ABS, OP_DATE_FORMAT
} op_t;

static const struct {
    const char *name;
    op_t op;
    int min, max; /* operands */
} OPS[] = {
    {"=", OP_EQ, 2, 2}, {"<>", OP_NE, 2, 2}, {"<", OP_LT, 2, 2}, {"<=", OP_LE, 2, 2},
    {">", OP_GT, 2, 2}, {">=", OP_GE, 2, 2}, {"AND", OP_AND, 2, 1 << 20}, {"OR", OP_OR, 2, 1 << 20},
    {"NOT", OP_NOT, 1, 1}, {"IS NULL", OP_IS_NULL, 1, 1}, {"IS NOT NULL", OP_IS_NOT_NULL, 1, 1},
    {"IS TRUE", OP_IS_TRUE, 1, 1}, {"IS NOT TRUE", OP_IS_NOT_TRUE, 1, 1}, {"IS FALSE", OP_IS_FALSE, 1, 1},
    {"IS NOT FALSE", OP_IS_NOT_FALSE, 1, 1}, {"+", OP_PLUS, 2, 2}, {"-", OP_MINUS, 1, 2},
    {"*", OP_TIMES, 2, 2}, {"/", OP_DIVIDE, 2, 2}, {"MOD", OP_MOD, 2, 2}, {"CASE", OP_CASE, 3, 1 << 20},
    {"CAST", OP_CAST, 1, 1}, {"LOWER", OP_LOWER, 1, 1}, {"UPPER", OP_UPPER, 1, 1},
    {"CHAR_LENGTH", OP_CHAR_LENGTH, 1, 1}, {"||", OP_CONCAT, 2, 2}, {"REGEXP_EXTRACT", OP_REGEXP_EXTRACT, 2, 3},
    {"SPLIT_INDEX", OP_SPLIT_INDEX, 3, 3}, {"SEARCH", OP_SEARCH, 2, 2}, {"COALESCE", OP_COALESCE, 1, 1 << 20},
    {"ABS", OP_ABS, 1, 1}, {"DATE_FORMAT", OP_DATE_FORMAT, 2, 2},
};

typedef struct sarg_range {
    bool has_lo, lo_closed, has_hi, hi_closed;
    sql_val_t lo, hi;
    char *lo_buf, *hi_buf;
} sarg_range_t;

enum { X_REF, X_LIT, X_CALL };

struct sql_expr {
    int kind;
    op_t op;
    sql_type_t *type;
    int ref;           /* X_REF: first flat field */
    sql_val_t lit;     /* X_LIT */
    char *lit_buf;
    int n;
    sql_expr_t **args;
    /* SEARCH */
    sql_type_t *sarg_type;
    int nranges;
    sarg_range_t *ranges;
    int null_as; /* 0 UNKNOWN, 1 TRUE, 2 FALSE */
    /* REGEXP_EXTRACT with a literal pattern */
    bool re_ok, re_bad;
    regex_t re;
};

/* ---- scratch ------------------------------------------------------------ */

struct sql_chunk {
    struct sql_chunk *next;
    size_t cap, used;
    char data[];
};

static char *scratch_alloc(sql_scratch_t *sc, size_t n) {
    struct sql_chunk *c = sc->chunks;
    if (!c || c->cap - c->used < n) {
        size_t cap = n > 8192 ? n : 8192;
        c = sl_malloc(sizeof *c + cap);
        c->cap = cap;
        c->used = 0;
        c->next = sc->chunks;
        sc->chunks = c;
    }
    char *p = c->data + c->used;
    c->used += n;
    return p;
}

void sql_scratch_reset(sql_scratch_t *sc) {
    struct sql_chunk *c = sc->chunks;
    if (!c) return;
    struct sql_chunk *rest = c->next;
    c->next = NULL;
    c->used = 0;
    while (rest) {
        struct sql_chunk *n = rest->next;
        sl_free(rest);
        rest = n;
    }
}

void sql_scratch_free(sql_scratch_t *sc) {
    sql_scratch_reset(sc);
    sl_free(sc->chunks);
    sc->chunks = NULL;
}

/* ---- types ---------------------------------------------------------------- */

static sql_type_t *type_clone(const sql_type_t *t) {
    sql_type_t *c = sl_calloc(1, sizeof *c);
    *c = *t;
    c->text = t->text ? sl_strdup(t->text) : NULL;
    if (t->nfields) {
        c->names = sl_calloc((size_t)t->nfields, sizeof *c->names);
        c->fields = sl_calloc((size_t)t->nfields, sizeof *c->fields);
        for (int i = 0; i < t->nfields; i++) {
            c->names[i] = sl_strdup(t->names[i]);
            c->fields[i] = type_clone(t->fields[i]);
        }
    }
    return c;
}

const sql_type_t *sql_expr_type(const sql_expr_t *e) { return e->type; }

bool sql_expr_flat_ref(const sql_expr_t *e, int *first, int *width) {
    if (e->kind != X_REF) return false;
    *first = e->ref;
    *width = e->type->width;
    return true;
}

void sql_expr_free(sql_expr_t *e) {
    if (!e) return;
    for (int i = 0; i < e->n; i++) sql_expr_free(e->args[i]);
    sl_free(e->args);
    sql_type_free(e->type);
    sql_type_free(e->sarg_type);
    for (int i = 0; i < e->nranges; i++) {
        sl_free(e->ranges[i].lo_buf);
        sl_free(e->ranges[i].hi_buf);
    }
    sl_free(e->ranges);
    sl_free(e->lit_buf);
    if (e->re_ok) regfree(&e->re);
    sl_free(e);
}

/* ---- literals --------------------------------------------------------------- */

static int64_t days_from_civil(int64_t y, unsigned m, unsigned d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400;
    unsigned yoe = (unsigned)(y - era * 400);
    unsigned doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
    unsigned doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    return era * 146097 + (int64_t)doe - 719468;
}

/* "yyyy-MM-dd[ T]HH:mm[:ss[.fff]]" -> ms; false if malformed. */
static bool parse_timestamp(const char *s, size_t len, int64_t *ms) {
    int y, mo, d, h = 0, mi = 0, sec = 0, n = 0;
    char buf[64];
    if (len >= sizeof buf) return false;
    memcpy(buf, s, len);
    buf[len] = 0;
    if (sscanf(buf, "%d-%d-%d%n", &y, &mo, &d, &n) != 3) return false;
    const char *p = buf + n;
    if (*p == ' ' || *p == 'T') {
        int k = 0;
        if (sscanf(p + 1, "%d:%d%n", &h, &mi, &k) != 2) return false;
        p += 1 + k;
        if (*p == ':') {
            if (sscanf(p + 1, "%d%n", &sec, &k) != 1) return false;
            p += 1 + k;
        }
    }
    int64_t frac = 0;
    if (*p == '.') {
        int digits = 0;
        for (p++; isdigit((unsigned char)*p); p++, digits++)
            if (digits < 3) frac = frac * 10 + (*p - '0');
        for (; digits < 3; digits++) frac *= 10;
    }
    if (*p || mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || sec > 59) return false;
    *ms = ((days_from_civil(y, (unsigned)mo, (unsigned)d) * 24 + h) * 60 + mi) * 60000LL + sec * 1000LL + frac;
    return true;
}

/* Sets v from a literal JSON value of type t; false with a message if it cannot. */
static bool literal_value(const json_t *jv, const sql_type_t *t, sql_val_t *v, char **buf, char *err, size_t errlen) {
    memset(v, 0, sizeof *v);
    if (!jv || json_is_null(jv)) {
        v->null = true;
        return true;
    }
    const char *s = json_string_value(jv);
    switch (t->kind) {
    case SK_BOOLEAN:
        if (!json_is_boolean(jv)) break;
        v->i = json_is_true(jv);
        return true;
    case SK_TINYINT: case SK_SMALLINT: case SK_INT: case SK_BIGINT: case SK_INTERVAL_DT: case SK_INTERVAL_YM:
        if (json_is_integer(jv)) {
            v->i = (int64_t)json_integer_value(jv);
            return true;
        }
        if (s) {
            char *end;
            errno = 0;
            long long x = strtoll(s, &end, 10);
            if (!*s || *end || errno) break;
            v->i = x;
            return true;
        }
        break;
    case SK_DOUBLE:
        if (json_is_number(jv)) {
            v->d = json_number_value(jv);
            return true;
        }
        if (s) {
            char *end;
            v->d = strtod(s, &end);
            if (!*s || *end) break;
            return true;
        }
        break;
    case SK_DECIMAL: {
        char tmp[64];
        if (json_is_integer(jv)) snprintf(tmp, sizeof tmp, "%lld", (long long)json_integer_value(jv));
        else if (s) snprintf(tmp, sizeof tmp, "%s", s);
        else break;
        if (!sql_dec_parse(tmp, strlen(tmp), t->scale, &v->dec) || !sql_dec_fits(v->dec, t->precision)) break;
        return true;
    }
    case SK_CHAR: case SK_VARCHAR:
        if (!s) break;
        *buf = sl_strdup(s);
        v->s = *buf;
        v->len = (uint32_t)strlen(s);
        return true;
    case SK_TIMESTAMP:
        if (!s || !parse_timestamp(s, strlen(s), &v->i)) break;
        return true;
    default:
        snprintf(err, errlen, "literals of type %s are not supported", t->text ? t->text : "?");
        return false;
    }
    char *d = json_dumps(jv, JSON_ENCODE_ANY | JSON_COMPACT);
    snprintf(err, errlen, "literal %s is not a valid %s", d ? d : "?", t->text ? t->text : "?");
    free(d);
    return false;
}

/* ---- compile ---------------------------------------------------------------- */

static sql_expr_t *x_new(int kind) {
    sql_expr_t *e = sl_calloc(1, sizeof *e);
    e->kind = kind;
    return e;
}

static int find_op(const char *name) {
    for (size_t i = 0; i < sizeof OPS / sizeof OPS[0]; i++)
        if (!strcmp(OPS[i].name, name)) return (int)i;
    return -1;
}

/* A Java regex that POSIX ERE reads the same way (no classes like \d, no
 * lazy or possessive quantifiers, no groups with (?...), no back references). */
static const char *date_format_check(const char *f, uint32_t n);

static const char *java_only_regex(const char *p) {
    for (const char *c = p; *c; c++) {
        if (*c == '\\' && c[1]) {
            if (strchr("dDwWsSbBAzZQEpPhHvVRXk0123456789", c[1])) return "a Java escape such as \\d or \\w";
            c++;
            continue;
        }
        if (*c == '(' && c[1] == '?') return "a (?...) group";
        if ((*c == '*' || *c == '+' || *c == '?' || *c == '}') && (c[1] == '?' || c[1] == '+'))
            return "a lazy or possessive quantifier";
    }
    return NULL;
}

static sql_expr_t *compile(const json_t *j, const sql_input_t *in, const char *where, char *err, size_t errlen,
                           int depth);

#define FAIL(...)                                  \
    do {                                           \
        int _n = snprintf(err, errlen, "%s: ", where); \
        if (_n >= 0 && (size_t)_n < errlen) snprintf(err + _n, errlen - (size_t)_n, __VA_ARGS__); \
        sql_expr_free(e);                          \
        return NULL;                               \
    } while (0)

static bool comparable(const sql_type_t *a, const sql_type_t *b) {
    if (a->kind == SK_NULL || b->kind == SK_NULL) return true;
    if (sql_kind_numeric(a->kind) && sql_kind_numeric(b->kind)) return true;
    if (sql_kind_string(a->kind) && sql_kind_string(b->kind)) return true;
    if ((a->kind == SK_BINARY || a->kind == SK_VARBINARY) && (b->kind == SK_BINARY || b->kind == SK_VARBINARY))
        return true;
    return a->kind == b->kind && (a->kind == SK_BOOLEAN || a->kind == SK_TIMESTAMP);
}

static bool castable(const sql_type_t *from, const sql_type_t *to) {
    sql_kind_t f = from->kind, t = to->kind;
    if (f == SK_NULL) return true;
    if (sql_kind_numeric(t) && t != SK_FLOAT) return (sql_kind_numeric(f) && f != SK_FLOAT) || sql_kind_string(f) || (f == SK_BOOLEAN && t != SK_DECIMAL && t != SK_DOUBLE);
    if (sql_kind_string(t)) return f != SK_ROW && f != SK_FLOAT && f != SK_DOUBLE && f != SK_BINARY && f != SK_VARBINARY && f != SK_INTERVAL_DT && f != SK_INTERVAL_YM && f != SK_DATE && f != SK_TIME && f != SK_TIMESTAMP_LTZ;
    if (t == SK_BOOLEAN) return f == SK_BOOLEAN || sql_kind_string(f) || sql_kind_integral(f);
    if (t == SK_TIMESTAMP) return (f == SK_TIMESTAMP && from->precision <= 3 && to->precision <= 3) || (sql_kind_string(f) && to->precision <= 3);
    if (t == SK_VARBINARY || t == SK_BINARY) return f == SK_VARBINARY || f == SK_BINARY;
    return false;
}

static sql_expr_t *compile_call(const json_t *j, const sql_input_t *in, const char *where, char *err, size_t errlen,
                                int depth) {
    sql_expr_t *e = NULL;
    const char *iname = json_string_value(json_object_get(j, "internalName"));
    const char *sname = json_string_value(json_object_get(j, "systemName"));
    if (json_object_get(j, "catalogName") || json_object_get(j, "class"))
        FAIL("user-defined functions are not supported yet");
    char name[128];
    int version = 1;
    if (iname) {
        /* "$NAME$VERSION" */
        const char *a = iname[0] == '$' ? iname + 1 : iname;
        const char *b = strrchr(a, '$');
        size_t n = b ? (size_t)(b - a) : strlen(a);
        if (n >= sizeof name) n = sizeof name - 1;
        memcpy(name, a, n);
        name[n] = 0;
        if (b) version = atoi(b + 1);
    } else if (sname) {
        snprintf(name, sizeof name, "%s", sname);
    } else {
        FAIL("a CALL without \"internalName\" or \"systemName\"");
    }
    for (char *c = name; *c; c++) *c = (char)toupper((unsigned char)*c);
    if (!strcmp(name, "CONCAT")) snprintf(name, sizeof name, "||");
    int oi = find_op(name);
    if (oi < 0) FAIL("function %s is not supported", iname ? iname : sname);
    if (version != 1) FAIL("function %s: version %d is not supported (1 is)", iname, version);
    json_t *ops = json_object_get(j, "operands");
    if (!json_is_array(ops)) FAIL("call %s without an \"operands\" array", name);
    int n = (int)json_array_size(ops);
    if (n < OPS[oi].min || n > OPS[oi].max) FAIL("%s with %d operands", name, n);
    e = x_new(X_CALL);
    e->op = OPS[oi].op;
    if (e->op == OP_MINUS && n == 1) e->op = OP_NEG;
    e->type = sql_type_parse(json_object_get(j, "type"), err, errlen);
    if (!e->type) {
        char m[256];
        snprintf(m, sizeof m, "%s", err);
        FAIL("%s: %s", name, m);
    }
    e->args = sl_calloc((size_t)n, sizeof *e->args);
    for (int i = 0; i < n; i++) {
        json_t *o = json_array_get(ops, (size_t)i);
        if (e->op == OP_SEARCH && i == 1) break;
        e->args[i] = compile(o, in, where, err, errlen, depth + 1);
        if (!e->args[i]) {
            e->n = i;
            sql_expr_free(e);
            return NULL;
        }
        e->n = i + 1;
    }
    const sql_type_t *rt = e->type;
    if (rt->kind == SK_FLOAT || rt->kind == SK_ROW || rt->kind == SK_DATE || rt->kind == SK_TIME ||
        rt->kind == SK_TIMESTAMP_LTZ || rt->kind == SK_OTHER || rt->kind == SK_INTERVAL_YM ||
        (rt->kind == SK_TIMESTAMP && rt->precision > 3))
        FAIL("%s returning %s is not supported", name, rt->text);
    for (int i = 0; i < e->n; i++) {
        const sql_type_t *at = e->args[i]->type;
        if (at->kind == SK_FLOAT || at->kind == SK_ROW || at->kind == SK_DATE || at->kind == SK_TIME ||
            at->kind == SK_TIMESTAMP_LTZ || at->kind == SK_INTERVAL_YM)
            FAIL("%s of %s is not supported", name, at->text);
    }
    const sql_type_t *a0 = e->args[0]->type, *a1 = e->n > 1 ? e->args[1]->type : NULL;
    switch (e->op) {
    case OP_EQ: case OP_NE: case OP_LT: case OP_LE: case OP_GT: case OP_GE:
        if (!comparable(a0, a1)) FAIL("%s of %s and %s is not supported", name, a0->text, a1->text);
        break;
    case OP_AND: case OP_OR: case OP_NOT: case OP_IS_TRUE: case OP_IS_NOT_TRUE: case OP_IS_FALSE: case OP_IS_NOT_FALSE:
        for (int i = 0; i < e->n; i++)
            if (e->args[i]->type->kind != SK_BOOLEAN && e->args[i]->type->kind != SK_NULL)
                FAIL("%s of %s", name, e->args[i]->type->text);
        break;
    case OP_PLUS: case OP_MINUS: case OP_TIMES: case OP_DIVIDE: case OP_MOD:
        if (rt->kind == SK_TIMESTAMP && (e->op == OP_PLUS || e->op == OP_MINUS)) {
            bool ok = (a0->kind == SK_TIMESTAMP && a1->kind == SK_INTERVAL_DT) ||
                      (e->op == OP_PLUS && a1->kind == SK_TIMESTAMP && a0->kind == SK_INTERVAL_DT);
            if (!ok) FAIL("%s of %s and %s", name, a0->text, a1->text);
            break;
        }
        if (!sql_kind_numeric(rt->kind) || !sql_kind_numeric(a0->kind) || !sql_kind_numeric(a1->kind))
            FAIL("%s of %s and %s returning %s is not supported", name, a0->text, a1->text, rt->text);
        if (e->op == OP_MOD && (rt->kind == SK_DECIMAL || rt->kind == SK_DOUBLE))
            FAIL("MOD returning %s is not supported", rt->text);
        break;
    case OP_NEG: case OP_ABS:
        if (!sql_kind_numeric(rt->kind) || !sql_kind_numeric(a0->kind)) FAIL("%s of %s", name, a0->text);
        break;
    case OP_CASE:
        if (n % 2 == 0) FAIL("CASE without ELSE");
        for (int i = 0; i + 1 < n; i += 2)
            if (e->args[i]->type->kind != SK_BOOLEAN) FAIL("CASE condition of type %s", e->args[i]->type->text);
        for (int i = 1; i < n; i += 2) {
            const sql_type_t *vt = e->args[i == n - 1 ? i : i]->type;
            if (!castable(vt, rt)) FAIL("CASE value of type %s in a CASE of %s", vt->text, rt->text);
        }
        if (!castable(e->args[n - 1]->type, rt)) FAIL("CASE value of type %s", e->args[n - 1]->type->text);
        break;
    case OP_COALESCE:
        for (int i = 0; i < n; i++)
            if (!castable(e->args[i]->type, rt)) FAIL("COALESCE of %s into %s", e->args[i]->type->text, rt->text);
        break;
    case OP_CAST:
        if (!castable(a0, rt)) FAIL("CAST from %s to %s is not supported", a0->text, rt->text);
        break;
    case OP_LOWER: case OP_UPPER: case OP_CHAR_LENGTH:
        if (!sql_kind_string(a0->kind)) FAIL("%s of %s", name, a0->text);
        break;
    case OP_CONCAT:
        if (!sql_kind_string(a0->kind) || !sql_kind_string(a1->kind)) FAIL("%s of %s and %s", name, a0->text, a1->text);
        break;
    case OP_REGEXP_EXTRACT:
        if (!sql_kind_string(a0->kind) || !sql_kind_string(a1->kind) || (n == 3 && !sql_kind_integral(e->args[2]->type->kind)))
            FAIL("REGEXP_EXTRACT of %s, %s", a0->text, a1->text);
        if (e->args[1]->kind == X_LIT && !e->args[1]->lit.null) {
            const char *why = java_only_regex(e->args[1]->lit.s);
            if (why) FAIL("REGEXP_EXTRACT pattern '%s' uses %s, which is not supported", e->args[1]->lit.s, why);
            if (regcomp(&e->re, e->args[1]->lit.s, REG_EXTENDED) == 0) e->re_ok = true;
            else e->re_bad = true; /* Flink returns NULL for a bad pattern */
        } else {
            FAIL("REGEXP_EXTRACT with a pattern that is not a literal is not supported");
        }
        break;
    case OP_DATE_FORMAT:
        if (a0->kind != SK_TIMESTAMP || !sql_kind_string(a1->kind))
            FAIL("DATE_FORMAT of %s, %s is not supported (TIMESTAMP, pattern)", a0->text, a1->text);
        if (e->args[1]->kind != X_LIT || e->args[1]->lit.null)
            FAIL("DATE_FORMAT with a pattern that is not a literal is not supported");
        {
            const char *bad = date_format_check(e->args[1]->lit.s, e->args[1]->lit.len);
            if (bad) FAIL("DATE_FORMAT pattern '%.*s': %s", (int)e->args[1]->lit.len, e->args[1]->lit.s, bad);
        }
        break;
    case OP_SPLIT_INDEX:
        if (!sql_kind_string(a0->kind) || !sql_kind_string(a1->kind) || !sql_kind_integral(e->args[2]->type->kind))
            FAIL("SPLIT_INDEX of %s, %s, %s", a0->text, a1->text, e->args[2]->type->text);
        break;
    case OP_SEARCH: {
        json_t *lit = json_array_get(ops, 1);
        json_t *sarg = json_object_get(lit, "sarg");
        json_t *ranges = json_object_get(sarg, "ranges");
        if (!json_is_array(ranges)) FAIL("SEARCH without a \"sarg\" literal with \"ranges\"");
        e->sarg_type = sql_type_parse(json_object_get(lit, "type"), err, errlen);
        if (!e->sarg_type) {
            char m[256];
            snprintf(m, sizeof m, "%s", err);
            FAIL("SEARCH: %s", m);
        }
        if (!comparable(a0, e->sarg_type)) FAIL("SEARCH of %s in %s", a0->text, e->sarg_type->text);
        const char *na = json_string_value(json_object_get(sarg, "nullAs"));
        e->null_as = !na || !strcmp(na, "UNKNOWN") ? 0 : !strcmp(na, "TRUE") ? 1 : 2;
        e->nranges = (int)json_array_size(ranges);
        e->ranges = sl_calloc((size_t)(e->nranges ? e->nranges : 1), sizeof *e->ranges);
        for (int i = 0; i < e->nranges; i++) {
            json_t *r = json_array_get(ranges, (size_t)i);
            sarg_range_t *sr = &e->ranges[i];
            json_t *lo = json_object_get(r, "lower"), *hi = json_object_get(r, "upper");
            if (!json_is_object(r)) FAIL("SEARCH range %d is not an object", i);
            char m[256];
            if (lo) {
                if (!json_is_object(lo) || !literal_value(json_object_get(lo, "value"), e->sarg_type, &sr->lo, &sr->lo_buf, m, sizeof m))
                    FAIL("SEARCH range %d lower bound: %s", i, json_is_object(lo) ? m : "not an object");
                const char *bt = json_string_value(json_object_get(lo, "boundType"));
                sr->has_lo = true;
                sr->lo_closed = !bt || !strcmp(bt, "CLOSED");
            }
            if (hi) {
                if (!json_is_object(hi) || !literal_value(json_object_get(hi, "value"), e->sarg_type, &sr->hi, &sr->hi_buf, m, sizeof m))
                    FAIL("SEARCH range %d upper bound: %s", i, json_is_object(hi) ? m : "not an object");
                const char *bt = json_string_value(json_object_get(hi, "boundType"));
                sr->has_hi = true;
                sr->hi_closed = !bt || !strcmp(bt, "CLOSED");
            }
        }
        break;
    }
    default:
        break;
    }
    return e;
}

static sql_expr_t *compile(const json_t *j, const sql_input_t *in, const char *where, char *err, size_t errlen,
                           int depth) {
    sql_expr_t *e = NULL;
    if (depth > 200) FAIL("expression nested too deeply");
    if (!json_is_object(j)) FAIL("an expression is not a JSON object");
    const char *kind = json_string_value(json_object_get(j, "kind"));
    if (!kind) FAIL("an expression without a string \"kind\"");
    if (!strcmp(kind, "INPUT_REF")) {
        json_t *ji = json_object_get(j, "inputIndex");
        if (!json_is_integer(ji)) FAIL("INPUT_REF without an integer \"inputIndex\"");
        json_int_t idx = json_integer_value(ji);
        if (idx < 0 || idx >= in->ncols) FAIL("INPUT_REF %lld is out of range (the input has %d columns)", (long long)idx, in->ncols);
        e = x_new(X_REF);
        for (int i = 0; i < idx; i++) e->ref += in->cols[i]->width;
        e->type = type_clone(in->cols[idx]);
        return e;
    }
    if (!strcmp(kind, "FIELD_ACCESS")) {
        const char *fname = json_string_value(json_object_get(j, "name"));
        if (!fname) FAIL("FIELD_ACCESS without a \"name\"");
        sql_expr_t *base = compile(json_object_get(j, "expr"), in, where, err, errlen, depth + 1);
        if (!base) return NULL;
        if (base->kind != X_REF || base->type->kind != SK_ROW) {
            sql_expr_free(base);
            FAIL("FIELD_ACCESS %s of something that is not a ROW column", fname);
        }
        int off = base->ref;
        for (int i = 0; i < base->type->nfields; i++) {
            if (!strcmp(base->type->names[i], fname)) {
                e = x_new(X_REF);
                e->ref = off;
                e->type = type_clone(base->type->fields[i]);
                sql_expr_free(base);
                return e;
            }
            off += base->type->fields[i]->width;
        }
        sql_expr_free(base);
        FAIL("FIELD_ACCESS: the ROW has no field %s", fname);
    }
    if (!strcmp(kind, "LITERAL")) {
        e = x_new(X_LIT);
        e->type = sql_type_parse(json_object_get(j, "type"), err, errlen);
        if (!e->type) {
            char m[256];
            snprintf(m, sizeof m, "%s", err);
            FAIL("LITERAL: %s", m);
        }
        if (json_object_get(j, "sarg")) FAIL("a SARG literal outside SEARCH");
        char m[256];
        if (!literal_value(json_object_get(j, "value"), e->type, &e->lit, &e->lit_buf, m, sizeof m)) FAIL("%s", m);
        return e;
    }
    if (!strcmp(kind, "CALL")) return compile_call(j, in, where, err, errlen, depth);
    FAIL("expression kind %s is not supported", kind);
}

sql_expr_t *sql_expr_compile(const json_t *rex, const sql_input_t *in, const char *where, char *err, size_t errlen) {
    return compile(rex, in, where, err, errlen, 0);
}

/* ---- rows ------------------------------------------------------------------ */

void sql_val_read(const sql_type_t *t, const sl_row_t *row, int i, sql_val_t *v) {
    v->null = sl_row_is_null(row, i);
    if (v->null) return;
    switch (t->kind) {
    case SK_BOOLEAN: v->i = sl_row_bool(row, i); break;
    case SK_TINYINT: case SK_SMALLINT: case SK_INT: v->i = sl_row_i32(row, i); break;
    case SK_BIGINT: case SK_TIMESTAMP: v->i = sl_row_i64(row, i); break;
    case SK_DOUBLE: v->d = sl_row_f64(row, i); break;
    case SK_DECIMAL: {
        uint32_t n;
        const uint8_t *p = sl_row_bytes(row, i, &n);
        v->dec = 0;
        if (n == 16) memcpy(&v->dec, p, 16);
        break;
    }
    case SK_BINARY: case SK_VARBINARY: v->s = (const char *)sl_row_bytes(row, i, &v->len); break;
    default: v->s = sl_row_str(row, i, &v->len); break;
    }
}

void sql_val_write(const sql_type_t *t, const sql_val_t *v, sl_row_writer_t *w, int i) {
    if (v->null) {
        sl_rw_set_null(w, i);
        return;
    }
    switch (t->kind) {
    case SK_BOOLEAN: sl_rw_set_bool(w, i, v->i != 0); break;
    case SK_TINYINT: case SK_SMALLINT: case SK_INT: sl_rw_set_i32(w, i, (int32_t)v->i); break;
    case SK_BIGINT: case SK_TIMESTAMP: sl_rw_set_i64(w, i, v->i); break;
    case SK_DOUBLE: sl_rw_set_f64(w, i, v->d); break;
    case SK_DECIMAL: sl_rw_set_bytes(w, i, &v->dec, 16); break;
    case SK_BINARY: case SK_VARBINARY: sl_rw_set_bytes(w, i, v->s, v->len); break;
    default: sl_rw_set_str(w, i, v->s ? v->s : "", v->len); break;
    }
}

static void civil_from_days(int64_t z, int64_t *y, unsigned *m, unsigned *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097;
    unsigned doe = (unsigned)(z - era * 146097);
    unsigned yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t yy = (int64_t)yoe + era * 400;
    unsigned doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    unsigned mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = yy + (*m <= 2);
}

/* DATE_FORMAT's patterns (Java's SimpleDateFormat): runs of the letters
 * y (yy: two digits, else at least that many), M, d, H, m, s (zero-padded
 * to the run's length), S (milliseconds, padded), text in '...' ('' is a
 * quote), anything else as is.  NULL if the pattern is supported, else why. */
static const char *date_format_check(const char *f, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        char c = f[i];
        if (c == '\'') {
            uint32_t j = i + 1;
            while (j < n && f[j] != '\'') j++;
            if (j == n) return "an unterminated quote";
            i = j;
        } else if (isalpha((unsigned char)c) && !strchr("yMdHmsS", c)) {
            return "a letter other than y M d H m s S";
        } else if (c == 'M' && i + 2 < n && f[i + 1] == 'M' && f[i + 2] == 'M') {
            return "month names (MMM) are not supported";
        }
    }
    return NULL;
}

static int64_t floor_div(int64_t a, int64_t b) { return a >= 0 ? a / b : -((-a + b - 1) / b); }

/* Writes the formatted text of ms (at most 4 * n + 32 bytes); returns its length. */
static int date_format(int64_t ms, const char *f, uint32_t n, char *out) {
    int64_t days = floor_div(ms, 86400000), rem = ms - days * 86400000, y;
    unsigned mo, d;
    civil_from_days(days, &y, &mo, &d);
    int k = 0;
    for (uint32_t i = 0; i < n;) {
        char c = f[i];
        if (c == '\'') {
            if (i + 1 < n && f[i + 1] == '\'') {
                out[k++] = '\'';
                i += 2;
                continue;
            }
            uint32_t j = i + 1;
            while (j < n && f[j] != '\'') out[k++] = f[j++];
            i = j + 1;
            continue;
        }
        if (!strchr("yMdHmsS", c) || !isalpha((unsigned char)c)) {
            out[k++] = c;
            i++;
            continue;
        }
        uint32_t run = 1;
        while (i + run < n && f[i + run] == c) run++;
        int64_t v = c == 'y' ? y : c == 'M' ? mo : c == 'd' ? d : c == 'H' ? rem / 3600000 : c == 'm' ? rem / 60000 % 60
                  : c == 's' ? rem / 1000 % 60 : rem % 1000;
        if (c == 'y' && run == 2) v = ((v % 100) + 100) % 100;
        k += sprintf(out + k, "%0*lld", (int)(run > 20 ? 20 : run), (long long)v);
        i += run;
    }
    return k;
}

static int format_ts(int64_t ms, int precision, char *buf, size_t cap) {
    int64_t days = ms >= 0 ? ms / 86400000 : -((-ms + 86399999) / 86400000);
    int64_t rem = ms - days * 86400000;
    int64_t y;
    unsigned mo, d;
    civil_from_days(days, &y, &mo, &d);
    int n = snprintf(buf, cap, "%04lld-%02u-%02u %02d:%02d:%02d", (long long)y, mo, d, (int)(rem / 3600000),
                     (int)(rem / 60000 % 60), (int)(rem / 1000 % 60));
    if (precision > 0 && n >= 0 && (size_t)n < cap) {
        char frac[16];
        snprintf(frac, sizeof frac, "%03d000000", (int)(rem % 1000));
        frac[precision] = 0;
        n += snprintf(buf + n, cap - (size_t)n, ".%s", frac);
    }
    return n;
}

int sql_val_format(const sql_type_t *t, const sql_val_t *v, char *buf, size_t cap) {
    if (v->null) return snprintf(buf, cap, "\\N");
    switch (t->kind) {
    case SK_BOOLEAN: return snprintf(buf, cap, "%s", v->i ? "TRUE" : "FALSE");
    case SK_TINYINT: case SK_SMALLINT: case SK_INT: case SK_BIGINT: return snprintf(buf, cap, "%lld", (long long)v->i);
    case SK_DOUBLE: {
        uint64_t bits;
        memcpy(&bits, &v->d, 8);
        return snprintf(buf, cap, "%llx", (unsigned long long)bits);
    }
    case SK_DECIMAL: return sql_dec_format(v->dec, t->scale, buf, cap);
    case SK_TIMESTAMP: return format_ts(v->i, t->precision, buf, cap);
    default: {
        size_t k = 0;
        for (uint32_t i = 0; i < v->len && k + 3 < cap; i++) {
            char c = v->s[i];
            if (c == '\\') { buf[k++] = '\\'; buf[k++] = '\\'; }
            else if (c == '|') { buf[k++] = '\\'; buf[k++] = 'p'; }
            else if (c == '\n') { buf[k++] = '\\'; buf[k++] = 'n'; }
            else buf[k++] = c;
        }
        if (cap) buf[k < cap ? k : cap - 1] = 0;
        return (int)k;
    }
    }
}

/* ---- evaluation -------------------------------------------------------------- */

static int fail(sql_scratch_t *sc, const char *fmt, const char *what) {
    snprintf(sc->err, sizeof sc->err, fmt, what);
    return SL_EINVAL;
}

/* Integral value narrowed to kind k with Java's wrapping. */
static int64_t narrow(int64_t v, sql_kind_t k) {
    switch (k) {
    case SK_TINYINT: return (int8_t)(uint8_t)(uint64_t)v;
    case SK_SMALLINT: return (int16_t)(uint16_t)(uint64_t)v;
    case SK_INT: return (int32_t)(uint32_t)(uint64_t)v;
    default: return v;
    }
}

static double to_double(const sql_type_t *t, const sql_val_t *v) {
    if (t->kind == SK_DOUBLE) return v->d;
    if (t->kind == SK_DECIMAL) {
        char b[64];
        sql_dec_format(v->dec, t->scale, b, sizeof b);
        return strtod(b, NULL); /* correctly rounded, like BigDecimal.doubleValue */
    }
    return (double)v->i;
}

/* Value as a decimal at the given scale; false on overflow. */
static bool to_dec(const sql_type_t *t, const sql_val_t *v, int scale, sql_i128 *out) {
    if (t->kind == SK_DECIMAL) return sql_dec_rescale(v->dec, t->scale, scale, out);
    if (sql_kind_integral(t->kind) || t->kind == SK_BOOLEAN) return sql_dec_rescale((sql_i128)v->i, 0, scale, out);
    return false;
}

static int src_scale(const sql_type_t *t) { return t->kind == SK_DECIMAL ? t->scale : 0; }

/* Java's (long) of a double: NaN -> 0, saturating. */
static int64_t d2l(double d) {
    if (d != d) return 0;
    if (d >= 9223372036854775807.0) return INT64_MAX;
    if (d <= -9223372036854775808.0) return INT64_MIN;
    return (int64_t)d;
}

/* Three-way compare of a (type ta) and b (type tb), both non-NULL. */
static int compare(const sql_type_t *ta, const sql_val_t *a, const sql_type_t *tb, const sql_val_t *b) {
    if (sql_kind_string(ta->kind) || ta->kind == SK_BINARY || ta->kind == SK_VARBINARY) {
        uint32_t n = a->len < b->len ? a->len : b->len;
        int c = n ? memcmp(a->s, b->s, n) : 0;
        if (c) return c < 0 ? -1 : 1;
        return a->len < b->len ? -1 : a->len > b->len;
    }
    if (ta->kind == SK_DOUBLE || tb->kind == SK_DOUBLE) {
        double x = to_double(ta, a), y = to_double(tb, b);
        return x < y ? -1 : x > y; /* NaN: handled by the caller (comparisons) */
    }
    if (ta->kind == SK_DECIMAL || tb->kind == SK_DECIMAL) {
        int s = src_scale(ta) > src_scale(tb) ? src_scale(ta) : src_scale(tb);
        sql_i128 x, y;
        if (to_dec(ta, a, s, &x) && to_dec(tb, b, s, &y)) return x < y ? -1 : x > y;
        long double lx = (long double)(ta->kind == SK_DECIMAL ? a->dec : a->i) / (long double)sql_pow10[src_scale(ta)];
        long double ly = (long double)(tb->kind == SK_DECIMAL ? b->dec : b->i) / (long double)sql_pow10[src_scale(tb)];
        return lx < ly ? -1 : lx > ly;
    }
    return a->i < b->i ? -1 : a->i > b->i;
}

static int eval(const sql_expr_t *e, const sl_row_t *row, sql_scratch_t *sc, sql_val_t *out);

/* CAST semantics (also used to fit CASE / COALESCE branches into the result type). */
static int cast(const sql_type_t *ft, const sql_val_t *v, const sql_type_t *tt, sql_scratch_t *sc, sql_val_t *out) {
    sql_val_t r = {0};
    if (v->null || ft->kind == SK_NULL) {
        r.null = true;
        *out = r;
        return 0;
    }
    sql_kind_t f = ft->kind, t = tt->kind;
    if (sql_kind_integral(t)) {
        if (sql_kind_integral(f) || f == SK_BOOLEAN) r.i = narrow(v->i, t);
        else if (f == SK_DOUBLE) { /* Java: (long)d saturates at long's range, (int)d at int's, (short)(int)d */
            int64_t l = d2l(v->d);
            if (t != SK_BIGINT) l = l > INT32_MAX ? INT32_MAX : l < INT32_MIN ? INT32_MIN : l;
            r.i = narrow(l, t);
        }
        else if (f == SK_DECIMAL) {
            sql_i128 q = v->dec / sql_pow10[ft->scale]; /* truncation toward zero */
            r.i = narrow((int64_t)(uint64_t)(unsigned __int128)q, t);
        } else if (sql_kind_string(f)) {
            char b[64];
            uint32_t n = v->len < 63 ? v->len : 63;
            memcpy(b, v->s, n);
            b[n] = 0;
            char *p = b, *end;
            while (isspace((unsigned char)*p)) p++;
            errno = 0;
            long long x = strtoll(p, &end, 10);
            while (isspace((unsigned char)*end)) end++;
            if (!*p || *end || errno || v->len > 63 || narrow(x, t) != x) return fail(sc, "CAST of '%s' to an integer failed", b);
            r.i = x;
        }
    } else if (t == SK_DOUBLE) {
        if (sql_kind_string(f)) {
            char b[128];
            uint32_t n = v->len < 127 ? v->len : 127;
            memcpy(b, v->s, n);
            b[n] = 0;
            char *end;
            r.d = strtod(b, &end);
            while (isspace((unsigned char)*end)) end++;
            if (!b[0] || *end) return fail(sc, "CAST of '%s' to DOUBLE failed", b);
        } else {
            r.d = to_double(ft, v);
        }
    } else if (t == SK_DECIMAL) {
        if (sql_kind_string(f)) {
            if (!sql_dec_parse(v->s, v->len, tt->scale, &r.dec)) {
                char b[64];
                snprintf(b, sizeof b, "%.*s", (int)(v->len < 60 ? v->len : 60), v->s);
                return fail(sc, "CAST of '%s' to DECIMAL failed", b);
            }
        } else if (f == SK_DOUBLE) {
            /* BigDecimal.valueOf(d): the shortest decimal that reads back as d */
            if (!isfinite(v->d)) return fail(sc, "CAST of %s to DECIMAL failed", v->d != v->d ? "NaN" : "an infinity");
            char b[64];
            for (int p = 1; p <= 17; p++) {
                snprintf(b, sizeof b, "%.*e", p - 1, v->d);
                if (strtod(b, NULL) == v->d) break;
            }
            if (!sql_dec_parse(b, strlen(b), tt->scale, &r.dec)) r.null = true;
        } else if (!to_dec(ft, v, tt->scale, &r.dec)) {
            r.null = true;
        }
        if (!r.null && !sql_dec_fits(r.dec, tt->precision)) r.null = true; /* Flink: NULL on overflow */
    } else if (t == SK_BOOLEAN) {
        if (f == SK_BOOLEAN) r.i = v->i;
        else if (sql_kind_integral(f)) r.i = v->i != 0;
        else {
            char b[16];
            uint32_t n = v->len < 15 ? v->len : 15;
            memcpy(b, v->s, n);
            b[n] = 0;
            if (!strcasecmp(b, "true") || !strcasecmp(b, "t") || !strcasecmp(b, "yes") || !strcasecmp(b, "y") || !strcmp(b, "1")) r.i = 1;
            else if (!strcasecmp(b, "false") || !strcasecmp(b, "f") || !strcasecmp(b, "no") || !strcasecmp(b, "n") || !strcmp(b, "0")) r.i = 0;
            else return fail(sc, "CAST of '%s' to BOOLEAN failed", b);
        }
    } else if (sql_kind_string(t)) {
        if (sql_kind_string(f)) {
            r.s = v->s;
            r.len = v->len;
        } else {
            char b[96];
            int n = sql_val_format(ft, v, b, sizeof b);
            char *p = scratch_alloc(sc, (size_t)n + 1);
            memcpy(p, b, (size_t)n + 1);
            r.s = p;
            r.len = (uint32_t)n;
        }
        /* CHAR(n)/VARCHAR(n) targets: Flink trims to the length (and pads CHAR). */
        if (tt->precision > 0 && r.len > (uint32_t)tt->precision && tt->precision < 2147483647) r.len = (uint32_t)tt->precision;
    } else if (t == SK_TIMESTAMP) {
        if (f == SK_TIMESTAMP) r.i = v->i;
        else if (!parse_timestamp(v->s, v->len, &r.i)) return fail(sc, "CAST of a string to TIMESTAMP failed%s", "");
    } else {
        r = *v;
    }
    *out = r;
    return 0;
}

static int arith(const sql_expr_t *e, const sql_val_t *a, const sql_val_t *b, sql_scratch_t *sc, sql_val_t *out) {
    const sql_type_t *rt = e->type, *ta = e->args[0]->type, *tb = e->args[1]->type;
    sql_val_t r = {0};
    if (rt->kind == SK_TIMESTAMP) {
        int64_t ts = ta->kind == SK_TIMESTAMP ? a->i : b->i, iv = ta->kind == SK_TIMESTAMP ? b->i : a->i;
        r.i = (int64_t)(e->op == OP_PLUS ? (uint64_t)ts + (uint64_t)iv : (uint64_t)ts - (uint64_t)iv);
    } else if (rt->kind == SK_DOUBLE) {
        double x = to_double(ta, a), y = to_double(tb, b);
        switch (e->op) {
        case OP_PLUS: r.d = x + y; break;
        case OP_MINUS: r.d = x - y; break;
        case OP_TIMES: r.d = x * y; break;
        default: r.d = x / y; break;
        }
    } else if (rt->kind == SK_DECIMAL) {
        int sa = src_scale(ta), sb = src_scale(tb), rs = rt->scale;
        sql_i128 x, y, z;
        if (!to_dec(ta, a, sa, &x) || !to_dec(tb, b, sb, &y)) return fail(sc, "decimal overflow in %s", "arithmetic");
        bool ok = true;
        switch (e->op) {
        case OP_PLUS: case OP_MINUS: {
            int s = sa > sb ? sa : sb;
            ok = sql_dec_rescale(x, sa, s, &x) && sql_dec_rescale(y, sb, s, &y) &&
                 !(e->op == OP_PLUS ? __builtin_add_overflow(x, y, &z) : __builtin_sub_overflow(x, y, &z)) &&
                 sql_dec_rescale(z, s, rs, &z);
            break;
        }
        case OP_TIMES:
            ok = !__builtin_mul_overflow(x, y, &z) && sql_dec_rescale(z, sa + sb, rs, &z);
            break;
        default: {
            if (y == 0) return fail(sc, "%s", "division by zero");
            /* x / y at scale rs, HALF_UP: (x * 10^(rs - sa + sb)) / y */
            int k = rs - sa + sb;
            sql_i128 num = x, den = y;
            if (k >= 0) ok = sql_dec_rescale(num, 0, k, &num);
            else ok = sql_dec_rescale(den, 0, -k, &den);
            if (ok) {
                sql_i128 q = num / den, rem = num % den;
                sql_i128 ar = rem < 0 ? -rem : rem, ad = den < 0 ? -den : den;
                if (ar >= ad - ar) q += ((num < 0) != (den < 0)) ? -1 : 1;
                z = q;
            }
            break;
        }
        }
        if (!ok) return fail(sc, "decimal intermediate result too large in %s", "arithmetic");
        if (!sql_dec_fits(z, rt->precision)) r.null = true;
        else r.dec = z;
    } else {
        int64_t x, y;
        if (ta->kind == SK_DECIMAL || tb->kind == SK_DECIMAL || ta->kind == SK_DOUBLE || tb->kind == SK_DOUBLE)
            return fail(sc, "integer arithmetic over %s", "non-integers");
        x = a->i;
        y = b->i;
        uint64_t ux = (uint64_t)x, uy = (uint64_t)y;
        switch (e->op) {
        case OP_PLUS: r.i = (int64_t)(ux + uy); break;
        case OP_MINUS: r.i = (int64_t)(ux - uy); break;
        case OP_TIMES: r.i = (int64_t)(ux * uy); break;
        case OP_DIVIDE:
            if (y == 0) return fail(sc, "%s", "division by zero");
            r.i = (x == INT64_MIN && y == -1) ? INT64_MIN : x / y;
            break;
        default:
            if (y == 0) return fail(sc, "%s", "MOD by zero");
            r.i = y == -1 ? 0 : x % y;
            break;
        }
        r.i = narrow(r.i, rt->kind);
    }
    *out = r;
    return 0;
}

static int regexp_extract(const sql_expr_t *e, const sql_val_t *s, int64_t idx, sql_scratch_t *sc, sql_val_t *out) {
    memset(out, 0, sizeof *out);
    out->null = true;
    if (!e->re_ok || idx < 0 || (size_t)idx > e->re.re_nsub) return 0;
    regmatch_t m[16];
    size_t nm = e->re.re_nsub + 1 < 16 ? e->re.re_nsub + 1 : 16;
    if ((size_t)idx >= nm) return 0;
    /* a NUL-terminated copy: row strings are not terminated (and sanitizers'
     * regexec reads up to the NUL even with REG_STARTEND) */
    char *str = scratch_alloc(sc, (size_t)s->len + 1);
    if (s->len) memcpy(str, s->s, s->len);
    str[s->len] = 0;
    if (memchr(str, 0, s->len)) return 0; /* NUL inside: ERE cannot see past it */
    if (regexec(&e->re, str, nm, m, 0) != 0) return 0;
    if (m[idx].rm_so < 0) return 0;
    out->null = false;
    out->s = str + m[idx].rm_so;
    out->len = (uint32_t)(m[idx].rm_eo - m[idx].rm_so);
    return 0;
}

static bool in_range(const sql_expr_t *e, const sql_val_t *x) {
    const sql_type_t *tx = e->args[0]->type, *ts = e->sarg_type;
    for (int i = 0; i < e->nranges; i++) {
        const sarg_range_t *r = &e->ranges[i];
        if (r->has_lo) {
            int c = compare(tx, x, ts, &r->lo);
            if (c < 0 || (c == 0 && !r->lo_closed)) continue;
        }
        if (r->has_hi) {
            int c = compare(tx, x, ts, &r->hi);
            if (c > 0 || (c == 0 && !r->hi_closed)) continue;
        }
        return true;
    }
    return false;
}

static int eval(const sql_expr_t *e, const sl_row_t *row, sql_scratch_t *sc, sql_val_t *out) {
    if (e->kind == X_REF) {
        memset(out, 0, sizeof *out);
        sql_val_read(e->type, row, e->ref, out);
        return 0;
    }
    if (e->kind == X_LIT) {
        *out = e->lit;
        return 0;
    }
    sql_val_t a, b;
    int rc;
    memset(out, 0, sizeof *out);
    switch (e->op) {
    case OP_AND: case OP_OR: {
        /* FALSE (AND) / TRUE (OR) wins over NULL; NULL over the other */
        bool any_null = false, dom = e->op == OP_OR;
        for (int i = 0; i < e->n; i++) {
            if ((rc = eval(e->args[i], row, sc, &a)) < 0) return rc;
            if (a.null) any_null = true;
            else if ((a.i != 0) == dom) {
                out->i = dom;
                return 0;
            }
        }
        out->null = any_null;
        out->i = !dom;
        return 0;
    }
    case OP_CASE:
        for (int i = 0; i + 1 < e->n; i += 2) {
            if ((rc = eval(e->args[i], row, sc, &a)) < 0) return rc;
            if (!a.null && a.i) {
                if ((rc = eval(e->args[i + 1], row, sc, &b)) < 0) return rc;
                return cast(e->args[i + 1]->type, &b, e->type, sc, out);
            }
        }
        if ((rc = eval(e->args[e->n - 1], row, sc, &b)) < 0) return rc;
        return cast(e->args[e->n - 1]->type, &b, e->type, sc, out);
    case OP_COALESCE:
        for (int i = 0; i < e->n; i++) {
            if ((rc = eval(e->args[i], row, sc, &a)) < 0) return rc;
            if (!a.null || i == e->n - 1) return cast(e->args[i]->type, &a, e->type, sc, out);
        }
        return 0;
    default:
        break;
    }
    if ((rc = eval(e->args[0], row, sc, &a)) < 0) return rc;
    switch (e->op) {
    case OP_IS_NULL: out->i = a.null; return 0;
    case OP_IS_NOT_NULL: out->i = !a.null; return 0;
    case OP_IS_TRUE: out->i = !a.null && a.i; return 0;
    case OP_IS_NOT_TRUE: out->i = a.null || !a.i; return 0;
    case OP_IS_FALSE: out->i = !a.null && !a.i; return 0;
    case OP_IS_NOT_FALSE: out->i = a.null || a.i; return 0;
    case OP_CAST: return cast(e->args[0]->type, &a, e->type, sc, out);
    case OP_SEARCH:
        if (a.null) {
            out->null = e->null_as == 0;
            out->i = e->null_as == 1;
            return 0;
        }
        out->i = in_range(e, &a);
        return 0;
    default:
        break;
    }
    if (e->n > 1) {
        if ((rc = eval(e->args[1], row, sc, &b)) < 0) return rc;
    } else {
        memset(&b, 0, sizeof b);
    }
    if (a.null || (e->n > 1 && b.null)) {
        if (e->op != OP_REGEXP_EXTRACT && e->op != OP_SPLIT_INDEX) {
            out->null = true;
            return 0;
        }
        out->null = true;
        return 0;
    }
    const sql_type_t *ta = e->args[0]->type;
    if (e->op >= OP_EQ && e->op <= OP_GE && (ta->kind == SK_DOUBLE || e->args[1]->type->kind == SK_DOUBLE) &&
        (isnan(to_double(ta, &a)) || isnan(to_double(e->args[1]->type, &b)))) {
        out->i = e->op == OP_NE; /* Java's primitive comparisons: NaN is unordered */
        return 0;
    }
    switch (e->op) {
    case OP_NOT: out->i = !a.i; return 0;
    case OP_EQ: out->i = compare(ta, &a, e->args[1]->type, &b) == 0; return 0;
    case OP_NE: out->i = compare(ta, &a, e->args[1]->type, &b) != 0; return 0;
    case OP_LT: out->i = compare(ta, &a, e->args[1]->type, &b) < 0; return 0;
    case OP_LE: out->i = compare(ta, &a, e->args[1]->type, &b) <= 0; return 0;
    case OP_GT: out->i = compare(ta, &a, e->args[1]->type, &b) > 0; return 0;
    case OP_GE: out->i = compare(ta, &a, e->args[1]->type, &b) >= 0; return 0;
    case OP_PLUS: case OP_MINUS: case OP_TIMES: case OP_DIVIDE: case OP_MOD: return arith(e, &a, &b, sc, out);
    case OP_NEG: case OP_ABS: {
        const sql_type_t *rt = e->type;
        sql_val_t v;
        if ((rc = cast(ta, &a, rt, sc, &v)) < 0) return rc;
        *out = v;
        if (v.null) return 0;
        bool neg = e->op == OP_NEG;
        if (rt->kind == SK_DOUBLE) out->d = neg || v.d < 0 ? -v.d : v.d;
        else if (rt->kind == SK_DECIMAL) out->dec = neg || v.dec < 0 ? -v.dec : v.dec;
        else out->i = narrow(neg || v.i < 0 ? (int64_t)(0 - (uint64_t)v.i) : v.i, rt->kind);
        if (e->op == OP_ABS && rt->kind == SK_DOUBLE) out->d = fabs(v.d);
        return 0;
    }
    case OP_LOWER: case OP_UPPER: {
        char *p = scratch_alloc(sc, a.len ? a.len : 1);
        for (uint32_t i = 0; i < a.len; i++) {
            unsigned char c = (unsigned char)a.s[i];
            p[i] = (char)(c < 128 ? (e->op == OP_LOWER ? tolower(c) : toupper(c)) : c);
        }
        out->s = p;
        out->len = a.len;
        return 0;
    }
    case OP_CHAR_LENGTH: {
        int64_t n = 0;
        for (uint32_t i = 0; i < a.len; i++) {
            unsigned char c = (unsigned char)a.s[i];
            if ((c & 0xc0) != 0x80) n += c >= 0xf0 ? 2 : 1; /* UTF-16 units, like Java's length() */
        }
        out->i = narrow(n, e->type->kind);
        return 0;
    }
    case OP_CONCAT: {
        char *p = scratch_alloc(sc, (size_t)a.len + b.len + 1);
        if (a.len) memcpy(p, a.s, a.len);
        if (b.len) memcpy(p + a.len, b.s, b.len);
        out->s = p;
        out->len = a.len + b.len;
        return 0;
    }
    case OP_REGEXP_EXTRACT: {
        int64_t idx = 0;
        if (e->n == 3) {
            sql_val_t c;
            if ((rc = eval(e->args[2], row, sc, &c)) < 0) return rc;
            if (c.null) {
                out->null = true;
                return 0;
            }
            idx = c.i;
        }
        return regexp_extract(e, &a, idx, sc, out);
    }
    case OP_DATE_FORMAT: {
        char *p = scratch_alloc(sc, (size_t)b.len * 4 + 32);
        out->s = p;
        out->len = (uint32_t)date_format(a.i, b.s, b.len, p);
        return 0;
    }
    case OP_SPLIT_INDEX: {
        sql_val_t c;
        if ((rc = eval(e->args[2], row, sc, &c)) < 0) return rc;
        out->null = true;
        if (c.null || c.i < 0 || a.len == 0) return 0;
        /* commons-lang splitByWholeSeparatorPreserveAllTokens: every token, empty ones too */
        int64_t k = 0;
        uint32_t beg = 0;
        for (;;) {
            uint32_t end = a.len;
            if (b.len) {
                for (uint32_t i = beg; i + b.len <= a.len; i++)
                    if (!memcmp(a.s + i, b.s, b.len)) {
                        end = i;
                        break;
                    }
            } else {
                for (uint32_t i = beg; i < a.len; i++)
                    if (isspace((unsigned char)a.s[i])) {
                        end = i;
                        break;
                    }
            }
            if (k == c.i) {
                out->null = false;
                out->s = a.s + beg;
                out->len = end - beg;
                return 0;
            }
            if (end == a.len) return 0;
            beg = end + (b.len ? b.len : 1);
            k++;
        }
    }
    default:
        return fail(sc, "internal: unhandled operator%s", "");
    }
}

int sql_eval(const sql_expr_t *e, const sl_row_t *row, sql_scratch_t *sc, sql_val_t *out) {
    return eval(e, row, sc, out);
}
