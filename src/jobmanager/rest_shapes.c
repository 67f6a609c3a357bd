/*
 * rest_shapes.c — the JSON answers of the REST API's checkpoint, job
 * configuration, exception and asynchronous-operation paths (see
 * rest_shapes.h), in the names and JSON types of Flink's
 * rest_v1_dispatcher.yml.
 *
 * The provider hands over raw figures per subtask; everything derived is
 * computed here, once, the same way for every path: a vertex's figures are
 * the sums (sizes) and maxima (acknowledgement time) over its subtasks, a
 * checkpoint's over all of them, and the summaries are min / max / avg and
 * Flink's percentiles over the completed checkpoints kept (or, per vertex,
 * over its acknowledged subtasks).
 */
#include "jobmanager/rest_shapes.h"

#include <stdlib.h>
#include <string.h>

#include "common/common.h"

#define NOT_ADDRESSABLE "<checkpoint-not-externally-addressable>"

void sl_rest_checkpoints_clear(sl_rest_checkpoints_t *c) {
    if (!c) return;
    for (int i = 0; i < c->nhistory; i++) free(c->history[i].subtasks);
    free(c->history);
    free(c->vertices);
    c->history = NULL;
    c->vertices = NULL;
    c->nhistory = c->nvertices = 0;
}

/* ---- statistics ----------------------------------------------------------- */

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

double sl_rest_percentile(const int64_t *sorted, int n, double p) {
    if (n == 0) return 0;
    double pos = p / 100.0 * (n + 1);
    if (pos < 1) return (double)sorted[0];
    if (pos >= n) return (double)sorted[n - 1];
    int lo = (int)pos; /* 1-based index of the lower neighbour */
    double frac = pos - lo;
    return (double)sorted[lo - 1] + frac * (double)(sorted[lo] - sorted[lo - 1]);
}

/* Flink's StatsSummaryDto of v[n] (sorted in place). */
static json_t *summary_dto(int64_t *v, int n) {
    qsort(v, (size_t)n, sizeof *v, cmp_i64);
    int64_t sum = 0;
    for (int i = 0; i < n; i++) sum += v[i];
    return json_pack("{s:I, s:I, s:I, s:f, s:f, s:f, s:f, s:f}", "min", (json_int_t)(n ? v[0] : 0), "max",
                     (json_int_t)(n ? v[n - 1] : 0), "avg", (json_int_t)(n ? sum / n : 0), "p50",
                     sl_rest_percentile(v, n, 50), "p90", sl_rest_percentile(v, n, 90), "p95",
                     sl_rest_percentile(v, n, 95), "p99", sl_rest_percentile(v, n, 99), "p999",
                     sl_rest_percentile(v, n, 99.9));
}

/* ---- one checkpoint -------------------------------------------------------- */

/* Sums over subtasks [from, to) of a checkpoint. */
typedef struct agg {
    int64_t latest_ack;  /* -1: none acknowledged */
    int64_t state_size, checkpointed_size, processed, persisted;
    int nsubtasks, nacked;
} agg_t;

static agg_t aggregate(const sl_rest_checkpoint_t *k, int from, int to) {
    agg_t a = {.latest_ack = -1};
    for (int i = from; i < to; i++) {
        const sl_rest_ckpt_subtask_t *s = &k->subtasks[i];
        a.nsubtasks++;
        if (!s->acked) continue;
        a.nacked++;
        if (s->ack_timestamp > a.latest_ack) a.latest_ack = s->ack_timestamp;
        a.state_size += s->state_size;
        a.checkpointed_size += s->checkpointed_size;
        a.processed += s->processed_data;
        a.persisted += s->persisted_data;
    }
    return a;
}

static int ntasks_of(const sl_rest_checkpoints_t *c) {
    int n = 0;
    for (int v = 0; v < c->nvertices; v++) n += c->vertices[v].parallelism;
    return n;
}

static int first_task(const sl_rest_checkpoints_t *c, int v) {
    int n = 0;
    for (int i = 0; i < v; i++) n += c->vertices[i].parallelism;
    return n;
}

static bool is(const sl_rest_checkpoint_t *k, const char *status) { return !strcmp(k->status, status); }

