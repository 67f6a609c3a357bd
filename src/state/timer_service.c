/*
 * timer_service.c — keyed timers per key group (see timer_service.h).
 *
 * Layout, per time domain (event time and processing time are two
 * independent copies of everything below):
 *
 *   kgs[kg - range.start]   per key group:
 *       heap   4-ary min-heap of {ts, timer*} by timestamp; each timer
 *              records its heap position (hpos), so a timer can be taken
 *              out of the middle in O(log n).
 *       set    open-addressing hash set (linear probing, power-of-two
 *              capacity, load <= 1/2 so that a probe for a new timer
 *              mostly ends in its home cache line, backward-shift
 *              deletion) of
 *              {hash, timer*} over (ts, key, ns): it makes registration
 *              idempotent and finds a timer to delete.  Heap and set always
 *              hold exactly the same timers (no lazy deletion; the one
 *              popped timer whose slot is cleared late, see "Deferred set
 *              removal", is never looked at by a set access), so counts
 *              are exact and pop never sees a deleted timer.
 *   kheap  binary min-heap over the non-empty key groups keyed by their
 *          head timestamp (each key group knows its position, kpos).
 *
 * A timer is one allocation: {ts, hash, khash, hpos, klen, nslen, key,
 * ns}.  Its hash combines three parts cheaply: the key's hash (khash:
 * sl_kg_key_hash, which callers usually have already — the backend keeps
 * the current key's — and pass to the *_hashed calls), a hash of the
 * namespace (two multiplications for a window's 16 bytes) and the
 * timestamp, under one final mix; a lookup compares hashes before bytes.
 * sl_timers_replace moves a timer to another (namespace, timestamp) of the
 * same key in place (no free and malloc, one heap sift instead of a removal
 * and an insertion): what a session window does when it grows.
 *
 * Deferred set removal.  pop takes the timer out of the heap at once but
 * leaves its set slot to be cleared by the next call that reads or changes
 * a set (register, delete, replace, pop, snapshot, restore), after a
 * prefetch of that slot: between two pops the caller handles the timer
 * (state lookups), which hides the slot's cache miss.  At most one timer is
 * pending (s->pend); it is always s->popped, in private (unshared) storage.
 *
 * Costs (n timers in a key group, g non-empty key groups): register,
 * delete and replace O(log n + log g) plus the hash above (and the key's,
 * unless given); peek O(1);
 * pop O(log n + log g); foreach_kg O(n).  Keeping timers per key group is
 * what lets snapshots write, and rescaling move, one key group at a time.
 *
 * Timestamps are full int64 values: a timer at INT64_MAX is kept and popped
 * (by pop(t = INT64_MAX)), though peek cannot tell it from "none".
 *
 * The timer returned by pop stays allocated until the next pop (or
 * destroy), which is at least as long as the header promises.
 *
 * Snapshots (copy-on-write per (domain, key group)).  sl_timers_snapshot
 * hands each non-empty key group's storage (heap array, set array and the
 * timers) to a shell {atomic refs, heap, n, set} held by the key group
 * (g->shell) and by the snapshot: refs = 2, or + 1 when an earlier
 * snapshot still shares it.  Writes (register of a new timer, delete of a
 * present one, pop) first unshare: refs == 1 (every snapshot released) →
 * take the storage back, free the shell; otherwise copy the key group
 * (new timers, heap and set; O(its timers)) and drop the shell's reference
 * at the end of the call.  The last holder frees the storage.  While
 * shared, nothing in the storage is written — not even hpos, since the
 * heap functions run only on private storage — so the snapshot writer on
 * another thread reads it without locks; refs == 1 is read with acquire
 * order, pairing with the release order of the writer's decrement.
 */
#include "state/timer_service.h"

#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/common.h"
#include "state/state_backend.h"

typedef struct ts_timer {
    int64_t ts;
    uint64_t hash;  /* ts_hash(khash, namespace hash, ts) */
    uint64_t khash; /* sl_kg_key_hash of the key */
    size_t hpos; /* position in its key group's heap */
    uint32_t klen, nslen;
    uint8_t data[]; /* key, ns */
} ts_timer_t;

typedef struct ts_hnode {
    int64_t ts;
    ts_timer_t *t;
} ts_hnode_t;

typedef struct ts_sslot {
    uint64_t hash;
    ts_timer_t *t; /* NULL: empty */
} ts_sslot_t;

/* Storage of one key group shared with snapshots (see the header comment). */
typedef struct ts_shell {
    atomic_int refs;
    ts_hnode_t *heap; /* heap[0..n) hold the timers */
    size_t n;
    ts_sslot_t *set;
} ts_shell_t;

