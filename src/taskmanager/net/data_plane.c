/*
 * data_plane.c — remote channels over TCP with credit-based flow control
 * (see data_plane.h for the design, frames.h for the wire format).
 *
 * Layout: tables of registered channels (outputs and inputs, by id),
 * socket writes (conn_queue gathers a loop turn's frames, conn_flush writes
 * them in one writev, write_done gives the buffers back), connections
 * (handshake, socket reads: alloc_cb / read_cb, straight into a channel
 * buffer for a BUFFER payload; parsing in conn_process), the producer side
 * (requests, credits, the pump), the consumer side (request, credits on
 * recycle, received buffers gathered per channel), failure, and the
 * commands task threads post to the loop.  Everything static runs on the
 * loop thread unless it says otherwise.
 *
 * TLS (cfg.tls, common/tls.h): a connection first runs the TLS handshake
 * (state C_TLS), then the shared-secret handshake and the frames inside
 * TLS.  conn_flush encrypts the turn's gathered segments and writes the
 * session's ciphertext in one write (the plaintext buffers still go back
 * in write_done); tls_read turns received ciphertext into plaintext in
 * rbuf, parsed as without TLS (a BUFFER payload is then not read straight
 * into its buffer: it must go through the session first).
 */
#include "taskmanager/net/data_plane.h"

#include <inttypes.h>
#include <netdb.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <uv.h>

#include "common/auth.h"
#include "common/common.h"
#include "common/tls.h"
#include "taskmanager/net/frames.h"

#define NBUCKETS 1024
#define READ_CHUNK (256u << 10)
#define READ_PLAIN READ_CHUNK /* most bytes read into rbuf at once (the tail of a BUFFER not in it goes straight to its buffer) */
#define DIRECT_MIN 1024u       /* a BUFFER payload at least this long may be read straight into its buffer */

#define MAX_SEGS 512 /* iovecs gathered into one write before it is flushed early */
#define TLS_STAGE 16384 /* plaintext gathered into one sl_tls_write (one full TLS record) */

typedef struct dp_conn dp_conn_t;
typedef struct dp_write dp_write_t;

/* One registered channel, an output (producer side) or an input. */
typedef struct dp_chan {
    sl_data_plane_t *dp;
    uint64_t id;
    bool is_input;
    sl_channel_t *ch;
    dp_conn_t *conn;   /* the connection it is bound to, NULL when none */
    bool failed;       /* cancelled after a failure */
    bool removed;      /* unregistered; freed once writes_pending is 0 */
    int writes_pending;
    /* output */
    int64_t credit;    /* buffers the consumer can take */
    atomic_bool can_send; /* credit > 0, for the hook: no wake-up per buffer while out of credit */
    /* input */
    struct sockaddr_storage addr;
    char key[80];      /* "host:port" of the producer process */
    bool requested;
    atomic_llong outstanding; /* credits announced, not yet used by a BUFFER (loop writes, hook reads) */
    atomic_int new_credit;    /* recycles since the last CREDIT frame (task threads add) */
    int credit_batch;         /* recycles announced together while the producer has credit left */
    uint32_t backlog;         /* the producer's last announced backlog */
    /* news from task threads: in dp->notify when `notified` */
    atomic_bool notified;
    struct dp_chan *notify_next;
    struct dp_chan *hnext;
} dp_chan_t;

/* A request that waits for its output to be registered. */
typedef struct dp_pending {
    dp_conn_t *conn;
    uint64_t id;
    uint32_t credit;
    int64_t deadline_ns;
    struct dp_pending *next;
} dp_pending_t;

enum { C_CONNECTING, C_HELLO, C_PROOF, C_READY, C_CLOSING, C_TLS };

struct dp_conn {
    uv_tcp_t tcp;
    uv_connect_t creq;
    sl_data_plane_t *dp;
    int state;
    bool outbound;
    char peer[96];     /* "to host:port" or "from ip:port", for messages */
    char key[80];      /* the peer process ("host:listen port"), "" until known */
    sl_auth_hello_t mine, theirs;
    sl_buf_t rbuf;
    int64_t started_ns; /* when the handshake began (a silent peer is dropped after handshake_timeout_ms) */
    uint64_t *closed;  /* ids of inputs released on this connection: late buffers are dropped */
    size_t nclosed, capclosed;
    dp_write_t *wb;    /* frames queued this loop turn, written by conn_flush in one writev */
    /* received buffers of one channel not yet handed to it (one send, one wake-up per read) */
    dp_chan_t *rx_c;
    sl_nbuf_t *rx_head, *rx_tail;
    int rx_n;
    /* a BUFFER whose payload is being read straight into dst_b (dst_got of dst_len bytes so far) */
    dp_chan_t *dst_c;
    sl_nbuf_t *dst_b;
    uint32_t dst_len, dst_got;
    uint32_t skip;     /* payload bytes of a dropped BUFFER still to read away */
    sl_tls_t *tls;     /* NULL: plain TCP */
    bool tls_broken;   /* encrypting failed in conn_flush: flush_all fails the connection */
    dp_conn_t *next;
};

/* One gathered write: the frames a loop turn queued on a connection. */
typedef struct dp_seg {
    int hdr;            /* index of its 17-byte header in hdrs, or -1 for raw bytes at p */
    const uint8_t *p;
    uint32_t len;
} dp_seg_t;
typedef struct dp_hdr {
    uint8_t b[SL_FRAME_HEADER];
} dp_hdr_t;
typedef struct dp_wbuf {
    dp_chan_t *c;       /* a channel buffer to give back to c when written */
    sl_nbuf_t *b;
} dp_wbuf_t;
struct dp_write {
    uv_write_t req;
    dp_hdr_t *hdrs;     /* frame headers (segments point into it only at flush: it grows) */
    int nhdrs, caphdrs;
    dp_seg_t *segs;
    int nsegs, capsegs;
    dp_wbuf_t *bufs;
    int nbufs, capbufs;
    void **owned;       /* copied payloads to free */
    int nowned, capowned;
};

enum { CMD_ADD_OUTPUT, CMD_ADD_INPUT, CMD_REMOVE, CMD_STOP };
typedef struct dp_cmd {
    int kind;
    dp_chan_t *c;
    uint64_t id;
    int rc;
    bool done;
    struct dp_cmd *next;
} dp_cmd_t;

struct sl_data_plane {
    uv_loop_t loop;
    uv_tcp_t listener;
    uv_async_t async;
    uv_timer_t timer;
    uv_prepare_t prepare; /* prepare and check flush every connection's gathered writes */
    uv_check_t check;
    pthread_t thread;
    int port;
    char host[64];
    char *secret;
    sl_tls_ctx_t *tls; /* NULL: plain TCP */
    int request_timeout_ms, handshake_timeout_ms;
    sl_data_plane_failed_fn on_failed;
    void *ctx;
    /* mu guards cmds and notify (task threads -> loop) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    dp_cmd_t *cmd_head, *cmd_tail;
    dp_chan_t *notify;
    /* loop thread only */
    dp_chan_t *outputs[NBUCKETS], *inputs[NBUCKETS];
    dp_conn_t *conns;
    dp_pending_t *pending;
    dp_chan_t *graveyard; /* removed while a process_notify ran */
    int notify_depth;
    bool stopping;
    /* stats */
    atomic_int nconns;
    atomic_llong buffers_sent, buffers_received, priority_sent, credits_received, bad_connections;
};

