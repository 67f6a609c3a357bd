/*
 * test_ha.c — JobManager high availability with real processes and a real
 * ZooKeeper (the `zookeeper` ctest fixture, scripts/zookeeper.sh): three
 * `sluice jobmanager`s with high-availability.type zookeeper and two
 * TaskManagers that follow the leader; the checkpointed cluster job
 * (tests/tools/cluster_job.c: windows into the exactly-once file sink)
 * submitted through the client, which finds the leader in ZooKeeper.
 *
 *   - leader_kill_zk_restart_partition: kill -9 of the leader three times,
 *     each after a checkpoint completed under it; a new leader runs the job
 *     again each time (same job id, restored from the latest checkpoint),
 *     a JobManager replaces the dead one; then ZooKeeper restarts under the
 *     running job; then the leader is stopped (SIGSTOP) for longer than its
 *     session timeout and resumed: it must say it lost its session, stand
 *     by, and send nothing the TaskManagers would refuse.  The committed
 *     output equals the brute-force windows exactly, the checkpoint ids seen
 *     in ZooKeeper grow strictly from one leader to the next, and the
 *     finished job is gone from the stores.  Last, a leader stopped with
 *     SIGTERM suspends its job (not cancels it) and the next one resumes it;
 *   - cancelled_job_leaves_stores: `sluice cancel` through ZooKeeper's
 *     leader address; the job leaves every store and is not recovered;
 *   - missing_keys_refused: a JobManager with HA on and no quorum / no
 *     storageDir exits at once naming the key.
 */
#include <inttypes.h>

#include "cluster_util.h"
#include "config/config.h"
#include "ha/ha_services.h"
#include "window_output.h"

#define NJM 3
#define SESSION "2 s"

typedef struct ha_cluster {
    cluster_t c;             /* dir, secret, heartbeats; c.rest_port: the leader's */
    char quorum[256], cluster_id[128], storage[1200];
    int rpc[NJM], rest[NJM]; /* each JobManager's ports */
    proc_t jm[NJM];
    int gen;                 /* JobManager processes started (log names) */
    sl_ha_config_t hc;
    sl_ha_t *observer;       /* the test's own session: reads the stores */
} ha_cluster_t;

static bool read_quorum(char *out, size_t cap) {
    const char *f = getenv("SLUICE_ZK_QUORUM_FILE");
    FILE *in = f ? fopen(f, "r") : NULL;
    bool ok = in && fgets(out, (int)cap, in);
    if (in) fclose(in);
    if (!ok) fprintf(stderr, "no ZooKeeper: SLUICE_ZK_QUORUM_FILE (%s) unreadable (ctest's zookeeper fixture)\n",
                     f ? f : "unset");
    out[strcspn(out, "\r\n")] = 0;
    return ok;
}

static void ha_keys(ha_cluster_t *h, char keys[6][1400]) {
    snprintf(keys[0], 1400, "high-availability.type=zookeeper");
    snprintf(keys[1], 1400, "high-availability.zookeeper.quorum=%s", h->quorum);
    snprintf(keys[2], 1400, "high-availability.storageDir=%s", h->storage);
    snprintf(keys[3], 1400, "high-availability.cluster-id=%s", h->cluster_id);
    snprintf(keys[4], 1400, "high-availability.zookeeper.client.session-timeout=%s", SESSION);
    snprintf(keys[5], 1400, "heartbeat.timeout=%s", h->c.hb_timeout);
}

