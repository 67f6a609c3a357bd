/*
 * env.c — the execution environment: settings, ownership of everything the
 * builder creates, side-output tags, and sl_env_execute().
 */
#include <ctype.h>
#include <pthread.h>
#include <time.h>
#include <unistd.h>
#include <stdio.h>

#include "api/env_int.h"
#include "checkpoint/ckpt_config.h"
#include "checkpoint/metadata.h"
#include "checkpoint/state_reader.h"
#include "checkpoint/storage.h"
#include "common/common.h"
#include "api/plan_build.h"
#include "sluice/job.h"
#include "runtime/local.h"
#include "state/key_group.h"

static int64_t default_clock(void *ctx) {
    (void)ctx;
    return sl_wall_ms();
}

int64_t sl_now_ms(void) { return sl_wall_ms(); }

sl_env_t *sl_env_new(void) {
    sl_env_t *env = sl_calloc(1, sizeof *env);
    env->parallelism = 1;
    env->buffer_size = 32 * 1024;
    env->buffers_per_channel = 4;
    env->buffer_timeout_ms = 100; /* Flink's execution.buffer-timeout.interval */
    env->wm_interval_ms = 200;
    env->chaining = true;
    env->clock = default_clock;
    sl_ckpt_config_defaults(&env->ckpt);
    env->ckpt_retained = 1;
    env->tags.n = 1;
    env->tags.tags = sl_calloc(1, sizeof(sl_tag_t));
    pthread_mutex_init(&env->run_mu, NULL);
    atomic_init(&env->cancel_requested, false);
    env->rest_port = -1;
    atomic_init(&env->rest_bound, -1);
    return env;
}

void sl_env_destroy(sl_env_t *env) {
    if (!env) return;
    for (int i = 0; i < env->nnodes; i++) {
        sl_node_t *n = env->nodes[i];
        if (n->free_spec) n->free_spec(n->spec);
        if (n->kind == SL_NODE_SOURCE) {
            if (n->source.ops && n->source.ops->destroy) n->source.ops->destroy(n->source.ctx);
            sl_schema_unref(n->source.schema);
        }
        sl_schema_unref(n->out_schema);
        for (int k = 0; k < n->nstate_schemas; k++) {
            sl_free(n->state_names[k]);
            sl_schema_unref(n->state_schemas[k]);
        }
        sl_free(n->state_names);
        sl_free(n->state_schemas);
        sl_free(n->name);
        sl_free(n->uid);
        sl_free(n->slot_group);
        sl_free(n);
    }
    sl_free(env->nodes);
    sl_free(env->edges);
    sl_free(env->ckpt_dir);
    sl_ckpt_metadata_free(env->restore_md);
    sl_free(env->restore_path);
    sl_free(env->savepoint_dir);
    sl_free(env->rocksdb_dir);
    sl_free(env->job_name);
    sl_free(env->rest_bind);
    sl_env_free_task_stats(env);
    for (int i = env->nowned - 1; i >= 0; i--) env->owned[i].free_fn(env->owned[i].p);
    sl_free(env->owned);
    for (int i = 1; i < env->tags.n; i++) {
        sl_free(env->tags.tags[i].name);
        sl_schema_unref(env->tags.tags[i].schema);
    }
    sl_free(env->tags.tags);
    pthread_mutex_destroy(&env->run_mu);
    sl_free(env);
}

void sl_env_own(sl_env_t *env, void *p, void (*free_fn)(void *)) {
    if (env->nowned == env->owned_cap) {
        env->owned_cap = env->owned_cap ? env->owned_cap * 2 : 16;
        env->owned = sl_realloc(env->owned, (size_t)env->owned_cap * sizeof *env->owned);
    }
    env->owned[env->nowned].p = p;
    env->owned[env->nowned].free_fn = free_fn;
    env->nowned++;
}

void sl_env_errorf(sl_env_t *env, const char *fmt, ...) {
    if (env->err_rc) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(env->err, sizeof env->err, fmt, ap);
    va_end(ap);
    env->err_rc = SL_EINVAL;
}

const char *sl_env_error(const sl_env_t *env) { return env->err; }

void sl_env_set_job_name(sl_env_t *env, const char *name) {
    if (!name || !name[0]) {
        sl_env_errorf(env, "job name must not be empty");
        return;
    }
    sl_free(env->job_name);
    env->job_name = sl_strdup(name);
}

