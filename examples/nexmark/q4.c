/*
 * q4 — average closing price per category.
 *
 *   SELECT Q.category, AVG(Q.final) FROM (
 *       SELECT MAX(B.price) AS final, A.category FROM auction A, bid B
 *       WHERE A.id = B.auction AND B.dateTime BETWEEN A.dateTime AND A.expires
 *       GROUP BY A.id, A.category) Q
 *   GROUP BY Q.category
 *
 * Written as Flink's DataStream version would be: auctions and bids keyed
 * by auction id into one keyed process function that keeps the auction and
 * the highest qualifying bid, and closes the auction with an event-time
 * timer at its expiry (then every bid with dateTime <= expires has arrived:
 * the watermark passed it); a closed auction with at least one bid gives
 * (auction, category, final).  A second keyed process function keeps per
 * category the sum and count of finals and emits the running average.
 *
 * Bids can arrive before their auction (ids lead by up to 10 auctions, and
 * splits are read in parallel): they wait in list state, each with a timer
 * at its own dateTime, after which no auction they could belong to can
 * still come.  A closed auction stays as a tombstone for q4_retention_ms
 * so that its late bids are dropped at once instead of waiting.
 */
#include <stdlib.h>
#include <string.h>

#include "queries.h"

typedef struct q4_auction {
    int64_t date_time, expires, category, max_price; /* max_price -1: no bid yet */
    int64_t closed;
} q4_auction_t;

typedef struct q4_early {
    int64_t ts, price;
} q4_early_t;

typedef struct q4_ctx {
    nx_query_opts_t o;
    sl_state_t *auction;
    sl_state_t *early;
    /* during a list walk */
    q4_auction_t *fold;
    q4_early_t *keep;
    int nkeep, capkeep;
    int64_t upto;
} q4_ctx_t;
_Static_assert(sizeof(q4_ctx_t) <= NX_CTX_BYTES, "q4 context too large");

static int q4_auction_or_bid(void *ctx, const sl_record_t *in) {
    int t = sl_row_i32(&in->row, SL_NXF_EVENT_TYPE);
    return t == SL_NX_AUCTION || t == SL_NX_BID;
}

static int q4_auction_key(void *ctx, const sl_row_t *row, uint8_t *key, int cap) {
    int64_t id = sl_row_i32(row, SL_NXF_EVENT_TYPE) == SL_NX_AUCTION ? sl_row_i64(row, SL_NXF_AUCTION_ID)
                                                                     : sl_row_i64(row, SL_NXF_BID_AUCTION);
    memcpy(key, &id, 8);
    return 8;
}

static int q4_open(void *ctx, sl_rt_t *rt) {
    q4_ctx_t *c = ctx;
    c->auction = sl_state_value(rt, "auction");
    c->early = sl_state_list(rt, "early-bids");
    return c->auction && c->early ? 0 : SL_EINVAL;
}

static void q4_close(void *ctx) {
    q4_ctx_t *c = ctx;
    free(c->keep);
    c->keep = NULL;
}

static void q4_fold_early(void *arg, const void *v, uint32_t len) {
    q4_auction_t *a = arg;
    q4_early_t e;
    memcpy(&e, v, sizeof e);
    if (e.ts >= a->date_time && e.ts <= a->expires && e.price > a->max_price) a->max_price = e.price;
}

static void q4_keep_later(void *arg, const void *v, uint32_t len) {
    q4_ctx_t *c = arg;
    q4_early_t e;
    memcpy(&e, v, sizeof e);
    if (e.ts <= c->upto) return;
    if (c->nkeep == c->capkeep) {
        c->capkeep = c->capkeep ? 2 * c->capkeep : 16;
        c->keep = realloc(c->keep, (size_t)c->capkeep * sizeof *c->keep);
    }
    c->keep[c->nkeep++] = e;
}

static int q4_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    q4_ctx_t *c = ctx;
    const sl_row_t *r = &in->row;
    uint32_t len;
    if (sl_row_i32(r, SL_NXF_EVENT_TYPE) == SL_NX_AUCTION) {
        q4_auction_t a = {sl_row_i64(r, SL_NXF_DATE_TIME), sl_row_i64(r, SL_NXF_AUCTION_EXPIRES),
                          sl_row_i64(r, SL_NXF_AUCTION_CATEGORY), -1, 0};
        if (sl_list_foreach(c->early, q4_fold_early, &a) > 0) sl_state_clear(c->early);
        sl_timer_event(pc, a.expires);
        return sl_value_put(c->auction, &a, sizeof a);
    }
    int64_t ts = sl_row_i64(r, SL_NXF_DATE_TIME), price = sl_row_i64(r, SL_NXF_BID_PRICE);
    const q4_auction_t *cur = sl_value_get(c->auction, &len);
    if (cur) {
        if (!cur->closed && ts >= cur->date_time && ts <= cur->expires && price > cur->max_price) {
            q4_auction_t a = *cur;
            a.max_price = price;
            return sl_value_put(c->auction, &a, sizeof a);
        }
        return 0; /* outside the auction, or after it closed */
    }
    q4_early_t e = {ts, price};
    sl_timer_event(pc, ts);
    return sl_list_add(c->early, &e, sizeof e);
}

