/*
 * test_ha_stores.c — the ZooKeeper side of JobManager high availability
 * (src/ha/) against a real ZooKeeper (the `zookeeper` ctest fixture,
 * scripts/zookeeper.sh): the checkpoint id counter, the completed
 * checkpoint store and the job graph store under random operations from
 * several sessions, each against a plain model kept here; the leader
 * election (the lowest latch leads, the next one when the leader's session
 * ends); the high-availability.* keys and their errors.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "checkpoint/s3_client.h"
#include "cluster_util.h"
#include "config/config.h"
#include "ha/ha_services.h"
#include "test.h"

static unsigned g_seed;
static char g_quorum[256];

static int rnd(int n) { return (int)(rand_r(&g_seed) % (unsigned)n); }

static bool quorum(void) {
    if (g_quorum[0]) return true;
    const char *f = getenv("SLUICE_ZK_QUORUM_FILE");
    FILE *in = f ? fopen(f, "r") : NULL;
    if (!in || !fgets(g_quorum, sizeof g_quorum, in)) {
        fprintf(stderr, "no ZooKeeper: SLUICE_ZK_QUORUM_FILE (%s) unreadable (run through ctest's zookeeper fixture)\n",
                f ? f : "unset");
        if (in) fclose(in);
        return false;
    }
    fclose(in);
    g_quorum[strcspn(g_quorum, "\r\n")] = 0;
    return true;
}

/* The HA configuration of a fresh cluster id (this run's own znodes). */
static void ha_cfg_in(sl_ha_config_t *out, const char *name, const char *storage) {
    sl_config_t cfg;
    sl_config_defaults(&cfg);
    char err[512], cid[128], dir[700];
    snprintf(cid, sizeof cid, "%s-%d-%u", name, (int)getpid(), g_seed);
    snprintf(dir, sizeof dir, "%s/ha-storage", sl_test_tmpdir());
    if (storage) snprintf(dir, sizeof dir, "%s", storage);
    if (sl_config_set(&cfg, "high-availability.type", "zookeeper", err, sizeof err) < 0 ||
        sl_config_set(&cfg, "high-availability.zookeeper.quorum", g_quorum, err, sizeof err) < 0 ||
        sl_config_set(&cfg, "high-availability.storageDir", dir, err, sizeof err) < 0 ||
        sl_config_set(&cfg, "high-availability.cluster-id", cid, err, sizeof err) < 0 ||
        sl_config_set(&cfg, "high-availability.zookeeper.client.session-timeout", "4 s", err, sizeof err) < 0 ||
        sl_ha_config_from(&cfg, true, out, err, sizeof err) < 0) {
        fprintf(stderr, "ha config: %s\n", err);
        abort();
    }
    sl_config_free(&cfg);
}
static void ha_cfg(sl_ha_config_t *out, const char *name) { ha_cfg_in(out, name, NULL); }

/* Several sessions issue ids of one job in random order; the model: an id
 * is issued iff it is >= the next one, which then becomes id + 1. */
TEST(checkpoint_id_counter_never_reissues) {
    CHECK(quorum());
    sl_ha_config_t c;
    ha_cfg(&c, "counter");
    sl_ha_t *ha[3];
    char err[512];
    for (int i = 0; i < 3; i++) CHECK_EQ(sl_ha_open(&c, &ha[i], err, sizeof err), 0);
    const char *jobs[2] = {"job-a", "job-b"};
    int64_t model[2] = {1, 1};
    for (int step = 0; step < 300; step++) {
        int j = rnd(2), s = rnd(3);
        int64_t next = 0;
        if (rnd(4) == 0) {
            CHECK_EQ(sl_ha_counter_get(ha[s], jobs[j], &next, err, sizeof err), 0);
            CHECK_EQ(next, model[j]);
            continue;
        }
        int64_t id = model[j] + rnd(5) - 2; /* below, at or above the next id */
        if (id < 1) id = 1;
        int rc = sl_ha_counter_issue(ha[s], jobs[j], id, err, sizeof err);
        if (id >= model[j]) {
            CHECK_EQ(rc, 0);
            model[j] = id + 1;
        } else {
            CHECK_EQ(rc, SL_ESTATE);
            CHECK_CONTAINS(err, "issued already");
        }
    }
    for (int j = 0; j < 2; j++) {
        int64_t next;
        CHECK_EQ(sl_ha_counter_get(ha[0], jobs[j], &next, err, sizeof err), 0);
        CHECK_EQ(next, model[j]);
        CHECK_EQ(sl_ha_job_remove(ha[0], jobs[j], err, sizeof err), 0);
        CHECK_EQ(sl_ha_counter_get(ha[1], jobs[j], &next, err, sizeof err), 0);
        CHECK_EQ(next, 1); /* removed with the job: a job submitted anew starts at 1 */
    }
    for (int i = 0; i < 3; i++) sl_ha_close(ha[i]);
}

