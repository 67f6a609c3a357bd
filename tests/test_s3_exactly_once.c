/*
 * test_s3_exactly_once.c — exactly-once with checkpoints in S3 (S3Proxy,
 * the ctest fixture "s3"): a windowed job (generator -> key_by(card) ->
 * 1-minute tumbling count and sum -> exactly-once file sink) runs in a
 * child process with execution.checkpointing.dir = s3://bucket/...; the
 * parent waits until a checkpoint of this run is complete in the bucket,
 * then kills the child with SIGKILL at a random moment and starts it again
 * from the latest complete checkpoint in S3 — several times, and once at
 * another parallelism.  The committed output must equal the brute-force
 * windows of the generator's events (tests/window_output.h) exactly: no
 * duplicate, no gap.  Run with the heap backend and with RocksDB's
 * incremental checkpoints (its SST files uploaded to shared/ and
 * downloaded again on restore).
 */
#include <signal.h>
#include <sys/wait.h>
#include <time.h>

#include "checkpoint/metadata.h"
#include "checkpoint/s3_client.h"
#include "checkpoint/storage.h"
#include "common/common.h"
#include "test.h"
#include "test_s3_util.h"
#include "tools/card_windows.h"
#include "window_output.h"

#define JOB "eo-s3"

/* The latest complete checkpoint id of the job in ckpt (0: none, -1: error). */
static int64_t latest(const char *ckpt) {
    sl_ckpt_storage_t *st;
    char e[1024];
    if (sl_ckpt_storage_open(ckpt, JOB, &st, e, sizeof e) < 0) {
        fprintf(stderr, "  %s\n", e);
        return -1;
    }
    int64_t id = 0;
    int rc = sl_ckpt_storage_latest_complete_id(st, &id, e, sizeof e);
    st->ops->destroy(st);
    return rc == 0 ? id : rc == SL_ENOTFOUND ? 0 : -1;
}

/* RocksDB's files in the job's shared/ (-1 on error). */
static int shared_sst_files(const char *ckpt) {
    sl_ckpt_storage_t *st;
    char e[1024];
    if (sl_ckpt_storage_open(ckpt, JOB, &st, e, sizeof e) < 0) return -1;
    char **names;
    int nn, sst = 0;
    if (st->ops->list_files(st, SL_CKPT_SCOPE_SHARED, &names, &nn, e, sizeof e) < 0) sst = -1;
    for (int i = 0; sst >= 0 && i < nn; i++) {
        sst += strstr(names[i], ".sst") != NULL;
        sl_free(names[i]);
    }
    if (sst >= 0) sl_free(names);
    st->ops->destroy(st);
    return sst;
}

static int max_sst_seen; /* most SST files in shared/ at a kill */

/* The job, in the child. */
static long long child_rate = 80000; /* events per second of the next child */
static int64_t child_ckpt_timeout_ms = 60000; /* execution.checkpointing.timeout of the next child */

static int child_main(const char *out, const char *ckpt, long long n, bool rocksdb, int par) {
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, par);
    sl_env_enable_checkpointing(env, 40, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, ckpt);
    sl_env_set_checkpoints_retained(env, 2);
    sl_env_set_checkpoint_retention(env, SL_CHECKPOINTS_RETAIN_ON_CANCELLATION);
    /* an S3 outage declines checkpoints; the job must outlive any number of them */
    sl_env_set_checkpoint_options(env, child_ckpt_timeout_ms, 0, 1, 1000000);
    if (rocksdb) {
        sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);
        sl_env_set_incremental_checkpoints(env, true);
    }
    int64_t id = latest(ckpt);
    if (id < 0) return 3;
    if (id > 0) {
        char job[1200];
        snprintf(job, sizeof job, "%s/%s", ckpt, JOB);
        if (sl_env_restore_from(env, job) != 0) {
            fprintf(stderr, "child: %s\n", sl_env_error(env));
            return 4;
        }
    }
    sl_datagen_opts_t g = cw_generator(n, child_rate);
    sl_stream_t *s = sl_uid(sl_from_source(env, sl_datagen_source(g), sl_wm_bounded("ts", 5000), "gen"), "gen");
    s = sl_uid(cw_windows(s), "windows");
    sl_uid(sl_sink_to(sl_rebalance(s), sl_exactly_once_file_sink(out, SL_FMT_CSV), "files"), "files");
    int rc = sl_env_execute(env, JOB);
    if (rc != 0) fprintf(stderr, "child: %s\n", sl_env_error(env));
    sl_env_destroy(env);
    return rc == 0 ? 0 : 1;
}

