/*
 * heap_backend.c — the heap keyed state backend (Flink's HeapKeyedStateBackend).
 *
 * Layout.  backend -> states[sid] -> tabs[kg - range.start]: one hash table
 * per (state, key group in range).  Snapshots, restores and rescaling all
 * work by key group, so each key group has its own table: later work can
 * write, load, drop or hand over one key group without touching the others.
 * It also bounds the pause of a table doubling to one key group's share of
 * the state, which is why plain amortized doubling is enough here.
 *
 * Tables are flat: open addressing over an array of fixed-size cells, and
 * an entry lives in its cell — a 16-byte header {tag, klen + 1, nslen, vlen}
 * followed by the key bytes, namespace bytes, padding to 8 and the value.
 * A lookup therefore touches one cache line or a few adjacent ones: the
 * windowed-aggregation hot path (get_mut per record) costs one cache miss.
 * Linear probing with backward-shift deletion (no tombstones), power-of-two
 * capacity, load at most 13/16; the home cell comes from the 32-bit tag
 * (tag * golden ratio, top bits), so growth never rehashes keys.  Robin
 * hood was measured and lost: ~15% slower hits with 100K random keys (more
 * entries a cell or two away from home), ~25% with its early exit for
 * absent keys.  The price of plain linear probing is its tail: a few keys
 * sit far from home (134 cells was the worst seen at load 0.76 in 1024-cell
 * tables), i.e. ~100 ns instead of ~20 ns for such a key when cached.
 *
 * Cell size (stride) is per table: at creation, the first entry's size; at
 * each doubling, the largest entry size asked for since (capped at
 * HB_CELL_MAX).  An entry that does not fit its cell is "spilled": its cell
 * keeps the header and a pointer to an out-of-line block holding key, ns
 * and value (hb_big_t) — long lists, large values, big keys.  A doubling
 * with a larger stride brings spilled entries that now fit back inline.
 *
 * Values are 8-byte aligned.  Any call that modifies a state may move that
 * state's entries in the key group it touches (growth, deletion shifts,
 * spilling), so pointers from get/get_mut are valid until the next
 * modifying call, as the interface says.  Inputs that point
 * into the table being changed (a value copied from another entry, a list
 * re-built from its own elements) are handled: they are staged first.
 *
 * Hash of (current key, ns).  sl_kb_set_key hashes the key once
 * (b->keyhash); each call here hashes only the namespace, and only when it
 * is not empty: h = keyhash mixed with the ns bytes (hb_hash_with: inline
 * for namespaces up to 16 bytes, xxh3 beyond), or keyhash when nslen = 0;
 * tag = high ^ low 32 bits of h (the low bits of keyhash alone are the same
 * for every key of a key group when max parallelism is a power of two).
 *
 * Kinds.
 *   VALUE  the value bytes.  get_mut with a length different from the
 *          stored one resizes the value (keeping the common prefix,
 *          zero-filling the rest).
 *   LIST   the value is a run of elements [u32 len][u32 0][len bytes][zero
 *          pad to 8]; capacity doubles on append (spilled), so list_add is
 *          amortized O(element).  Element pointers are 8-byte aligned.
 *   MAP    the value holds an hb_tab_t: a nested table of the same kind
 *          mapping user key -> value (klen = user-key length, nslen = 0,
 *          tag from hb_hash_with(user key)).  Removing the last user key
 *          removes the (key, ns) entry.  map_foreach order is the nested table's cell
 *          order (unspecified, as in Flink).
 *
 * Costs: get/get_mut/put/remove O(1) expected; list_add amortized
 * O(element); list_foreach/map_foreach O(size); foreach_entry O(cells of the
 * range); count O(1).
 *
 * Return values: put/list_add/list_replace/map_put return 0; remove and
 * map_remove return 1 when something was removed, 0 when not; every call
 * returns SL_EINVAL (or NULL) for an unknown state id or a state of another
 * kind.
 *
 * Snapshots: copy-on-write by (state, key group) table.  The unit of
 * sharing is a key group's whole table — its cells, its spilled blocks and,
 * for a map state, the nested tables with their spilled blocks — held by a
 * "shell" {atomic refs, kind, a copy of the hb_tab_t}.
 *
 *   snapshot()  for each (state, key group) with entries: if the table is
 *               not shared yet, a shell with refs = 2 (the table and the
 *               snapshot) and t->cow = 1; if it is (an earlier snapshot is
 *               still out), refs + 1 on its shell.  No entry is read or
 *               copied: O(states x key groups) small steps.
 *   a write     (get_mut, put, remove, list_add, list_replace, map_put,
 *               map_remove, restore) to a table with t->cow first unshares
 *               it: if the shell's refs is 1 every snapshot of it is gone,
 *               so the table takes its storage back (frees the shell, no
 *               copy); otherwise it deep-copies the key group's table
 *               (cells memcpy, each spilled block and nested map table
 *               copied) and drops its reference at the end of the call
 *               (the call's inputs may point into the shared storage).
 *               So the first write to a key group after a checkpoint pays
 *               one copy of that key group's share of the state, once per
 *               checkpoint; other key groups are not touched.
 *   reads       (get, list_foreach, map_*, foreach_entry, prefetch) of a
 *               shared table read the shared storage: nothing is written.
 *   release     drops the snapshot's reference on each shell; the last
 *               holder (the snapshot, or the table when it copied or was
 *               destroyed) frees the storage the shell describes.
 * The hot path pays one test of t->cow, in the hb_tab_t it loads anyway.
 * Shared storage is immutable: only the thread that holds the last
 * reference frees it, and the table writes to it again only after seeing
 * refs == 1 with acquire order, which pairs with the release order of the
 * snapshot's decrement — so snapshot_write on another thread never races
 * with the task.
 *
 * TTL (state_backend.h, ttl.h).  A state registered with ttl_ms > 0 holds
 * a timestamp in front of every value, list element and map value; the
 * accessor layer (ttl.c) writes and checks it.  Here:
 *   snapshot()        captures the clock (sl_kb_now_ms) once;
 *   snapshot_write    leaves out what had expired at that time (Flink's
 *                     full-snapshot cleanup): expired values, list elements
 *                     and map entries, and entries with nothing left;
 *   incremental       sl_heap_backend_ttl_cleanup examines a few entries a
 *                     call from a cursor per state (key group, cell) that
 *                     walks every key group in turn, so expired state goes
 *                     away without anyone touching its key again; a removal
 *                     unshares a table held by a snapshot like any write.
 *                     Each round of the cursor also finds the state's least
 *                     timestamp (its floor): until the floor expires no call
 *                     scans anything, so a state whose keys are all fresh
 *                     pays one comparison per access;
 *   restore           keeps the timestamps (they are part of the bytes).  A
 *                     state a restore registers on the fly has no TTL until
 *                     it is declared (register_state), which sets it.
 * The TTL and the cursor live in hb->ttl[sid], off the hot path.
 *
 * Memory (sl_heap_backend_memory, the stateMemoryBytes metric).  hb->mem
 * counts the bytes of live storage — each state's table array, every
 * table's cells, spilled blocks and nested map tables — adjusted where
 * they are allocated and freed (the table functions take the counter as
 * `mem`), so a report costs nothing.  Copy-on-write keeps it exact without
 * a walk: a table's copy has the same sizes as the storage it leaves to
 * the snapshot, and storage freed through a shell (no longer live) is not
 * counted (mem NULL).  sl_heap_backend_memory_walk computes the same by
 * walking, for tests.
 */
#include <assert.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/common.h"
#include "state/state_backend.h"
#include "state/ttl.h"

/* ------------------------------------------------------------------ */
/* cells                                                               */

typedef struct hb_cell {
    uint32_t tag;
    uint32_t klen1; /* key length + 1; 0 marks an empty cell */
    uint32_t nslen; /* namespace length, | HB_SPILL when out of line */
    uint32_t vlen;  /* value length */
    uint8_t data[]; /* inline: key, ns, pad to 8, value.  spilled: hb_big_t * */
} hb_cell_t;

/* A spilled entry: key, ns, pad to 8, value (vcap bytes). */
typedef struct hb_big {
    uint32_t vcap, pad;
    uint8_t data[];
} hb_big_t;

_Static_assert(sizeof(hb_cell_t) == 16 && sizeof(hb_big_t) == 8, "headers keep values 8-byte aligned");

#define HB_HDR 16u
#define HB_SPILL 0x80000000u
#define HB_CELL_MIN 24u  /* header + a pointer */
#define HB_CELL_MAX 144u /* entries needing more are spilled */
#define HB_MINCAP 8u
#define HB_GOLDEN32 0x9E3779B1u

static inline size_t hb_pad8(size_t n) { return (n + 7) & ~(size_t)7; }
/* Bytes a cell needs to hold (klen, nslen, vcap) inline. */
static inline size_t hb_need(uint32_t klen, uint32_t nslen, uint32_t vcap) {
    return HB_HDR + hb_pad8((size_t)klen + nslen) + hb_pad8(vcap);
}

static inline uint32_t hb_klen(const hb_cell_t *c) { return c->klen1 - 1; }
static inline uint32_t hb_nslen(const hb_cell_t *c) { return c->nslen & ~HB_SPILL; }
static inline bool hb_spilled(const hb_cell_t *c) { return (c->nslen & HB_SPILL) != 0; }
static inline size_t hb_kn(const hb_cell_t *c) { return hb_pad8((size_t)hb_klen(c) + hb_nslen(c)); }
static inline hb_big_t *hb_big(const hb_cell_t *c) {
    hb_big_t *p;
    memcpy(&p, c->data, sizeof p);
    return p;
}
/* Key bytes (followed by the namespace bytes, then the value). */
static inline uint8_t *hb_kbytes(hb_cell_t *c) { return hb_spilled(c) ? hb_big(c)->data : c->data; }
static inline uint8_t *hb_cval(hb_cell_t *c) { return hb_kbytes(c) + hb_kn(c); }

/* Memory accounting (sl_heap_backend_memory): every allocation and free of
 * live storage (cells, spilled blocks, nested map tables) adds to or takes
 * from the backend's counter, passed down as `mem`.  NULL: storage that is
 * no longer live (a shell a snapshot frees) is not counted. */
static inline void hb_acct(int64_t *mem, int64_t d) {
    if (mem) *mem += d;
}
/* Bytes of a spilled block holding (klen, nslen) and vcap value bytes. */
static inline int64_t hb_big_bytes_for(size_t kn, uint32_t vcap) { return (int64_t)(8 + kn + hb_pad8(vcap)); }
static inline int64_t hb_big_bytes(const hb_cell_t *c) { return hb_big_bytes_for(hb_kn(c), hb_big(c)->vcap); }

