/*
 * deployment.c — the TaskManager side of one job attempt (deployment.h):
 * builds the subtasks a DEPLOY names, restores them, wires their channels,
 * runs them on their own threads, persists their snapshots and reports to
 * the JobManager in messages.
 */
#include "taskmanager/deployment.h"

#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "checkpoint/metadata.h"
#include "checkpoint/spilled_blob.h"
#include "checkpoint/state_schemas.h"
#include "checkpoint/state_file.h"
#include "checkpoint/storage.h"
#include "common/common.h"
#include "state/rocksdb_backend.h"
#include "metrics/prom.h"
#include "taskmanager/native_checkpoint.h"
#include "taskmanager/net/data_plane.h"
#include "taskmanager/task_int.h"

void sl_chain_out_init(sl_chain_out_t *co, sl_task_t *t, int ntags);
void sl_gate_init(sl_input_gate_t *g, sl_task_t *t, int input, const sl_schema_t *schema);
void sl_gate_add_channel(sl_input_gate_t *g, sl_channel_t *ch);
void sl_gate_finalize(sl_input_gate_t *g);
void sl_gate_free(sl_input_gate_t *g);

struct sl_deployment {
    const sl_plan_t *plan;
    const sl_job_code_t *code;
    char *job_id;
    int attempt;
    sl_dep_send_fn send;
    void *send_ctx;
    sl_ckpt_metadata_t *restore_md; /* the checkpoint restored from, or NULL */
    char *restore_path;
    sl_rocksdb_cache_t *rdb_cache;  /* shared by the deployment's RocksDB backends */
    sl_native_uploads_t **uploads;  /* per local task, per operator: shared files in storage (writer thread) */
    sl_task_t **tasks;              /* per vertex: parallelism entries; t->dep == NULL: not deployed here */
    sl_task_t **local;              /* the deployed ones */
    int nlocal;
    sl_channel_t **channels;
    int nchannels, channels_cap;
    /* channels to and from other TaskManagers */
    sl_data_plane_t *dp;
    struct remote { uint64_t id; sl_channel_t *ch; bool output; } *remote;
    int nremote;
    int *peer_of_task;              /* per task index: index into peers, -1 here */
    int (*gate_count)[2];           /* per task index, per input: channels wired so far */
    const sl_msg_deploy_t *deploy;  /* during sl_deployment_new only */
    pthread_mutex_t mu;
    bool failed, canceled;
    int pending_rc;                 /* a deployment-level failure (a remote channel) not yet reported */
    char *pending_why;
    /* checkpoint storage (when a directory is set): state files are
     * written here, by this process */
    sl_ckpt_storage_t *storage;
    pthread_mutex_t ckpt_mu;
    /* the asynchronous phase: one writer thread, a queue of task snapshots */
    pthread_t writer;
    bool writer_started, writer_stop;
    pthread_cond_t writer_cv;
    struct wq { sl_ckpt_task_snap_t *snap; struct wq *next; } *wq_head, *wq_tail;
    sl_buf_t **final_state;         /* per local task, per operator: state at its end */
    sl_buf_t **unions;              /* restored operator state handed to operators */
    int nunions;
    /* live metrics: a reporter thread sends METRICS every
     * SL_METRICS_REPORT_INTERVAL_MS while tasks run */
    pthread_t reporter;
    bool reporter_started, reporter_stop;
    pthread_mutex_t reporter_mu;
    pthread_cond_t reporter_cv;
    char tm_id[128];                /* the TaskManager's id in METRICS */
};

static int local_slot(const sl_task_t *t) { return t->local_index; }

static sl_channel_t *new_channel(sl_deployment_t *dep, sl_task_t *consumer) {
    if (dep->nchannels == dep->channels_cap) {
        dep->channels_cap = dep->channels_cap ? dep->channels_cap * 2 : 64;
        dep->channels = sl_realloc(dep->channels, (size_t)dep->channels_cap * sizeof *dep->channels);
    }
    sl_channel_t *ch = sl_channel_new(dep->plan->cfg.buffers_per_channel, (uint32_t)dep->plan->cfg.buffer_size,
                                      consumer ? &consumer->waker : NULL); /* NULL: the data plane consumes */
    dep->channels[dep->nchannels++] = ch;
    return ch;
}

/* Pointwise connection (forward/rescale) between p_src and p_dst subtasks. */
static bool pointwise_connected(int i, int ps, int j, int pd) {
    if (ps == pd) return i == j;
    if (ps > pd) return (int)((int64_t)i * pd / ps) == j;
    return (int)((int64_t)j * ps / pd) == i;
}

static void add_writer(sl_task_t *t, sl_chain_out_t *co, int tag, sl_record_writer_t *w) {
    sl_tag_route_t *r = &co->tags[tag];
    r->w = sl_realloc(r->w, (size_t)(r->nw + 1) * sizeof *r->w);
    r->w[r->nw++] = w;
    t->writers = sl_realloc(t->writers, (size_t)(t->nwriters + 1) * sizeof *t->writers);
    t->writers[t->nwriters++] = w;
}

static void cancel_all_locked(sl_deployment_t *dep) {
    for (int i = 0; i < dep->nlocal; i++) sl_task_cancel(dep->local[i]);
    for (int i = 0; i < dep->nchannels; i++) sl_channel_cancel(dep->channels[i]);
}

const char *sl_deployment_job(const sl_deployment_t *dep) { return dep->job_id; }
void sl_deployment_set_tm_id(sl_deployment_t *dep, const char *tm_id) {
    snprintf(dep->tm_id, sizeof dep->tm_id, "%s", tm_id ? tm_id : "");
}
int sl_deployment_attempt(const sl_deployment_t *dep) { return dep->attempt; }

void sl_deployment_head_uid(sl_deployment_t *dep, int vertex, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", dep->plan->nodes[dep->plan->vertices[vertex].nodes[0]].uid);
}

static const char *node_uid(const sl_deployment_t *dep, int node) { return dep->plan->nodes[node].uid; }

sl_task_t *sl_deployment_local_task(sl_deployment_t *dep, int vertex, int subtask) {
    if (vertex < 0 || vertex >= dep->plan->nvertices || subtask < 0 ||
        subtask >= dep->plan->vertices[vertex].parallelism)
        return NULL;
    sl_task_t *t = &dep->tasks[vertex][subtask];
    return t->dep ? t : NULL;
}

static sl_msg_task_ref_t task_ref(const sl_deployment_t *dep, const sl_task_t *t) {
    return (sl_msg_task_ref_t){t->vertex, t->subtask, dep->plan->first_task[t->vertex] + t->subtask};
}

/* ---- what the JobManager tells the tasks (any thread) ---- */

void sl_deployment_trigger(sl_deployment_t *dep, int64_t id, int64_t ts, int kind) {
    for (int i = 0; i < dep->nlocal; i++)
        sl_task_post_trigger(dep->local[i], id, ts, kind); /* sources, and tasks whose inputs all ended */
}

void sl_deployment_notify(sl_deployment_t *dep, int64_t id, bool complete) {
    for (int i = 0; i < dep->nlocal; i++) {
        if (complete)
            sl_task_post_complete(dep->local[i], id);
        else
            sl_task_post_aborted(dep->local[i], id);
    }
}

void sl_deployment_cancel(sl_deployment_t *dep) {
    pthread_mutex_lock(&dep->mu);
    if (!dep->failed && !dep->canceled) {
        dep->canceled = true;
        cancel_all_locked(dep);
    }
    pthread_mutex_unlock(&dep->mu);
}

/* ---- live metrics ---- */

/* Appends the figures t published (any thread: relaxed loads of t->pub). */
static void metrics_of(const sl_deployment_t *dep, const sl_task_t *t, sl_msg_subtask_metrics_t *st) {
    st->task = task_ref(dep, t);
    sl_task_read_times(t, &st->time_ns, &st->busy_ns, &st->idle_ns, &st->backpressured_ns);
    st->bytes_in = atomic_load_explicit(&t->pub.bytes_in, memory_order_relaxed);
    st->bytes_out = atomic_load_explicit(&t->pub.bytes_out, memory_order_relaxed);
    st->nops = t->nops;
    st->ops = sl_calloc((size_t)(t->nops ? t->nops : 1), sizeof *st->ops);
    const sl_plan_vertex_t *v = &dep->plan->vertices[t->vertex];
    for (int k = 0; k < t->nops; k++) {
        const sl_op_pub_t *p = &t->pub.ops[k];
        st->ops[k] = (sl_msg_op_metrics_t){
            .node = v->nodes[k],
            .records_in = atomic_load_explicit(&p->records_in, memory_order_relaxed),
            .records_out = atomic_load_explicit(&p->records_out, memory_order_relaxed),
            .records_skipped = atomic_load_explicit(&p->records_skipped, memory_order_relaxed),
            .in_watermark = atomic_load_explicit(&p->in_wm, memory_order_relaxed),
            .out_watermark = atomic_load_explicit(&p->out_wm, memory_order_relaxed),
            .late_dropped = atomic_load_explicit(&p->late_dropped, memory_order_relaxed),
            .pending_records = atomic_load_explicit(&p->pending, memory_order_relaxed),
            .state_memory_bytes = atomic_load_explicit(&p->state_mem, memory_order_relaxed),
            .rdb_mem_tables = atomic_load_explicit(&p->rdb_mem_tables, memory_order_relaxed),
            .rdb_table_readers = atomic_load_explicit(&p->rdb_table_readers, memory_order_relaxed),
            .rdb_block_cache = atomic_load_explicit(&p->rdb_block_cache, memory_order_relaxed),
            .rdb_live_data = atomic_load_explicit(&p->rdb_live_data, memory_order_relaxed),
        };
    }
}

