/*
 * test_operator_state.c — operator (non-keyed) state of user functions
 * (include/sluice/operator_state.h): split and union list state through a
 * checkpoint, an injected failure and a restore at another parallelism
 * (1 -> 3, 3 -> 2, 4 -> 1 and random pairs), in a flat_map and in a keyed
 * process function (heap and RocksDB keyed state next to it).
 *
 * The function under test keeps, in its list, every id it has processed.
 * The reference is computed from the input alone: ids 0..N-1, each exactly
 * once.  After the restore we check, from what each new subtask got back in
 * initialize_state and what it held at the end:
 *   split: every item of the checkpoint came back in exactly one subtask,
 *          and the final lists together hold every id exactly once;
 *   union: every subtask got the same items back, and those plus what the
 *          subtasks processed after the restore are every id exactly once.
 * The committed output (txn_collect_sink) must hold every id exactly once,
 * and for the keyed variant each key's counts 1..n exactly once.
 * Also: malformed blobs are refused by name, builder mistakes are named.
 */
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>

#include "common/common.h"
#include "operators/basic_ops.h"
#include "pipeline_util.h"
#include "sluice/operator_state.h"
#include "checkpoint/spilled_blob.h"
#include "checkpoint/state_file.h"
#include "checkpoint/state_reader.h"
#include "test.h"

#define SPLITS 8
#define KEYS 16

static uint64_t rng = 0x9E3779B97F4A7C15ULL;
static uint64_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* ---- shared state of one case ---- */
static int64_t N;
static int run_no;                /* 1: until the failure, 2: restored */
static atomic_int failed;
static atomic_llong processed;
static int64_t fail_after, fail_commits;
static txn_collected_t *txn;
static pthread_mutex_t cap_mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t *restored_items[8], nrestored[8]; /* run 2, per subtask */
static int64_t *final_items[8], nfinal[8];       /* run 2, per subtask */
static int restored_calls[8];
static atomic_int bad_is_restored;

/* Checkpoints committed, counted only once one committed a record: from then
 * on the operator's checkpointed state has items (the record passed it before
 * the barrier), so a restore has something to hand out. */
static int64_t commits(void) {
    pthread_mutex_lock(&txn->mu);
    int64_t c = txn->out->n > 0 ? txn->commits : 0;
    pthread_mutex_unlock(&txn->mu);
    return c;
}

/* ---- source: split j emits j, j + SPLITS, ... below N ---- */
typedef struct src_reader {
    int own[SPLITS], nown;
    int64_t pos[SPLITS];
} src_reader_t;

static int src_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    src_reader_t *r = calloc(1, sizeof *r);
    for (int j = subtask; j < SPLITS; j += p) r->own[r->nown++] = j;
    *reader = r;
    *nsplits = r->nown;
    return 0;
}

static int src_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    src_reader_t *r = reader;
    bool slow = run_no == 1 && !atomic_load(&failed);
    if (slow) { /* slow until the failure, so that checkpoints complete */
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
        if (max > 16) max = 16;
    }
    int done = 0, emitted = 0;
    for (int i = 0; i < r->nown; i++) {
        for (int k = 0; k < max / r->nown + 1; k++) {
            int64_t id = r->own[i] + SPLITS * r->pos[i];
            if (id >= N) break;
            r->pos[i]++;
            sl_row_writer_t *w = sl_src_row(out);
            sl_rw_set_i64(w, 0, id);
            sl_src_emit(out, i, SL_NO_TIMESTAMP);
            emitted++;
        }
        if (r->own[i] + SPLITS * r->pos[i] >= N) {
            sl_src_split_finished(out, i);
            done++;
        }
    }
    if (done == r->nown && slow) { /* all emitted before the function failed: fail here after a checkpoint */
        if (commits() < fail_commits) return SL_SRC_IDLE;
        if (!atomic_exchange(&failed, 1)) {
            snprintf(err, el, "injected failure in the source");
            return SL_EUSER;
        }
    }
    return done == r->nown ? SL_SRC_END : emitted ? SL_SRC_MORE : SL_SRC_IDLE;
}

