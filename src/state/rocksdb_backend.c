/*
 * rocksdb_backend.c — the RocksDB keyed state backend (Flink's
 * EmbeddedRocksDBStateBackend) behind the interface of state_backend.h.
 *
 * Layout.  One RocksDB database per backend instance, one column family
 * (the default), keys
 *
 *   kg (2 bytes, big-endian) | state id (2 bytes, big-endian)
 *   | varint key length | key | varint namespace length | namespace
 *   | map user key (MAP only: the rest of the RocksDB key)
 *
 * and the value bytes as given (VALUE, MAP) or the list's elements (LIST).
 * The key group first makes a key-group range one contiguous key range:
 * a snapshot_write iterates one key group, a restore deletes one on failure,
 * open_native drops the key groups outside its range with two DeleteRange
 * calls, and a rescale copies a range with one scan.  The lengths make the
 * (key, namespace) part prefix-free, so the user keys of one map are exactly
 * the keys that start with its prefix, in bytewise order.
 *
 * A state id in the key rather than a column family per state (Flink's
 * choice): one memtable budget and one set of SST files for the whole
 * backend, so memory is bounded by one write-buffer setting whatever the
 * number of states, a native checkpoint is one file list, and a key-group
 * range is dropped or copied in one operation instead of one per state.
 * The price — states interleaved per key group, so walking one state over
 * every key group needs a seek per key group — is paid only by count and
 * foreach_entry.  The registry of states (name, kind, TTL by id) lives in
 * the same database under the metadata prefix 0xFFFF (key groups stop at
 * 32767), next to the layout version and max parallelism, so a native
 * checkpoint knows its states.
 *
 * Lists.  A list value is its elements, each a varint length and the bytes;
 * list_add is a RocksDB merge of one encoded element (the merge operator
 * concatenates, as Flink's does), so appending never reads the list.
 * list_foreach reads the merged value.
 *
 * Order of snapshot blocks.  The canonical format wants entries in bytewise
 * order of key, then namespace; RocksDB returns them in the order of their
 * encoding, which is the same whenever the keys (and the namespaces of a
 * key) have equal lengths — the usual case — but not in general.
 * snapshot_write collects a state's entries of the key group, checks the
 * order as it goes, and sorts only when it was not already right.  User
 * keys of a map follow their prefix raw, so they always come sorted.
 *
 * Values returned by get.  RocksDB (and the cache, which evicts) has no
 * stable pointer into its data, so get/get_mut/map_get/list_foreach copy
 * into an arena per state.  The
 * arena is reset by the next modifying call on that state (the interface's
 * rule), or when it has served SL_RDB_PIN_MAX_READS reads (a state that is
 * only read would otherwise grow it without end).  get_mut returns an arena
 * copy; a put with it writes it.  A created or resized value must exist at
 * once, as in the heap backend: it is written back at the next call on the
 * backend, unless that call is the put of the same entry (so get_mut + put
 * of a new entry costs one write).
 *
 * The value cache (rocksdb_cache.h).  Point accesses of VALUE states — get,
 * get_mut, put, remove; ValueState, reducing and aggregating state and the
 * contents of aggregate/reduce windows — go through a write-back table keyed
 * by the encoded RocksDB key, bounded by a byte budget (default: as large as
 * the write buffer).  A miss reads RocksDB once and caches the value or its
 * absence (new keys are common); put and remove only change the entry and
 * mark it dirty; a value created and removed between two flushes never
 * reaches RocksDB.  Dirty entries are written in one batch by whatever
 * reads RocksDB other than a VALUE point read — a native snapshot,
 * foreach_entry, count, restore (which then empties the cache: it writes
 * behind it), compaction —, by eviction (CLOCK) when the budget is
 * exceeded, and after snapshot() captured them a few per backend call
 * (rdb_vc_step, from rdb_begin).  Values larger than a quarter of the
 * budget bypass it.  Lists and maps are not cached: list_add stays a blind merge.  Values
 * returned to callers are still arena copies (below), so an eviction caused
 * by any call can never invalidate a pointer a caller holds.  TTL: the
 * cache returns stored bytes as RocksDB would, timestamp included; the TTL
 * accessors (ttl.c) decide expiry on them, so an expired value is never
 * returned whether it came from the cache or the database.  The compaction
 * filter may drop an expired value that the cache still holds clean: the
 * cache then shows it "not yet cleaned up", which TTL allows, and an
 * explicit sl_rocksdb_compact empties the cache.
 *
 * Snapshots.  snapshot() captures the cache's dirty values (sl_rvc_capture:
 * O(1), nothing written or copied — the cache copies a captured entry when
 * the task changes it), takes a RocksDB snapshot at the same moment and
 * copies the state registry: O(states), whatever the cache holds.
 * snapshot_write reads one key group through the RocksDB snapshot with its
 * own iterator and merges the captured values of that key group over it
 * (captured values win, captured absences are deletes: the same entries,
 * so the same bytes, as writing them first and reading RocksDB), on any
 * thread; RocksDB makes that safe with the task writing, the capture by
 * never changing what it shows.  The view holds a reference on the database
 * (the "core") and on the capture, so it may outlive the backend.  The
 * captured values still have to reach RocksDB: the task writes
 * RDB_VC_STEP of them (opts value_cache_writeback) per later backend call,
 * RDB_VC_CALLS calls' worth in one batch (rdb_vc_step), and every
 * flush writes what is left.
 *
 * TTL.  Values of a state with ttl_ms > 0 start with an 8-byte LE
 * timestamp (state_backend.h).  snapshot_write leaves out expired values,
 * list elements and map entries, expired meaning ts + ttl <= the clock
 * read by snapshot().  A compaction filter (one per compaction, from a
 * factory) drops expired values and map entries and rewrites lists without
 * their expired elements; its "now" is the clock at the compaction's start
 * but never later than the time of a live snapshot view, so that a
 * compaction can never remove what a pending snapshot_write must write.
 * List appends still waiting as merge operands are not filtered (RocksDB's
 * C API filters values only): they are once a compaction has merged them.
 *
 * Durability.  The write-ahead log is off (as in Flink): state is recovered
 * from checkpoints only, and a native checkpoint flushes the memtables.
 *
 * Memory (rocksdb_backend.h has the formula).  Memtables: two of half the
 * write budget, each with a whole-key bloom filter (a tenth of its size)
 * so that point reads of keys it does not hold skip its skiplist.  Block
 * cache: data blocks and the SSTs' index and filter blocks, partitioned in
 * 4 KiB pieces under a pinned top level — a whole filter of a large SST
 * is bigger than one shard of the cache, could never stay in it, and was
 * read from the file on every lookup (measured: most of the time of a
 * get_mut on existing keys, before partitioning).
 */
#include "state/rocksdb_backend.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <rocksdb/c.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"
#include "state/rocksdb_cache.h"

#define RDB_LAYOUT_VERSION 1u
#define RDB_MAX_STATES 65536 /* ids are 2 bytes */
#define RDB_META 0xFFu       /* first byte of metadata keys; key groups stay below 0x8000 */
#define RDB_KPFX 4u          /* kg + state id */
#define RDB_MERGE_NAME "sluice.list_append.v1"
#define RDB_FILTER_NAME "sluice.ttl_filter.v1"
#define RDB_BATCH_BYTES (4u << 20) /* restore and rescale write batches */
#define RDB_PIN_BASE_MAX (256u << 10)
#define RDB_PIN_MAX_BYTES (16u << 20)
#define RDB_VC_STEP 32u /* captured values written back per backend call (default), on average: */
#define RDB_VC_CALLS 32u /* in one batch every RDB_VC_CALLS calls (a RocksDB write costs at least a
                          * millisecond while RocksDB delays writes) */

/* ------------------------------------------------------------------ */
/* small encodings                                                     */

static inline uint8_t *rdb_be16(uint8_t *p, unsigned v) {
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
    return p + 2;
}
static inline unsigned rdb_ld_be16(const uint8_t *p) { return (unsigned)p[0] << 8 | p[1]; }

static inline uint8_t *rdb_varint(uint8_t *p, uint32_t v) {
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* Reads a varint of at most 32 bits from [*p, end); false when malformed. */
static bool rdb_rd_varint(const uint8_t **p, const uint8_t *end, uint32_t *v) {
    uint64_t x = 0;
    for (int i = 0; i < 5 && *p < end; i++) {
        uint8_t b = *(*p)++;
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            if (x > UINT32_MAX) return false;
            *v = (uint32_t)x;
            return true;
        }
    }
    return false;
}

static inline size_t rdb_pad8(size_t n) { return (n + 7) & ~(size_t)7; }

static int rdb_bytes_cmp(const uint8_t *a, uint32_t an, const uint8_t *b, uint32_t bn) {
    int c = memcmp(a, b, SL_MIN(an, bn));
    return c ? c : (an > bn) - (an < bn);
}

/* The parts of a state key. */
typedef struct rdb_kparts {
    unsigned kg, sid;
    const uint8_t *key, *ns, *rest;
    uint32_t klen, nslen;
    size_t pfxlen;  /* bytes up to the end of the namespace */
    size_t restlen; /* the map user key */
} rdb_kparts_t;

static bool rdb_parse_key(const void *data, size_t n, rdb_kparts_t *o) {
    const uint8_t *p = data, *end = p + n;
    if (n < RDB_KPFX + 2 || p[0] >= RDB_META) return false;
    o->kg = rdb_ld_be16(p);
    o->sid = rdb_ld_be16(p + 2);
    p += RDB_KPFX;
    if (!rdb_rd_varint(&p, end, &o->klen) || (size_t)(end - p) < o->klen) return false;
    o->key = p;
    p += o->klen;
    if (!rdb_rd_varint(&p, end, &o->nslen) || (size_t)(end - p) < o->nslen) return false;
    o->ns = p;
    p += o->nslen;
    o->pfxlen = (size_t)(p - (const uint8_t *)data);
    o->rest = p;
    o->restlen = (size_t)(end - p);
    return true;
}

/* kg | sid | key | ns into kb (replacing its contents). */
static void rdb_key_into(sl_buf_t *kb, int kg, int sid, const void *key, uint32_t klen, const void *ns,
                         uint32_t nslen) {
    kb->len = 0;
    sl_buf_reserve(kb, RDB_KPFX + 10 + (size_t)klen + nslen);
    uint8_t *p = rdb_be16(kb->p, (unsigned)kg);
    p = rdb_be16(p, (unsigned)sid);
    p = rdb_varint(p, klen);
    if (klen) memcpy(p, key, klen);
    p = rdb_varint(p + klen, nslen);
    if (nslen) memcpy(p, ns, nslen);
    kb->len = (size_t)(p + nslen - kb->p);
}

/* The smallest key above every key that starts with p[0..n) (p is not all
 * 0xFF: state keys start below 0x80). */
static void rdb_prefix_end(sl_buf_t *out, const uint8_t *p, size_t n) {
    out->len = 0;
    sl_buf_append(out, p, n);
    while (out->len && out->p[out->len - 1] == 0xFF) out->len--;
    if (out->len) out->p[out->len - 1]++;
}

/* An element of a list value: varint length, bytes.  Walks [p, end);
 * false at the end or when malformed (*bad set). */
static bool rdb_list_next(const uint8_t **p, const uint8_t *end, const uint8_t **el, uint32_t *len, bool *bad) {
    if (*p >= end) return false;
    if (!rdb_rd_varint(p, end, len) || (size_t)(end - *p) < *len) {
        *bad = true;
        return false;
    }
    *el = *p;
    *p += *len;
    return true;
}

/* TTL: expired when ts + ttl <= now (never on overflow). */
static inline bool rdb_expired(const void *v, size_t len, int64_t ttl, int64_t now) {
    if (len < SL_TTL_TS_BYTES) return false;
    int64_t ts = (int64_t)sl_ld64(v), exp;
    if (__builtin_add_overflow(ts, ttl, &exp)) return false;
    return exp <= now;
}

/* ------------------------------------------------------------------ */
/* directories                                                         */

static int rdb_mkdirs(const char *path, char *err, size_t errlen) {
    char *p = sl_strdup(path);
    int rc = SL_OK;
    for (char *s = p + 1;; s++) {
        if (*s && *s != '/') continue;
        char c = *s;
        *s = 0;
        if (mkdir(p, 0755) != 0 && errno != EEXIST) {
            rc = sl_errf(err, errlen, SL_EIO, "rocksdb state backend: cannot create directory '%s': %s", p,
                         strerror(errno));
            break;
        }
        *s = c;
        if (!c) break;
    }
    sl_free(p);
    return rc;
}

/* 1 empty, 0 not, < 0 cannot read. */
static int rdb_dir_empty(const char *path) {
    DIR *d = opendir(path);
    if (!d) return -1;
    struct dirent *e;
    int empty = 1;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) {
            empty = 0;
            break;
        }
    closedir(d);
    return empty;
}

/* A fresh working directory: absent (created) or empty. */
static int rdb_prepare_dir(const char *dir, char *err, size_t errlen) {
    struct stat st;
    if (stat(dir, &st) == 0) {
        if (!S_ISDIR(st.st_mode))
            return sl_errf(err, errlen, SL_EINVAL, "rocksdb state backend: '%s' exists and is not a directory", dir);
        int e = rdb_dir_empty(dir);
        if (e < 0)
            return sl_errf(err, errlen, SL_EIO, "rocksdb state backend: cannot read directory '%s': %s", dir,
                           strerror(errno));
        if (!e)
            return sl_errf(err, errlen, SL_EINVAL,
                           "rocksdb state backend: working directory '%s' is not empty (each backend needs a "
                           "fresh one)",
                           dir);
        return SL_OK;
    }
    if (errno != ENOENT)
        return sl_errf(err, errlen, SL_EIO, "rocksdb state backend: cannot use '%s': %s", dir, strerror(errno));
    return rdb_mkdirs(dir, err, errlen);
}

static int rdb_rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    SL_UNUSED(sb);
    SL_UNUSED(flag);
    SL_UNUSED(ftw);
    remove(p);
    return 0;
}
static void rdb_rm_rf(const char *path) { nftw(path, rdb_rm_cb, 16, FTW_DEPTH | FTW_PHYS); }

static int rdb_copy_file(const char *src, const char *dst, char *err, size_t errlen) {
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0)
        return sl_errf(err, errlen, SL_EIO, "rocksdb state backend: cannot open '%s': %s", src, strerror(errno));
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0) {
        int e = errno;
        close(in);
        return sl_errf(err, errlen, SL_EIO, "rocksdb state backend: cannot create '%s': %s", dst, strerror(e));
    }
    static const size_t bufsz = 1 << 16;
    char *buf = sl_malloc(bufsz);
    int rc = SL_OK;
    for (;;) {
        ssize_t n = read(in, buf, bufsz);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            rc = sl_errf(err, errlen, SL_EIO, "rocksdb state backend: cannot read '%s': %s", src, strerror(errno));
            break;
        }
        if (n == 0) break;
        int e = sl_write_all(out, buf, (size_t)n);
        if (e) {
            rc = sl_errf(err, errlen, SL_EIO, "rocksdb state backend: cannot write '%s': %s", dst, strerror(e));
            break;
        }
    }
    sl_free(buf);
    close(in);
    if (close(out) != 0 && rc == SL_OK)
        rc = sl_errf(err, errlen, SL_EIO, "rocksdb state backend: cannot write '%s': %s", dst, strerror(errno));
    return rc;
}

static bool rdb_is_sst(const char *name) {
    size_t n = strlen(name);
    return n > 4 && strcmp(name + n - 4, ".sst") == 0;
}

/* ------------------------------------------------------------------ */
/* TTL bookkeeping shared with compaction threads                      */

typedef struct rdb_tstate {
    uint8_t kind;
    int64_t ttl_ms;
} rdb_tstate_t;

typedef struct rdb_ttl {
    pthread_mutex_t mu;
    rdb_tstate_t *s; /* by state id */
    int n, cap;
    int64_t *snaps;  /* clock of each live snapshot view */
    int nsnaps, capsnaps;
    int64_t (*clock)(void *ctx); /* the backend's clock (NULL: wall clock) */
    void *clock_ctx;
    bool enabled;    /* false once the backend is gone (its clock may be too) */
} rdb_ttl_t;

