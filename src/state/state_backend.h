/*
 * state_backend.h — the keyed state backend interface.
 *
 * One backend instance serves one keyed operator in one subtask and holds
 * the key groups of that subtask's range.  Every entry is addressed by
 * (state id, key group, key bytes, namespace bytes): the namespace is what
 * Flink calls the state's namespace — the window for window state, empty
 * for a process function.  Values are opaque bytes.
 *
 * The operator sets the current key (sl_kb_set_key) before it touches
 * state; every call below works on the current key.  The interface is a
 * table of function pointers (like SQLite's VFS) so that a RocksDB backend
 * can implement it with the key group as the key prefix.
 *
 * Threading: a backend is owned by its task's thread; no locking.  The
 * one exception is a snapshot view (sl_kb_snapshot_t): snapshot_write and
 * snapshot_release may run on any thread while the task keeps using the
 * backend (the heap backend's copy-on-write makes that safe: see
 * heap_backend.c).
 *
 * Pointers returned by get/get_mut stay valid until the next call that
 * modifies the same state (put, get_mut creating an entry, append, remove,
 * clear) — callers copy what they keep.  snapshot() counts as a modifying
 * call for pointers obtained from get_mut: write through them before the
 * snapshot, never after it (the write would reach the snapshot).
 *
 * Checkpoints (see "Snapshots" below): snapshot() is the synchronous phase
 * and costs O(states x key groups), never O(entries); snapshot_write()
 * serializes one key group of the snapshot in the canonical keyed-state
 * format, on any thread, while the task keeps changing the backend;
 * restore() loads one key group, so a subtask at another parallelism
 * restores exactly the key groups of its new range.
 */
#ifndef SL_STATE_BACKEND_H
#define SL_STATE_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "common/common.h"
#include "state/key_group.h"

typedef enum sl_state_kind {
    SL_STATE_VALUE = 0,  /* one value per (key, ns) */
    SL_STATE_LIST,       /* list of byte strings per (key, ns) */
    SL_STATE_MAP,        /* user-key -> value per (key, ns) */
} sl_state_kind_t;

/* State time-to-live (Flink's StateTtlConfig; processing time only).
 * A state with ttl_ms > 0 stores, in front of every value, list element
 * and map value, an 8-byte little-endian timestamp: the processing time
 * (ms, the backend's clock) of its last write (or last read, with
 * SL_TTL_ON_READ_AND_WRITE).  It expires when ts + ttl_ms <= now.  The
 * timestamp is part of the stored bytes, so it travels through snapshots
 * in the canonical format unchanged; backends know the layout so they can
 * leave expired entries out of snapshots and clean them up (heap: a few
 * entries per access; RocksDB: a compaction filter). */
typedef enum sl_ttl_update {
    SL_TTL_ON_CREATE_AND_WRITE = 0,
    SL_TTL_ON_READ_AND_WRITE,
} sl_ttl_update_t;

typedef struct sl_state_desc {
    const char *name;    /* unique within the operator */
    sl_state_kind_t kind;
    int64_t ttl_ms;      /* 0: no TTL */
    sl_ttl_update_t ttl_update;
} sl_state_desc_t;

/* The TTL timestamp prefix of a stored value (see sl_state_desc_t). */
#define SL_TTL_TS_BYTES 8

typedef struct sl_keyed_backend sl_keyed_backend_t;
typedef struct sl_kb_snapshot sl_kb_snapshot_t;

/* Iteration callbacks return 0 to go on, non-zero to stop (that value is
 * returned by the iterating call). */
typedef int (*sl_kb_list_cb)(void *c, const void *v, uint32_t len);
typedef int (*sl_kb_map_cb)(void *c, const void *k, uint32_t klen, const void *v, uint32_t vlen);
typedef int (*sl_kb_entry_cb)(void *c, const void *key, uint32_t klen, const void *ns, uint32_t nslen);

