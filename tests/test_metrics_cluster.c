/*
 * test_metrics_cluster.c — live metrics of a real cluster (a JobManager and
 * a TaskManager process running tests/tools/cluster_job.so, the S1 shape
 * rate-limited so that it runs for a few seconds), over REST and through a
 * real Prometheus server.
 *
 *   rest_paths: every metrics path answers Flink's field names and types
 *     (schema tables below, from rest_v1_dispatcher.yml): /jobs/:jobid's
 *     vertices' "metrics", /jobs/:jobid/vertices/:vertexid (subtasks and
 *     their IOMetricsInfo), .../metrics (the list of ids, and ?get= values
 *     as strings), .../backpressure (levels ok/low/high), .../watermarks,
 *     /jobs/:jobid/metrics.  While the job runs the rates are plausible:
 *     busy + idle + back-pressured ~ 1000, records in grow and are > 0.
 *     Once it finished, the figures are final: the source's records out
 *     equal the events the job was given, and each vertex's read-records
 *     equals its upstream's write-records.
 *   prometheus: Debian's `prometheus` (apt-get install prometheus) runs as
 *     a child with a generated configuration (scrape interval 1 s), scraping
 *     the JobManager's and the TaskManager's /metrics.  Its HTTP API's
 *     flink_taskmanager_job_task_operator_numRecordsIn, per operator and
 *     subtask, equals what REST says once the job has finished (the values
 *     no longer move, so "within one scrape interval" is exact), so does
 *     flink_taskmanager_job_task_operator_stateMemoryBytes of the keyed
 *     (window) operator, and
 *     flink_jobmanager_job_numberOfCompletedCheckpoints equals REST's
 *     checkpoint count.  Without the binary the test fails, saying why.
 */
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>

#include "cluster_util.h"

#define EVENTS 100000
#define RATE 10000 /* events per second: ~10 s of running */

typedef enum { T_STR = 1, T_INT = 2, T_REAL = 4, T_BOOL = 8, T_OBJ = 16, T_ARR = 32 } jtype_t;
typedef struct field {
    const char *name;
    int types;
} field_t;

/* Flink's shapes (rest_v1_dispatcher.yml) */
static const field_t IO_METRICS[] = {{"read-bytes", T_INT},
                                     {"read-bytes-complete", T_BOOL},
                                     {"write-bytes", T_INT},
                                     {"write-bytes-complete", T_BOOL},
                                     {"read-records", T_INT},
                                     {"read-records-complete", T_BOOL},
                                     {"write-records", T_INT},
                                     {"write-records-complete", T_BOOL},
                                     {"accumulated-backpressured-time", T_INT},
                                     {"accumulated-idle-time", T_INT},
                                     {"accumulated-busy-time", T_REAL | T_INT},
                                     {NULL, 0}};
static const field_t VERTEX_DETAIL[] = {{"id", T_STR},       {"name", T_STR}, {"maxParallelism", T_INT},
                                        {"parallelism", T_INT}, {"now", T_INT}, {"subtasks", T_ARR},
                                        {NULL, 0}};
static const field_t VERTEX_SUBTASK[] = {{"subtask", T_INT},    {"status", T_STR},   {"attempt", T_INT},
                                         {"endpoint", T_STR},   {"start-time", T_INT}, {"end-time", T_INT},
                                         {"duration", T_INT},   {"metrics", T_OBJ},  {"taskmanager-id", T_STR},
                                         {NULL, 0}};
static const field_t BACKPRESSURE[] = {{"status", T_STR}, {"backpressureLevel", T_STR}, {"end-timestamp", T_INT},
                                       {"subtasks", T_ARR}, {NULL, 0}};
static const field_t BP_SUBTASK[] = {{"subtask", T_INT},  {"attemptNumber", T_INT}, {"backpressureLevel", T_STR},
                                     {"ratio", T_REAL | T_INT}, {"idleRatio", T_REAL | T_INT},
                                     {"busyRatio", T_REAL | T_INT}, {NULL, 0}};
