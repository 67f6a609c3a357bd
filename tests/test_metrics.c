/*
 * test_metrics.c — live metrics (sluice/metrics.h, issue 11) in embedded
 * mode, against a reference computed here from the same input.
 *
 *   counts_watermarks_late: a random input of N (key, ts) rows runs
 *     source -> map -> key_by -> tumbling event-time window (count) -> sink,
 *     the window at parallelism 2, watermarks after every record (bounded
 *     out-of-orderness B).  The reference replays the source: the watermark
 *     it emits after each record (max ts so far - B - 1), which records are
 *     late (their window's end - 1 <= the watermark before them), how many
 *     (key, window) pairs fire.  Checked: every report's counts never
 *     decrease and never exceed N; halfway the source stops until the
 *     listener saw exactly N/2 records out of the source, in and out of the
 *     map and into the windows, and the source's output watermark and the
 *     window subtasks' input watermark equal the reference's; at the end
 *     numRecordsIn/Out of every operator, the window's output count and
 *     numLateRecordsDropped equal the reference.  Heap and RocksDB state.
 *   backpressure: a fast source into a slow sink (separate tasks, small
 *     buffers): the source's backPressuredTimeMsPerSecond and the sink's
 *     busyTimeMsPerSecond go over 300 and the three shares sum to ~1000.
 *   restart_counts_again: a map fails once at a random record; after the
 *     restart (attempt 1, no checkpoints: everything is replayed) the
 *     reports are of attempt 1 only and end at exactly N everywhere.
 *   prometheus_text: label values with quotes, backslashes, newlines and
 *     other bytes, written by sl_prom_sample, read back by a parser of the
 *     exposition format written here: the same values, one line a sample.
 *   decode fuzzing of METRICS is in test_protocol.c; the REST paths and a
 *     real Prometheus server in test_metrics_cluster.c.
 */
#include <stdatomic.h>
#include <time.h>

#include "pipeline_util.h"
#include "metrics/prom.h"
#include "sluice/metrics.h"
#include "test.h"

static uint64_t rng_next(uint64_t *s) {
    uint64_t x = (*s += 0x9e3779b97f4a7c15ULL);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
    return x ^ (x >> 31);
}

/* ---- the input and its reference ---------------------------------------- */

#define MAXN 6000
#define W 50 /* window size, ms */

typedef struct input {
    int n;
    int64_t key[MAXN], ts[MAXN];
    int64_t bound;                 /* B */
    /* reference */
    int64_t wm_after[MAXN];        /* the source's watermark after record i */
    int64_t late;                  /* records the window drops */
    int64_t fired;                 /* (key, window) pairs with a non-late record */
} input_t;

static void make_input(input_t *in, uint64_t seed) {
    uint64_t s = seed;
    in->n = 1000 + (int)(rng_next(&s) % 3000);
    in->n &= ~1; /* even: the pause is at n / 2 */
    in->bound = (int64_t)(rng_next(&s) % 30);
    int keys = 1 + (int)(rng_next(&s) % 7);
    int64_t t = 1000;
    for (int i = 0; i < in->n; i++) {
        t += (int64_t)(rng_next(&s) % 4);
        in->key[i] = (int64_t)(rng_next(&s) % (uint64_t)keys);
        uint64_t r = rng_next(&s) % 100;
        if (r < 8)
            in->ts[i] = t - (int64_t)(rng_next(&s) % 200); /* far behind: often late */
        else if (r < 30)
            in->ts[i] = t - (int64_t)(rng_next(&s) % (uint64_t)(in->bound + 1)); /* within the bound */
        else
            in->ts[i] = t;
        if (in->ts[i] < 0) in->ts[i] = 0;
    }
    /* reference: brute force over the prefix, quadratic on purpose */
    in->late = 0;
    in->fired = 0;
    for (int i = 0; i < in->n; i++) {
        int64_t mx = INT64_MIN;
        for (int j = 0; j <= i; j++)
            if (in->ts[j] > mx) mx = in->ts[j];
        in->wm_after[i] = mx - in->bound - 1;
    }
    static bool late[MAXN];
    for (int i = 0; i < in->n; i++) {
        int64_t wm_before = i ? in->wm_after[i - 1] : INT64_MIN;
        int64_t end = in->ts[i] - in->ts[i] % W + W;
        late[i] = end - 1 <= wm_before;
        in->late += late[i];
    }
    for (int i = 0; i < in->n; i++) {
        if (late[i]) continue;
        bool seen = false;
        for (int j = 0; j < i && !seen; j++)
            seen = !late[j] && in->key[j] == in->key[i] && in->ts[j] / W == in->ts[i] / W;
        in->fired += !seen;
    }
}

