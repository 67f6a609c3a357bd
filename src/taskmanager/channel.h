/*
 * channel.h — network buffers, bounded channels and wakers.
 *
 * A channel carries serialized buffers from one producer subtask to one
 * consumer subtask (Flink's result subpartition + input channel, local
 * variant).  It owns a fixed number of buffers: the producer takes a free
 * one (its credit), fills it and sends it; the consumer reads it and
 * recycles it.  When all buffers are in flight the producer blocks — that
 * is backpressure, and it is why memory between two tasks is bounded by
 * buffers_per_channel * buffer_size.  A remote channel (another process)
 * will implement the same four calls over a socket with credit messages.
 *
 * Element encoding inside a buffer (all little-endian, unaligned):
 *   'R' i64 ts, u32 len, row bytes     a record
 *   'W' i64 watermark                  a watermark
 *   'S' u8 idle                        stream status (1 idle, 0 active)
 *   'D'                                end of data (FLIP-147): no record or watermark
 *                                      follows; barriers and the end still do
 *   'E'                                end of partition (producer finished)
 *   'B' u64 checkpoint id, i64 ts, u8 kind   checkpoint or savepoint barrier
 *                                      (kind: sl_snapshot_kind_t)
 */
#ifndef SL_CHANNEL_H
#define SL_CHANNEL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/common.h"

enum {
    SL_EL_RECORD = 'R',
    SL_EL_WATERMARK = 'W',
    SL_EL_STATUS = 'S',
    SL_EL_END_OF_DATA = 'D',
    SL_EL_END = 'E',
    SL_EL_BARRIER = 'B'
};
#define SL_BARRIER_LEN 18
#define SL_REC_HEADER 13 /* tag + ts + len */

typedef struct sl_nbuf {
    uint8_t *data;
    uint32_t len, cap;
    bool priority;       /* an event sent ahead of the queue, outside the credits (freed on recycle) */
    struct sl_nbuf *next;
} sl_nbuf_t;

/* Wakes a task thread that waits for input or mail. */
typedef struct sl_waker {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool pending;
} sl_waker_t;

void sl_waker_init(sl_waker_t *w);
void sl_waker_destroy(sl_waker_t *w);
void sl_waker_signal(sl_waker_t *w);
/* Waits until signalled or until deadline_ns (monotonic); clears the signal. */
void sl_waker_wait(sl_waker_t *w, int64_t deadline_ns);

typedef struct sl_channel {
    pthread_mutex_t mu;
    pthread_cond_t cv;          /* producer waits for a free buffer */
    sl_nbuf_t *full_head, *full_tail;
    sl_nbuf_t *free_list;
    int nbufs;
    uint32_t buf_size;
    atomic_int queued;          /* full buffers waiting (read without lock as a hint) */
    bool canceled;
    sl_waker_t *consumer;       /* signalled when a buffer arrives */
    /* metrics */
    atomic_llong backpressured_ns;
    atomic_llong bytes;
    /* Optional notifications for a consumer or producer that is not a task
     * (the network data plane), NULL by default (one untaken branch).  Both
     * run with `mu` held, on the thread that sent or recycled, so they must
     * be short and must not call back into the channel; because they run
     * under `mu`, none is running or will run once sl_channel_set_hooks
     * has replaced them. */
    void (*on_send)(void *ctx);    /* a buffer or a priority event was queued */
    void (*on_recycle)(void *ctx); /* a credit buffer went back to the free list */
    void *hook_ctx;
    /* metrics: when the producer started waiting for a free buffer
     * (sl_mono_ns), 0 while it is not waiting — a metrics reporter counts
     * a wait still in progress as back-pressured time */
    atomic_llong waiting_since_ns;
} sl_channel_t;

sl_channel_t *sl_channel_new(int nbufs, uint32_t buf_size, sl_waker_t *consumer);
void sl_channel_destroy(sl_channel_t *ch);
/* Producer: a free buffer with at least `need` bytes of capacity; blocks
 * while none is free.  NULL once the channel is canceled. */
sl_nbuf_t *sl_channel_acquire(sl_channel_t *ch, uint32_t need);
/* Producer: hands a filled buffer to the consumer. */
void sl_channel_send(sl_channel_t *ch, sl_nbuf_t *b);
/* Producer: sends len bytes (one event, e.g. an unaligned checkpoint
 * barrier) AHEAD of every queued buffer, without a credit, so it never
 * blocks.  When capture is not NULL, the bytes of the buffers it overtook
 * are appended to it, oldest first (an unaligned checkpoint's output
 * in-flight data).  Flushing the producer's partly filled buffer first is
 * the caller's job. */
void sl_channel_send_priority(sl_channel_t *ch, const void *data, uint32_t len, sl_buf_t *capture);
/* Consumer: the next full buffer, or NULL. */
sl_nbuf_t *sl_channel_poll(sl_channel_t *ch);
/* Consumer: gives a read buffer back (a credit for the producer). */
void sl_channel_recycle(sl_channel_t *ch, sl_nbuf_t *b);
/* Wakes and fails every blocked producer. */
void sl_channel_cancel(sl_channel_t *ch);
/* Buffers currently in flight (filled, not yet recycled). */
int sl_channel_in_flight(sl_channel_t *ch);

/* --- for the network data plane (taskmanager/net), any thread ---------- */
/* Installs (or, with NULLs, removes) the hooks above under the channel's
 * lock and returns the number of free buffers at that instant, so that a
 * remote consumer's initial credit and the recycles it counts afterwards
 * neither overlap nor leave a gap. */
int sl_channel_set_hooks(sl_channel_t *ch, void (*on_send)(void *), void (*on_recycle)(void *), void *ctx);
/* Consumer: like sl_channel_poll, but takes a data buffer only when
 * `has_credit`; a priority event at the head is always taken. */
sl_nbuf_t *sl_channel_poll_credited(sl_channel_t *ch, bool has_credit);
/* Producer: a free buffer of at least `need` bytes, or NULL at once when
 * none is free or the channel is canceled (never blocks). */
sl_nbuf_t *sl_channel_try_acquire(sl_channel_t *ch, uint32_t need);
/* Producer: queues a copy of one priority event BEHIND every queued buffer
 * (a remote priority event arrives in order on the receiving side); it
 * takes no credit and is freed on recycle. */
void sl_channel_send_inband(sl_channel_t *ch, const void *data, uint32_t len);
/* Producer: sl_channel_send of a chain of n buffers (linked by `next`,
 * head..tail, in order) under one lock, with one consumer wake-up. */
void sl_channel_send_many(sl_channel_t *ch, sl_nbuf_t *head, sl_nbuf_t *tail, int n);
/* Consumer: sl_channel_recycle of a chain of buffers (linked by `next`,
 * NULL-terminated) under one lock, with one producer wake-up; the
 * on_recycle hook still runs once per credit buffer. */
void sl_channel_recycle_many(sl_channel_t *ch, sl_nbuf_t *head);

#endif