void sl_env_set_parallelism(sl_env_t *env, int p) {
    if (p < 1 || p > 32768)
        sl_env_errorf(env, "parallelism.default: %d is out of range [1, 32768]", p);
    else
        env->parallelism = p;
}

void sl_env_set_max_parallelism(sl_env_t *env, int maxp) {
    if (maxp < 0 || maxp > 32768)
        sl_env_errorf(env, "pipeline.max-parallelism: %d is out of range [1, 32768]", maxp);
    else
        env->max_parallelism = maxp;
}

void sl_env_set_buffer_size(sl_env_t *env, int bytes) {
    if (bytes < 64)
        sl_env_errorf(env, "buffer size %d is below the minimum of 64 bytes", bytes);
    else
        env->buffer_size = bytes;
}

void sl_env_set_buffers_per_channel(sl_env_t *env, int n) {
    if (n < 1)
        sl_env_errorf(env, "buffers per channel must be at least 1 (got %d)", n);
    else
        env->buffers_per_channel = n;
}

void sl_env_set_buffer_timeout(sl_env_t *env, int64_t ms) {
    if (ms < -1)
        sl_env_errorf(env, "execution.buffer-timeout.interval: %lld ms (0 or more, or -1 to flush only full buffers)",
                      (long long)ms);
    else
        env->buffer_timeout_ms = ms;
}

void sl_env_set_auto_watermark_interval(sl_env_t *env, int64_t ms) {
    if (ms < 0)
        sl_env_errorf(env, "pipeline.auto-watermark-interval: %lld must not be negative", (long long)ms);
    else
        env->wm_interval_ms = ms;
}

void sl_env_disable_chaining(sl_env_t *env) { env->chaining = false; }

void sl_env_enable_checkpointing(sl_env_t *env, int64_t interval_ms, sl_checkpoint_mode_t mode) {
    if (interval_ms < 10) {
        sl_env_errorf(env, "execution.checkpointing.interval: %lld ms is below the minimum of 10 ms",
                      (long long)interval_ms);
        return;
    }
    if (mode != SL_CHECKPOINT_EXACTLY_ONCE && mode != SL_CHECKPOINT_AT_LEAST_ONCE) {
        sl_env_errorf(env, "execution.checkpointing.mode: unknown mode %d (EXACTLY_ONCE or AT_LEAST_ONCE)", (int)mode);
        return;
    }
    env->ckpt_enabled = true;
    env->ckpt.interval_ms = interval_ms;
    env->ckpt.mode = mode == SL_CHECKPOINT_AT_LEAST_ONCE ? SL_CKPT_AT_LEAST_ONCE : SL_CKPT_EXACTLY_ONCE;
}

int64_t sl_env_checkpoints_completed(const sl_env_t *env) { return env->ckpts_completed; }

void sl_env_set_checkpoint_options(sl_env_t *env, int64_t timeout_ms, int64_t min_pause_ms, int max_concurrent,
                                   int tolerable_failed) {
    if (timeout_ms <= 0 || min_pause_ms < 0 || max_concurrent < 1 || tolerable_failed < 0) {
        sl_env_errorf(env, "checkpoint options: timeout %lld ms must be > 0, min pause %lld ms >= 0, max concurrent "
                           "%d >= 1, tolerable failures %d >= 0",
                      (long long)timeout_ms, (long long)min_pause_ms, max_concurrent, tolerable_failed);
        return;
    }
    env->ckpt.timeout_ms = timeout_ms;
    env->ckpt.min_pause_ms = min_pause_ms;
    env->ckpt.max_concurrent = max_concurrent;
    env->ckpt.tolerable_failed = tolerable_failed;
}

void sl_env_set_checkpoint_dir(sl_env_t *env, const char *dir) {
    if (!dir || !*dir) {
        sl_env_errorf(env, "execution.checkpointing.dir: empty path");
        return;
    }
    sl_free(env->ckpt_dir);
    env->ckpt_dir = sl_strdup(dir);
}

void sl_env_set_checkpoints_retained(sl_env_t *env, int n) {
    if (n < 1)
        sl_env_errorf(env, "execution.checkpointing.num-retained: %d must be at least 1", n);
    else
        env->ckpt_retained = n;
}

void sl_env_set_clock(sl_env_t *env, sl_clock_fn fn, void *ctx) {
    env->clock = fn ? fn : default_clock;
    env->clock_ctx = fn ? ctx : NULL;
}

