/* test_restart_strategy.c — fixed-delay, exponential-delay, failure-rate
 * and none, driven by a manual clock; and a job that fails more often than
 * its strategy allows ends failed. */
#include "test.h"

#include "pipeline_util.h"
#include "checkpoint/storage.h"
#include "common/common.h"
#include "jobmanager/restart_strategy.h"

TEST(fixed_delay_counts_attempts) {
    sl_restart_config_t c = sl_restart_defaults(SL_RESTART_FIXED_DELAY);
    c.attempts = 2;
    c.delay_ms = 250;
    sl_restart_strategy_t s;
    sl_restart_init(&s, &c, 1);
    CHECK(sl_restart_notify_failure(&s, 0));
    CHECK_EQ(s.backoff_ms, 250);
    CHECK(sl_restart_notify_failure(&s, 10000000));
    CHECK(!sl_restart_notify_failure(&s, 20000000)); /* the third failure: out of attempts */
    sl_restart_free(&s);
    c.attempts = 0;
    sl_restart_init(&s, &c, 1);
    CHECK(!sl_restart_notify_failure(&s, 0));
    sl_restart_free(&s);
}

TEST(none_never_restarts) {
    sl_restart_config_t c = sl_restart_defaults(SL_RESTART_NONE);
    sl_restart_strategy_t s;
    sl_restart_init(&s, &c, 1);
    CHECK(!sl_restart_notify_failure(&s, 0));
    sl_restart_free(&s);
}

TEST(exponential_delay_grows_caps_and_resets) {
    sl_restart_config_t c = sl_restart_defaults(SL_RESTART_EXPONENTIAL_DELAY);
    c.initial_backoff_ms = 100;
    c.max_backoff_ms = 1000;
    c.multiplier = 2.0;
    c.jitter = 0;
    c.reset_threshold_ms = 60000;
    sl_restart_strategy_t s;
    sl_restart_init(&s, &c, 1);
    int64_t t = 0, expect[] = {100, 200, 400, 800, 1000, 1000};
    for (int i = 0; i < 6; i++) {
        CHECK(sl_restart_notify_failure(&s, t));
        CHECK_EQ(s.backoff_ms, expect[i]);
        t += s.backoff_ms + 10; /* fails again soon after the restart */
    }
    /* a healthy hour later: back to the initial backoff */
    t += 60000;
    CHECK(sl_restart_notify_failure(&s, t));
    CHECK_EQ(s.backoff_ms, 100);
    sl_restart_free(&s);

    /* attempts-before-reset-backoff bounds restarts in a row */
    c.attempts_before_reset = 3;
    sl_restart_init(&s, &c, 1);
    CHECK(sl_restart_notify_failure(&s, 0));
    CHECK(sl_restart_notify_failure(&s, 1000));
    CHECK(sl_restart_notify_failure(&s, 2000));
    CHECK(!sl_restart_notify_failure(&s, 3000));
    sl_restart_free(&s);
}

TEST(exponential_delay_jitter_stays_in_bounds) {
    sl_restart_config_t c = sl_restart_defaults(SL_RESTART_EXPONENTIAL_DELAY);
    c.initial_backoff_ms = 1000;
    c.max_backoff_ms = 1000; /* constant base: only jitter varies */
    c.jitter = 0.2;
    sl_restart_strategy_t s;
    sl_restart_init(&s, &c, 42);
    int64_t lo = INT64_MAX, hi = 0;
    for (int i = 0; i < 2000; i++) {
        CHECK(sl_restart_notify_failure(&s, i * 10));
        CHECK(s.backoff_ms >= 800 && s.backoff_ms <= 1000);
        lo = s.backoff_ms < lo ? s.backoff_ms : lo;
        hi = s.backoff_ms > hi ? s.backoff_ms : hi;
    }
    CHECK(lo < 850); /* jitter actually spreads the delays */
    CHECK(hi > 950);
    sl_restart_free(&s);
}

