/*
 * test_rest_embedded.c — the REST API of an embedded job (Flink's
 * MiniCluster with rest.port): sl_env_set_rest_endpoint, or rest.port in a
 * configuration given to sl_env_configure, serves /overview, /jobs,
 * /jobs/:jobid, its checkpoints, a triggered checkpoint and cancel while
 * sl_env_execute runs, and nothing once it returned.
 *
 *   - served_while_running: a checkpointed job (counter source -> slow map,
 *     chained -> counting sink, parallelism 2) on an ephemeral port; the job and its
 *     vertices as the plan has them, checkpoint counts that grow and never
 *     exceed what sl_env_execute reports at the end, POST .../checkpoints
 *     completing, uploads and runs refused by name, a bearer token when
 *     SLUICE_REST_TOKEN is set, PATCH ?mode=cancel ending sl_env_execute
 *     with SL_ECANCELED, then the port closed;
 *   - from_configuration: rest.port from a YAML configuration; the same
 *     port already bound fails sl_env_execute naming rest.port; without
 *     rest.port no server runs.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "http_util.h"
#include "pipeline_util.h"
#include "sluice/config.h"
#include "test.h"

static atomic_int g_delay_us; /* per record in the map: keeps the job running */

static int slow_map(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    (void)ctx;
    int us = atomic_load(&g_delay_us);
    if (us > 0) {
        struct timespec ts = {0, (long)us * 1000};
        nanosleep(&ts, NULL);
    }
    sl_rw_copy_row(out, &in->row);
    return 0;
}

