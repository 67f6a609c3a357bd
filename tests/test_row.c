/* test_row.c — binary rows (writer, reader, validation) and schemas (DDL). */
#include <math.h>

#include "sluice/sluice.h"
#include "test.h"

static sl_schema_t *all_types(void) {
    char err[256] = "";
    sl_schema_t *s = sl_schema_parse(
        "b BIGINT NOT NULL, i INT, d DOUBLE, f BOOLEAN, s VARCHAR, y BYTES, t TIMESTAMP(3), s2 STRING NOT NULL", err,
        sizeof err);
    if (!s) fprintf(stderr, "schema: %s\n", err);
    return s;
}

TEST(round_trip_every_type) {
    sl_schema_t *s = all_types();
    CHECK(s);
    CHECK_EQ(sl_schema_field_count(s), 8);
    sl_row_writer_t w;
    sl_rw_init(&w);
    sl_rw_begin(&w, s);
    sl_rw_set_i64(&w, 0, INT64_MIN);
    sl_rw_set_i32(&w, 1, INT32_MAX);
    sl_rw_set_f64(&w, 2, -0.0);
    sl_rw_set_bool(&w, 3, true);
    sl_rw_set_str(&w, 4, "héllo", 6);
    sl_rw_set_bytes(&w, 5, "\0\1\2\377", 4);
    sl_rw_set_i64(&w, 6, 1767225600123LL);
    sl_rw_set_str(&w, 7, "", 0);
    CHECK_EQ(w.err, 0);
    sl_row_t r = sl_rw_row(&w);
    CHECK_EQ(sl_row_validate(&r), SL_OK);
    CHECK_EQ(sl_row_i64(&r, 0), INT64_MIN);
    CHECK_EQ(sl_row_i32(&r, 1), INT32_MAX);
    CHECK(signbit(sl_row_f64(&r, 2)) && sl_row_f64(&r, 2) == 0);
    CHECK(sl_row_bool(&r, 3));
    uint32_t len;
    const char *str = sl_row_str(&r, 4, &len);
    CHECK_EQ(len, 6);
    CHECK(memcmp(str, "héllo", 6) == 0);
    const uint8_t *by = sl_row_bytes(&r, 5, &len);
    CHECK_EQ(len, 4);
    CHECK(memcmp(by, "\0\1\2\377", 4) == 0);
    CHECK_EQ(sl_row_i64(&r, 6), 1767225600123LL);
    sl_row_str(&r, 7, &len);
    CHECK_EQ(len, 0);
    for (int i = 0; i < 8; i++) CHECK(!sl_row_is_null(&r, i));

    /* every nullable field NULL */
    sl_rw_begin(&w, s);
    sl_rw_set_i64(&w, 0, 7);
    sl_rw_set_str(&w, 7, "x", 1);
    r = sl_rw_row(&w);
    CHECK_EQ(sl_row_validate(&r), SL_OK);
    for (int i = 1; i < 7; i++) CHECK(sl_row_is_null(&r, i));
    CHECK(!sl_row_is_null(&r, 0));
    char buf[64];
    sl_row_format_field(&r, 2, buf, sizeof buf);
    CHECK_STR(buf, "null");

    /* set then null again, null then set */
    sl_rw_begin(&w, s);
    sl_rw_set_i32(&w, 1, 5);
    sl_rw_set_null(&w, 1);
    sl_rw_set_null(&w, 3);
    sl_rw_set_bool(&w, 3, false);
    r = sl_rw_row(&w);
    CHECK(sl_row_is_null(&r, 1));
    CHECK(!sl_row_is_null(&r, 3));
    CHECK(!sl_row_bool(&r, 3));
    CHECK_EQ(w.err, 0);
    sl_rw_free(&w);
    sl_schema_unref(s);
}

TEST(null_in_not_null_is_rejected_by_writer) {
    sl_schema_t *s = all_types();
    sl_row_writer_t w;
    sl_rw_init(&w);
    sl_rw_begin(&w, s);
    sl_rw_set_null(&w, 0);
    CHECK_EQ(w.err, SL_EINVAL);
    sl_rw_begin(&w, s); /* begin clears the sticky error */
    CHECK_EQ(w.err, 0);
    sl_rw_set_null(&w, 99);
    CHECK_EQ(w.err, SL_EINVAL);
    sl_rw_free(&w);
    sl_schema_unref(s);
}

