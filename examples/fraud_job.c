/*
 * fraud_job.c — the S1 fraud pipeline written on sluice's C DataStream API.
 * The Java version in Flink reads:
 *
 *   env.fromSource(source, WatermarkStrategy
 *           .forBoundedOutOfOrderness(Duration.ofSeconds(5))
 *           .withTimestampAssigner((e, t) -> e.ts).withIdleness(...), "transactions")
 *      .keyBy(e -> e.cardId)
 *      .window(TumblingEventTimeWindows.of(Time.minutes(5)))
 *      .sideOutputLateData(lateTag)
 *      .aggregate(new CountAndSum())
 *      .sinkTo(fileSink);
 */
#include "fraud_job.h"

#include "sluice/config.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

/* The accumulator: count and sum of amounts of one card in one window. */
typedef struct count_sum {
    int64_t count;
    double sum;
} count_sum_t;

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

/* Output row: window_start, window_end, card_id, txn_count, total_amount. */
static int cs_result(void *ctx, const void *acc, const uint8_t *key, uint32_t keylen, const sl_window_t *w,
                     sl_row_writer_t *out) {
    const count_sum_t *a = acc;
    int64_t card;
    memcpy(&card, key, sizeof card);
    sl_rw_set_i64(out, 0, w->start);
    sl_rw_set_i64(out, 1, w->end);
    sl_rw_set_i64(out, 2, card);
    sl_rw_set_i64(out, 3, a->count);
    sl_rw_set_f64(out, 4, a->sum);
    return 0;
}

fraud_opts_t fraud_defaults(void) {
    fraud_opts_t o;
    memset(&o, 0, sizeof o);
    o.gen = sl_datagen_defaults();
    o.gen.ts_step_ms = 10; /* 1M events over 4 splits span about 40 minutes of event time */
    o.parallelism = 2;
    o.window_ms = 5 * 60 * 1000;
    o.out_of_orderness_ms = 5000;
    o.idle_timeout_ms = 60 * 1000;
    o.output = "fraud-windows.jsonl";
    o.late_output = "fraud-late.jsonl";
    return o;
}

int fraud_build(sl_env_t *env, const fraud_opts_t *o, char *err, size_t errlen) {
    if (o->config && sl_env_configure(env, o->config) < 0) {
        snprintf(err, errlen, "%s", sl_env_error(env));
        return SL_EINVAL;
    }
    sl_env_set_parallelism(env, o->parallelism);
    if (o->checkpoint_interval_ms > 0) sl_env_enable_checkpointing(env, o->checkpoint_interval_ms, SL_CHECKPOINT_EXACTLY_ONCE);
    if (o->checkpoint_dir) sl_env_set_checkpoint_dir(env, o->checkpoint_dir);
    if (o->from_checkpoint && sl_env_restore_from(env, o->from_checkpoint) != 0) {
        snprintf(err, errlen, "%s", sl_env_error(env));
        return SL_EINVAL;
    }

    sl_schema_t *txn = sl_schema_parse("card_id BIGINT NOT NULL, amount DOUBLE NOT NULL, ts TIMESTAMP(3) NOT NULL",
                                       NULL, 0);
    sl_source_t source = o->input ? sl_file_source(o->input, o->input_format, txn, o->on_error)
                                  : sl_datagen_source(o->gen);
    sl_schema_unref(txn);

    sl_watermark_strategy_t wm = sl_wm_bounded("ts", o->out_of_orderness_ms);
    wm.idle_timeout_ms = o->idle_timeout_ms;

    sl_stream_t *transactions = sl_uid(sl_from_source(env, source, wm, "transactions"), "transactions");

    sl_aggregate_fn_t count_and_sum = {
        .acc_size = sizeof(count_sum_t), .init = cs_init, .add = cs_add, .merge = cs_merge, .result = cs_result};

    sl_windowed_t *w = sl_window(sl_key_by(transactions, "card_id"), sl_tumbling_event_time(o->window_ms, 0));
    sl_window_allowed_lateness(w, o->allowed_lateness_ms);
    sl_window_late_output(w, "late-transactions");
    sl_stream_t *windows = sl_window_aggregate(
        w, count_and_sum,
        sl_schema_parse("window_start TIMESTAMP(3) NOT NULL, window_end TIMESTAMP(3) NOT NULL, "
                        "card_id BIGINT NOT NULL, txn_count BIGINT NOT NULL, total_amount DOUBLE NOT NULL",
                        NULL, 0));
    sl_uid(sl_name(windows, "count-and-sum"), "card-window");

    /* one results file each: the sinks run at parallelism 1 */
    sl_sink_t results = o->exactly_once_dir ? sl_exactly_once_file_sink(o->exactly_once_dir, SL_FMT_JSON)
                                            : sl_file_sink(o->output, SL_FMT_JSON);
    sl_parallelism(sl_uid(sl_sink_to(windows, results, "window-results"), "window-sink"), 1);
    sl_stream_t *late = sl_side_output(windows, "late-transactions");
    sl_parallelism(sl_uid(sl_sink_to(late, sl_file_sink(o->late_output, SL_FMT_JSON), "late-events"), "late-sink"), 1);
    if (o->print) sl_sink_to(windows, sl_print_sink("window"), "print");
    return 0;
}

int fraud_run(const fraud_opts_t *o, fraud_summary_t *sum, char *err, size_t errlen) {
    sl_env_t *env = sl_env_new();
    if (fraud_build(env, o, err, errlen) < 0) {
        sl_env_destroy(env);
        return SL_EINVAL;
    }
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = sl_env_execute(env, "fraud-detection");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc < 0) {
        snprintf(err, errlen, "%s", sl_env_error(env));
    } else if (sum) {
        memset(sum, 0, sizeof *sum);
        sl_env_operator_metrics(env, "transactions", NULL, &sum->events_in);
        sl_env_operator_metrics(env, "window-sink", &sum->windows_out, NULL);
        sl_env_operator_metrics(env, "late-sink", &sum->late_events, NULL);
        sum->skipped = sl_env_records_skipped(env, "transactions");
        sum->checkpoints = sl_env_checkpoints_completed(env);
        sl_checkpoint_stat_t st[64];
        int n = sl_env_checkpoint_stats(env, st, 64);
        for (int i = 0; i < n; i++) {
            if (!st[i].completed) continue;
            sum->ckpt_last_ms = st[i].duration_ms;
            if (st[i].duration_ms > sum->ckpt_max_ms) sum->ckpt_max_ms = st[i].duration_ms;
            if (st[i].state_bytes > 0) sum->ckpt_last = st[i]; /* the last one the running tasks took */
        }
        if (sum->ckpt_last.id > 0) {
            int nt = sl_env_checkpoint_task_stats(env, sum->ckpt_last.id, sum->ckpt_tasks, 16);
            sum->ckpt_ntasks = nt > 0 ? nt : 0;
            for (int i = 0; i < sum->ckpt_ntasks; i++) { /* the names live in env */
                snprintf(sum->ckpt_task_names[i], sizeof sum->ckpt_task_names[i], "%s", sum->ckpt_tasks[i].task);
                sum->ckpt_tasks[i].task = sum->ckpt_task_names[i];
            }
        }
        sum->ckpt_max_sync_us = sl_env_checkpoint_max_sync_us(env);
        sum->seconds = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    }
    sl_env_destroy(env);
    return rc;
}