typedef struct sl_keyed_backend_ops {
    const char *name;
    /* Registers a state; returns its id (>= 0) or < 0.  Registering the
     * same name twice returns the same id. */
    int (*register_state)(sl_keyed_backend_t *b, const sl_state_desc_t *d);

    /* VALUE: NULL when absent. */
    const void *(*get)(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, uint32_t *vlen);
    /* VALUE: a writable value of exactly vlen bytes; when absent it is
     * created zero-filled and *created set.  After changing it call put
     * with the same pointer (a no-op for the heap backend). */
    void *(*get_mut)(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, uint32_t vlen,
                     bool *created);
    int (*put)(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, const void *v, uint32_t vlen);
    /* Removes the (key, ns) entry of any kind. */
    int (*remove)(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen);

    /* LIST */
    int (*list_add)(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, const void *v, uint32_t vlen);
    /* Calls cb for each element in insertion order; returns the number of
     * elements (or the callback's non-zero value). */
    int (*list_foreach)(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, sl_kb_list_cb cb, void *c);
    /* Replaces the list with n elements (vals[i], lens[i]); n = 0 removes. */
    int (*list_replace)(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, int n,
                        const void *const *vals, const uint32_t *lens);

    /* MAP */
    const void *(*map_get)(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, const void *uk,
                           uint32_t uklen, uint32_t *vlen);
    int (*map_put)(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, const void *uk, uint32_t uklen,
                   const void *v, uint32_t vlen);
    int (*map_remove)(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, const void *uk,
                      uint32_t uklen);
    int (*map_foreach)(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, sl_kb_map_cb cb, void *c);

    /* Every (key, ns) that has state `sid`, across all key groups (for
     * tests, queryable state and "apply to all keys").  The callback must
     * not modify the state it iterates. */
    int (*foreach_entry)(sl_keyed_backend_t *b, int sid, sl_kb_entry_cb cb, void *c);
    /* Number of (key, ns) entries of state sid. */
    int64_t (*count)(sl_keyed_backend_t *b, int sid);

    /* Optional: starts loading the memory that a later access of (key with
     * this hash in key group kg, ns) of state sid will touch.  A hint: no
     * effect on results. */
    void (*prefetch)(sl_keyed_backend_t *b, int sid, int kg, uint64_t keyhash, const void *ns, uint32_t nslen);

    void (*destroy)(sl_keyed_backend_t *b);

    /* ---- Snapshots (checkpoints) ----
     *
     * snapshot: the synchronous phase.  Returns in *out an immutable view
     * of every registered state at this instant, in O(states x key groups)
     * time and without copying entries; later calls on the backend do not
     * change what the view shows.  The caller owns the view and frees it
     * with snapshot_release.  0 or < 0.  Task thread.
     *
     * snapshot_write: the asynchronous phase.  Appends key group kg of the
     * view to out in the canonical keyed-state format (below).
     * May run on any thread, concurrently with the task using the backend
     * and with other snapshot_write calls on the same view.  0, or
     * SL_EINVAL for a key group outside the view's range.
     *
     * snapshot_release: frees the view; any thread, once, after every
     * snapshot_write on it returned.  A view may outlive its backend.
     *
     * restore: loads one key group's block (as written by snapshot_write
     * of any backend with the same max parallelism, at any parallelism)
     * into this backend, whose key group kg must hold no state yet.  A
     * state in the block that is not registered is registered on the fly
     * (its id is what register_state returns for the same name and kind
     * later) and keeps what the block says of its TTL timestamps until it
     * is declared (register_state then migrates its items if the
     * declaration's TTL-ness differs); one registered with another kind,
     * or declared before the restore with the other TTL-ness, is an
     * error.  The block is checked whole (checksum, structure, every
     * key's key group) before anything is loaded, and an error while
     * loading (a duplicate entry) removes what was loaded: the key group
     * is all restored or left empty (states registered on the fly stay
     * registered).  0, or < 0
     * with a message in err naming what is wrong.  Does not change the
     * current key.  Task thread. */
    int (*snapshot)(sl_keyed_backend_t *b, sl_kb_snapshot_t **out);
    int (*snapshot_write)(const sl_kb_snapshot_t *s, int kg, sl_buf_t *out);
    void (*snapshot_release)(sl_kb_snapshot_t *s);
    int (*restore)(sl_keyed_backend_t *b, int kg, const uint8_t *data, size_t len, char *err, size_t errlen);

    /* Optional (queryable state, taskmanager/state_query.c): the name,
     * kind and TTL (0: none) of registered state sid, without registering
     * anything; ids are 0, 1, ... and SL_ENOTFOUND answers the first id
     * past the last.  The name is valid until the backend is destroyed.
     * Task thread. */
    int (*state_info)(sl_keyed_backend_t *b, int sid, const char **name, sl_state_kind_t *kind, int64_t *ttl_ms);

    /* Optional (queryable state: every namespace of one key): as
     * foreach_entry, for the entries of key group kg only (which must be
     * in the backend's range; SL_EINVAL otherwise).  Costs that key
     * group's share of the state, not the whole range's.  Task thread. */
    int (*foreach_entry_kg)(sl_keyed_backend_t *b, int sid, int kg, sl_kb_entry_cb cb, void *c);
} sl_keyed_backend_ops_t;

