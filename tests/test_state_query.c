/*
 * test_state_query.c — looking up a running embedded job's keyed state by
 * key (sl_env_query_state, sluice/state_query.h) against a reference.
 *
 * The job (tests/tools/sq_counter_job.h) feeds N deterministic records into
 * three keyed process functions at parallelism 2 and then idles, so its
 * state stops changing and is known: the test computes, from the same
 * record formula and with plain arrays, what each key must hold (count,
 * sum, the list of amounts, the parity map; the pair and amount counts).
 * It waits until every card's count answers its reference, then queries
 * random keys of every operator — all states, one state, a VARCHAR key
 * with spaces, '/', '&' and UTF-8, a composite key as a JSON array, a
 * BIGINT key, a state with TTL (live: without its timestamp; expired:
 * absent) — and compares each answer, parsed with jansson, with the
 * expected JSON built here (state, kind, key group computed from the key
 * bytes encoded here, key, namespace, value bytes as hex).  Then the
 * refusals, each with its status and a message naming what: a key with no
 * value (404), keys that do not parse as the key's type (400), an unknown
 * uid, a non-keyed operator and an unknown state (404, listing what is
 * there), a subtask busy in its function (504 naming it, while the
 * other subtask answers; its late answer dropped), and a query after
 * the job ended (409).  On the heap backend and
 * on RocksDB.  Queries run on the test's thread while the job runs on
 * another (the TSan build runs this test too).
 */
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>

#include "jobmanager/state_query.h"
#include "sluice/state_query.h"
#include "state_query_ref.h"
#include "test.h"

/* ---- querying ---- */

typedef struct answer {
    int rc, http;
    json_t *j;
    char *text;
} answer_t;

static answer_t query(sl_env_t *env, const char *uid, const char *state, const char *key, const char *ns) {
    answer_t a = {0};
    a.rc = sl_env_query_state(env, uid, state, key, ns, 10000, &a.text, &a.http);
    a.j = json_loads(a.text, 0, NULL);
    return a;
}

static void answer_free(answer_t *a) {
    json_decref(a->j);
    free(a->text);
}

static bool entries_equal(const answer_t *a, json_t *want) {
    json_t *got = a->j ? json_object_get(a->j, "entries") : NULL;
    bool same = a->rc == 0 && a->http == 200 && got && json_equal(got, want);
    if (!same) {
        char *w = json_dumps(want, JSON_COMPACT);
        fprintf(stderr, "  rc %d http %d\n  got:  %s\n  want: %s\n", a->rc, a->http, a->text, w);
        free(w);
    }
    json_decref(want);
    return same;
}

static const char *error_text(const answer_t *a) {
    json_t *e = a->j ? json_array_get(json_object_get(a->j, "errors"), 0) : NULL;
    return e ? json_string_value(e) : "(no error)";
}

/* Queries from several threads at once: each asks random cards for every
 * state and counts the answers that differ from the reference. */
typedef struct par_q {
    sl_env_t *env;
    uint64_t seed;
    int bad;
} par_q_t;

static void *par_main(void *arg) {
    par_q_t *p = arg;
    for (int i = 0; i < 30; i++) {
        p->seed ^= p->seed << 13;
        p->seed ^= p->seed >> 7;
        p->seed ^= p->seed << 17;
        const ref_card_t *r = &g_cards[p->seed % (uint64_t)g_ncards];
        answer_t a = query(p->env, "counter", NULL, r->card, NULL);
        json_t *want = card_all(r);
        json_t *got = a.j ? json_object_get(a.j, "entries") : NULL;
        p->bad += !(a.rc == 0 && got && json_equal(got, want));
        json_decref(want);
        answer_free(&a);
    }
    return NULL;
}

typedef struct run {
    sl_env_t *env;
    int rc;
} run_t;

static void *run_main(void *arg) {
    run_t *r = arg;
    r->rc = sl_env_execute(r->env, "state-query");
    return NULL;
}

/* Until every card's count answers its reference (the source has emitted
 * everything and the functions processed it). */
