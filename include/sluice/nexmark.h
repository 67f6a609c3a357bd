/*
 * sluice/nexmark.h — the Nexmark event generator (persons, auctions, bids)
 * as a sluice source, and its event function.
 *
 * The stream follows the Nexmark generator used by Flink's nexmark project
 * and Beam's NexmarkGenerator: event number n is a person when n % 50 == 0,
 * an auction when n % 50 is 1..3 and a bid otherwise (1 : 3 : 46); ids come
 * from the event number (person 1000 + n/50, auction 1000 + 3*(n/50) + ...);
 * sellers, bidders and auctions are "hot" with the configured ratios (a hot
 * seller is the first of the last batch of 100 persons, a hot bidder the
 * second, a hot auction the first of the last batch of 100 auctions), others
 * are drawn among the last num_active_people persons / num_in_flight_auctions
 * auctions plus a lead of 10 not yet created; prices are log-uniform in
 * [1.00, 1,000,000.00] (cents); an auction lasts on average as long as it
 * takes to create num_in_flight_auctions more auctions.  Event time:
 * date_time(n) = base_time_ms + (int64)(n * inter_event_delay_us) / 1000.
 *
 * Unlike those generators, every event is a pure function of (seed, n): its
 * random draws come from a counter-based generator (splitmix64) keyed by
 * seed and n, and the strings, prices and tables use integer arithmetic and
 * IEEE basic operations only, so a port (bench/nexmark's Java generator)
 * produces the same events bit for bit.  The "extra" padding field of the
 * original is not generated.
 *
 * Splits: split k of S carries the events n = k, k + S, k + 2S, ... in
 * order, so the union of the splits is the same event stream whatever S
 * and the parallelism are, and every split's event time advances at the
 * same pace (watermarks of different splits stay close).  Split k is read
 * by subtask k % parallelism.  Positions are checkpointed per split.
 *
 * One row schema for all three kinds (sl_nexmark_schema): event_type and
 * date_time, then the person, auction and bid fields, NULL for the other
 * kinds — the shape of Flink nexmark's datagen table, flattened.
 */
#ifndef SLUICE_NEXMARK_H
#define SLUICE_NEXMARK_H

#include "sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

enum { SL_NX_PERSON = 0, SL_NX_AUCTION = 1, SL_NX_BID = 2 };

/* Field indexes of sl_nexmark_schema(). */
enum {
    SL_NXF_EVENT_TYPE = 0,  /* INT NOT NULL: SL_NX_PERSON / AUCTION / BID */
    SL_NXF_DATE_TIME,       /* TIMESTAMP(3) NOT NULL: event time */
    SL_NXF_PERSON_ID,       /* BIGINT */
    SL_NXF_PERSON_NAME,     /* VARCHAR */
    SL_NXF_PERSON_EMAIL,    /* VARCHAR */
    SL_NXF_PERSON_CREDIT_CARD, /* VARCHAR */
    SL_NXF_PERSON_CITY,     /* VARCHAR */
    SL_NXF_PERSON_STATE,    /* VARCHAR */
    SL_NXF_AUCTION_ID,      /* BIGINT */
    SL_NXF_AUCTION_ITEM_NAME, /* VARCHAR */
    SL_NXF_AUCTION_DESCRIPTION, /* VARCHAR */
    SL_NXF_AUCTION_INITIAL_BID, /* BIGINT */
    SL_NXF_AUCTION_RESERVE, /* BIGINT */
    SL_NXF_AUCTION_EXPIRES, /* TIMESTAMP(3) */
    SL_NXF_AUCTION_SELLER,  /* BIGINT */
    SL_NXF_AUCTION_CATEGORY, /* BIGINT */
    SL_NXF_BID_AUCTION,     /* BIGINT */
    SL_NXF_BID_BIDDER,      /* BIGINT */
    SL_NXF_BID_PRICE,       /* BIGINT (cents) */
    SL_NXF_BID_CHANNEL,     /* VARCHAR */
    SL_NXF_BID_URL,         /* VARCHAR */
    SL_NXF_EMIT_NS,         /* BIGINT: monotonic ns at emission (stamp_emit_ns), else NULL */
    SL_NXF_COUNT
};

typedef struct sl_nexmark_opts {
    uint64_t seed;
    int64_t events;              /* total over all splits; -1: unbounded */
    int splits;                  /* total splits; 0: one per subtask of the source */
    int64_t base_time_ms;        /* date_time of event 0 */
    double inter_event_delay_us; /* event time between consecutive events (0.1: Nexmark's 10M/s) */
    double rate;                 /* emission, events/s over all splits; 0: as fast as possible */
    int64_t start_ns;            /* origin of the rate schedule (sl_mono_ns clock) shared by every
                                  * reader; 0: each reader starts its schedule at its first poll */
    bool stamp_emit_ns;          /* fill emit_ns (latency measurements) */
    int num_active_people;       /* 1000 */
    int num_in_flight_auctions;  /* 100 */
    int hot_auction_ratio;       /* 2: half the bids go to the hot auction */
    int hot_sellers_ratio;       /* 4 */
    int hot_bidders_ratio;       /* 4 */
    /* Projection pushed into the source: the fields to produce, a set of
     * SL_NXF_BIT(SL_NXF_...) (event_type and date_time are always produced,
     * emit_ns follows stamp_emit_ns); 0: every field.  A field left out is
     * NULL in every row, its text is neither generated nor copied — the
     * events stay the same (every random draw is still taken), so results
     * of a query that lists every field it reads do not change. */
    uint64_t fields;
} sl_nexmark_opts_t;

