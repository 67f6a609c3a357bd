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
#include <stdio.h>

#include "api/env_int.h"
#include "checkpoint/coordinator.h"
#include "checkpoint/metadata.h"
#include "checkpoint/storage.h"
#include "common/common.h"
#include "graph/job_graph.h"
#include "operators/basic_ops.h"
#include "runtime/task_int.h"

void sl_chain_out_init(sl_chain_out_t *co, sl_task_t *t, int ntags);
void sl_gate_init(sl_input_gate_t *g, sl_task_t *t, int input, const sl_schema_t *schema);
void sl_gate_add_channel(sl_input_gate_t *g, sl_channel_t *ch);
void sl_gate_finalize(sl_input_gate_t *g);
void sl_gate_free(sl_input_gate_t *g);

struct sl_executor {
    sl_env_t *env;
    char *job_name;
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

static int hook_finalize(void *ctx, int64_t id, char *err, size_t errlen) {
    sl_executor_t *ex = ctx;
    if (!ex->storage) return 0;
    pthread_mutex_lock(&ex->ckpt_mu);
    sl_ckpt_metadata_t *md = ex->pending_md[id % 64];
    if (md && md->checkpoint_id == id) ex->pending_md[id % 64] = NULL;
    else md = NULL;
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

void sl_executor_task_ack(sl_executor_t *ex, sl_task_t *t, int64_t id) {
    if (ex->storage) {
        pthread_mutex_lock(&ex->ckpt_mu);
        sl_ckpt_metadata_t *md = ex->pending_md[id % 64];
        if (md && md->checkpoint_id == id) {
            const sl_job_vertex_t *v = &ex->jg.v[t->vertex];
            for (int k = 0; k < t->nops; k++) {
                if (!t->snaps[k].len) continue;
                const sl_node_t *n = ex->env->nodes[v->nodes[k]];
                char uid[300];
                op_uid(n, uid, sizeof uid);
                sl_ckpt_operator_t *op = sl_ckpt_metadata_find_operator(md, uid);
                if (op && t->subtask < op->parallelism)
                    sl_ckpt_subtask_add_blob(&op->subtasks[t->subtask], "operator-state", SL_CKPT_DIST_SPLIT,
                                             t->snaps[k].p, t->snaps[k].len);
            }
        }
        pthread_mutex_unlock(&ex->ckpt_mu);
    }
    if (ex->coord) sl_coordinator_ack(ex->coord, id, t->index);
}

int sl_executor_new(sl_env_t *env, const char *job_name, sl_executor_t **out, char *err, size_t errlen) {
    sl_executor_t *ex = sl_calloc(1, sizeof *ex);
    ex->env = env;
    ex->job_name = sl_strdup(job_name ? job_name : "job");
    pthread_mutex_init(&ex->mu, NULL);
    pthread_cond_init(&ex->cv, NULL);
    pthread_mutex_init(&ex->ckpt_mu, NULL);
    int rc = sl_job_graph_build(env, &ex->jg, err, errlen);
    if (rc < 0) {
        sl_executor_destroy(ex);
        return rc;
    }
    sl_job_graph_t *jg = &ex->jg;
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
            t->snaps = sl_calloc((size_t)t->nops, sizeof *t->snaps);
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
                sl_operator_t *op = n->create(n->spec, &init);
                op->chain_index = k;
                if (env->restore_md) {
                    char uid[300];
                    op_uid(n, uid, sizeof uid);
                    const sl_ckpt_operator_t *mo = sl_ckpt_metadata_find_operator(env->restore_md, uid);
                    if (mo) {
                        if (mo->parallelism != jv->parallelism) {
                            rc = sl_errf(err, errlen, SL_EINVAL,
                                         "restore: operator '%s' had parallelism %d in checkpoint %lld, now %d; "
                                         "changing the parallelism of operator state is not supported yet",
                                         uid, mo->parallelism, (long long)env->restore_md->checkpoint_id,
                                         jv->parallelism);
                        } else {
                            const sl_ckpt_blob_t *b = sl_ckpt_find_blob(mo->subtasks[s].blobs, mo->subtasks[s].nblobs,
                                                                        "operator-state");
                            if (b) {
                                op->restored_state = b->data;
                                op->restored_len = b->len;
                            }
                        }
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
            t->index = ex->nall;
            ex->all = sl_realloc(ex->all, (size_t)(ex->nall + 1) * sizeof *ex->all);
            ex->all[ex->nall++] = t;
        }
    if (env->ckpt_enabled) {
        if (env->ckpt_dir) {
            /* the job's directory: its name, made safe for a path */
            size_t k = 0;
            for (const char *c = job_name ? job_name : "job"; *c && k + 1 < sizeof ex->job_id; c++)
                ex->job_id[k++] = (isalnum((unsigned char)*c) || *c == '-' || *c == '_' || *c == '.') ? *c : '_';
            ex->job_id[k] = 0;
            if (!k || ex->job_id[0] == '.') snprintf(ex->job_id, sizeof ex->job_id, "job");
            rc = sl_ckpt_storage_fs_open(env->ckpt_dir, ex->job_id, &ex->storage, err, errlen);
            if (rc < 0) {
                sl_executor_destroy(ex);
                return rc;
            }
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
    if (ex->coord) sl_coordinator_task_finished(ex->coord, t->index);
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
    if (ex->coord) sl_coordinator_start(ex->coord);
    for (int v = 0; v < ex->ntasks; v++)
        for (int s = 0; s < ex->jg.v[v].parallelism; s++)
            if (ex->tasks[v][s].started) pthread_join(ex->tasks[v][s].thread, NULL);
    if (ex->coord) {
        sl_coordinator_stop(ex->coord);
        ex->env->ckpts_completed = sl_coordinator_completed(ex->coord, NULL);
    }
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
            for (int k = 0; t->snaps && k < t->nops; k++) sl_buf_free(&t->snaps[k]);
            sl_free(t->snaps);
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
    pthread_mutex_destroy(&ex->ckpt_mu);
    for (int i = 0; i < ex->nchannels; i++) sl_channel_destroy(ex->channels[i]);
    sl_free(ex->channels);
    sl_job_graph_free(&ex->jg);
    pthread_mutex_destroy(&ex->mu);
    pthread_cond_destroy(&ex->cv);
    sl_free(ex->job_name);
    sl_free(ex);
}
