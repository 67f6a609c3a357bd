/*
 * s3_storage.c — checkpoint storage in an S3-compatible object store, for
 * `s3://bucket/prefix` (storage.h's table), plus the opener that chooses
 * between it and the filesystem, and reading any state file or savepoint
 * named by an s3:// URI.
 *
 * The layout is the filesystem's, as keys: <prefix>/<job>/chk-<n>/<file>,
 * <prefix>/<job>/shared/<file>, <prefix>/<job>/taskowned/<file>.  S3 has no
 * directories and no rename, so:
 *   - an output stream keeps its bytes in memory, spills them to an
 *     unlinked temporary file past the multipart threshold, and uploads on
 *     finish (one PUT, or a multipart upload completed only at the end):
 *     an object is there whole or not at all, and an aborted stream
 *     uploaded nothing;
 *   - commit checks that every file of the checkpoint's own directory that
 *     the metadata names is there with its size, then PUTs _metadata (an
 *     atomic PUT: its presence makes the checkpoint complete, as the
 *     filesystem's rename does);
 *   - discard deletes _metadata first, then the rest of chk-<n>/;
 *   - a savepoint is copied server-side to <parent>/savepoint-<job6>-<hex>/
 *     (parent an s3:// URI), the checkpoint's objects deleted, and
 *     _metadata written there last.
 * A checkpoint "exists" when some object lies under chk-<n>/; creating one
 * writes nothing (a leftover of a dead attempt is deleted).
 *
 * Credentials and endpoint: sl_s3_config_resolve (s3_client.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "checkpoint/s3_client.h"
#include "checkpoint/storage.h"
#include "common/common.h"

typedef struct s3_storage {
    sl_ckpt_storage_t base;
    sl_s3_client_t *c;
    char *job_key; /* <prefix>/<job> (or <job>) */
    char *uri;     /* s3://bucket/<job_key>, for messages */
} s3_storage_t;

#define S3(s) ((s3_storage_t *)(s))

/* ------------------------------------------------------------------ */
/* Streams. */

typedef struct s3_out {
    sl_ckpt_out_t base;
    sl_s3_client_t *c;
    bool own_client;
    char *key;
    sl_buf_t mem;
    int fd; /* spill file past the threshold, or -1 */
    uint64_t total;
    uint64_t threshold;
} s3_out_t;

static void out_release(s3_out_t *o) {
    if (o->fd >= 0) close(o->fd);
    sl_buf_free(&o->mem);
    if (o->own_client) sl_s3_client_free(o->c);
    sl_free(o->key);
    sl_free(o->base.name);
    sl_free(o);
}

static int spill(s3_out_t *o, char *err, size_t errlen) {
    const char *tmp = getenv("TMPDIR");
    char path[1100];
    snprintf(path, sizeof path, "%s/sluice-s3-spool-XXXXXX", tmp && tmp[0] ? tmp : "/tmp");
    int fd = mkstemp(path);
    if (fd < 0) return sl_errf(err, errlen, SL_EIO, "%s: cannot create a spool file in %s: %s", o->base.name, path, strerror(errno));
    unlink(path);
    if (sl_write_all(fd, o->mem.p, o->mem.len) < 0) {
        int e = errno;
        close(fd);
        return sl_errf(err, errlen, SL_EIO, "%s: cannot write the spool file: %s", o->base.name, strerror(e));
    }
    o->fd = fd;
    sl_buf_free(&o->mem);
    return 0;
}

static int out_write(sl_ckpt_out_t *b, const void *p, size_t n, char *err, size_t errlen) {
    s3_out_t *o = (s3_out_t *)b;
    if (o->fd < 0 && o->mem.len + n > o->threshold) {
        int rc = spill(o, err, errlen);
        if (rc) return rc;
    }
    if (o->fd >= 0) {
        if (sl_write_all(o->fd, p, n) < 0)
            return sl_errf(err, errlen, SL_EIO, "%s: cannot write the spool file: %s", o->base.name, strerror(errno));
    } else {
        sl_buf_append(&o->mem, p, n);
    }
    o->total += n;
    return 0;
}

static int out_finish(sl_ckpt_out_t *b, char *err, size_t errlen) {
    s3_out_t *o = (s3_out_t *)b;
    int rc = o->fd >= 0 ? sl_s3_put_fd(o->c, o->key, o->fd, o->total, err, errlen)
                        : sl_s3_put(o->c, o->key, o->mem.p, o->mem.len, err, errlen);
    out_release(o);
    return rc;
}

