/* test_kafka_source.c — the Kafka source against a real broker: every record
 * of every partition exactly once, exact rewind on restore (also at another
 * parallelism), starting positions, per-partition watermarks with idle
 * partitions, partitions that advance together however their fetches
 * arrive, the poison-record policies, RAW records, and partitions added
 * while the job runs. */
#include <pthread.h>
#include <stdatomic.h>

#include "operators/source_op.h"
#include "pipeline_util.h"
#include "sluice/kafka.h"
#include "sluice/metrics.h"
#include "test.h"
#include "test_kafka_util.h"

static const char *ID_TS = "id BIGINT NOT NULL, ts BIGINT NOT NULL";

/* Produces n JSON records {"id": i, "ts": ts0 + i} to partition i % parts,
 * with the Kafka timestamp ts0 + i. */
static int fill(const char *topic, int parts, int64_t from, int64_t n, int64_t ts0) {
    rd_kafka_t *p = kt_producer();
    int rc = 0;
    for (int64_t i = from; i < from + n && !rc; i++) {
        char v[96];
        int l = snprintf(v, sizeof v, "{\"id\": %lld, \"ts\": %lld}", (long long)i, (long long)(ts0 + i));
        rc = kt_send(p, topic, (int)(i % parts), NULL, v, (size_t)l, ts0 + i);
    }
    if (!rc) rc = kt_flush(p);
    rd_kafka_destroy(p);
    return rc;
}

static sl_kafka_source_opts_t opts_for(const char *topic, sl_schema_t *schema) {
    sl_kafka_source_opts_t o = sl_kafka_source_defaults();
    o.bootstrap_servers = kt_bootstrap();
    o.topics = topic;
    o.schema = schema;
    o.bounded = true;
    return o;
}

/* Every record of 6 partitions read by 3 subtasks, each exactly once, with
 * the Kafka timestamp as the record's time. */
TEST(reads_every_partition_exactly_once) {
    const char *topic = kt_name("src-all");
    const int64_t N = 6000;
    CHECK_EQ(kt_create_topic(topic, 6), 0);
    CHECK_EQ(fill(topic, 6, 0, N, 1000000), 0);
    sl_schema_t *schema = sl_schema_parse(ID_TS, NULL, 0);
    sl_kafka_source_opts_t o = opts_for(topic, schema);
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 3);
    collected_t *c = collected_new();
    sl_stream_t *s = sl_from_source(env, sl_kafka_source(&o), sl_wm_bounded(NULL, 0), "kafka");
    sl_sink_to(s, collect_sink(c), "collect");
    int rc = sl_env_execute(env, "kafka-all");
    CHECK_STR(sl_env_error(env), "");
    CHECK_EQ(rc, 0);
    CHECK_EQ(c->n, N);
    char *seen = calloc((size_t)N, 1);
    for (int64_t i = 0; i < c->n; i++) {
        sl_row_t r = collected_row(c, i, schema);
        int64_t id = sl_row_i64(&r, 0);
        CHECK(id >= 0 && id < N && !seen[id]);
        seen[id] = 1;
        CHECK_EQ(c->ts[i], 1000000 + id); /* the Kafka record timestamp */
    }
    free(seen);
    collected_free(c);
    sl_env_destroy(env);
    sl_schema_unref(schema);
}

typedef struct got {
    int64_t n;
    int64_t *ids;
} got_t;

/* Polls a reader until it ends; appends the ids it emits. */
static int drain(const sl_source_t *src, void *reader, sl_schema_t *schema, got_t *g, int64_t limit) {
    sl_source_output_t *out = sl_src_output_test_new(schema);
    char err[512];
    int rc = 0, idle = 0;
    while (g->n < limit && idle < 2000) {
        sl_src_output_test_clear(out);
        rc = src->ops->poll(reader, out, (int)SL_MIN(64, limit - g->n), err, sizeof err);
        if (rc < 0) {
            fprintf(stderr, "poll: %s\n", err);
            break;
        }
        for (int64_t i = 0; i < sl_src_output_test_count(out); i++) {
            sl_record_t r = sl_src_output_test_get(out, i);
            g->ids = realloc(g->ids, (size_t)(g->n + 1) * sizeof *g->ids);
            g->ids[g->n++] = sl_row_i64(&r.row, 0);
        }
        if (rc == SL_SRC_END) break;
        if (rc == SL_SRC_IDLE) {
            idle++;
            kt_sleep_ms(2);
        } else {
            idle = 0;
        }
    }
    sl_src_output_test_free(out);
    return rc < 0 ? rc : 0;
}

static void put_buf(void *ctx, const void *p, size_t n) { sl_buf_append(ctx, p, n); }

