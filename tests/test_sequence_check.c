/* test_sequence_check.c — the sequence-check job, in the spirit of Flink's
 * own end-to-end tests: a source emits per-key sequence numbers 0, 1, 2,
 * ...; keyed state holds the last one per key and raises an alert unless
 * each new one is exactly the previous plus one.  A user function fails
 * after N records and M completed checkpoints (N, M random per seed); the
 * job restarts from its latest checkpoint.  Aligned and unaligned
 * checkpoints, parallelism 1 and 4, heap and RocksDB state, a slow sink for backpressure (so
 * unaligned checkpoints carry in-flight data).  Zero alerts, and the
 * exactly-once file sink holds every expected record exactly once.
 *
 * SLUICE_SEQ_SEEDS=n runs n seeds per configuration (default 2). */
#include <dirent.h>
#include <stdatomic.h>
#include <time.h>

#include "pipeline_util.h"
#include "test.h"

/* ---- the source: split j owns keys j, j+S, j+2S, ...; emits them round
 * robin with increasing sequence numbers.  Position per split in union
 * state, so any parallelism restores. ---- */

#define SPLITS 8

typedef struct seq_src {
    int keys;           /* multiple of SPLITS */
    int64_t per_key;    /* sequence numbers per key */
    sl_schema_t *schema;
} seq_src_t;

typedef struct seq_reader {
    seq_src_t *src;
    int own[SPLITS], nown;
    int64_t pos[SPLITS]; /* records emitted by split own[i] */
} seq_reader_t;

static int seq_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    seq_reader_t *r = calloc(1, sizeof *r);
    r->src = ctx;
    for (int j = subtask; j < SPLITS; j += p) r->own[r->nown++] = j;
    *reader = r;
    *nsplits = r->nown;
    return 0;
}

static atomic_int failed;
static atomic_llong alerts, processed, commits;
static int64_t fail_after_records, fail_after_commits;

static int seq_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    seq_reader_t *r = reader;
    if (!atomic_load(&failed)) { /* until the failure is injected: slow enough for checkpoints to complete */
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        if (max > 256) max = 256;
    }
    int kps = r->src->keys / SPLITS; /* keys per split */
    int64_t total = (int64_t)kps * r->src->per_key;
    int done = 0, emitted = 0;
    for (int i = 0; i < r->nown; i++) {
        for (int k = 0; k < max / (r->nown ? r->nown : 1) + 1 && r->pos[i] < total; k++) {
            int64_t m = r->pos[i]++;
            sl_row_writer_t *w = sl_src_row(out);
            sl_rw_set_i64(w, 0, r->own[i] + (int64_t)SPLITS * (m % kps));
            sl_rw_set_i64(w, 1, m / kps);
            sl_src_emit(out, i, SL_NO_TIMESTAMP);
            emitted++;
        }
        if (r->pos[i] >= total) {
            sl_src_split_finished(out, i);
            done++;
        }
    }
    if (done == r->nown && !atomic_load(&failed)) {
        /* Everything emitted before the checker's failure could happen (no
         * checkpoint completed in time on a slow machine): keep the job
         * running until one did, then fail here — a user function still. */
        if (atomic_load(&commits) < fail_after_commits) return SL_SRC_IDLE;
        if (!atomic_exchange(&failed, 1)) {
            snprintf(err, el, "injected failure in the source");
            return SL_EUSER;
        }
    }
    return done == r->nown ? SL_SRC_END : emitted ? SL_SRC_MORE : SL_SRC_IDLE;
}

static int seq_snapshot(void *reader, int64_t id, void (*put)(void *, const void *, size_t), void *pc) {
    seq_reader_t *r = reader;
    for (int i = 0; i < r->nown; i++) {
        int64_t e[2] = {r->own[i], r->pos[i]};
        put(pc, e, sizeof e);
    }
    return 0;
}

static int seq_restore(void *reader, const void *state, size_t len, char *err, size_t el) {
    seq_reader_t *r = reader;
    const uint8_t *p = state, *end = p + len;
    while (p < end) {
        uint32_t n;
        memcpy(&n, p, 4);
        p += 4;
        if (n % 16 || (size_t)(end - p) < n) {
            snprintf(err, el, "bad sequence source state");
            return SL_EFORMAT;
        }
        for (uint32_t k = 0; k < n; k += 16) {
            int64_t e[2];
            memcpy(e, p + k, 16);
            for (int i = 0; i < r->nown; i++)
                if (r->own[i] == e[0]) r->pos[i] = e[1];
        }
        p += n;
    }
    return 0;
}