static sl_schema_t *id_ts(void) { return sl_schema_parse("id BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0); }

/* counter -> slow map -> counting sink at parallelism 2; records: n */
static sl_env_t *slow_job(int64_t n, const char *ckdir) {
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 2);
    sl_env_enable_checkpointing(env, 100, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, ckdir);
    sl_stream_t *s = sl_from_source(env, counter_source(n, 4), sl_wm_none(), "numbers");
    /* chained to the source, so the source itself is slow and no backlog
     * holds the barriers up */
    s = sl_name(sl_map(s, slow_map, NULL, id_ts()), "slow-map");
    sl_sink_to(sl_rebalance(s), sl_counting_sink(NULL), "count");
    return env;
}

typedef struct run {
    sl_env_t *env;
    const char *name;
    int rc;
    atomic_bool done;
} run_t;

static void *run_thread(void *arg) {
    run_t *r = arg;
    r->rc = sl_env_execute(r->env, r->name);
    atomic_store(&r->done, true);
    return NULL;
}

static int64_t now_ms(void) { return sl_mono_ns() / 1000000; }

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* The port once the server is up (the job started), or -1 after 20 s. */
static int wait_port(run_t *r) {
    for (int64_t end = now_ms() + 20000; now_ms() < end && !atomic_load(&r->done);) {
        int p = sl_env_rest_port(r->env);
        if (p > 0) return p;
        sleep_ms(10);
    }
    return -1;
}

static const char *tok; /* the bearer token requests carry */

static void req(int port, const char *method, const char *path, const char *body, http_resp_t *out) {
    http_do(port, method, path, body, body ? strlen(body) : 0, tok, out);
}

static int64_t completed_checkpoints(int port, const char *id) {
    char path[256];
    snprintf(path, sizeof path, "/jobs/%s/checkpoints", id);
    http_resp_t r;
    req(port, "GET", path, NULL, &r);
    int64_t n = r.status == 200 ? json_integer_value(json_object_get(json_object_get(r.json, "counts"), "completed")) : -1;
    http_resp_free(&r);
    return n;
}

TEST(served_while_running) {
    char ckdir[1100];
    snprintf(ckdir, sizeof ckdir, "%s/rest-embedded-ck", sl_test_tmpdir());
    atomic_store(&g_delay_us, 50);
    setenv("SLUICE_REST_TOKEN", "s3cr3t-token", 1);
    run_t r = {.env = slow_job(1000000000LL, ckdir), .name = "rest-embedded"};
    CHECK_EQ(sl_env_rest_port(r.env), -1);
    sl_env_set_rest_endpoint(r.env, "127.0.0.1", 0);
    pthread_t th;
    pthread_create(&th, NULL, run_thread, &r);
    int port = wait_port(&r);
    unsetenv("SLUICE_REST_TOKEN"); /* read when the server started */
    CHECK(port > 0);
    if (port <= 0) {
        sl_env_cancel(r.env);
        pthread_join(th, NULL);
        sl_env_destroy(r.env);
        return;
    }
    http_resp_t a;
    tok = NULL; /* without the token: 401 */
    req(port, "GET", "/overview", NULL, &a);
    CHECK_EQ(a.status, 401);
    http_resp_free(&a);
    tok = "s3cr3t-token";
    req(port, "GET", "/overview", NULL, &a);
    CHECK_EQ(a.status, 200);
    CHECK_EQ(json_integer_value(json_object_get(a.json, "jobs-running")), 1);
    CHECK(json_is_integer(json_object_get(a.json, "taskmanagers")));
    CHECK_EQ(json_integer_value(json_object_get(a.json, "taskmanagers")), 0);
    http_resp_free(&a);
    /* the one job, under a Flink JobID */
    req(port, "GET", "/jobs", NULL, &a);
    CHECK_EQ(a.status, 200);
    json_t *jobs = json_object_get(a.json, "jobs");
    CHECK_EQ((long long)json_array_size(jobs), 1);
    char id[64] = "";
    snprintf(id, sizeof id, "%s", json_string_value(json_object_get(json_array_get(jobs, 0), "id")) ?: "");
    http_resp_free(&a);
    CHECK_EQ((int)strlen(id), 32);
    CHECK_EQ((int)strspn(id, "0123456789abcdef"), 32);
    char path[256];
    snprintf(path, sizeof path, "/jobs/%s", id);
    int64_t end = now_ms() + 20000;
    do { /* RUNNING once every subtask reported so */
        req(port, "GET", path, NULL, &a);
        if (a.status == 200 && !strcmp(json_string_value(json_object_get(a.json, "state")) ?: "", "RUNNING")) break;
        http_resp_free(&a);
        sleep_ms(20);
    } while (now_ms() < end);
    CHECK_EQ(a.status, 200);
    CHECK_STR(json_string_value(json_object_get(a.json, "name")) ?: "", "rest-embedded");
    CHECK_STR(json_string_value(json_object_get(a.json, "state")) ?: "", "RUNNING");
    json_t *vs = json_object_get(a.json, "vertices");
    bool src = false, map = false;
    for (size_t i = 0; i < json_array_size(vs); i++) {
        const char *n = json_string_value(json_object_get(json_array_get(vs, i), "name")) ?: "";
        int par = (int)json_integer_value(json_object_get(json_array_get(vs, i), "parallelism"));
        CHECK_EQ(par, 2);
        src |= strstr(n, "numbers") != NULL;
        map |= strstr(n, "slow-map") != NULL;
    }
    CHECK(src && map);
    CHECK_EQ((long long)json_array_size(vs), 2); /* source -> map | sink (rebalance between) */
    http_resp_free(&a);
    /* checkpoints complete, and the counts grow */
    int64_t c1 = -1, c2 = -1;
    for (end = now_ms() + 20000; now_ms() < end && (c1 = completed_checkpoints(port, id)) < 2;) sleep_ms(50);
    CHECK(c1 >= 2);
    for (end = now_ms() + 20000; now_ms() < end && (c2 = completed_checkpoints(port, id)) <= c1;) sleep_ms(50);
    CHECK(c2 > c1);
    /* a triggered checkpoint completes (POST, then its operation) */
    snprintf(path, sizeof path, "/jobs/%s/checkpoints", id);
    req(port, "POST", path, "{}", &a);
    CHECK_EQ(a.status, 202);
    char trig[128] = "";
    snprintf(trig, sizeof trig, "%s", json_string_value(json_object_get(a.json, "request-id")) ?: "");
    http_resp_free(&a);
    CHECK(trig[0]);
    const char *status = "";
    char sbuf[32] = "";
    snprintf(path, sizeof path, "/jobs/%s/checkpoints/%s", id, trig);
    for (end = now_ms() + 20000; now_ms() < end;) {
        req(port, "GET", path, NULL, &a);
        snprintf(sbuf, sizeof sbuf, "%s",
                 json_string_value(json_object_get(json_object_get(a.json, "status"), "id")) ?: "");
        bool fin = !strcmp(sbuf, "COMPLETED");
        http_resp_free(&a);
        if (fin) break;
        sleep_ms(20);
    }
    status = sbuf;
    CHECK_STR(status, "COMPLETED");
    /* it runs no other job and takes no uploads */
    req(port, "POST", "/jars/upload", "x", &a);
    CHECK_EQ(a.status, 400);
    CHECK(a.body && strstr(a.body, "embedded job"));
    http_resp_free(&a);
    req(port, "POST", "/jars/builtin/run", "{\"entryClass\":\"fraud\"}", &a);
    CHECK(a.status >= 400 && a.status < 500);
    CHECK(a.body && strstr(a.body, "embedded job"));
    http_resp_free(&a);
    /* cancel through REST */
    snprintf(path, sizeof path, "/jobs/%s?mode=cancel", id);
    req(port, "PATCH", path, NULL, &a);
    CHECK_EQ(a.status, 202);
    http_resp_free(&a);
    pthread_join(th, NULL);
    CHECK_EQ(r.rc, SL_ECANCELED);
    CHECK_EQ(sl_env_rest_port(r.env), -1);
    CHECK(sl_env_checkpoints_completed(r.env) >= c2); /* REST showed no more than the job completed */
    req(port, "GET", "/overview", NULL, &a);
    CHECK_EQ(a.status, 0); /* the server went with the job */
    http_resp_free(&a);
    tok = NULL;
    sl_env_destroy(r.env);
}

/* A port bound here (listening), so that the job cannot take it. */
static int bind_port(int *fd_out) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = 0};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    socklen_t sl = sizeof sa;
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 4) < 0 ||
        getsockname(fd, (struct sockaddr *)&sa, &sl) < 0) {
        close(fd);
        return -1;
    }
    *fd_out = fd;
    return ntohs(sa.sin_port);
}

