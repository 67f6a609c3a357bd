/* test_kafka_kill.c — exactly-once from Kafka to Kafka across SIGKILL: the
 * job (tests/tools/kafka_job.c) is killed inside each window of the
 * two-phase commit — before pre-commit, after pre-commit, between the
 * completion of a checkpoint and its commit (the window librdkafka's
 * init_transactions makes hard), while committing — and at random moments,
 * then restored from its latest checkpoint (once at another parallelism).
 * A read_committed consumer must then see every input record exactly once. */
#include <signal.h>
#include <sys/wait.h>

#include "sluice/kafka.h"
#include "test.h"
#include "test_kafka_util.h"

static const int64_t N = 40000;
static const char *input;

static pid_t spawn(const char *out, const char *ckpt, const char *prefix, bool restore, const char *fault,
                   const char *par) {
    pid_t pid = fork();
    if (pid == 0) {
        if (fault)
            setenv("SLUICE_FAULT_AT", fault, 1);
        else
            unsetenv("SLUICE_FAULT_AT");
        if (!freopen("/dev/null", "w", stdout)) _exit(126);
        execl(SLUICE_KAFKA_JOB, SLUICE_KAFKA_JOB, kt_bootstrap(), input, out, ckpt, prefix,
              restore ? "--restore" : "--fresh", par, "--interval=60", "--throttle=10", (char *)NULL);
        _exit(127);
    }
    return pid;
}

static int wait_for(pid_t pid) {
    int st;
    int64_t t0 = sl_mono_ns();
    waitpid(pid, &st, 0);
    if (getenv("SLUICE_KAFKA_KILL_VERBOSE"))
        fprintf(stderr, "    run took %lld ms\n", (long long)((sl_mono_ns() - t0) / 1000000));
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) return -9;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* ids 0..N-1 each exactly once in the topic, read_committed. */
static bool verify(const char *out) {
    kt_recs_t rs = {0};
    if (kt_read_all(out, true, 60000, &rs) != 0) return false;
    char *seen = calloc((size_t)N, 1);
    int64_t dup = 0, bad = 0, missing = 0;
    for (int64_t i = 0; i < rs.n; i++) {
        long long id, ts;
        if (sscanf(rs.r[i].value, "{\"id\": %lld, \"ts\": %lld}", &id, &ts) != 2 || id < 0 || id >= N) bad++;
        else if (seen[id]++) dup++;
    }
    int64_t lo[4] = {-1, -1, -1, -1}, hi[4] = {0}, per[4] = {0};
    for (int64_t i = 0; i < N; i++)
        if (!seen[i]) {
            missing++;
            per[i % 4]++;
            if (lo[i % 4] < 0) lo[i % 4] = i;
            hi[i % 4] = i;
        }
    for (int k = 0; k < 4; k++)
        if (per[k])
            fprintf(stderr, "    input partition %d: %lld missing, ids %lld..%lld\n", k, (long long)per[k],
                    (long long)lo[k], (long long)hi[k]);
    fprintf(stderr, "    read_committed: %lld records, %lld duplicates, %lld missing, %lld malformed\n", (long long)rs.n,
            (long long)dup, (long long)missing, (long long)bad);
    free(seen);
    kt_recs_free(&rs);
    return !dup && !bad && !missing;
}

typedef struct scenario {
    const char *name;
    const char *fault; /* SLUICE_FAULT_AT of the first run */
    const char *par_after;
} scenario_t;

static void run_scenario(const scenario_t *sc) {
    char out[256], ckpt[1024], prefix[256];
    snprintf(out, sizeof out, "%s", kt_name(sc->name));
    snprintf(prefix, sizeof prefix, "%s", kt_name("kill"));
    snprintf(ckpt, sizeof ckpt, "%s/%s-ckpt", sl_test_tmpdir(), out);
    CHECK_EQ(kt_create_topic(out, 3), 0);
    int st = wait_for(spawn(out, ckpt, prefix, false, sc->fault, "--p=2"));
    fprintf(stderr, "  %s: %s\n", sc->name, st == -9 ? "killed there" : "not reached");
    CHECK_EQ(st, -9);
    st = wait_for(spawn(out, ckpt, prefix, true, NULL, sc->par_after ? sc->par_after : "--p=2"));
    CHECK_EQ(st, 0);
    CHECK(verify(out));
}

