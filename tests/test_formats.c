/* test_formats.c — JSON and CSV line formats: every type both ways, error
 * messages, CSV quoting, random round trips and random garbage. */
#include <math.h>

#include "formats/format.h"
#include "sluice/sluice.h"
#include "test.h"

#define ALL_DDL                                                                                    \
    "b BIGINT NOT NULL, i INT, d DOUBLE, f BOOLEAN, s VARCHAR, y BYTES, t TIMESTAMP(3), s2 VARCHAR NOT NULL"

static sl_schema_t *parse(const char *ddl) {
    char err[256];
    sl_schema_t *s = sl_schema_parse(ddl, err, sizeof err);
    if (!s) {
        fprintf(stderr, "schema: %s\n", err);
        abort();
    }
    return s;
}

/* Decodes `line` (NUL-terminated) with a fresh decoder; err gets the message. */
static int dec(sl_format_t fmt, const sl_schema_t *s, const char *line, int64_t lineno, sl_row_writer_t *w,
               char *err, size_t errlen) {
    sl_decoder_t d;
    sl_decoder_init(&d, fmt, s);
    err[0] = 0;
    int rc = sl_decode_line(&d, line, strlen(line), lineno, w, err, errlen);
    sl_decoder_free(&d);
    return rc;
}

/* Encodes the writer's row; returns a static NUL-terminated copy. */
static const char *enc(sl_format_t fmt, const sl_row_writer_t *w) {
    static char out[4096];
    sl_buf_t b = {0};
    sl_row_t r = sl_rw_row(w);
    sl_encode_row(fmt, &r, &b);
    snprintf(out, sizeof out, "%.*s", (int)b.len, (const char *)b.p);
    sl_buf_free(&b);
    return out;
}

TEST(json_every_type) {
    sl_schema_t *s = parse(ALL_DDL);
    sl_row_writer_t w;
    sl_rw_init(&w);
    char err[512];
    const char *line = "{\"b\": -9223372036854775808, \"i\": 2147483647, \"d\": 12.34, \"f\": true, "
                       "\"s\": \"h\\u00e9\\\"llo\\n\\u0000\", \"y\": \"AAEC/w==\", \"t\": \"2026-12-01T10:00:00.123Z\", "
                       "\"s2\": \"\", \"extra\": [1, {\"x\": 2}]}";
    CHECK_EQ(dec(SL_FMT_JSON, s, line, 1, &w, err, sizeof err), 0);
    sl_row_t r = sl_rw_row(&w);
    CHECK_EQ(sl_row_validate(&r), 0);
    CHECK_EQ(sl_row_i64(&r, 0), INT64_MIN);
    CHECK_EQ(sl_row_i32(&r, 1), INT32_MAX);
    CHECK(sl_row_f64(&r, 2) == 12.34);
    CHECK(sl_row_bool(&r, 3));
    uint32_t len;
    const char *str = sl_row_str(&r, 4, &len);
    CHECK_EQ(len, 9);
    CHECK(memcmp(str, "h\xc3\xa9\"llo\n\0", 9) == 0);
    const uint8_t *by = sl_row_bytes(&r, 5, &len);
    CHECK_EQ(len, 4);
    CHECK(memcmp(by, "\0\1\2\377", 4) == 0);
    CHECK_EQ(sl_row_i64(&r, 6), 1796119200123LL);
    sl_row_str(&r, 7, &len);
    CHECK_EQ(len, 0);
    CHECK_STR(enc(SL_FMT_JSON, &w),
              "{\"b\":-9223372036854775808,\"i\":2147483647,\"d\":12.34,\"f\":true,\"s\":\"h\xc3\xa9\\\"llo\\n\\u0000\","
              "\"y\":\"AAEC/w==\",\"t\":\"2026-12-01T10:00:00.123Z\",\"s2\":\"\"}");

    /* missing and explicit null are NULL for nullable fields; integers for DOUBLE and TIMESTAMP */
    CHECK_EQ(dec(SL_FMT_JSON, s, "{\"b\":1,\"d\":3,\"f\":null,\"t\":-1,\"s2\":\"x\"}", 1, &w, err, sizeof err), 0);
    r = sl_rw_row(&w);
    CHECK(sl_row_is_null(&r, 1) && sl_row_is_null(&r, 3) && sl_row_is_null(&r, 4) && sl_row_is_null(&r, 5));
    CHECK(sl_row_f64(&r, 2) == 3.0);
    CHECK_EQ(sl_row_i64(&r, 6), -1);
    CHECK_STR(enc(SL_FMT_JSON, &w), "{\"b\":1,\"i\":null,\"d\":3.0,\"f\":null,\"s\":null,\"y\":null,"
                                    "\"t\":\"1969-12-31T23:59:59.999Z\",\"s2\":\"x\"}");
    /* non-finite doubles travel as strings; bytes of every length */
    CHECK_EQ(dec(SL_FMT_JSON, s, "{\"b\":1,\"d\":\"-Infinity\",\"y\":\"QUI\",\"s2\":\"x\"}", 1, &w, err, sizeof err),
             0);
    r = sl_rw_row(&w);
    CHECK(isinf(sl_row_f64(&r, 2)) && sl_row_f64(&r, 2) < 0);
    by = sl_row_bytes(&r, 5, &len);
    CHECK(len == 2 && memcmp(by, "AB", 2) == 0);
    CHECK_CONTAINS(enc(SL_FMT_JSON, &w), "\"d\":\"-Infinity\",\"f\":null,\"s\":null,\"y\":\"QUI=\"");
    CHECK_EQ(dec(SL_FMT_JSON, s, "{\"b\":1,\"d\":\"NaN\",\"y\":\"\",\"s2\":\"x\"}", 1, &w, err, sizeof err), 0);
    r = sl_rw_row(&w);
    CHECK(isnan(sl_row_f64(&r, 2)));
    sl_row_bytes(&r, 5, &len);
    CHECK_EQ(len, 0);
    CHECK_CONTAINS(enc(SL_FMT_JSON, &w), "\"d\":\"NaN\"");
    sl_rw_free(&w);
    sl_schema_unref(s);
}

