/*
 * test_s3_util.h — what the S3 tests share: the S3Proxy the ctest fixture
 * "s3" started (scripts/s3proxy.sh writes its endpoint to a file; the AWS
 * variables are pointed at it), and a fault-injecting HTTP proxy, a thread
 * on loopback between the client and S3Proxy that answers 503 SlowDown,
 * resets the connection or stalls for chosen requests.
 */
#ifndef SL_TEST_S3_UTIL_H
#define SL_TEST_S3_UTIL_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/common.h"

static char endpoint[256];
static const char *bucket;
static char run_prefix[128]; /* a fresh prefix per run: s3://bucket/<run_prefix>/... */
static const char *env_or(const char *k, const char *d) {
    const char *v = getenv(k);
    return v && v[0] ? v : d;
}

/* Reads the endpoint the fixture wrote and points the AWS variables at it;
 * run_prefix becomes "<tag>-<pid>-<ms>", a fresh key prefix per run.  False
 * (with a message saying why) when there is no server. */
static bool setup_server(const char *tag) {
    const char *dir = env_or("SLUICE_S3PROXY_DIR", NULL);
    char def[512];
    snprintf(def, sizeof def, "%s/sluice-s3proxy/endpoint", env_or("TMPDIR", "/tmp"));
    char path[600];
    snprintf(path, sizeof path, "%s", env_or("SLUICE_S3_ENDPOINT_FILE", def));
    if (dir && !getenv("SLUICE_S3_ENDPOINT_FILE")) snprintf(path, sizeof path, "%s/endpoint", dir);
    FILE *f = fopen(path, "r");
    if (!f || !fgets(endpoint, sizeof endpoint, f)) {
        fprintf(stderr, "%s: no S3 endpoint in %s: start S3Proxy with scripts/s3proxy.sh start (the ctest "
                        "fixture s3 does)\n", tag, path);
        if (f) fclose(f);
        return false;
    }
    fclose(f);
    endpoint[strcspn(endpoint, "\r\n")] = 0;
    bucket = env_or("SLUICE_S3_BUCKET", "sluice-test");
    setenv("AWS_ENDPOINT_URL", endpoint, 1);
    setenv("AWS_ACCESS_KEY_ID", env_or("SLUICE_S3_ACCESS_KEY", "sluice-access"), 1);
    setenv("AWS_SECRET_ACCESS_KEY", env_or("SLUICE_S3_SECRET_KEY", "sluice-secret"), 1);
    setenv("AWS_REGION", "us-east-1", 1);
    snprintf(run_prefix, sizeof run_prefix, "%s-%d-%lld", tag, (int)getpid(), (long long)sl_wall_ms());
    return true;
}

/* ------------------------------------------------------------------ */
/* A fault-injecting HTTP proxy: one request per connection (it adds
 * "Connection: close" towards S3Proxy, a header SigV4 does not sign). */

enum { F_NONE, F_503, F_RESET, F_STALL };
typedef struct proxy {
    int lfd, port, upstream_port;
    pthread_t th;
    atomic_int stop;
    atomic_int faults_left; /* the next N requests fail (-1: all) */
    atomic_int fault_kind;
    atomic_int requests, faulted;
    atomic_int fault_every; /* > 0: additionally fail every k-th request */
    atomic_int fail_after;  /* > 0: fail every request numbered above it */
} proxy_t;

static int read_request(int fd, sl_buf_t *req) {
    char buf[65536];
    size_t hdr_end = 0;
    long long clen = 0;
    for (;;) {
        ssize_t k = recv(fd, buf, sizeof buf, 0);
        if (k <= 0) return -1;
        sl_buf_append(req, buf, (size_t)k);
        if (!hdr_end) {
            for (size_t i = 3; i < req->len; i++)
                if (!memcmp(req->p + i - 3, "\r\n\r\n", 4)) {
                    hdr_end = i + 1;
                    break;
                }
            if (hdr_end) {
                for (size_t i = 0; i + 15 < hdr_end; i++)
                    if (!strncasecmp((char *)req->p + i, "\r\ncontent-length:", 17)) clen = atoll((char *)req->p + i + 17);
            }
        }
        if (hdr_end && req->len >= hdr_end + (size_t)clen) return (int)hdr_end;
    }
}

static void send_all(int fd, const void *p, size_t n) {
    const char *c = p;
    while (n > 0) {
        ssize_t k = send(fd, c, n, MSG_NOSIGNAL);
        if (k <= 0) return;
        c += k;
        n -= (size_t)k;
    }
}

