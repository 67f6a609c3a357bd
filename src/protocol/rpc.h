/*
 * rpc.h — the control-plane transport of a cluster: opaque frames between
 * the JobManager and its TaskManagers over TCP (libuv), after the
 * shared-secret handshake of common/auth.h (kind SL_AUTH_CONTROL, or SL_AUTH_ARTIFACT for
 * artifact downloads, protocol/artifact.h),
 * optionally inside TLS with mutual authentication (common/tls.h, cfg.tls).
 *
 * One sl_rpc_t per process runs a libuv loop on its own thread (the "loop
 * thread").  It can listen (one server socket) and connect (any number of
 * client connections); each connection is an sl_rpc_conn_t.
 *
 * Wire format, after the handshake (hello, proof; see auth.h):
 *   u32 little-endian length, then that many bytes (one opaque message).
 * A frame longer than the configured maximum closes the connection (a log
 * line names the peer and the length).  The bytes are what the caller of
 * sl_rpc_send passed; messages.h's codec gives them their meaning.
 *
 * Threads and locks:
 *   - Every callback (on_open, on_message, on_closed, timer functions) runs
 *     on the loop thread, one at a time.  Callbacks may call any function
 *     here except sl_rpc_destroy.
 *   - sl_rpc_send, sl_rpc_close, sl_rpc_conn_retain/release/peer,
 *     sl_rpc_connect, sl_rpc_listen, sl_rpc_listen_port, sl_rpc_every and
 *     sl_rpc_cancel_timer may be called from any thread.
 *   - sl_rpc_new / sl_rpc_destroy from a thread that is not the loop thread.
 *   - Each connection has a mutex that guards its queue of frames not yet
 *     handed to the socket and its closed flag; the rpc has a mutex that
 *     guards its command queue (work posted to the loop thread by other
 *     threads) and its stopping flag.  Lock order: connection, then rpc.
 *     Everything else (sockets, handshake state, read buffers, the list of
 *     connections and timers) belongs to the loop thread alone.
 *
 * Lifetime of a connection: the handle stays valid until every reference
 * is released.  The application owns one reference to each connection it
 * is given: the one sl_rpc_connect returns, and the one on_open hands over
 * for an accepted connection.  on_closed is called exactly once per
 * connection the application owns (never for an accepted connection that
 * failed its handshake: the application never hears of those), and after
 * it no other callback comes for that connection; the application then
 * calls sl_rpc_conn_release (in on_closed or later, from any thread).
 * A handle may outlive its sl_rpc_t: after sl_rpc_destroy, sends fail and
 * release still frees it.
 */
#ifndef SL_PROTOCOL_RPC_H
#define SL_PROTOCOL_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_RPC_DEFAULT_MAX_FRAME (64u << 20)
#define SL_RPC_DEFAULT_CONNECT_TIMEOUT_MS 10000

typedef struct sl_rpc sl_rpc_t;
typedef struct sl_rpc_conn sl_rpc_conn_t;
typedef struct sl_rpc_timer sl_rpc_timer_t;

typedef struct sl_rpc_config {
    const char *secret;       /* the cluster's shared secret; NULL or "" proves nothing (copied) */
    size_t max_frame;         /* largest frame accepted or sent; 0 = SL_RPC_DEFAULT_MAX_FRAME */
    int connect_timeout_ms;   /* resolve + connect + handshake; 0 = default (10 s) */
    const char *name;         /* for log lines ("jobmanager", "tm-2"); NULL = "rpc" (copied) */
    /* TLS with mutual authentication (common/tls.h) before the handshake,
     * and every byte after it inside TLS; NULL = plain TCP.  The rpc takes
     * its own reference.  The handshake timeout of the context bounds the
     * TLS and shared-secret handshakes. */
    struct sl_tls_ctx *tls;
} sl_rpc_config_t;

/* Callbacks of a listener or a client connection; all run on the loop
 * thread.  `ctx` is passed back as it is. */
typedef struct sl_rpc_callbacks {
    /* The handshake succeeded: frames can flow.  For an accepted
     * connection, `conn` carries a reference the application now owns. */
    void (*on_open)(void *ctx, sl_rpc_conn_t *conn);
    /* One whole frame; `bytes` (never NULL, even when len is 0) is valid
     * only during the call. */
    void (*on_message)(void *ctx, sl_rpc_conn_t *conn, const uint8_t *bytes, size_t len);
    /* The connection is closed (or could not be opened); `why` says why:
     * "peer closed the connection", "connection reset by peer",
     * "connect to 127.0.0.1:6123: connection refused", "... timed out",
     * "handshake failed: ..." (under TLS "handshake failed: TLS: peer
     * certificate not trusted: ...", "... the peer refused our certificate
     * (...)", "... peer is not speaking TLS (...)", "... peer speaks TLS, but
     * TLS is off here (...)"), "closed locally: <why>", "frame of N bytes
     * exceeds the maximum of M", "rpc shut down".  Called exactly once;
     * `why` is valid only during the call. */
    void (*on_closed)(void *ctx, sl_rpc_conn_t *conn, const char *why);
    void *ctx;
    /* The connection's kind in the handshake (auth.h): 0 or SL_AUTH_CONTROL
     * for control messages.  A client may open an SL_AUTH_ARTIFACT
     * connection (artifact download); a listener with artifact set also
     * accepts those (sl_rpc_conn_kind tells them apart). */
    int kind;
    bool artifact;
} sl_rpc_callbacks_t;

