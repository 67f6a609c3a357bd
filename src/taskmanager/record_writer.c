/* record_writer.c — partitioning and serialization into channels. */
#include "taskmanager/record_writer.h"

#include "common/common.h"
#include "checkpoint/ckpt_config.h"
#include "state/key_group.h"

sl_record_writer_t *sl_record_writer_new(sl_plan_part_t part, const sl_key_selector_t *key, int maxp,
                                         sl_channel_t **ch, int nch, int start_rr) {
    sl_record_writer_t *w = sl_calloc(1, sizeof *w);
    w->part = part;
    if (key) w->key = *key;
    w->max_parallelism = maxp;
    w->nch = nch;
    w->ch = sl_calloc((size_t)nch, sizeof *w->ch);
    memcpy(w->ch, ch, (size_t)nch * sizeof *ch);
    w->cur = sl_calloc((size_t)nch, sizeof *w->cur);
    w->dst = sl_calloc((size_t)(nch ? nch : 1), sizeof *w->dst);
    w->rr = nch ? start_rr % nch : 0;
    return w;
}

void sl_record_writer_destroy(sl_record_writer_t *w) {
    if (!w) return;
    for (int i = 0; i < w->nch; i++)
        if (w->cur[i]) { /* never sent: give the credit back */
            sl_channel_recycle(w->ch[i], w->cur[i]);
        }
    sl_free(w->cur);
    sl_free(w->ch);
    sl_free(w->dst);
    sl_free(w);
}

int sl_partition_select(sl_plan_part_t part, const sl_key_selector_t *key, int maxp, int nch,
                        const sl_row_t *row, int *rr, uint8_t *keybuf) {
    switch (part) {
    case SL_PLAN_HASH: {
        const uint8_t *k;
        uint32_t len;
        int rc = sl_key_extract(key, row, keybuf, &k, &len);
        if (rc < 0) return rc;
        int kg = sl_kg_of_hash(sl_kg_key_hash(k, len), maxp);
        return sl_kg_operator_index(kg, maxp, nch);
    }
    case SL_PLAN_BROADCAST:
        return -1;
    case SL_PLAN_FORWARD:
        return 0;
    default: { /* rebalance, rescale (over this subtask's targets), default */
        int c = *rr;
        *rr = c + 1 == nch ? 0 : c + 1;
        return c;
    }
    }
}

/* Makes room for `need` bytes in channel c's current buffer. */
static inline uint8_t *reserve(sl_record_writer_t *w, int c, uint32_t need) {
    sl_nbuf_t *b = w->cur[c];
    if (SL_LIKELY(b && b->len + need <= b->cap)) return b->data + b->len;
    if (b) {
        w->bytes += b->len;
        sl_channel_send(w->ch[c], b);
        w->cur[c] = NULL;
    }
    b = sl_channel_acquire(w->ch[c], need);
    if (!b) {
        w->canceled = true;
        return NULL;
    }
    w->cur[c] = b;
    return b->data;
}

static inline void put_record(sl_record_writer_t *w, int c, const sl_record_t *rec) {
    uint32_t need = SL_REC_HEADER + rec->row.len;
    uint8_t *p = reserve(w, c, need);
    if (SL_UNLIKELY(!p)) return;
    p[0] = SL_EL_RECORD;
    sl_st64(p + 1, (uint64_t)rec->ts);
    sl_st32(p + 9, rec->row.len);
    memcpy(p + SL_REC_HEADER, rec->row.data, rec->row.len);
    w->cur[c]->len += need;
}

int sl_record_writer_emit(sl_record_writer_t *w, const sl_record_t *rec) {
    if (SL_UNLIKELY(w->canceled)) return SL_ECANCELED;
    w->records++;
    int c = sl_partition_select(w->part, &w->key, w->max_parallelism, w->nch, &rec->row, &w->rr, w->keybuf);
    if (SL_UNLIKELY(c < -1)) return c;
    if (c == -1) {
        for (int i = 0; i < w->nch; i++) put_record(w, i, rec);
    } else {
        put_record(w, c, rec);
    }
    return w->canceled ? SL_ECANCELED : 0;
}

static void put_all(sl_record_writer_t *w, const uint8_t *el, uint32_t n) {
    for (int i = 0; i < w->nch && !w->canceled; i++) {
        uint8_t *p = reserve(w, i, n);
        if (!p) return;
        memcpy(p, el, n);
        w->cur[i]->len += n;
    }
}

void sl_record_writer_watermark(sl_record_writer_t *w, int64_t wm) {
    uint8_t el[9];
    el[0] = SL_EL_WATERMARK;
    sl_st64(el + 1, (uint64_t)wm);
    put_all(w, el, 9);
}

void sl_record_writer_status(sl_record_writer_t *w, bool idle) {
    uint8_t el[2] = {SL_EL_STATUS, idle ? 1 : 0};
    put_all(w, el, 2);
}

void sl_record_writer_flush(sl_record_writer_t *w) {
    for (int i = 0; i < w->nch; i++)
        if (w->cur[i] && w->cur[i]->len) {
            w->bytes += w->cur[i]->len;
            sl_channel_send(w->ch[i], w->cur[i]);
            w->cur[i] = NULL;
        }
}

void sl_record_writer_end_of_data(sl_record_writer_t *w) {
    uint8_t el = SL_EL_END_OF_DATA;
    put_all(w, &el, 1);
    sl_record_writer_flush(w);
}

void sl_record_writer_end(sl_record_writer_t *w) {
    uint8_t el = SL_EL_END;
    put_all(w, &el, 1);
    sl_record_writer_flush(w);
}

void sl_record_writer_barrier(sl_record_writer_t *w, int64_t id, int64_t ts, int kind) {
    uint8_t el[SL_BARRIER_LEN];
    el[0] = SL_EL_BARRIER;
    sl_st64(el + 1, (uint64_t)id);
    sl_st64(el + 9, (uint64_t)ts);
    el[17] = (uint8_t)kind;
    put_all(w, el, SL_BARRIER_LEN);
    sl_record_writer_flush(w);
}

void sl_record_writer_barrier_priority(sl_record_writer_t *w, int64_t id, int64_t ts, sl_buf_t *captures) {
    uint8_t el[SL_BARRIER_LEN];
    el[0] = SL_EL_BARRIER;
    sl_st64(el + 1, (uint64_t)id);
    sl_st64(el + 9, (uint64_t)ts);
    el[17] = SL_SNAP_CHECKPOINT; /* only checkpoints overtake: savepoints are aligned */
    sl_record_writer_flush(w); /* the records before the barrier are in-flight data too */
    for (int i = 0; i < w->nch; i++) sl_channel_send_priority(w->ch[i], el, SL_BARRIER_LEN, &captures[i]);
    w->bytes += (int64_t)w->nch * SL_BARRIER_LEN;
}
