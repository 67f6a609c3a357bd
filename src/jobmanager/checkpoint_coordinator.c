/* coordinator.c — see coordinator.h. */
#include "jobmanager/checkpoint_coordinator.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <time.h>

#include "common/common.h"

#define MAX_PENDING 64
#define STATS_KEPT 64

typedef struct pending {
    int64_t id;
    int64_t trigger_ms;
    int64_t deadline_ns;
    bool *acked;
    int nacked;
    bool triggered; /* prepared and triggered: may complete */
    int kind;       /* sl_snapshot_kind_t */
} pending_t;

struct sl_coordinator {
    sl_ckpt_config_t cfg;
    sl_coordinator_hooks_t hooks;
    int ntasks;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool running, stop;
    int64_t next_id;
    pending_t pending[MAX_PENDING];
    int npending;
    bool *finished;
    int64_t completed, latest;
    int64_t last_end_ns;
    int failed_in_row;
    bool sync_pending;  /* a stop-with-savepoint is pending: no periodic checkpoints */
    bool sync_done;     /* it completed: the job is ending, nothing starts again */
    bool final_wanted;  /* sl_coordinator_request_final: a checkpoint with id >= final_from, now */
    int64_t final_from;
    sl_ckpt_stats_t stats[STATS_KEPT];
    sl_ckpt_task_stats_t *task_stats; /* [STATS_KEPT][ntasks], alongside stats */
    int64_t nstats;
};

sl_coordinator_t *sl_coordinator_new(const sl_ckpt_config_t *cfg, int ntasks, sl_coordinator_hooks_t hooks) {
    sl_coordinator_t *c = sl_calloc(1, sizeof *c);
    c->cfg = *cfg;
    if (c->cfg.max_concurrent < 1) c->cfg.max_concurrent = 1;
    if (c->cfg.max_concurrent > MAX_PENDING) c->cfg.max_concurrent = MAX_PENDING;
    c->hooks = hooks;
    c->ntasks = ntasks;
    c->finished = sl_calloc((size_t)(ntasks ? ntasks : 1), sizeof(bool));
    c->task_stats = sl_calloc((size_t)STATS_KEPT * (size_t)(ntasks ? ntasks : 1), sizeof *c->task_stats);
    c->next_id = 1;
    c->latest = -1;
    pthread_mutex_init(&c->mu, NULL);
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&c->cv, &a);
    pthread_condattr_destroy(&a);
    return c;
}

static sl_ckpt_stats_t *stats_for(sl_coordinator_t *c, int64_t id) {
    for (int64_t i = c->nstats - 1; i >= 0 && i >= c->nstats - STATS_KEPT; i--)
        if (c->stats[i % STATS_KEPT].id == id) return &c->stats[i % STATS_KEPT];
    return NULL;
}

static void remove_pending(sl_coordinator_t *c, int i) {
    sl_free(c->pending[i].acked);
    c->pending[i] = c->pending[--c->npending];
}

/* Under the lock: starts checkpoint id; returns it or -1. */
static int64_t start_locked(sl_coordinator_t *c, int64_t *ts_out, int kind) {
    if (c->sync_pending || c->sync_done) return -1;
    if (kind == SL_SNAP_CHECKPOINT ? c->npending >= c->cfg.max_concurrent : c->npending >= MAX_PENDING) return -1;
    if (sl_snap_is_sync(kind)) c->sync_pending = true;
    pending_t *p = &c->pending[c->npending++];
    p->kind = kind;
    p->id = c->next_id++;
    p->trigger_ms = sl_wall_ms();
    p->deadline_ns = sl_mono_ns() + c->cfg.timeout_ms * 1000000LL;
    p->acked = sl_calloc((size_t)(c->ntasks ? c->ntasks : 1), sizeof(bool));
    p->nacked = 0;
    p->triggered = false;
    for (int t = 0; t < c->ntasks; t++)
        if (c->finished[t]) {
            p->acked[t] = true;
            p->nacked++;
        }
    memset(&c->task_stats[(size_t)(c->nstats % STATS_KEPT) * (size_t)c->ntasks], 0,
           (size_t)c->ntasks * sizeof *c->task_stats);
    sl_ckpt_stats_t *s = &c->stats[c->nstats++ % STATS_KEPT];
    memset(s, 0, sizeof *s);
    s->id = p->id;
    s->kind = (uint8_t)kind;
    s->trigger_ms = p->trigger_ms;
    *ts_out = p->trigger_ms;
    return p->id;
}