static void fail_conn(dp_conn_t *conn, bool bad, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void out_pump(dp_chan_t *c);
static void in_request(dp_chan_t *c);

/* ---- tables ------------------------------------------------------------ */

static dp_chan_t **tab_slot(dp_chan_t **tab, uint64_t id) {
    dp_chan_t **s = &tab[sl_mix64(id) & (NBUCKETS - 1)];
    while (*s && (*s)->id != id) s = &(*s)->hnext;
    return s;
}
static dp_chan_t *tab_find(dp_chan_t **tab, uint64_t id) { return *tab_slot(tab, id); }
static void tab_remove(dp_chan_t **tab, dp_chan_t *c) {
    dp_chan_t **s = tab_slot(tab, c->id);
    if (*s == c) *s = c->hnext;
    c->hnext = NULL;
}

/* Frees a removed channel once no write holds one of its buffers and no
 * process_notify walks a list that may hold it (dp->graveyard until then). */
static void chan_release(dp_chan_t *c) {
    sl_data_plane_t *dp = c->dp;
    c->removed = true;
    if (c->writes_pending > 0) return;
    if (dp->notify_depth > 0) {
        c->hnext = dp->graveyard;
        dp->graveyard = c;
        return;
    }
    sl_free(c);
}

/* ---- task threads -> loop ------------------------------------------------ */

/* Any thread, called under the channel's lock (a channel hook). */
static void notify(dp_chan_t *c) {
    if (atomic_exchange(&c->notified, true)) return;
    sl_data_plane_t *dp = c->dp;
    pthread_mutex_lock(&dp->mu);
    c->notify_next = dp->notify;
    dp->notify = c;
    pthread_mutex_unlock(&dp->mu);
    uv_async_send(&dp->async);
}
/* The loop is woken for a sent buffer only when it can send it: while out
 * of credit it is woken by the CREDIT frame instead (the loop stores
 * can_send before it polls the channel under the channel's lock, the hook
 * reads it under that lock after queueing, so one of them sees the other).
 * A priority event, always at the head, always wakes it. */
static void on_send_hook(void *ctx) {
    dp_chan_t *c = ctx;
    if (atomic_load(&c->can_send) || (c->ch->full_head && c->ch->full_head->priority)) notify(c);
}
/* Credits go out in batches of credit_batch, or at once when the producer
 * is low on credit (seq_cst: either this sees the loop's lowered
 * outstanding, or the loop sees this new credit, see on_data). */
static void on_recycle_hook(void *ctx) {
    dp_chan_t *c = ctx;
    int n = atomic_fetch_add(&c->new_credit, 1) + 1;
    if (n >= c->credit_batch || atomic_load(&c->outstanding) < c->credit_batch) notify(c);
}

static void conn_send(dp_conn_t *conn, int type, uint64_t id, uint32_t value, const void *payload, uint32_t len,
                      dp_chan_t *c, sl_nbuf_t *b);

/* An input's recycled buffers become one CREDIT frame. */
static void in_flush_credit(dp_chan_t *c) {
    if (!c->requested || !c->conn || c->conn->state != C_READY) return;
    int n = atomic_exchange(&c->new_credit, 0);
    if (n <= 0) return;
    atomic_fetch_add(&c->outstanding, n);
    conn_send(c->conn, SL_FRAME_CREDIT, c->id, (uint32_t)n, NULL, 0, NULL, NULL);
}

static void process_notify(sl_data_plane_t *dp) {
    pthread_mutex_lock(&dp->mu);
    dp_chan_t *list = dp->notify;
    dp->notify = NULL;
    pthread_mutex_unlock(&dp->mu);
    dp->notify_depth++; /* a failure callback may remove channels still listed */
    while (list) {
        dp_chan_t *c = list;
        list = c->notify_next;
        atomic_store(&c->notified, false);
        if (c->removed) continue;
        if (c->is_input)
            in_flush_credit(c);
        else
            out_pump(c);
    }
    if (--dp->notify_depth == 0)
        while (dp->graveyard) {
            dp_chan_t *c = dp->graveyard;
            dp->graveyard = c->hnext;
            sl_free(c);
        }
}

/* ---- connections --------------------------------------------------------- */

/* ---- socket writes ---------------------------------------------------------
 * Every byte a connection sends goes through conn_queue (appends a segment
 * to the turn's gathered write), conn_flush (one uv_write = one writev of
 * everything queued) and write_done (gives the buffers back).  Under TLS
 * conn_flush encrypts the segments (tls_encrypt) and writes the session's
 * ciphertext instead; tls_flush writes what the session produced by itself
 * (its handshake, alerts).  Ciphertext leaves in the order the session made
 * it: every take is written at once, and uv_write keeps the order. */

#define GROW(arr, n, cap) \
    do { \
        if ((n) == (cap)) (arr) = sl_realloc((arr), (size_t)((cap) = (cap) ? 2 * (cap) : 16) * sizeof *(arr)); \
    } while (0)

static void wbuf_free(dp_write_t *w) {
    for (int i = 0; i < w->nowned; i++) sl_free(w->owned[i]);
    sl_free(w->owned);
    sl_free(w->hdrs);
    sl_free(w->segs);
    sl_free(w->bufs);
    sl_free(w);
}

/* Gives the written buffers back: a run of buffers of one channel becomes
 * one sl_channel_recycle_many (one wake-up of its producer). */
static void write_done(uv_write_t *req, int status) {
    dp_write_t *w = (dp_write_t *)req;
    dp_conn_t *conn = req->handle->data;
    for (int i = 0; i < w->nbufs;) {
        dp_chan_t *c = w->bufs[i].c;
        sl_nbuf_t *chain = NULL, **tail = &chain;
        int j = i;
        for (; j < w->nbufs && w->bufs[j].c == c; j++) {
            sl_nbuf_t *b = w->bufs[j].b;
            if (c->removed) { /* the channel may be gone: the buffer is ours */
                sl_free(b->data);
                sl_free(b);
            } else {
                b->next = NULL;
                *tail = b;
                tail = &b->next;
            }
        }
        if (chain) sl_channel_recycle_many(c->ch, chain); /* a priority event is freed by it */
        c->writes_pending -= j - i;
        if (c->removed && c->writes_pending == 0) chan_release(c);
        i = j;
    }
    wbuf_free(w);
    if (status < 0 && status != UV_ECANCELED)
        fail_conn(conn, false, "data connection %s lost: %s", conn->peer, uv_strerror(status));
}

/* TLS: the segments of w, in order, into the session, gathered into
 * records of TLS_STAGE bytes (a 17-byte header is not a record of its
 * own); then the session's ciphertext into one buffer owned by w.  0, or
 * SL_EIO (sl_tls_error says why). */
static int tls_encrypt(dp_conn_t *conn, dp_write_t *w, uv_buf_t *out) {
    sl_tls_t *t = conn->tls;
    uint8_t stage[TLS_STAGE];
    size_t k = 0;
    for (int i = 0; i < w->nsegs; i++) {
        const dp_seg_t *g = &w->segs[i];
        const uint8_t *p = g->hdr >= 0 ? w->hdrs[g->hdr].b : g->p;
        size_t len = g->len;
        while (len > 0) {
            if (k == 0 && len >= TLS_STAGE) { /* a big payload: no copy */
                if (sl_tls_write(t, p, len) < 0) return SL_EIO;
                break;
            }
            size_t n = len < TLS_STAGE - k ? len : TLS_STAGE - k;
            memcpy(stage + k, p, n);
            k += n;
            p += n;
            len -= n;
            if (k == TLS_STAGE) {
                if (sl_tls_write(t, stage, k) < 0) return SL_EIO;
                k = 0;
            }
        }
    }
    if (k && sl_tls_write(t, stage, k) < 0) return SL_EIO;
    size_t n = sl_tls_pending(t);
    uint8_t *c = sl_malloc(n ? n : 1);
    GROW(w->owned, w->nowned, w->capowned);
    w->owned[w->nowned++] = c;
    *out = uv_buf_init((char *)c, (unsigned)sl_tls_take(t, c, n));
    return 0;
}

/* Writes everything queued on the connection (one writev; under TLS one
 * write of its ciphertext). */
static void conn_flush(dp_conn_t *conn) {
    dp_write_t *w = conn->wb;
    if (!w) return;
    conn->wb = NULL;
    if (conn->tls) {
        uv_buf_t c;
        bool sealed = tls_encrypt(conn, w, &c) == 0;
        if (!sealed || uv_write(&w->req, (uv_stream_t *)&conn->tcp, &c, 1, write_done) < 0) {
            w->req.handle = (uv_stream_t *)&conn->tcp; /* give the buffers back now */
            write_done(&w->req, UV_ECANCELED);
            /* the session failed: nothing after this can be sent.  Not failed
             * here: a caller (out_pump) may still hold the connection. */
            if (!sealed) conn->tls_broken = true;
        }
        return;
    }
    uv_buf_t small[16] = {{0}}, *bufs = small;
    if (w->nsegs > 16) bufs = sl_malloc((size_t)w->nsegs * sizeof *bufs);
    for (int i = 0; i < w->nsegs; i++) {
        const dp_seg_t *g = &w->segs[i];
        const uint8_t *p = g->hdr >= 0 ? w->hdrs[g->hdr].b : g->p;
        bufs[i] = uv_buf_init((char *)p, g->len);
    }
    int rc = uv_write(&w->req, (uv_stream_t *)&conn->tcp, bufs, (unsigned)w->nsegs, write_done); /* copies bufs */
    if (bufs != small) sl_free(bufs);
    if (rc < 0) { /* only when the stream is already closing: give the buffers back now */
        w->req.handle = (uv_stream_t *)&conn->tcp;
        write_done(&w->req, UV_ECANCELED);
    }
}

/* Writes the ciphertext the TLS session produced by itself (its handshake,
 * alerts, a reply to what it read) at once. */
static void tls_flush(dp_conn_t *conn) {
    size_t n = sl_tls_pending(conn->tls);
    if (!n) return;
    dp_write_t *w = sl_calloc(1, sizeof *w);
    uint8_t *c = sl_malloc(n);
    GROW(w->owned, w->nowned, w->capowned);
    w->owned[w->nowned++] = c;
    uv_buf_t buf = uv_buf_init((char *)c, (unsigned)sl_tls_take(conn->tls, c, n));
    if (uv_write(&w->req, (uv_stream_t *)&conn->tcp, &buf, 1, write_done) < 0) wbuf_free(w);
}

static void rx_flush(dp_conn_t *conn);
/* Once per loop turn (before and after polling): received buffers go to
 * their channels, queued frames to the sockets. */
static void flush_all(sl_data_plane_t *dp) {
    for (dp_conn_t *conn = dp->conns; conn; conn = conn->next) {
        rx_flush(conn);
        conn_flush(conn);
        if (conn->tls_broken) /* unlinks conn, but conn->next stays valid until its close callback */
            fail_conn(conn, true, "data connection %s closed: TLS: %s", conn->peer, sl_tls_error(conn->tls));
    }
}
static void on_prepare(uv_prepare_t *h) { flush_all(h->data); }
static void on_check(uv_check_t *h) { flush_all(h->data); }

/* Appends one segment to the connection's gathered write (hdr: a frame
 * header; otherwise len bytes at p, copied when `copy`). */
static void conn_queue(dp_conn_t *conn, const uint8_t *hdr, const void *p, uint32_t len, bool copy) {
    dp_write_t *w = conn->wb;
    if (!w) w = conn->wb = sl_calloc(1, sizeof *w);
    GROW(w->segs, w->nsegs, w->capsegs);
    dp_seg_t *g = &w->segs[w->nsegs++];
    if (hdr) {
        GROW(w->hdrs, w->nhdrs, w->caphdrs);
        g->hdr = w->nhdrs++;
        g->p = NULL;
        g->len = SL_FRAME_HEADER;
        memcpy(w->hdrs[g->hdr].b, hdr, SL_FRAME_HEADER);
        return;
    }
    g->hdr = -1;
    g->len = len;
    if (copy) {
        void *o = sl_malloc(len ? len : 1);
        memcpy(o, p, len);
        GROW(w->owned, w->nowned, w->capowned);
        w->owned[w->nowned++] = o;
        p = o;
    }
    g->p = p;
}

/* Queues one frame; with c and b the payload is b's bytes, given back to
 * c's channel when written, otherwise the payload is copied. */
static void conn_send(dp_conn_t *conn, int type, uint64_t id, uint32_t value, const void *payload, uint32_t len,
                      dp_chan_t *c, sl_nbuf_t *b) {
    uint8_t hdr[SL_FRAME_HEADER];
    sl_frame_header(hdr, type, id, value, len);
    conn_queue(conn, hdr, NULL, 0, false);
    if (len) conn_queue(conn, NULL, b ? b->data : payload, len, !b);
    if (b) {
        dp_write_t *w = conn->wb;
        GROW(w->bufs, w->nbufs, w->capbufs);
        w->bufs[w->nbufs++] = (dp_wbuf_t){c, b};
        c->writes_pending++;
    }
    if (conn->state == C_CLOSING || conn->wb->nsegs >= MAX_SEGS) conn_flush(conn);
}

/* Raw bytes (the handshake). */
static void conn_send_raw(dp_conn_t *conn, const void *p, size_t n) {
    conn_queue(conn, NULL, p, (uint32_t)n, true);
    if (conn->state == C_CLOSING) conn_flush(conn);
}

/* Hands the received buffers gathered for one channel to it (one lock, one
 * wake-up of its consumer).  Before any frame that is not a BUFFER of that
 * channel, once per loop turn (flush_all), before a failure and before the
 * channel is removed, so that order holds and no callback sees a batch. */
static void rx_flush(dp_conn_t *conn) {
    if (!conn->rx_c) return;
    sl_channel_send_many(conn->rx_c->ch, conn->rx_head, conn->rx_tail, conn->rx_n);
    conn->rx_c = NULL;
    conn->rx_head = conn->rx_tail = NULL;
    conn->rx_n = 0;
}

/* Abandons a payload being read straight into a buffer (its channel is
 * removed or the connection failed): the buffer goes back to its channel,
 * the rest of the payload is read away. */
static void conn_drop_dst(dp_conn_t *conn) {
    if (!conn->dst_b) return;
    sl_channel_recycle(conn->dst_c->ch, conn->dst_b);
    conn->skip = conn->dst_len - conn->dst_got;
    conn->dst_b = NULL;
    conn->dst_c = NULL;
}

static void conn_closed(uv_handle_t *h) {
    dp_conn_t *conn = h->data;
    if (conn->wb) { /* cannot happen: fail_conn flushed it, and a send after that writes at once */
        conn->wb->req.handle = (uv_stream_t *)&conn->tcp;
        write_done(&conn->wb->req, UV_ECANCELED);
    }
    sl_tls_free(conn->tls);
    sl_buf_free(&conn->rbuf);
    sl_free(conn->closed);
    sl_free(conn);
}

static void conn_unlink(dp_conn_t *conn) {
    for (dp_conn_t **s = &conn->dp->conns; *s; s = &(*s)->next)
        if (*s == conn) {
            *s = conn->next;
            atomic_fetch_sub(&conn->dp->nconns, 1);
            return;
        }
}

/* Fails every channel on the connection (callbacks last, by id, so that
 * a callback may remove any channel) and closes it. */
static void fail_conn(dp_conn_t *conn, bool bad, const char *fmt, ...) {
    if (conn->state == C_CLOSING) return;
    sl_data_plane_t *dp = conn->dp;
    bool was_ready = conn->state == C_READY;
    rx_flush(conn);
    conn_drop_dst(conn);
    conn->state = C_CLOSING;
    conn_flush(conn); /* uv_close below cancels it: the buffers go back */
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    if (bad) atomic_fetch_add(&dp->bad_connections, 1);
    conn_unlink(conn);
    uint64_t *ids = NULL;
    size_t nids = 0, cap = 0;
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < NBUCKETS; i++)
            for (dp_chan_t *c = (t ? dp->inputs : dp->outputs)[i]; c; c = c->hnext) {
                if (c->conn != conn) continue;
                c->conn = NULL;
                c->failed = true;
                sl_channel_cancel(c->ch);
                if (c->ch->consumer) sl_waker_signal(c->ch->consumer);
                if (nids == cap) ids = sl_realloc(ids, (cap = cap ? 2 * cap : 16) * sizeof *ids);
                ids[nids++] = c->id;
            }
    bool had_requests = false;
    for (dp_pending_t **s = &dp->pending; *s;) {
        if ((*s)->conn == conn) {
            dp_pending_t *p = *s;
            *s = p->next;
            sl_free(p);
            had_requests = true;
        } else {
            s = &(*s)->next;
        }
    }
    /* an idle, authenticated connection that the peer closed is no news (a process stopped) */
    if (!dp->stopping && (bad || nids > 0 || had_requests || !was_ready)) fprintf(stderr, "sluice: %s\n", msg);
    uv_read_stop((uv_stream_t *)&conn->tcp);
    uv_close((uv_handle_t *)&conn->tcp, conn_closed);
    if (dp->on_failed && !dp->stopping)
        for (size_t i = 0; i < nids; i++) dp->on_failed(dp->ctx, ids[i], msg);
    sl_free(ids);
}

