/*
 * sluice/kafka.h — Apache Kafka connectors (librdkafka), next to sluice.h.
 *
 * Source (Flink's KafkaSource).  Partitions of the topics are split over the
 * source's subtasks by a fixed rule — partition p of topic t belongs to
 * subtask (h(t) + p) mod parallelism — not by the consumer group, and each
 * partition is one split of the source operator, so watermarks and idleness
 * are per partition.  The next offset of every partition is the source's
 * checkpointed position; a restore seeks to exactly those offsets (and may
 * change the parallelism: each subtask takes the partitions it owns now).
 * The group's committed offsets are only a starting position option and a
 * monitoring aid: they are committed from checkpointed positions (see
 * sl_kafka_source_opts_t.group_id), never read back for correctness.
 *
 * Sink (Flink's KafkaSink) with three delivery guarantees:
 *   NONE           produce and forget (flushed at the end of a bounded input)
 *   AT_LEAST_ONCE  every checkpoint's barrier waits until all records sent
 *                  before it are acknowledged; any delivery error fails the job
 *   EXACTLY_ONCE   records are kept with the checkpoint and committed, when
 *                  the checkpoint completes, in one Kafka transaction that
 *                  also writes a commit marker to a marker topic; after a
 *                  crash the restored checkpoint re-sends exactly the
 *                  checkpoints whose marker is missing.  read_committed
 *                  consumers see nothing before the checkpoint that covers it
 *                  completed, and every record once.
 *
 * Constructors copy every string and take their own schema reference, so
 * the options may live on the caller's stack.  A bad option is reported when
 * the job starts (sl_env_execute), naming the option and what is allowed.
 */
#ifndef SLUICE_KAFKA_H
#define SLUICE_KAFKA_H

#include "sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Record formats: a Kafka record's value <-> one row. */
typedef enum {
    SL_KAFKA_JSON = SL_FMT_JSON, /* one JSON object (src/formats) */
    SL_KAFKA_CSV = SL_FMT_CSV,   /* one CSV record, fields in schema order */
    /* RAW: the value's bytes go into a field named "value" (BYTES or
     * VARCHAR).  Source only: fields named "key" (BYTES/VARCHAR), "topic"
     * (VARCHAR), "partition" (INT/BIGINT), "offset" (BIGINT) and
     * "timestamp" (TIMESTAMP/BIGINT) get the record's metadata. */
    SL_KAFKA_RAW = 2,
} sl_kafka_format_t;

/* ---- source ------------------------------------------------------------ */

typedef enum {
    SL_KAFKA_START_EARLIEST = 0,  /* the earliest offset still in the log */
    SL_KAFKA_START_LATEST = 1,    /* the end of the log when the job starts */
    SL_KAFKA_START_COMMITTED = 2, /* the group's committed offset; else committed_reset */
    SL_KAFKA_START_TIMESTAMP = 3, /* the first record with timestamp >= start_timestamp_ms */
} sl_kafka_start_t;

typedef enum {
    SL_KAFKA_ON_ERROR_FAIL = 0,        /* a record that does not decode fails the job */
    SL_KAFKA_ON_ERROR_SKIP = 1,        /* ... is dropped and counted (sl_env_records_skipped) */
    SL_KAFKA_ON_ERROR_DEAD_LETTER = 2, /* ... goes, raw, to dead_letter_topic with the error */
} sl_kafka_error_policy_t;

typedef struct sl_kafka_source_opts {
    const char *bootstrap_servers; /* "host:port[,host:port]" */
    const char *topics;            /* comma-separated topic names */
    sl_kafka_format_t format;
    sl_schema_t *schema;           /* of the rows (the source takes a reference) */
    sl_kafka_start_t start;        /* where partitions without a restored offset begin */
    int64_t start_timestamp_ms;    /* SL_KAFKA_START_TIMESTAMP */
    sl_kafka_start_t committed_reset; /* START_COMMITTED without a committed offset: EARLIEST or LATEST */
    /* Consumer group: where START_COMMITTED reads offsets and where the
     * source commits (asynchronously, best effort) the offsets of its
     * previous checkpoint at each checkpoint — for monitoring lag only.
     * NULL: no group, nothing committed. */
    const char *group_id;
    /* Bounded: read up to the end offsets of the partitions as they are when
     * the job starts, then finish (Flink's setBounded(latest)). */
    bool bounded;
    /* read_committed (default) or read_uncommitted. */
    bool read_uncommitted;
    /* How often the topics' metadata is read to find new partitions (ms,
     * default 30000; 0: never).  A new partition starts at its earliest
     * offset, as in Flink.  Not in bounded mode. */
    int64_t discovery_interval_ms;
    sl_kafka_error_policy_t on_error;
    /* SL_KAFKA_ON_ERROR_DEAD_LETTER: the topic that receives the raw record
     * (same key and value) with headers sluice.error, sluice.topic,
     * sluice.partition, sluice.offset.  Written at least once: flushed before
     * each checkpoint of the source completes. */
    const char *dead_letter_topic;
    /* Extra librdkafka properties, "key=value" strings, NULL-terminated
     * (may be NULL).  They override sluice's settings. */
    const char *const *properties;
} sl_kafka_source_opts_t;

