/*
 * nexmark.c — the Nexmark generator (persons, auctions, bids) and its
 * source.  sluice/nexmark.h states the model; this file is its only
 * implementation in C, and bench/nexmark/.../NexmarkGenerator.java is a
 * line-by-line port of the event function below: change both together (the
 * harness compares their checksums).
 *
 * Random draws.  Event n has its own stream: s0 = mix(seed ^ n * K_EVENT),
 * then draw i is mix(s0 + i * GAMMA) (splitmix64).  A bounded integer in
 * [0, b) with b < 2^32 is ((r >> 32) * b) >> 32 (Lemire's multiply-shift on
 * the high half).  A random string takes one draw per 4 characters: each
 * 16-bit lane v (low lane first) gives t = (v * 338) >> 16 in [0, 338):
 * t < 26 is the "special" character (1 in 13), else letter 'a' + t % 26.
 *
 * Prices: 100 * 10^(6u) cents for u uniform in [0, 1): a table of
 * P[j] = round(100 * 10^(6j / 4096)), j = 0..4096, built with a fixed Horner
 * series for 10^f (only IEEE basic operations, so C and Java agree bit for
 * bit — no libm pow/exp, whose last bits differ), then for a draw r:
 * j = r >> 52, f = (r >> 20) & (2^32 - 1), price = P[j] + ((P[j+1] - P[j]) * f >> 32)
 * (integer arithmetic: fine-grained, so ties at a window's top price are
 * as rare as with Nexmark's own formula).
 */
#include <math.h>
#include <stdio.h>


#include "common/common.h"
#include "sluice/nexmark.h"

#define NX_GAMMA 0x9e3779b97f4a7c15ULL
#define NX_K_EVENT 0xd1b54a32d192ed03ULL
#define NX_K_TABLE 0xaef17502108ef2d9ULL
#define NX_BATCH 64

#define NX_PERSON_PROPORTION 1
#define NX_AUCTION_PROPORTION 3
#define NX_TOTAL_PROPORTION 50
#define NX_FIRST_PERSON_ID 1000
#define NX_FIRST_AUCTION_ID 1000
#define NX_FIRST_CATEGORY_ID 10
#define NX_NUM_CATEGORIES 5
#define NX_PERSON_ID_LEAD 10
#define NX_AUCTION_ID_LEAD 10
#define NX_HOT_SELLER_RATIO 100
#define NX_HOT_AUCTION_RATIO 100
#define NX_HOT_BIDDER_RATIO 100
#define NX_HOT_CHANNELS_RATIO 2
#define NX_CHANNELS 10000
#define NX_LN10 2.302585092994046

/* Table ids of the URL generators (hot URLs 0..3, channel URLs 16 + c). */
#define NX_TABLE_HOT_URL 0
#define NX_TABLE_CHANNEL_URL 16

/* The fixed texts, with their lengths (no strlen per event). */
#define NX_T(s) {s, sizeof s - 1}
static const sl_nexmark_text_t first_names[] = {
    NX_T("Peter"), NX_T("Paul"), NX_T("Luke"), NX_T("John"), NX_T("Saul"), NX_T("Vicky"),
    NX_T("Kate"), NX_T("Julie"), NX_T("Sarah"), NX_T("Deiter"), NX_T("Walter")
};
static const sl_nexmark_text_t last_names[] = {
    NX_T("Shultz"), NX_T("Abrams"), NX_T("Spencer"), NX_T("White"), NX_T("Bartels"),
    NX_T("Walton"), NX_T("Smith"), NX_T("Jones"), NX_T("Noris")
};
static const sl_nexmark_text_t us_cities[] = {
    NX_T("Phoenix"), NX_T("Los Angeles"), NX_T("San Francisco"), NX_T("Boise"), NX_T("Portland"),
    NX_T("Bend"), NX_T("Redmond"), NX_T("Seattle"), NX_T("Kent"), NX_T("Cheyenne")
};
static const sl_nexmark_text_t us_states[] = {
    NX_T("AZ"), NX_T("CA"), NX_T("ID"), NX_T("OR"), NX_T("WA"), NX_T("WY")
};
static const sl_nexmark_text_t hot_channels[] = {
    NX_T("Google"), NX_T("Facebook"), NX_T("Baidu"), NX_T("Apple")
};

/* A channel's name and URL side by side. */
typedef struct nx_channel {
    uint8_t name_len, url_len;
    char name[14];
    char url[80];
} nx_channel_t;

struct sl_nexmark_gen {
    sl_nexmark_opts_t o;
    uint64_t fields;                /* o.fields, or every field when 0 */
    int64_t price[4097];            /* round(100 * 10^(6j / 4096)) */
    sl_nexmark_text_t hot_url[4];
    nx_channel_t *channels;         /* NX_CHANNELS, one slot each: one cache miss per lookup */
    char *arena;                    /* the text of the hot URLs */
    int64_t events_for_auctions;    /* events until num_in_flight_auctions more auctions */
};

