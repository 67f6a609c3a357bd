/*
 * state_query_api.c — the public side of queries of a running embedded
 * job's keyed state (sluice/state_query.h): the environment's running job
 * answers through runtime/local.c, which asks its JobManager
 * (jobmanager/state_query.h).
 */
#include <stdlib.h>

#include "api/env_int.h"
#include "runtime/local.h"
#include "sluice/state_query.h"

/* The C code of an HTTP status. */
static int code_of(int http) {
    switch (http) {
    case 200: return 0;
    case 400: return SL_EINVAL;
    case 404: return SL_ENOTFOUND;
    case 502: return SL_EFORMAT;
    default: return SL_ESTATE; /* 409 not running, 504 no answer, 500 the lookup failed */
    }
}

SL_API int sl_env_query_state(sl_env_t *env, const char *uid, const char *state, const char *key, const char *ns,
                              int64_t timeout_ms, char **json, int *http) {
    char *body = NULL;
    int status;
    pthread_mutex_lock(&env->run_mu);
    if (env->running) {
        status = sl_local_job_query_state(env->running, uid, state, key, ns, timeout_ms, &body);
    } else {
        status = 409;
        body = sl_strdup("{\"errors\":[\"no job is running (query while sl_env_execute runs)\"]}");
    }
    pthread_mutex_unlock(&env->run_mu);
    if (http) *http = status;
    *json = strdup(body); /* the caller frees with free() */
    sl_free(body);
    if (!*json) abort();
    return code_of(status);
}
