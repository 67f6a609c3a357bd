/*
 * test_sql_expr.c — the SQL expression evaluator (src/sql/sql_expr.c)
 * against an independent interpreter written here: random expression trees
 * over random rows with NULLs — AND / OR / NOT with three-valued logic, IS
 * [NOT] NULL / TRUE / FALSE, comparisons of integers, decimals and strings,
 * wrapping BIGINT / INT arithmetic, / and MOD, CASE, CAST (BIGINT -> INT,
 * DECIMAL -> BIGINT, DECIMAL -> DECIMAL with HALF_UP rounding and NULL on
 * overflow, INT -> DECIMAL, BIGINT -> VARCHAR), DECIMAL + and *, SEARCH
 * (IN lists), LOWER / UPPER / CHAR_LENGTH / || / SPLIT_INDEX — serialized as
 * Flink's RexNode JSON, compiled and evaluated, each result compared with
 * the reference's.  Precisions stay within 18 digits so the reference can
 * compute decimals in int64.
 */
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <time.h>

#include "sql/sql_int.h"
#include "test.h"

enum { T_BOOL, T_INT, T_BIGINT, T_DEC, T_STR };

typedef struct rv {
    bool null;
    int64_t i;   /* BOOLEAN, INT, BIGINT; DECIMAL unscaled */
    char s[256]; /* VARCHAR */
} rv_t;

/* The input row: c0 c1 BIGINT, c2 INT, c3 c4 BOOLEAN, c5 c6 VARCHAR, c7 DECIMAL(10, 2), c8 DECIMAL(6, 3). */
#define NCOLS 9
static const int COL_T[NCOLS] = {T_BIGINT, T_BIGINT, T_INT, T_BOOL, T_BOOL, T_STR, T_STR, T_DEC, T_DEC};
static const int COL_P[NCOLS] = {0, 0, 0, 0, 0, 0, 0, 10, 6};
static const int COL_S[NCOLS] = {0, 0, 0, 0, 0, 0, 0, 2, 3};
static rv_t g_row[NCOLS];
static unsigned g_seed;

static int rnd(int n) { return (int)(rand_r(&g_seed) % (unsigned)n); }

static int64_t p10(int n) {
    int64_t v = 1;
    while (n-- > 0) v *= 10;
    return v;
}

static const char *type_text(int t, int p, int s, bool notnull, char *buf) {
    const char *nn = notnull ? " NOT NULL" : "";
    switch (t) {
    case T_BOOL: sprintf(buf, "BOOLEAN%s", nn); break;
    case T_INT: sprintf(buf, "INT%s", nn); break;
    case T_BIGINT: sprintf(buf, "BIGINT%s", nn); break;
    case T_DEC: sprintf(buf, "DECIMAL(%d, %d)%s", p, s, nn); break;
    default: sprintf(buf, "VARCHAR(2147483647)%s", nn); break;
    }
    return buf;
}

/* An expression: its JSON, type and reference value for the current row
 * (the tree is regenerated per row batch; values computed by eval_ref). */
typedef struct tx {
    int op;
    int t, p, s;
    int col;
    rv_t lit;
    int n;
    struct tx *a[8];
    int64_t pts[4]; /* SEARCH points */
    int npts;
} tx_t;

enum {
    X_COL, X_LIT, X_AND, X_OR, X_NOT, X_ISNULL, X_ISNOTNULL, X_ISTRUE, X_ISFALSE, X_CMP_EQ, X_CMP_NE, X_CMP_LT,
    X_CMP_LE, X_CMP_GT, X_CMP_GE, X_PLUS, X_MINUS, X_TIMES, X_DIV, X_MOD, X_CASE, X_CAST, X_LOWER, X_UPPER,
    X_CHARLEN, X_CONCAT, X_SPLIT, X_SEARCH
};

