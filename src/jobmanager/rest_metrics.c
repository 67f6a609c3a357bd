/*
 * rest_metrics.c — the JSON shapes of the metrics paths (rest_metrics.h),
 * with Flink's field names and types (rest_v1_dispatcher.yml):
 *
 *   MetricCollectionResponseBody  [{"id","value"}]  (value a string)
 *   JobVertexDetailsInfo          {"id","name","maxParallelism","parallelism","now",
 *                                  "subtasks":[{"subtask","status","attempt","endpoint",
 *                                  "start-time","end-time","duration","metrics",
 *                                  "taskmanager-id"}]}
 *   IOMetricsInfo                 read-/write-bytes, -records (+ "-complete"),
 *                                 accumulated-backpressured-/idle-/busy-time
 *   JobVertexBackPressureInfo     {"status","backpressureLevel","end-timestamp",
 *                                  "subtasks":[{"subtask","attemptNumber",
 *                                  "backpressureLevel","ratio","idleRatio","busyRatio"}]}
 *
 * Operator names in metric ids have '.' and ',' replaced by '_'.
 * A task's records in are its head operator's numRecordsIn, its records
 * out its last operator's numRecordsOut (what leaves the chain); bytes are
 * not measured and reported as 0 with "-complete" true once reported.
 */
#include "jobmanager/rest_metrics.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *sl_rest_backpressure_level(double ratio) {
    return ratio <= 0.10 ? "ok" : ratio <= 0.5 ? "low" : "high";
}

static void put_str(json_t *map, const char *id, const char *v) { json_object_set_new(map, id, json_string(v)); }

static void put_i64(json_t *map, const char *id, int64_t v) {
    char b[32];
    snprintf(b, sizeof b, "%" PRId64, v);
    put_str(map, id, b);
}

static void put_dbl(json_t *map, const char *id, double v) {
    char b[40];
    snprintf(b, sizeof b, "%.1f", v);
    put_str(map, id, b);
}

/* An operator's name in a metric id: '.' separates the id's parts and ','
 * the ids of ?get=, so both become '_' ("Window(a, b).x" -> "Window(a_ b)_x"). */
static void metric_name(char *out, size_t cap, const char *name) {
    snprintf(out, cap, "%s", name);
    for (char *p = out; *p; p++)
        if (*p == '.' || *p == ',') *p = '_';
}