static void rdb_ttl_set(rdb_ttl_t *t, int sid, sl_state_kind_t kind, int64_t ttl_ms) {
    pthread_mutex_lock(&t->mu);
    if (sid >= t->cap) {
        int nc = SL_MAX(t->cap * 2, SL_MAX(sid + 1, 8));
        t->s = sl_realloc(t->s, (size_t)nc * sizeof *t->s);
        memset(t->s + t->cap, 0, (size_t)(nc - t->cap) * sizeof *t->s);
        t->cap = nc;
    }
    t->s[sid].kind = (uint8_t)kind;
    t->s[sid].ttl_ms = ttl_ms;
    if (sid >= t->n) t->n = sid + 1;
    pthread_mutex_unlock(&t->mu);
}

/* A compaction's filter: a copy of the TTL table and its "now". */
typedef struct rdb_filter {
    rdb_tstate_t *s;
    int n;           /* 0: nothing to filter */
    int64_t cutoff;
    sl_buf_t buf;    /* a rewritten list (RocksDB copies it) */
} rdb_filter_t;

static unsigned char rdb_filter(void *state, int level, const char *key, size_t klen, const char *val, size_t vlen,
                                char **nv, size_t *nvlen, unsigned char *changed) {
    SL_UNUSED(level);
    rdb_filter_t *f = state;
    const uint8_t *k = (const uint8_t *)key;
    if (!f->n || klen < RDB_KPFX || k[0] >= RDB_META) return 0;
    unsigned sid = rdb_ld_be16(k + 2);
    if (sid >= (unsigned)f->n || f->s[sid].ttl_ms <= 0) return 0;
    int64_t ttl = f->s[sid].ttl_ms;
    if (f->s[sid].kind != SL_STATE_LIST) return rdb_expired(val, vlen, ttl, f->cutoff);
    const uint8_t *p = (const uint8_t *)val, *end = p + vlen, *el;
    uint32_t len, kept = 0, dropped = 0;
    bool bad = false;
    while (rdb_list_next(&p, end, &el, &len, &bad)) {
        if (rdb_expired(el, len, ttl, f->cutoff)) dropped++;
        else kept++;
    }
    if (bad || !dropped) return 0; /* a malformed list is kept as it is */
    if (!kept) return 1;
    f->buf.len = 0;
    for (p = (const uint8_t *)val; rdb_list_next(&p, end, &el, &len, &bad);) {
        if (rdb_expired(el, len, ttl, f->cutoff)) continue;
        uint8_t hdr[5];
        sl_buf_append(&f->buf, hdr, (size_t)(rdb_varint(hdr, len) - hdr));
        sl_buf_append(&f->buf, el, len);
    }
    *nv = (char *)f->buf.p;
    *nvlen = f->buf.len;
    *changed = 1;
    return 0;
}

static void rdb_filter_free(void *state) {
    rdb_filter_t *f = state;
    sl_free(f->s);
    sl_buf_free(&f->buf);
    sl_free(f);
}
static const char *rdb_filter_name(void *state) {
    SL_UNUSED(state);
    return RDB_FILTER_NAME;
}

/* Compaction thread: one filter per (sub)compaction. */
static rocksdb_compactionfilter_t *rdb_filter_create(void *state, rocksdb_compactionfiltercontext_t *ctx) {
    SL_UNUSED(ctx);
    rdb_ttl_t *t = state;
    rdb_filter_t *f = sl_calloc(1, sizeof *f);
    pthread_mutex_lock(&t->mu);
    bool any = false;
    for (int i = 0; t->enabled && i < t->n; i++) any |= t->s[i].ttl_ms > 0;
    if (any) {
        f->n = t->n;
        f->s = sl_malloc((size_t)t->n * sizeof *f->s);
        memcpy(f->s, t->s, (size_t)t->n * sizeof *f->s);
        int64_t now = t->clock ? t->clock(t->clock_ctx) : sl_wall_ms();
        for (int i = 0; i < t->nsnaps; i++) now = SL_MIN(now, t->snaps[i]);
        f->cutoff = now;
    }
    pthread_mutex_unlock(&t->mu);
    return rocksdb_compactionfilter_create(f, rdb_filter_free, rdb_filter, rdb_filter_name);
}

static void rdb_nop_free(void *state) { SL_UNUSED(state); }
static const char *rdb_factory_name(void *state) {
    SL_UNUSED(state);
    return RDB_FILTER_NAME ".factory";
}

/* ------------------------------------------------------------------ */
/* the list merge operator: concatenation                              */

static char *rdb_concat(const char *first, size_t firstlen, const char *const *ops, const size_t *lens, int n,
                        size_t *outlen) {
    size_t total = firstlen;
    for (int i = 0; i < n; i++) total += lens[i];
    char *p = sl_malloc(total ? total : 1), *q = p;
    if (firstlen) memcpy(q, first, firstlen);
    q += firstlen;
    for (int i = 0; i < n; i++) {
        if (lens[i]) memcpy(q, ops[i], lens[i]);
        q += lens[i];
    }
    *outlen = total;
    return p;
}

static char *rdb_merge_full(void *state, const char *key, size_t klen, const char *ev, size_t evlen,
                            const char *const *ops, const size_t *lens, int n, unsigned char *success,
                            size_t *newlen) {
    SL_UNUSED(state);
    SL_UNUSED(key);
    SL_UNUSED(klen);
    *success = 1;
    return rdb_concat(ev, ev ? evlen : 0, ops, lens, n, newlen);
}

static char *rdb_merge_partial(void *state, const char *key, size_t klen, const char *const *ops, const size_t *lens,
                               int n, unsigned char *success, size_t *newlen) {
    SL_UNUSED(state);
    SL_UNUSED(key);
    SL_UNUSED(klen);
    *success = 1;
    return rdb_concat(NULL, 0, ops, lens, n, newlen);
}

static void rdb_merge_free_value(void *state, const char *v, size_t n) {
    SL_UNUSED(state);
    SL_UNUSED(n);
    sl_free((void *)(uintptr_t)v);
}
static const char *rdb_merge_name(void *state) {
    SL_UNUSED(state);
    return RDB_MERGE_NAME;
}

/* ------------------------------------------------------------------ */
/* the database ("core"): shared by the backend and its snapshot views */

struct sl_rocksdb_cache {
    rocksdb_cache_t *c;
};

sl_rocksdb_cache_t *sl_rocksdb_cache_new(size_t bytes) {
    sl_rocksdb_cache_t *c = sl_calloc(1, sizeof *c);
    c->c = rocksdb_cache_create_lru(bytes);
    return c;
}

void sl_rocksdb_cache_free(sl_rocksdb_cache_t *c) {
    if (!c) return;
    rocksdb_cache_destroy(c->c); /* the backends keep their own references */
    sl_free(c);
}

size_t sl_rocksdb_cache_usage(const sl_rocksdb_cache_t *c) { return c ? rocksdb_cache_get_usage(c->c) : 0; }

typedef struct rdb_core {
    atomic_int refs;          /* the backend, plus each snapshot view */
    rocksdb_t *db;
    rocksdb_options_t *opts;
    rocksdb_writeoptions_t *wo;
    rocksdb_readoptions_t *ro; /* point reads of the task thread */
    char *dir;                 /* removed with the core */
    rdb_ttl_t ttl;
} rdb_core_t;

#define RDB_MIB ((size_t)1 << 20)

/* Options of a backend's database (ttl: the compaction filter's table) or,
 * with ttl NULL, of a checkpoint opened read-only. */
static rocksdb_options_t *rdb_make_options(const sl_rocksdb_opts_t *o, rdb_ttl_t *ttl) {
    rocksdb_options_t *opt = rocksdb_options_create();
    size_t wb = o && o->write_buffer_bytes ? o->write_buffer_bytes : 64 * RDB_MIB;
    int jobs = o && o->background_jobs > 0 ? o->background_jobs : 2;
    rocksdb_options_set_create_if_missing(opt, 1);
    rocksdb_options_set_max_background_jobs(opt, jobs);
    rocksdb_options_set_write_buffer_size(opt, SL_MAX(wb / 2, (size_t)64 << 10));
    rocksdb_options_set_max_write_buffer_number(opt, 2);
    rocksdb_options_set_db_write_buffer_size(opt, wb);
    /* A whole-key bloom filter per memtable (a tenth of its size, counted in
     * it): point reads of keys a memtable does not hold — new keys, and keys
     * already flushed — skip its skiplist. */
    rocksdb_options_set_memtable_prefix_bloom_size_ratio(opt, 0.1);
    rocksdb_options_set_memtable_whole_key_filtering(opt, 1);
    rocksdb_options_set_max_open_files(opt, o && o->max_open_files ? o->max_open_files : -1);
    rocksdb_options_set_info_log_level(opt, 3 /* ERROR */);
    rocksdb_options_set_keep_log_file_num(opt, 2);
    rocksdb_options_set_stats_dump_period_sec(opt, 0);
    rocksdb_options_set_merge_operator(
        opt, rocksdb_mergeoperator_create(NULL, rdb_nop_free, rdb_merge_full, rdb_merge_partial,
                                          rdb_merge_free_value, rdb_merge_name));
    if (ttl)
        rocksdb_options_set_compaction_filter_factory(
            opt, rocksdb_compactionfilterfactory_create(ttl, rdb_nop_free, rdb_filter_create, rdb_factory_name));
    rocksdb_block_based_table_options_t *bbto = rocksdb_block_based_options_create();
    rocksdb_cache_t *own = NULL;
    if (o && o->cache) {
        rocksdb_block_based_options_set_block_cache(bbto, o->cache->c);
    } else {
        own = rocksdb_cache_create_lru(o && o->block_cache_bytes ? o->block_cache_bytes : 8 * RDB_MIB);
        rocksdb_block_based_options_set_block_cache(bbto, own);
    }
    /* Index and filter blocks are charged to the cache: memory stays bounded
     * by its capacity however many SST files there are. */
    rocksdb_block_based_options_set_cache_index_and_filter_blocks(bbto, 1);
    rocksdb_block_based_options_set_pin_l0_filter_and_index_blocks_in_cache(bbto, 1);
    rocksdb_block_based_options_set_filter_policy(bbto, rocksdb_filterpolicy_create_bloom_full(10));
    /* ... partitioned (4 KiB pieces under a small pinned top level): a large
     * SST's whole filter would not fit one shard of the cache and would be
     * read from the file on every lookup. */
    rocksdb_block_based_options_set_index_type(bbto, rocksdb_block_based_table_index_type_two_level_index_search);
    rocksdb_block_based_options_set_partition_filters(bbto, 1);
    rocksdb_block_based_options_set_metadata_block_size(bbto, 4096);
    rocksdb_block_based_options_set_pin_top_level_index_and_filter(bbto, 1);
    rocksdb_options_set_block_based_table_factory(opt, bbto); /* copies; holds the cache */
    rocksdb_block_based_options_destroy(bbto);
    if (own) rocksdb_cache_destroy(own);
    return opt;
}

static void rdb_core_unref(rdb_core_t *c) {
    if (!c || atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1) return;
    if (c->db) rocksdb_close(c->db);
    if (c->opts) rocksdb_options_destroy(c->opts);
    if (c->wo) rocksdb_writeoptions_destroy(c->wo);
    if (c->ro) rocksdb_readoptions_destroy(c->ro);
    if (c->dir) rdb_rm_rf(c->dir);
    sl_free(c->dir);
    pthread_mutex_destroy(&c->ttl.mu);
    sl_free(c->ttl.s);
    sl_free(c->ttl.snaps);
    sl_free(c);
}

/* Opens (creating if needed) the database in o->dir, which the caller has
 * prepared; on failure removes it. */
static rdb_core_t *rdb_core_open(const sl_rocksdb_opts_t *o, char *err, size_t errlen) {
    rdb_core_t *c = sl_calloc(1, sizeof *c);
    atomic_init(&c->refs, 1);
    c->dir = sl_strdup(o->dir);
    pthread_mutex_init(&c->ttl.mu, NULL);
    c->ttl.enabled = true;
    c->opts = rdb_make_options(o, &c->ttl);
    char *e = NULL;
    c->db = rocksdb_open(c->opts, c->dir, &e);
    if (e) {
        sl_errf(err, errlen, SL_ESTATE, "rocksdb state backend: cannot open the database in '%s': %s", c->dir, e);
        rocksdb_free(e);
        c->db = NULL;
        rdb_core_unref(c);
        return NULL;
    }
    c->wo = rocksdb_writeoptions_create();
    rocksdb_writeoptions_disable_WAL(c->wo, 1);
    c->ro = rocksdb_readoptions_create();
    return c;
}

/* ------------------------------------------------------------------ */
/* the backend                                                         */

/* Values handed out by reads of one state (see the header comment). */
typedef struct rdb_arena {
    uint8_t *base;
    size_t cap, used;
    void **big;    /* values that did not fit in base; freed at reset */
    int nbig, capbig;
    size_t bigbytes;
    uint32_t nvals;
} rdb_arena_t;

typedef struct rdb_state {
    char *name;
    sl_state_kind_t kind;
    int64_t ttl_ms;
    sl_ttl_update_t ttl_update;
    bool restored; /* registered by a restore, not declared yet: register_state sets the TTL */
    int8_t items;  /* its items carry the TTL timestamp: SL_KBF_TTL_IS_YES / _NO / _UNKNOWN
                    * (restored from a version-1 block, not declared yet) */
    rdb_arena_t pin;
} rdb_state_t;

typedef struct rdb_backend {
    sl_keyed_backend_t base; /* first: the ops receive &base */
    rdb_core_t *core;
    rdb_state_t *states;
    int nstates, capstates;
    sl_buf_t k, k2, tmp;     /* scratch: keys, encoded values */
    /* a value created or resized by get_mut, stored at the next call:
     * into the cache entry pent, or (pent NULL) into RocksDB under pkey */
    bool pending;
    int psid;
    sl_buf_t pkey;
    sl_rvc_ent_t *pent;
    const void *pval;
    uint32_t plen;
    /* the write-back cache of VALUE states (NULL: off) and the batch that
     * carries its dirty entries to RocksDB */
    sl_rvc_t *vc;
    rocksdb_writebatch_t *vwb;
    size_t vc_step;    /* captured values written back per call (rdb_vc_step) */
    uint32_t vc_calls; /* calls since the last rdb_vc_step */
    /* the clock last passed to the compaction filter */
    int64_t (*seen_clock)(void *);
    void *seen_ctx;
    int errc; /* first RocksDB error (sticky) */
    char err[512];
    char instance[33];
    bool own_cache; /* its block cache is its own (opts->cache NULL) */
} rdb_backend_t;

static const sl_keyed_backend_ops_t rdb_ops;

static inline rdb_backend_t *RB(sl_keyed_backend_t *b) { return (rdb_backend_t *)b; }

static void rdb_arena_reset(rdb_arena_t *a) {
    for (int i = 0; i < a->nbig; i++) sl_free(a->big[i]);
    if (a->bigbytes && a->cap < RDB_PIN_BASE_MAX) { /* grow so that next time it fits */
        size_t nc = SL_MIN(SL_MAX(a->cap * 2, rdb_pad8(a->used + a->bigbytes)), (size_t)RDB_PIN_BASE_MAX);
        sl_free(a->base);
        a->base = sl_malloc(nc);
        a->cap = nc;
    }
    a->nbig = 0;
    a->bigbytes = 0;
    a->used = 0;
    a->nvals = 0;
}

static void rdb_arena_free(rdb_arena_t *a) {
    for (int i = 0; i < a->nbig; i++) sl_free(a->big[i]);
    sl_free(a->big);
    sl_free(a->base);
    memset(a, 0, sizeof *a);
}

/* n bytes, 8-byte aligned, never NULL. */
static void *rdb_arena_alloc(rdb_arena_t *a, size_t n) {
    if (a->nvals >= SL_RDB_PIN_MAX_READS || a->used + a->bigbytes >= RDB_PIN_MAX_BYTES) rdb_arena_reset(a);
    size_t need = rdb_pad8(n ? n : 1);
    a->nvals++;
    if (!a->base) {
        a->cap = 4096;
        a->base = sl_malloc(a->cap);
    }
    if (a->used + need <= a->cap) {
        void *p = a->base + a->used;
        a->used += need;
        return p;
    }
    if (a->nbig == a->capbig) {
        a->capbig = a->capbig ? a->capbig * 2 : 8;
        a->big = sl_realloc(a->big, (size_t)a->capbig * sizeof *a->big);
    }
    void *p = sl_malloc(need);
    a->big[a->nbig++] = p;
    a->bigbytes += need;
    return p;
}