/* Equality of short byte strings without a call (keys and namespaces are
 * mostly 4 to 16 bytes). */
static inline bool hb_eq(const uint8_t *a, const uint8_t *b, uint32_t n) {
    if (n >= 8 && n <= 16) return ((sl_ld64(a) ^ sl_ld64(b)) | (sl_ld64(a + n - 8) ^ sl_ld64(b + n - 8))) == 0;
    if (n >= 4 && n < 8) return ((sl_ld32(a) ^ sl_ld32(b)) | (sl_ld32(a + n - 4) ^ sl_ld32(b + n - 4))) == 0;
    return n == 0 || memcmp(a, b, n) == 0;
}

/* ------------------------------------------------------------------ */
/* tables                                                              */

typedef struct hb_tab {
    uint8_t *cells;  /* (mask + 1) * stride bytes; NULL while empty */
    uint32_t mask;   /* capacity - 1 */
    uint32_t n;      /* entries */
    uint32_t stride; /* bytes per cell, a multiple of 8 */
    uint32_t want;   /* largest inline size asked for (<= HB_CELL_MAX) */
    uint32_t shift;  /* 32 - log2(capacity) */
    uint32_t cow;    /* 1: shared with a snapshot (a key group's table; never a map's inner table) */
} hb_tab_t;

_Static_assert(sizeof(hb_tab_t) == 32, "the cow flag lives in what was padding: map entries keep their size");

static inline hb_cell_t *hb_cell(const hb_tab_t *t, uint32_t i) {
    return (hb_cell_t *)(void *)(t->cells + (size_t)i * t->stride);
}
static inline uint32_t hb_home(const hb_tab_t *t, uint32_t tag) { return (tag * HB_GOLDEN32) >> t->shift; }
static inline uint32_t hb_dist(const hb_tab_t *t, uint32_t i, uint32_t tag) { return (i - hb_home(t, tag)) & t->mask; }
static inline uint32_t hb_vcap(const hb_tab_t *t, hb_cell_t *c) {
    return hb_spilled(c) ? hb_big(c)->vcap : t->stride - HB_HDR - (uint32_t)hb_kn(c);
}
/* True when one more entry would push the load past 13/16: the next insert
 * doubles the table. */
static inline bool hb_full(const hb_tab_t *t) { return (uint64_t)(t->n + 1) * 16 > (uint64_t)(t->mask + 1) * 13; }
static inline void hb_note_need(hb_tab_t *t, size_t need) {
    if (need <= HB_CELL_MAX && need > t->want) t->want = (uint32_t)need;
}

/* The cell holding (k, ns) with this tag, or NULL. */
static inline hb_cell_t *hb_tab_find(const hb_tab_t *t, uint32_t tag, const void *k, uint32_t klen, const void *ns,
                                     uint32_t nslen) {
    if (SL_UNLIKELY(!t->cells)) return NULL;
    for (uint32_t i = hb_home(t, tag);; i = (i + 1) & t->mask) {
        hb_cell_t *c = hb_cell(t, i);
        if (!c->klen1) return NULL;
        if (c->tag == tag && c->klen1 == klen + 1 && hb_nslen(c) == nslen) {
            const uint8_t *kb = hb_kbytes(c);
            if (hb_eq(kb, k, klen) && hb_eq(kb + klen, ns, nslen)) return c;
        }
    }
}

/* Copies the cell image `cur` (stride bytes) into the first free cell of
 * its probe sequence; returns that cell. */
static hb_cell_t *hb_place(hb_tab_t *t, const unsigned char *cur) {
    uint32_t tag;
    memcpy(&tag, cur, sizeof tag);
    uint32_t i = hb_home(t, tag);
    while (hb_cell(t, i)->klen1) i = (i + 1) & t->mask;
    hb_cell_t *c = hb_cell(t, i);
    memcpy(c, cur, t->stride);
    return c;
}

/* Reallocates the cells (cap, and the stride grown to t->want) and
 * re-places every entry; spilled entries that now fit come back inline. */
static void hb_tab_grow(hb_tab_t *t, uint32_t cap, int64_t *mem) {
    uint8_t *old = t->cells;
    uint32_t oldcap = old ? t->mask + 1 : 0, oldstride = t->stride;
    uint32_t stride = SL_MAX(SL_MAX(t->stride, t->want), HB_CELL_MIN);
    unsigned bits = 0;
    while ((1u << bits) < cap) bits++;
    t->cells = sl_calloc(cap, stride);
    hb_acct(mem, (int64_t)cap * stride - (int64_t)oldcap * oldstride);
    t->mask = cap - 1;
    t->shift = 32 - bits;
    t->stride = stride;
    _Alignas(8) unsigned char buf[HB_CELL_MAX];
    for (uint32_t i = 0; i < oldcap; i++) {
        hb_cell_t *c = (hb_cell_t *)(void *)(old + (size_t)i * oldstride);
        if (!c->klen1) continue;
        memset(buf, 0, stride);
        size_t kn = hb_kn(c);
        if (!hb_spilled(c)) {
            memcpy(buf, c, HB_HDR + kn + c->vlen);
        } else if (hb_need(hb_klen(c), hb_nslen(c), c->vlen) <= stride) { /* fits now: back inline */
            hb_big_t *big = hb_big(c);
            hb_cell_t hdr = *c;
            hdr.nslen &= ~HB_SPILL;
            memcpy(buf, &hdr, HB_HDR);
            memcpy(buf + HB_HDR, big->data, kn + c->vlen);
            hb_acct(mem, -hb_big_bytes(c));
            sl_free(big);
        } else {
            memcpy(buf, c, HB_HDR + sizeof(hb_big_t *));
        }
        hb_place(t, buf);
    }
    sl_free(old);
}

/* Inserts a new entry for (k, ns), which is not present, with room for
 * vcap value bytes (vlen = 0, value uninitialized); returns its cell.  When
 * t doubles every cell moves: k and ns must not point into t (hb_stage). */
static hb_cell_t *hb_tab_insert(hb_tab_t *t, uint32_t tag, const void *k, uint32_t klen, const void *ns,
                                uint32_t nslen, uint32_t vcap, int64_t *mem) {
    size_t need = hb_need(klen, nslen, vcap);
    hb_note_need(t, need);
    if (!t->cells) hb_tab_grow(t, HB_MINCAP, mem);
    else if (hb_full(t)) {
        if (t->mask >= (1u << 30) - 1) {
            fprintf(stderr, "sluice: heap state table of one key group is full\n");
            abort();
        }
        hb_tab_grow(t, (t->mask + 1) * 2, mem);
    }
    _Alignas(8) unsigned char buf[HB_CELL_MAX];
    hb_cell_t hdr = {tag, klen + 1, nslen, 0};
    memset(buf, 0, t->stride);
    uint8_t *kb = buf + HB_HDR;
    size_t kn = hb_pad8((size_t)klen + nslen);
    if (need > t->stride) {
        hb_big_t *big = sl_malloc(sizeof *big + kn + hb_pad8(vcap));
        hb_acct(mem, hb_big_bytes_for(kn, vcap));
        big->vcap = vcap;
        big->pad = 0;
        memcpy(buf + HB_HDR, &big, sizeof big);
        hdr.nslen |= HB_SPILL;
        kb = big->data;
        memset(kb + klen + nslen, 0, kn - klen - nslen);
    }
    memcpy(buf, &hdr, HB_HDR);
    if (klen) memcpy(kb, k, klen);
    if (nslen) memcpy(kb + klen, ns, nslen);
    t->n++;
    return hb_place(t, buf);
}

/* Growing an entry past its cell, in two steps so that the caller can copy
 * from the old storage (which may be where its input points): begin makes
 * the out-of-line block (vcap bytes of value, the first `keep` copied),
 * end frees the old storage and points the cell at the block. */
static hb_big_t *hb_spill_begin(hb_tab_t *t, hb_cell_t *c, uint32_t vcap, uint32_t keep, int64_t *mem) {
    size_t kn = hb_kn(c);
    hb_big_t *nb = sl_malloc(sizeof *nb + kn + hb_pad8(vcap));
    hb_acct(mem, hb_big_bytes_for(kn, vcap));
    nb->vcap = vcap;
    nb->pad = 0;
    memcpy(nb->data, hb_kbytes(c), kn + keep);
    hb_note_need(t, hb_need(hb_klen(c), hb_nslen(c), vcap));
    return nb;
}
static inline uint8_t *hb_big_val(hb_cell_t *c, hb_big_t *nb) { return nb->data + hb_kn(c); }
static void hb_spill_end(hb_cell_t *c, hb_big_t *nb, int64_t *mem) {
    if (hb_spilled(c)) {
        hb_acct(mem, -hb_big_bytes(c));
        sl_free(hb_big(c));
    }
    memcpy(c->data, &nb, sizeof nb);
    c->nslen |= HB_SPILL;
}

static void hb_tab_free_all(hb_tab_t *t, sl_state_kind_t kind, int64_t *mem);

static inline hb_tab_t *hb_inner(hb_cell_t *c) { return (hb_tab_t *)(void *)hb_cval(c); }

/* Removes the entry in cell c and frees what it owns. */
static void hb_tab_remove_at(hb_tab_t *t, hb_cell_t *c, sl_state_kind_t kind, int64_t *mem) {
    if (kind == SL_STATE_MAP) hb_tab_free_all(hb_inner(c), SL_STATE_VALUE, mem);
    if (hb_spilled(c)) {
        hb_acct(mem, -hb_big_bytes(c));
        sl_free(hb_big(c));
    }
    uint32_t i = (uint32_t)(((uint8_t *)c - t->cells) / t->stride);
    for (uint32_t j = i;;) {
        j = (j + 1) & t->mask;
        hb_cell_t *cj = hb_cell(t, j);
        if (!cj->klen1) break;
        /* The entry at j may fill the hole at i unless its home lies
         * cyclically in (i, j]. */
        if (hb_dist(t, j, cj->tag) >= ((j - i) & t->mask)) {
            memcpy(hb_cell(t, i), cj, t->stride);
            i = j;
        }
    }
    memset(hb_cell(t, i), 0, HB_HDR);
    if (--t->n == 0) hb_tab_free_all(t, kind, mem);
}

/* Frees everything the table owns; leaves it empty. */
static void hb_tab_free_all(hb_tab_t *t, sl_state_kind_t kind, int64_t *mem) {
    for (uint32_t i = 0; t->cells && i <= t->mask; i++) {
        hb_cell_t *c = hb_cell(t, i);
        if (!c->klen1) continue;
        if (kind == SL_STATE_MAP) hb_tab_free_all(hb_inner(c), SL_STATE_VALUE, mem);
        if (hb_spilled(c)) {
            hb_acct(mem, -hb_big_bytes(c));
            sl_free(hb_big(c));
        }
    }
    if (t->cells) hb_acct(mem, -(int64_t)(t->mask + 1) * t->stride);
    sl_free(t->cells);
    memset(t, 0, sizeof *t);
}