static const field_t METRIC_ID[] = {{"id", T_STR}, {NULL, 0}};
static const field_t METRIC_VALUE[] = {{"id", T_STR}, {"value", T_STR}, {NULL, 0}};

static int type_of(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_STRING: return T_STR;
    case JSON_INTEGER: return T_INT;
    case JSON_REAL: return T_REAL;
    case JSON_TRUE: case JSON_FALSE: return T_BOOL;
    case JSON_OBJECT: return T_OBJ;
    case JSON_ARRAY: return T_ARR;
    default: return 0;
    }
}

static bool schema_ok(const json_t *o, const field_t *t, const char *where) {
    if (!json_is_object(o)) {
        fprintf(stderr, "  %s: not an object\n", where);
        return false;
    }
    for (; t->name; t++) {
        json_t *v = json_object_get(o, t->name);
        if (!v || !(type_of(v) & t->types)) {
            fprintf(stderr, "  %s: field \"%s\" %s\n", where, t->name, v ? "has the wrong type" : "is missing");
            return false;
        }
    }
    return true;
}

static json_t *get_json(int port, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static json_t *get_json(int port, const char *fmt, ...) {
    char path[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof path, fmt, ap);
    va_end(ap);
    char *s = cl_http_get(port, path);
    json_t *j = s ? json_loads(s, 0, NULL) : NULL;
    free(s);
    return j;
}

/* value of metric id in a [{"id","value"}] answer, as a number (NAN: absent) */
static double metric_value(const json_t *a, const char *id) {
    size_t i;
    json_t *e;
    json_array_foreach(a, i, e) if (!strcmp(json_string_value(json_object_get(e, "id")), id)) return atof(
        json_string_value(json_object_get(e, "value")));
    return NAN;
}

static void start_jm(cluster_t *c, int prom_port) {
    char log[sizeof c->jm.log];
    snprintf(log, sizeof log, "%s/jobmanager.log", c->dir);
    memcpy(c->jm.log, log, sizeof log);
    char rpc[64], rest[64], sec[128], prom[64];
    snprintf(rpc, sizeof rpc, "jobmanager.rpc.port=%d", c->rpc_port);
    snprintf(rest, sizeof rest, "rest.port=%d", c->rest_port);
    snprintf(sec, sizeof sec, "security.internal.secret=%s", c->secret);
    snprintf(prom, sizeof prom, "metrics.reporter.prom.port=%d-%d", prom_port, prom_port + 3);
    char *argv[] = {"sluice", "jobmanager", "-D", rpc, "-D", rest, "-D", sec, "-D", "heartbeat.interval=200 ms",
                    "-D", "heartbeat.timeout=5 s", "-D", "metrics.reporter.prom.enabled=true", "-D", prom, NULL};
    c->jm.pid = cl_spawn(c->jm.log, argv);
}

static void start_tm(cluster_t *c, int prom_port) {
    proc_t *p = &c->tm[c->ntm++];
    snprintf(p->id, sizeof p->id, "tm-1");
    char log[sizeof p->log];
    snprintf(log, sizeof log, "%s/tm-1.log", c->dir);
    memcpy(p->log, log, sizeof log);
    char rpc[64], sec[128], prom[64];
    snprintf(rpc, sizeof rpc, "jobmanager.rpc.port=%d", c->rpc_port);
    snprintf(sec, sizeof sec, "security.internal.secret=%s", c->secret);
    snprintf(prom, sizeof prom, "metrics.reporter.prom.port=%d", prom_port);
    char *argv[] = {"sluice", "taskmanager", "--id", p->id, "-D", rpc, "-D", sec, "-D", "taskmanager.numberOfTaskSlots=4",
                    "-D", "heartbeat.interval=200 ms", "-D", "heartbeat.timeout=5 s", "-D",
                    "metrics.reporter.prom.enabled=true", "-D", prom, "-D", "taskmanager.host=127.0.0.1", NULL};
    p->pid = cl_spawn(p->log, argv);
}

/* The port a process's log says its Prometheus endpoint took, or -1. */
static int prom_port_in_log(const char *log, int ms) {
    int64_t end = cl_now_ms() + ms;
    while (cl_now_ms() < end) {
        char *s = cl_slurp(log);
        const char *at = s ? strstr(s, "Prometheus metrics at http://0.0.0.0:") : NULL;
        int port = at ? atoi(at + strlen("Prometheus metrics at http://0.0.0.0:")) : -1;
        free(s);
        if (port > 0) return port;
        cl_sleep_ms(50);
    }
    return -1;
}

static struct {
    cluster_t c;
    char job[64];
    int jm_prom, tm_prom;
    int nv;
    char vid[8][80];
    char vname[8][256];
    int par[8];
    bool up;
    int pport;          /* the Prometheus server's */
    pid_t prom_pid;
    bool prom_missing;
    bool prom_running_seen; /* a numRecordsIn > 0 scraped while the job ran */
} G;

static json_t *prom_query(int port, const char *q);

/* Starts Prometheus scraping the JobManager and the TaskManager. */
static void start_prometheus(void) {
    const char *bin = "/usr/bin/prometheus";
    if (access(bin, X_OK) != 0) {
        G.prom_missing = true;
        return;
    }
    G.pport = cl_free_port();
    char cfg[1300], data[1300], listen[64];
    snprintf(cfg, sizeof cfg, "%s/prometheus.yml", G.c.dir);
    snprintf(data, sizeof data, "%s/prom-data", G.c.dir);
    snprintf(listen, sizeof listen, "--web.listen-address=127.0.0.1:%d", G.pport);
    FILE *f = fopen(cfg, "w");
    if (!f) return;
    fprintf(f,
            "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n"
            "scrape_configs:\n  - job_name: sluice\n    static_configs:\n"
            "      - targets: ['127.0.0.1:%d', '127.0.0.1:%d']\n",
            G.jm_prom, G.tm_prom);
    fclose(f);
    char cfgarg[1400], dataarg[1400], log[1300];
    snprintf(cfgarg, sizeof cfgarg, "--config.file=%s", cfg);
    snprintf(dataarg, sizeof dataarg, "--storage.tsdb.path=%s", data);
    snprintf(log, sizeof log, "%s/prometheus.log", G.c.dir);
    char *argv[] = {(char *)bin, cfgarg, dataarg, listen, NULL};
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd >= 0) {
            dup2(fd, 1);
            dup2(fd, 2);
        }
        execv(bin, argv);
        _exit(127);
    }
    if (pid > 0) {
        G.prom_pid = pid;
        cl_pids[cl_npids++] = pid; /* killed when the test binary exits */
    }
}

