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
 *     lost within heartbeat.timeout plus one interval (plus scheduling
 *     slack), and the job recovers on the others;
 *   - rescale_2_to_3: a checkpoint taken at parallelism 2 on two
 *     TaskManagers, the whole cluster killed, restored at 3 on three;
 *   - too_few_slots: the job waits slot.request.timeout, then fails saying
 *     how many slots it needed and had;
 *   - wrong_secret / plan_mismatch: a TaskManager with another secret is
 *     refused; one whose build of the job differs refuses the deployment;
 *   - bad_control_frames: garbage, a newer version and a truncated message
 *     on the JobManager's RPC port, each refused by name;
 *   - network_namespace_link_cut: a TaskManager behind a veth pair in its
 *     own network namespace, its link cut and restored.
 */
#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <pthread.h>

#include "common/common.h"
#include "protocol/messages.h"
#include "protocol/rpc.h"
#include "test.h"
#include "window_output.h"

#define MAX_PROCS 16

typedef struct proc {
    pid_t pid;
    char log[1200];
    char id[32];
} proc_t;

typedef struct cluster {
    char dir[1024];
    int rpc_port, rest_port;
    proc_t jm;
    proc_t tm[MAX_PROCS];
    int ntm;
    const char *hb_interval, *hb_timeout, *slot_timeout, *secret;
    bool evenly;
    const char *jm_host;  /* jobmanager.rpc.address, default 127.0.0.1 */
} cluster_t;

static int64_t now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static int free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || getsockname(fd, (struct sockaddr *)&a, &l) < 0) abort();
    close(fd);
    return ntohs(a.sin_port);
}

static const char *g_netns; /* the next process starts in this network namespace */

/* Starts `sluice ARGS...` with stderr (and stdout) to log (in g_netns
 * when set: `ip netns exec NS sluice ARGS...`). */
static pid_t spawn(const char *log, char *const argv[]) {
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = freopen(log, "a", stderr);
        if (!f || dup2(fileno(stderr), 1) < 0) _exit(126);
        if (g_netns) {
            char *nargv[40] = {"ip", "netns", "exec", (char *)g_netns, SLUICE_BIN};
            int k = 5;
            for (int i = 1; argv[i] && k < 39; i++) nargv[k++] = argv[i];
            nargv[k] = NULL;
            execvp("ip", nargv);
            _exit(127);
        }
        execv(SLUICE_BIN, argv);
        _exit(127);
    }
    return pid;
}

static char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return strdup("");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = calloc((size_t)n + 1, 1);
    if (n > 0 && fread(s, 1, (size_t)n, f) != (size_t)n) s[0] = 0;
    fclose(f);
    return s;
}

static int count_in(const char *path, const char *needle) {
    char *s = slurp(path);
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++) n++;
    free(s);
    return n;
}

/* GET path from the REST API: the body (malloc'ed) or NULL. */
static char *http_get(int port, const char *path) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return NULL;
    }
    char req[512];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return NULL;
    }
    sl_buf_t b = {0};
    char chunk[4096];
    ssize_t r;
    while ((r = read(fd, chunk, sizeof chunk)) > 0) sl_buf_append(&b, chunk, (size_t)r);
    close(fd);
    sl_buf_append(&b, "", 1);
    char *body = strstr((char *)b.p, "\r\n\r\n");
    char *out = body ? strdup(body + 4) : NULL;
    sl_buf_free(&b);
    return out;
}

static int registered_tms(cluster_t *c) {
    char *s = http_get(c->rest_port, "/taskmanagers");
    if (!s) return -1;
    json_t *j = json_loads(s, 0, NULL);
    free(s);
    int n = j ? (int)json_array_size(json_object_get(j, "taskmanagers")) : -1;
    json_decref(j);
    return n;
}

static void job_state(cluster_t *c, const char *id, char *state, size_t cap) {
    char path[200];
    snprintf(path, sizeof path, "/jobs/%s", id);
    char *s = http_get(c->rest_port, path);
    json_t *j = s ? json_loads(s, 0, NULL) : NULL;
    const char *st = j ? json_string_value(json_object_get(j, "state")) : NULL;
    snprintf(state, cap, "%s", st ? st : "?");
    json_decref(j);
    free(s);
}

