/* test_config.c — config.yaml reading (flat and nested), value syntax,
 * strict errors with file:line, cross-key rules, -D overrides, the YAML
 * dump, and random mutations of a valid file (never a crash). */
#include "test.h"

#include "api/env_int.h"
#include "config/config.h"

static char ERR[8192];

/* Every key, none at its default. */
static const char *ALL_FLAT =
    "# every key, flat\n"
    "parallelism.default: 4\n"
    "pipeline.max-parallelism: 256\n"
    "pipeline.auto-watermark-interval: 1 s\n"
    "execution.buffer-timeout.enabled: false\n"
    "execution.buffer-timeout.interval: 5 ms\n"
    "execution.checkpointing.interval: 10 s\n"
    "execution.checkpointing.mode: AT_LEAST_ONCE\n"
    "execution.checkpointing.timeout: 2 min\n"
    "execution.checkpointing.min-pause: 500 ms\n"
    "execution.checkpointing.max-concurrent-checkpoints: 2\n"
    "execution.checkpointing.tolerable-failed-checkpoints: 3\n"
    "execution.checkpointing.unaligned.enabled: true\n"
    "execution.checkpointing.aligned-checkpoint-timeout: 30 s\n"
    "execution.checkpointing.incremental: true\n"
    "execution.checkpointing.dir: /tmp/ckpt\n"
    "execution.checkpointing.savepoint-dir: /tmp/sp\n"
    "execution.savepoint.path: /tmp/sp/savepoint-1\n"
    "execution.savepoint.ignore-unclaimed-state: true\n"
    "execution.checkpointing.num-retained: 5\n"
    "execution.checkpointing.externalized-checkpoint-retention: RETAIN_ON_CANCELLATION\n"
    "state.backend.type: rocksdb\n"
    "state.backend.rocksdb.localdir: /tmp/rdb\n"
    "state.backend.rocksdb.block.cache-size: 256 mb\n"
    "state.backend.rocksdb.writebuffer.size: 32 mb\n"
    "restart-strategy.type: exponential-delay\n"
    "restart-strategy.fixed-delay.attempts: 7\n"
    "restart-strategy.fixed-delay.delay: 3 s\n"
    "restart-strategy.exponential-delay.initial-backoff: 10 s\n"
    "restart-strategy.exponential-delay.max-backoff: 2 min\n"
    "restart-strategy.exponential-delay.backoff-multiplier: 1.4\n"
    "restart-strategy.exponential-delay.reset-backoff-threshold: 10 min\n"
    "restart-strategy.exponential-delay.jitter-factor: 0.25\n"
    "restart-strategy.exponential-delay.attempts-before-reset-backoff: 10\n"
    "restart-strategy.failure-rate.max-failures-per-interval: 3\n"
    "restart-strategy.failure-rate.failure-rate-interval: 5 min\n"
    "restart-strategy.failure-rate.delay: 10 s\n"
    "taskmanager.numberOfTaskSlots: 8\n"
    "jobmanager.rpc.address: jm.example.com\n"
    "jobmanager.rpc.port: 7000\n"
    "rest.port: 9091\n"
    "rest.address: rest.example.com\n"
    "rest.bind-address: 0.0.0.0\n"
    "taskmanager.host: tm.example.com\n"
    "taskmanager.data.port: 6121\n"
    "slot.request.timeout: 1 min\n"
    "cluster.evenly-spread-out-slots: true\n"
    "security.internal.secret: s3cret\n"
    "heartbeat.interval: 1 s\n"
    "heartbeat.timeout: 30 s\n"
    "taskmanager.network.memory.buffers-per-channel: 8\n"
    "taskmanager.memory.segment-size: 64 kb\n"
    "metrics.reporter.prom.enabled: true\n"
    "metrics.reporter.prom.port: 9250-9260\n"
    "s3.endpoint: http://127.0.0.1:9000\n"
    "s3.access-key: AKIDEXAMPLE\n"
    "s3.secret-key: secret-example\n"
    "s3.region: eu-west-1\n"
    "s3.path.style.access: true\n"
    "high-availability.type: zookeeper\n"
    "high-availability.zookeeper.quorum: zk1:2181,zk2:2181\n"
    "high-availability.storageDir: /shared/ha\n"
    "high-availability.cluster-id: /prod\n"
    "high-availability.zookeeper.path.root: /flink\n"
    "high-availability.zookeeper.client.session-timeout: 20 s\n"
    "high-availability.zookeeper.client.connection-timeout: 5 s\n"
    "security.ssl.internal.enabled: true\n"
    "security.ssl.internal.keystore: /etc/sluice/node.p12\n"
    "security.ssl.internal.keystore-password: ks-pass\n"
    "security.ssl.internal.key-password: key-pass\n"
    "security.ssl.internal.truststore: /etc/sluice/ca.pem\n"
    "security.ssl.internal.truststore-password: ts-pass\n"
    "security.ssl.protocol: TLSv1.3\n"
    "security.ssl.algorithms: TLS_AES_128_GCM_SHA256\n"
    "security.ssl.internal.handshake-timeout: 3 s\n";

/* The same, nested (Flink 2.x's standard YAML form). */
static const char *ALL_NESTED =
    "parallelism:\n"
    "  default: 4\n"
    "pipeline:\n"
    "  max-parallelism: 256\n"
    "  auto-watermark-interval: 1s\n"
    "execution:\n"
    "  buffer-timeout:\n"
    "    enabled: False\n"
    "    interval: 5\n"
    "  checkpointing:\n"
    "    interval: 10000\n"
    "    mode: at_least_once\n"
    "    timeout: 120 s\n"
    "    min-pause: 500ms\n"
    "    max-concurrent-checkpoints: 2\n"
    "    tolerable-failed-checkpoints: 3\n"
    "    unaligned:\n"
    "      enabled: TRUE\n"
    "    aligned-checkpoint-timeout: 30 seconds\n"
    "    incremental: true\n"
    "    dir: \"/tmp/ckpt\"\n"
    "    savepoint-dir: '/tmp/sp'\n"
    "    num-retained: 5\n"
    "    externalized-checkpoint-retention: retain_on_cancellation\n"
    "  savepoint:\n"
    "    path: /tmp/sp/savepoint-1\n"
    "    ignore-unclaimed-state: TRUE\n"
    "state:\n"
    "  backend:\n"
    "    type: RocksDB\n"
    "    rocksdb:\n"
    "      localdir: /tmp/rdb\n"
    "      block:\n"
    "        cache-size: 256mb\n"
    "      writebuffer.size: 32 MB\n"
    "restart-strategy:\n"
    "  type: exponentialdelay\n"
    "  fixed-delay:\n"
    "    attempts: 7\n"
    "    delay: 3000 ms\n"
    "  exponential-delay:\n"
    "    initial-backoff: 10 s\n"
    "    max-backoff: 2 min\n"
    "    backoff-multiplier: 1.4\n"
    "    reset-backoff-threshold: 10 min\n"
    "    jitter-factor: 0.25\n"
    "    attempts-before-reset-backoff: 10\n"
    "  failure-rate:\n"
    "    max-failures-per-interval: 3\n"
    "    failure-rate-interval: 5 minutes\n"
    "    delay: 10 s\n"
    "taskmanager:\n"
    "  numberOfTaskSlots: 8\n"
    "  host: tm.example.com\n"
    "  data:\n"
    "    port: 6121\n"
    "  network:\n"
    "    memory:\n"
    "      buffers-per-channel: 8\n"
    "  memory:\n"
    "    segment-size: 64kb\n"
    "jobmanager:\n"
    "  rpc:\n"
    "    address: jm.example.com\n"
    "    port: 7000\n"
    "rest:\n"
    "  port: 9091\n"
    "  address: rest.example.com\n"
    "  bind-address: 0.0.0.0\n"
    "slot:\n"
    "  request:\n"
    "    timeout: 60 s\n"
    "cluster:\n"
    "  evenly-spread-out-slots: TRUE\n"
    "security:\n"
    "  internal:\n"
    "    secret: s3cret\n"
    "  ssl:\n"
    "    internal:\n"
    "      enabled: true\n"
    "      keystore: /etc/sluice/node.p12\n"
    "      keystore-password: ks-pass\n"
    "      key-password: key-pass\n"
    "      truststore: /etc/sluice/ca.pem\n"
    "      truststore-password: ts-pass\n"
    "      handshake-timeout: 3 s\n"
    "    protocol: TLSv1.3\n"
    "    algorithms: TLS_AES_128_GCM_SHA256\n"
    "heartbeat:\n"
    "  interval: 1 s\n"
    "  timeout: 30 s\n"
    "metrics:\n"
    "  reporter:\n"
    "    prom:\n"
    "      enabled: true\n"
    "      port: 9250-9260\n"
    "s3:\n"
    "  endpoint: http://127.0.0.1:9000\n"
    "  access-key: AKIDEXAMPLE\n"
    "  secret-key: secret-example\n"
    "  region: eu-west-1\n"
    "  path:\n"
    "    style.access: TRUE\n"
    "high-availability:\n"
    "  type: ZOOKEEPER\n"
    "  storageDir: /shared/ha\n"
    "  cluster-id: /prod\n"
    "  zookeeper:\n"
    "    quorum: zk1:2181,zk2:2181\n"
    "    path.root: /flink\n"
    "    client:\n"
    "      session-timeout: 20 s\n"
    "      connection-timeout: 5 s\n";

