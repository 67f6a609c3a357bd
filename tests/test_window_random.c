/*
 * test_window_random.c — randomized end-to-end check of event-time windows.
 *
 * Each case builds a real job:
 *
 *   scripted source (parallelism 1, 1..4 splits, a virtual clock the reader
 *   advances, watermark strategy bounded(B) with an idle timeout)
 *     -> key_by(k) -> window (tumbling / sliding / session, allowed lateness
 *        0 or > 0, late records to side output "late") at parallelism P
 *     -> aggregate count and sum per (key, window) -> collecting sink
 *     -> side output "late" -> collecting sink
 *
 * and compares every window firing and every late record, as multisets,
 * with the brute-force model in window_reference.h fed the very same reader
 * actions (the cases are drawn in window_random_gen.h, compared in
 * window_random_check.h; test_cluster_window_random.c runs them on a
 * cluster).  Each window subtask gets its records and watermarks through one
 * channel in source order, and the source reads only the virtual clock, so
 * the result is deterministic.
 *
 * The input: per split, events out of order within B, a share behind the
 * bound (a little, often within the allowed lateness, or far), jumps in
 * event time (session gaps), pauses while the other splits go on (idleness;
 * a turn in which every split pauses advances the clock by 1 ms), empty
 * splits and splits that end early; sometimes negative timestamps, negative
 * offsets, sliding sizes that are not a multiple of the slide (or smaller
 * than it: events in no window).  Then some events are moved onto the edges
 * of the rules with the watermark they will meet (see aim_at_edges).
 * Watermarks: auto-watermark-interval 0 (after every record) in 3 of 4
 * cases, else periodic in virtual ms (checked when a poll returns), which
 * also reaches "every split idle".
 *
 * Extra checks on the engine output: every firing carries the timestamp
 * end - 1 (Flink's window.maxTimestamp()); firings of one (key, window)
 * come out with strictly growing counts; late records are the input rows
 * with their timestamps; for tumbling and sliding windows the final firings
 * plus the late records account for every (event, window) pair; the window
 * operator counted every record in; every sink subtask finished.  The model
 * checks itself: every event is late, or counted in the final firing of
 * every window it went into.
 *
 * Environment:
 *   SLUICE_SOAK_SEEDS=n   run n cases instead of 40 (soak runs)
 *   SLUICE_RAND_SEED=s    base seed (default 0x5eed)
 *   SLUICE_RAND_CASE=i    run only case i (reproduce a failure)
 *   SLUICE_RAND_VERBOSE=1 one line per case
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <time.h>

#include "pipeline_util.h"
#include "test.h"
#include "window_random_check.h"

/* ---- the scripted source: replays c->act ---- */

typedef struct script_reader {
    rcase_t *c;
    int pos;
} script_reader_t;

static int script_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    rcase_t *c = ctx;
    if (p != 1) {
        snprintf(err, el, "the scripted source must run at parallelism 1 (got %d)", p);
        return SL_EINVAL;
    }
    script_reader_t *r = calloc(1, sizeof *r);
    r->c = c;
    atomic_store(&c->clock, c->p.clock0); /* a restart from the start starts the clock over (a restore sets it) */
    *reader = r;
    *nsplits = c->p.nsplits;
    return 0;
}

static int script_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    script_reader_t *r = reader;
    rcase_t *c = r->c;
    if (c->restore) { /* slow enough in real time for checkpoints to happen in between */
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    if (c->rescale && r->pos == c->fail_batch && !atomic_load(&c->failed)) {
        pthread_mutex_lock(&c->committed->mu);
        bool any = c->committed->commits > 0;
        pthread_mutex_unlock(&c->committed->mu);
        if (!any) return SL_SRC_MORE; /* nothing read: no watermark, no clock change */
    }
    return case_emit_poll(c, &r->pos, out, max, "", err, el);
}

/* The script's position and the virtual clock: a restored run replays the
 * script from there, with processing time where it was. */
static int script_snapshot(void *reader, int64_t id, void (*put)(void *, const void *, size_t), void *pc) {
    script_reader_t *r = reader;
    int64_t e[2] = {r->pos, atomic_load(&r->c->clock)};
    put(pc, e, sizeof e);
    return 0;
}

