/*
 * test_rest.c — the JobManager's REST API (src/jobmanager/rest.c) and the
 * `sluice run / list / cancel` client commands (src/cli/client.c).
 *
 * The server runs with a fake provider written here: a table of random
 * jobs and taskmanagers.  Requests are made with raw sockets (so that
 * malformed and oversized requests can be sent byte for byte); every answer
 * is parsed with jansson and compared, field by field, with what the table
 * says Flink's shape must contain.  Uploads check the stored file name
 * against an independent sanitizer and the stored bytes against the sent
 * ones, including path traversal attempts.  200 random garbage requests
 * must leave the server answering.  The client part runs the built
 * `sluice` binary (SLUICE_BIN) against the same server and compares its
 * output with Flink's layout built here from the table.
 */
#include <arpa/inet.h>
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "common/common.h"
#include "jobmanager/rest.h"
#include "test.h"

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static int rnd(uint64_t *s, int n) { return (int)(rng_next(s) % (uint64_t)n); }
static uint64_t seed = 0x5eed1234;

/* ---- the fake JobManager -------------------------------------------------- */

#define MAXJOBS 64
typedef struct fjob {
    sl_rest_job_t j;
    sl_rest_vertex_t v[8];
    int nv;
    int polls_left; /* submitted by run: ends after this many detail requests */
    bool fail;      /* ... as FAILED instead of FINISHED */
} fjob_t;

typedef struct fake {
    pthread_mutex_t mu;
    fjob_t jobs[MAXJOBS];
    int njobs;
    sl_rest_taskmanager_t tms[6];
    int ntms;
    sl_rest_overview_t ov;
    /* the last run request, copied */
    int runs;
    char run_jar[256], run_entry[256], run_path[4096], run_savepoint[256];
    bool run_has_path, run_has_entry, run_has_savepoint, run_allow;
    char run_args[16][128];
    int run_nargs, run_parallelism;
} fake_t;
static fake_t F;

static const char *const JOB_STATES[] = {"CREATED", "RUNNING", "FINISHED", "FAILED", "CANCELED", "RESTARTING",
                                         "CANCELLING"};
static const char *const VERTEX_STATES[] = {"CREATED", "RUNNING", "FINISHED", "FAILED", "CANCELED", "DEPLOYING"};

static uint64_t server_seed = 77; /* the fake's own, used on the server's thread under F.mu */

static void rand_hex(char *out, int n, uint64_t *sd) {
    for (int i = 0; i < n; i++) out[i] = "0123456789abcdef"[rnd(sd, 16)];
    out[n] = 0;
}

static void rand_name(char *out, size_t cap) {
    static const char *const words[] = {"fraud", "Window", "Sink: out", "Source: \"tx\"", "map -> filter",
                                        "ü-Ümlaut", "a\\b", "x<y>&z", "tab\tname"};
    size_t o = 0;
    int n = 1 + rnd(&seed, 3);
    out[0] = 0;
    for (int i = 0; i < n && o + 40 < cap; i++)
        o += (size_t)snprintf(out + o, cap - o, "%s%s", i ? " " : "", words[rnd(&seed, 9)]);
}

static void fake_fill(void) {
    memset(&F, 0, sizeof F);
    pthread_mutex_init(&F.mu, NULL);
    int64_t now = sl_wall_ms();
    F.njobs = 6 + rnd(&seed, 10);
    for (int i = 0; i < F.njobs; i++) {
        fjob_t *f = &F.jobs[i];
        rand_hex(f->j.id, 32, &seed);
        rand_name(f->j.name, sizeof f->j.name);
        snprintf(f->j.state, sizeof f->j.state, "%s", JOB_STATES[rnd(&seed, 7)]);
        f->j.start_time = now - 1000 * (int64_t)(1 + rnd(&seed, 100000));
        bool ended = !strcmp(f->j.state, "FINISHED") || !strcmp(f->j.state, "FAILED") ||
                     !strcmp(f->j.state, "CANCELED");
        f->j.end_time = ended ? f->j.start_time + rnd(&seed, 50000) : -1;
        f->j.duration = rnd(&seed, 3) == 0 ? rnd(&seed, 9999) : -1;
        f->j.last_modification = rnd(&seed, 2) ? f->j.start_time + 7 : 0;
        f->j.tasks_total = rnd(&seed, 3) ? rnd(&seed, 20) : -1;
        f->j.tasks_running = f->j.tasks_total >= 0 && rnd(&seed, 2) ? rnd(&seed, 20) : -1;
        f->j.max_parallelism = rnd(&seed, 2) ? 128 : 0;
        f->nv = rnd(&seed, 6);
        for (int k = 0; k < f->nv; k++) {
            rand_hex(f->v[k].id, 32, &seed);
            rand_name(f->v[k].name, sizeof f->v[k].name);
            f->v[k].parallelism = 1 + rnd(&seed, 8);
            f->v[k].max_parallelism = rnd(&seed, 2) ? 128 : 0;
            snprintf(f->v[k].status, sizeof f->v[k].status, "%s", VERTEX_STATES[rnd(&seed, 6)]);
        }
    }
    F.ntms = 1 + rnd(&seed, 5);
    for (int i = 0; i < F.ntms; i++) {
        sl_rest_taskmanager_t *t = &F.tms[i];
        snprintf(t->id, sizeof t->id, "tm-%d-%s", i, "x");
        snprintf(t->path, sizeof t->path, "10.0.0.%d:%d", 1 + i, 6000 + rnd(&seed, 1000));
        t->data_port = 30000 + rnd(&seed, 20000);
        t->slots_number = 1 + rnd(&seed, 8);
        t->free_slots = rnd(&seed, t->slots_number + 1);
        t->time_since_last_heartbeat = now - rnd(&seed, 10000);
    }
    F.ov = (sl_rest_overview_t){F.ntms, 17, 5, 3, 4, 2, 1};
}

static int p_overview(void *ud, sl_rest_overview_t *out, char *err, size_t el) {
    pthread_mutex_lock(&F.mu);
    *out = F.ov;
    pthread_mutex_unlock(&F.mu);
    return 0;
}

static int p_list(void *ud, sl_rest_job_t **jobs, int *n, char *err, size_t el) {
    pthread_mutex_lock(&F.mu);
    *jobs = malloc(sizeof **jobs * (size_t)(F.njobs + 1));
    for (int i = 0; i < F.njobs; i++) (*jobs)[i] = F.jobs[i].j;
    *n = F.njobs;
    pthread_mutex_unlock(&F.mu);
    return 0;
}

static fjob_t *find_job(const char *id) {
    for (int i = 0; i < F.njobs; i++)
        if (!strcmp(F.jobs[i].j.id, id)) return &F.jobs[i];
    return NULL;
}

static int p_detail(void *ud, const char *id, sl_rest_job_t *out, char *err, size_t el) {
    pthread_mutex_lock(&F.mu);
    fjob_t *f = find_job(id);
    if (!f) {
        pthread_mutex_unlock(&F.mu);
        return sl_errf(err, el, SL_ENOTFOUND, "Job %s not found", id);
    }
    if (f->polls_left > 0 && --f->polls_left == 0) {
        snprintf(f->j.state, sizeof f->j.state, "%s", f->fail ? "FAILED" : "FINISHED");
        f->j.end_time = sl_wall_ms();
    }
    *out = f->j;
    out->vertices = malloc(sizeof *out->vertices * (size_t)(f->nv + 1));
    memcpy(out->vertices, f->v, sizeof *f->v * (size_t)f->nv);
    out->nvertices = f->nv;
    pthread_mutex_unlock(&F.mu);
    return 0;
}

static int p_tms(void *ud, sl_rest_taskmanager_t **tms, int *n, char *err, size_t el) {
    pthread_mutex_lock(&F.mu);
    *tms = malloc(sizeof **tms * (size_t)F.ntms);
    memcpy(*tms, F.tms, sizeof **tms * (size_t)F.ntms);
    *n = F.ntms;
    pthread_mutex_unlock(&F.mu);
    return 0;
}