static const char *OPNAME[] = {
    [X_AND] = "$AND$1", [X_OR] = "$OR$1", [X_NOT] = "$NOT$1", [X_ISNULL] = "$IS NULL$1",
    [X_ISNOTNULL] = "$IS NOT NULL$1", [X_ISTRUE] = "$IS TRUE$1", [X_ISFALSE] = "$IS FALSE$1",
    [X_CMP_EQ] = "$=$1", [X_CMP_NE] = "$<>$1", [X_CMP_LT] = "$<$1", [X_CMP_LE] = "$<=$1", [X_CMP_GT] = "$>$1",
    [X_CMP_GE] = "$>=$1", [X_PLUS] = "$+$1", [X_MINUS] = "$-$1", [X_TIMES] = "$*$1", [X_DIV] = "$/$1",
    [X_MOD] = "$MOD$1", [X_CASE] = "$CASE$1", [X_CAST] = "$CAST$1", [X_LOWER] = "$LOWER$1",
    [X_UPPER] = "$UPPER$1", [X_CHARLEN] = "$CHAR_LENGTH$1", [X_CONCAT] = "$||$1", [X_SPLIT] = "$SPLIT_INDEX$1",
    [X_SEARCH] = "$SEARCH$1",
};

static tx_t *node(int op, int t) {
    tx_t *x = calloc(1, sizeof *x);
    x->op = op;
    x->t = t;
    return x;
}

static void tx_free(tx_t *x) {
    if (!x) return;
    for (int i = 0; i < x->n; i++) tx_free(x->a[i]);
    free(x);
}

static void rand_str(char *s) {
    static const char A[] = "ab/A_";
    int n = rnd(9);
    for (int i = 0; i < n; i++) s[i] = A[rnd(5)];
    s[n] = 0;
}

static tx_t *gen(int t, int depth);

static tx_t *gen_dec(int depth, int maxp) {
    int c = depth <= 0 ? rnd(2) : rnd(6);
    tx_t *x;
    if (c == 0) { /* a column */
        x = node(X_COL, T_DEC);
        x->col = rnd(2) ? 7 : 8;
        x->p = COL_P[x->col];
        x->s = COL_S[x->col];
        if (x->p <= maxp) return x;
        free(x);
        c = 1;
    }
    if (c == 1) {
        x = node(X_LIT, T_DEC);
        x->p = 4;
        x->s = 3;
        x->lit.i = rnd(19999) - 9999;
        x->lit.null = rnd(10) == 0;
        return x;
    }
    if (c == 2 && maxp >= 10) { /* d * d -> (p1 + p2, s1 + s2) */
        x = node(X_TIMES, T_DEC);
        x->a[0] = gen_dec(depth - 1, maxp / 2);
        x->a[1] = gen_dec(depth - 1, maxp - x->a[0]->p);
        x->n = 2;
        x->p = x->a[0]->p + x->a[1]->p;
        x->s = x->a[0]->s + x->a[1]->s;
        return x;
    }
    if (c == 3 && maxp >= 8) { /* d + d -> s = max, p = max(int digits) + s + 1 */
        x = node(rnd(2) ? X_PLUS : X_MINUS, T_DEC);
        x->a[0] = gen_dec(depth - 1, maxp - 2);
        x->a[1] = gen_dec(depth - 1, maxp - 2);
        x->n = 2;
        int s = x->a[0]->s > x->a[1]->s ? x->a[0]->s : x->a[1]->s;
        int i0 = x->a[0]->p - x->a[0]->s, i1 = x->a[1]->p - x->a[1]->s;
        x->s = s;
        x->p = (i0 > i1 ? i0 : i1) + s + 1;
        if (x->p <= maxp) return x;
        tx_free(x);
        return gen_dec(0, maxp);
    }
    if (c == 4) { /* CAST to a narrower decimal: rounding, NULL on overflow */
        x = node(X_CAST, T_DEC);
        x->a[0] = gen_dec(depth - 1, maxp);
        x->n = 1;
        x->s = rnd(x->a[0]->s + 1);
        x->p = x->s + 1 + rnd(4);
        if (x->p > maxp) x->p = maxp;
        if (x->p < x->s || x->p < 1) x->p = x->s > 0 ? x->s : 1;
        return x;
    }
    /* CAST(INT AS DECIMAL(10, 0)) */
    if (maxp >= 10) {
        x = node(X_CAST, T_DEC);
        x->a[0] = gen(T_INT, depth - 1);
        x->n = 1;
        x->p = 10;
        x->s = 0;
        return x;
    }
    return gen_dec(0, maxp);
}

