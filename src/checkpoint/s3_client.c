/*
 * s3_client.c — the S3 client of s3_client.h: one request function
 * (URL building, SigV4 via libcurl, x-amz-content-sha256, retries with
 * backoff), the operations on top of it, a few lines of XML scanning for
 * the fields S3's responses carry, and the parallel multipart upload.
 *
 * Queries are written in SigV4's canonical form (keys sorted, values
 * percent-encoded, "key=" for a bare key) so that the URL libcurl signs is
 * the URL S3 canonicalises.  Keys are percent-encoded per segment.
 */
#include "checkpoint/s3_client.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <openssl/sha.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ */
/* Configuration. */

static pthread_mutex_t defaults_mu = PTHREAD_MUTEX_INITIALIZER;
static sl_s3_config_t defaults = {.path_style = -1};

static void set_str(char *dst, size_t cap, const char *v) {
    if (v && v[0]) snprintf(dst, cap, "%s", v);
}

void sl_s3_set_defaults(const char *endpoint, const char *access_key, const char *secret_key, const char *region,
                        int path_style) {
    pthread_mutex_lock(&defaults_mu);
    set_str(defaults.endpoint, sizeof defaults.endpoint, endpoint);
    set_str(defaults.access_key, sizeof defaults.access_key, access_key);
    set_str(defaults.secret_key, sizeof defaults.secret_key, secret_key);
    set_str(defaults.region, sizeof defaults.region, region);
    if (path_style >= 0) defaults.path_style = path_style;
    pthread_mutex_unlock(&defaults_mu);
}

static void from_env(char *dst, size_t cap, const char *a, const char *b) {
    if (dst[0]) return;
    const char *v = getenv(a);
    if ((!v || !v[0]) && b) v = getenv(b);
    set_str(dst, cap, v);
}

int sl_s3_config_resolve(sl_s3_config_t *cfg, char *err, size_t errlen) {
    pthread_mutex_lock(&defaults_mu);
    *cfg = defaults;
    pthread_mutex_unlock(&defaults_mu);
    from_env(cfg->access_key, sizeof cfg->access_key, "AWS_ACCESS_KEY_ID", NULL);
    from_env(cfg->secret_key, sizeof cfg->secret_key, "AWS_SECRET_ACCESS_KEY", NULL);
    from_env(cfg->session_token, sizeof cfg->session_token, "AWS_SESSION_TOKEN", NULL);
    from_env(cfg->region, sizeof cfg->region, "AWS_REGION", "AWS_DEFAULT_REGION");
    from_env(cfg->endpoint, sizeof cfg->endpoint, "AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL");
    if (!cfg->region[0]) snprintf(cfg->region, sizeof cfg->region, "us-east-1");
    if (cfg->path_style < 0) cfg->path_style = cfg->endpoint[0] != 0;
    if (!cfg->endpoint[0]) snprintf(cfg->endpoint, sizeof cfg->endpoint, "https://s3.%s.amazonaws.com", cfg->region);
    size_t el = strlen(cfg->endpoint);
    while (el > 0 && cfg->endpoint[el - 1] == '/') cfg->endpoint[--el] = 0;
    if (!cfg->max_attempts) cfg->max_attempts = 6;
    if (!cfg->backoff_base_ms) cfg->backoff_base_ms = 100;
    if (!cfg->backoff_max_ms) cfg->backoff_max_ms = 5000;
    if (!cfg->connect_timeout_ms) cfg->connect_timeout_ms = 5000;
    if (!cfg->request_timeout_ms) cfg->request_timeout_ms = 120000;
    if (!cfg->part_size) cfg->part_size = (int64_t)8 << 20;
    if (!cfg->multipart_threshold) cfg->multipart_threshold = cfg->part_size;
    if (!cfg->upload_threads) cfg->upload_threads = 4;
    if (!cfg->access_key[0])
        return sl_errf(err, errlen, SL_EINVAL,
                       "S3: no access key (set s3.access-key or the environment variable AWS_ACCESS_KEY_ID)");
    if (!cfg->secret_key[0])
        return sl_errf(err, errlen, SL_EINVAL,
                       "S3: no secret key (set s3.secret-key or the environment variable AWS_SECRET_ACCESS_KEY)");
    if (strncmp(cfg->endpoint, "http://", 7) != 0 && strncmp(cfg->endpoint, "https://", 8) != 0)
        return sl_errf(err, errlen, SL_EINVAL, "S3: endpoint '%s' is not an http:// or https:// URL (s3.endpoint)",
                       cfg->endpoint);
    return 0;
}