static void seq_destroy_reader(void *r) { free(r); }
static void seq_destroy(void *ctx) { free(ctx); }

static const sl_source_ops_t seq_ops = {.name = "sequences",
                                        .create_reader = seq_create,
                                        .poll = seq_poll,
                                        .destroy_reader = seq_destroy_reader,
                                        .destroy = seq_destroy,
                                        .snapshot = seq_snapshot,
                                        .restore = seq_restore};

/* ---- the checker: keyed state "last"; an alert unless seq == last + 1 ---- */


typedef struct checker {
    sl_state_t *last;
} checker_t;

static void *checker_clone(const void *ctx) { return calloc(1, sizeof(checker_t)); }
static void checker_free(void *ctx) { free(ctx); }

static int checker_open(void *ctx, sl_rt_t *rt) {
    checker_t *c = ctx;
    c->last = sl_state_value(rt, "last");
    return c->last ? 0 : SL_EINVAL;
}

static int checker_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    checker_t *c = ctx;
    int64_t key = sl_row_i64(&in->row, 0), seq = sl_row_i64(&in->row, 1);
    /* the injected failure: once, after N records and M completed checkpoints */
    if (atomic_fetch_add(&processed, 1) >= fail_after_records && atomic_load(&commits) >= fail_after_commits &&
        !atomic_exchange(&failed, 1))
        return SL_EUSER;
    uint32_t len;
    const int64_t *last = sl_value_get(c->last, &len);
    int64_t expect = last ? *last + 1 : 0;
    if (seq != expect) {
        if (atomic_fetch_add(&alerts, 1) < 5)
            fprintf(stderr, "  ALERT key %lld: got %lld, expected %lld\n", (long long)key, (long long)seq,
                    (long long)expect);
    }
    sl_value_put(c->last, &seq, sizeof seq);
    sl_row_writer_t *w = sl_out_row(out);
    sl_rw_set_i64(w, 0, key);
    sl_rw_set_i64(w, 1, seq);
    sl_emit(out);
    return 0;
}

/* ---- a sink around the exactly-once file sink: counts commits, and is
 * slow now and then so that channels fill up (backpressure) ---- */

typedef struct slow_sink {
    sl_sink_t inner;
} slow_sink_t;

/* The writers are the inner sink's; its ops are the same for every run. */
static const sl_sink_ops_t *ss_inner_ops;

static int ss_open(void *ctx, int subtask, int p, const sl_schema_t *s, void **w, char *err, size_t el) {
    slow_sink_t *ss = ctx;
    return ss->inner.ops->open(ss->inner.ctx, subtask, p, s, w, err, el);
}
static int ss_write(void *w, const sl_record_t *rec, char *err, size_t el) {
    if (sl_row_i64(&rec->row, 1) % 64 == 0) usleep(50);
    return ss_inner_ops->write(w, rec, err, el);
}
static int ss_finish(void *w, char *err, size_t el) { return ss_inner_ops->finish(w, err, el); }
static void ss_close(void *w) { ss_inner_ops->close(w); }
static void ss_destroy(void *ctx) {
    slow_sink_t *ss = ctx;
    ss->inner.ops->destroy(ss->inner.ctx);
    free(ss);
}
static int ss_pre_commit(void *w, int64_t id, char *err, size_t el) { return ss_inner_ops->pre_commit(w, id, err, el); }
static int ss_commit(void *w, int64_t id, char *err, size_t el) {
    int rc = ss_inner_ops->commit(w, id, err, el);
    if (rc == 0) atomic_fetch_add(&commits, 1);
    return rc;
}
static int ss_recover(void *ctx, int64_t id, char *err, size_t el) {
    slow_sink_t *ss = ctx;
    return ss->inner.ops->recover(ss->inner.ctx, id, err, el);
}
static const sl_sink_ops_t slow_ops = {.name = "slow-exactly-once-files",
                                       .open = ss_open,
                                       .write = ss_write,
                                       .finish = ss_finish,
                                       .close = ss_close,
                                       .destroy = ss_destroy,
                                       .pre_commit = ss_pre_commit,
                                       .commit = ss_commit,
                                       .recover = ss_recover};

static sl_sink_t slow_sink(const char *dir) {
    slow_sink_t *ss = calloc(1, sizeof *ss);
    ss->inner = sl_exactly_once_file_sink(dir, SL_FMT_CSV);
    ss_inner_ops = ss->inner.ops;
    return (sl_sink_t){&slow_ops, ss};
}

/* ---- the run and its verdict ---- */