/* The same again, mixing flat keys, partly dotted groups and flow style. */
static const char *ALL_MIXED =
    "parallelism.default: 4\n"
    "pipeline: {max-parallelism: 256, auto-watermark-interval: 1 s}\n"
    "execution.buffer-timeout: {enabled: false, interval: 5 ms}\n"
    "execution:\n"
    "  checkpointing.interval: 10 s\n"
    "  checkpointing:\n"
    "    mode: AT_LEAST_ONCE\n"
    "    timeout: 2 min\n"
    "    min-pause: 500 ms\n"
    "    max-concurrent-checkpoints: 2\n"
    "    tolerable-failed-checkpoints: 3\n"
    "    unaligned.enabled: true\n"
    "    aligned-checkpoint-timeout: 30 s\n"
    "    incremental: true\n"
    "    dir: /tmp/ckpt\n"
    "    savepoint-dir: /tmp/sp\n"
    "    num-retained: 5\n"
    "    externalized-checkpoint-retention: RETAIN_ON_CANCELLATION\n"
    "  savepoint: {path: /tmp/sp/savepoint-1, ignore-unclaimed-state: true}\n"
    "s3: {endpoint: 'http://127.0.0.1:9000', access-key: AKIDEXAMPLE, secret-key: secret-example}\n"
    "s3.region: eu-west-1\n"
    "s3.path.style.access: true\n"
    "state.backend: {type: rocksdb, rocksdb: {localdir: /tmp/rdb, block.cache-size: 256 mb, writebuffer: {size: 32 mb}}}\n"
    "restart-strategy: {type: exponential-delay, fixed-delay: {attempts: 7, delay: 3 s}}\n"
    "restart-strategy.exponential-delay:\n"
    "  initial-backoff: 10 s\n"
    "  max-backoff: 2 min\n"
    "  backoff-multiplier: 1.4\n"
    "  reset-backoff-threshold: 10 min\n"
    "  jitter-factor: 0.25\n"
    "  attempts-before-reset-backoff: 10\n"
    "restart-strategy.failure-rate.max-failures-per-interval: 3\n"
    "restart-strategy.failure-rate: {failure-rate-interval: 5 min, delay: 10 s}\n"
    "taskmanager: {numberOfTaskSlots: 8, network.memory.buffers-per-channel: 8, memory: {segment-size: 64 kb},\n"
    "              host: tm.example.com, data.port: 6121}\n"
    "jobmanager.rpc: {address: jm.example.com, port: 7000}\n"
    "rest.port: 9091\n"
    "rest: {address: rest.example.com, bind-address: 0.0.0.0}\n"
    "slot.request.timeout: 1 min\n"
    "cluster.evenly-spread-out-slots: true\n"
    "security.internal: {secret: s3cret}\n"
    "heartbeat: {interval: 1 s, timeout: 30 s}\n"
    "metrics.reporter: {prom: {enabled: true, port: 9250-9260}}\n"
    "high-availability.type: Zookeeper\n"
    "high-availability.zookeeper: {quorum: 'zk1:2181,zk2:2181', path.root: /flink, client: {session-timeout: 20000}}\n"
    "high-availability.zookeeper.client.connection-timeout: 5 s\n"
    "high-availability: {storageDir: /shared/ha, cluster-id: /prod}\n"
    "security.ssl: {internal: {enabled: true, keystore: /etc/sluice/node.p12, keystore-password: ks-pass,\n"
    "               key-password: key-pass, truststore: /etc/sluice/ca.pem, truststore-password: ts-pass,\n"
    "               handshake-timeout: 3000}, protocol: TLSv1.3, algorithms: TLS_AES_128_GCM_SHA256}\n";

static const char *write_file(const char *name, const char *text) {
    static char path[1024];
    snprintf(path, sizeof path, "%s/%s", sl_test_tmpdir(), name);
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    fputs(text, f);
    fclose(f);
    return path;
}

/* Loads text into a fresh default configuration; returns rc. */
static int load(sl_config_t *c, const char *text) {
    sl_config_defaults(c);
    return sl_config_load_string(c, text, "t.yaml", ERR, sizeof ERR);
}

TEST(defaults_every_key) {
    sl_config_t c;
    sl_config_defaults(&c);
    CHECK_EQ(c.parallelism, 1);
    CHECK_EQ(c.max_parallelism, -1);
    CHECK_EQ(c.auto_watermark_interval_ms, 200);
    CHECK(c.buffer_timeout_enabled);
    CHECK_EQ(c.buffer_timeout_ms, 100);
    CHECK_EQ(c.checkpoint_interval_ms, 0); /* not set: off */
    CHECK(!sl_config_checkpointing_enabled(&c));
    CHECK_EQ(c.checkpoint_mode, SL_CFG_EXACTLY_ONCE);
    CHECK_EQ(c.checkpoint_timeout_ms, 10 * 60 * 1000);
    CHECK_EQ(c.checkpoint_min_pause_ms, 0);
    CHECK_EQ(c.max_concurrent_checkpoints, 1);
    CHECK_EQ(c.tolerable_failed_checkpoints, 0);
    CHECK(!c.unaligned);
    CHECK_EQ(c.aligned_checkpoint_timeout_ms, 0);
    CHECK(!c.incremental);
    CHECK(c.checkpoint_dir == NULL);
    CHECK(c.savepoint_dir == NULL);
    CHECK_EQ(c.num_retained, 1);
    CHECK_EQ(c.externalized_retention, SL_CFG_NO_EXTERNALIZED_CHECKPOINTS);
    CHECK_EQ(c.state_backend, SL_CFG_BACKEND_HASHMAP);
    CHECK_EQ(c.restart_strategy, SL_CFG_RESTART_DEFAULT);
    CHECK_EQ(c.fixed_delay_attempts, 3);
    CHECK_EQ(c.fixed_delay_ms, 1000);
    CHECK_EQ(c.exp_initial_backoff_ms, 1000);
    CHECK_EQ(c.exp_max_backoff_ms, 60000);
    CHECK_DBL(c.exp_backoff_multiplier, 1.5);
    CHECK_EQ(c.exp_reset_backoff_threshold_ms, 3600000);
    CHECK_DBL(c.exp_jitter_factor, 0.1);
    CHECK_EQ(c.exp_attempts_before_reset, 2147483647);
    CHECK_EQ(c.failure_rate_max_failures, 1);
    CHECK_EQ(c.failure_rate_interval_ms, 60000);
    CHECK_EQ(c.failure_rate_delay_ms, 1000);
    CHECK_EQ(c.task_slots, 1);
    CHECK_STR(c.jobmanager_address, "localhost");
    CHECK_EQ(c.jobmanager_port, 6123);
    CHECK_EQ(c.rest_port, 8081);
    CHECK_EQ(c.heartbeat_interval_ms, 2000);
    CHECK(!c.prom_enabled);
    CHECK_STR(c.prom_port, "9249");
    CHECK_EQ(c.heartbeat_timeout_ms, 10000);
    CHECK_EQ(c.buffers_per_channel, 4);
    CHECK_EQ(c.segment_size, 32 * 1024);
    CHECK_EQ(sl_config_validate(&c, ERR, sizeof ERR), 0);
    CHECK_STR(ERR, "");
    sl_config_free(&c);
}