TEST(kill_in_each_2pc_window) {
    static const scenario_t sc[] = {
        {"k-between-complete-and-commit", "checkpoint.completed-before-notify:3", NULL},
        {"k-before-precommit", "sink.before-precommit:5", NULL},
        {"k-after-precommit", "sink.after-precommit:5", NULL},
        {"k-during-commit", "sink.during-commit:3", NULL},
        {"k-rescale-2-to-3", "checkpoint.completed-before-notify:4", "--p=3"},
        {"k-after-end-of-data", "task.after-end-of-data:1", NULL},
        {"k-after-final-checkpoint", "task.after-final-checkpoint:1", NULL},
    };
    const char *only = getenv("SLUICE_KAFKA_KILL_ONLY");
    for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++) {
        if (only && !strstr(sc[i].name, only)) continue;
        int before = sl_test_failures;
        run_scenario(&sc[i]);
        if (sl_test_failures != before) return;
    }
}

/* Killed at random moments, restored each time, until it finishes. */
TEST(random_kills) {
    char out[256], ckpt[1024], prefix[256];
    snprintf(out, sizeof out, "%s", kt_name("k-random"));
    snprintf(prefix, sizeof prefix, "%s", kt_name("kill"));
    snprintf(ckpt, sizeof ckpt, "%s/%s-ckpt", sl_test_tmpdir(), out);
    CHECK_EQ(kt_create_topic(out, 3), 0);
    unsigned seed = getenv("SLUICE_KILL9_SEED") ? (unsigned)atoi(getenv("SLUICE_KILL9_SEED")) : (unsigned)time(NULL);
    int kills = getenv("SLUICE_KILL9_KILLS") ? atoi(getenv("SLUICE_KILL9_KILLS")) : 6;
    srand(seed);
    int killed = 0, st = 0;
    for (int round = 0; round < kills + 10; round++) {
        pid_t pid = spawn(out, ckpt, prefix, round > 0, NULL, "--p=2");
        if (killed < kills) {
            kt_sleep_ms(300 + rand() % 1200);
            kill(pid, SIGKILL);
        }
        st = wait_for(pid);
        if (st == -9) {
            killed++;
            continue;
        }
        break;
    }
    fprintf(stderr, "  seed %u: killed %d times, then finished (%d)\n", seed, killed, st);
    CHECK_EQ(st, 0);
    CHECK(killed >= 1);
    CHECK(verify(out));
}

int main(void) {
    kt_bootstrap();
    input = kt_name("kill-in");
    if (kt_create_topic(input, 4) != 0) return 1;
    rd_kafka_t *p = kt_producer();
    for (int64_t i = 0; i < N; i++) {
        char v[96];
        int l = snprintf(v, sizeof v, "{\"id\": %lld, \"ts\": %lld}", (long long)i, (long long)(1000000 + i));
        if (kt_send(p, input, (int)(i % 4), NULL, v, (size_t)l, 1000000 + i)) return 1;
    }
    if (kt_flush(p)) return 1;
    rd_kafka_destroy(p);
    kt_recs_t in = {0}; /* the input is complete before anything runs */
    if (kt_read_all(input, true, 60000, &in) != 0 || in.n != N) {
        fprintf(stderr, "input topic %s holds %lld records, not %lld\n", input, (long long)in.n, (long long)N);
        return 1;
    }
    kt_recs_free(&in);
    RUN(kill_in_each_2pc_window);
    RUN(random_kills);
    TEST_MAIN_END();
}