static uint64_t rng = 0x2545F4914F6CDD1DULL;
static uint64_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* Counts every committed (key, seq) line; returns the number of
 * duplicates and sets *missing. */
static int64_t verify(const char *dir, int keys, int64_t per_key, int64_t *missing, int64_t *total) {
    uint8_t *seen = calloc((size_t)keys * (size_t)per_key, 1);
    int64_t dups = 0;
    *total = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[1400];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        FILE *f = fopen(p, "r");
        long long k, s;
        while (f && fscanf(f, "%lld,%lld\n", &k, &s) == 2) {
            (*total)++;
            if (k < 0 || k >= keys || s < 0 || s >= per_key) {
                dups++;
                continue;
            }
            if (seen[k * per_key + s]++) dups++;
        }
        if (f) fclose(f);
    }
    if (d) closedir(d);
    *missing = 0;
    for (int64_t i = 0; i < (int64_t)keys * per_key; i++) *missing += !seen[i];
    free(seen);
    return dups;
}

typedef struct outcome {
    int64_t alerts, dups, missing, total, inflight_bytes, unaligned_ckpts, completed;
    int restarts;
    int ntask_stats, task_acks, checker_with_state;
    bool ok;
} outcome_t;

static outcome_t run_case(int p, bool unaligned, int rocksdb, int keys, int64_t per_key, int run) {
    char out[1024], ck[1024];
    snprintf(out, sizeof out, "%s/seq-out-%d", sl_test_tmpdir(), run);
    snprintf(ck, sizeof ck, "%s/seq-ckpt-%d", sl_test_tmpdir(), run);
    atomic_store(&alerts, 0);
    atomic_store(&processed, 0);
    atomic_store(&commits, 0);
    atomic_store(&failed, 0);
    int64_t n = (int64_t)keys * per_key;
    fail_after_records = n / 4 + (int64_t)(rnd() % (uint64_t)(n / 2));
    fail_after_commits = 1 + (int64_t)(rnd() % 3);

    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, p);
    sl_env_enable_checkpointing(env, 20, SL_CHECKPOINT_EXACTLY_ONCE);
    if (unaligned) sl_env_set_unaligned_checkpoints(env, true, 0);
    if (rocksdb) {
        char rdb[1024];
        snprintf(rdb, sizeof rdb, "%s/seq-rocksdb-%d", sl_test_tmpdir(), run);
        sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);
        sl_env_set_rocksdb_options(env, rdb, 16 << 20, 4 << 20);
        if (rocksdb == 2) sl_env_set_incremental_checkpoints(env, true);
    }
    sl_env_set_checkpoint_dir(env, ck);
    sl_env_set_checkpoint_retention(env, SL_CHECKPOINTS_RETAIN_ON_CANCELLATION);
    sl_env_set_restart_fixed_delay(env, 3, 10);
    sl_env_set_buffer_size(env, 4096); /* small buffers: backpressure sooner */
    seq_src_t *src = calloc(1, sizeof *src);
    src->keys = keys;
    src->per_key = per_key;
    src->schema = sl_schema_parse("key BIGINT NOT NULL, seq BIGINT NOT NULL", NULL, 0);
    sl_stream_t *s = sl_uid(sl_from_source(env, (sl_source_t){&seq_ops, src, src->schema}, sl_wm_none(), "sequences"),
                            "sequences");
    sl_process_fn_t fn = {.open = checker_open,
                          .process = checker_process,
                          .opts = {.ctx = NULL, .ctx_clone = checker_clone, .ctx_free = checker_free}};
    s = sl_uid(sl_keyed_process(sl_key_by(s, "key"), fn,
                                sl_schema_parse("key BIGINT NOT NULL, seq BIGINT NOT NULL", NULL, 0)),
               "checker");
    sl_uid(sl_sink_to(sl_rebalance(s), slow_sink(out), "files"), "files");
    int rc = sl_env_execute(env, "sequence-check");
    outcome_t o = {0};
    if (rc < 0) fprintf(stderr, "  job failed: %s\n", sl_env_error(env));
    o.restarts = sl_env_restarts(env);
    o.completed = sl_env_checkpoints_completed(env);
    sl_checkpoint_stat_t st[64];
    int ns = sl_env_checkpoint_stats(env, st, 64);
    for (int i = 0; i < ns; i++) {
        o.inflight_bytes += st[i].inflight_bytes;
        o.unaligned_ckpts += st[i].unaligned_tasks > 0;
        if (!st[i].completed) continue;
        /* per-task figures: every task is listed; those that acknowledged
         * (finished ones do so implicitly, without figures) report them; the
         * checkers persisted their keyed state */
        sl_checkpoint_task_stat_t ts[16];
        int nt = sl_env_checkpoint_task_stats(env, st[i].id, ts, 16);
        int acks = 0, with_state = 0;
        for (int k = 0; k < nt; k++) {
            acks += ts[k].acknowledged;
            if (strstr(ts[k].task, "KeyedProcess") && ts[k].state_bytes > 0) with_state++;
        }
        o.ntask_stats = nt;
        if (acks > o.task_acks) o.task_acks = acks;
        if (with_state > o.checker_with_state) o.checker_with_state = with_state;
    }
    sl_env_destroy(env);
    o.alerts = atomic_load(&alerts);
    o.dups = verify(out, keys, per_key, &o.missing, &o.total);
    o.ok = rc == 0;
    return o;
}