static void out_abort(sl_ckpt_out_t *b) { out_release((s3_out_t *)b); } /* nothing was uploaded */

static const sl_ckpt_out_ops_t s3_out_ops = {out_write, out_finish, out_abort};

static sl_ckpt_out_t *out_new(sl_s3_client_t *c, bool own, const char *key, uint64_t threshold) {
    s3_out_t *o = sl_calloc(1, sizeof *o);
    o->base.ops = &s3_out_ops;
    const char *bucket = sl_s3_client_bucket(c);
    size_t n = strlen(bucket) + strlen(key) + 7;
    char *name = sl_malloc(n); /* for messages: the whole URL, however long the key */
    snprintf(name, n, "s3://%s/%s", bucket, key);
    o->base.name = name;
    o->c = c;
    o->own_client = own;
    o->key = sl_strdup(key);
    o->fd = -1;
    o->threshold = threshold;
    return &o->base;
}

#define WHOLE_MAX ((uint64_t)8 << 20) /* objects up to this are read in one GET */
#define BLOCK ((uint64_t)1 << 20)     /* larger ones in ranged GETs of at least this */

typedef struct s3_in {
    sl_ckpt_in_t base;
    sl_s3_client_t *c;
    bool own_client;
    char *key;
    sl_buf_t cache; /* bytes [cache_off, cache_off + cache.len) */
    uint64_t cache_off;
    bool cached;
} s3_in_t;

static int in_read_at(sl_ckpt_in_t *b, uint64_t off, void *p, size_t n, char *err, size_t errlen) {
    s3_in_t *in = (s3_in_t *)b;
    if (off > b->size || n > b->size - off)
        return sl_errf(err, errlen, SL_EFORMAT, "%s: truncated: wanted %zu bytes at offset %" PRIu64 " of %" PRIu64,
                       b->name, n, off, b->size);
    if (n == 0) return 0;
    if (!(in->cached && off >= in->cache_off && off + n <= in->cache_off + in->cache.len)) {
        uint64_t start = off, len = n;
        if (b->size <= WHOLE_MAX) {
            start = 0;
            len = b->size;
        } else if (len < BLOCK) {
            len = SL_MIN(BLOCK, b->size - start);
        }
        in->cache.len = 0;
        sl_buf_reserve(&in->cache, (size_t)len);
        int rc = sl_s3_get_range(in->c, in->key, start, in->cache.p, (size_t)len, err, errlen);
        if (rc) {
            in->cached = false;
            return rc;
        }
        in->cache.len = (size_t)len;
        in->cache_off = start;
        in->cached = true;
    }
    memcpy(p, in->cache.p + (off - in->cache_off), n);
    return 0;
}

static void in_close(sl_ckpt_in_t *b) {
    s3_in_t *in = (s3_in_t *)b;
    sl_buf_free(&in->cache);
    if (in->own_client) sl_s3_client_free(in->c);
    sl_free(in->key);
    sl_free(b->name);
    sl_free(in);
}

static const sl_ckpt_in_ops_t s3_in_ops = {in_read_at, in_close};

/* An input stream over key; on error an owned client is freed. */
static int in_open(sl_s3_client_t *c, bool own, const char *key, sl_ckpt_in_t **out, char *err, size_t errlen) {
    *out = NULL;
    uint64_t size = 0;
    char e[700];
    int rc = sl_s3_head(c, key, &size, e, sizeof e);
    if (rc) {
        if (rc == SL_ENOTFOUND)
            sl_errf(err, errlen, rc, "s3://%s/%s: missing (no such object)", sl_s3_client_bucket(c), key);
        else
            sl_errf(err, errlen, rc, "%s", e);
        if (own) sl_s3_client_free(c);
        return rc;
    }
    s3_in_t *in = sl_calloc(1, sizeof *in);
    in->base.ops = &s3_in_ops;
    char name[1400];
    snprintf(name, sizeof name, "s3://%s/%s", sl_s3_client_bucket(c), key);
    in->base.name = sl_strdup(name);
    in->base.size = size;
    in->c = c;
    in->own_client = own;
    in->key = sl_strdup(key);
    *out = &in->base;
    return 0;
}

/* A client for the bucket of uri; *key gets the rest. */
static int client_for(const char *uri, sl_s3_client_t **c, char *key, size_t kcap, char *err, size_t errlen) {
    sl_s3_config_t cfg;
    char bucket[64], e[600];
    int rc = sl_s3_parse_uri(uri, bucket, sizeof bucket, key, kcap, err, errlen);
    if (rc) return rc;
    if ((rc = sl_s3_config_resolve(&cfg, e, sizeof e))) return sl_errf(err, errlen, rc, "%s: %s", uri, e);
    return sl_s3_client_new(&cfg, bucket, c, err, errlen);
}