TEST(csv_every_type) {
    sl_schema_t *s = parse(ALL_DDL);
    sl_row_writer_t w;
    sl_rw_init(&w);
    char err[512];
    const char *line = "-9223372036854775808, 2147483647 ,12.34,TRUE,\"h\xc3\xa9,\"\"llo\"\"\n\",000102ff,"
                       "2026-12-01T10:00:00.123Z,\"\"";
    CHECK_EQ(dec(SL_FMT_CSV, s, line, 1, &w, err, sizeof err), 0);
    sl_row_t r = sl_rw_row(&w);
    CHECK_EQ(sl_row_validate(&r), 0);
    CHECK_EQ(sl_row_i64(&r, 0), INT64_MIN);
    CHECK_EQ(sl_row_i32(&r, 1), INT32_MAX);
    CHECK(sl_row_f64(&r, 2) == 12.34);
    CHECK(sl_row_bool(&r, 3));
    uint32_t len;
    const char *str = sl_row_str(&r, 4, &len);
    CHECK_EQ(len, 10);
    CHECK(memcmp(str, "h\xc3\xa9,\"llo\"\n", 10) == 0);
    const uint8_t *by = sl_row_bytes(&r, 5, &len);
    CHECK(len == 4 && memcmp(by, "\0\1\2\377", 4) == 0);
    CHECK_EQ(sl_row_i64(&r, 6), 1796119200123LL);
    sl_row_str(&r, 7, &len);
    CHECK_EQ(len, 0);
    CHECK_STR(enc(SL_FMT_CSV, &w), "-9223372036854775808,2147483647,12.34,true,\"h\xc3\xa9,\"\"llo\"\"\n\",0001"
                                   "02ff,2026-12-01T10:00:00.123Z,\"\"");

    /* empty unquoted: NULL when nullable, "" for a NOT NULL VARCHAR */
    CHECK_EQ(dec(SL_FMT_CSV, s, "7,,,,,,,", 1, &w, err, sizeof err), 0);
    r = sl_rw_row(&w);
    for (int i = 1; i < 7; i++) CHECK(sl_row_is_null(&r, i));
    CHECK(!sl_row_is_null(&r, 7));
    CHECK_STR(enc(SL_FMT_CSV, &w), "7,,,,,,,\"\"");
    /* quoted empty is an empty string / empty bytes, not NULL */
    CHECK_EQ(dec(SL_FMT_CSV, s, "7,,,,\"\",\"\",,x", 1, &w, err, sizeof err), 0);
    r = sl_rw_row(&w);
    CHECK(!sl_row_is_null(&r, 4) && !sl_row_is_null(&r, 5));
    CHECK_STR(enc(SL_FMT_CSV, &w), "7,,,,\"\",\"\",,x");
    /* quoted numbers, epoch-millis timestamps, non-finite doubles, false */
    CHECK_EQ(dec(SL_FMT_CSV, s, "\"8\",\"-3\",-Infinity,false,  sp  ,AbCd,-1,x", 1, &w, err, sizeof err), 0);
    r = sl_rw_row(&w);
    CHECK_EQ(sl_row_i64(&r, 0), 8);
    CHECK_EQ(sl_row_i32(&r, 1), -3);
    CHECK(isinf(sl_row_f64(&r, 2)));
    CHECK(!sl_row_bool(&r, 3));
    str = sl_row_str(&r, 4, &len);
    CHECK(len == 6 && memcmp(str, "  sp  ", 6) == 0); /* strings keep their spaces */
    CHECK_EQ(sl_row_i64(&r, 6), -1);
    CHECK_STR(enc(SL_FMT_CSV, &w), "8,-3,-Infinity,false,  sp  ,abcd,1969-12-31T23:59:59.999Z,x");
    CHECK_EQ(dec(SL_FMT_CSV, s, "1,,nan,,,,,x", 1, &w, err, sizeof err), 0);
    r = sl_rw_row(&w);
    CHECK(isnan(sl_row_f64(&r, 2)));
    sl_rw_free(&w);
    sl_schema_unref(s);
}