static int p_run(void *ud, const sl_rest_run_t *rq, char *jobid, size_t cap, char *err, size_t el) {
    if (rq->entry_class && !strcmp(rq->entry_class, "no-such-job"))
        return sl_errf(err, el, SL_EINVAL, "no job named 'no-such-job'");
    pthread_mutex_lock(&F.mu);
    F.runs++;
    snprintf(F.run_jar, sizeof F.run_jar, "%s", rq->jar_id);
    F.run_has_path = rq->artifact_path != NULL;
    snprintf(F.run_path, sizeof F.run_path, "%s", rq->artifact_path ? rq->artifact_path : "");
    F.run_has_entry = rq->entry_class != NULL;
    snprintf(F.run_entry, sizeof F.run_entry, "%s", rq->entry_class ? rq->entry_class : "");
    F.run_has_savepoint = rq->savepoint_path != NULL;
    snprintf(F.run_savepoint, sizeof F.run_savepoint, "%s", rq->savepoint_path ? rq->savepoint_path : "");
    F.run_allow = rq->allow_non_restored_state;
    F.run_parallelism = rq->parallelism;
    F.run_nargs = rq->nargs;
    for (int i = 0; i < rq->nargs && i < 16; i++) snprintf(F.run_args[i], sizeof F.run_args[i], "%s", rq->args[i]);
    int rc = 0;
    if (F.njobs == MAXJOBS) rc = sl_errf(err, el, SL_EIO, "job table full");
    else {
        fjob_t *f = &F.jobs[F.njobs++];
        memset(f, 0, sizeof *f);
        rand_hex(f->j.id, 32, &server_seed);
        snprintf(f->j.name, sizeof f->j.name, "%s", rq->entry_class ? rq->entry_class : "job");
        snprintf(f->j.state, sizeof f->j.state, "RUNNING");
        f->j.start_time = sl_wall_ms();
        f->j.end_time = f->j.duration = -1;
        f->j.tasks_total = f->j.tasks_running = -1;
        f->polls_left = 3;
        f->fail = rq->entry_class && !strcmp(rq->entry_class, "failjob");
        snprintf(jobid, cap, "%s", f->j.id);
    }
    pthread_mutex_unlock(&F.mu);
    return rc;
}

static int p_cancel(void *ud, const char *id, char *err, size_t el) {
    pthread_mutex_lock(&F.mu);
    fjob_t *f = find_job(id);
    int rc = 0;
    if (!f) rc = sl_errf(err, el, SL_ENOTFOUND, "Job %s not found", id);
    else if (!strcmp(f->j.state, "FINISHED") || !strcmp(f->j.state, "FAILED") || !strcmp(f->j.state, "CANCELED"))
        rc = sl_errf(err, el, SL_ESTATE, "Job %s has already ended (%s)", id, f->j.state);
    else {
        snprintf(f->j.state, sizeof f->j.state, "CANCELED");
        f->j.end_time = sl_wall_ms();
        f->polls_left = 0;
    }
    pthread_mutex_unlock(&F.mu);
    return rc;
}

/* The fake is written under F.mu on the server's thread; the test reads it
 * between requests.  Taking the lock before each request and after each
 * answer orders the two threads' accesses (a socket does not, as far as
 * TSan knows). */
static void sync_fake(void) {
    pthread_mutex_lock(&F.mu);
    pthread_mutex_unlock(&F.mu);
}

/* ---- raw HTTP ------------------------------------------------------------- */

static int port;
static const char *TOKEN = "s3cret-token";
static char dir[1024];

typedef struct resp {
    int status;     /* 0: no answer (connection closed) */
    char *headers;
    char *body;
    json_t *json;
} resp_t;

static void resp_free(resp_t *r) {
    free(r->headers);
    free(r->body);
    if (r->json) json_decref(r->json);
    memset(r, 0, sizeof *r);
}

static int connect_server(void) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        close(fd);
        return -1;
    }
    return fd;
}

/* Reads the answer until the server closes (10 s at most). */
static void read_answer(int fd, resp_t *r) {
    sl_buf_t b = {0};
    char tmp[65536];
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 10000) <= 0) break;
        ssize_t n = recv(fd, tmp, sizeof tmp, 0);
        if (n <= 0) break;
        sl_buf_append(&b, tmp, (size_t)n);
    }
    sl_buf_append(&b, "", 1);
    const char *s = (const char *)b.p;
    const char *sep = strstr(s, "\r\n\r\n");
    if (!strncmp(s, "HTTP/1.", 7) && sep) {
        r->status = atoi(s + 9);
        r->headers = strndup(s, (size_t)(sep - s));
        r->body = strdup(sep + 4);
        r->json = json_loads(r->body, 0, NULL);
    }
    sl_buf_free(&b);
}

/* Sends bytes (a whole request) and reads the answer. */
static void raw(const void *req, size_t n, resp_t *r) {
    memset(r, 0, sizeof *r);
    sync_fake();
    int fd = connect_server();
    if (fd < 0) return;
    const char *p = req;
    size_t off = 0;
    while (off < n) {
        ssize_t w = send(fd, p + off, n - off, MSG_NOSIGNAL);
        if (w <= 0) break; /* the server answered early and closed */
        off += (size_t)w;
    }
    read_answer(fd, r);
    close(fd);
    sync_fake();
}

/* A request with Content-Length; extra: more header lines ("K: v\r\n"). */
static void req(const char *method, const char *path, const char *extra, const void *body, size_t blen, bool auth,
                resp_t *r) {
    sl_buf_t b = {0};
    char head[8192];
    int hn = snprintf(head, sizeof head,
                      "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s%s%s%sContent-Length: %zu\r\n\r\n",
                      method, path, auth ? "Authorization: Bearer " : "", auth ? TOKEN : "", auth ? "\r\n" : "",
                      extra ? extra : "", blen);
    sl_buf_append(&b, head, (size_t)hn);
    if (blen) sl_buf_append(&b, body, blen);
    raw(b.p, b.len, r);
    sl_buf_free(&b);
}

static void get(const char *path, resp_t *r) { req("GET", path, NULL, NULL, 0, true, r); }

/* The single message of Flink's {"errors": ["..."]}, or NULL. */
static const char *error_of(const resp_t *r) {
    json_t *e = r->json ? json_object_get(r->json, "errors") : NULL;
    if (!json_is_array(e) || json_array_size(e) != 1) return NULL;
    return json_string_value(json_array_get(e, 0));
}

/* A multipart/form-data body with one part per (field, filename, data). */
typedef struct part {
    const char *field, *filename; /* filename NULL: a plain field */
    const void *data;
    size_t len;
} part_t;

static void multipart(const char *boundary, const part_t *parts, int n, bool close_it, sl_buf_t *out) {
    char h[2048];
    for (int i = 0; i < n; i++) {
        int k = parts[i].filename
                    ? snprintf(h, sizeof h,
                               "--%s\r\nContent-Disposition: form-data; name=\"%s\"; filename=\"%s\"\r\n"
                               "Content-Type: application/octet-stream\r\n\r\n",
                               boundary, parts[i].field, parts[i].filename)
                    : snprintf(h, sizeof h, "--%s\r\nContent-Disposition: form-data; name=\"%s\"\r\n\r\n", boundary,
                               parts[i].field);
        sl_buf_append(out, h, (size_t)k);
        sl_buf_append(out, parts[i].data, parts[i].len);
        sl_buf_append(out, "\r\n", 2);
    }
    if (close_it) {
        int k = snprintf(h, sizeof h, "--%s--\r\n", boundary);
        sl_buf_append(out, h, (size_t)k);
    }
}

static void upload(const part_t *parts, int n, bool close_it, resp_t *r) {
    sl_buf_t body = {0};
    multipart("----sluiceBoundary7MA4YWxkTrZu0gW", parts, n, close_it, &body);
    req("POST", "/jars/upload", "Content-Type: multipart/form-data; boundary=----sluiceBoundary7MA4YWxkTrZu0gW\r\n",
        body.p, body.len, true, r);
    sl_buf_free(&body);
}

/* ---- the reference for stored names --------------------------------------- */

