/*
 * kafka_source.c — the Kafka source (Flink's KafkaSource) on librdkafka.
 *
 * Splits.  Each subtask's reader owns the partitions p of topic t with
 * sl_kafka_owner(t, p, parallelism) == subtask and assigns them to its own
 * consumer (rd_kafka_assign: no group membership, no rebalancing).  Every
 * owned partition is one split of the source operator, numbered in the
 * order the reader came to own it, so watermarks and idleness are per
 * partition; a partition found later by the periodic metadata refresh gets
 * a new split (sl_src_add_split) and starts at its earliest offset.
 *
 * Fairness.  Each partition's fetch queue is its own (taken off the
 * consumer's before fetching starts) and a poll takes an equal share from
 * each in turn, so partitions advance together however their fetches
 * interleave: a partition whose first fetch comes late does not find the
 * others already far ahead of the watermark it holds back.
 *
 * Positions.  Per partition the reader keeps `next`, the offset after the
 * last record it emitted.  A checkpoint writes (topic, partition, next) for
 * every owned partition; a restore receives the union over the old
 * subtasks and keeps the partitions this subtask owns now, so the job may
 * change its parallelism.  Starting offsets are resolved to concrete numbers
 * before the first record (a checkpoint taken before any record still
 * restores to the same place).  auto.offset.reset is "error": a position
 * that left the log fails the job instead of silently skipping.
 *
 * Records.  JSON and CSV values are decoded into the schema's row; RAW puts
 * the value's bytes into the field "value" and the record's metadata into
 * "key", "topic", "partition", "offset", "timestamp" where the schema has
 * them.  The record's Kafka timestamp is its event time unless the watermark
 * strategy assigns one.  A record that does not decode fails the job, is
 * skipped and counted, or is sent raw to a dead-letter topic with the error
 * in its headers (at least once: the dead-letter producer is flushed at
 * every checkpoint, before the position is written).
 *
 * Group offsets.  With a group id, the positions of each checkpoint are
 * committed (asynchronously) to the group when the checkpoint completes
 * (notify_checkpoint_complete) — for monitoring only, as Flink does.
 *
 * Threads: the reader runs on its source task's thread only.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "connectors/kafka_common.h"
#include "formats/format.h"

#define KS_MAGIC 0x504b4c53u /* "SLKP" */
#define KS_VERSION 1u
#define KS_UNRESOLVED INT64_MIN
#define KS_DISCOVERY_TIMEOUT_MS 2000

typedef struct ks_ctx {
    char *bootstrap;
    char **topics;
    int ntopics;
    sl_kafka_format_t fmt;
    sl_schema_t *schema; /* ref held */
    sl_kafka_start_t start, reset;
    int64_t start_ts;
    char *group;
    bool bounded, uncommitted;
    int64_t discovery_ms;
    sl_kafka_error_policy_t policy;
    char *dlq;
    char **props;
    char opt_err[512]; /* a bad option, reported when a reader is created */
    /* RAW: field indexes (-1: absent) */
    int f_value, f_key, f_topic, f_partition, f_offset, f_ts;
} ks_ctx_t;

typedef struct ks_part {
    int topic; /* index into ctx->topics */
    int32_t partition;
    int64_t next; /* next offset to emit, or KS_UNRESOLVED */
    int64_t stop; /* bounded: the end offset; -1 unbounded */
    bool done;
    rd_kafka_queue_t *q; /* its own fetch queue (not forwarded to the consumer's) */
} ks_part_t;

typedef struct ks_pos {
    int topic;
    int32_t partition;
    int64_t next;
} ks_pos_t;

#define KS_PENDING 8 /* checkpoints in flight whose positions are kept */

typedef struct ks_reader {
    const ks_ctx_t *ctx;
    int subtask, parallelism;
    rd_kafka_t *rk;
    rd_kafka_queue_t *q;
    ks_part_t *parts; /* split i is parts[i] */
    int nparts, live;
    int rr; /* the split the next poll starts with */
    int **index; /* per topic: partition -> part index, or -1 */
    int *known;  /* per topic: partitions known */
    ks_pos_t *restored; /* restored positions of partitions not (yet) known */
    int nrestored;
    bool started;
    int64_t next_discovery; /* monotonic ms */
    sl_decoder_t dec;
    rd_kafka_message_t **batch;
    /* dead letters */
    rd_kafka_t *dlq;
    rd_kafka_topic_t *dlq_topic;
    int dlq_failed;
    char dlq_msg[512];
    /* positions of checkpoints not yet known complete, oldest first,
     * committed to the group when one completes */
    struct ks_pending {
        int64_t id;
        rd_kafka_topic_partition_list_t *pos;
    } pending[KS_PENDING];
    int npending;
    int failed;
    char failmsg[1024];
} ks_reader_t;

#define KS_BATCH 512

static int64_t mono_ms(void) { return sl_mono_ns() / 1000000; }

static void reader_free(ks_reader_t *r) {
    if (!r) return;
    for (int i = 0; i < r->nparts; i++)
        if (r->parts[i].q) rd_kafka_queue_destroy(r->parts[i].q);
    if (r->q) rd_kafka_queue_destroy(r->q);
    if (r->rk) {
        rd_kafka_consumer_close(r->rk);
        rd_kafka_destroy(r->rk);
    }
    if (r->dlq_topic) rd_kafka_topic_destroy(r->dlq_topic);
    if (r->dlq) {
        rd_kafka_flush(r->dlq, 5000);
        rd_kafka_destroy(r->dlq);
    }
    for (int i = 0; i < r->npending; i++) rd_kafka_topic_partition_list_destroy(r->pending[i].pos);
    for (int t = 0; r->index && t < r->ctx->ntopics; t++) sl_free(r->index[t]);
    sl_free(r->index);
    sl_free(r->known);
    sl_free(r->parts);
    sl_free(r->restored);
    sl_free(r->batch);
    sl_decoder_free(&r->dec);
    sl_free(r);
}

