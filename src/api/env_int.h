/*
 * env_int.h — the execution environment (private): job settings, the
 * stream graph being built, side-output tags, and the running job.
 */
#ifndef SL_ENV_INT_H
#define SL_ENV_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "checkpoint/ckpt_config.h"
#include "checkpoint/ckpt_stats.h"
#include "graph/stream_graph.h"
#include "plan/restart_config.h"
#include "sluice/metrics.h"

typedef struct sl_owned {
    void *p;
    void (*free_fn)(void *);
} sl_owned_t;

struct sl_env {
    int parallelism;
    int max_parallelism;      /* 0 = derived */
    int buffer_size;
    int buffers_per_channel;
    int64_t buffer_timeout_ms;  /* sl_env_set_buffer_timeout; -1: only full buffers */
    int64_t wm_interval_ms;
    bool chaining;
    sl_clock_fn clock;
    void *clock_ctx;
    bool ckpt_enabled;
    sl_ckpt_config_t ckpt;
    int64_t ckpts_completed;
    char *ckpt_dir;
    int ckpt_retained;
    int ckpt_retention; /* sl_checkpoint_retention_t */
    struct sl_ckpt_metadata *restore_md; /* sl_env_restore_from */
    char *restore_path; /* the restored chk-<n> directory */
    bool allow_nrs;     /* sl_env_set_allow_non_restored_state */
    bool savepoint_native; /* sl_env_set_savepoint_format */
    char *savepoint_dir;
    /* state backend */
    int backend;                  /* sl_state_backend_kind_t */
    char *rocksdb_dir;
    int64_t rocksdb_cache_bytes, rocksdb_write_buffer_bytes;
    int64_t rocksdb_value_cache_bytes; /* sl_env_set_rocksdb_value_cache: 0 default, < 0 off */
    bool incremental;
    bool restart_set;             /* else: fixed-delay 3 x 1 s with checkpointing, none without */
    sl_restart_config_t restart;
    int restarts;
    int64_t ckpt_max_sync_ns;
    sl_ckpt_stats_t ckpt_stats[64];
    int nckpt_stats;
    sl_ckpt_task_stats_t *ckpt_task_stats; /* [nckpt_stats][ckpt_ntasks] */
    char **ckpt_task_names;
    int ckpt_ntasks;

    sl_node_t **nodes;
    int nnodes;
    sl_edge_t *edges;
    int nedges, edges_cap;
    sl_owned_t *owned;
    int nowned, owned_cap;
    sl_tag_table_t tags;

    char err[1024];
    int err_rc;
    char *job_name;               /* sl_env_set_job_name (cluster jobs) */

    pthread_mutex_t run_mu;
    struct sl_local_job *running;  /* the job being executed (embedded mode) */
    atomic_bool cancel_requested;
    /* sl_env_set_metrics_listener (metrics_api.c) */
    sl_metrics_listener_fn metrics_fn;
    void *metrics_ctx;
    /* sl_env_set_rest_endpoint: the REST API while the job runs */
    int rest_port;                 /* -1: none; 0: ephemeral */
    char *rest_bind;               /* NULL: 127.0.0.1 */
    atomic_int rest_bound;         /* the port while serving, else -1 */
};

/* The job's directory name under the checkpoint directory. */
void sl_env_job_id(const char *job_name, char *buf, size_t cap);
/* The effective parallelism of a node. */
int sl_env_node_parallelism(const sl_env_t *env, const sl_node_t *n);
int sl_env_max_parallelism(const sl_env_t *env);
void sl_env_free_task_stats(sl_env_t *env);

#endif
