/*
 * bench_savepoint.c — how long a savepoint takes to write and to restore,
 * by state size and backend (issue 11's figures for BENCHMARKS.md).
 *
 *   build/bench_savepoint [--mb 100,1000] [--backends heap,rocksdb] [--runs 3] [--p 2] [--value 100]
 *
 * The job: a source of K distinct keys (K = MB * 2^20 / (value + 16)),
 * each once, -> key_by -> a keyed process function that puts a value of
 * --value bytes into value state per key, and emits nothing.  Once every
 * key is in state, an intermediate savepoint is taken
 * (sl_env_trigger_savepoint: trigger to _metadata durable, measured by the
 * caller) and the job is stopped with another savepoint; a second job
 * restores that one (sl_env_restore_from at the same parallelism) and the
 * time from sl_env_execute to the keyed function's open on every subtask
 * (the state is loaded before open) is the restore time.  Both are wall
 * clock on this machine; the size is the savepoint directory's.  The
 * stop-with-savepoint is timed too (the sl_env_stop_with_savepoint call),
 * and so is the first job's sl_env_execute -> open on every subtask
 * ("start": the same path as the restore's, with no state to load).
 * Prints one line per run (and a "result engine=sluice ..." line per run,
 * which bench/savepoints.sh reads beside Flink's) and the median per
 * configuration.
 */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sluice/sluice.h"

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* ---- a source of keys 0..K-1, once each, then idle (never ends) ---- */

typedef struct keys_src {
    int64_t k;
    atomic_llong emitted;
    sl_schema_t *schema;
} keys_src_t;

typedef struct keys_reader {
    keys_src_t *s;
    int64_t next, stride;
} keys_reader_t;

static int kr_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    keys_reader_t *r = calloc(1, sizeof *r);
    r->s = ctx;
    r->next = subtask;
    r->stride = p;
    *reader = r;
    *nsplits = 1;
    return 0;
}

static int kr_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    keys_reader_t *r = reader;
    int n = 0;
    while (n < max && r->next < r->s->k) {
        sl_row_writer_t *w = sl_src_row(out);
        sl_rw_set_i64(w, 0, r->next);
        sl_src_emit(out, 0, 0);
        r->next += r->stride;
        n++;
    }
    atomic_fetch_add(&r->s->emitted, n);
    if (n) return SL_SRC_MORE;
    sl_src_idle_until(out, 0);
    return SL_SRC_IDLE;
}

static int kr_snapshot(void *reader, int64_t id, void (*put)(void *, const void *, size_t), void *pc) {
    keys_reader_t *r = reader;
    put(pc, &r->next, 8);
    return 0;
}

static int kr_restore(void *reader, const void *state, size_t len, char *err, size_t el) {
    keys_reader_t *r = reader;
    r->next = r->s->k; /* restored: everything was read */
    return 0;
}

static void kr_destroy_reader(void *reader) { free(reader); }
static void kr_destroy(void *ctx) { (void)ctx; }

static const sl_source_ops_t keys_ops = {.name = "keys",
                                         .create_reader = kr_create,
                                         .poll = kr_poll,
                                         .destroy_reader = kr_destroy_reader,
                                         .destroy = kr_destroy,
                                         .snapshot = kr_snapshot,
                                         .restore = kr_restore};

/* ---- the keyed function ---- */

static int VALUE = 100;
static atomic_llong put_count, opened;
static int64_t OPEN_MS[64];

typedef struct fn {
    sl_state_t *v;
} fn_t;

static void *fn_clone(const void *c) { return calloc(1, sizeof(fn_t)); }
static void fn_free(void *c) { free(c); }

static int fn_open(void *ctx, sl_rt_t *rt) {
    fn_t *f = ctx;
    f->v = sl_state_value(rt, "v");
    int i = (int)atomic_fetch_add(&opened, 1);
    if (i < 64) OPEN_MS[i] = now_ms();
    return f->v ? 0 : SL_EINVAL;
}

