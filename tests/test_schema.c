/*
 * test_schema.c — the DDL parser (sl_schema_parse) against a reference
 * built here from the same random input:
 *
 *   - random schemas written as DDL with random spacing (blanks, tabs,
 *     newlines), random case, type aliases (INTEGER, BOOL, STRING,
 *     VARBINARY, TIMESTAMP / TIMESTAMP(3), VARCHAR(n)) and nullability
 *     (none, NULL, NOT NULL) parse to exactly the fields generated, and
 *     format -> parse round-trips;
 *   - one type word of such a DDL replaced by a random typo is reported as
 *     "schema: field 'f': unknown type 'BIGNT' at column C (did you mean
 *     BIGINT?)", where C is where the typo was written and the suggestion
 *     is the brute-force closest type name (case-insensitive edit distance
 *     computed here) within max(2, len/5), else the list of known types;
 *   - a failed parse without an err buffer leaves its message for the
 *     builder the schema was passed to (sl__schema_take_parse_error).
 *
 * Environment: SLUICE_RAND_SEED=s changes the base seed.
 */
#include <ctype.h>
#include <limits.h>

#include "sluice/sluice.h"
#include "test.h"
#include "types/schema_int.h"

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static int rnd(uint64_t *s, int n) { return (int)(rng_next(s) % (uint64_t)n); }

/* The reference's view of the DDL's types. */
static const struct {
    const char *word;
    sl_type_t type;
} WORDS[] = {{"BIGINT", SL_BIGINT},   {"INT", SL_INT},         {"INTEGER", SL_INT},
             {"DOUBLE", SL_DOUBLE},   {"BOOLEAN", SL_BOOLEAN}, {"BOOL", SL_BOOLEAN},
             {"VARCHAR", SL_VARCHAR}, {"STRING", SL_VARCHAR},  {"BYTES", SL_BYTES},
             {"VARBINARY", SL_BYTES}, {"TIMESTAMP", SL_TIMESTAMP}};
#define NWORDS ((int)(sizeof WORDS / sizeof *WORDS))

typedef struct {
    char name[16];
    sl_type_t type;
    bool nullable;
    size_t type_col;  /* 1-based column of the type word in the text */
    size_t type_len;
} ref_field_t;

typedef struct {
    char text[2048];
    size_t len;
} ddl_t;

static void put(ddl_t *d, const char *s) {
    size_t n = strlen(s);
    if (d->len + n < sizeof d->text) {
        memcpy(d->text + d->len, s, n + 1);
        d->len += n;
    }
}

static void blanks(ddl_t *d, uint64_t *r, bool at_least_one) {
    static const char *ws[] = {" ", " ", "  ", "\t", "\n", " \n  "};
    int n = at_least_one ? 1 + (rnd(r, 4) == 0) : (rnd(r, 3) == 0);
    for (int i = 0; i < n; i++) put(d, ws[rnd(r, 6)]);
}

static void random_case(char *w, uint64_t *r) {
    int mode = rnd(r, 3);
    for (char *p = w; *p; p++)
        *p = (char)(mode == 0 ? toupper((unsigned char)*p)
                              : mode == 1 ? tolower((unsigned char)*p)
                                          : rnd(r, 2) ? toupper((unsigned char)*p) : tolower((unsigned char)*p));
}