static pid_t spawn(const char *out, const char *ckpt, long long n, bool rocksdb, int par) {
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) _exit(child_main(out, ckpt, n, rocksdb, par));
    return pid;
}

/* Runs until the job finishes; the first `kills` runs are killed with
 * SIGKILL at a random moment after a checkpoint of theirs completed in S3.
 * pars[i]: the parallelism of run i (the last one repeats).  Returns the
 * kills done, or -1. */
static int run_with_kills(const char *out, const char *ckpt, long long n, bool rocksdb, int kills, const int *pars,
                          int npars) {
    int killed = 0;
    for (int round = 0; round < kills + 10; round++) {
        int par = pars[round < npars ? round : npars - 1];
        int64_t before = latest(ckpt);
        if (before < 0) return -1;
        pid_t pid = spawn(out, ckpt, n, rocksdb, par);
        int st;
        if (killed < kills) {
            /* wait (bounded) for a checkpoint of this run, then a little more */
            for (int i = 0; i < 3000; i++) {
                if (waitpid(pid, &st, WNOHANG) == pid) goto reaped;
                int64_t now = latest(ckpt);
                if (now > before) break;
                usleep(10000);
            }
            usleep((useconds_t)(rand() % 150) * 1000);
            kill(pid, SIGKILL);
            if (rocksdb) max_sst_seen = SL_MAX(max_sst_seen, shared_sst_files(ckpt));
        }
        waitpid(pid, &st, 0);
    reaped:
        if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) {
            killed++;
            continue;
        }
        if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return killed;
        fprintf(stderr, "  run %d ended with status %d\n", round, st);
        return -1;
    }
    return -1;
}

static void exactly_once_case(const char *name, bool rocksdb, int kills, const int *pars, int npars) {
    const long long N = 200000;
    char out[1024], ckpt[1024];
    snprintf(out, sizeof out, "%s/%s-out", sl_test_tmpdir(), name);
    snprintf(ckpt, sizeof ckpt, "s3://%s/%s/%s", bucket, run_prefix, name);
    max_sst_seen = 0;
    int killed = run_with_kills(out, ckpt, N, rocksdb, kills, pars, npars);
    fprintf(stderr, "  %s: killed %d times (checkpoints in %s)\n", name, killed, ckpt);
    /* a run restored near the end may finish before its kill: at least one kill (a restore from S3) */
    CHECK(killed >= 1);
    CHECK_EQ(wo_check(out, N), 0); /* every (card, window) exactly once, as the brute force counts */
    if (rocksdb) { /* the incremental checkpoints really put RocksDB's files into shared/ */
        fprintf(stderr, "  %s: up to %d SST files in shared/ at a kill\n", name, max_sst_seen);
        CHECK(max_sst_seen > 0);
    }
}

TEST(s3_kill9_heap) {
    const int pars[] = {2};
    exactly_once_case("heap", false, 4, pars, 1);
}

TEST(s3_kill9_heap_rescale) { /* killed at parallelism 2, restored at 3 */
    const int pars[] = {2, 3};
    exactly_once_case("heap-rescale", false, 1, pars, 2);
}

TEST(s3_kill9_rocksdb_incremental) {
    const int pars[] = {2};
    exactly_once_case("rocksdb", true, 3, pars, 1);
}

