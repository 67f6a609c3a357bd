/*
 * rocksdb_backend.h — the RocksDB keyed state backend (Flink's
 * EmbeddedRocksDBStateBackend): the interface of state_backend.h on one
 * RocksDB database per backend instance, for state larger than memory, and
 * native incremental checkpoints of that database.
 *
 * Everything of state_backend.h holds (ops->name is "rocksdb"), with these
 * differences a caller can see (rocksdb_backend.c explains why):
 *
 *   - get/get_mut/map_get return a copy of the stored value in a buffer the
 *     backend keeps per state (8-byte aligned).  It stays valid until the
 *     next modifying call on the same state, as the interface says, or until
 *     that state has served SL_RDB_PIN_MAX_READS more reads (a state that is
 *     only ever read would otherwise keep every value it returned).
 *   - get_mut: writing through the pointer changes nothing stored until put
 *     is called with it (a created or resized value is stored as returned, at
 *     the next call on the backend).  Callers check ops->name (the window
 *     operator's put_after_mut).
 *   - VALUE states go through a write-back cache (rocksdb_cache.h, opts
 *     value_cache_bytes): their changes reach RocksDB when evicted, when
 *     something reads RocksDB otherwise (native snapshot, foreach_entry,
 *     count, restore, compaction), or, after a snapshot() captured them, a
 *     few per later backend call.  snapshot() captures the dirty values
 *     without writing or copying them (O(1)) and costs O(states) like the
 *     heap's; snapshot_write merges them over the database snapshot.  A
 *     native snapshot still writes them all (and flushes the memtables).
 *   - list_foreach element pointers are 8-byte aligned and live as long as a
 *     get pointer; map_foreach pointers only during the callback.
 *   - count and foreach_entry scan the state: O(entries of the state).
 *     prefetch is NULL.
 *   - a RocksDB read or write error is remembered (sl_rocksdb_backend_error):
 *     from then on every modifying call and snapshot() fail with SL_ESTATE,
 *     so a task that read wrong state cannot complete a checkpoint with it.
 *   - the TTL clock (sl_kb_set_clock) is also called from RocksDB's
 *     compaction threads: it must be thread-safe.
 *
 * Threads: like every backend, owned by its task's thread; snapshot_write
 * and snapshot_release of a view (and sl_rocksdb_files_free) on any thread.
 * A view may outlive its backend: the database closes, and its working
 * directory is removed, when the backend and its last view are gone.
 */
#ifndef SL_ROCKSDB_BACKEND_H
#define SL_ROCKSDB_BACKEND_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "state/rocksdb_cache.h"
#include "state/state_backend.h"

/* Reads of one state after which its oldest returned values may be reused. */
#define SL_RDB_PIN_MAX_READS 4096

/* A block cache shared by the backends of a process (Flink's managed
 * memory): every backend created with it counts its data, index and filter
 * blocks against one capacity.  Backends keep their own reference, so the
 * caller may free its handle as soon as the backends are created. */
typedef struct sl_rocksdb_cache sl_rocksdb_cache_t;
sl_rocksdb_cache_t *sl_rocksdb_cache_new(size_t bytes);
void sl_rocksdb_cache_free(sl_rocksdb_cache_t *c);
/* Bytes the cache holds now (all backends using it). */
size_t sl_rocksdb_cache_usage(const sl_rocksdb_cache_t *c);

/* Creation options.  Memory of one backend is bounded by
 *   block cache (shared, or block_cache_bytes of its own: data blocks and,
 *                cached with them, the SSTs' index and filter blocks)
 * + write_buffer_bytes (memtables: two of write_buffer_bytes / 2 each; a full
 *                       one is flushed to an SST in the background)
 * + value_cache_bytes (the write-back cache of VALUE states; while a
 *                      checkpoint is written, up to as much again for the
 *                      values changed since, copied on write)
 * + the reads pinned for get pointers and a snapshot_write's one key group
 *   of one state being sorted (like the heap backend's).
 * Zero fields take the defaults in brackets. */
typedef struct sl_rocksdb_opts {
    const char *dir;              /* working directory: created (with its parents); must not exist or be
                                   * empty; removed with everything in it when the backend is gone */
    sl_rocksdb_cache_t *cache;    /* shared block cache, or NULL for one of block_cache_bytes */
    size_t block_cache_bytes;     /* [8 MiB] */
    size_t write_buffer_bytes;    /* [64 MiB] memtable budget of this database */
    int background_jobs;          /* [2] flush and compaction threads */
    int max_open_files;           /* [-1: unlimited] SST readers kept open */
    int64_t value_cache_bytes;    /* [write_buffer_bytes] write-back cache of VALUE states; < 0: none */
    int value_cache_writeback;    /* [32] values a snapshot captured that each later backend call
                                   * writes back to RocksDB (rocksdb_backend.c, "Snapshots"); < 0:
                                   * none (they reach it when evicted or flushed) */
} sl_rocksdb_opts_t;

/* A new, empty backend for key groups `range` of max_parallelism.  NULL
 * with a message in err when the directory or the database cannot be made.
 * Destroy with ops->destroy. */
