/*
 * window_reference.h — a brute-force model of event time and keyed
 * event-time windows, written from SEMANTICS.md ("Time and watermarks",
 * "Windows") and Flink's WindowOperator / EventTimeTrigger /
 * MergingWindowSet, for test_window_random.c.  It uses no engine code.
 *
 * Input: the events, and the exact sequence of reader actions (emit event e
 * of split s / split s finished / advance the clock / return from poll)
 * that the test's scripted source performs.
 *
 * Source model (one source subtask, as source_op.c describes it):
 *   - a virtual clock that the reader advances by 1 before each emitted event
 *     (and by 1 for each turn in which every open split pauses);
 *   - per split: max_ts, watermark max_ts - B - 1 (MIN before any record);
 *   - a check ("tick"): every split that had a record since the previous
 *     check is active as of now; one that had none, is open and has been
 *     inactive for >= idle_timeout becomes idle; then the combined watermark;
 *     an idle split becomes active again with its next record;
 *   - auto-watermark-interval 0: a check after every record (without an idle
 *     timeout only the combined watermark); interval I > 0: when a poll
 *     returns and the clock reached the next tick time, a check and next tick
 *     = now + I, else only the combined watermark (emitted after each batch);
 *   - a finished split stops counting at the next combination;
 *   - the combined watermark: minimum over active unfinished splits, emitted
 *     only when it advances; held while every open split is idle;
 *   - end of input: the maximum watermark.
 *
 * Window model (per key; the watermark is the one the window subtask has
 * when the record reaches it, i.e. the last one emitted before the record):
 *   - tumbling: start = t - ((t - O + S) mod S) (mathematical mod, also for
 *     negative t and O); sliding: every start s = O (mod D) with
 *     t - S < s <= t (S need not be a multiple of D; with S < D some t are
 *     in no window); session: [t, t + G), merged with every live window of
 *     the key it overlaps or touches (transitively);
 *   - cleanup time of a window: end - 1 + L; a window is late when its
 *     cleanup time <= watermark; a record is late when every window it
 *     belongs to is late (session: the merged window), and then goes to the
 *     late output and into no window;
 *   - a record in no window at all (sliding windows with gaps) goes to the
 *     late output when t + L <= watermark and is otherwise dropped: Flink's
 *     isSkippedElement && isElementLate;
 *   - a record added to a window whose end - 1 <= watermark fires it at once
 *     (EventTimeTrigger.onElement) with the updated aggregate;
 *   - a watermark advance W -> W' fires every live window with
 *     W < end - 1 <= W' (its timer), then drops every window whose cleanup
 *     time <= W'.
 */
#ifndef SL_WINDOW_REFERENCE_H
#define SL_WINDOW_REFERENCE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { WR_TUMBLING = 0, WR_SLIDING = 1, WR_SESSION = 2 };
/* advance: clock + 1, no record; poll end: the reader returns from poll */
enum { WR_EMIT = 0, WR_FINISH = 1, WR_ADVANCE = 2, WR_POLL_END = 3 };
/* partial: some (not all) of its windows were late; dropped: in no window
 * at all (sliding with size < slide) and not behind the watermark */
enum { WR_ADDED = 0, WR_LATE = 1, WR_PARTIAL = 2, WR_DROPPED = 3 };

#define WR_MIN INT64_MIN
#define WR_MAX INT64_MAX

typedef struct wr_event {
    int64_t id, key, amount, ts;
    int split;
} wr_event_t;

typedef struct wr_action {
    int kind;  /* WR_EMIT / WR_FINISH / WR_ADVANCE / WR_POLL_END */
    int split;
    int ev;    /* WR_EMIT: index into the events */
} wr_action_t;

typedef struct wr_params {
    int kind;
    int nsplits;
    int64_t bound;        /* B */
    int64_t idle_timeout; /* 0: never idle */
    int64_t clock0;       /* virtual clock when the source opens */
    int64_t interval;     /* auto-watermark interval: 0 (after every record) or periodic */
    int64_t size, slide, offset, gap, lateness;
} wr_params_t;

typedef struct wr_firing {
    int64_t key, start, end, cnt, sum;
} wr_firing_t;

typedef struct wr_win {
    int64_t key, start, end, cnt, sum;
    int64_t *ids;
    int nids, capids;
    bool fired;
    int64_t fired_cnt, fired_sum;
} wr_win_t;

