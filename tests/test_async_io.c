/*
 * test_async_io.c — async I/O (include/sluice/async.h) against a slow and
 * sometimes failing service simulated by threads of the test: random
 * latencies, errors (the function retries), requests slower than the
 * timeout (the timeout callback answers), a failure injected in the middle
 * (sl_async_fail after a checkpoint completed) and a restore at another
 * parallelism (1 -> 3, 3 -> 2, 4 -> 1, random), in ordered and unordered
 * mode.
 *
 * The reference is computed from the input alone: ids 0..N-1, each with
 * exactly one answer (id * 7 + 1) or one timeout row in the committed output
 * (txn_collect_sink).  Besides:
 *   - ordered mode: within each async subtask, results leave in input order
 *     (a map before the operator stamps each record with its subtask's
 *     sequence number; a map chained after it checks);
 *   - a watermark never overtakes a result: a keyed process downstream
 *     checks that no result arrives at or behind its current watermark (the
 *     source is never late itself);
 *   - never more than `capacity` requests in flight per subtask;
 *   - an answer from another thread wakes an idle task (its mail), long
 *     before any timer would.
 */
#include <stdatomic.h>
#include <time.h>

#include "operators/basic_ops.h"
#include "pipeline_util.h"
#include "sluice/async.h"
#include "sluice/operator_state.h"
#include "test.h"

#define SPLITS 8
#define MAXP 4

static int64_t N;
static int run_no;
static int g_mode, g_capacity;
static atomic_int failed;
static atomic_llong completed_ok, timeouts, retries, resent;
static int64_t fail_after;
static txn_collected_t *txn;
static atomic_int order_violations, wm_violations, cap_violations;
static atomic_int outstanding[3][MAXP];

static int64_t commits(void) {
    pthread_mutex_lock(&txn->mu);
    int64_t c = txn->commits;
    pthread_mutex_unlock(&txn->mu);
    return c;
}

