/*
 * test_kafka_util.h — what the Kafka tests share: the address of the broker
 * that the ctest fixture started (scripts/kafka.sh), unique topic names, a
 * plain producer, and an independent consumer that reads a whole topic
 * (read_committed or not) with raw librdkafka calls, so the verification
 * does not go through the connectors under test.
 */
#ifndef SL_TEST_KAFKA_UTIL_H
#define SL_TEST_KAFKA_UTIL_H

#include <librdkafka/rdkafka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "connectors/kafka_common.h"

/* The broker's bootstrap address; exits the test binary when there is none
 * (the fixture failed): a Kafka test never passes without a broker. */
static inline const char *kt_bootstrap(void) {
    static char addr[256];
    if (addr[0]) return addr;
    const char *f = getenv("SLUICE_KAFKA_BOOTSTRAP_FILE");
    FILE *fp = f ? fopen(f, "r") : NULL;
    if (!fp || !fgets(addr, sizeof addr, fp)) {
        fprintf(stderr, "no Kafka broker: SLUICE_KAFKA_BOOTSTRAP_FILE=%s unreadable (run under ctest, whose fixture "
                        "starts scripts/kafka.sh)\n", f ? f : "(unset)");
        exit(1);
    }
    fclose(fp);
    addr[strcspn(addr, "\r\n")] = 0;
    return addr;
}

/* A topic name unique to this process. */
static inline const char *kt_name(const char *base) {
    static char names[64][128];
    static int next;
    char *n = names[next++ % 64];
    snprintf(n, 128, "%s-%d-%lld", base, (int)getpid(), (long long)(sl_wall_ms() % 1000000));
    return n;
}

static inline rd_kafka_t *kt_admin(void) {
    char err[512];
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    rd_kafka_conf_set(c, "bootstrap.servers", kt_bootstrap(), err, sizeof err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "kafka client: %s\n", err);
        exit(1);
    }
    return rk;
}

static inline int kt_create_topic(const char *topic, int partitions) {
    rd_kafka_t *rk = kt_admin();
    char err[512];
    int rc = sl_kafka_create_topic(rk, topic, partitions, NULL, err, sizeof err);
    if (rc) fprintf(stderr, "create topic %s: %s\n", topic, err);
    rd_kafka_destroy(rk);
    return rc;
}

/* Grows a topic to `total` partitions. */
static inline int kt_add_partitions(const char *topic, int total) {
    rd_kafka_t *rk = kt_admin();
    char err[512];
    rd_kafka_NewPartitions_t *np = rd_kafka_NewPartitions_new(topic, (size_t)total, err, sizeof err);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_CreatePartitions(rk, &np, 1, NULL, q);
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, 30000);
    int rc = -1;
    if (ev) {
        size_t n = 0;
        const rd_kafka_topic_result_t **r =
            rd_kafka_CreatePartitions_result_topics(rd_kafka_event_CreatePartitions_result(ev), &n);
        rc = n == 1 && !rd_kafka_topic_result_error(r[0]) ? 0 : -1;
        if (rc) fprintf(stderr, "create partitions: %s\n", n ? rd_kafka_topic_result_error_string(r[0]) : "?");
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_queue_destroy(q);
    rd_kafka_NewPartitions_destroy(np);
    rd_kafka_destroy(rk);
    return rc;
}

/* Delivery failures of kt_producer's records (kt_flush reports them). */
static int kt_failed_deliveries;
static inline void kt_dr(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    if (m->err) {
        if (!kt_failed_deliveries++) fprintf(stderr, "kt_producer: delivery failed: %s\n", rd_kafka_err2str(m->err));
    }
}

/* A plain producer (acks=all, idempotent). */
static inline rd_kafka_t *kt_producer(void) {
    char err[512];
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    rd_kafka_conf_set(c, "bootstrap.servers", kt_bootstrap(), err, sizeof err);
    rd_kafka_conf_set(c, "enable.idempotence", "true", err, sizeof err);
    rd_kafka_conf_set(c, "linger.ms", "5", err, sizeof err);
    rd_kafka_conf_set_dr_msg_cb(c, kt_dr);
    kt_failed_deliveries = 0;
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_PRODUCER, c, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "kafka producer: %s\n", err);
        exit(1);
    }
    return rk;
}

static inline int kt_send(rd_kafka_t *p, const char *topic, int partition, const char *key, const void *val, size_t len,
                   int64_t ts) {
    for (;;) {
        rd_kafka_resp_err_t e = rd_kafka_producev(
            p, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_KEY(key, key ? strlen(key) : 0), RD_KAFKA_V_VALUE((void *)val, len), RD_KAFKA_V_TIMESTAMP(ts),
            RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(p, 10);
            continue;
        }
        return e ? -1 : 0;
    }
}

static inline int kt_flush(rd_kafka_t *p) {
    for (int i = 0; i < 600 && rd_kafka_outq_len(p) > 0; i++) rd_kafka_flush(p, 100);
    return rd_kafka_outq_len(p) == 0 && kt_failed_deliveries == 0 ? 0 : -1;
}

