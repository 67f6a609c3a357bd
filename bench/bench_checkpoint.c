/*
 * bench_checkpoint.c — what checkpoints cost with a lot of keyed state.
 *
 *   bench_checkpoint [--backend heap|rocksdb] [--incremental] [--state-mb N]
 *                    [--value-bytes V] [--value-cache-mb C] [--p P] [--dir D]
 *                    [--skip-restore]
 *
 * A job loads K = state-mb MiB / value-bytes keys (one value state per key,
 * values of V bytes), keeps running while checkpoints are taken every 2 s,
 * then changes 1% of the keys and waits for two more checkpoints.  Printed
 * (one key=value line): the keyed tasks' synchronous phase (the longest of
 * the checkpoint after the load), the end-to-end duration and bytes of
 * that checkpoint, the bytes of the first checkpoint after the 1% change
 * (with --incremental: what an incremental checkpoint uploads), and the
 * wall time of a second job that restores the checkpoint after the load and reads
 * every key back (restore time).  Checkpoints go to D (default /tmp); D
 * may be s3://bucket/prefix (S3 checkpoint storage: the endpoint and
 * credentials from AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID and
 * AWS_SECRET_ACCESS_KEY, e.g. scripts/s3proxy.sh's S3Proxy; the objects
 * are left in the bucket, under a prefix of their own per run).
 * Also printed: the median and the largest synchronous phase over every
 * completed checkpoint of the first job (sync_med_ms, sync_max_ms): with
 * RocksDB those taken while the load runs meet a full value cache of
 * changed values; syncs_ms lists them all in order.  --value-cache-mb sets RocksDB's value cache per keyed
 * subtask (default: the engine's, as large as the 64 MiB write buffer;
 * negative: none).  --skip-restore leaves out the second job (restore_s
 * and keys_read print -1): with millions of RocksDB keys it takes longest.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "sluice/sluice.h"

static struct {
    bool rocksdb, incremental, skip_restore;
    int64_t state_mb, value_bytes, value_cache_mb;
    int p;
    const char *dir;
} O = {false, false, false, 100, 100, 0, 1, "/tmp"};

static int64_t nkeys;
static atomic_llong commits, read_ok;
static atomic_int changed; /* the 1% change was emitted */

static int i64_cmp(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* ---- the source: load, wait, change 1%, wait, end (or, restored: read every key) ---- */
typedef struct rd {
    int sub, p, phase;
    int64_t next, wait_from;
} rd_t;

static int src_create(void *ctx, int sub, int p, void **r, int *ns, char *e, size_t el) {
    rd_t *x = calloc(1, sizeof *x);
    x->sub = sub;
    x->p = p;
    *r = x;
    *ns = 1;
    return 0;
}

static int src_poll(void *reader, sl_source_output_t *out, int max, char *e, size_t el) {
    rd_t *r = reader;
    if (r->phase == 0 || r->phase == 2 || r->phase == 5) {
        int64_t step = r->phase == 2 ? 100 : 1, n = nkeys / step;
        int emitted = 0;
        while (r->next < n && emitted < max) {
            int64_t k = r->next++ * step;
            if (k % r->p != r->sub) continue;
            sl_row_writer_t *w = sl_src_row(out);
            sl_rw_set_i64(w, 0, k);
            sl_rw_set_i64(w, 1, r->phase == 5 ? -1 : r->phase / 2);
            sl_src_emit(out, 0, SL_NO_TIMESTAMP);
            emitted++;
        }
        if (r->next == n) {
            if (r->phase == 5) return SL_SRC_END;
            if (r->phase == 2) atomic_store(&changed, 1);
            r->phase++;
            r->next = 0;
            r->wait_from = atomic_load(&commits);
        }
        return SL_SRC_MORE;
    }
    if (atomic_load(&commits) >= r->wait_from + 2LL * r->p) { /* two more checkpoints */
        if (++r->phase == 4) return SL_SRC_END;
        return SL_SRC_MORE;
    }
    usleep(1000);
    return SL_SRC_IDLE;
}

static int src_snap(void *reader, int64_t id, void (*put)(void *, const void *, size_t), void *pc) {
    put(pc, "x", 1);
    return 0;
}
static int src_restore(void *reader, const void *s, size_t n, char *e, size_t el) {
    ((rd_t *)reader)->phase = 5;
    return 0;
}
static void src_free(void *r) { free(r); }
static const sl_source_ops_t src_ops = {.name = "keys",
                                        .create_reader = src_create,
                                        .poll = src_poll,
                                        .destroy_reader = src_free,
                                        .snapshot = src_snap,
                                        .restore = src_restore};

/* ---- keyed: one value of value-bytes per key ---- */
typedef struct st {
    sl_state_t *v;
    uint8_t *buf;
} st_t;
static void *st_clone(const void *c) {
    st_t *s = calloc(1, sizeof *s);
    s->buf = calloc(1, (size_t)O.value_bytes);
    return s;
}
static void st_free(void *c) {
    st_t *s = c;
    free(s->buf);
    free(s);
}
static int st_open(void *ctx, sl_rt_t *rt) {
    ((st_t *)ctx)->v = sl_state_value(rt, "v");
    return 0;
}
static int st_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    st_t *s = ctx;
    int64_t k = sl_row_i64(&in->row, 0), g = sl_row_i64(&in->row, 1);
    if (g == -1) {
        uint32_t len;
        if (sl_value_get(s->v, &len) && len == (uint32_t)O.value_bytes) atomic_fetch_add(&read_ok, 1);
        return 0;
    }
    uint64_t x = (uint64_t)k * 0x9E3779B97F4A7C15ull + (uint64_t)g;
    for (int64_t i = 0; i < O.value_bytes; i += 8) { /* not very compressible, like real values */
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        memcpy(s->buf + i, &x, (size_t)(O.value_bytes - i < 8 ? O.value_bytes - i : 8));
    }
    return sl_value_put(s->v, s->buf, (uint32_t)O.value_bytes);
}

