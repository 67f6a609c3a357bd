/*
 * tls.c — the TLS contexts and memory-BIO sessions of tls.h (OpenSSL).
 *
 * Loading: a keystore or truststore file is read whole; a file containing
 * "-----BEGIN" is PEM, anything else is tried as PKCS#12 (DER).  Every
 * failure names the configuration key and the path.
 *
 * Errors: OpenSSL's error queue is per thread; every call here that can
 * fail clears it first and turns what it finds into the session's message
 * (describe_failure), so a session never reports another's error.
 */
#include "common/tls.h"

#include <errno.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "common/common.h"

#define DEFAULT_HANDSHAKE_TIMEOUT_MS 10000

struct sl_tls_ctx {
    SSL_CTX *ssl;
    atomic_int refs;
    int handshake_timeout_ms;
    char subject[256];
};

struct sl_tls {
    sl_tls_ctx_t *ctx;
    SSL *ssl;
    BIO *rbio, *wbio; /* owned by ssl */
    bool server, done, failed, closed;
    size_t seen;      /* bytes fed so far (the first two are checked) */
    uint8_t first[2];
    char peer[256];
    char err[320];
};

/* ---- loading keystores and truststores -------------------------------------------- */

/* The file's bytes (NUL-terminated), or NULL with a message. */
static uint8_t *read_file(const char *key, const char *path, size_t *len, char *err, size_t errlen) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        sl_errf(err, errlen, SL_EIO, "%s: cannot open %s: %s", key, path, strerror(errno));
        return NULL;
    }
    sl_buf_t b = {0};
    uint8_t chunk[16384];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) sl_buf_append(&b, chunk, n);
    bool bad = ferror(f);
    fclose(f);
    if (bad) {
        sl_buf_free(&b);
        sl_errf(err, errlen, SL_EIO, "%s: cannot read %s", key, path);
        return NULL;
    }
    sl_buf_append(&b, "", 1);
    *len = b.len - 1;
    return b.p;
}

static bool is_pem(const uint8_t *p, size_t n) {
    static const char tag[] = "-----BEGIN";
    for (size_t i = 0; i + sizeof tag - 1 <= n; i++)
        if (memcmp(p + i, tag, sizeof tag - 1) == 0) return true;
    return false;
}

static int pem_password(char *buf, int size, int rwflag, void *u) {
    (void)rwflag;
    const char *pw = u ? u : "";
    int n = (int)strlen(pw);
    if (n > size) n = size;
    memcpy(buf, pw, (size_t)n);
    return n;
}

/* Checks a PKCS#12 file's integrity password; "" and NULL both mean "none"
 * (tools differ in which they use). */
static bool p12_mac_ok(PKCS12 *p12, const char *pw) {
    if (!PKCS12_mac_present(p12)) return true;
    if (pw && *pw) return PKCS12_verify_mac(p12, pw, -1) == 1;
    return PKCS12_verify_mac(p12, "", 0) == 1 || PKCS12_verify_mac(p12, NULL, 0) == 1;
}

static PKCS12 *p12_read(const uint8_t *data, size_t n) {
    BIO *bio = BIO_new_mem_buf(data, (int)n);
    PKCS12 *p12 = bio ? d2i_PKCS12_bio(bio, NULL) : NULL;
    BIO_free(bio);
    return p12;
}