#define NX_MIN_SLEEP_NS 50000 /* a rate-limited reader's shortest sleep */

/* ---- random draws ------------------------------------------------------- */

static inline uint64_t nx_mix(uint64_t z) { /* splitmix64's finalizer */
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

typedef struct nx_rng {
    uint64_t s;
} nx_rng_t;

static inline uint64_t nx_next(nx_rng_t *r) {
    r->s += NX_GAMMA;
    return nx_mix(r->s);
}

/* [0, b) for 0 < b < 2^32 from the high half of a draw. */
static inline int64_t nx_below(nx_rng_t *r, uint64_t b) { return (int64_t)(((nx_next(r) >> 32) * b) >> 32); }

/* Nexmark's nextString(maxLength, special): 3..maxLength-1 characters, each
 * the special one with probability 1/13, else a-z; then trimmed of spaces
 * at both ends (Java's String.trim). */
static uint32_t nx_string(nx_rng_t *r, int max_len, char special, char *out) {
    int len = 3 + (int)nx_below(r, (uint64_t)(max_len - 3));
    for (int i = 0; i < len; i += 4) {
        uint64_t d = nx_next(r);
        for (int k = 0; k < 4 && i + k < len; k++) {
            uint32_t t = (uint32_t)(((d >> (16 * k)) & 0xffff) * 338) >> 16;
            out[i + k] = t < 26 ? special : (char)('a' + t % 26);
        }
    }
    int a = 0, b = len;
    while (a < b && out[a] == ' ') a++;
    while (b > a && out[b - 1] == ' ') b--;
    if (a) memmove(out, out + a, (size_t)(b - a));
    return (uint32_t)(b - a);
}

/* The draws nx_string would take, without the characters (a field outside
 * the projection): the length, then one draw per 4 characters. */
static void nx_string_skip(nx_rng_t *r, int max_len) {
    int len = 3 + (int)nx_below(r, (uint64_t)(max_len - 3));
    r->s += NX_GAMMA * (uint64_t)((len + 3) / 4);
}

static const double pow10_int[7] = {1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0, 1000000.0};

static inline int64_t nx_price(const sl_nexmark_gen_t *g, nx_rng_t *r) {
    uint64_t d = nx_next(r);
    int j = (int)(d >> 52);
    int64_t f = (int64_t)((d >> 20) & 0xffffffffULL);
    return g->price[j] + (((g->price[j + 1] - g->price[j]) * f) >> 32);
}

/* ---- ids (Nexmark's lastBase0PersonId / lastBase0AuctionId ...) ---------- */

static inline int64_t last_base0_person(int64_t n) {
    int64_t epoch = n / NX_TOTAL_PROPORTION, off = n % NX_TOTAL_PROPORTION;
    if (off >= NX_PERSON_PROPORTION) off = NX_PERSON_PROPORTION - 1;
    return epoch * NX_PERSON_PROPORTION + off;
}

static inline int64_t last_base0_auction(int64_t n) {
    int64_t epoch = n / NX_TOTAL_PROPORTION, off = n % NX_TOTAL_PROPORTION;
    if (off < NX_PERSON_PROPORTION) {
        epoch--;
        off = NX_AUCTION_PROPORTION - 1;
    } else if (off >= NX_PERSON_PROPORTION + NX_AUCTION_PROPORTION) {
        off = NX_AUCTION_PROPORTION - 1;
    } else {
        off -= NX_PERSON_PROPORTION;
    }
    return epoch * NX_AUCTION_PROPORTION + off;
}

static int64_t next_base0_person(const sl_nexmark_gen_t *g, int64_t n, nx_rng_t *r) {
    int64_t num_people = last_base0_person(n) + 1;
    int64_t active = SL_MIN(num_people, (int64_t)g->o.num_active_people);
    int64_t k = nx_below(r, (uint64_t)(active + NX_PERSON_ID_LEAD));
    return num_people - active + k;
}

static int64_t next_base0_auction(const sl_nexmark_gen_t *g, int64_t n, nx_rng_t *r) {
    int64_t max_a = last_base0_auction(n);
    int64_t min_a = SL_MAX(max_a - g->o.num_in_flight_auctions, 0);
    return min_a + nx_below(r, (uint64_t)(max_a - min_a + 1 + NX_AUCTION_ID_LEAD));
}

/* ---- options -------------------------------------------------------------- */

sl_nexmark_opts_t sl_nexmark_defaults(void) {
    sl_nexmark_opts_t o = {
        .seed = 42,
        .events = 1000000,
        .splits = 0,
        .base_time_ms = 1767225600000LL, /* 2026-01-01T00:00:00Z */
        .inter_event_delay_us = 0.1,
        .rate = 0,
        .start_ns = 0,
        .stamp_emit_ns = false,
        .num_active_people = 1000,
        .num_in_flight_auctions = 100,
        .hot_auction_ratio = 2,
        .hot_sellers_ratio = 4,
        .hot_bidders_ratio = 4,
    };
    return o;
}

int sl_nexmark_check(const sl_nexmark_opts_t *o, char *err, size_t errlen) {
    const char *bad = NULL;
    if (o->events < -1) bad = "events must be >= 0, or -1 for unbounded";
    else if (o->splits < 0) bad = "splits must be >= 0 (0: one per subtask)";
    else if (!(o->inter_event_delay_us >= 0) || o->inter_event_delay_us > 1e9)
        bad = "inter_event_delay_us must be in [0, 1e9]";
    else if (!(o->rate >= 0) || isinf(o->rate)) bad = "rate must be >= 0 (0: unlimited)";
    else if (o->num_active_people < 1 || o->num_active_people > 1000000000)
        bad = "num_active_people must be in [1, 1e9]";
    else if (o->num_in_flight_auctions < 1 || o->num_in_flight_auctions > 1000000000)
        bad = "num_in_flight_auctions must be in [1, 1e9]";
    else if (o->hot_auction_ratio < 1 || o->hot_sellers_ratio < 1 || o->hot_bidders_ratio < 1)
        bad = "hot_auction_ratio, hot_sellers_ratio and hot_bidders_ratio must be >= 1";
    else if (o->fields >> SL_NXF_COUNT)
        bad = "fields has bits beyond the schema's (use SL_NXF_BIT(SL_NXF_...))";
    return bad ? sl_errf(err, errlen, SL_EINVAL, "nexmark: %s", bad) : 0;
}

int64_t sl_nexmark_date_time(const sl_nexmark_opts_t *o, int64_t n) {
    return o->base_time_ms + (int64_t)((double)n * o->inter_event_delay_us) / 1000;
}

int64_t sl_nexmark_due_ns(const sl_nexmark_opts_t *o, int64_t t_ms) {
    /* the first event n with date_time(n) >= t_ms, and when it is due */
    if (o->rate <= 0 || o->inter_event_delay_us <= 0) return o->start_ns;
    double n = ceil((double)(t_ms - o->base_time_ms) * 1000.0 / o->inter_event_delay_us);
    if (n < 0) n = 0;
    return o->start_ns + (int64_t)(n * 1e9 / o->rate);
}

int64_t sl_nexmark_split_events(const sl_nexmark_opts_t *o, int k, int nsplits) {
    if (o->events < 0) return -1;
    if (k >= o->events) return 0;
    return (o->events - k + nsplits - 1) / nsplits;
}

/* ---- the generator and its tables ---------------------------------------- */

static uint32_t base_url(nx_rng_t *r, char *out) {
    static const char head[] = "https://www.nexmark.com/", tail[] = "item.htm?query=1";
    uint32_t n = 0;
    memcpy(out, head, sizeof head - 1);
    n += sizeof head - 1;
    for (int i = 0; i < 3; i++) {
        n += nx_string(r, 5, '_', out + n);
        out[n++] = '/';
    }
    memcpy(out + n, tail, sizeof tail - 1);
    return n + (uint32_t)(sizeof tail - 1);
}

static nx_rng_t table_rng(uint64_t seed, uint64_t table_id) {
    nx_rng_t r = {nx_mix(seed ^ ((table_id + 1) * NX_K_TABLE))};
    return r;
}

int sl_nexmark_gen_new(const sl_nexmark_opts_t *o, sl_nexmark_gen_t **out, char *err, size_t errlen) {
    *out = NULL;
    int rc = sl_nexmark_check(o, err, errlen);
    if (rc) return rc;
    sl_nexmark_gen_t *g = sl_calloc(1, sizeof *g);
    g->o = *o;
    g->fields = o->fields ? o->fields : ~0ULL;
    /* P[j] = round(100 * 10^d * 10^f), 6j/4096 = d + f, 10^f = exp(f ln 10)
     * by a fixed Horner series (30 terms). */
    for (int j = 0; j <= 4096; j++) {
        int d = (6 * j) >> 12;
        double t = (double)((6 * j) & 4095) / 4096.0 * NX_LN10, e = 1.0;
        for (int k = 30; k >= 1; k--) e = 1.0 + e * t / (double)k;
        g->price[j] = (int64_t)(100.0 * pow10_int[d] * e + 0.5);
    }
    g->events_for_auctions =
        ((int64_t)o->num_in_flight_auctions * NX_TOTAL_PROPORTION) / NX_AUCTION_PROPORTION;
    /* Tables: 4 hot URLs, 10000 channel names and URLs (at most 24 + 3 * 5
     * + 16 + 12 + 11 bytes each). */
    g->arena = sl_malloc(4 * 96);
    size_t used = 0;
    for (int i = 0; i < 4; i++) {
        nx_rng_t r = table_rng(o->seed, NX_TABLE_HOT_URL + (uint64_t)i);
        char *p = g->arena + used;
        uint32_t n = base_url(&r, p);
        g->hot_url[i].p = p;
        g->hot_url[i].len = n;
        used += n;
    }
    g->channels = sl_calloc(NX_CHANNELS, sizeof *g->channels);
    for (int c = 0; c < NX_CHANNELS; c++) {
        nx_channel_t *ch = &g->channels[c];
        char tmp[128];
        int n = snprintf(tmp, sizeof tmp, "channel-%d", c);
        memcpy(ch->name, tmp, (size_t)n);
        ch->name_len = (uint8_t)n;
        nx_rng_t r = table_rng(o->seed, NX_TABLE_CHANNEL_URL + (uint64_t)c);
        uint32_t u = base_url(&r, tmp);
        if (nx_below(&r, 10) > 0) {
            /* Java: "&channel_id=" + Math.abs(Integer.reverse(c)) */
            uint32_t x = (uint32_t)c, rev = 0;
            for (int b = 0; b < 32; b++) rev |= ((x >> b) & 1u) << (31 - b);
            int64_t v = (int32_t)rev;
            if (v < 0 && v != INT32_MIN) v = -v;
            u += (uint32_t)snprintf(tmp + u, sizeof tmp - u, "&channel_id=%lld", (long long)v);
        }
        memcpy(ch->url, tmp, u);
        ch->url_len = (uint8_t)u;
    }
    *out = g;
    return 0;
}

void sl_nexmark_gen_free(sl_nexmark_gen_t *g) {
    if (!g) return;
    sl_free(g->arena);
    sl_free(g->channels);
    sl_free(g);
}

static sl_nexmark_text_t text(const char *p, uint32_t len) {
    sl_nexmark_text_t t = {p, len};
    return t;
}


static void gen_person(const sl_nexmark_gen_t *g, int64_t n, nx_rng_t *r, sl_nexmark_event_t *ev) {
    char *b = ev->buf;
    uint32_t used = 0;
    const uint64_t f = g->fields;
    ev->person.id = last_base0_person(n) + NX_FIRST_PERSON_ID;
    sl_nexmark_text_t first = first_names[nx_below(r, SL_ARRAY_LEN(first_names))];
    sl_nexmark_text_t last = last_names[nx_below(r, SL_ARRAY_LEN(last_names))];
    ev->person.name = text(b, 0);
    if (f & SL_NXF_BIT(SL_NXF_PERSON_NAME)) {
        uint32_t fl = first.len, ll = last.len;
        memcpy(b, first.p, fl);
        b[fl] = ' ';
        memcpy(b + fl + 1, last.p, ll);
        ev->person.name.len = (uint32_t)(fl + 1 + ll);
        used += ev->person.name.len;
    }
    char *e = b + used;
    ev->person.email = text(e, 0);
    if (f & SL_NXF_BIT(SL_NXF_PERSON_EMAIL)) {
        uint32_t el = nx_string(r, 7, ' ', e);
        e[el++] = '@';
        el += nx_string(r, 5, ' ', e + el);
        memcpy(e + el, ".com", 4);
        el += 4;
        ev->person.email.len = el;
        used += el;
    } else {
        nx_string_skip(r, 7);
        nx_string_skip(r, 5);
    }
    char *c = b + used;
    ev->person.credit_card = text(c, 0);
    if (f & SL_NXF_BIT(SL_NXF_PERSON_CREDIT_CARD)) {
        for (int i = 0; i < 4; i++) {
            int d = (int)nx_below(r, 10000);
            c[i * 5 + 0] = (char)('0' + d / 1000);
            c[i * 5 + 1] = (char)('0' + d / 100 % 10);
            c[i * 5 + 2] = (char)('0' + d / 10 % 10);
            c[i * 5 + 3] = (char)('0' + d % 10);
            if (i < 3) c[i * 5 + 4] = ' ';
        }
        ev->person.credit_card.len = 19;
    } else {
        r->s += 4 * NX_GAMMA;
    }
    ev->person.city = us_cities[nx_below(r, SL_ARRAY_LEN(us_cities))];
    ev->person.state = us_states[nx_below(r, SL_ARRAY_LEN(us_states))];
}

static void gen_auction(const sl_nexmark_gen_t *g, int64_t n, nx_rng_t *r, sl_nexmark_event_t *ev) {
    const sl_nexmark_opts_t *o = &g->o;
    ev->auction.id = last_base0_auction(n) + NX_FIRST_AUCTION_ID;
    int64_t seller;
    if (nx_below(r, (uint64_t)o->hot_sellers_ratio) > 0)
        seller = (last_base0_person(n) / NX_HOT_SELLER_RATIO) * NX_HOT_SELLER_RATIO;
    else
        seller = next_base0_person(g, n, r);
    ev->auction.seller = seller + NX_FIRST_PERSON_ID;
    ev->auction.category = NX_FIRST_CATEGORY_ID + nx_below(r, NX_NUM_CATEGORIES);
    ev->auction.initial_bid = nx_price(g, r);
    int64_t horizon = sl_nexmark_date_time(o, n + g->events_for_auctions) - ev->date_time;
    int64_t span = SL_MAX(horizon * 2, 1);
    if (span > 0xffffffffLL) span = 0xffffffffLL;
    ev->auction.expires = ev->date_time + 1 + nx_below(r, (uint64_t)span);
    char *b = ev->buf;
    uint32_t nl = 0, dl = 0;
    if (g->fields & SL_NXF_BIT(SL_NXF_AUCTION_ITEM_NAME)) nl = nx_string(r, 20, ' ', b);
    else nx_string_skip(r, 20);
    ev->auction.item_name = text(b, nl);
    if (g->fields & SL_NXF_BIT(SL_NXF_AUCTION_DESCRIPTION)) dl = nx_string(r, 100, ' ', b + nl);
    else nx_string_skip(r, 100);
    ev->auction.description = text(b + nl, dl);
    ev->auction.reserve = ev->auction.initial_bid + nx_price(g, r);
}

static void gen_bid(const sl_nexmark_gen_t *g, int64_t n, nx_rng_t *r, sl_nexmark_event_t *ev) {
    const sl_nexmark_opts_t *o = &g->o;
    int64_t auction;
    if (nx_below(r, (uint64_t)o->hot_auction_ratio) > 0)
        auction = (last_base0_auction(n) / NX_HOT_AUCTION_RATIO) * NX_HOT_AUCTION_RATIO;
    else
        auction = next_base0_auction(g, n, r);
    ev->bid.auction = auction + NX_FIRST_AUCTION_ID;
    int64_t bidder;
    if (nx_below(r, (uint64_t)o->hot_bidders_ratio) > 0)
        bidder = (last_base0_person(n) / NX_HOT_BIDDER_RATIO) * NX_HOT_BIDDER_RATIO + 1;
    else
        bidder = next_base0_person(g, n, r);
    ev->bid.bidder = bidder + NX_FIRST_PERSON_ID;
    ev->bid.price = nx_price(g, r);
    if (nx_below(r, NX_HOT_CHANNELS_RATIO) > 0) {
        int i = (int)nx_below(r, 4);
        ev->bid.channel = hot_channels[i];
        ev->bid.url = g->hot_url[i];
    } else {
        const nx_channel_t *ch = &g->channels[nx_below(r, NX_CHANNELS)];
        ev->bid.channel = text(ch->name, ch->name_len);
        ev->bid.url = text(ch->url, ch->url_len);
    }
}

void sl_nexmark_gen_event(const sl_nexmark_gen_t *g, int64_t n, sl_nexmark_event_t *ev) {
    nx_rng_t r = {nx_mix(g->o.seed ^ ((uint64_t)n * NX_K_EVENT))};
    ev->date_time = sl_nexmark_date_time(&g->o, n);
    int64_t rem = n % NX_TOTAL_PROPORTION;
    if (rem < NX_PERSON_PROPORTION) {
        ev->type = SL_NX_PERSON;
        gen_person(g, n, &r, ev);
    } else if (rem < NX_PERSON_PROPORTION + NX_AUCTION_PROPORTION) {
        ev->type = SL_NX_AUCTION;
        gen_auction(g, n, &r, ev);
    } else {
        ev->type = SL_NX_BID;
        gen_bid(g, n, &r, ev);
    }
}

/* ---- rows and hashes ---------------------------------------------------- */

sl_schema_t *sl_nexmark_schema(void) {
    return sl_schema_parse("event_type INT NOT NULL, date_time TIMESTAMP(3) NOT NULL, "
                           "person_id BIGINT, person_name VARCHAR, person_email VARCHAR, "
                           "person_credit_card VARCHAR, person_city VARCHAR, person_state VARCHAR, "
                           "auction_id BIGINT, auction_item_name VARCHAR, auction_description VARCHAR, "
                           "auction_initial_bid BIGINT, auction_reserve BIGINT, auction_expires TIMESTAMP(3), "
                           "auction_seller BIGINT, auction_category BIGINT, "
                           "bid_auction BIGINT, bid_bidder BIGINT, bid_price BIGINT, bid_channel VARCHAR, "
                           "bid_url VARCHAR, emit_ns BIGINT",
                           NULL, 0);
}

void sl_nexmark_event_to_row(const sl_nexmark_event_t *ev, sl_row_writer_t *w) {
    sl_nexmark_event_to_row_fields(ev, 0, w);
}

#define NX_PUT_I64(f, v) \
    do { \
        if (fields & SL_NXF_BIT(f)) sl_rw_set_i64(w, f, v); \
    } while (0)
#define NX_PUT_STR(f, t) \
    do { \
        if (fields & SL_NXF_BIT(f)) sl_rw_set_str(w, f, (t).p, (t).len); \
    } while (0)

void sl_nexmark_event_to_row_fields(const sl_nexmark_event_t *ev, uint64_t fields, sl_row_writer_t *w) {
    if (!fields) fields = ~0ULL;
    sl_rw_set_i32(w, SL_NXF_EVENT_TYPE, ev->type);
    sl_rw_set_i64(w, SL_NXF_DATE_TIME, ev->date_time);
    switch (ev->type) {
    case SL_NX_PERSON:
        NX_PUT_I64(SL_NXF_PERSON_ID, ev->person.id);
        NX_PUT_STR(SL_NXF_PERSON_NAME, ev->person.name);
        NX_PUT_STR(SL_NXF_PERSON_EMAIL, ev->person.email);
        NX_PUT_STR(SL_NXF_PERSON_CREDIT_CARD, ev->person.credit_card);
        NX_PUT_STR(SL_NXF_PERSON_CITY, ev->person.city);
        NX_PUT_STR(SL_NXF_PERSON_STATE, ev->person.state);
        break;
    case SL_NX_AUCTION:
        NX_PUT_I64(SL_NXF_AUCTION_ID, ev->auction.id);
        NX_PUT_STR(SL_NXF_AUCTION_ITEM_NAME, ev->auction.item_name);
        NX_PUT_STR(SL_NXF_AUCTION_DESCRIPTION, ev->auction.description);
        NX_PUT_I64(SL_NXF_AUCTION_INITIAL_BID, ev->auction.initial_bid);
        NX_PUT_I64(SL_NXF_AUCTION_RESERVE, ev->auction.reserve);
        NX_PUT_I64(SL_NXF_AUCTION_EXPIRES, ev->auction.expires);
        NX_PUT_I64(SL_NXF_AUCTION_SELLER, ev->auction.seller);
        NX_PUT_I64(SL_NXF_AUCTION_CATEGORY, ev->auction.category);
        break;
    default:
        NX_PUT_I64(SL_NXF_BID_AUCTION, ev->bid.auction);
        NX_PUT_I64(SL_NXF_BID_BIDDER, ev->bid.bidder);
        NX_PUT_I64(SL_NXF_BID_PRICE, ev->bid.price);
        NX_PUT_STR(SL_NXF_BID_CHANNEL, ev->bid.channel);
        NX_PUT_STR(SL_NXF_BID_URL, ev->bid.url);
        break;
    }
}

uint64_t sl_nexmark_fold(uint64_t h, uint64_t v) { return nx_mix(h ^ v) * NX_GAMMA; }

uint64_t sl_nexmark_text_hash(const char *p, size_t len) {
    uint64_t h = NX_GAMMA ^ (uint64_t)len;
    size_t i = 0;
    for (; i + 8 <= len; i += 8) h = (h ^ sl_ld64(p + i)) * 0xff51afd7ed558ccdULL;
    if (i < len) {
        uint64_t w = 0;
        memcpy(&w, p + i, len - i); /* little-endian: the missing high bytes stay zero */
        h = (h ^ w) * 0xff51afd7ed558ccdULL;
    }
    return nx_mix(h);
}

static uint64_t fold_text(uint64_t h, sl_nexmark_text_t t) { return sl_nexmark_fold(h, sl_nexmark_text_hash(t.p, t.len)); }

uint64_t sl_nexmark_event_hash(const sl_nexmark_event_t *ev) {
    uint64_t h = sl_nexmark_fold(sl_nexmark_fold(0, (uint64_t)ev->type), (uint64_t)ev->date_time);
    switch (ev->type) {
    case SL_NX_PERSON:
        h = sl_nexmark_fold(h, (uint64_t)ev->person.id);
        h = fold_text(h, ev->person.name);
        h = fold_text(h, ev->person.email);
        h = fold_text(h, ev->person.credit_card);
        h = fold_text(h, ev->person.city);
        return fold_text(h, ev->person.state);
    case SL_NX_AUCTION:
        h = sl_nexmark_fold(h, (uint64_t)ev->auction.id);
        h = fold_text(h, ev->auction.item_name);
        h = fold_text(h, ev->auction.description);
        h = sl_nexmark_fold(h, (uint64_t)ev->auction.initial_bid);
        h = sl_nexmark_fold(h, (uint64_t)ev->auction.reserve);
        h = sl_nexmark_fold(h, (uint64_t)ev->auction.expires);
        h = sl_nexmark_fold(h, (uint64_t)ev->auction.seller);
        return sl_nexmark_fold(h, (uint64_t)ev->auction.category);
    default:
        h = sl_nexmark_fold(h, (uint64_t)ev->bid.auction);
        h = sl_nexmark_fold(h, (uint64_t)ev->bid.bidder);
        h = sl_nexmark_fold(h, (uint64_t)ev->bid.price);
        h = fold_text(h, ev->bid.channel);
        return fold_text(h, ev->bid.url);
    }
}

/* ---- the source ----------------------------------------------------------- */

typedef struct nx_source {
    sl_nexmark_opts_t o;
    sl_nexmark_gen_t *gen; /* NULL when the options are bad (reported by create_reader) */
} nx_source_t;

typedef struct nx_split {
    int k;        /* global split id */
    int64_t next; /* local index of the next event: event number k + next * S */
    int64_t end;  /* local events in the split; -1: unbounded */
    bool done;
} nx_split_t;

typedef struct nx_reader {
    const nx_source_t *src;
    int subtask, parallelism, nsplits_total;
    nx_split_t *splits;
    int n, cur, live;
    double rate;     /* this reader's share, events/s; 0: unlimited */
    int64_t t0;      /* schedule origin, monotonic ns (0 until the first poll) */
    int64_t emitted; /* since t0 */
    bool restored_done;
    sl_nexmark_event_t ev;
} nx_reader_t;

static int nx_create_reader(void *ctx, int subtask, int parallelism, void **reader, int *nsplits, char *err,
                            size_t errlen) {
    const nx_source_t *s = ctx;
    int rc = sl_nexmark_check(&s->o, err, errlen);
    if (rc) return rc;
    if (parallelism < 1 || subtask < 0 || subtask >= parallelism)
        return sl_errf(err, errlen, SL_EINVAL, "nexmark: subtask %d of %d", subtask, parallelism);
    nx_reader_t *r = sl_calloc(1, sizeof *r);
    r->src = s;
    r->subtask = subtask;
    r->parallelism = parallelism;
    r->nsplits_total = s->o.splits ? s->o.splits : parallelism;
    int total = r->nsplits_total;
    r->n = subtask < total ? (total - subtask + parallelism - 1) / parallelism : 0;
    r->live = r->n;
    r->splits = sl_calloc((size_t)(r->n ? r->n : 1), sizeof *r->splits);
    for (int j = 0; j < r->n; j++) {
        r->splits[j].k = subtask + j * parallelism;
        r->splits[j].end = sl_nexmark_split_events(&s->o, r->splits[j].k, total);
    }
    r->rate = s->o.rate * r->n / total;
    *reader = r;
    *nsplits = r->n;
    return 0;
}

static int nx_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t errlen) {
    nx_reader_t *r = reader;
    const nx_source_t *s = r->src;
    if (SL_UNLIKELY(r->restored_done)) {
        r->restored_done = false;
        for (int j = 0; j < r->n; j++)
            if (r->splits[j].done) sl_src_split_finished(out, j);
    }
    if (!r->live) return SL_SRC_END;
    int64_t budget = max > 0 ? max : 1;
    if (r->rate > 0) {
        int64_t now = sl_mono_ns();
        if (!r->t0) r->t0 = s->o.start_ns ? s->o.start_ns : now;
        if (now < r->t0) {
            sl_src_idle_until(out, r->t0);
            return SL_SRC_IDLE;
        }
        int64_t allowed = (int64_t)((double)(now - r->t0) * r->rate / 1e9) + 1 - r->emitted;
        if (allowed <= 0) {
            /* The next record is due when (now - t0) * rate = emitted; at
             * high rates, sleep at least NX_MIN_SLEEP_NS and emit what is
             * due then in one batch (fewer wake-ups, each record at most
             * that late). */
            int64_t due = r->t0 + (int64_t)ceil((double)r->emitted * 1e9 / r->rate);
            sl_src_idle_until(out, SL_MAX(due, now + NX_MIN_SLEEP_NS));
            return SL_SRC_IDLE;
        }
        budget = SL_MIN(budget, allowed);
    }
    const int64_t S = r->nsplits_total;
    const bool stamp = s->o.stamp_emit_ns;
    while (budget > 0 && r->live > 0) {
        nx_split_t *sp = &r->splits[r->cur];
        if (!sp->done) {
            int64_t b = SL_MIN(budget, NX_BATCH);
            if (sp->end >= 0) b = SL_MIN(b, sp->end - sp->next);
            for (int64_t i = 0; i < b; i++) {
                int64_t n = sp->k + sp->next++ * S;
                sl_nexmark_gen_event(s->gen, n, &r->ev);
                sl_row_writer_t *w = sl_src_row(out);
                sl_nexmark_event_to_row_fields(&r->ev, s->o.fields, w);
                if (stamp) sl_rw_set_i64(w, SL_NXF_EMIT_NS, sl_mono_ns());
                sl_src_emit(out, r->cur, r->ev.date_time);
            }
            budget -= b;
            r->emitted += b;
            if (sp->end >= 0 && sp->next >= sp->end) {
                sp->done = true;
                r->live--;
                sl_src_split_finished(out, r->cur);
            }
        }
        r->cur = r->cur + 1 == r->n ? 0 : r->cur + 1;
    }
    return r->live ? SL_SRC_MORE : SL_SRC_END;
}

