/*
 * produce.c — the fraud pipeline's input: deterministic card transactions
 * written into the `events` topic.
 *
 * Each non-empty partition p holds fk_gen_count(g, p) transactions; the
 * i-th has event time start_ts + i * step + U[0, max_disorder_ms] with
 * step = span_ms / count, so within a partition an event is never more than
 * max_disorder_ms (< the 5 s bound) behind the largest event time before
 * it: with a partition that is not idle, no regular transaction is late.
 * After the first quarter of a partition, late_per_mille of the
 * transactions are late by construction: their event time lies late_by_ms
 * (a day) before start_ts, far behind any watermark once every partition
 * has delivered a record.  One partition (idle_partition) gets nothing.
 * Poison records (not JSON, or a field of the wrong type) are inserted
 * after given transactions.  Everything derives from (seed, partition,
 * index): a run is the same whatever the order it is produced in.
 *
 * Amounts are multiples of 0.25, so a window's sum is exact in any order of
 * addition and results can be compared exactly.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <librdkafka/rdkafka.h>

#include "fk_util.h"
#include "fraud_kafka.h"

fk_gen_opts_t fk_gen_defaults(void) {
    fk_gen_opts_t g;
    memset(&g, 0, sizeof g);
    g.seed = 42;
    g.events = 40000;
    g.cards = 500;
    g.partitions = 12;
    g.idle_partition = 11;
    g.start_ts = 1767225600000LL; /* 2026-01-01T00:00:00Z */
    g.span_ms = 2 * 3600 * 1000LL;
    g.max_disorder_ms = 3000;
    g.late_per_mille = 10;
    g.late_by_ms = 24 * 3600 * 1000LL;
    g.poison = 0;
    return g;
}

static int active_partitions(const fk_gen_opts_t *g) {
    return g->partitions - (g->idle_partition >= 0 && g->idle_partition < g->partitions ? 1 : 0);
}

/* The rank of partition p among the non-empty ones (-1 for the idle one). */
static int rank_of(const fk_gen_opts_t *g, int p) {
    if (p == g->idle_partition || p < 0 || p >= g->partitions) return -1;
    return g->idle_partition >= 0 && p > g->idle_partition ? p - 1 : p;
}

static int partition_of_rank(const fk_gen_opts_t *g, int r) {
    return g->idle_partition >= 0 && r >= g->idle_partition ? r + 1 : r;
}

int64_t fk_gen_count(const fk_gen_opts_t *g, int p) {
    int r = rank_of(g, p), n = active_partitions(g);
    if (r < 0 || n <= 0 || g->events <= 0) return 0;
    return g->events / n + (r < g->events % n ? 1 : 0);
}

static uint64_t rnd(const fk_gen_opts_t *g, int p, int64_t i, uint64_t salt) {
    return fk_mix64(g->seed * 0x9e3779b97f4a7c15ULL ^ ((uint64_t)p << 48) ^ (uint64_t)i ^ (salt << 56) ^
                    (salt * 0xbf58476d1ce4e5b9ULL));
}

void fk_gen_txn(const fk_gen_opts_t *g, int p, int64_t i, fk_txn_t *out) {
    int64_t n = fk_gen_count(g, p);
    double step = n > 0 ? (double)g->span_ms / (double)n : 0;
    out->card_id = 1 + (int64_t)(rnd(g, p, i, 1) % (uint64_t)(g->cards > 0 ? g->cards : 1));
    out->amount = (double)(4 + rnd(g, p, i, 2) % 1997) * 0.25; /* 1.00 .. 500.00 */
    out->late = i >= n / 4 && (int)(rnd(g, p, i, 3) % 1000) < g->late_per_mille;
    if (out->late)
        out->ts = g->start_ts - g->late_by_ms + (int64_t)(rnd(g, p, i, 4) % 3600000);
    else
        out->ts = g->start_ts + (int64_t)((double)i * step) +
                  (int64_t)(rnd(g, p, i, 5) % (uint64_t)(g->max_disorder_ms + 1));
}

