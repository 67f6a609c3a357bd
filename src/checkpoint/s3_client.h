/*
 * s3_client.h — a small client for S3-compatible object stores, on libcurl
 * with its AWS Signature V4 signing (CURLOPT_AWS_SIGV4).  Enough for
 * checkpoint storage: PUT, GET (whole or a byte range), HEAD, DELETE,
 * server-side COPY, ListObjectsV2 (following continuation tokens), and
 * multipart uploads (create / upload part / complete / abort) with the
 * parts of a large file uploaded by several threads at once.
 *
 * Every request sets x-amz-content-sha256 to the SHA-256 of its body
 * (OpenSSL), so the server can verify the payload.  Transient failures —
 * HTTP 5xx, 429, S3's SlowDown / InternalError / RequestTimeout, a refused
 * or reset connection, a timeout — are retried with exponential backoff and
 * full jitter, at most cfg.max_attempts times in all.  A permanent error
 * (or a transient one that stays) returns a negative SL_E* code with a
 * message naming the operation, the bucket and the key, and S3's error code
 * and message ("PUT s3://b/k: HTTP 403 SignatureDoesNotMatch: ...").
 *
 * Configuration comes from sl_s3_config_resolve: the values set for the
 * process (the s3.* configuration keys, sl_s3_set_defaults), then the
 * environment the AWS tools read (AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY,
 * AWS_SESSION_TOKEN, AWS_REGION / AWS_DEFAULT_REGION, AWS_ENDPOINT_URL_S3 /
 * AWS_ENDPOINT_URL), then defaults (us-east-1, https://s3.<region>.amazonaws.com).
 *
 * Errors: SL_ENOTFOUND (no such key: HTTP 404), SL_EIO (the store failed or
 * could not be reached, after retries), SL_EINVAL (bad URI, missing
 * credentials, access denied: a configuration mistake).
 *
 * Debugging: SLUICE_S3_VERBOSE=1 in the environment prints every request and
 * response header on stderr (libcurl's verbose mode).
 *
 * Threading: a client may be used from any number of threads at once (each
 * request takes its own curl handle from a small pool).  sl_s3_set_defaults
 * is for process start-up, before any client is made.
 */
#ifndef SL_CKPT_S3_CLIENT_H
#define SL_CKPT_S3_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <string.h>

#include "common/common.h"

typedef struct sl_s3_config {
    char endpoint[512];    /* "http://127.0.0.1:9000"; empty: AWS's for the region */
    char access_key[256];
    char secret_key[256];
    char session_token[2048];
    char region[64];       /* default us-east-1 */
    int path_style;        /* 1: http://host/bucket/key, 0: http://bucket.host/key, -1: unset (path style
                            * when an endpoint is given, as S3-compatible stores expect) */
    int max_attempts;      /* attempts per request in all (default 6) */
    int backoff_base_ms;   /* first backoff's upper bound (default 100) */
    int backoff_max_ms;    /* upper bound of any backoff (default 5000) */
    long connect_timeout_ms; /* default 5000 */
    long request_timeout_ms; /* a request that takes longer fails (transiently); default 120000 */
    int64_t part_size;       /* multipart part size, >= 5 MiB (default 8 MiB) */
    int64_t multipart_threshold; /* objects larger than this go multipart (default part_size) */
    int upload_threads;      /* parallel part uploads (default 4) */
    int list_page_size;      /* keys per ListObjectsV2 page (S3's max-keys; 0: S3's default, 1000) */
} sl_s3_config_t;

/* The s3.* values of this process's configuration (NULL or "" leaves a
 * field unset; path_style -1 unset).  Copied. */
void sl_s3_set_defaults(const char *endpoint, const char *access_key, const char *secret_key, const char *region,
                        int path_style);
/* Fills *cfg from the process defaults, the environment and built-in
 * defaults (see the top of this file).  SL_EINVAL naming the missing
 * setting when there is no access key or secret key. */
int sl_s3_config_resolve(sl_s3_config_t *cfg, char *err, size_t errlen);