static void start_jm(cluster_t *c) {
    char log[sizeof c->jm.log];
    snprintf(log, sizeof log, "%s/jobmanager.log", c->dir);
    memcpy(c->jm.log, log, sizeof log);
    char rpc[64], rest[64], hbi[64], hbt[64], slot[64], sec[128];
    snprintf(rpc, sizeof rpc, "jobmanager.rpc.port=%d", c->rpc_port);
    snprintf(rest, sizeof rest, "rest.port=%d", c->rest_port);
    snprintf(hbi, sizeof hbi, "heartbeat.interval=%s", c->hb_interval);
    snprintf(hbt, sizeof hbt, "heartbeat.timeout=%s", c->hb_timeout);
    snprintf(slot, sizeof slot, "slot.request.timeout=%s", c->slot_timeout);
    snprintf(sec, sizeof sec, "security.internal.secret=%s", c->secret);
    char even[64], addr[128];
    snprintf(even, sizeof even, "cluster.evenly-spread-out-slots=%s", c->evenly ? "true" : "false");
    snprintf(addr, sizeof addr, "jobmanager.rpc.address=%s", c->jm_host ? c->jm_host : "127.0.0.1");
    char *argv[] = {"sluice", "jobmanager", "-D", rpc, "-D", rest, "-D", hbi,  "-D", hbt, "-D",
                    slot,     "-D",         sec,  "-D", even, "-D", addr, NULL};
    c->jm.pid = spawn(c->jm.log, argv);
}

static const char *g_tm_host; /* taskmanager.host of the next TaskManager (NULL: 127.0.0.1) */

/* Starts TaskManager tm-<n> with `slots` slots; extra_env "K=V" or NULL. */
static proc_t *start_tm(cluster_t *c, int n, int slots, const char *secret, const char *extra_env) {
    proc_t *p = &c->tm[c->ntm++];
    snprintf(p->id, sizeof p->id, "tm-%d", n);
    char log[sizeof p->log];
    snprintf(log, sizeof log, "%s/tm-%d.log", c->dir, n);
    memcpy(p->log, log, sizeof log);
    char rpc[64], sl[64], hbi[64], hbt[64], sec[128];
    snprintf(rpc, sizeof rpc, "jobmanager.rpc.port=%d", c->rpc_port);
    snprintf(sl, sizeof sl, "taskmanager.numberOfTaskSlots=%d", slots);
    snprintf(hbi, sizeof hbi, "heartbeat.interval=%s", c->hb_interval);
    snprintf(hbt, sizeof hbt, "heartbeat.timeout=%s", c->hb_timeout);
    snprintf(sec, sizeof sec, "security.internal.secret=%s", secret ? secret : c->secret);
    char jmh[128], tmh[128];
    snprintf(jmh, sizeof jmh, "jobmanager.rpc.address=%s", c->jm_host ? c->jm_host : "127.0.0.1");
    snprintf(tmh, sizeof tmh, "taskmanager.host=%s", g_tm_host ? g_tm_host : "127.0.0.1");
    char *argv[] = {"sluice", "taskmanager", "--id", p->id, "-D", rpc, "-D", sl,  "-D", hbi, "-D",
                    hbt,      "-D",          sec,   "-D",  jmh, "-D", tmh, NULL};
    if (extra_env) putenv((char *)extra_env);
    p->pid = spawn(p->log, argv);
    if (extra_env) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(strchr(extra_env, '=') - extra_env), extra_env);
        unsetenv(name);
    }
    return p;
}

static bool wait_tms(cluster_t *c, int n, int ms) {
    int64_t end = now_ms() + ms;
    while (now_ms() < end) {
        if (registered_tms(c) == n) return true;
        sleep_ms(50);
    }
    fprintf(stderr, "  %d TaskManagers registered, expected %d\n", registered_tms(c), n);
    return false;
}

static void cluster_init(cluster_t *c, const char *name) {
    memset(c, 0, sizeof *c);
    snprintf(c->dir, sizeof c->dir, "%s/cluster-%s", sl_test_tmpdir(), name);
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", c->dir, c->dir);
    if (system(cmd) != 0) abort();
    c->rpc_port = free_port();
    c->rest_port = free_port();
    c->hb_interval = "200 ms";
    c->hb_timeout = "2 s";
    c->slot_timeout = "20 s";
    c->secret = "test-secret";
}

static void stop(proc_t *p) {
    if (p->pid <= 0) return;
    kill(p->pid, SIGCONT);
    kill(p->pid, SIGKILL);
    waitpid(p->pid, NULL, 0);
    p->pid = 0;
}

static void cluster_stop(cluster_t *c) {
    for (int i = 0; i < c->ntm; i++) stop(&c->tm[i]);
    stop(&c->jm);
}

