/* test_checkpoint_barriers.c — checkpoint barriers through real jobs:
 * the coordinator triggers, sources inject barriers in order with their
 * records, tasks with several inputs align, every task acknowledges, and
 * checkpoints complete.  The property checked is the one exactly-once rests
 * on: for every checkpoint n, the records a downstream operator had seen
 * when it snapshotted n are exactly the records its sources had emitted
 * before their barrier n (aligned); at-least-once allows more, never less. */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "api/env_int.h"
#include "jobmanager/checkpoint_coordinator.h"
#include "checkpoint/metadata.h"
#include "checkpoint/storage.h"
#include "common/common.h"
#include "graph/stream_graph.h"
#include "operators/operator.h"
#include "pipeline_util.h"
#include "taskmanager/barrier_handler.h"
#include "taskmanager/channel.h"
#include "test.h"

#define MAX_CKPT 4096
#define NSPLITS 3 /* source a: 2 splits; source b: 1 split */

/* seen[id][split] summed over the checker's subtasks; pos[id][split] from the sources */
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static int64_t seen[MAX_CKPT][NSPLITS];
static int seen_by[MAX_CKPT];
static int64_t pos[MAX_CKPT][NSPLITS];
static int pos_by[MAX_CKPT];
static int completed_notes;
static atomic_bool g_order_ok;

/* ---- a source whose rows are (split, seq); split ids are global ---- */
typedef struct seq_src {
    int first_split; /* global id of its split 0 */
    int64_t n;       /* records per split */
    int per_poll;
    long sleep_ns;
} seq_src_t;

typedef struct seq_reader {
    seq_src_t *s;
    int split;       /* global split id (one split per subtask) */
    int64_t next;
} seq_reader_t;

static int seq_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    seq_reader_t *r = calloc(1, sizeof *r);
    r->s = ctx;
    r->split = r->s->first_split + subtask;
    *reader = r;
    *nsplits = 1;
    return 0;
}

static int seq_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    seq_reader_t *r = reader;
    for (int i = 0; i < r->s->per_poll && i < max; i++) {
        if (r->next >= r->s->n) {
            sl_src_split_finished(out, 0);
            return SL_SRC_END;
        }
        sl_row_writer_t *w = sl_src_row(out);
        sl_rw_set_i64(w, 0, r->split);
        sl_rw_set_i64(w, 1, r->next++);
        sl_src_emit(out, 0, SL_NO_TIMESTAMP);
    }
    if (r->s->sleep_ns) {
        struct timespec ts = {0, r->s->sleep_ns};
        nanosleep(&ts, NULL);
    }
    return SL_SRC_MORE;
}

static int seq_snapshot(void *reader, int64_t id, void (*put)(void *, const void *, size_t), void *pc) {
    seq_reader_t *r = reader;
    put(pc, &r->next, sizeof r->next); /* its position is its operator state */
    if (id < MAX_CKPT) {
        pthread_mutex_lock(&mu);
        pos[id][r->split] = r->next;
        pos_by[id]++;
        pthread_mutex_unlock(&mu);
    }
    return 0;
}

static void seq_destroy_reader(void *r) { free(r); }
static void seq_destroy(void *c) { free(c); }

static const sl_source_ops_t seq_ops = {.name = "seq",
                                        .create_reader = seq_create,
                                        .poll = seq_poll,
                                        .destroy_reader = seq_destroy_reader,
                                        .destroy = seq_destroy,
                                        .snapshot = seq_snapshot};

static sl_source_t seq_source(int first_split, int64_t n, int per_poll, long sleep_ns) {
    seq_src_t *s = calloc(1, sizeof *s);
    s->first_split = first_split;
    s->n = n;
    s->per_poll = per_poll;
    s->sleep_ns = sleep_ns;
    sl_source_t src = {&seq_ops, s, sl_schema_parse("split BIGINT NOT NULL, seq BIGINT NOT NULL", NULL, 0)};
    return src;
}