/* Records the first RocksDB error; frees e.  Returns SL_ESTATE. */
static int rdb_fail(rdb_backend_t *rb, const char *what, char *e) {
    if (!rb->errc) {
        snprintf(rb->err, sizeof rb->err, "rocksdb state backend ('%s'): %s: %s", rb->core->dir, what,
                 e ? e : "failed");
        rb->errc = SL_ESTATE;
    }
    if (e) rocksdb_free(e);
    return SL_ESTATE;
}

static int rdb_flush_pending(rdb_backend_t *rb) {
    if (!rb->pending) return SL_OK;
    rb->pending = false;
    if (rb->pent) { /* nothing touched the cache since get_mut: the entry is there, as large */
        sl_rvc_ent_t *ent = sl_rvc_set_value(rb->vc, rb->pent, rb->pval, rb->plen);
        (void)sl_rvc_mark(rb->vc, ent, true);
        rb->pent = NULL;
        return SL_OK;
    }
    char *e = NULL;
    rocksdb_put(rb->core->db, rb->core->wo, (const char *)rb->pkey.p, rb->pkey.len, rb->pval, rb->plen, &e);
    return e ? rdb_fail(rb, "put", e) : SL_OK;
}

static void rdb_vc_step(rdb_backend_t *rb);

/* Called first by every operation: passes a new clock on to the
 * compaction filter, stores a pending get_mut value, and (step) writes a
 * few captured values back (rdb_vc_step). */
static inline int rdb_begin_step(rdb_backend_t *rb, bool step) {
    sl_keyed_backend_t *b = &rb->base;
    if (SL_UNLIKELY(b->clock != rb->seen_clock || b->clock_ctx != rb->seen_ctx)) {
        rb->seen_clock = b->clock;
        rb->seen_ctx = b->clock_ctx;
        pthread_mutex_lock(&rb->core->ttl.mu);
        rb->core->ttl.clock = b->clock;
        rb->core->ttl.clock_ctx = b->clock_ctx;
        pthread_mutex_unlock(&rb->core->ttl.mu);
    }
    int rc = rb->pending ? rdb_flush_pending(rb) : SL_OK;
    if (step && rb->vc && SL_UNLIKELY(sl_rvc_busy(rb->vc)) && ++rb->vc_calls >= RDB_VC_CALLS) rdb_vc_step(rb);
    return rc;
}

static inline int rdb_begin(rdb_backend_t *rb) { return rdb_begin_step(rb, true); }

/* Start of a modifying operation: 0, or SL_ESTATE once an error was seen. */
static inline int rdb_begin_write(rdb_backend_t *rb) {
    int rc = rdb_begin(rb);
    return rc ? rc : rb->errc;
}

static inline rdb_state_t *rdb_state(rdb_backend_t *rb, int sid, sl_state_kind_t kind) {
    if (SL_UNLIKELY((unsigned)sid >= (unsigned)rb->nstates)) return NULL;
    rdb_state_t *st = &rb->states[sid];
    return SL_LIKELY(st->kind == kind) ? st : NULL;
}

/* The current key is set (sl_kb_set_key). */
static inline bool rdb_cur_ok(const sl_keyed_backend_t *b) { return b->kg >= b->range.start && b->kg < b->range.end; }

/* rb->k = the key of (current key, ns) in state sid. */
static inline void rdb_cur_key(rdb_backend_t *rb, int sid, const void *ns, uint32_t nslen) {
    rdb_key_into(&rb->k, rb->base.kg, sid, rb->base.key, rb->base.keylen, ns, nslen);
}

/* ---- the state registry ---- */

static void rdb_meta_state_key(uint8_t out[5], int sid) {
    out[0] = RDB_META;
    out[1] = RDB_META;
    out[2] = 'S';
    rdb_be16(out + 3, (unsigned)sid);
}

static int rdb_meta_write_state(rdb_backend_t *rb, int sid) {
    rdb_state_t *st = &rb->states[sid];
    uint8_t key[5];
    rdb_meta_state_key(key, sid);
    size_t nl = strlen(st->name);
    uint8_t *v = sl_malloc(10 + nl);
    v[0] = (uint8_t)st->kind;
    /* the update type, and (bits 4-5) whether the items carry timestamps:
     * 0 (before TTL migration: as ttl_ms says), 1 yes, 2 no, 3 unknown */
    v[1] = (uint8_t)((unsigned)st->ttl_update | (st->items == SL_KBF_TTL_IS_YES  ? 1u << 4
                                                 : st->items == SL_KBF_TTL_IS_NO ? 2u << 4
                                                                                 : 3u << 4));
    sl_st64(v + 2, (uint64_t)st->ttl_ms);
    memcpy(v + 10, st->name, nl);
    char *e = NULL;
    rocksdb_put(rb->core->db, rb->core->wo, (const char *)key, sizeof key, (const char *)v, 10 + nl, &e);
    sl_free(v);
    return e ? rdb_fail(rb, "writing the state registry", e) : SL_OK;
}

static void rdb_meta_version_value(uint8_t v[8], int maxp) {
    sl_st32(v, RDB_LAYOUT_VERSION);
    sl_st32(v + 4, (uint32_t)maxp);
}
static const char rdb_meta_version_key[3] = {(char)RDB_META, (char)RDB_META, 'V'};

/* Adds a state to the table (no checks, no write). */
static int rdb_add_state(rdb_backend_t *rb, const char *name, size_t namelen, sl_state_kind_t kind, int64_t ttl_ms,
                         sl_ttl_update_t upd, bool restored, int items) {
    if (rb->nstates == rb->capstates) {
        rb->capstates = rb->capstates ? rb->capstates * 2 : 4;
        rb->states = sl_realloc(rb->states, (size_t)rb->capstates * sizeof *rb->states);
    }
    int sid = rb->nstates++;
    rdb_state_t *st = &rb->states[sid];
    memset(st, 0, sizeof *st);
    st->name = sl_strndup(name, namelen);
    st->kind = kind;
    st->ttl_ms = ttl_ms > 0 ? ttl_ms : 0;
    st->ttl_update = ttl_ms > 0 ? upd : SL_TTL_ON_CREATE_AND_WRITE;
    st->restored = restored;
    st->items = (int8_t)(restored ? items : st->ttl_ms > 0);
    rdb_ttl_set(&rb->core->ttl, sid, kind, st->ttl_ms);
    return sid;
}

static int rdb_find_state(const rdb_backend_t *rb, const char *name, size_t namelen) {
    for (int i = 0; i < rb->nstates; i++)
        if (strlen(rb->states[i].name) == namelen && memcmp(rb->states[i].name, name, namelen) == 0) return i;
    return -1;
}

/* The id of state `name` for a restore: registered when new (with the TTL
 * the checkpoint knows, 0 for a canonical block, and whether its items
 * carry timestamps), marked as restored so that its declaration sets the
 * TTL; SL_EINVAL for another kind, or items that disagree with the state's. */
static int rdb_register_restored(rdb_backend_t *rb, const char *name, size_t namelen, sl_state_kind_t kind,
                                 int64_t ttl_ms, sl_ttl_update_t upd, int items) {
    int i = rdb_find_state(rb, name, namelen);
    if (i >= 0) {
        int have = rb->states[i].items;
        if (items != SL_KBF_TTL_IS_UNKNOWN && have != SL_KBF_TTL_IS_UNKNOWN && items != have) return SL_EINVAL;
        return rb->states[i].kind == kind ? i : SL_EINVAL;
    }
    if (rb->nstates >= RDB_MAX_STATES) return SL_EINVAL;
    int sid = rdb_add_state(rb, name, namelen, kind, ttl_ms, upd, true, items);
    int rc = rdb_meta_write_state(rb, sid);
    return rc ? rc : sid;
}

/* As the heap backend: a name registered again gives the same id when kind
 * and TTL agree; a state a restore registered takes the TTL it is declared
 * with. */
static int rdb_register_state(sl_keyed_backend_t *b, const sl_state_desc_t *d) {
    rdb_backend_t *rb = RB(b);
    if (!d || !d->name || !d->name[0] || (int)d->kind < SL_STATE_VALUE || d->kind > SL_STATE_MAP || d->ttl_ms < 0 ||
        (int)d->ttl_update < SL_TTL_ON_CREATE_AND_WRITE || d->ttl_update > SL_TTL_ON_READ_AND_WRITE)
        return SL_EINVAL;
    int rc = rdb_begin(rb);
    if (rc) return rc;
    sl_ttl_update_t upd = d->ttl_ms > 0 ? d->ttl_update : SL_TTL_ON_CREATE_AND_WRITE;
    size_t namelen = strlen(d->name);
    int i = rdb_find_state(rb, d->name, namelen);
    if (i < 0) {
        if (rb->nstates >= RDB_MAX_STATES) return SL_EINVAL;
        i = rdb_add_state(rb, d->name, namelen, d->kind, d->ttl_ms, upd, false, 0);
        rc = rdb_meta_write_state(rb, i);
        return rc ? rc : i;
    }
    rdb_state_t *st = &rb->states[i];
    if (st->kind != d->kind) return SL_EINVAL;
    if (st->restored) {
        bool want = d->ttl_ms > 0;
        if (st->items != SL_KBF_TTL_IS_UNKNOWN && (st->items == SL_KBF_TTL_IS_YES) != want) {
            /* TTL migration: rewritten while the state has no TTL here (the
             * compaction filter leaves it alone), through the value cache */
            if (st->ttl_ms) {
                st->ttl_ms = 0;
                rdb_ttl_set(&rb->core->ttl, i, st->kind, 0);
            }
            if ((rc = sl_kb_ttl_migrate(b, i, d->kind, want, sl_kb_now_ms(b))) < 0) return rc;
            st = &rb->states[i];
        }
        st->restored = false;
        int8_t items = want ? SL_KBF_TTL_IS_YES : SL_KBF_TTL_IS_NO;
        if (st->ttl_ms != d->ttl_ms || st->ttl_update != upd || st->items != items) {
            st->ttl_ms = d->ttl_ms;
            st->ttl_update = upd;
            st->items = items;
            rdb_ttl_set(&rb->core->ttl, i, st->kind, st->ttl_ms);
            if ((rc = rdb_meta_write_state(rb, i))) return rc;
        }
    }
    return st->ttl_ms == d->ttl_ms && st->ttl_update == upd ? i : SL_EINVAL;
}

/* ---- point reads ---- */

/* Copies the value of key into st's arena; NULL when absent (or on error). */
static const void *rdb_read(rdb_backend_t *rb, rdb_state_t *st, const sl_buf_t *key, uint32_t *vlen) {
    char *e = NULL;
    rocksdb_pinnableslice_t *ps =
        rocksdb_get_pinned(rb->core->db, rb->core->ro, (const char *)key->p, key->len, &e);
    if (e) {
        rdb_fail(rb, "get", e);
        return NULL;
    }
    if (!ps) return NULL;
    size_t n;
    const char *v = rocksdb_pinnableslice_value(ps, &n);
    void *p = rdb_arena_alloc(&st->pin, n);
    if (n) memcpy(p, v, n);
    rocksdb_pinnableslice_destroy(ps);
    if (vlen) *vlen = (uint32_t)n;
    return p;
}

/* 1 when key exists, 0 when not, < 0 on error. */
static int rdb_exists(rdb_backend_t *rb, const sl_buf_t *key) {
    char *e = NULL;
    rocksdb_pinnableslice_t *ps =
        rocksdb_get_pinned(rb->core->db, rb->core->ro, (const char *)key->p, key->len, &e);
    if (e) return rdb_fail(rb, "get", e);
    if (!ps) return 0;
    rocksdb_pinnableslice_destroy(ps);
    return 1;
}

static int rdb_write_key(rdb_backend_t *rb, const sl_buf_t *key, const void *v, size_t vlen) {
    char *e = NULL;
    rocksdb_put(rb->core->db, rb->core->wo, (const char *)key->p, key->len, v, vlen, &e);
    return e ? rdb_fail(rb, "put", e) : SL_OK;
}

static int rdb_delete_key(rdb_backend_t *rb, const sl_buf_t *key) {
    char *e = NULL;
    rocksdb_delete(rb->core->db, rb->core->wo, (const char *)key->p, key->len, &e);
    return e ? rdb_fail(rb, "delete", e) : SL_OK;
}

/* ---- the value cache (rocksdb_cache.h) ----
 *
 * What goes through it: get, get_mut, put and remove of VALUE states.
 * Everything else that reads the database — snapshot(), a native snapshot,
 * foreach_entry, count, restore, compaction — first writes the dirty
 * entries (rdb_vc_flush); restore also empties the cache, since it writes
 * key groups behind it.  Values handed to callers are arena copies, as
 * without the cache, so an eviction never invalidates a returned pointer. */

/* Write callback: a dirty entry into rb->vwb (committed in pieces of
 * RDB_BATCH_BYTES; errors are sticky, see rdb_fail). */
static int rdb_vc_commit(rdb_backend_t *rb, const char *what) {
    if (!rocksdb_writebatch_count(rb->vwb)) return SL_OK;
    char *e = NULL;
    rocksdb_write(rb->core->db, rb->core->wo, rb->vwb, &e);
    rocksdb_writebatch_clear(rb->vwb);
    return e ? rdb_fail(rb, what, e) : SL_OK;
}

static void rdb_vc_write(void *ctx, const sl_rvc_ent_t *e) {
    rdb_backend_t *rb = ctx;
    const char *k = (const char *)sl_rvc_key(e);
    if (!sl_rvc_absent(e))
        rocksdb_writebatch_put(rb->vwb, k, e->klen, (const char *)e->data + e->klen, e->vlen);
    else if (e->flags & SL_RVC_IN_DB)
        rocksdb_writebatch_delete(rb->vwb, k, e->klen);
    size_t sz = 0;
    rocksdb_writebatch_data(rb->vwb, &sz);
    if (sz >= RDB_BATCH_BYTES) rdb_vc_commit(rb, "writing cached values");
}

/* Writes every dirty entry.  0 or SL_ESTATE. */
static int rdb_vc_flush(rdb_backend_t *rb) {
    if (!rb->vc) return SL_OK;
    sl_rvc_flush(rb->vc, rdb_vc_write, rb);
    int rc = rdb_vc_commit(rb, "writing cached values");
    return rc ? rc : rb->errc;
}

/* The task's share of the captures (rocksdb_cache.h): captured values
 * written back, vc_step per backend call on average in one batch every
 * RDB_VC_CALLS calls, committed at once (nothing may read the database
 * with them still in the batch). */
static void rdb_vc_step(rdb_backend_t *rb) {
    rb->vc_calls = 0;
    if (sl_rvc_step(rb->vc, rb->vc_step * RDB_VC_CALLS, rdb_vc_write, rb))
        rdb_vc_commit(rb, "writing captured values");
}

/* Room for `need` more bytes (never evicting keep); evicted dirty entries
 * are written at once. */
static void rdb_vc_room(rdb_backend_t *rb, size_t need, const sl_rvc_ent_t *keep) {
    if (sl_rvc_make_room(rb->vc, need, keep, rdb_vc_write, rb)) rdb_vc_commit(rb, "writing evicted values");
}

/* Takes the entry of rb->k (hash h) out of the cache, writing it first when
 * dirty: the caller goes to RocksDB directly for it (a value too large to
 * cache). */
static int rdb_vc_forget(rdb_backend_t *rb, uint64_t h) {
    sl_rvc_ent_t *e = sl_rvc_find(rb->vc, rb->k.p, (uint32_t)rb->k.len, h);
    if (!e) return SL_OK;
    if (e->flags & SL_RVC_DIRTY) rdb_vc_write(rb, e);
    sl_rvc_drop(rb->vc, e);
    return rdb_vc_commit(rb, "writing cached values");
}

