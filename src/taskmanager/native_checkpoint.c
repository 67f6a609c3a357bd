/*
 * native_checkpoint.c — incremental checkpoints of RocksDB state (Flink's
 * RocksIncrementalSnapshotStrategy and its restore).
 *
 * Synchronous phase (task thread): the backend flushes its memtables and
 * hard-links its live files into a local directory (rocksdb_backend.h).
 * Asynchronous phase (checkpoint writer thread): every immutable SST file
 * that this backend instance has not uploaded before is copied into the
 * checkpoint storage's shared/ scope as "<instance>-<name>"; the ones
 * uploaded for an earlier checkpoint are only referred to; MANIFEST,
 * CURRENT and OPTIONS go into the checkpoint's own directory.  Each copy is
 * checksummed (xxh3-64 of the file) into its handle.  The subtask's
 * "rocksdb-native" blob maps each handle to the file name RocksDB expects.
 * Shared files are deleted by retention once no retained checkpoint refers
 * to them (sl_ckpt_storage_retain).
 *
 * Restore: the files of every old subtask whose key groups overlap the new
 * range are copied into local directories (checksums verified; from S3
 * storage they are downloaded, sl_ckpt_in_open_file reading s3:// paths) and
 * sl_rocksdb_backend_open_native builds the new database from them — the
 * same files at the same parallelism, or the overlapping key groups of
 * several when it changed.
 */
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>
#define XXH_INLINE_ALL
#include <xxhash.h>

#include "checkpoint/metadata.h"
#include "checkpoint/storage.h"
#include "common/common.h"
#include "taskmanager/native_checkpoint.h"
#include "state/rocksdb_backend.h"

#define NATIVE_BLOB "rocksdb-native"

static int rm_cb(const char *p, const struct stat *sb, int flag, struct FTW *ftw) {
    (void)sb, (void)flag, (void)ftw;
    remove(p);
    return 0;
}

void sl_native_rm_rf(const char *dir) { nftw(dir, rm_cb, 16, FTW_DEPTH | FTW_PHYS); }

bool sl_native_wanted(bool incremental, const sl_keyed_backend_t *kb) {
    return incremental && kb && sl_rocksdb_backend_is(kb);
}

int sl_native_snapshot(sl_keyed_backend_t *kb, const char *base_dir, const char *tag, sl_native_snap_t **out,
                       char *err, size_t errlen) {
    static atomic_int seq;
    sl_native_snap_t *n = sl_calloc(1, sizeof *n);
    snprintf(n->dir, sizeof n->dir, "%s/sluice-native-%d-%s-%d", base_dir, (int)getpid(), tag,
             atomic_fetch_add(&seq, 1));
    int rc = sl_rocksdb_native_snapshot(kb, n->dir, &n->files, err, errlen);
    if (rc < 0) {
        sl_native_rm_rf(n->dir);
        sl_free(n);
        return rc;
    }
    *out = n;
    return 0;
}

void sl_native_snap_free(sl_native_snap_t *n) {
    if (!n) return;
    sl_native_rm_rf(n->dir);
    sl_rocksdb_files_free(&n->files);
    sl_free(n);
}

void sl_native_uploads_free(sl_native_uploads_t *u) {
    for (int i = 0; i < u->n; i++) sl_free(u->v[i].name);
    sl_free(u->v);
    memset(u, 0, sizeof *u);
}

/* Copies local file src into storage as (scope, name), hashing it. */
static int upload(sl_ckpt_storage_t *st, int64_t id, sl_ckpt_scope_t scope, const char *name, const char *src,
                  uint64_t *size, uint64_t *checksum, char *err, size_t errlen) {
    int fd = open(src, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return sl_errf(err, errlen, SL_EIO, "%s: cannot open: %s", src, strerror(errno));
    sl_ckpt_out_t *out = NULL;
    int rc = st->ops->open_output(st, id, scope, name, &out, err, errlen);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    XXH3_state_t *h = XXH3_createState();
    XXH3_64bits_reset(h);
    static __thread uint8_t buf[1 << 16];
    uint64_t total = 0;
    for (;;) {
        ssize_t r = read(fd, buf, sizeof buf);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            rc = sl_errf(err, errlen, SL_EIO, "%s: read failed: %s", src, strerror(errno));
            break;
        }
        if (r == 0) break;
        XXH3_64bits_update(h, buf, (size_t)r);
        total += (uint64_t)r;
        if ((rc = out->ops->write(out, buf, (size_t)r, err, errlen)) < 0) break;
    }
    close(fd);
    if (rc < 0) {
        out->ops->abort(out);
    } else {
        rc = out->ops->finish(out, err, errlen);
        *size = total;
        *checksum = XXH3_64bits_digest(h);
    }
    XXH3_freeState(h);
    return rc;
}