/* ---- the checker: counts per split, records them at each snapshot ---- */
typedef struct checker {
    sl_operator_t base;
    int64_t count[NSPLITS];
    int64_t last[NSPLITS];
} checker_t;

static int ck_process(sl_operator_t *o, int input, const sl_record_t *rec) {
    checker_t *c = (checker_t *)o;
    int64_t sp = sl_row_i64(&rec->row, 0), seq = sl_row_i64(&rec->row, 1);
    if (sp < 0 || sp >= NSPLITS) return sl_op_fail(o, SL_EINVAL, "bad split");
    /* per producer order is kept (forward from one source subtask) */
    if (seq <= c->last[sp]) atomic_store(&g_order_ok, false);
    c->last[sp] = seq;
    c->count[sp]++;
    return 0;
}

static int ck_snapshot(sl_operator_t *o, int64_t id, sl_buf_t *out) {
    checker_t *c = (checker_t *)o;
    if (id < MAX_CKPT) {
        pthread_mutex_lock(&mu);
        for (int i = 0; i < NSPLITS; i++) seen[id][i] += c->count[i];
        seen_by[id]++;
        pthread_mutex_unlock(&mu);
    }
    return 0;
}

static int ck_complete(sl_operator_t *o, int64_t id) {
    pthread_mutex_lock(&mu);
    completed_notes++;
    pthread_mutex_unlock(&mu);
    return 0;
}

static void ck_destroy(sl_operator_t *o) {
    sl_op_base_free(o);
    free(o);
}

static const sl_operator_vt_t checker_vt = {.kind = "Checker",
                                            .process = ck_process,
                                            .destroy = ck_destroy,
                                            .snapshot_state = ck_snapshot,
                                            .notify_checkpoint_complete = ck_complete};

static sl_operator_t *ck_create(const void *spec, const sl_op_init_t *init) {
    checker_t *c = calloc(1, sizeof *c);
    sl_op_base_init(&c->base, &checker_vt, init);
    for (int i = 0; i < NSPLITS; i++) c->last[i] = -1;
    return &c->base;
}

static void reset(void) {
    memset(seen, 0, sizeof seen);
    memset(seen_by, 0, sizeof seen_by);
    memset(pos, 0, sizeof pos);
    memset(pos_by, 0, sizeof pos_by);
    completed_notes = 0;
    atomic_store(&g_order_ok, true);
}

/* Runs a: 2 subtasks (fast), b: 1 subtask (slow) -> union -> rebalance ->
 * checker (p checkers); returns the number of verified checkpoints. */
static int run_job(sl_checkpoint_mode_t mode, int p, int *exact, int *more, int64_t *completed) {
    reset();
    sl_env_t *env = sl_env_new();
    sl_env_enable_checkpointing(env, 15, mode);
    sl_env_set_buffer_size(env, 1024); /* small buffers: alignment meets backpressure */
    sl_stream_t *a = sl_parallelism(sl_from_source(env, seq_source(0, 150000, 64, 20000), sl_wm_none(), "a"), 2);
    sl_stream_t *b = sl_parallelism(sl_from_source(env, seq_source(2, 40000, 16, 50000), sl_wm_none(), "b"), 1);
    sl_stream_t *u = sl_rebalance(sl_union(a, b));
    sl_stream_t *ck = sl_graph_add_operator(u, NULL, false, "checker", ck_create, NULL, NULL, NULL);
    sl_parallelism(ck, p);
    int rc = sl_env_execute(env, "barriers");
    if (rc != 0) fprintf(stderr, "  job failed: %s\n", sl_env_error(env));
    *completed = sl_env_checkpoints_completed(env);
    sl_env_destroy(env);
    if (rc != 0) return -1;
    int verified = 0;
    *exact = *more = 0;
    for (int id = 1; id < MAX_CKPT; id++) {
        if (pos_by[id] != 3 || seen_by[id] != p) continue; /* every source and checker snapshotted it */
        verified++;
        bool eq = true;
        for (int s = 0; s < NSPLITS; s++) {
            if (seen[id][s] < pos[id][s]) {
                fprintf(stderr, "  checkpoint %d split %d: checkers saw %lld < %lld emitted before the barrier\n", id, s,
                        (long long)seen[id][s], (long long)pos[id][s]);
                return -2;
            }
            if (seen[id][s] != pos[id][s]) eq = false;
        }
        if (eq)
            (*exact)++;
        else
            (*more)++;
    }
    return verified;
}