/* A random schema of n fields into f and its DDL into d. */
static void random_ddl(uint64_t *r, int n, ref_field_t *f, ddl_t *d) {
    d->len = 0;
    d->text[0] = 0;
    blanks(d, r, false);
    for (int i = 0; i < n; i++) {
        if (i) {
            blanks(d, r, false);
            put(d, ",");
            blanks(d, r, false);
        }
        /* unique names: a letter per field index, then random tail */
        int tl = rnd(r, 6);
        f[i].name[0] = (char)('a' + i % 26);
        f[i].name[1] = (char)('0' + i / 26);
        for (int k = 0; k < tl; k++) f[i].name[2 + k] = "abcxyz_019"[rnd(r, 10)];
        f[i].name[2 + tl] = 0;
        put(d, f[i].name);
        blanks(d, r, true);
        int w = rnd(r, NWORDS);
        char word[32];
        snprintf(word, sizeof word, "%s", WORDS[w].word);
        random_case(word, r);
        f[i].type = WORDS[w].type;
        f[i].type_col = d->len + 1;
        f[i].type_len = strlen(word);
        put(d, word);
        if ((WORDS[w].type == SL_TIMESTAMP && rnd(r, 2)) || (WORDS[w].type == SL_VARCHAR && rnd(r, 3) == 0)) {
            char len[32];
            snprintf(len, sizeof len, "%s(%s%d%s)", rnd(r, 3) ? "" : " ", rnd(r, 3) ? "" : " ",
                     WORDS[w].type == SL_TIMESTAMP ? 3 : 1 + rnd(r, 200), rnd(r, 3) ? "" : " ");
            put(d, len);
        }
        switch (rnd(r, 3)) {
        case 0: f[i].nullable = true; break;
        case 1: {
            char nul[8] = "NULL";
            random_case(nul, r);
            blanks(d, r, true);
            put(d, nul);
            f[i].nullable = true;
            break;
        }
        default: {
            char no[8] = "NOT", nul[8] = "NULL";
            random_case(no, r);
            random_case(nul, r);
            blanks(d, r, true);
            put(d, no);
            blanks(d, r, true);
            put(d, nul);
            f[i].nullable = false;
            break;
        }
        }
    }
    blanks(d, r, false);
}

