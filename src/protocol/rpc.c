/*
 * rpc.c — the control-plane transport of rpc.h: a libuv loop on its own
 * thread, the shared-secret handshake, length-prefixed frames.
 *
 * Other threads never touch libuv: they append a command (connect, flush a
 * connection's queue, close, timers, listen, stop) to the rpc's command
 * queue under rpc->mu and wake the loop with a uv_async_t; the loop thread
 * runs the commands in order.  A connection's outgoing frames sit in its
 * own queue (conn->mu) until the loop hands them to uv_write, which keeps
 * them in order.
 *
 * A connection moves through
 *   INIT -> RESOLVING -> CONNECTING [-> TLS] -> HELLO -> PROOF -> OPEN   (client)
 *                                   [TLS ->] HELLO -> PROOF -> OPEN      (accepted)
 * and ends in SHUTTING (a local close flushing its last frames) or CLOSED.
 * `closed` (under conn->mu) is the other threads' view: no more sends.
 *
 * With TLS (cfg.tls set), the TLS handshake of common/tls.h (mutual
 * authentication) runs first, and everything after it, the shared-secret
 * handshake included, is inside TLS: socket_write is the only place bytes
 * go to the socket and tls_input the only place received bytes enter, so
 * write_frame encrypts and on_read decrypts, the rest is unchanged.
 */
#include "protocol/rpc.h"

#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <uv.h>

#include "common/auth.h"
#include "common/common.h"
#include "common/tls.h"

#define RPC_READ_CHUNK 65536
#define RPC_KEEPALIVE_S 30

enum conn_state { C_INIT, C_RESOLVING, C_CONNECTING, C_TLS, C_HELLO, C_PROOF, C_OPEN, C_SHUTTING, C_CLOSED };
enum { ROLE_CLIENT = 0, ROLE_SERVER = 1 };

/* One buffer handed to uv_write: a frame (header + payload) or handshake
 * bytes.  Freed in its write callback. */
typedef struct frame {
    struct frame *next;
    uv_write_t req;
    size_t len;
    uint8_t data[];
} frame_t;

struct sl_rpc_conn {
    /* Immutable once the application can see the handle. */
    sl_rpc_t *rpc; /* dereferenced only on the loop thread, or under mu while !closed */
    sl_rpc_callbacks_t cbs;
    int role;
    char peer[80];
    char *host; /* client: what to connect to */
    int port;
    atomic_int refs;

    /* Guarded by mu. */
    pthread_mutex_t mu;
    frame_t *outq, *outq_tail;
    bool closed;        /* sends fail */
    bool flush_pending; /* a CMD_FLUSH is queued */
    atomic_int peer_kind; /* the peer's handshake kind, once open */

    /* Loop thread only. */
    int state;
    int handles; /* libuv handles still open (tcp, timer) */
    bool app_owned; /* the application holds a reference and gets on_closed */
    bool notified;  /* on_closed was called */
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_getaddrinfo_t gai;
    uv_connect_t creq;
    uv_shutdown_t sreq;
    sl_auth_hello_t mine, theirs;
    uint8_t hs[SL_AUTH_HELLO_LEN];
    size_t hs_got;
    uint8_t hdr[4];
    size_t hdr_got;
    uint8_t *body;
    size_t body_len, body_got;
    sl_tls_t *tls; /* NULL: plain TCP */
    struct sl_rpc_conn *prev, *next; /* rpc->conns */
};

struct sl_rpc_timer {
    sl_rpc_t *rpc;
    void (*fn)(void *);
    void *ctx;
    int interval_ms;
    atomic_bool cancelled;
    bool started;       /* loop thread only: uv_timer_init done */
    bool free_on_start; /* loop thread only: cancelled there before its start command ran */
    uv_timer_t t;
    struct sl_rpc_timer *prev, *next; /* rpc->timers, loop thread only */
};

enum cmd_type { CMD_CONNECT, CMD_FLUSH, CMD_CLOSE, CMD_LISTEN, CMD_TIMER_START, CMD_TIMER_CANCEL, CMD_STOP };

typedef struct listen_req {
    const char *host;
    int port;
    const sl_rpc_callbacks_t *cbs;
    int rc;
    bool done;
    char err[256];
} listen_req_t;

typedef struct cmd {
    struct cmd *next;
    int type;
    sl_rpc_conn_t *conn;   /* CONNECT (the loop's reference), FLUSH, CLOSE (own reference) */
    sl_rpc_timer_t *timer; /* TIMER_* */
    listen_req_t *listen;  /* LISTEN */
    char *why;             /* CLOSE */
} cmd_t;

struct sl_rpc {
    char *secret, *name;
    size_t max_frame;
    int connect_timeout_ms;
    sl_tls_ctx_t *tls; /* NULL: plain TCP */

    uv_loop_t loop;
    uv_async_t wake;
    uv_thread_t thread;
    uv_tcp_t server;
    bool listening;          /* loop thread only */
    sl_rpc_callbacks_t server_cbs;
    atomic_int port;

    /* Guarded by mu. */
    pthread_mutex_t mu;
    pthread_cond_t cv; /* listen requests done */
    cmd_t *cmds, *cmds_tail;
    bool stopping;

    /* Loop thread only. */
    bool shut;
    sl_rpc_conn_t *conns;
    sl_rpc_timer_t *timers;
    uint8_t rbuf[RPC_READ_CHUNK];
    uint8_t pbuf[RPC_READ_CHUNK]; /* plaintext out of TLS */
};

static void conn_close(sl_rpc_conn_t *c, const char *why, bool log, bool graceful);
static void conn_flush(sl_rpc_conn_t *c);
static void on_conn_timer(uv_timer_t *t);
static int write_frame(sl_rpc_conn_t *c, frame_t *f);
static int tls_send_pending(sl_rpc_conn_t *c);

