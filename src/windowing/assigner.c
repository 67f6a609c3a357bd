/*
 * assigner.c — window assigners: tumbling, sliding and session windows in
 * event time and processing time (Flink's TumblingEventTimeWindows,
 * SlidingEventTimeWindows, EventTimeSessionWindows and their
 * processing-time twins).  Pure arithmetic; see window.h.
 */
#include <inttypes.h>
#include <stdio.h>

#include "common/common.h"
#include "windowing/window.h"

static sl_window_assigner_t *assigner_new(sl_assigner_kind_t kind, bool event_time, int64_t size, int64_t slide,
                                          int64_t offset) {
    sl_window_assigner_t *a = sl_calloc(1, sizeof *a);
    a->kind = kind;
    a->event_time = event_time;
    a->size = size;
    a->slide = slide;
    a->offset = offset;
    return a;
}

/* Parameters are checked by sl_window() (the constructors cannot report). */
sl_window_assigner_t *sl_tumbling_event_time(int64_t size_ms, int64_t offset_ms) {
    return assigner_new(SL_ASSIGNER_TUMBLING, true, size_ms, 0, offset_ms);
}
sl_window_assigner_t *sl_sliding_event_time(int64_t size_ms, int64_t slide_ms, int64_t offset_ms) {
    return assigner_new(SL_ASSIGNER_SLIDING, true, size_ms, slide_ms, offset_ms);
}
sl_window_assigner_t *sl_session_event_time(int64_t gap_ms) {
    return assigner_new(SL_ASSIGNER_SESSION, true, gap_ms, 0, 0);
}
sl_window_assigner_t *sl_cumulative_event_time(int64_t max_size_ms, int64_t step_ms, int64_t offset_ms) {
    return assigner_new(SL_ASSIGNER_CUMULATIVE, true, max_size_ms, step_ms, offset_ms);
}
sl_window_assigner_t *sl_tumbling_processing_time(int64_t size_ms, int64_t offset_ms) {
    return assigner_new(SL_ASSIGNER_TUMBLING, false, size_ms, 0, offset_ms);
}
sl_window_assigner_t *sl_sliding_processing_time(int64_t size_ms, int64_t slide_ms, int64_t offset_ms) {
    return assigner_new(SL_ASSIGNER_SLIDING, false, size_ms, slide_ms, offset_ms);
}
sl_window_assigner_t *sl_session_processing_time(int64_t gap_ms) {
    return assigner_new(SL_ASSIGNER_SESSION, false, gap_ms, 0, 0);
}

sl_window_assigner_t *sl_assigner_clone(const sl_window_assigner_t *a) {
    if (!a) return NULL;
    sl_window_assigner_t *c = sl_malloc(sizeof *c);
    *c = *a;
    return c;
}

void sl_assigner_free(sl_window_assigner_t *a) { sl_free(a); }

