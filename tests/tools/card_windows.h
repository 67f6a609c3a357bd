/*
 * card_windows.h — the windowed shape the kill tests' jobs share (eo_job
 * --window, cluster_job.so): count and sum (in cents) per card and 1-minute
 * tumbling event-time window, as "card,start,n,cents" rows; the reference
 * is tests/window_output.h.
 */
#ifndef SL_TEST_CARD_WINDOWS_H
#define SL_TEST_CARD_WINDOWS_H

#include <string.h>

#include "sluice/sluice.h"

typedef struct cw_acc {
    int64_t n, cents;
} cw_acc_t;
static void cw_init(void *c, void *a) { memset(a, 0, sizeof(cw_acc_t)); }
static int cw_add(void *c, void *a, const sl_record_t *in) {
    cw_acc_t *x = a;
    x->n++;
    x->cents += (int64_t)(sl_row_f64(&in->row, 1) * 100 + 0.5);
    return 0;
}
static void cw_merge(void *c, void *a, const void *b) {
    ((cw_acc_t *)a)->n += ((const cw_acc_t *)b)->n;
    ((cw_acc_t *)a)->cents += ((const cw_acc_t *)b)->cents;
}
static int cw_result(void *c, const void *a, const uint8_t *key, uint32_t kl, const sl_window_t *w,
                     sl_row_writer_t *o) {
    const cw_acc_t *x = a;
    int64_t card;
    memcpy(&card, key, 8);
    sl_rw_set_i64(o, 0, card);
    sl_rw_set_i64(o, 1, w->start);
    sl_rw_set_i64(o, 2, x->n);
    sl_rw_set_i64(o, 3, x->cents);
    return 0;
}

/* The generator's options for these jobs (no late events: results do not
 * depend on timing). */
static inline sl_datagen_opts_t cw_generator(long long n, long long rate) {
    sl_datagen_opts_t g = sl_datagen_defaults();
    g.seed = 7;
    g.count = n;
    g.splits = 4;
    g.rate = rate;
    g.cards = 500;
    g.late_fraction = 0;
    g.max_disorder_ms = 2000; /* < the 5 s bound */
    g.ts_step_ms = 2;
    return g;
}

/* key_by(card_id) -> 1-minute tumbling windows -> count and cents. */
static inline sl_stream_t *cw_windows(sl_stream_t *s) {
    sl_aggregate_fn_t agg = {.acc_size = sizeof(cw_acc_t), .init = cw_init, .add = cw_add, .merge = cw_merge,
                             .result = cw_result};
    return sl_window_aggregate(sl_window(sl_key_by(s, "card_id"), sl_tumbling_event_time(60000, 0)), agg,
                               sl_schema_parse("card BIGINT NOT NULL, start BIGINT NOT NULL, n BIGINT NOT NULL, "
                                               "cents BIGINT NOT NULL",
                                               NULL, 0));
}

#endif