static void ks_destroy_reader(void *reader) { reader_free(reader); }

/* Called on the reader's thread from rd_kafka_poll / rd_kafka_flush. */
static void dlq_delivered(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    ks_reader_t *r = opaque;
    if (m->err && !r->dlq_failed) {
        r->dlq_failed = SL_EIO;
        snprintf(r->dlq_msg, sizeof r->dlq_msg, "kafka source: cannot write a dead letter to topic '%s': %s",
                 r->ctx->dlq, rd_kafka_err2str(m->err));
    }
}

/* Makes partition p of topic t known: a new part (and split). */
static ks_part_t *add_part(ks_reader_t *r, int t, int32_t p) {
    r->parts = sl_realloc(r->parts, (size_t)(r->nparts + 1) * sizeof *r->parts);
    ks_part_t *pt = &r->parts[r->nparts];
    pt->topic = t;
    pt->partition = p;
    pt->next = KS_UNRESOLVED;
    pt->stop = -1;
    pt->done = false;
    pt->q = NULL;
    if (p >= r->known[t]) {
        r->index[t] = sl_realloc(r->index[t], (size_t)(p + 1) * sizeof(int));
        for (int i = r->known[t]; i <= p; i++) r->index[t][i] = -1;
        r->known[t] = p + 1;
    }
    r->index[t][p] = r->nparts;
    for (int i = 0; i < r->nrestored; i++)
        if (r->restored[i].topic == t && r->restored[i].partition == p) {
            pt->next = r->restored[i].next;
            r->restored[i] = r->restored[--r->nrestored];
            break;
        }
    r->nparts++;
    r->live++;
    return pt;
}

static int ks_create_reader(void *vctx, int subtask, int parallelism, void **reader, int *nsplits, char *err,
                            size_t errlen) {
    const ks_ctx_t *ctx = vctx;
    if (ctx->opt_err[0]) return sl_errf(err, errlen, SL_EINVAL, "%s", ctx->opt_err);
    ks_reader_t *r = sl_calloc(1, sizeof *r);
    r->ctx = ctx;
    r->subtask = subtask;
    r->parallelism = parallelism;
    r->index = sl_calloc((size_t)ctx->ntopics, sizeof *r->index);
    r->known = sl_calloc((size_t)ctx->ntopics, sizeof *r->known);
    r->batch = sl_calloc(KS_BATCH, sizeof *r->batch);
    sl_decoder_init(&r->dec, ctx->fmt == SL_KAFKA_CSV ? SL_FMT_CSV : SL_FMT_JSON, ctx->schema);
    char group[128], client[64];
    if (ctx->group)
        snprintf(group, sizeof group, "%s", ctx->group);
    else /* assign() needs a group id; nothing is ever committed to this one */
        snprintf(group, sizeof group, "sluice-source-%016" PRIx64, sl_mix64((uint64_t)sl_mono_ns() ^ (uint64_t)subtask));
    snprintf(client, sizeof client, "sluice-source-%d", subtask);
    const char *defaults[] = {"group.id", ctx->group ? ctx->group : group,
                              "client.id", client,
                              "enable.auto.commit", "false",
                              "enable.auto.offset.store", "false",
                              "auto.offset.reset", "error",
                              "enable.partition.eof", ctx->bounded ? "true" : "false",
                              "isolation.level", ctx->uncommitted ? "read_uncommitted" : "read_committed",
                              "fetch.wait.max.ms", "100",
                              "queued.max.messages.kbytes", "16384",
                              NULL};
    rd_kafka_conf_t *conf = sl_kafka_conf_new(ctx->bootstrap, ctx->props, defaults, err, errlen);
    int rc = conf ? 0 : SL_EINVAL;
    if (!rc && !(r->rk = sl_kafka_client_new(RD_KAFKA_CONSUMER, conf, err, errlen))) rc = SL_EINVAL;
    if (!rc) {
        rd_kafka_poll_set_consumer(r->rk);
        r->q = rd_kafka_queue_get_consumer(r->rk);
        int *counts = sl_calloc((size_t)ctx->ntopics, sizeof *counts);
        rc = sl_kafka_partition_counts(r->rk, (const char *const *)ctx->topics, ctx->ntopics, counts,
                                       SL_KAFKA_CALL_TIMEOUT_MS, err, errlen);
        for (int t = 0; !rc && t < ctx->ntopics; t++) {
            if (counts[t] == 0) {
                rc = sl_errf(err, errlen, SL_ENOTFOUND, "kafka source: topic '%s' does not exist on %s", ctx->topics[t],
                             ctx->bootstrap);
                break;
            }
            for (int32_t p = 0; p < counts[t]; p++)
                if (sl_kafka_owner(ctx->topics[t], p, parallelism) == subtask) add_part(r, t, p);
            if (r->known[t] < counts[t]) { /* know every partition, owned or not */
                r->index[t] = sl_realloc(r->index[t], (size_t)counts[t] * sizeof(int));
                for (int i = r->known[t]; i < counts[t]; i++) r->index[t][i] = -1;
                r->known[t] = counts[t];
            }
        }
        sl_free(counts);
    }
    if (!rc && ctx->policy == SL_KAFKA_ON_ERROR_DEAD_LETTER) {
        snprintf(client, sizeof client, "sluice-dead-letters-%d", subtask);
        const char *pdefaults[] = {"client.id", client, "enable.idempotence", "true", "linger.ms", "5", NULL};
        rd_kafka_conf_t *pc = sl_kafka_conf_new(ctx->bootstrap, ctx->props, pdefaults, err, errlen);
        if (!pc) {
            rc = SL_EINVAL;
        } else {
            rd_kafka_conf_set_dr_msg_cb(pc, dlq_delivered);
            rd_kafka_conf_set_opaque(pc, r);
            if (!(r->dlq = sl_kafka_client_new(RD_KAFKA_PRODUCER, pc, err, errlen))) rc = SL_EINVAL;
            else r->dlq_topic = rd_kafka_topic_new(r->dlq, ctx->dlq, NULL);
        }
    }
    if (rc) {
        reader_free(r);
        return rc;
    }
    r->live = r->nparts;
    r->next_discovery = ctx->discovery_ms > 0 && !ctx->bounded ? mono_ms() + ctx->discovery_ms : INT64_MAX;
    *reader = r;
    *nsplits = r->nparts;
    return 0;
}