static int src_snapshot(void *reader, int64_t id, void (*put)(void *, const void *, size_t), void *pc) {
    src_reader_t *r = reader;
    for (int i = 0; i < r->nown; i++) {
        int64_t e[2] = {r->own[i], r->pos[i]};
        put(pc, e, sizeof e);
    }
    return 0;
}

static int src_restore(void *reader, const void *state, size_t len, char *err, size_t el) {
    src_reader_t *r = reader;
    size_t pos = 0;
    const void *b;
    size_t bl;
    int rc;
    while ((rc = sl_opstate_union_next(state, len, &pos, &b, &bl)) == 1) {
        if (bl % 16) return SL_EFORMAT;
        for (size_t k = 0; k < bl; k += 16) {
            int64_t e[2];
            memcpy(e, (const uint8_t *)b + k, 16);
            for (int i = 0; i < r->nown; i++)
                if (r->own[i] == e[0]) r->pos[i] = e[1];
        }
    }
    return rc;
}

static void src_destroy_reader(void *r) { free(r); }
static void src_destroy(void *ctx) {}

static const sl_source_ops_t src_ops = {.name = "ids",
                                        .create_reader = src_create,
                                        .poll = src_poll,
                                        .destroy_reader = src_destroy_reader,
                                        .destroy = src_destroy,
                                        .snapshot = src_snapshot,
                                        .restore = src_restore};

/* ---- the function: remembers every id it processed in its list ---- */
typedef struct fn_ctx {
    int mode; /* 0 split, 1 union */
    int subtask;
    int run;
    sl_opstate_list_t *list;
    sl_state_t *count; /* keyed variant */
    int64_t *items;
    int64_t n, cap;
} fn_ctx_t;

static int g_mode;
/* Bytes of padding after each item's id (0: 8-byte items): the large-state
 * case, whose operator state is far above what the metadata keeps inline. */
static size_t g_pad;
static uint8_t pad_byte(int64_t id, size_t j) { return (uint8_t)(id * 131 + (int64_t)j); }
static void *fn_clone(const void *c) {
    fn_ctx_t *f = calloc(1, sizeof *f);
    f->mode = g_mode;
    f->run = run_no;
    return f;
}

static void fn_add(fn_ctx_t *f, int64_t id) {
    if (f->n == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 64;
        f->items = realloc(f->items, (size_t)f->cap * sizeof *f->items);
    }
    f->items[f->n++] = id;
}

static void fn_free(void *c) {
    fn_ctx_t *f = c;
    if (f->run == 2 && f->subtask < 8) {
        pthread_mutex_lock(&cap_mu);
        final_items[f->subtask] = f->items;
        nfinal[f->subtask] = f->n;
        f->items = NULL;
        pthread_mutex_unlock(&cap_mu);
    }
    free(f->items);
    free(f);
}

static int fn_init_state(void *c, sl_rt_t *rt) {
    fn_ctx_t *f = c;
    f->subtask = sl_rt_subtask(rt);
    f->list = f->mode ? sl_opstate_union_list(rt, "seen") : sl_opstate_list(rt, "seen");
    if (!f->list) return SL_EINVAL;
    if (sl_opstate_is_restored(rt) != (f->run == 2)) atomic_store(&bad_is_restored, 1);
    for (int i = 0; i < sl_opstate_count(f->list); i++) {
        uint32_t len;
        const void *v = sl_opstate_get(f->list, i, &len);
        if (len != 8 + g_pad) return SL_EFORMAT;
        int64_t id;
        memcpy(&id, v, 8);
        for (size_t j = 0; j < g_pad; j++)
            if (((const uint8_t *)v)[8 + j] != pad_byte(id, j)) return SL_EFORMAT;
        fn_add(f, id);
    }
    if (f->run == 2) {
        pthread_mutex_lock(&cap_mu);
        restored_calls[f->subtask]++;
        restored_items[f->subtask] = malloc((size_t)(f->n ? f->n : 1) * sizeof(int64_t));
        if (f->n) memcpy(restored_items[f->subtask], f->items, (size_t)f->n * sizeof(int64_t));
        nrestored[f->subtask] = f->n;
        pthread_mutex_unlock(&cap_mu);
    }
    return 0;
}