/* Fails one channel (an ERROR from the producer). */
static void fail_chan(dp_chan_t *c, const char *msg) {
    sl_data_plane_t *dp = c->dp;
    c->conn = NULL;
    c->failed = true;
    sl_channel_cancel(c->ch);
    if (c->ch->consumer) sl_waker_signal(c->ch->consumer);
    fprintf(stderr, "sluice: %s\n", msg);
    if (dp->on_failed) dp->on_failed(dp->ctx, c->id, msg);
}

static dp_conn_t *conn_new(sl_data_plane_t *dp, bool outbound) {
    dp_conn_t *conn = sl_calloc(1, sizeof *conn);
    conn->dp = dp;
    conn->outbound = outbound;
    uv_tcp_init(&dp->loop, &conn->tcp);
    conn->tcp.data = conn;
    conn->next = dp->conns;
    dp->conns = conn;
    atomic_fetch_add(&dp->nconns, 1);
    return conn;
}

static void alloc_cb(uv_handle_t *h, size_t suggested, uv_buf_t *buf) {
    SL_UNUSED(suggested);
    dp_conn_t *conn = h->data;
    if (conn->dst_b) { /* the rest of a payload, straight into its buffer (never under TLS) */
        *buf = uv_buf_init((char *)conn->dst_b->data + conn->dst_got, conn->dst_len - conn->dst_got);
        return;
    }
    sl_buf_reserve(&conn->rbuf, READ_CHUNK);
    size_t room = conn->rbuf.cap - conn->rbuf.len;
    *buf = uv_buf_init((char *)conn->rbuf.p + conn->rbuf.len, (unsigned)(room < READ_PLAIN ? room : READ_PLAIN));
}

