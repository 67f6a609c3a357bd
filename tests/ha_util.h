/*
 * ha_util.h — a highly available cluster of real processes for tests:
 * three `sluice jobmanager`s with high-availability.type zookeeper against
 * the ZooKeeper of the `zookeeper` ctest fixture (its quorum in the file
 * SLUICE_ZK_QUORUM_FILE names), TaskManagers that follow the leader, jobs
 * submitted through the client (which finds the leader in ZooKeeper), and
 * the test's own ZooKeeper session that reads the HA stores: the published
 * leader, the completed checkpoint ids per job (with the leader term they
 * were first seen in, so a test can check that ids only grow across
 * leaders).  Used by test_ha.c and test_fraud_e2e.c.
 *
 * Everything is static inline: a test uses what it needs.
 */
#ifndef SL_TEST_HA_UTIL_H
#define SL_TEST_HA_UTIL_H

#include <inttypes.h>

#include "cluster_util.h"
#include "config/config.h"
#include "ha/ha_services.h"

#define HA_NJM 3
#define HA_SESSION "2 s" /* high-availability.zookeeper.client.session-timeout of every process */

typedef struct ha_cluster {
    cluster_t c;             /* dir, secret, heartbeats; c.rest_port: the leader's */
    char quorum[256], cluster_id[128], storage[1200];
    int rpc[HA_NJM], rest[HA_NJM]; /* each JobManager's ports */
    proc_t jm[HA_NJM];
    int gen;                 /* JobManager processes started (log names) */
    sl_ha_config_t hc;
    sl_ha_t *observer;       /* the test's own session: reads the stores */
} ha_cluster_t;

static inline bool ha_read_quorum(char *out, size_t cap) {
    const char *f = getenv("SLUICE_ZK_QUORUM_FILE");
    FILE *in = f ? fopen(f, "r") : NULL;
    bool ok = in && fgets(out, (int)cap, in);
    if (in) fclose(in);
    if (!ok) fprintf(stderr, "no ZooKeeper: SLUICE_ZK_QUORUM_FILE (%s) unreadable (ctest's zookeeper fixture)\n",
                     f ? f : "unset");
    if (ok) out[strcspn(out, "\r\n")] = 0;
    return ok;
}

static inline void ha_keys(ha_cluster_t *h, char keys[6][1400]) {
    snprintf(keys[0], 1400, "high-availability.type=zookeeper");
    snprintf(keys[1], 1400, "high-availability.zookeeper.quorum=%s", h->quorum);
    snprintf(keys[2], 1400, "high-availability.storageDir=%s", h->storage);
    snprintf(keys[3], 1400, "high-availability.cluster-id=%s", h->cluster_id);
    snprintf(keys[4], 1400, "high-availability.zookeeper.client.session-timeout=%s", HA_SESSION);
    snprintf(keys[5], 1400, "heartbeat.timeout=%s", h->c.hb_timeout);
}

