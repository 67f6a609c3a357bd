/*
 * test_state_query_ns.c — the state query (sluice/state_query.h) of a
 * key's namespaced state: without a namespace, every namespace the key has
 * (a window operator's contents per window) is answered.
 *
 * The job: N random (key, ts) records, K keys, into tumbling event-time
 * windows of W ms (count) at parallelism 2, the watermark held back by a
 * huge out-of-orderness bound so that no window fires; the source then
 * idles.  Once the windows' numRecordsIn (metrics listener) reached N, the
 * test asks every key with no namespace and no state name, and compares
 * the namespaces of the answer's window-contents entries (the 16-byte
 * window, start then end as little-endian int64, printed as hex) and
 * their counts (the count accumulator's first 8 bytes) with the reference:
 * the windows [floor(ts/W)*W, +W) of that key's records and how many fall
 * in each, computed here from the same input.  Each entry names the key
 * (8 bytes LE); a key without records answers 404.  Heap and RocksDB.
 */
#include <jansson.h>
#include <pthread.h>
#include <time.h>

#include "pipeline_util.h"
#include "sluice/metrics.h"
#include "sluice/state_query.h"
#include "test.h"

#define N 3000
#define NK 40
#define W 100
#define SPAN 20 /* windows the timestamps spread over */

static int64_t g_key[N], g_ts[N];

static uint64_t rng(uint64_t *s) {
    uint64_t x = (*s += 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* ---- the source: the records, then idle until cancelled ---- */

static int src_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    (void)ctx, (void)subtask, (void)p, (void)err, (void)el;
    *reader = calloc(1, sizeof(int));
    *nsplits = 1;
    return 0;
}
static int src_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    (void)err, (void)el;
    int *pos = reader;
    if (*pos >= N) return SL_SRC_IDLE;
    for (int n = 0; n < max && *pos < N; n++, (*pos)++) {
        sl_row_writer_t *w = sl_src_row(out);
        sl_rw_set_i64(w, 0, g_key[*pos]);
        sl_rw_set_i64(w, 1, g_ts[*pos]);
        sl_src_emit(out, 0, SL_NO_TIMESTAMP);
    }
    return SL_SRC_MORE;
}
static void src_destroy(void *r) { free(r); }
static const sl_source_ops_t src_ops = {
    .name = "records", .create_reader = src_create, .poll = src_poll, .destroy_reader = src_destroy};

/* ---- the windows' numRecordsIn, per subtask ---- */

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t g_in[2];

static void listener(void *ctx, const sl_operator_metrics_t *ops, int n) {
    (void)ctx;
    for (int i = 0; i < n; i++)
        if (!strcmp(ops[i].operator_name, "win") && ops[i].subtask_index >= 0 && ops[i].subtask_index < 2) {
            pthread_mutex_lock(&g_mu);
            g_in[ops[i].subtask_index] = ops[i].num_records_in;
            pthread_mutex_unlock(&g_mu);
        }
}

