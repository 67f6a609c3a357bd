/*
 * artifact.c — job artifact download (see artifact.h).
 */
#include "protocol/artifact.h"

#include <errno.h>
#include <fcntl.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdio.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/auth.h"

#define REQ_MAGIC "SLAQ"
#define ANS_MAGIC "SLAR"
#define VERSION 1

void sl_artifact_request_encode(const char *job_id, sl_buf_t *out) {
    uint8_t v = VERSION;
    sl_buf_append(out, REQ_MAGIC, 4);
    sl_buf_append(out, &v, 1);
    sl_buf_append(out, job_id, strlen(job_id));
}

int sl_artifact_request_decode(const uint8_t *p, size_t n, char *id, size_t cap, char *err, size_t errlen) {
    if (n < 5 || memcmp(p, REQ_MAGIC, 4) != 0)
        return sl_errf(err, errlen, SL_EFORMAT, "artifact request: bad magic (%zu bytes)", n);
    if (p[4] != VERSION) return sl_errf(err, errlen, SL_EFORMAT, "artifact request: version %u (this build: 1)", p[4]);
    size_t l = n - 5;
    if (l == 0 || l >= cap || memchr(p + 5, 0, l) || memchr(p + 5, '/', l))
        return sl_errf(err, errlen, SL_EFORMAT, "artifact request: bad job id (%zu bytes)", l);
    memcpy(id, p + 5, l);
    id[l] = 0;
    return 0;
}

void sl_artifact_answer_encode(const uint8_t *bytes, size_t n, const char *reason, sl_buf_t *out) {
    uint8_t h[6] = {'S', 'L', 'A', 'R', VERSION, reason ? 1 : 0};
    sl_buf_append(out, h, sizeof h);
    if (reason) {
        sl_buf_append(out, reason, strlen(reason));
        return;
    }
    uint8_t md[SHA256_DIGEST_LENGTH];
    SHA256(bytes, n, md);
    sl_buf_append(out, md, sizeof md);
    sl_buf_append(out, bytes, n);
}

int sl_artifact_answer_decode(const uint8_t *a, size_t n, const uint8_t **bytes, size_t *len, char *err,
                              size_t errlen) {
    if (n < 6 || memcmp(a, ANS_MAGIC, 4) != 0 || a[4] != VERSION || a[5] > 1)
        return sl_errf(err, errlen, SL_EFORMAT, "the JobManager's answer is malformed (%zu bytes)", n);
    if (a[5] == 1)
        return sl_errf(err, errlen, SL_ENOTFOUND, "the JobManager refused: %.*s", (int)SL_MIN(n - 6, 400u),
                       (const char *)a + 6);
    if (n < 6 + SHA256_DIGEST_LENGTH) return sl_errf(err, errlen, SL_EFORMAT, "the answer has no digest");
    uint8_t md[SHA256_DIGEST_LENGTH];
    SHA256(a + 6 + SHA256_DIGEST_LENGTH, n - 6 - SHA256_DIGEST_LENGTH, md);
    if (memcmp(md, a + 6, sizeof md) != 0)
        return sl_errf(err, errlen, SL_EFORMAT, "SHA-256 mismatch (damaged in transit)");
    *bytes = a + 6 + SHA256_DIGEST_LENGTH;
    *len = n - 6 - SHA256_DIGEST_LENGTH;
    return 0;
}

int sl_artifact_read_file(const char *path, sl_buf_t *out, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return sl_errf(err, errlen, SL_EIO, "cannot open %s: %s", path, strerror(errno));
    struct stat st;
    int rc = 0;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        rc = sl_errf(err, errlen, SL_EIO, "%s is not a regular file", path);
    else if ((uint64_t)st.st_size > SL_ARTIFACT_MAX_BYTES)
        rc = sl_errf(err, errlen, SL_EINVAL, "%s has %lld bytes, more than the %u an artifact may have", path,
                     (long long)st.st_size, SL_ARTIFACT_MAX_BYTES);
    uint8_t buf[65536];
    while (rc == 0) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) rc = sl_errf(err, errlen, SL_EIO, "reading %s: %s", path, strerror(errno));
        if (r <= 0) break;
        sl_buf_append(out, buf, (size_t)r);
        if (out->len > SL_ARTIFACT_MAX_BYTES) rc = sl_errf(err, errlen, SL_EINVAL, "%s grew while read", path);
    }
    close(fd);
    return rc;
}

/* ---- the TaskManager's download ---- */

typedef struct fetch {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    const char *job_id;
    sl_buf_t answer;
    bool got, closed;
    char why[300];
} fetch_t;

static void f_open(void *ctx, sl_rpc_conn_t *conn) {
    fetch_t *f = ctx;
    sl_buf_t req = {0};
    sl_artifact_request_encode(f->job_id, &req);
    sl_rpc_send(conn, req.p, req.len);
    sl_buf_free(&req);
}

