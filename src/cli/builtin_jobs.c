/*
 * builtin_jobs.c — the jobs compiled into the `sluice` command that a
 * cluster runs by name (`sluice run -m host:port fraud --events 1M ...`):
 * the JobManager and every TaskManager register them with the job loader
 * (runtime/job_loader.h) at start.
 *
 *   fraud   the S1 pipeline of examples/fraud_job.c on the built-in
 *           generator: --events N, --cards N, --splits N, --rate R,
 *           --seed S, --late-fraction F, -p P, --window-ms MS, --checkpoint-interval MS,
 *           --checkpoint-dir DIR, --exactly-once-output DIR, --output FILE,
 *           --late-output FILE (the options of the embedded `sluice run`)
 *   nexmark QUERY EVENTS [--p=P] [--checkpoint=MS]
 *           a Nexmark query over the generator into a counting sink, as
 *           nexmark_job.so (examples/nexmark/nexmark_job_build.c)
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cluster.h"
#include "fraud_job.h"
#include "queries.h"
#include "runtime/job_loader.h"

static int fraud_main(sl_env_t *env, int argc, char **argv) {
    fraud_opts_t o = fraud_defaults();
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            fprintf(stderr, "fraud: option '%s' needs a value\n", a);
            return SL_EINVAL;
        }
        i++;
        if (!strcmp(a, "--events")) o.gen.count = atoll(v);
        else if (!strcmp(a, "--cards")) o.gen.cards = atoll(v);
        else if (!strcmp(a, "--splits")) o.gen.splits = atoi(v);
        else if (!strcmp(a, "--rate")) o.gen.rate = atoll(v);
        else if (!strcmp(a, "--seed")) o.gen.seed = strtoull(v, NULL, 10);
        else if (!strcmp(a, "--late-fraction")) o.gen.late_fraction = atof(v);
        else if (!strcmp(a, "-p") || !strcmp(a, "--parallelism")) o.parallelism = atoi(v);
        else if (!strcmp(a, "--window-ms")) o.window_ms = atoll(v);
        else if (!strcmp(a, "--checkpoint-interval")) o.checkpoint_interval_ms = atoll(v);
        else if (!strcmp(a, "--checkpoint-dir")) o.checkpoint_dir = v;
        else if (!strcmp(a, "--exactly-once-output")) o.exactly_once_dir = v;
        else if (!strcmp(a, "--output")) o.output = v;
        else if (!strcmp(a, "--late-output")) o.late_output = v;
        else {
            fprintf(stderr, "fraud: unknown option '%s'\n", a);
            return SL_EINVAL;
        }
    }
    sl_env_set_job_name(env, "fraud-detection");
    char err[1024];
    int rc = fraud_build(env, &o, err, sizeof err);
    if (rc < 0) fprintf(stderr, "fraud: %s\n", err);
    return rc;
}

void sl_cli_register_builtin_jobs(void) {
    sl_job_register_builtin("fraud", fraud_main);
    sl_job_register_builtin("nexmark", nx_job_build);
}
