/* test_incremental_checkpoint.c — RocksDB incremental checkpoints: after a
 * load of N keys, a checkpoint taken once 1% of the keys changed uploads a
 * small fraction of what the first one did; shared files that no retained
 * checkpoint refers to are deleted, the others stay; a restore from the
 * latest incremental checkpoint at another parallelism sees every key with
 * its last value; a corrupted shared file is reported by name. */
#include <dirent.h>
#include <stdatomic.h>
#include <sys/stat.h>

#include "checkpoint/storage.h"
#include "common/common.h"
#include "pipeline_util.h"
#include "test.h"

#define NKEYS 200000
#define VALUE_BYTES 100

/* phases of the source: load every key, wait for checkpoints, change 1%
 * (their value gets generation 1), wait again, end */
static atomic_llong commits;
static atomic_int phase_done;

typedef struct upd_reader {
    int subtask, p;
    int64_t next; /* index into this reader's share of the schedule */
    int phase;
    int64_t wait_from;
} upd_reader_t;

static sl_schema_t *upd_schema(void) { return sl_schema_parse("k BIGINT NOT NULL, gen BIGINT NOT NULL", NULL, 0); }

static int upd_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    upd_reader_t *r = calloc(1, sizeof *r);
    r->subtask = subtask;
    r->p = p;
    *reader = r;
    *nsplits = 1;
    return 0;
}

static int upd_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    upd_reader_t *r = reader;
    if (r->phase == 0 || r->phase == 2) { /* 0: every key, gen 0; 2: every 100th key, gen 1 */
        int64_t step = r->phase == 0 ? 1 : 100, n = NKEYS / step, emitted = 0;
        while (r->next < n && emitted < max) {
            int64_t k = r->next * step;
            r->next++;
            if (k % r->p != r->subtask) continue;
            sl_row_writer_t *w = sl_src_row(out);
            sl_rw_set_i64(w, 0, k);
            sl_rw_set_i64(w, 1, r->phase / 2);
            sl_src_emit(out, 0, SL_NO_TIMESTAMP);
            emitted++;
        }
        if (r->next == n) {
            r->phase++;
            r->next = 0;
            r->wait_from = atomic_load(&commits);
        }
        return SL_SRC_MORE;
    }
    if (r->phase == 5) {
        int emitted = 0;
        while (r->next < NKEYS && emitted < max) {
            int64_t k = r->next++;
            if (k % r->p != r->subtask) continue;
            sl_row_writer_t *w = sl_src_row(out);
            sl_rw_set_i64(w, 0, k);
            sl_rw_set_i64(w, 1, -1);
            sl_src_emit(out, 0, SL_NO_TIMESTAMP);
            emitted++;
        }
        return r->next == NKEYS ? SL_SRC_END : SL_SRC_MORE;
    }
    /* 1 and 3: until two more checkpoints completed after this point */
    if (atomic_load(&commits) >= r->wait_from + 2 * r->p + 2) {
        r->phase++;
        if (r->phase == 4) {
            atomic_fetch_add(&phase_done, 1);
            return SL_SRC_END;
        }
        return SL_SRC_MORE;
    }
    return SL_SRC_IDLE;
}

static int upd_snapshot(void *reader, int64_t id, void (*put)(void *, const void *, size_t), void *pc) {
    upd_reader_t *r = reader;
    int64_t e[3] = {r->subtask, r->phase, r->next};
    put(pc, e, sizeof e);
    return 0;
}

/* A restored reader only reads every key back (gen -1): the checker's turn. */
static int upd_restore(void *reader, const void *state, size_t len, char *err, size_t el) {
    ((upd_reader_t *)reader)->phase = 5;
    return 0;
}

static void upd_destroy_reader(void *r) { free(r); }

static const sl_source_ops_t upd_ops = {.name = "updates",
                                        .create_reader = upd_create,
                                        .poll = upd_poll,
                                        .destroy_reader = upd_destroy_reader,
                                        .snapshot = upd_snapshot,
                                        .restore = upd_restore};

/* keyed: stores a VALUE_BYTES value per key, stamped with its generation */
typedef struct store {
    sl_state_t *v;
} store_t;
static void *store_clone(const void *c) { return calloc(1, sizeof(store_t)); }
static void store_free(void *c) { free(c); }
static int store_open(void *ctx, sl_rt_t *rt) {
    ((store_t *)ctx)->v = sl_state_value(rt, "v");
    return 0;
}
static atomic_llong verified, wrong;

