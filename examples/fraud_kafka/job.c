/*
 * job.c — the fraud pipeline as a job for a cluster (sluice/job.h):
 *
 *     sluice run fraud_kafka_job.so --bootstrap ... [the options of `fraud_kafka run`] [--groups]
 *
 * builds the same job as `fraud_kafka run` on every process; --groups puts
 * the Kafka source, the window and the sinks into three slot sharing
 * groups, so three TaskManagers run one each, as the seeds draw it.
 * Restarts and restores are the JobManager's (restart strategy, latest
 * checkpoint); `--restore` is for the embedded program only.
 */
#include <stdio.h>

#include "fraud_kafka.h"
#include "sluice/job.h"

static fk_keep_t keep; /* outlives the build: the job's functions point into it */

static int build(sl_env_t *env, int argc, char **argv) {
    fk_opts_t o = fk_defaults();
    if (fk_parse_run(argc - 1, argv + 1, &o)) return SL_EINVAL;
    o.restore = false;
    bool restored = false;
    char err[2048];
    int rc = fk_build(env, &o, &keep, &restored, err, sizeof err);
    if (rc < 0) fprintf(stderr, "fraud_kafka_job: %s\n", err);
    return rc;
}

SL_JOB_MAIN(build)