int sl_s3_parse_uri(const char *uri, char *bucket, size_t bcap, char *prefix, size_t pcap, char *err, size_t errlen) {
    if (!sl_s3_is_uri(uri)) return sl_errf(err, errlen, SL_EINVAL, "'%s' is not an s3://bucket/path URI", uri ? uri : "");
    const char *b = uri + 5, *slash = strchr(b, '/');
    size_t bl = slash ? (size_t)(slash - b) : strlen(b);
    if (bl < 3 || bl > 63 || bl >= bcap)
        return sl_errf(err, errlen, SL_EINVAL, "%s: bucket name must have 3 to 63 characters", uri);
    for (size_t i = 0; i < bl; i++) {
        char ch = b[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.'))
            return sl_errf(err, errlen, SL_EINVAL,
                           "%s: bucket name may hold only lower-case letters, digits, '-' and '.'", uri);
    }
    memcpy(bucket, b, bl);
    bucket[bl] = 0;
    /* the key prefix: leading, trailing and repeated '/' dropped, as a
     * filesystem path would treat them ("s3://b/p//job/" is b, "p/job") */
    const char *p = slash ? slash : "";
    size_t k = 0;
    for (; *p; p++) {
        if (*p == '/' && (k == 0 || prefix[k - 1] == '/')) continue;
        if (k + 1 >= pcap) return sl_errf(err, errlen, SL_EINVAL, "%s: path too long", uri);
        prefix[k++] = *p;
    }
    while (k > 0 && prefix[k - 1] == '/') k--;
    prefix[k] = 0;
    return 0;
}

/* ------------------------------------------------------------------ */
/* The client and its pool of curl handles. */

#define POOL_MAX 16

struct sl_s3_client {
    sl_s3_config_t cfg;
    char bucket[64];
    char sigv4[128]; /* "aws:amz:<region>:s3" */
    char userpwd[520];
    pthread_mutex_t mu;
    CURL *pool[POOL_MAX];
    int npool;
    atomic_llong requests, retries;
};

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static void curl_init_once(void) { curl_global_init(CURL_GLOBAL_DEFAULT); }

int sl_s3_client_new(const sl_s3_config_t *cfg, const char *bucket, sl_s3_client_t **cp, char *err, size_t errlen) {
    *cp = NULL;
    if (!bucket || !bucket[0] || strlen(bucket) >= 64) return sl_errf(err, errlen, SL_EINVAL, "S3: bad bucket name");
    pthread_once(&curl_once, curl_init_once);
    sl_s3_client_t *c = sl_calloc(1, sizeof *c);
    c->cfg = *cfg;
    if (c->cfg.part_size < ((int64_t)5 << 20)) c->cfg.part_size = (int64_t)5 << 20;
    if (c->cfg.multipart_threshold < 1) c->cfg.multipart_threshold = c->cfg.part_size;
    if (c->cfg.upload_threads < 1) c->cfg.upload_threads = 1;
    if (c->cfg.max_attempts < 1) c->cfg.max_attempts = 1;
    snprintf(c->bucket, sizeof c->bucket, "%s", bucket);
    snprintf(c->sigv4, sizeof c->sigv4, "aws:amz:%s:s3", c->cfg.region);
    snprintf(c->userpwd, sizeof c->userpwd, "%s:%s", c->cfg.access_key, c->cfg.secret_key);
    pthread_mutex_init(&c->mu, NULL);
    *cp = c;
    return 0;
}

void sl_s3_client_free(sl_s3_client_t *c) {
    if (!c) return;
    for (int i = 0; i < c->npool; i++) curl_easy_cleanup(c->pool[i]);
    pthread_mutex_destroy(&c->mu);
    sl_free(c);
}

const char *sl_s3_client_bucket(const sl_s3_client_t *c) { return c->bucket; }
const sl_s3_config_t *sl_s3_client_config(const sl_s3_client_t *c) { return &c->cfg; }

void sl_s3_client_stats(const sl_s3_client_t *c, int64_t *requests, int64_t *retries) {
    if (requests) *requests = atomic_load(&((sl_s3_client_t *)c)->requests);
    if (retries) *retries = atomic_load(&((sl_s3_client_t *)c)->retries);
}

static CURL *take_handle(sl_s3_client_t *c) {
    CURL *h = NULL;
    pthread_mutex_lock(&c->mu);
    if (c->npool) h = c->pool[--c->npool];
    pthread_mutex_unlock(&c->mu);
    if (h)
        curl_easy_reset(h);
    else
        h = curl_easy_init();
    return h;
}

static void give_handle(sl_s3_client_t *c, CURL *h, bool reusable) {
    pthread_mutex_lock(&c->mu);
    if (reusable && c->npool < POOL_MAX) {
        c->pool[c->npool++] = h;
        h = NULL;
    }
    pthread_mutex_unlock(&c->mu);
    if (h) curl_easy_cleanup(h);
}

/* ------------------------------------------------------------------ */
/* Small helpers: encoding, hashing, XML. */

static bool unreserved(unsigned char ch) {
    return (ch >= 'A' && ch <= 'Z') || (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
           ch == '_' || ch == '.' || ch == '~';
}

/* Appends s percent-encoded (keep_slash: '/' stays, for keys). */
static void encode(sl_buf_t *b, const char *s, bool keep_slash) {
    static const char hex[] = "0123456789ABCDEF";
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (unreserved(*p) || (keep_slash && *p == '/')) {
            sl_buf_append(b, p, 1);
        } else {
            char e[3] = {'%', hex[*p >> 4], hex[*p & 15]};
            sl_buf_append(b, e, 3);
        }
    }
}

static void sha256_hex(const void *p, size_t n, char out[65]) {
    unsigned char d[SHA256_DIGEST_LENGTH];
    SHA256(p ? p : (const void *)"", n, d);
    for (int i = 0; i < SHA256_DIGEST_LENGTH; i++) snprintf(out + 2 * i, 3, "%02x", d[i]);
}

/* The text of the first <tag>...</tag> at or after *from (XML entities
 * decoded) into a new string, or NULL; *from moves past it. */
static char *xml_take(const char *xml, size_t len, const char *tag, size_t *from) {
    char open[96], close[96];
    snprintf(open, sizeof open, "<%s>", tag);
    snprintf(close, sizeof close, "</%s>", tag);
    size_t ol = strlen(open), cl = strlen(close);
    for (size_t i = from ? *from : 0; i + ol <= len; i++) {
        if (memcmp(xml + i, open, ol) != 0) continue;
        size_t s = i + ol;
        for (size_t j = s; j + cl <= len; j++) {
            if (memcmp(xml + j, close, cl) != 0) continue;
            char *out = sl_malloc(j - s + 1);
            size_t k = 0;
            for (size_t q = s; q < j;) {
                static const struct { const char *e; char c; } ents[] = {
                    {"&amp;", '&'}, {"&lt;", '<'}, {"&gt;", '>'}, {"&quot;", '"'}, {"&apos;", '\''}};
                bool done = false;
                for (size_t x = 0; x < SL_ARRAY_LEN(ents) && !done; x++) {
                    size_t el = strlen(ents[x].e);
                    if (q + el <= j && memcmp(xml + q, ents[x].e, el) == 0) {
                        out[k++] = ents[x].c;
                        q += el;
                        done = true;
                    }
                }
                if (!done) out[k++] = xml[q++];
            }
            out[k] = 0;
            if (from) *from = j + cl;
            return out;
        }
        return NULL;
    }
    return NULL;
}

/* ------------------------------------------------------------------ */
/* One request, with retries. */

typedef struct req {
    const char *method; /* GET PUT POST DELETE HEAD */
    const char *key;    /* NULL: the bucket */
    const char *query;  /* canonical query, or NULL */
    const void *body;
    size_t body_len;
    const char *extra_header; /* one more header line, or NULL */
    bool ranged;
    uint64_t range_off, range_len;
    bool error_in_200; /* CompleteMultipartUpload, CopyObject: a 200 may carry <Error> */
    /* results */
    long status;
    sl_buf_t resp;
    char etag[256];
    int64_t content_length; /* of the response (HEAD: the object's size), -1 unknown */
    size_t upload_pos;
} req_t;

static size_t on_write(char *p, size_t sz, size_t n, void *u) {
    sl_buf_append(&((req_t *)u)->resp, p, sz * n);
    return sz * n;
}

static size_t on_read(char *p, size_t sz, size_t n, void *u) {
    req_t *r = u;
    size_t left = r->body_len - r->upload_pos, k = SL_MIN(left, sz * n);
    memcpy(p, (const char *)r->body + r->upload_pos, k);
    r->upload_pos += k;
    return k;
}

static size_t on_header(char *p, size_t sz, size_t n, void *u) {
    req_t *r = u;
    size_t len = sz * n;
    if (len > 5 && strncasecmp(p, "etag:", 5) == 0) {
        size_t s = 5;
        while (s < len && (p[s] == ' ' || p[s] == '\t')) s++;
        size_t e = len;
        while (e > s && (p[e - 1] == '\r' || p[e - 1] == '\n' || p[e - 1] == ' ')) e--;
        snprintf(r->etag, sizeof r->etag, "%.*s", (int)(e - s), p + s);
    }
    return len;
}

static void build_url(const sl_s3_client_t *c, const req_t *r, sl_buf_t *u) {
    const char *ep = c->cfg.endpoint, *host = strstr(ep, "://");
    host = host ? host + 3 : ep;
    if (c->cfg.path_style) {
        sl_buf_append(u, ep, strlen(ep));
        sl_buf_append(u, "/", 1);
        sl_buf_append(u, c->bucket, strlen(c->bucket));
        sl_buf_append(u, "/", 1);
    } else {
        sl_buf_append(u, ep, (size_t)(host - ep));
        sl_buf_append(u, c->bucket, strlen(c->bucket));
        sl_buf_append(u, ".", 1);
        sl_buf_append(u, host, strlen(host));
        sl_buf_append(u, "/", 1);
    }
    if (r->key) encode(u, r->key, true);
    if (r->query && r->query[0]) {
        sl_buf_append(u, "?", 1);
        sl_buf_append(u, r->query, strlen(r->query));
    }
    sl_buf_append(u, "", 1);
}

static bool transient_code(const char *code) {
    return code && (!strcmp(code, "SlowDown") || !strcmp(code, "InternalError") || !strcmp(code, "RequestTimeout") ||
                    !strcmp(code, "ServiceUnavailable") || !strcmp(code, "RequestTimeTooSkewed"));
}

static uint64_t rnd64(void) {
    static _Thread_local uint64_t s;
    if (!s) s = (uint64_t)sl_mono_ns() ^ ((uint64_t)(uintptr_t)&s << 17) ^ (uint64_t)getpid();
    s ^= s << 13;
    s ^= s >> 7;
    s ^= s << 17;
    return s;
}

/* Equal jitter: half the capped exponential bound, plus a random part of
 * the other half (so the total wait has a floor a test can check). */
static void backoff(const sl_s3_client_t *c, int attempt) {
    int64_t cap = c->cfg.backoff_base_ms;
    for (int i = 1; i < attempt && cap < c->cfg.backoff_max_ms; i++) cap *= 2;
    if (cap > c->cfg.backoff_max_ms) cap = c->cfg.backoff_max_ms;
    int64_t ms = cap / 2 + (int64_t)(rnd64() % (uint64_t)(cap / 2 + 1));
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

/* Performs r; 0 on a 2xx, else a negative SL_E* with a message naming what
 * (e.g. "PUT") and s3://bucket/key.  A 404 is SL_ENOTFOUND without retry. */
static int perform(sl_s3_client_t *c, req_t *r, const char *what, char *err, size_t errlen) {
    sl_buf_t url = {0};
    build_url(c, r, &url);
    char sha[65], hdr_sha[100], hdr_tok[2100], hdr_range[96];
    sha256_hex(r->body, r->body_len, sha);
    snprintf(hdr_sha, sizeof hdr_sha, "x-amz-content-sha256: %s", sha);
    int rc = 0;
    char last[600] = "";
    for (int attempt = 1;; attempt++) {
        atomic_fetch_add(&c->requests, 1);
        r->resp.len = 0;
        r->etag[0] = 0;
        r->upload_pos = 0;
        r->status = 0;
        CURL *h = take_handle(c);
        struct curl_slist *hl = NULL;
        hl = curl_slist_append(hl, hdr_sha);
        if (c->cfg.session_token[0]) {
            snprintf(hdr_tok, sizeof hdr_tok, "x-amz-security-token: %s", c->cfg.session_token);
            hl = curl_slist_append(hl, hdr_tok);
        }
        if (r->ranged) {
            snprintf(hdr_range, sizeof hdr_range, "Range: bytes=%" PRIu64 "-%" PRIu64, r->range_off,
                     r->range_off + r->range_len - 1);
            hl = curl_slist_append(hl, hdr_range);
        }
        if (r->extra_header) hl = curl_slist_append(hl, r->extra_header);
        curl_easy_setopt(h, CURLOPT_URL, (const char *)url.p);
        curl_easy_setopt(h, CURLOPT_AWS_SIGV4, c->sigv4);
        curl_easy_setopt(h, CURLOPT_USERPWD, c->userpwd);
        curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
        /* curl signs every header in the list, so "Expect:" is not removed
         * there (a signed header the request lacks); instead the wait for
         * "100 Continue" is short */
        curl_easy_setopt(h, CURLOPT_EXPECT_100_TIMEOUT_MS, 50L);
        curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, c->cfg.connect_timeout_ms);
        curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, c->cfg.request_timeout_ms);
        curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_write);
        curl_easy_setopt(h, CURLOPT_WRITEDATA, r);
        curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
        curl_easy_setopt(h, CURLOPT_HEADERDATA, r);
        if (!strcmp(r->method, "PUT")) {
            curl_easy_setopt(h, CURLOPT_UPLOAD, 1L);
            curl_easy_setopt(h, CURLOPT_READFUNCTION, on_read);
            curl_easy_setopt(h, CURLOPT_READDATA, r);
            curl_easy_setopt(h, CURLOPT_INFILESIZE_LARGE, (curl_off_t)r->body_len);
        } else if (!strcmp(r->method, "POST")) {
            hl = curl_slist_append(hl, "Content-Type: application/xml");
            curl_easy_setopt(h, CURLOPT_POST, 1L);
            curl_easy_setopt(h, CURLOPT_POSTFIELDS, r->body ? (const char *)r->body : "");
            curl_easy_setopt(h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)r->body_len);
        } else if (!strcmp(r->method, "HEAD")) {
            curl_easy_setopt(h, CURLOPT_NOBODY, 1L);
        } else if (strcmp(r->method, "GET") != 0) {
            curl_easy_setopt(h, CURLOPT_CUSTOMREQUEST, r->method);
        }
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, hl);
        if (getenv("SLUICE_S3_VERBOSE")) curl_easy_setopt(h, CURLOPT_VERBOSE, 1L); /* requests on stderr */
        CURLcode cc = curl_easy_perform(h);
        r->content_length = -1;
        if (cc == CURLE_OK) {
            curl_off_t cl = -1;
            curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &r->status);
            if (curl_easy_getinfo(h, CURLINFO_CONTENT_LENGTH_DOWNLOAD_T, &cl) == CURLE_OK) r->content_length = cl;
        }
        curl_slist_free_all(hl);
        give_handle(c, h, cc == CURLE_OK);
        bool transient = false;
        char *code = NULL, *msg = NULL;
        if (cc != CURLE_OK) {
            transient = cc == CURLE_COULDNT_CONNECT || cc == CURLE_OPERATION_TIMEDOUT || cc == CURLE_SEND_ERROR ||
                        cc == CURLE_RECV_ERROR || cc == CURLE_GOT_NOTHING || cc == CURLE_PARTIAL_FILE ||
                        cc == CURLE_WEIRD_SERVER_REPLY || cc == CURLE_READ_ERROR;
            snprintf(last, sizeof last, "%s", curl_easy_strerror(cc));
            rc = SL_EIO;
        } else if (r->status >= 200 && r->status < 300) {
            code = r->error_in_200 ? xml_take((const char *)r->resp.p, r->resp.len, "Code", NULL) : NULL;
            if (!code) {
                rc = 0;
                break;
            }
            msg = xml_take((const char *)r->resp.p, r->resp.len, "Message", NULL);
            transient = transient_code(code);
            snprintf(last, sizeof last, "HTTP %ld with error %s: %s", r->status, code, msg ? msg : "");
            rc = SL_EIO;
        } else {
            code = r->resp.len ? xml_take((const char *)r->resp.p, r->resp.len, "Code", NULL) : NULL;
            msg = r->resp.len ? xml_take((const char *)r->resp.p, r->resp.len, "Message", NULL) : NULL;
            transient = r->status >= 500 || r->status == 429 || transient_code(code);
            snprintf(last, sizeof last, "HTTP %ld %s%s%s", r->status, code ? code : "", msg ? ": " : "",
                     msg ? msg : "");
            rc = r->status == 404 ? SL_ENOTFOUND
                 : (r->status == 403 || r->status == 400 || r->status == 401) && !transient ? SL_EINVAL
                                                                                            : SL_EIO;
        }
        sl_free(code);
        sl_free(msg);
        if (!transient || attempt >= c->cfg.max_attempts) {
            if (transient)
                sl_errf(err, errlen, rc, "%s s3://%s/%s: %s (gave up after %d attempts)", what, c->bucket,
                        r->key ? r->key : "", last, attempt);
            else
                sl_errf(err, errlen, rc, "%s s3://%s/%s: %s", what, c->bucket, r->key ? r->key : "", last);
            break;
        }
        atomic_fetch_add(&c->retries, 1);
        backoff(c, attempt);
    }
    sl_buf_free(&url);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Operations. */