static int fn_snapshot(void *c, sl_rt_t *rt, int64_t id) {
    fn_ctx_t *f = c;
    sl_opstate_clear(f->list);
    uint8_t *item = malloc(8 + g_pad);
    for (int64_t i = 0; i < f->n; i++) {
        memcpy(item, &f->items[i], 8);
        for (size_t j = 0; j < g_pad; j++) item[8 + j] = pad_byte(f->items[i], j);
        sl_opstate_add(f->list, item, (uint32_t)(8 + g_pad));
    }
    free(item);
    return 0;
}

static int inject(void) {
    if (run_no == 1 && atomic_fetch_add(&processed, 1) >= fail_after && commits() >= fail_commits &&
        !atomic_exchange(&failed, 1))
        return SL_EUSER;
    return 0;
}

static int fm_process(void *c, const sl_record_t *in, sl_collector_t *out) {
    fn_ctx_t *f = c;
    if (inject() < 0) return SL_EUSER;
    int64_t id = sl_row_i64(&in->row, 0);
    fn_add(f, id);
    sl_row_writer_t *w = sl_out_row(out);
    sl_rw_set_i64(w, 0, id);
    sl_rw_set_i64(w, 1, 0);
    sl_emit(out);
    return 0;
}

static int kp_open(void *c, sl_rt_t *rt) {
    fn_ctx_t *f = c;
    f->count = sl_state_value(rt, "count");
    /* initialize_state ran before open: the list is there already */
    return f->count && f->list ? 0 : SL_EINVAL;
}

static int kp_process(void *c, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    fn_ctx_t *f = c;
    if (inject() < 0) return SL_EUSER;
    int64_t id = sl_row_i64(&in->row, 0);
    fn_add(f, id);
    uint32_t len;
    const int64_t *cur = sl_value_get(f->count, &len);
    int64_t cnt = (cur ? *cur : 0) + 1;
    sl_value_put(f->count, &cnt, sizeof cnt);
    sl_row_writer_t *w = sl_out_row(out);
    sl_rw_set_i64(w, 0, id);
    sl_rw_set_i64(w, 1, cnt);
    sl_emit(out);
    return 0;
}

static int key_mod(void *ctx, const sl_row_t *row, uint8_t *key, int cap) {
    int64_t k = sl_row_i64(row, 0) % KEYS;
    memcpy(key, &k, 8);
    return 8;
}

/* One run of the job; returns sl_env_execute's code. */
static int run_job(int p, bool keyed, bool rocksdb, const char *ck, bool restore, int tag) {
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, p);
    sl_env_enable_checkpointing(env, 15, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, ck);
    sl_env_set_checkpoint_retention(env, SL_CHECKPOINTS_RETAIN_ON_CANCELLATION);
    sl_env_set_restart_none(env);
    if (rocksdb) {
        char rdb[1024];
        snprintf(rdb, sizeof rdb, "%s/opstate-rocksdb-%d-%d", sl_test_tmpdir(), tag, run_no);
        sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);
        sl_env_set_rocksdb_options(env, rdb, 8 << 20, 2 << 20);
    }
    char path[1100];
    snprintf(path, sizeof path, "%s/opstate", ck);
    if (restore && sl_env_restore_from(env, path) < 0) {
        fprintf(stderr, "  restore: %s\n", sl_env_error(env));
        sl_env_destroy(env);
        return -100;
    }
    sl_source_t src = {&src_ops, NULL, sl_schema_parse("id BIGINT NOT NULL", NULL, 0)};
    sl_stream_t *s = sl_uid(sl_from_source(env, src, sl_wm_none(), "ids"), "ids");
    sl_schema_t *outs = sl_schema_parse("id BIGINT NOT NULL, cnt BIGINT NOT NULL", NULL, 0);
    sl_checkpointed_fn_t cf = {.initialize_state = fn_init_state, .snapshot_state = fn_snapshot};
    if (!keyed) {
        sl_fn_opts_t o = {.ctx = NULL, .ctx_clone = fn_clone, .ctx_free = fn_free};
        s = sl_uid(sl_flat_map_ex(sl_rebalance(s), fm_process, o, outs), "remember");
    } else {
        sl_process_fn_t fn = {.open = kp_open,
                              .process = kp_process,
                              .opts = {.ctx = NULL, .ctx_clone = fn_clone, .ctx_free = fn_free}};
        s = sl_uid(sl_keyed_process(sl_key_by_fn(s, key_mod, NULL), fn, outs), "remember");
    }
    s = sl_checkpointed(s, cf);
    sl_uid(sl_sink_to(sl_rebalance(s), txn_collect_sink(txn), "out"), "out");
    int rc = sl_env_execute(env, "opstate");
    if (rc < 0 && run_no == 2) fprintf(stderr, "  run 2 failed: %s\n", sl_env_error(env));
    sl_env_destroy(env);
    return rc;
}