int sl_env_node_parallelism(const sl_env_t *env, const sl_node_t *n) {
    return n->parallelism > 0 ? n->parallelism : env->parallelism;
}

int sl_env_max_parallelism(const sl_env_t *env) {
    if (env->max_parallelism > 0) return env->max_parallelism;
    int maxp = 1;
    for (int i = 0; i < env->nnodes; i++) maxp = SL_MAX(maxp, sl_env_node_parallelism(env, env->nodes[i]));
    return sl_kg_default_max_parallelism(maxp);
}

int sl_env_tag(sl_env_t *env, const char *name, const sl_schema_t *schema) {
    if (!name || !*name || !schema) {
        sl_env_errorf(env, "side-output tag needs a name and a schema");
        return SL_EINVAL;
    }
    int id = sl_tag_lookup(&env->tags, name);
    if (id > 0) {
        if (!sl_schema_equal(env->tags.tags[id].schema, schema)) {
            sl_env_errorf(env, "side-output tag '%s' declared twice with different schemas", name);
            return SL_EINVAL;
        }
        return id;
    }
    env->tags.tags = sl_realloc(env->tags.tags, (size_t)(env->tags.n + 1) * sizeof(sl_tag_t));
    env->tags.tags[env->tags.n].name = sl_strdup(name);
    env->tags.tags[env->tags.n].schema = sl_schema_ref((sl_schema_t *)schema);
    return env->tags.n++;
}

int sl_output_tag(sl_env_t *env, const char *tag, sl_schema_t *schema) {
    int id = sl_env_tag(env, tag, schema);
    sl_schema_unref(schema);
    return id < 0 ? id : 0;
}


void sl_env_job_id(const char *job_name, char *buf, size_t cap) {
    size_t k = 0;
    for (const char *c = job_name ? job_name : "job"; *c && k + 1 < cap; c++)
        buf[k++] = (isalnum((unsigned char)*c) || *c == '-' || *c == '_' || *c == '.') ? *c : '_';
    buf[k] = 0;
    if (!k || buf[0] == '.') snprintf(buf, cap, "job");
}

static void set_restart(sl_env_t *env, const sl_restart_config_t *c) {
    char err[300];
    if (sl_restart_validate(c, err, sizeof err) < 0) {
        sl_env_errorf(env, "%s", err);
        return;
    }
    env->restart = *c;
    env->restart_set = true;
}

void sl_env_set_restart_fixed_delay(sl_env_t *env, int attempts, int64_t delay_ms) {
    sl_restart_config_t c = sl_restart_defaults(SL_RESTART_FIXED_DELAY);
    c.attempts = attempts;
    c.delay_ms = delay_ms;
    set_restart(env, &c);
}

void sl_env_set_restart_exponential_delay(sl_env_t *env, int64_t initial_backoff_ms, int64_t max_backoff_ms,
                                          double multiplier, int64_t reset_threshold_ms, double jitter,
                                          int max_attempts) {
    sl_restart_config_t c = sl_restart_defaults(SL_RESTART_EXPONENTIAL_DELAY);
    c.initial_backoff_ms = initial_backoff_ms;
    c.max_backoff_ms = max_backoff_ms;
    c.multiplier = multiplier;
    c.reset_threshold_ms = reset_threshold_ms;
    c.jitter = jitter;
    c.attempts_before_reset = max_attempts;
    set_restart(env, &c);
}

void sl_env_set_restart_failure_rate(sl_env_t *env, int max_failures, int64_t interval_ms, int64_t delay_ms) {
    sl_restart_config_t c = sl_restart_defaults(SL_RESTART_FAILURE_RATE);
    c.max_failures = max_failures;
    c.interval_ms = interval_ms;
    c.delay_ms = delay_ms;
    set_restart(env, &c);
}

void sl_env_set_restart_none(sl_env_t *env) {
    sl_restart_config_t c = sl_restart_defaults(SL_RESTART_NONE);
    set_restart(env, &c);
}

int sl_env_restarts(const sl_env_t *env) { return env->restarts; }

void sl_env_set_state_backend(sl_env_t *env, sl_state_backend_kind_t kind) {
    if (kind != SL_STATE_BACKEND_HASHMAP && kind != SL_STATE_BACKEND_ROCKSDB) {
        sl_env_errorf(env, "state.backend.type: unknown backend %d (hashmap or rocksdb)", (int)kind);
        return;
    }
    env->backend = (int)kind;
}

