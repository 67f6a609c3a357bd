/*
 * cluster_util.h — a cluster of real processes for tests: `sluice
 * jobmanager` and `sluice taskmanager`s on loopback (or in a network
 * namespace), jobs submitted with `sluice run`, their state read from the
 * REST API, logs per process.  Used by test_cluster.c and test_fraud_e2e.c.
 */
#ifndef SL_TEST_CLUSTER_UTIL_H
#define SL_TEST_CLUSTER_UTIL_H

#include <errno.h>
#include <jansson.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "test.h"

#define MAX_PROCS 16

typedef struct proc {
    pid_t pid;
    char log[1200];
    char id[32];
} proc_t;

typedef struct cluster {
    char dir[1024];
    int rpc_port, rest_port;
    proc_t jm;
    proc_t tm[MAX_PROCS];
    int ntm;
    const char *hb_interval, *hb_timeout, *slot_timeout, *secret;
    bool evenly;
    const char *jm_host;  /* jobmanager.rpc.address, default 127.0.0.1 */
    const char *jm_extra; /* one more key=value for the JobManager (-D), or NULL */
} cluster_t;

static inline int64_t cl_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline void cl_sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static inline int cl_free_port(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof a;
    if (bind(fd, (struct sockaddr *)&a, sizeof a) < 0 || getsockname(fd, (struct sockaddr *)&a, &l) < 0) abort();
    close(fd);
    return ntohs(a.sin_port);
}

static const char *cl_g_netns __attribute__((unused)); /* the next process starts in this network namespace */
/* The next process starts in a mount namespace of its own where this
 * directory is an empty tmpfs (what another host would see: not the
 * files there) */
static const char *cl_g_hide __attribute__((unused));

/* Starts `sluice ARGS...` with stderr (and stdout) to log (in cl_g_netns
 * when set: `ip netns exec NS sluice ARGS...`). */
/* Every process a test started, killed when the test binary exits, so that
 * a test that returns early on a failed CHECK leaves none behind. */
static pid_t cl_pids[256] __attribute__((unused));
static int cl_npids __attribute__((unused));
static inline void cl_kill_all(void) {
    for (int i = 0; i < cl_npids; i++) {
        kill(cl_pids[i], SIGCONT);
        if (kill(cl_pids[i], SIGKILL) == 0) waitpid(cl_pids[i], NULL, 0);
    }
    cl_npids = 0;
}

static inline pid_t cl_spawn(const char *log, char *const argv[]) {
    static bool at_exit;
    if (!at_exit) at_exit = atexit(cl_kill_all) == 0;
    pid_t pid = fork();
    if (pid == 0) {
        FILE *f = freopen(log, "a", stderr);
        if (!f || dup2(fileno(stderr), 1) < 0) _exit(126);
        setenv("TMPDIR", sl_test_tmpdir(), 1); /* their scratch files (artifacts, RocksDB) stay in the test's */
        if (cl_g_netns) {
            char *nargv[40] = {"ip", "netns", "exec", (char *)cl_g_netns, SLUICE_BIN};
            int k = 5;
            for (int i = 1; argv[i] && k < 39; i++) nargv[k++] = argv[i];
            nargv[k] = NULL;
            execvp("ip", nargv);
            _exit(127);
        }
        if (cl_g_hide) {
            char *nargv[48] = {"unshare", "-m", "--propagation", "private", "sh", "-c",
                               "mount -t tmpfs tmpfs \"$1\" && shift && exec \"$@\"", "sh", (char *)cl_g_hide,
                               SLUICE_BIN};
            int k = 10;
            for (int i = 1; argv[i] && k < 47; i++) nargv[k++] = argv[i];
            nargv[k] = NULL;
            execvp("unshare", nargv);
            _exit(127);
        }
        execv(SLUICE_BIN, argv);
        _exit(127);
    }
    if (pid > 0 && cl_npids < 256) cl_pids[cl_npids++] = pid;
    return pid;
}