/* Loads the keystore into ctx: key, certificate, chain. */
static int load_keystore(SSL_CTX *ctx, const sl_tls_config_t *cfg, char *subject, size_t subjcap, char *err,
                         size_t errlen) {
    const char *path = cfg->keystore;
    if (!path || !*path)
        return sl_errf(err, errlen, SL_EINVAL,
                       "security.ssl.internal.keystore is not set (security.ssl.internal.enabled is true)");
    size_t n = 0;
    uint8_t *data = read_file("security.ssl.internal.keystore", path, &n, err, errlen);
    if (!data) return SL_EIO;
    const char *kspw = cfg->keystore_password;
    const char *keypw = cfg->key_password && *cfg->key_password ? cfg->key_password : kspw;
    EVP_PKEY *pkey = NULL;
    X509 *cert = NULL;
    STACK_OF(X509) *chain = NULL;
    int rc = 0;
    if (is_pem(data, n)) {
        BIO *bio = BIO_new_mem_buf(data, (int)n);
        pkey = PEM_read_bio_PrivateKey(bio, NULL, pem_password, (void *)(keypw ? keypw : ""));
        BIO_free(bio);
        bio = BIO_new_mem_buf(data, (int)n);
        chain = sk_X509_new_null();
        X509 *x;
        while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
            if (!cert) cert = x;
            else sk_X509_push(chain, x);
        }
        BIO_free(bio);
        if (!pkey) {
            bool encrypted = strstr((const char *)data, "ENCRYPTED") != NULL;
            rc = encrypted ? sl_errf(err, errlen, SL_EINVAL,
                                     "security.ssl.internal.key-password: wrong password for the private key in %s",
                                     path)
                           : sl_errf(err, errlen, SL_EINVAL, "security.ssl.internal.keystore: %s holds no private key",
                                     path);
        } else if (!cert) {
            rc = sl_errf(err, errlen, SL_EINVAL, "security.ssl.internal.keystore: %s holds no certificate", path);
        }
    } else {
        PKCS12 *p12 = p12_read(data, n);
        if (!p12) {
            rc = sl_errf(err, errlen, SL_EINVAL,
                         "security.ssl.internal.keystore: %s is neither PEM nor a PKCS#12 keystore", path);
        } else if (!p12_mac_ok(p12, kspw)) {
            rc = sl_errf(err, errlen, SL_EINVAL, "security.ssl.internal.keystore-password: wrong password for %s",
                         path);
        } else if (!PKCS12_parse(p12, keypw ? keypw : "", &pkey, &cert, &chain)) {
            rc = sl_errf(err, errlen, SL_EINVAL,
                         "security.ssl.internal.key-password: cannot decrypt the private key in %s (a PKCS#12 "
                         "keystore made by keytool or openssl uses the keystore password for the key too)",
                         path);
        } else if (!pkey) {
            rc = sl_errf(err, errlen, SL_EINVAL, "security.ssl.internal.keystore: %s holds no private key", path);
        } else if (!cert) {
            rc = sl_errf(err, errlen, SL_EINVAL,
                         "security.ssl.internal.keystore: %s holds no certificate for its private key", path);
        }
        PKCS12_free(p12);
    }
    if (rc == 0) {
        ERR_clear_error();
        if (!X509_check_private_key(cert, pkey))
            rc = sl_errf(err, errlen, SL_EINVAL,
                         "security.ssl.internal.keystore: the private key in %s does not match its certificate", path);
        else if (SSL_CTX_use_certificate(ctx, cert) != 1 || SSL_CTX_use_PrivateKey(ctx, pkey) != 1)
            rc = sl_errf(err, errlen, SL_EINVAL, "security.ssl.internal.keystore: %s: %s", path,
                         ERR_reason_error_string(ERR_peek_last_error()));
        for (int i = 0; rc == 0 && chain && i < sk_X509_num(chain); i++)
            if (SSL_CTX_add1_chain_cert(ctx, sk_X509_value(chain, i)) != 1)
                rc = sl_errf(err, errlen, SL_EINVAL, "security.ssl.internal.keystore: %s: bad chain certificate",
                             path);
    }
    if (rc == 0) {
        char s[128] = "?", is[128] = "?";
        X509_NAME_oneline(X509_get_subject_name(cert), s, sizeof s);
        X509_NAME_oneline(X509_get_issuer_name(cert), is, sizeof is);
        snprintf(subject, subjcap, "%s (issuer %s)", s, is);
    }
    EVP_PKEY_free(pkey);
    X509_free(cert);
    sk_X509_pop_free(chain, X509_free);
    sl_free(data);
    return rc;
}