/* Two readers (parallelism 2) read part of the topic and snapshot; three
 * new readers (parallelism 3) restore the union and read to the end:
 * together they emit every record exactly once — the restore rewinds to
 * exactly the snapshotted offsets. */
TEST(restore_rewinds_exactly_at_another_parallelism) {
    const char *topic = kt_name("src-restore");
    const int64_t N = 4000;
    CHECK_EQ(kt_create_topic(topic, 5), 0);
    CHECK_EQ(fill(topic, 5, 0, N, 0), 0);
    sl_schema_t *schema = sl_schema_parse(ID_TS, NULL, 0);
    sl_kafka_source_opts_t o = opts_for(topic, schema);
    sl_source_t src = sl_kafka_source(&o);
    char err[512];
    got_t before = {0}, after = {0};
    sl_buf_t uni = {0};
    for (int st = 0; st < 2; st++) {
        void *r;
        int ns;
        CHECK_EQ(src.ops->create_reader(src.ctx, st, 2, &r, &ns, err, sizeof err), 0);
        CHECK_EQ(drain(&src, r, schema, &before, before.n + 700 + 300 * st), 0);
        sl_buf_t snap = {0};
        CHECK_EQ(src.ops->snapshot(r, 1, put_buf, &snap), 0);
        uint32_t l = (uint32_t)snap.len;
        sl_buf_append(&uni, &l, 4);
        sl_buf_append(&uni, snap.p, snap.len);
        sl_buf_free(&snap);
        got_t extra = {0}; /* read past the snapshot: must be read again after the restore */
        CHECK_EQ(drain(&src, r, schema, &extra, 100), 0);
        free(extra.ids);
        src.ops->destroy_reader(r);
    }
    CHECK_EQ(before.n, 700 + 1000);
    for (int st = 0; st < 3; st++) {
        void *r;
        int ns;
        CHECK_EQ(src.ops->create_reader(src.ctx, st, 3, &r, &ns, err, sizeof err), 0);
        CHECK_EQ(src.ops->restore(r, uni.p, uni.len, err, sizeof err), 0);
        CHECK_EQ(drain(&src, r, schema, &after, N), 0);
        src.ops->destroy_reader(r);
    }
    CHECK_EQ(before.n + after.n, N);
    char *seen = calloc((size_t)N, 1);
    for (int64_t i = 0; i < before.n; i++) seen[before.ids[i]]++;
    for (int64_t i = 0; i < after.n; i++) seen[after.ids[i]]++;
    for (int64_t i = 0; i < N; i++) CHECK_EQ(seen[i], 1);
    free(seen);
    free(before.ids);
    free(after.ids);
    sl_buf_free(&uni);
    src.ops->destroy(src.ctx);
    sl_schema_unref(src.schema);
    sl_schema_unref(schema);
}

/* Partitions advance together: with everything already fetched (a large
 * max.partition.fetch.bytes, so one fetch holds a partition's whole log),
 * every poll takes an equal share from each partition, so no partition gets
 * more than one poll's worth ahead of another — whatever order librdkafka
 * queued the fetches in.  (Emitting in fetch order gives one partition's
 * whole log first.) */
TEST(partitions_advance_together) {
    const char *topic = kt_name("src-fair");
    enum { P = 4, PER = 1000, POLL = 64 };
    CHECK_EQ(kt_create_topic(topic, P), 0);
    CHECK_EQ(fill(topic, P, 0, (int64_t)P * PER, 0), 0);
    sl_schema_t *schema = sl_schema_parse(ID_TS, NULL, 0);
    sl_kafka_source_opts_t o = opts_for(topic, schema);
    const char *props[] = {"max.partition.fetch.bytes=4194304", NULL};
    o.properties = props;
    sl_source_t src = sl_kafka_source(&o);
    char err[512];
    void *r;
    int ns;
    CHECK_EQ(src.ops->create_reader(src.ctx, 0, 1, &r, &ns, err, sizeof err), 0);
    CHECK_EQ(ns, P);
    sl_source_output_t *out = sl_src_output_test_new(schema);
    int64_t per[P] = {0}, total = 0, worst = 0;
    int rc = src.ops->poll(r, out, 1, err, sizeof err); /* starts: assigns the partitions */
    CHECK(rc >= 0);
    for (int64_t i = 0; i < sl_src_output_test_count(out); i++) {
        sl_record_t rec = sl_src_output_test_get(out, i);
        per[sl_row_i64(&rec.row, 0) % P]++;
    }
    total = sl_src_output_test_count(out);
    kt_sleep_ms(1500); /* librdkafka fetches every partition's whole log meanwhile */
    for (int idle = 0; total < (int64_t)P * PER && idle < 5000 && rc >= 0;) {
        sl_src_output_test_clear(out);
        rc = src.ops->poll(r, out, POLL, err, sizeof err);
        CHECK(rc >= 0);
        int64_t n = sl_src_output_test_count(out);
        for (int64_t i = 0; i < n; i++) {
            sl_record_t rec = sl_src_output_test_get(out, i);
            per[sl_row_i64(&rec.row, 0) % P]++;
        }
        total += n;
        idle = n ? 0 : idle + 1;
        if (!n) kt_sleep_ms(1);
        int64_t lo = PER, hi = 0;
        for (int p = 0; p < P; p++) lo = SL_MIN(lo, per[p]), hi = SL_MAX(hi, per[p]);
        if (hi - lo > worst) worst = hi - lo;
        if (rc == SL_SRC_END) break;
    }
    fprintf(stderr, "  %lld records from %d partitions in polls of %d: at most %lld apart\n", (long long)total, P,
            POLL, (long long)worst);
    CHECK_EQ(total, (int64_t)P * PER);
    CHECK(worst <= POLL);
    sl_src_output_test_free(out);
    src.ops->destroy_reader(r);
    src.ops->destroy(src.ctx);
    sl_schema_unref(src.schema);
    sl_schema_unref(schema);
}

