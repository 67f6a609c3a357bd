/*
 * restart_strategy.h — when and after what delay a failed job restarts
 * (Flink's RestartBackoffTimeStrategy and its three implementations).
 *
 *   fixed-delay:       at most `attempts` restarts, `delay` apart.
 *   exponential-delay: the delay starts at initial-backoff and is
 *                      multiplied by backoff-multiplier after each
 *                      failure, up to max-backoff, with +/- jitter;
 *                      it returns to initial-backoff when the job ran
 *                      reset-backoff-threshold without failing; at most
 *                      attempts-before-reset-backoff restarts in a row.
 *   failure-rate:      restarts while no more than max-failures failures
 *                      fell within the last failure-rate-interval; each
 *                      restart waits `delay`.
 *   none:              never restarts.
 *
 * Pure logic over times the caller passes in (ms), so that tests drive it
 * with a manual clock.  Not thread-safe; the caller (the environment's
 * restart loop) owns it.
 */
#ifndef SL_RESTART_STRATEGY_H
#define SL_RESTART_STRATEGY_H

#include <stdbool.h>
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

typedef struct sl_restart_strategy {
    sl_restart_config_t cfg;
    int failures;                 /* fixed-delay: restarts so far */
    /* exponential-delay */
    int64_t current_backoff_ms;
    int64_t last_failure_ms;
    int attempts_in_row;
    uint64_t rng;
    /* failure-rate: times of the last max_failures + 1 failures (ring) */
    int64_t *times;
    int ntimes, head;
    /* the decision of the last notify_failure */
    bool can_restart;
    int64_t backoff_ms;
} sl_restart_strategy_t;

/* Flink's defaults for each kind (fixed-delay: 3 attempts, 1 s). */
sl_restart_config_t sl_restart_defaults(sl_restart_kind_t kind);
/* Checks a configuration: 0, or SL_EINVAL with err naming the setting. */
int sl_restart_validate(const sl_restart_config_t *c, char *err, size_t errlen);
void sl_restart_init(sl_restart_strategy_t *s, const sl_restart_config_t *c, uint64_t seed);
void sl_restart_free(sl_restart_strategy_t *s);
/* A failure at now_ms: decides whether the job may restart and after
 * which delay (see can_restart / backoff_ms).  Returns can_restart. */
bool sl_restart_notify_failure(sl_restart_strategy_t *s, int64_t now_ms);
/* "fixed-delay", ...; for messages. */
const char *sl_restart_kind_name(sl_restart_kind_t k);

#endif
