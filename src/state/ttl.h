/*
 * ttl.h — state time-to-live (Flink's StateTtlConfig, processing time): the
 * accessor layer that keeps the timestamp prefix of TTL state, and the heap
 * backend's incremental cleanup.
 *
 * The byte contract is the one of state_backend.h (sl_state_desc_t): a
 * state registered with ttl_ms > 0 stores, in front of every value, list
 * element and map value, the 8-byte little-endian processing time (ms, the
 * backend's clock sl_kb_now_ms) of its last write — or last read, with
 * SL_TTL_ON_READ_AND_WRITE.  An item is expired when ts + ttl_ms <= now.
 *
 * The functions below do for a TTL state what the backend's ops do for a
 * plain one, on (current key, ns):
 *   - writes put the current time in front of the bytes;
 *   - reads never return an expired item (unless return_expired): get
 *     returns NULL, foreach skips it; an expired item they meet is removed
 *     (a list is rewritten without its expired elements);
 *   - with update_on_read, a read also refreshes what it returns;
 *   - incremental cleanup (heap backend only): every call examines
 *     cleanup_size (key, ns) entries of the state further along a cursor
 *     that walks every key group, and removes what has expired — reads
 *     before they look the item up, writes after they wrote.  Other
 *     backends refuse it (the first refusal turns it off): they clean up
 *     their own way (RocksDB: a compaction filter).
 *
 * Pointers: what a read returns (and what a foreach callback sees) stays
 * valid until the next call on the same state (any key); a foreach callback
 * must not call functions of the state it iterates.
 *
 * Errors: 0 or a negative SL_E* code.  SL_EFORMAT when a stored item is
 * shorter than the timestamp (state written without TTL, read with it).
 * Threading: the backend's (the task's) thread.
 */
#ifndef SL_TTL_H
#define SL_TTL_H

#include <stdbool.h>
#include <stdint.h>

#include "common/common.h"
#include "state/state_backend.h"

/* ---- the byte layout (any backend) ---- */

static inline int64_t sl_ttl_ts(const void *p) { return (int64_t)sl_ld64(p); }
static inline void sl_ttl_set_ts(void *p, int64_t ts) { sl_st64(p, (uint64_t)ts); }

/* ts + ttl_ms <= now, without overflow (an expiry past INT64_MAX never
 * comes).  ttl_ms > 0. */
static inline bool sl_ttl_expired(int64_t ts, int64_t ttl_ms, int64_t now) {
    int64_t end;
    if (__builtin_add_overflow(ts, ttl_ms, &end)) return ts < 0; /* only a far negative ts wraps low */
    return end <= now;
}

/* An item of a TTL state (value, list element, map value) of len bytes
 * starting at p: expired at now?  An item too short to hold a timestamp is
 * never expired (its bytes are not ours to judge). */
static inline bool sl_ttl_item_expired(const void *p, uint32_t len, int64_t ttl_ms, int64_t now) {
    return len >= SL_TTL_TS_BYTES && sl_ttl_expired(sl_ttl_ts(p), ttl_ms, now);
}

/* ---- the accessor layer (ttl.c) ---- */

/* Flink's StateTtlConfig, as the accessors need it, plus scratch space.
 * Owned by the state handle that uses it (sl_ttl_state_new / _free). */
typedef struct sl_ttl_state {
    char *name;            /* the state's, for messages */
    int64_t ttl_ms;        /* > 0 */
    bool update_on_read;   /* SL_TTL_ON_READ_AND_WRITE */
    bool return_expired;   /* ReturnExpiredIfNotCleanedUp: a read returns an expired item once (then it is gone) */
    bool every_record;     /* also clean up once per record (sl_ttl_on_record) */
    int cleanup_size;      /* (key, ns) entries examined per call; 0: no incremental cleanup */
    sl_buf_t buf;          /* scratch: the item being written, a copy of an expired item being returned */
    sl_buf_t aux;          /* scratch: a list or map being rebuilt */
} sl_ttl_state_t;

sl_ttl_state_t *sl_ttl_state_new(const char *name, int64_t ttl_ms, sl_ttl_update_t update, bool return_expired,
                                 int cleanup_size, bool every_record);