int sl_ckpt_in_open_s3(const char *uri, sl_ckpt_in_t **in, char *err, size_t errlen) {
    sl_s3_client_t *c;
    char key[1100];
    *in = NULL;
    int rc = client_for(uri, &c, key, sizeof key, err, errlen);
    if (rc) return rc;
    return in_open(c, true, key, in, err, errlen);
}

/* ------------------------------------------------------------------ */
/* Keys. */

static int key_of(sl_ckpt_storage_t *s, int64_t id, sl_ckpt_scope_t scope, const char *name, char *buf, size_t cap) {
    int n;
    const char *sep = name ? "/" : "", *nm = name ? name : "";
    switch (scope) {
    case SL_CKPT_SCOPE_EXCLUSIVE: n = snprintf(buf, cap, "%s/chk-%" PRId64 "%s%s", S3(s)->job_key, id, sep, nm); break;
    case SL_CKPT_SCOPE_SHARED: n = snprintf(buf, cap, "%s/shared%s%s", S3(s)->job_key, sep, nm); break;
    case SL_CKPT_SCOPE_TASKOWNED: n = snprintf(buf, cap, "%s/taskowned%s%s", S3(s)->job_key, sep, nm); break;
    default: n = -1;
    }
    return n < 0 || (size_t)n >= cap ? SL_EINVAL : 0;
}

static int s3_location(sl_ckpt_storage_t *s, int64_t id, sl_ckpt_scope_t scope, const char *name, char *buf,
                       size_t cap) {
    char key[1200];
    if (key_of(s, id, scope, name, key, sizeof key)) return SL_EINVAL;
    int n = snprintf(buf, cap, "s3://%s/%s", sl_s3_client_bucket(S3(s)->c), key);
    return n < 0 || (size_t)n >= cap ? SL_EINVAL : 0;
}

static int file_key(sl_ckpt_storage_t *s, int64_t id, sl_ckpt_scope_t scope, const char *name, char *buf, size_t cap,
                    char *err, size_t errlen) {
    if (!sl_ckpt_valid_file_name(name))
        return sl_errf(err, errlen, SL_EINVAL, "%s: '%s' is not a plain file name", S3(s)->uri, name ? name : "(null)");
    if (scope == SL_CKPT_SCOPE_EXCLUSIVE && strncmp(name, SL_CKPT_METADATA_NAME, strlen(SL_CKPT_METADATA_NAME)) == 0)
        return sl_errf(err, errlen, SL_EINVAL, "%s: file name '%s' is reserved for the checkpoint's metadata",
                       S3(s)->uri, name);
    if (scope == SL_CKPT_SCOPE_EXCLUSIVE && id < 1)
        return sl_errf(err, errlen, SL_EINVAL, "%s: checkpoint id %" PRId64 " (ids start at 1)", S3(s)->uri, id);
    if (scope != SL_CKPT_SCOPE_EXCLUSIVE && scope != SL_CKPT_SCOPE_SHARED && scope != SL_CKPT_SCOPE_TASKOWNED)
        return sl_errf(err, errlen, SL_EINVAL, "%s: unknown scope %d", S3(s)->uri, (int)scope);
    if (key_of(s, id, scope, name, buf, cap)) return sl_errf(err, errlen, SL_EINVAL, "%s: key of '%s' too long", S3(s)->uri, name);
    return 0;
}

/* chk-<id>/ (with the slash) and chk-<id>/_metadata. */
static void chk_keys(sl_ckpt_storage_t *s, int64_t id, char *dir, char *meta, size_t cap) {
    snprintf(dir, cap, "%s/chk-%" PRId64 "/", S3(s)->job_key, id);
    snprintf(meta, cap, "%s/chk-%" PRId64 "/%s", S3(s)->job_key, id, SL_CKPT_METADATA_NAME);
}

/* 1 if key exists, 0 if not, < 0 on error. */
static int exists(sl_s3_client_t *c, const char *key, char *err, size_t errlen) {
    uint64_t size;
    int rc = sl_s3_head(c, key, &size, err, errlen);
    return rc == 0 ? 1 : rc == SL_ENOTFOUND ? 0 : rc;
}

/* Deletes every object under prefix, the key `first` (if given) before
 * the others.  *found: whether any object was there. */