static bool wait_settled(sl_env_t *env) {
    for (int tries = 0; tries < 400; tries++) {
        int ok = 0;
        for (int i = 0; i < g_ncards; i++) {
            answer_t a = query(env, "counter", "count", g_cards[i].card, NULL);
            json_t *v = a.j ? json_object_get(json_array_get(json_object_get(a.j, "entries"), 0), "value") : NULL;
            json_t *want = i64_json(g_cards[i].count);
            ok += v && json_equal(v, want);
            json_decref(want);
            answer_free(&a);
        }
        if (ok == g_ncards) return true;
        struct timespec ts = {0, 50 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return false;
}

static void run_backend(sl_state_backend_kind_t backend) {
    build_reference();
    sl_env_t *env = sl_env_new();
    sl_env_set_max_parallelism(env, MAXP);
    if (backend == SL_STATE_BACKEND_ROCKSDB) {
        char rdb[700];
        snprintf(rdb, sizeof rdb, "%s/rocksdb-sq", sl_test_tmpdir());
        sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);
        sl_env_set_rocksdb_options(env, rdb, 4 << 20, 4 << 20);
    }
    static atomic_int gate, hold;
    atomic_store(&gate, 0);
    atomic_store(&hold, 1);
    sqj_build_gated(env, N, NCARDS, 2, &gate, &hold);
    /* before the job runs: no job to ask */
    answer_t a = query(env, "counter", NULL, "card-1", NULL);
    CHECK_EQ(a.rc, SL_ESTATE);
    CHECK_EQ(a.http, 409);
    CHECK_CONTAINS(error_text(&a), "no job is running");
    answer_free(&a);
    run_t run = {env, 0};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, run_main, &run) == 0);
    /* before any record: both subtasks answer (no value yet), and a query
     * leaves a backend that never had a key as it was */
    int fresh = 0;
    for (int tries = 0; tries < 400 && fresh < g_ncards; tries++) {
        fresh = 0;
        for (int i = 0; i < g_ncards; i++) {
            a = query(env, "counter", NULL, g_cards[i].card, NULL);
            fresh += a.http == 404 && strstr(error_text(&a), "has no value for key");
            answer_free(&a);
        }
        if (fresh < g_ncards) {
            struct timespec ts = {0, 20 * 1000000L};
            nanosleep(&ts, NULL);
        }
    }
    CHECK_EQ(fresh, g_ncards);
    atomic_store(&gate, 1);
    bool settled = wait_settled(env);
    if (!settled) fprintf(stderr, "  the job's state never matched the reference\n");

    for (int it = 0; settled && it < 60; it++) {
        const ref_card_t *r = &g_cards[rnd() % (uint64_t)g_ncards];
        switch (rnd() % 5) {
        case 0: { /* every state of a card */
            a = query(env, "counter", NULL, r->card, NULL);
            bool ok = entries_equal(&a, card_all(r));
            answer_free(&a);
            CHECK(ok);
            break;
        }
        case 1: { /* one state */
            static const char *const states[] = {"count", "sum", "last", "parity"};
            const char *st = states[rnd() % 4];
            if (!strcmp(st, "last") && !r->nlast) st = "sum";
            a = query(env, "counter", st, r->card, NULL);
            json_t *want = json_array();
            json_array_append_new(want, card_entry(r, st));
            bool ok = entries_equal(&a, want);
            answer_free(&a);
            CHECK(ok);
            break;
        }
        case 2: { /* a composite key */
            int32_t grp = (int32_t)(rnd() % 3);
            char text[200];
            json_t *arr = json_pack("[si]", r->card, grp);
            char *s = json_dumps(arr, JSON_COMPACT);
            snprintf(text, sizeof text, "%s", s);
            free(s);
            json_decref(arr);
            a = query(env, "pair", NULL, text, NULL);
            if (!r->pair[grp]) {
                CHECK_EQ(a.http, 404);
                answer_free(&a);
                break;
            }
            uint8_t kb[200];
            size_t kn = pair_key(r->card, grp, kb);
            json_t *want = json_array();
            json_array_append_new(want, entry("count", "value", kb, kn, hex_of(kb, kn), i64_json(r->pair[grp])));
            bool ok = entries_equal(&a, want);
            answer_free(&a);
            CHECK(ok);
            break;
        }
        case 3: { /* a BIGINT key */
            int64_t amount = (int64_t)(rnd() % 1000);
            char text[32];
            snprintf(text, sizeof text, "%lld", (long long)amount);
            a = query(env, "by_amount", "count", text, NULL);
            if (!g_amount_count[amount]) {
                CHECK_EQ(a.http, 404);
                CHECK_CONTAINS(error_text(&a), "no value for key");
                answer_free(&a);
                break;
            }
            uint8_t kb[8];
            for (int b = 0; b < 8; b++) kb[b] = (uint8_t)((uint64_t)amount >> (8 * b));
            json_t *want = json_array();
            json_array_append_new(want, entry("count", "value", kb, 8, hex_of(kb, 8), i64_json(g_amount_count[amount])));
            bool ok = entries_equal(&a, want);
            answer_free(&a);
            CHECK(ok);
            break;
        }
        default: { /* a card that never came */
            char card[64];
            snprintf(card, sizeof card, "card-%d-nope", (int)(rnd() % 1000));
            a = query(env, "counter", NULL, card, NULL);
            CHECK_EQ(a.rc, SL_ENOTFOUND);
            CHECK_EQ(a.http, 404);
            CHECK_CONTAINS(error_text(&a), "operator 'counter' has no value for key");
            CHECK_CONTAINS(error_text(&a), card);
            answer_free(&a);
            break;
        }
        }
    }
    CHECK(settled);

    /* several threads at once */
    par_q_t pq[3];
    pthread_t pt[3];
    for (int i = 0; i < 3; i++) {
        pq[i] = (par_q_t){env, 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1), 0};
        CHECK(pthread_create(&pt[i], NULL, par_main, &pq[i]) == 0);
    }
    for (int i = 0; i < 3; i++) pthread_join(pt[i], NULL);
    for (int i = 0; i < 3; i++) CHECK_EQ(pq[i].bad, 0);

    /* every amount: 1000 keys cover every key group, so both ends of
     * each subtask's range are asked */
    int kgs_seen = 0;
    bool seen[MAXP] = {false};
    for (int64_t amount = 0; amount < 1000; amount++) {
        char text[32];
        snprintf(text, sizeof text, "%lld", (long long)amount);
        a = query(env, "by_amount", "count", text, NULL);
        uint8_t kb[8];
        for (int b = 0; b < 8; b++) kb[b] = (uint8_t)((uint64_t)amount >> (8 * b));
        int kg = (int)(sl_kg_key_hash(kb, 8) % MAXP);
        kgs_seen += !seen[kg];
        seen[kg] = true;
        bool ok;
        if (!g_amount_count[amount]) {
            ok = a.http == 404;
            if (!ok) fprintf(stderr, "  amount %lld: %d %s\n", (long long)amount, a.http, a.text);
            answer_free(&a);
        } else {
            json_t *want = json_array();
            json_array_append_new(want, entry("count", "value", kb, 8, hex_of(kb, 8), i64_json(g_amount_count[amount])));
            ok = entries_equal(&a, want);
            answer_free(&a);
        }
        CHECK(ok);
    }
    CHECK_EQ(kgs_seen, MAXP);

    /* TTL: a live value without its timestamp; an expired one is absent */
    struct timespec pause = {0, 30 * 1000000L};
    nanosleep(&pause, NULL);
    for (int i = 0; i < 10; i++) {
        const ref_card_t *r = &g_cards[rnd() % (uint64_t)g_ncards];
        a = query(env, "ttl", NULL, r->card, NULL);
        json_t *want = json_array();
        json_array_append_new(want, entry("fresh", "value", (const uint8_t *)r->card, strlen(r->card),
                                          json_string(r->card), i64_json(r->count)));
        bool ok = entries_equal(&a, want);
        answer_free(&a);
        CHECK(ok);
        a = query(env, "ttl", "stale", r->card, NULL);
        CHECK_EQ(a.http, 404);
        CHECK_CONTAINS(error_text(&a), "has no value for key");
        answer_free(&a);
    }

    /* refusals, each named */
    a = query(env, "by_amount", NULL, "12x", NULL);
    CHECK_EQ(a.rc, SL_EINVAL);
    CHECK_EQ(a.http, 400);
    CHECK_CONTAINS(error_text(&a), "key '12x' of operator 'by_amount': field 'amount' (BIGINT): '12x' is not a "
                                   "decimal integer");
    answer_free(&a);
    a = query(env, "pair", NULL, "card-1", NULL);
    CHECK_EQ(a.http, 400);
    CHECK_CONTAINS(error_text(&a), "the key has 2 fields (card VARCHAR NOT NULL, grp INT NOT NULL): give them as a "
                                   "JSON array");
    answer_free(&a);
    a = query(env, "pair", NULL, "[\"card-1\", \"x\"]", NULL);
    CHECK_EQ(a.http, 400);
    CHECK_CONTAINS(error_text(&a), "field 'grp' (INT): element 1 of the key is not a 32-bit integer");
    answer_free(&a);
    a = query(env, "nosuch", NULL, "card-1", NULL);
    CHECK_EQ(a.rc, SL_ENOTFOUND);
    CHECK_EQ(a.http, 404);
    CHECK_CONTAINS(error_text(&a), "job 'state-query' has no operator with uid 'nosuch'; operators with keyed state: "
                                   "'counter', 'pair', 'by_amount', 'ttl', 'slow'");
    answer_free(&a);
    a = query(env, "records", NULL, "card-1", NULL);
    CHECK_EQ(a.http, 404);
    CHECK_CONTAINS(error_text(&a), "operator 'records' of job 'state-query' is not keyed");
    answer_free(&a);
    a = query(env, "counter", "nosuch", g_cards[0].card, NULL);
    CHECK_EQ(a.rc, SL_ENOTFOUND);
    CHECK_EQ(a.http, 404);
    CHECK_CONTAINS(error_text(&a), "operator 'counter' has no keyed state 'nosuch'; its states: 'count', 'last', "
                                   "'parity', 'sum'");
    answer_free(&a);
    a = query(env, "counter", NULL, g_cards[0].card, "some-window");
    CHECK_EQ(a.http, 404);
    CHECK_CONTAINS(error_text(&a), "has no value for key");
    answer_free(&a);

    /* a subtask busy in its function reads no mail: the query times out,
     * naming the subtask; the other subtask of the operator answers */
    char last[64];
    int64_t amount;
    int32_t grp;
    sqj_record(N - 1, NCARDS, last, sizeof last, &amount, &grp);
    uint8_t lk[64];
    size_t ll = strlen(last);
    memcpy(lk, last, ll);
    int busy = (int)(sl_kg_key_hash(lk, (uint32_t)ll) % MAXP) * 2 / MAXP; /* its subtask */
    char busy_name[64];
    snprintf(busy_name, sizeof busy_name, "(%d/2) of job 'state-query'", busy + 1);
    answer_t t = {0};
    t.rc = sl_env_query_state(env, "slow", NULL, last, NULL, 300, &t.text, &t.http);
    t.j = json_loads(t.text, 0, NULL);
    CHECK_EQ(t.rc, SL_ESTATE);
    CHECK_EQ(t.http, 504);
    CHECK_CONTAINS(error_text(&t), busy_name);
    CHECK_CONTAINS(error_text(&t), "did not answer within 300 ms");
    answer_free(&t);
    const ref_card_t *other = NULL;
    for (int i = 0; i < g_ncards && !other; i++)
        if ((int)(sl_kg_key_hash(g_cards[i].card, (uint32_t)strlen(g_cards[i].card)) % MAXP) * 2 / MAXP != busy)
            other = &g_cards[i];
    CHECK(other);
    a = query(env, "slow", NULL, other->card, NULL);
    json_t *want_other = json_array();
    json_array_append_new(want_other, entry("count", "value", (const uint8_t *)other->card, strlen(other->card),
                                            json_string(other->card), i64_json(other->count)));
    bool other_ok = entries_equal(&a, want_other);
    answer_free(&a);
    CHECK(other_ok);
    atomic_store(&hold, 0); /* the late answer is dropped; the next one is on time */
    const ref_card_t *lr = card_ref(last);
    a = query(env, "slow", NULL, last, NULL);
    json_t *want_last = json_array();
    json_array_append_new(want_last, entry("count", "value", (const uint8_t *)last, ll, json_string(last),
                                           i64_json(lr->count)));
    bool last_ok = entries_equal(&a, want_last);
    answer_free(&a);
    CHECK(last_ok);

    sl_env_cancel(env);
    pthread_join(th, NULL);
    CHECK_EQ(run.rc, SL_ECANCELED);
    a = query(env, "counter", NULL, g_cards[0].card, NULL);
    CHECK_EQ(a.http, 409);
    answer_free(&a);
    sl_env_destroy(env);
}