/* Loads the truststore's certificates into ctx's verification store. */
static int load_truststore(SSL_CTX *ctx, const sl_tls_config_t *cfg, char *err, size_t errlen) {
    const char *path = cfg->truststore;
    if (!path || !*path)
        return sl_errf(err, errlen, SL_EINVAL,
                       "security.ssl.internal.truststore is not set (security.ssl.internal.enabled is true)");
    size_t n = 0;
    uint8_t *data = read_file("security.ssl.internal.truststore", path, &n, err, errlen);
    if (!data) return SL_EIO;
    X509_STORE *store = SSL_CTX_get_cert_store(ctx);
    int count = 0, rc = 0;
    if (is_pem(data, n)) {
        BIO *bio = BIO_new_mem_buf(data, (int)n);
        X509 *x;
        while ((x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL) {
            if (X509_STORE_add_cert(store, x) == 1) count++;
            X509_free(x);
        }
        BIO_free(bio);
    } else {
        PKCS12 *p12 = p12_read(data, n);
        EVP_PKEY *pkey = NULL;
        X509 *cert = NULL;
        STACK_OF(X509) *ca = NULL;
        const char *pw = cfg->truststore_password ? cfg->truststore_password : "";
        if (!p12) {
            rc = sl_errf(err, errlen, SL_EINVAL,
                         "security.ssl.internal.truststore: %s is neither PEM nor a PKCS#12 truststore", path);
        } else if (!p12_mac_ok(p12, cfg->truststore_password)) {
            rc = sl_errf(err, errlen, SL_EINVAL, "security.ssl.internal.truststore-password: wrong password for %s",
                         path);
        } else if (!PKCS12_parse(p12, pw, &pkey, &cert, &ca)) {
            rc = sl_errf(err, errlen, SL_EINVAL, "security.ssl.internal.truststore: cannot read %s: %s", path,
                         ERR_reason_error_string(ERR_peek_last_error()));
        } else {
            if (cert && X509_STORE_add_cert(store, cert) == 1) count++;
            for (int i = 0; ca && i < sk_X509_num(ca); i++)
                if (X509_STORE_add_cert(store, sk_X509_value(ca, i)) == 1) count++;
        }
        EVP_PKEY_free(pkey);
        X509_free(cert);
        sk_X509_pop_free(ca, X509_free);
        PKCS12_free(p12);
    }
    sl_free(data);
    if (rc == 0 && count == 0)
        rc = sl_errf(err, errlen, SL_EINVAL, "security.ssl.internal.truststore: %s holds no certificate", path);
    /* Every certificate in the truststore is an anchor, as in Java. */
    if (rc == 0) X509_STORE_set_flags(store, X509_V_FLAG_PARTIAL_CHAIN);
    return rc;
}

/* security.ssl.protocol: one version or a comma-separated list. */
static int apply_protocol(SSL_CTX *ctx, const char *spec, char *err, size_t errlen) {
    const char *s = spec && *spec ? spec : "TLSv1.2";
    int lo = 0, hi = 0;
    char buf[128];
    snprintf(buf, sizeof buf, "%s", s);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
        int v;
        if (strcmp(tok, "TLSv1.2") == 0) v = TLS1_2_VERSION;
        else if (strcmp(tok, "TLSv1.3") == 0) v = TLS1_3_VERSION;
        else
            return sl_errf(err, errlen, SL_EINVAL,
                           "security.ssl.protocol: '%s' is not supported (TLSv1.2, TLSv1.3, or both comma-separated)",
                           tok);
        if (!lo || v < lo) lo = v;
        if (!hi || v > hi) hi = v;
    }
    if (!lo) return sl_errf(err, errlen, SL_EINVAL, "security.ssl.protocol: empty");
    SSL_CTX_set_min_proto_version(ctx, lo);
    SSL_CTX_set_max_proto_version(ctx, hi);
    return 0;
}

/* security.ssl.algorithms: TLS 1.3 suites (TLS_AES_*, TLS_CHACHA20_*) go to
 * the ciphersuites list, the others to the TLS 1.2 cipher list. */