static int cmp64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Sorted copy of the concatenation of lists. */
static int64_t *concat(int64_t **lists, const int64_t *ns, const int64_t *skip, int n, int64_t *total) {
    int64_t t = 0;
    for (int i = 0; i < n; i++) t += ns[i] - (skip ? skip[i] : 0);
    int64_t *a = malloc((size_t)(t ? t : 1) * sizeof *a), k = 0;
    for (int i = 0; i < n; i++)
        for (int64_t j = skip ? skip[i] : 0; j < ns[i]; j++) a[k++] = lists[i][j];
    qsort(a, (size_t)t, sizeof *a, cmp64);
    *total = t;
    return a;
}

static void one_case(int pa, int pb, int mode, bool keyed, bool rocksdb, int tag) {
    char ck[1024];
    snprintf(ck, sizeof ck, "%s/opstate-ckpt-%d", sl_test_tmpdir(), tag);
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", ck);
    if (system(cmd) != 0) abort();
    N = 600 + (int64_t)(rnd() % 1400);
    fail_after = N / 5 + (int64_t)(rnd() % (uint64_t)(N / 2));
    if (g_pad && fail_after < N / 2) fail_after = N / 2; /* the restored checkpoint holds MiBs */
    fail_commits = 1 + (int64_t)(rnd() % 2);
    g_mode = mode;
    atomic_store(&failed, 0);
    atomic_store(&processed, 0);
    atomic_store(&bad_is_restored, 0);
    for (int i = 0; i < 8; i++) {
        free(restored_items[i]);
        free(final_items[i]);
        restored_items[i] = final_items[i] = NULL;
        nrestored[i] = nfinal[i] = 0;
        restored_calls[i] = 0;
    }
    txn = txn_collected_new();
    run_no = 1;
    int rc1 = run_job(pa, keyed, rocksdb, ck, false, tag);
    if (g_pad) { /* the retained checkpoint keeps the large operator state in a file, not inline */
        char path[1100], dir[1200], err[600];
        snprintf(path, sizeof path, "%s/opstate", ck);
        sl_ckpt_metadata_t *md = NULL;
        CHECK_EQ(sl_ckpt_open_path(path, &md, dir, sizeof dir, err, sizeof err), 0);
        size_t spilled = 0, inline_max = 0;
        for (int i = 0; md && i < md->noperators; i++)
            for (int q = 0; q < md->operators[i].parallelism; q++) {
                const sl_ckpt_subtask_t *st = &md->operators[i].subtasks[q];
                for (int h = 0; h < st->nhandles; h++)
                    if (st->handles[h].kind == SL_SF_KIND_OPERATOR) spilled += st->handles[h].size;
                const sl_ckpt_blob_t *b = sl_ckpt_find_blob(st->blobs, st->nblobs, "operator-state");
                if (b && b->len > inline_max) inline_max = b->len; /* loaded back from the file */
            }
        char mpath[1300];
        snprintf(mpath, sizeof mpath, "%s/_metadata", dir);
        struct stat sb;
        CHECK_EQ(stat(mpath, &sb), 0);
        fprintf(stderr, "  case %d: %zu bytes of operator state in files, %lld bytes of _metadata\n", tag, spilled,
                (long long)sb.st_size);
        CHECK(spilled > SL_CKPT_INLINE_MAX);
        CHECK(inline_max > SL_CKPT_INLINE_MAX);
        CHECK(sb.st_size < 64 * 1024);
        sl_ckpt_metadata_free(md);
    }
    run_no = 2;
    int rc2 = run_job(pb, keyed, rocksdb, ck, true, tag);
    fprintf(stderr, "  case %d: p %d -> %d, %s, %s%s, N %lld, fail after %lld, run1 %d, run2 %d\n", tag, pa, pb,
            mode ? "union" : "split", keyed ? "keyed process" : "flat_map", rocksdb ? " (rocksdb)" : "",
            (long long)N, (long long)fail_after, rc1, rc2);
    CHECK(rc1 < 0);
    CHECK_EQ(rc2, 0);
    CHECK_EQ(atomic_load(&bad_is_restored), 0);
    for (int i = 0; i < pb; i++) CHECK_EQ(restored_calls[i], 1);

    /* committed output: every id exactly once; per key, counts 1..n once */
    collected_t *c = txn->out;
    int64_t *seen = calloc((size_t)N, sizeof *seen);
    int64_t per = N / KEYS + 2; /* counts of one key: 1..ceil((N - k) / KEYS) */
    int64_t *cnts = calloc((size_t)(KEYS * per), sizeof *cnts);
    sl_schema_t *outs = sl_schema_parse("id BIGINT NOT NULL, cnt BIGINT NOT NULL", NULL, 0);
    bool ok = true;
    for (int64_t i = 0; i < c->n; i++) {
        sl_row_t r = collected_row(c, i, outs);
        int64_t id = sl_row_i64(&r, 0), cnt = sl_row_i64(&r, 1);
        if (id < 0 || id >= N) ok = false;
        else {
            seen[id]++;
            if (keyed && (cnt < 1 || cnt > per)) ok = false;
            else if (keyed) cnts[(id % KEYS) * per + cnt - 1]++;
        }
    }
    sl_schema_unref(outs);
    int64_t dup = 0, miss = 0;
    for (int64_t i = 0; i < N; i++) dup += seen[i] > 1, miss += seen[i] == 0;
    if (keyed) { /* key k has ceil((N - k) / KEYS) records: counts 1..that, once each */
        for (int k = 0; k < KEYS; k++) {
            int64_t nk = (N - k + KEYS - 1) / KEYS;
            for (int64_t j = 0; j < per; j++)
                if (cnts[k * per + j] != (j < nk ? 1 : 0)) ok = false;
        }
    }
    free(seen);
    free(cnts);
    CHECK(ok);
    CHECK_EQ(dup, 0);
    CHECK_EQ(miss, 0);

    /* state */
    int64_t nr, nn;
    int64_t *newer = concat(final_items, nfinal, nrestored, pb, &nn); /* processed after the restore */
    if (mode == 0) {
        int64_t *rest = concat(restored_items, nrestored, NULL, pb, &nr);
        CHECK(nr > 0); /* a checkpoint with items was restored */
        for (int64_t i = 1; i < nr; i++) CHECK(rest[i] != rest[i - 1]); /* exactly one subtask each */
        int64_t nall;
        int64_t *all = concat(final_items, nfinal, NULL, pb, &nall);
        CHECK_EQ(nall, N);
        for (int64_t i = 0; i < N; i++) CHECK_EQ(all[i], i);
        free(all);
        /* at another parallelism the shares are even (contiguous chunks) */
        for (int i = 0; i < pb; i++) {
            int64_t share = nr / pb + (i < nr % pb);
            if (pa != pb) CHECK_EQ(nrestored[i], share);
        }
        free(rest);
    } else {
        /* every subtask got the same items: the checkpoint's, once each */
        int64_t one = 1;
        int64_t *r0 = concat(&restored_items[0], &nrestored[0], NULL, 1, &nr);
        CHECK(nr > 0);
        for (int64_t i = 1; i < nr; i++) CHECK(r0[i] != r0[i - 1]);
        for (int s = 1; s < pb; s++) {
            int64_t ns;
            int64_t *rs = concat(&restored_items[s], &nrestored[s], NULL, 1, &ns);
            CHECK_EQ(ns, nr);
            for (int64_t i = 0; i < nr; i++) CHECK_EQ(rs[i], r0[i]);
            free(rs);
        }
        (void)one;
        /* restored + processed after = every id exactly once */
        int64_t *all = malloc((size_t)(nr + nn + 1) * sizeof *all);
        memcpy(all, r0, (size_t)nr * sizeof *all);
        memcpy(all + nr, newer, (size_t)nn * sizeof *all);
        qsort(all, (size_t)(nr + nn), sizeof *all, cmp64);
        CHECK_EQ(nr + nn, N);
        for (int64_t i = 0; i < N; i++) CHECK_EQ(all[i], i);
        free(all);
        free(r0);
    }
    free(newer);
    txn_collected_free(txn);
    txn = NULL;
}

