/*
 * trigger.c — window triggers with Flink's behaviour: EventTimeTrigger,
 * ProcessingTimeTrigger, CountTrigger and PurgingTrigger.  A trigger holds
 * no mutable data: timers and per-window state go through the context
 * (sl_trigger_ctx_t), which the window operator backs with its timer
 * service and keyed state, and tests with a mock.
 */
#include <inttypes.h>
#include <stdio.h>

#include "common/common.h"
#include "windowing/window.h"

static sl_trigger_t *trigger_new(sl_trigger_kind_t kind) {
    sl_trigger_t *t = sl_calloc(1, sizeof *t);
    t->kind = kind;
    t->slot = -1;
    return t;
}

sl_trigger_t *sl_trigger_event_time(void) { return trigger_new(SL_TRIGGER_EVENT_TIME); }
sl_trigger_t *sl_trigger_processing_time(void) { return trigger_new(SL_TRIGGER_PROCESSING_TIME); }

sl_trigger_t *sl_trigger_count(int64_t n) {
    sl_trigger_t *t = trigger_new(SL_TRIGGER_COUNT);
    t->count = n;
    return t;
}

sl_trigger_t *sl_trigger_purging(sl_trigger_t *inner) {
    sl_trigger_t *t = trigger_new(SL_TRIGGER_PURGING);
    t->inner = inner;
    return t;
}

sl_trigger_t *sl_trigger_clone(const sl_trigger_t *t) {
    if (!t) return NULL;
    sl_trigger_t *c = sl_malloc(sizeof *c);
    *c = *t;
    c->inner = sl_trigger_clone(t->inner);
    return c;
}

void sl_trigger_free(sl_trigger_t *t) {
    while (t) {
        sl_trigger_t *inner = t->inner;
        sl_free(t);
        t = inner;
    }
}

/* PurgingTrigger: every FIRE of the inner trigger becomes FIRE_AND_PURGE. */
static inline sl_trigger_result_t purging(sl_trigger_result_t r) {
    return (r & SL_TRIGGER_FIRE) ? SL_TRIGGER_FIRE_AND_PURGE : r;
}

sl_trigger_result_t sl_trigger_on_element(const sl_trigger_t *t, sl_trigger_ctx_t *c, int64_t ts) {
    int64_t max = sl_window_max_ts(&c->window);
    switch (t->kind) {
    case SL_TRIGGER_EVENT_TIME:
        /* Behind the watermark already (a late element within the allowed
         * lateness): fire at once; else when the watermark gets there. */
        if (max <= c->watermark) return SL_TRIGGER_FIRE;
        c->ops->register_timer(c, SL_TIME_EVENT, max);
        return SL_TRIGGER_CONTINUE;
    case SL_TRIGGER_PROCESSING_TIME:
        c->ops->register_timer(c, SL_TIME_PROCESSING, max);
        return SL_TRIGGER_CONTINUE;
    case SL_TRIGGER_COUNT:
        if (c->ops->state_add(c, t->slot, &c->window, 1) >= t->count) {
            c->ops->state_clear(c, t->slot, &c->window);
            return SL_TRIGGER_FIRE;
        }
        return SL_TRIGGER_CONTINUE;
    case SL_TRIGGER_PURGING: return purging(sl_trigger_on_element(t->inner, c, ts));
    }
    return SL_TRIGGER_CONTINUE;
}

sl_trigger_result_t sl_trigger_on_event_time(const sl_trigger_t *t, sl_trigger_ctx_t *c, int64_t time) {
    switch (t->kind) {
    case SL_TRIGGER_EVENT_TIME:
        /* Other event-time timers of the window (the cleanup timer at
         * max + allowed lateness) do not fire it. */
        return time == sl_window_max_ts(&c->window) ? SL_TRIGGER_FIRE : SL_TRIGGER_CONTINUE;
    case SL_TRIGGER_PURGING: return purging(sl_trigger_on_event_time(t->inner, c, time));
    default: return SL_TRIGGER_CONTINUE;
    }
}

sl_trigger_result_t sl_trigger_on_processing_time(const sl_trigger_t *t, sl_trigger_ctx_t *c, int64_t time) {
    switch (t->kind) {
    case SL_TRIGGER_PROCESSING_TIME: return SL_TRIGGER_FIRE;
    case SL_TRIGGER_PURGING: return purging(sl_trigger_on_processing_time(t->inner, c, time));
    default: return SL_TRIGGER_CONTINUE;
    }
}