/* What the stored name's tail must be for a client's file name. */
static void ref_sanitize(const char *name, char *out) {
    const char *b = name;
    for (const char *p = name; *p; p++)
        if (*p == '/' || *p == '\\') b = p + 1;
    char t[512];
    size_t n = 0;
    for (; b[n] && n < 100; n++) {
        unsigned char c = (unsigned char)b[n];
        t[n] = (isalnum(c) && c < 128) || c == '.' || c == '-' || c == '_' ? (char)c : '_';
    }
    t[n] = 0;
    /* a dot may neither start the name nor be followed by another dot */
    for (size_t i = 0; i < n; i++)
        if (t[i] == '.' && (i == 0 || t[i + 1] == '.')) t[i] = '_';
    strcpy(out, n ? t : "artifact");
}

static bool stored_id_ok(const char *id) {
    size_t n = strlen(id);
    if (n < 34 || n > 133 || id[32] != '_' || strstr(id, "..") || strchr(id, '/')) return false;
    for (int i = 0; i < 32; i++)
        if (!strchr("0123456789abcdef", id[i])) return false;
    for (size_t i = 33; i < n; i++)
        if (!(isalnum((unsigned char)id[i]) || strchr("._-", id[i]))) return false;
    return id[33] != '.';
}

static bool file_equals(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "rb");
    if (!f) return false;
    char *buf = malloc(n + 1);
    size_t got = fread(buf, 1, n + 1, f);
    fclose(f);
    bool eq = got == n && memcmp(buf, data, n) == 0;
    free(buf);
    return eq;
}

/* Names of the files in the artifact directory, for "nothing else was written". */
static int count_files(const char *d, const char *prefix) {
    DIR *dd = opendir(d);
    int n = 0;
    struct dirent *e;
    while (dd && (e = readdir(dd)))
        if (e->d_name[0] != '.' || (prefix && !strncmp(e->d_name, prefix, strlen(prefix))))
            n += !prefix || !strncmp(e->d_name, prefix, strlen(prefix));
    if (dd) closedir(dd);
    return n;
}

/* ---- tests ---------------------------------------------------------------- */

TEST(auth_required) {
    const char *paths[] = {"/config", "/overview", "/jobs", "/nope", "/jars/upload"};
    for (int i = 0; i < 5; i++) {
        resp_t r;
        req("GET", paths[i], NULL, NULL, 0, false, &r);
        CHECK_EQ(r.status, 401);
        CHECK(error_of(&r) != NULL);
        CHECK_CONTAINS(r.headers, "WWW-Authenticate: Bearer");
        resp_free(&r);
        const char *wrong[] = {"Authorization: Bearer s3cret-toke\r\n", "Authorization: Bearer s3cret-token2\r\n",
                               "Authorization: s3cret-token\r\n", "Authorization: Basic czNjcmV0LXRva2Vu\r\n",
                               "Authorization: Bearer \r\n"};
        for (int k = 0; k < 5; k++) {
            req("GET", paths[i], wrong[k], NULL, 0, false, &r);
            CHECK_EQ(r.status, 401);
            resp_free(&r);
        }
    }
    resp_t r;
    get("/config", &r);
    CHECK_EQ(r.status, 200);
    resp_free(&r);
}

TEST(config_and_overview) {
    resp_t r;
    get("/config", &r);
    CHECK_EQ(r.status, 200);
    CHECK_CONTAINS(r.headers, "Content-Type: application/json");
    CHECK_STR(json_string_value(json_object_get(r.json, "flink-version")), "sluice 0.1.0");
    CHECK(json_is_integer(json_object_get(r.json, "refresh-interval")));
    CHECK(json_is_string(json_object_get(r.json, "timezone-name")));
    CHECK(json_is_integer(json_object_get(r.json, "timezone-offset")));
    json_t *feat = json_object_get(r.json, "features");
    CHECK(json_is_true(json_object_get(feat, "web-submit")));
    CHECK(json_is_true(json_object_get(feat, "web-cancel")));
    resp_free(&r);
    get("/v1/overview", &r); /* Flink's versioned prefix */
    CHECK_EQ(r.status, 200);
    resp_free(&r);
    get("/overview", &r);
    CHECK_EQ(r.status, 200);
    const struct { const char *k; int v; } want[] = {
        {"taskmanagers", F.ov.taskmanagers}, {"slots-total", F.ov.slots_total},
        {"slots-available", F.ov.slots_available}, {"jobs-running", F.ov.jobs_running},
        {"jobs-finished", F.ov.jobs_finished}, {"jobs-cancelled", F.ov.jobs_cancelled},
        {"jobs-failed", F.ov.jobs_failed}};
    for (int i = 0; i < 7; i++) {
        CHECK(json_is_integer(json_object_get(r.json, want[i].k)));
        CHECK_EQ(json_integer_value(json_object_get(r.json, want[i].k)), want[i].v);
    }
    CHECK_STR(json_string_value(json_object_get(r.json, "flink-version")), "sluice 0.1.0");
    CHECK_EQ(json_object_size(r.json), 8);
    resp_free(&r);
}

TEST(jobs_shapes) {
    resp_t r;
    get("/jobs", &r);
    CHECK_EQ(r.status, 200);
    json_t *jobs = json_object_get(r.json, "jobs");
    CHECK_EQ(json_array_size(jobs), F.njobs);
    for (int i = 0; i < F.njobs; i++) { /* each table job exactly once, in any order */
        int seen = 0;
        for (size_t k = 0; k < json_array_size(jobs); k++) {
            json_t *j = json_array_get(jobs, k);
            if (!strcmp(json_string_value(json_object_get(j, "id")), F.jobs[i].j.id)) {
                seen++;
                CHECK_STR(json_string_value(json_object_get(j, "status")), F.jobs[i].j.state);
                CHECK_EQ(json_object_size(j), 2);
            }
        }
        CHECK_EQ(seen, 1);
    }
    resp_free(&r);

    int64_t before = sl_wall_ms();
    get("/jobs/overview", &r);
    int64_t after = sl_wall_ms();
    CHECK_EQ(r.status, 200);
    jobs = json_object_get(r.json, "jobs");
    CHECK_EQ(json_array_size(jobs), F.njobs);
    for (size_t k = 0; k < json_array_size(jobs); k++) {
        json_t *j = json_array_get(jobs, k);
        fjob_t *f = find_job(json_string_value(json_object_get(j, "jid")));
        CHECK(f != NULL);
        CHECK_STR(json_string_value(json_object_get(j, "name")), f->j.name);
        CHECK_STR(json_string_value(json_object_get(j, "state")), f->j.state);
        CHECK_EQ(json_integer_value(json_object_get(j, "start-time")), f->j.start_time);
        CHECK_EQ(json_integer_value(json_object_get(j, "end-time")), f->j.end_time);
        CHECK_EQ(json_integer_value(json_object_get(j, "last-modification")),
                 f->j.last_modification ? f->j.last_modification : f->j.start_time);
        int64_t d = json_integer_value(json_object_get(j, "duration"));
        if (f->j.duration >= 0) CHECK_EQ(d, f->j.duration);
        else if (f->j.end_time >= 0) CHECK_EQ(d, f->j.end_time - f->j.start_time);
        else CHECK(d >= before - f->j.start_time && d <= after - f->j.start_time);
        json_t *t = json_object_get(j, "tasks");
        if (f->j.tasks_total < 0) CHECK(t == NULL);
        else {
            CHECK_EQ(json_integer_value(json_object_get(t, "total")), f->j.tasks_total);
            if (f->j.tasks_running >= 0) CHECK_EQ(json_integer_value(json_object_get(t, "running")), f->j.tasks_running);
            else CHECK(json_object_get(t, "running") == NULL);
        }
    }
    resp_free(&r);

    for (int i = 0; i < F.njobs; i++) {
        fjob_t *f = &F.jobs[i];
        char path[128];
        snprintf(path, sizeof path, "/jobs/%s", f->j.id);
        get(path, &r);
        CHECK_EQ(r.status, 200);
        json_t *o = r.json;
        CHECK_STR(json_string_value(json_object_get(o, "jid")), f->j.id);
        CHECK_STR(json_string_value(json_object_get(o, "name")), f->j.name);
        CHECK_STR(json_string_value(json_object_get(o, "state")), f->j.state);
        CHECK_EQ(json_integer_value(json_object_get(o, "start-time")), f->j.start_time);
        CHECK_EQ(json_integer_value(json_object_get(o, "end-time")), f->j.end_time);
        CHECK(json_is_integer(json_object_get(o, "duration")));
        CHECK(json_is_integer(json_object_get(o, "now")));
        CHECK_EQ(json_object_get(o, "maxParallelism") != NULL, f->j.max_parallelism > 0);
        json_t *vs = json_object_get(o, "vertices");
        CHECK_EQ(json_array_size(vs), f->nv);
        for (int k = 0; k < f->nv; k++) { /* in the provider's order */
            json_t *v = json_array_get(vs, (size_t)k);
            CHECK_STR(json_string_value(json_object_get(v, "id")), f->v[k].id);
            CHECK_STR(json_string_value(json_object_get(v, "name")), f->v[k].name);
            CHECK_EQ(json_integer_value(json_object_get(v, "parallelism")), f->v[k].parallelism);
            CHECK_STR(json_string_value(json_object_get(v, "status")), f->v[k].status);
            CHECK_EQ(json_object_get(v, "maxParallelism") != NULL, f->v[k].max_parallelism > 0);
        }
        /* status-counts: brute force over the vertices */
        json_t *sc = json_object_get(o, "status-counts");
        CHECK(json_is_object(sc));
        int distinct = 0;
        for (int k = 0; k < f->nv; k++) {
            int cnt = 0, first = 1;
            for (int m = 0; m < f->nv; m++) {
                if (!strcmp(f->v[m].status, f->v[k].status)) {
                    cnt++;
                    if (m < k) first = 0;
                }
            }
            distinct += first;
            CHECK_EQ(json_integer_value(json_object_get(sc, f->v[k].status)), cnt);
        }
        CHECK_EQ(json_object_size(sc), distinct);
        resp_free(&r);
    }
    const char *missing[] = {"/jobs/0123456789abcdef0123456789abcdef", "/jobs/..%2F..%2Fetc%2Fpasswd",
                             "/jobs/%2e%2e", "/jobs/a%00b"};
    for (int i = 0; i < 4; i++) {
        get(missing[i], &r);
        CHECK_EQ(r.status, 404);
        CHECK(error_of(&r) != NULL);
        resp_free(&r);
    }
}

