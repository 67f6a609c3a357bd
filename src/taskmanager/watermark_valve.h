/*
 * watermark_valve.h — combines the watermarks and idleness of several input
 * channels into one (Flink's StatusWatermarkValve).
 *
 * The output watermark is the minimum over the channels that are active and
 * "aligned" (an active channel whose watermark is not behind the output).
 * An idle channel is left out; when every channel is idle the valve emits
 * the maximum watermark seen across all channels and then goes idle.  A
 * channel that becomes active again rejoins the minimum only once its
 * watermark has caught up with the output, so the output never decreases.
 * Used by input gates (per channel) and by sources (per split).
 */
#ifndef SL_WATERMARK_VALVE_H
#define SL_WATERMARK_VALVE_H

#include <stdbool.h>
#include <stdint.h>

typedef struct sl_valve_channel {
    int64_t wm;
    bool idle;
    bool aligned;
} sl_valve_channel_t;

typedef struct sl_valve {
    sl_valve_channel_t *ch;
    int n;
    int64_t out_wm;
    bool out_idle;
    void (*on_watermark)(void *ctx, int64_t wm);
    void (*on_status)(void *ctx, bool idle);
    void *ctx;
} sl_valve_t;

void sl_valve_init(sl_valve_t *v, int nchannels, void (*on_wm)(void *, int64_t), void (*on_status)(void *, bool),
                   void *ctx);
void sl_valve_free(sl_valve_t *v);
void sl_valve_watermark(sl_valve_t *v, int ch, int64_t wm);
void sl_valve_status(sl_valve_t *v, int ch, bool idle);

#endif