void sl_env_set_rocksdb_options(sl_env_t *env, const char *local_dir, int64_t block_cache_bytes,
                                int64_t write_buffer_bytes) {
    if (block_cache_bytes < 0 || write_buffer_bytes < 0) {
        sl_env_errorf(env, "state.backend.rocksdb: block cache (%lld) and write buffer (%lld) sizes must not be "
                           "negative",
                      (long long)block_cache_bytes, (long long)write_buffer_bytes);
        return;
    }
    sl_free(env->rocksdb_dir);
    env->rocksdb_dir = local_dir && *local_dir ? sl_strdup(local_dir) : NULL;
    env->rocksdb_cache_bytes = block_cache_bytes;
    env->rocksdb_write_buffer_bytes = write_buffer_bytes;
}

void sl_env_set_rocksdb_value_cache(sl_env_t *env, int64_t bytes) { env->rocksdb_value_cache_bytes = bytes; }

void sl_env_set_incremental_checkpoints(sl_env_t *env, bool enabled) { env->incremental = enabled; }

void sl_env_set_unaligned_checkpoints(sl_env_t *env, bool enabled, int64_t aligned_timeout_ms) {
    if (aligned_timeout_ms < 0) {
        sl_env_errorf(env, "execution.checkpointing.aligned-checkpoint-timeout: %lld ms must not be negative",
                      (long long)aligned_timeout_ms);
        return;
    }
    env->ckpt.unaligned = enabled;
    env->ckpt.aligned_timeout_ms = aligned_timeout_ms;
}

void sl_env_set_checkpoint_retention(sl_env_t *env, sl_checkpoint_retention_t r) {
    if (r < SL_CHECKPOINTS_NOT_RETAINED || r > SL_CHECKPOINTS_RETAIN_ON_CANCELLATION) {
        sl_env_errorf(env, "checkpoint retention %d: allowed are NO_EXTERNALIZED_CHECKPOINTS (0), "
                           "DELETE_ON_CANCELLATION (1), RETAIN_ON_CANCELLATION (2)", (int)r);
        return;
    }
    env->ckpt_retention = (int)r;
}

int64_t sl_env_checkpoint_max_sync_us(const sl_env_t *env) { return env->ckpt_max_sync_ns / 1000; }

int sl_env_checkpoint_stats(const sl_env_t *env, sl_checkpoint_stat_t *out, int cap) {
    int first = env->nckpt_stats > cap ? env->nckpt_stats - cap : 0, n = 0;
    for (int i = first; i < env->nckpt_stats; i++, n++) {
        const sl_ckpt_stats_t *s = &env->ckpt_stats[i];
        out[n].id = s->id;
        out[n].trigger_ms = s->trigger_ms;
        out[n].duration_ms = s->duration_ms;
        out[n].completed = s->completed;
        out[n].aborted = s->aborted;
        out[n].state_bytes = s->state_bytes;
        out[n].inflight_bytes = s->inflight_bytes;
        out[n].max_align_us = s->max_align_us;
        out[n].max_sync_us = s->max_sync_us;
        out[n].max_async_us = s->max_async_us;
        out[n].unaligned_tasks = s->unaligned_tasks;
    }
    return n;
}

int sl_env_checkpoint_task_stats(const sl_env_t *env, int64_t id, sl_checkpoint_task_stat_t *out, int cap) {
    for (int i = 0; i < env->nckpt_stats; i++) {
        if (env->ckpt_stats[i].id != id || !env->ckpt_task_stats) continue;
        int n = 0;
        for (int t = 0; t < env->ckpt_ntasks && n < cap; t++, n++) {
            const sl_ckpt_task_stats_t *s = &env->ckpt_task_stats[(size_t)i * (size_t)env->ckpt_ntasks + (size_t)t];
            out[n] = (sl_checkpoint_task_stat_t){.task = env->ckpt_task_names[t],
                                                 .acknowledged = s->acked,
                                                 .unaligned = s->unaligned,
                                                 .align_us = s->align_us,
                                                 .sync_us = s->sync_us,
                                                 .async_us = s->async_us,
                                                 .state_bytes = s->state_bytes,
                                                 .inflight_bytes = s->inflight_bytes};
        }
        return n;
    }
    return SL_ENOTFOUND;
}