int sl_s3_put(sl_s3_client_t *c, const char *key, const void *p, size_t n, char *err, size_t errlen) {
    req_t r = {.method = "PUT", .key = key, .body = p, .body_len = n};
    int rc = perform(c, &r, "PUT", err, errlen);
    sl_buf_free(&r.resp);
    return rc;
}

int sl_s3_get(sl_s3_client_t *c, const char *key, sl_buf_t *out, char *err, size_t errlen) {
    req_t r = {.method = "GET", .key = key};
    int rc = perform(c, &r, "GET", err, errlen);
    if (rc == 0) sl_buf_append(out, r.resp.p, r.resp.len);
    sl_buf_free(&r.resp);
    return rc;
}

int sl_s3_get_range(sl_s3_client_t *c, const char *key, uint64_t off, void *p, size_t n, char *err, size_t errlen) {
    if (n == 0) return 0;
    req_t r = {.method = "GET", .key = key, .ranged = true, .range_off = off, .range_len = n};
    int rc = perform(c, &r, "GET (range)", err, errlen);
    if (rc == 0 && (r.status != 206 && !(r.status == 200 && off == 0))) rc = SL_EIO;
    if (rc == 0 && r.resp.len < n)
        rc = sl_errf(err, errlen, SL_EFORMAT, "s3://%s/%s: truncated: %zu bytes at %" PRIu64 " asked, %zu there",
                     c->bucket, key, n, off, r.resp.len);
    if (rc == 0) memcpy(p, r.resp.p, n);
    sl_buf_free(&r.resp);
    return rc;
}

