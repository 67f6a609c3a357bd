/* test_state_backend.c — the keyed state backend base and the heap backend. */
#include "test.h"

#include "common/common.h"
#include "state/state_backend.h"

#define OPS(b) ((b)->ops)

static sl_keyed_backend_t *new_full(void) { return sl_heap_backend_new(128, (sl_kg_range_t){0, 128}); }

static int reg(sl_keyed_backend_t *b, const char *name, sl_state_kind_t kind) {
    sl_state_desc_t d = {.name = name, .kind = kind};
    return OPS(b)->register_state(b, &d);
}

static void set_u64_key(sl_keyed_backend_t *b, uint64_t k) { sl_kb_set_key(b, &k, sizeof k); }

/* A key (the decimal digits of n, with a prefix) whose key group is inside r. */
static uint32_t key_in_range(char *buf, int maxp, sl_kg_range_t r, unsigned *n) {
    for (;; (*n)++) {
        int len = snprintf(buf, 32, "k%u", *n);
        int kg = sl_kg_of_hash(sl_kg_key_hash(buf, (uint32_t)len), maxp);
        if (kg >= r.start && kg < r.end) {
            (*n)++;
            return (uint32_t)len;
        }
    }
}

/* ------------------------------------------------------------------ */

TEST(set_key_base) {
    sl_keyed_backend_t *b = new_full();
    CHECK_STR(OPS(b)->name, "heap");
    char k[] = "hello";
    int kg = sl_kb_set_key(b, k, 5);
    CHECK_EQ(kg, sl_kg_of_hash(sl_kg_key_hash("hello", 5), 128));
    CHECK_EQ(b->kg, kg);
    CHECK(b->keyhash == sl_kg_key_hash("hello", 5));
    CHECK_EQ(b->keylen, 5);
    k[0] = 'j'; /* the backend copied the bytes */
    CHECK(memcmp(b->key, "hello", 5) == 0);

    /* Long keys grow the buffer. */
    static uint8_t big[5000];
    for (size_t i = 0; i < sizeof big; i++) big[i] = (uint8_t)(i * 7);
    kg = sl_kb_set_key(b, big, sizeof big);
    CHECK_EQ(kg, sl_kg_of_hash(sl_kg_key_hash(big, sizeof big), 128));
    CHECK(b->keycap >= sizeof big);
    CHECK(memcmp(b->key, big, sizeof big) == 0);

    /* The empty key is a key. */
    kg = sl_kb_set_key(b, NULL, 0);
    CHECK_EQ(b->keylen, 0);
    CHECK_EQ(kg, sl_kg_of_hash(sl_kg_key_hash("", 0), 128));

    /* With a known hash: kg comes from that hash. */
    kg = sl_kb_set_key_hashed(b, "x", 1, 1000);
    CHECK_EQ(kg, 1000 % 128);
    CHECK(b->keyhash == 1000);
    OPS(b)->destroy(b);
}

TEST(register_state) {
    sl_keyed_backend_t *b = new_full();
    int a = reg(b, "a", SL_STATE_VALUE), l = reg(b, "l", SL_STATE_LIST), m = reg(b, "m", SL_STATE_MAP);
    CHECK(a >= 0 && l >= 0 && m >= 0);
    CHECK(a != l && l != m && a != m);
    CHECK_EQ(reg(b, "l", SL_STATE_LIST), l);
    CHECK(reg(b, "l", SL_STATE_VALUE) < 0); /* same name, other kind */
    CHECK(reg(b, "", SL_STATE_VALUE) < 0);
    CHECK(reg(b, "bad", (sl_state_kind_t)7) < 0);
    CHECK(OPS(b)->register_state(b, NULL) < 0);
    for (int i = 0; i < 40; i++) { /* growth of the state table */
        char name[16];
        snprintf(name, sizeof name, "s%d", i);
        int id = reg(b, name, SL_STATE_VALUE);
        CHECK(id >= 0);
        CHECK_EQ(reg(b, name, SL_STATE_VALUE), id);
    }
    CHECK_EQ(reg(b, "a", SL_STATE_VALUE), a);
    OPS(b)->destroy(b);
}

TEST(value_basics) {
    sl_keyed_backend_t *b = new_full();
    int s = reg(b, "v", SL_STATE_VALUE);
    const sl_keyed_backend_ops_t *o = b->ops;
    uint32_t len = 99;
    sl_kb_set_key(b, "alice", 5);
    CHECK(o->get(b, s, NULL, 0, &len) == NULL);
    CHECK_EQ(o->count(b, s), 0);
    CHECK_EQ(o->put(b, s, NULL, 0, "one", 3), 0);
    const char *v = o->get(b, s, NULL, 0, &len);
    CHECK(v != NULL);
    CHECK_EQ(len, 3);
    CHECK(memcmp(v, "one", 3) == 0);
    CHECK_EQ(o->count(b, s), 1);

    /* Overwrite, longer and shorter. */
    CHECK_EQ(o->put(b, s, NULL, 0, "a much longer value", 19), 0);
    v = o->get(b, s, NULL, 0, &len);
    CHECK_EQ(len, 19);
    CHECK(memcmp(v, "a much longer value", 19) == 0);
    CHECK_EQ(o->put(b, s, NULL, 0, "xy", 2), 0);
    v = o->get(b, s, NULL, 0, &len);
    CHECK_EQ(len, 2);
    CHECK(memcmp(v, "xy", 2) == 0);
    CHECK_EQ(o->count(b, s), 1);

    /* Same key, other namespaces are other entries (and the empty ns is one). */
    uint8_t ns1[16] = {1}, ns2[16] = {2};
    CHECK(o->get(b, s, ns1, 16, &len) == NULL);
    CHECK_EQ(o->put(b, s, ns1, 16, "n1", 2), 0);
    CHECK_EQ(o->put(b, s, ns2, 16, "n2", 2), 0);
    CHECK_EQ(o->put(b, s, ns2, 8, "n2short", 7), 0); /* a prefix of ns2 is another namespace */
    CHECK_EQ(o->count(b, s), 4);
    CHECK(memcmp(o->get(b, s, ns1, 16, &len), "n1", 2) == 0);
    CHECK(memcmp(o->get(b, s, ns2, 16, &len), "n2", 2) == 0);
    CHECK(memcmp(o->get(b, s, ns2, 8, &len), "n2short", 7) == 0);
    CHECK(memcmp(o->get(b, s, NULL, 0, &len), "xy", 2) == 0);

    /* Other key, same namespace: absent. */
    sl_kb_set_key(b, "bob", 3);
    CHECK(o->get(b, s, ns1, 16, &len) == NULL);
    CHECK(o->get(b, s, NULL, 0, &len) == NULL);
    /* A key that is a prefix of another is another key. */
    sl_kb_set_key(b, "alic", 4);
    CHECK(o->get(b, s, NULL, 0, &len) == NULL);

    /* Zero-length values are present. */
    CHECK_EQ(o->put(b, s, NULL, 0, NULL, 0), 0);
    len = 77;
    CHECK(o->get(b, s, NULL, 0, &len) != NULL);
    CHECK_EQ(len, 0);
    CHECK_EQ(o->count(b, s), 5);

    /* Remove, remove again, re-add. */
    sl_kb_set_key(b, "alice", 5);
    CHECK_EQ(o->remove(b, s, ns1, 16), 1);
    CHECK_EQ(o->remove(b, s, ns1, 16), 0);
    CHECK(o->get(b, s, ns1, 16, &len) == NULL);
    CHECK(memcmp(o->get(b, s, ns2, 16, &len), "n2", 2) == 0);
    CHECK_EQ(o->count(b, s), 4);
    CHECK_EQ(o->put(b, s, ns1, 16, "again", 5), 0);
    v = o->get(b, s, ns1, 16, &len);
    CHECK(v && len == 5 && memcmp(v, "again", 5) == 0);
    CHECK_EQ(o->count(b, s), 5);

    /* Bad state ids and kinds. */
    CHECK(o->get(b, 99, NULL, 0, &len) == NULL);
    CHECK(o->put(b, -1, NULL, 0, "x", 1) < 0);
    OPS(b)->destroy(b);
}