/* While the job runs: does Prometheus see records flowing yet? */
static void poll_prometheus(void) {
    if (!G.prom_pid || G.prom_running_seen) return;
    json_t *r = prom_query(G.pport, "flink_taskmanager_job_task_operator_numRecordsIn");
    for (size_t i = 0; r && i < json_array_size(r); i++)
        if (atof(json_string_value(json_array_get(json_object_get(json_array_get(r, i), "value"), 1))) > 0)
            G.prom_running_seen = true;
    json_decref(r);
}

static bool cluster_up(void) {
    if (G.up) return true;
    cl_cluster_init(&G.c, "metrics");
    int base = cl_free_port();
    start_jm(&G.c, base);
    start_tm(&G.c, cl_free_port());
    if (!cl_wait_tms(&G.c, 1, 20000)) return false;
    G.jm_prom = prom_port_in_log(G.c.jm.log, 5000);
    G.tm_prom = prom_port_in_log(G.c.tm[0].log, 5000);
    if (G.jm_prom <= 0 || G.tm_prom <= 0) {
        fprintf(stderr, "  no Prometheus port in the logs (jm %d, tm %d)\n", G.jm_prom, G.tm_prom);
        return false;
    }
    start_prometheus();
    char args[3000];
    snprintf(args, sizeof args, "%s/out %s/ckpt %d --p=2 --rate=%d", G.c.dir, G.c.dir, EVENTS, RATE);
    cl_submit_job(&G.c, SLUICE_CLUSTER_JOB, "", args, G.job, sizeof G.job);
    char st[32];
    if (!G.job[0] || !cl_wait_state(&G.c, G.job, "RUNNING", 20000, st, sizeof st) || !cl_wait_deployed(&G.c, 1, 20000))
        return false;
    json_t *j = get_json(G.c.rest_port, "/jobs/%s", G.job);
    json_t *vs = json_object_get(j, "vertices");
    G.nv = (int)json_array_size(vs);
    for (int i = 0; i < G.nv && i < 8; i++) {
        json_t *v = json_array_get(vs, (size_t)i);
        snprintf(G.vid[i], sizeof G.vid[i], "%s", json_string_value(json_object_get(v, "id")));
        snprintf(G.vname[i], sizeof G.vname[i], "%s", json_string_value(json_object_get(v, "name")));
        G.par[i] = (int)json_integer_value(json_object_get(v, "parallelism"));
    }
    json_decref(j);
    G.up = G.nv >= 2;
    return G.up;
}

