/*
 * test_state_memory.c — the memory of keyed state as a metric
 * (stateMemoryBytes, and Flink's RocksDB native metrics; issue 11).
 *
 *   heap_accounting_random: a heap backend under a random mix of value,
 *     list and map writes (small and spilled values, resizes, removals,
 *     clears), snapshots held across writes (copy-on-write copies) and
 *     released in random order, TTL cleanup and a restore into a second
 *     backend.  After every step the counter kept at allocation and free
 *     (sl_heap_backend_memory) equals a walk of every table
 *     (sl_heap_backend_memory_walk), and is at least the payload bytes a
 *     reference model of the value states says are live; once everything
 *     is removed it is back to the states' fixed table arrays.
 *   job_metric_heap / job_metric_rocksdb: an embedded keyed job whose
 *     value state grows to K/2 keys, then K keys of V bytes, then is
 *     cleared (the source pauses at each step until the listener saw the
 *     keyed operator's numRecordsIn reach the step for three reports).
 *     Payload P = keys x (8 key bytes + V).  Heap: P <= stateMemoryBytes
 *     <= 4 P + 64 KiB at each step (a cell is 16 bytes of header + the
 *     padded key and value, at most 32/13 cells per entry after a doubling:
 *     < 3.1 P for V = 64; 64 KiB: the table arrays of 128 key groups), it
 *     grows from K/2 to K keys by at least 0.9 x the added payload, and
 *     after the clear it is at most 64 KiB.  RocksDB (16 MiB write buffer):
 *     P <= stateMemoryBytes <= 4 P + 8 MiB (a memtable's bloom filter, a
 *     tenth of its 8 MiB, and its first arena block are allocated ahead,
 *     whatever P is; the value cache's entries are the payload + a header),
 *     it grows from K/2 to K keys, and the four native metrics are
 *     reported (>= 0) while the heap run reports none (-1).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "pipeline_util.h"
#include "sluice/metrics.h"
#include "state/state_backend.h"
#include "state/ttl.h"
#include "test.h"

static uint64_t rng(uint64_t *s) {
    uint64_t x = (*s += 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* ---- heap accounting against a walk ------------------------------------ */

#define NKEYS 300
#define NNS 3

static int64_t manual_now;
static int64_t manual_clock(void *ctx) {
    (void)ctx;
    return manual_now;
}

/* Reference model of state "v" (a value state): live value lengths, -1 absent. */
static int32_t ref_v[NKEYS][NNS];

static int64_t ref_payload(void) {
    int64_t n = 0;
    for (int k = 0; k < NKEYS; k++)
        for (int s = 0; s < NNS; s++)
            if (ref_v[k][s] >= 0) n += 8 + 1 + ref_v[k][s]; /* key, ns, value */
    return n;
}

static void set_key(sl_keyed_backend_t *b, int k) {
    uint64_t key = (uint64_t)k * 7919u;
    sl_kb_set_key(b, &key, sizeof key);
}