/* ---- small helpers -------------------------------------------------------- */

static bool on_loop_thread(sl_rpc_t *rpc) {
    uv_thread_t self = uv_thread_self();
    return uv_thread_equal(&self, &rpc->thread);
}

static void rpc_log(sl_rpc_t *rpc, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void rpc_log(sl_rpc_t *rpc, const char *fmt, ...) {
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    fprintf(stderr, "sluice %s: %s\n", rpc->name, line);
}

static frame_t *frame_new(size_t len) {
    frame_t *f = sl_malloc(sizeof *f + (len ? len : 1));
    f->next = NULL;
    f->len = len;
    return f;
}

static void frames_free(frame_t *f) {
    while (f) {
        frame_t *n = f->next;
        sl_free(f);
        f = n;
    }
}

/* Appends a command and wakes the loop; the caller holds rpc->mu. */
static void post_locked(sl_rpc_t *rpc, cmd_t *c) {
    c->next = NULL;
    if (rpc->cmds_tail) rpc->cmds_tail->next = c;
    else rpc->cmds = c;
    rpc->cmds_tail = c;
    uv_async_send(&rpc->wake);
}

static cmd_t *cmd_new(int type) {
    cmd_t *c = sl_calloc(1, sizeof *c);
    c->type = type;
    return c;
}

static void format_addr(const struct sockaddr *sa, char *out, size_t cap) {
    char ip[64] = "?";
    int port = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *in = (const struct sockaddr_in *)sa;
        uv_ip4_name(in, ip, sizeof ip);
        port = ntohs(in->sin_port);
        snprintf(out, cap, "%s:%d", ip, port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *in6 = (const struct sockaddr_in6 *)sa;
        uv_ip6_name(in6, ip, sizeof ip);
        port = ntohs(in6->sin6_port);
        snprintf(out, cap, "[%s]:%d", ip, port);
    } else {
        snprintf(out, cap, "unknown peer");
    }
}

/* ---- connection lifetime ------------------------------------------------------ */

static sl_rpc_conn_t *conn_new(sl_rpc_t *rpc, int role, const sl_rpc_callbacks_t *cbs, int refs) {
    sl_rpc_conn_t *c = sl_calloc(1, sizeof *c);
    c->rpc = rpc;
    if (cbs) c->cbs = *cbs;
    c->role = role;
    atomic_init(&c->refs, refs);
    pthread_mutex_init(&c->mu, NULL);
    c->state = C_INIT;
    return c;
}

static void conn_free(sl_rpc_conn_t *c) {
    frames_free(c->outq);
    sl_free(c->body);
    sl_free(c->host);
    sl_tls_free(c->tls);
    pthread_mutex_destroy(&c->mu);
    sl_free(c);
}

void sl_rpc_conn_retain(sl_rpc_conn_t *c) { atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed); }

void sl_rpc_conn_release(sl_rpc_conn_t *c) {
    if (!c) return;
    if (atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) == 1) conn_free(c);
}

const char *sl_rpc_conn_peer(const sl_rpc_conn_t *c) { return c->peer; }

static void conn_link(sl_rpc_conn_t *c) {
    sl_rpc_t *rpc = c->rpc;
    c->prev = NULL;
    c->next = rpc->conns;
    if (rpc->conns) rpc->conns->prev = c;
    rpc->conns = c;
}

static void conn_unlink(sl_rpc_conn_t *c) {
    if (c->prev) c->prev->next = c->next;
    else c->rpc->conns = c->next;
    if (c->next) c->next->prev = c->prev;
    c->prev = c->next = NULL;
}

/* Close callback of both handles; the last one drops the loop's reference. */
static void on_handle_closed(uv_handle_t *h) {
    sl_rpc_conn_t *c = h->data;
    if (--c->handles > 0) return;
    conn_unlink(c);
    sl_rpc_conn_release(c);
}

static void conn_close_handles(sl_rpc_conn_t *c) {
    if (c->state == C_RESOLVING) uv_cancel((uv_req_t *)&c->gai);
    c->state = C_CLOSED;
    if (!uv_is_closing((uv_handle_t *)&c->tcp)) uv_close((uv_handle_t *)&c->tcp, on_handle_closed);
    if (!uv_is_closing((uv_handle_t *)&c->timer)) uv_close((uv_handle_t *)&c->timer, on_handle_closed);
}

static void on_shutdown(uv_shutdown_t *req, int status) {
    sl_rpc_conn_t *c = req->data;
    if (c->state == C_SHUTTING) conn_close_handles(c);
}

/* Closes a connection on the loop thread: marks it closed for senders,
 * tells the application once, and closes its handles (after writing the
 * frames already queued when `graceful` and the connection is open).
 * `log` writes a line to stderr (protocol violations, handshake failures). */
static void conn_close(sl_rpc_conn_t *c, const char *why, bool log, bool graceful) {
    if (c->state == C_CLOSED) return;
    if (c->state == C_SHUTTING) {
        if (!graceful) conn_close_handles(c);
        return;
    }
    sl_rpc_t *rpc = c->rpc;
    if (log) {
        if (c->role == ROLE_SERVER && !c->app_owned)
            rpc_log(rpc, "refused control connection from %s: %s", c->peer, why);
        else
            rpc_log(rpc, "closing control connection with %s: %s", c->peer, why);
    }
    pthread_mutex_lock(&c->mu);
    c->closed = true;
    frame_t *q = c->outq;
    c->outq = c->outq_tail = NULL;
    pthread_mutex_unlock(&c->mu);

    bool was_open = c->state == C_OPEN;
    if (was_open) uv_read_stop((uv_stream_t *)&c->tcp);
    if (graceful && was_open) {
        /* Write what was queued, then FIN; the timer bounds the wait. */
        int rc = 0;
        while (q && rc == 0) {
            frame_t *f = q;
            q = q->next;
            rc = write_frame(c, f);
        }
        frames_free(q);
        if (rc == 0 && c->tls) {
            sl_tls_close_notify(c->tls);
            rc = tls_send_pending(c);
        }
        c->sreq.data = c;
        if (rc == 0 && uv_shutdown(&c->sreq, (uv_stream_t *)&c->tcp, on_shutdown) == 0) {
            c->state = C_SHUTTING;
            uv_timer_stop(&c->timer);
            uv_timer_start(&c->timer, on_conn_timer, (uint64_t)rpc->connect_timeout_ms, 0);
        } else {
            conn_close_handles(c);
        }
    } else {
        frames_free(q);
        if (c->state == C_INIT) {
            /* Handles never initialized (the rpc stopped first). */
            c->state = C_CLOSED;
        } else {
            conn_close_handles(c);
        }
    }
    if (c->app_owned && !c->notified) {
        c->notified = true;
        if (c->cbs.on_closed) c->cbs.on_closed(c->cbs.ctx, c, why);
    }
}