static void start_jm(ha_cluster_t *h, int k) {
    proc_t *p = &h->jm[k];
    char log[sizeof p->log];
    snprintf(log, sizeof log, "%s/jm-%d.log", h->c.dir, h->gen++);
    memcpy(p->log, log, sizeof log);
    snprintf(p->id, sizeof p->id, "jm-%d", k);
    char keys[6][1400], rpc[64], rest[64], hbi[64], sec[128];
    ha_keys(h, keys);
    snprintf(rpc, sizeof rpc, "jobmanager.rpc.port=%d", h->rpc[k]);
    snprintf(rest, sizeof rest, "rest.port=%d", h->rest[k]);
    snprintf(hbi, sizeof hbi, "heartbeat.interval=%s", h->c.hb_interval);
    snprintf(sec, sizeof sec, "security.internal.secret=%s", h->c.secret);
    char *argv[] = {"sluice", "jobmanager", "-D", rpc,     "-D", rest,    "-D", hbi,     "-D", sec,     "-D",
                    keys[0],  "-D",         keys[1], "-D", keys[2], "-D", keys[3], "-D", keys[4], "-D", keys[5],
                    NULL};
    p->pid = cl_spawn(p->log, argv);
}

static void start_tm(ha_cluster_t *h, int n) {
    proc_t *p = &h->c.tm[h->c.ntm++];
    snprintf(p->id, sizeof p->id, "tm-%d", n);
    char log[sizeof p->log];
    snprintf(log, sizeof log, "%s/tm-%d.log", h->c.dir, n);
    memcpy(p->log, log, sizeof log);
    char keys[6][1400], sl[64], hbi[64], sec[128];
    ha_keys(h, keys);
    snprintf(sl, sizeof sl, "taskmanager.numberOfTaskSlots=%d", 2);
    snprintf(hbi, sizeof hbi, "heartbeat.interval=%s", h->c.hb_interval);
    snprintf(sec, sizeof sec, "security.internal.secret=%s", h->c.secret);
    char *argv[] = {"sluice", "taskmanager", "--id", p->id, "-D", sl,      "-D", hbi,     "-D", sec,     "-D", keys[0],
                    "-D",     keys[1],       "-D",   keys[2], "-D", keys[3], "-D", keys[4], "-D", keys[5], NULL};
    p->pid = cl_spawn(p->log, argv);
}

/* The leader published in ZooKeeper: its index (by REST port), or -1. */
static int leader(ha_cluster_t *h, char *token, size_t cap) {
    sl_ha_leader_t l;
    char err[512];
    if (sl_ha_leader_read(sl_ha_zk(h->observer), &l, err, sizeof err) < 0) return -1;
    const char *colon = strrchr(l.rest_url, ':');
    int port = colon ? atoi(colon + 1) : -1;
    for (int k = 0; k < NJM; k++)
        if (h->rest[k] == port && h->jm[k].pid > 0) {
            if (token) snprintf(token, cap, "%s", l.token);
            return k;
        }
    return -1;
}

/* Until a leader other than `not_token` (NULL: any) is published. */
static int wait_leader(ha_cluster_t *h, const char *not_token, char *token, size_t cap, int ms) {
    int64_t end = cl_now_ms() + ms;
    while (cl_now_ms() < end) {
        char t[64] = "";
        int k = leader(h, t, sizeof t);
        if (k >= 0 && (!not_token || strcmp(t, not_token))) {
            snprintf(token, cap, "%s", t);
            h->c.rest_port = h->rest[k];
            return k;
        }
        cl_sleep_ms(50);
    }
    return -1;
}

/* The checkpoint ids in the completed checkpoint store now, into seen[] as
 * (id, term) pairs not seen before; returns the newest (0: none). */
typedef struct seen_id {
    int64_t id;
    int term;
} seen_id_t;
static seen_id_t g_seen[4096];
static int g_nseen;

static int64_t observe(ha_cluster_t *h, const char *job, int term) {
    int64_t ids[64];
    char err[512];
    int n = sl_ha_checkpoint_ids(h->observer, job, ids, 64, err, sizeof err);
    int64_t newest = 0;
    for (int i = 0; i < n; i++) {
        bool known = false;
        for (int k = 0; k < g_nseen && !known; k++) known = g_seen[k].id == ids[i];
        if (!known && g_nseen < 4096) g_seen[g_nseen++] = (seen_id_t){ids[i], term};
        if (ids[i] > newest) newest = ids[i];
    }
    return newest;
}