static void sleep_us(long us) {
    struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

/* ---- source: split j emits ids j, j + SPLITS, ...; ts = position in the split ---- */
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
    if (slow) {
        sleep_us(1000);
        if (max > 8) max = 8;
    }
    int done = 0, emitted = 0;
    for (int i = 0; i < r->nown; i++) {
        for (int k = 0; k < max / r->nown + 1; k++) {
            int64_t id = r->own[i] + SPLITS * r->pos[i];
            if (id >= N) break;
            sl_row_writer_t *w = sl_src_row(out);
            sl_rw_set_i64(w, 0, id);
            sl_rw_set_i64(w, 1, r->pos[i]);
            sl_src_emit(out, i, SL_NO_TIMESTAMP);
            r->pos[i]++;
            emitted++;
        }
        if (r->own[i] + SPLITS * r->pos[i] >= N) {
            sl_src_split_finished(out, i);
            done++;
        }
    }
    if (done == r->nown && run_no == 1) {
        /* everything emitted and the job still runs (the service's failure
         * did not happen yet, or hit a request that had timed out): fail
         * here, after a checkpoint completed */
        if (!atomic_load(&failed) && commits() < 1) return SL_SRC_IDLE;
        atomic_store(&failed, 1);
        snprintf(err, el, "injected failure in the source");
        return SL_EUSER;
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
    while ((rc = sl_opstate_union_next(state, len, &pos, &b, &bl)) == 1)
        for (size_t k = 0; k + 16 <= bl; k += 16) {
            int64_t e[2];
            memcpy(e, (const uint8_t *)b + k, 16);
            for (int i = 0; i < r->nown; i++)
                if (r->own[i] == e[0]) r->pos[i] = e[1];
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

/* ---- the service: worker threads answer requests when they are due ---- */
typedef struct req {
    sl_async_result_t *res;
    int64_t id, ts, origin, seq;
    int64_t due_ns;
    int tries;
    int run, subtask;
    struct req *next;
} req_t;

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv, idle_cv;
    req_t *head;
    int busy, queued;
    bool stop;
    uint64_t rng;
    pthread_t th[3];
} svc = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER, .idle_cv = PTHREAD_COND_INITIALIZER,
         .rng = 0x2545F4914F6CDD1DULL};
static atomic_char released[1 << 16]; /* per id: its in-flight count was given back */

static uint64_t svc_rnd(void) { /* svc.mu held */
    svc.rng ^= svc.rng << 13;
    svc.rng ^= svc.rng >> 7;
    svc.rng ^= svc.rng << 17;
    return svc.rng;
}

/* svc.mu held: a latency of 0-2 ms mostly, sometimes 20 ms, sometimes
 * longer than the timeout */
static int64_t latency_ns(void) {
    uint64_t x = svc_rnd() % 100;
    if (x < 80) return (int64_t)(svc_rnd() % 2000000);
    if (x < 95) return 2000000 + (int64_t)(svc_rnd() % 18000000);
    return 150000000;
}

static void svc_submit(req_t *r) {
    pthread_mutex_lock(&svc.mu);
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    r->due_ns = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec + latency_ns();
    r->next = svc.head;
    svc.head = r;
    svc.queued++;
    pthread_cond_broadcast(&svc.cv);
    pthread_mutex_unlock(&svc.mu);
}

static void give_back(int run, int subtask, int64_t id) {
    if (!atomic_exchange(&released[id], 1)) atomic_fetch_sub(&outstanding[run][subtask], 1);
}

static void answer(req_t *r) {
    pthread_mutex_lock(&svc.mu);
    bool error = svc_rnd() % 100 < 10 && r->tries < 4;
    pthread_mutex_unlock(&svc.mu);
    if (error) { /* the service failed: the function retries */
        r->tries++;
        atomic_fetch_add(&retries, 1);
        svc_submit(r);
        return;
    }
    /* the injected failure: once, after a checkpoint completed */
    if (r->run == 1 && atomic_load(&completed_ok) >= fail_after && commits() >= 1 && !atomic_exchange(&failed, 1)) {
        give_back(r->run, r->subtask, r->id);
        sl_async_fail(r->res, "injected service failure");
        free(r);
        return;
    }
    give_back(r->run, r->subtask, r->id);
    sl_row_writer_t *w = sl_async_row(r->res);
    sl_rw_set_i64(w, 0, r->id);
    sl_rw_set_i64(w, 1, r->ts);
    sl_rw_set_i64(w, 2, r->origin);
    sl_rw_set_i64(w, 3, r->seq);
    sl_rw_set_i64(w, 4, 0);
    sl_rw_set_i64(w, 5, r->id * 7 + 1);
    sl_async_add(r->res);
    atomic_fetch_add(&completed_ok, 1);
    sl_async_complete(r->res); /* ignored when it timed out meanwhile */
    free(r);
}

static void *svc_main(void *arg) {
    pthread_mutex_lock(&svc.mu);
    while (!svc.stop) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        int64_t t = (int64_t)now.tv_sec * 1000000000LL + now.tv_nsec, best = INT64_MAX;
        req_t **pick = NULL;
        for (req_t **p = &svc.head; *p; p = &(*p)->next)
            if ((*p)->due_ns < best) best = (*p)->due_ns, pick = p;
        if (pick && best <= t) {
            req_t *r = *pick;
            *pick = r->next;
            svc.queued--;
            svc.busy++;
            pthread_mutex_unlock(&svc.mu);
            answer(r);
            pthread_mutex_lock(&svc.mu);
            svc.busy--;
            if (!svc.queued && !svc.busy) pthread_cond_broadcast(&svc.idle_cv);
            continue;
        }
        if (!pick) {
            pthread_cond_wait(&svc.cv, &svc.mu);
        } else {
            int64_t d = best - t;
            if (d > 2000000) d = 2000000;
            struct timespec ab;
            clock_gettime(CLOCK_REALTIME, &ab);
            int64_t ns = (int64_t)ab.tv_nsec + d;
            ab.tv_sec += ns / 1000000000LL;
            ab.tv_nsec = ns % 1000000000LL;
            pthread_cond_timedwait(&svc.cv, &svc.mu, &ab);
        }
    }
    pthread_mutex_unlock(&svc.mu);
    return NULL;
}

static void svc_wait_idle(void) {
    pthread_mutex_lock(&svc.mu);
    while (svc.queued || svc.busy) pthread_cond_wait(&svc.idle_cv, &svc.mu);
    pthread_mutex_unlock(&svc.mu);
}