TEST(heap) { run_backend(SL_STATE_BACKEND_HASHMAP); }
TEST(rocksdb) { run_backend(SL_STATE_BACKEND_ROCKSDB); }

/* The key parser on its own (sl_sq_parse_key, the plan's description of
 * a key): each type's text against bytes written out here, and each
 * refusal by name. */
static bool parsed(const char *desc, const char *text, const void *want, size_t n) {
    sl_buf_t b = {0};
    char err[512] = "";
    int rc = sl_sq_parse_key(desc, text, &b, err, sizeof err);
    bool ok = rc == 0 && b.len == n && (n == 0 || memcmp(b.p, want, n) == 0);
    if (!ok) fprintf(stderr, "  %s <- '%s': rc %d (%s), %zu bytes, want %zu\n", desc, text, rc, err, b.len, n);
    sl_buf_free(&b);
    return ok;
}

static bool refused(const char *desc, const char *text, const char *expect) {
    sl_buf_t b = {0};
    char err[512] = "";
    int rc = sl_sq_parse_key(desc, text, &b, err, sizeof err);
    sl_buf_free(&b);
    if (rc == SL_EINVAL && strstr(err, expect)) return true;
    fprintf(stderr, "  %s <- '%s': rc %d, '%s' (want \"%s\")\n", desc, text, rc, err, expect);
    return false;
}