TEST(value_get_mut) {
    sl_keyed_backend_t *b = new_full();
    const sl_keyed_backend_ops_t *o = b->ops;
    int s = reg(b, "acc", SL_STATE_VALUE);
    uint8_t ns[16] = {9, 9};
    set_u64_key(b, 7);
    bool created = false;
    int64_t *acc = o->get_mut(b, s, ns, 16, 16, &created);
    CHECK(acc != NULL);
    CHECK(created);
    CHECK(((uintptr_t)acc & 7) == 0); /* values are 8-byte aligned */
    CHECK(acc[0] == 0 && acc[1] == 0);
    acc[0] = 5;
    acc[1] = -3;
    CHECK_EQ(o->put(b, s, ns, 16, acc, 16), 0); /* same pointer: no-op */
    int64_t *again = o->get_mut(b, s, ns, 16, 16, &created);
    CHECK(!created);
    CHECK(again == acc); /* stable across non-modifying calls */
    CHECK_EQ(again[0], 5);
    CHECK_EQ(again[1], -3);
    uint32_t len;
    const int64_t *r = o->get(b, s, ns, 16, &len);
    CHECK_EQ(len, 16);
    CHECK_EQ(r[0], 5);
    CHECK_EQ(o->count(b, s), 1);

    /* Accumulate over many calls. */
    for (int i = 0; i < 1000; i++) {
        int64_t *a = o->get_mut(b, s, ns, 16, 16, NULL);
        a[0] += i;
    }
    r = o->get(b, s, ns, 16, &len);
    CHECK_EQ(r[0], 5 + 999 * 1000 / 2);

    /* put with a different pointer but the same length copies. */
    int64_t other[2] = {11, 12};
    CHECK_EQ(o->put(b, s, ns, 16, other, 16), 0);
    r = o->get(b, s, ns, 16, &len);
    CHECK(r[0] == 11 && r[1] == 12 && len == 16);

    /* put with a different length replaces, even from the entry's own bytes. */
    r = o->get(b, s, ns, 16, &len);
    CHECK_EQ(o->put(b, s, ns, 16, r + 1, 8), 0);
    r = o->get(b, s, ns, 16, &len);
    CHECK_EQ(len, 8);
    CHECK_EQ(r[0], 12);

    /* get_mut with another length resizes: common prefix kept, rest zero. */
    int64_t *w = o->get_mut(b, s, ns, 16, 32, &created);
    CHECK(!created);
    CHECK(w[0] == 12 && w[1] == 0 && w[2] == 0 && w[3] == 0);
    w[3] = 4;
    w = o->get_mut(b, s, ns, 16, 8, &created);
    CHECK(!created && w[0] == 12);
    w = o->get_mut(b, s, ns, 16, 32, &created); /* regrown bytes are zero again */
    CHECK(w[0] == 12 && w[3] == 0);
    r = o->get(b, s, ns, 16, &len);
    CHECK_EQ(len, 32);

    /* Zero-length get_mut creates a present, empty value. */
    set_u64_key(b, 8);
    CHECK(o->get_mut(b, s, NULL, 0, 0, &created) != NULL);
    CHECK(created);
    CHECK(o->get(b, s, NULL, 0, &len) != NULL && len == 0);
    CHECK_EQ(o->count(b, s), 2);
    OPS(b)->destroy(b);
}

TEST(value_many_keys) {
    sl_keyed_backend_t *b = new_full();
    const sl_keyed_backend_ops_t *o = b->ops;
    int s = reg(b, "v", SL_STATE_VALUE), s2 = reg(b, "w", SL_STATE_VALUE);
    enum { N = 50000 };
    uint8_t ns[16];
    memset(ns, 0xab, sizeof ns);
    for (uint64_t k = 0; k < N; k++) {
        set_u64_key(b, k);
        uint64_t v = k * 3 + 1;
        CHECK_EQ(o->put(b, s, NULL, 0, &v, 8), 0);
        bool created;
        uint64_t *p = o->get_mut(b, s, ns, 16, 8, &created);
        CHECK(created);
        *p = k;
    }
    CHECK_EQ(o->count(b, s), 2 * N);
    CHECK_EQ(o->count(b, s2), 0);
    for (uint64_t k = 0; k < N; k++) {
        set_u64_key(b, k);
        uint32_t len;
        const uint64_t *v = o->get(b, s, NULL, 0, &len);
        CHECK(v && len == 8 && *v == k * 3 + 1);
        v = o->get(b, s, ns, 16, &len);
        CHECK(v && *v == k);
        CHECK(o->get(b, s2, NULL, 0, &len) == NULL); /* other state, same key */
    }
    /* Remove every odd key's empty-ns entry and every key's ns entry for k % 3 == 0. */
    for (uint64_t k = 0; k < N; k++) {
        set_u64_key(b, k);
        if (k & 1) CHECK_EQ(o->remove(b, s, NULL, 0), 1);
        if (k % 3 == 0) CHECK_EQ(o->remove(b, s, ns, 16), 1);
    }
    int64_t expect = N - N / 2 + (N - (N + 2) / 3);
    CHECK_EQ(o->count(b, s), expect);
    for (uint64_t k = 0; k < N; k++) {
        set_u64_key(b, k);
        uint32_t len;
        const uint64_t *v = o->get(b, s, NULL, 0, &len);
        if (k & 1) CHECK(v == NULL);
        else CHECK(v && *v == k * 3 + 1);
        v = o->get(b, s, ns, 16, &len);
        if (k % 3 == 0) CHECK(v == NULL);
        else CHECK(v && *v == k);
    }
    /* Remove everything, then add back. */
    for (uint64_t k = 0; k < N; k++) {
        set_u64_key(b, k);
        o->remove(b, s, NULL, 0);
        o->remove(b, s, ns, 16);
    }
    CHECK_EQ(o->count(b, s), 0);
    for (uint64_t k = 0; k < N; k += 2) {
        set_u64_key(b, k);
        CHECK_EQ(o->put(b, s, ns, 16, &k, 8), 0);
    }
    CHECK_EQ(o->count(b, s), N / 2);
    for (uint64_t k = 0; k < N; k++) {
        set_u64_key(b, k);
        uint32_t len;
        const uint64_t *v = o->get(b, s, ns, 16, &len);
        if (k & 1) CHECK(v == NULL);
        else CHECK(v && *v == k);
    }
    OPS(b)->destroy(b); /* non-empty: ASan checks that everything is freed */
}

