/*
 * rest.c — the JobManager's REST API on libmicrohttpd (see rest.h for the
 * paths, the shapes and the threads).
 *
 * A request goes through access_handler, which libmicrohttpd calls several
 * times per request: first with the headers (we route, authenticate and
 * check the declared size, and may answer at once), then once per piece of
 * the body (an upload streams through libmicrohttpd's multipart parser into
 * a temporary file in the artifact directory; a JSON body is buffered up to
 * MAX_JSON_BODY), and last with no data, when the answer is built.  An
 * error found while the body arrives is remembered and answered at the end
 * (or at once, closing the connection, when the body grows past the
 * maximum).  Every answer is JSON; every error is Flink's
 * {"errors": ["..."]}.
 */
#include "jobmanager/rest.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "jobmanager/rest_metrics.h"
#include "jobmanager/rest_shapes.h"
#include "jobmanager/web_assets.h"

#define MAX_JSON_BODY (1 << 20) /* a run request's JSON */
#define MAX_NAME 100            /* sanitized client file name */
#define ID_HEX 32               /* random part of a jar id */
#define MAX_ID_SEG 63           /* a job id in a URL */
#define MAX_DISCARD (64 << 20)  /* body bytes read and dropped after the maximum, before hanging up */

typedef struct jar {
    char id[ID_HEX + 1 + MAX_NAME + 1]; /* "<hex>_<name>": also the file's name */
    char name[MAX_NAME + 1];
    int64_t uploaded;                    /* ms since the epoch */
} jar_t;

struct sl_rest {
    char *bind_address, *token, *dir, *version;
    int64_t max_upload;
    sl_rest_provider_t p;
    struct MHD_Daemon *d;
    int port;
    pthread_mutex_t mu; /* guards jars and port */
    /* state queries running on their own threads (sq_work_t): the server
     * waits for them before it stops */
    pthread_mutex_t sq_mu;
    pthread_cond_t sq_cv;
    int sq_running;
    jar_t *jars;
    int njars, capjars;
};

/* ---- routes --------------------------------------------------------------- */

typedef enum {
    R_NONE = 0, R_CONFIG, R_OVERVIEW, R_JOBS, R_JOBS_OVERVIEW, R_JOB, R_TASKMANAGERS,
    R_JAR_UPLOAD, R_JARS, R_JAR_RUN, R_JAR,
    /* /jobs/:jobid/... (the job id in id; a checkpoint or trigger id in id2, a vertex id in id3) */
    R_CKPTS, R_CKPT_CONFIG, R_CKPT_DETAIL, R_CKPT_SUBTASKS, R_CKPT_OP, R_JOB_CONFIG, R_EXCEPTIONS,
    R_SAVEPOINTS, R_SAVEPOINT_OP, R_STOP,
    R_JOB_METRICS, R_VERTEX, R_VERTEX_METRICS, R_VERTEX_BP, R_VERTEX_WM,
    R_STATE,
    R_TM_METRICS, /* /taskmanagers/:tmid/metrics (the id in id) */
} route_t;

static bool job_route(route_t r) { return r == R_JOB || r >= R_CKPTS; }
static bool body_route(route_t r) { return r == R_JAR_RUN || r == R_CKPTS || r == R_SAVEPOINTS || r == R_STOP; }

/* Allowed method per route ("GET", "PATCH"...). */
static const char *route_methods(route_t r) {
    switch (r) {
    case R_JOB: return "GET, PATCH";
    case R_JAR_UPLOAD: case R_JAR_RUN: return "POST";
    case R_JAR: return "DELETE";
    case R_CKPTS: return "GET, POST";
    case R_SAVEPOINTS: case R_STOP: return "POST";
    default: return "GET";
    }
}

static bool method_allowed(route_t r, const char *m) {
    bool get = !strcmp(m, "GET") || !strcmp(m, "HEAD");
    switch (r) {
    case R_JOB: return get || !strcmp(m, "PATCH");
    case R_JAR_UPLOAD: case R_JAR_RUN: return !strcmp(m, "POST");
    case R_JAR: return !strcmp(m, "DELETE");
    case R_CKPTS: return get || !strcmp(m, "POST");
    case R_SAVEPOINTS: case R_STOP: return !strcmp(m, "POST");
    case R_NONE: return false;
    default: return get;
    }
}

/* Copies segment i into out (false if it does not fit). */
#define SEG_COPY(i, out) (len[i] < sizeof(out) && (memcpy(out, seg[i], len[i]), (out)[len[i]] = 0, true))

/* Splits url (already %-decoded by libmicrohttpd) into at most 7 segments;
 * the route, its :id segment in id, a second (:checkpointid, :triggerid) in
 * id2 and a third (:vertexid) in id3.  R_NONE for anything else. */
static route_t route_of(const char *url, char *id, size_t idcap, char (*id2)[80], char (*id3)[80]) {
    if (!strncmp(url, "/v1/", 4)) url += 3;
    if (url[0] != '/') return R_NONE;
    const char *seg[7];
    size_t len[7];
    int n = 0;
    const char *s = url + 1;
    for (;;) {
        const char *e = strchr(s, '/');
        size_t l = e ? (size_t)(e - s) : strlen(s);
        if (n == 7 || l == 0) return R_NONE; /* too deep, "//" or a trailing '/' */
        seg[n] = s;
        len[n++] = l;
        if (!e) break;
        s = e + 1;
    }
#define SEG(i, lit) (len[i] == sizeof(lit) - 1 && !memcmp(seg[i], lit, sizeof(lit) - 1))
    if (n == 1 && SEG(0, "config")) return R_CONFIG;
    if (n == 1 && SEG(0, "overview")) return R_OVERVIEW;
    if (n == 1 && SEG(0, "jobs")) return R_JOBS;
    if (n == 1 && SEG(0, "taskmanagers")) return R_TASKMANAGERS;
    if (n == 3 && SEG(0, "taskmanagers") && SEG(2, "metrics")) {
        if (len[1] >= idcap) return R_NONE;
        memcpy(id, seg[1], len[1]);
        id[len[1]] = 0;
        return R_TM_METRICS;
    }
    if (n == 1 && SEG(0, "jars")) return R_JARS;
    if (n == 2 && SEG(0, "jobs") && SEG(1, "overview")) return R_JOBS_OVERVIEW;
    if (n == 2 && SEG(0, "jars") && SEG(1, "upload")) return R_JAR_UPLOAD;
    if ((n == 2 && (SEG(0, "jobs") || SEG(0, "jars"))) || (n == 3 && SEG(0, "jars") && SEG(2, "run"))) {
        if (len[1] >= idcap) return R_NONE;
        memcpy(id, seg[1], len[1]);
        id[len[1]] = 0;
        if (n == 3) return R_JAR_RUN;
        return SEG(0, "jobs") ? R_JOB : R_JAR;
    }
    if (n < 3 || !SEG(0, "jobs") || len[1] >= idcap) return R_NONE;
    memcpy(id, seg[1], len[1]);
    id[len[1]] = 0;
    if (n == 3 && SEG(2, "checkpoints")) return R_CKPTS;
    if (n == 3 && SEG(2, "config")) return R_JOB_CONFIG;
    if (n == 3 && SEG(2, "exceptions")) return R_EXCEPTIONS;
    if (n == 3 && SEG(2, "savepoints")) return R_SAVEPOINTS;
    if (n == 3 && SEG(2, "stop")) return R_STOP;
    if (n == 3 && SEG(2, "metrics")) return R_JOB_METRICS;
    if (n == 3 && SEG(2, "state")) return R_STATE;
    if (n == 4 && SEG(2, "vertices")) return SEG_COPY(3, *id3) ? R_VERTEX : R_NONE;
    if (n == 5 && SEG(2, "vertices") && (SEG(4, "metrics") || SEG(4, "backpressure") || SEG(4, "watermarks"))) {
        if (!SEG_COPY(3, *id3)) return R_NONE;
        return SEG(4, "metrics") ? R_VERTEX_METRICS : SEG(4, "backpressure") ? R_VERTEX_BP : R_VERTEX_WM;
    }
    if (n == 4 && SEG(2, "checkpoints") && SEG(3, "config")) return R_CKPT_CONFIG;
    if (n == 4 && (SEG(2, "checkpoints") || SEG(2, "savepoints"))) {
        if (!SEG_COPY(3, *id2)) return R_NONE;
        return SEG(2, "checkpoints") ? R_CKPT_OP : R_SAVEPOINT_OP;
    }
    if (n == 5 && SEG(2, "checkpoints") && SEG(3, "details")) return SEG_COPY(4, *id2) ? R_CKPT_DETAIL : R_NONE;
    if (n == 7 && SEG(2, "checkpoints") && SEG(3, "details") && SEG(5, "subtasks"))
        return SEG_COPY(4, *id2) && SEG_COPY(6, *id3) ? R_CKPT_SUBTASKS : R_NONE;
#undef SEG_COPY
#undef SEG
    return R_NONE;
}

/* ---- one request ---------------------------------------------------------- */

typedef struct req {
    route_t route;
    char id[256];                 /* :jobid / :jarid */
    char id2[80], id3[80];        /* :checkpointid or :triggerid, :vertexid */
    bool answered;                /* a response was queued early */
    unsigned err_status;          /* an error found in the body, answered at the end */
    char err[512];
    int64_t received;             /* body bytes so far */
    sl_buf_t body;                /* JSON body */
    /* upload */
    struct MHD_PostProcessor *pp;
    int fd;
    char tmp_path[4096];
    char client_name[MAX_NAME + 1];
    bool have_file;               /* a jarfile part began */
    bool file_done;               /* ... and another part followed it */
    int64_t file_bytes;
    struct sq_work *sq;           /* GET .../state: the lookup running on its own thread */
} req_t;

