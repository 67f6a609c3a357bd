/*
 * window_random_job.c — the job of test_cluster_window_random.c, a shared
 * object that `sluice run` submits (sluice/job.h): one random case of
 * window_random_gen.h (the cases of test_window_random.c), drawn from its
 * seed and case number on every process that builds the job, so that the
 * JobManager and every TaskManager build the same plan:
 *
 *   scripted source (parallelism 1; replays the case's reader actions with
 *   a virtual clock it advances; bounded-out-of-orderness watermarks with
 *   the case's idle timeout and auto-watermark interval)
 *     -> key_by(k) -> tumbling / sliding / session window with the case's
 *        allowed lateness, late records to side output "late", count and
 *        sum per (key, window), at parallelism P
 *     -> (k, wstart, wend, cnt, total, ts): the firing and its record
 *        timestamp -> exactly-once file sink OUT_DIR/fired (CSV)
 *     -> side output "late" (k, amount, ts, id, rec_ts) -> exactly-once
 *        file sink OUT_DIR/late (CSV)
 *
 * checkpointed every INTERVAL ms, restarted from the latest checkpoint
 * after a failure (fixed delay).  The source's position and virtual clock
 * are its checkpointed state, so a restored run replays the script from
 * there with processing time where it was: the event-time behaviour
 * (watermarks, idleness, lateness) is that of one failure-free run.  The
 * script is spread evenly over RUN_MS of real time (default 4000): a poll
 * before its batch's time reads nothing, so checkpoints complete and
 * TaskManager kills land in the middle of the run, whatever the number
 * of batches; real time never reaches the event-time logic.
 *
 *   window_random_job.so OUT_DIR CKPT_DIR SEED CASE P INTERVAL_MS [--run-ms=T] [--rocksdb]
 *
 * It writes one line to its process's log when the source starts from the
 * beginning or resumes from a checkpoint (the test counts them).  Compiled
 * without libsluice: the `sluice` process provides it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice/job.h"
#include "window_random_gen.h"

/* the case and the real time its script takes; owned by the source (freed
 * with the environment that built the job) */
typedef struct job_case {
    rcase_t c;
    int64_t run_ns;
} job_case_t;

typedef struct reader {
    job_case_t *jc;
    int pos;
    int64_t t0_ns; /* real time at which the script would have started (0: not yet) */
    bool said;
} reader_t;

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* real time at which the first pos actions are done: the script spread
 * evenly over run_ns */
static int64_t due_ns(const reader_t *r, int pos) {
    return r->t0_ns + (int64_t)((double)r->jc->run_ns * pos / (r->jc->c.nact > 0 ? r->jc->c.nact : 1));
}

static int src_create(void *ctx, int subtask, int p, void **out, int *nsplits, char *err, size_t el) {
    job_case_t *jc = ctx;
    if (p != 1) {
        snprintf(err, el, "window_random_job: the scripted source must run at parallelism 1 (got %d)", p);
        return SL_EINVAL;
    }
    reader_t *r = calloc(1, sizeof *r);
    r->jc = jc;
    atomic_store(&jc->c.clock, jc->c.p.clock0); /* from the start, unless restore sets it */
    *out = r;
    *nsplits = jc->c.p.nsplits;
    (void)subtask;
    return 0;
}

/* One batch of the script (up to its poll end), once its time has come.
 * Before that, a poll reads nothing and returns (no record, no clock
 * change: the event-time behaviour does not see real time), so that
 * checkpoints go on in between. */
static int src_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    reader_t *r = reader;
    rcase_t *c = &r->jc->c;
    int64_t now = mono_ns();
    if (!r->t0_ns) r->t0_ns = now;
    if (!r->said && r->pos == 0) {
        fprintf(stderr, "window_random_job: case %d: the source starts from the beginning\n", c->idx);
        r->said = true;
    }
    int64_t due = due_ns(r, r->pos + 1); /* the batch's first action done by then: the last at run_ns */
    if (now < due) {
        int64_t wait = due - now < 5000000 ? due - now : 5000000;
        struct timespec ts = {0, (long)wait};
        nanosleep(&ts, NULL);
        return SL_SRC_MORE;
    }
    return case_emit_poll(c, &r->pos, out, max, "window_random_job: ", err, el);
}