static void on_conn_timer(uv_timer_t *t) {
    sl_rpc_conn_t *c = t->data;
    char why[160];
    switch (c->state) {
    case C_RESOLVING:
    case C_CONNECTING:
        snprintf(why, sizeof why, "connect to %s: timed out", c->peer);
        conn_close(c, why, false, false);
        break;
    case C_TLS:
        conn_close(c, "handshake failed: TLS handshake timed out", true, false);
        break;
    case C_HELLO:
    case C_PROOF:
        conn_close(c, "handshake failed: timed out", true, false);
        break;
    case C_SHUTTING:
        conn_close_handles(c);
        break;
    default:
        break;
    }
}

/* ---- writing -------------------------------------------------------------------- */

static void on_write(uv_write_t *req, int status) {
    frame_t *f = (frame_t *)((char *)req - offsetof(frame_t, req));
    sl_rpc_conn_t *c = req->handle->data;
    sl_free(f);
    if (status < 0 && status != UV_ECANCELED && c->state != C_CLOSED) {
        char why[160];
        snprintf(why, sizeof why, "write to %s failed: %s", c->peer, uv_strerror(status));
        conn_close(c, why, false, false);
    }
}

/* Hands one buffer to libuv (which keeps the order of writes); frees it on
 * failure.  0 or a libuv error. */
static int socket_write(sl_rpc_conn_t *c, frame_t *f) {
    uv_buf_t b = uv_buf_init((char *)f->data, (unsigned)f->len);
    int rc = uv_write(&f->req, (uv_stream_t *)&c->tcp, &b, 1, on_write);
    if (rc < 0) sl_free(f);
    return rc;
}

/* Writes the ciphertext the TLS session produced.  0 or a libuv error. */
static int tls_send_pending(sl_rpc_conn_t *c) {
    size_t n;
    while ((n = sl_tls_pending(c->tls)) > 0) {
        frame_t *f = frame_new(n);
        f->len = sl_tls_take(c->tls, f->data, n);
        int rc = socket_write(c, f);
        if (rc < 0) return rc;
    }
    return 0;
}

/* Sends one buffer (plaintext: encrypted first under TLS); frees it.  0 or
 * a libuv error. */
static int write_frame(sl_rpc_conn_t *c, frame_t *f) {
    if (!c->tls) return socket_write(c, f);
    int rc = sl_tls_write(c->tls, f->data, f->len);
    sl_free(f);
    if (rc < 0) return UV_EPROTO;
    return tls_send_pending(c);
}

static int write_raw(sl_rpc_conn_t *c, const uint8_t *p, size_t n) {
    frame_t *f = frame_new(n);
    memcpy(f->data, p, n);
    return write_frame(c, f);
}

/* Writes the connection's queued frames (open connections only; before
 * the handshake completes they wait in the queue). */