static int fn_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    fn_t *f = ctx;
    uint8_t buf[4096];
    int64_t k = sl_row_i64(&in->row, 0);
    for (int i = 0; i < VALUE; i++) buf[i] = (uint8_t)(k * 31 + i);
    sl_value_put(f->v, buf, (uint32_t)VALUE);
    atomic_fetch_add(&put_count, 1);
    return 0;
}

typedef struct run {
    sl_env_t *env;
    pthread_t th;
    int rc;
} run_t;

static void *run_main(void *a) {
    run_t *r = a;
    r->rc = sl_env_execute(r->env, "bench-savepoint");
    return NULL;
}

static sl_env_t *job(keys_src_t *src, int p, int backend, const char *ck, const char *restore) {
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, p);
    sl_env_enable_checkpointing(env, 3600 * 1000, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, ck);
    sl_env_set_state_backend(env, backend ? SL_STATE_BACKEND_ROCKSDB : SL_STATE_BACKEND_HASHMAP);
    sl_env_set_restart_none(env);
    if (restore && sl_env_restore_from(env, restore) < 0) {
        fprintf(stderr, "restore: %s\n", sl_env_error(env));
        exit(1);
    }
    sl_source_t s = {&keys_ops, src, sl_schema_ref(src->schema)};
    sl_stream_t *st = sl_uid(sl_from_source(env, s, sl_wm_none(), "keys"), "keys");
    sl_process_fn_t fn = {.open = fn_open, .process = fn_process, .opts = {NULL, fn_clone, fn_free}};
    st = sl_uid(sl_keyed_process(sl_key_by(st, "k"), fn, sl_schema_parse("k BIGINT NOT NULL", NULL, 0)), "state");
    sl_uid(sl_sink_to(st, sl_counting_sink(NULL), "none"), "none");
    return env;
}

static int64_t dir_bytes(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return -1;
    int64_t n = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        char p[4600];
        struct stat st;
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        if (e->d_name[0] != '.' && stat(p, &st) == 0) n += st.st_size;
    }
    closedir(d);
    return n;
}