/* ---- what the listener saw ------------------------------------------------ */

enum { OP_SRC, OP_MAP, OP_WIN, OP_SINK, NOPS };
static const char *const op_names[NOPS] = {"numbers", "ident", "win", "out"};
#define MAXSUB 4

typedef struct seen {
    pthread_mutex_t mu;
    int64_t n;                                  /* N */
    sl_operator_metrics_t last[NOPS][MAXSUB];   /* latest per operator and subtask */
    bool have[NOPS][MAXSUB];
    int bad;                                    /* monotonicity or bound violations */
    char why[256];
    int reports;
    /* the pause: the source waits for this */
    int64_t pause_at;
    int64_t expect_wm;                          /* the source's watermark after pause_at records */
    int win_par;
    atomic_bool pause_ok;
    /* backpressure test */
    double max_src_bp, max_sink_busy, max_share_err;
    bool shares_seen;
    int attempt;                                /* the newest attempt reported */
} seen_t;

static int op_index(const char *name) {
    for (int i = 0; i < NOPS; i++)
        if (!strcmp(name, op_names[i])) return i;
    return -1;
}

static void bad(seen_t *s, const char *fmt, const char *name, long long a, long long b) {
    if (!s->bad) snprintf(s->why, sizeof s->why, fmt, name, a, b);
    s->bad++;
}

static void listener(void *ctx, const sl_operator_metrics_t *ops, int n) {
    seen_t *s = ctx;
    pthread_mutex_lock(&s->mu);
    s->reports++;
    for (int i = 0; i < n; i++) {
        const sl_operator_metrics_t *m = &ops[i];
        if (m->attempt < s->attempt) {
            bad(s, "%s: a report of attempt %lld after one of attempt %lld", m->operator_name, m->attempt, s->attempt);
            continue;
        }
        if (m->attempt > s->attempt) { /* a restart: every subtask counts from 0 again */
            s->attempt = m->attempt;
            memset(s->have, 0, sizeof s->have);
        }
        int k = op_index(m->operator_name);
        if (k < 0 || m->subtask_index < 0 || m->subtask_index >= MAXSUB) continue;
        sl_operator_metrics_t *prev = &s->last[k][m->subtask_index];
        if (s->have[k][m->subtask_index]) {
            if (m->num_records_in < prev->num_records_in)
                bad(s, "%s: numRecordsIn went back from %lld to %lld", m->operator_name, prev->num_records_in,
                    m->num_records_in);
            if (m->num_records_out < prev->num_records_out)
                bad(s, "%s: numRecordsOut went back from %lld to %lld", m->operator_name, prev->num_records_out,
                    m->num_records_out);
            if (m->current_input_watermark < prev->current_input_watermark)
                bad(s, "%s: currentInputWatermark went back from %lld to %lld", m->operator_name,
                    prev->current_input_watermark, m->current_input_watermark);
        }
        if (m->num_records_in > s->n || (k != OP_WIN && m->num_records_out > s->n))
            bad(s, "%s: a count over N (in %lld, out %lld)", m->operator_name, m->num_records_in, m->num_records_out);
        if (m->busy_time_ms_per_second >= 0) {
            double sum = m->busy_time_ms_per_second + m->back_pressured_time_ms_per_second + m->idle_time_ms_per_second;
            double err = sum > 1000 ? sum - 1000 : 1000 - sum;
            if (err > s->max_share_err) s->max_share_err = err;
            s->shares_seen = true;
            if (k == OP_SRC && m->back_pressured_time_ms_per_second > s->max_src_bp)
                s->max_src_bp = m->back_pressured_time_ms_per_second;
            if (k == OP_SINK && m->busy_time_ms_per_second > s->max_sink_busy)
                s->max_sink_busy = m->busy_time_ms_per_second;
        }
        *prev = *m;
        prev->operator_name = prev->operator_uid = prev->task_name = NULL; /* valid during the call only */
        s->have[k][m->subtask_index] = true;
    }
    /* the pause: everything before it counted, its watermark everywhere */
    if (s->pause_at > 0 && !atomic_load(&s->pause_ok)) {
        bool ok = s->have[OP_SRC][0] && s->have[OP_MAP][0];
        ok = ok && s->last[OP_SRC][0].num_records_out == s->pause_at;
        ok = ok && s->last[OP_SRC][0].current_output_watermark == s->expect_wm;
        ok = ok && s->last[OP_MAP][0].num_records_in == s->pause_at && s->last[OP_MAP][0].num_records_out == s->pause_at;
        int64_t win_in = 0;
        for (int j = 0; j < s->win_par; j++) {
            ok = ok && s->have[OP_WIN][j] && s->last[OP_WIN][j].current_input_watermark == s->expect_wm;
            win_in += s->last[OP_WIN][j].num_records_in;
        }
        ok = ok && win_in == s->pause_at;
        if (ok) atomic_store(&s->pause_ok, true);
    }
    pthread_mutex_unlock(&s->mu);
}

