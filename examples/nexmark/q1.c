/*
 * q1 — currency conversion: every bid with its price in euros.
 *
 *   SELECT auction, bidder, 0.908 * price AS price, channel, url, dateTime FROM bid
 *
 * The price becomes a DOUBLE (Flink SQL would give a DECIMAL).
 */
#include "queries.h"

static int q1_convert(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    const sl_row_t *r = &in->row;
    sl_rw_set_i64(out, 0, sl_row_i64(r, SL_NXF_BID_AUCTION));
    sl_rw_set_i64(out, 1, sl_row_i64(r, SL_NXF_BID_BIDDER));
    sl_rw_set_f64(out, 2, (double)sl_row_i64(r, SL_NXF_BID_PRICE) * 0.908);
    sl_rw_copy_field(out, 3, r, SL_NXF_BID_CHANNEL);
    sl_rw_copy_field(out, 4, r, SL_NXF_BID_URL);
    sl_rw_set_i64(out, 5, sl_row_i64(r, SL_NXF_DATE_TIME));
    sl_rw_copy_field(out, 6, r, SL_NXF_EMIT_NS);
    return 0;
}

sl_stream_t *nx_q1(sl_stream_t *events, const nx_query_opts_t *o) {
    sl_stream_t *bids = sl_name(sl_filter(events, nx_is_bid, NULL), "bids");
    sl_schema_t *out = sl_schema_parse("auction BIGINT NOT NULL, bidder BIGINT NOT NULL, price DOUBLE NOT NULL, "
                                       "channel VARCHAR, url VARCHAR, date_time TIMESTAMP(3) NOT NULL, "
                                       "emit_ns BIGINT",
                                       NULL, 0);
    return sl_name(sl_map(bids, q1_convert, NULL, out), "q1");
}