TEST(heap_accounting_random) {
    for (uint64_t seed = 1; seed <= 6; seed++) {
        uint64_t r = seed;
        sl_keyed_backend_t *b = sl_heap_backend_new(128, (sl_kg_range_t){0, 128});
        sl_kb_set_clock(b, manual_clock, NULL);
        manual_now = 1000;
        int sv = b->ops->register_state(b, &(sl_state_desc_t){"v", SL_STATE_VALUE, 0, 0});
        int sl = b->ops->register_state(b, &(sl_state_desc_t){"l", SL_STATE_LIST, 0, 0});
        int sm = b->ops->register_state(b, &(sl_state_desc_t){"m", SL_STATE_MAP, 0, 0});
        int st = b->ops->register_state(b, &(sl_state_desc_t){"t", SL_STATE_VALUE, 50, 0});
        CHECK(sv >= 0 && sl >= 0 && sm >= 0 && st >= 0);
        const int64_t base = sl_heap_backend_memory(b);
        CHECK(base > 0);
        CHECK_EQ(base, sl_heap_backend_memory_walk(b));
        memset(ref_v, 0xff, sizeof ref_v);
        sl_kb_snapshot_t *held[4] = {0};
        uint8_t val[600];
        for (size_t i = 0; i < sizeof val; i++) val[i] = (uint8_t)(i * 31 + seed);
        for (int step = 0; step < 6000; step++) {
            int k = (int)(rng(&r) % NKEYS), s = (int)(rng(&r) % NNS);
            uint8_t ns = (uint8_t)s;
            set_key(b, k);
            /* mostly short values, sometimes long ones (spilled) */
            uint32_t len = rng(&r) % 8 == 0 ? (uint32_t)(130 + rng(&r) % 400) : (uint32_t)(rng(&r) % 40);
            switch (rng(&r) % 12) {
            case 0: case 1: case 2:
                CHECK_EQ(b->ops->put(b, sv, &ns, 1, val, len), 0);
                ref_v[k][s] = (int32_t)len;
                break;
            case 3: { /* get_mut with another length resizes */
                bool created;
                uint8_t *p = b->ops->get_mut(b, sv, &ns, 1, len, &created);
                CHECK(p != NULL);
                CHECK_EQ(b->ops->put(b, sv, &ns, 1, p, len), 0);
                ref_v[k][s] = (int32_t)len;
                break;
            }
            case 4:
                b->ops->remove(b, sv, &ns, 1);
                ref_v[k][s] = -1;
                break;
            case 5: case 6: CHECK_EQ(b->ops->list_add(b, sl, &ns, 1, val, len), 0); break;
            case 7: b->ops->remove(b, sl, &ns, 1); break;
            case 8: {
                uint8_t uk[2] = {(uint8_t)(rng(&r) % 20), 0};
                CHECK_EQ(b->ops->map_put(b, sm, &ns, 1, uk, 2, val, len), 0);
                break;
            }
            case 9: {
                uint8_t uk[2] = {(uint8_t)(rng(&r) % 20), 0};
                b->ops->map_remove(b, sm, &ns, 1, uk, 2);
                break;
            }
            case 10: { /* TTL state: 8-byte timestamp, then the value */
                uint8_t tv[8 + 64];
                uint64_t ts = (uint64_t)manual_now;
                memcpy(tv, &ts, 8);
                memcpy(tv + 8, val, 64);
                CHECK_EQ(b->ops->put(b, st, NULL, 0, tv, 8 + (len % 64)), 0);
                break;
            }
            case 11: { /* snapshots: take one into a free slot, or release one */
                int slot = (int)(rng(&r) % 4);
                if (held[slot]) {
                    sl_kb_snapshot_release(held[slot]);
                    held[slot] = NULL;
                } else {
                    CHECK_EQ(b->ops->snapshot(b, &held[slot]), 0);
                }
                break;
            }
            }
            if (step % 500 == 499) { /* time passes: TTL cleanup removes expired entries */
                manual_now += 40;
                sl_heap_backend_ttl_cleanup(b, st, 200, manual_now);
            }
            int64_t m = sl_heap_backend_memory(b), w = sl_heap_backend_memory_walk(b);
            if (m != w) fprintf(stderr, "  seed %llu step %d: counted %lld, walk %lld\n",
                                (unsigned long long)seed, step, (long long)m, (long long)w);
            CHECK_EQ(m, w);
            CHECK(m >= base + ref_payload());
        }
        /* A restore into another backend counts what it loads. */
        sl_kb_snapshot_t *snap;
        CHECK_EQ(b->ops->snapshot(b, &snap), 0);
        sl_keyed_backend_t *b2 = sl_heap_backend_new(128, (sl_kg_range_t){0, 128});
        sl_kb_set_clock(b2, manual_clock, NULL);
        char err[256];
        for (int kg = 0; kg < 128; kg++) {
            sl_buf_t out = {0};
            CHECK_EQ(sl_kb_snapshot_write(snap, kg, &out), 0);
            CHECK_EQ(b2->ops->restore(b2, kg, out.p, out.len, err, sizeof err), 0);
            sl_buf_free(&out);
        }
        sl_kb_snapshot_release(snap);
        CHECK(sl_heap_backend_memory(b2) > 0);
        CHECK_EQ(sl_heap_backend_memory(b2), sl_heap_backend_memory_walk(b2));
        /* Remove everything (with snapshots still out: the copies they
         * hold are not live state). */
        for (int k = 0; k < NKEYS; k++) {
            set_key(b, k);
            b->ops->remove(b, st, NULL, 0);
            for (int s = 0; s < NNS; s++) {
                uint8_t ns = (uint8_t)s;
                b->ops->remove(b, sv, &ns, 1);
                b->ops->remove(b, sl, &ns, 1);
                b->ops->remove(b, sm, &ns, 1);
            }
        }
        for (int i = 0; i < 4; i++) sl_kb_snapshot_release(held[i]);
        CHECK_EQ(sl_heap_backend_memory(b), sl_heap_backend_memory_walk(b));
        CHECK_EQ(sl_heap_backend_memory(b), base);
        b->ops->destroy(b);
        b2->ops->destroy(b2);
    }
}

