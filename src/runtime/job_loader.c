/* job_loader.c — artifacts to plans (job_loader.h). */
#include "runtime/job_loader.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>

#include "api/plan_build.h"
#include "common/common.h"

#define MAX_BUILTINS 64

static struct {
    const char *name;
    sl_job_main_fn fn;
} builtins[MAX_BUILTINS];
static int nbuiltins;

void sl_job_register_builtin(const char *name, sl_job_main_fn fn) {
    if (nbuiltins == MAX_BUILTINS) return;
    builtins[nbuiltins].name = name;
    builtins[nbuiltins++].fn = fn;
}

void sl_job_builtin_names(char *buf, size_t cap) {
    size_t k = 0;
    buf[0] = 0;
    for (int i = 0; i < nbuiltins && k < cap; i++)
        k += (size_t)snprintf(buf + k, cap - k, "%s%s", i ? ", " : "", builtins[i].name);
}

int sl_job_entry(const char *artifact, sl_job_main_fn *fn_out, void **dl_out, const char **name_out, char *err,
                 size_t errlen) {
    sl_job_main_fn fn = NULL;
    void *dl = NULL;
    const char *name = artifact;
    *fn_out = NULL;
    *dl_out = NULL;
    if (!strncmp(artifact, "builtin:", 8)) {
        name = artifact + 8;
        for (int i = 0; i < nbuiltins && !fn; i++)
            if (!strcmp(builtins[i].name, name)) fn = builtins[i].fn;
        if (!fn) {
            char names[512];
            sl_job_builtin_names(names, sizeof names);
            return sl_errf(err, errlen, SL_ENOTFOUND, "job '%s': no such built-in job (built in: %s)", name,
                           names[0] ? names : "none");
        }
    } else {
        dl = dlopen(artifact, RTLD_NOW | RTLD_LOCAL);
        if (!dl) return sl_errf(err, errlen, SL_EINVAL, "job artifact '%s' cannot be loaded: %s", artifact, dlerror());
        *(void **)&fn = dlsym(dl, SL_JOB_MAIN_SYMBOL);
        if (!fn) {
            dlclose(dl);
            return sl_errf(err, errlen, SL_EINVAL,
                           "job artifact '%s' has no entry point %s (declare it with SL_JOB_MAIN, sluice/job.h)",
                           artifact, SL_JOB_MAIN_SYMBOL);
        }
        const char *slash = strrchr(artifact, '/');
        name = slash ? slash + 1 : artifact;
    }
    *fn_out = fn;
    *dl_out = dl;
    *name_out = name;
    return 0;
}

int sl_job_load(const char *artifact, int nargs, char **args, sl_loaded_job_t **out, char *err, size_t errlen) {
    *out = NULL;
    sl_job_main_fn fn;
    void *dl;
    const char *name;
    int erc = sl_job_entry(artifact, &fn, &dl, &name, err, errlen);
    if (erc < 0) return erc;
    sl_loaded_job_t *j = sl_calloc(1, sizeof *j);
    j->dl = dl;
    j->env = sl_env_new();
    char *argv0 = sl_strdup(name);
    char *dot = strstr(argv0, ".so");
    if (dot) *dot = 0;
    char **argv = sl_calloc((size_t)nargs + 2, sizeof *argv);
    argv[0] = argv0;
    for (int i = 0; i < nargs; i++) argv[i + 1] = args[i];
    int rc = fn(j->env, nargs + 1, argv);
    const char *jname = j->env->job_name ? j->env->job_name : argv0;
    if (rc == 0 && j->env->err_rc) rc = j->env->err_rc;
    if (rc < 0)
        sl_errf(err, errlen, rc, "job '%s' (%s) could not be built: %s", jname, artifact,
                j->env->err[0] ? j->env->err : sl_strerror(rc));
    if (rc == 0 && j->env->nnodes == 0) rc = sl_errf(err, errlen, SL_EINVAL, "job '%s' (%s) has no operators", jname, artifact);
    if (rc == 0) rc = sl_plan_build(j->env, jname, &j->plan, &j->code, err, errlen);
    sl_free(argv);
    sl_free(argv0);
    if (rc < 0) {
        sl_loaded_job_free(j);
        return rc;
    }
    *out = j;
    return 0;
}

void sl_loaded_job_free(sl_loaded_job_t *j) {
    if (!j) return;
    if (j->plan) {
        sl_plan_free(j->plan);
        sl_free(j->plan);
    }
    sl_job_code_free(&j->code);
    sl_env_destroy(j->env);
    if (j->dl) dlclose(j->dl);
    sl_free(j);
}