TEST(rest_paths) {
    if (!cluster_up()) {
        cl_dump_logs(&G.c);
        CHECK(!"the cluster did not come up");
    }
    /* while running: shapes and plausible rates */
    bool rates = false, grew = false;
    double first_in = -1;
    int64_t end = cl_now_ms() + 30000;
    while (cl_now_ms() < end && !(rates && grew && (G.prom_running_seen || !G.prom_pid))) {
        for (int v = 0; v < G.nv; v++) {
            json_t *d = get_json(G.c.rest_port, "/jobs/%s/vertices/%s", G.job, G.vid[v]);
            CHECK(schema_ok(d, VERTEX_DETAIL, "vertex detail"));
            CHECK_STR(json_string_value(json_object_get(d, "id")), G.vid[v]);
            json_t *subs = json_object_get(d, "subtasks");
            CHECK_EQ(json_array_size(subs), G.par[v]);
            for (size_t s = 0; s < json_array_size(subs); s++) {
                json_t *st = json_array_get(subs, s);
                CHECK(schema_ok(st, VERTEX_SUBTASK, "vertex subtask"));
                CHECK(schema_ok(json_object_get(st, "metrics"), IO_METRICS, "subtask metrics"));
            }
            json_decref(d);

            json_t *bp = get_json(G.c.rest_port, "/jobs/%s/vertices/%s/backpressure", G.job, G.vid[v]);
            CHECK(schema_ok(bp, BACKPRESSURE, "backpressure"));
            const char *lvl = json_string_value(json_object_get(bp, "backpressureLevel"));
            CHECK(!strcmp(lvl, "ok") || !strcmp(lvl, "low") || !strcmp(lvl, "high"));
            for (size_t s = 0; s < json_array_size(json_object_get(bp, "subtasks")); s++) {
                json_t *st = json_array_get(json_object_get(bp, "subtasks"), s);
                CHECK(schema_ok(st, BP_SUBTASK, "backpressure subtask"));
                double r = json_number_value(json_object_get(st, "ratio"));
                CHECK(r >= 0 && r <= 1);
            }
            json_decref(bp);

            json_t *ids = get_json(G.c.rest_port, "/jobs/%s/vertices/%s/metrics", G.job, G.vid[v]);
            CHECK(json_is_array(ids));
            for (size_t i = 0; i < json_array_size(ids); i++) CHECK(schema_ok(json_array_get(ids, i), METRIC_ID, "id"));
            json_decref(ids);

            json_t *vals = get_json(G.c.rest_port,
                                    "/jobs/%s/vertices/%s/metrics?get=0.numRecordsIn,0.busyTimeMsPerSecond,"
                                    "0.idleTimeMsPerSecond,0.backPressuredTimeMsPerSecond,nosuch",
                                    G.job, G.vid[v]);
            CHECK(json_is_array(vals));
            for (size_t i = 0; i < json_array_size(vals); i++)
                CHECK(schema_ok(json_array_get(vals, i), METRIC_VALUE, "metric value"));
            CHECK(isnan(metric_value(vals, "nosuch")));
            double busy = metric_value(vals, "0.busyTimeMsPerSecond"), idle = metric_value(vals, "0.idleTimeMsPerSecond"),
                   bpv = metric_value(vals, "0.backPressuredTimeMsPerSecond"), in = metric_value(vals, "0.numRecordsIn");
            if (!isnan(busy)) {
                CHECK(fabs(busy + idle + bpv - 1000) < 60);
                rates = true;
            }
            if (v == 1 && !isnan(in)) {
                if (first_in < 0 && in > 0) first_in = in;
                else if (first_in > 0 && in > first_in) grew = true;
            }
            json_decref(vals);

            json_t *wm = get_json(G.c.rest_port, "/jobs/%s/vertices/%s/watermarks", G.job, G.vid[v]);
            CHECK(json_is_array(wm));
            for (size_t i = 0; i < json_array_size(wm); i++) CHECK(schema_ok(json_array_get(wm, i), METRIC_VALUE, "wm"));
            json_decref(wm);
        }
        poll_prometheus();
        cl_sleep_ms(300);
    }
    CHECK(rates);
    CHECK(grew);

    json_t *jm = get_json(G.c.rest_port, "/jobs/%s/metrics", G.job);
    CHECK_EQ(json_array_size(jm), 7);
    json_decref(jm);
    jm = get_json(G.c.rest_port,
                  "/jobs/%s/metrics?get=numRestarts,uptime,numberOfCompletedCheckpoints,lastCheckpointDuration", G.job);
    CHECK_EQ(json_array_size(jm), 4);
    CHECK_EQ(metric_value(jm, "numRestarts"), 0);
    CHECK(metric_value(jm, "uptime") > 0);
    json_decref(jm);

    /* the end: final figures, consistent along the pipeline */
    char st[32];
    CHECK(cl_wait_state(&G.c, G.job, "FINISHED", 60000, st, sizeof st) || !strcmp(st, "FINISHED"));
    json_t *j = get_json(G.c.rest_port, "/jobs/%s", G.job);
    json_t *vs = json_object_get(j, "vertices");
    int64_t prev_out = -1;
    for (size_t i = 0; i < json_array_size(vs); i++) {
        json_t *m = json_object_get(json_array_get(vs, i), "metrics");
        CHECK(schema_ok(m, IO_METRICS, "job vertex metrics"));
        int64_t rin = json_integer_value(json_object_get(m, "read-records"));
        int64_t rout = json_integer_value(json_object_get(m, "write-records"));
        if (i == 0) CHECK_EQ(rout, EVENTS); /* the source */
        else CHECK_EQ(rin, prev_out);       /* a pipeline without filters: what left upstream came in */
        prev_out = rout;
    }
    json_decref(j);
}