static int tag_no;

TEST(split_flat_map_rescale) {
    int pairs[][2] = {{1, 3}, {3, 2}, {4, 1}, {2, 2}};
    for (int i = 0; i < 4; i++) {
        one_case(pairs[i][0], pairs[i][1], 0, false, false, tag_no++);
        if (sl_test_failures) return;
    }
}

/* Operator state of several MiB per subtask (a 2PC sink's pending output is
 * such state): written to files of its own in the checkpoint, restored at
 * another parallelism, exactly. */
TEST(large_operator_state_in_files) {
    int pairs[][3] = {{1, 2, 0}, {1, 3, 0}}; /* one subtask holds all of it (MiBs); split: each new one a share */
    g_pad = 12 * 1024; /* final state per task at p = 2 below the message limit: under 12.5 MB */
    for (int i = 0; i < 2; i++) {
        one_case(pairs[i][0], pairs[i][1], pairs[i][2], false, false, tag_no++);
        if (sl_test_failures) break;
    }
    g_pad = 0;
}

TEST(union_flat_map_rescale) {
    int pairs[][2] = {{1, 3}, {3, 2}, {4, 1}, {2, 2}};
    for (int i = 0; i < 4; i++) {
        one_case(pairs[i][0], pairs[i][1], 1, false, false, tag_no++);
        if (sl_test_failures) return;
    }
}

