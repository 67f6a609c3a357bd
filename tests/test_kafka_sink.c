/* test_kafka_sink.c — the Kafka sink against a real broker, in real jobs
 * with checkpoints: at-least-once delivers everything; exactly-once shows a
 * read_committed consumer every record once and nothing before a
 * checkpoint that covers it completed; lingering transactions of an earlier
 * run are aborted at start; a fenced producer fails the job loudly; bad
 * transaction timeouts are refused with a clear message; the sink's
 * subtasks of one run in two processes never fence each other. */
#include <pthread.h>
#include <stdatomic.h>

#include "pipeline_util.h"
#include "sluice/kafka.h"
#include "test.h"
#include "test_kafka_util.h"

/* JSON {"id": N, "ts": M} -> id (and ts); -1 when it does not parse. */
static int64_t parse_id(const char *v, int64_t *ts) {
    long long id = -1, t = -1;
    if (sscanf(v, "{\"id\": %lld, \"ts\": %lld}", &id, &t) != 2 && sscanf(v, "{\"id\":%lld,\"ts\":%lld}", &id, &t) != 2)
        return -1;
    if (ts) *ts = t;
    return id;
}

/* ids 0..n-1 each exactly once in recs (prints what is wrong). */
static bool exactly_once(const kt_recs_t *rs, int64_t n) {
    char *seen = calloc((size_t)n, 1);
    int64_t dup = 0, bad = 0, missing = 0;
    for (int64_t i = 0; i < rs->n; i++) {
        int64_t id = parse_id(rs->r[i].value, NULL);
        if (id < 0 || id >= n) bad++;
        else if (seen[id]++) dup++;
    }
    for (int64_t i = 0; i < n; i++) missing += !seen[i];
    free(seen);
    if (dup || bad || missing)
        fprintf(stderr, "  %lld records: %lld duplicates, %lld missing, %lld malformed\n", (long long)rs->n,
                (long long)dup, (long long)missing, (long long)bad);
    return !dup && !bad && !missing;
}

/* map: stamps each record with the wall-clock time it passed (ts field),
 * slowly enough that the job spans many checkpoints */
static int stamp(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    int64_t id = sl_row_i64(&in->row, 0);
    int every = ctx ? *(int *)ctx : 0;
    if (every && id % every == 0) kt_sleep_ms(1);
    sl_rw_set_i64(out, 0, id);
    sl_rw_set_i64(out, 1, sl_wall_ms());
    return 0;
}

static sl_kafka_sink_opts_t sink_opts(const char *topic, sl_delivery_t d, const char *prefix, int64_t interval) {
    sl_kafka_sink_opts_t o = sl_kafka_sink_defaults();
    o.bootstrap_servers = kt_bootstrap();
    o.topic = topic;
    o.delivery = d;
    o.transactional_id_prefix = prefix;
    o.checkpoint_interval_ms = interval;
    o.key_field = "id";
    return o;
}