int sl_s3_head(sl_s3_client_t *c, const char *key, uint64_t *size, char *err, size_t errlen) {
    req_t r = {.method = "HEAD", .key = key};
    int rc = perform(c, &r, "HEAD", err, errlen);
    sl_buf_free(&r.resp);
    if (rc == 0 && r.content_length < 0)
        rc = sl_errf(err, errlen, SL_EIO, "HEAD s3://%s/%s: no Content-Length in the response", c->bucket, key);
    if (rc == 0) *size = (uint64_t)r.content_length;
    return rc;
}

int sl_s3_delete(sl_s3_client_t *c, const char *key, char *err, size_t errlen) {
    req_t r = {.method = "DELETE", .key = key};
    int rc = perform(c, &r, "DELETE", err, errlen);
    sl_buf_free(&r.resp);
    return rc == SL_ENOTFOUND ? 0 : rc;
}

int sl_s3_copy(sl_s3_client_t *c, const char *src_bucket, const char *src_key, const char *key, char *err,
               size_t errlen) {
    sl_buf_t h = {0};
    const char *lead = "x-amz-copy-source: /";
    sl_buf_append(&h, lead, strlen(lead));
    sl_buf_append(&h, src_bucket, strlen(src_bucket));
    sl_buf_append(&h, "/", 1);
    encode(&h, src_key, true);
    sl_buf_append(&h, "", 1);
    req_t r = {.method = "PUT", .key = key, .extra_header = (const char *)h.p, .error_in_200 = true};
    int rc = perform(c, &r, "COPY", err, errlen);
    sl_buf_free(&r.resp);
    sl_buf_free(&h);
    return rc;
}