TEST(taskmanagers_shape) {
    resp_t r;
    get("/taskmanagers", &r);
    CHECK_EQ(r.status, 200);
    json_t *a = json_object_get(r.json, "taskmanagers");
    CHECK_EQ(json_array_size(a), F.ntms);
    for (int i = 0; i < F.ntms; i++) {
        json_t *t = json_array_get(a, (size_t)i);
        CHECK_STR(json_string_value(json_object_get(t, "id")), F.tms[i].id);
        CHECK_STR(json_string_value(json_object_get(t, "path")), F.tms[i].path);
        CHECK_EQ(json_integer_value(json_object_get(t, "dataPort")), F.tms[i].data_port);
        CHECK_EQ(json_integer_value(json_object_get(t, "slotsNumber")), F.tms[i].slots_number);
        CHECK_EQ(json_integer_value(json_object_get(t, "freeSlots")), F.tms[i].free_slots);
        CHECK_EQ(json_integer_value(json_object_get(t, "timeSinceLastHeartbeat")), F.tms[i].time_since_last_heartbeat);
    }
    resp_free(&r);
}

static bool listed(const char *id, const char *name) {
    resp_t r;
    get("/jars", &r);
    bool found = false;
    json_t *files = json_object_get(r.json, "files");
    for (size_t i = 0; i < json_array_size(files); i++) {
        json_t *f = json_array_get(files, i);
        if (!strcmp(json_string_value(json_object_get(f, "id")), id)) {
            found = !name || !strcmp(json_string_value(json_object_get(f, "name")), name);
            found = found && json_is_integer(json_object_get(f, "uploaded")) &&
                    json_is_array(json_object_get(f, "entry"));
        }
    }
    resp_free(&r);
    return found;
}

/* Uploads, lists, runs, deletes; the client names include traversal tries. */
TEST(upload_run_delete) {
    const char *names[] = {"job.so", "../../etc/passwd", "..\\..\\windows\\x.so", "a/b/../c.so", ".hidden",
                           "we ird$name;rm -rf.so", "%2e%2e%2fx.so", "...", "..", "/", "libfraud.so.1",
                           "ünïcödé.so", NULL};
    char longname[400];
    memset(longname, 'L', 300);
    strcpy(longname + 300, ".so");
    names[12] = longname;
    for (int round = 0; round < 13; round++) {
        size_t n = 1 + (size_t)rnd(&seed, round % 3 ? 5000 : 300000);
        uint8_t *data = malloc(n);
        for (size_t i = 0; i < n; i++) data[i] = (uint8_t)rnd(&seed, 256);
        if (n > 40) memcpy(data + 10, "\r\n------sluiceBoundary7MA4YWxkTrZu0g", 36); /* boundary look-alike */
        part_t parts[3] = {{"other", NULL, "x", 1}, {"jarfile", names[round], data, n}, {"more", NULL, "y", 1}};
        resp_t r;
        upload(parts + (round % 2 ? 0 : 1), round % 2 ? 3 : 1, true, &r);
        CHECK_EQ(r.status, 200);
        CHECK_STR(json_string_value(json_object_get(r.json, "status")), "success");
        const char *fnp = json_string_value(json_object_get(r.json, "filename"));
        CHECK(fnp != NULL);
        char fn[2048];
        snprintf(fn, sizeof fn, "%s", fnp);
        char prefix[1100];
        snprintf(prefix, sizeof prefix, "%s/", dir);
        CHECK(!strncmp(fn, prefix, strlen(prefix)));
        const char *id = fn + strlen(prefix);
        CHECK(stored_id_ok(id));
        char want[512];
        ref_sanitize(names[round], want);
        CHECK_STR(id + 33, want);
        CHECK(file_equals(fn, data, n));
        CHECK(listed(id, want));
        char idc[256];
        snprintf(idc, sizeof idc, "%s", id);
        resp_free(&r);

        /* run it: a random request; the provider must get exactly that */
        json_t *body = json_object();
        char entry[64], sp[64];
        snprintf(entry, sizeof entry, "job-%d", rnd(&seed, 1000));
        json_object_set_new(body, "entryClass", json_string(entry));
        int nargs = rnd(&seed, 5);
        char args[5][64];
        bool as_list = rnd(&seed, 2);
        json_t *list = json_array();
        char joined[512] = "";
        for (int i = 0; i < nargs; i++) {
            bool spaced = rnd(&seed, 3) == 0;
            snprintf(args[i], sizeof args[i], spaced ? "a %d b" : "--k%d=\"v\"", rnd(&seed, 100));
            if (!as_list && !spaced) snprintf(args[i], sizeof args[i], "--k%d", rnd(&seed, 100));
            json_array_append_new(list, json_string(args[i]));
            size_t jl = strlen(joined);
            snprintf(joined + jl, sizeof joined - jl, spaced ? "%s'%s'" : "%s%s", i ? "  " : " ", args[i]);
        }
        if (as_list) json_object_set_new(body, "programArgsList", list);
        else {
            json_decref(list);
            json_object_set_new(body, "programArgs", json_string(joined));
        }
        int par = rnd(&seed, 3) ? 1 + rnd(&seed, 16) : 0;
        if (par) json_object_set_new(body, "parallelism", json_integer(par));
        bool has_sp = rnd(&seed, 2), allow = rnd(&seed, 2);
        snprintf(sp, sizeof sp, "/tmp/savepoints/sp-%d", rnd(&seed, 99));
        if (has_sp) json_object_set_new(body, "savepointPath", json_string(sp));
        if (allow || rnd(&seed, 2)) json_object_set_new(body, "allowNonRestoredState", json_boolean(allow));
        char *s = json_dumps(body, 0);
        json_decref(body);
        char path[512];
        snprintf(path, sizeof path, "/jars/%s/run", idc);
        int runs_before = F.runs;
        req("POST", path, "Content-Type: application/json\r\n", s, strlen(s), true, &r);
        free(s);
        CHECK_EQ(r.status, 200);
        const char *jobid = json_string_value(json_object_get(r.json, "jobid"));
        CHECK(jobid && find_job(jobid));
        CHECK_EQ(F.runs, runs_before + 1);
        CHECK_STR(F.run_jar, idc);
        CHECK(F.run_has_path);
        CHECK_STR(F.run_path, fn);
        CHECK_STR(F.run_entry, entry);
        CHECK_EQ(F.run_parallelism, par);
        CHECK_EQ(F.run_has_savepoint, has_sp);
        if (has_sp) CHECK_STR(F.run_savepoint, sp);
        CHECK_EQ(F.run_allow, allow);
        CHECK_EQ(F.run_nargs, nargs);
        for (int i = 0; i < nargs; i++) CHECK_STR(F.run_args[i], args[i]);
        resp_free(&r);

        if (round % 3 == 0) { /* kept for the listing check below */
            free(data);
            continue;
        }
        req("DELETE", path, NULL, NULL, 0, true, &r); /* /jars/:id/run: DELETE is not allowed */
        CHECK_EQ(r.status, 405);
        resp_free(&r);
        snprintf(path, sizeof path, "/jars/%s", idc);
        req("DELETE", path, NULL, NULL, 0, true, &r);
        CHECK_EQ(r.status, 200);
        resp_free(&r);
        CHECK(access(fn, F_OK) != 0);
        CHECK(!listed(idc, NULL));
        req("DELETE", path, NULL, NULL, 0, true, &r);
        CHECK_EQ(r.status, 404);
        resp_free(&r);
        free(data);
    }
    /* nothing was written outside the artifact directory, and no temporary file stayed */
    char parent[1100];
    snprintf(parent, sizeof parent, "%s/..", dir);
    CHECK_EQ(count_files(parent, NULL), 1);
    CHECK_EQ(count_files(dir, ".upload-"), 0);
    CHECK(access("/etc/passwd_", F_OK) != 0);
}

