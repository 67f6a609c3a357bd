/*
 * test_cluster.c — sluice as a cluster of real processes on loopback: one
 * `sluice jobmanager`, several `sluice taskmanager`s, jobs submitted with
 * `sluice run` over the REST API.  The job (tests/tools/cluster_job.c) is
 * the windowed S1 shape into the exactly-once file sink; its committed
 * output is compared with the brute-force windows (window_output.h).
 *
 *   - seeds_placement: source, window and sinks in three slot sharing
 *     groups on three TaskManagers (each TaskManager's log says which one
 *     it runs), records crossing processes through the data plane;
 *   - kill9_failover: kill -9 of a random TaskManager at random moments,
 *     a replacement started each time (SLUICE_CLUSTER_KILLS, default 3);
 *   - heartbeat_timeout: a TaskManager stopped with SIGSTOP is declared
 *     lost within heartbeat.timeout (10 s, interval 2 s: sluice's defaults
 *     and the seeds') plus one interval (plus scheduling slack), and the
 *     job recovers on the others;
 *   - rescale_2_to_3: a checkpoint taken at parallelism 2 on two
 *     TaskManagers, the whole cluster killed, restored at 3 on three;
 *   - too_few_slots: the job waits slot.request.timeout, then fails saying
 *     how many slots it needed and had;
 *   - wrong_secret / plan_mismatch: a TaskManager with another secret is
 *     refused; one whose build of the job differs refuses the deployment;
 *   - bad_control_frames: garbage, a newer version and a truncated message
 *     on the JobManager's RPC port, each refused by name;
 *   - builtin_fraud_by_name: the S1 job built into `sluice`, run by name on
 *     two TaskManagers, gives the embedded run's windows;
 *   - local_target: `sluice run -t local` runs the job file in the calling
 *     process (no JobManager anywhere) with the brute-force windows, and
 *     the built-in "nexmark" job by name, locally and on a TaskManager;
 *   - network_namespace_link_cut: a TaskManager behind a veth pair in its
 *     own network namespace, its link cut and restored;
 *   - artifact_download: TaskManagers that cannot see the JobManager's
 *     files download the job's artifact over RPC;
 *   - tls_mutual_auth: security.ssl.internal.* on every process (and the
 *     secret inside TLS): a job whose channels cross two TaskManagers gives
 *     exact output; the control connections, the artifact downloads and
 *     the data plane are all TLS; a TaskManager with a certificate of
 *     another CA, a plain one, and one with a wrong keystore password are
 *     refused, each by name.
 */
#include <pthread.h>

#include "cluster_util.h"
#include "protocol/artifact.h"
#include "protocol/messages.h"
#include "protocol/rpc.h"
#include "window_output.h"

/* The cluster test job (tests/tools/cluster_job.c). */
static void cl_submit_with(cluster_t *c, const char *opts, const char *args, char *id, size_t cap) {
    cl_submit_job(c, SLUICE_CLUSTER_JOB, opts, args, id, cap);
}
static void cl_submit(cluster_t *c, const char *args, char *id, size_t cap) { cl_submit_with(c, "", args, id, cap); }

/* ---- the tests ---- */

/* The test job on the cluster's two one-slot TaskManagers: both run a part
 * (the keyed exchange crosses them), each downloaded the artifact once,
 * and the committed windows are exact. */
static void run_on_two_downloading(cluster_t *c) {
    const long long N = 100000;
    char args[3000], id[64], st[32];
    snprintf(args, sizeof args, "%s/out %s/ck %lld --rate=200000", c->dir, c->dir, N);
    cl_submit(c, args, id, sizeof id);
    CHECK(id[0]);
    bool ok = cl_wait_state(c, id, "FINISHED", 60000, st, sizeof st);
    if (!ok) cl_dump_logs(c);
    CHECK(ok);
    int deployed = 0;
    for (int i = 0; i < c->ntm; i++) deployed += cl_count_in(c->tm[i].log, "deploying job") > 0;
    CHECK_EQ(deployed, 2);
    CHECK_EQ(cl_count_in(c->jm.log, "sent the artifact of job"), 2); /* each asked once */
    char out[1200];
    snprintf(out, sizeof out, "%s/out", c->dir);
    CHECK_EQ(wo_check(out, N), 0);
}


TEST(seeds_placement) {
    cluster_t c;
    cl_cluster_init(&c, "placement");
    cl_start_jm(&c);
    for (int i = 1; i <= 3; i++) cl_start_tm(&c, i, 2, NULL, NULL);
    CHECK(cl_wait_tms(&c, 3, 10000));
    const long long N = 200000;
    char args[3000], id[64], st[32];
    snprintf(args, sizeof args, "%s/out %s/ck %lld --groups --rate=200000", c.dir, c.dir, N);
    cl_submit(&c, args, id, sizeof id);
    CHECK(id[0]);
    bool ok = cl_wait_state(&c, id, "FINISHED", 60000, st, sizeof st);
    if (!ok) cl_dump_logs(&c);
    CHECK(ok);
    /* one group per TaskManager: each deployed the two subtasks of one
     * vertex, and the three vertices are different */
    const char *vertices[] = {"Source: gen", "Window(", "Sink: files"};
    int seen[3] = {0};
    for (int i = 0; i < 3; i++) {
        int kinds = 0;
        for (int v = 0; v < 3; v++) {
            char needle[64];
            snprintf(needle, sizeof needle, "%s", vertices[v]);
            int n = cl_count_in(c.tm[i].log, needle);
            if (n) {
                kinds++;
                seen[v]++;
                CHECK_EQ(n, 2);
            }
        }
        CHECK_EQ(kinds, 1);
    }
    for (int v = 0; v < 3; v++) CHECK_EQ(seen[v], 1);
    char out[1200];
    snprintf(out, sizeof out, "%s/out", c.dir);
    CHECK_EQ(wo_check(out, N), 0);
    cl_cluster_stop(&c);
}