void fk_gen_poison(const fk_gen_opts_t *g, int64_t k, int *partition, int64_t *after, char *buf, size_t cap) {
    int n = active_partitions(g);
    int p = partition_of_rank(g, (int)(k % (n > 0 ? n : 1)));
    int64_t cnt = fk_gen_count(g, p);
    *partition = p;
    *after = cnt > 0 ? (cnt / 2 + k / (n > 0 ? n : 1)) % cnt : 0;
    switch (k % 3) {
    case 0: snprintf(buf, cap, "this is not a transaction #%" PRId64, k); break;
    case 1: snprintf(buf, cap, "{\"card_id\": \"stolen-%" PRId64 "\", \"amount\": 1.0, \"ts\": %" PRId64 "}", k, g->start_ts); break;
    default: snprintf(buf, cap, "{\"card_id\": %" PRId64 ", \"amount\": \"lots\", \"ts\": %" PRId64 "}", k, g->start_ts); break;
    }
}

/* ---- the producer ---- */

typedef struct prod {
    rd_kafka_t *rk;
    int failed;
    char msg[512];
} prod_t;

static void delivered(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    prod_t *p = opaque;
    if (m->err && !p->failed) {
        p->failed = 1;
        snprintf(p->msg, sizeof p->msg, "delivery failed: %s", rd_kafka_err2str(m->err));
    }
}

static int send_one(prod_t *p, const char *topic, int partition, const char *key, const char *val, size_t len,
                    char *err, size_t errlen) {
    for (;;) {
        rd_kafka_resp_err_t e = rd_kafka_producev(
            p->rk, RD_KAFKA_V_TOPIC(topic), RD_KAFKA_V_PARTITION(partition), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
            RD_KAFKA_V_KEY(key, key ? strlen(key) : 0), RD_KAFKA_V_VALUE((void *)val, len), RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(p->rk, 10);
            continue;
        }
        if (e)
            return fk_errf(err, errlen, SL_EIO, "produce: cannot write to topic '%s' partition %d: %s", topic, partition,
                           rd_kafka_err2str(e));
        return p->failed ? fk_errf(err, errlen, SL_EIO, "produce: topic '%s': %s", topic, p->msg) : 0;
    }
}

static int txn_json(const fk_txn_t *t, char *buf, size_t cap) {
    return snprintf(buf, cap, "{\"card_id\": %" PRId64 ", \"amount\": %.2f, \"ts\": %" PRId64 "}", t->card_id,
                    t->amount, t->ts);
}

static void pace(double rate, int64_t t0_ns, int64_t sent) {
    if (rate <= 0) return;
    int64_t due = t0_ns + (int64_t)((double)sent / rate * 1e9);
    int64_t now = fk_mono_ns();
    if (due > now) {
        struct timespec ts = {(time_t)((due - now) / 1000000000), (long)((due - now) % 1000000000)};
        nanosleep(&ts, NULL);
    }
}

/* Latency runs: transactions stamped with the wall clock, round robin over
 * the non-empty partitions, at a fixed rate, `events` of them (< 0: until
 * killed). */
static int produce_wall_clock(prod_t *p, const fk_produce_opts_t *o, int64_t *produced, char *err, size_t errlen) {
    const fk_gen_opts_t *g = &o->gen;
    int n = active_partitions(g);
    int64_t t0 = fk_mono_ns();
    int rc = 0;
    for (int64_t i = 0; !rc && (g->events < 0 || i < g->events); i++) {
        pace(o->rate, t0, i);
        int part = partition_of_rank(g, (int)(i % n));
        fk_txn_t t;
        fk_gen_txn(g, part, i / n, &t);
        t.ts = fk_wall_ms();
        char val[160], key[32];
        int len = txn_json(&t, val, sizeof val);
        snprintf(key, sizeof key, "%" PRId64, t.card_id);
        rc = send_one(p, o->topic, part, key, val, (size_t)len, err, errlen);
        if ((i & 255) == 0) rd_kafka_poll(p->rk, 0);
        if (!rc) (*produced)++;
    }
    return rc;
}