static void req_set_error(req_t *q, unsigned status, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void req_set_error(req_t *q, unsigned status, const char *fmt, ...) {
    if (q->err_status) return; /* the first error wins */
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(q->err, sizeof q->err, fmt, ap);
    va_end(ap);
    q->err_status = status;
}

/* A state query in flight (GET /jobs/:jobid/state): the provider's
 * state_query blocks, so it runs on a thread of its own while the
 * connection is suspended; the thread resumes it when the answer is in. */
typedef struct sq_work {
    sl_rest_t *r;
    struct MHD_Connection *c;
    char *job, *uid, *state, *key, *ns;
    int64_t timeout_ms;
    bool done;                    /* under r->sq_mu */
    int rc, http;
    char *body;                   /* malloc'ed by the provider */
    char err[1024];
} sq_work_t;

static void sq_work_free(sq_work_t *w) {
    if (!w) return;
    sl_free(w->job);
    sl_free(w->uid);
    sl_free(w->state);
    sl_free(w->key);
    sl_free(w->ns);
    free(w->body);
    sl_free(w);
}

static void req_free(req_t *q) {
    if (!q) return;
    if (q->pp) MHD_destroy_post_processor(q->pp);
    if (q->fd >= 0) close(q->fd);
    if (q->tmp_path[0]) unlink(q->tmp_path);
    sl_buf_free(&q->body);
    sq_work_free(q->sq);
    sl_free(q);
}

static void request_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                              enum MHD_RequestTerminationCode toe) {
    SL_UNUSED(cls); SL_UNUSED(c); SL_UNUSED(toe);
    req_free(*con_cls);
    *con_cls = NULL;
}

/* ---- responses ------------------------------------------------------------ */

/* Queues j (stolen) as the JSON answer with the given status. */
static enum MHD_Result send_json(struct MHD_Connection *c, unsigned status, json_t *j, const char *allow) {
    char *s = json_dumps(j, JSON_COMPACT);
    json_decref(j);
    if (!s) s = strdup("{}");
    struct MHD_Response *r = MHD_create_response_from_buffer(strlen(s), s, MHD_RESPMEM_MUST_FREE);
    if (!r) { free(s); return MHD_NO; }
    MHD_add_response_header(r, "Content-Type", "application/json; charset=UTF-8");
    if (allow) MHD_add_response_header(r, "Allow", allow);
    if (status == MHD_HTTP_UNAUTHORIZED) MHD_add_response_header(r, "WWW-Authenticate", "Bearer realm=\"sluice\"");
    enum MHD_Result rc = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return rc;
}

static enum MHD_Result send_error_allow(struct MHD_Connection *c, unsigned status, const char *allow,
                                        const char *msg) {
    json_t *e = json_array();
    json_array_append_new(e, json_string(msg)); /* NULL (invalid UTF-8) is dropped by jansson */
    if (json_array_size(e) == 0) json_array_append_new(e, json_string("request refused"));
    return send_json(c, status, json_pack("{s:o}", "errors", e), allow);
}

static enum MHD_Result send_errorf(struct MHD_Connection *c, unsigned status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static enum MHD_Result send_errorf(struct MHD_Connection *c, unsigned status, const char *fmt, ...) {
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return send_error_allow(c, status, NULL, msg);
}

/* The HTTP status of a provider's return code. */
static unsigned status_of(int rc) {
    switch (rc) {
    case SL_ENOTFOUND: return MHD_HTTP_NOT_FOUND;
    case SL_EINVAL: case SL_EFORMAT: return MHD_HTTP_BAD_REQUEST;
    case SL_ESTATE: case SL_ECANCELED: return MHD_HTTP_CONFLICT;
    default: return MHD_HTTP_INTERNAL_SERVER_ERROR;
    }
}

static enum MHD_Result send_provider_error(struct MHD_Connection *c, int rc, const char *err, const char *what) {
    return send_errorf(c, status_of(rc), "%s", err && err[0] ? err : what);
}

/* A string safe to quote in a message: at most 80 bytes of it. */
static const char *clip(const char *s, char *buf, size_t cap) {
    snprintf(buf, cap, "%.80s%s", s, strlen(s) > 80 ? "..." : "");
    return buf;
}

/* ---- artifacts ------------------------------------------------------------ */

void sl_rest_sanitize_name(const char *client_name, char *out, size_t cap) {
    if (cap == 0) return;
    const char *base = client_name ? client_name : "";
    for (const char *p = base; *p; p++)
        if (*p == '/' || *p == '\\') base = p + 1;
    size_t max = SL_MIN(cap - 1, (size_t)MAX_NAME), o = 0;
    for (const char *p = base; *p && o < max; p++) {
        char ch = *p;
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '.' ||
                  ch == '_' || ch == '-';
        out[o++] = ok ? ch : '_';
    }
    out[o] = 0;
    for (size_t i = 0; i < o; i++)
        if (out[i] == '.' && (i == 0 || out[i + 1] == '.')) out[i] = '_'; /* no "..", no leading '.' */
    if (o == 0) snprintf(out, cap, "%s", "artifact");
}

/* Whether name is a stored artifact's file name: 32 hex, '_', a sanitized name. */
static bool stored_name_ok(const char *name, char *tail, size_t cap) {
    size_t n = strlen(name);
    if (n < ID_HEX + 2 || n > ID_HEX + 1 + MAX_NAME) return false;
    for (int i = 0; i < ID_HEX; i++)
        if (!((name[i] >= '0' && name[i] <= '9') || (name[i] >= 'a' && name[i] <= 'f'))) return false;
    if (name[ID_HEX] != '_') return false;
    char clean[MAX_NAME + 1];
    sl_rest_sanitize_name(name + ID_HEX + 1, clean, sizeof clean);
    if (strcmp(clean, name + ID_HEX + 1)) return false;
    snprintf(tail, cap, "%s", clean);
    return true;
}

static void random_hex(char *out, int nhex) {
    uint8_t b[64];
    size_t n = (size_t)(nhex + 1) / 2, got = 0;
    while (got < n) {
        ssize_t r = getrandom(b + got, n - got, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) { /* no entropy source: still unique enough for names, not secret */
            uint64_t x = sl_mix64((uint64_t)sl_mono_ns() ^ ((uint64_t)getpid() << 32));
            for (; got < n; got++, x = sl_mix64(x + 1)) b[got] = (uint8_t)x;
            break;
        }
        got += (size_t)r;
    }
    static const char hx[] = "0123456789abcdef";
    for (int i = 0; i < nhex; i++) out[i] = hx[(b[i / 2] >> ((i & 1) ? 0 : 4)) & 15];
    out[nhex] = 0;
}

/* Call with r->mu held. */
static int jar_find(sl_rest_t *r, const char *id) {
    for (int i = 0; i < r->njars; i++)
        if (!strcmp(r->jars[i].id, id)) return i;
    return -1;
}

static void jar_add(sl_rest_t *r, const char *id, const char *name, int64_t uploaded) {
    pthread_mutex_lock(&r->mu);
    if (jar_find(r, id) < 0) {
        if (r->njars == r->capjars) {
            r->capjars = r->capjars ? 2 * r->capjars : 16;
            r->jars = sl_realloc(r->jars, (size_t)r->capjars * sizeof *r->jars);
        }
        jar_t *j = &r->jars[r->njars++];
        snprintf(j->id, sizeof j->id, "%s", id);
        snprintf(j->name, sizeof j->name, "%s", name);
        j->uploaded = uploaded;
    }
    pthread_mutex_unlock(&r->mu);
}

static void scan_dir(sl_rest_t *r) {
    if (!r->dir) return; /* a server without uploads */
    DIR *d = opendir(r->dir);
    if (!d) return;
    struct dirent *e;
    while ((e = readdir(d))) {
        char tail[MAX_NAME + 1], path[4096];
        if (!stored_name_ok(e->d_name, tail, sizeof tail)) continue;
        snprintf(path, sizeof path, "%s/%s", r->dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) < 0 || !S_ISREG(st.st_mode)) continue;
        jar_add(r, e->d_name, tail, (int64_t)st.st_mtime * 1000);
    }
    closedir(d);
}

/* The multipart parser's callback: the "jarfile" part goes to the
 * temporary file, other fields are ignored (as Flink does). */
static enum MHD_Result upload_iter(void *cls, enum MHD_ValueKind kind, const char *key, const char *filename,
                                   const char *content_type, const char *transfer_encoding, const char *data,
                                   uint64_t off, size_t size) {
    SL_UNUSED(kind); SL_UNUSED(content_type); SL_UNUSED(transfer_encoding);
    req_t *q = cls;
    if (!key || strcmp(key, "jarfile")) {
        if (q->have_file) q->file_done = true;
        return MHD_YES;
    }
    if (!filename) {
        req_set_error(q, MHD_HTTP_BAD_REQUEST, "the multipart field 'jarfile' is not a file (no filename)");
        return MHD_NO;
    }
    if (off == 0 && q->have_file && (q->file_done || q->file_bytes > 0 || strcmp(filename, q->client_name))) {
        req_set_error(q, MHD_HTTP_BAD_REQUEST, "more than one file in the multipart field 'jarfile'");
        return MHD_NO;
    }
    if (!q->have_file) {
        q->have_file = true;
        snprintf(q->client_name, sizeof q->client_name, "%s", filename);
    }
    if (size && sl_write_all(q->fd, data, size)) {
        req_set_error(q, MHD_HTTP_INTERNAL_SERVER_ERROR, "could not write the upload: %s", strerror(errno));
        return MHD_NO;
    }
    q->file_bytes += (int64_t)size;
    return MHD_YES;
}

