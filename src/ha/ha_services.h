/*
 * ha_services.h — JobManager high availability (Flink's
 * HighAvailabilityServices with ZooKeeper): which kind is configured, and
 * the services a leading JobManager and its followers use.  Each part is a
 * file named after Flink's concept:
 *
 *   ha_services.c               the configuration (high-availability.*), the session
 *   leader_election.c           LeaderElection: an ephemeral sequential latch znode
 *                               per JobManager, the lowest leads; the leader
 *                               publishes its fencing token and addresses
 *   leader_retrieval.c          LeaderRetrievalService: TaskManagers and the client
 *                               read (and follow) the published leader
 *   checkpoint_id_counter.c     ZooKeeperCheckpointIDCounter: a versioned counter per
 *                               job; an id once issued is never issued again
 *   completed_checkpoint_store.c  DefaultCompletedCheckpointStore on
 *                               ZooKeeperStateHandleStore: one pointer znode per
 *                               completed checkpoint (its directory), N retained
 *   job_graph_store.c           JobGraphStore: a job's submission (artifact copied
 *                               into high-availability.storageDir, arguments) under
 *                               a pointer znode per job
 *
 * Znodes, under high-availability.zookeeper.path.root + high-availability.cluster-id
 * (default /sluice/default):
 *
 *   /leaderlatch/latch-<seq>       ephemeral sequential, one per JobManager
 *   /leader                        ephemeral, the leader's: "<token> <rpc host>:<port> <rest url>"
 *   /jobgraphs/<job id>            JSON: artifact (in storageDir), args, restore path
 *   /checkpoint-counter/<job id>   the next checkpoint id, decimal
 *   /checkpoints/<job id>/<id>     a completed checkpoint's directory (id zero-padded to 19)
 *
 * Threads: every function may be called from any thread (each is a few
 * synchronous ZooKeeper calls on the session, which zk_client.h guards).
 */
#ifndef SL_HA_SERVICES_H
#define SL_HA_SERVICES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config/config.h"
#include "ha/zk_client.h"

/* ---- configuration (ha_services.c) ---- */

typedef struct sl_ha_config {
    bool enabled;                  /* high-availability.type: zookeeper */
    char quorum[1024];             /* high-availability.zookeeper.quorum */
    char storage_dir[2048];        /* high-availability.storageDir ("" = not set) */
    char prefix[1024];             /* path.root + cluster-id, e.g. "/sluice/default" */
    char cluster_id[256];
    int session_ms;                /* high-availability.zookeeper.client.session-timeout */
    int connect_ms;                /* high-availability.zookeeper.client.connection-timeout */
} sl_ha_config_t;

/* The high-availability.* keys of cfg into *out.  With HA on, a missing
 * quorum — and, for a JobManager (jobmanager = true), a missing storageDir
 * — is SL_EINVAL naming the key.  HA off: out->enabled false, 0. */
int sl_ha_config_from(const sl_config_t *cfg, bool jobmanager, sl_ha_config_t *out, char *err, size_t errlen);

/* ---- the services of one JobManager (one ZooKeeper session) ---- */

typedef struct sl_ha sl_ha_t;

/* Opens a session (waits up to connect_ms).  The stores and the election
 * use it; when it is lost (sl_ha_lost) the JobManager must stop acting. */
int sl_ha_open(const sl_ha_config_t *cfg, sl_ha_t **out, char *err, size_t errlen);
void sl_ha_close(sl_ha_t *ha);
sl_zk_t *sl_ha_zk(sl_ha_t *ha);
const sl_ha_config_t *sl_ha_cfg(const sl_ha_t *ha);
/* The session is gone for good (expired, or disconnected past its timeout). */
bool sl_ha_lost(sl_ha_t *ha);

/* ---- leader election (leader_election.c) ---- */

/* Joins the election: creates this process's latch znode. */
int sl_ha_election_join(sl_ha_t *ha, char *err, size_t errlen);
/* 1 when this process's latch is the lowest (it leads), 0 when not, < 0
 * when ZooKeeper cannot say (suspended, lost). */
int sl_ha_election_leading(sl_ha_t *ha, char *err, size_t errlen);
/* The leader's fencing token: 32 hex digits, random, made at join. */
const char *sl_ha_election_token(const sl_ha_t *ha);
/* Publishes the leader's addresses with its token (/leader, ephemeral). */
int sl_ha_election_publish(sl_ha_t *ha, const char *rpc_host, int rpc_port, const char *rest_url, char *err,
                           size_t errlen);