static inline char *cl_slurp(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return strdup("");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = calloc((size_t)n + 1, 1);
    if (n > 0 && fread(s, 1, (size_t)n, f) != (size_t)n) s[0] = 0;
    fclose(f);
    return s;
}

static inline int cl_count_in(const char *path, const char *needle) {
    char *s = cl_slurp(path);
    int n = 0;
    for (const char *p = s; (p = strstr(p, needle)); p++) n++;
    free(s);
    return n;
}

/* GET path from the REST API: the body (malloc'ed) or NULL. */
static inline char *cl_http_get(int port, const char *path) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return NULL;
    }
    char req[512];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return NULL;
    }
    sl_buf_t b = {0};
    char chunk[4096];
    ssize_t r;
    while ((r = read(fd, chunk, sizeof chunk)) > 0) sl_buf_append(&b, chunk, (size_t)r);
    close(fd);
    sl_buf_append(&b, "", 1);
    char *body = strstr((char *)b.p, "\r\n\r\n");
    char *out = body ? strdup(body + 4) : NULL;
    sl_buf_free(&b);
    return out;
}

static inline int cl_registered_tms(cluster_t *c) {
    char *s = cl_http_get(c->rest_port, "/taskmanagers");
    if (!s) return -1;
    json_t *j = json_loads(s, 0, NULL);
    free(s);
    int n = j ? (int)json_array_size(json_object_get(j, "taskmanagers")) : -1;
    json_decref(j);
    return n;
}

static inline void cl_job_state(cluster_t *c, const char *id, char *state, size_t cap) {
    char path[200];
    snprintf(path, sizeof path, "/jobs/%s", id);
    char *s = cl_http_get(c->rest_port, path);
    json_t *j = s ? json_loads(s, 0, NULL) : NULL;
    const char *st = j ? json_string_value(json_object_get(j, "state")) : NULL;
    snprintf(state, cap, "%s", st ? st : "?");
    json_decref(j);
    free(s);
}

static inline void cl_start_jm(cluster_t *c) {
    char log[sizeof c->jm.log];
    snprintf(log, sizeof log, "%s/jobmanager.log", c->dir);
    memcpy(c->jm.log, log, sizeof log);
    char rpc[64], rest[64], hbi[64], hbt[64], slot[64], sec[128];
    snprintf(rpc, sizeof rpc, "jobmanager.rpc.port=%d", c->rpc_port);
    snprintf(rest, sizeof rest, "rest.port=%d", c->rest_port);
    snprintf(hbi, sizeof hbi, "heartbeat.interval=%s", c->hb_interval);
    snprintf(hbt, sizeof hbt, "heartbeat.timeout=%s", c->hb_timeout);
    snprintf(slot, sizeof slot, "slot.request.timeout=%s", c->slot_timeout);
    snprintf(sec, sizeof sec, "security.internal.secret=%s", c->secret);
    char even[64], addr[128];
    snprintf(even, sizeof even, "cluster.evenly-spread-out-slots=%s", c->evenly ? "true" : "false");
    snprintf(addr, sizeof addr, "jobmanager.rpc.address=%s", c->jm_host ? c->jm_host : "127.0.0.1");
    char *argv[] = {"sluice", "jobmanager", "-D", rpc, "-D", rest, "-D", hbi,  "-D", hbt, "-D",
                    slot,     "-D",         sec,  "-D", even, "-D", addr, NULL, NULL, NULL};
    if (c->jm_extra) {
        argv[18] = "-D";
        argv[19] = (char *)c->jm_extra;
    }
    c->jm.pid = cl_spawn(c->jm.log, argv);
}

static const char *cl_g_tm_host __attribute__((unused)); /* taskmanager.host of the next TaskManager (NULL: 127.0.0.1) */