static void serve(proxy_t *px, int cfd) {
    sl_buf_t req = {0};
    int he = read_request(cfd, &req);
    if (he < 0) {
        sl_buf_free(&req);
        return;
    }
    int nreq = atomic_fetch_add(&px->requests, 1) + 1;
    int left = atomic_load(&px->faults_left);
    bool fault = false;
    if (left < 0) fault = true;
    else if (left > 0) fault = atomic_fetch_sub(&px->faults_left, 1) > 0;
    int after = atomic_load(&px->fail_after);
    if (after > 0 && nreq > after) fault = true;
    int every = atomic_load(&px->fault_every);
    if (every > 0 && nreq % every == 0) fault = true;
    int kind = atomic_load(&px->fault_kind);
    if (fault && kind != F_NONE) {
        atomic_fetch_add(&px->faulted, 1);
        if (kind == F_503) {
            const char *body = "<?xml version=\"1.0\"?><Error><Code>SlowDown</Code><Message>Please reduce your request "
                               "rate.</Message></Error>";
            char head[256];
            int hl = snprintf(head, sizeof head,
                              "HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: %zu\r\n"
                              "Connection: close\r\n\r\n", strlen(body));
            send_all(cfd, head, (size_t)hl);
            send_all(cfd, body, strlen(body));
        } else if (kind == F_RESET) {
            struct linger lg = {1, 0};
            setsockopt(cfd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg); /* close sends RST */
        } else if (kind == F_STALL) {
            for (int i = 0; i < 30 && !atomic_load(&px->stop); i++) usleep(100000); /* 3 s of silence */
        }
        sl_buf_free(&req);
        return;
    }
    int ufd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)px->upstream_port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(ufd, (struct sockaddr *)&a, sizeof a) == 0) {
        send_all(ufd, req.p, (size_t)he - 2); /* headers without the final CRLF */
        send_all(ufd, "Connection: close\r\n\r\n", 21);
        send_all(ufd, req.p + he, req.len - (size_t)he);
        char buf[65536];
        for (ssize_t k; (k = recv(ufd, buf, sizeof buf, 0)) > 0;) send_all(cfd, buf, (size_t)k);
    }
    close(ufd);
    sl_buf_free(&req);
}

typedef struct conn_arg {
    proxy_t *px;
    int fd;
} conn_arg_t;

static void *conn_main(void *arg) {
    conn_arg_t *c = arg;
    serve(c->px, c->fd);
    close(c->fd);
    sl_free(c);
    return NULL;
}

static void *proxy_main(void *arg) {
    proxy_t *px = arg;
    while (!atomic_load(&px->stop)) {
        int cfd = accept(px->lfd, NULL, NULL);
        if (cfd < 0) continue;
        if (atomic_load(&px->stop)) {
            close(cfd);
            break;
        }
        conn_arg_t *c = sl_malloc(sizeof *c);
        c->px = px;
        c->fd = cfd;
        pthread_t t;
        if (pthread_create(&t, NULL, conn_main, c) == 0)
            pthread_detach(t);
        else
            conn_main(c);
    }
    return NULL;
}

__attribute__((unused)) static bool proxy_start(proxy_t *px) {
    memset(px, 0, sizeof *px);
    const char *colon = strrchr(endpoint, ':');
    px->upstream_port = colon ? atoi(colon + 1) : 0;
    px->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (bind(px->lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(px->lfd, 64) != 0 ||
        getsockname(px->lfd, (struct sockaddr *)&a, &al) != 0)
        return false;
    px->port = ntohs(a.sin_port);
    return pthread_create(&px->th, NULL, proxy_main, px) == 0;
}

__attribute__((unused)) static void proxy_stop(proxy_t *px) {
    atomic_store(&px->stop, 1);
    int fd = socket(AF_INET, SOCK_STREAM, 0); /* wake accept */
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)px->port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connect(fd, (struct sockaddr *)&a, sizeof a);
    close(fd);
    pthread_join(px->th, NULL);
    close(px->lfd);
    usleep(200000); /* connection threads finish (a stalled one sees stop) */
}

/* The same proxy in a process of its own (for tests that fork jobs: a
 * process with threads must not fork under TSan).  *pxp lives in shared
 * memory, so the caller steers the faults through it as with the thread. */
__attribute__((unused)) static bool proxy_start_process(proxy_t **pxp, pid_t *pid) {
    proxy_t *px = mmap(NULL, sizeof *px, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (px == MAP_FAILED) return false;
    memset(px, 0, sizeof *px);
    const char *colon = strrchr(endpoint, ':');
    px->upstream_port = colon ? atoi(colon + 1) : 0;
    px->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t al = sizeof a;
    if (bind(px->lfd, (struct sockaddr *)&a, sizeof a) != 0 || listen(px->lfd, 64) != 0 ||
        getsockname(px->lfd, (struct sockaddr *)&a, &al) != 0)
        return false;
    px->port = ntohs(a.sin_port);
    fflush(stderr);
    *pid = fork();
    if (*pid == 0) {
        proxy_main(px);
        _exit(0);
    }
    close(px->lfd);
    *pxp = px;
    return *pid > 0;
}

__attribute__((unused)) static void proxy_stop_process(proxy_t *px, pid_t pid) {
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
    munmap(px, sizeof *px);
}

#endif
