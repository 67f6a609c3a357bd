/*
 * rocksdb_cache.h — the write-back value cache of the RocksDB state backend:
 * an in-memory table from encoded RocksDB keys of VALUE states to their
 * value bytes (or to "no value"), bounded by a byte budget.
 *
 * The cache knows nothing about RocksDB: rocksdb_backend.c decides what it
 * caches, and it writes what the cache hands it (dirty entries) to the
 * database.  An entry is in one of these states:
 *
 *   clean, present   the value equals the database's
 *   clean, absent    the database has no value for the key (a negative entry)
 *   dirty, present   a put not yet written: the database has an older value
 *                    (SL_RVC_IN_DB) or none
 *   dirty, absent    a remove not yet written: the database still has a
 *                    value (a removed entry the database never had is
 *                    clean, absent: nothing to write)
 *
 * SL_RVC_IN_DB says whether the database (may) hold a value for the key: it
 * is exact for entries read from the database, and set (conservatively) for
 * a put of a key the cache did not hold.
 *
 * Eviction is a CLOCK over the hash table's slots: an access sets an
 * entry's reference bit, the hand clears it or, when clear, evicts.
 * sl_rvc_make_room evicts until the new bytes fit under 7/8 of the budget
 * and hands each dirty victim to a callback first (the backend adds it to a
 * write batch), so the hot, often-changed entries stay dirty and cost one
 * database write per flush instead of one per change.
 *
 * Captures (the synchronous phase of a checkpoint).  sl_rvc_capture hands
 * the current dirty entries to a snapshot without writing or copying them:
 * the dirty vector itself becomes an immutable "generation" and the cache
 * goes on with an empty one — O(1), whatever the number of dirty values.
 * A captured entry is frozen while any capture holds its generation: the
 * task never changes its key, value or absence in place (the first change
 * copies it: copy-on-write, the copy takes its table slot) and never frees
 * it (an eviction or drop takes it out of the table into the generation,
 * which frees it).  The task writes the captured values back to the
 * database a few at a time (sl_rvc_step, called by every backend
 * operation) and at every flush; a generation is retired (its superseded
 * copies freed) once it is written back and no capture holds it.
 *
 * What a capture shows: every value that was dirty at its moment, as it
 * was then — those of its own generation and those of older generations
 * not yet written back or superseded then.  Per captured entry the
 * generation keeps `sup`: 0 while the captured value is still the newest
 * and not in the database, else the capture sequence number current when
 * it stopped being either (written back, changed, evicted).  Capture k
 * shows an entry iff sup == 0 or sup >= k: stopped before k means the
 * database (whose snapshot is taken with capture k) or a newer capture
 * has it.  Together with a database snapshot taken at the same moment, a
 * capture is the exact state at that moment: captured values win over the
 * database's, absent ones are deletes.
 *
 * Memory: superseded copies of captured values live until their
 * generation is retired, outside the budget (stats: captured_bytes) — at
 * most about one more budget while a checkpoint is being written.
 *
 * Ownership: entries are owned by the cache (captured ones by their
 * generation); an entry pointer is valid until the next call that may
 * insert, resize, evict, copy or clear (sl_rvc_insert, sl_rvc_set_value,
 * sl_rvc_set_absent, sl_rvc_mark, sl_rvc_make_room, sl_rvc_clear,
 * sl_rvc_free): those that change an entry return its (possibly new)
 * pointer.  Callers never hand entry memory out: the backend copies values
 * into its per-state arenas, so an eviction can never invalidate a pointer
 * a caller holds.
 *
 * Threads: the cache is owned by the backend's task thread; no locking.  A
 * capture (sl_rvc_capture_entries, sl_rvc_capture_release) may be used on
 * any thread while the task goes on, and may outlive the cache.
 */