TEST(kill9_failover) {
    int kills = getenv("SLUICE_CLUSTER_KILLS") ? atoi(getenv("SLUICE_CLUSTER_KILLS")) : 3;
    cluster_t c;
    cl_cluster_init(&c, "kill9");
    cl_start_jm(&c);
    int next = 1;
    for (int i = 0; i < 3; i++) cl_start_tm(&c, next++, 2, NULL, NULL);
    CHECK(cl_wait_tms(&c, 3, 10000));
    const long long N = 400000 + 100000LL * kills;
    char args[3000], id[64], st[32];
    snprintf(args, sizeof args, "%s/out %s/ck %lld --groups --rate=100000", c.dir, c.dir, N);
    cl_submit(&c, args, id, sizeof id);
    CHECK(id[0]);
    int done = 0;
    for (int k = 0; k < kills; k++) {
        cl_sleep_ms(600 + rand() % 900);
        cl_job_state(&c, id, st, sizeof st);
        if (!strcmp(st, "FINISHED")) break;
        int live[MAX_PROCS], nlive = 0;
        for (int i = 0; i < c.ntm; i++)
            if (c.tm[i].pid > 0) live[nlive++] = i;
        proc_t *victim = &c.tm[live[rand() % nlive]];
        fprintf(stderr, "  kill -9 %s while the job is %s\n", victim->id, st);
        cl_stop(victim);
        if (c.ntm < MAX_PROCS) cl_start_tm(&c, next++, 2, NULL, NULL); /* its replacement */
        done++;
    }
    bool ok = cl_wait_state(&c, id, "FINISHED", 120000, st, sizeof st);
    if (!ok) cl_dump_logs(&c);
    CHECK(ok);
    fprintf(stderr, "  %d TaskManagers killed; job %s; %d restarts in the JobManager's log\n", done, st,
            cl_count_in(c.jm.log, "restarting from the latest checkpoint"));
    CHECK(done >= 1);
    CHECK(cl_count_in(c.jm.log, "lost TaskManager") >= done);
    char out[1200];
    snprintf(out, sizeof out, "%s/out", c.dir);
    CHECK_EQ(wo_check(out, N), 0);
    cl_cluster_stop(&c);
}

TEST(heartbeat_timeout) {
    cluster_t c;
    cl_cluster_init(&c, "heartbeat");
    /* sluice's defaults, which are the seeds' 10 s (PRODUCT.md S4) */
    c.hb_interval = getenv("SLUICE_CLUSTER_HB_INTERVAL") ? getenv("SLUICE_CLUSTER_HB_INTERVAL") : "2 s";
    c.hb_timeout = getenv("SLUICE_CLUSTER_HB_TIMEOUT") ? getenv("SLUICE_CLUSTER_HB_TIMEOUT") : "10 s";
    int64_t timeout_ms = atoi(c.hb_timeout) * (strstr(c.hb_timeout, "ms") ? 1 : 1000);
    int64_t interval_ms = atoi(c.hb_interval) * (strstr(c.hb_interval, "ms") ? 1 : 1000);
    cl_start_jm(&c);
    for (int i = 1; i <= 4; i++) cl_start_tm(&c, i, 2, NULL, NULL); /* three for the job, one spare */
    CHECK(cl_wait_tms(&c, 4, 10000));
    const long long N = 600000;
    char args[3000], id[64], st[32];
    snprintf(args, sizeof args, "%s/out %s/ck %lld --groups --rate=100000", c.dir, c.dir, N);
    cl_submit(&c, args, id, sizeof id);
    CHECK(id[0]);
    CHECK(cl_wait_state(&c, id, "RUNNING", 10000, st, sizeof st));
    CHECK(cl_wait_deployed(&c, 3, 30000));
    cl_sleep_ms(1000);
    /* stop a TaskManager that runs part of the job */
    proc_t *victim = NULL;
    for (int i = 0; i < c.ntm && !victim; i++)
        if (cl_count_in(c.tm[i].log, "deploying job")) victim = &c.tm[i];
    CHECK(victim);
    kill(victim->pid, SIGSTOP);
    int64_t t0 = cl_now_ms();
    char needle[128];
    snprintf(needle, sizeof needle, "sluice jobmanager: lost TaskManager %s at", victim->id);
    while (!cl_count_in(c.jm.log, needle) && cl_now_ms() - t0 < timeout_ms * 3) cl_sleep_ms(20);
    int64_t detected = cl_now_ms() - t0;
    fprintf(stderr, "  %s stopped: declared lost after %lld ms (heartbeat.timeout %lld ms, interval %lld ms)\n",
            victim->id, (long long)detected, (long long)timeout_ms, (long long)interval_ms);
    CHECK(cl_count_in(c.jm.log, needle) == 1);
    CHECK(cl_count_in(c.jm.log, "no heartbeat for") >= 1);
    CHECK(detected >= timeout_ms - interval_ms);
    CHECK(detected <= timeout_ms + interval_ms + 500); /* 500 ms: polling and a loaded 2-core machine */
    bool ok = cl_wait_state(&c, id, "FINISHED", 120000, st, sizeof st);
    if (!ok) cl_dump_logs(&c);
    CHECK(ok);
    char out[1200];
    snprintf(out, sizeof out, "%s/out", c.dir);
    CHECK_EQ(wo_check(out, N), 0);
    cl_stop(victim);
    cl_cluster_stop(&c);
}

