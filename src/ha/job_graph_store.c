/*
 * job_graph_store.c — the submitted jobs in ZooKeeper and the HA storage
 * directory (Flink's JobGraphStore with its RetrievableStateHandles):
 * a job's artifact is copied to <storageDir>/<cluster-id>/job-<id>/ (a
 * built-in job has none), then /jobgraphs/<id> gets a JSON pointer:
 *
 *   {"artifact": "<copy or builtin:NAME>", "args": [...], "restore": "<path>"|null, "allow_nrs": bool}
 *
 * With a storageDir of s3://bucket/path (Flink's usual choice: every
 * JobManager host reads it, none shares a disk) the artifact is uploaded
 * to s3://bucket/path/<cluster-id>/job-<id>/<name> instead (before the
 * pointer exists, so a pointer never names a missing object), the pointer
 * names that URI, and a new leader downloads it into its own directory
 * (sl_ha_job_localize) before it compiles the job.
 *
 * The plan itself is not stored: the new leader compiles the artifact with
 * the same arguments again and gets the same plan (the TaskManagers check
 * its fingerprint, as for every deployment).
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/s3_client.h"
#include "ha/ha_int.h"

static void job_dir(sl_ha_t *ha, const char *id, char *out, size_t cap) {
    snprintf(out, cap, "%s/%s/job-%s", sl_ha_cfg(ha)->storage_dir, sl_ha_cfg(ha)->cluster_id, id);
}

/* An S3 storageDir: a client for its bucket and the key prefix of job id's
 * files ("<path>/<cluster-id>/job-<id>/"). */
static int s3_job(sl_ha_t *ha, const char *id, sl_s3_client_t **c, char *prefix, size_t cap, char *err,
                  size_t errlen) {
    char bucket[256], path[2048], e[600];
    const char *dir = sl_ha_cfg(ha)->storage_dir;
    int rc = sl_s3_parse_uri(dir, bucket, sizeof bucket, path, sizeof path, e, sizeof e);
    sl_s3_config_t cfg;
    if (rc == 0) rc = sl_s3_config_resolve(&cfg, e, sizeof e);
    if (rc == 0) rc = sl_s3_client_new(&cfg, bucket, c, e, sizeof e);
    if (rc < 0) return sl_errf(err, errlen, rc, "high-availability.storageDir %s: %s", dir, e);
    snprintf(prefix, cap, "%s%s%s/job-%s/", path, path[0] ? "/" : "", sl_ha_cfg(ha)->cluster_id, id);
    return 0;
}

static int mkdirs(const char *path, char *err, size_t errlen) {
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1;; s++) {
        if (*s && *s != '/') continue;
        char c = *s;
        *s = 0;
        if (mkdir(p, 0755) < 0 && errno != EEXIST)
            return sl_errf(err, errlen, SL_EIO, "cannot create %s: %s", p, strerror(errno));
        *s = c;
        if (!c) return 0;
    }
}

/* Copies src to dst (written to dst.tmp, synced, renamed). */
static int copy_file(const char *src, const char *dst, char *err, size_t errlen) {
    char tmp[4500];
    snprintf(tmp, sizeof tmp, "%s.tmp", dst);
    FILE *in = fopen(src, "rb");
    if (!in) return sl_errf(err, errlen, SL_EIO, "cannot read the artifact %s: %s", src, strerror(errno));
    FILE *out = fopen(tmp, "wb");
    if (!out) {
        int e = errno;
        fclose(in);
        return sl_errf(err, errlen, SL_EIO, "cannot write %s: %s", tmp, strerror(e));
    }
    char buf[65536];
    size_t n;
    bool ok = true;
    while (ok && (n = fread(buf, 1, sizeof buf, in)) > 0) ok = fwrite(buf, 1, n, out) == n;
    ok = ok && !ferror(in) && fflush(out) == 0 && fsync(fileno(out)) == 0;
    fclose(in);
    ok = fclose(out) == 0 && ok;
    if (!ok || rename(tmp, dst) < 0) {
        unlink(tmp);
        return sl_errf(err, errlen, SL_EIO, "cannot copy the artifact %s to %s", src, dst);
    }
    return 0;
}