static int cmp64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    const char *mbs = "100,1000", *backends = "heap,rocksdb";
    int runs = 3, p = 2;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--mb")) mbs = argv[i + 1];
        else if (!strcmp(argv[i], "--backends")) backends = argv[i + 1];
        else if (!strcmp(argv[i], "--runs")) runs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--p")) p = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--value")) VALUE = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "usage: bench_savepoint [--mb 100,1000] [--backends heap,rocksdb] [--runs 3] [--p 2] "
                            "[--value 100]\n");
            return 2;
        }
    }
    if (VALUE < 1 || VALUE > 4096 || runs < 1 || p < 1 || p > 64) return 2;
    char tmp[600];
    snprintf(tmp, sizeof tmp, "%s/sluice-bench-savepoint.%d", getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp", (int)getpid());
    printf("# bench_savepoint: p=%d, value %d bytes, %d runs; wall clock ms\n", p, VALUE, runs);
    printf("# backend  MB-target  keys  savepoint-bytes  savepoint-ms  restore-ms  stop-ms\n");
    char mlist[256];
    snprintf(mlist, sizeof mlist, "%s", mbs);
    for (char *mtok = strtok(mlist, ","); mtok; mtok = strtok(NULL, ",")) {
        int mb = atoi(mtok);
        for (int b = 0; b < 2; b++) {
            if (!strstr(backends, b ? "rocksdb" : "heap")) continue;
            int64_t spv[32], rsv[32], stv[32], sav[32], bytes = 0;
            int64_t k = (int64_t)mb * 1048576 / (VALUE + 16);
            for (int r = 0; r < runs && r < 32; r++) {
                char cmd[1400], ck[800], spd[800], sp[4300], sp2[4300];
                snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
                if (system(cmd) != 0) return 1;
                snprintf(ck, sizeof ck, "%s/ck", tmp);
                snprintf(spd, sizeof spd, "%s/sp", tmp);
                keys_src_t src = {.k = k, .schema = sl_schema_parse("k BIGINT NOT NULL", NULL, 0)};
                atomic_store(&put_count, 0);
                atomic_store(&opened, 0);
                run_t run = {job(&src, p, b, ck, NULL), 0, 1};
                int64_t t00 = now_ms();
                pthread_create(&run.th, NULL, run_main, &run);
                while (atomic_load(&put_count) < k) {
                    struct timespec ts = {0, 20 * 1000000L};
                    nanosleep(&ts, NULL);
                }
                while (atomic_load(&opened) < p) { /* every put came after an open; the last opens may lag */
                    struct timespec ts = {0, 1000000L};
                    nanosleep(&ts, NULL);
                }
                sav[r] = 0;
                for (int i = 0; i < p; i++) sav[r] = OPEN_MS[i] - t00 > sav[r] ? OPEN_MS[i] - t00 : sav[r];
                int64_t t0 = now_ms();
                if (sl_env_trigger_savepoint(run.env, spd, sp, sizeof sp) < 0) {
                    fprintf(stderr, "savepoint: %s\n", sl_env_error(run.env));
                    return 1;
                }
                spv[r] = now_ms() - t0;
                bytes = dir_bytes(sp);
                int64_t ts0 = now_ms();
                if (sl_env_stop_with_savepoint(run.env, spd, false, sp2, sizeof sp2) < 0) {
                    fprintf(stderr, "stop: %s\n", sl_env_error(run.env));
                    return 1;
                }
                stv[r] = now_ms() - ts0;
                pthread_join(run.th, NULL);
                sl_env_destroy(run.env);
                /* restore */
                atomic_store(&opened, 0);
                run_t rr = {job(&src, p, b, ck, sp2), 0, 1};
                int64_t t1 = now_ms();
                pthread_create(&rr.th, NULL, run_main, &rr);
                while (atomic_load(&opened) < p) {
                    struct timespec ts = {0, 1000000L};
                    nanosleep(&ts, NULL);
                }
                int64_t last = 0;
                for (int i = 0; i < p; i++) last = OPEN_MS[i] > last ? OPEN_MS[i] : last;
                rsv[r] = last - t1;
                sl_env_cancel(rr.env);
                pthread_join(rr.th, NULL);
                sl_env_destroy(rr.env);
                sl_schema_unref(src.schema);
                printf("  %-8s %5d %10lld %12lld %10lld %10lld %10lld\n", b ? "rocksdb" : "heap", mb, (long long)k,
                       (long long)bytes, (long long)spv[r], (long long)rsv[r], (long long)stv[r]);
                printf("result engine=sluice backend=%s mb=%d keys=%lld bytes=%lld savepoint_ms=%lld stop_ms=%lld "
                       "restore_ms=%lld start_ms=%lld\n",
                       b ? "rocksdb" : "heap", mb, (long long)k, (long long)bytes, (long long)spv[r], (long long)stv[r],
                       (long long)rsv[r], (long long)sav[r]);
                fflush(stdout);
            }
            int n = runs < 32 ? runs : 32;
            qsort(spv, (size_t)n, sizeof *spv, cmp64);
            qsort(rsv, (size_t)n, sizeof *rsv, cmp64);
            qsort(stv, (size_t)n, sizeof *stv, cmp64);
            printf("median %-8s %5d MB: savepoint %lld ms, restore %lld ms, stop %lld ms (%lld bytes)\n",
                   b ? "rocksdb" : "heap", mb, (long long)spv[n / 2], (long long)rsv[n / 2], (long long)stv[n / 2],
                   (long long)bytes);
            fflush(stdout);
        }
    }
    char cmd[800];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmp);
    return system(cmd) != 0;
}