TEST(rescale_2_to_3) {
    cluster_t c;
    cl_cluster_init(&c, "rescale");
    cl_start_jm(&c);
    for (int i = 1; i <= 2; i++) cl_start_tm(&c, i, 2, NULL, NULL);
    CHECK(cl_wait_tms(&c, 2, 10000));
    const long long N = 400000;
    char args[3000], id[64], st[32];
    /* checkpoints retained when the job fails (the cluster dies) */
    snprintf(args, sizeof args, "%s/out %s/ck %lld --p=2 --rate=100000", c.dir, c.dir, N);
    cl_submit(&c, args, id, sizeof id);
    CHECK(id[0]);
    CHECK(cl_wait_state(&c, id, "RUNNING", 10000, st, sizeof st));
    char chk[1400] = "";
    int64_t end = cl_now_ms() + 20000;
    while (!chk[0] && cl_now_ms() < end) { /* a completed checkpoint */
        for (int n = 1; n < 400 && !chk[0]; n++) {
            char meta[1500];
            snprintf(meta, sizeof meta, "%s/ck/cluster-job/chk-%d/_metadata", c.dir, n);
            if (access(meta, F_OK) == 0) snprintf(chk, sizeof chk, "%s/ck/cluster-job/chk-%d", c.dir, n);
        }
        cl_sleep_ms(50);
    }
    CHECK(chk[0]);
    cl_sleep_ms(300);
    cl_cluster_stop(&c); /* everything dies: kill -9 */
    /* the latest complete checkpoint, restored at parallelism 3 on three TaskManagers */
    chk[0] = 0;
    for (int n = 1; n < 2000; n++) {
        char meta[1500];
        snprintf(meta, sizeof meta, "%s/ck/cluster-job/chk-%d/_metadata", c.dir, n);
        if (access(meta, F_OK) == 0) snprintf(chk, sizeof chk, "%s/ck/cluster-job/chk-%d", c.dir, n);
    }
    CHECK(chk[0]);
    c.ntm = 0;
    c.rpc_port = cl_free_port();
    c.rest_port = cl_free_port();
    c.evenly = true; /* one subtask per TaskManager */
    cl_start_jm(&c);
    for (int i = 1; i <= 3; i++) cl_start_tm(&c, 10 + i, 2, NULL, NULL);
    CHECK(cl_wait_tms(&c, 3, 10000));
    char opts[1500];
    snprintf(opts, sizeof opts, "-s %s", chk);
    snprintf(args, sizeof args, "%s/out %s/ck %lld --p=3 --rate=200000", c.dir, c.dir, N);
    cl_submit_with(&c, opts, args, id, sizeof id);
    CHECK(id[0]);
    bool ok = cl_wait_state(&c, id, "FINISHED", 60000, st, sizeof st);
    if (!ok) cl_dump_logs(&c);
    CHECK(ok);
    int from_ckpt = 0;
    for (int i = 0; i < c.ntm; i++) from_ckpt += cl_count_in(c.tm[i].log, "from its checkpoint") > 0;
    CHECK_EQ(from_ckpt, 3);
    char out[1200];
    snprintf(out, sizeof out, "%s/out", c.dir);
    CHECK_EQ(wo_check(out, N), 0);
    cl_cluster_stop(&c);
}

/* Runs `sluice ARGS` (a cluster verb against c), prints its output, and
 * returns its exit code; the path after "Path: file:" into path. */