/* LATEST, TIMESTAMP and COMMITTED starting positions. */
TEST(starting_positions) {
    const char *topic = kt_name("src-start");
    CHECK_EQ(kt_create_topic(topic, 2), 0);
    CHECK_EQ(fill(topic, 2, 0, 100, 10000), 0); /* ids 0..99, timestamps 10000..10099 */
    sl_schema_t *schema = sl_schema_parse(ID_TS, NULL, 0);
    char err[512];
    /* TIMESTAMP 10050: ids 50..99 */
    sl_kafka_source_opts_t o = opts_for(topic, schema);
    o.start = SL_KAFKA_START_TIMESTAMP;
    o.start_timestamp_ms = 10050;
    sl_source_t src = sl_kafka_source(&o);
    void *r;
    int ns;
    got_t g = {0};
    CHECK_EQ(src.ops->create_reader(src.ctx, 0, 1, &r, &ns, err, sizeof err), 0);
    CHECK_EQ(drain(&src, r, schema, &g, 1000), 0);
    src.ops->destroy_reader(r);
    CHECK_EQ(g.n, 50);
    for (int64_t i = 0; i < g.n; i++) CHECK(g.ids[i] >= 50);
    g.n = 0;
    src.ops->destroy(src.ctx);
    sl_schema_unref(src.schema);
    /* LATEST (unbounded): nothing old; records produced after the start */
    o = opts_for(topic, schema);
    o.bounded = false;
    o.start = SL_KAFKA_START_LATEST;
    src = sl_kafka_source(&o);
    CHECK_EQ(src.ops->create_reader(src.ctx, 0, 1, &r, &ns, err, sizeof err), 0);
    CHECK_EQ(drain(&src, r, schema, &g, 1), 0); /* starts, sees nothing */
    CHECK_EQ(g.n, 0);
    CHECK_EQ(fill(topic, 2, 100, 10, 20000), 0);
    CHECK_EQ(drain(&src, r, schema, &g, 10), 0);
    src.ops->destroy_reader(r);
    CHECK_EQ(g.n, 10);
    for (int64_t i = 0; i < g.n; i++) CHECK(g.ids[i] >= 100);
    g.n = 0;
    src.ops->destroy(src.ctx);
    sl_schema_unref(src.schema);
    /* COMMITTED: the group's offsets, committed here by a plain consumer */
    const char *group = kt_name("grp");
    {
        rd_kafka_conf_t *c = rd_kafka_conf_new();
        rd_kafka_conf_set(c, "bootstrap.servers", kt_bootstrap(), err, sizeof err);
        rd_kafka_conf_set(c, "group.id", group, err, sizeof err);
        rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof err);
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(2);
        rd_kafka_topic_partition_list_add(l, topic, 0)->offset = 40; /* ids 80.. even */
        rd_kafka_topic_partition_list_add(l, topic, 1)->offset = 45; /* ids 91.. odd */
        CHECK_EQ(rd_kafka_commit(rk, l, 0), 0);
        rd_kafka_topic_partition_list_destroy(l);
        rd_kafka_destroy(rk);
    }
    o = opts_for(topic, schema);
    o.start = SL_KAFKA_START_COMMITTED;
    o.group_id = group;
    src = sl_kafka_source(&o);
    CHECK_EQ(src.ops->create_reader(src.ctx, 0, 1, &r, &ns, err, sizeof err), 0);
    CHECK_EQ(drain(&src, r, schema, &g, 1000), 0);
    src.ops->destroy_reader(r);
    int64_t want = 0;
    for (int64_t id = 0; id < 110; id++)
        if ((id % 2 == 0 && id / 2 >= 40) || (id % 2 == 1 && id / 2 >= 45)) want++;
    CHECK_EQ(g.n, want);
    for (int64_t i = 0; i < g.n; i++) CHECK(g.ids[i] % 2 == 0 ? g.ids[i] / 2 >= 40 : g.ids[i] / 2 >= 45);
    free(g.ids);
    src.ops->destroy(src.ctx);
    sl_schema_unref(src.schema);
    /* a bad option is reported by name when the job starts */
    o = opts_for(topic, schema);
    o.start = SL_KAFKA_START_COMMITTED;
    src = sl_kafka_source(&o);
    CHECK(src.ops->create_reader(src.ctx, 0, 1, &r, &ns, err, sizeof err) == SL_EINVAL);
    CHECK_CONTAINS(err, "group_id");
    src.ops->destroy(src.ctx);
    sl_schema_unref(src.schema);
    o = opts_for("no-such-topic-here", schema);
    src = sl_kafka_source(&o);
    CHECK(src.ops->create_reader(src.ctx, 0, 1, &r, &ns, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "topic 'no-such-topic-here' does not exist");
    src.ops->destroy(src.ctx);
    sl_schema_unref(src.schema);
    sl_schema_unref(schema);
}