TEST(random_pairs) {
    for (int i = 0; i < 6; i++) {
        int pa = 1 + (int)(rnd() % 4), pb = 1 + (int)(rnd() % 4);
        one_case(pa, pb, (int)(rnd() % 2), rnd() % 2, false, tag_no++);
        if (sl_test_failures) return;
    }
}

TEST(keyed_process_heap_and_rocksdb) {
    one_case(1, 3, 0, true, false, tag_no++);
    if (sl_test_failures) return;
    one_case(3, 2, 1, true, true, tag_no++);
    if (sl_test_failures) return;
    one_case(4, 1, 0, true, true, tag_no++);
}

/* ---- malformed blobs are refused by name ---- */

static int plain_flat_map(void *c, const sl_record_t *in, sl_collector_t *out) { return 0; }
static int keep_all(void *c, const sl_record_t *in) { return 1; }

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}

/* Opens a flat_map subtask whose restored state is `blob` (wrapped in the
 * union format); returns the open's code. */
static int open_with(const uint8_t *blob, uint32_t len, int subtask, int p, sl_checkpointed_fn_t cf,
                     int64_t *items_out, int *n_out) {
    uint8_t *u = malloc(len + 4);
    put32(u, len);
    memcpy(u + 4, blob, len);
    sl_basic_spec_t spec = {.kind = SL_BASIC_FLAT_MAP, .fn = (void *)plain_flat_map, .cp = cf};
    sl_op_init_t init = {.subtask = subtask, .parallelism = p, .max_parallelism = 128, .ninputs = 1,
                         .name = "remember", .uid = "remember"};
    sl_operator_t *op = sl_basic_op_create(&spec, &init);
    op->restored_state = u;
    op->restored_len = len + 4;
    int rc = op->vt->open(op);
    if (rc == 0 && n_out) {
        sl_rt_t rt = {op};
        sl_opstate_list_t *l = sl_opstate_list(&rt, "seen");
        *n_out = sl_opstate_count(l);
        for (int i = 0; i < *n_out; i++) memcpy(&items_out[i], sl_opstate_get(l, i, NULL), 8);
    }
    op->vt->destroy(op);
    free(u);
    return rc;
}

