/* test_timer_service.c — keyed timers per key group: hand-written cases,
 * then random operations (register, delete, replace, pop, re-registering
 * a just-popped timer, snapshots kept across changes) against a naive
 * model. */
#include "test.h"

#include "common/common.h"
#include "state/timer_service.h"

#define EV SL_TIME_EVENT
#define PT SL_TIME_PROCESSING

static int reg_s(sl_timer_service_t *s, sl_time_domain_t d, int kg, const char *key, const char *ns, int64_t ts) {
    return sl_timers_register(s, d, kg, key, (uint32_t)strlen(key), ns, (uint32_t)strlen(ns), ts);
}

static int del_s(sl_timer_service_t *s, sl_time_domain_t d, int kg, const char *key, const char *ns, int64_t ts) {
    return sl_timers_delete(s, d, kg, key, (uint32_t)strlen(key), ns, (uint32_t)strlen(ns), ts);
}

static bool timer_is(const sl_timer_t *t, int64_t ts, int kg, const char *key, const char *ns) {
    return t->ts == ts && t->kg == kg && t->keylen == strlen(key) && memcmp(t->key, key, t->keylen) == 0 &&
           t->nslen == strlen(ns) && memcmp(t->ns, ns, t->nslen) == 0;
}

TEST(order_and_bound) {
    sl_timer_service_t *s = sl_timer_service_new(128, (sl_kg_range_t){0, 128});
    CHECK(sl_timers_peek(s, EV) == INT64_MAX);
    sl_timer_t t;
    CHECK(!sl_timers_pop(s, EV, INT64_MAX, &t));
    static const int64_t ts[] = {50, 10, 30, 20, 40, 10};
    static const int kgs[] = {1, 7, 7, 127, 1, 64};
    static const char *keys[] = {"a", "b", "c", "d", "e", "f"};
    for (int i = 0; i < 6; i++) CHECK_EQ(reg_s(s, EV, kgs[i], keys[i], "w", ts[i]), 1);
    CHECK_EQ(sl_timers_count(s, EV), 6);
    CHECK_EQ(sl_timers_peek(s, EV), 10);
    /* Bound below the earliest: nothing, nothing changes. */
    CHECK(!sl_timers_pop(s, EV, 9, &t));
    CHECK_EQ(sl_timers_count(s, EV), 6);
    /* Bound 20: the two 10s (either order), then 20 (bound inclusive). */
    CHECK(sl_timers_pop(s, EV, 20, &t));
    CHECK(timer_is(&t, 10, 7, "b", "w") || timer_is(&t, 10, 64, "f", "w"));
    bool first_b = t.kg == 7;
    CHECK(sl_timers_pop(s, EV, 20, &t));
    CHECK(first_b ? timer_is(&t, 10, 64, "f", "w") : timer_is(&t, 10, 7, "b", "w"));
    CHECK(sl_timers_pop(s, EV, 20, &t));
    CHECK(timer_is(&t, 20, 127, "d", "w"));
    CHECK(!sl_timers_pop(s, EV, 20, &t));
    CHECK_EQ(sl_timers_peek(s, EV), 30);
    CHECK_EQ(sl_timers_count(s, EV), 3);
    CHECK(sl_timers_pop(s, EV, 1000, &t));
    CHECK(timer_is(&t, 30, 7, "c", "w"));
    CHECK(sl_timers_pop(s, EV, 1000, &t));
    CHECK(timer_is(&t, 40, 1, "e", "w"));
    CHECK(sl_timers_pop(s, EV, 1000, &t));
    CHECK(timer_is(&t, 50, 1, "a", "w"));
    CHECK(!sl_timers_pop(s, EV, INT64_MAX, &t));
    CHECK_EQ(sl_timers_count(s, EV), 0);
    CHECK(sl_timers_peek(s, EV) == INT64_MAX);

    /* Extreme timestamps: INT64_MIN first, and INT64_MAX still pops at the
     * maximum watermark. */
    CHECK_EQ(reg_s(s, EV, 3, "k", "", INT64_MAX), 1);
    CHECK_EQ(reg_s(s, EV, 3, "k", "", INT64_MIN), 1);
    CHECK_EQ(reg_s(s, EV, 3, "k", "", -5), 1);
    CHECK(sl_timers_peek(s, EV) == INT64_MIN);
    CHECK(sl_timers_pop(s, EV, INT64_MIN, &t) && t.ts == INT64_MIN);
    CHECK(sl_timers_pop(s, EV, 0, &t) && t.ts == -5);
    CHECK(!sl_timers_pop(s, EV, INT64_MAX - 1, &t));
    CHECK(sl_timers_pop(s, EV, INT64_MAX, &t) && t.ts == INT64_MAX);
    CHECK_EQ(sl_timers_count(s, EV), 0);
    sl_timer_service_destroy(s);
}