typedef struct ts_kg {
    ts_hnode_t *heap;
    size_t n, hcap;
    ts_sslot_t *set;  /* NULL until the first timer */
    size_t smask;     /* set capacity - 1 */
    unsigned sshift;  /* 64 - log2(set capacity) */
    int kpos;         /* position in kheap, -1 while empty */
    ts_shell_t *shell; /* non-NULL while the storage is shared with a snapshot */
} ts_kg_t;

typedef struct ts_knode {
    int64_t ts; /* head timestamp of the key group */
    int kgi;    /* kg - range.start */
} ts_knode_t;

typedef struct ts_domain {
    ts_kg_t *kgs;      /* [nkg] */
    ts_knode_t *kheap; /* [nkg] capacity; kn used */
    int kn;
    int64_t count;
} ts_domain_t;

struct sl_timer_service {
    int max_parallelism;
    sl_kg_range_t range;
    int nkg;
    ts_domain_t dom[2];
    ts_timer_t *popped; /* the last popped timer (its key/ns are still referenced) */
    ts_kg_t *pend;      /* non-NULL: popped is still in this key group's set */
    sl_timers_cow_stats_t stats;
};

#define TS_GOLDEN 0x9E3779B97F4A7C15ULL
#define TS_MINCAP 8

/* ------------------------------------------------------------------ */
/* timers                                                              */

/* Hash of a namespace: 0 for none, two multiplications for a window's 16
 * bytes (or any 8), xxh3 otherwise. */
static inline uint64_t ts_ns_hash(const void *ns, uint32_t nslen) {
    if (nslen == 0) return 0;
    if (nslen == 16) return (sl_ld64(ns) * TS_GOLDEN) ^ (sl_ld64((const uint8_t *)ns + 8) * 0xC2B2AE3D27D4EB4FULL);
    if (nslen == 8) return sl_ld64(ns) * 0xC2B2AE3D27D4EB4FULL;
    return sl_hash_bytes(ns, nslen);
}

/* The set's hash of (key, namespace, timestamp): khash is already a good
 * hash of the key, so one mix of the three combined spreads them. */
static inline uint64_t ts_hash(uint64_t khash, uint64_t nsh, int64_t ts) {
    return sl_mix64(khash ^ nsh ^ ((uint64_t)ts * TS_GOLDEN));
}

static inline bool ts_timer_is(const ts_timer_t *t, int64_t ts, const void *key, uint32_t klen, const void *ns,
                               uint32_t nslen) {
    return t->ts == ts && t->klen == klen && t->nslen == nslen && (klen == 0 || memcmp(t->data, key, klen) == 0) &&
           (nslen == 0 || memcmp(t->data + klen, ns, nslen) == 0);
}

static void ts_fill(sl_timer_t *out, const ts_timer_t *t, int kg) {
    out->ts = t->ts;
    out->kg = kg;
    out->key = t->data;
    out->keylen = t->klen;
    out->ns = t->data + t->klen;
    out->nslen = t->nslen;
    out->keyhash = t->khash;
}

/* ------------------------------------------------------------------ */
/* the dedup set of one key group                                      */

static inline size_t ts_home(const ts_kg_t *g, uint64_t h) { return (size_t)((h * TS_GOLDEN) >> g->sshift); }

static ts_sslot_t *ts_set_find(const ts_kg_t *g, uint64_t h, int64_t ts, const void *key, uint32_t klen,
                               const void *ns, uint32_t nslen) {
    if (!g->set) return NULL;
    for (size_t i = ts_home(g, h);; i = (i + 1) & g->smask) {
        ts_sslot_t *s = &g->set[i];
        if (!s->t) return NULL;
        if (s->hash == h && ts_timer_is(s->t, ts, key, klen, ns, nslen)) return s;
    }
}

static void ts_set_resize(ts_kg_t *g, size_t cap) {
    ts_sslot_t *old = g->set;
    size_t oldcap = old ? g->smask + 1 : 0;
    unsigned bits = 0;
    while (((size_t)1 << bits) < cap) bits++;
    g->set = sl_calloc(cap, sizeof *g->set);
    g->smask = cap - 1;
    g->sshift = 64 - bits;
    for (size_t i = 0; i < oldcap; i++) {
        if (!old[i].t) continue;
        size_t j = ts_home(g, old[i].hash);
        while (g->set[j].t) j = (j + 1) & g->smask;
        g->set[j] = old[i];
    }
    sl_free(old);
}