TEST(s3_kill9_rocksdb_incremental_rescale) { /* killed at parallelism 3, restored at 2 */
    const int pars[] = {3, 2};
    exactly_once_case("rocksdb-rescale", true, 1, pars, 2);
}

/* S3 fails every request for 2 s in the middle of the run (a fault proxy
 * between the job and S3Proxy answers 503 SlowDown): the uploads give up,
 * the checkpoints are declined or aborted, the job keeps running, later
 * checkpoints complete, and the output is exact. */
static void outage_case(const char *name, int kind, int64_t ckpt_timeout_ms) {
    const long long N = 200000;
    proxy_t *px; /* in a process of its own: this one forks the job */
    pid_t proxy_pid;
    CHECK(proxy_start_process(&px, &proxy_pid));
    char out[1024], ckpt[1024], via[64];
    snprintf(out, sizeof out, "%s/%s-out", sl_test_tmpdir(), name);
    snprintf(ckpt, sizeof ckpt, "s3://%s/%s/%s", bucket, run_prefix, name);
    snprintf(via, sizeof via, "http://127.0.0.1:%d", px->port);
    atomic_store(&px->fault_kind, kind);
    child_ckpt_timeout_ms = ckpt_timeout_ms;
    setenv("AWS_ENDPOINT_URL", via, 1); /* the child's S3 goes through the proxy */
    child_rate = 40000;                 /* about 5 s of input */
    pid_t pid = spawn(out, ckpt, N, false, 2);
    child_rate = 80000;
    child_ckpt_timeout_ms = 60000;
    setenv("AWS_ENDPOINT_URL", endpoint, 1); /* this process looks at S3 directly */
    int64_t first = 0;
    int st = 0;
    bool reaped = false;
    for (int i = 0; i < 6000 && first <= 0 && !reaped; i++) { /* up to a minute */
        first = latest(ckpt);
        reaped = waitpid(pid, &st, WNOHANG) == pid;
        usleep(10000);
    }
    if (first <= 0) {
        if (!reaped) kill(pid, SIGKILL);
        proxy_stop_process(px, proxy_pid);
        fprintf(stderr, "  no checkpoint completed before the outage (child %s, status %d)\n",
                reaped ? "ended" : "killed", st);
    }
    CHECK(first > 0);
    atomic_store(&px->faults_left, -1); /* the outage */
    usleep(2000000);
    int64_t during = latest(ckpt);
    atomic_store(&px->faults_left, 0);
    if (!reaped) waitpid(pid, &st, 0);
    int faulted = atomic_load(&px->faulted);
    proxy_stop_process(px, proxy_pid);
    int64_t after = latest(ckpt);
    fprintf(stderr, "  %s: %d requests failed; latest checkpoint %lld before, %lld at its end, %lld after the job\n",
            name, faulted, (long long)first, (long long)during, (long long)after);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0); /* the job did not fail */
    CHECK(faulted > 0);
    CHECK(after > during); /* checkpoints completed again after the outage */
    CHECK_EQ(wo_check(out, N), 0);
}

TEST(s3_outage_declines_checkpoints_not_the_job) { outage_case("outage", F_503, 60000); }

/* A slow S3 (the proxy holds every request 3 s without an answer, then
 * drops it) while the checkpoint timeout is 1 s: the checkpoints that were
 * running time out and are aborted, the job keeps running, later ones
 * complete, and the output is exact. */
TEST(s3_slow_server_past_the_checkpoint_timeout) { outage_case("slow", F_STALL, 1000); }

/* A job whose checkpoints go to S3 without credentials fails when it
 * starts, naming what is missing (in this process: it is the last test). */