/* The entry of rb->k (hash h): cached, or read from RocksDB and cached
 * (present or absent).  NULL when it cannot be cached: *ps then holds what
 * RocksDB has (NULL: absent), unless *rc says the read failed.  `room` is
 * the value size the caller will need (get_mut may grow it). */
static sl_rvc_ent_t *rdb_vc_load(rdb_backend_t *rb, uint64_t h, uint32_t room, rocksdb_pinnableslice_t **ps,
                                 int *rc) {
    *ps = NULL;
    *rc = SL_OK;
    sl_rvc_ent_t *e = sl_rvc_find(rb->vc, rb->k.p, (uint32_t)rb->k.len, h);
    if (e) return e;
    char *err = NULL;
    rocksdb_pinnableslice_t *p =
        rocksdb_get_pinned(rb->core->db, rb->core->ro, (const char *)rb->k.p, rb->k.len, &err);
    if (err) {
        *rc = rdb_fail(rb, "get", err);
        return NULL;
    }
    size_t n = 0;
    const char *v = p ? rocksdb_pinnableslice_value(p, &n) : NULL;
    size_t cost = sl_rvc_cost((uint32_t)rb->k.len, (uint32_t)SL_MAX(n, (size_t)room));
    if (n > UINT32_MAX || !sl_rvc_fits(rb->vc, cost)) {
        *ps = p;
        return NULL;
    }
    rdb_vc_room(rb, cost, NULL);
    e = sl_rvc_insert(rb->vc, rb->k.p, (uint32_t)rb->k.len, h, v, (uint32_t)n, p ? SL_RVC_IN_DB : SL_RVC_ABSENT);
    if (p) rocksdb_pinnableslice_destroy(p);
    return e;
}

/* An iterator over [lo, hi) of the live database (or of snap). */
typedef struct rdb_iter {
    rocksdb_readoptions_t *ro;
    rocksdb_iterator_t *it;
} rdb_iter_t;

static void rdb_iter_open(rdb_iter_t *x, rocksdb_t *db, const rocksdb_snapshot_t *snap, const void *hi, size_t hilen,
                          bool fill_cache) {
    x->ro = rocksdb_readoptions_create();
    if (snap) rocksdb_readoptions_set_snapshot(x->ro, snap);
    if (hi) rocksdb_readoptions_set_iterate_upper_bound(x->ro, hi, hilen);
    rocksdb_readoptions_set_fill_cache(x->ro, fill_cache);
    x->it = rocksdb_create_iterator(db, x->ro);
}

/* Closes the iterator; its error (malloc'ed, for rdb_fail) or NULL. */
static char *rdb_iter_close(rdb_iter_t *x) {
    char *e = NULL;
    if (x->it) {
        rocksdb_iter_get_error(x->it, &e);
        rocksdb_iter_destroy(x->it);
    }
    if (x->ro) rocksdb_readoptions_destroy(x->ro);
    x->it = NULL;
    x->ro = NULL;
    return e;
}

static inline const uint8_t *rdb_iter_key(rocksdb_iterator_t *it, size_t *n) {
    return (const uint8_t *)rocksdb_iter_key(it, n);
}

/* ---- VALUE ---- */

static const void *rdb_get(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, uint32_t *vlen) {
    rdb_backend_t *rb = RB(b);
    rdb_begin(rb);
    rdb_state_t *st = rdb_state(rb, sid, SL_STATE_VALUE);
    if (!st || !rdb_cur_ok(b) || (!ns && nslen)) return NULL;
    rdb_cur_key(rb, sid, ns, nslen);
    if (!rb->vc) return rdb_read(rb, st, &rb->k, vlen);
    rocksdb_pinnableslice_t *ps;
    int rc;
    sl_rvc_ent_t *e = rdb_vc_load(rb, sl_hash_bytes(rb->k.p, rb->k.len), 0, &ps, &rc);
    size_t n = 0;
    const void *v;
    if (e) {
        if (sl_rvc_absent(e)) return NULL;
        n = e->vlen;
        v = sl_rvc_val(e);
    } else {
        if (!ps) return NULL; /* absent, or a read error */
        v = rocksdb_pinnableslice_value(ps, &n);
    }
    void *p = rdb_arena_alloc(&st->pin, n);
    if (n) memcpy(p, v, n);
    if (ps) rocksdb_pinnableslice_destroy(ps);
    if (vlen) *vlen = (uint32_t)n;
    return p;
}

/* get_mut through the cache (rb->k is the key; begin_write done). */
static void *rdb_vc_get_mut(rdb_backend_t *rb, rdb_state_t *st, uint32_t vlen, bool *created, bool *uncached) {
    uint64_t h = sl_hash_bytes(rb->k.p, rb->k.len);
    *uncached = false;
    if (!sl_rvc_fits(rb->vc, sl_rvc_cost((uint32_t)rb->k.len, vlen))) {
        *uncached = true;
        rdb_vc_forget(rb, h);
        return NULL;
    }
    rocksdb_pinnableslice_t *ps;
    int rc;
    sl_rvc_ent_t *e = rdb_vc_load(rb, h, vlen, &ps, &rc);
    if (!e) {
        if (ps) { /* the stored value is too large to cache: uncached path */
            rocksdb_pinnableslice_destroy(ps);
            *uncached = true;
        }
        return NULL;
    }
    uint8_t *p = rdb_arena_alloc(&st->pin, vlen);
    bool absent = sl_rvc_absent(e);
    size_t keep = absent ? 0 : SL_MIN((size_t)e->vlen, (size_t)vlen);
    if (keep) memcpy(p, sl_rvc_val(e), keep);
    if (vlen > keep) memset(p + keep, 0, vlen - keep);
    if (created) *created = absent;
    if (absent || e->vlen != vlen) { /* exists as returned now, as the caller changes it before the next call */
        if (vlen > e->vcap) rdb_vc_room(rb, vlen - e->vcap, e);
        e = sl_rvc_set_value(rb->vc, e, p, vlen);
        e = sl_rvc_mark(rb->vc, e, true);
        rb->pending = true;
        rb->psid = (int)(st - rb->states);
        rb->pent = e;
        rb->pval = p;
        rb->plen = vlen;
    }
    return p;
}

static void *rdb_get_mut(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, uint32_t vlen,
                         bool *created) {
    rdb_backend_t *rb = RB(b);
    rdb_state_t *st = rdb_state(rb, sid, SL_STATE_VALUE);
    if (!st || !rdb_cur_ok(b) || (!ns && nslen)) return NULL;
    if (rdb_begin_write(rb)) return NULL;
    rdb_cur_key(rb, sid, ns, nslen);
    if (rb->vc) {
        bool uncached;
        void *p = rdb_vc_get_mut(rb, st, vlen, created, &uncached);
        if (!uncached || rb->errc) return p;
    }
    char *e = NULL;
    rocksdb_pinnableslice_t *ps =
        rocksdb_get_pinned(rb->core->db, rb->core->ro, (const char *)rb->k.p, rb->k.len, &e);
    if (e) {
        rdb_fail(rb, "get", e);
        return NULL;
    }
    uint8_t *p = rdb_arena_alloc(&st->pin, vlen);
    bool dirty = true;
    if (ps) {
        size_t n;
        const char *v = rocksdb_pinnableslice_value(ps, &n);
        size_t keep = SL_MIN(n, (size_t)vlen);
        if (keep) memcpy(p, v, keep);
        if (vlen > keep) memset(p + keep, 0, vlen - keep);
        rocksdb_pinnableslice_destroy(ps);
        dirty = n != vlen;
    } else if (vlen) {
        memset(p, 0, vlen);
    }
    if (created) *created = ps == NULL;
    if (dirty) { /* stored as it is now (or as the caller changes it before the next call) */
        rb->pending = true;
        rb->psid = sid;
        rb->pent = NULL;
        rb->pkey.len = 0;
        sl_buf_append(&rb->pkey, rb->k.p, rb->k.len);
        rb->pval = p;
        rb->plen = vlen;
    }
    return p;
}

static int rdb_put(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, const void *v, uint32_t vlen) {
    rdb_backend_t *rb = RB(b);
    rdb_state_t *st = rdb_state(rb, sid, SL_STATE_VALUE);
    if (!st || (!v && vlen) || (!ns && nslen) || !rdb_cur_ok(b)) return SL_EINVAL;
    rdb_cur_key(rb, sid, ns, nslen);
    /* The put of a pending get_mut value replaces its write-back. */
    if (rb->pending && !rb->pent && rb->psid == sid && rb->pkey.len == rb->k.len &&
        memcmp(rb->pkey.p, rb->k.p, rb->k.len) == 0)
        rb->pending = false;
    int rc = rdb_begin_write(rb);
    if (rc) return rc;
    if (rb->vc) {
        uint64_t h = sl_hash_bytes(rb->k.p, rb->k.len);
        if (sl_rvc_fits(rb->vc, sl_rvc_cost((uint32_t)rb->k.len, vlen))) {
            sl_rvc_ent_t *e = sl_rvc_find(rb->vc, rb->k.p, (uint32_t)rb->k.len, h);
            if (!e) {
                rdb_vc_room(rb, sl_rvc_cost((uint32_t)rb->k.len, vlen), NULL);
                /* RocksDB may hold an older value: a later remove must delete it */
                sl_rvc_insert(rb->vc, rb->k.p, (uint32_t)rb->k.len, h, v, vlen, SL_RVC_DIRTY | SL_RVC_IN_DB);
            } else if (e->flags & SL_RVC_DIRTY || sl_rvc_absent(e) || e->vlen != vlen ||
                       (vlen && memcmp(sl_rvc_val(e), v, vlen) != 0)) { /* (a clean equal value stays clean) */
                if (vlen > e->vcap) rdb_vc_room(rb, vlen - e->vcap, e);
                e = sl_rvc_set_value(rb->vc, e, v, vlen);
                (void)sl_rvc_mark(rb->vc, e, true);
            }
            rdb_arena_reset(&st->pin); /* after the copy: v may point into it */
            return rb->errc;
        }
        if ((rc = rdb_vc_forget(rb, h))) return rc;
    }
    rc = rdb_write_key(rb, &rb->k, v, vlen);
    rdb_arena_reset(&st->pin); /* after the write: v may point into it */
    return rc;
}

/* Deletes every key in [lo, hi) of the live database; the number deleted
 * (or < 0). */
static int64_t rdb_delete_prefix(rdb_backend_t *rb, const sl_buf_t *prefix) {
    rdb_prefix_end(&rb->k2, prefix->p, prefix->len);
    rdb_iter_t x;
    rdb_iter_open(&x, rb->core->db, NULL, rb->k2.p, rb->k2.len, true);
    rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
    int64_t n = 0;
    for (rocksdb_iter_seek(x.it, (const char *)prefix->p, prefix->len); rocksdb_iter_valid(x.it);
         rocksdb_iter_next(x.it)) {
        size_t kl;
        const uint8_t *k = rdb_iter_key(x.it, &kl);
        if (kl < prefix->len || memcmp(k, prefix->p, prefix->len) != 0) break;
        rocksdb_writebatch_delete(wb, (const char *)k, kl);
        n++;
    }
    char *e = rdb_iter_close(&x);
    if (!e && n) rocksdb_write(rb->core->db, rb->core->wo, wb, &e);
    rocksdb_writebatch_destroy(wb);
    return e ? rdb_fail(rb, "delete", e) : n;
}

static int rdb_remove(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen) {
    rdb_backend_t *rb = RB(b);
    if ((unsigned)sid >= (unsigned)rb->nstates || (!ns && nslen) || !rdb_cur_ok(b)) return SL_EINVAL;
    int rc = rdb_begin_write(rb);
    if (rc) return rc;
    rdb_state_t *st = &rb->states[sid];
    rdb_cur_key(rb, sid, ns, nslen);
    int found;
    if (st->kind == SL_STATE_MAP) {
        int64_t n = rdb_delete_prefix(rb, &rb->k);
        found = n < 0 ? (int)n : n > 0;
    } else if (st->kind == SL_STATE_VALUE && rb->vc &&
               sl_rvc_fits(rb->vc, sl_rvc_cost((uint32_t)rb->k.len, 0))) {
        uint64_t h = sl_hash_bytes(rb->k.p, rb->k.len);
        sl_rvc_ent_t *e = sl_rvc_find(rb->vc, rb->k.p, (uint32_t)rb->k.len, h);
        if (e) {
            found = !sl_rvc_absent(e);
            if (found) {
                e = sl_rvc_set_absent(rb->vc, e);
                (void)sl_rvc_mark(rb->vc, e, (e->flags & SL_RVC_IN_DB) != 0); /* nothing to delete otherwise */
            }
        } else if ((found = rdb_exists(rb, &rb->k)) >= 0) {
            rdb_vc_room(rb, sl_rvc_cost((uint32_t)rb->k.len, 0), NULL);
            sl_rvc_insert(rb->vc, rb->k.p, (uint32_t)rb->k.len, h, NULL, 0,
                          SL_RVC_ABSENT | (found ? SL_RVC_IN_DB | SL_RVC_DIRTY : 0));
        }
        if (found >= 0 && rb->errc) found = rb->errc;
    } else {
        found = rdb_exists(rb, &rb->k);
        if (found > 0 && (rc = rdb_delete_key(rb, &rb->k))) found = rc;
    }
    rdb_arena_reset(&st->pin);
    return found;
}

/* ---- LIST ---- */

static void rdb_list_elem(sl_buf_t *out, const void *v, uint32_t len) {
    uint8_t hdr[5];
    sl_buf_append(out, hdr, (size_t)(rdb_varint(hdr, len) - hdr));
    if (len) sl_buf_append(out, v, len);
}

static int rdb_list_add(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, const void *v,
                        uint32_t vlen) {
    rdb_backend_t *rb = RB(b);
    rdb_state_t *st = rdb_state(rb, sid, SL_STATE_LIST);
    if (!st || (!v && vlen) || (!ns && nslen) || !rdb_cur_ok(b)) return SL_EINVAL;
    int rc = rdb_begin_write(rb);
    if (rc) return rc;
    rdb_cur_key(rb, sid, ns, nslen);
    rb->tmp.len = 0;
    rdb_list_elem(&rb->tmp, v, vlen);
    char *e = NULL;
    rocksdb_merge(rb->core->db, rb->core->wo, (const char *)rb->k.p, rb->k.len, (const char *)rb->tmp.p, rb->tmp.len,
                  &e);
    rdb_arena_reset(&st->pin);
    return e ? rdb_fail(rb, "merge", e) : SL_OK;
}

static int rdb_list_foreach(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, sl_kb_list_cb cb,
                            void *c) {
    rdb_backend_t *rb = RB(b);
    rdb_begin(rb);
    rdb_state_t *st = rdb_state(rb, sid, SL_STATE_LIST);
    if (!st || (!ns && nslen) || !rdb_cur_ok(b)) return SL_EINVAL;
    rdb_cur_key(rb, sid, ns, nslen);
    char *e = NULL;
    rocksdb_pinnableslice_t *ps =
        rocksdb_get_pinned(rb->core->db, rb->core->ro, (const char *)rb->k.p, rb->k.len, &e);
    if (e) return rdb_fail(rb, "get", e);
    if (!ps) return 0;
    size_t n;
    const uint8_t *v = (const uint8_t *)rocksdb_pinnableslice_value(ps, &n), *p = v, *end = v + n, *el;
    uint32_t len;
    size_t total = 0, count = 0;
    bool bad = false;
    while (rdb_list_next(&p, end, &el, &len, &bad)) {
        total += rdb_pad8(len ? len : 1);
        count++;
    }
    if (bad) {
        rocksdb_pinnableslice_destroy(ps);
        return rdb_fail(rb, "list_foreach: a corrupt list value", NULL);
    }
    /* Copy the elements out, each 8-byte aligned, so that the pointers stay
     * valid like those of get. */
    uint8_t *copy = rdb_arena_alloc(&st->pin, total), *q = copy;
    const uint8_t **ptrs = sl_malloc((count ? count : 1) * sizeof *ptrs);
    uint32_t *lens = sl_malloc((count ? count : 1) * sizeof *lens);
    size_t i = 0;
    for (p = v; rdb_list_next(&p, end, &el, &len, &bad); i++) {
        if (len) memcpy(q, el, len);
        ptrs[i] = q;
        lens[i] = len;
        q += rdb_pad8(len ? len : 1);
    }
    rocksdb_pinnableslice_destroy(ps);
    int rc = (int)SL_MIN(count, (size_t)INT_MAX);
    for (i = 0; cb && i < count; i++) {
        int r = cb(c, ptrs[i], lens[i]);
        if (r) {
            rc = r;
            break;
        }
    }
    sl_free(ptrs);
    sl_free(lens);
    return rc;
}