/* First call of an upload: checks the content type, opens the temporary file. */
static enum MHD_Result upload_begin(sl_rest_t *r, struct MHD_Connection *c, req_t *q) {
    if (!r->dir)
        return q->answered = true, send_errorf(c, MHD_HTTP_BAD_REQUEST,
                                               "this REST API serves one embedded job (sl_env_execute with rest.port "
                                               "set): it takes no uploads and runs no other job");
    const char *ct = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_TYPE);
    if (!ct || strncasecmp(ct, "multipart/form-data", 19))
        return q->answered = true, send_errorf(c, MHD_HTTP_BAD_REQUEST,
                                               "expected a multipart/form-data body with a 'jarfile' field, "
                                               "got content type '%s'", ct ? ct : "(none)");
    if (!strcasestr(ct, "boundary="))
        return q->answered = true,
               send_errorf(c, MHD_HTTP_BAD_REQUEST, "malformed multipart body: no boundary in the content type");
    q->pp = MHD_create_post_processor(c, 64 * 1024, upload_iter, q);
    if (!q->pp)
        return q->answered = true,
               send_errorf(c, MHD_HTTP_BAD_REQUEST, "malformed multipart body: bad content type '%.200s'", ct);
    char hex[ID_HEX + 1];
    random_hex(hex, ID_HEX);
    snprintf(q->tmp_path, sizeof q->tmp_path, "%s/.upload-%s", r->dir, hex);
    q->fd = open(q->tmp_path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (q->fd < 0) {
        q->tmp_path[0] = 0;
        return q->answered = true, send_errorf(c, MHD_HTTP_INTERNAL_SERVER_ERROR,
                                               "cannot store the upload in the artifact directory: %s",
                                               strerror(errno));
    }
    return MHD_YES;
}

/* Last call of an upload: the body parsed whole, the file moved in place. */
static enum MHD_Result upload_end(sl_rest_t *r, struct MHD_Connection *c, req_t *q) {
    enum MHD_Result complete = MHD_destroy_post_processor(q->pp);
    q->pp = NULL;
    if (q->err_status) return send_errorf(c, q->err_status, "%s", q->err);
    if (complete != MHD_YES)
        return send_errorf(c, MHD_HTTP_BAD_REQUEST, "malformed multipart body: it ends before its closing boundary");
    if (!q->have_file)
        return send_errorf(c, MHD_HTTP_BAD_REQUEST, "no file in the multipart field 'jarfile'");
    if (q->file_bytes == 0) return send_errorf(c, MHD_HTTP_BAD_REQUEST, "the uploaded file is empty");
    if (fsync(q->fd) < 0 || close(q->fd) < 0) {
        q->fd = -1;
        return send_errorf(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "could not store the upload: %s", strerror(errno));
    }
    q->fd = -1;
    char name[MAX_NAME + 1], id[sizeof((jar_t *)0)->id], path[4096 + sizeof id];
    sl_rest_sanitize_name(q->client_name, name, sizeof name);
    char hex[ID_HEX + 1];
    random_hex(hex, ID_HEX);
    snprintf(id, sizeof id, "%s_%s", hex, name);
    snprintf(path, sizeof path, "%s/%s", r->dir, id);
    if (rename(q->tmp_path, path) < 0)
        return send_errorf(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "could not store the upload: %s", strerror(errno));
    q->tmp_path[0] = 0;
    jar_add(r, id, name, sl_wall_ms());
    return send_json(c, MHD_HTTP_OK, json_pack("{s:s, s:s}", "filename", path, "status", "success"), NULL);
}

/* ---- handlers ------------------------------------------------------------- */

static int64_t job_duration(const sl_rest_job_t *j, int64_t now) {
    if (j->duration >= 0) return j->duration;
    if (j->start_time <= 0) return 0;
    return (j->end_time >= 0 ? j->end_time : now) - j->start_time;
}

static json_t *job_overview_json(const sl_rest_job_t *j, int64_t now) {
    json_t *o = json_pack("{s:s, s:s, s:s, s:I, s:I, s:I, s:I}", "jid", j->id, "name", j->name, "state", j->state,
                          "start-time", (json_int_t)j->start_time, "end-time", (json_int_t)j->end_time,
                          "duration", (json_int_t)job_duration(j, now), "last-modification",
                          (json_int_t)(j->last_modification ? j->last_modification : j->start_time));
    if (!o) return json_object(); /* a name that is not UTF-8 */
    if (j->tasks_total >= 0) {
        json_t *t = json_pack("{s:i}", "total", j->tasks_total);
        if (j->tasks_running >= 0) json_object_set_new(t, "running", json_integer(j->tasks_running));
        json_object_set_new(o, "tasks", t);
    }
    return o;
}

static enum MHD_Result h_config(sl_rest_t *r, struct MHD_Connection *c) {
    time_t t = time(NULL);
    struct tm lt;
    localtime_r(&t, &lt);
    char ver[128];
    snprintf(ver, sizeof ver, "sluice %s", r->version);
    json_t *j = json_pack("{s:i, s:s, s:I, s:s, s:{s:b, s:b, s:b, s:b}}", "refresh-interval", 3000, "timezone-name",
                          lt.tm_zone ? lt.tm_zone : "UTC", "timezone-offset", (json_int_t)lt.tm_gmtoff * 1000,
                          "flink-version", ver, "features", "web-submit", r->p.run != NULL, "web-cancel",
                          r->p.cancel != NULL, "web-rescale", 0, "web-history", 0);
    return send_json(c, MHD_HTTP_OK, j, NULL);
}

static enum MHD_Result h_overview(sl_rest_t *r, struct MHD_Connection *c) {
    if (!r->p.overview) return send_errorf(c, 500, "the cluster overview is not supported");
    sl_rest_overview_t o = {0};
    char err[512] = "";
    int rc = r->p.overview(r->p.ud, &o, err, sizeof err);
    if (rc) return send_provider_error(c, rc, err, "could not get the cluster overview");
    char ver[128];
    snprintf(ver, sizeof ver, "sluice %s", r->version);
    return send_json(c, MHD_HTTP_OK,
                     json_pack("{s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:s}", "taskmanagers", o.taskmanagers,
                               "slots-total", o.slots_total, "slots-available", o.slots_available, "jobs-running",
                               o.jobs_running, "jobs-finished", o.jobs_finished, "jobs-cancelled", o.jobs_cancelled,
                               "jobs-failed", o.jobs_failed, "flink-version", ver),
                     NULL);
}

static enum MHD_Result h_jobs(sl_rest_t *r, struct MHD_Connection *c, bool overview) {
    if (!r->p.list_jobs) return send_errorf(c, 500, "listing jobs is not supported");
    sl_rest_job_t *jobs = NULL;
    int n = 0;
    char err[512] = "";
    int rc = r->p.list_jobs(r->p.ud, &jobs, &n, err, sizeof err);
    if (rc) {
        free(jobs);
        return send_provider_error(c, rc, err, "could not list the jobs");
    }
    int64_t now = sl_wall_ms();
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        jobs[i].id[sizeof jobs[i].id - 1] = jobs[i].name[sizeof jobs[i].name - 1] = 0;
        jobs[i].state[sizeof jobs[i].state - 1] = 0;
        if (overview) json_array_append_new(a, job_overview_json(&jobs[i], now));
        else json_array_append_new(a, json_pack("{s:s, s:s}", "id", jobs[i].id, "status", jobs[i].state));
    }
    free(jobs);
    return send_json(c, MHD_HTTP_OK, json_pack("{s:o}", "jobs", a), NULL);
}