static tx_t *gen(int t, int depth) {
    if (t == T_DEC) return gen_dec(depth, 18);
    int c = depth <= 0 ? rnd(2) : rnd(12);
    tx_t *x;
    if (c == 0) {
        int cols[NCOLS], n = 0;
        for (int i = 0; i < NCOLS; i++)
            if (COL_T[i] == t) cols[n++] = i;
        x = node(X_COL, t);
        x->col = cols[rnd(n)];
        return x;
    }
    if (c == 1) {
        x = node(X_LIT, t);
        x->lit.null = rnd(8) == 0;
        if (t == T_BOOL) x->lit.i = rnd(2);
        else if (t == T_STR) rand_str(x->lit.s);
        else x->lit.i = rnd(4) == 0 ? (int64_t)rnd(2000000000) * 4 : rnd(200) - 100;
        if (t == T_INT) x->lit.i = (int32_t)x->lit.i;
        return x;
    }
    if (c == 2) { /* CASE WHEN b THEN x [WHEN b THEN x] ELSE x */
        x = node(X_CASE, t);
        x->n = rnd(2) ? 3 : 5;
        for (int i = 0; i < x->n; i++) x->a[i] = gen(i % 2 == 0 && i + 1 < x->n ? T_BOOL : t, depth - 1);
        return x;
    }
    if (t == T_BOOL) {
        int k = rnd(9);
        if (k == 0 || k == 1) {
            x = node(k == 0 ? X_AND : X_OR, T_BOOL);
            x->n = 2 + rnd(2);
            for (int i = 0; i < x->n; i++) x->a[i] = gen(T_BOOL, depth - 1);
        } else if (k == 2) {
            x = node(X_NOT, T_BOOL);
            x->n = 1;
            x->a[0] = gen(T_BOOL, depth - 1);
        } else if (k == 3) {
            static const int U[] = {X_ISNULL, X_ISNOTNULL, X_ISTRUE, X_ISFALSE};
            int u = U[rnd(4)];
            x = node(u, T_BOOL);
            x->n = 1;
            x->a[0] = gen(u == X_ISTRUE || u == X_ISFALSE ? T_BOOL : rnd(5), depth - 1);
        } else if (k == 4) { /* SEARCH(x, Sarg[points]) */
            x = node(X_SEARCH, T_BOOL);
            x->n = 1;
            x->a[0] = gen(T_BIGINT, depth - 1);
            x->npts = 1 + rnd(4);
            for (int i = 0; i < x->npts; i++) x->pts[i] = rnd(200) - 100;
        } else {
            x = node(X_CMP_EQ + rnd(6), T_BOOL);
            x->n = 2;
            int ot = rnd(4);
            if (ot == 0) { /* integers, maybe mixed INT / BIGINT */
                x->a[0] = gen(rnd(2) ? T_INT : T_BIGINT, depth - 1);
                x->a[1] = gen(rnd(2) ? T_INT : T_BIGINT, depth - 1);
            } else if (ot == 1) { /* decimals, maybe against an integer */
                x->a[0] = gen_dec(depth - 1, 18);
                x->a[1] = rnd(3) ? gen_dec(depth - 1, 18) : gen(T_INT, depth - 1);
            } else if (ot == 2) {
                x->a[0] = gen(T_STR, depth - 1);
                x->a[1] = gen(T_STR, depth - 1);
            } else {
                x->a[0] = gen(T_BOOL, depth - 1);
                x->a[1] = gen(T_BOOL, depth - 1);
            }
        }
        return x;
    }
    if (t == T_STR) {
        int k = rnd(5);
        if (k <= 1) {
            x = node(k ? X_LOWER : X_UPPER, T_STR);
            x->n = 1;
            x->a[0] = gen(T_STR, depth - 1);
        } else if (k == 2) {
            x = node(X_CONCAT, T_STR);
            x->n = 2;
            x->a[0] = gen(T_STR, depth - 1);
            x->a[1] = gen(T_STR, depth - 1);
        } else if (k == 3) {
            x = node(X_SPLIT, T_STR);
            x->n = 3;
            x->a[0] = gen(T_STR, depth - 1);
            x->a[1] = node(X_LIT, T_STR);
            strcpy(x->a[1]->lit.s, rnd(2) ? "/" : "a/");
            x->a[2] = node(X_LIT, T_INT);
            x->a[2]->lit.i = rnd(5) - 1;
        } else {
            x = node(X_CAST, T_STR);
            x->n = 1;
            x->a[0] = gen(T_BIGINT, depth - 1);
        }
        return x;
    }
    /* integers */
    int k = rnd(6);
    if (k == 0 && t == T_INT) {
        x = node(X_CHARLEN, T_INT);
        x->n = 1;
        x->a[0] = gen(T_STR, depth - 1);
    } else if (k == 1) { /* CAST(BIGINT AS INT) / CAST(INT AS BIGINT) / CAST(DECIMAL AS BIGINT) */
        x = node(X_CAST, t);
        x->n = 1;
        x->a[0] = t == T_INT ? gen(T_BIGINT, depth - 1) : rnd(2) ? gen(T_INT, depth - 1) : gen_dec(depth - 1, 18);
    } else if (k == 2) { /* / or MOD by a non-zero literal; MOD(BIGINT, INT) is INT as in q2 */
        x = node(rnd(2) ? X_DIV : X_MOD, t);
        x->n = 2;
        x->a[0] = gen(x->op == X_MOD && t == T_INT ? T_BIGINT : t, depth - 1);
        x->a[1] = node(X_LIT, t);
        x->a[1]->lit.i = (rnd(2) ? 1 : -1) * (1 + rnd(150));
    } else {
        x = node(X_PLUS + rnd(3), t);
        x->n = 2;
        x->a[0] = gen(t, depth - 1);
        x->a[1] = gen(t, depth - 1);
    }
    return x;
}

