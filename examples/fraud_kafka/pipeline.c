/*
 * pipeline.c — the fraud job of scenarios S1 to S4 on Kafka and PostgreSQL
 * (see fraud_kafka.h).  In Flink's Java it would read:
 *
 *   env.fromSource(KafkaSource(events, JSON), WatermarkStrategy
 *           .forBoundedOutOfOrderness(Duration.ofSeconds(5))
 *           .withTimestampAssigner((e, t) -> e.ts).withIdleness(idle), "events")
 *      .keyBy(e -> e.cardId)
 *      .window(TumblingEventTimeWindows.of(Time.minutes(5)))
 *      .sideOutputLateData(lateTag)
 *      .aggregate(new CountAndSum(), new Decide(countThreshold, sumThreshold))
 *      -> KafkaSink(fraud-decisions, EXACTLY_ONCE) and JdbcSink.exactlyOnceSink(...)
 *
 * Tests can ask the sinks to log their two-phase commit (commit_log): a
 * thin wrapper around each sink appends, per subtask, the rows handed to
 * the sink when a checkpoint's barrier pre-commits them and, before the
 * engine's commit call reaches the sink, how many rows that commit may make
 * visible — an upper bound of what a reader can see at that moment.
 */
#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "fk_util.h"
#include "fraud_kafka.h"
#include "sluice/job.h"
#include "sluice/postgres.h"

fk_opts_t fk_defaults(void) {
    fk_opts_t o;
    memset(&o, 0, sizeof o);
    o.events_topic = "events";
    o.decisions_topic = "fraud-decisions";
    o.late_topic = "fraud-late";
    o.dead_letter_topic = "fraud-dead-letters";
    o.table = "fraud_decisions";
    o.job_id = "fraud-kafka";
    o.parallelism = 2;
    o.checkpoint_interval_ms = 10000;
    o.checkpoint_dir = "fraud-kafka-checkpoints";
    o.checkpoints_retained = 2;
    o.fetch_kb = 64;
    o.delivery = SL_DELIVERY_EXACTLY_ONCE;
    o.window_ms = 5 * 60 * 1000;
    o.out_of_orderness_ms = 5000;
    o.idle_timeout_ms = 10000;
    o.count_threshold = 8;
    o.sum_threshold = 2500.0;
    o.on_error = SL_KAFKA_ON_ERROR_FAIL;
    o.restarts = 3;
    return o;
}

/* ---- count and sum per card and window, and the decision ---- */

typedef struct count_sum {
    int64_t count;
    double sum;
} count_sum_t;

typedef struct fk_decide decide_t; /* fraud_kafka.h: kept by the caller */

static void cs_init(void *ctx, void *acc) { memset(acc, 0, sizeof(count_sum_t)); }

static int cs_add(void *ctx, void *acc, const sl_record_t *in) {
    count_sum_t *a = acc;
    a->count++;
    a->sum += sl_row_f64(&in->row, 1); /* amount */
    return 0;
}

static void cs_merge(void *ctx, void *acc, const void *other) {
    count_sum_t *a = acc;
    const count_sum_t *b = other;
    a->count += b->count;
    a->sum += b->sum;
}

/* window_start, window_end, card_id, txn_count, total_amount, flagged */
static int cs_result(void *ctx, const void *acc, const uint8_t *key, uint32_t keylen, const sl_window_t *w,
                     sl_row_writer_t *out) {
    const decide_t *d = ctx;
    const count_sum_t *a = acc;
    int64_t card;
    if (keylen != sizeof card) return SL_EINVAL;
    memcpy(&card, key, sizeof card);
    sl_rw_set_i64(out, 0, w->start);
    sl_rw_set_i64(out, 1, w->end);
    sl_rw_set_i64(out, 2, card);
    sl_rw_set_i64(out, 3, a->count);
    sl_rw_set_f64(out, 4, a->sum);
    sl_rw_set_bool(out, 5, a->count >= d->count_threshold || a->sum >= d->sum_threshold);
    return 0;
}

/* ---- throttle: at most `rate` records/s per source subtask ---- */

typedef struct fk_throttle throttle_t; /* fraud_kafka.h: kept by the caller */

static void *th_clone(const void *c) {
    throttle_t *t = malloc(sizeof *t);
    *t = *(const throttle_t *)c;
    t->t0_ns = 0;
    t->n = 0;
    return t;
}