static dp_chan_t *in_check(dp_conn_t *conn, const sl_frame_t *f);
static sl_nbuf_t *in_take_buffer(dp_conn_t *conn, dp_chan_t *c, const sl_frame_t *f);
static void rx_add(dp_conn_t *conn, dp_chan_t *c, sl_nbuf_t *b);

/* A BUFFER header whose payload is not all in rbuf yet: the payload goes
 * straight into the buffer its credit guarantees (or is read away when
 * the channel was released here).  `part` payload bytes follow the header
 * in p. */
static void start_direct(dp_conn_t *conn, const sl_frame_t *f, const uint8_t *part, uint32_t npart) {
    if (conn->rx_c && conn->rx_c->id != f->id) rx_flush(conn);
    dp_chan_t *c = in_check(conn, f);
    if (conn->state == C_CLOSING) return;
    sl_nbuf_t *b = c ? in_take_buffer(conn, c, f) : NULL;
    if (conn->state == C_CLOSING) return;
    if (!b) {
        conn->skip = f->len - npart;
        return;
    }
    memcpy(b->data, part, npart);
    conn->dst_c = c;
    conn->dst_b = b;
    conn->dst_len = f->len;
    conn->dst_got = npart;
}

static void handle_frame(dp_conn_t *conn, const sl_frame_t *f);

/* Runs the handshake and then every complete frame in rbuf. */
static void conn_process(dp_conn_t *conn) {
    sl_data_plane_t *dp = conn->dp;
    size_t pos = 0;
    char err[256];
    while (conn->state != C_CLOSING) {
        const uint8_t *p = conn->rbuf.p + pos;
        size_t avail = conn->rbuf.len - pos;
        if (conn->state == C_HELLO) {
            if (avail < SL_AUTH_HELLO_LEN) break;
            if (!conn->tls && p[0] == 0x16 && p[1] == 0x03) {
                fail_conn(conn, true, "data connection %s refused: peer speaks TLS, but TLS is off here "
                          "(security.ssl.internal.enabled)", conn->peer);
                return;
            }
            if (sl_auth_hello_parse(p, conn->mine.role, &conn->theirs, err, sizeof err) < 0) {
                fail_conn(conn, true, "data connection %s refused: %s", conn->peer, err);
                return;
            }
            if (conn->theirs.kind != SL_AUTH_DATA) {
                fail_conn(conn, true, "data connection %s refused: handshake of kind %u, not a data connection",
                          conn->peer, conn->theirs.kind);
                return;
            }
            uint8_t proof[SL_AUTH_PROOF_LEN];
            sl_auth_proof(dp->secret, &conn->mine, &conn->theirs, proof);
            conn_send_raw(conn, proof, sizeof proof);
            pos += SL_AUTH_HELLO_LEN;
            conn->state = C_PROOF;
        } else if (conn->state == C_PROOF) {
            if (avail < SL_AUTH_PROOF_LEN) break;
            if (!sl_auth_check(dp->secret, &conn->mine, &conn->theirs, p)) {
                fail_conn(conn, true, "data connection %s refused: authentication failed (wrong secret)",
                          conn->peer);
                return;
            }
            pos += SL_AUTH_PROOF_LEN;
            conn->state = C_READY;
            conn_send(conn, SL_FRAME_PEER, 0, (uint32_t)dp->port, NULL, 0, NULL, NULL);
            if (conn->outbound) /* the inputs that wait for this connection */
                for (int i = 0; i < NBUCKETS; i++)
                    for (dp_chan_t *c = dp->inputs[i]; c; c = c->hnext)
                        if (c->conn == conn && !c->requested) in_request(c);
        } else if (conn->skip) {
            if (avail == 0) break;
            size_t n = avail < conn->skip ? avail : conn->skip;
            pos += n;
            conn->skip -= (uint32_t)n;
        } else {
            sl_frame_t f;
            long n = sl_frame_parse_header(p, avail, SL_FRAME_MAX_PAYLOAD, &f, err, sizeof err);
            if (n > 0 && !conn->tls && f.type == SL_FRAME_BUFFER && f.len >= DIRECT_MIN &&
                avail - SL_FRAME_HEADER < f.len) { /* under TLS the payload arrives decrypted in rbuf */
                uint32_t part = (uint32_t)(avail - SL_FRAME_HEADER);
                start_direct(conn, &f, p + SL_FRAME_HEADER, part);
                pos += SL_FRAME_HEADER + part;
                break; /* rbuf is empty now */
            }
            if (n > 0) n = sl_frame_parse(p, avail, SL_FRAME_MAX_PAYLOAD, &f, err, sizeof err);
            if (n == 0) break;
            if (n < 0) {
                fail_conn(conn, true, "data connection %s closed: %s", conn->peer, err);
                return;
            }
            pos += (size_t)n;
            handle_frame(conn, &f);
        }
    }
    if (conn->state == C_CLOSING) return;
    memmove(conn->rbuf.p, conn->rbuf.p + pos, conn->rbuf.len - pos);
    conn->rbuf.len -= pos;
}

