/*
 * nexmark_main.c — the `nexmark` driver: runs one Nexmark query on sluice
 * over the built-in Nexmark generator and prints one line of key=value
 * figures (the format bench/nexmark/run.sh reads; the Flink program prints
 * the same keys).
 *
 *   nexmark --query q5 --events 10M -p 2
 *   nexmark --query q5 --events 10M -p 2 --checkpoint-interval 10000 --checkpoint-dir /tmp/ck
 *   nexmark --query q1 --rate 1M --duration 10 --latency
 *   nexmark --gen-checksum 1M          checksum of the first N events (compare with the Java port)
 *
 * Throughput: events / wall second of sl_env_execute and events / CPU second
 * (user + sys of the whole process over the same span, getrusage): the
 * second is "events per second per core".  Peak RSS is the process's
 * ru_maxrss.
 *
 * Latency (--latency, needs --rate): the generator emits at the rate and its
 * event time follows the schedule, --time-scale (100) times faster than wall
 * time so that 10 s windows close every 100 ms (inter-event delay
 * 1e6 / rate * scale us; sl_nexmark_due_ns tells when event time T is due).  A result that follows from one event
 * (q0-q3) measures now - the event's emission time (emit_ns); a result that
 * waits for the watermark (q4, q5, q7, q8, q11; timestamp t) measures
 * now - the time the first event with dateTime >= t + B + 1 was due, B the
 * watermark's out-of-orderness: the moment the result could first be
 * produced.  Results due in the first 2 s (warm-up) are left out, and
 * so are results due after the last event (the end of input fires them).
 */
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "queries.h"

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- latency histogram: 64 sub-buckets per power of two (< 1.6 % error) -- */

#define H_SUB 64
#define H_BUCKETS (H_SUB + 58 * H_SUB)

typedef struct hist {
    int64_t n[H_BUCKETS];
    int64_t count, max;
} hist_t;

static int h_index(int64_t v) {
    if (v < 0) v = 0;
    if (v < H_SUB) return (int)v;
    int e = 63 - __builtin_clzll((uint64_t)v);
    return H_SUB + (e - 6) * H_SUB + (int)((uint64_t)v >> (e - 6)) - H_SUB;
}

static double h_mid(int i) {
    if (i < H_SUB) return i;
    int e = (i - H_SUB) / H_SUB + 6, sub = (i - H_SUB) % H_SUB;
    return (double)((uint64_t)(H_SUB + sub) << (e - 6)) + (double)(1ULL << (e - 6)) / 2;
}

static double h_quantile(const hist_t *h, double q) {
    if (!h->count) return NAN;
    int64_t want = (int64_t)ceil(q * (double)h->count), c = 0;
    if (want < 1) want = 1;
    for (int i = 0; i < H_BUCKETS; i++) {
        c += h->n[i];
        if (c >= want) return fmin(h_mid(i), (double)h->max);
    }
    return (double)h->max;
}

/* ---- the result sink: count, checksum, latency (per subtask, merged) ---- */

typedef struct results {
    pthread_mutex_t mu;
    nx_row_hasher_t hasher;
    const nx_query_t *q;
    const sl_nexmark_opts_t *gen;
    bool latency;
    int64_t wm_bound_ms;
    int64_t warmup_until_ns; /* results due before this are not measured */
    int64_t sched_end_ns;    /* ... nor those due after the last event (fired by the end of input) */
    int64_t count;
    uint64_t checksum;
    hist_t lat; /* ns */
} results_t;

typedef struct writer {
    results_t *R;
    int64_t count;
    uint64_t checksum;
    hist_t *lat;
} writer_t;

static int rs_open(void *ctx, int subtask, int parallelism, const sl_schema_t *schema, void **w, char *err,
                   size_t errlen) {
    writer_t *x = calloc(1, sizeof *x);
    x->R = ctx;
    if (x->R->latency) x->lat = calloc(1, sizeof *x->lat);
    *w = x;
    return 0;
}