/* ---- a sink that counts commits ---- */
static int w_id;
static int k_open(void *c, int s, int p, const sl_schema_t *sc, void **w, char *e, size_t el) {
    *w = &w_id;
    return 0;
}
static int k_write(void *w, const sl_record_t *r, char *e, size_t el) { return 0; }
static int k_pre(void *w, int64_t id, char *e, size_t el) { return 0; }
static int k_commit(void *w, int64_t id, char *e, size_t el) {
    atomic_fetch_add(&commits, 1);
    return 0;
}
static int k_recover(void *c, int64_t id, char *e, size_t el) { return 0; }
static const sl_sink_ops_t k_ops = {.name = "commits",
                                    .open = k_open,
                                    .write = k_write,
                                    .pre_commit = k_pre,
                                    .commit = k_commit,
                                    .recover = k_recover};

static sl_env_t *build(const char *ck, const char *restore) {
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, O.p);
    sl_env_enable_checkpointing(env, 2000, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_options(env, 10 * 60 * 1000, 0, 1, 0);
    sl_env_set_checkpoint_dir(env, ck);
    sl_env_set_checkpoints_retained(env, 64);
    sl_env_set_checkpoint_retention(env, SL_CHECKPOINTS_RETAIN_ON_CANCELLATION);
    if (O.rocksdb) {
        char rdb[600];
        snprintf(rdb, sizeof rdb, "%s/rocksdb", ck);
        sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);
        sl_env_set_rocksdb_options(env, rdb, 256 << 20, 64 << 20);
        sl_env_set_incremental_checkpoints(env, O.incremental);
        if (O.value_cache_mb) sl_env_set_rocksdb_value_cache(env, O.value_cache_mb * (1 << 20));
    }
    if (restore) sl_env_restore_from(env, restore);
    sl_schema_t *sc = sl_schema_parse("k BIGINT NOT NULL, g BIGINT NOT NULL", NULL, 0);
    sl_stream_t *s = sl_uid(sl_from_source(env, (sl_source_t){&src_ops, NULL, sc}, sl_wm_none(), "keys"), "keys");
    sl_process_fn_t fn = {.open = st_open, .process = st_process, .opts = {.ctx_clone = st_clone, .ctx_free = st_free}};
    s = sl_uid(sl_keyed_process(sl_key_by(s, "k"), fn, sl_schema_parse("k BIGINT NOT NULL", NULL, 0)), "state");
    sl_uid(sl_sink_to(s, (sl_sink_t){&k_ops, NULL}, "commits"), "commits");
    return env;
}

