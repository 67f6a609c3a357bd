/*
 * kafka_common.c — client configuration, admin calls and a bounded topic
 * scan shared by the Kafka source and sink (see kafka_common.h).
 */
#include "connectors/kafka_common.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

char **sl_kafka_props_copy(const char *const *props) {
    int n = 0;
    while (props && props[n]) n++;
    char **c = sl_calloc((size_t)n + 1, sizeof *c);
    for (int i = 0; i < n; i++) c[i] = sl_strdup(props[i]);
    return c;
}

void sl_kafka_props_free(char **props) {
    if (!props) return;
    for (int i = 0; props[i]; i++) sl_free(props[i]);
    sl_free(props);
}

static int conf_set(rd_kafka_conf_t *conf, const char *k, const char *v, char *err, size_t errlen) {
    char e[512];
    if (rd_kafka_conf_set(conf, k, v, e, sizeof e) != RD_KAFKA_CONF_OK)
        return sl_errf(err, errlen, SL_EINVAL, "kafka property %s=%s: %s", k, v, e);
    return 0;
}

rd_kafka_conf_t *sl_kafka_conf_new(const char *bootstrap, char *const *user_props, const char *const *defaults,
                                   char *err, size_t errlen) {
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    int rc = conf_set(conf, "bootstrap.servers", bootstrap, err, errlen);
    for (int i = 0; !rc && defaults && defaults[i]; i += 2) rc = conf_set(conf, defaults[i], defaults[i + 1], err, errlen);
    for (int i = 0; !rc && user_props && user_props[i]; i++) {
        const char *eq = strchr(user_props[i], '=');
        if (!eq || eq == user_props[i]) {
            rc = sl_errf(err, errlen, SL_EINVAL, "kafka property '%s': expected key=value", user_props[i]);
            break;
        }
        char *k = sl_strndup(user_props[i], (size_t)(eq - user_props[i]));
        rc = conf_set(conf, k, eq + 1, err, errlen);
        sl_free(k);
    }
    if (rc) {
        rd_kafka_conf_destroy(conf);
        return NULL;
    }
    return conf;
}

rd_kafka_t *sl_kafka_client_new(rd_kafka_type_t type, rd_kafka_conf_t *conf, char *err, size_t errlen) {
    char e[512];
    rd_kafka_t *rk = rd_kafka_new(type, conf, e, sizeof e);
    if (!rk) {
        rd_kafka_conf_destroy(conf);
        sl_errf(err, errlen, SL_EINVAL, "cannot create a kafka %s: %s", type == RD_KAFKA_PRODUCER ? "producer" : "consumer",
                e);
    }
    return rk;
}

const char *sl_kafka_error_text(rd_kafka_error_t *e, char *buf, size_t cap) {
    snprintf(buf, cap, "%s", e ? rd_kafka_error_string(e) : "no error");
    if (e) rd_kafka_error_destroy(e);
    return buf;
}

/* Runs one admin request whose result event is `want`; returns the event
 * (caller destroys) or NULL with a message. */
static rd_kafka_event_t *admin_wait(rd_kafka_queue_t *q, rd_kafka_event_type_t want, const char *what, char *err,
                                    size_t errlen) {
    rd_kafka_event_t *ev = rd_kafka_queue_poll(q, SL_KAFKA_CALL_TIMEOUT_MS + 5000);
    if (!ev) {
        sl_errf(err, errlen, SL_EIO, "%s: no answer from the cluster within %d ms", what, SL_KAFKA_CALL_TIMEOUT_MS);
        return NULL;
    }
    if (rd_kafka_event_type(ev) != want || rd_kafka_event_error(ev)) {
        sl_errf(err, errlen, SL_EIO, "%s: %s", what,
                rd_kafka_event_error(ev) ? rd_kafka_event_error_string(ev) : "unexpected answer");
        rd_kafka_event_destroy(ev);
        return NULL;
    }
    return ev;
}