/* Completes p if every task acknowledged; returns true when it did (lock
 * held on entry and exit; the hook runs unlocked). */
static void abort_locked(sl_coordinator_t *c, int i, const char *why);

static bool maybe_complete(sl_coordinator_t *c, int i) {
    pending_t *p = &c->pending[i];
    if (p->nacked < c->ntasks) return false;
    int64_t id = p->id;
    int kind = p->kind;
    if (c->hooks.finalize) {
        char err[512] = "";
        p->nacked = -c->ntasks; /* finalizing: not again from another ack */
        pthread_mutex_unlock(&c->mu);
        int rc = c->hooks.finalize(c->hooks.ctx, id, kind, err, sizeof err);
        pthread_mutex_lock(&c->mu);
        for (i = 0; i < c->npending && c->pending[i].id != id; i++) {}
        if (i == c->npending) return false; /* dropped meanwhile (stop) */
        if (rc < 0) {
            char why[600];
            snprintf(why, sizeof why, "could not be written: %s", err);
            abort_locked(c, i, why);
            return false;
        }
        p = &c->pending[i];
        /* _metadata is durable; the tasks have not been told yet */
        sl_fault_point("checkpoint.completed-before-notify");
    }
    sl_ckpt_stats_t *s = stats_for(c, id);
    if (s) {
        s->completed = true;
        s->duration_ms = sl_wall_ms() - p->trigger_ms;
        s->acks = c->ntasks;
    }
    /* A later checkpoint subsumes earlier pending ones. */
    for (int k = c->npending - 1; k >= 0; k--)
        if (c->pending[k].id <= id) remove_pending(c, k);
    c->completed++;
    c->latest = id;
    if (c->final_wanted && id >= c->final_from) c->final_wanted = false;
    if (sl_snap_is_sync(kind)) {
        c->sync_pending = false;
        c->sync_done = true;
    }
    c->failed_in_row = 0;
    c->last_end_ns = sl_mono_ns();
    pthread_mutex_unlock(&c->mu);
    if (c->hooks.complete) c->hooks.complete(c->hooks.ctx, id, kind);
    pthread_mutex_lock(&c->mu);
    pthread_cond_broadcast(&c->cv);
    return true;
}

/* Completes the newest fully acknowledged checkpoint, if any. */
static void complete_ready(sl_coordinator_t *c) {
    int best = -1;
    for (int i = 0; i < c->npending; i++)
        if (c->pending[i].triggered && c->pending[i].nacked >= c->ntasks &&
            (best < 0 || c->pending[i].id > c->pending[best].id))
            best = i;
    if (best >= 0) maybe_complete(c, best);
}

static void abort_locked(sl_coordinator_t *c, int i, const char *why) {
    int64_t id = c->pending[i].id;
    if (sl_snap_is_sync(c->pending[i].kind)) c->sync_pending = false; /* the job goes on */
    sl_ckpt_stats_t *s = stats_for(c, id);
    if (s) s->aborted = true;
    remove_pending(c, i);
    c->failed_in_row++;
    c->last_end_ns = sl_mono_ns();
    bool fail = c->failed_in_row > c->cfg.tolerable_failed;
    char msg[512];
    snprintf(msg, sizeof msg, "checkpoint %lld %s", (long long)id, why);
    pthread_mutex_unlock(&c->mu);
    if (c->hooks.aborted) c->hooks.aborted(c->hooks.ctx, id, msg);
    if (fail && c->hooks.fail_job) {
        char jm[700];
        snprintf(jm, sizeof jm, "%s; exceeded the tolerable failed checkpoints (%d)", msg, c->cfg.tolerable_failed);
        c->hooks.fail_job(c->hooks.ctx, jm);
    }
    pthread_mutex_lock(&c->mu);
}

/* Unlocked: prepares and triggers checkpoint id; false if it was aborted. */
static bool prepare_and_trigger(sl_coordinator_t *c, int64_t id, int64_t ts, int kind) {
    if (c->hooks.prepare) {
        char err[512] = "";
        if (c->hooks.prepare(c->hooks.ctx, id, ts, kind, err, sizeof err) < 0) {
            pthread_mutex_lock(&c->mu);
            for (int i = 0; i < c->npending; i++)
                if (c->pending[i].id == id) {
                    char why[600];
                    snprintf(why, sizeof why, "could not be started: %s", err);
                    abort_locked(c, i, why);
                    break;
                }
            pthread_mutex_unlock(&c->mu);
            return false;
        }
    }
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->npending; i++)
        if (c->pending[i].id == id) c->pending[i].triggered = true;
    pthread_mutex_unlock(&c->mu);
    if (c->hooks.trigger) c->hooks.trigger(c->hooks.ctx, id, ts, kind);
    return true;
}

