/* key_group.c — key-group assignment (see key_group.h). */
#include "key_group.h"

#include "common/common.h"

int sl_kg_default_max_parallelism(int parallelism) {
    int64_t want = (int64_t)parallelism + parallelism / 2;
    int64_t p2 = 1;
    while (p2 < want) p2 <<= 1;
    if (p2 < 128) p2 = 128;
    if (p2 > 32768) p2 = 32768;
    return (int)p2;
}

uint64_t sl_kg_key_hash(const void *key, uint32_t len) {
    /* xxh3 then a finalizer so that small integer keys spread evenly. */
    return sl_mix64(sl_hash_bytes(key, len));
}

sl_kg_range_t sl_kg_range_for(int maxp, int parallelism, int index) {
    sl_kg_range_t r;
    r.start = (int)(((int64_t)index * maxp + parallelism - 1) / parallelism);
    r.end = (int)((((int64_t)index + 1) * maxp - 1) / parallelism) + 1;
    return r;
}