/* Bytes the table's storage takes (cells, spilled blocks, nested map
 * tables), by a walk: what the accounting adds up without one. */
static int64_t hb_tab_bytes(const hb_tab_t *t, sl_state_kind_t kind) {
    if (!t->cells) return 0;
    int64_t n = (int64_t)(t->mask + 1) * t->stride;
    for (uint32_t i = 0; i <= t->mask; i++) {
        hb_cell_t *c = hb_cell(t, i);
        if (!c->klen1) continue;
        if (hb_spilled(c)) n += hb_big_bytes(c);
        if (kind == SL_STATE_MAP) n += hb_tab_bytes(hb_inner(c), SL_STATE_VALUE);
    }
    return n;
}

/* Sets the value of the entry in cell c to v (vlen bytes; v may point into
 * the entry itself).  The entry stays in its cell. */
static void hb_cell_set(hb_tab_t *t, hb_cell_t *c, const void *v, uint32_t vlen, int64_t *mem) {
    uint8_t *val = hb_cval(c);
    if (v == val && vlen == c->vlen) return; /* put after get_mut: nothing to do */
    if (vlen <= hb_vcap(t, c)) {
        if (vlen) memmove(val, v, vlen);
    } else {
        hb_big_t *nb = hb_spill_begin(t, c, vlen, 0, mem);
        memcpy(hb_big_val(c, nb), v, vlen);
        hb_spill_end(c, nb, mem);
    }
    c->vlen = vlen;
}

/* Staging of an input for an insert into t.  An insert that doubles t
 * moves every cell and may free spilled blocks (entries coming back
 * inline), so then every input is copied first — doubling costs O(n)
 * anyway.  Any other insert only fills a free cell. */
typedef struct hb_stage {
    uint64_t small[16];
    void *heap;
} hb_stage_t;

static const void *hb_stage(hb_stage_t *st, const hb_tab_t *t, const void *p, size_t n) {
    st->heap = NULL;
    if (!t->cells || !n || !hb_full(t)) return p;
    void *dst = n <= sizeof st->small ? (void *)st->small : (st->heap = sl_malloc(n));
    memcpy(dst, p, n);
    return dst;
}

/* ------------------------------------------------------------------ */
/* the backend                                                         */

/* Storage of one key group's table shared between the live table and
 * snapshots (see the header comment). */
typedef struct hb_shell {
    atomic_int refs;      /* the live table while its cow flag is set, plus each snapshot */
    sl_state_kind_t kind;
    hb_tab_t tab;         /* the table at its first snapshot; immutable while shared */
} hb_shell_t;

typedef struct hb_state {
    char *name;
    sl_state_kind_t kind;
    int64_t count;        /* (key, ns) entries over all key groups */
    hb_tab_t *tabs;       /* [nkg], index kg - range.start; followed in the same
                           * block by [nkg] hb_shell_t *: the shell of tabs[i]
                           * while tabs[i].cow (hb_shells) — out of this struct
                           * so that it stays 32 bytes on the hot path */
} hb_state_t;

_Static_assert(sizeof(hb_state_t) == 32, "states are indexed on every call");

/* TTL of a state and the cursor of its incremental cleanup; kept apart
 * from hb_state_t, which the hot path indexes. */
typedef struct hb_ttl {
    int64_t ttl_ms;       /* 0: no TTL */
    sl_ttl_update_t update;
    bool restored;        /* registered on the fly by a restore, not declared yet: the next
                           * register_state of its name sets the TTL */
    int8_t items;         /* its items carry the TTL timestamp: SL_KBF_TTL_IS_YES / _NO /
                           * _UNKNOWN (restored from a version-1 block, not declared yet) */
    int cur_kg;           /* cleanup cursor: key group index, */
    uint32_t cur_cell;    /* and cell in its table */
    int64_t sweep_start;  /* time the cursor last started at key group 0 (INT64_MIN: not yet) */
    int64_t sweep_min;    /* least timestamp the cursor met since then */
    int64_t floor;        /* least timestamp of the state when the cursor last came round (INT64_MIN:
                           * unknown): while floor + ttl > now nothing can have expired */
} hb_ttl_t;

typedef struct hb_backend {
    sl_keyed_backend_t base; /* first: the ops receive &base */
    hb_state_t *states;
    hb_ttl_t *ttl;           /* [capstates], parallel to states */
    int nstates, capstates;
    int nkg;
    sl_heap_cow_stats_t stats;
    int64_t mem;             /* bytes of live storage (sl_heap_backend_memory); task thread */
} hb_backend_t;

#define HB_MEM(b) (&((hb_backend_t *)(b))->mem)

/* The state sid if it exists and is of this kind, else NULL. */
static inline hb_state_t *hb_state(sl_keyed_backend_t *b, int sid, sl_state_kind_t kind) {
    hb_backend_t *hb = (hb_backend_t *)b;
    if (SL_UNLIKELY((unsigned)sid >= (unsigned)hb->nstates)) return NULL;
    hb_state_t *st = &hb->states[sid];
    return SL_LIKELY(st->kind == kind) ? st : NULL;
}

/* The current key's table of state st. */
static inline hb_tab_t *hb_cur_tab(sl_keyed_backend_t *b, hb_state_t *st) {
    assert(b->kg >= b->range.start && b->kg < b->range.end && "sl_kb_set_key not called");
    return &st->tabs[b->kg - b->range.start];
}

static inline uint32_t hb_tag_of(uint64_t h) { return (uint32_t)(h >> 32) ^ (uint32_t)h; }

/* seed mixed with the hash of bytes p[0..n).  Inline for the usual short
 * namespaces and user keys (a window is 16 bytes): two multiplications and
 * a finalizer instead of a call to xxh3.  These hashes live only in memory
 * (unlike the key-group hash they may change between versions). */
static inline uint64_t hb_hash_with(uint64_t seed, const void *p, uint32_t n) {
    const uint8_t *s = p;
    uint64_t a, c;
    if (n >= 8 && n <= 16) {
        a = sl_ld64(s);
        c = sl_ld64(s + n - 8);
    } else if (n >= 4 && n < 8) {
        a = sl_ld32(s);
        c = sl_ld32(s + n - 4);
    } else if (n > 0 && n < 4) {
        a = (uint64_t)s[0] | (uint64_t)s[n / 2] << 8 | (uint64_t)s[n - 1] << 16;
        c = 0;
    } else if (n == 0) {
        a = c = 0;
    } else {
        return sl_mix64(seed ^ sl_hash_bytes(p, n));
    }
    return sl_mix64(seed ^ (a * 0x9E3779B97F4A7C15ULL) ^ ((c + n) * 0xC2B2AE3D27D4EB4FULL));
}

/* The tag of (key with hash keyhash, ns): the one function lookups and
 * prefetch hints both use. */
static inline uint32_t hb_tag_for(uint64_t keyhash, const void *ns, uint32_t nslen) {
    return hb_tag_of(nslen ? hb_hash_with(keyhash, ns, nslen) : keyhash);
}

static inline uint32_t hb_tag(const sl_keyed_backend_t *b, const void *ns, uint32_t nslen) {
    return hb_tag_for(b->keyhash, ns, nslen);
}

static inline hb_cell_t *hb_find_cur(sl_keyed_backend_t *b, hb_tab_t *t, uint32_t tag, const void *ns,
                                     uint32_t nslen) {
    return hb_tab_find(t, tag, b->key, b->keylen, ns, nslen);
}

/* ------------------------------------------------------------------ */
/* copy-on-write                                                       */

/* Makes dst a deep copy of src (cells, spilled blocks, nested map tables);
 * adds the bytes allocated to *bytes.  src is only read. */
static void hb_tab_clone(hb_tab_t *dst, const hb_tab_t *src, sl_state_kind_t kind, uint64_t *bytes) {
    *dst = *src;
    dst->cow = 0;
    if (!src->cells) return;
    size_t sz = ((size_t)src->mask + 1) * src->stride;
    dst->cells = sl_malloc(sz);
    memcpy(dst->cells, src->cells, sz);
    *bytes += sz;
    for (uint32_t i = 0; i <= dst->mask; i++) {
        hb_cell_t *c = hb_cell(dst, i);
        if (!c->klen1) continue;
        if (hb_spilled(c)) {
            const hb_big_t *ob = hb_big(c);
            size_t kn = hb_kn(c), bsz = sizeof *ob + kn + hb_pad8(ob->vcap);
            hb_big_t *nb = sl_malloc(bsz);
            memcpy(nb, ob, sizeof *ob + kn + c->vlen); /* the rest of the capacity is unused */
            memcpy(c->data, &nb, sizeof nb);
            *bytes += bsz;
        }
        if (kind == SL_STATE_MAP) {
            hb_tab_t *in = hb_inner(c), old = *in;
            hb_tab_clone(in, &old, SL_STATE_VALUE, bytes);
        }
    }
}

/* The shells of st's tables ([nkg], after the tables). */
static inline hb_shell_t **hb_shells(const hb_backend_t *hb, const hb_state_t *st) {
    return (hb_shell_t **)(void *)(st->tabs + hb->nkg);
}

/* Drops one reference on a shell; the last one frees the storage it
 * describes.  Any thread.  NULL: nothing. */
static void hb_shell_drop(hb_shell_t *sh) {
    if (!sh) return;
    if (atomic_fetch_sub_explicit(&sh->refs, 1, memory_order_acq_rel) == 1) {
        hb_tab_free_all(&sh->tab, sh->kind, NULL); /* no longer live: not counted */
        sl_free(sh);
    }
}

/* Makes table kgi of st private before a write (st->tabs[kgi].cow is set).
 * Returns the shell whose reference the caller drops (hb_shell_drop) when
 * its call is over — its inputs may point into the shared storage — or
 * NULL when the table took its storage back without a copy. */
static __attribute__((noinline, cold)) hb_shell_t *hb_unshare(hb_backend_t *hb, hb_state_t *st, int kgi) {
    hb_tab_t *t = &st->tabs[kgi];
    hb_shell_t *sh = hb_shells(hb, st)[kgi];
    assert(t->cow && sh && sh->tab.cells == t->cells);
    hb_shells(hb, st)[kgi] = NULL;
    if (atomic_load_explicit(&sh->refs, memory_order_acquire) == 1) {
        /* Every snapshot released it: ours again, as it is. */
        t->cow = 0;
        sl_free(sh);
        hb->stats.cow_reclaimed++;
        return NULL;
    }
    hb_tab_clone(t, &sh->tab, st->kind, &hb->stats.cow_bytes);
    hb->stats.cow_copies++;
    return sh;
}

