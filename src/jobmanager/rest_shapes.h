/*
 * rest_shapes.h — private to the REST server: the JSON answers of the
 * checkpoint, configuration, exception and asynchronous-operation paths,
 * built from what the provider returned (rest.h).  Pure functions: no
 * HTTP, no locks; every json_t returned is new (the caller owns it).
 */
#ifndef SL_JOBMANAGER_REST_SHAPES_H
#define SL_JOBMANAGER_REST_SHAPES_H

#include <jansson.h>

#include "jobmanager/rest.h"

/* GET /jobs/:jobid/checkpoints: counts, summary, latest, history (newest first). */
json_t *sl_rest_checkpoints_json(const sl_rest_checkpoints_t *c);
/* The index in c->history of checkpoint id, or -1. */
int sl_rest_checkpoint_find(const sl_rest_checkpoints_t *c, int64_t id);
/* GET .../checkpoints/details/:id: checkpoint c->history[h] with its per-vertex "tasks". */
json_t *sl_rest_checkpoint_detail_json(const sl_rest_checkpoints_t *c, int h);
/* The index of the vertex with this id, or -1. */
int sl_rest_vertex_find(const sl_rest_checkpoints_t *c, const char *vertex_id);
/* GET .../details/:id/subtasks/:vertexid: vertex v of c->history[h], summary and subtasks. */
json_t *sl_rest_checkpoint_subtasks_json(const sl_rest_checkpoints_t *c, int h, int v);
/* GET .../checkpoints/config */
json_t *sl_rest_ckpt_config_json(const sl_rest_ckpt_config_t *c);
/* GET /jobs/:jobid/config */
json_t *sl_rest_job_config_json(const char *jid, const sl_rest_job_config_t *c);
/* GET /jobs/:jobid/exceptions: e[n] oldest first; at most max entries (newest) when max >= 0. */
json_t *sl_rest_exceptions_json(const sl_rest_exception_t *e, int n, int max);
/* An asynchronous operation's status (savepoint: "location", else "checkpointId"). */
json_t *sl_rest_operation_json(const sl_rest_operation_t *op, bool savepoint);
/* Flink's percentile of sorted v[n] (Commons Math's legacy estimate:
 * position p/100 * (n + 1), linear between neighbours); 0 when n == 0. */
double sl_rest_percentile(const int64_t *sorted, int n, double p);

#endif
