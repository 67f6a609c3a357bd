/*
 * kafka_common.h — what the Kafka source and sink share (librdkafka): client
 * configuration, the admin calls they need (create a topic, read a broker's
 * setting), a bounded read of a whole topic, and the partition ownership
 * rule of the source.
 *
 * Every function here blocks the calling thread for at most its timeout and
 * reports failures as a negative SL_E* code with a message naming the
 * broker, topic or setting involved.
 */
#ifndef SL_KAFKA_COMMON_H
#define SL_KAFKA_COMMON_H

#include <librdkafka/rdkafka.h>

#include "common/common.h"
#include "sluice/kafka.h"

/* Timeouts of blocking calls (metadata, admin, offsets), ms. */
#define SL_KAFKA_CALL_TIMEOUT_MS 15000

/* A NULL-terminated list of "key=value" strings, owned. */
char **sl_kafka_props_copy(const char *const *props);
void sl_kafka_props_free(char **props);

/* A client configuration: bootstrap.servers, then sluice's defaults (pairs
 * "key", "value", ..., NULL), then the user's properties (which win).
 * Returns NULL with a message naming the bad property. */
rd_kafka_conf_t *sl_kafka_conf_new(const char *bootstrap, char *const *user_props, const char *const *defaults,
                                   char *err, size_t errlen);

/* Creates a client (takes ownership of conf, also on failure). */
rd_kafka_t *sl_kafka_client_new(rd_kafka_type_t type, rd_kafka_conf_t *conf, char *err, size_t errlen);

/* Creates `topic` with `partitions` partitions (replication factor: the
 * broker's default) and configs (pairs, NULL-terminated; may be NULL).  An
 * existing topic is fine (0). */
int sl_kafka_create_topic(rd_kafka_t *rk, const char *topic, int partitions, const char *const *configs, char *err,
                          size_t errlen);

/* The number of partitions of each topic (0 for a topic that does not
 * exist), in the order given. */
int sl_kafka_partition_counts(rd_kafka_t *rk, const char *const *topics, int ntopics, int *counts, int timeout_ms,
                              char *err, size_t errlen);

/* A broker setting (e.g. transaction.max.timeout.ms) of any broker of the
 * cluster, as text, into out. */
int sl_kafka_broker_config(rd_kafka_t *rk, const char *name, char *out, size_t cap, char *err, size_t errlen);

/* Reads every record of every partition of `topic` from the beginning up to
 * the end of the log as it is when called, calling fn for each (a non-zero
 * return stops the scan and is returned).  read_committed: records of
 * aborted transactions are skipped, and the scan waits — at most timeout_ms
 * — until transactions open at the start are decided.  0 or an error. */
typedef int (*sl_kafka_scan_fn)(void *ctx, const rd_kafka_message_t *m);
int sl_kafka_scan(const char *bootstrap, char *const *user_props, const char *topic, bool read_committed,
                  sl_kafka_scan_fn fn, void *ctx, int timeout_ms, char *err, size_t errlen);

/* The subtask that owns partition p of topic t (Flink's rule, with our hash). */
int sl_kafka_owner(const char *topic, int32_t partition, int parallelism);

/* The message of a librdkafka error object, which it destroys. */
const char *sl_kafka_error_text(rd_kafka_error_t *e, char *buf, size_t cap);

#endif
