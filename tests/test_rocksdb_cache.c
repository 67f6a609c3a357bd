/*
 * test_rocksdb_cache.c — the write-back value cache of the RocksDB backend
 * (rocksdb_cache.h, rocksdb_backend.c) on a real RocksDB.
 *
 * The reference is the heap backend, which shares no code with the cache:
 *
 *   - a randomized model run: thousands of get / get_mut (with and without
 *     put) / put / remove on two VALUE states, mixed with list appends,
 *     count and foreach_entry, against a cache of a few KiB (so entries are
 *     evicted, dirty ones too, all the time) and values too large to cache;
 *     every read is compared; canonical snapshots are compared byte for
 *     byte and restored into fresh backends that the run continues on;
 *     native checkpoints are taken while the cache holds dirty values and
 *     restored whole and split in two (another parallelism);
 *   - captures (the synchronous phase: dirty values captured, not written):
 *     in the same runs, views of both backends are taken at the same moment
 *     and kept for up to hundreds of steps — overlapping, outliving
 *     restores, native checkpoints and the backend itself — then compared
 *     byte for byte: the heap's copy-on-write view is the reference, so a
 *     change after the barrier that leaks in, a change before it that is
 *     missing, a lost delete or an evicted captured value all show; and
 *     the views are written on another thread while the task goes on
 *     (evicting, copying and writing captured values back: TSan);
 *   - a pointer returned by get stays readable while other states' calls
 *     evict everything (ASan would see a freed one);
 *   - TTL through the accessors of ttl.c with a manual clock: values read,
 *     updated on read, folded, expired, snapshotted and compacted — the same
 *     answers as the heap, never an expired value;
 *   - a native checkpoint of a backend whose every value is still dirty in
 *     the cache holds them all;
 *   - and a measurement: hot-key get_mut + put with and without the cache,
 *     and the synchronous phase of snapshot() with many dirty values.
 */
#include "test.h"

#include <ftw.h>
#include <pthread.h>
#include <sys/stat.h>
#include <time.h>

#include "common/common.h"
#include "state/rocksdb_backend.h"
#include "state/state_backend.h"
#include "state/ttl.h"

#define OPS(b) ((b)->ops)

#if defined(__SANITIZE_THREAD__)
const char *__tsan_default_suppressions(void);
const char *__tsan_default_suppressions(void) {
    return "called_from_lib:librocksdb.so\ncalled_from_lib:libstdc++.so\nrace:librocksdb.so\n";
}
#endif

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define SCALE_DIV 4 /* sanitizer builds run a quarter of the operations */
#else
#define SCALE_DIV 1
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

static uint64_t rng;
static uint64_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}
static uint32_t rndn(uint32_t n) { return (uint32_t)(rnd() % n); }

/* Captured values written back per backend call by the backends made next
 * (0: the default; 1 keeps captured generations pending for long, -1 until
 * an eviction or a flush). */
static int writeback;

static sl_keyed_backend_t *rdb_new(int maxp, sl_kg_range_t r, int64_t cache_bytes) {
    char dir[512], err[512] = "";
    tmp_path(dir, sizeof dir, "db");
    sl_rocksdb_opts_t o = {.dir = dir, .write_buffer_bytes = 1 << 20, .block_cache_bytes = 4 << 20,
                           .value_cache_bytes = cache_bytes, .value_cache_writeback = writeback};
    sl_keyed_backend_t *b = sl_rocksdb_backend_new(maxp, r, &o, err, sizeof err);
    if (!b) fprintf(stderr, "sl_rocksdb_backend_new: %s\n", err);
    return b;
}

static sl_keyed_backend_t *rdb_open(int maxp, sl_kg_range_t r, const char *ck, sl_kg_range_t ckr, int64_t cache) {
    char dir[512], err[512] = "";
    tmp_path(dir, sizeof dir, "db");
    sl_rocksdb_opts_t o = {.dir = dir, .write_buffer_bytes = 1 << 20, .block_cache_bytes = 4 << 20,
                           .value_cache_bytes = cache, .value_cache_writeback = writeback};
    const char *dirs[1] = {ck};
    sl_keyed_backend_t *b = sl_rocksdb_backend_open_native(maxp, r, dirs, &ckr, 1, &o, err, sizeof err);
    if (!b) fprintf(stderr, "sl_rocksdb_backend_open_native: %s\n", err);
    return b;
}

static int reg(sl_keyed_backend_t *b, const char *name, sl_state_kind_t kind, int64_t ttl) {
    sl_state_desc_t d = {.name = name, .kind = kind, .ttl_ms = ttl};
    return OPS(b)->register_state(b, &d);
}

static bool same(const void *a, uint32_t al, const void *b, uint32_t bl) {
    if (!a || !b) return !a && !b;
    return al == bl && (al == 0 || memcmp(a, b, al) == 0);
}

/* Key group kg of both views, byte for byte (the canonical format gives
 * equal bytes for equal state). */
static bool views_equal(const sl_kb_snapshot_t *a, const sl_kb_snapshot_t *b, sl_kg_range_t r) {
    bool eq = true;
    for (int kg = r.start; kg < r.end && eq; kg++) {
        sl_buf_t x = {0}, y = {0};
        int ra = sl_kb_snapshot_write(a, kg, &x), rb = sl_kb_snapshot_write(b, kg, &y);
        eq = ra == 0 && rb == 0 && x.len == y.len && memcmp(x.p, y.p, x.len) == 0;
        if (!eq) fprintf(stderr, "  key group %d: blocks differ (%zu vs %zu bytes)\n", kg, x.len, y.len);
        sl_buf_free(&x);
        sl_buf_free(&y);
    }
    return eq;
}

static bool backends_equal(sl_keyed_backend_t *a, sl_keyed_backend_t *b, sl_kg_range_t r) {
    sl_kb_snapshot_t *sa = NULL, *sb = NULL;
    if (OPS(a)->snapshot(a, &sa) || OPS(b)->snapshot(b, &sb)) {
        if (sa) sl_kb_snapshot_release(sa);
        return false;
    }
    bool eq = views_equal(sa, sb, r);
    sl_kb_snapshot_release(sa);
    sl_kb_snapshot_release(sb);
    return eq;
}

