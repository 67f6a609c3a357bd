/*
 * rocksdb_cache.c — the write-back value cache of the RocksDB backend (see
 * rocksdb_cache.h for what it holds and when entries are written back).
 *
 * Table: open addressing with linear probing over a power-of-two array of
 * {hash, entry*} slots, load at most 3/4, backward-shift deletion (no
 * tombstones, so probes stay short however many entries come and go).
 * Each entry is one allocation: header, key, value.
 *
 * Eviction: the CLOCK hand walks the slot array.  Backward-shift deletion
 * only ever moves an entry into the hole just made or into a later hole of
 * the same cluster, so after evicting at the hand the hand looks at the same
 * slot again and no entry is skipped or seen out of turn for long.
 *
 * Dirty entries are also kept in a vector (each knows its index), so a
 * flush costs O(dirty entries), not O(cache).
 *
 * Captures (rocksdb_cache.h says what they show).  A capture turns the
 * dirty vector into a generation (rvc_gen_t: the vector, numbered, plus a
 * `sup` word per entry) and starts a new vector: entries still say which
 * generation's vector they joined (gen) and where (didx), so "is e frozen"
 * is e->gen naming a live generation whose v[e->didx] is e — no entry is
 * touched at the capture.  Frozen entries are copied before a change
 * (rvc_thaw) and moved to their generation's `det` list instead of being
 * freed (rvc_detach).  A generation is referenced by the cache until it is
 * retired and by every capture that shows some of it; the last reference
 * frees it with its det entries, so a capture may outlive the cache.
 */
#include "state/rocksdb_cache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "common/common.h"

#define RVC_MIN_CAP 64u
#define RVC_MALLOC_OVERHEAD 16u /* estimated allocator bytes per entry */
#define RVC_FREE_STEP 4096u     /* superseded copies freed per sl_rvc_step */

typedef struct rvc_slot {
    uint64_t hash;
    sl_rvc_ent_t *e; /* NULL: empty */
} rvc_slot_t;

/* A captured dirty vector. */
typedef struct rvc_gen {
    atomic_int refs;     /* the cache (until retired) + the captures that show it */
    uint32_t gen;        /* its number (entries' gen) */
    sl_rvc_ent_t **v;    /* the entries, immutable */
    size_t n;
    atomic_uint *sup;    /* per entry, see rocksdb_cache.h: 0 while needed by new captures */
    /* the task's (and, once no one else holds it, the last reference's): */
    size_t pending;      /* entries with sup == 0 */
    size_t cursor;       /* write-back position in v */
    bool retiring;       /* written back and no capture holds it: entries no longer frozen */
    sl_rvc_ent_t **det;  /* entries out of the table, freed with the generation */
    size_t ndet, capdet, detbytes;
} rvc_gen_t;

struct sl_rvc_capture {
    uint32_t seq;
    int ngens;
    rvc_gen_t **gens;
    pthread_mutex_t mu;
    bool built;
    const sl_rvc_ent_t **ents; /* sorted, built on first use */
    size_t nents;
};

struct sl_rvc {
    rvc_slot_t *slots;
    size_t cap, mask, n;
    size_t hand;
    size_t budget, used; /* used: entries + the slot array */
    sl_rvc_ent_t **dirty;
    atomic_uint *dsup;   /* the future sup of the dirty vector: zeroed as entries join it, so
                          * that a capture needs no calloc (a large one may clear memory) */
    size_t ndirty, capdirty;
    uint32_t gen;        /* number of the current dirty vector (>= 1) */
    uint32_t seq;        /* captures taken */
    rvc_gen_t **gens;    /* generations not yet retired, oldest first */
    int ngens, capgens;
    size_t pending;      /* sum of the generations' pending */
    size_t capbytes;     /* sum of their detbytes */
    sl_rvc_stats_t st;
};

static inline size_t ent_cost(uint32_t klen, uint32_t vcap) {
    return sizeof(sl_rvc_ent_t) + (size_t)klen + vcap + RVC_MALLOC_OVERHEAD;
}