static enum MHD_Result h_job(sl_rest_t *r, struct MHD_Connection *c, const char *jid) {
    if (!r->p.job_detail) return send_errorf(c, 500, "job details are not supported");
    sl_rest_job_t j;
    memset(&j, 0, sizeof j);
    j.end_time = -1;
    j.duration = -1;
    j.tasks_total = j.tasks_running = -1;
    char err[512] = "";
    int rc = r->p.job_detail(r->p.ud, jid, &j, err, sizeof err);
    if (rc) {
        free(j.vertices);
        return send_provider_error(c, rc, err, "could not get the job's details");
    }
    j.id[sizeof j.id - 1] = j.name[sizeof j.name - 1] = j.state[sizeof j.state - 1] = 0;
    int64_t now = sl_wall_ms();
    json_t *o = json_pack("{s:s, s:s, s:b, s:s, s:I, s:I, s:I, s:I}", "jid", j.id, "name", j.name, "isStoppable", 0,
                          "state", j.state, "start-time", (json_int_t)j.start_time, "end-time",
                          (json_int_t)j.end_time, "duration", (json_int_t)job_duration(&j, now), "now",
                          (json_int_t)now);
    if (!o) o = json_object();
    if (j.max_parallelism > 0) json_object_set_new(o, "maxParallelism", json_integer(j.max_parallelism));
    json_t *vs = json_array(), *counts = json_object();
    for (int i = 0; i < j.nvertices; i++) {
        sl_rest_vertex_t *v = &j.vertices[i];
        v->id[sizeof v->id - 1] = v->name[sizeof v->name - 1] = v->status[sizeof v->status - 1] = 0;
        json_t *vo = json_pack("{s:s, s:s, s:i, s:s}", "id", v->id, "name", v->name, "parallelism",
                               v->parallelism, "status", v->status);
        if (!vo) continue;
        if (v->max_parallelism > 0) json_object_set_new(vo, "maxParallelism", json_integer(v->max_parallelism));
        if (r->p.vertex_metrics) { /* Flink's per-vertex IOMetricsInfo */
            sl_rest_vertex_metrics_t vm;
            memset(&vm, 0, sizeof vm);
            char verr[256];
            if (r->p.vertex_metrics(r->p.ud, jid, v->id, &vm, verr, sizeof verr) == 0 && vm.subtasks)
                json_object_set_new(vo, "metrics", sl_rest_io_metrics_json(vm.subtasks, vm.vertex.parallelism));
            free(vm.subtasks);
        }
        json_array_append_new(vs, vo);
        json_t *cnt = json_object_get(counts, v->status);
        json_object_set_new(counts, v->status, json_integer(cnt ? json_integer_value(cnt) + 1 : 1));
    }
    /* Flink's "plan": the vertices with the edges into them. */
    json_t *nodes = json_array();
    for (int i = 0; i < j.nvertices; i++) {
        sl_rest_vertex_t *v = &j.vertices[i];
        json_t *ins = json_array();
        for (int k = 0; k < v->ninputs && k < SL_REST_MAX_INPUTS; k++) {
            int from = v->inputs[k].vertex;
            if (from < 0 || from >= j.nvertices) continue;
            v->inputs[k].ship_strategy[sizeof v->inputs[k].ship_strategy - 1] = 0;
            json_array_append_new(ins, json_pack("{s:i, s:s, s:s, s:s}", "num", k, "id", j.vertices[from].id,
                                                 "ship_strategy", v->inputs[k].ship_strategy, "exchange",
                                                 "pipelined_bounded"));
        }
        json_t *n = json_pack("{s:s, s:i, s:s, s:s, s:s, s:o, s:{}}", "id", v->id, "parallelism", v->parallelism,
                              "operator", "", "operator_strategy", "", "description", v->name, "inputs", ins,
                              "optimizer_properties");
        if (n) json_array_append_new(nodes, n);
    }
    json_object_set_new(o, "plan", json_pack("{s:s, s:s, s:s, s:o}", "jid", j.id, "name", j.name, "type",
                                             "STREAMING", "nodes", nodes));
    free(j.vertices);
    json_object_set_new(o, "vertices", vs);
    json_object_set_new(o, "status-counts", counts);
    return send_json(c, MHD_HTTP_OK, o, NULL);
}

static enum MHD_Result h_cancel(sl_rest_t *r, struct MHD_Connection *c, const char *jid) {
    const char *mode = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "mode");
    char b[128];
    if (mode && strcmp(mode, "cancel"))
        return send_errorf(c, MHD_HTTP_BAD_REQUEST, "unsupported mode '%s' (sluice supports mode=cancel)",
                           clip(mode, b, sizeof b));
    if (!r->p.cancel) return send_errorf(c, 500, "cancelling jobs is not supported");
    char err[512] = "";
    int rc = r->p.cancel(r->p.ud, jid, err, sizeof err);
    if (rc) return send_provider_error(c, rc, err, "could not cancel the job");
    return send_json(c, MHD_HTTP_ACCEPTED, json_object(), NULL);
}

static enum MHD_Result h_taskmanagers(sl_rest_t *r, struct MHD_Connection *c) {
    if (!r->p.taskmanagers) return send_errorf(c, 500, "listing taskmanagers is not supported");
    sl_rest_taskmanager_t *tms = NULL;
    int n = 0;
    char err[512] = "";
    int rc = r->p.taskmanagers(r->p.ud, &tms, &n, err, sizeof err);
    if (rc) {
        free(tms);
        return send_provider_error(c, rc, err, "could not list the taskmanagers");
    }
    json_t *a = json_array();
    for (int i = 0; i < n; i++) {
        sl_rest_taskmanager_t *t = &tms[i];
        t->id[sizeof t->id - 1] = t->path[sizeof t->path - 1] = 0;
        json_t *o = json_pack("{s:s, s:s, s:i, s:I, s:i, s:i}", "id", t->id, "path", t->path, "dataPort",
                              t->data_port, "timeSinceLastHeartbeat", (json_int_t)t->time_since_last_heartbeat,
                              "slotsNumber", t->slots_number, "freeSlots", t->free_slots);
        if (o) json_array_append_new(a, o);
    }
    free(tms);
    return send_json(c, MHD_HTTP_OK, json_pack("{s:o}", "taskmanagers", a), NULL);
}

/* Flink's TaskManager metric ids where a native process has the same
 * thing (no JVM: no heap or GC figures). */
static enum MHD_Result h_tm_metrics(sl_rest_t *r, struct MHD_Connection *c, const char *tm_id) {
    if (!r->p.taskmanager_metrics) return send_errorf(c, 500, "TaskManager metrics are not supported");
    sl_rest_tm_metrics_t m;
    memset(&m, 0, sizeof m);
    char err[512] = "";
    int rc = r->p.taskmanager_metrics(r->p.ud, tm_id, &m, err, sizeof err);
    if (rc) return send_provider_error(c, rc, err, "could not get the TaskManager's metrics");
    json_t *map = json_object();
    char v[64];
#define PUT(name, fmt, x) (snprintf(v, sizeof v, fmt, x), json_object_set_new(map, name, json_string(v)))
    PUT("Status.ProcessTree.Memory.RSS", "%lld", (long long)m.rss_bytes);
    PUT("Status.ProcessTree.CPU.Time", "%lld", (long long)m.cpu_ms);
    if (m.cpu_usage >= 0) PUT("Status.ProcessTree.CPU.Usage", "%.1f", m.cpu_usage);
    PUT("Status.ProcessTree.Threads.Count", "%lld", (long long)m.threads);
    PUT("Status.TaskSlots.Total", "%d", m.slots_total);
    PUT("Status.TaskSlots.Available", "%d", m.slots_free);
#undef PUT
    json_t *o = sl_rest_metric_list(map, MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "get"));
    json_decref(map);
    return send_json(c, MHD_HTTP_OK, o, NULL);
}

static enum MHD_Result h_jars(sl_rest_t *r, struct MHD_Connection *c) {
    json_t *files = json_array();
    pthread_mutex_lock(&r->mu);
    for (int i = 0; i < r->njars; i++)
        json_array_append_new(files, json_pack("{s:s, s:s, s:I, s:[]}", "id", r->jars[i].id, "name",
                                               r->jars[i].name, "uploaded", (json_int_t)r->jars[i].uploaded,
                                               "entry"));
    char addr[300];
    snprintf(addr, sizeof addr, "http://%s:%d", r->bind_address, r->port);
    pthread_mutex_unlock(&r->mu);
    return send_json(c, MHD_HTTP_OK, json_pack("{s:s, s:o}", "address", addr, "files", files), NULL);
}

static enum MHD_Result h_jar_delete(sl_rest_t *r, struct MHD_Connection *c, const char *jarid) {
    char b[128], path[4096 + 256];
    pthread_mutex_lock(&r->mu);
    int i = jar_find(r, jarid);
    if (i >= 0) {
        snprintf(path, sizeof path, "%s/%s", r->dir, r->jars[i].id); /* our id, never the URL's bytes */
        unlink(path);
        r->jars[i] = r->jars[--r->njars];
    }
    pthread_mutex_unlock(&r->mu);
    if (i < 0) return send_errorf(c, MHD_HTTP_NOT_FOUND, "jar '%s' not found", clip(jarid, b, sizeof b));
    return send_json(c, MHD_HTTP_OK, json_object(), NULL);
}

/* Splits Flink's programArgs string like a shell would (blanks separate,
 * '...' and "..." group and are removed). */
static void split_args(const char *s, char ***args, int *nargs) {
    char *tok = sl_malloc(strlen(s) + 1);
    for (const char *p = s;;) {
        while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        if (!*p) break;
        size_t o = 0;
        while (*p && *p != ' ' && *p != '\t' && *p != '\n' && *p != '\r') {
            if (*p == '\'' || *p == '"') {
                char qch = *p++;
                while (*p && *p != qch) tok[o++] = *p++;
                if (*p) p++;
            } else tok[o++] = *p++;
        }
        *args = sl_realloc(*args, (size_t)(*nargs + 1) * sizeof **args);
        (*args)[(*nargs)++] = sl_strndup(tok, o);
    }
    sl_free(tok);
}

