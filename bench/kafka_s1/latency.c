/*
 * latency.c — end-to-end latency of the fraud pipeline on Kafka
 * (bench/kafka_s1.sh), measured from outside the job.
 *
 *   kafka_s1_latency BOOTSTRAP EVENTS DECISIONS SECONDS WINDOW_MS BOUND_MS
 *
 * For SECONDS it consumes DECISIONS from the beginning (read_uncommitted:
 * the job runs at-least-once) and notes, for every decision row, the wall
 * clock when it arrived and its window end e.  Then it reads EVENTS (whose
 * transactions carry ts = the wall clock when they were produced) and
 * computes, per window end e, the moment the window could first fire:
 *
 *   F(e) = max over the non-empty partitions p of
 *          ts of the first record of p (in offset order) with ts >= e + BOUND_MS
 *
 * i.e. when the last partition got the event that moves its watermark
 * (max_ts - BOUND_MS - 1) to e - 1, the window's last millisecond.  The
 * latency of a row is arrival - F(e).  Windows without such a record in
 * every partition (the last ones, fired by no event) are left out.  Prints
 * rows, windows, p50, p99 and max in ms.
 */
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "connectors/kafka_common.h"

typedef struct row {
    int64_t we, at;
} row_t;

typedef struct parts {
    int64_t *ts[256];
    int64_t n[256], cap[256];
} parts_t;

static int64_t parse_iso_ms(const char *s) {
    int y, mo, d, h, mi, se, ms;
    if (!s || sscanf(s, "%d-%d-%dT%d:%d:%d.%dZ", &y, &mo, &d, &h, &mi, &se, &ms) != 7) return INT64_MIN;
    struct tm tm = {0};
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = se;
    return (int64_t)timegm(&tm) * 1000 + ms;
}

static int collect(void *ctx, const rd_kafka_message_t *m) {
    parts_t *p = ctx;
    if (m->partition < 0 || m->partition >= 256 || !m->payload) return 0;
    char buf[256];
    size_t n = m->len < sizeof buf - 1 ? m->len : sizeof buf - 1;
    memcpy(buf, m->payload, n);
    buf[n] = 0;
    const char *t = strstr(buf, "\"ts\":");
    if (!t) return 0;
    int k = m->partition;
    if (p->n[k] == p->cap[k]) {
        p->cap[k] = p->cap[k] ? p->cap[k] * 2 : 4096;
        p->ts[k] = realloc(p->ts[k], (size_t)p->cap[k] * sizeof **p->ts);
    }
    p->ts[k][p->n[k]++] = atoll(t + 5);
    return 0;
}

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: kafka_s1_latency BOOTSTRAP EVENTS DECISIONS SECONDS WINDOW_MS BOUND_MS\n");
        return 2;
    }
    const char *bootstrap = argv[1], *events = argv[2], *decisions = argv[3];
    int64_t seconds = atoll(argv[4]), bound = atoll(argv[6]);
    char err[512];
    rd_kafka_conf_t *c = rd_kafka_conf_new();
    rd_kafka_conf_set(c, "bootstrap.servers", bootstrap, err, sizeof err);
    rd_kafka_conf_set(c, "group.id", "kafka-s1-latency", err, sizeof err);
    rd_kafka_conf_set(c, "enable.auto.commit", "false", err, sizeof err);
    rd_kafka_conf_set(c, "isolation.level", "read_uncommitted", err, sizeof err);
    rd_kafka_conf_set(c, "fetch.wait.max.ms", "10", err, sizeof err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, c, err, sizeof err);
    if (!rk) {
        fprintf(stderr, "kafka_s1_latency: %s\n", err);
        return 1;
    }
    int nparts = 0;
    const char *topics[1] = {decisions};
    if (sl_kafka_partition_counts(rk, topics, 1, &nparts, 10000, err, sizeof err) != 0 || nparts == 0) {
        fprintf(stderr, "kafka_s1_latency: topic %s: %s\n", decisions, nparts ? err : "missing");
        return 1;
    }
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(nparts);
    for (int p = 0; p < nparts; p++) rd_kafka_topic_partition_list_add(l, decisions, p)->offset = RD_KAFKA_OFFSET_BEGINNING;
    rd_kafka_assign(rk, l);
    rd_kafka_topic_partition_list_destroy(l);
    row_t *rows = NULL;
    int64_t n = 0, cap = 0;
    int64_t end = sl_mono_ns() / 1000000 + seconds * 1000;
    while (sl_mono_ns() / 1000000 < end) {
        rd_kafka_message_t *m = rd_kafka_consumer_poll(rk, 100);
        if (!m) continue;
        int64_t at = sl_wall_ms();
        if (!m->err && m->payload) {
            json_error_t je;
            json_t *j = json_loadb(m->payload, m->len, 0, &je);
            int64_t we = parse_iso_ms(json_string_value(json_object_get(j, "window_end")));
            json_decref(j);
            if (we != INT64_MIN) {
                if (n == cap) {
                    cap = cap ? cap * 2 : 65536;
                    rows = realloc(rows, (size_t)cap * sizeof *rows);
                }
                rows[n++] = (row_t){we, at};
            }
        }
        rd_kafka_message_destroy(m);
    }
    rd_kafka_consumer_close(rk);
    rd_kafka_destroy(rk);

    parts_t *ps = calloc(1, sizeof *ps);
    if (sl_kafka_scan(bootstrap, NULL, events, false, collect, ps, 120000, err, sizeof err) != 0) {
        fprintf(stderr, "kafka_s1_latency: reading %s: %s\n", events, err);
        return 1;
    }
    int64_t *lat = malloc((size_t)(n ? n : 1) * sizeof *lat);
    int64_t nl = 0, unfired = 0, windows = 0, last_we = INT64_MIN, fire = INT64_MIN;
    /* rows grouped by window end (they arrive in bursts, one per window) */
    for (int64_t i = 0; i < n; i++) {
        if (rows[i].we != last_we) {
            last_we = rows[i].we;
            fire = INT64_MIN;
            bool all = true;
            for (int p = 0; p < 256 && all; p++) {
                if (!ps->n[p]) continue;
                int64_t first = INT64_MIN;
                for (int64_t k = 0; k < ps->n[p]; k++)
                    if (ps->ts[p][k] >= last_we + bound) {
                        first = ps->ts[p][k];
                        break;
                    }
                if (first == INT64_MIN) all = false;
                else if (first > fire) fire = first;
            }
            if (!all) fire = INT64_MIN;
            else windows++;
        }
        if (fire == INT64_MIN) {
            unfired++;
            continue;
        }
        lat[nl++] = rows[i].at - fire;
    }
    qsort(lat, (size_t)nl, sizeof *lat, cmp_i64);
    if (nl == 0) {
        printf("rows=%" PRId64 " windows=0 unfired=%" PRId64 " p50_ms=- p99_ms=- max_ms=-\n", n, unfired);
        return 1;
    }
    printf("rows=%" PRId64 " windows=%" PRId64 " unfired=%" PRId64 " min_ms=%" PRId64 " p50_ms=%" PRId64
           " p99_ms=%" PRId64 " max_ms=%" PRId64 "\n",
           nl, windows, unfired, lat[0], lat[nl / 2], lat[(nl * 99) / 100], lat[nl - 1]);
    for (int p = 0; p < 256; p++) free(ps->ts[p]);
    free(ps);
    free(lat);
    free(rows);
    return 0;
}