int sl_native_persist(sl_ckpt_storage_t *st, int64_t id, const sl_native_snap_t *n, const char *private_prefix,
                      sl_native_uploads_t *uploaded, sl_ckpt_subtask_t *sub, int64_t *bytes, char *err,
                      size_t errlen) {
    if (uploaded && strcmp(uploaded->instance, n->files.instance) != 0) { /* a new database: nothing stored yet */
        sl_native_uploads_free(uploaded);
        snprintf(uploaded->instance, sizeof uploaded->instance, "%s", n->files.instance);
    }
    sl_buf_t blob = {0};
    int rc = 0;
    for (int i = 0; i < n->files.n && rc == 0; i++) {
        const sl_rocksdb_file_t *f = &n->files.v[i];
        char path[400], src[1400];
        bool shared = f->shared && uploaded; /* without a registry (a savepoint) every file is its own */
        sl_ckpt_scope_t scope = shared ? SL_CKPT_SCOPE_SHARED : SL_CKPT_SCOPE_EXCLUSIVE;
        if (shared)
            snprintf(path, sizeof path, "%s-%s", n->files.instance, f->name);
        else
            snprintf(path, sizeof path, "%s-%s", private_prefix, f->name);
        snprintf(src, sizeof src, "%s/%s", n->dir, f->name);
        uint64_t size = 0, sum = 0;
        int known = -1;
        for (int u = 0; shared && u < uploaded->n && known < 0; u++)
            if (!strcmp(uploaded->v[u].name, path)) known = u;
        if (known >= 0) { /* uploaded for an earlier checkpoint: refer to it */
            size = uploaded->v[known].size;
            sum = uploaded->v[known].checksum;
        } else {
            rc = upload(st, id, scope, path, src, &size, &sum, err, errlen);
            if (rc < 0) break;
            *bytes += (int64_t)size;
            if (shared) {
                uploaded->v = sl_realloc(uploaded->v, (size_t)(uploaded->n + 1) * sizeof *uploaded->v);
                uploaded->v[uploaded->n++] = (sl_native_upload_t){sl_strdup(path), size, sum};
            }
        }
        sl_sf_info_t info;
        memset(&info, 0, sizeof info);
        info.size = size;
        info.checksum = sum;
        info.kind = SL_SF_KIND_FOREIGN;
        sl_ckpt_subtask_add_file(sub, scope, path, &info);
        char line[900];
        int l = snprintf(line, sizeof line, "%d %s %s\n", (int)scope, path, f->name);
        sl_buf_append(&blob, line, (size_t)l);
    }
    if (rc == 0) sl_ckpt_subtask_add_blob(sub, NATIVE_BLOB, SL_CKPT_DIST_SPLIT, blob.p, blob.len);
    sl_buf_free(&blob);
    return rc;
}

void sl_native_move(sl_ckpt_subtask_t *dst, sl_ckpt_subtask_t *tmp) {
    for (int i = 0; i < tmp->nhandles; i++) {
        sl_ckpt_state_handle_t *h = &tmp->handles[i];
        sl_sf_info_t info;
        memset(&info, 0, sizeof info);
        info.size = h->size;
        info.checksum = h->checksum;
        info.kind = h->kind;
        if (dst) sl_ckpt_subtask_add_file(dst, (sl_ckpt_scope_t)h->scope, h->path, &info);
        sl_free(h->path);
        sl_free(h->sections);
    }
    for (int i = 0; i < tmp->nblobs; i++) {
        sl_ckpt_blob_t *b = &tmp->blobs[i];
        if (dst) sl_ckpt_subtask_add_blob(dst, b->name, (sl_ckpt_distribution_t)b->distribution, b->data, b->len);
        sl_free(b->name);
        sl_free(b->data);
    }
    sl_free(tmp->handles);
    sl_free(tmp->blobs);
    memset(tmp, 0, sizeof *tmp);
}

bool sl_native_present(const sl_ckpt_operator_t *mo) {
    for (int q = 0; q < mo->parallelism; q++)
        if (sl_ckpt_find_blob(mo->subtasks[q].blobs, mo->subtasks[q].nblobs, NATIVE_BLOB)) return true;
    return false;
}

/* Copies the files of one old subtask into dir, checking each against its
 * handle. */