void sl_s3_objects_free(sl_s3_object_t *objs, int n) {
    for (int i = 0; i < n; i++) sl_free(objs[i].key);
    sl_free(objs);
}

int sl_s3_list(sl_s3_client_t *c, const char *prefix, sl_s3_object_t **objs, int *np, char *err, size_t errlen) {
    *objs = NULL;
    *np = 0;
    char *token = NULL;
    int rc = 0, n = 0, cap = 0;
    sl_s3_object_t *v = NULL;
    do {
        /* canonical order: continuation-token < list-type < max-keys < prefix */
        sl_buf_t q = {0};
        if (token) {
            sl_buf_append(&q, "continuation-token=", 19);
            encode(&q, token, false);
            sl_buf_append(&q, "&", 1);
        }
        sl_buf_append(&q, "list-type=2&", 12);
        if (c->cfg.list_page_size > 0) {
            char mk[32];
            int l = snprintf(mk, sizeof mk, "max-keys=%d&", c->cfg.list_page_size);
            sl_buf_append(&q, mk, (size_t)l);
        }
        sl_buf_append(&q, "prefix=", 7);
        encode(&q, prefix ? prefix : "", false);
        sl_buf_append(&q, "", 1);
        req_t r = {.method = "GET", .key = NULL, .query = (const char *)q.p};
        rc = perform(c, &r, "LIST", err, errlen);
        sl_buf_free(&q);
        sl_free(token);
        token = NULL;
        if (rc == 0) {
            const char *x = (const char *)r.resp.p;
            size_t len = r.resp.len, at = 0;
            char *block;
            while ((block = xml_take(x, len, "Contents", &at))) {
                char *k = xml_take(block, strlen(block), "Key", NULL);
                char *sz = xml_take(block, strlen(block), "Size", NULL);
                if (k) {
                    if (n == cap) {
                        cap = cap ? cap * 2 : 32;
                        v = sl_realloc(v, (size_t)cap * sizeof *v);
                    }
                    v[n++] = (sl_s3_object_t){k, sz ? strtoull(sz, NULL, 10) : 0};
                }
                sl_free(sz);
                sl_free(block);
            }
            char *trunc = xml_take(x, len, "IsTruncated", NULL);
            if (trunc && !strcmp(trunc, "true")) {
                token = xml_take(x, len, "NextContinuationToken", NULL);
                if (!token)
                    rc = sl_errf(err, errlen, SL_EIO, "LIST s3://%s/%s: truncated listing without a continuation token",
                                 c->bucket, prefix);
            }
            sl_free(trunc);
        }
        sl_buf_free(&r.resp);
    } while (rc == 0 && token);
    sl_free(token);
    if (rc) {
        sl_s3_objects_free(v, n);
        return rc;
    }
    *objs = v;
    *np = n;
    return 0;
}