/* ---- the job's functions ---- */
typedef struct stamp_ctx {
    int subtask;
    int64_t seq;
} stamp_ctx_t;

static void *stamp_clone(const void *c) { return calloc(1, sizeof(stamp_ctx_t)); }
static int stamp_init(void *c, sl_rt_t *rt) {
    ((stamp_ctx_t *)c)->subtask = sl_rt_subtask(rt);
    return 0;
}
static int stamp_map(void *c, const sl_record_t *in, sl_row_writer_t *out) {
    stamp_ctx_t *s = c;
    sl_rw_set_i64(out, 0, sl_row_i64(&in->row, 0));
    sl_rw_set_i64(out, 1, sl_row_i64(&in->row, 1));
    sl_rw_set_i64(out, 2, run_no * 100 + s->subtask);
    sl_rw_set_i64(out, 3, s->seq++);
    return 0;
}

typedef struct async_ctx {
    int subtask;
} async_ctx_t;
static void *actx_clone(const void *c) { return calloc(1, sizeof(async_ctx_t)); }
static int async_open(void *c, sl_rt_t *rt) {
    ((async_ctx_t *)c)->subtask = sl_rt_subtask(rt);
    return 0;
}

static int async_invoke(void *c, const sl_record_t *in, sl_async_result_t *res) {
    async_ctx_t *a = c;
    req_t *r = calloc(1, sizeof *r);
    r->res = res;
    r->id = sl_row_i64(&in->row, 0);
    r->ts = sl_row_i64(&in->row, 1);
    r->origin = sl_row_i64(&in->row, 2);
    r->seq = sl_row_i64(&in->row, 3);
    r->run = run_no;
    r->subtask = a->subtask;
    if (run_no == 2 && r->origin / 100 == 1) atomic_fetch_add(&resent, 1); /* in flight at the checkpoint */
    atomic_store(&released[r->id], 0);
    if (atomic_fetch_add(&outstanding[run_no][a->subtask], 1) + 1 > g_capacity) atomic_store(&cap_violations, 1);
    svc_submit(r);
    return 0;
}

static int async_timeout(void *c, const sl_record_t *in, sl_async_result_t *res) {
    async_ctx_t *a = c;
    int64_t id = sl_row_i64(&in->row, 0);
    give_back(run_no, a->subtask, id);
    atomic_fetch_add(&timeouts, 1);
    sl_row_writer_t *w = sl_async_row(res);
    sl_rw_set_i64(w, 0, id);
    sl_rw_set_i64(w, 1, sl_row_i64(&in->row, 1));
    sl_rw_set_i64(w, 2, sl_row_i64(&in->row, 2));
    sl_rw_set_i64(w, 3, sl_row_i64(&in->row, 3));
    sl_rw_set_i64(w, 4, 1);
    sl_rw_set_i64(w, 5, -1);
    sl_async_add(res);
    sl_async_complete(res);
    return 0;
}

/* ordered mode: per origin (run, stamping subtask), sequence numbers rise */
typedef struct order_ctx {
    int64_t last[300];
} order_ctx_t;
static void *order_clone(const void *c) {
    order_ctx_t *o = malloc(sizeof *o);
    for (int i = 0; i < 300; i++) o->last[i] = -1;
    return o;
}
static int order_check(void *c, const sl_record_t *in, sl_collector_t *out) {
    order_ctx_t *o = c;
    int64_t origin = sl_row_i64(&in->row, 2), seq = sl_row_i64(&in->row, 3);
    if (g_mode == SL_ASYNC_ORDERED && origin >= 0 && origin < 300) {
        if (seq <= o->last[origin]) atomic_fetch_add(&order_violations, 1);
        o->last[origin] = seq;
    }
    sl_row_writer_t *w = sl_out_row(out);
    for (int i = 0; i < 6; i++) sl_rw_set_i64(w, i, sl_row_i64(&in->row, i));
    sl_emit(out);
    return 0;
}