int sl_kafka_create_topic(rd_kafka_t *rk, const char *topic, int partitions, const char *const *configs, char *err,
                          size_t errlen) {
    char e[512];
    rd_kafka_NewTopic_t *nt = rd_kafka_NewTopic_new(topic, partitions, -1, e, sizeof e);
    if (!nt) return sl_errf(err, errlen, SL_EINVAL, "cannot create topic '%s': %s", topic, e);
    for (int i = 0; configs && configs[i]; i += 2) rd_kafka_NewTopic_set_config(nt, configs[i], configs[i + 1]);
    rd_kafka_AdminOptions_t *ao = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_CREATETOPICS);
    rd_kafka_AdminOptions_set_request_timeout(ao, SL_KAFKA_CALL_TIMEOUT_MS, e, sizeof e);
    rd_kafka_AdminOptions_set_operation_timeout(ao, SL_KAFKA_CALL_TIMEOUT_MS, e, sizeof e);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_CreateTopics(rk, &nt, 1, ao, q);
    char what[300];
    snprintf(what, sizeof what, "creating topic '%s'", topic);
    rd_kafka_event_t *ev = admin_wait(q, RD_KAFKA_EVENT_CREATETOPICS_RESULT, what, err, errlen);
    int rc = ev ? 0 : SL_EIO;
    if (ev) {
        size_t n = 0;
        const rd_kafka_topic_result_t **res =
            rd_kafka_CreateTopics_result_topics(rd_kafka_event_CreateTopics_result(ev), &n);
        for (size_t i = 0; i < n; i++) {
            rd_kafka_resp_err_t te = rd_kafka_topic_result_error(res[i]);
            if (te && te != RD_KAFKA_RESP_ERR_TOPIC_ALREADY_EXISTS)
                rc = sl_errf(err, errlen, SL_EIO, "cannot create topic '%s': %s", topic,
                             rd_kafka_topic_result_error_string(res[i]) ? rd_kafka_topic_result_error_string(res[i])
                                                                        : rd_kafka_err2str(te));
        }
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_queue_destroy(q);
    rd_kafka_AdminOptions_destroy(ao);
    rd_kafka_NewTopic_destroy(nt);
    /* a topic just created is not served until every partition has a
     * leader: producing to it earlier can fail */
    int64_t deadline = sl_mono_ns() + (int64_t)SL_KAFKA_CALL_TIMEOUT_MS * 1000000;
    while (!rc) {
        const struct rd_kafka_metadata *md = NULL;
        rd_kafka_topic_t *t = rd_kafka_topic_new(rk, topic, NULL);
        bool ready = false;
        if (!rd_kafka_metadata(rk, 0, t, &md, 2000)) {
            ready = md->topic_cnt == 1 && !md->topics[0].err && md->topics[0].partition_cnt > 0;
            for (int i = 0; ready && i < md->topics[0].partition_cnt; i++)
                ready = md->topics[0].partitions[i].leader >= 0 && !md->topics[0].partitions[i].err;
            rd_kafka_metadata_destroy(md);
        }
        rd_kafka_topic_destroy(t);
        if (ready) break;
        if (sl_mono_ns() > deadline)
            rc = sl_errf(err, errlen, SL_EIO, "topic '%s' was created but has no leader after %d ms", topic,
                         SL_KAFKA_CALL_TIMEOUT_MS);
        else
            usleep(50000);
    }
    return rc;
}

int sl_kafka_partition_counts(rd_kafka_t *rk, const char *const *topics, int ntopics, int *counts, int timeout_ms,
                              char *err, size_t errlen) {
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t e = rd_kafka_metadata(rk, 1, NULL, &md, timeout_ms);
    if (e) return sl_errf(err, errlen, SL_EIO, "cannot read the cluster's metadata: %s", rd_kafka_err2str(e));
    for (int t = 0; t < ntopics; t++) {
        counts[t] = 0;
        for (int i = 0; i < md->topic_cnt; i++)
            if (strcmp(md->topics[i].topic, topics[t]) == 0 && !md->topics[i].err) counts[t] = md->topics[i].partition_cnt;
    }
    rd_kafka_metadata_destroy(md);
    return 0;
}