TEST(s3_missing_credentials_reported_at_start) {
    char ckpt[1024];
    snprintf(ckpt, sizeof ckpt, "s3://%s/%s/nocreds", bucket, run_prefix);
    char *ak = sl_strdup(getenv("AWS_ACCESS_KEY_ID"));
    unsetenv("AWS_ACCESS_KEY_ID");
    sl_env_t *env = sl_env_new();
    sl_env_enable_checkpointing(env, 40, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, ckpt);
    sl_stream_t *s = sl_from_source(env, sl_datagen_source(cw_generator(1000, 0)), sl_wm_none(), "gen");
    char out[1024];
    snprintf(out, sizeof out, "%s/nocreds-out", sl_test_tmpdir());
    sl_sink_to(s, sl_exactly_once_file_sink(out, SL_FMT_CSV), "files");
    int rc = sl_env_execute(env, JOB);
    char msg[2048];
    snprintf(msg, sizeof msg, "%s", sl_env_error(env) ? sl_env_error(env) : "");
    sl_env_destroy(env);
    setenv("AWS_ACCESS_KEY_ID", ak, 1);
    sl_free(ak);
    CHECK(rc != 0);
    CHECK_CONTAINS(msg, "AWS_ACCESS_KEY_ID");
    CHECK_CONTAINS(msg, ckpt);
}

/* A state file of the latest complete checkpoint, corrupted (one byte
 * flipped) and then deleted in S3: each time the restore fails, naming the
 * object (s3://bucket/key) and what is wrong with it, and nothing is
 * committed meanwhile; put back as it was, the job restores from it and
 * the output is exact. */
static int child_status(pid_t pid) {
    int st;
    waitpid(pid, &st, 0);
    return WIFSIGNALED(st) ? -WTERMSIG(st) : WEXITSTATUS(st);
}