static void conn_hello(dp_conn_t *conn);

/* TLS: n bytes of ciphertext (read into rbuf's spare room) -> the TLS
 * handshake, then plaintext appended to rbuf and parsed as without TLS. */
static void tls_read(dp_conn_t *conn, const uint8_t *p, size_t n) {
    sl_tls_t *t = conn->tls;
    if (sl_tls_feed(t, p, n) < 0) goto failed; /* copied: the room in rbuf is free again */
    if (conn->state == C_TLS) {
        int r = sl_tls_handshake(t);
        tls_flush(conn);
        if (r < 0) goto failed;
        if (r == 0) return;
        conn_hello(conn);
        if (conn->state == C_CLOSING) return;
    }
    for (;;) {
        sl_buf_reserve(&conn->rbuf, READ_CHUNK);
        ssize_t k = sl_tls_read(t, conn->rbuf.p + conn->rbuf.len, conn->rbuf.cap - conn->rbuf.len);
        if (k < 0) goto failed;
        if (k == 0) break;
        conn->rbuf.len += (size_t)k;
    }
    tls_flush(conn);
    conn_process(conn);
    return;
failed:
    tls_flush(conn); /* an alert, if OpenSSL made one */
    if (sl_tls_closed(t) && conn->rbuf.len == 0)
        fail_conn(conn, false, "data connection %s lost: end of file", conn->peer);
    else if (sl_tls_closed(t))
        fail_conn(conn, true, "data connection %s closed: truncated frame (%zu bytes, then end of file)", conn->peer,
                  conn->rbuf.len);
    else
        fail_conn(conn, true, "data connection %s refused: TLS: %s", conn->peer, sl_tls_error(t));
}

static void read_cb(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf) {
    dp_conn_t *conn = s->data;
    if (nread > 0 && conn->tls) {
        tls_read(conn, (const uint8_t *)buf->base, (size_t)nread);
        return;
    }
    if (nread == UV_EOF && !conn->tls && conn->state == C_HELLO && conn->rbuf.len >= 2 && conn->rbuf.p[0] == 0x15 &&
        conn->rbuf.p[1] == 0x03) { /* a TLS alert where a hello belongs: tls.c's answer to a plain peer */
        fail_conn(conn, true, "data connection %s refused: peer speaks TLS, but TLS is off here "
                  "(security.ssl.internal.enabled)", conn->peer);
        return;
    }
    if (nread == UV_EOF && (conn->rbuf.len > 0 || conn->dst_b || conn->skip)) {
        size_t have = conn->dst_b ? SL_FRAME_HEADER + conn->dst_got : conn->rbuf.len;
        fail_conn(conn, true, "data connection %s closed: truncated frame (%zu bytes, then end of file)", conn->peer,
                  have);
        return;
    }
    if (nread < 0) {
        fail_conn(conn, false, "data connection %s lost: %s", conn->peer, uv_strerror((int)nread));
        return;
    }
    if (nread == 0) return;
    if (conn->dst_b && buf->base == (char *)conn->dst_b->data + conn->dst_got) {
        conn->dst_got += (uint32_t)nread;
        if (conn->dst_got < conn->dst_len) return;
        sl_nbuf_t *b = conn->dst_b;
        dp_chan_t *c = conn->dst_c;
        conn->dst_b = NULL;
        conn->dst_c = NULL;
        b->len = conn->dst_len;
        rx_add(conn, c, b); /* handed to the channel at the end of the loop turn */
        return;
    }
    conn->rbuf.len += (size_t)nread;
    conn_process(conn);
}

/* The shared-secret handshake's hello (inside TLS when there is TLS). */
static void conn_hello(dp_conn_t *conn) {
    uint8_t hello[SL_AUTH_HELLO_LEN];
    if (sl_auth_hello_make(&conn->mine, SL_AUTH_DATA, conn->outbound ? 0 : 1, hello) < 0) {
        fail_conn(conn, false, "data connection %s: no random bytes for the handshake", conn->peer);
        return;
    }
    conn->state = C_HELLO;
    conn_send_raw(conn, hello, sizeof hello);
}

static void conn_start(dp_conn_t *conn) {
    uv_tcp_nodelay(&conn->tcp, 1);
    conn->started_ns = sl_mono_ns();
    uv_tcp_keepalive(&conn->tcp, 1, 30); /* a peer that vanished without a reset */
    if (conn->dp->tls) { /* TLS first: the client's ClientHello */
        conn->tls = sl_tls_new(conn->dp->tls, !conn->outbound);
        conn->state = C_TLS;
        if (conn->outbound) {
            int r = sl_tls_handshake(conn->tls);
            tls_flush(conn);
            if (r < 0) {
                fail_conn(conn, true, "data connection %s refused: TLS: %s", conn->peer, sl_tls_error(conn->tls));
                return;
            }
        }
    } else {
        conn_hello(conn);
        if (conn->state == C_CLOSING) return;
    }
    uv_read_start((uv_stream_t *)&conn->tcp, alloc_cb, read_cb);
}

static void connect_cb(uv_connect_t *req, int status) {
    dp_conn_t *conn = req->data;
    if (conn->state == C_CLOSING) return;
    if (status < 0) {
        fail_conn(conn, false, "data connection %s failed: %s", conn->peer, uv_strerror(status));
        return;
    }
    conn_start(conn);
}

static void addr_text(const struct sockaddr *sa, char *out, size_t cap, int port_override) {
    char ip[64] = "?";
    int port = 0;
    if (sa->sa_family == AF_INET) {
        const struct sockaddr_in *a = (const void *)sa;
        uv_ip4_name(a, ip, sizeof ip);
        port = ntohs(a->sin_port);
    } else if (sa->sa_family == AF_INET6) {
        const struct sockaddr_in6 *a = (const void *)sa;
        uv_ip6_name(a, ip, sizeof ip);
        port = ntohs(a->sin6_port);
    }
    snprintf(out, cap, "%s:%d", ip, port_override ? port_override : port);
}

static void on_connection(uv_stream_t *server, int status) {
    sl_data_plane_t *dp = server->data;
    if (status < 0) return;
    dp_conn_t *conn = conn_new(dp, false);
    if (uv_accept(server, (uv_stream_t *)&conn->tcp) < 0) {
        conn->state = C_CLOSING;
        conn_unlink(conn);
        uv_close((uv_handle_t *)&conn->tcp, conn_closed);
        return;
    }
    struct sockaddr_storage ss;
    int len = sizeof ss;
    char a[80] = "?";
    if (uv_tcp_getpeername(&conn->tcp, (struct sockaddr *)&ss, &len) == 0) addr_text((struct sockaddr *)&ss, a, sizeof a, 0);
    snprintf(conn->peer, sizeof conn->peer, "from %s", a);
    conn_start(conn);
}

/* ---- producer side --------------------------------------------------------- */

