/*
 * operator_context.h — the seam between a running operator and the task
 * that runs it (Flink's StreamOperatorParameters: the ProcessingTimeService,
 * the MailboxExecutor and the task's part of the runtime context).
 *
 * The task implements it: taskmanager/task.c fills one sl_op_context_t per
 * task, and the deployment hands it to every operator of the task's chain at
 * creation (sl_op_init_t.ctx, kept in op->ctx).  Operators ask the task for
 * processing time, timers, mail, waiting and failure only through it (most
 * through the sl_op_* wrappers of operator.h), so nothing under operators/,
 * windowing/, joins/ or cep/ includes the task.  A unit test may create an
 * operator without a context (ctx NULL): operator.c then uses a test clock
 * and keeps failures for sl_op_test_last_error().
 *
 * Cost: processing time is one indirect call through ctx->clock (the same
 * call the task makes for itself); the others are one indirect call each.
 */
#ifndef SL_OPERATOR_CONTEXT_H
#define SL_OPERATOR_CONTEXT_H

#include <stdbool.h>
#include <stdint.h>

#include "sluice/sluice.h"

struct sl_operator;

/* Mail: fn(owner, arg) runs on the task's thread between records (owner is
 * the context's owner; the same shape as the mailbox's sl_mail_fn). */
typedef void (*sl_op_mail_fn)(void *owner, void *arg);

typedef struct sl_op_context {
    /* Processing time of the job (the environment's clock): clock(clock_ctx).
     * Any thread; cheap enough per record. */
    sl_clock_fn clock;
    void *clock_ctx;
    /* The task's name for messages, "Window(...) (2/4)" (lives as long as
     * the task). */
    const char *name;
    /* What the functions below are called with (the task). */
    void *owner;
    /* Task thread: calls op->vt->on_processing_time(op, now) once now >= ts
     * (op is one of the task's chain). */
    void (*schedule_processing)(void *owner, struct sl_operator *op, int64_t ts);
    /* Task thread: records the task's first failure (msg already names the
     * operator); the task then stops and the job fails. */
    void (*fail)(void *owner, int rc, const char *msg);
    /* Any thread: posts mail and wakes the task. */
    void (*post)(void *owner, sl_op_mail_fn fn, void *arg);
    /* Task thread, from inside an operator that cannot go on yet: runs the
     * mail posted so far (not in a source task), then sleeps until the task
     * is woken or deadline_ns (monotonic).  True when the task is cancelled
     * or has failed: stop waiting then. */
    bool (*yield)(void *owner, int64_t deadline_ns);
} sl_op_context_t;

#endif
