/*
 * executor.c — deploys a job in this process (the embedded mode): one
 * task per vertex subtask, one bounded channel per connected pair of
 * subtasks of every non-chained edge, one thread per task.
 *
 * Pointwise edges (forward, rescale) connect subtask i upstream to the
 * downstream subtasks Flink would connect; all-to-all edges (hash,
 * rebalance, broadcast) connect every pair.
 */
#include "runtime/executor.h"

#include <ctype.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "api/env_int.h"
#include "jobmanager/checkpoint_coordinator.h"
#include "checkpoint/metadata.h"
#include "checkpoint/state_file.h"
#include "checkpoint/storage.h"
#include "common/common.h"
#include "graph/job_graph.h"
#include "operators/basic_ops.h"
#include "taskmanager/task_int.h"
#include "taskmanager/native_checkpoint.h"
#include "state/rocksdb_backend.h"

void sl_chain_out_init(sl_chain_out_t *co, sl_task_t *t, int ntags);
void sl_gate_init(sl_input_gate_t *g, sl_task_t *t, int input, const sl_schema_t *schema);
void sl_gate_add_channel(sl_input_gate_t *g, sl_channel_t *ch);
void sl_gate_finalize(sl_input_gate_t *g);
void sl_gate_free(sl_input_gate_t *g);

struct sl_executor {
    sl_env_t *env;
    char *job_name;
    sl_rocksdb_cache_t *rdb_cache; /* shared by the job's RocksDB backends */
    sl_native_uploads_t **uploads; /* per task index, per operator: shared files in storage (writer thread) */
    sl_job_graph_t jg;
    sl_task_t **tasks;      /* per vertex: array of parallelism tasks */
    int ntasks;
    sl_channel_t **channels;
    int nchannels, channels_cap;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int running;
    bool failed, canceled;
    sl_task_t *first_failure;
    char fail_msg[1024];   /* a failure that is not a task's (too many failed checkpoints) */
    sl_task_t **all;       /* every task, by index */
    int nall;
    sl_coordinator_t *coord;
    /* checkpoint storage (when a directory is set) */
    sl_ckpt_storage_t *storage;
    char job_id[128];
    pthread_mutex_t ckpt_mu;
    sl_ckpt_metadata_t *pending_md[64]; /* being assembled, by id % 64 */
    /* the asynchronous phase: one writer thread, a queue of task snapshots */
    pthread_t writer;
    bool writer_started, writer_stop;
    pthread_cond_t writer_cv;
    struct wq { sl_ckpt_task_snap_t *snap; struct wq *next; } *wq_head, *wq_tail;
    /* per task, per operator: operator state at the task's end (a
     * finished source's final position); later checkpoints carry it */
    sl_buf_t **final_state;
    sl_buf_t **unions; /* restored operator state handed to operators */
    int nunions;
};