static enum MHD_Result h_jar_run(sl_rest_t *r, struct MHD_Connection *c, req_t *q) {
    char b[128], path[4096 + 256];
    bool builtin = !strcmp(q->id, SL_REST_BUILTIN_JAR);
    if (!builtin) {
        pthread_mutex_lock(&r->mu);
        int i = jar_find(r, q->id);
        if (i >= 0) snprintf(path, sizeof path, "%s/%s", r->dir, r->jars[i].id);
        pthread_mutex_unlock(&r->mu);
        if (i < 0) return send_errorf(c, MHD_HTTP_NOT_FOUND, "jar '%s' not found", clip(q->id, b, sizeof b));
    }
    if (!r->p.run) return send_errorf(c, 500, "running jobs is not supported");
    json_t *body = NULL;
    if (q->body.len) {
        json_error_t je;
        body = json_loadb((const char *)q->body.p, q->body.len, JSON_REJECT_DUPLICATES, &je);
        if (!body) return send_errorf(c, MHD_HTTP_BAD_REQUEST, "request body is not valid JSON: %s", je.text);
        if (!json_is_object(body)) {
            json_decref(body);
            return send_errorf(c, MHD_HTTP_BAD_REQUEST, "request body is not a JSON object");
        }
    } else body = json_object();
    sl_rest_run_t run = {.jar_id = q->id, .artifact_path = builtin ? NULL : path};
    const char *bad = NULL, *why = NULL;
    json_t *v;
    if ((v = json_object_get(body, "entryClass")) && !json_is_null(v)) {
        if (json_is_string(v) && json_string_length(v) > 0) run.entry_class = json_string_value(v);
        else bad = "entryClass", why = "a non-empty string";
    }
    if (!bad && (v = json_object_get(body, "parallelism")) && !json_is_null(v)) {
        json_int_t p = json_is_integer(v) ? json_integer_value(v) : 0;
        if (!json_is_integer(v) || (p < 1 && p != -1) || p > 1 << 20) bad = "parallelism", why = "a positive integer";
        else run.parallelism = p > 0 ? (int)p : 0;
    }
    if (!bad && (v = json_object_get(body, "savepointPath")) && !json_is_null(v)) {
        if (json_is_string(v)) run.savepoint_path = json_string_length(v) ? json_string_value(v) : NULL;
        else bad = "savepointPath", why = "a string";
    }
    if (!bad && (v = json_object_get(body, "allowNonRestoredState")) && !json_is_null(v)) {
        if (json_is_boolean(v)) run.allow_non_restored_state = json_is_true(v);
        else bad = "allowNonRestoredState", why = "true or false";
    }
    json_t *list = json_object_get(body, "programArgsList");
    if (!bad && list && !json_is_null(list)) {
        if (!json_is_array(list)) bad = "programArgsList", why = "an array of strings";
        for (size_t i = 0; !bad && i < json_array_size(list); i++)
            if (!json_is_string(json_array_get(list, i))) bad = "programArgsList", why = "an array of strings";
    }
    json_t *str = json_object_get(body, "programArgs");
    if (!bad && str && !json_is_null(str) && !json_is_string(str)) bad = "programArgs", why = "a string";
    if (bad) {
        json_decref(body);
        return send_errorf(c, MHD_HTTP_BAD_REQUEST, "bad request: %s must be %s", bad, why);
    }
    if (list && json_array_size(list)) {
        run.nargs = (int)json_array_size(list);
        run.args = sl_calloc((size_t)run.nargs, sizeof *run.args);
        for (int i = 0; i < run.nargs; i++) run.args[i] = sl_strdup(json_string_value(json_array_get(list, (size_t)i)));
    } else if (json_is_string(str)) split_args(json_string_value(str), &run.args, &run.nargs);
    char jobid[128] = "", err[512] = "";
    int rc = r->p.run(r->p.ud, &run, jobid, sizeof jobid, err, sizeof err);
    for (int i = 0; i < run.nargs; i++) sl_free(run.args[i]);
    sl_free(run.args);
    json_decref(body);
    if (rc) return send_provider_error(c, rc, err, "could not run the job");
    jobid[sizeof jobid - 1] = 0;
    return send_json(c, MHD_HTTP_OK, json_pack("{s:s}", "jobid", jobid), NULL);
}

/* ---- checkpoints, job configuration, exceptions, savepoints --------------- */

/* The request body as a JSON object (an empty body is {}); NULL with
 * *why set when it is not one. */
static json_t *body_object(req_t *q, char *why, size_t cap) {
    if (!q->body.len) return json_object();
    json_error_t je;
    json_t *body = json_loadb((const char *)q->body.p, q->body.len, JSON_REJECT_DUPLICATES, &je);
    if (!body) {
        snprintf(why, cap, "request body is not valid JSON: %s", je.text);
        return NULL;
    }
    if (!json_is_object(body)) {
        json_decref(body);
        snprintf(why, cap, "request body is not a JSON object");
        return NULL;
    }
    return body;
}

/* A savepoint directory a client may name: absolute, no ".." component. */
static bool savepoint_dir_ok(const char *d) {
    if (d[0] != '/' && strncmp(d, "s3://", 5) != 0) return false;
    for (const char *p = d; (p = strstr(p, "..")); p += 2)
        if ((p == d || p[-1] == '/') && (p[2] == 0 || p[2] == '/')) return false;
    return true;
}

/* A trigger id as it may appear in a URL (ours are 32 hex digits). */
static bool trigger_id_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > 64) return false;
    for (size_t i = 0; i < n; i++)
        if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
              s[i] == '-' || s[i] == '_'))
            return false;
    return true;
}

/* POST /jobs/:jobid/checkpoints, /savepoints and /stop. */
static enum MHD_Result h_trigger(sl_rest_t *r, struct MHD_Connection *c, req_t *q, bool savepoint, bool stop) {
    char why[512], b[128];
    json_t *body = body_object(q, why, sizeof why);
    if (!body) return send_errorf(c, MHD_HTTP_BAD_REQUEST, "%s", why);
    const char *bad = NULL, *want = NULL;
    sl_rest_savepoint_req_t sp = {.stop = stop};
    json_t *v;
    if ((v = json_object_get(body, "triggerId")) && !json_is_null(v) && !json_is_string(v))
        bad = "triggerId", want = "a string";
    if (!savepoint && !bad && (v = json_object_get(body, "checkpointType")) && !json_is_null(v)) {
        const char *t = json_string_value(v);
        if (!t || (strcmp(t, "CONFIGURED") && strcmp(t, "FULL") && strcmp(t, "INCREMENTAL")))
            bad = "checkpointType", want = "one of \"CONFIGURED\", \"FULL\", \"INCREMENTAL\"";
    }
    const char *dir_field = stop ? "targetDirectory" : "target-directory";
    if (savepoint && !bad && (v = json_object_get(body, dir_field)) && !json_is_null(v)) {
        if (!json_is_string(v)) bad = dir_field, want = "a string";
        else sp.target_dir = json_string_value(v);
    }
    const char *flag = stop ? "drain" : "cancel-job";
    if (savepoint && !bad && (v = json_object_get(body, flag)) && !json_is_null(v)) {
        if (!json_is_boolean(v)) bad = flag, want = "true or false";
        else if (stop) sp.drain = json_is_true(v);
        else sp.cancel_job = json_is_true(v);
    }
    if (savepoint && !bad && (v = json_object_get(body, "formatType")) && !json_is_null(v)) {
        const char *t = json_string_value(v);
        if (!t || (strcmp(t, "CANONICAL") && strcmp(t, "NATIVE")))
            bad = "formatType", want = "\"CANONICAL\" or \"NATIVE\"";
        else sp.native = !strcmp(t, "NATIVE");
    }
    if (bad) {
        json_decref(body);
        return send_errorf(c, MHD_HTTP_BAD_REQUEST, "bad request: %s must be %s", bad, want);
    }
    if (sp.target_dir && !savepoint_dir_ok(sp.target_dir)) {
        enum MHD_Result res = send_errorf(c, MHD_HTTP_BAD_REQUEST,
                                          "bad request: %s '%s' must be an absolute path without '..' components",
                                          dir_field, clip(sp.target_dir, b, sizeof b));
        json_decref(body);
        return res;
    }
    char tid[80] = "", err[512] = "";
    int rc;
    if (savepoint) {
        if (!r->p.savepoint) {
            json_decref(body);
            return send_errorf(c, 500, "savepoints are not supported");
        }
        rc = r->p.savepoint(r->p.ud, q->id, &sp, tid, 65, err, sizeof err);
    } else {
        if (!r->p.checkpoint) {
            json_decref(body);
            return send_errorf(c, 500, "triggering checkpoints is not supported");
        }
        rc = r->p.checkpoint(r->p.ud, q->id, tid, 65, err, sizeof err);
    }
    json_decref(body);
    if (rc) return send_provider_error(c, rc, err, savepoint ? "could not trigger the savepoint"
                                                             : "could not trigger the checkpoint");
    tid[64] = 0;
    return send_json(c, MHD_HTTP_ACCEPTED, json_pack("{s:s}", "request-id", tid), NULL);
}

/* GET .../checkpoints/:triggerid and .../savepoints/:triggerid. */
static enum MHD_Result h_operation(sl_rest_t *r, struct MHD_Connection *c, req_t *q, bool savepoint) {
    char b[128], err[512] = "";
    if (!trigger_id_ok(q->id2))
        return send_errorf(c, MHD_HTTP_NOT_FOUND, "Operation not found under key: %s", clip(q->id2, b, sizeof b));
    if (!r->p.operation) return send_errorf(c, 500, "asynchronous operations are not supported");
    sl_rest_operation_t *op = sl_calloc(1, sizeof *op);
    int rc = r->p.operation(r->p.ud, q->id, q->id2, op, err, sizeof err);
    if (rc) {
        sl_free(op);
        return send_provider_error(c, rc, err, "could not get the operation's status");
    }
    op->location[sizeof op->location - 1] = op->failure[sizeof op->failure - 1] = 0;
    json_t *j = sl_rest_operation_json(op, savepoint);
    sl_free(op);
    return send_json(c, MHD_HTTP_OK, j, NULL);
}

/* A provider's answer for checkpoint statistics: SL_ESTATE means the job
 * does not checkpoint, which Flink answers with 404. */
static enum MHD_Result send_ckpt_error(struct MHD_Connection *c, int rc, const char *err, const char *jid) {
    if (rc == SL_ESTATE)
        return send_errorf(c, MHD_HTTP_NOT_FOUND, "%s", err[0] ? err : "Checkpointing is not enabled for this job");
    if (rc == SL_ENOTFOUND && !err[0]) return send_errorf(c, MHD_HTTP_NOT_FOUND, "Job %s not found", jid);
    return send_provider_error(c, rc, err, "could not get the checkpoint statistics");
}