TEST(run_builtin_and_errors) {
    resp_t r;
    const char *b = "{\"entryClass\":\"fraud\",\"programArgsList\":[\"--events\",\"10\"]}";
    req("POST", "/jars/builtin/run", NULL, b, strlen(b), true, &r);
    CHECK_EQ(r.status, 200);
    CHECK(!F.run_has_path);
    CHECK_STR(F.run_jar, "builtin");
    CHECK_STR(F.run_entry, "fraud");
    CHECK_EQ(F.run_nargs, 2);
    CHECK_STR(F.run_args[1], "10");
    CHECK_EQ(F.run_parallelism, 0);
    resp_free(&r);
    req("POST", "/jars/builtin/run", NULL, "", 0, true, &r); /* empty body: all defaults */
    CHECK_EQ(r.status, 200);
    CHECK(!F.run_has_entry);
    resp_free(&r);
    struct { const char *body; int status; const char *needle; } bad[] = {
        {"{\"parallelism\":0}", 400, "parallelism"},
        {"{\"parallelism\":\"4\"}", 400, "parallelism"},
        {"{\"parallelism\":2.5}", 400, "parallelism"},
        {"{\"entryClass\":5}", 400, "entryClass"},
        {"{\"entryClass\":\"\"}", 400, "entryClass"},
        {"{\"programArgsList\":[1,2]}", 400, "programArgsList"},
        {"{\"programArgsList\":\"x\"}", 400, "programArgsList"},
        {"{\"programArgs\":[\"x\"]}", 400, "programArgs"},
        {"{\"savepointPath\":1}", 400, "savepointPath"},
        {"{\"allowNonRestoredState\":\"yes\"}", 400, "allowNonRestoredState"},
        {"not json", 400, "JSON"},
        {"[1,2]", 400, "object"},
        {"{\"a\":1,\"a\":2}", 400, "JSON"},
        {"{\"entryClass\":\"no-such-job\"}", 400, "no job named 'no-such-job'"},
    };
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        req("POST", "/jars/builtin/run", NULL, bad[i].body, strlen(bad[i].body), true, &r);
        CHECK_EQ(r.status, bad[i].status);
        CHECK_CONTAINS(error_of(&r), bad[i].needle);
        resp_free(&r);
    }
    const char *jars[] = {"/jars/..%2F..%2Fetc%2Fpasswd/run", "/jars/%2e%2e%2f%2e%2e%2fetc%2fpasswd/run",
                          "/jars/%2e%2e/run", "/jars/../run", "/jars/passwd/run",
                          "/jars/0123456789abcdef0123456789abcdef_x.so/run", "/jars/builtin%00/run"};
    for (size_t i = 0; i < SL_ARRAY_LEN(jars); i++) {
        req("POST", jars[i], NULL, "{}", 2, true, &r);
        CHECK_EQ(r.status, 404);
        CHECK(error_of(&r) != NULL);
        resp_free(&r);
        char del[256];
        snprintf(del, sizeof del, "%.*s", (int)(strlen(jars[i]) - 4), jars[i]);
        req("DELETE", del, NULL, NULL, 0, true, &r);
        if (r.status != 404) fprintf(stderr, "DELETE %s -> %d %s\n", del, r.status, r.body);
        CHECK_EQ(r.status, 404);
        resp_free(&r);
    }
    char big[(1 << 20) + 100];
    memset(big, ' ', sizeof big);
    req("POST", "/jars/builtin/run", NULL, big, sizeof big, true, &r);
    CHECK_EQ(r.status, 413);
    resp_free(&r);
}

TEST(cancel) {
    resp_t r;
    for (int i = 0; i < F.njobs; i++) {
        fjob_t *f = &F.jobs[i];
        pthread_mutex_lock(&F.mu);
        bool ended = !strcmp(f->j.state, "FINISHED") || !strcmp(f->j.state, "FAILED") || !strcmp(f->j.state, "CANCELED");
        pthread_mutex_unlock(&F.mu);
        char path[128];
        snprintf(path, sizeof path, "/jobs/%s%s", f->j.id, i % 2 ? "?mode=cancel" : "");
        req("PATCH", path, NULL, NULL, 0, true, &r);
        CHECK_EQ(r.status, ended ? 409 : 202);
        resp_free(&r);
        CHECK_STR(f->j.state, ended ? f->j.state : "CANCELED");
        if (i > 4) break; /* keep some running for the client test */
    }
    req("PATCH", "/jobs/0123456789abcdef0123456789abcdef?mode=cancel", NULL, NULL, 0, true, &r);
    CHECK_EQ(r.status, 404);
    resp_free(&r);
    char path[128];
    snprintf(path, sizeof path, "/jobs/%s?mode=stop", F.jobs[F.njobs - 1].j.id);
    req("PATCH", path, NULL, NULL, 0, true, &r);
    CHECK_EQ(r.status, 400);
    CHECK_CONTAINS(error_of(&r), "mode");
    resp_free(&r);
}

TEST(methods_and_paths) {
    struct { const char *m, *p; int status; const char *allow; } cases[] = {
        {"POST", "/overview", 405, "GET"},     {"DELETE", "/jobs", 405, "GET"},
        {"GET", "/jars/upload", 405, "POST"},  {"PUT", "/jars/x/run", 405, "POST"},
        {"GET", "/jars/x", 405, "DELETE"},     {"DELETE", "/jobs/abc", 405, "GET, PATCH"},
        {"POST", "/config", 405, "GET"},       {"GET", "/foo", 404, NULL},
        {"GET", "/jobs/a/b", 404, NULL},       {"GET", "/jars/x/run/y", 404, NULL},
        {"GET", "/web/nope.js", 404, NULL},    {"GET", "//jobs", 404, NULL},
        {"GET", "/jobs/", 404, NULL},          {"GET", "/v2/jobs", 404, NULL},
        {"GET", "/jobs/overview/x", 404, NULL}, {"GET", "/overview?x=1", 200, NULL},
    };
    for (size_t i = 0; i < SL_ARRAY_LEN(cases); i++) {
        resp_t r;
        req(cases[i].m, cases[i].p, NULL, NULL, 0, true, &r);
        if (r.status != cases[i].status) fprintf(stderr, "%s %s -> %d\n", cases[i].m, cases[i].p, r.status);
        CHECK_EQ(r.status, cases[i].status);
        if (cases[i].status != 200) CHECK(error_of(&r) != NULL);
        if (cases[i].allow) {
            char h[64];
            snprintf(h, sizeof h, "Allow: %s\r", cases[i].allow);
            char *hh = NULL;
            if (asprintf(&hh, "%s\r\n", r.headers) < 0) abort();
            CHECK_CONTAINS(hh, h);
            free(hh);
        }
        resp_free(&r);
    }
}