/* ---- starting positions ---- */

static int resolve_one(ks_reader_t *r, ks_part_t *pt, sl_kafka_start_t how, char *err, size_t errlen) {
    const char *topic = r->ctx->topics[pt->topic];
    int64_t lo = 0, hi = 0;
    rd_kafka_resp_err_t e =
        rd_kafka_query_watermark_offsets(r->rk, topic, pt->partition, &lo, &hi, SL_KAFKA_CALL_TIMEOUT_MS);
    if (e)
        return sl_errf(err, errlen, SL_EIO, "kafka source: topic '%s' partition %d: cannot read its offsets: %s", topic,
                       pt->partition, rd_kafka_err2str(e));
    if (how == SL_KAFKA_START_EARLIEST) {
        pt->next = lo;
    } else if (how == SL_KAFKA_START_LATEST) {
        pt->next = hi;
    } else {
        rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(1);
        rd_kafka_topic_partition_t *tp = rd_kafka_topic_partition_list_add(l, topic, pt->partition);
        if (how == SL_KAFKA_START_TIMESTAMP) {
            tp->offset = r->ctx->start_ts;
            e = rd_kafka_offsets_for_times(r->rk, l, SL_KAFKA_CALL_TIMEOUT_MS);
        } else {
            e = rd_kafka_committed(r->rk, l, SL_KAFKA_CALL_TIMEOUT_MS);
        }
        if (!e) e = tp->err;
        int64_t off = tp->offset;
        rd_kafka_topic_partition_list_destroy(l);
        if (e)
            return sl_errf(err, errlen, SL_EIO, "kafka source: topic '%s' partition %d: cannot read the %s offset: %s",
                           topic, pt->partition, how == SL_KAFKA_START_TIMESTAMP ? "timestamp's" : "group's committed",
                           rd_kafka_err2str(e));
        if (off >= 0)
            pt->next = off < lo ? lo : off;
        else if (how == SL_KAFKA_START_TIMESTAMP)
            pt->next = hi; /* no record at or after the timestamp yet */
        else
            return resolve_one(r, pt, r->ctx->reset, err, errlen);
    }
    return 0;
}

/* Resolves every unresolved position, the bounded end offsets, and assigns
 * the partitions from `first` on (the first time: all). */
static int assign_from(ks_reader_t *r, int first, sl_kafka_start_t how, sl_source_output_t *out, char *err,
                       size_t errlen) {
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(r->nparts - first + 1);
    int rc = 0;
    for (int i = first; i < r->nparts && !rc; i++) {
        ks_part_t *pt = &r->parts[i];
        if (pt->next == KS_UNRESOLVED) rc = resolve_one(r, pt, how, err, errlen);
        if (rc) break;
        if (r->ctx->bounded) {
            int64_t lo, hi;
            rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(r->rk, r->ctx->topics[pt->topic], pt->partition,
                                                                     &lo, &hi, SL_KAFKA_CALL_TIMEOUT_MS);
            if (e) {
                rc = sl_errf(err, errlen, SL_EIO, "kafka source: topic '%s' partition %d: cannot read its offsets: %s",
                             r->ctx->topics[pt->topic], pt->partition, rd_kafka_err2str(e));
                break;
            }
            pt->stop = hi;
            /* without an output (a checkpoint before the first poll) the
             * partition's end-of-log event finishes it instead */
            if (pt->next >= pt->stop && out) {
                pt->done = true;
                r->live--;
                sl_src_split_finished(out, i);
                continue;
            }
        }
        /* its own queue, taken off the consumer's before the fetching starts
         * (the consumer's queue interleaves partitions as fetches happen
         * to arrive; polling each in turn keeps them in step) */
        if (!pt->q && (pt->q = rd_kafka_queue_get_partition(r->rk, r->ctx->topics[pt->topic], pt->partition)))
            rd_kafka_queue_forward(pt->q, NULL);
        if (!pt->q) {
            rc = sl_errf(err, errlen, SL_EIO, "kafka source: topic '%s' partition %d: no fetch queue",
                         r->ctx->topics[pt->topic], pt->partition);
            break;
        }
        rd_kafka_topic_partition_list_add(l, r->ctx->topics[pt->topic], pt->partition)->offset = pt->next;
    }
    if (!rc && l->cnt > 0) {
        if (first == 0) {
            rd_kafka_resp_err_t e = rd_kafka_assign(r->rk, l);
            if (e) rc = sl_errf(err, errlen, SL_EIO, "kafka source: cannot assign partitions: %s", rd_kafka_err2str(e));
        } else {
            rd_kafka_error_t *e = rd_kafka_incremental_assign(r->rk, l);
            char b[512];
            if (e) rc = sl_errf(err, errlen, SL_EIO, "kafka source: cannot assign new partitions: %s",
                                sl_kafka_error_text(e, b, sizeof b));
        }
    }
    rd_kafka_topic_partition_list_destroy(l);
    return rc;
}

