/* restart_strategy.c — see restart_strategy.h. */
#include "jobmanager/restart_strategy.h"

#include <math.h>

#include "common/common.h"

void sl_restart_init(sl_restart_strategy_t *s, const sl_restart_config_t *c, uint64_t seed) {
    memset(s, 0, sizeof *s);
    s->cfg = *c;
    s->current_backoff_ms = c->initial_backoff_ms;
    s->last_failure_ms = INT64_MIN;
    s->rng = seed ? seed : 0x9E3779B97F4A7C15ull;
    if (c->kind == SL_RESTART_FAILURE_RATE) s->times = sl_calloc((size_t)c->max_failures + 1, sizeof *s->times);
}

void sl_restart_free(sl_restart_strategy_t *s) {
    sl_free(s->times);
    s->times = NULL;
}

/* A uniform double in [0, 1) (xorshift64*). */
static double rnd01(sl_restart_strategy_t *s) {
    s->rng ^= s->rng >> 12;
    s->rng ^= s->rng << 25;
    s->rng ^= s->rng >> 27;
    return (double)((s->rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

static void exponential(sl_restart_strategy_t *s, int64_t now) {
    const sl_restart_config_t *c = &s->cfg;
    /* A quiet period of reset-backoff-threshold since the last failure:
     * the job was healthy, start over (Flink's ExponentialDelay). */
    if (s->last_failure_ms != INT64_MIN && now - s->last_failure_ms >= c->reset_threshold_ms) {
        s->current_backoff_ms = c->initial_backoff_ms;
        s->attempts_in_row = 0;
    } else if (s->last_failure_ms != INT64_MIN) {
        double next = (double)s->current_backoff_ms * c->multiplier;
        s->current_backoff_ms = next >= (double)c->max_backoff_ms ? c->max_backoff_ms : (int64_t)next;
    }
    s->last_failure_ms = now;
    s->attempts_in_row++;
    s->can_restart = s->attempts_in_row <= c->attempts_before_reset;
    int64_t b = s->current_backoff_ms;
    if (c->jitter > 0) {
        double j = (double)b * c->jitter * (2.0 * rnd01(s) - 1.0);
        b += (int64_t)j;
        if (b < 0) b = 0;
        if (b > c->max_backoff_ms) b = c->max_backoff_ms;
    }
    s->backoff_ms = b;
}

static void failure_rate(sl_restart_strategy_t *s, int64_t now) {
    const sl_restart_config_t *c = &s->cfg;
    int cap = c->max_failures + 1;
    s->times[s->head] = now;
    s->head = (s->head + 1) % cap;
    if (s->ntimes < cap) s->ntimes++;
    /* More than max_failures failures inside the interval: give up.  With
     * the ring full, the oldest of the last max_failures+1 is at head. */
    bool too_many = s->ntimes == cap && now - s->times[s->head] < c->interval_ms;
    s->can_restart = !too_many;
    s->backoff_ms = c->delay_ms;
}

bool sl_restart_notify_failure(sl_restart_strategy_t *s, int64_t now_ms) {
    switch (s->cfg.kind) {
    case SL_RESTART_NONE:
        s->can_restart = false;
        s->backoff_ms = 0;
        break;
    case SL_RESTART_FIXED_DELAY:
        s->failures++;
        s->can_restart = s->failures <= s->cfg.attempts;
        s->backoff_ms = s->cfg.delay_ms;
        break;
    case SL_RESTART_EXPONENTIAL_DELAY: exponential(s, now_ms); break;
    case SL_RESTART_FAILURE_RATE: failure_rate(s, now_ms); break;
    }
    return s->can_restart;
}