static void conn_flush(sl_rpc_conn_t *c) {
    pthread_mutex_lock(&c->mu);
    c->flush_pending = false;
    frame_t *q = NULL;
    if (c->state == C_OPEN) {
        q = c->outq;
        c->outq = c->outq_tail = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    while (q) {
        frame_t *f = q;
        q = q->next;
        if (c->state != C_OPEN) {
            sl_free(f);
            continue;
        }
        int rc = write_frame(c, f);
        if (rc < 0) {
            char why[160];
            snprintf(why, sizeof why, "write to %s failed: %s", c->peer, uv_strerror(rc));
            conn_close(c, why, false, false);
        }
    }
}

/* ---- the handshake and reading ------------------------------------------------------ */

static void conn_start_handshake(sl_rpc_conn_t *c) {
    uint8_t hello[SL_AUTH_HELLO_LEN];
    int kind = c->role == ROLE_CLIENT && c->cbs.kind ? c->cbs.kind : SL_AUTH_CONTROL;
    if (sl_auth_hello_make(&c->mine, kind, c->role, hello) != 0) {
        conn_close(c, "handshake failed: no random bytes for the nonce", true, false);
        return;
    }
    c->state = C_HELLO;
    c->hs_got = 0;
    int rc = write_raw(c, hello, sizeof hello);
    if (rc < 0) {
        char why[160];
        snprintf(why, sizeof why, "handshake failed: write: %s", uv_strerror(rc));
        conn_close(c, why, true, false);
    }
}

int sl_rpc_conn_kind(const sl_rpc_conn_t *c) { return atomic_load(&c->peer_kind); }

static void conn_opened(sl_rpc_conn_t *c) {
    atomic_store(&c->peer_kind, c->theirs.kind);
    c->state = C_OPEN;
    uv_timer_stop(&c->timer);
    if (c->role == ROLE_SERVER) {
        sl_rpc_conn_retain(c); /* the application's reference */
        c->app_owned = true;
    }
    if (c->cbs.on_open) c->cbs.on_open(c->cbs.ctx, c);
    if (c->state == C_OPEN) conn_flush(c);
}

/* Feeds n received bytes through the state machine; stops as soon as the
 * connection is no longer open (a callback may close it). */
static void conn_consume(sl_rpc_conn_t *c, const uint8_t *p, size_t n) {
    sl_rpc_t *rpc = c->rpc;
    while (n > 0) {
        if (c->state == C_HELLO || c->state == C_PROOF) {
            size_t want = c->state == C_HELLO ? SL_AUTH_HELLO_LEN : SL_AUTH_PROOF_LEN;
            size_t k = SL_MIN(want - c->hs_got, n);
            memcpy(c->hs + c->hs_got, p, k);
            c->hs_got += k;
            p += k;
            n -= k;
            if (c->hs_got < want) return;
            c->hs_got = 0;
            if (c->state == C_HELLO) {
                char err[160], why[200];
                if (!c->tls && c->hs[0] == 0x16 && c->hs[1] == 0x03) {
                    conn_close(c,
                               "handshake failed: peer speaks TLS, but TLS is off here "
                               "(security.ssl.internal.enabled)",
                               true, false);
                    return;
                }
                if (sl_auth_hello_parse(c->hs, c->role, &c->theirs, err, sizeof err) != 0) {
                    const char *e = strncmp(err, "handshake: ", 11) == 0 ? err + 11 : err;
                    snprintf(why, sizeof why, "handshake failed: %s", e);
                    conn_close(c, why, true, false);
                    return;
                }
                bool artifact_ok = c->role == ROLE_SERVER && c->cbs.artifact && c->theirs.kind == SL_AUTH_ARTIFACT;
                if (c->theirs.kind != SL_AUTH_CONTROL && !artifact_ok) {
                    snprintf(why, sizeof why, "handshake failed: peer opened a connection of kind %u, not control",
                             c->theirs.kind);
                    conn_close(c, why, true, false);
                    return;
                }
                uint8_t proof[SL_AUTH_PROOF_LEN];
                sl_auth_proof(rpc->secret, &c->mine, &c->theirs, proof);
                c->state = C_PROOF;
                int rc = write_raw(c, proof, sizeof proof);
                if (rc < 0) {
                    snprintf(why, sizeof why, "handshake failed: write: %s", uv_strerror(rc));
                    conn_close(c, why, true, false);
                    return;
                }
            } else {
                if (!sl_auth_check(rpc->secret, &c->mine, &c->theirs, c->hs)) {
                    conn_close(c, "handshake failed: wrong cluster secret", true, false);
                    return;
                }
                conn_opened(c);
            }
            continue;
        }
        if (c->state != C_OPEN) return;
        if (!c->body) {
            size_t k = SL_MIN(4 - c->hdr_got, n);
            memcpy(c->hdr + c->hdr_got, p, k);
            c->hdr_got += k;
            p += k;
            n -= k;
            if (c->hdr_got < 4) return;
            uint32_t len = (uint32_t)c->hdr[0] | (uint32_t)c->hdr[1] << 8 | (uint32_t)c->hdr[2] << 16 |
                           (uint32_t)c->hdr[3] << 24;
            if (len > rpc->max_frame) {
                char why[160];
                snprintf(why, sizeof why, "frame of %u bytes exceeds the maximum of %zu", len, rpc->max_frame);
                conn_close(c, why, true, false);
                return;
            }
            c->body = sl_malloc(len ? len : 1);
            c->body_len = len;
            c->body_got = 0;
        }
        size_t k = SL_MIN(c->body_len - c->body_got, n);
        memcpy(c->body + c->body_got, p, k);
        c->body_got += k;
        p += k;
        n -= k;
        if (c->body_got < c->body_len) return;
        uint8_t *body = c->body;
        size_t len = c->body_len;
        c->body = NULL;
        c->hdr_got = 0;
        if (c->cbs.on_message) c->cbs.on_message(c->cbs.ctx, c, body, len);
        sl_free(body);
    }
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    sl_rpc_conn_t *c = h->data;
    *buf = uv_buf_init((char *)c->rpc->rbuf, sizeof c->rpc->rbuf);
}

static void peer_gone(sl_rpc_conn_t *c, const char *what);

static void tls_failed(sl_rpc_conn_t *c) {
    if (sl_tls_closed(c->tls)) { /* close_notify: the peer closed cleanly */
        peer_gone(c, "peer closed the connection");
        return;
    }
    char why[400];
    snprintf(why, sizeof why, "%sTLS: %s", c->state == C_OPEN ? "" : "handshake failed: ", sl_tls_error(c->tls));
    tls_send_pending(c); /* an alert, if OpenSSL made one */
    conn_close(c, why, true, false);
}

/* Ciphertext from the socket: advances the TLS handshake (then starts the
 * shared-secret handshake inside TLS), and feeds the plaintext through
 * conn_consume. */
static void tls_input(sl_rpc_conn_t *c, const uint8_t *p, size_t n) {
    sl_rpc_t *rpc = c->rpc;
    if (sl_tls_feed(c->tls, p, n) < 0) {
        tls_failed(c);
        return;
    }
    if (c->state == C_TLS) {
        int r = sl_tls_handshake(c->tls);
        if (r < 0) {
            tls_failed(c);
            return;
        }
        if (tls_send_pending(c) < 0) {
            conn_close(c, "handshake failed: TLS: write failed", true, false);
            return;
        }
        if (r == 0) return;
        conn_start_handshake(c);
    }
    while (c->state == C_HELLO || c->state == C_PROOF || c->state == C_OPEN) {
        ssize_t k = sl_tls_read(c->tls, rpc->pbuf, sizeof rpc->pbuf);
        if (k == 0) break;
        if (k < 0) {
            tls_failed(c);
            return;
        }
        conn_consume(c, rpc->pbuf, (size_t)k);
    }
    if (c->state == C_HELLO || c->state == C_PROOF || c->state == C_OPEN) tls_send_pending(c);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    sl_rpc_conn_t *c = s->data;
    if (nread > 0) {
        if (c->state == C_CLOSED || c->state == C_SHUTTING) return;
        if (c->tls) tls_input(c, (const uint8_t *)buf->base, (size_t)nread);
        else conn_consume(c, (const uint8_t *)buf->base, (size_t)nread);
        return;
    }
    if (nread == 0 || c->state == C_CLOSED || c->state == C_SHUTTING) return;
    peer_gone(c, nread == UV_EOF         ? "peer closed the connection"
                 : nread == UV_ECONNRESET ? "connection reset by peer"
                                          : uv_strerror((int)nread));
}

/* The peer ended the stream (EOF, reset, close_notify). */
static void peer_gone(sl_rpc_conn_t *c, const char *what) {
    char why[200];
    if (!c->tls && c->state == C_HELLO && c->hs_got >= 2 && c->hs[0] == 0x15 && c->hs[1] == 0x03) {
        /* a TLS alert where a hello belongs: tls.c's answer to a plain peer */
        conn_close(c, "handshake failed: peer speaks TLS, but TLS is off here (security.ssl.internal.enabled)", true,
                   false);
        return;
    }
    if (c->state != C_OPEN) {
        snprintf(why, sizeof why, "handshake failed: %s", what);
        conn_close(c, why, true, false);
    } else if (c->hdr_got > 0) {
        snprintf(why, sizeof why, "%s in the middle of a frame", what);
        conn_close(c, why, true, false);
    } else {
        conn_close(c, what, false, false);
    }
}

/* Socket options and reading, once the TCP connection exists. */
static void conn_start_io(sl_rpc_conn_t *c) {
    uv_tcp_nodelay(&c->tcp, 1);
    uv_tcp_keepalive(&c->tcp, 1, RPC_KEEPALIVE_S);
    int rc = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read);
    if (rc < 0) {
        char why[160];
        snprintf(why, sizeof why, "read from %s: %s", c->peer, uv_strerror(rc));
        conn_close(c, why, false, false);
        return;
    }
    if (c->rpc->tls) {
        /* TLS first; its own timeout from here on. */
        c->tls = sl_tls_new(c->rpc->tls, c->role == ROLE_SERVER);
        c->state = C_TLS;
        uv_timer_stop(&c->timer);
        uv_timer_start(&c->timer, on_conn_timer, (uint64_t)sl_tls_ctx_handshake_timeout_ms(c->rpc->tls), 0);
        if (c->role == ROLE_CLIENT) {
            if (sl_tls_handshake(c->tls) < 0) {
                tls_failed(c);
                return;
            }
            if (tls_send_pending(c) < 0) conn_close(c, "handshake failed: TLS: write failed", true, false);
        }
        return;
    }
    conn_start_handshake(c);
}