/* Starts TaskManager tm-<n> with `slots` slots; extra_env "K=V" or NULL. */
static inline proc_t *cl_start_tm(cluster_t *c, int n, int slots, const char *secret, const char *extra_env) {
    proc_t *p = &c->tm[c->ntm++];
    snprintf(p->id, sizeof p->id, "tm-%d", n);
    char log[sizeof p->log];
    snprintf(log, sizeof log, "%s/tm-%d.log", c->dir, n);
    memcpy(p->log, log, sizeof log);
    char rpc[64], sl[64], hbi[64], hbt[64], sec[128];
    snprintf(rpc, sizeof rpc, "jobmanager.rpc.port=%d", c->rpc_port);
    snprintf(sl, sizeof sl, "taskmanager.numberOfTaskSlots=%d", slots);
    snprintf(hbi, sizeof hbi, "heartbeat.interval=%s", c->hb_interval);
    snprintf(hbt, sizeof hbt, "heartbeat.timeout=%s", c->hb_timeout);
    snprintf(sec, sizeof sec, "security.internal.secret=%s", secret ? secret : c->secret);
    char jmh[128], tmh[128];
    snprintf(jmh, sizeof jmh, "jobmanager.rpc.address=%s", c->jm_host ? c->jm_host : "127.0.0.1");
    snprintf(tmh, sizeof tmh, "taskmanager.host=%s", cl_g_tm_host ? cl_g_tm_host : "127.0.0.1");
    char *argv[] = {"sluice", "taskmanager", "--id", p->id, "-D", rpc, "-D", sl,  "-D", hbi, "-D",
                    hbt,      "-D",          sec,   "-D",  jmh, "-D", tmh, NULL};
    if (extra_env) putenv((char *)extra_env);
    p->pid = cl_spawn(p->log, argv);
    if (extra_env) {
        char name[64];
        snprintf(name, sizeof name, "%.*s", (int)(strchr(extra_env, '=') - extra_env), extra_env);
        unsetenv(name);
    }
    return p;
}

static inline bool cl_wait_tms(cluster_t *c, int n, int ms) {
    int64_t end = cl_now_ms() + ms;
    while (cl_now_ms() < end) {
        if (cl_registered_tms(c) == n) return true;
        cl_sleep_ms(50);
    }
    fprintf(stderr, "  %d TaskManagers registered, expected %d\n", cl_registered_tms(c), n);
    return false;
}

static inline void cl_cluster_init(cluster_t *c, const char *name) {
    memset(c, 0, sizeof *c);
    snprintf(c->dir, sizeof c->dir, "%s/cluster-%s", sl_test_tmpdir(), name);
    char cmd[2200];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", c->dir, c->dir);
    if (system(cmd) != 0) abort();
    c->rpc_port = cl_free_port();
    c->rest_port = cl_free_port();
    c->hb_interval = "200 ms";
    c->hb_timeout = "2 s";
    c->slot_timeout = "20 s";
    c->secret = "test-secret";
}

static inline void cl_stop(proc_t *p) {
    if (p->pid <= 0) return;
    kill(p->pid, SIGCONT);
    kill(p->pid, SIGKILL);
    waitpid(p->pid, NULL, 0);
    for (int i = 0; i < cl_npids; i++) /* reaped: never signal its pid again */
        if (cl_pids[i] == p->pid) cl_pids[i--] = cl_pids[--cl_npids];
    p->pid = 0;
}

static inline void cl_cluster_stop(cluster_t *c) {
    for (int i = 0; i < c->ntm; i++) cl_stop(&c->tm[i]);
    cl_stop(&c->jm);
}

/* Runs a `sluice run -d ...` command line: the job id it prints into id
 * (at most 63 characters; "" when the submission failed); its other lines
 * go to stderr. */
static inline void cl_run_for_job_id(const char *cmd, char *id) {
    char line[512];
    FILE *f = popen(cmd, "r");
    id[0] = 0;
    while (f && fgets(line, sizeof line, f)) {
        const char *at = strstr(line, "JobID ");
        if (at) sscanf(at + 6, "%63s", id);
        else fprintf(stderr, "  sluice run: %s", line);
    }
    if (f) pclose(f);
}