static int script_restore(void *reader, const void *state, size_t len, char *err, size_t el) {
    script_reader_t *r = reader;
    int64_t e[2];
    if (len != 4 + sizeof e) {
        snprintf(err, el, "script state of %zu bytes", len);
        return SL_EFORMAT;
    }
    memcpy(e, (const uint8_t *)state + 4, sizeof e);
    r->pos = (int)e[0];
    atomic_store(&r->c->clock, e[1]);
    atomic_fetch_add(&r->c->restored, 1);
    return 0;
}

static void script_destroy_reader(void *reader) { free(reader); }
static void script_destroy(void *ctx) { (void)ctx; /* the case is the test's */ }

static const sl_source_ops_t script_ops = {.name = "script",
                                           .create_reader = script_create,
                                           .poll = script_poll,
                                           .destroy_reader = script_destroy_reader,
                                           .destroy = script_destroy,
                                           .snapshot = script_snapshot,
                                           .restore = script_restore};

/* Restore mode: fails once, on event fail_id. */
static int fail_once(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    rcase_t *c = ctx;
    if (sl_row_i64(&in->row, 3) == c->fail_id && !atomic_exchange(&c->failed, 1)) return SL_EUSER;
    for (int i = 0; i < 4; i++) sl_rw_set_i64(out, i, sl_row_i64(&in->row, i));
    return 0;
}

static int64_t virtual_clock(void *ctx) { return atomic_load(&((rcase_t *)ctx)->clock); }

/* The collected output as window_random_check.h's arrays, compared. */
static int compare_collected(const rcase_t *c, const wr_result_t *r, const collected_t *fired, const collected_t *late,
                             const sl_schema_t *osc, const sl_schema_t *isc, const char *desc) {
    int64_t ne = fired->n, nl = late->n;
    efire_t *eng = calloc((size_t)ne + 1, sizeof *eng);
    for (int64_t i = 0; i < ne; i++) {
        sl_row_t row = collected_row(fired, i, osc);
        eng[i].f.key = sl_row_i64(&row, 0);
        eng[i].f.start = sl_row_i64(&row, 1);
        eng[i].f.end = sl_row_i64(&row, 2);
        eng[i].f.cnt = sl_row_i64(&row, 3);
        eng[i].f.sum = sl_row_i64(&row, 4);
        eng[i].ts = fired->ts[i];
        eng[i].subtask = fired->subtask[i];
        eng[i].seq = i;
    }
    elate_t *lt = calloc((size_t)nl + 1, sizeof *lt);
    for (int64_t i = 0; i < nl; i++) {
        sl_row_t row = collected_row(late, i, isc);
        lt[i] = (elate_t){sl_row_i64(&row, 0), sl_row_i64(&row, 1), sl_row_i64(&row, 2), sl_row_i64(&row, 3),
                          late->ts[i]};
    }
    int problems = compare_case(c, r, eng, ne, lt, nl, desc);
    free(eng);
    free(lt);
    return problems;
}

/* ---- running one case ---- */

typedef struct run_stats {
    int cases, failed;
    int64_t events, firings, late, immediate, idle_marks, reactivations, merges, bridges, partial, dropped,
        dropped_late, all_idle, restarts, restored;
} run_stats_t;

/* One run of the job at parallelism P (window and sinks).  mode 0: no
 * checkpoints; 1: checkpoints and a restart after the injected failure;
 * 2: checkpoints kept in ck, no restart (restore_from: restore from ck). */