/* Initializes the connection's two handles (loop thread). */
static int conn_init_handles(sl_rpc_conn_t *c) {
    sl_rpc_t *rpc = c->rpc;
    int rc = uv_tcp_init(&rpc->loop, &c->tcp);
    if (rc < 0) return rc;
    uv_timer_init(&rpc->loop, &c->timer);
    c->tcp.data = c->timer.data = c;
    c->handles = 2;
    conn_link(c);
    return 0;
}

/* ---- server ------------------------------------------------------------------------- */

static void on_connection(uv_stream_t *server, int status) {
    sl_rpc_t *rpc = server->data;
    if (status < 0) {
        rpc_log(rpc, "accept failed: %s", uv_strerror(status));
        return;
    }
    sl_rpc_conn_t *c = conn_new(rpc, ROLE_SERVER, &rpc->server_cbs, 1);
    if (conn_init_handles(c) < 0) {
        conn_free(c);
        return;
    }
    c->state = C_HELLO;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        conn_close_handles(c);
        return;
    }
    struct sockaddr_storage ss;
    int sl = sizeof ss;
    if (uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&ss, &sl) == 0)
        format_addr((struct sockaddr *)&ss, c->peer, sizeof c->peer);
    else
        snprintf(c->peer, sizeof c->peer, "unknown peer");
    uv_timer_start(&c->timer, on_conn_timer, (uint64_t)rpc->connect_timeout_ms, 0);
    conn_start_io(c);
}

static int do_listen(sl_rpc_t *rpc, listen_req_t *lr) {
    if (rpc->listening)
        return sl_errf(lr->err, sizeof lr->err, SL_EINVAL, "listen: this rpc already listens on port %d",
                       atomic_load(&rpc->port));
    const char *host = lr->host && *lr->host ? lr->host : "0.0.0.0";
    char ports[16];
    snprintf(ports, sizeof ports, "%d", lr->port);
    struct addrinfo hints = {0};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    uv_getaddrinfo_t req;
    int rc = uv_getaddrinfo(&rpc->loop, &req, NULL, host, ports, &hints);
    if (rc < 0)
        return sl_errf(lr->err, sizeof lr->err, SL_EINVAL, "listen on %s:%d: %s", host, lr->port, uv_strerror(rc));
    rc = uv_tcp_init(&rpc->loop, &rpc->server);
    if (rc == 0) {
        rpc->server.data = rpc;
        rc = uv_tcp_bind(&rpc->server, req.addrinfo->ai_addr, 0);
        if (rc == 0) rc = uv_listen((uv_stream_t *)&rpc->server, 128, on_connection);
        if (rc < 0) uv_close((uv_handle_t *)&rpc->server, NULL);
    }
    uv_freeaddrinfo(req.addrinfo);
    if (rc < 0)
        return sl_errf(lr->err, sizeof lr->err, SL_EIO, "listen on %s:%d: %s", host, lr->port, uv_strerror(rc));
    struct sockaddr_storage ss;
    int sl = sizeof ss;
    uv_tcp_getsockname(&rpc->server, (struct sockaddr *)&ss, &sl);
    int port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                        : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    rpc->server_cbs = *lr->cbs;
    rpc->listening = true;
    atomic_store(&rpc->port, port);
    return 0;
}

