/* test_kill9.c — S3/S4 in one process: a checkpointed job writing through
 * the exactly-once file sink is killed with SIGKILL at random moments and
 * restarted from its latest complete checkpoint, again and again; the
 * committed output must equal the generator's events exactly once — no
 * duplicate, no gap. */
#include <dirent.h>
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "common/common.h"
#include "connectors/connectors.h"
#include "formats/format.h"
#include "test.h"
#include "window_output.h"


static const char *child_fault; /* SLUICE_FAULT_AT for the next child */
static const char *child_par = "--p=2"; /* parallelism of the next child */

static pid_t spawn(const char *out, const char *ckpt, long long n, bool restore, bool window) {
    pid_t pid = fork();
    if (pid == 0) {
        if (child_fault)
            setenv("SLUICE_FAULT_AT", child_fault, 1);
        else
            unsetenv("SLUICE_FAULT_AT");
        char ns[32];
        snprintf(ns, sizeof ns, "%lld", n);
        if (!freopen("/dev/null", "w", stdout)) _exit(126);
        execl(SLUICE_EO_JOB, SLUICE_EO_JOB, out, ckpt, ns, restore ? "--restore" : "--fresh",
              window ? "--window" : "--plain", child_par, (char *)NULL);
        _exit(127);
    }
    return pid;
}

/* Runs the job, killing it `kills` times at random moments and restarting
 * it from its latest checkpoint, until it finishes.  Returns the kills. */
static bool resume_first; /* run_with_kills starts by restoring (after a crash) */

static int run_with_kills(const char *out, const char *ckpt, long long n, bool window, int kills, int max_ms) {
    int killed = 0;
    bool first = !resume_first;
    for (int round = 0; round < kills + 20; round++) {
        pid_t pid = spawn(out, ckpt, n, !first, window);
        first = false;
        if (killed < kills) {
            struct timespec ts = {0, (long)(20 + rand() % max_ms) * 1000000L};
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
        return -1;
    }
    return -1;
}

/* Every committed line of the part files in dir (hidden files counted). */
/* Keyed state survives kill -9: window results of a killed-and-restored
 * run equal the brute-force windows of the generator, each exactly once. */
static void windows_case(const char *name, int kills, const char *p_before, const char *p_after) {
    const long long N = 300000;
    char out[1024], ckpt[1024];
    snprintf(out, sizeof out, "%s/%s-out", sl_test_tmpdir(), name);
    snprintf(ckpt, sizeof ckpt, "%s/%s-ckpt", sl_test_tmpdir(), name);
    if (!p_after) {
        int killed = run_with_kills(out, ckpt, N, true, kills, 300);
        fprintf(stderr, "  %s: killed %d times\n", name, killed);
        CHECK(killed >= 1);
    } else { /* killed once at p_before, resumed at another parallelism */
        child_par = p_before;
        pid_t pid = spawn(out, ckpt, N, false, true);
        struct timespec ts = {0, (long)(250 + rand() % 300) * 1000000L};
        nanosleep(&ts, NULL);
        kill(pid, SIGKILL);
        int st;
        waitpid(pid, &st, 0);
        CHECK(WIFSIGNALED(st));
        child_par = p_after;
        resume_first = true;
        int k = run_with_kills(out, ckpt, N, true, 0, 1);
        child_par = "--p=2";
        resume_first = false;
        CHECK_EQ(k, 0);
        fprintf(stderr, "  %s: killed at parallelism %s, finished at %s\n", name, p_before + 4, p_after + 4);
    }
    CHECK_EQ(wo_check(out, N), 0); /* every (card, window) exactly once, as the brute force counts */
}

TEST(kill9_windows_exactly_once) {
    int kills = getenv("SLUICE_KILL9_KILLS") ? atoi(getenv("SLUICE_KILL9_KILLS")) : 8;
    windows_case("kill9w", kills, NULL, NULL);
}

/* Keyed state moves by key group: killed at one parallelism, restored at
 * another (2 -> 4, 4 -> 2, 2 -> 3, 2 -> 1); the results equal those of an
 * uninterrupted run (computed from the generator). */
TEST(kill9_windows_rescale) {
    windows_case("rescale24", 1, "--p=2", "--p=4");
    windows_case("rescale42", 1, "--p=4", "--p=2");
    windows_case("rescale3", 1, "--p=2", "--p=3");
    windows_case("rescale1", 1, "--p=2", "--p=1");
}

/* The committed output in `out` is the generator's N events exactly once. */
static void verify_plain(const char *out, long long N) {
    /* committed output vs the generator, line by line (as the sink encodes) */
    sl_datagen_opts_t g = sl_datagen_defaults();
    g.seed = 7;
    g.count = N;
    g.splits = 4;
    char **want = calloc((size_t)N, sizeof *want), **got = calloc((size_t)N + 1, sizeof *got);
    long long nw = 0, ng = 0;
    sl_schema_t *schema = sl_datagen_schema();
    sl_row_writer_t w;
    sl_rw_init(&w);
    sl_buf_t line = {0};
    for (int sp = 0; sp < 4; sp++)
        for (int64_t i = 0; i < sl_datagen_split_count(&g, sp); i++) {
            sl_datagen_event_t ev;
            sl_datagen_event(&g, sp, i, &ev);
            sl_rw_begin(&w, schema);
            sl_rw_set_i64(&w, 0, ev.card_id);
            sl_rw_set_f64(&w, 1, ev.amount);
            sl_rw_set_i64(&w, 2, ev.ts);
            sl_row_t r = sl_rw_row(&w);
            line.len = 0;
            sl_encode_row(SL_FMT_CSV, &r, &line);
            want[nw++] = strndup((const char *)line.p, line.len);
        }
    sl_buf_free(&line);
    sl_rw_free(&w);
    sl_schema_unref(schema);
    DIR *d = opendir(out);
    CHECK(d != NULL);
    struct dirent *e;
    int hidden = 0;
    char *buf = NULL;
    size_t cap = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') {
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) hidden++;
            continue;
        }
        char p[1400];
        snprintf(p, sizeof p, "%s/%s", out, e->d_name);
        FILE *f = fopen(p, "r");
        ssize_t l;
        while (f && (l = getline(&buf, &cap, f)) > 0 && ng <= N) {
            if (buf[l - 1] == '\n') buf[--l] = 0;
            got[ng++] = strdup(buf);
        }
        if (f) fclose(f);
    }
    free(buf);
    closedir(d);
    CHECK_EQ(hidden, 0);
    CHECK_EQ(ng, nw); /* no duplicate, no gap (in count) */
    qsort(want, (size_t)nw, sizeof *want, wo_cmp_str);
    qsort(got, (size_t)ng, sizeof *got, wo_cmp_str);
    for (long long i = 0; i < nw; i++) CHECK_STR(got[i], want[i]); /* ... and in content */
    for (long long i = 0; i < nw; i++) free(want[i]);
    for (long long i = 0; i < ng; i++) free(got[i]);
    free(want);
    free(got);
}