/* Until a checkpoint newer than `after` completed (observing as it goes). */
static int64_t wait_checkpoint(ha_cluster_t *h, const char *job, int term, int64_t after, int ms) {
    int64_t end = cl_now_ms() + ms;
    while (cl_now_ms() < end) {
        int64_t n = observe(h, job, term);
        if (n > after) return n;
        cl_sleep_ms(20);
    }
    return -1;
}

static bool ha_init(ha_cluster_t *h, const char *name) {
    memset(h, 0, sizeof *h);
    cl_cluster_init(&h->c, name);
    if (!read_quorum(h->quorum, sizeof h->quorum)) return false;
    snprintf(h->cluster_id, sizeof h->cluster_id, "%s-%d", name, (int)getpid());
    snprintf(h->storage, sizeof h->storage, "%s/ha", h->c.dir);
    for (int k = 0; k < NJM; k++) h->rpc[k] = cl_free_port(), h->rest[k] = cl_free_port();
    sl_config_t cfg;
    sl_config_defaults(&cfg);
    char err[512];
    bool ok = sl_config_set(&cfg, "high-availability.type", "zookeeper", err, sizeof err) == 0 &&
              sl_config_set(&cfg, "high-availability.zookeeper.quorum", h->quorum, err, sizeof err) == 0 &&
              sl_config_set(&cfg, "high-availability.storageDir", h->storage, err, sizeof err) == 0 &&
              sl_config_set(&cfg, "high-availability.cluster-id", h->cluster_id, err, sizeof err) == 0 &&
              sl_ha_config_from(&cfg, true, &h->hc, err, sizeof err) == 0 &&
              sl_ha_open(&h->hc, &h->observer, err, sizeof err) == 0;
    sl_config_free(&cfg);
    if (!ok) fprintf(stderr, "  HA setup: %s\n", err);
    return ok;
}