static inline hb_shell_t *hb_unshare_cur(sl_keyed_backend_t *b, hb_state_t *st) {
    return hb_unshare((hb_backend_t *)b, st, b->kg - b->range.start);
}

static int hb_find_state(const hb_backend_t *hb, const char *name, size_t namelen) {
    for (int i = 0; i < hb->nstates; i++)
        if (strlen(hb->states[i].name) == namelen && memcmp(hb->states[i].name, name, namelen) == 0) return i;
    return -1;
}

static int hb_add_state(hb_backend_t *hb, const char *name, size_t namelen, sl_state_kind_t kind, int64_t ttl_ms,
                        sl_ttl_update_t update, bool restored, int items) {
    if (hb->nstates == hb->capstates) {
        hb->capstates = hb->capstates ? hb->capstates * 2 : 4;
        hb->states = sl_realloc(hb->states, (size_t)hb->capstates * sizeof *hb->states);
        hb->ttl = sl_realloc(hb->ttl, (size_t)hb->capstates * sizeof *hb->ttl);
    }
    hb_state_t *st = &hb->states[hb->nstates];
    st->name = sl_strndup(name, namelen);
    st->kind = kind;
    st->count = 0;
    st->tabs = sl_calloc((size_t)hb->nkg, sizeof *st->tabs + sizeof(hb_shell_t *)); /* tables, then shells */
    hb->mem += (int64_t)hb->nkg * (int64_t)(sizeof *st->tabs + sizeof(hb_shell_t *));
    hb->ttl[hb->nstates] = (hb_ttl_t){.ttl_ms = ttl_ms, .update = update, .restored = restored,
                                      .items = (int8_t)(restored ? items : ttl_ms > 0),
                                      .sweep_start = INT64_MIN, .sweep_min = INT64_MAX, .floor = INT64_MIN};
    return hb->nstates++;
}

/* A name registered again: the same id when kind and TTL agree (a state
 * that a restore registered on the fly takes the TTL it is declared with;
 * when its items have (or lack) the timestamp that TTL wants, they are
 * migrated first: sl_kb_ttl_migrate). */
static int hb_register_state(sl_keyed_backend_t *b, const sl_state_desc_t *d) {
    hb_backend_t *hb = (hb_backend_t *)b;
    if (!d || !d->name || !d->name[0] || (int)d->kind < SL_STATE_VALUE || d->kind > SL_STATE_MAP || d->ttl_ms < 0 ||
        (int)d->ttl_update < SL_TTL_ON_CREATE_AND_WRITE || d->ttl_update > SL_TTL_ON_READ_AND_WRITE)
        return SL_EINVAL;
    sl_ttl_update_t update = d->ttl_ms > 0 ? d->ttl_update : SL_TTL_ON_CREATE_AND_WRITE;
    int i = hb_find_state(hb, d->name, strlen(d->name));
    if (i < 0) return hb_add_state(hb, d->name, strlen(d->name), d->kind, d->ttl_ms, update, false, 0);
    if (hb->states[i].kind != d->kind) return SL_EINVAL;
    hb_ttl_t *tt = &hb->ttl[i];
    if (tt->restored) {
        bool want = d->ttl_ms > 0;
        /* migrated while the state has no TTL here, so nothing filters its
         * items by a timestamp they lack (or no longer have) */
        tt->ttl_ms = 0;
        if (tt->items != SL_KBF_TTL_IS_UNKNOWN && (tt->items == SL_KBF_TTL_IS_YES) != want) {
            int rc = sl_kb_ttl_migrate(b, i, d->kind, want, sl_kb_now_ms(b));
            if (rc < 0) return rc;
        }
        tt->items = want ? SL_KBF_TTL_IS_YES : SL_KBF_TTL_IS_NO;
        tt->ttl_ms = d->ttl_ms;
        tt->update = update;
        tt->restored = false;
    }
    return tt->ttl_ms == d->ttl_ms && tt->update == update ? i : SL_EINVAL;
}

/* ---- VALUE ---- */

static const void *hb_get(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, uint32_t *vlen) {
    hb_state_t *st = hb_state(b, sid, SL_STATE_VALUE);
    if (!st) return NULL;
    hb_cell_t *c = hb_find_cur(b, hb_cur_tab(b, st), hb_tag(b, ns, nslen), ns, nslen);
    if (!c) return NULL;
    if (vlen) *vlen = c->vlen;
    return hb_cval(c);
}

static void *hb_get_mut_cow(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, uint32_t vlen,
                            bool *created);

static void *hb_get_mut(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, uint32_t vlen,
                        bool *created) {
    hb_state_t *st = hb_state(b, sid, SL_STATE_VALUE);
    if (!st) return NULL;
    hb_tab_t *t = hb_cur_tab(b, st);
    if (SL_UNLIKELY(t->cow)) return hb_get_mut_cow(b, sid, ns, nslen, vlen, created);
    uint32_t tag = hb_tag(b, ns, nslen);
    hb_cell_t *c = hb_find_cur(b, t, tag, ns, nslen);
    if (SL_LIKELY(c != NULL)) {
        if (created) *created = false;
        if (SL_LIKELY(c->vlen == vlen)) return hb_cval(c);
        /* Resize: keep the common prefix, zero the rest. */
        if (vlen > hb_vcap(t, c)) {
            hb_big_t *nb = hb_spill_begin(t, c, vlen, c->vlen, HB_MEM(b));
            hb_spill_end(c, nb, HB_MEM(b));
        }
        if (vlen > c->vlen) memset(hb_cval(c) + c->vlen, 0, vlen - c->vlen);
        c->vlen = vlen;
        return hb_cval(c);
    }
    hb_stage_t sn;
    ns = hb_stage(&sn, t, ns, nslen);
    c = hb_tab_insert(t, tag, b->key, b->keylen, ns, nslen, vlen, HB_MEM(b));
    sl_free(sn.heap);
    memset(hb_cval(c), 0, vlen);
    c->vlen = vlen;
    st->count++;
    if (created) *created = true;
    return hb_cval(c);
}

/* get_mut on a table shared with a snapshot: unshare, then as usual. */
static __attribute__((noinline)) void *hb_get_mut_cow(sl_keyed_backend_t *b, int sid, const void *ns,
                                                      uint32_t nslen, uint32_t vlen, bool *created) {
    hb_shell_t *old = hb_unshare_cur(b, &((hb_backend_t *)b)->states[sid]);
    void *r = hb_get_mut(b, sid, ns, nslen, vlen, created);
    hb_shell_drop(old);
    return r;
}

/* Sets (current key, ns) of st to v, inserting when absent. */
static void hb_put_raw(sl_keyed_backend_t *b, hb_state_t *st, const void *ns, uint32_t nslen, const void *v,
                       uint32_t vlen) {
    hb_tab_t *t = hb_cur_tab(b, st);
    if (SL_UNLIKELY(t->cow)) {
        hb_shell_t *old = hb_unshare_cur(b, st);
        hb_put_raw(b, st, ns, nslen, v, vlen);
        hb_shell_drop(old);
        return;
    }
    uint32_t tag = hb_tag(b, ns, nslen);
    hb_cell_t *c = hb_find_cur(b, t, tag, ns, nslen);
    if (c) {
        hb_cell_set(t, c, v, vlen, HB_MEM(b));
        return;
    }
    hb_stage_t sn, sv;
    ns = hb_stage(&sn, t, ns, nslen);
    v = hb_stage(&sv, t, v, vlen);
    c = hb_tab_insert(t, tag, b->key, b->keylen, ns, nslen, vlen, HB_MEM(b));
    if (vlen) memcpy(hb_cval(c), v, vlen);
    c->vlen = vlen;
    st->count++;
    sl_free(sn.heap);
    sl_free(sv.heap);
}

static int hb_put(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, const void *v, uint32_t vlen) {
    hb_state_t *st = hb_state(b, sid, SL_STATE_VALUE);
    if (!st || (!v && vlen)) return SL_EINVAL;
    hb_put_raw(b, st, ns, nslen, v, vlen);
    return SL_OK;
}

static int hb_remove(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen) {
    hb_backend_t *hb = (hb_backend_t *)b;
    if ((unsigned)sid >= (unsigned)hb->nstates) return SL_EINVAL;
    hb_state_t *st = &hb->states[sid];
    hb_tab_t *t = hb_cur_tab(b, st);
    if (SL_UNLIKELY(t->cow)) {
        if (!hb_find_cur(b, t, hb_tag(b, ns, nslen), ns, nslen)) return 0; /* nothing to remove: no copy */
        hb_shell_t *old = hb_unshare_cur(b, st);
        int rc = hb_remove(b, sid, ns, nslen);
        hb_shell_drop(old);
        return rc;
    }
    hb_cell_t *c = hb_find_cur(b, t, hb_tag(b, ns, nslen), ns, nslen);
    if (!c) return 0;
    hb_tab_remove_at(t, c, st->kind, HB_MEM(b));
    st->count--;
    return 1;
}

/* ---- LIST ---- */

#define HB_ELEM_HDR 8 /* [u32 len][u32 0] */

static inline size_t hb_elem_size(uint32_t len) { return HB_ELEM_HDR + hb_pad8(len); }

static uint8_t *hb_elem_write(uint8_t *p, const void *v, uint32_t len) {
    sl_st32(p, len);
    sl_st32(p + 4, 0);
    if (len) memcpy(p + HB_ELEM_HDR, v, len);
    size_t sz = hb_elem_size(len);
    memset(p + HB_ELEM_HDR + len, 0, sz - HB_ELEM_HDR - len);
    return p + sz;
}