/* ---- event time ---- */

typedef struct wacc {
    int64_t n;
} wacc_t;
static void w_init(void *c, void *a) { ((wacc_t *)a)->n = 0; }
static int w_add(void *c, void *a, const sl_record_t *in) {
    ((wacc_t *)a)->n++;
    return 0;
}
static int w_result(void *c, const void *a, const uint8_t *k, uint32_t kl, const sl_window_t *w, sl_row_writer_t *o) {
    sl_rw_set_i64(o, 0, w->start);
    sl_rw_set_i64(o, 1, ((const wacc_t *)a)->n);
    return 0;
}
static int one_key(void *ctx, const sl_row_t *row, uint8_t *key, int cap) {
    key[0] = 1;
    return 1;
}

typedef struct runner {
    sl_env_t *env;
    int rc;
} runner_t;
static void *run_job(void *arg) {
    runner_t *r = arg;
    r->rc = sl_env_execute(r->env, "kafka-job");
    return NULL;
}

/* Watermarks per partition: partition 0 runs 100 s ahead of partition 1 in
 * event time, yet none of partition 1's records is late (a single
 * watermark over the source would drop them); partitions 2 and 3 stay
 * empty and, marked idle, do not stall the windows. */
TEST(per_partition_watermarks_and_idle_partitions) {
    const char *topic = kt_name("src-wm");
    CHECK_EQ(kt_create_topic(topic, 4), 0);
    const int64_t BASE = 1000000000; /* (a Kafka timestamp of 0 means "now") */
    rd_kafka_t *p = kt_producer();
    /* partition 0: ts 0..99,999 step 100 ms (1000 records), first */
    for (int64_t i = 0; i < 1000; i++) {
        char v[64];
        int l = snprintf(v, sizeof v, "{\"id\": %lld, \"ts\": 0}", (long long)i);
        CHECK_EQ(kt_send(p, topic, 0, NULL, v, (size_t)l, BASE + i * 100), 0);
    }
    CHECK_EQ(kt_flush(p), 0);
    /* partition 1: ts 0..9,990 step 10 ms (1000 records), after */
    for (int64_t i = 0; i < 1000; i++) {
        char v[64];
        int l = snprintf(v, sizeof v, "{\"id\": %lld, \"ts\": 0}", (long long)(1000 + i));
        CHECK_EQ(kt_send(p, topic, 1, NULL, v, (size_t)l, BASE + i * 10), 0);
    }
    CHECK_EQ(kt_flush(p), 0);
    rd_kafka_destroy(p);
    sl_schema_t *schema = sl_schema_parse(ID_TS, NULL, 0);
    sl_kafka_source_opts_t o = opts_for(topic, schema);
    o.bounded = false; /* the end of a bounded source would fire every window anyway */
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 1);
    sl_env_set_auto_watermark_interval(env, 50);
    sl_watermark_strategy_t ws = sl_wm_bounded(NULL, 0); /* the Kafka timestamp */
    ws.idle_timeout_ms = 2000; /* longer than it takes to fetch partition 1 */
    sl_stream_t *s = sl_from_source(env, sl_kafka_source(&o), ws, "kafka");
    sl_aggregate_fn_t agg = {.acc_size = sizeof(wacc_t), .init = w_init, .add = w_add, .result = w_result};
    s = sl_window_aggregate(sl_window(sl_key_by_fn(s, one_key, NULL), sl_tumbling_event_time(1000, 0)), agg,
                            sl_schema_parse("start BIGINT NOT NULL, n BIGINT NOT NULL", NULL, 0));
    collected_t *c = collected_new();
    sl_sink_to(s, collect_sink(c), "windows");
    runner_t run = {env, 0};
    pthread_t th;
    pthread_create(&th, NULL, run_job, &run);
    /* windows [0 s, 1 s) .. [8 s, 9 s) need the watermark past 9 s: the
     * minimum of partitions 0 and 1, with 2 and 3 idle */
    int64_t t0 = sl_now_ms();
    int64_t n = 0;
    while (sl_now_ms() - t0 < 60000) {
        pthread_mutex_lock(&c->mu);
        n = c->n;
        pthread_mutex_unlock(&c->mu);
        if (n >= 9) break;
        kt_sleep_ms(20);
    }
    sl_env_cancel(env);
    pthread_join(th, NULL);
    CHECK(n >= 9);
    sl_schema_t *ws_schema = sl_schema_parse("start BIGINT NOT NULL, n BIGINT NOT NULL", NULL, 0);
    int64_t late = 0;
    for (int64_t i = 0; i < c->n; i++) {
        sl_row_t r = collected_row(c, i, ws_schema);
        int64_t start = sl_row_i64(&r, 0) - BASE, cnt = sl_row_i64(&r, 1);
        /* partition 0: 10 records per second; partition 1: 100 (below 10 s) */
        int64_t want = 10 + (start < 10000 ? 100 : 0);
        if (start < 9000) CHECK_EQ(cnt, want);
        if (cnt < want) late += want - cnt;
    }
    CHECK_EQ(late, 0);
    sl_schema_unref(ws_schema);
    collected_free(c);
    sl_env_destroy(env);
    sl_schema_unref(schema);
}