/* Uploads the artifact as s3://bucket/<prefix><name>; its URI into uri. */
static int s3_put_artifact(sl_ha_t *ha, const sl_ha_job_t *job, char *uri, size_t cap, char *err, size_t errlen) {
    sl_s3_client_t *c;
    char prefix[2400], key[2700];
    int rc = s3_job(ha, job->id, &c, prefix, sizeof prefix, err, errlen);
    if (rc < 0) return rc;
    const char *base = strrchr(job->artifact, '/');
    snprintf(key, sizeof key, "%s%s", prefix, base ? base + 1 : job->artifact);
    int fd = open(job->artifact, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        rc = sl_errf(err, errlen, SL_EIO, "cannot read the artifact %s: %s", job->artifact, strerror(errno));
    } else {
        char e[1024];
        rc = sl_s3_put_fd(c, key, fd, (uint64_t)st.st_size, e, sizeof e);
        if (rc < 0) rc = sl_errf(err, errlen, rc, "high-availability.storageDir: cannot store the artifact: %s", e);
    }
    if (fd >= 0) close(fd);
    if (rc == 0) snprintf(uri, cap, "s3://%s/%s", sl_s3_client_bucket(c), key);
    sl_s3_client_free(c);
    return rc;
}

int sl_ha_job_put(sl_ha_t *ha, const sl_ha_job_t *job, char *stored_out, size_t cap, char *err, size_t errlen) {
    char stored[4400];
    snprintf(stored, sizeof stored, "%s", job->artifact);
    int rc = 0;
    if (strncmp(job->artifact, "builtin:", 8) && sl_s3_is_uri(sl_ha_cfg(ha)->storage_dir)) {
        rc = s3_put_artifact(ha, job, stored, sizeof stored, err, errlen);
        if (rc < 0) return rc;
    } else if (strncmp(job->artifact, "builtin:", 8)) {
        char dir[4096];
        job_dir(ha, job->id, dir, sizeof dir);
        const char *base = strrchr(job->artifact, '/');
        snprintf(stored, sizeof stored, "%s/%s", dir, base ? base + 1 : job->artifact);
        rc = mkdirs(dir, err, errlen);
        if (rc == 0) rc = copy_file(job->artifact, stored, err, errlen);
        if (rc < 0) return rc;
    }
    if (stored_out && cap) snprintf(stored_out, cap, "%s", stored);
    json_t *o = json_object(), *args = json_array();
    json_object_set_new(o, "artifact", json_string(stored));
    for (int i = 0; i < job->nargs; i++) json_array_append_new(args, json_string(job->args[i]));
    json_object_set_new(o, "args", args);
    json_object_set_new(o, "restore", job->restore_path ? json_string(job->restore_path) : json_null());
    json_object_set_new(o, "allow_nrs", json_boolean(job->allow_nrs));
    char *text = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    char path[300];
    snprintf(path, sizeof path, "/jobgraphs/%s", job->id);
    rc = sl_zk_ensure(sl_ha_zk(ha), "/jobgraphs", err, errlen);
    if (rc == 0) rc = sl_zk_create(sl_ha_zk(ha), path, text, strlen(text), 0, NULL, 0, err, errlen);
    free(text);
    return rc;
}

int sl_ha_job_ids(sl_ha_t *ha, char ***ids, int *n, char *err, size_t errlen) {
    int rc = sl_zk_children(sl_ha_zk(ha), "/jobgraphs", ids, n, err, errlen);
    if (rc == SL_ENOTFOUND) {
        *ids = sl_calloc(1, sizeof **ids);
        *n = 0;
        return 0;
    }
    return rc;
}

int sl_ha_job_get(sl_ha_t *ha, const char *id, sl_ha_job_t *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    char path[300];
    snprintf(path, sizeof path, "/jobgraphs/%s", id);
    sl_buf_t b = {0};
    int rc = sl_zk_get(sl_ha_zk(ha), path, &b, NULL, err, errlen);
    if (rc < 0) {
        sl_buf_free(&b);
        return rc;
    }
    json_error_t je;
    json_t *o = json_loadb((const char *)b.p, b.len, 0, &je);
    sl_buf_free(&b);
    json_t *art = o ? json_object_get(o, "artifact") : NULL, *args = o ? json_object_get(o, "args") : NULL;
    if (!json_is_string(art) || !json_is_array(args) || strlen(id) >= sizeof out->id) {
        json_decref(o);
        return sl_errf(err, errlen, SL_EFORMAT, "ZooKeeper %s: not a stored job", path);
    }
    snprintf(out->id, sizeof out->id, "%s", id);
    out->artifact = sl_strdup(json_string_value(art));
    out->nargs = (int)json_array_size(args);
    out->args = sl_calloc((size_t)out->nargs + 1, sizeof *out->args);
    for (int i = 0; i < out->nargs; i++) {
        const char *a = json_string_value(json_array_get(args, (size_t)i));
        out->args[i] = sl_strdup(a ? a : "");
    }
    json_t *r = json_object_get(o, "restore");
    out->restore_path = json_is_string(r) ? sl_strdup(json_string_value(r)) : NULL;
    out->allow_nrs = json_is_true(json_object_get(o, "allow_nrs"));
    json_decref(o);
    return 0;
}