static int hb_list_add(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, const void *v, uint32_t vlen) {
    hb_state_t *st = hb_state(b, sid, SL_STATE_LIST);
    if (!st || (!v && vlen)) return SL_EINVAL;
    hb_tab_t *t = hb_cur_tab(b, st);
    if (SL_UNLIKELY(t->cow)) {
        hb_shell_t *old = hb_unshare_cur(b, st);
        int rc = hb_list_add(b, sid, ns, nslen, v, vlen);
        hb_shell_drop(old);
        return rc;
    }
    uint32_t tag = hb_tag(b, ns, nslen);
    hb_cell_t *c = hb_find_cur(b, t, tag, ns, nslen);
    size_t need = hb_elem_size(vlen);
    if (!c) {
        if (need > UINT32_MAX) return SL_EINVAL;
        hb_stage_t sn, sv;
        ns = hb_stage(&sn, t, ns, nslen);
        v = hb_stage(&sv, t, v, vlen);
        c = hb_tab_insert(t, tag, b->key, b->keylen, ns, nslen, (uint32_t)need, HB_MEM(b));
        hb_elem_write(hb_cval(c), v, vlen);
        c->vlen = (uint32_t)need;
        st->count++;
        sl_free(sn.heap);
        sl_free(sv.heap);
        return SL_OK;
    }
    uint64_t used = c->vlen, cap = hb_vcap(t, c);
    if (used + need > UINT32_MAX) return SL_EINVAL;
    if (used + need <= cap) {
        hb_elem_write(hb_cval(c) + used, v, vlen);
    } else {
        cap = SL_MAX(cap * 2, used + need);
        if (cap > UINT32_MAX) cap = UINT32_MAX;
        hb_big_t *nb = hb_spill_begin(t, c, (uint32_t)cap, (uint32_t)used, HB_MEM(b));
        hb_elem_write(hb_big_val(c, nb) + used, v, vlen); /* before the old storage goes: v may be in it */
        hb_spill_end(c, nb, HB_MEM(b));
    }
    c->vlen = (uint32_t)(used + need);
    return SL_OK;
}

static int hb_list_foreach(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, sl_kb_list_cb cb,
                           void *ctx) {
    hb_state_t *st = hb_state(b, sid, SL_STATE_LIST);
    if (!st) return SL_EINVAL;
    hb_cell_t *c = hb_find_cur(b, hb_cur_tab(b, st), hb_tag(b, ns, nslen), ns, nslen);
    if (!c) return 0;
    const uint8_t *p = hb_cval(c), *end = p + c->vlen;
    int n = 0;
    while (p < end) {
        uint32_t len = sl_ld32(p);
        if (cb) {
            int rc = cb(ctx, p + HB_ELEM_HDR, len);
            if (rc) return rc;
        }
        n++;
        p += hb_elem_size(len);
    }
    return n;
}

static int hb_list_replace(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, int n,
                           const void *const *vals, const uint32_t *lens) {
    hb_state_t *st = hb_state(b, sid, SL_STATE_LIST);
    if (!st || n < 0 || (n > 0 && (!vals || !lens))) return SL_EINVAL;
    if (n == 0) {
        int rc = hb_remove(b, sid, ns, nslen);
        return rc < 0 ? rc : SL_OK;
    }
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (!vals[i] && lens[i]) return SL_EINVAL;
        total += hb_elem_size(lens[i]);
    }
    if (total > UINT32_MAX) return SL_EINVAL;
    /* The new elements usually come from the old list: build the new value
     * apart, then store it like a put. */
    uint8_t *tmp = sl_malloc(total), *p = tmp;
    for (int i = 0; i < n; i++) p = hb_elem_write(p, vals[i], lens[i]);
    hb_put_raw(b, st, ns, nslen, tmp, (uint32_t)total);
    sl_free(tmp);
    return SL_OK;
}

/* ---- MAP ---- */

static inline uint32_t hb_utag(const void *uk, uint32_t uklen) {
    return hb_tag_of(hb_hash_with(0x5851F42D4C957F2DULL, uk, uklen));
}

static const void *hb_map_get(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, const void *uk,
                              uint32_t uklen, uint32_t *vlen) {
    hb_state_t *st = hb_state(b, sid, SL_STATE_MAP);
    if (!st || (!uk && uklen)) return NULL;
    hb_cell_t *c = hb_find_cur(b, hb_cur_tab(b, st), hb_tag(b, ns, nslen), ns, nslen);
    if (!c) return NULL;
    hb_cell_t *ic = hb_tab_find(hb_inner(c), hb_utag(uk, uklen), uk, uklen, NULL, 0);
    if (!ic) return NULL;
    if (vlen) *vlen = ic->vlen;
    return hb_cval(ic);
}

static int hb_map_put(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, const void *uk, uint32_t uklen,
                      const void *v, uint32_t vlen) {
    hb_state_t *st = hb_state(b, sid, SL_STATE_MAP);
    if (!st || (!uk && uklen) || (!v && vlen)) return SL_EINVAL;
    hb_tab_t *t = hb_cur_tab(b, st);
    if (SL_UNLIKELY(t->cow)) {
        hb_shell_t *old = hb_unshare_cur(b, st);
        int rc = hb_map_put(b, sid, ns, nslen, uk, uklen, v, vlen);
        hb_shell_drop(old);
        return rc;
    }
    uint32_t tag = hb_tag(b, ns, nslen), utag = hb_utag(uk, uklen);
    hb_cell_t *c = hb_find_cur(b, t, tag, ns, nslen);
    hb_stage_t sn, su, sv;
    sn.heap = su.heap = sv.heap = NULL;
    if (c) {
        hb_tab_t *inner = hb_inner(c);
        hb_cell_t *ic = hb_tab_find(inner, utag, uk, uklen, NULL, 0);
        if (ic) {
            hb_cell_set(inner, ic, v, vlen, HB_MEM(b));
            return SL_OK;
        }
        /* A new user key: the inner table's cells may move. */
        uk = hb_stage(&su, inner, uk, uklen);
        v = hb_stage(&sv, inner, v, vlen);
    } else {
        /* A new (key, ns): the outer table's cells may move (inner tables'
         * cells do not). */
        ns = hb_stage(&sn, t, ns, nslen);
        uk = hb_stage(&su, t, uk, uklen);
        v = hb_stage(&sv, t, v, vlen);
        c = hb_tab_insert(t, tag, b->key, b->keylen, ns, nslen, (uint32_t)sizeof(hb_tab_t), HB_MEM(b));
        memset(hb_cval(c), 0, sizeof(hb_tab_t));
        c->vlen = (uint32_t)sizeof(hb_tab_t);
        st->count++;
    }
    hb_cell_t *ic = hb_tab_insert(hb_inner(c), utag, uk, uklen, NULL, 0, vlen, HB_MEM(b));
    if (vlen) memcpy(hb_cval(ic), v, vlen);
    ic->vlen = vlen;
    sl_free(sn.heap);
    sl_free(su.heap);
    sl_free(sv.heap);
    return SL_OK;
}

static int hb_map_remove(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, const void *uk,
                         uint32_t uklen) {
    hb_state_t *st = hb_state(b, sid, SL_STATE_MAP);
    if (!st || (!uk && uklen)) return SL_EINVAL;
    hb_tab_t *t = hb_cur_tab(b, st);
    hb_cell_t *c = hb_find_cur(b, t, hb_tag(b, ns, nslen), ns, nslen);
    if (!c) return 0;
    hb_tab_t *inner = hb_inner(c);
    hb_cell_t *ic = hb_tab_find(inner, hb_utag(uk, uklen), uk, uklen, NULL, 0);
    if (!ic) return 0;
    if (SL_UNLIKELY(t->cow)) { /* found in the shared storage: copy, then remove from the copy */
        hb_shell_t *old = hb_unshare_cur(b, st);
        int rc = hb_map_remove(b, sid, ns, nslen, uk, uklen);
        hb_shell_drop(old);
        return rc;
    }
    hb_tab_remove_at(inner, ic, SL_STATE_VALUE, HB_MEM(b));
    if (inner->n == 0) { /* the last user key: the (key, ns) goes too */
        hb_tab_remove_at(t, c, SL_STATE_MAP, HB_MEM(b));
        st->count--;
    }
    return 1;
}

static int hb_map_foreach(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, sl_kb_map_cb cb,
                          void *ctx) {
    hb_state_t *st = hb_state(b, sid, SL_STATE_MAP);
    if (!st) return SL_EINVAL;
    hb_cell_t *c = hb_find_cur(b, hb_cur_tab(b, st), hb_tag(b, ns, nslen), ns, nslen);
    if (!c) return 0;
    hb_tab_t *inner = hb_inner(c);
    int n = 0;
    for (uint32_t i = 0; inner->cells && i <= inner->mask; i++) {
        hb_cell_t *ic = hb_cell(inner, i);
        if (!ic->klen1) continue;
        if (cb) {
            int rc = cb(ctx, hb_kbytes(ic), hb_klen(ic), hb_cval(ic), ic->vlen);
            if (rc) return rc;
        }
        n++;
    }
    return n;
}

/* ---- all keys ---- */

/* Calls cb for every (key, namespace) of one key group's table. */
static int tab_foreach_entry(hb_tab_t *t, sl_kb_entry_cb cb, void *ctx) {
    for (uint32_t i = 0; t->cells && i <= t->mask; i++) {
        hb_cell_t *c = hb_cell(t, i);
        if (!c->klen1) continue;
        const uint8_t *kb = hb_kbytes(c);
        int rc = cb(ctx, kb, hb_klen(c), kb + hb_klen(c), hb_nslen(c));
        if (rc) return rc;
    }
    return 0;
}

static int hb_foreach_entry(sl_keyed_backend_t *b, int sid, sl_kb_entry_cb cb, void *ctx) {
    hb_backend_t *hb = (hb_backend_t *)b;
    if ((unsigned)sid >= (unsigned)hb->nstates || !cb) return SL_EINVAL;
    for (int g = 0; g < hb->nkg; g++) {
        int rc = tab_foreach_entry(&hb->states[sid].tabs[g], cb, ctx);
        if (rc) return rc;
    }
    return 0;
}

static int hb_foreach_entry_kg(sl_keyed_backend_t *b, int sid, int kg, sl_kb_entry_cb cb, void *ctx) {
    hb_backend_t *hb = (hb_backend_t *)b;
    if ((unsigned)sid >= (unsigned)hb->nstates || !cb || kg < b->range.start || kg >= b->range.end)
        return SL_EINVAL;
    return tab_foreach_entry(&hb->states[sid].tabs[kg - b->range.start], cb, ctx);
}

static int64_t hb_count(sl_keyed_backend_t *b, int sid) {
    hb_backend_t *hb = (hb_backend_t *)b;
    if ((unsigned)sid >= (unsigned)hb->nstates) return SL_EINVAL;
    return hb->states[sid].count;
}

static void hb_destroy(sl_keyed_backend_t *b) {
    if (!b) return;
    hb_backend_t *hb = (hb_backend_t *)b;
    for (int i = 0; i < hb->nstates; i++) {
        hb_state_t *st = &hb->states[i];
        for (int g = 0; g < hb->nkg; g++) {
            if (st->tabs[g].cow) hb_shell_drop(hb_shells(hb, st)[g]); /* snapshots may still hold it */
            else hb_tab_free_all(&st->tabs[g], st->kind, &hb->mem);
        }
        sl_free(st->tabs);
        sl_free(st->name);
    }
    sl_free(hb->states);
    sl_free(hb->ttl);
    sl_kb_base_free(b);
    sl_free(hb);
}

