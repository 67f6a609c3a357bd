/*
 * test_postgres_async.c — the async enrichment example
 * (examples/async_enrich_pg.c) against a real PostgreSQL server (the ctest
 * fixture `postgres`, scripts/postgres.sh): S1 transactions from
 * sl_datagen_source, each enriched with its card's holder and country
 * through libpq's asynchronous API on the example's connection pool.
 *
 * Reference, computed independently: the raw transactions of the same
 * generator (a job without enrichment) and the table's contents as the
 * example's functions define them.  The enrichment job runs with
 * checkpoints, fails on purpose after a checkpoint completed, and is
 * restored at another parallelism; its committed output (txn_collect_sink)
 * must be exactly the reference: every transaction once, with the holder
 * and country of its card (NULL for an unknown card).
 */
#define ASYNC_ENRICH_PG_NO_MAIN
#include "async_enrich_pg.c"

#include <stdatomic.h>

#include "pipeline_util.h"
#include "test.h"
#include "test_postgres_util.h"

#define COUNT 3000
#define SPLITS 4

static sl_datagen_opts_t gen_opts(void) {
    sl_datagen_opts_t o = sl_datagen_defaults();
    o.seed = 42;
    o.count = COUNT;
    o.cards = ENRICH_CARDS;
    o.splits = SPLITS;
    o.rate = 4000; /* about 0.75 s: checkpoints complete while it runs */
    return o;
}

typedef struct txn3 {
    int64_t card, ts;
    double amount;
} txn3_t;

static int cmp_txn(const void *a, const void *b) {
    const txn3_t *x = a, *y = b;
    if (x->card != y->card) return x->card < y->card ? -1 : 1;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    return x->amount < y->amount ? -1 : x->amount > y->amount;
}

/* The failure: a map after the enrichment fails once, after N records and
 * a completed checkpoint. */
static atomic_int failed;
static atomic_llong passed;
static txn_collected_t *txn;
static int fail_armed;

static int64_t commits(void) {
    pthread_mutex_lock(&txn->mu);
    int64_t c = txn->commits;
    pthread_mutex_unlock(&txn->mu);
    return c;
}

static int fail_map(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    if (fail_armed && atomic_fetch_add(&passed, 1) >= COUNT / 3 && commits() >= 1 && !atomic_exchange(&failed, 1))
        return SL_EUSER;
    for (int i = 0; i < 5; i++) {
        if (sl_row_is_null(&in->row, i)) {
            sl_rw_set_null(out, i);
            continue;
        }
        if (i < 3) {
            if (i == 1)
                sl_rw_set_f64(out, i, sl_row_f64(&in->row, i));
            else
                sl_rw_set_i64(out, i, sl_row_i64(&in->row, i));
        } else {
            uint32_t n;
            const char *s = sl_row_str(&in->row, i, &n);
            sl_rw_set_str(out, i, s, n);
        }
    }
    return 0;
}

static int run_enrich(const char *conninfo, int p, const char *ck, bool restore, bool fail) {
    char err[512];
    pg_lookup_t *pl = pg_lookup_new(conninfo, 3, err, sizeof err);
    if (!pl) {
        fprintf(stderr, "  %s\n", err);
        return -100;
    }
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, p);
    sl_env_enable_checkpointing(env, 30, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, ck);
    sl_env_set_checkpoint_retention(env, SL_CHECKPOINTS_RETAIN_ON_CANCELLATION);
    sl_env_set_restart_none(env);
    char path[1100];
    snprintf(path, sizeof path, "%s/enrich", ck);
    if (restore && sl_env_restore_from(env, path) < 0) {
        fprintf(stderr, "  restore: %s\n", sl_env_error(env));
        sl_env_destroy(env);
        pg_lookup_destroy(pl);
        return -100;
    }
    fail_armed = fail;
    sl_stream_t *s = sl_uid(sl_from_source(env, sl_datagen_source(gen_opts()), sl_wm_bounded("ts", 100), "txns"),
                            "txns");
    s = enrich_with_cards(s, pl, 8, 10000);
    s = sl_uid(sl_map(s, fail_map, NULL, sl_schema_parse(ENRICH_OUT_DDL, NULL, 0)), "fail");
    sl_uid(sl_sink_to(s, txn_collect_sink(txn), "out"), "out");
    int rc = sl_env_execute(env, "enrich");
    if (rc < 0 && !fail) fprintf(stderr, "  job failed: %s\n", sl_env_error(env));
    sl_env_destroy(env);
    pg_lookup_destroy(pl);
    return rc;
}

