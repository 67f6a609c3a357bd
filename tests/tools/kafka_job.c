/*
 * kafka_job — a checkpointed Kafka -> Kafka job for the kill tests and the
 * throughput figure: Kafka source (bounded: up to the input's end offsets at
 * start, JSON {id, ts}) -> map -> rebalance -> Kafka sink (JSON, delivery
 * exactly-once unless --at-least-once).
 *
 *   kafka_job BOOTSTRAP IN OUT CKPT_DIR PREFIX [--restore] [--p=N]
 *             [--interval=MS] [--throttle=K] [--at-least-once] [--bench]
 *
 * --restore resumes from the latest complete checkpoint in CKPT_DIR, if
 * there is one (a kill before the first checkpoint starts afresh).  Restarts
 * inside the process are off: any failure ends the process with status 1
 * and the message on stderr.  --bench prints records/s.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "sluice/kafka.h"
#include "sluice/sluice.h"

static int throttle; /* --throttle=K: 1 ms pause every K records (per subtask), so a run spans checkpoints */

static int copy_row(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    if (throttle && sl_row_i64(&in->row, 0) % throttle == 0) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    sl_rw_copy_row(out, &in->row);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 6) {
        fprintf(stderr, "usage: kafka_job BOOTSTRAP IN OUT CKPT_DIR PREFIX [--restore] [--p=N] [--interval=MS] "
                        "[--at-least-once] [--bench]\n");
        return 2;
    }
    const char *bootstrap = argv[1], *in = argv[2], *out = argv[3], *ckpt = argv[4], *prefix = argv[5];
    bool restore = false, alo = false, bench = false;
    int par = 2;
    long long interval = 50;
    for (int i = 6; i < argc; i++) {
        restore = restore || strcmp(argv[i], "--restore") == 0;
        alo = alo || strcmp(argv[i], "--at-least-once") == 0;
        bench = bench || strcmp(argv[i], "--bench") == 0;
        if (strncmp(argv[i], "--p=", 4) == 0) par = atoi(argv[i] + 4);
        if (strncmp(argv[i], "--interval=", 11) == 0) interval = atoll(argv[i] + 11);
        if (strncmp(argv[i], "--throttle=", 11) == 0) throttle = atoi(argv[i] + 11);
    }
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, par);
    sl_env_enable_checkpointing(env, interval, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, ckpt);
    sl_env_set_checkpoints_retained(env, 2);
    sl_env_set_restart_fixed_delay(env, 0, 0);
    if (restore) {
        char job[4096], meta[4200];
        snprintf(job, sizeof job, "%s/kafka-job", ckpt);
        struct stat st;
        bool any = false;
        for (int i = 1; i < 100000 && !any; i++) {
            snprintf(meta, sizeof meta, "%s/chk-%d/_metadata", job, i);
            any = stat(meta, &st) == 0;
        }
        if (any && sl_env_restore_from(env, job) != 0) {
            fprintf(stderr, "kafka_job: %s\n", sl_env_error(env));
            return 1;
        }
        if (any) fprintf(stderr, "kafka_job: restored\n");
    }
    sl_schema_t *schema = sl_schema_parse("id BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0);
    sl_kafka_source_opts_t so = sl_kafka_source_defaults();
    so.bootstrap_servers = bootstrap;
    so.topics = in;
    so.schema = schema;
    so.bounded = true;
    sl_stream_t *s = sl_uid(sl_from_source(env, sl_kafka_source(&so), sl_wm_none(), "in"), "in");
    s = sl_uid(sl_map(s, copy_row, NULL, sl_schema_ref(schema)), "copy");
    sl_kafka_sink_opts_t ko = sl_kafka_sink_defaults();
    ko.bootstrap_servers = bootstrap;
    ko.topic = out;
    ko.delivery = alo ? SL_DELIVERY_AT_LEAST_ONCE : SL_DELIVERY_EXACTLY_ONCE;
    ko.transactional_id_prefix = prefix;
    ko.checkpoint_interval_ms = interval;
    sl_uid(sl_sink_to(sl_rebalance(s), sl_kafka_sink(&ko), "out"), "out");
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rc = sl_env_execute(env, "kafka-job");
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (rc != 0) fprintf(stderr, "kafka_job: %s\n", sl_env_error(env));
    if (bench && rc == 0) {
        double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
        int64_t n = 0;
        sl_env_operator_metrics(env, "out", &n, NULL);
        printf("records %lld in %.2f s: %.0f records/s, %lld checkpoints\n", (long long)n, secs, (double)n / secs,
               (long long)sl_env_checkpoints_completed(env));
    }
    sl_schema_unref(schema);
    sl_env_destroy(env);
    return rc == 0 ? 0 : 1;
}