/* downstream: no result at or behind the watermark */
static int wm_check(void *c, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    if (in->ts <= sl_pctx_watermark(pc)) {
        if (atomic_fetch_add(&wm_violations, 1) < 3)
            fprintf(stderr, "  result ts %lld behind watermark %lld\n", (long long)in->ts,
                    (long long)sl_pctx_watermark(pc));
    }
    sl_row_writer_t *w = sl_out_row(out);
    for (int i = 0; i < 6; i++) sl_rw_set_i64(w, i, sl_row_i64(&in->row, i));
    sl_emit(out);
    return 0;
}

#define ROW_DDL "id BIGINT NOT NULL, ts BIGINT NOT NULL, origin BIGINT NOT NULL, seq BIGINT NOT NULL"
#define OUT_DDL ROW_DDL ", kind BIGINT NOT NULL, value BIGINT NOT NULL"

static int run_job(int p, bool rocksdb, const char *ck, bool restore, int tag) {
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, p);
    sl_env_enable_checkpointing(env, 15, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, ck);
    sl_env_set_checkpoint_retention(env, SL_CHECKPOINTS_RETAIN_ON_CANCELLATION);
    sl_env_set_restart_none(env);
    sl_env_set_auto_watermark_interval(env, 1);
    if (rocksdb) {
        char rdb[1024];
        snprintf(rdb, sizeof rdb, "%s/async-rocksdb-%d-%d", sl_test_tmpdir(), tag, run_no);
        sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);
        sl_env_set_rocksdb_options(env, rdb, 8 << 20, 2 << 20);
    }
    char path[1100];
    snprintf(path, sizeof path, "%s/async", ck);
    if (restore && sl_env_restore_from(env, path) < 0) {
        fprintf(stderr, "  restore: %s\n", sl_env_error(env));
        sl_env_destroy(env);
        return -100;
    }
    sl_source_t src = {&src_ops, NULL, sl_schema_parse("id BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0)};
    sl_stream_t *s = sl_uid(sl_from_source(env, src, sl_wm_bounded("ts", 0), "ids"), "ids");
    s = sl_uid(sl_map_ex(s, stamp_map, (sl_fn_opts_t){.ctx_clone = stamp_clone, .ctx_free = free},
                         sl_schema_parse(ROW_DDL, NULL, 0)),
               "stamp");
    s = sl_checkpointed(s, (sl_checkpointed_fn_t){.initialize_state = stamp_init});
    sl_async_fn_t fn = {.invoke = async_invoke,
                        .timeout = async_timeout,
                        .open = async_open,
                        .opts = {.ctx_clone = actx_clone, .ctx_free = free}};
    s = sl_uid(sl_async_wait(s, fn, g_capacity, 40, (sl_async_mode_t)g_mode, sl_schema_parse(OUT_DDL, NULL, 0)),
               "enrich");
    s = sl_uid(sl_flat_map_ex(s, order_check, (sl_fn_opts_t){.ctx_clone = order_clone, .ctx_free = free},
                              sl_schema_parse(OUT_DDL, NULL, 0)),
               "order");
    sl_process_fn_t wf = {.process = wm_check};
    s = sl_uid(sl_keyed_process(sl_key_by(s, "id"), wf, sl_schema_parse(OUT_DDL, NULL, 0)), "wmcheck");
    sl_uid(sl_sink_to(s, txn_collect_sink(txn), "out"), "out");
    int rc = sl_env_execute(env, "async");
    if (rc < 0 && (run_no == 2 || !atomic_load(&failed))) fprintf(stderr, "  run %d: %s\n", run_no, sl_env_error(env));
    if (run_no == 1 && rc < 0 && !strstr(sl_env_error(env), "injected")) rc = -200;
    sl_env_destroy(env);
    svc_wait_idle(); /* late answers of the failed run land on released handles */
    return rc;
}

static uint64_t rng = 0xD1B54A32D192ED03ULL;
static uint64_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void one_case(int pa, int pb, int mode, bool rocksdb, int tag) {
    char ck[1024], cmd[1100];
    snprintf(ck, sizeof ck, "%s/async-ckpt-%d", sl_test_tmpdir(), tag);
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", ck);
    if (system(cmd) != 0) abort();
    N = 800 + (int64_t)(rnd() % 1200);
    fail_after = N / 5 + (int64_t)(rnd() % (uint64_t)(N / 2));
    g_mode = mode;
    g_capacity = 1 + (int)(rnd() % 12);
    atomic_store(&failed, 0);
    atomic_store(&completed_ok, 0);
    atomic_store(&order_violations, 0);
    atomic_store(&wm_violations, 0);
    atomic_store(&cap_violations, 0);
    int64_t t0 = atomic_load(&timeouts), r0 = atomic_load(&resent);
    for (int r = 0; r < 3; r++)
        for (int i = 0; i < MAXP; i++) atomic_store(&outstanding[r][i], 0);
    txn = txn_collected_new();
    run_no = 1;
    int rc1 = run_job(pa, rocksdb, ck, false, tag);
    run_no = 2;
    int rc2 = run_job(pb, rocksdb, ck, true, tag);
    fprintf(stderr, "  case %d: %s, capacity %d, p %d -> %d%s, N %lld, run1 %d, run2 %d, timeouts %lld, resent %lld\n",
            tag, mode ? "unordered" : "ordered", g_capacity, pa, pb, rocksdb ? " (rocksdb)" : "", (long long)N, rc1, rc2,
            (long long)(atomic_load(&timeouts) - t0), (long long)(atomic_load(&resent) - r0));
    CHECK(rc1 < 0 && rc1 != -200);
    CHECK_EQ(rc2, 0);
    CHECK_EQ(atomic_load(&order_violations), 0);
    CHECK_EQ(atomic_load(&wm_violations), 0);
    CHECK_EQ(atomic_load(&cap_violations), 0);
    /* exactly one answer or one timeout per id, with the right value */
    collected_t *c = txn->out;
    sl_schema_t *outs = sl_schema_parse(OUT_DDL, NULL, 0);
    int64_t *seen = calloc((size_t)N, sizeof *seen), bad = 0;
    for (int64_t i = 0; i < c->n; i++) {
        sl_row_t r = collected_row(c, i, outs);
        int64_t id = sl_row_i64(&r, 0), kind = sl_row_i64(&r, 4), v = sl_row_i64(&r, 5);
        if (id < 0 || id >= N) {
            bad++;
            continue;
        }
        seen[id]++;
        if (!(kind == 0 && v == id * 7 + 1) && !(kind == 1 && v == -1)) bad++;
        if (sl_row_i64(&r, 1) != id / SPLITS) bad++; /* the input's fields came through */
    }
    int64_t dup = 0, miss = 0;
    for (int64_t i = 0; i < N; i++) dup += seen[i] > 1, miss += seen[i] == 0;
    free(seen);
    sl_schema_unref(outs);
    CHECK_EQ(bad, 0);
    CHECK_EQ(dup, 0);
    CHECK_EQ(miss, 0);
    txn_collected_free(txn);
    txn = NULL;
}

static int tag_no;

TEST(ordered_rescale) {
    int pairs[][2] = {{1, 3}, {3, 2}, {4, 1}};
    for (int i = 0; i < 3 && !sl_test_failures; i++) one_case(pairs[i][0], pairs[i][1], SL_ASYNC_ORDERED, false, tag_no++);
}

TEST(unordered_rescale) {
    int pairs[][2] = {{1, 3}, {3, 2}, {4, 1}};
    for (int i = 0; i < 3 && !sl_test_failures; i++)
        one_case(pairs[i][0], pairs[i][1], SL_ASYNC_UNORDERED, false, tag_no++);
}

TEST(random_cases) {
    for (int i = 0; i < 6 && !sl_test_failures; i++)
        one_case(1 + (int)(rnd() % MAXP), 1 + (int)(rnd() % MAXP), (int)(rnd() % 2), i == 0, tag_no++);
}

/* the paths above were taken: timeouts, and requests in flight at the
 * restored checkpoint sent again */
TEST(timeouts_and_resends_happened) {
    CHECK(atomic_load(&timeouts) > 0);
    CHECK(atomic_load(&resent) > 0);
}

/* ---- mistakes are named when the job is built or runs ---- */
static int never_invoke(void *c, const sl_record_t *in, sl_async_result_t *res) {
    sl_async_complete(res);
    return 0;
}

TEST(builder_errors_named) {
    sl_env_t *env = sl_env_new();
    sl_source_t src = counter_source(10, 1);
    sl_stream_t *s = sl_from_source(env, src, sl_wm_none(), "src");
    sl_async_fn_t fn = {.invoke = never_invoke};
    CHECK(sl_async_wait(s, fn, 0, 10, SL_ASYNC_ORDERED, sl_schema_parse("id BIGINT", NULL, 0)) == NULL);
    CHECK_CONTAINS(sl_env_error(env), "async_wait: capacity must be > 0");
    sl_env_destroy(env);

    env = sl_env_new();
    src = counter_source(10, 1);
    s = sl_from_source(env, src, sl_wm_none(), "src");
    sl_async_fn_t none = {0};
    CHECK(sl_async_wait(s, none, 4, 10, SL_ASYNC_ORDERED, sl_schema_parse("id BIGINT", NULL, 0)) == NULL);
    CHECK_CONTAINS(sl_env_error(env), "no invoke function");
    sl_env_destroy(env);
}

/* A request that never answers and no timeout callback: the job fails
 * naming the operator and the timeout. */
static sl_async_result_t *parked[64];
static atomic_int nparked;
static int park_invoke(void *c, const sl_record_t *in, sl_async_result_t *res) {
    int i = atomic_fetch_add(&nparked, 1);
    if (i < 64) parked[i] = res;
    else sl_async_complete(res);
    return 0;
}

TEST(timeout_without_callback_fails_by_name) {
    sl_env_t *env = sl_env_new();
    sl_source_t src = counter_source(5, 1);
    sl_stream_t *s = sl_from_source(env, src, sl_wm_none(), "src");
    sl_async_fn_t fn = {.invoke = park_invoke};
    s = sl_name(sl_async_wait(s, fn, 2, 20, SL_ASYNC_UNORDERED, sl_schema_parse("id BIGINT", NULL, 0)), "lookup");
    collected_t *c = collected_new();
    sl_sink_to(s, collect_sink(c), "out");
    int rc = sl_env_execute(env, "timeout");
    CHECK(rc < 0);
    CHECK_CONTAINS(sl_env_error(env), "lookup");
    CHECK_CONTAINS(sl_env_error(env), "timed out after 20 ms");
    sl_env_destroy(env);
    int n = atomic_load(&nparked);
    for (int i = 0; i < n && i < 64; i++) sl_async_complete(parked[i]); /* after the job: released, ignored */
    collected_free(c);
}


/* A completion on another thread wakes the task through its mailbox, with
 * no record, watermark or timer to carry it: the source emits one record
 * and then stays idle; the answer comes 20 ms later from a thread of the
 * test and must reach the map after the operator within 10 s — long
 * before the request's 60 s timeout, whose timer would otherwise be the
 * first thing to look at the queue again. */
static atomic_int wake_stop, wake_seen;
static int wake_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    *reader = calloc(1, sizeof(int));
    *nsplits = 1;
    return 0;
}
static int wake_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    int *sent = reader;
    if (!*sent) {
        sl_rw_set_i64(sl_src_row(out), 0, 42);
        sl_src_emit(out, 0, SL_NO_TIMESTAMP);
        *sent = 1;
        return SL_SRC_MORE;
    }
    if (!atomic_load(&wake_stop)) return SL_SRC_IDLE;
    sl_src_split_finished(out, 0);
    return SL_SRC_END;
}
static const sl_source_ops_t wake_src_ops = {
    .name = "one", .create_reader = wake_create, .poll = wake_poll, .destroy_reader = src_destroy_reader,
    .destroy = src_destroy};
