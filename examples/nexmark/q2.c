/*
 * q2 — selection: the bids on a few auctions.
 *
 *   SELECT auction, price FROM bid WHERE MOD(auction, 123) = 0
 */
#include "queries.h"

static int q2_select(void *ctx, const sl_record_t *in) {
    return nx_is_bid(ctx, in) && sl_row_i64(&in->row, SL_NXF_BID_AUCTION) % 123 == 0;
}

static int q2_project(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    sl_rw_set_i64(out, 0, sl_row_i64(&in->row, SL_NXF_BID_AUCTION));
    sl_rw_set_i64(out, 1, sl_row_i64(&in->row, SL_NXF_BID_PRICE));
    sl_rw_copy_field(out, 2, &in->row, SL_NXF_EMIT_NS);
    return 0;
}

sl_stream_t *nx_q2(sl_stream_t *events, const nx_query_opts_t *o) {
    sl_stream_t *sel = sl_name(sl_filter(events, q2_select, NULL), "auction % 123 == 0");
    sl_schema_t *out = sl_schema_parse("auction BIGINT NOT NULL, price BIGINT NOT NULL, emit_ns BIGINT", NULL, 0);
    return sl_name(sl_map(sel, q2_project, NULL, out), "q2");
}
