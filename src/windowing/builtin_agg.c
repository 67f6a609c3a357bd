/*
 * builtin_agg.c — the aggregate function of sl_window_agg: count / sum /
 * min / max / avg over a window, as SQL has them, without user callbacks.
 *
 * The list ("count(*), sum(amount) AS total, avg(amount)") is compiled when
 * the job is built into an ordinary sl_aggregate_fn_t whose accumulator is
 * one 16-byte slot per aggregate: the number of non-NULL inputs (i64) and
 * the running value (i64 for integer sums and integer/timestamp min/max,
 * double otherwise).  The accumulator has merge, so the window operator
 * slices sliding windows and merges sessions with it.  The result row is
 * the key's fields, window_start, window_end, then the aggregates.
 * The list is compiled by the builder (sl_window_agg in api/window_api.c);
 * this file is what runs in the window operator.
 */
#include <string.h>

#include "common/common.h"
#include "windowing/builtin_agg.h"

static int64_t slot_count(const uint8_t *a) { return (int64_t)sl_ld64(a); }

static void ba_init(void *ctx, void *acc) {
    const sl_builtin_agg_t *b = ctx;
    memset(acc, 0, (size_t)b->n * SL_AGG_SLOT);
}

static double in_f64(const sl_row_t *r, const sl_agg_item_t *it) {
    return it->in_type == SL_DOUBLE ? sl_row_f64(r, it->field)
           : it->in_type == SL_INT  ? (double)sl_row_i32(r, it->field)
                                    : (double)sl_row_i64(r, it->field);
}

static int64_t in_i64(const sl_row_t *r, const sl_agg_item_t *it) {
    return it->in_type == SL_INT ? (int64_t)sl_row_i32(r, it->field) : sl_row_i64(r, it->field);
}

/* Folds one value (or another slot: cnt > 1) into slot a. */
static void fold_i64(uint8_t *a, const sl_agg_item_t *it, int64_t cnt, int64_t v) {
    int64_t c = slot_count(a);
    int64_t cur = (int64_t)sl_ld64(a + 8);
    int64_t nv = v;
    if (c > 0) {
        if (it->kind == SL_AGG_SUM || it->kind == SL_AGG_AVG)
            nv = (int64_t)((uint64_t)cur + (uint64_t)v); /* wraps like Flink's BIGINT sum */
        else if (it->kind == SL_AGG_MIN)
            nv = v < cur ? v : cur;
        else if (it->kind == SL_AGG_MAX)
            nv = v > cur ? v : cur;
    }
    sl_st64(a, (uint64_t)(c + cnt));
    sl_st64(a + 8, (uint64_t)nv);
}

static void fold_f64(uint8_t *a, const sl_agg_item_t *it, int64_t cnt, double v) {
    int64_t c = slot_count(a);
    double cur;
    memcpy(&cur, a + 8, 8);
    double nv = v;
    if (c > 0) {
        if (it->kind == SL_AGG_SUM || it->kind == SL_AGG_AVG)
            nv = cur + v;
        else if (it->kind == SL_AGG_MIN)
            nv = v < cur ? v : cur;
        else if (it->kind == SL_AGG_MAX)
            nv = v > cur ? v : cur;
    }
    sl_st64(a, (uint64_t)(c + cnt));
    memcpy(a + 8, &nv, 8);
}

static int ba_add(void *ctx, void *acc, const sl_record_t *in) {
    const sl_builtin_agg_t *b = ctx;
    uint8_t *a = acc;
    for (int k = 0; k < b->n; k++, a += SL_AGG_SLOT) {
        const sl_agg_item_t *it = &b->items[k];
        if (it->kind == SL_AGG_COUNT_STAR) {
            sl_st64(a, (uint64_t)(slot_count(a) + 1));
            continue;
        }
        if (sl_row_is_null(&in->row, it->field)) continue;
        if (it->kind == SL_AGG_COUNT)
            sl_st64(a, (uint64_t)(slot_count(a) + 1));
        else if (it->fp)
            fold_f64(a, it, 1, in_f64(&in->row, it));
        else
            fold_i64(a, it, 1, in_i64(&in->row, it));
    }
    return 0;
}

static void ba_merge(void *ctx, void *acc, const void *other) {
    const sl_builtin_agg_t *b = ctx;
    uint8_t *a = acc;
    const uint8_t *o = other;
    for (int k = 0; k < b->n; k++, a += SL_AGG_SLOT, o += SL_AGG_SLOT) {
        const sl_agg_item_t *it = &b->items[k];
        int64_t oc = slot_count(o);
        if (oc == 0) continue;
        if (it->kind == SL_AGG_COUNT_STAR || it->kind == SL_AGG_COUNT) {
            sl_st64(a, (uint64_t)(slot_count(a) + oc));
        } else if (it->fp) {
            double v;
            memcpy(&v, o + 8, 8);
            fold_f64(a, it, oc, v);
        } else {
            fold_i64(a, it, oc, (int64_t)sl_ld64(o + 8));
        }
    }
}

static int ba_result(void *ctx, const void *acc, const uint8_t *key, uint32_t keylen, const sl_window_t *win,
                     sl_row_writer_t *out) {
    const sl_builtin_agg_t *b = ctx;
    if (b->nkeys > 0) {
        int rc = sl_key_decode_fields(&b->key, b->in, key, keylen, out, b->key_out);
        if (rc < 0) return rc;
    }
    sl_rw_set_i64(out, b->win_start, win->start);
    sl_rw_set_i64(out, b->win_end, win->end);
    const uint8_t *a = acc;
    for (int k = 0; k < b->n; k++, a += SL_AGG_SLOT) {
        const sl_agg_item_t *it = &b->items[k];
        int64_t c = slot_count(a);
        if (it->kind == SL_AGG_COUNT_STAR || it->kind == SL_AGG_COUNT) {
            sl_rw_set_i64(out, it->out, c);
            continue;
        }
        if (c == 0) {
            sl_rw_set_null(out, it->out);
            continue;
        }
        double d;
        memcpy(&d, a + 8, 8);
        int64_t v = (int64_t)sl_ld64(a + 8);
        if (it->kind == SL_AGG_AVG)
            sl_rw_set_f64(out, it->out, (it->fp ? d : (double)v) / (double)c);
        else if (it->fp)
            sl_rw_set_f64(out, it->out, d);
        else if (it->in_type == SL_INT && it->kind != SL_AGG_SUM)
            sl_rw_set_i32(out, it->out, (int32_t)v);
        else
            sl_rw_set_i64(out, it->out, v);
    }
    return 0;
}

sl_aggregate_fn_t sl_builtin_agg_fn(sl_builtin_agg_t *b) {
    return (sl_aggregate_fn_t){.acc_size = (uint32_t)(b->n * SL_AGG_SLOT),
                               .init = ba_init,
                               .add = ba_add,
                               .merge = ba_merge,
                               .result = ba_result,
                               .ctx = b};
}