/* Sends what the credit allows (priority events always) from an output. */
static void out_pump(dp_chan_t *c) {
    if (!c->conn || c->conn->state != C_READY) return;
    sl_data_plane_t *dp = c->dp;
    for (;;) {
        atomic_store(&c->can_send, c->credit > 0);
        atomic_thread_fence(memory_order_seq_cst); /* before the poll's lock-free look at `queued` */
        sl_nbuf_t *b = sl_channel_poll_credited(c->ch, c->credit > 0);
        if (!b) return;
        uint32_t backlog = (uint32_t)atomic_load_explicit(&c->ch->queued, memory_order_relaxed);
        if (b->len > SL_FRAME_MAX_PAYLOAD) {
            sl_channel_recycle(c->ch, b);
            char msg[256];
            snprintf(msg, sizeof msg, "data channel %016" PRIx64 ": a buffer of %u bytes is over the %u-byte frame cap",
                     c->id, b->len, SL_FRAME_MAX_PAYLOAD);
            fail_chan(c, msg);
            return;
        }
        if (b->priority) {
            atomic_fetch_add(&dp->priority_sent, 1);
            conn_send(c->conn, SL_FRAME_PRIORITY, c->id, backlog, NULL, b->len, c, b);
        } else {
            c->credit--;
            atomic_fetch_add(&dp->buffers_sent, 1);
            conn_send(c->conn, SL_FRAME_BUFFER, c->id, backlog, NULL, b->len, c, b);
        }
    }
}

static void out_bind(dp_chan_t *c, dp_conn_t *conn, uint32_t credit) {
    atomic_store(&c->can_send, false);
    c->conn = conn;
    c->credit = credit;
    c->failed = false;
    out_pump(c);
}

static void on_request(dp_conn_t *conn, const sl_frame_t *f) {
    sl_data_plane_t *dp = conn->dp;
    dp_chan_t *c = tab_find(dp->outputs, f->id);
    if (!c) { /* not registered yet: wait */
        dp_pending_t *p = sl_calloc(1, sizeof *p);
        p->conn = conn;
        p->id = f->id;
        p->credit = f->value;
        p->deadline_ns = sl_mono_ns() + (int64_t)dp->request_timeout_ms * 1000000;
        p->next = dp->pending;
        dp->pending = p;
        return;
    }
    if (c->conn || c->failed) {
        char msg[200];
        int n = snprintf(msg, sizeof msg, "channel %016" PRIx64 " is %s at %s:%d", f->id,
                         c->failed ? "failed" : "already consumed", dp->host, dp->port);
        conn_send(conn, SL_FRAME_ERROR, f->id, 0, msg, (uint32_t)n, NULL, NULL);
        return;
    }
    out_bind(c, conn, f->value);
}

static void on_timer(uv_timer_t *t) {
    sl_data_plane_t *dp = t->data;
    int64_t now = sl_mono_ns();
    for (dp_conn_t *conn = dp->conns, *next; conn; conn = next) {
        next = conn->next;
        if ((conn->state == C_TLS || conn->state == C_HELLO || conn->state == C_PROOF) &&
            now - conn->started_ns > (int64_t)dp->handshake_timeout_ms * 1000000)
            fail_conn(conn, true, "data connection %s refused: no handshake within %d ms", conn->peer,
                      dp->handshake_timeout_ms);
    }
    for (dp_pending_t **s = &dp->pending; *s;) {
        dp_pending_t *p = *s;
        if (p->deadline_ns > now) {
            s = &p->next;
            continue;
        }
        *s = p->next;
        char msg[200];
        int n = snprintf(msg, sizeof msg, "no producer registered channel %016" PRIx64 " at %s:%d within %d ms", p->id,
                         dp->host, dp->port, dp->request_timeout_ms);
        conn_send(p->conn, SL_FRAME_ERROR, p->id, 0, msg, (uint32_t)n, NULL, NULL);
        sl_free(p);
    }
}

/* ---- consumer side ----------------------------------------------------------- */

static void in_request(dp_chan_t *c) {
    /* the initial credit and the hook are set atomically (see sl_channel_set_hooks) */
    int free_bufs = sl_channel_set_hooks(c->ch, NULL, on_recycle_hook, c);
    c->requested = true;
    c->credit_batch = SL_MAX(1, c->ch->nbufs / 2);
    atomic_store(&c->outstanding, free_bufs);
    uint8_t size[4];
    sl_st32(size, c->ch->buf_size);
    conn_send(c->conn, SL_FRAME_REQUEST, c->id, (uint32_t)free_bufs, size, 4, NULL, NULL);
}

static bool conn_closed_id(const dp_conn_t *conn, uint64_t id) {
    for (size_t i = 0; i < conn->nclosed; i++)
        if (conn->closed[i] == id) return true;
    return false;
}

/* The input a BUFFER or PRIORITY frame is for; NULL when it is dropped
 * (released or failed here: late data) or when the connection failed for
 * it (conn->state is then C_CLOSING). */
static dp_chan_t *in_check(dp_conn_t *conn, const sl_frame_t *f) {
    dp_chan_t *c = tab_find(conn->dp->inputs, f->id);
    if (!c || c->conn != conn || !c->requested) {
        if (conn_closed_id(conn, f->id) || (c && c->failed)) return NULL;
        fail_conn(conn, true, "data connection %s closed: %s for channel %016" PRIx64 " that was not requested on it",
                  conn->peer, sl_frame_type_name(f->type), f->id);
        return NULL;
    }
    return c;
}

/* A BUFFER uses one credit and gets the free buffer that credit guarantees
 * (NULL when the owner cancelled ch, or when it had no credit: the
 * connection failed then). */
static sl_nbuf_t *in_take_buffer(dp_conn_t *conn, dp_chan_t *c, const sl_frame_t *f) {
    if (atomic_load(&c->outstanding) <= 0) {
        fail_conn(conn, true, "data connection %s closed: BUFFER without credit for channel %016" PRIx64, conn->peer,
                  f->id);
        return NULL;
    }
    if (atomic_fetch_sub(&c->outstanding, 1) - 1 < c->credit_batch) in_flush_credit(c); /* low: give what waits */
    c->backlog = f->value;
    return sl_channel_try_acquire(c->ch, f->len);
}

/* Gathers a received buffer; rx_flush hands the run to the channel. */
static void rx_add(dp_conn_t *conn, dp_chan_t *c, sl_nbuf_t *b) {
    if (conn->rx_c && conn->rx_c != c) rx_flush(conn);
    atomic_fetch_add(&conn->dp->buffers_received, 1);
    b->next = NULL;
    if (conn->rx_c)
        conn->rx_tail->next = b;
    else
        conn->rx_head = b;
    conn->rx_c = c;
    conn->rx_tail = b;
    conn->rx_n++;
}

static void on_data(dp_conn_t *conn, const sl_frame_t *f) {
    dp_chan_t *c = in_check(conn, f);
    if (!c) return;
    if (f->type == SL_FRAME_PRIORITY) {
        sl_channel_send_inband(c->ch, f->payload, f->len);
        return;
    }
    sl_nbuf_t *b = in_take_buffer(conn, c, f);
    if (!b) return;
    memcpy(b->data, f->payload, f->len);
    b->len = f->len;
    rx_add(conn, c, b);
}