static void th_free(void *c) { free(c); }

static int th_map(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    throttle_t *t = ctx;
    if (t->t0_ns == 0) t->t0_ns = fk_mono_ns();
    int64_t due = t->t0_ns + (int64_t)((double)++t->n / t->rate * 1e9);
    int64_t now = fk_mono_ns();
    if (due > now) {
        struct timespec ts = {(time_t)((due - now) / 1000000000), (long)((due - now) % 1000000000)};
        nanosleep(&ts, NULL);
    }
    sl_rw_copy_row(out, &in->row);
    return 0;
}

/* ---- the commit log around a sink (tests) ---- */

typedef struct tap_ctx {
    sl_sink_t inner;
    sl_sink_ops_t ops;
    char *name, *path;
} tap_ctx_t;

typedef struct tap_writer {
    tap_ctx_t *t;
    void *inner;
    int subtask, fd;
    int64_t written;
    int64_t ids[64], rows[64]; /* pre-committed, not yet committed: checkpoint -> rows written up to it */
    int n;
} tap_writer_t;

static void tap_log(tap_writer_t *w, const char *what, int64_t id, int64_t rows) {
    char line[200];
    int l = snprintf(line, sizeof line, "%s %s %" PRId64 " %d %" PRId64 "\n", w->t->name, what, id, w->subtask, rows);
    if (w->fd >= 0) (void)fk_write_all(w->fd, line, (size_t)l); /* O_APPEND: whole lines; a lost one only weakens the test */
}

static int tap_open(void *ctx, int subtask, int par, const sl_schema_t *s, void **wp, char *err, size_t errlen) {
    tap_ctx_t *t = ctx;
    tap_writer_t *w = calloc(1, sizeof *w);
    w->t = t;
    w->subtask = subtask;
    int rc = t->inner.ops->open(t->inner.ctx, subtask, par, s, &w->inner, err, errlen);
    if (rc) {
        free(w);
        return rc;
    }
    w->fd = open(t->path, O_WRONLY | O_APPEND | O_CREAT, 0644);
    tap_log(w, "open", 0, 0);
    *wp = w;
    return 0;
}

static int tap_write(void *wp, const sl_record_t *r, char *err, size_t errlen) {
    tap_writer_t *w = wp;
    if ((++w->written & 63) == 0) tap_log(w, "written", 0, w->written);
    return w->t->inner.ops->write(w->inner, r, err, errlen);
}

static int tap_pre_commit(void *wp, int64_t id, char *err, size_t errlen) {
    tap_writer_t *w = wp;
    int rc = w->t->inner.ops->pre_commit(w->inner, id, err, errlen);
    if (!rc) {
        if (w->n == 64) { /* keep the newest */
            memmove(w->ids, w->ids + 1, 63 * sizeof *w->ids);
            memmove(w->rows, w->rows + 1, 63 * sizeof *w->rows);
            w->n--;
        }
        w->ids[w->n] = id;
        w->rows[w->n++] = w->written;
        tap_log(w, "precommit", id, w->written);
    }
    return rc;
}

static int tap_commit(void *wp, int64_t id, char *err, size_t errlen) {
    tap_writer_t *w = wp;
    int64_t upto = -1;
    int k = 0;
    while (k < w->n && w->ids[k] <= id) upto = w->rows[k++];
    if (upto >= 0) tap_log(w, "commit", id, upto); /* before: nothing newer can become visible */
    int rc = w->t->inner.ops->commit(w->inner, id, err, errlen);
    if (!rc && k > 0) {
        memmove(w->ids, w->ids + k, (size_t)(w->n - k) * sizeof *w->ids);
        memmove(w->rows, w->rows + k, (size_t)(w->n - k) * sizeof *w->rows);
        w->n -= k;
        tap_log(w, "committed", id, upto);
    }
    return rc;
}

static int tap_finish(void *wp, char *err, size_t errlen) {
    tap_writer_t *w = wp;
    tap_log(w, "finish", 0, w->written);
    return w->t->inner.ops->finish ? w->t->inner.ops->finish(w->inner, err, errlen) : 0;
}