static int rdb_list_replace(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, int n,
                            const void *const *vals, const uint32_t *lens) {
    rdb_backend_t *rb = RB(b);
    rdb_state_t *st = rdb_state(rb, sid, SL_STATE_LIST);
    if (!st || n < 0 || (n > 0 && (!vals || !lens)) || (!ns && nslen) || !rdb_cur_ok(b)) return SL_EINVAL;
    if (n == 0) {
        int rc = rdb_remove(b, sid, ns, nslen);
        return rc < 0 ? rc : SL_OK;
    }
    uint64_t total = 0;
    for (int i = 0; i < n; i++) {
        if (!vals[i] && lens[i]) return SL_EINVAL;
        total += 5 + (uint64_t)lens[i];
    }
    if (total > UINT32_MAX) return SL_EINVAL;
    int rc = rdb_begin_write(rb);
    if (rc) return rc;
    rdb_cur_key(rb, sid, ns, nslen);
    rb->tmp.len = 0; /* the elements may point into the arena: copied before it is reset */
    for (int i = 0; i < n; i++) rdb_list_elem(&rb->tmp, vals[i], lens[i]);
    rc = rdb_write_key(rb, &rb->k, rb->tmp.p, rb->tmp.len);
    rdb_arena_reset(&st->pin);
    return rc;
}

/* ---- MAP ---- */

/* rb->k = the key of user key uk of (current key, ns) in state sid. */
static void rdb_cur_ukey(rdb_backend_t *rb, int sid, const void *ns, uint32_t nslen, const void *uk, uint32_t uklen) {
    rdb_cur_key(rb, sid, ns, nslen);
    if (uklen) sl_buf_append(&rb->k, uk, uklen);
}

static const void *rdb_map_get(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, const void *uk,
                               uint32_t uklen, uint32_t *vlen) {
    rdb_backend_t *rb = RB(b);
    rdb_begin(rb);
    rdb_state_t *st = rdb_state(rb, sid, SL_STATE_MAP);
    if (!st || (!uk && uklen) || (!ns && nslen) || !rdb_cur_ok(b)) return NULL;
    rdb_cur_ukey(rb, sid, ns, nslen, uk, uklen);
    return rdb_read(rb, st, &rb->k, vlen);
}

static int rdb_map_put(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, const void *uk,
                       uint32_t uklen, const void *v, uint32_t vlen) {
    rdb_backend_t *rb = RB(b);
    rdb_state_t *st = rdb_state(rb, sid, SL_STATE_MAP);
    if (!st || (!uk && uklen) || (!v && vlen) || (!ns && nslen) || !rdb_cur_ok(b)) return SL_EINVAL;
    int rc = rdb_begin_write(rb);
    if (rc) return rc;
    rdb_cur_ukey(rb, sid, ns, nslen, uk, uklen);
    rc = rdb_write_key(rb, &rb->k, v, vlen);
    rdb_arena_reset(&st->pin);
    return rc;
}

static int rdb_map_remove(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, const void *uk,
                          uint32_t uklen) {
    rdb_backend_t *rb = RB(b);
    rdb_state_t *st = rdb_state(rb, sid, SL_STATE_MAP);
    if (!st || (!uk && uklen) || (!ns && nslen) || !rdb_cur_ok(b)) return SL_EINVAL;
    int rc = rdb_begin_write(rb);
    if (rc) return rc;
    rdb_cur_ukey(rb, sid, ns, nslen, uk, uklen);
    int found = rdb_exists(rb, &rb->k);
    if (found > 0 && (rc = rdb_delete_key(rb, &rb->k))) found = rc;
    rdb_arena_reset(&st->pin);
    return found;
}

static int rdb_map_foreach(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, sl_kb_map_cb cb,
                           void *c) {
    rdb_backend_t *rb = RB(b);
    rdb_begin(rb);
    rdb_state_t *st = rdb_state(rb, sid, SL_STATE_MAP);
    if (!st || (!ns && nslen) || !rdb_cur_ok(b)) return SL_EINVAL;
    /* Own copies of the bounds: the callback may use the backend. */
    sl_buf_t pfx = {0}, hi = {0};
    rdb_key_into(&pfx, b->kg, sid, b->key, b->keylen, ns, nslen);
    rdb_prefix_end(&hi, pfx.p, pfx.len);
    rdb_iter_t x;
    rdb_iter_open(&x, rb->core->db, NULL, hi.p, hi.len, true);
    int n = 0, rc = 0;
    for (rocksdb_iter_seek(x.it, (const char *)pfx.p, pfx.len); rocksdb_iter_valid(x.it); rocksdb_iter_next(x.it)) {
        size_t kl, vl;
        const uint8_t *k = rdb_iter_key(x.it, &kl);
        if (kl < pfx.len || memcmp(k, pfx.p, pfx.len) != 0) break;
        const char *v = rocksdb_iter_value(x.it, &vl);
        n++;
        if (cb && (rc = cb(c, k + pfx.len, (uint32_t)(kl - pfx.len), v, (uint32_t)vl)) != 0) break;
    }
    char *e = rdb_iter_close(&x);
    sl_buf_free(&pfx);
    sl_buf_free(&hi);
    if (e) return rdb_fail(rb, "map_foreach", e);
    return rc ? rc : n;
}

/* ---- every entry of a state ---- */

/* Calls cb for each (key, ns) of state sid in key groups [kg_lo, kg_hi)
 * (or counts them). */
static int rdb_scan_state(rdb_backend_t *rb, int sid, int kg_lo, int kg_hi, sl_kb_entry_cb cb, void *c,
                          int64_t *count) {
    bool map = rb->states[sid].kind == SL_STATE_MAP;
    uint8_t hi[2], seek[RDB_KPFX];
    rdb_be16(hi, (unsigned)kg_hi);
    rdb_iter_t x;
    rdb_iter_open(&x, rb->core->db, NULL, hi, sizeof hi, true);
    sl_buf_t prev = {0}; /* the last (key, ns) prefix of a map */
    int rc = 0;
    int64_t n = 0;
    for (int kg = kg_lo; kg < kg_hi && !rc; kg++) {
        rdb_be16(rdb_be16(seek, (unsigned)kg), (unsigned)sid);
        prev.len = 0;
        for (rocksdb_iter_seek(x.it, (const char *)seek, sizeof seek); rocksdb_iter_valid(x.it);
             rocksdb_iter_next(x.it)) {
            size_t kl;
            const uint8_t *k = rdb_iter_key(x.it, &kl);
            if (kl < RDB_KPFX || memcmp(k, seek, RDB_KPFX) != 0) break;
            rdb_kparts_t kp;
            if (!rdb_parse_key(k, kl, &kp)) continue; /* not ours: cannot happen */
            if (map) {
                if (prev.len == kp.pfxlen && memcmp(prev.p, k, kp.pfxlen) == 0) continue;
                prev.len = 0;
                sl_buf_append(&prev, k, kp.pfxlen);
            }
            n++;
            if (cb && (rc = cb(c, kp.key, kp.klen, kp.ns, kp.nslen)) != 0) break;
        }
    }
    sl_buf_free(&prev);
    char *e = rdb_iter_close(&x);
    if (e) return rdb_fail(rb, "scan", e);
    if (count) *count = n;
    return rc;
}

static int rdb_foreach_entry(sl_keyed_backend_t *b, int sid, sl_kb_entry_cb cb, void *c) {
    rdb_backend_t *rb = RB(b);
    if ((unsigned)sid >= (unsigned)rb->nstates || !cb) return SL_EINVAL;
    rdb_begin(rb);
    int rc = rdb_vc_flush(rb);
    if (rc) return rc;
    return rdb_scan_state(rb, sid, b->range.start, b->range.end, cb, c, NULL);
}

static int rdb_foreach_entry_kg(sl_keyed_backend_t *b, int sid, int kg, sl_kb_entry_cb cb, void *c) {
    rdb_backend_t *rb = RB(b);
    if ((unsigned)sid >= (unsigned)rb->nstates || !cb || kg < b->range.start || kg >= b->range.end)
        return SL_EINVAL;
    rdb_begin(rb);
    int rc = rdb_vc_flush(rb); /* the value cache's dirty entries: the scan reads the database */
    if (rc) return rc;
    return rdb_scan_state(rb, sid, kg, kg + 1, cb, c, NULL);
}

static int64_t rdb_count(sl_keyed_backend_t *b, int sid) {
    rdb_backend_t *rb = RB(b);
    if ((unsigned)sid >= (unsigned)rb->nstates) return SL_EINVAL;
    rdb_begin(rb);
    int rc = rdb_vc_flush(rb);
    if (rc) return rc;
    int64_t n = 0;
    rc = rdb_scan_state(rb, sid, b->range.start, b->range.end, NULL, NULL, &n);
    return rc < 0 ? rc : n;
}

static void rdb_destroy(sl_keyed_backend_t *b) {
    if (!b) return;
    rdb_backend_t *rb = RB(b);
    rdb_core_t *c = rb->core;
    pthread_mutex_lock(&c->ttl.mu);
    c->ttl.enabled = false; /* the clock may go with the backend */
    pthread_mutex_unlock(&c->ttl.mu);
    for (int i = 0; i < rb->nstates; i++) {
        sl_free(rb->states[i].name);
        rdb_arena_free(&rb->states[i].pin);
    }
    sl_free(rb->states);
    sl_buf_free(&rb->k);
    sl_buf_free(&rb->k2);
    sl_buf_free(&rb->tmp);
    sl_buf_free(&rb->pkey);
    sl_rvc_free(rb->vc); /* dirty values go with it: state is recovered from checkpoints only */
    if (rb->vwb) rocksdb_writebatch_destroy(rb->vwb);
    sl_kb_base_free(b);
    sl_free(rb);
    rdb_core_unref(c);
}

/* ------------------------------------------------------------------ */
/* snapshots                                                           */

typedef struct rdb_snap_state {
    char *name;
    sl_state_kind_t kind;
    int sid;
    int64_t ttl_ms;
    int items; /* rdb_state_t.items */
} rdb_snap_state_t;

typedef struct rdb_snap {
    sl_kb_snapshot_t base; /* first */
    rdb_core_t *core;
    const rocksdb_snapshot_t *snap;
    sl_rvc_capture_t *cap; /* the value cache's dirty values at snapshot() (NULL: no cache) */
    int64_t now_ms;        /* the TTL clock at snapshot() */
    int nstates;
    rdb_snap_state_t *states; /* in bytewise order of name */
} rdb_snap_t;

static int rdb_snap_state_cmp(const void *a, const void *b) {
    return strcmp(((const rdb_snap_state_t *)a)->name, ((const rdb_snap_state_t *)b)->name);
}

static int rdb_snapshot(sl_keyed_backend_t *b, sl_kb_snapshot_t **out) {
    rdb_backend_t *rb = RB(b);
    if (!out) return SL_EINVAL;
    /* A pending get_mut value belongs to the snapshot (it goes into the
     * cache).  No write-back step here: a RocksDB write may wait for a
     * stalled memtable, and this is the synchronous phase. */
    int rc = rdb_begin_step(rb, false);
    if (!rc) rc = rb->errc;
    if (rc) return rc;
    rdb_snap_t *sn = sl_calloc(1, sizeof *sn);
    sn->base.ops = &rdb_ops;
    sn->base.max_parallelism = b->max_parallelism;
    sn->base.range = b->range;
    sn->core = rb->core;
    atomic_fetch_add_explicit(&rb->core->refs, 1, memory_order_relaxed);
    sn->now_ms = sl_kb_now_ms(b);
    sn->nstates = rb->nstates;
    sn->states = sl_calloc((size_t)SL_MAX(rb->nstates, 1), sizeof *sn->states);
    for (int i = 0; i < rb->nstates; i++) {
        sn->states[i].name = sl_strdup(rb->states[i].name);
        sn->states[i].kind = rb->states[i].kind;
        sn->states[i].sid = i;
        sn->states[i].ttl_ms = rb->states[i].ttl_ms;
        sn->states[i].items = rb->states[i].items;
    }
    qsort(sn->states, (size_t)sn->nstates, sizeof *sn->states, rdb_snap_state_cmp);
    rdb_ttl_t *t = &rb->core->ttl;
    pthread_mutex_lock(&t->mu); /* compactions keep what this view may still write */
    if (t->nsnaps == t->capsnaps) {
        t->capsnaps = t->capsnaps ? t->capsnaps * 2 : 4;
        t->snaps = sl_realloc(t->snaps, (size_t)t->capsnaps * sizeof *t->snaps);
    }
    t->snaps[t->nsnaps++] = sn->now_ms;
    pthread_mutex_unlock(&t->mu);
    /* The cache's dirty values are captured, not written: the view is the
     * database snapshot with the captured values on top (snapshot_write). */
    sn->cap = rb->vc ? sl_rvc_capture(rb->vc) : NULL;
    sn->snap = rocksdb_create_snapshot(rb->core->db);
    *out = &sn->base;
    return SL_OK;
}

static void rdb_snapshot_release(sl_kb_snapshot_t *s) {
    rdb_snap_t *sn = (rdb_snap_t *)s;
    if (!sn) return;
    rdb_core_t *c = sn->core;
    rocksdb_release_snapshot(c->db, sn->snap);
    sl_rvc_capture_release(sn->cap);
    pthread_mutex_lock(&c->ttl.mu);
    for (int i = 0; i < c->ttl.nsnaps; i++)
        if (c->ttl.snaps[i] == sn->now_ms) {
            c->ttl.snaps[i] = c->ttl.snaps[--c->ttl.nsnaps];
            break;
        }
    pthread_mutex_unlock(&c->ttl.mu);
    for (int i = 0; i < sn->nstates; i++) sl_free(sn->states[i].name);
    sl_free(sn->states);
    sl_free(sn);
    rdb_core_unref(c);
}

/* One entry of a state being written: where its bytes are in the scratch
 * buffer, and its key and namespace (for sorting). */
typedef struct rdb_went {
    size_t off, len;
    size_t koff, nsoff;
    uint32_t klen, nslen;
} rdb_went_t;

typedef struct rdb_writer {
    sl_buf_t sc;       /* the entries, encoded */
    sl_buf_t items;    /* the items of the map entry being built */
    sl_buf_t group;    /* its (key, ns) prefix */
    rdb_went_t *v;
    size_t n, cap;
    bool sorted;
} rdb_writer_t;

static int rdb_went_cmp(const void *pa, const void *pb, void *ctx) {
    const rdb_went_t *a = pa, *b = pb;
    const uint8_t *base = ctx;
    int c = rdb_bytes_cmp(base + a->koff, a->klen, base + b->koff, b->klen);
    return c ? c : rdb_bytes_cmp(base + a->nsoff, a->nslen, base + b->nsoff, b->nslen);
}

/* Starts an entry: bytes:key bytes:ns. */
static void rdb_w_begin(rdb_writer_t *w, const rdb_kparts_t *kp) {
    if (w->n == w->cap) {
        w->cap = w->cap ? w->cap * 2 : 256;
        w->v = sl_realloc(w->v, w->cap * sizeof *w->v);
    }
    rdb_went_t *e = &w->v[w->n];
    e->off = w->sc.len;
    sl_kbf_varint(&w->sc, kp->klen);
    e->koff = w->sc.len;
    e->klen = kp->klen;
    sl_buf_append(&w->sc, kp->key, kp->klen);
    sl_kbf_varint(&w->sc, kp->nslen);
    e->nsoff = w->sc.len;
    e->nslen = kp->nslen;
    sl_buf_append(&w->sc, kp->ns, kp->nslen);
}

static void rdb_w_end(rdb_writer_t *w) {
    rdb_went_t *e = &w->v[w->n];
    e->len = w->sc.len - e->off;
    if (w->n && w->sorted && rdb_went_cmp(&w->v[w->n - 1], e, w->sc.p) >= 0) w->sorted = false;
    w->n++;
}