static int64_t e2e(const sl_rest_checkpoint_t *k, const agg_t *a) {
    if (is(k, "COMPLETED") && k->end_to_end_duration >= 0) return k->end_to_end_duration;
    return a->latest_ack >= 0 ? a->latest_ack - k->trigger_timestamp : -1;
}

/* The figures every checkpoint-level and vertex-level object has. */
static void put_figures(json_t *o, const sl_rest_checkpoint_t *k, const agg_t *a, int64_t duration) {
    json_object_set_new(o, "latest_ack_timestamp", json_integer(a->latest_ack));
    json_object_set_new(o, "checkpointed_size", json_integer(a->checkpointed_size));
    json_object_set_new(o, "state_size", json_integer(a->state_size));
    json_object_set_new(o, "end_to_end_duration", json_integer(duration));
    json_object_set_new(o, "alignment_buffered", json_integer(0)); /* deprecated by Flink: always 0 */
    json_object_set_new(o, "processed_data", json_integer(a->processed));
    json_object_set_new(o, "persisted_data", json_integer(a->persisted));
    json_object_set_new(o, "num_subtasks", json_integer(a->nsubtasks));
    json_object_set_new(o, "num_acknowledged_subtasks", json_integer(a->nacked));
    SL_UNUSED(k);
}

static const char *vertex_status(const sl_rest_checkpoint_t *k, const agg_t *a) {
    if (is(k, "FAILED")) return "FAILED";
    return a->nacked == a->nsubtasks ? "COMPLETED" : "IN_PROGRESS";
}

/* Vertex v's TaskCheckpointStatistics. */
static json_t *vertex_json(const sl_rest_checkpoints_t *c, const sl_rest_checkpoint_t *k, int v) {
    int from = first_task(c, v);
    agg_t a = aggregate(k, from, from + c->vertices[v].parallelism);
    json_t *o = json_pack("{s:I, s:s}", "id", (json_int_t)k->id, "status", vertex_status(k, &a));
    put_figures(o, k, &a, a.latest_ack >= 0 ? a.latest_ack - k->trigger_timestamp : -1);
    return o;
}

/* A CheckpointStatistics object; with_tasks: its "tasks" map filled (the
 * details path), else empty (history and latest, as Flink does). */
static json_t *checkpoint_json(const sl_rest_checkpoints_t *c, const sl_rest_checkpoint_t *k, bool with_tasks) {
    const char *cls = is(k, "COMPLETED") ? "completed" : is(k, "FAILED") ? "failed" : "in_progress";
    agg_t a = aggregate(k, 0, ntasks_of(c));
    json_t *o = json_pack("{s:s, s:I, s:s, s:b, s:I}", "className", cls, "id", (json_int_t)k->id, "status",
                          k->status, "is_savepoint", k->is_savepoint, "trigger_timestamp",
                          (json_int_t)k->trigger_timestamp);
    put_figures(o, k, &a, e2e(k, &a));
    json_object_set_new(o, "checkpoint_type", json_string(k->type[0] ? k->type : "CHECKPOINT"));
    if (is(k, "COMPLETED")) {
        json_object_set_new(o, "external_path", json_string(k->external_path[0] ? k->external_path : NOT_ADDRESSABLE));
        json_object_set_new(o, "discarded", json_boolean(k->discarded));
    }
    if (is(k, "FAILED")) {
        json_object_set_new(o, "failure_timestamp", json_integer(k->failure_timestamp));
        json_object_set_new(o, "failure_message",
                            k->failure_message[0] ? json_string(k->failure_message) : json_null());
    }
    json_t *tasks = json_object();
    for (int v = 0; with_tasks && v < c->nvertices; v++)
        json_object_set_new(tasks, c->vertices[v].id, vertex_json(c, k, v));
    json_object_set_new(o, "tasks", tasks);
    return o;
}

/* ---- the paths ------------------------------------------------------------- */

int sl_rest_checkpoint_find(const sl_rest_checkpoints_t *c, int64_t id) {
    for (int i = 0; i < c->nhistory; i++)
        if (c->history[i].id == id) return i;
    return -1;
}

int sl_rest_vertex_find(const sl_rest_checkpoints_t *c, const char *vertex_id) {
    for (int v = 0; v < c->nvertices; v++)
        if (!strcmp(c->vertices[v].id, vertex_id)) return v;
    return -1;
}