/* Prefetch hint: the home cell of (key, ns) in its key group's table. */
static void hb_prefetch(sl_keyed_backend_t *b, int sid, int kg, uint64_t keyhash, const void *ns, uint32_t nslen) {
    hb_backend_t *hb = (hb_backend_t *)b;
    if ((unsigned)sid >= (unsigned)hb->nstates || kg < b->range.start || kg >= b->range.end) return;
    const hb_tab_t *t = &hb->states[sid].tabs[kg - b->range.start];
    if (!t->cells) return;
    uint32_t tag = hb_tag_for(keyhash, ns, nslen);
    const uint8_t *c = (const uint8_t *)hb_cell(t, hb_home(t, tag));
    __builtin_prefetch(c, 1);
    __builtin_prefetch(c + t->stride - 1, 1);
}

/* ------------------------------------------------------------------ */
/* snapshots                                                           */

typedef struct hb_snap_state {
    char *name;
    sl_state_kind_t kind;
    int64_t ttl_ms;      /* > 0: items expired at the snapshot's time are left out */
    int items;           /* hb_ttl_t.items */
    hb_shell_t **shells; /* [nkg]; NULL where the key group had no entry */
} hb_snap_state_t;

typedef struct hb_snap {
    sl_kb_snapshot_t base; /* first */
    int nkg, nstates;
    int64_t now;             /* the backend's clock at snapshot(), for TTL states */
    hb_snap_state_t *states; /* in bytewise order of name (the format's order) */
} hb_snap_t;

static int hb_snap_state_cmp(const void *a, const void *b) {
    return strcmp(((const hb_snap_state_t *)a)->name, ((const hb_snap_state_t *)b)->name);
}

static const sl_keyed_backend_ops_t hb_ops;

/* The synchronous phase: shells, no entries (see the header comment). */
static int hb_snapshot(sl_keyed_backend_t *b, sl_kb_snapshot_t **out) {
    hb_backend_t *hb = (hb_backend_t *)b;
    if (!out) return SL_EINVAL;
    hb_snap_t *sn = sl_calloc(1, sizeof *sn);
    sn->base.ops = &hb_ops;
    sn->base.max_parallelism = b->max_parallelism;
    sn->base.range = b->range;
    sn->nkg = hb->nkg;
    sn->nstates = hb->nstates;
    sn->states = sl_calloc((size_t)SL_MAX(hb->nstates, 1), sizeof *sn->states);
    bool ttl = false;
    for (int i = 0; i < hb->nstates; i++) {
        hb_state_t *st = &hb->states[i];
        hb_snap_state_t *ss = &sn->states[i];
        ss->name = sl_strdup(st->name);
        ss->kind = st->kind;
        ss->ttl_ms = hb->ttl[i].ttl_ms;
        ss->items = hb->ttl[i].items;
        ttl = ttl || ss->ttl_ms > 0;
        ss->shells = sl_calloc((size_t)hb->nkg, sizeof *ss->shells);
        for (int g = 0; g < hb->nkg; g++) {
            hb_tab_t *t = &st->tabs[g];
            hb_shell_t *sh = hb_shells(hb, st)[g];
            if (t->cow) {
                /* Still shared with an earlier snapshot and unchanged since. */
                atomic_fetch_add_explicit(&sh->refs, 1, memory_order_relaxed);
            } else if (t->n) {
                sh = sl_malloc(sizeof *sh);
                atomic_init(&sh->refs, 2);
                sh->kind = st->kind;
                sh->tab = *t;
                t->cow = 1;
                hb_shells(hb, st)[g] = sh;
            } else {
                sh = NULL;
            }
            ss->shells[g] = sh;
        }
        hb->stats.sync_tables += (uint64_t)hb->nkg;
    }
    /* Full-snapshot cleanup: what has expired by now stays out of the snapshot. */
    if (ttl) sn->now = sl_kb_now_ms(b);
    qsort(sn->states, (size_t)sn->nstates, sizeof *sn->states, hb_snap_state_cmp);
    hb->stats.snapshots++;
    *out = &sn->base;
    return SL_OK;
}

static void hb_snapshot_release(sl_kb_snapshot_t *s) {
    hb_snap_t *sn = (hb_snap_t *)s;
    if (!sn) return;
    for (int i = 0; i < sn->nstates; i++) {
        hb_snap_state_t *ss = &sn->states[i];
        for (int g = 0; g < sn->nkg; g++) hb_shell_drop(ss->shells[g]);
        sl_free(ss->shells);
        sl_free(ss->name);
    }
    sl_free(sn->states);
    sl_free(sn);
}

/* Sorting entries into the format's order: bytewise by key, then by
 * namespace.  A radix sort on the key's first 8 bytes (big-endian, zero
 * padded: an order consistent with the bytewise one) does most of the work
 * without touching the cells; runs of equal prefixes are then sorted by
 * the full comparison.  (qsort over the cells alone spent more time in the
 * comparisons' cache misses than the rest of snapshot_write.) */
typedef struct hb_sref {
    uint64_t pfx;
    hb_cell_t *c;
} hb_sref_t;

typedef struct hb_sorter {
    hb_sref_t *v, *tmp;
    uint32_t cap;
} hb_sorter_t;

static int hb_bytes_cmp(const uint8_t *a, uint32_t alen, const uint8_t *b, uint32_t blen) {
    int c = memcmp(a, b, SL_MIN(alen, blen));
    return c ? c : (alen > blen) - (alen < blen);
}
static int hb_sref_cmp(const void *pa, const void *pb) {
    hb_cell_t *a = ((const hb_sref_t *)pa)->c, *b = ((const hb_sref_t *)pb)->c;
    const uint8_t *ka = hb_kbytes(a), *kb = hb_kbytes(b);
    int c = hb_bytes_cmp(ka, hb_klen(a), kb, hb_klen(b));
    return c ? c : hb_bytes_cmp(ka + hb_klen(a), hb_nslen(a), kb + hb_klen(b), hb_nslen(b));
}

/* The occupied cells of t in format order, in so->v[0..t->n). */
static uint32_t hb_sorted_cells(const hb_tab_t *t, hb_sorter_t *so) {
    if (t->n > so->cap) {
        so->cap = t->n;
        sl_free(so->v);
        sl_free(so->tmp);
        so->v = sl_malloc((size_t)so->cap * sizeof *so->v);
        so->tmp = sl_malloc((size_t)so->cap * sizeof *so->tmp);
    }
    uint32_t n = 0;
    for (uint32_t i = 0; t->cells && i <= t->mask; i++) {
        hb_cell_t *c = hb_cell(t, i);
        if (!c->klen1) continue;
        uint8_t b[8] = {0};
        memcpy(b, hb_kbytes(c), SL_MIN(hb_klen(c), 8u));
        so->v[n].pfx = __builtin_bswap64(sl_ld64(b));
        so->v[n++].c = c;
    }
    assert(n == t->n);
    hb_sref_t *a = so->v, *o = so->tmp;
    for (unsigned shift = 0; shift < 64 && n > 1; shift += 8) { /* LSD radix, 8 bits a pass */
        uint32_t cnt[256] = {0};
        for (uint32_t i = 0; i < n; i++) cnt[(a[i].pfx >> shift) & 255]++;
        if (cnt[(a[0].pfx >> shift) & 255] == n) continue; /* all the same byte */
        for (uint32_t i = 0, sum = 0; i < 256; i++) {
            uint32_t x = cnt[i];
            cnt[i] = sum;
            sum += x;
        }
        for (uint32_t i = 0; i < n; i++) o[cnt[(a[i].pfx >> shift) & 255]++] = a[i];
        hb_sref_t *x = a;
        a = o;
        o = x;
    }
    if (a != so->v) memcpy(so->v, a, (size_t)n * sizeof *a);
    for (uint32_t i = 0, j; i < n; i = j) {
        for (j = i + 1; j < n && so->v[j].pfx == so->v[i].pfx; j++) {}
        if (j - i > 1) qsort(so->v + i, j - i, sizeof *so->v, hb_sref_cmp);
    }
    return n;
}

/* ---- TTL: what a snapshot keeps ---- */

/* An item (value, list element, map value) of a state with this TTL (0:
 * none) is kept when it has not expired at now. */
static inline bool hb_keep(const void *p, uint32_t len, int64_t ttl_ms, int64_t now) {
    return ttl_ms <= 0 || !sl_ttl_item_expired(p, len, ttl_ms, now);
}

/* Elements of the list value [val, val + vlen) that are kept. */
static uint32_t hb_list_kept(const uint8_t *val, uint32_t vlen, int64_t ttl_ms, int64_t now) {
    uint32_t n = 0;
    for (const uint8_t *p = val, *end = val + vlen; p < end; p += hb_elem_size(sl_ld32(p)))
        n += hb_keep(p + HB_ELEM_HDR, sl_ld32(p), ttl_ms, now);
    return n;
}

/* Keeps in refs[0..n) the cells (of a state of this kind, or a map's
 * inner cells: VALUE) with something kept; returns how many. */
static uint32_t hb_filter_kept(hb_sref_t *refs, uint32_t n, sl_state_kind_t kind, int64_t ttl_ms, int64_t now) {
    if (ttl_ms <= 0) return n;
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
        hb_cell_t *c = refs[i].c;
        bool keep = false;
        switch (kind) {
        case SL_STATE_VALUE: keep = hb_keep(hb_cval(c), c->vlen, ttl_ms, now); break;
        case SL_STATE_LIST: keep = hb_list_kept(hb_cval(c), c->vlen, ttl_ms, now) > 0; break;
        case SL_STATE_MAP: {
            const hb_tab_t *in = hb_inner(c);
            for (uint32_t j = 0; !keep && in->cells && j <= in->mask; j++) {
                hb_cell_t *ic = hb_cell(in, j);
                keep = ic->klen1 && hb_keep(hb_cval(ic), ic->vlen, ttl_ms, now);
            }
            break;
        }
        }
        if (keep) refs[k++] = refs[i];
    }
    return k;
}