/* Sends METRICS for the local task `only` (its final figures, from its own
 * thread before its end is reported), or for every local task (NULL). */
static void send_metrics(sl_deployment_t *dep, const sl_task_t *only) {
    if (!dep->nlocal) return;
    sl_msg_t *m = sl_msg_new(SL_MSG_METRICS);
    sl_msg_metrics_t *mm = &m->u.metrics;
    mm->job_id = sl_strdup(dep->job_id);
    mm->attempt = dep->attempt;
    mm->tm_id = sl_strdup(dep->tm_id[0] ? dep->tm_id : "tm");
    mm->time_ns = sl_mono_ns();
    mm->subtasks = sl_calloc((size_t)dep->nlocal, sizeof *mm->subtasks);
    for (int i = 0; i < dep->nlocal; i++)
        if (!only || dep->local[i] == only) metrics_of(dep, dep->local[i], &mm->subtasks[mm->nsubtasks++]);
    dep->send(dep->send_ctx, m);
}

static void *reporter_main(void *arg) {
    sl_deployment_t *dep = arg;
    pthread_mutex_lock(&dep->reporter_mu);
    while (!dep->reporter_stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        int64_t ns = ts.tv_nsec + SL_METRICS_REPORT_INTERVAL_MS * 1000000LL;
        ts.tv_sec += ns / 1000000000LL;
        ts.tv_nsec = ns % 1000000000LL;
        pthread_cond_timedwait(&dep->reporter_cv, &dep->reporter_mu, &ts);
        if (dep->reporter_stop) break;
        pthread_mutex_unlock(&dep->reporter_mu);
        send_metrics(dep, NULL);
        pthread_mutex_lock(&dep->reporter_mu);
    }
    pthread_mutex_unlock(&dep->reporter_mu);
    return NULL;
}

static void reporter_stop(sl_deployment_t *dep) {
    if (!dep->reporter_started) return;
    pthread_mutex_lock(&dep->reporter_mu);
    dep->reporter_stop = true;
    pthread_cond_signal(&dep->reporter_cv);
    pthread_mutex_unlock(&dep->reporter_mu);
    pthread_join(dep->reporter, NULL);
    dep->reporter_started = false;
}

/* Prometheus (any thread): one metric family's samples for every local
 * subtask, from what the tasks published. */
void sl_deployment_prom_family(sl_deployment_t *dep, int family, const char *name, const char *tm_id, sl_buf_t *out) {
    char sub[16];
    for (int i = 0; i < dep->nlocal; i++) {
        const sl_task_t *t = dep->local[i];
        const sl_plan_vertex_t *v = &dep->plan->vertices[t->vertex];
        snprintf(sub, sizeof sub, "%d", t->subtask);
        const char *labels[12] = {"job_id", dep->job_id, "job_name", dep->plan->job_name ? dep->plan->job_name : "",
                                  "task_name", v->name, "subtask_index", sub, "tm_id", tm_id, "operator_name", ""};
        if (family == SL_PROM_TASK_BYTES_IN || family == SL_PROM_TASK_BYTES_OUT) {
            sl_prom_sample(out, name, labels, 5,
                           (double)atomic_load_explicit(family == SL_PROM_TASK_BYTES_IN ? &t->pub.bytes_in
                                                                                         : &t->pub.bytes_out,
                                                        memory_order_relaxed));
            continue;
        }
        if (family >= SL_PROM_TASK_BUSY) {
            int64_t at, busy, idle, bp;
            sl_task_read_times(t, &at, &busy, &idle, &bp);
            int64_t ns = family == SL_PROM_TASK_BUSY ? busy : family == SL_PROM_TASK_IDLE ? idle : bp;
            sl_prom_sample(out, name, labels, 5, (double)(ns / 1000000));
            continue;
        }
        for (int k = 0; k < t->nops; k++) {
            const sl_op_pub_t *p = &t->pub.ops[k];
            labels[11] = dep->plan->nodes[v->nodes[k]].name;
            const atomic_llong *f = family == SL_PROM_OP_IN       ? &p->records_in
                                    : family == SL_PROM_OP_OUT    ? &p->records_out
                                    : family == SL_PROM_OP_IN_WM  ? &p->in_wm
                                    : family == SL_PROM_OP_OUT_WM ? &p->out_wm
                                    : family == SL_PROM_OP_LATE   ? &p->late_dropped
                                    : family == SL_PROM_OP_STATE_MEM      ? &p->state_mem
                                    : family == SL_PROM_OP_RDB_MEMTABLES  ? &p->rdb_mem_tables
                                    : family == SL_PROM_OP_RDB_READERS    ? &p->rdb_table_readers
                                    : family == SL_PROM_OP_RDB_BLOCK_CACHE ? &p->rdb_block_cache
                                    : family == SL_PROM_OP_RDB_LIVE_DATA  ? &p->rdb_live_data
                                                                  : &p->pending;
            int64_t v = atomic_load_explicit(f, memory_order_relaxed);
            /* -1: not a source that knows it / no keyed state / not RocksDB */
            if ((family == SL_PROM_OP_PENDING || (family >= SL_PROM_OP_STATE_MEM && family <= SL_PROM_OP_RDB_LIVE_DATA)) && v < 0)
                continue;
            sl_prom_sample(out, name, labels, 6, (double)v);
        }
    }
}

/* ---- what the tasks report (task threads) ---- */

void sl_deployment_task_final(sl_deployment_t *dep, sl_task_t *t) {
    if (!dep->plan->cfg.ckpt_enabled) return;
    sl_buf_t *bufs = sl_calloc((size_t)t->nops, sizeof *bufs);
    for (int k = 0; k < t->nops; k++)
        if (t->ops[k]->vt->snapshot_state) t->ops[k]->vt->snapshot_state(t->ops[k], 0, &bufs[k]);
    pthread_mutex_lock(&dep->ckpt_mu);
    dep->final_state[local_slot(t)] = bufs;
    pthread_mutex_unlock(&dep->ckpt_mu);
}

/* TASK_STATE for t: its outcome, its operators' counters and, when it
 * finished, the final operator state that later checkpoints carry.  That
 * state is inline in the message: a task whose final state cannot fit fails
 * with a message naming it (instead of a message that cannot be sent). */
#define FINAL_STATE_HEADROOM (64u << 10) /* the rest of the message */
static void report_end(sl_deployment_t *dep, sl_task_t *t, int state) {
    if (state == SL_TASK_FINISHED) { /* the final operator state travels inline: it must fit a message */
        pthread_mutex_lock(&dep->ckpt_mu);
        sl_buf_t *fb = dep->final_state[local_slot(t)];
        size_t total = 0, big_len = 0;
        int big = 0;
        for (int k = 0; fb && k < t->nops; k++) {
            total += fb[k].len;
            if (fb[k].len > big_len) big_len = fb[k].len, big = k;
        }
        pthread_mutex_unlock(&dep->ckpt_mu);
        if (total + FINAL_STATE_HEADROOM > SL_MSG_MAX_FRAME) {
            state = SL_TASK_FAILED;
            t->rc = SL_EINVAL;
            snprintf(t->err, sizeof t->err,
                     "task %s finished with %zu bytes of operator state (operator '%s': %zu), over the %u bytes "
                     "a finished task's final state can have (it travels in one control message); let the "
                     "operator clear its state when its input ends (end_input)",
                     t->name, total, node_uid(dep, dep->plan->vertices[t->vertex].nodes[big]), big_len,
                     SL_MSG_MAX_FRAME - FINAL_STATE_HEADROOM);
        }
    }
    if (t->start_ns) send_metrics(dep, t); /* ordered before the end on the same transport */
    sl_msg_t *m = sl_msg_new(SL_MSG_TASK_STATE);
    sl_msg_task_state_t *ts = &m->u.task_state;
    ts->job_id = sl_strdup(dep->job_id);
    ts->attempt = dep->attempt;
    ts->task = task_ref(dep, t);
    ts->state = state;
    ts->error_code = state == SL_TASK_FAILED ? t->rc : 0;
    ts->message = sl_strdup(state == SL_TASK_FAILED ? t->err : "");
    ts->max_sync_ns = t->max_sync_ns;
    ts->nmetrics = t->nops;
    ts->metrics = sl_calloc((size_t)(t->nops ? t->nops : 1), sizeof *ts->metrics);
    const sl_plan_vertex_t *v = &dep->plan->vertices[t->vertex];
    for (int k = 0; k < t->nops; k++)
        ts->metrics[k] = (sl_msg_op_metrics_t){.node = v->nodes[k],
                                               .records_in = t->ops[k]->records_in,
                                               .records_out = t->ops[k]->records_out,
                                               .records_skipped = t->ops[k]->records_skipped};
    pthread_mutex_lock(&dep->ckpt_mu);
    sl_buf_t *bufs = dep->final_state[local_slot(t)];
    dep->final_state[local_slot(t)] = NULL;
    pthread_mutex_unlock(&dep->ckpt_mu);
    if (bufs && state == SL_TASK_FINISHED) {
        ts->final_state = sl_calloc((size_t)t->nops, sizeof *ts->final_state);
        for (int k = 0; k < t->nops; k++) {
            if (!bufs[k].len) continue;
            sl_msg_op_state_t *os = &ts->final_state[ts->nfinal++];
            os->uid = sl_strdup(node_uid(dep, v->nodes[k]));
            os->st.index = t->subtask;
            sl_ckpt_subtask_add_blob(&os->st, "operator-state", SL_CKPT_DIST_SPLIT, bufs[k].p, bufs[k].len);
        }
    }
    for (int k = 0; bufs && k < t->nops; k++) sl_buf_free(&bufs[k]);
    sl_free(bufs);
    dep->send(dep->send_ctx, m);
}

