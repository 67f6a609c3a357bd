/*
 * test_schema_builders.c — a schema parsed inline as a builder's argument
 * (sl_map(s, fn, ctx, sl_schema_parse("id BIGNT", NULL, 0))) whose DDL is
 * bad: the environment's error is the parser's message (unknown type, its
 * column and a suggestion), never "no output schema given", and never does
 * the operator silently take its input's schema.  For random typos and
 * every builder that takes an output schema (and a file source given one),
 * the env error must equal the message the same DDL gives with an err
 * buffer, prefixed by the operator.
 */
#include "sluice/sluice.h"
#include "test.h"

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static int rnd(uint64_t *s, int n) { return (int)(rng_next(s) % (uint64_t)n); }

static int map_fn(void *ctx, const sl_record_t *in, sl_row_writer_t *out) { return 0; }
static int fm_fn(void *ctx, const sl_record_t *in, sl_collector_t *out) { return 0; }
static void cs_init(void *ctx, void *acc) {}
static int cs_add(void *ctx, void *acc, const sl_record_t *in) { return 0; }
static int cs_result(void *ctx, const void *acc, const uint8_t *key, uint32_t keylen, const sl_window_t *w,
                     sl_row_writer_t *out) {
    return 0;
}
static int wp_fn(void *ctx, const uint8_t *key, uint32_t keylen, const sl_window_t *win,
                 const sl_window_elements_t *elems, sl_collector_t *out) {
    return 0;
}

static int kp_fn(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) { return 0; }

TEST(inline_bad_schema_reaches_env_error) {
    static const char *types[] = {"BIGINT", "DOUBLE", "VARCHAR", "BOOLEAN", "TIMESTAMP(3)", "INT"};
    uint64_t r = 0xb11d;
    for (int c = 0; c < 200; c++) {
        /* a DDL of 1-3 fields, one of them with a one-letter typo in its type */
        char ddl[256] = "";
        size_t o = 0;
        int n = 1 + rnd(&r, 3), bad = rnd(&r, n);
        for (int i = 0; i < n; i++) {
            char ty[32];
            snprintf(ty, sizeof ty, "%s", types[rnd(&r, 6)]);
            if (i == bad) {
                size_t len = strcspn(ty, "(");
                ty[rnd(&r, (int)len)] = "XQZJ"[rnd(&r, 4)];
            }
            o += (size_t)snprintf(ddl + o, sizeof ddl - o, "%sf%d %s", i ? ", " : "", i, ty);
        }
        char expect[512];
        sl_schema_t *check = sl_schema_parse(ddl, expect, sizeof expect);
        if (check) { /* the typo made another valid type (not with these letters, but be safe) */
            sl_schema_unref(check);
            continue;
        }
        sl_env_t *env = sl_env_new();
        sl_stream_t *src = sl_from_source(env, sl_datagen_source(sl_datagen_defaults()), sl_wm_bounded("ts", 0), "g");
        int which = rnd(&r, 6);
        const char *op = NULL;
        sl_stream_t *out = NULL;
        switch (which) {
        case 0:
            out = sl_map(src, map_fn, NULL, sl_schema_parse(ddl, NULL, 0));
            op = "Map";
            break;
        case 1:
            out = sl_flat_map(src, fm_fn, NULL, sl_schema_parse(ddl, NULL, 0));
            op = "FlatMap";
            break;
        case 2: {
            sl_windowed_t *w = sl_window(sl_key_by(src, "card_id"), sl_tumbling_event_time(1000, 0));
            sl_aggregate_fn_t fn = {.acc_size = 8, .init = cs_init, .add = cs_add, .result = cs_result};
            out = sl_window_aggregate(w, fn, sl_schema_parse(ddl, NULL, 0));
            op = "window aggregate";
            break;
        }
        case 3: {
            sl_windowed_t *w = sl_window(sl_key_by(src, "card_id"), sl_tumbling_event_time(1000, 0));
            out = sl_window_process(w, wp_fn, NULL, sl_schema_parse(ddl, NULL, 0));
            op = "window process";
            break;
        }
        case 5: {
            sl_source_t fs = sl_file_source("/nonexistent.jsonl", SL_FMT_JSON, sl_schema_parse(ddl, NULL, 0),
                                            SL_ON_ERROR_FAIL);
            out = sl_from_source(env, fs, sl_wm_bounded("f0", 0), "txns");
            op = "source 'txns'";
            break;
        }
        default: {
            sl_process_fn_t fn = {.process = kp_fn};
            out = sl_keyed_process(sl_key_by(src, "card_id"), fn, sl_schema_parse(ddl, NULL, 0));
            op = "KeyedProcess";
            break;
        }
        }
        CHECK(out == NULL);
        const char *e = sl_env_error(env);
        if (!strstr(e, expect)) fprintf(stderr, "case %d (%d): \"%s\": env error \"%s\"\n", c, which, ddl, e);
        if (op) {
            char full[600];
            snprintf(full, sizeof full, "%s: %s", op, expect);
            CHECK_STR(e, full);
        }
        CHECK(!strstr(e, "no output schema given"));
        CHECK(sl_env_execute(env, "bad-schema") < 0);
        sl_env_destroy(env);
    }
}

int main(void) {
    RUN(inline_bad_schema_reaches_env_error);
    TEST_MAIN_END();
}
