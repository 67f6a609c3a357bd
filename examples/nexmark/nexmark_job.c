/*
 * nexmark_job.c — the Nexmark queries as a job for a cluster (sluice/job.h):
 * `sluice run nexmark_job.so QUERY EVENTS [--p=P] [--checkpoint=MS]` runs
 * QUERY (q0 ... q11, ij, cep; queries.h) over EVENTS generated events into
 * a counting sink, on whatever TaskManagers the JobManager has.  The same
 * queries as the `nexmark` driver, which runs them in one process, so
 * bench/nexmark/cluster.sh can put one against the other.  The job itself
 * is nexmark_job_build.c, which the `sluice` command also carries as its
 * built-in job "nexmark".
 */
#include "queries.h"
#include "sluice/job.h"

SL_JOB_MAIN(nx_job_build)
