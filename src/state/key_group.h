/*
 * key_group.h — key groups: the unit in which keyed state is stored,
 * snapshotted and moved between subtasks (Flink's KeyGroupRangeAssignment).
 *
 *   key_group(key)          = hash(key) mod max_parallelism
 *   operator_index(kg)      = kg * parallelism / max_parallelism
 *   range(operator_index)   = the contiguous key groups that index owns
 */
#ifndef SL_KEY_GROUP_H
#define SL_KEY_GROUP_H

#include <stdint.h>

typedef struct sl_kg_range {
    int start; /* first key group, inclusive */
    int end;   /* last key group, exclusive */
} sl_kg_range_t;

/* Flink's default max parallelism for a given parallelism. */
int sl_kg_default_max_parallelism(int parallelism);
/* Hash of key bytes (stable across processes and versions: it decides
 * where state lives, so it must never change). */
uint64_t sl_kg_key_hash(const void *key, uint32_t len);
static inline int sl_kg_of_hash(uint64_t h, int maxp) { return (int)(h % (uint64_t)maxp); }
static inline int sl_kg_operator_index(int kg, int maxp, int parallelism) {
    return (int)(((int64_t)kg * parallelism) / maxp);
}
sl_kg_range_t sl_kg_range_for(int maxp, int parallelism, int index);

#endif