static int run_job(rcase_t *c, int P, int mode, const char *ck, const char *restore_from, bool rocksdb,
                   txn_collected_t *tfired, txn_collected_t *tlate, sl_env_t **envp) {
    sl_env_t *env = sl_env_new();
    *envp = env;
    sl_env_set_parallelism(env, P);
    sl_env_set_auto_watermark_interval(env, c->p.interval);
    sl_env_set_clock(env, virtual_clock, c);
    if (mode) {
        sl_env_enable_checkpointing(env, 10, SL_CHECKPOINT_EXACTLY_ONCE);
        sl_env_set_checkpoint_dir(env, ck);
        if (mode == 1) {
            sl_env_set_restart_fixed_delay(env, 1, 0);
        } else {
            sl_env_set_checkpoint_retention(env, SL_CHECKPOINTS_RETAIN_ON_CANCELLATION);
            sl_env_set_restart_none(env);
        }
    }
    if (rocksdb) {
        char rdb[1100];
        snprintf(rdb, sizeof rdb, "%s-rocksdb%s", ck, restore_from ? "-2" : "");
        sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);
        sl_env_set_rocksdb_options(env, rdb, 4 << 20, 1 << 20);
    }
    if (restore_from && sl_env_restore_from(env, restore_from) != 0) return SL_EINVAL;
    sl_watermark_strategy_t ws = sl_wm_bounded("ts", c->p.bound);
    ws.idle_timeout_ms = c->p.idle_timeout;
    sl_source_t src = {&script_ops, c, in_schema()};
    sl_stream_t *s = sl_uid(sl_parallelism(sl_from_source(env, src, ws, "script"), 1), "script");
    if (mode) s = sl_uid(sl_parallelism(sl_map(s, fail_once, c, in_schema()), 1), "fail-once"); /* chained */
    sl_window_assigner_t *as = c->p.kind == WR_TUMBLING  ? sl_tumbling_event_time(c->p.size, c->p.offset)
                               : c->p.kind == WR_SLIDING ? sl_sliding_event_time(c->p.size, c->p.slide, c->p.offset)
                                                         : sl_session_event_time(c->p.gap);
    sl_windowed_t *w = sl_window(sl_key_by(s, "k"), as);
    if (c->p.lateness > 0) w = sl_window_allowed_lateness(w, c->p.lateness);
    w = sl_window_late_output(w, "late");
    sl_aggregate_fn_t agg = {sizeof(acc_t), agg_init, agg_add, agg_merge, agg_result, NULL};
    sl_stream_t *o = sl_window_aggregate(w, agg, out_schema());
    if (!o) return SL_EINVAL;
    sl_parallelism(sl_uid(sl_name(o, "window"), "window"), P);
    sl_uid(sl_parallelism(sl_sink_to(o, txn_collect_sink(tfired), "fired"), P), "fired");
    sl_stream_t *lo = sl_side_output(o, "late");
    if (lo) sl_uid(sl_parallelism(sl_sink_to(lo, txn_collect_sink(tlate), "late"), P), "late");
    return sl_env_execute(env, "window-random");
}

/* restore: 0 none, 1 restart in place, 2 rescale (restore in a new job at
 * another parallelism; every other rescaled case on RocksDB). */