int sl_ha_job_localize(sl_ha_t *ha, sl_ha_job_t *job, const char *local_dir, char *err, size_t errlen) {
    if (!sl_s3_is_uri(job->artifact)) return 0;
    char bucket[256], key[2700], e[1024];
    int rc = sl_s3_parse_uri(job->artifact, bucket, sizeof bucket, key, sizeof key, e, sizeof e);
    sl_s3_config_t cfg;
    sl_s3_client_t *c = NULL;
    if (rc == 0) rc = sl_s3_config_resolve(&cfg, e, sizeof e);
    if (rc == 0) rc = sl_s3_client_new(&cfg, bucket, &c, e, sizeof e);
    sl_buf_t b = {0};
    if (rc == 0) rc = sl_s3_get(c, key, &b, e, sizeof e);
    sl_s3_client_free(c);
    if (rc < 0) {
        sl_buf_free(&b);
        return sl_errf(err, errlen, rc, "job %s: cannot fetch its artifact %s: %s", job->id, job->artifact, e);
    }
    (void)ha;
    char dir[4096], path[7000], tmp[7100];
    snprintf(dir, sizeof dir, "%s/job-%s", local_dir, job->id);
    const char *base = strrchr(key, '/');
    snprintf(path, sizeof path, "%s/%s", dir, base ? base + 1 : key);
    snprintf(tmp, sizeof tmp, "%s.tmp", path);
    rc = mkdirs(dir, err, errlen);
    FILE *out = rc == 0 ? fopen(tmp, "wb") : NULL;
    if (rc == 0 && !out) rc = sl_errf(err, errlen, SL_EIO, "cannot write %s: %s", tmp, strerror(errno));
    if (out) {
        bool ok = fwrite(b.p, 1, b.len, out) == b.len;
        ok = fclose(out) == 0 && ok;
        if (!ok || rename(tmp, path) < 0) {
            unlink(tmp);
            rc = sl_errf(err, errlen, SL_EIO, "cannot write %s", path);
        }
    }
    sl_buf_free(&b);
    if (rc < 0) return rc;
    sl_free(job->artifact);
    job->artifact = sl_strdup(path);
    return 0;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
    (void)st, (void)flag, (void)ftw;
    return remove(path) < 0 && errno != ENOENT ? -1 : 0;
}

/* The job's files in the storage directory. */
static int remove_files(sl_ha_t *ha, const char *id, char *err, size_t errlen) {
    if (!sl_s3_is_uri(sl_ha_cfg(ha)->storage_dir)) {
        char dir[4096];
        job_dir(ha, id, dir, sizeof dir);
        if (nftw(dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS) < 0 && errno != ENOENT)
            return sl_errf(err, errlen, SL_EIO, "cannot remove %s: %s", dir, strerror(errno));
        return 0;
    }
    sl_s3_client_t *c;
    char prefix[2400], e[1024];
    int rc = s3_job(ha, id, &c, prefix, sizeof prefix, err, errlen);
    if (rc < 0) return rc;
    sl_s3_object_t *objs = NULL;
    int n = 0;
    rc = sl_s3_list(c, prefix, &objs, &n, e, sizeof e);
    for (int i = 0; i < n && rc == 0; i++) rc = sl_s3_delete(c, objs[i].key, e, sizeof e);
    if (rc < 0) rc = sl_errf(err, errlen, rc, "cannot remove the files of job %s: %s", id, e);
    sl_s3_objects_free(objs, n);
    sl_s3_client_free(c);
    return rc;
}

int sl_ha_job_remove(sl_ha_t *ha, const char *id, char *err, size_t errlen) {
    char path[300];
    snprintf(path, sizeof path, "/checkpoints/%s", id);
    int rc = sl_zk_delete_tree(sl_ha_zk(ha), path, err, errlen);
    snprintf(path, sizeof path, "/checkpoint-counter/%s", id);
    if (rc == 0) rc = sl_zk_delete_tree(sl_ha_zk(ha), path, err, errlen);
    snprintf(path, sizeof path, "/jobgraphs/%s", id); /* last: while it exists, a new leader recovers the job */
    if (rc == 0) rc = sl_zk_delete_tree(sl_ha_zk(ha), path, err, errlen);
    if (rc < 0) return rc;
    return remove_files(ha, id, err, errlen);
}

void sl_ha_job_clear(sl_ha_job_t *job) {
    sl_free(job->artifact);
    for (int i = 0; i < job->nargs; i++) sl_free(job->args[i]);
    sl_free(job->args);
    sl_free(job->restore_path);
    memset(job, 0, sizeof *job);
}
