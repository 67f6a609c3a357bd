/* workq.c — see workq.h. */
#include "common/workq.h"

#include "common/common.h"

typedef struct sl_work {
    void *item;
    struct sl_work *next;
} sl_work_t;

static void *workq_main(void *arg) {
    sl_workq_t *q = arg;
    pthread_mutex_lock(&q->mu);
    for (;;) {
        while (!q->head && !q->stop) pthread_cond_wait(&q->cv, &q->mu);
        if (!q->head) break;
        sl_work_t *w = q->head;
        q->head = w->next;
        if (!q->head) q->tail = NULL;
        pthread_mutex_unlock(&q->mu);
        q->run(q->ctx, w->item);
        sl_free(w);
        pthread_mutex_lock(&q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    return NULL;
}

int sl_workq_start(sl_workq_t *q, sl_work_fn run, sl_work_fn drop, void *ctx) {
    memset(q, 0, sizeof *q);
    pthread_mutex_init(&q->mu, NULL);
    pthread_cond_init(&q->cv, NULL);
    q->run = run;
    q->drop = drop;
    q->ctx = ctx;
    if (pthread_create(&q->thread, NULL, workq_main, q) != 0) return SL_EIO;
    q->started = true;
    return 0;
}

bool sl_workq_post(sl_workq_t *q, void *item) {
    sl_work_t *w = sl_malloc(sizeof *w);
    w->item = item;
    w->next = NULL;
    pthread_mutex_lock(&q->mu);
    if (q->stop) {
        pthread_mutex_unlock(&q->mu);
        sl_free(w);
        if (q->drop) q->drop(q->ctx, item);
        return false;
    }
    if (q->tail)
        q->tail->next = w;
    else
        q->head = w;
    q->tail = w;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    return true;
}

void sl_workq_stop(sl_workq_t *q) {
    pthread_mutex_lock(&q->mu);
    q->stop = true;
    pthread_cond_signal(&q->cv);
    pthread_mutex_unlock(&q->mu);
    if (q->started) pthread_join(q->thread, NULL);
    q->started = false;
    pthread_mutex_lock(&q->mu);
    sl_work_t *rest = q->head; /* only when the thread never started */
    q->head = q->tail = NULL;
    pthread_mutex_unlock(&q->mu);
    q->head = rest;
    while (q->head) {
        sl_work_t *w = q->head;
        q->head = w->next;
        if (q->drop) q->drop(q->ctx, w->item);
        sl_free(w);
    }
}

void sl_workq_free(sl_workq_t *q) {
    pthread_mutex_destroy(&q->mu);
    pthread_cond_destroy(&q->cv);
}