/* Defaults: JSON, START_EARLIEST (committed_reset EARLIEST), unbounded,
 * read_committed, discovery every 30 s, ON_ERROR_FAIL. */
SL_API sl_kafka_source_opts_t sl_kafka_source_defaults(void);
SL_API sl_source_t sl_kafka_source(const sl_kafka_source_opts_t *opts);

/* ---- sink -------------------------------------------------------------- */

typedef enum {
    SL_DELIVERY_NONE = 0,
    SL_DELIVERY_AT_LEAST_ONCE = 1,
    SL_DELIVERY_EXACTLY_ONCE = 2,
} sl_delivery_t;

typedef struct sl_kafka_sink_opts {
    const char *bootstrap_servers;
    const char *topic;           /* must exist */
    sl_kafka_format_t format;    /* JSON, CSV, or RAW (one field "value") */
    /* The record key: this field's value as text (NULL: no key; records
     * are spread over the partitions).  Keyed records go to the partition
     * Java's producer would pick (murmur2). */
    const char *key_field;
    sl_delivery_t delivery;
    /* EXACTLY_ONCE: the transactional.id of subtask i is "<prefix>-<i>".
     * Unique per sink and job, and the same when the job is restored. */
    const char *transactional_id_prefix;
    /* EXACTLY_ONCE: the job's checkpoint interval (ms), to check the
     * transaction timeout against. */
    int64_t checkpoint_interval_ms;
    /* EXACTLY_ONCE: transaction.timeout.ms.  0: max(60 s, 4 x the interval),
     * capped at the broker's transaction.max.timeout.ms.  A value below 2 x
     * the checkpoint interval or above the broker's maximum is refused. */
    int64_t transaction_timeout_ms;
    /* EXACTLY_ONCE: the topic of commit markers (created, compacted, with one
     * partition, if missing).  Default "__sluice_kafka_sink_commits". */
    const char *marker_topic;
    const char *const *properties; /* extra librdkafka properties, as for the source */
} sl_kafka_sink_opts_t;

/* Defaults: JSON, no key, AT_LEAST_ONCE, automatic transaction timeout,
 * marker topic "__sluice_kafka_sink_commits". */
SL_API sl_kafka_sink_opts_t sl_kafka_sink_defaults(void);
SL_API sl_sink_t sl_kafka_sink(const sl_kafka_sink_opts_t *opts);

/* ---- helpers for tools and examples ----------------------------------- */

/* Creates `topic` with `partitions` partitions (replication factor: the
 * broker's default) if it does not exist, and checks that it has exactly
 * that many.  0, or SL_EINVAL (a different partition count) / SL_EIO (the
 * broker), with a message naming the topic.  Blocks for at most ~15 s per
 * broker call; any thread. */
SL_API int sl_kafka_ensure_topic(const char *bootstrap_servers, const char *topic, int partitions, char *err,
                                 size_t errlen);

/* One record, as sl_kafka_read_topic hands it over (borrowed for the call). */
typedef struct sl_kafka_record {
    const char *topic;
    int32_t partition;
    int64_t offset;
    int64_t timestamp_ms;  /* -1 when the record has none */
    const void *key;       /* NULL: no key */
    size_t key_len;
    const void *value;     /* NULL: a tombstone */
    size_t value_len;
} sl_kafka_record_t;
typedef int (*sl_kafka_record_fn)(void *ctx, const sl_kafka_record_t *r);

/* Reads every record of every partition of `topic`, from the beginning up
 * to the end of the log as it is when called, calling fn for each (a
 * non-zero return stops the read and is returned).  read_committed: records
 * of aborted transactions are skipped, and the read waits — at most
 * timeout_ms — until transactions open at the start are decided.  0 or a
 * negative SL_E* code with a message naming the broker or topic.
 * Blocks the calling thread; any thread. */
SL_API int sl_kafka_read_topic(const char *bootstrap_servers, const char *topic, bool read_committed,
                               sl_kafka_record_fn fn, void *ctx, int timeout_ms, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif
