/*
 * executor.h — runs a job inside this process: translates the stream graph
 * into chained vertices (job_graph.h), creates one task per vertex subtask
 * with its operators, input gates, record writers and the channels between
 * them, runs every task on its own thread, and waits.  The first failure
 * cancels every task and is reported.
 */
#ifndef SL_EXECUTOR_H
#define SL_EXECUTOR_H

#include <stddef.h>

typedef struct sl_env sl_env_t;
typedef struct sl_executor sl_executor_t;

int sl_executor_new(sl_env_t *env, const char *job_name, sl_executor_t **out, char *err, size_t errlen);
/* Blocks until the job ends; 0 or the first error (message in err). */
int sl_executor_run(sl_executor_t *ex, char *err, size_t errlen);
/* Thread-safe. */
void sl_executor_cancel(sl_executor_t *ex);
void sl_executor_destroy(sl_executor_t *ex);

#endif