static int fetch_subtask(const char *chk_path, const sl_ckpt_subtask_t *sub, const sl_ckpt_blob_t *b, const char *dir,
                         char *err, size_t errlen) {
    if (mkdir(dir, 0755) != 0 && errno != EEXIST)
        return sl_errf(err, errlen, SL_EIO, "%s: cannot create: %s", dir, strerror(errno));
    char *text = sl_malloc(b->len + 1);
    memcpy(text, b->data, b->len);
    text[b->len] = 0;
    int rc = 0;
    for (char *save = NULL, *line = strtok_r(text, "\n", &save); line && rc == 0; line = strtok_r(NULL, "\n", &save)) {
        int scope;
        char path[400], name[400];
        if (sscanf(line, "%d %399s %399s", &scope, path, name) != 3 || strchr(name, '/') || strchr(path, '/')) {
            rc = sl_errf(err, errlen, SL_EFORMAT, "%s: malformed RocksDB file list entry '%.80s'", chk_path, line);
            break;
        }
        const sl_ckpt_state_handle_t *h = NULL;
        for (int i = 0; i < sub->nhandles && !h; i++)
            if (!strcmp(sub->handles[i].path, path) && sub->handles[i].scope == scope) h = &sub->handles[i];
        if (!h) {
            rc = sl_errf(err, errlen, SL_EFORMAT, "%s: RocksDB file %s has no handle in the metadata", chk_path, path);
            break;
        }
        char src[4700], dst[1700];
        if (scope == SL_CKPT_SCOPE_SHARED) { /* <job>/chk-<n> -> <job>/shared */
            const char *slash = strrchr(chk_path, '/');
            int jl = slash ? (int)(slash - chk_path) : 0;
            snprintf(src, sizeof src, "%.*s%sshared/%s", jl, chk_path, slash ? "/" : "", path);
        } else
            snprintf(src, sizeof src, "%s/%s", chk_path, path);
        snprintf(dst, sizeof dst, "%s/%s", dir, name);
        /* a local file, or an object of S3 storage (downloaded in ranged GETs) */
        sl_ckpt_in_t *in = NULL;
        rc = sl_ckpt_in_open_file(src, &in, err, errlen);
        if (rc == SL_ENOTFOUND && strncmp(src, "s3://", 5) != 0)
            sl_errf(err, errlen, rc, "%s: cannot open: %s", src, strerror(ENOENT));
        if (rc < 0) break;
        int out = open(dst, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (out < 0) {
            in->ops->close(in);
            rc = sl_errf(err, errlen, SL_EIO, "%s: cannot create: %s", dst, strerror(errno));
            break;
        }
        XXH3_state_t *x = XXH3_createState();
        XXH3_64bits_reset(x);
        static __thread uint8_t buf[1 << 16];
        uint64_t total = 0;
        while (total < in->size) {
            size_t r = (size_t)SL_MIN((uint64_t)sizeof buf, in->size - total);
            if ((rc = in->ops->read_at(in, total, buf, r, err, errlen)) < 0) break;
            XXH3_64bits_update(x, buf, r);
            total += r;
            if (sl_write_all(out, buf, r) < 0) {
                rc = sl_errf(err, errlen, SL_EIO, "%s: write failed: %s", dst, strerror(errno));
                break;
            }
        }
        uint64_t sum = XXH3_64bits_digest(x);
        XXH3_freeState(x);
        in->ops->close(in);
        close(out);
        if (rc == 0 && (total != h->size || sum != h->checksum))
            rc = sl_errf(err, errlen, SL_EFORMAT,
                         "%s: corrupt: %llu bytes with checksum %016llx, the checkpoint's metadata says %llu bytes "
                         "with %016llx",
                         src, (unsigned long long)total, (unsigned long long)sum, (unsigned long long)h->size,
                         (unsigned long long)h->checksum);
    }
    sl_free(text);
    return rc;
}

int sl_native_restore(const char *chk_path, const sl_ckpt_operator_t *mo, int max_parallelism, sl_kg_range_t range,
                      const char *base_dir, const sl_rocksdb_opts_t *opts, sl_keyed_backend_t **out, char *err,
                      size_t errlen) {
    static atomic_int seq;
    char **dirs = sl_calloc((size_t)mo->parallelism, sizeof *dirs);
    sl_kg_range_t *ranges = sl_calloc((size_t)mo->parallelism, sizeof *ranges);
    int nd = 0, rc = 0;
    char root[1200];
    snprintf(root, sizeof root, "%s/sluice-restore-%d-%d", base_dir, (int)getpid(), atomic_fetch_add(&seq, 1));
    if (mkdir(root, 0755) != 0 && errno != EEXIST)
        rc = sl_errf(err, errlen, SL_EIO, "%s: cannot create: %s", root, strerror(errno));
    for (int q = 0; q < mo->parallelism && rc == 0; q++) {
        const sl_ckpt_subtask_t *sub = &mo->subtasks[q];
        if (sub->range.end <= range.start || sub->range.start >= range.end) continue;
        const sl_ckpt_blob_t *b = sl_ckpt_find_blob(sub->blobs, sub->nblobs, NATIVE_BLOB);
        if (!b) continue; /* this subtask had no state */
        dirs[nd] = sl_malloc(1300);
        snprintf(dirs[nd], 1300, "%s/%d", root, q);
        ranges[nd] = sub->range;
        rc = fetch_subtask(chk_path, sub, b, dirs[nd], err, errlen);
        nd++;
    }
    if (rc == 0) {
        *out = nd ? sl_rocksdb_backend_open_native(max_parallelism, range, (const char *const *)dirs, ranges, nd, opts,
                                                   err, errlen)
                  : sl_rocksdb_backend_new(max_parallelism, range, opts, err, errlen);
        if (!*out) rc = SL_ESTATE;
    }
    sl_native_rm_rf(root);
    for (int i = 0; i < nd; i++) sl_free(dirs[i]);
    sl_free(dirs);
    sl_free(ranges);
    return rc;
}
