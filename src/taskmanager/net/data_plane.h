/*
 * data_plane.h — remote channels: a TaskManager process sends the buffers of
 * a channel to another TaskManager process over TCP, with Flink's
 * credit-based flow control (RemoteInputChannel / CreditBasedPartitionRequest-
 * ClientHandler / PartitionRequestQueue, in about one file).
 *
 * Both tasks keep using an ordinary local sl_channel_t:
 *   - producer process: the task's record writer fills `ch`, the data plane
 *     is its consumer.  It takes a full buffer out of `ch` only against a
 *     credit of the remote consumer, writes it to the socket (announcing the
 *     backlog still queued), and recycles it into `ch` once written, so the
 *     producer's own bounded buffers stay the limit on the sending side.  A
 *     priority event (sl_channel_send_priority: unaligned barriers) leaves
 *     ahead of queued buffers and without credit; queued data buffers stay
 *     in `ch` until credit comes, where the unaligned checkpoint's capture
 *     sees them.
 *   - consumer process: the data plane is the producer of `ch`.  It asks the
 *     producer process for the channel with an initial credit = the free
 *     buffers of `ch`, and gives one more credit for each buffer the
 *     consumer task recycles.  Every received buffer therefore has a free
 *     buffer waiting (a BUFFER beyond the credit is a protocol violation and
 *     fails the connection), and a BUFFER's payload is read from the socket
 *     straight into that buffer.  Priority events are queued in order.
 *
 * Wake-ups are the cost of this path, so everything is batched per turn of
 * the loop: the frames of every channel of a connection leave in one writev
 * (their buffers go back to `ch` together, one wake-up of the producer),
 * the buffers received for a channel enter `ch` together (one wake-up of
 * the consumer), the producer task wakes the loop only when the channel
 * has credit (or a priority event), and recycled buffers are announced in
 * CREDIT frames of half the channel's buffers, or at once when the
 * producer holds less credit than that (so a consumer never starves while
 * credit exists; with 1-3 buffers every recycle is announced).
 *
 * One libuv loop thread per process, one listening socket, and one TCP
 * connection per pair of processes carrying every channel between them, in
 * both directions: a consumer reuses any live connection to or from the
 * producer process (an accepted connection is known by the peer's address and
 * the listen port it announces).  Two processes that connect to each other at
 * the same moment keep both connections (no tie-break is needed: a channel
 * lives on the connection its request came on, so both work; the next
 * channel between them reuses one of them).
 *
 * Every connection starts with the shared-secret handshake of common/auth.h
 * (kind SL_AUTH_DATA), inside TLS with mutual authentication when cfg.tls is
 * set (common/tls.h: the TLS handshake first); a failure is logged to stderr with the peer's address
 * and the connection is closed without reading anything else.  When a
 * connection fails (reset, EOF, bad frame, handshake), each channel on it is
 * cancelled (sl_channel_cancel, the consumer's waker signalled) and
 * on_channel_failed is called with a message naming the peer.
 *
 * Threads.  Every function below may be called from any thread, including
 * from on_channel_failed (which runs on the loop thread).  add/remove are
 * synchronous: they return once the loop thread has done them.  The loop
 * thread owns all connection and channel state; `mu` guards only the command
 * queue and the list of channels with news from task threads (the channel
 * hooks of channel.h run under the channel's lock and take `mu` briefly: the
 * lock order is channel mu -> data plane mu, and the loop never holds `mu`
 * while it touches a channel).
 */
#ifndef SL_NET_DATA_PLANE_H
#define SL_NET_DATA_PLANE_H

#include <stddef.h>
#include <stdint.h>

#include "taskmanager/channel.h"

typedef struct sl_data_plane sl_data_plane_t;

/* Called on the loop thread when channel `id` failed; `message` names the
 * peer and the cause ("data connection to 127.0.0.1:41234 lost: connection
 * reset by peer").  The channel is already cancelled; the owner still calls
 * sl_data_plane_remove.  Must not block. */
typedef void (*sl_data_plane_failed_fn)(void *ctx, uint64_t id, const char *message);

typedef struct sl_data_plane_config {
    const char *host;       /* bind address, NULL = "127.0.0.1" */
    int port;               /* 0 = an ephemeral port (sl_data_plane_port) */
    const char *secret;     /* cluster secret, NULL = "" */
    int request_timeout_ms; /* how long a request waits for its output to be registered, 0 = 30 s */
    int handshake_timeout_ms; /* a connection that has not authenticated by then is closed, 0 = 10 s */
    sl_data_plane_failed_fn on_channel_failed; /* may be NULL */
    void *ctx;
    /* TLS with mutual authentication before the handshake, every byte after
     * it inside TLS (common/tls.h); NULL = plain TCP.  The data plane takes
     * its own reference. */
    struct sl_tls_ctx *tls;
} sl_data_plane_config_t;

/* Binds the listening socket and starts the loop thread.  0, or a negative
 * code with a message in err (address in use, bad host).  Create it after
 * any fork(): a child must not inherit the running loop. */
int sl_data_plane_new(const sl_data_plane_config_t *cfg, sl_data_plane_t **out, char *err, size_t errlen);
/* Stops the loop, closes every connection and joins the thread.  Channels
 * still registered are cancelled (no callback).  Does not destroy channels.
 * Not from on_channel_failed. */
void sl_data_plane_destroy(sl_data_plane_t *dp);
/* The port it listens on. */
int sl_data_plane_port(const sl_data_plane_t *dp);

/* Producer side: serves channel `id` from `ch` (not owned; the caller keeps
 * it alive until sl_data_plane_remove returns).  A producer that finished
 * waits until sl_channel_in_flight(ch) == 0 (every buffer written to the
 * socket) before it removes the output.  SL_EINVAL when `id` is already an
 * output. */
int sl_data_plane_add_output(sl_data_plane_t *dp, uint64_t id, sl_channel_t *ch);
/* Consumer side: requests channel `id` from the process listening at
 * peer_host:peer_port and fills `ch` (not owned, kept alive by the caller
 * until sl_data_plane_remove returns; its consumer waker is signalled once
 * per loop turn that brought buffers for it).  Errors later (connection, the producer's answer) come through
 * on_channel_failed.  SL_EINVAL when `id` is already an input or the host
 * does not resolve (message in err). */
int sl_data_plane_add_input(sl_data_plane_t *dp, uint64_t id, const char *peer_host, int peer_port,
                            sl_channel_t *ch, char *err, size_t errlen);
/* Unregisters channel `id` (output or input, or both when one process is
 * both ends).  An input tells the producer it is released (a producer still
 * writing into that output gets its channel cancelled).  An output's unsent
 * buffers are dropped and its consumer is not told (whoever cancels the
 * producer cancels the consumer too).  Buffers being written are freed by
 * the data plane, so `ch` may be destroyed as soon as this returns.  No-op
 * for an unknown id. */
void sl_data_plane_remove(sl_data_plane_t *dp, uint64_t id);

typedef struct sl_data_plane_stats {
    int connections;           /* live (authenticated or connecting) connections */
    long long buffers_sent, buffers_received, priority_sent, credits_received;
    long long bad_connections; /* closed for a handshake failure or a protocol violation */
} sl_data_plane_stats_t;
/* A snapshot of the counters (relaxed atomics), any thread. */
void sl_data_plane_stats(sl_data_plane_t *dp, sl_data_plane_stats_t *st);

#endif