static int store_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    uint8_t v[VALUE_BYTES];
    int64_t k = sl_row_i64(&in->row, 0), gen = sl_row_i64(&in->row, 1);
    if (gen == -1) { /* after a restore: the value must be the last one written */
        int64_t want = k % 100 == 0 ? 1 : 0;
        for (int i = 0; i < VALUE_BYTES; i++) v[i] = (uint8_t)(k * 31 + i * 7 + want);
        memcpy(v, &want, 8);
        uint32_t len;
        const void *got = sl_value_get(((store_t *)ctx)->v, &len);
        if (got && len == VALUE_BYTES && memcmp(got, v, VALUE_BYTES) == 0)
            atomic_fetch_add(&verified, 1);
        else
            atomic_fetch_add(&wrong, 1);
        return 0;
    }
    for (int i = 0; i < VALUE_BYTES; i++) v[i] = (uint8_t)(k * 31 + i * 7 + gen);
    memcpy(v, &gen, 8);
    return sl_value_put(((store_t *)ctx)->v, v, sizeof v);
}

/* a sink that only counts commits (every subtask's) */
static int cnt_writer; /* writers need an identity; they have no state */
static int cnt_open(void *ctx, int s, int p, const sl_schema_t *sc, void **w, char *e, size_t el) {
    *w = &cnt_writer;
    return 0;
}
static int cnt_write(void *w, const sl_record_t *r, char *e, size_t el) { return 0; }
static int cnt_commit(void *w, int64_t id, char *e, size_t el) {
    atomic_fetch_add(&commits, 1);
    return 0;
}
static int cnt_pre(void *w, int64_t id, char *e, size_t el) { return 0; }
static int cnt_recover(void *c, int64_t id, char *e, size_t el) { return 0; }
static const sl_sink_ops_t cnt_ops = {.name = "commit-counter",
                                      .open = cnt_open,
                                      .write = cnt_write,
                                      .pre_commit = cnt_pre,
                                      .commit = cnt_commit,
                                      .recover = cnt_recover};

static int count_files(const char *dir) {
    DIR *d = opendir(dir);
    int n = 0;
    struct dirent *e;
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') n++;
    if (d) closedir(d);
    return n;
}