/* ---- the metric of a running job ---------------------------------------- */

#define K 4000
#define V 64

typedef struct seen {
    pthread_mutex_t mu;
    int64_t in;          /* the keyed operator's numRecordsIn in its latest report */
    int same;            /* reports in a row with that numRecordsIn */
    sl_operator_metrics_t last;
    int reports;
} seen_t;

static seen_t g_seen;

static void listener(void *ctx, const sl_operator_metrics_t *ops, int n) {
    (void)ctx;
    for (int i = 0; i < n; i++) {
        if (strcmp(ops[i].operator_name, "stateful") != 0) continue;
        pthread_mutex_lock(&g_seen.mu);
        if (ops[i].num_records_in == g_seen.in) g_seen.same++;
        else g_seen.same = 1;
        g_seen.in = ops[i].num_records_in;
        g_seen.last = ops[i];
        g_seen.reports++;
        pthread_mutex_unlock(&g_seen.mu);
    }
}

/* What the source saw at each pause: the keyed operator's figures once
 * its numRecordsIn stayed at the pause point for three reports. */
typedef struct src {
    int pos;
    int64_t deadline_ns;
    bool timed_out;
    sl_operator_metrics_t at[2]; /* at K/2 and K records */
} src_t;
static src_t g_src;

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int src_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    (void)ctx, (void)subtask, (void)p, (void)err, (void)el;
    *reader = &g_src;
    *nsplits = 1;
    return 0;
}

static int src_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    (void)err, (void)el;
    src_t *s = reader;
    if (s->pos >= 2 * K) {
        sl_src_split_finished(out, 0);
        return SL_SRC_END;
    }
    int stop = s->pos < K / 2 ? K / 2 : s->pos < K ? K : 2 * K;
    if (s->pos == K / 2 || s->pos == K) {
        int which = s->pos == K / 2 ? 0 : 1;
        if (s->at[which].operator_name == NULL) {
            if (!s->deadline_ns) s->deadline_ns = mono_ns() + 30 * 1000000000LL;
            pthread_mutex_lock(&g_seen.mu);
            bool ok = g_seen.in == s->pos && g_seen.same >= 3;
            if (ok) s->at[which] = g_seen.last;
            pthread_mutex_unlock(&g_seen.mu);
            if (!ok && mono_ns() < s->deadline_ns) return SL_SRC_IDLE;
            if (!ok) {
                s->timed_out = true;
                s->at[which].operator_name = "timed out";
            }
            s->deadline_ns = 0;
        }
    }
    for (int n = 0; n < max && s->pos < stop; n++) {
        sl_row_writer_t *w = sl_src_row(out);
        sl_rw_set_i64(w, 0, s->pos % K);
        sl_rw_set_i64(w, 1, s->pos >= K); /* 1: clear */
        sl_src_emit(out, 0, SL_NO_TIMESTAMP);
        s->pos++;
    }
    return SL_SRC_MORE;
}

static void src_destroy(void *r) { (void)r; }

static const sl_source_ops_t src_ops = {
    .name = "steps", .create_reader = src_create, .poll = src_poll, .destroy_reader = src_destroy};

typedef struct fn {
    sl_state_t *v;
} fn_t;
static void *fn_clone(const void *c) {
    (void)c;
    return calloc(1, sizeof(fn_t));
}
static void fn_free(void *c) { free(c); }
static int fn_open(void *ctx, sl_rt_t *rt) {
    fn_t *f = ctx;
    f->v = sl_state_value(rt, "v");
    return f->v ? 0 : -1;
}
static int fn_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    (void)pc, (void)out;
    fn_t *f = ctx;
    if (sl_row_i64(&in->row, 1)) {
        sl_state_clear(f->v);
        return 0;
    }
    uint8_t val[V];
    int64_t k = sl_row_i64(&in->row, 0);
    for (int i = 0; i < V; i++) val[i] = (uint8_t)(k + i);
    return sl_value_put(f->v, val, V);
}