/* ---- LIST ---- */

typedef struct collect {
    int n;
    char items[64][64];
    uint32_t lens[64];
    const void *ptrs[64];
    int stop_at; /* return 42 when n reaches this (0: never) */
} collect_t;

static int collect_cb(void *c, const void *v, uint32_t len) {
    collect_t *cl = c;
    if (cl->n < 64) {
        memcpy(cl->items[cl->n], v, len < 64 ? len : 64);
        cl->lens[cl->n] = len;
        cl->ptrs[cl->n] = v;
    }
    cl->n++;
    return cl->stop_at && cl->n == cl->stop_at ? 42 : 0;
}

/* Heavy churn on one VALUE state with a direct-indexed model: values of
 * changing sizes, removals, re-adds, and puts whose source is another
 * entry of the same state (so the source may move while it is copied). */
TEST(value_churn) {
    enum { N = 20000, OPS = 400000, MAXV = 48 };
    static uint8_t mval[N][MAXV];
    static uint32_t mlen[N];
    static bool mhas[N];
    memset(mhas, 0, sizeof mhas);
    sl_keyed_backend_t *b = sl_heap_backend_new(256, (sl_kg_range_t){17, 211});
    const sl_keyed_backend_ops_t *o = b->ops;
    int s = reg(b, "v", SL_STATE_VALUE);
    uint8_t ns[16] = {42};
    uint64_t x = 0x1234567;
    int64_t live = 0;
    /* Keys: u32 ids mapped to 8-byte keys that land in the range. */
    static uint64_t keyof[N];
    for (uint64_t k = 0, i = 0; i < N; k++) {
        int kg = sl_kg_of_hash(sl_kg_key_hash(&k, 8), 256);
        if (kg >= 17 && kg < 211) keyof[i++] = k;
    }
    for (int op = 0; op < OPS; op++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        uint32_t id = (uint32_t)(x % N), what = (uint32_t)(x >> 32) % 10;
        uint32_t len = (uint32_t)(x >> 48) % (MAXV + 1);
        sl_kb_set_key(b, &keyof[id], 8);
        if (what < 3) { /* put fresh bytes */
            uint8_t v[MAXV];
            for (uint32_t i = 0; i < len; i++) v[i] = (uint8_t)(op + i);
            CHECK_EQ(o->put(b, s, ns, 16, v, len), 0);
            live += !mhas[id];
            mhas[id] = true;
            mlen[id] = len;
            memcpy(mval[id], v, len);
        } else if (what < 5) { /* put a copy of another entry's value */
            uint32_t src = (uint32_t)(x >> 20) % N;
            if (!mhas[src]) continue;
            sl_kb_set_key(b, &keyof[src], 8);
            uint32_t sl;
            const void *sp = o->get(b, s, ns, 16, &sl);
            CHECK(sp && sl == mlen[src]);
            sl_kb_set_key(b, &keyof[id], 8);
            CHECK_EQ(o->put(b, s, ns, 16, sp, sl), 0);
            live += !mhas[id];
            mhas[id] = true;
            mlen[id] = mlen[src];
            memmove(mval[id], mval[src], mlen[src]);
        } else if (what < 7) { /* get_mut with the same or another length */
            uint32_t want = (x >> 40) & 1 && mhas[id] ? mlen[id] : len;
            bool created;
            uint8_t *p = o->get_mut(b, s, ns, 16, want, &created);
            CHECK(p != NULL);
            CHECK_EQ(created, !mhas[id]);
            if (!mhas[id]) {
                mlen[id] = 0;
                live++;
            }
            for (uint32_t i = mlen[id]; i < want; i++) mval[id][i] = 0;
            mhas[id] = true;
            mlen[id] = want;
            CHECK(want == 0 || memcmp(p, mval[id], want) == 0);
            if (want) p[want - 1] ^= 0x5a, mval[id][want - 1] ^= 0x5a;
        } else if (what < 9) {
            CHECK_EQ(o->remove(b, s, ns, 16), mhas[id] ? 1 : 0);
            live -= mhas[id];
            mhas[id] = false;
        } else {
            uint32_t gl;
            const void *p = o->get(b, s, ns, 16, &gl);
            if (!mhas[id]) CHECK(p == NULL);
            else CHECK(p && gl == mlen[id] && (gl == 0 || memcmp(p, mval[id], gl) == 0));
        }
    }
    CHECK_EQ(o->count(b, s), live);
    CHECK(live > N / 4);
    for (uint32_t id = 0; id < N; id++) {
        sl_kb_set_key(b, &keyof[id], 8);
        uint32_t gl;
        const void *p = o->get(b, s, ns, 16, &gl);
        if (!mhas[id]) CHECK(p == NULL);
        else CHECK(p && gl == mlen[id] && (gl == 0 || memcmp(p, mval[id], gl) == 0));
    }
    OPS(b)->destroy(b);
}

/* Namespaces and user keys longer than 16 bytes (another hash path), and a
 * max parallelism that is not a power of two. */
TEST(long_namespaces_odd_maxp) {
    sl_keyed_backend_t *b = sl_heap_backend_new(100, (sl_kg_range_t){0, 100});
    const sl_keyed_backend_ops_t *o = b->ops;
    int v = reg(b, "v", SL_STATE_VALUE), m = reg(b, "m", SL_STATE_MAP);
    uint8_t ns[40], uk[33];
    for (int i = 0; i < 40; i++) ns[i] = (uint8_t)(i * 3);
    for (int i = 0; i < 33; i++) uk[i] = (uint8_t)(200 - i);
    for (uint64_t k = 0; k < 3000; k++) {
        CHECK_EQ(sl_kb_set_key(b, &k, 8), (int)(sl_kg_key_hash(&k, 8) % 100));
        ns[39] = (uint8_t)k;
        CHECK_EQ(o->put(b, v, ns, 40, &k, 8), 0);
        uk[32] = (uint8_t)(k >> 3);
        CHECK_EQ(o->map_put(b, m, ns, 39, uk, 33, &k, 8), 0);
    }
    CHECK_EQ(o->count(b, v), 3000);
    CHECK_EQ(o->count(b, m), 3000);
    uint32_t len;
    for (uint64_t k = 0; k < 3000; k++) {
        sl_kb_set_key(b, &k, 8);
        ns[39] = (uint8_t)k;
        const uint64_t *p = o->get(b, v, ns, 40, &len);
        CHECK(p && len == 8 && *p == k);
        ns[39] ^= 1;
        p = o->get(b, v, ns, 40, &len);
        CHECK(p == NULL);
        uk[32] = (uint8_t)(k >> 3);
        p = o->map_get(b, m, ns, 39, uk, 33, &len);
        CHECK(p && *p == k);
        CHECK(o->map_get(b, m, ns, 39, uk, 32, &len) == NULL);
    }
    OPS(b)->destroy(b);
}