static void handle_frame(dp_conn_t *conn, const sl_frame_t *f) {
    sl_data_plane_t *dp = conn->dp;
    if (conn->rx_c && (f->type != SL_FRAME_BUFFER || f->id != conn->rx_c->id)) rx_flush(conn);
    switch (f->type) {
    case SL_FRAME_PEER:
        if (!conn->outbound && !conn->key[0]) {
            /* the peer process: its address as we see it, the port it listens on */
            struct sockaddr_storage ss;
            int len = sizeof ss;
            if (uv_tcp_getpeername(&conn->tcp, (struct sockaddr *)&ss, &len) == 0)
                addr_text((struct sockaddr *)&ss, conn->key, sizeof conn->key, (int)f->value);
        }
        break;
    case SL_FRAME_REQUEST:
        on_request(conn, f);
        break;
    case SL_FRAME_CREDIT: {
        dp_chan_t *c = tab_find(dp->outputs, f->id);
        atomic_fetch_add(&dp->credits_received, f->value);
        if (c && c->conn == conn) {
            c->credit += f->value;
            out_pump(c);
        }
        break;
    }
    case SL_FRAME_BUFFER:
    case SL_FRAME_PRIORITY:
        on_data(conn, f);
        break;
    case SL_FRAME_ERROR: {
        dp_chan_t *c = tab_find(dp->inputs, f->id);
        if (c && c->conn == conn) {
            char msg[SL_FRAME_MAX_ERROR + 200];
            snprintf(msg, sizeof msg, "data channel %016" PRIx64 " %s: %.*s", f->id, conn->peer, (int)f->len,
                     (const char *)f->payload);
            fail_chan(c, msg);
        }
        break;
    }
    case SL_FRAME_CLOSE: { /* the consumer released it: a producer still writing fails */
        dp_chan_t *c = tab_find(dp->outputs, f->id);
        if (c && c->conn == conn) {
            c->conn = NULL;
            c->failed = true;
            sl_channel_cancel(c->ch);
        }
        for (dp_pending_t **s = &dp->pending; *s; s = &(*s)->next)
            if ((*s)->conn == conn && (*s)->id == f->id) {
                dp_pending_t *p = *s;
                *s = p->next;
                sl_free(p);
                break;
            }
        break;
    }
    }
}

/* ---- commands ------------------------------------------------------------------ */

static dp_conn_t *conn_for(sl_data_plane_t *dp, dp_chan_t *c) {
    for (dp_conn_t *conn = dp->conns; conn; conn = conn->next)
        if (conn->state != C_CLOSING && strcmp(conn->key, c->key) == 0) return conn;
    dp_conn_t *conn = conn_new(dp, true);
    snprintf(conn->key, sizeof conn->key, "%s", c->key);
    snprintf(conn->peer, sizeof conn->peer, "to %s", c->key);
    conn->state = C_CONNECTING;
    conn->creq.data = conn;
    int rc = uv_tcp_connect(&conn->creq, &conn->tcp, (const struct sockaddr *)&c->addr, connect_cb);
    if (rc < 0) {
        conn->state = C_CLOSING;
        conn_unlink(conn);
        uv_close((uv_handle_t *)&conn->tcp, conn_closed);
        return NULL;
    }
    return conn;
}

static void do_remove(sl_data_plane_t *dp, uint64_t id) {
    for (int t = 0; t < 2; t++) {
        dp_chan_t **tab = t ? dp->inputs : dp->outputs;
        dp_chan_t *c = tab_find(tab, id);
        if (!c) continue;
        sl_channel_set_hooks(c->ch, NULL, NULL, NULL); /* no hook runs after this */
        for (dp_conn_t *conn = dp->conns; conn; conn = conn->next) {
            if (conn->rx_c == c) rx_flush(conn);
            if (conn->dst_c == c) conn_drop_dst(conn);
        }
        c->removed = true;                            /* process_notify skips it now */
        process_notify(dp);                           /* and nobody lists it any more */
        if (c->is_input && c->conn && c->conn->state == C_READY && c->requested) {
            dp_conn_t *conn = c->conn;
            conn_send(conn, SL_FRAME_CLOSE, id, 0, NULL, 0, NULL, NULL);
            if (conn->nclosed == conn->capclosed)
                conn->closed = sl_realloc(conn->closed, (conn->capclosed = conn->capclosed ? 2 * conn->capclosed : 16) *
                                                            sizeof *conn->closed);
            conn->closed[conn->nclosed++] = id;
        }
        tab_remove(tab, c);
        c->conn = NULL;
        chan_release(c);
    }
}

static void do_stop(sl_data_plane_t *dp) {
    dp->stopping = true;
    for (dp_conn_t *conn = dp->conns; conn; conn = conn->next) {
        rx_flush(conn);
        conn_drop_dst(conn);
    }
    dp_chan_t *all = NULL;
    for (int t = 0; t < 2; t++)
        for (int i = 0; i < NBUCKETS; i++) {
            dp_chan_t **tab = t ? dp->inputs : dp->outputs;
            while (tab[i]) {
                dp_chan_t *c = tab[i];
                tab[i] = c->hnext;
                sl_channel_set_hooks(c->ch, NULL, NULL, NULL);
                sl_channel_cancel(c->ch);
                c->removed = true;
                c->hnext = all;
                all = c;
            }
        }
    process_notify(dp);
    while (all) {
        dp_chan_t *c = all;
        all = c->hnext;
        chan_release(c);
    }
    /* chans are freed after the connections closed (their writes are cancelled) */
    while (dp->conns) fail_conn(dp->conns, false, "data plane stopped");
    while (dp->pending) {
        dp_pending_t *p = dp->pending;
        dp->pending = p->next;
        sl_free(p);
    }
    uv_close((uv_handle_t *)&dp->listener, NULL);
    uv_close((uv_handle_t *)&dp->timer, NULL);
    uv_close((uv_handle_t *)&dp->prepare, NULL);
    uv_close((uv_handle_t *)&dp->check, NULL);
    uv_close((uv_handle_t *)&dp->async, NULL);
}

static void run_cmd(sl_data_plane_t *dp, dp_cmd_t *cmd) {
    dp_chan_t *c = cmd->c;
    switch (cmd->kind) {
    case CMD_ADD_OUTPUT:
        if (tab_find(dp->outputs, c->id)) {
            cmd->rc = SL_EINVAL;
            sl_free(c);
            break;
        }
        *tab_slot(dp->outputs, c->id) = c;
        sl_channel_set_hooks(c->ch, on_send_hook, NULL, c);
        for (dp_pending_t **s = &dp->pending; *s; s = &(*s)->next)
            if ((*s)->id == c->id) {
                dp_pending_t *p = *s;
                *s = p->next;
                out_bind(c, p->conn, p->credit);
                sl_free(p);
                break;
            }
        break;
    case CMD_ADD_INPUT:
        if (tab_find(dp->inputs, c->id)) {
            cmd->rc = SL_EINVAL;
            sl_free(c);
            break;
        }
        *tab_slot(dp->inputs, c->id) = c;
        c->conn = conn_for(dp, c);
        if (!c->conn) {
            char msg[200];
            snprintf(msg, sizeof msg, "data connection to %s failed: cannot connect", c->key);
            fail_chan(c, msg);
        } else if (c->conn->state == C_READY) {
            in_request(c);
        }
        break;
    case CMD_REMOVE:
        do_remove(dp, cmd->id);
        break;
    case CMD_STOP:
        do_stop(dp);
        break;
    }
}

static void async_cb(uv_async_t *a) {
    sl_data_plane_t *dp = a->data;
    process_notify(dp);
    pthread_mutex_lock(&dp->mu);
    dp_cmd_t *cmds = dp->cmd_head;
    dp->cmd_head = dp->cmd_tail = NULL;
    pthread_mutex_unlock(&dp->mu);
    while (cmds) {
        dp_cmd_t *cmd = cmds;
        cmds = cmd->next;
        bool stop = cmd->kind == CMD_STOP;
        run_cmd(dp, cmd);
        if (stop) {
            sl_free(cmd);
            continue;
        }
        pthread_mutex_lock(&dp->mu);
        cmd->done = true;
        pthread_cond_broadcast(&dp->cv);
        pthread_mutex_unlock(&dp->mu);
    }
}