size_t sl_rvc_cost(uint32_t klen, uint32_t vlen) { return ent_cost(klen, vlen) + 2 * sizeof(rvc_slot_t); }

bool sl_rvc_fits(const sl_rvc_t *c, size_t cost) { return cost <= c->budget / 4; }

sl_rvc_t *sl_rvc_new(size_t budget) {
    sl_rvc_t *c = sl_calloc(1, sizeof *c);
    c->budget = budget;
    c->cap = RVC_MIN_CAP;
    c->mask = c->cap - 1;
    c->slots = sl_calloc(c->cap, sizeof *c->slots);
    c->used = c->cap * sizeof *c->slots;
    c->gen = 1;
    return c;
}

/* ---- generations ---- */

static void rvc_gen_free(rvc_gen_t *g) {
    for (size_t i = 0; i < g->ndet; i++) sl_free(g->det[i]);
    sl_free(g->det);
    sl_free(g->v);
    sl_free(g->sup);
    sl_free(g);
}

static void rvc_gen_unref(rvc_gen_t *g) {
    if (atomic_fetch_sub_explicit(&g->refs, 1, memory_order_acq_rel) == 1) rvc_gen_free(g);
}

/* The live generation that holds e frozen, or NULL. */
static inline rvc_gen_t *rvc_frozen(const sl_rvc_t *c, const sl_rvc_ent_t *e) {
    if (SL_LIKELY(c->ngens == 0 || e->gen == c->gen || e->gen == 0)) return NULL;
    for (int i = 0; i < c->ngens; i++) {
        rvc_gen_t *g = c->gens[i];
        if (g->gen == e->gen) return !g->retiring && e->didx < g->n && g->v[e->didx] == e ? g : NULL;
    }
    return NULL;
}

/* Entry i of g is no longer needed by captures taken from now on. */
static inline void rvc_settle(sl_rvc_t *c, rvc_gen_t *g, size_t i) {
    if (atomic_load_explicit(&g->sup[i], memory_order_relaxed)) return;
    atomic_store_explicit(&g->sup[i], c->seq, memory_order_relaxed);
    g->pending--;
    c->pending--;
}

/* e (frozen in g) leaves the table: g frees it. */
static void rvc_detach(sl_rvc_t *c, rvc_gen_t *g, sl_rvc_ent_t *e) {
    rvc_settle(c, g, e->didx);
    if (g->ndet == g->capdet) {
        g->capdet = g->capdet ? g->capdet * 2 : 64;
        g->det = sl_realloc(g->det, g->capdet * sizeof *g->det);
    }
    g->det[g->ndet++] = e;
    size_t cost = sizeof *e + (size_t)e->klen + e->vcap + RVC_MALLOC_OVERHEAD;
    g->detbytes += cost;
    c->capbytes += cost;
    c->used -= cost;
}

static void rvc_free_entries(sl_rvc_t *c) {
    for (size_t i = 0; i < c->cap; i++) {
        sl_rvc_ent_t *e = c->slots[i].e;
        if (!e) continue;
        rvc_gen_t *g = rvc_frozen(c, e);
        if (g)
            rvc_detach(c, g, e);
        else
            sl_free(e);
    }
}

void sl_rvc_free(sl_rvc_t *c) {
    if (!c) return;
    rvc_free_entries(c);
    for (int i = 0; i < c->ngens; i++) rvc_gen_unref(c->gens[i]);
    sl_free(c->gens);
    sl_free(c->slots);
    sl_free(c->dirty);
    sl_free(c->dsup);
    sl_free(c);
}

void sl_rvc_clear(sl_rvc_t *c) {
    if (c->n == 0 && c->cap == RVC_MIN_CAP) return;
    rvc_free_entries(c);
    sl_free(c->slots);
    c->cap = RVC_MIN_CAP;
    c->mask = c->cap - 1;
    c->slots = sl_calloc(c->cap, sizeof *c->slots);
    c->n = 0;
    c->hand = 0;
    c->used = c->cap * sizeof *c->slots;
    c->ndirty = 0;
}

