/*
 * tls.h — TLS with mutual authentication for the cluster's internal
 * connections (control RPC, artifact downloads, data plane), on OpenSSL,
 * independent of any transport.
 *
 * Two objects:
 *   - sl_tls_ctx_t: built once per process from the security.ssl.internal.*
 *     keys (sl_tls_config_t): this node's key and certificate (the keystore),
 *     the certificates it trusts (the truststore), the protocol versions and
 *     cipher list.  Reference-counted; immutable once built, so any number
 *     of threads may create sessions from it at the same time.
 *   - sl_tls_t: one per connection, on memory BIOs.  OpenSSL never touches
 *     a socket: the transport (libuv) reads ciphertext from the socket and
 *     feeds it in, and takes the ciphertext the session produced and writes
 *     it to the socket.  A session belongs to one thread at a time (the
 *     thread that owns its connection's socket).
 *
 * Authentication is always mutual, as Flink's internal SSL: both sides
 * present their keystore's certificate and each verifies the peer's chain
 * against its truststore (any certificate in the truststore is a trust
 * anchor, as in Java).  Host names are not checked: the truststore is the
 * cluster's membership list (Flink recommends a dedicated CA or one
 * self-signed certificate per cluster).  Session tickets and renegotiation
 * are off.
 *
 * Driving a session (the same for a client and a server):
 *
 *   t = sl_tls_new(ctx, is_server);
 *   on every chunk received from the socket:
 *       if (sl_tls_feed(t, bytes, n) < 0) -> fail with sl_tls_error(t)
 *       if handshake not done:
 *           r = sl_tls_handshake(t);    (a client calls it once before any
 *                                        input too: that makes its hello)
 *           send what sl_tls_pending/sl_tls_take give;
 *           r < 0 -> fail; r == 0 -> wait for more input; r == 1 -> done
 *       then, once done: while ((k = sl_tls_read(t, buf, cap)) > 0) use buf[0..k);
 *                        k < 0 -> fail (peer closed the session or an alert)
 *   to send plaintext (once the handshake is done):
 *       sl_tls_write(t, bytes, n); then send what sl_tls_take gives.
 *   after every call: if sl_tls_pending(t) > 0, take it and write it to the
 *   socket, in the order the calls were made (a read can produce output,
 *   e.g. an alert).
 *   to close: sl_tls_close_notify(t), send what it produced, then FIN.
 *
 * Errors say what went wrong in words a user can act on ("peer is not
 * speaking TLS (...)", "peer certificate not trusted: ...", "the peer
 * refused our certificate (...)", "TLS protocol version mismatch (...)",
 * "no cipher suite in common ...").
 */
#ifndef SL_COMMON_TLS_H
#define SL_COMMON_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

typedef struct sl_tls_ctx sl_tls_ctx_t;
typedef struct sl_tls sl_tls_t;

/* What a context is built from; every string is copied or read during
 * sl_tls_ctx_new, NULL means not set. */
typedef struct sl_tls_config {
    const char *keystore;            /* PKCS#12 file, or PEM with the key and certificate(s) */
    const char *keystore_password;   /* PKCS#12 integrity/encryption password */
    const char *key_password;        /* the private key's password (PEM: its passphrase); NULL = keystore's */
    const char *truststore;          /* PKCS#12 file or a PEM bundle of trusted certificates */
    const char *truststore_password;
    const char *protocol;            /* "TLSv1.2", "TLSv1.3" or "TLSv1.2,TLSv1.3"; NULL = "TLSv1.2" */
    const char *algorithms;          /* OpenSSL cipher names, ',' or ':' separated; NULL = OpenSSL's defaults */
    int handshake_timeout_ms;        /* for the transports; 0 = 10000 */
} sl_tls_config_t;

/* Builds a context: loads and checks the keystore (readable, right
 * passwords, the key matches its certificate) and the truststore, applies
 * the protocol and cipher settings.  0 and *out (one reference), or
 * SL_EINVAL / SL_EIO with a message naming the key (security.ssl.internal.*)
 * and the file.  Any thread. */
int sl_tls_ctx_new(const sl_tls_config_t *cfg, sl_tls_ctx_t **out, char *err, size_t errlen);
/* Another reference; NULL is ignored.  Any thread. */
sl_tls_ctx_t *sl_tls_ctx_retain(sl_tls_ctx_t *ctx);
/* Drops a reference; the last one frees the context.  NULL is ignored.
 * Any thread (sessions hold their own reference). */
void sl_tls_ctx_release(sl_tls_ctx_t *ctx);
/* The configured handshake timeout (ms). */
int sl_tls_ctx_handshake_timeout_ms(const sl_tls_ctx_t *ctx);
/* A one-line description of this node's certificate ("CN=tm-1 (issuer CN=ca)"). */
const char *sl_tls_ctx_subject(const sl_tls_ctx_t *ctx);

/* A new session: a server waits for a ClientHello, a client makes one on
 * its first sl_tls_handshake.  Holds a reference to ctx.  Never NULL
 * (aborts when out of memory, as sl_malloc). */
sl_tls_t *sl_tls_new(sl_tls_ctx_t *ctx, bool server);
/* Frees a session (no close_notify: call sl_tls_close_notify first for a
 * clean close).  NULL is ignored. */
void sl_tls_free(sl_tls_t *t);

/* Feeds n bytes received from the socket (all of them are kept).  0, or
 * SL_EIO when the session failed before (or the first bytes of the stream
 * are not a TLS record: "peer is not speaking TLS"; then a TLS alert is
 * waiting in the outgoing ciphertext, so the plain peer learns it reached
 * a TLS endpoint). */
int sl_tls_feed(sl_tls_t *t, const uint8_t *p, size_t n);
/* Advances the handshake with the input fed so far: 1 done (also on later
 * calls), 0 more input needed, SL_EIO failed (sl_tls_error says why). */
int sl_tls_handshake(sl_tls_t *t);
/* True once the handshake completed. */
bool sl_tls_done(const sl_tls_t *t);
/* Reads up to cap bytes of plaintext: the count (> 0), 0 when nothing is
 * available until more input is fed, SL_EIO on a failure or when the peer
 * closed the session (sl_tls_error).  After the handshake only. */
ssize_t sl_tls_read(sl_tls_t *t, uint8_t *buf, size_t cap);
/* Encrypts all n bytes into the outgoing ciphertext.  0 or SL_EIO.  After
 * the handshake only. */
int sl_tls_write(sl_tls_t *t, const uint8_t *p, size_t n);
/* Bytes of ciphertext waiting to be sent. */
size_t sl_tls_pending(const sl_tls_t *t);
/* Moves up to cap bytes of waiting ciphertext to out; the count. */
size_t sl_tls_take(sl_tls_t *t, uint8_t *out, size_t cap);
/* Queues a close_notify alert (then send what sl_tls_take gives). */
void sl_tls_close_notify(sl_tls_t *t);
/* True when the session ended because the peer sent close_notify (a clean
 * close, the TLS form of EOF), not because of an error. */
bool sl_tls_closed(const sl_tls_t *t);
/* Why the session failed ("" while it has not). */
const char *sl_tls_error(const sl_tls_t *t);
/* The peer certificate's subject ("CN=tm-1,O=..."), "" before the handshake. */
const char *sl_tls_peer(const sl_tls_t *t);

#endif