int sl_kafka_broker_config(rd_kafka_t *rk, const char *name, char *out, size_t cap, char *err, size_t errlen) {
    const struct rd_kafka_metadata *md = NULL;
    rd_kafka_resp_err_t me = rd_kafka_metadata(rk, 0, NULL, &md, SL_KAFKA_CALL_TIMEOUT_MS);
    if (me) return sl_errf(err, errlen, SL_EIO, "cannot read the cluster's metadata: %s", rd_kafka_err2str(me));
    if (md->broker_cnt < 1) {
        rd_kafka_metadata_destroy(md);
        return sl_errf(err, errlen, SL_EIO, "the cluster's metadata lists no broker");
    }
    char id[32];
    snprintf(id, sizeof id, "%" PRId32, md->brokers[0].id);
    rd_kafka_metadata_destroy(md);
    char e[512];
    rd_kafka_ConfigResource_t *res = rd_kafka_ConfigResource_new(RD_KAFKA_RESOURCE_BROKER, id);
    rd_kafka_AdminOptions_t *ao = rd_kafka_AdminOptions_new(rk, RD_KAFKA_ADMIN_OP_DESCRIBECONFIGS);
    rd_kafka_AdminOptions_set_request_timeout(ao, SL_KAFKA_CALL_TIMEOUT_MS, e, sizeof e);
    rd_kafka_queue_t *q = rd_kafka_queue_new(rk);
    rd_kafka_DescribeConfigs(rk, &res, 1, ao, q);
    char what[300];
    snprintf(what, sizeof what, "reading broker %s's setting %s", id, name);
    rd_kafka_event_t *ev = admin_wait(q, RD_KAFKA_EVENT_DESCRIBECONFIGS_RESULT, what, err, errlen);
    int rc = ev ? sl_errf(err, errlen, SL_ENOTFOUND, "broker %s has no setting %s", id, name) : SL_EIO;
    if (ev) {
        size_t nr = 0;
        const rd_kafka_ConfigResource_t **rs =
            rd_kafka_DescribeConfigs_result_resources(rd_kafka_event_DescribeConfigs_result(ev), &nr);
        for (size_t i = 0; i < nr && rc; i++) {
            if (rd_kafka_ConfigResource_error(rs[i])) {
                rc = sl_errf(err, errlen, SL_EIO, "%s: %s", what, rd_kafka_ConfigResource_error_string(rs[i]));
                break;
            }
            size_t nc = 0;
            const rd_kafka_ConfigEntry_t **ce = rd_kafka_ConfigResource_configs(rs[i], &nc);
            for (size_t j = 0; j < nc; j++)
                if (strcmp(rd_kafka_ConfigEntry_name(ce[j]), name) == 0) {
                    const char *v = rd_kafka_ConfigEntry_value(ce[j]);
                    snprintf(out, cap, "%s", v ? v : "");
                    rc = 0;
                    break;
                }
        }
        rd_kafka_event_destroy(ev);
    }
    rd_kafka_queue_destroy(q);
    rd_kafka_AdminOptions_destroy(ao);
    rd_kafka_ConfigResource_destroy(res);
    return rc;
}

typedef struct scan_part {
    int64_t end; /* stop before */
    bool done;
} scan_part_t;