TEST(aligned_exactly_once) {
    for (int p = 1; p <= 3; p += 2) {
        int exact, more;
        int64_t completed;
        int v = run_job(SL_CHECKPOINT_EXACTLY_ONCE, p, &exact, &more, &completed);
        fprintf(stderr, "  p=%d: %d checkpoints verified (%lld completed), %d exact, %d with post-barrier records\n", p,
                v, (long long)completed, exact, more);
        CHECK(v >= 3);
        CHECK_EQ(more, 0); /* aligned: never a record from after the barrier */
        CHECK_EQ(exact, v);
        CHECK(completed >= v);
        CHECK(completed_notes > 0); /* notify_checkpoint_complete reached the operator */
        CHECK(atomic_load(&g_order_ok)); /* each producer's order kept */
    }
}

TEST(at_least_once_never_misses) {
    int exact, more;
    int64_t completed;
    int v = run_job(SL_CHECKPOINT_AT_LEAST_ONCE, 2, &exact, &more, &completed);
    fprintf(stderr, "  %d checkpoints verified, %d exact, %d with post-barrier records\n", v, exact, more);
    CHECK(v >= 3); /* never fewer records than before the barrier (checked inside) */
}

/* Checkpoints are written: _metadata of the latest holds each source
 * subtask's position at its barrier; older ones beyond the retained number
 * are gone. */
TEST(persisted_to_storage) {
    reset();
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/ckpts", sl_test_tmpdir());
    sl_env_t *env = sl_env_new();
    sl_env_enable_checkpointing(env, 15, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, dir);
    sl_env_set_checkpoints_retained(env, 100);
    sl_env_set_checkpoint_retention(env, SL_CHECKPOINTS_RETAIN_ON_CANCELLATION); /* inspected after the end */
    sl_stream_t *a = sl_parallelism(sl_from_source(env, seq_source(0, 100000, 64, 60000), sl_wm_none(), "a"), 2);
    sl_uid(a, "source-a");
    sl_stream_t *ck = sl_graph_add_operator(sl_rebalance(a), NULL, false, "checker", ck_create, NULL, NULL, NULL);
    sl_uid(sl_parallelism(ck, 2), "checker");
    CHECK_EQ(sl_env_execute(env, "persist-test"), 0);
    int64_t completed = sl_env_checkpoints_completed(env);
    sl_env_destroy(env);
    CHECK(completed >= 3);
    sl_ckpt_storage_t *st;
    char err[512];
    CHECK_EQ(sl_ckpt_storage_fs_open(dir, "persist-test", &st, err, sizeof err), 0);
    int64_t *ids = NULL;
    int n = 0;
    CHECK_EQ(sl_ckpt_storage_list_completed(st, &ids, &n, err, sizeof err), 0);
    CHECK_EQ(n, completed < 100 ? completed : 100); /* all retained */
    sl_ckpt_metadata_t *md = NULL;
    CHECK_EQ(sl_ckpt_storage_load_latest(st, &md, err, sizeof err), 0);
    CHECK_EQ(md->checkpoint_id, ids[n - 1]);
    CHECK(sl_ckpt_metadata_find_operator(md, "checker") != NULL);
    sl_ckpt_metadata_free(md);
    int compared = 0;
    for (int k = 0; k < n; k++) {
        int64_t id = ids[k];
        CHECK_EQ(st->ops->load(st, id, &md, err, sizeof err), 0);
        const sl_ckpt_operator_t *op = sl_ckpt_metadata_find_operator(md, "source-a");
        CHECK(op != NULL);
        CHECK_EQ(op->parallelism, 2);
        for (int sub = 0; sub < 2 && id < MAX_CKPT && pos_by[id] == 2; sub++) {
            const sl_ckpt_blob_t *b =
                sl_ckpt_find_blob(op->subtasks[sub].blobs, op->subtasks[sub].nblobs, "operator-state");
            CHECK(b != NULL);
            CHECK_EQ(b->len, 8);
            int64_t p;
            memcpy(&p, b->data, 8);
            CHECK_EQ(p, pos[id][sub]); /* the position at the barrier, durably */
            compared++;
        }
        sl_ckpt_metadata_free(md);
    }
    fprintf(stderr, "  %lld completed, %d retained, %d source positions compared\n", (long long)completed, n, compared);
    CHECK(compared >= 2);
    free(ids);
    st->ops->destroy(st);
}