TEST(dedup) {
    sl_timer_service_t *s = sl_timer_service_new(128, (sl_kg_range_t){0, 64});
    CHECK_EQ(reg_s(s, EV, 5, "key", "ns", 100), 1);
    CHECK_EQ(reg_s(s, EV, 5, "key", "ns", 100), 0);
    CHECK_EQ(sl_timers_count(s, EV), 1);
    CHECK_EQ(reg_s(s, EV, 5, "key", "ns", 101), 1);  /* other ts */
    CHECK_EQ(reg_s(s, EV, 5, "key", "nt", 100), 1);  /* other ns */
    CHECK_EQ(reg_s(s, EV, 5, "key", "", 100), 1);    /* empty ns */
    CHECK_EQ(reg_s(s, EV, 5, "kez", "ns", 100), 1);  /* other key */
    CHECK_EQ(reg_s(s, EV, 5, "ke", "yns", 100), 1);  /* same bytes, split elsewhere */
    CHECK_EQ(reg_s(s, EV, 6, "other", "ns", 100), 1);
    CHECK_EQ(reg_s(s, PT, 5, "key", "ns", 100), 1);  /* other domain */
    CHECK_EQ(sl_timers_count(s, EV), 7);
    CHECK_EQ(sl_timers_count(s, PT), 1);
    for (int i = 0; i < 3; i++) {
        CHECK_EQ(reg_s(s, EV, 5, "key", "ns", 101), 0);
        CHECK_EQ(reg_s(s, EV, 5, "ke", "yns", 100), 0);
        CHECK_EQ(reg_s(s, EV, 5, "key", "", 100), 0);
    }
    CHECK_EQ(sl_timers_count(s, EV), 7);
    /* Popping all gives each once. */
    sl_timer_t t;
    int n = 0;
    while (sl_timers_pop(s, EV, INT64_MAX, &t)) n++;
    CHECK_EQ(n, 7);
    /* Once popped, registering again adds it again. */
    CHECK_EQ(reg_s(s, EV, 5, "key", "ns", 100), 1);
    /* Empty key and empty namespace. */
    CHECK_EQ(sl_timers_register(s, EV, 0, NULL, 0, NULL, 0, 1), 1);
    CHECK_EQ(sl_timers_register(s, EV, 0, NULL, 0, NULL, 0, 1), 0);
    CHECK(sl_timers_pop(s, EV, 1, &t));
    CHECK(t.ts == 1 && t.kg == 0 && t.keylen == 0 && t.nslen == 0);
    /* Bad arguments. */
    CHECK(reg_s(s, EV, 64, "k", "", 1) < 0); /* outside the range */
    CHECK(reg_s(s, EV, -1, "k", "", 1) < 0);
    CHECK(reg_s(s, (sl_time_domain_t)2, 3, "k", "", 1) < 0);
    CHECK_EQ(sl_timers_count(s, EV), 1);
    sl_timer_service_destroy(s);
}