static int start(ks_reader_t *r, sl_source_output_t *out, char *err, size_t errlen) {
    if (r->started) return 0;
    int rc = assign_from(r, 0, r->ctx->start, out, err, errlen);
    if (rc) return rc;
    r->started = true;
    return 0;
}

/* Periodic metadata refresh: partitions this subtask owns that appeared
 * since.  A metadata error is not fatal (the next refresh tries again). */
static int discover(ks_reader_t *r, sl_source_output_t *out, char *err, size_t errlen) {
    const ks_ctx_t *ctx = r->ctx;
    int *counts = sl_calloc((size_t)ctx->ntopics, sizeof *counts);
    char e[512];
    int first = r->nparts;
    if (sl_kafka_partition_counts(r->rk, (const char *const *)ctx->topics, ctx->ntopics, counts,
                                  KS_DISCOVERY_TIMEOUT_MS, e, sizeof e) == 0) {
        for (int t = 0; t < ctx->ntopics; t++) {
            int known = r->known[t];
            for (int32_t p = known; p < counts[t]; p++) {
                if (sl_kafka_owner(ctx->topics[t], p, r->parallelism) != r->subtask) continue;
                int split = sl_src_add_split(out);
                if (split >= 0 && split != r->nparts) {
                    sl_free(counts);
                    return sl_errf(err, errlen, SL_EINVAL, "kafka source: split numbering out of step (%d != %d)",
                                   split, r->nparts);
                }
                add_part(r, t, p);
            }
            if (r->known[t] < counts[t]) {
                r->index[t] = sl_realloc(r->index[t], (size_t)counts[t] * sizeof(int));
                for (int i = r->known[t]; i < counts[t]; i++) r->index[t][i] = -1;
                r->known[t] = counts[t];
            }
        }
    }
    sl_free(counts);
    if (r->nparts == first) return 0;
    return assign_from(r, first, SL_KAFKA_START_EARLIEST, out, err, errlen);
}

/* ---- records ---- */

static int topic_of(const ks_reader_t *r, const rd_kafka_message_t *m) {
    const char *name = rd_kafka_topic_name(m->rkt);
    for (int t = 0; t < r->ctx->ntopics; t++)
        if (strcmp(r->ctx->topics[t], name) == 0) return t;
    return -1;
}

static void set_raw_field(sl_row_writer_t *w, const sl_schema_t *s, int f, const void *p, size_t len) {
    if (f < 0) return;
    if (!p) {
        sl_rw_set_null(w, f);
        return;
    }
    if (sl_schema_field_type(s, f) == SL_VARCHAR)
        sl_rw_set_str(w, f, p, (uint32_t)len);
    else
        sl_rw_set_bytes(w, f, p, (uint32_t)len);
}

/* Decodes m into the writer: 0, or SL_EFORMAT with the reason in msg. */
static int decode(ks_reader_t *r, const rd_kafka_message_t *m, int64_t ts, sl_row_writer_t *w, char *msg, size_t cap) {
    const ks_ctx_t *ctx = r->ctx;
    if (ctx->fmt == SL_KAFKA_RAW) {
        sl_rw_begin(w, ctx->schema);
        if (!m->payload && !sl_schema_field_nullable(ctx->schema, ctx->f_value))
            return sl_errf(msg, cap, SL_EFORMAT, "field 'value': the record has no value (a tombstone)");
        set_raw_field(w, ctx->schema, ctx->f_value, m->payload, m->len);
        set_raw_field(w, ctx->schema, ctx->f_key, m->key, m->key_len);
        if (ctx->f_topic >= 0) {
            const char *tn = rd_kafka_topic_name(m->rkt);
            sl_rw_set_str(w, ctx->f_topic, tn, (uint32_t)strlen(tn));
        }
        if (ctx->f_partition >= 0) {
            if (sl_schema_field_type(ctx->schema, ctx->f_partition) == SL_INT)
                sl_rw_set_i32(w, ctx->f_partition, m->partition);
            else
                sl_rw_set_i64(w, ctx->f_partition, m->partition);
        }
        if (ctx->f_offset >= 0) sl_rw_set_i64(w, ctx->f_offset, m->offset);
        if (ctx->f_ts >= 0) {
            if (ts == SL_NO_TIMESTAMP) sl_rw_set_null(w, ctx->f_ts);
            else sl_rw_set_i64(w, ctx->f_ts, ts);
        }
        return 0;
    }
    if (!m->payload) return sl_errf(msg, cap, SL_EFORMAT, "the record has no value (a tombstone)");
    char dm[768];
    int rc = sl_decode_line(&r->dec, m->payload, m->len, 1, w, dm, sizeof dm);
    if (!rc) return 0;
    /* the decoder speaks of "line 1"; a Kafka record has an offset instead */
    const char *reason = dm;
    if (strncmp(reason, "line 1", 6) == 0) {
        reason += 6;
        if (*reason == ',' || *reason == ':') reason++;
        while (*reason == ' ') reason++;
    }
    return sl_errf(msg, cap, SL_EFORMAT, "%s", reason);
}