/* Closes the map entry being built (dropped when TTL left it empty). */
static void rdb_w_flush_map(rdb_writer_t *w, uint32_t nitems, const rdb_kparts_t *kp) {
    if (!nitems) return;
    rdb_w_begin(w, kp);
    sl_kbf_varint(&w->sc, nitems);
    sl_buf_append(&w->sc, w->items.p, w->items.len);
    rdb_w_end(w);
}

/* One VALUE entry (stored key k, value v) into the writer, unless expired. */
static int rdb_w_value(rdb_writer_t *w, const uint8_t *k, size_t kl, const uint8_t *v, size_t vl, int64_t ttl,
                       int64_t now) {
    rdb_kparts_t kp;
    if (!rdb_parse_key(k, kl, &kp) || kp.restlen || vl > UINT32_MAX) return SL_ESTATE;
    if (ttl > 0 && rdb_expired(v, vl, ttl, now)) return SL_OK;
    rdb_w_begin(w, &kp);
    sl_kbf_bytes(&w->sc, v, (uint32_t)vl);
    rdb_w_end(w);
    return SL_OK;
}

/* The captured cache entries ov[*lo, *hi) whose keys start with the 4-byte
 * prefix p (ov is in bytewise key order; every key has the prefix's length
 * at least). */
static void rdb_ov_range(const sl_rvc_ent_t *const *ov, size_t n, const uint8_t p[RDB_KPFX], size_t *lo,
                         size_t *hi) {
    size_t a = 0, b = n;
    while (a < b) { /* first with prefix >= p */
        size_t m = a + (b - a) / 2;
        if (memcmp(sl_rvc_key(ov[m]), p, RDB_KPFX) < 0)
            a = m + 1;
        else
            b = m;
    }
    *lo = a;
    for (b = n; a < b;) { /* first with prefix > p */
        size_t m = a + (b - a) / 2;
        if (memcmp(sl_rvc_key(ov[m]), p, RDB_KPFX) <= 0)
            a = m + 1;
        else
            b = m;
    }
    *hi = a;
}

/* The entries of VALUE state prefix `seek`: the database snapshot's merged
 * with the captured cache values ov[lo, hi) in key order — a captured value
 * replaces the database's for its key, a captured absence deletes it. */
static int rdb_write_values(const uint8_t seek[RDB_KPFX], rocksdb_iterator_t *it, const sl_rvc_ent_t *const *ov,
                            size_t lo, size_t hi, int64_t ttl, int64_t now, rdb_writer_t *w) {
    rocksdb_iter_seek(it, (const char *)seek, RDB_KPFX);
    size_t o = lo;
    for (;;) {
        size_t kl = 0, vl = 0;
        const uint8_t *k = NULL;
        bool in_db = rocksdb_iter_valid(it);
        if (in_db) {
            k = rdb_iter_key(it, &kl);
            in_db = kl >= RDB_KPFX && memcmp(k, seek, RDB_KPFX) == 0;
        }
        if (!in_db && o == hi) return SL_OK;
        int c = !in_db ? 1 : o == hi ? -1 : rdb_bytes_cmp(k, (uint32_t)kl, sl_rvc_key(ov[o]), ov[o]->klen);
        int rc = SL_OK;
        if (c < 0) {
            const uint8_t *v = (const uint8_t *)rocksdb_iter_value(it, &vl);
            rc = rdb_w_value(w, k, kl, v, vl, ttl, now);
            rocksdb_iter_next(it);
        } else {
            const sl_rvc_ent_t *e = ov[o++];
            if (!sl_rvc_absent(e)) rc = rdb_w_value(w, sl_rvc_key(e), e->klen, sl_rvc_cval(e), e->vlen, ttl, now);
            if (c == 0) rocksdb_iter_next(it);
        }
        if (rc) return rc;
    }
}

/* Writes state ss of key group kg (name, kind, entries) to out; ov[0, nov)
 * are the captured cache values (VALUE states only). */
static int rdb_write_state(const rdb_snap_t *sn, const rdb_snap_state_t *ss, int kg, rocksdb_iterator_t *it,
                           const sl_rvc_ent_t *const *ov, size_t nov, rdb_writer_t *w, sl_buf_t *out) {
    sl_kbf_bytes(out, ss->name, (uint32_t)strlen(ss->name));
    sl_kbf_u8(out, sl_kbf_kind_byte(ss->kind, ss->items));
    w->sc.len = 0;
    w->n = 0;
    w->sorted = true;
    uint8_t seek[RDB_KPFX];
    rdb_be16(rdb_be16(seek, (unsigned)kg), (unsigned)ss->sid);
    int64_t ttl = ss->ttl_ms, now = sn->now_ms;
    uint32_t nitems = 0;
    rdb_kparts_t gkp = {0}; /* the map entry being built (points into w->group) */
    w->group.len = 0;
    size_t olo = 0, ohi = 0;
    if (nov) rdb_ov_range(ov, nov, seek, &olo, &ohi);
    if (ss->kind != SL_STATE_VALUE && olo != ohi) return SL_ESTATE; /* only VALUE states are cached */
    if (ss->kind == SL_STATE_VALUE) {
        int rc = rdb_write_values(seek, it, ov, olo, ohi, ttl, now, w);
        if (rc) return rc;
        goto done;
    }
    for (rocksdb_iter_seek(it, (const char *)seek, sizeof seek); rocksdb_iter_valid(it); rocksdb_iter_next(it)) {
        size_t kl, vl;
        const uint8_t *k = rdb_iter_key(it, &kl);
        if (kl < RDB_KPFX || memcmp(k, seek, RDB_KPFX) != 0) break;
        rdb_kparts_t kp;
        if (!rdb_parse_key(k, kl, &kp)) return SL_ESTATE;
        const uint8_t *v = (const uint8_t *)rocksdb_iter_value(it, &vl);
        if (vl > UINT32_MAX) return SL_ESTATE;
        switch (ss->kind) {
        case SL_STATE_VALUE: /* above */
            break;
        case SL_STATE_LIST: {
            if (kp.restlen) return SL_ESTATE;
            const uint8_t *p = v, *end = v + vl, *el;
            uint32_t len, ne = 0;
            bool bad = false;
            while (rdb_list_next(&p, end, &el, &len, &bad)) ne += !(ttl > 0 && rdb_expired(el, len, ttl, now));
            if (bad) return SL_ESTATE;
            if (!ne) break; /* empty after TTL (an empty list is never stored) */
            rdb_w_begin(w, &kp);
            sl_kbf_varint(&w->sc, ne);
            for (p = v; rdb_list_next(&p, end, &el, &len, &bad);)
                if (!(ttl > 0 && rdb_expired(el, len, ttl, now))) sl_kbf_bytes(&w->sc, el, len);
            rdb_w_end(w);
            break;
        }
        case SL_STATE_MAP:
            if (w->group.len != kp.pfxlen || memcmp(w->group.p, k, kp.pfxlen) != 0) {
                rdb_w_flush_map(w, nitems, &gkp);
                w->group.len = 0;
                sl_buf_append(&w->group, k, kp.pfxlen);
                rdb_parse_key(w->group.p, w->group.len, &gkp);
                w->items.len = 0;
                nitems = 0;
            }
            if (ttl > 0 && rdb_expired(v, vl, ttl, now)) break;
            sl_kbf_bytes(&w->items, kp.rest, (uint32_t)kp.restlen);
            sl_kbf_bytes(&w->items, v, (uint32_t)vl);
            nitems++;
            break;
        }
    }
    if (ss->kind == SL_STATE_MAP) rdb_w_flush_map(w, nitems, &gkp);
done:
    sl_kbf_varint(out, w->n);
    if (w->sorted) {
        sl_buf_append(out, w->sc.p, w->sc.len);
    } else {
        qsort_r(w->v, w->n, sizeof *w->v, rdb_went_cmp, w->sc.p);
        for (size_t i = 0; i < w->n; i++) sl_buf_append(out, w->sc.p + w->v[i].off, w->v[i].len);
    }
    return SL_OK;
}

/* Any thread: reads through the RocksDB snapshot and the capture only. */
static int rdb_snapshot_write(const sl_kb_snapshot_t *s, int kg, sl_buf_t *out) {
    const rdb_snap_t *sn = (const rdb_snap_t *)s;
    if (!sn || !out || kg < s->range.start || kg >= s->range.end) return SL_EINVAL;
    size_t out0 = out->len;
    uint8_t hi[2];
    rdb_be16(hi, (unsigned)kg + 1);
    rdb_iter_t x;
    rdb_iter_open(&x, sn->core->db, sn->snap, hi, sizeof hi, false);
    rdb_writer_t w = {0};
    size_t nov = 0;
    const sl_rvc_ent_t *const *ov = sn->cap ? sl_rvc_capture_entries(sn->cap, &nov) : NULL;
    size_t start = sl_kbf_begin(out, s->max_parallelism, kg, (uint32_t)sn->nstates);
    int rc = SL_OK;
    for (int i = 0; i < sn->nstates && !rc; i++)
        rc = rdb_write_state(sn, &sn->states[i], kg, x.it, ov, nov, &w, out);
    char *e = rdb_iter_close(&x);
    if (e) {
        rocksdb_free(e);
        rc = SL_ESTATE;
    }
    sl_buf_free(&w.sc);
    sl_buf_free(&w.items);
    sl_buf_free(&w.group);
    sl_free(w.v);
    if (rc) {
        out->len = out0;
        return rc;
    }
    sl_kbf_end(out, start);
    return SL_OK;
}

/* ------------------------------------------------------------------ */
/* restore of a canonical block                                        */

typedef struct rdb_restore {
    rdb_backend_t *rb;
    int kg;
    bool load;        /* false: the checking pass */
    bool sorted;      /* found by the checking pass: no duplicates possible */
    char *err;
    size_t errlen;
    /* checking pass */
    struct rdb_rs_name {
        const char *p;
        uint32_t n;
    } *names;
    uint32_t nnames, capnames;
    const uint8_t *pk, *pns, *puk; /* previous key, ns (of the state), user key (of the entry) */
    uint32_t pklen, pnslen, puklen;
    bool have_prev, have_puk;
    /* loading pass */
    int sid;
    sl_state_kind_t kind;
    const char *name;
    sl_buf_t key;     /* the entry's (key, ns) prefix */
    sl_buf_t list;    /* the list entry's elements */
    uint32_t left;
    rocksdb_writebatch_t *wb;
} rdb_restore_t;

static int rdb_rs_state(void *ctx, const char *name, uint32_t namelen, sl_state_kind_t kind, int ttl,
                        uint32_t nentries) {
    SL_UNUSED(nentries);
    rdb_restore_t *r = ctx;
    rdb_backend_t *rb = r->rb;
    if (!r->load) {
        if (r->nnames == r->capnames) {
            r->capnames = r->capnames ? 2 * r->capnames : 8;
            r->names = sl_realloc(r->names, (size_t)r->capnames * sizeof *r->names);
        }
        r->names[r->nnames].p = name;
        r->names[r->nnames++].n = namelen;
        r->have_prev = false;
        for (int i = 0; i < rb->nstates; i++) {
            rdb_state_t *st = &rb->states[i];
            if (strlen(st->name) == namelen && memcmp(st->name, name, namelen) == 0 && st->kind != kind)
                return sl_errf(r->err, r->errlen, SL_ESTATE,
                               "keyed state of key group %d: state '%s' is a %s state in the checkpoint but "
                               "registered as a %s state",
                               r->kg, st->name, sl_kbf_kind_name(kind), sl_kbf_kind_name(st->kind));
            if (strlen(st->name) == namelen && memcmp(st->name, name, namelen) == 0 && ttl != SL_KBF_TTL_IS_UNKNOWN &&
                st->items != SL_KBF_TTL_IS_UNKNOWN && ttl != st->items)
                return sl_errf(r->err, r->errlen, SL_ESTATE,
                               "keyed state of key group %d: state '%s' has %s in the checkpoint but %s here "
                               "(restore before the state is declared)",
                               r->kg, st->name, ttl ? "TTL timestamps" : "no TTL timestamps",
                               st->items ? "has them" : "has none");
        }
        if (rb->nstates >= RDB_MAX_STATES)
            return sl_errf(r->err, r->errlen, SL_ESTATE, "keyed state of key group %d: more than %d states", r->kg,
                           RDB_MAX_STATES);
        return SL_OK;
    }
    int sid = rdb_register_restored(rb, name, namelen, kind, 0, SL_TTL_ON_CREATE_AND_WRITE, ttl);
    if (sid < 0)
        return sl_errf(r->err, r->errlen, SL_ESTATE, "keyed state of key group %d: cannot register state '%.*s': %s",
                       r->kg, (int)SL_MIN(namelen, 64u), name, rb->errc ? rb->err : "refused");
    r->sid = sid;
    r->kind = kind;
    r->name = rb->states[sid].name;
    return SL_OK;
}

/* Commits the batch (loading pass). */
static int rdb_rs_commit(rdb_restore_t *r) {
    if (!rocksdb_writebatch_count(r->wb)) return SL_OK;
    char *e = NULL;
    rocksdb_write(r->rb->core->db, r->rb->core->wo, r->wb, &e);
    rocksdb_writebatch_clear(r->wb);
    if (e) {
        rdb_fail(r->rb, "restore", e);
        return sl_errf(r->err, r->errlen, SL_ESTATE, "keyed state of key group %d: %s", r->kg, r->rb->err);
    }
    return SL_OK;
}

/* Stores key -> v; when the block was not sorted, refuses a key that
 * exists already (it can only come from this block). */
static int rdb_rs_put(rdb_restore_t *r, const sl_buf_t *key, const void *v, size_t vlen, const char *what) {
    if (!r->sorted) {
        int ex = rdb_exists(r->rb, key);
        if (ex < 0) return sl_errf(r->err, r->errlen, ex, "keyed state of key group %d: %s", r->kg, r->rb->err);
        if (ex)
            return sl_errf(r->err, r->errlen, SL_EFORMAT, "keyed state of key group %d: state '%s' holds %s twice",
                           r->kg, r->name, what);
        char *e = NULL;
        rocksdb_put(r->rb->core->db, r->rb->core->wo, (const char *)key->p, key->len, v, vlen, &e);
        if (e) {
            rdb_fail(r->rb, "restore", e);
            return sl_errf(r->err, r->errlen, SL_ESTATE, "keyed state of key group %d: %s", r->kg, r->rb->err);
        }
        return SL_OK;
    }
    rocksdb_writebatch_put(r->wb, (const char *)key->p, key->len, v, vlen);
    return SL_OK;
}

static int rdb_rs_entry(void *ctx, const uint8_t *key, uint32_t klen, const uint8_t *ns, uint32_t nslen, uint32_t n) {
    rdb_restore_t *r = ctx;
    if (!r->load) { /* is the state's order strictly increasing?  Then there is no duplicate. */
        if (r->have_prev) {
            int c = rdb_bytes_cmp(r->pk, r->pklen, key, klen);
            if (c > 0 || (c == 0 && rdb_bytes_cmp(r->pns, r->pnslen, ns, nslen) >= 0)) r->sorted = false;
        }
        r->pk = key;
        r->pklen = klen;
        r->pns = ns;
        r->pnslen = nslen;
        r->have_prev = true;
        r->have_puk = false;
        return SL_OK;
    }
    rdb_key_into(&r->key, r->kg, r->sid, key, klen, ns, nslen);
    r->left = n;
    r->list.len = 0;
    if (r->kind == SL_STATE_MAP && !r->sorted) { /* the same (key, ns) in two entries */
        rdb_backend_t *rb = r->rb;
        rdb_prefix_end(&rb->k2, r->key.p, r->key.len);
        rdb_iter_t x;
        rdb_iter_open(&x, rb->core->db, NULL, rb->k2.p, rb->k2.len, true);
        rocksdb_iter_seek(x.it, (const char *)r->key.p, r->key.len);
        bool dup = rocksdb_iter_valid(x.it);
        char *e = rdb_iter_close(&x);
        if (e) {
            rdb_fail(rb, "restore", e);
            return sl_errf(r->err, r->errlen, SL_ESTATE, "keyed state of key group %d: %s", r->kg, rb->err);
        }
        if (dup)
            return sl_errf(r->err, r->errlen, SL_EFORMAT,
                           "keyed state of key group %d: state '%s' holds the same (key, namespace) twice", r->kg,
                           r->name);
    }
    return SL_OK;
}