/* ---- poison records ---- */

static const char *BAD[] = {"{\"id\": \"seven\", \"ts\": 1}", "not json at all", "{\"ts\": 5}", "[1,2,3]",
                            "{\"id\": 1.5e999, \"ts\": 1}", "", "{\"id\": 12, \"ts\": true}"};
#define NBAD ((int)(sizeof BAD / sizeof BAD[0]))

/* 300 good and 7 bad records over 3 partitions. */
static void fill_poison(const char *topic) {
    rd_kafka_t *p = kt_producer();
    int b = 0;
    for (int64_t i = 0; i < 300; i++) {
        char v[64];
        int l = snprintf(v, sizeof v, "{\"id\": %lld, \"ts\": %lld}", (long long)i, (long long)i);
        kt_send(p, topic, (int)(i % 3), NULL, v, (size_t)l, i);
        if (i % 40 == 7 && b < NBAD) {
            kt_send(p, topic, (int)(i % 3), "bad", BAD[b], strlen(BAD[b]), i);
            b++;
        }
    }
    kt_flush(p);
    rd_kafka_destroy(p);
}

static int run_policy(const char *topic, sl_kafka_error_policy_t pol, const char *dlq, int64_t *out, int64_t *skipped,
                      char *err, size_t errlen) {
    sl_schema_t *schema = sl_schema_parse(ID_TS, NULL, 0);
    sl_kafka_source_opts_t o = opts_for(topic, schema);
    o.on_error = pol;
    o.dead_letter_topic = dlq;
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 2);
    sl_sink_t cs = sl_counting_sink(NULL);
    sl_stream_t *s = sl_uid(sl_from_source(env, sl_kafka_source(&o), sl_wm_none(), "kafka"), "kafka");
    sl_sink_to(s, cs, "count");
    int rc = sl_env_execute(env, "poison");
    snprintf(err, errlen, "%s", sl_env_error(env));
    int64_t in = 0;
    sl_env_operator_metrics(env, "count", &in, NULL);
    *out = in;
    *skipped = sl_env_records_skipped(env, "kafka");
    sl_env_destroy(env);
    sl_schema_unref(schema);
    return rc;
}