/* Splits "s3://bucket/prefix/..." into bucket and prefix (leading, trailing
 * and repeated '/' dropped; may be empty).  SL_EINVAL naming the URI when it
 * is not one (no bucket, or a bucket name S3 does not allow). */
int sl_s3_parse_uri(const char *uri, char *bucket, size_t bcap, char *prefix, size_t pcap, char *err, size_t errlen);
static inline bool sl_s3_is_uri(const char *s) { return s && strncmp(s, "s3://", 5) == 0; }

typedef struct sl_s3_client sl_s3_client_t;

/* A client for one bucket (cfg copied). */
int sl_s3_client_new(const sl_s3_config_t *cfg, const char *bucket, sl_s3_client_t **c, char *err, size_t errlen);
void sl_s3_client_free(sl_s3_client_t *c);
const char *sl_s3_client_bucket(const sl_s3_client_t *c);
/* The client's configuration (with its defaults filled in). */
const sl_s3_config_t *sl_s3_client_config(const sl_s3_client_t *c);
/* Requests sent (every attempt) and retries, since the client was made. */
void sl_s3_client_stats(const sl_s3_client_t *c, int64_t *requests, int64_t *retries);

/* Uploads n bytes as key in one PUT (the object appears whole or not at all). */
int sl_s3_put(sl_s3_client_t *c, const char *key, const void *p, size_t n, char *err, size_t errlen);
/* Uploads the first size bytes of file fd (read with pread) as key: one PUT
 * up to the multipart threshold, a multipart upload above it whose parts
 * go up in parallel and which is completed only after every part succeeded
 * (aborted otherwise), so no reader ever sees part of the object. */
int sl_s3_put_fd(sl_s3_client_t *c, const char *key, int fd, uint64_t size, char *err, size_t errlen);
/* Reads the object whole into *out (appended). */
int sl_s3_get(sl_s3_client_t *c, const char *key, sl_buf_t *out, char *err, size_t errlen);
/* Reads bytes [off, off + n) into p; fewer bytes than asked is SL_EFORMAT
 * ("truncated"). */
int sl_s3_get_range(sl_s3_client_t *c, const char *key, uint64_t off, void *p, size_t n, char *err, size_t errlen);
/* The object's size; SL_ENOTFOUND when it does not exist. */
int sl_s3_head(sl_s3_client_t *c, const char *key, uint64_t *size, char *err, size_t errlen);
/* Deletes key (deleting a missing key succeeds, as in S3). */
int sl_s3_delete(sl_s3_client_t *c, const char *key, char *err, size_t errlen);
/* Server-side copy of src_bucket/src_key to key in this client's bucket
 * (objects up to 5 GB). */
int sl_s3_copy(sl_s3_client_t *c, const char *src_bucket, const char *src_key, const char *key, char *err,
               size_t errlen);

/* One listed object. */
typedef struct sl_s3_object {
    char *key;
    uint64_t size;
} sl_s3_object_t;
/* Every object whose key starts with prefix (all pages), in S3's (byte)
 * order.  *objs new: sl_s3_objects_free. */
int sl_s3_list(sl_s3_client_t *c, const char *prefix, sl_s3_object_t **objs, int *n, char *err, size_t errlen);
void sl_s3_objects_free(sl_s3_object_t *objs, int n);

/* Multipart uploads, step by step (sl_s3_put_fd uses them). */
int sl_s3_mpu_create(sl_s3_client_t *c, const char *key, char **upload_id, char *err, size_t errlen);
/* Uploads part number part (1..10000); *etag new (sl_free). */
int sl_s3_mpu_part(sl_s3_client_t *c, const char *key, const char *upload_id, int part, const void *p, size_t n,
                   char **etag, char *err, size_t errlen);
int sl_s3_mpu_complete(sl_s3_client_t *c, const char *key, const char *upload_id, int nparts, char *const *etags,
                       char *err, size_t errlen);
int sl_s3_mpu_abort(sl_s3_client_t *c, const char *key, const char *upload_id, char *err, size_t errlen);

#endif