/* Prometheus's HTTP API: the value of each series of a query, by its
 * operator_name/subtask_index labels (or job_id). */
static json_t *prom_query(int port, const char *q) {
    json_t *r = get_json(port, "/api/v1/query?query=%s", q);
    if (!r || !json_is_string(json_object_get(r, "status")) || strcmp(json_string_value(json_object_get(r, "status")), "success")) {
        json_decref(r);
        return NULL;
    }
    json_t *res = json_incref(json_object_get(json_object_get(r, "data"), "result"));
    json_decref(r);
    return res;
}

/* Compares Prometheus's samples of `family` with REST's
 * "<subtask>.<operator>.<suffix>" of every vertex (a sample REST lacks
 * counts as different); *compared: how many. */
static void prom_vs_rest(int pport, const char *family, const char *suffix, int *compared) {
    json_t *r = prom_query(pport, family);
    CHECK(r);
    for (int v = 0; v < G.nv; v++) {
        for (size_t i = 0; i < json_array_size(r); i++) {
            json_t *m = json_object_get(json_array_get(r, i), "metric");
            if (strcmp(json_string_value(json_object_get(m, "task_name")), G.vname[v])) continue;
            CHECK_STR(json_string_value(json_object_get(m, "job_name")), "cluster-job");
            CHECK_STR(json_string_value(json_object_get(m, "tm_id")), "tm-1");
            char id[400], op[300];
            snprintf(op, sizeof op, "%s", json_string_value(json_object_get(m, "operator_name")));
            for (char *c = op; *c; c++) /* REST's ids: '.' and ',' become '_' */
                if (*c == '.' || *c == ',') *c = '_';
            snprintf(id, sizeof id, "%s.%s.%s", json_string_value(json_object_get(m, "subtask_index")), op, suffix);
            json_t *q = get_json(G.c.rest_port, "/jobs/%s/vertices/%s/metrics?get=%s", G.job, G.vid[v], id);
            double rest = metric_value(q, id);
            json_decref(q);
            double prom = atof(json_string_value(json_array_get(json_object_get(json_array_get(r, i), "value"), 1)));
            if (rest != prom) fprintf(stderr, "  %s: REST %.0f, Prometheus %.0f\n", id, rest, prom);
            CHECK(rest == prom);
            (*compared)++;
        }
    }
    json_decref(r);
}

