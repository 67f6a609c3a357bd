/*
 * config.h — sluice's configuration: the typed settings of a job and its
 * cluster, read from a Flink-style `config.yaml` and `-D key=value`
 * overrides, with Flink's key names, defaults and value syntax so that a
 * Flink user's settings carry over.
 *
 * The file may be written with flat dotted keys, nested mappings, or a mix;
 * these three mean the same:
 *
 *     execution.checkpointing.interval: 10 s
 *
 *     execution:
 *       checkpointing:
 *         interval: 10 s
 *
 *     execution.checkpointing: { interval: 10 s }
 *
 * Everything is strict: an unknown key (with a "did you mean" suggestion),
 * a bad value, a key given twice in one file, or malformed YAML is an
 * error naming the key, the value, what is allowed, and file:line.
 *
 * Value syntax (as Flink's TimeUtils / MemorySize / ConfigurationUtils):
 *   durations  "10 s", "10s", "1 min", "2 h", "1 d", "500 ms"; a bare
 *              number is milliseconds.  Units: d, day(s); h, hour(s);
 *              min, m, minute(s); s, sec(s), second(s); ms, milli(s),
 *              millisecond(s); µs, micro(s), ns, nano(s) and the long
 *              forms (the value must then be a whole number of ms).
 *   memory     "32 kb", "32kb", "64m", "1 g"; a bare number is bytes.
 *              Units (powers of 1024): b, bytes; k, kb, kibibytes; m, mb,
 *              mebibytes; g, gb, gibibytes; t, tb, tebibytes.
 *   booleans   true / false (any case).
 *   enums      case-insensitive (EXACTLY_ONCE, exactly_once, ...).
 *
 * This is the engine's side of include/sluice/config.h (the public API,
 * where sl_config_t is opaque and allocated by sl_config_new): here the
 * struct is open and may live on the stack (sl_config_defaults /
 * sl_config_free).  The functions declared there (load, set, validate,
 * getters) work on both.
 *
 * Use: sl_config_defaults(), then any number of sl_config_load_file /
 * sl_config_load_string / sl_config_set (later sources override earlier
 * ones), then sl_config_validate() once for the rules that involve several
 * keys, and sl_config_free() at the end.  A load or set that fails leaves
 * the configuration exactly as it was.
 *
 * Errors: 0, or SL_EINVAL (unknown key, bad value, duplicate, rule broken),
 * SL_EFORMAT (malformed YAML) or SL_EIO (file unreadable), with a message in
 * err; several problems in one file are reported one per line.  All are
 * fatal: nothing here is worth retrying.
 *
 * Threads: a configuration is plain data; build it on one thread, then it
 * may be read from any.
 */
#ifndef SL_CONFIG_H
#define SL_CONFIG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "sluice/config.h"

/* execution.checkpointing.mode; same values as sl_ckpt_mode_t. */
enum { SL_CFG_EXACTLY_ONCE = 0, SL_CFG_AT_LEAST_ONCE = 1 };

/* execution.checkpointing.externalized-checkpoint-retention */
enum {
    SL_CFG_NO_EXTERNALIZED_CHECKPOINTS = 0, /* Flink's default */
    SL_CFG_DELETE_ON_CANCELLATION = 1,
    SL_CFG_RETAIN_ON_CANCELLATION = 2,
};

/* high-availability.type */
enum { SL_CFG_HA_NONE = 0, SL_CFG_HA_ZOOKEEPER = 1 };

/* state.backend.type */
enum { SL_CFG_BACKEND_HASHMAP = 0, SL_CFG_BACKEND_ROCKSDB = 1 };

/* restart-strategy.type; SL_CFG_RESTART_DEFAULT when not set (see
 * sl_config_restart_strategy for what that means). */