static int dead_letter(ks_reader_t *r, const rd_kafka_message_t *m, const char *why) {
    char part[16], off[24];
    snprintf(part, sizeof part, "%" PRId32, m->partition);
    snprintf(off, sizeof off, "%" PRId64, m->offset);
    const char *tn = rd_kafka_topic_name(m->rkt);
    for (;;) {
        rd_kafka_resp_err_t e = rd_kafka_producev(
            r->dlq, RD_KAFKA_V_RKT(r->dlq_topic), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_VALUE(m->payload, m->len), RD_KAFKA_V_KEY(m->key, m->key_len),
            RD_KAFKA_V_HEADER("sluice.error", why, (ssize_t)strlen(why)),
            RD_KAFKA_V_HEADER("sluice.topic", tn, (ssize_t)strlen(tn)),
            RD_KAFKA_V_HEADER("sluice.partition", part, (ssize_t)strlen(part)),
            RD_KAFKA_V_HEADER("sluice.offset", off, (ssize_t)strlen(off)), RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(r->dlq, 10);
            continue;
        }
        if (e)
            return sl_errf(r->failmsg, sizeof r->failmsg, SL_EIO,
                           "kafka source: cannot write a dead letter to topic '%s': %s", r->ctx->dlq,
                           rd_kafka_err2str(e));
        return 0;
    }
}

/* One consumed message.  0, or an error (message in r->failmsg). */
static int handle(ks_reader_t *r, rd_kafka_message_t *m, sl_source_output_t *out, int *emitted) {
    const ks_ctx_t *ctx = r->ctx;
    int t = m->rkt ? topic_of(r, m) : -1;
    int pi = t >= 0 && m->partition >= 0 && m->partition < r->known[t] ? r->index[t][m->partition] : -1;
    ks_part_t *pt = pi >= 0 ? &r->parts[pi] : NULL;
    if (m->err) {
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            if (pt && !pt->done && pt->stop >= 0 && m->offset >= pt->stop) {
                pt->done = true;
                r->live--;
                sl_src_split_finished(out, pi);
            }
            return 0;
        }
        char fe[512];
        if (rd_kafka_fatal_error(r->rk, fe, sizeof fe))
            return sl_errf(r->failmsg, sizeof r->failmsg, SL_EIO, "kafka source: fatal consumer error: %s", fe);
        if (m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET || m->err == RD_KAFKA_RESP_ERR_OFFSET_OUT_OF_RANGE)
            return sl_errf(r->failmsg, sizeof r->failmsg, SL_EIO,
                           "kafka source: topic '%s' partition %d: offset %" PRId64
                           " is no longer in the log (retention?): %s",
                           pt ? ctx->topics[pt->topic] : "?", (int)m->partition, pt ? pt->next : (int64_t)-1,
                           rd_kafka_message_errstr(m));
        if (m->err == RD_KAFKA_RESP_ERR_TOPIC_AUTHORIZATION_FAILED ||
            m->err == RD_KAFKA_RESP_ERR_GROUP_AUTHORIZATION_FAILED)
            return sl_errf(r->failmsg, sizeof r->failmsg, SL_EIO, "kafka source: %s", rd_kafka_message_errstr(m));
        return 0; /* transient (broker down, leader change): librdkafka retries */
    }
    if (!pt || pt->done || m->offset < pt->next) return 0; /* not ours, or fetched before a re-assignment */
    if (pt->stop >= 0 && m->offset >= pt->stop) return 0;
    rd_kafka_timestamp_type_t tst;
    int64_t ts = rd_kafka_message_timestamp(m, &tst);
    if (ts < 0) ts = SL_NO_TIMESTAMP;
    sl_row_writer_t *w = sl_src_row(out);
    char why[900];
    int rc = decode(r, m, ts, w, why, sizeof why);
    if (rc) {
        char full[1100];
        snprintf(full, sizeof full, "kafka source: topic '%s' partition %d offset %" PRId64 ": %s",
                 ctx->topics[pt->topic], (int)pt->partition, m->offset, why);
        if (ctx->policy == SL_KAFKA_ON_ERROR_FAIL) return sl_errf(r->failmsg, sizeof r->failmsg, SL_EFORMAT, "%s", full);
        if (ctx->policy == SL_KAFKA_ON_ERROR_SKIP)
            sl_src_count_skipped(out, 1);
        else if ((rc = dead_letter(r, m, full)) != 0)
            return rc;
    } else {
        sl_src_emit(out, pi, ts);
        (*emitted)++;
    }
    pt->next = m->offset + 1;
    if (pt->stop >= 0 && pt->next >= pt->stop) {
        pt->done = true;
        r->live--;
        sl_src_split_finished(out, pi);
    }
    return 0;
}

