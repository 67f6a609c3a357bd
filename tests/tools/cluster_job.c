/*
 * cluster_job.c — the job of the cluster tests, as a shared object that
 * `sluice run` submits (sluice/job.h): the S1 shape on the built-in
 * generator — transactions (4 splits, rate-limited, no late events) ->
 * key_by(card_id) -> 1-minute tumbling windows with count and sum ->
 * exactly-once file sink — checkpointed every 50 ms.  With --groups the
 * source, the window and the sink are in three slot sharing groups
 * ("source", "window", "sinks"), so that three one-slot TaskManagers run
 * one each, as the seeds draw it.
 *
 *   cluster_job.so OUT_DIR CKPT_DIR EVENTS [--p=N] [--groups] [--rate=R]
 *   cluster_job.so --state-query N CARDS P heap|rocksdb   (sq_counter_job.h: test_state_query_cluster)
 *
 * SLUICE_CLUSTER_JOB_SKEW in a process's environment renames the window
 * operator there, so that its plan differs (the plan-mismatch test).
 * Compiled without libsluice: the `sluice` process provides it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "card_windows.h"
#include "sq_counter_job.h"
#include "sluice/job.h"

static int build(sl_env_t *env, int argc, char **argv) {
    if (argc >= 6 && !strcmp(argv[1], "--state-query")) { /* cluster_job.so --state-query N CARDS P heap|rocksdb */
        sl_env_set_job_name(env, "state-query");
        sl_env_set_max_parallelism(env, 128);
        if (!strcmp(argv[5], "rocksdb")) sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);
        sqj_build(env, atoll(argv[2]), atoi(argv[3]), atoi(argv[4]));
        return 0;
    }
    if (argc < 4) {
        fprintf(stderr, "usage: cluster_job OUT_DIR CKPT_DIR EVENTS [--p=N] [--groups] [--rate=R]\n");
        return SL_EINVAL;
    }
    const char *out = argv[1], *ckpt = argv[2];
    long long n = atoll(argv[3]);
    int par = 2;
    bool groups = false;
    long long rate = 100000;
    for (int i = 4; i < argc; i++) {
        if (!strncmp(argv[i], "--p=", 4)) par = atoi(argv[i] + 4);
        if (!strcmp(argv[i], "--groups")) groups = true;
        if (!strncmp(argv[i], "--rate=", 7)) rate = atoll(argv[i] + 7);
    }
    sl_env_set_job_name(env, "cluster-job");
    sl_env_set_parallelism(env, par);
    sl_env_enable_checkpointing(env, 50, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, ckpt);
    sl_env_set_checkpoints_retained(env, 2);
    sl_env_set_restart_fixed_delay(env, 1000, 200);
    sl_datagen_opts_t g = cw_generator(n, rate);
    sl_stream_t *s = sl_uid(sl_from_source(env, sl_datagen_source(g), sl_wm_bounded("ts", 5000), "gen"), "gen");
    if (groups) sl_slot_sharing_group(s, "source");
    s = cw_windows(s);
    sl_uid(s, "windows");
    if (getenv("SLUICE_CLUSTER_JOB_SKEW")) sl_name(s, "windows, built differently"); /* test_cluster: a plan mismatch */
    if (groups) sl_slot_sharing_group(s, "window");
    sl_stream_t *k = sl_sink_to(sl_rebalance(s), sl_exactly_once_file_sink(out, SL_FMT_CSV), "files");
    sl_uid(k, "files");
    if (groups) sl_slot_sharing_group(k, "sinks");
    return 0;
}

SL_JOB_MAIN(build)