#ifndef SL_ROCKSDB_CACHE_H
#define SL_ROCKSDB_CACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum {
    SL_RVC_DIRTY = 1u << 0,  /* to be written at the next flush */
    SL_RVC_ABSENT = 1u << 1, /* sl_rvc_insert only: no value (kept in e->absent) */
    SL_RVC_IN_DB = 1u << 2,  /* the database (may) hold a value for the key */
    SL_RVC_REF = 1u << 3,    /* CLOCK reference bit */
};

/* A capture reads klen, vlen, absent and data of its entries on another
 * thread while the task changes flags, gen and didx: they are separate
 * members, and the former never change while the entry is captured. */
typedef struct sl_rvc_ent {
    uint64_t hash;
    uint32_t klen, vlen, vcap;
    uint32_t didx;  /* index in the dirty vector of generation gen while dirty */
    uint32_t gen;   /* generation of the dirty vector it last joined (0: none) */
    uint16_t flags; /* SL_RVC_DIRTY | SL_RVC_IN_DB | SL_RVC_REF: the task's */
    uint8_t absent; /* no value (a negative entry, or a remove) */
    uint8_t pad;
    uint8_t data[]; /* key (klen bytes), then the value (vcap bytes) */
} sl_rvc_ent_t;

static inline const uint8_t *sl_rvc_key(const sl_rvc_ent_t *e) { return e->data; }
static inline uint8_t *sl_rvc_val(sl_rvc_ent_t *e) { return e->data + e->klen; }
static inline const uint8_t *sl_rvc_cval(const sl_rvc_ent_t *e) { return e->data + e->klen; }
static inline bool sl_rvc_absent(const sl_rvc_ent_t *e) { return e->absent != 0; }

typedef struct sl_rvc_stats {
    uint64_t hits, misses;      /* sl_rvc_find results */
    uint64_t inserts, evictions;
    uint64_t evicted_dirty;     /* victims handed to the write callback */
    uint64_t flushes;           /* sl_rvc_flush calls that wrote something */
    uint64_t flushed;           /* entries handed to the write callback by flushes */
    uint64_t captures;          /* sl_rvc_capture calls */
    uint64_t captured;          /* entries handed to captures (their dirty values) */
    uint64_t cow_copies;        /* captured entries copied by a change while frozen */
    uint64_t written_back;      /* captured values written by sl_rvc_step or a flush */
    uint64_t evicted_captured;  /* captured entries evicted (handed to their generation) */
    uint64_t entries, dirty;    /* now (dirty: not in the database yet, captured ones included) */
    uint64_t bytes, budget;     /* now (entries and table), and the budget */
    uint64_t generations;       /* now: captured generations not yet retired */
    uint64_t captured_bytes;    /* now: frozen entries out of the table (outside bytes) */
} sl_rvc_stats_t;

typedef struct sl_rvc sl_rvc_t;
typedef struct sl_rvc_capture sl_rvc_capture_t;

/* Called with each dirty entry that is written back (by eviction or flush):
 * absent entries are deletes, present ones puts.  The entry is valid only
 * during the call. */
typedef void (*sl_rvc_write_cb)(void *ctx, const sl_rvc_ent_t *e);

/* A cache of at most about `budget` bytes (entries, their keys and values,
 * and the table; allocator overhead estimated). */
sl_rvc_t *sl_rvc_new(size_t budget);
/* Frees every entry, dirty or not (nothing is written); captured entries
 * go when their last capture is released. */
void sl_rvc_free(sl_rvc_t *c);

/* The entry of key (hash = sl_hash_bytes(key, klen)), or NULL.  A hit sets
 * the entry's reference bit. */
sl_rvc_ent_t *sl_rvc_find(sl_rvc_t *c, const void *key, uint32_t klen, uint64_t hash);

/* Bytes an entry of this key and value length costs (for make_room). */
size_t sl_rvc_cost(uint32_t klen, uint32_t vlen);

/* True when an entry of this cost may be cached at all (a value larger than
 * a quarter of the budget is not: it would evict too much). */
bool sl_rvc_fits(const sl_rvc_t *c, size_t cost);