static json_t *to_json(const tx_t *x) {
    char tb[64];
    if (x->op == X_COL)
        return json_pack("{s:s, s:i, s:s}", "kind", "INPUT_REF", "inputIndex", x->col, "type",
                         type_text(x->t, x->p, x->s, false, tb));
    if (x->op == X_LIT) {
        json_t *v;
        if (x->lit.null) v = json_null();
        else if (x->t == T_BOOL) v = json_boolean(x->lit.i);
        else if (x->t == T_STR) v = json_string(x->lit.s);
        else if (x->t == T_DEC) {
            char b[64];
            int64_t a = x->lit.i < 0 ? -x->lit.i : x->lit.i;
            snprintf(b, sizeof b, "%s%lld.%0*lld", x->lit.i < 0 ? "-" : "", (long long)(a / p10(x->s)), x->s,
                     (long long)(a % p10(x->s)));
            v = json_string(b);
        } else v = json_integer(x->lit.i);
        return json_pack("{s:s, s:o, s:s}", "kind", "LITERAL", "value", v, "type",
                         type_text(x->t, x->p, x->s, !x->lit.null, tb));
    }
    json_t *ops = json_array();
    for (int i = 0; i < x->n; i++) json_array_append_new(ops, to_json(x->a[i]));
    if (x->op == X_SEARCH) {
        json_t *ranges = json_array();
        for (int i = 0; i < x->npts; i++)
            json_array_append_new(ranges, json_pack("{s:{s:I, s:s}, s:{s:I, s:s}}", "lower", "value", (json_int_t)x->pts[i],
                                                    "boundType", "CLOSED", "upper", "value", (json_int_t)x->pts[i],
                                                    "boundType", "CLOSED"));
        json_array_append_new(ops, json_pack("{s:s, s:{s:o, s:s}, s:s}", "kind", "LITERAL", "sarg", "ranges", ranges,
                                             "nullAs", "UNKNOWN", "type", "BIGINT NOT NULL"));
    }
    return json_pack("{s:s, s:s, s:o, s:s}", "kind", "CALL", "internalName", OPNAME[x->op], "operands", ops, "type",
                     type_text(x->t, x->p, x->s, false, tb));
}

/* ---- the reference ------------------------------------------------------------ */

static int64_t wrap32(int64_t v) { return (int32_t)(uint32_t)(uint64_t)v; }

/* v at scale `from` as scale `to`, half away from zero. */
static int64_t rescale(int64_t v, int from, int to) {
    if (to >= from) return v * p10(to - from);
    int64_t d = p10(from - to), half = d / 2;
    return v >= 0 ? (v + half) / d : -((-v + half) / d);
}

static int cmp_ref(const tx_t *a, const rv_t *x, const tx_t *b, const rv_t *y) {
    if (a->t == T_STR) {
        int c = strcmp(x->s, y->s);
        return (c > 0) - (c < 0);
    }
    int sa = a->t == T_DEC ? a->s : 0, sb = b->t == T_DEC ? b->s : 0, s = sa > sb ? sa : sb;
    /* BIGINT against DECIMAL(p, 12) needs more than 64 bits at the common scale. */
    __int128 u = (__int128)x->i * p10(s - sa), v = (__int128)y->i * p10(s - sb);
    return (u > v) - (u < v);
}