TEST(incremental_sizes_and_cleanup) {
    char ck[1024], rdb[1024], job[1100], shared[1200];
    snprintf(ck, sizeof ck, "%s/inc-ckpt", sl_test_tmpdir());
    snprintf(rdb, sizeof rdb, "%s/inc-rocksdb", sl_test_tmpdir());
    snprintf(job, sizeof job, "%s/incremental", ck);
    snprintf(shared, sizeof shared, "%s/shared", job);
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 2);
    sl_env_enable_checkpointing(env, 100, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, ck);
    sl_env_set_checkpoints_retained(env, 2);
    sl_env_set_checkpoint_retention(env, SL_CHECKPOINTS_RETAIN_ON_CANCELLATION);
    sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);
    sl_env_set_rocksdb_options(env, rdb, 16 << 20, 8 << 20);
    sl_env_set_incremental_checkpoints(env, true);
    sl_stream_t *s = sl_uid(sl_from_source(env, (sl_source_t){&upd_ops, NULL, upd_schema()}, sl_wm_none(), "updates"),
                            "updates");
    sl_process_fn_t fn = {.open = store_open, .process = store_process, .opts = {.ctx_clone = store_clone,
                                                                                 .ctx_free = store_free}};
    s = sl_uid(sl_keyed_process(sl_key_by(s, "k"), fn, upd_schema()), "store");
    sl_uid(sl_sink_to(s, (sl_sink_t){&cnt_ops, NULL}, "commits"), "commits");
    int rc = sl_env_execute(env, "incremental");
    CHECK_STR(sl_env_error(env), "");
    CHECK_EQ(rc, 0);
    CHECK_EQ(atomic_load(&phase_done), 2);
    /* the store tasks' bytes per completed checkpoint: the largest (after
     * the load) against the one after 1% of the keys changed (the last) */
    sl_checkpoint_stat_t st[64];
    int n = sl_env_checkpoint_stats(env, st, 64);
    int64_t bytes[64], max = 0, full = 0, least_after_full = INT64_MAX;
    int nb = 0;
    for (int i = 0; i < n; i++) {
        if (!st[i].completed) continue;
        sl_checkpoint_task_stat_t ts[8];
        int nt = sl_env_checkpoint_task_stats(env, st[i].id, ts, 8);
        int64_t b = 0;
        for (int k = 0; k < nt; k++)
            if (strstr(ts[k].task, "KeyedProcess")) b += ts[k].state_bytes;
        fprintf(stderr, "  chk-%lld: %lld bytes persisted by the keyed tasks\n", (long long)st[i].id, (long long)b);
        bytes[nb++] = b;
        if (b > max) max = b;
    }
    /* The first full upload is the first checkpoint that uploaded (most of)
     * the loaded keys: at least half the largest upload (on a loaded machine
     * a checkpoint may fall inside the load, which then spreads over two, and
     * a RocksDB compaction that rewrites every file makes a later upload as
     * large again); the smallest after it is what the test is about. */
    for (int i = 0; i < nb; i++) {
        if (!full && bytes[i] * 2 >= max) full = bytes[i];
        else if (full && bytes[i] < least_after_full) least_after_full = bytes[i];
    }
    fprintf(stderr, "  first full upload %lld bytes; smallest after it %lld bytes (%.1f%%)\n", (long long)full,
            (long long)least_after_full, 100.0 * (double)least_after_full / (double)(full ? full : 1));
    CHECK(full > 100000);
    CHECK(least_after_full < INT64_MAX);
    CHECK(least_after_full * 10 < full);
    /* retention: 2 checkpoints kept; shared/ holds only what they refer to */
    sl_ckpt_storage_t *stg;
    char err[600];
    CHECK_EQ(sl_ckpt_storage_fs_open(ck, "incremental", &stg, err, sizeof err), 0);
    int64_t *ids;
    int nids;
    CHECK_EQ(sl_ckpt_storage_list_completed(stg, &ids, &nids, err, sizeof err), 0);
    CHECK_EQ(nids, 2);
    int referenced = 0;
    char **names = NULL;
    for (int i = 0; i < nids; i++) {
        sl_ckpt_metadata_t *md;
        CHECK_EQ(stg->ops->load(stg, ids[i], &md, err, sizeof err), 0);
        const sl_ckpt_operator_t *op = sl_ckpt_metadata_find_operator(md, "store");
        CHECK(op != NULL);
        for (int q = 0; q < op->parallelism; q++)
            for (int h = 0; h < op->subtasks[q].nhandles; h++) {
                const sl_ckpt_state_handle_t *hd = &op->subtasks[q].handles[h];
                if (hd->scope != SL_CKPT_SCOPE_SHARED) continue;
                bool seen = false;
                for (int j = 0; j < referenced && !seen; j++) seen = !strcmp(names[j], hd->path);
                if (!seen) {
                    names = realloc(names, (size_t)(referenced + 1) * sizeof *names);
                    names[referenced++] = strdup(hd->path);
                }
            }
        sl_ckpt_metadata_free(md);
    }
    int in_dir = count_files(shared);
    fprintf(stderr, "  shared/: %d files, %d referenced by the retained checkpoints\n", in_dir, referenced);
    CHECK(referenced > 0);
    CHECK_EQ(in_dir, referenced);
    for (int j = 0; j < referenced; j++) free(names[j]);
    free(names);
    sl_free(ids);
    stg->ops->destroy(stg);
    sl_env_destroy(env);
}

/* Builds the job at parallelism p, restoring from dir when given. */
static sl_env_t *job(int p, const char *ck, const char *rdb, const char *restore) {
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, p);
    sl_env_enable_checkpointing(env, 100, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, ck);
    sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);
    sl_env_set_rocksdb_options(env, rdb, 16 << 20, 8 << 20);
    sl_env_set_incremental_checkpoints(env, true);
    if (restore) sl_env_restore_from(env, restore);
    sl_stream_t *s = sl_uid(sl_from_source(env, (sl_source_t){&upd_ops, NULL, upd_schema()}, sl_wm_none(), "updates"),
                            "updates");
    sl_process_fn_t fn = {.open = store_open, .process = store_process, .opts = {.ctx_clone = store_clone,
                                                                                 .ctx_free = store_free}};
    s = sl_uid(sl_keyed_process(sl_key_by(s, "k"), fn, upd_schema()), "store");
    sl_uid(sl_sink_to(s, (sl_sink_t){&cnt_ops, NULL}, "commits"), "commits");
    return env;
}