TEST(poison_records_fail_skip_dead_letter) {
    const char *topic = kt_name("src-poison");
    CHECK_EQ(kt_create_topic(topic, 3), 0);
    fill_poison(topic);
    char err[1024];
    int64_t out = 0, skipped = 0;
    /* fail: the job stops, naming topic, partition, offset and reason */
    int rc = run_policy(topic, SL_KAFKA_ON_ERROR_FAIL, NULL, &out, &skipped, err, sizeof err);
    CHECK(rc == SL_EFORMAT);
    CHECK_CONTAINS(err, topic);
    CHECK_CONTAINS(err, "offset");
    fprintf(stderr, "  fail: %s\n", err);
    /* skip and count */
    rc = run_policy(topic, SL_KAFKA_ON_ERROR_SKIP, NULL, &out, &skipped, err, sizeof err);
    CHECK_EQ(rc, 0);
    CHECK_EQ(out, 300);
    CHECK_EQ(skipped, NBAD);
    /* dead letters: the raw records with their error */
    const char *dlq = kt_name("src-dlq");
    CHECK_EQ(kt_create_topic(dlq, 1), 0);
    rc = run_policy(topic, SL_KAFKA_ON_ERROR_DEAD_LETTER, dlq, &out, &skipped, err, sizeof err);
    CHECK_STR(err, "");
    CHECK_EQ(rc, 0);
    kt_recs_t d = {0};
    CHECK_EQ(kt_read_all(dlq, true, 30000, &d), 0);
    fprintf(stderr, "  records in %d = out %lld + skipped %lld + dead-lettered %lld\n", 300 + NBAD, (long long)out,
            (long long)skipped, (long long)d.n);
    CHECK_EQ(out + skipped + d.n, 300 + NBAD);
    CHECK_EQ(d.n, NBAD);
    for (int64_t i = 0; i < d.n; i++) {
        bool known = false;
        for (int b = 0; b < NBAD; b++) known = known || (d.r[i].vlen == strlen(BAD[b]) && !memcmp(d.r[i].value, BAD[b], d.r[i].vlen));
        CHECK(known);
        CHECK(d.r[i].key && !strcmp(d.r[i].key, "bad"));
        CHECK(d.r[i].error_header != NULL);
        CHECK_CONTAINS(d.r[i].error_header, "offset");
    }
    kt_recs_free(&d);
}

/* RAW: value bytes and the record's metadata. */
TEST(raw_records_with_metadata) {
    const char *topic = kt_name("src-raw");
    CHECK_EQ(kt_create_topic(topic, 1), 0);
    rd_kafka_t *p = kt_producer();
    const char bin[] = {'a', 0, 'b', (char)0xff};
    CHECK_EQ(kt_send(p, topic, 0, "k1", bin, sizeof bin, 4242), 0);
    CHECK_EQ(kt_send(p, topic, 0, NULL, "plain", 5, 4343), 0);
    CHECK_EQ(kt_flush(p), 0);
    rd_kafka_destroy(p);
    sl_schema_t *schema = sl_schema_parse("value BYTES, key VARCHAR, topic VARCHAR NOT NULL, partition INT NOT NULL, "
                                          "offset BIGINT NOT NULL, timestamp TIMESTAMP(3)", NULL, 0);
    sl_kafka_source_opts_t o = opts_for(topic, schema);
    o.format = SL_KAFKA_RAW;
    sl_source_t src = sl_kafka_source(&o);
    char err[512];
    void *r;
    int ns;
    CHECK_EQ(src.ops->create_reader(src.ctx, 0, 1, &r, &ns, err, sizeof err), 0);
    sl_source_output_t *out = sl_src_output_test_new(schema);
    int rc;
    for (int i = 0; i < 2000 && sl_src_output_test_count(out) < 2; i++) {
        rc = src.ops->poll(r, out, 10, err, sizeof err);
        CHECK(rc >= 0);
        if (rc == SL_SRC_END) break;
        kt_sleep_ms(2);
    }
    CHECK_EQ(sl_src_output_test_count(out), 2);
    sl_record_t a = sl_src_output_test_get(out, 0), b = sl_src_output_test_get(out, 1);
    uint32_t l;
    const uint8_t *v = sl_row_bytes(&a.row, 0, &l);
    CHECK_EQ(l, sizeof bin);
    CHECK(memcmp(v, bin, sizeof bin) == 0);
    const char *k = sl_row_str(&a.row, 1, &l);
    CHECK(l == 2 && !memcmp(k, "k1", 2));
    const char *t = sl_row_str(&a.row, 2, &l);
    CHECK(l == strlen(topic) && !memcmp(t, topic, l));
    CHECK_EQ(sl_row_i32(&a.row, 3), 0);
    CHECK_EQ(sl_row_i64(&a.row, 4), 0);
    CHECK_EQ(sl_row_i64(&a.row, 5), 4242);
    CHECK_EQ(a.ts, 4242);
    CHECK(sl_row_is_null(&b.row, 1));
    CHECK_EQ(sl_row_i64(&b.row, 4), 1);
    sl_src_output_test_free(out);
    src.ops->destroy_reader(r);
    src.ops->destroy(src.ctx);
    sl_schema_unref(src.schema);
    /* a RAW schema without 'value' is refused by name */
    sl_schema_t *bad = sl_schema_parse("payload BYTES", NULL, 0);
    o.schema = bad;
    src = sl_kafka_source(&o);
    CHECK(src.ops->create_reader(src.ctx, 0, 1, &r, &ns, err, sizeof err) == SL_EINVAL);
    CHECK_CONTAINS(err, "payload");
    src.ops->destroy(src.ctx);
    sl_schema_unref(src.schema);
    sl_schema_unref(bad);
    sl_schema_unref(schema);
}