static void run_job(int backend) {
    memset(&g_src, 0, sizeof g_src);
    pthread_mutex_lock(&g_seen.mu);
    g_seen.in = -1;
    g_seen.same = 0;
    g_seen.reports = 0;
    memset(&g_seen.last, 0, sizeof g_seen.last);
    pthread_mutex_unlock(&g_seen.mu);
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 1);
    sl_env_set_max_parallelism(env, 128);
    sl_env_set_state_backend(env, backend);
    if (backend == SL_STATE_BACKEND_ROCKSDB) {
        char dir[1200];
        snprintf(dir, sizeof dir, "%s/rocksdb-work", sl_test_tmpdir());
        sl_env_set_rocksdb_options(env, dir, 8 << 20, 16 << 20);
    }
    sl_env_set_metrics_listener(env, listener, NULL);
    sl_schema_t *schema = sl_schema_parse("k BIGINT NOT NULL, clear BIGINT NOT NULL", NULL, 0);
    sl_stream_t *s = sl_from_source(env, (sl_source_t){&src_ops, NULL, schema}, sl_wm_none(), "steps");
    sl_process_fn_t fn = {.open = fn_open, .process = fn_process, .opts = {.ctx_clone = fn_clone, .ctx_free = fn_free}};
    s = sl_name(sl_keyed_process(sl_key_by(s, "k"), fn, sl_schema_parse("k BIGINT NOT NULL", NULL, 0)), "stateful");
    collected_t *c = collected_new();
    sl_sink_to(s, collect_sink(c), "out");
    int rc = sl_env_execute(env, "state-memory");
    if (rc) fprintf(stderr, "  %s\n", sl_env_error(env));
    CHECK_EQ(rc, 0);
    sl_env_destroy(env);
    CHECK_EQ(c->n, 0); /* the function emits nothing */
    collected_free(c);
    CHECK(!g_src.timed_out);
    pthread_mutex_lock(&g_seen.mu);
    sl_operator_metrics_t end = g_seen.last;
    pthread_mutex_unlock(&g_seen.mu);
    CHECK_EQ(end.num_records_in, 2 * K);
    const int64_t p1 = (int64_t)(K / 2) * (8 + V), p2 = (int64_t)K * (8 + V);
    int64_t m1 = g_src.at[0].state_memory_bytes, m2 = g_src.at[1].state_memory_bytes;
    fprintf(stderr, "  %s: P %lld -> stateMemoryBytes %lld; P %lld -> %lld; cleared -> %lld\n",
            backend == SL_STATE_BACKEND_ROCKSDB ? "rocksdb" : "heap", (long long)p1, (long long)m1, (long long)p2,
            (long long)m2, (long long)end.state_memory_bytes);
    CHECK_EQ(g_src.at[0].num_records_in, K / 2);
    CHECK_EQ(g_src.at[1].num_records_in, K);
    if (backend != SL_STATE_BACKEND_ROCKSDB) {
        CHECK(m1 >= p1 && m1 <= 4 * p1 + (64 << 10));
        CHECK(m2 >= p2 && m2 <= 4 * p2 + (64 << 10));
        CHECK(m2 - m1 >= (p2 - p1) * 9 / 10);
        CHECK(end.state_memory_bytes >= 0 && end.state_memory_bytes <= (64 << 10));
        CHECK_EQ(end.rocksdb_cur_size_all_mem_tables, -1);
        CHECK_EQ(end.rocksdb_estimate_table_readers_mem, -1);
        CHECK_EQ(end.rocksdb_block_cache_usage, -1);
        CHECK_EQ(end.rocksdb_estimate_live_data_size, -1);
    } else {
        CHECK(m1 >= p1 && m1 <= 4 * p1 + (8 << 20));
        CHECK(m2 >= p2 && m2 <= 4 * p2 + (8 << 20));
        CHECK(m2 > m1);
        const sl_operator_metrics_t *a = &g_src.at[1];
        fprintf(stderr, "  rocksdb native: mem-tables %lld table-readers %lld block-cache %lld live-data %lld\n",
                (long long)a->rocksdb_cur_size_all_mem_tables, (long long)a->rocksdb_estimate_table_readers_mem,
                (long long)a->rocksdb_block_cache_usage, (long long)a->rocksdb_estimate_live_data_size);
        CHECK(a->rocksdb_cur_size_all_mem_tables > 0);
        CHECK(a->rocksdb_estimate_table_readers_mem >= 0);
        CHECK(a->rocksdb_block_cache_usage >= 0);
        CHECK(a->rocksdb_estimate_live_data_size >= 0);
    }
}

TEST(job_metric_heap) { run_job(SL_STATE_BACKEND_HASHMAP); }
TEST(job_metric_rocksdb) { run_job(SL_STATE_BACKEND_ROCKSDB); }

int main(void) {
    pthread_mutex_init(&g_seen.mu, NULL);
    RUN(heap_accounting_random);
    RUN(job_metric_heap);
    RUN(job_metric_rocksdb);
    TEST_MAIN_END();
}