/* ---- the source: the input's rows, one split, with the pause ------------- */

typedef struct src {
    const input_t *in;
    seen_t *seen;
    int pos;
    int64_t pause_deadline_ns;
    bool paused_done;
    bool pause_timed_out;
    sl_schema_t *schema;
} src_t;

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int src_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    src_t *s = ctx;
    s->pos = 0;
    *reader = s;
    *nsplits = 1;
    return 0;
}

static int src_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    src_t *s = reader;
    if (s->pos >= s->in->n) {
        sl_src_split_finished(out, 0);
        return SL_SRC_END;
    }
    if (s->seen->pause_at > 0 && s->pos == s->seen->pause_at && !s->paused_done) {
        if (!s->pause_deadline_ns) s->pause_deadline_ns = mono_ns() + 20 * 1000000000LL;
        if (!atomic_load(&s->seen->pause_ok) && mono_ns() < s->pause_deadline_ns) return SL_SRC_IDLE;
        s->pause_timed_out = !atomic_load(&s->seen->pause_ok);
        s->paused_done = true;
    }
    for (int k = 0; k < max && s->pos < s->in->n; k++) {
        if (s->seen->pause_at > 0 && s->pos == s->seen->pause_at && !s->paused_done) break;
        sl_row_writer_t *w = sl_src_row(out);
        sl_rw_set_i64(w, 0, s->in->key[s->pos]);
        sl_rw_set_i64(w, 1, s->in->ts[s->pos]);
        sl_src_emit(out, 0, SL_NO_TIMESTAMP);
        s->pos++;
    }
    return SL_SRC_MORE;
}

static void src_destroy_reader(void *reader) { (void)reader; }

static const sl_source_ops_t src_ops = {
    .name = "scripted", .create_reader = src_create, .poll = src_poll, .destroy_reader = src_destroy_reader};

static int ident(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    sl_rw_set_i64(out, 0, sl_row_i64(&in->row, 0));
    sl_rw_set_i64(out, 1, sl_row_i64(&in->row, 1));
    return 0;
}

