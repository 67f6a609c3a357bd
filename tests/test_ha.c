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
 *     session timeout and resumed: it must say it lost its session,
 *     suspend its job (never fail it), stand by, and send nothing the
 *     TaskManagers would refuse.  The committed
 *     output equals the brute-force windows exactly, the checkpoint ids seen
 *     in ZooKeeper grow strictly from one leader to the next, and the
 *     finished job is gone from the stores.  Last, a leader stopped with
 *     SIGTERM suspends its job (not cancels it) and the next one resumes it;
 *     Every wait asks the leader of the moment (ha_wait_state): on a loaded
 *     machine a 2 s session may also expire by itself, and the job must
 *     survive that extra change of leader too;
 *   - cancelled_job_leaves_stores: `sluice cancel` through ZooKeeper's
 *     leader address; the job leaves every store and is not recovered;
 *   - s3_storage_dir_failover: high-availability.storageDir and the
 *     checkpoints in S3; kill -9 of the leader; the standby fetches the
 *     artifact from S3 and runs the job to an exact end;
 *   - missing_keys_refused: a JobManager with HA on and no quorum / no
 *     storageDir exits at once naming the key.
 */
#include "checkpoint/s3_client.h"
#include "ha_util.h"
#include "window_output.h"

TEST(leader_kill_zk_restart_partition) {
    ha_cluster_t h;
    CHECK(ha_init(&h, "ha"));
    for (int k = 0; k < HA_NJM; k++) {
        ha_start_jm(&h, k);
        cl_sleep_ms(150); /* the first one leads, the others stand by */
    }
    char token[64] = "", prev[64] = "";
    int L = ha_wait_leader(&h, NULL, token, sizeof token, 20000);
    if (L < 0) ha_dump(&h);
    CHECK(L >= 0);
    for (int n = 1; n <= 2; n++) ha_start_tm(&h, n, 2);
    CHECK(cl_wait_tms(&h.c, 2, 15000));
    const long long N = 1500000;
    char args[3000], id[64], st[32];
    snprintf(args, sizeof args, "%s/out %s/ck %lld --rate=40000", h.c.dir, h.c.dir, N);
    ha_submit(&h, SLUICE_CLUSTER_JOB, args, id, sizeof id);
    CHECK(id[0]);
    bool ok = ha_wait_state(&h, id, "RUNNING", 20000, st, sizeof st);
    if (!ok) ha_dump(&h);
    CHECK(ok);
    int term = 0;
    int64_t newest = 0;

    /* kill -9 of the leader, three times, each after a checkpoint under it */
    for (int kill = 0; kill < 3; kill++) {
        newest = ha_wait_checkpoint(&h, id, term, newest, 20000);
        if (newest < 0) ha_dump(&h);
        CHECK(newest > 0);
        L = ha_wait_leader(&h, NULL, token, sizeof token, 20000); /* the leader now (see ha_job_state) */
        CHECK(L >= 0);
        fprintf(stderr, "  kill -9 of leader jm-%d (checkpoint %" PRId64 " completed under it)\n", L, newest);
        snprintf(prev, sizeof prev, "%s", token);
        cl_stop(&h.jm[L]);
        int dead = L;
        L = ha_wait_leader(&h, prev, token, sizeof token, 20000);
        if (L < 0) ha_dump(&h);
        CHECK(L >= 0);
        term++;
        ha_start_jm(&h, dead); /* a new standby in its place */
        ok = ha_wait_state(&h, id, "RUNNING", 30000, st, sizeof st);
        if (!ok) ha_dump(&h);
        CHECK(ok); /* the same job id, run again by the new leader */
        CHECK(cl_count_in(h.jm[L].log, "recovered 1 job") == 1);
    }

    /* ZooKeeper restarts under the running job: the job goes on, the leader stays */
    newest = ha_wait_checkpoint(&h, id, term, newest, 20000);
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
    /* up to 30 s: under ASan on a loaded machine 10 s was once too short */
    for (int i = 0; i < 300 && sl_ha_counter_get(h.observer, id, &counter, cerr, sizeof cerr) < 0; i++) cl_sleep_ms(100);
    CHECK(counter > 0);
    newest = ha_wait_checkpoint(&h, id, term, counter - 1 > newest ? counter - 1 : newest, 30000);
    if (newest < 0) ha_dump(&h);
    CHECK(newest > 0);
    int now_leader = ha_wait_leader(&h, NULL, token, sizeof token, 10000);
    CHECK(now_leader >= 0);
    if (now_leader != L) term++, L = now_leader; /* a session lost in the restart: another term, which is allowed */

    /* the leader is cut off (SIGSTOP) past its session timeout, then resumed */
    newest = ha_wait_checkpoint(&h, id, term, newest, 20000);
    CHECK(newest > 0);
    L = ha_wait_leader(&h, NULL, token, sizeof token, 20000);
    CHECK(L >= 0);
    int stopped = L;
    long mark = ha_file_size(h.jm[stopped].log);
    long tm_mark[2] = {ha_file_size(h.c.tm[0].log), ha_file_size(h.c.tm[1].log)};
    snprintf(prev, sizeof prev, "%s", token);
    fprintf(stderr, "  SIGSTOP of leader jm-%d\n", stopped);
    kill(h.jm[stopped].pid, SIGSTOP);
    L = ha_wait_leader(&h, prev, token, sizeof token, 20000);
    if (L < 0) ha_dump(&h);
    CHECK(L >= 0);
    term++;
    ok = ha_wait_state(&h, id, "RUNNING", 30000, st, sizeof st);
    CHECK(ok);
    newest = ha_wait_checkpoint(&h, id, term, newest, 20000); /* the new leader checkpoints */
    CHECK(newest > 0);
    fprintf(stderr, "  SIGCONT of jm-%d (jm-%d leads)\n", stopped, L);
    kill(h.jm[stopped].pid, SIGCONT);
    int64_t end = cl_now_ms() + 15000;
    while (cl_now_ms() < end && !ha_count_after(h.jm[stopped].log, mark, "standing by again")) cl_sleep_ms(50);
    CHECK(ha_count_after(h.jm[stopped].log, mark, "lost the ZooKeeper session") == 1);
    CHECK(ha_count_after(h.jm[stopped].log, mark, "standing by again") == 1);
    /* its job was suspended, never failed (not even when a restart that
     * waited for the completed checkpoint store saw the session go) */
    CHECK_EQ(ha_count_after(h.jm[stopped].log, mark, ") SUSPENDED: "), 1);
    CHECK_EQ(ha_count_after(h.jm[stopped].log, mark, ") FAILED"), 0);
    cl_sleep_ms(1000);
    /* it sent nothing a TaskManager heard: no message refused from a non-leader, */
    for (int i = 0; i < 2; i++) CHECK_EQ(ha_count_after(h.c.tm[i].log, tm_mark[i], "not the leader it follows"), 0);
    /* its REST server is gone, and the leader did not change back */
    char *body = cl_http_get(h.rest[stopped], "/jobs/overview");
    CHECK(body == NULL);
    char t2[64];
    int now = ha_leader(&h, t2, sizeof t2);
    CHECK(now >= 0 && now != stopped);

    /* a leader stopped with SIGTERM suspends its job (it stays in the
     * stores) and the next leader resumes it */
    newest = ha_wait_checkpoint(&h, id, term, newest, 20000);
    CHECK(newest > 0);
    L = ha_wait_leader(&h, NULL, token, sizeof token, 20000);
    CHECK(L >= 0);
    fprintf(stderr, "  SIGTERM of leader jm-%d\n", L);
    snprintf(prev, sizeof prev, "%s", token);
    kill(h.jm[L].pid, SIGTERM);
    int status = 0;
    CHECK(waitpid(h.jm[L].pid, &status, 0) == h.jm[L].pid);
    for (int k = 0; k < cl_npids; k++)
        if (cl_pids[k] == h.jm[L].pid) cl_pids[k--] = cl_pids[--cl_npids];
    h.jm[L].pid = 0;
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    L = ha_wait_leader(&h, prev, token, sizeof token, 20000);
    CHECK(L >= 0);
    term++;
    ok = ha_wait_state(&h, id, "RUNNING", 30000, st, sizeof st);
    if (!ok) ha_dump(&h);
    CHECK(ok);

    ok = ha_wait_state(&h, id, "FINISHED", 120000, st, sizeof st);
    if (!ok) ha_dump(&h);
    CHECK(ok);
    /* checkpoint ids: strictly above every earlier leader's */
    CHECK(ha_terms_growing(term) >= 5);
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
    ha_start_jm(&h, 0);
    char token[64];
    CHECK(ha_wait_leader(&h, NULL, token, sizeof token, 20000) == 0);
    ha_start_tm(&h, 1, 2);
    CHECK(cl_wait_tms(&h.c, 1, 15000));
    char args[3000], id[64], st[32];
    snprintf(args, sizeof args, "%s/out %s/ck %d --rate=20000", h.c.dir, h.c.dir, 50000000);
    ha_submit(&h, SLUICE_CLUSTER_JOB, args, id, sizeof id);
    CHECK(id[0]);
    CHECK(ha_wait_state(&h, id, "RUNNING", 20000, st, sizeof st));
    CHECK(ha_wait_checkpoint(&h, id, 0, 0, 20000) > 0);
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
    CHECK(!ha_wait_state(&h, id, "RUNNING-never", 20000, st, sizeof st));
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
    ha_start_jm(&h, 1);
    cl_stop(&h.jm[0]);
    CHECK(ha_wait_leader(&h, prev, token, sizeof token, 20000) == 1);
    cl_sleep_ms(500);
    CHECK_EQ(cl_count_in(h.jm[1].log, "recovered"), 0);
    ha_stop(&h);
}