/* GET /jobs/:jobid/checkpoints, .../details/:checkpointid[/subtasks/:vertexid]. */
static enum MHD_Result h_checkpoints(sl_rest_t *r, struct MHD_Connection *c, req_t *q) {
    char b[128], err[512] = "";
    int64_t id = -1;
    if (q->route != R_CKPTS) {
        char *end = NULL;
        errno = 0;
        long long v = strtoll(q->id2, &end, 10);
        if (q->id2[0] < '0' || q->id2[0] > '9' || *end || errno)
            return send_errorf(c, MHD_HTTP_BAD_REQUEST, "bad request: checkpointid '%s' must be a non-negative integer",
                               clip(q->id2, b, sizeof b));
        id = v;
    }
    if (!r->p.checkpoints) return send_errorf(c, 500, "checkpoint statistics are not supported");
    sl_rest_checkpoints_t *ck = sl_calloc(1, sizeof *ck);
    int rc = r->p.checkpoints(r->p.ud, q->id, ck, err, sizeof err);
    enum MHD_Result res;
    int h = -1, v = -1;
    for (int i = 0; rc == 0 && i < ck->nvertices; i++) ck->vertices[i].id[sizeof ck->vertices[i].id - 1] = 0;
    if (rc) res = send_ckpt_error(c, rc, err, q->id);
    else if (q->route == R_CKPTS) res = send_json(c, MHD_HTTP_OK, sl_rest_checkpoints_json(ck), NULL);
    else if ((h = sl_rest_checkpoint_find(ck, id)) < 0)
        res = send_errorf(c, MHD_HTTP_NOT_FOUND, "Could not find checkpointing statistics for checkpoint %lld.",
                          (long long)id);
    else if (q->route == R_CKPT_DETAIL) res = send_json(c, MHD_HTTP_OK, sl_rest_checkpoint_detail_json(ck, h), NULL);
    else if ((v = sl_rest_vertex_find(ck, q->id3)) < 0)
        res = send_errorf(c, MHD_HTTP_NOT_FOUND, "There is no checkpoint statistics for task %s.",
                          clip(q->id3, b, sizeof b));
    else res = send_json(c, MHD_HTTP_OK, sl_rest_checkpoint_subtasks_json(ck, h, v), NULL);
    sl_rest_checkpoints_clear(ck);
    sl_free(ck);
    return res;
}

static enum MHD_Result h_ckpt_config(sl_rest_t *r, struct MHD_Connection *c, const char *jid) {
    if (!r->p.checkpoint_config) return send_errorf(c, 500, "checkpoint configuration is not supported");
    sl_rest_ckpt_config_t cc;
    memset(&cc, 0, sizeof cc);
    char err[512] = "";
    int rc = r->p.checkpoint_config(r->p.ud, jid, &cc, err, sizeof err);
    if (rc) return send_ckpt_error(c, rc, err, jid);
    cc.state_backend[sizeof cc.state_backend - 1] = cc.checkpoint_storage[sizeof cc.checkpoint_storage - 1] = 0;
    json_t *j = sl_rest_ckpt_config_json(&cc);
    return send_json(c, MHD_HTTP_OK, j ? j : json_object(), NULL);
}

static enum MHD_Result h_job_config(sl_rest_t *r, struct MHD_Connection *c, const char *jid) {
    if (!r->p.job_config) return send_errorf(c, 500, "job configuration is not supported");
    sl_rest_job_config_t *jc = sl_calloc(1, sizeof *jc);
    char err[512] = "";
    int rc = r->p.job_config(r->p.ud, jid, jc, err, sizeof err);
    enum MHD_Result res;
    if (rc) res = send_provider_error(c, rc, err, "could not get the job's configuration");
    else {
        jc->name[sizeof jc->name - 1] = jc->restart_strategy[sizeof jc->restart_strategy - 1] = 0;
        jc->execution_mode[sizeof jc->execution_mode - 1] = 0;
        for (int i = 0; i < jc->nuser_config; i++)
            jc->user_config[i].key[sizeof jc->user_config[i].key - 1] =
                jc->user_config[i].value[sizeof jc->user_config[i].value - 1] = 0;
        res = send_json(c, MHD_HTTP_OK, sl_rest_job_config_json(jid, jc), NULL);
    }
    free(jc->user_config);
    sl_free(jc);
    return res;
}

static enum MHD_Result h_exceptions(sl_rest_t *r, struct MHD_Connection *c, const char *jid) {
    char b[128], err[512] = "";
    int max = -1;
    const char *m = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "maxExceptions");
    if (m) {
        char *end = NULL;
        long v = strtol(m, &end, 10);
        if (!m[0] || *end || v < 0 || v > 1 << 20)
            return send_errorf(c, MHD_HTTP_BAD_REQUEST, "bad request: maxExceptions '%s' must be a non-negative integer",
                               clip(m, b, sizeof b));
        max = (int)v;
    }
    if (!r->p.exceptions) return send_errorf(c, 500, "the exception history is not supported");
    sl_rest_exception_t *e = NULL;
    int n = 0;
    int rc = r->p.exceptions(r->p.ud, jid, &e, &n, err, sizeof err);
    if (rc) {
        free(e);
        return send_provider_error(c, rc, err, "could not get the job's exceptions");
    }
    for (int i = 0; i < n; i++) {
        e[i].name[sizeof e[i].name - 1] = e[i].stacktrace[sizeof e[i].stacktrace - 1] = 0;
        e[i].task_name[sizeof e[i].task_name - 1] = e[i].location[sizeof e[i].location - 1] = 0;
        e[i].tm_id[sizeof e[i].tm_id - 1] = 0;
    }
    json_t *j = sl_rest_exceptions_json(e, n, max);
    free(e);
    return send_json(c, MHD_HTTP_OK, j ? j : json_object(), NULL);
}

/* A job id as it may appear in a URL. */
static bool job_id_ok(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n > MAX_ID_SEG) return false;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' ||
              ch == '_'))
            return false;
    }
    return true;
}

/* Constant-time check of the Authorization header. */
static bool authorized(sl_rest_t *r, struct MHD_Connection *c) {
    if (!r->token) return true;
    const char *h = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_AUTHORIZATION);
    if (!h || strncmp(h, "Bearer ", 7)) return false;
    h += 7;
    size_t n = strlen(h), m = strlen(r->token);
    unsigned char diff = n != m;
    for (size_t i = 0; i < m; i++) diff |= (unsigned char)(r->token[i] ^ (i < n ? h[i] : 0));
    return diff == 0;
}

/* ---- the web UI (web_assets.h) ------------------------------------------- */

/* The embedded file url names ("/" is index.html, "/web/<name>" a file
 * by its exact name), or NULL: the name is only compared with the table's. */
static const sl_web_asset_t *web_asset(const char *url) {
    const char *name;
    if (!strcmp(url, "/")) name = "index.html";
    else if (!strncmp(url, "/web/", 5)) name = url + 5;
    else return NULL;
    for (int i = 0; i < sl_web_nassets; i++)
        if (!strcmp(sl_web_assets[i].name, name)) return &sl_web_assets[i];
    return NULL;
}

static enum MHD_Result send_asset(struct MHD_Connection *c, const sl_web_asset_t *a) {
    const char *inm = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_IF_NONE_MATCH);
    bool fresh = inm && !strcmp(inm, a->etag);
    struct MHD_Response *r = fresh ? MHD_create_response_from_buffer(0, NULL, MHD_RESPMEM_PERSISTENT)
                                   : MHD_create_response_from_buffer(a->len, (void *)a->data, MHD_RESPMEM_PERSISTENT);
    if (!r) return MHD_NO;
    if (!fresh) MHD_add_response_header(r, "Content-Type", a->content_type);
    /* not fingerprinted names: revalidate every time (cheap with the ETag) */
    MHD_add_response_header(r, "Cache-Control", "no-cache");
    MHD_add_response_header(r, "ETag", a->etag);
    MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
    MHD_add_response_header(r, "X-Frame-Options", "DENY");
    MHD_add_response_header(r, "Content-Security-Policy",
                            "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
                            "connect-src 'self'; frame-ancestors 'none'");
    enum MHD_Result ret = MHD_queue_response(c, fresh ? MHD_HTTP_NOT_MODIFIED : MHD_HTTP_OK, r);
    MHD_destroy_response(r);
    return ret;
}

/* ---- metrics (shapes in rest_metrics.c) ---------------------------------- */

static enum MHD_Result h_vertex(sl_rest_t *r, struct MHD_Connection *c, const req_t *q) {
    if (!r->p.vertex_metrics) return send_errorf(c, 500, "vertex metrics are not supported");
    sl_rest_vertex_metrics_t m;
    memset(&m, 0, sizeof m);
    char err[512] = "";
    int rc = r->p.vertex_metrics(r->p.ud, q->id, q->id3, &m, err, sizeof err);
    if (rc == 0 && (m.vertex.parallelism < 0 || (m.vertex.parallelism > 0 && !m.subtasks)))
        rc = sl_errf(err, sizeof err, SL_EIO, "the provider returned no subtasks");
    if (rc) {
        free(m.subtasks);
        return send_provider_error(c, rc, err, "could not get the vertex's metrics");
    }
    m.vertex.id[sizeof m.vertex.id - 1] = m.vertex.name[sizeof m.vertex.name - 1] = 0;
    for (int s = 0; s < m.vertex.parallelism; s++) {
        sl_rest_subtask_metrics_t *st = &m.subtasks[s];
        st->status[sizeof st->status - 1] = st->tm_id[sizeof st->tm_id - 1] = 0;
        if (st->nops < 0 || st->nops > SL_REST_MAX_CHAIN) st->nops = 0;
        for (int k = 0; k < st->nops; k++) st->ops[k].name[sizeof st->ops[k].name - 1] = 0;
    }
    int64_t now = sl_wall_ms();
    json_t *o = NULL;
    if (q->route == R_VERTEX) {
        o = sl_rest_vertex_detail_json(&m, now);
    } else if (q->route == R_VERTEX_BP) {
        o = sl_rest_backpressure_json(&m, now);
    } else if (q->route == R_VERTEX_WM) {
        o = sl_rest_watermarks_json(&m);
    } else {
        json_t *map = sl_rest_vertex_metric_map(&m);
        o = sl_rest_metric_list(map, MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "get"));
        json_decref(map);
    }
    free(m.subtasks);
    return send_json(c, MHD_HTTP_OK, o, NULL);
}

/* GET /jobs/:jobid/metrics: Flink's job metrics, from the job's details
 * and its checkpoint statistics. */
static enum MHD_Result h_job_metrics(sl_rest_t *r, struct MHD_Connection *c, const char *jid) {
    if (!r->p.job_detail) return send_errorf(c, 500, "job metrics are not supported");
    sl_rest_job_t j;
    memset(&j, 0, sizeof j);
    char err[512] = "";
    int rc = r->p.job_detail(r->p.ud, jid, &j, err, sizeof err);
    free(j.vertices);
    if (rc) return send_provider_error(c, rc, err, "could not get the job's metrics");
    j.state[sizeof j.state - 1] = 0;
    int64_t now = sl_wall_ms();
    bool ended = j.end_time >= 0 || !strcmp(j.state, "FINISHED") || !strcmp(j.state, "CANCELED") ||
                 !strcmp(j.state, "FAILED");
    int64_t completed = 0, failed = 0, in_progress = 0, last_duration = -1, last_size = -1, last_id = -1;
    if (r->p.checkpoints) {
        sl_rest_checkpoints_t ck;
        memset(&ck, 0, sizeof ck);
        char cerr[256];
        if (r->p.checkpoints(r->p.ud, jid, &ck, cerr, sizeof cerr) == 0) {
            completed = ck.completed;
            failed = ck.failed;
            in_progress = ck.in_progress;
            int ntasks = 0;
            for (int v = 0; v < ck.nvertices; v++) ntasks += ck.vertices[v].parallelism;
            for (int h = 0; h < ck.nhistory; h++) {
                const sl_rest_checkpoint_t *x = &ck.history[h];
                if (strncmp(x->status, "COMPLETED", sizeof x->status) || x->id <= last_id) continue;
                last_id = x->id;
                last_duration = x->end_to_end_duration;
                last_size = 0;
                for (int t = 0; x->subtasks && t < ntasks; t++) last_size += x->subtasks[t].checkpointed_size;
            }
        }
        sl_rest_checkpoints_clear(&ck);
    }
    json_t *map = json_object();
    char b[32];
#define PUT(name, v) (snprintf(b, sizeof b, "%lld", (long long)(v)), json_object_set_new(map, name, json_string(b)))
    PUT("numRestarts", j.num_restarts);
    PUT("uptime", ended ? -1 : now - j.start_time);
    PUT("lastCheckpointDuration", last_duration);
    PUT("lastCheckpointSize", last_size);
    PUT("numberOfCompletedCheckpoints", completed);
    PUT("numberOfFailedCheckpoints", failed);
    PUT("numberOfInProgressCheckpoints", in_progress);
#undef PUT
    json_t *o = sl_rest_metric_list(map, MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "get"));
    json_decref(map);
    return send_json(c, MHD_HTTP_OK, o, NULL);
}

/* ---- state queries ------------------------------------------------------- */

static void *sq_main(void *arg) {
    sq_work_t *w = arg;
    sl_rest_t *r = w->r;
    struct MHD_Connection *c = w->c;
    int http = 0, rc;
    char *body = NULL, err[1024] = "";
    rc = r->p.state_query(r->p.ud, w->job, w->uid, w->state, w->key, w->ns, w->timeout_ms, &http, &body, err,
                          sizeof err);
    pthread_mutex_lock(&r->sq_mu);
    w->rc = rc;
    w->http = http;
    w->body = body;
    memcpy(w->err, err, sizeof err);
    w->done = true;
    pthread_mutex_unlock(&r->sq_mu);
    MHD_resume_connection(c); /* w may be freed from here on */
    pthread_mutex_lock(&r->sq_mu);
    r->sq_running--;
    pthread_cond_broadcast(&r->sq_cv);
    pthread_mutex_unlock(&r->sq_mu);
    return NULL;
}

/* GET /jobs/:jobid/state: called once to start the lookup (the connection
 * is suspended), and again when its thread resumed it, to answer. */
static enum MHD_Result h_state(sl_rest_t *r, struct MHD_Connection *c, req_t *q) {
    char b[128];
    if (q->sq) {
        pthread_mutex_lock(&r->sq_mu);
        bool done = q->sq->done;
        pthread_mutex_unlock(&r->sq_mu);
        if (!done) return MHD_YES;
        sq_work_t *w = q->sq;
        if (w->rc) return send_provider_error(c, w->rc, w->err, "could not query the job's state");
        json_t *j = w->body ? json_loads(w->body, 0, NULL) : NULL;
        if (!j) return send_errorf(c, 500, "the state query gave no answer");
        return send_json(c, (unsigned)w->http, j, NULL);
    }
    const char *uid = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "uid");
    const char *key = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "key");
    const char *state = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "state");
    const char *ns = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "namespace");
    const char *tmo = MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "timeout");
    if (!uid || !uid[0])
        return send_errorf(c, MHD_HTTP_BAD_REQUEST, "bad request: the query parameter 'uid' (the operator's uid) is "
                                                    "required");
    if (!key) return send_errorf(c, MHD_HTTP_BAD_REQUEST, "bad request: the query parameter 'key' is required");
    int64_t timeout_ms = 0;
    if (tmo) {
        char *end = NULL;
        long long v = strtoll(tmo, &end, 10);
        if (!tmo[0] || *end || v < 1 || v > 60000)
            return send_errorf(c, MHD_HTTP_BAD_REQUEST, "bad request: timeout '%s' must be 1..60000 (ms)",
                               clip(tmo, b, sizeof b));
        timeout_ms = v;
    }
    if (!r->p.state_query) return send_errorf(c, 500, "state queries are not supported");
    sq_work_t *w = sl_calloc(1, sizeof *w);
    w->r = r;
    w->c = c;
    w->job = sl_strdup(q->id);
    w->uid = sl_strdup(uid);
    w->key = sl_strdup(key);
    w->state = state && state[0] ? sl_strdup(state) : NULL;
    w->ns = ns ? sl_strdup(ns) : NULL;
    w->timeout_ms = timeout_ms;
    q->sq = w;
    pthread_mutex_lock(&r->sq_mu);
    r->sq_running++;
    pthread_mutex_unlock(&r->sq_mu);
    MHD_suspend_connection(c); /* before the thread can resume it */
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_t th;
    if (pthread_create(&th, &at, sq_main, w) != 0) abort();
    pthread_attr_destroy(&at);
    return MHD_YES;
}