static rv_t ref(const tx_t *x) {
    rv_t r = {0}, a, b;
    switch (x->op) {
    case X_COL: return g_row[x->col];
    case X_LIT: return x->lit;
    case X_AND: case X_OR: {
        bool unknown = false, want = x->op == X_OR;
        for (int i = 0; i < x->n; i++) {
            a = ref(x->a[i]);
            if (a.null) unknown = true;
            else if ((bool)a.i == want) {
                r.i = want;
                return r;
            }
        }
        r.null = unknown;
        r.i = !want;
        return r;
    }
    case X_CASE:
        for (int i = 0; i + 1 < x->n; i += 2) {
            a = ref(x->a[i]);
            if (!a.null && a.i) return ref(x->a[i + 1]);
        }
        return ref(x->a[x->n - 1]);
    case X_ISNULL: r.i = ref(x->a[0]).null; return r;
    case X_ISNOTNULL: r.i = !ref(x->a[0]).null; return r;
    case X_ISTRUE: a = ref(x->a[0]); r.i = !a.null && a.i; return r;
    case X_ISFALSE: a = ref(x->a[0]); r.i = !a.null && !a.i; return r;
    default: break;
    }
    a = ref(x->a[0]);
    if (x->op == X_SEARCH) {
        if (a.null) {
            r.null = true;
            return r;
        }
        for (int i = 0; i < x->npts; i++) r.i |= a.i == x->pts[i];
        return r;
    }
    b = x->n > 1 ? ref(x->a[1]) : (rv_t){0};
    if (a.null || b.null) {
        r.null = true;
        return r;
    }
    switch (x->op) {
    case X_NOT: r.i = !a.i; break;
    case X_CMP_EQ: r.i = cmp_ref(x->a[0], &a, x->a[1], &b) == 0; break;
    case X_CMP_NE: r.i = cmp_ref(x->a[0], &a, x->a[1], &b) != 0; break;
    case X_CMP_LT: r.i = cmp_ref(x->a[0], &a, x->a[1], &b) < 0; break;
    case X_CMP_LE: r.i = cmp_ref(x->a[0], &a, x->a[1], &b) <= 0; break;
    case X_CMP_GT: r.i = cmp_ref(x->a[0], &a, x->a[1], &b) > 0; break;
    case X_CMP_GE: r.i = cmp_ref(x->a[0], &a, x->a[1], &b) >= 0; break;
    case X_PLUS: case X_MINUS: case X_TIMES:
        if (x->t == T_DEC) {
            if (x->op == X_TIMES) r.i = a.i * b.i; /* scale s1 + s2 = the result's */
            else {
                int64_t u = a.i * p10(x->s - x->a[0]->s), v = b.i * p10(x->s - x->a[1]->s);
                r.i = x->op == X_PLUS ? u + v : u - v;
            }
        } else {
            uint64_t u = (uint64_t)a.i, v = (uint64_t)b.i;
            r.i = (int64_t)(x->op == X_PLUS ? u + v : x->op == X_MINUS ? u - v : u * v);
            if (x->t == T_INT) r.i = wrap32(r.i);
        }
        break;
    case X_DIV: r.i = a.i / b.i; if (x->t == T_INT) r.i = wrap32(r.i); break;
    case X_MOD: r.i = a.i % b.i; if (x->t == T_INT) r.i = wrap32(r.i); break;
    case X_CAST:
        if (x->t == T_INT) r.i = wrap32(a.i);
        else if (x->t == T_BIGINT) r.i = x->a[0]->t == T_DEC ? a.i / p10(x->a[0]->s) : a.i;
        else if (x->t == T_STR) snprintf(r.s, sizeof r.s, "%lld", (long long)a.i);
        else { /* to DECIMAL(p, s) */
            r.i = rescale(a.i, x->a[0]->t == T_DEC ? x->a[0]->s : 0, x->s);
            if (r.i >= p10(x->p) || r.i <= -p10(x->p)) r.null = true;
        }
        break;
    case X_LOWER: case X_UPPER:
        for (int i = 0; a.s[i]; i++)
            r.s[i] = (char)(x->op == X_LOWER ? (a.s[i] >= 'A' && a.s[i] <= 'Z' ? a.s[i] + 32 : a.s[i])
                                             : (a.s[i] >= 'a' && a.s[i] <= 'z' ? a.s[i] - 32 : a.s[i]));
        break;
    case X_CHARLEN: r.i = (int64_t)strlen(a.s); break;
    case X_CONCAT: snprintf(r.s, sizeof r.s, "%s%s", a.s, b.s); break;
    case X_SPLIT: {
        int64_t k = ref(x->a[2]).i;
        r.null = true;
        if (!a.s[0] || k < 0) break;
        const char *p = a.s, *sep = b.s;
        size_t sl = strlen(sep);
        for (int64_t i = 0;; i++) {
            const char *q = strstr(p, sep);
            size_t len = q ? (size_t)(q - p) : strlen(p);
            if (i == k) {
                r.null = false;
                memcpy(r.s, p, len);
                r.s[len] = 0;
                break;
            }
            if (!q) break;
            p = q + sl;
        }
        break;
    }
    default: break;
    }
    return r;
}

