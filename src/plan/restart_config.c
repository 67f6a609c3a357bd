/* restart_config.c — defaults, names and validation of restart settings (restart_config.h). */
#include "plan/restart_config.h"

#include <math.h>
#include <stdio.h>

#include "common/common.h"

sl_restart_config_t sl_restart_defaults(sl_restart_kind_t kind) {
    sl_restart_config_t c = {.kind = kind,
                             .attempts = 3,
                             .delay_ms = 1000,
                             .initial_backoff_ms = 1000,
                             .max_backoff_ms = 60000,
                             .multiplier = 1.5,
                             .reset_threshold_ms = 3600000,
                             .jitter = 0.1,
                             .attempts_before_reset = INT32_MAX,
                             .max_failures = 1,
                             .interval_ms = 60000};
    return c;
}

const char *sl_restart_kind_name(sl_restart_kind_t k) {
    switch (k) {
    case SL_RESTART_NONE: return "none";
    case SL_RESTART_FIXED_DELAY: return "fixed-delay";
    case SL_RESTART_EXPONENTIAL_DELAY: return "exponential-delay";
    case SL_RESTART_FAILURE_RATE: return "failure-rate";
    }
    return "?";
}

int sl_restart_validate(const sl_restart_config_t *c, char *err, size_t errlen) {
    switch (c->kind) {
    case SL_RESTART_NONE: return 0;
    case SL_RESTART_FIXED_DELAY:
        if (c->attempts < 0 || c->delay_ms < 0)
            return sl_errf(err, errlen, SL_EINVAL,
                           "restart-strategy fixed-delay: attempts (%d) and delay (%lld ms) must not be negative",
                           c->attempts, (long long)c->delay_ms);
        return 0;
    case SL_RESTART_EXPONENTIAL_DELAY:
        if (c->initial_backoff_ms < 1 || c->max_backoff_ms < c->initial_backoff_ms)
            return sl_errf(err, errlen, SL_EINVAL,
                           "restart-strategy exponential-delay: initial-backoff %lld ms must be >= 1 ms and <= "
                           "max-backoff %lld ms",
                           (long long)c->initial_backoff_ms, (long long)c->max_backoff_ms);
        if (!(c->multiplier >= 1.0) || !isfinite(c->multiplier))
            return sl_errf(err, errlen, SL_EINVAL, "restart-strategy exponential-delay: backoff-multiplier %g must be >= 1",
                           c->multiplier);
        if (!(c->jitter >= 0.0 && c->jitter <= 1.0))
            return sl_errf(err, errlen, SL_EINVAL,
                           "restart-strategy exponential-delay: jitter-factor %g must be between 0 and 1", c->jitter);
        if (c->reset_threshold_ms < 1 || c->attempts_before_reset < 1)
            return sl_errf(err, errlen, SL_EINVAL,
                           "restart-strategy exponential-delay: reset-backoff-threshold (%lld ms) and "
                           "attempts-before-reset-backoff (%d) must be >= 1",
                           (long long)c->reset_threshold_ms, c->attempts_before_reset);
        return 0;
    case SL_RESTART_FAILURE_RATE:
        if (c->max_failures < 1 || c->interval_ms < 1 || c->delay_ms < 0)
            return sl_errf(err, errlen, SL_EINVAL,
                           "restart-strategy failure-rate: max-failures-per-interval (%d) and failure-rate-interval "
                           "(%lld ms) must be >= 1, delay (%lld ms) >= 0",
                           c->max_failures, (long long)c->interval_ms, (long long)c->delay_ms);
        return 0;
    }
    return sl_errf(err, errlen, SL_EINVAL, "restart strategy: unknown kind %d", (int)c->kind);
}