/* Random adds with a random retention: the ids kept are the newest
 * `retain` of those added, the latest is the newest with its path. */
TEST(completed_checkpoint_store_retains_newest) {
    CHECK(quorum());
    sl_ha_config_t c;
    ha_cfg(&c, "ckpts");
    sl_ha_t *ha;
    char err[512], path[512];
    CHECK_EQ(sl_ha_open(&c, &ha, err, sizeof err), 0);
    int64_t id = 0;
    CHECK_EQ(sl_ha_checkpoint_latest(ha, "j1", &id, path, sizeof path, err, sizeof err), SL_ENOTFOUND);
    int64_t added[400];
    int nadded = 0;
    int64_t next = 1;
    for (int step = 0; step < 120; step++) {
        next += 1 + rnd(3); /* ids grow with gaps (aborted checkpoints) */
        int retain = 1 + rnd(4);
        char p[100];
        snprintf(p, sizeof p, "/ckpt/j1/chk-%" PRId64, next);
        CHECK_EQ(sl_ha_checkpoint_add(ha, "j1", next, p, retain, err, sizeof err), 0);
        added[nadded++] = next;
        int64_t got[300];
        int n = sl_ha_checkpoint_ids(ha, "j1", got, 300, err, sizeof err);
        /* the model: after each add, the newest `retain` of those stored before plus this one */
        static int64_t model[400];
        static int nmodel;
        if (step == 0) nmodel = 0;
        model[nmodel++] = next;
        if (nmodel > retain) {
            memmove(model, model + (nmodel - retain), (size_t)retain * sizeof *model);
            nmodel = retain;
        }
        CHECK_EQ(n, nmodel);
        for (int i = 0; i < n; i++) CHECK_EQ(got[i], model[i]);
        CHECK_EQ(sl_ha_checkpoint_latest(ha, "j1", &id, path, sizeof path, err, sizeof err), 0);
        CHECK_EQ(id, next);
        CHECK_STR(path, p);
    }
    (void)added;
    CHECK_EQ(sl_ha_job_remove(ha, "j1", err, sizeof err), 0);
    CHECK_EQ(sl_ha_checkpoint_latest(ha, "j1", &id, path, sizeof path, err, sizeof err), SL_ENOTFOUND);
    sl_ha_close(ha);
}

/* Random puts and removes of jobs (built-in and file artifacts, random
 * arguments) from two sessions: the stored set and each job's contents
 * equal the model; a file artifact is a copy in the storage directory. */
/* Random puts, gets and removes of jobs from two sessions against a
 * model; storage: NULL (a local storageDir) or an s3:// URI, whose
 * artifacts a session fetches into its own directory as another host would
 * (sl_ha_job_localize), and whose objects go with the job. */