/* What every backend's snapshot starts with, so that a checkpoint writer
 * holding only the view can dispatch (sl_kb_snapshot_write). */
struct sl_kb_snapshot {
    const sl_keyed_backend_ops_t *ops;
    int max_parallelism;
    sl_kg_range_t range;
};

/* The part every backend shares; backends embed it first. */
struct sl_keyed_backend {
    const sl_keyed_backend_ops_t *ops;
    int max_parallelism;
    sl_kg_range_t range;
    /* current key (set by sl_kb_set_key; bytes owned by the backend) */
    uint8_t *key;
    uint32_t keylen, keycap;
    uint64_t keyhash;
    int kg;
    /* processing-time clock for TTL (ms); NULL: wall clock.  Tests set a
     * manual one with sl_kb_set_clock. */
    int64_t (*clock)(void *ctx);
    void *clock_ctx;
};

/* The backend's TTL clock: b->clock or the wall clock (ms). */
int64_t sl_kb_now_ms(const sl_keyed_backend_t *b);
void sl_kb_set_clock(sl_keyed_backend_t *b, int64_t (*clock)(void *ctx), void *ctx);

/* The heap backend: a hash table per (state, key group). */
sl_keyed_backend_t *sl_heap_backend_new(int max_parallelism, sl_kg_range_t range);

/* Sets the current key; computes its hash and key group.  Returns the key
 * group (asserted to be inside the backend's range). */
int sl_kb_set_key(sl_keyed_backend_t *b, const void *key, uint32_t len);
/* Same, when the caller already knows the hash. */
int sl_kb_set_key_hashed(sl_keyed_backend_t *b, const void *key, uint32_t len, uint64_t hash);
void sl_kb_base_init(sl_keyed_backend_t *b, const sl_keyed_backend_ops_t *ops, int maxp, sl_kg_range_t r);
void sl_kb_base_free(sl_keyed_backend_t *b);

/* Copy-on-write counters of the heap backend (task thread; for tests and
 * checkpoint metrics).  The synchronous phase never copies: sync_cells is
 * always 0, sync_tables counts the (state, key group) tables it visited. */
typedef struct sl_heap_cow_stats {
    uint64_t snapshots;      /* snapshot() calls */
    uint64_t sync_tables;    /* tables visited by snapshot() (O(states x key groups)) */
    uint64_t sync_cells;     /* cells copied by snapshot(): 0 by design */
    uint64_t cow_copies;     /* key-group tables copied by a write after a snapshot */
    uint64_t cow_bytes;      /* bytes those copies took (cells, spilled entries, map tables) */
    uint64_t cow_reclaimed;  /* tables taken back without a copy: their snapshots were released */
} sl_heap_cow_stats_t;
void sl_heap_backend_cow_stats(const sl_keyed_backend_t *b, sl_heap_cow_stats_t *out);

/* Bytes of live state the heap backend holds: per-state table arrays,
 * every key group's cells, out-of-line (spilled) blocks and nested map
 * tables.  Counted at each allocation and free (O(1) here); storage that
 * only a snapshot still holds (copy-on-write) is not counted.  Task thread. */
int64_t sl_heap_backend_memory(const sl_keyed_backend_t *b);
/* The same figure by walking every table (for tests of the accounting). */
int64_t sl_heap_backend_memory_walk(const sl_keyed_backend_t *b);

/* Memory of a keyed backend, for the stateMemoryBytes metric and, on
 * RocksDB, Flink's RocksDB native metrics (RocksDBNativeMetricOptions).
 * RocksDB fields are -1 on the heap backend. */
typedef struct sl_kb_memory {
    /* heap: sl_heap_backend_memory.  RocksDB: memtables + table readers +
     * the value cache + the block cache's usage when the cache is the
     * backend's own (a shared cache is not any one backend's) */
    int64_t state_bytes;
    int64_t rocksdb_cur_size_all_mem_tables;   /* rocksdb.cur-size-all-mem-tables */
    int64_t rocksdb_estimate_table_readers_mem; /* rocksdb.estimate-table-readers-mem */
    int64_t rocksdb_block_cache_usage;          /* rocksdb.block-cache-usage (the whole cache if shared) */
    int64_t rocksdb_estimate_live_data_size;    /* rocksdb.estimate-live-data-size (SST data, on disk) */
} sl_kb_memory_t;
/* Fills *out for a heap or RocksDB backend (RocksDB: reads its
 * properties, a few microseconds; callers rate-limit).  0, or SL_EINVAL
 * for another backend or NULL.  Task thread. */
int sl_kb_memory(sl_keyed_backend_t *b, sl_kb_memory_t *out);

