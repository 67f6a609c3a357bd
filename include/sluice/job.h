/*
 * job.h — a job that `sluice run` submits to a cluster.
 *
 * In a cluster the job's code runs on every process: the JobManager builds
 * the job to get its plan, and each TaskManager builds it again to get the
 * functions the plan's operators call.  So a job is not a program that
 * calls sl_env_execute but an entry point that only builds: it receives a
 * fresh environment and the job's arguments, adds its sources, operators
 * and sinks, and returns 0 (or a negative SL_E* code after recording why
 * with the environment's error).  Built from the same arguments it must
 * build the same job on every process; a TaskManager whose build differs
 * (another version of the artifact, arguments read from a local file that
 * differs) refuses the deployment with a message naming both fingerprints.
 *
 * A job in a shared object exports its entry with SL_JOB_MAIN:
 *
 *     static int build(sl_env_t *env, int argc, char **argv) { ... return 0; }
 *     SL_JOB_MAIN(build)
 *
 * and is compiled as a shared object without linking libsluice (the
 * `sluice` command provides the library): `cc -shared -fPIC job.c -o job.so`.
 * `sluice run job.so ARGS` submits it to the JobManager (-m HOST:PORT, or
 * the configuration's rest.address and rest.port); `sluice run -t local
 * job.so ARGS` (Flink's execution target "local") runs it in the `sluice`
 * process instead, as sl_env_execute would.
 */
#ifndef SLUICE_JOB_H
#define SLUICE_JOB_H

#include "sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Builds the job on env from its arguments (argv[0] is the job's name). */
typedef int (*sl_job_main_fn)(sl_env_t *env, int argc, char **argv);

#define SL_JOB_MAIN_SYMBOL "sluice_job_main"
#define SL_JOB_MAIN(fn)                                                                                  \
    __attribute__((visibility("default"))) int sluice_job_main(sl_env_t *env, int argc, char **argv); \
    __attribute__((visibility("default"))) int sluice_job_main(sl_env_t *env, int argc, char **argv) { \
        return fn(env, argc, argv);                                                                      \
    }

/* The name the job runs under (its checkpoint directory's name, what
 * `sluice list` shows); default: the artifact's name. */
SL_API void sl_env_set_job_name(sl_env_t *env, const char *name);

#ifdef __cplusplus
}
#endif

#endif