TEST(delete_timers) {
    sl_timer_service_t *s = sl_timer_service_new(128, (sl_kg_range_t){10, 20});
    for (int i = 0; i < 100; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        CHECK_EQ(reg_s(s, EV, 10 + i % 10, key, "n", 1000 - i), 1);
    }
    CHECK_EQ(sl_timers_peek(s, EV), 901);
    /* Delete the head: peek moves. */
    CHECK_EQ(del_s(s, EV, 19, "k99", "n", 901), 1);
    CHECK_EQ(del_s(s, EV, 19, "k99", "n", 901), 0);
    CHECK_EQ(sl_timers_peek(s, EV), 902);
    /* Wrong ts, ns, kg or domain: nothing. */
    CHECK_EQ(del_s(s, EV, 18, "k98", "n", 903), 0);
    CHECK_EQ(del_s(s, EV, 18, "k98", "m", 902), 0);
    CHECK_EQ(del_s(s, EV, 17, "k98", "n", 902), 0);
    CHECK_EQ(del_s(s, PT, 18, "k98", "n", 902), 0);
    CHECK_EQ(sl_timers_count(s, EV), 99);
    /* Delete every third (from the middle of the heaps). */
    int deleted = 1;
    for (int i = 0; i < 99; i += 3) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        CHECK_EQ(del_s(s, EV, 10 + i % 10, key, "n", 1000 - i), 1);
        deleted++;
    }
    CHECK_EQ(sl_timers_count(s, EV), 100 - deleted);
    /* Pop: never a deleted one, in order. */
    sl_timer_t t;
    int64_t last = INT64_MIN;
    int n = 0;
    while (sl_timers_pop(s, EV, INT64_MAX, &t)) {
        int i = (int)(1000 - t.ts);
        CHECK(i % 3 != 0 && i != 99);
        CHECK(t.ts >= last);
        CHECK_EQ(t.kg, 10 + i % 10);
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        CHECK(t.keylen == strlen(key) && memcmp(t.key, key, t.keylen) == 0);
        last = t.ts;
        n++;
    }
    CHECK_EQ(n, 100 - deleted);
    CHECK_EQ(sl_timers_count(s, EV), 0);
    /* Delete then register again. */
    CHECK_EQ(reg_s(s, EV, 12, "x", "", 5), 1);
    CHECK_EQ(del_s(s, EV, 12, "x", "", 5), 1);
    CHECK(sl_timers_peek(s, EV) == INT64_MAX);
    CHECK_EQ(reg_s(s, EV, 12, "x", "", 5), 1);
    CHECK_EQ(sl_timers_peek(s, EV), 5);
    sl_timer_service_destroy(s);
}

TEST(domains_independent) {
    sl_timer_service_t *s = sl_timer_service_new(128, (sl_kg_range_t){0, 128});
    CHECK_EQ(reg_s(s, EV, 1, "k", "", 100), 1);
    CHECK_EQ(reg_s(s, EV, 2, "k", "", 300), 1);
    CHECK_EQ(reg_s(s, PT, 1, "k", "", 200), 1);
    CHECK_EQ(reg_s(s, PT, 1, "k", "", 100), 1); /* same as an event timer: other domain */
    CHECK_EQ(sl_timers_peek(s, EV), 100);
    CHECK_EQ(sl_timers_peek(s, PT), 100);
    sl_timer_t t;
    CHECK(sl_timers_pop(s, EV, 150, &t) && t.ts == 100);
    CHECK(!sl_timers_pop(s, EV, 150, &t));
    CHECK_EQ(sl_timers_count(s, EV), 1);
    CHECK_EQ(sl_timers_count(s, PT), 2);
    CHECK_EQ(sl_timers_peek(s, PT), 100);
    CHECK(sl_timers_pop(s, PT, 1000, &t) && t.ts == 100);
    CHECK(sl_timers_pop(s, PT, 1000, &t) && t.ts == 200);
    CHECK(!sl_timers_pop(s, PT, INT64_MAX, &t));
    CHECK_EQ(sl_timers_peek(s, EV), 300);
    CHECK_EQ(del_s(s, PT, 2, "k", "", 300), 0);
    CHECK_EQ(del_s(s, EV, 2, "k", "", 300), 1);
    CHECK_EQ(sl_timers_count(s, EV), 0);
    /* Bad domain. */
    CHECK(sl_timers_peek(s, (sl_time_domain_t)5) == INT64_MAX);
    CHECK(!sl_timers_pop(s, (sl_time_domain_t)5, INT64_MAX, &t));
    sl_timer_service_destroy(s);
}

typedef struct kgcollect {
    int n, bad, kg, stop_at;
    int64_t sum;
} kgcollect_t;

static int kgcollect_cb(void *c, const sl_timer_t *t) {
    kgcollect_t *k = c;
    k->n++;
    k->sum += t->ts;
    char key[16];
    snprintf(key, sizeof key, "k%d", (int)t->ts);
    if (t->kg != k->kg || t->keylen != strlen(key) || memcmp(t->key, key, t->keylen) != 0 || t->nslen != 2 ||
        memcmp(t->ns, "ns", 2) != 0)
        k->bad++;
    return k->stop_at && k->n == k->stop_at ? 9 : 0;
}