/* The first failure is reported before any other task's (mu held while it
 * is sent): the JobManager takes the first FAILED it receives as the
 * cause, and the tasks this cancellation makes fail must not overtake it. */
void sl_deployment_task_end_of_data(sl_deployment_t *dep, sl_task_t *t) {
    sl_msg_t *m = sl_msg_new(SL_MSG_TASK_STATE);
    sl_msg_task_state_t *ts = &m->u.task_state;
    ts->job_id = sl_strdup(dep->job_id);
    ts->attempt = dep->attempt;
    ts->task = task_ref(dep, t);
    ts->state = SL_TASK_RUNNING;
    ts->message = sl_strdup("");
    ts->end_of_data = true;
    dep->send(dep->send_ctx, m);
}

void sl_deployment_task_failed(sl_deployment_t *dep, sl_task_t *t) {
    pthread_mutex_lock(&dep->mu);
    bool first = !dep->failed && !dep->canceled;
    if (first) {
        dep->failed = true;
        cancel_all_locked(dep);
        report_end(dep, t, SL_TASK_FAILED);
    }
    pthread_mutex_unlock(&dep->mu);
    if (!first) report_end(dep, t, SL_TASK_FAILED);
}

void sl_deployment_task_done(sl_deployment_t *dep, sl_task_t *t) {
    /* Only a task that ran to its end acknowledges later checkpoints
     * implicitly; a cancelled one has no state to speak for.  A task
     * cancelled because a remote channel failed carries that failure. */
    pthread_mutex_lock(&dep->mu);
    if (!t->finished && dep->pending_why) {
        t->rc = dep->pending_rc;
        snprintf(t->err, sizeof t->err, "%s: %s", t->name, dep->pending_why);
        sl_free(dep->pending_why);
        dep->pending_why = NULL;
        report_end(dep, t, SL_TASK_FAILED);
        pthread_mutex_unlock(&dep->mu);
        return;
    }
    pthread_mutex_unlock(&dep->mu);
    report_end(dep, t, t->finished ? SL_TASK_FINISHED : SL_TASK_CANCELED);
}

void sl_deployment_fail(sl_deployment_t *dep, int rc, const char *why) {
    pthread_mutex_lock(&dep->mu);
    if (!dep->failed && !dep->canceled) {
        dep->failed = true;
        dep->pending_rc = rc;
        dep->pending_why = sl_strdup(why);
        cancel_all_locked(dep);
    }
    pthread_mutex_unlock(&dep->mu);
}

bool sl_deployment_has_channel(const sl_deployment_t *dep, uint64_t id) {
    for (int i = 0; i < dep->nremote; i++)
        if (dep->remote[i].id == id) return true;
    return false;
}

/* The id of the channel from subtask i of edge e's source to subtask j of
 * its destination: the same on both TaskManagers. */
static uint64_t channel_id(const sl_deployment_t *dep, int e, int i, int j) {
    char key[400];
    int n = snprintf(key, sizeof key, "%s/%d/%d/%d/%d", dep->job_id, dep->attempt, e, i, j);
    return sl_hash_bytes(key, (size_t)n);
}

static void add_remote(sl_deployment_t *dep, uint64_t id, sl_channel_t *ch, bool output) {
    dep->remote = sl_realloc(dep->remote, (size_t)(dep->nremote + 1) * sizeof *dep->remote);
    dep->remote[dep->nremote++] = (struct remote){id, ch, output};
}

static void snap_free(sl_ckpt_task_snap_t *snap) {
    for (int k = 0; k < snap->nops; k++) {
        sl_buf_free(&snap->blobs[k]);
        if (snap->keyed[k]) sl_kb_snapshot_release(snap->keyed[k]);
        if (snap->timers[k]) sl_timers_snapshot_release(snap->timers[k]);
    }
    sl_free(snap->blobs);
    sl_free(snap->keyed);
    sl_free(snap->timers);
    sl_free(snap->ranges);
    sl_buf_free(&snap->inflight);
    for (int k = 0; snap->native && k < snap->nops; k++) sl_native_snap_free(snap->native[k]);
    sl_free(snap->native);
    for (int k = 0; snap->times && k < snap->nops; k++) sl_buf_free(&snap->times[k]);
    sl_free(snap->times);
    sl_free(snap);
}

#define TIMER_SECTION(kg) ((1ull << 32) | (uint64_t)(kg))

/* Writes keyed operator k's state and timers: one section per key group. */
static int write_keyed(sl_deployment_t *dep, sl_ckpt_task_snap_t *snap, int k, const char *name, sl_sf_info_t *info,
                       char *err, size_t errlen) {
    sl_ckpt_out_t *out = NULL;
    int rc = dep->storage->ops->open_output(dep->storage, snap->id, SL_CKPT_SCOPE_EXCLUSIVE, name, &out, err, errlen);
    if (rc < 0) return rc;
    sl_state_file_writer_t *w = NULL;
    rc = sl_sf_writer_new(out, SL_SF_KIND_KEYED, &w, err, errlen);
    if (rc < 0) return rc;
    sl_buf_t buf = {0};
    for (int kg = snap->ranges[k].start; kg < snap->ranges[k].end && rc == 0; kg++) {
        buf.len = 0;
        if (snap->keyed[k]) rc = sl_kb_snapshot_write(snap->keyed[k], kg, &buf); /* else native: timers only */
        if (rc == 0) rc = sl_sf_begin_section(w, (uint64_t)kg);
        if (rc == 0) rc = sl_sf_put_raw(w, buf.p, buf.len);
        if (rc == 0) rc = sl_sf_end_section(w);
        if (rc == 0 && snap->timers[k]) {
            buf.len = 0;
            rc = sl_timers_snapshot_write_kg(snap->timers[k], kg, &buf);
            if (rc == 0) rc = sl_sf_begin_section(w, TIMER_SECTION(kg));
            if (rc == 0) rc = sl_sf_put_raw(w, buf.p, buf.len);
            if (rc == 0) rc = sl_sf_end_section(w);
        }
    }
    sl_buf_free(&buf);
    if (rc < 0) {
        sl_errf(err, errlen, rc, "writing %s: %s", name, sl_sf_writer_message(w));
        sl_sf_writer_abort(w);
        return rc;
    }
    return sl_sf_writer_close(w, info, err, errlen);
}

/* The TTL of each typed state of op (ms, 0 none, -1 unknown) as its
 * stored items have it (operator.h, typed_ttl).  A new array (sl_free). */
static int64_t *typed_ttls(const sl_operator_t *op) {
    int64_t *t = sl_malloc((size_t)op->ntyped * sizeof *t);
    for (int i = 0; i < op->ntyped; i++) t[i] = __atomic_load_n(&op->typed_ttl[i], __ATOMIC_RELAXED);
    return t;
}

/* The asynchronous phase of one task's snapshot: write its state files,
 * then acknowledge with their handles (or decline). */