/* ---- rows ---------------------------------------------------------------------- */

static void random_row(void) {
    for (int i = 0; i < NCOLS; i++) {
        rv_t *v = &g_row[i];
        memset(v, 0, sizeof *v);
        v->null = rnd(5) == 0;
        switch (COL_T[i]) {
        case T_BOOL: v->i = rnd(2); break;
        case T_INT: v->i = rnd(8) == 0 ? (int32_t)rand_r(&g_seed) : rnd(200) - 100; break;
        case T_BIGINT: v->i = rnd(8) == 0 ? (int64_t)rand_r(&g_seed) * rand_r(&g_seed) : rnd(200) - 100; break;
        case T_STR: rand_str(v->s); break;
        default: v->i = (rnd(2) ? 1 : -1) * (int64_t)(rand_r(&g_seed) % (unsigned)p10(COL_P[i] > 9 ? 9 : COL_P[i])); break;
        }
    }
}

static void write_row(sl_row_writer_t *w, const sl_schema_t *s) {
    sl_rw_begin(w, s);
    for (int i = 0; i < NCOLS; i++) {
        const rv_t *v = &g_row[i];
        if (v->null) {
            sl_rw_set_null(w, i);
            continue;
        }
        switch (COL_T[i]) {
        case T_BOOL: sl_rw_set_bool(w, i, v->i); break;
        case T_INT: sl_rw_set_i32(w, i, (int32_t)v->i); break;
        case T_BIGINT: sl_rw_set_i64(w, i, v->i); break;
        case T_STR: sl_rw_set_str(w, i, v->s, (uint32_t)strlen(v->s)); break;
        default: {
            sql_i128 d = v->i; /* 16 bytes, little-endian two's complement */
            sl_rw_set_bytes(w, i, &d, 16);
        }
        }
    }
}

static bool same(const tx_t *x, const rv_t *r, const sql_val_t *v) {
    if (r->null != v->null) return false;
    if (r->null) return true;
    if (x->t == T_STR) return v->len == strlen(r->s) && !memcmp(v->s, r->s, v->len);
    if (x->t == T_DEC) return v->dec == (sql_i128)r->i;
    if (x->t == T_BOOL) return (v->i != 0) == (r->i != 0);
    return v->i == r->i;
}