TEST(foreach_kg) {
    sl_timer_service_t *s = sl_timer_service_new(256, (sl_kg_range_t){100, 110});
    /* Timer ts=i goes to key group 100 + i % 10 with key "k<i>". */
    for (int i = 0; i < 500; i++) {
        char key[16];
        snprintf(key, sizeof key, "k%d", i);
        CHECK_EQ(reg_s(s, EV, 100 + i % 10, key, "ns", i), 1);
    }
    CHECK_EQ(reg_s(s, PT, 103, "k3", "ns", 3), 1); /* other domain: not visited */
    for (int g = 100; g < 110; g++) {
        kgcollect_t k = {0, 0, g, 0, 0};
        CHECK_EQ(sl_timers_foreach_kg(s, EV, g, kgcollect_cb, &k), 0);
        CHECK_EQ(k.n, 50);
        CHECK_EQ(k.bad, 0);
        /* sum of i = g-100 + 10j for j < 50 */
        CHECK_EQ(k.sum, 50 * (g - 100) + 10 * (49 * 50 / 2));
    }
    kgcollect_t k = {0, 0, 103, 0, 0};
    CHECK_EQ(sl_timers_foreach_kg(s, PT, 103, kgcollect_cb, &k), 0);
    CHECK_EQ(k.n, 1);
    k = (kgcollect_t){0, 0, 104, 0, 0};
    CHECK_EQ(sl_timers_foreach_kg(s, PT, 104, kgcollect_cb, &k), 0);
    CHECK_EQ(k.n, 0);
    /* Early stop. */
    k = (kgcollect_t){0, 0, 105, 7, 0};
    CHECK_EQ(sl_timers_foreach_kg(s, EV, 105, kgcollect_cb, &k), 9);
    CHECK_EQ(k.n, 7);
    /* Out of range. */
    CHECK(sl_timers_foreach_kg(s, EV, 99, kgcollect_cb, &k) < 0);
    CHECK(sl_timers_foreach_kg(s, EV, 110, kgcollect_cb, &k) < 0);
    /* After popping the 100 earliest, each key group has 40 left. */
    sl_timer_t t;
    for (int i = 0; i < 100; i++) CHECK(sl_timers_pop(s, EV, INT64_MAX, &t) && t.ts == i);
    k = (kgcollect_t){0, 0, 101, 0, 0};
    CHECK_EQ(sl_timers_foreach_kg(s, EV, 101, kgcollect_cb, &k), 0);
    CHECK_EQ(k.n, 40);
    CHECK_EQ(k.bad, 0);
    sl_timer_service_destroy(s); /* with timers left: ASan checks the frees */
}

TEST(many_timers_sorted) {
    sl_timer_service_t *s = sl_timer_service_new(128, (sl_kg_range_t){0, 128});
    enum { N = 100000 };
    uint64_t x = 88172645463325252ULL;
    int added = 0;
    for (int i = 0; i < N; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint32_t key = (uint32_t)(x >> 40) % 5000;
        int64_t ts = (int64_t)(x % 20000);
        added += sl_timers_register(s, i & 1 ? PT : EV, (int)(key % 128), &key, 4, "", 0, ts);
    }
    CHECK(added > N / 2 && added < N); /* some were duplicates */
    CHECK_EQ(sl_timers_count(s, EV) + sl_timers_count(s, PT), added);
    sl_timer_t t;
    int popped = 0;
    for (int d = 0; d < 2; d++) {
        int64_t last = INT64_MIN;
        /* Advance in steps, as watermarks do. */
        for (int64_t wm = 0; wm < 20000 + 500; wm += 500) {
            while (sl_timers_pop(s, (sl_time_domain_t)d, wm, &t)) {
                CHECK(t.ts >= last && t.ts <= wm);
                CHECK_EQ(t.kg, (int)(sl_ld32(t.key) % 128));
                last = t.ts;
                popped++;
            }
            CHECK(sl_timers_peek(s, (sl_time_domain_t)d) > wm);
        }
    }
    CHECK_EQ(popped, added);
    sl_timer_service_destroy(s);
}

/* ------------------------------------------------------------------ */
/* randomized against a naive model                                    */

typedef struct rtimer {
    int d, kg;
    uint8_t key[8], ns[16];
    uint32_t klen, nslen;
    int64_t ts;
} rtimer_t;

static uint64_t rng;
static uint64_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static bool rsame(const rtimer_t *a, const rtimer_t *b) {
    return a->d == b->d && a->kg == b->kg && a->ts == b->ts && a->klen == b->klen &&
           memcmp(a->key, b->key, a->klen) == 0 && a->nslen == b->nslen && memcmp(a->ns, b->ns, a->nslen) == 0;
}