TEST(restart_strategy_in_force) {
    sl_config_t c;
    sl_config_defaults(&c);
    CHECK_EQ(sl_config_restart_strategy(&c), SL_CFG_RESTART_NONE);
    CHECK_EQ(sl_config_set(&c, "execution.checkpointing.interval", "10 s", ERR, sizeof ERR), 0);
    CHECK(sl_config_checkpointing_enabled(&c));
    CHECK_EQ(sl_config_restart_strategy(&c), SL_CFG_RESTART_FIXED_DELAY);
    CHECK_EQ(sl_config_set(&c, "restart-strategy.type", "OFF", ERR, sizeof ERR), 0);
    CHECK_EQ(sl_config_restart_strategy(&c), SL_CFG_RESTART_NONE);
    CHECK_STR(sl_config_enum_name("restart-strategy.type", c.restart_strategy), "disable");
    CHECK_EQ(sl_config_set(&c, "restart-strategy.type", "failurerate", ERR, sizeof ERR), 0);
    CHECK_EQ(sl_config_restart_strategy(&c), SL_CFG_RESTART_FAILURE_RATE);
    sl_config_free(&c);
}

/* Sets key to text; returns the value of the int64 field, or -1 on error. */
static int64_t set64(const char *key, const char *text, const int64_t *field, sl_config_t *c) {
    if (sl_config_set(c, key, text, ERR, sizeof ERR) != 0) return -1;
    return *field;
}

TEST(durations) {
    static const struct { const char *text; int64_t ms; } cases[] = {
        {"10s", 10000},        {"10 s", 10000},     {"1 min", 60000},     {"1min", 60000},
        {"2 h", 7200000},      {"500 ms", 500},     {"100", 100},         {"1d", 86400000},
        {"3 days", 259200000}, {"1 m", 60000},      {"3 minutes", 180000}, {"2 hours", 7200000},
        {"5 sec", 5000},       {"5 secs", 5000},    {"1 second", 1000},   {"7 milli", 7},
        {"7 millis", 7},       {"9 milliseconds", 9}, {"10 S", 10000},    {"10 MS", 10},
        {"2000000 ns", 2},     {"3000 micros", 3},  {"4000 \xc2\xb5s", 4}, {"  42 s  ", 42000},
        {"0", 0},              {"0 ms", 0},
    };
    sl_config_t c;
    sl_config_defaults(&c);
    for (size_t i = 0; i < SL_ARRAY_LEN(cases); i++) {
        int64_t got = set64("execution.checkpointing.min-pause", cases[i].text, &c.checkpoint_min_pause_ms, &c);
        if (got != cases[i].ms) fprintf(stderr, "duration \"%s\": %lld (%s)\n", cases[i].text, (long long)got, ERR);
        CHECK_EQ(got, cases[i].ms);
    }
    static const char *bad[] = {"", "s", "-1 s", "1.5 s", "10 fortnights", "10 s s", "ten s", "1 ns",
                                "99999999999999999999 d", "9999999999999999 d", "+5 s"};
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        int rc = sl_config_set(&c, "execution.checkpointing.min-pause", bad[i], ERR, sizeof ERR);
        if (rc == 0) fprintf(stderr, "duration \"%s\" accepted\n", bad[i]);
        CHECK_EQ(rc, SL_EINVAL);
        CHECK_CONTAINS(ERR, "execution.checkpointing.min-pause");
        CHECK_CONTAINS(ERR, "allowed: a duration");
    }
    CHECK_EQ(c.checkpoint_min_pause_ms, 0); /* failed sets changed nothing */
    /* below a key's minimum: the interval must be >= 10 ms (Flink) */
    CHECK_EQ(sl_config_set(&c, "execution.checkpointing.interval", "5 ms", ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "\"5 ms\": less than 10 ms");
    CHECK_CONTAINS(ERR, "allowed: a duration >= 10 ms");
    CHECK_EQ(sl_config_set(&c, "execution.checkpointing.interval", "10", ERR, sizeof ERR), 0);
    CHECK_EQ(c.checkpoint_interval_ms, 10);
    sl_config_free(&c);
}

TEST(memory_sizes) {
    static const struct { const char *text; int64_t bytes; } cases[] = {
        {"32kb", 32768},   {"32 kb", 32768},    {"64m", 67108864},   {"1g", 1073741824}, {"65536", 65536},
        {"4096 bytes", 4096}, {"8 k", 8192},    {"1 MB", 1048576},   {"16KiBiBytes", -1}, {"16 kibibytes", 16384},
        {"4096b", 4096},   {"1 mebibytes", 1048576},
    };
    sl_config_t c;
    sl_config_defaults(&c);
    for (size_t i = 0; i < SL_ARRAY_LEN(cases); i++) {
        int64_t got = set64("taskmanager.memory.segment-size", cases[i].text, &c.segment_size, &c);
        if (cases[i].bytes == -1) {
            CHECK(got != -1); /* unit labels are case-insensitive: 16 kibibytes */
            CHECK_EQ(got, 16384);
            continue;
        }
        if (got != cases[i].bytes) fprintf(stderr, "memory \"%s\": %lld (%s)\n", cases[i].text, (long long)got, ERR);
        CHECK_EQ(got, cases[i].bytes);
    }
    static const char *bad[] = {"1 kb", "48 kb", "2g", "32 kilobytes", "kb", "-32 kb", "1.5 mb", "5000"};
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        int rc = sl_config_set(&c, "taskmanager.memory.segment-size", bad[i], ERR, sizeof ERR);
        if (rc == 0) fprintf(stderr, "memory \"%s\" accepted\n", bad[i]);
        CHECK_EQ(rc, SL_EINVAL);
        CHECK_CONTAINS(ERR, "allowed: a memory size from 4 kb to 1 gb, a power of two");
    }
    CHECK_EQ(sl_config_set(&c, "taskmanager.memory.segment-size", "48 kb", ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "not a power of two");
    sl_config_free(&c);
}