typedef struct wr_result {
    wr_firing_t *fire;
    int nfire, capfire;
    int64_t *late; /* event ids, in arrival order */
    int nlate;
    /* per event id */
    int64_t *wm_at;   /* watermark when the record reached the window */
    int8_t *outcome;  /* WR_ADDED / WR_LATE / WR_PARTIAL */
    int *nadded;      /* windows it went into */
    int *nassigned;   /* windows the assigner gave it (session: 1) */
    int *ncleaned;    /* of its assigned windows, already cleaned up */
    int *appear;      /* final firings that counted it */
    /* sliding: (event, window) pairs dropped because that window was gone */
    int64_t partial_pairs, partial_sum;
    int64_t dropped, dropped_late; /* in no window: dropped / sent to the late output */
    /* stats */
    /* bridges: a record joined >= 2 session windows; all_idle: times every
     * open split was idle */
    int64_t wm_advances, idle_marks, reactivations, immediate_fires, merges, bridges, all_idle;
    int64_t final_wm;   /* last watermark before the end of input */
    char err[512];      /* reference self-check failure ("" when fine) */
} wr_result_t;

/* ---- helpers ---- */

static inline int64_t wr_floor_mod(int64_t a, int64_t m) {
    int64_t r = a % m;
    return r < 0 ? r + m : r;
}

static inline int64_t wr_cleanup(const wr_params_t *p, int64_t end) {
    int64_t max = end - 1;
    if (max > WR_MAX - p->lateness) return WR_MAX;
    return max + p->lateness;
}

static inline void wr_push_fire(wr_result_t *r, const wr_win_t *w) {
    if (r->nfire == r->capfire) {
        r->capfire = r->capfire ? r->capfire * 2 : 256;
        r->fire = realloc(r->fire, (size_t)r->capfire * sizeof *r->fire);
    }
    wr_firing_t f = {w->key, w->start, w->end, w->cnt, w->sum};
    r->fire[r->nfire++] = f;
}

static inline void wr_win_add_id(wr_win_t *w, int64_t id) {
    if (w->nids == w->capids) {
        w->capids = w->capids ? w->capids * 2 : 8;
        w->ids = realloc(w->ids, (size_t)w->capids * sizeof *w->ids);
    }
    w->ids[w->nids++] = id;
}

typedef struct wr_state {
    const wr_params_t *p;
    wr_result_t *r;
    wr_win_t *live;
    int nlive, caplive;
} wr_state_t;

static inline void wr_fire(wr_state_t *st, wr_win_t *w) {
    wr_push_fire(st->r, w);
    w->fired = true;
    w->fired_cnt = w->cnt;
    w->fired_sum = w->sum;
}

static inline wr_win_t *wr_new_live(wr_state_t *st, int64_t key, int64_t start, int64_t end) {
    if (st->nlive == st->caplive) {
        st->caplive = st->caplive ? st->caplive * 2 : 64;
        st->live = realloc(st->live, (size_t)st->caplive * sizeof *st->live);
    }
    wr_win_t *w = &st->live[st->nlive++];
    memset(w, 0, sizeof *w);
    w->key = key;
    w->start = start;
    w->end = end;
    return w;
}

/* The window's state is dropped: its last firing must show all of it, and
 * every element in it is counted once more in a final firing. */
static inline void wr_finalize(wr_state_t *st, wr_win_t *w) {
    wr_result_t *r = st->r;
    if (!r->err[0] && (!w->fired || w->fired_cnt != w->cnt || w->fired_sum != w->sum))
        snprintf(r->err, sizeof r->err,
                 "reference self-check: window key=%lld [%lld,%lld) dropped with cnt=%lld sum=%lld but last "
                 "fired %s cnt=%lld sum=%lld",
                 (long long)w->key, (long long)w->start, (long long)w->end, (long long)w->cnt,
                 (long long)w->sum, w->fired ? "with" : "never", (long long)w->fired_cnt,
                 (long long)w->fired_sum);
    for (int i = 0; i < w->nids; i++) r->appear[w->ids[i]]++;
    free(w->ids);
    w->ids = NULL;
}