/* One consumed record, copied. */
typedef struct kt_rec {
    char *key, *value; /* NUL-terminated copies (value may hold NULs before) */
    size_t klen, vlen;
    int32_t partition;
    int64_t offset, ts;
    char *error_header; /* sluice.error header, if any */
} kt_rec_t;

typedef struct kt_recs {
    kt_rec_t *r;
    int64_t n, cap;
} kt_recs_t;

static inline void kt_recs_free(kt_recs_t *rs) {
    for (int64_t i = 0; i < rs->n; i++) {
        free(rs->r[i].key);
        free(rs->r[i].value);
        free(rs->r[i].error_header);
    }
    free(rs->r);
    memset(rs, 0, sizeof *rs);
}

static inline char *kt_dup(const void *p, size_t n) {
    char *s = malloc(n + 1);
    if (n) memcpy(s, p, n);
    s[n] = 0;
    return s;
}

/* Reads every record of `topic` up to its end offsets as they are now.
 * read_committed consumers stop at the last stable offset: the read waits
 * (at most timeout_ms) for open transactions to be decided.  0 or -1. */
static inline int kt_read_all(const char *topic, bool read_committed, int timeout_ms, kt_recs_t *out) {
    char err[512];
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    rd_kafka_conf_set(c, "bootstrap.servers", kt_bootstrap(), err, sizeof err);
    rd_kafka_conf_set(c, "group.id", "sluice-test-reader", err, sizeof err);
    rd_kafka_conf_set(c, "enable.auto.commit", "false", err, sizeof err);
    rd_kafka_conf_set(c, "isolation.level", read_committed ? "read_committed" : "read_uncommitted", err, sizeof err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof err);
    if (!rk) return -1;
    /* end offsets: the high watermark (a read_committed client would be
     * told the last stable offset instead) */
    rd_kafka_conf_t *hc = rd_kafka_conf_new();
    rd_kafka_conf_set(hc, "bootstrap.servers", kt_bootstrap(), err, sizeof err);
    rd_kafka_conf_set(hc, "group.id", "sluice-test-reader", err, sizeof err);
    rd_kafka_conf_set(hc, "isolation.level", "read_uncommitted", err, sizeof err); /* librdkafka's default is read_committed */
    rd_kafka_t *hw = rd_kafka_new(RD_KAFKA_CONSUMER, hc, err, sizeof err);
    const struct rd_kafka_metadata *md;
    rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
    int parts = 0;
    if (rd_kafka_metadata(rk, 0, t, &md, 10000) == 0) {
        if (md->topic_cnt == 1 && !md->topics[0].err) parts = md->topics[0].partition_cnt;
        rd_kafka_metadata_destroy(md);
    }
    rd_kafka_topic_destroy(t);
    int64_t *end = calloc((size_t)(parts ? parts : 1), sizeof *end);
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(parts ? parts : 1);
    int left = 0;
    for (int p = 0; p < parts; p++) {
        int64_t lo, hi;
        if (rd_kafka_query_watermark_offsets(hw, topic, p, &lo, &hi, 10000)) {
            parts = -1;
            break;
        }
        end[p] = hi;
        if (hi > lo) {
            rd_kafka_topic_partition_list_add(l, topic, p)->offset = lo;
            left++;
        }
    }
    int rc = parts > 0 ? 0 : -1;
    if (!rc && left) rd_kafka_assign(rk, l);
    int64_t deadline = sl_mono_ns() / 1000000 + timeout_ms;
    while (!rc && left > 0) {
        if (sl_mono_ns() / 1000000 > deadline) {
            fprintf(stderr, "kt_read_all %s: timed out with %d partitions unfinished\n", topic, left);
            rc = -1;
            break;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m) {
            rd_kafka_topic_partition_list_t *pos = rd_kafka_topic_partition_list_copy(l);
            rd_kafka_position(rk, pos);
            left = 0;
            for (int i = 0; i < pos->cnt; i++)
                if (pos->elems[i].offset < end[pos->elems[i].partition]) left++;
            rd_kafka_topic_partition_list_destroy(pos);
            continue;
        }
        if (!m->err && m->offset < end[m->partition]) {
            if (out->n == out->cap) {
                out->cap = out->cap ? out->cap * 2 : 1024;
                out->r = realloc(out->r, (size_t)out->cap * sizeof *out->r);
            }
            kt_rec_t *r = &out->r[out->n++];
            memset(r, 0, sizeof *r);
            r->key = m->key ? kt_dup(m->key, m->key_len) : NULL;
            r->klen = m->key_len;
            r->value = kt_dup(m->payload, m->payload ? m->len : 0);
            r->vlen = m->payload ? m->len : 0;
            r->partition = m->partition;
            r->offset = m->offset;
            r->ts = rd_kafka_message_timestamp(m, NULL);
            rd_kafka_headers_t *h = NULL;
            const void *hv;
            size_t hl;
            if (rd_kafka_message_headers(m, &h) == 0 && rd_kafka_header_get_last(h, "sluice.error", &hv, &hl) == 0)
                r->error_header = kt_dup(hv, hl);
            if (m->offset + 1 >= end[m->partition]) {
                /* this partition is done; the position check confirms it */
            }
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_topic_partition_list_destroy(l);
    free(end);
    rd_kafka_destroy(hw);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return rc;
}

static inline void kt_sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

#endif