/* The asynchronous phase: reads only storage that shells keep immutable. */
static int hb_snapshot_write(const sl_kb_snapshot_t *s, int kg, sl_buf_t *out) {
    const hb_snap_t *sn = (const hb_snap_t *)s;
    if (!sn || !out || kg < s->range.start || kg >= s->range.end) return SL_EINVAL;
    int g = kg - s->range.start;
    size_t start = sl_kbf_begin(out, s->max_parallelism, kg, (uint32_t)sn->nstates);
    hb_sorter_t cells = {0}, inner = {0};
    for (int i = 0; i < sn->nstates; i++) {
        const hb_snap_state_t *ss = &sn->states[i];
        sl_kbf_bytes(out, ss->name, (uint32_t)strlen(ss->name));
        sl_kbf_u8(out, sl_kbf_kind_byte(ss->kind, ss->items));
        const hb_shell_t *sh = ss->shells[g];
        if (!sh) {
            sl_kbf_varint(out, 0);
            continue;
        }
        int64_t ttl = ss->ttl_ms, now = sn->now;
        uint32_t n = hb_sorted_cells(&sh->tab, &cells); /* (may move cells.v) */
        n = hb_filter_kept(cells.v, n, ss->kind, ttl, now);
        sl_kbf_varint(out, n);
        for (uint32_t e = 0; e < n; e++) {
            hb_cell_t *c = cells.v[e].c;
            const uint8_t *kb = hb_kbytes(c), *val = hb_cval(c);
            sl_kbf_bytes(out, kb, hb_klen(c));
            sl_kbf_bytes(out, kb + hb_klen(c), hb_nslen(c));
            switch (ss->kind) {
            case SL_STATE_VALUE: sl_kbf_bytes(out, val, c->vlen); break;
            case SL_STATE_LIST: {
                sl_kbf_varint(out, hb_list_kept(val, c->vlen, ttl, now));
                for (const uint8_t *p = val, *end = val + c->vlen; p < end; p += hb_elem_size(sl_ld32(p)))
                    if (hb_keep(p + HB_ELEM_HDR, sl_ld32(p), ttl, now)) sl_kbf_bytes(out, p + HB_ELEM_HDR, sl_ld32(p));
                break;
            }
            case SL_STATE_MAP: {
                uint32_t m = hb_sorted_cells(hb_inner(c), &inner);
                m = hb_filter_kept(inner.v, m, SL_STATE_VALUE, ttl, now);
                sl_kbf_varint(out, m);
                for (uint32_t j = 0; j < m; j++) {
                    hb_cell_t *ic = inner.v[j].c;
                    sl_kbf_bytes(out, hb_kbytes(ic), hb_klen(ic));
                    sl_kbf_bytes(out, hb_cval(ic), ic->vlen);
                }
                break;
            }
            }
        }
    }
    sl_free(cells.v);
    sl_free(cells.tmp);
    sl_free(inner.v);
    sl_free(inner.tmp);
    sl_kbf_end(out, start);
    return SL_OK;
}

/* ---- restore ---- */

typedef struct hb_restore {
    sl_keyed_backend_t *b;
    int kg;
    bool load;            /* false: the checking pass */
    char *err;
    size_t errlen;
    /* checking pass: the block's state names (checked for duplicates once
     * all are known: sorting, so that no input makes it quadratic) */
    struct hb_rs_name {
        const char *p;
        uint32_t n;
    } *names;
    uint32_t nnames, capnames;
    /* loading pass */
    int sid;
    sl_state_kind_t kind;
    const char *name;
    const uint8_t *ns;    /* the current entry's namespace (in the block) */
    uint32_t nslen;
    uint32_t left;        /* items left in the current entry */
    sl_buf_t list;        /* the current list entry's elements, in the table's layout */
} hb_restore_t;

static int hb_rs_state(void *ctx, const char *name, uint32_t namelen, sl_state_kind_t kind, int ttl,
                       uint32_t nentries) {
    hb_restore_t *r = ctx;
    hb_backend_t *hb = (hb_backend_t *)r->b;
    if (!r->load) {
        if (r->nnames == r->capnames) {
            r->capnames = r->capnames ? 2 * r->capnames : 8;
            r->names = sl_realloc(r->names, (size_t)r->capnames * sizeof *r->names);
        }
        r->names[r->nnames].p = name;
        r->names[r->nnames++].n = namelen;
        for (int i = 0; i < hb->nstates; i++) {
            hb_state_t *st = &hb->states[i];
            if (strlen(st->name) == namelen && memcmp(st->name, name, namelen) == 0 && st->kind != kind)
                return sl_errf(r->err, r->errlen, SL_ESTATE,
                               "keyed state of key group %d: state '%s' is a %s state in the checkpoint but "
                               "registered as a %s state",
                               r->kg, st->name, sl_kbf_kind_name(kind), sl_kbf_kind_name(st->kind));
            int have = hb->ttl[i].items;
            if (strlen(st->name) == namelen && memcmp(st->name, name, namelen) == 0 && ttl != SL_KBF_TTL_IS_UNKNOWN &&
                have != SL_KBF_TTL_IS_UNKNOWN && ttl != have)
                return sl_errf(r->err, r->errlen, SL_ESTATE,
                               "keyed state of key group %d: state '%s' has %s in the checkpoint but %s here "
                               "(restore before the state is declared)",
                               r->kg, st->name, ttl ? "TTL timestamps" : "no TTL timestamps",
                               have ? "has them" : "has none");
        }
        return SL_OK;
    }
    /* Checked: a new state, or one of the same kind (whose TTL, if declared, stays). */
    r->sid = hb_find_state(hb, name, namelen);
    if (r->sid < 0) r->sid = hb_add_state(hb, name, namelen, kind, 0, SL_TTL_ON_CREATE_AND_WRITE, true, ttl);
    assert(hb->states[r->sid].kind == kind);
    /* Restored timestamps may be older than any the cleanup has met: it
     * starts a new round from key group 0, which sets the floor again. */
    hb_ttl_t *tt = &hb->ttl[r->sid];
    tt->floor = tt->sweep_start = INT64_MIN;
    tt->sweep_min = INT64_MAX;
    tt->cur_kg = 0;
    tt->cur_cell = 0;
    r->kind = kind;
    r->name = hb->states[r->sid].name;
    SL_UNUSED(nentries);
    return SL_OK;
}

static int hb_rs_entry(void *ctx, const uint8_t *key, uint32_t klen, const uint8_t *ns, uint32_t nslen, uint32_t n) {
    hb_restore_t *r = ctx;
    if (!r->load) return SL_OK;
    sl_keyed_backend_t *b = r->b;
    hb_state_t *st = &((hb_backend_t *)b)->states[r->sid];
    sl_kb_set_key_hashed(b, key, klen, sl_kg_key_hash(key, klen));
    assert(b->kg == r->kg);
    if (hb_find_cur(b, hb_cur_tab(b, st), hb_tag(b, ns, nslen), ns, nslen))
        return sl_errf(r->err, r->errlen, SL_EFORMAT,
                       "keyed state of key group %d: state '%s' holds the same (key, namespace) twice", r->kg,
                       r->name);
    r->left = n;
    r->list.len = 0;
    /* Keep ns for the items: it points into the block, which outlives the call. */
    r->ns = ns;
    r->nslen = nslen;
    return SL_OK;
}

static int hb_rs_item(void *ctx, const uint8_t *uk, uint32_t uklen, const uint8_t *v, uint32_t vlen) {
    hb_restore_t *r = ctx;
    if (!r->load) return SL_OK;
    sl_keyed_backend_t *b = r->b;
    hb_backend_t *hb = (hb_backend_t *)b;
    hb_state_t *st = &hb->states[r->sid];
    assert(r->left > 0);
    r->left--;
    switch (r->kind) {
    case SL_STATE_VALUE: hb_put_raw(b, st, r->ns, r->nslen, v, vlen); break;
    case SL_STATE_LIST: {
        size_t need = hb_elem_size(vlen);
        if (r->list.len + need > UINT32_MAX)
            return sl_errf(r->err, r->errlen, SL_EFORMAT,
                           "keyed state of key group %d: state '%s': a list of more than 4 GiB", r->kg, r->name);
        sl_buf_reserve(&r->list, need);
        hb_elem_write(r->list.p + r->list.len, v, vlen);
        r->list.len += need;
        if (r->left == 0) hb_put_raw(b, st, r->ns, r->nslen, r->list.p, (uint32_t)r->list.len);
        break;
    }
    case SL_STATE_MAP:
        if (hb_map_get(b, r->sid, r->ns, r->nslen, uk, uklen, NULL))
            return sl_errf(r->err, r->errlen, SL_EFORMAT,
                           "keyed state of key group %d: state '%s' holds the same user key twice in one map",
                           r->kg, r->name);
        hb_map_put(b, r->sid, r->ns, r->nslen, uk, uklen, v, vlen);
        break;
    }
    return SL_OK;
}

static int hb_rs_name_cmp(const void *pa, const void *pb) {
    const struct hb_rs_name *a = pa, *b = pb;
    int c = memcmp(a->p, b->p, SL_MIN(a->n, b->n));
    return c ? c : (a->n > b->n) - (a->n < b->n);
}

/* After the checking pass: a state named twice is an error. */
static int hb_rs_check_names(hb_restore_t *r) {
    if (r->nnames < 2) return SL_OK;
    qsort(r->names, r->nnames, sizeof *r->names, hb_rs_name_cmp);
    for (uint32_t i = 1; i < r->nnames; i++)
        if (hb_rs_name_cmp(&r->names[i - 1], &r->names[i]) == 0)
            return sl_errf(r->err, r->errlen, SL_EFORMAT, "keyed state of key group %d: state '%.*s' appears twice",
                           r->kg, (int)SL_MIN(r->names[i].n, 64u), r->names[i].p);
    return SL_OK;
}

/* Empties key group kgi of every state (a failed restore's undo). */
static void hb_clear_kg(hb_backend_t *hb, int kgi) {
    for (int i = 0; i < hb->nstates; i++) {
        hb_state_t *st = &hb->states[i];
        hb_tab_t *t = &st->tabs[kgi];
        st->count -= t->n;
        if (t->cow) { /* let go of the shared storage: no copy to throw away */
            hb->mem -= hb_tab_bytes(t, st->kind); /* no longer live (a walk: failed restores only) */
            hb_shell_t **sh = &hb_shells(hb, st)[kgi];
            hb_shell_drop(*sh);
            *sh = NULL;
            memset(t, 0, sizeof *t);
        } else {
            hb_tab_free_all(t, st->kind, &hb->mem);
        }
    }
}

