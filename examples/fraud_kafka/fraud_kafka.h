/*
 * fraud_kafka.h — scenarios S1 to S4 end to end: the fraud pipeline on a
 * real Kafka broker and a real PostgreSQL server.
 *
 *   Kafka topic `events` (12 partitions, JSON {card_id, amount, ts})
 *     -> event time from the payload, watermark max_ts - 5 s - 1 per
 *        partition, idle partitions left out after idle_timeout_ms
 *     -> key_by(card_id)
 *     -> 5-minute tumbling event-time windows: count and sum per card
 *        (late events -> side output -> Kafka topic `fraud-late`)
 *     -> a fraud decision per window and card (every window row, flagged
 *        when count >= count_threshold or sum >= sum_threshold)
 *     -> Kafka topic `fraud-decisions` (exactly-once by default) and a
 *        PostgreSQL table (two-phase commit)
 *
 * The input comes from fk_produce: a deterministic, seeded set of
 * transactions (late events far behind, one partition left empty, optional
 * poison records), so the demo, the tests and the benchmark have input.
 */
#ifndef SL_FRAUD_KAFKA_H
#define SL_FRAUD_KAFKA_H

#include <stdbool.h>
#include <stdint.h>

#include "sluice/kafka.h"
#include "sluice/sluice.h"

/* ---- the input ----------------------------------------------------------- */

typedef struct fk_gen_opts {
    uint64_t seed;
    int64_t events;         /* transactions over all non-empty partitions */
    int64_t cards;          /* card ids 1..cards */
    int partitions;         /* of the topic (12) */
    int idle_partition;     /* this partition gets nothing (-1: none) */
    int64_t start_ts;       /* event time of the first transaction (ms, window-aligned) */
    int64_t span_ms;        /* event time covered by each partition */
    int64_t max_disorder_ms;/* within a partition, ts is at most this far behind the max so far (< 5 s) */
    int late_per_mille;     /* share of late transactions (after the first quarter of a partition) */
    int64_t late_by_ms;     /* late transactions lie this far before start_ts (and within the hour after) */
    int64_t poison;         /* records that are not transactions (bad JSON, wrong types) */
} fk_gen_opts_t;

typedef struct fk_txn {
    int64_t card_id;
    double amount; /* a multiple of 0.25: sums are exact in any order */
    int64_t ts;
    bool late;     /* generated far behind: late by construction */
} fk_txn_t;

fk_gen_opts_t fk_gen_defaults(void);
/* Transactions in partition p (0 for the idle one). */
int64_t fk_gen_count(const fk_gen_opts_t *g, int p);
/* The i-th transaction of partition p. */
void fk_gen_txn(const fk_gen_opts_t *g, int p, int64_t i, fk_txn_t *out);
/* Poison record k: its partition, the index of the transaction it follows,
 * and its value (into buf). */
void fk_gen_poison(const fk_gen_opts_t *g, int64_t k, int *partition, int64_t *after, char *buf, size_t cap);

typedef struct fk_produce_opts {
    const char *bootstrap;
    const char *topic;      /* created with gen.partitions partitions if missing */
    fk_gen_opts_t gen;
    double rate;            /* records/s (0: as fast as possible) */
    bool wall_clock;        /* ts = the wall clock when produced (latency runs); unbounded if events < 0 */
    int batch;              /* records per producer batch (batch.num.messages; default 100) */
} fk_produce_opts_t;

/* Produces the input; returns 0 or < 0 with a message in err.  *produced
 * gets the records written (poison included). */
int fk_produce(const fk_produce_opts_t *o, int64_t *produced, char *err, size_t errlen);

/* ---- the job ------------------------------------------------------------ */

typedef struct fk_opts {
    const char *bootstrap;
    const char *events_topic;      /* "events" */
    const char *decisions_topic;   /* "fraud-decisions" */
    const char *late_topic;        /* "fraud-late"; NULL or "": late events only counted */
    const char *dead_letter_topic; /* on_error dead-letter: "fraud-dead-letters" */
    const char *conninfo;          /* PostgreSQL; NULL: no table */
    const char *table;             /* "fraud_decisions" */
    const char *job_id;            /* transactional ids, PostgreSQL gids, consumer group */
    int parallelism;
    int64_t checkpoint_interval_ms;
    const char *checkpoint_dir;
    int checkpoints_retained;
    bool restore;                  /* from the latest complete checkpoint in checkpoint_dir, if any */
    sl_delivery_t delivery;        /* of the Kafka sinks: EXACTLY_ONCE (default) or AT_LEAST_ONCE */
    bool bounded;                  /* stop at the end offsets seen at start */
    int64_t window_ms, out_of_orderness_ms, idle_timeout_ms;
    int64_t count_threshold;
    double sum_threshold;
    sl_kafka_error_policy_t on_error;
    int restarts;                  /* fixed-delay attempts inside the process (0: a failure ends it) */
    double throttle;               /* max records/s per source subtask (0: none), so a run spans checkpoints */
    int fetch_kb;                  /* max.partition.fetch.bytes in KiB (0: librdkafka's) */
    const char *commit_log;        /* sinks append pre-commit/commit lines here (tests) */
    bool groups;                   /* source, window and sinks in three slot sharing groups (a cluster) */
    bool v2;                       /* version 2 (scenario S5): a keyed operator with state of its own
                                    * ("card-history": windows seen per card) between the window and
                                    * the sinks; the output is the same */
} fk_opts_t;

/* What the job's functions point to: it must outlive the job (fk_run keeps
 * it on its stack; a cluster job, which outlives its build, in static
 * storage). */
struct fk_throttle {
    double rate;
    int64_t t0_ns, n;
};
struct fk_decide {
    int64_t count_threshold;
    double sum_threshold;
};
typedef struct fk_keep {
    struct fk_throttle th;
    struct fk_decide decide;
} fk_keep_t;

typedef struct fk_summary {
    int64_t records_out;   /* transactions the source emitted */
    int64_t skipped;       /* bad records skipped */
    int64_t decisions;     /* window rows to the sinks */
    int64_t late;          /* late transactions to the side output */
    int64_t checkpoints;
    bool restored;
    double seconds;
} fk_summary_t;

fk_opts_t fk_defaults(void);
/* Builds the job on env (restoring from the latest checkpoint when
 * o->restore); 0, or < 0 with a message in err. */
int fk_build(sl_env_t *env, const fk_opts_t *o, fk_keep_t *keep, bool *restored, char *err, size_t errlen);
/* Builds and runs the job (blocks); 0, or < 0 with a message in err. */
int fk_run(const fk_opts_t *o, fk_summary_t *sum, char *err, size_t errlen);
/* The options of `fraud_kafka produce` (produce) or `run` (argv[0] is the
 * first option) into o / po; 0, or 2 after a message on stderr. */
int fk_parse_args(bool produce, int argc, char **argv, fk_opts_t *o, struct fk_produce_opts *po, bool *no_pg);
/* The options of `run` alone (--no-pg applied). */
int fk_parse_run(int argc, char **argv, fk_opts_t *o);

/* The job's name: its checkpoints are in <checkpoint_dir>/fraud-kafka/. */
#define FK_JOB_NAME "fraud-kafka"

#endif