/* Frees the per-task checkpoint figures of the last run. */
void sl_env_free_task_stats(sl_env_t *env) {
    for (int t = 0; t < env->ckpt_ntasks; t++) sl_free(env->ckpt_task_names[t]);
    sl_free(env->ckpt_task_names);
    sl_free(env->ckpt_task_stats);
    env->ckpt_task_names = NULL;
    env->ckpt_task_stats = NULL;
    env->ckpt_ntasks = 0;
}

/* Embedded mode: the plan goes to a JobManager and a TaskManager in this
 * process (runtime/local.c), which run it (restarts included); their
 * figures come back to the environment. */
int sl_env_execute(sl_env_t *env, const char *job_name) {
    if (env->err_rc) return env->err_rc;
    if (env->nnodes == 0) {
        sl_env_errorf(env, "job '%s' has no operators", job_name ? job_name : "");
        return SL_EINVAL;
    }
    env->restarts = 0;
    sl_plan_t *plan = NULL;
    sl_job_code_t code;
    int rc = sl_plan_build(env, job_name, &plan, &code, env->err, sizeof env->err);
    sl_local_job_t *job = NULL;
    if (rc == 0)
        rc = sl_local_job_new(plan, &code, env->restore_path, env->allow_nrs, &job, env->err, sizeof env->err);
    if (rc < 0) {
        if (plan) sl_plan_free(plan);
        sl_free(plan);
        sl_job_code_free(&code);
        env->err_rc = rc;
        return rc;
    }
    if (env->metrics_fn) sl_local_job_set_metrics_listener(job, env->metrics_fn, env->metrics_ctx);
    if (env->rest_port >= 0) {
        int port = -1;
        rc = sl_local_job_serve_rest(job, env->rest_bind, env->rest_port, getenv("SLUICE_REST_TOKEN"), &port, env->err,
                                     sizeof env->err);
        if (rc < 0) {
            sl_local_job_destroy(job);
            sl_plan_free(plan);
            sl_free(plan);
            sl_job_code_free(&code);
            env->err_rc = rc;
            return rc;
        }
        atomic_store(&env->rest_bound, port);
    }
    pthread_mutex_lock(&env->run_mu);
    env->running = job;
    bool cancel = atomic_load(&env->cancel_requested);
    pthread_mutex_unlock(&env->run_mu);
    if (cancel) sl_local_job_cancel(job);
    sl_job_result_t res;
    rc = sl_local_job_run(job, &res);
    pthread_mutex_lock(&env->run_mu);
    env->running = NULL;
    atomic_store(&env->cancel_requested, false);
    pthread_mutex_unlock(&env->run_mu);
    atomic_store(&env->rest_bound, -1);
    sl_local_job_destroy(job); /* the REST server first */
    /* the figures of the last attempt */
    snprintf(env->err, sizeof env->err, "%s", rc < 0 ? res.err : "");
    env->restarts = res.restarts;
    env->ckpts_completed = res.ckpts_completed;
    env->nckpt_stats = res.nckpt_stats;
    memcpy(env->ckpt_stats, res.ckpt_stats, sizeof env->ckpt_stats);
    env->ckpt_max_sync_ns = res.max_sync_ns;
    sl_env_free_task_stats(env);
    if (plan->cfg.ckpt_enabled) {
        env->ckpt_ntasks = plan->ntasks;
        env->ckpt_task_names = sl_calloc((size_t)(plan->ntasks ? plan->ntasks : 1), sizeof(char *));
        for (int v = 0; v < plan->nvertices; v++)
            for (int s = 0; s < plan->vertices[v].parallelism; s++) {
                char name[300];
                snprintf(name, sizeof name, "%s (%d/%d)", plan->vertices[v].name, s + 1, plan->vertices[v].parallelism);
                env->ckpt_task_names[plan->first_task[v] + s] = sl_strdup(name);
            }
        env->ckpt_task_stats = res.task_stats;
        res.task_stats = NULL;
    }
    for (int i = 0; i < env->nnodes && i < res.nnodes; i++) {
        env->nodes[i]->records_in = res.records_in[i];
        env->nodes[i]->records_out = res.records_out[i];
        env->nodes[i]->records_skipped = res.records_skipped[i];
    }
    sl_job_result_free(&res);
    sl_plan_free(plan);
    sl_free(plan);
    sl_job_code_free(&code);
    return rc;
}

void sl_env_set_allow_non_restored_state(sl_env_t *env, bool allow) { env->allow_nrs = allow; }