/* `sluice run -d OPTS ... cluster_job.so ARGS`: the job id, or "" */
static void submit_with(cluster_t *c, const char *opts, const char *args, char *id, size_t cap) {
    char cmd[6000], line[512];
    snprintf(cmd, sizeof cmd, "%s run -d %s -m 127.0.0.1:%d %s %s 2>&1", SLUICE_BIN, opts, c->rest_port,
             SLUICE_CLUSTER_JOB, args);
    FILE *f = popen(cmd, "r");
    id[0] = 0;
    while (f && fgets(line, sizeof line, f)) {
        const char *at = strstr(line, "JobID ");
        if (at) sscanf(at + 6, "%63s", id);
        else fprintf(stderr, "  sluice run: %s", line);
    }
    if (f) pclose(f);
    (void)cap;
}

static void submit(cluster_t *c, const char *args, char *id, size_t cap) { submit_with(c, "", args, id, cap); }

static bool wait_state(cluster_t *c, const char *id, const char *want, int ms, char *state, size_t cap) {
    int64_t end = now_ms() + ms;
    while (now_ms() < end) {
        job_state(c, id, state, cap);
        if (!strcmp(state, want)) return true;
        if (!strcmp(state, "FAILED") || !strcmp(state, "CANCELED") || !strcmp(state, "FINISHED")) return false;
        sleep_ms(100);
    }
    return false;
}

static void dump_logs(cluster_t *c) {
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "tail -n 15 '%s'/*.log >&2", c->dir);
    if (system(cmd) != 0) fprintf(stderr, "  (no logs)\n");
}

/* ---- the tests ---- */

TEST(seeds_placement) {
    cluster_t c;
    cluster_init(&c, "placement");
    start_jm(&c);
    for (int i = 1; i <= 3; i++) start_tm(&c, i, 2, NULL, NULL);
    CHECK(wait_tms(&c, 3, 10000));
    const long long N = 200000;
    char args[3000], id[64], st[32];
    snprintf(args, sizeof args, "%s/out %s/ck %lld --groups --rate=200000", c.dir, c.dir, N);
    submit(&c, args, id, sizeof id);
    CHECK(id[0]);
    bool ok = wait_state(&c, id, "FINISHED", 60000, st, sizeof st);
    if (!ok) dump_logs(&c);
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
            int n = count_in(c.tm[i].log, needle);
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
    cluster_stop(&c);
}

TEST(kill9_failover) {
    int kills = getenv("SLUICE_CLUSTER_KILLS") ? atoi(getenv("SLUICE_CLUSTER_KILLS")) : 3;
    cluster_t c;
    cluster_init(&c, "kill9");
    start_jm(&c);
    int next = 1;
    for (int i = 0; i < 3; i++) start_tm(&c, next++, 2, NULL, NULL);
    CHECK(wait_tms(&c, 3, 10000));
    const long long N = 400000 + 100000LL * kills;
    char args[3000], id[64], st[32];
    snprintf(args, sizeof args, "%s/out %s/ck %lld --groups --rate=100000", c.dir, c.dir, N);
    submit(&c, args, id, sizeof id);
    CHECK(id[0]);
    int done = 0;
    for (int k = 0; k < kills; k++) {
        sleep_ms(600 + rand() % 900);
        job_state(&c, id, st, sizeof st);
        if (!strcmp(st, "FINISHED")) break;
        int live[MAX_PROCS], nlive = 0;
        for (int i = 0; i < c.ntm; i++)
            if (c.tm[i].pid > 0) live[nlive++] = i;
        proc_t *victim = &c.tm[live[rand() % nlive]];
        fprintf(stderr, "  kill -9 %s while the job is %s\n", victim->id, st);
        stop(victim);
        if (c.ntm < MAX_PROCS) start_tm(&c, next++, 2, NULL, NULL); /* its replacement */
        done++;
    }
    bool ok = wait_state(&c, id, "FINISHED", 120000, st, sizeof st);
    if (!ok) dump_logs(&c);
    CHECK(ok);
    fprintf(stderr, "  %d TaskManagers killed; job %s; %d restarts in the JobManager's log\n", done, st,
            count_in(c.jm.log, "restarting from the latest checkpoint"));
    CHECK(done >= 1);
    CHECK(count_in(c.jm.log, "lost TaskManager") >= done);
    char out[1200];
    snprintf(out, sizeof out, "%s/out", c.dir);
    CHECK_EQ(wo_check(out, N), 0);
    cluster_stop(&c);
}