static void job_graph_round_trips(const char *storage) {
    CHECK(quorum());
    sl_ha_config_t c;
    ha_cfg_in(&c, "jobs", storage);
    bool s3 = storage != NULL;
    sl_s3_client_t *cli = NULL;
    char bucket[256], path[1024], e[1024];
    if (s3) {
        sl_s3_config_t sc;
        CHECK_EQ(sl_s3_parse_uri(storage, bucket, sizeof bucket, path, sizeof path, e, sizeof e), 0);
        CHECK_EQ(sl_s3_config_resolve(&sc, e, sizeof e), 0);
        CHECK_EQ(sl_s3_client_new(&sc, bucket, &cli, e, sizeof e), 0);
    }
    sl_ha_t *ha[2];
    char err[512];
    for (int i = 0; i < 2; i++) CHECK_EQ(sl_ha_open(&c, &ha[i], err, sizeof err), 0);
    char art[800];
    snprintf(art, sizeof art, "%s/libjob.so", sl_test_tmpdir());
    FILE *f = fopen(art, "w");
    CHECK(f);
    for (int i = 0; i < 5000; i++) fputc('a' + i % 26, f);
    fclose(f);
    enum { NJ = 12 };
    bool live[NJ] = {0};
    int nargs[NJ] = {0};
    char args[NJ][4][32];
    bool file[NJ];
    for (int step = 0; step < 80; step++) {
        int j = rnd(NJ), s = rnd(2);
        char id[33];
        snprintf(id, sizeof id, "%032x", j + 1);
        if (!live[j]) {
            file[j] = rnd(2);
            nargs[j] = rnd(4);
            char *av[4];
            for (int a = 0; a < nargs[j]; a++) {
                snprintf(args[j][a], sizeof args[j][a], "--a%d=%d", a, rnd(1000));
                av[a] = args[j][a];
            }
            sl_ha_job_t jb = {.artifact = file[j] ? art : "builtin:fraud", .nargs = nargs[j], .args = av,
                              .restore_path = rnd(2) ? "/some/chk-3" : NULL, .allow_nrs = rnd(2)};
            snprintf(jb.id, sizeof jb.id, "%s", id);
            char stored[4400];
            CHECK_EQ(sl_ha_job_put(ha[s], &jb, stored, sizeof stored, err, sizeof err), 0);
            sl_ha_job_t got;
            CHECK_EQ(sl_ha_job_get(ha[1 - s], id, &got, err, sizeof err), 0);
            CHECK_STR(got.id, id);
            CHECK_EQ(got.nargs, nargs[j]);
            for (int a = 0; a < nargs[j]; a++) CHECK_STR(got.args[a], args[j][a]);
            CHECK_EQ(got.allow_nrs, jb.allow_nrs);
            CHECK_EQ(got.restore_path != NULL, jb.restore_path != NULL);
            CHECK_STR(got.artifact, stored);
            if (file[j]) {
                CHECK(strstr(got.artifact, c.storage_dir) == got.artifact);
                char host[900];
                snprintf(host, sizeof host, "%s/host-%d", sl_test_tmpdir(), 1 - s); /* the reader's own directory */
                CHECK_EQ(sl_ha_job_localize(ha[1 - s], &got, host, err, sizeof err), 0);
                CHECK(s3 ? strstr(got.artifact, host) == got.artifact : !strcmp(got.artifact, stored));
                struct stat st;
                CHECK_EQ(stat(got.artifact, &st), 0);
                CHECK_EQ(st.st_size, 5000);
                FILE *g = fopen(got.artifact, "r");
                CHECK(g);
                int bad = 0;
                for (int i = 0; i < 5000; i++) bad += fgetc(g) != 'a' + i % 26;
                fclose(g);
                CHECK_EQ(bad, 0);
            } else {
                CHECK_STR(got.artifact, "builtin:fraud");
            }
            sl_ha_job_clear(&got);
            live[j] = true;
        } else {
            CHECK_EQ(sl_ha_job_remove(ha[s], id, err, sizeof err), 0);
            sl_ha_job_t got;
            CHECK_EQ(sl_ha_job_get(ha[1 - s], id, &got, err, sizeof err), SL_ENOTFOUND);
            live[j] = false;
            /* and its files are gone */
            if (s3) {
                char key[1400];
                snprintf(key, sizeof key, "%s%s%s/job-%s/", path, path[0] ? "/" : "", c.cluster_id, id);
                sl_s3_object_t *objs;
                int no;
                CHECK_EQ(sl_s3_list(cli, key, &objs, &no, e, sizeof e), 0);
                sl_s3_objects_free(objs, no);
                CHECK_EQ(no, 0);
            } else {
                char dir[3000];
                struct stat st;
                snprintf(dir, sizeof dir, "%s/%s/job-%s", c.storage_dir, c.cluster_id, id);
                CHECK(stat(dir, &st) < 0 && errno == ENOENT);
            }
        }
        char **ids;
        int n;
        CHECK_EQ(sl_ha_job_ids(ha[rnd(2)], &ids, &n, err, sizeof err), 0);
        int want = 0;
        for (int k = 0; k < NJ; k++) want += live[k];
        CHECK_EQ(n, want);
        for (int i = 0; i < n; i++) {
            int k = (int)strtol(ids[i], NULL, 16) - 1;
            CHECK(k >= 0 && k < NJ && live[k]);
        }
        sl_zk_free_names(ids, n);
    }
    for (int i = 0; i < 2; i++) sl_ha_close(ha[i]);
    sl_s3_client_free(cli);
}