TEST(malformed_blobs) {
    sl_checkpointed_fn_t none = {0};
    /* a good blob: version 1, subtask 0 of 1, one split list "seen" with items 7 and 9 */
    uint8_t good[64];
    size_t k = 0;
    good[k++] = 1;
    put32(good + k, 0), k += 4;
    put32(good + k, 1), k += 4;
    put32(good + k, 1), k += 4;
    good[k++] = 0;
    put32(good + k, 4), k += 4;
    memcpy(good + k, "seen", 4), k += 4;
    put32(good + k, 2), k += 4;
    int64_t v1 = 7, v2 = 9;
    put32(good + k, 8), k += 4;
    memcpy(good + k, &v1, 8), k += 8;
    put32(good + k, 8), k += 4;
    memcpy(good + k, &v2, 8), k += 8;
    int64_t items[4];
    int n = 0;
    CHECK_EQ(open_with(good, (uint32_t)k, 0, 1, none, items, &n), 0);
    CHECK_EQ(n, 2);
    CHECK_EQ(items[0], 7);
    CHECK_EQ(items[1], 9);
    /* at parallelism 2: subtask 1 gets the second item */
    CHECK_EQ(open_with(good, (uint32_t)k, 1, 2, none, items, &n), 0);
    CHECK_EQ(n, 1);
    CHECK_EQ(items[0], 9);
    /* every truncation is refused, naming the operator */
    for (size_t cut = 0; cut < k; cut++) {
        CHECK(open_with(good, (uint32_t)cut, 0, 1, none, NULL, NULL) == SL_EFORMAT);
        CHECK_CONTAINS(sl_op_test_last_error(), "operator state of 'remember'");
        CHECK_CONTAINS(sl_op_test_last_error(), "malformed");
    }
    uint8_t bad[64];
    memcpy(bad, good, k);
    bad[0] = 2; /* version */
    CHECK(open_with(bad, (uint32_t)k, 0, 1, none, NULL, NULL) == SL_EFORMAT);
    CHECK_CONTAINS(sl_op_test_last_error(), "unknown version");
    memcpy(bad, good, k);
    bad[13] = 5; /* mode */
    CHECK(open_with(bad, (uint32_t)k, 0, 1, none, NULL, NULL) == SL_EFORMAT);
    memcpy(bad, good, k);
    put32(bad + 1, 3); /* subtask 3 of 1 */
    CHECK(open_with(bad, (uint32_t)k, 0, 1, none, NULL, NULL) == SL_EFORMAT);
    memcpy(bad, good, k);
    bad[k] = 0; /* trailing byte */
    CHECK(open_with(bad, (uint32_t)k + 1, 0, 1, none, NULL, NULL) == SL_EFORMAT);
    CHECK_CONTAINS(sl_op_test_last_error(), "trailing");
}


/* Lists restored but not declared again are carried into the next
 * checkpoints: a split list's share by every subtask, a union list once. */
static sl_operator_t *op_restored(const uint8_t *u, size_t ulen, int subtask, int p) {
    sl_basic_spec_t spec = {.kind = SL_BASIC_FLAT_MAP, .fn = (void *)plain_flat_map};
    sl_op_init_t init = {.subtask = subtask, .parallelism = p, .max_parallelism = 128, .ninputs = 1,
                         .name = "carry", .uid = "carry"};
    sl_operator_t *op = sl_basic_op_create(&spec, &init);
    op->restored_state = u;
    op->restored_len = ulen;
    return op;
}