TEST(heartbeat_timeout) {
    cluster_t c;
    cluster_init(&c, "heartbeat");
    c.hb_interval = getenv("SLUICE_CLUSTER_HB_INTERVAL") ? getenv("SLUICE_CLUSTER_HB_INTERVAL") : "500 ms";
    c.hb_timeout = getenv("SLUICE_CLUSTER_HB_TIMEOUT") ? getenv("SLUICE_CLUSTER_HB_TIMEOUT") : "3 s";
    int64_t timeout_ms = atoi(c.hb_timeout) * (strstr(c.hb_timeout, "ms") ? 1 : 1000);
    int64_t interval_ms = atoi(c.hb_interval) * (strstr(c.hb_interval, "ms") ? 1 : 1000);
    start_jm(&c);
    for (int i = 1; i <= 4; i++) start_tm(&c, i, 2, NULL, NULL); /* three for the job, one spare */
    CHECK(wait_tms(&c, 4, 10000));
    const long long N = 600000;
    char args[3000], id[64], st[32];
    snprintf(args, sizeof args, "%s/out %s/ck %lld --groups --rate=100000", c.dir, c.dir, N);
    submit(&c, args, id, sizeof id);
    CHECK(id[0]);
    CHECK(wait_state(&c, id, "RUNNING", 10000, st, sizeof st));
    sleep_ms(1000);
    /* stop a TaskManager that runs part of the job */
    proc_t *victim = NULL;
    for (int i = 0; i < c.ntm && !victim; i++)
        if (count_in(c.tm[i].log, "deploying job")) victim = &c.tm[i];
    CHECK(victim);
    kill(victim->pid, SIGSTOP);
    int64_t t0 = now_ms();
    char needle[128];
    snprintf(needle, sizeof needle, "sluice jobmanager: lost TaskManager %s at", victim->id);
    while (!count_in(c.jm.log, needle) && now_ms() - t0 < timeout_ms * 3) sleep_ms(20);
    int64_t detected = now_ms() - t0;
    fprintf(stderr, "  %s stopped: declared lost after %lld ms (heartbeat.timeout %lld ms, interval %lld ms)\n",
            victim->id, (long long)detected, (long long)timeout_ms, (long long)interval_ms);
    CHECK(count_in(c.jm.log, needle) == 1);
    CHECK(count_in(c.jm.log, "no heartbeat for") >= 1);
    CHECK(detected >= timeout_ms - interval_ms);
    CHECK(detected <= timeout_ms + interval_ms + 500); /* 500 ms: polling and a loaded 2-core machine */
    bool ok = wait_state(&c, id, "FINISHED", 120000, st, sizeof st);
    if (!ok) dump_logs(&c);
    CHECK(ok);
    char out[1200];
    snprintf(out, sizeof out, "%s/out", c.dir);
    CHECK_EQ(wo_check(out, N), 0);
    stop(victim);
    cluster_stop(&c);
}