void sl_ttl_state_free(sl_ttl_state_t *t);

/* VALUE: *out is the value without its timestamp (NULL when absent or
 * expired), *len its length. */
int sl_ttl_value_get(sl_keyed_backend_t *b, int sid, sl_ttl_state_t *t, const void *ns, uint32_t nslen,
                     const void **out, uint32_t *len);
int sl_ttl_value_put(sl_keyed_backend_t *b, int sid, sl_ttl_state_t *t, const void *ns, uint32_t nslen,
                     const void *v, uint32_t len);
/* Removes the (current key, ns) entry; 1 when something was removed. */
int sl_ttl_remove(sl_keyed_backend_t *b, int sid, sl_ttl_state_t *t, const void *ns, uint32_t nslen);

/* LIST */
int sl_ttl_list_add(sl_keyed_backend_t *b, int sid, sl_ttl_state_t *t, const void *ns, uint32_t nslen,
                    const void *v, uint32_t len);
/* Calls cb for every element that is not expired, in list order; returns
 * how many (or the callback's non-zero value, or < 0). */
int sl_ttl_list_foreach(sl_keyed_backend_t *b, int sid, sl_ttl_state_t *t, const void *ns, uint32_t nslen,
                        sl_kb_list_cb cb, void *c);

/* MAP */
int sl_ttl_map_get(sl_keyed_backend_t *b, int sid, sl_ttl_state_t *t, const void *ns, uint32_t nslen,
                   const void *uk, uint32_t uklen, const void **out, uint32_t *len);
int sl_ttl_map_put(sl_keyed_backend_t *b, int sid, sl_ttl_state_t *t, const void *ns, uint32_t nslen,
                   const void *uk, uint32_t uklen, const void *v, uint32_t len);
/* 1 when a user key that had not expired was removed, else 0 (an expired
 * one is removed too). */
int sl_ttl_map_remove(sl_keyed_backend_t *b, int sid, sl_ttl_state_t *t, const void *ns, uint32_t nslen,
                      const void *uk, uint32_t uklen);
int sl_ttl_map_foreach(sl_keyed_backend_t *b, int sid, sl_ttl_state_t *t, const void *ns, uint32_t nslen,
                       sl_kb_map_cb cb, void *c);

/* Reducing / aggregating: an accumulator of exactly size bytes.  A new
 * (or expired) accumulator starts as a copy of value (reducing: size
 * bytes, fn not called) or zero-filled, then init(ctx, acc) when init is
 * set, then fn (aggregating); an existing one gets fn(ctx, acc, value).
 * (With return_expired an expired accumulator is folded into, as Flink's
 * ReturnExpiredIfNotCleanedUp does.)  The timestamp is set after fn. */
int sl_ttl_fold(sl_keyed_backend_t *b, int sid, sl_ttl_state_t *t, const void *ns, uint32_t nslen, uint32_t size,
                bool reducing, void (*init)(void *ctx, void *acc), void (*fn)(void *ctx, void *acc, const void *value),
                void *ctx, const void *value);

/* One incremental cleanup step of the state (for cleanup per record). */
void sl_ttl_on_record(sl_keyed_backend_t *b, int sid, sl_ttl_state_t *t, int64_t now);

/* ---- heap backend (heap_backend.c) ---- */

/* Incremental cleanup of TTL state sid: examines up to max_entries (key,
 * ns) entries (and at most 8 x max_entries cells and key groups, so an
 * empty or sparse state costs little) from where the previous call
 * stopped, walking every key group of the range in turn, and removes
 * expired values, list elements and map entries (an entry left empty goes
 * too).  Returns at once while nothing can have expired: each round of the
 * cursor notes the least timestamp it met (see heap_backend.c).  A table
 * shared with a snapshot is copied before anything is removed from it, as
 * for any write.  Returns the number of items removed, 0 for a state
 * without TTL, or SL_EINVAL when b is not a heap backend or sid is
 * unknown.  Task thread. */
int sl_heap_backend_ttl_cleanup(sl_keyed_backend_t *b, int sid, int max_entries, int64_t now);

#endif