static _Thread_local sl_data_plane_t *tls_loop_of; /* the data plane whose loop runs on this thread */

/* Any thread: runs cmd on the loop thread and waits for it (directly when
 * called on the loop thread, e.g. from on_channel_failed). */
static int post(sl_data_plane_t *dp, int kind, dp_chan_t *c, uint64_t id) {
    dp_cmd_t cmd = {.kind = kind, .c = c, .id = id};
    if (tls_loop_of == dp) {
        run_cmd(dp, &cmd);
        return cmd.rc;
    }
    pthread_mutex_lock(&dp->mu);
    if (dp->cmd_tail)
        dp->cmd_tail->next = &cmd;
    else
        dp->cmd_head = &cmd;
    dp->cmd_tail = &cmd;
    uv_async_send(&dp->async);
    while (!cmd.done) pthread_cond_wait(&dp->cv, &dp->mu);
    pthread_mutex_unlock(&dp->mu);
    return cmd.rc;
}

/* ---- lifecycle --------------------------------------------------------------- */

static void *loop_main(void *arg) {
    sl_data_plane_t *dp = arg;
    tls_loop_of = dp;
    uv_run(&dp->loop, UV_RUN_DEFAULT);
    return NULL;
}

int sl_data_plane_new(const sl_data_plane_config_t *cfg, sl_data_plane_t **out, char *err, size_t errlen) {
    *out = NULL;
    sl_data_plane_t *dp = sl_calloc(1, sizeof *dp);
    snprintf(dp->host, sizeof dp->host, "%s", cfg->host ? cfg->host : "127.0.0.1");
    dp->secret = sl_strdup(cfg->secret ? cfg->secret : "");
    dp->tls = sl_tls_ctx_retain(cfg->tls);
    dp->request_timeout_ms = cfg->request_timeout_ms > 0 ? cfg->request_timeout_ms : 30000;
    dp->handshake_timeout_ms = cfg->handshake_timeout_ms > 0 ? cfg->handshake_timeout_ms : 10000;
    dp->on_failed = cfg->on_channel_failed;
    dp->ctx = cfg->ctx;
    pthread_mutex_init(&dp->mu, NULL);
    pthread_cond_init(&dp->cv, NULL);
    uv_loop_init(&dp->loop);
    uv_tcp_init(&dp->loop, &dp->listener);
    dp->listener.data = dp;
    struct sockaddr_storage ss;
    int rc = uv_ip4_addr(dp->host, cfg->port, (struct sockaddr_in *)&ss);
    if (rc < 0) rc = uv_ip6_addr(dp->host, cfg->port, (struct sockaddr_in6 *)&ss);
    if (rc == 0) rc = uv_tcp_bind(&dp->listener, (const struct sockaddr *)&ss, 0);
    if (rc == 0) rc = uv_listen((uv_stream_t *)&dp->listener, 128, on_connection);
    if (rc < 0) {
        sl_errf(err, errlen, SL_EIO, "data plane: cannot listen on %s:%d: %s", dp->host, cfg->port, uv_strerror(rc));
        uv_close((uv_handle_t *)&dp->listener, NULL);
        uv_run(&dp->loop, UV_RUN_DEFAULT);
        uv_loop_close(&dp->loop);
        pthread_mutex_destroy(&dp->mu);
        pthread_cond_destroy(&dp->cv);
        sl_tls_ctx_release(dp->tls);
        sl_free(dp->secret);
        sl_free(dp);
        return SL_EIO;
    }
    int len = sizeof ss;
    uv_tcp_getsockname(&dp->listener, (struct sockaddr *)&ss, &len);
    dp->port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                        : ntohs(((struct sockaddr_in *)&ss)->sin_port);
    uv_async_init(&dp->loop, &dp->async, async_cb);
    dp->async.data = dp;
    uv_timer_init(&dp->loop, &dp->timer);
    dp->timer.data = dp;
    uv_timer_start(&dp->timer, on_timer, 100, 100);
    uv_prepare_init(&dp->loop, &dp->prepare);
    dp->prepare.data = dp;
    uv_prepare_start(&dp->prepare, on_prepare);
    uv_check_init(&dp->loop, &dp->check);
    dp->check.data = dp;
    uv_check_start(&dp->check, on_check);
    pthread_create(&dp->thread, NULL, loop_main, dp);
    *out = dp;
    return 0;
}

void sl_data_plane_destroy(sl_data_plane_t *dp) {
    if (!dp) return;
    dp_cmd_t *cmd = sl_calloc(1, sizeof *cmd);
    cmd->kind = CMD_STOP;
    pthread_mutex_lock(&dp->mu);
    if (dp->cmd_tail)
        dp->cmd_tail->next = cmd;
    else
        dp->cmd_head = cmd;
    dp->cmd_tail = cmd;
    uv_async_send(&dp->async);
    pthread_mutex_unlock(&dp->mu);
    pthread_join(dp->thread, NULL);
    uv_loop_close(&dp->loop);
    pthread_mutex_destroy(&dp->mu);
    pthread_cond_destroy(&dp->cv);
    sl_tls_ctx_release(dp->tls);
    sl_free(dp->secret);
    sl_free(dp);
}

int sl_data_plane_port(const sl_data_plane_t *dp) { return dp->port; }

static dp_chan_t *chan_new(sl_data_plane_t *dp, uint64_t id, sl_channel_t *ch, bool is_input) {
    dp_chan_t *c = sl_calloc(1, sizeof *c);
    c->dp = dp;
    c->id = id;
    c->ch = ch;
    c->is_input = is_input;
    atomic_init(&c->new_credit, 0);
    atomic_init(&c->notified, false);
    return c;
}

int sl_data_plane_add_output(sl_data_plane_t *dp, uint64_t id, sl_channel_t *ch) {
    return post(dp, CMD_ADD_OUTPUT, chan_new(dp, id, ch, false), id);
}

int sl_data_plane_add_input(sl_data_plane_t *dp, uint64_t id, const char *peer_host, int peer_port,
                            sl_channel_t *ch, char *err, size_t errlen) {
    dp_chan_t *c = chan_new(dp, id, ch, true);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    char port[16];
    snprintf(port, sizeof port, "%d", peer_port);
    int rc = getaddrinfo(peer_host, port, &hints, &res);
    if (rc != 0 || !res) {
        sl_free(c);
        return sl_errf(err, errlen, SL_EINVAL, "data plane: cannot resolve %s: %s", peer_host, gai_strerror(rc));
    }
    memcpy(&c->addr, res->ai_addr, res->ai_addrlen);
    freeaddrinfo(res);
    snprintf(c->key, sizeof c->key, "%s:%d", peer_host, peer_port);
    rc = post(dp, CMD_ADD_INPUT, c, id);
    if (rc < 0) sl_errf(err, errlen, rc, "data plane: channel %016" PRIx64 " is already an input", id);
    return rc;
}

void sl_data_plane_remove(sl_data_plane_t *dp, uint64_t id) { post(dp, CMD_REMOVE, NULL, id); }

void sl_data_plane_stats(sl_data_plane_t *dp, sl_data_plane_stats_t *st) {
    st->connections = atomic_load_explicit(&dp->nconns, memory_order_relaxed);
    st->buffers_sent = atomic_load_explicit(&dp->buffers_sent, memory_order_relaxed);
    st->buffers_received = atomic_load_explicit(&dp->buffers_received, memory_order_relaxed);
    st->priority_sent = atomic_load_explicit(&dp->priority_sent, memory_order_relaxed);
    st->credits_received = atomic_load_explicit(&dp->credits_received, memory_order_relaxed);
    st->bad_connections = atomic_load_explicit(&dp->bad_connections, memory_order_relaxed);
}