/* Adds t (not present); g->n must already count it. */
static void ts_set_add(ts_kg_t *g, ts_timer_t *t) {
    if (!g->set) ts_set_resize(g, TS_MINCAP);
    else if (g->n * 2 > g->smask + 1) ts_set_resize(g, (g->smask + 1) * 2);
    size_t i = ts_home(g, t->hash);
    while (g->set[i].t) i = (i + 1) & g->smask;
    g->set[i].hash = t->hash;
    g->set[i].t = t;
}

/* Removes t (present) by shifting later members of its probe run back. */
static void ts_set_del(ts_kg_t *g, const ts_timer_t *t) {
    size_t i = ts_home(g, t->hash);
    while (g->set[i].t != t) i = (i + 1) & g->smask;
    for (size_t j = i;;) {
        j = (j + 1) & g->smask;
        if (!g->set[j].t) break;
        size_t home = ts_home(g, g->set[j].hash);
        if (((j - home) & g->smask) >= ((j - i) & g->smask)) {
            g->set[i] = g->set[j];
            i = j;
        }
    }
    g->set[i].t = NULL;
    g->set[i].hash = 0;
}

/* ------------------------------------------------------------------ */
/* the timer heap of one key group                                     */

/* A 4-ary heap: half the depth of a binary one, so a pop moves (and
 * rewrites the hpos of) half as many timers, and a node's children share
 * one or two cache lines. */
#define TS_ARITY 4
#define TS_PARENT(i) (((i) - 1) / TS_ARITY)

static inline void ts_hplace(ts_kg_t *g, size_t i, ts_hnode_t x) {
    g->heap[i] = x;
    x.t->hpos = i;
}

static void ts_hup(ts_kg_t *g, size_t i) {
    ts_hnode_t x = g->heap[i];
    while (i > 0) {
        size_t p = TS_PARENT(i);
        if (g->heap[p].ts <= x.ts) break;
        ts_hplace(g, i, g->heap[p]);
        i = p;
    }
    ts_hplace(g, i, x);
}

static void ts_hdown(ts_kg_t *g, size_t i) {
    ts_hnode_t x = g->heap[i];
    for (;;) {
        size_t c = TS_ARITY * i + 1;
        if (c >= g->n) break;
        size_t end = c + TS_ARITY < g->n ? c + TS_ARITY : g->n;
        for (size_t k = c + 1; k < end; k++)
            if (g->heap[k].ts < g->heap[c].ts) c = k;
        if (x.ts <= g->heap[c].ts) break;
        ts_hplace(g, i, g->heap[c]);
        i = c;
    }
    ts_hplace(g, i, x);
}

static void ts_hpush(ts_kg_t *g, ts_timer_t *t) {
    if (g->n == g->hcap) {
        g->hcap = g->hcap ? g->hcap * 2 : TS_MINCAP;
        g->heap = sl_realloc(g->heap, g->hcap * sizeof *g->heap);
    }
    g->heap[g->n].ts = t->ts;
    g->heap[g->n].t = t;
    g->n++;
    ts_hup(g, g->n - 1);
}

/* Takes the timer at heap position i out of the heap. */
static void ts_hremove(ts_kg_t *g, size_t i) {
    size_t last = --g->n;
    if (i == last) return;
    ts_hplace(g, i, g->heap[last]);
    if (i > 0 && g->heap[TS_PARENT(i)].ts > g->heap[i].ts) ts_hup(g, i);
    else ts_hdown(g, i);
}

/* ------------------------------------------------------------------ */
/* the heap over key groups                                            */

static inline void ts_kplace(ts_domain_t *D, int i, ts_knode_t x) {
    D->kheap[i] = x;
    D->kgs[x.kgi].kpos = i;
}