TEST(from_configuration) {
    char ckdir[1100], yaml[256], err[1024];
    snprintf(ckdir, sizeof ckdir, "%s/rest-embedded-ck2", sl_test_tmpdir());
    atomic_store(&g_delay_us, 0);
    /* a free port, found by binding and closing */
    int fd = -1, port = bind_port(&fd);
    CHECK(port > 0);
    close(fd);
    atomic_store(&g_delay_us, 50);
    snprintf(yaml, sizeof yaml, "rest.port: %d\nrest.bind-address: 127.0.0.1\n", port);
    sl_config_t *cfg = sl_config_new();
    CHECK_EQ(sl_config_load_string(cfg, yaml, "rest.yaml", err, sizeof err), 0);
    run_t r = {.env = slow_job(1000000000LL, ckdir), .name = "rest-configured"};
    CHECK_EQ(sl_env_configure(r.env, cfg), 0);
    pthread_t th;
    pthread_create(&th, NULL, run_thread, &r);
    CHECK_EQ(wait_port(&r), port);
    http_resp_t a;
    tok = NULL;
    req(port, "GET", "/jobs/overview", NULL, &a);
    CHECK_EQ(a.status, 200);
    json_t *jobs = json_object_get(a.json, "jobs");
    CHECK_EQ((long long)json_array_size(jobs), 1);
    CHECK_STR(json_string_value(json_object_get(json_array_get(jobs, 0), "name")) ?: "", "rest-configured");
    http_resp_free(&a);
    sl_env_cancel(r.env);
    pthread_join(th, NULL);
    CHECK_EQ(r.rc, SL_ECANCELED);
    sl_env_destroy(r.env);
    /* the port taken: the job does not start, and says which key */
    port = bind_port(&fd);
    CHECK(port > 0);
    snprintf(yaml, sizeof yaml, "rest.port: %d\n", port);
    sl_config_destroy(cfg);
    cfg = sl_config_new();
    CHECK_EQ(sl_config_load_string(cfg, yaml, "rest.yaml", err, sizeof err), 0);
    sl_env_t *env = slow_job(1000, ckdir);
    CHECK_EQ(sl_env_configure(env, cfg), 0);
    int rc = sl_env_execute(env, "rest-taken");
    CHECK(rc < 0);
    CHECK_CONTAINS(sl_env_error(env), "rest.port");
    char pbuf[16];
    snprintf(pbuf, sizeof pbuf, "%d", port);
    CHECK_CONTAINS(sl_env_error(env), pbuf);
    sl_env_destroy(env);
    close(fd);
    sl_config_destroy(cfg);
    /* no rest.port: no server while the job runs */
    atomic_store(&g_delay_us, 300);
    r = (run_t){.env = slow_job(1000000000LL, ckdir), .name = "rest-none"};
    pthread_create(&th, NULL, run_thread, &r);
    sleep_ms(300);
    CHECK(!atomic_load(&r.done));
    CHECK_EQ(sl_env_rest_port(r.env), -1);
    sl_env_cancel(r.env);
    pthread_join(th, NULL);
    sl_env_destroy(r.env);
}

int main(void) {
    RUN(served_while_running);
    RUN(from_configuration);
    return sl_test_failures ? 1 : 0;
}