static int run_case(int idx, uint64_t seed, run_stats_t *st, bool verbose, int restore) {
    rcase_t *c = calloc(1, sizeof *c);
    case_generate(c, idx, seed);
    c->restore = restore != 0;
    c->rescale = restore == 2;
    c->fail_id = c->nev > 0 ? c->ev[c->nev / 2 + (int)(seed % (uint64_t)(c->nev - c->nev / 2))].id : -1; /* late enough for a checkpoint */
    c->fail_batch = 0;
    for (int a = 0; a < c->nact; a++) {
        if (c->act[a].kind == WR_POLL_END) c->fail_batch = a + 1;
        if (c->act[a].kind == WR_EMIT && c->ev[c->act[a].ev].id == c->fail_id) break;
    }
    atomic_store(&c->clock, c->p.clock0);
    char desc[1024];
    case_describe(c, desc, sizeof desc);

    wr_result_t ref;
    int problems = 0;
    if (wr_run(&c->p, c->ev, c->nev, c->act, c->nact, &ref) < 0) {
        fprintf(stderr, "  %s\n  %s\n", desc, ref.err);
        problems++;
    }

    char ck[1024];
    snprintf(ck, sizeof ck, "%s/wr-%d-%d", sl_test_tmpdir(), restore, idx);
    txn_collected_t *tfired = txn_collected_new(), *tlate = txn_collected_new();
    collected_t *fired = tfired->out, *late = tlate->out;
    c->committed = tfired;
    static const int other_p[5] = {0, 3, 4, 0, 1}; /* P 1 -> 3, 2 -> 4, 4 -> 1 */
    int P2 = other_p[c->P];
    /* SLUICE_RAND_ROCKSDB=1: every case on the RocksDB backend (and its value cache) */
    bool rocksdb = (c->rescale && idx % 2 == 1) || getenv("SLUICE_RAND_ROCKSDB");
    sl_env_t *env = NULL;
    int rc = run_job(c, c->P, restore, ck, NULL, rocksdb, tfired, tlate, &env);
    if (c->rescale && c->nev > 0) {
        if (rc == 0 || !atomic_load(&c->failed)) {
            fprintf(stderr, "  %s\n    rescale: the first run %s\n", desc,
                    rc == 0 ? "did not fail" : "failed, not by the injected failure");
            problems++;
        }
        sl_env_destroy(env);
        char path[1100];
        snprintf(path, sizeof path, "%s/window-random", ck);
        rc = run_job(c, P2, 2, ck, path, rocksdb, tfired, tlate, &env);
        if (atomic_load(&c->restored) != 1) {
            fprintf(stderr, "  %s\n    rescale: the source resumed %d times from a checkpoint\n", desc,
                    atomic_load(&c->restored));
            problems++;
        }
    }
    int Pend = c->rescale && c->nev > 0 ? P2 : c->P;
    if (rc != 0) {
        fprintf(stderr, "  %s\n    job failed: rc=%d (%s) error: %s\n", desc, rc, sl_strerror(rc), sl_env_error(env));
        problems++;
    } else {
        if (fired->finished != Pend || late->finished != Pend) {
            fprintf(stderr, "  %s\n    sinks finished: %d and %d of %d subtasks\n", desc, fired->finished,
                    late->finished, Pend);
            problems++;
        }
        int64_t in = -1, out = -1;
        if (c->rescale) {
            st->restored += atomic_load(&c->restored);
        } else if (restore) { /* metrics are the last attempt's; what matters is that it failed and restarted */
            if (c->nev > 0 && (sl_env_restarts(env) != 1 || !atomic_load(&c->failed))) {
                fprintf(stderr, "  %s\n    restarts %d, injected failure %s\n", desc, sl_env_restarts(env),
                        atomic_load(&c->failed) ? "happened" : "never happened");
                problems++;
            }
            st->restored += atomic_load(&c->restored);
            st->restarts += sl_env_restarts(env);
        } else if (sl_env_operator_metrics(env, "window", &in, &out) != 0 || in != c->nev) {
            fprintf(stderr, "  %s\n    window operator records_in=%lld, expected %d\n", desc, (long long)in, c->nev);
            problems++;
        }
        sl_schema_t *osc = out_schema(), *isc = in_schema();
        problems += compare_collected(c, &ref, fired, late, osc, isc, desc);
        sl_schema_unref(osc);
        sl_schema_unref(isc);
    }
    if (verbose || problems)
        fprintf(stderr, "  %s %s: events=%d firings=%d (engine %lld) late=%d (engine %lld) immediate=%lld idle=%lld "
                "reactivated=%lld merges=%lld wm_advances=%lld final_wm=%lld restored=%d\n",
                problems ? "FAIL" : "ok", desc, c->nev, ref.nfire, (long long)fired->n, ref.nlate, (long long)late->n,
                (long long)ref.immediate_fires, (long long)ref.idle_marks, (long long)ref.reactivations,
                (long long)ref.merges, (long long)ref.wm_advances, (long long)ref.final_wm, atomic_load(&c->restored));
    if (problems)
        fprintf(stderr, "  reproduce: SLUICE_RAND_SEED=0x%" PRIx64 " SLUICE_RAND_CASE=%d\n",
                (uint64_t)(seed - (uint64_t)idx * 0x1000193ULL), idx);
    st->cases++;
    st->failed += problems ? 1 : 0;
    st->events += c->nev;
    st->firings += ref.nfire;
    st->late += ref.nlate;
    st->immediate += ref.immediate_fires;
    st->idle_marks += ref.idle_marks;
    st->reactivations += ref.reactivations;
    st->merges += ref.merges;
    st->bridges += ref.bridges;
    st->partial += ref.partial_pairs;
    st->dropped += ref.dropped;
    st->all_idle += ref.all_idle;
    st->dropped_late += ref.dropped_late;
    wr_free(&ref);
    if (verbose || problems)
        fprintf(stderr, "    sinks: fired commits %lld recovered %lld, late commits %lld\n", (long long)tfired->commits,
                (long long)tfired->recovered, (long long)tlate->commits);
    txn_collected_free(tfired);
    txn_collected_free(tlate);
    sl_env_destroy(env);
    case_free(c);
    free(c);
    return problems;
}