static void ts_kfix(ts_domain_t *D, int i) {
    ts_knode_t x = D->kheap[i];
    while (i > 0 && D->kheap[(i - 1) / 2].ts > x.ts) {
        ts_kplace(D, i, D->kheap[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    for (;;) {
        int c = 2 * i + 1;
        if (c >= D->kn) break;
        if (c + 1 < D->kn && D->kheap[c + 1].ts < D->kheap[c].ts) c++;
        if (x.ts <= D->kheap[c].ts) break;
        ts_kplace(D, i, D->kheap[c]);
        i = c;
    }
    ts_kplace(D, i, x);
}

/* Brings key group kgi's place in kheap up to date after its heap changed. */
static void ts_kg_changed(ts_domain_t *D, int kgi) {
    ts_kg_t *g = &D->kgs[kgi];
    if (g->n == 0) {
        if (g->kpos < 0) return;
        int i = g->kpos, last = --D->kn;
        g->kpos = -1;
        if (i != last) {
            ts_kplace(D, i, D->kheap[last]);
            ts_kfix(D, i);
        }
        return;
    }
    int64_t head = g->heap[0].ts;
    if (g->kpos < 0) {
        int i = D->kn++;
        D->kheap[i].ts = head;
        D->kheap[i].kgi = kgi;
        g->kpos = i;
        ts_kfix(D, i);
    } else if (D->kheap[g->kpos].ts != head) {
        D->kheap[g->kpos].ts = head;
        ts_kfix(D, g->kpos);
    }
}

/* ------------------------------------------------------------------ */
/* copy-on-write                                                       */

/* Drops a reference; the last one frees the storage.  Any thread. */
static void ts_shell_drop(ts_shell_t *sh) {
    if (!sh) return;
    if (atomic_fetch_sub_explicit(&sh->refs, 1, memory_order_acq_rel) == 1) {
        for (size_t i = 0; i < sh->n; i++) sl_free(sh->heap[i].t);
        sl_free(sh->heap);
        sl_free(sh->set);
        sl_free(sh);
    }
}

/* Makes key group g's storage private before a write.  Returns the shell
 * to drop when the call is over (its inputs may point into the shared
 * timers), or NULL when the storage was taken back without a copy. */
static __attribute__((noinline, cold)) ts_shell_t *ts_unshare(sl_timer_service_t *s, ts_kg_t *g) {
    ts_shell_t *sh = g->shell;
    g->shell = NULL;
    if (atomic_load_explicit(&sh->refs, memory_order_acquire) == 1) {
        sl_free(sh);
        s->stats.cow_reclaimed++;
        return NULL;
    }
    /* Same positions in heap and set, new timers. */
    ts_hnode_t *heap = sl_malloc(g->hcap * sizeof *heap);
    for (size_t i = 0; i < g->n; i++) {
        const ts_timer_t *o = g->heap[i].t;
        size_t sz = sizeof *o + (size_t)o->klen + o->nslen;
        ts_timer_t *t = sl_malloc(sz);
        memcpy(t, o, sz);
        t->hpos = i;
        heap[i].ts = g->heap[i].ts;
        heap[i].t = t;
    }
    ts_sslot_t *set = sl_calloc(g->smask + 1, sizeof *set);
    for (size_t j = 0; j <= g->smask; j++) {
        if (!g->set[j].t) continue;
        set[j].hash = g->set[j].hash;
        set[j].t = heap[g->set[j].t->hpos].t;
    }
    g->heap = heap;
    g->set = set;
    s->stats.cow_copies++;
    s->stats.cow_timers += g->n;
    return sh;
}

/* ------------------------------------------------------------------ */
/* the service                                                         */

/* Clears the set slot of the last popped timer (see "Deferred set
 * removal"); every set access starts with it. */
static inline void ts_flush(sl_timer_service_t *s) {
    if (s->pend) {
        ts_set_del(s->pend, s->popped);
        s->pend = NULL;
    }
}

sl_timer_service_t *sl_timer_service_new(int max_parallelism, sl_kg_range_t range) {
    if (max_parallelism <= 0 || range.start < 0 || range.end > max_parallelism || range.start >= range.end) {
        fprintf(stderr, "sluice: bad key-group range [%d, %d) for max parallelism %d\n", range.start, range.end,
                max_parallelism);
        abort();
    }
    sl_timer_service_t *s = sl_calloc(1, sizeof *s);
    s->max_parallelism = max_parallelism;
    s->range = range;
    s->nkg = range.end - range.start;
    for (int d = 0; d < 2; d++) {
        s->dom[d].kgs = sl_calloc((size_t)s->nkg, sizeof(ts_kg_t));
        s->dom[d].kheap = sl_calloc((size_t)s->nkg, sizeof(ts_knode_t));
        for (int i = 0; i < s->nkg; i++) s->dom[d].kgs[i].kpos = -1;
    }
    return s;
}

void sl_timer_service_destroy(sl_timer_service_t *s) {
    if (!s) return;
    ts_flush(s);
    for (int d = 0; d < 2; d++) {
        ts_domain_t *D = &s->dom[d];
        for (int i = 0; i < s->nkg; i++) {
            ts_kg_t *g = &D->kgs[i];
            if (g->shell) { /* snapshots may still hold the storage */
                ts_shell_drop(g->shell);
                continue;
            }
            for (size_t j = 0; j < g->n; j++) sl_free(g->heap[j].t);
            sl_free(g->heap);
            sl_free(g->set);
        }
        sl_free(D->kgs);
        sl_free(D->kheap);
    }
    sl_free(s->popped);
    sl_free(s);
}

/* The domain, or NULL for a bad domain or key group. */
static inline ts_domain_t *ts_dom(const sl_timer_service_t *s, sl_time_domain_t d, int kg) {
    if ((unsigned)d > 1u || kg < s->range.start || kg >= s->range.end) return NULL;
    return (ts_domain_t *)&s->dom[d];
}

/* A new timer {ts, h, khash, key, ns} in private storage of g (kgi). */
static void ts_add_new(ts_domain_t *D, int kgi, uint64_t h, uint64_t khash, const void *key, uint32_t klen,
                       const void *ns, uint32_t nslen, int64_t ts) {
    ts_kg_t *g = &D->kgs[kgi];
    ts_timer_t *t = sl_malloc(sizeof *t + (size_t)klen + nslen);
    t->ts = ts;
    t->hash = h;
    t->khash = khash;
    t->klen = klen;
    t->nslen = nslen;
    if (klen) memcpy(t->data, key, klen);
    if (nslen) memcpy(t->data + klen, ns, nslen);
    ts_hpush(g, t);
    ts_set_add(g, t);
    D->count++;
    if (t->hpos == 0) ts_kg_changed(D, kgi);
}

/* Takes timer t (private storage of g) out of set and heap and frees it. */
static void ts_remove(ts_domain_t *D, int kgi, ts_timer_t *t) {
    ts_kg_t *g = &D->kgs[kgi];
    size_t pos = t->hpos;
    ts_set_del(g, t);
    ts_hremove(g, pos);
    sl_free(t);
    D->count--;
    if (pos == 0) ts_kg_changed(D, kgi);
}

int sl_timers_register_hashed(sl_timer_service_t *s, sl_time_domain_t d, int kg, uint64_t khash, const void *key,
                              uint32_t klen, const void *ns, uint32_t nslen, int64_t ts) {
    ts_domain_t *D = ts_dom(s, d, kg);
    if (!D || (!key && klen) || (!ns && nslen)) return SL_EINVAL;
    ts_flush(s);
    int kgi = kg - s->range.start;
    ts_kg_t *g = &D->kgs[kgi];
    uint64_t h = ts_hash(khash, ts_ns_hash(ns, nslen), ts);
    if (ts_set_find(g, h, ts, key, klen, ns, nslen)) return 0;
    ts_shell_t *old = SL_UNLIKELY(g->shell != NULL) ? ts_unshare(s, g) : NULL;
    ts_add_new(D, kgi, h, khash, key, klen, ns, nslen, ts);
    ts_shell_drop(old);
    return 1;
}

int sl_timers_register(sl_timer_service_t *s, sl_time_domain_t d, int kg, const void *key, uint32_t klen,
                       const void *ns, uint32_t nslen, int64_t ts) {
    if (!key && klen) return SL_EINVAL;
    return sl_timers_register_hashed(s, d, kg, sl_kg_key_hash(key, klen), key, klen, ns, nslen, ts);
}

int sl_timers_delete_hashed(sl_timer_service_t *s, sl_time_domain_t d, int kg, uint64_t khash, const void *key,
                            uint32_t klen, const void *ns, uint32_t nslen, int64_t ts) {
    ts_domain_t *D = ts_dom(s, d, kg);
    if (!D || (!key && klen) || (!ns && nslen)) return SL_EINVAL;
    ts_flush(s);
    int kgi = kg - s->range.start;
    ts_kg_t *g = &D->kgs[kgi];
    uint64_t h = ts_hash(khash, ts_ns_hash(ns, nslen), ts);
    ts_sslot_t *slot = ts_set_find(g, h, ts, key, klen, ns, nslen);
    if (!slot) return 0;
    ts_shell_t *old = NULL;
    if (SL_UNLIKELY(g->shell != NULL)) {
        old = ts_unshare(s, g);
        slot = ts_set_find(g, h, ts, key, klen, ns, nslen);
    }
    ts_remove(D, kgi, slot->t);
    ts_shell_drop(old);
    return 1;
}

int sl_timers_delete(sl_timer_service_t *s, sl_time_domain_t d, int kg, const void *key, uint32_t klen,
                     const void *ns, uint32_t nslen, int64_t ts) {
    if (!key && klen) return SL_EINVAL;
    return sl_timers_delete_hashed(s, d, kg, sl_kg_key_hash(key, klen), key, klen, ns, nslen, ts);
}

int sl_timers_replace(sl_timer_service_t *s, sl_time_domain_t d, int kg, uint64_t khash, const void *key,
                      uint32_t klen, const void *old_ns, uint32_t old_nslen, int64_t old_ts, const void *new_ns,
                      uint32_t new_nslen, int64_t new_ts) {
    ts_domain_t *D = ts_dom(s, d, kg);
    if (!D || (!key && klen) || (!old_ns && old_nslen) || (!new_ns && new_nslen)) return SL_EINVAL;
    ts_flush(s);
    int kgi = kg - s->range.start;
    ts_kg_t *g = &D->kgs[kgi];
    uint64_t ho = ts_hash(khash, ts_ns_hash(old_ns, old_nslen), old_ts);
    uint64_t hn = ts_hash(khash, ts_ns_hash(new_ns, new_nslen), new_ts);
    ts_sslot_t *so = ts_set_find(g, ho, old_ts, key, klen, old_ns, old_nslen);
    bool same =
        old_ts == new_ts && old_nslen == new_nslen && (new_nslen == 0 || memcmp(old_ns, new_ns, new_nslen) == 0);
    if (same) { /* delete then register: the timer is there afterwards */
        if (so) return 3;
        ts_shell_t *old = SL_UNLIKELY(g->shell != NULL) ? ts_unshare(s, g) : NULL;
        ts_add_new(D, kgi, hn, khash, key, klen, new_ns, new_nslen, new_ts);
        ts_shell_drop(old);
        return 2;
    }
    bool have_new = ts_set_find(g, hn, new_ts, key, klen, new_ns, new_nslen) != NULL;
    if (!so && have_new) return 0;
    /* Something changes: make the storage private (the caller's key and
     * namespaces may point into the shared timers until the drop). */
    ts_shell_t *old = NULL;
    if (SL_UNLIKELY(g->shell != NULL)) {
        old = ts_unshare(s, g);
        if (so) so = ts_set_find(g, ho, old_ts, key, klen, old_ns, old_nslen);
    }
    int rc;
    if (!so) {
        ts_add_new(D, kgi, hn, khash, key, klen, new_ns, new_nslen, new_ts);
        rc = 2;
    } else if (have_new) {
        ts_remove(D, kgi, so->t);
        rc = 1;
    } else if (old_nslen != new_nslen) {
        ts_remove(D, kgi, so->t);
        ts_add_new(D, kgi, hn, khash, key, klen, new_ns, new_nslen, new_ts);
        rc = 3;
    } else {
        /* In place: new identity, same allocation, one sift. */
        ts_timer_t *t = so->t;
        ts_set_del(g, t);
        t->ts = new_ts;
        t->hash = hn;
        if (new_nslen) memmove(t->data + klen, new_ns, new_nslen);
        ts_set_add(g, t);
        size_t pos = t->hpos;
        g->heap[pos].ts = new_ts;
        if (pos > 0 && g->heap[TS_PARENT(pos)].ts > new_ts) ts_hup(g, pos);
        else ts_hdown(g, pos);
        if (pos == 0 || t->hpos == 0) ts_kg_changed(D, kgi);
        rc = 3;
    }
    ts_shell_drop(old);
    return rc;
}

int64_t sl_timers_peek(const sl_timer_service_t *s, sl_time_domain_t d) {
    if ((unsigned)d > 1u) return INT64_MAX;
    const ts_domain_t *D = &s->dom[d];
    return D->kn ? D->kheap[0].ts : INT64_MAX;
}

bool sl_timers_pop(sl_timer_service_t *s, sl_time_domain_t d, int64_t t, sl_timer_t *out) {
    ts_flush(s);
    sl_free(s->popped);
    s->popped = NULL;
    if ((unsigned)d > 1u) return false;
    ts_domain_t *D = &s->dom[d];
    if (D->kn == 0 || D->kheap[0].ts > t) return false;
    int kgi = D->kheap[0].kgi;
    ts_kg_t *g = &D->kgs[kgi];
    /* The popped timer's storage is private; nothing of the call points
     * into the shared one: drop it at once. */
    if (SL_UNLIKELY(g->shell != NULL)) ts_shell_drop(ts_unshare(s, g));
    ts_timer_t *tm = g->heap[0].t;
    /* Its set slot is cleared by the next set access (ts_flush). */
    __builtin_prefetch(&g->set[ts_home(g, tm->hash)], 1);
    ts_hremove(g, 0);
    D->count--;
    ts_kg_changed(D, kgi);
    s->popped = tm;
    s->pend = g;
    /* The next pop's heap head, while the caller handles this one. */
    if (D->kn) __builtin_prefetch(D->kgs[D->kheap[0].kgi].heap);
    if (out) ts_fill(out, tm, s->range.start + kgi);
    return true;
}

int64_t sl_timers_count(const sl_timer_service_t *s, sl_time_domain_t d) {
    if ((unsigned)d > 1u) return 0;
    return s->dom[d].count;
}

int sl_timers_foreach_kg(const sl_timer_service_t *s, sl_time_domain_t d, int kg,
                         int (*cb)(void *c, const sl_timer_t *t), void *c) {
    const ts_domain_t *D = ts_dom(s, d, kg);
    if (!D || !cb) return SL_EINVAL;
    const ts_kg_t *g = &D->kgs[kg - s->range.start];
    for (size_t i = 0; i < g->n; i++) {
        sl_timer_t t;
        ts_fill(&t, g->heap[i].t, kg);
        int rc = cb(c, &t);
        if (rc) return rc;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* snapshots                                                           */

#define TS_MAGIC "SLTM"

struct sl_timers_snapshot {
    int max_parallelism;
    sl_kg_range_t range;
    int nkg;
    ts_shell_t **shells[2]; /* [domain][kg - range.start]; NULL: no timer */
};

int sl_timers_snapshot(sl_timer_service_t *s, sl_timers_snapshot_t **out) {
    if (!s || !out) return SL_EINVAL;
    ts_flush(s); /* a shared set never holds a popped timer */
    sl_timers_snapshot_t *sn = sl_calloc(1, sizeof *sn);
    sn->max_parallelism = s->max_parallelism;
    sn->range = s->range;
    sn->nkg = s->nkg;
    for (int d = 0; d < 2; d++) {
        sn->shells[d] = sl_calloc((size_t)s->nkg, sizeof(ts_shell_t *));
        for (int i = 0; i < s->nkg; i++) {
            ts_kg_t *g = &s->dom[d].kgs[i];
            ts_shell_t *sh = g->shell;
            if (sh) {
                atomic_fetch_add_explicit(&sh->refs, 1, memory_order_relaxed);
            } else if (g->n) {
                sh = sl_malloc(sizeof *sh);
                atomic_init(&sh->refs, 2);
                sh->heap = g->heap;
                sh->n = g->n;
                sh->set = g->set;
                g->shell = sh;
            }
            sn->shells[d][i] = sh;
        }
    }
    s->stats.snapshots++;
    s->stats.sync_kgs += 2 * (uint64_t)s->nkg;
    *out = sn;
    return SL_OK;
}

void sl_timers_snapshot_release(sl_timers_snapshot_t *sn) {
    if (!sn) return;
    for (int d = 0; d < 2; d++) {
        for (int i = 0; i < sn->nkg; i++) ts_shell_drop(sn->shells[d][i]);
        sl_free(sn->shells[d]);
    }
    sl_free(sn);
}

static int ts_bytes_cmp(const uint8_t *a, uint32_t alen, const uint8_t *b, uint32_t blen) {
    int c = memcmp(a, b, SL_MIN(alen, blen));
    return c ? c : (alen > blen) - (alen < blen);
}

/* Format order: timestamp, key, namespace. */
static int ts_timer_cmp(const void *pa, const void *pb) {
    const ts_timer_t *a = *(const ts_timer_t *const *)pa, *b = *(const ts_timer_t *const *)pb;
    if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
    int c = ts_bytes_cmp(a->data, a->klen, b->data, b->klen);
    return c ? c : ts_bytes_cmp(a->data + a->klen, a->nslen, b->data + b->klen, b->nslen);
}

/* Appends one domain: the timers of heap[0..n) in format order. */
static void ts_write_domain(sl_buf_t *out, const ts_hnode_t *heap, size_t n) {
    const ts_timer_t **v = sl_malloc((n ? n : 1) * sizeof *v);
    for (size_t i = 0; i < n; i++) v[i] = heap[i].t;
    qsort(v, n, sizeof *v, ts_timer_cmp);
    sl_kbf_varint(out, n);
    for (size_t i = 0; i < n; i++) {
        uint8_t b[8];
        sl_st64(b, (uint64_t)v[i]->ts);
        sl_buf_append(out, b, 8);
        sl_kbf_bytes(out, v[i]->data, v[i]->klen);
        sl_kbf_bytes(out, v[i]->data + v[i]->klen, v[i]->nslen);
    }
    sl_free(v);
}

int sl_timers_snapshot_write_kg(const sl_timers_snapshot_t *sn, int kg, sl_buf_t *out) {
    if (!sn || !out || kg < sn->range.start || kg >= sn->range.end) return SL_EINVAL;
    size_t start = sl_kbf_begin_magic(out, TS_MAGIC, sn->max_parallelism, kg);
    for (int d = 0; d < 2; d++) {
        const ts_shell_t *sh = sn->shells[d][kg - sn->range.start];
        ts_write_domain(out, sh ? sh->heap : NULL, sh ? sh->n : 0);
    }
    sl_kbf_end(out, start);
    return SL_OK;
}

int sl_timers_snapshot_kg(const sl_timer_service_t *s, int kg, sl_buf_t *out) {
    if (!s || !out || kg < s->range.start || kg >= s->range.end) return SL_EINVAL;
    size_t start = sl_kbf_begin_magic(out, TS_MAGIC, s->max_parallelism, kg);
    for (int d = 0; d < 2; d++) {
        const ts_kg_t *g = &s->dom[d].kgs[kg - s->range.start];
        ts_write_domain(out, g->heap, g->n);
    }
    sl_kbf_end(out, start);
    return SL_OK;
}

/* Removes every timer of key group kgi in both domains (a failed
 * restore's undo). */
static void ts_clear_kg(sl_timer_service_t *s, int kgi) {
    ts_flush(s);
    for (int d = 0; d < 2; d++) {
        ts_domain_t *D = &s->dom[d];
        ts_kg_t *g = &D->kgs[kgi];
        if (g->shell) ts_shell_drop(ts_unshare(s, g));
        for (size_t j = 0; j < g->n; j++) sl_free(g->heap[j].t);
        D->count -= (int64_t)g->n;
        g->n = 0;
        if (g->set) memset(g->set, 0, (g->smask + 1) * sizeof *g->set);
        ts_kg_changed(D, kgi);
    }
}

/* One pass over the block: checks it (load false) or loads it. */
static int ts_restore_pass(sl_timer_service_t *s, int kg, const uint8_t *data, size_t len, bool load, char *err,
                           size_t errlen) {
    sl_kbf_reader_t r;
    int rc = sl_kbf_open(&r, data, len, TS_MAGIC, s->max_parallelism, kg, "timers", err, errlen);
    if (rc) return rc;
    static const char *dname[2] = {"event-time", "processing-time"};
    for (int d = 0; d < 2; d++) {
        uint32_t n;
        if (!sl_kbf_rd_varint32(&r, &n))
            return sl_errf(err, errlen, SL_EFORMAT, "timers of key group %d: bad number of %s timers at byte %zu", kg,
                           dname[d], (size_t)(r.p - r.base));
        for (uint32_t i = 0; i < n; i++) {
            uint64_t ts;
            const uint8_t *k, *ns;
            uint32_t klen, nslen;
            const char *what = NULL;
            if (!sl_kbf_rd_u64(&r, &ts)) what = "timestamp";
            else if (!sl_kbf_rd_bytes(&r, &k, &klen)) what = "key";
            else if (!sl_kbf_rd_bytes(&r, &ns, &nslen)) what = "namespace";
            if (what)
                return sl_errf(err, errlen, SL_EFORMAT,
                               "timers of key group %d: %s timer %u: bad or truncated %s at byte %zu", kg, dname[d],
                               (unsigned)i, what, (size_t)(r.p - r.base));
            uint64_t kh = sl_kg_key_hash(k, klen);
            int kkg = sl_kg_of_hash(kh, s->max_parallelism);
            if (kkg != kg)
                return sl_errf(err, errlen, SL_EFORMAT,
                               "timers of key group %d: %s timer %u: its key belongs to key group %d", kg, dname[d],
                               (unsigned)i, kkg);
            if (load && sl_timers_register_hashed(s, (sl_time_domain_t)d, kg, kh, k, klen, ns, nslen, (int64_t)ts) == 0)
                return sl_errf(err, errlen, SL_EFORMAT, "timers of key group %d: %s timer %u appears twice", kg,
                               dname[d], (unsigned)i);
        }
    }
    if (r.p != r.end)
        return sl_errf(err, errlen, SL_EFORMAT, "timers of key group %d: %zu unexpected bytes after the timers", kg,
                       (size_t)(r.end - r.p));
    return SL_OK;
}

int sl_timers_restore_kg(sl_timer_service_t *s, int kg, const uint8_t *data, size_t len, char *err, size_t errlen) {
    if (!s) return SL_EINVAL;
    if (kg < s->range.start || kg >= s->range.end)
        return sl_errf(err, errlen, SL_EINVAL, "timers: key group %d is outside this service's range [%d, %d)", kg,
                       s->range.start, s->range.end);
    int kgi = kg - s->range.start;
    if (s->dom[0].kgs[kgi].n || s->dom[1].kgs[kgi].n)
        return sl_errf(err, errlen, SL_ESTATE, "timers of key group %d: cannot restore, the key group has timers", kg);
    int rc = ts_restore_pass(s, kg, data, len, false, err, errlen);
    if (rc) return rc;
    rc = ts_restore_pass(s, kg, data, len, true, err, errlen);
    if (rc) ts_clear_kg(s, kgi);
    return rc;
}

void sl_timers_cow_stats(const sl_timer_service_t *s, sl_timers_cow_stats_t *out) { *out = s->stats; }