static int apply_algorithms(SSL_CTX *ctx, const char *spec, char *err, size_t errlen) {
    if (!spec || !*spec) return 0;
    char buf[1024], v12[1024] = "", v13[1024] = "";
    snprintf(buf, sizeof buf, "%s", spec);
    char *save = NULL;
    for (char *tok = strtok_r(buf, ",: ", &save); tok; tok = strtok_r(NULL, ",: ", &save)) {
        bool is13 = strncmp(tok, "TLS_AES_", 8) == 0 || strncmp(tok, "TLS_CHACHA20_", 13) == 0;
        char *dst = is13 ? v13 : v12;
        size_t l = strlen(dst);
        snprintf(dst + l, sizeof v12 - l, "%s%s", l ? ":" : "", tok);
    }
    ERR_clear_error();
    if (*v12 && SSL_CTX_set_cipher_list(ctx, v12) != 1)
        return sl_errf(err, errlen, SL_EINVAL, "security.ssl.algorithms: no cipher OpenSSL knows in '%s'", v12);
    if (*v13 && SSL_CTX_set_ciphersuites(ctx, v13) != 1)
        return sl_errf(err, errlen, SL_EINVAL, "security.ssl.algorithms: no TLS 1.3 suite OpenSSL knows in '%s'", v13);
    return 0;
}

