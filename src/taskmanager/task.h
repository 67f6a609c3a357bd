/*
 * task.h — a task: one parallel instance (subtask) of a chained job vertex,
 * driven by a single thread that owns it (Flink's StreamTask with its
 * mailbox).  That thread reads input buffers, runs the operator chain,
 * fires processing-time timers and handles mail (control messages from
 * other threads: cancel, and later checkpoint triggers and notifications).
 * Nothing else touches the task's operators or state.  The operators see
 * the task only through the operator context it hands them
 * (operators/operator_context.h, filled by task.c), never through this
 * header.
 */
#ifndef SL_TASK_H
#define SL_TASK_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "operators/operator.h"

typedef struct sl_task sl_task_t;
typedef struct sl_deployment sl_deployment_t;

/* Processing time of the job (the environment's clock). */
int64_t sl_task_now(sl_task_t *t);
/* Records the task's first failure; the task then stops and the job fails. */
void sl_task_fail(sl_task_t *t, int rc, const char *msg);

#endif
