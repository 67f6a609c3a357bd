/* channel.c — bounded channels of network buffers (see channel.h). */
#include "taskmanager/channel.h"

#include <errno.h>
#include <time.h>

#include "common/common.h"

void sl_waker_init(sl_waker_t *w) {
    pthread_mutex_init(&w->mu, NULL);
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cv, &a);
    pthread_condattr_destroy(&a);
    w->pending = false;
}

void sl_waker_destroy(sl_waker_t *w) {
    pthread_mutex_destroy(&w->mu);
    pthread_cond_destroy(&w->cv);
}

void sl_waker_signal(sl_waker_t *w) {
    pthread_mutex_lock(&w->mu);
    if (!w->pending) {
        w->pending = true;
        pthread_cond_signal(&w->cv);
    }
    pthread_mutex_unlock(&w->mu);
}

void sl_waker_wait(sl_waker_t *w, int64_t deadline_ns) {
    struct timespec ts = {(time_t)(deadline_ns / 1000000000), (long)(deadline_ns % 1000000000)};
    pthread_mutex_lock(&w->mu);
    while (!w->pending) {
        if (pthread_cond_timedwait(&w->cv, &w->mu, &ts) == ETIMEDOUT) break;
    }
    w->pending = false;
    pthread_mutex_unlock(&w->mu);
}

static sl_nbuf_t *nbuf_new(uint32_t cap) {
    sl_nbuf_t *b = sl_calloc(1, sizeof *b);
    b->data = sl_malloc(cap);
    b->cap = cap;
    return b;
}

sl_channel_t *sl_channel_new(int nbufs, uint32_t buf_size, sl_waker_t *consumer) {
    sl_channel_t *ch = sl_calloc(1, sizeof *ch);
    pthread_mutex_init(&ch->mu, NULL);
    pthread_condattr_t a;
    pthread_condattr_init(&a);
    pthread_condattr_setclock(&a, CLOCK_MONOTONIC);
    pthread_cond_init(&ch->cv, &a);
    pthread_condattr_destroy(&a);
    ch->nbufs = nbufs < 1 ? 1 : nbufs;
    ch->buf_size = buf_size;
    ch->consumer = consumer;
    for (int i = 0; i < ch->nbufs; i++) {
        sl_nbuf_t *b = nbuf_new(buf_size);
        b->next = ch->free_list;
        ch->free_list = b;
    }
    atomic_init(&ch->queued, 0);
    atomic_init(&ch->backpressured_ns, 0);
    atomic_init(&ch->bytes, 0);
    atomic_init(&ch->waiting_since_ns, 0);
    return ch;
}

static void free_chain(sl_nbuf_t *b) {
    while (b) {
        sl_nbuf_t *n = b->next;
        sl_free(b->data);
        sl_free(b);
        b = n;
    }
}

void sl_channel_destroy(sl_channel_t *ch) {
    if (!ch) return;
    free_chain(ch->full_head);
    free_chain(ch->free_list);
    pthread_mutex_destroy(&ch->mu);
    pthread_cond_destroy(&ch->cv);
    sl_free(ch);
}

sl_nbuf_t *sl_channel_acquire(sl_channel_t *ch, uint32_t need) {
    pthread_mutex_lock(&ch->mu);
    if (!ch->free_list && !ch->canceled) {
        int64_t t0 = sl_mono_ns();
        atomic_store_explicit(&ch->waiting_since_ns, t0, memory_order_relaxed);
        while (!ch->free_list && !ch->canceled) pthread_cond_wait(&ch->cv, &ch->mu);
        atomic_fetch_add(&ch->backpressured_ns, sl_mono_ns() - t0);
        atomic_store_explicit(&ch->waiting_since_ns, 0, memory_order_relaxed);
    }
    sl_nbuf_t *b = NULL;
    if (!ch->canceled) {
        b = ch->free_list;
        ch->free_list = b->next;
        b->next = NULL;
    }
    pthread_mutex_unlock(&ch->mu);
    if (b) {
        b->len = 0;
        if (need > b->cap) { /* one oversized record: this credit gets a bigger buffer for a while */
            b->data = sl_realloc(b->data, need);
            b->cap = need;
        }
    }
    return b;
}