static int cli(cluster_t *c, const char *verb_args, char *path, size_t cap) {
    char cmd[10000], line[5000];
    snprintf(cmd, sizeof cmd, "%s %s 2>&1", SLUICE_BIN, verb_args);
    (void)c;
    FILE *f = popen(cmd, "r");
    if (path && cap) path[0] = 0;
    while (f && fgets(line, sizeof line, f)) {
        fprintf(stderr, "  | %s", line);
        const char *at = strstr(line, "Path: file:");
        if (at && path) {
            snprintf(path, cap, "%s", at + 11);
            path[strcspn(path, "\n")] = 0;
        }
    }
    int st = f ? pclose(f) : -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* Savepoints on the cluster through the CLI and REST: `sluice savepoint`
 * while the job runs (the job goes on), `sluice stop --savepointPath` (the
 * job finishes), then `sluice run -s` at parallelism 3 from the stop's
 * savepoint: the windows equal the brute-force ones, each exactly once.
 * `sluice savepoint --dispose` removes the intermediate one; errors are
 * clear (no such job, a relative directory); --type native is accepted. */
TEST(savepoint_stop_and_restore) {
    cluster_t c;
    cl_cluster_init(&c, "savepoint");
    char spdefault[1400];
    snprintf(spdefault, sizeof spdefault, "execution.checkpointing.savepoint-dir=%s/spdefault", c.dir);
    c.jm_extra = spdefault; /* the cluster's default savepoint directory */
    cl_start_jm(&c);
    for (int i = 1; i <= 2; i++) cl_start_tm(&c, i, 2, NULL, NULL);
    CHECK(cl_wait_tms(&c, 2, 10000));
    const long long N = 400000;
    char args[3000], id[64], st[32], verb[9000], sp1[4300], sp2[4300];
    snprintf(args, sizeof args, "%s/out %s/ck %lld --p=2 --rate=60000", c.dir, c.dir, N);
    cl_submit(&c, args, id, sizeof id);
    CHECK(id[0]);
    CHECK(cl_wait_state(&c, id, "RUNNING", 10000, st, sizeof st));
    cl_sleep_ms(1500);
    snprintf(verb, sizeof verb, "savepoint -m 127.0.0.1:%d %s %s/sp", c.rest_port, id, c.dir);
    CHECK_EQ(cli(&c, verb, sp1, sizeof sp1), 0);
    CHECK(strstr(sp1, "/sp/savepoint-") != NULL);
    char meta[4400];
    snprintf(meta, sizeof meta, "%s/_metadata", sp1);
    CHECK_EQ(access(meta, F_OK), 0);
    cl_job_state(&c, id, st, sizeof st);
    CHECK(!strcmp(st, "RUNNING")); /* an intermediate savepoint: the job goes on */
    char sp0[4300];
    snprintf(verb, sizeof verb, "savepoint -m 127.0.0.1:%d %s", c.rest_port, id); /* no directory: the cluster's */
    CHECK_EQ(cli(&c, verb, sp0, sizeof sp0), 0);
    CHECK(strstr(sp0, "/spdefault/savepoint-") != NULL);
    /* refusals, with the reason */
    snprintf(verb, sizeof verb, "savepoint -m 127.0.0.1:%d %s relative/dir", c.rest_port, id);
    CHECK(cli(&c, verb, NULL, 0) != 0);
    snprintf(verb, sizeof verb, "savepoint -m 127.0.0.1:%d 0123456789abcdef0123456789abcdef %s/sp", c.rest_port, c.dir);
    CHECK(cli(&c, verb, NULL, 0) != 0);
    char spn[4300]; /* --type native: accepted (heap state is written canonically in either format) */
    snprintf(verb, sizeof verb, "savepoint -m 127.0.0.1:%d --type native %s %s/sp", c.rest_port, id, c.dir);
    CHECK_EQ(cli(&c, verb, spn, sizeof spn), 0);
    CHECK(strstr(spn, "/sp/savepoint-") != NULL && strcmp(spn, sp1) != 0);
    cl_sleep_ms(1000);
    snprintf(verb, sizeof verb, "stop -m 127.0.0.1:%d --savepointPath %s/sp %s", c.rest_port, c.dir, id);
    CHECK_EQ(cli(&c, verb, sp2, sizeof sp2), 0);
    CHECK(sp2[0] == '/' && strcmp(sp1, sp2) != 0);
    CHECK(cl_wait_state(&c, id, "FINISHED", 20000, st, sizeof st));
    char out[1200];
    snprintf(out, sizeof out, "%s/out", c.dir);
    int hidden = 0;
    char **lines = calloc(2000000, sizeof *lines);
    long long before = wo_read_lines(out, lines, 2000000, &hidden);
    for (long long i = 0; i < before; i++) free(lines[i]);
    free(lines);
    CHECK(before > 0);
    CHECK_EQ(hidden, 0); /* nothing pending after the stop: its savepoint committed */
    /* version 2: parallelism 3 from the stop's savepoint, to the end */
    cl_start_tm(&c, 3, 2, NULL, NULL);
    CHECK(cl_wait_tms(&c, 3, 10000));
    char opts[4500];
    snprintf(opts, sizeof opts, "-s %s", sp2);
    snprintf(args, sizeof args, "%s/out %s/ck %lld --p=3 --rate=200000", c.dir, c.dir, N);
    cl_submit_with(&c, opts, args, id, sizeof id);
    CHECK(id[0]);
    bool ok = cl_wait_state(&c, id, "FINISHED", 60000, st, sizeof st);
    if (!ok) cl_dump_logs(&c);
    CHECK(ok);
    CHECK_EQ(wo_check(out, N), 0);
    snprintf(verb, sizeof verb, "savepoint --dispose %s", sp1);
    CHECK_EQ(cli(&c, verb, NULL, 0), 0);
    CHECK(access(sp1, F_OK) != 0);
    cl_cluster_stop(&c);
}

TEST(too_few_slots) {
    cluster_t c;
    cl_cluster_init(&c, "slots");
    c.slot_timeout = "1 s";
    cl_start_jm(&c);
    cl_start_tm(&c, 1, 2, NULL, NULL);
    CHECK(cl_wait_tms(&c, 1, 10000));
    char args[3000], id[64], st[32];
    snprintf(args, sizeof args, "%s/out %s/ck 1000 --groups", c.dir, c.dir);
    int64_t t0 = cl_now_ms();
    cl_submit(&c, args, id, sizeof id);
    CHECK(id[0]);
    CHECK(!cl_wait_state(&c, id, "FINISHED", 20000, st, sizeof st));
    CHECK(strcmp(st, "FAILED") == 0);
    CHECK(cl_now_ms() - t0 >= 1000);
    CHECK(cl_count_in(c.jm.log, "needs 6 slots (3 slot sharing groups), the cluster has 2 on 1 TaskManager") == 1);
    CHECK(cl_count_in(c.jm.log, "waited 1000 ms, slot.request.timeout") == 1);
    cl_cluster_stop(&c);
}

TEST(wrong_secret_and_plan_mismatch) {
    cluster_t c;
    cl_cluster_init(&c, "refusals");
    cl_start_jm(&c);
    proc_t *bad = cl_start_tm(&c, 1, 2, "not-the-secret", NULL);
    int64_t t0 = cl_now_ms(); /* its first attempt, however slowly the processes start */
    while (!cl_count_in(c.jm.log, "wrong cluster secret") && cl_now_ms() - t0 < 15000) cl_sleep_ms(50);
    cl_sleep_ms(300);
    CHECK(cl_count_in(c.jm.log, "refused control connection from 127.0.0.1") >= 1);
    CHECK(cl_count_in(c.jm.log, "wrong cluster secret") >= 1);
    CHECK_EQ(cl_registered_tms(&c), 0);
    cl_stop(bad);
    /* a TaskManager whose build of the job differs (the job reads this
     * variable) refuses the deployment, naming both fingerprints */
    cl_start_tm(&c, 2, 2, NULL, "SLUICE_CLUSTER_JOB_SKEW=1");
    CHECK(cl_wait_tms(&c, 1, 10000));
    char args[3000], id[64], st[32];
    snprintf(args, sizeof args, "%s/out %s/ck 1000 --p=1", c.dir, c.dir);
    cl_submit(&c, args, id, sizeof id);
    CHECK(id[0]);
    CHECK(!cl_wait_state(&c, id, "FINISHED", 20000, st, sizeof st));
    CHECK(strcmp(st, "FAILED") == 0);
    CHECK(cl_count_in(c.jm.log, "TaskManager tm-2 refuses job 'cluster-job': the job it built has plan fingerprint") >=
          1);
    cl_cluster_stop(&c);
}


/* Bad control frames on the JobManager's real RPC port, after a correct
 * handshake: garbage, a frame of a newer protocol version, a truncated
 * message.  Each is refused with a log line naming the sender, that
 * connection is closed, and the JobManager keeps serving. */
typedef struct probe {
    pthread_mutex_t mu;
    int closed;
    char why[256];
} probe_t;
static void pr_open(void *ctx, sl_rpc_conn_t *c) { (void)ctx, (void)c; }
static void pr_msg(void *ctx, sl_rpc_conn_t *c, const uint8_t *b, size_t l) { (void)ctx, (void)c, (void)b, (void)l; }
static void pr_closed(void *ctx, sl_rpc_conn_t *c, const char *why) {
    probe_t *p = ctx;
    pthread_mutex_lock(&p->mu);
    p->closed++;
    snprintf(p->why, sizeof p->why, "%s", why);
    pthread_mutex_unlock(&p->mu);
}

TEST(bad_control_frames) {
    cluster_t c;
    cl_cluster_init(&c, "badframes");
    cl_start_jm(&c);
    cl_start_tm(&c, 1, 1, NULL, NULL);
    CHECK(cl_wait_tms(&c, 1, 10000));
    sl_rpc_t *rpc = NULL;
    char err[512];
    sl_rpc_config_t rc = {.secret = c.secret, .name = "probe"};
    CHECK_EQ(sl_rpc_new(&rc, &rpc, err, sizeof err), 0);
    /* a valid REGISTER, re-encoded with version 9 in its header */
    sl_msg_t *m = sl_msg_new(SL_MSG_REGISTER);
    m->u.reg.tm_id = sl_strdup("probe");
    m->u.reg.host = sl_strdup("127.0.0.1");
    m->u.reg.data_port = 1;
    m->u.reg.slots = 1;
    sl_buf_t good = {0};
    CHECK_EQ(sl_msg_encode(m, &good, err, sizeof err), 0);
    sl_msg_destroy(m);
    uint8_t garbage[64];
    for (size_t i = 0; i < sizeof garbage; i++) garbage[i] = (uint8_t)(i * 37 + 11);
    struct { const uint8_t *p; size_t len; const char *words; } cases[4];
    sl_buf_t newer = {0}, cut = {0};
    sl_buf_append(&newer, good.p, good.len);
    newer.p[4] = 9; /* version */
    sl_buf_append(&cut, good.p, good.len);
    cut.p[8] = (uint8_t)(cut.p[8] - 3); /* payload length: a truncated message */
    cut.len -= 3;
    cases[0].p = garbage, cases[0].len = sizeof garbage, cases[0].words = "refused: control message from 127.0.0.1:";
    cases[1].p = newer.p, cases[1].len = newer.len, cases[1].words = "version 9 is newer than this build's 1";
    cases[2].p = cut.p, cases[2].len = cut.len, cases[2].words = "REGISTER";
    int before = cl_count_in(c.jm.log, "refused: control message from");
    for (int k = 0; k < 3; k++) {
        probe_t pr = {.mu = PTHREAD_MUTEX_INITIALIZER};
        sl_rpc_callbacks_t cbs = {.on_open = pr_open, .on_message = pr_msg, .on_closed = pr_closed, .ctx = &pr};
        sl_rpc_conn_t *conn = NULL;
        CHECK_EQ(sl_rpc_connect(rpc, "127.0.0.1", c.rpc_port, &cbs, &conn), 0);
        CHECK_EQ(sl_rpc_send(conn, cases[k].p, cases[k].len), 0);
        int64_t t0 = cl_now_ms();
        for (;;) {
            pthread_mutex_lock(&pr.mu);
            int closed = pr.closed;
            pthread_mutex_unlock(&pr.mu);
            if (closed || cl_now_ms() - t0 > 5000) break;
            cl_sleep_ms(20);
        }
        CHECK_EQ(pr.closed, 1); /* the JobManager closed it */
        sl_rpc_conn_release(conn);
        CHECK(cl_count_in(c.jm.log, cases[k].words) >= 1);
    }
    CHECK_EQ(cl_count_in(c.jm.log, "refused: control message from") - before, 3);
    CHECK_EQ(cl_registered_tms(&c), 1); /* still serving, the probe never registered */
    sl_rpc_destroy(rpc);
    sl_buf_free(&good);
    sl_buf_free(&newer);
    sl_buf_free(&cut);
    cl_cluster_stop(&c);
}

/* The S1 job built into `sluice` (examples/fraud_job.c), run by name on two
 * TaskManagers (`sluice run -m ... fraud ...`) and embedded (`sluice run
 * ...`) on the same generated input: the same windows (sums compared to
 * 1e-4: their order of addition differs). */
static long long normalized_lines(const char *dir, char **out, long long cap) {
    int hidden;
    long long n = wo_read_lines(dir, out, cap, &hidden);
    for (long long i = 0; i < n; i++) {
        char *at = strstr(out[i], "\"total_amount\":");
        if (!at) continue;
        double v = strtod(at + 15, NULL);
        char b[600];
        snprintf(b, sizeof b, "%.*s\"total_amount\":%.4f}", (int)(at - out[i]), out[i], v);
        free(out[i]);
        out[i] = strdup(b);
    }
    if (n > 0) qsort(out, (size_t)n, sizeof *out, wo_cmp_str);
    return hidden ? -1 : n;
}

TEST(builtin_fraud_by_name) {
    cluster_t c;
    cl_cluster_init(&c, "builtin");
    cl_start_jm(&c);
    for (int i = 1; i <= 2; i++) cl_start_tm(&c, i, 1, NULL, NULL);
    CHECK(cl_wait_tms(&c, 2, 10000));
    char cmd[4096], args[4200], id[64] = "", st[32];
    snprintf(args, sizeof args,
             "--events 300000 --late-fraction 0 --exactly-once-output %s/eo --checkpoint-interval 100 "
             "--checkpoint-dir %s/ck --late-output %s/late.jsonl",
             c.dir, c.dir, c.dir);
    cl_submit_job(&c, "fraud", "", args, id, sizeof id); /* a built-in job: by name */
    CHECK(id[0]);
    bool ok = cl_wait_state(&c, id, "FINISHED", 60000, st, sizeof st);
    if (!ok) cl_dump_logs(&c);
    CHECK(ok);
    snprintf(cmd, sizeof cmd,
             "%s run --events 300000 --late-fraction 0 --exactly-once-output %s/eo-embedded --checkpoint-interval 100 "
             "--checkpoint-dir %s/ck-embedded --late-output %s/late-embedded.jsonl >/dev/null 2>&1",
             SLUICE_BIN, c.dir, c.dir, c.dir);
    CHECK_EQ(system(cmd), 0);
    enum { CAP = 200000 };
    char **a = calloc(CAP, sizeof *a), **b = calloc(CAP, sizeof *b);
    char da[1200], db[1200];
    snprintf(da, sizeof da, "%s/eo", c.dir);
    snprintf(db, sizeof db, "%s/eo-embedded", c.dir);
    long long na = normalized_lines(da, a, CAP), nb = normalized_lines(db, b, CAP);
    fprintf(stderr, "  cluster %lld window rows, embedded %lld\n", na, nb);
    CHECK(na > 1000);
    CHECK_EQ(na, nb);
    for (long long i = 0; i < na; i++) CHECK_STR(a[i], b[i]);
    for (long long i = 0; i < na; i++) free(a[i]);
    for (long long i = 0; i < nb; i++) free(b[i]);
    free(a);
    free(b);
    cl_cluster_stop(&c);
}

/* `sluice run -t local` (Flink's execution.target local): the job file
 * runs in this process, where no JobManager listens (the REST port of
 * the configuration is free), and its committed windows are exact; a
 * built-in job runs by name locally and on a cluster; bad targets and
 * unknown jobs are refused by name. */
TEST(local_target) {
    cluster_t c;
    cl_cluster_init(&c, "local");
    const long long N = 100000;
    char cmd[4096], out[1200];
    int port = cl_free_port();
    snprintf(cmd, sizeof cmd, "%s run -t local -D rest.port=%d %s %s/out %s/ck %lld > %s/local.log 2>&1", SLUICE_BIN,
             port, SLUICE_CLUSTER_JOB, c.dir, c.dir, N, c.dir);
    CHECK_EQ(system(cmd), 0);
    snprintf(out, sizeof out, "%s/local.log", c.dir);
    CHECK_EQ(cl_count_in(out, "Job Runtime: "), 1);
    snprintf(out, sizeof out, "%s/out", c.dir);
    CHECK_EQ(wo_check(out, N), 0);
    snprintf(cmd, sizeof cmd, "%s run -t local nexmark q1 50000 --p=2 > /dev/null 2>&1", SLUICE_BIN);
    CHECK_EQ(system(cmd), 0);
    snprintf(cmd, sizeof cmd, "%s run -t yarn-per-job nexmark q1 10 > %s/bad.log 2>&1", SLUICE_BIN, c.dir);
    CHECK_EQ(WEXITSTATUS(system(cmd)), 2);
    snprintf(out, sizeof out, "%s/bad.log", c.dir);
    CHECK_EQ(cl_count_in(out, "--target must be local"), 1);
    snprintf(cmd, sizeof cmd, "%s run -t local nosuchjob > %s/bad.log 2>&1", SLUICE_BIN, c.dir);
    CHECK_EQ(WEXITSTATUS(system(cmd)), 2);
    CHECK_EQ(cl_count_in(out, "no such built-in job (built in: fraud, nexmark)"), 1);
    /* the same built-in job on a cluster, by name */
    cl_start_jm(&c);
    cl_start_tm(&c, 1, 2, NULL, NULL);
    CHECK(cl_wait_tms(&c, 1, 10000));
    char id[64] = "", st[32];
    cl_submit_job(&c, "nexmark", "", "q5 50000 --p=2", id, sizeof id);
    CHECK(id[0]);
    bool ok = cl_wait_state(&c, id, "FINISHED", 60000, st, sizeof st);
    if (!ok) cl_dump_logs(&c);
    CHECK(ok);
    cl_cluster_stop(&c);
}

/* A TaskManager on its own "host": a network namespace joined to this one
 * by a veth pair (10.213.0.1 here, 10.213.0.2 there).  Its link is cut
 * (ip link set down: no reset, the packets just stop) -> the JobManager
 * declares it lost after the heartbeat timeout -> the job fails over to
 * the other TaskManagers and its output is exactly once; the link comes
 * back -> the TaskManager registers again. */
static int sh(const char *cmd) {
    int rc = system(cmd);
    if (rc != 0) fprintf(stderr, "  `%s` failed (%d)\n", cmd, rc);
    return rc;
}

TEST(network_namespace_link_cut) {
    const char *ns = "sluice-test-tm";
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "ip netns del %s 2>/dev/null; ip link del sl-veth0 2>/dev/null; true", ns);
    sh(cmd);
    snprintf(cmd, sizeof cmd,
             "ip netns add %s && ip link add sl-veth0 type veth peer name sl-veth1 && "
             "ip link set sl-veth1 netns %s && ip addr add 10.213.0.1/24 dev sl-veth0 && ip link set sl-veth0 up && "
             "ip netns exec %s ip addr add 10.213.0.2/24 dev sl-veth1 && ip netns exec %s ip link set sl-veth1 up && "
             "ip netns exec %s ip link set lo up",
             ns, ns, ns, ns, ns);
    if (sh(cmd) != 0) {
        fprintf(stderr, "  network namespaces are refused here (root and CAP_NET_ADMIN are needed): this test "
                        "cannot run, and fails\n");
        CHECK(0);
    }
    cluster_t c;
    cl_cluster_init(&c, "netns");
    c.jm_host = "10.213.0.1"; /* reachable from both sides */
    c.evenly = true;          /* one subtask on each TaskManager */
    cl_start_jm(&c);
    cl_g_tm_host = "10.213.0.1";
    for (int i = 1; i <= 3; i++) cl_start_tm(&c, i, 2, NULL, NULL);
    cl_g_netns = ns;
    cl_g_tm_host = "10.213.0.2";
    proc_t *remote = cl_start_tm(&c, 9, 2, NULL, NULL); /* the "host" behind the veth */
    cl_g_netns = NULL;
    cl_g_tm_host = NULL;
    bool ok = cl_wait_tms(&c, 4, 10000);
    if (!ok) cl_dump_logs(&c);
    CHECK(ok);
    const long long N = 600000;
    char args[3000], id[64], st[32];
    /* evenly spread: the remote TaskManager surely runs part of the job */
    snprintf(args, sizeof args, "%s/out %s/ck %lld --p=4 --rate=100000", c.dir, c.dir, N);
    cl_submit(&c, args, id, sizeof id);
    CHECK(id[0]);
    CHECK(cl_wait_state(&c, id, "RUNNING", 10000, st, sizeof st));
    CHECK(cl_wait_deployed(&c, 4, 30000));
    cl_sleep_ms(1000);
    CHECK(cl_count_in(remote->log, "deploying job") >= 1);
    sh("ip link set sl-veth0 down");
    int64_t t0 = cl_now_ms();
    while (!cl_count_in(c.jm.log, "sluice jobmanager: lost TaskManager tm-9") && cl_now_ms() - t0 < 15000) cl_sleep_ms(50);
    fprintf(stderr, "  link cut: tm-9 declared lost after %lld ms\n", (long long)(cl_now_ms() - t0));
    CHECK(cl_count_in(c.jm.log, "sluice jobmanager: lost TaskManager tm-9") >= 1);
    ok = cl_wait_state(&c, id, "FINISHED", 120000, st, sizeof st);
    if (!ok) cl_dump_logs(&c);
    CHECK(ok);
    char out[1200];
    snprintf(out, sizeof out, "%s/out", c.dir);
    CHECK_EQ(wo_check(out, N), 0);
    /* the link back: the TaskManager notices it lost its JobManager and registers again */
    int before = cl_count_in(c.jm.log, "registered TaskManager tm-9");
    sh("ip link set sl-veth0 up");
    t0 = cl_now_ms();
    while (cl_count_in(c.jm.log, "registered TaskManager tm-9") == before && cl_now_ms() - t0 < 20000) cl_sleep_ms(100);
    fprintf(stderr, "  link restored: tm-9 registered again after %lld ms\n", (long long)(cl_now_ms() - t0));
    CHECK(cl_count_in(c.jm.log, "registered TaskManager tm-9") > before);
    cl_cluster_stop(&c);
    snprintf(cmd, sizeof cmd, "ip netns del %s; ip link del sl-veth0 2>/dev/null; true", ns);
    sh(cmd);
}