/* ---- the barrier handler alone ---- */

TEST(handler_aligned) {
    sl_barrier_handler_t h;
    sl_bh_init(&h, 3, SL_CKPT_EXACTLY_ONCE);
    int64_t ab;
    CHECK_EQ(sl_bh_barrier(&h, 0, 1, &ab), SL_BH_NONE);
    CHECK(sl_bh_blocked(&h, 0));
    CHECK(!sl_bh_blocked(&h, 1));
    CHECK_EQ(sl_bh_barrier(&h, 2, 1, &ab), SL_BH_NONE);
    CHECK_EQ(sl_bh_barrier(&h, 1, 1, &ab), SL_BH_TRIGGER);
    sl_bh_release(&h);
    CHECK(!sl_bh_blocked(&h, 0));
    /* an ended channel counts as arrived */
    CHECK_EQ(sl_bh_barrier(&h, 0, 2, &ab), SL_BH_NONE);
    CHECK_EQ(sl_bh_end(&h, 1), SL_BH_NONE);
    CHECK_EQ(sl_bh_barrier(&h, 2, 2, &ab), SL_BH_TRIGGER);
    sl_bh_release(&h);
    /* a newer barrier aborts the older alignment */
    CHECK_EQ(sl_bh_barrier(&h, 0, 3, &ab), SL_BH_NONE);
    CHECK_EQ(sl_bh_barrier(&h, 2, 4, &ab), SL_BH_NONE);
    CHECK_EQ(ab, 3);
    CHECK(!sl_bh_blocked(&h, 0)); /* released from 3; not yet seen 4 */
    CHECK(sl_bh_blocked(&h, 2));
    CHECK_EQ(sl_bh_barrier(&h, 0, 3, &ab), SL_BH_NONE); /* stale */
    CHECK(!sl_bh_blocked(&h, 0));
    CHECK_EQ(sl_bh_barrier(&h, 0, 4, &ab), SL_BH_TRIGGER);
    sl_bh_free(&h);
}

TEST(handler_at_least_once) {
    sl_barrier_handler_t h;
    sl_bh_init(&h, 2, SL_CKPT_AT_LEAST_ONCE);
    int64_t ab;
    CHECK_EQ(sl_bh_barrier(&h, 0, 1, &ab), SL_BH_NONE);
    CHECK(!sl_bh_blocked(&h, 0)); /* never blocks */
    CHECK_EQ(sl_bh_barrier(&h, 1, 1, &ab), SL_BH_TRIGGER);
    sl_bh_free(&h);
}