static inline void wr_advance(wr_state_t *st, int64_t from, int64_t to) {
    /* timers at end - 1 that were registered (end - 1 > from) */
    for (int i = 0; i < st->nlive; i++) {
        wr_win_t *w = &st->live[i];
        if (w->end - 1 > from && w->end - 1 <= to) wr_fire(st, w);
    }
    int j = 0;
    for (int i = 0; i < st->nlive; i++) {
        if (wr_cleanup(st->p, st->live[i].end) <= to)
            wr_finalize(st, &st->live[i]);
        else
            st->live[j++] = st->live[i];
    }
    st->nlive = j;
}

static inline int wr_find_live(const wr_state_t *st, int64_t key, int64_t start, int64_t end) {
    for (int i = 0; i < st->nlive; i++)
        if (st->live[i].key == key && st->live[i].start == start && st->live[i].end == end) return i;
    return -1;
}

static inline void wr_late(wr_state_t *st, const wr_event_t *e) {
    st->r->late[st->r->nlate++] = e->id;
    st->r->outcome[e->id] = WR_LATE;
}

/* Non-merging: tumbling and sliding. */
static inline void wr_element_fixed(wr_state_t *st, const wr_event_t *e, int64_t wm) {
    const wr_params_t *p = st->p;
    wr_result_t *r = st->r;
    int64_t t = e->ts;
    int64_t starts[4096];
    int ns = 0;
    if (p->kind == WR_TUMBLING) {
        starts[ns++] = t - wr_floor_mod(t - p->offset, p->size);
    } else {
        int64_t last = t - wr_floor_mod(t - p->offset, p->slide);
        for (int64_t s = last; s > t - p->size && ns < 4096; s -= p->slide) starts[ns++] = s;
    }
    int added = 0, cleaned = 0;
    for (int i = 0; i < ns; i++) {
        int64_t start = starts[i], end = start + p->size;
        if (wr_cleanup(p, end) <= wm) {
            cleaned++;
            continue;
        }
        int li = wr_find_live(st, e->key, start, end);
        wr_win_t *w = li >= 0 ? &st->live[li] : wr_new_live(st, e->key, start, end);
        w->cnt++;
        w->sum += e->amount;
        wr_win_add_id(w, e->id);
        added++;
        if (end - 1 <= wm) {
            r->immediate_fires++;
            wr_fire(st, w);
        }
    }
    r->nadded[e->id] = added;
    r->ncleaned[e->id] = cleaned;
    r->nassigned[e->id] = ns;
    if (ns == 0) {
        if (e->ts + p->lateness <= wm) {
            wr_late(st, e);
            r->dropped_late++;
        } else {
            r->outcome[e->id] = WR_DROPPED;
            r->dropped++;
        }
    } else if (added == 0) {
        wr_late(st, e);
    } else if (cleaned > 0) {
        r->outcome[e->id] = WR_PARTIAL;
        r->partial_pairs += cleaned;
        r->partial_sum += cleaned * e->amount;
    } else {
        r->outcome[e->id] = WR_ADDED;
    }
}