int sl_tls_ctx_new(const sl_tls_config_t *cfg, sl_tls_ctx_t **out, char *err, size_t errlen) {
    *out = NULL;
    if (cfg->handshake_timeout_ms < 0)
        return sl_errf(err, errlen, SL_EINVAL, "security.ssl.internal.handshake-timeout must not be negative");
    ERR_clear_error();
    SSL_CTX *ssl = SSL_CTX_new(TLS_method());
    if (!ssl) return sl_errf(err, errlen, SL_EIO, "TLS: cannot create an OpenSSL context");
    char subject[256] = "";
    int rc = apply_protocol(ssl, cfg->protocol, err, errlen);
    if (rc == 0) rc = apply_algorithms(ssl, cfg->algorithms, err, errlen);
    if (rc == 0) rc = load_keystore(ssl, cfg, subject, sizeof subject, err, errlen);
    if (rc == 0) rc = load_truststore(ssl, cfg, err, errlen);
    if (rc) {
        SSL_CTX_free(ssl);
        ERR_clear_error();
        return rc;
    }
    SSL_CTX_set_verify(ssl, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
    SSL_CTX_set_options(ssl, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION);
    SSL_CTX_set_num_tickets(ssl, 0);
    SSL_CTX_set_session_cache_mode(ssl, SSL_SESS_CACHE_OFF);
    SSL_CTX_set_mode(ssl, SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER | SSL_MODE_ENABLE_PARTIAL_WRITE);
    sl_tls_ctx_t *c = sl_calloc(1, sizeof *c);
    c->ssl = ssl;
    atomic_init(&c->refs, 1);
    c->handshake_timeout_ms = cfg->handshake_timeout_ms ? cfg->handshake_timeout_ms : DEFAULT_HANDSHAKE_TIMEOUT_MS;
    snprintf(c->subject, sizeof c->subject, "%s", subject);
    *out = c;
    return 0;
}

sl_tls_ctx_t *sl_tls_ctx_retain(sl_tls_ctx_t *c) {
    if (c) atomic_fetch_add_explicit(&c->refs, 1, memory_order_relaxed);
    return c;
}

void sl_tls_ctx_release(sl_tls_ctx_t *c) {
    if (!c || atomic_fetch_sub_explicit(&c->refs, 1, memory_order_acq_rel) != 1) return;
    SSL_CTX_free(c->ssl);
    sl_free(c);
}

int sl_tls_ctx_handshake_timeout_ms(const sl_tls_ctx_t *c) { return c->handshake_timeout_ms; }

const char *sl_tls_ctx_subject(const sl_tls_ctx_t *c) { return c->subject; }

/* ---- sessions ------------------------------------------------------------------ */

sl_tls_t *sl_tls_new(sl_tls_ctx_t *ctx, bool server) {
    sl_tls_t *t = sl_calloc(1, sizeof *t);
    t->ctx = sl_tls_ctx_retain(ctx);
    t->server = server;
    t->ssl = SSL_new(ctx->ssl);
    t->rbio = BIO_new(BIO_s_mem());
    t->wbio = BIO_new(BIO_s_mem());
    if (!t->ssl || !t->rbio || !t->wbio) abort();
    BIO_set_mem_eof_return(t->rbio, -1); /* empty input: "retry", not EOF */
    SSL_set_bio(t->ssl, t->rbio, t->wbio);
    if (server) SSL_set_accept_state(t->ssl);
    else SSL_set_connect_state(t->ssl);
    return t;
}

void sl_tls_free(sl_tls_t *t) {
    if (!t) return;
    SSL_free(t->ssl);
    sl_tls_ctx_release(t->ctx);
    sl_free(t);
}

static int fail(sl_tls_t *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(sl_tls_t *t, const char *fmt, ...) {
    if (!t->failed) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(t->err, sizeof t->err, fmt, ap);
        va_end(ap);
        t->failed = true;
    }
    ERR_clear_error();
    return SL_EIO;
}

/* Turns a failed SSL call (its SSL_get_error and the error queue) into the
 * session's message. */
static int describe_failure(sl_tls_t *t, int ssl_err) {
    unsigned long e = ERR_peek_last_error();
    int reason = ERR_GET_REASON(e);
    const char *rs = e ? ERR_reason_error_string(e) : NULL;
    if (!rs) rs = "unknown error";
    if (ssl_err == SSL_ERROR_ZERO_RETURN) {
        t->closed = true;
        return fail(t, "the peer closed the TLS session");
    }
    if (ssl_err == SSL_ERROR_SYSCALL && !e) return fail(t, "TLS stream ended unexpectedly");
    switch (reason) {
    case SSL_R_CERTIFICATE_VERIFY_FAILED: {
        long v = SSL_get_verify_result(t->ssl);
        return fail(t, "peer certificate not trusted: %s (security.ssl.internal.truststore)",
                    X509_verify_cert_error_string(v));
    }
    case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
        return fail(t, "peer presented no certificate (mutual authentication is required)");
    case SSL_R_TLSV1_ALERT_UNKNOWN_CA:
    case SSL_R_SSLV3_ALERT_BAD_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_UNKNOWN:
    case SSL_R_SSLV3_ALERT_UNSUPPORTED_CERTIFICATE:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_EXPIRED:
    case SSL_R_SSLV3_ALERT_CERTIFICATE_REVOKED:
    case SSL_R_TLSV1_ALERT_ACCESS_DENIED:
    case SSL_R_TLSV13_ALERT_CERTIFICATE_REQUIRED:
        return fail(t, "the peer refused our certificate (%s)", rs);
    case SSL_R_UNSUPPORTED_PROTOCOL:
    case SSL_R_TLSV1_ALERT_PROTOCOL_VERSION:
    case SSL_R_NO_PROTOCOLS_AVAILABLE:
    case SSL_R_VERSION_TOO_LOW:
    case SSL_R_VERSION_TOO_HIGH:
        return fail(t, "TLS protocol version mismatch (%s; security.ssl.protocol)", rs);
    case SSL_R_NO_SHARED_CIPHER:
    case SSL_R_SSLV3_ALERT_HANDSHAKE_FAILURE:
        return fail(t, "no cipher suite in common with the peer (%s; security.ssl.algorithms)", rs);
    case SSL_R_WRONG_VERSION_NUMBER:
    case SSL_R_HTTP_REQUEST:
    case SSL_R_HTTPS_PROXY_REQUEST:
    case SSL_R_PACKET_LENGTH_TOO_LONG:
    case SSL_R_UNKNOWN_PROTOCOL:
        return fail(t, "peer is not speaking TLS (%s)", rs);
    default:
        return fail(t, "TLS error: %s", rs);
    }
}

/* A TLS stream starts with a record header: content type 20..24, then
 * major version 3.  Anything else is another protocol (e.g. sluice's plain
 * handshake, "SLHS"), refused by name before OpenSSL sees it. */
static bool looks_like_tls(sl_tls_t *t, const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n && t->seen < 2; i++) t->first[t->seen++] = p[i];
    if (t->seen >= 1 && (t->first[0] < 20 || t->first[0] > 24)) return false;
    if (t->seen >= 2 && t->first[1] != 3) return false;
    return true;
}