enum {
    SL_CFG_RESTART_DEFAULT = 0,
    SL_CFG_RESTART_NONE = 1, /* none, off, disable */
    SL_CFG_RESTART_FIXED_DELAY = 2,
    SL_CFG_RESTART_EXPONENTIAL_DELAY = 3,
    SL_CFG_RESTART_FAILURE_RATE = 4,
};

/*
 * The effective configuration.  Durations are in milliseconds, memory sizes
 * in bytes.  Fields are public (this header is internal); each one is
 * described, with its key, default and allowed values, in the key table of
 * config.c, which `sl_config_help` prints.
 *
 * Owns its strings and `where`: copy with sl_config_copy, never with `=`.
 */
/* A value of one of the job's own keys (under a namespace). */
typedef struct sl_config_user {
    char *key, *value, *where; /* owned; where: "file:line" or "-D" */
} sl_config_user_t;

struct sl_config {
    /* core and pipeline */
    int parallelism;                     /* parallelism.default */
    int max_parallelism;                 /* pipeline.max-parallelism; -1 = derived */
    int64_t auto_watermark_interval_ms;  /* pipeline.auto-watermark-interval */
    bool buffer_timeout_enabled;         /* execution.buffer-timeout.enabled */
    int64_t buffer_timeout_ms;           /* execution.buffer-timeout.interval */

    /* checkpointing (execution.checkpointing.*) */
    int64_t checkpoint_interval_ms;      /* .interval; 0 = not set: checkpointing off */
    int checkpoint_mode;                 /* .mode: SL_CFG_EXACTLY_ONCE / _AT_LEAST_ONCE */
    int64_t checkpoint_timeout_ms;       /* .timeout */
    int64_t checkpoint_min_pause_ms;     /* .min-pause */
    int max_concurrent_checkpoints;      /* .max-concurrent-checkpoints */
    int tolerable_failed_checkpoints;    /* .tolerable-failed-checkpoints */
    bool unaligned;                      /* .unaligned.enabled */
    int64_t aligned_checkpoint_timeout_ms; /* .aligned-checkpoint-timeout */
    bool incremental;                    /* .incremental */
    char *checkpoint_dir;                /* .dir; NULL = not set */
    char *savepoint_dir;                 /* .savepoint-dir (state.savepoints.dir); NULL = not set */
    char *savepoint_path;                /* execution.savepoint.path: restore from; NULL = not set */
    bool ignore_unclaimed_state;         /* execution.savepoint.ignore-unclaimed-state */
    int num_retained;                    /* .num-retained */
    int externalized_retention;          /* .externalized-checkpoint-retention */

    /* S3 (checkpoints and savepoints at s3://...; Flink's s3.* keys) */
    char *s3_endpoint;                   /* s3.endpoint; NULL = AWS_ENDPOINT_URL or AWS's */
    char *s3_access_key;                 /* s3.access-key; NULL = AWS_ACCESS_KEY_ID */
    char *s3_secret_key;                 /* s3.secret-key; NULL = AWS_SECRET_ACCESS_KEY */
    char *s3_region;                     /* s3.region; NULL = AWS_REGION / AWS_DEFAULT_REGION / us-east-1 */
    bool s3_path_style;                  /* s3.path.style.access (when set; else path style iff an endpoint is) */

    /* state */
    int state_backend;                   /* state.backend.type */
    char *rocksdb_localdir;              /* state.backend.rocksdb.localdir */
    int64_t rocksdb_block_cache;         /* state.backend.rocksdb.block.cache-size (bytes) */
    int64_t rocksdb_write_buffer;        /* state.backend.rocksdb.writebuffer.size (bytes) */