static int rdb_rs_item(void *ctx, const uint8_t *uk, uint32_t uklen, const uint8_t *v, uint32_t vlen) {
    rdb_restore_t *r = ctx;
    if (!r->load) {
        if (uk) {
            if (r->have_puk && rdb_bytes_cmp(r->puk, r->puklen, uk, uklen) >= 0) r->sorted = false;
            r->puk = uk;
            r->puklen = uklen;
            r->have_puk = true;
        }
        return SL_OK;
    }
    r->left--;
    int rc = SL_OK;
    switch (r->kind) {
    case SL_STATE_VALUE: rc = rdb_rs_put(r, &r->key, v, vlen, "the same (key, namespace)"); break;
    case SL_STATE_LIST:
        if (r->list.len + 5 + (size_t)vlen > UINT32_MAX)
            return sl_errf(r->err, r->errlen, SL_EFORMAT,
                           "keyed state of key group %d: state '%s': a list of more than 4 GiB", r->kg, r->name);
        rdb_list_elem(&r->list, v, vlen);
        if (r->left == 0) rc = rdb_rs_put(r, &r->key, r->list.p, r->list.len, "the same (key, namespace)");
        break;
    case SL_STATE_MAP: {
        size_t plen = r->key.len;
        if (uklen) sl_buf_append(&r->key, uk, uklen);
        rc = rdb_rs_put(r, &r->key, v, vlen, "the same user key in one map");
        r->key.len = plen;
        break;
    }
    }
    if (!rc && r->sorted) {
        size_t sz = 0;
        rocksdb_writebatch_data(r->wb, &sz);
        if (sz >= RDB_BATCH_BYTES) rc = rdb_rs_commit(r);
    }
    return rc;
}

static int rdb_rs_name_cmp(const void *pa, const void *pb) {
    const struct rdb_rs_name *a = pa, *b = pb;
    return rdb_bytes_cmp((const uint8_t *)a->p, a->n, (const uint8_t *)b->p, b->n);
}

/* Deletes key group kg (all states) of the live database. */
static int rdb_delete_kgs(rdb_backend_t *rb, int from, int to) {
    if (from >= to) return SL_OK;
    uint8_t lo[2], hi[2];
    rdb_be16(lo, (unsigned)from);
    rdb_be16(hi, (unsigned)to);
    rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
    rocksdb_writebatch_delete_range(wb, (const char *)lo, 2, (const char *)hi, 2);
    char *e = NULL;
    rocksdb_write(rb->core->db, rb->core->wo, wb, &e);
    rocksdb_writebatch_destroy(wb);
    return e ? rdb_fail(rb, "delete range", e) : SL_OK;
}

static int rdb_restore(sl_keyed_backend_t *b, int kg, const uint8_t *data, size_t len, char *err, size_t errlen) {
    rdb_backend_t *rb = RB(b);
    if (kg < b->range.start || kg >= b->range.end)
        return sl_errf(err, errlen, SL_EINVAL, "keyed state: key group %d is outside this backend's range [%d, %d)", kg,
                       b->range.start, b->range.end);
    if (rdb_begin_write(rb) || rdb_vc_flush(rb))
        return sl_errf(err, errlen, SL_ESTATE, "keyed state of key group %d: %s", kg, rb->err);
    /* The restore writes behind the cache (which may also hold negative
     * entries of this key group): start it afresh. */
    if (rb->vc) sl_rvc_clear(rb->vc);
    /* The key group must be empty. */
    uint8_t lo[2], hi[2];
    rdb_be16(lo, (unsigned)kg);
    rdb_be16(hi, (unsigned)kg + 1);
    rdb_iter_t x;
    rdb_iter_open(&x, rb->core->db, NULL, hi, sizeof hi, true);
    rocksdb_iter_seek(x.it, (const char *)lo, sizeof lo);
    int used = -1;
    if (rocksdb_iter_valid(x.it)) {
        size_t kl;
        const uint8_t *k = rdb_iter_key(x.it, &kl);
        used = kl >= RDB_KPFX ? (int)rdb_ld_be16(k + 2) : 0;
    }
    char *e = rdb_iter_close(&x);
    if (e) {
        rdb_fail(rb, "restore", e);
        return sl_errf(err, errlen, SL_ESTATE, "keyed state of key group %d: %s", kg, rb->err);
    }
    if (used >= 0)
        return sl_errf(err, errlen, SL_ESTATE,
                       "keyed state of key group %d: cannot restore, state '%s' already has entries there", kg,
                       used < rb->nstates ? rb->states[used].name : "?");
    static const sl_kbf_visitor_t vis = {rdb_rs_state, rdb_rs_entry, rdb_rs_item};
    rdb_restore_t r = {.rb = rb, .kg = kg, .err = err, .errlen = errlen, .sorted = true};
    int rc = sl_kbf_parse(data, len, b->max_parallelism, kg, &vis, &r, err, errlen);
    if (rc == 0 && r.nnames > 1) {
        qsort(r.names, r.nnames, sizeof *r.names, rdb_rs_name_cmp);
        for (uint32_t i = 1; i < r.nnames && !rc; i++)
            if (rdb_rs_name_cmp(&r.names[i - 1], &r.names[i]) == 0)
                rc = sl_errf(err, errlen, SL_EFORMAT, "keyed state of key group %d: state '%.*s' appears twice", kg,
                             (int)SL_MIN(r.names[i].n, 64u), r.names[i].p);
    }
    sl_free(r.names);
    if (rc) return rc;
    r.load = true;
    r.wb = rocksdb_writebatch_create();
    rc = sl_kbf_parse(data, len, b->max_parallelism, kg, &vis, &r, err, errlen);
    if (!rc) rc = rdb_rs_commit(&r);
    rocksdb_writebatch_destroy(r.wb);
    sl_buf_free(&r.key);
    sl_buf_free(&r.list);
    if (rc) rdb_delete_kgs(rb, kg, kg + 1); /* all or nothing */
    for (int i = 0; i < rb->nstates; i++) rdb_arena_reset(&rb->states[i].pin);
    return rc;
}

static int rdb_state_info(sl_keyed_backend_t *b, int sid, const char **name, sl_state_kind_t *kind,
                          int64_t *ttl_ms) {
    const rdb_backend_t *rb = RB(b);
    if (sid < 0 || sid >= rb->nstates) return SL_ENOTFOUND;
    *name = rb->states[sid].name;
    *kind = rb->states[sid].kind;
    *ttl_ms = rb->states[sid].ttl_ms;
    return 0;
}

static const sl_keyed_backend_ops_t rdb_ops = {
    .name = "rocksdb",
    .register_state = rdb_register_state,
    .get = rdb_get,
    .get_mut = rdb_get_mut,
    .put = rdb_put,
    .remove = rdb_remove,
    .list_add = rdb_list_add,
    .list_foreach = rdb_list_foreach,
    .list_replace = rdb_list_replace,
    .map_get = rdb_map_get,
    .map_put = rdb_map_put,
    .map_remove = rdb_map_remove,
    .map_foreach = rdb_map_foreach,
    .foreach_entry = rdb_foreach_entry,
    .foreach_entry_kg = rdb_foreach_entry_kg,
    .count = rdb_count,
    .prefetch = NULL,
    .destroy = rdb_destroy,
    .snapshot = rdb_snapshot,
    .snapshot_write = rdb_snapshot_write,
    .snapshot_release = rdb_snapshot_release,
    .restore = rdb_restore,
    .state_info = rdb_state_info,
};

bool sl_rocksdb_backend_is(const sl_keyed_backend_t *b) { return b && b->ops == &rdb_ops; }

/* ------------------------------------------------------------------ */
/* construction                                                        */

static void rdb_instance_id(char out[33]) {
    uint8_t r[16];
    if (getrandom(r, sizeof r, 0) != (ssize_t)sizeof r) { /* not expected: mix what differs */
        static atomic_uint_fast64_t seq;
        uint64_t a = sl_mix64((uint64_t)sl_mono_ns() ^ (uint64_t)getpid() << 32),
                 c = sl_mix64((uint64_t)(uintptr_t)r ^ atomic_fetch_add(&seq, 1) ^ (uint64_t)sl_wall_ms());
        sl_st64(r, a);
        sl_st64(r + 8, c);
    }
    for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", r[i]);
}

static int rdb_check_args(int maxp, sl_kg_range_t range, const sl_rocksdb_opts_t *opts, char *err, size_t errlen) {
    if (maxp < 1 || maxp > 32768)
        return sl_errf(err, errlen, SL_EINVAL, "rocksdb state backend: max parallelism %d is not in [1, 32768]", maxp);
    if (range.start < 0 || range.end > maxp || range.start >= range.end)
        return sl_errf(err, errlen, SL_EINVAL,
                       "rocksdb state backend: bad key-group range [%d, %d) for max parallelism %d", range.start,
                       range.end, maxp);
    if (!opts || !opts->dir || !opts->dir[0])
        return sl_errf(err, errlen, SL_EINVAL, "rocksdb state backend: no working directory (opts->dir)");
    return SL_OK;
}

static rdb_backend_t *rdb_backend_alloc(int maxp, sl_kg_range_t range, rdb_core_t *core,
                                        const sl_rocksdb_opts_t *opts) {
    rdb_backend_t *rb = sl_calloc(1, sizeof *rb);
    sl_kb_base_init(&rb->base, &rdb_ops, maxp, range);
    rb->core = core;
    rb->own_cache = !opts->cache;
    if (opts->value_cache_bytes >= 0) { /* default: as large as the write buffer budget */
        size_t wb = opts->write_buffer_bytes ? opts->write_buffer_bytes : 64 * RDB_MIB;
        rb->vc = sl_rvc_new(opts->value_cache_bytes ? (size_t)opts->value_cache_bytes : wb);
        rb->vwb = rocksdb_writebatch_create();
        rb->vc_step = opts->value_cache_writeback > 0    ? (size_t)opts->value_cache_writeback
                      : opts->value_cache_writeback < 0 ? 0
                                                        : RDB_VC_STEP;
    }
    rdb_instance_id(rb->instance);
    return rb;
}

sl_keyed_backend_t *sl_rocksdb_backend_new(int max_parallelism, sl_kg_range_t range, const sl_rocksdb_opts_t *opts,
                                           char *err, size_t errlen) {
    if (rdb_check_args(max_parallelism, range, opts, err, errlen)) return NULL;
    if (rdb_prepare_dir(opts->dir, err, errlen)) return NULL;
    rdb_core_t *core = rdb_core_open(opts, err, errlen);
    if (!core) return NULL;
    rdb_backend_t *rb = rdb_backend_alloc(max_parallelism, range, core, opts);
    uint8_t v[8];
    rdb_meta_version_value(v, max_parallelism);
    char *e = NULL;
    rocksdb_put(core->db, core->wo, rdb_meta_version_key, sizeof rdb_meta_version_key, (const char *)v, sizeof v,
                &e);
    if (e) {
        sl_errf(err, errlen, SL_ESTATE, "rocksdb state backend ('%s'): cannot write its metadata: %s", opts->dir, e);
        rocksdb_free(e);
        rdb_destroy(&rb->base);
        return NULL;
    }
    return &rb->base;
}

const char *sl_rocksdb_backend_error(const sl_keyed_backend_t *b) {
    if (!sl_rocksdb_backend_is(b)) return NULL;
    const rdb_backend_t *rb = (const rdb_backend_t *)b;
    return rb->errc ? rb->err : NULL;
}

/* ------------------------------------------------------------------ */
/* native checkpoints                                                  */

void sl_rocksdb_files_free(sl_rocksdb_files_t *f) {
    if (!f) return;
    for (int i = 0; i < f->n; i++) sl_free(f->v[i].name);
    sl_free(f->v);
    memset(f, 0, sizeof *f);
}

static int rdb_file_cmp(const void *a, const void *b) {
    return strcmp(((const sl_rocksdb_file_t *)a)->name, ((const sl_rocksdb_file_t *)b)->name);
}