static int rfind(const rtimer_t *m, int n, const rtimer_t *t) {
    for (int i = 0; i < n; i++)
        if (rsame(&m[i], t)) return i;
    return -1;
}

typedef struct rkg {
    const rtimer_t *m;
    int n, d, visited, bad;
} rkg_t;

static int rkg_cb(void *c, const sl_timer_t *t) {
    rkg_t *r = c;
    rtimer_t x = {r->d, t->kg, {0}, {0}, t->keylen, t->nslen, t->ts};
    if (t->keylen > 8 || t->nslen > 16 || t->keyhash != sl_kg_key_hash(t->key, t->keylen)) {
        r->bad++;
        return 0;
    }
    memcpy(x.key, t->key, t->keylen);
    memcpy(x.ns, t->ns, t->nslen);
    if (rfind(r->m, r->n, &x) < 0) r->bad++;
    r->visited++;
    return 0;
}

/* Every key group of the service against the model m[0..n): same timers
 * (foreach visits each once; the model has no duplicates). */
static void check_all_kgs(sl_timer_service_t *s, sl_kg_range_t range, const rtimer_t *m, int n) {
    for (int d = 0; d < 2; d++) {
        int64_t c = 0;
        for (int i = 0; i < n; i++) c += m[i].d == d;
        CHECK_EQ(sl_timers_count(s, (sl_time_domain_t)d), c);
        int64_t visited = 0;
        for (int g = range.start; g < range.end; g++) {
            rkg_t r = {m, n, d, 0, 0};
            CHECK_EQ(sl_timers_foreach_kg(s, (sl_time_domain_t)d, g, rkg_cb, &r), 0);
            CHECK_EQ(r.bad, 0);
            int64_t inkg = 0;
            for (int i = 0; i < n; i++) inkg += m[i].d == d && m[i].kg == g;
            CHECK_EQ(r.visited, inkg);
            visited += r.visited;
        }
        CHECK_EQ(visited, c);
    }
}

static int rreg(sl_timer_service_t *s, const rtimer_t *t, bool hashed) {
    if (hashed)
        return sl_timers_register_hashed(s, t->d, t->kg, sl_kg_key_hash(t->key, t->klen), t->key, t->klen, t->ns,
                                         t->nslen, t->ts);
    return sl_timers_register(s, t->d, t->kg, t->key, t->klen, t->ns, t->nslen, t->ts);
}

static int rdel(sl_timer_service_t *s, const rtimer_t *t, bool hashed) {
    if (hashed)
        return sl_timers_delete_hashed(s, t->d, t->kg, sl_kg_key_hash(t->key, t->klen), t->key, t->klen, t->ns,
                                       t->nslen, t->ts);
    return sl_timers_delete(s, t->d, t->kg, t->key, t->klen, t->ns, t->nslen, t->ts);
}

/* sl_timers_replace from o to nw (same domain, key group and key) checked
 * against the model: delete o if present, then register nw if absent. */
static void rreplace(sl_timer_service_t *s, rtimer_t *m, int *n, const rtimer_t *o, const rtimer_t *nw) {
    int have_o = rfind(m, *n, o);
    int want = have_o >= 0 ? 1 : 0;
    if (have_o >= 0) m[have_o] = m[--*n];
    if (rfind(m, *n, nw) < 0) {
        want |= 2;
        m[(*n)++] = *nw;
    }
    CHECK_EQ(sl_timers_replace(s, o->d, o->kg, sl_kg_key_hash(o->key, o->klen), o->key, o->klen, o->ns, o->nslen,
                               o->ts, nw->ns, nw->nslen, nw->ts),
             want);
}