TEST(booleans_enums_numbers) {
    sl_config_t c;
    sl_config_defaults(&c);
    const char *key = "execution.checkpointing.unaligned.enabled";
    CHECK_EQ(sl_config_set(&c, key, "TRUE", ERR, sizeof ERR), 0);
    CHECK(c.unaligned);
    CHECK_EQ(sl_config_set(&c, key, "False", ERR, sizeof ERR), 0);
    CHECK(!c.unaligned);
    CHECK_EQ(sl_config_set(&c, key, "yes", ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "-D: execution.checkpointing.unaligned.enabled: bad value \"yes\"");
    CHECK_CONTAINS(ERR, "allowed: true or false");

    CHECK_EQ(sl_config_set(&c, "execution.checkpointing.mode", "at_least_once", ERR, sizeof ERR), 0);
    CHECK_EQ(c.checkpoint_mode, SL_CFG_AT_LEAST_ONCE);
    CHECK_EQ(sl_config_set(&c, "execution.checkpointing.mode", "Exactly_Once", ERR, sizeof ERR), 0);
    CHECK_EQ(c.checkpoint_mode, SL_CFG_EXACTLY_ONCE);
    CHECK_EQ(sl_config_set(&c, "execution.checkpointing.mode", "EXACTLY-ONCE", ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "allowed: one of EXACTLY_ONCE, AT_LEAST_ONCE");
    CHECK_EQ(sl_config_set(&c, "execution.checkpointing.externalized-checkpoint-retention", "delete_on_cancellation",
                           ERR, sizeof ERR),
             0);
    CHECK_EQ(c.externalized_retention, SL_CFG_DELETE_ON_CANCELLATION);
    CHECK_EQ(sl_config_set(&c, "state.backend.type", "ROCKSDB", ERR, sizeof ERR), 0);
    CHECK_EQ(c.state_backend, SL_CFG_BACKEND_ROCKSDB);
    CHECK_EQ(sl_config_set(&c, "state.backend.type", "filesystem", ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "allowed: one of hashmap, rocksdb");
    static const struct { const char *text; int value; } restarts[] = {
        {"none", SL_CFG_RESTART_NONE},
        {"disable", SL_CFG_RESTART_NONE},
        {"off", SL_CFG_RESTART_NONE},
        {"fixed-delay", SL_CFG_RESTART_FIXED_DELAY},
        {"fixeddelay", SL_CFG_RESTART_FIXED_DELAY},
        {"exponential-delay", SL_CFG_RESTART_EXPONENTIAL_DELAY},
        {"failure-rate", SL_CFG_RESTART_FAILURE_RATE},
    };
    for (size_t i = 0; i < SL_ARRAY_LEN(restarts); i++) {
        CHECK_EQ(sl_config_set(&c, "restart-strategy.type", restarts[i].text, ERR, sizeof ERR), 0);
        CHECK_EQ(c.restart_strategy, restarts[i].value);
    }
    CHECK_EQ(sl_config_set(&c, "restart-strategy.type", "fixed_delay", ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "disable, none, off, fixed-delay, fixeddelay, exponential-delay");

    /* integers */
    CHECK_EQ(sl_config_set(&c, "parallelism.default", "0", ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "parallelism.default: bad value \"0\": out of range; allowed: an integer >= 1");
    CHECK_EQ(sl_config_set(&c, "parallelism.default", "3x", ERR, sizeof ERR), SL_EINVAL);
    CHECK_EQ(sl_config_set(&c, "parallelism.default", "99999999999", ERR, sizeof ERR), SL_EINVAL);
    CHECK_EQ(sl_config_set(&c, "parallelism.default", " 12 ", ERR, sizeof ERR), 0);
    CHECK_EQ(c.parallelism, 12);
    CHECK_EQ(sl_config_set(&c, "pipeline.max-parallelism", "-1", ERR, sizeof ERR), 0);
    CHECK_EQ(sl_config_set(&c, "pipeline.max-parallelism", "32768", ERR, sizeof ERR), 0);
    CHECK_EQ(c.max_parallelism, 32768);
    CHECK_EQ(sl_config_set(&c, "pipeline.max-parallelism", "32769", ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "allowed: -1 (derived) or an integer from 1 to 32768");
    CHECK_EQ(sl_config_set(&c, "pipeline.max-parallelism", "-2", ERR, sizeof ERR), SL_EINVAL);
    CHECK_EQ(sl_config_set(&c, "pipeline.max-parallelism", "0", ERR, sizeof ERR), SL_EINVAL);
    CHECK_EQ(sl_config_set(&c, "rest.port", "65536", ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "allowed: an integer from 0 to 65535");
    CHECK_EQ(sl_config_set(&c, "execution.checkpointing.tolerable-failed-checkpoints", "-1", ERR, sizeof ERR),
             SL_EINVAL);
    CHECK_EQ(sl_config_set(&c, "execution.checkpointing.max-concurrent-checkpoints", "0", ERR, sizeof ERR), SL_EINVAL);

    /* doubles */
    CHECK_EQ(sl_config_set(&c, "restart-strategy.exponential-delay.backoff-multiplier", "1", ERR, sizeof ERR),
             SL_EINVAL);
    CHECK_CONTAINS(ERR, "allowed: a number greater than 1");
    CHECK_EQ(sl_config_set(&c, "restart-strategy.exponential-delay.backoff-multiplier", "2.5", ERR, sizeof ERR), 0);
    CHECK_DBL(c.exp_backoff_multiplier, 2.5);
    CHECK_EQ(sl_config_set(&c, "restart-strategy.exponential-delay.jitter-factor", "1.01", ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "allowed: a number from 0 to 1");
    CHECK_EQ(sl_config_set(&c, "restart-strategy.exponential-delay.jitter-factor", "nan", ERR, sizeof ERR), SL_EINVAL);
    CHECK_EQ(sl_config_set(&c, "restart-strategy.exponential-delay.jitter-factor", "0", ERR, sizeof ERR), 0);

    /* strings */
    CHECK_EQ(sl_config_set(&c, "execution.checkpointing.dir", "", ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "allowed: a non-empty string");
    CHECK_EQ(sl_config_set(&c, "execution.checkpointing.dir", "/data/ckpt", ERR, sizeof ERR), 0);
    CHECK_STR(c.checkpoint_dir, "/data/ckpt");
    sl_config_free(&c);
}

TEST(flat_nested_mixed_equal) {
    sl_config_t flat, nested, mixed, def;
    CHECK_EQ(load(&flat, ALL_FLAT), 0);
    CHECK_EQ(load(&nested, ALL_NESTED), 0);
    if (load(&mixed, ALL_MIXED) != 0) fprintf(stderr, "%s\n", ERR);
    CHECK_STR(ERR, "");
    CHECK(sl_config_equal(&flat, &nested));
    CHECK(sl_config_equal(&flat, &mixed));
    sl_config_defaults(&def);
    CHECK(!sl_config_equal(&flat, &def));

    CHECK_EQ(flat.parallelism, 4);
    CHECK_EQ(nested.checkpoint_interval_ms, 10000);
    CHECK_EQ(nested.checkpoint_mode, SL_CFG_AT_LEAST_ONCE);
    CHECK_EQ(nested.checkpoint_timeout_ms, 120000);
    CHECK_STR(nested.checkpoint_dir, "/tmp/ckpt");
    CHECK_STR(mixed.savepoint_dir, "/tmp/sp");
    CHECK_EQ(mixed.restart_strategy, SL_CFG_RESTART_EXPONENTIAL_DELAY);
    CHECK_DBL(mixed.exp_backoff_multiplier, 1.4);
    CHECK_EQ(mixed.segment_size, 65536);
    CHECK_EQ(nested.heartbeat_timeout_ms, 30000);
    CHECK(mixed.prom_enabled && nested.prom_enabled);
    CHECK_STR(mixed.prom_port, "9250-9260");

    /* ALL_FLAT really sets every key: in the dumps of the defaults and of
     * ALL_FLAT, no key line is the same. */
    sl_buf_t a = {0}, b = {0};
    sl_config_format(&def, &a);
    sl_config_format(&flat, &b);
    int keys = 0;
    for (char *line = strtok((char *)a.p, "\n"); line; line = strtok(NULL, "\n")) {
        const char *colon = strchr(line, ':');
        if (!colon) continue; /* the title */
        char name[128];
        size_t n = (size_t)(colon - line);
        if (line[0] == '#' && line[1] == ' ') { /* "# key: (not set ...)" */
            memcpy(name, line + 2, n - 2);
            name[n - 2] = 0;
        } else {
            memcpy(name, line, n);
            name[n] = 0;
        }
        if (strcmp(name, "# sluice effective configuration") == 0 || strchr(name, ' ')) continue;
        keys++;
        char want[160];
        snprintf(want, sizeof want, "\n%s:", name);
        const char *in_flat = strstr((const char *)b.p, want);
        if (!in_flat) fprintf(stderr, "ALL_FLAT does not set %s\n", name);
        CHECK(in_flat);
        const char *eol = strchr(in_flat + 1, '\n');
        const char *cmt = strstr(in_flat + 1, "  # from");
        CHECK(cmt && cmt < eol); /* and says where it came from */
        CHECK(strncmp(in_flat + 1, line, strlen(line)) != 0);
    }
    CHECK_EQ(keys, 74);
    sl_buf_free(&a);
    sl_buf_free(&b);

    /* the brief's example: nested flow form means the same as flat */
    sl_config_t x, y;
    CHECK_EQ(load(&x, "execution: { checkpointing: { interval: 10 s } }\n"), 0);
    CHECK_EQ(load(&y, "execution.checkpointing.interval: 10 s\n"), 0);
    CHECK(sl_config_equal(&x, &y));
    CHECK_EQ(x.checkpoint_interval_ms, 10000);
    sl_config_free(&x);
    sl_config_free(&y);
    sl_config_free(&flat);
    sl_config_free(&nested);
    sl_config_free(&mixed);
    sl_config_free(&def);
}

TEST(format_round_trip) {
    sl_config_t c, back;
    CHECK_EQ(load(&c, ALL_NESTED), 0);
    CHECK_EQ(sl_config_set(&c, "jobmanager.rpc.address", "a \"quoted\" name: # with\ttab\nnewline", ERR, sizeof ERR), 0);
    sl_buf_t out = {0};
    sl_config_format(&c, &out);
    CHECK_CONTAINS((const char *)out.p, "execution.checkpointing.interval: 10 s  # from t.yaml:11\n");
    CHECK_CONTAINS((const char *)out.p, "taskmanager.memory.segment-size: 64 kb  # from t.yaml:61\n");
    CHECK_CONTAINS((const char *)out.p, "jobmanager.rpc.address: \"a \\\"quoted\\\" name: # with\\ttab\\nnewline\"  # from -D\n");
    CHECK_EQ(load(&back, (const char *)out.p), 0);
    CHECK(sl_config_equal(&c, &back));
    sl_buf_free(&out);

    /* unset keys are written as comments and stay unset */
    sl_config_t d, d2;
    sl_config_defaults(&d);
    sl_config_format(&d, &out);
    CHECK_CONTAINS((const char *)out.p, "# execution.checkpointing.interval: (not set: checkpointing is off)\n");
    CHECK_CONTAINS((const char *)out.p, "# restart-strategy.type: (not set: fixed-delay when checkpointing is on");
    CHECK_CONTAINS((const char *)out.p, "heartbeat.timeout: 10 s\n");
    CHECK_CONTAINS((const char *)out.p, "execution.checkpointing.timeout: 10 min\n");
    CHECK_CONTAINS((const char *)out.p, "pipeline.auto-watermark-interval: 200 ms\n");
    CHECK_EQ(load(&d2, (const char *)out.p), 0);
    CHECK(sl_config_equal(&d, &d2));
    sl_buf_free(&out);
    sl_config_free(&c);
    sl_config_free(&back);
    sl_config_free(&d);
    sl_config_free(&d2);
}

TEST(errors_name_key_value_allowed_and_line) {
    const char *path = write_file("bad.yaml",
                                  "parallelism.default: 2\n"
                                  "execution:\n"
                                  "  checkpointing:\n"
                                  "    mode: EXACTLY_ONC\n"
                                  "    interval: 10 sec onds\n"
                                  "state.backend.type: memory\n"
                                  "taskmanager.memory.segment-size: 3 kb\n"
                                  "execution.checkpointing.unaligned.enabled: maybe\n"
                                  "restart-strategy.fixed-delay.attempts: many\n");
    sl_config_t c;
    sl_config_defaults(&c);
    CHECK_EQ(sl_config_load_file(&c, path, ERR, sizeof ERR), SL_EINVAL);
    char want[1400];
    snprintf(want, sizeof want,
             "%s:4: execution.checkpointing.mode: bad value \"EXACTLY_ONC\": not a known value; allowed: one of "
             "EXACTLY_ONCE, AT_LEAST_ONCE (any case)",
             path);
    CHECK_CONTAINS(ERR, want);
    snprintf(want, sizeof want,
             "%s:5: execution.checkpointing.interval: bad value \"10 sec onds\": unknown time unit \"sec onds\"; "
             "allowed: a duration >= 10 ms",
             path);
    CHECK_CONTAINS(ERR, want);
    snprintf(want, sizeof want, "%s:6: state.backend.type: bad value \"memory\"", path);
    CHECK_CONTAINS(ERR, want);
    snprintf(want, sizeof want, "%s:7: taskmanager.memory.segment-size: bad value \"3 kb\": out of range", path);
    CHECK_CONTAINS(ERR, want);
    snprintf(want, sizeof want, "%s:8: execution.checkpointing.unaligned.enabled: bad value \"maybe\"", path);
    CHECK_CONTAINS(ERR, want);
    snprintf(want, sizeof want,
             "%s:9: restart-strategy.fixed-delay.attempts: bad value \"many\": not an integer; allowed: an integer >= 0",
             path);
    CHECK_CONTAINS(ERR, want);
    /* nothing was applied */
    CHECK_EQ(c.parallelism, 1);
    sl_config_free(&c);

    /* a key without a value */
    CHECK_EQ(load(&c, "execution.checkpointing.interval:\n"), SL_EINVAL);
    CHECK_CONTAINS(ERR, "t.yaml:1: execution.checkpointing.interval: no value given; allowed: a duration >= 10 ms");
    sl_config_free(&c);
    /* a list where a value is expected */
    CHECK_EQ(load(&c, "a: 1\nparallelism.default: [1, 2]\n"), SL_EINVAL);
    CHECK_CONTAINS(ERR, "t.yaml:2: parallelism.default: expects a single value, not a list");
    sl_config_free(&c);
    /* a NUL in a double-quoted value */
    CHECK_EQ(load(&c, "jobmanager.rpc.address: \"a\\0b\"\n"), SL_EINVAL);
    CHECK_CONTAINS(ERR, "t.yaml:1: jobmanager.rpc.address: bad value");
    CHECK_CONTAINS(ERR, "NUL");
    sl_config_free(&c);
    /* many errors: each on its own line, the rest counted */
    sl_buf_t many = {0};
    for (int i = 0; i < 30; i++) {
        char line[64];
        int n = snprintf(line, sizeof line, "unknown.key%d: 1\n", i);
        sl_buf_append(&many, line, (size_t)n);
    }
    sl_buf_append(&many, "", 1);
    CHECK_EQ(load(&c, (const char *)many.p), SL_EINVAL);
    CHECK_CONTAINS(ERR, "t.yaml:1: unknown key \"unknown.key0\"\nt.yaml:2: unknown key \"unknown.key1\"");
    CHECK_CONTAINS(ERR, "(and 10 more errors)");
    sl_buf_free(&many);
    sl_config_free(&c);
}

TEST(unknown_keys_suggest_closest) {
    sl_config_t c;
    CHECK_EQ(load(&c, "parallelism.default: 2\nexecution.checkpointing.intervall: 10 s\n"), SL_EINVAL);
    CHECK_CONTAINS(ERR, "t.yaml:2: unknown key \"execution.checkpointing.intervall\" (did you mean "
                        "\"execution.checkpointing.interval\"?)");
    sl_config_free(&c);
    CHECK_EQ(load(&c, "execution:\n  checkpointing:\n    intervall: 10 s\n"), SL_EINVAL);
    CHECK_CONTAINS(ERR, "t.yaml:3: unknown key \"execution.checkpointing.intervall\" (did you mean "
                        "\"execution.checkpointing.interval\"?)");
    sl_config_free(&c);
    CHECK_EQ(load(&c, "checkpointing.interval: 10 s\n"), SL_EINVAL);
    CHECK_CONTAINS(ERR, "(did you mean \"execution.checkpointing.interval\"?)");
    sl_config_free(&c);
    CHECK_EQ(load(&c, "taskmanager.numberOfTaskslots: 2\n"), SL_EINVAL);
    CHECK_CONTAINS(ERR, "(did you mean \"taskmanager.numberOfTaskSlots\"?)");
    sl_config_free(&c);
    CHECK_EQ(load(&c, "state.checkpoint.dir: /x\n"), SL_EINVAL); /* a deprecated name, misspelt */
    CHECK_CONTAINS(ERR, "(did you mean \"execution.checkpointing.dir\"?)");
    sl_config_free(&c);
    CHECK_EQ(load(&c, "kafka.bootstrap.servers: localhost:9092\n"), SL_EINVAL);
    CHECK_CONTAINS(ERR, "t.yaml:1: unknown key \"kafka.bootstrap.servers\"");
    CHECK(!strstr(ERR, "did you mean"));
    sl_config_free(&c);
    /* a group given a value */
    CHECK_EQ(load(&c, "execution.checkpointing: 10 s\n"), SL_EINVAL);
    CHECK_CONTAINS(ERR, "t.yaml:1: \"execution.checkpointing\" is a group of keys, not a key (e.g. "
                        "\"execution.checkpointing.interval\")");
    sl_config_free(&c);
    /* an empty group (everything under it commented out) is fine */
    CHECK_EQ(load(&c, "execution:\n  checkpointing:\n    # interval: 10 s\nparallelism.default: 3\n"), 0);
    CHECK_EQ(c.parallelism, 3);
    sl_config_free(&c);
    /* -D */
    sl_config_defaults(&c);
    CHECK_EQ(sl_config_set(&c, "execution.checkpointing.intervall", "10 s", ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "-D: unknown key \"execution.checkpointing.intervall\" (did you mean "
                        "\"execution.checkpointing.interval\"?)");
    sl_config_free(&c);
}

TEST(duplicate_keys) {
    sl_config_t c;
    CHECK_EQ(load(&c, "parallelism.default: 1\nrest.port: 1\nparallelism.default: 2\n"), SL_EINVAL);
    CHECK_CONTAINS(ERR, "t.yaml:3: duplicate key \"parallelism.default\"");
    CHECK_CONTAINS(ERR, "t.yaml:1");
    CHECK_EQ(c.parallelism, 1); /* unchanged: the load failed */
    sl_config_free(&c);
    /* flat and nested forms of the same key */
    CHECK_EQ(load(&c, "execution.checkpointing.interval: 1 s\nexecution:\n  checkpointing:\n    interval: 2 s\n"),
             SL_EINVAL);
    CHECK_CONTAINS(ERR, "t.yaml:4: duplicate key \"execution.checkpointing.interval\" (already set at t.yaml:1)");
    sl_config_free(&c);
    /* a deprecated name and the current one */
    CHECK_EQ(load(&c, "state.checkpoints.dir: /a\nexecution.checkpointing.dir: /b\n"), SL_EINVAL);
    CHECK_CONTAINS(ERR, "t.yaml:2: duplicate key \"execution.checkpointing.dir\" (already set at t.yaml:1 as "
                        "\"state.checkpoints.dir\")");
    sl_config_free(&c);
    /* a group written twice in one mapping (YAML forbids it) */
    CHECK_EQ(load(&c, "execution:\n  buffer-timeout.enabled: true\nexecution:\n  checkpointing.interval: 1 s\n"),
             SL_EINVAL);
    CHECK_CONTAINS(ERR, "t.yaml:3: duplicate key \"execution\" in the same mapping (first at t.yaml:1)");
    sl_config_free(&c);
    /* across sources it is an override, not a duplicate */
    CHECK_EQ(load(&c, "parallelism.default: 2\n"), 0);
    CHECK_EQ(sl_config_load_string(&c, "parallelism.default: 3\n", "second.yaml", ERR, sizeof ERR), 0);
    CHECK_EQ(c.parallelism, 3);
    sl_config_free(&c);
}

TEST(legacy_key_names) {
    sl_config_t c, d;
    CHECK_EQ(load(&c, "state.checkpoints.dir: /ck\n"
                      "state.savepoints.dir: /sp\n"
                      "state.checkpoints.num-retained: 3\n"
                      "state.backend.incremental: true\n"
                      "state.backend: rocksdb\n"
                      "restart-strategy: fixed-delay\n"
                      "execution.checkpointing.unaligned: true\n"
                      "execution.checkpointing.alignment-timeout: 5 s\n"
                      "execution.buffer-timeout: 10 ms\n"),
             0);
    CHECK_EQ(load(&d, "execution.checkpointing.dir: /ck\n"
                      "execution.checkpointing.savepoint-dir: /sp\n"
                      "execution.checkpointing.num-retained: 3\n"
                      "execution.checkpointing.incremental: true\n"
                      "state.backend.type: rocksdb\n"
                      "restart-strategy.type: fixed-delay\n"
                      "execution.checkpointing.unaligned.enabled: true\n"
                      "execution.checkpointing.aligned-checkpoint-timeout: 5 s\n"
                      "execution.buffer-timeout.interval: 10 ms\n"),
             0);
    CHECK(sl_config_equal(&c, &d));
    CHECK_STR(c.checkpoint_dir, "/ck");
    CHECK_EQ(c.num_retained, 3);
    sl_config_free(&c);
    sl_config_free(&d);
}

/* Loads text that must be rejected as malformed YAML, citing want. */
static int malformed(const char *text, const char *want) {
    sl_config_t c;
    int rc = load(&c, text);
    int ok = rc != 0 && strstr(ERR, want) != NULL;
    if (!ok) fprintf(stderr, "input %s: rc %d, message \"%s\", wanted \"%s\"\n", text, rc, ERR, want);
    sl_config_free(&c);
    return ok;
}

TEST(malformed_yaml) {
    CHECK(malformed("parallelism.default: 1\nexecution.checkpointing.interval: 10 s: x\n",
                    "t.yaml:2:39: malformed YAML: mapping values are not allowed in this context"));
    CHECK(malformed("parallelism.default: 1\njobmanager.rpc.address: \"unterminated\n", "t.yaml:3:1: malformed YAML"));
    CHECK(malformed("execution:\n  checkpointing:\n    interval: 1s\n   mode: x\n", "t.yaml:4:"));
    CHECK(malformed("a: [1, 2\n", "t.yaml:2:1: malformed YAML"));
    CHECK(malformed("\tparallelism.default: 1\n", "t.yaml:1:1: malformed YAML: found character that cannot start"));
    CHECK(malformed("parallelism.default: \xff\n", "t.yaml:1: malformed YAML: invalid leading UTF-8 octet"));
    CHECK(malformed("parallelism.default: *nothing\n", "malformed YAML: found undefined alias"));
    CHECK(malformed("parallelism.default: 1\n---\nparallelism.default: 2\n", "t.yaml:2: a second YAML document"));
    CHECK(malformed("- parallelism.default\n- 2\n", "t.yaml:1: the top level must be a mapping"));
    CHECK(malformed("just a sentence\n", "t.yaml:1: the top level must be a mapping"));
    CHECK(malformed("? [a, b]\n: c\n", "t.yaml:1: a key must be a name, not a list"));
    CHECK(malformed("{a: 1}: 2\n", "t.yaml:1: a key must be a name, not a mapping"));
    CHECK(malformed("~: 2\n", "t.yaml:1: empty or invalid key"));
    /* anchors that refer to themselves, and alias fan-out ("billion laughs") */
    CHECK(malformed("a: &a {b: *a}\n", "mappings nested more than 32 deep"));
    CHECK(malformed("x0: &x0 {k: 1}\n"
                    "x1: &x1 {a: *x0, b: *x0, c: *x0, d: *x0, e: *x0, f: *x0, g: *x0, h: *x0, i: *x0, j: *x0}\n"
                    "x2: &x2 {a: *x1, b: *x1, c: *x1, d: *x1, e: *x1, f: *x1, g: *x1, h: *x1, i: *x1, j: *x1}\n"
                    "x3: &x3 {a: *x2, b: *x2, c: *x2, d: *x2, e: *x2, f: *x2, g: *x2, h: *x2, i: *x2, j: *x2}\n"
                    "x4: &x4 {a: *x3, b: *x3, c: *x3, d: *x3, e: *x3, f: *x3, g: *x3, h: *x3, i: *x3, j: *x3}\n"
                    "x5: &x5 {a: *x4, b: *x4, c: *x4, d: *x4, e: *x4, f: *x4, g: *x4, h: *x4, i: *x4, j: *x4}\n"
                    "x6: &x6 {a: *x5, b: *x5, c: *x5, d: *x5, e: *x5, f: *x5, g: *x5, h: *x5, i: *x5, j: *x5}\n"
                    "x7: &x7 {a: *x6, b: *x6, c: *x6, d: *x6, e: *x6, f: *x6, g: *x6, h: *x6, i: *x6, j: *x6}\n",
                    "t.yaml: more than 100000 entries (aliases expanding without end?)"));
    /* aliases that resolve to ordinary values are fine */
    sl_config_t c;
    CHECK_EQ(load(&c, "d: &d 7\nparallelism.default: *d\n"), SL_EINVAL); /* "d" is unknown ... */
    CHECK_CONTAINS(ERR, "t.yaml:1: unknown key \"d\"");
    sl_config_free(&c);
    CHECK_EQ(load(&c, "parallelism.default: &p 7\ntaskmanager.numberOfTaskSlots: *p\n"), 0);
    CHECK_EQ(c.task_slots, 7);
    sl_config_free(&c);
}

TEST(empty_inputs) {
    sl_config_t c, d;
    sl_config_defaults(&d);
    static const char *empties[] = {"", "\n\n", "# only a comment\n", "---\n", "---\n...\n", "~\n", "{}\n"};
    for (size_t i = 0; i < SL_ARRAY_LEN(empties); i++) {
        CHECK_EQ(load(&c, empties[i]), 0);
        CHECK(sl_config_equal(&c, &d));
        sl_config_free(&c);
    }
    sl_config_free(&d);
}

TEST(set_overrides_file) {
    const char *path = write_file("base.yaml", "parallelism.default: 2\nexecution.checkpointing.interval: 10 s\n");
    sl_config_t c;
    sl_config_defaults(&c);
    CHECK_EQ(sl_config_load_file(&c, path, ERR, sizeof ERR), 0);
    CHECK_EQ(c.parallelism, 2);
    CHECK_EQ(sl_config_set(&c, "parallelism.default", "8", ERR, sizeof ERR), 0);
    CHECK_EQ(sl_config_set(&c, "execution.checkpointing.interval", "1 min", ERR, sizeof ERR), 0);
    CHECK_EQ(sl_config_set(&c, "state.checkpoints.dir", "/x", ERR, sizeof ERR), 0); /* deprecated name */
    CHECK_EQ(c.parallelism, 8);
    CHECK_EQ(c.checkpoint_interval_ms, 60000);
    CHECK_STR(c.checkpoint_dir, "/x");
    CHECK_EQ(sl_config_set(&c, "execution.checkpointing.dir", "/y", ERR, sizeof ERR), 0);
    CHECK_STR(c.checkpoint_dir, "/y");
    sl_buf_t out = {0};
    sl_config_format(&c, &out);
    CHECK_CONTAINS((const char *)out.p, "parallelism.default: 8  # from -D\n");
    sl_buf_free(&out);

    /* a file loaded after -D overrides it in turn; a failed load changes nothing */
    sl_config_t before;
    sl_config_copy(&before, &c);
    CHECK_EQ(sl_config_load_string(&c, "parallelism.default: 5\nrest.port: x\n", "late.yaml", ERR, sizeof ERR),
             SL_EINVAL);
    CHECK(sl_config_equal(&c, &before));
    CHECK_EQ(sl_config_load_string(&c, "parallelism.default: 5\n", "late.yaml", ERR, sizeof ERR), 0);
    CHECK_EQ(c.parallelism, 5);
    sl_config_free(&before);

    /* missing file */
    CHECK_EQ(sl_config_load_file(&c, "/nonexistent/sluice.yaml", ERR, sizeof ERR), SL_EIO);
    CHECK_CONTAINS(ERR, "/nonexistent/sluice.yaml: cannot open config file");
    sl_config_free(&c);
    sl_config_free(NULL);
}

TEST(validate_cross_key_rules) {
    sl_config_t c;
    CHECK_EQ(load(&c, "parallelism.default: 300\npipeline.max-parallelism: 256\n"), 0);
    CHECK_EQ(sl_config_validate(&c, ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "t.yaml:1: parallelism.default 300 is greater than pipeline.max-parallelism 256 (set at "
                        "t.yaml:2)");
    sl_config_free(&c);
    CHECK_EQ(load(&c, "parallelism.default: 300\n"), 0); /* -1: derived, always fits */
    CHECK_EQ(sl_config_validate(&c, ERR, sizeof ERR), 0);
    sl_config_free(&c);

    CHECK_EQ(load(&c, "execution.checkpointing.mode: AT_LEAST_ONCE\nexecution.checkpointing.unaligned.enabled: true\n"),
             0);
    CHECK_EQ(sl_config_validate(&c, ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "t.yaml:2: execution.checkpointing.unaligned.enabled true requires "
                        "execution.checkpointing.mode EXACTLY_ONCE, but it is AT_LEAST_ONCE (set at t.yaml:1)");
    sl_config_free(&c);
    CHECK_EQ(load(&c, "execution.checkpointing.unaligned.enabled: true\n"
                      "execution.checkpointing.max-concurrent-checkpoints: 2\n"),
             0);
    CHECK_EQ(sl_config_validate(&c, ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "max-concurrent-checkpoints 1, but it is 2 (set at t.yaml:2)");
    sl_config_free(&c);
    CHECK_EQ(load(&c, "execution.checkpointing.unaligned.enabled: true\n"), 0);
    CHECK_EQ(sl_config_validate(&c, ERR, sizeof ERR), 0);
    sl_config_free(&c);

    /* exponential delay: initial <= max, checked only when it is in force */
    CHECK_EQ(load(&c, "restart-strategy.exponential-delay.initial-backoff: 2 min\n"), 0);
    CHECK_EQ(sl_config_validate(&c, ERR, sizeof ERR), 0);
    CHECK_EQ(sl_config_set(&c, "restart-strategy.type", "exponential-delay", ERR, sizeof ERR), 0);
    CHECK_EQ(sl_config_validate(&c, ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "t.yaml:1: restart-strategy.exponential-delay.initial-backoff 2 min is greater than "
                        "restart-strategy.exponential-delay.max-backoff 1 min (set at default)");
    sl_config_free(&c);

    /* heartbeats */
    CHECK_EQ(load(&c, "heartbeat.timeout: 1 s\n"), 0);
    CHECK_EQ(sl_config_validate(&c, ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "t.yaml:1: heartbeat.timeout 1 s is less than heartbeat.interval 2 s (set at default)");
    sl_config_free(&c);

    /* min-pause > interval is allowed (Flink does not check it) */
    CHECK_EQ(load(&c, "execution.checkpointing.interval: 1 s\nexecution.checkpointing.min-pause: 1 min\n"), 0);
    CHECK_EQ(sl_config_validate(&c, ERR, sizeof ERR), 0);
    sl_config_free(&c);

    /* several problems: all reported, one per line */
    CHECK_EQ(load(&c, ALL_FLAT), 0);
    CHECK_EQ(sl_config_set(&c, "heartbeat.timeout", "10 ms", ERR, sizeof ERR), 0);
    CHECK_EQ(sl_config_validate(&c, ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "EXACTLY_ONCE, but it is AT_LEAST_ONCE");
    CHECK_CONTAINS(ERR, "\n");
    CHECK_CONTAINS(ERR, "-D: heartbeat.timeout 10 ms is less than heartbeat.interval 1 s (set at t.yaml:49)");
    sl_config_free(&c);
}

TEST(help_lists_every_key) {
    sl_buf_t h = {0};
    sl_config_help(&h);
    const char *t = (const char *)h.p;
    CHECK_CONTAINS(t, "\nexecution.checkpointing.interval\n    duration, default: not set (checkpointing is off)\n");
    CHECK_CONTAINS(t, "\nheartbeat.timeout\n    duration, default: 10 s\n");
    CHECK_CONTAINS(t, "also accepted (deprecated): state.checkpoints.dir, state.backend.fs.checkpointdir\n");
    CHECK_CONTAINS(t, "allowed: one of EXACTLY_ONCE, AT_LEAST_ONCE (any case)\n");
    int keys = 0;
    for (const char *p = t; (p = strstr(p, "\n    allowed: ")); p++) keys++;
    CHECK_EQ(keys, 74);
    sl_buf_free(&h);
}

TEST(apply_to_environment) {
    sl_config_t c;
    CHECK_EQ(load(&c, "parallelism.default: 3\npipeline.max-parallelism: 512\n"
                      "pipeline.auto-watermark-interval: 50 ms\ntaskmanager.memory.segment-size: 64 kb\n"
                      "taskmanager.network.memory.buffers-per-channel: 2\n"),
             0);
    sl_env_t *env = sl_env_new();
    char aerr[256];
    CHECK_EQ(sl_config_apply_env(&c, env, aerr, sizeof aerr), 0);
    CHECK_EQ(env->parallelism, 3);
    CHECK_EQ(env->max_parallelism, 512);
    CHECK_EQ(env->wm_interval_ms, 50);
    CHECK_EQ(env->buffer_size, 65536);
    CHECK_EQ(env->buffers_per_channel, 2);
    sl_config_free(&c);
    sl_config_defaults(&c);
    CHECK_EQ(sl_config_apply_env(&c, env, aerr, sizeof aerr), 0);
    CHECK_EQ(env->max_parallelism, 0); /* -1: derived */
    CHECK_EQ(env->buffers_per_channel, 4);
    CHECK(!env->ckpt_enabled);
    sl_env_destroy(env);
    sl_config_free(&c);
    /* checkpointing and restarts */
    CHECK_EQ(load(&c, "execution.checkpointing.interval: 10 s\nexecution.checkpointing.mode: AT_LEAST_ONCE\n"
                      "execution.checkpointing.timeout: 1 min\nexecution.checkpointing.tolerable-failed-checkpoints: 2\n"
                      "execution.checkpointing.dir: /tmp/x\nexecution.checkpointing.num-retained: 3\n"
                      "restart-strategy.type: fixed-delay\nrestart-strategy.fixed-delay.attempts: 5\n"
                      "restart-strategy.fixed-delay.delay: 2 s\n"),
             0);
    env = sl_env_new();
    CHECK_EQ(sl_config_apply_env(&c, env, aerr, sizeof aerr), 0);
    CHECK(env->ckpt_enabled);
    CHECK_EQ(env->ckpt.interval_ms, 10000);
    CHECK_EQ(env->ckpt.mode, SL_CKPT_AT_LEAST_ONCE);
    CHECK_EQ(env->ckpt.timeout_ms, 60000);
    CHECK_EQ(env->ckpt.tolerable_failed, 2);
    CHECK_STR(env->ckpt_dir, "/tmp/x");
    CHECK_EQ(env->ckpt_retained, 3);
    CHECK_EQ(env->restart.kind, SL_RESTART_FIXED_DELAY);
    CHECK_EQ(env->restart.attempts, 5);
    CHECK_EQ(env->restart.delay_ms, 2000);
    sl_env_destroy(env);
    sl_config_free(&c);
    /* exponential-delay and failure-rate reach the environment */
    CHECK_EQ(load(&c, "execution.checkpointing.interval: 1 s\nrestart-strategy.type: exponential-delay\n"
                      "restart-strategy.exponential-delay.initial-backoff: 2 s\n"
                      "restart-strategy.exponential-delay.max-backoff: 30 s\n"
                      "restart-strategy.exponential-delay.backoff-multiplier: 3\n"
                      "restart-strategy.exponential-delay.jitter-factor: 0\n"
                      "restart-strategy.exponential-delay.attempts-before-reset-backoff: 7\n"), 0);
    env = sl_env_new();
    CHECK_EQ(sl_config_apply_env(&c, env, aerr, sizeof aerr), 0);
    CHECK_EQ(env->restart.kind, SL_RESTART_EXPONENTIAL_DELAY);
    CHECK_EQ(env->restart.initial_backoff_ms, 2000);
    CHECK_EQ(env->restart.max_backoff_ms, 30000);
    CHECK_DBL(env->restart.multiplier, 3.0);
    CHECK_DBL(env->restart.jitter, 0.0);
    CHECK_EQ(env->restart.reset_threshold_ms, 3600000);
    CHECK_EQ(env->restart.attempts_before_reset, 7);
    sl_env_destroy(env);
    sl_config_free(&c);
    CHECK_EQ(load(&c, "restart-strategy.type: failure-rate\n"
                      "restart-strategy.failure-rate.max-failures-per-interval: 4\n"
                      "restart-strategy.failure-rate.failure-rate-interval: 10 min\n"
                      "restart-strategy.failure-rate.delay: 500 ms\n"), 0);
    env = sl_env_new();
    CHECK_EQ(sl_config_apply_env(&c, env, aerr, sizeof aerr), 0);
    CHECK_EQ(env->restart.kind, SL_RESTART_FAILURE_RATE);
    CHECK_EQ(env->restart.max_failures, 4);
    CHECK_EQ(env->restart.interval_ms, 600000);
    CHECK_EQ(env->restart.delay_ms, 500);
    sl_env_destroy(env);
    sl_config_free(&c);
    /* RocksDB settings reach the environment */
    CHECK_EQ(load(&c, "state.backend.type: rocksdb\nstate.backend.rocksdb.block.cache-size: 128 mb\n"
                      "execution.checkpointing.incremental: true\n"), 0);
    env = sl_env_new();
    CHECK_EQ(sl_config_apply_env(&c, env, aerr, sizeof aerr), 0);
    CHECK_EQ(env->backend, SL_STATE_BACKEND_ROCKSDB);
    CHECK_EQ(env->rocksdb_cache_bytes, 128 << 20);
    CHECK(env->incremental);
    sl_env_destroy(env);
    sl_config_free(&c);
    /* incremental checkpoints without RocksDB are refused by name, not ignored */
    CHECK_EQ(load(&c, "execution.checkpointing.incremental: true\n"), 0);
    env = sl_env_new();
    CHECK(sl_config_apply_env(&c, env, aerr, sizeof aerr) < 0);
    CHECK_CONTAINS(aerr, "execution.checkpointing.incremental");
    sl_env_destroy(env);
    sl_config_free(&c);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

/* Random byte mutations of valid files: every outcome is a clean success
 * (whose dump reads back equal) or an error naming the origin; a failed
 * load leaves the configuration untouched.  Run under ASan/UBSan too. */
TEST(random_mutations_never_crash) {
    static const char interesting[] = ":{}[]-#\n \t'\"&*!|>?,%@`~.0123456789sSmkb";
    const char *bases[] = {ALL_FLAT, ALL_NESTED, ALL_MIXED};
    const char *iters_env = getenv("SLUICE_CONFIG_FUZZ_ITERS");
    long iters = iters_env ? atol(iters_env) : 30000;
    const char *seed_env = getenv("SLUICE_CONFIG_FUZZ_SEED");
    if (seed_env) rng_state = strtoull(seed_env, NULL, 0) | 1;
    long ok = 0, failed = 0;
    sl_config_t pristine;
    sl_config_defaults(&pristine);
    for (long it = 0; it < iters; it++) {
        const char *base = bases[it % 3];
        size_t len = strlen(base), cap = len * 2 + 64;
        char *text = malloc(cap);
        memcpy(text, base, len + 1);
        int nmut = 1 + (int)(rnd() % 6);
        bool values_only = (it / 3) % 2; /* half the runs: mutate only what follows ": " */
        for (int m = 0; m < nmut; m++) {
            size_t pos = len ? rnd() % len : 0;
            if (values_only) {
                const char *nl = strchr(text + pos, '\n'), *colon = strstr(text + pos, ": ");
                if (!colon || !nl || colon > nl) continue;
                pos = (size_t)(colon - text) + 2;
                const char *eol = strchr(text + pos, '\n');
                pos += eol && eol > text + pos ? rnd() % (size_t)(eol - (text + pos)) : 0;
            }
            unsigned char ch = (rnd() & 1) ? (unsigned char)interesting[rnd() % (sizeof interesting - 1)]
                                           : (unsigned char)(1 + rnd() % 255);
            switch (rnd() % 4) {
            case 0: text[pos] = (char)ch; break;
            case 1: /* insert */
                if (len + 2 >= cap) break;
                memmove(text + pos + 1, text + pos, len - pos + 1);
                text[pos] = (char)ch;
                len++;
                break;
            case 2: /* delete */
                if (len) {
                    memmove(text + pos, text + pos + 1, len - pos);
                    len--;
                }
                break;
            case 3: { /* duplicate a short span */
                size_t n = SL_MIN((size_t)(rnd() % 40), len - pos);
                if (n && len + n + 1 < cap) {
                    memmove(text + pos + n, text + pos, len - pos + 1);
                    len += n;
                }
                break;
            }
            }
        }
        sl_config_t c;
        sl_config_defaults(&c);
        int rc = sl_config_load_string(&c, text, "fuzz.yaml", ERR, sizeof ERR);
        if (rc == 0) {
            ok++;
            sl_config_validate(&c, ERR, sizeof ERR);
            sl_buf_t out = {0};
            sl_config_format(&c, &out);
            sl_config_t back;
            sl_config_defaults(&back);
            int rc2 = sl_config_load_string(&back, (const char *)out.p, "dump", ERR, sizeof ERR);
            if (rc2 != 0 || !sl_config_equal(&c, &back))
                fprintf(stderr, "round trip failed (%s) for:\n%s\n--- dump:\n%s\n", ERR, text, (const char *)out.p);
            CHECK_EQ(rc2, 0);
            CHECK(sl_config_equal(&c, &back));
            sl_config_free(&back);
            sl_buf_free(&out);
        } else {
            failed++;
            if (!strstr(ERR, "fuzz.yaml")) fprintf(stderr, "rc %d, message without origin: \"%s\"\n", rc, ERR);
            CHECK(strstr(ERR, "fuzz.yaml"));
            CHECK(rc == SL_EINVAL || rc == SL_EFORMAT);
            CHECK(sl_config_equal(&c, &pristine));
        }
        sl_config_free(&c);
        free(text);
    }
    fprintf(stderr, "  %ld mutated files: %ld loaded, %ld rejected\n", iters, ok, failed);
    if (iters >= 1000) CHECK(ok > 0 && failed > 0);
    sl_config_free(&pristine);
}

int main(void) {
    RUN(defaults_every_key);
    RUN(restart_strategy_in_force);
    RUN(durations);
    RUN(memory_sizes);
    RUN(booleans_enums_numbers);
    RUN(flat_nested_mixed_equal);
    RUN(format_round_trip);
    RUN(errors_name_key_value_allowed_and_line);
    RUN(unknown_keys_suggest_closest);
    RUN(duplicate_keys);
    RUN(legacy_key_names);
    RUN(malformed_yaml);
    RUN(empty_inputs);
    RUN(set_overrides_file);
    RUN(validate_cross_key_rules);
    RUN(help_lists_every_key);
    RUN(apply_to_environment);
    RUN(random_mutations_never_crash);
    TEST_MAIN_END();
}
