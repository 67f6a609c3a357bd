/*
 * nexmark_job_build.c — the Nexmark queries as a job (sluice/job.h):
 * `QUERY EVENTS [--p=P] [--checkpoint=MS]` builds QUERY (q0 ... q11, ij,
 * cep; queries.h) over EVENTS generated events into a counting sink.  Two
 * entry points use it: nexmark_job.so (`sluice run nexmark_job.so ...`) and
 * the `sluice` command's built-in job "nexmark" (`sluice run -m HOST:PORT
 * nexmark q5 1000000`, src/cli/builtin_jobs.c).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "queries.h"
#include "sluice/job.h"

int nx_job_build(sl_env_t *env, int argc, char **argv) {
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