static int ref_distance_nocase(const char *a, const char *b) {
    int la = (int)strlen(a), lb = (int)strlen(b);
    int d[64][64];
    for (int i = 0; i <= la; i++) d[i][0] = i;
    for (int j = 0; j <= lb; j++) d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int sub = tolower((unsigned char)a[i - 1]) != tolower((unsigned char)b[j - 1]);
            int best = d[i - 1][j - 1] + sub;
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

static bool is_type_word(const char *w) {
    for (int i = 0; i < NWORDS; i++)
        if (strcasecmp(w, WORDS[i].word) == 0) return true;
    return false;
}

TEST(random_ddl_parses_to_the_reference) {
    uint64_t r = getenv("SLUICE_RAND_SEED") ? strtoull(getenv("SLUICE_RAND_SEED"), NULL, 0) : 0x5c4e;
    for (int c = 0; c < 2000; c++) {
        ref_field_t f[40];
        ddl_t d;
        int n = 1 + rnd(&r, rnd(&r, 8) == 0 ? 40 : 6);
        random_ddl(&r, n, f, &d);
        char err[512] = "";
        sl_schema_t *s = sl_schema_parse(d.text, err, sizeof err);
        if (!s) fprintf(stderr, "case %d: \"%s\": %s\n", c, d.text, err);
        CHECK(s);
        CHECK_EQ(sl_schema_field_count(s), n);
        for (int i = 0; i < n; i++) {
            CHECK_STR(sl_schema_field_name(s, i), f[i].name);
            CHECK_EQ(sl_schema_field_type(s, i), f[i].type);
            CHECK_EQ(sl_schema_field_nullable(s, i), f[i].nullable);
        }
        char buf[4096];
        sl_schema_format(s, buf, sizeof buf);
        sl_schema_t *back = sl_schema_parse(buf, err, sizeof err);
        CHECK(back && sl_schema_equal(s, back));
        sl_schema_unref(back);
        sl_schema_unref(s);
    }
}

TEST(random_type_typos_are_named_with_column_and_suggestion) {
    uint64_t r = getenv("SLUICE_RAND_SEED") ? strtoull(getenv("SLUICE_RAND_SEED"), NULL, 0) : 0x7e90;
    int suggested = 0, listed = 0;
    for (int c = 0; c < 2000; c++) {
        ref_field_t f[8];
        ddl_t d;
        int n = 1 + rnd(&r, 6);
        random_ddl(&r, n, f, &d);
        /* the first field whose type gets a typo; earlier ones stay valid */
        int bad = rnd(&r, n);
        char typo[48];
        size_t col = f[bad].type_col, tl = f[bad].type_len;
        snprintf(typo, sizeof typo, "%.*s", (int)tl, d.text + col - 1);
        int edits = 1 + (rnd(&r, 3) == 0) * rnd(&r, 5);
        for (int e = 0; e < edits; e++) {
            int len = (int)strlen(typo), at = rnd(&r, len + 1);
            char ch = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_"[rnd(&r, 63)];
            int op = rnd(&r, 3);
            if (op == 0 && len > 1 && at < len) memmove(typo + at, typo + at + 1, (size_t)(len - at));
            else if (op == 1 && len < 40) {
                memmove(typo + at + 1, typo + at, (size_t)(len - at + 1));
                typo[at] = ch;
            } else if (at < len) typo[at] = ch;
        }
        if (is_type_word(typo)) continue;
        /* the DDL with the typo in place of the type word */
        char text[2100];
        snprintf(text, sizeof text, "%.*s%s%s", (int)(col - 1), d.text, typo, d.text + col - 1 + tl);
        /* the reference's message */
        int best_d = INT_MAX;
        const char *best = NULL;
        for (int i = 0; i < NWORDS; i++) {
            int dist = ref_distance_nocase(typo, WORDS[i].word);
            if (dist < best_d) best_d = dist, best = WORDS[i].word;
        }
        int limit = (int)strlen(typo) / 5 > 2 ? (int)strlen(typo) / 5 : 2;
        char expect[512];
        if (best_d <= limit) {
            snprintf(expect, sizeof expect, "schema: field '%s': unknown type '%s' at column %zu (did you mean %s?)",
                     f[bad].name, typo, col, best);
            suggested++;
        } else {
            snprintf(expect, sizeof expect,
                     "schema: field '%s': unknown type '%s' at column %zu (known types: BIGINT, INT, DOUBLE, "
                     "BOOLEAN, VARCHAR, BYTES, TIMESTAMP(3))",
                     f[bad].name, typo, col);
            listed++;
        }
        char err[512] = "";
        sl_schema_t *s = sl_schema_parse(text, err, sizeof err);
        if (s || strcmp(err, expect) != 0) fprintf(stderr, "case %d: \"%s\"\n", c, text);
        CHECK(!s);
        CHECK_STR(err, expect);
        /* without a buffer: the same message waits for the builder */
        CHECK(sl_schema_parse(text, NULL, 0) == NULL);
        char pending[512];
        CHECK(sl__schema_take_parse_error(pending, sizeof pending));
        CHECK_STR(pending, expect);
        CHECK(!sl__schema_take_parse_error(pending, sizeof pending));
    }
    CHECK(suggested > 500 && listed > 20);
}

TEST(pending_error_lifecycle) {
    char buf[256];
    CHECK(!sl__schema_take_parse_error(buf, sizeof buf));
    /* a caller that passes an err buffer sees the message there: nothing pending */
    char err[256];
    CHECK(sl_schema_parse("id BIGNT", err, sizeof err) == NULL);
    CHECK_STR(err, "schema: field 'id': unknown type 'BIGNT' at column 4 (did you mean BIGINT?)");
    CHECK(!sl__schema_take_parse_error(buf, sizeof buf));
    /* inline: pending until taken, or until the next parse succeeds */
    CHECK(sl_schema_parse("id BIGNT", NULL, 0) == NULL);
    sl_schema_t *ok = sl_schema_parse("id BIGINT", NULL, 0);
    CHECK(ok);
    sl_schema_unref(ok);
    CHECK(!sl__schema_take_parse_error(buf, sizeof buf));
    CHECK(sl_schema_parse(NULL, NULL, 0) == NULL);
    CHECK(sl__schema_take_parse_error(buf, sizeof buf));
    CHECK_CONTAINS(buf, "no text");
}

int main(void) {
    RUN(random_ddl_parses_to_the_reference);
    RUN(random_type_typos_are_named_with_column_and_suggestion);
    RUN(pending_error_lifecycle);
    TEST_MAIN_END();
}