static int rs_write(void *w, const sl_record_t *rec, char *err, size_t errlen) {
    writer_t *x = w;
    x->count++;
    x->checksum += nx_row_hash(&x->R->hasher, &rec->row);
    if (x->lat) {
        const results_t *R = x->R;
        int64_t ref;
        if (R->q->per_record) {
            int f = sl_schema_field_count(rec->row.schema) - 1; /* emit_ns is last */
            if (sl_row_is_null(&rec->row, f)) return 0;
            ref = sl_row_i64(&rec->row, f);
        } else {
            if (rec->ts == SL_NO_TIMESTAMP || rec->ts >= INT64_MAX / 2) return 0; /* fired by the end of input */
            ref = sl_nexmark_due_ns(R->gen, rec->ts + R->wm_bound_ms + 1);
        }
        if (ref < R->warmup_until_ns || ref > R->sched_end_ns) return 0;
        int64_t v = mono_ns() - ref;
        x->lat->n[h_index(v)]++;
        x->lat->count++;
        if (v > x->lat->max) x->lat->max = v;
    }
    return 0;
}

static int rs_finish(void *w, char *err, size_t errlen) { return 0; }

static void rs_close(void *w) {
    writer_t *x = w;
    results_t *R = x->R;
    pthread_mutex_lock(&R->mu);
    R->count += x->count;
    R->checksum += x->checksum;
    if (x->lat) {
        for (int i = 0; i < H_BUCKETS; i++) R->lat.n[i] += x->lat->n[i];
        R->lat.count += x->lat->count;
        if (x->lat->max > R->lat.max) R->lat.max = x->lat->max;
    }
    pthread_mutex_unlock(&R->mu);
    free(x->lat);
    free(x);
}

static void rs_destroy(void *ctx) {}

static const sl_sink_ops_t results_ops = {
    .name = "results",
    .open = rs_open,
    .write = rs_write,
    .finish = rs_finish,
    .close = rs_close,
    .destroy = rs_destroy,
};

/* ---- options ------------------------------------------------------------ */

static void usage(FILE *f) {
    fprintf(f,
            "usage: nexmark --query qN [options]\n"
            "       nexmark --gen-checksum N [--seed S] [--event-rate E]\n"
            "queries: q0 q1 q2 q3 q4 q5 q7 q8 q11, and ij (interval join), cep (CEP)\n"
            "  --events N               events to generate (K/M suffixes; default 10M)\n"
            "  -p, --parallelism P      parallelism of every operator (default 1)\n"
            "  --checkpoint-interval MS exactly-once checkpoints every MS ms\n"
            "  --checkpoint-dir D       where checkpoints are written (default: not persisted)\n"
            "  --backend B              keyed state: heap (default) or rocksdb\n"
            "  --rate R                 emit R events/s (default: as fast as possible)\n"
            "  --latency                measure result latency (needs --rate; event time follows the schedule)\n"
            "  --duration S             latency runs: seconds (events = rate * S; default 10)\n"
            "  --event-rate E           events per second of event time (default 1M; Nexmark's own is 10M)\n"
            "  --time-scale X           latency runs: event time runs X times faster than the schedule (100)\n"
            "  --wm-bound MS            watermark out-of-orderness bound (default 4000, Nexmark's)\n"
            "  --no-projection          the source produces every field, not only those the query reads\n"
            "  --seed S                 generator seed (default 42)\n"
            "  --max-parallelism N      number of key groups\n");
}

static int64_t parse_count(const char *s, const char *what) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (end == s || errno) goto bad;
    if (*end == 'K' || *end == 'k') v *= 1e3, end++;
    else if (*end == 'M' || *end == 'm') v *= 1e6, end++;
    else if (*end == 'G' || *end == 'g') v *= 1e9, end++;
    if (*end || v < 0 || v > 9e18) goto bad;
    return (int64_t)v;
bad:
    fprintf(stderr, "nexmark: %s: '%s' is not a count (e.g. 500000, 10M)\n", what, s);
    exit(2);
}