/* ---- leader retrieval (leader_retrieval.c) ---- */

typedef struct sl_ha_leader {
    char token[64];
    char rpc_host[256];
    int rpc_port;
    char rest_url[512];
} sl_ha_leader_t;

/* Reads /leader once on session z: 0, SL_ENOTFOUND (no leader now), < 0. */
int sl_ha_leader_read(sl_zk_t *z, sl_ha_leader_t *out, char *err, size_t errlen);

/* A follower of the published leader: a thread of its own polls /leader
 * (every 200 ms) over a session it opens again whenever it is lost, so a
 * TaskManager outlives ZooKeeper's restarts. */
typedef struct sl_leader_retrieval sl_leader_retrieval_t;
int sl_leader_retrieval_start(const sl_ha_config_t *cfg, sl_leader_retrieval_t **out, char *err, size_t errlen);
/* The leader known now: true with *out, false while none is. */
bool sl_leader_retrieval_current(sl_leader_retrieval_t *r, sl_ha_leader_t *out);
void sl_leader_retrieval_stop(sl_leader_retrieval_t *r);
/* One look-up for a client: waits up to wait_ms for a published leader. */
int sl_ha_leader_lookup(const sl_ha_config_t *cfg, int wait_ms, sl_ha_leader_t *out, char *err, size_t errlen);

/* ---- checkpoint id counter (checkpoint_id_counter.c) ---- */

/* The next id job's checkpoints may use (1 for a job never seen). */
int sl_ha_counter_get(sl_ha_t *ha, const char *job, int64_t *next, char *err, size_t errlen);
/* Issues checkpoint id: the counter moves to id + 1 with a versioned set.
 * SL_ESTATE when the counter is past id already (the id was issued: a
 * deposed leader, or another JobManager, is running the job). */
int sl_ha_counter_issue(sl_ha_t *ha, const char *job, int64_t id, char *err, size_t errlen);

/* ---- completed checkpoint store (completed_checkpoint_store.c) ---- */

/* Adds completed checkpoint id (its directory path, whose _metadata is
 * written), then removes the oldest beyond `retain` (>= 1). */
int sl_ha_checkpoint_add(sl_ha_t *ha, const char *job, int64_t id, const char *path, int retain, char *err,
                         size_t errlen);
/* The latest completed checkpoint: 0 with its id and path, SL_ENOTFOUND when none. */
int sl_ha_checkpoint_latest(sl_ha_t *ha, const char *job, int64_t *id, char *path, size_t cap, char *err,
                            size_t errlen);
/* The ids stored, ascending (at most cap); returns how many or < 0. */
int sl_ha_checkpoint_ids(sl_ha_t *ha, const char *job, int64_t *ids, int cap, char *err, size_t errlen);

/* ---- job graph store (job_graph_store.c) ---- */

typedef struct sl_ha_job {
    char id[33];                   /* the dispatcher's job id */
    char *artifact;                /* "builtin:NAME", the copy in storageDir, or its s3:// URI */
    int nargs;
    char **args;
    char *restore_path;            /* as submitted (NULL: none) */
    bool allow_nrs;
} sl_ha_job_t;

/* Stores a submission: a file artifact is copied into
 * storageDir/<cluster-id>/job-<id>/ first (uploaded there when storageDir
 * is s3://bucket/path), then /jobgraphs/<id> points at it; the artifact as
 * stored (the copy, its s3:// URI, or "builtin:NAME") into stored. */
int sl_ha_job_put(sl_ha_t *ha, const sl_ha_job_t *job, char *stored, size_t cap, char *err, size_t errlen);
/* The stored job ids (sl_zk_free_names). */
int sl_ha_job_ids(sl_ha_t *ha, char ***ids, int *n, char *err, size_t errlen);
int sl_ha_job_get(sl_ha_t *ha, const char *id, sl_ha_job_t *out, char *err, size_t errlen);
/* A job's artifact as a local file: an s3:// one is downloaded into
 * local_dir/job-<id>/ and job->artifact becomes that path; any other is
 * left as it is.  The error names the job and the URI. */
int sl_ha_job_localize(sl_ha_t *ha, sl_ha_job_t *job, const char *local_dir, char *err, size_t errlen);
/* A finished or cancelled job: its znodes (job graph, counter, checkpoints)
 * and its files in storageDir go. */
int sl_ha_job_remove(sl_ha_t *ha, const char *id, char *err, size_t errlen);
void sl_ha_job_clear(sl_ha_job_t *job);

#endif
