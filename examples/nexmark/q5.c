/*
 * q5 — hot items: the auctions with the most bids in each 10 s window
 * sliding by 2 s.
 *
 *   SELECT AuctionBids.auction, AuctionBids.num FROM (
 *       SELECT auction, count(*) AS num, window_start, window_end
 *       FROM TABLE(HOP(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '2' SECOND, INTERVAL '10' SECOND))
 *       GROUP BY auction, window_start, window_end) AuctionBids
 *   JOIN (SELECT max(num) AS maxn, window_start, window_end FROM ... GROUP BY window_start, window_end) MaxBids
 *   ON AuctionBids.window_start = MaxBids.window_start AND ... AND AuctionBids.num >= MaxBids.maxn
 *
 * Bids keyed by auction into sliding windows counting bids; the counts
 * keyed by window end into a keyed process function that keeps the highest
 * count and the auctions that have it, and emits them when the watermark
 * passes the window (every count of the window has arrived by then: each
 * window task emits its results before it forwards the watermark).
 */
#include <string.h>

#include "queries.h"

static void q5_count_init(void *ctx, void *acc) { memset(acc, 0, sizeof(int64_t)); }

static int q5_count_add(void *ctx, void *acc, const sl_record_t *in) {
    ++*(int64_t *)acc;
    return 0;
}

/* Flink's AggregateFunction has merge too; with it sluice slices the
 * sliding windows (one pane per record instead of five windows). */
static void q5_count_merge(void *ctx, void *acc, const void *other) {
    int64_t a, b;
    memcpy(&a, acc, 8);
    memcpy(&b, other, 8);
    a += b;
    memcpy(acc, &a, 8);
}

static int q5_count_result(void *ctx, const void *acc, const uint8_t *key, uint32_t keylen, const sl_window_t *w,
                           sl_row_writer_t *out) {
    int64_t auction, n;
    memcpy(&auction, key, 8);
    memcpy(&n, acc, 8);
    sl_rw_set_i64(out, 0, auction);
    sl_rw_set_i64(out, 1, n);
    sl_rw_set_i64(out, 2, w->start);
    sl_rw_set_i64(out, 3, w->end);
    return 0;
}

typedef struct q5_ctx {
    nx_query_opts_t o;
    sl_state_t *max;  /* i64: the highest count of the window so far */
    sl_state_t *top;  /* i64 auction ids with that count */
} q5_ctx_t;
_Static_assert(sizeof(q5_ctx_t) <= NX_CTX_BYTES, "q5 context too large");

static int q5_open(void *ctx, sl_rt_t *rt) {
    q5_ctx_t *c = ctx;
    c->max = sl_state_value(rt, "max-count");
    c->top = sl_state_list(rt, "top-auctions");
    return c->max && c->top ? 0 : SL_EINVAL;
}

static int q5_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    q5_ctx_t *c = ctx;
    int64_t auction = sl_row_i64(&in->row, 0), n = sl_row_i64(&in->row, 1), end = sl_row_i64(&in->row, 3);
    uint32_t len;
    const int64_t *max = sl_value_get(c->max, &len);
    if (!max) sl_timer_event(pc, end - 1);
    if (!max || n > *max) {
        sl_state_clear(c->top);
        int rc = sl_value_put(c->max, &n, sizeof n);
        if (rc < 0) return rc;
    } else if (n < *max) {
        return 0;
    }
    return sl_list_add(c->top, &auction, sizeof auction);
}

typedef struct q5_emit {
    sl_collector_t *out;
    int64_t n, start, end;
} q5_emit_t;

static void q5_emit_one(void *arg, const void *v, uint32_t len) {
    q5_emit_t *e = arg;
    int64_t auction;
    memcpy(&auction, v, 8);
    sl_row_writer_t *w = sl_out_row(e->out);
    sl_rw_set_i64(w, 0, auction);
    sl_rw_set_i64(w, 1, e->n);
    sl_rw_set_i64(w, 2, e->start);
    sl_rw_set_i64(w, 3, e->end);
    sl_emit(e->out);
}

static int q5_on_timer(void *ctx, sl_pctx_t *pc, int64_t ts, sl_time_domain_t d, sl_collector_t *out) {
    q5_ctx_t *c = ctx;
    uint32_t len;
    const int64_t *max = sl_value_get(c->max, &len);
    if (!max) return 0;
    q5_emit_t e = {out, *max, ts + 1 - c->o.window_ms, ts + 1};
    sl_list_foreach(c->top, q5_emit_one, &e);
    sl_state_clear(c->top);
    sl_state_clear(c->max);
    return 0;
}

sl_stream_t *nx_q5(sl_stream_t *events, const nx_query_opts_t *o) {
    sl_stream_t *bids = sl_name(sl_filter(events, nx_is_bid, NULL), "bids");
    sl_windowed_t *w = sl_window(sl_key_by(bids, "bid_auction"), sl_sliding_event_time(o->window_ms, o->slide_ms, 0));
    sl_aggregate_fn_t count = {
        .acc_size = sizeof(int64_t), .init = q5_count_init, .add = q5_count_add, .merge = q5_count_merge, .result = q5_count_result};
    sl_stream_t *counts = sl_window_aggregate(
        w, count,
        sl_schema_parse("auction BIGINT NOT NULL, num BIGINT NOT NULL, window_start TIMESTAMP(3) NOT NULL, "
                        "window_end TIMESTAMP(3) NOT NULL",
                        NULL, 0));
    counts = sl_uid(sl_name(counts, "q5 bids per auction"), "q5-counts");
    sl_process_fn_t top = {
        .open = q5_open,
        .process = q5_process,
        .on_timer = q5_on_timer,
        .opts = {(void *)o, nx_ctx_clone, nx_ctx_free},
    };
    sl_stream_t *hot = sl_keyed_process(
        sl_key_by(counts, "window_end"), top,
        sl_schema_parse("auction BIGINT NOT NULL, num BIGINT NOT NULL, window_start TIMESTAMP(3) NOT NULL, "
                        "window_end TIMESTAMP(3) NOT NULL",
                        NULL, 0));
    return sl_uid(sl_name(hot, "q5"), "q5-hot-items");
}