TEST(timestamps) {
    int64_t ms;
    struct {
        const char *text;
        int64_t ms;
    } ok[] = {
        {"2026-12-01T10:00:00.123Z", 1796119200123LL},
        {"2026-12-01 10:00:00.123", 1796119200123LL},
        {"2026-12-01t10:00:00.123z", 1796119200123LL},
        {"2026-12-01T12:00:00.123+02:00", 1796119200123LL},
        {"2026-12-01T09:30:00.123-0030", 1796119200123LL},
        {"2026-12-01T10:00:00.1234567Z", 1796119200123LL},
        {"2026-12-01T10:00:00.1Z", 1796119200100LL},
        {"2026-12-01T10:00:00,5Z", 1796119200500LL},
        {"2026-12-01T10:00Z", 1796119200000LL},
        {"2026-12-01T10:00", 1796119200000LL},
        {"2026-12-01", 1796083200000LL},
        {"2026-01-01T00:00:00Z", 1767225600000LL},
        {"1970-01-01T00:00:00.000Z", 0},
        {"1969-12-31T23:59:59.999Z", -1},
        {"2024-02-29T00:00:00Z", 1709164800000LL},
        {"2000-02-29T00:00:00Z", 951782400000LL},
        {"0000-01-01T00:00:00Z", -62167219200000LL},
        {"9999-12-31T23:59:59.999Z", 253402300799999LL},
    };
    for (size_t k = 0; k < SL_ARRAY_LEN(ok); k++) {
        ms = 0;
        if (sl_parse_iso_ts(ok[k].text, strlen(ok[k].text), &ms) != 0 || ms != ok[k].ms)
            fprintf(stderr, "  %s -> %" PRId64 "\n", ok[k].text, ms);
        CHECK_EQ(sl_parse_iso_ts(ok[k].text, strlen(ok[k].text), &ms), 0);
        CHECK_EQ(ms, ok[k].ms);
    }
    const char *bad[] = {"",
                         "2026",
                         "2026-13-01",
                         "2026-00-10",
                         "2026-02-29",
                         "1900-02-29",
                         "2026-04-31",
                         "2026-12-01T24:00:00Z",
                         "2026-12-01T10:60Z",
                         "2026-12-01T10:00:60Z",
                         "2026-12-01T10:00:00.Z",
                         "2026-12-01T10:00:00.1234567890Z",
                         "2026-12-01T10:00:00ZZ",
                         "2026-12-01T10:00:00+2",
                         "2026-12-01T10:00:00+25:00",
                         "2026-12-01X10:00",
                         "26-12-01",
                         "+2026-12-01",
                         "2026-12-01T1:00",
                         "2026-12-01T10:00:00 ",
                         " 2026-12-01"};
    for (size_t k = 0; k < SL_ARRAY_LEN(bad); k++) {
        if (sl_parse_iso_ts(bad[k], strlen(bad[k]), &ms) == 0) fprintf(stderr, "  accepted \"%s\"\n", bad[k]);
        CHECK_EQ(sl_parse_iso_ts(bad[k], strlen(bad[k]), &ms), -1);
    }
    char buf[32];
    CHECK_EQ(sl_format_iso_ts(1796119200123LL, buf), 24);
    CHECK_STR(buf, "2026-12-01T10:00:00.123Z");
    sl_format_iso_ts(-1, buf);
    CHECK_STR(buf, "1969-12-31T23:59:59.999Z");
    sl_format_iso_ts(-62167219200000LL, buf);
    CHECK_STR(buf, "0000-01-01T00:00:00.000Z");
    CHECK_EQ(sl_format_iso_ts(-62167219200001LL, buf), 0);
    CHECK_EQ(sl_format_iso_ts(253402300800000LL, buf), 0);
    CHECK_EQ(sl_format_iso_ts(INT64_MIN, buf), 0);
    CHECK_EQ(sl_format_iso_ts(INT64_MAX, buf), 0);
    /* every millisecond pattern across a range of years round-trips */
    uint64_t x = 7;
    for (int k = 0; k < 200000; k++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        int64_t v = -62167219200000LL + (int64_t)((x >> 11) % (uint64_t)(253402300800000LL + 62167219200000LL));
        size_t n = sl_format_iso_ts(v, buf);
        CHECK_EQ(n, 24);
        CHECK_EQ(sl_parse_iso_ts(buf, n, &ms), 0);
        CHECK_EQ(ms, v);
    }
}

TEST(doubles_shortest_and_exact) {
    struct {
        double v;
        const char *text;
    } cases[] = {{12.34, "12.34"},       {0.1, "0.1"},        {1.0, "1.0"},     {100, "100.0"},
                 {-0.0, "-0.0"},         {1e300, "1e+300"},   {5e-324, "4.94065645841247e-324"},
                 {0.30000000000000004, "0.30000000000000004"}, {1.0 / 3, "0.3333333333333333"},
                 {123456789012345680.0, "1.2345678901234568e+17"}, {NAN, "NaN"}, {-INFINITY, "-Infinity"}};
    char buf[32];
    for (size_t k = 0; k < SL_ARRAY_LEN(cases); k++) {
        sl_format_double(cases[k].v, buf);
        CHECK_STR(buf, cases[k].text);
    }
    /* the fast path for short decimals writes what the general path writes */
    uint64_t x = 99;
    char ref[40], err[128];
    sl_schema_t *s = sl_schema_parse("d DOUBLE", NULL, 0);
    sl_row_writer_t w;
    sl_rw_init(&w);
    for (int k = 0; k < 200000; k++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        static const double p10[] = {1, 10, 100, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8};
        int digits = 1 + (int)((x >> 8) % 16), scale = (int)((x >> 20) % 9);
        int64_t c = (int64_t)((x >> 30) % (uint64_t)p10[digits > 8 ? 8 : digits]) * (digits > 8 ? (int64_t)p10[digits - 8] : 1);
        double v = (double)c / p10[scale] * ((x & 1) ? -1 : 1);
        if (v == 0) continue;
        int n = 0;
        for (int prec = 15; prec <= 17; prec++) {
            n = snprintf(ref, 32, "%.*g", prec, v);
            if (strtod(ref, NULL) == v) break;
        }
        if (!strpbrk(ref, ".e")) memcpy(ref + n, ".0", 3);
        sl_format_double(v, buf);
        if (strcmp(buf, ref) != 0) fprintf(stderr, "  %.17g: %s, not %s\n", v, buf, ref);
        CHECK_STR(buf, ref);
        /* and CSV reads it back exactly (its fast path for short decimals) */
        CHECK_EQ(dec(SL_FMT_CSV, s, buf, 1, &w, err, sizeof err), 0);
        sl_row_t r = sl_rw_row(&w);
        CHECK(sl_row_f64(&r, 0) == v);
    }
    sl_rw_free(&w);
    sl_schema_unref(s);
    for (int k = 0; k < 200000; k++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        uint64_t bits = x ^ (x >> 29);
        double v;
        memcpy(&v, &bits, 8);
        if (isnan(v)) continue;
        size_t n = sl_format_double(v, buf);
        CHECK(n < 32);
        double back = strtod(buf, NULL);
        if (!isinf(v)) CHECK(memcmp(&back, &v, 8) == 0);
    }
}

