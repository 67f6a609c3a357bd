/*
 * state_backend.c — the part of the keyed state backend that every backend
 * shares: the current key, its hash and its key group (see state_backend.h).
 */
#include "state_backend.h"

#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "common/common.h"
#include "state/rocksdb_backend.h"

/* Initial capacity of the current-key buffer: most keys are a few bytes, so
 * b->key is never NULL and set_key rarely grows it. */
#define SL_KB_KEYCAP0 32

void sl_kb_base_init(sl_keyed_backend_t *b, const sl_keyed_backend_ops_t *ops, int maxp, sl_kg_range_t r) {
    if (maxp <= 0 || r.start < 0 || r.end > maxp || r.start >= r.end) {
        fprintf(stderr, "sluice: bad key-group range [%d, %d) for max parallelism %d\n", r.start, r.end, maxp);
        abort();
    }
    memset(b, 0, sizeof *b);
    b->ops = ops;
    b->max_parallelism = maxp;
    b->range = r;
    b->keycap = SL_KB_KEYCAP0;
    b->key = sl_malloc(b->keycap);
    b->kg = -1; /* no current key yet */
}

void sl_kb_base_free(sl_keyed_backend_t *b) {
    sl_free(b->key);
    b->key = NULL;
    b->keylen = b->keycap = 0;
    b->kg = -1;
}

int sl_kb_set_key(sl_keyed_backend_t *b, const void *key, uint32_t len) {
    return sl_kb_set_key_hashed(b, key, len, sl_kg_key_hash(key, len));
}

int sl_kb_set_key_hashed(sl_keyed_backend_t *b, const void *key, uint32_t len, uint64_t hash) {
    /* sl_kg_of_hash, without the division when max parallelism is a power
     * of two (the default): this runs once per record. */
    uint64_t maxp = (uint64_t)b->max_parallelism;
    int kg = (maxp & (maxp - 1)) == 0 ? (int)(hash & (maxp - 1)) : sl_kg_of_hash(hash, b->max_parallelism);
    /* A key outside our range means records were routed to the wrong
     * subtask: state would land in a key group nobody snapshots.  That is a
     * bug in the engine, not in the job, so it is fatal in every build. */
    if (SL_UNLIKELY(kg < b->range.start || kg >= b->range.end)) {
        fprintf(stderr, "sluice: key group %d outside this backend's range [%d, %d)\n", kg, b->range.start,
                b->range.end);
        abort();
    }
    if (SL_UNLIKELY(len > b->keycap)) {
        uint32_t nc = b->keycap ? b->keycap : SL_KB_KEYCAP0;
        while (nc < len) nc = nc > UINT32_MAX / 2 ? len : nc * 2;
        sl_free(b->key);
        b->key = sl_malloc(nc);
        b->keycap = nc;
    }
    /* key may point into b->key: load before storing. */
    if (len >= 8 && len <= 16) {
        uint64_t x = sl_ld64(key), y = sl_ld64((const uint8_t *)key + len - 8);
        sl_st64(b->key, x);
        sl_st64(b->key + len - 8, y);
    } else if (len) {
        memmove(b->key, key, len);
    }
    b->keylen = len;
    b->keyhash = hash;
    b->kg = kg;
    return kg;
}

int64_t sl_kb_now_ms(const sl_keyed_backend_t *b) {
    if (b->clock) return b->clock(b->clock_ctx);
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void sl_kb_set_clock(sl_keyed_backend_t *b, int64_t (*clock)(void *ctx), void *ctx) {
    b->clock = clock;
    b->clock_ctx = ctx;
}

int sl_kb_memory(sl_keyed_backend_t *b, sl_kb_memory_t *out) {
    if (!b || !out) return SL_EINVAL;
    int64_t heap = sl_heap_backend_memory(b);
    if (heap >= 0) {
        *out = (sl_kb_memory_t){heap, -1, -1, -1, -1};
        return SL_OK;
    }
    sl_rocksdb_mem_t m;
    if (sl_rocksdb_memory(b, &m) != SL_OK) return SL_EINVAL;
    *out = (sl_kb_memory_t){
        .state_bytes = (int64_t)(m.memtables + m.table_readers + m.value_cache + (m.own_block_cache ? m.block_cache : 0)),
        .rocksdb_cur_size_all_mem_tables = (int64_t)m.memtables,
        .rocksdb_estimate_table_readers_mem = (int64_t)m.table_readers,
        .rocksdb_block_cache_usage = (int64_t)m.block_cache,
        .rocksdb_estimate_live_data_size = (int64_t)m.live_data,
    };
    return SL_OK;
}