/* A history index with its id, sorted newest (highest id) first. */
typedef struct by_id {
    int64_t id;
    int index;
} by_id_t;

static int cmp_newest(const void *a, const void *b) {
    int64_t x = ((const by_id_t *)a)->id, y = ((const by_id_t *)b)->id;
    return x > y ? -1 : x < y;
}

json_t *sl_rest_checkpoints_json(const sl_rest_checkpoints_t *c) {
    int n = c->nhistory, nt = ntasks_of(c);
    by_id_t *order = sl_calloc((size_t)(n ? n : 1), sizeof *order);
    for (int i = 0; i < n; i++) order[i] = (by_id_t){c->history[i].id, i};
    qsort(order, (size_t)n, sizeof *order, cmp_newest);

    json_t *counts = json_pack("{s:I, s:I, s:I, s:I, s:I}", "restored", (json_int_t)c->restored, "total",
                               (json_int_t)c->total, "in_progress", (json_int_t)c->in_progress, "completed",
                               (json_int_t)c->completed, "failed", (json_int_t)c->failed);

    /* summary over the completed checkpoints kept */
    int64_t *cs = sl_calloc((size_t)(n ? n : 1), sizeof *cs), *ss = sl_calloc((size_t)(n ? n : 1), sizeof *ss);
    int64_t *du = sl_calloc((size_t)(n ? n : 1), sizeof *du), *ab = sl_calloc((size_t)(n ? n : 1), sizeof *ab);
    int64_t *pr = sl_calloc((size_t)(n ? n : 1), sizeof *pr), *pe = sl_calloc((size_t)(n ? n : 1), sizeof *pe);
    int m = 0;
    for (int i = 0; i < n; i++) {
        const sl_rest_checkpoint_t *k = &c->history[i];
        if (!is(k, "COMPLETED")) continue;
        agg_t a = aggregate(k, 0, nt);
        cs[m] = a.checkpointed_size;
        ss[m] = a.state_size;
        du[m] = e2e(k, &a);
        ab[m] = 0;
        pr[m] = a.processed;
        pe[m] = a.persisted;
        m++;
    }
    json_t *summary = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o}", "checkpointed_size", summary_dto(cs, m),
                                "state_size", summary_dto(ss, m), "end_to_end_duration", summary_dto(du, m),
                                "alignment_buffered", summary_dto(ab, m), "processed_data", summary_dto(pr, m),
                                "persisted_data", summary_dto(pe, m));
    sl_free(cs), sl_free(ss), sl_free(du), sl_free(ab), sl_free(pr), sl_free(pe);

    const sl_rest_checkpoint_t *lc = NULL, *ls = NULL, *lf = NULL;
    json_t *history = json_array();
    for (int i = 0; i < n; i++) {
        const sl_rest_checkpoint_t *k = &c->history[order[i].index];
        if (is(k, "COMPLETED") && !k->is_savepoint && !lc) lc = k;
        if (is(k, "COMPLETED") && k->is_savepoint && !ls) ls = k;
        if (is(k, "FAILED") && !lf) lf = k;
        json_array_append_new(history, checkpoint_json(c, k, false));
    }
    sl_free(order);
    json_t *restored = json_null();
    if (c->has_restored)
        restored = json_pack("{s:I, s:I, s:b, s:s}", "id", (json_int_t)c->restored_id, "restore_timestamp",
                             (json_int_t)c->restore_timestamp, "is_savepoint", c->restored_is_savepoint,
                             "external_path", c->restored_path);
    json_t *latest = json_pack("{s:o, s:o, s:o, s:o}", "completed", lc ? checkpoint_json(c, lc, false) : json_null(),
                               "savepoint", ls ? checkpoint_json(c, ls, false) : json_null(), "failed",
                               lf ? checkpoint_json(c, lf, false) : json_null(), "restored",
                               restored ? restored : json_null());
    return json_pack("{s:o, s:o, s:o, s:o}", "counts", counts, "summary", summary, "latest", latest, "history",
                     history);
}

json_t *sl_rest_checkpoint_detail_json(const sl_rest_checkpoints_t *c, int h) {
    return checkpoint_json(c, &c->history[h], true);
}