/* the script's position and the virtual clock */
static int src_snapshot(void *reader, int64_t id, void (*put)(void *, const void *, size_t), void *pc) {
    reader_t *r = reader;
    int64_t e[2] = {r->pos, atomic_load(&r->jc->c.clock)};
    put(pc, e, sizeof e);
    (void)id;
    return 0;
}

static int src_restore(void *reader, const void *state, size_t len, char *err, size_t el) {
    reader_t *r = reader;
    int64_t e[2];
    if (len != 4 + sizeof e) { /* one subtask's blob: u32 length, position, clock */
        snprintf(err, el, "window_random_job: script state of %zu bytes, expected %zu", len, 4 + sizeof e);
        return SL_EFORMAT;
    }
    memcpy(e, (const uint8_t *)state + 4, sizeof e);
    if (e[0] < 0 || e[0] > r->jc->c.nact) {
        snprintf(err, el, "window_random_job: script position %lld out of range (%d actions)", (long long)e[0],
                 r->jc->c.nact);
        return SL_EFORMAT;
    }
    r->pos = (int)e[0];
    r->said = true;
    atomic_store(&r->jc->c.clock, e[1]);
    r->t0_ns = mono_ns(); /* the rest of the script at the same pace */
    r->t0_ns -= due_ns(r, r->pos) - r->t0_ns;
    fprintf(stderr, "window_random_job: case %d: the source resumes from a checkpoint at action %d of %d (clock %lld)\n",
            r->jc->c.idx, r->pos, r->jc->c.nact, (long long)e[1]);
    return 0;
}

static void src_destroy_reader(void *reader) { free(reader); }

static void src_destroy(void *ctx) {
    job_case_t *jc = ctx;
    case_free(&jc->c);
    free(jc);
}

static const sl_source_ops_t script_ops = {.name = "script",
                                           .create_reader = src_create,
                                           .poll = src_poll,
                                           .destroy_reader = src_destroy_reader,
                                           .destroy = src_destroy,
                                           .snapshot = src_snapshot,
                                           .restore = src_restore};

static int64_t virtual_clock(void *ctx) { return atomic_load(&((job_case_t *)ctx)->c.clock); }

/* a firing with its record timestamp */
static int with_ts5(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    for (int i = 0; i < 5; i++) sl_rw_set_i64(out, i, sl_row_i64(&in->row, i));
    sl_rw_set_i64(out, 5, in->ts);
    (void)ctx;
    return 0;
}

/* a late record with its record timestamp */
static int with_ts4(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    for (int i = 0; i < 4; i++) sl_rw_set_i64(out, i, sl_row_i64(&in->row, i));
    sl_rw_set_i64(out, 4, in->ts);
    (void)ctx;
    return 0;
}