/* Evicts (CLOCK) until `need` more bytes fit, never evicting `keep` (may be
 * NULL).  Dirty victims go to write(ctx, e) before they are freed; the
 * caller writes them out (after this returns) before it reads the database.
 * Returns the number of dirty victims. */
int sl_rvc_make_room(sl_rvc_t *c, size_t need, const sl_rvc_ent_t *keep, sl_rvc_write_cb write, void *ctx);

/* Inserts a new entry (the key must not be in the cache) with value v (vlen
 * bytes; NULL with vlen 0 and SL_RVC_ABSENT for a negative entry) and flags
 * (SL_RVC_REF is added).  Does not evict: call make_room first. */
sl_rvc_ent_t *sl_rvc_insert(sl_rvc_t *c, const void *key, uint32_t klen, uint64_t hash, const void *v, uint32_t vlen,
                            uint32_t flags);

/* Gives e the value v (vlen bytes; v may not point into e) and makes it
 * present; the entry may move (or be copied, when captured): the new
 * pointer is returned.  Does not evict.  Dirtiness is the caller's
 * business (sl_rvc_mark). */
sl_rvc_ent_t *sl_rvc_set_value(sl_rvc_t *c, sl_rvc_ent_t *e, const void *v, uint32_t vlen);

/* Makes e absent (its value bytes are kept as capacity); returns the
 * entry's pointer (a copy when e was captured). */
sl_rvc_ent_t *sl_rvc_set_absent(sl_rvc_t *c, sl_rvc_ent_t *e);

/* Sets or clears SL_RVC_DIRTY, keeping the dirty vector in step; returns
 * the entry's pointer (a copy when e was captured and this changes it). */
sl_rvc_ent_t *sl_rvc_mark(sl_rvc_t *c, sl_rvc_ent_t *e, bool dirty);

/* Hands every dirty entry — captured ones not yet written back first — to
 * write(ctx, e) and makes it clean (IN_DB then says whether it is
 * present).  Returns the number written. */
uint64_t sl_rvc_flush(sl_rvc_t *c, sl_rvc_write_cb write, void *ctx);

/* Number of entries whose value the database does not have yet (dirty
 * ones and captured ones not yet written back). */
uint64_t sl_rvc_ndirty(const sl_rvc_t *c);

/* Drops every entry (dirty ones included: flush first to keep them). */
void sl_rvc_clear(sl_rvc_t *c);

/* Removes e from the cache (nothing is written). */
void sl_rvc_drop(sl_rvc_t *c, sl_rvc_ent_t *e);

void sl_rvc_stats(const sl_rvc_t *c, sl_rvc_stats_t *out);

/* ---- captures ---- */

/* The dirty values as they are now, for a snapshot taken at the same
 * moment: O(captured generations), no entry touched.  The cache goes on
 * with an empty dirty set.  Task thread; never NULL. */
sl_rvc_capture_t *sl_rvc_capture(sl_rvc_t *c);

/* The captured entries in bytewise order of key (no key twice), built on
 * the first call (O(n log n)); *n gets their number.  Entries with
 * e->absent are deletes.  The array and the entries' key, value and
 * absence are valid and unchanging until the capture is released.  Any
 * thread, also several at once. */
const sl_rvc_ent_t *const *sl_rvc_capture_entries(sl_rvc_capture_t *cap, size_t *n);

/* Releases the capture (frees generations no one holds any more).  Any
 * thread, once; NULL is ignored. */
void sl_rvc_capture_release(sl_rvc_capture_t *cap);

/* True while captured generations are not yet retired: the task should
 * call sl_rvc_step. */
bool sl_rvc_busy(const sl_rvc_t *c);

/* The task's share of the captures' work, a little per call: writes up to
 * `max` captured values back through write(ctx, e) (the caller commits
 * them before it reads the database again) and retires generations that
 * are written back and no capture holds, freeing their superseded copies
 * a few thousand at a time (max 0: only that).  Returns the number of
 * values written. */
size_t sl_rvc_step(sl_rvc_t *c, size_t max, sl_rvc_write_cb write, void *ctx);

#endif