static int hb_restore(sl_keyed_backend_t *b, int kg, const uint8_t *data, size_t len, char *err, size_t errlen) {
    hb_backend_t *hb = (hb_backend_t *)b;
    if (kg < b->range.start || kg >= b->range.end)
        return sl_errf(err, errlen, SL_EINVAL, "keyed state: key group %d is outside this backend's range [%d, %d)", kg,
                       b->range.start, b->range.end);
    int kgi = kg - b->range.start;
    for (int i = 0; i < hb->nstates; i++)
        if (hb->states[i].tabs[kgi].n)
            return sl_errf(err, errlen, SL_ESTATE,
                           "keyed state of key group %d: cannot restore, state '%s' already has entries there", kg,
                           hb->states[i].name);
    static const sl_kbf_visitor_t vis = {hb_rs_state, hb_rs_entry, hb_rs_item};
    hb_restore_t r = {.b = b, .kg = kg, .err = err, .errlen = errlen};
    int rc = sl_kbf_parse(data, len, b->max_parallelism, kg, &vis, &r, err, errlen);
    if (rc == 0) rc = hb_rs_check_names(&r);
    sl_free(r.names);
    if (rc) return rc;
    /* Load, keeping the caller's current key. */
    uint32_t keylen = b->keylen;
    uint64_t keyhash = b->keyhash;
    int curkg = b->kg;
    uint8_t *key = sl_malloc(keylen ? keylen : 1);
    if (keylen) memcpy(key, b->key, keylen);
    r.load = true;
    rc = sl_kbf_parse(data, len, b->max_parallelism, kg, &vis, &r, err, errlen);
    if (rc) hb_clear_kg(hb, kgi);
    sl_buf_free(&r.list);
    if (curkg >= 0) {
        sl_kb_set_key_hashed(b, key, keylen, keyhash);
    } else {
        b->keylen = 0;
        b->kg = -1;
    }
    sl_free(key);
    return rc;
}

/* ------------------------------------------------------------------ */
/* TTL: incremental cleanup                                            */

/* The least timestamp in cell c of a TTL state (its value, list elements
 * or map values); INT64_MAX when it holds none (items too short to carry
 * one never expire). */
static inline int64_t hb_item_ts(const uint8_t *p, uint32_t len) {
    return len >= SL_TTL_TS_BYTES ? sl_ttl_ts(p) : INT64_MAX;
}
static int64_t hb_cell_min_ts(hb_cell_t *c, sl_state_kind_t kind) {
    int64_t m = INT64_MAX;
    switch (kind) {
    case SL_STATE_VALUE: return hb_item_ts(hb_cval(c), c->vlen);
    case SL_STATE_LIST:
        for (const uint8_t *p = hb_cval(c), *end = p + c->vlen; p < end; p += hb_elem_size(sl_ld32(p)))
            m = SL_MIN(m, hb_item_ts(p + HB_ELEM_HDR, sl_ld32(p)));
        return m;
    case SL_STATE_MAP: {
        const hb_tab_t *in = hb_inner(c);
        for (uint32_t j = 0; in->cells && j <= in->mask; j++) {
            hb_cell_t *ic = hb_cell(in, j);
            if (ic->klen1) m = SL_MIN(m, hb_item_ts(hb_cval(ic), ic->vlen));
        }
        return m;
    }
    }
    return m;
}

/* Removes what has expired in cell c of st's table t (private: not shared
 * with a snapshot).  Returns the items removed; *gone when the entry went
 * too (its cell now holds another entry or none). */
static int hb_cell_expire(hb_tab_t *t, hb_cell_t *c, hb_state_t *st, int64_t ttl_ms, int64_t now, bool *gone,
                          int64_t *mem) {
    int removed = 0;
    *gone = false;
    switch (st->kind) {
    case SL_STATE_VALUE: removed = 1; break;
    case SL_STATE_LIST: {
        /* Compact the kept elements to the front, in order. */
        uint8_t *val = hb_cval(c), *w = val;
        for (uint8_t *p = val, *end = val + c->vlen; p < end;) {
            size_t sz = hb_elem_size(sl_ld32(p));
            if (hb_keep(p + HB_ELEM_HDR, sl_ld32(p), ttl_ms, now)) {
                if (w != p) memmove(w, p, sz);
                w += sz;
            } else {
                removed++;
            }
            p += sz;
        }
        c->vlen = (uint32_t)(w - val);
        if (c->vlen) return removed;
        break;
    }
    case SL_STATE_MAP: {
        hb_tab_t *in = hb_inner(c);
        for (uint32_t j = 0; in->cells && j <= in->mask;) {
            hb_cell_t *ic = hb_cell(in, j);
            if (ic->klen1 && !hb_keep(hb_cval(ic), ic->vlen, ttl_ms, now)) {
                hb_tab_remove_at(in, ic, SL_STATE_VALUE, mem); /* another entry may shift into j: look again */
                removed++;
            } else {
                j++;
            }
        }
        if (in->n) return removed;
        break;
    }
    }
    hb_tab_remove_at(t, c, st->kind, mem);
    st->count--;
    *gone = true;
    return removed;
}

int sl_heap_backend_ttl_cleanup(sl_keyed_backend_t *b, int sid, int max_entries, int64_t now) {
    if (!b || b->ops != &hb_ops) return SL_EINVAL;
    hb_backend_t *hb = (hb_backend_t *)b;
    if ((unsigned)sid >= (unsigned)hb->nstates) return SL_EINVAL;
    hb_state_t *st = &hb->states[sid];
    hb_ttl_t *tt = &hb->ttl[sid];
    const int64_t ttl = tt->ttl_ms;
    if (ttl <= 0 || max_entries <= 0 || st->count == 0) return 0;
    /* The floor: the least timestamp the cursor met on its last round, or
     * that round's start time if less (what was written during the round
     * is at least that).  Nothing older is left and new items carry the
     * current time, so until the floor expires there is nothing to find.
     * Cleanup may come later than it could (an entry that moved behind the
     * cursor, e.g. when its table doubled, is met on the next round; a
     * clock that goes back delays it by as much); a read never returns
     * anything expired whatever the cleanup did. */
    if (tt->floor != INT64_MIN && !sl_ttl_expired(tt->floor, ttl, now)) return 0;
    if (tt->sweep_start == INT64_MIN) tt->sweep_start = now;
    max_entries = SL_MIN(max_entries, 1 << 24);
    const sl_state_kind_t kind = st->kind;
    int entries = 0, work = 0, removed = 0, budget = 8 * max_entries;
    int kg = tt->cur_kg;
    uint32_t cell = tt->cur_cell;
    int64_t smin = tt->sweep_min;
    while (entries < max_entries && work < budget) {
        if (kg >= hb->nkg) { /* came round: (nearly) every entry was met since the last time */
            tt->floor = SL_MIN(smin, tt->sweep_start);
            tt->sweep_start = now;
            smin = INT64_MAX;
            kg = 0;
            cell = 0;
        }
        hb_tab_t *t = &st->tabs[kg];
        if (!t->cells || cell > t->mask) { /* this key group is done: the next */
            kg++;
            cell = 0;
            work++;
            continue;
        }
        /* Scan this table from the cursor (locals: the loop is the cost). */
        const uint8_t *base = t->cells;
        const uint32_t end = t->mask + 1, stride = t->stride;
        hb_cell_t *c = NULL;
        for (; cell < end && entries < max_entries && work < budget; cell++) {
            work++;
            hb_cell_t *x = (hb_cell_t *)(void *)(base + (size_t)cell * stride);
            if (!x->klen1) continue;
            entries++;
            int64_t m = hb_cell_min_ts(x, kind);
            if (SL_UNLIKELY(sl_ttl_expired(m, ttl, now))) {
                c = x;
                break;
            }
            smin = SL_MIN(smin, m);
        }
        if (!c) continue;
        if (t->cow) { /* a removal is a write: a live snapshot keeps its view */
            hb_shell_drop(hb_unshare(hb, st, kg));
            c = hb_cell(t, cell); /* the copy has the same layout */
        }
        bool gone;
        removed += hb_cell_expire(t, c, st, ttl, now, &gone, &hb->mem);
        if (!gone) { /* what is left of it has not expired */
            smin = SL_MIN(smin, hb_cell_min_ts(c, kind));
            cell++;
        } /* else another entry may have shifted into this cell: look again */
    }
    tt->cur_kg = kg;
    tt->cur_cell = cell;
    tt->sweep_min = smin;
    return removed;
}

void sl_heap_backend_cow_stats(const sl_keyed_backend_t *b, sl_heap_cow_stats_t *out) {
    *out = ((const hb_backend_t *)b)->stats;
}

int64_t sl_heap_backend_memory(const sl_keyed_backend_t *b) {
    if (!b || b->ops != &hb_ops) return SL_EINVAL;
    return ((const hb_backend_t *)b)->mem;
}

int64_t sl_heap_backend_memory_walk(const sl_keyed_backend_t *b) {
    if (!b || b->ops != &hb_ops) return SL_EINVAL;
    const hb_backend_t *hb = (const hb_backend_t *)b;
    int64_t n = 0;
    for (int i = 0; i < hb->nstates; i++) {
        const hb_state_t *st = &hb->states[i];
        n += (int64_t)hb->nkg * (int64_t)(sizeof *st->tabs + sizeof(hb_shell_t *));
        for (int g = 0; g < hb->nkg; g++) n += hb_tab_bytes(&st->tabs[g], st->kind);
    }
    return n;
}

static int hb_state_info(sl_keyed_backend_t *b, int sid, const char **name, sl_state_kind_t *kind, int64_t *ttl_ms) {
    const hb_backend_t *hb = (const hb_backend_t *)b;
    if (sid < 0 || sid >= hb->nstates) return SL_ENOTFOUND;
    *name = hb->states[sid].name;
    *kind = hb->states[sid].kind;
    *ttl_ms = hb->ttl[sid].ttl_ms;
    return 0;
}

static const sl_keyed_backend_ops_t hb_ops = {
    .name = "heap",
    .register_state = hb_register_state,
    .get = hb_get,
    .get_mut = hb_get_mut,
    .put = hb_put,
    .remove = hb_remove,
    .list_add = hb_list_add,
    .list_foreach = hb_list_foreach,
    .list_replace = hb_list_replace,
    .map_get = hb_map_get,
    .map_put = hb_map_put,
    .map_remove = hb_map_remove,
    .map_foreach = hb_map_foreach,
    .foreach_entry = hb_foreach_entry,
    .foreach_entry_kg = hb_foreach_entry_kg,
    .count = hb_count,
    .prefetch = hb_prefetch,
    .destroy = hb_destroy,
    .snapshot = hb_snapshot,
    .snapshot_write = hb_snapshot_write,
    .snapshot_release = hb_snapshot_release,
    .restore = hb_restore,
    .state_info = hb_state_info,
};

sl_keyed_backend_t *sl_heap_backend_new(int max_parallelism, sl_kg_range_t range) {
    hb_backend_t *hb = sl_calloc(1, sizeof *hb);
    sl_kb_base_init(&hb->base, &hb_ops, max_parallelism, range);
    hb->nkg = range.end - range.start;
    return &hb->base;
}