static void persist(sl_deployment_t *dep, sl_ckpt_task_snap_t *snap) {
    sl_task_t *t = snap->task;
    char err[600] = "";
    int rc = 0;
    int64_t t0 = sl_mono_ns();
    sl_msg_t *m = sl_msg_new(SL_MSG_ACK);
    sl_msg_ack_t *a = &m->u.ack;
    a->job_id = sl_strdup(dep->job_id);
    a->attempt = dep->attempt;
    a->checkpoint_id = snap->id;
    a->task = task_ref(dep, t);
    a->align_us = snap->align_ns / 1000;
    a->sync_us = snap->sync_ns / 1000;
    a->inflight_bytes = (int64_t)snap->inflight.len;
    a->unaligned = snap->unaligned;
    a->ops = sl_calloc((size_t)(snap->nops ? snap->nops : 1), sizeof *a->ops);
    if (dep->storage) {
        const sl_plan_vertex_t *v = &dep->plan->vertices[t->vertex];
        for (int k = 0; k < snap->nops && rc == 0; k++) {
            int node = v->nodes[k];
            sl_msg_op_state_t *os = &a->ops[a->nops++];
            os->uid = sl_strdup(node_uid(dep, node));
            os->st.index = t->subtask;
            os->st.range = sl_kg_range_for(dep->plan->cfg.max_parallelism, t->parallelism, t->subtask);
            sl_ckpt_subtask_t *st = &os->st;
            sl_sf_info_t info;
            memset(&info, 0, sizeof info);
            char name[64];
            snprintf(name, sizeof name, "keyed-%d-%d", node, t->subtask);
            bool native = snap->native && snap->native[k];
            if (snap->keyed[k] || native) {
                rc = write_keyed(dep, snap, k, name, &info, err, sizeof err);
                if (rc == 0) {
                    sl_ckpt_subtask_add_file(st, SL_CKPT_SCOPE_EXCLUSIVE, name, &info);
                    a->state_bytes += (int64_t)info.size;
                }
            }
            if (native && rc == 0) {
                int li = local_slot(t);
                if (!dep->uploads[li]) dep->uploads[li] = sl_calloc((size_t)snap->nops, sizeof *dep->uploads[li]);
                char prefix[64];
                snprintf(prefix, sizeof prefix, "rdb-%d-%d", node, t->subtask);
                sl_ckpt_subtask_t ntmp;
                memset(&ntmp, 0, sizeof ntmp);
                /* a savepoint owns every file it needs (self-contained, movable); a checkpoint shares
                 * what earlier ones uploaded */
                rc = sl_native_persist(dep->storage, snap->id, snap->native[k], prefix,
                                       sl_snap_is_savepoint(snap->kind) ? NULL : &dep->uploads[li][k], &ntmp,
                                       &a->state_bytes, err, sizeof err);
                sl_native_move(rc == 0 ? st : NULL, &ntmp);
            }
            /* operator state and in-flight data inline up to SL_CKPT_INLINE_MAX, else a file
             * of their own (spilled_blob.h): neither the acknowledgement nor _metadata may grow
             * with a 2PC sink's pending output */
            char bname[80];
            if (rc == 0 && snap->blobs[k].len) {
                snprintf(bname, sizeof bname, "opstate-%d-%d", node, t->subtask);
                if (snap->blobs[k].len <= SL_CKPT_INLINE_MAX) a->state_bytes += (int64_t)snap->blobs[k].len;
                rc = sl_ckpt_add_blob_or_spill(dep->storage, snap->id, st, "operator-state", SL_CKPT_DIST_SPLIT,
                                               snap->blobs[k].p, snap->blobs[k].len, bname, &a->state_bytes, err,
                                               sizeof err);
            }
            if (snap->times && snap->times[k].len)
                sl_ckpt_subtask_add_blob(st, "event-time", SL_CKPT_DIST_SPLIT, snap->times[k].p, snap->times[k].len);
            if (t->ops[k]->ntyped) { /* the row schemas of its typed states, and their TTLs */
                sl_buf_t sb = {0};
                int64_t *ttls = typed_ttls(t->ops[k]);
                sl_state_schemas_encode(t->ops[k]->ntyped, (const char *const *)t->ops[k]->typed_names,
                                        t->ops[k]->typed_schemas, ttls, &sb);
                sl_free(ttls);
                sl_ckpt_subtask_add_blob(st, SL_STATE_SCHEMAS_BLOB, SL_CKPT_DIST_SPLIT, sb.p, sb.len);
                sl_buf_free(&sb);
            }
            if (rc == 0 && k == 0 && snap->inflight.len) {
                snprintf(bname, sizeof bname, "inflight-%d-%d", node, t->subtask);
                if (snap->inflight.len <= SL_CKPT_INLINE_MAX) a->state_bytes += (int64_t)snap->inflight.len;
                rc = sl_ckpt_add_blob_or_spill(dep->storage, snap->id, st, "inflight", SL_CKPT_DIST_SPLIT,
                                               snap->inflight.p, snap->inflight.len, bname, &a->state_bytes, err,
                                               sizeof err);
            }
            sl_sf_info_free(&info);
        }
    }
    int64_t id = snap->id;
    snap_free(snap);
    if (!dep->plan->cfg.ckpt_enabled) {
        sl_msg_destroy(m);
        return;
    }
    a->async_us = (sl_mono_ns() - t0) / 1000;
    if (rc < 0) {
        sl_msg_destroy(m);
        m = sl_msg_new(SL_MSG_DECLINE);
        sl_msg_decline_t *d = &m->u.decline;
        d->job_id = sl_strdup(dep->job_id);
        d->attempt = dep->attempt;
        d->checkpoint_id = id;
        d->task = task_ref(dep, t);
        d->reason = sl_strdup(err);
    }
    dep->send(dep->send_ctx, m);
}

static void *writer_main(void *arg) {
    sl_deployment_t *dep = arg;
    pthread_mutex_lock(&dep->ckpt_mu);
    for (;;) {
        while (!dep->wq_head && !dep->writer_stop) pthread_cond_wait(&dep->writer_cv, &dep->ckpt_mu);
        if (!dep->wq_head) break;
        struct wq *q = dep->wq_head;
        dep->wq_head = q->next;
        if (!dep->wq_head) dep->wq_tail = NULL;
        bool stop = dep->writer_stop;
        pthread_mutex_unlock(&dep->ckpt_mu);
        if (stop)
            snap_free(q->snap); /* the attempt is over: drop it */
        else
            persist(dep, q->snap);
        sl_free(q);
        pthread_mutex_lock(&dep->ckpt_mu);
    }
    pthread_mutex_unlock(&dep->ckpt_mu);
    return NULL;
}

void sl_deployment_task_snapshot(sl_deployment_t *dep, sl_ckpt_task_snap_t *snap) {
    if (!dep) {
        snap_free(snap);
        return;
    }
    struct wq *q = sl_malloc(sizeof *q);
    q->snap = snap;
    q->next = NULL;
    pthread_mutex_lock(&dep->ckpt_mu);
    if (!dep->writer_started) { /* no writer (no checkpointing): nothing to persist */
        pthread_mutex_unlock(&dep->ckpt_mu);
        sl_free(q);
        persist(dep, snap);
        return;
    }
    if (dep->wq_tail)
        dep->wq_tail->next = q;
    else
        dep->wq_head = q;
    dep->wq_tail = q;
    pthread_cond_signal(&dep->writer_cv);
    pthread_mutex_unlock(&dep->ckpt_mu);
}

static const char *rocksdb_base(const sl_deployment_t *dep) {
    const char *d = dep->plan->cfg.rocksdb_dir;
    return d && d[0] ? d : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
}

/* Loads keyed state and timers of op (node n, subtask s) from the restored
 * checkpoint: every key group of its range, from whichever old subtask's
 * file holds it (so a different parallelism works). */
