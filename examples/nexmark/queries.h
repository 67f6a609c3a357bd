/*
 * queries.h — the Nexmark queries written on sluice's public C API (one
 * file per query), shared by the `nexmark` driver and tests/test_nexmark.c.
 *
 * Every query takes the stream of Nexmark events (sl_nexmark_source with
 * event time from date_time) and returns its result stream; the caller adds
 * the sink; `o` must stay valid until sl_env_execute returns (process
 * functions copy it into each subtask's context when the job starts).
 * bench/nexmark/.../Queries.java has the same queries on Flink's DataStream
 * API, operator for operator.
 *
 *   q0  pass-through      bids projected (auction, bidder, price, channel, url, date_time)
 *   q1  currency          bids with price * 0.908 (dollars to euros)
 *   q2  selection         bids with auction % 123 == 0: (auction, price)
 *   q3  local items       persons in OR/ID/CA joined with their category-10 auctions:
 *                         connect + keyed co-process, both sides in keyed state
 *   q4  average price     per auction the highest bid between its start and its expiry
 *       per category      (keyed process: auction state, event-time timer at expiry),
 *                         then per category a running average (keyed process)
 *   q5  hot items         bids per auction in 10 s windows sliding by 2 s, then per
 *                         window the auctions with the most bids (keyed process + timer)
 *   q7  highest bid       per 10 s tumbling window the bids with the highest price:
 *                         per auction pre-aggregation in the window, then per window
 *   q8  new users         persons who opened an auction in the 10 s tumbling window in
 *                         which they registered (window join)
 *   q11 user sessions     bids per bidder per session (gap 10 s)
 *
 * Two more measure the DataStream toolkit (not in Nexmark):
 *   ij  interval join     bids joined with their auction when they come at most 1 s after it
 *   cep pattern           per bidder a bid below 100.00 followed by one above 10,000.00
 *                         within 1 s (CEP, skip past last event)
 */
#ifndef NEXMARK_QUERIES_H
#define NEXMARK_QUERIES_H

#include "sluice/nexmark.h"
#include "sluice/sluice.h"

typedef struct nx_query_opts {
    int64_t window_ms;        /* q5 window size, q7 and q8 windows: 10 s */
    int64_t slide_ms;         /* q5 slide: 2 s */
    int64_t session_gap_ms;   /* q11: 10 s */
    int64_t q4_retention_ms;  /* q4: how long a closed auction is remembered (1 s) */
} nx_query_opts_t;

nx_query_opts_t nx_query_defaults(void);

typedef sl_stream_t *(*nx_build_fn)(sl_stream_t *events, const nx_query_opts_t *o);

typedef struct nx_query {
    const char *name;          /* "q0" ... */
    const char *title;
    nx_build_fn build;
    /* Output fields left out of the result checksum, comma-separated
     * (emit_ns is always left out): fields whose value depends on the
     * order in which parallel subtasks' records arrive. */
    const char *checksum_skip;
    /* Latency: true when each result follows from one input event (its
     * emit_ns is in the output); false when results wait for the watermark
     * to pass the result's timestamp. */
    bool per_record;
    /* The event fields the query reads (SL_NXF_BIT set; event_type and
     * date_time are always there): the projection pushed into the source
     * (sl_nexmark_opts_t.fields), so that the others are neither generated
     * nor copied.  tests/test_nexmark.c runs every query with it against a
     * reference over full events: a field missing here fails the test. */
    uint64_t fields;
} nx_query_t;

/* The queries, NULL-terminated, and lookup by name (NULL: none). */
extern const nx_query_t nx_queries[];
const nx_query_t *nx_query_find(const char *name);
/* The queries as a job (sluice/job.h's entry): QUERY EVENTS [--p=P]
 * [--checkpoint=MS]; nexmark_job_build.c. */
int nx_job_build(sl_env_t *env, int argc, char **argv);

sl_stream_t *nx_q0(sl_stream_t *events, const nx_query_opts_t *o);
sl_stream_t *nx_q1(sl_stream_t *events, const nx_query_opts_t *o);
sl_stream_t *nx_q2(sl_stream_t *events, const nx_query_opts_t *o);
sl_stream_t *nx_q3(sl_stream_t *events, const nx_query_opts_t *o);
sl_stream_t *nx_q4(sl_stream_t *events, const nx_query_opts_t *o);
sl_stream_t *nx_q5(sl_stream_t *events, const nx_query_opts_t *o);
sl_stream_t *nx_q7(sl_stream_t *events, const nx_query_opts_t *o);
sl_stream_t *nx_q8(sl_stream_t *events, const nx_query_opts_t *o);
sl_stream_t *nx_q11(sl_stream_t *events, const nx_query_opts_t *o);
sl_stream_t *nx_ij(sl_stream_t *events, const nx_query_opts_t *o);
sl_stream_t *nx_cep(sl_stream_t *events, const nx_query_opts_t *o);

/* Helpers shared by the queries. */
int nx_is_bid(void *ctx, const sl_record_t *in);
int nx_is_person(void *ctx, const sl_record_t *in);
int nx_is_auction(void *ctx, const sl_record_t *in);
/* Per-subtask context of process functions: NX_CTX_BYTES, starting with a
 * copy of the nx_query_opts_t given as the root context. */
#define NX_CTX_BYTES 256
void *nx_ctx_clone(const void *ctx);
void nx_ctx_free(void *ctx);

/* Order-independent result checksum: a record's hash is the sum (mod 2^64)
 * of nx_field(k, v) over its output fields k = 0, 1, ... (in schema order,
 * minus the skipped ones): BIGINT/INT/TIMESTAMP their value, DOUBLE its IEEE
 * bits, BOOLEAN 0/1, VARCHAR sl_nexmark_text_hash, NULL 0x6e756c6c; the
 * checksum is the sum of the record hashes.  The fields' terms are
 * independent, so they are computed side by side (a chain of folds would
 * cost a multiply chain per field); bench/nexmark's Java computes the same. */
typedef struct nx_row_hasher {
    int n;
    int fields[64];
    sl_type_t types[64];
} nx_row_hasher_t;
/* mix(v ^ (k + 1) * 0x9e3779b97f4a7c15), mix = the splitmix64 finalizer. */
static inline uint64_t nx_field(int k, uint64_t v) {
    uint64_t z = v ^ ((uint64_t)(k + 1) * 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
int nx_row_hasher_init(nx_row_hasher_t *h, const sl_schema_t *s, const char *skip);
uint64_t nx_row_hash(const nx_row_hasher_t *h, const sl_row_t *row);

#endif