static int ks_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t errlen) {
    ks_reader_t *r = reader;
    if (r->failed) return sl_errf(err, errlen, r->failed, "%s", r->failmsg);
    int rc = start(r, out, r->failmsg, sizeof r->failmsg);
    if (!rc && r->dlq) {
        rd_kafka_poll(r->dlq, 0);
        if (r->dlq_failed) rc = sl_errf(r->failmsg, sizeof r->failmsg, r->dlq_failed, "%s", r->dlq_msg);
    }
    if (!rc && mono_ms() >= r->next_discovery) {
        rc = discover(r, out, r->failmsg, sizeof r->failmsg);
        r->next_discovery = mono_ms() + r->ctx->discovery_ms;
    }
    int emitted = 0, seen = 0;
    int cap = max > 0 && max < KS_BATCH ? max : KS_BATCH;
    /* the consumer's own queue: errors that are not a partition's */
    for (;;) {
        ssize_t n = rc ? 0 : rd_kafka_consume_batch_queue(r->q, 0, r->batch, KS_BATCH);
        if (n <= 0) break;
        for (ssize_t i = 0; i < n; i++) {
            if (!rc) rc = handle(r, r->batch[i], out, &emitted);
            rd_kafka_message_destroy(r->batch[i]);
        }
        seen += (int)n;
    }
    /* the partitions in turn, an equal share of the batch each per round,
     * starting one further every poll: what a partition emits does not
     * depend on the order its fetches happened to arrive in, so no
     * partition runs ahead of one that is still fetching (watermarks are
     * per partition, and a slow start would hold every other one up) */
    while (!rc && r->live > 0 && emitted < cap) {
        int got = 0, share = (cap - emitted + r->live - 1) / r->live;
        for (int k = 0; k < r->nparts && !rc && emitted < cap; k++) {
            ks_part_t *pt = &r->parts[(r->rr + k) % r->nparts];
            if (pt->done || !pt->q) continue;
            int want = SL_MIN(share, cap - emitted);
            ssize_t n = rd_kafka_consume_batch_queue(pt->q, 0, r->batch, (size_t)want);
            for (ssize_t i = 0; i < n; i++) {
                if (!rc) rc = handle(r, r->batch[i], out, &emitted);
                rd_kafka_message_destroy(r->batch[i]);
            }
            if (n > 0) got += (int)n;
        }
        seen += got;
        if (!got) break;
    }
    if (r->nparts > 0) r->rr = (r->rr + 1) % r->nparts;
    if (rc) {
        r->failed = rc;
        return sl_errf(err, errlen, rc, "%s", r->failmsg);
    }
    if (r->live == 0) return r->nparts > 0 || r->ctx->bounded ? SL_SRC_END : SL_SRC_IDLE;
    return seen ? SL_SRC_MORE : SL_SRC_IDLE;
}

/* ---- checkpoints ---- */

static void put_u32(sl_buf_t *b, uint32_t v) {
    uint8_t x[4];
    sl_st32(x, v);
    sl_buf_append(b, x, 4);
}

static void put_pos(sl_buf_t *b, const char *topic, int32_t p, int64_t next) {
    uint16_t tl = (uint16_t)strlen(topic);
    sl_buf_append(b, &tl, 2);
    sl_buf_append(b, topic, tl);
    put_u32(b, (uint32_t)p);
    uint8_t x[8];
    sl_st64(x, (uint64_t)next);
    sl_buf_append(b, x, 8);
}

static int ks_snapshot(void *reader, int64_t id, void (*put)(void *, const void *, size_t), void *pc) {
    ks_reader_t *r = reader;
    const ks_ctx_t *ctx = r->ctx;
    if (!r->started && !r->failed) {
        int rc = start(r, NULL, r->failmsg, sizeof r->failmsg);
        if (rc) {
            r->failed = rc;
            fprintf(stderr, "sluice: %s\n", r->failmsg);
            return rc;
        }
    }
    /* dead letters sent before this barrier are durable before the position
     * that skips their records is */
    if (r->dlq) {
        rd_kafka_resp_err_t e = rd_kafka_flush(r->dlq, SL_KAFKA_CALL_TIMEOUT_MS);
        if (e && !r->dlq_failed) {
            r->dlq_failed = SL_EIO;
            snprintf(r->dlq_msg, sizeof r->dlq_msg, "kafka source: dead letters to topic '%s' not acknowledged: %s",
                     ctx->dlq, rd_kafka_err2str(e));
        }
        if (r->dlq_failed) {
            fprintf(stderr, "sluice: %s\n", r->dlq_msg);
            return r->dlq_failed;
        }
    }
    sl_buf_t b = {0};
    put_u32(&b, KS_MAGIC);
    put_u32(&b, KS_VERSION);
    int n = 0;
    for (int i = 0; i < r->nparts; i++) n += r->parts[i].next != KS_UNRESOLVED;
    put_u32(&b, (uint32_t)(n + r->nrestored));
    rd_kafka_topic_partition_list_t *now = rd_kafka_topic_partition_list_new(n + 1);
    for (int i = 0; i < r->nparts; i++) {
        const ks_part_t *pt = &r->parts[i];
        if (pt->next == KS_UNRESOLVED) continue;
        put_pos(&b, ctx->topics[pt->topic], pt->partition, pt->next);
        rd_kafka_topic_partition_list_add(now, ctx->topics[pt->topic], pt->partition)->offset = pt->next;
    }
    for (int i = 0; i < r->nrestored; i++)
        put_pos(&b, ctx->topics[r->restored[i].topic], r->restored[i].partition, r->restored[i].next);
    put(pc, b.p, b.len);
    sl_buf_free(&b);
    if (!ctx->group || id <= 0) {
        rd_kafka_topic_partition_list_destroy(now);
        return 0;
    }
    if (r->npending == KS_PENDING) { /* many checkpoints in flight: forget the oldest */
        rd_kafka_topic_partition_list_destroy(r->pending[0].pos);
        memmove(r->pending, r->pending + 1, (KS_PENDING - 1) * sizeof *r->pending);
        r->npending--;
    }
    r->pending[r->npending].id = id;
    r->pending[r->npending++].pos = now;
    return 0;
}

/* Checkpoint `id` completed: commit its positions (or those of the newest
 * earlier one still kept) to the group, asynchronously — monitoring only. */
static void ks_notify_complete(void *reader, int64_t id) {
    ks_reader_t *r = reader;
    int k = -1;
    for (int i = 0; i < r->npending && r->pending[i].id <= id; i++) k = i;
    if (k < 0) return;
    if (r->pending[k].pos->cnt > 0) rd_kafka_commit(r->rk, r->pending[k].pos, 1);
    for (int i = 0; i <= k; i++) rd_kafka_topic_partition_list_destroy(r->pending[i].pos);
    memmove(r->pending, r->pending + k + 1, (size_t)(r->npending - k - 1) * sizeof *r->pending);
    r->npending -= k + 1;
}