/* ---- client ------------------------------------------------------------------------- */

static void on_connect(uv_connect_t *req, int status) {
    sl_rpc_conn_t *c = req->data;
    if (c->state != C_CONNECTING) return; /* closed meanwhile (status is UV_ECANCELED) */
    if (status < 0) {
        char why[200];
        snprintf(why, sizeof why, "connect to %s: %s", c->peer, uv_strerror(status));
        conn_close(c, why, false, false);
        return;
    }
    conn_start_io(c);
}

static void on_resolved(uv_getaddrinfo_t *req, int status, struct addrinfo *res) {
    sl_rpc_conn_t *c = req->data;
    if (c->state != C_RESOLVING) {
        uv_freeaddrinfo(res);
        return;
    }
    char why[200];
    if (status < 0) {
        snprintf(why, sizeof why, "connect to %s: cannot resolve %s: %s", c->peer, c->host, uv_strerror(status));
        conn_close(c, why, false, false);
        uv_freeaddrinfo(res);
        return;
    }
    struct addrinfo *pick = res;
    for (struct addrinfo *a = res; a; a = a->ai_next)
        if (a->ai_family == AF_INET) {
            pick = a;
            break;
        }
    c->state = C_CONNECTING;
    c->creq.data = c;
    int rc = uv_tcp_connect(&c->creq, &c->tcp, pick->ai_addr, on_connect);
    uv_freeaddrinfo(res);
    if (rc < 0) {
        snprintf(why, sizeof why, "connect to %s: %s", c->peer, uv_strerror(rc));
        conn_close(c, why, false, false);
    }
}

static void do_connect(sl_rpc_conn_t *c) {
    sl_rpc_t *rpc = c->rpc;
    if (c->state != C_INIT) { /* closed on the loop thread before it started */
        sl_rpc_conn_release(c);
        return;
    }
    int rc = conn_init_handles(c);
    char why[200];
    if (rc < 0) {
        snprintf(why, sizeof why, "connect to %s: %s", c->peer, uv_strerror(rc));
        conn_close(c, why, false, false);
        sl_rpc_conn_release(c); /* no handle holds the loop's reference */
        return;
    }
    uv_timer_start(&c->timer, on_conn_timer, (uint64_t)rpc->connect_timeout_ms, 0);
    char ports[16];
    snprintf(ports, sizeof ports, "%d", c->port);
    struct addrinfo hints = {0};
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    c->state = C_RESOLVING;
    c->gai.data = c;
    rc = uv_getaddrinfo(&rpc->loop, &c->gai, on_resolved, c->host, ports, &hints);
    if (rc < 0) {
        c->state = C_CONNECTING; /* nothing to cancel */
        snprintf(why, sizeof why, "connect to %s: cannot resolve %s: %s", c->peer, c->host, uv_strerror(rc));
        conn_close(c, why, false, false);
    }
}

/* ---- timers ------------------------------------------------------------------------- */

static void on_timer_closed(uv_handle_t *h) { sl_free(h->data); }

static void on_timer(uv_timer_t *h) {
    sl_rpc_timer_t *t = h->data;
    if (!atomic_load_explicit(&t->cancelled, memory_order_acquire)) t->fn(t->ctx);
}

static void timer_start(sl_rpc_timer_t *t) {
    sl_rpc_t *rpc = t->rpc;
    if (atomic_load(&t->cancelled)) { /* else its CMD_TIMER_CANCEL frees it */
        if (t->free_on_start) sl_free(t);
        return;
    }
    uv_timer_init(&rpc->loop, &t->t);
    t->t.data = t;
    t->started = true;
    t->prev = NULL;
    t->next = rpc->timers;
    if (rpc->timers) rpc->timers->prev = t;
    rpc->timers = t;
    uv_timer_start(&t->t, on_timer, (uint64_t)t->interval_ms, (uint64_t)t->interval_ms);
}

static void timer_close(sl_rpc_timer_t *t) {
    sl_rpc_t *rpc = t->rpc;
    if (!t->started) {
        sl_free(t);
        return;
    }
    if (t->prev) t->prev->next = t->next;
    else rpc->timers = t->next;
    if (t->next) t->next->prev = t->prev;
    uv_close((uv_handle_t *)&t->t, on_timer_closed);
}

/* ---- the loop thread -------------------------------------------------------------------- */

static void cmd_free(cmd_t *c) {
    if ((c->type == CMD_FLUSH || c->type == CMD_CLOSE) && c->conn) sl_rpc_conn_release(c->conn);
    sl_free(c->why);
    sl_free(c);
}

/* Closes everything; uv_run returns once every handle is closed. */
static void rpc_shutdown(sl_rpc_t *rpc) {
    rpc->shut = true;
    if (rpc->listening) uv_close((uv_handle_t *)&rpc->server, NULL);
    while (rpc->timers) timer_close(rpc->timers);
    /* conn_close never unlinks or frees a connection synchronously (the
     * loop's reference goes in the handles' close callback), so the list
     * can be walked while closing. */
    for (sl_rpc_conn_t *c = rpc->conns; c; c = c->next) conn_close(c, "rpc shut down", false, false);
    uv_close((uv_handle_t *)&rpc->wake, NULL);
}