    /* restart strategy (restart-strategy.*) */
    int restart_strategy;                /* .type: SL_CFG_RESTART_* */
    int fixed_delay_attempts;            /* .fixed-delay.attempts */
    int64_t fixed_delay_ms;              /* .fixed-delay.delay */
    int64_t exp_initial_backoff_ms;      /* .exponential-delay.initial-backoff */
    int64_t exp_max_backoff_ms;          /* .exponential-delay.max-backoff */
    double exp_backoff_multiplier;       /* .exponential-delay.backoff-multiplier */
    int64_t exp_reset_backoff_threshold_ms; /* .exponential-delay.reset-backoff-threshold */
    double exp_jitter_factor;            /* .exponential-delay.jitter-factor */
    int exp_attempts_before_reset;       /* .exponential-delay.attempts-before-reset-backoff */
    int failure_rate_max_failures;       /* .failure-rate.max-failures-per-interval */
    int64_t failure_rate_interval_ms;    /* .failure-rate.failure-rate-interval */
    int64_t failure_rate_delay_ms;       /* .failure-rate.delay */

    /* cluster */
    int task_slots;                      /* taskmanager.numberOfTaskSlots */
    char *jobmanager_address;            /* jobmanager.rpc.address */
    int jobmanager_port;                 /* jobmanager.rpc.port */
    int rest_port;                       /* rest.port */
    int64_t heartbeat_interval_ms;       /* heartbeat.interval */
    int64_t heartbeat_timeout_ms;        /* heartbeat.timeout */
    char *rest_address;                  /* rest.address */
    char *rest_bind_address;             /* rest.bind-address */
    char *taskmanager_host;              /* taskmanager.host */
    int taskmanager_data_port;           /* taskmanager.data.port */
    int64_t slot_request_timeout_ms;     /* slot.request.timeout */
    bool evenly_spread_out_slots;        /* cluster.evenly-spread-out-slots */
    char *internal_secret;               /* security.internal.secret; NULL = none */
    bool ssl_internal_enabled;           /* security.ssl.internal.enabled */
    char *ssl_internal_keystore;         /* security.ssl.internal.keystore */
    char *ssl_internal_keystore_password; /* security.ssl.internal.keystore-password */
    char *ssl_internal_key_password;     /* security.ssl.internal.key-password; NULL = keystore's */
    char *ssl_internal_truststore;       /* security.ssl.internal.truststore */
    char *ssl_internal_truststore_password; /* security.ssl.internal.truststore-password */
    char *ssl_protocol;                  /* security.ssl.protocol */
    char *ssl_algorithms;                /* security.ssl.algorithms; NULL = OpenSSL's defaults */
    int64_t ssl_internal_handshake_timeout_ms; /* security.ssl.internal.handshake-timeout */

    /* network */
    int buffers_per_channel;             /* taskmanager.network.memory.buffers-per-channel */
    int64_t segment_size;                /* taskmanager.memory.segment-size (bytes) */

    /* metrics */
    bool prom_enabled;                   /* metrics.reporter.prom.enabled */
    char *prom_port;                     /* metrics.reporter.prom.port: "9249" or "9249-9260" */

    /* high availability (high-availability.*) */
    int ha_type;                         /* .type: SL_CFG_HA_* */
    char *ha_quorum;                     /* .zookeeper.quorum; NULL = not set */
    char *ha_storage_dir;                /* .storageDir; NULL = not set */
    char *ha_cluster_id;                 /* .cluster-id */
    char *ha_root;                       /* .zookeeper.path.root */
    int64_t ha_session_timeout_ms;       /* .zookeeper.client.session-timeout */
    int64_t ha_connection_timeout_ms;    /* .zookeeper.client.connection-timeout */

    /* Where each key got its value, indexed like the key table: "file:line",
     * "-D", or NULL for the default.  Used in messages and sl_config_format. */
    char **where;

    /* The job's own keys (sl_config_add_namespace): the namespaces, and
     * the values set under them as text, in the order first set. */
    char **namespaces;
    int nnamespaces;
    sl_config_user_t *user;
    int nuser;
};

/* Initializes cfg to the defaults (overwrites it without freeing: call
 * sl_config_free first when reusing an initialized configuration). */
void sl_config_defaults(sl_config_t *cfg);

/* Frees what cfg owns; cfg may then be initialized again.  NULL-safe. */
void sl_config_free(sl_config_t *cfg);