TEST(long_strings_and_many_fields) {
    /* 100 fields: the bitmap takes two words */
    sl_schema_t *s = sl_schema_new();
    char name[16];
    for (int i = 0; i < 100; i++) {
        snprintf(name, sizeof name, "f%d", i);
        CHECK_EQ(sl_schema_add(s, name, i % 2 ? SL_VARCHAR : SL_BIGINT, true), 0);
    }
    size_t big = 3u << 20;
    char *text = malloc(big);
    for (size_t k = 0; k < big; k++) text[k] = (char)('a' + k % 26);
    sl_row_writer_t w;
    sl_rw_init(&w);
    sl_rw_begin(&w, s);
    for (int i = 0; i < 100; i++) {
        if (i % 7 == 0) continue; /* stays NULL */
        if (i % 2) sl_rw_set_str(&w, i, text, (uint32_t)(i == 99 ? big : (size_t)i * 100));
        else sl_rw_set_i64(&w, i, -i);
    }
    sl_row_t r = sl_rw_row(&w);
    CHECK_EQ(sl_row_validate(&r), SL_OK);
    for (int i = 0; i < 100; i++) {
        CHECK_EQ(sl_row_is_null(&r, i), i % 7 == 0);
        if (i % 7 == 0) continue;
        if (i % 2) {
            uint32_t len;
            const char *p = sl_row_str(&r, i, &len);
            CHECK_EQ(len, i == 99 ? big : (size_t)i * 100);
            CHECK(memcmp(p, text, len) == 0);
        } else {
            CHECK_EQ(sl_row_i64(&r, i), -i);
        }
    }
    /* copy_row and copy_field give identical values */
    sl_row_writer_t w2;
    sl_rw_init(&w2);
    sl_rw_copy_row(&w2, &r);
    sl_row_t r2 = sl_rw_row(&w2);
    CHECK_EQ(r2.len, r.len);
    CHECK(memcmp(r2.data, r.data, r.len) == 0);
    sl_rw_begin(&w2, s);
    for (int i = 0; i < 100; i++) sl_rw_copy_field(&w2, i, &r, i);
    r2 = sl_rw_row(&w2);
    CHECK_EQ(sl_row_validate(&r2), SL_OK);
    uint32_t l1, l2;
    const uint8_t *k1 = sl_row_field_key(&r, 99, &l1), *k2 = sl_row_field_key(&r2, 99, &l2);
    CHECK_EQ(l1, big);
    CHECK(l1 == l2 && memcmp(k1, k2, l1) == 0);
    sl_row_field_key(&r, 0, &l1);
    CHECK_EQ(l1, 0); /* NULL key is empty */
    sl_row_field_key(&r, 2, &l1);
    CHECK_EQ(l1, 8);
    sl_rw_free(&w2);
    sl_rw_free(&w);
    free(text);
    sl_schema_unref(s);
}

/* Copies the row into a private buffer so the test can corrupt it. */
static uint8_t *clone_row(const sl_row_t *r) {
    uint8_t *p = malloc(r->len);
    memcpy(p, r->data, r->len);
    return p;
}

TEST(validate_rejects_corrupt_rows) {
    sl_schema_t *s = all_types();
    sl_row_writer_t w;
    sl_rw_init(&w);
    sl_rw_begin(&w, s);
    sl_rw_set_i64(&w, 0, 1);
    sl_rw_set_str(&w, 4, "abcdef", 6);
    sl_rw_set_bool(&w, 3, true);
    sl_rw_set_str(&w, 7, "xyz", 3);
    sl_row_t good = sl_rw_row(&w);
    CHECK_EQ(sl_row_validate(&good), SL_OK);
    uint32_t slot4 = sl__row_slot(8, 4);

    uint8_t *p = clone_row(&good);
    sl_row_t r = {p, good.len, s};
    /* truncated: shorter than the fixed part, and cutting the var area */
    r.len = 10;
    CHECK_EQ(sl_row_validate(&r), SL_EFORMAT);
    r.len = good.len - 1;
    CHECK_EQ(sl_row_validate(&r), SL_EFORMAT);
    r.len = good.len;
    CHECK_EQ(sl_row_validate(&r), SL_OK);
    r.data = NULL;
    CHECK_EQ(sl_row_validate(&r), SL_EFORMAT);
    r.data = p;

    /* offset into the fixed part */
    uint32_t off = 3;
    memcpy(p + slot4, &off, 4);
    CHECK_EQ(sl_row_validate(&r), SL_EFORMAT);
    /* offset past the end, and a length that overflows 32 bits */
    off = 0xfffffff0u;
    memcpy(p + slot4, &off, 4);
    CHECK_EQ(sl_row_validate(&r), SL_EFORMAT);
    memcpy(p, good.data, good.len);
    uint32_t l = 0xffffffffu;
    memcpy(p + slot4 + 4, &l, 4);
    CHECK_EQ(sl_row_validate(&r), SL_EFORMAT);

    /* NULL bit on a NOT NULL field */
    memcpy(p, good.data, good.len);
    p[0] |= 1;
    CHECK_EQ(sl_row_validate(&r), SL_EFORMAT);
    /* a bit past the last field */
    memcpy(p, good.data, good.len);
    p[1] |= 0x80;
    CHECK_EQ(sl_row_validate(&r), SL_EFORMAT);
    /* a boolean that is neither 0 nor 1 */
    memcpy(p, good.data, good.len);
    p[sl__row_slot(8, 3)] = 2;
    CHECK_EQ(sl_row_validate(&r), SL_EFORMAT);
    free(p);
    sl_rw_free(&w);
    sl_schema_unref(s);
}