/* ---- a hand-written case for the model itself (no engine) ---- */

TEST(reference_model_sanity) {
    /* one split, B = 0, tumbling 10, L = 5: events 1, 12, 3 (window [0,10)
     * fired at wm 11, kept until 14: late firing), 25 (wm 24 cleans [0,10)
     * and fires [10,20)), 4 (late), 30 */
    wr_event_t ev[] = {{0, 7, 1, 1, 0}, {1, 7, 2, 12, 0}, {2, 7, 4, 3, 0},
                       {3, 7, 8, 25, 0}, {4, 7, 16, 4, 0}, {5, 7, 32, 30, 0}};
    wr_action_t act[8];
    int na = 0;
    for (int i = 0; i < 6; i++) act[na++] = (wr_action_t){WR_EMIT, 0, i};
    act[na++] = (wr_action_t){WR_FINISH, 0, -1};
    wr_params_t p = {.kind = WR_TUMBLING, .nsplits = 1, .bound = 0, .idle_timeout = 20, .clock0 = 0, .size = 10,
                     .lateness = 5};
    wr_result_t r;
    CHECK_EQ(wr_run(&p, ev, 6, act, na, &r), 0);
    /* [0,10): (1,1) at wm 11, (2,5) late firing; [10,20): (1,2) at wm 24;
     * [20,30): (1,8) at wm 29; [30,40): (1,32) at the end */
    CHECK_EQ(r.nfire, 5);
    wr_firing_t want[] = {{7, 0, 10, 1, 1}, {7, 0, 10, 2, 5}, {7, 10, 20, 1, 2}, {7, 20, 30, 1, 8}, {7, 30, 40, 1, 32}};
    for (int i = 0; i < 5; i++) CHECK(cmp_firing(&r.fire[i], &want[i]) == 0);
    CHECK_EQ(r.nlate, 1);
    CHECK_EQ(r.late[0], 4);
    wr_free(&r);

    /* sessions, gap 5, B = 0, L = 0: 1 -> [1,6); 6 touches -> [1,11);
     * 20 -> wm 19 fires [1,11) (2 events); 8 is late alone ([8,13) cleanup
     * 12 <= 19); 16 touches [20,25)? [16,21) overlaps -> [16,25) */
    wr_event_t sv[] = {{0, 1, 1, 1, 0}, {1, 1, 2, 6, 0}, {2, 1, 4, 20, 0}, {3, 1, 8, 8, 0}, {4, 1, 16, 16, 0}};
    na = 0;
    for (int i = 0; i < 5; i++) act[na++] = (wr_action_t){WR_EMIT, 0, i};
    act[na++] = (wr_action_t){WR_FINISH, 0, -1};
    wr_params_t sp = {.kind = WR_SESSION, .nsplits = 1, .bound = 0, .idle_timeout = 0, .clock0 = 0, .gap = 5};
    CHECK_EQ(wr_run(&sp, sv, 5, act, na, &r), 0);
    CHECK_EQ(r.nfire, 2);
    wr_firing_t swant[] = {{1, 1, 11, 2, 3}, {1, 16, 25, 2, 20}};
    for (int i = 0; i < 2; i++) CHECK(cmp_firing(&r.fire[i], &swant[i]) == 0);
    CHECK_EQ(r.nlate, 1);
    CHECK_EQ(r.late[0], 3);
    wr_free(&r);

    /* idleness: split 1 emits once then pauses; timeout 3; split 0 goes on:
     * the watermark follows split 0 once split 1 is idle; split 1's next
     * event (ts 2, far behind) is late */
    wr_event_t iv[] = {{0, 0, 1, 100, 0}, {1, 0, 1, 1, 1}, {2, 0, 1, 110, 0}, {3, 0, 1, 120, 0},
                       {4, 0, 1, 130, 0}, {5, 0, 1, 140, 0}, {6, 0, 1, 2, 1}};
    na = 0;
    for (int i = 0; i < 7; i++) act[na++] = (wr_action_t){WR_EMIT, iv[i].split, i};
    wr_params_t ip = {.kind = WR_TUMBLING, .nsplits = 2, .bound = 0, .idle_timeout = 3, .clock0 = 0, .size = 10};
    CHECK_EQ(wr_run(&ip, iv, 7, act, na, &r), 0);
    /* clock 1: e0; 2: e1 (wm = min(99, 0) = 0); 3: e2; 4: e3; 5: e4 (split 1
     * inactive since 2, 5 - 2 >= 3: idle, wm = 129); 6: e5 (wm 139); 7: e6
     * reactivates split 1 and is late */
    CHECK_EQ(r.idle_marks, 1);
    CHECK_EQ(r.reactivations, 1);
    CHECK_EQ(r.wm_at[4], 0);
    CHECK_EQ(r.wm_at[5], 129);
    CHECK_EQ(r.nlate, 1);
    CHECK_EQ(r.late[0], 6);
    wr_free(&r);

    /* periodic (interval 1, a check at each poll end), timeout 3: both
     * splits pause until both are idle (watermark held at 49); split 1
     * comes back with ts 10 (late) and 200 (wm 199 with split 0 idle);
     * split 0 comes back with ts 101: late, and the watermark stays 199 */
    wr_event_t pv[] = {{0, 0, 1, 100, 0}, {1, 0, 1, 50, 1}, {2, 0, 1, 10, 1}, {3, 0, 1, 200, 1}, {4, 0, 1, 101, 0}};
    wr_action_t pa[] = {{WR_EMIT, 0, 0},    {WR_EMIT, 1, 1},    {WR_POLL_END, -1, -1}, {WR_ADVANCE, -1, -1},
                        {WR_POLL_END, -1, -1}, {WR_ADVANCE, -1, -1}, {WR_POLL_END, -1, -1}, {WR_ADVANCE, -1, -1},
                        {WR_POLL_END, -1, -1}, {WR_ADVANCE, -1, -1}, {WR_POLL_END, -1, -1}, {WR_EMIT, 1, 2},
                        {WR_POLL_END, -1, -1}, {WR_EMIT, 1, 3},    {WR_POLL_END, -1, -1}, {WR_EMIT, 0, 4},
                        {WR_POLL_END, -1, -1}};
    wr_params_t pp = {.kind = WR_TUMBLING, .nsplits = 2, .bound = 0, .idle_timeout = 3, .clock0 = 0, .interval = 1,
                      .size = 10};
    CHECK_EQ(wr_run(&pp, pv, 5, pa, (int)(sizeof pa / sizeof pa[0]), &r), 0);
    CHECK_EQ(r.all_idle, 1);
    CHECK_EQ(r.idle_marks, 2);
    CHECK_EQ(r.reactivations, 2);
    CHECK_EQ(r.wm_at[2], 49);
    CHECK_EQ(r.wm_at[3], 49);
    CHECK_EQ(r.wm_at[4], 199);
    CHECK_EQ(r.nlate, 2);
    CHECK_EQ(r.late[0], 2);
    CHECK_EQ(r.late[1], 4);
    CHECK_EQ(r.final_wm, 199);
    wr_free(&r);
}