static int restore_keyed(sl_deployment_t *dep, sl_operator_t *op, const char *uid, char *err,
                         size_t errlen) {
        const sl_ckpt_operator_t *mo = sl_ckpt_metadata_find_operator(dep->restore_md, uid);
    if (!mo || !op->kb) return 0;
    if (mo->max_parallelism != op->max_parallelism)
        return sl_errf(err, errlen, SL_EINVAL,
                       "restore: operator '%s' had max parallelism %d, now %d: keyed state cannot be restored "
                       "(pipeline.max-parallelism must not change)",
                       uid, mo->max_parallelism, op->max_parallelism);
    sl_state_migrations_t *mig = NULL; /* typed states: their schemas' evolution */
    bool changed = false;
    int mrc = sl_state_migrations_new(mo, uid, op->ntyped, (const char *const *)op->typed_names, op->typed_schemas,
                                      &mig, &changed, err, errlen);
    if (mrc < 0) return mrc;
    for (int i = 0; i < op->ntyped; i++) /* what open's declarations must match (TTL or not) */
        __atomic_store_n(&op->typed_ttl[i], sl_state_migrations_ttl(mig, i), __ATOMIC_RELAXED);
    if (changed && sl_native_present(mo)) {
        sl_state_migrations_free(mig);
        return sl_errf(err, errlen, SL_EINVAL,
                       "restore: operator '%s': a typed state's schema changed, and checkpoint %lld holds its state "
                       "in RocksDB's own files (incremental), which cannot be migrated: restore from a savepoint",
                       uid, (long long)dep->restore_md->checkpoint_id);
    }
    if (sl_native_present(mo)) { /* RocksDB's own files (an incremental checkpoint) */
        if (!sl_rocksdb_backend_is(op->kb))
            return sl_errf(err, errlen, SL_EINVAL,
                           "restore: checkpoint %lld holds incremental RocksDB state for operator '%s'; restore it with "
                           "state.backend.type rocksdb",
                           (long long)dep->restore_md->checkpoint_id, uid);
        static atomic_int seq;
        char dir[1200];
        snprintf(dir, sizeof dir, "%s/sluice-rocksdb-%d-%s-restored-%d-%d", rocksdb_base(dep), (int)getpid(),
                 dep->plan->job_id,
                 op->subtask, atomic_fetch_add(&seq, 1));
        sl_rocksdb_opts_t o = {.dir = dir,
                               .cache = dep->rdb_cache,
                               .write_buffer_bytes = dep->plan->cfg.rocksdb_write_buffer_bytes > 0
                                                         ? (size_t)dep->plan->cfg.rocksdb_write_buffer_bytes
                                                         : (size_t)64 << 20,
                               .value_cache_bytes = dep->plan->cfg.rocksdb_value_cache_bytes};
        sl_keyed_backend_t *nkb = NULL;
        int nrc = sl_native_restore(dep->restore_path, mo, op->max_parallelism, op->kg_range, rocksdb_base(dep), &o,
                                    &nkb, err, errlen);
        if (nrc < 0) {
            sl_state_migrations_free(mig);
            return nrc;
        }
        sl_kb_set_clock(nkb, op->kb->clock, op->kb->clock_ctx);
        op->kb->ops->destroy(op->kb);
        op->kb = nkb;
    }
    sl_state_file_reader_t *r = NULL;
    const sl_ckpt_state_handle_t *open_h = NULL;
    sl_buf_t migrated = {0};
    int rc = 0;
    for (int kg = op->kg_range.start; kg < op->kg_range.end && rc == 0; kg++) {
        const sl_ckpt_state_handle_t *h = NULL;
        for (int s = 0; s < mo->parallelism && !h; s++) {
            const sl_ckpt_subtask_t *st = &mo->subtasks[s];
            if (kg < st->range.start || kg >= st->range.end) continue;
            for (int i = 0; i < st->nhandles; i++)
                if (st->handles[i].kind == SL_SF_KIND_KEYED) h = &st->handles[i];
        }
        if (!h) continue; /* no state for this key group */
        if (h != open_h) {
            if (r) sl_sf_reader_close(r);
            r = NULL;
            char path[4600];
            snprintf(path, sizeof path, "%s/%s", dep->restore_path, h->path);
            rc = sl_sf_reader_open(path, SL_SF_KIND_KEYED, SL_SF_LAZY, &r, err, errlen);
            if (rc < 0) break;
            if (sl_sf_reader_size(r) != h->size || sl_sf_reader_checksum(r) != h->checksum) {
                rc = sl_errf(err, errlen, SL_EFORMAT, "restore: %s is not the file the checkpoint's metadata describes",
                             path);
                break;
            }
            open_h = h;
        }
        sl_sf_cursor_t c;
        rc = sl_sf_reader_section(r, (uint64_t)kg, &c, err, errlen);
        if (rc == SL_ENOTFOUND) {
            rc = 0;
            continue;
        }
        if (rc < 0) break;
        if (c.len && mig) { /* typed states: checked, and rewritten when their schema changed */
            rc = sl_state_migrations_apply(mig, c.p, c.len, op->max_parallelism, kg, &migrated, err, errlen);
            if (rc == 0) rc = op->kb->ops->restore(op->kb, kg, migrated.p, migrated.len, err, errlen);
        } else if (c.len) {
            rc = op->kb->ops->restore(op->kb, kg, c.p, c.len, err, errlen);
        }
        if (rc < 0 || !op->timers) continue;
        rc = sl_sf_reader_section(r, TIMER_SECTION(kg), &c, err, errlen);
        if (rc == SL_ENOTFOUND) {
            rc = 0;
            continue;
        }
        if (rc == 0 && c.len) rc = sl_timers_restore_kg(op->timers, kg, c.p, c.len, err, errlen);
    }
    if (r) sl_sf_reader_close(r);
    sl_buf_free(&migrated);
    sl_state_migrations_free(mig);
    return rc;
}

int sl_deployment_native_snapshot(sl_deployment_t *dep, sl_task_t *t, int k, bool force, sl_native_snap_t **out,
                                  char *err, size_t errlen) {
    *out = NULL;
    if (!dep || !dep->storage || !sl_native_wanted(force || dep->plan->cfg.incremental, t->ops[k]->kb)) return 0;
    char tag[64];
    snprintf(tag, sizeof tag, "%d-%d-%d", t->vertex, t->subtask, k);
    return sl_native_snapshot(t->ops[k]->kb, rocksdb_base(dep), tag, out, err, errlen);
}

/* The keyed backend of an operator subtask, as the plan says. */
static sl_keyed_backend_t *make_backend(void *ctx, const sl_op_init_t *init, sl_kg_range_t range, char *err,
                                        size_t errlen) {
    sl_deployment_t *dep = ctx;
    const sl_plan_config_t *c = &dep->plan->cfg;
    if (c->backend != SL_STATE_BACKEND_ROCKSDB) return sl_heap_backend_new(init->max_parallelism, range);
    static atomic_int seq;
    const char *base = rocksdb_base(dep);
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/sluice-rocksdb-%d-%s-%s-%d-%d", base, (int)getpid(), dep->plan->job_id,
             init->uid ? init->uid : init->name ? init->name : "op", init->subtask, atomic_fetch_add(&seq, 1));
    for (char *p = dir + strlen(base) + 1; *p; p++)
        if (*p == '/' || *p == ' ') *p = '_';
    sl_rocksdb_opts_t o = {.dir = dir,
                           .cache = dep->rdb_cache,
                           .write_buffer_bytes = c->rocksdb_write_buffer_bytes > 0 ? (size_t)c->rocksdb_write_buffer_bytes
                                                                                   : (size_t)64 << 20,
                           .value_cache_bytes = c->rocksdb_value_cache_bytes};
    return sl_rocksdb_backend_new(init->max_parallelism, range, &o, err, errlen);
}

/* The current parallelism of the vertex whose head operator has this uid,
 * or -1. */
static int head_parallelism(sl_deployment_t *dep, const char *uid, int *vertex) {
    for (int v = 0; v < dep->plan->nvertices; v++) {
        if (!strcmp(node_uid(dep, dep->plan->vertices[v].nodes[0]), uid)) {
            *vertex = v;
            return dep->plan->vertices[v].parallelism;
        }
    }
    return -1;
}

/* Restore of an unaligned checkpoint: hands every task the in-flight data
 * of its input channels (see sl_inflight_put), the input entries of a
 * channel before its output entries.  In-flight data was partitioned for
 * the old parallelism, so it can only go back into the same topology. */