/* A topic that grows from 2 to 5 partitions while the job runs: records of
 * the new partitions arrive too, each once. */
TEST(new_partitions_are_picked_up) {
    const char *topic = kt_name("src-grow");
    CHECK_EQ(kt_create_topic(topic, 2), 0);
    CHECK_EQ(fill(topic, 2, 0, 100, 0), 0);
    sl_schema_t *schema = sl_schema_parse(ID_TS, NULL, 0);
    sl_kafka_source_opts_t o = opts_for(topic, schema);
    o.bounded = false;
    o.discovery_interval_ms = 200;
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 2);
    collected_t *c = collected_new();
    sl_watermark_strategy_t ws = sl_wm_bounded(NULL, 0);
    sl_sink_to(sl_from_source(env, sl_kafka_source(&o), ws, "kafka"), collect_sink(c), "collect");
    runner_t run = {env, 0};
    pthread_t th;
    pthread_create(&th, NULL, run_job, &run);
    int64_t t0 = sl_now_ms(), n = 0;
    while (sl_now_ms() - t0 < 30000 && n < 100) {
        pthread_mutex_lock(&c->mu);
        n = c->n;
        pthread_mutex_unlock(&c->mu);
        kt_sleep_ms(20);
    }
    CHECK_EQ(n, 100);
    CHECK_EQ(kt_add_partitions(topic, 5), 0);
    /* ids 100..399 over partitions 0..4 (i % 5) */
    rd_kafka_t *p = kt_producer();
    for (int64_t i = 100; i < 400; i++) {
        char v[64];
        int l = snprintf(v, sizeof v, "{\"id\": %lld, \"ts\": %lld}", (long long)i, (long long)i);
        /* librdkafka may not know the new partitions for a moment */
        int tries = 0;
        while (kt_send(p, topic, (int)(i % 5), NULL, v, (size_t)l, i) != 0 && tries++ < 100) kt_sleep_ms(50);
    }
    CHECK_EQ(kt_flush(p), 0);
    rd_kafka_destroy(p);
    t0 = sl_now_ms();
    while (sl_now_ms() - t0 < 30000 && n < 400) {
        pthread_mutex_lock(&c->mu);
        n = c->n;
        pthread_mutex_unlock(&c->mu);
        kt_sleep_ms(20);
    }
    kt_sleep_ms(300); /* nothing more (no duplicate) arrives */
    sl_env_cancel(env);
    pthread_join(th, NULL);
    CHECK_EQ(c->n, 400);
    char seen[400] = {0};
    for (int64_t i = 0; i < c->n; i++) {
        sl_row_t r = collected_row(c, i, schema);
        int64_t id = sl_row_i64(&r, 0);
        CHECK(id >= 0 && id < 400 && !seen[id]);
        seen[id] = 1;
    }
    collected_free(c);
    sl_env_destroy(env);
    sl_schema_unref(schema);
}

static int slow_copy(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    if (sl_row_i64(&in->row, 0) % 10 == 0) kt_sleep_ms(1);
    sl_rw_copy_row(out, &in->row);
    return 0;
}

/* pendingRecords (Flink's consumer lag metric): in every report of the
 * bounded source, what it emitted plus what it says is pending is the
 * whole topic; it starts above 0 and ends at 0. */
typedef struct lag_seen {
    pthread_mutex_t mu;
    int reports, bad;
    int64_t first_pending, last_pending, total;
} lag_seen_t;

static void on_lag(void *ctx, const sl_operator_metrics_t *ops, int n) {
    lag_seen_t *l = ctx;
    pthread_mutex_lock(&l->mu);
    for (int i = 0; i < n; i++) {
        if (ops[i].vertex != 0 || ops[i].chain_index != 0) continue; /* the source */
        if (ops[i].pending_records < 0) continue; /* not known yet */
        if (ops[i].pending_records + ops[i].num_records_out != l->total) {
            if (!l->bad++)
                fprintf(stderr, "  report: %lld out + %lld pending != %lld\n", (long long)ops[i].num_records_out,
                        (long long)ops[i].pending_records, (long long)l->total);
        }
        if (!l->reports++) l->first_pending = ops[i].pending_records;
        l->last_pending = ops[i].pending_records;
    }
    pthread_mutex_unlock(&l->mu);
}