/* Decodes, expects SL_EFORMAT and exactly `want` as the message. */
static int fails_with(sl_format_t fmt, const sl_schema_t *s, const char *line, int64_t lineno, const char *want) {
    sl_row_writer_t w;
    sl_rw_init(&w);
    char err[512];
    int rc = dec(fmt, s, line, lineno, &w, err, sizeof err);
    sl_rw_free(&w);
    if (rc != SL_EFORMAT || strcmp(err, want) != 0) {
        fprintf(stderr, "  %s line <%s>: rc %d, got  <%s>\n  %*s want <%s>\n", fmt == SL_FMT_CSV ? "CSV" : "JSON", line,
                rc, err, (int)strlen(line) + 14, "", want);
        return 0;
    }
    return 1;
}

/* Same, but only checks that the message starts with `prefix`. */
static int fails_starting(sl_format_t fmt, const sl_schema_t *s, const char *line, size_t len, const char *prefix,
                          const char *also) {
    sl_row_writer_t w;
    sl_rw_init(&w);
    char err[512] = "";
    sl_decoder_t d;
    sl_decoder_init(&d, fmt, s);
    int rc = sl_decode_line(&d, line, len, 9, &w, err, sizeof err);
    sl_decoder_free(&d);
    sl_rw_free(&w);
    if (rc != SL_EFORMAT || strncmp(err, prefix, strlen(prefix)) != 0 || (also && !strstr(err, also))) {
        fprintf(stderr, "  rc %d, message <%s>, want <%s...%s>\n", rc, err, prefix, also ? also : "");
        return 0;
    }
    return 1;
}

TEST(json_errors) {
    sl_schema_t *s = parse("card_id BIGINT NOT NULL, amount DOUBLE NOT NULL, ts TIMESTAMP(3), n INT, ok BOOLEAN, "
                           "name VARCHAR, raw BYTES");
    sl_format_t J = SL_FMT_JSON;
    CHECK(fails_with(J, s, "{\"card_id\": 1, \"amount\": \"abc\"}", 17,
                     "line 17, field 'amount': expected a number, got \"abc\""));
    CHECK(fails_with(J, s, "{\"amount\": 1}", 3, "line 3, field 'card_id': missing, but the field is NOT NULL"));
    CHECK(fails_with(J, s, "{\"card_id\": null, \"amount\": 1}", 3,
                     "line 3, field 'card_id': null, but the field is NOT NULL"));
    CHECK(fails_with(J, s, "{\"card_id\": 1.5, \"amount\": 1}", 4, "line 4, field 'card_id': expected an integer, got 1.5"));
    CHECK(fails_with(J, s, "{\"card_id\": \"7\", \"amount\": 1}", 4,
                     "line 4, field 'card_id': expected an integer, got \"7\""));
    CHECK(fails_with(J, s, "{\"card_id\": 1, \"amount\": [1]}", 5, "line 5, field 'amount': expected a number, got an array"));
    CHECK(fails_with(J, s, "{\"card_id\": 1, \"amount\": 1, \"ts\": \"yesterday\"}", 6,
                     "line 6, field 'ts': expected a timestamp (epoch millis or ISO-8601), got \"yesterday\""));
    CHECK(fails_with(J, s, "{\"card_id\": 1, \"amount\": 1, \"ts\": true}", 6,
                     "line 6, field 'ts': expected a timestamp (epoch millis or ISO-8601), got true"));
    CHECK(fails_with(J, s, "{\"card_id\": 1, \"amount\": 1, \"n\": 2147483648}", 7,
                     "line 7, field 'n': 2147483648 is out of range for INT"));
    CHECK(fails_with(J, s, "{\"card_id\": 1, \"amount\": 1, \"ok\": \"yes\"}", 8,
                     "line 8, field 'ok': expected true or false, got \"yes\""));
    CHECK(fails_with(J, s, "{\"card_id\": 1, \"amount\": 1, \"ok\": 1}", 8, "line 8, field 'ok': expected true or false, got 1"));
    CHECK(fails_with(J, s, "{\"card_id\": 1, \"amount\": 1, \"name\": {}}", 9,
                     "line 9, field 'name': expected a string, got an object"));
    CHECK(fails_with(J, s, "{\"card_id\": 1, \"amount\": 1, \"raw\": \"a!==\"}", 10,
                     "line 10, field 'raw': expected base64 bytes, got \"a!==\""));
    CHECK(fails_with(J, s, "{\"card_id\": 1, \"amount\": 1, \"raw\": \"abcde\"}", 10,
                     "line 10, field 'raw': expected base64 bytes, got \"abcde\""));
    CHECK(fails_with(J, s, "[1, 2]", 11, "line 11: expected a JSON object, got an array"));
    CHECK(fails_with(J, s, "42", 11, "line 11: expected a JSON object, got 42"));
    /* a long, non-printable value is cut and escaped in the message */
    CHECK(fails_with(J, s, "{\"card_id\": \"\\u0001\\t0123456789012345678901234567890123456789\", \"amount\": 1}", 12,
                     "line 12, field 'card_id': expected an integer, got "
                     "\"\\x01\\x0901234567890123456789012345678901234567\"... (42 bytes)"));
    /* syntax errors come from jansson, with the line */
    const char *bad_number = "{\"card_id\": 1x, \"amount\": 1}";
    CHECK(fails_starting(J, s, bad_number, strlen(bad_number), "line 9: invalid JSON: ", NULL));
    const char *bad_escape = "{\"card_id\": 1, \"amount\": 1, \"name\": \"a\\qb\"}";
    CHECK(fails_starting(J, s, bad_escape, strlen(bad_escape), "line 9: invalid JSON: ", "invalid escape"));
    const char *trailing = "{\"card_id\": 1, \"amount\": 1} x";
    CHECK(fails_starting(J, s, trailing, strlen(trailing), "line 9: invalid JSON: ", "end of file expected"));
    const char *two = "{\"card_id\": 1, \"amount\": 1}{}";
    CHECK(fails_starting(J, s, two, strlen(two), "line 9: invalid JSON: ", NULL));
    const char *big = "{\"card_id\": 99999999999999999999, \"amount\": 1}";
    CHECK(fails_starting(J, s, big, strlen(big), "line 9: invalid JSON: ", "too big"));
    const char *dup = "{\"card_id\": 1, \"card_id\": 2, \"amount\": 1}";
    CHECK(fails_starting(J, s, dup, strlen(dup), "line 9: invalid JSON: ", "duplicate"));
    const char bad_utf8[] = "{\"card_id\": 1, \"amount\": 1, \"name\": \"\xc3\x28\"}";
    CHECK(fails_starting(J, s, bad_utf8, sizeof bad_utf8 - 1, "line 9: invalid JSON: ", NULL));
    const char with_nul[] = "{\"card_id\": 1, \"amount\": 1\0}";
    CHECK(fails_starting(J, s, with_nul, sizeof with_nul - 1, "line 9: invalid JSON: ", NULL));
    CHECK(fails_starting(J, s, "", 0, "line 9: invalid JSON: ", NULL));
    CHECK(fails_starting(J, s, "{\"card_id\": 1, \"amount\": 1", 26, "line 9: invalid JSON: ", NULL));
    sl_schema_unref(s);
}