static void tap_close(void *wp) {
    tap_writer_t *w = wp;
    if (!w) return;
    if (w->t->inner.ops->close) w->t->inner.ops->close(w->inner);
    if (w->fd >= 0) close(w->fd);
    free(w);
}

static void tap_destroy(void *ctx) {
    tap_ctx_t *t = ctx;
    if (t->inner.ops->destroy) t->inner.ops->destroy(t->inner.ctx);
    free(t->name);
    free(t->path);
    free(t);
}

static int tap_recover(void *ctx, int64_t restored, char *err, size_t errlen) {
    tap_ctx_t *t = ctx;
    return t->inner.ops->recover(t->inner.ctx, restored, err, errlen);
}

static int tap_snapshot(void *wp, int64_t id, void (*put)(void *, const void *, size_t), void *pc) {
    tap_writer_t *w = wp;
    return w->t->inner.ops->snapshot(w->inner, id, put, pc);
}

static int tap_restore(void *wp, const void *state, size_t len, char *err, size_t errlen) {
    tap_writer_t *w = wp;
    return w->t->inner.ops->restore(w->inner, state, len, err, errlen);
}

/* Wraps `inner` so that its two-phase commit is logged to path (NULL: no
 * wrapper).  Takes ownership of inner. */
static sl_sink_t tap(sl_sink_t inner, const char *name, const char *path) {
    if (!path || !inner.ops->pre_commit) return inner;
    tap_ctx_t *t = calloc(1, sizeof *t);
    t->inner = inner;
    t->name = strdup(name);
    t->path = strdup(path);
    t->ops = (sl_sink_ops_t){
        .name = inner.ops->name,
        .open = tap_open,
        .write = tap_write,
        .finish = tap_finish,
        .close = tap_close,
        .destroy = tap_destroy,
        .pre_commit = tap_pre_commit,
        .commit = inner.ops->commit ? tap_commit : NULL,
        .recover = inner.ops->recover ? tap_recover : NULL,
        .snapshot = inner.ops->snapshot ? tap_snapshot : NULL,
        .restore = inner.ops->restore ? tap_restore : NULL,
    };
    return (sl_sink_t){&t->ops, t};
}

/* ---- the job ---- */

/* Whether dir holds a complete checkpoint (chk-<n>/_metadata). */
static bool has_checkpoint(const char *dir) {
    DIR *d = opendir(dir);
    if (!d) return false;
    bool any = false;
    struct dirent *e;
    while (!any && (e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "chk-", 4) != 0) continue;
        char meta[4400];
        struct stat st;
        snprintf(meta, sizeof meta, "%s/%s/_metadata", dir, e->d_name);
        any = stat(meta, &st) == 0;
    }
    closedir(d);
    return any;
}

static const char *delivery_name(sl_delivery_t d) {
    return d == SL_DELIVERY_EXACTLY_ONCE ? "exactly-once" : d == SL_DELIVERY_AT_LEAST_ONCE ? "at-least-once" : "none";
}

/* Version 2's new operator: per card, how many window rows it has seen
 * (keyed value state, so a savepoint of version 1 has none: it starts
 * empty); rows pass unchanged. */
typedef struct history {
    sl_state_t *seen;
} history_t;

static void *history_clone(const void *c) { return calloc(1, sizeof(history_t)); }
static void history_free(void *c) { free(c); }

static int history_open(void *ctx, sl_rt_t *rt) {
    history_t *h = ctx;
    h->seen = sl_state_value(rt, "windows-seen");
    return h->seen ? 0 : SL_EINVAL;
}

static int history_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    history_t *h = ctx;
    uint32_t len;
    const int64_t *v = sl_value_get(h->seen, &len);
    int64_t n = v && len == sizeof n ? *v + 1 : 1;
    sl_value_put(h->seen, &n, sizeof n);
    sl_rw_copy_row(sl_out_row(out), &in->row);
    sl_out_set_timestamp(out, in->ts);
    sl_emit(out);
    return 0;
}