TEST(undeclared_lists_carried) {
    /* p 1: split list "x" with items 0..4, union list "u" with items 10, 11 */
    sl_operator_t *op = op_restored(NULL, 0, 0, 1);
    sl_rt_t rt = {op};
    sl_opstate_list_t *x = sl_opstate_list(&rt, "x"), *u = sl_opstate_union_list(&rt, "u");
    for (int64_t i = 0; i < 5; i++) sl_opstate_add(x, &i, 8);
    for (int64_t i = 10; i < 12; i++) sl_opstate_add(u, &i, 8);
    sl_buf_t b1 = {0};
    CHECK_EQ(op->vt->snapshot_state(op, 1, &b1), 0);
    op->vt->destroy(op);
    uint8_t *u1 = malloc(b1.len + 4);
    put32(u1, (uint32_t)b1.len);
    memcpy(u1 + 4, b1.p, b1.len);
    /* p 3: nobody declares anything; each snapshots what it carries */
    sl_buf_t u3 = {0};
    for (int s = 0; s < 3; s++) {
        op = op_restored(u1, b1.len + 4, s, 3);
        CHECK_EQ(op->vt->open(op), 0);
        sl_buf_t b = {0};
        CHECK_EQ(op->vt->snapshot_state(op, 2, &b), 0);
        uint8_t l[4];
        put32(l, (uint32_t)b.len);
        sl_buf_append(&u3, l, 4);
        sl_buf_append(&u3, b.p, b.len);
        sl_buf_free(&b);
        op->vt->destroy(op);
    }
    /* p 2: declares both again: x's items once over the subtasks, u's once in each */
    int seen[5] = {0};
    for (int s = 0; s < 2; s++) {
        op = op_restored(u3.p, u3.len, s, 2);
        CHECK_EQ(op->vt->open(op), 0);
        rt.op = op;
        x = sl_opstate_list(&rt, "x");
        u = sl_opstate_union_list(&rt, "u");
        CHECK(x && u);
        for (int i = 0; i < sl_opstate_count(x); i++) {
            int64_t v;
            memcpy(&v, sl_opstate_get(x, i, NULL), 8);
            CHECK(v >= 0 && v < 5);
            seen[v]++;
        }
        CHECK_EQ(sl_opstate_count(u), 2);
        op->vt->destroy(op);
    }
    for (int i = 0; i < 5; i++) CHECK_EQ(seen[i], 1);
    sl_buf_free(&u3);
    sl_buf_free(&b1);
    free(u1);
}

static int declared_null;
static int declare_union(void *c, sl_rt_t *rt) {
    declared_null = sl_opstate_union_list(rt, "seen") == NULL;
    return 0;
}

TEST(mode_conflict_named) {
    /* the checkpoint holds "seen" as a split list; declaring it as union fails by name */
    uint8_t blob[32];
    size_t k = 0;
    blob[k++] = 1;
    put32(blob + k, 0), k += 4;
    put32(blob + k, 1), k += 4;
    put32(blob + k, 1), k += 4;
    blob[k++] = 0;
    put32(blob + k, 4), k += 4;
    memcpy(blob + k, "seen", 4), k += 4;
    put32(blob + k, 0), k += 4;
    sl_checkpointed_fn_t cf = {.initialize_state = declare_union};
    open_with(blob, (uint32_t)k, 0, 1, cf, NULL, NULL);
    CHECK(declared_null);
    CHECK_CONTAINS(sl_op_test_last_error(), "operator state 'seen' is declared as union list state");
}

TEST(builder_errors_named) {
    sl_env_t *env = sl_env_new();
    sl_source_t src = counter_source(10, 1);
    sl_stream_t *s = sl_from_source(env, src, sl_wm_none(), "src");
    sl_checkpointed_fn_t cf = {.initialize_state = fn_init_state};
    CHECK(sl_checkpointed(s, cf) == NULL);
    CHECK_CONTAINS(sl_env_error(env), "checkpointed: operator 'src' is not a map");
    sl_env_destroy(env);

    env = sl_env_new();
    src = counter_source(10, 1);
    s = sl_from_source(env, src, sl_wm_none(), "src");
    s = sl_filter(s, keep_all, NULL);
    CHECK(sl_checkpointed(s, (sl_checkpointed_fn_t){0}) == NULL);
    CHECK_CONTAINS(sl_env_error(env), "neither initialize_state nor snapshot_state");
    sl_env_destroy(env);

    env = sl_env_new();
    src = counter_source(10, 1);
    s = sl_from_source(env, src, sl_wm_none(), "src");
    s = sl_name(sl_filter(s, keep_all, NULL), "keep");
    CHECK(sl_checkpointed(s, cf) == s);
    CHECK(sl_checkpointed(s, cf) == NULL);
    CHECK_CONTAINS(sl_env_error(env), "operator 'keep' already has operator-state callbacks");
    sl_env_destroy(env);
}

int main(void) {
    RUN(malformed_blobs);
    RUN(mode_conflict_named);
    RUN(undeclared_lists_carried);
    RUN(builder_errors_named);
    RUN(split_flat_map_rescale);
    RUN(union_flat_map_rescale);
    RUN(large_operator_state_in_files);
    RUN(keyed_process_heap_and_rocksdb);
    RUN(random_pairs);
    for (int i = 0; i < 8; i++) {
        free(restored_items[i]);
        free(final_items[i]);
    }
    TEST_MAIN_END();
}