TEST(csv_errors) {
    sl_schema_t *s = parse("card_id BIGINT NOT NULL, amount DOUBLE NOT NULL, ts TIMESTAMP(3), n INT, ok BOOLEAN, "
                           "name VARCHAR, raw BYTES");
    sl_format_t C = SL_FMT_CSV;
    CHECK(fails_with(C, s, "1,abc,,,,,", 17, "line 17, field 'amount': expected a number, got \"abc\""));
    CHECK(fails_with(C, s, "1,1.5x,,,,,", 17, "line 17, field 'amount': expected a number, got \"1.5x\""));
    CHECK(fails_with(C, s, "1,1e999,,,,,", 17, "line 17, field 'amount': \"1e999\" is out of range for DOUBLE"));
    CHECK(fails_with(C, s, "1,0x10,,,,,", 17, "line 17, field 'amount': expected a number, got \"0x10\""));
    CHECK(fails_with(C, s, ",1,,,,,", 2, "line 2, field 'card_id': empty, but the field is NOT NULL"));
    CHECK(fails_with(C, s, "9223372036854775808,1,,,,,", 2,
                     "line 2, field 'card_id': \"9223372036854775808\" is out of range for BIGINT"));
    CHECK(fails_with(C, s, "1,1,,-2147483649,,,", 2, "line 2, field 'n': \"-2147483649\" is out of range for INT"));
    CHECK(fails_with(C, s, "1 2,1,,,,,", 2, "line 2, field 'card_id': expected an integer, got \"1 2\""));
    CHECK(fails_with(C, s, "-,1,,,,,", 2, "line 2, field 'card_id': expected an integer, got \"-\""));
    CHECK(fails_with(C, s, "\"\",1,,,,,", 2, "line 2, field 'card_id': expected an integer, got \"\""));
    CHECK(fails_with(C, s, "1,1,2026-13-01,,,,", 3,
                     "line 3, field 'ts': expected a timestamp (epoch millis or ISO-8601), got \"2026-13-01\""));
    CHECK(fails_with(C, s, "1,1,,,yes,,", 4, "line 4, field 'ok': expected true or false, got \"yes\""));
    CHECK(fails_with(C, s, "1,1,,,,,abc", 5, "line 5, field 'raw': expected hex bytes, got \"abc\""));
    CHECK(fails_with(C, s, "1,1,,,,,zz", 5, "line 5, field 'raw': expected hex bytes, got \"zz\""));
    CHECK(fails_with(C, s, "1,1,,,,", 6, "line 6, field 'raw': missing (the record has 6 of 7 fields)"));
    CHECK(fails_with(C, s, "1,1", 6, "line 6, field 'ts': missing (the record has 2 of 7 fields)"));
    CHECK(fails_with(C, s, "1,1,,,,,,", 7, "line 7: too many fields (the schema has 7)"));
    CHECK(fails_with(C, s, "1,1,,,,\"abc,", 8, "line 8, field 'name': unterminated quoted field"));
    CHECK(fails_with(C, s, "1,1,,,,\"abc\"d,", 8, "line 8, field 'name': unexpected character after a closing quote"));
    CHECK(fails_with(C, s, "1,1,,,,ab\"c,", 8,
                     "line 8, field 'name': '\"' inside an unquoted field (quote the whole field)"));
    const char with_nul[] = "1,2\0003,,,,,";
    CHECK(fails_starting(C, s, with_nul, sizeof with_nul - 1, "line 9, field 'amount': expected a number, got \"2\\x003\"",
                         NULL));
    sl_schema_unref(s);
}