/* Enough entries in one table that some of them share a hash tag (32 bits:
 * ~10 pairs expected for 300K entries), so that full key and namespace
 * comparison is exercised; the namespaces differ only in their last bytes. */
TEST(tag_collisions) {
    sl_keyed_backend_t *b = sl_heap_backend_new(1, (sl_kg_range_t){0, 1});
    const sl_keyed_backend_ops_t *o = b->ops;
    int v = reg(b, "v", SL_STATE_VALUE);
    enum { N = 300000 };
    uint8_t ns[16];
    memset(ns, 7, 8);
    sl_kb_set_key(b, "k", 1);
    for (uint64_t i = 0; i < N; i++) {
        sl_st64(ns + 8, i);
        CHECK_EQ(o->put(b, v, ns, 16, &i, 8), 0);
    }
    CHECK_EQ(o->count(b, v), N);
    uint32_t len;
    for (uint64_t i = 0; i < N; i++) {
        sl_st64(ns + 8, i);
        const uint64_t *p = o->get(b, v, ns, 16, &len);
        CHECK(p && *p == i);
    }
    for (uint64_t i = 0; i < N; i += 2) {
        sl_st64(ns + 8, i);
        CHECK_EQ(o->remove(b, v, ns, 16), 1);
    }
    for (uint64_t i = 0; i < N; i++) {
        sl_st64(ns + 8, i);
        const uint64_t *p = o->get(b, v, ns, 16, &len);
        if (i % 2) CHECK(p && *p == i);
        else CHECK(p == NULL);
    }
    OPS(b)->destroy(b);
}

TEST(list_basics) {
    sl_keyed_backend_t *b = new_full();
    const sl_keyed_backend_ops_t *o = b->ops;
    int s = reg(b, "l", SL_STATE_LIST);
    uint8_t ns[16] = {3};
    sl_kb_set_key(b, "k", 1);
    collect_t c = {0};
    CHECK_EQ(o->list_foreach(b, s, ns, 16, collect_cb, &c), 0);
    CHECK_EQ(c.n, 0);
    const char *words[] = {"alpha", "", "gamma", "de", "epsilon-epsilon"};
    for (int i = 0; i < 5; i++) CHECK_EQ(o->list_add(b, s, ns, 16, words[i], (uint32_t)strlen(words[i])), 0);
    CHECK_EQ(o->count(b, s), 1);
    memset(&c, 0, sizeof c);
    CHECK_EQ(o->list_foreach(b, s, ns, 16, collect_cb, &c), 5);
    CHECK_EQ(c.n, 5);
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(c.lens[i], strlen(words[i]));
        CHECK(memcmp(c.items[i], words[i], c.lens[i]) == 0);
        CHECK(((uintptr_t)c.ptrs[i] & 7) == 0);
    }
    /* Early stop returns the callback's value. */
    memset(&c, 0, sizeof c);
    c.stop_at = 2;
    CHECK_EQ(o->list_foreach(b, s, ns, 16, collect_cb, &c), 42);
    CHECK_EQ(c.n, 2);
    /* NULL callback counts. */
    CHECK_EQ(o->list_foreach(b, s, ns, 16, NULL, NULL), 5);
    /* Other namespace and empty namespace are separate lists. */
    CHECK_EQ(o->list_foreach(b, s, NULL, 0, NULL, NULL), 0);
    CHECK_EQ(o->list_add(b, s, NULL, 0, "z", 1), 0);
    CHECK_EQ(o->list_foreach(b, s, NULL, 0, NULL, NULL), 1);
    CHECK_EQ(o->list_foreach(b, s, ns, 16, NULL, NULL), 5);
    CHECK_EQ(o->count(b, s), 2);

    /* Replace with elements that point into the current list (reversed). */
    memset(&c, 0, sizeof c);
    o->list_foreach(b, s, ns, 16, collect_cb, &c);
    const void *vals[3] = {c.ptrs[4], c.ptrs[2], c.ptrs[0]};
    uint32_t lens[3] = {c.lens[4], c.lens[2], c.lens[0]};
    CHECK_EQ(o->list_replace(b, s, ns, 16, 3, vals, lens), 0);
    memset(&c, 0, sizeof c);
    CHECK_EQ(o->list_foreach(b, s, ns, 16, collect_cb, &c), 3);
    CHECK(c.lens[0] == 15 && memcmp(c.items[0], "epsilon-epsilon", 15) == 0);
    CHECK(c.lens[1] == 5 && memcmp(c.items[1], "gamma", 5) == 0);
    CHECK(c.lens[2] == 5 && memcmp(c.items[2], "alpha", 5) == 0);
    /* Append after replace keeps order. */
    CHECK_EQ(o->list_add(b, s, ns, 16, "omega", 5), 0);
    memset(&c, 0, sizeof c);
    CHECK_EQ(o->list_foreach(b, s, ns, 16, collect_cb, &c), 4);
    CHECK(c.lens[3] == 5 && memcmp(c.items[3], "omega", 5) == 0);
    /* Append an element of the list itself (aliasing across a regrow). */
    for (int i = 0; i < 20; i++) {
        memset(&c, 0, sizeof c);
        o->list_foreach(b, s, ns, 16, collect_cb, &c);
        CHECK_EQ(o->list_add(b, s, ns, 16, c.ptrs[0], c.lens[0]), 0);
    }
    memset(&c, 0, sizeof c);
    CHECK_EQ(o->list_foreach(b, s, ns, 16, collect_cb, &c), 24);
    CHECK(c.lens[23] == 15 && memcmp(c.items[23], "epsilon-epsilon", 15) == 0);

    /* Replace on an absent list creates it; n = 0 removes. */
    sl_kb_set_key(b, "other", 5);
    const void *one[1] = {"solo"};
    uint32_t onel[1] = {4};
    CHECK_EQ(o->list_replace(b, s, NULL, 0, 1, one, onel), 0);
    CHECK_EQ(o->count(b, s), 3);
    CHECK_EQ(o->list_replace(b, s, NULL, 0, 0, NULL, NULL), 0);
    CHECK_EQ(o->list_foreach(b, s, NULL, 0, NULL, NULL), 0);
    CHECK_EQ(o->count(b, s), 2);
    CHECK_EQ(o->list_replace(b, s, NULL, 0, 0, NULL, NULL), 0); /* removing nothing is fine */
    /* Generic remove works on lists. */
    sl_kb_set_key(b, "k", 1);
    CHECK_EQ(o->remove(b, s, ns, 16), 1);
    CHECK_EQ(o->list_foreach(b, s, ns, 16, NULL, NULL), 0);
    CHECK_EQ(o->count(b, s), 1);

    /* Kinds do not mix. */
    int v = reg(b, "v", SL_STATE_VALUE);
    uint32_t len;
    CHECK(o->get(b, s, NULL, 0, &len) == NULL); /* a list state through the value API */
    CHECK(o->list_add(b, v, NULL, 0, "x", 1) < 0);
    CHECK(o->list_foreach(b, v, NULL, 0, NULL, NULL) < 0);
    CHECK(o->map_put(b, s, NULL, 0, "a", 1, "b", 1) < 0);
    OPS(b)->destroy(b);
}