TEST(rescale_2_to_3) {
    cluster_t c;
    cluster_init(&c, "rescale");
    start_jm(&c);
    for (int i = 1; i <= 2; i++) start_tm(&c, i, 2, NULL, NULL);
    CHECK(wait_tms(&c, 2, 10000));
    const long long N = 400000;
    char args[3000], id[64], st[32];
    /* checkpoints retained when the job fails (the cluster dies) */
    snprintf(args, sizeof args, "%s/out %s/ck %lld --p=2 --rate=100000", c.dir, c.dir, N);
    submit(&c, args, id, sizeof id);
    CHECK(id[0]);
    CHECK(wait_state(&c, id, "RUNNING", 10000, st, sizeof st));
    char chk[1400] = "";
    int64_t end = now_ms() + 20000;
    while (!chk[0] && now_ms() < end) { /* a completed checkpoint */
        for (int n = 1; n < 400 && !chk[0]; n++) {
            char meta[1500];
            snprintf(meta, sizeof meta, "%s/ck/cluster-job/chk-%d/_metadata", c.dir, n);
            if (access(meta, F_OK) == 0) snprintf(chk, sizeof chk, "%s/ck/cluster-job/chk-%d", c.dir, n);
        }
        sleep_ms(50);
    }
    CHECK(chk[0]);
    sleep_ms(300);
    cluster_stop(&c); /* everything dies: kill -9 */
    /* the latest complete checkpoint, restored at parallelism 3 on three TaskManagers */
    chk[0] = 0;
    for (int n = 1; n < 2000; n++) {
        char meta[1500];
        snprintf(meta, sizeof meta, "%s/ck/cluster-job/chk-%d/_metadata", c.dir, n);
        if (access(meta, F_OK) == 0) snprintf(chk, sizeof chk, "%s/ck/cluster-job/chk-%d", c.dir, n);
    }
    CHECK(chk[0]);
    c.ntm = 0;
    c.rpc_port = free_port();
    c.rest_port = free_port();
    c.evenly = true; /* one subtask per TaskManager */
    start_jm(&c);
    for (int i = 1; i <= 3; i++) start_tm(&c, 10 + i, 2, NULL, NULL);
    CHECK(wait_tms(&c, 3, 10000));
    char opts[1500];
    snprintf(opts, sizeof opts, "-s %s", chk);
    snprintf(args, sizeof args, "%s/out %s/ck %lld --p=3 --rate=200000", c.dir, c.dir, N);
    submit_with(&c, opts, args, id, sizeof id);
    CHECK(id[0]);
    bool ok = wait_state(&c, id, "FINISHED", 60000, st, sizeof st);
    if (!ok) dump_logs(&c);
    CHECK(ok);
    int from_ckpt = 0;
    for (int i = 0; i < c.ntm; i++) from_ckpt += count_in(c.tm[i].log, "from its checkpoint") > 0;
    CHECK_EQ(from_ckpt, 3);
    char out[1200];
    snprintf(out, sizeof out, "%s/out", c.dir);
    CHECK_EQ(wo_check(out, N), 0);
    cluster_stop(&c);
}

TEST(too_few_slots) {
    cluster_t c;
    cluster_init(&c, "slots");
    c.slot_timeout = "1 s";
    start_jm(&c);
    start_tm(&c, 1, 2, NULL, NULL);
    CHECK(wait_tms(&c, 1, 10000));
    char args[3000], id[64], st[32];
    snprintf(args, sizeof args, "%s/out %s/ck 1000 --groups", c.dir, c.dir);
    int64_t t0 = now_ms();
    submit(&c, args, id, sizeof id);
    CHECK(id[0]);
    CHECK(!wait_state(&c, id, "FINISHED", 20000, st, sizeof st));
    CHECK(strcmp(st, "FAILED") == 0);
    CHECK(now_ms() - t0 >= 1000);
    CHECK(count_in(c.jm.log, "needs 6 slots (3 slot sharing groups), the cluster has 2 on 1 TaskManager") == 1);
    CHECK(count_in(c.jm.log, "waited 1000 ms, slot.request.timeout") == 1);
    cluster_stop(&c);
}