TEST(enrich_with_failure_and_rescale) {
    const char *conninfo = pgt_conninfo();
    char err[512];
    CHECK(enrich_setup_cards(conninfo, ENRICH_CARDS, err, sizeof err) == 0);
    PGconn *pc = pgt_connect(); /* the table is what the example says it is */
    CHECK(pgt_exec(pc, "ANALYZE cards"));
    int known = 0;
    for (int64_t card = 0; card < ENRICH_CARDS; card++) known += enrich_card_known(card);
    CHECK_EQ(pgt_scalar(pc, "SELECT count(*) FROM cards"), known);
    PQfinish(pc);

    /* reference: the raw transactions of the same generator */
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 2);
    collected_t *raw = collected_new();
    sl_datagen_opts_t o = gen_opts();
    o.rate = 0;
    sl_sink_to(sl_from_source(env, sl_datagen_source(o), sl_wm_none(), "txns"), collect_sink(raw), "raw");
    CHECK_EQ(sl_env_execute(env, "raw"), 0);
    sl_env_destroy(env);
    CHECK_EQ(raw->n, COUNT);
    sl_schema_t *in_s = sl_datagen_schema();
    txn3_t *ref = calloc(COUNT, sizeof *ref);
    for (int64_t i = 0; i < raw->n; i++) {
        sl_row_t r = collected_row(raw, i, in_s);
        ref[i] = (txn3_t){sl_row_i64(&r, 0), sl_row_i64(&r, 2), sl_row_f64(&r, 1)};
    }
    sl_schema_unref(in_s);
    collected_free(raw);
    qsort(ref, COUNT, sizeof *ref, cmp_txn);

    int pairs[][2] = {{1, 3}, {3, 2}};
    for (int c = 0; c < 2; c++) {
        char ck[1024], cmd[1100];
        snprintf(ck, sizeof ck, "%s/pg-async-ckpt-%d", sl_test_tmpdir(), c);
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", ck);
        CHECK(system(cmd) == 0);
        txn = txn_collected_new();
        atomic_store(&failed, 0);
        atomic_store(&passed, 0);
        int rc1 = run_enrich(conninfo, pairs[c][0], ck, false, true);
        int rc2 = run_enrich(conninfo, pairs[c][1], ck, true, false);
        fprintf(stderr, "  p %d -> %d: run1 %d, run2 %d, committed %lld\n", pairs[c][0], pairs[c][1], rc1, rc2,
                (long long)txn->out->n);
        CHECK(rc1 < 0);
        CHECK_EQ(rc2, 0);
        collected_t *out = txn->out;
        CHECK_EQ(out->n, COUNT);
        sl_schema_t *os = sl_schema_parse(ENRICH_OUT_DDL, NULL, 0);
        txn3_t *got = calloc(COUNT, sizeof *got);
        int64_t bad = 0;
        for (int64_t i = 0; i < out->n; i++) {
            sl_row_t r = collected_row(out, i, os);
            int64_t card = sl_row_i64(&r, 0);
            got[i] = (txn3_t){card, sl_row_i64(&r, 2), sl_row_f64(&r, 1)};
            if (enrich_card_known(card)) {
                char holder[64];
                enrich_card_holder(card, holder, sizeof holder);
                uint32_t hl, cl;
                const char *h = sl_row_is_null(&r, 3) ? NULL : sl_row_str(&r, 3, &hl);
                const char *co = sl_row_is_null(&r, 4) ? NULL : sl_row_str(&r, 4, &cl);
                if (!h || hl != strlen(holder) || memcmp(h, holder, hl) != 0) bad++;
                if (!co || cl != strlen(enrich_card_country(card)) || memcmp(co, enrich_card_country(card), cl) != 0)
                    bad++;
            } else if (!sl_row_is_null(&r, 3) || !sl_row_is_null(&r, 4)) {
                bad++;
            }
        }
        sl_schema_unref(os);
        qsort(got, COUNT, sizeof *got, cmp_txn);
        int64_t diff = 0;
        for (int i = 0; i < COUNT; i++) diff += cmp_txn(&got[i], &ref[i]) != 0;
        free(got);
        txn_collected_free(txn);
        txn = NULL;
        CHECK_EQ(bad, 0);
        CHECK_EQ(diff, 0);
    }
    free(ref);
}

int main(void) {
    RUN(enrich_with_failure_and_rescale);
    TEST_MAIN_END();
}