/* `sluice run -d` with the HA keys and no address: the client asks ZooKeeper. */
static void submit(ha_cluster_t *h, const char *args, char *id, size_t cap) {
    char cmd[16384], line[512];
    snprintf(cmd, sizeof cmd,
             "%s run -d -D high-availability.type=zookeeper -D high-availability.zookeeper.quorum=%s "
             "-D high-availability.cluster-id=%s %s %s 2>&1",
             SLUICE_BIN, h->quorum, h->cluster_id, SLUICE_CLUSTER_JOB, args);
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

static long file_size(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

/* How often needle occurs in path after byte `from`. */
static int count_after(const char *path, long from, const char *needle) {
    char *s = cl_slurp(path);
    long len = (long)strlen(s);
    int n = 0;
    for (const char *p = s + (from < len ? from : len); (p = strstr(p, needle)); p++) n++;
    free(s);
    return n;
}

static void ha_stop(ha_cluster_t *h) {
    cl_cluster_stop(&h->c);
    for (int k = 0; k < NJM; k++) cl_stop(&h->jm[k]);
    sl_ha_close(h->observer);
    h->observer = NULL;
}

static void dump(ha_cluster_t *h) {
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "tail -n 25 '%s'/*.log >&2", h->c.dir);
    if (system(cmd) != 0) fprintf(stderr, "  (no logs)\n");
}

TEST(leader_kill_zk_restart_partition) {
    ha_cluster_t h;
    CHECK(ha_init(&h, "ha"));
    for (int k = 0; k < NJM; k++) {
        start_jm(&h, k);
        cl_sleep_ms(150); /* the first one leads, the others stand by */
    }
    char token[64] = "", prev[64] = "";
    int L = wait_leader(&h, NULL, token, sizeof token, 20000);
    if (L < 0) dump(&h);
    CHECK(L >= 0);
    for (int n = 1; n <= 2; n++) start_tm(&h, n);
    CHECK(cl_wait_tms(&h.c, 2, 15000));
    const long long N = 1500000;
    char args[3000], id[64], st[32];
    snprintf(args, sizeof args, "%s/out %s/ck %lld --rate=40000", h.c.dir, h.c.dir, N);
    submit(&h, args, id, sizeof id);
    CHECK(id[0]);
    bool ok = cl_wait_state(&h.c, id, "RUNNING", 20000, st, sizeof st);
    if (!ok) dump(&h);
    CHECK(ok);
    int term = 0;
    int64_t newest = 0;

    /* kill -9 of the leader, three times, each after a checkpoint under it */
    for (int kill = 0; kill < 3; kill++) {
        newest = wait_checkpoint(&h, id, term, newest, 20000);
        if (newest < 0) dump(&h);
        CHECK(newest > 0);
        fprintf(stderr, "  kill -9 of leader jm-%d (checkpoint %" PRId64 " completed under it)\n", L, newest);
        snprintf(prev, sizeof prev, "%s", token);
        cl_stop(&h.jm[L]);
        int dead = L;
        L = wait_leader(&h, prev, token, sizeof token, 20000);
        if (L < 0) dump(&h);
        CHECK(L >= 0);
        term++;
        start_jm(&h, dead); /* a new standby in its place */
        ok = cl_wait_state(&h.c, id, "RUNNING", 30000, st, sizeof st);
        if (!ok) dump(&h);
        CHECK(ok); /* the same job id, run again by the new leader */
        CHECK(cl_count_in(h.jm[L].log, "recovered 1 job") == 1);
    }

    /* ZooKeeper restarts under the running job: the job goes on, the leader stays */
    newest = wait_checkpoint(&h, id, term, newest, 20000);
    CHECK(newest > 0);
    fprintf(stderr, "  restarting ZooKeeper\n");
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "%s restart >/dev/null", SLUICE_ZK_SCRIPT);
    CHECK_EQ(system(cmd), 0);
    /* a checkpoint issued after the restart (above the counter as it is
     * now) completes: whoever issued it leads and has published /leader (a
     * leader whose session was lost in the restart has stopped, and its
     * /leader is gone once the server expires its session) */
    int64_t counter = 0;
    char cerr[512];
    for (int i = 0; i < 100 && sl_ha_counter_get(h.observer, id, &counter, cerr, sizeof cerr) < 0; i++) cl_sleep_ms(100);
    CHECK(counter > 0);
    newest = wait_checkpoint(&h, id, term, counter - 1 > newest ? counter - 1 : newest, 30000);
    if (newest < 0) dump(&h);
    CHECK(newest > 0);
    int now_leader = wait_leader(&h, NULL, token, sizeof token, 10000);
    CHECK(now_leader >= 0);
    if (now_leader != L) term++, L = now_leader; /* a session lost in the restart: another term, which is allowed */

    /* the leader is cut off (SIGSTOP) past its session timeout, then resumed */
    newest = wait_checkpoint(&h, id, term, newest, 20000);
    CHECK(newest > 0);
    int stopped = L;
    long mark = file_size(h.jm[stopped].log);
    long tm_mark[2] = {file_size(h.c.tm[0].log), file_size(h.c.tm[1].log)};
    snprintf(prev, sizeof prev, "%s", token);
    fprintf(stderr, "  SIGSTOP of leader jm-%d\n", stopped);
    kill(h.jm[stopped].pid, SIGSTOP);
    L = wait_leader(&h, prev, token, sizeof token, 20000);
    if (L < 0) dump(&h);
    CHECK(L >= 0);
    term++;
    ok = cl_wait_state(&h.c, id, "RUNNING", 30000, st, sizeof st);
    CHECK(ok);
    newest = wait_checkpoint(&h, id, term, newest, 20000); /* the new leader checkpoints */
    CHECK(newest > 0);
    fprintf(stderr, "  SIGCONT of jm-%d (jm-%d leads)\n", stopped, L);
    kill(h.jm[stopped].pid, SIGCONT);
    int64_t end = cl_now_ms() + 15000;
    while (cl_now_ms() < end && !count_after(h.jm[stopped].log, mark, "standing by again")) cl_sleep_ms(50);
    CHECK(count_after(h.jm[stopped].log, mark, "lost the ZooKeeper session") == 1);
    CHECK(count_after(h.jm[stopped].log, mark, "standing by again") == 1);
    cl_sleep_ms(1000);
    /* it sent nothing a TaskManager heard: no message refused from a non-leader, */
    for (int i = 0; i < 2; i++) CHECK_EQ(count_after(h.c.tm[i].log, tm_mark[i], "not the leader it follows"), 0);
    /* its REST server is gone, and the leader did not change back */
    char *body = cl_http_get(h.rest[stopped], "/jobs/overview");
    CHECK(body == NULL);
    char t2[64];
    CHECK_EQ(leader(&h, t2, sizeof t2), L);

    /* a leader stopped with SIGTERM suspends its job (it stays in the
     * stores) and the next leader resumes it */
    newest = wait_checkpoint(&h, id, term, newest, 20000);
    CHECK(newest > 0);
    fprintf(stderr, "  SIGTERM of leader jm-%d\n", L);
    snprintf(prev, sizeof prev, "%s", token);
    kill(h.jm[L].pid, SIGTERM);
    int status = 0;
    CHECK(waitpid(h.jm[L].pid, &status, 0) == h.jm[L].pid);
    for (int k = 0; k < cl_npids; k++)
        if (cl_pids[k] == h.jm[L].pid) cl_pids[k--] = cl_pids[--cl_npids];
    h.jm[L].pid = 0;
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    L = wait_leader(&h, prev, token, sizeof token, 20000);
    CHECK(L >= 0);
    term++;
    ok = cl_wait_state(&h.c, id, "RUNNING", 30000, st, sizeof st);
    if (!ok) dump(&h);
    CHECK(ok);

    ok = cl_wait_state(&h.c, id, "FINISHED", 120000, st, sizeof st);
    if (!ok) dump(&h);
    CHECK(ok);
    /* checkpoint ids: strictly above every earlier leader's */
    int64_t max_before = 0;
    int terms_seen = 0;
    for (int t = 0; t <= term; t++) {
        int64_t lo = INT64_MAX, hi = 0;
        for (int i = 0; i < g_nseen; i++)
            if (g_seen[i].term == t) {
                if (g_seen[i].id < lo) lo = g_seen[i].id;
                if (g_seen[i].id > hi) hi = g_seen[i].id;
            }
        if (!hi) continue;
        terms_seen++;
        fprintf(stderr, "  term %d: checkpoints %" PRId64 "..%" PRId64 "\n", t, lo, hi);
        CHECK(lo > max_before);
        max_before = hi;
    }
    CHECK(terms_seen >= 5);
    /* the finished job left the stores */
    char **ids;
    int n;
    char err[512];
    end = cl_now_ms() + 5000;
    for (;;) {
        CHECK_EQ(sl_ha_job_ids(h.observer, &ids, &n, err, sizeof err), 0);
        sl_zk_free_names(ids, n);
        if (n == 0 || cl_now_ms() > end) break;
        cl_sleep_ms(100);
    }
    CHECK_EQ(n, 0);
    char out[1100];
    snprintf(out, sizeof out, "%.1000s/out", h.c.dir);
    CHECK_EQ(wo_check(out, N), 0);
    ha_stop(&h);
}

