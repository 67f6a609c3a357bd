/*
 * evictor.c — evictors with Flink's behaviour: CountEvictor keeps the last
 * n elements, TimeEvictor keeps the elements within keep_ms of the newest
 * one; each acts either before or after the window function
 * (doEvictAfter).  They work on an array of elements in arrival order.
 */
#include <inttypes.h>
#include <stdio.h>

#include "common/common.h"
#include "windowing/window.h"

static sl_evictor_t *evictor_new(sl_evictor_kind_t kind, int64_t n, bool after) {
    sl_evictor_t *e = sl_calloc(1, sizeof *e);
    e->kind = kind;
    e->n = n;
    e->after = after;
    return e;
}

sl_evictor_t *sl_evictor_count(int64_t n, bool after) { return evictor_new(SL_EVICTOR_COUNT, n, after); }
sl_evictor_t *sl_evictor_time(int64_t keep_ms, bool after) { return evictor_new(SL_EVICTOR_TIME, keep_ms, after); }

sl_evictor_t *sl_evictor_clone(const sl_evictor_t *e) {
    if (!e) return NULL;
    sl_evictor_t *c = sl_malloc(sizeof *c);
    *c = *e;
    return c;
}

void sl_evictor_free(sl_evictor_t *e) { sl_free(e); }

static int evict(const sl_evictor_t *e, sl_window_elem_t *v, int n) {
    if (e->kind == SL_EVICTOR_COUNT) {
        if ((int64_t)n <= e->n) return n;
        int keep = (int)e->n;
        memmove(v, v + (n - keep), (size_t)keep * sizeof *v);
        return keep;
    }
    /* TimeEvictor: like Flink, nothing happens when the first element has
     * no timestamp; the cutoff is the newest timestamp minus keep_ms and
     * an element at or before it goes (timestamp <= cutoff). */
    if (n == 0 || v[0].ts == SL_NO_TIMESTAMP) return n;
    int64_t max = INT64_MIN;
    for (int i = 0; i < n; i++)
        if (v[i].ts != SL_NO_TIMESTAMP && v[i].ts > max) max = v[i].ts;
    int64_t cutoff;
    if (__builtin_sub_overflow(max, e->n, &cutoff)) cutoff = INT64_MIN;
    int k = 0;
    for (int i = 0; i < n; i++)
        if (v[i].ts == SL_NO_TIMESTAMP || v[i].ts > cutoff) v[k++] = v[i];
    return k;
}

int sl_evictor_evict_before(const sl_evictor_t *e, sl_window_elem_t *v, int n) {
    return e && !e->after ? evict(e, v, n) : n;
}

int sl_evictor_evict_after(const sl_evictor_t *e, sl_window_elem_t *v, int n) {
    return e && e->after ? evict(e, v, n) : n;
}

int sl_evictor_validate(const sl_evictor_t *e, char *err, size_t cap) {
    if (!e) return sl_errf(err, cap, SL_EINVAL, "window evictor: no evictor given");
    if (e->kind == SL_EVICTOR_COUNT && (e->n < 0 || e->n > INT32_MAX))
        return sl_errf(err, cap, SL_EINVAL, "CountEvictor(%" PRId64 "): the count must be in [0, %d]", e->n,
                       INT32_MAX);
    if (e->kind == SL_EVICTOR_TIME && e->n < 0)
        return sl_errf(err, cap, SL_EINVAL, "TimeEvictor(%" PRId64 "): the time to keep must not be negative", e->n);
    if (e->kind != SL_EVICTOR_COUNT && e->kind != SL_EVICTOR_TIME)
        return sl_errf(err, cap, SL_EINVAL, "window evictor: unknown evictor");
    return 0;
}

size_t sl_evictor_describe(const sl_evictor_t *e, char *buf, size_t cap) {
    int n = snprintf(buf, cap, "%s(%" PRId64 "%s)", e->kind == SL_EVICTOR_COUNT ? "CountEvictor" : "TimeEvictor", e->n,
                     e->after ? ", after" : "");
    if (n < 0) return 0;
    return (size_t)n < cap ? (size_t)n : (cap ? cap - 1 : 0);
}