static void on_wake(uv_async_t *a) {
    sl_rpc_t *rpc = a->data;
    if (rpc->shut) return;
    pthread_mutex_lock(&rpc->mu);
    cmd_t *list = rpc->cmds;
    rpc->cmds = rpc->cmds_tail = NULL;
    pthread_mutex_unlock(&rpc->mu);
    bool stop = false;
    while (list) {
        cmd_t *c = list;
        list = list->next;
        switch (c->type) {
        case CMD_CONNECT:
            do_connect(c->conn);
            break;
        case CMD_FLUSH:
            conn_flush(c->conn);
            break;
        case CMD_CLOSE:
            conn_close(c->conn, c->why, false, true);
            break;
        case CMD_LISTEN: {
            int rc = do_listen(rpc, c->listen);
            pthread_mutex_lock(&rpc->mu);
            c->listen->rc = rc;
            c->listen->done = true;
            pthread_cond_broadcast(&rpc->cv);
            pthread_mutex_unlock(&rpc->mu);
            break;
        }
        case CMD_TIMER_START:
            timer_start(c->timer);
            break;
        case CMD_TIMER_CANCEL:
            timer_close(c->timer);
            break;
        case CMD_STOP:
            stop = true;
            break;
        }
        cmd_free(c);
    }
    if (stop) rpc_shutdown(rpc);
}

static void loop_main(void *arg) {
    sl_rpc_t *rpc = arg;
    /* A write to a connection the peer reset raises SIGPIPE in the writing
     * thread; blocked here, it stays pending and the write fails with EPIPE
     * (the process does not die because a TaskManager went away). */
    sigset_t pipe_set;
    sigemptyset(&pipe_set);
    sigaddset(&pipe_set, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_set, NULL);
    uv_run(&rpc->loop, UV_RUN_DEFAULT);
}

/* ---- public API ------------------------------------------------------------------------- */

int sl_rpc_new(const sl_rpc_config_t *cfg, sl_rpc_t **out, char *err, size_t errlen) {
    *out = NULL;
    sl_rpc_config_t def = {0};
    if (!cfg) cfg = &def;
    if (cfg->connect_timeout_ms < 0)
        return sl_errf(err, errlen, SL_EINVAL, "rpc: connect timeout must not be negative, got %d ms",
                       cfg->connect_timeout_ms);
    if (cfg->max_frame > UINT32_MAX - 4)
        return sl_errf(err, errlen, SL_EINVAL, "rpc: maximum frame of %zu bytes does not fit the u32 length",
                       cfg->max_frame);
    sl_rpc_t *rpc = sl_calloc(1, sizeof *rpc);
    rpc->secret = sl_strdup(cfg->secret ? cfg->secret : "");
    rpc->name = sl_strdup(cfg->name && *cfg->name ? cfg->name : "rpc");
    rpc->max_frame = cfg->max_frame ? cfg->max_frame : SL_RPC_DEFAULT_MAX_FRAME;
    rpc->connect_timeout_ms = cfg->connect_timeout_ms ? cfg->connect_timeout_ms : SL_RPC_DEFAULT_CONNECT_TIMEOUT_MS;
    rpc->tls = sl_tls_ctx_retain(cfg->tls);
    atomic_init(&rpc->port, -1);
    pthread_mutex_init(&rpc->mu, NULL);
    pthread_cond_init(&rpc->cv, NULL);
    int rc = uv_loop_init(&rpc->loop);
    if (rc == 0) {
        rc = uv_async_init(&rpc->loop, &rpc->wake, on_wake);
        if (rc == 0) {
            rpc->wake.data = rpc;
            rc = uv_thread_create(&rpc->thread, loop_main, rpc);
            if (rc < 0) {
                uv_close((uv_handle_t *)&rpc->wake, NULL);
                uv_run(&rpc->loop, UV_RUN_DEFAULT);
            }
        }
        if (rc < 0) uv_loop_close(&rpc->loop);
    }
    if (rc < 0) {
        pthread_cond_destroy(&rpc->cv);
        pthread_mutex_destroy(&rpc->mu);
        sl_tls_ctx_release(rpc->tls);
        sl_free(rpc->secret);
        sl_free(rpc->name);
        sl_free(rpc);
        return sl_errf(err, errlen, SL_EIO, "rpc: cannot start the event loop: %s", uv_strerror(rc));
    }
    *out = rpc;
    return 0;
}

void sl_rpc_destroy(sl_rpc_t *rpc) {
    if (!rpc) return;
    pthread_mutex_lock(&rpc->mu);
    rpc->stopping = true;
    post_locked(rpc, cmd_new(CMD_STOP));
    pthread_mutex_unlock(&rpc->mu);
    uv_thread_join(&rpc->thread);
    /* Commands posted after the last wake-up (flushes, closes of
     * connections that are closed by now). */
    cmd_t *c = rpc->cmds;
    while (c) {
        cmd_t *n = c->next;
        cmd_free(c);
        c = n;
    }
    uv_loop_close(&rpc->loop);
    pthread_cond_destroy(&rpc->cv);
    pthread_mutex_destroy(&rpc->mu);
    sl_tls_ctx_release(rpc->tls);
    sl_free(rpc->secret);
    sl_free(rpc->name);
    sl_free(rpc);
}

int sl_rpc_listen(sl_rpc_t *rpc, const char *host, int port, const sl_rpc_callbacks_t *cbs, char *err,
                  size_t errlen) {
    if (port < 0 || port > 65535) return sl_errf(err, errlen, SL_EINVAL, "listen: bad port %d", port);
    if (!cbs) return sl_errf(err, errlen, SL_EINVAL, "listen: no callbacks");
    listen_req_t lr = {.host = host, .port = port, .cbs = cbs};
    if (on_loop_thread(rpc)) {
        int rc = do_listen(rpc, &lr);
        if (rc) sl_errf(err, errlen, rc, "%s", lr.err);
        return rc;
    }
    cmd_t *c = cmd_new(CMD_LISTEN);
    c->listen = &lr;
    pthread_mutex_lock(&rpc->mu);
    if (rpc->stopping) {
        pthread_mutex_unlock(&rpc->mu);
        sl_free(c);
        return sl_errf(err, errlen, SL_EINVAL, "listen: the rpc is shutting down");
    }
    post_locked(rpc, c);
    while (!lr.done) pthread_cond_wait(&rpc->cv, &rpc->mu);
    pthread_mutex_unlock(&rpc->mu);
    if (lr.rc) sl_errf(err, errlen, lr.rc, "%s", lr.err);
    return lr.rc;
}