/* The slot index holding key, or the empty slot where it would go. */
static inline size_t rvc_probe(const sl_rvc_t *c, const void *key, uint32_t klen, uint64_t hash) {
    size_t i = (size_t)hash & c->mask;
    for (;;) {
        const rvc_slot_t *s = &c->slots[i];
        if (!s->e) return i;
        if (s->hash == hash && s->e->klen == klen && memcmp(s->e->data, key, klen) == 0) return i;
        i = (i + 1) & c->mask;
    }
}

/* The slot index of entry e (which is in the table). */
static size_t rvc_slot_of(const sl_rvc_t *c, const sl_rvc_ent_t *e) {
    size_t i = (size_t)e->hash & c->mask;
    while (c->slots[i].e != e) i = (i + 1) & c->mask;
    return i;
}

sl_rvc_ent_t *sl_rvc_find(sl_rvc_t *c, const void *key, uint32_t klen, uint64_t hash) {
    sl_rvc_ent_t *e = c->slots[rvc_probe(c, key, klen, hash)].e;
    if (e) {
        e->flags |= SL_RVC_REF;
        c->st.hits++;
    } else {
        c->st.misses++;
    }
    return e;
}

static void rvc_grow(sl_rvc_t *c) {
    size_t ncap = c->cap * 2;
    rvc_slot_t *ns = sl_calloc(ncap, sizeof *ns);
    for (size_t i = 0; i < c->cap; i++) {
        if (!c->slots[i].e) continue;
        size_t j = (size_t)c->slots[i].hash & (ncap - 1);
        while (ns[j].e) j = (j + 1) & (ncap - 1);
        ns[j] = c->slots[i];
    }
    sl_free(c->slots);
    c->used += (ncap - c->cap) * sizeof *ns;
    c->slots = ns;
    c->cap = ncap;
    c->mask = ncap - 1;
    c->hand &= c->mask;
}

/* Sets or clears DIRTY of e, which is not frozen (a dirty one is then in
 * the current vector). */
static void rvc_mark_cur(sl_rvc_t *c, sl_rvc_ent_t *e, bool dirty) {
    if (dirty == !!(e->flags & SL_RVC_DIRTY)) return;
    if (dirty) {
        if (c->ndirty == c->capdirty) {
            c->capdirty = c->capdirty ? c->capdirty * 2 : 64;
            c->dirty = sl_realloc(c->dirty, c->capdirty * sizeof *c->dirty);
            c->dsup = sl_realloc(c->dsup, c->capdirty * sizeof *c->dsup);
        }
        atomic_init(&c->dsup[c->ndirty], 0);
        e->didx = (uint32_t)c->ndirty;
        e->gen = c->gen;
        c->dirty[c->ndirty++] = e;
        e->flags |= SL_RVC_DIRTY;
    } else {
        sl_rvc_ent_t *last = c->dirty[--c->ndirty];
        c->dirty[e->didx] = last;
        last->didx = e->didx;
        e->flags &= (uint16_t)~SL_RVC_DIRTY;
        e->gen = 0;
    }
}

static inline size_t ent_cost_of(const sl_rvc_ent_t *e) { return ent_cost(e->klen, e->vcap); }

/* Copy-on-write of e, frozen in g: a copy (with room for vcap bytes of
 * value) takes e's slot, still dirty when e was; g keeps e. */
static sl_rvc_ent_t *rvc_thaw(sl_rvc_t *c, rvc_gen_t *g, sl_rvc_ent_t *e, uint32_t vcap) {
    size_t slot = rvc_slot_of(c, e);
    vcap = SL_MAX(vcap, e->vcap);
    sl_rvc_ent_t *n = sl_malloc(sizeof *n + (size_t)e->klen + vcap);
    memcpy(n, e, sizeof *n + (size_t)e->klen + e->vlen);
    bool dirty = (e->flags & SL_RVC_DIRTY) != 0; /* not yet written back */
    n->vcap = vcap;
    n->flags = e->flags & (uint16_t)~SL_RVC_DIRTY;
    n->gen = 0;
    n->didx = 0;
    c->slots[slot].e = n;
    rvc_detach(c, g, e);
    c->used += ent_cost_of(n);
    c->st.cow_copies++;
    if (dirty) rvc_mark_cur(c, n, true);
    return n;
}

