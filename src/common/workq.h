/*
 * workq.h — a queue of work items run in order by one thread of its own:
 * how a component that is called back on a network or transport thread
 * hands slow work (a deployment, a message's handling) to a thread where
 * it may block.  Used by the embedded transport (runtime/local.c) and the
 * TaskManager process (taskmanager/tm_process.c).
 *
 * Threads: sl_workq_post from any thread; the items run on the queue's
 * thread, one at a time, in the order they were posted.
 */
#ifndef SL_WORKQ_H
#define SL_WORKQ_H

#include <pthread.h>
#include <stdbool.h>

typedef void (*sl_work_fn)(void *ctx, void *item);

typedef struct sl_workq {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct sl_work *head, *tail;
    bool stop, started;
    pthread_t thread;
    sl_work_fn run;     /* runs an item */
    sl_work_fn drop;    /* frees an item that will not run (after stop), may be NULL */
    void *ctx;
} sl_workq_t;

/* Starts the thread.  0, or SL_EIO when it cannot be started. */
int sl_workq_start(sl_workq_t *q, sl_work_fn run, sl_work_fn drop, void *ctx);
/* Queues item; false (and nothing queued) once the queue is stopping. */
bool sl_workq_post(sl_workq_t *q, void *item);
/* Runs what was posted before, then ends the thread; later posts are
 * refused (their items dropped). */
void sl_workq_stop(sl_workq_t *q);
/* After sl_workq_stop, when nobody can post any more. */
void sl_workq_free(sl_workq_t *q);

#endif