TEST(handler_unaligned) {
    sl_barrier_handler_t h;
    sl_bh_init(&h, 3, SL_CKPT_EXACTLY_ONCE);
    sl_bh_set_unaligned(&h, true, 0);
    int64_t ab;
    /* the first barrier snapshots at once; nothing is ever blocked */
    CHECK_EQ(sl_bh_barrier_ts(&h, 1, 1, sl_wall_ms(), &ab), SL_BH_TRIGGER_UNALIGNED);
    CHECK(!sl_bh_blocked(&h, 1));
    CHECK(!sl_bh_capturing(&h, 1)); /* its barrier came: later data is after the checkpoint */
    CHECK(sl_bh_capturing(&h, 0));
    CHECK(sl_bh_capturing(&h, 2));
    CHECK_EQ(sl_bh_barrier_ts(&h, 0, 1, sl_wall_ms(), &ab), SL_BH_NONE);
    CHECK(!sl_bh_capturing(&h, 0));
    CHECK(sl_bh_capturing(&h, 2));
    CHECK_EQ(sl_bh_end(&h, 2), SL_BH_UNALIGNED_DONE); /* an end counts as its barrier */
    sl_bh_release(&h);
    CHECK(!sl_bh_capturing(&h, 2));
    CHECK_EQ(h.unaligned_count, 1);
    /* a newer barrier while capturing gives the older up */
    CHECK_EQ(sl_bh_barrier_ts(&h, 0, 2, sl_wall_ms(), &ab), SL_BH_TRIGGER_UNALIGNED);
    CHECK_EQ(sl_bh_barrier_ts(&h, 1, 3, sl_wall_ms(), &ab), SL_BH_TRIGGER_UNALIGNED);
    CHECK_EQ(ab, 2);
    CHECK(sl_bh_capturing(&h, 0));
    CHECK_EQ(sl_bh_barrier_ts(&h, 0, 3, sl_wall_ms(), &ab), SL_BH_UNALIGNED_DONE); /* channel 2 ended */
    sl_bh_free(&h);

    /* aligned-checkpoint timeout: aligned first, unaligned once too old */
    sl_bh_init(&h, 2, SL_CKPT_EXACTLY_ONCE);
    sl_bh_set_unaligned(&h, true, 1000);
    int64_t now = sl_wall_ms();
    CHECK_EQ(sl_bh_barrier_ts(&h, 0, 1, now, &ab), SL_BH_NONE);
    CHECK(sl_bh_blocked(&h, 0));
    CHECK_EQ(sl_bh_timeout(&h, now + 999), SL_BH_NONE);
    CHECK_EQ(sl_bh_timeout(&h, now + 1000), SL_BH_TRIGGER_UNALIGNED);
    CHECK(!sl_bh_blocked(&h, 0)); /* released: its data is after the snapshot */
    CHECK(sl_bh_capturing(&h, 1));
    CHECK_EQ(sl_bh_barrier_ts(&h, 1, 1, now, &ab), SL_BH_UNALIGNED_DONE);
    sl_bh_release(&h);
    /* in time: stays aligned */
    now = sl_wall_ms();
    CHECK_EQ(sl_bh_barrier_ts(&h, 1, 2, now, &ab), SL_BH_NONE);
    CHECK_EQ(sl_bh_barrier_ts(&h, 0, 2, now, &ab), SL_BH_TRIGGER);
    /* a barrier that arrives already too old switches at once */
    sl_bh_release(&h);
    CHECK_EQ(sl_bh_barrier_ts(&h, 1, 3, now - 5000, &ab), SL_BH_TRIGGER_UNALIGNED);
    sl_bh_free(&h);

    /* at-least-once ignores the unaligned setting (as Flink) */
    sl_bh_init(&h, 2, SL_CKPT_AT_LEAST_ONCE);
    sl_bh_set_unaligned(&h, true, 0);
    CHECK_EQ(sl_bh_barrier_ts(&h, 0, 1, sl_wall_ms(), &ab), SL_BH_NONE);
    CHECK_EQ(sl_bh_barrier_ts(&h, 1, 1, sl_wall_ms(), &ab), SL_BH_TRIGGER);
    sl_bh_free(&h);
}

/* A priority event overtakes the queued buffers, stays behind earlier
 * priority events, captures what it overtook, and needs no credit. */
