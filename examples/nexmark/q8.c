/*
 * q8 — monitor new users: persons who opened an auction in the same 10 s
 * tumbling window in which they registered.
 *
 *   SELECT P.id, P.name, P.starttime FROM
 *     (SELECT id, name, window_start AS starttime, window_end AS endtime
 *      FROM TABLE(TUMBLE(TABLE person, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
 *      GROUP BY id, name, window_start, window_end) P
 *   JOIN
 *     (SELECT seller, window_start AS starttime, window_end AS endtime
 *      FROM TABLE(TUMBLE(TABLE auction, DESCRIPTOR(dateTime), INTERVAL '10' SECOND))
 *      GROUP BY seller, window_start, window_end) A
 *   ON P.id = A.seller AND P.starttime = A.starttime AND P.endtime = A.endtime
 *
 * Flink's DataStream version is persons.join(auctions).where(id)
 * .equalTo(seller).window(TumblingEventTimeWindows.of(10 s)); here it is
 * the window join of sluice/join.h in its co-group form: per seller and
 * window the function sees the window's persons and auctions and emits each
 * person once when there was at least one auction — the GROUP BY of the
 * auction side (a pair-wise join would repeat a person per auction).
 */
#include "queries.h"
#include "sluice/join.h"

static int q8_new_user(void *ctx, const uint8_t *key, uint32_t keylen, const sl_window_t *win,
                       const sl_record_t *persons, int npersons, const sl_record_t *auctions, int nauctions,
                       sl_collector_t *out) {
    if (nauctions == 0) return 0;
    for (int i = 0; i < npersons; i++) {
        sl_row_writer_t *w = sl_out_row(out);
        sl_rw_set_i64(w, 0, sl_row_i64(&persons[i].row, SL_NXF_PERSON_ID));
        sl_rw_copy_field(w, 1, &persons[i].row, SL_NXF_PERSON_NAME);
        sl_rw_set_i64(w, 2, win->start);
        sl_emit(out);
    }
    return 0;
}

sl_stream_t *nx_q8(sl_stream_t *events, const nx_query_opts_t *o) {
    sl_stream_t *persons = sl_name(sl_filter(events, nx_is_person, NULL), "persons");
    sl_stream_t *auctions = sl_name(sl_filter(events, nx_is_auction, NULL), "auctions");
    sl_window_join_t *j = sl_window_join(sl_key_by(persons, "person_id"), sl_key_by(auctions, "auction_seller"),
                                         sl_tumbling_event_time(o->window_ms, 0));
    sl_stream_t *r = sl_window_cogroup_apply(
        j, q8_new_user, NULL,
        sl_schema_parse("id BIGINT NOT NULL, name VARCHAR NOT NULL, starttime TIMESTAMP(3) NOT NULL", NULL, 0));
    return sl_uid(sl_name(r, "q8"), "q8-window-join");
}