TEST(job_graph_store_round_trips) { job_graph_round_trips(NULL); }

/* high-availability.storageDir: s3://bucket/path (the `s3` fixture's S3Proxy). */
TEST(job_graph_store_in_s3) {
    char endpoint[256], uri[600];
    const char *bucket;
    CHECK(cl_s3_setup(endpoint, sizeof endpoint, &bucket));
    snprintf(uri, sizeof uri, "s3://%s/ha-stores-%d-%u/storage", bucket, (int)getpid(), g_seed);
    job_graph_round_trips(uri);
}


/* JobManagers join in random order; the earliest joined of those still in
 * leads; closing a session (a dead JobManager) hands leadership on; the
 * leader's /leader is what retrieval reads, and it goes with its session. */
TEST(leader_election_lowest_latch_leads) {
    CHECK(quorum());
    sl_ha_config_t c;
    ha_cfg(&c, "election");
    enum { N = 4 };
    sl_ha_t *ha[N];
    char err[512];
    int order[N], alive[N];
    for (int i = 0; i < N; i++) order[i] = i, alive[i] = 1;
    for (int i = N - 1; i > 0; i--) {
        int k = rnd(i + 1), t = order[i];
        order[i] = order[k], order[k] = t;
    }
    for (int i = 0; i < N; i++) {
        CHECK_EQ(sl_ha_open(&c, &ha[order[i]], err, sizeof err), 0);
        CHECK_EQ(sl_ha_election_join(ha[order[i]], err, sizeof err), 0);
    }
    sl_zk_t *reader;
    CHECK_EQ(sl_zk_open(c.quorum, c.prefix, 4000, 4000, &reader, err, sizeof err), 0);
    sl_ha_leader_t l;
    CHECK_EQ(sl_ha_leader_read(reader, &l, err, sizeof err), SL_ENOTFOUND);
    for (int round = 0; round < N; round++) {
        int expect = -1; /* the model: the first in join order still alive */
        for (int i = 0; i < N && expect < 0; i++)
            if (alive[order[i]]) expect = order[i];
        for (int i = 0; i < N; i++) {
            if (!alive[i]) continue;
            int rc = sl_ha_election_leading(ha[i], err, sizeof err);
            CHECK_EQ(rc, i == expect ? 1 : 0);
            if (i != expect) CHECK_EQ(sl_ha_election_publish(ha[i], "127.0.0.1", 1000 + i, "http://x", err,
                                                             sizeof err), SL_ESTATE);
        }
        char url[64];
        snprintf(url, sizeof url, "http://127.0.0.1:%d", 2000 + expect);
        CHECK_EQ(sl_ha_election_publish(ha[expect], "127.0.0.1", 1000 + expect, url, err, sizeof err), 0);
        CHECK_EQ(sl_ha_leader_read(reader, &l, err, sizeof err), 0);
        CHECK_STR(l.token, sl_ha_election_token(ha[expect]));
        CHECK_STR(l.rpc_host, "127.0.0.1");
        CHECK_EQ(l.rpc_port, 1000 + expect);
        CHECK_STR(l.rest_url, url);
        sl_ha_close(ha[expect]); /* the leader dies: its latch and /leader go with its session */
        alive[expect] = 0;
        CHECK_EQ(sl_ha_leader_read(reader, &l, err, sizeof err), SL_ENOTFOUND);
    }
    /* tokens are per join: two joins never share one */
    sl_ha_t *a, *b;
    CHECK_EQ(sl_ha_open(&c, &a, err, sizeof err), 0);
    CHECK_EQ(sl_ha_open(&c, &b, err, sizeof err), 0);
    CHECK_EQ(sl_ha_election_join(a, err, sizeof err), 0);
    CHECK_EQ(sl_ha_election_join(b, err, sizeof err), 0);
    CHECK(strcmp(sl_ha_election_token(a), sl_ha_election_token(b)) != 0);
    CHECK_EQ(strlen(sl_ha_election_token(a)), 32);
    sl_ha_close(a);
    sl_ha_close(b);
    sl_zk_close(reader);
}