typedef struct run {
    sl_env_t *env;
    int rc;
} run_t;
static void *run_main(void *arg) {
    run_t *r = arg;
    r->rc = sl_env_execute(r->env, "state-query-ns");
    return NULL;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* The hex of v as 8 little-endian bytes (a BIGINT key, a count). */
static void le_hex(uint64_t v, char out[17]) {
    for (int i = 0; i < 8; i++) snprintf(out + 2 * i, 3, "%02x", (unsigned)(uint8_t)(v >> (8 * i)));
}

/* The hex of window [start, start + W) as a namespace. */
static void window_hex(int64_t start, char out[33]) {
    uint8_t ns[16];
    uint64_t s = (uint64_t)start, e = (uint64_t)(start + W);
    for (int i = 0; i < 8; i++) {
        ns[i] = (uint8_t)(s >> (8 * i));
        ns[8 + i] = (uint8_t)(e >> (8 * i));
    }
    for (int i = 0; i < 16; i++) snprintf(out + 2 * i, 3, "%02x", ns[i]);
}

static void run_backend(int backend, uint64_t seed) {
    uint64_t r = seed;
    for (int i = 0; i < N; i++) {
        g_key[i] = (int64_t)(rng(&r) % NK);
        g_ts[i] = (int64_t)(rng(&r) % (SPAN * W));
    }
    g_in[0] = g_in[1] = 0;
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 1);
    sl_env_set_auto_watermark_interval(env, 0);
    sl_env_set_state_backend(env, backend);
    if (backend == SL_STATE_BACKEND_ROCKSDB) {
        char dir[1200];
        snprintf(dir, sizeof dir, "%s/rocksdb-work", sl_test_tmpdir());
        sl_env_set_rocksdb_options(env, dir, 8 << 20, 8 << 20);
    }
    sl_env_set_metrics_listener(env, listener, NULL);
    sl_schema_t *schema = sl_schema_parse("k BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0);
    sl_stream_t *s = sl_from_source(env, (sl_source_t){&src_ops, NULL, schema}, sl_wm_bounded("ts", 1000000000LL),
                                    "records");
    sl_windowed_t *w = sl_window(sl_key_by(s, "k"), sl_tumbling_event_time(W, 0));
    s = sl_uid(sl_parallelism(sl_name(sl_window_agg(w, "count(*) AS n"), "win"), 2), "win");
    collected_t *c = collected_new();
    sl_sink_to(s, collect_sink(c), "out");
    run_t run = {env, 0};
    pthread_t th;
    CHECK(pthread_create(&th, NULL, run_main, &run) == 0);
    /* until both window subtasks processed everything */
    bool settled = false;
    for (int t = 0; t < 3000 && !settled; t++) {
        pthread_mutex_lock(&g_mu);
        settled = g_in[0] + g_in[1] == N;
        pthread_mutex_unlock(&g_mu);
        if (!settled) nanosleep(&(struct timespec){0, 10 * 1000000L}, NULL);
    }
    CHECK(settled);
    int compared = 0, bad = 0;
    for (int k = 0; k < NK && settled; k++) {
        /* the reference: the key's windows with their record counts, as
         * "<namespace hex>/<count hex>", sorted */
        char *want[SPAN];
        int nwant = 0;
        for (int x = 0; x < SPAN; x++) {
            int64_t n = 0;
            for (int i = 0; i < N; i++) n += g_key[i] == k && g_ts[i] / W == x;
            if (!n) continue;
            want[nwant] = malloc(64);
            window_hex((int64_t)x * W, want[nwant]);
            want[nwant][32] = '/';
            le_hex((uint64_t)n, want[nwant] + 33);
            nwant++;
        }
        char key_hex[17];
        le_hex((uint64_t)k, key_hex);
        char key[32];
        snprintf(key, sizeof key, "%d", k);
        char *text = NULL;
        int http = 0;
        int rc = sl_env_query_state(env, "win", NULL, key, NULL, 10000, &text, &http);
        json_t *j = json_loads(text, 0, NULL);
        json_t *entries = j ? json_object_get(j, "entries") : NULL;
        char *got[SPAN + 1];
        int ngot = 0;
        bool ok = rc == 0 && http == 200 && entries;
        size_t i;
        json_t *e;
        json_array_foreach(entries, i, e) {
            const char *st = json_string_value(json_object_get(e, "state"));
            if (!st || (strcmp(st, "window-contents") && strcmp(st, "window-panes"))) continue;
            const char *kh = json_string_value(json_object_get(json_object_get(e, "key"), "hex"));
            if (!kh || strcmp(kh, key_hex)) ok = false;
            const char *hex = json_string_value(json_object_get(json_object_get(e, "namespace"), "hex"));
            const char *val = json_string_value(json_object_get(json_object_get(e, "value"), "hex"));
            if (!hex || !val || strlen(hex) != 32 || strlen(val) < 16 || ngot == SPAN + 1) {
                ok = false;
                continue;
            }
            /* the count(*) accumulator starts with the count (int64 LE) */
            got[ngot] = malloc(64);
            snprintf(got[ngot++], 64, "%s/%.16s", hex, val);
        }
        if (nwant == 0) ok = rc == SL_ENOTFOUND && http == 404;
        qsort(want, (size_t)nwant, sizeof *want, cmp_str);
        qsort(got, (size_t)ngot, sizeof *got, cmp_str);
        ok = ok && ngot == nwant;
        for (int x = 0; ok && x < nwant; x++) ok = strcmp(want[x], got[x]) == 0;
        if (!ok && bad++ < 3) fprintf(stderr, "  key %d: %d windows expected, rc %d http %d: %s\n", k, nwant, rc, http,
                                      text ? text : "(null)");
        compared += nwant;
        for (int x = 0; x < nwant; x++) free(want[x]);
        for (int x = 0; x < ngot; x++) free(got[x]);
        json_decref(j);
        free(text);
    }
    CHECK_EQ(bad, 0);
    CHECK(compared > NK);
    /* a key without records */
    char *text = NULL;
    int http = 0;
    CHECK_EQ(sl_env_query_state(env, "win", NULL, "9999", NULL, 10000, &text, &http), SL_ENOTFOUND);
    CHECK_EQ(http, 404);
    free(text);
    fprintf(stderr, "  %s: %d (key, window) entries compared\n", backend == SL_STATE_BACKEND_ROCKSDB ? "rocksdb" : "heap",
            compared);
    sl_env_cancel(env);
    pthread_join(th, NULL);
    CHECK_EQ(run.rc, SL_ECANCELED);
    CHECK_EQ(c->n, 0); /* no window fired */
    collected_free(c);
    sl_env_destroy(env);
}

TEST(heap) { run_backend(SL_STATE_BACKEND_HASHMAP, 11); }
TEST(rocksdb) { run_backend(SL_STATE_BACKEND_ROCKSDB, 12); }

int main(void) {
    RUN(heap);
    RUN(rocksdb);
    TEST_MAIN_END();
}