void sl_channel_send(sl_channel_t *ch, sl_nbuf_t *b) {
    atomic_fetch_add(&ch->bytes, b->len);
    pthread_mutex_lock(&ch->mu);
    b->next = NULL;
    if (ch->full_tail)
        ch->full_tail->next = b;
    else
        ch->full_head = b;
    ch->full_tail = b;
    atomic_fetch_add(&ch->queued, 1);
    if (ch->on_send) ch->on_send(ch->hook_ctx);
    pthread_mutex_unlock(&ch->mu);
    if (ch->consumer) sl_waker_signal(ch->consumer);
}

void sl_channel_send_priority(sl_channel_t *ch, const void *data, uint32_t len, sl_buf_t *capture) {
    sl_nbuf_t *e = sl_calloc(1, sizeof *e);
    e->data = sl_malloc(len ? len : 1);
    memcpy(e->data, data, len);
    e->len = e->cap = len;
    e->priority = true;
    atomic_fetch_add(&ch->bytes, len);
    pthread_mutex_lock(&ch->mu);
    if (capture)
        for (const sl_nbuf_t *b = ch->full_head; b; b = b->next)
            if (!b->priority) sl_buf_append(capture, b->data, b->len);
    /* behind earlier priority events (barriers stay in order), ahead of data */
    sl_nbuf_t **at = &ch->full_head;
    while (*at && (*at)->priority) at = &(*at)->next;
    e->next = *at;
    *at = e;
    if (!e->next) ch->full_tail = e;
    atomic_fetch_add(&ch->queued, 1);
    if (ch->on_send) ch->on_send(ch->hook_ctx);
    pthread_mutex_unlock(&ch->mu);
    if (ch->consumer) sl_waker_signal(ch->consumer);
}

sl_nbuf_t *sl_channel_poll(sl_channel_t *ch) {
    if (atomic_load_explicit(&ch->queued, memory_order_acquire) == 0) return NULL;
    pthread_mutex_lock(&ch->mu);
    sl_nbuf_t *b = ch->full_head;
    if (b) {
        ch->full_head = b->next;
        if (!ch->full_head) ch->full_tail = NULL;
        b->next = NULL;
        atomic_fetch_sub(&ch->queued, 1);
    }
    pthread_mutex_unlock(&ch->mu);
    return b;
}

void sl_channel_recycle(sl_channel_t *ch, sl_nbuf_t *b) {
    if (b->priority) { /* never one of the channel's credits */
        sl_free(b->data);
        sl_free(b);
        return;
    }
    if (b->cap > ch->buf_size) { /* shrink an oversized buffer back */
        b->data = sl_realloc(b->data, ch->buf_size);
        b->cap = ch->buf_size;
    }
    pthread_mutex_lock(&ch->mu);
    b->next = ch->free_list;
    ch->free_list = b;
    pthread_cond_signal(&ch->cv);
    if (ch->on_recycle) ch->on_recycle(ch->hook_ctx);
    pthread_mutex_unlock(&ch->mu);
}

void sl_channel_cancel(sl_channel_t *ch) {
    pthread_mutex_lock(&ch->mu);
    ch->canceled = true;
    pthread_cond_broadcast(&ch->cv);
    pthread_mutex_unlock(&ch->mu);
}

int sl_channel_in_flight(sl_channel_t *ch) {
    pthread_mutex_lock(&ch->mu);
    int n = 0;
    for (sl_nbuf_t *b = ch->free_list; b; b = b->next) n++;
    pthread_mutex_unlock(&ch->mu);
    return ch->nbufs - n;
}