/* Deep copy of src into dst (dst uninitialized or freed). */
void sl_config_copy(sl_config_t *dst, const sl_config_t *src);

/* True when a and b hold the same values (where they came from is ignored). */
bool sl_config_equal(const sl_config_t *a, const sl_config_t *b);




/* sl_config_load_file, sl_config_load_string, sl_config_set and
 * sl_config_validate (parallelism.default <= pipeline.max-parallelism when
 * the latter is set; unaligned checkpoints need EXACTLY_ONCE and
 * max-concurrent-checkpoints 1; exponential-delay initial-backoff <=
 * max-backoff; heartbeat.timeout >= heartbeat.interval; every problem
 * reported, one per line) are declared in sluice/config.h. */

/* Whether key (a core key or an alias) was set by a file or -D rather than
 * left at its default. */
bool sl_config_key_set(const sl_config_t *cfg, const char *key);

/* Appends the effective configuration to out as YAML (flat keys, one per
 * line, each with a comment saying where a non-default value came from;
 * keys that are not set appear as comments).  Loading it back gives an
 * equal configuration.  out stays NUL-terminated (the NUL not counted). */
void sl_config_format(const sl_config_t *cfg, sl_buf_t *out);

/* Appends the list of keys, generated from the key table, for
 * `--help-config`: name, type, default, allowed values, accepted
 * deprecated names, description.  NUL-terminated like sl_config_format. */
void sl_config_help(sl_buf_t *out);

/* Checkpointing is on when execution.checkpointing.interval is set. */
static inline bool sl_config_checkpointing_enabled(const sl_config_t *cfg) {
    return cfg->checkpoint_interval_ms > 0;
}

/* The restart strategy in force: restart-strategy.type when set; otherwise
 * sluice's default — fixed-delay (restart-strategy.fixed-delay.attempts,
 * default 3) when checkpointing is on, none when it is off.  (Flink since
 * 1.19 defaults to exponential-delay when checkpointing is on; sluice keeps
 * PRODUCT.md's "fixed delay, 3 attempts".) */
int sl_config_restart_strategy(const sl_config_t *cfg);

/* Canonical name of an enum value of the key, e.g. ("execution.checkpointing.mode",
 * SL_CFG_AT_LEAST_ONCE) -> "AT_LEAST_ONCE"; NULL if no such key or value. */
const char *sl_config_enum_name(const char *key, int value);

struct sl_env;
/* Copies the settings into env: parallelism, max parallelism,
 * auto-watermark interval, network buffers, checkpointing (interval, mode,
 * timeout, min pause, max concurrent, tolerable failures, dir,
 * num-retained) and the restart strategy.  A setting sluice does not
 * implement yet (unaligned checkpoints, the rocksdb backend, incremental
 * checkpoints, exponential-delay and failure-rate restarts) is an error
 * naming the key, never silently ignored.  0 or SL_EINVAL. */
int sl_config_apply_env(const sl_config_t *cfg, struct sl_env *env, char *err, size_t errlen);
/* Makes the s3.* keys this process's S3 settings (sl_s3_set_defaults in
 * checkpoint/s3_client.h), as Flink configures its S3 filesystem per
 * process.  sl_config_apply_env calls it; the JobManager and TaskManager
 * commands call it after parsing their configuration. */
void sl_config_apply_s3(const sl_config_t *cfg);

struct sl_tls_ctx;
/* The TLS context of this process from security.ssl.internal.* and
 * security.ssl.* (common/tls.h): *out = NULL when
 * security.ssl.internal.enabled is false.  Loads the keystore and the
 * truststore now, so a missing file, a wrong password or a key that does
 * not match its certificate is an error naming the key and the path when
 * the process starts.  0 or SL_EINVAL / SL_EIO. */
int sl_config_tls_ctx(const sl_config_t *cfg, struct sl_tls_ctx **out, char *err, size_t errlen);

#endif