static int seeds(void) {
    const char *e = getenv("SLUICE_SEQ_SEEDS");
    return e && atoi(e) > 0 ? atoi(e) : 2;
}

static int run_no;

static void check_config(int p, bool unaligned, int rocksdb) { /* rocksdb: 0 heap, 1 full, 2 incremental */
    int64_t inflight = 0, unaligned_ckpts = 0;
    int n = rocksdb ? (seeds() + 1) / 2 : seeds(); /* RocksDB runs are slower: half the seeds */
    for (int i = 0; i < n; i++) {
        rng = 0x9E3779B97F4A7C15ULL * (uint64_t)(run_no + 1);
        outcome_t o = run_case(p, unaligned, rocksdb, 64, 2000, run_no++);
        fprintf(stderr,
                "  p=%d %s %s: failure after %lld records / %lld checkpoints; restarts %d, checkpoints %lld, "
                "committed %lld, duplicates %lld, missing %lld, alerts %lld, in-flight bytes %lld\n",
                p, unaligned ? "unaligned" : "aligned", rocksdb == 2 ? "rocksdb-incremental" : rocksdb ? "rocksdb" : "heap", (long long)fail_after_records, (long long)fail_after_commits,
                o.restarts, (long long)o.completed, (long long)o.total, (long long)o.dups, (long long)o.missing,
                (long long)o.alerts, (long long)o.inflight_bytes);
        CHECK(o.ok);
        if (o.restarts != 1)
            fprintf(stderr, "  no restart: processed %lld records, %lld commits\n", (long long)atomic_load(&processed),
                    (long long)atomic_load(&commits));
        CHECK_EQ(o.restarts, 1);
        CHECK_EQ(o.alerts, 0);
        CHECK_EQ(o.dups, 0);
        CHECK_EQ(o.missing, 0);
        /* per-task figures, when the last attempt (after the restart) completed a
         * checkpoint while its tasks ran: every task listed, the checkers'
         * keyed state among the bytes (finished tasks acknowledge without figures) */
        if (o.ntask_stats > 0) CHECK_EQ(o.ntask_stats, 3 * p); /* source, checker and sink tasks */
        if (o.task_acks >= 2 * p) CHECK(o.checker_with_state >= 1);
        inflight += o.inflight_bytes;
        unaligned_ckpts += o.unaligned_ckpts;
    }
    if (unaligned) {
        CHECK(unaligned_ckpts > 0);
        if (p > 1) CHECK(inflight > 0); /* backpressure left data in flight at some barrier */
    }
}

TEST(aligned_p1) { check_config(1, false, false); }
TEST(aligned_p4) { check_config(4, false, false); }
TEST(unaligned_p1) { check_config(1, true, false); }
TEST(unaligned_p4) { check_config(4, true, false); }
TEST(rocksdb_aligned_p1) { check_config(1, false, true); }
TEST(rocksdb_aligned_p4) { check_config(4, false, true); }
TEST(rocksdb_unaligned_p1) { check_config(1, true, true); }
TEST(rocksdb_unaligned_p4) { check_config(4, true, true); }
TEST(incremental_aligned_p1) { check_config(1, false, 2); }
TEST(incremental_aligned_p4) { check_config(4, false, 2); }
TEST(incremental_unaligned_p4) { check_config(4, true, 2); }

int main(void) {
    RUN(aligned_p1);
    RUN(aligned_p4);
    RUN(unaligned_p1);
    RUN(unaligned_p4);
    RUN(rocksdb_aligned_p1);
    RUN(rocksdb_aligned_p4);
    RUN(rocksdb_unaligned_p1);
    RUN(rocksdb_unaligned_p4);
    RUN(incremental_aligned_p1);
    RUN(incremental_aligned_p4);
    RUN(incremental_unaligned_p4);
    TEST_MAIN_END();
}