static int slow_lag(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    if (sl_row_i64(&in->row, 0) % 3 == 0) kt_sleep_ms(1);
    sl_rw_copy_row(out, &in->row);
    return 1;
}

TEST(pending_records_metric) {
    const char *topic = kt_name("src-lag");
    const int64_t N = 3000;
    CHECK_EQ(kt_create_topic(topic, 3), 0);
    CHECK_EQ(fill(topic, 3, 0, N, 0), 0);
    sl_schema_t *schema = sl_schema_parse(ID_TS, NULL, 0);
    sl_kafka_source_opts_t o = opts_for(topic, schema);
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 1);
    lag_seen_t l = {.total = N};
    pthread_mutex_init(&l.mu, NULL);
    sl_env_set_metrics_listener(env, on_lag, &l);
    sl_stream_t *s = sl_from_source(env, sl_kafka_source(&o), sl_wm_none(), "kafka");
    s = sl_map(s, slow_lag, NULL, sl_schema_ref(schema)); /* ~1 ms per 3 records: about 1 s */
    sl_sink_to(s, sl_counting_sink(NULL), "count");
    CHECK_EQ(sl_env_execute(env, "kafka-lag"), 0);
    fprintf(stderr, "  %d source reports: pendingRecords %lld first, %lld last\n", l.reports,
            (long long)l.first_pending, (long long)l.last_pending);
    CHECK(l.reports >= 2);
    CHECK_EQ(l.bad, 0);
    CHECK(l.first_pending > 0);
    CHECK_EQ(l.last_pending, 0);
    pthread_mutex_destroy(&l.mu);
    sl_env_destroy(env);
    sl_schema_unref(schema);
}

/* With a group id, checkpointed positions are committed to the group (for
 * monitoring): after a checkpointed run, the group's offsets are those of
 * a checkpoint — past the start, within the log. */
TEST(group_offsets_committed_for_monitoring) {
    const char *topic = kt_name("src-group");
    const char *group = kt_name("mon");
    CHECK_EQ(kt_create_topic(topic, 2), 0);
    CHECK_EQ(fill(topic, 2, 0, 4000, 1000000), 0);
    sl_schema_t *schema = sl_schema_parse(ID_TS, NULL, 0);
    sl_kafka_source_opts_t o = opts_for(topic, schema);
    o.group_id = group;
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 1);
    sl_env_enable_checkpointing(env, 50, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_stream_t *s = sl_from_source(env, sl_kafka_source(&o), sl_wm_none(), "kafka");
    s = sl_map(s, slow_copy, NULL, sl_schema_ref(schema));
    sl_sink_to(s, sl_counting_sink(NULL), "count");
    CHECK_EQ(sl_env_execute(env, "group"), 0);
    CHECK(sl_env_checkpoints_completed(env) >= 3);
    sl_env_destroy(env);
    char err[512];
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    rd_kafka_conf_set(c, "bootstrap.servers", kt_bootstrap(), err, sizeof err);
    rd_kafka_conf_set(c, "group.id", group, err, sizeof err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof err);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(2);
    rd_kafka_topic_partition_list_add(l, topic, 0);
    rd_kafka_topic_partition_list_add(l, topic, 1);
    CHECK_EQ(rd_kafka_committed(rk, l, 10000), 0);
    int64_t sum = 0;
    for (int i = 0; i < 2; i++) {
        CHECK(l->elems[i].offset <= 2000);
        if (l->elems[i].offset > 0) sum += l->elems[i].offset;
    }
    fprintf(stderr, "  committed offsets %lld and %lld (of 2000 each)\n", (long long)l->elems[0].offset,
            (long long)l->elems[1].offset);
    CHECK(sum > 0);
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_destroy(rk);
    sl_schema_unref(schema);
}

int main(void) {
    kt_bootstrap();
    RUN(reads_every_partition_exactly_once);
    RUN(restore_rewinds_exactly_at_another_parallelism);
    RUN(starting_positions);
    RUN(per_partition_watermarks_and_idle_partitions);
    RUN(partitions_advance_together);
    RUN(poison_records_fail_skip_dead_letter);
    RUN(raw_records_with_metadata);
    RUN(new_partitions_are_picked_up);
    RUN(group_offsets_committed_for_monitoring);
    RUN(pending_records_metric);
    TEST_MAIN_END();
}