int sl_tls_feed(sl_tls_t *t, const uint8_t *p, size_t n) {
    if (t->failed) return SL_EIO;
    if (n == 0) return 0;
    if (t->seen < 2 && !looks_like_tls(t, p, n)) {
        char hex[16];
        if (t->seen >= 2) snprintf(hex, sizeof hex, "0x%02x 0x%02x", t->first[0], t->first[1]);
        else snprintf(hex, sizeof hex, "0x%02x", t->first[0]);
        /* A fatal handshake_failure alert in the clear, so a plain peer can
         * tell that it reached a TLS endpoint. */
        static const uint8_t alert[] = {0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x28};
        BIO_write(t->wbio, alert, sizeof alert);
        return fail(t,
                    "peer is not speaking TLS (it sent %s first; is security.ssl.internal.enabled set on both "
                    "sides?)",
                    hex);
    }
    while (n > 0) {
        int k = BIO_write(t->rbio, p, n > INT32_MAX ? INT32_MAX : (int)n);
        if (k <= 0) return fail(t, "TLS: out of memory for input");
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

int sl_tls_handshake(sl_tls_t *t) {
    if (t->failed) return SL_EIO;
    if (t->done) return 1;
    ERR_clear_error();
    int r = SSL_do_handshake(t->ssl);
    if (r == 1) {
        t->done = true;
        X509 *pc = SSL_get1_peer_certificate(t->ssl);
        if (pc) {
            X509_NAME_oneline(X509_get_subject_name(pc), t->peer, sizeof t->peer);
            X509_free(pc);
        }
        return 1;
    }
    int e = SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return 0;
    return describe_failure(t, e);
}

bool sl_tls_done(const sl_tls_t *t) { return t->done; }

ssize_t sl_tls_read(sl_tls_t *t, uint8_t *buf, size_t cap) {
    if (t->failed) return SL_EIO;
    if (!t->done) return fail(t, "TLS: read before the handshake completed");
    ERR_clear_error();
    size_t got = 0;
    int r = SSL_read_ex(t->ssl, buf, cap, &got);
    if (r == 1) return (ssize_t)got;
    int e = SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) return 0;
    return describe_failure(t, e);
}

int sl_tls_write(sl_tls_t *t, const uint8_t *p, size_t n) {
    if (t->failed) return SL_EIO;
    if (!t->done) return fail(t, "TLS: write before the handshake completed");
    while (n > 0) {
        ERR_clear_error();
        size_t w = 0;
        int r = SSL_write_ex(t->ssl, p, n, &w);
        if (r != 1) return describe_failure(t, SSL_get_error(t->ssl, r));
        p += w;
        n -= w;
    }
    return 0;
}

size_t sl_tls_pending(const sl_tls_t *t) { return BIO_ctrl_pending(t->wbio); }

size_t sl_tls_take(sl_tls_t *t, uint8_t *out, size_t cap) {
    size_t got = 0;
    if (cap == 0 || BIO_read_ex(t->wbio, out, cap, &got) != 1) return 0;
    return got;
}

void sl_tls_close_notify(sl_tls_t *t) {
    if (!t->done || t->failed) return;
    ERR_clear_error();
    SSL_shutdown(t->ssl);
    ERR_clear_error();
}

bool sl_tls_closed(const sl_tls_t *t) { return t->closed; }

const char *sl_tls_error(const sl_tls_t *t) { return t->err; }

const char *sl_tls_peer(const sl_tls_t *t) { return t->peer; }