sl_rvc_ent_t *sl_rvc_mark(sl_rvc_t *c, sl_rvc_ent_t *e, bool dirty) {
    if (dirty == !!(e->flags & SL_RVC_DIRTY)) return e;
    rvc_gen_t *g = rvc_frozen(c, e);
    if (g) e = rvc_thaw(c, g, e, 0);
    rvc_mark_cur(c, e, dirty);
    return e;
}

sl_rvc_ent_t *sl_rvc_insert(sl_rvc_t *c, const void *key, uint32_t klen, uint64_t hash, const void *v, uint32_t vlen,
                            uint32_t flags) {
    if ((c->n + 1) * 4 > c->cap * 3) rvc_grow(c);
    size_t i = rvc_probe(c, key, klen, hash);
    sl_rvc_ent_t *e = sl_malloc(sizeof *e + (size_t)klen + vlen);
    e->hash = hash;
    e->klen = klen;
    e->vlen = vlen;
    e->vcap = vlen;
    e->didx = 0;
    e->gen = 0;
    e->flags = (uint16_t)((flags & ~(uint32_t)(SL_RVC_DIRTY | SL_RVC_ABSENT)) | SL_RVC_REF);
    e->absent = (flags & SL_RVC_ABSENT) != 0;
    e->pad = 0;
    if (klen) memcpy(e->data, key, klen);
    if (vlen) memcpy(e->data + klen, v, vlen);
    c->slots[i].hash = hash;
    c->slots[i].e = e;
    c->n++;
    c->used += ent_cost(klen, vlen);
    c->st.inserts++;
    if (flags & SL_RVC_DIRTY) rvc_mark_cur(c, e, true);
    return e;
}

sl_rvc_ent_t *sl_rvc_set_value(sl_rvc_t *c, sl_rvc_ent_t *e, const void *v, uint32_t vlen) {
    rvc_gen_t *g = rvc_frozen(c, e);
    if (g) e = rvc_thaw(c, g, e, vlen);
    if (vlen > e->vcap) {
        size_t i = rvc_slot_of(c, e);
        c->used -= ent_cost(e->klen, e->vcap);
        e = sl_realloc(e, sizeof *e + (size_t)e->klen + vlen);
        e->vcap = vlen;
        c->used += ent_cost(e->klen, e->vcap);
        c->slots[i].e = e;
        if (e->flags & SL_RVC_DIRTY) c->dirty[e->didx] = e;
    }
    e->vlen = vlen;
    if (vlen) memcpy(e->data + e->klen, v, vlen);
    e->absent = 0;
    return e;
}

sl_rvc_ent_t *sl_rvc_set_absent(sl_rvc_t *c, sl_rvc_ent_t *e) {
    rvc_gen_t *g = rvc_frozen(c, e);
    if (g) e = rvc_thaw(c, g, e, 0);
    e->vlen = 0;
    e->absent = 1;
    return e;
}

/* Removes the entry in slot i (backward-shift deletion) and frees it (or,
 * frozen, hands it to its generation). */
static void rvc_remove_at(sl_rvc_t *c, size_t i) {
    sl_rvc_ent_t *e = c->slots[i].e;
    rvc_gen_t *g = rvc_frozen(c, e);
    if (g) {
        rvc_detach(c, g, e);
    } else {
        if (e->flags & SL_RVC_DIRTY) rvc_mark_cur(c, e, false);
        c->used -= ent_cost(e->klen, e->vcap);
        sl_free(e);
    }
    c->n--;
    size_t j = i;
    for (;;) {
        j = (j + 1) & c->mask;
        if (!c->slots[j].e) break;
        size_t home = (size_t)c->slots[j].hash & c->mask;
        /* The entry at j may move to the hole at i unless its home lies
         * cyclically in (i, j]. */
        bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
        if (stays) continue;
        c->slots[i] = c->slots[j];
        i = j;
    }
    c->slots[i].e = NULL;
    c->slots[i].hash = 0;
}

