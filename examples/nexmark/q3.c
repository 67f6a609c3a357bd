/*
 * q3 — local item suggestion: who sells in category 10 in Oregon, Idaho or
 * California.  An incremental (unwindowed) join of persons and auctions.
 *
 *   SELECT P.name, P.city, P.state, A.id
 *   FROM auction A INNER JOIN person P ON A.seller = P.id
 *   WHERE A.category = 10 AND (P.state = 'OR' OR P.state = 'ID' OR P.state = 'CA')
 *
 * Flink: auctions.keyBy(seller).connect(persons.keyBy(id)).process(join).
 * The join keeps, per person id, the person (value state) and the auctions
 * that arrived before their seller (list state).  A person id occurs once
 * in the stream, so a seller's waiting auctions are emitted and dropped
 * when the person arrives, and later auctions are joined at once.  Persons
 * stay in state for ever, as in the SQL join.
 */
#include <stdio.h>
#include <string.h>

#include "queries.h"

typedef struct q3_ctx {
    nx_query_opts_t o;
    sl_state_t *person;  /* packed: u8 lengths of name, city, state, then the bytes */
    sl_state_t *pending; /* auctions waiting for their seller: {i64 id, i64 emit_ns (or INT64_MIN)} */
} q3_ctx_t;
_Static_assert(sizeof(q3_ctx_t) <= NX_CTX_BYTES, "q3 context too large");

static int q3_filter_auction(void *ctx, const sl_record_t *in) {
    return nx_is_auction(ctx, in) && sl_row_i64(&in->row, SL_NXF_AUCTION_CATEGORY) == 10;
}

static int q3_filter_person(void *ctx, const sl_record_t *in) {
    if (!nx_is_person(ctx, in)) return 0;
    uint32_t len;
    const char *s = sl_row_str(&in->row, SL_NXF_PERSON_STATE, &len);
    return len == 2 && ((s[0] == 'O' && s[1] == 'R') || (s[0] == 'I' && s[1] == 'D') || (s[0] == 'C' && s[1] == 'A'));
}

static int q3_open(void *ctx, sl_rt_t *rt) {
    q3_ctx_t *c = ctx;
    c->person = sl_state_value(rt, "person");
    c->pending = sl_state_list(rt, "pending-auctions");
    return c->person && c->pending ? 0 : SL_EINVAL;
}

static void q3_emit(sl_collector_t *out, const uint8_t *p, int64_t auction, int64_t emit_ns) {
    sl_row_writer_t *w = sl_out_row(out);
    const char *s = (const char *)p + 3;
    sl_rw_set_str(w, 0, s, p[0]);
    sl_rw_set_str(w, 1, s + p[0], p[1]);
    sl_rw_set_str(w, 2, s + p[0] + p[1], p[2]);
    sl_rw_set_i64(w, 3, auction);
    if (emit_ns != INT64_MIN) sl_rw_set_i64(w, 4, emit_ns);
    sl_emit(out);
}

static int64_t emit_ns_of(const sl_row_t *r) {
    return sl_row_is_null(r, SL_NXF_EMIT_NS) ? INT64_MIN : sl_row_i64(r, SL_NXF_EMIT_NS);
}

/* input 1: an auction of category 10 */
static int q3_auction(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    q3_ctx_t *c = ctx;
    uint32_t len;
    const uint8_t *p = sl_value_get(c->person, &len);
    int64_t id = sl_row_i64(&in->row, SL_NXF_AUCTION_ID), ens = emit_ns_of(&in->row);
    if (p) {
        q3_emit(out, p, id, ens);
        return 0;
    }
    int64_t e[2] = {id, ens};
    return sl_list_add(c->pending, e, sizeof e);
}

typedef struct q3_flush {
    const uint8_t *person;
    sl_collector_t *out;
    int64_t emit_ns;
} q3_flush_t;

static void q3_flush_one(void *arg, const void *v, uint32_t len) {
    q3_flush_t *f = arg;
    int64_t e[2];
    memcpy(e, v, sizeof e);
    q3_emit(f->out, f->person, e[0], f->emit_ns);
}

/* input 2: a person in OR, ID or CA */
static int q3_person(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    q3_ctx_t *c = ctx;
    uint32_t ln, lc, ls;
    const char *name = sl_row_str(&in->row, SL_NXF_PERSON_NAME, &ln);
    const char *city = sl_row_str(&in->row, SL_NXF_PERSON_CITY, &lc);
    const char *state = sl_row_str(&in->row, SL_NXF_PERSON_STATE, &ls);
    uint8_t p[3 + 3 * 255];
    if (ln > 255 || lc > 255 || ls > 255) return SL_EINVAL;
    p[0] = (uint8_t)ln;
    p[1] = (uint8_t)lc;
    p[2] = (uint8_t)ls;
    memcpy(p + 3, name, ln);
    memcpy(p + 3 + ln, city, lc);
    memcpy(p + 3 + ln + lc, state, ls);
    int rc = sl_value_put(c->person, p, 3 + ln + lc + ls);
    if (rc < 0) return rc;
    q3_flush_t f = {p, out, emit_ns_of(&in->row)};
    if (sl_list_foreach(c->pending, q3_flush_one, &f) > 0) sl_state_clear(c->pending);
    return 0;
}

sl_stream_t *nx_q3(sl_stream_t *events, const nx_query_opts_t *o) {
    sl_stream_t *auctions = sl_name(sl_filter(events, q3_filter_auction, NULL), "auctions of category 10");
    sl_stream_t *persons = sl_name(sl_filter(events, q3_filter_person, NULL), "persons in OR, ID, CA");
    sl_co_process_fn_t join = {
        .open = q3_open,
        .process1 = q3_auction,
        .process2 = q3_person,
        .opts = {(void *)o, nx_ctx_clone, nx_ctx_free},
    };
    sl_schema_t *out = sl_schema_parse("name VARCHAR NOT NULL, city VARCHAR NOT NULL, state VARCHAR NOT NULL, "
                                       "id BIGINT NOT NULL, emit_ns BIGINT",
                                       NULL, 0);
    sl_stream_t *r = sl_co_process(sl_connect_keyed(sl_key_by(auctions, "auction_seller"), sl_key_by(persons, "person_id")),
                                   join, out);
    return sl_uid(sl_name(r, "q3"), "q3-join");
}