static void *wake_answer(void *arg) {
    sleep_us(20000);
    sl_async_result_t *res = arg;
    sl_rw_set_i64(sl_async_row(res), 0, 43);
    sl_async_add(res);
    sl_async_complete(res);
    return NULL;
}
static int wake_invoke(void *c, const sl_record_t *in, sl_async_result_t *res) {
    pthread_t th;
    if (pthread_create(&th, NULL, wake_answer, res) != 0) return SL_EIO;
    pthread_detach(th);
    return 0;
}
static int wake_mark(void *c, const sl_record_t *in, sl_row_writer_t *out) {
    if (sl_row_i64(&in->row, 0) == 43) atomic_store(&wake_seen, 1);
    sl_rw_set_i64(out, 0, sl_row_i64(&in->row, 0));
    return 0;
}
static void *wake_job(void *arg) {
    sl_env_t *env = arg;
    intptr_t rc = sl_env_execute(env, "wake");
    return (void *)rc;
}

TEST(completion_wakes_an_idle_task) {
    atomic_store(&wake_stop, 0), atomic_store(&wake_seen, 0);
    sl_env_t *env = sl_env_new();
    sl_source_t src = {&wake_src_ops, NULL, sl_schema_parse("id BIGINT NOT NULL", NULL, 0)};
    sl_stream_t *s = sl_from_source(env, src, sl_wm_none(), "one");
    sl_async_fn_t fn = {.invoke = wake_invoke};
    s = sl_async_wait(s, fn, 4, 60000, SL_ASYNC_UNORDERED, sl_schema_parse("id BIGINT NOT NULL", NULL, 0));
    s = sl_map(s, wake_mark, NULL, sl_schema_parse("id BIGINT NOT NULL", NULL, 0));
    collected_t *c = collected_new();
    sl_sink_to(s, collect_sink(c), "out");
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, wake_job, env), 0);
    int64_t t0 = sl_mono_ns(), waited_ms = 0;
    while (!atomic_load(&wake_seen) && (waited_ms = (sl_mono_ns() - t0) / 1000000) < 10000) sleep_us(1000);
    fprintf(stderr, "  the answer reached the map after %lld ms\n", (long long)waited_ms);
    CHECK(atomic_load(&wake_seen));
    atomic_store(&wake_stop, 1);
    void *rc;
    pthread_join(th, &rc);
    CHECK_EQ((intptr_t)rc, 0);
    sl_env_destroy(env);
    collected_free(c);
}