static void random_run(uint64_t seed, int nops) {
    rng = seed;
    sl_kg_range_t range = {10, 50};
    sl_timer_service_t *s = sl_timer_service_new(128, range);
    enum { NKEYS = 24, MAXN = 20000 };
    uint8_t keys[NKEYS][8];
    uint32_t klens[NKEYS];
    int kgs[NKEYS];
    for (int i = 0; i < NKEYS;) {
        klens[i] = (uint32_t)(rnd() % 7);
        for (uint32_t j = 0; j < klens[i]; j++) keys[i][j] = (uint8_t)rnd();
        kgs[i] = sl_kg_of_hash(sl_kg_key_hash(keys[i], klens[i]), 128);
        if (kgs[i] >= range.start && kgs[i] < range.end) i++;
    }
    static rtimer_t m[MAXN], snapm[MAXN];
    int n = 0;
    int64_t now[2] = {0, 0};
    int pops = 0, replaces = 0, repops = 0, snaps = 0;
    /* a snapshot in flight: the model when it was taken, checked after
     * later changes (copy-on-write of replaced, popped, deleted timers) */
    sl_timers_snapshot_t *snap = NULL;
    int snapn = 0, snap_left = 0;
    for (int op = 0; op < nops; op++) {
        rtimer_t t = {0};
        t.d = (int)(rnd() % 2);
        int k = (int)(rnd() % NKEYS);
        t.kg = kgs[k];
        t.klen = klens[k];
        memcpy(t.key, keys[k], t.klen);
        static const uint32_t nslens[4] = {0, 4, 8, 16};
        t.nslen = nslens[rnd() % 4];
        for (uint32_t j = 0; j < t.nslen; j++) t.ns[j] = (uint8_t)(rnd() % 2);
        t.ts = now[t.d] + (int64_t)(rnd() % 64);
        bool hashed = rnd() % 2;
        uint32_t what = (uint32_t)(rnd() % 100);
        if (what < 34 && n < MAXN) {
            int have = rfind(m, n, &t);
            CHECK_EQ(rreg(s, &t, hashed), have < 0 ? 1 : 0);
            if (have < 0) m[n++] = t;
        } else if (what < 44) {
            /* Delete one that exists (half the time) or a random one. */
            if (n && rnd() % 2) t = m[rnd() % (uint64_t)n];
            int have = rfind(m, n, &t);
            CHECK_EQ(rdel(s, &t, hashed), have >= 0 ? 1 : 0);
            if (have >= 0) m[have] = m[--n];
        } else if (what < 54 && n < MAXN) {
            /* Replace: from an existing timer (half the time) or a random
             * one, to the same one, another existing one of the key, or a
             * random (namespace, timestamp) -- later, as a session grows,
             * or earlier. */
            if (n && rnd() % 2) t = m[rnd() % (uint64_t)n];
            rtimer_t nw = t;
            uint32_t how = (uint32_t)(rnd() % 8);
            if (how == 0) {
                /* the same */
            } else if (how == 1) {
                for (int i = 0; i < n; i++)
                    if (m[i].d == t.d && m[i].kg == t.kg && m[i].klen == t.klen &&
                        memcmp(m[i].key, t.key, t.klen) == 0 && !rsame(&m[i], &t)) {
                        nw = m[i];
                        break;
                    }
            } else {
                if (how < 5) nw.ts = t.ts + (int64_t)(rnd() % 40);
                else nw.ts = now[t.d] + (int64_t)(rnd() % 64);
                if (rnd() % 4 == 0) nw.nslen = nslens[rnd() % 4];
                for (uint32_t j = 0; j < nw.nslen; j++)
                    if (j >= t.nslen || rnd() % 4 == 0) nw.ns[j] = (uint8_t)(rnd() % 2);
            }
            rreplace(s, m, &n, &t, &nw);
            replaces++;
        } else if (what < 93) {
            int64_t bound = now[t.d] + (int64_t)(rnd() % 8);
            int64_t min = INT64_MAX;
            for (int i = 0; i < n; i++)
                if (m[i].d == t.d && m[i].ts < min) min = m[i].ts;
            CHECK(sl_timers_peek(s, t.d) == min);
            sl_timer_t out;
            bool got = sl_timers_pop(s, t.d, bound, &out);
            CHECK_EQ(got, min <= bound);
            if (got) {
                CHECK(out.ts == min);
                CHECK(out.keyhash == sl_kg_key_hash(out.key, out.keylen));
                rtimer_t x = {t.d, out.kg, {0}, {0}, out.keylen, out.nslen, out.ts};
                CHECK(out.keylen <= 8 && out.nslen <= 16);
                memcpy(x.key, out.key, out.keylen);
                memcpy(x.ns, out.ns, out.nslen);
                int i = rfind(m, n, &x);
                CHECK(i >= 0);
                m[i] = m[--n];
                pops++;
                /* Right after a pop, with the popped timer's own bytes: it
                 * is gone (delete finds nothing), can come back (register
                 * adds it), or be replaced (nothing to remove). */
                uint32_t after = (uint32_t)(rnd() % 8);
                if (after == 0 && n < MAXN) {
                    CHECK_EQ(sl_timers_register_hashed(s, t.d, out.kg, out.keyhash, out.key, out.keylen, out.ns,
                                                       out.nslen, out.ts),
                             1);
                    m[n++] = x;
                    repops++;
                } else if (after == 1) {
                    CHECK_EQ(sl_timers_delete(s, t.d, out.kg, out.key, out.keylen, out.ns, out.nslen, out.ts), 0);
                    repops++;
                } else if (after == 2 && n < MAXN) {
                    rtimer_t nw = x;
                    nw.ts += (int64_t)(rnd() % 3);
                    CHECK_EQ(sl_timers_replace(s, t.d, out.kg, out.keyhash, out.key, out.keylen, out.ns, out.nslen,
                                               out.ts, out.ns, out.nslen, nw.ts),
                             rfind(m, n, &nw) < 0 ? 2 : 0);
                    if (rfind(m, n, &nw) < 0) m[n++] = nw;
                    repops++;
                }
            }
            now[t.d] = bound; /* time moves on */
        } else if (what < 95) {
            if (!snap) {
                CHECK_EQ(sl_timers_snapshot(s, &snap), 0);
                memcpy(snapm, m, (size_t)n * sizeof *m);
                snapn = n;
                snap_left = (int)(rnd() % 400);
            }
        } else {
            for (int d = 0; d < 2; d++) {
                int g = range.start + (int)(rnd() % (uint64_t)(range.end - range.start));
                int64_t inkg = 0;
                for (int i = 0; i < n; i++) inkg += m[i].d == d && m[i].kg == g;
                rkg_t r = {m, n, d, 0, 0};
                CHECK_EQ(sl_timers_foreach_kg(s, (sl_time_domain_t)d, g, rkg_cb, &r), 0);
                CHECK_EQ(r.visited, inkg);
                CHECK_EQ(r.bad, 0);
            }
        }
        if (snap && (snap_left-- == 0 || op == nops - 1)) {
            /* The snapshot's blocks, restored into a new service, hold the
             * model as it was when the snapshot was taken. */
            sl_timer_service_t *r = sl_timer_service_new(128, range);
            char err[256];
            for (int g = range.start; g < range.end; g++) {
                sl_buf_t b = {0};
                CHECK_EQ(sl_timers_snapshot_write_kg(snap, g, &b), 0);
                CHECK_EQ(sl_timers_restore_kg(r, g, b.p, b.len, err, sizeof err), 0);
                sl_buf_free(&b);
            }
            check_all_kgs(r, range, snapm, snapn);
            sl_timer_service_destroy(r);
            sl_timers_snapshot_release(snap);
            snap = NULL;
            snaps++;
        }
    }
    CHECK(pops > nops / 10);
    CHECK(replaces > nops / 20 && repops > nops / 100 && snaps > 5);
    check_all_kgs(s, range, m, n);
    /* Drain both domains and compare with the model, in order. */
    for (int d = 0; d < 2; d++) {
        sl_timer_t out;
        int64_t last = INT64_MIN;
        while (sl_timers_pop(s, (sl_time_domain_t)d, INT64_MAX, &out)) {
            CHECK(out.ts >= last);
            last = out.ts;
            rtimer_t x = {d, out.kg, {0}, {0}, out.keylen, out.nslen, out.ts};
            memcpy(x.key, out.key, out.keylen);
            memcpy(x.ns, out.ns, out.nslen);
            int i = rfind(m, n, &x);
            CHECK(i >= 0);
            m[i] = m[--n];
        }
    }
    CHECK_EQ(n, 0);
    sl_timer_service_destroy(s);
}

TEST(random_against_model) {
    static const uint64_t seeds[] = {1, 0xabcdef12345ULL, 0x9e3779b97f4a7c15ULL};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        int before = sl_test_failures;
        random_run(seeds[i], 40000);
        if (sl_test_failures != before) {
            fprintf(stderr, "random_against_model: seed %" PRIu64 " failed\n", seeds[i]);
            return;
        }
    }
}

int main(void) {
    RUN(order_and_bound);
    RUN(dedup);
    RUN(delete_timers);
    RUN(domains_independent);
    RUN(foreach_kg);
    RUN(many_timers_sorted);
    RUN(random_against_model);
    TEST_MAIN_END();
}