int main(int argc, char **argv) {
    const char *query = NULL, *ck_dir = NULL, *backend = "heap";
    int64_t events = 10000000, ck_ms = 0, gen_checksum = -1, wm_bound = 4000, maxp = 0;
    double rate = 0, duration = 10, event_rate = 1e6, time_scale = 100;
    int p = 1;
    bool latency = false, projection = true;
    uint64_t seed = 42;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_ARG                                                             \
    do {                                                                     \
        if (!v) {                                                            \
            fprintf(stderr, "nexmark: %s needs a value\n", a);               \
            return 2;                                                        \
        }                                                                    \
        i++;                                                                 \
    } while (0)
        if (!strcmp(a, "--query")) { NEED_ARG; query = v; }
        else if (!strcmp(a, "--events")) { NEED_ARG; events = parse_count(v, a); }
        else if (!strcmp(a, "-p") || !strcmp(a, "--parallelism")) { NEED_ARG; p = (int)parse_count(v, a); }
        else if (!strcmp(a, "--checkpoint-interval")) { NEED_ARG; ck_ms = parse_count(v, a); }
        else if (!strcmp(a, "--checkpoint-dir")) { NEED_ARG; ck_dir = v; }
        else if (!strcmp(a, "--backend")) { NEED_ARG; backend = v; }
        else if (!strcmp(a, "--rate")) { NEED_ARG; rate = (double)parse_count(v, a); }
        else if (!strcmp(a, "--latency")) latency = true;
        else if (!strcmp(a, "--no-projection")) projection = false;
        else if (!strcmp(a, "--duration")) { NEED_ARG; duration = strtod(v, NULL); }
        else if (!strcmp(a, "--event-rate")) { NEED_ARG; event_rate = (double)parse_count(v, a); }
        else if (!strcmp(a, "--time-scale")) { NEED_ARG; time_scale = strtod(v, NULL); }
        else if (!strcmp(a, "--wm-bound")) { NEED_ARG; wm_bound = parse_count(v, a); }
        else if (!strcmp(a, "--seed")) { NEED_ARG; seed = (uint64_t)parse_count(v, a); }
        else if (!strcmp(a, "--max-parallelism")) { NEED_ARG; maxp = parse_count(v, a); }
        else if (!strcmp(a, "--gen-checksum")) { NEED_ARG; gen_checksum = parse_count(v, a); }
        else if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return 0;
        } else {
            fprintf(stderr, "nexmark: unknown argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }

    sl_nexmark_opts_t gen = sl_nexmark_defaults();
    gen.seed = seed;
    gen.events = events;
    if (event_rate <= 0) {
        fprintf(stderr, "nexmark: --event-rate must be > 0\n");
        return 2;
    }
    gen.inter_event_delay_us = 1e6 / event_rate;

    char err[512];
    if (gen_checksum >= 0) {
        sl_nexmark_gen_t *g;
        if (sl_nexmark_gen_new(&gen, &g, err, sizeof err) < 0) {
            fprintf(stderr, "%s\n", err);
            return 2;
        }
        sl_nexmark_event_t ev;
        uint64_t c = 0;
        int64_t kinds[3] = {0, 0, 0};
        for (int64_t n = 0; n < gen_checksum; n++) {
            sl_nexmark_gen_event(g, n, &ev);
            c = sl_nexmark_fold(c, sl_nexmark_event_hash(&ev));
            kinds[ev.type]++;
        }
        printf("engine=sluice gen_events=%" PRId64 " persons=%" PRId64 " auctions=%" PRId64 " bids=%" PRId64
               " gen_checksum=%016" PRIx64 "\n",
               gen_checksum, kinds[0], kinds[1], kinds[2], c);
        sl_nexmark_gen_free(g);
        return 0;
    }

    const nx_query_t *q = query ? nx_query_find(query) : NULL;
    if (!q) {
        fprintf(stderr, "nexmark: %s\n", query ? "unknown query" : "--query is required");
        usage(stderr);
        return 2;
    }
    if (p < 1) {
        fprintf(stderr, "nexmark: -p must be >= 1\n");
        return 2;
    }
    if (strcmp(backend, "heap") != 0 && strcmp(backend, "rocksdb") != 0) {
        fprintf(stderr, "nexmark: --backend: '%s' is not heap or rocksdb\n", backend);
        return 2;
    }
    if (latency && rate <= 0) {
        fprintf(stderr, "nexmark: --latency needs --rate\n");
        return 2;
    }
    if (rate > 0) {
        gen.rate = rate;
        if (latency) {
            gen.events = (int64_t)(rate * duration);
            gen.inter_event_delay_us = 1e6 / rate * time_scale; /* event time follows the schedule */
            gen.stamp_emit_ns = true;
        }
    }

    nx_query_opts_t qo = nx_query_defaults();
    results_t R;
    memset(&R, 0, sizeof R);
    pthread_mutex_init(&R.mu, NULL);
    R.q = q;
    R.gen = &gen;
    R.latency = latency;
    R.wm_bound_ms = wm_bound;

    /* The schedule starts a little after the job is built, so that every
     * reader starts on time; the source keeps a copy of gen. */
    if (rate > 0) {
        gen.start_ns = mono_ns() + 50 * 1000000LL;
        int64_t warm = (int64_t)(fmin(2.0, duration / 4) * 1e9);
        R.warmup_until_ns = gen.start_ns + warm;
        R.sched_end_ns = gen.start_ns + (int64_t)((double)gen.events / rate * 1e9);
    }

    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, p);
    if (maxp > 0) sl_env_set_max_parallelism(env, (int)maxp);
    if (!strcmp(backend, "rocksdb")) sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);
    if (ck_ms > 0) sl_env_enable_checkpointing(env, ck_ms, SL_CHECKPOINT_EXACTLY_ONCE);
    if (ck_dir) sl_env_set_checkpoint_dir(env, ck_dir);

    if (projection) gen.fields = q->fields;
    sl_stream_t *events_s =
        sl_uid(sl_from_source(env, sl_nexmark_source(gen), sl_wm_bounded("date_time", wm_bound), "nexmark"),
               "nexmark-source");
    sl_stream_t *out = q->build(events_s, &qo);
    if (out) {
        if (nx_row_hasher_init(&R.hasher, sl_stream_schema(out), q->checksum_skip) < 0) {
            fprintf(stderr, "nexmark: %s: too many output fields\n", q->name);
            return 1;
        }
        sl_sink_t sink = {&results_ops, &R};
        sl_uid(sl_sink_to(out, sink, "results"), "results");
    }

    struct rusage ru0, ru1;
    getrusage(RUSAGE_SELF, &ru0);
    int64_t t0 = mono_ns();
    int rc = sl_env_execute(env, "nexmark");
    int64_t t1 = mono_ns();
    getrusage(RUSAGE_SELF, &ru1);
    if (rc < 0) {
        fprintf(stderr, "nexmark %s: %s\n", q->name, sl_env_error(env));
        sl_env_destroy(env);
        return 1;
    }
    double wall = (double)(t1 - t0) / 1e9;
    double cpu = (double)(ru1.ru_utime.tv_sec - ru0.ru_utime.tv_sec) + (double)(ru1.ru_stime.tv_sec - ru0.ru_stime.tv_sec) +
                 (double)(ru1.ru_utime.tv_usec - ru0.ru_utime.tv_usec) / 1e6 +
                 (double)(ru1.ru_stime.tv_usec - ru0.ru_stime.tv_usec) / 1e6;
    double load1 = 0;
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (fscanf(la, "%lf", &load1) != 1) load1 = 0;
        fclose(la);
    }
    printf("engine=sluice query=%s backend=%s checkpoint_ms=%" PRId64 " p=%d events=%" PRId64
           " wall_s=%.3f cpu_s=%.3f eps=%.0f eps_per_core=%.0f max_rss_mb=%.0f out=%" PRId64
           " checksum=%016" PRIx64 " checkpoints=%" PRId64,
           q->name, backend, ck_ms, p, gen.events, wall, cpu, (double)gen.events / wall, cpu > 0 ? (double)gen.events / cpu : 0,
           (double)ru1.ru_maxrss / 1024.0, R.count, R.checksum, sl_env_checkpoints_completed(env));
    if (latency)
        printf(" rate=%.0f latency_samples=%" PRId64 " p50_us=%.1f p99_us=%.1f max_us=%.1f", rate, R.lat.count,
               h_quantile(&R.lat, 0.5) / 1e3, h_quantile(&R.lat, 0.99) / 1e3, (double)R.lat.max / 1e3);
    printf(" load1=%.2f\n", load1);
    sl_env_destroy(env);
    pthread_mutex_destroy(&R.mu);
    return 0;
}