static void run_counts(uint64_t seed, int backend) {
    static input_t in;
    make_input(&in, seed);
    seen_t *seen = calloc(1, sizeof *seen);
    pthread_mutex_init(&seen->mu, NULL);
    seen->n = in.n;
    seen->pause_at = in.n / 2;
    seen->expect_wm = in.wm_after[in.n / 2 - 1];
    seen->win_par = 2;
    src_t src = {.in = &in, .seen = seen};
    src.schema = sl_schema_parse("k BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0);

    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 1);
    sl_env_set_auto_watermark_interval(env, 0);
    sl_env_set_state_backend(env, backend);
    sl_env_set_metrics_listener(env, listener, seen);
    sl_source_t so = {&src_ops, &src, src.schema};
    sl_stream_t *s = sl_from_source(env, so, sl_wm_bounded("ts", in.bound), "numbers");
    s = sl_name(sl_map(s, ident, NULL, sl_schema_parse("k BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0)), "ident");
    sl_windowed_t *w = sl_window(sl_key_by(s, "k"), sl_tumbling_event_time(W, 0));
    s = sl_parallelism(sl_name(sl_window_agg(w, "count(*) AS n"), "win"), 2);
    collected_t *c = collected_new();
    sl_sink_to(s, collect_sink(c), "out");
    int rc = sl_env_execute(env, "metrics");
    if (rc) fprintf(stderr, "seed %llu: %s\n", (unsigned long long)seed, sl_env_error(env));
    CHECK_EQ(rc, 0);

    fprintf(stderr, "  seed %llu backend %d: n=%d B=%lld late=%lld fired=%lld reports=%d\n",
            (unsigned long long)seed, backend, in.n, (long long)in.bound, (long long)in.late, (long long)in.fired,
            seen->reports);
    if (seen->bad) fprintf(stderr, "  %s\n", seen->why);
    CHECK_EQ(seen->bad, 0);
    CHECK(!src.pause_timed_out); /* the halfway figures and watermarks were reported exactly */
    CHECK_EQ(c->n, in.fired);
    /* the final figures */
    CHECK(seen->have[OP_SRC][0] && seen->have[OP_MAP][0] && seen->have[OP_SINK][0]);
    CHECK_EQ(seen->last[OP_SRC][0].num_records_out, in.n);
    CHECK_EQ(seen->last[OP_MAP][0].num_records_in, in.n);
    CHECK_EQ(seen->last[OP_MAP][0].num_records_out, in.n);
    int64_t win_in = 0, win_out = 0, late = 0;
    for (int j = 0; j < 2; j++) {
        CHECK(seen->have[OP_WIN][j]);
        win_in += seen->last[OP_WIN][j].num_records_in;
        win_out += seen->last[OP_WIN][j].num_records_out;
        late += seen->last[OP_WIN][j].num_late_records_dropped;
        CHECK_EQ(seen->last[OP_WIN][j].current_input_watermark, SL_MAX_WATERMARK);
    }
    CHECK_EQ(win_in, in.n);
    CHECK_EQ(win_out, in.fired);
    CHECK_EQ(late, in.late);
    CHECK_EQ(seen->last[OP_SINK][0].num_records_in, in.fired);
    CHECK_EQ(seen->last[OP_SRC][0].current_output_watermark, SL_MAX_WATERMARK);
    CHECK_EQ(seen->last[OP_SINK][0].num_late_records_dropped, 0);
    /* numBytesIn/Out: what a task handed to its channels is what the tasks
     * behind it read (no checkpoint, nothing in flight at the end), and at
     * least every record's frame (13 bytes of header and a 24-byte row) */
    int64_t win_bin = 0, win_bout = 0;
    for (int j = 0; j < 2; j++) {
        win_bin += seen->last[OP_WIN][j].num_bytes_in;
        win_bout += seen->last[OP_WIN][j].num_bytes_out;
    }
    CHECK_EQ(seen->last[OP_SRC][0].num_bytes_in, 0);
    CHECK_EQ(seen->last[OP_SRC][0].num_bytes_out, seen->last[OP_MAP][0].num_bytes_out); /* one task */
    CHECK(seen->last[OP_SRC][0].num_bytes_out >= (int64_t)in.n * 37);
    CHECK_EQ(win_bin, seen->last[OP_SRC][0].num_bytes_out);
    CHECK_EQ(seen->last[OP_SINK][0].num_bytes_in, win_bout);
    CHECK_EQ(seen->last[OP_SINK][0].num_bytes_out, 0);

    sl_env_destroy(env);
    collected_free(c);
    pthread_mutex_destroy(&seen->mu);
    free(seen);
}

TEST(counts_watermarks_late) {
    uint64_t base = (uint64_t)time(NULL);
    const char *e = getenv("SL_TEST_SEED");
    if (e) base = strtoull(e, NULL, 10);
    for (int r = 0; r < 4; r++) run_counts(base + (uint64_t)r, SL_STATE_BACKEND_HASHMAP);
    run_counts(base + 100, SL_STATE_BACKEND_ROCKSDB);
}

TEST(backpressure) {
    seen_t *seen = calloc(1, sizeof *seen);
    pthread_mutex_init(&seen->mu, NULL);
    seen->n = 1500;
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 1);
    sl_env_disable_chaining(env);
    sl_env_set_buffer_size(env, 256);
    sl_env_set_buffers_per_channel(env, 2);
    sl_env_set_metrics_listener(env, listener, seen);
    sl_stream_t *s = sl_from_source(env, counter_source(seen->n, 1), sl_wm_none(), "numbers");
    collected_t *c = collected_new();
    c->delay_us = 1000; /* ~1.5 s in all */
    sl_sink_to(s, collect_sink(c), "out");
    int rc = sl_env_execute(env, "backpressure");
    if (rc) fprintf(stderr, "%s\n", sl_env_error(env));
    CHECK_EQ(rc, 0);
    fprintf(stderr, "  max source backPressured %.0f, max sink busy %.0f, worst sum error %.1f\n", seen->max_src_bp,
            seen->max_sink_busy, seen->max_share_err);
    CHECK_EQ(seen->bad, 0);
    CHECK_EQ(c->n, seen->n);
    CHECK(seen->shares_seen);
    CHECK(seen->max_src_bp > 300);
    CHECK(seen->max_sink_busy > 300);
    CHECK(seen->max_share_err < 2); /* busy is the rest of the interval: the shares sum to 1000 */
    CHECK_EQ(seen->last[OP_SINK][0].num_records_in, seen->n);
    sl_env_destroy(env);
    collected_free(c);
    pthread_mutex_destroy(&seen->mu);
    free(seen);
}

static void prom_render_none(void *ctx, sl_buf_t *out) { (void)ctx; (void)out; }

/* Reads one label value at *p (after the opening quote) per the
 * exposition format; NULL on a malformed one. */
static const char *read_label(const char *p, char *out, size_t cap) {
    size_t n = 0;
    for (;;) {
        char c = *p++;
        if (c == 0 || c == '\n') return NULL; /* a raw newline inside a value breaks the format */
        if (c == '"') break;
        if (c == '\\') {
            char e = *p++;
            c = e == 'n' ? '\n' : e == '\\' ? '\\' : e == '"' ? '"' : 0;
            if (!c) return NULL;
        }
        if (n + 1 < cap) out[n++] = c;
    }
    out[n] = 0;
    return p;
}

TEST(prometheus_text) {
    static const char alphabet[] = "a\"\\\n,={} xZ\t#";
    uint64_t s = 77;
    for (int it = 0; it < 2000; it++) {
        char v1[40], v2[40];
        int n1 = (int)(rng_next(&s) % 30), n2 = (int)(rng_next(&s) % 30);
        for (int i = 0; i < n1; i++) v1[i] = alphabet[rng_next(&s) % (sizeof alphabet - 1)];
        for (int i = 0; i < n2; i++) v2[i] = alphabet[rng_next(&s) % (sizeof alphabet - 1)];
        v1[n1] = v2[n2] = 0;
        double value = (double)(int64_t)(rng_next(&s) % 2000000) - 1000000;
        const char *labels[4] = {"operator_name", v1, "task_name", v2};
        sl_buf_t b = {0};
        sl_prom_sample(&b, "flink_x", labels, 2, value);
        sl_buf_append(&b, "", 1);
        const char *p = (const char *)b.p;
        CHECK(!strncmp(p, "flink_x{operator_name=\"", 23));
        char got1[64], got2[64];
        p = read_label(p + 23, got1, sizeof got1);
        CHECK(p);
        CHECK_STR(got1, v1);
        CHECK(!strncmp(p, ",task_name=\"", 12));
        p = read_label(p + 12, got2, sizeof got2);
        CHECK(p);
        CHECK_STR(got2, v2);
        CHECK(*p == '}' && p[1] == ' ');
        char *end;
        double back = strtod(p + 2, &end);
        CHECK(back == value);
        CHECK(end[0] == '\n' && end[1] == 0); /* exactly one line */
        sl_buf_free(&b);
    }
    int lo, hi;
    char err[256];
    CHECK_EQ(sl_prom_parse_ports("9249", &lo, &hi, err, sizeof err), 0);
    CHECK(lo == 9249 && hi == 9249);
    CHECK_EQ(sl_prom_parse_ports("9249-9260", &lo, &hi, err, sizeof err), 0);
    CHECK(lo == 9249 && hi == 9260);
    CHECK_EQ(sl_prom_parse_ports("9260-9249", &lo, &hi, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "metrics.reporter.prom.port '9260-9249'");
    CHECK_EQ(sl_prom_parse_ports("x", &lo, &hi, err, sizeof err), SL_EINVAL);
    CHECK_EQ(sl_prom_parse_ports("0", &lo, &hi, err, sizeof err), SL_EINVAL);
    CHECK_EQ(sl_prom_parse_ports("9249-", &lo, &hi, err, sizeof err), SL_EINVAL);

    /* a range: the second server on it takes the next free port */
    sl_prom_server_t *a = NULL, *b2 = NULL;
    char spec[32];
    int base = 20000 + (int)(mono_ns() / 1000 % 20000);
    snprintf(spec, sizeof spec, "%d-%d", base, base + 20);
    CHECK_EQ(sl_prom_server_new("127.0.0.1", spec, prom_render_none, NULL, &a, err, sizeof err), 0);
    CHECK_EQ(sl_prom_server_new("127.0.0.1", spec, prom_render_none, NULL, &b2, err, sizeof err), 0);
    CHECK(sl_prom_server_port(a) >= base && sl_prom_server_port(b2) > sl_prom_server_port(a));
    CHECK(sl_prom_server_port(b2) <= base + 20);
    snprintf(spec, sizeof spec, "%d", sl_prom_server_port(a));
    sl_prom_server_t *c3 = NULL;
    CHECK_EQ(sl_prom_server_new("127.0.0.1", spec, prom_render_none, NULL, &c3, err, sizeof err), SL_EIO);
    CHECK_CONTAINS(err, "no free port");
    sl_prom_server_destroy(a);
    sl_prom_server_destroy(b2);
}

/* ---- a restart: the new attempt's subtasks count from 0 again ---------- */

static atomic_int fail_countdown;

static int fail_once(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    if (atomic_fetch_sub(&fail_countdown, 1) == 1) return SL_EIO; /* the K-th record of the first attempt */
    sl_rw_set_i64(out, 0, sl_row_i64(&in->row, 0));
    sl_rw_set_i64(out, 1, sl_row_i64(&in->row, 1));
    return 0;
}

TEST(restart_counts_again) {
    uint64_t r = (uint64_t)time(NULL);
    seen_t *seen = calloc(1, sizeof *seen);
    pthread_mutex_init(&seen->mu, NULL);
    seen->n = 2000 + (int64_t)(rng_next(&r) % 3000);
    atomic_store(&fail_countdown, 1 + (int)(rng_next(&r) % (uint64_t)seen->n));
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 1);
    sl_env_set_restart_fixed_delay(env, 1, 50);
    sl_env_set_metrics_listener(env, listener, seen);
    sl_stream_t *s = sl_from_source(env, counter_source(seen->n, 1), sl_wm_none(), "numbers");
    s = sl_name(sl_map(s, fail_once, NULL, sl_schema_parse("id BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0)),
                "ident");
    collected_t *c = collected_new();
    sl_sink_to(s, collect_sink(c), "out");
    int rc = sl_env_execute(env, "restart");
    if (rc) fprintf(stderr, "%s\n", sl_env_error(env));
    CHECK_EQ(rc, 0);
    if (seen->bad) fprintf(stderr, "  %s\n", seen->why);
    CHECK_EQ(seen->bad, 0);
    CHECK_EQ(seen->attempt, 1);
    /* without checkpoints the second attempt replays everything */
    CHECK_EQ(seen->last[OP_SRC][0].num_records_out, seen->n);
    CHECK_EQ(seen->last[OP_MAP][0].num_records_in, seen->n);
    CHECK_EQ(seen->last[OP_MAP][0].num_records_out, seen->n);
    CHECK_EQ(seen->last[OP_SINK][0].num_records_in, seen->n);
    sl_env_destroy(env);
    collected_free(c);
    pthread_mutex_destroy(&seen->mu);
    free(seen);
}

int main(void) {
    RUN(prometheus_text);
    RUN(restart_counts_again);
    RUN(counts_watermarks_late);
    RUN(backpressure);
    TEST_MAIN_END();
}