int sl_rpc_listen_port(sl_rpc_t *rpc) { return atomic_load(&rpc->port); }

int sl_rpc_connect(sl_rpc_t *rpc, const char *host, int port, const sl_rpc_callbacks_t *cbs,
                   sl_rpc_conn_t **conn) {
    *conn = NULL;
    if (!host || !*host || port <= 0 || port > 65535 || !cbs) return SL_EINVAL;
    sl_rpc_conn_t *c = conn_new(rpc, ROLE_CLIENT, cbs, 2); /* the caller's and the loop's */
    c->host = sl_strdup(host);
    c->port = port;
    c->app_owned = true;
    if (strchr(host, ':')) snprintf(c->peer, sizeof c->peer, "[%s]:%d", host, port);
    else snprintf(c->peer, sizeof c->peer, "%s:%d", host, port);
    cmd_t *cmd = cmd_new(CMD_CONNECT);
    cmd->conn = c;
    pthread_mutex_lock(&rpc->mu);
    if (rpc->stopping) {
        pthread_mutex_unlock(&rpc->mu);
        sl_free(cmd);
        conn_free(c);
        return SL_EINVAL;
    }
    post_locked(rpc, cmd);
    pthread_mutex_unlock(&rpc->mu);
    *conn = c;
    return 0;
}

int sl_rpc_send(sl_rpc_conn_t *c, const void *bytes, size_t len) {
    frame_t *f = NULL;
    pthread_mutex_lock(&c->mu);
    if (c->closed) {
        pthread_mutex_unlock(&c->mu);
        return SL_EIO;
    }
    sl_rpc_t *rpc = c->rpc;
    if (len > rpc->max_frame) {
        pthread_mutex_unlock(&c->mu);
        return SL_EINVAL;
    }
    pthread_mutex_unlock(&c->mu);
    /* Copy outside the lock: frames can be large. */
    f = frame_new(4 + len);
    sl_st32(f->data, (uint32_t)len);
    if (len) memcpy(f->data + 4, bytes, len);
    pthread_mutex_lock(&c->mu);
    if (c->closed) {
        pthread_mutex_unlock(&c->mu);
        sl_free(f);
        return SL_EIO;
    }
    if (c->outq_tail) c->outq_tail->next = f;
    else c->outq = f;
    c->outq_tail = f;
    if (!c->flush_pending) {
        c->flush_pending = true;
        sl_rpc_conn_retain(c);
        cmd_t *cmd = cmd_new(CMD_FLUSH);
        cmd->conn = c;
        pthread_mutex_lock(&rpc->mu);
        post_locked(rpc, cmd);
        pthread_mutex_unlock(&rpc->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return 0;
}

void sl_rpc_close(sl_rpc_conn_t *c, const char *why) {
    char reason[256];
    snprintf(reason, sizeof reason, "closed locally: %s", why && *why ? why : "no reason given");
    pthread_mutex_lock(&c->mu);
    if (c->closed) {
        pthread_mutex_unlock(&c->mu);
        return;
    }
    sl_rpc_t *rpc = c->rpc;
    if (on_loop_thread(rpc)) {
        pthread_mutex_unlock(&c->mu);
        conn_close(c, reason, false, true);
        return;
    }
    c->closed = true; /* sends fail from now on; the loop writes what is queued */
    sl_rpc_conn_retain(c);
    cmd_t *cmd = cmd_new(CMD_CLOSE);
    cmd->conn = c;
    cmd->why = sl_strdup(reason);
    pthread_mutex_lock(&rpc->mu);
    post_locked(rpc, cmd);
    pthread_mutex_unlock(&rpc->mu);
    pthread_mutex_unlock(&c->mu);
}

sl_rpc_timer_t *sl_rpc_every(sl_rpc_t *rpc, int interval_ms, void (*fn)(void *ctx), void *ctx) {
    if (interval_ms < 1 || !fn) return NULL;
    sl_rpc_timer_t *t = sl_calloc(1, sizeof *t);
    t->rpc = rpc;
    t->fn = fn;
    t->ctx = ctx;
    t->interval_ms = interval_ms;
    atomic_init(&t->cancelled, false);
    if (on_loop_thread(rpc)) {
        if (rpc->shut) {
            sl_free(t);
            return NULL;
        }
        timer_start(t);
        return t;
    }
    cmd_t *cmd = cmd_new(CMD_TIMER_START);
    cmd->timer = t;
    pthread_mutex_lock(&rpc->mu);
    if (rpc->stopping) {
        pthread_mutex_unlock(&rpc->mu);
        sl_free(cmd);
        sl_free(t);
        return NULL;
    }
    post_locked(rpc, cmd);
    pthread_mutex_unlock(&rpc->mu);
    return t;
}

void sl_rpc_cancel_timer(sl_rpc_timer_t *t) {
    if (!t) return;
    sl_rpc_t *rpc = t->rpc;
    atomic_store_explicit(&t->cancelled, true, memory_order_release);
    if (on_loop_thread(rpc)) {
        if (t->started) timer_close(t);
        else t->free_on_start = true; /* its start command is still queued */
        return;
    }
    cmd_t *cmd = cmd_new(CMD_TIMER_CANCEL);
    cmd->timer = t;
    pthread_mutex_lock(&rpc->mu);
    post_locked(rpc, cmd);
    pthread_mutex_unlock(&rpc->mu);
}