/* Called once with the headers, once per piece of body, once at the end. */
static enum MHD_Result access_handler(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                      const char *version, const char *upload_data, size_t *upload_data_size,
                                      void **con_cls) {
    SL_UNUSED(version);
    sl_rest_t *r = cls;
    req_t *q = *con_cls;
    if (!q) {
        q = sl_calloc(1, sizeof *q);
        q->fd = -1;
        *con_cls = q;
        char b[128];
        /* The UI's files: before authentication (the page asks for the
         * token), after the REST paths (which never look like these). */
        const sl_web_asset_t *wa = NULL;
        if ((!strcmp(method, "GET") || !strcmp(method, "HEAD")) &&
            route_of(url, q->id, sizeof q->id, &q->id2, &q->id3) == R_NONE && (wa = web_asset(url))) {
            q->answered = true;
            return send_asset(c, wa);
        }
        if (!authorized(r, c)) {
            q->answered = true;
            return send_errorf(c, MHD_HTTP_UNAUTHORIZED, "Unauthorized: a valid 'Authorization: Bearer <token>' "
                                                         "header is required");
        }
        q->route = route_of(url, q->id, sizeof q->id, &q->id2, &q->id3);
        if (q->route == R_NONE) {
            q->answered = true;
            return send_errorf(c, MHD_HTTP_NOT_FOUND, "Not found: %s", clip(url, b, sizeof b));
        }
        if (!method_allowed(q->route, method)) {
            q->answered = true;
            char msg[256];
            snprintf(msg, sizeof msg, "Method %.16s is not allowed on %s (allowed: %s)", method,
                     clip(url, b, sizeof b), route_methods(q->route));
            return send_error_allow(c, MHD_HTTP_METHOD_NOT_ALLOWED, route_methods(q->route), msg);
        }
        if (job_route(q->route) && !job_id_ok(q->id)) {
            q->answered = true;
            return send_errorf(c, MHD_HTTP_NOT_FOUND, "Job %s not found", clip(q->id, b, sizeof b));
        }
        int64_t limit = q->route == R_JAR_UPLOAD ? r->max_upload : MAX_JSON_BODY;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
        if (cl && strtoll(cl, NULL, 10) > limit) {
            q->answered = true;
            return send_errorf(c, MHD_HTTP_CONTENT_TOO_LARGE, "request body of %.20s bytes is over the maximum of %lld",
                               cl, (long long)limit);
        }
        if (q->route == R_JAR_UPLOAD) return upload_begin(r, c, q);
        return MHD_YES;
    }
    if (q->answered) { /* an early answer: whatever else arrives is dropped */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (*upload_data_size) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        q->received += (int64_t)n;
        int64_t limit = q->route == R_JAR_UPLOAD ? r->max_upload : MAX_JSON_BODY;
        if (q->received > limit && q->err_status != MHD_HTTP_CONTENT_TOO_LARGE) {
            /* Answered once the body has ended (closing the connection
             * with unread data would reset it and lose the answer), the
             * rest of the body dropped; past MAX_DISCARD more we hang up. */
            q->err_status = 0;
            req_set_error(q, MHD_HTTP_CONTENT_TOO_LARGE, "request body is over the maximum of %lld bytes",
                          (long long)limit);
        }
        if (q->err_status == MHD_HTTP_CONTENT_TOO_LARGE) {
            if (q->received - limit > MAX_DISCARD) {
                q->answered = true;
                return send_errorf(c, q->err_status, "%s", q->err);
            }
            return MHD_YES;
        }
        if (q->route == R_JAR_UPLOAD) {
            if (!q->err_status && MHD_post_process(q->pp, upload_data, n) != MHD_YES)
                req_set_error(q, MHD_HTTP_BAD_REQUEST, "malformed multipart body");
        } else if (body_route(q->route)) sl_buf_append(&q->body, upload_data, n);
        return MHD_YES; /* other routes ignore their body */
    }
    if (q->err_status && q->route != R_JAR_UPLOAD) return send_errorf(c, q->err_status, "%s", q->err);
    switch (q->route) {
    case R_CONFIG: return h_config(r, c);
    case R_OVERVIEW: return h_overview(r, c);
    case R_JOBS: return h_jobs(r, c, false);
    case R_JOBS_OVERVIEW: return h_jobs(r, c, true);
    case R_JOB: return !strcmp(method, "PATCH") ? h_cancel(r, c, q->id) : h_job(r, c, q->id);
    case R_TASKMANAGERS: return h_taskmanagers(r, c);
    case R_TM_METRICS: return h_tm_metrics(r, c, q->id);
    case R_JAR_UPLOAD: return upload_end(r, c, q);
    case R_JARS: return h_jars(r, c);
    case R_JAR_RUN: return h_jar_run(r, c, q);
    case R_JAR: return h_jar_delete(r, c, q->id);
    case R_CKPTS: return !strcmp(method, "POST") ? h_trigger(r, c, q, false, false) : h_checkpoints(r, c, q);
    case R_CKPT_CONFIG: return h_ckpt_config(r, c, q->id);
    case R_CKPT_DETAIL: case R_CKPT_SUBTASKS: return h_checkpoints(r, c, q);
    case R_CKPT_OP: return h_operation(r, c, q, false);
    case R_JOB_CONFIG: return h_job_config(r, c, q->id);
    case R_EXCEPTIONS: return h_exceptions(r, c, q->id);
    case R_SAVEPOINTS: return h_trigger(r, c, q, true, false);
    case R_STOP: return h_trigger(r, c, q, true, true);
    case R_SAVEPOINT_OP: return h_operation(r, c, q, true);
    case R_JOB_METRICS: return h_job_metrics(r, c, q->id);
    case R_VERTEX: case R_VERTEX_METRICS: case R_VERTEX_BP: case R_VERTEX_WM: return h_vertex(r, c, q);
    case R_STATE: return h_state(r, c, q);
    case R_NONE: break;
    }
    return send_errorf(c, MHD_HTTP_NOT_FOUND, "Not found");
}

/* ---- life cycle ----------------------------------------------------------- */

/* Decodes %HH in URLs and query values, except %00: a NUL would cut the
 * string the handler sees ("/jars/builtin%00/run" must not become
 * "/jars/builtin"), so it stays as the three characters. */
static size_t unescape(void *cls, struct MHD_Connection *c, char *s) {
    SL_UNUSED(cls); SL_UNUSED(c);
    char *w = s;
    for (const char *p = s; *p;) {
        int hi, lo;
#define HEX(ch) ((ch) >= '0' && (ch) <= '9' ? (ch) - '0' : (ch) >= 'a' && (ch) <= 'f' ? (ch) - 'a' + 10 \
                 : (ch) >= 'A' && (ch) <= 'F' ? (ch) - 'A' + 10 : -1)
        if (p[0] == '%' && p[1] && p[2] && (hi = HEX(p[1])) >= 0 && (lo = HEX(p[2])) >= 0 && (hi | lo)) {
            *w++ = (char)(hi * 16 + lo);
            p += 3;
        } else *w++ = *p++;
#undef HEX
    }
    *w = 0;
    return (size_t)(w - s);
}

void sl_rest_config_defaults(sl_rest_config_t *cfg) {
    memset(cfg, 0, sizeof *cfg);
    cfg->bind_address = "127.0.0.1";
    cfg->port = -1;
    cfg->max_upload = SL_REST_DEFAULT_MAX_UPLOAD;
}

static int mkdirs(const char *dir) {
    char p[4096];
    snprintf(p, sizeof p, "%s", dir);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = 0;
        if (mkdir(p, 0700) < 0 && errno != EEXIST) return -1;
        *s = '/';
    }
    if (mkdir(p, 0700) < 0 && errno != EEXIST) return -1;
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode) ? 0 : -1;
}

int sl_rest_new(const sl_rest_config_t *cfg, const sl_rest_provider_t *p, sl_rest_t **out, char *err,
                size_t errlen) {
    *out = NULL;
    if (!cfg || !p) return sl_errf(err, errlen, SL_EINVAL, "rest: no configuration or provider");
    bool uploads = cfg->artifact_dir && cfg->artifact_dir[0];
    if (uploads && strlen(cfg->artifact_dir) > 3000)
        return sl_errf(err, errlen, SL_EINVAL, "rest: artifact directory path too long");
    int port = cfg->port < 0 ? SL_REST_DEFAULT_PORT : cfg->port;
    if (port > 65535) return sl_errf(err, errlen, SL_EINVAL, "rest.port: %d is not a port (0..65535)", port);
    if (cfg->max_upload < 0) return sl_errf(err, errlen, SL_EINVAL, "rest: negative maximum upload size");
    const char *bind = cfg->bind_address && cfg->bind_address[0] && strcmp(cfg->bind_address, "localhost")
                           ? cfg->bind_address
                           : "127.0.0.1"; /* Flink's default "localhost" */
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    if (inet_pton(AF_INET, bind, &sa.sin_addr) != 1)
        return sl_errf(err, errlen, SL_EINVAL, "rest.bind-address: '%s' is not an IPv4 address", bind);
    if (uploads && mkdirs(cfg->artifact_dir) < 0)
        return sl_errf(err, errlen, SL_EIO, "rest: cannot create the artifact directory %s: %s", cfg->artifact_dir,
                       strerror(errno));
    sl_rest_t *r = sl_calloc(1, sizeof *r);
    r->bind_address = sl_strdup(bind);
    r->token = cfg->token && cfg->token[0] ? sl_strdup(cfg->token) : NULL;
    r->dir = uploads ? sl_strdup(cfg->artifact_dir) : NULL;
    r->version = sl_strdup(cfg->version ? cfg->version : "0.1.0");
    r->max_upload = cfg->max_upload ? cfg->max_upload : SL_REST_DEFAULT_MAX_UPLOAD;
    r->p = *p;
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->sq_mu, NULL);
    pthread_cond_init(&r->sq_cv, NULL);
    scan_dir(r);
    r->d = MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME, 0, NULL, NULL, access_handler, r, MHD_OPTION_SOCK_ADDR,
                            (struct sockaddr *)&sa, MHD_OPTION_NOTIFY_COMPLETED, request_completed, r,
                            MHD_OPTION_UNESCAPE_CALLBACK, unescape, r, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)30, MHD_OPTION_CONNECTION_LIMIT, (unsigned)128,
                            MHD_OPTION_END);
    if (!r->d) {
        int e = errno;
        sl_rest_destroy(r);
        return sl_errf(err, errlen, SL_EIO, "rest: cannot listen on %s:%d: %s", bind, port, strerror(e));
    }
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(r->d, MHD_DAEMON_INFO_BIND_PORT);
    pthread_mutex_lock(&r->mu); /* requests may already read it */
    r->port = info ? info->port : port;
    pthread_mutex_unlock(&r->mu);
    *out = r;
    return 0;
}

int sl_rest_port(const sl_rest_t *r) {
    pthread_mutex_lock((pthread_mutex_t *)&r->mu);
    int p = r->port;
    pthread_mutex_unlock((pthread_mutex_t *)&r->mu);
    return p;
}

void sl_rest_destroy(sl_rest_t *r) {
    if (!r) return;
    pthread_mutex_lock(&r->sq_mu); /* a suspended connection must be resumed before the daemon stops */
    while (r->sq_running > 0) pthread_cond_wait(&r->sq_cv, &r->sq_mu);
    pthread_mutex_unlock(&r->sq_mu);
    if (r->d) MHD_stop_daemon(r->d);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->sq_mu);
    pthread_cond_destroy(&r->sq_cv);
    sl_free(r->jars);
    sl_free(r->bind_address);
    sl_free(r->token);
    sl_free(r->dir);
    sl_free(r->version);
    sl_free(r);
}
