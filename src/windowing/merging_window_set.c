/*
 * merging_window_set.c — the set of in-flight session windows of one key
 * (Flink's MergingWindowSet over TimeWindow.mergeWindows).
 *
 * Each window maps to a state window: the namespace that holds its
 * contents.  When windows merge, the contents stay in the namespace of one
 * of them (here the earliest) and the others' contents are merged into it,
 * so a merge never rewrites the state of the window that survives.
 *
 * Invariant: entries are sorted by start and pairwise do not intersect
 * (touching counts as intersecting, as in Flink), so the windows a new
 * window intersects are a contiguous run and merging them leaves the set
 * sorted and disjoint.
 *
 * The set is stored in keyed state as n entries of 32 bytes: window start,
 * end, state-window start, end (little-endian int64).
 */
#include "common/common.h"
#include "windowing/window.h"

void sl_mws_init(sl_mws_t *s) { memset(s, 0, sizeof *s); }

void sl_mws_free(sl_mws_t *s) {
    sl_free(s->v);
    sl_free(s->mw);
    memset(s, 0, sizeof *s);
}

static void reserve(sl_mws_t *s, int n) {
    if (n <= s->cap) return;
    int nc = s->cap ? s->cap * 2 : 8;
    while (nc < n) nc *= 2;
    s->v = sl_realloc(s->v, (size_t)nc * sizeof *s->v);
    s->cap = nc;
}

int sl_mws_load(sl_mws_t *s, const void *p, uint32_t len) {
    s->n = 0;
    s->dirty = false;
    if (len % SL_MWS_ENTRY_BYTES) return SL_ESTATE;
    int n = (int)(len / SL_MWS_ENTRY_BYTES);
    reserve(s, n);
    const uint8_t *b = p;
    for (int i = 0; i < n; i++, b += SL_MWS_ENTRY_BYTES) {
        s->v[i].window = sl_window_from_ns(b);
        s->v[i].state = sl_window_from_ns(b + SL_WINDOW_NS_LEN);
    }
    s->n = n;
    return 0;
}

uint32_t sl_mws_store(const sl_mws_t *s, void *buf) {
    uint8_t *b = buf;
    for (int i = 0; i < s->n; i++, b += SL_MWS_ENTRY_BYTES) {
        sl_window_to_ns(&s->v[i].window, b);
        sl_window_to_ns(&s->v[i].state, b + SL_WINDOW_NS_LEN);
    }
    return (uint32_t)s->n * SL_MWS_ENTRY_BYTES;
}

void sl_mws_add(sl_mws_t *s, const sl_window_t *w, sl_mws_merge_t *m) {
    memset(m, 0, sizeof *m);
    int first = -1, k = 0, pos = s->n;
    for (int i = 0; i < s->n; i++) {
        if (sl_window_intersects(&s->v[i].window, w)) {
            if (first < 0) first = i;
            k++;
        } else if (first < 0 && pos == s->n && s->v[i].window.start > w->start) {
            pos = i;
        }
    }
    if (k == 0) {
        /* A new, self-contained window: its own state window. */
        reserve(s, s->n + 1);
        memmove(&s->v[pos + 1], &s->v[pos], (size_t)(s->n - pos) * sizeof *s->v);
        s->v[pos].window = *w;
        s->v[pos].state = *w;
        s->n++;
        s->dirty = true;
        m->result = *w;
        return;
    }
    const sl_window_t *e = &s->v[first].window;
    if (k == 1 && e->start <= w->start && e->end >= w->end) {
        /* Inside an existing window: nothing merges (Flink skips the merge
         * function when the only merged window is the result). */
        m->result = *e;
        m->existed = true;
        return;
    }
    sl_window_t result = *w;
    for (int j = 0; j < k; j++) result = sl_window_cover(&result, &s->v[first + j].window);
    if (s->mw_cap < 2 * k) {
        s->mw_cap = 2 * k;
        s->mw = sl_realloc(s->mw, (size_t)s->mw_cap * sizeof *s->mw);
    }
    for (int j = 0; j < k; j++) {
        s->mw[j] = s->v[first + j].window;
        s->mw[k + j] = s->v[first + j].state;
    }
    /* The earliest window's contents absorb the others'. */
    sl_window_t target = s->v[first].state;
    s->v[first].window = result;
    s->v[first].state = target;
    memmove(&s->v[first + 1], &s->v[first + k], (size_t)(s->n - first - k) * sizeof *s->v);
    s->n -= k - 1;
    s->dirty = true;
    m->result = result;
    m->merged = true;
    m->state_window = target;
    m->merged_windows = s->mw;
    m->nmerged = k;
    m->merged_states = s->mw + k + 1;
    m->nmerged_states = k - 1;
}

const sl_mws_entry_t *sl_mws_find(const sl_mws_t *s, const sl_window_t *w) {
    for (int i = 0; i < s->n; i++)
        if (sl_window_eq(&s->v[i].window, w)) return &s->v[i];
    return NULL;
}

void sl_mws_retire(sl_mws_t *s, const sl_window_t *w) {
    for (int i = 0; i < s->n; i++) {
        if (!sl_window_eq(&s->v[i].window, w)) continue;
        memmove(&s->v[i], &s->v[i + 1], (size_t)(s->n - i - 1) * sizeof *s->v);
        s->n--;
        s->dirty = true;
        return;
    }
}