json_t *sl_rest_vertex_metric_map(const sl_rest_vertex_metrics_t *m) {
    json_t *map = json_object();
    char id[256], op[160];
    for (int s = 0; s < m->vertex.parallelism; s++) {
        const sl_rest_subtask_metrics_t *st = &m->subtasks[s];
        if (!st->reported) continue;
        const int64_t in = st->nops ? st->ops[0].records_in : 0, out = st->nops ? st->ops[st->nops - 1].records_out : 0;
#define ID(fmt, ...) (snprintf(id, sizeof id, fmt, __VA_ARGS__), id)
        put_i64(map, ID("%d.numRecordsIn", s), in);
        put_i64(map, ID("%d.numRecordsOut", s), out);
        put_i64(map, ID("%d.numBytesIn", s), st->bytes_in);
        put_i64(map, ID("%d.numBytesOut", s), st->bytes_out);
        if (st->busy >= 0) {
            put_dbl(map, ID("%d.busyTimeMsPerSecond", s), st->busy);
            put_dbl(map, ID("%d.backPressuredTimeMsPerSecond", s), st->backpressured);
            put_dbl(map, ID("%d.idleTimeMsPerSecond", s), st->idle);
        }
        put_i64(map, ID("%d.accumulatedBusyTime", s), st->busy_ms);
        put_i64(map, ID("%d.accumulatedBackPressuredTime", s), st->backpressured_ms);
        put_i64(map, ID("%d.accumulatedIdleTime", s), st->idle_ms);
        if (st->nops) put_i64(map, ID("%d.currentInputWatermark", s), st->ops[0].in_watermark);
        for (int k = 0; k < st->nops; k++) {
            const sl_rest_op_metrics_t *o = &st->ops[k];
            metric_name(op, sizeof op, o->name);
            put_i64(map, ID("%d.%s.numRecordsIn", s, op), o->records_in);
            put_i64(map, ID("%d.%s.numRecordsOut", s, op), o->records_out);
            put_i64(map, ID("%d.%s.currentInputWatermark", s, op), o->in_watermark);
            put_i64(map, ID("%d.%s.currentOutputWatermark", s, op), o->out_watermark);
            put_i64(map, ID("%d.%s.numLateRecordsDropped", s, op), o->late_dropped);
            if (o->pending_records >= 0) put_i64(map, ID("%d.%s.pendingRecords", s, op), o->pending_records);
            /* keyed state: its memory, and RocksDB's own figures under
             * the property names Flink's RocksDB native metrics use */
            if (o->state_memory_bytes >= 0)
                put_i64(map, ID("%d.%s.stateMemoryBytes", s, op), o->state_memory_bytes);
            if (o->rdb_mem_tables >= 0)
                put_i64(map, ID("%d.%s.rocksdb.cur-size-all-mem-tables", s, op), o->rdb_mem_tables);
            if (o->rdb_table_readers >= 0)
                put_i64(map, ID("%d.%s.rocksdb.estimate-table-readers-mem", s, op), o->rdb_table_readers);
            if (o->rdb_block_cache >= 0)
                put_i64(map, ID("%d.%s.rocksdb.block-cache-usage", s, op), o->rdb_block_cache);
            if (o->rdb_live_data >= 0)
                put_i64(map, ID("%d.%s.rocksdb.estimate-live-data-size", s, op), o->rdb_live_data);
        }
#undef ID
    }
    return map;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

json_t *sl_rest_metric_list(json_t *map, const char *get) {
    json_t *a = json_array();
    if (!get) {
        size_t n = json_object_size(map), i = 0;
        const char **ids = malloc((n ? n : 1) * sizeof *ids);
        const char *k;
        json_t *v;
        json_object_foreach(map, k, v) ids[i++] = k;
        qsort(ids, n, sizeof *ids, cmp_str);
        for (i = 0; i < n; i++) json_array_append_new(a, json_pack("{s:s}", "id", ids[i]));
        free(ids);
        return a;
    }
    const char *p = get;
    while (*p) {
        const char *e = strchr(p, ',');
        size_t l = e ? (size_t)(e - p) : strlen(p);
        char id[256];
        if (l > 0 && l < sizeof id) {
            memcpy(id, p, l);
            id[l] = 0;
            json_t *v = json_object_get(map, id);
            if (v) json_array_append_new(a, json_pack("{s:s, s:O}", "id", id, "value", v));
        }
        if (!e) break;
        p = e + 1;
    }
    return a;
}

json_t *sl_rest_io_metrics_json(const sl_rest_subtask_metrics_t *s, int n) {
    int64_t in = 0, out = 0, busy = 0, bp = 0, idle = 0, bin = 0, bout = 0;
    bool complete = n > 0;
    for (int i = 0; i < n; i++) {
        if (!s[i].reported) complete = false;
        if (s[i].nops) {
            in += s[i].ops[0].records_in;
            out += s[i].ops[s[i].nops - 1].records_out;
        }
        busy += s[i].busy_ms;
        bp += s[i].backpressured_ms;
        idle += s[i].idle_ms;
        bin += s[i].bytes_in;
        bout += s[i].bytes_out;
    }
    return json_pack("{s:I, s:b, s:I, s:b, s:I, s:b, s:I, s:b, s:I, s:I, s:f}", "read-bytes", (json_int_t)bin,
                     "read-bytes-complete", complete, "write-bytes", (json_int_t)bout, "write-bytes-complete", complete,
                     "read-records", (json_int_t)in, "read-records-complete", complete, "write-records",
                     (json_int_t)out, "write-records-complete", complete, "accumulated-backpressured-time",
                     (json_int_t)bp, "accumulated-idle-time", (json_int_t)idle, "accumulated-busy-time",
                     (double)busy);
}

json_t *sl_rest_vertex_detail_json(const sl_rest_vertex_metrics_t *m, int64_t now) {
    json_t *subs = json_array();
    for (int s = 0; s < m->vertex.parallelism; s++) {
        const sl_rest_subtask_metrics_t *st = &m->subtasks[s];
        json_t *o = json_pack("{s:i, s:s, s:i, s:s, s:I, s:I, s:I, s:o, s:s}", "subtask", s, "status", st->status,
                              "attempt", st->attempt, "endpoint", st->tm_id[0] ? st->tm_id : "(unassigned)",
                              "start-time", (json_int_t)st->start_time, "end-time", (json_int_t)-1, "duration",
                              (json_int_t)(st->start_time > 0 ? now - st->start_time : -1), "metrics",
                              sl_rest_io_metrics_json(st, 1), "taskmanager-id",
                              st->tm_id[0] ? st->tm_id : "(unassigned)");
        if (o) json_array_append_new(subs, o);
    }
    json_t *o = json_pack("{s:s, s:s, s:i, s:i, s:I, s:o}", "id", m->vertex.id, "name", m->vertex.name,
                          "maxParallelism", m->vertex.max_parallelism > 0 ? m->vertex.max_parallelism : -1,
                          "parallelism", m->vertex.parallelism, "now", (json_int_t)now, "subtasks", subs);
    return o ? o : json_object();
}

json_t *sl_rest_backpressure_json(const sl_rest_vertex_metrics_t *m, int64_t now) {
    json_t *subs = json_array();
    double worst = 0;
    for (int s = 0; s < m->vertex.parallelism; s++) {
        const sl_rest_subtask_metrics_t *st = &m->subtasks[s];
        double ratio = st->backpressured >= 0 ? st->backpressured / 1000.0 : 0;
        double idle = st->idle >= 0 ? st->idle / 1000.0 : 0, busy = st->busy >= 0 ? st->busy / 1000.0 : 0;
        if (ratio > worst) worst = ratio;
        json_array_append_new(subs, json_pack("{s:i, s:i, s:s, s:f, s:f, s:f}", "subtask", s, "attemptNumber",
                                              st->attempt, "backpressureLevel", sl_rest_backpressure_level(ratio),
                                              "ratio", ratio, "idleRatio", idle, "busyRatio", busy));
    }
    return json_pack("{s:s, s:s, s:I, s:o}", "status", "ok", "backpressureLevel", sl_rest_backpressure_level(worst),
                     "end-timestamp", (json_int_t)now, "subtasks", subs);
}

json_t *sl_rest_watermarks_json(const sl_rest_vertex_metrics_t *m) {
    json_t *a = json_array();
    char id[64], v[32];
    for (int s = 0; s < m->vertex.parallelism; s++) {
        const sl_rest_subtask_metrics_t *st = &m->subtasks[s];
        if (!st->reported || !st->nops) continue;
        snprintf(id, sizeof id, "%d.currentInputWatermark", s);
        snprintf(v, sizeof v, "%" PRId64, st->ops[0].in_watermark);
        json_array_append_new(a, json_pack("{s:s, s:s}", "id", id, "value", v));
    }
    return a;
}