TEST(windows_match_reference) {
    int n = 40;
    const char *soak = getenv("SLUICE_SOAK_SEEDS");
    if (soak && atoi(soak) > 0) n = atoi(soak);
    uint64_t base = 0x5eed;
    const char *bs = getenv("SLUICE_RAND_SEED");
    if (bs) base = strtoull(bs, NULL, 0);
    int only = -1;
    const char *oc = getenv("SLUICE_RAND_CASE");
    if (oc) only = atoi(oc);
    bool verbose = getenv("SLUICE_RAND_VERBOSE") != NULL;
    run_stats_t st = {0};
    int64_t t0 = sl_now_ms();
    for (int i = 0; i < n || (only >= 0 && i <= only); i++) {
        if (only >= 0 && i != only) continue;
        uint64_t seed = base + (uint64_t)i * 0x1000193ULL;
        run_case(i, seed, &st, verbose, 0);
    }
    fprintf(stderr,
            "  %d case(s), %d failed, %.1f s: %lld events, %lld firings (%lld fired at once), %lld late records, "
            "%lld (event, window) pairs dropped, %lld events in no window (%lld of them late), %lld session "
            "merges (%lld joining >= 2 windows), %lld splits marked idle, %lld reactivated, %lld times all idle\n",
            st.cases, st.failed, (double)(sl_now_ms() - t0) / 1000.0, (long long)st.events, (long long)st.firings,
            (long long)st.immediate, (long long)st.late, (long long)st.partial,
            (long long)(st.dropped + st.dropped_late), (long long)st.dropped_late,
            (long long)st.merges, (long long)st.bridges,
            (long long)st.idle_marks, (long long)st.reactivations, (long long)st.all_idle);
    CHECK_EQ(st.failed, 0);
}

