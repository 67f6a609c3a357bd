/* test_postgres_exactly_once.c — S3/S4 with a real PostgreSQL server: jobs
 * writing through the exactly-once PostgreSQL sink are killed with SIGKILL
 * inside each window of the two-phase commit and at random moments,
 * restarted from their latest checkpoint (once at another parallelism),
 * and the table is compared with the generator's events computed
 * independently — no duplicate, no gap, no prepared transaction left.  In
 * process: nothing becomes visible before its checkpoint completes, and
 * connections terminated by the server (pg_terminate_backend) are retried,
 * or fail the task so that the restart strategy recovers the job. */
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/wait.h>
#include <time.h>

#include "common/common.h"
#include "connectors/connectors.h"
#include "pipeline_util.h"
#include "sluice/postgres.h"
#include "test.h"
#include "test_postgres_util.h"

/* ---- the pg_job process ---- */

static const char *child_fault; /* SLUICE_FAULT_AT for the next child */
static const char *child_par = "--p=2";

static pid_t spawn(const char *table, const char *ckpt, long long n, bool restore, const char *job) {
    char ns[32], jobarg[100];
    snprintf(ns, sizeof ns, "%lld", n);
    snprintf(jobarg, sizeof jobarg, "--job=%s", job);
    pid_t pid = fork();
    if (pid == 0) {
        if (child_fault)
            setenv("SLUICE_FAULT_AT", child_fault, 1);
        else
            unsetenv("SLUICE_FAULT_AT");
        if (!freopen("/dev/null", "w", stdout)) _exit(126);
        execl(SLUICE_PG_JOB, SLUICE_PG_JOB, pgt_conninfo(), table, ckpt, ns, restore ? "--restore" : "--fresh",
              child_par, jobarg, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Runs the job until it finishes, killing it `kills` times at random
 * moments (restarting it from its latest checkpoint each time).  Returns
 * the kills, or -1 if a run failed. */
static int run_with_kills(const char *table, const char *ckpt, long long n, const char *job, bool resume, int kills,
                          int min_ms, int max_ms) {
    int killed = 0;
    for (int round = 0; round < kills + 20; round++) {
        pid_t pid = spawn(table, ckpt, n, resume || round > 0, job);
        if (killed < kills) {
            struct timespec ts = {0, 0};
            long ms = min_ms + rand() % (max_ms - min_ms);
            ts.tv_sec = ms / 1000;
            ts.tv_nsec = (ms % 1000) * 1000000L;
            nanosleep(&ts, NULL);
            kill(pid, SIGKILL);
        }
        int st;
        waitpid(pid, &st, 0);
        if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
            killed++;
            continue;
        }
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return killed;
        fprintf(stderr, "  pg_job exited with status %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -WTERMSIG(st));
        return -1;
    }
    return -1;
}

/* ---- the expected rows ---- */

typedef struct ev {
    int64_t card;
    double amount;
    int64_t ts;
} ev_t;

static int cmp_ev(const void *a, const void *b) {
    const ev_t *x = a, *y = b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    if (x->card != y->card) return x->card < y->card ? -1 : 1;
    return x->amount < y->amount ? -1 : x->amount > y->amount;
}

/* The table equals the generator's n events (seed 7, 4 splits) exactly
 * once, and no prepared transaction of the job is left. */
static void verify_table(PGconn *c, const char *table, long long n, const char *job) {
    sl_datagen_opts_t g = sl_datagen_defaults();
    g.seed = 7;
    g.count = n;
    g.splits = 4;
    ev_t *want = calloc((size_t)n, sizeof *want);
    long long nw = 0;
    for (int sp = 0; sp < 4; sp++)
        for (int64_t i = 0; i < sl_datagen_split_count(&g, sp); i++) {
            sl_datagen_event_t e;
            sl_datagen_event(&g, sp, i, &e);
            want[nw++] = (ev_t){e.card_id, e.amount, e.ts};
        }
    char sql[300];
    snprintf(sql, sizeof sql, "SELECT card_id, amount::text, (extract(epoch FROM ts) * 1000)::bigint FROM %s", table);
    PGresult *r = PQexec(c, sql);
    CHECK_EQ(PQresultStatus(r), PGRES_TUPLES_OK);
    long long ng = PQntuples(r);
    ev_t *got = calloc((size_t)(ng ? ng : 1), sizeof *got);
    for (long long i = 0; i < ng; i++)
        got[i] = (ev_t){atoll(PQgetvalue(r, (int)i, 0)), strtod(PQgetvalue(r, (int)i, 1), NULL),
                        atoll(PQgetvalue(r, (int)i, 2))};
    PQclear(r);
    qsort(want, (size_t)nw, sizeof *want, cmp_ev);
    qsort(got, (size_t)ng, sizeof *got, cmp_ev);
    /* walk both sorted lists: rows only in the table are duplicates (or
     * strangers), rows only expected are gaps */
    long long i = 0, j = 0, dup = 0, gap = 0;
    while (i < nw || j < ng) {
        int d = i == nw ? 1 : j == ng ? -1 : cmp_ev(&want[i], &got[j]);
        if (d == 0) {
            i++;
            j++;
        } else if (d < 0) {
            gap++;
            i++;
        } else {
            dup++;
            j++;
        }
    }
    free(want);
    free(got);
    char prefix[100];
    snprintf(prefix, sizeof prefix, "sl:%s:", job);
    long long prepared = pgt_prepared(c, prefix);
    fprintf(stderr, "  %s: %lld rows, %lld expected: %lld duplicates, %lld gaps, %lld prepared left\n", table, ng, nw,
            dup, gap, prepared);
    CHECK_EQ(dup, 0);
    CHECK_EQ(gap, 0);
    CHECK_EQ(ng, nw);
    CHECK_EQ(prepared, 0);
}

/* ---- kills inside the two-phase commit ---- */

TEST(kill_in_each_2pc_window) {
    static const struct {
        const char *point;
        const char *restore_par;
    } cases[] = {
        {"sink.before-precommit:5", "--p=2"},
        {"sink.after-precommit:5", "--p=2"},
        {"checkpoint.completed-before-notify:3", "--p=3"}, /* resumed at another parallelism */
        {"sink.during-commit:3", "--p=2"},
        {"task.after-end-of-data:1", "--p=2"},     /* the input ended, the final checkpoint not taken */
        {"task.after-final-checkpoint:1", "--p=3"}, /* it committed, the job had not ended */
    };
    PGconn *c = pgt_connect();
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        /* long enough that the sink's fault points are passed before the
         * end of input (the last two cases kill after it) */
        const long long N = 120000;
        char table[64], job[64], ckpt[1024];
        snprintf(table, sizeof table, "eo_fault%zu", k);
        snprintf(job, sizeof job, "fault%zu", k);
        snprintf(ckpt, sizeof ckpt, "%s/%s-ckpt", sl_test_tmpdir(), job);
        CHECK(pgt_exec(c, "DROP TABLE IF EXISTS %s", table));
        child_fault = cases[k].point;
        pid_t pid = spawn(table, ckpt, N, false, job);
        int st;
        waitpid(pid, &st, 0);
        child_fault = NULL;
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        char prefix[100];
        snprintf(prefix, sizeof prefix, "sl:%s:", job);
        long long visible = pgt_scalar(c, "SELECT count(*) FROM %s", table);
        long long prepared = pgt_prepared(c, prefix);
        fprintf(stderr, "  killed at %s: %lld rows visible, %lld prepared transactions\n", cases[k].point, visible,
                prepared);
        if (!strncmp(cases[k].point, "sink.after-precommit", 20) ||
            !strncmp(cases[k].point, "checkpoint.completed", 20))
            CHECK(prepared >= 1); /* pre-committed, not committed: the restore decides */
        child_par = cases[k].restore_par;
        int kills = run_with_kills(table, ckpt, N, job, true, 0, 0, 1);
        child_par = "--p=2";
        CHECK_EQ(kills, 0);
        verify_table(c, table, N, job);
    }
    PQfinish(c);
}

TEST(kill9_random) {
    PGconn *c = pgt_connect();
    /* 5 s of generator time, more than the kills can consume (8 x 450 ms):
     * the last run ends on its own, no kill lands right after the end of
     * input, which no checkpoint covers (see sluice/postgres.h) */
    const long long N = 500000;
    char ckpt[1024];
    snprintf(ckpt, sizeof ckpt, "%s/random-ckpt", sl_test_tmpdir());
    CHECK(pgt_exec(c, "DROP TABLE IF EXISTS eo_random"));
    unsigned seed = getenv("SLUICE_PG_KILL_SEED") ? (unsigned)atoi(getenv("SLUICE_PG_KILL_SEED")) : (unsigned)time(NULL);
    int kills = getenv("SLUICE_PG_KILLS") ? atoi(getenv("SLUICE_PG_KILLS")) : 8;
    srand(seed);
    fprintf(stderr, "  seed %u, %d kills\n", seed, kills);
    int killed = run_with_kills("eo_random", ckpt, N, "random", false, kills, 150, 450);
    fprintf(stderr, "  killed %d times\n", killed);
    CHECK(killed >= 3); /* the job may finish before every planned kill */
    verify_table(c, "eo_random", N, "random");
    PQfinish(c);
}

/* ---- in process: visibility, connection loss ---- */

/* A sink wrapper that counts, per writer, the rows of each pre-committed
 * transaction, and publishes
 *   upper: rows of transactions whose commit has been called (raised
 *          before the inner commit runs: nothing else may be visible), and
 *   lower: rows of transactions whose commit returned (all visible). */
static atomic_llong vis_upper, vis_lower;

typedef struct vis_writer {
    void *inner;
    int64_t open_rows;
    int64_t ck[256], rows[256];
    int n;
} vis_writer_t;

static sl_sink_t vis_inner;

static int vis_open(void *ctx, int sub, int p, const sl_schema_t *s, void **w, char *e, size_t el) {
    vis_writer_t *v = calloc(1, sizeof *v);
    int rc = vis_inner.ops->open(vis_inner.ctx, sub, p, s, &v->inner, e, el);
    if (rc) {
        free(v);
        return rc;
    }
    *w = v;
    return 0;
}
static int vis_write(void *w, const sl_record_t *r, char *e, size_t el) {
    vis_writer_t *v = w;
    v->open_rows++;
    return vis_inner.ops->write(v->inner, r, e, el);
}
static int vis_pre_commit(void *w, int64_t id, char *e, size_t el) {
    vis_writer_t *v = w;
    int rc = vis_inner.ops->pre_commit(v->inner, id, e, el);
    if (!rc && v->open_rows && v->n < 256) {
        v->ck[v->n] = id;
        v->rows[v->n++] = v->open_rows;
        v->open_rows = 0;
    }
    return rc;
}
static int vis_commit_upto(vis_writer_t *v, int64_t id, bool finish, char *e, size_t el) {
    int64_t sum = finish ? v->open_rows : 0;
    for (int i = 0; i < v->n; i++)
        if (v->ck[i] <= id) sum += v->rows[i];
    atomic_fetch_add(&vis_upper, sum);
    int rc = finish ? vis_inner.ops->finish(v->inner, e, el) : vis_inner.ops->commit(v->inner, id, e, el);
    if (rc) return rc;
    atomic_fetch_add(&vis_lower, sum);
    int k = 0;
    for (int i = 0; i < v->n; i++)
        if (v->ck[i] > id) {
            v->ck[k] = v->ck[i];
            v->rows[k++] = v->rows[i];
        }
    v->n = k;
    if (finish) v->open_rows = 0;
    return 0;
}
static int vis_commit(void *w, int64_t id, char *e, size_t el) { return vis_commit_upto(w, id, false, e, el); }
static int vis_finish(void *w, char *e, size_t el) { return vis_commit_upto(w, INT64_MAX, true, e, el); }
static void vis_close(void *w) {
    vis_writer_t *v = w;
    vis_inner.ops->close(v->inner);
    free(v);
}
static void vis_destroy(void *ctx) { vis_inner.ops->destroy(vis_inner.ctx); }
static int vis_recover(void *ctx, int64_t id, char *e, size_t el) { return vis_inner.ops->recover(vis_inner.ctx, id, e, el); }
static int vis_snapshot(void *w, int64_t id, void (*put)(void *, const void *, size_t), void *pc) {
    return vis_inner.ops->snapshot(((vis_writer_t *)w)->inner, id, put, pc);
}
static const sl_sink_ops_t vis_ops = {.name = "visibility-probe",
                                      .open = vis_open,
                                      .write = vis_write,
                                      .finish = vis_finish,
                                      .close = vis_close,
                                      .destroy = vis_destroy,
                                      .pre_commit = vis_pre_commit,
                                      .commit = vis_commit,
                                      .recover = vis_recover,
                                      .snapshot = vis_snapshot};

static atomic_int watch_stop;
static atomic_int watch_violations, watch_observations, watch_midway;
static long long watch_n;

static void *watcher(void *arg) {
    PGconn *c = pgt_connect();
    const char *table = arg;
    while (!atomic_load(&watch_stop)) {
        long long lo = atomic_load(&vis_lower);
        long long q = pgt_scalar(c, "SELECT count(*) FROM %s", table);
        long long hi = atomic_load(&vis_upper);
        if (q < 0) continue; /* not created yet */
        if (q < lo || q > hi) {
            fprintf(stderr, "  visible %lld rows, committed %lld, commit called for %lld\n", q, lo, hi);
            atomic_fetch_add(&watch_violations, 1);
        }
        if (q > 0 && q < watch_n) atomic_fetch_add(&watch_midway, 1);
        atomic_fetch_add(&watch_observations, 1);
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    PQfinish(c);
    return NULL;
}

static int slow_kv(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    int64_t id = sl_row_i64(&in->row, 0);
    if (id % 500 == 0) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    sl_rw_set_i64(out, 0, id);
    sl_rw_set_i64(out, 1, id);
    return 0;
}

static void verify_kv(PGconn *c, const char *table, long long n, const char *job) {
    CHECK_EQ(pgt_scalar(c, "SELECT count(*) FROM %s", table), n);
    CHECK_EQ(pgt_scalar(c, "SELECT count(DISTINCT id) FROM %s", table), n);
    CHECK_EQ(pgt_scalar(c, "SELECT count(*) FROM %s WHERE id < 0 OR id >= %lld OR v <> id", table, n), 0);
    char prefix[100];
    snprintf(prefix, sizeof prefix, "sl:%s:", job);
    CHECK_EQ(pgt_prepared(c, prefix), 0);
}

TEST(nothing_visible_before_commit) {
    PGconn *c = pgt_connect();
    CHECK(pgt_exec(c, "DROP TABLE IF EXISTS eo_vis; CREATE TABLE eo_vis (id bigint PRIMARY KEY, v bigint)"));
    const long long N = 200000;
    sl_pg_sink_opts_t o = sl_pg_sink_defaults();
    o.conninfo = pgt_conninfo();
    o.table = "eo_vis";
    o.job_id = "visjob";
    o.batch_bytes = 16384;
    vis_inner = sl_pg_sink(&o);
    atomic_store(&vis_upper, 0);
    atomic_store(&vis_lower, 0);
    watch_n = N;
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 2);
    sl_env_enable_checkpointing(env, 30, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_stream_t *s = sl_from_source(env, counter_source(N, 2), sl_wm_none(), "numbers");
    s = sl_map(s, slow_kv, NULL, sl_schema_parse("id BIGINT NOT NULL, v BIGINT", NULL, 0));
    sl_sink_t probe = {&vis_ops, NULL};
    sl_sink_to(sl_rebalance(s), probe, "pg");
    pthread_t th;
    atomic_store(&watch_stop, 0);
    pthread_create(&th, NULL, watcher, "eo_vis");
    int rc = sl_env_execute(env, "visjob");
    atomic_store(&watch_stop, 1);
    pthread_join(th, NULL);
    CHECK_STR(sl_env_error(env), "");
    CHECK_EQ(rc, 0);
    fprintf(stderr, "  %lld checkpoints, %d observations (%d mid-run), %d violations\n",
            (long long)sl_env_checkpoints_completed(env), atomic_load(&watch_observations),
            atomic_load(&watch_midway), atomic_load(&watch_violations));
    CHECK(sl_env_checkpoints_completed(env) >= 5);
    CHECK(atomic_load(&watch_midway) >= 3); /* it saw the table between commits, not only before and after */
    CHECK_EQ(atomic_load(&watch_violations), 0);
    CHECK_EQ(atomic_load(&vis_lower), N);
    sl_env_destroy(env);
    verify_kv(c, "eo_vis", N, "visjob");
    PQfinish(c);
}

/* Terminates the job's sessions (matching `like`) now and then. */
static atomic_int killer_stop, killer_kills;
static const char *killer_like;
static int killer_max, killer_min_ms, killer_span_ms;

static void *killer(void *arg) {
    PGconn *c = pgt_connect();
    unsigned seed = 12345;
    while (!atomic_load(&killer_stop) && atomic_load(&killer_kills) < killer_max) {
        long ms = killer_min_ms + (long)(rand_r(&seed) % (unsigned)killer_span_ms);
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
        if (atomic_load(&killer_stop)) break;
        long long n = pgt_terminate(c, killer_like);
        if (n > 0) atomic_fetch_add(&killer_kills, (int)n);
    }
    PQfinish(c);
    return NULL;
}

static int run_kv_job(const char *table, const char *job, long long n, int max_retries, int restarts,
                      const char *ckdir, sl_env_t **envp) {
    sl_pg_sink_opts_t o = sl_pg_sink_defaults();
    o.conninfo = pgt_conninfo();
    o.table = table;
    o.job_id = job;
    o.create_table = true;
    o.key_columns = "id";
    o.batch_bytes = 16384;
    o.max_retries = max_retries;
    o.retry_backoff_ms = 20;
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 2);
    sl_env_enable_checkpointing(env, 30, SL_CHECKPOINT_EXACTLY_ONCE);
    if (ckdir) sl_env_set_checkpoint_dir(env, ckdir);
    sl_env_set_restart_fixed_delay(env, restarts, 50);
    sl_stream_t *s = sl_uid(sl_from_source(env, counter_source(n, 2), sl_wm_none(), "numbers"), "numbers");
    s = sl_uid(sl_map(s, slow_kv, NULL, sl_schema_parse("id BIGINT NOT NULL, v BIGINT", NULL, 0)), "kv");
    sl_uid(sl_sink_to(sl_rebalance(s), sl_pg_sink(&o), "pg"), "pg");
    *envp = env;
    return sl_env_execute(env, job);
}

/* Sessions terminated by the server while the job runs: the sink
 * reconnects and carries on (no restart allowed). */
TEST(connection_loss_retried_in_job) {
    PGconn *c = pgt_connect();
    CHECK(pgt_exec(c, "DROP TABLE IF EXISTS eo_conn"));
    const long long N = 150000;
    killer_like = "sluice:conn:%";
    killer_max = 8;
    killer_min_ms = 80;
    killer_span_ms = 200;
    atomic_store(&killer_stop, 0);
    atomic_store(&killer_kills, 0);
    pthread_t th;
    pthread_create(&th, NULL, killer, NULL);
    sl_env_t *env = NULL;
    int rc = run_kv_job("eo_conn", "conn", N, 5, 0, NULL, &env);
    atomic_store(&killer_stop, 1);
    pthread_join(th, NULL);
    fprintf(stderr, "  %d sessions terminated, %d restarts\n", atomic_load(&killer_kills), sl_env_restarts(env));
    CHECK_STR(sl_env_error(env), "");
    CHECK_EQ(rc, 0);
    CHECK(atomic_load(&killer_kills) >= 3);
    CHECK_EQ(sl_env_restarts(env), 0);
    sl_env_destroy(env);
    verify_kv(c, "eo_conn", N, "conn");
    PQfinish(c);
}

/* No reconnects allowed: a terminated session fails the task; the restart
 * strategy restarts the job from its latest checkpoint, the sink recovers
 * its prepared transactions, and the output is still exactly once. */
TEST(connection_loss_fails_then_recovers) {
    PGconn *c = pgt_connect();
    CHECK(pgt_exec(c, "DROP TABLE IF EXISTS eo_fail"));
    const long long N = 150000;
    char ck[1024];
    snprintf(ck, sizeof ck, "%s/connfail-ckpt", sl_test_tmpdir());
    killer_like = "sluice:connfail:%:data";
    killer_max = 2;
    killer_min_ms = 300;
    killer_span_ms = 200;
    atomic_store(&killer_stop, 0);
    atomic_store(&killer_kills, 0);
    pthread_t th;
    pthread_create(&th, NULL, killer, NULL);
    sl_env_t *env = NULL;
    int rc = run_kv_job("eo_fail", "connfail", N, 0, 5, ck, &env);
    atomic_store(&killer_stop, 1);
    pthread_join(th, NULL);
    fprintf(stderr, "  %d sessions terminated, %d restarts\n", atomic_load(&killer_kills), sl_env_restarts(env));
    CHECK_STR(sl_env_error(env), "");
    CHECK_EQ(rc, 0);
    CHECK(atomic_load(&killer_kills) >= 1);
    CHECK(sl_env_restarts(env) >= 1);
    sl_env_destroy(env);
    verify_kv(c, "eo_fail", N, "connfail");
    PQfinish(c);
}

int main(void) {
    /* what an earlier, failed run on the same server left prepared holds
     * locks on the tables the tests drop */
    PGconn *c = pgt_connect();
    static const char *jobs[] = {"fault0", "fault1", "fault2", "fault3", "random", "visjob", "conn", "connfail"};
    for (size_t i = 0; i < sizeof jobs / sizeof jobs[0]; i++) {
        char prefix[64];
        snprintf(prefix, sizeof prefix, "sl:%s:", jobs[i]);
        pgt_rollback_prepared(c, prefix);
    }
    PQfinish(c);
    RUN(kill_in_each_2pc_window);
    RUN(kill9_random);
    RUN(nothing_visible_before_commit);
    RUN(connection_loss_retried_in_job);
    RUN(connection_loss_fails_then_recovers);
    TEST_MAIN_END();
}