TEST(channel_priority_event) {
    sl_waker_t wk;
    sl_waker_init(&wk);
    sl_channel_t *ch = sl_channel_new(2, 64, &wk);
    for (int i = 0; i < 2; i++) { /* both credits in flight: a normal send would block now */
        sl_nbuf_t *b = sl_channel_acquire(ch, 8);
        memset(b->data, 'a' + i, 8);
        b->len = 8;
        sl_channel_send(ch, b);
    }
    sl_buf_t cap = {0};
    sl_channel_send_priority(ch, "B1", 2, &cap);
    CHECK_EQ(cap.len, 16);
    CHECK(memcmp(cap.p, "aaaaaaaabbbbbbbb", 16) == 0);
    sl_channel_send_priority(ch, "B2", 2, NULL);
    sl_nbuf_t *b = sl_channel_poll(ch);
    CHECK(b && b->priority && b->len == 2 && memcmp(b->data, "B1", 2) == 0);
    sl_channel_recycle(ch, b);
    b = sl_channel_poll(ch);
    CHECK(b && b->priority && memcmp(b->data, "B2", 2) == 0);
    sl_channel_recycle(ch, b);
    b = sl_channel_poll(ch);
    CHECK(b && !b->priority && b->data[0] == 'a');
    sl_channel_recycle(ch, b);
    CHECK_EQ(sl_channel_in_flight(ch), 1);
    b = sl_channel_poll(ch);
    CHECK(b && b->data[0] == 'b');
    sl_channel_recycle(ch, b);
    CHECK(sl_channel_poll(ch) == NULL);
    sl_buf_free(&cap);
    sl_channel_destroy(ch);
    sl_waker_destroy(&wk);
}

/* ---- the coordinator alone: timeout and tolerable failures ---- */

static int64_t triggered, done, aborted_n;
static char fail_msg[512];
static atomic_int failed_flag;
static void h_trigger(void *c, int64_t id, int64_t ts, int kind) { triggered++; }
static void h_complete(void *c, int64_t id, int kind) { done++; }
static void h_aborted(void *c, int64_t id, const char *why) { aborted_n++; }
static void h_fail(void *c, const char *why) {
    snprintf(fail_msg, sizeof fail_msg, "%s", why);
    atomic_store(&failed_flag, 1);
}

TEST(coordinator_acks_and_timeouts) {
    sl_ckpt_config_t cfg;
    sl_ckpt_config_defaults(&cfg);
    cfg.timeout_ms = 30;
    cfg.tolerable_failed = 1;
    sl_coordinator_hooks_t hk = {NULL, h_trigger, h_complete, h_aborted, h_fail, NULL, NULL};
    sl_coordinator_t *c = sl_coordinator_new(&cfg, 2, hk);
    int64_t id = sl_coordinator_trigger(c);
    CHECK_EQ(id, 1);
    CHECK_EQ(sl_coordinator_trigger(c), -1); /* max concurrent 1 */
    sl_coordinator_ack(c, id, 0);
    CHECK_EQ(done, 0);
    sl_coordinator_ack(c, id, 1);
    CHECK_EQ(done, 1);
    int64_t latest;
    CHECK_EQ(sl_coordinator_completed(c, &latest), 1);
    CHECK_EQ(latest, 1);
    /* a finished task acknowledges implicitly */
    sl_coordinator_task_finished(c, 1);
    id = sl_coordinator_trigger(c);
    sl_coordinator_ack(c, id, 0);
    CHECK_EQ(done, 2);
    /* timeouts: needs the timer thread (interval set) */
    sl_coordinator_destroy(c);
    cfg.interval_ms = 10;
    c = sl_coordinator_new(&cfg, 1, hk); /* nobody acknowledges */
    sl_coordinator_start(c);
    for (int i = 0; i < 200 && !atomic_load(&failed_flag); i++) {
        struct timespec ts = {0, 5000000};
        nanosleep(&ts, NULL);
    }
    sl_coordinator_destroy(c);
    CHECK(aborted_n >= 2);
    CHECK_CONTAINS(fail_msg, "expired");
    CHECK_CONTAINS(fail_msg, "tolerable failed checkpoints (1)");
}

int main(void) {
    RUN(handler_aligned);
    RUN(handler_at_least_once);
    RUN(handler_unaligned);
    RUN(channel_priority_event);
    RUN(coordinator_acks_and_timeouts);
    RUN(aligned_exactly_once);
    RUN(at_least_once_never_misses);
    RUN(persisted_to_storage);
    TEST_MAIN_END();
}