/* A follower (what a TaskManager runs) sees a leader, its change, and none. */
TEST(leader_retrieval_follows_changes) {
    CHECK(quorum());
    sl_ha_config_t c;
    ha_cfg(&c, "retrieval");
    char err[512];
    sl_leader_retrieval_t *r;
    CHECK_EQ(sl_leader_retrieval_start(&c, &r, err, sizeof err), 0);
    sl_ha_leader_t l;
    for (int k = 0; k < 3; k++) {
        sl_ha_t *ha;
        CHECK_EQ(sl_ha_open(&c, &ha, err, sizeof err), 0);
        CHECK_EQ(sl_ha_election_join(ha, err, sizeof err), 0);
        CHECK_EQ(sl_ha_election_publish(ha, "127.0.0.1", 3000 + k, "http://127.0.0.1:1", err, sizeof err), 0);
        bool seen = false;
        for (int i = 0; i < 100 && !seen; i++) {
            seen = sl_leader_retrieval_current(r, &l) && !strcmp(l.token, sl_ha_election_token(ha));
            if (!seen) usleep(50000);
        }
        CHECK(seen);
        CHECK_EQ(l.rpc_port, 3000 + k);
        sl_ha_close(ha);
        bool gone = false;
        for (int i = 0; i < 100 && !gone; i++) {
            gone = !sl_leader_retrieval_current(r, &l);
            if (!gone) usleep(50000);
        }
        CHECK(gone);
    }
    sl_leader_retrieval_stop(r);
}