int sl_kafka_scan(const char *bootstrap, char *const *user_props, const char *topic, bool read_committed,
                  sl_kafka_scan_fn fn, void *ctx, int timeout_ms, char *err, size_t errlen) {
    /* assign() needs a group id; nothing is committed to it */
    static const char *const defaults[] = {"group.id", "sluice-scan", "enable.partition.eof", "true",
                                           "enable.auto.commit", "false", "auto.offset.reset", "error", NULL};
    rd_kafka_conf_t *conf = sl_kafka_conf_new(bootstrap, user_props, defaults, err, errlen);
    if (!conf) return SL_EINVAL;
    /* the isolation level is the caller's choice, never overridden */
    int rc = conf_set(conf, "isolation.level", read_committed ? "read_committed" : "read_uncommitted", err, errlen);
    if (rc) {
        rd_kafka_conf_destroy(conf);
        return rc;
    }
    rd_kafka_t *rk = sl_kafka_client_new(RD_KAFKA_CONSUMER, conf, err, errlen);
    if (!rk) return SL_EINVAL;
    /* The end is the high watermark, which only a read_uncommitted client
     * is told (a read_committed one gets the last stable offset, and would
     * stop before records committed after a transaction still open). */
    rd_kafka_t *hw = rk;
    if (read_committed) {
        rd_kafka_conf_t *hc = sl_kafka_conf_new(bootstrap, user_props, defaults, err, errlen);
        if (hc && conf_set(hc, "isolation.level", "read_uncommitted", err, errlen)) {
            rd_kafka_conf_destroy(hc);
            hc = NULL;
        }
        hw = hc ? sl_kafka_client_new(RD_KAFKA_CONSUMER, hc, err, errlen) : NULL;
        if (!hw) {
            rd_kafka_destroy(rk);
            return SL_EINVAL;
        }
    }
    int nparts = 0;
    const char *topics[1] = {topic};
    rc = sl_kafka_partition_counts(rk, topics, 1, &nparts, SL_KAFKA_CALL_TIMEOUT_MS, err, errlen);
    if (!rc && nparts == 0) rc = sl_errf(err, errlen, SL_ENOTFOUND, "topic '%s' does not exist", topic);
    scan_part_t *parts = sl_calloc((size_t)(nparts ? nparts : 1), sizeof *parts);
    rd_kafka_topic_partition_list_t *tl = rd_kafka_topic_partition_list_new(nparts ? nparts : 1);
    int left = 0;
    for (int p = 0; !rc && p < nparts; p++) {
        int64_t lo = 0, hi = 0;
        rd_kafka_resp_err_t e = rd_kafka_query_watermark_offsets(hw, topic, p, &lo, &hi, SL_KAFKA_CALL_TIMEOUT_MS);
        if (e) {
            rc = sl_errf(err, errlen, SL_EIO, "topic '%s' partition %d: cannot read its offsets: %s", topic, p,
                         rd_kafka_err2str(e));
            break;
        }
        parts[p].end = hi;
        parts[p].done = hi <= lo;
        if (!parts[p].done) {
            rd_kafka_topic_partition_list_add(tl, topic, p)->offset = lo;
            left++;
        }
    }
    if (!rc && left) {
        rd_kafka_resp_err_t e = rd_kafka_assign(rk, tl);
        if (e) rc = sl_errf(err, errlen, SL_EIO, "topic '%s': cannot assign its partitions: %s", topic, rd_kafka_err2str(e));
    }
    int64_t deadline = sl_mono_ns() + (int64_t)timeout_ms * 1000000;
    while (!rc && left > 0) {
        if (sl_mono_ns() > deadline) {
            rc = sl_errf(err, errlen, SL_EIO,
                         "topic '%s': reading to its end took more than %d ms (a transaction still open?)", topic,
                         timeout_ms);
            break;
        }
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m) {
            /* the position moves past transaction markers too */
            rd_kafka_topic_partition_list_t *pos = rd_kafka_topic_partition_list_copy(tl);
            if (!rd_kafka_position(rk, pos))
                for (int i = 0; i < pos->cnt; i++) {
                    scan_part_t *sp = &parts[pos->elems[i].partition];
                    if (!sp->done && pos->elems[i].offset >= sp->end) sp->done = true, left--;
                }
            rd_kafka_topic_partition_list_destroy(pos);
            continue;
        }
        int32_t p = m->partition;
        if (p < 0 || p >= nparts) {
            rd_kafka_message_destroy(m);
            continue;
        }
        scan_part_t *sp = &parts[p];
        if (m->err == RD_KAFKA_RESP_ERR__PARTITION_EOF) {
            if (!sp->done && m->offset >= sp->end) sp->done = true, left--;
        } else if (m->err) {
            if (m->err == RD_KAFKA_RESP_ERR__AUTO_OFFSET_RESET || rd_kafka_fatal_error(rk, NULL, 0))
                rc = sl_errf(err, errlen, SL_EIO, "reading topic '%s' partition %d: %s", topic, p,
                             rd_kafka_message_errstr(m));
        } else if (!sp->done && m->offset < sp->end) {
            rc = fn(ctx, m);
            if (!rc && m->offset + 1 >= sp->end) sp->done = true, left--;
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_topic_partition_list_destroy(tl);
    sl_free(parts);
    if (hw != rk) rd_kafka_destroy(hw);
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);
    return rc;
}

