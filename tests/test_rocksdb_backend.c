/*
 * test_rocksdb_backend.c — the RocksDB keyed state backend on a real
 * RocksDB (librocksdb): the behaviours test_state_backend.c checks for the
 * heap backend, randomized differential runs against the heap backend
 * (every read compared, and the full content compared as snapshot_write
 * bytes), snapshots written on another thread while the task keeps
 * writing, canonical restores in both directions and of corrupt blocks,
 * native checkpoints restored at the same range and split / merged
 * (2 -> 4, 4 -> 2), TTL in snapshots and in compaction, memory options,
 * and a measurement (get_mut + put of 1M keys, native snapshot of ~100 MB).
 *
 * The heap backend is the reference: its blocks are what the canonical
 * format says (test_state_snapshot.c checks them against an encoder of its
 * own).  The TTL expectations come from an encoder written here.
 */
#include "test.h"

#include <ftw.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>

#include "common/common.h"
#include "state/rocksdb_backend.h"
#include "state/state_backend.h"

#define OPS(b) ((b)->ops)

#if defined(__SANITIZE_THREAD__)
/* librocksdb is not built with TSan: its lock-free memtable and reference
 * counts synchronize through atomics TSan cannot see, while it does see the
 * memcpy/memcmp they guard (reports with RocksDB's memory on both sides),
 * also those it does through std::string (libstdc++, which nothing of
 * sluice uses).  Ignore what RocksDB's own code does; ours stays checked. */
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void) {
    return "called_from_lib:librocksdb.so\ncalled_from_lib:libstdc++.so\nrace:librocksdb.so\n";
}
#endif

/* ------------------------------------------------------------------ */
/* helpers                                                             */

static int dir_seq;

static void tmp_path(char *out, size_t n, const char *what) {
    if (snprintf(out, n, "%s/%s-%d", sl_test_tmpdir(), what, dir_seq++) >= (int)n) abort();
}

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    remove(p);
    return 0;
}
static void rm_rf(const char *p) { nftw(p, rm_cb, 16, FTW_DEPTH | FTW_PHYS); }
static bool path_exists(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

static sl_keyed_backend_t *rdb_new_opts(int maxp, sl_kg_range_t r, sl_rocksdb_opts_t *o, char *dirbuf) {
    char dir[512];
    tmp_path(dir, sizeof dir, "db");
    if (dirbuf) strcpy(dirbuf, dir);
    o->dir = dir;
    char err[512] = "";
    sl_keyed_backend_t *b = sl_rocksdb_backend_new(maxp, r, o, err, sizeof err);
    if (!b) fprintf(stderr, "sl_rocksdb_backend_new: %s\n", err);
    return b;
}

static sl_keyed_backend_t *rdb_new(int maxp, sl_kg_range_t r) {
    sl_rocksdb_opts_t o = {.write_buffer_bytes = 4 << 20, .block_cache_bytes = 8 << 20};
    return rdb_new_opts(maxp, r, &o, NULL);
}

static sl_keyed_backend_t *new_full(void) { return rdb_new(128, (sl_kg_range_t){0, 128}); }

static int reg(sl_keyed_backend_t *b, const char *name, sl_state_kind_t kind) {
    sl_state_desc_t d = {.name = name, .kind = kind};
    return OPS(b)->register_state(b, &d);
}

static int reg_ttl(sl_keyed_backend_t *b, const char *name, sl_state_kind_t kind, int64_t ttl) {
    sl_state_desc_t d = {.name = name, .kind = kind, .ttl_ms = ttl};
    return OPS(b)->register_state(b, &d);
}

static void set_u64_key(sl_keyed_backend_t *b, uint64_t k) { sl_kb_set_key(b, &k, sizeof k); }

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

static uint64_t rng_state;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static uint32_t rndn(uint32_t n) { return (uint32_t)(rnd() % n); }

/* Writes key group kg of view s; the block (owned by the caller). */
static sl_buf_t write_kg(const sl_kb_snapshot_t *s, int kg) {
    sl_buf_t out = {0};
    if (sl_kb_snapshot_write(s, kg, &out) != 0) out.len = (size_t)-1;
    return out;
}

/* Compares the blocks of every key group of two views. */
static bool views_equal(const sl_kb_snapshot_t *a, const sl_kb_snapshot_t *b, sl_kg_range_t r) {
    for (int kg = r.start; kg < r.end; kg++) {
        sl_buf_t x = write_kg(a, kg), y = write_kg(b, kg);
        bool eq = x.len == y.len && x.len != (size_t)-1 && memcmp(x.p, y.p, x.len) == 0;
        if (!eq) {
            size_t i = 0;
            while (x.len != (size_t)-1 && y.len != (size_t)-1 && i < x.len && i < y.len && x.p[i] == y.p[i]) i++;
            fprintf(stderr, "key group %d: blocks differ (%zu vs %zu bytes, first difference at byte %zu)\n", kg,
                    x.len, y.len, i);
        }
        if (x.len == (size_t)-1) x.len = 0;
        if (y.len == (size_t)-1) y.len = 0;
        sl_buf_free(&x);
        sl_buf_free(&y);
        if (!eq) return false;
    }
    return true;
}

/* Compares the full content of two backends over range r. */
static bool backends_equal(sl_keyed_backend_t *a, sl_keyed_backend_t *b, sl_kg_range_t r) {
    sl_kb_snapshot_t *sa = NULL, *sb = NULL;
    if (OPS(a)->snapshot(a, &sa) || OPS(b)->snapshot(b, &sb)) return false;
    bool eq = views_equal(sa, sb, r);
    sl_kb_snapshot_release(sa);
    sl_kb_snapshot_release(sb);
    return eq;
}

/* ------------------------------------------------------------------ */
/* the interface, as test_state_backend.c checks it for the heap       */

TEST(create_and_destroy) {
    char dir[512];
    sl_rocksdb_opts_t o = {0};
    sl_keyed_backend_t *b = rdb_new_opts(128, (sl_kg_range_t){0, 128}, &o, dir);
    CHECK(b != NULL);
    CHECK_STR(OPS(b)->name, "rocksdb");
    CHECK(sl_rocksdb_backend_is(b));
    CHECK(OPS(b)->prefetch == NULL);
    CHECK(path_exists(dir));
    CHECK(sl_rocksdb_backend_error(b) == NULL);
    OPS(b)->destroy(b);
    CHECK(!path_exists(dir)); /* removed with the backend */

    /* A directory that is not empty is refused, and left alone. */
    char busy[512], f[600], err[512] = "";
    tmp_path(busy, sizeof busy, "busy");
    mkdir(busy, 0755);
    snprintf(f, sizeof f, "%s/precious", busy);
    FILE *fp = fopen(f, "w");
    CHECK(fp != NULL);
    fclose(fp);
    sl_rocksdb_opts_t o2 = {.dir = busy};
    CHECK(sl_rocksdb_backend_new(128, (sl_kg_range_t){0, 128}, &o2, err, sizeof err) == NULL);
    CHECK_CONTAINS(err, "not empty");
    CHECK(path_exists(f));
    rm_rf(busy);
    /* Bad arguments. */
    CHECK(sl_rocksdb_backend_new(0, (sl_kg_range_t){0, 1}, &o2, err, sizeof err) == NULL);
    CHECK(sl_rocksdb_backend_new(128, (sl_kg_range_t){5, 5}, &o2, err, sizeof err) == NULL);
    CHECK_CONTAINS(err, "range");
    sl_rocksdb_opts_t o3 = {0};
    CHECK(sl_rocksdb_backend_new(128, (sl_kg_range_t){0, 128}, &o3, err, sizeof err) == NULL);
    CHECK_CONTAINS(err, "working directory");
    /* Not a rocksdb backend. */
    sl_keyed_backend_t *h = sl_heap_backend_new(128, (sl_kg_range_t){0, 128});
    CHECK(!sl_rocksdb_backend_is(h));
    sl_rocksdb_files_t files;
    CHECK(sl_rocksdb_native_snapshot(h, "/nonexistent", &files, err, sizeof err) < 0);
    OPS(h)->destroy(h);
}

TEST(register_state) {
    sl_keyed_backend_t *b = new_full();
    int a = reg(b, "a", SL_STATE_VALUE), l = reg(b, "l", SL_STATE_LIST), m = reg(b, "m", SL_STATE_MAP);
    CHECK(a >= 0 && l >= 0 && m >= 0);
    CHECK(a != l && l != m && a != m);
    CHECK_EQ(reg(b, "l", SL_STATE_LIST), l);
    CHECK(reg(b, "l", SL_STATE_VALUE) < 0);
    CHECK(reg(b, "", SL_STATE_VALUE) < 0);
    CHECK(reg(b, "bad", (sl_state_kind_t)7) < 0);
    CHECK(OPS(b)->register_state(b, NULL) < 0);
    for (int i = 0; i < 40; i++) {
        char name[16];
        snprintf(name, sizeof name, "s%d", i);
        int id = reg(b, name, SL_STATE_VALUE);
        CHECK(id >= 0);
        CHECK_EQ(reg(b, name, SL_STATE_VALUE), id);
    }
    /* TTL as in the heap backend: the same TTL gives the same id, another is refused. */
    int t = reg_ttl(b, "t", SL_STATE_VALUE, 100);
    CHECK(t >= 0);
    CHECK_EQ(reg_ttl(b, "t", SL_STATE_VALUE, 100), t);
    CHECK(reg_ttl(b, "t", SL_STATE_VALUE, 200) < 0);
    CHECK(reg_ttl(b, "neg", SL_STATE_VALUE, -1) < 0);
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
    CHECK(((uintptr_t)v & 7) == 0);
    CHECK_EQ(o->count(b, s), 1);
    CHECK_EQ(o->put(b, s, NULL, 0, "a much longer value", 19), 0);
    v = o->get(b, s, NULL, 0, &len);
    CHECK(len == 19 && memcmp(v, "a much longer value", 19) == 0);
    CHECK_EQ(o->put(b, s, NULL, 0, "xy", 2), 0);
    v = o->get(b, s, NULL, 0, &len);
    CHECK(len == 2 && memcmp(v, "xy", 2) == 0);
    CHECK_EQ(o->count(b, s), 1);

    uint8_t ns1[16] = {1}, ns2[16] = {2};
    CHECK(o->get(b, s, ns1, 16, &len) == NULL);
    CHECK_EQ(o->put(b, s, ns1, 16, "n1", 2), 0);
    CHECK_EQ(o->put(b, s, ns2, 16, "n2", 2), 0);
    CHECK_EQ(o->put(b, s, ns2, 8, "n2short", 7), 0); /* a prefix of ns2 is another namespace */
    CHECK_EQ(o->count(b, s), 4);
    /* Pointers from get stay valid across reads of the same state. */
    const char *p1 = o->get(b, s, ns1, 16, &len), *p2 = o->get(b, s, ns2, 16, &len);
    const char *p3 = o->get(b, s, ns2, 8, &len), *p4 = o->get(b, s, NULL, 0, &len);
    CHECK(p1 && p2 && p3 && p4);
    CHECK(memcmp(p1, "n1", 2) == 0 && memcmp(p2, "n2", 2) == 0 && memcmp(p3, "n2short", 7) == 0 &&
          memcmp(p4, "xy", 2) == 0);

    sl_kb_set_key(b, "bob", 3);
    CHECK(o->get(b, s, ns1, 16, &len) == NULL);
    CHECK(o->get(b, s, NULL, 0, &len) == NULL);
    sl_kb_set_key(b, "alic", 4); /* a prefix of another key is another key */
    CHECK(o->get(b, s, NULL, 0, &len) == NULL);
    CHECK_EQ(o->put(b, s, NULL, 0, NULL, 0), 0); /* zero-length values are present */
    len = 77;
    CHECK(o->get(b, s, NULL, 0, &len) != NULL);
    CHECK_EQ(len, 0);
    CHECK_EQ(o->count(b, s), 5);

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
    CHECK(((uintptr_t)acc & 7) == 0);
    CHECK(acc[0] == 0 && acc[1] == 0);
    acc[0] = 5;
    acc[1] = -3;
    CHECK_EQ(o->put(b, s, ns, 16, acc, 16), 0);
    int64_t *again = o->get_mut(b, s, ns, 16, 16, &created);
    CHECK(!created);
    CHECK(again[0] == 5 && again[1] == -3);
    uint32_t len;
    const int64_t *r = o->get(b, s, ns, 16, &len);
    CHECK_EQ(len, 16);
    CHECK_EQ(r[0], 5);
    CHECK_EQ(o->count(b, s), 1);

    /* Accumulate: get_mut + put, the hot path. */
    for (int i = 0; i < 1000; i++) {
        int64_t *a = o->get_mut(b, s, ns, 16, 16, NULL);
        a[0] += i;
        CHECK_EQ(o->put(b, s, ns, 16, a, 16), 0);
    }
    r = o->get(b, s, ns, 16, &len);
    CHECK_EQ(r[0], 5 + 999 * 1000 / 2);

    /* Without put a change through the pointer is not stored (existing entry). */
    int64_t *w0 = o->get_mut(b, s, ns, 16, 16, NULL);
    w0[0] = -1;
    r = o->get(b, s, ns, 16, &len);
    CHECK_EQ(r[0], 5 + 999 * 1000 / 2);

    int64_t other[2] = {11, 12};
    CHECK_EQ(o->put(b, s, ns, 16, other, 16), 0);
    r = o->get(b, s, ns, 16, &len);
    CHECK(r[0] == 11 && r[1] == 12 && len == 16);
    /* put from the entry's own bytes with another length. */
    r = o->get(b, s, ns, 16, &len);
    CHECK_EQ(o->put(b, s, ns, 16, r + 1, 8), 0);
    r = o->get(b, s, ns, 16, &len);
    CHECK_EQ(len, 8);
    CHECK_EQ(r[0], 12);

    /* get_mut with another length resizes at once (stored without a put). */
    int64_t *w = o->get_mut(b, s, ns, 16, 32, &created);
    CHECK(!created);
    CHECK(w[0] == 12 && w[1] == 0 && w[2] == 0 && w[3] == 0);
    r = o->get(b, s, ns, 16, &len);
    CHECK_EQ(len, 32);
    w = o->get_mut(b, s, ns, 16, 8, &created);
    CHECK(!created && w[0] == 12);
    w = o->get_mut(b, s, ns, 16, 32, &created);
    CHECK(w[0] == 12 && w[3] == 0);

    /* A created value exists at once, zero-filled, without a put. */
    set_u64_key(b, 8);
    CHECK(o->get_mut(b, s, NULL, 0, 0, &created) != NULL);
    CHECK(created);
    CHECK(o->get(b, s, NULL, 0, &len) != NULL && len == 0);
    CHECK_EQ(o->count(b, s), 2);
    set_u64_key(b, 9);
    uint64_t *z = o->get_mut(b, s, NULL, 0, 24, &created);
    CHECK(created && z[0] == 0 && z[2] == 0);
    CHECK_EQ(o->count(b, s), 3); /* seen by a scan, too */
    const uint64_t *zr = o->get(b, s, NULL, 0, &len);
    CHECK(zr && len == 24 && zr[1] == 0);
    /* ... and by a snapshot. */
    set_u64_key(b, 10);
    z = o->get_mut(b, s, NULL, 0, 8, &created);
    CHECK(created);
    sl_kb_snapshot_t *sn = NULL;
    CHECK_EQ(o->snapshot(b, &sn), 0);
    uint64_t k10 = 10;
    int kg10 = sl_kg_of_hash(sl_kg_key_hash(&k10, 8), 128);
    sl_buf_t blk = write_kg(sn, kg10);
    CHECK(blk.len != (size_t)-1 && blk.len > 20);
    sl_keyed_backend_t *h = sl_heap_backend_new(128, (sl_kg_range_t){0, 128});
    char err[256];
    CHECK_EQ(OPS(h)->restore(h, kg10, blk.p, blk.len, err, sizeof err), 0);
    set_u64_key(h, 10);
    CHECK(OPS(h)->get(h, 0, NULL, 0, &len) != NULL && len == 8);
    OPS(h)->destroy(h);
    sl_buf_free(&blk);
    sl_kb_snapshot_release(sn);
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
        CHECK_EQ(o->put(b, s, ns, 16, p, 8), 0);
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
        CHECK(o->get(b, s2, NULL, 0, &len) == NULL);
    }
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
    OPS(b)->destroy(b);
}