TEST(random_expressions_vs_reference) {
    sl_schema_t *s = sl_schema_new();
    sql_type_t *cols[NCOLS];
    char tb[64], err[512];
    for (int i = 0; i < NCOLS; i++) {
        cols[i] = sql_type_parse_str(type_text(COL_T[i], COL_P[i], COL_S[i], false, tb), err, sizeof err);
        CHECK(cols[i] != NULL);
        char name[8];
        snprintf(name, sizeof name, "c%d", i);
        static const sl_type_t ST[] = {SL_BOOLEAN, SL_INT, SL_BIGINT, SL_BYTES, SL_VARCHAR};
        sl_schema_add(s, name, ST[COL_T[i]], true);
    }
    sql_input_t in = {NCOLS, cols};
    sl_row_writer_t w;
    sl_rw_init(&w);
    sql_scratch_t sc = {0};
    long evals = 0, nulls = 0;
    for (int e = 0; e < 3000; e++) {
        tx_t *x = gen(rnd(5), 1 + rnd(4));
        json_t *j = to_json(x);
        sql_expr_t *ce = sql_expr_compile(j, &in, "test", err, sizeof err);
        if (!ce) {
            char *d = json_dumps(j, JSON_COMPACT);
            fprintf(stderr, "compile failed: %s\n  %s\n", err, d);
            free(d);
        }
        CHECK(ce != NULL);
        for (int r = 0; r < 40; r++) {
            random_row();
            write_row(&w, s);
            sl_row_t row = sl_rw_row(&w);
            sql_scratch_reset(&sc);
            sql_val_t v;
            memset(&v, 0, sizeof v);
            CHECK_EQ(sql_eval(ce, &row, &sc, &v), 0);
            rv_t want = ref(x);
            evals++;
            nulls += want.null;
            if (!same(x, &want, &v)) {
                char *d = json_dumps(j, JSON_COMPACT);
                char got[300];
                sql_val_format(sql_expr_type(ce), &v, got, sizeof got);
                fprintf(stderr, "mismatch: %s\n  want null=%d i=%lld s='%s', got %s\n", d, want.null,
                        (long long)want.i, want.s, got);
                for (int i = 0; i < NCOLS; i++)
                    fprintf(stderr, "  c%d = %s%lld '%s'\n", i, g_row[i].null ? "NULL " : "", (long long)g_row[i].i,
                            g_row[i].s);
                free(d);
            }
            CHECK(same(x, &want, &v));
        }
        sql_expr_free(ce);
        json_decref(j);
        tx_free(x);
    }
    fprintf(stderr, "  %ld evaluations, %ld NULL results\n", evals, nulls);
    CHECK(nulls > evals / 20 && nulls < evals - evals / 20); /* NULLs were exercised, and not only */
    sql_scratch_free(&sc);
    sl_rw_free(&w);
    for (int i = 0; i < NCOLS; i++) sql_type_free(cols[i]);
    sl_schema_unref(s);
}

/* Division and MOD by zero fail the evaluation with a message, as Flink's ArithmeticException. */
TEST(division_by_zero_reported) {
    sql_type_t *t = sql_type_parse_str("BIGINT", NULL, 0);
    sql_input_t in = {1, &t};
    char err[256];
    json_t *j = json_loads("{\"kind\":\"CALL\",\"internalName\":\"$/$1\",\"type\":\"BIGINT\",\"operands\":["
                           "{\"kind\":\"INPUT_REF\",\"inputIndex\":0,\"type\":\"BIGINT\"},"
                           "{\"kind\":\"LITERAL\",\"value\":0,\"type\":\"BIGINT NOT NULL\"}]}", 0, NULL);
    sql_expr_t *e = sql_expr_compile(j, &in, "t", err, sizeof err);
    CHECK(e != NULL);
    sl_schema_t *s = sl_schema_new();
    sl_schema_add(s, "a", SL_BIGINT, true);
    sl_row_writer_t w;
    sl_rw_init(&w);
    sl_rw_begin(&w, s);
    sl_rw_set_i64(&w, 0, 7);
    sl_row_t row = sl_rw_row(&w);
    sql_scratch_t sc = {0};
    sql_val_t v;
    CHECK(sql_eval(e, &row, &sc, &v) < 0);
    CHECK_CONTAINS(sc.err, "division by zero");
    sql_scratch_free(&sc);
    sl_rw_free(&w);
    sl_schema_unref(s);
    sql_expr_free(e);
    json_decref(j);
    sql_type_free(t);
}

/* DOUBLE as Java's primitives (the JLS, which Flink's generated code follows): NaN is unordered,
 * (int) of a double saturates, (long) of NaN is 0; checked against C's own IEEE answers. */