TEST(validate_random_corruption_never_crashes) {
    sl_schema_t *s = all_types();
    sl_row_writer_t w;
    sl_rw_init(&w);
    sl_rw_begin(&w, s);
    sl_rw_set_i64(&w, 0, 1);
    sl_rw_set_str(&w, 4, "abcdef", 6);
    sl_rw_set_bytes(&w, 5, "zz", 2);
    sl_rw_set_str(&w, 7, "xyz", 3);
    sl_row_t good = sl_rw_row(&w);
    uint64_t x = 1;
    int ok = 0;
    for (int iter = 0; iter < 20000; iter++) {
        uint8_t *p = clone_row(&good);
        for (int k = 0; k < 3; k++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            p[(x >> 33) % good.len] ^= (uint8_t)(x >> 20);
        }
        sl_row_t r = {p, good.len, s};
        if (sl_row_validate(&r) == SL_OK) {
            ok++;
            /* a row that validates can be read entirely */
            char buf[64];
            for (int i = 0; i < 8; i++) sl_row_format_field(&r, i, buf, sizeof buf);
            uint32_t len;
            for (int i = 4; i < 6; i++)
                if (!sl_row_is_null(&r, i)) {
                    const uint8_t *b = sl_row_bytes(&r, i, &len);
                    CHECK(b >= p);
                    CHECK((size_t)(b - p) + len <= good.len);
                }
        }
        free(p);
    }
    CHECK(ok > 0);
    sl_rw_free(&w);
    sl_schema_unref(s);
}

TEST(format_field) {
    sl_schema_t *s = all_types();
    sl_row_writer_t w;
    sl_rw_init(&w);
    sl_rw_begin(&w, s);
    sl_rw_set_i64(&w, 0, -42);
    sl_rw_set_f64(&w, 2, 0.5);
    sl_rw_set_bool(&w, 3, false);
    sl_rw_set_str(&w, 4, "hi", 2);
    sl_rw_set_bytes(&w, 5, "\x01\xab", 2);
    sl_row_t r = sl_rw_row(&w);
    char buf[64];
    sl_row_format_field(&r, 0, buf, sizeof buf);
    CHECK_STR(buf, "-42");
    sl_row_format_field(&r, 2, buf, sizeof buf);
    CHECK_STR(buf, "0.5");
    sl_row_format_field(&r, 3, buf, sizeof buf);
    CHECK_STR(buf, "false");
    sl_row_format_field(&r, 4, buf, sizeof buf);
    CHECK_STR(buf, "hi");
    CHECK_EQ(sl_row_format_field(&r, 5, buf, sizeof buf), 4);
    CHECK(memcmp(buf, "01ab", 4) == 0);
    /* truncation never overruns */
    CHECK_EQ(sl_row_format_field(&r, 0, buf, 3), 2);
    CHECK_STR(buf, "-4");
    sl_rw_free(&w);
    sl_schema_unref(s);
}