/* `sluice run -d OPTS ... cluster_job.so ARGS`: the job id, or "" */
static inline void cl_submit_job(cluster_t *c, const char *job, const char *opts, const char *args, char *id, size_t cap) {
    char cmd[16384];
    snprintf(cmd, sizeof cmd, "%s run -d %s -m 127.0.0.1:%d %s %s 2>&1", SLUICE_BIN, opts, c->rest_port,
             job, args);
    cl_run_for_job_id(cmd, id);
    (void)cap;
}



/* A wait for state `want` seeing `state`: 1 reached, -1 never will (another
 * terminal state), 0 go on. */
static inline int cl_state_reached(const char *state, const char *want) {
    if (!strcmp(state, want)) return 1;
    return !strcmp(state, "FAILED") || !strcmp(state, "CANCELED") || !strcmp(state, "FINISHED") ? -1 : 0;
}

static inline bool cl_wait_state(cluster_t *c, const char *id, const char *want, int ms, char *state, size_t cap) {
    int64_t end = cl_now_ms() + ms;
    while (cl_now_ms() < end) {
        cl_job_state(c, id, state, cap);
        int r = cl_state_reached(state, want);
        if (r) return r > 0;
        cl_sleep_ms(100);
    }
    return false;
}

/* Until at least n TaskManagers' logs say they deployed (a job master is
 * RUNNING once it sent its DEPLOYs; a slow TaskManager may still be
 * building the job). */
static inline bool cl_wait_deployed(cluster_t *c, int n, int ms) {
    int64_t end = cl_now_ms() + ms;
    for (;;) {
        int k = 0;
        for (int i = 0; i < c->ntm; i++) k += c->tm[i].pid > 0 && cl_count_in(c->tm[i].log, "deploying job") > 0;
        if (k >= n) return true;
        if (cl_now_ms() >= end) return false;
        cl_sleep_ms(50);
    }
}

/* The S3Proxy of the ctest fixture `s3` (scripts/s3proxy.sh writes its
 * endpoint to SLUICE_S3_ENDPOINT_FILE): its endpoint and bucket, and the
 * AWS variables pointed at it, so that every process started from here
 * inherits them.  False, saying why, without it. */
static inline bool cl_s3_setup(char *endpoint, size_t cap, const char **bucket) {
    const char *path = getenv("SLUICE_S3_ENDPOINT_FILE");
    FILE *f = path ? fopen(path, "r") : NULL;
    bool ok = f && fgets(endpoint, (int)cap, f);
    if (f) fclose(f);
    if (!ok) {
        fprintf(stderr, "  no S3 endpoint in SLUICE_S3_ENDPOINT_FILE (%s): the ctest fixture s3 starts S3Proxy\n",
                path ? path : "unset");
        return false;
    }
    endpoint[strcspn(endpoint, "\r\n")] = 0;
    const char *b = getenv("SLUICE_S3_BUCKET"), *ak = getenv("SLUICE_S3_ACCESS_KEY"), *sk = getenv("SLUICE_S3_SECRET_KEY");
    *bucket = b && *b ? b : "sluice-test";
    setenv("AWS_ENDPOINT_URL", endpoint, 1);
    setenv("AWS_ACCESS_KEY_ID", ak && *ak ? ak : "sluice-access", 1);
    setenv("AWS_SECRET_ACCESS_KEY", sk && *sk ? sk : "sluice-secret", 1);
    setenv("AWS_REGION", "us-east-1", 1);
    return true;
}

static inline void cl_dump_logs(cluster_t *c) {
    char cmd[1400];
    snprintf(cmd, sizeof cmd, "tail -n 15 '%s'/*.log >&2", c->dir);
    if (system(cmd) != 0) fprintf(stderr, "  (no logs)\n");
}

#endif