void sl_env_set_savepoint_dir(sl_env_t *env, const char *dir) {
    sl_free(env->savepoint_dir);
    env->savepoint_dir = dir && dir[0] ? sl_strdup(dir) : NULL;
}

/* Triggers a savepoint of the running job and waits for its outcome.  The
 * job stays alive while run_mu is held (sl_env_execute takes it before it
 * destroys the job). */
static int savepoint(sl_env_t *env, const char *dir, int kind, char *path, size_t cap) {
    char err[1200] = "";
    if (path && cap) path[0] = 0;
    pthread_mutex_lock(&env->run_mu);
    int rc = env->running ? sl_local_job_savepoint(env->running, dir, kind, path, cap, err, sizeof err)
                          : sl_errf(err, sizeof err, SL_ESTATE,
                                    "savepoint: no job is running (call it while sl_env_execute runs)");
    if (rc < 0) snprintf(env->err, sizeof env->err, "%s", err);
    pthread_mutex_unlock(&env->run_mu);
    return rc;
}

int sl_env_trigger_savepoint(sl_env_t *env, const char *dir, char *path, size_t cap) {
    return savepoint(env, dir, SL_SNAP_SAVEPOINT | (env->savepoint_native ? SL_SNAP_NATIVE : 0), path, cap);
}

int sl_env_stop_with_savepoint(sl_env_t *env, const char *dir, bool drain, char *path, size_t cap) {
    int kind = drain ? SL_SNAP_SAVEPOINT_TERMINATE : SL_SNAP_SAVEPOINT_SUSPEND;
    return savepoint(env, dir, kind | (env->savepoint_native ? SL_SNAP_NATIVE : 0), path, cap);
}

void sl_env_set_savepoint_format(sl_env_t *env, sl_savepoint_format_t format) {
    env->savepoint_native = format == SL_SAVEPOINT_NATIVE;
}

void sl_env_cancel(sl_env_t *env) {
    pthread_mutex_lock(&env->run_mu);
    atomic_store(&env->cancel_requested, true);
    if (env->running) sl_local_job_cancel(env->running);
    pthread_mutex_unlock(&env->run_mu);
}

int sl_env_operator_metrics(const sl_env_t *env, const char *id, int64_t *in, int64_t *out) {
    for (int i = 0; i < env->nnodes; i++) {
        const sl_node_t *n = env->nodes[i];
        if ((n->uid && strcmp(n->uid, id) == 0) || strcmp(n->name, id) == 0) {
            if (in) *in = n->records_in;
            if (out) *out = n->records_out;
            return 0;
        }
    }
    return SL_ENOTFOUND;
}

int64_t sl_env_records_skipped(const sl_env_t *env, const char *id) {
    for (int i = 0; i < env->nnodes; i++) {
        const sl_node_t *n = env->nodes[i];
        if ((n->uid && strcmp(n->uid, id) == 0) || strcmp(n->name, id) == 0) return n->records_skipped;
    }
    return SL_ENOTFOUND;
}

/* PATH: a chk-<n> or savepoint directory (has _metadata), or a job's
 * checkpoint directory (its latest complete chk-<n>): checkpoint/state_reader.h. */
int sl_env_restore_from(sl_env_t *env, const char *path) {
    char err[900] = "", dir[4200];
    sl_ckpt_metadata_t *md = NULL;
    if (!path || !*path) {
        sl_env_errorf(env, "restore: no checkpoint path given");
        return SL_EINVAL;
    }
    int rc = sl_ckpt_open_path(path, &md, dir, sizeof dir, err, sizeof err);
    if (rc < 0) {
        sl_env_errorf(env, "restore from '%s': %s", path, err[0] ? err : sl_strerror(rc));
        return rc;
    }
    sl_ckpt_metadata_free(env->restore_md);
    env->restore_md = md;
    sl_free(env->restore_path);
    env->restore_path = sl_strdup(dir);
    return 0;
}

void sl_env_set_rest_endpoint(sl_env_t *env, const char *bind_address, int port) {
    if (port < -1 || port > 65535) {
        sl_env_errorf(env, "sl_env_set_rest_endpoint: %d is not a port (0..65535, or -1 for none)", port);
        return;
    }
    sl_free(env->rest_bind);
    env->rest_bind = bind_address && bind_address[0] ? sl_strdup(bind_address) : NULL;
    env->rest_port = port;
}

int sl_env_rest_port(const sl_env_t *env) { return atomic_load(&((sl_env_t *)env)->rest_bound); }