static int ks_restore(void *reader, const void *state, size_t len, char *err, size_t errlen) {
    ks_reader_t *r = reader;
    const ks_ctx_t *ctx = r->ctx;
    const uint8_t *p = state, *end = p + len;
    while (p < end) {
        if (end - p < 4) goto bad;
        uint32_t n = sl_ld32(p);
        p += 4;
        if ((size_t)(end - p) < n) goto bad;
        const uint8_t *q = p, *qe = p + n;
        p += n;
        if (n == 0) continue;
        if (n < 12 || sl_ld32(q) != KS_MAGIC) goto bad;
        if (sl_ld32(q + 4) != KS_VERSION)
            return sl_errf(err, errlen, SL_EINVAL, "kafka source: checkpoint position of version %u, expected %u",
                           sl_ld32(q + 4), KS_VERSION);
        uint32_t cnt = sl_ld32(q + 8);
        q += 12;
        for (uint32_t i = 0; i < cnt; i++) {
            if (qe - q < 2) goto bad;
            uint16_t tl;
            memcpy(&tl, q, 2);
            q += 2;
            if (qe - q < (ptrdiff_t)tl + 12) goto bad;
            const char *topic = (const char *)q;
            q += tl;
            int32_t part = (int32_t)sl_ld32(q);
            int64_t next = (int64_t)sl_ld64(q + 4);
            q += 12;
            if (part < 0 || next < 0) goto bad;
            int t = -1;
            for (int k = 0; k < ctx->ntopics; k++)
                if (strlen(ctx->topics[k]) == tl && memcmp(ctx->topics[k], topic, tl) == 0) t = k;
            if (t < 0 || sl_kafka_owner(ctx->topics[t], part, r->parallelism) != r->subtask) continue;
            int pi = part < r->known[t] ? r->index[t][part] : -1;
            if (pi >= 0) {
                r->parts[pi].next = next;
            } else { /* not in this reader's metadata yet: applied when discovered */
                r->restored = sl_realloc(r->restored, (size_t)(r->nrestored + 1) * sizeof *r->restored);
                r->restored[r->nrestored++] = (ks_pos_t){t, part, next};
            }
        }
        if (q != qe) goto bad;
    }
    return 0;
bad:
    return sl_errf(err, errlen, SL_EFORMAT, "kafka source: the checkpoint's partition positions are damaged");
}

static void ks_destroy(void *vctx) {
    ks_ctx_t *ctx = vctx;
    sl_free(ctx->bootstrap);
    for (int i = 0; i < ctx->ntopics; i++) sl_free(ctx->topics[i]);
    sl_free(ctx->topics);
    sl_schema_unref(ctx->schema);
    sl_free(ctx->group);
    sl_free(ctx->dlq);
    sl_kafka_props_free(ctx->props);
    sl_free(ctx);
}

/* pendingRecords: per live partition, the high watermark librdkafka last
 * saw in a fetch response (no request: rd_kafka_get_watermark_offsets)
 * minus the next offset to emit (bounded: up to the end offset); -1 until
 * some partition's high watermark is known. */
static int64_t ks_pending(void *reader) {
    ks_reader_t *r = reader;
    int64_t sum = 0;
    bool known = false;
    for (int i = 0; r->started && i < r->nparts; i++) {
        const ks_part_t *pt = &r->parts[i];
        if (pt->done || pt->next == KS_UNRESOLVED) continue;
        int64_t lo = -1, hi = pt->stop; /* bounded: the end offset, known from the start */
        if (hi < 0 &&
            (rd_kafka_get_watermark_offsets(r->rk, r->ctx->topics[pt->topic], pt->partition, &lo, &hi) || hi < 0))
            continue;
        known = true;
        if (hi > pt->next) sum += hi - pt->next;
    }
    return known ? sum : -1;
}

static const sl_source_ops_t kafka_source_ops = {
    .name = "kafka",
    .create_reader = ks_create_reader,
    .poll = ks_poll,
    .destroy_reader = ks_destroy_reader,
    .destroy = ks_destroy,
    .snapshot = ks_snapshot,
    .restore = ks_restore,
    .notify_checkpoint_complete = ks_notify_complete,
    .pending_records = ks_pending,
};

sl_kafka_source_opts_t sl_kafka_source_defaults(void) {
    sl_kafka_source_opts_t o;
    memset(&o, 0, sizeof o);
    o.format = SL_KAFKA_JSON;
    o.start = SL_KAFKA_START_EARLIEST;
    o.committed_reset = SL_KAFKA_START_EARLIEST;
    o.discovery_interval_ms = 30000;
    o.on_error = SL_KAFKA_ON_ERROR_FAIL;
    return o;
}