/* `sluice cancel` through the client (which finds the leader in
 * ZooKeeper): the cancelled job leaves the job graph store, its counter and
 * its checkpoints, and no JobManager that leads next runs it again. */
TEST(cancelled_job_leaves_stores) {
    ha_cluster_t h;
    CHECK(ha_init(&h, "hacancel"));
    start_jm(&h, 0);
    char token[64];
    CHECK(wait_leader(&h, NULL, token, sizeof token, 20000) == 0);
    start_tm(&h, 1);
    CHECK(cl_wait_tms(&h.c, 1, 15000));
    char args[3000], id[64], st[32];
    snprintf(args, sizeof args, "%s/out %s/ck %d --rate=20000", h.c.dir, h.c.dir, 50000000);
    submit(&h, args, id, sizeof id);
    CHECK(id[0]);
    CHECK(cl_wait_state(&h.c, id, "RUNNING", 20000, st, sizeof st));
    CHECK(wait_checkpoint(&h, id, 0, 0, 20000) > 0);
    char **ids;
    int n;
    char err[512];
    CHECK_EQ(sl_ha_job_ids(h.observer, &ids, &n, err, sizeof err), 0);
    sl_zk_free_names(ids, n);
    CHECK_EQ(n, 1);
    char cmd[4000];
    snprintf(cmd, sizeof cmd,
             "%s cancel -D high-availability.type=zookeeper -D high-availability.zookeeper.quorum=%s "
             "-D high-availability.cluster-id=%s %s >/dev/null 2>&1",
             SLUICE_BIN, h.quorum, h.cluster_id, id);
    CHECK_EQ(system(cmd), 0);
    CHECK(!cl_wait_state(&h.c, id, "RUNNING-never", 20000, st, sizeof st));
    CHECK_STR(st, "CANCELED");
    int64_t end = cl_now_ms() + 5000, next = 0, ck = 0;
    do {
        CHECK_EQ(sl_ha_job_ids(h.observer, &ids, &n, err, sizeof err), 0);
        sl_zk_free_names(ids, n);
        if (n) cl_sleep_ms(100);
    } while (n && cl_now_ms() < end);
    CHECK_EQ(n, 0);
    char path[600];
    CHECK_EQ(sl_ha_checkpoint_latest(h.observer, id, &ck, path, sizeof path, err, sizeof err), SL_ENOTFOUND);
    CHECK_EQ(sl_ha_counter_get(h.observer, id, &next, err, sizeof err), 0);
    CHECK_EQ(next, 1); /* the counter went with it (read again, it starts afresh) */
    /* the next leader finds nothing to recover */
    char prev[64];
    snprintf(prev, sizeof prev, "%s", token);
    start_jm(&h, 1);
    cl_stop(&h.jm[0]);
    CHECK(wait_leader(&h, prev, token, sizeof token, 20000) == 1);
    cl_sleep_ms(500);
    CHECK_EQ(cl_count_in(h.jm[1].log, "recovered"), 0);
    ha_stop(&h);
}