TEST(schema_parse_and_format) {
    char err[256] = "";
    sl_schema_t *s = sl_schema_parse("  card_id BIGINT NOT NULL ,amount double,ts TIMESTAMP(3) not null, "
                                     "name VARCHAR(20) NULL, ok BOOL, n INTEGER, raw VARBINARY",
                                     err, sizeof err);
    CHECK(s);
    CHECK_EQ(sl_schema_field_count(s), 7);
    CHECK_STR(sl_schema_field_name(s, 2), "ts");
    CHECK_EQ(sl_schema_field_type(s, 2), SL_TIMESTAMP);
    CHECK(!sl_schema_field_nullable(s, 2));
    CHECK(sl_schema_field_nullable(s, 3));
    CHECK_EQ(sl_schema_field_type(s, 3), SL_VARCHAR);
    CHECK_EQ(sl_schema_field_type(s, 4), SL_BOOLEAN);
    CHECK_EQ(sl_schema_field_type(s, 5), SL_INT);
    CHECK_EQ(sl_schema_field_type(s, 6), SL_BYTES);
    CHECK_EQ(sl_schema_index(s, "amount"), 1);
    CHECK_EQ(sl_schema_index(s, "nope"), SL_ENOTFOUND);
    char buf[256];
    sl_schema_format(s, buf, sizeof buf);
    CHECK_STR(buf, "card_id BIGINT NOT NULL, amount DOUBLE, ts TIMESTAMP(3) NOT NULL, name VARCHAR, ok BOOLEAN, "
                   "n INT, raw BYTES");
    sl_schema_t *s2 = sl_schema_parse(buf, err, sizeof err);
    CHECK(s2);
    CHECK(sl_schema_equal(s, s2));
    sl_schema_t *s3 = sl_schema_parse("card_id BIGINT", err, sizeof err);
    CHECK(!sl_schema_equal(s, s3));
    /* truncated formatting stays terminated */
    CHECK(sl_schema_format(s, buf, 10) <= 9);
    CHECK_EQ(strlen(buf), 9);
    CHECK_EQ(sl_schema_add(s3, "card_id", SL_INT, true), SL_EINVAL); /* duplicate */
    CHECK_EQ(sl_schema_add(s3, "", SL_INT, true), SL_EINVAL);
    CHECK_EQ(sl_schema_add(s3, "x", (sl_type_t)99, true), SL_EINVAL);
    sl_schema_unref(s);
    sl_schema_unref(s2);
    sl_schema_unref(s3);
}

/* Parses ddl, expects failure with a message containing each needle. */
static int parse_fails(const char *ddl, const char *needle1, const char *needle2) {
    char err[256] = "";
    sl_schema_t *s = sl_schema_parse(ddl, err, sizeof err);
    if (s) {
        fprintf(stderr, "  \"%s\" parsed\n", ddl);
        sl_schema_unref(s);
        return 0;
    }
    if (!strstr(err, needle1) || (needle2 && !strstr(err, needle2))) {
        fprintf(stderr, "  \"%s\": message \"%s\" lacks \"%s\"/\"%s\"\n", ddl, err, needle1, needle2 ? needle2 : "");
        return 0;
    }
    return 1;
}

TEST(schema_errors_name_the_token) {
    CHECK(parse_fails("a BIGINT, b FOO", "'FOO'", "'b'"));
    CHECK(parse_fails("a BIGINT, b", "no type (expected a type at column 12)", "'b'"));
    CHECK(parse_fails("", "expected a field name", "column 1"));
    CHECK(parse_fails("a INT, , b INT", "expected a field name", "column 8"));
    CHECK(parse_fails("a INT NOT", "expected NULL after NOT", "'a'"));
    CHECK(parse_fails("a INT NOT NIL", "expected NULL after NOT", "'a'"));
    CHECK(parse_fails("a INT, a BIGINT", "duplicate field 'a'", NULL));
    CHECK(parse_fails("t TIMESTAMP(6)", "TIMESTAMP(3)", "'t'"));
    CHECK(parse_fails("s VARCHAR(10", "expected a number and ')'", "'s'"));
    CHECK(parse_fails("a INT b INT", "unexpected 'b'", "column 7"));
    CHECK(parse_fails("a INT; DROP", "unexpected ';'", NULL));
    char err[8];
    CHECK(sl_schema_parse(NULL, err, sizeof err) == NULL);
    CHECK(sl_schema_parse("a FOO", NULL, 0) == NULL); /* no message buffer */
}

int main(void) {
    RUN(round_trip_every_type);
    RUN(null_in_not_null_is_rejected_by_writer);
    RUN(long_strings_and_many_fields);
    RUN(validate_rejects_corrupt_rows);
    RUN(validate_random_corruption_never_crashes);
    RUN(format_field);
    RUN(schema_parse_and_format);
    RUN(schema_errors_name_the_token);
    TEST_MAIN_END();
}