/* Checks the options; a message in ctx->opt_err when something is wrong. */
static void check_opts(ks_ctx_t *ctx, const sl_kafka_source_opts_t *o) {
    char *e = ctx->opt_err;
    size_t n = sizeof ctx->opt_err;
    if (!o->bootstrap_servers || !*o->bootstrap_servers) {
        snprintf(e, n, "kafka source: bootstrap_servers is required");
    } else if (ctx->ntopics == 0) {
        snprintf(e, n, "kafka source: no topics given (topics: comma-separated names)");
    } else if (!o->schema || sl_schema_field_count(o->schema) == 0) {
        snprintf(e, n, "kafka source: a schema is required");
    } else if (o->format != SL_KAFKA_JSON && o->format != SL_KAFKA_CSV && o->format != SL_KAFKA_RAW) {
        snprintf(e, n, "kafka source: format %d is not JSON, CSV or RAW", (int)o->format);
    } else if ((unsigned)o->start > SL_KAFKA_START_TIMESTAMP) {
        snprintf(e, n, "kafka source: start %d is not EARLIEST, LATEST, COMMITTED or TIMESTAMP", (int)o->start);
    } else if (o->start == SL_KAFKA_START_COMMITTED && (!o->group_id || !*o->group_id)) {
        snprintf(e, n, "kafka source: start from COMMITTED offsets needs a group_id");
    } else if (o->start == SL_KAFKA_START_COMMITTED && o->committed_reset != SL_KAFKA_START_EARLIEST &&
               o->committed_reset != SL_KAFKA_START_LATEST) {
        snprintf(e, n, "kafka source: committed_reset must be EARLIEST or LATEST");
    } else if (o->start == SL_KAFKA_START_TIMESTAMP && o->start_timestamp_ms < 0) {
        snprintf(e, n, "kafka source: start_timestamp_ms %" PRId64 " is negative", o->start_timestamp_ms);
    } else if (o->discovery_interval_ms < 0) {
        snprintf(e, n, "kafka source: discovery_interval_ms %" PRId64 " is negative", o->discovery_interval_ms);
    } else if ((unsigned)o->on_error > SL_KAFKA_ON_ERROR_DEAD_LETTER) {
        snprintf(e, n, "kafka source: on_error %d is not FAIL, SKIP or DEAD_LETTER", (int)o->on_error);
    } else if (o->on_error == SL_KAFKA_ON_ERROR_DEAD_LETTER && (!o->dead_letter_topic || !*o->dead_letter_topic)) {
        snprintf(e, n, "kafka source: on_error DEAD_LETTER needs a dead_letter_topic");
    } else if (o->format == SL_KAFKA_RAW) {
        const sl_schema_t *s = o->schema;
        ctx->f_value = sl_schema_index(s, "value");
        ctx->f_key = sl_schema_index(s, "key");
        ctx->f_topic = sl_schema_index(s, "topic");
        ctx->f_partition = sl_schema_index(s, "partition");
        ctx->f_offset = sl_schema_index(s, "offset");
        ctx->f_ts = sl_schema_index(s, "timestamp");
        for (int i = 0; i < sl_schema_field_count(s); i++) {
            const char *nm = sl_schema_field_name(s, i);
            sl_type_t ty = sl_schema_field_type(s, i);
            bool ok = (i == ctx->f_value || i == ctx->f_key) ? (ty == SL_BYTES || ty == SL_VARCHAR)
                      : i == ctx->f_topic                    ? ty == SL_VARCHAR
                      : i == ctx->f_partition                ? (ty == SL_INT || ty == SL_BIGINT)
                      : i == ctx->f_offset                   ? ty == SL_BIGINT
                      : i == ctx->f_ts                       ? (ty == SL_TIMESTAMP || ty == SL_BIGINT)
                                                             : false;
            if (!ok) {
                snprintf(e, n,
                         "kafka source: RAW format: field '%s' %s is not one of value/key (BYTES or VARCHAR), topic "
                         "(VARCHAR), partition (INT or BIGINT), offset (BIGINT), timestamp (TIMESTAMP or BIGINT)",
                         nm, sl_type_name(ty));
                return;
            }
        }
        if (ctx->f_value < 0) snprintf(e, n, "kafka source: RAW format needs a field 'value' (BYTES or VARCHAR)");
    }
}

sl_source_t sl_kafka_source(const sl_kafka_source_opts_t *o) {
    ks_ctx_t *ctx = sl_calloc(1, sizeof *ctx);
    sl_kafka_source_opts_t d = sl_kafka_source_defaults();
    if (!o) o = &d;
    ctx->bootstrap = sl_strdup(o->bootstrap_servers ? o->bootstrap_servers : "");
    for (const char *p = o->topics ? o->topics : ""; *p;) {
        const char *c = strchr(p, ',');
        const char *e = c ? c : p + strlen(p);
        while (p < e && *p == ' ') p++;
        const char *t = e;
        while (t > p && t[-1] == ' ') t--;
        if (t > p) {
            ctx->topics = sl_realloc(ctx->topics, (size_t)(ctx->ntopics + 1) * sizeof *ctx->topics);
            ctx->topics[ctx->ntopics++] = sl_strndup(p, (size_t)(t - p));
        }
        p = c ? c + 1 : e;
    }
    ctx->fmt = o->format;
    ctx->schema = o->schema ? sl_schema_ref(o->schema) : NULL;
    ctx->start = o->start;
    ctx->reset = o->committed_reset;
    ctx->start_ts = o->start_timestamp_ms;
    ctx->group = o->group_id && *o->group_id ? sl_strdup(o->group_id) : NULL;
    ctx->bounded = o->bounded;
    ctx->uncommitted = o->read_uncommitted;
    ctx->discovery_ms = o->discovery_interval_ms;
    ctx->policy = o->on_error;
    ctx->dlq = o->dead_letter_topic ? sl_strdup(o->dead_letter_topic) : NULL;
    ctx->props = sl_kafka_props_copy(o->properties);
    ctx->f_value = ctx->f_key = ctx->f_topic = ctx->f_partition = ctx->f_offset = ctx->f_ts = -1;
    check_opts(ctx, o);
    sl_source_t s = {&kafka_source_ops, ctx, ctx->schema ? sl_schema_ref(ctx->schema) : sl_schema_new()};
    return s;
}
