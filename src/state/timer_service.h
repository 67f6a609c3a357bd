/*
 * timer_service.h — event-time and processing-time timers of one keyed
 * operator in one subtask, stored per key group (Flink's
 * InternalTimerService over KeyGroupPartitionedPriorityQueue).
 *
 * A timer is (domain, timestamp, key, namespace); registering the same one
 * twice keeps one.  Timers pop in timestamp order.  Owned by the task's
 * thread.
 */
#ifndef SL_TIMER_SERVICE_H
#define SL_TIMER_SERVICE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/common.h"
#include "sluice/sluice.h"
#include "state/key_group.h"

typedef struct sl_timer_service sl_timer_service_t;

/* A popped timer; key/ns point into storage owned by the service, valid
 * until the next pop or register. */
typedef struct sl_timer {
    int64_t ts;
    int kg;
    const uint8_t *key;
    uint32_t keylen;
    const uint8_t *ns;
    uint32_t nslen;
    uint64_t keyhash; /* sl_kg_key_hash(key, keylen), for sl_kb_set_key_hashed */
} sl_timer_t;

sl_timer_service_t *sl_timer_service_new(int max_parallelism, sl_kg_range_t range);
void sl_timer_service_destroy(sl_timer_service_t *s);

/* Returns 1 if added, 0 if it already existed. */
int sl_timers_register(sl_timer_service_t *s, sl_time_domain_t d, int kg, const void *key, uint32_t klen,
                       const void *ns, uint32_t nslen, int64_t ts);
/* Returns 1 if removed, 0 if there was no such timer. */
int sl_timers_delete(sl_timer_service_t *s, sl_time_domain_t d, int kg, const void *key, uint32_t klen,
                     const void *ns, uint32_t nslen, int64_t ts);
/* The same two with the key's hash, which must be sl_kg_key_hash(key,
 * klen) (the keyed backend's keyhash of its current key): saves hashing
 * the key again. */
int sl_timers_register_hashed(sl_timer_service_t *s, sl_time_domain_t d, int kg, uint64_t khash, const void *key,
                              uint32_t klen, const void *ns, uint32_t nslen, int64_t ts);
int sl_timers_delete_hashed(sl_timer_service_t *s, sl_time_domain_t d, int kg, uint64_t khash, const void *key,
                            uint32_t klen, const void *ns, uint32_t nslen, int64_t ts);
/* Exactly sl_timers_delete(old) then sl_timers_register(new) for one key
 * (khash as above), in one step: when the old timer exists and the new one
 * does not, the old one is moved to the new namespace and timestamp in
 * place.  Returns bit 0 set if the old timer was removed, bit 1 set if the
 * new one was added (both when old == new and it existed), or < 0. */
int sl_timers_replace(sl_timer_service_t *s, sl_time_domain_t d, int kg, uint64_t khash, const void *key,
                      uint32_t klen, const void *old_ns, uint32_t old_nslen, int64_t old_ts, const void *new_ns,
                      uint32_t new_nslen, int64_t new_ts);
/* Earliest timestamp in the domain, or INT64_MAX when there is none. */
int64_t sl_timers_peek(const sl_timer_service_t *s, sl_time_domain_t d);
/* Pops the earliest timer of the domain if its timestamp <= t. */
bool sl_timers_pop(sl_timer_service_t *s, sl_time_domain_t d, int64_t t, sl_timer_t *out);
int64_t sl_timers_count(const sl_timer_service_t *s, sl_time_domain_t d);
/* Visits every timer of one key group (for snapshots); order unspecified. */
int sl_timers_foreach_kg(const sl_timer_service_t *s, sl_time_domain_t d, int kg,
                         int (*cb)(void *c, const sl_timer_t *t), void *c);

/* ---- Snapshots ----
 *
 * Timers are snapshotted and restored by key group, both domains in one
 * block of the timer format:
 *
 *   block    := "SLTM" u8:version(1) varint:max_parallelism varint:key_group
 *               domain(event) domain(processing) u64le:checksum
 *   domain   := varint:n timer*
 *   timer    := u64le:timestamp (two's complement) bytes:key bytes:namespace
 *
 * with varint and bytes as in the keyed-state format (state_backend.h) and
 * the checksum xxh3-64 of every byte before it.  Writers emit timers in
 * order of timestamp (signed), then key, then namespace (bytewise); readers
 * accept any order but reject duplicates and keys of another key group.
 *
 * Two ways to write one:
 *   sl_timers_snapshot + sl_timers_snapshot_write_kg: copy-on-write, like
 *     the heap backend.  sl_timers_snapshot is the synchronous phase and
 *     costs O(key groups), not O(timers): each non-empty (domain, key
 *     group) is marked shared; the first register, delete or pop that
 *     changes a shared key group copies that key group's timers (O(its
 *     timers)), once per snapshot.  write_kg and release may run on any
 *     thread while the task keeps using the service (release: once, after
 *     every write_kg returned; a snapshot may outlive its service).
 *   sl_timers_snapshot_kg: serializes the key group now, on the task
 *     thread, in O(its timers) — for tests and small timer sets.
 */
typedef struct sl_timers_snapshot sl_timers_snapshot_t;

int sl_timers_snapshot(sl_timer_service_t *s, sl_timers_snapshot_t **out);
/* Appends key group kg's block to out; SL_EINVAL outside the range. */
int sl_timers_snapshot_write_kg(const sl_timers_snapshot_t *snap, int kg, sl_buf_t *out);
void sl_timers_snapshot_release(sl_timers_snapshot_t *snap);
int sl_timers_snapshot_kg(const sl_timer_service_t *s, int kg, sl_buf_t *out);

/* Loads one key group's block into the service, whose key group kg must
 * hold no timer in either domain.  The block is checked whole before
 * anything is loaded; a duplicate timer removes what was loaded.  0, or
 * < 0 with err naming what is wrong. */
int sl_timers_restore_kg(sl_timer_service_t *s, int kg, const uint8_t *data, size_t len, char *err, size_t errlen);

/* Copy-on-write counters (task thread). */
typedef struct sl_timers_cow_stats {
    uint64_t snapshots, sync_kgs, cow_copies, cow_timers, cow_reclaimed;
} sl_timers_cow_stats_t;
void sl_timers_cow_stats(const sl_timer_service_t *s, sl_timers_cow_stats_t *out);

#endif