static sl_channel_t *new_channel(sl_executor_t *ex, sl_task_t *consumer) {
    if (ex->nchannels == ex->channels_cap) {
        ex->channels_cap = ex->channels_cap ? ex->channels_cap * 2 : 64;
        ex->channels = sl_realloc(ex->channels, (size_t)ex->channels_cap * sizeof *ex->channels);
    }
    sl_channel_t *ch = sl_channel_new(ex->env->buffers_per_channel, (uint32_t)ex->env->buffer_size, &consumer->waker);
    ex->channels[ex->nchannels++] = ch;
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

static void cancel_all_locked(sl_executor_t *ex);

/* ---- coordinator hooks (coordinator's or a task's thread) ---- */

static void hook_trigger(void *ctx, int64_t id, int64_t ts) {
    sl_executor_t *ex = ctx;
    for (int i = 0; i < ex->nall; i++)
        if (ex->all[i]->is_source) sl_task_post_trigger(ex->all[i], id, ts);
}

static void hook_complete(void *ctx, int64_t id) {
    sl_executor_t *ex = ctx;
    for (int i = 0; i < ex->nall; i++) sl_task_post_complete(ex->all[i], id);
}

static void hook_aborted(void *ctx, int64_t id, const char *why) {
    sl_executor_t *ex = ctx;
    for (int i = 0; i < ex->nall; i++) sl_task_post_aborted(ex->all[i], id);
}

static void hook_fail(void *ctx, const char *why) {
    sl_executor_t *ex = ctx;
    pthread_mutex_lock(&ex->mu);
    if (!ex->failed && !ex->canceled) {
        ex->failed = true;
        snprintf(ex->fail_msg, sizeof ex->fail_msg, "%s", why);
        cancel_all_locked(ex);
    }
    pthread_mutex_unlock(&ex->mu);
}

/* The operator's identity in checkpoints: its uid, else its place in the
 * graph (then only the same job can restore it, as in Flink without uids). */
static void op_uid(const sl_node_t *n, char *buf, size_t cap);

void sl_executor_head_uid(sl_executor_t *ex, int vertex, char *buf, size_t cap) {
    op_uid(ex->env->nodes[ex->jg.v[vertex].nodes[0]], buf, cap);
}

static void op_uid(const sl_node_t *n, char *buf, size_t cap) {
    if (n->uid)
        snprintf(buf, cap, "%s", n->uid);
    else
        snprintf(buf, cap, "node-%d", n->id);
}

static int hook_prepare(void *ctx, int64_t id, int64_t ts, char *err, size_t errlen) {
    sl_executor_t *ex = ctx;
    if (!ex->storage) return 0;
    int rc = ex->storage->ops->create_checkpoint(ex->storage, id, err, errlen);
    if (rc < 0) return rc;
    sl_ckpt_metadata_t *md = sl_ckpt_metadata_new(id, ex->job_id, ex->job_name, ex->jg.max_parallelism);
    md->trigger_ts = ts;
    sl_ckpt_metadata_set_str(&md->backend, "heap");
    for (int i = 0; i < ex->env->nnodes; i++) {
        const sl_node_t *n = ex->env->nodes[i];
        char uid[300];
        op_uid(n, uid, sizeof uid);
        sl_ckpt_metadata_add_operator(md, uid, n->id, sl_env_node_parallelism(ex->env, n), ex->jg.max_parallelism);
    }
    pthread_mutex_lock(&ex->ckpt_mu);
    sl_ckpt_metadata_free(ex->pending_md[id % 64]);
    ex->pending_md[id % 64] = md;
    pthread_mutex_unlock(&ex->ckpt_mu);
    return 0;
}

void sl_executor_task_final(sl_executor_t *ex, sl_task_t *t) {
    if (!ex->coord) return;
    sl_buf_t *bufs = sl_calloc((size_t)t->nops, sizeof *bufs);
    for (int k = 0; k < t->nops; k++)
        if (t->ops[k]->vt->snapshot_state) t->ops[k]->vt->snapshot_state(t->ops[k], 0, &bufs[k]);
    pthread_mutex_lock(&ex->ckpt_mu);
    ex->final_state[t->index] = bufs;
    pthread_mutex_unlock(&ex->ckpt_mu);
}

/* A finished task acknowledges implicitly: its final operator state goes
 * into the checkpoint where it did not acknowledge itself (ckpt_mu held). */
static void add_final_state(sl_executor_t *ex, sl_ckpt_metadata_t *md) {
    for (int i = 0; i < ex->nall; i++) {
        sl_task_t *t = ex->all[i];
        sl_buf_t *bufs = ex->final_state[i];
        if (!bufs) continue;
        const sl_job_vertex_t *v = &ex->jg.v[t->vertex];
        for (int k = 0; k < t->nops; k++) {
            if (!bufs[k].len) continue;
            char uid[300];
            op_uid(ex->env->nodes[v->nodes[k]], uid, sizeof uid);
            sl_ckpt_operator_t *op = sl_ckpt_metadata_find_operator(md, uid);
            if (!op || t->subtask >= op->parallelism) continue;
            sl_ckpt_subtask_t *st = &op->subtasks[t->subtask];
            if (!sl_ckpt_find_blob(st->blobs, st->nblobs, "operator-state"))
                sl_ckpt_subtask_add_blob(st, "operator-state", SL_CKPT_DIST_SPLIT, bufs[k].p, bufs[k].len);
        }
    }
}

static int hook_finalize(void *ctx, int64_t id, char *err, size_t errlen) {
    sl_executor_t *ex = ctx;
    pthread_mutex_lock(&ex->mu);
    bool stopping = ex->failed || ex->canceled;
    pthread_mutex_unlock(&ex->mu);
    if (stopping) return sl_errf(err, errlen, SL_ECANCELED, "the job is failing or cancelled");
    if (!ex->storage) return 0;
    pthread_mutex_lock(&ex->ckpt_mu);
    sl_ckpt_metadata_t *md = ex->pending_md[id % 64];
    if (md && md->checkpoint_id == id) ex->pending_md[id % 64] = NULL;
    else md = NULL;
    if (md) add_final_state(ex, md);
    pthread_mutex_unlock(&ex->ckpt_mu);
    if (!md) return sl_errf(err, errlen, SL_ESTATE, "checkpoint %lld: no metadata being assembled", (long long)id);
    md->completion_ts = sl_wall_ms();
    int rc = ex->storage->ops->commit(ex->storage, md, err, errlen);
    sl_ckpt_metadata_free(md);
    if (rc < 0) return rc;
    char rerr[256];
    sl_ckpt_storage_retain(ex->storage, ex->env->ckpt_retained, rerr, sizeof rerr); /* best effort */
    return 0;
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
static int write_keyed(sl_executor_t *ex, sl_ckpt_task_snap_t *snap, int k, const char *name, sl_sf_info_t *info,
                       char *err, size_t errlen) {
    sl_ckpt_out_t *out = NULL;
    int rc = ex->storage->ops->open_output(ex->storage, snap->id, SL_CKPT_SCOPE_EXCLUSIVE, name, &out, err, errlen);
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

/* The asynchronous phase of one task's snapshot: persist, then acknowledge. */
static void persist(sl_executor_t *ex, sl_ckpt_task_snap_t *snap) {
    sl_task_t *t = snap->task;
    char err[600] = "";
    int rc = 0;
    int64_t t0 = sl_mono_ns();
    sl_ckpt_task_stats_t ts = {.align_us = snap->align_ns / 1000,
                               .sync_us = snap->sync_ns / 1000,
                               .inflight_bytes = (int64_t)snap->inflight.len,
                               .unaligned = snap->unaligned};
    if (ex->storage) {
        const sl_job_vertex_t *v = &ex->jg.v[t->vertex];
        for (int k = 0; k < snap->nops && rc == 0; k++) {
            const sl_node_t *n = ex->env->nodes[v->nodes[k]];
            char uid[300];
            op_uid(n, uid, sizeof uid);
            sl_sf_info_t info;
            memset(&info, 0, sizeof info);
            char name[64];
            snprintf(name, sizeof name, "keyed-%d-%d", n->id, t->subtask);
            bool wrote = false;
            bool native = snap->native && snap->native[k];
            if (snap->keyed[k] || native) {
                rc = write_keyed(ex, snap, k, name, &info, err, sizeof err);
                wrote = rc == 0;
            }
            sl_ckpt_subtask_t ntmp;
            memset(&ntmp, 0, sizeof ntmp);
            if (native && rc == 0) {
                if (!ex->uploads[t->index])
                    ex->uploads[t->index] = sl_calloc((size_t)snap->nops, sizeof *ex->uploads[t->index]);
                char prefix[64];
                snprintf(prefix, sizeof prefix, "rdb-%d-%d", n->id, t->subtask);
                rc = sl_native_persist(ex->storage, snap->id, snap->native[k], prefix, &ex->uploads[t->index][k],
                                       &ntmp, &ts.state_bytes, err, sizeof err);
            }
            pthread_mutex_lock(&ex->ckpt_mu);
            sl_ckpt_metadata_t *md = ex->pending_md[snap->id % 64];
            if (md && md->checkpoint_id == snap->id) {
                sl_ckpt_operator_t *op = sl_ckpt_metadata_find_operator(md, uid);
                if (op && t->subtask < op->parallelism) {
                    sl_ckpt_subtask_t *st = &op->subtasks[t->subtask];
                    if (wrote) sl_ckpt_subtask_add_file(st, SL_CKPT_SCOPE_EXCLUSIVE, name, &info);
                    if (native) sl_native_move(st, &ntmp);
                    ts.state_bytes += (int64_t)(wrote ? info.size : 0) + (int64_t)snap->blobs[k].len +
                                      (k == 0 ? (int64_t)snap->inflight.len : 0);
                    if (snap->blobs[k].len)
                        sl_ckpt_subtask_add_blob(st, "operator-state", SL_CKPT_DIST_SPLIT, snap->blobs[k].p,
                                                 snap->blobs[k].len);
                    if (snap->times && snap->times[k].len)
                        sl_ckpt_subtask_add_blob(st, "event-time", SL_CKPT_DIST_SPLIT, snap->times[k].p,
                                                 snap->times[k].len);
                    if (k == 0 && snap->inflight.len)
                        sl_ckpt_subtask_add_blob(st, "inflight", SL_CKPT_DIST_SPLIT, snap->inflight.p,
                                                 snap->inflight.len);
                }
            }
            pthread_mutex_unlock(&ex->ckpt_mu);
            sl_native_move(NULL, &ntmp); /* frees what the metadata did not take */
            sl_sf_info_free(&info);
        }
    }
    int64_t id = snap->id;
    snap_free(snap);
    if (!ex->coord) return;
    ts.async_us = (sl_mono_ns() - t0) / 1000;
    if (rc < 0)
        sl_coordinator_decline(ex->coord, id, t->index, err);
    else
        sl_coordinator_ack_stats(ex->coord, id, t->index, &ts);
}

static void *writer_main(void *arg) {
    sl_executor_t *ex = arg;
    pthread_mutex_lock(&ex->ckpt_mu);
    for (;;) {
        while (!ex->wq_head && !ex->writer_stop) pthread_cond_wait(&ex->writer_cv, &ex->ckpt_mu);
        if (!ex->wq_head) break;
        struct wq *q = ex->wq_head;
        ex->wq_head = q->next;
        if (!ex->wq_head) ex->wq_tail = NULL;
        bool stop = ex->writer_stop;
        pthread_mutex_unlock(&ex->ckpt_mu);
        if (stop)
            snap_free(q->snap); /* the job is over: drop it */
        else
            persist(ex, q->snap);
        sl_free(q);
        pthread_mutex_lock(&ex->ckpt_mu);
    }
    pthread_mutex_unlock(&ex->ckpt_mu);
    return NULL;
}

void sl_executor_task_snapshot(sl_executor_t *ex, sl_ckpt_task_snap_t *snap) {
    if (!ex) {
        snap_free(snap);
        return;
    }
    struct wq *q = sl_malloc(sizeof *q);
    q->snap = snap;
    q->next = NULL;
    pthread_mutex_lock(&ex->ckpt_mu);
    if (!ex->writer_started) { /* no writer (no checkpointing): nothing to persist */
        pthread_mutex_unlock(&ex->ckpt_mu);
        sl_free(q);
        persist(ex, snap);
        return;
    }
    if (ex->wq_tail)
        ex->wq_tail->next = q;
    else
        ex->wq_head = q;
    ex->wq_tail = q;
    pthread_cond_signal(&ex->writer_cv);
    pthread_mutex_unlock(&ex->ckpt_mu);
}

static const char *rocksdb_base(const sl_executor_t *ex) {
    return ex->env->rocksdb_dir ? ex->env->rocksdb_dir : getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
}

/* Loads keyed state and timers of op (node n, subtask s) from the restored
 * checkpoint: every key group of its range, from whichever old subtask's
 * file holds it (so a different parallelism works). */
static int restore_keyed(sl_executor_t *ex, const sl_node_t *n, sl_operator_t *op, const char *uid, char *err,
                         size_t errlen) {
    sl_env_t *env = ex->env;
    const sl_ckpt_operator_t *mo = sl_ckpt_metadata_find_operator(env->restore_md, uid);
    if (!mo || !op->kb) return 0;
    if (mo->max_parallelism != op->max_parallelism)
        return sl_errf(err, errlen, SL_EINVAL,
                       "restore: operator '%s' had max parallelism %d, now %d: keyed state cannot be restored "
                       "(pipeline.max-parallelism must not change)",
                       uid, mo->max_parallelism, op->max_parallelism);
    if (sl_native_present(mo)) { /* RocksDB's own files (an incremental checkpoint) */
        if (!sl_rocksdb_backend_is(op->kb))
            return sl_errf(err, errlen, SL_EINVAL,
                           "restore: checkpoint %lld holds incremental RocksDB state for operator '%s'; restore it with "
                           "state.backend.type rocksdb",
                           (long long)env->restore_md->checkpoint_id, uid);
        static atomic_int seq;
        char dir[1200], job[300];
        sl_env_job_id(ex->job_name, job, sizeof job);
        snprintf(dir, sizeof dir, "%s/sluice-rocksdb-%d-%s-restored-%d-%d", rocksdb_base(ex), (int)getpid(), job,
                 op->subtask, atomic_fetch_add(&seq, 1));
        sl_rocksdb_opts_t o = {.dir = dir,
                               .cache = ex->rdb_cache,
                               .write_buffer_bytes = env->rocksdb_write_buffer_bytes > 0
                                                         ? (size_t)env->rocksdb_write_buffer_bytes
                                                         : (size_t)64 << 20,
                               .value_cache_bytes = env->rocksdb_value_cache_bytes};
        sl_keyed_backend_t *nkb = NULL;
        int nrc = sl_native_restore(env->restore_path, mo, op->max_parallelism, op->kg_range, rocksdb_base(ex), &o,
                                    &nkb, err, errlen);
        if (nrc < 0) return nrc;
        sl_kb_set_clock(nkb, op->kb->clock, op->kb->clock_ctx);
        op->kb->ops->destroy(op->kb);
        op->kb = nkb;
    }
    sl_state_file_reader_t *r = NULL;
    const sl_ckpt_state_handle_t *open_h = NULL;
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
            snprintf(path, sizeof path, "%s/%s", env->restore_path, h->path);
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
        if (c.len) rc = op->kb->ops->restore(op->kb, kg, c.p, c.len, err, errlen);
        if (rc < 0 || !op->timers) continue;
        rc = sl_sf_reader_section(r, TIMER_SECTION(kg), &c, err, errlen);
        if (rc == SL_ENOTFOUND) {
            rc = 0;
            continue;
        }
        if (rc == 0 && c.len) rc = sl_timers_restore_kg(op->timers, kg, c.p, c.len, err, errlen);
    }
    if (r) sl_sf_reader_close(r);
    (void)n;
    return rc;
}

int sl_executor_native_snapshot(sl_executor_t *ex, sl_task_t *t, int k, sl_native_snap_t **out, char *err,
                                size_t errlen) {
    *out = NULL;
    if (!ex || !ex->storage || !sl_native_wanted(ex->env->incremental, t->ops[k]->kb)) return 0;
    char tag[64];
    snprintf(tag, sizeof tag, "%d-%d-%d", t->vertex, t->subtask, k);
    return sl_native_snapshot(t->ops[k]->kb, rocksdb_base(ex), tag, out, err, errlen);
}

/* The keyed backend of an operator subtask, as the environment says. */
static sl_keyed_backend_t *make_backend(void *ctx, const sl_op_init_t *init, sl_kg_range_t range, char *err,
                                        size_t errlen) {
    sl_executor_t *ex = ctx;
    if (ex->env->backend != SL_STATE_BACKEND_ROCKSDB) return sl_heap_backend_new(init->max_parallelism, range);
    static atomic_int seq;
    const char *base = rocksdb_base(ex);
    char dir[1200], job[300];
    sl_env_job_id(ex->job_name, job, sizeof job);
    snprintf(dir, sizeof dir, "%s/sluice-rocksdb-%d-%s-%s-%d-%d", base, (int)getpid(), job,
             init->uid ? init->uid : init->name ? init->name : "op", init->subtask, atomic_fetch_add(&seq, 1));
    for (char *c = dir + strlen(base) + 1; *c; c++)
        if (*c == '/' || *c == ' ') *c = '_';
    sl_rocksdb_opts_t o = {.dir = dir,
                           .cache = ex->rdb_cache,
                           .write_buffer_bytes = ex->env->rocksdb_write_buffer_bytes > 0
                                                     ? (size_t)ex->env->rocksdb_write_buffer_bytes
                                                     : (size_t)64 << 20,
                           .value_cache_bytes = ex->env->rocksdb_value_cache_bytes};
    return sl_rocksdb_backend_new(init->max_parallelism, range, &o, err, errlen);
}

/* The current parallelism of the vertex whose head operator has this uid,
 * or -1. */
static int head_parallelism(sl_executor_t *ex, const char *uid, int *vertex) {
    for (int v = 0; v < ex->jg.nv; v++) {
        char u[300];
        sl_executor_head_uid(ex, v, u, sizeof u);
        if (!strcmp(u, uid)) {
            *vertex = v;
            return ex->jg.v[v].parallelism;
        }
    }
    return -1;
}

/* Restore of an unaligned checkpoint: hands every task the in-flight data
 * of its input channels (see sl_inflight_put), the input entries of a
 * channel before its output entries.  In-flight data was partitioned for
 * the old parallelism, so it can only go back into the same topology. */
static int restore_inflight(sl_executor_t *ex, char *err, size_t errlen) {
    const sl_ckpt_metadata_t *md = ex->env->restore_md;
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
                    int vertex = -1, par = head_parallelism(ex, uid, &vertex);
                    const sl_ckpt_operator_t *to = sl_ckpt_metadata_find_operator(md, uid);
                    int cur_src = -1, src_vertex;
                    cur_src = head_parallelism(ex, mo->uid, &src_vertex);
                    if (par < 0 || !to || par != to->parallelism || cur_src != mo->parallelism)
                        return sl_errf(err, errlen, SL_EINVAL,
                                       "restore: checkpoint %lld is unaligned and holds in-flight data from '%s' to "
                                       "'%s', which the job no longer has at the same parallelism (%d then, %d now); "
                                       "in-flight data cannot be redistributed: restore at the old parallelism or "
                                       "from an aligned checkpoint",
                                       (long long)md->checkpoint_id, mo->uid, uid, to ? to->parallelism : -1, par);
                    sl_task_t *t = &ex->tasks[vertex][v[0] < (uint32_t)par ? v[0] : 0];
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

int sl_executor_new(sl_env_t *env, const char *job_name, sl_executor_t **out, char *err, size_t errlen) {
    sl_executor_t *ex = sl_calloc(1, sizeof *ex);
    ex->env = env;
    ex->job_name = sl_strdup(job_name ? job_name : "job");
    pthread_mutex_init(&ex->mu, NULL);
    pthread_cond_init(&ex->cv, NULL);
    pthread_mutex_init(&ex->ckpt_mu, NULL);
    pthread_cond_init(&ex->writer_cv, NULL);
    int rc = sl_job_graph_build(env, &ex->jg, err, errlen);
    if (rc < 0) {
        sl_executor_destroy(ex);
        return rc;
    }
    sl_job_graph_t *jg = &ex->jg;
    if (env->backend == SL_STATE_BACKEND_ROCKSDB)
        ex->rdb_cache = sl_rocksdb_cache_new(env->rocksdb_cache_bytes > 0 ? (size_t)env->rocksdb_cache_bytes
                                                                          : (size_t)64 << 20);
    ex->ntasks = jg->nv;
    ex->tasks = sl_calloc((size_t)jg->nv, sizeof *ex->tasks);
    int ntags = env->tags.n;

    /* tasks and operators */
    for (int v = 0; v < jg->nv; v++) {
        sl_job_vertex_t *jv = &jg->v[v];
        ex->tasks[v] = sl_calloc((size_t)jv->parallelism, sizeof(sl_task_t));
        for (int s = 0; s < jv->parallelism; s++) {
            sl_task_t *t = &ex->tasks[v][s];
            snprintf(t->name, sizeof t->name, "%s (%d/%d)", jv->name, s + 1, jv->parallelism);
            t->vertex = v;
            t->subtask = s;
            t->parallelism = jv->parallelism;
            t->ex = ex;
            t->clock = env->clock;
            t->clock_ctx = env->clock_ctx;
            sl_waker_init(&t->waker);
            sl_mailbox_init(&t->mailbox, &t->waker);
            atomic_init(&t->cancel, false);
            t->nops = jv->nnodes;
            t->ops = sl_calloc((size_t)t->nops, sizeof *t->ops);
            t->outs = sl_calloc((size_t)t->nops, sizeof *t->outs);
            t->wake = sl_calloc((size_t)t->nops, sizeof *t->wake);
            const sl_node_t *head = env->nodes[jv->nodes[0]];
            t->is_source = head->kind == SL_NODE_SOURCE;
            for (int k = 0; k < t->nops; k++) {
                const sl_node_t *n = env->nodes[jv->nodes[k]];
                sl_op_init_t init;
                memset(&init, 0, sizeof init);
                init.subtask = s;
                init.parallelism = jv->parallelism;
                init.max_parallelism = jg->max_parallelism;
                init.ninputs = n->ninputs;
                for (int in = 0; in < 2; in++) {
                    init.key[in] = n->keyed[in] ? &n->key[in] : NULL;
                    init.in_schema[in] = n->in_schema[in];
                }
                init.out_schema = n->out_schema;
                init.tags = &env->tags;
                init.name = n->name;
                init.uid = n->uid;
                init.task = t;
                char berr[512] = "";
                init.make_backend = make_backend;
                init.make_backend_ctx = ex;
                init.backend_err = berr;
                sl_operator_t *op = n->create(n->spec, &init);
                if (berr[0] && rc == 0)
                    rc = sl_errf(err, errlen, SL_ESTATE, "state backend of '%s' (%d/%d): %s", n->name ? n->name : "?",
                                 s + 1, jv->parallelism, berr);
                op->chain_index = k;
                if (env->restore_md) {
                    char uid[300];
                    op_uid(n, uid, sizeof uid);
                    const sl_ckpt_operator_t *mo = sl_ckpt_metadata_find_operator(env->restore_md, uid);
                    if (mo) {
                        /* operator state: the union of every old subtask's (each
                         * prefixed with its length); the operator takes its share */
                        sl_buf_t *u = sl_calloc(1, sizeof *u);
                        for (int q = 0; q < mo->parallelism; q++) {
                            const sl_ckpt_blob_t *b = sl_ckpt_find_blob(mo->subtasks[q].blobs, mo->subtasks[q].nblobs,
                                                                        "operator-state");
                            if (!b) continue;
                            uint32_t bl = (uint32_t)b->len;
                            sl_buf_append(u, &bl, 4);
                            sl_buf_append(u, b->data, b->len);
                        }
                        if (u->len) {
                            op->restored_state = u->p;
                            op->restored_len = u->len;
                        }
                        ex->unions = sl_realloc(ex->unions, (size_t)(ex->nunions + 1) * sizeof *ex->unions);
                        ex->unions[ex->nunions++] = u;
                        /* event-time progress: this subtask's at the same parallelism, else the
                         * minimum over the old subtasks */
                        bool exact = mo->parallelism == jv->parallelism;
                        int nb = exact ? 1 : mo->parallelism;
                        const uint8_t **tb = sl_calloc((size_t)(nb ? nb : 1), sizeof *tb);
                        size_t *tl = sl_calloc((size_t)(nb ? nb : 1), sizeof *tl);
                        for (int q = 0; q < nb; q++) {
                            int from = exact ? s : q;
                            const sl_ckpt_blob_t *b = sl_ckpt_find_blob(mo->subtasks[from].blobs,
                                                                        mo->subtasks[from].nblobs, "event-time");
                            tb[q] = b ? b->data : NULL;
                            tl[q] = b ? b->len : 0;
                        }
                        if (sl_op_restore_time(op, tb, tl, nb, exact) < 0 && rc == 0)
                            rc = sl_errf(err, errlen, SL_EFORMAT,
                                         "restore of operator '%s' (%d/%d): its event-time state in checkpoint %lld "
                                         "is malformed",
                                         uid, s + 1, jv->parallelism, (long long)env->restore_md->checkpoint_id);
                        sl_free(tb);
                        sl_free(tl);
                    }
                    if (rc == 0) {
                        char kerr[600] = "";
                        int krc = restore_keyed(ex, n, op, uid, kerr, sizeof kerr);
                        if (krc < 0) rc = sl_errf(err, errlen, krc, "restore of operator '%s' (%d/%d): %s", uid, s + 1,
                                                  jv->parallelism, kerr);
                    }
                }
                t->ops[k] = op;
                t->wake[k] = INT64_MAX;
                sl_chain_out_init(&t->outs[k], t, ntags);
                op->out = &t->outs[k].base;
            }
            for (int in = 0; in < head->ninputs; in++) sl_gate_init(&t->gates[in], t, in, head->in_schema[in]);
            t->ngates = head->ninputs;
        }
    }
    if (rc < 0) {
        sl_executor_destroy(ex);
        return rc;
    }
    if (env->restore_md) { /* a source that cannot rewind would replay from its start: duplicates */
        for (int i = 0; i < env->nnodes; i++) {
            const sl_node_t *n = env->nodes[i];
            if (n->kind == SL_NODE_SOURCE && (!n->source.ops->snapshot || !n->source.ops->restore)) {
                rc = sl_errf(err, errlen, SL_EINVAL,
                             "restore: source '%s' (%s) cannot snapshot and restore its position, so restoring "
                             "checkpoint %lld would replay it from its start",
                             n->name, n->source.ops->name ? n->source.ops->name : "?",
                             (long long)env->restore_md->checkpoint_id);
                sl_executor_destroy(ex);
                return rc;
            }
        }
    }
    if (env->restore_md) { /* state nobody takes is refused (Flink: --allowNonRestoredState) */
        for (int i = 0; i < env->restore_md->noperators; i++) {
            const sl_ckpt_operator_t *mo = &env->restore_md->operators[i];
            bool has_state = mo->nblobs > 0;
            for (int st = 0; st < mo->parallelism; st++)
                has_state = has_state || mo->subtasks[st].nblobs > 0 || mo->subtasks[st].nhandles > 0;
            bool matched = false;
            for (int k = 0; k < env->nnodes && !matched; k++) {
                char uid[300];
                op_uid(env->nodes[k], uid, sizeof uid);
                matched = strcmp(uid, mo->uid) == 0;
            }
            if (has_state && !matched) {
                rc = sl_errf(err, errlen, SL_EINVAL,
                             "restore: checkpoint %lld holds state for operator '%s', which is not in this job",
                             (long long)env->restore_md->checkpoint_id, mo->uid);
                sl_executor_destroy(ex);
                return rc;
            }
        }
    }
    /* edges: chained calls or channels */
    for (int e = 0; e < env->nedges; e++) {
        const sl_edge_t *ed = &env->edges[e];
        int vs = jg->vertex_of[ed->src], vd = jg->vertex_of[ed->dst];
        int ks = jg->index_in_vertex[ed->src], kd = jg->index_in_vertex[ed->dst];
        int ps = jg->v[vs].parallelism, pd = jg->v[vd].parallelism;
        if (jg->chained[e]) {
            for (int s = 0; s < ps; s++) {
                sl_task_t *t = &ex->tasks[vs][s];
                sl_tag_route_t *r = &t->outs[ks].tags[ed->tag];
                r->ops = sl_realloc(r->ops, (size_t)(r->nops + 1) * sizeof *r->ops);
                r->ops[r->nops].op = t->ops[kd];
                r->ops[r->nops].input = ed->dst_input;
                r->nops++;
            }
            continue;
        }
        sl_partitioning_t part = jg->part[e];
        bool pointwise = part == SL_PART_FORWARD || part == SL_PART_RESCALE;
        sl_channel_t **row = sl_calloc((size_t)pd, sizeof *row);
        for (int i = 0; i < ps; i++) {
            int n = 0;
            for (int j = 0; j < pd; j++) {
                if (pointwise && !pointwise_connected(i, ps, j, pd)) continue;
                sl_task_t *dt = &ex->tasks[vd][j];
                sl_channel_t *ch = new_channel(ex, dt);
                sl_gate_add_channel(&dt->gates[ed->dst_input], ch);
                row[n++] = ch;
            }
            sl_task_t *st = &ex->tasks[vs][i];
            sl_record_writer_t *w = sl_record_writer_new(part, &ed->key, jg->max_parallelism, row, n, i);
            for (int j = 0, c = 0; j < pd; j++) { /* where each channel leads, for in-flight data */
                if (pointwise && !pointwise_connected(i, ps, j, pd)) continue;
                sl_input_gate_t *dg = &ex->tasks[vd][j].gates[ed->dst_input];
                int idx = -1;
                for (int q = 0; q < dg->nch; q++)
                    if (dg->ch[q] == row[c]) idx = q;
                w->dst[c++] = (sl_rw_dst_t){vd, j, ed->dst_input, idx};
            }
            add_writer(st, &st->outs[ks], ed->tag, w);
        }
        sl_free(row);
    }
    for (int v = 0; v < jg->nv; v++)
        for (int s = 0; s < jg->v[v].parallelism; s++) {
            sl_task_t *t = &ex->tasks[v][s];
            int nch = 0;
            for (int g = 0; g < t->ngates; g++) {
                sl_gate_finalize(&t->gates[g]);
                t->gates[g].first = nch;
                nch += t->gates[g].nch;
            }
            sl_bh_init(&t->bh, nch, env->ckpt.mode);
            sl_bh_set_unaligned(&t->bh, env->ckpt.unaligned, env->ckpt.aligned_timeout_ms);
            t->nincap = nch;
            t->incap = sl_calloc((size_t)(nch ? nch : 1), sizeof *t->incap);
            t->index = ex->nall;
            ex->all = sl_realloc(ex->all, (size_t)(ex->nall + 1) * sizeof *ex->all);
            ex->all[ex->nall++] = t;
        }
    ex->final_state = sl_calloc((size_t)(ex->nall ? ex->nall : 1), sizeof *ex->final_state);
    ex->uploads = sl_calloc((size_t)(ex->nall ? ex->nall : 1), sizeof *ex->uploads);
    if (env->restore_md && (rc = restore_inflight(ex, err, errlen)) < 0) {
        sl_executor_destroy(ex);
        return rc;
    }
    if (env->ckpt_enabled) {
        if (env->ckpt_dir) {
            sl_env_job_id(job_name, ex->job_id, sizeof ex->job_id);
            rc = sl_ckpt_storage_fs_open(env->ckpt_dir, ex->job_id, &ex->storage, err, errlen);
            if (rc < 0) {
                sl_executor_destroy(ex);
                return rc;
            }
            /* what an earlier run left half done: incomplete checkpoints and
             * the shared files only they had uploaded (best effort) */
            char gerr[300];
            sl_ckpt_storage_abort_all_pending(ex->storage, gerr, sizeof gerr);
            sl_ckpt_storage_gc_shared(ex->storage, gerr, sizeof gerr);
        }
        sl_coordinator_hooks_t hooks = {ex,           hook_trigger, hook_complete, hook_aborted,
                                        hook_fail,    hook_prepare, hook_finalize};
        ex->coord = sl_coordinator_new(&env->ckpt, ex->nall, hooks);
        if (env->restore_md) sl_coordinator_set_next_id(ex->coord, env->restore_md->checkpoint_id + 1);
    }
    /* two-phase-commit sinks settle what an earlier run left behind */
    int64_t restored = env->restore_md ? env->restore_md->checkpoint_id : 0;
    for (int i = 0; i < env->nnodes; i++) {
        const sl_node_t *n = env->nodes[i];
        if (n->kind != SL_NODE_SINK) continue;
        const sl_sink_spec_t *sp = n->spec;
        if (!sp->sink.ops->recover) continue;
        char serr[512] = "";
        rc = sp->sink.ops->recover(sp->sink.ctx, restored, serr, sizeof serr);
        if (rc < 0) {
            sl_errf(err, errlen, rc, "sink '%s': recovery failed: %s", n->name, serr);
            sl_executor_destroy(ex);
            return rc;
        }
    }
    *out = ex;
    return 0;
}

static void cancel_all_locked(sl_executor_t *ex) {
    for (int v = 0; v < ex->ntasks; v++)
        for (int s = 0; s < ex->jg.v[v].parallelism; s++) sl_task_cancel(&ex->tasks[v][s]);
    for (int i = 0; i < ex->nchannels; i++) sl_channel_cancel(ex->channels[i]);
}

void sl_executor_task_failed(sl_executor_t *ex, sl_task_t *t) {
    pthread_mutex_lock(&ex->mu);
    if (!ex->failed && !ex->canceled) {
        ex->failed = true;
        ex->first_failure = t;
        cancel_all_locked(ex);
    }
    ex->running--;
    pthread_cond_broadcast(&ex->cv);
    pthread_mutex_unlock(&ex->mu);
}

void sl_executor_task_done(sl_executor_t *ex, sl_task_t *t) {
    /* Only a task that ran to its end acknowledges later checkpoints
     * implicitly; a cancelled one has no state to speak for. */
    if (ex->coord && t->finished) sl_coordinator_task_finished(ex->coord, t->index);
    pthread_mutex_lock(&ex->mu);
    ex->running--;
    pthread_cond_broadcast(&ex->cv);
    pthread_mutex_unlock(&ex->mu);
}

void sl_executor_cancel(sl_executor_t *ex) {
    pthread_mutex_lock(&ex->mu);
    if (!ex->failed && !ex->canceled) {
        ex->canceled = true;
        cancel_all_locked(ex);
    }
    pthread_mutex_unlock(&ex->mu);
}

int sl_executor_run(sl_executor_t *ex, char *err, size_t errlen) {
    pthread_mutex_lock(&ex->mu);
    for (int v = 0; v < ex->ntasks; v++)
        for (int s = 0; s < ex->jg.v[v].parallelism; s++) {
            sl_task_t *t = &ex->tasks[v][s];
            if (pthread_create(&t->thread, NULL, sl_task_main, t) != 0) {
                ex->failed = true;
                cancel_all_locked(ex);
                snprintf(err, errlen, "cannot start a thread for task %s", t->name);
                break;
            }
            t->started = true;
            ex->running++;
        }
    pthread_mutex_unlock(&ex->mu);
    if (ex->coord) {
        if (pthread_create(&ex->writer, NULL, writer_main, ex) == 0) ex->writer_started = true;
        sl_coordinator_start(ex->coord);
    }
    for (int v = 0; v < ex->ntasks; v++)
        for (int s = 0; s < ex->jg.v[v].parallelism; s++)
            if (ex->tasks[v][s].started) pthread_join(ex->tasks[v][s].thread, NULL);
    if (ex->coord) {
        sl_coordinator_stop(ex->coord);
        if (ex->writer_started) {
            pthread_mutex_lock(&ex->ckpt_mu);
            ex->writer_stop = true;
            pthread_cond_signal(&ex->writer_cv);
            pthread_mutex_unlock(&ex->ckpt_mu);
            pthread_join(ex->writer, NULL);
            ex->writer_started = false;
            if (ex->storage) { /* no checkpoint is pending any more */
                char gerr[300];
                sl_ckpt_storage_gc_shared(ex->storage, gerr, sizeof gerr);
            }
        }
        ex->env->ckpts_completed = sl_coordinator_completed(ex->coord, NULL);
        ex->env->nckpt_stats = sl_coordinator_stats(ex->coord, ex->env->ckpt_stats, 64);
        sl_env_free_task_stats(ex->env);
        ex->env->ckpt_ntasks = ex->nall;
        ex->env->ckpt_task_names = sl_calloc((size_t)(ex->nall ? ex->nall : 1), sizeof(char *));
        for (int i = 0; i < ex->nall; i++) ex->env->ckpt_task_names[i] = sl_strdup(ex->all[i]->name);
        ex->env->ckpt_task_stats = sl_calloc((size_t)(ex->env->nckpt_stats ? ex->env->nckpt_stats : 1) *
                                                 (size_t)(ex->nall ? ex->nall : 1),
                                             sizeof *ex->env->ckpt_task_stats);
        for (int i = 0; i < ex->env->nckpt_stats; i++)
            sl_coordinator_task_stats(ex->coord, ex->env->ckpt_stats[i].id,
                                      &ex->env->ckpt_task_stats[(size_t)i * (size_t)ex->nall]);
    }
    ex->env->ckpt_max_sync_ns = 0;
    for (int i = 0; i < ex->nall; i++)
        if (ex->all[i]->max_sync_ns > ex->env->ckpt_max_sync_ns) ex->env->ckpt_max_sync_ns = ex->all[i]->max_sync_ns;
    /* per-node metrics (of this run) */
    for (int i = 0; i < ex->env->nnodes; i++)
        ex->env->nodes[i]->records_in = ex->env->nodes[i]->records_out = ex->env->nodes[i]->records_skipped = 0;
    for (int v = 0; v < ex->ntasks; v++)
        for (int s = 0; s < ex->jg.v[v].parallelism; s++) {
            sl_task_t *t = &ex->tasks[v][s];
            for (int k = 0; k < t->nops; k++) {
                sl_node_t *n = ex->env->nodes[ex->jg.v[v].nodes[k]];
                n->records_in += t->ops[k]->records_in;
                n->records_out += t->ops[k]->records_out;
                n->records_skipped += t->ops[k]->records_skipped;
            }
        }
    if (ex->failed && ex->first_failure) {
        snprintf(err, errlen, "%s", ex->first_failure->err);
        return ex->first_failure->rc;
    }
    if (ex->failed) {
        snprintf(err, errlen, "%s", ex->fail_msg[0] ? ex->fail_msg : "job failed");
        return SL_EIO;
    }
    if (ex->canceled) {
        snprintf(err, errlen, "job '%s' was canceled", ex->job_name);
        return SL_ECANCELED;
    }
    return 0;
}

void sl_executor_destroy(sl_executor_t *ex) {
    if (!ex) return;
    for (int i = 0; ex->uploads && i < ex->nall; i++) {
        int nops = ex->all[i]->nops;
        for (int k = 0; ex->uploads[i] && k < nops; k++) sl_native_uploads_free(&ex->uploads[i][k]);
        sl_free(ex->uploads[i]);
    }
    sl_free(ex->uploads);
    for (int i = 0; i < ex->nunions; i++) {
        sl_buf_free(ex->unions[i]);
        sl_free(ex->unions[i]);
    }
    sl_free(ex->unions);
    for (int i = 0; ex->final_state && i < ex->nall; i++) {
        if (!ex->final_state[i]) continue;
        for (int k = 0; k < ex->all[i]->nops; k++) sl_buf_free(&ex->final_state[i][k]);
        sl_free(ex->final_state[i]);
    }
    sl_free(ex->final_state);

    for (int v = 0; v < ex->ntasks; v++) {
        for (int s = 0; s < ex->jg.v[v].parallelism; s++) {
            sl_task_t *t = &ex->tasks[v][s];
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
            for (int i = 0; i < t->nincap; i++) sl_buf_free(&t->incap[i]);
            sl_free(t->incap);
            for (int i = 0; i < t->nreplay; i++) sl_buf_free(&t->replay[i].data);
            sl_free(t->replay);
            sl_free(t->ops);
            sl_free(t->outs);
            sl_free(t->wake);
            sl_mailbox_destroy(&t->mailbox);
            sl_waker_destroy(&t->waker);
        }
        sl_free(ex->tasks[v]);
    }
    sl_free(ex->tasks);
    sl_free(ex->all);
    sl_coordinator_destroy(ex->coord);
    for (int i = 0; i < 64; i++) sl_ckpt_metadata_free(ex->pending_md[i]);
    if (ex->storage) ex->storage->ops->destroy(ex->storage);
    while (ex->wq_head) {
        struct wq *q = ex->wq_head;
        ex->wq_head = q->next;
        snap_free(q->snap);
        sl_free(q);
    }
    pthread_cond_destroy(&ex->writer_cv);
    pthread_mutex_destroy(&ex->ckpt_mu);
    for (int i = 0; i < ex->nchannels; i++) sl_channel_destroy(ex->channels[i]);
    sl_free(ex->channels);
    sl_job_graph_free(&ex->jg);
    pthread_mutex_destroy(&ex->mu);
    pthread_cond_destroy(&ex->cv);
    sl_free(ex->job_name);
    if (ex->rdb_cache) sl_rocksdb_cache_free(ex->rdb_cache);
    sl_free(ex);
}