/* ------------------------------------------------------------------ */
/* Snapshot dispatch (state_snapshot.c): the checkpoint writer's side.  */

/* s->ops->snapshot_write(s, kg, out) / s->ops->snapshot_release(s). */
int sl_kb_snapshot_write(const sl_kb_snapshot_t *s, int kg, sl_buf_t *out);
void sl_kb_snapshot_release(sl_kb_snapshot_t *s);

/* ------------------------------------------------------------------ */
/* The canonical keyed-state format (state_snapshot.c).
 *
 * One block per key group; the same bytes whichever backend wrote them,
 * so a checkpoint or a savepoint can be restored into any backend.
 * varint = unsigned LEB128, minimal (no redundant 0x80 groups), at most
 * 32 bits for lengths and counts; bytes = varint length, then the bytes.
 *
 *   block    := "SLKS" u8:version(2) varint:max_parallelism varint:key_group
 *               varint:nstates state* u64le:checksum
 *   state    := bytes:name u8:kind(0 value, 1 list, 2 map) | flags
 *               varint:nentries entry*
 *   flags    := 0x80 (SL_KBF_TTL): every value, list element and map value
 *               starts with the 8-byte TTL timestamp (sl_state_desc_t);
 *               0x40 (SL_KBF_TTL_UNKNOWN): whether they do is not known (a
 *               state restored from a version-1 block, never declared since);
 *               neither: no timestamp
 *   entry    := bytes:key bytes:namespace body
 *   body     := value:  bytes:value
 *             | list:   varint:n (>= 1) bytes:element*        (list order)
 *             | map:    varint:n (>= 1) (bytes:user_key bytes:value)*
 *   checksum := xxh3-64 of every byte of the block before it
 *
 * Writers emit every registered state (also those with no entry in the key
 * group), states in bytewise order of name, entries in bytewise order of
 * key then namespace, map entries in bytewise order of user key: equal
 * state gives equal bytes.  Readers accept any order but reject duplicates,
 * a key whose key group is not the block's, a max parallelism other than
 * theirs, and anything malformed.
 *
 * Version 1 (before the flags): the same without flags; whether its items
 * carry timestamps is not recorded, so readers report it as unknown
 * (SL_KBF_TTL_IS_UNKNOWN) and a backend lets the state's declaration decide,
 * as it did before version 2.  Version 2 readers reject unknown flag bits;
 * version 1 readers reject a version 2 block by its version.
 *
 * TTL migration (Flink 2.2's TtlAwareSerializer): a state restored with
 * timestamps and declared without a TTL (or the other way round) has its
 * items rewritten in place by register_state (sl_kb_ttl_migrate): stripped,
 * or given the backend's clock at that moment as their last access.  A
 * changed TTL duration needs nothing (the timestamp is the last access).
 *
 * The helpers below write and parse it; a backend's restore runs the
 * parser twice: once to check everything, once to load. */
#define SL_KB_FORMAT_VERSION 2
#define SL_KBF_TTL 0x80u
#define SL_KBF_TTL_UNKNOWN 0x40u
/* What a block says of a state's items (the visitor's `ttl`). */
#define SL_KBF_TTL_IS_NO 0
#define SL_KBF_TTL_IS_YES 1
#define SL_KBF_TTL_IS_UNKNOWN (-1)
#define SL_KB_FORMAT_MAX_STATES 65536 /* states of one operator, a sanity bound for readers */

/* Writing: begin appends the header (nstates included) and returns the
 * block's start offset in out; end appends the checksum of out[start..]. */
size_t sl_kbf_begin(sl_buf_t *out, int max_parallelism, int kg, uint32_t nstates);
void sl_kbf_end(sl_buf_t *out, size_t start);
void sl_kbf_varint(sl_buf_t *out, uint64_t v);
void sl_kbf_bytes(sl_buf_t *out, const void *p, uint32_t n);
/* The kind byte of a version-2 state header: kind | the flags of ttl
 * (SL_KBF_TTL_IS_*). */
static inline uint8_t sl_kbf_kind_byte(sl_state_kind_t kind, int ttl) {
    return (uint8_t)((unsigned)kind | (ttl == SL_KBF_TTL_IS_YES  ? SL_KBF_TTL
                                       : ttl == SL_KBF_TTL_IS_NO ? 0u
                                                                 : SL_KBF_TTL_UNKNOWN));
}
/* A state's header: name, kind with the flags of ttl (SL_KBF_TTL_IS_*),
 * number of entries. */
void sl_kbf_state(sl_buf_t *out, const char *name, uint32_t namelen, sl_state_kind_t kind, int ttl,
                  uint32_t nentries);