void sl_rvc_drop(sl_rvc_t *c, sl_rvc_ent_t *e) { rvc_remove_at(c, rvc_slot_of(c, e)); }

int sl_rvc_make_room(sl_rvc_t *c, size_t need, const sl_rvc_ent_t *keep, sl_rvc_write_cb write, void *ctx) {
    if (c->used + need <= c->budget) return 0;
    size_t low = c->budget - c->budget / 8;
    int written = 0;
    /* Two turns of the hand clear every reference bit and pass every
     * entry once more: enough to evict all but `keep`. */
    for (size_t steps = 0; c->used + need > low && c->n > 0 && steps < 2 * c->cap + 2;) {
        rvc_slot_t *s = &c->slots[c->hand];
        sl_rvc_ent_t *e = s->e;
        if (!e || e == keep) {
            c->hand = (c->hand + 1) & c->mask;
            steps++;
            continue;
        }
        if (e->flags & SL_RVC_REF) {
            e->flags &= (uint16_t)~SL_RVC_REF;
            c->hand = (c->hand + 1) & c->mask;
            steps++;
            continue;
        }
        if (e->flags & SL_RVC_DIRTY) {
            write(ctx, e);
            written++;
            c->st.evicted_dirty++;
        }
        c->st.evictions++;
        if (rvc_frozen(c, e)) c->st.evicted_captured++;
        rvc_remove_at(c, c->hand); /* the hand looks at this slot again */
    }
    return written;
}

static int rvc_key_cmp(const void *pa, const void *pb) {
    const sl_rvc_ent_t *a = *(sl_rvc_ent_t *const *)pa, *b = *(sl_rvc_ent_t *const *)pb;
    int r = memcmp(a->data, b->data, SL_MIN(a->klen, b->klen));
    return r ? r : (a->klen > b->klen) - (a->klen < b->klen);
}

/* Entry i of g (pending) goes to write(ctx, e) and is clean. */
static void rvc_write_back(sl_rvc_t *c, rvc_gen_t *g, size_t i, sl_rvc_write_cb write, void *ctx) {
    sl_rvc_ent_t *e = g->v[i];
    write(ctx, e);
    e->flags &= (uint16_t)~(SL_RVC_DIRTY | SL_RVC_IN_DB);
    if (!e->absent) e->flags |= SL_RVC_IN_DB;
    rvc_settle(c, g, i);
    c->st.written_back++;
}

uint64_t sl_rvc_flush(sl_rvc_t *c, sl_rvc_write_cb write, void *ctx) {
    uint64_t n = c->ndirty;
    /* Captured values not yet written back first (oldest first; none of
     * their keys is dirty in a newer vector: a change copies them). */
    for (int gi = 0; gi < c->ngens; gi++) {
        rvc_gen_t *g = c->gens[gi];
        for (size_t i = g->cursor; g->pending && i < g->n; i++)
            if (!atomic_load_explicit(&g->sup[i], memory_order_relaxed)) {
                rvc_write_back(c, g, i, write, ctx);
                n++;
            }
        g->cursor = g->n;
    }
    /* In key order: RocksDB's memtable inserts a sorted run faster (its
     * skip list reuses the last insert position). */
    if (c->ndirty > 1) qsort(c->dirty, c->ndirty, sizeof *c->dirty, rvc_key_cmp);
    for (size_t i = 0; i < c->ndirty; i++) {
        sl_rvc_ent_t *e = c->dirty[i];
        write(ctx, e);
        e->flags &= (uint16_t)~(SL_RVC_DIRTY | SL_RVC_IN_DB);
        if (!e->absent) e->flags |= SL_RVC_IN_DB;
        e->gen = 0;
    }
    c->ndirty = 0;
    if (n) {
        c->st.flushes++;
        c->st.flushed += n;
    }
    return n;
}

