/*
 * info.c — `sluice info [-c NAME] JOB [args...]` (Flink's `flink info`):
 * builds the job locally, as a JobManager would, and prints its plan
 * without running it — the operators with their uids, parallelism and how
 * each is fed (Flink's execution-plan JSON), then the chained tasks and
 * the job's checkpointing settings.  JOB is a job's shared object (a '/'
 * or ".so" in it) or a built-in job's name.  Exit codes: 0, 1 (the job
 * could not be built: the message says why), 2 (usage).
 */
#include <stdio.h>
#include <string.h>

#include "cli/client.h"
#include "cli/cluster.h"
#include "common/common.h"
#include "runtime/job_loader.h"

int sl_cli_info(int argc, char **argv) {
    const char *name = NULL;
    int i = 0;
    for (; i < argc; i++) {
        if (!strcmp(argv[i], "-c") || !strcmp(argv[i], "--class")) {
            if (i + 1 >= argc) {
                fprintf(stderr, "sluice info: %s needs a value\n", argv[i]);
                return 2;
            }
            name = argv[++i];
        } else if (argv[i][0] == '-' && argv[i][1]) {
            fprintf(stderr, "sluice info: unknown option '%s' (sluice info [-c NAME] JOB [args...])\n", argv[i]);
            return 2;
        } else {
            break;
        }
    }
    if (i >= argc) {
        fprintf(stderr, "sluice info: no job given (a built-in job's name or a job's shared object)\n");
        return 2;
    }
    const char *job = argv[i];
    bool file = strchr(job, '/') || strstr(job, ".so");
    char artifact[4200];
    snprintf(artifact, sizeof artifact, "%s%s", file ? "" : "builtin:", job);
    sl_cli_register_builtin_jobs();
    int nargs = argc - i;
    char **args = sl_calloc((size_t)nargs + 1, sizeof *args);
    args[0] = (char *)(name ? name : job);
    for (int k = 1; k < nargs; k++) args[k] = argv[i + k];
    sl_loaded_job_t *j = NULL;
    char err[2048];
    int rc = sl_job_load(artifact, nargs, args, &j, err, sizeof err);
    sl_free(args);
    if (rc < 0) {
        fprintf(stderr, "sluice info: %s\n", err);
        return 1;
    }
    const sl_plan_t *p = j->plan;
    sl_buf_t b = {0};
    sl_plan_flink_json(p, &b);
    printf("----------------------- Execution Plan -----------------------\n");
    printf("%.*s\n", (int)b.len, b.p ? (const char *)b.p : "");
    printf("--------------------------------------------------------------\n");
    sl_buf_free(&b);
    printf("Job '%s' (%s): %d operators in %d tasks, %d subtasks, max parallelism %d\n", p->job_name, p->job_id,
           p->nnodes, p->nvertices, p->ntasks, p->cfg.max_parallelism);
    for (int v = 0; v < p->nvertices; v++)
        printf("  task %d: %s (parallelism %d, slot sharing group %s)\n", v, p->vertices[v].name,
               p->vertices[v].parallelism, p->vertices[v].slot_group);
    if (p->cfg.ckpt_enabled)
        printf("Checkpoints every %lld ms into %s\n", (long long)p->cfg.ckpt.interval_ms,
               p->cfg.ckpt_dir[0] ? p->cfg.ckpt_dir : "memory only (no execution.checkpointing.dir)");
    else
        printf("Checkpointing is off\n");
    char names[2000];
    if (sl_plan_derived_uids(p, names, sizeof names) > 0)
        printf("Operators without sl_uid (their state follows a uid derived from their place in the graph): %s\n",
               names);
    sl_loaded_job_free(j);
    return 0;
}