static int restore_inflight(sl_deployment_t *dep, char *err, size_t errlen) {
    const sl_ckpt_metadata_t *md = dep->restore_md;
    for (int pass = SL_INFLIGHT_INPUT; pass <= SL_INFLIGHT_OUTPUT; pass++)
        for (int i = 0; i < md->noperators; i++) {
            const sl_ckpt_operator_t *mo = &md->operators[i];
            for (int q = 0; q < mo->parallelism; q++) {
                const sl_ckpt_blob_t *b = sl_ckpt_find_blob(mo->subtasks[q].blobs, mo->subtasks[q].nblobs, "inflight");
                if (!b) continue;
                const uint8_t *p = b->data, *end = b->data + b->len;
                while (p < end) {
                    uint32_t ul, v[4];
                    if (end - p < 5 || (memcpy(&ul, p + 1, 4), (size_t)(end - p - 5) < (size_t)ul + sizeof v))
                        return sl_errf(err, errlen, SL_EFORMAT,
                                       "restore: in-flight data of operator '%s' (%d/%d) in checkpoint %lld is "
                                       "truncated",
                                       mo->uid, q + 1, mo->parallelism, (long long)md->checkpoint_id);
                    int kind = p[0];
                    char uid[300];
                    snprintf(uid, sizeof uid, "%.*s", (int)(ul < 299 ? ul : 299), (const char *)p + 5);
                    memcpy(v, p + 5 + ul, sizeof v);
                    const uint8_t *data = p + 5 + ul + sizeof v;
                    if ((size_t)(end - data) < v[3] || kind > SL_INFLIGHT_OUTPUT)
                        return sl_errf(err, errlen, SL_EFORMAT,
                                       "restore: in-flight data of operator '%s' (%d/%d) in checkpoint %lld is corrupt",
                                       mo->uid, q + 1, mo->parallelism, (long long)md->checkpoint_id);
                    p = data + v[3];
                    if (kind != pass) continue;
                    int vertex = -1, par = head_parallelism(dep, uid, &vertex);
                    const sl_ckpt_operator_t *to = sl_ckpt_metadata_find_operator(md, uid);
                    int cur_src = -1, src_vertex;
                    cur_src = head_parallelism(dep, mo->uid, &src_vertex);
                    if (par < 0 || !to || par != to->parallelism || cur_src != mo->parallelism)
                        return sl_errf(err, errlen, SL_EINVAL,
                                       "restore: checkpoint %lld is unaligned and holds in-flight data from '%s' to "
                                       "'%s', which the job no longer has at the same parallelism (%d then, %d now); "
                                       "in-flight data cannot be redistributed: restore at the old parallelism or "
                                       "from an aligned checkpoint",
                                       (long long)md->checkpoint_id, mo->uid, uid, to ? to->parallelism : -1, par);
                    sl_task_t *t = &dep->tasks[vertex][v[0] < (uint32_t)par ? v[0] : 0];
                    if ((int)v[0] < par && !t->dep) continue; /* another TaskManager's subtask */
                    if ((int)v[0] >= par || (int)v[1] >= t->ngates || (int)v[2] >= t->gates[v[1]].nch)
                        return sl_errf(err, errlen, SL_EFORMAT,
                                       "restore: in-flight data of checkpoint %lld names channel %u of input %u of "
                                       "'%s' (%u), which this job does not have",
                                       (long long)md->checkpoint_id, v[2], v[1], uid, v[0] + 1);
                    t->replay = sl_realloc(t->replay, (size_t)(t->nreplay + 1) * sizeof *t->replay);
                    sl_replay_t *r = &t->replay[t->nreplay++];
                    memset(r, 0, sizeof *r);
                    r->gate = (int)v[1];
                    r->index = (int)v[2];
                    sl_buf_append(&r->data, data, v[3]);
                }
            }
        }
    return 0;
}

/* Restored operator state, event-time progress and keyed state of the
 * operator of plan node `node` in subtask s. */
static int restore_operator(sl_deployment_t *dep, int node, sl_operator_t *op, int s, int par, char *err,
                            size_t errlen) {
    const char *uid = node_uid(dep, node);
    const sl_ckpt_operator_t *mo = sl_ckpt_metadata_find_operator(dep->restore_md, uid);
    int rc = 0;
    if (mo) {
        /* operator state: the union of every old subtask's (each
         * prefixed with its length); the operator takes its share */
        sl_buf_t *u = sl_calloc(1, sizeof *u);
        for (int q = 0; q < mo->parallelism; q++) {
            const sl_ckpt_blob_t *b = sl_ckpt_find_blob(mo->subtasks[q].blobs, mo->subtasks[q].nblobs, "operator-state");
            if (!b) continue;
            uint32_t bl = (uint32_t)b->len;
            sl_buf_append(u, &bl, 4);
            sl_buf_append(u, b->data, b->len);
        }
        if (u->len) {
            op->restored_state = u->p;
            op->restored_len = u->len;
        }
        dep->unions = sl_realloc(dep->unions, (size_t)(dep->nunions + 1) * sizeof *dep->unions);
        dep->unions[dep->nunions++] = u;
        /* event-time progress: this subtask's at the same parallelism, else the
         * minimum over the old subtasks */
        bool exact = mo->parallelism == par;
        int nb = exact ? 1 : mo->parallelism;
        const uint8_t **tb = sl_calloc((size_t)(nb ? nb : 1), sizeof *tb);
        size_t *tl = sl_calloc((size_t)(nb ? nb : 1), sizeof *tl);
        for (int q = 0; q < nb; q++) {
            int from = exact ? s : q;
            const sl_ckpt_blob_t *b = sl_ckpt_find_blob(mo->subtasks[from].blobs, mo->subtasks[from].nblobs, "event-time");
            tb[q] = b ? b->data : NULL;
            tl[q] = b ? b->len : 0;
        }
        if (sl_op_restore_time(op, tb, tl, nb, exact) < 0)
            rc = sl_errf(err, errlen, SL_EFORMAT,
                         "restore of operator '%s' (%d/%d): its event-time state in checkpoint %lld is malformed", uid,
                         s + 1, par, (long long)dep->restore_md->checkpoint_id);
        sl_free(tb);
        sl_free(tl);
    }
    if (rc == 0) {
        char kerr[600] = "";
        int krc = restore_keyed(dep, op, uid, kerr, sizeof kerr);
        if (krc < 0) rc = sl_errf(err, errlen, krc, "restore of operator '%s' (%d/%d): %s", uid, s + 1, par, kerr);
    }
    return rc;
}

/* Creates local task (v, s) with its operators. */
static int build_task(sl_deployment_t *dep, int v, int s, char *err, size_t errlen) {
    const sl_plan_t *plan = dep->plan;
    const sl_plan_vertex_t *pv = &plan->vertices[v];
    sl_task_t *t = &dep->tasks[v][s];
    snprintf(t->name, sizeof t->name, "%s (%d/%d)", pv->name, s + 1, pv->parallelism);
    t->vertex = v;
    t->subtask = s;
    t->parallelism = pv->parallelism;
    t->dep = dep;
    t->local_index = dep->nlocal;
    dep->local[dep->nlocal++] = t;
    t->clock = dep->code->clock;
    t->clock_ctx = dep->code->clock_ctx;
    sl_task_init_context(t);
    sl_waker_init(&t->waker);
    sl_mailbox_init(&t->mailbox, &t->waker);
    atomic_init(&t->cancel, false);
    t->nops = pv->nnodes;
    t->ops = sl_calloc((size_t)t->nops, sizeof *t->ops);
    t->outs = sl_calloc((size_t)t->nops, sizeof *t->outs);
    t->wake = sl_calloc((size_t)t->nops, sizeof *t->wake);
    sl_task_pub_init(t);
    const sl_plan_node_t *head = &plan->nodes[pv->nodes[0]];
    t->is_source = head->kind == SL_PLAN_SOURCE;
    t->final_mode = plan->cfg.ckpt_enabled;
    t->buffer_timeout_ns = plan->cfg.buffer_timeout_ms < 0 ? -1 : plan->cfg.buffer_timeout_ms * 1000000;
    int rc = 0;
    for (int k = 0; k < t->nops; k++) {
        const sl_plan_node_t *n = &plan->nodes[pv->nodes[k]];
        const sl_code_node_t *cn = &dep->code->nodes[n->id];
        sl_op_init_t init;
        memset(&init, 0, sizeof init);
        init.subtask = s;
        init.parallelism = pv->parallelism;
        init.max_parallelism = plan->cfg.max_parallelism;
        init.ninputs = n->ninputs;
        for (int in = 0; in < 2; in++) {
            init.key[in] = cn->keyed[in] ? cn->key[in] : NULL;
            init.in_schema[in] = cn->in_schema[in];
        }
        init.out_schema = cn->out_schema;
        init.tags = dep->code->tags;
        init.name = n->name;
        init.uid = n->has_user_uid ? n->uid : NULL;
        init.ctx = &t->opctx;
        init.wm_interval_ms = plan->cfg.wm_interval_ms;
        char berr[512] = "";
        init.make_backend = make_backend;
        init.make_backend_ctx = dep;
        init.backend_err = berr;
        init.final_checkpoint = plan->cfg.ckpt_enabled;
        sl_operator_t *op = cn->create(cn->spec, &init);
        if (berr[0] && rc == 0)
            rc = sl_errf(err, errlen, SL_ESTATE, "state backend of '%s' (%d/%d): %s", n->name, s + 1, pv->parallelism,
                         berr);
        for (int q = 0; q < n->nstate_schemas && rc == 0; q++) { /* typed keyed states */
            char serr[300];
            sl_schema_t *sch = sl_schema_parse(n->state_schemas[q].schema, serr, sizeof serr);
            if (!sch) {
                rc = sl_errf(err, errlen, SL_EFORMAT, "job plan: operator '%s', state '%s': schema '%s': %s", n->name,
                             n->state_schemas[q].name, n->state_schemas[q].schema, serr);
                break;
            }
            const char *nm = n->state_schemas[q].name;
            sl_op_set_state_schemas(op, 1, &nm, &sch);
            sl_schema_unref(sch);
        }
        op->chain_index = k;
        if (dep->restore_md && rc == 0) rc = restore_operator(dep, n->id, op, s, pv->parallelism, err, errlen);
        t->ops[k] = op;
        t->wake[k] = INT64_MAX;
        sl_chain_out_init(&t->outs[k], t, plan->ntags);
        op->out = &t->outs[k].base;
    }
    const sl_code_node_t *hc = &dep->code->nodes[head->id];
    for (int in = 0; in < head->ninputs; in++) sl_gate_init(&t->gates[in], t, in, hc->in_schema[in]);
    t->ngates = head->ninputs;
    return rc;
}