TEST(double_java_semantics) {
    sql_type_t *t = sql_type_parse_str("DOUBLE", NULL, 0);
    sql_input_t in = {1, &t};
    sl_schema_t *s = sl_schema_new();
    sl_schema_add(s, "d", SL_DOUBLE, true);
    sl_row_writer_t w;
    sl_rw_init(&w);
    sql_scratch_t sc = {0};
    const double vals[] = {NAN, 1.5, -2.5, 1e10, -1e10, 3e19, 0.0};
    const char *ops[] = {"$=$1", "$<>$1", "$<$1", "$>=$1"};
    for (size_t vi = 0; vi < sizeof vals / sizeof vals[0]; vi++) {
        sl_rw_begin(&w, s);
        sl_rw_set_f64(&w, 0, vals[vi]);
        sl_row_t row = sl_rw_row(&w);
        double x = vals[vi], y = 1.5;
        bool want[] = {x == y, x != y, x < y, x >= y};
        for (int k = 0; k < 4; k++) {
            char js[512], err[256];
            snprintf(js, sizeof js, "{\"kind\":\"CALL\",\"internalName\":\"%s\",\"type\":\"BOOLEAN\",\"operands\":["
                     "{\"kind\":\"INPUT_REF\",\"inputIndex\":0,\"type\":\"DOUBLE\"},"
                     "{\"kind\":\"LITERAL\",\"value\":1.5,\"type\":\"DOUBLE NOT NULL\"}]}", ops[k]);
            json_t *j = json_loads(js, 0, NULL);
            sql_expr_t *e = sql_expr_compile(j, &in, "t", err, sizeof err);
            CHECK(e != NULL);
            sql_val_t v;
            CHECK_EQ(sql_eval(e, &row, &sc, &v), 0);
            CHECK(!v.null);
            CHECK_EQ(v.i != 0, want[k]);
            sql_expr_free(e);
            json_decref(j);
        }
        const char *to[] = {"INT", "BIGINT"};
        for (int k = 0; k < 2; k++) {
            char js[512], err[256];
            snprintf(js, sizeof js, "{\"kind\":\"CALL\",\"internalName\":\"$CAST$1\",\"type\":\"%s\",\"operands\":["
                     "{\"kind\":\"INPUT_REF\",\"inputIndex\":0,\"type\":\"DOUBLE\"}]}", to[k]);
            json_t *j = json_loads(js, 0, NULL);
            sql_expr_t *e = sql_expr_compile(j, &in, "t", err, sizeof err);
            CHECK(e != NULL);
            sql_val_t v;
            CHECK_EQ(sql_eval(e, &row, &sc, &v), 0);
            long double lo = k ? -9223372036854775808.0L : -2147483648.0L, hi = k ? 9223372036854775807.0L : 2147483647.0L;
            long double tr = x != x ? 0 : x < lo ? lo : x > hi ? hi : (long double)(int64_t)x; /* JLS 5.1.3 */
            CHECK(v.i == (int64_t)tr);
            sql_expr_free(e);
            json_decref(j);
        }
    }
    sql_scratch_free(&sc);
    sl_rw_free(&w);
    sl_schema_unref(s);
    sql_type_free(t);
}

/* Types: the forms the planner writes, and malformed ones refused with a message. */
TEST(type_parsing) {
    char err[256];
    const char *good[] = {"BIGINT NOT NULL", "DECIMAL(23, 3)", "VARCHAR(2147483647)", "TIMESTAMP(3)",
                          "ROW<`a` BIGINT, `b` ROW<`c` INT, `d``x` VARCHAR(5)>>", "INTERVAL SECOND(6) NOT NULL",
                          "CHAR(23) NOT NULL", "TIMESTAMP(3) WITHOUT TIME ZONE"};
    for (size_t i = 0; i < sizeof good / sizeof good[0]; i++) {
        sql_type_t *t = sql_type_parse_str(good[i], err, sizeof err);
        if (!t) fprintf(stderr, "%s: %s\n", good[i], err);
        CHECK(t != NULL);
        sql_type_free(t);
    }
    sql_type_t *r = sql_type_parse_str(good[4], err, sizeof err);
    CHECK_EQ(r->width, 3);
    CHECK_STR(r->fields[1]->names[1], "d`x");
    sql_type_free(r);
    const char *bad[] = {"", "BIGINTX", "DECIMAL(40, 2)", "DECIMAL(5, 6)", "ROW<`a` BIGINT", "VARCHAR(", "INT NOT",
                         "ROW<>", "TIMESTAMP(12)", "BIGINT garbage"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        err[0] = 0;
        sql_type_t *t = sql_type_parse_str(bad[i], err, sizeof err);
        if (t) fprintf(stderr, "accepted: %s\n", bad[i]);
        CHECK(t == NULL);
        CHECK(err[0] != 0);
    }
}

int main(void) {
    g_seed = (unsigned)time(NULL);
    const char *s = getenv("SLUICE_TEST_SEED");
    if (s) g_seed = (unsigned)strtoul(s, NULL, 10);
    fprintf(stderr, "seed %u (SLUICE_TEST_SEED to repeat)\n", g_seed);
    RUN(random_expressions_vs_reference);
    RUN(division_by_zero_reported);
    RUN(double_java_semantics);
    RUN(type_parsing);
    TEST_MAIN_END();
}