TEST(kill9_exactly_once) {
    const long long N = 400000;
    char out[1024], ckpt[1024];
    snprintf(out, sizeof out, "%s/kill9-out", sl_test_tmpdir());
    snprintf(ckpt, sizeof ckpt, "%s/kill9-ckpt", sl_test_tmpdir());
    unsigned seed = (unsigned)time(NULL);
    const char *se = getenv("SLUICE_KILL9_SEED");
    if (se) seed = (unsigned)atoi(se);
    int kills = getenv("SLUICE_KILL9_KILLS") ? atoi(getenv("SLUICE_KILL9_KILLS")) : 12;
    fprintf(stderr, "  seed %u, %d kills\n", seed, kills);
    srand(seed);
    int killed = run_with_kills(out, ckpt, N, false, kills, 230);
    fprintf(stderr, "  killed %d times\n", killed);
    CHECK(killed >= 1);
    verify_plain(out, N);
}

/* A kill inside each window of the two-phase commit, then recovery. */
TEST(kill9_in_each_2pc_window) {
    static const char *points[] = {"sink.before-precommit:3", "sink.after-precommit:3",
                                   "checkpoint.completed-before-notify:2", "sink.during-commit:2",
                                   /* after the end of the bounded input (FLIP-147): before the final
                                    * checkpoint, and after it committed but before the job ended */
                                   "task.after-end-of-data:1", "task.after-final-checkpoint:1"};
    for (size_t i = 0; i < sizeof points / sizeof points[0]; i++) {
        const long long N = 60000;
        char out[1024], ckpt[1024];
        snprintf(out, sizeof out, "%s/fault%zu-out", sl_test_tmpdir(), i);
        snprintf(ckpt, sizeof ckpt, "%s/fault%zu-ckpt", sl_test_tmpdir(), i);
        child_fault = points[i];
        pid_t pid = spawn(out, ckpt, N, false, false);
        int st;
        waitpid(pid, &st, 0);
        child_fault = NULL;
        fprintf(stderr, "  %s: %s\n", points[i],
                WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL ? "killed there" : "not reached");
        CHECK(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL);
        resume_first = true;
        int k = run_with_kills(out, ckpt, N, false, 0, 1); /* restore and finish */
        resume_first = false;
        CHECK_EQ(k, 0);
        verify_plain(out, N);
    }
}