int fk_produce(const fk_produce_opts_t *o, int64_t *produced, char *err, size_t errlen) {
    const fk_gen_opts_t *g = &o->gen;
    *produced = 0;
    if (!o->bootstrap || !*o->bootstrap) return fk_errf(err, errlen, SL_EINVAL, "produce: --bootstrap is required");
    if (g->partitions < 1 || active_partitions(g) < 1)
        return fk_errf(err, errlen, SL_EINVAL, "produce: %d partitions with partition %d idle leave none for data",
                       g->partitions, g->idle_partition);
    if (g->max_disorder_ms < 0 || g->cards < 1)
        return fk_errf(err, errlen, SL_EINVAL, "produce: --cards must be >= 1 and the disorder >= 0");
    prod_t p = {0};
    /* small record batches: a consumer fetches at least one whole batch of
     * a partition, so this bounds how far one partition can run ahead of
     * the others in what a reader gets */
    char batch[32];
    snprintf(batch, sizeof batch, "%d", o->batch > 0 ? o->batch : 100);
    const char *defaults[] = {"enable.idempotence", "true", "linger.ms", "5", "batch.num.messages", batch,
                              "client.id", "fraud-kafka-produce", NULL};
    /* the topic first, through sluice's helper; then a plain librdkafka producer */
    int rc = sl_kafka_ensure_topic(o->bootstrap, o->topic, g->partitions, err, errlen);
    if (rc) return rc;
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    char cerr[512];
    if (rd_kafka_conf_set(conf, "bootstrap.servers", o->bootstrap, cerr, sizeof cerr) != RD_KAFKA_CONF_OK) {
        rd_kafka_conf_destroy(conf);
        return fk_errf(err, errlen, SL_EINVAL, "produce: bootstrap.servers=%s: %s", o->bootstrap, cerr);
    }
    for (int i = 0; defaults[i]; i += 2)
        if (rd_kafka_conf_set(conf, defaults[i], defaults[i + 1], cerr, sizeof cerr) != RD_KAFKA_CONF_OK) {
            rd_kafka_conf_destroy(conf);
            return fk_errf(err, errlen, SL_EINVAL, "produce: kafka property %s=%s: %s", defaults[i], defaults[i + 1],
                           cerr);
        }
    rd_kafka_conf_set_dr_msg_cb(conf, delivered);
    rd_kafka_conf_set_opaque(conf, &p);
    if (!(p.rk = rd_kafka_new(RD_KAFKA_PRODUCER, conf, cerr, sizeof cerr))) {
        rd_kafka_conf_destroy(conf);
        return fk_errf(err, errlen, SL_EINVAL, "produce: cannot create a kafka producer: %s", cerr);
    }
    if (!rc && o->wall_clock) {
        rc = produce_wall_clock(&p, o, produced, err, errlen);
    } else if (!rc) {
        /* round robin over the partitions, poison records after their
         * transaction; the rate (if any) applies to the whole */
        int64_t t0 = fk_mono_ns(), sent = 0, most = 0;
        char val[200], key[32];
        for (int part = 0; part < g->partitions; part++)
            if (fk_gen_count(g, part) > most) most = fk_gen_count(g, part);
        for (int64_t i = 0; !rc && i < most; i++) {
            for (int part = 0; !rc && part < g->partitions; part++) {
                if (i >= fk_gen_count(g, part)) continue;
                fk_txn_t t;
                fk_gen_txn(g, part, i, &t);
                int len = txn_json(&t, val, sizeof val);
                snprintf(key, sizeof key, "%" PRId64, t.card_id);
                pace(o->rate, t0, sent);
                rc = send_one(&p, o->topic, part, key, val, (size_t)len, err, errlen);
                sent++;
                for (int64_t k = 0; !rc && k < g->poison; k++) {
                    int pp;
                    int64_t after;
                    fk_gen_poison(g, k, &pp, &after, val, sizeof val);
                    if (pp != part || after != i) continue;
                    rc = send_one(&p, o->topic, part, NULL, val, strlen(val), err, errlen);
                    sent++;
                }
                if ((sent & 1023) == 0) rd_kafka_poll(p.rk, 0);
            }
        }
        *produced = sent;
    }
    if (!rc) {
        for (int i = 0; i < 600 && rd_kafka_outq_len(p.rk) > 0; i++) rd_kafka_flush(p.rk, 100);
        if (rd_kafka_outq_len(p.rk) > 0)
            rc = fk_errf(err, errlen, SL_EIO, "produce: %d records to '%s' not acknowledged after 60 s",
                         rd_kafka_outq_len(p.rk), o->topic);
        else if (p.failed)
            rc = fk_errf(err, errlen, SL_EIO, "produce: topic '%s': %s", o->topic, p.msg);
    }
    rd_kafka_destroy(p.rk);
    return rc;
}