TEST(key_parsing) {
    for (int it = 0; it < 200; it++) {
        int32_t i32 = (int32_t)rnd();
        int64_t i64 = (int64_t)rnd();
        double d = (double)(int64_t)(rnd() % 2000001 - 1000000) / 64.0;
        char t[64];
        uint8_t w[32];
        snprintf(t, sizeof t, "%d", i32);
        for (int b = 0; b < 4; b++) w[b] = (uint8_t)((uint32_t)i32 >> (8 * b));
        CHECK(parsed("field n INT NOT NULL", t, w, 4));
        snprintf(t, sizeof t, "%lld", (long long)i64);
        for (int b = 0; b < 8; b++) w[b] = (uint8_t)((uint64_t)i64 >> (8 * b));
        CHECK(parsed("field n BIGINT", t, w, 8));
        CHECK(parsed("field ts TIMESTAMP(3)", t, w, 8));
        snprintf(t, sizeof t, "%.17g", d);
        memcpy(w, &d, 8);
        CHECK(parsed("field x DOUBLE NOT NULL", t, w, 8));
        /* fields: marker, length of strings, bytes */
        char js[128];
        snprintf(js, sizeof js, "[\"k%d\", %d, null, true]", it, i32);
        char k[16];
        int kl = snprintf(k, sizeof k, "k%d", it);
        size_t n = 0;
        w[n++] = 1;
        for (int b = 0; b < 4; b++) w[n++] = (uint8_t)((uint32_t)kl >> (8 * b));
        memcpy(w + n, k, (size_t)kl);
        n += (size_t)kl;
        w[n++] = 1;
        for (int b = 0; b < 4; b++) w[n++] = (uint8_t)((uint32_t)i32 >> (8 * b));
        w[n++] = 0; /* NULL */
        w[n++] = 1;
        w[n++] = 1;
        CHECK(parsed("fields s VARCHAR NOT NULL, n INT NOT NULL, m BIGINT, b BOOLEAN", js, w, n));
    }
    CHECK(parsed("field b BOOLEAN", "true", "\x01", 1));
    CHECK(parsed("field b BOOLEAN", "false", "\x00", 1));
    CHECK(parsed("field s VARCHAR", "a b/\xc3\xa9", "a b/\xc3\xa9", 6));
    CHECK(parsed("field s VARCHAR", "", "", 0));
    CHECK(parsed("function", "raw bytes", "raw bytes", 9));
    CHECK(refused("field n INT", "2147483648", "field 'n' (INT): '2147483648' is not a decimal integer of 32 bits"));
    CHECK(refused("field n INT", "", "is not a decimal integer"));
    CHECK(refused("field n INT", " 1", "is not a decimal integer"));
    CHECK(refused("field n BIGINT", "99999999999999999999", "field 'n' (BIGINT)"));
    CHECK(refused("field n BIGINT", "1.5", "'1.5' is not a decimal integer"));
    CHECK(refused("field x DOUBLE", "nan", "field 'x' (DOUBLE): 'nan' is not a finite number"));
    CHECK(refused("field b BOOLEAN", "yes", "field 'b' (BOOLEAN): 'yes' is not true or false"));
    CHECK(refused("fields s VARCHAR, n INT", "[\"a\"]", "the key has 2 fields (s VARCHAR, n INT)"));
    CHECK(refused("fields s VARCHAR, n INT", "[1, 2]", "field 's' (VARCHAR): element 0 of the key is not a string"));
    CHECK(refused("fields s VARCHAR NOT NULL, n INT", "[null, 2]", "field 's' (VARCHAR NOT NULL): null given"));
    CHECK(refused("fields s VARCHAR, n INT", "not json", "give them as a JSON array"));
    CHECK(refused("", "x", "not keyed"));
    CHECK(refused("mystery", "x", "which this build does not know"));
    char big[1100];
    memset(big, 'a', sizeof big - 1);
    big[sizeof big - 1] = 0;
    CHECK(refused("field s VARCHAR", big, "the key is 1099 bytes, over the maximum of 1024"));
}

int main(void) {
    RUN(key_parsing);
    RUN(heap);
    RUN(rocksdb);
    for (int i = 0; i < g_ncards; i++) free(g_cards[i].last);
    return sl_test_failures ? 1 : 0;
}