/* ---- the queue's semantics, driven directly (no task, no threads) ----
 * A random interleaving of records, watermarks and completions in any
 * order; the emitted sequence is checked against the definition:
 *   ordered:   records leave in input order;
 *   both:      a watermark leaves after every record before it and before
 *              every record after it (unordered results reorder only
 *              between watermarks), watermarks rise, the last one leaves. */
typedef struct qev {
    bool wm;
    int64_t v; /* record id or watermark */
} qev_t;
static qev_t qout[4096];
static int nqout;
static sl_async_result_t *qpend[4096];
static int64_t qpend_id[4096];
static int nqpend;

static void q_record(sl_op_output_t *o, int tag, const sl_record_t *rec) {
    qout[nqout++] = (qev_t){false, sl_row_i64(&rec->row, 0)};
}
static void q_watermark(sl_op_output_t *o, int64_t wm) { qout[nqout++] = (qev_t){true, wm}; }
static void q_status(sl_op_output_t *o, bool idle) {}

static int q_invoke(void *c, const sl_record_t *in, sl_async_result_t *res) {
    qpend_id[nqpend] = sl_row_i64(&in->row, 0);
    qpend[nqpend++] = res;
    return 0;
}

TEST(queue_semantics_random) {
    sl_schema_t *sch = sl_schema_parse("id BIGINT NOT NULL", NULL, 0);
    for (int round = 0; round < 200; round++) {
        int mode = round % 2, cap = 1 + (int)(rnd() % 6); /* requests the test keeps open at most */
        sl_async_fn_t fn = {.invoke = q_invoke};
        /* the operator's capacity is never reached here (no task to wait in) */
        void *spec = sl_async_spec_new(fn, 1000, 1000000, mode);
        sl_op_init_t init = {.subtask = 0, .parallelism = 1, .max_parallelism = 128, .ninputs = 1,
                             .in_schema = {sch}, .out_schema = sch, .name = "q", .uid = "q"};
        sl_operator_t *op = sl_async_op_create(spec, &init);
        sl_op_output_t out = {q_record, q_watermark, q_status};
        op->out = &out;
        CHECK_EQ(op->vt->open(op), 0);
        nqout = nqpend = 0;
        qev_t in[512];
        int nin = 0, rows[512] = {0};
        int64_t next_id = 0, wm = 0;
        sl_row_writer_t w;
        sl_rw_init(&w);
        for (int step = 0; step < 300; step++) {
            uint64_t x = rnd() % 10;
            if (x < 4 && nqpend < cap && nin < 500) {
                sl_rw_begin(&w, sch);
                sl_rw_set_i64(&w, 0, next_id);
                sl_record_t rec = {sl_rw_row(&w), next_id};
                in[nin++] = (qev_t){false, next_id++};
                CHECK_EQ(op->vt->process(op, 0, &rec), 0);
            } else if (x < 6 && nin < 500) {
                wm += 1 + (int64_t)(rnd() % 3);
                in[nin++] = (qev_t){true, wm};
                CHECK_EQ(op->vt->advance_watermark(op, wm), 0);
            } else if (nqpend) { /* complete a random request, with 0 or 1 rows */
                int k = (int)(rnd() % (uint64_t)nqpend);
                sl_async_result_t *res = qpend[k];
                int64_t id = qpend_id[k];
                qpend[k] = qpend[nqpend - 1];
                qpend_id[k] = qpend_id[nqpend - 1];
                nqpend--;
                if (rnd() % 5) {
                    sl_row_writer_t *rw = sl_async_row(res);
                    sl_rw_set_i64(rw, 0, id);
                    sl_async_add(res);
                    rows[id] = 1;
                }
                sl_async_complete(res);
                CHECK_EQ(op->vt->on_processing_time(op, 0), 0);
            }
        }
        while (nqpend) { /* the rest */
            sl_async_result_t *res = qpend[--nqpend];
            sl_row_writer_t *rw = sl_async_row(res);
            sl_rw_set_i64(rw, 0, qpend_id[nqpend]);
            rows[qpend_id[nqpend]] = 1;
            sl_async_add(res);
            sl_async_complete(res);
        }
        CHECK_EQ(op->vt->end_input(op, 0), 0);
        op->vt->destroy(op);
        sl_async_spec_free(spec);
        sl_rw_free(&w);
        /* check the emitted sequence against the input */
        int64_t pos_of[512];
        for (int i = 0; i < nin; i++)
            if (!in[i].wm) pos_of[in[i].v] = i;
        int seen[512] = {0}, nrec = 0;
        int64_t last_wm = INT64_MIN, last_id = -1;
        for (int i = 0; i < nqout; i++) {
            if (!qout[i].wm) {
                int64_t id = qout[i].v;
                CHECK(id >= 0 && id < next_id && rows[id] && !seen[id]);
                seen[id] = 1;
                nrec++;
                if (mode == SL_ASYNC_ORDERED) CHECK(id > last_id);
                last_id = id;
                continue;
            }
            CHECK(qout[i].v > last_wm);
            last_wm = qout[i].v;
            int q = -1; /* its input position */
            for (int k = 0; k < nin; k++)
                if (in[k].wm && in[k].v == qout[i].v) q = k;
            CHECK(q >= 0);
            for (int64_t id = 0; id < next_id; id++) {
                if (!rows[id]) continue;
                if (pos_of[id] < q) CHECK(seen[id]);  /* everything before it is out */
                if (pos_of[id] > q) CHECK(!seen[id]); /* nothing after it is */
            }
        }
        int want = 0;
        for (int64_t id = 0; id < next_id; id++) want += rows[id];
        CHECK_EQ(nrec, want);
        if (wm > 0) CHECK_EQ(last_wm, wm);
    }
    sl_schema_unref(sch);
}

int main(void) {
    for (int i = 0; i < 3; i++) pthread_create(&svc.th[i], NULL, svc_main, NULL);
    RUN(queue_semantics_random);
    RUN(builder_errors_named);
    RUN(timeout_without_callback_fails_by_name);
    RUN(completion_wakes_an_idle_task);
    RUN(ordered_rescale);
    RUN(unordered_rescale);
    RUN(random_cases);
    RUN(timeouts_and_resends_happened);
    pthread_mutex_lock(&svc.mu);
    svc.stop = true;
    pthread_cond_broadcast(&svc.cv);
    pthread_mutex_unlock(&svc.mu);
    for (int i = 0; i < 3; i++) pthread_join(svc.th[i], NULL);
    TEST_MAIN_END();
}