/* Starts JobManager k (its ports fixed by ha_init) with a fresh log. */
static inline void ha_start_jm(ha_cluster_t *h, int k) {
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

/* Starts TaskManager tm-<n> with `slots` slots into the next slot of h->c.tm
 * (or, when all MAX_PROCS are used, into the first dead one). */
static inline proc_t *ha_start_tm(ha_cluster_t *h, int n, int slots) {
    int at = h->c.ntm;
    if (at >= MAX_PROCS)
        for (at = 0; at < MAX_PROCS && h->c.tm[at].pid > 0; at++) {}
    if (at >= MAX_PROCS) abort();
    if (at == h->c.ntm) h->c.ntm++;
    proc_t *p = &h->c.tm[at];
    snprintf(p->id, sizeof p->id, "tm-%d", n);
    char log[sizeof p->log];
    snprintf(log, sizeof log, "%s/tm-%d.log", h->c.dir, n);
    memcpy(p->log, log, sizeof log);
    char keys[6][1400], sl[64], hbi[64], sec[128];
    ha_keys(h, keys);
    snprintf(sl, sizeof sl, "taskmanager.numberOfTaskSlots=%d", slots);
    snprintf(hbi, sizeof hbi, "heartbeat.interval=%s", h->c.hb_interval);
    snprintf(sec, sizeof sec, "security.internal.secret=%s", h->c.secret);
    char *argv[] = {"sluice", "taskmanager", "--id", p->id, "-D", sl,      "-D", hbi,     "-D", sec,     "-D", keys[0],
                    "-D",     keys[1],       "-D",   keys[2], "-D", keys[3], "-D", keys[4], "-D", keys[5], NULL};
    p->pid = cl_spawn(p->log, argv);
    return p;
}

/* The leader published in ZooKeeper: its index (by REST port), or -1. */
static inline int ha_leader(ha_cluster_t *h, char *token, size_t cap) {
    sl_ha_leader_t l;
    char err[512];
    if (sl_ha_leader_read(sl_ha_zk(h->observer), &l, err, sizeof err) < 0) return -1;
    const char *colon = strrchr(l.rest_url, ':');
    int port = colon ? atoi(colon + 1) : -1;
    for (int k = 0; k < HA_NJM; k++)
        if (h->rest[k] == port && h->jm[k].pid > 0) {
            if (token) snprintf(token, cap, "%s", l.token);
            return k;
        }
    return -1;
}

/* Until a leader other than `not_token` (NULL: any) is published; points
 * h->c.rest_port at it.  Its index, or -1 after ms. */
static inline int ha_wait_leader(ha_cluster_t *h, const char *not_token, char *token, size_t cap, int ms) {
    int64_t end = cl_now_ms() + ms;
    while (cl_now_ms() < end) {
        char t[64] = "";
        int k = ha_leader(h, t, sizeof t);
        if (k >= 0 && (!not_token || strcmp(t, not_token))) {
            snprintf(token, cap, "%s", t);
            h->c.rest_port = h->rest[k];
            return k;
        }
        cl_sleep_ms(50);
    }
    return -1;
}

/* The job's state as whichever JobManager ZooKeeper names leader now
 * reports it (h->c.rest_port follows it).  A leader may change without a
 * test killing it: on a loaded machine a 2 s session can expire, and the
 * next leader resumes the job; the test follows. */
static inline void ha_job_state(ha_cluster_t *h, const char *id, char *state, size_t cap) {
    int k = ha_leader(h, NULL, 0);
    if (k >= 0) h->c.rest_port = h->rest[k];
    cl_job_state(&h->c, id, state, cap);
}

/* cl_wait_state asking the leader of the moment (ha_job_state). */
static inline bool ha_wait_state(ha_cluster_t *h, const char *id, const char *want, int ms, char *state, size_t cap) {
    int64_t end = cl_now_ms() + ms;
    while (cl_now_ms() < end) {
        ha_job_state(h, id, state, cap);
        int r = cl_state_reached(state, want);
        if (r) return r > 0;
        cl_sleep_ms(100);
    }
    return false;
}

/* The checkpoint ids in the completed checkpoint store now, into ha_seen[]
 * as (id, term) pairs not seen before; returns the newest (0: none). */
typedef struct ha_seen_id {
    int64_t id;
    int term;
} ha_seen_id_t;
static ha_seen_id_t ha_seen[4096] __attribute__((unused));
static int ha_nseen __attribute__((unused));

static inline int64_t ha_observe(ha_cluster_t *h, const char *job, int term) {
    int64_t ids[64];
    char err[512];
    int n = sl_ha_checkpoint_ids(h->observer, job, ids, 64, err, sizeof err);
    int64_t newest = 0;
    for (int i = 0; i < n; i++) {
        bool known = false;
        for (int k = 0; k < ha_nseen && !known; k++) known = ha_seen[k].id == ids[i];
        if (!known && ha_nseen < 4096) ha_seen[ha_nseen++] = (ha_seen_id_t){ids[i], term};
        if (ids[i] > newest) newest = ids[i];
    }
    return newest;
}

/* Until a checkpoint newer than `after` completed (observing as it goes);
 * its id, or -1 after ms. */
static inline int64_t ha_wait_checkpoint(ha_cluster_t *h, const char *job, int term, int64_t after, int ms) {
    int64_t end = cl_now_ms() + ms;
    while (cl_now_ms() < end) {
        int64_t n = ha_observe(h, job, term);
        if (n > after) return n;
        cl_sleep_ms(20);
    }
    return -1;
}

/* Checks over ha_seen[]: per term (0..last_term) the ids first seen in it
 * lie strictly above every earlier term's; prints them; returns how many
 * terms saw a checkpoint, or -1 when ids went back. */
static inline int ha_terms_growing(int last_term) {
    int64_t max_before = 0;
    int terms_seen = 0;
    for (int t = 0; t <= last_term; t++) {
        int64_t lo = INT64_MAX, hi = 0;
        for (int i = 0; i < ha_nseen; i++)
            if (ha_seen[i].term == t) {
                if (ha_seen[i].id < lo) lo = ha_seen[i].id;
                if (ha_seen[i].id > hi) hi = ha_seen[i].id;
            }
        if (!hi) continue;
        terms_seen++;
        fprintf(stderr, "  term %d: checkpoints %" PRId64 "..%" PRId64 "\n", t, lo, hi);
        if (lo <= max_before) return -1;
        max_before = hi;
    }
    return terms_seen;
}

/* The cluster's directory, ports, ZooKeeper quorum and observer session;
 * no process started yet.  False (saying why) without ZooKeeper. */
static inline bool ha_init(ha_cluster_t *h, const char *name) {
    memset(h, 0, sizeof *h);
    ha_nseen = 0;
    cl_cluster_init(&h->c, name);
    if (!ha_read_quorum(h->quorum, sizeof h->quorum)) return false;
    snprintf(h->cluster_id, sizeof h->cluster_id, "%s-%d", name, (int)getpid());
    snprintf(h->storage, sizeof h->storage, "%s/ha", h->c.dir);
    for (int k = 0; k < HA_NJM; k++) h->rpc[k] = cl_free_port(), h->rest[k] = cl_free_port();
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

/* `sluice run -d` of the job module `job` with its args, with the HA keys
 * and no address: the client asks ZooKeeper.  The job id into id ("" when
 * the submission failed). */
static inline void ha_submit(ha_cluster_t *h, const char *job, const char *args, char *id, size_t cap) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd,
             "%s run -d -D high-availability.type=zookeeper -D high-availability.zookeeper.quorum=%s "
             "-D high-availability.cluster-id=%s %s %s 2>&1",
             SLUICE_BIN, h->quorum, h->cluster_id, job, args);
    cl_run_for_job_id(cmd, id);
    (void)cap;
}

static inline long ha_file_size(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return 0;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fclose(f);
    return n;
}

/* How often needle occurs in path after byte `from`. */
static inline int ha_count_after(const char *path, long from, const char *needle) {
    char *s = cl_slurp(path);
    long len = (long)strlen(s);
    int n = 0;
    for (const char *p = s + (from < len ? from : len); (p = strstr(p, needle)); p++) n++;
    free(s);
    return n;
}

static inline void ha_stop(ha_cluster_t *h) {
    cl_cluster_stop(&h->c);
    for (int k = 0; k < HA_NJM; k++) cl_stop(&h->jm[k]);
    sl_ha_close(h->observer);
    h->observer = NULL;
}

static inline void ha_dump(ha_cluster_t *h) {
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "tail -n 25 '%s'/*.log >&2", h->c.dir);
    if (system(cmd) != 0) fprintf(stderr, "  (no logs)\n");
}

#endif
