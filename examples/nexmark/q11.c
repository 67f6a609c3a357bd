/*
 * q11 — user sessions: bids per bidder per session (a session ends after
 * 10 s without a bid from that bidder).
 *
 *   SELECT B.bidder, count(*) AS bid_count,
 *          SESSION_START(B.dateTime, INTERVAL '10' SECOND) AS starttime,
 *          SESSION_END(B.dateTime, INTERVAL '10' SECOND) AS endtime
 *   FROM bid B GROUP BY B.bidder, SESSION(B.dateTime, INTERVAL '10' SECOND)
 */
#include <string.h>

#include "queries.h"

static void q11_init(void *ctx, void *acc) { memset(acc, 0, sizeof(int64_t)); }

static int q11_add(void *ctx, void *acc, const sl_record_t *in) {
    ++*(int64_t *)acc;
    return 0;
}

static void q11_merge(void *ctx, void *acc, const void *other) {
    int64_t a, b;
    memcpy(&a, acc, 8);
    memcpy(&b, other, 8);
    a += b;
    memcpy(acc, &a, 8);
}

static int q11_result(void *ctx, const void *acc, const uint8_t *key, uint32_t keylen, const sl_window_t *w,
                      sl_row_writer_t *out) {
    int64_t bidder, n;
    memcpy(&bidder, key, 8);
    memcpy(&n, acc, 8);
    sl_rw_set_i64(out, 0, bidder);
    sl_rw_set_i64(out, 1, n);
    sl_rw_set_i64(out, 2, w->start);
    sl_rw_set_i64(out, 3, w->end);
    return 0;
}

sl_stream_t *nx_q11(sl_stream_t *events, const nx_query_opts_t *o) {
    sl_stream_t *bids = sl_name(sl_filter(events, nx_is_bid, NULL), "bids");
    sl_windowed_t *w = sl_window(sl_key_by(bids, "bid_bidder"), sl_session_event_time(o->session_gap_ms));
    sl_aggregate_fn_t count = {.acc_size = sizeof(int64_t),
                               .init = q11_init,
                               .add = q11_add,
                               .merge = q11_merge,
                               .result = q11_result};
    sl_stream_t *sessions = sl_window_aggregate(
        w, count,
        sl_schema_parse("bidder BIGINT NOT NULL, bid_count BIGINT NOT NULL, starttime TIMESTAMP(3) NOT NULL, "
                        "endtime TIMESTAMP(3) NOT NULL",
                        NULL, 0));
    return sl_uid(sl_name(sessions, "q11"), "q11-sessions");
}
