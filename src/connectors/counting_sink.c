/*
 * counting_sink.c — a sink that only counts records (benchmarks and tests),
 * plus an order-independent checksum of the rows it saw.
 *
 * The stats live in a reference-counted struct shared by every subtask's
 * writer (relaxed atomics: the totals are read after the job or as a rough
 * live figure) and by the caller, who releases it with
 * sl_counting_sink_stats_free(); see connectors.h.
 */
#include <stdatomic.h>

#include "common/common.h"
#include "connectors/connectors.h"

struct sl_counting_sink_stats {
    atomic_int refs;
    _Atomic int64_t count;
    _Atomic uint64_t checksum;
};

static void stats_unref(sl_counting_sink_stats_t *s) {
    if (s && atomic_fetch_sub(&s->refs, 1) == 1) sl_free(s);
}

void sl_counting_sink_stats_free(sl_counting_sink_stats_t *s) { stats_unref(s); }

int64_t sl_counting_sink_count(const sl_counting_sink_stats_t *s) {
    return s ? atomic_load_explicit(&((sl_counting_sink_stats_t *)s)->count, memory_order_relaxed) : 0;
}

uint64_t sl_counting_sink_checksum(const sl_counting_sink_stats_t *s) {
    return s ? atomic_load_explicit(&((sl_counting_sink_stats_t *)s)->checksum, memory_order_relaxed) : 0;
}

static int count_open(void *ctx, int subtask, int parallelism, const sl_schema_t *schema, void **writer, char *err,
                      size_t errlen) {
    *writer = ctx;
    return 0;
}

static int count_write(void *writer, const sl_record_t *rec, char *err, size_t errlen) {
    sl_counting_sink_stats_t *s = writer;
    atomic_fetch_add_explicit(&s->count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->checksum, sl_hash_bytes(rec->row.data, rec->row.len), memory_order_relaxed);
    return 0;
}

static int count_finish(void *writer, char *err, size_t errlen) { return 0; }
static void count_close(void *writer) {}
static void count_destroy(void *ctx) { stats_unref(ctx); }

static const sl_sink_ops_t counting_sink_ops = {
    .name = "counting",
    .open = count_open,
    .write = count_write,
    .finish = count_finish,
    .close = count_close,
    .destroy = count_destroy,
};

sl_sink_t sl_counting_sink(sl_counting_sink_stats_t **stats_out) {
    sl_counting_sink_stats_t *s = sl_calloc(1, sizeof *s);
    atomic_init(&s->refs, 1);
    if (stats_out) {
        atomic_fetch_add(&s->refs, 1);
        *stats_out = s;
    }
    sl_sink_t sink = {&counting_sink_ops, s};
    return sink;
}