static void f_message(void *ctx, sl_rpc_conn_t *conn, const uint8_t *bytes, size_t len) {
    fetch_t *f = ctx;
    pthread_mutex_lock(&f->mu);
    if (!f->got) {
        sl_buf_append(&f->answer, bytes, len);
        f->got = true;
    }
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    sl_rpc_close(conn, "artifact received");
}

static void f_closed(void *ctx, sl_rpc_conn_t *conn, const char *why) {
    (void)conn;
    fetch_t *f = ctx;
    pthread_mutex_lock(&f->mu);
    f->closed = true;
    snprintf(f->why, sizeof f->why, "%s", why);
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
}

static int store(const char *dir, const char *job_id, const uint8_t *p, size_t n, char *path, size_t cap, char *err,
                 size_t errlen) {
    char tmp[4200];
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return sl_errf(err, errlen, SL_EIO, "cannot create the artifact cache %s: %s", dir, strerror(errno));
    snprintf(tmp, sizeof tmp, "%s/.%s.%d.tmp", dir, job_id, (int)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0700);
    if (fd < 0) return sl_errf(err, errlen, SL_EIO, "cannot create %s: %s", tmp, strerror(errno));
    int e = sl_write_all(fd, p, n);
    if (!e && fsync(fd) != 0) e = errno;
    close(fd);
    if (!e && rename(tmp, path) != 0) e = errno;
    if (e) {
        unlink(tmp);
        return sl_errf(err, errlen, SL_EIO, "cannot write the artifact to %s: %s", path, strerror(e));
    }
    (void)cap;
    return 0;
}

int sl_artifact_fetch(sl_rpc_t *rpc, const char *host, int port, const char *job_id, const char *dir,
                      int timeout_ms, char *path, size_t cap, char *err, size_t errlen) {
    if (!*job_id || strchr(job_id, '/') || job_id[0] == '.')
        return sl_errf(err, errlen, SL_EINVAL, "artifact: job id '%s' cannot name a file", job_id);
    if ((size_t)snprintf(path, cap, "%s/%s.so", dir, job_id) >= cap)
        return sl_errf(err, errlen, SL_EINVAL, "artifact cache path too long");
    if (access(path, R_OK) == 0) return 0; /* downloaded before (a job's artifact never changes) */
    fetch_t f;
    memset(&f, 0, sizeof f);
    pthread_mutex_init(&f.mu, NULL);
    pthread_cond_init(&f.cv, NULL);
    f.job_id = job_id;
    sl_rpc_callbacks_t cbs = {f_open, f_message, f_closed, &f, SL_AUTH_ARTIFACT, false};
    sl_rpc_conn_t *conn = NULL;
    int rc = sl_rpc_connect(rpc, host, port, &cbs, &conn);
    if (rc < 0) {
        pthread_cond_destroy(&f.cv);
        pthread_mutex_destroy(&f.mu);
        return sl_errf(err, errlen, rc, "artifact of job %s: cannot connect to the JobManager at %s:%d", job_id, host,
                       port);
    }
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout_ms / 1000;
    dl.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) dl.tv_sec++, dl.tv_nsec -= 1000000000L;
    pthread_mutex_lock(&f.mu);
    while (!f.closed && pthread_cond_timedwait(&f.cv, &f.mu, &dl) == 0) {
    }
    bool got = f.got, closed = f.closed;
    pthread_mutex_unlock(&f.mu);
    if (!closed) sl_rpc_close(conn, "artifact download timed out");
    /* on_closed comes exactly once; wait for it so that f outlives every callback */
    pthread_mutex_lock(&f.mu);
    while (!f.closed) pthread_cond_wait(&f.cv, &f.mu);
    pthread_mutex_unlock(&f.mu);
    sl_rpc_conn_release(conn);
    const uint8_t *bytes = NULL;
    size_t nbytes = 0;
    if (!got)
        rc = sl_errf(err, errlen, SL_EIO, "artifact of job %s from the JobManager at %s:%d: %s", job_id, host, port,
                     closed ? f.why : "timed out");
    else if ((rc = sl_artifact_answer_decode(f.answer.p, f.answer.len, &bytes, &nbytes, err, errlen)) == 0)
        rc = store(dir, job_id, bytes, nbytes, path, cap, err, errlen);
    if (got && rc < 0 && rc != SL_EIO) { /* name the job in the decoder's message */
        char m[700];
        snprintf(m, sizeof m, "%s", err);
        sl_errf(err, errlen, rc, "artifact of job %s: %s", job_id, m);
    }
    sl_buf_free(&f.answer);
    pthread_cond_destroy(&f.cv);
    pthread_mutex_destroy(&f.mu);
    return rc;
}
