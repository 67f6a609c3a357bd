/*
 * cep_login.c — complex event processing on login events (sluice/cep.h).
 *
 * Per user, two patterns in event time:
 *   1. a failed login followed by a successful one within 5 minutes;
 *   2. three failed logins in a row, then a success, within 5 minutes.
 * Matches are printed; partial matches of pattern 2 that ran out of time
 * are printed as "timed out" (a side output).
 *
 * Input: a CSV file of "user,event,ts" lines (event is fail or success, ts
 * in ms), given as the first argument; without one, a small input is
 * generated into a temporary file.  Usage: cep_login [events.csv]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice/cep.h"
#include "sluice/sluice.h"

#define MINUTE 60000

static const char *SCHEMA = "user STRING NOT NULL, event STRING NOT NULL, ts BIGINT NOT NULL";

/* Condition: the event field equals ctx (a string). */
static int event_is(void *ctx, const sl_row_t *e, int64_t ts) {
    (void)ts;
    uint32_t n;
    const char *v = sl_row_str(e, 1, &n);
    return n == strlen(ctx) && memcmp(v, ctx, n) == 0;
}

/* Output: user, pattern, first event time, last event time, events. */
static sl_schema_t *out_schema(void) {
    return sl_schema_parse("user STRING NOT NULL, pattern STRING NOT NULL, first_ts BIGINT NOT NULL, "
                           "last_ts BIGINT NOT NULL, events BIGINT NOT NULL",
                           NULL, 0);
}

static void fill(sl_row_writer_t *w, const sl_cep_match_t *m, const char *name) {
    int64_t first = 0, last = 0, n = 0;
    sl_row_t user = {0};
    for (int s = 0; s < sl_cep_match_stages(m); s++)
        for (int i = 0; i < sl_cep_match_count(m, s); i++) {
            int64_t ts;
            sl_row_t r = sl_cep_match_event(m, s, i, &ts);
            if (!n) first = ts, user = r;
            last = ts;
            n++;
        }
    uint32_t ul;
    const char *u = sl_row_str(&user, 0, &ul);
    sl_rw_set_str(w, 0, u, ul);
    sl_rw_set_str(w, 1, name, (uint32_t)strlen(name));
    sl_rw_set_i64(w, 2, first);
    sl_rw_set_i64(w, 3, last);
    sl_rw_set_i64(w, 4, n);
}

static int select_fn(void *ctx, const sl_cep_match_t *m, sl_collector_t *out) {
    fill(sl_out_row(out), m, ctx);
    sl_emit(out);
    return 0;
}

static int timeout_fn(void *ctx, const sl_cep_match_t *m, int64_t ts, sl_collector_t *out) {
    (void)ts;
    char name[64];
    snprintf(name, sizeof name, "%s timed out", (const char *)ctx);
    fill(sl_side_row(out, "timed-out"), m, name);
    sl_emit_side(out, "timed-out");
    return 0;
}

/* A few users, each with a burst of logins; some bursts end in a success. */
static int generate(const char *path) {
    FILE *f = fopen(path, "w");
    if (!f) return -1;
    static const char *users[] = {"alice", "bob", "carol", "dave", "erin"};
    uint64_t s = 42;
    int64_t t = 0;
    for (int burst = 0; burst < 12; burst++) {
        const char *u = users[burst % 5];
        int fails = (int)(s % 5);
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        for (int i = 0; i < fails; i++) {
            t += 10000 + (int64_t)((s >> 33) % 20000);
            s = s * 6364136223846793005ULL + 1442695040888963407ULL;
            fprintf(f, "%s,fail,%lld\n", u, (long long)t);
        }
        bool ok = (s >> 40) % 3 != 0;
        t += (int64_t)((s >> 20) % (6 * MINUTE / 2));
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        if (ok) fprintf(f, "%s,success,%lld\n", u, (long long)t);
    }
    return fclose(f);
}

int main(int argc, char **argv) {
    char path[256];
    if (argc > 1) {
        snprintf(path, sizeof path, "%s", argv[1]);
    } else {
        snprintf(path, sizeof path, "/tmp/cep_login_%d.csv", (int)getpid());
        if (generate(path) != 0) {
            perror(path);
            return 1;
        }
    }
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 2);
    sl_output_tag(env, "timed-out", out_schema());
    sl_schema_t *logins = sl_schema_parse(SCHEMA, NULL, 0);
    sl_source_t src = sl_file_source(path, SL_FMT_CSV, logins, SL_ON_ERROR_FAIL); /* takes its own reference */
    sl_schema_unref(logins);
    sl_stream_t *in = sl_parallelism(sl_from_source(env, src, sl_wm_bounded("ts", 1000), "logins"), 1);

    /* 1. fail -> success within 5 minutes */
    sl_pattern_t *p1 = sl_pattern_begin("fail");
    sl_pattern_where(p1, event_is, "fail");
    sl_pattern_followed_by(p1, "success");
    sl_pattern_where(p1, event_is, "success");
    sl_pattern_within(p1, 5 * MINUTE);
    sl_pattern_skip(p1, SL_CEP_SKIP_PAST_LAST_EVENT, NULL);
    sl_cep_fn_t f1 = {.select = select_fn, .opts = {.ctx = "fail-then-success"}};
    sl_stream_t *m1 = sl_cep(sl_key_by(in, "user"), p1, f1, out_schema());

    /* 2. three fails in a row, then a success, within 5 minutes */
    sl_pattern_t *p2 = sl_pattern_begin("fails");
    sl_pattern_where(p2, event_is, "fail");
    sl_pattern_times(p2, 3);
    sl_pattern_consecutive(p2);
    sl_pattern_next(p2, "success");
    sl_pattern_where(p2, event_is, "success");
    sl_pattern_within(p2, 5 * MINUTE);
    sl_pattern_skip(p2, SL_CEP_SKIP_PAST_LAST_EVENT, NULL);
    sl_cep_fn_t f2 = {.select = select_fn, .timeout = timeout_fn, .opts = {.ctx = "3-fails-then-success"}};
    sl_stream_t *m2 = sl_cep(sl_key_by(in, "user"), p2, f2, out_schema());

    sl_parallelism(sl_sink_to(sl_union(m1, m2), sl_print_sink("match: "), "matches"), 1);
    if (m2) sl_parallelism(sl_sink_to(sl_side_output(m2, "timed-out"), sl_print_sink("timeout: "), "timeouts"), 1);
    int rc = sl_env_execute(env, "cep-login");
    if (rc != 0) fprintf(stderr, "cep_login: %s\n", sl_env_error(env));
    sl_env_destroy(env);
    if (argc <= 1) unlink(path);
    return rc == 0 ? 0 : 1;
}
