/*
 * job_loader.h — turns a job artifact and its arguments into the job's
 * plan and code: the step both a JobManager (for the plan it schedules)
 * and every TaskManager (for the functions its subtasks call) take.
 *
 * An artifact is "builtin:NAME" (a job compiled into the `sluice` command,
 * registered with sl_job_register_builtin) or the path of a shared object
 * exporting sluice_job_main (sluice/job.h), loaded with dlopen.  The entry
 * builds the job on a fresh environment; the environment is kept with the
 * plan, because the code table points into it.
 */
#ifndef SL_JOB_LOADER_H
#define SL_JOB_LOADER_H

#include "plan/job_code.h"
#include "plan/plan.h"
#include "sluice/job.h"

typedef struct sl_loaded_job {
    sl_env_t *env;
    sl_plan_t *plan;
    sl_job_code_t code;
    void *dl;                 /* dlopen handle, or NULL */
} sl_loaded_job_t;

/* Registers a built-in job (before any load; not thread-safe). */
void sl_job_register_builtin(const char *name, sl_job_main_fn fn);
/* The built-in names, for messages ("fraud, eo-window"). */
void sl_job_builtin_names(char *buf, size_t cap);
/* The entry point of artifact ("builtin:NAME" or a shared object's path)
 * without building it: *fn, the dlopen handle (*dl, NULL for a built-in
 * job; the caller dlcloses it after the job ended) and the job's default
 * name (*name: the built-in's name or the file's base name, pointing into
 * artifact).  0, or an error naming the artifact in err. */
int sl_job_entry(const char *artifact, sl_job_main_fn *fn, void **dl, const char **name, char *err, size_t errlen);
/* Loads artifact and builds it with args (args[0] = the job's name as the
 * user gave it).  0, or an error naming the artifact in err. */
int sl_job_load(const char *artifact, int nargs, char **args, sl_loaded_job_t **out, char *err, size_t errlen);
void sl_loaded_job_free(sl_loaded_job_t *j);

#endif
