/*
 * job_metrics.c — the JobManager's store of live subtask metrics
 * (job_metrics.h).  Rates: a time share is the growth of a cumulative
 * time between two reports of the same subtask divided by the growth of
 * the TaskManager's clock, in ms per second.  Reports closer together than
 * half the reporting interval (a subtask's final report right after a
 * periodic one) keep the previous shares and baseline, so a share is never
 * computed over a few microseconds.
 */
#include "jobmanager/job_metrics.h"

#include <pthread.h>
#include <stdio.h>

#include "common/common.h"

struct sl_job_metrics {
    const sl_plan_t *plan;
    pthread_mutex_t mu;
    sl_jm_subtask_metrics_t *tasks; /* per task index */
    /* per task index: the baseline of the shares */
    struct base { bool set; int64_t time_ns, busy_ns, idle_ns, bp_ns; } *base;
    sl_metrics_listener_fn fn;
    void *ctx;
};

sl_job_metrics_t *sl_job_metrics_new(const sl_plan_t *plan) {
    sl_job_metrics_t *m = sl_calloc(1, sizeof *m);
    m->plan = plan;
    pthread_mutex_init(&m->mu, NULL);
    size_t n = (size_t)(plan->ntasks ? plan->ntasks : 1);
    m->tasks = sl_calloc(n, sizeof *m->tasks);
    m->base = sl_calloc(n, sizeof *m->base);
    sl_job_metrics_reset(m);
    return m;
}

void sl_job_metrics_free(sl_job_metrics_t *m) {
    if (!m) return;
    pthread_mutex_destroy(&m->mu);
    sl_free(m->tasks);
    sl_free(m->base);
    sl_free(m);
}

void sl_job_metrics_reset(sl_job_metrics_t *m) {
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < m->plan->ntasks; i++) {
        m->tasks[i] = (sl_jm_subtask_metrics_t){.busy_ms_per_s = -1, .bp_ms_per_s = -1, .idle_ms_per_s = -1};
        m->base[i].set = false;
    }
    pthread_mutex_unlock(&m->mu);
}

void sl_job_metrics_set_listener(sl_job_metrics_t *m, sl_metrics_listener_fn fn, void *ctx) {
    pthread_mutex_lock(&m->mu);
    m->fn = fn;
    m->ctx = ctx;
    pthread_mutex_unlock(&m->mu);
}

static double share(int64_t d, int64_t dt) {
    double v = dt > 0 ? (double)d * 1000.0 / (double)dt : 0;
    return v < 0 ? 0 : v > 1000 ? 1000 : v;
}

/* Task `ix` of the plan is vertex v's subtask s. */
static bool task_of(const sl_plan_t *p, const sl_msg_task_ref_t *r, int *ix) {
    if (r->vertex < 0 || r->vertex >= p->nvertices) return false;
    if (r->subtask < 0 || r->subtask >= p->vertices[r->vertex].parallelism) return false;
    *ix = p->first_task[r->vertex] + r->subtask;
    return *ix == r->index;
}

static void notify(sl_job_metrics_t *m, const sl_jm_subtask_metrics_t *st, int vertex, int subtask, int attempt) {
    const sl_plan_t *p = m->plan;
    const sl_plan_vertex_t *v = &p->vertices[vertex];
    sl_operator_metrics_t ops[SL_METRICS_MAX_CHAIN];
    int n = 0;
    for (int i = 0; i < st->nops; i++) {
        const sl_msg_op_metrics_t *o = &st->ops[i];
        if (o->node < 0 || o->node >= p->nnodes) continue;
        ops[n++] = (sl_operator_metrics_t){
            .operator_name = p->nodes[o->node].name,
            .operator_uid = p->nodes[o->node].uid,
            .task_name = v->name,
            .vertex = vertex,
            .subtask_index = subtask,
            .chain_index = i,
            .num_records_in = o->records_in,
            .num_records_out = o->records_out,
            .current_input_watermark = o->in_watermark,
            .current_output_watermark = o->out_watermark,
            .num_late_records_dropped = o->late_dropped,
            .pending_records = o->pending_records,
            .state_memory_bytes = o->state_memory_bytes,
            .rocksdb_cur_size_all_mem_tables = o->rdb_mem_tables,
            .rocksdb_estimate_table_readers_mem = o->rdb_table_readers,
            .rocksdb_block_cache_usage = o->rdb_block_cache,
            .rocksdb_estimate_live_data_size = o->rdb_live_data,
            .num_bytes_in = st->bytes_in,
            .num_bytes_out = st->bytes_out,
            .busy_time_ms_per_second = st->busy_ms_per_s,
            .back_pressured_time_ms_per_second = st->bp_ms_per_s,
            .idle_time_ms_per_second = st->idle_ms_per_s,
            .attempt = attempt,
        };
    }
    if (n) m->fn(m->ctx, ops, n);
}

void sl_job_metrics_update(sl_job_metrics_t *m, const sl_msg_metrics_t *r) {
    pthread_mutex_lock(&m->mu);
    for (int i = 0; i < r->nsubtasks; i++) {
        const sl_msg_subtask_metrics_t *in = &r->subtasks[i];
        int ix;
        if (!task_of(m->plan, &in->task, &ix)) continue;
        sl_jm_subtask_metrics_t *st = &m->tasks[ix];
        struct base *b = &m->base[ix];
        int64_t at = in->time_ns;
        if (!at) continue; /* not started yet */
        if (st->reported && at < st->time_ns) continue; /* an older sample overtaken */
        st->reported = true;
        st->time_ns = at;
        st->busy_ns = in->busy_ns;
        st->idle_ns = in->idle_ns;
        st->backpressured_ns = in->backpressured_ns;
        st->bytes_in = in->bytes_in;
        st->bytes_out = in->bytes_out;
        snprintf(st->tm_id, sizeof st->tm_id, "%s", r->tm_id);
        st->nops = in->nops < SL_METRICS_MAX_CHAIN ? in->nops : SL_METRICS_MAX_CHAIN;
        for (int k = 0; k < st->nops; k++) st->ops[k] = in->ops[k];
        int64_t dt = at - b->time_ns;
        if (!b->set) {
            *b = (struct base){true, at, in->busy_ns, in->idle_ns, in->backpressured_ns};
        } else if (dt >= SL_METRICS_REPORT_INTERVAL_MS * 1000000LL / 2) {
            st->busy_ms_per_s = share(in->busy_ns - b->busy_ns, dt);
            st->idle_ms_per_s = share(in->idle_ns - b->idle_ns, dt);
            st->bp_ms_per_s = share(in->backpressured_ns - b->bp_ns, dt);
            *b = (struct base){true, at, in->busy_ns, in->idle_ns, in->backpressured_ns};
        }
        if (m->fn) notify(m, st, in->task.vertex, in->task.subtask, r->attempt);
    }
    pthread_mutex_unlock(&m->mu);
}

bool sl_job_metrics_subtask(sl_job_metrics_t *m, int index, sl_jm_subtask_metrics_t *out) {
    if (index < 0 || index >= m->plan->ntasks) return false;
    pthread_mutex_lock(&m->mu);
    *out = m->tasks[index];
    pthread_mutex_unlock(&m->mu);
    return true;
}
