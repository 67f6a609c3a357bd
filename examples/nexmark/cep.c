/*
 * cep — a pattern per bidder (beyond Nexmark, to measure the toolkit): a
 * bid below 100.00 followed (relaxed contiguity) by a bid above 10,000.00
 * within 1 s, skipping past the last event of each match.
 *
 *   Pattern.begin("cheap", skipPastLastEvent()).where(price < 10000)
 *          .followedBy("dear").where(price > 1000000).within(1 s)
 *   -> (bidder, cheap's date_time, dear's date_time, dear's price)
 *
 * The same query on Flink: bench/nexmark/.../Toolkit.java (cep).
 */
#include "queries.h"
#include "sluice/cep.h"

#define CEP_CHEAP 10000
#define CEP_DEAR 1000000
#define CEP_WITHIN_MS 1000

static int cheap(void *ctx, const sl_row_t *e, int64_t ts) { return sl_row_i64(e, SL_NXF_BID_PRICE) < CEP_CHEAP; }
static int dear(void *ctx, const sl_row_t *e, int64_t ts) { return sl_row_i64(e, SL_NXF_BID_PRICE) > CEP_DEAR; }

static int cep_select(void *ctx, const sl_cep_match_t *m, sl_collector_t *out) {
    int64_t t1, t2;
    sl_row_t a = sl_cep_match_event(m, 0, 0, &t1);
    sl_row_t b = sl_cep_match_event(m, 1, 0, &t2);
    (void)a;
    sl_row_writer_t *w = sl_out_row(out);
    sl_rw_set_i64(w, 0, sl_row_i64(&b, SL_NXF_BID_BIDDER));
    sl_rw_set_i64(w, 1, t1);
    sl_rw_set_i64(w, 2, t2);
    sl_rw_set_i64(w, 3, sl_row_i64(&b, SL_NXF_BID_PRICE));
    sl_emit(out);
    return 0;
}

sl_stream_t *nx_cep(sl_stream_t *events, const nx_query_opts_t *o) {
    sl_stream_t *bids = sl_name(sl_filter(events, nx_is_bid, NULL), "bids");
    sl_pattern_t *p = sl_pattern_begin("cheap");
    sl_pattern_where(p, cheap, NULL);
    sl_pattern_followed_by(p, "dear");
    sl_pattern_where(p, dear, NULL);
    sl_pattern_within(p, CEP_WITHIN_MS);
    sl_pattern_skip(p, SL_CEP_SKIP_PAST_LAST_EVENT, NULL);
    sl_cep_fn_t fn = {.select = cep_select};
    sl_stream_t *r = sl_cep(sl_key_by(bids, "bid_bidder"), p, fn,
                            sl_schema_parse("bidder BIGINT NOT NULL, cheap_time TIMESTAMP(3) NOT NULL, "
                                            "dear_time TIMESTAMP(3) NOT NULL, price BIGINT NOT NULL",
                                            NULL, 0));
    return sl_uid(sl_name(r, "cep"), "cep-pattern");
}