typedef struct lorder {
    uint32_t next, n, bad;
} lorder_t;

/* Element i of key k is {i, 2i, 3i} cut to (i % 3 + 1) * 4 bytes; they
 * must come back as i = k, k + 7, k + 14, ... */
static int lorder_cb(void *c, const void *v, uint32_t len) {
    lorder_t *l = c;
    uint32_t i = l->next;
    if (len != (i % 3 + 1) * 4 || sl_ld32(v) != i || (len >= 8 && sl_ld32((const uint8_t *)v + 4) != 2 * i))
        l->bad++;
    l->next += 7;
    l->n++;
    return 0;
}

TEST(list_long) {
    sl_keyed_backend_t *b = new_full();
    const sl_keyed_backend_ops_t *o = b->ops;
    int s = reg(b, "l", SL_STATE_LIST);
    enum { N = 20000 };
    for (uint32_t i = 0; i < N; i++) {
        set_u64_key(b, i % 7);
        uint32_t v[3] = {i, i * 2, i * 3};
        CHECK_EQ(o->list_add(b, s, NULL, 0, v, (i % 3 + 1) * 4), 0);
    }
    CHECK_EQ(o->count(b, s), 7);
    for (uint64_t k = 0; k < 7; k++) {
        set_u64_key(b, k);
        lorder_t l = {(uint32_t)k, 0, 0};
        int n = o->list_foreach(b, s, NULL, 0, lorder_cb, &l);
        CHECK_EQ(n, (N - (int)k + 6) / 7);
        CHECK_EQ(l.n, n);
        CHECK_EQ(l.bad, 0);
    }
    OPS(b)->destroy(b);
}

/* ---- MAP ---- */

typedef struct mcollect {
    int n;
    char k[32][16], v[32][64];
    uint32_t kl[32], vl[32];
    int stop_at;
} mcollect_t;

static int mcollect_cb(void *c, const void *k, uint32_t klen, const void *v, uint32_t vlen) {
    mcollect_t *m = c;
    if (m->n < 32) {
        memcpy(m->k[m->n], k, klen < 16 ? klen : 16);
        memcpy(m->v[m->n], v, vlen < 64 ? vlen : 64);
        m->kl[m->n] = klen;
        m->vl[m->n] = vlen;
    }
    m->n++;
    return m->stop_at && m->n == m->stop_at ? 7 : 0;
}

/* Index of user key k in m, or -1. */
static int mfind(const mcollect_t *m, const char *k) {
    for (int i = 0; i < m->n && i < 32; i++)
        if (m->kl[i] == strlen(k) && memcmp(m->k[i], k, m->kl[i]) == 0) return i;
    return -1;
}

TEST(map_basics) {
    sl_keyed_backend_t *b = new_full();
    const sl_keyed_backend_ops_t *o = b->ops;
    int s = reg(b, "m", SL_STATE_MAP);
    uint8_t ns[16] = {5};
    uint32_t len;
    sl_kb_set_key(b, "user", 4);
    CHECK(o->map_get(b, s, ns, 16, "a", 1, &len) == NULL);
    CHECK_EQ(o->map_remove(b, s, ns, 16, "a", 1), 0);
    CHECK_EQ(o->map_foreach(b, s, ns, 16, mcollect_cb, &(mcollect_t){0}), 0);
    CHECK_EQ(o->map_put(b, s, ns, 16, "a", 1, "va", 2), 0);
    CHECK_EQ(o->map_put(b, s, ns, 16, "bb", 2, "vbb", 3), 0);
    CHECK_EQ(o->map_put(b, s, ns, 16, "", 0, "empty-key", 9), 0);
    CHECK_EQ(o->map_put(b, s, ns, 16, "z", 1, NULL, 0), 0);
    CHECK_EQ(o->count(b, s), 1); /* one (key, ns) */
    const char *v = o->map_get(b, s, ns, 16, "a", 1, &len);
    CHECK(v && len == 2 && memcmp(v, "va", 2) == 0);
    v = o->map_get(b, s, ns, 16, "", 0, &len);
    CHECK(v && len == 9 && memcmp(v, "empty-key", 9) == 0);
    v = o->map_get(b, s, ns, 16, "z", 1, &len);
    CHECK(v && len == 0);
    CHECK(o->map_get(b, s, ns, 16, "b", 1, &len) == NULL);
    CHECK(o->map_get(b, s, NULL, 0, "a", 1, &len) == NULL); /* other ns */

    /* Overwrite, with other lengths, and from the map's own bytes. */
    CHECK_EQ(o->map_put(b, s, ns, 16, "a", 1, "a-longer-value-for-a", 20), 0);
    v = o->map_get(b, s, ns, 16, "a", 1, &len);
    CHECK(v && len == 20 && memcmp(v, "a-longer-value-for-a", 20) == 0);
    v = o->map_get(b, s, ns, 16, "bb", 2, &len);
    CHECK_EQ(o->map_put(b, s, ns, 16, "a", 1, v, len), 0); /* copy bb's value to a */
    v = o->map_get(b, s, ns, 16, "a", 1, &len);
    CHECK(v && len == 3 && memcmp(v, "vbb", 3) == 0);

    mcollect_t m = {0};
    CHECK_EQ(o->map_foreach(b, s, ns, 16, mcollect_cb, &m), 4);
    CHECK_EQ(m.n, 4);
    int i = mfind(&m, "a");
    CHECK(i >= 0 && m.vl[i] == 3 && memcmp(m.v[i], "vbb", 3) == 0);
    i = mfind(&m, "bb");
    CHECK(i >= 0 && m.vl[i] == 3);
    i = mfind(&m, "");
    CHECK(i >= 0 && m.vl[i] == 9);
    i = mfind(&m, "z");
    CHECK(i >= 0 && m.vl[i] == 0);
    m = (mcollect_t){0};
    m.stop_at = 2;
    CHECK_EQ(o->map_foreach(b, s, ns, 16, mcollect_cb, &m), 7);

    /* Remove one by one; the last removal removes the (key, ns). */
    CHECK_EQ(o->map_remove(b, s, ns, 16, "bb", 2), 1);
    CHECK_EQ(o->map_remove(b, s, ns, 16, "bb", 2), 0);
    CHECK(o->map_get(b, s, ns, 16, "bb", 2, &len) == NULL);
    CHECK_EQ(o->map_foreach(b, s, ns, 16, NULL, NULL), 3);
    CHECK_EQ(o->map_remove(b, s, ns, 16, "a", 1), 1);
    CHECK_EQ(o->map_remove(b, s, ns, 16, "", 0), 1);
    CHECK_EQ(o->count(b, s), 1);
    CHECK_EQ(o->map_remove(b, s, ns, 16, "z", 1), 1);
    CHECK_EQ(o->count(b, s), 0);
    CHECK_EQ(o->map_foreach(b, s, ns, 16, NULL, NULL), 0);
    /* And back. */
    CHECK_EQ(o->map_put(b, s, ns, 16, "a", 1, "again", 5), 0);
    CHECK_EQ(o->count(b, s), 1);
    v = o->map_get(b, s, ns, 16, "a", 1, &len);
    CHECK(v && len == 5 && memcmp(v, "again", 5) == 0);

    /* Many user keys in one map (nested growth); generic remove drops it all. */
    for (uint32_t k = 0; k < 5000; k++) {
        uint64_t val = (uint64_t)k * k;
        CHECK_EQ(o->map_put(b, s, NULL, 0, &k, 4, &val, 8), 0);
    }
    CHECK_EQ(o->count(b, s), 2);
    CHECK_EQ(o->map_foreach(b, s, NULL, 0, NULL, NULL), 5000);
    for (uint32_t k = 0; k < 5000; k++) {
        const uint64_t *pv = o->map_get(b, s, NULL, 0, &k, 4, &len);
        CHECK(pv && len == 8 && *pv == (uint64_t)k * k);
    }
    for (uint32_t k = 0; k < 5000; k += 2) CHECK_EQ(o->map_remove(b, s, NULL, 0, &k, 4), 1);
    CHECK_EQ(o->map_foreach(b, s, NULL, 0, NULL, NULL), 2500);
    for (uint32_t k = 0; k < 5000; k++) {
        const uint64_t *pv = o->map_get(b, s, NULL, 0, &k, 4, &len);
        if (k % 2 == 0) CHECK(pv == NULL);
        else CHECK(pv && *pv == (uint64_t)k * k);
    }
    CHECK_EQ(o->remove(b, s, NULL, 0), 1);
    CHECK_EQ(o->count(b, s), 1);
    CHECK(o->map_get(b, s, NULL, 0, "\1\0\0\0", 4, &len) == NULL);
    OPS(b)->destroy(b); /* still holds the ns map: freed by destroy */
}

