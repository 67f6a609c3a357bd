/* watermark_valve.c — see watermark_valve.h. */
#include "taskmanager/watermark_valve.h"

#include "common/common.h"
#include "sluice/sluice.h"

void sl_valve_init(sl_valve_t *v, int n, void (*on_wm)(void *, int64_t), void (*on_status)(void *, bool), void *ctx) {
    v->ch = sl_calloc((size_t)(n > 0 ? n : 1), sizeof *v->ch);
    v->n = n;
    for (int i = 0; i < n; i++) {
        v->ch[i].wm = SL_MIN_WATERMARK;
        v->ch[i].aligned = true;
    }
    v->out_wm = SL_MIN_WATERMARK;
    v->out_idle = false;
    v->on_watermark = on_wm;
    v->on_status = on_status;
    v->ctx = ctx;
}

void sl_valve_free(sl_valve_t *v) {
    sl_free(v->ch);
    v->ch = NULL;
}

static void output_min_aligned(sl_valve_t *v) {
    bool any = false;
    int64_t m = SL_MAX_WATERMARK;
    for (int i = 0; i < v->n; i++)
        if (v->ch[i].aligned && !v->ch[i].idle) {
            any = true;
            if (v->ch[i].wm < m) m = v->ch[i].wm;
        }
    if (any && m > v->out_wm) {
        v->out_wm = m;
        v->on_watermark(v->ctx, m);
    }
}

void sl_valve_watermark(sl_valve_t *v, int c, int64_t wm) {
    sl_valve_channel_t *ch = &v->ch[c];
    if (ch->idle || wm <= ch->wm) return; /* an idle channel's watermarks are ignored */
    ch->wm = wm;
    if (!ch->aligned && wm >= v->out_wm) ch->aligned = true;
    output_min_aligned(v);
}

void sl_valve_status(sl_valve_t *v, int c, bool idle) {
    sl_valve_channel_t *ch = &v->ch[c];
    if (idle == ch->idle) return;
    if (idle) {
        ch->idle = true;
        ch->aligned = false;
        bool all_idle = true;
        for (int i = 0; i < v->n; i++) all_idle = all_idle && v->ch[i].idle;
        if (all_idle) {
            int64_t m = SL_MIN_WATERMARK;
            for (int i = 0; i < v->n; i++)
                if (v->ch[i].wm > m) m = v->ch[i].wm;
            if (m > v->out_wm) {
                v->out_wm = m;
                v->on_watermark(v->ctx, m);
            }
            v->out_idle = true;
            v->on_status(v->ctx, true);
        } else {
            output_min_aligned(v);
        }
    } else {
        ch->idle = false;
        if (ch->wm >= v->out_wm) ch->aligned = true;
        if (v->out_idle) {
            v->out_idle = false;
            v->on_status(v->ctx, false);
        }
    }
}