json_t *sl_rest_checkpoint_subtasks_json(const sl_rest_checkpoints_t *c, int h, int v) {
    const sl_rest_checkpoint_t *k = &c->history[h];
    json_t *o = vertex_json(c, k, v);
    int from = first_task(c, v), p = c->vertices[v].parallelism;
    int64_t *vals[9];
    for (int i = 0; i < 9; i++) vals[i] = sl_calloc((size_t)(p ? p : 1), sizeof *vals[i]);
    int m = 0;
    json_t *subtasks = json_array();
    for (int s = 0; s < p; s++) {
        const sl_rest_ckpt_subtask_t *t = &k->subtasks[from + s];
        if (!t->acked) {
            json_array_append_new(subtasks, json_pack("{s:s, s:i, s:s}", "className", "pending", "index", s,
                                                      "status", "pending_or_failed"));
            continue;
        }
        int64_t dur = t->ack_timestamp - k->trigger_timestamp;
        json_array_append_new(
            subtasks,
            json_pack("{s:s, s:i, s:s, s:I, s:I, s:I, s:I, s:{s:I, s:I}, s:{s:I, s:I, s:I, s:I}, s:I, s:b, s:b}",
                      "className", "completed", "index", s, "status", "completed", "ack_timestamp",
                      (json_int_t)t->ack_timestamp, "end_to_end_duration", (json_int_t)dur, "state_size",
                      (json_int_t)t->state_size, "checkpointed_size", (json_int_t)t->checkpointed_size,
                      "checkpoint", "sync", (json_int_t)t->sync_ms, "async", (json_int_t)t->async_ms, "alignment",
                      "buffered", (json_int_t)0, "processed", (json_int_t)t->processed_data, "persisted",
                      (json_int_t)t->persisted_data, "duration", (json_int_t)t->align_ms, "start_delay",
                      (json_int_t)t->start_delay_ms, "unaligned_checkpoint", t->unaligned, "aborted",
                      is(k, "FAILED")));
        vals[0][m] = t->checkpointed_size;
        vals[1][m] = t->state_size;
        vals[2][m] = dur;
        vals[3][m] = t->sync_ms;
        vals[4][m] = t->async_ms;
        vals[5][m] = 0;
        vals[6][m] = t->processed_data;
        vals[7][m] = t->persisted_data;
        vals[8][m] = t->align_ms;
        m++;
    }
    int64_t *delay = sl_calloc((size_t)(p ? p : 1), sizeof *delay);
    for (int s = 0, i = 0; s < p; s++)
        if (k->subtasks[from + s].acked) delay[i++] = k->subtasks[from + s].start_delay_ms;
    json_t *summary = json_pack(
        "{s:o, s:o, s:o, s:{s:o, s:o}, s:{s:o, s:o, s:o, s:o}, s:o}", "checkpointed_size", summary_dto(vals[0], m),
        "state_size", summary_dto(vals[1], m), "end_to_end_duration", summary_dto(vals[2], m), "checkpoint_duration",
        "sync", summary_dto(vals[3], m), "async", summary_dto(vals[4], m), "alignment", "buffered",
        summary_dto(vals[5], m), "processed", summary_dto(vals[6], m), "persisted", summary_dto(vals[7], m),
        "duration", summary_dto(vals[8], m), "start_delay", summary_dto(delay, m));
    for (int i = 0; i < 9; i++) sl_free(vals[i]);
    sl_free(delay);
    json_object_set_new(o, "summary", summary);
    json_object_set_new(o, "subtasks", subtasks);
    return o;
}

json_t *sl_rest_ckpt_config_json(const sl_rest_ckpt_config_t *c) {
    return json_pack("{s:s, s:I, s:I, s:I, s:I, s:{s:b, s:b}, s:s, s:s, s:b, s:i, s:I, s:b}", "mode",
                     c->exactly_once ? "exactly_once" : "at_least_once", "interval", (json_int_t)c->interval,
                     "timeout", (json_int_t)c->timeout, "min_pause", (json_int_t)c->min_pause, "max_concurrent",
                     (json_int_t)c->max_concurrent, "externalization", "enabled", c->externalized,
                     "delete_on_cancellation", c->delete_on_cancellation, "state_backend", c->state_backend,
                     "checkpoint_storage", c->checkpoint_storage, "unaligned_checkpoints", c->unaligned,
                     "tolerable_failed_checkpoints", c->tolerable_failed, "aligned_checkpoint_timeout",
                     (json_int_t)c->aligned_checkpoint_timeout, "checkpoints_after_tasks_finish",
                     c->after_tasks_finish);
}