/* A damaged state file of the latest checkpoint is reported by name at
 * restore — never half-restored — and the same restore from an older
 * retained checkpoint still works. */
TEST(corrupt_checkpoint_reported) {
    const long long N = 300000;
    char out[1024], ckpt[1024], job[1100];
    snprintf(out, sizeof out, "%s/corrupt-out", sl_test_tmpdir());
    snprintf(ckpt, sizeof ckpt, "%s/corrupt-ckpt", sl_test_tmpdir());
    snprintf(job, sizeof job, "%s/eo-kill", ckpt);
    pid_t pid = spawn(out, ckpt, N, false, true);
    /* kill it once two checkpoints completed (however slow the machine) */
    long latest = -1;
    struct dirent *e;
    DIR *d;
    for (int waited = 0; waited < 60000 && latest < 2; waited += 20) {
        struct timespec ts = {0, 20 * 1000000L};
        nanosleep(&ts, NULL);
        if (waitpid(pid, NULL, WNOHANG) == pid) break; /* finished too early: reported below */
        if (!(d = opendir(job))) continue;
        while ((e = readdir(d))) {
            long n;
            char meta[2400];
            if (sscanf(e->d_name, "chk-%ld", &n) != 1) continue;
            snprintf(meta, sizeof meta, "%s/%s/_metadata", job, e->d_name);
            if (access(meta, F_OK) == 0 && n > latest) latest = n;
        }
        closedir(d);
    }
    kill(pid, SIGKILL);
    int st;
    waitpid(pid, &st, 0);
    /* the latest complete checkpoint (now) and one of its keyed state files */
    latest = -1;
    d = opendir(job);
    CHECK(d != NULL);
    while ((e = readdir(d))) {
        long n;
        char meta[2400];
        if (sscanf(e->d_name, "chk-%ld", &n) != 1) continue;
        snprintf(meta, sizeof meta, "%s/%s/_metadata", job, e->d_name);
        if (access(meta, F_OK) == 0 && n > latest) latest = n;
    }
    closedir(d);
    CHECK(latest > 0);
    char chk[1300], victim[2600] = "";
    snprintf(chk, sizeof chk, "%s/chk-%ld", job, latest);
    d = opendir(chk);
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "keyed-", 6) && !victim[0]) snprintf(victim, sizeof victim, "%s/%s", chk, e->d_name);
    closedir(d);
    CHECK(victim[0]);
    FILE *f = fopen(victim, "r+b");
    CHECK(f != NULL);
    fseek(f, 20, SEEK_SET);
    int c = fgetc(f);
    fseek(f, 20, SEEK_SET);
    fputc(c ^ 0x40, f);
    fclose(f);
    /* restore: fails, naming the file */
    char log[1200];
    snprintf(log, sizeof log, "%s/corrupt.log", sl_test_tmpdir());
    pid = fork();
    if (pid == 0) {
        if (!freopen(log, "w", stderr) || !freopen("/dev/null", "w", stdout)) _exit(126);
        char ns[32];
        snprintf(ns, sizeof ns, "%lld", N);
        execl(SLUICE_EO_JOB, SLUICE_EO_JOB, out, ckpt, ns, "--restore", "--window", "--p=2", (char *)NULL);
        _exit(127);
    }
    waitpid(pid, &st, 0);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 1);
    char text[4096] = "";
    f = fopen(log, "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    text[n] = 0;
    if (f) fclose(f);
    const char *base = strrchr(victim, '/') + 1;
    CHECK_CONTAINS(text, base);
    const char *line = strstr(text, "eo_job: restore");
    line = line && strstr(line + 1, "eo_job:") ? strstr(line + 1, "eo_job:") : text;
    fprintf(stderr, "  reported: %.*s\n", (int)strcspn(line, "\n"), line);
}

int main(void) {
    RUN(kill9_exactly_once);
    RUN(kill9_in_each_2pc_window);
    RUN(kill9_windows_exactly_once);
    RUN(kill9_windows_rescale);
    RUN(corrupt_checkpoint_reported);
    TEST_MAIN_END();
}
