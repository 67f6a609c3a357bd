/*
 * config.c — the configuration: the key table (one line per key: name,
 * deprecated names, type, field, default, allowed range or values, help),
 * Flink's value syntax (durations, memory sizes, booleans, enums), the YAML
 * reader that flattens nested mappings into dotted keys, the cross-key
 * rules, and the YAML / --help-config writers — all driven by the table.
 *
 * Adding a key: a field in sl_config_t and one entry in KEYS below.
 */
#include "config/config.h"

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <yaml.h>

#include "checkpoint/s3_client.h"
#include "common/tls.h"
#include "config/suggest.h"
#include "sluice/sluice.h"

/* ---- the key table ------------------------------------------------------ */

typedef enum { CT_INT, CT_DURATION, CT_MEMORY, CT_BOOL, CT_ENUM, CT_STRING, CT_DOUBLE } ctype_t;

typedef struct enum_val {
    const char *name; /* the first name of a value is its canonical one */
    int value;
} enum_val_t;

enum {
    F_MINUS1 = 1,    /* -1 is allowed besides [min, max] (CT_INT) */
    F_POW2 = 2,      /* must be a power of two (CT_MEMORY) */
    F_DMIN_EXCL = 4, /* dmin itself is not allowed (CT_DOUBLE) */
};

typedef struct cfg_key {
    const char *name;
    const char *alias[2];  /* deprecated names Flink still accepts, or NULL */
    ctype_t type;
    size_t off;            /* of the field in sl_config_t */
    const char *def;       /* default, written as a user would; NULL: not set */
    int64_t min, max;      /* CT_INT (of int), CT_DURATION (ms), CT_MEMORY (bytes) */
    double dmin, dmax;     /* CT_DOUBLE */
    const enum_val_t *enums; /* CT_ENUM, NULL-terminated */
    unsigned flags;
    const char *unset;     /* what "not set" means, when def is NULL */
    const char *help;
} cfg_key_t;

#define OFF(f) offsetof(sl_config_t, f)
#define KINT(n, f, d, lo, hi, ...) {.name = n, .type = CT_INT, .off = OFF(f), .def = d, .min = lo, .max = hi, __VA_ARGS__}
#define KDUR(n, f, d, lo, ...) {.name = n, .type = CT_DURATION, .off = OFF(f), .def = d, .min = lo, .max = INT64_MAX, __VA_ARGS__}
#define KMEM(n, f, d, lo, hi, ...) {.name = n, .type = CT_MEMORY, .off = OFF(f), .def = d, .min = lo, .max = hi, __VA_ARGS__}
#define KBOOL(n, f, d, ...) {.name = n, .type = CT_BOOL, .off = OFF(f), .def = d, __VA_ARGS__}
#define KENUM(n, f, d, e, ...) {.name = n, .type = CT_ENUM, .off = OFF(f), .def = d, .enums = e, __VA_ARGS__}
#define KSTR(n, f, d, ...) {.name = n, .type = CT_STRING, .off = OFF(f), .def = d, __VA_ARGS__}
#define KDBL(n, f, d, lo, hi, ...) {.name = n, .type = CT_DOUBLE, .off = OFF(f), .def = d, .dmin = lo, .dmax = hi, __VA_ARGS__}
#define ALIAS(...) .alias = {__VA_ARGS__}

static const enum_val_t MODE_VALUES[] = {
    {"EXACTLY_ONCE", SL_CFG_EXACTLY_ONCE}, {"AT_LEAST_ONCE", SL_CFG_AT_LEAST_ONCE}, {NULL, 0}};
static const enum_val_t RETENTION_VALUES[] = {{"NO_EXTERNALIZED_CHECKPOINTS", SL_CFG_NO_EXTERNALIZED_CHECKPOINTS},
                                              {"DELETE_ON_CANCELLATION", SL_CFG_DELETE_ON_CANCELLATION},
                                              {"RETAIN_ON_CANCELLATION", SL_CFG_RETAIN_ON_CANCELLATION},
                                              {NULL, 0}};
/* Flink's HighAvailabilityMode (a factory class name is not accepted). */
static const enum_val_t HA_VALUES[] = {{"NONE", SL_CFG_HA_NONE}, {"ZOOKEEPER", SL_CFG_HA_ZOOKEEPER}, {NULL, 0}};
static const enum_val_t BACKEND_VALUES[] = {
    {"hashmap", SL_CFG_BACKEND_HASHMAP}, {"rocksdb", SL_CFG_BACKEND_ROCKSDB}, {NULL, 0}};
/* Flink's RestartStrategyType: main value first, then its other spellings. */
static const enum_val_t RESTART_VALUES[] = {{"disable", SL_CFG_RESTART_NONE},
                                            {"none", SL_CFG_RESTART_NONE},
                                            {"off", SL_CFG_RESTART_NONE},
                                            {"fixed-delay", SL_CFG_RESTART_FIXED_DELAY},
                                            {"fixeddelay", SL_CFG_RESTART_FIXED_DELAY},
                                            {"exponential-delay", SL_CFG_RESTART_EXPONENTIAL_DELAY},
                                            {"exponentialdelay", SL_CFG_RESTART_EXPONENTIAL_DELAY},
                                            {"failure-rate", SL_CFG_RESTART_FAILURE_RATE},
                                            {"failurerate", SL_CFG_RESTART_FAILURE_RATE},
                                            {NULL, 0}};

#define KB 1024LL
#define MS_10 10 /* Flink's MINIMAL_CHECKPOINT_TIME */

/*
 * Names, defaults and ranges are Flink 2.x's (CheckpointingOptions,
 * RestartStrategyOptions, PipelineOptions, ...) unless a comment says
 * sluice differs.  Deprecated names are those Flink lists in
 * withDeprecatedKeys, so a 1.x flink-conf.yaml still reads.
 */