/* Session windows: TimeWindow.intersects is a.start <= b.end && a.end >= b.start. */
static inline void wr_element_session(wr_state_t *st, const wr_event_t *e, int64_t wm) {
    const wr_params_t *p = st->p;
    wr_result_t *r = st->r;
    int64_t ms = e->ts, me = e->ts + p->gap;
    /* transitive closure of live windows of this key touching [ms, me) */
    bool *in = calloc((size_t)(st->nlive ? st->nlive : 1), 1);
    int nin = 0;
    for (bool changed = true; changed;) {
        changed = false;
        for (int i = 0; i < st->nlive; i++) {
            wr_win_t *w = &st->live[i];
            if (in[i] || w->key != e->key) continue;
            if (ms <= w->end && me >= w->start) {
                in[i] = true;
                nin++;
                if (w->start < ms) ms = w->start;
                if (w->end > me) me = w->end;
                changed = true;
            }
        }
    }
    r->ncleaned[e->id] = 0;
    r->nassigned[e->id] = 1;
    if (wr_cleanup(p, me) <= wm) {
        if (nin > 0 && !r->err[0])
            snprintf(r->err, sizeof r->err,
                     "reference self-check: event %lld merged into a late window [%lld,%lld) at wm %lld",
                     (long long)e->id, (long long)ms, (long long)me, (long long)wm);
        free(in);
        r->nadded[e->id] = 0;
        r->ncleaned[e->id] = 1; /* its one (merged) window */
        wr_late(st, e);
        return;
    }
    /* the merged window: the union of the states */
    wr_win_t merged;
    memset(&merged, 0, sizeof merged);
    merged.key = e->key;
    merged.start = ms;
    merged.end = me;
    int j = 0;
    int nmerged = 0;
    bool same_as_one = false;
    for (int i = 0; i < st->nlive; i++) {
        wr_win_t *w = &st->live[i];
        if (!in[i]) {
            st->live[j++] = *w;
            continue;
        }
        nmerged++;
        if (w->start == ms && w->end == me) {
            same_as_one = true;
            merged.fired = w->fired;
            merged.fired_cnt = w->fired_cnt;
            merged.fired_sum = w->fired_sum;
        }
        merged.cnt += w->cnt;
        merged.sum += w->sum;
        for (int k = 0; k < w->nids; k++) wr_win_add_id(&merged, w->ids[k]);
        free(w->ids);
    }
    st->nlive = j;
    free(in);
    if (nmerged > 1 || (nmerged == 1 && !same_as_one)) r->merges++;
    if (nmerged > 1) r->bridges++;
    if (!(nmerged == 1 && same_as_one)) {
        /* a new window: nothing of it has been fired yet */
        merged.fired = false;
        merged.fired_cnt = merged.fired_sum = 0;
    }
    wr_win_t *w = wr_new_live(st, merged.key, merged.start, merged.end);
    *w = merged;
    w->cnt++;
    w->sum += e->amount;
    wr_win_add_id(w, e->id);
    r->nadded[e->id] = 1;
    r->outcome[e->id] = WR_ADDED;
    if (w->end - 1 <= wm) {
        r->immediate_fires++;
        wr_fire(st, w);
    }
}

typedef struct wr_split {
    int64_t max_ts, last_active;
    bool had_data, idle, finished;
} wr_split_t;

typedef struct wr_source {
    const wr_params_t *p;
    wr_split_t *sp;
    int64_t clock;
    int64_t next_tick; /* periodic mode */
    int64_t wm;        /* last emitted (what the window subtasks have) */
    bool all_idle;     /* the source declared itself idle downstream */
} wr_source_t;

/* Recomputes the combined watermark and emits it when it advanced. */
static inline void wr_combine(wr_source_t *src, wr_state_t *st) {
    const wr_params_t *p = src->p;
    bool any_open = false, any_active = false;
    int64_t m = WR_MAX;
    for (int i = 0; i < p->nsplits; i++) {
        wr_split_t *s = &src->sp[i];
        if (s->finished) continue;
        any_open = true;
        if (s->idle) continue;
        any_active = true;
        int64_t w = s->max_ts == WR_MIN ? WR_MIN : s->max_ts - p->bound - 1;
        if (w < m) m = w;
    }
    if (!any_open) return; /* every split finished: the end brings the maximum */
    if (!any_active) {     /* every open split idle: hold the watermark */
        if (!src->all_idle) st->r->all_idle++;
        src->all_idle = true;
        return;
    }
    if (m > src->wm) {
        src->all_idle = false;
        wr_advance(st, src->wm, m);
        src->wm = m;
        st->r->wm_advances++;
    }
}

/* Idleness check, then the combined watermark. */
static inline void wr_tick(wr_source_t *src, wr_state_t *st) {
    const wr_params_t *p = src->p;
    for (int i = 0; i < p->nsplits; i++) {
        wr_split_t *s = &src->sp[i];
        if (s->had_data) {
            s->had_data = false;
            s->last_active = src->clock;
        } else if (p->idle_timeout > 0 && !s->finished && !s->idle &&
                   src->clock - s->last_active >= p->idle_timeout) {
            s->idle = true;
            st->r->idle_marks++;
        }
    }
    wr_combine(src, st);
}

/* Runs the model; returns 0, or -1 with r->err set when the reference's own
 * invariant check failed. */