int fk_build(sl_env_t *env, const fk_opts_t *o, fk_keep_t *keep, bool *restored, char *err, size_t errlen) {
    if (!o->bootstrap || !*o->bootstrap) return fk_errf(err, errlen, SL_EINVAL, "fraud-kafka: --bootstrap is required");
    if (o->delivery == SL_DELIVERY_EXACTLY_ONCE && o->checkpoint_interval_ms <= 0)
        return fk_errf(err, errlen, SL_EINVAL,
                       "fraud-kafka: exactly-once delivery needs checkpoints (--checkpoint-interval > 0)");
    if (o->parallelism < 1 || o->parallelism > 64)
        return fk_errf(err, errlen, SL_EINVAL, "fraud-kafka: parallelism %d is not in 1..64", o->parallelism);
    *restored = false;
    sl_env_set_job_name(env, FK_JOB_NAME);
    sl_env_set_parallelism(env, o->parallelism);
    if (o->checkpoint_interval_ms > 0) {
        sl_env_enable_checkpointing(env, o->checkpoint_interval_ms, SL_CHECKPOINT_EXACTLY_ONCE);
        sl_env_set_checkpoint_dir(env, o->checkpoint_dir);
        sl_env_set_checkpoints_retained(env, o->checkpoints_retained > 0 ? o->checkpoints_retained : 1);
    }
    sl_env_set_restart_fixed_delay(env, o->restarts, 1000);
    if (o->restore && o->checkpoint_dir) {
        char job[4096];
        snprintf(job, sizeof job, "%s/%s", o->checkpoint_dir, FK_JOB_NAME);
        if (has_checkpoint(job)) {
            if (sl_env_restore_from(env, job) != 0) {
                return fk_errf(err, errlen, SL_EINVAL, "fraud-kafka: restoring from %s: %s", job, sl_env_error(env));
            }
            *restored = true;
        }
    }

    /* source: JSON transactions, one split per partition */
    sl_schema_t *txn = sl_schema_parse("card_id BIGINT NOT NULL, amount DOUBLE NOT NULL, ts TIMESTAMP(3) NOT NULL",
                                       NULL, 0);
    char fetch[64];
    snprintf(fetch, sizeof fetch, "max.partition.fetch.bytes=%d", o->fetch_kb * 1024);
    const char *props[] = {fetch, NULL};
    sl_kafka_source_opts_t so = sl_kafka_source_defaults();
    so.bootstrap_servers = o->bootstrap;
    so.topics = o->events_topic;
    so.schema = txn;
    so.bounded = o->bounded;
    so.group_id = o->job_id; /* offsets committed for monitoring only */
    so.on_error = o->on_error;
    so.dead_letter_topic = o->dead_letter_topic;
    so.properties = o->fetch_kb > 0 ? props : NULL;
    sl_watermark_strategy_t wm = sl_wm_bounded("ts", o->out_of_orderness_ms);
    wm.idle_timeout_ms = o->idle_timeout_ms;
    sl_stream_t *events = sl_uid(sl_from_source(env, sl_kafka_source(&so), wm, "events"), "events");
    if (o->groups) sl_slot_sharing_group(events, "source");
    keep->th = (throttle_t){o->throttle, 0, 0}; /* cloned per subtask when the job starts */
    if (o->throttle > 0) {
        events = sl_uid(sl_map_ex(events, th_map,
                                  (sl_fn_opts_t){.ctx = &keep->th, .ctx_clone = th_clone, .ctx_free = th_free},
                                  sl_schema_ref(txn)),
                        "throttle");
    }

    keep->decide = (decide_t){o->count_threshold, o->sum_threshold};
    sl_aggregate_fn_t count_and_sum = {.acc_size = sizeof(count_sum_t),
                                       .init = cs_init,
                                       .add = cs_add,
                                       .merge = cs_merge,
                                       .result = cs_result,
                                       .ctx = &keep->decide};
    sl_windowed_t *w = sl_window(sl_key_by(events, "card_id"), sl_tumbling_event_time(o->window_ms, 0));
    sl_window_late_output(w, "late-transactions");
    sl_stream_t *decisions = sl_window_aggregate(
        w, count_and_sum,
        sl_schema_parse("window_start TIMESTAMP(3) NOT NULL, window_end TIMESTAMP(3) NOT NULL, "
                        "card_id BIGINT NOT NULL, txn_count BIGINT NOT NULL, total_amount DOUBLE NOT NULL, "
                        "flagged BOOLEAN NOT NULL",
                        NULL, 0));
    sl_uid(sl_name(decisions, "count-sum-decide"), "card-window");
    if (o->groups) sl_slot_sharing_group(decisions, "window");
    sl_stream_t *window = decisions;
    if (o->v2) {
        sl_process_fn_t hf = {.open = history_open, .process = history_process,
                              .opts = {NULL, history_clone, history_free}};
        decisions = sl_uid(sl_name(sl_keyed_process(sl_key_by(window, "card_id"), hf,
                                                    sl_schema_ref((sl_schema_t *)sl_stream_schema(window))),
                                   "card-history"),
                           "card-history");
        if (o->groups) sl_slot_sharing_group(decisions, "window");
    }

    char prefix[256];
    sl_kafka_sink_opts_t ko = sl_kafka_sink_defaults();
    ko.bootstrap_servers = o->bootstrap;
    ko.topic = o->decisions_topic;
    ko.key_field = "card_id";
    ko.delivery = o->delivery;
    snprintf(prefix, sizeof prefix, "%s-decisions", o->job_id);
    ko.transactional_id_prefix = prefix;
    ko.checkpoint_interval_ms = o->checkpoint_interval_ms;
    sl_stream_t *k = sl_uid(sl_sink_to(decisions, tap(sl_kafka_sink(&ko), "kafka", o->commit_log), "decisions-to-kafka"),
                            "decisions-kafka");
    if (o->groups) sl_slot_sharing_group(k, "sinks");
    if (o->conninfo && *o->conninfo) {
        sl_pg_sink_opts_t po = sl_pg_sink_defaults();
        po.conninfo = o->conninfo;
        po.table = o->table;
        po.job_id = o->job_id;
        po.operator_id = "decisions";
        po.create_table = true;
        k = sl_uid(sl_sink_to(decisions, tap(sl_pg_sink(&po), "postgres", o->commit_log), "decisions-to-postgres"),
                   "decisions-pg");
        if (o->groups) sl_slot_sharing_group(k, "sinks");
    }
    sl_stream_t *late = sl_side_output(window, "late-transactions");
    if (o->late_topic && *o->late_topic) {
        char lprefix[256];
        sl_kafka_sink_opts_t lo = ko;
        lo.topic = o->late_topic;
        snprintf(lprefix, sizeof lprefix, "%s-late", o->job_id);
        lo.transactional_id_prefix = lprefix;
        k = sl_uid(sl_sink_to(late, sl_kafka_sink(&lo), "late-to-kafka"), "late-kafka");
    } else {
        k = sl_uid(sl_sink_to(late, sl_counting_sink(NULL), "late-count"), "late-kafka");
    }
    if (o->groups) sl_slot_sharing_group(k, "sinks");
    sl_schema_unref(txn);
    return 0;
}