static const cfg_key_t KEYS[] = {
    /* core and pipeline */
    KINT("parallelism.default", parallelism, "1", 1, INT32_MAX,
         .help = "Parallelism of operators that do not set their own."),
    KINT("pipeline.max-parallelism", max_parallelism, "-1", 1, 32768, .flags = F_MINUS1,
         .help = "Number of key groups: the upper bound for rescaling keyed state. -1 derives it from the "
                 "parallelism p as roundUpToPowerOfTwo(p + p/2), clamped to [128, 32768]."),
    KDUR("pipeline.auto-watermark-interval", auto_watermark_interval_ms, "200 ms", 0,
         .help = "How often sources emit generated watermarks (processing time); 0 emits after every record."),
    KBOOL("execution.buffer-timeout.enabled", buffer_timeout_enabled, "true",
          .help = "If false, output buffers are flushed only when full (maximum throughput)."),
    KDUR("execution.buffer-timeout.interval", buffer_timeout_ms, "100 ms", 0, ALIAS("execution.buffer-timeout"),
         .help = "Longest time a record waits in a partly filled output buffer; 0 flushes after every record."),

    /* checkpointing */
    KDUR("execution.checkpointing.interval", checkpoint_interval_ms, NULL, MS_10,
         .unset = "checkpointing is off",
         .help = "Interval between periodic checkpoints. Setting it turns checkpointing on."),
    KENUM("execution.checkpointing.mode", checkpoint_mode, "EXACTLY_ONCE", MODE_VALUES,
          .help = "EXACTLY_ONCE aligns barriers on tasks with several inputs; AT_LEAST_ONCE does not."),
    KDUR("execution.checkpointing.timeout", checkpoint_timeout_ms, "10 min", MS_10,
         .help = "A checkpoint not complete after this long is aborted."),
    KDUR("execution.checkpointing.min-pause", checkpoint_min_pause_ms, "0 ms", 0,
         .help = "Least time between the end of one checkpoint and the start of the next."),
    KINT("execution.checkpointing.max-concurrent-checkpoints", max_concurrent_checkpoints, "1", 1, INT32_MAX,
         .help = "Most checkpoints in progress at once."),
    KINT("execution.checkpointing.tolerable-failed-checkpoints", tolerable_failed_checkpoints, "0", 0, INT32_MAX,
         .help = "Checkpoint failures in a row that are tolerated before the job fails."),
    KBOOL("execution.checkpointing.unaligned.enabled", unaligned, "false", ALIAS("execution.checkpointing.unaligned"),
          .help = "Unaligned checkpoints: barriers overtake buffered records, which are stored in the checkpoint. "
                  "Needs EXACTLY_ONCE and max-concurrent-checkpoints 1."),
    KDUR("execution.checkpointing.aligned-checkpoint-timeout", aligned_checkpoint_timeout_ms, "0 ms", 0,
         ALIAS("execution.checkpointing.alignment-timeout"),
         .help = "With unaligned checkpoints: start aligned and switch to unaligned when alignment takes longer "
                 "than this; 0 starts unaligned."),
    KBOOL("execution.checkpointing.incremental", incremental, "false", ALIAS("state.backend.incremental"),
          .help = "Incremental checkpoints (RocksDB): upload only new SST files."),
    KSTR("execution.checkpointing.dir", checkpoint_dir, NULL,
         ALIAS("state.checkpoints.dir", "state.backend.fs.checkpointdir"), .unset = "no checkpoint storage",
         .help = "Directory (local or shared mount) where checkpoints are written."),
    KSTR("execution.checkpointing.savepoint-dir", savepoint_dir, NULL,
         ALIAS("state.savepoints.dir", "savepoints.state.backend.fs.dir"), .unset = "no default savepoint directory",
         .help = "Default directory for savepoints."),
    KSTR("s3.endpoint", s3_endpoint, NULL, .unset = "AWS_ENDPOINT_URL, else AWS's endpoint of the region",
         .help = "URL of the S3-compatible store for s3:// checkpoint and savepoint directories."),
    KSTR("s3.access-key", s3_access_key, NULL, .unset = "AWS_ACCESS_KEY_ID",
         .help = "Access key for s3:// directories."),
    KSTR("s3.secret-key", s3_secret_key, NULL, .unset = "AWS_SECRET_ACCESS_KEY",
         .help = "Secret key for s3:// directories."),
    KSTR("s3.region", s3_region, NULL, .unset = "AWS_REGION, AWS_DEFAULT_REGION, else us-east-1",
         .help = "Region that requests to S3 are signed for (SigV4)."),
    KBOOL("s3.path.style.access", s3_path_style, "false",
          .help = "Path-style requests (http://host/bucket/key) instead of virtual-host style "
                  "(http://bucket.host/key); not set: path style when s3.endpoint (or AWS_ENDPOINT_URL) is set."),
    KSTR("execution.savepoint.path", savepoint_path, NULL, .unset = "start without restoring",
         .help = "A savepoint or checkpoint to restore the job from (sluice run -s)."),
    KBOOL("execution.savepoint.ignore-unclaimed-state", ignore_unclaimed_state, "false",
          .help = "Restore even when the savepoint holds state of an operator that is not in the job (sluice run "
                  "-n); that state is dropped."),
    KINT("execution.checkpointing.num-retained", num_retained, "1", 1, INT32_MAX,
         ALIAS("state.checkpoints.num-retained"), .help = "Completed checkpoints kept; older ones are deleted."),
    KENUM("execution.checkpointing.externalized-checkpoint-retention", externalized_retention,
          "NO_EXTERNALIZED_CHECKPOINTS", RETENTION_VALUES,
          .help = "Whether retained checkpoints survive the job: RETAIN_ON_CANCELLATION keeps them after a cancel."),

    /* state */
    KENUM("state.backend.type", state_backend, "hashmap", BACKEND_VALUES, ALIAS("state.backend"),
          .help = "Where keyed state lives: on the heap (hashmap) or in RocksDB."),
    KSTR("state.backend.rocksdb.localdir", rocksdb_localdir, NULL, .unset = "the temporary directory (TMPDIR)",
         .help = "Where RocksDB keeps its working databases (one per keyed operator subtask)."),
    KMEM("state.backend.rocksdb.block.cache-size", rocksdb_block_cache, "64 mb", 1 * KB, INT64_MAX,
         .help = "RocksDB block cache shared by every RocksDB backend of the job."),
    KMEM("state.backend.rocksdb.writebuffer.size", rocksdb_write_buffer, "64 mb", 64 * KB, INT64_MAX,
         .help = "Memtable budget of each RocksDB database (one per keyed operator subtask)."),

    /* restart strategy */
    KENUM("restart-strategy.type", restart_strategy, NULL, RESTART_VALUES, ALIAS("restart-strategy"),
          .unset = "fixed-delay when checkpointing is on, else disable",
          .help = "What to do when a task fails."),
    /* Flink's default is 1 (and with checkpointing on and no strategy set,
     * Flink >= 1.19 uses exponential-delay); sluice's is 3, PRODUCT.md S4. */
    KINT("restart-strategy.fixed-delay.attempts", fixed_delay_attempts, "3", 0, INT32_MAX,
         .help = "fixed-delay: restarts before the job is declared failed (sluice default 3; Flink's is 1)."),
    KDUR("restart-strategy.fixed-delay.delay", fixed_delay_ms, "1 s", 0,
         .help = "fixed-delay: wait between two restarts."),
    KDUR("restart-strategy.exponential-delay.initial-backoff", exp_initial_backoff_ms, "1 s", 1,
         .help = "exponential-delay: first wait."),
    KDUR("restart-strategy.exponential-delay.max-backoff", exp_max_backoff_ms, "1 min", 1,
         .help = "exponential-delay: longest wait."),
    KDBL("restart-strategy.exponential-delay.backoff-multiplier", exp_backoff_multiplier, "1.5", 1.0, INFINITY,
         .flags = F_DMIN_EXCL, .help = "exponential-delay: the wait is multiplied by this after every failure."),
    KDUR("restart-strategy.exponential-delay.reset-backoff-threshold", exp_reset_backoff_threshold_ms, "1 h", 1,
         .help = "exponential-delay: running this long without failure resets the wait and the attempt count."),
    KDBL("restart-strategy.exponential-delay.jitter-factor", exp_jitter_factor, "0.1", 0.0, 1.0,
         .help = "exponential-delay: random share of the wait added or subtracted."),
    KINT("restart-strategy.exponential-delay.attempts-before-reset-backoff", exp_attempts_before_reset,
         "2147483647", 1, INT32_MAX, .help = "exponential-delay: restarts before the job fails (2147483647: no limit)."),
    KINT("restart-strategy.failure-rate.max-failures-per-interval", failure_rate_max_failures, "1", 1, INT32_MAX,
         .help = "failure-rate: restarts allowed within one interval."),
    KDUR("restart-strategy.failure-rate.failure-rate-interval", failure_rate_interval_ms, "1 min", 1,
         .help = "failure-rate: the interval over which failures are counted."),
    KDUR("restart-strategy.failure-rate.delay", failure_rate_delay_ms, "1 s", 0,
         .help = "failure-rate: wait between two restarts."),

    /* cluster */
    KINT("taskmanager.numberOfTaskSlots", task_slots, "1", 1, INT32_MAX,
         .help = "Slots (parallel pipelines) per TaskManager."),
    KSTR("jobmanager.rpc.address", jobmanager_address, "localhost", .help = "Host of the JobManager."),
    KINT("jobmanager.rpc.port", jobmanager_port, "6123", 0, 65535, .help = "RPC port of the JobManager."),
    KINT("rest.port", rest_port, "8081", 0, 65535, .help = "Port of the REST API and web UI."),
    KSTR("rest.address", rest_address, "localhost", .help = "Host the `sluice` client sends REST requests to."),
    KSTR("rest.bind-address", rest_bind_address, "localhost",
         .help = "Address the REST server binds to (sluice default localhost, as Flink's)."),
    KSTR("taskmanager.host", taskmanager_host, "localhost",
         .help = "Address a TaskManager binds its data port to and announces to the others."),
    KINT("taskmanager.data.port", taskmanager_data_port, "0", 0, 65535,
         .help = "Data port of a TaskManager (0: any free port)."),
    KDUR("slot.request.timeout", slot_request_timeout_ms, "5 min", 0,
         .help = "How long a job waits for enough slots before it fails."),
    KBOOL("cluster.evenly-spread-out-slots", evenly_spread_out_slots, "false",
          .help = "Spread a job's slots over all TaskManagers instead of filling one after the other."),
    KSTR("security.internal.secret", internal_secret, NULL,
         .help = "Shared secret every internal connection (RPC, data, artifacts) must prove; not set: none."),
    /* Flink's SecurityOptions (internal SSL); files and passwords are
     * checked when a JobManager or TaskManager starts (sl_config_tls_ctx). */
    KBOOL("security.ssl.internal.enabled", ssl_internal_enabled, "false",
          .help = "TLS with mutual authentication on every internal connection (RPC, data, artifacts)."),
    KSTR("security.ssl.internal.keystore", ssl_internal_keystore, NULL, .unset = "none",
         .help = "This node's key and certificate: a PKCS#12 keystore, or a PEM file with the key and certificate."),
    KSTR("security.ssl.internal.keystore-password", ssl_internal_keystore_password, NULL, .unset = "none",
         .help = "Password of the PKCS#12 keystore."),
    KSTR("security.ssl.internal.key-password", ssl_internal_key_password, NULL, .unset = "the keystore password",
         .help = "Password of the private key (a PEM key's passphrase)."),
    KSTR("security.ssl.internal.truststore", ssl_internal_truststore, NULL, .unset = "none",
         .help = "Certificates a peer's certificate must chain to: a PKCS#12 truststore or a PEM bundle."),
    KSTR("security.ssl.internal.truststore-password", ssl_internal_truststore_password, NULL, .unset = "none",
         .help = "Password of the PKCS#12 truststore."),
    KSTR("security.ssl.protocol", ssl_protocol, "TLSv1.2",
         .help = "TLS version(s): TLSv1.2, TLSv1.3, or both comma-separated."),
    KSTR("security.ssl.algorithms", ssl_algorithms, NULL, .unset = "OpenSSL's defaults",
         .help = "Cipher suites, comma-separated, in OpenSSL's names (e.g. ECDHE-RSA-AES128-GCM-SHA256, "
                 "TLS_AES_128_GCM_SHA256), not Java's."),
    KDUR("security.ssl.internal.handshake-timeout", ssl_internal_handshake_timeout_ms, "10 s", 1,
         .help = "Longest a TLS handshake on an internal connection may take."),
    /* Flink: 10 s.  sluice keeps Flink's 1:5 ratio to its shorter timeout. */
    KDUR("heartbeat.interval", heartbeat_interval_ms, "2 s", 1,
         .help = "Time between heartbeats (sluice default 2 s; Flink's is 10 s)."),
    /* Flink: 50 s.  sluice: 10 s, PRODUCT.md S4 — a dead TaskManager is
     * noticed within 10 s. */
    KDUR("heartbeat.timeout", heartbeat_timeout_ms, "10 s", 1,
         .help = "A peer silent this long is declared dead (sluice default 10 s; Flink's is 50 s)."),

    /* network */
    /* Flink: 2.  sluice: 4 (sl_env_new's), for throughput across its
     * smaller, batched exchanges. */
    KINT("taskmanager.network.memory.buffers-per-channel", buffers_per_channel, "4", 1, INT32_MAX,
         .help = "Network buffers per channel (sluice default 4; Flink's is 2)."),
    /* Flink requires >= 4 kb and a power of two (ConfigurationParserUtils);
     * sluice's buffer sizes are ints, hence the 1 gb cap. */
    KMEM("taskmanager.memory.segment-size", segment_size, "32 kb", 4 * KB, KB * KB * KB, .flags = F_POW2,
         .help = "Size of a network buffer."),

    /* metrics: Flink's Prometheus reporter is switched on by naming its
     * factory class; sluice has one reporter and a switch, off by default
     * so that processes on one host (and parallel tests) do not compete
     * for the port unless asked to. */
    KBOOL("metrics.reporter.prom.enabled", prom_enabled, "false",
          .help = "Serve GET /metrics in Prometheus's text format from every JobManager and TaskManager process."),
    KSTR("metrics.reporter.prom.port", prom_port, "9249",
         .help = "Port, or range \"9249-9260\" (each process takes the first free one), of the Prometheus endpoint."),

    /* high availability (Flink's HighAvailabilityOptions; src/ha/) */
    KENUM("high-availability.type", ha_type, "NONE", HA_VALUES, ALIAS("high-availability"),
          .help = "NONE, or ZOOKEEPER: several JobManagers elect a leader in ZooKeeper, which keeps the jobs, the "
                  "checkpoint id counters and the completed checkpoints, so a new leader resumes every job."),
    KSTR("high-availability.zookeeper.quorum", ha_quorum, NULL, ALIAS("recovery.zookeeper.quorum"),
         .unset = "none (needed with high-availability.type: zookeeper)",
         .help = "ZooKeeper's servers, host:port[,host:port...]."),
    KSTR("high-availability.storageDir", ha_storage_dir, NULL, ALIAS("high-availability.zookeeper.storageDir"),
         .unset = "none (a JobManager with HA needs it)",
         .help = "Directory (a shared mount) where the JobManagers keep the jobs' artifacts; ZooKeeper keeps "
                 "pointers to them."),
    KSTR("high-availability.cluster-id", ha_cluster_id, "/default",
         .help = "Names this cluster's znodes under the root, so that clusters can share a ZooKeeper."),
    /* Flink: /flink */
    KSTR("high-availability.zookeeper.path.root", ha_root, "/sluice",
         .help = "Root znode of sluice's data in ZooKeeper (sluice default /sluice; Flink's is /flink)."),
    /* Flink: 60 s.  sluice: 10 s (heartbeat.timeout's default): a dead
     * leader is replaced that much sooner. */
    KDUR("high-availability.zookeeper.client.session-timeout", ha_session_timeout_ms, "10 s", 1000,
         .help = "ZooKeeper session timeout: a leader silent this long loses its leadership (sluice default "
                 "10 s; Flink's is 60 s)."),
    KDUR("high-availability.zookeeper.client.connection-timeout", ha_connection_timeout_ms, "15 s", 100,
         .help = "How long a process waits to connect to ZooKeeper at its start."),
};

#define NKEYS ((int)SL_ARRAY_LEN(KEYS))

static void *field_of(sl_config_t *c, const cfg_key_t *k) { return (char *)c + k->off; }
static const void *cfield_of(const sl_config_t *c, const cfg_key_t *k) { return (const char *)c + k->off; }

