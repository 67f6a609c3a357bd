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
 * restart loop) owns it.  The configuration it runs is data in the plan
 * (plan/restart_config.h).
 */
#ifndef SL_RESTART_STRATEGY_H
#define SL_RESTART_STRATEGY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "plan/restart_config.h"

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

void sl_restart_init(sl_restart_strategy_t *s, const sl_restart_config_t *c, uint64_t seed);
void sl_restart_free(sl_restart_strategy_t *s);
/* A failure at now_ms: decides whether the job may restart and after
 * which delay (see can_restart / backoff_ms).  Returns can_restart. */
bool sl_restart_notify_failure(sl_restart_strategy_t *s, int64_t now_ms);

#endif