int fk_run(const fk_opts_t *o, fk_summary_t *sum, char *err, size_t errlen) {
    memset(sum, 0, sizeof *sum);
    sl_env_t *env = sl_env_new();
    fk_keep_t keep; /* on this stack: the job runs in this call */
    int brc = fk_build(env, o, &keep, &sum->restored, err, errlen);
    if (brc < 0) {
        sl_env_destroy(env);
        return brc;
    }
    fprintf(stderr, "fraud-kafka: %s -> %s (%s)%s%s, p=%d, checkpoints every %" PRId64 " ms%s%s\n", o->events_topic,
            o->decisions_topic, delivery_name(o->delivery), o->conninfo && *o->conninfo ? " + table " : "",
            o->conninfo && *o->conninfo ? o->table : "", o->parallelism, o->checkpoint_interval_ms,
            o->bounded ? ", bounded" : "", sum->restored ? ", restored" : "");
    int64_t t0 = fk_mono_ns();
    int rc = sl_env_execute(env, FK_JOB_NAME);
    sum->seconds = (double)(fk_mono_ns() - t0) / 1e9;
    if (rc < 0) {
        snprintf(err, errlen, "%s", sl_env_error(env));
    } else {
        sl_env_operator_metrics(env, "events", NULL, &sum->records_out);
        sum->skipped = sl_env_records_skipped(env, "events");
        sl_env_operator_metrics(env, "decisions-kafka", &sum->decisions, NULL);
        sl_env_operator_metrics(env, "late-kafka", &sum->late, NULL);
        sum->checkpoints = sl_env_checkpoints_completed(env);
    }
    sl_env_destroy(env);
    return rc;
}