/* The key called name (or with name as a deprecated alias), or -1. */
static int key_index(const char *name) {
    for (int i = 0; i < NKEYS; i++) {
        if (strcmp(KEYS[i].name, name) == 0) return i;
        for (int a = 0; a < 2; a++)
            if (KEYS[i].alias[a] && strcmp(KEYS[i].alias[a], name) == 0) return i;
    }
    return -1;
}

static bool starts_with_group(const char *key, const char *group, size_t glen) {
    return key && strncmp(key, group, glen) == 0 && key[glen] == '.';
}

/* Whether name is a prefix of keys ("execution.checkpointing"); if so and
 * example is given, a key under it. */
static bool is_group(const char *name, const char **example) {
    size_t n = strlen(name);
    for (int i = 0; i < NKEYS; i++) {
        if (starts_with_group(KEYS[i].name, name, n)) {
            if (example) *example = KEYS[i].name;
            return true;
        }
        for (int a = 0; a < 2; a++)
            if (starts_with_group(KEYS[i].alias[a], name, n)) {
                if (example) *example = KEYS[i].name;
                return true;
            }
    }
    return false;
}

/* ---- text helpers ----------------------------------------------------------- */

static void buf_printf(sl_buf_t *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void buf_printf(sl_buf_t *b, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    sl_buf_reserve(b, (size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf((char *)b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

static void buf_terminate(sl_buf_t *b) {
    sl_buf_reserve(b, 1);
    b->p[b->len] = 0;
}

/* A value as it may appear inside "..." in a message: control characters
 * escaped, long values cut with "...". */
static const char *msg_quote(const char *s, char *out, size_t cap) {
    size_t o = 0;
    for (size_t i = 0; s[i]; i++) {
        unsigned char c = (unsigned char)s[i];
        if (o + 8 >= cap) {
            memcpy(out + o, "...", 3);
            o += 3;
            break;
        }
        if (c < 0x20 || c == 0x7f) o += (size_t)snprintf(out + o, cap - o, "\\x%02x", c);
        else if (c == '"' || c == '\\') {
            out[o++] = '\\';
            out[o++] = (char)c;
        } else out[o++] = (char)c;
    }
    out[o] = 0;
    return out;
}

static const char *skip_space(const char *s) {
    while (*s == ' ' || *s == '\t') s++;
    return s;
}

/* s without leading/trailing blanks, into out (cap bytes); false if too long. */
static bool trim_copy(const char *s, char *out, size_t cap) {
    s = skip_space(s);
    size_t n = strlen(s);
    while (n && (s[n - 1] == ' ' || s[n - 1] == '\t')) n--;
    if (n >= cap) return false;
    memcpy(out, s, n);
    out[n] = 0;
    return true;
}

static void lower(char *s) {
    for (; *s; s++)
        if (*s >= 'A' && *s <= 'Z') *s = (char)(*s - 'A' + 'a');
}

/* Leading decimal digits of s into *v; returns the number of digits, or
 * -1 on overflow. */
static int leading_digits(const char *s, int64_t *v) {
    int64_t x = 0;
    int n = 0;
    for (; s[n] >= '0' && s[n] <= '9'; n++) {
        int d = s[n] - '0';
        if (x > (INT64_MAX - d) / 10) return -1;
        x = x * 10 + d;
    }
    *v = x;
    return n;
}

/* ---- value syntax (Flink's) --------------------------------------------------- */

typedef struct unit {
    const char *label;
    int64_t mul; /* durations: ms per unit (0: sub-millisecond, see div) */
    int64_t div; /* durations: units per ms */
} unit_t;

/* Flink's TimeUtils labels. */
static const unit_t TIME_UNITS[] = {
    {"d", 86400000, 1},   {"day", 86400000, 1},    {"days", 86400000, 1},
    {"h", 3600000, 1},    {"hour", 3600000, 1},    {"hours", 3600000, 1},
    {"min", 60000, 1},    {"m", 60000, 1},         {"minute", 60000, 1},  {"minutes", 60000, 1},
    {"s", 1000, 1},       {"sec", 1000, 1},        {"secs", 1000, 1},     {"second", 1000, 1},
    {"seconds", 1000, 1}, {"ms", 1, 1},            {"milli", 1, 1},       {"millis", 1, 1},
    {"millisecond", 1, 1}, {"milliseconds", 1, 1}, {"\xc2\xb5s", 0, 1000}, {"micro", 0, 1000},
    {"micros", 0, 1000},  {"microsecond", 0, 1000}, {"microseconds", 0, 1000}, {"ns", 0, 1000000},
    {"nano", 0, 1000000}, {"nanos", 0, 1000000},  {"nanosecond", 0, 1000000}, {"nanoseconds", 0, 1000000},
};

/* Flink's MemorySize.MemoryUnit labels (bytes per unit in mul). */
static const unit_t MEMORY_UNITS[] = {
    {"b", 1, 0},           {"bytes", 1, 0},       {"k", KB, 0},           {"kb", KB, 0},
    {"kibibytes", KB, 0},  {"m", KB * KB, 0},     {"mb", KB * KB, 0},     {"mebibytes", KB * KB, 0},
    {"g", KB * KB * KB, 0}, {"gb", KB * KB * KB, 0}, {"gibibytes", KB * KB * KB, 0},
    {"t", KB * KB * KB * KB, 0}, {"tb", KB * KB * KB * KB, 0}, {"tebibytes", KB * KB * KB * KB, 0},
};

/* "<digits> [unit]" (blanks around the unit allowed).  *num gets the
 * number, unit (cap bytes) the lowercased unit label ("" when none). */
static int split_number_unit(const char *text, int64_t *num, char *unit, size_t cap, char *why, size_t wl) {
    char t[128];
    if (!trim_copy(text, t, sizeof t)) return sl_errf(why, wl, -1, "too long");
    if (!t[0]) return sl_errf(why, wl, -1, "empty");
    int nd = leading_digits(t, num);
    if (nd < 0) return sl_errf(why, wl, -1, "the number does not fit in 64 bits");
    if (nd == 0) return sl_errf(why, wl, -1, "does not start with a number");
    if (!trim_copy(t + nd, unit, cap)) return sl_errf(why, wl, -1, "unit too long");
    lower(unit);
    return 0;
}

/* A Flink duration into milliseconds. */
static int parse_duration(const char *text, int64_t *ms, char *why, size_t wl) {
    int64_t v;
    char unit[64];
    if (split_number_unit(text, &v, unit, sizeof unit, why, wl) < 0) return -1;
    if (!unit[0]) {
        *ms = v; /* a bare number is milliseconds */
        return 0;
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(TIME_UNITS); i++) {
        const unit_t *u = &TIME_UNITS[i];
        if (strcmp(u->label, unit) != 0) continue;
        if (u->mul) {
            if (v > INT64_MAX / u->mul) return sl_errf(why, wl, -1, "too large");
            *ms = v * u->mul;
        } else {
            if (v % u->div) return sl_errf(why, wl, -1, "not a whole number of milliseconds");
            *ms = v / u->div;
        }
        return 0;
    }
    char q[80];
    return sl_errf(why, wl, -1, "unknown time unit \"%s\"", msg_quote(unit, q, sizeof q));
}

/* A Flink memory size into bytes. */
static int parse_memory(const char *text, int64_t *bytes, char *why, size_t wl) {
    int64_t v;
    char unit[64];
    if (split_number_unit(text, &v, unit, sizeof unit, why, wl) < 0) return -1;
    if (!unit[0]) {
        *bytes = v;
        return 0;
    }
    for (size_t i = 0; i < SL_ARRAY_LEN(MEMORY_UNITS); i++) {
        if (strcmp(MEMORY_UNITS[i].label, unit) != 0) continue;
        if (v > INT64_MAX / MEMORY_UNITS[i].mul) return sl_errf(why, wl, -1, "too large");
        *bytes = v * MEMORY_UNITS[i].mul;
        return 0;
    }
    char q[80];
    return sl_errf(why, wl, -1, "unknown memory unit \"%s\"", msg_quote(unit, q, sizeof q));
}

/* "1 min", "200 ms", "0 ms": the largest unit that divides ms. */
static void format_duration(int64_t ms, char *out, size_t cap) {
    static const struct { int64_t ms; const char *label; } U[] = {
        {86400000, "d"}, {3600000, "h"}, {60000, "min"}, {1000, "s"}};
    for (size_t i = 0; i < SL_ARRAY_LEN(U); i++)
        if (ms != 0 && ms % U[i].ms == 0) {
            snprintf(out, cap, "%lld %s", (long long)(ms / U[i].ms), U[i].label);
            return;
        }
    snprintf(out, cap, "%lld ms", (long long)ms);
}

static void format_memory(int64_t b, char *out, size_t cap) {
    static const struct { int64_t bytes; const char *label; } U[] = {
        {KB * KB * KB * KB, "tb"}, {KB * KB * KB, "gb"}, {KB * KB, "mb"}, {KB, "kb"}};
    for (size_t i = 0; i < SL_ARRAY_LEN(U); i++)
        if (b != 0 && b % U[i].bytes == 0) {
            snprintf(out, cap, "%lld %s", (long long)(b / U[i].bytes), U[i].label);
            return;
        }
    snprintf(out, cap, "%lld bytes", (long long)b);
}

/* Shortest text that reads back as the same double. */
static void format_double(double d, char *out, size_t cap) {
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(out, cap, "%.*g", prec, d);
        if (strtod(out, NULL) == d) return;
    }
}

/* What the key allows, for messages and --help-config. */
static void describe_allowed(const cfg_key_t *k, char *out, size_t cap) {
    char a[48], b[48];
    switch (k->type) {
    case CT_INT:
        if (k->min == INT64_MIN) snprintf(out, cap, "an integer");
        else if (k->flags & F_MINUS1)
            snprintf(out, cap, "-1 (derived) or an integer from %lld to %lld", (long long)k->min, (long long)k->max);
        else if (k->max == INT32_MAX) snprintf(out, cap, "an integer >= %lld", (long long)k->min);
        else snprintf(out, cap, "an integer from %lld to %lld", (long long)k->min, (long long)k->max);
        break;
    case CT_DURATION:
        format_duration(k->min, a, sizeof a);
        snprintf(out, cap,
                 "a duration >= %s, e.g. \"10 s\", \"1 min\", \"500 ms\" (units d, h, min, s, ms; a bare number "
                 "is ms)",
                 a);
        break;
    case CT_MEMORY:
        if (k->max == INT64_MAX && k->min == 0) {
            snprintf(out, cap, "a memory size, e.g. \"32 kb\", \"64 mb\" (units b, kb, mb, gb, tb; a bare number is bytes)");
            break;
        }
        format_memory(k->min, a, sizeof a);
        format_memory(k->max, b, sizeof b);
        snprintf(out, cap,
                 "a memory size from %s to %s%s, e.g. \"32 kb\", \"64 mb\" (units b, kb, mb, gb, tb; a bare "
                 "number is bytes)",
                 a, b, (k->flags & F_POW2) ? ", a power of two" : "");
        break;
    case CT_BOOL: snprintf(out, cap, "true or false"); break;
    case CT_ENUM: {
        size_t o = (size_t)snprintf(out, cap, "one of ");
        for (const enum_val_t *e = k->enums; e->name && o < cap; e++)
            o += (size_t)snprintf(out + o, cap - o, "%s%s", e == k->enums ? "" : ", ", e->name);
        if (o < cap) snprintf(out + o, cap - o, " (any case)");
        break;
    }
    case CT_STRING: snprintf(out, cap, "a non-empty string"); break;
    case CT_DOUBLE:
        format_double(k->dmin, a, sizeof a);
        format_double(k->dmax, b, sizeof b);
        if (isinf(k->dmin) && isinf(k->dmax)) snprintf(out, cap, "a number");
        else if (k->flags & F_DMIN_EXCL) snprintf(out, cap, "a number greater than %s", a);
        else if (isinf(k->dmax)) snprintf(out, cap, "a number >= %s", a);
        else snprintf(out, cap, "a number from %s to %s", a, b);
        break;
    }
}

static const char *type_name(ctype_t t) {
    switch (t) {
    case CT_INT: return "integer";
    case CT_DURATION: return "duration";
    case CT_MEMORY: return "memory size";
    case CT_BOOL: return "boolean";
    case CT_ENUM: return "enum";
    case CT_STRING: return "string";
    case CT_DOUBLE: return "number";
    }
    return "?";
}

/* A parsed value, before it is stored. */
typedef struct val {
    int64_t i;
    double d;
    char *s; /* CT_STRING: owned */
} val_t;

/* Parses text as a value of k, range-checked.  On error, why says what is
 * wrong (without the allowed values, which the caller adds). */
static int parse_value(const cfg_key_t *k, const char *text, val_t *v, char *why, size_t wl) {
    char t[128], a[48];
    memset(v, 0, sizeof *v);
    switch (k->type) {
    case CT_INT: {
        if (!trim_copy(text, t, sizeof t)) return sl_errf(why, wl, -1, "too long");
        const char *p = t;
        if (*p == '+' || *p == '-') p++;
        if (*p < '0' || *p > '9') return sl_errf(why, wl, -1, "not an integer");
        errno = 0;
        char *end;
        long long x = strtoll(t, &end, 10);
        if (*end) return sl_errf(why, wl, -1, "not an integer");
        bool minus1 = (k->flags & F_MINUS1) && x == -1;
        if (errno == ERANGE || ((x < k->min || x > k->max) && !minus1)) return sl_errf(why, wl, -1, "out of range");
        v->i = x;
        return 0;
    }
    case CT_DURATION:
        if (parse_duration(text, &v->i, why, wl) < 0) return -1;
        if (v->i < k->min) {
            format_duration(k->min, a, sizeof a);
            return sl_errf(why, wl, -1, "less than %s", a);
        }
        return 0;
    case CT_MEMORY:
        if (parse_memory(text, &v->i, why, wl) < 0) return -1;
        if (v->i < k->min || v->i > k->max) return sl_errf(why, wl, -1, "out of range");
        if ((k->flags & F_POW2) && (v->i & (v->i - 1))) return sl_errf(why, wl, -1, "not a power of two");
        return 0;
    case CT_BOOL:
        if (!trim_copy(text, t, sizeof t)) return sl_errf(why, wl, -1, "too long");
        if (strcasecmp(t, "true") == 0) v->i = 1;
        else if (strcasecmp(t, "false") == 0) v->i = 0;
        else return sl_errf(why, wl, -1, "not a boolean");
        return 0;
    case CT_ENUM:
        if (!trim_copy(text, t, sizeof t)) return sl_errf(why, wl, -1, "too long");
        for (const enum_val_t *e = k->enums; e->name; e++)
            if (strcasecmp(e->name, t) == 0) {
                v->i = e->value;
                return 0;
            }
        return sl_errf(why, wl, -1, "not a known value");
    case CT_STRING:
        if (!*skip_space(text)) return sl_errf(why, wl, -1, "empty");
        v->s = sl_strdup(text);
        return 0;
    case CT_DOUBLE: {
        if (!trim_copy(text, t, sizeof t)) return sl_errf(why, wl, -1, "too long");
        char *end;
        double d = strtod(t, &end);
        if (!t[0] || *end || !isfinite(d)) return sl_errf(why, wl, -1, "not a number");
        bool below = (k->flags & F_DMIN_EXCL) ? !(d > k->dmin) : !(d >= k->dmin);
        if (below || !(d <= k->dmax)) return sl_errf(why, wl, -1, "out of range");
        v->d = d;
        return 0;
    }
    }
    return sl_errf(why, wl, -1, "unknown type");
}

/* Stores v (taking its string) into k's field of c. */
static void store_value(sl_config_t *c, const cfg_key_t *k, val_t *v) {
    void *f = field_of(c, k);
    switch (k->type) {
    case CT_INT:
    case CT_ENUM: *(int *)f = (int)v->i; break;
    case CT_DURATION:
    case CT_MEMORY: *(int64_t *)f = v->i; break;
    case CT_BOOL: *(bool *)f = v->i != 0; break;
    case CT_DOUBLE: *(double *)f = v->d; break;
    case CT_STRING:
        sl_free(*(char **)f);
        *(char **)f = v->s;
        v->s = NULL;
        break;
    }
}

/* Whether k's field of c holds a value (only keys without a default can
 * be unset: strings NULL, durations 0, enums 0). */
static bool has_value(const sl_config_t *c, const cfg_key_t *k) {
    if (k->def) return true;
    const void *f = cfield_of(c, k);
    switch (k->type) {
    case CT_STRING: return *(char *const *)f != NULL;
    case CT_DURATION: return *(const int64_t *)f != 0;
    case CT_ENUM: return *(const int *)f != 0;
    default: return true;
    }
}

static const char *enum_name(const cfg_key_t *k, int value) {
    for (const enum_val_t *e = k->enums; e->name; e++)
        if (e->value == value) return e->name;
    return NULL;
}

/* The value of k in c, as it would be written in a config file (strings
 * unquoted). */
static void format_value(const sl_config_t *c, const cfg_key_t *k, char *out, size_t cap) {
    const void *f = cfield_of(c, k);
    switch (k->type) {
    case CT_INT: snprintf(out, cap, "%d", *(const int *)f); break;
    case CT_DURATION: format_duration(*(const int64_t *)f, out, cap); break;
    case CT_MEMORY: format_memory(*(const int64_t *)f, out, cap); break;
    case CT_BOOL: snprintf(out, cap, "%s", *(const bool *)f ? "true" : "false"); break;
    case CT_ENUM: {
        const char *n = enum_name(k, *(const int *)f);
        snprintf(out, cap, "%s", n ? n : "?");
        break;
    }
    case CT_STRING: snprintf(out, cap, "%s", *(char *const *)f ? *(char *const *)f : ""); break;
    case CT_DOUBLE: format_double(*(const double *)f, out, cap); break;
    }
}

/* ---- errors -------------------------------------------------------------------- */

#define MAX_SHOWN_ERRORS 20

/* Errors of one call: one per line in err, the first one's code returned. */
typedef struct errs {
    char *buf;
    size_t cap, used;
    int n;      /* ordinary errors, shown up to MAX_SHOWN_ERRORS */
    int forced; /* errors always shown */
    int rc;
} errs_t;

static void errs_init(errs_t *e, char *err, size_t errlen) {
    memset(e, 0, sizeof *e);
    e->buf = err;
    e->cap = err ? errlen : 0;
    if (e->cap) err[0] = 0;
}

/* No more messages will be shown: skip the costly ones (suggestions). */
static bool errs_full(const errs_t *e) { return e->n >= MAX_SHOWN_ERRORS; }

static void errs_vadd(errs_t *e, int rc, bool always, const char *fmt, va_list ap) {
    if (!e->rc) e->rc = rc;
    if (always) e->forced++;
    else if (++e->n > MAX_SHOWN_ERRORS) return;
    if (e->used + 2 >= e->cap) return;
    if (e->used) e->buf[e->used++] = '\n';
    int w = vsnprintf(e->buf + e->used, e->cap - e->used, fmt, ap);
    if (w > 0) e->used = SL_MIN(e->used + (size_t)w, e->cap - 1);
    e->buf[e->used] = 0;
}

static void errs_add(errs_t *e, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void errs_add(errs_t *e, int rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    errs_vadd(e, rc, false, fmt, ap);
    va_end(ap);
}

/* An error shown even past MAX_SHOWN_ERRORS (one that ends the walk). */
static void errs_add_always(errs_t *e, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void errs_add_always(errs_t *e, int rc, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    errs_vadd(e, rc, true, fmt, ap);
    va_end(ap);
}

static int errs_finish(errs_t *e) {
    if (e->n > MAX_SHOWN_ERRORS && e->used + 2 < e->cap) {
        int w = snprintf(e->buf + e->used, e->cap - e->used, "\n(and %d more errors)", e->n - MAX_SHOWN_ERRORS);
        if (w > 0) e->used = SL_MIN(e->used + (size_t)w, e->cap - 1);
    }
    return e->rc;
}

static void bad_value(errs_t *e, const char *where, const cfg_key_t *k, const char *text, const char *why) {
    char q[160], allowed[512];
    describe_allowed(k, allowed, sizeof allowed);
    errs_add(e, SL_EINVAL, "%s: %s: bad value \"%s\": %s; allowed: %s", where, k->name,
             msg_quote(text, q, sizeof q), why, allowed);
}

/* The known key closest to an unknown name, or NULL when none is close. */
static const char *suggest_key(const char *name) {
    size_t n = strlen(name);
    int limit = sl_suggest_limit(n);
    const char *best = NULL;
    int best_d = INT_MAX;
    for (int i = 0; i < NKEYS; i++) {
        const char *names[3] = {KEYS[i].name, KEYS[i].alias[0], KEYS[i].alias[1]};
        for (int j = 0; j < 3; j++) {
            if (!names[j]) continue;
            size_t m = strlen(names[j]);
            if ((n > m ? n - m : m - n) > (size_t)limit) continue; /* the distance is at least that */
            int d = sl_edit_distance(name, names[j], false);
            if (d < best_d) {
                best_d = d;
                best = KEYS[i].name;
            }
        }
    }
    if (best && best_d <= limit) return best;
    /* a key given without its first segments ("checkpointing.interval") */
    for (int i = 0; i < NKEYS && n; i++) {
        size_t kl = strlen(KEYS[i].name);
        if (kl > n && KEYS[i].name[kl - n - 1] == '.' && strcmp(KEYS[i].name + kl - n, name) == 0)
            return KEYS[i].name;
    }
    return NULL;
}

static void unknown_key(errs_t *e, const char *where, const char *name) {
    if (errs_full(e)) {
        errs_add(e, SL_EINVAL, "unknown key");
        return;
    }
    char q[160];
    const char *example = NULL;
    msg_quote(name, q, sizeof q);
    if (is_group(name, &example)) {
        errs_add(e, SL_EINVAL, "%s: \"%s\" is a group of keys, not a key (e.g. \"%s\")", where, q, example);
        return;
    }
    const char *s = suggest_key(name);
    if (s) errs_add(e, SL_EINVAL, "%s: unknown key \"%s\" (did you mean \"%s\"?)", where, q, s);
    else errs_add(e, SL_EINVAL, "%s: unknown key \"%s\"", where, q);
}

/* ---- life cycle ---------------------------------------------------------------- */

void sl_config_defaults(sl_config_t *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->where = sl_calloc((size_t)NKEYS, sizeof *cfg->where);
    for (int i = 0; i < NKEYS; i++) {
        const cfg_key_t *k = &KEYS[i];
        /* a key without a default must be able to show that it is unset */
        if (!k->def) {
            if (k->type == CT_DURATION && k->min <= 0) abort();
            if (k->type != CT_DURATION && k->type != CT_STRING && k->type != CT_ENUM) abort();
            if (k->type == CT_ENUM && enum_name(k, 0)) abort();
            continue;
        }
        val_t v;
        char why[128];
        if (parse_value(k, k->def, &v, why, sizeof why) < 0) {
            fprintf(stderr, "sluice: bad default \"%s\" of %s: %s\n", k->def, k->name, why);
            abort();
        }
        store_value(cfg, k, &v);
    }
}

void sl_config_free(sl_config_t *cfg) {
    if (!cfg) return;
    for (int i = 0; i < NKEYS; i++) {
        if (KEYS[i].type == CT_STRING) {
            char **s = field_of(cfg, &KEYS[i]);
            sl_free(*s);
            *s = NULL;
        }
        if (cfg->where) sl_free(cfg->where[i]);
    }
    sl_free(cfg->where);
    cfg->where = NULL;
    for (int i = 0; i < cfg->nnamespaces; i++) sl_free(cfg->namespaces[i]);
    sl_free(cfg->namespaces);
    cfg->namespaces = NULL;
    cfg->nnamespaces = 0;
    for (int i = 0; i < cfg->nuser; i++) {
        sl_free(cfg->user[i].key);
        sl_free(cfg->user[i].value);
        sl_free(cfg->user[i].where);
    }
    sl_free(cfg->user);
    cfg->user = NULL;
    cfg->nuser = 0;
}

void sl_config_copy(sl_config_t *dst, const sl_config_t *src) {
    memcpy(dst, src, sizeof *dst);
    dst->where = sl_calloc((size_t)NKEYS, sizeof *dst->where);
    for (int i = 0; i < NKEYS; i++) {
        if (KEYS[i].type == CT_STRING) {
            char **s = field_of(dst, &KEYS[i]);
            *s = sl_strdup(*s);
        }
        if (src->where) dst->where[i] = sl_strdup(src->where[i]);
    }
    dst->namespaces = src->nnamespaces ? sl_calloc((size_t)src->nnamespaces, sizeof *dst->namespaces) : NULL;
    for (int i = 0; i < src->nnamespaces; i++) dst->namespaces[i] = sl_strdup(src->namespaces[i]);
    dst->user = src->nuser ? sl_calloc((size_t)src->nuser, sizeof *dst->user) : NULL;
    for (int i = 0; i < src->nuser; i++) {
        dst->user[i].key = sl_strdup(src->user[i].key);
        dst->user[i].value = sl_strdup(src->user[i].value);
        dst->user[i].where = sl_strdup(src->user[i].where);
    }
}

/* ---- the job's own keys (namespaces) ---------------------------------------------- */

/* The value of the job's key, or NULL. */
static const sl_config_user_t *user_find(const sl_config_t *c, const char *key) {
    for (int i = 0; i < c->nuser; i++)
        if (strcmp(c->user[i].key, key) == 0) return &c->user[i];
    return NULL;
}

/* Whether key lies under one of c's namespaces. */
static bool in_namespace(const sl_config_t *c, const char *key) {
    for (int i = 0; i < c->nnamespaces; i++)
        if (starts_with_group(key, c->namespaces[i], strlen(c->namespaces[i]))) return true;
    return false;
}

/* Sets the job's key (copies everything). */
static void user_put(sl_config_t *c, const char *key, const char *value, const char *where) {
    sl_config_user_t *u = (sl_config_user_t *)user_find(c, key);
    if (!u) {
        c->user = sl_realloc(c->user, (size_t)(c->nuser + 1) * sizeof *c->user);
        u = &c->user[c->nuser++];
        u->key = sl_strdup(key);
    } else {
        sl_free(u->value);
        sl_free(u->where);
    }
    u->value = sl_strdup(value);
    u->where = sl_strdup(where);
}

bool sl_config_equal(const sl_config_t *a, const sl_config_t *b) {
    for (int i = 0; i < NKEYS; i++) {
        const cfg_key_t *k = &KEYS[i];
        const void *fa = cfield_of(a, k), *fb = cfield_of(b, k);
        switch (k->type) {
        case CT_INT:
        case CT_ENUM:
            if (*(const int *)fa != *(const int *)fb) return false;
            break;
        case CT_DURATION:
        case CT_MEMORY:
            if (*(const int64_t *)fa != *(const int64_t *)fb) return false;
            break;
        case CT_BOOL:
            if (*(const bool *)fa != *(const bool *)fb) return false;
            break;
        case CT_DOUBLE:
            if (*(const double *)fa != *(const double *)fb) return false;
            break;
        case CT_STRING: {
            const char *sa = *(char *const *)fa, *sb = *(char *const *)fb;
            if ((sa == NULL) != (sb == NULL) || (sa && strcmp(sa, sb) != 0)) return false;
            break;
        }
        }
    }
    if (a->nuser != b->nuser) return false;
    for (int i = 0; i < a->nuser; i++) {
        const sl_config_user_t *u = user_find(b, a->user[i].key);
        if (!u || strcmp(u->value, a->user[i].value) != 0) return false;
    }
    return true;
}

bool sl_config_key_set(const sl_config_t *cfg, const char *key) {
    int i = key_index(key);
    return i >= 0 && cfg->where && cfg->where[i] != NULL;
}

static void set_where(sl_config_t *c, int idx, const char *where) {
    sl_free(c->where[idx]);
    c->where[idx] = sl_strdup(where);
}

/* ---- reading YAML ----------------------------------------------------------------- */

#define MAX_DEPTH 32            /* nesting of mappings */
#define MAX_VISITS 100000L      /* entries walked: bounds alias fan-out */
#define MAX_FILE_BYTES (16 << 20)

typedef struct loader {
    sl_config_t *cfg;           /* the scratch copy being filled */
    yaml_document_t *doc;
    const char *origin;
    int *seen_line;             /* per key: line where this document set it, 0 if not */
    const char **seen_name;     /* the name it was set under there */
    errs_t *e;
    long visits;
    char **user_seen;           /* the job's keys this document set ... */
    int *user_seen_line;        /* ... and where */
    int nuser_seen;
} loader_t;

static bool is_null_scalar(const yaml_node_t *n) {
    if (n->type != YAML_SCALAR_NODE || n->data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return false;
    const char *s = (const char *)n->data.scalar.value;
    return n->data.scalar.length == 0 || strcmp(s, "~") == 0 || strcmp(s, "null") == 0 || strcmp(s, "Null") == 0 ||
           strcmp(s, "NULL") == 0;
}

static int line_of(const yaml_node_t *n) { return (int)n->start_mark.line + 1; }

/* A leaf of the job's own key: kept as text, checked when read. */
static void set_user_leaf(loader_t *ld, const char *name, yaml_node_t *vn, int line, const char *where) {
    char q[160];
    for (int i = 0; i < ld->nuser_seen; i++)
        if (strcmp(ld->user_seen[i], name) == 0) {
            errs_add(ld->e, SL_EINVAL, "%s: duplicate key \"%s\" (already set at %s:%d)", where,
                     msg_quote(name, q, sizeof q), ld->origin, ld->user_seen_line[i]);
            return;
        }
    ld->user_seen = sl_realloc(ld->user_seen, (size_t)(ld->nuser_seen + 1) * sizeof *ld->user_seen);
    ld->user_seen_line = sl_realloc(ld->user_seen_line, (size_t)(ld->nuser_seen + 1) * sizeof *ld->user_seen_line);
    ld->user_seen[ld->nuser_seen] = sl_strdup(name);
    ld->user_seen_line[ld->nuser_seen++] = line;
    const char *text = (const char *)vn->data.scalar.value;
    if (is_null_scalar(vn)) {
        errs_add(ld->e, SL_EINVAL, "%s: %s: no value given", where, msg_quote(name, q, sizeof q));
        return;
    }
    if (memchr(text, 0, vn->data.scalar.length)) {
        errs_add(ld->e, SL_EINVAL, "%s: %s: bad value: contains a NUL character", where, msg_quote(name, q, sizeof q));
        return;
    }
    user_put(ld->cfg, name, text, where);
}

/* A leaf: name (flattened) = the scalar vn, written at line. */
static void set_leaf(loader_t *ld, const char *name, yaml_node_t *vn, int line) {
    char where[600];
    snprintf(where, sizeof where, "%s:%d", ld->origin, line);
    int idx = key_index(name);
    if (idx < 0 && in_namespace(ld->cfg, name)) {
        set_user_leaf(ld, name, vn, line, where);
        return;
    }
    if (idx < 0) {
        if (is_null_scalar(vn) && is_group(name, NULL)) return; /* an empty group, e.g. all commented out */
        unknown_key(ld->e, where, name);
        return;
    }
    const cfg_key_t *k = &KEYS[idx];
    const char *text = (const char *)vn->data.scalar.value;
    char q[160];
    if (ld->seen_line[idx]) {
        msg_quote(name, q, sizeof q);
        if (strcmp(ld->seen_name[idx], name) == 0)
            errs_add(ld->e, SL_EINVAL, "%s: duplicate key \"%s\" (already set at %s:%d)", where, q, ld->origin,
                     ld->seen_line[idx]);
        else
            errs_add(ld->e, SL_EINVAL, "%s: duplicate key \"%s\" (already set at %s:%d as \"%s\")", where, q,
                     ld->origin, ld->seen_line[idx], ld->seen_name[idx]);
        return;
    }
    ld->seen_line[idx] = line;
    ld->seen_name[idx] = k->name;
    for (int a = 0; a < 2; a++)
        if (k->alias[a] && strcmp(k->alias[a], name) == 0) ld->seen_name[idx] = k->alias[a];
    if (is_null_scalar(vn)) {
        char allowed[512];
        describe_allowed(k, allowed, sizeof allowed);
        errs_add(ld->e, SL_EINVAL, "%s: %s: no value given; allowed: %s", where, k->name, allowed);
        return;
    }
    if (memchr(text, 0, vn->data.scalar.length)) {
        errs_add(ld->e, SL_EINVAL, "%s: %s: bad value \"%s\": contains a NUL character", where, k->name,
                 msg_quote(text, q, sizeof q));
        return;
    }
    val_t v;
    char why[160];
    if (parse_value(k, text, &v, why, sizeof why) < 0) {
        bad_value(ld->e, where, k, text, why);
        return;
    }
    store_value(ld->cfg, k, &v);
    set_where(ld->cfg, idx, where);
}

static const char *node_kind(const yaml_node_t *n) {
    switch (n->type) {
    case YAML_MAPPING_NODE: return "mapping";
    case YAML_SEQUENCE_NODE: return "list";
    default: return "scalar";
    }
}

/* Set of the keys of one mapping, to find keys written twice in it. */
typedef struct keyset {
    const char **k;
    size_t *len;
    int *line;
    size_t cap;
} keyset_t;

/* Adds key; returns the line it was first seen at, or 0 if new. */
static int keyset_add(keyset_t *s, const char *key, size_t len, int line) {
    size_t h = (size_t)sl_hash_bytes(key, len) & (s->cap - 1);
    while (s->k[h]) {
        if (s->len[h] == len && memcmp(s->k[h], key, len) == 0) return s->line[h];
        h = (h + 1) & (s->cap - 1);
    }
    s->k[h] = key;
    s->len[h] = len;
    s->line[h] = line;
    return 0;
}

static void walk_mapping(loader_t *ld, yaml_node_t *map, const char *prefix, int depth) {
    char where[600], q[160];
    if (depth > MAX_DEPTH) {
        snprintf(where, sizeof where, "%s:%d", ld->origin, line_of(map));
        errs_add_always(ld->e, SL_EINVAL, "%s: mappings nested more than %d deep", where, MAX_DEPTH);
        return;
    }
    size_t npairs = (size_t)(map->data.mapping.pairs.top - map->data.mapping.pairs.start);
    keyset_t set = {0};
    set.cap = 8;
    while (set.cap < 2 * npairs) set.cap *= 2;
    set.k = sl_calloc(set.cap, sizeof *set.k);
    set.len = sl_calloc(set.cap, sizeof *set.len);
    set.line = sl_calloc(set.cap, sizeof *set.line);
    for (yaml_node_pair_t *p = map->data.mapping.pairs.start; p < map->data.mapping.pairs.top; p++) {
        if (++ld->visits > MAX_VISITS) {
            if (ld->visits == MAX_VISITS + 1)
                errs_add_always(ld->e, SL_EINVAL, "%s: more than %ld entries (aliases expanding without end?)",
                                ld->origin, MAX_VISITS);
            break;
        }
        yaml_node_t *kn = yaml_document_get_node(ld->doc, p->key);
        yaml_node_t *vn = yaml_document_get_node(ld->doc, p->value);
        if (!kn || !vn) continue;
        int line = line_of(kn);
        snprintf(where, sizeof where, "%s:%d", ld->origin, line);
        if (kn->type != YAML_SCALAR_NODE) {
            errs_add(ld->e, SL_EINVAL, "%s: a key must be a name, not a %s", where, node_kind(kn));
            continue;
        }
        const char *ks = (const char *)kn->data.scalar.value;
        size_t kl = kn->data.scalar.length;
        if (kl == 0 || is_null_scalar(kn) || memchr(ks, 0, kl)) {
            errs_add(ld->e, SL_EINVAL, "%s: empty or invalid key \"%s\"", where, msg_quote(ks, q, sizeof q));
            continue;
        }
        int first = keyset_add(&set, ks, kl, line);
        if (first) {
            errs_add(ld->e, SL_EINVAL, "%s: duplicate key \"%s\" in the same mapping (first at %s:%d)", where,
                     msg_quote(ks, q, sizeof q), ld->origin, first);
            continue;
        }
        char *full;
        if (prefix) {
            size_t pl = strlen(prefix);
            full = sl_malloc(pl + 1 + kl + 1);
            memcpy(full, prefix, pl);
            full[pl] = '.';
            memcpy(full + pl + 1, ks, kl + 1);
        } else full = sl_strndup(ks, kl);
        switch (vn->type) {
        case YAML_MAPPING_NODE: walk_mapping(ld, vn, full, depth + 1); break;
        case YAML_SCALAR_NODE: set_leaf(ld, full, vn, line); break;
        default:
            if (key_index(full) >= 0 || in_namespace(ld->cfg, full))
                errs_add(ld->e, SL_EINVAL, "%s: %s: expects a single value, not a list", where,
                         msg_quote(full, q, sizeof q));
            else unknown_key(ld->e, where, full);
            break;
        }
        sl_free(full);
    }
    sl_free(set.k);
    sl_free(set.len);
    sl_free(set.line);
}

/* Line (1-based) of byte offset off in text. */
static int line_at(const char *text, size_t len, size_t off) {
    int line = 1;
    for (size_t i = 0; i < off && i < len; i++)
        if (text[i] == '\n') line++;
    return line;
}

static void yaml_error(errs_t *e, const yaml_parser_t *p, const char *origin, const char *text, size_t len) {
    const char *problem = p->problem ? p->problem : "unknown error";
    switch (p->error) {
    case YAML_MEMORY_ERROR: errs_add(e, SL_ENOMEM, "%s: out of memory reading YAML", origin); break;
    case YAML_READER_ERROR:
        errs_add(e, SL_EFORMAT, "%s:%d: malformed YAML: %s (byte offset %zu)", origin,
                 line_at(text, len, p->problem_offset), problem, p->problem_offset);
        break;
    default:
        if (p->context)
            errs_add(e, SL_EFORMAT, "%s:%zu:%zu: malformed YAML: %s (%s, at line %zu)", origin,
                     p->problem_mark.line + 1, p->problem_mark.column + 1, problem, p->context,
                     p->context_mark.line + 1);
        else
            errs_add(e, SL_EFORMAT, "%s:%zu:%zu: malformed YAML: %s", origin, p->problem_mark.line + 1,
                     p->problem_mark.column + 1, problem);
        break;
    }
}

static int load_text(sl_config_t *cfg, const char *text, size_t len, const char *origin, char *err, size_t errlen) {
    errs_t e;
    errs_init(&e, err, errlen);
    if (!origin) origin = "<string>";
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser)) {
        errs_add(&e, SL_ENOMEM, "%s: out of memory reading YAML", origin);
        return errs_finish(&e);
    }
    yaml_parser_set_input_string(&parser, (const unsigned char *)text, len);

    sl_config_t tmp;
    sl_config_copy(&tmp, cfg);
    loader_t ld = {.cfg = &tmp, .origin = origin, .e = &e};
    ld.seen_line = sl_calloc((size_t)NKEYS, sizeof *ld.seen_line);
    ld.seen_name = sl_calloc((size_t)NKEYS, sizeof *ld.seen_name);

    for (int ndoc = 0;; ndoc++) {
        yaml_document_t doc;
        if (!yaml_parser_load(&parser, &doc)) {
            yaml_error(&e, &parser, origin, text, len);
            break;
        }
        yaml_node_t *root = yaml_document_get_root_node(&doc);
        if (!root) { /* end of the stream */
            yaml_document_delete(&doc);
            break;
        }
        ld.doc = &doc;
        if (ndoc > 0) {
            errs_add(&e, SL_EINVAL, "%s:%d: a second YAML document: a config file holds one", origin,
                     (int)doc.start_mark.line + 1);
        } else if (root->type == YAML_MAPPING_NODE) {
            walk_mapping(&ld, root, NULL, 0);
        } else if (!is_null_scalar(root)) {
            errs_add(&e, SL_EINVAL, "%s:%d: the top level must be a mapping of keys to values (\"key: value\"), not a %s",
                     origin, line_of(root), node_kind(root));
        }
        yaml_document_delete(&doc);
        if (ndoc > 0) break;
    }
    yaml_parser_delete(&parser);
    sl_free(ld.seen_line);
    sl_free(ld.seen_name);
    for (int i = 0; i < ld.nuser_seen; i++) sl_free(ld.user_seen[i]);
    sl_free(ld.user_seen);
    sl_free(ld.user_seen_line);

    if (e.rc) {
        sl_config_free(&tmp);
        return errs_finish(&e);
    }
    sl_config_free(cfg);
    *cfg = tmp;
    return 0;
}

int sl_config_load_string(sl_config_t *cfg, const char *text, const char *origin, char *err, size_t errlen) {
    return load_text(cfg, text ? text : "", text ? strlen(text) : 0, origin, err, errlen);
}

int sl_config_load_file(sl_config_t *cfg, const char *path, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) return sl_errf(err, errlen, SL_EIO, "%s: cannot open config file: %s", path, strerror(errno));
    sl_buf_t b = {0};
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) {
        if (b.len + n > MAX_FILE_BYTES) {
            fclose(f);
            sl_buf_free(&b);
            return sl_errf(err, errlen, SL_EINVAL, "%s: config file larger than %d MB", path, MAX_FILE_BYTES >> 20);
        }
        sl_buf_append(&b, chunk, n);
    }
    int rd_err = ferror(f);
    fclose(f);
    if (rd_err) {
        sl_buf_free(&b);
        return sl_errf(err, errlen, SL_EIO, "%s: cannot read config file", path);
    }
    int rc = load_text(cfg, b.p ? (const char *)b.p : "", b.len, path, err, errlen);
    sl_buf_free(&b);
    return rc;
}

int sl_config_set(sl_config_t *cfg, const char *key, const char *value, char *err, size_t errlen) {
    errs_t e;
    errs_init(&e, err, errlen);
    int idx = key ? key_index(key) : -1;
    if (idx < 0 && key && in_namespace(cfg, key)) {
        if (!value || !*skip_space(value)) {
            char q[160];
            errs_add(&e, SL_EINVAL, "-D: %s: no value given", msg_quote(key, q, sizeof q));
            return errs_finish(&e);
        }
        user_put(cfg, key, value, "-D");
        return 0;
    }
    if (idx < 0) {
        unknown_key(&e, "-D", key ? key : "");
        return errs_finish(&e);
    }
    const cfg_key_t *k = &KEYS[idx];
    val_t v;
    char why[160];
    if (parse_value(k, value ? value : "", &v, why, sizeof why) < 0) {
        bad_value(&e, "-D", k, value ? value : "", why);
        return errs_finish(&e);
    }
    store_value(cfg, k, &v);
    set_where(cfg, idx, "-D");
    return 0;
}

/* ---- TLS ------------------------------------------------------------------------- */

int sl_config_tls_ctx(const sl_config_t *c, sl_tls_ctx_t **out, char *err, size_t errlen) {
    *out = NULL;
    if (!c->ssl_internal_enabled) return 0;
    sl_tls_config_t tc = {.keystore = c->ssl_internal_keystore,
                          .keystore_password = c->ssl_internal_keystore_password,
                          .key_password = c->ssl_internal_key_password,
                          .truststore = c->ssl_internal_truststore,
                          .truststore_password = c->ssl_internal_truststore_password,
                          .protocol = c->ssl_protocol,
                          .algorithms = c->ssl_algorithms,
                          .handshake_timeout_ms = c->ssl_internal_handshake_timeout_ms > INT32_MAX
                                                      ? INT32_MAX
                                                      : (int)c->ssl_internal_handshake_timeout_ms};
    return sl_tls_ctx_new(&tc, out, err, errlen);
}

/* ---- cross-key rules ------------------------------------------------------------- */

/* Where key `name` got its value, for messages. */
static const char *src_of(const sl_config_t *c, const char *name) {
    int i = key_index(name);
    return i >= 0 && c->where && c->where[i] ? c->where[i] : "default";
}

int sl_config_restart_strategy(const sl_config_t *cfg) {
    if (cfg->restart_strategy != SL_CFG_RESTART_DEFAULT) return cfg->restart_strategy;
    return sl_config_checkpointing_enabled(cfg) ? SL_CFG_RESTART_FIXED_DELAY : SL_CFG_RESTART_NONE;
}

int sl_config_validate(const sl_config_t *c, char *err, size_t errlen) {
    errs_t e;
    errs_init(&e, err, errlen);
    char a[48], b[48];

    /* Flink: a vertex's parallelism must not exceed its max parallelism. */
    if (c->max_parallelism != -1 && c->parallelism > c->max_parallelism)
        errs_add(&e, SL_EINVAL,
                 "%s: parallelism.default %d is greater than pipeline.max-parallelism %d (set at %s); allowed: "
                 "parallelism.default <= pipeline.max-parallelism",
                 src_of(c, "parallelism.default"), c->parallelism, c->max_parallelism,
                 src_of(c, "pipeline.max-parallelism"));

    /* Flink (ENABLE_UNALIGNED): unaligned checkpoints only with
     * EXACTLY_ONCE and max-concurrent-checkpoints 1.  Flink logs a warning
     * and quietly checkpoints aligned instead; sluice refuses. */
    if (c->unaligned && c->checkpoint_mode != SL_CFG_EXACTLY_ONCE)
        errs_add(&e, SL_EINVAL,
                 "%s: execution.checkpointing.unaligned.enabled true requires execution.checkpointing.mode "
                 "EXACTLY_ONCE, but it is %s (set at %s); allowed: unaligned with EXACTLY_ONCE only",
                 src_of(c, "execution.checkpointing.unaligned.enabled"),
                 sl_config_enum_name("execution.checkpointing.mode", c->checkpoint_mode),
                 src_of(c, "execution.checkpointing.mode"));
    if (c->unaligned && c->max_concurrent_checkpoints != 1)
        errs_add(&e, SL_EINVAL,
                 "%s: execution.checkpointing.unaligned.enabled true requires "
                 "execution.checkpointing.max-concurrent-checkpoints 1, but it is %d (set at %s)",
                 src_of(c, "execution.checkpointing.unaligned.enabled"), c->max_concurrent_checkpoints,
                 src_of(c, "execution.checkpointing.max-concurrent-checkpoints"));

    /* Flink (ExponentialDelayRestartBackoffTimeStrategy), when in force. */
    if (sl_config_restart_strategy(c) == SL_CFG_RESTART_EXPONENTIAL_DELAY &&
        c->exp_initial_backoff_ms > c->exp_max_backoff_ms) {
        format_duration(c->exp_initial_backoff_ms, a, sizeof a);
        format_duration(c->exp_max_backoff_ms, b, sizeof b);
        errs_add(&e, SL_EINVAL,
                 "%s: restart-strategy.exponential-delay.initial-backoff %s is greater than "
                 "restart-strategy.exponential-delay.max-backoff %s (set at %s); allowed: initial-backoff <= "
                 "max-backoff",
                 src_of(c, "restart-strategy.exponential-delay.initial-backoff"), a, b,
                 src_of(c, "restart-strategy.exponential-delay.max-backoff"));
    }

    /* s3:// directories must be well-formed URIs (the bucket is reached when a job starts) */
    const char *dirs[] = {c->checkpoint_dir, c->savepoint_dir, c->savepoint_path};
    const char *dkeys[] = {"execution.checkpointing.dir", "execution.checkpointing.savepoint-dir",
                           "execution.savepoint.path"};
    for (int i = 0; i < 3; i++) {
        char bucket[64], prefix[1024], why[300];
        if (dirs[i] && sl_s3_is_uri(dirs[i]) &&
            sl_s3_parse_uri(dirs[i], bucket, sizeof bucket, prefix, sizeof prefix, why, sizeof why) < 0)
            errs_add(&e, SL_EINVAL, "%s: %s: %s", src_of(c, dkeys[i]), dkeys[i], why);
    }

    /* Flink (HeartbeatServices): the timeout must not be below the interval. */
    if (c->heartbeat_timeout_ms < c->heartbeat_interval_ms) {
        format_duration(c->heartbeat_timeout_ms, a, sizeof a);
        format_duration(c->heartbeat_interval_ms, b, sizeof b);
        errs_add(&e, SL_EINVAL,
                 "%s: heartbeat.timeout %s is less than heartbeat.interval %s (set at %s); allowed: "
                 "heartbeat.timeout >= heartbeat.interval",
                 src_of(c, "heartbeat.timeout"), a, b, src_of(c, "heartbeat.interval"));
    }
    return errs_finish(&e);
}

/* ---- writing -------------------------------------------------------------------- */

/* s as a YAML double-quoted scalar. */
static void yaml_quote(sl_buf_t *out, const char *s) {
    sl_buf_append(out, "\"", 1);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') buf_printf(out, "\\%c", c);
        else if (c == '\n') sl_buf_append(out, "\\n", 2);
        else if (c == '\t') sl_buf_append(out, "\\t", 2);
        else if (c < 0x20 || c == 0x7f) buf_printf(out, "\\x%02x", c);
        else if (c == 0xc2 && (unsigned char)s[1] == 0x85) { /* NEL: a line break to YAML */
            sl_buf_append(out, "\\N", 2);
            s++;
        } else if (c == 0xe2 && (unsigned char)s[1] == 0x80 && ((unsigned char)s[2] == 0xa8 || (unsigned char)s[2] == 0xa9)) {
            sl_buf_append(out, (unsigned char)s[2] == 0xa8 ? "\\L" : "\\P", 2); /* line / paragraph separator */
            s += 2;
        } else sl_buf_append(out, s, 1);
    }
    sl_buf_append(out, "\"", 1);
}

/* A comment's text: control characters replaced, so it stays one line. */
static void comment_text(sl_buf_t *out, const char *s) {
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        sl_buf_append(out, c < 0x20 || c == 0x7f ? "?" : s, 1);
    }
}

void sl_config_format(const sl_config_t *cfg, sl_buf_t *out) {
    char v[128];
    buf_printf(out, "# sluice effective configuration\n");
    for (int i = 0; i < NKEYS; i++) {
        const cfg_key_t *k = &KEYS[i];
        if (!has_value(cfg, k)) {
            buf_printf(out, "# %s: (not set: %s)\n", k->name, k->unset ? k->unset : "no value");
            continue;
        }
        buf_printf(out, "%s: ", k->name);
        if (k->type == CT_STRING) yaml_quote(out, *(char *const *)cfield_of(cfg, k));
        else {
            format_value(cfg, k, v, sizeof v);
            buf_printf(out, "%s", v);
        }
        if (cfg->where && cfg->where[i]) {
            buf_printf(out, "  # from ");
            comment_text(out, cfg->where[i]);
        }
        buf_printf(out, "\n");
    }
    for (int i = 0; i < cfg->nuser; i++) {
        buf_printf(out, "%s: ", cfg->user[i].key);
        yaml_quote(out, cfg->user[i].value);
        buf_printf(out, "  # from ");
        comment_text(out, cfg->user[i].where);
        buf_printf(out, "\n");
    }
    buf_terminate(out);
}

void sl_config_help(sl_buf_t *out) {
    char allowed[512];
    buf_printf(out, "Configuration keys (config.yaml, flat or nested, or -D key=value):\n");
    for (int i = 0; i < NKEYS; i++) {
        const cfg_key_t *k = &KEYS[i];
        describe_allowed(k, allowed, sizeof allowed);
        buf_printf(out, "\n%s\n    %s, default: ", k->name, type_name(k->type));
        if (k->def) buf_printf(out, "%s\n", k->def);
        else buf_printf(out, "not set (%s)\n", k->unset ? k->unset : "no value");
        buf_printf(out, "    allowed: %s\n", allowed);
        if (k->alias[0])
            buf_printf(out, "    also accepted (deprecated): %s%s%s\n", k->alias[0], k->alias[1] ? ", " : "",
                       k->alias[1] ? k->alias[1] : "");
        buf_printf(out, "    %s\n", k->help);
    }
    buf_terminate(out);
}

const char *sl_config_enum_name(const char *key, int value) {
    int i = key ? key_index(key) : -1;
    if (i < 0 || KEYS[i].type != CT_ENUM) return NULL;
    return enum_name(&KEYS[i], value);
}

void sl_config_apply_s3(const sl_config_t *cfg) {
    sl_s3_set_defaults(cfg->s3_endpoint, cfg->s3_access_key, cfg->s3_secret_key, cfg->s3_region,
                       sl_config_key_set(cfg, "s3.path.style.access") ? cfg->s3_path_style : -1);
}

int sl_config_apply_env(const sl_config_t *cfg, struct sl_env *env, char *err, size_t errlen) {
    sl_config_apply_s3(cfg);
    if (cfg->incremental && cfg->state_backend != SL_CFG_BACKEND_ROCKSDB)
        return sl_errf(err, errlen, SL_EINVAL,
                       "execution.checkpointing.incremental: true needs state.backend.type rocksdb (the hashmap "
                       "backend takes full checkpoints)");
    int rs = sl_config_restart_strategy(cfg);
    sl_env_set_parallelism(env, cfg->parallelism);
    sl_env_set_max_parallelism(env, cfg->max_parallelism == -1 ? 0 : cfg->max_parallelism);
    sl_env_set_auto_watermark_interval(env, cfg->auto_watermark_interval_ms);
    sl_env_set_buffer_size(env, (int)cfg->segment_size);
    sl_env_set_buffers_per_channel(env, cfg->buffers_per_channel);
    sl_env_set_buffer_timeout(env, cfg->buffer_timeout_enabled ? cfg->buffer_timeout_ms : -1);
    if (sl_config_checkpointing_enabled(cfg)) {
        sl_env_enable_checkpointing(env, cfg->checkpoint_interval_ms,
                                    cfg->checkpoint_mode == SL_CFG_AT_LEAST_ONCE ? SL_CHECKPOINT_AT_LEAST_ONCE
                                                                                : SL_CHECKPOINT_EXACTLY_ONCE);
        sl_env_set_checkpoint_options(env, cfg->checkpoint_timeout_ms, cfg->checkpoint_min_pause_ms,
                                      cfg->max_concurrent_checkpoints, cfg->tolerable_failed_checkpoints);
    }
    sl_env_set_state_backend(env, cfg->state_backend == SL_CFG_BACKEND_ROCKSDB ? SL_STATE_BACKEND_ROCKSDB
                                                                             : SL_STATE_BACKEND_HASHMAP);
    sl_env_set_rocksdb_options(env, cfg->rocksdb_localdir, cfg->rocksdb_block_cache, cfg->rocksdb_write_buffer);
    sl_env_set_incremental_checkpoints(env, cfg->incremental);
    if (cfg->unaligned) sl_env_set_unaligned_checkpoints(env, true, cfg->aligned_checkpoint_timeout_ms);
    if (cfg->checkpoint_dir) sl_env_set_checkpoint_dir(env, cfg->checkpoint_dir);
    if (cfg->savepoint_dir) sl_env_set_savepoint_dir(env, cfg->savepoint_dir);
    sl_env_set_allow_non_restored_state(env, cfg->ignore_unclaimed_state);
    if (cfg->savepoint_path) sl_env_restore_from(env, cfg->savepoint_path);
    /* Flink's MiniCluster serves REST only when asked; so does an embedded job */
    if (sl_config_key_set(cfg, "rest.port") || sl_config_key_set(cfg, "rest.bind-address"))
        sl_env_set_rest_endpoint(env, cfg->rest_bind_address, cfg->rest_port);
    sl_env_set_checkpoints_retained(env, cfg->num_retained);
    sl_env_set_checkpoint_retention(env, (sl_checkpoint_retention_t)cfg->externalized_retention);
    if (rs == SL_CFG_RESTART_NONE)
        sl_env_set_restart_none(env);
    else if (rs == SL_CFG_RESTART_FIXED_DELAY)
        sl_env_set_restart_fixed_delay(env, cfg->fixed_delay_attempts, cfg->fixed_delay_ms);
    else if (rs == SL_CFG_RESTART_EXPONENTIAL_DELAY)
        sl_env_set_restart_exponential_delay(env, cfg->exp_initial_backoff_ms, cfg->exp_max_backoff_ms,
                                             cfg->exp_backoff_multiplier, cfg->exp_reset_backoff_threshold_ms,
                                             cfg->exp_jitter_factor, cfg->exp_attempts_before_reset);
    else if (rs == SL_CFG_RESTART_FAILURE_RATE)
        sl_env_set_restart_failure_rate(env, cfg->failure_rate_max_failures, cfg->failure_rate_interval_ms,
                                        cfg->failure_rate_delay_ms);
    const char *e = sl_env_error(env);
    if (e[0]) return sl_errf(err, errlen, SL_EINVAL, "%s", e);
    return 0;
}

/* ---- the public API's reading side (sluice/config.h) ---------------------------- */

/* The first dot-separated segment of name, into out. */
static void first_segment(const char *name, char *out, size_t cap) {
    size_t n = strcspn(name, ".");
    snprintf(out, cap, "%.*s", (int)SL_MIN(n, cap - 1), name);
}

int sl_config_add_namespace(sl_config_t *cfg, const char *ns, char *err, size_t errlen) {
    char q[160], seg[128], kseg[128];
    if (!ns || !*ns) return sl_errf(err, errlen, SL_EINVAL, "config namespace: empty name");
    msg_quote(ns, q, sizeof q);
    bool ok = ns[0] != '.' && ns[strlen(ns) - 1] != '.' && !strstr(ns, "..") && strlen(ns) < 120;
    for (const char *p = ns; *p && ok; p++)
        ok = (*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_' ||
             *p == '-' || *p == '.';
    if (!ok)
        return sl_errf(err, errlen, SL_EINVAL,
                       "config namespace \"%s\": expected a dotted name of letters, digits, '_' and '-' (e.g. "
                       "\"fraud\" for fraud.threshold)",
                       q);
    first_segment(ns, seg, sizeof seg);
    for (int i = 0; i < NKEYS; i++) {
        const char *names[3] = {KEYS[i].name, KEYS[i].alias[0], KEYS[i].alias[1]};
        for (int j = 0; j < 3; j++) {
            if (!names[j]) continue;
            first_segment(names[j], kseg, sizeof kseg);
            if (strcmp(seg, kseg) == 0)
                return sl_errf(err, errlen, SL_EINVAL,
                               "config namespace \"%s\": \"%s\" belongs to the engine's keys (e.g. %s); choose "
                               "a name of the job's own, e.g. the job's name",
                               q, seg, KEYS[i].name);
        }
    }
    for (int i = 0; i < cfg->nnamespaces; i++)
        if (strcmp(cfg->namespaces[i], ns) == 0) return 0;
    cfg->namespaces = sl_realloc(cfg->namespaces, (size_t)(cfg->nnamespaces + 1) * sizeof *cfg->namespaces);
    cfg->namespaces[cfg->nnamespaces++] = sl_strdup(ns);
    return 0;
}

int sl_config_set_arg(sl_config_t *cfg, const char *key_value, char *err, size_t errlen) {
    const char *eq = key_value ? strchr(key_value, '=') : NULL;
    char q[160];
    if (!eq || eq == key_value)
        return sl_errf(err, errlen, SL_EINVAL, "-D: expected key=value, got \"%s\"",
                       msg_quote(key_value ? key_value : "", q, sizeof q));
    char *key = sl_strndup(key_value, (size_t)(eq - key_value));
    char *k = key;
    size_t n = strlen(k);
    while (n && (k[n - 1] == ' ' || k[n - 1] == '\t')) k[--n] = 0;
    while (*k == ' ' || *k == '\t') k++;
    int rc = sl_config_set(cfg, k, eq + 1, err, errlen);
    sl_free(key);
    return rc;
}

typedef enum { G_INT, G_BOOL, G_DOUBLE, G_DURATION, G_MEMORY, G_STRING } getter_t;

static const char *getter_name(getter_t g) {
    static const char *n[] = {"int", "bool", "double", "duration", "memory", "string"};
    return n[g];
}

/* Finds key: an engine key (*k) or one of the job's (*u, NULL when it is
 * under a namespace but not set). */
static int resolve(const sl_config_t *c, const char *key, const cfg_key_t **k, const sl_config_user_t **u, char *err,
                   size_t errlen) {
    char q[160];
    *k = NULL;
    *u = NULL;
    if (!c || !key) return sl_errf(err, errlen, SL_EINVAL, "config: no configuration or no key given");
    msg_quote(key, q, sizeof q);
    int idx = key_index(key);
    if (idx >= 0) {
        *k = &KEYS[idx];
        if (!has_value(c, *k))
            return sl_errf(err, errlen, SL_ENOTFOUND, "%s: not set (%s)", KEYS[idx].name,
                           KEYS[idx].unset ? KEYS[idx].unset : "no value");
        return 0;
    }
    if (in_namespace(c, key)) {
        *u = user_find(c, key);
        if (*u) return 0;
        const char **names = sl_calloc((size_t)c->nuser + 1, sizeof *names);
        for (int i = 0; i < c->nuser; i++) names[i] = c->user[i].key;
        const char *best = sl_suggest(key, names, c->nuser, false);
        const sl_config_user_t *bu = best ? user_find(c, best) : NULL;
        sl_free(names);
        if (bu)
            return sl_errf(err, errlen, SL_ENOTFOUND, "%s: not set (did you mean \"%s\", set at %s?)", q, bu->key,
                           bu->where);
        return sl_errf(err, errlen, SL_ENOTFOUND, "%s: not set", q);
    }
    const char *s = suggest_key(key);
    if (s) return sl_errf(err, errlen, SL_EINVAL, "unknown key \"%s\" (did you mean \"%s\"?)", q, s);
    return sl_errf(err, errlen, SL_EINVAL,
                   "unknown key \"%s\": not an engine key (sluice --help-config) nor under a namespace of the job "
                   "(sl_config_add_namespace)",
                   q);
}

/* The value of key as getter g: into *i (int, bool, duration, memory), *d
 * (double) or out/cap (string). */
static int get_typed(const sl_config_t *c, const char *key, getter_t g, int64_t *i, double *d, char *out, size_t cap,
                     char *err, size_t errlen) {
    const cfg_key_t *k;
    const sl_config_user_t *u;
    int rc = resolve(c, key, &k, &u, err, errlen);
    if (rc < 0) return rc;
    if (k) {
        static const ctype_t want[] = {CT_INT, CT_BOOL, CT_DOUBLE, CT_DURATION, CT_MEMORY, CT_STRING};
        const void *f = cfield_of(c, k);
        if (g == G_STRING) {
            char v[512];
            format_value(c, k, v, sizeof v);
            if (strlen(v) >= cap) return sl_errf(err, errlen, SL_EINVAL, "%s: value longer than %zu bytes", k->name, cap ? cap - 1 : 0);
            memcpy(out, v, strlen(v) + 1);
            return 0;
        }
        if (k->type != want[g])
            return sl_errf(err, errlen, SL_EINVAL, "%s is %s %s: read it with sl_config_get_%s, not sl_config_get_%s",
                           k->name, k->type == CT_INT || k->type == CT_ENUM ? "an" : "a", type_name(k->type),
                           k->type == CT_ENUM || k->type == CT_STRING ? "string"
                           : k->type == CT_INT                        ? "int"
                           : k->type == CT_BOOL                       ? "bool"
                           : k->type == CT_DOUBLE                     ? "double"
                           : k->type == CT_DURATION                   ? "duration"
                                                                      : "memory",
                           getter_name(g));
        switch (k->type) {
        case CT_INT: *i = *(const int *)f; break;
        case CT_BOOL: *i = *(const bool *)f; break;
        case CT_DOUBLE: *d = *(const double *)f; break;
        case CT_DURATION:
        case CT_MEMORY: *i = *(const int64_t *)f; break;
        default: break;
        }
        return 0;
    }
    if (g == G_STRING) {
        if (strlen(u->value) >= cap)
            return sl_errf(err, errlen, SL_EINVAL, "%s: %s: value longer than %zu bytes", u->where, u->key,
                           cap ? cap - 1 : 0);
        memcpy(out, u->value, strlen(u->value) + 1);
        return 0;
    }
    cfg_key_t t = {.name = u->key};
    switch (g) {
    case G_INT: t.type = CT_INT, t.min = INT64_MIN, t.max = INT64_MAX; break;
    case G_BOOL: t.type = CT_BOOL; break;
    case G_DOUBLE: t.type = CT_DOUBLE, t.dmin = -INFINITY, t.dmax = INFINITY; break;
    case G_DURATION: t.type = CT_DURATION, t.min = 0, t.max = INT64_MAX; break;
    case G_MEMORY: t.type = CT_MEMORY, t.min = 0, t.max = INT64_MAX; break;
    default: break;
    }
    val_t v;
    char why[160];
    if (parse_value(&t, u->value, &v, why, sizeof why) < 0) {
        errs_t e;
        errs_init(&e, err, errlen);
        bad_value(&e, u->where, &t, u->value, why);
        return errs_finish(&e);
    }
    if (g == G_DOUBLE) *d = v.d;
    else *i = v.i;
    return 0;
}

bool sl_config_has(const sl_config_t *cfg, const char *key) {
    if (!cfg || !key) return false;
    int idx = key_index(key);
    if (idx >= 0) return has_value(cfg, &KEYS[idx]);
    return in_namespace(cfg, key) && user_find(cfg, key) != NULL;
}

int sl_config_get_int(const sl_config_t *cfg, const char *key, int64_t *out, char *err, size_t errlen) {
    int64_t i;
    int rc = get_typed(cfg, key, G_INT, &i, NULL, NULL, 0, err, errlen);
    if (rc == 0) *out = i;
    return rc;
}

int sl_config_get_bool(const sl_config_t *cfg, const char *key, bool *out, char *err, size_t errlen) {
    int64_t i;
    int rc = get_typed(cfg, key, G_BOOL, &i, NULL, NULL, 0, err, errlen);
    if (rc == 0) *out = i != 0;
    return rc;
}

int sl_config_get_double(const sl_config_t *cfg, const char *key, double *out, char *err, size_t errlen) {
    double d;
    int rc = get_typed(cfg, key, G_DOUBLE, NULL, &d, NULL, 0, err, errlen);
    if (rc == 0) *out = d;
    return rc;
}

int sl_config_get_duration(const sl_config_t *cfg, const char *key, int64_t *ms, char *err, size_t errlen) {
    int64_t i;
    int rc = get_typed(cfg, key, G_DURATION, &i, NULL, NULL, 0, err, errlen);
    if (rc == 0) *ms = i;
    return rc;
}

int sl_config_get_memory(const sl_config_t *cfg, const char *key, int64_t *bytes, char *err, size_t errlen) {
    int64_t i;
    int rc = get_typed(cfg, key, G_MEMORY, &i, NULL, NULL, 0, err, errlen);
    if (rc == 0) *bytes = i;
    return rc;
}

int sl_config_get_string(const sl_config_t *cfg, const char *key, char *out, size_t cap, char *err,
                         size_t errlen) {
    if (!out || !cap) return sl_errf(err, errlen, SL_EINVAL, "config: no output buffer");
    return get_typed(cfg, key, G_STRING, NULL, NULL, out, cap, err, errlen);
}
