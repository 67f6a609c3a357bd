/*
 * http_util.h — one HTTP/1.1 request to a REST server on loopback, for the
 * tests of the REST API (test_rest_checkpoints.c, test_rest_cluster.c,
 * test_rest_embedded.c): Connection: close, a JSON body, an optional bearer
 * token; the answer's status, body and parsed JSON.
 */
#ifndef SL_TEST_HTTP_UTIL_H
#define SL_TEST_HTTP_UTIL_H

#include <arpa/inet.h>
#include <jansson.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/common.h"

typedef struct http_resp {
    int status;    /* 0: no answer (connection refused, timeout, not HTTP) */
    char *body;    /* NUL-terminated, or NULL */
    json_t *json;  /* the body parsed, or NULL */
} http_resp_t;

static inline void http_resp_free(http_resp_t *r) {
    free(r->body);
    if (r->json) json_decref(r->json);
    memset(r, 0, sizeof *r);
}

/* method path on 127.0.0.1:port with body (blen bytes, may be 0); token:
 * NULL or the bearer token to send.  Waits up to 15 s for each read. */
static inline void http_do(int port, const char *method, const char *path, const char *body, size_t blen,
                           const char *token, http_resp_t *r) {
    memset(r, 0, sizeof *r);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        close(fd);
        return;
    }
    char auth[600] = "";
    if (token) snprintf(auth, sizeof auth, "Authorization: Bearer %.500s\r\n", token);
    sl_buf_t b = {0};
    char head[2048];
    int hn = snprintf(head, sizeof head,
                      "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s"
                      "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n",
                      method, path, auth, blen);
    sl_buf_append(&b, head, (size_t)hn);
    if (blen) sl_buf_append(&b, body, blen);
    /* a server may answer (413, 400) and close before the whole body is
     * sent: the send stops, the answer is still read */
    for (size_t off = 0; off < b.len;) {
        ssize_t w = send(fd, b.p + off, b.len - off, MSG_NOSIGNAL);
        if (w <= 0) break;
        off += (size_t)w;
    }
    sl_buf_free(&b);
    char tmp[65536];
    for (;;) {
        struct pollfd p = {fd, POLLIN, 0};
        if (poll(&p, 1, 15000) <= 0) break;
        ssize_t n = recv(fd, tmp, sizeof tmp, 0);
        if (n <= 0) break;
        sl_buf_append(&b, tmp, (size_t)n);
    }
    close(fd);
    sl_buf_append(&b, "", 1);
    const char *s = (const char *)b.p, *sep = strstr(s, "\r\n\r\n");
    if (!strncmp(s, "HTTP/1.", 7) && sep) {
        r->status = atoi(s + 9);
        r->body = strdup(sep + 4);
        r->json = json_loads(r->body, 0, NULL);
    }
    sl_buf_free(&b);
}

#endif
