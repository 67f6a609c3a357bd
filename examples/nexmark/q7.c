/*
 * q7 — highest bid: in each 10 s tumbling window, the bids with the
 * highest price.
 *
 *   SELECT B.auction, B.price, B.bidder, B.dateTime FROM bid B
 *   JOIN (SELECT MAX(price) AS maxprice, window_end AS dateTime
 *         FROM TABLE(TUMBLE(TABLE bid, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
 *         GROUP BY window_start, window_end) B1
 *   ON B.price = B1.maxprice WHERE B.dateTime BETWEEN B1.dateTime - INTERVAL '10' SECOND AND B1.dateTime
 *
 * (windows are half-open [start, end) here.)  Two steps, so the work is
 * parallel: bids keyed by auction into tumbling windows whose aggregate
 * keeps the auction's highest price and the bids (bidder, dateTime) that
 * have it; then the per-auction results keyed by window end into a keyed
 * process function that keeps the window's highest price and its bids and
 * emits them when the watermark passes the window.  The aggregate's
 * accumulator has a fixed size: more than Q7_MAX_TIES bids at the same
 * highest price for one auction in one window fail the job (with these
 * prices — log-uniform over 10^8 cents — that does not happen).
 */
#include <stdio.h>
#include <string.h>

#include "queries.h"

#define Q7_MAX_TIES 4

typedef struct q7_acc {
    int64_t max_price; /* -1: empty */
    int32_t n, overflow;
    int64_t bidder[Q7_MAX_TIES], ts[Q7_MAX_TIES];
} q7_acc_t;

static void q7_init(void *ctx, void *acc) {
    q7_acc_t *a = acc;
    memset(a, 0, sizeof *a);
    a->max_price = -1;
}

static int q7_add(void *ctx, void *acc, const sl_record_t *in) {
    q7_acc_t *a = acc;
    int64_t price = sl_row_i64(&in->row, SL_NXF_BID_PRICE);
    if (price < a->max_price) return 0;
    if (price > a->max_price) {
        a->max_price = price;
        a->n = 0;
    }
    if (a->n == Q7_MAX_TIES) {
        a->overflow = 1;
        return 0;
    }
    a->bidder[a->n] = sl_row_i64(&in->row, SL_NXF_BID_BIDDER);
    a->ts[a->n] = sl_row_i64(&in->row, SL_NXF_DATE_TIME);
    a->n++;
    return 0;
}

static int q7_result(void *ctx, const void *acc, const uint8_t *key, uint32_t keylen, const sl_window_t *w,
                     sl_row_writer_t *out) {
    const q7_acc_t *a = acc;
    int64_t auction;
    memcpy(&auction, key, 8);
    if (a->overflow) {
        fprintf(stderr, "q7: more than %d bids on auction %lld share its highest price in window [%lld, %lld)\n",
                Q7_MAX_TIES, (long long)auction, (long long)w->start, (long long)w->end);
        return SL_EUSER;
    }
    int64_t ties[2 * Q7_MAX_TIES];
    for (int i = 0; i < a->n; i++) {
        ties[2 * i] = a->bidder[i];
        ties[2 * i + 1] = a->ts[i];
    }
    sl_rw_set_i64(out, 0, auction);
    sl_rw_set_i64(out, 1, a->max_price);
    sl_rw_set_i64(out, 2, w->end);
    sl_rw_set_bytes(out, 3, ties, (uint32_t)(a->n * 16));
    return 0;
}

typedef struct q7_ctx {
    nx_query_opts_t o;
    sl_state_t *max; /* i64 */
    sl_state_t *top; /* {auction, bidder, ts} */
} q7_ctx_t;
_Static_assert(sizeof(q7_ctx_t) <= NX_CTX_BYTES, "q7 context too large");

static int q7_open(void *ctx, sl_rt_t *rt) {
    q7_ctx_t *c = ctx;
    c->max = sl_state_value(rt, "max-price");
    c->top = sl_state_list(rt, "top-bids");
    return c->max && c->top ? 0 : SL_EINVAL;
}

static int q7_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    q7_ctx_t *c = ctx;
    int64_t auction = sl_row_i64(&in->row, 0), price = sl_row_i64(&in->row, 1), end = sl_row_i64(&in->row, 2);
    uint32_t len, tlen;
    const int64_t *max = sl_value_get(c->max, &len);
    if (!max) sl_timer_event(pc, end - 1);
    if (!max || price > *max) {
        sl_state_clear(c->top);
        int rc = sl_value_put(c->max, &price, sizeof price);
        if (rc < 0) return rc;
    } else if (price < *max) {
        return 0;
    }
    const uint8_t *ties = sl_row_bytes(&in->row, 3, &tlen);
    for (uint32_t i = 0; i + 16 <= tlen; i += 16) {
        int64_t e[3] = {auction, 0, 0};
        memcpy(&e[1], ties + i, 16);
        int rc = sl_list_add(c->top, e, sizeof e);
        if (rc < 0) return rc;
    }
    return 0;
}

typedef struct q7_emit {
    sl_collector_t *out;
    int64_t price;
} q7_emit_t;

static void q7_emit_one(void *arg, const void *v, uint32_t len) {
    q7_emit_t *e = arg;
    int64_t b[3];
    memcpy(b, v, sizeof b);
    sl_row_writer_t *w = sl_out_row(e->out);
    sl_rw_set_i64(w, 0, b[0]);
    sl_rw_set_i64(w, 1, e->price);
    sl_rw_set_i64(w, 2, b[1]);
    sl_rw_set_i64(w, 3, b[2]);
    sl_emit(e->out);
}

static int q7_on_timer(void *ctx, sl_pctx_t *pc, int64_t ts, sl_time_domain_t d, sl_collector_t *out) {
    q7_ctx_t *c = ctx;
    uint32_t len;
    const int64_t *max = sl_value_get(c->max, &len);
    if (!max) return 0;
    q7_emit_t e = {out, *max};
    sl_list_foreach(c->top, q7_emit_one, &e);
    sl_state_clear(c->top);
    sl_state_clear(c->max);
    return 0;
}

sl_stream_t *nx_q7(sl_stream_t *events, const nx_query_opts_t *o) {
    sl_stream_t *bids = sl_name(sl_filter(events, nx_is_bid, NULL), "bids");
    sl_windowed_t *w = sl_window(sl_key_by(bids, "bid_auction"), sl_tumbling_event_time(o->window_ms, 0));
    sl_aggregate_fn_t highest = {
        .acc_size = sizeof(q7_acc_t), .init = q7_init, .add = q7_add, .result = q7_result};
    sl_stream_t *per_auction = sl_window_aggregate(
        w, highest,
        sl_schema_parse("auction BIGINT NOT NULL, price BIGINT NOT NULL, window_end TIMESTAMP(3) NOT NULL, "
                        "bids BYTES NOT NULL",
                        NULL, 0));
    per_auction = sl_uid(sl_name(per_auction, "q7 highest bid per auction"), "q7-per-auction");
    sl_process_fn_t top = {
        .open = q7_open,
        .process = q7_process,
        .on_timer = q7_on_timer,
        .opts = {(void *)o, nx_ctx_clone, nx_ctx_free},
    };
    sl_stream_t *best = sl_keyed_process(
        sl_key_by(per_auction, "window_end"), top,
        sl_schema_parse("auction BIGINT NOT NULL, price BIGINT NOT NULL, bidder BIGINT NOT NULL, "
                        "date_time TIMESTAMP(3) NOT NULL",
                        NULL, 0));
    return sl_uid(sl_name(best, "q7"), "q7-highest-bid");
}