TEST(csv_framing_and_header) {
    CHECK(!sl_csv_record_open("a,b,c", 5, false));
    CHECK(sl_csv_record_open("a,\"b\n", 5, false));
    CHECK(!sl_csv_record_open("a,\"b\"\"\",c\n", 10, false));
    CHECK(sl_csv_record_open("a,\"b\"\"\n", 7, false));
    CHECK(!sl_csv_record_open("a,b\"c\n", 6, false)); /* a stray quote does not open a field */
    CHECK(sl_csv_record_open("more text\n", 10, true));
    CHECK(!sl_csv_record_open("end\",x\n", 7, true));
    CHECK(sl_csv_record_open("end\",\"x\n", 8, true));

    sl_schema_t *s = parse("card_id BIGINT, amount DOUBLE, ts TIMESTAMP(3)");
    CHECK(sl_csv_is_header(s, "card_id,amount,ts", 17));
    CHECK(sl_csv_is_header(s, "CARD_ID,\"amount\", ts", 20));
    CHECK(!sl_csv_is_header(s, "card_id,amount", 14));
    CHECK(!sl_csv_is_header(s, "card_id,amount,ts,x", 19));
    CHECK(!sl_csv_is_header(s, "1,2.5,3", 7));
    CHECK(!sl_csv_is_header(s, "card_id,amount,t", 16));
    CHECK(!sl_csv_is_header(s, "", 0));

    /* a record with a multi-line quoted field decodes in one piece */
    sl_schema_t *s2 = parse("id INT, note VARCHAR");
    sl_row_writer_t w;
    sl_rw_init(&w);
    char err[256];
    CHECK_EQ(dec(SL_FMT_CSV, s2, "1,\"line one\r\nline \"\"two\"\"\"", 1, &w, err, sizeof err), 0);
    sl_row_t r = sl_rw_row(&w);
    uint32_t len;
    const char *note = sl_row_str(&r, 1, &len);
    CHECK(len == 20 && memcmp(note, "line one\r\nline \"two\"", 20) == 0);
    CHECK_STR(enc(SL_FMT_CSV, &w), "1,\"line one\r\nline \"\"two\"\"\"");
    /* values that need quoting, and ones that don't */
    sl_rw_begin(&w, s2);
    sl_rw_set_null(&w, 0);
    sl_rw_set_str(&w, 1, "a,b", 3);
    CHECK_STR(enc(SL_FMT_CSV, &w), ",\"a,b\"");
    sl_rw_set_str(&w, 1, "\"", 1);
    CHECK_STR(enc(SL_FMT_CSV, &w), ",\"\"\"\"");
    sl_rw_set_str(&w, 1, "plain text; 'ok'", 16);
    CHECK_STR(enc(SL_FMT_CSV, &w), ",plain text; 'ok'");
    sl_rw_set_null(&w, 1);
    CHECK_STR(enc(SL_FMT_CSV, &w), ",");
    sl_rw_free(&w);
    sl_schema_unref(s);
    sl_schema_unref(s2);
}

/* ---- random rows ------------------------------------------------------- */

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Random valid UTF-8 (json) or arbitrary bytes. */
static size_t random_text(char *p, size_t max, bool utf8) {
    size_t n = rnd() % (max / 4 + 1), o = 0;
    static const char specials[] = "\",\\\n\r\t \x01\x7f{}[]:";
    for (size_t k = 0; k < n; k++) {
        unsigned kind = (unsigned)(rnd() % 6);
        uint32_t cp;
        if (!utf8) {
            p[o++] = kind < 2 ? specials[rnd() % (sizeof specials - 1)] : (char)rnd();
            continue;
        }
        if (kind < 2) cp = (uint32_t)specials[rnd() % (sizeof specials - 1)];
        else if (kind == 2) cp = (uint32_t)(rnd() % 0x80);
        else if (kind == 3) cp = 0x80 + (uint32_t)(rnd() % 0x780);
        else if (kind == 4) do cp = 0x800 + (uint32_t)(rnd() % 0xf800); while (cp >= 0xd800 && cp <= 0xdfff);
        else cp = 0x10000 + (uint32_t)(rnd() % 0x100000);
        if (cp < 0x80) p[o++] = (char)cp;
        else if (cp < 0x800) p[o++] = (char)(0xc0 | cp >> 6), p[o++] = (char)(0x80 | (cp & 63));
        else if (cp < 0x10000)
            p[o++] = (char)(0xe0 | cp >> 12), p[o++] = (char)(0x80 | ((cp >> 6) & 63)), p[o++] = (char)(0x80 | (cp & 63));
        else
            p[o++] = (char)(0xf0 | cp >> 18), p[o++] = (char)(0x80 | ((cp >> 12) & 63)),
            p[o++] = (char)(0x80 | ((cp >> 6) & 63)), p[o++] = (char)(0x80 | (cp & 63));
    }
    return o;
}