/* TaskManagers that cannot see the JobManager's files (a mount namespace
 * with its artifact directory hidden, as on another host) download the
 * job's artifact from it (protocol/artifact.h) and run the job; the
 * JobManager serves only the artifacts of its jobs, and only to a peer
 * with the cluster's secret. */
TEST(artifact_download) {
    cluster_t c;
    cl_cluster_init(&c, "artifact");
    cl_start_jm(&c);
    char hidden[1200];
    snprintf(hidden, sizeof hidden, "%s/sluice-artifacts-%d", sl_test_tmpdir(), (int)c.jm.pid);
    for (int i = 0; i < 100 && access(hidden, F_OK) != 0; i++) cl_sleep_ms(50);
    CHECK(access(hidden, F_OK) == 0);
    cl_g_hide = hidden;
    for (int i = 1; i <= 2; i++) cl_start_tm(&c, i, 1, NULL, NULL); /* one slot each: both run a part */
    cl_g_hide = NULL;
    CHECK(cl_wait_tms(&c, 2, 10000));
    run_on_two_downloading(&c);
    /* the JobManager answers by job id only: an unknown job is refused;
     * without the secret the connection does not open */
    sl_rpc_t *rpc = NULL;
    char err[1024], path[4400], dir[1200];
    snprintf(dir, sizeof dir, "%s/fetched", c.dir);
    for (int k = 0; k < 2; k++) {
        sl_rpc_config_t rc = {.secret = k == 0 ? c.secret : "wrong", .name = "test"};
        CHECK_EQ(sl_rpc_new(&rc, &rpc, err, sizeof err), 0);
        int r = sl_artifact_fetch(rpc, "127.0.0.1", c.rpc_port, k == 0 ? "no-such-job" : "x", dir, 10000, path,
                                  sizeof path, err, sizeof err);
        fprintf(stderr, "  %s\n", err);
        CHECK(r < 0);
        CHECK_CONTAINS(err, k == 0 ? "refused: no job 'no-such-job'" : "handshake");
        sl_rpc_destroy(rpc);
    }
    CHECK(access(dir, F_OK) != 0); /* nothing stored */
    cl_cluster_stop(&c);
}