TEST(s3_corrupt_or_deleted_object_named_by_key) {
    const long long N = 200000;
    char out[1024], ckpt[1024], e[1024];
    snprintf(out, sizeof out, "%s/corrupt-out", sl_test_tmpdir());
    snprintf(ckpt, sizeof ckpt, "s3://%s/%s/corrupt", bucket, run_prefix);
    /* a first run, killed once a checkpoint of it completed in S3 */
    child_rate = 40000;
    pid_t pid = spawn(out, ckpt, N, false, 2);
    for (int i = 0; i < 3000 && latest(ckpt) <= 0; i++) usleep(10000);
    kill(pid, SIGKILL);
    CHECK_EQ(child_status(pid), -SIGKILL);
    child_rate = 80000;
    int64_t id = latest(ckpt);
    CHECK(id > 0);
    /* a keyed state file of the window operator in it */
    sl_ckpt_storage_t *st = NULL;
    CHECK_EQ(sl_ckpt_storage_open(ckpt, JOB, &st, e, sizeof e), 0);
    if (!st) return;
    sl_ckpt_metadata_t *md = NULL;
    CHECK_EQ(sl_ckpt_storage_load_latest(st, &md, e, sizeof e), 0);
    char uri[2048] = "";
    for (int o = 0; md && o < md->noperators && !uri[0]; o++)
        for (int t = 0; t < md->operators[o].parallelism && !uri[0]; t++)
            for (int h = 0; h < md->operators[o].subtasks[t].nhandles && !uri[0]; h++) {
                const sl_ckpt_state_handle_t *hd = &md->operators[o].subtasks[t].handles[h];
                if (!strcmp(md->operators[o].uid, "windows") && hd->size > 64)
                    st->ops->location(st, md->checkpoint_id, (sl_ckpt_scope_t)hd->scope, hd->path, uri, sizeof uri);
            }
    sl_ckpt_metadata_free(md);
    st->ops->destroy(st);
    fprintf(stderr, "  state file: %s\n", uri);
    CHECK(uri[0]);
    if (!uri[0]) return;
    char bkt[256], key[1800];
    CHECK_EQ(sl_s3_parse_uri(uri, bkt, sizeof bkt, key, sizeof key, e, sizeof e), 0);
    sl_s3_config_t cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.path_style = -1;
    CHECK_EQ(sl_s3_config_resolve(&cfg, e, sizeof e), 0);
    sl_s3_client_t *cl = NULL;
    CHECK_EQ(sl_s3_client_new(&cfg, bkt, &cl, e, sizeof e), 0);
    if (!cl) return;
    sl_buf_t orig = {0};
    CHECK_EQ(sl_s3_get(cl, key, &orig, e, sizeof e), 0);
    CHECK(orig.len > 64);
    long long committed_before = 0;
    {
        char cmd[1300];
        snprintf(cmd, sizeof cmd, "cat '%s'/part-* 2>/dev/null | wc -l", out);
        FILE *f = popen(cmd, "r");
        if (f && fscanf(f, "%lld", &committed_before) != 1) committed_before = -1;
        if (f) pclose(f);
    }
    for (int round = 0; round < 2; round++) {
        if (round == 0) { /* one byte flipped in the middle */
            uint8_t *bad = sl_malloc(orig.len);
            memcpy(bad, orig.p, orig.len);
            bad[orig.len / 2] ^= 0x5a;
            CHECK_EQ(sl_s3_put(cl, key, bad, orig.len, e, sizeof e), 0);
            sl_free(bad);
        } else {
            CHECK_EQ(sl_s3_delete(cl, key, e, sizeof e), 0);
        }
        sl_test_capture_stderr();
        int rc = child_status(spawn(out, ckpt, N, false, 2));
        const char *log = sl_test_captured();
        fprintf(stderr, "  %s: restore ended with %d\n", round ? "deleted" : "corrupt", rc);
        CHECK(rc != 0 && rc != -SIGKILL);
        CHECK_CONTAINS(log, key);
        if (round == 0) CHECK(strstr(log, "corrupt") || strstr(log, "checksum"));
        else CHECK(strstr(log, "not found") || strstr(log, "NoSuchKey") || strstr(log, "404") ||
                   strstr(log, "no such") || strstr(log, "missing"));
        CHECK_EQ(latest(ckpt), id); /* the failed restores completed no checkpoint */
    }
    long long committed_after = 0;
    {
        char cmd[1300];
        snprintf(cmd, sizeof cmd, "cat '%s'/part-* 2>/dev/null | wc -l", out);
        FILE *f = popen(cmd, "r");
        if (f && fscanf(f, "%lld", &committed_after) != 1) committed_after = -2;
        if (f) pclose(f);
    }
    CHECK_EQ(committed_after, committed_before); /* nothing committed by the failed restores */
    /* the object back as it was: the job restores from it and ends exactly once */
    CHECK_EQ(sl_s3_put(cl, key, orig.p, orig.len, e, sizeof e), 0);
    sl_buf_free(&orig);
    sl_s3_client_free(cl);
    const int pars[] = {2};
    CHECK_EQ(run_with_kills(out, ckpt, N, false, 0, pars, 1), 0);
    CHECK_EQ(wo_check(out, N), 0);
}

int main(void) {
    if (!setup_server("eo")) return 1;
    unsigned seed = (unsigned)time(NULL);
    if (getenv("SLUICE_KILL9_SEED")) seed = (unsigned)atoi(getenv("SLUICE_KILL9_SEED"));
    fprintf(stderr, "seed %u\n", seed);
    srand(seed);
    RUN(s3_kill9_heap);
    RUN(s3_kill9_heap_rescale);
    RUN(s3_kill9_rocksdb_incremental);
    RUN(s3_kill9_rocksdb_incremental_rescale);
    RUN(s3_outage_declines_checkpoints_not_the_job);
    RUN(s3_slow_server_past_the_checkpoint_timeout);
    RUN(s3_corrupt_or_deleted_object_named_by_key);
    RUN(s3_missing_credentials_reported_at_start); /* last: it starts threads in this process */
    TEST_MAIN_END();
}