static void random_row(sl_row_writer_t *w, const sl_schema_t *s, bool utf8) {
    char text[256];
    sl_rw_begin(w, s);
    for (int i = 0; i < sl_schema_field_count(s); i++) {
        if (sl_schema_field_nullable(s, i) && rnd() % 5 == 0) {
            sl_rw_set_null(w, i);
            continue;
        }
        uint64_t x = rnd();
        switch (sl_schema_field_type(s, i)) {
        case SL_BIGINT: sl_rw_set_i64(w, i, rnd() % 3 ? (int64_t)x : (int64_t)(x % 2000) - 1000); break;
        case SL_INT: sl_rw_set_i32(w, i, (int32_t)x); break;
        case SL_DOUBLE: {
            double d;
            if (x % 4 == 0) {
                memcpy(&d, &x, 8);
                if (isnan(d)) d = NAN; /* payloads do not survive text; the canonical NaN does */
            } else {
                d = (double)(int64_t)(x % 100000) / 100.0;
            }
            sl_rw_set_f64(w, i, d);
            break;
        }
        case SL_BOOLEAN: sl_rw_set_bool(w, i, x & 1); break;
        case SL_VARCHAR: sl_rw_set_str(w, i, text, (uint32_t)random_text(text, sizeof text, utf8)); break;
        case SL_BYTES: {
            size_t n = x % 40;
            for (size_t k = 0; k < n; k++) text[k] = (char)rnd();
            sl_rw_set_bytes(w, i, text, (uint32_t)n);
            break;
        }
        case SL_TIMESTAMP: sl_rw_set_i64(w, i, x % 3 ? (int64_t)(x % 400000000000000ULL) - 70000000000000LL : (int64_t)x); break;
        }
    }
}

/* Field-by-field equality (doubles bitwise, NaN == NaN). */
static bool rows_equal(const sl_row_t *a, const sl_row_t *b) {
    const sl_schema_t *s = a->schema;
    for (int i = 0; i < sl_schema_field_count(s); i++) {
        if (sl_row_is_null(a, i) != sl_row_is_null(b, i)) return false;
        if (sl_row_is_null(a, i)) continue;
        uint32_t la, lb;
        switch (sl_schema_field_type(s, i)) {
        case SL_DOUBLE: {
            double x = sl_row_f64(a, i), y = sl_row_f64(b, i);
            if (!(isnan(x) && isnan(y)) && memcmp(&x, &y, 8) != 0) return false;
            break;
        }
        case SL_VARCHAR:
        case SL_BYTES: {
            const uint8_t *pa = sl_row_bytes(a, i, &la), *pb = sl_row_bytes(b, i, &lb);
            if (la != lb || memcmp(pa, pb, la) != 0) return false;
            break;
        }
        default: {
            const uint8_t *pa = sl_row_field_key(a, i, &la), *pb = sl_row_field_key(b, i, &lb);
            if (la != lb || memcmp(pa, pb, la) != 0) return false;
        }
        }
    }
    return true;
}

TEST(random_round_trip) {
    sl_schema_t *schemas[] = {parse(ALL_DDL), parse("a VARCHAR NOT NULL, b BYTES NOT NULL, c DOUBLE NOT NULL"),
                              parse("only VARCHAR")};
    for (size_t si = 0; si < SL_ARRAY_LEN(schemas); si++) {
        for (int fmt = 0; fmt < 2; fmt++) {
            sl_decoder_t d;
            sl_decoder_init(&d, (sl_format_t)fmt, schemas[si]);
            sl_row_writer_t w, back;
            sl_rw_init(&w);
            sl_rw_init(&back);
            sl_buf_t line = {0};
            char err[512];
            for (int k = 0; k < 20000; k++) {
                random_row(&w, schemas[si], fmt == SL_FMT_JSON);
                sl_row_t r = sl_rw_row(&w);
                line.len = 0;
                sl_encode_row((sl_format_t)fmt, &r, &line);
                int rc = sl_decode_line(&d, (const char *)line.p, line.len, k + 1, &back, err, sizeof err);
                if (rc) fprintf(stderr, "  %s: <%.*s>\n", err, (int)line.len, (const char *)line.p);
                CHECK_EQ(rc, 0);
                sl_row_t b = sl_rw_row(&back);
                CHECK_EQ(sl_row_validate(&b), 0);
                if (!rows_equal(&r, &b)) fprintf(stderr, "  differs: <%.*s>\n", (int)line.len, (const char *)line.p);
                CHECK(rows_equal(&r, &b));
                /* and the text is stable */
                size_t l1 = line.len;
                sl_encode_row((sl_format_t)fmt, &b, &line);
                CHECK(line.len == 2 * l1 && memcmp(line.p, line.p + l1, l1) == 0);
            }
            sl_buf_free(&line);
            sl_rw_free(&w);
            sl_rw_free(&back);
            sl_decoder_free(&d);
        }
        sl_schema_unref(schemas[si]);
    }
}

TEST(json_invalid_utf8_in_rows_is_replaced) {
    sl_schema_t *s = parse("s VARCHAR");
    sl_row_writer_t w;
    sl_rw_init(&w);
    sl_rw_begin(&w, s);
    sl_rw_set_str(&w, 0, "a\xff\xc3(\xed\xa0\x80z", 8);
    CHECK_STR(enc(SL_FMT_JSON, &w), "{\"s\":\"a\\ufffd\\ufffd(\\ufffd\\ufffd\\ufffdz\"}");
    sl_rw_free(&w);
    sl_schema_unref(s);
}

/* ---- garbage ----------------------------------------------------------- */

/* Decodes a line that may be anything: it must either fail with a message
 * naming the line, or give a row that validates and re-encodes. */
static int check_garbage(sl_decoder_t *d, const char *p, size_t n, sl_row_writer_t *w, int64_t *ok) {
    char err[512] = "";
    int rc = sl_decode_line(d, p, n, 5, w, err, sizeof err);
    if (rc == 0) {
        sl_row_t r = sl_rw_row(w);
        if (sl_row_validate(&r) != 0) return 0;
        sl_buf_t b = {0};
        sl_encode_row(d->fmt, &r, &b);
        sl_buf_free(&b);
        (*ok)++;
        return 1;
    }
    if (rc != SL_EFORMAT || strncmp(err, "line 5", 6) != 0) {
        fprintf(stderr, "  rc %d <%s>\n", rc, err);
        return 0;
    }
    return 1;
}

