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
} sl_timer_t;

sl_timer_service_t *sl_timer_service_new(int max_parallelism, sl_kg_range_t range);
void sl_timer_service_destroy(sl_timer_service_t *s);

/* Returns 1 if added, 0 if it already existed. */
int sl_timers_register(sl_timer_service_t *s, sl_time_domain_t d, int kg, const void *key, uint32_t klen,
                       const void *ns, uint32_t nslen, int64_t ts);
/* Returns 1 if removed, 0 if there was no such timer. */
int sl_timers_delete(sl_timer_service_t *s, sl_time_domain_t d, int kg, const void *key, uint32_t klen,
                     const void *ns, uint32_t nslen, int64_t ts);
/* Earliest timestamp in the domain, or INT64_MAX when there is none. */
int64_t sl_timers_peek(const sl_timer_service_t *s, sl_time_domain_t d);
/* Pops the earliest timer of the domain if its timestamp <= t. */
bool sl_timers_pop(sl_timer_service_t *s, sl_time_domain_t d, int64_t t, sl_timer_t *out);
int64_t sl_timers_count(const sl_timer_service_t *s, sl_time_domain_t d);
/* Visits every timer of one key group (for snapshots); order unspecified. */
int sl_timers_foreach_kg(const sl_timer_service_t *s, sl_time_domain_t d, int kg,
                         int (*cb)(void *c, const sl_timer_t *t), void *c);

#endif
