/*
 * q3 — local item suggestion: who sells in category 10 in Oregon, Idaho or
 * California.  An incremental (unwindowed) join of persons and auctions.
 *
 *   SELECT P.name, P.city, P.state, A.id
 *   FROM auction A INNER JOIN person P ON A.seller = P.id
 *   WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')
 *
 * Flink SQL plans this as a regular join (StreamingJoinOperator); here it is
 * the regular join of sluice/join.h: auctions keyed by seller, persons by
 * id, every auction joins its seller whichever of the two arrives first.
 * Both sides stay in keyed state for ever, as in the SQL join without a
 * state TTL.
 */
#include <string.h>

#include "queries.h"
#include "sluice/join.h"

static int q3_filter_auction(void *ctx, const sl_record_t *in) {
    return nx_is_auction(ctx, in) && sl_row_i64(&in->row, SL_NXF_AUCTION_CATEGORY) == 10;
}

static int q3_filter_person(void *ctx, const sl_record_t *in) {
    if (!nx_is_person(ctx, in)) return 0;
    uint32_t len;
    const char *s = sl_row_str(&in->row, SL_NXF_PERSON_STATE, &len);
    return len == 2 && ((s[0] == 'O' && s[1] == 'R') || (s[0] == 'I' && s[1] == 'D') || (s[0] == 'C' && s[1] == 'A'));
}

static int64_t emit_ns_of(const sl_row_t *r) {
    return sl_row_is_null(r, SL_NXF_EMIT_NS) ? INT64_MIN : sl_row_i64(r, SL_NXF_EMIT_NS);
}

/* left: an auction of category 10; right: its seller, a person in OR, ID or
 * CA.  emit_ns (for latency) is that of the later of the two events, the
 * one whose arrival produced the result. */
static int q3_join(void *ctx, const uint8_t *key, uint32_t keylen, const sl_record_t *auction,
                   const sl_record_t *person, sl_collector_t *out) {
    sl_row_writer_t *w = sl_out_row(out);
    sl_rw_copy_field(w, 0, &person->row, SL_NXF_PERSON_NAME);
    sl_rw_copy_field(w, 1, &person->row, SL_NXF_PERSON_CITY);
    sl_rw_copy_field(w, 2, &person->row, SL_NXF_PERSON_STATE);
    sl_rw_set_i64(w, 3, sl_row_i64(&auction->row, SL_NXF_AUCTION_ID));
    int64_t ea = emit_ns_of(&auction->row), ep = emit_ns_of(&person->row), e = ea > ep ? ea : ep;
    if (e != INT64_MIN) sl_rw_set_i64(w, 4, e);
    sl_emit(out);
    return 0;
}

sl_stream_t *nx_q3(sl_stream_t *events, const nx_query_opts_t *o) {
    sl_stream_t *auctions = sl_name(sl_filter(events, q3_filter_auction, NULL), "auctions of category 10");
    sl_stream_t *persons = sl_name(sl_filter(events, q3_filter_person, NULL), "persons in OR, ID, CA");
    sl_join_fn_t join = {.join = q3_join};
    sl_schema_t *out = sl_schema_parse("name VARCHAR NOT NULL, city VARCHAR NOT NULL, state VARCHAR NOT NULL, "
                                       "id BIGINT NOT NULL, emit_ns BIGINT",
                                       NULL, 0);
    sl_stream_t *r = sl_regular_join_process(
        sl_regular_join(sl_key_by(auctions, "auction_seller"), sl_key_by(persons, "person_id")), join, out);
    return sl_uid(sl_name(r, "q3"), "q3-join");
}