/* ---- all entries ---- */

typedef struct ecollect {
    int n;
    char keys[512][16];
    uint32_t klen[512];
    uint8_t ns[512][16];
    uint32_t nslen[512];
    int stop_at;
} ecollect_t;

static int ecollect_cb(void *c, const void *key, uint32_t klen, const void *ns, uint32_t nslen) {
    ecollect_t *e = c;
    if (e->n < 512 && klen <= 16 && nslen <= 16) {
        memcpy(e->keys[e->n], key, klen);
        e->klen[e->n] = klen;
        memcpy(e->ns[e->n], ns, nslen);
        e->nslen[e->n] = nslen;
    }
    e->n++;
    return e->stop_at && e->n == e->stop_at ? 5 : 0;
}

TEST(foreach_entry_across_key_groups) {
    sl_kg_range_t r = {40, 90};
    sl_keyed_backend_t *b = sl_heap_backend_new(128, r);
    const sl_keyed_backend_ops_t *o = b->ops;
    int s = reg(b, "v", SL_STATE_VALUE), l = reg(b, "l", SL_STATE_LIST);
    char keys[200][32];
    uint32_t klens[200];
    unsigned n = 0;
    int kgs_seen[128] = {0};
    for (int i = 0; i < 200; i++) {
        klens[i] = key_in_range(keys[i], 128, r, &n);
        int kg = sl_kb_set_key(b, keys[i], klens[i]);
        CHECK(kg >= 40 && kg < 90);
        kgs_seen[kg] = 1;
        uint8_t ns[4] = {(uint8_t)i, 1, 2, 3};
        CHECK_EQ(o->put(b, s, NULL, 0, &i, sizeof i), 0);
        if (i % 2) CHECK_EQ(o->put(b, s, ns, 4, &i, sizeof i), 0);
        if (i % 5 == 0) CHECK_EQ(o->list_add(b, l, ns, 4, "x", 1), 0);
    }
    int distinct = 0;
    for (int g = 0; g < 128; g++) distinct += kgs_seen[g];
    CHECK(distinct >= 30); /* the keys really span many key groups */
    CHECK_EQ(o->count(b, s), 300);
    CHECK_EQ(o->count(b, l), 40);
    static ecollect_t e;
    memset(&e, 0, sizeof e);
    CHECK_EQ(o->foreach_entry(b, s, ecollect_cb, &e), 0);
    CHECK_EQ(e.n, 300);
    /* Every visited (key, ns) is one we wrote, each exactly once. */
    static int hits[200][2];
    memset(hits, 0, sizeof hits);
    for (int j = 0; j < e.n; j++) {
        int found = -1;
        for (int i = 0; i < 200; i++)
            if (klens[i] == e.klen[j] && memcmp(keys[i], e.keys[j], klens[i]) == 0) found = i;
        CHECK(found >= 0);
        if (e.nslen[j] == 0) hits[found][0]++;
        else {
            CHECK_EQ(e.nslen[j], 4);
            CHECK_EQ(e.ns[j][0], (uint8_t)found);
            CHECK(found % 2 == 1);
            hits[found][1]++;
        }
    }
    for (int i = 0; i < 200; i++) {
        CHECK_EQ(hits[i][0], 1);
        CHECK_EQ(hits[i][1], i % 2);
    }
    memset(&e, 0, sizeof e);
    e.stop_at = 10;
    CHECK_EQ(o->foreach_entry(b, s, ecollect_cb, &e), 5);
    CHECK_EQ(e.n, 10);
    memset(&e, 0, sizeof e);
    CHECK_EQ(o->foreach_entry(b, l, ecollect_cb, &e), 0);
    CHECK_EQ(e.n, 40);
    OPS(b)->destroy(b);
}

/* ------------------------------------------------------------------ */
/* randomized: the backend against a naive model                       */

typedef struct rbytes {
    uint32_t n;
    uint8_t b[40];
} rbytes_t;

typedef struct rent {
    int sid;
    rbytes_t key, ns;
    rbytes_t val;          /* VALUE */
    rbytes_t *list;        /* LIST */
    int nlist, caplist;
    rbytes_t mk[8], mv[8]; /* MAP (at most 8 user keys in this test) */
    int nmap;
    int seen;
} rent_t;

typedef struct model {
    rent_t *e;
    int n, cap;
} model_t;

static bool rb_eq(const rbytes_t *a, const void *p, uint32_t n) {
    return a->n == n && (n == 0 || memcmp(a->b, p, n) == 0);
}

static rent_t *m_find(model_t *m, int sid, const rbytes_t *key, const rbytes_t *ns) {
    for (int i = 0; i < m->n; i++)
        if (m->e[i].sid == sid && rb_eq(&m->e[i].key, key->b, key->n) && rb_eq(&m->e[i].ns, ns->b, ns->n))
            return &m->e[i];
    return NULL;
}

static rent_t *m_add(model_t *m, int sid, const rbytes_t *key, const rbytes_t *ns) {
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 64;
        m->e = sl_realloc(m->e, (size_t)m->cap * sizeof *m->e);
    }
    rent_t *e = &m->e[m->n++];
    memset(e, 0, sizeof *e);
    e->sid = sid;
    e->key = *key;
    e->ns = *ns;
    return e;
}