/* Restores every key group of view s into dst; 0 or < 0. */
static int restore_all(sl_keyed_backend_t *dst, const sl_kb_snapshot_t *s, sl_kg_range_t r) {
    for (int kg = r.start; kg < r.end; kg++) {
        sl_buf_t x = {0};
        char err[512] = "";
        int rc = sl_kb_snapshot_write(s, kg, &x);
        if (!rc) rc = OPS(dst)->restore(dst, kg, x.p, x.len, err, sizeof err);
        if (rc) fprintf(stderr, "  restore of key group %d: %s\n", kg, err);
        sl_buf_free(&x);
        if (rc) return rc;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* the randomized model run                                            */

enum { MAXP = 16, NKEYS = 160, NNS = 3, BIG = 3000 };
static const sl_kg_range_t FULL = {0, MAXP};
static const char *const nss[NNS] = {"", "w1", "w22"};

enum { MAXHELD = 4 };

/* Views of both backends taken at the same moment, compared later. */
typedef struct held_view {
    sl_kb_snapshot_t *r, *h;
    int taken, until; /* the steps at which they were taken and are compared */
} held_view_t;

typedef struct model {
    sl_keyed_backend_t *r, *h; /* RocksDB with the cache; the heap reference */
    held_view_t held_views[MAXHELD];
    int nheld;
    int64_t cache;             /* budget of r's cache */
    int va, vb, li;            /* state ids (the same in both: registered in the same order) */
    /* a get pointer of state va kept across other states' calls */
    const uint8_t *held;
    uint8_t held_copy[BIG + 64];
    uint32_t held_len;
    int held_reads; /* reads of va since */
    /* what the run saw */
    uint64_t evictions, evicted_dirty, hits, native_dirty, natives, restores, uncached_puts;
    uint64_t captured, cow_copies, written_back, evicted_captured, held_compared, max_gens;
} model_t;

static void set_key(model_t *m, unsigned k) {
    char key[16];
    int n = snprintf(key, sizeof key, "key%u", k);
    sl_kb_set_key(m->r, key, (uint32_t)n);
    sl_kb_set_key(m->h, key, (uint32_t)n);
}

static uint32_t rnd_value(uint8_t *v) {
    uint32_t n = rndn(8) == 0 ? BIG - rndn(100) : rndn(41);
    for (uint32_t i = 0; i < n; i++) v[i] = (uint8_t)rnd();
    return n;
}

static void model_register(model_t *m) {
    m->va = reg(m->r, "a", SL_STATE_VALUE, 0);
    m->vb = reg(m->r, "b", SL_STATE_VALUE, 0);
    m->li = reg(m->r, "l", SL_STATE_LIST, 0);
    int ha = reg(m->h, "a", SL_STATE_VALUE, 0), hb = reg(m->h, "b", SL_STATE_VALUE, 0),
        hl = reg(m->h, "l", SL_STATE_LIST, 0);
    if (ha != m->va || hb != m->vb || hl != m->li) abort();
}

static void model_collect(model_t *m) {
    sl_rvc_stats_t st;
    if (sl_rocksdb_value_cache_stats(m->r, &st) != 0) return;
    m->evictions += st.evictions;
    m->evicted_dirty += st.evicted_dirty;
    m->hits += st.hits;
    m->captured += st.captured;
    m->cow_copies += st.cow_copies;
    m->written_back += st.written_back;
    m->evicted_captured += st.evicted_captured;
}

/* Replaces the backends (r2 and h2 hold the same state). */
static void model_swap(model_t *m, sl_keyed_backend_t *r2, sl_keyed_backend_t *h2) {
    model_collect(m);
    OPS(m->r)->destroy(m->r);
    OPS(m->h)->destroy(m->h);
    m->r = r2;
    m->h = h2;
    m->held = NULL;
}

typedef struct ents {
    sl_buf_t b;
    int n;
} ents_t;
static int ent_cb(void *c, const void *key, uint32_t klen, const void *ns, uint32_t nslen) {
    ents_t *e = c;
    uint8_t rec[64] = {0};
    if (klen + nslen + 2 > sizeof rec) return 1;
    rec[0] = (uint8_t)klen;
    memcpy(rec + 1, key, klen);
    rec[1 + klen] = (uint8_t)nslen;
    memcpy(rec + 2 + klen, ns, nslen);
    sl_buf_append(&e->b, rec, sizeof rec);
    e->n++;
    return 0;
}
static int rec_cmp(const void *a, const void *b) { return memcmp(a, b, 64); }
static bool same_entries(model_t *m, int sid) {
    ents_t x = {{0}, 0}, y = {{0}, 0};
    int rx = OPS(m->r)->foreach_entry(m->r, sid, ent_cb, &x), ry = OPS(m->h)->foreach_entry(m->h, sid, ent_cb, &y);
    bool eq = rx == 0 && ry == 0 && x.n == y.n;
    if (eq && x.n) {
        qsort(x.b.p, (size_t)x.n, 64, rec_cmp);
        qsort(y.b.p, (size_t)y.n, 64, rec_cmp);
        eq = memcmp(x.b.p, y.b.p, (size_t)x.n * 64) == 0;
    }
    sl_buf_free(&x.b);
    sl_buf_free(&y.b);
    return eq;
}

typedef struct lcol {
    sl_buf_t b;
} lcol_t;
static int lcol_cb(void *c, const void *v, uint32_t len) {
    lcol_t *l = c;
    sl_buf_append(&l->b, &len, sizeof len);
    sl_buf_append(&l->b, v, len);
    return 0;
}

/* One random step; false (with a message) when the backends disagree. */
static bool model_step(model_t *m, int step) {
    set_key(m, rndn(3) ? rndn(NKEYS) : rndn(6)); /* a few hot keys: captured ones are changed again */
    const char *ns = nss[rndn(NNS)];
    uint32_t nslen = (uint32_t)strlen(ns);
    int sid = rndn(3) ? m->va : m->vb;
    sl_keyed_backend_t *r = m->r, *h = m->h;
    uint8_t v[BIG + 64];
    uint32_t op = rndn(100), rl = 0, hl = 0;
    if (sid == m->va && op < 70) m->held = op < 25 ? m->held : NULL; /* every call but get invalidates */
    if (op < 25) { /* get */
        const uint8_t *rv = OPS(r)->get(r, sid, ns, nslen, &rl), *hv = OPS(h)->get(h, sid, ns, nslen, &hl);
        if (!same(rv, rl, hv, hl)) {
            fprintf(stderr, "  step %d: get differs (%s vs %s)\n", step, rv ? "value" : "absent",
                    hv ? "value" : "absent");
            return false;
        }
        if (sid == m->va && rv && rl <= sizeof m->held_copy && (!m->held || rndn(4) == 0)) {
            m->held = rv;
            m->held_len = rl;
            memcpy(m->held_copy, rv, rl);
            m->held_reads = 0;
        }
        if (sid == m->va && ++m->held_reads >= SL_RDB_PIN_MAX_READS) m->held = NULL;
    } else if (op < 45) { /* get_mut, changed, then put (or, when created or resized, sometimes not) */
        uint32_t vlen = rndn(5) == 0 ? rndn(41) : 16;
        bool rc = false, hc = false;
        uint32_t before_r = 0, before_h = 0;
        const void *pr = OPS(r)->get(r, sid, ns, nslen, &before_r), *ph = OPS(h)->get(h, sid, ns, nslen, &before_h);
        bool existed = pr != NULL;
        if (existed != (ph != NULL)) {
            fprintf(stderr, "  step %d: get before get_mut differs\n", step);
            return false;
        }
        uint8_t *mr = OPS(r)->get_mut(r, sid, ns, nslen, vlen, &rc);
        uint8_t *mh = OPS(h)->get_mut(h, sid, ns, nslen, vlen, &hc);
        if (!mr || !mh || rc != hc || (vlen && memcmp(mr, mh, vlen) != 0)) {
            fprintf(stderr, "  step %d: get_mut differs (created %d vs %d)\n", step, rc, hc);
            return false;
        }
        for (uint32_t i = 0; i < vlen; i++)
            if (rndn(3) == 0) mr[i] = mh[i] = (uint8_t)rnd();
        bool fresh = rc || before_r != vlen; /* created or resized: stored as it is at the next call */
        if (!fresh || rndn(2)) {
            if (OPS(r)->put(r, sid, ns, nslen, mr, vlen) != 0 || OPS(h)->put(h, sid, ns, nslen, mh, vlen) != 0) {
                fprintf(stderr, "  step %d: put after get_mut failed\n", step);
                return false;
            }
        }
    } else if (op < 62) { /* put */
        uint32_t n = rnd_value(v);
        m->uncached_puts += n >= BIG - 100;
        if (OPS(r)->put(r, sid, ns, nslen, v, n) != 0 || OPS(h)->put(h, sid, ns, nslen, v, n) != 0) {
            fprintf(stderr, "  step %d: put failed: %s\n", step, sl_rocksdb_backend_error(r));
            return false;
        }
    } else if (op < 70) { /* remove */
        int a = OPS(r)->remove(r, sid, ns, nslen), b = OPS(h)->remove(h, sid, ns, nslen);
        if (a != b) {
            fprintf(stderr, "  step %d: remove returned %d vs %d\n", step, a, b);
            return false;
        }
    } else if (op < 80) { /* a list append (not cached) */
        uint32_t n = rndn(12);
        for (uint32_t i = 0; i < n; i++) v[i] = (uint8_t)rnd();
        if (OPS(r)->list_add(r, m->li, ns, nslen, v, n) != 0 || OPS(h)->list_add(h, m->li, ns, nslen, v, n) != 0)
            return false;
    } else if (op < 85) { /* a list read */
        lcol_t x = {{0}}, y = {{0}};
        int a = OPS(r)->list_foreach(r, m->li, ns, nslen, lcol_cb, &x),
            b = OPS(h)->list_foreach(h, m->li, ns, nslen, lcol_cb, &y);
        bool eq = a == b && x.b.len == y.b.len && (x.b.len == 0 || memcmp(x.b.p, y.b.p, x.b.len) == 0);
        sl_buf_free(&x.b);
        sl_buf_free(&y.b);
        if (!eq) {
            fprintf(stderr, "  step %d: list differs\n", step);
            return false;
        }
    } else if (op < 88) { /* remove of a list (any kind goes through remove) */
        if (OPS(r)->remove(r, m->li, ns, nslen) != OPS(h)->remove(h, m->li, ns, nslen)) return false;
    } else if (op < 90) { /* count */
        int64_t a = OPS(r)->count(r, sid), b = OPS(h)->count(h, sid);
        if (a != b) {
            fprintf(stderr, "  step %d: count %lld vs %lld\n", step, (long long)a, (long long)b);
            return false;
        }
    } else if (op < 91) { /* foreach_entry */
        if (!same_entries(m, sid)) {
            fprintf(stderr, "  step %d: foreach_entry differs\n", step);
            return false;
        }
    } else { /* reads of state b only: the held pointer of a must survive them */
        for (int i = 0; i < 4; i++) {
            set_key(m, rndn(NKEYS));
            const uint8_t *rv = OPS(r)->get(r, m->vb, ns, nslen, &rl), *hv = OPS(h)->get(h, m->vb, ns, nslen, &hl);
            if (!same(rv, rl, hv, hl)) return false;
            if (rv && rndn(2) && OPS(r)->put(r, m->vb, ns, nslen, rv, rl) != 0) return false;
        }
    }
    if (m->held && memcmp(m->held, m->held_copy, m->held_len) != 0) {
        fprintf(stderr, "  step %d: a get pointer of state a changed under the caller\n", step);
        return false;
    }
    return true;
}

/* Canonical snapshot of both, compared; sometimes restored into fresh
 * backends that the run goes on with. */
static bool model_snapshot(model_t *m) {
    sl_kb_snapshot_t *sr = NULL, *sh = NULL;
    if (OPS(m->r)->snapshot(m->r, &sr) || OPS(m->h)->snapshot(m->h, &sh)) return false;
    bool ok = views_equal(sr, sh, FULL);
    if (ok && rndn(2)) {
        sl_keyed_backend_t *r2 = rdb_new(MAXP, FULL, m->cache), *h2 = sl_heap_backend_new(MAXP, FULL);
        /* the RocksDB backend gets the heap's blocks and the heap RocksDB's */
        ok = r2 && restore_all(r2, sh, FULL) == 0 && restore_all(h2, sr, FULL) == 0;
        if (ok) {
            model_swap(m, r2, h2);
            model_register(m);
            m->restores++;
        } else {
            if (r2) OPS(r2)->destroy(r2);
            OPS(h2)->destroy(h2);
        }
    }
    sl_kb_snapshot_release(sr);
    sl_kb_snapshot_release(sh);
    return ok;
}

/* A native checkpoint taken now (dirty values in the cache), restored whole
 * (the run goes on with it) and in two halves (another parallelism). */
static bool model_native(model_t *m) {
    sl_rvc_stats_t st = {0};
    sl_rocksdb_value_cache_stats(m->r, &st);
    m->native_dirty += st.dirty;
    m->natives++;
    char ck[512], err[512] = "";
    tmp_path(ck, sizeof ck, "chk");
    sl_rocksdb_files_t f;
    if (sl_rocksdb_native_snapshot(m->r, ck, &f, err, sizeof err) != 0) {
        fprintf(stderr, "  native snapshot: %s\n", err);
        return false;
    }
    sl_rocksdb_files_free(&f);
    bool ok = true;
    sl_kg_range_t halves[2] = {{0, MAXP / 2}, {MAXP / 2, MAXP}};
    for (int i = 0; i < 2 && ok; i++) {
        sl_keyed_backend_t *part = rdb_open(MAXP, halves[i], ck, FULL, m->cache);
        sl_kb_snapshot_t *sp = NULL, *sh = NULL;
        ok = part && OPS(part)->snapshot(part, &sp) == 0 && OPS(m->h)->snapshot(m->h, &sh) == 0 &&
             views_equal(sp, sh, halves[i]);
        if (sp) sl_kb_snapshot_release(sp);
        if (sh) sl_kb_snapshot_release(sh);
        if (part) OPS(part)->destroy(part);
    }
    if (ok) {
        sl_keyed_backend_t *whole = rdb_open(MAXP, FULL, ck, FULL, m->cache);
        ok = whole != NULL;
        if (ok) {
            /* the heap goes on as it is: a restore of its own snapshot */
            sl_keyed_backend_t *h2 = sl_heap_backend_new(MAXP, FULL);
            sl_kb_snapshot_t *sh = NULL;
            ok = OPS(m->h)->snapshot(m->h, &sh) == 0 && restore_all(h2, sh, FULL) == 0;
            if (sh) sl_kb_snapshot_release(sh);
            model_swap(m, whole, h2);
            model_register(m);
            ok = ok && backends_equal(m->r, m->h, FULL);
        }
    }
    rm_rf(ck);
    return ok;
}

/* Takes views of both backends now, to be compared `after` steps later. */
static bool model_hold(model_t *m, int step, int after) {
    if (m->nheld == MAXHELD) return true;
    held_view_t *v = &m->held_views[m->nheld];
    if (OPS(m->r)->snapshot(m->r, &v->r) != 0) return false;
    if (OPS(m->h)->snapshot(m->h, &v->h) != 0) {
        sl_kb_snapshot_release(v->r);
        return false;
    }
    v->taken = step;
    v->until = step + after;
    m->nheld++;
    sl_rvc_stats_t st;
    if (sl_rocksdb_value_cache_stats(m->r, &st) == 0 && st.generations > m->max_gens) m->max_gens = st.generations;
    return true;
}

/* Compares and releases the held views that are due (all when force);
 * sometimes the run goes on from a restore of one. */
static bool model_due(model_t *m, int step, bool force) {
    bool ok = true;
    for (int i = 0; i < m->nheld;) {
        held_view_t v = m->held_views[i];
        if (!force && v.until > step) {
            i++;
            continue;
        }
        m->held_views[i] = m->held_views[--m->nheld];
        if (ok) {
            ok = views_equal(v.r, v.h, FULL);
            if (!ok) fprintf(stderr, "  step %d: a view taken at step %d differs from the heap's\n", step, v.taken);
            m->held_compared++;
        }
        if (ok && !force && rndn(4) == 0) { /* go on from it: RocksDB from the heap's view, the heap from RocksDB's */
            sl_keyed_backend_t *r2 = rdb_new(MAXP, FULL, m->cache), *h2 = sl_heap_backend_new(MAXP, FULL);
            ok = r2 && restore_all(r2, v.h, FULL) == 0 && restore_all(h2, v.r, FULL) == 0;
            if (ok) {
                model_swap(m, r2, h2);
                model_register(m);
                m->restores++;
            } else {
                if (r2) OPS(r2)->destroy(r2);
                OPS(h2)->destroy(h2);
            }
        }
        sl_kb_snapshot_release(v.r);
        sl_kb_snapshot_release(v.h);
    }
    return ok;
}

static bool model_run(uint64_t seed, int steps, int64_t cache, model_t *m) {
    rng = seed * 0x9E3779B97F4A7C15ULL + 1;
    memset(m, 0, sizeof *m);
    writeback = (int)(seed % 4) - 1; /* none (evictions and flushes only), the default, 1 or 2 per call */
    m->cache = cache;
    m->r = rdb_new(MAXP, FULL, cache);
    m->h = sl_heap_backend_new(MAXP, FULL);
    if (!m->r) return false;
    model_register(m);
    bool ok = true;
    for (int i = 0; i < steps && ok; i++) {
        ok = model_step(m, i);
        /* views held for a while: sometimes a few steps apart (captures
         * overlapping while older ones are still being written back) */
        if (ok && rndn(50) == 0) ok = model_hold(m, i, rndn(5) == 0 ? (int)rndn(4) : (int)rndn(400));
        if (ok) ok = model_due(m, i, false);
        if (ok && i % 300 == 299) ok = model_snapshot(m);
        if (ok && i % 700 == 450) ok = model_native(m);
    }
    ok = ok && backends_equal(m->r, m->h, FULL);
    if (ok && m->nheld && rndn(2)) { /* views outlive their backends */
        sl_keyed_backend_t *r2 = rdb_new(MAXP, FULL, m->cache), *h2 = sl_heap_backend_new(MAXP, FULL);
        if (r2) model_swap(m, r2, h2);
    }
    if (!model_due(m, steps, true)) ok = false;
    if (!ok) fprintf(stderr, "  seed %llu: the RocksDB backend and the heap disagree\n", (unsigned long long)seed);
    model_collect(m);
    OPS(m->r)->destroy(m->r);
    OPS(m->h)->destroy(m->h);
    return ok;
}

TEST(random_against_heap_tiny_cache) {
    enum { SEEDS = 8 };
    int steps = 4000 / SCALE_DIV;
    uint64_t ev = 0, evd = 0, hits = 0, nd = 0, nat = 0, res = 0, unc = 0, cap = 0, cow = 0, wb = 0, evc = 0,
             cmp = 0, gens = 0;
    for (uint64_t s = 1; s <= SEEDS; s++) {
        model_t m;
        CHECK(model_run(s, steps, 6 << 10, &m));
        ev += m.evictions, evd += m.evicted_dirty, hits += m.hits, nd += m.native_dirty, nat += m.natives;
        res += m.restores, unc += m.uncached_puts;
        cap += m.captured, cow += m.cow_copies, wb += m.written_back, evc += m.evicted_captured;
        cmp += m.held_compared, gens = SL_MAX(gens, m.max_gens);
    }
    fprintf(stderr,
            "  captures: %llu held views compared, %llu values captured, %llu copied on write, %llu written back, "
            "%llu evicted while captured, up to %llu generations at once\n",
            (unsigned long long)cmp, (unsigned long long)cap, (unsigned long long)cow, (unsigned long long)wb,
            (unsigned long long)evc, (unsigned long long)gens);
    CHECK(cmp > 80 / SCALE_DIV && cap > 400 / SCALE_DIV && cow > 40 / SCALE_DIV && wb > 400 / SCALE_DIV &&
          evc > 40 / SCALE_DIV && gens >= 2);
    fprintf(stderr,
            "  %d seeds x %d steps, 6 KiB cache: %llu evictions (%llu dirty), %llu hits, %llu canonical restores, "
            "%llu native checkpoints holding %llu dirty values, %llu puts too large to cache\n",
            SEEDS, steps, (unsigned long long)ev, (unsigned long long)evd, (unsigned long long)hits,
            (unsigned long long)res, (unsigned long long)nat, (unsigned long long)nd, (unsigned long long)unc);
    /* the run exercised what it is meant to */
    CHECK(evd > 100 && hits > 1000 && res > 0 && nat > 0 && nd > 0 && unc > 0);
}

TEST(random_against_heap_large_and_no_cache) {
    model_t m;
    int steps = 4000 / SCALE_DIV;
    CHECK(model_run(101, steps, 4 << 20, &m)); /* everything fits: no eviction, writes only at flushes */
    CHECK_EQ(m.evictions, 0);
    fprintf(stderr, "  4 MiB cache: %llu held views compared, %llu copied on write, up to %llu generations at once\n",
            (unsigned long long)m.held_compared, (unsigned long long)m.cow_copies, (unsigned long long)m.max_gens);
    CHECK(m.held_compared > 20 / SCALE_DIV && m.cow_copies > 20 / SCALE_DIV && m.max_gens >= 2);
    CHECK(model_run(102, steps, -1, &m)); /* the cache off: the plain RocksDB paths */
    CHECK_EQ(m.hits, 0);
    writeback = 0;
}

/* ------------------------------------------------------------------ */
/* a view written on another thread while the task goes on             */

typedef struct wjob {
    const sl_kb_snapshot_t *s;
    sl_buf_t out;
    int rc;
} wjob_t;

static void *write_view(void *p) {
    wjob_t *j = p;
    for (int kg = FULL.start; kg < FULL.end && !j->rc; kg++) j->rc = sl_kb_snapshot_write(j->s, kg, &j->out);
    return NULL;
}

/* One round: views of both now; RocksDB's written on a thread while the
 * model steps on (no snapshots: those would swap the backends); then the
 * bytes are compared with the heap view's. */
static bool concurrent_round(model_t *m, int *step, int nsteps) {
    sl_kb_snapshot_t *sr = NULL, *sh = NULL;
    if (OPS(m->r)->snapshot(m->r, &sr) || OPS(m->h)->snapshot(m->h, &sh)) return false;
    wjob_t j = {.s = sr};
    pthread_t t;
    if (pthread_create(&t, NULL, write_view, &j) != 0) abort();
    bool ok = true;
    for (int i = 0; i < nsteps && ok; i++) ok = model_step(m, (*step)++);
    pthread_join(t, NULL);
    wjob_t hj = {.s = sh};
    write_view(&hj);
    if (ok) ok = j.rc == 0 && hj.rc == 0 && j.out.len == hj.out.len && memcmp(j.out.p, hj.out.p, j.out.len) == 0;
    if (!ok) fprintf(stderr, "  step %d: a view written on another thread differs from the heap's\n", *step);
    sl_buf_free(&j.out);
    sl_buf_free(&hj.out);
    sl_kb_snapshot_release(sr);
    sl_kb_snapshot_release(sh);
    return ok;
}

TEST(capture_written_while_task_runs) {
    int rounds = 60 / SCALE_DIV + 4;
    uint64_t cow = 0, wb = 0, evc = 0;
    for (uint64_t seed = 201; seed <= 204; seed++) {
        model_t m;
        rng = seed * 0x9E3779B97F4A7C15ULL + 1;
        memset(&m, 0, sizeof m);
        m.cache = seed % 2 ? 6 << 10 : 1 << 20; /* evicting all the time; everything fits */
        writeback = seed == 201 ? -1 : seed == 202 ? 1 : 0;
        m.r = rdb_new(MAXP, FULL, m.cache);
        m.h = sl_heap_backend_new(MAXP, FULL);
        CHECK(m.r);
        model_register(&m);
        int step = 0;
        bool ok = true;
        for (int i = 0; i < 200 && ok; i++) ok = model_step(&m, step++);
        for (int r = 0; r < rounds && ok; r++) ok = concurrent_round(&m, &step, 20 + (int)rndn(200));
        CHECK(ok);
        /* every view released: once written back (count flushes) the
         * generations retire and their copies are freed */
        CHECK(OPS(m.r)->count(m.r, m.va) >= 0);
        for (int i = 0; i < 200; i++) OPS(m.r)->get(m.r, m.va, NULL, 0, NULL); /* (the backend steps every 32 calls) */
        sl_rvc_stats_t st;
        CHECK_EQ(sl_rocksdb_value_cache_stats(m.r, &st), 0);
        CHECK_EQ(st.generations, 0);
        CHECK_EQ(st.captured_bytes, 0);
        CHECK_EQ(st.dirty, 0);
        model_collect(&m);
        cow += m.cow_copies, wb += m.written_back, evc += m.evicted_captured;
        OPS(m.r)->destroy(m.r);
        OPS(m.h)->destroy(m.h);
    }
    fprintf(stderr, "  %llu copied on write, %llu written back, %llu evicted while captured\n",
            (unsigned long long)cow, (unsigned long long)wb, (unsigned long long)evc);
    CHECK(cow > 20 && wb > 100 && evc > 10);
    writeback = 0;
}

/* ------------------------------------------------------------------ */
/* get pointers survive evictions caused by other states               */

TEST(pointers_survive_evictions) {
    sl_keyed_backend_t *b = rdb_new(MAXP, FULL, 4 << 10);
    CHECK(b);
    int a = reg(b, "a", SL_STATE_VALUE, 0), o = reg(b, "other", SL_STATE_VALUE, 0);
    uint8_t v[32];
    memset(v, 0xAB, sizeof v);
    sl_kb_set_key(b, "held", 4);
    CHECK_EQ(OPS(b)->put(b, a, NULL, 0, v, sizeof v), 0);
    uint32_t len = 0;
    const uint8_t *p = OPS(b)->get(b, a, NULL, 0, &len);
    bool created;
    const uint8_t *q = OPS(b)->get_mut(b, a, "ns", 2, 24, &created); /* created: pending until the next call */
    CHECK(p && len == sizeof v && q && created);
    for (int i = 0; i < 2000; i++) { /* far more than 4 KiB of other entries */
        char k[16];
        int n = snprintf(k, sizeof k, "o%d", i);
        sl_kb_set_key(b, k, (uint32_t)n);
        uint8_t w[40];
        memset(w, i, sizeof w);
        CHECK_EQ(OPS(b)->put(b, o, NULL, 0, w, sizeof w), 0);
        if (i % 3 == 0) CHECK(OPS(b)->get(b, o, NULL, 0, &len) != NULL);
    }
    sl_rvc_stats_t st;
    CHECK_EQ(sl_rocksdb_value_cache_stats(b, &st), 0);
    CHECK(st.evictions > 1000 && st.evicted_dirty > 1000);
    for (size_t i = 0; i < sizeof v; i++) CHECK_EQ(p[i], 0xAB);
    /* the created value was stored (zero-filled) although evicted since */
    sl_kb_set_key(b, "held", 4);
    const uint8_t *z = OPS(b)->get(b, a, "ns", 2, &len);
    CHECK(z && len == 24);
    for (int i = 0; i < 24; i++) CHECK_EQ(z[i], 0);
    CHECK_EQ(OPS(b)->count(b, o), 2000);
    OPS(b)->destroy(b);
}

/* ------------------------------------------------------------------ */
/* TTL                                                                 */

static int64_t now_ms;
static int64_t manual_clock(void *ctx) {
    (void)ctx;
    return __atomic_load_n(&now_ms, __ATOMIC_RELAXED);
}

static void fold_add(void *ctx, void *acc, const void *value) {
    (void)ctx;
    int64_t a, x;
    memcpy(&a, acc, 8);
    memcpy(&x, value, 8);
    a += x;
    memcpy(acc, &a, 8);
}

TEST(ttl_through_the_cache) {
    enum { NK = 40 };
    for (int variant = 0; variant < 2; variant++) { /* on create and write / on read and write */
        sl_ttl_update_t upd = variant ? SL_TTL_ON_READ_AND_WRITE : SL_TTL_ON_CREATE_AND_WRITE;
        sl_keyed_backend_t *r = rdb_new(MAXP, FULL, variant ? 3 << 10 : 1 << 20), *h = sl_heap_backend_new(MAXP, FULL);
        CHECK(r);
        __atomic_store_n(&now_ms, 1000, __ATOMIC_RELAXED);
        sl_kb_set_clock(r, manual_clock, NULL);
        sl_kb_set_clock(h, manual_clock, NULL);
        sl_state_desc_t d = {.name = "t", .kind = SL_STATE_VALUE, .ttl_ms = 100, .ttl_update = upd};
        sl_state_desc_t df = {.name = "f", .kind = SL_STATE_VALUE, .ttl_ms = 100, .ttl_update = upd};
        int tr = OPS(r)->register_state(r, &d), th = OPS(h)->register_state(h, &d);
        int fr = OPS(r)->register_state(r, &df), fh = OPS(h)->register_state(h, &df);
        CHECK(tr >= 0 && tr == th && fr >= 0 && fr == fh);
        sl_ttl_state_t *ttr = sl_ttl_state_new("t", 100, upd, false, 0, false),
                       *tth = sl_ttl_state_new("t", 100, upd, false, 0, false),
                       *tfr = sl_ttl_state_new("f", 100, upd, false, 0, false),
                       *tfh = sl_ttl_state_new("f", 100, upd, false, 0, false);
        rng = 77 + (uint64_t)variant;
        int expired_seen = 0, live_seen = 0;
        for (int i = 0; i < 6000 / SCALE_DIV; i++) {
            char k[16];
            int n = snprintf(k, sizeof k, "t%u", rndn(NK));
            sl_kb_set_key(r, k, (uint32_t)n);
            sl_kb_set_key(h, k, (uint32_t)n);
            uint32_t op = rndn(100);
            if (op < 40) {
                const void *a = NULL, *b = NULL;
                uint32_t al = 0, bl = 0;
                CHECK_EQ(sl_ttl_value_get(r, tr, ttr, NULL, 0, &a, &al), 0);
                CHECK_EQ(sl_ttl_value_get(h, th, tth, NULL, 0, &b, &bl), 0);
                CHECK(same(a, al, b, bl));
                live_seen += a != NULL;
            } else if (op < 65) {
                uint64_t x = rnd();
                CHECK_EQ(sl_ttl_value_put(r, tr, ttr, NULL, 0, &x, 8), 0);
                CHECK_EQ(sl_ttl_value_put(h, th, tth, NULL, 0, &x, 8), 0);
            } else if (op < 80) {
                int64_t x = (int64_t)rndn(1000);
                CHECK_EQ(sl_ttl_fold(r, fr, tfr, NULL, 0, 8, false, NULL, fold_add, NULL, &x), 0);
                CHECK_EQ(sl_ttl_fold(h, fh, tfh, NULL, 0, 8, false, NULL, fold_add, NULL, &x), 0);
                const void *a = NULL, *b = NULL;
                uint32_t al = 0, bl = 0;
                CHECK_EQ(sl_ttl_value_get(r, fr, tfr, NULL, 0, &a, &al), 0);
                CHECK_EQ(sl_ttl_value_get(h, fh, tfh, NULL, 0, &b, &bl), 0);
                CHECK(a && same(a, al, b, bl));
            } else if (op < 85) {
                /* An expired value may be gone from RocksDB (compaction) and
                 * not from the heap: only a live one must be found by both. */
                uint32_t hl = 0;
                const uint8_t *hv = OPS(h)->get(h, th, NULL, 0, &hl);
                bool live = hv && !sl_ttl_item_expired(hv, hl, 100, manual_clock(NULL));
                int a = sl_ttl_remove(r, tr, ttr, NULL, 0), b = sl_ttl_remove(h, th, tth, NULL, 0);
                CHECK(a >= 0 && b >= 0);
                if (live) CHECK(a == 1 && b == 1);
            } else if (op < 95) {
                /* the raw bytes: an expired value may still be stored, but the
                 * accessor never returns it */
                uint32_t rl = 0;
                const uint8_t *raw = OPS(r)->get(r, tr, NULL, 0, &rl);
                const void *a = NULL;
                uint32_t al = 0;
                CHECK_EQ(sl_ttl_value_get(r, tr, ttr, NULL, 0, &a, &al), 0);
                if (raw && sl_ttl_item_expired(raw, rl, 100, manual_clock(NULL))) {
                    expired_seen++;
                    CHECK(a == NULL);
                }
                const void *b = NULL;
                uint32_t bl = 0;
                CHECK_EQ(sl_ttl_value_get(h, th, tth, NULL, 0, &b, &bl), 0);
                CHECK(same(a, al, b, bl));
            } else if (op < 98) {
                CHECK(backends_equal(r, h, FULL)); /* expired values are left out of both */
            } else {
                char err[256] = "";
                CHECK_EQ(sl_rocksdb_compact(r, err, sizeof err), 0);
            }
            if (rndn(4) == 0) __atomic_add_fetch(&now_ms, (int64_t)rndn(30), __ATOMIC_RELAXED);
        }
        fprintf(stderr, "  %s: %d live reads, %d reads of a stored but expired value (never returned)\n",
                variant ? "on read and write" : "on create and write", live_seen, expired_seen);
        CHECK(expired_seen > 0 && live_seen > 0);
        CHECK(backends_equal(r, h, FULL));
        sl_ttl_state_free(ttr);
        sl_ttl_state_free(tth);
        sl_ttl_state_free(tfr);
        sl_ttl_state_free(tfh);
        OPS(r)->destroy(r);
        OPS(h)->destroy(h);
    }
}

/* ------------------------------------------------------------------ */
/* a native checkpoint holds the values that were only in the cache    */

TEST(native_checkpoint_holds_dirty_values) {
    enum { N = 3000 };
    sl_keyed_backend_t *b = rdb_new(MAXP, FULL, 8 << 20);
    CHECK(b);
    int s = reg(b, "v", SL_STATE_VALUE, 0), g = reg(b, "gone", SL_STATE_VALUE, 0);
    for (int i = 0; i < N; i++) { /* every value first written to RocksDB... */
        char k[16];
        int n = snprintf(k, sizeof k, "n%d", i);
        sl_kb_set_key(b, k, (uint32_t)n);
        uint64_t x = (uint64_t)i;
        CHECK_EQ(OPS(b)->put(b, s, NULL, 0, &x, 8), 0);
        CHECK_EQ(OPS(b)->put(b, g, NULL, 0, &x, 8), 0);
    }
    CHECK_EQ(OPS(b)->count(b, s), N); /* a flush */
    for (int i = 0; i < N; i++) { /* ... then changed or removed in the cache only */
        char k[16];
        int n = snprintf(k, sizeof k, "n%d", i);
        sl_kb_set_key(b, k, (uint32_t)n);
        bool created = true;
        uint64_t *p = OPS(b)->get_mut(b, s, NULL, 0, 8, &created);
        CHECK(p && !created && *p == (uint64_t)i);
        *p = (uint64_t)i * 7 + 1;
        CHECK_EQ(OPS(b)->put(b, s, NULL, 0, p, 8), 0);
        if (i % 2) CHECK_EQ(OPS(b)->remove(b, g, NULL, 0), 1);
        uint64_t x = (uint64_t)i + 5;
        CHECK_EQ(OPS(b)->put(b, s, "new", 3, &x, 8), 0); /* never in RocksDB before */
    }
    sl_rvc_stats_t st;
    CHECK_EQ(sl_rocksdb_value_cache_stats(b, &st), 0);
    CHECK_EQ(st.dirty, 2 * N + N / 2);
    CHECK_EQ(st.evictions, 0);
    char ck[512], err[512] = "";
    tmp_path(ck, sizeof ck, "chk");
    sl_rocksdb_files_t f;
    CHECK_EQ(sl_rocksdb_native_snapshot(b, ck, &f, err, sizeof err), 0);
    sl_rocksdb_files_free(&f);
    CHECK_EQ(sl_rocksdb_value_cache_stats(b, &st), 0);
    CHECK_EQ(st.dirty, 0);
    OPS(b)->destroy(b); /* the checkpoint directory is all that is left */
    for (int c = 0; c < 2; c++) { /* restored with the cache and without */
        sl_keyed_backend_t *r = rdb_open(MAXP, FULL, ck, FULL, c ? -1 : 1 << 20);
        CHECK(r);
        int rs = reg(r, "v", SL_STATE_VALUE, 0), rg = reg(r, "gone", SL_STATE_VALUE, 0);
        CHECK(rs == s && rg == g);
        for (int i = 0; i < N; i++) {
            char k[16];
            int n = snprintf(k, sizeof k, "n%d", i);
            sl_kb_set_key(r, k, (uint32_t)n);
            uint32_t len = 0;
            const uint8_t *v = OPS(r)->get(r, rs, NULL, 0, &len);
            CHECK(v && len == 8 && sl_ld64(v) == (uint64_t)i * 7 + 1);
            v = OPS(r)->get(r, rs, "new", 3, &len);
            CHECK(v && len == 8 && sl_ld64(v) == (uint64_t)i + 5);
            v = OPS(r)->get(r, rg, NULL, 0, &len);
            CHECK((v == NULL) == (i % 2 == 1));
        }
        CHECK_EQ(OPS(r)->count(r, rg), N / 2);
        OPS(r)->destroy(r);
    }
    rm_rf(ck);
}

/* ------------------------------------------------------------------ */
/* a restore writes behind the cache: no stale "absent" afterwards      */

TEST(restore_after_negative_reads) {
    sl_keyed_backend_t *src = rdb_new(MAXP, FULL, 1 << 20), *dst = rdb_new(MAXP, FULL, 1 << 20);
    CHECK(src && dst);
    int s = reg(src, "v", SL_STATE_VALUE, 0), d = reg(dst, "v", SL_STATE_VALUE, 0);
    CHECK(s == d);
    uint64_t x = 42;
    sl_kb_set_key(src, "k", 1);
    CHECK_EQ(OPS(src)->put(src, s, NULL, 0, &x, 8), 0);
    uint32_t len;
    sl_kb_set_key(dst, "k", 1);
    CHECK(OPS(dst)->get(dst, d, NULL, 0, &len) == NULL); /* cached as absent */
    sl_kb_snapshot_t *sn = NULL;
    CHECK_EQ(OPS(src)->snapshot(src, &sn), 0);
    CHECK_EQ(restore_all(dst, sn, FULL), 0);
    sl_kb_snapshot_release(sn);
    const uint8_t *v = OPS(dst)->get(dst, d, NULL, 0, &len);
    CHECK(v && len == 8 && sl_ld64(v) == 42);
    OPS(src)->destroy(src);
    OPS(dst)->destroy(dst);
}

/* ------------------------------------------------------------------ */
/* measurement                                                         */

static int64_t cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ops/s of task-thread CPU; *sync_ms: CPU of snapshot() after the run. */
static double hot_run(int64_t cache, int nkeys, int nops, double *sync_ms) {
    char dir[512], err[512] = "";
    tmp_path(dir, sizeof dir, "db");
    sl_rocksdb_opts_t o = {.dir = dir, .write_buffer_bytes = 64 << 20, .value_cache_bytes = cache};
    sl_keyed_backend_t *b = sl_rocksdb_backend_new(128, (sl_kg_range_t){0, 128}, &o, err, sizeof err);
    if (!b) return 0;
    int s = reg(b, "acc", SL_STATE_VALUE, 0);
    uint64_t x = 12345;
    int64_t t0 = cpu_ns();
    for (int i = 0; i < nops; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        uint64_t k = (x >> 33) % (uint64_t)nkeys;
        sl_kb_set_key(b, &k, 8);
        bool created;
        int64_t *acc = OPS(b)->get_mut(b, s, "window16bytes...", 16, 32, &created);
        if (!acc) abort();
        acc[0]++;
        acc[1] += (int64_t)k;
        OPS(b)->put(b, s, "window16bytes...", 16, acc, 32);
    }
    double secs = (double)(cpu_ns() - t0) / 1e9;
    sl_kb_snapshot_t *sn = NULL;
    int64_t t1 = cpu_ns();
    if (OPS(b)->snapshot(b, &sn) == 0) sl_kb_snapshot_release(sn);
    *sync_ms = (double)(cpu_ns() - t1) / 1e6;
    OPS(b)->destroy(b);
    return nops / secs;
}

TEST(measure) {
    int nops = 300000 / SCALE_DIV, nkeys = 20000;
    double s_on, s_off, s_small;
    double on = hot_run(64 << 20, nkeys, nops, &s_on), off = hot_run(-1, nkeys, nops, &s_off),
           small = hot_run(1 << 20, nkeys, nops, &s_small);
    fprintf(stderr,
            "  get_mut + put, %d ops over %d keys, per second of task-thread CPU: cache 64 MiB %.0f, 1 MiB %.0f, "
            "off %.0f (x%.1f, x%.1f)\n"
            "  snapshot() synchronous phase after it (CPU): %.1f ms with %d dirty values (cache 64 MiB), %.1f ms "
            "(1 MiB), %.1f ms (off)\n",
            nops, nkeys, on, small, off, on / off, small / off, s_on, nkeys, s_small, s_off);
    CHECK(on > 0 && off > 0 && small > 0);
}

int main(void) {
    RUN(random_against_heap_tiny_cache);
    RUN(random_against_heap_large_and_no_cache);
    RUN(capture_written_while_task_runs);
    RUN(pointers_survive_evictions);
    RUN(ttl_through_the_cache);
    RUN(native_checkpoint_holds_dirty_values);
    RUN(restore_after_negative_reads);
    RUN(measure);
    rm_rf(sl_test_tmpdir());
    TEST_MAIN_END();
}