TEST(bad_uploads) {
    uint8_t data[3000];
    for (size_t i = 0; i < sizeof data; i++) data[i] = (uint8_t)rnd(&seed, 256);
    resp_t r;
    /* over the maximum (1 MiB here), declared up front */
    char head[512];
    int hn = snprintf(head, sizeof head,
                      "POST /jars/upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: "
                      "multipart/form-data; boundary=b\r\nContent-Length: 300000000\r\n\r\n",
                      TOKEN);
    raw(head, (size_t)hn, &r);
    CHECK_EQ(r.status, 413);
    CHECK(error_of(&r) != NULL);
    resp_free(&r);
    /* over the maximum, chunked (no length up front) */
    {
        int fd = connect_server();
        CHECK(fd >= 0);
        hn = snprintf(head, sizeof head,
                      "POST /jars/upload HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\nContent-Type: "
                      "multipart/form-data; boundary=bb\r\nTransfer-Encoding: chunked\r\n\r\n",
                      TOKEN);
        CHECK(send(fd, head, (size_t)hn, MSG_NOSIGNAL) == hn);
        static char chunk[65536 + 16];
        int cl = snprintf(chunk, sizeof chunk, "10000\r\n");
        memset(chunk + cl, 'z', 65536);
        memcpy(chunk + cl + 65536, "\r\n", 2);
        for (int i = 0; i < 40; i++) /* 2.5 MiB, then the last chunk */
            if (send(fd, chunk, (size_t)cl + 65538, MSG_NOSIGNAL) < 0) break;
        if (send(fd, "0\r\n\r\n", 5, MSG_NOSIGNAL) < 0) {}
        read_answer(fd, &r);
        close(fd);
        if (r.status != 413) fprintf(stderr, "chunked -> %d %s\n", r.status, r.body);
        CHECK_EQ(r.status, 413);
        resp_free(&r);
    }
    /* not multipart, no boundary */
    req("POST", "/jars/upload", "Content-Type: application/json\r\n", "{}", 2, true, &r);
    CHECK_EQ(r.status, 400);
    CHECK_CONTAINS(error_of(&r), "multipart/form-data");
    resp_free(&r);
    req("POST", "/jars/upload", NULL, "x", 1, true, &r);
    CHECK_EQ(r.status, 400);
    resp_free(&r);
    req("POST", "/jars/upload", "Content-Type: multipart/form-data\r\n", "x", 1, true, &r);
    CHECK_EQ(r.status, 400);
    CHECK_CONTAINS(error_of(&r), "boundary");
    resp_free(&r);
    /* truncated: no closing boundary */
    part_t one = {"jarfile", "a.so", data, sizeof data};
    upload(&one, 1, false, &r);
    CHECK_EQ(r.status, 400);
    CHECK_CONTAINS(error_of(&r), "malformed multipart");
    resp_free(&r);
    /* cut in the middle of the data */
    {
        sl_buf_t body = {0};
        multipart("----sluiceBoundary7MA4YWxkTrZu0gW", &one, 1, true, &body);
        req("POST", "/jars/upload", "Content-Type: multipart/form-data; boundary=----sluiceBoundary7MA4YWxkTrZu0gW\r\n",
            body.p, body.len / 2, true, &r);
        CHECK_EQ(r.status, 400);
        resp_free(&r);
        sl_buf_free(&body);
    }
    /* no jarfile field, jarfile without a file name, two files, an empty file */
    part_t other = {"file", "a.so", data, 10};
    upload(&other, 1, true, &r);
    CHECK_EQ(r.status, 400);
    CHECK_CONTAINS(error_of(&r), "jarfile");
    resp_free(&r);
    part_t nofile = {"jarfile", NULL, data, 10};
    upload(&nofile, 1, true, &r);
    CHECK_EQ(r.status, 400);
    CHECK_CONTAINS(error_of(&r), "jarfile");
    resp_free(&r);
    part_t two[2] = {{"jarfile", "a.so", data, 100}, {"jarfile", "b.so", data, 100}};
    upload(two, 2, true, &r);
    CHECK_EQ(r.status, 400);
    CHECK_CONTAINS(error_of(&r), "more than one");
    resp_free(&r);
    part_t empty = {"jarfile", "a.so", data, 0};
    upload(&empty, 1, true, &r);
    CHECK_EQ(r.status, 400);
    CHECK_CONTAINS(error_of(&r), "empty");
    resp_free(&r);
    /* garbage with a multipart content type */
    req("POST", "/jars/upload", "Content-Type: multipart/form-data; boundary=xyz\r\n", data, sizeof data, true, &r);
    CHECK_EQ(r.status, 400);
    resp_free(&r);
    CHECK_EQ(count_files(dir, ".upload-"), 0);
}

/* 200 random requests: garbage request lines, headers and bodies. */
TEST(garbage) {
    const char *methods[] = {"GET", "POST", "PATCH", "DELETE", "PUT", "HEAD", "OPTIONS", "G\x01T", ""};
    const char *paths[] = {"/jobs", "/jars/upload", "/jars/builtin/run", "/overview", "/jobs/overview",
                           "/%%%", "/jars/%ff%fe/run", "*", "/jobs/\x7f", "http://x/jobs", "/jars/upload?x=%"};
    const char *ctypes[] = {"multipart/form-data; boundary=", "multipart/form-data; boundary=\"q\"",
                            "multipart/form-data; boundary=----sluiceBoundary7MA4YWxkTrZu0gW",
                            "multipart/mixed; boundary=b", "application/x-www-form-urlencoded", "\x01\x02"};
    int answered = 0;
    for (int it = 0; it < 200; it++) {
        sl_buf_t b = {0};
        char line[512];
        int kind = rnd(&seed, 4);
        if (kind == 0) { /* pure random bytes */
            int n = 1 + rnd(&seed, 3000);
            for (int i = 0; i < n; i++) {
                char c = (char)rnd(&seed, 256);
                sl_buf_append(&b, &c, 1);
            }
        } else {
            int n = snprintf(line, sizeof line, "%s %s HTTP/1.%d\r\nHost: x\r\nConnection: close\r\n",
                             methods[rnd(&seed, 9)], paths[rnd(&seed, 11)], rnd(&seed, 3));
            sl_buf_append(&b, line, (size_t)n);
            if (rnd(&seed, 4)) {
                n = snprintf(line, sizeof line, "Authorization: Bearer %s\r\n", TOKEN);
                sl_buf_append(&b, line, (size_t)n);
            }
            int nh = rnd(&seed, 6);
            for (int h = 0; h < nh; h++) {
                int which = rnd(&seed, 5);
                if (which == 0) n = snprintf(line, sizeof line, "Content-Type: %s\r\n", ctypes[rnd(&seed, 6)]);
                else if (which == 1) n = snprintf(line, sizeof line, "Content-Length: %d\r\n", rnd(&seed, 5000) - 10);
                else if (which == 2) n = snprintf(line, sizeof line, "Transfer-Encoding: chunked\r\n");
                else if (which == 3) {
                    n = snprintf(line, sizeof line, "X-%d: ", rnd(&seed, 100));
                    for (int i = 0; i < 200 && n < (int)sizeof line - 3; i++) line[n++] = (char)(32 + rnd(&seed, 95));
                    line[n++] = '\r', line[n++] = '\n';
                } else {
                    n = 0;
                    for (int i = 0; i < 100; i++) line[n++] = (char)rnd(&seed, 256);
                    line[n++] = '\r', line[n++] = '\n';
                }
                sl_buf_append(&b, line, (size_t)n);
            }
            if (kind == 3 && rnd(&seed, 3) == 0) { /* a huge header */
                sl_buf_append(&b, "X-Big: ", 7);
                for (int i = 0; i < 100000; i++) sl_buf_append(&b, "a", 1);
                sl_buf_append(&b, "\r\n", 2);
            }
            sl_buf_append(&b, "\r\n", 2);
            int bn = rnd(&seed, 4000);
            if (kind == 2) {
                part_t p = {"jarfile", "x.so", "abc", 3};
                multipart("----sluiceBoundary7MA4YWxkTrZu0gW", &p, 1, rnd(&seed, 2), &b);
            }
            for (int i = 0; i < bn; i++) {
                char c = (char)rnd(&seed, 256);
                sl_buf_append(&b, &c, 1);
            }
        }
        resp_t r;
        if (rnd(&seed, 10) == 0) { /* send and hang up without reading */
            int fd = connect_server();
            CHECK(fd >= 0);
            if (send(fd, b.p, b.len / 2, MSG_NOSIGNAL) < 0) {}
            close(fd);
        } else {
            raw(b.p, b.len, &r);
            if (r.status) {
                answered++;
                CHECK(r.status >= 200 && r.status < 600);
                if (r.status >= 400 && r.status != 400 && r.status != 401 && r.status != 404 && r.status != 405 &&
                    r.status != 413 && r.status != 409 && r.status != 431 && r.status != 501 && r.status != 505)
                    fprintf(stderr, "garbage %d -> %d\n", it, r.status);
            }
            resp_free(&r);
        }
        sl_buf_free(&b);
        resp_t ok;
        if (it % 20 == 0) { /* still answering */
            get("/config", &ok);
            CHECK_EQ(ok.status, 200);
            resp_free(&ok);
        }
    }
    CHECK(answered > 50);
    resp_t ok;
    get("/overview", &ok);
    CHECK_EQ(ok.status, 200);
    resp_free(&ok);
    CHECK_EQ(count_files(dir, ".upload-"), 0);
}