/* a + b, clamped to the int64 range (a window end past INT64_MAX). */
static inline int64_t sat_add(int64_t a, int64_t b) {
    int64_t r;
    if (SL_UNLIKELY(__builtin_add_overflow(a, b, &r))) return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

int64_t sl_window_start(int64_t t, int64_t offset, int64_t size) {
    int64_t d, rem;
    if (SL_LIKELY(!__builtin_sub_overflow(t, offset, &d)))
        rem = d % size;
    else
        rem = (int64_t)(((__int128)t - offset) % size);
    if (rem < 0) rem += size; /* C's % truncates toward zero: make it a true modulus */
    int64_t start;
    /* Only a t within `size` of INT64_MIN has no representable start. */
    if (SL_UNLIKELY(__builtin_sub_overflow(t, rem, &start))) start = INT64_MIN;
    return start;
}

static const char *kind_name(const sl_window_assigner_t *a) {
    switch (a->kind) {
    case SL_ASSIGNER_TUMBLING: return a->event_time ? "TumblingEventTimeWindows" : "TumblingProcessingTimeWindows";
    case SL_ASSIGNER_SLIDING: return a->event_time ? "SlidingEventTimeWindows" : "SlidingProcessingTimeWindows";
    case SL_ASSIGNER_SESSION: return a->event_time ? "EventTimeSessionWindows" : "ProcessingTimeSessionWindows";
    case SL_ASSIGNER_CUMULATIVE: return "CumulativeEventTimeWindows";
    }
    return "WindowAssigner";
}

/* |offset| < bound, without overflowing on INT64_MIN. */
static bool offset_ok(int64_t offset, int64_t bound) { return offset > -bound && offset < bound; }

int sl_assigner_validate(const sl_window_assigner_t *a, char *err, size_t cap) {
    if (!a) return sl_errf(err, cap, SL_EINVAL, "window: no window assigner given");
    const char *k = kind_name(a);
    switch (a->kind) {
    case SL_ASSIGNER_TUMBLING:
        if (a->size <= 0 || !offset_ok(a->offset, a->size))
            return sl_errf(err, cap, SL_EINVAL,
                           "%s(size %" PRId64 " ms, offset %" PRId64 " ms): parameters must satisfy size > 0 and "
                           "abs(offset) < size",
                           k, a->size, a->offset);
        return 0;
    case SL_ASSIGNER_SLIDING:
        if (a->size <= 0 || a->slide <= 0 || !offset_ok(a->offset, a->slide))
            return sl_errf(err, cap, SL_EINVAL,
                           "%s(size %" PRId64 " ms, slide %" PRId64 " ms, offset %" PRId64
                           " ms): parameters must satisfy size > 0, slide > 0 and abs(offset) < slide",
                           k, a->size, a->slide, a->offset);
        return 0;
    case SL_ASSIGNER_CUMULATIVE:
        if (a->size <= 0 || a->slide <= 0 || a->size % a->slide != 0 || !offset_ok(a->offset, a->size))
            return sl_errf(err, cap, SL_EINVAL,
                           "%s(max size %" PRId64 " ms, step %" PRId64 " ms, offset %" PRId64
                           " ms): parameters must satisfy step > 0, max size a multiple of step and abs(offset) < "
                           "max size",
                           k, a->size, a->slide, a->offset);
        return 0;
    case SL_ASSIGNER_SESSION:
        if (a->size <= 0)
            return sl_errf(err, cap, SL_EINVAL, "%s(gap %" PRId64 " ms): the session gap must be > 0", k, a->size);
        return 0;
    }
    return sl_errf(err, cap, SL_EINVAL, "window: unknown window assigner");
}

int sl_assigner_assign(const sl_window_assigner_t *a, int64_t t, sl_window_t *out, int cap) {
    switch (a->kind) {
    case SL_ASSIGNER_TUMBLING: {
        int64_t s = sl_window_start(t, a->offset, a->size);
        if (cap > 0) {
            out[0].start = s;
            out[0].end = sat_add(s, a->size);
        }
        return 1;
    }
    case SL_ASSIGNER_SLIDING: {
        /* Every start that is a multiple of slide (plus offset) with
         * start > t - size, latest first (Flink's order). */
        int n = 0;
        int64_t s = sl_window_start(t, a->offset, a->slide);
        for (;;) {
            int64_t e = sat_add(s, a->size);
            if (e <= t) break;
            if (n < cap) {
                out[n].start = s;
                out[n].end = e;
            }
            n++;
            if (__builtin_sub_overflow(s, a->slide, &s)) break;
        }
        return n;
    }
    case SL_ASSIGNER_CUMULATIVE: {
        /* the windows of the max-size window holding t that end after t, shortest first */
        int64_t s = sl_window_start(t, a->offset, a->size), e = sat_add(s, a->size);
        int64_t first = sat_add(sl_window_start(t, a->offset, a->slide), a->slide);
        int n = 0;
        for (int64_t end = first; end <= e && end > s; end = sat_add(end, a->slide)) {
            if (n < cap) {
                out[n].start = s;
                out[n].end = end;
            }
            n++;
            if (end == INT64_MAX) break;
        }
        return n;
    }
    case SL_ASSIGNER_SESSION:
        if (cap > 0) {
            out[0].start = t;
            out[0].end = sat_add(t, a->size);
        }
        return 1;
    }
    return 0;
}

int64_t sl_assigner_max_windows(const sl_window_assigner_t *a) {
    if (a->kind == SL_ASSIGNER_CUMULATIVE) return a->size / a->slide;
    if (a->kind != SL_ASSIGNER_SLIDING) return 1;
    return a->size / a->slide + (a->size % a->slide != 0);
}

size_t sl_assigner_describe(const sl_window_assigner_t *a, char *buf, size_t cap) {
    int n;
    if (a->kind == SL_ASSIGNER_SLIDING || a->kind == SL_ASSIGNER_CUMULATIVE)
        n = snprintf(buf, cap, "%s(%" PRId64 ", %" PRId64 ")", kind_name(a), a->size, a->slide);
    else
        n = snprintf(buf, cap, "%s(%" PRId64 ")", kind_name(a), a->size);
    if (n < 0) return 0;
    return (size_t)n < cap ? (size_t)n : (cap ? cap - 1 : 0);
}