static sl_env_t *job(const char *topic, sl_delivery_t d, const char *prefix, int64_t n, int64_t interval, int *every) {
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 2);
    sl_env_enable_checkpointing(env, interval, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_restart_fixed_delay(env, 0, 0);
    sl_stream_t *s = sl_from_source(env, counter_source(n, 2), sl_wm_none(), "numbers");
    s = sl_map(s, stamp, every, sl_schema_parse("id BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0));
    sl_kafka_sink_opts_t o = sink_opts(topic, d, prefix, interval);
    sl_uid(sl_sink_to(sl_rebalance(s), sl_kafka_sink(&o), "kafka-out"), "kafka-out");
    return env;
}

TEST(at_least_once_delivers_everything) {
    const char *topic = kt_name("sink-alo");
    CHECK_EQ(kt_create_topic(topic, 3), 0);
    const int64_t N = 50000;
    sl_env_t *env = job(topic, SL_DELIVERY_AT_LEAST_ONCE, NULL, N, 50, NULL);
    int rc = sl_env_execute(env, "alo");
    CHECK_STR(sl_env_error(env), "");
    CHECK_EQ(rc, 0);
    fprintf(stderr, "  %lld checkpoints\n", (long long)sl_env_checkpoints_completed(env));
    sl_env_destroy(env);
    kt_recs_t rs = {0};
    CHECK_EQ(kt_read_all(topic, false, 30000, &rs), 0);
    CHECK(exactly_once(&rs, N)); /* no failure: at-least-once delivers each once */
    /* keyed by id: Java's partitioner (murmur2) puts equal keys together */
    for (int64_t i = 0; i < rs.n; i++) CHECK(rs.r[i].key && parse_id(rs.r[i].value, NULL) == atoll(rs.r[i].key));
    kt_recs_free(&rs);
}

/* ---- exactly-once visibility ---- */

typedef struct runner {
    sl_env_t *env;
    int rc;
    atomic_int done;
} runner_t;
static void *run_job(void *arg) {
    runner_t *r = arg;
    r->rc = sl_env_execute(r->env, "kafka-sink-job");
    atomic_store(&r->done, 1);
    return NULL;
}



typedef struct watch {
    const char *topic;
    int64_t n;
    int64_t *first_seen; /* wall ms a read_committed consumer first saw id */
    atomic_int stop;
    int64_t dups;
} watch_t;

static void *watcher(void *arg) {
    watch_t *w = arg;
    char err[512];
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    rd_kafka_conf_set(c, "bootstrap.servers", kt_bootstrap(), err, sizeof err);
    rd_kafka_conf_set(c, "group.id", "sluice-test-watch", err, sizeof err);
    rd_kafka_conf_set(c, "isolation.level", "read_committed", err, sizeof err);
    rd_kafka_conf_set(c, "fetch.wait.max.ms", "10", err, sizeof err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof err);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(3);
    for (int p = 0; p < 3; p++) rd_kafka_topic_partition_list_add(l, w->topic, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    while (!atomic_load(&w->stop)) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 20);
        if (!m) continue;
        if (!m->err) {
            int64_t now = sl_wall_ms();
            char *v = kt_dup(m->payload, m->len);
            int64_t id = parse_id(v, NULL);
            free(v);
            if (id >= 0 && id < w->n) {
                if (w->first_seen[id]) w->dups++;
                else w->first_seen[id] = now;
            }
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return NULL;
}

/* A read_committed consumer watches while the job runs: a record written
 * (stamped) at time t becomes visible only after a checkpoint completed
 * after t — never before the checkpoint that covers it — and no record is
 * seen twice.  The job is cancelled (no end-of-input commit), so everything
 * visible was committed by a checkpoint. */
TEST(exactly_once_visible_only_after_checkpoint) {
    const char *topic = kt_name("sink-eo");
    CHECK_EQ(kt_create_topic(topic, 3), 0);
    const int64_t N = 10000000;
    int every = 20;
    sl_env_t *env = job(topic, SL_DELIVERY_EXACTLY_ONCE, kt_name("eo-vis"), N, 150, &every);
    watch_t w = {.topic = topic, .n = N, .first_seen = calloc((size_t)N, sizeof(int64_t))};
    pthread_t th, jt;
    pthread_create(&th, NULL, watcher, &w);
    runner_t run = {env, 0, 0};
    pthread_create(&jt, NULL, run_job, &run);
    kt_sleep_ms(3000);
    sl_env_cancel(env);
    pthread_join(jt, NULL);
    CHECK_EQ(run.rc, SL_ECANCELED);
    sl_checkpoint_stat_t st[64];
    int ns = sl_env_checkpoint_stats(env, st, 64);
    int64_t completed = sl_env_checkpoints_completed(env);
    int64_t emitted = 0;
    sl_env_operator_metrics(env, "kafka-out", &emitted, NULL);
    fprintf(stderr, "  %lld checkpoints completed, %lld records written\n", (long long)completed, (long long)emitted);
    CHECK(completed >= 3);
    CHECK(completed <= 64); /* all of them in the statistics */
    sl_env_destroy(env);
    kt_recs_t rs = {0};
    CHECK_EQ(kt_read_all(topic, true, 30000, &rs), 0);
    CHECK(rs.n > 0 && rs.n <= emitted);
    int64_t t0 = sl_now_ms(), seen = 0;
    while (sl_now_ms() - t0 < 20000) { /* the watcher catches up */
        seen = 0;
        for (int64_t i = 0; i < rs.n; i++) seen += w.first_seen[parse_id(rs.r[i].value, NULL)] != 0;
        if (seen == rs.n) break;
        kt_sleep_ms(50);
    }
    atomic_store(&w.stop, 1);
    pthread_join(th, NULL);
    CHECK_EQ(seen, rs.n);
    CHECK_EQ(w.dups, 0);
    /* completion times of the completed checkpoints, in order */
    int64_t done[64];
    int nd = 0;
    for (int i = 0; i < ns; i++)
        if (st[i].completed) done[nd++] = st[i].trigger_ms + st[i].duration_ms;
    int64_t early = 0, dup = 0;
    char *once = calloc((size_t)N, 1);
    for (int64_t i = 0; i < rs.n; i++) {
        int64_t ts = 0, id = parse_id(rs.r[i].value, &ts);
        CHECK(id >= 0);
        if (once[id]++) dup++;
        int64_t first_after = INT64_MAX;
        /* >=: times are in ms, and a checkpoint whose barrier followed the
         * record within the same millisecond can complete in it too */
        for (int k = 0; k < nd && first_after == INT64_MAX; k++)
            if (done[k] >= ts) first_after = done[k];
        if (w.first_seen[id] < first_after && early++ < 3) { /* what made it early, for the report */
            fprintf(stderr, "  record %lld stamped at %lld, seen at %lld; checkpoints completed at:", (long long)id,
                    (long long)ts, (long long)w.first_seen[id]);
            for (int k = 0; k < nd; k++) fprintf(stderr, " %lld", (long long)done[k]);
            fprintf(stderr, "\n");
        }
    }
    free(once);
    fprintf(stderr, "  %lld records committed, %lld seen before a checkpoint after them completed, %lld twice\n",
            (long long)rs.n, (long long)early, (long long)dup);
    CHECK_EQ(early, 0);
    CHECK_EQ(dup, 0);
    kt_recs_free(&rs);
    free(w.first_seen);
}

/* A transaction left open by an earlier run (same transactional.id) is
 * aborted when the job starts: read_committed readers are not held up and
 * never see its records. */
TEST(lingering_transaction_aborted_on_start) {
    const char *topic = kt_name("sink-linger");
    const char *prefix = kt_name("eo-linger");
    CHECK_EQ(kt_create_topic(topic, 3), 0);
    char id[256], err[512];
    snprintf(id, sizeof id, "%s-0", prefix);
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    rd_kafka_conf_set(c, "bootstrap.servers", kt_bootstrap(), err, sizeof err);
    rd_kafka_conf_set(c, "transactional.id", id, err, sizeof err);
    rd_kafka_conf_set(c, "transaction.timeout.ms", "600000", err, sizeof err);
    rd_kafka_t *zombie = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof err);
    CHECK(rd_kafka_init_transactions(zombie, 30000) == NULL);
    CHECK(rd_kafka_begin_transaction(zombie) == NULL);
    const char *ghost = "{\"id\": -5, \"ts\": 0}";
    for (int p = 0; p < 3; p++) CHECK_EQ(kt_send(zombie, topic, p, NULL, ghost, strlen(ghost), 0), 0);
    for (int i = 0; i < 300 && rd_kafka_outq_len(zombie) > 0; i++) rd_kafka_flush(zombie, 100);
    CHECK_EQ(rd_kafka_outq_len(zombie), 0); /* written, in the open transaction */
    /* the zombie's transaction stays open (10 min timeout): read_committed is stuck */
    kt_recs_t rs = {0};
    CHECK(kt_read_all(topic, true, 1500, &rs) != 0);
    kt_recs_free(&rs);
    const int64_t N = 5000;
    sl_env_t *env = job(topic, SL_DELIVERY_EXACTLY_ONCE, prefix, N, 100, NULL);
    int rc = sl_env_execute(env, "linger");
    CHECK_STR(sl_env_error(env), "");
    CHECK_EQ(rc, 0);
    sl_env_destroy(env);
    int64_t t0 = sl_now_ms();
    CHECK_EQ(kt_read_all(topic, true, 30000, &rs), 0);
    fprintf(stderr, "  read_committed drained in %lld ms\n", (long long)(sl_now_ms() - t0));
    CHECK(exactly_once(&rs, N)); /* the ghost records (id -5) are not there */
    kt_recs_free(&rs);
    rd_kafka_destroy(zombie);
}

/* Another producer takes over the sink's transactional.id while the job
 * runs: the job fails, saying it was fenced. */
TEST(fenced_producer_fails_the_job) {
    const char *topic = kt_name("sink-fence");
    const char *prefix = kt_name("eo-fence");
    CHECK_EQ(kt_create_topic(topic, 3), 0);
    int every = 5; /* slow: the job runs for a while */
    sl_env_t *env = job(topic, SL_DELIVERY_EXACTLY_ONCE, prefix, 1000000, 100, &every);
    runner_t run = {env, 0, 0};
    pthread_t th;
    pthread_create(&th, NULL, run_job, &run);
    /* wait for the first committed records */
    int64_t t0 = sl_now_ms();
    kt_recs_t rs = {0};
    while (sl_now_ms() - t0 < 30000 && rs.n == 0 && !atomic_load(&run.done)) {
        kt_sleep_ms(200);
        kt_recs_free(&rs);
        kt_read_all(topic, true, 5000, &rs);
    }
    CHECK(rs.n > 0);
    kt_recs_free(&rs);
    char id[256], err[512];
    snprintf(id, sizeof id, "%s-0", prefix);
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    rd_kafka_conf_set(c, "bootstrap.servers", kt_bootstrap(), err, sizeof err);
    rd_kafka_conf_set(c, "transactional.id", id, err, sizeof err);
    rd_kafka_t *usurper = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof err);
    CHECK(rd_kafka_init_transactions(usurper, 30000) == NULL);
    t0 = sl_now_ms();
    while (sl_now_ms() - t0 < 30000 && !atomic_load(&run.done)) kt_sleep_ms(20);
    if (!atomic_load(&run.done)) sl_env_cancel(env);
    pthread_join(th, NULL);
    fprintf(stderr, "  %s\n", sl_env_error(env));
    CHECK(run.rc != 0 && run.rc != SL_ECANCELED);
    CHECK_CONTAINS(sl_env_error(env), "fenced");
    CHECK_CONTAINS(sl_env_error(env), id);
    sl_env_destroy(env);
    rd_kafka_destroy(usurper);
}

/* The sink's subtasks of one run in two TaskManagers: each process has its
 * own sink instance, runs recover and opens its own writers — the second
 * one while the first one's writer already commits.  Nothing the second
 * process does may fence the first one's live writer (the contract of
 * sl_sink_ops_t.recover); an earlier run's writers (ids -0 and -1, with
 * commit markers) and an id of a subtask that no longer exists (-2, with
 * a transaction left open) are settled, and every record is committed
 * exactly once. */
static int w_put(const sl_sink_t *s, void *w, const sl_schema_t *sch, int64_t id, char *err, size_t el) {
    sl_row_writer_t rw;
    sl_rw_init(&rw);
    sl_rw_begin(&rw, sch);
    sl_rw_set_i64(&rw, 0, id);
    sl_rw_set_i64(&rw, 1, 0);
    sl_record_t rec = {sl_rw_row(&rw), SL_NO_TIMESTAMP};
    int rc = s->ops->write(w, &rec, err, el);
    sl_rw_free(&rw);
    return rc;
}
static int w_checkpoint(const sl_sink_t *s, void *w, int64_t ck, char *err, size_t el) {
    int rc = s->ops->pre_commit(w, ck, err, el);
    return rc ? rc : s->ops->commit(w, ck, err, el);
}

TEST(two_processes_do_not_fence_each_other) {
    const char *topic = kt_name("sink-two-tms");
    const char *prefix = kt_name("eo-two-tms");
    CHECK_EQ(kt_create_topic(topic, 2), 0);
    sl_kafka_sink_opts_t o = sink_opts(topic, SL_DELIVERY_EXACTLY_ONCE, prefix, 100);
    sl_schema_t *sch = sl_schema_parse("id BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0);
    char err[1024] = "";
    int64_t next = 0;
    /* an earlier run at parallelism 3: its writers committed checkpoint 1;
     * writer 2 then opened a transaction that a crash left open */
    sl_sink_t old = sl_kafka_sink(&o);
    CHECK_EQ(old.ops->recover(old.ctx, 0, err, sizeof err), 0);
    void *ow[3];
    for (int i = 0; i < 3; i++) CHECK_EQ(old.ops->open(old.ctx, i, 3, sch, &ow[i], err, sizeof err), 0);
    for (int i = 0; i < 3; i++) CHECK_EQ(w_put(&old, ow[i], sch, next++, err, sizeof err), 0);
    for (int i = 0; i < 3; i++) CHECK_EQ(w_checkpoint(&old, ow[i], 1, err, sizeof err), 0);
    char zid[300];
    snprintf(zid, sizeof zid, "%s-2", prefix);
    rd_kafka_conf_t *zc = rd_kafka_conf_new();
    rd_kafka_conf_set(zc, "bootstrap.servers", kt_bootstrap(), err, sizeof err);
    rd_kafka_conf_set(zc, "transactional.id", zid, err, sizeof err);
    rd_kafka_conf_set(zc, "transaction.timeout.ms", "600000", err, sizeof err);
    rd_kafka_t *zombie = rd_kafka_new(RD_KAFKA_PRODUCER, zc, err, sizeof err);
    CHECK(rd_kafka_init_transactions(zombie, 30000) == NULL); /* fences old writer 2 */
    CHECK(rd_kafka_begin_transaction(zombie) == NULL);
    const char *ghost = "{\"id\": -7, \"ts\": 0}";
    CHECK_EQ(kt_send(zombie, topic, 0, NULL, ghost, strlen(ghost), 0), 0);
    for (int i = 0; i < 300 && rd_kafka_outq_len(zombie) > 0; i++) rd_kafka_flush(zombie, 100);
    for (int i = 0; i < 2; i++) old.ops->close(ow[i]);
    old.ops->close(ow[2]);
    old.ops->destroy(old.ctx);
    /* this run, at parallelism 2, restored from checkpoint 1: "TaskManager A"
     * runs subtask 0 and commits before "TaskManager B" deploys subtask 1 */
    sl_sink_t a = sl_kafka_sink(&o), b = sl_kafka_sink(&o);
    void *wa, *wb;
    CHECK_EQ(a.ops->recover(a.ctx, 1, err, sizeof err), 0);
    CHECK_EQ(a.ops->open(a.ctx, 0, 2, sch, &wa, err, sizeof err), 0);
    CHECK_EQ(a.ops->restore(wa, NULL, 0, err, sizeof err), 0);
    CHECK_EQ(w_put(&a, wa, sch, next++, err, sizeof err), 0);
    CHECK_EQ(w_checkpoint(&a, wa, 2, err, sizeof err), 0);
    CHECK_EQ(b.ops->recover(b.ctx, 1, err, sizeof err), 0);
    CHECK_EQ(b.ops->open(b.ctx, 1, 2, sch, &wb, err, sizeof err), 0);
    CHECK_EQ(b.ops->restore(wb, NULL, 0, err, sizeof err), 0);
    for (int ck = 3; ck < 6; ck++) { /* both go on; A's writer was not fenced */
        CHECK_EQ(w_put(&a, wa, sch, next++, err, sizeof err), 0);
        int rc = w_checkpoint(&a, wa, ck, err, sizeof err);
        if (rc) fprintf(stderr, "  A: %s\n", err);
        CHECK_EQ(rc, 0);
        CHECK_EQ(w_put(&b, wb, sch, next++, err, sizeof err), 0);
        CHECK_EQ(w_checkpoint(&b, wb, ck, err, sizeof err), 0);
    }
    a.ops->close(wa), b.ops->close(wb);
    a.ops->destroy(a.ctx), b.ops->destroy(b.ctx);
    kt_recs_t rs = {0};
    CHECK_EQ(kt_read_all(topic, true, 30000, &rs), 0); /* the zombie's open transaction was aborted */
    CHECK(exactly_once(&rs, next));
    kt_recs_free(&rs);
    rd_kafka_destroy(zombie);
    sl_schema_unref(sch);
}

/* transaction.timeout.ms below twice the checkpoint interval, or above the
 * broker's transaction.max.timeout.ms (900000, set by scripts/kafka.sh), is
 * refused before anything runs. */
TEST(transaction_timeout_checked) {
    const char *topic = kt_name("sink-timeout");
    CHECK_EQ(kt_create_topic(topic, 1), 0);
    struct {
        int64_t interval, timeout;
        const char *says;
    } cases[] = {{10000, 15000, "below twice the checkpoint interval"},
                 {1000, 1000000, "above the broker's transaction.max.timeout.ms 900000"},
                 {600000, 0, "below twice the checkpoint interval"}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sl_env_t *env = sl_env_new();
        sl_env_enable_checkpointing(env, cases[i].interval, SL_CHECKPOINT_EXACTLY_ONCE);
        sl_kafka_sink_opts_t o = sink_opts(topic, SL_DELIVERY_EXACTLY_ONCE, kt_name("eo-tmo"), cases[i].interval);
        o.transaction_timeout_ms = cases[i].timeout;
        sl_sink_to(sl_from_source(env, counter_source(10, 1), sl_wm_none(), "n"), sl_kafka_sink(&o), "out");
        int rc = sl_env_execute(env, "tmo");
        fprintf(stderr, "  %s\n", sl_env_error(env));
        CHECK(rc == SL_EINVAL);
        CHECK_CONTAINS(sl_env_error(env), cases[i].says);
        sl_env_destroy(env);
    }
    /* EXACTLY_ONCE without an interval or a prefix is refused by name */
    sl_env_t *env = sl_env_new();
    sl_kafka_sink_opts_t o = sink_opts(topic, SL_DELIVERY_EXACTLY_ONCE, NULL, 1000);
    sl_sink_to(sl_from_source(env, counter_source(10, 1), sl_wm_none(), "n"), sl_kafka_sink(&o), "out");
    CHECK(sl_env_execute(env, "tmo") == SL_EINVAL);
    CHECK_CONTAINS(sl_env_error(env), "transactional_id_prefix");
    sl_env_destroy(env);
}

int main(void) {
    kt_bootstrap();
    RUN(transaction_timeout_checked);
    RUN(at_least_once_delivers_everything);
    RUN(exactly_once_visible_only_after_checkpoint);
    RUN(lingering_transaction_aborted_on_start);
    RUN(fenced_producer_fails_the_job);
    RUN(two_processes_do_not_fence_each_other);
    TEST_MAIN_END();
}