int main(int argc, char **argv) {
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(a, "--backend")) O.rocksdb = !strcmp(v, "rocksdb"), i++;
        else if (!strcmp(a, "--incremental")) O.incremental = true;
        else if (!strcmp(a, "--skip-restore")) O.skip_restore = true;
        else if (!strcmp(a, "--state-mb")) O.state_mb = atoll(v), i++;
        else if (!strcmp(a, "--value-bytes")) O.value_bytes = atoll(v), i++;
        else if (!strcmp(a, "--value-cache-mb")) O.value_cache_mb = atoll(v), i++;
        else if (!strcmp(a, "--p")) O.p = atoi(v), i++;
        else if (!strcmp(a, "--dir")) O.dir = v, i++;
        else {
            fprintf(stderr, "usage: bench_checkpoint [--backend heap|rocksdb] [--incremental] [--state-mb N] "
                            "[--value-bytes V] [--value-cache-mb C] [--p P] [--dir D] [--skip-restore]\n(unknown argument '%s')\n", a);
            return 2;
        }
    }
    if (O.value_bytes < 8 || O.state_mb < 1 || O.p < 1) {
        fprintf(stderr, "bench_checkpoint: --value-bytes must be >= 8, --state-mb and --p >= 1\n");
        return 2;
    }
    nkeys = O.state_mb * (1 << 20) / O.value_bytes;
    char ck[512], ck2[600], job[600], cmd[1300];
    snprintf(ck, sizeof ck, "%s/sluice-bench-ckpt-%d", O.dir, (int)getpid());
    snprintf(ck2, sizeof ck2, "%s-restore", ck);
    snprintf(job, sizeof job, "%s/bench-checkpoint", ck);

    sl_env_t *env = build(ck, NULL);
    double t0 = now_s();
    int rc = sl_env_execute(env, "bench-checkpoint");
    double t_run = now_s() - t0;
    if (rc < 0) {
        fprintf(stderr, "bench_checkpoint: %s\n", sl_env_error(env));
        return 1;
    }
    /* the checkpoint with the most bytes (the loaded state) and the first
     * after it (nothing or 1% changed) */
    sl_checkpoint_stat_t st[64];
    int n = sl_env_checkpoint_stats(env, st, 64), big = -1, after = -1;
    for (int i = 0; i < n; i++) {
        if (!st[i].completed) continue;
        if (big < 0 || st[i].state_bytes > st[big].state_bytes) big = i, after = -1;
        else if (after < 0) after = i;
    }
    int64_t syncs[64];
    int nsync = 0;
    char order[64 * 12] = ""; /* every completed checkpoint's synchronous phase, in order (ms) */
    for (int i = 0; i < n; i++)
        if (st[i].completed) {
            syncs[nsync++] = st[i].max_sync_us;
            size_t l = strlen(order);
            snprintf(order + l, sizeof order - l, "%s%.1f", l ? "," : "", (double)st[i].max_sync_us / 1000.0);
        }
    qsort(syncs, (size_t)nsync, sizeof *syncs, i64_cmp);
    double sync_med = nsync ? (double)(nsync % 2 ? syncs[nsync / 2] : (syncs[nsync / 2 - 1] + syncs[nsync / 2]) / 2) / 1000.0
                            : -1.0;
    double sync_max = nsync ? (double)syncs[nsync - 1] / 1000.0 : -1.0;
    sl_env_destroy(env);

    /* restore: a new job reads every key back from the checkpoint with the
     * loaded state (later ones may come after the keyed tasks finished) */
    atomic_store(&read_ok, 0);
    char chk[700];
    snprintf(chk, sizeof chk, "%s/chk-%" PRId64, job, big >= 0 ? st[big].id : 0);
    double t_restore = -1;
    if (!O.skip_restore) {
        env = build(ck2, chk);
        t0 = now_s();
        rc = sl_env_execute(env, "bench-restore");
        t_restore = now_s() - t0;
        if (rc < 0) fprintf(stderr, "bench_checkpoint: restore: %s\n", sl_env_error(env));
        sl_env_destroy(env);
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("backend=%s%s state_mb=%" PRId64 " keys=%" PRId64 " value_cache_mb=%" PRId64
           " p=%d checkpoints=%d load_run_s=%.1f "
           "sync_ms=%.2f sync_med_ms=%.2f sync_max_ms=%.2f duration_ms=%" PRId64 " bytes=%" PRId64
           " next_bytes=%" PRId64 " restore_s=%.2f keys_read=%lld max_rss_mb=%ld syncs_ms=%s\n",
           O.rocksdb ? "rocksdb" : "heap", O.incremental ? "-incremental" : "", O.state_mb, nkeys,
           O.rocksdb ? O.value_cache_mb : 0, O.p, n, t_run,
           big >= 0 ? (double)st[big].max_sync_us / 1000.0 : -1.0, sync_med, sync_max, big >= 0 ? st[big].duration_ms : -1,
           big >= 0 ? st[big].state_bytes : -1, after >= 0 ? st[after].state_bytes : -1, t_restore,
           O.skip_restore ? -1LL : (long long)atomic_load(&read_ok), ru.ru_maxrss / 1024, order);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", ck, ck2);
    if (strncmp(ck, "s3://", 5) == 0) fprintf(stderr, "bench_checkpoint: the checkpoints stay in %s\n", ck);
    else if (system(cmd) != 0) fprintf(stderr, "bench_checkpoint: could not remove %s\n", ck);
    return rc < 0 || (!O.skip_restore && atomic_load(&read_ok) != nkeys) ? 1 : 0;
}