/* s as a JSON string; null when empty or not UTF-8. */
static json_t *str_or_null(const char *s) {
    json_t *j = s && s[0] ? json_string(s) : NULL;
    return j ? j : json_null();
}

json_t *sl_rest_job_config_json(const char *jid, const sl_rest_job_config_t *c) {
    json_t *user = json_object();
    for (int i = 0; i < c->nuser_config; i++) {
        json_t *v = json_string(c->user_config[i].value);
        if (v) json_object_set_new(user, c->user_config[i].key, v); /* a key that is not UTF-8 is left out */
    }
    json_t *o = json_pack("{s:s, s:o, s:{s:s, s:o, s:i, s:b, s:o}}", "jid", jid, "name", str_or_null(c->name),
                          "execution-config", "execution-mode", c->execution_mode[0] ? c->execution_mode : "PIPELINED",
                          "restart-strategy", str_or_null(c->restart_strategy), "job-parallelism", c->parallelism,
                          "object-reuse-mode", c->object_reuse, "user-config", user);
    return o ? o : json_object();
}

json_t *sl_rest_exceptions_json(const sl_rest_exception_t *e, int n, int max) {
    int keep = max >= 0 && max < n ? max : n;
    json_t *entries = json_array();
    for (int i = n - 1; i >= n - keep; i--) { /* newest first */
        json_t *x = json_pack("{s:o, s:o, s:I, s:o, s:o, s:o, s:o, s:{}, s:[]}", "exceptionName", str_or_null(e[i].name),
                              "stacktrace", str_or_null(e[i].stacktrace), "timestamp", (json_int_t)e[i].timestamp,
                              "taskName", str_or_null(e[i].task_name), "location", str_or_null(e[i].location),
                              "endpoint", str_or_null(e[i].location), "taskManagerId", str_or_null(e[i].tm_id),
                              "failureLabels", "concurrentExceptions");
        json_array_append_new(entries, x);
    }
    json_t *all = json_array();
    if (n > 0)
        json_array_append_new(all, json_pack("{s:o, s:o, s:o, s:I, s:o}", "exception", str_or_null(e[n - 1].stacktrace),
                                             "task", str_or_null(e[n - 1].task_name), "location",
                                             str_or_null(e[n - 1].location), "timestamp",
                                             (json_int_t)e[n - 1].timestamp, "taskManagerId",
                                             str_or_null(e[n - 1].tm_id)));
    bool truncated = keep < n;
    return json_pack("{s:o, s:o, s:o, s:b, s:{s:o, s:b}}", "root-exception",
                     n ? str_or_null(e[n - 1].stacktrace) : json_null(), "timestamp",
                     n ? json_integer(e[n - 1].timestamp) : json_null(), "all-exceptions", all, "truncated", truncated,
                     "exceptionHistory", "entries", entries, "truncated", truncated);
}

json_t *sl_rest_operation_json(const sl_rest_operation_t *op, bool savepoint) {
    if (!op->done) return json_pack("{s:{s:s}}", "status", "id", "IN_PROGRESS");
    json_t *operation;
    if (op->failure[0]) {
        json_t *msg = json_string(op->failure);
        operation = json_pack("{s:{s:s, s:o}}", "failure-cause", "class",
                              savepoint ? "sluice.SavepointException" : "sluice.CheckpointException", "stack-trace",
                              msg ? msg : json_string("(not UTF-8)"));
    } else if (savepoint) {
        json_t *loc = json_string(op->location);
        operation = json_pack("{s:o}", "location", loc ? loc : json_string(""));
    } else {
        operation = json_pack("{s:I}", "checkpointId", (json_int_t)op->checkpoint_id);
    }
    return json_pack("{s:{s:s}, s:o}", "status", "id", "COMPLETED", "operation", operation);
}