static int delete_prefix(sl_s3_client_t *c, const char *prefix, const char *first, bool *found, char *err,
                         size_t errlen) {
    sl_s3_object_t *v;
    int n, rc = sl_s3_list(c, prefix, &v, &n, err, errlen);
    if (rc) return rc;
    if (found) *found = n > 0;
    for (int i = 0; i < n && rc == 0 && first; i++)
        if (!strcmp(v[i].key, first)) rc = sl_s3_delete(c, v[i].key, err, errlen);
    for (int i = 0; i < n && rc == 0; i++)
        if (!first || strcmp(v[i].key, first) != 0) rc = sl_s3_delete(c, v[i].key, err, errlen);
    sl_s3_objects_free(v, n);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Ops. */

static int s3_open_output(sl_ckpt_storage_t *s, int64_t id, sl_ckpt_scope_t scope, const char *name,
                          sl_ckpt_out_t **out, char *err, size_t errlen) {
    char key[1200];
    *out = NULL;
    int rc = file_key(s, id, scope, name, key, sizeof key, err, errlen);
    if (rc) return rc;
    *out = out_new(S3(s)->c, false, key, (uint64_t)sl_s3_client_config(S3(s)->c)->multipart_threshold);
    return 0;
}

static int s3_open_input(sl_ckpt_storage_t *s, int64_t id, sl_ckpt_scope_t scope, const char *name,
                         sl_ckpt_in_t **in, char *err, size_t errlen) {
    char key[1200];
    *in = NULL;
    int rc = file_key(s, id, scope, name, key, sizeof key, err, errlen);
    if (rc) return rc;
    return in_open(S3(s)->c, false, key, in, err, errlen);
}

static int s3_create_checkpoint(sl_ckpt_storage_t *s, int64_t id, char *err, size_t errlen) {
    if (id < 1) return sl_errf(err, errlen, SL_EINVAL, "%s: checkpoint id %" PRId64 " (ids start at 1)", S3(s)->uri, id);
    char dir[1200], meta[1200];
    chk_keys(s, id, dir, meta, sizeof dir);
    int has = exists(S3(s)->c, meta, err, errlen);
    if (has < 0) return has;
    if (has)
        return sl_errf(err, errlen, SL_EINVAL, "%s/chk-%" PRId64 ": checkpoint %" PRId64 " exists and is complete",
                       S3(s)->uri, id, id);
    return delete_prefix(S3(s)->c, dir, NULL, NULL, err, errlen); /* a leftover of an attempt that died */
}

static int write_metadata(sl_s3_client_t *c, const char *key, const sl_ckpt_metadata_t *md, char *err, size_t errlen) {
    sl_ckpt_out_t *out = out_new(c, false, key, (uint64_t)sl_s3_client_config(c)->multipart_threshold);
    return sl_ckpt_metadata_write(md, out, err, errlen); /* finishes (uploads) or aborts the stream */
}

static int s3_commit(sl_ckpt_storage_t *s, const sl_ckpt_metadata_t *md, char *err, size_t errlen) {
    int64_t id = md->checkpoint_id;
    if (id < 1) return sl_errf(err, errlen, SL_EINVAL, "%s: checkpoint id %" PRId64 " (ids start at 1)", S3(s)->uri, id);
    char dir[1200], meta[1200];
    chk_keys(s, id, dir, meta, sizeof dir);
    if (strcmp(md->job_id ? md->job_id : "", s->job_id) != 0)
        return sl_errf(err, errlen, SL_EINVAL, "s3://%s/%s: metadata of job '%s' cannot be committed to job '%s'",
                       sl_s3_client_bucket(S3(s)->c), meta, md->job_id ? md->job_id : "", s->job_id);
    if (md->type != SL_CKPT_CHECKPOINT)
        return sl_errf(err, errlen, SL_EINVAL, "s3://%s/%s: a savepoint is not committed as a checkpoint",
                       sl_s3_client_bucket(S3(s)->c), meta);
    char e[400];
    int rc = sl_ckpt_metadata_validate(md, e, sizeof e);
    if (rc)
        return sl_errf(err, errlen, rc, "s3://%s/%s: refusing to commit invalid checkpoint metadata: %s",
                       sl_s3_client_bucket(S3(s)->c), meta, e);
    /* every file of chk-<n>/ the metadata names must be there, whole */
    sl_s3_object_t *v;
    int n;
    if ((rc = sl_s3_list(S3(s)->c, dir, &v, &n, err, errlen))) return rc;
    for (int i = 0; i < n && rc == 0; i++)
        if (!strcmp(v[i].key, meta))
            rc = sl_errf(err, errlen, SL_EINVAL, "s3://%s/%s: checkpoint %" PRId64 " is already complete",
                         sl_s3_client_bucket(S3(s)->c), meta, id);
    for (int o = 0; o < md->noperators && rc == 0; o++)
        for (int q = 0; q < md->operators[o].parallelism && rc == 0; q++) {
            const sl_ckpt_subtask_t *st = &md->operators[o].subtasks[q];
            for (int h = 0; h < st->nhandles && rc == 0; h++) {
                const sl_ckpt_state_handle_t *hd = &st->handles[h];
                if (hd->scope != SL_CKPT_SCOPE_EXCLUSIVE) continue;
                bool ok = false;
                size_t dl = strlen(dir);
                for (int i = 0; i < n && !ok; i++)
                    ok = !strncmp(v[i].key, dir, dl) && !strcmp(v[i].key + dl, hd->path) && v[i].size == hd->size;
                if (!ok)
                    rc = sl_errf(err, errlen, SL_ENOTFOUND,
                                 "s3://%s/%s%s: missing or not %" PRIu64 " bytes: checkpoint %" PRId64
                                 " cannot be completed (aborted, or an upload was lost)",
                                 sl_s3_client_bucket(S3(s)->c), dir, hd->path, hd->size, id);
            }
        }
    sl_s3_objects_free(v, n);
    if (rc) return rc;
    sl_fault_point("s3.commit.before-metadata");
    return write_metadata(S3(s)->c, meta, md, err, errlen);
}

static int s3_load(sl_ckpt_storage_t *s, int64_t id, sl_ckpt_metadata_t **mdp, char *err, size_t errlen) {
    *mdp = NULL;
    if (id < 1) return sl_errf(err, errlen, SL_EINVAL, "%s: checkpoint id %" PRId64 " (ids start at 1)", S3(s)->uri, id);
    char dir[1200], meta[1200];
    chk_keys(s, id, dir, meta, sizeof dir);
    sl_ckpt_in_t *in;
    int rc = in_open(S3(s)->c, false, meta, &in, err, errlen);
    if (rc == SL_ENOTFOUND)
        return sl_errf(err, errlen, SL_ENOTFOUND,
                       "s3://%s/%s: missing: checkpoint %" PRId64 " does not exist or is incomplete (never committed)",
                       sl_s3_client_bucket(S3(s)->c), meta, id);
    if (rc) return rc;
    sl_ckpt_metadata_t *md;
    if ((rc = sl_ckpt_metadata_read(in, &md, err, errlen))) return rc;
    const char *b = sl_s3_client_bucket(S3(s)->c);
    if (md->checkpoint_id != id)
        rc = sl_errf(err, errlen, SL_EFORMAT, "s3://%s/%s: describes checkpoint %" PRId64 " but lies in chk-%" PRId64, b,
                     meta, md->checkpoint_id, id);
    else if (strcmp(md->job_id, s->job_id) != 0)
        rc = sl_errf(err, errlen, SL_EFORMAT, "s3://%s/%s: belongs to job '%s', not '%s'", b, meta, md->job_id, s->job_id);
    else if (md->type != SL_CKPT_CHECKPOINT)
        rc = sl_errf(err, errlen, SL_EFORMAT, "s3://%s/%s: is a savepoint's metadata, not a checkpoint's", b, meta);
    if (rc) {
        sl_ckpt_metadata_free(md);
        return rc;
    }
    *mdp = md;
    return 0;
}

static int cmp_entry(const void *a, const void *b) {
    int64_t x = ((const sl_ckpt_entry_t *)a)->id, y = ((const sl_ckpt_entry_t *)b)->id;
    return x < y ? -1 : x > y;
}

/* "chk-<n>/..." -> n (>= 1, canonical decimal), rest after the slash; -1 if not. */
static int64_t parse_chk(const char *s, const char **rest) {
    if (strncmp(s, "chk-", 4) != 0) return -1;
    const char *d = s + 4;
    if (*d < '1' || *d > '9') return -1;
    int64_t v = 0;
    for (; *d && *d != '/'; d++) {
        if (*d < '0' || *d > '9' || v > (INT64_MAX - 9) / 10) return -1;
        v = v * 10 + (*d - '0');
    }
    if (*d != '/') return -1;
    *rest = d + 1;
    return v;
}

static int s3_list(sl_ckpt_storage_t *s, sl_ckpt_entry_t **entries, int *np, char *err, size_t errlen) {
    *entries = NULL;
    *np = 0;
    char prefix[1200];
    snprintf(prefix, sizeof prefix, "%s/chk-", S3(s)->job_key);
    sl_s3_object_t *v;
    int n, rc = sl_s3_list(S3(s)->c, prefix, &v, &n, err, errlen);
    if (rc) return rc;
    size_t pl = strlen(S3(s)->job_key) + 1;
    sl_ckpt_entry_t *e = NULL;
    int ne = 0;
    for (int i = 0; i < n; i++) {
        const char *rest;
        int64_t id = parse_chk(v[i].key + pl, &rest);
        if (id < 1) continue;
        int at = -1;
        for (int k = 0; k < ne && at < 0; k++)
            if (e[k].id == id) at = k;
        if (at < 0) {
            e = sl_realloc(e, (size_t)(ne + 1) * sizeof *e);
            e[ne] = (sl_ckpt_entry_t){id, false};
            at = ne++;
        }
        if (!strcmp(rest, SL_CKPT_METADATA_NAME)) e[at].complete = true;
    }
    sl_s3_objects_free(v, n);
    if (ne > 1) qsort(e, (size_t)ne, sizeof *e, cmp_entry);
    *entries = e;
    *np = ne;
    return 0;
}

static int s3_discard(sl_ckpt_storage_t *s, int64_t id, char *err, size_t errlen) {
    char dir[1200], meta[1200];
    chk_keys(s, id, dir, meta, sizeof dir);
    bool found = false;
    int rc = delete_prefix(S3(s)->c, dir, meta, &found, err, errlen);
    if (rc == 0 && !found)
        return sl_errf(err, errlen, SL_ENOTFOUND, "s3://%s/%s: no such checkpoint", sl_s3_client_bucket(S3(s)->c), dir);
    return rc;
}

static int s3_abort_pending(sl_ckpt_storage_t *s, int64_t id, char *err, size_t errlen) {
    char dir[1200], meta[1200];
    chk_keys(s, id, dir, meta, sizeof dir);
    int has = exists(S3(s)->c, meta, err, errlen);
    if (has < 0) return has;
    if (has)
        return sl_errf(err, errlen, SL_EINVAL, "s3://%s/%s: checkpoint %" PRId64 " is complete; discard it instead of aborting",
                       sl_s3_client_bucket(S3(s)->c), dir, id);
    bool found = false;
    int rc = delete_prefix(S3(s)->c, dir, NULL, &found, err, errlen);
    if (rc == 0 && !found)
        return sl_errf(err, errlen, SL_ENOTFOUND, "s3://%s/%s: no such checkpoint", sl_s3_client_bucket(S3(s)->c), dir);
    return rc;
}

static int s3_discard_all(sl_ckpt_storage_t *s, char *err, size_t errlen) {
    sl_ckpt_entry_t *v;
    int n, rc = s3_list(s, &v, &n, err, errlen);
    if (rc) return rc;
    for (int i = 0; i < n && rc == 0; i++) { /* first make every checkpoint incomplete */
        if (!v[i].complete) continue;
        char dir[1200], meta[1200];
        chk_keys(s, v[i].id, dir, meta, sizeof dir);
        rc = sl_s3_delete(S3(s)->c, meta, err, errlen);
    }
    sl_free(v);
    if (rc) return rc;
    char prefix[1200];
    snprintf(prefix, sizeof prefix, "%s/", S3(s)->job_key);
    return delete_prefix(S3(s)->c, prefix, NULL, NULL, err, errlen);
}

static int s3_remove_file(sl_ckpt_storage_t *s, sl_ckpt_scope_t scope, const char *name, char *err, size_t errlen) {
    if (scope == SL_CKPT_SCOPE_EXCLUSIVE || !sl_ckpt_valid_file_name(name))
        return sl_errf(err, errlen, SL_EINVAL, "remove_file: '%s' is not a shared or task-owned file name", name);
    char key[1200];
    int rc = file_key(s, 0, scope, name, key, sizeof key, err, errlen);
    if (rc) return rc;
    return sl_s3_delete(S3(s)->c, key, err, errlen);
}

static int s3_list_files(sl_ckpt_storage_t *s, sl_ckpt_scope_t scope, char ***names, int *np, char *err,
                         size_t errlen) {
    *names = NULL;
    *np = 0;
    if (scope == SL_CKPT_SCOPE_EXCLUSIVE) return sl_errf(err, errlen, SL_EINVAL, "list_files: not for a checkpoint's own files");
    char prefix[1200];
    if (key_of(s, 0, scope, NULL, prefix, sizeof prefix - 1)) return sl_errf(err, errlen, SL_EINVAL, "list_files: key too long");
    strcat(prefix, "/");
    sl_s3_object_t *v;
    int n, rc = sl_s3_list(S3(s)->c, prefix, &v, &n, err, errlen);
    if (rc) return rc;
    size_t pl = strlen(prefix);
    for (int i = 0; i < n; i++) {
        const char *nm = v[i].key + pl;
        if (!nm[0] || strchr(nm, '/')) continue;
        *names = sl_realloc(*names, (size_t)(*np + 1) * sizeof **names);
        (*names)[(*np)++] = sl_strdup(nm);
    }
    sl_s3_objects_free(v, n);
    return 0;
}

static int s3_commit_savepoint(sl_ckpt_storage_t *s, const sl_ckpt_metadata_t *md, const char *parent, char *location,
                               size_t cap, char *err, size_t errlen) {
    if (md->type != SL_CKPT_SAVEPOINT)
        return sl_errf(err, errlen, SL_EINVAL, "commit_savepoint: checkpoint %" PRId64 " is not a savepoint",
                       md->checkpoint_id);
    if (!sl_s3_is_uri(parent))
        return sl_errf(err, errlen, SL_EINVAL,
                       "savepoint directory '%s': with checkpoints in S3 (%s), savepoints go to an s3:// URI too",
                       parent ? parent : "", S3(s)->uri);
    char e[400];
    int rc = sl_ckpt_metadata_validate(md, e, sizeof e);
    if (rc) return sl_errf(err, errlen, rc, "refusing to write an invalid savepoint: %s", e);
    char pbucket[64], pkey[1100];
    if ((rc = sl_s3_parse_uri(parent, pbucket, sizeof pbucket, pkey, sizeof pkey, err, errlen))) return rc;
    uint8_t rnd[6];
    if (getentropy(rnd, sizeof rnd) != 0) return sl_errf(err, errlen, SL_EIO, "no randomness for the savepoint's name");
    char tkey[1300];
    snprintf(tkey, sizeof tkey, "%s%ssavepoint-%.6s-%02x%02x%02x%02x%02x%02x", pkey, pkey[0] ? "/" : "", s->job_id,
             rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
    int n = snprintf(location, cap, "s3://%s/%s", pbucket, tkey);
    if (n < 0 || (size_t)n >= cap) return sl_errf(err, errlen, SL_EINVAL, "%s: savepoint path too long", parent);
    sl_s3_client_t *dst = S3(s)->c, *own = NULL;
    if (strcmp(pbucket, sl_s3_client_bucket(S3(s)->c)) != 0) {
        sl_s3_config_t cfg;
        if ((rc = sl_s3_config_resolve(&cfg, err, errlen)) || (rc = sl_s3_client_new(&cfg, pbucket, &own, err, errlen)))
            return rc;
        dst = own;
    }
    char dir[1200], meta[1200];
    chk_keys(s, md->checkpoint_id, dir, meta, sizeof dir);
    sl_s3_object_t *v = NULL;
    int nv = 0;
    rc = sl_s3_list(S3(s)->c, dir, &v, &nv, err, errlen);
    size_t dl = strlen(dir);
    for (int i = 0; i < nv && rc == 0; i++) {
        char k[2600];
        snprintf(k, sizeof k, "%s/%s", tkey, v[i].key + dl);
        rc = sl_s3_copy(dst, sl_s3_client_bucket(S3(s)->c), v[i].key, k, err, errlen);
    }
    for (int i = 0; i < nv && rc == 0; i++) sl_s3_delete(S3(s)->c, v[i].key, NULL, 0); /* the move's second half */
    sl_s3_objects_free(v, nv);
    sl_fault_point("savepoint.moved-before-metadata");
    if (rc == 0) {
        char mk[1400];
        snprintf(mk, sizeof mk, "%s/%s", tkey, SL_CKPT_METADATA_NAME);
        rc = write_metadata(dst, mk, md, err, errlen);
    }
    sl_s3_client_free(own);
    return rc;
}

static void s3_destroy(sl_ckpt_storage_t *s) {
    if (!s) return;
    sl_s3_client_free(S3(s)->c);
    sl_free(S3(s)->job_key);
    sl_free(S3(s)->uri);
    sl_free(s->job_id);
    sl_free(s);
}

static const sl_ckpt_storage_ops_t s3_ops = {
    .name = "s3",
    .create_checkpoint = s3_create_checkpoint,
    .location = s3_location,
    .open_output = s3_open_output,
    .open_input = s3_open_input,
    .commit = s3_commit,
    .load = s3_load,
    .list = s3_list,
    .discard = s3_discard,
    .abort_pending = s3_abort_pending,
    .discard_all = s3_discard_all,
    .remove_file = s3_remove_file,
    .list_files = s3_list_files,
    .commit_savepoint = s3_commit_savepoint,
    .destroy = s3_destroy,
};

int sl_ckpt_storage_s3_open(const char *uri, const char *job_id, const sl_s3_config_t *cfg, sl_ckpt_storage_t **sp,
                            char *err, size_t errlen) {
    *sp = NULL;
    if (!sl_ckpt_valid_file_name(job_id))
        return sl_errf(err, errlen, SL_EINVAL, "%s: job id '%s' is not a plain file name", uri, job_id ? job_id : "(null)");
    char bucket[64], prefix[1024];
    int rc = sl_s3_parse_uri(uri, bucket, sizeof bucket, prefix, sizeof prefix, err, errlen);
    if (rc) return rc;
    sl_s3_config_t rcfg;
    char e[600];
    if (!cfg) {
        if ((rc = sl_s3_config_resolve(&rcfg, e, sizeof e)))
            return sl_errf(err, errlen, rc, "checkpoint storage %s: %s", uri, e);
        cfg = &rcfg;
    }
    sl_s3_client_t *c;
    if ((rc = sl_s3_client_new(cfg, bucket, &c, err, errlen))) return rc;
    s3_storage_t *s = sl_calloc(1, sizeof *s);
    s->base.ops = &s3_ops;
    s->base.job_id = sl_strdup(job_id);
    s->c = c;
    char jk[1400], u[1500];
    snprintf(jk, sizeof jk, "%s%s%s", prefix, prefix[0] ? "/" : "", job_id);
    snprintf(u, sizeof u, "s3://%s/%s", bucket, jk);
    s->job_key = sl_strdup(jk);
    s->uri = sl_strdup(u);
    /* reach the bucket now, so a wrong endpoint, key or bucket is reported
     * when the job starts, naming the bucket */
    sl_s3_object_t *v;
    int n;
    char probe[1500];
    snprintf(probe, sizeof probe, "%s/", jk);
    if ((rc = sl_s3_list(c, probe, &v, &n, e, sizeof e))) {
        s3_destroy(&s->base);
        return sl_errf(err, errlen, rc, "checkpoint storage %s: cannot list the bucket '%s': %s", uri, bucket, e);
    }
    sl_s3_objects_free(v, n);
    *sp = &s->base;
    return 0;
}

int sl_ckpt_storage_open(const char *uri, const char *job_id, sl_ckpt_storage_t **s, char *err, size_t errlen) {
    if (sl_s3_is_uri(uri)) return sl_ckpt_storage_s3_open(uri, job_id, NULL, s, err, errlen);
    if (uri && strstr(uri, "://"))
        return sl_errf(err, errlen, SL_EINVAL, "checkpoint storage '%s': unknown scheme (use s3:// or a path)", uri);
    return sl_ckpt_storage_fs_open(uri, job_id, s, err, errlen);
}

int sl_ckpt_s3_savepoint_dispose(const char *uri, char *err, size_t errlen) {
    sl_s3_client_t *c;
    char key[1100];
    int rc = client_for(uri, &c, key, sizeof key, err, errlen);
    if (rc) return rc;
    char meta[1200], dir[1200];
    snprintf(meta, sizeof meta, "%s/%s", key, SL_CKPT_METADATA_NAME);
    snprintf(dir, sizeof dir, "%s/", key);
    sl_ckpt_in_t *in;
    rc = in_open(c, false, meta, &in, err, errlen);
    sl_ckpt_metadata_t *md = NULL;
    if (rc == 0) rc = sl_ckpt_metadata_read(in, &md, err, errlen);
    if (rc == 0 && md->type != SL_CKPT_SAVEPOINT)
        rc = sl_errf(err, errlen, SL_EINVAL, "s3://%s/%s: is a checkpoint's metadata, not a savepoint's: not disposed",
                     sl_s3_client_bucket(c), meta);
    sl_ckpt_metadata_free(md);
    if (rc == 0) rc = delete_prefix(c, dir, meta, NULL, err, errlen);
    sl_s3_client_free(c);
    return rc;
}