/* high-availability.storageDir and the checkpoints in S3 (the `s3`
 * fixture's S3Proxy), as on hosts that share no disk: the leader's upload
 * of the job's artifact is an object under storageDir; kill -9 of the
 * leader; the standby fetches the artifact into its own directory,
 * recovers the job from its latest checkpoint (in S3) and runs it to the
 * end, output exact; the job's objects under storageDir go with it. */
TEST(s3_storage_dir_failover) {
    char endpoint[256];
    const char *bucket;
    CHECK(cl_s3_setup(endpoint, sizeof endpoint, &bucket));
    ha_cluster_t h;
    CHECK(ha_init(&h, "has3"));
    char prefix[200];
    snprintf(prefix, sizeof prefix, "ha-s3-%d-%lld", (int)getpid(), (long long)sl_wall_ms());
    snprintf(h.storage, sizeof h.storage, "s3://%s/%s/ha", bucket, prefix);
    ha_start_jm(&h, 0);
    char token[64], prev[64];
    CHECK(ha_wait_leader(&h, NULL, token, sizeof token, 20000) == 0);
    ha_start_jm(&h, 1);
    ha_start_tm(&h, 1, 2);
    CHECK(cl_wait_tms(&h.c, 1, 15000));
    const long long N = 400000;
    char args[3000], id[64], st[32];
    snprintf(args, sizeof args, "%s/out s3://%s/%s/ck %lld --rate=40000", h.c.dir, bucket, prefix, N);
    ha_submit(&h, SLUICE_CLUSTER_JOB, args, id, sizeof id);
    CHECK(id[0]);
    bool ok = ha_wait_state(&h, id, "RUNNING", 20000, st, sizeof st);
    if (!ok) ha_dump(&h);
    CHECK(ok);
    sl_s3_config_t sc;
    sl_s3_client_t *cli = NULL;
    char e[1024], key[600];
    CHECK_EQ(sl_s3_config_resolve(&sc, e, sizeof e), 0);
    CHECK_EQ(sl_s3_client_new(&sc, bucket, &cli, e, sizeof e), 0);
    snprintf(key, sizeof key, "%s/ha/%s/job-%s/", prefix, h.cluster_id, id);
    sl_s3_object_t *objs;
    int n;
    CHECK_EQ(sl_s3_list(cli, key, &objs, &n, e, sizeof e), 0);
    CHECK_EQ(n, 1); /* the artifact */
    if (n == 1) CHECK(strstr(objs[0].key, ".so") != NULL);
    sl_s3_objects_free(objs, n);
    int64_t ck = ha_wait_checkpoint(&h, id, 0, 0, 30000);
    if (ck < 0) ha_dump(&h);
    CHECK(ck > 0);
    fprintf(stderr, "  kill -9 of leader jm-0 (checkpoint %" PRId64 " in S3)\n", ck);
    snprintf(prev, sizeof prev, "%s", token);
    cl_stop(&h.jm[0]);
    CHECK(ha_wait_leader(&h, prev, token, sizeof token, 20000) == 1);
    ok = ha_wait_state(&h, id, "RUNNING", 30000, st, sizeof st);
    if (!ok) ha_dump(&h);
    CHECK(ok);
    CHECK_EQ(cl_count_in(h.jm[1].log, "recovered 1 job"), 1);
    CHECK_EQ(cl_count_in(h.jm[1].log, "recovered: s3://"), 0); /* it runs its own copy */
    CHECK_EQ(cl_count_in(h.jm[1].log, "sluice-artifacts-"), 1);
    ok = ha_wait_state(&h, id, "FINISHED", 120000, st, sizeof st);
    if (!ok) ha_dump(&h);
    CHECK(ok);
    char out[1100];
    snprintf(out, sizeof out, "%.1000s/out", h.c.dir);
    CHECK_EQ(wo_check(out, N), 0);
    int64_t end = cl_now_ms() + 5000;
    for (;;) {
        CHECK_EQ(sl_s3_list(cli, key, &objs, &n, e, sizeof e), 0);
        sl_s3_objects_free(objs, n);
        if (n == 0 || cl_now_ms() > end) break;
        cl_sleep_ms(100);
    }
    CHECK_EQ(n, 0); /* the finished job's artifact left storageDir */
    sl_s3_client_free(cli);
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
    RUN(s3_storage_dir_failover);
    RUN(leader_kill_zk_restart_partition);
    TEST_MAIN_END();
}
