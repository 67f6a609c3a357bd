/*
 * record_writer.h — the producing end of one job edge in one subtask
 * (Flink's RecordWriter + ChannelSelector): picks the channel(s) of each
 * record with the edge's partitioner and serializes it into that channel's
 * current buffer.  A full buffer is sent; an empty channel credit blocks
 * (backpressure).  flush() sends partly filled buffers (the task calls it
 * when it runs out of input, so latency stays low at low rates while
 * buffers fill up under load).
 */
#ifndef SL_RECORD_WRITER_H
#define SL_RECORD_WRITER_H

#include "operators/operator.h"
#include "plan/plan.h"
#include "taskmanager/channel.h"

/* Where channel i of a writer leads: the consumer's task (vertex, subtask)
 * and the channel's place in its input gate (for in-flight data). */
typedef struct sl_rw_dst {
    int vertex, subtask, gate, index;
} sl_rw_dst_t;

typedef struct sl_record_writer {
    sl_plan_part_t part;
    sl_rw_dst_t *dst;    /* per channel; set by the executor */
    sl_key_selector_t key;
    int max_parallelism;
    int nch;
    sl_channel_t **ch;   /* indexed by downstream subtask (hash) or target order */
    sl_nbuf_t **cur;
    int rr;
    bool canceled;
    int64_t records;
    int64_t bytes;       /* handed to its channels (numBytesOut); the task's thread */
    uint8_t keybuf[SL_MAX_KEY_LEN];
} sl_record_writer_t;

sl_record_writer_t *sl_record_writer_new(sl_plan_part_t part, const sl_key_selector_t *key, int maxp,
                                         sl_channel_t **ch, int nch, int start_rr);
void sl_record_writer_destroy(sl_record_writer_t *w);
/* Returns 0, or < 0 when the key selector failed or the job was canceled. */
int sl_record_writer_emit(sl_record_writer_t *w, const sl_record_t *rec);
void sl_record_writer_watermark(sl_record_writer_t *w, int64_t wm);
void sl_record_writer_status(sl_record_writer_t *w, bool idle);
/* Broadcasts barrier `id` (of a checkpoint or savepoint, `kind`) and flushes every channel (a barrier
 * must never wait in a partly filled buffer while the producer blocks on
 * another channel). */
void sl_record_writer_barrier(sl_record_writer_t *w, int64_t id, int64_t ts, int kind);
/* Unaligned: sends barrier `id` on every channel AHEAD of the queued
 * buffers (after flushing the partly filled one) and appends to
 * captures[i] the bytes it overtook on channel i. */
void sl_record_writer_barrier_priority(sl_record_writer_t *w, int64_t id, int64_t ts, sl_buf_t *captures);
/* Sends the end-of-data marker on every channel (and flushes): no record
 * or watermark follows; barriers and the end of partition still do. */
void sl_record_writer_end_of_data(sl_record_writer_t *w);
/* Sends the end-of-partition marker on every channel (and flushes). */
void sl_record_writer_end(sl_record_writer_t *w);
void sl_record_writer_flush(sl_record_writer_t *w);

/* The partitioner alone (for tests): the channel for a record, or -1 for
 * "all channels" (broadcast).  *rr is the round-robin cursor. */
int sl_partition_select(sl_plan_part_t part, const sl_key_selector_t *key, int maxp, int nch,
                        const sl_row_t *row, int *rr, uint8_t *keybuf);

#endif