#define SL_NXF_BIT(f) (1ULL << (f))

SL_API sl_nexmark_opts_t sl_nexmark_defaults(void);
/* Checks the options: 0, or SL_EINVAL with a message naming the option. */
SL_API int sl_nexmark_check(const sl_nexmark_opts_t *o, char *err, size_t errlen);
/* A new reference to the row schema of every event (see the SL_NXF_ indexes). */
SL_API sl_schema_t *sl_nexmark_schema(void);
/* The source.  Bad options are reported when the job starts (by name). */
SL_API sl_source_t sl_nexmark_source(sl_nexmark_opts_t opts);
/* In a rate-limited run with start_ns set: the monotonic time (ns) at which
 * the first event with date_time >= t_ms is due, start_ns + n / rate for
 * n = ceil((t_ms - base_time_ms) * 1000 / inter_event_delay_us). */
SL_API int64_t sl_nexmark_due_ns(const sl_nexmark_opts_t *o, int64_t t_ms);

/* ---- the event function ------------------------------------------------ */

typedef struct sl_nexmark_text {
    const char *p; /* not NUL-terminated */
    uint32_t len;
} sl_nexmark_text_t;

/* One event.  Text fields point into the event's own buffer or into the
 * generator's tables: valid until the event is regenerated or the
 * generator freed; do not copy the struct and keep using the copy's text. */
typedef struct sl_nexmark_event {
    int type; /* SL_NX_PERSON / AUCTION / BID */
    int64_t date_time;
    struct {
        int64_t id;
        sl_nexmark_text_t name, email, credit_card, city, state;
    } person;
    struct {
        int64_t id, initial_bid, reserve, expires, seller, category;
        sl_nexmark_text_t item_name, description;
    } auction;
    struct {
        int64_t auction, bidder, price;
        sl_nexmark_text_t channel, url;
    } bid;
    char buf[256];
} sl_nexmark_event_t;

typedef struct sl_nexmark_gen sl_nexmark_gen_t;

/* A generator for the options (its channel/URL tables are built here).
 * Returns 0 or SL_EINVAL with a message. */
SL_API int sl_nexmark_gen_new(const sl_nexmark_opts_t *o, sl_nexmark_gen_t **out, char *err, size_t errlen);
SL_API void sl_nexmark_gen_free(sl_nexmark_gen_t *g);
/* Event number n (0-based, global over all splits). */
SL_API void sl_nexmark_gen_event(const sl_nexmark_gen_t *g, int64_t n, sl_nexmark_event_t *ev);
/* Writes the event as a row of sl_nexmark_schema() (emit_ns NULL). */
SL_API void sl_nexmark_event_to_row(const sl_nexmark_event_t *ev, sl_row_writer_t *w);
/* The same, only the fields of the set `fields` (SL_NXF_BIT; 0: all; the
 * others NULL).  The text of a field outside the generator's own
 * sl_nexmark_opts_t.fields was not generated: do not ask for it here. */
SL_API void sl_nexmark_event_to_row_fields(const sl_nexmark_event_t *ev, uint64_t fields, sl_row_writer_t *w);
/* Event time of event n. */
SL_API int64_t sl_nexmark_date_time(const sl_nexmark_opts_t *o, int64_t n);
/* Events in split k of nsplits (of o->events); -1 when unbounded. */
SL_API int64_t sl_nexmark_split_events(const sl_nexmark_opts_t *o, int k, int nsplits);

/* Hash of one event, the same in every port of the generator:
 *   fold(h, v) = mix(h ^ v) * 0x9e3779b97f4a7c15 (mod 2^64), mix = the
 *   splitmix64 finalizer; text: t = 0x9e3779b97f4a7c15 ^ length, then for
 *   each 8-byte little-endian word w (the last one zero-padded)
 *   t = (t ^ w) * 0xff51afd7ed558ccd, and the text's hash is mix(t);
 *   h = fold(fold(0, type), date_time), then the kind's fields in Nexmark's
 *   order (person: id name email credit_card city state;
 *   auction: id item_name description initial_bid reserve expires seller
 *   category; bid: auction bidder price channel url).
 * The stream checksum of events 0..N-1 is c = fold(c, hash(event n)) from
 * c = 0, in order. */
SL_API uint64_t sl_nexmark_event_hash(const sl_nexmark_event_t *ev);
SL_API uint64_t sl_nexmark_fold(uint64_t h, uint64_t v);
SL_API uint64_t sl_nexmark_text_hash(const char *p, size_t len);

#ifdef __cplusplus
}
#endif
#endif
