/*
 * window_join.c — window join and co-group of two keyed streams (Flink's
 * DataStream.join(..).where(..).equalTo(..).window(..).apply(..) and
 * coGroup(..)).
 *
 * Built the way Flink builds it (CoGroupedStreams): each input goes through
 * a map that wraps its rows into one tagged schema
 *     k BYTES (the row's key bytes), side INT (0 left, 1 right), row BYTES
 * (the original row image), the two tagged streams are united and keyed by
 * k, and one window operator (src/windowing/, with a process-window
 * function, so the window's elements are kept in its list state) collects
 * both sides.  When a window fires, the function below splits its elements
 * by side and calls the user's co-group function once, or the join
 * function for every (left, right) pair.  So windows, triggers, lateness,
 * merging of session windows, checkpoints and restores are the window
 * operator's, unchanged; every assigner works (event and processing time).
 *
 * This file is what runs (the tagging map and the window function); the
 * builder (sl_window_join ...) is api/join_api.c.
 */
#include <stdio.h>
#include <string.h>

#include "common/common.h"
#include "joins/join_int.h"
#include "windowing/window.h"

enum { WJ_F_KEY = 0, WJ_F_SIDE = 1, WJ_F_ROW = 2 };

typedef sl_window_join_tag_t wj_tag_t;
typedef sl_window_join_spec_t wj_spec_t;

int sl_window_join_tag_row(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    const wj_tag_t *t = ctx;
    uint8_t buf[SL_MAX_KEY_LEN];
    const uint8_t *key;
    uint32_t klen;
    int rc = sl_key_extract(&t->key, &in->row, buf, &key, &klen);
    if (rc < 0) return rc;
    sl_rw_set_bytes(out, WJ_F_KEY, key, klen);
    sl_rw_set_i32(out, WJ_F_SIDE, t->side);
    sl_rw_set_bytes(out, WJ_F_ROW, in->row.data, in->row.len);
    return 0;
}

typedef struct wj_sides {
    sl_record_t *v[2];
    int n[2], cap[2];
} wj_sides_t;

static void sides_free(wj_sides_t *s) {
    sl_free(s->v[0]);
    sl_free(s->v[1]);
}

int sl_window_join_window_fn(void *ctx, const uint8_t *key, uint32_t keylen, const sl_window_t *win,
                             const sl_window_elements_t *elems, sl_collector_t *out) {
    const wj_spec_t *s = ctx;
    wj_sides_t sd = {0};
    int n = sl_window_elements_count(elems);
    for (int i = 0; i < n; i++) {
        sl_record_t e = sl_window_elements_get(elems, i);
        int side = sl_row_i32(&e.row, WJ_F_SIDE);
        if (side != 0 && side != 1) {
            sides_free(&sd);
            return SL_EFORMAT;
        }
        uint32_t len;
        const uint8_t *p = sl_row_bytes(&e.row, WJ_F_ROW, &len);
        if (sd.n[side] == sd.cap[side]) {
            sd.cap[side] = sd.cap[side] ? 2 * sd.cap[side] : 16;
            sd.v[side] = sl_realloc(sd.v[side], (size_t)sd.cap[side] * sizeof *sd.v[side]);
        }
        sd.v[side][sd.n[side]++] = (sl_record_t){{p, len, s->schema[side]}, e.ts};
    }
    int rc = 0;
    int64_t ts = sl_window_max_ts(win);
    if (s->cogroup) {
        sl_collector_reset(out, ts);
        rc = s->cogroup_fn(s->ctx, key, keylen, win, sd.v[0], sd.n[0], sd.v[1], sd.n[1], out);
    } else {
        for (int i = 0; i < sd.n[0] && rc >= 0; i++)
            for (int j = 0; j < sd.n[1] && rc >= 0; j++) {
                sl_collector_reset(out, ts);
                rc = s->join(s->ctx, key, keylen, win, &sd.v[0][i], &sd.v[1][j], out);
            }
    }
    sides_free(&sd);
    return rc < 0 ? rc : 0;
}