int sl_kafka_owner(const char *topic, int32_t partition, int parallelism) {
    uint64_t start = sl_hash_bytes(topic, strlen(topic)) % (uint64_t)parallelism;
    return (int)((start + (uint64_t)partition) % (uint64_t)parallelism);
}

/* ---- public helpers (sluice/kafka.h) ---- */

int sl_kafka_ensure_topic(const char *bootstrap, const char *topic, int partitions, char *err, size_t errlen) {
    if (!bootstrap || !*bootstrap || !topic || !*topic || partitions < 1)
        return sl_errf(err, errlen, SL_EINVAL, "kafka: ensure topic: need bootstrap servers, a topic and partitions >= 1");
    rd_kafka_conf_t *conf = sl_kafka_conf_new(bootstrap, NULL, NULL, err, errlen);
    if (!conf) return SL_EINVAL;
    rd_kafka_t *rk = sl_kafka_client_new(RD_KAFKA_PRODUCER, conf, err, errlen);
    if (!rk) return SL_EINVAL;
    int rc = sl_kafka_create_topic(rk, topic, partitions, NULL, err, errlen);
    int have = 0;
    if (!rc) rc = sl_kafka_partition_counts(rk, &topic, 1, &have, SL_KAFKA_CALL_TIMEOUT_MS, err, errlen);
    if (!rc && have != partitions)
        rc = sl_errf(err, errlen, SL_EINVAL, "kafka: topic '%s' has %d partitions, not %d", topic, have, partitions);
    rd_kafka_destroy(rk);
    return rc;
}

typedef struct read_ctx {
    sl_kafka_record_fn fn;
    void *ctx;
} read_ctx_t;

static int read_one(void *ctx, const rd_kafka_message_t *m) {
    read_ctx_t *r = ctx;
    rd_kafka_timestamp_type_t tt;
    int64_t ts = rd_kafka_message_timestamp(m, &tt);
    sl_kafka_record_t rec = {
        .topic = m->rkt ? rd_kafka_topic_name(m->rkt) : NULL,
        .partition = m->partition,
        .offset = m->offset,
        .timestamp_ms = tt == RD_KAFKA_TIMESTAMP_NOT_AVAILABLE ? -1 : ts,
        .key = m->key,
        .key_len = m->key_len,
        .value = m->payload,
        .value_len = m->len,
    };
    return r->fn(r->ctx, &rec);
}

int sl_kafka_read_topic(const char *bootstrap, const char *topic, bool read_committed, sl_kafka_record_fn fn,
                        void *ctx, int timeout_ms, char *err, size_t errlen) {
    if (!fn) return sl_errf(err, errlen, SL_EINVAL, "kafka: read topic: no function given");
    read_ctx_t r = {fn, ctx};
    return sl_kafka_scan(bootstrap, NULL, topic, read_committed, read_one, &r, timeout_ms, err, errlen);
}