sl_keyed_backend_t *sl_rocksdb_backend_new(int max_parallelism, sl_kg_range_t range, const sl_rocksdb_opts_t *opts,
                                           char *err, size_t errlen);

/* True when b is a RocksDB backend. */
bool sl_rocksdb_backend_is(const sl_keyed_backend_t *b);

/* ---- Native checkpoints (Flink's incremental RocksDB checkpoints) ----
 *
 * A native snapshot is the database itself: its memtables are flushed and
 * RocksDB's checkpoint hard-links every live SST file into a new directory
 * next to copies of the small MANIFEST, CURRENT and OPTIONS files.  That is
 * the synchronous phase (measured in sync_ns); uploading the files happens
 * afterwards, on any thread, while the task goes on.
 *
 * Incremental uploads: an SST file is immutable and RocksDB never reuses a
 * file number within a database, so within one backend instance (the same
 * `instance` string) an SST of the same name in two checkpoints is the same
 * file: the caller uploads only the names it has not uploaded before for
 * that instance and refers to the earlier copies for the rest.  Across
 * instances names mean nothing: two backends restored from one checkpoint
 * (a split after rescaling) continue numbering from the same point and make
 * different files with equal names.  Files that open_native took over keep
 * their names and contents, so they equal the files of the checkpoint
 * directory they came from.  MANIFEST, CURRENT and OPTIONS are private:
 * upload them with every checkpoint. */
typedef struct sl_rocksdb_file {
    char *name;    /* file name inside the checkpoint directory */
    uint64_t size; /* bytes */
    bool shared;   /* an immutable SST (see above) */
} sl_rocksdb_file_t;

typedef struct sl_rocksdb_files {
    sl_rocksdb_file_t *v; /* by name */
    int n;
    char instance[33];    /* this backend instance (hex): scope of shared SST names */
    int64_t flush_ns;     /* memtable flush */
    int64_t sync_ns;      /* the whole synchronous phase: flush + checkpoint */
} sl_rocksdb_files_t;

/* Flushes the memtables and creates a RocksDB checkpoint in dir (which must
 * not exist; its parent must, on the same filesystem as the working
 * directory for hard links), listing its files in *out (free with
 * sl_rocksdb_files_free).  Task thread.  0 or < 0 with err. */
int sl_rocksdb_native_snapshot(sl_keyed_backend_t *b, const char *dir, sl_rocksdb_files_t *out, char *err,
                               size_t errlen);
void sl_rocksdb_files_free(sl_rocksdb_files_t *f);

/* A backend for key groups `range` restored from native checkpoint
 * directories dirs[i], each holding key groups dir_ranges[i] (ranges of the
 * same max parallelism that do not overlap inside `range` and together cover
 * it; directories outside `range` are ignored).  When one directory holds
 * all of `range` its files become the new database (SSTs hard-linked, or
 * copied across filesystems) and the key groups outside `range` are deleted
 * (DeleteRange); otherwise (rescaling to fewer subtasks) a new database is
 * filled with the entries of `range` from each directory, opened read-only.
 * The states registered in the checkpoints are registered again (same name,
 * kind and TTL).  The directories are only read.  NULL with err. */
sl_keyed_backend_t *sl_rocksdb_backend_open_native(int max_parallelism, sl_kg_range_t range,
                                                   const char *const *dirs, const sl_kg_range_t *dir_ranges,
                                                   int ndirs, const sl_rocksdb_opts_t *opts, char *err,
                                                   size_t errlen);

/* ---- Maintenance and introspection ---- */

/* Flushes the memtables and compacts the whole database, twice (the first
 * pass merges list appends into values, the second lets the TTL compaction
 * filter see them).  Task thread.  0 or < 0 with err. */
int sl_rocksdb_compact(sl_keyed_backend_t *b, char *err, size_t errlen);

typedef struct sl_rocksdb_mem {
    uint64_t memtables;        /* rocksdb.cur-size-all-mem-tables */
    uint64_t block_cache;      /* rocksdb.block-cache-usage (the whole cache if shared) */
    uint64_t block_cache_cap;  /* rocksdb.block-cache-capacity */
    uint64_t table_readers;    /* rocksdb.estimate-table-readers-mem (outside the cache) */
    uint64_t live_sst_bytes;   /* rocksdb.live-sst-files-size (disk) */
    uint64_t value_cache;      /* the backend's value cache (entries and table, and the copies of
                                * captured values that checkpoints being written still read) */
    uint64_t live_data;        /* rocksdb.estimate-live-data-size */
    bool own_block_cache;      /* the block cache is this backend's (not a shared one) */
} sl_rocksdb_mem_t;
int sl_rocksdb_memory(sl_keyed_backend_t *b, sl_rocksdb_mem_t *out);

/* The first RocksDB error the backend met (NULL: none). */
const char *sl_rocksdb_backend_error(const sl_keyed_backend_t *b);

/* Counters of the value cache; SL_ENOTFOUND when the backend has none. */
int sl_rocksdb_value_cache_stats(const sl_keyed_backend_t *b, sl_rvc_stats_t *out);

#endif