static int build(sl_env_t *env, int argc, char **argv) {
    if (argc < 7) {
        fprintf(stderr, "usage: window_random_job OUT_DIR CKPT_DIR SEED CASE P INTERVAL_MS [--run-ms=T] [--rocksdb]\n");
        return SL_EINVAL;
    }
    const char *out = argv[1], *ckpt = argv[2];
    uint64_t seed = strtoull(argv[3], NULL, 0);
    int idx = atoi(argv[4]), P = atoi(argv[5]);
    long long interval = atoll(argv[6]), run_ms = 4000;
    bool rocksdb = false;
    for (int i = 7; i < argc; i++) {
        if (!strncmp(argv[i], "--run-ms=", 9)) run_ms = atoll(argv[i] + 9);
        else if (!strcmp(argv[i], "--rocksdb")) rocksdb = true;
        else {
            fprintf(stderr, "window_random_job: unknown option '%s'\n", argv[i]);
            return SL_EINVAL;
        }
    }
    if (P < 1 || interval < 1 || run_ms < 0) {
        fprintf(stderr, "window_random_job: parallelism %d and checkpoint interval %lld must be positive\n", P,
                interval);
        return SL_EINVAL;
    }
    job_case_t *jc = calloc(1, sizeof *jc);
    case_generate(&jc->c, idx, seed);
    jc->run_ns = (int64_t)run_ms * 1000000;

    char name[64];
    snprintf(name, sizeof name, "window-random-%d", idx);
    sl_env_set_job_name(env, name);
    sl_env_set_parallelism(env, P);
    sl_env_set_auto_watermark_interval(env, jc->c.p.interval);
    sl_env_set_clock(env, virtual_clock, jc);
    sl_env_enable_checkpointing(env, interval, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, ckpt);
    sl_env_set_restart_fixed_delay(env, 20, 200);
    if (rocksdb) sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);

    sl_watermark_strategy_t ws = sl_wm_bounded("ts", jc->c.p.bound);
    ws.idle_timeout_ms = jc->c.p.idle_timeout;
    sl_source_t src = {&script_ops, jc, in_schema()}; /* the source owns jc from here */
    sl_stream_t *s = sl_uid(sl_parallelism(sl_from_source(env, src, ws, "script"), 1), "script");
    const wr_params_t *p = &jc->c.p;
    sl_window_assigner_t *as = p->kind == WR_TUMBLING  ? sl_tumbling_event_time(p->size, p->offset)
                               : p->kind == WR_SLIDING ? sl_sliding_event_time(p->size, p->slide, p->offset)
                                                       : sl_session_event_time(p->gap);
    sl_windowed_t *w = sl_window(sl_key_by(s, "k"), as);
    if (p->lateness > 0) w = sl_window_allowed_lateness(w, p->lateness);
    w = sl_window_late_output(w, "late");
    sl_aggregate_fn_t agg = {sizeof(acc_t), agg_init, agg_add, agg_merge, agg_result, NULL};
    sl_stream_t *o = sl_window_aggregate(w, agg, out_schema());
    if (!o) return SL_EINVAL; /* the environment says why */
    sl_parallelism(sl_uid(sl_name(o, "window"), "window"), P);
    sl_stream_t *lo = sl_side_output(o, "late");
    char dir[2048];
    sl_stream_t *f = sl_map(o, with_ts5, NULL,
                            sl_schema_parse("k BIGINT NOT NULL, wstart BIGINT NOT NULL, wend BIGINT NOT NULL, cnt "
                                            "BIGINT NOT NULL, total BIGINT NOT NULL, ts BIGINT NOT NULL",
                                            NULL, 0));
    sl_uid(sl_parallelism(f, P), "fired-ts");
    snprintf(dir, sizeof dir, "%s/fired", out);
    sl_uid(sl_parallelism(sl_sink_to(f, sl_exactly_once_file_sink(dir, SL_FMT_CSV), "fired"), P), "fired");
    if (!lo) return SL_EINVAL;
    sl_stream_t *l = sl_map(lo, with_ts4, NULL,
                            sl_schema_parse("k BIGINT NOT NULL, amount BIGINT NOT NULL, ts BIGINT NOT NULL, id BIGINT "
                                            "NOT NULL, rec_ts BIGINT NOT NULL",
                                            NULL, 0));
    sl_uid(sl_parallelism(l, P), "late-ts");
    snprintf(dir, sizeof dir, "%s/late", out);
    sl_uid(sl_parallelism(sl_sink_to(l, sl_exactly_once_file_sink(dir, SL_FMT_CSV), "late"), P), "late");
    return 0;
}

SL_JOB_MAIN(build)