TEST(prometheus) {
    if (!cluster_up()) CHECK(!"the cluster did not come up");
    if (G.prom_missing) {
        fprintf(stderr, "  /usr/bin/prometheus is not installed: apt-get install -y prometheus (scripts/install-deps.sh)\n");
        CHECK(!"prometheus is not installed");
    }
    CHECK(G.prom_pid > 0);
    int pport = G.pport;
    pid_t pid = G.prom_pid;
    poll_prometheus();
    char st[32];
    CHECK(cl_wait_state(&G.c, G.job, "FINISHED", 60000, st, sizeof st) || !strcmp(st, "FINISHED"));
    cl_sleep_ms(2500); /* two scrapes after the end: the values no longer move */

    /* every operator of every subtask: Prometheus == REST */
    int compared = 0, compared_mem = 0;
    prom_vs_rest(pport, "flink_taskmanager_job_task_operator_numRecordsIn", "numRecordsIn", &compared);
    /* the keyed operators' state memory (the window: heap state) */
    prom_vs_rest(pport, "flink_taskmanager_job_task_operator_stateMemoryBytes", "stateMemoryBytes", &compared_mem);
    CHECK(compared_mem >= 1);
    CHECK(compared >= 3);
    CHECK(G.prom_running_seen);

    /* the JobManager's job metrics */
    json_t *r = prom_query(pport, "flink_jobmanager_job_numberOfCompletedCheckpoints");
    CHECK(r && json_array_size(r) == 1);
    CHECK_STR(json_string_value(json_object_get(json_object_get(json_array_get(r, 0), "metric"), "job_id")), G.job);
    double prom_done = atof(json_string_value(json_array_get(json_object_get(json_array_get(r, 0), "value"), 1)));
    json_decref(r);
    json_t *ck = get_json(G.c.rest_port, "/jobs/%s/checkpoints", G.job);
    double rest_done = (double)json_integer_value(json_object_get(json_object_get(ck, "counts"), "completed"));
    json_decref(ck);
    CHECK(prom_done == rest_done && rest_done > 0);
    kill(pid, SIGTERM);
    waitpid(pid, NULL, 0);
    for (int i = 0; i < cl_npids; i++)
        if (cl_pids[i] == pid) cl_pids[i--] = cl_pids[--cl_npids];
}