TEST(missing_keys_refused) {
    ha_cluster_t h;
    CHECK(ha_init(&h, "hakeys"));
    const char *cases[2][3] = {{"high-availability.type=zookeeper", "high-availability.storageDir=/tmp/x",
                                "high-availability.zookeeper.quorum"},
                               {"high-availability.type=ZOOKEEPER", "high-availability.zookeeper.quorum=127.0.0.1:1",
                                "high-availability.storageDir"}};
    for (int i = 0; i < 2; i++) {
        char log[1400];
        snprintf(log, sizeof log, "%s/keys-%d.log", h.c.dir, i);
        char *argv[] = {"sluice", "jobmanager", "-D", (char *)cases[i][0], "-D", (char *)cases[i][1], NULL};
        pid_t pid = cl_spawn(log, argv);
        int status = 0;
        CHECK(waitpid(pid, &status, 0) == pid);
        for (int k = 0; k < cl_npids; k++)
            if (cl_pids[k] == pid) cl_pids[k--] = cl_pids[--cl_npids];
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 2);
        CHECK(cl_count_in(log, cases[i][2]) >= 1);
    }
    ha_stop(&h);
}

int main(void) {
    srand((unsigned)time(NULL));
    RUN(missing_keys_refused);
    RUN(cancelled_job_leaves_stores);
    RUN(leader_kill_zk_restart_partition);
    TEST_MAIN_END();
}