/* The kind the peer opened the connection with (SL_AUTH_CONTROL or
 * SL_AUTH_ARTIFACT); 0 before the handshake.  Any thread once on_open ran. */
int sl_rpc_conn_kind(const sl_rpc_conn_t *conn);

/* Starts an rpc (its loop thread).  0, or SL_EINVAL / SL_EIO with a message
 * in err.  Copies what it needs from cfg.  Any thread but a loop thread. */
int sl_rpc_new(const sl_rpc_config_t *cfg, sl_rpc_t **out, char *err, size_t errlen);

/* Closes every connection (on_closed "rpc shut down" for those the
 * application owns, on the loop thread, before this returns), drops frames
 * still queued, cancels every timer, stops and joins the loop thread, frees
 * the rpc.  Connection handles stay valid until released.  Not from the
 * loop thread (a callback). */
void sl_rpc_destroy(sl_rpc_t *rpc);

/* Listens on host:port (port 0 = an ephemeral port, see
 * sl_rpc_listen_port); accepted connections that pass the handshake get
 * `cbs`.  One listener per rpc.  Waits for the loop thread to bind: 0, or
 * SL_EINVAL / SL_EIO with a message ("listen on 0.0.0.0:6123: address
 * already in use").  Any thread. */
int sl_rpc_listen(sl_rpc_t *rpc, const char *host, int port, const sl_rpc_callbacks_t *cbs, char *err,
                  size_t errlen);

/* The port the listener is bound to, or -1 before a successful listen.
 * Any thread. */
int sl_rpc_listen_port(sl_rpc_t *rpc);

/* Connects to host:port asynchronously: returns at once with *conn set (a
 * reference the caller owns); cbs.on_open follows when the handshake
 * succeeded, cbs.on_closed when anything failed.  Frames sent before
 * on_open are queued and go out after the handshake.  0, or SL_EINVAL
 * (rpc shutting down, bad arguments).  Any thread. */
int sl_rpc_connect(sl_rpc_t *rpc, const char *host, int port, const sl_rpc_callbacks_t *cbs,
                   sl_rpc_conn_t **conn);

/* Queues one frame of len bytes (copied) for conn; never waits for the
 * network.  Frames of one connection reach the peer in the order their
 * sl_rpc_send calls returned.  0, SL_EIO when the connection is closed,
 * SL_EINVAL when len exceeds the maximum frame.  Any thread. */
int sl_rpc_send(sl_rpc_conn_t *conn, const void *bytes, size_t len);

/* Closes conn: on an open connection, frames queued before the call are
 * still written (bounded by the connect timeout) before the FIN; on one
 * still connecting or in its handshake they are dropped.  Later sends
 * fail; on_closed("closed locally: why") follows on the loop thread unless
 * the connection was already closed.  Does not release the caller's
 * reference.  Any thread. */
void sl_rpc_close(sl_rpc_conn_t *conn, const char *why);

/* Another reference to conn (for a thread that keeps the handle). */
void sl_rpc_conn_retain(sl_rpc_conn_t *conn);
/* Drops one reference; the last one frees the handle.  Any thread. */
void sl_rpc_conn_release(sl_rpc_conn_t *conn);

/* "host:port" of the peer (as connected to, or as accepted from); valid
 * while the caller holds a reference.  Any thread. */
const char *sl_rpc_conn_peer(const sl_rpc_conn_t *conn);

/* Runs fn(ctx) on the loop thread every interval_ms (first after one
 * interval) until cancelled.  NULL when the rpc is shutting down or
 * interval_ms < 1.  Any thread. */
sl_rpc_timer_t *sl_rpc_every(sl_rpc_t *rpc, int interval_ms, void (*fn)(void *ctx), void *ctx);

/* Stops a timer; the handle is invalid afterwards.  Called on the loop
 * thread (from a callback, fn itself included) fn never runs again; called
 * from another thread, fn does not start again after this returns, but a
 * call already running on the loop thread may still be finishing.  Timers
 * not cancelled die with sl_rpc_destroy (then do not cancel them). */
void sl_rpc_cancel_timer(sl_rpc_timer_t *t);

#endif
