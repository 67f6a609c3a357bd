/*
 * prom.h — the Prometheus endpoint of a sluice process (Flink's
 * PrometheusReporter): GET /metrics answers the text exposition format
 * (version 0.0.4) with what a render callback writes.  The JobManager
 * renders its job metrics (flink_jobmanager_job_*), a TaskManager the
 * metrics of the subtasks it runs (flink_taskmanager_job_task_*).
 *
 * Ports: metrics.reporter.prom.port is a port ("9249") or a range
 * ("9249-9260"); the server takes the first free one, so several
 * processes on one host each get their own.
 *
 * Threads: the server runs libmicrohttpd's internal thread; the render
 * callback is called there, one request at a time.
 */
#ifndef SL_METRICS_PROM_H
#define SL_METRICS_PROM_H

#include <stdbool.h>
#include <stddef.h>

#include "common/common.h"

typedef struct sl_prom_server sl_prom_server_t;

/* Writes the exposition text into out (the server's thread). */
typedef void (*sl_prom_render_fn)(void *ctx, sl_buf_t *out);

/* Parses "9249" or "9249-9260" (1..65535, lo <= hi); 0 or SL_EINVAL naming
 * the spec. */
int sl_prom_parse_ports(const char *spec, int *lo, int *hi, char *err, size_t errlen);
/* Starts serving on bind_address (NULL: 0.0.0.0) at the first free port of
 * spec.  ctx is borrowed and must outlive the server. */
int sl_prom_server_new(const char *bind_address, const char *spec, sl_prom_render_fn fn, void *ctx,
                       sl_prom_server_t **out, char *err, size_t errlen);
int sl_prom_server_port(const sl_prom_server_t *s);
/* Stops the thread and frees s.  NULL-safe. */
void sl_prom_server_destroy(sl_prom_server_t *s);

/* ---- the text format ---- */

/* "# TYPE name gauge" once per metric family: call before its samples. */
void sl_prom_type(sl_buf_t *out, const char *name);
/* One sample: name{k0="v0",...} value.  labels holds nlabels (key, value)
 * pairs; values are escaped as the format requires (\\, \" and \n). */
void sl_prom_sample(sl_buf_t *out, const char *name, const char *const *labels, int nlabels, double value);
/* Appends v escaped for a label value (exposed for tests). */
void sl_prom_escape(sl_buf_t *out, const char *v);

#endif