/* Position: u32 total splits, u32 count, then per split u32 global id and
 * i64 next local index (little-endian). */
static int nx_snapshot(void *reader, int64_t id, void (*put)(void *, const void *, size_t), void *pc) {
    nx_reader_t *r = reader;
    uint8_t b[12];
    sl_st32(b, (uint32_t)r->nsplits_total);
    sl_st32(b + 4, (uint32_t)r->n);
    put(pc, b, 8);
    for (int j = 0; j < r->n; j++) {
        sl_st32(b, (uint32_t)r->splits[j].k);
        sl_st64(b + 4, (uint64_t)r->splits[j].next);
        put(pc, b, 12);
    }
    return 0;
}

/* Takes, from every old subtask's position, the splits this reader owns. */
static int nx_restore(void *reader, const void *state, size_t len, char *err, size_t errlen) {
    nx_reader_t *r = reader;
    const uint8_t *p = state, *end = p + len;
    while (p < end) {
        if (end - p < 4) goto bad;
        uint32_t blen = sl_ld32(p);
        p += 4;
        if ((size_t)(end - p) < blen || blen < 8) goto bad;
        const uint8_t *q = p;
        p += blen;
        uint32_t total = sl_ld32(q), n = sl_ld32(q + 4);
        q += 8;
        if ((size_t)blen != 8 + (size_t)n * 12) goto bad;
        if ((int)total != r->nsplits_total)
            return sl_errf(err, errlen, SL_EINVAL,
                           "nexmark: the checkpoint has positions for %u splits, the source has %d "
                           "(set sl_nexmark_opts_t.splits to keep it fixed across parallelisms)",
                           total, r->nsplits_total);
        for (uint32_t i = 0; i < n; i++, q += 12) {
            uint32_t k = sl_ld32(q);
            int64_t next = (int64_t)sl_ld64(q + 4);
            if ((int)k >= r->nsplits_total) goto bad;
            if ((int)k % r->parallelism != r->subtask) continue;
            nx_split_t *sp = &r->splits[((int)k - r->subtask) / r->parallelism];
            if (next < 0 || (sp->end >= 0 && next > sp->end)) goto bad;
            sp->next = next;
            if (sp->end >= 0 && next >= sp->end && !sp->done) {
                sp->done = true;
                r->live--;
                r->restored_done = true;
            }
        }
    }
    r->t0 = 0;
    r->emitted = 0;
    return 0;
bad:
    return sl_errf(err, errlen, SL_EFORMAT, "nexmark: restored positions are malformed");
}

static void nx_destroy_reader(void *reader) {
    nx_reader_t *r = reader;
    if (!r) return;
    sl_free(r->splits);
    sl_free(r);
}

static void nx_destroy(void *ctx) {
    nx_source_t *s = ctx;
    sl_nexmark_gen_free(s->gen);
    sl_free(s);
}

static const sl_source_ops_t nexmark_ops = {
    .name = "nexmark",
    .create_reader = nx_create_reader,
    .poll = nx_poll,
    .destroy_reader = nx_destroy_reader,
    .destroy = nx_destroy,
    .snapshot = nx_snapshot,
    .restore = nx_restore,
};

sl_source_t sl_nexmark_source(sl_nexmark_opts_t opts) {
    nx_source_t *s = sl_calloc(1, sizeof *s);
    s->o = opts;
    char err[256];
    if (sl_nexmark_gen_new(&opts, &s->gen, err, sizeof err) < 0) s->gen = NULL;
    sl_source_t src = {&nexmark_ops, s, sl_nexmark_schema()};
    return src;
}