static void m_del(model_t *m, rent_t *e) {
    sl_free(e->list);
    *e = m->e[--m->n];
}

static void m_list_add(rent_t *e, const rbytes_t *v) {
    if (e->nlist == e->caplist) {
        e->caplist = e->caplist ? e->caplist * 2 : 4;
        e->list = sl_realloc(e->list, (size_t)e->caplist * sizeof *e->list);
    }
    e->list[e->nlist++] = *v;
}

static int64_t m_count(const model_t *m, int sid) {
    int64_t c = 0;
    for (int i = 0; i < m->n; i++) c += m->e[i].sid == sid;
    return c;
}

static uint64_t rng_state;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static uint32_t rndn(uint32_t n) { return (uint32_t)(rnd() % n); }

static void rnd_bytes(rbytes_t *r, uint32_t maxlen) {
    r->n = rndn(maxlen + 1);
    for (uint32_t i = 0; i < r->n; i++) r->b[i] = (uint8_t)rnd();
}

/* Compares a list element by element (callback state). */
typedef struct lcmp {
    const rent_t *e;
    int i, bad;
    const void *ptrs[256];
    uint32_t lens[256];
} lcmp_t;

static int lcmp_cb(void *c, const void *v, uint32_t len) {
    lcmp_t *l = c;
    if (!l->e || l->i >= l->e->nlist || !rb_eq(&l->e->list[l->i], v, len)) l->bad = 1;
    if (l->i < 256) {
        l->ptrs[l->i] = v;
        l->lens[l->i] = len;
    }
    l->i++;
    return 0;
}

typedef struct mcmp {
    rent_t *e;
    int n, bad;
} mcmp_t;

static int mcmp_cb(void *c, const void *k, uint32_t klen, const void *v, uint32_t vlen) {
    mcmp_t *m = c;
    m->n++;
    if (!m->e) {
        m->bad = 1;
        return 0;
    }
    for (int i = 0; i < m->e->nmap; i++)
        if (rb_eq(&m->e->mk[i], k, klen)) {
            if (!rb_eq(&m->e->mv[i], v, vlen)) m->bad = 1;
            return 0;
        }
    m->bad = 1;
    return 0;
}

typedef struct ecmp {
    model_t *m;
    int sid, n, bad;
} ecmp_t;

static int ecmp_cb(void *c, const void *key, uint32_t klen, const void *ns, uint32_t nslen) {
    ecmp_t *x = c;
    x->n++;
    rbytes_t k = {0}, n = {0};
    if (klen > sizeof k.b || nslen > sizeof n.b) {
        x->bad = 1;
        return 0;
    }
    k.n = klen;
    memcpy(k.b, key, klen);
    n.n = nslen;
    memcpy(n.b, ns, nslen);
    rent_t *e = m_find(x->m, x->sid, &k, &n);
    if (!e || e->seen) x->bad = 1;
    else e->seen = 1;
    return 0;
}