/* /taskmanagers/:tmid/metrics: the TaskManager process's own figures,
 * against what /proc says about that process. */
static long long proc_field(pid_t pid, const char *file, const char *key) {
    char path[64], line[256];
    snprintf(path, sizeof path, "/proc/%d/%s", (int)pid, file);
    FILE *f = fopen(path, "r");
    long long v = -1;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, key, strlen(key))) v = atoll(line + strlen(key));
    if (f) fclose(f);
    return v;
}

TEST(taskmanager_metrics) {
    CHECK(G.up);
    json_t *tms = get_json(G.c.rest_port, "/taskmanagers");
    const char *id = json_string_value(json_object_get(json_array_get(json_object_get(tms, "taskmanagers"), 0), "id"));
    CHECK(id != NULL);
    char tm[128];
    snprintf(tm, sizeof tm, "%s", id ? id : "?");
    int slots = (int)json_integer_value(
        json_object_get(json_array_get(json_object_get(tms, "taskmanagers"), 0), "slotsNumber"));
    json_decref(tms);
    json_t *ids = get_json(G.c.rest_port, "/taskmanagers/%s/metrics", tm);
    CHECK(json_is_array(ids));
    const char *want[] = {"Status.ProcessTree.Memory.RSS", "Status.ProcessTree.CPU.Time",
                          "Status.ProcessTree.Threads.Count", "Status.TaskSlots.Total", "Status.TaskSlots.Available"};
    for (size_t w = 0; w < sizeof want / sizeof want[0]; w++) {
        bool found = false;
        for (size_t i = 0; i < json_array_size(ids); i++)
            found = found || !strcmp(json_string_value(json_object_get(json_array_get(ids, i), "id")), want[w]);
        if (!found) fprintf(stderr, "  no %s\n", want[w]);
        CHECK(found);
    }
    json_decref(ids);
    cl_sleep_ms(1500); /* a heartbeat (200 ms) after the figures below */
    json_t *v = get_json(G.c.rest_port,
                         "/taskmanagers/%s/metrics?get=Status.ProcessTree.Memory.RSS,Status.ProcessTree.CPU.Time,"
                         "Status.ProcessTree.Threads.Count,Status.ProcessTree.CPU.Usage,Status.TaskSlots.Total",
                         tm);
    double rss = metric_value(v, "Status.ProcessTree.Memory.RSS"), cpu = metric_value(v, "Status.ProcessTree.CPU.Time");
    double thr = metric_value(v, "Status.ProcessTree.Threads.Count"), use = metric_value(v, "Status.ProcessTree.CPU.Usage");
    long long prss = proc_field(G.c.tm[0].pid, "status", "VmRSS:") * 1024, pthr = proc_field(G.c.tm[0].pid, "status", "Threads:");
    fprintf(stderr, "  %s: RSS %.0f (/proc: %lld), CPU %.0f ms, %.1f%%, %.0f threads (/proc: %lld)\n", tm, rss, prss,
            cpu, use, thr, pthr);
    CHECK(rss > 0.5 * (double)prss && rss < 2.0 * (double)prss);
    CHECK(cpu > 0);
    CHECK(fabs(thr - (double)pthr) <= 4);
    CHECK(use >= 0 && use <= 100.0 * 64);
    CHECK_EQ((int)metric_value(v, "Status.TaskSlots.Total"), slots);
    CHECK(slots >= 1);
    json_decref(v);
    char *nf = cl_http_get(G.c.rest_port, "/taskmanagers/no-such-tm/metrics");
    CHECK(nf && strstr(nf, "does not exist"));
    free(nf);
}

int main(void) {
    RUN(rest_paths);
    RUN(taskmanager_metrics);
    RUN(prometheus);
    cl_cluster_stop(&G.c);
    TEST_MAIN_END();
}
