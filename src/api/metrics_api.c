/*
 * metrics_api.c — the public side of live metrics (sluice/metrics.h): the
 * environment keeps the listener, sl_env_execute hands it to the job.
 */
#include "api/env_int.h"

void sl_env_set_metrics_listener(sl_env_t *env, sl_metrics_listener_fn fn, void *ctx) {
    env->metrics_fn = fn;
    env->metrics_ctx = fn ? ctx : NULL;
}