uint64_t sl_rvc_ndirty(const sl_rvc_t *c) { return c->ndirty + c->pending; }

void sl_rvc_stats(const sl_rvc_t *c, sl_rvc_stats_t *out) {
    *out = c->st;
    out->entries = c->n;
    out->dirty = c->ndirty + c->pending;
    out->bytes = c->used;
    out->budget = c->budget;
    out->generations = (uint64_t)c->ngens;
    out->captured_bytes = c->capbytes;
}

/* ------------------------------------------------------------------ */
/* captures                                                            */

sl_rvc_capture_t *sl_rvc_capture(sl_rvc_t *c) {
    sl_rvc_capture_t *cap = sl_calloc(1, sizeof *cap);
    pthread_mutex_init(&cap->mu, NULL);
    cap->seq = ++c->seq;
    c->st.captures++;
    if (c->ndirty) { /* the dirty vector becomes a generation: O(1), no entry touched */
        rvc_gen_t *g = sl_calloc(1, sizeof *g);
        atomic_init(&g->refs, 1);
        g->gen = c->gen;
        g->v = c->dirty;
        g->n = c->ndirty;
        g->sup = c->dsup; /* its first n words are 0 */
        g->pending = g->n;
        c->pending += g->n;
        c->st.captured += g->n;
        if (c->ngens == c->capgens) {
            c->capgens = c->capgens ? c->capgens * 2 : 4;
            c->gens = sl_realloc(c->gens, (size_t)c->capgens * sizeof *c->gens);
        }
        c->gens[c->ngens++] = g;
        /* the next vector starts as large (a large malloc costs no more) */
        c->dirty = sl_malloc(c->capdirty * sizeof *c->dirty);
        c->dsup = sl_malloc(c->capdirty * sizeof *c->dsup);
        c->ndirty = 0;
        if (++c->gen == 0) c->gen = 1; /* (after 2^32 captures; 0 means "none") */
    }
    /* what older generations still hold for this moment */
    cap->gens = sl_malloc((size_t)SL_MAX(c->ngens, 1) * sizeof *cap->gens);
    for (int i = 0; i < c->ngens; i++) {
        rvc_gen_t *g = c->gens[i];
        if (!g->pending) continue;
        atomic_fetch_add_explicit(&g->refs, 1, memory_order_relaxed);
        cap->gens[cap->ngens++] = g;
    }
    return cap;
}

typedef struct rvc_cent {
    const sl_rvc_ent_t *e;
    int gi; /* index of its generation in the capture: larger is newer */
} rvc_cent_t;

static int rvc_cent_cmp(const void *pa, const void *pb) {
    const rvc_cent_t *x = pa, *y = pb;
    const sl_rvc_ent_t *a = x->e, *b = y->e;
    int r = memcmp(a->data, b->data, SL_MIN(a->klen, b->klen));
    if (!r) r = (a->klen > b->klen) - (a->klen < b->klen);
    return r ? r : (y->gi > x->gi) - (y->gi < x->gi); /* newest first */
}