/* ---- TLS with mutual authentication (security.ssl.internal.*) ---- */

static int tls_sh(const char *dir, const char *cmd) {
    char full[4096];
    snprintf(full, sizeof full, "cd '%s' && { %s; } >/dev/null 2>&1", dir, cmd);
    int rc = system(full);
    if (rc) fprintf(stderr, "  failed: %s\n", cmd);
    return rc;
}

/* A CA, the JobManager's and two TaskManagers' certificates (tm-2's as a
 * PKCS#12 keystore), and tm-3's from another CA. */
static int tls_make_certs(const char *dir) {
#define TLS_EC "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
    int rc = 0;
    rc |= tls_sh(dir, "openssl req -x509 " TLS_EC " -keyout ca.key -out ca.pem -subj /CN=cluster-ca -days 2");
    rc |= tls_sh(dir, "openssl req -x509 " TLS_EC " -keyout ca2.key -out ca2.pem -subj /CN=other-ca -days 2");
    const char *nodes[][2] = {{"jm", "ca"}, {"tm1", "ca"}, {"tm2", "ca"}, {"tm3", "ca2"}};
    for (int i = 0; i < 4; i++) {
        char cmd[1024];
        snprintf(cmd, sizeof cmd,
                 "openssl req " TLS_EC " -keyout %s.key -out %s.csr -subj /CN=%s && "
                 "openssl x509 -req -in %s.csr -CA %s.pem -CAkey %s.key -CAcreateserial -out %s.pem -days 2 && "
                 "cat %s.key %s.pem > %s-ks.pem",
                 nodes[i][0], nodes[i][0], nodes[i][0], nodes[i][0], nodes[i][1], nodes[i][1], nodes[i][0],
                 nodes[i][0], nodes[i][0], nodes[i][0]);
        rc |= tls_sh(dir, cmd);
    }
    rc |= tls_sh(dir, "openssl pkcs12 -export -in tm2.pem -inkey tm2.key -out tm2.p12 -passout pass:tm2-pass");
    return rc;
#undef TLS_EC
}