/* The keys: defaults, Flink's spellings, and errors naming the key. */
TEST(config_keys_and_errors) {
    sl_config_t cfg;
    char err[1024];
    sl_ha_config_t h;
    sl_config_defaults(&cfg);
    CHECK_EQ(sl_ha_config_from(&cfg, true, &h, err, sizeof err), 0);
    CHECK(!h.enabled); /* NONE by default: nothing changes */
    CHECK_EQ(sl_config_set(&cfg, "high-availability.type", "ZOOKEEPER", err, sizeof err), 0);
    CHECK_EQ(sl_ha_config_from(&cfg, true, &h, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "high-availability.zookeeper.quorum");
    CHECK_EQ(sl_config_set(&cfg, "high-availability.zookeeper.quorum", "127.0.0.1:1", err, sizeof err), 0);
    CHECK_EQ(sl_ha_config_from(&cfg, false, &h, err, sizeof err), 0); /* a TaskManager needs no storageDir */
    CHECK_EQ(sl_ha_config_from(&cfg, true, &h, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "high-availability.storageDir");
    CHECK_EQ(sl_config_set(&cfg, "high-availability.storageDir", "relative/dir", err, sizeof err), 0);
    CHECK_EQ(sl_ha_config_from(&cfg, true, &h, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "absolute");
    CHECK_EQ(sl_config_set(&cfg, "high-availability.storageDir", "s3:///no-bucket", err, sizeof err), 0);
    CHECK_EQ(sl_ha_config_from(&cfg, true, &h, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "high-availability.storageDir 's3:///no-bucket'");
    char *saved[2] = {getenv("AWS_ACCESS_KEY_ID"), getenv("AWS_SECRET_ACCESS_KEY")};
    for (int i = 0; i < 2; i++) saved[i] = saved[i] ? sl_strdup(saved[i]) : NULL;
    unsetenv("AWS_ACCESS_KEY_ID"), unsetenv("AWS_SECRET_ACCESS_KEY");
    CHECK_EQ(sl_config_set(&cfg, "high-availability.storageDir", "s3://bucket/ha", err, sizeof err), 0);
    CHECK_EQ(sl_ha_config_from(&cfg, true, &h, err, sizeof err), SL_EINVAL); /* no credentials: said at start */
    CHECK_CONTAINS(err, "high-availability.storageDir 's3://bucket/ha'");
    if (saved[0]) setenv("AWS_ACCESS_KEY_ID", saved[0], 1);
    if (saved[1]) setenv("AWS_SECRET_ACCESS_KEY", saved[1], 1);
    sl_free(saved[0]), sl_free(saved[1]);
    CHECK_EQ(sl_config_set(&cfg, "high-availability.storageDir", "/ha", err, sizeof err), 0);
    CHECK_EQ(sl_ha_config_from(&cfg, true, &h, err, sizeof err), 0);
    CHECK(h.enabled);
    CHECK_STR(h.prefix, "/sluice/default");
    CHECK_EQ(h.session_ms, 10000);
    CHECK_EQ(sl_config_set(&cfg, "high-availability.cluster-id", "/prod-1", err, sizeof err), 0);
    CHECK_EQ(sl_config_set(&cfg, "high-availability.zookeeper.path.root", "/flink/", err, sizeof err), 0);
    CHECK_EQ(sl_ha_config_from(&cfg, true, &h, err, sizeof err), 0);
    CHECK_STR(h.prefix, "/flink/prod-1");
    CHECK_EQ(sl_config_set(&cfg, "high-availability.cluster-id", "a/b", err, sizeof err), 0);
    CHECK_EQ(sl_ha_config_from(&cfg, true, &h, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "high-availability.cluster-id");
    CHECK_EQ(sl_config_set(&cfg, "high-availability.zookeeper.path.root", "flink", err, sizeof err), 0);
    CHECK_EQ(sl_config_set(&cfg, "high-availability.cluster-id", "x", err, sizeof err), 0);
    CHECK_EQ(sl_ha_config_from(&cfg, true, &h, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "high-availability.zookeeper.path.root");
    /* Flink's deprecated key and a bad value, by the config layer */
    CHECK_EQ(sl_config_set(&cfg, "high-availability", "zookeeper", err, sizeof err), 0);
    CHECK(sl_config_set(&cfg, "high-availability.type", "kubernetes", err, sizeof err) < 0);
    CHECK_CONTAINS(err, "high-availability.type");
    CHECK(sl_config_set(&cfg, "high-availability.zookeeper.quorom", "x", err, sizeof err) < 0);
    CHECK_CONTAINS(err, "high-availability.zookeeper.quorum"); /* did you mean */
    sl_config_free(&cfg);
    /* a quorum nobody serves: a clear error after the connection timeout */
    sl_ha_config_t bad;
    memset(&bad, 0, sizeof bad);
    snprintf(bad.quorum, sizeof bad.quorum, "127.0.0.1:1");
    snprintf(bad.prefix, sizeof bad.prefix, "/sluice/x");
    bad.session_ms = 2000;
    bad.connect_ms = 500;
    sl_ha_t *ha = NULL;
    CHECK_EQ(sl_ha_open(&bad, &ha, err, sizeof err), SL_EIO);
    CHECK_CONTAINS(err, "127.0.0.1:1");
}

int main(void) {
    g_seed = getenv("SLUICE_TEST_SEED") ? (unsigned)atoi(getenv("SLUICE_TEST_SEED")) : (unsigned)time(NULL);
    fprintf(stderr, "test_ha_stores: seed %u (SLUICE_TEST_SEED to repeat)\n", g_seed);
    RUN(config_keys_and_errors);
    RUN(checkpoint_id_counter_never_reissues);
    RUN(completed_checkpoint_store_retains_newest);
    RUN(job_graph_store_round_trips);
    RUN(job_graph_store_in_s3);
    RUN(leader_election_lowest_latch_leads);
    RUN(leader_retrieval_follows_changes);
    TEST_MAIN_END();
}
