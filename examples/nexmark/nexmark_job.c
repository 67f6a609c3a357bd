/*
 * nexmark_job.c — the Nexmark queries as a job for a cluster (sluice/job.h):
 * `sluice run nexmark_job.so QUERY EVENTS [--p=P] [--checkpoint=MS]` runs
 * QUERY (q0 ... q11, ij, cep; queries.h) over EVENTS generated events into
 * a counting sink, on whatever TaskManagers the JobManager has.  The same
 * queries as the `nexmark` driver, which runs them in one process, so
 * bench/nexmark/cluster.sh can put one against the other.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "queries.h"
#include "sluice/job.h"

static int build(sl_env_t *env, int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: nexmark_job QUERY EVENTS [--p=P] [--checkpoint=MS]\n");
        return SL_EINVAL;
    }
    const nx_query_t *q = nx_query_find(argv[1]);
    if (!q) {
        fprintf(stderr, "nexmark_job: no query '%s'\n", argv[1]);
        return SL_EINVAL;
    }
    int p = 2;
    long long ck = 0;
    for (int i = 3; i < argc; i++) {
        if (!strncmp(argv[i], "--p=", 4)) p = atoi(argv[i] + 4);
        if (!strncmp(argv[i], "--checkpoint=", 13)) ck = atoll(argv[i] + 13);
    }
    char name[64];
    snprintf(name, sizeof name, "nexmark-%s", q->name);
    sl_env_set_job_name(env, name);
    sl_env_set_parallelism(env, p);
    if (ck > 0) sl_env_enable_checkpointing(env, ck, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_nexmark_opts_t gen = sl_nexmark_defaults();
    gen.events = atoll(argv[2]);
    gen.fields = q->fields;
    sl_stream_t *events =
        sl_uid(sl_from_source(env, sl_nexmark_source(gen), sl_wm_bounded("date_time", 4000), "nexmark"), "nexmark-source");
    nx_query_opts_t qo = nx_query_defaults();
    sl_stream_t *out = q->build(events, &qo);
    if (!out) return SL_EINVAL;
    sl_uid(sl_sink_to(out, sl_counting_sink(NULL), "results"), "results");
    return 0;
}

SL_JOB_MAIN(build)
