/*
 * async.h — asynchronous I/O (Flink's AsyncDataStream.orderedWait /
 * unorderedWait): enrich each record with the answer of an external
 * service without blocking the task while the answer is on its way.
 *
 * For every input record the operator calls the user's invoke on the task
 * thread with a result handle (sl_async_result_t); invoke starts a request
 * and returns.  Later, from ANY thread, the user writes zero or more output
 * rows into the handle (sl_async_row + sl_async_add) and completes it
 * (sl_async_complete), or fails it (sl_async_fail: the job fails with that
 * message).  Results are emitted on the task thread with the input record's
 * timestamp:
 *   SL_ASYNC_ORDERED:   in input order;
 *   SL_ASYNC_UNORDERED: as they complete, but never across a watermark: the
 *                       results of the records before a watermark are all
 *                       emitted before it, those after it after it.
 * At most `capacity` requests are in flight; when full the task stops taking
 * input (backpressure) and waits for completions, still running its mail.
 * A request not completed timeout_ms (processing time) after invoke times
 * out: the user's timeout callback, if any, gets a fresh handle and may
 * complete it with rows (they replace the request's answer; a late
 * completion of the original handle is then ignored); with no callback, or
 * if the callback does not complete its handle, the job fails with an error
 * naming the operator.
 *
 * Checkpoints: the input records of every request in flight (and of
 * completed results not yet emitted) are the operator's state; a restore
 * (at any parallelism, each record in exactly one subtask) invokes them
 * again.  At the end of input the operator waits for every request.
 *
 * Handles: invoke's handle belongs to the user until sl_async_complete or
 * sl_async_fail, which must be called exactly once (also after a timeout,
 * and after the job was cancelled: that releases it).  A handle is used by
 * one thread at a time.  The timeout callback's handle is different: it
 * is valid only during the callback (complete it there, or not at all).
 */
#ifndef SLUICE_ASYNC_H
#define SLUICE_ASYNC_H

#include "sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_async_result sl_async_result_t;

typedef enum sl_async_mode { SL_ASYNC_ORDERED = 0, SL_ASYNC_UNORDERED = 1 } sl_async_mode_t;

typedef struct sl_async_fn {
    /* Task thread: start the request for `in` (copy what you need: `in` is
     * valid only during the call); complete `res` later from any thread.
     * < 0 fails the task. */
    int (*invoke)(void *ctx, const sl_record_t *in, sl_async_result_t *res);
    /* Optional, task thread: `in`'s request timed out; complete `res` with
     * rows (e.g. a default answer) or leave it: the job then fails. */
    int (*timeout)(void *ctx, const sl_record_t *in, sl_async_result_t *res);
    /* Optional, task thread: before the first record / after the last. */
    int (*open)(void *ctx, sl_rt_t *rt);
    void (*close)(void *ctx);
    sl_fn_opts_t opts;
} sl_async_fn_t;

/* Adds the async operator after s.  capacity > 0 requests in flight,
 * timeout_ms > 0; out_schema is taken over (see sluice.h).  Mistakes
 * (no invoke, bad capacity, timeout or mode, no schema) are recorded on the
 * environment by name.  Builder thread.  Operator state for the function:
 * sl_checkpointed (operator_state.h) on the returned stream. */
SL_API sl_stream_t *sl_async_wait(sl_stream_t *s, sl_async_fn_t fn, int capacity, int64_t timeout_ms,
                                  sl_async_mode_t mode, sl_schema_t *out_schema);

/* Any thread (the handle's owner): the writer of the next result row, begun
 * with the output schema; then sl_async_add appends it. */
SL_API sl_row_writer_t *sl_async_row(sl_async_result_t *res);
SL_API void sl_async_add(sl_async_result_t *res);
/* Any thread: the answer is complete (the rows added so far); wakes the
 * task.  Releases the handle. */
SL_API void sl_async_complete(sl_async_result_t *res);
/* Any thread: the request failed; the job fails with msg (copied) naming
 * the operator.  Releases the handle. */
SL_API void sl_async_fail(sl_async_result_t *res, const char *msg);

#ifdef __cplusplus
}
#endif
#endif