/* The regular files of dir, by name. */
static int rdb_list_files(const char *dir, sl_rocksdb_files_t *out, char *err, size_t errlen) {
    DIR *d = opendir(dir);
    if (!d) return sl_errf(err, errlen, SL_EIO, "rocksdb checkpoint '%s': cannot list it: %s", dir, strerror(errno));
    int cap = 0;
    struct dirent *de;
    int rc = SL_OK;
    while ((de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char path[PATH_MAX];
        struct stat st;
        if (snprintf(path, sizeof path, "%s/%s", dir, de->d_name) >= (int)sizeof path || stat(path, &st) != 0) {
            rc = sl_errf(err, errlen, SL_EIO, "rocksdb checkpoint '%s': cannot stat '%s': %s", dir, de->d_name,
                         strerror(errno));
            break;
        }
        if (!S_ISREG(st.st_mode)) continue;
        if (out->n == cap) {
            cap = cap ? cap * 2 : 16;
            out->v = sl_realloc(out->v, (size_t)cap * sizeof *out->v);
        }
        sl_rocksdb_file_t *f = &out->v[out->n++];
        f->name = sl_strdup(de->d_name);
        f->size = (uint64_t)st.st_size;
        f->shared = rdb_is_sst(de->d_name);
    }
    closedir(d);
    if (out->n > 1) qsort(out->v, (size_t)out->n, sizeof *out->v, rdb_file_cmp);
    return rc;
}

int sl_rocksdb_native_snapshot(sl_keyed_backend_t *b, const char *dir, sl_rocksdb_files_t *out, char *err,
                               size_t errlen) {
    if (!sl_rocksdb_backend_is(b) || !dir || !out)
        return sl_errf(err, errlen, SL_EINVAL, "rocksdb native snapshot: not a rocksdb backend, or no directory");
    rdb_backend_t *rb = RB(b);
    memset(out, 0, sizeof *out);
    if (rdb_begin_write(rb) || rdb_vc_flush(rb))
        return sl_errf(err, errlen, SL_ESTATE, "rocksdb native snapshot: %s", rb->err);
    int64_t t0 = sl_mono_ns();
    rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
    rocksdb_flushoptions_set_wait(fo, 1);
    char *e = NULL;
    rocksdb_flush(rb->core->db, fo, &e);
    rocksdb_flushoptions_destroy(fo);
    int64_t t1 = sl_mono_ns();
    if (!e) {
        rocksdb_checkpoint_t *cp = rocksdb_checkpoint_object_create(rb->core->db, &e);
        if (!e) {
            rocksdb_checkpoint_create(cp, dir, 0, &e);
            rocksdb_checkpoint_object_destroy(cp);
        }
    }
    int64_t t2 = sl_mono_ns();
    if (e) {
        int rc = sl_errf(err, errlen, SL_EIO, "rocksdb native snapshot of '%s' into '%s': %s", rb->core->dir, dir, e);
        rocksdb_free(e);
        return rc;
    }
    out->flush_ns = t1 - t0;
    out->sync_ns = t2 - t0;
    memcpy(out->instance, rb->instance, sizeof out->instance);
    int rc = rdb_list_files(dir, out, err, errlen);
    if (rc) sl_rocksdb_files_free(out);
    return rc;
}

/* The state registry of a database. */
typedef struct rdb_meta_state {
    int sid;
    sl_state_kind_t kind;
    sl_ttl_update_t upd;
    int64_t ttl_ms;
    int items; /* rdb_state_t.items */
    char *name;
} rdb_meta_state_t;

static void rdb_meta_free(rdb_meta_state_t *m, int n) {
    for (int i = 0; i < n; i++) sl_free(m[i].name);
    sl_free(m);
}

/* Reads and checks the metadata of db (checkpoint directory dir). */
static int rdb_read_meta(rocksdb_t *db, const char *dir, int maxp, rdb_meta_state_t **out, int *nout, char *err,
                         size_t errlen) {
    *out = NULL;
    *nout = 0;
    rocksdb_readoptions_t *ro = rocksdb_readoptions_create();
    char *e = NULL;
    size_t vl = 0;
    char *v = rocksdb_get(db, ro, rdb_meta_version_key, sizeof rdb_meta_version_key, &vl, &e);
    rocksdb_readoptions_destroy(ro);
    if (e) {
        int rc = sl_errf(err, errlen, SL_EIO, "rocksdb checkpoint '%s': cannot read its metadata: %s", dir, e);
        rocksdb_free(e);
        return rc;
    }
    if (!v || vl != 8) {
        rocksdb_free(v);
        return sl_errf(err, errlen, SL_EFORMAT, "rocksdb checkpoint '%s': no sluice metadata (not a sluice state "
                       "backend's checkpoint?)", dir);
    }
    uint32_t ver = sl_ld32(v), mp = sl_ld32(v + 4);
    rocksdb_free(v);
    if (ver != RDB_LAYOUT_VERSION)
        return sl_errf(err, errlen, SL_EFORMAT,
                       "rocksdb checkpoint '%s': layout version %" PRIu32 " (this build reads %u)", dir, ver,
                       RDB_LAYOUT_VERSION);
    if ((int64_t)mp != maxp)
        return sl_errf(err, errlen, SL_EFORMAT,
                       "rocksdb checkpoint '%s': written with max parallelism %" PRIu32
                       ", restoring with %d (keyed state cannot change max parallelism)",
                       dir, mp, maxp);
    const uint8_t lo[3] = {RDB_META, RDB_META, 'S'}, hi[3] = {RDB_META, RDB_META, 'T'};
    rdb_iter_t x;
    rdb_iter_open(&x, db, NULL, hi, sizeof hi, false);
    rdb_meta_state_t *m = NULL;
    int n = 0, cap = 0, rc = SL_OK;
    for (rocksdb_iter_seek(x.it, (const char *)lo, sizeof lo); rocksdb_iter_valid(x.it); rocksdb_iter_next(x.it)) {
        size_t kl, sl;
        const uint8_t *k = rdb_iter_key(x.it, &kl), *s = (const uint8_t *)rocksdb_iter_value(x.it, &sl);
        if (kl != 5 || sl <= 10 || s[0] > SL_STATE_MAP || (s[1] & 0x0f) > SL_TTL_ON_READ_AND_WRITE || (s[1] >> 6) ||
            memchr(s + 10, 0, sl - 10)) {
            rc = sl_errf(err, errlen, SL_EFORMAT, "rocksdb checkpoint '%s': a malformed state registry entry", dir);
            break;
        }
        int sid = (int)rdb_ld_be16(k + 3);
        if (sid != n) {
            rc = sl_errf(err, errlen, SL_EFORMAT, "rocksdb checkpoint '%s': state ids are not dense (%d after %d)",
                         dir, sid, n - 1);
            break;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            m = sl_realloc(m, (size_t)cap * sizeof *m);
        }
        m[n].sid = sid;
        m[n].kind = (sl_state_kind_t)s[0];
        m[n].upd = (sl_ttl_update_t)(s[1] & 0x0f);
        m[n].ttl_ms = (int64_t)sl_ld64(s + 2);
        unsigned it = (s[1] >> 4) & 3u;
        m[n].items = it == 1 ? SL_KBF_TTL_IS_YES
                     : it == 2 ? SL_KBF_TTL_IS_NO
                     : it == 3 ? SL_KBF_TTL_IS_UNKNOWN
                               : (m[n].ttl_ms > 0 ? SL_KBF_TTL_IS_YES : SL_KBF_TTL_IS_NO);
        m[n].name = sl_strndup((const char *)s + 10, sl - 10);
        n++;
    }
    e = rdb_iter_close(&x);
    if (e && !rc) rc = sl_errf(err, errlen, SL_EIO, "rocksdb checkpoint '%s': cannot read its metadata: %s", dir, e);
    if (e) rocksdb_free(e);
    if (rc) {
        rdb_meta_free(m, n);
        return rc;
    }
    *out = m;
    *nout = n;
    return SL_OK;
}

/* Copy path: dir's files become the working directory's database. */
static rdb_backend_t *rdb_open_copy(int maxp, sl_kg_range_t range, const char *src, const sl_rocksdb_opts_t *opts,
                                    char *err, size_t errlen) {
    sl_rocksdb_files_t files = {0};
    if (rdb_list_files(src, &files, err, errlen)) return NULL;
    bool has_current = false;
    for (int i = 0; i < files.n; i++) has_current |= strcmp(files.v[i].name, "CURRENT") == 0;
    if (!has_current) {
        sl_rocksdb_files_free(&files);
        sl_errf(err, errlen, SL_EFORMAT, "rocksdb checkpoint '%s': no CURRENT file (not a RocksDB checkpoint)", src);
        return NULL;
    }
    if (rdb_prepare_dir(opts->dir, err, errlen)) {
        sl_rocksdb_files_free(&files);
        return NULL;
    }
    int rc = SL_OK;
    for (int i = 0; i < files.n && !rc; i++) {
        char from[PATH_MAX], to[PATH_MAX];
        snprintf(from, sizeof from, "%s/%s", src, files.v[i].name);
        snprintf(to, sizeof to, "%s/%s", opts->dir, files.v[i].name);
        /* SSTs are immutable: a hard link is a copy.  The other files are
         * small and RocksDB may rewrite them: real copies. */
        if (files.v[i].shared && link(from, to) == 0) continue;
        rc = rdb_copy_file(from, to, err, errlen);
    }
    sl_rocksdb_files_free(&files);
    if (rc) {
        rdb_rm_rf(opts->dir);
        return NULL;
    }
    rdb_core_t *core = rdb_core_open(opts, err, errlen);
    if (!core) return NULL;
    rdb_backend_t *rb = rdb_backend_alloc(maxp, range, core, opts);
    rdb_meta_state_t *m;
    int n;
    if (rdb_read_meta(core->db, src, maxp, &m, &n, err, errlen)) {
        rdb_destroy(&rb->base);
        return NULL;
    }
    for (int i = 0; i < n; i++) rdb_add_state(rb, m[i].name, strlen(m[i].name), m[i].kind, m[i].ttl_ms, m[i].upd, true,
                                        m[i].items);
    rdb_meta_free(m, n);
    /* Key groups outside the range: (at most) two range tombstones. */
    if (rdb_delete_kgs(rb, 0, range.start) || rdb_delete_kgs(rb, range.end, maxp)) {
        sl_errf(err, errlen, SL_ESTATE, "%s", rb->err);
        rdb_destroy(&rb->base);
        return NULL;
    }
    return rb;
}

/* Rescale path: copies key groups [lo, hi) of checkpoint src into rb,
 * mapping its state ids to rb's by name. */
static int rdb_copy_range(rdb_backend_t *rb, const char *src, int lo, int hi, char *err, size_t errlen) {
    rocksdb_options_t *o = rdb_make_options(NULL, NULL);
    rocksdb_options_set_create_if_missing(o, 0);
    char *e = NULL;
    rocksdb_t *db = rocksdb_open_for_read_only(o, src, 0, &e);
    if (e) {
        int rc = sl_errf(err, errlen, SL_EIO, "rocksdb checkpoint '%s': cannot open it: %s", src, e);
        rocksdb_free(e);
        rocksdb_options_destroy(o);
        return rc;
    }
    rdb_meta_state_t *m;
    int n, rc = rdb_read_meta(db, src, rb->base.max_parallelism, &m, &n, err, errlen);
    int *map = NULL;
    if (!rc) {
        map = sl_malloc((size_t)SL_MAX(n, 1) * sizeof *map);
        for (int i = 0; i < n && !rc; i++) {
            map[i] = rdb_register_restored(rb, m[i].name, strlen(m[i].name), m[i].kind, m[i].ttl_ms, m[i].upd,
                                           m[i].items);
            if (map[i] < 0)
                rc = sl_errf(err, errlen, SL_ESTATE, "rocksdb checkpoint '%s': state '%s' (%s) conflicts with a state "
                             "of the same name from another checkpoint%s%s", src, m[i].name,
                             sl_kbf_kind_name(m[i].kind), rb->errc ? ": " : "", rb->errc ? rb->err : "");
        }
        rdb_meta_free(m, n);
    }
    if (!rc) {
        uint8_t klo[2], khi[2];
        rdb_be16(klo, (unsigned)lo);
        rdb_be16(khi, (unsigned)hi);
        rdb_iter_t x;
        rdb_iter_open(&x, db, NULL, khi, sizeof khi, false);
        rocksdb_writebatch_t *wb = rocksdb_writebatch_create();
        sl_buf_t key = {0};
        for (rocksdb_iter_seek(x.it, (const char *)klo, sizeof klo); rocksdb_iter_valid(x.it) && !rc;
             rocksdb_iter_next(x.it)) {
            size_t kl, vl;
            const uint8_t *k = rdb_iter_key(x.it, &kl);
            const char *v = rocksdb_iter_value(x.it, &vl);
            unsigned sid = kl >= RDB_KPFX ? rdb_ld_be16(k + 2) : UINT_MAX;
            if (sid >= (unsigned)n) {
                rc = sl_errf(err, errlen, SL_EFORMAT, "rocksdb checkpoint '%s': an entry of unknown state %u", src,
                             sid);
                break;
            }
            key.len = 0;
            sl_buf_append(&key, k, kl);
            rdb_be16(key.p + 2, (unsigned)map[sid]);
            rocksdb_writebatch_put(wb, (const char *)key.p, key.len, v, vl);
            size_t sz;
            rocksdb_writebatch_data(wb, &sz);
            if (sz >= RDB_BATCH_BYTES) {
                rocksdb_write(rb->core->db, rb->core->wo, wb, &e);
                rocksdb_writebatch_clear(wb);
                if (e) rc = rdb_fail(rb, "rescale copy", e), e = NULL;
            }
        }
        char *ie = rdb_iter_close(&x);
        if (ie && !rc) rc = sl_errf(err, errlen, SL_EIO, "rocksdb checkpoint '%s': cannot read it: %s", src, ie);
        if (ie) rocksdb_free(ie);
        if (!rc && rocksdb_writebatch_count(wb)) {
            rocksdb_write(rb->core->db, rb->core->wo, wb, &e);
            if (e) rc = rdb_fail(rb, "rescale copy", e);
        }
        if (rc == SL_ESTATE && rb->errc) sl_errf(err, errlen, SL_ESTATE, "%s", rb->err);
        rocksdb_writebatch_destroy(wb);
        sl_buf_free(&key);
    }
    sl_free(map);
    rocksdb_close(db);
    rocksdb_options_destroy(o);
    return rc;
}

sl_keyed_backend_t *sl_rocksdb_backend_open_native(int max_parallelism, sl_kg_range_t range,
                                                   const char *const *dirs, const sl_kg_range_t *dir_ranges,
                                                   int ndirs, const sl_rocksdb_opts_t *opts, char *err,
                                                   size_t errlen) {
    if (rdb_check_args(max_parallelism, range, opts, err, errlen)) return NULL;
    if (ndirs < 1 || !dirs || !dir_ranges) {
        sl_errf(err, errlen, SL_EINVAL, "rocksdb restore: no checkpoint directories");
        return NULL;
    }
    /* The directories that intersect the range must cover it exactly once. */
    int *cover = sl_calloc((size_t)(range.end - range.start), sizeof *cover);
    int whole = -1;
    for (int i = 0; i < ndirs; i++) {
        sl_kg_range_t r = dir_ranges[i];
        if (!dirs[i] || r.start < 0 || r.end > max_parallelism || r.start >= r.end) {
            sl_errf(err, errlen, SL_EINVAL, "rocksdb restore: checkpoint %d ('%s') has a bad key-group range [%d, %d)",
                    i, dirs[i] ? dirs[i] : "(null)", r.start, r.end);
            sl_free(cover);
            return NULL;
        }
        for (int kg = SL_MAX(r.start, range.start); kg < SL_MIN(r.end, range.end); kg++) {
            if (cover[kg - range.start]++) {
                sl_errf(err, errlen, SL_EINVAL, "rocksdb restore: key group %d is in more than one checkpoint "
                        "directory ('%s' and another)", kg, dirs[i]);
                sl_free(cover);
                return NULL;
            }
        }
        if (r.start <= range.start && r.end >= range.end) whole = i;
    }
    for (int kg = range.start; kg < range.end; kg++)
        if (!cover[kg - range.start]) {
            sl_errf(err, errlen, SL_EINVAL, "rocksdb restore: key group %d of [%d, %d) is in none of the %d checkpoint "
                    "directories", kg, range.start, range.end, ndirs);
            sl_free(cover);
            return NULL;
        }
    sl_free(cover);
    if (whole >= 0) {
        rdb_backend_t *rb = rdb_open_copy(max_parallelism, range, dirs[whole], opts, err, errlen);
        return rb ? &rb->base : NULL;
    }
    sl_keyed_backend_t *b = sl_rocksdb_backend_new(max_parallelism, range, opts, err, errlen);
    if (!b) return NULL;
    for (int i = 0; i < ndirs; i++) {
        int lo = SL_MAX(dir_ranges[i].start, range.start), hi = SL_MIN(dir_ranges[i].end, range.end);
        if (lo >= hi) continue;
        if (rdb_copy_range(RB(b), dirs[i], lo, hi, err, errlen)) {
            rdb_destroy(b);
            return NULL;
        }
    }
    return b;
}

/* ------------------------------------------------------------------ */
/* maintenance                                                         */

int sl_rocksdb_compact(sl_keyed_backend_t *b, char *err, size_t errlen) {
    if (!sl_rocksdb_backend_is(b)) return sl_errf(err, errlen, SL_EINVAL, "rocksdb compact: not a rocksdb backend");
    rdb_backend_t *rb = RB(b);
    if (rdb_begin_write(rb) || rdb_vc_flush(rb)) return sl_errf(err, errlen, SL_ESTATE, "%s", rb->err);
    rocksdb_flushoptions_t *fo = rocksdb_flushoptions_create();
    rocksdb_flushoptions_set_wait(fo, 1);
    char *e = NULL;
    rocksdb_flush(rb->core->db, fo, &e);
    rocksdb_flushoptions_destroy(fo);
    if (e) {
        int rc = sl_errf(err, errlen, SL_ESTATE, "rocksdb compact ('%s'): flush: %s", rb->core->dir, e);
        rocksdb_free(e);
        return rc;
    }
    for (int i = 0; i < 2; i++) rocksdb_compact_range(rb->core->db, NULL, 0, NULL, 0);
    /* The TTL filter may have dropped values the cache holds (clean, since
     * it was flushed): reads see what the database has now. */
    if (rb->vc) sl_rvc_clear(rb->vc);
    return SL_OK;
}

static uint64_t rdb_prop(rocksdb_t *db, const char *name) {
    uint64_t v = 0;
    return rocksdb_property_int(db, name, &v) == 0 ? v : 0;
}

int sl_rocksdb_memory(sl_keyed_backend_t *b, sl_rocksdb_mem_t *out) {
    if (!sl_rocksdb_backend_is(b) || !out) return SL_EINVAL;
    rocksdb_t *db = RB(b)->core->db;
    out->memtables = rdb_prop(db, "rocksdb.cur-size-all-mem-tables");
    out->block_cache = rdb_prop(db, "rocksdb.block-cache-usage");
    out->block_cache_cap = rdb_prop(db, "rocksdb.block-cache-capacity");
    out->table_readers = rdb_prop(db, "rocksdb.estimate-table-readers-mem");
    out->live_sst_bytes = rdb_prop(db, "rocksdb.live-sst-files-size");
    sl_rvc_stats_t vs = {0};
    if (RB(b)->vc) sl_rvc_stats(RB(b)->vc, &vs);
    out->value_cache = vs.bytes + vs.captured_bytes; /* with captured copies a checkpoint still reads */
    out->live_data = rdb_prop(db, "rocksdb.estimate-live-data-size");
    out->own_block_cache = RB(b)->own_cache;
    return SL_OK;
}

int sl_rocksdb_value_cache_stats(const sl_keyed_backend_t *b, sl_rvc_stats_t *out) {
    if (!sl_rocksdb_backend_is(b) || !out) return SL_EINVAL;
    const rdb_backend_t *rb = (const rdb_backend_t *)b;
    if (!rb->vc) return SL_ENOTFOUND;
    sl_rvc_stats(rb->vc, out);
    return SL_OK;
}
