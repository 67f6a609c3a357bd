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
 */
#include "state/rocksdb_cache.h"

#include <stdlib.h>

#include "common/common.h"

#define RVC_MIN_CAP 64u
#define RVC_MALLOC_OVERHEAD 16u /* estimated allocator bytes per entry */

typedef struct rvc_slot {
    uint64_t hash;
    sl_rvc_ent_t *e; /* NULL: empty */
} rvc_slot_t;

struct sl_rvc {
    rvc_slot_t *slots;
    size_t cap, mask, n;
    size_t hand;
    size_t budget, used; /* used: entries + the slot array */
    sl_rvc_ent_t **dirty;
    size_t ndirty, capdirty;
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
    return c;
}

static void rvc_free_entries(sl_rvc_t *c) {
    for (size_t i = 0; i < c->cap; i++) sl_free(c->slots[i].e);
}

void sl_rvc_free(sl_rvc_t *c) {
    if (!c) return;
    rvc_free_entries(c);
    sl_free(c->slots);
    sl_free(c->dirty);
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

void sl_rvc_mark(sl_rvc_t *c, sl_rvc_ent_t *e, bool dirty) {
    if (dirty == !!(e->flags & SL_RVC_DIRTY)) return;
    if (dirty) {
        if (c->ndirty == c->capdirty) {
            c->capdirty = c->capdirty ? c->capdirty * 2 : 64;
            c->dirty = sl_realloc(c->dirty, c->capdirty * sizeof *c->dirty);
        }
        e->didx = (uint32_t)c->ndirty;
        c->dirty[c->ndirty++] = e;
        e->flags |= SL_RVC_DIRTY;
    } else {
        sl_rvc_ent_t *last = c->dirty[--c->ndirty];
        c->dirty[e->didx] = last;
        last->didx = e->didx;
        e->flags &= ~(uint32_t)SL_RVC_DIRTY;
    }
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
    e->flags = (flags & ~(uint32_t)SL_RVC_DIRTY) | SL_RVC_REF;
    e->pad = 0;
    if (klen) memcpy(e->data, key, klen);
    if (vlen) memcpy(e->data + klen, v, vlen);
    c->slots[i].hash = hash;
    c->slots[i].e = e;
    c->n++;
    c->used += ent_cost(klen, vlen);
    c->st.inserts++;
    if (flags & SL_RVC_DIRTY) sl_rvc_mark(c, e, true);
    return e;
}

sl_rvc_ent_t *sl_rvc_set_value(sl_rvc_t *c, sl_rvc_ent_t *e, const void *v, uint32_t vlen) {
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
    e->flags &= ~(uint32_t)SL_RVC_ABSENT;
    return e;
}

void sl_rvc_set_absent(sl_rvc_t *c, sl_rvc_ent_t *e) {
    SL_UNUSED(c);
    e->vlen = 0;
    e->flags |= SL_RVC_ABSENT;
}

/* Removes the entry in slot i (backward-shift deletion) and frees it. */
static void rvc_remove_at(sl_rvc_t *c, size_t i) {
    sl_rvc_ent_t *e = c->slots[i].e;
    if (e->flags & SL_RVC_DIRTY) sl_rvc_mark(c, e, false);
    c->used -= ent_cost(e->klen, e->vcap);
    sl_free(e);
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
            e->flags &= ~(uint32_t)SL_RVC_REF;
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
        rvc_remove_at(c, c->hand); /* the hand looks at this slot again */
    }
    return written;
}

static int rvc_key_cmp(const void *pa, const void *pb) {
    const sl_rvc_ent_t *a = *(sl_rvc_ent_t *const *)pa, *b = *(sl_rvc_ent_t *const *)pb;
    int r = memcmp(a->data, b->data, SL_MIN(a->klen, b->klen));
    return r ? r : (a->klen > b->klen) - (a->klen < b->klen);
}

uint64_t sl_rvc_flush(sl_rvc_t *c, sl_rvc_write_cb write, void *ctx) {
    uint64_t n = c->ndirty;
    /* In key order: RocksDB's memtable inserts a sorted run faster (its
     * skip list reuses the last insert position), and the batch is the
     * synchronous phase of a checkpoint. */
    if (n > 1) qsort(c->dirty, c->ndirty, sizeof *c->dirty, rvc_key_cmp);
    for (size_t i = 0; i < c->ndirty; i++) {
        sl_rvc_ent_t *e = c->dirty[i];
        write(ctx, e);
        e->flags &= ~(uint32_t)SL_RVC_DIRTY;
        if (e->flags & SL_RVC_ABSENT)
            e->flags &= ~(uint32_t)SL_RVC_IN_DB;
        else
            e->flags |= SL_RVC_IN_DB;
    }
    c->ndirty = 0;
    if (n) {
        c->st.flushes++;
        c->st.flushed += n;
    }
    return n;
}

uint64_t sl_rvc_ndirty(const sl_rvc_t *c) { return c->ndirty; }

void sl_rvc_stats(const sl_rvc_t *c, sl_rvc_stats_t *out) {
    *out = c->st;
    out->entries = c->n;
    out->dirty = c->ndirty;
    out->bytes = c->used;
    out->budget = c->budget;
}