TEST(failure_rate_window) {
    sl_restart_config_t c = sl_restart_defaults(SL_RESTART_FAILURE_RATE);
    c.max_failures = 3;
    c.interval_ms = 10000;
    c.delay_ms = 5;
    sl_restart_strategy_t s;
    sl_restart_init(&s, &c, 1);
    CHECK(sl_restart_notify_failure(&s, 0));
    CHECK_EQ(s.backoff_ms, 5);
    CHECK(sl_restart_notify_failure(&s, 1000));
    CHECK(sl_restart_notify_failure(&s, 2000));
    /* a fourth inside 10 s of the first: too many */
    CHECK(!sl_restart_notify_failure(&s, 9999));
    sl_restart_free(&s);

    sl_restart_init(&s, &c, 1);
    /* failures spread out: never more than 3 in any 10 s */
    for (int i = 0; i < 100; i++) CHECK(sl_restart_notify_failure(&s, (int64_t)i * 3400));
    sl_restart_free(&s);
}

TEST(validation_names_the_setting) {
    char err[300];
    sl_restart_config_t c = sl_restart_defaults(SL_RESTART_EXPONENTIAL_DELAY);
    c.initial_backoff_ms = 5000;
    c.max_backoff_ms = 1000;
    CHECK(sl_restart_validate(&c, err, sizeof err) < 0);
    CHECK(strstr(err, "initial-backoff") != NULL);
    c = sl_restart_defaults(SL_RESTART_FAILURE_RATE);
    c.max_failures = 0;
    CHECK(sl_restart_validate(&c, err, sizeof err) < 0);
    CHECK(strstr(err, "max-failures-per-interval") != NULL);
}

/* A map that fails on every run when it meets record 50: failure-rate with
 * at most 2 failures a minute restarts twice, then the job fails with the
 * map's error. */
static int always_fail(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    if (sl_row_i64(&in->row, 0) == 50) return SL_EUSER;
    sl_rw_set_i64(out, 0, sl_row_i64(&in->row, 0));
    sl_rw_set_i64(out, 1, sl_row_i64(&in->row, 1));
    return 0;
}

/* Fails at the very end, after checkpoints completed. */
static int always_fail_late(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    if (sl_row_i64(&in->row, 0) == 59990) return SL_EUSER;
    sl_rw_set_i64(out, 0, sl_row_i64(&in->row, 0));
    sl_rw_set_i64(out, 1, sl_row_i64(&in->row, 1));
    return 0;
}