int sl_s3_mpu_create(sl_s3_client_t *c, const char *key, char **upload_id, char *err, size_t errlen) {
    *upload_id = NULL;
    req_t r = {.method = "POST", .key = key, .query = "uploads="};
    int rc = perform(c, &r, "CREATE MULTIPART", err, errlen);
    if (rc == 0) {
        *upload_id = xml_take((const char *)r.resp.p, r.resp.len, "UploadId", NULL);
        if (!*upload_id)
            rc = sl_errf(err, errlen, SL_EIO, "CREATE MULTIPART s3://%s/%s: no UploadId in the response", c->bucket, key);
    }
    sl_buf_free(&r.resp);
    return rc;
}

static void upload_query(sl_buf_t *q, int part, const char *upload_id) {
    if (part > 0) {
        char pn[32];
        int l = snprintf(pn, sizeof pn, "partNumber=%d&", part);
        sl_buf_append(q, pn, (size_t)l);
    }
    sl_buf_append(q, "uploadId=", 9);
    encode(q, upload_id, false);
    sl_buf_append(q, "", 1);
}

int sl_s3_mpu_part(sl_s3_client_t *c, const char *key, const char *upload_id, int part, const void *p, size_t n,
                   char **etag, char *err, size_t errlen) {
    *etag = NULL;
    sl_buf_t q = {0};
    upload_query(&q, part, upload_id);
    req_t r = {.method = "PUT", .key = key, .query = (const char *)q.p, .body = p, .body_len = n};
    char what[48];
    snprintf(what, sizeof what, "UPLOAD PART %d", part);
    int rc = perform(c, &r, what, err, errlen);
    if (rc == 0) {
        if (!r.etag[0])
            rc = sl_errf(err, errlen, SL_EIO, "%s s3://%s/%s: no ETag in the response", what, c->bucket, key);
        else
            *etag = sl_strdup(r.etag);
    }
    sl_buf_free(&r.resp);
    sl_buf_free(&q);
    return rc;
}

