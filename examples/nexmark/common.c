/*
 * common.c — what the Nexmark queries share: their table, the event-type
 * filters, per-subtask contexts and the result checksum.
 */
#include <stdlib.h>
#include <string.h>

#include "queries.h"

nx_query_opts_t nx_query_defaults(void) {
    nx_query_opts_t o = {
        .window_ms = 10000,
        .slide_ms = 2000,
        .session_gap_ms = 10000,
        .q4_retention_ms = 1000,
    };
    return o;
}

#define F(x) SL_NXF_BIT(SL_NXF_##x)
#define BID_ALL (F(BID_AUCTION) | F(BID_BIDDER) | F(BID_PRICE) | F(BID_CHANNEL) | F(BID_URL))
const nx_query_t nx_queries[] = {
    {"q0", "pass-through", nx_q0, "", true, BID_ALL},
    {"q1", "currency conversion", nx_q1, "", true, BID_ALL},
    {"q2", "selection", nx_q2, "", true, F(BID_AUCTION) | F(BID_PRICE)},
    {"q3", "local item suggestion (incremental join)", nx_q3, "", true,
     F(AUCTION_ID) | F(AUCTION_SELLER) | F(AUCTION_CATEGORY) | F(PERSON_ID) | F(PERSON_NAME) | F(PERSON_CITY) |
         F(PERSON_STATE)},
    {"q4", "average price per category (join + aggregation)", nx_q4, "avg", false,
     F(AUCTION_ID) | F(AUCTION_CATEGORY) | F(AUCTION_EXPIRES) | F(BID_AUCTION) | F(BID_PRICE)},
    {"q5", "hot items (sliding window)", nx_q5, "", false, F(BID_AUCTION)},
    {"q7", "highest bid (tumbling window)", nx_q7, "", false, F(BID_AUCTION) | F(BID_BIDDER) | F(BID_PRICE)},
    {"q8", "monitor new users (window join)", nx_q8, "", false, F(PERSON_ID) | F(PERSON_NAME) | F(AUCTION_SELLER)},
    {"q11", "user sessions (session window)", nx_q11, "", false, F(BID_BIDDER)},
    {"ij", "bids within 1 s of their auction (interval join)", nx_ij, "", false,
     F(AUCTION_ID) | F(AUCTION_SELLER) | F(BID_AUCTION) | F(BID_BIDDER) | F(BID_PRICE)},
    {"cep", "cheap then dear bid per bidder within 1 s (CEP)", nx_cep, "", false, F(BID_BIDDER) | F(BID_PRICE)},
    {NULL, NULL, NULL, NULL, false, 0},
};
#undef F
#undef BID_ALL

const nx_query_t *nx_query_find(const char *name) {
    for (const nx_query_t *q = nx_queries; q->name; q++)
        if (strcmp(q->name, name) == 0) return q;
    return NULL;
}

int nx_is_bid(void *ctx, const sl_record_t *in) { return sl_row_i32(&in->row, SL_NXF_EVENT_TYPE) == SL_NX_BID; }
int nx_is_person(void *ctx, const sl_record_t *in) {
    return sl_row_i32(&in->row, SL_NXF_EVENT_TYPE) == SL_NX_PERSON;
}
int nx_is_auction(void *ctx, const sl_record_t *in) {
    return sl_row_i32(&in->row, SL_NXF_EVENT_TYPE) == SL_NX_AUCTION;
}

/* A process function's context starts with the query options (the root
 * context given to the builder is a nx_query_opts_t) followed by the
 * subtask's state handles, which open() fills: each subtask gets a zeroed
 * block of NX_CTX_BYTES with the options copied in. */
void *nx_ctx_clone(const void *ctx) {
    void *c = calloc(1, NX_CTX_BYTES);
    if (c && ctx) memcpy(c, ctx, sizeof(nx_query_opts_t));
    return c;
}
void nx_ctx_free(void *ctx) { free(ctx); }

static bool in_list(const char *list, const char *name) {
    size_t n = strlen(name);
    for (const char *p = list; p && *p;) {
        const char *e = strchr(p, ',');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len == n && strncmp(p, name, n) == 0) return true;
        p = e ? e + 1 : NULL;
    }
    return false;
}

int nx_row_hasher_init(nx_row_hasher_t *h, const sl_schema_t *s, const char *skip) {
    h->n = 0;
    int nf = sl_schema_field_count(s);
    for (int i = 0; i < nf; i++) {
        const char *name = sl_schema_field_name(s, i);
        if (strcmp(name, "emit_ns") == 0 || in_list(skip, name)) continue;
        if (h->n == (int)(sizeof h->fields / sizeof h->fields[0])) return SL_EINVAL;
        h->fields[h->n] = i;
        h->types[h->n] = sl_schema_field_type(s, i);
        h->n++;
    }
    return 0;
}

uint64_t nx_row_hash(const nx_row_hasher_t *h, const sl_row_t *row) {
    uint64_t x = 0;
    for (int k = 0; k < h->n; k++) {
        int i = h->fields[k];
        uint64_t v;
        if (sl_row_is_null(row, i)) {
            v = 0x6e756c6c;
        } else {
            switch (h->types[k]) {
            case SL_INT: v = (uint64_t)(int64_t)sl_row_i32(row, i); break;
            case SL_DOUBLE: {
                double d = sl_row_f64(row, i);
                memcpy(&v, &d, 8);
                break;
            }
            case SL_BOOLEAN: v = sl_row_bool(row, i) ? 1 : 0; break;
            case SL_VARCHAR:
            case SL_BYTES: {
                uint32_t len;
                const uint8_t *p = sl_row_bytes(row, i, &len);
                v = sl_nexmark_text_hash((const char *)p, len);
                break;
            }
            default: v = (uint64_t)sl_row_i64(row, i); break;
            }
        }
        x += nx_field(k, v);
    }
    return x;
}