static int q4_on_timer(void *ctx, sl_pctx_t *pc, int64_t ts, sl_time_domain_t d, sl_collector_t *out) {
    q4_ctx_t *c = ctx;
    uint32_t len;
    const q4_auction_t *cur = sl_value_get(c->auction, &len);
    if (cur) {
        q4_auction_t a = *cur;
        if (!a.closed && ts >= a.expires) {
            if (a.max_price >= 0) {
                uint32_t klen;
                int64_t id;
                memcpy(&id, sl_pctx_key(pc, &klen), 8);
                sl_row_writer_t *w = sl_out_row(out);
                sl_rw_set_i64(w, 0, id);
                sl_rw_set_i64(w, 1, a.category);
                sl_rw_set_i64(w, 2, a.max_price);
                sl_emit(out);
            }
            a.closed = 1;
            sl_timer_event(pc, a.expires + c->o.q4_retention_ms);
            return sl_value_put(c->auction, &a, sizeof a);
        }
        if (a.closed && ts >= a.expires + c->o.q4_retention_ms) sl_state_clear(c->auction);
        return 0;
    }
    /* No auction: drop the early bids no auction can claim any more. */
    c->nkeep = 0;
    c->upto = ts;
    int n = sl_list_foreach(c->early, q4_keep_later, c);
    if (n > 0 && c->nkeep < n) {
        sl_state_clear(c->early);
        for (int i = 0; i < c->nkeep; i++) {
            int rc = sl_list_add(c->early, &c->keep[i], sizeof c->keep[i]);
            if (rc < 0) return rc;
        }
    }
    return 0;
}

typedef struct q4_avg {
    int64_t sum, count;
} q4_avg_t;

typedef struct q4_avg_ctx {
    nx_query_opts_t o;
    sl_state_t *acc;
} q4_avg_ctx_t;
_Static_assert(sizeof(q4_avg_ctx_t) <= NX_CTX_BYTES, "q4 context too large");

static int q4_avg_open(void *ctx, sl_rt_t *rt) {
    q4_avg_ctx_t *c = ctx;
    c->acc = sl_state_value(rt, "sum-count");
    return c->acc ? 0 : SL_EINVAL;
}

static int q4_avg_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    q4_avg_ctx_t *c = ctx;
    uint32_t len;
    const q4_avg_t *cur = sl_value_get(c->acc, &len);
    q4_avg_t a = cur ? *cur : (q4_avg_t){0, 0};
    a.sum += sl_row_i64(&in->row, 2);
    a.count++;
    int rc = sl_value_put(c->acc, &a, sizeof a);
    if (rc < 0) return rc;
    sl_row_writer_t *w = sl_out_row(out);
    sl_rw_set_i64(w, 0, sl_row_i64(&in->row, 1));
    sl_rw_set_f64(w, 1, (double)a.sum / (double)a.count);
    sl_rw_set_i64(w, 2, a.count);
    sl_emit(out);
    return 0;
}

sl_stream_t *nx_q4(sl_stream_t *events, const nx_query_opts_t *o) {
    sl_stream_t *ab = sl_name(sl_filter(events, q4_auction_or_bid, NULL), "auctions and bids");
    sl_process_fn_t winning = {
        .open = q4_open,
        .process = q4_process,
        .on_timer = q4_on_timer,
        .close = q4_close,
        .opts = {(void *)o, nx_ctx_clone, nx_ctx_free},
    };
    sl_stream_t *finals = sl_keyed_process(
        sl_key_by_fn(ab, q4_auction_key, NULL), winning,
        sl_schema_parse("auction BIGINT NOT NULL, category BIGINT NOT NULL, final BIGINT NOT NULL", NULL, 0));
    finals = sl_uid(sl_name(finals, "q4 winning bids"), "q4-winning-bids");
    sl_process_fn_t average = {
        .open = q4_avg_open,
        .process = q4_avg_process,
        .opts = {(void *)o, nx_ctx_clone, nx_ctx_free},
    };
    sl_stream_t *avg = sl_keyed_process(
        sl_key_by(finals, "category"), average,
        sl_schema_parse("category BIGINT NOT NULL, avg DOUBLE NOT NULL, auctions BIGINT NOT NULL", NULL, 0));
    return sl_uid(sl_name(avg, "q4"), "q4-average");
}