static void random_run(uint64_t seed, int nops) {
    rng_state = seed;
    sl_kg_range_t r = {3, 70};
    sl_keyed_backend_t *b = sl_heap_backend_new(128, r);
    const sl_keyed_backend_ops_t *o = b->ops;
    enum { NKEYS = 60, NNS = 5, NUK = 8 };
    int sids[4];
    sids[0] = reg(b, "v0", SL_STATE_VALUE);
    sids[1] = reg(b, "l", SL_STATE_LIST);
    sids[2] = reg(b, "m", SL_STATE_MAP);
    sids[3] = reg(b, "v1", SL_STATE_VALUE);
    CHECK(sids[0] >= 0 && sids[1] >= 0 && sids[2] >= 0 && sids[3] >= 0);

    /* Keys: random byte strings (lengths 0..12) whose key group is in range. */
    static rbytes_t keys[NKEYS], nss[NNS], uks[NUK];
    int nk = 0;
    while (nk < NKEYS) {
        rbytes_t k;
        rnd_bytes(&k, 12);
        int kg = sl_kg_of_hash(sl_kg_key_hash(k.b, k.n), 128);
        if (kg < r.start || kg >= r.end) continue;
        bool dup = false;
        for (int i = 0; i < nk; i++) dup |= rb_eq(&keys[i], k.b, k.n);
        if (!dup) keys[nk++] = k;
    }
    static const uint32_t nslens[NNS] = {0, 3, 8, 16, 16};
    for (int i = 0; i < NNS; i++) {
        nss[i].n = nslens[i];
        for (uint32_t j = 0; j < nss[i].n; j++) nss[i].b[j] = (uint8_t)(i * 31 + j);
    }
    for (int i = 0; i < NUK; i++) {
        uks[i].n = (uint32_t)i % 5; /* includes the empty user key */
        for (uint32_t j = 0; j < uks[i].n; j++) uks[i].b[j] = (uint8_t)(i + 100);
    }

    model_t m = {0};
    for (int op = 0; op < nops; op++) {
        const rbytes_t *key = &keys[rndn(NKEYS)], *ns = &nss[rndn(NNS)];
        sl_kb_set_key(b, key->b, key->n);
        const void *nsp = ns->n ? ns->b : NULL;
        uint32_t what = rndn(100), len;
        if (what < 40) { /* VALUE */
            int sid = rndn(2) ? sids[0] : sids[3];
            rent_t *e = m_find(&m, sid, key, ns);
            uint32_t sub = rndn(4);
            if (sub == 0) {
                rbytes_t v;
                rnd_bytes(&v, 40);
                CHECK_EQ(o->put(b, sid, nsp, ns->n, v.b, v.n), 0);
                if (!e) e = m_add(&m, sid, key, ns);
                e->val = v;
            } else if (sub == 1) {
                const void *p = o->get(b, sid, nsp, ns->n, &len);
                if (!e) CHECK(p == NULL);
                else CHECK(p && rb_eq(&e->val, p, len));
            } else if (sub == 2) {
                uint32_t want = e ? e->val.n : rndn(41);
                bool created;
                uint8_t *p = o->get_mut(b, sid, nsp, ns->n, want, &created);
                CHECK(p != NULL);
                CHECK_EQ(created, e == NULL);
                if (!e) {
                    e = m_add(&m, sid, key, ns);
                    e->val.n = want;
                    memset(e->val.b, 0, want);
                }
                CHECK(rb_eq(&e->val, p, want));
                for (uint32_t i = 0; i < want; i++) e->val.b[i] = p[i] = (uint8_t)(p[i] + i + 1);
                CHECK_EQ(o->put(b, sid, nsp, ns->n, p, want), 0);
            } else {
                CHECK_EQ(o->remove(b, sid, nsp, ns->n), e ? 1 : 0);
                if (e) m_del(&m, e);
            }
        } else if (what < 70) { /* LIST */
            int sid = sids[1];
            rent_t *e = m_find(&m, sid, key, ns);
            uint32_t sub = rndn(10);
            if (sub < 4) {
                rbytes_t v;
                rnd_bytes(&v, 20);
                CHECK_EQ(o->list_add(b, sid, nsp, ns->n, v.b, v.n), 0);
                if (!e) e = m_add(&m, sid, key, ns);
                m_list_add(e, &v);
            } else if (sub == 4 && e && e->nlist <= 256) {
                /* Append a copy of one of its own elements (the source may
                 * move while the list grows). */
                static lcmp_t lc;
                memset(&lc, 0, sizeof lc);
                lc.e = e;
                o->list_foreach(b, sid, nsp, ns->n, lcmp_cb, &lc);
                int j = (int)rndn((uint32_t)e->nlist);
                rbytes_t v = e->list[j];
                CHECK_EQ(o->list_add(b, sid, nsp, ns->n, lc.ptrs[j], lc.lens[j]), 0);
                m_list_add(e, &v);
            } else if (sub < 8) {
                static lcmp_t lc;
                memset(&lc, 0, sizeof lc);
                lc.e = e;
                int n = o->list_foreach(b, sid, nsp, ns->n, lcmp_cb, &lc);
                CHECK_EQ(n, e ? e->nlist : 0);
                CHECK(!lc.bad);
            } else if (sub == 8 && e && e->nlist <= 256) {
                /* Replace with a random selection of the current elements,
                 * passed as pointers into the backend's own storage. */
                static lcmp_t lc;
                memset(&lc, 0, sizeof lc);
                lc.e = e;
                o->list_foreach(b, sid, nsp, ns->n, lcmp_cb, &lc);
                int n = (int)rndn(6);
                const void *vals[6];
                uint32_t lens[6];
                rbytes_t nl[6];
                for (int i = 0; i < n; i++) {
                    int j = (int)rndn((uint32_t)e->nlist);
                    vals[i] = lc.ptrs[j];
                    lens[i] = lc.lens[j];
                    nl[i] = e->list[j];
                }
                CHECK_EQ(o->list_replace(b, sid, nsp, ns->n, n, vals, lens), 0);
                if (n == 0) m_del(&m, e);
                else {
                    e->nlist = 0;
                    for (int i = 0; i < n; i++) m_list_add(e, &nl[i]);
                }
            } else {
                CHECK_EQ(o->remove(b, sid, nsp, ns->n), e ? 1 : 0);
                if (e) m_del(&m, e);
            }
        } else if (what < 99) { /* MAP */
            int sid = sids[2];
            rent_t *e = m_find(&m, sid, key, ns);
            const rbytes_t *uk = &uks[rndn(NUK)];
            int ui = -1;
            for (int i = 0; e && i < e->nmap; i++)
                if (rb_eq(&e->mk[i], uk->b, uk->n)) ui = i;
            uint32_t sub = rndn(8);
            if (sub < 3) {
                rbytes_t v;
                rnd_bytes(&v, 30);
                const void *src = v.b;
                if (e && rndn(3) == 0) { /* copy another user key's value from the map itself */
                    int j = (int)rndn((uint32_t)e->nmap);
                    v = e->mv[j];
                    src = o->map_get(b, sid, nsp, ns->n, e->mk[j].b, e->mk[j].n, &len);
                    CHECK(src && rb_eq(&v, src, len));
                }
                CHECK_EQ(o->map_put(b, sid, nsp, ns->n, uk->b, uk->n, src, v.n), 0);
                if (!e) e = m_add(&m, sid, key, ns);
                if (ui < 0) {
                    ui = e->nmap++;
                    e->mk[ui] = *uk;
                }
                e->mv[ui] = v;
            } else if (sub < 5) {
                const void *p = o->map_get(b, sid, nsp, ns->n, uk->b, uk->n, &len);
                if (ui < 0) CHECK(p == NULL);
                else CHECK(p && rb_eq(&e->mv[ui], p, len));
            } else if (sub < 7) {
                CHECK_EQ(o->map_remove(b, sid, nsp, ns->n, uk->b, uk->n), ui >= 0 ? 1 : 0);
                if (ui >= 0) {
                    e->mk[ui] = e->mk[e->nmap - 1];
                    e->mv[ui] = e->mv[e->nmap - 1];
                    if (--e->nmap == 0) m_del(&m, e);
                }
            } else {
                mcmp_t mc = {e, 0, 0};
                int n = o->map_foreach(b, sid, nsp, ns->n, mcmp_cb, &mc);
                CHECK_EQ(n, e ? e->nmap : 0);
                CHECK_EQ(mc.n, n);
                CHECK(!mc.bad);
            }
        } else { /* whole-state checks */
            for (int i = 0; i < 4; i++) {
                CHECK_EQ(o->count(b, sids[i]), m_count(&m, sids[i]));
                for (int j = 0; j < m.n; j++) m.e[j].seen = 0;
                ecmp_t x = {&m, sids[i], 0, 0};
                CHECK_EQ(o->foreach_entry(b, sids[i], ecmp_cb, &x), 0);
                CHECK_EQ(x.n, m_count(&m, sids[i]));
                CHECK(!x.bad);
            }
        }
    }
    /* Final full comparison of every model entry. */
    for (int i = 0; i < m.n; i++) {
        rent_t *e = &m.e[i];
        uint32_t len;
        sl_kb_set_key(b, e->key.b, e->key.n);
        const void *nsp = e->ns.n ? e->ns.b : NULL;
        if (e->sid == sids[0] || e->sid == sids[3]) {
            const void *p = o->get(b, e->sid, nsp, e->ns.n, &len);
            CHECK(p && rb_eq(&e->val, p, len));
        } else if (e->sid == sids[1]) {
            static lcmp_t lc;
            memset(&lc, 0, sizeof lc);
            lc.e = e;
            CHECK_EQ(o->list_foreach(b, e->sid, nsp, e->ns.n, lcmp_cb, &lc), e->nlist);
            CHECK(!lc.bad);
        } else {
            mcmp_t mc = {e, 0, 0};
            CHECK_EQ(o->map_foreach(b, e->sid, nsp, e->ns.n, mcmp_cb, &mc), e->nmap);
            CHECK(!mc.bad);
        }
    }
    for (int i = 0; i < 4; i++) CHECK_EQ(o->count(b, sids[i]), m_count(&m, sids[i]));
    /* Something really happened. */
    CHECK(m.n > 50);
    while (m.n) m_del(&m, &m.e[m.n - 1]);
    sl_free(m.e);
    OPS(b)->destroy(b);
}

TEST(random_against_model) {
    static const uint64_t seeds[] = {0x9e3779b97f4a7c15ULL, 12345, 0xdeadbeefULL, 77};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++) {
        int before = sl_test_failures;
        random_run(seeds[i], 30000);
        if (sl_test_failures != before) {
            fprintf(stderr, "random_against_model: seed %" PRIu64 " failed\n", seeds[i]);
            return;
        }
    }
}

int main(void) {
    RUN(set_key_base);
    RUN(register_state);
    RUN(value_basics);
    RUN(value_get_mut);
    RUN(value_many_keys);
    RUN(value_churn);
    RUN(long_namespaces_odd_maxp);
    RUN(tag_collisions);
    RUN(list_basics);
    RUN(list_long);
    RUN(map_basics);
    RUN(foreach_entry_across_key_groups);
    RUN(random_against_model);
    TEST_MAIN_END();
}