/* ---- the client commands ---------------------------------------------------- */

typedef struct {
    int code;
    char out[16384], err[8192];
} run_t;

static void slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = 0;
    if (f) fclose(f);
}

static void cli(run_t *r, bool with_token, const char *const *args) {
    char outp[1200], errp[1200];
    snprintf(outp, sizeof outp, "%s/cli.out", sl_test_tmpdir());
    snprintf(errp, sizeof errp, "%s/cli.err", sl_test_tmpdir());
    const char *argv[64];
    int n = 0;
    argv[n++] = SLUICE_BIN;
    for (int i = 0; args[i] && n < 63; i++) argv[n++] = args[i];
    argv[n] = NULL;
    sync_fake();
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (chdir(sl_test_tmpdir()) != 0) _exit(126);
        int fo = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0) _exit(126);
        dup2(fo, 1);
        dup2(fe, 2);
        if (with_token) setenv("SLUICE_REST_TOKEN", TOKEN, 1);
        else unsetenv("SLUICE_REST_TOKEN");
        execv(SLUICE_BIN, (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    sync_fake();
    r->code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    slurp(outp, r->out, sizeof r->out);
    slurp(errp, r->err, sizeof r->err);
}

static bool ended(const char *s) { return !strcmp(s, "FINISHED") || !strcmp(s, "FAILED") || !strcmp(s, "CANCELED"); }

/* Flink's `flink list` output for the table, built here. */
static void ref_list(bool all, char *out, size_t cap) {
    size_t o = 0;
    o += (size_t)snprintf(out + o, cap - o, "Waiting for response...\n");
    const char *rule = "--------------------------------------------------------------\n";
    const char *heads[3] = {"------------------ Running/Restarting Jobs -------------------\n",
                            "----------------------- Scheduled Jobs -----------------------\n",
                            "---------------------- Terminated Jobs -----------------------\n"};
    const char *none[3] = {"No running jobs.\n", "No scheduled jobs.\n", NULL};
    for (int g = 0; g < (all ? 3 : 2); g++) {
        int idx[MAXJOBS], n = 0;
        for (int i = 0; i < F.njobs; i++) {
            const char *s = F.jobs[i].j.state;
            int grp = !strcmp(s, "CREATED") ? 1 : ended(s) ? 2 : 0;
            if (grp == g) idx[n++] = i;
        }
        if (!n) {
            if (none[g]) o += (size_t)snprintf(out + o, cap - o, "%s", none[g]);
            continue;
        }
        for (int a = 0; a < n; a++) /* selection sort by start time */
            for (int b = a + 1; b < n; b++)
                if (F.jobs[idx[b]].j.start_time < F.jobs[idx[a]].j.start_time) {
                    int t = idx[a];
                    idx[a] = idx[b];
                    idx[b] = t;
                }
        o += (size_t)snprintf(out + o, cap - o, "%s", heads[g]);
        for (int a = 0; a < n; a++) {
            fjob_t *f = &F.jobs[idx[a]];
            time_t t = (time_t)(f->j.start_time / 1000);
            struct tm tm;
            localtime_r(&t, &tm);
            o += (size_t)snprintf(out + o, cap - o, "%02d.%02d.%04d %02d:%02d:%02d : %s : %s (%s)\n", tm.tm_mday,
                                  tm.tm_mon + 1, tm.tm_year + 1900, tm.tm_hour, tm.tm_min, tm.tm_sec, f->j.id,
                                  f->j.name, f->j.state);
        }
        o += (size_t)snprintf(out + o, cap - o, "%s", rule);
    }
}

TEST(client_commands) {
    char hp[64], want[16384];
    snprintf(hp, sizeof hp, "127.0.0.1:%d", port);
    run_t r;
    /* list: Flink's layout */
    cli(&r, true, (const char *[]){"list", "-m", hp, NULL});
    CHECK_EQ(r.code, 0);
    ref_list(false, want, sizeof want);
    CHECK_STR(r.out, want);
    cli(&r, true, (const char *[]){"list", "-a", "-m", hp, NULL});
    CHECK_EQ(r.code, 0);
    ref_list(true, want, sizeof want);
    CHECK_STR(r.out, want);
    /* without the token: refused, exit 1 */
    cli(&r, false, (const char *[]){"list", "-m", hp, NULL});
    CHECK_EQ(r.code, 1);
    CHECK_CONTAINS(r.err, "Unauthorized");
    /* the address from a config file (rest.port) */
    char cfgp[1200];
    snprintf(cfgp, sizeof cfgp, "%s/rest-config.yaml", sl_test_tmpdir());
    FILE *cf = fopen(cfgp, "w");
    fprintf(cf, "rest.port: %d\n", port);
    fclose(cf);
    cli(&r, true, (const char *[]){"list", "--config", cfgp, NULL});
    CHECK_EQ(r.code, 0);
    ref_list(false, want, sizeof want);
    CHECK_STR(r.out, want);

    /* run a built-in job, detached */
    int before = F.njobs;
    cli(&r, true, (const char *[]){"run", "-d", "-m", hp, "-p", "3", "fraud", "--events", "a b", NULL});
    CHECK_EQ(r.code, 0);
    CHECK_EQ(F.njobs, before + 1);
    snprintf(want, sizeof want, "Job has been submitted with JobID %s\n", F.jobs[before].j.id);
    CHECK_STR(r.out, want);
    CHECK_STR(F.run_jar, "builtin");
    CHECK(!F.run_has_path);
    CHECK_STR(F.run_entry, "fraud");
    CHECK_EQ(F.run_parallelism, 3);
    CHECK_EQ(F.run_nargs, 2);
    CHECK_STR(F.run_args[0], "--events");
    CHECK_STR(F.run_args[1], "a b");
    CHECK(!F.run_has_savepoint);
    CHECK(!F.run_allow);

    /* run a job file, attached: uploaded by libcurl's multipart, waits for FINISHED */
    char so[1200];
    snprintf(so, sizeof so, "%s/libmy_job.so", sl_test_tmpdir());
    uint8_t bytes[70000];
    for (size_t i = 0; i < sizeof bytes; i++) bytes[i] = (uint8_t)rnd(&seed, 256);
    FILE *sf = fopen(so, "wb");
    fwrite(bytes, 1, sizeof bytes, sf);
    fclose(sf);
    before = F.njobs;
    cli(&r, true, (const char *[]){"run", "-m", hp, "-s", "/sp/1", "-n", so, "x", NULL});
    CHECK_EQ(r.code, 0);
    CHECK_EQ(F.njobs, before + 1);
    snprintf(want, sizeof want, "Job has been submitted with JobID %s\nProgram execution finished\nJob with JobID %s "
             "has finished.\n", F.jobs[before].j.id, F.jobs[before].j.id);
    CHECK(!strncmp(r.out, want, strlen(want)));
    CHECK_STR(F.jobs[before].j.state, "FINISHED");
    CHECK(F.run_has_path);
    CHECK(file_equals(F.run_path, bytes, sizeof bytes));
    CHECK_STR(F.run_entry, "my_job");
    CHECK_STR(F.run_savepoint, "/sp/1");
    CHECK(F.run_allow);
    CHECK_EQ(F.run_nargs, 1);
    CHECK_EQ(F.run_parallelism, 0);
    char idtail[256];
    snprintf(idtail, sizeof idtail, "%s", strrchr(F.run_path, '/') + 1);
    CHECK(stored_id_ok(idtail));
    CHECK_STR(idtail + 33, "libmy_job.so");

    /* attached, the job fails: exit 1 */
    before = F.njobs;
    cli(&r, true, (const char *[]){"run", "-m", hp, "-c", "failjob", so, NULL});
    CHECK_EQ(r.code, 1);
    CHECK_STR(F.jobs[before].j.state, "FAILED");
    CHECK_CONTAINS(r.err, "FAILED");
    /* the JobManager refuses the job */
    cli(&r, true, (const char *[]){"run", "-d", "-m", hp, "no-such-job", NULL});
    CHECK_EQ(r.code, 1);
    CHECK_CONTAINS(r.err, "no job named 'no-such-job'");
    /* `sluice run` with a JobManager address in the config goes to it */
    before = F.njobs;
    cli(&r, true, (const char *[]){"run", "--config", cfgp, "fraud", NULL});
    CHECK_EQ(r.code, 0);
    CHECK_EQ(F.njobs, before + 1);
    CHECK_CONTAINS(r.out, F.jobs[before].j.id);

    /* cancel */
    int victim = -1;
    for (int i = 0; i < F.njobs; i++)
        if (!ended(F.jobs[i].j.state)) victim = i; /* at least the detached run above */
    CHECK(victim >= 0);
    char vid[64];
    snprintf(vid, sizeof vid, "%s", F.jobs[victim].j.id);
    cli(&r, true, (const char *[]){"cancel", "-m", hp, vid, NULL});
    CHECK_EQ(r.code, 0);
    snprintf(want, sizeof want, "Cancelling job %s.\nCancelled job %s.\n", vid, vid);
    CHECK_STR(r.out, want);
    CHECK_STR(F.jobs[victim].j.state, "CANCELED");
    cli(&r, true, (const char *[]){"cancel", "-m", hp, vid, NULL});
    CHECK_EQ(r.code, 1);
    CHECK_CONTAINS(r.err, "already ended");
    cli(&r, true, (const char *[]){"cancel", "-m", hp, "0123456789abcdef0123456789abcdef", NULL});
    CHECK_EQ(r.code, 1);
    CHECK_CONTAINS(r.err, "not found");
    /* the list again, after all of that */
    cli(&r, true, (const char *[]){"list", "-m", hp, "-a", NULL});
    CHECK_EQ(r.code, 0);
    ref_list(true, want, sizeof want);
    CHECK_STR(r.out, want);
    /* usage errors */
    cli(&r, true, (const char *[]){"cancel", "-m", hp, NULL});
    CHECK_EQ(r.code, 2);
    cli(&r, true, (const char *[]){"run", "-m", hp, NULL});
    CHECK_EQ(r.code, 2);
    cli(&r, true, (const char *[]){"run", "-m", hp, "./missing-job.so", NULL});
    CHECK_EQ(r.code, 2);
    CHECK_CONTAINS(r.err, "no such file");
    /* without a JobManager, `sluice run` is still the embedded command */
    cli(&r, true, (const char *[]){"run", "--version", NULL});
    CHECK_EQ(r.code, 0);
    CHECK(!strncmp(r.out, "sluice ", 7));
        cli(&r, true, (const char *[]){"list", "-m", "127.0.0.1:1", NULL});
    CHECK_EQ(r.code, 1);
    CHECK_CONTAINS(r.err, "cannot reach the JobManager");
}

TEST(bad_config) {
    sl_rest_config_t c;
    sl_rest_config_defaults(&c);
    sl_rest_provider_t p = {0};
    sl_rest_t *r = NULL;
    char err[256];
    c.artifact_dir = "/proc/no/such/dir"; /* cannot be created */
    c.port = 0;
    CHECK_EQ(sl_rest_new(&c, &p, &r, err, sizeof err), SL_EIO);
    CHECK_CONTAINS(err, "artifact directory");
    c.artifact_dir = dir;
    c.port = -1;
    c.bind_address = "not-an-ip";
    CHECK_EQ(sl_rest_new(&c, &p, &r, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "rest.bind-address");
    c.bind_address = NULL;
    c.port = port; /* taken */
    CHECK_EQ(sl_rest_new(&c, &p, &r, err, sizeof err), SL_EIO);
    CHECK(r == NULL);
}

/* A second server on the same directory lists the earlier uploads again. */
TEST(restart_lists_uploads) {
    resp_t r;
    get("/jars", &r);
    json_t *files = json_object_get(r.json, "files");
    size_t n = json_array_size(files);
    CHECK(n > 0);
    sl_rest_config_t c;
    sl_rest_config_defaults(&c);
    c.port = 0;
    c.artifact_dir = dir;
    sl_rest_provider_t p = {0};
    sl_rest_t *s2 = NULL;
    char err[256];
    CHECK_EQ(sl_rest_new(&c, &p, &s2, err, sizeof err), 0);
    int old = port;
    port = sl_rest_port(s2);
    resp_t r2;
    get("/jars", &r2);
    port = old;
    json_t *f2 = json_object_get(r2.json, "files");
    CHECK_EQ(json_array_size(f2), n);
    for (size_t i = 0; i < n; i++) {
        const char *id = json_string_value(json_object_get(json_array_get(files, i), "id"));
        bool found = false;
        for (size_t k = 0; k < n; k++)
            found |= !strcmp(id, json_string_value(json_object_get(json_array_get(f2, k), "id")));
        CHECK(found);
    }
    resp_free(&r);
    resp_free(&r2);
    sl_rest_destroy(s2);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    const char *s = getenv("SLUICE_TEST_SEED");
    if (s) seed = strtoull(s, NULL, 10);
    fprintf(stderr, "seed %llu\n", (unsigned long long)seed);
    fake_fill();
    snprintf(dir, sizeof dir, "%s/artifacts", sl_test_tmpdir());
    sl_rest_config_t c;
    sl_rest_config_defaults(&c);
    c.port = 0;
    c.token = TOKEN;
    c.artifact_dir = dir;
    c.max_upload = 1 << 20;
    sl_rest_provider_t p = {.overview = p_overview, .list_jobs = p_list, .job_detail = p_detail,
                            .taskmanagers = p_tms, .run = p_run, .cancel = p_cancel};
    sl_rest_t *srv = NULL;
    char err[512];
    if (sl_rest_new(&c, &p, &srv, err, sizeof err)) {
        fprintf(stderr, "cannot start the server: %s\n", err);
        return 1;
    }
    port = sl_rest_port(srv);
    RUN(auth_required);
    RUN(config_and_overview);
    RUN(jobs_shapes);
    RUN(taskmanagers_shape);
    RUN(upload_run_delete);
    RUN(run_builtin_and_errors);
    RUN(cancel);
    RUN(methods_and_paths);
    RUN(bad_uploads);
    RUN(garbage);
    RUN(client_commands);
    RUN(bad_config);
    RUN(restart_lists_uploads);
    sl_rest_destroy(srv);
    TEST_MAIN_END();
}