TEST(garbage_never_crashes) {
    sl_schema_t *s = parse(ALL_DDL);
    const char *seeds[2][3] = {
        {"{\"b\":1,\"i\":2,\"d\":3.5,\"f\":true,\"s\":\"x\\\"y\",\"y\":\"AAE=\",\"t\":\"2026-12-01T10:00:00Z\",\"s2\":\"z\"}",
         "{\"b\":-5,\"s2\":\"\"}", "{\"b\":0,\"d\":\"NaN\",\"t\":17,\"s2\":\"\\u00e9\"}"},
        {"1,2,3.5,true,\"x,\"\"y\",0001,2026-12-01T10:00:00Z,z", "-5,,,,,,,\"\"", "0,,NaN,,,ff,17,é"}};
    int64_t ok[2] = {0, 0};
    char *buf = malloc(1 << 16);
    for (int fmt = 0; fmt < 2; fmt++) {
        sl_decoder_t d;
        sl_decoder_init(&d, (sl_format_t)fmt, s);
        sl_row_writer_t w;
        sl_rw_init(&w);
        for (int k = 0; k < 10000; k++) {
            size_t n;
            unsigned kind = (unsigned)(rnd() % 4);
            if (kind == 0) { /* random bytes */
                n = rnd() % 200;
                for (size_t j = 0; j < n; j++) buf[j] = (char)rnd();
            } else { /* a mutated valid line */
                const char *seed = seeds[fmt][rnd() % 3];
                n = strlen(seed);
                memcpy(buf, seed, n);
                int edits = 1 + (int)(rnd() % 4);
                for (int e = 0; e < edits && n > 0; e++) {
                    size_t at = rnd() % n;
                    switch (rnd() % 4) {
                    case 0: buf[at] = (char)rnd(); break;                        /* flip */
                    case 1: n = at; break;                                       /* truncate */
                    case 2: memmove(buf + at, buf + at + 1, n - at - 1), n--; break; /* delete */
                    default:                                                     /* insert a special */
                        memmove(buf + at + 1, buf + at, n - at);
                        buf[at] = "\",\\{}:\0\n\xff"[rnd() % 9];
                        n++;
                    }
                }
            }
            CHECK(check_garbage(&d, buf, n, &w, &ok[fmt]));
        }
        /* a very long line of each kind */
        size_t big = 8u << 20;
        char *huge = malloc(big + 64);
        memset(huge, '9', big + 64);
        if (fmt == SL_FMT_JSON) memcpy(huge, "{\"s2\":\"x\",\"b\":", 15); /* a too big number */
        CHECK(check_garbage(&d, huge, big, &w, &ok[fmt]));
        memset(huge, '[', big);
        CHECK(check_garbage(&d, huge, big, &w, &ok[fmt]));
        memset(huge, '"', big);
        CHECK(check_garbage(&d, huge, big, &w, &ok[fmt]));
        /* a huge string value decodes */
        memset(huge, 'a', big);
        if (fmt == SL_FMT_JSON) {
            memcpy(huge, "{\"b\":1,\"s2\":\"", 13);
            memcpy(huge + big - 2, "\"}", 2);
        } else {
            memcpy(huge, "1,,,,,,,", 8);
        }
        int64_t before = ok[fmt];
        CHECK(check_garbage(&d, huge, big, &w, &ok[fmt]));
        CHECK_EQ(ok[fmt], before + 1);
        free(huge);
        sl_rw_free(&w);
        sl_decoder_free(&d);
    }
    fprintf(stderr, "  garbage: %" PRId64 " JSON and %" PRId64 " CSV lines decoded, the rest rejected\n", ok[0], ok[1]);
    free(buf);
    sl_schema_unref(s);
}

TEST(speed) {
    sl_schema_t *s = parse("card_id BIGINT NOT NULL, amount DOUBLE NOT NULL, ts TIMESTAMP(3) NOT NULL");
    const char *lines[2] = {"{\"card_id\":1234,\"amount\":56.78,\"ts\":\"2026-01-01T00:00:01.234Z\"}",
                            "1234,56.78,2026-01-01T00:00:01.234Z"};
    for (int fmt = 0; fmt < 2; fmt++) {
        sl_decoder_t d;
        sl_decoder_init(&d, (sl_format_t)fmt, s);
        sl_row_writer_t w;
        sl_rw_init(&w);
        char err[256];
        sl_buf_t out = {0};
        int n = 200000;
        int64_t t0 = sl_mono_ns();
        for (int k = 0; k < n; k++) CHECK_EQ(sl_decode_line(&d, lines[fmt], strlen(lines[fmt]), k, &w, err, sizeof err), 0);
        int64_t t1 = sl_mono_ns();
        sl_row_t r = sl_rw_row(&w);
        for (int k = 0; k < n; k++) {
            out.len = 0;
            sl_encode_row((sl_format_t)fmt, &r, &out);
        }
        int64_t t2 = sl_mono_ns();
        fprintf(stderr, "  %s: decode %.0f ns/line, encode %.0f ns/line\n", fmt ? "CSV" : "JSON",
                (double)(t1 - t0) / n, (double)(t2 - t1) / n);
        sl_buf_free(&out);
        sl_rw_free(&w);
        sl_decoder_free(&d);
    }
    sl_schema_unref(s);
}

int main(void) {
    RUN(json_every_type);
    RUN(csv_every_type);
    RUN(timestamps);
    RUN(doubles_shortest_and_exact);
    RUN(json_errors);
    RUN(csv_errors);
    RUN(csv_framing_and_header);
    RUN(random_round_trip);
    RUN(json_invalid_utf8_in_rows_is_replaced);
    RUN(garbage_never_crashes);
    RUN(speed);
    TEST_MAIN_END();
}