int sl_s3_mpu_complete(sl_s3_client_t *c, const char *key, const char *upload_id, int nparts, char *const *etags,
                       char *err, size_t errlen) {
    sl_buf_t q = {0}, body = {0};
    upload_query(&q, 0, upload_id);
    const char *head = "<CompleteMultipartUpload>";
    sl_buf_append(&body, head, strlen(head));
    for (int i = 0; i < nparts; i++) {
        char part[400];
        int l = snprintf(part, sizeof part, "<Part><PartNumber>%d</PartNumber><ETag>%s</ETag></Part>", i + 1,
                         etags[i]);
        sl_buf_append(&body, part, (size_t)l);
    }
    const char *tail = "</CompleteMultipartUpload>";
    sl_buf_append(&body, tail, strlen(tail));
    req_t r = {.method = "POST",
               .key = key,
               .query = (const char *)q.p,
               .body = body.p,
               .body_len = body.len,
               .error_in_200 = true};
    int rc = perform(c, &r, "COMPLETE MULTIPART", err, errlen);
    sl_buf_free(&r.resp);
    sl_buf_free(&q);
    sl_buf_free(&body);
    return rc;
}

int sl_s3_mpu_abort(sl_s3_client_t *c, const char *key, const char *upload_id, char *err, size_t errlen) {
    sl_buf_t q = {0};
    upload_query(&q, 0, upload_id);
    req_t r = {.method = "DELETE", .key = key, .query = (const char *)q.p};
    int rc = perform(c, &r, "ABORT MULTIPART", err, errlen);
    sl_buf_free(&r.resp);
    sl_buf_free(&q);
    return rc == SL_ENOTFOUND ? 0 : rc;
}

