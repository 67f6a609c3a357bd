/*
 * rest_metrics.h — private to the REST server: the JSON answers of the
 * metrics paths (Flink's MetricCollectionResponseBody, JobVertexDetailsInfo,
 * JobVertexBackPressureInfo, IOMetricsInfo), built from what the provider
 * returned (rest.h).  Pure functions: no HTTP, no locks; every json_t
 * returned is new.
 */
#ifndef SL_JOBMANAGER_REST_METRICS_H
#define SL_JOBMANAGER_REST_METRICS_H

#include <jansson.h>

#include "jobmanager/rest.h"

/* Every metric of vertex m as {id -> value} (ids "<subtask>.<metric>" and
 * "<subtask>.<operator>.<metric>", values as Flink writes them: strings). */
json_t *sl_rest_vertex_metric_map(const sl_rest_vertex_metrics_t *m);
/* A metric list answer from map: without `get` [{"id"}] of every metric
 * (sorted); with get="a,b" [{"id","value"}] of the ones that exist, in
 * get's order. */
json_t *sl_rest_metric_list(json_t *map, const char *get);
/* GET /jobs/:jobid/vertices/:vertexid */
json_t *sl_rest_vertex_detail_json(const sl_rest_vertex_metrics_t *m, int64_t now);
/* GET .../backpressure (Flink's levels: ratio <= 0.10 ok, <= 0.5 low, else high) */
json_t *sl_rest_backpressure_json(const sl_rest_vertex_metrics_t *m, int64_t now);
/* GET .../watermarks: [{"id":"<subtask>.currentInputWatermark","value"}] of the head operator */
json_t *sl_rest_watermarks_json(const sl_rest_vertex_metrics_t *m);
/* The vertex's IOMetricsInfo, summed over its subtasks (the "metrics" of
 * /jobs/:jobid's vertices and of each subtask). */
json_t *sl_rest_io_metrics_json(const sl_rest_subtask_metrics_t *s, int n);
/* Flink's backpressureLevel of a ratio in [0, 1]. */
const char *sl_rest_backpressure_level(double ratio);

#endif