/* The incremental checkpoint left by the first test, restored at
 * parallelism 3 (key groups of two old databases merged and split): every
 * key has its last value.  Then a damaged shared file is named. */
TEST(restore_rescaled_and_corrupt) {
    char ck[1024], ck2[1024], rdb[1024], jobdir[1100], shared[1200];
    snprintf(ck, sizeof ck, "%s/inc-ckpt", sl_test_tmpdir());
    snprintf(ck2, sizeof ck2, "%s/inc-ckpt-2", sl_test_tmpdir());
    snprintf(rdb, sizeof rdb, "%s/inc-rocksdb-2", sl_test_tmpdir());
    snprintf(jobdir, sizeof jobdir, "%s/incremental", ck);
    snprintf(shared, sizeof shared, "%s/shared", jobdir);
    /* the latest retained checkpoint taken while the keyed tasks still ran
     * (one completed after they finished holds no keyed state: the job was
     * over, as in Flink) */
    char from[1300] = "", biggest[400] = "";
    sl_ckpt_storage_t *stg;
    char err[600];
    CHECK_EQ(sl_ckpt_storage_fs_open(ck, "incremental", &stg, err, sizeof err), 0);
    int64_t *ids;
    int nids;
    CHECK_EQ(sl_ckpt_storage_list_completed(stg, &ids, &nids, err, sizeof err), 0);
    for (int i = 0; i < nids; i++) {
        sl_ckpt_metadata_t *md;
        CHECK_EQ(stg->ops->load(stg, ids[i], &md, err, sizeof err), 0);
        const sl_ckpt_operator_t *op = sl_ckpt_metadata_find_operator(md, "store");
        if (op && op->subtasks[0].nhandles > 0) {
            snprintf(from, sizeof from, "%s/chk-%lld", jobdir, (long long)ids[i]);
            uint64_t best_size = 0; /* its largest shared file: the one to damage below */
            for (int q = 0; q < op->parallelism; q++)
                for (int h = 0; h < op->subtasks[q].nhandles; h++) {
                    const sl_ckpt_state_handle_t *hd = &op->subtasks[q].handles[h];
                    if (hd->scope == SL_CKPT_SCOPE_SHARED && hd->size > best_size) {
                        best_size = hd->size;
                        snprintf(biggest, sizeof biggest, "%s", hd->path);
                    }
                }
        }
        sl_ckpt_metadata_free(md);
    }
    sl_free(ids);
    stg->ops->destroy(stg);
    CHECK(from[0]);
    for (int p = 3; p >= 1; p -= 2) {
        atomic_store(&verified, 0);
        atomic_store(&wrong, 0);
        sl_env_t *env = job(p, ck2, rdb, from);
        int rc = sl_env_execute(env, "incremental-restored");
        CHECK_STR(sl_env_error(env), "");
        CHECK_EQ(rc, 0);
        sl_env_destroy(env);
        fprintf(stderr, "  restored at parallelism %d: %lld keys verified, %lld wrong or missing\n", p,
                (long long)atomic_load(&verified), (long long)atomic_load(&wrong));
        CHECK_EQ(atomic_load(&verified), NKEYS);
        CHECK_EQ(atomic_load(&wrong), 0);
    }
    /* flip a byte in the middle of the largest shared file the restored checkpoint refers to */
    CHECK(biggest[0]);
    char victim[1700];
    snprintf(victim, sizeof victim, "%s/%s", shared, biggest);
    struct stat sb;
    CHECK_EQ(stat(victim, &sb), 0);
    off_t best = sb.st_size;
    FILE *f = fopen(victim, "r+b");
    CHECK(f != NULL);
    fseek(f, best / 2, SEEK_SET);
    int c = fgetc(f);
    fseek(f, best / 2, SEEK_SET);
    fputc(c ^ 0x5a, f);
    fclose(f);
    sl_env_t *env = job(2, ck2, rdb, from);
    int rc = sl_env_execute(env, "incremental-restored");
    fprintf(stderr, "  corrupt shared file: %s\n", sl_env_error(env));
    CHECK(rc < 0);
    CHECK_CONTAINS(sl_env_error(env), strrchr(victim, '/') + 1);
    CHECK_CONTAINS(sl_env_error(env), "corrupt");
    sl_env_destroy(env);
}

int main(void) {
    RUN(incremental_sizes_and_cleanup);
    RUN(restore_rescaled_and_corrupt);
    TEST_MAIN_END();
}