static inline void sl_kbf_u8(sl_buf_t *out, uint8_t v) { sl_buf_append(out, &v, 1); }

/* Parsing.  The visitor's calls come in block order; each returns 0 to go
 * on or < 0 to stop (that code is returned; the visitor writes err). */
typedef struct sl_kbf_visitor {
    /* ttl: SL_KBF_TTL_IS_YES / _NO / _UNKNOWN (a version-1 block, or the flag) */
    int (*state)(void *c, const char *name, uint32_t namelen, sl_state_kind_t kind, int ttl, uint32_t nentries);
    /* n: 1 for a value, the elements of a list, the user keys of a map. */
    int (*entry)(void *c, const uint8_t *key, uint32_t klen, const uint8_t *ns, uint32_t nslen, uint32_t n);
    /* One value, list element or map entry (uk NULL, uklen 0 unless map). */
    int (*item)(void *c, const uint8_t *uk, uint32_t uklen, const uint8_t *v, uint32_t vlen);
} sl_kbf_visitor_t;

/* Checks the block (checksum, version, max parallelism, key group, every
 * length, every key hashing into kg) and walks it with v (NULL: check
 * only).  0, or SL_EFORMAT with err saying what and where (or the code a
 * visitor call returned). */
int sl_kbf_parse(const uint8_t *data, size_t len, int max_parallelism, int kg, const sl_kbf_visitor_t *v,
                 void *c, char *err, size_t errlen);

/* Bounds-checked reading, shared with the timer format. */
typedef struct sl_kbf_reader {
    const uint8_t *base, *p, *end;
} sl_kbf_reader_t;
bool sl_kbf_rd_varint32(sl_kbf_reader_t *r, uint32_t *v);
bool sl_kbf_rd_bytes(sl_kbf_reader_t *r, const uint8_t **p, uint32_t *n);
bool sl_kbf_rd_u8(sl_kbf_reader_t *r, uint8_t *v);
bool sl_kbf_rd_u64(sl_kbf_reader_t *r, uint64_t *v);
/* Checks magic, version (keyed state: 1 or 2; others: 1), max parallelism,
 * key group and checksum of a block and positions r after its header (end
 * excludes the checksum).
 * what names the block in messages ("keyed state", "timers"). */
int sl_kbf_open(sl_kbf_reader_t *r, const uint8_t *data, size_t len, const char magic[4], int max_parallelism,
                int kg, const char *what, char *err, size_t errlen);
/* The header shared by the block kinds (magic, version — 2 for keyed state,
 * 1 for the others —, max parallelism, key group); returns the block's
 * start offset, for sl_kbf_end. */
size_t sl_kbf_begin_magic(sl_buf_t *out, const char magic[4], int max_parallelism, int kg);
/* "value", "list", "map". */
const char *sl_kbf_kind_name(int kind);

/* Schema evolution (restore of typed state, row_migration.h): rewrites a
 * block into out (cleared first) with every value, list element and map
 * value of the states for which fn returns a migration rewritten by it
 * (an identity migration only checks that each is a row of the schema);
 * fn returns NULL for a state to copy as it is.  The block is checked as
 * sl_kbf_parse does.  0, or < 0 with err naming the state. */
typedef const struct sl_row_migration *(*sl_kbf_migration_fn)(void *c, const char *name, uint32_t namelen,
                                                              sl_state_kind_t kind, int *ttl);
/* (*ttl: what the block says of the state's timestamps, SL_KBF_TTL_IS_*;
 * fn may resolve SL_KBF_TTL_IS_UNKNOWN from what it knows, e.g. the TTL the
 * typed states' record holds.  The rewritten block is version 2 with the
 * resolved flag; a row migration's items are migrated after their
 * timestamp when *ttl is YES, or when it stays UNKNOWN and the migration
 * has the timestamp prefix.) */
int sl_kbf_migrate(const uint8_t *data, size_t len, int max_parallelism, int kg, sl_kbf_migration_fn fn, void *c,
                   sl_buf_t *out, char *err, size_t errlen);

/* TTL migration (state_snapshot.c): rewrites every item of state sid (of
 * this kind) in place through the backend's own calls — add: each value,
 * list element and map value gets the 8-byte timestamp ts in front;
 * otherwise the first 8 bytes are stripped (SL_EFORMAT for a shorter
 * item).  Keeps the current key.  Backends call it from register_state
 * when a restored state is declared with the other TTL-ness.  0 or < 0. */
int sl_kb_ttl_migrate(sl_keyed_backend_t *b, int sid, sl_state_kind_t kind, bool add, int64_t ts);

#endif