/* The edges: chained calls inside a task, channels between tasks. */
static int wire(sl_deployment_t *dep, char *err, size_t errlen) {
    const sl_plan_t *plan = dep->plan;
    for (int e = 0; e < plan->nedges; e++) {
        const sl_plan_edge_t *ed = &plan->edges[e];
        int vs = plan->vertex_of[ed->src], vd = plan->vertex_of[ed->dst];
        int ks = plan->index_in_vertex[ed->src], kd = plan->index_in_vertex[ed->dst];
        int ps = plan->vertices[vs].parallelism, pd = plan->vertices[vd].parallelism;
        if (ed->chained) {
            for (int s = 0; s < ps; s++) {
                sl_task_t *t = &dep->tasks[vs][s];
                if (!t->dep) continue;
                sl_tag_route_t *r = &t->outs[ks].tags[ed->tag];
                r->ops = sl_realloc(r->ops, (size_t)(r->nops + 1) * sizeof *r->ops);
                r->ops[r->nops].op = t->ops[kd];
                r->ops[r->nops].input = ed->dst_input;
                r->nops++;
            }
            continue;
        }
        sl_plan_part_t part = (sl_plan_part_t)ed->part;
        bool pointwise = part == SL_PLAN_FORWARD || part == SL_PLAN_RESCALE;
        sl_channel_t **row = sl_calloc((size_t)pd, sizeof *row);
        sl_rw_dst_t *dst = sl_calloc((size_t)pd, sizeof *dst);
        for (int i = 0; i < ps; i++) {
            sl_task_t *st = &dep->tasks[vs][i];
            int n = 0;
            for (int j = 0; j < pd; j++) {
                if (pointwise && !pointwise_connected(i, ps, j, pd)) continue;
                sl_task_t *dt = &dep->tasks[vd][j];
                /* the channel's index in its consumer's gate: counted on every
                 * TaskManager alike, whichever end is local */
                int *count = &dep->gate_count[plan->first_task[vd] + j][ed->dst_input];
                int idx = (*count)++;
                if (!st->dep && !dt->dep) continue;
                sl_channel_t *ch = NULL;
                if (st->dep && dt->dep) {
                    ch = new_channel(dep, dt);
                    sl_gate_add_channel(&dt->gates[ed->dst_input], ch);
                } else {
                    int remote_task = st->dep ? plan->first_task[vd] + j : plan->first_task[vs] + i;
                    int peer = dep->peer_of_task[remote_task];
                    if (!dep->dp || peer < 0 || peer >= dep->deploy->npeers) {
                        sl_free(row);
                        sl_free(dst);
                        return sl_errf(err, errlen, SL_EINVAL,
                                       "deployment of job '%s': the channel from %s (%d/%d) to %s (%d/%d) crosses "
                                       "TaskManagers, and %s",
                                       dep->job_id, plan->vertices[vs].name, i + 1, ps, plan->vertices[vd].name, j + 1,
                                       pd, dep->dp ? "the other one's data port is not known" :
                                                     "this TaskManager has no data plane to other processes");
                    }
                    uint64_t id = channel_id(dep, e, i, j);
                    int rc;
                    if (st->dep) { /* we produce, the data plane consumes */
                        ch = new_channel(dep, NULL);
                        rc = sl_data_plane_add_output(dep->dp, id, ch);
                        if (rc < 0) sl_errf(err, errlen, rc, "channel %016llx is registered twice", (unsigned long long)id);
                    } else { /* the data plane produces, we consume */
                        ch = new_channel(dep, dt);
                        sl_gate_add_channel(&dt->gates[ed->dst_input], ch);
                        const sl_msg_peer_t *pe = &dep->deploy->peers[peer];
                        rc = sl_data_plane_add_input(dep->dp, id, pe->host, pe->data_port, ch, err, errlen);
                    }
                    add_remote(dep, id, ch, st->dep != NULL);
                    if (rc < 0) {
                        sl_free(row);
                        sl_free(dst);
                        return rc;
                    }
                }
                if (st->dep) {
                    dst[n] = (sl_rw_dst_t){vd, j, ed->dst_input, idx};
                    row[n++] = ch;
                }
            }
            if (!st->dep) continue;
            sl_record_writer_t *w =
                sl_record_writer_new(part, dep->code->edge_key[e], plan->cfg.max_parallelism, row, n, i);
            for (int c = 0; c < n; c++) w->dst[c] = dst[c]; /* where each channel leads, for in-flight data */
            add_writer(st, &st->outs[ks], ed->tag, w);
        }
        sl_free(row);
        sl_free(dst);
    }
    for (int i = 0; i < dep->nlocal; i++) {
        sl_task_t *t = dep->local[i];
        int nch = 0;
        for (int g = 0; g < t->ngates; g++) {
            sl_gate_finalize(&t->gates[g]);
            t->gates[g].first = nch;
            nch += t->gates[g].nch;
        }
        sl_bh_init(&t->bh, nch, plan->cfg.ckpt.mode);
        sl_bh_set_unaligned(&t->bh, plan->cfg.ckpt.unaligned, plan->cfg.ckpt.aligned_timeout_ms);
        t->nincap = nch;
        t->incap = sl_calloc((size_t)(nch ? nch : 1), sizeof *t->incap);
        t->index = plan->first_task[t->vertex] + t->subtask;
    }
    return 0;
}

int sl_deployment_new(const sl_plan_t *plan, const sl_job_code_t *code, const sl_msg_deploy_t *d,
                      sl_data_plane_t *dp, sl_dep_send_fn send, void *send_ctx, sl_deployment_t **out, char *err,
                      size_t errlen) {
    *out = NULL;
    sl_deployment_t *dep = sl_calloc(1, sizeof *dep);
    dep->dp = dp;
    dep->deploy = d;
    int nt = plan->ntasks ? plan->ntasks : 1;
    dep->peer_of_task = sl_calloc((size_t)nt, sizeof *dep->peer_of_task);
    for (int i = 0; i < plan->ntasks; i++) dep->peer_of_task[i] = -2; /* not placed */
    for (int i = 0; i < d->nplacements; i++)
        if (d->placements[i].task.index >= 0 && d->placements[i].task.index < plan->ntasks)
            dep->peer_of_task[d->placements[i].task.index] = d->placements[i].peer;
    dep->gate_count = sl_calloc((size_t)nt, sizeof *dep->gate_count);
    dep->plan = plan;
    dep->code = code;
    dep->job_id = sl_strdup(d->job_id);
    dep->attempt = d->attempt;
    dep->send = send;
    dep->send_ctx = send_ctx;
    pthread_mutex_init(&dep->mu, NULL);
    pthread_mutex_init(&dep->ckpt_mu, NULL);
    pthread_cond_init(&dep->writer_cv, NULL);
    pthread_mutex_init(&dep->reporter_mu, NULL);
    pthread_cond_init(&dep->reporter_cv, NULL);
    dep->tasks = sl_calloc((size_t)(plan->nvertices ? plan->nvertices : 1), sizeof *dep->tasks);
    for (int v = 0; v < plan->nvertices; v++)
        dep->tasks[v] = sl_calloc((size_t)plan->vertices[v].parallelism, sizeof(sl_task_t));
    dep->local = sl_calloc((size_t)(d->ntasks ? d->ntasks : 1), sizeof *dep->local);
    int rc = 0;
    if (code->nnodes != plan->nnodes || code->nedges != plan->nedges)
        rc = sl_errf(err, errlen, SL_EINVAL, "deployment of job '%s': the job's code has %d operators, its plan %d",
                     d->job_id, code->nnodes, plan->nnodes);
    if (rc == 0 && d->restore_path && d->restore_path[0]) {
        char path[4400];
        snprintf(path, sizeof path, "%s/%s", d->restore_path, SL_CKPT_METADATA_NAME);
        rc = sl_ckpt_metadata_read_file(path, &dep->restore_md, err, errlen);
        if (rc == 0) rc = sl_ckpt_load_spilled(dep->restore_md, d->restore_path, err, errlen);
        dep->restore_path = sl_strdup(d->restore_path);
    }
    if (rc == 0 && plan->cfg.backend == SL_STATE_BACKEND_ROCKSDB)
        dep->rdb_cache = sl_rocksdb_cache_new(plan->cfg.rocksdb_cache_bytes > 0 ? (size_t)plan->cfg.rocksdb_cache_bytes
                                                                                : (size_t)64 << 20);
    for (int i = 0; i < d->ntasks && rc == 0; i++) {
        const sl_msg_task_ref_t *tr = &d->tasks[i];
        if (tr->vertex < 0 || tr->vertex >= plan->nvertices || tr->subtask < 0 ||
            tr->subtask >= plan->vertices[tr->vertex].parallelism)
            rc = sl_errf(err, errlen, SL_EINVAL, "deployment of job '%s': no subtask %d of vertex %d in its plan",
                         d->job_id, tr->subtask, tr->vertex);
        else if (dep->tasks[tr->vertex][tr->subtask].dep)
            rc = sl_errf(err, errlen, SL_EINVAL, "deployment of job '%s': subtask %d of vertex %d named twice",
                         d->job_id, tr->subtask, tr->vertex);
        else
            rc = build_task(dep, tr->vertex, tr->subtask, err, errlen);
    }
    if (rc == 0 && dep->restore_md) { /* a source that cannot rewind would replay from its start: duplicates */
        for (int i = 0; i < dep->nlocal && rc == 0; i++) {
            const sl_plan_node_t *n = &plan->nodes[plan->vertices[dep->local[i]->vertex].nodes[0]];
            const sl_source_ops_t *so = code->nodes[n->id].source_ops;
            if (n->kind == SL_PLAN_SOURCE && (!so->snapshot || !so->restore))
                rc = sl_errf(err, errlen, SL_EINVAL,
                             "restore: source '%s' (%s) cannot snapshot and restore its position, so restoring "
                             "checkpoint %lld would replay it from its start",
                             n->name, so->name ? so->name : "?", (long long)dep->restore_md->checkpoint_id);
        }
    }
    if (rc == 0) rc = wire(dep, err, errlen);
    dep->final_state = sl_calloc((size_t)(dep->nlocal ? dep->nlocal : 1), sizeof *dep->final_state);
    dep->uploads = sl_calloc((size_t)(dep->nlocal ? dep->nlocal : 1), sizeof *dep->uploads);
    if (rc == 0 && dep->restore_md) rc = restore_inflight(dep, err, errlen);
    if (rc == 0 && plan->cfg.ckpt_enabled && plan->cfg.ckpt_dir[0])
        rc = sl_ckpt_storage_open(plan->cfg.ckpt_dir, plan->job_id, &dep->storage, err, errlen);
    /* two-phase-commit sinks settle what an earlier run left behind */
    int64_t restored = dep->restore_md ? dep->restore_md->checkpoint_id : 0;
    for (int i = 0; i < plan->nnodes && rc == 0; i++) {
        const sl_plan_node_t *n = &plan->nodes[i];
        if (n->kind != SL_PLAN_SINK) continue;
        bool here = false;
        for (int s = 0; s < n->parallelism && !here; s++) here = dep->tasks[plan->vertex_of[i]][s].dep != NULL;
        const sl_sink_t *sink = code->nodes[i].sink;
        if (!here || !sink->ops->recover) continue;
        char serr[512] = "";
        rc = sink->ops->recover(sink->ctx, restored, serr, sizeof serr);
        if (rc < 0) sl_errf(err, errlen, rc, "sink '%s': recovery failed: %s", n->name, serr);
    }
    dep->deploy = NULL;
    if (rc < 0) {
        sl_deployment_destroy(dep);
        return rc;
    }
    *out = dep;
    return 0;
}