/* Starts a JobManager (n == 0) or TaskManager tm-<n> with the cluster's
 * usual settings plus extra -D key=value pairs (NULL-terminated). */
static proc_t *tls_start(cluster_t *c, int n, const char *const *extra) {
    proc_t *p = n == 0 ? &c->jm : &c->tm[c->ntm++];
    if (n) snprintf(p->id, sizeof p->id, "tm-%d", n);
    char log[sizeof p->log], name[32];
    snprintf(name, sizeof name, "%s", n ? p->id : "jobmanager");
    snprintf(log, sizeof log, "%s/%s.log", c->dir, name);
    memcpy(p->log, log, sizeof log);
    char kv[16][1400];
    int k = 0;
    snprintf(kv[k++], sizeof kv[0], "jobmanager.rpc.port=%d", c->rpc_port);
    snprintf(kv[k++], sizeof kv[0], "heartbeat.interval=%s", c->hb_interval);
    snprintf(kv[k++], sizeof kv[0], "heartbeat.timeout=%s", c->hb_timeout);
    snprintf(kv[k++], sizeof kv[0], "security.internal.secret=%s", c->secret);
    snprintf(kv[k++], sizeof kv[0], "jobmanager.rpc.address=127.0.0.1");
    if (n == 0) {
        snprintf(kv[k++], sizeof kv[0], "rest.port=%d", c->rest_port);
        snprintf(kv[k++], sizeof kv[0], "slot.request.timeout=%s", c->slot_timeout);
    } else {
        snprintf(kv[k++], sizeof kv[0], "taskmanager.numberOfTaskSlots=1"); /* one each: both run a part */
        snprintf(kv[k++], sizeof kv[0], "taskmanager.host=127.0.0.1");
    }
    for (int i = 0; extra && extra[i] && k < 16; i++) snprintf(kv[k++], sizeof kv[0], "%s", extra[i]);
    char *argv[40];
    int a = 0;
    argv[a++] = "sluice";
    argv[a++] = n ? "taskmanager" : "jobmanager";
    if (n) {
        argv[a++] = "--id";
        argv[a++] = p->id;
    }
    for (int i = 0; i < k; i++) {
        argv[a++] = "-D";
        argv[a++] = kv[i];
    }
    argv[a] = NULL;
    p->pid = cl_spawn(p->log, argv);
    return p;
}

