/*
 * connectors.h — internals of the built-in connectors (sluice.h declares
 * their public constructors): the datagen event function, so tests and
 * verifiers can recompute what a split produced, and the counting sink's
 * stats lifetime.
 *
 * Schema references: every constructor takes its own reference on the
 * schema it is given (the caller keeps theirs) and puts one reference in
 * sl_source_t.schema, which whoever holds the sl_source_t releases (the
 * stream graph, or the test that built it).
 */
#ifndef SL_CONNECTORS_H
#define SL_CONNECTORS_H

#include <stdbool.h>
#include <stdint.h>

#include "sluice/sluice.h"

/* ---- datagen -------------------------------------------------------- */

typedef struct sl_datagen_event {
    int64_t card_id;
    double amount;   /* 1.00 .. 500.00, whole cents */
    int64_t ts;      /* event time, ms */
    bool late;       /* one of the late_fraction events */
} sl_datagen_event_t;

/* Checks the options; 0 or SL_EINVAL with a message. */
int sl_datagen_check(const sl_datagen_opts_t *o, char *err, size_t errlen);
/* Events in split `split` (of o->splits): count/splits, plus one for the
 * first count % splits splits; -1 when unbounded. */
int64_t sl_datagen_split_count(const sl_datagen_opts_t *o, int split);
/* Event `index` of split `split`: a pure function of (seed, split, index)
 * and the shape options, independent of parallelism. */
void sl_datagen_event(const sl_datagen_opts_t *o, int split, int64_t index, sl_datagen_event_t *ev);

/* ---- counting sink ---------------------------------------------------- */

/* The stats of a counting sink are reference-counted: the sink holds one
 * reference (dropped when the job's sink is destroyed) and *stats_out the
 * other, which the caller drops with sl_counting_sink_stats_free() when done
 * reading (before or after the job ends). */
void sl_counting_sink_stats_free(sl_counting_sink_stats_t *s);
/* Order-independent checksum of everything counted: the sum of the xxh3
 * hashes of the row bytes (two runs that saw the same multiset of rows
 * agree). */
uint64_t sl_counting_sink_checksum(const sl_counting_sink_stats_t *s);

#endif
