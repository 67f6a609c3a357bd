/*
 * task.h — a task: one parallel instance (subtask) of a chained job vertex,
 * driven by a single thread that owns it (Flink's StreamTask with its
 * mailbox).  That thread reads input buffers, runs the operator chain,
 * fires processing-time timers and handles mail (control messages from
 * other threads: cancel, and later checkpoint triggers and notifications).
 * Nothing else touches the task's operators or state.
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
/* Asks the task to call op->vt->on_processing_time(op, now) once now >= ts. */
void sl_task_schedule_processing(sl_task_t *t, sl_operator_t *op, int64_t ts);
/* Records the task's first failure; the task then stops and the job fails. */
void sl_task_fail(sl_task_t *t, int rc, const char *msg);
/* Name of the task for messages: "Window(...) (2/4)". */
const char *sl_task_name(const sl_task_t *t);

/* For operators that wait for other threads (async I/O, async_op.c). */
#include "taskmanager/mailbox.h"
/* Any thread: posts mail (fn(task, arg) runs on the task's thread between
 * records) and wakes the task. */
void sl_task_post(sl_task_t *t, sl_mail_fn fn, void *arg);
/* Task thread, from inside an operator that cannot go on yet: runs the
 * mail posted so far (not in a source task, where a checkpoint trigger
 * would snapshot the source in the middle of a record), then sleeps until
 * the task is woken or deadline_ns (monotonic).  Returns true when the task
 * is cancelled or has failed: stop waiting then. */
bool sl_task_yield(sl_task_t *t, int64_t deadline_ns);

#endif
