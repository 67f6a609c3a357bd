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
 * Flink's DataStream API writes this as persons.join(auctions).where(id)
 * .equalTo(seller).window(TumblingEventTimeWindows.of(10 s)).  sluice has
 * no window join: both sides come from the same stream here, so the join is
 * a tumbling window over persons and auctions keyed by person id / seller
 * whose aggregate records "person seen (with its name)" and "auction seen";
 * windows that saw both are the result (a filter drops the others, since an
 * aggregate emits one row per window).
 */
#include <string.h>

#include "queries.h"

#define Q8_NAME_MAX 48

typedef struct q8_acc {
    uint8_t person, auction, name_len;
    char name[Q8_NAME_MAX];
} q8_acc_t;

static int q8_person_or_auction(void *ctx, const sl_record_t *in) {
    int t = sl_row_i32(&in->row, SL_NXF_EVENT_TYPE);
    return t == SL_NX_PERSON || t == SL_NX_AUCTION;
}

static int q8_key(void *ctx, const sl_row_t *row, uint8_t *key, int cap) {
    int64_t id = sl_row_i32(row, SL_NXF_EVENT_TYPE) == SL_NX_PERSON ? sl_row_i64(row, SL_NXF_PERSON_ID)
                                                                    : sl_row_i64(row, SL_NXF_AUCTION_SELLER);
    memcpy(key, &id, 8);
    return 8;
}

static void q8_init(void *ctx, void *acc) { memset(acc, 0, sizeof(q8_acc_t)); }

static int q8_add(void *ctx, void *acc, const sl_record_t *in) {
    q8_acc_t *a = acc;
    if (sl_row_i32(&in->row, SL_NXF_EVENT_TYPE) == SL_NX_AUCTION) {
        a->auction = 1;
        return 0;
    }
    uint32_t len;
    const char *name = sl_row_str(&in->row, SL_NXF_PERSON_NAME, &len);
    if (len > Q8_NAME_MAX) return SL_EINVAL;
    a->person = 1;
    a->name_len = (uint8_t)len;
    memcpy(a->name, name, len);
    return 0;
}

static int q8_result(void *ctx, const void *acc, const uint8_t *key, uint32_t keylen, const sl_window_t *w,
                     sl_row_writer_t *out) {
    const q8_acc_t *a = acc;
    int64_t id;
    memcpy(&id, key, 8);
    sl_rw_set_i64(out, 0, id);
    sl_rw_set_str(out, 1, a->name, a->name_len);
    sl_rw_set_i64(out, 2, w->start);
    sl_rw_set_bool(out, 3, a->person && a->auction);
    return 0;
}

static int q8_matched(void *ctx, const sl_record_t *in) { return sl_row_bool(&in->row, 3); }

static int q8_project(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    sl_rw_set_i64(out, 0, sl_row_i64(&in->row, 0));
    sl_rw_copy_field(out, 1, &in->row, 1);
    sl_rw_set_i64(out, 2, sl_row_i64(&in->row, 2));
    return 0;
}

sl_stream_t *nx_q8(sl_stream_t *events, const nx_query_opts_t *o) {
    sl_stream_t *pa = sl_name(sl_filter(events, q8_person_or_auction, NULL), "persons and auctions");
    sl_windowed_t *w = sl_window(sl_key_by_fn(pa, q8_key, NULL), sl_tumbling_event_time(o->window_ms, 0));
    sl_aggregate_fn_t seen = {.acc_size = sizeof(q8_acc_t), .init = q8_init, .add = q8_add, .result = q8_result};
    sl_stream_t *windows = sl_window_aggregate(
        w, seen,
        sl_schema_parse("id BIGINT NOT NULL, name VARCHAR NOT NULL, starttime TIMESTAMP(3) NOT NULL, "
                        "matched BOOLEAN NOT NULL",
                        NULL, 0));
    windows = sl_uid(sl_name(windows, "q8 window join"), "q8-window-join");
    sl_stream_t *joined = sl_name(sl_filter(windows, q8_matched, NULL), "q8 matched");
    return sl_name(sl_map(joined, q8_project, NULL,
                          sl_schema_parse("id BIGINT NOT NULL, name VARCHAR NOT NULL, starttime TIMESTAMP(3) NOT NULL",
                                          NULL, 0)),
                   "q8");
}