static inline int wr_run(const wr_params_t *p, const wr_event_t *ev, int nev, const wr_action_t *act, int nact,
                         wr_result_t *r) {
    memset(r, 0, sizeof *r);
    r->late = calloc((size_t)nev + 1, sizeof *r->late);
    r->wm_at = calloc((size_t)nev + 1, sizeof *r->wm_at);
    r->outcome = calloc((size_t)nev + 1, sizeof *r->outcome);
    r->nadded = calloc((size_t)nev + 1, sizeof *r->nadded);
    r->ncleaned = calloc((size_t)nev + 1, sizeof *r->ncleaned);
    r->nassigned = calloc((size_t)nev + 1, sizeof *r->nassigned);
    r->appear = calloc((size_t)nev + 1, sizeof *r->appear);
    wr_state_t st = {p, r, NULL, 0, 0};
    wr_source_t src = {p, calloc((size_t)(p->nsplits ? p->nsplits : 1), sizeof(wr_split_t)), p->clock0,
                       p->clock0 + p->interval, WR_MIN, false};
    for (int i = 0; i < p->nsplits; i++) {
        src.sp[i].max_ts = WR_MIN;
        src.sp[i].last_active = src.clock;
    }
    for (int a = 0; a < nact; a++) {
        if (act[a].kind == WR_FINISH) {
            src.sp[act[a].split].finished = true;
            continue;
        }
        if (act[a].kind == WR_ADVANCE) {
            src.clock++;
            continue;
        }
        if (act[a].kind == WR_POLL_END) {
            if (p->interval > 0) {
                if (src.clock >= src.next_tick) {
                    wr_tick(&src, &st);
                    src.next_tick = src.clock + p->interval;
                } else {
                    wr_combine(&src, &st); /* after each batch too */
                }
            }
            continue;
        }
        const wr_event_t *e = &ev[act[a].ev];
        wr_split_t *g = &src.sp[act[a].split];
        src.clock++;
        if (e->ts > g->max_ts) g->max_ts = e->ts;
        g->had_data = true;
        if (g->idle) {
            g->idle = false;
            g->last_active = src.clock;
            r->reactivations++;
        }
        src.all_idle = false;
        /* the record reaches the window operator before the watermark
         * generated after it */
        r->wm_at[e->id] = src.wm;
        if (p->kind == WR_SESSION)
            wr_element_session(&st, e, src.wm);
        else
            wr_element_fixed(&st, e, src.wm);
        if (p->interval == 0) {
            if (p->idle_timeout > 0)
                wr_tick(&src, &st);
            else
                wr_combine(&src, &st);
        }
    }
    int64_t wm = src.wm;
    free(src.sp);
    r->final_wm = wm;
    wr_advance(&st, wm, WR_MAX);
    free(st.live);
    /* every event: late, or counted in the final firing of every window it
     * went into (tumbling/session: exactly one; sliding: its windows minus
     * the ones already cleaned up when it arrived); an event in no window
     * is late or dropped */
    for (int i = 0; i < nev && !r->err[0]; i++) {
        int64_t id = ev[i].id;
        int64_t per = 1;
        if (p->kind == WR_SLIDING) {
            int64_t into = wr_floor_mod(ev[i].ts - p->offset, p->slide); /* t - latest start */
            per = into >= p->size ? 0 : (p->size - 1 - into) / p->slide + 1;
        }
        bool ok = r->nassigned[id] == per;
        if (r->outcome[id] == WR_LATE || r->outcome[id] == WR_DROPPED)
            ok = ok && r->nadded[id] == 0 && r->appear[id] == 0 && r->ncleaned[id] == per;
        else
            ok = ok && r->nadded[id] >= 1 && r->appear[id] == r->nadded[id] && r->nadded[id] + r->ncleaned[id] == per;
        if (!ok)
            snprintf(r->err, sizeof r->err,
                     "reference self-check: event %lld (key %lld ts %lld) outcome %d added to %d windows, "
                     "%d cleaned, counted in %d final firings",
                     (long long)id, (long long)ev[i].key, (long long)ev[i].ts, r->outcome[id], r->nadded[id],
                     r->ncleaned[id], r->appear[id]);
    }
    return r->err[0] ? -1 : 0;
}

static inline void wr_free(wr_result_t *r) {
    free(r->fire);
    free(r->late);
    free(r->wm_at);
    free(r->outcome);
    free(r->nadded);
    free(r->ncleaned);
    free(r->nassigned);
    free(r->appear);
    memset(r, 0, sizeof *r);
}

#endif