/* ------------------------------------------------------------------ */
/* Parallel multipart upload of a file. */

typedef struct mpu_job {
    sl_s3_client_t *c;
    const char *key, *upload_id;
    int fd;
    uint64_t size, part_size;
    int nparts;
    char **etags;
    atomic_int next;
    atomic_int failed;
    pthread_mutex_t mu;
    int rc;
    char err[600];
} mpu_job_t;

static void *mpu_worker(void *arg) {
    mpu_job_t *j = arg;
    uint8_t *buf = sl_malloc((size_t)j->part_size);
    for (;;) {
        if (atomic_load(&j->failed)) break;
        int i = atomic_fetch_add(&j->next, 1);
        if (i >= j->nparts) break;
        uint64_t off = (uint64_t)i * j->part_size;
        size_t n = (size_t)SL_MIN(j->part_size, j->size - off);
        char e[600] = "";
        int rc = 0;
        for (size_t got = 0; got < n && rc == 0;) {
            ssize_t k = pread(j->fd, buf + got, n - got, (off_t)(off + got));
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0)
                rc = sl_errf(e, sizeof e, SL_EIO, "s3://%s/%s: cannot read the spooled part %d: %s", j->c->bucket,
                             j->key, i + 1, k < 0 ? strerror(errno) : "short file");
            else
                got += (size_t)k;
        }
        if (rc == 0) rc = sl_s3_mpu_part(j->c, j->key, j->upload_id, i + 1, buf, n, &j->etags[i], e, sizeof e);
        if (rc) {
            pthread_mutex_lock(&j->mu);
            if (!j->rc) {
                j->rc = rc;
                snprintf(j->err, sizeof j->err, "%s", e);
            }
            pthread_mutex_unlock(&j->mu);
            atomic_store(&j->failed, 1);
        }
    }
    sl_free(buf);
    return NULL;
}

int sl_s3_put_fd(sl_s3_client_t *c, const char *key, int fd, uint64_t size, char *err, size_t errlen) {
    if (size <= (uint64_t)c->cfg.multipart_threshold) {
        uint8_t *buf = sl_malloc(size ? (size_t)size : 1);
        int rc = 0;
        for (size_t got = 0; got < size && rc == 0;) {
            ssize_t k = pread(fd, buf + got, (size_t)size - got, (off_t)got);
            if (k < 0 && errno == EINTR) continue;
            if (k <= 0)
                rc = sl_errf(err, errlen, SL_EIO, "s3://%s/%s: cannot read the spooled object: %s", c->bucket, key,
                             k < 0 ? strerror(errno) : "short file");
            else
                got += (size_t)k;
        }
        if (rc == 0) rc = sl_s3_put(c, key, buf, (size_t)size, err, errlen);
        sl_free(buf);
        return rc;
    }
    mpu_job_t j = {.c = c, .key = key, .fd = fd, .size = size, .part_size = (uint64_t)c->cfg.part_size};
    j.nparts = (int)((size + j.part_size - 1) / j.part_size);
    if (j.nparts > 10000)
        return sl_errf(err, errlen, SL_EINVAL, "s3://%s/%s: %" PRIu64 " bytes need more than 10000 parts of %" PRIu64,
                       c->bucket, key, size, j.part_size);
    char *uid = NULL;
    int rc = sl_s3_mpu_create(c, key, &uid, err, errlen);
    if (rc) return rc;
    j.upload_id = uid;
    j.etags = sl_calloc((size_t)j.nparts, sizeof *j.etags);
    pthread_mutex_init(&j.mu, NULL);
    int nt = SL_MIN(c->cfg.upload_threads, j.nparts);
    pthread_t *th = sl_calloc((size_t)nt, sizeof *th);
    int started = 0;
    for (int i = 0; i < nt; i++)
        if (pthread_create(&th[i], NULL, mpu_worker, &j) == 0) started++;
        else break;
    if (!started) mpu_worker(&j);
    for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
    sl_free(th);
    rc = j.rc;
    if (rc) sl_errf(err, errlen, rc, "%s", j.err);
    if (rc == 0) rc = sl_s3_mpu_complete(c, key, uid, j.nparts, j.etags, err, errlen);
    if (rc) sl_s3_mpu_abort(c, key, uid, NULL, 0); /* best effort: the parts never become an object */
    for (int i = 0; i < j.nparts; i++) sl_free(j.etags[i]);
    sl_free(j.etags);
    pthread_mutex_destroy(&j.mu);
    sl_free(uid);
    return rc;
}