const sl_rvc_ent_t *const *sl_rvc_capture_entries(sl_rvc_capture_t *cap, size_t *n) {
    pthread_mutex_lock(&cap->mu);
    if (!cap->built) {
        size_t total = 0, k = 0;
        for (int gi = 0; gi < cap->ngens; gi++) total += cap->gens[gi]->n;
        rvc_cent_t *v = sl_malloc(SL_MAX(total, (size_t)1) * sizeof *v);
        for (int gi = 0; gi < cap->ngens; gi++) {
            const rvc_gen_t *g = cap->gens[gi];
            for (size_t i = 0; i < g->n; i++) {
                unsigned sup = atomic_load_explicit(&g->sup[i], memory_order_relaxed);
                if (sup == 0 || sup >= cap->seq) v[k++] = (rvc_cent_t){g->v[i], gi};
            }
        }
        if (k > 1) qsort(v, k, sizeof *v, rvc_cent_cmp);
        cap->ents = sl_malloc(SL_MAX(k, (size_t)1) * sizeof *cap->ents);
        size_t m = 0;
        for (size_t i = 0; i < k; i++) {
            const sl_rvc_ent_t *e = v[i].e;
            if (m && cap->ents[m - 1]->klen == e->klen && memcmp(cap->ents[m - 1]->data, e->data, e->klen) == 0)
                continue; /* an older capture of the same key (cannot happen: see above) */
            cap->ents[m++] = e;
        }
        sl_free(v);
        cap->nents = m;
        cap->built = true;
    }
    pthread_mutex_unlock(&cap->mu);
    *n = cap->nents;
    return cap->ents;
}

void sl_rvc_capture_release(sl_rvc_capture_t *cap) {
    if (!cap) return;
    for (int i = 0; i < cap->ngens; i++) rvc_gen_unref(cap->gens[i]);
    sl_free(cap->gens);
    sl_free(cap->ents);
    pthread_mutex_destroy(&cap->mu);
    sl_free(cap);
}

bool sl_rvc_busy(const sl_rvc_t *c) { return c->ngens > 0; }

typedef struct rvc_wb {
    sl_rvc_ent_t *e;
    rvc_gen_t *g;
    size_t i;
} rvc_wb_t;

static int rvc_wb_cmp(const void *pa, const void *pb) {
    const sl_rvc_ent_t *a = ((const rvc_wb_t *)pa)->e, *b = ((const rvc_wb_t *)pb)->e;
    int r = memcmp(a->data, b->data, SL_MIN(a->klen, b->klen));
    return r ? r : (a->klen > b->klen) - (a->klen < b->klen);
}

size_t sl_rvc_step(sl_rvc_t *c, size_t max, sl_rvc_write_cb write, void *ctx) {
    size_t written = 0, looked = 0;
    rvc_wb_t *v = max ? sl_malloc(max * sizeof *v) : NULL;
    for (int gi = 0; gi < c->ngens && written < max && looked < 4 * max; gi++) {
        rvc_gen_t *g = c->gens[gi];
        while (g->pending && g->cursor < g->n && written < max && looked < 4 * max) {
            size_t i = g->cursor++; /* everything before the cursor is settled or about to be */
            looked++;
            if (atomic_load_explicit(&g->sup[i], memory_order_relaxed)) continue;
            v[written++] = (rvc_wb_t){g->v[i], g, i};
        }
    }
    /* in key order, as a flush: RocksDB's memtable inserts a sorted run
     * several times faster */
    if (written > 1) qsort(v, written, sizeof *v, rvc_wb_cmp);
    for (size_t k = 0; k < written; k++) rvc_write_back(c, v[k].g, v[k].i, write, ctx);
    sl_free(v);
    /* Retire what is written back and held by no capture: its entries in
     * the table are ordinary again at once, its copies go a few at a time. */
    size_t freed = 0;
    for (int gi = 0; gi < c->ngens;) {
        rvc_gen_t *g = c->gens[gi];
        if (!g->retiring) {
            if (g->pending || atomic_load_explicit(&g->refs, memory_order_acquire) != 1) {
                gi++;
                continue;
            }
            g->retiring = true;
        }
        while (g->ndet && freed < RVC_FREE_STEP) {
            sl_rvc_ent_t *e = g->det[--g->ndet];
            size_t cost = ent_cost_of(e);
            g->detbytes -= cost;
            c->capbytes -= cost;
            sl_free(e);
            freed++;
        }
        if (g->ndet) break;
        rvc_gen_unref(g); /* the last reference */
        memmove(c->gens + gi, c->gens + gi + 1, (size_t)(c->ngens - gi - 1) * sizeof *c->gens);
        c->ngens--;
    }
    return written;
}
