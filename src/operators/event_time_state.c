/*
 * event_time_state.c — an operator's event-time progress in checkpoints
 * (see sl_op_snapshot_time in operator.h).
 *
 *   u8 version (1), i64 wm, i64 in_wm[0], i64 in_wm[1], then the
 *   operator's own part (vt->snapshot_time), all little-endian.
 */
#include "common/common.h"
#include "operators/operator.h"

#define TIME_VERSION 1
#define TIME_HEADER (1 + 3 * 8)

void sl_op_snapshot_time(sl_operator_t *op, sl_buf_t *out) {
    uint8_t h[TIME_HEADER];
    h[0] = TIME_VERSION;
    sl_st64(h + 1, (uint64_t)op->wm);
    sl_st64(h + 9, (uint64_t)op->in_wm[0]);
    sl_st64(h + 17, (uint64_t)op->in_wm[1]);
    sl_buf_append(out, h, sizeof h);
    if (op->vt->snapshot_time) op->vt->snapshot_time(op, out);
}

int sl_op_restore_time(sl_operator_t *op, const uint8_t *const *blobs, const size_t *lens, int n, bool exact) {
    int64_t wm = SL_MAX_WATERMARK, in0 = SL_MAX_WATERMARK, in1 = SL_MAX_WATERMARK;
    int used = 0;
    for (int i = 0; i < n; i++) {
        if (!blobs[i]) continue;
        if (lens[i] < TIME_HEADER || blobs[i][0] != TIME_VERSION) return SL_EFORMAT;
        wm = SL_MIN(wm, (int64_t)sl_ld64(blobs[i] + 1));
        in0 = SL_MIN(in0, (int64_t)sl_ld64(blobs[i] + 9));
        in1 = SL_MIN(in1, (int64_t)sl_ld64(blobs[i] + 17));
        used++;
    }
    if (!used) return 0;
    op->wm = wm;
    op->in_wm[0] = in0;
    op->in_wm[1] = in1;
    if (exact && n == 1 && blobs[0] && op->vt->restore_time)
        op->vt->restore_time(op, blobs[0] + TIME_HEADER, lens[0] - TIME_HEADER);
    return 0;
}