TEST(wrong_secret_and_plan_mismatch) {
    cluster_t c;
    cluster_init(&c, "refusals");
    start_jm(&c);
    proc_t *bad = start_tm(&c, 1, 2, "not-the-secret", NULL);
    sleep_ms(1500);
    CHECK_EQ(registered_tms(&c), 0);
    CHECK(count_in(c.jm.log, "refused control connection from 127.0.0.1") >= 1);
    CHECK(count_in(c.jm.log, "wrong cluster secret") >= 1);
    stop(bad);
    /* a TaskManager whose build of the job differs (the job reads this
     * variable) refuses the deployment, naming both fingerprints */
    start_tm(&c, 2, 2, NULL, "SLUICE_CLUSTER_JOB_SKEW=1");
    CHECK(wait_tms(&c, 1, 10000));
    char args[3000], id[64], st[32];
    snprintf(args, sizeof args, "%s/out %s/ck 1000 --p=1", c.dir, c.dir);
    submit(&c, args, id, sizeof id);
    CHECK(id[0]);
    CHECK(!wait_state(&c, id, "FINISHED", 20000, st, sizeof st));
    CHECK(strcmp(st, "FAILED") == 0);
    CHECK(count_in(c.jm.log, "TaskManager tm-2 refuses job 'cluster-job': the job it built has plan fingerprint") >=
          1);
    cluster_stop(&c);
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
    cluster_init(&c, "badframes");
    start_jm(&c);
    start_tm(&c, 1, 1, NULL, NULL);
    CHECK(wait_tms(&c, 1, 10000));
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
    int before = count_in(c.jm.log, "refused: control message from");
    for (int k = 0; k < 3; k++) {
        probe_t pr = {.mu = PTHREAD_MUTEX_INITIALIZER};
        sl_rpc_callbacks_t cbs = {pr_open, pr_msg, pr_closed, &pr};
        sl_rpc_conn_t *conn = NULL;
        CHECK_EQ(sl_rpc_connect(rpc, "127.0.0.1", c.rpc_port, &cbs, &conn), 0);
        CHECK_EQ(sl_rpc_send(conn, cases[k].p, cases[k].len), 0);
        int64_t t0 = now_ms();
        for (;;) {
            pthread_mutex_lock(&pr.mu);
            int closed = pr.closed;
            pthread_mutex_unlock(&pr.mu);
            if (closed || now_ms() - t0 > 5000) break;
            sleep_ms(20);
        }
        CHECK_EQ(pr.closed, 1); /* the JobManager closed it */
        sl_rpc_conn_release(conn);
        CHECK(count_in(c.jm.log, cases[k].words) >= 1);
    }
    CHECK_EQ(count_in(c.jm.log, "refused: control message from") - before, 3);
    CHECK_EQ(registered_tms(&c), 1); /* still serving, the probe never registered */
    sl_rpc_destroy(rpc);
    sl_buf_free(&good);
    sl_buf_free(&newer);
    sl_buf_free(&cut);
    cluster_stop(&c);
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
    cluster_init(&c, "netns");
    c.jm_host = "10.213.0.1"; /* reachable from both sides */
    c.evenly = true;          /* one subtask on each TaskManager */
    start_jm(&c);
    g_tm_host = "10.213.0.1";
    for (int i = 1; i <= 3; i++) start_tm(&c, i, 2, NULL, NULL);
    g_netns = ns;
    g_tm_host = "10.213.0.2";
    proc_t *remote = start_tm(&c, 9, 2, NULL, NULL); /* the "host" behind the veth */
    g_netns = NULL;
    g_tm_host = NULL;
    bool ok = wait_tms(&c, 4, 10000);
    if (!ok) dump_logs(&c);
    CHECK(ok);
    const long long N = 600000;
    char args[3000], id[64], st[32];
    /* evenly spread: the remote TaskManager surely runs part of the job */
    snprintf(args, sizeof args, "%s/out %s/ck %lld --p=4 --rate=100000", c.dir, c.dir, N);
    submit(&c, args, id, sizeof id);
    CHECK(id[0]);
    CHECK(wait_state(&c, id, "RUNNING", 10000, st, sizeof st));
    sleep_ms(1500);
    CHECK(count_in(remote->log, "deploying job") >= 1);
    sh("ip link set sl-veth0 down");
    int64_t t0 = now_ms();
    while (!count_in(c.jm.log, "sluice jobmanager: lost TaskManager tm-9") && now_ms() - t0 < 15000) sleep_ms(50);
    fprintf(stderr, "  link cut: tm-9 declared lost after %lld ms\n", (long long)(now_ms() - t0));
    CHECK(count_in(c.jm.log, "sluice jobmanager: lost TaskManager tm-9") >= 1);
    ok = wait_state(&c, id, "FINISHED", 120000, st, sizeof st);
    if (!ok) dump_logs(&c);
    CHECK(ok);
    char out[1200];
    snprintf(out, sizeof out, "%s/out", c.dir);
    CHECK_EQ(wo_check(out, N), 0);
    /* the link back: the TaskManager notices it lost its JobManager and registers again */
    int before = count_in(c.jm.log, "registered TaskManager tm-9");
    sh("ip link set sl-veth0 up");
    t0 = now_ms();
    while (count_in(c.jm.log, "registered TaskManager tm-9") == before && now_ms() - t0 < 20000) sleep_ms(100);
    fprintf(stderr, "  link restored: tm-9 registered again after %lld ms\n", (long long)(now_ms() - t0));
    CHECK(count_in(c.jm.log, "registered TaskManager tm-9") > before);
    cluster_stop(&c);
    snprintf(cmd, sizeof cmd, "ip netns del %s; ip link del sl-veth0 2>/dev/null; true", ns);
    sh(cmd);
}

int main(void) {
    srand((unsigned)time(NULL));
    signal(SIGPIPE, SIG_IGN);
    RUN(seeds_placement);
    RUN(kill9_failover);
    RUN(heartbeat_timeout);
    RUN(rescale_2_to_3);
    RUN(too_few_slots);
    RUN(wrong_secret_and_plan_mismatch);
    RUN(bad_control_frames);
    RUN(network_namespace_link_cut);
    return sl_test_failures ? 1 : 0;
}