TEST(job_gives_up_after_failure_rate) {
    char ck[1024];
    snprintf(ck, sizeof ck, "%s/rs-ckpt", sl_test_tmpdir());
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 1);
    sl_env_enable_checkpointing(env, 1000, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, ck);
    sl_env_set_restart_failure_rate(env, 2, 60000, 1);
    sl_stream_t *s = sl_uid(sl_from_source(env, counter_source(200, 1), sl_wm_none(), "numbers"), "numbers");
    s = sl_map(s, always_fail, NULL, sl_schema_parse("id BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0));
    collected_t *col = collected_new();
    sl_sink_to(s, collect_sink(col), "sink");
    int rc = sl_env_execute(env, "fails");
    CHECK(rc < 0);
    CHECK_EQ(sl_env_restarts(env), 2);
    sl_env_destroy(env);
    collected_free(col);
}

/* How many complete checkpoints the job left behind. */
static int complete_checkpoints(const char *dir, const char *job) {
    sl_ckpt_storage_t *st;
    char err[512];
    if (sl_ckpt_storage_fs_open(dir, job, &st, err, sizeof err) < 0) return -1;
    int64_t *ids = NULL;
    int n = 0;
    if (sl_ckpt_storage_list_completed(st, &ids, &n, err, sizeof err) < 0) n = -1;
    sl_free(ids);
    st->ops->destroy(st);
    return n;
}

static int slow_copy(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    if (sl_row_i64(&in->row, 0) % 1000 == 0) usleep(2000); /* long enough for a few checkpoints */
    sl_rw_set_i64(out, 0, sl_row_i64(&in->row, 0));
    sl_rw_set_i64(out, 1, sl_row_i64(&in->row, 1));
    return 0;
}

/* Runs a job that finishes (fail = false) or fails for good under the
 * retention policy r; returns the complete checkpoints left. */
static int run_with_retention(sl_checkpoint_retention_t r, bool fail, int64_t *completed) {
    static int seq;
    char ck[1024], job[64];
    snprintf(ck, sizeof ck, "%s/retention-%d", sl_test_tmpdir(), seq++);
    snprintf(job, sizeof job, "retention");
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 1);
    sl_env_enable_checkpointing(env, 10, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, ck);
    sl_env_set_checkpoints_retained(env, 2);
    sl_env_set_checkpoint_retention(env, r);
    sl_env_set_restart_none(env);
    sl_stream_t *s = sl_uid(sl_from_source(env, counter_source(60000, 1), sl_wm_none(), "numbers"), "numbers");
    s = sl_map(s, slow_copy, NULL, sl_schema_parse("id BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0));
    if (fail) s = sl_map(s, always_fail_late, NULL, sl_schema_parse("id BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0));
    collected_t *col = collected_new();
    sl_sink_to(s, collect_sink(col), "sink");
    int rc = sl_env_execute(env, job);
    if ((rc == 0) == fail) fprintf(stderr, "  unexpected end (rc %d): %s\n", rc, sl_env_error(env));
    *completed = sl_env_checkpoints_completed(env);
    sl_env_destroy(env);
    collected_free(col);
    if ((rc == 0) == fail) return -100;
    int left = complete_checkpoints(ck, job);
    if (left == 0 && r == SL_CHECKPOINTS_RETAIN_ON_CANCELLATION) {
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "ls -la %s/%s >&2", ck, job);
        if (system(cmd) != 0) fprintf(stderr, "ls failed\n");
    }
    return left;
}

TEST(retention_at_job_end) {
    int64_t done;
    /* NO_EXTERNALIZED_CHECKPOINTS (the default): gone after any end */
    CHECK_EQ(run_with_retention(SL_CHECKPOINTS_NOT_RETAINED, false, &done), 0);
    CHECK(done >= 1);
    CHECK_EQ(run_with_retention(SL_CHECKPOINTS_NOT_RETAINED, true, &done), 0);
    CHECK(done >= 1);
    /* DELETE_ON_CANCELLATION: kept only when the job failed */
    CHECK_EQ(run_with_retention(SL_CHECKPOINTS_DELETE_ON_CANCELLATION, false, &done), 0);
    CHECK(done >= 1);
    CHECK_EQ(run_with_retention(SL_CHECKPOINTS_DELETE_ON_CANCELLATION, true, &done), done >= 2 ? 2 : 1);
    CHECK(done >= 1);
    /* RETAIN_ON_CANCELLATION: the last num-retained stay after any end */
    CHECK_EQ(run_with_retention(SL_CHECKPOINTS_RETAIN_ON_CANCELLATION, false, &done), done >= 2 ? 2 : 1);
    CHECK(done >= 1);
    CHECK_EQ(run_with_retention(SL_CHECKPOINTS_RETAIN_ON_CANCELLATION, true, &done), done >= 2 ? 2 : 1);
    CHECK(done >= 1);
}

TEST(bad_settings_are_job_errors) {
    sl_env_t *env = sl_env_new();
    sl_env_set_restart_exponential_delay(env, 0, 100, 2.0, 1000, 0.1, 5);
    CHECK(strstr(sl_env_error(env), "initial-backoff") != NULL);
    sl_env_destroy(env);
}

int main(void) {
    RUN(fixed_delay_counts_attempts);
    RUN(none_never_restarts);
    RUN(exponential_delay_grows_caps_and_resets);
    RUN(exponential_delay_jitter_stays_in_bounds);
    RUN(failure_rate_window);
    RUN(validation_names_the_setting);
    RUN(job_gives_up_after_failure_rate);
    RUN(retention_at_job_end);
    RUN(bad_settings_are_job_errors);
    TEST_MAIN_END();
}
