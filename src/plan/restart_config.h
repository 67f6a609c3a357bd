/*
 * restart_config.h — which restart strategy a job uses and its settings
 * (Flink's restart-strategy.* keys), as plain data: the builder sets it,
 * the plan carries it, the JobManager's restart strategy
 * (jobmanager/restart_strategy.h) runs it.
 */
#ifndef SL_RESTART_CONFIG_H
#define SL_RESTART_CONFIG_H

#include <stddef.h>
#include <stdint.h>

typedef enum sl_restart_kind {
    SL_RESTART_NONE = 0,
    SL_RESTART_FIXED_DELAY,
    SL_RESTART_EXPONENTIAL_DELAY,
    SL_RESTART_FAILURE_RATE,
} sl_restart_kind_t;

typedef struct sl_restart_config {
    sl_restart_kind_t kind;
    /* fixed-delay */
    int attempts;
    int64_t delay_ms;             /* fixed-delay and failure-rate */
    /* exponential-delay */
    int64_t initial_backoff_ms;
    int64_t max_backoff_ms;
    double multiplier;
    int64_t reset_threshold_ms;
    double jitter;                /* 0..1 */
    int attempts_before_reset;    /* INT32_MAX: no limit */
    /* failure-rate */
    int max_failures;
    int64_t interval_ms;
} sl_restart_config_t;

/* Flink's defaults for each kind (fixed-delay: 3 attempts, 1 s). */
sl_restart_config_t sl_restart_defaults(sl_restart_kind_t kind);
/* Checks a configuration: 0, or SL_EINVAL with err naming the setting. */
int sl_restart_validate(const sl_restart_config_t *c, char *err, size_t errlen);
/* "fixed-delay", ...; for messages. */
const char *sl_restart_kind_name(sl_restart_kind_t k);

#endif