/* The same comparison with checkpoints every 10 ms, a failure injected at a
 * random event and a restart from the latest checkpoint (or from the start
 * when none completed yet): the results that reached the (transactional)
 * sinks equal the uninterrupted reference exactly — lateness included, as
 * the checkpoints carry the watermarks and the source's generators. */
TEST(windows_match_reference_with_restores) {
    int n = 16;
    const char *soak = getenv("SLUICE_SOAK_SEEDS");
    if (soak && atoi(soak) > 0) n = atoi(soak) / 2 > 0 ? atoi(soak) / 2 : 1;
    uint64_t base = 0xfa11;
    const char *bs = getenv("SLUICE_RAND_RESTORE_SEED");
    if (bs) base = strtoull(bs, NULL, 0);
    bool verbose = getenv("SLUICE_RAND_VERBOSE") != NULL;
    run_stats_t st = {0};
    int64_t t0 = sl_now_ms();
    int only = getenv("SLUICE_RAND_CASE") ? atoi(getenv("SLUICE_RAND_CASE")) : -1;
    for (int i = 0; i < n || (only >= 0 && i <= only); i++)
        if (only < 0 || i == only) run_case(i, base + (uint64_t)i * 0x1000193ULL, &st, verbose, 1);
    fprintf(stderr, "  %d case(s) with restores, %d failed, %.1f s: %lld restarts, %lld from a checkpoint, %lld "
                    "events, %lld firings, %lld late records\n",
            st.cases, st.failed, (double)(sl_now_ms() - t0) / 1000.0, (long long)st.restarts,
            (long long)st.restored, (long long)st.events, (long long)st.firings, (long long)st.late);
    CHECK_EQ(st.failed, 0);
    CHECK(st.restored >= n / 4); /* most restarts resumed from a checkpoint, not from the start */
}

/* Restores at another parallelism: a job with checkpoints kept on
 * cancellation and no restart strategy fails on the injected event (after
 * a checkpoint was committed: the source waits for one); a second job at
 * another parallelism restores the latest checkpoint (sl_env_restore_from,
 * keyed state and timers move by key group).  What the two jobs' sinks
 * committed equals the uninterrupted reference exactly.  Every other case
 * runs on RocksDB. */
TEST(windows_match_reference_rescaled) {
    int n = 12;
    const char *soak = getenv("SLUICE_SOAK_SEEDS");
    if (soak && atoi(soak) > 0) n = atoi(soak) / 2 > 0 ? atoi(soak) / 2 : 1;
    uint64_t base = 0x5ca1e;
    const char *bs = getenv("SLUICE_RAND_RESCALE_SEED");
    if (bs) base = strtoull(bs, NULL, 0);
    bool verbose = getenv("SLUICE_RAND_VERBOSE") != NULL;
    run_stats_t st = {0};
    int64_t t0 = sl_now_ms();
    int only = getenv("SLUICE_RAND_CASE") ? atoi(getenv("SLUICE_RAND_CASE")) : -1;
    for (int i = 0; i < n || (only >= 0 && i <= only); i++)
        if (only < 0 || i == only) run_case(i, base + (uint64_t)i * 0x1000193ULL, &st, verbose, 2);
    fprintf(stderr, "  %d case(s) rescaled, %d failed, %.1f s: %lld restored from a checkpoint, %lld events, %lld "
                    "firings, %lld late records, %lld session merges\n",
            st.cases, st.failed, (double)(sl_now_ms() - t0) / 1000.0, (long long)st.restored, (long long)st.events,
            (long long)st.firings, (long long)st.late, (long long)st.merges);
    CHECK_EQ(st.failed, 0);
}

int main(void) {
    RUN(reference_model_sanity);
    RUN(windows_match_reference);
    RUN(windows_match_reference_with_restores);
    RUN(windows_match_reference_rescaled);
    TEST_MAIN_END();
}