int sl_channel_set_hooks(sl_channel_t *ch, void (*on_send)(void *), void (*on_recycle)(void *), void *ctx) {
    pthread_mutex_lock(&ch->mu);
    ch->on_send = on_send;
    ch->on_recycle = on_recycle;
    ch->hook_ctx = ctx;
    int n = 0;
    for (sl_nbuf_t *b = ch->free_list; b; b = b->next) n++;
    pthread_mutex_unlock(&ch->mu);
    return n;
}

sl_nbuf_t *sl_channel_poll_credited(sl_channel_t *ch, bool has_credit) {
    if (atomic_load_explicit(&ch->queued, memory_order_acquire) == 0) return NULL;
    pthread_mutex_lock(&ch->mu);
    sl_nbuf_t *b = ch->full_head;
    if (b && (has_credit || b->priority)) {
        ch->full_head = b->next;
        if (!ch->full_head) ch->full_tail = NULL;
        b->next = NULL;
        atomic_fetch_sub(&ch->queued, 1);
    } else {
        b = NULL;
    }
    pthread_mutex_unlock(&ch->mu);
    return b;
}

sl_nbuf_t *sl_channel_try_acquire(sl_channel_t *ch, uint32_t need) {
    pthread_mutex_lock(&ch->mu);
    sl_nbuf_t *b = ch->canceled ? NULL : ch->free_list;
    if (b) {
        ch->free_list = b->next;
        b->next = NULL;
    }
    pthread_mutex_unlock(&ch->mu);
    if (b) {
        b->len = 0;
        if (need > b->cap) {
            b->data = sl_realloc(b->data, need);
            b->cap = need;
        }
    }
    return b;
}

void sl_channel_send_inband(sl_channel_t *ch, const void *data, uint32_t len) {
    sl_nbuf_t *e = sl_calloc(1, sizeof *e);
    e->data = sl_malloc(len ? len : 1);
    memcpy(e->data, data, len);
    e->len = e->cap = len;
    e->priority = true;
    sl_channel_send(ch, e);
}

void sl_channel_send_many(sl_channel_t *ch, sl_nbuf_t *head, sl_nbuf_t *tail, int n) {
    if (!head) return;
    long long bytes = 0;
    for (const sl_nbuf_t *b = head; b; b = b->next) bytes += b->len;
    atomic_fetch_add(&ch->bytes, bytes);
    pthread_mutex_lock(&ch->mu);
    tail->next = NULL;
    if (ch->full_tail)
        ch->full_tail->next = head;
    else
        ch->full_head = head;
    ch->full_tail = tail;
    atomic_fetch_add(&ch->queued, n);
    if (ch->on_send) ch->on_send(ch->hook_ctx);
    pthread_mutex_unlock(&ch->mu);
    if (ch->consumer) sl_waker_signal(ch->consumer);
}

void sl_channel_recycle_many(sl_channel_t *ch, sl_nbuf_t *head) {
    sl_nbuf_t *keep = NULL, *keep_tail = NULL;
    int n = 0;
    while (head) {
        sl_nbuf_t *b = head;
        head = b->next;
        if (b->priority) {
            sl_free(b->data);
            sl_free(b);
            continue;
        }
        if (b->cap > ch->buf_size) {
            b->data = sl_realloc(b->data, ch->buf_size);
            b->cap = ch->buf_size;
        }
        b->next = keep;
        keep = b;
        if (!keep_tail) keep_tail = b;
        n++;
    }
    if (!keep) return;
    pthread_mutex_lock(&ch->mu);
    keep_tail->next = ch->free_list;
    ch->free_list = keep;
    pthread_cond_signal(&ch->cv); /* one producer */
    if (ch->on_recycle)
        for (int i = 0; i < n; i++) ch->on_recycle(ch->hook_ctx);
    pthread_mutex_unlock(&ch->mu);
}