/* The data port a TaskManager's log announces, or -1. */
static int tls_data_port(const proc_t *p) {
    char *s = cl_slurp(p->log);
    const char *at = strstr(s, "data port 127.0.0.1:");
    int port = at ? atoi(at + strlen("data port 127.0.0.1:")) : -1;
    free(s);
    return port;
}

/* Connects to port, sends sluice's plain hello bytes, waits until closed. */
static bool tls_plain_probe(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {10, 0};
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    bool closed = false;
    if (connect(fd, (struct sockaddr *)&a, sizeof a) == 0) {
        uint8_t hello[40] = {'S', 'L', 'H', 'S', 1, 0, 2, 0};
        if (send(fd, hello, sizeof hello, MSG_NOSIGNAL) == (ssize_t)sizeof hello) {
            uint8_t b[256];
            ssize_t r;
            while ((r = read(fd, b, sizeof b)) > 0) {
            }
            closed = r == 0 || errno == ECONNRESET;
        }
    }
    close(fd);
    return closed;
}

static bool tls_wait_log(const char *log, const char *needle, int ms) {
    int64_t end = cl_now_ms() + ms;
    while (cl_count_in(log, needle) == 0 && cl_now_ms() < end) cl_sleep_ms(50);
    return cl_count_in(log, needle) > 0;
}

TEST(tls_mutual_auth) {
    cluster_t c;
    cl_cluster_init(&c, "tls");
    CHECK_EQ(tls_make_certs(c.dir), 0);
    char ks[6][1400], ts[1400];
    const char *names[] = {"jm-ks.pem", "tm1-ks.pem", "tm2.p12", "tm3-ks.pem"};
    for (int i = 0; i < 4; i++) snprintf(ks[i], sizeof ks[i], "security.ssl.internal.keystore=%s/%s", c.dir, names[i]);
    snprintf(ts, sizeof ts, "security.ssl.internal.truststore=%s/ca.pem", c.dir);
    const char *on = "security.ssl.internal.enabled=true";
    const char *jm_keys[] = {on, ks[0], ts, NULL};
    const char *tm1_keys[] = {on, ks[1], ts, NULL};
    const char *tm2_keys[] = {on, ks[2], ts, "security.ssl.internal.keystore-password=tm2-pass", NULL};
    tls_start(&c, 0, jm_keys);
    /* tm-1 as a PEM keystore, tm-2 as PKCS#12: the job's artifact comes over
     * TLS too (they cannot see the JobManager's files) */
    char hidden[1200];
    snprintf(hidden, sizeof hidden, "%s/sluice-artifacts-%d", sl_test_tmpdir(), (int)c.jm.pid);
    for (int i = 0; i < 100 && access(hidden, F_OK) != 0; i++) cl_sleep_ms(50);
    CHECK(access(hidden, F_OK) == 0);
    cl_g_hide = hidden;
    tls_start(&c, 1, tm1_keys);
    tls_start(&c, 2, tm2_keys);
    cl_g_hide = NULL;
    bool up = cl_wait_tms(&c, 2, 15000);
    if (!up) cl_dump_logs(&c);
    CHECK(up);
    CHECK(cl_count_in(c.jm.log, "internal connections use TLS as /CN=jm") == 1);
    run_on_two_downloading(&c);
    for (int i = 0; i < 2; i++) CHECK_EQ(cl_count_in(c.tm[i].log, "refused"), 0);

    /* the data ports speak TLS only */
    int dport = tls_data_port(&c.tm[0]);
    CHECK(dport > 0);
    CHECK(tls_plain_probe(dport));
    CHECK(tls_wait_log(c.tm[0].log, "refused: TLS: peer is not speaking TLS", 5000));

    /* a TaskManager with a certificate of another CA: refused by the
     * JobManager, which names the cause */
    const char *tm3_keys[] = {on, ks[3], ts, NULL};
    proc_t *foreign = tls_start(&c, 3, tm3_keys);
    CHECK(tls_wait_log(c.jm.log, "peer certificate not trusted", 15000));
    CHECK(cl_count_in(c.jm.log, "refused control connection from 127.0.0.1") >= 1);
    CHECK(tls_wait_log(foreign->log, "the peer refused our certificate", 5000));
    cl_stop(foreign);
    /* a TaskManager without TLS */
    proc_t *plain = tls_start(&c, 4, NULL);
    CHECK(tls_wait_log(c.jm.log, "peer is not speaking TLS", 15000));
    CHECK(tls_wait_log(plain->log, "peer speaks TLS, but TLS is off here", 5000));
    cl_stop(plain);
    CHECK_EQ(cl_registered_tms(&c), 2);
    /* a wrong keystore password: the process does not start, and says why */
    const char *bad_keys[] = {on, ks[2], ts, "security.ssl.internal.keystore-password=wrong", NULL};
    proc_t *bad = tls_start(&c, 5, bad_keys);
    int wst = 0;
    int64_t end = cl_now_ms() + 10000;
    pid_t r = 0;
    while ((r = waitpid(bad->pid, &wst, WNOHANG)) == 0 && cl_now_ms() < end) cl_sleep_ms(50);
    CHECK(r == bad->pid);
    bad->pid = 0;
    CHECK(WIFEXITED(wst) && WEXITSTATUS(wst) == 2);
    char want[1600];
    snprintf(want, sizeof want, "security.ssl.internal.keystore-password: wrong password for %s/tm2.p12", c.dir);
    CHECK(cl_count_in(bad->log, want) == 1);
    cl_cluster_stop(&c);
}

int main(void) {
    srand((unsigned)time(NULL));
    signal(SIGPIPE, SIG_IGN);
    const char *only = getenv("SLUICE_CLUSTER_TESTS"); /* e.g. "savepoint,rescale": only those */
#define RUN_IF(t) \
    do { \
        if (!only || strstr(only, #t) || strstr(#t, only)) RUN(t); \
    } while (0)
    RUN_IF(seeds_placement);
    RUN_IF(kill9_failover);
    RUN_IF(heartbeat_timeout);
    RUN_IF(rescale_2_to_3);
    RUN_IF(savepoint_stop_and_restore);
    RUN_IF(too_few_slots);
    RUN_IF(wrong_secret_and_plan_mismatch);
    RUN_IF(bad_control_frames);
    RUN_IF(builtin_fraud_by_name);
    RUN_IF(local_target);
    RUN_IF(network_namespace_link_cut);
    RUN_IF(artifact_download);
    RUN_IF(tls_mutual_auth);
    return sl_test_failures ? 1 : 0;
}
