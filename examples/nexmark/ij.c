/*
 * ij — interval join (beyond Nexmark, to measure the toolkit): every bid
 * joined with its auction when it comes at most 1 s after it.
 *
 *   auctions.keyBy(id).intervalJoin(bids.keyBy(auction)).between(0, 1 s)
 *   -> (auction, seller, bidder, price, date_time of the bid)
 *
 * The same query on Flink: bench/nexmark/.../Toolkit.java (ij).
 */
#include "queries.h"
#include "sluice/join.h"

#define IJ_UPPER_MS 1000

static int ij_pair(void *ctx, const uint8_t *key, uint32_t keylen, const sl_record_t *a, const sl_record_t *b,
                   sl_collector_t *out) {
    sl_row_writer_t *w = sl_out_row(out);
    sl_rw_set_i64(w, 0, sl_row_i64(&a->row, SL_NXF_AUCTION_ID));
    sl_rw_set_i64(w, 1, sl_row_i64(&a->row, SL_NXF_AUCTION_SELLER));
    sl_rw_set_i64(w, 2, sl_row_i64(&b->row, SL_NXF_BID_BIDDER));
    sl_rw_set_i64(w, 3, sl_row_i64(&b->row, SL_NXF_BID_PRICE));
    sl_rw_set_i64(w, 4, b->ts);
    sl_emit(out);
    return 0;
}

sl_stream_t *nx_ij(sl_stream_t *events, const nx_query_opts_t *o) {
    sl_stream_t *auctions = sl_name(sl_filter(events, nx_is_auction, NULL), "auctions");
    sl_stream_t *bids = sl_name(sl_filter(events, nx_is_bid, NULL), "bids");
    sl_interval_join_t *j =
        sl_interval_join(sl_key_by(auctions, "auction_id"), sl_key_by(bids, "bid_auction"), 0, IJ_UPPER_MS);
    sl_join_fn_t fn = {.join = ij_pair};
    sl_stream_t *r = sl_interval_join_process(
        j, fn,
        sl_schema_parse("auction BIGINT NOT NULL, seller BIGINT NOT NULL, bidder BIGINT NOT NULL, "
                        "price BIGINT NOT NULL, date_time TIMESTAMP(3) NOT NULL",
                        NULL, 0));
    return sl_uid(sl_name(r, "ij"), "ij-interval-join");
}