int sl_deployment_start(sl_deployment_t *dep, char *err, size_t errlen) {
    if (dep->plan->cfg.ckpt_enabled && pthread_create(&dep->writer, NULL, writer_main, dep) == 0)
        dep->writer_started = true;
    pthread_mutex_lock(&dep->mu);
    int rc = 0;
    for (int i = 0; i < dep->nlocal; i++) {
        sl_task_t *t = dep->local[i];
        if (rc == 0 && pthread_create(&t->thread, NULL, sl_task_main, t) != 0) {
            dep->failed = true;
            cancel_all_locked(dep);
            rc = sl_errf(err, errlen, SL_EIO, "cannot start a thread for task %s", t->name);
        }
        t->started = rc == 0;
    }
    pthread_mutex_unlock(&dep->mu);
    if (rc == 0 && pthread_create(&dep->reporter, NULL, reporter_main, dep) == 0) dep->reporter_started = true;
    for (int i = 0; rc < 0 && i < dep->nlocal; i++) { /* the ones that never ran report the failure */
        sl_task_t *t = dep->local[i];
        if (t->started) continue;
        t->rc = rc;
        snprintf(t->err, sizeof t->err, "%s", err);
        report_end(dep, t, SL_TASK_FAILED);
    }
    return rc;
}

void sl_deployment_join(sl_deployment_t *dep) {
    for (int i = 0; i < dep->nlocal; i++)
        if (dep->local[i]->started) {
            pthread_join(dep->local[i]->thread, NULL);
            dep->local[i]->started = false;
        }
    reporter_stop(dep);
    /* remote outputs of tasks that finished: let the data plane write what
     * is queued (up to 10 s; a failed channel is cancelled and drains at once) */
    int64_t deadline = sl_mono_ns() + 10 * 1000000000LL;
    for (int i = 0; i < dep->nremote; i++) {
        if (!dep->remote[i].output || dep->canceled || dep->failed) continue;
        while (sl_channel_in_flight(dep->remote[i].ch) > 0 && !dep->remote[i].ch->canceled && sl_mono_ns() < deadline) {
            struct timespec ts = {0, 2000000};
            nanosleep(&ts, NULL);
        }
    }
    for (int i = 0; dep->dp && i < dep->nremote; i++) sl_data_plane_remove(dep->dp, dep->remote[i].id);
    dep->nremote = 0;
    if (dep->writer_started) {
        pthread_mutex_lock(&dep->ckpt_mu);
        dep->writer_stop = true;
        pthread_cond_signal(&dep->writer_cv);
        pthread_mutex_unlock(&dep->ckpt_mu);
        pthread_join(dep->writer, NULL);
        dep->writer_started = false;
    }
}

void sl_deployment_destroy(sl_deployment_t *dep) {
    if (!dep) return;
    sl_deployment_join(dep);
    for (int i = 0; dep->uploads && i < dep->nlocal; i++) {
        int nops = dep->local[i]->nops;
        for (int k = 0; dep->uploads[i] && k < nops; k++) sl_native_uploads_free(&dep->uploads[i][k]);
        sl_free(dep->uploads[i]);
    }
    sl_free(dep->uploads);
    for (int i = 0; i < dep->nunions; i++) {
        sl_buf_free(dep->unions[i]);
        sl_free(dep->unions[i]);
    }
    sl_free(dep->unions);
    for (int i = 0; dep->final_state && i < dep->nlocal; i++) {
        if (!dep->final_state[i]) continue;
        for (int k = 0; k < dep->local[i]->nops; k++) sl_buf_free(&dep->final_state[i][k]);
        sl_free(dep->final_state[i]);
    }
    sl_free(dep->final_state);
    for (int i = 0; i < dep->nlocal; i++) {
        sl_task_t *t = dep->local[i];
        for (int k = 0; k < t->nops; k++) {
            if (t->ops[k]) t->ops[k]->vt->destroy(t->ops[k]);
            for (int g = 0; g < t->outs[k].ntags; g++) {
                sl_free(t->outs[k].tags[g].ops);
                sl_free(t->outs[k].tags[g].w);
            }
            sl_free(t->outs[k].tags);
        }
        for (int w = 0; w < t->nwriters; w++) sl_record_writer_destroy(t->writers[w]);
        sl_free(t->writers);
        for (int g = 0; g < t->ngates; g++) sl_gate_free(&t->gates[g]);
        sl_bh_free(&t->bh);
        for (int j = 0; j < t->nincap; j++) sl_buf_free(&t->incap[j]);
        sl_free(t->incap);
        for (int j = 0; j < t->nreplay; j++) sl_buf_free(&t->replay[j].data);
        sl_free(t->replay);
        sl_free(t->ops);
        sl_free(t->outs);
        sl_free(t->wake);
        sl_task_pub_free(t);
        sl_mailbox_destroy(&t->mailbox);
        sl_waker_destroy(&t->waker);
    }
    for (int v = 0; v < dep->plan->nvertices; v++) sl_free(dep->tasks[v]);
    sl_free(dep->tasks);
    sl_free(dep->local);
    if (dep->storage) dep->storage->ops->destroy(dep->storage);
    while (dep->wq_head) {
        struct wq *q = dep->wq_head;
        dep->wq_head = q->next;
        snap_free(q->snap);
        sl_free(q);
    }
    pthread_cond_destroy(&dep->writer_cv);
    pthread_cond_destroy(&dep->reporter_cv);
    pthread_mutex_destroy(&dep->reporter_mu);
    pthread_mutex_destroy(&dep->ckpt_mu);
    for (int i = 0; i < dep->nchannels; i++) sl_channel_destroy(dep->channels[i]);
    sl_free(dep->channels);
    pthread_mutex_destroy(&dep->mu);
    sl_ckpt_metadata_free(dep->restore_md);
    sl_free(dep->restore_path);
    sl_free(dep->remote);
    sl_free(dep->peer_of_task);
    sl_free(dep->gate_count);
    sl_free(dep->pending_why);
    sl_free(dep->job_id);
    if (dep->rdb_cache) sl_rocksdb_cache_free(dep->rdb_cache);
    sl_free(dep);
}