int64_t sl_coordinator_trigger(sl_coordinator_t *c) { return sl_coordinator_trigger_kind(c, SL_SNAP_CHECKPOINT); }

int64_t sl_coordinator_trigger_kind(sl_coordinator_t *c, int kind) {
    if (!sl_snap_kind_valid(kind)) return -1;
    pthread_mutex_lock(&c->mu);
    int64_t ts = 0;
    int64_t id = start_locked(c, &ts, kind);
    pthread_mutex_unlock(&c->mu);
    if (id >= 0 && !prepare_and_trigger(c, id, ts, kind)) return -1;
    /* with every task finished it completes at once */
    pthread_mutex_lock(&c->mu);
    complete_ready(c);
    pthread_mutex_unlock(&c->mu);
    return id;
}

void sl_coordinator_ack(sl_coordinator_t *c, int64_t id, int task) { sl_coordinator_ack_stats(c, id, task, NULL); }

void sl_coordinator_request_final(sl_coordinator_t *c) {
    pthread_mutex_lock(&c->mu);
    if (c->final_wanted || c->sync_pending || c->sync_done) {
        pthread_mutex_unlock(&c->mu);
        return;
    }
    c->final_wanted = true;
    c->final_from = c->next_id;
    bool now = c->npending < c->cfg.max_concurrent;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (now) sl_coordinator_trigger(c); /* else the timer thread starts it when the pending one ends */
}

/* Where the figures of checkpoint id's task live (mu held), or NULL. */
static sl_ckpt_task_stats_t *task_stats_for(sl_coordinator_t *c, int64_t id, int task) {
    for (int64_t i = c->nstats - 1; i >= 0 && i >= c->nstats - STATS_KEPT; i--)
        if (c->stats[i % STATS_KEPT].id == id)
            return &c->task_stats[(size_t)(i % STATS_KEPT) * (size_t)c->ntasks + (size_t)task];
    return NULL;
}

int sl_coordinator_task_stats(sl_coordinator_t *c, int64_t id, sl_ckpt_task_stats_t *out) {
    pthread_mutex_lock(&c->mu);
    sl_ckpt_task_stats_t *ts = c->ntasks ? task_stats_for(c, id, 0) : NULL;
    if (ts) memcpy(out, ts, (size_t)c->ntasks * sizeof *out);
    pthread_mutex_unlock(&c->mu);
    return ts ? 0 : SL_ENOTFOUND;
}

void sl_coordinator_ack_stats(sl_coordinator_t *c, int64_t id, int task, const sl_ckpt_task_stats_t *ts) {
    pthread_mutex_lock(&c->mu);
    if (ts && task >= 0 && task < c->ntasks) {
        sl_ckpt_task_stats_t *d = task_stats_for(c, id, task);
        sl_ckpt_stats_t *s = stats_for(c, id);
        if (d && s && !d->acked) {
            *d = *ts;
            d->acked = true;
            s->state_bytes += ts->state_bytes;
            s->inflight_bytes += ts->inflight_bytes;
            s->max_align_us = SL_MAX(s->max_align_us, ts->align_us);
            s->max_sync_us = SL_MAX(s->max_sync_us, ts->sync_us);
            s->max_async_us = SL_MAX(s->max_async_us, ts->async_us);
            s->unaligned_tasks += ts->unaligned;
        }
    }
    for (int i = 0; i < c->npending; i++) {
        pending_t *p = &c->pending[i];
        if (p->id != id) continue;
        if (task >= 0 && task < c->ntasks && !p->acked[task]) {
            p->acked[task] = true;
            p->nacked++;
            complete_ready(c);
        }
        break;
    }
    pthread_mutex_unlock(&c->mu);
}

void sl_coordinator_decline(sl_coordinator_t *c, int64_t id, int task, const char *why) {
    pthread_mutex_lock(&c->mu);
    for (int i = 0; i < c->npending; i++)
        if (c->pending[i].id == id) {
            char msg[400];
            snprintf(msg, sizeof msg, "declined by task %d: %s", task, why);
            abort_locked(c, i, msg);
            break;
        }
    pthread_mutex_unlock(&c->mu);
}