void sl_trigger_on_merge(const sl_trigger_t *t, sl_trigger_ctx_t *c, const sl_window_t *merged, int n) {
    int64_t max = sl_window_max_ts(&c->window);
    switch (t->kind) {
    case SL_TRIGGER_EVENT_TIME:
        /* Only a timer still ahead of the watermark: a merged window that
         * is already behind it fires on its next element. */
        if (max > c->watermark) c->ops->register_timer(c, SL_TIME_EVENT, max);
        return;
    case SL_TRIGGER_PROCESSING_TIME:
        if (max > c->ops->processing_time(c)) c->ops->register_timer(c, SL_TIME_PROCESSING, max);
        return;
    case SL_TRIGGER_COUNT: {
        /* Flink's mergePartitionedState on a ReducingState(Sum): the
         * merged windows' counts move into the result window. */
        int64_t sum = 0, v;
        bool any = false;
        for (int i = 0; i < n; i++) {
            if (c->ops->state_get(c, t->slot, &merged[i], &v)) {
                sum += v;
                any = true;
                c->ops->state_clear(c, t->slot, &merged[i]);
            }
        }
        if (any) c->ops->state_add(c, t->slot, &c->window, sum);
        return;
    }
    case SL_TRIGGER_PURGING: sl_trigger_on_merge(t->inner, c, merged, n); return;
    }
}

void sl_trigger_clear(const sl_trigger_t *t, sl_trigger_ctx_t *c) {
    int64_t max = sl_window_max_ts(&c->window);
    switch (t->kind) {
    case SL_TRIGGER_EVENT_TIME: c->ops->delete_timer(c, SL_TIME_EVENT, max); return;
    case SL_TRIGGER_PROCESSING_TIME: c->ops->delete_timer(c, SL_TIME_PROCESSING, max); return;
    case SL_TRIGGER_COUNT: c->ops->state_clear(c, t->slot, &c->window); return;
    case SL_TRIGGER_PURGING: sl_trigger_clear(t->inner, c); return;
    }
}

int sl_trigger_assign_slots(sl_trigger_t *t, int first) {
    for (; t; t = t->inner)
        if (t->kind == SL_TRIGGER_COUNT) t->slot = first++;
    return first;
}

int sl_trigger_validate(const sl_trigger_t *t, char *err, size_t cap) {
    if (!t) return sl_errf(err, cap, SL_EINVAL, "window trigger: no trigger given");
    switch (t->kind) {
    case SL_TRIGGER_EVENT_TIME:
    case SL_TRIGGER_PROCESSING_TIME: return 0;
    case SL_TRIGGER_COUNT:
        if (t->count < 1)
            return sl_errf(err, cap, SL_EINVAL, "CountTrigger(%" PRId64 "): the count must be at least 1", t->count);
        return 0;
    case SL_TRIGGER_PURGING:
        if (!t->inner) return sl_errf(err, cap, SL_EINVAL, "PurgingTrigger: no nested trigger given");
        return sl_trigger_validate(t->inner, err, cap);
    }
    return sl_errf(err, cap, SL_EINVAL, "window trigger: unknown trigger");
}

size_t sl_trigger_describe(const sl_trigger_t *t, char *buf, size_t cap) {
    int n = 0;
    if (!cap) return 0;
    switch (t ? t->kind : 0) {
    case SL_TRIGGER_EVENT_TIME: n = snprintf(buf, cap, "EventTimeTrigger"); break;
    case SL_TRIGGER_PROCESSING_TIME: n = snprintf(buf, cap, "ProcessingTimeTrigger"); break;
    case SL_TRIGGER_COUNT: n = snprintf(buf, cap, "CountTrigger(%" PRId64 ")", t->count); break;
    case SL_TRIGGER_PURGING: {
        char inner[256];
        if (t->inner)
            sl_trigger_describe(t->inner, inner, sizeof inner);
        else
            snprintf(inner, sizeof inner, "null");
        n = snprintf(buf, cap, "PurgingTrigger(%s)", inner);
        break;
    }
    default: n = snprintf(buf, cap, "Trigger"); break;
    }
    if (n < 0) return 0;
    return (size_t)n < cap ? (size_t)n : cap - 1;
}