typedef struct collect {
    int n;
    char items[64][64];
    uint32_t lens[64];
    const void *ptrs[64];
    int stop_at;
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

TEST(list_basics) {
    sl_keyed_backend_t *b = new_full();
    const sl_keyed_backend_ops_t *o = b->ops;
    int s = reg(b, "l", SL_STATE_LIST);
    uint8_t ns[16] = {3};
    sl_kb_set_key(b, "k", 1);
    collect_t c = {0};
    CHECK_EQ(o->list_foreach(b, s, ns, 16, collect_cb, &c), 0);
    const char *words[] = {"alpha", "", "gamma", "de", "epsilon-epsilon"};
    for (int i = 0; i < 5; i++) CHECK_EQ(o->list_add(b, s, ns, 16, words[i], (uint32_t)strlen(words[i])), 0);
    CHECK_EQ(o->count(b, s), 1);
    memset(&c, 0, sizeof c);
    CHECK_EQ(o->list_foreach(b, s, ns, 16, collect_cb, &c), 5);
    for (int i = 0; i < 5; i++) {
        CHECK_EQ(c.lens[i], strlen(words[i]));
        CHECK(memcmp(c.items[i], words[i], c.lens[i]) == 0);
        CHECK(((uintptr_t)c.ptrs[i] & 7) == 0);
    }
    memset(&c, 0, sizeof c);
    c.stop_at = 2;
    CHECK_EQ(o->list_foreach(b, s, ns, 16, collect_cb, &c), 42);
    CHECK_EQ(c.n, 2);
    CHECK_EQ(o->list_foreach(b, s, ns, 16, NULL, NULL), 5);
    CHECK_EQ(o->list_foreach(b, s, NULL, 0, NULL, NULL), 0);
    CHECK_EQ(o->list_add(b, s, NULL, 0, "z", 1), 0);
    CHECK_EQ(o->list_foreach(b, s, NULL, 0, NULL, NULL), 1);
    CHECK_EQ(o->list_foreach(b, s, ns, 16, NULL, NULL), 5);
    CHECK_EQ(o->count(b, s), 2);

    /* Replace with elements that point into the current list (reversed):
     * the element pointers outlive list_foreach. */
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
    CHECK_EQ(o->list_add(b, s, ns, 16, "omega", 5), 0);
    memset(&c, 0, sizeof c);
    CHECK_EQ(o->list_foreach(b, s, ns, 16, collect_cb, &c), 4);
    CHECK(c.lens[3] == 5 && memcmp(c.items[3], "omega", 5) == 0);
    for (int i = 0; i < 20; i++) { /* append an element of the list itself */
        memset(&c, 0, sizeof c);
        o->list_foreach(b, s, ns, 16, collect_cb, &c);
        CHECK_EQ(o->list_add(b, s, ns, 16, c.ptrs[0], c.lens[0]), 0);
    }
    memset(&c, 0, sizeof c);
    CHECK_EQ(o->list_foreach(b, s, ns, 16, collect_cb, &c), 24);
    CHECK(c.lens[23] == 15 && memcmp(c.items[23], "epsilon-epsilon", 15) == 0);

    sl_kb_set_key(b, "other", 5);
    const void *one[1] = {"solo"};
    uint32_t onel[1] = {4};
    CHECK_EQ(o->list_replace(b, s, NULL, 0, 1, one, onel), 0);
    CHECK_EQ(o->count(b, s), 3);
    CHECK_EQ(o->list_replace(b, s, NULL, 0, 0, NULL, NULL), 0);
    CHECK_EQ(o->list_foreach(b, s, NULL, 0, NULL, NULL), 0);
    CHECK_EQ(o->count(b, s), 2);
    CHECK_EQ(o->list_replace(b, s, NULL, 0, 0, NULL, NULL), 0);
    /* remove, then add: a new list (the merge starts from nothing). */
    sl_kb_set_key(b, "k", 1);
    CHECK_EQ(o->remove(b, s, ns, 16), 1);
    CHECK_EQ(o->list_foreach(b, s, ns, 16, NULL, NULL), 0);
    CHECK_EQ(o->count(b, s), 1);
    CHECK_EQ(o->list_add(b, s, ns, 16, "fresh", 5), 0);
    memset(&c, 0, sizeof c);
    CHECK_EQ(o->list_foreach(b, s, ns, 16, collect_cb, &c), 1);
    CHECK(c.lens[0] == 5 && memcmp(c.items[0], "fresh", 5) == 0);

    int v = reg(b, "v", SL_STATE_VALUE);
    uint32_t len;
    CHECK(o->get(b, s, NULL, 0, &len) == NULL);
    CHECK(o->list_add(b, v, NULL, 0, "x", 1) < 0);
    CHECK(o->list_foreach(b, v, NULL, 0, NULL, NULL) < 0);
    CHECK(o->map_put(b, s, NULL, 0, "a", 1, "b", 1) < 0);
    OPS(b)->destroy(b);
}

typedef struct lorder {
    uint32_t next, n, bad;
} lorder_t;

static int lorder_cb(void *c, const void *v, uint32_t len) {
    lorder_t *l = c;
    uint32_t i = l->next;
    if (len != (i % 3 + 1) * 4 || sl_ld32(v) != i || (len >= 8 && sl_ld32((const uint8_t *)v + 4) != 2 * i)) l->bad++;
    l->next += 7;
    l->n++;
    return 0;
}

/* Long lists built by merges, flushed to SSTs and compacted in between:
 * insertion order survives every way RocksDB combines merge operands. */
TEST(list_long) {
    sl_keyed_backend_t *b = new_full();
    const sl_keyed_backend_ops_t *o = b->ops;
    int s = reg(b, "l", SL_STATE_LIST);
    enum { N = 20000 };
    char err[256];
    for (uint32_t i = 0; i < N; i++) {
        set_u64_key(b, i % 7);
        uint32_t v[3] = {i, i * 2, i * 3};
        CHECK_EQ(o->list_add(b, s, NULL, 0, v, (i % 3 + 1) * 4), 0);
        if (i == N / 3) CHECK_EQ(sl_rocksdb_compact(b, err, sizeof err), 0);
        if (i == N / 2) {
            sl_rocksdb_files_t f;
            char dir[512];
            tmp_path(dir, sizeof dir, "ck");
            CHECK_EQ(sl_rocksdb_native_snapshot(b, dir, &f, err, sizeof err), 0); /* a flush */
            sl_rocksdb_files_free(&f);
            rm_rf(dir);
        }
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
    CHECK_EQ(o->count(b, s), 1);
    const char *v = o->map_get(b, s, ns, 16, "a", 1, &len);
    CHECK(v && len == 2 && memcmp(v, "va", 2) == 0);
    v = o->map_get(b, s, ns, 16, "", 0, &len);
    CHECK(v && len == 9 && memcmp(v, "empty-key", 9) == 0);
    v = o->map_get(b, s, ns, 16, "z", 1, &len);
    CHECK(v && len == 0);
    CHECK(o->map_get(b, s, ns, 16, "b", 1, &len) == NULL);
    CHECK(o->map_get(b, s, NULL, 0, "a", 1, &len) == NULL);
    CHECK_EQ(o->map_put(b, s, ns, 16, "a", 1, "a-longer-value-for-a", 20), 0);
    v = o->map_get(b, s, ns, 16, "a", 1, &len);
    CHECK(v && len == 20 && memcmp(v, "a-longer-value-for-a", 20) == 0);
    v = o->map_get(b, s, ns, 16, "bb", 2, &len);
    CHECK_EQ(o->map_put(b, s, ns, 16, "a", 1, v, len), 0); /* from the map's own bytes */
    v = o->map_get(b, s, ns, 16, "a", 1, &len);
    CHECK(v && len == 3 && memcmp(v, "vbb", 3) == 0);

    mcollect_t m = {0};
    CHECK_EQ(o->map_foreach(b, s, ns, 16, mcollect_cb, &m), 4);
    int i = mfind(&m, "a");
    CHECK(i >= 0 && m.vl[i] == 3 && memcmp(m.v[i], "vbb", 3) == 0);
    CHECK(mfind(&m, "bb") >= 0 && mfind(&m, "") >= 0 && mfind(&m, "z") >= 0);
    m = (mcollect_t){0};
    m.stop_at = 2;
    CHECK_EQ(o->map_foreach(b, s, ns, 16, mcollect_cb, &m), 7);

    CHECK_EQ(o->map_remove(b, s, ns, 16, "bb", 2), 1);
    CHECK_EQ(o->map_remove(b, s, ns, 16, "bb", 2), 0);
    CHECK(o->map_get(b, s, ns, 16, "bb", 2, &len) == NULL);
    CHECK_EQ(o->map_foreach(b, s, ns, 16, NULL, NULL), 3);
    CHECK_EQ(o->map_remove(b, s, ns, 16, "a", 1), 1);
    CHECK_EQ(o->map_remove(b, s, ns, 16, "", 0), 1);
    CHECK_EQ(o->count(b, s), 1);
    CHECK_EQ(o->map_remove(b, s, ns, 16, "z", 1), 1);
    CHECK_EQ(o->count(b, s), 0); /* the last user key takes the (key, ns) with it */
    CHECK_EQ(o->map_put(b, s, ns, 16, "a", 1, "again", 5), 0);
    CHECK_EQ(o->count(b, s), 1);

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
    CHECK_EQ(o->remove(b, s, NULL, 0), 1); /* generic remove drops the whole map */
    CHECK_EQ(o->remove(b, s, NULL, 0), 0);
    CHECK_EQ(o->count(b, s), 1);
    CHECK_EQ(o->map_foreach(b, s, NULL, 0, NULL, NULL), 0);
    v = o->map_get(b, s, ns, 16, "a", 1, &len); /* the other namespace is untouched */
    CHECK(v && len == 5);
    OPS(b)->destroy(b);
}

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
    sl_keyed_backend_t *b = rdb_new(128, r);
    const sl_keyed_backend_ops_t *o = b->ops;
    int s = reg(b, "v", SL_STATE_VALUE), l = reg(b, "l", SL_STATE_LIST), m = reg(b, "m", SL_STATE_MAP);
    char keys[200][32];
    uint32_t klens[200];
    unsigned n = 0;
    for (int i = 0; i < 200; i++) {
        klens[i] = key_in_range(keys[i], 128, r, &n);
        int kg = sl_kb_set_key(b, keys[i], klens[i]);
        CHECK(kg >= 40 && kg < 90);
        uint8_t ns[4] = {(uint8_t)i, 1, 2, 3};
        CHECK_EQ(o->put(b, s, NULL, 0, &i, sizeof i), 0);
        if (i % 2) CHECK_EQ(o->put(b, s, ns, 4, &i, sizeof i), 0);
        if (i % 5 == 0) CHECK_EQ(o->list_add(b, l, ns, 4, "x", 1), 0);
        if (i % 4 == 0) /* three user keys: one entry */
            for (int u = 0; u < 3; u++) CHECK_EQ(o->map_put(b, m, ns, 4, &u, sizeof u, "v", 1), 0);
    }
    CHECK_EQ(o->count(b, s), 300);
    CHECK_EQ(o->count(b, l), 40);
    CHECK_EQ(o->count(b, m), 50);
    static ecollect_t e;
    memset(&e, 0, sizeof e);
    CHECK_EQ(o->foreach_entry(b, s, ecollect_cb, &e), 0);
    CHECK_EQ(e.n, 300);
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
    CHECK_EQ(o->foreach_entry(b, m, ecollect_cb, &e), 0);
    CHECK_EQ(e.n, 50); /* a map is one entry whatever its user keys */
    OPS(b)->destroy(b);
}

/* Pointers from get stay valid until the state changes, also across many
 * reads; list element pointers too. */
TEST(pointer_lifetimes) {
    sl_keyed_backend_t *b = new_full();
    const sl_keyed_backend_ops_t *o = b->ops;
    int s = reg(b, "v", SL_STATE_VALUE), s2 = reg(b, "w", SL_STATE_VALUE);
    enum { N = 1000 };
    static const void *ptrs[N];
    for (uint64_t k = 0; k < N; k++) {
        set_u64_key(b, k);
        uint64_t v[4] = {k, ~k, k * 7, k + 1};
        CHECK_EQ(o->put(b, s, NULL, 0, v, (uint32_t)(8 * (1 + k % 4))), 0);
    }
    for (uint64_t k = 0; k < N; k++) {
        set_u64_key(b, k);
        uint32_t len;
        ptrs[k] = o->get(b, s, NULL, 0, &len);
        CHECK(ptrs[k] != NULL);
    }
    /* Writes to another state do not move them. */
    set_u64_key(b, 5);
    CHECK_EQ(o->put(b, s2, NULL, 0, "x", 1), 0);
    for (uint64_t k = 0; k < N; k++) {
        const uint64_t *p = ptrs[k];
        CHECK(p[0] == k);
        if (k % 4) CHECK(p[1] == ~k);
    }
    OPS(b)->destroy(b);
}

/* ------------------------------------------------------------------ */
/* differential: heap and RocksDB given the same operations            */

enum { DNK = 80, DNNS = 5, DNUK = 9, DNST = 5 };
typedef struct bs {
    uint8_t b[48];
    uint32_t n;
} bs_t;
static bs_t dkeys[DNK], dnss[DNNS], duks[DNUK];
static const char *dnames[DNST] = {"v0", "list", "map", "v1", "zz-never-written"};
static const sl_state_kind_t dkinds[DNST] = {SL_STATE_VALUE, SL_STATE_LIST, SL_STATE_MAP, SL_STATE_VALUE,
                                             SL_STATE_VALUE};

static void rnd_bytes(bs_t *r, uint32_t maxlen) {
    r->n = rndn(maxlen + 1);
    for (uint32_t i = 0; i < r->n; i++) r->b[i] = (uint8_t)rnd();
}

/* Keys in range r of maxp: random lengths (0..12), some 8-byte ones, so
 * that RocksDB's order (by length first) differs from the format's. */
static void dnames_init(int maxp, sl_kg_range_t r) {
    int nk = 0;
    while (nk < DNK) {
        bs_t k;
        if (nk % 4 == 0) {
            k.n = 8;
            uint64_t x = rnd();
            memcpy(k.b, &x, 8);
        } else {
            rnd_bytes(&k, 12);
        }
        int kg = sl_kg_of_hash(sl_kg_key_hash(k.b, k.n), maxp);
        if (kg < r.start || kg >= r.end) continue;
        bool dup = false;
        for (int i = 0; i < nk; i++) dup |= dkeys[i].n == k.n && memcmp(dkeys[i].b, k.b, k.n) == 0;
        if (!dup) dkeys[nk++] = k;
    }
    static const uint32_t nslens[DNNS] = {0, 3, 8, 16, 16};
    for (int i = 0; i < DNNS; i++) {
        dnss[i].n = nslens[i];
        for (uint32_t j = 0; j < dnss[i].n; j++) dnss[i].b[j] = (uint8_t)(i * 31 + j * (i == 1 ? 97 : 1));
    }
    for (int i = 0; i < DNUK; i++) {
        duks[i].n = (uint32_t)i % 5;
        for (uint32_t j = 0; j < duks[i].n; j++) duks[i].b[j] = (uint8_t)(i * 40 + 250 * j);
    }
}

typedef struct dpair {
    sl_keyed_backend_t *b[2]; /* heap, rocksdb */
    int sid[2][DNST];
} dpair_t;

static bool dpair_init(dpair_t *d, sl_keyed_backend_t *h, sl_keyed_backend_t *r) {
    d->b[0] = h;
    d->b[1] = r;
    for (int j = 0; j < 2; j++)
        for (int i = 0; i < DNST; i++) {
            sl_state_desc_t desc = {.name = dnames[i], .kind = dkinds[i]};
            d->sid[j][i] = OPS(d->b[j])->register_state(d->b[j], &desc);
            if (d->sid[j][i] < 0) return false;
        }
    return true;
}

/* A list as seen through list_foreach: elements and pointers. */
typedef struct lgot {
    sl_buf_t data;
    int n;
    const void *ptrs[600];
    uint32_t lens[600];
} lgot_t;
static int lgot_cb(void *c, const void *v, uint32_t len) {
    lgot_t *l = c;
    sl_buf_append(&l->data, &len, 4);
    sl_buf_append(&l->data, v, len);
    if (l->n < 600) {
        l->ptrs[l->n] = v;
        l->lens[l->n] = len;
    }
    l->n++;
    return 0;
}

/* Map entries as (uk, v) strings, sorted (map_foreach order is unspecified). */
typedef struct mgot {
    sl_buf_t s[64];
    int n;
} mgot_t;
static int mgot_cb(void *c, const void *k, uint32_t klen, const void *v, uint32_t vlen) {
    mgot_t *m = c;
    if (m->n < 64) {
        sl_buf_t *x = &m->s[m->n];
        x->len = 0;
        sl_buf_append(x, &klen, 4);
        sl_buf_append(x, k, klen);
        sl_buf_append(x, &vlen, 4);
        sl_buf_append(x, v, vlen);
    }
    m->n++;
    return 0;
}
static int buf_cmp(const void *a, const void *b) {
    const sl_buf_t *x = a, *y = b;
    int c = memcmp(x->p, y->p, SL_MIN(x->len, y->len));
    return c ? c : (x->len > y->len) - (x->len < y->len);
}
static bool mgot_equal(mgot_t *a, mgot_t *b) {
    if (a->n != b->n) return false;
    int n = SL_MIN(a->n, 64);
    if (n < 2) return n == 0 || buf_cmp(&a->s[0], &b->s[0]) == 0;
    qsort(a->s, (size_t)n, sizeof *a->s, buf_cmp);
    qsort(b->s, (size_t)n, sizeof *b->s, buf_cmp);
    for (int i = 0; i < n; i++)
        if (buf_cmp(&a->s[i], &b->s[i])) return false;
    return true;
}
static void mgot_free(mgot_t *m) {
    for (int i = 0; i < 64; i++) sl_buf_free(&m->s[i]);
}

/* The collectors of diff_step (big: not on the stack). */
static lgot_t g_la, g_lb;
static mgot_t g_ma, g_mb;
static void collectors_free(void) {
    sl_buf_free(&g_la.data);
    sl_buf_free(&g_lb.data);
    mgot_free(&g_ma);
    mgot_free(&g_mb);
}

/* (key, ns) pairs of foreach_entry, sorted. */
typedef struct egot {
    sl_buf_t *s;
    int n, cap;
} egot_t;
static int egot_cb(void *c, const void *key, uint32_t klen, const void *ns, uint32_t nslen) {
    egot_t *e = c;
    if (e->n == e->cap) {
        e->cap = e->cap ? e->cap * 2 : 64;
        e->s = sl_realloc(e->s, (size_t)e->cap * sizeof *e->s);
    }
    sl_buf_t *x = &e->s[e->n++];
    memset(x, 0, sizeof *x);
    sl_buf_append(x, &klen, 4);
    sl_buf_append(x, key, klen);
    sl_buf_append(x, ns, nslen);
    return 0;
}
static void egot_free(egot_t *e) {
    for (int i = 0; i < e->n; i++) sl_buf_free(&e->s[i]);
    sl_free(e->s);
}

static bool same_bytes(const void *a, uint32_t al, const void *b, uint32_t bl) {
    if ((a == NULL) != (b == NULL)) return false;
    return !a || (al == bl && (al == 0 || memcmp(a, b, al) == 0));
}

/* One random operation on both backends, comparing what they return. */
static void diff_step(dpair_t *d) {
    const bs_t *key = &dkeys[rndn(DNK)], *ns = &dnss[rndn(DNNS)];
    const void *nsp = ns->n ? ns->b : NULL;
    for (int j = 0; j < 2; j++) sl_kb_set_key(d->b[j], key->b, key->n);
    sl_keyed_backend_t *h = d->b[0], *r = d->b[1];
    const sl_keyed_backend_ops_t *ho = h->ops, *ro = r->ops;
    uint32_t what = rndn(100), hl = 0, rl = 0;
    if (what < 40) {
        int si = rndn(2) ? 0 : 3, hs = d->sid[0][si], rs = d->sid[1][si];
        uint32_t sub = rndn(6);
        if (sub == 0) {
            bs_t v;
            rnd_bytes(&v, 40);
            CHECK_EQ(ho->put(h, hs, nsp, ns->n, v.b, v.n), 0);
            CHECK_EQ(ro->put(r, rs, nsp, ns->n, v.b, v.n), 0);
        } else if (sub == 1) {
            const void *a = ho->get(h, hs, nsp, ns->n, &hl), *b = ro->get(r, rs, nsp, ns->n, &rl);
            CHECK(same_bytes(a, hl, b, rl));
        } else if (sub == 2 || sub == 5) { /* get_mut (5: maybe another length) + put */
            const void *cur = ho->get(h, hs, nsp, ns->n, &hl);
            uint32_t want = cur && sub == 2 ? hl : rndn(41);
            bool hc, rc;
            uint8_t *a = ho->get_mut(h, hs, nsp, ns->n, want, &hc), *b = ro->get_mut(r, rs, nsp, ns->n, want, &rc);
            CHECK(a && b);
            CHECK_EQ(hc, rc);
            CHECK(want == 0 || memcmp(a, b, want) == 0);
            for (uint32_t i = 0; i < want; i++) a[i] = b[i] = (uint8_t)(a[i] * 3 + i + 1);
            CHECK_EQ(ho->put(h, hs, nsp, ns->n, a, want), 0);
            CHECK_EQ(ro->put(r, rs, nsp, ns->n, b, want), 0);
        } else if (sub == 3) { /* put the value of another namespace, straight from get */
            const bs_t *ns2 = &dnss[rndn(DNNS)];
            const void *ns2p = ns2->n ? ns2->b : NULL;
            const void *a = ho->get(h, hs, ns2p, ns2->n, &hl), *b = ro->get(r, rs, ns2p, ns2->n, &rl);
            CHECK(same_bytes(a, hl, b, rl));
            if (a) {
                CHECK_EQ(ho->put(h, hs, nsp, ns->n, a, hl), 0);
                CHECK_EQ(ro->put(r, rs, nsp, ns->n, b, rl), 0);
            }
        } else {
            CHECK_EQ(ho->remove(h, hs, nsp, ns->n), ro->remove(r, rs, nsp, ns->n));
        }
    } else if (what < 70) {
        int hs = d->sid[0][1], rs = d->sid[1][1];
        uint32_t sub = rndn(10);
        if (sub < 4) {
            bs_t v;
            rnd_bytes(&v, 20);
            CHECK_EQ(ho->list_add(h, hs, nsp, ns->n, v.b, v.n), 0);
            CHECK_EQ(ro->list_add(r, rs, nsp, ns->n, v.b, v.n), 0);
        } else if (sub < 8) {
            lgot_t *a = &g_la, *b = &g_lb;
            a->data.len = b->data.len = 0;
            a->n = b->n = 0;
            int na = ho->list_foreach(h, hs, nsp, ns->n, lgot_cb, a),
                nb = ro->list_foreach(r, rs, nsp, ns->n, lgot_cb, b);
            CHECK_EQ(na, nb);
            CHECK(a->data.len == b->data.len && (a->data.len == 0 || memcmp(a->data.p, b->data.p, a->data.len) == 0));
            if (na > 0 && na <= 300 && sub == 4) { /* append one of its own elements */
                int k = (int)rndn((uint32_t)na);
                CHECK_EQ(ho->list_add(h, hs, nsp, ns->n, a->ptrs[k], a->lens[k]), 0);
                CHECK_EQ(ro->list_add(r, rs, nsp, ns->n, b->ptrs[k], b->lens[k]), 0);
            } else if (na > 0 && na <= 300 && sub == 5) { /* replace with a selection of its own elements */
                int n = (int)rndn(6);
                const void *va[6], *vb[6];
                uint32_t la[6];
                for (int i = 0; i < n; i++) {
                    int k = (int)rndn((uint32_t)na);
                    va[i] = a->ptrs[k];
                    vb[i] = b->ptrs[k];
                    la[i] = a->lens[k];
                }
                CHECK_EQ(ho->list_replace(h, hs, nsp, ns->n, n, va, la), 0);
                CHECK_EQ(ro->list_replace(r, rs, nsp, ns->n, n, vb, la), 0);
            }
        } else {
            CHECK_EQ(ho->remove(h, hs, nsp, ns->n), ro->remove(r, rs, nsp, ns->n));
        }
    } else if (what < 97) {
        int hs = d->sid[0][2], rs = d->sid[1][2];
        const bs_t *uk = &duks[rndn(DNUK)];
        uint32_t sub = rndn(9);
        if (sub < 3) {
            bs_t v;
            rnd_bytes(&v, 30);
            CHECK_EQ(ho->map_put(h, hs, nsp, ns->n, uk->b, uk->n, v.b, v.n), 0);
            CHECK_EQ(ro->map_put(r, rs, nsp, ns->n, uk->b, uk->n, v.b, v.n), 0);
        } else if (sub == 3) { /* copy another user key's value from the map itself */
            const bs_t *uk2 = &duks[rndn(DNUK)];
            const void *a = ho->map_get(h, hs, nsp, ns->n, uk2->b, uk2->n, &hl),
                       *b = ro->map_get(r, rs, nsp, ns->n, uk2->b, uk2->n, &rl);
            CHECK(same_bytes(a, hl, b, rl));
            if (a) {
                CHECK_EQ(ho->map_put(h, hs, nsp, ns->n, uk->b, uk->n, a, hl), 0);
                CHECK_EQ(ro->map_put(r, rs, nsp, ns->n, uk->b, uk->n, b, rl), 0);
            }
        } else if (sub < 6) {
            const void *a = ho->map_get(h, hs, nsp, ns->n, uk->b, uk->n, &hl),
                       *b = ro->map_get(r, rs, nsp, ns->n, uk->b, uk->n, &rl);
            CHECK(same_bytes(a, hl, b, rl));
        } else if (sub < 8) {
            CHECK_EQ(ho->map_remove(h, hs, nsp, ns->n, uk->b, uk->n), ro->map_remove(r, rs, nsp, ns->n, uk->b, uk->n));
        } else {
            g_ma.n = g_mb.n = 0;
            int na = ho->map_foreach(h, hs, nsp, ns->n, mgot_cb, &g_ma),
                nb = ro->map_foreach(r, rs, nsp, ns->n, mgot_cb, &g_mb);
            CHECK_EQ(na, nb);
            CHECK(mgot_equal(&g_ma, &g_mb));
        }
    } else { /* whole states */
        for (int i = 0; i < DNST; i++) {
            CHECK_EQ(ho->count(h, d->sid[0][i]), ro->count(r, d->sid[1][i]));
            egot_t a = {0}, b = {0};
            CHECK_EQ(ho->foreach_entry(h, d->sid[0][i], egot_cb, &a), 0);
            CHECK_EQ(ro->foreach_entry(r, d->sid[1][i], egot_cb, &b), 0);
            CHECK_EQ(a.n, b.n);
            if (a.n > 1) qsort(a.s, (size_t)a.n, sizeof *a.s, buf_cmp);
            if (b.n > 1) qsort(b.s, (size_t)b.n, sizeof *b.s, buf_cmp);
            bool eq = true;
            for (int k = 0; k < a.n; k++) eq &= buf_cmp(&a.s[k], &b.s[k]) == 0;
            egot_free(&a);
            egot_free(&b);
            CHECK(eq);
        }
    }
}

static void differential_run(uint64_t seed, int nops, int every) {
    rng_state = seed;
    sl_kg_range_t range = {3, 70};
    dnames_init(128, range);
    sl_keyed_backend_t *h = sl_heap_backend_new(128, range), *r = rdb_new(128, range);
    CHECK(r != NULL);
    dpair_t d;
    CHECK(dpair_init(&d, h, r));
    for (int op = 0; op < nops; op++) {
        int before = sl_test_failures;
        diff_step(&d);
        if (sl_test_failures != before) {
            fprintf(stderr, "differential: seed %" PRIu64 ", operation %d\n", seed, op);
            break;
        }
        if ((op + 1) % every == 0 && !backends_equal(h, r, range)) {
            fprintf(stderr, "differential: seed %" PRIu64 ", content differs after operation %d\n", seed, op);
            sl_test_failures++;
            break;
        }
    }
    CHECK(backends_equal(h, r, range));
    CHECK(OPS(h)->count(h, d.sid[0][0]) > 20); /* something happened */

    /* Restores across backends: RocksDB blocks into a heap, heap blocks into
     * a RocksDB; the content survives both ways. */
    sl_kb_snapshot_t *sh, *sr;
    CHECK_EQ(OPS(h)->snapshot(h, &sh), 0);
    CHECK_EQ(OPS(r)->snapshot(r, &sr), 0);
    sl_keyed_backend_t *h2 = sl_heap_backend_new(128, range), *r2 = rdb_new(128, range);
    char err[512];
    for (int kg = range.start; kg < range.end; kg++) {
        sl_buf_t a = write_kg(sr, kg), b = write_kg(sh, kg);
        CHECK_EQ(OPS(h2)->restore(h2, kg, a.p, a.len, err, sizeof err), 0);
        CHECK_EQ(OPS(r2)->restore(r2, kg, b.p, b.len, err, sizeof err), 0);
        sl_buf_free(&a);
        sl_buf_free(&b);
    }
    CHECK(views_equal(sh, sr, range));
    sl_kb_snapshot_release(sh);
    sl_kb_snapshot_release(sr);
    CHECK(backends_equal(h2, r2, range));
    CHECK(backends_equal(h, r2, range));
    /* The restored states are the registered ones again. */
    for (int i = 0; i < DNST; i++) {
        sl_state_desc_t desc = {.name = dnames[i], .kind = dkinds[i]};
        int sid = OPS(r2)->register_state(r2, &desc);
        CHECK(sid >= 0);
        CHECK_EQ(OPS(r2)->count(r2, sid), OPS(h)->count(h, d.sid[0][i]));
    }
    OPS(h2)->destroy(h2);
    OPS(r2)->destroy(r2);
    OPS(h)->destroy(h);
    OPS(r)->destroy(r);
}

TEST(differential_against_heap) {
    static const uint64_t seeds[] = {0x9e3779b97f4a7c15ULL, 12345, 0xdeadbeefULL, 77};
    for (size_t i = 0; i < SL_ARRAY_LEN(seeds); i++) {
        int before = sl_test_failures;
        differential_run(seeds[i], 12000, 1500);
        if (sl_test_failures != before) return;
    }
}

/* ------------------------------------------------------------------ */
/* canonical restore: corrupt blocks                                   */

/* A block by hand (the format's description in state_backend.h). */
static void e_varint(sl_buf_t *b, uint64_t v) {
    while (v >= 0x80) {
        uint8_t x = (uint8_t)(v | 0x80);
        sl_buf_append(b, &x, 1);
        v >>= 7;
    }
    uint8_t x = (uint8_t)v;
    sl_buf_append(b, &x, 1);
}
static void e_bytes(sl_buf_t *b, const void *p, uint32_t n) {
    e_varint(b, n);
    sl_buf_append(b, p, n);
}
static void e_u8(sl_buf_t *b, uint8_t v) { sl_buf_append(b, &v, 1); }
static void e_head(sl_buf_t *b, int maxp, int kg, int nstates) {
    sl_buf_append(b, "SLKS", 4);
    e_u8(b, SL_KB_FORMAT_VERSION);
    e_varint(b, (uint64_t)maxp);
    e_varint(b, (uint64_t)kg);
    e_varint(b, (uint64_t)nstates);
}
static void e_sum(sl_buf_t *b) {
    uint64_t h = sl_hash_bytes(b->p, b->len);
    uint8_t x[8];
    for (int i = 0; i < 8; i++) x[i] = (uint8_t)(h >> (8 * i));
    sl_buf_append(b, x, 8);
}

/* Keys of one key group. */
static int keys_of_kg(int maxp, int kg, char out[][16], int n) {
    int found = 0;
    for (unsigned i = 0; found < n; i++) {
        char k[16];
        int len = snprintf(k, sizeof k, "q%u", i);
        if (sl_kg_of_hash(sl_kg_key_hash(k, (uint32_t)len), maxp) == kg) strcpy(out[found++], k);
    }
    return found;
}

static bool kg_empty(sl_keyed_backend_t *b, int kg) {
    sl_kb_snapshot_t *s;
    if (OPS(b)->snapshot(b, &s)) return false;
    sl_buf_t x = write_kg(s, kg);
    sl_kb_snapshot_release(s);
    /* empty: each state has 0 entries -> parse and count */
    bool empty = true;
    sl_kbf_reader_t r = {x.p, x.p, x.p + x.len - 8};
    r.p += 5;
    uint32_t v, nst;
    sl_kbf_rd_varint32(&r, &v);
    sl_kbf_rd_varint32(&r, &v);
    sl_kbf_rd_varint32(&r, &nst);
    for (uint32_t i = 0; i < nst; i++) {
        const uint8_t *p;
        uint32_t n, ne;
        uint8_t kind;
        sl_kbf_rd_bytes(&r, &p, &n);
        sl_kbf_rd_u8(&r, &kind);
        if (!sl_kbf_rd_varint32(&r, &ne) || ne != 0) {
            empty = false;
            break;
        }
    }
    sl_buf_free(&x);
    return empty;
}

TEST(restore_rejects_corrupt_blocks) {
    enum { MAXP = 16, KG = 5 };
    char keys[6][16];
    keys_of_kg(MAXP, KG, keys, 6);
    sl_keyed_backend_t *b = rdb_new(MAXP, (sl_kg_range_t){0, MAXP});
    const sl_keyed_backend_ops_t *o = b->ops;
    char err[512];

    /* A good block, unsorted on purpose (keys in reverse order): loads. */
    sl_buf_t good = {0};
    e_head(&good, MAXP, KG, 2);
    e_bytes(&good, "m", 1);
    e_u8(&good, SL_STATE_MAP);
    e_varint(&good, 2);
    for (int i = 1; i >= 0; i--) {
        e_bytes(&good, keys[i], (uint32_t)strlen(keys[i]));
        e_bytes(&good, "", 0);
        e_varint(&good, 2);
        e_bytes(&good, "u2", 2);
        e_bytes(&good, "b", 1);
        e_bytes(&good, "u1", 2);
        e_bytes(&good, "a", 1);
    }
    e_bytes(&good, "v", 1);
    e_u8(&good, SL_STATE_VALUE);
    e_varint(&good, 3);
    for (int i = 2; i >= 0; i--) {
        e_bytes(&good, keys[i], (uint32_t)strlen(keys[i]));
        e_bytes(&good, "n", 1);
        e_bytes(&good, "val", 3);
    }
    e_sum(&good);
    CHECK_EQ(o->restore(b, KG, good.p, good.len, err, sizeof err), 0);
    int sv = reg(b, "v", SL_STATE_VALUE), sm = reg(b, "m", SL_STATE_MAP);
    CHECK(sv >= 0 && sm >= 0);
    CHECK_EQ(o->count(b, sv), 3);
    CHECK_EQ(o->count(b, sm), 2);
    /* Restoring into a key group that has state is refused. */
    CHECK(o->restore(b, KG, good.p, good.len, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "already has entries");
    /* Its snapshot is the sorted form of the same content: a heap agrees. */
    sl_keyed_backend_t *h = sl_heap_backend_new(MAXP, (sl_kg_range_t){0, MAXP});
    CHECK_EQ(OPS(h)->restore(h, KG, good.p, good.len, err, sizeof err), 0);
    CHECK(backends_equal(h, b, (sl_kg_range_t){0, MAXP}));
    OPS(h)->destroy(h);
    OPS(b)->destroy(b);

    /* Corruptions: each is rejected and leaves the key group empty. */
    struct {
        const char *what, *msg;
    } cases[] = {
        {"flipped byte", "checksum"},   {"truncated", "truncated"},     {"wrong kg", "key group"},
        {"wrong maxp", "max parallelism"}, {"dup value", "twice"},     {"dup map key", "twice"},
        {"dup map entry", "twice"},     {"kind clash", "registered as"}, {"dup state", "appears twice"},
        {"key of other kg", "belongs to key group"},
    };
    for (size_t c = 0; c < SL_ARRAY_LEN(cases); c++) {
        b = rdb_new(MAXP, (sl_kg_range_t){0, MAXP});
        o = b->ops;
        reg(b, "clash", SL_STATE_LIST);
        sl_buf_t x = {0};
        int kg = KG;
        if (c <= 3) {
            sl_buf_append(&x, good.p, good.len);
            if (c == 0) x.p[x.len / 2] ^= 0x40;
            if (c == 1) x.len -= 11;
            if (c == 2) kg = KG + 1;
            if (c == 3) {
                sl_keyed_backend_t *b2 = rdb_new(MAXP * 2, (sl_kg_range_t){0, MAXP * 2});
                CHECK(b2->ops->restore(b2, KG, x.p, x.len, err, sizeof err) < 0);
                CHECK_CONTAINS(err, cases[c].msg);
                OPS(b2)->destroy(b2);
                OPS(b)->destroy(b);
                sl_buf_free(&x);
                continue;
            }
        } else {
            /* Many good entries first, so that the error comes after some were loaded. */
            e_head(&x, MAXP, KG, c == 8 ? 2 : 1);
            const char *sname = c == 7 ? "clash" : c == 8 ? "s" : c == 4 ? "v" : "m";
            int kind = c == 4 || c == 7 || c == 8 || c == 9 ? SL_STATE_VALUE : SL_STATE_MAP;
            for (int st = 0; st < (c == 8 ? 2 : 1); st++) {
                e_bytes(&x, sname, (uint32_t)strlen(sname));
                e_u8(&x, (uint8_t)kind);
                e_varint(&x, 4);
                for (int i = 3; i >= 0; i--) { /* reversed: not sorted, so duplicates are found by lookups */
                    int ki = c == 4 && i == 0 ? 3 : i; /* dup value: key 3 twice */
                    if (c == 6 && i == 0) ki = 2;      /* dup map entry: (key 2, "") twice */
                    const char *k = keys[ki];
                    if (c == 9 && i == 0) k = "not-this-kg";
                    e_bytes(&x, k, (uint32_t)strlen(k));
                    e_bytes(&x, "", 0);
                    if (kind == SL_STATE_MAP) {
                        e_varint(&x, 2);
                        e_bytes(&x, "a", 1);
                        e_bytes(&x, "1", 1);
                        e_bytes(&x, c == 5 && i == 0 ? "a" : "b", 1); /* dup map key */
                        e_bytes(&x, "2", 1);
                    } else {
                        e_bytes(&x, "val", 3);
                    }
                }
            }
            e_sum(&x);
        }
        if (c == 9 && sl_kg_of_hash(sl_kg_key_hash("not-this-kg", 11), MAXP) == KG) {
            OPS(b)->destroy(b); /* the test's key happens to be in the key group */
            sl_buf_free(&x);
            continue;
        }
        err[0] = 0;
        int rc = o->restore(b, kg, x.p, x.len, err, sizeof err);
        if (rc >= 0 || !strstr(err, cases[c].msg))
            fprintf(stderr, "case '%s': rc %d, err '%s'\n", cases[c].what, rc, err);
        CHECK(rc < 0);
        CHECK_CONTAINS(err, cases[c].msg);
        CHECK(kg_empty(b, KG));
        CHECK(kg_empty(b, KG + 1));
        /* And the key group can be restored afterwards. */
        CHECK_EQ(o->restore(b, KG, good.p, good.len, err, sizeof err), 0);
        CHECK(!kg_empty(b, KG));
        OPS(b)->destroy(b);
        sl_buf_free(&x);
    }
    sl_buf_free(&good);
}

/* ------------------------------------------------------------------ */
/* snapshots while the task writes                                     */

typedef struct wjob {
    const sl_kb_snapshot_t *s;
    sl_kg_range_t r;
    sl_buf_t *out; /* [kgs] */
    atomic_int *stop;
    int passes;
    bool stable;   /* every pass gave the same bytes */
} wjob_t;

static void *writer_main(void *arg) {
    wjob_t *j = arg;
    int nkg = j->r.end - j->r.start;
    j->stable = true;
    for (int pass = 0; pass < 1000; pass++) {
        for (int i = 0; i < nkg; i++) {
            sl_buf_t x = {0};
            if (sl_kb_snapshot_write(j->s, j->r.start + i, &x) != 0) j->stable = false;
            if (pass == 0) {
                j->out[i] = x;
            } else {
                if (x.len != j->out[i].len || memcmp(x.p, j->out[i].p, x.len) != 0) j->stable = false;
                sl_buf_free(&x);
            }
        }
        j->passes = pass + 1;
        if (atomic_load(j->stop) && pass >= 1) break;
    }
    return NULL;
}

TEST(snapshot_write_concurrent_with_writes) {
    rng_state = 4242;
    sl_kg_range_t range = {3, 70};
    dnames_init(128, range);
    sl_keyed_backend_t *h = sl_heap_backend_new(128, range), *r = rdb_new(128, range);
    dpair_t d;
    CHECK(dpair_init(&d, h, r));
    for (int round = 0; round < 3; round++) {
        for (int i = 0; i < 2500; i++) diff_step(&d);
        sl_kb_snapshot_t *sh, *sr;
        CHECK_EQ(OPS(h)->snapshot(h, &sh), 0);
        CHECK_EQ(OPS(r)->snapshot(r, &sr), 0);
        atomic_int stop = 0;
        int nkg = range.end - range.start;
        sl_buf_t *out = sl_calloc((size_t)nkg, sizeof *out);
        wjob_t j = {sr, range, out, &stop, 0, false};
        pthread_t t;
        CHECK_EQ(pthread_create(&t, NULL, writer_main, &j), 0);
        /* The task keeps changing everything (both backends, to keep them equal). */
        for (int i = 0; i < 4000; i++) diff_step(&d);
        atomic_store(&stop, 1);
        pthread_join(t, NULL);
        CHECK(j.stable);
        CHECK(j.passes >= 2);
        bool eq = true;
        for (int i = 0; i < nkg; i++) {
            sl_buf_t x = write_kg(sh, range.start + i);
            eq &= x.len == out[i].len && memcmp(x.p, out[i].p, x.len) == 0;
            sl_buf_free(&x);
            sl_buf_free(&out[i]);
        }
        sl_free(out);
        CHECK(eq); /* exactly the content at snapshot() */
        sl_kb_snapshot_release(sh);
        sl_kb_snapshot_release(sr);
        CHECK(backends_equal(h, r, range)); /* and the live content went on */
    }
    OPS(h)->destroy(h);
    OPS(r)->destroy(r);
}

/* A view outlives its backend; the directory goes with the last of them. */
TEST(snapshot_outlives_backend) {
    char dir[512];
    sl_rocksdb_opts_t o = {0};
    sl_keyed_backend_t *b = rdb_new_opts(128, (sl_kg_range_t){0, 128}, &o, dir);
    sl_keyed_backend_t *h = sl_heap_backend_new(128, (sl_kg_range_t){0, 128});
    int s = reg(b, "v", SL_STATE_VALUE), hs = reg(h, "v", SL_STATE_VALUE);
    for (uint64_t k = 0; k < 2000; k++) {
        set_u64_key(b, k);
        set_u64_key(h, k);
        CHECK_EQ(OPS(b)->put(b, s, NULL, 0, &k, 8), 0);
        CHECK_EQ(OPS(h)->put(h, hs, NULL, 0, &k, 8), 0);
    }
    sl_kb_snapshot_t *sb, *sh;
    CHECK_EQ(OPS(b)->snapshot(b, &sb), 0);
    CHECK_EQ(OPS(h)->snapshot(h, &sh), 0);
    OPS(b)->destroy(b);
    CHECK(path_exists(dir));
    CHECK(views_equal(sh, sb, (sl_kg_range_t){0, 128}));
    sl_kb_snapshot_release(sb);
    CHECK(!path_exists(dir));
    sl_kb_snapshot_release(sh);
    OPS(h)->destroy(h);
}

/* ------------------------------------------------------------------ */
/* native checkpoints                                                  */

/* Backends of parallelism p over maxp, each with a heap twin. */
typedef struct fleet {
    int p, maxp;
    sl_keyed_backend_t *r[8], *h[8];
    dpair_t d[8];
    sl_kg_range_t range[8];
} fleet_t;

/* Random changes to backend i of f, keys from the whole key space but only
 * those inside its range. */
static void fleet_changes(fleet_t *f, int i, int n) {
    dnames_init(f->maxp, f->range[i]);
    for (int k = 0; k < n; k++) diff_step(&f->d[i]);
}

static void fleet_free(fleet_t *f) {
    for (int i = 0; i < f->p; i++) {
        if (f->r[i]) OPS(f->r[i])->destroy(f->r[i]);
        if (f->h[i]) OPS(f->h[i])->destroy(f->h[i]);
        f->r[i] = f->h[i] = NULL;
    }
}

/* Native snapshots of every backend of f into dirs[] (paths filled in). */
static bool fleet_checkpoint(fleet_t *f, char dirs[][512], sl_rocksdb_files_t *files) {
    char err[512];
    for (int i = 0; i < f->p; i++) {
        tmp_path(dirs[i], 512, "chk");
        if (sl_rocksdb_native_snapshot(f->r[i], dirs[i], &files[i], err, sizeof err)) {
            fprintf(stderr, "native snapshot: %s\n", err);
            return false;
        }
    }
    return true;
}

/* A new fleet of parallelism p restored from old's checkpoint dirs; the
 * heap twins restored from old's heaps' blocks (the reference). */
static bool fleet_restore(fleet_t *nf, int p, const fleet_t *old, char dirs[][512]) {
    nf->p = p;
    nf->maxp = old->maxp;
    const char *dp[8];
    for (int i = 0; i < old->p; i++) dp[i] = dirs[i];
    char err[512];
    for (int i = 0; i < p; i++) {
        nf->range[i] = sl_kg_range_for(nf->maxp, p, i);
        char dir[512];
        tmp_path(dir, sizeof dir, "db");
        sl_rocksdb_opts_t o = {.dir = dir, .write_buffer_bytes = 4 << 20};
        nf->r[i] = sl_rocksdb_backend_open_native(nf->maxp, nf->range[i], dp, old->range, old->p, &o, err, sizeof err);
        if (!nf->r[i]) {
            fprintf(stderr, "open_native: %s\n", err);
            return false;
        }
        nf->h[i] = sl_heap_backend_new(nf->maxp, nf->range[i]);
        for (int kg = nf->range[i].start; kg < nf->range[i].end; kg++) {
            int src = sl_kg_operator_index(kg, old->maxp, old->p);
            sl_kb_snapshot_t *s;
            OPS(old->h[src])->snapshot(old->h[src], &s);
            sl_buf_t x = write_kg(s, kg);
            sl_kb_snapshot_release(s);
            int rc = OPS(nf->h[i])->restore(nf->h[i], kg, x.p, x.len, err, sizeof err);
            sl_buf_free(&x);
            if (rc) return false;
        }
        if (!dpair_init(&nf->d[i], nf->h[i], nf->r[i])) return false;
    }
    return true;
}

static bool same_inode(const char *a, const char *b) {
    struct stat x, y;
    return stat(a, &x) == 0 && stat(b, &y) == 0 && x.st_ino == y.st_ino && x.st_dev == y.st_dev;
}

/* A native checkpoint is the state at its instant: changes after it do not
 * reach it, and opening it at the same range gives exactly that state. */
TEST(native_checkpoint_point_in_time) {
    rng_state = 99;
    enum { MAXP = 64 };
    sl_kg_range_t range = sl_kg_range_for(MAXP, 2, 1);
    fleet_t f = {.p = 1, .maxp = MAXP};
    f.range[0] = range;
    f.r[0] = rdb_new(MAXP, range);
    f.h[0] = sl_heap_backend_new(MAXP, range);
    CHECK(f.r[0] && dpair_init(&f.d[0], f.h[0], f.r[0]));
    fleet_changes(&f, 0, 6000);
    CHECK(backends_equal(f.h[0], f.r[0], range));
    sl_kb_snapshot_t *at;
    CHECK_EQ(OPS(f.h[0])->snapshot(f.h[0], &at), 0); /* the heap's view of the same instant */
    char d[1][512];
    sl_rocksdb_files_t files[1];
    CHECK(fleet_checkpoint(&f, d, files));
    int ssts = 0, priv = 0;
    for (int k = 0; k < files[0].n; k++) {
        ssts += files[0].v[k].shared;
        priv += !files[0].v[k].shared;
        if (!files[0].v[k].shared) CHECK(strstr(files[0].v[k].name, ".sst") == NULL);
    }
    CHECK(ssts >= 1);
    CHECK(priv >= 3); /* MANIFEST, CURRENT, OPTIONS */
    CHECK(files[0].sync_ns > 0 && files[0].sync_ns >= files[0].flush_ns);
    CHECK_EQ(strlen(files[0].instance), 32);
    fleet_changes(&f, 0, 3000); /* later changes, compactions included */
    char err[512];
    CHECK_EQ(sl_rocksdb_compact(f.r[0], err, sizeof err), 0);
    CHECK(backends_equal(f.h[0], f.r[0], range));

    char dir[512];
    tmp_path(dir, sizeof dir, "db");
    sl_rocksdb_opts_t o = {.dir = dir};
    const char *dp[1] = {d[0]};
    sl_keyed_backend_t *r = sl_rocksdb_backend_open_native(MAXP, range, dp, &range, 1, &o, err, sizeof err);
    CHECK(r != NULL);
    sl_kb_snapshot_t *rs;
    CHECK_EQ(OPS(r)->snapshot(r, &rs), 0);
    CHECK(views_equal(at, rs, range));
    sl_kb_snapshot_release(rs);
    sl_kb_snapshot_release(at);
    /* Its states are known again: declared with the same descriptors, they
     * give ids under which the restored entries are found. */
    for (int i = 0; i < DNST; i++) {
        sl_state_desc_t desc = {.name = dnames[i], .kind = dkinds[i]};
        int sid = OPS(r)->register_state(r, &desc);
        CHECK(sid >= 0);
        CHECK(i == DNST - 1 || OPS(r)->count(r, sid) > 0);
    }
    CHECK(reg(r, "map", SL_STATE_VALUE) < 0); /* and their kinds */
    OPS(r)->destroy(r);
    CHECK(!path_exists(dir));
    fleet_free(&f);
    sl_rocksdb_files_free(&files[0]);
    rm_rf(d[0]);
}

/* The reference for a checkpoint: heap blocks taken at the same instant. */
TEST(native_checkpoint_split_merge) {
    rng_state = 2024;
    enum { MAXP = 64 };
    char err[512];
    fleet_t f2 = {.p = 2, .maxp = MAXP};
    for (int i = 0; i < 2; i++) {
        f2.range[i] = sl_kg_range_for(MAXP, 2, i);
        f2.r[i] = rdb_new(MAXP, f2.range[i]);
        f2.h[i] = sl_heap_backend_new(MAXP, f2.range[i]);
        CHECK(f2.r[i] && dpair_init(&f2.d[i], f2.h[i], f2.r[i]));
        fleet_changes(&f2, i, 6000);
    }
    char d2[2][512];
    sl_rocksdb_files_t files2[2];
    CHECK(fleet_checkpoint(&f2, d2, files2));

    /* 2 -> 2: the same ranges (copy path, nothing to delete). */
    fleet_t s2 = {0};
    CHECK(fleet_restore(&s2, 2, &f2, d2));
    for (int i = 0; i < 2; i++) CHECK(backends_equal(s2.h[i], s2.r[i], s2.range[i]));
    fleet_free(&s2);

    /* 2 -> 4: each new range lies inside one old one (copy + DeleteRange). */
    fleet_t f4 = {0};
    CHECK(fleet_restore(&f4, 4, &f2, d2));
    for (int i = 0; i < 4; i++) {
        CHECK(backends_equal(f4.h[i], f4.r[i], f4.range[i]));
        /* Nothing outside the range is left: a scan sees only own key groups. */
        for (int st = 0; st < DNST; st++)
            CHECK_EQ(OPS(f4.r[i])->count(f4.r[i], f4.d[i].sid[1][st]),
                     OPS(f4.h[i])->count(f4.h[i], f4.d[i].sid[0][st]));
    }
    /* The restored backends work on: more changes, then 4 -> 2. */
    for (int i = 0; i < 4; i++) {
        fleet_changes(&f4, i, 3000);
        CHECK(backends_equal(f4.h[i], f4.r[i], f4.range[i]));
    }
    char d4[4][512];
    sl_rocksdb_files_t files4[4];
    CHECK(fleet_checkpoint(&f4, d4, files4));
    /* Split backends from one checkpoint share its files but are other instances. */
    CHECK(strcmp(files4[0].instance, files4[1].instance) != 0);

    /* 4 -> 2: each new range takes two directories (rescale copy path). */
    fleet_t m2 = {0};
    CHECK(fleet_restore(&m2, 2, &f4, d4));
    for (int i = 0; i < 2; i++) CHECK(backends_equal(m2.h[i], m2.r[i], m2.range[i]));
    /* 4 -> 1 and 4 -> 3 (ranges that cut across old ones). */
    for (int p = 1; p <= 3; p += 2) {
        fleet_t x = {0};
        CHECK(fleet_restore(&x, p, &f4, d4));
        for (int i = 0; i < p; i++) CHECK(backends_equal(x.h[i], x.r[i], x.range[i]));
        fleet_free(&x);
    }
    for (int i = 0; i < 2; i++) {
        fleet_changes(&m2, i, 2000);
        CHECK(backends_equal(m2.h[i], m2.r[i], m2.range[i]));
    }

    /* Errors: a range not covered, overlapping directories, another max parallelism, not a checkpoint. */
    {
        char dir[512];
        tmp_path(dir, sizeof dir, "db");
        sl_rocksdb_opts_t o = {.dir = dir};
        const char *dp[4] = {d4[0], d4[1], d4[2], d4[3]};
        sl_kg_range_t part[1] = {f4.range[0]};
        CHECK(sl_rocksdb_backend_open_native(MAXP, (sl_kg_range_t){0, MAXP}, dp, part, 1, &o, err, sizeof err) == NULL);
        CHECK_CONTAINS(err, "in none of");
        sl_kg_range_t over[2] = {{0, 40}, {32, 64}};
        CHECK(sl_rocksdb_backend_open_native(MAXP, (sl_kg_range_t){0, MAXP}, dp, over, 2, &o, err, sizeof err) == NULL);
        CHECK_CONTAINS(err, "more than one");
        sl_kg_range_t all[1] = {{0, 16}};
        CHECK(sl_rocksdb_backend_open_native(16, (sl_kg_range_t){0, 16}, dp, all, 1, &o, err, sizeof err) == NULL);
        CHECK_CONTAINS(err, "max parallelism");
        CHECK(!path_exists(dir)); /* a failed open leaves no working directory */
        const char *bogus[1] = {sl_test_tmpdir()};
        sl_kg_range_t full[1] = {{0, MAXP}};
        CHECK(sl_rocksdb_backend_open_native(MAXP, (sl_kg_range_t){0, MAXP}, bogus, full, 1, &o, err, sizeof err) ==
              NULL);
        CHECK_CONTAINS(err, "CURRENT");
        sl_kg_range_t halves[2] = {{0, 32}, {32, 64}};
        const char *bog2[2] = {sl_test_tmpdir(), sl_test_tmpdir()};
        CHECK(sl_rocksdb_backend_open_native(MAXP, (sl_kg_range_t){16, 48}, bog2, halves, 2, &o, err, sizeof err) ==
              NULL);
        CHECK(!path_exists(dir));
    }
    fleet_free(&m2);
    fleet_free(&f4);
    fleet_free(&f2);
    for (int i = 0; i < 2; i++) {
        sl_rocksdb_files_free(&files2[i]);
        rm_rf(d2[i]);
    }
    for (int i = 0; i < 4; i++) {
        sl_rocksdb_files_free(&files4[i]);
        rm_rf(d4[i]);
    }
}

/* Consecutive native checkpoints of one backend share their unchanged SST
 * files by name (the same file: a hard link of the same inode), and a
 * restored backend's checkpoint shares the files it took over. */
TEST(native_checkpoint_incremental) {
    sl_keyed_backend_t *b = new_full();
    int s = reg(b, "v", SL_STATE_VALUE);
    char err[512], c1[512], c2[512], c3[512];
    uint8_t val[100];
    for (uint64_t k = 0; k < 30000; k++) {
        set_u64_key(b, k);
        memset(val, (int)k, sizeof val);
        CHECK_EQ(OPS(b)->put(b, s, NULL, 0, val, sizeof val), 0);
    }
    sl_rocksdb_files_t f1, f2, f3;
    tmp_path(c1, sizeof c1, "chk");
    CHECK_EQ(sl_rocksdb_native_snapshot(b, c1, &f1, err, sizeof err), 0);
    for (uint64_t k = 0; k < 500; k++) { /* a few changes */
        set_u64_key(b, k * 7);
        CHECK_EQ(OPS(b)->put(b, s, NULL, 0, "new", 3), 0);
    }
    tmp_path(c2, sizeof c2, "chk");
    CHECK_EQ(sl_rocksdb_native_snapshot(b, c2, &f2, err, sizeof err), 0);
    CHECK_STR(f1.instance, f2.instance);
    int shared = 0, fresh = 0;
    uint64_t shared_bytes = 0, fresh_bytes = 0;
    for (int i = 0; i < f2.n; i++) {
        if (!f2.v[i].shared) continue;
        bool in1 = false;
        for (int j = 0; j < f1.n; j++)
            if (strcmp(f1.v[j].name, f2.v[i].name) == 0) {
                in1 = true;
                CHECK_EQ(f1.v[j].size, f2.v[i].size);
                char a[1100], bb[1100];
                snprintf(a, sizeof a, "%s/%s", c1, f1.v[j].name);
                snprintf(bb, sizeof bb, "%s/%s", c2, f2.v[i].name);
                CHECK(same_inode(a, bb));
            }
        if (in1) shared++, shared_bytes += f2.v[i].size;
        else fresh++, fresh_bytes += f2.v[i].size;
    }
    CHECK(shared >= 1);
    CHECK(fresh >= 1);
    CHECK(fresh_bytes < shared_bytes); /* the increment is the small part */
    fprintf(stderr,
            "  incremental: checkpoint 2 shares %d SSTs (%" PRIu64 " bytes) with checkpoint 1, adds %d (%" PRIu64
            " bytes)\n",
            shared, shared_bytes, fresh, fresh_bytes);

    /* Restored from c2, the new instance's first checkpoint still holds c2's files. */
    char dir[512];
    tmp_path(dir, sizeof dir, "db");
    sl_rocksdb_opts_t o = {.dir = dir};
    const char *dp[1] = {c2};
    sl_kg_range_t full[1] = {{0, 128}};
    sl_keyed_backend_t *r =
        sl_rocksdb_backend_open_native(128, (sl_kg_range_t){0, 128}, dp, full, 1, &o, err, sizeof err);
    CHECK(r != NULL);
    CHECK(backends_equal(b, r, (sl_kg_range_t){0, 128}));
    tmp_path(c3, sizeof c3, "chk");
    CHECK_EQ(sl_rocksdb_native_snapshot(r, c3, &f3, err, sizeof err), 0);
    CHECK(strcmp(f3.instance, f2.instance) != 0);
    /* Files it took over keep their names, and a name it shares with c2 is
     * c2's file (how many survive depends on RocksDB's compactions after
     * the open: it may already have merged them). */
    int carried = 0;
    for (int i = 0; i < f3.n; i++)
        for (int j = 0; j < f2.n; j++)
            if (f3.v[i].shared && strcmp(f3.v[i].name, f2.v[j].name) == 0) {
                char a[1100], bb[1100];
                snprintf(a, sizeof a, "%s/%s", c2, f2.v[j].name);
                snprintf(bb, sizeof bb, "%s/%s", c3, f3.v[i].name);
                CHECK(same_inode(a, bb));
                CHECK_EQ(f3.v[i].size, f2.v[j].size);
                carried++;
            }
    fprintf(stderr, "  restored instance: its first checkpoint holds %d of the restored checkpoint's SSTs\n", carried);
    /* The checkpoint directories stay readable after their backends go. */
    OPS(b)->destroy(b);
    OPS(r)->destroy(r);
    CHECK(path_exists(c1));
    sl_rocksdb_files_free(&f1);
    sl_rocksdb_files_free(&f2);
    sl_rocksdb_files_free(&f3);
    rm_rf(c1);
    rm_rf(c2);
    rm_rf(c3);
    /* A checkpoint into an existing directory is refused. */
    b = new_full();
    char exists[512];
    tmp_path(exists, sizeof exists, "exists");
    mkdir(exists, 0755);
    CHECK(sl_rocksdb_native_snapshot(b, exists, &f1, err, sizeof err) < 0);
    OPS(b)->destroy(b);
    rm_rf(exists);
}

/* ------------------------------------------------------------------ */
/* TTL                                                                 */

static atomic_llong manual_now;
static int64_t manual_clock(void *ctx) {
    (void)ctx;
    return (int64_t)atomic_load(&manual_now);
}

/* "ts" prefix + payload. */
static uint32_t ttl_val(uint8_t *out, int64_t ts, const char *payload) {
    sl_st64(out, (uint64_t)ts);
    uint32_t n = (uint32_t)strlen(payload);
    memcpy(out + 8, payload, n);
    return 8 + n;
}

/* The TTL scenario's content: key i of the key group holds, in each state,
 * items with timestamps 1000 (expire at 1100), 1050 (at 1150) and 5000. */
static const int64_t tstamps[3] = {1000, 1050, 5000};

/* The expected block of key group kg when items with ts + 100 <= now are gone. */
static void ttl_expect(sl_buf_t *out, int maxp, int kg, char keys[][16], int nk, int64_t now) {
    /* states by name: "l" list, "m" map, "plain" value, "v" value */
    e_head(out, maxp, kg, 4);
    /* sort the keys bytewise */
    int idx[8];
    for (int i = 0; i < nk; i++) idx[i] = i;
    for (int i = 0; i < nk; i++)
        for (int j = i + 1; j < nk; j++)
            if (strcmp(keys[idx[j]], keys[idx[i]]) < 0) {
                int t = idx[i];
                idx[i] = idx[j];
                idx[j] = t;
            }
    uint8_t buf[64];
    /* "l": key i holds the three elements in insertion order */
    e_bytes(out, "l", 1);
    e_u8(out, SL_STATE_LIST | SL_KBF_TTL);
    e_varint(out, (uint64_t)nk); /* the 5000 element keeps every list alive */
    for (int a = 0; a < nk; a++) {
        e_bytes(out, keys[idx[a]], (uint32_t)strlen(keys[idx[a]]));
        e_bytes(out, "", 0);
        int n = 0;
        for (int t = 0; t < 3; t++) n += tstamps[t] + 100 > now;
        e_varint(out, (uint64_t)n);
        for (int t = 0; t < 3; t++)
            if (tstamps[t] + 100 > now)
                e_bytes(out, buf, ttl_val(buf, tstamps[t], t == 0 ? "e0" : t == 1 ? "e1" : "e2"));
    }
    /* "m": user keys "a" (1000), "b" (1050), "c" (5000) */
    e_bytes(out, "m", 1);
    e_u8(out, SL_STATE_MAP | SL_KBF_TTL);
    e_varint(out, (uint64_t)nk);
    for (int a = 0; a < nk; a++) {
        e_bytes(out, keys[idx[a]], (uint32_t)strlen(keys[idx[a]]));
        e_bytes(out, "", 0);
        int n = 0;
        for (int t = 0; t < 3; t++) n += tstamps[t] + 100 > now;
        e_varint(out, (uint64_t)n);
        for (int t = 0; t < 3; t++)
            if (tstamps[t] + 100 > now) {
                char uk[2] = {(char)('a' + t), 0};
                e_bytes(out, uk, 1);
                e_bytes(out, buf, ttl_val(buf, tstamps[t], "mv"));
            }
    }
    /* "plain": no TTL, a value that looks expired stays */
    e_bytes(out, "plain", 5);
    e_u8(out, SL_STATE_VALUE);
    e_varint(out, (uint64_t)nk);
    for (int a = 0; a < nk; a++) {
        e_bytes(out, keys[idx[a]], (uint32_t)strlen(keys[idx[a]]));
        e_bytes(out, "", 0);
        e_bytes(out, buf, ttl_val(buf, 1, "old"));
    }
    /* "v": key i's value has timestamp tstamps[i % 3] */
    e_bytes(out, "v", 1);
    e_u8(out, SL_STATE_VALUE | SL_KBF_TTL);
    int n = 0;
    for (int a = 0; a < nk; a++) n += tstamps[idx[a] % 3] + 100 > now;
    e_varint(out, (uint64_t)n);
    for (int a = 0; a < nk; a++)
        if (tstamps[idx[a] % 3] + 100 > now) {
            e_bytes(out, keys[idx[a]], (uint32_t)strlen(keys[idx[a]]));
            e_bytes(out, "", 0);
            e_bytes(out, buf, ttl_val(buf, tstamps[idx[a] % 3], "val"));
        }
    e_sum(out);
}

static bool block_is(const sl_kb_snapshot_t *s, int kg, const sl_buf_t *want) {
    sl_buf_t x = write_kg(s, kg);
    bool eq = x.len == want->len && memcmp(x.p, want->p, x.len) == 0;
    if (!eq) fprintf(stderr, "key group %d: %zu bytes, expected %zu\n", kg, x.len, want->len);
    sl_buf_free(&x);
    return eq;
}

TEST(ttl_snapshot_and_compaction) {
    enum { MAXP = 8, KG = 3, NK = 6 };
    char keys[NK][16];
    keys_of_kg(MAXP, KG, keys, NK);
    sl_keyed_backend_t *b = rdb_new(MAXP, (sl_kg_range_t){0, MAXP});
    const sl_keyed_backend_ops_t *o = b->ops;
    atomic_store(&manual_now, 1000);
    sl_kb_set_clock(b, manual_clock, NULL);
    int sv = reg_ttl(b, "v", SL_STATE_VALUE, 100), sl = reg_ttl(b, "l", SL_STATE_LIST, 100),
        sm = reg_ttl(b, "m", SL_STATE_MAP, 100), sp = reg(b, "plain", SL_STATE_VALUE);
    CHECK(sv >= 0 && sl >= 0 && sm >= 0 && sp >= 0);
    uint8_t buf[64];
    for (int i = 0; i < NK; i++) {
        sl_kb_set_key(b, keys[i], (uint32_t)strlen(keys[i]));
        CHECK_EQ(o->put(b, sv, NULL, 0, buf, ttl_val(buf, tstamps[i % 3], "val")), 0);
        CHECK_EQ(o->put(b, sp, NULL, 0, buf, ttl_val(buf, 1, "old")), 0);
        for (int t = 0; t < 3; t++) {
            CHECK_EQ(o->list_add(b, sl, NULL, 0, buf, ttl_val(buf, tstamps[t], t == 0 ? "e0" : t == 1 ? "e1" : "e2")),
                     0);
            char uk[1] = {(char)('a' + t)};
            CHECK_EQ(o->map_put(b, sm, NULL, 0, uk, 1, buf, ttl_val(buf, tstamps[t], "mv")), 0);
        }
    }
    sl_buf_t want = {0};
    /* At 1000 nothing has expired. */
    sl_kb_snapshot_t *s0;
    CHECK_EQ(o->snapshot(b, &s0), 0);
    ttl_expect(&want, MAXP, KG, keys, NK, 1000);
    CHECK(block_is(s0, KG, &want));
    sl_kb_snapshot_release(s0);

    /* At 1120 the 1000 items have expired: the snapshot leaves them out... */
    atomic_store(&manual_now, 1120);
    sl_kb_snapshot_t *s1;
    CHECK_EQ(o->snapshot(b, &s1), 0);
    want.len = 0;
    ttl_expect(&want, MAXP, KG, keys, NK, 1120);
    CHECK(block_is(s1, KG, &want));
    /* ... while the store still has them (reads give the bytes as stored). */
    sl_kb_set_key(b, keys[0], (uint32_t)strlen(keys[0]));
    uint32_t len;
    CHECK(o->get(b, sv, NULL, 0, &len) != NULL);
    CHECK_EQ(o->count(b, sv), NK);

    /* At 1200 the 1050 items have expired too, but the view s1 (taken at
     * 1120) is still out: compaction drops only what had expired at 1120. */
    atomic_store(&manual_now, 1200);
    char err[256];
    CHECK_EQ(sl_rocksdb_compact(b, err, sizeof err), 0);
    CHECK(block_is(s1, KG, &want)); /* the view is intact */
    for (int i = 0; i < NK; i++) {
        sl_kb_set_key(b, keys[i], (uint32_t)strlen(keys[i]));
        bool gone = tstamps[i % 3] == 1000;
        CHECK((o->get(b, sv, NULL, 0, &len) == NULL) == gone); /* physically gone */
        CHECK(o->get(b, sp, NULL, 0, &len) != NULL);            /* no TTL: kept */
        CHECK_EQ(o->list_foreach(b, sl, NULL, 0, NULL, NULL), 2); /* e0 dropped from the list */
        CHECK(o->map_get(b, sm, NULL, 0, "a", 1, &len) == NULL);
        CHECK(o->map_get(b, sm, NULL, 0, "b", 1, &len) != NULL);
    }
    sl_kb_snapshot_release(s1);

    /* With no view out, the next compaction uses the clock (1200). */
    CHECK_EQ(sl_rocksdb_compact(b, err, sizeof err), 0);
    int left = 0;
    for (int i = 0; i < NK; i++) {
        sl_kb_set_key(b, keys[i], (uint32_t)strlen(keys[i]));
        left += o->get(b, sv, NULL, 0, &len) != NULL;
        lgot_t *lg = &g_la;
        lg->data.len = 0;
        lg->n = 0;
        CHECK_EQ(o->list_foreach(b, sl, NULL, 0, lgot_cb, lg), 1);
        CHECK(lg->lens[0] == 10 && memcmp((const uint8_t *)lg->ptrs[0] + 8, "e2", 2) == 0);
        CHECK_EQ(o->map_foreach(b, sm, NULL, 0, NULL, NULL), 1);
    }
    CHECK_EQ(left, NK / 3); /* only the 5000 values */
    CHECK_EQ(o->count(b, sp), NK);
    sl_kb_snapshot_t *s2;
    CHECK_EQ(o->snapshot(b, &s2), 0);
    want.len = 0;
    ttl_expect(&want, MAXP, KG, keys, NK, 1200);
    CHECK(block_is(s2, KG, &want));
    sl_kb_snapshot_release(s2);

    /* A native checkpoint keeps the TTL of its states: a restored backend
     * filters before anyone declares them again. */
    char ck[512], dir[512];
    tmp_path(ck, sizeof ck, "chk");
    sl_rocksdb_files_t f;
    CHECK_EQ(sl_rocksdb_native_snapshot(b, ck, &f, err, sizeof err), 0);
    sl_rocksdb_files_free(&f);
    tmp_path(dir, sizeof dir, "db");
    sl_rocksdb_opts_t opts = {.dir = dir};
    const char *dp[1] = {ck};
    sl_kg_range_t rr[1] = {{0, MAXP}};
    sl_keyed_backend_t *r = sl_rocksdb_backend_open_native(MAXP, (sl_kg_range_t){0, MAXP}, dp, rr, 1, &opts, err,
                                                           sizeof err);
    CHECK(r != NULL);
    sl_kb_set_clock(r, manual_clock, NULL);
    atomic_store(&manual_now, 6000); /* everything with a TTL has expired */
    sl_kb_snapshot_t *s3;
    CHECK_EQ(OPS(r)->snapshot(r, &s3), 0);
    want.len = 0;
    e_head(&want, MAXP, KG, 4);
    e_bytes(&want, "l", 1), e_u8(&want, SL_STATE_LIST | SL_KBF_TTL), e_varint(&want, 0);
    e_bytes(&want, "m", 1), e_u8(&want, SL_STATE_MAP | SL_KBF_TTL), e_varint(&want, 0);
    e_bytes(&want, "plain", 5), e_u8(&want, SL_STATE_VALUE), e_varint(&want, NK);
    int idx[NK];
    for (int i = 0; i < NK; i++) idx[i] = i;
    for (int i = 0; i < NK; i++)
        for (int j = i + 1; j < NK; j++)
            if (strcmp(keys[idx[j]], keys[idx[i]]) < 0) {
                int t = idx[i];
                idx[i] = idx[j];
                idx[j] = t;
            }
    for (int a = 0; a < NK; a++) {
        e_bytes(&want, keys[idx[a]], (uint32_t)strlen(keys[idx[a]]));
        e_bytes(&want, "", 0);
        e_bytes(&want, buf, ttl_val(buf, 1, "old"));
    }
    e_bytes(&want, "v", 1), e_u8(&want, SL_STATE_VALUE | SL_KBF_TTL), e_varint(&want, 0);
    e_sum(&want);
    CHECK(block_is(s3, KG, &want));
    sl_kb_snapshot_release(s3);
    /* Declared again with the same TTL: the same ids. */
    CHECK_EQ(reg_ttl(r, "v", SL_STATE_VALUE, 100), sv);
    CHECK_EQ(reg_ttl(r, "l", SL_STATE_LIST, 100), sl);
    OPS(r)->destroy(r);
    rm_rf(ck);
    sl_buf_free(&want);
    OPS(b)->destroy(b);
}

/* ------------------------------------------------------------------ */
/* memory options                                                      */

TEST(memory_options) {
    sl_rocksdb_cache_t *cache = sl_rocksdb_cache_new(2 << 20);
    sl_rocksdb_opts_t o = {.cache = cache, .write_buffer_bytes = 1 << 20, .background_jobs = 1, .max_open_files = 64};
    sl_keyed_backend_t *a = rdb_new_opts(128, (sl_kg_range_t){0, 128}, &o, NULL);
    sl_keyed_backend_t *b = rdb_new_opts(128, (sl_kg_range_t){0, 128}, &o, NULL);
    CHECK(a && b);
    sl_rocksdb_cache_free(cache); /* the backends keep it */
    cache = NULL;
    int sa = reg(a, "v", SL_STATE_VALUE), sb = reg(b, "v", SL_STATE_VALUE);
    uint8_t val[200];
    enum { N = 60000 }; /* 2 x 12 MB of values: far more than cache and write buffers */
    uint64_t peak_mem = 0, x = 1;
    for (uint64_t k = 0; k < N; k++) {
        for (size_t i = 0; i < sizeof val; i += 8) { /* incompressible */
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            sl_st64(val + i, x);
        }
        val[0] = (uint8_t)k;
        set_u64_key(a, k);
        set_u64_key(b, k);
        CHECK_EQ(OPS(a)->put(a, sa, NULL, 0, val, sizeof val), 0);
        CHECK_EQ(OPS(b)->put(b, sb, NULL, 0, val, sizeof val), 0);
        if (k % 5000 == 0) {
            sl_rocksdb_mem_t m;
            CHECK_EQ(sl_rocksdb_memory(a, &m), 0);
            peak_mem = SL_MAX(peak_mem, m.memtables);
        }
    }
    for (int i = 0; i < 20000; i++) { /* random reads fill the cache */
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        uint64_t k = (x >> 20) % N;
        uint32_t len;
        set_u64_key(a, k);
        const uint8_t *v = OPS(a)->get(a, sa, NULL, 0, &len);
        CHECK(v && len == sizeof val && v[0] == (uint8_t)k);
        set_u64_key(b, k);
        CHECK(OPS(b)->get(b, sb, NULL, 0, &len) != NULL);
    }
    sl_rocksdb_mem_t ma, mb;
    CHECK_EQ(sl_rocksdb_memory(a, &ma), 0);
    CHECK_EQ(sl_rocksdb_memory(b, &mb), 0);
    fprintf(stderr,
            "  memory: cache %" PRIu64 " / %" PRIu64 " bytes (shared), memtables a %" PRIu64 " b %" PRIu64
            " (peak %" PRIu64 ", budget %d), table readers %" PRIu64 ", SSTs %" PRIu64 " bytes\n",
            ma.block_cache, ma.block_cache_cap, ma.memtables, mb.memtables, peak_mem, 1 << 20, ma.table_readers,
            ma.live_sst_bytes);
    CHECK_EQ(ma.block_cache_cap, 2 << 20);
    CHECK_EQ(mb.block_cache_cap, 2 << 20);
    CHECK(ma.block_cache == mb.block_cache); /* one cache */
    CHECK(ma.block_cache > 0 && ma.block_cache <= (2 << 20) + (256 << 10));
    CHECK(peak_mem <= (1 << 20) + (512 << 10));
    CHECK(ma.memtables <= (1 << 20) + (512 << 10));
    CHECK(ma.live_sst_bytes > 5 << 20); /* the data went to disk */
    OPS(a)->destroy(a);
    OPS(b)->destroy(b);

    /* A private cache of the given size. */
    sl_rocksdb_opts_t p = {.block_cache_bytes = 3 << 20};
    sl_keyed_backend_t *c = rdb_new_opts(128, (sl_kg_range_t){0, 128}, &p, NULL);
    sl_rocksdb_mem_t mc;
    CHECK_EQ(sl_rocksdb_memory(c, &mc), 0);
    CHECK_EQ(mc.block_cache_cap, 3 << 20);
    OPS(c)->destroy(c);
}

/* ------------------------------------------------------------------ */
/* measurements                                                        */

/* Sanitizer builds measure a fifth of the sizes (their figures mean little). */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MEASURE_DIV 5
#else
#define MEASURE_DIV 1
#endif

static int64_t thread_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

TEST(measure) {
    sl_rocksdb_opts_t o = {.block_cache_bytes = 64 << 20, .write_buffer_bytes = 64 << 20};
    sl_keyed_backend_t *b = rdb_new_opts(128, (sl_kg_range_t){0, 128}, &o, NULL);
    int s = reg(b, "acc", SL_STATE_VALUE), big = reg(b, "big", SL_STATE_VALUE);
    const sl_keyed_backend_ops_t *op = b->ops;
    enum { N = 1000000 / MEASURE_DIV, NBIG = 800000 / MEASURE_DIV };
    if (MEASURE_DIV > 1) fprintf(stderr, "  (sanitizer build: 1/%d of the sizes)\n", MEASURE_DIV);
    uint8_t ns[16] = {1, 2, 3};
    for (int pass = 0; pass < 2; pass++) {
        int64_t t0 = sl_mono_ns(), c0 = thread_cpu_ns();
        for (uint64_t k = 0; k < N; k++) {
            set_u64_key(b, k * 0x9E3779B97F4A7C15ULL);
            bool created;
            uint64_t *acc = op->get_mut(b, s, ns, 16, 16, &created);
            if (SL_UNLIKELY(!acc || created != (pass == 0))) {
                CHECK(acc && created == (pass == 0));
            }
            acc[0] += k;
            acc[1]++;
            op->put(b, s, ns, 16, acc, 16);
        }
        double secs = (double)(sl_mono_ns() - t0) / 1e9, cpu = (double)(thread_cpu_ns() - c0) / 1e9;
        fprintf(stderr, "  get_mut + put, %d keys, %s: %.0f ops/s (%.0f ops/s of task-thread CPU)\n", N,
                pass ? "existing" : "new", N / secs, N / cpu);
    }
    set_u64_key(b, 5 * 0x9E3779B97F4A7C15ULL);
    uint32_t len;
    const uint64_t *v = op->get(b, s, ns, 16, &len);
    CHECK(v && v[0] == 10 && v[1] == 2);

    /* ~100 MB of state: 800K values of 120 bytes more. */
    uint8_t val[120];
    for (uint64_t k = 0; k < NBIG; k++) {
        set_u64_key(b, k);
        for (int i = 0; i < 120; i += 8) sl_st64(val + i, k * 0x9E3779B97F4A7C15ULL + (uint64_t)i);
        CHECK_EQ(op->put(b, big, NULL, 0, val, sizeof val), 0);
    }
    char err[512], ck[512];
    sl_rocksdb_files_t f;
    for (int round = 0; round < 2; round++) {
        tmp_path(ck, sizeof ck, "chk");
        CHECK_EQ(sl_rocksdb_native_snapshot(b, ck, &f, err, sizeof err), 0);
        uint64_t bytes = 0;
        for (int i = 0; i < f.n; i++) bytes += f.v[i].size;
        fprintf(stderr,
                "  native snapshot %d: %d files, %.1f MB on disk; synchronous phase %.2f ms (flush %.2f ms)\n",
                round + 1, f.n, (double)bytes / 1e6, (double)f.sync_ns / 1e6, (double)f.flush_ns / 1e6);
        sl_rocksdb_files_free(&f);
        rm_rf(ck);
        for (uint64_t k = 0; k < 10000 / MEASURE_DIV; k++) { /* a checkpoint interval's worth of changes */
            set_u64_key(b, k * 13);
            CHECK_EQ(op->put(b, big, NULL, 0, val, sizeof val), 0);
        }
    }
    /* The canonical snapshot's synchronous phase. */
    int64_t t0 = sl_mono_ns();
    sl_kb_snapshot_t *sn;
    CHECK_EQ(op->snapshot(b, &sn), 0);
    int64_t t1 = sl_mono_ns();
    sl_buf_t x = {0};
    for (int kg = 0; kg < 128; kg++) {
        x.len = 0;
        CHECK_EQ(sl_kb_snapshot_write(sn, kg, &x), 0);
    }
    int64_t t2 = sl_mono_ns();
    fprintf(stderr, "  canonical snapshot: synchronous %.3f ms, writing all 128 key groups %.0f ms\n",
            (double)(t1 - t0) / 1e6, (double)(t2 - t1) / 1e6);
    sl_buf_free(&x);
    sl_kb_snapshot_release(sn);
    OPS(b)->destroy(b);
}

int main(void) {
    RUN(create_and_destroy);
    RUN(register_state);
    RUN(value_basics);
    RUN(value_get_mut);
    RUN(value_many_keys);
    RUN(list_basics);
    RUN(list_long);
    RUN(map_basics);
    RUN(foreach_entry_across_key_groups);
    RUN(pointer_lifetimes);
    RUN(differential_against_heap);
    RUN(restore_rejects_corrupt_blocks);
    RUN(snapshot_write_concurrent_with_writes);
    RUN(snapshot_outlives_backend);
    RUN(native_checkpoint_point_in_time);
    RUN(native_checkpoint_split_merge);
    RUN(native_checkpoint_incremental);
    RUN(ttl_snapshot_and_compaction);
    RUN(memory_options);
    RUN(measure);
    collectors_free();
    rm_rf(sl_test_tmpdir());
    TEST_MAIN_END();
}