void sl_coordinator_task_finished(sl_coordinator_t *c, int task) {
    pthread_mutex_lock(&c->mu);
    if (task >= 0 && task < c->ntasks && !c->finished[task]) {
        c->finished[task] = true;
        for (int i = 0; i < c->npending; i++) {
            pending_t *p = &c->pending[i];
            if (!p->acked[task]) {
                p->acked[task] = true;
                p->nacked++;
            }
        }
        complete_ready(c);
    }
    pthread_mutex_unlock(&c->mu);
}

static void *timer_main(void *arg) {
    sl_coordinator_t *c = arg;
    pthread_mutex_lock(&c->mu);
    int64_t next = sl_mono_ns() + c->cfg.interval_ms * 1000000LL;
    while (!c->stop) {
        int64_t now = sl_mono_ns();
        for (int i = c->npending - 1; i >= 0; i--)
            if (now >= c->pending[i].deadline_ns) abort_locked(c, i, "expired before completing");
        if (c->stop) break;
        bool final_now = false; /* the final checkpoint: not held back by the interval or the pause */
        if (c->final_wanted) {
            final_now = true;
            for (int i = 0; i < c->npending; i++)
                if (c->pending[i].id >= c->final_from) final_now = false; /* it is under way */
        }
        if (((now >= next && now >= c->last_end_ns + c->cfg.min_pause_ms * 1000000LL) || final_now) &&
            c->npending < c->cfg.max_concurrent) {
            int64_t ts = 0;
            int64_t id = start_locked(c, &ts, SL_SNAP_CHECKPOINT);
            next = now + c->cfg.interval_ms * 1000000LL;
            if (id >= 0) {
                pthread_mutex_unlock(&c->mu);
                prepare_and_trigger(c, id, ts, SL_SNAP_CHECKPOINT);
                pthread_mutex_lock(&c->mu);
                complete_ready(c);
            }
            continue;
        }
        int64_t wake = next;
        if (c->final_wanted && wake > now + 2000000) wake = now + 2000000; /* look again soon */
        for (int i = 0; i < c->npending; i++)
            if (c->pending[i].deadline_ns < wake) wake = c->pending[i].deadline_ns;
        if (wake < now + 1000000) wake = now + 1000000;
        struct timespec ts = {(time_t)(wake / 1000000000), (long)(wake % 1000000000)};
        pthread_cond_timedwait(&c->cv, &c->mu, &ts);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

void sl_coordinator_start(sl_coordinator_t *c) {
    if (c->cfg.interval_ms <= 0 || c->running) return;
    c->stop = false;
    if (pthread_create(&c->thread, NULL, timer_main, c) == 0) c->running = true;
}

void sl_coordinator_stop(sl_coordinator_t *c) {
    pthread_mutex_lock(&c->mu);
    c->stop = true;
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (c->running) pthread_join(c->thread, NULL);
    c->running = false;
}

void sl_coordinator_destroy(sl_coordinator_t *c) {
    if (!c) return;
    sl_coordinator_stop(c);
    while (c->npending) remove_pending(c, c->npending - 1);
    sl_free(c->finished);
    sl_free(c->task_stats);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    sl_free(c);
}

int64_t sl_coordinator_completed(const sl_coordinator_t *c, int64_t *latest) {
    sl_coordinator_t *m = (sl_coordinator_t *)c;
    pthread_mutex_lock(&m->mu);
    int64_t n = m->completed;
    if (latest) *latest = m->latest;
    pthread_mutex_unlock(&m->mu);
    return n;
}

int sl_coordinator_stats(sl_coordinator_t *c, sl_ckpt_stats_t *out, int cap) {
    pthread_mutex_lock(&c->mu);
    int64_t first = c->nstats > STATS_KEPT ? c->nstats - STATS_KEPT : 0;
    if (c->nstats - first > cap) first = c->nstats - cap;
    int n = 0;
    for (int64_t i = first; i < c->nstats; i++) out[n++] = c->stats[i % STATS_KEPT];
    pthread_mutex_unlock(&c->mu);
    return n;
}

int64_t sl_coordinator_next_id(sl_coordinator_t *c) {
    pthread_mutex_lock(&c->mu);
    int64_t n = c->next_id;
    pthread_mutex_unlock(&c->mu);
    return n;
}

void sl_coordinator_set_next_id(sl_coordinator_t *c, int64_t next) {
    pthread_mutex_lock(&c->mu);
    if (next > c->next_id) c->next_id = next;
    pthread_mutex_unlock(&c->mu);
}
