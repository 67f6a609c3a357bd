/*
 * fs_storage.c — checkpoint storage on a filesystem path (local disk or a
 * shared mount), and the storage functions that are built on the ops table
 * and so serve every implementation (see storage.h for the layout and the
 * completion and deletion protocols).
 *
 * Only plain POSIX calls: open/write/fsync/rename/mkdirat/unlinkat/
 * fdopendir.  Directories are fsync'ed after every change that must
 * survive a crash: creating a checkpoint directory, publishing _metadata,
 * removing _metadata before the files it references.
 */
#include "checkpoint/storage.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"

typedef struct fs_storage {
    sl_ckpt_storage_t base;
    char *job_dir; /* <base>/<job-id> */
} fs_storage_t;

#define FS(s) ((fs_storage_t *)(s))

/* ------------------------------------------------------------------ */
/* Small POSIX helpers.  Each returns 0 or a negative SL_E* with a message
 * naming the path. */

static int errno_rc(int e) { return e == ENOENT ? SL_ENOTFOUND : SL_EIO; }

static int fsync_dir(const char *path, char *err, size_t errlen) {
    int fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return sl_errf(err, errlen, errno_rc(errno), "%s: cannot open directory: %s", path, strerror(errno));
    int rc = 0;
    if (fsync(fd) != 0 && errno != EINVAL) /* EINVAL: a filesystem without directory fsync */
        rc = sl_errf(err, errlen, SL_EIO, "%s: cannot fsync directory: %s", path, strerror(errno));
    close(fd);
    return rc;
}

static int fsync_fd(int fd, const char *path, char *err, size_t errlen) {
    if (fsync(fd) != 0 && errno != EINVAL)
        return sl_errf(err, errlen, SL_EIO, "%s: cannot fsync directory: %s", path, strerror(errno));
    return 0;
}

/* mkdir -p, fsync'ing the parent of every directory it creates. */
static int mkdir_p(const char *path, char *err, size_t errlen) {
    char *p = sl_strdup(path);
    size_t n = strlen(p);
    while (n > 1 && p[n - 1] == '/') p[--n] = 0;
    int rc = 0;
    for (char *q = p + 1;; q++) {
        bool last = *q == 0;
        if (*q != '/' && !last) continue;
        char saved = *q;
        *q = 0;
        if (mkdir(p, 0755) == 0) {
            char *slash = strrchr(p, '/');
            if (slash && slash != p) {
                *slash = 0;
                rc = fsync_dir(p, err, errlen);
                *slash = '/';
            } else {
                rc = fsync_dir(slash ? "/" : ".", err, errlen);
            }
        } else if (errno != EEXIST) {
            rc = sl_errf(err, errlen, SL_EIO, "%s: cannot create directory: %s", p, strerror(errno));
        } else {
            struct stat st;
            if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode))
                rc = sl_errf(err, errlen, SL_EIO, "%s: exists and is not a directory", p);
        }
        *q = saved;
        if (rc || last) break;
    }
    sl_free(p);
    return rc;
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Removes everything inside the directory dfd (not dfd itself).  path is
 * for messages. */
static int remove_contents(int dfd, const char *path, char *err, size_t errlen) {
    int dup_fd = dup(dfd);
    if (dup_fd < 0) return sl_errf(err, errlen, SL_EIO, "%s: cannot dup: %s", path, strerror(errno));
    DIR *d = fdopendir(dup_fd);
    if (!d) {
        close(dup_fd);
        return sl_errf(err, errlen, SL_EIO, "%s: cannot list: %s", path, strerror(errno));
    }
    /* Collect first: removing while reading a directory is unspecified. */
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    errno = 0;
    while ((e = readdir(d))) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            names = sl_realloc(names, cap * sizeof *names);
        }
        names[n++] = sl_strdup(e->d_name);
        errno = 0;
    }
    int read_errno = errno;
    closedir(d);
    if (read_errno) {
        for (size_t i = 0; i < n; i++) sl_free(names[i]);
        sl_free(names);
        return sl_errf(err, errlen, SL_EIO, "%s: cannot list: %s", path, strerror(read_errno));
    }
    if (n > 1) qsort(names, n, sizeof *names, cmp_str);
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        int r = 0;
        struct stat st;
        if (fstatat(dfd, names[i], &st, AT_SYMLINK_NOFOLLOW) != 0) {
            if (errno != ENOENT)
                r = sl_errf(err, errlen, SL_EIO, "%s/%s: cannot stat: %s", path, names[i], strerror(errno));
        } else if (S_ISDIR(st.st_mode)) {
            int sub = openat(dfd, names[i], O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0) {
                r = sl_errf(err, errlen, SL_EIO, "%s/%s: cannot open directory: %s", path, names[i], strerror(errno));
            } else {
                char sp[PATH_MAX];
                snprintf(sp, sizeof sp, "%s/%s", path, names[i]);
                r = remove_contents(sub, sp, err, errlen);
                close(sub);
                if (!r && unlinkat(dfd, names[i], AT_REMOVEDIR) != 0 && errno != ENOENT)
                    r = sl_errf(err, errlen, SL_EIO, "%s/%s: cannot remove directory: %s", path, names[i],
                                strerror(errno));
            }
        } else if (unlinkat(dfd, names[i], 0) != 0 && errno != ENOENT) {
            r = sl_errf(err, errlen, SL_EIO, "%s/%s: cannot remove: %s", path, names[i], strerror(errno));
        }
        if (r && !rc) {
            rc = r;
            err = NULL; /* keep the first message; go on removing the rest */
            errlen = 0;
        }
    }
    for (size_t i = 0; i < n; i++) sl_free(names[i]);
    sl_free(names);
    return rc;
}

/* Parses "chk-<n>" (n >= 1, decimal, no sign or leading zero); -1 if not. */
static int64_t parse_chk_name(const char *name) {
    if (strncmp(name, "chk-", 4) != 0) return -1;
    const char *d = name + 4;
    if (*d < '1' || *d > '9') return -1;
    int64_t v = 0;
    for (; *d; d++) {
        if (*d < '0' || *d > '9') return -1;
        if (v > (INT64_MAX - (*d - '0')) / 10) return -1;
        v = v * 10 + (*d - '0');
    }
    return v;
}

/* ------------------------------------------------------------------ */
/* Paths. */

static int fs_location(sl_ckpt_storage_t *s, int64_t id, sl_ckpt_scope_t scope, const char *name, char *buf,
                       size_t cap) {
    int n;
    const char *sep = name ? "/" : "", *nm = name ? name : "";
    switch (scope) {
    case SL_CKPT_SCOPE_EXCLUSIVE: n = snprintf(buf, cap, "%s/chk-%" PRId64 "%s%s", FS(s)->job_dir, id, sep, nm); break;
    case SL_CKPT_SCOPE_SHARED: n = snprintf(buf, cap, "%s/shared%s%s", FS(s)->job_dir, sep, nm); break;
    case SL_CKPT_SCOPE_TASKOWNED: n = snprintf(buf, cap, "%s/taskowned%s%s", FS(s)->job_dir, sep, nm); break;
    default: n = -1;
    }
    return n < 0 || (size_t)n >= cap ? SL_EINVAL : 0;
}

/* Path of chk-<id> (name NULL) or a file in it, into buf (PATH_MAX). */
static int chk_path(sl_ckpt_storage_t *s, int64_t id, const char *name, char *buf, char *err, size_t errlen) {
    if (id < 1)
        return sl_errf(err, errlen, SL_EINVAL, "%s: checkpoint id %" PRId64 " (ids start at 1)", FS(s)->job_dir, id);
    if (fs_location(s, id, SL_CKPT_SCOPE_EXCLUSIVE, name, buf, PATH_MAX))
        return sl_errf(err, errlen, SL_EINVAL, "%s: path of checkpoint %" PRId64 " too long", FS(s)->job_dir, id);
    return 0;
}

/* 1 if chk-<id>/_metadata exists, 0 if not, < 0 on error. */
static int has_metadata(sl_ckpt_storage_t *s, int64_t id, char *err, size_t errlen) {
    char p[PATH_MAX];
    int rc = chk_path(s, id, SL_CKPT_METADATA_NAME, p, err, errlen);
    if (rc) return rc;
    struct stat st;
    if (lstat(p, &st) == 0) return 1;
    if (errno == ENOENT || errno == ENOTDIR) return 0;
    return sl_errf(err, errlen, SL_EIO, "%s: cannot stat: %s", p, strerror(errno));
}

static int file_path(sl_ckpt_storage_t *s, int64_t id, sl_ckpt_scope_t scope, const char *name, char *buf,
                     char *err, size_t errlen) {
    if (!sl_ckpt_valid_file_name(name))
        return sl_errf(err, errlen, SL_EINVAL, "%s: '%s' is not a plain file name", FS(s)->job_dir,
                       name ? name : "(null)");
    if (scope == SL_CKPT_SCOPE_EXCLUSIVE) {
        if (strncmp(name, SL_CKPT_METADATA_NAME, strlen(SL_CKPT_METADATA_NAME)) == 0)
            return sl_errf(err, errlen, SL_EINVAL, "%s: file name '%s' is reserved for the checkpoint's metadata",
                           FS(s)->job_dir, name);
        return chk_path(s, id, name, buf, err, errlen);
    }
    if (scope != SL_CKPT_SCOPE_SHARED && scope != SL_CKPT_SCOPE_TASKOWNED)
        return sl_errf(err, errlen, SL_EINVAL, "%s: unknown scope %d", FS(s)->job_dir, (int)scope);
    if (fs_location(s, id, scope, name, buf, PATH_MAX))
        return sl_errf(err, errlen, SL_EINVAL, "%s: path of '%s' too long", FS(s)->job_dir, name);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Ops. */

static int fs_open_output(sl_ckpt_storage_t *s, int64_t id, sl_ckpt_scope_t scope, const char *name,
                          sl_ckpt_out_t **out, char *err, size_t errlen) {
    char p[PATH_MAX];
    *out = NULL;
    int rc = file_path(s, id, scope, name, p, err, errlen);
    if (rc) return rc;
    rc = sl_ckpt_out_open_file(p, true, out, err, errlen);
    if (rc == SL_ENOTFOUND)
        return sl_errf(err, errlen, SL_ENOTFOUND, "%s: cannot create: the checkpoint directory does not exist "
                       "(not created, or aborted)", p);
    return rc;
}

static int fs_open_input(sl_ckpt_storage_t *s, int64_t id, sl_ckpt_scope_t scope, const char *name,
                         sl_ckpt_in_t **in, char *err, size_t errlen) {
    char p[PATH_MAX];
    *in = NULL;
    int rc = file_path(s, id, scope, name, p, err, errlen);
    if (rc) return rc;
    return sl_ckpt_in_open_file(p, in, err, errlen);
}

/* Removes chk-<id>: _metadata first (durably), then its contents, then the
 * directory itself. */
static int remove_checkpoint_dir(sl_ckpt_storage_t *s, int64_t id, char *err, size_t errlen) {
    char p[PATH_MAX];
    int rc = chk_path(s, id, NULL, p, err, errlen);
    if (rc) return rc;
    int dfd = open(p, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) {
        int e = errno;
        if (e == ENOENT) return sl_errf(err, errlen, SL_ENOTFOUND, "%s: no such checkpoint directory", p);
        return sl_errf(err, errlen, SL_EIO, "%s: cannot open directory: %s", p, strerror(e));
    }
    if (unlinkat(dfd, SL_CKPT_METADATA_NAME, 0) == 0) {
        rc = fsync_fd(dfd, p, err, errlen);
    } else if (errno != ENOENT) {
        rc = sl_errf(err, errlen, SL_EIO, "%s/%s: cannot remove: %s", p, SL_CKPT_METADATA_NAME, strerror(errno));
    }
    if (!rc) rc = remove_contents(dfd, p, err, errlen);
    close(dfd);
    if (rc) return rc;
    if (rmdir(p) != 0 && errno != ENOENT)
        return sl_errf(err, errlen, SL_EIO, "%s: cannot remove directory: %s", p, strerror(errno));
    return fsync_dir(FS(s)->job_dir, err, errlen);
}

static int fs_create_checkpoint(sl_ckpt_storage_t *s, int64_t id, char *err, size_t errlen) {
    char p[PATH_MAX];
    int rc = chk_path(s, id, NULL, p, err, errlen);
    if (rc) return rc;
    if (mkdir(p, 0755) != 0) {
        if (errno != EEXIST) return sl_errf(err, errlen, SL_EIO, "%s: cannot create directory: %s", p, strerror(errno));
        int has = has_metadata(s, id, err, errlen);
        if (has < 0) return has;
        if (has) return sl_errf(err, errlen, SL_EINVAL, "%s: checkpoint %" PRId64 " exists and is complete", p, id);
        /* A leftover of an attempt that died: start clean. */
        if ((rc = remove_checkpoint_dir(s, id, err, errlen))) return rc;
        if (mkdir(p, 0755) != 0)
            return sl_errf(err, errlen, SL_EIO, "%s: cannot create directory: %s", p, strerror(errno));
    }
    return fsync_dir(FS(s)->job_dir, err, errlen);
}

static int fs_commit(sl_ckpt_storage_t *s, const sl_ckpt_metadata_t *md, char *err, size_t errlen) {
    char dir[PATH_MAX], tmp[PATH_MAX], fin[PATH_MAX], loc[PATH_MAX];
    int64_t id = md->checkpoint_id;
    int rc;
    if ((rc = chk_path(s, id, NULL, dir, err, errlen)) ||
        (rc = chk_path(s, id, SL_CKPT_METADATA_NAME, fin, err, errlen)) ||
        (rc = chk_path(s, id, SL_CKPT_METADATA_TMP_NAME, tmp, err, errlen)))
        return rc;
    if (strcmp(md->job_id ? md->job_id : "", s->job_id) != 0)
        return sl_errf(err, errlen, SL_EINVAL, "%s: metadata of job '%s' cannot be committed to job '%s'", fin,
                       md->job_id ? md->job_id : "", s->job_id);
    if (md->type != SL_CKPT_CHECKPOINT)
        return sl_errf(err, errlen, SL_EINVAL, "%s: a savepoint is not committed as a checkpoint", fin);
    struct stat st;
    if (stat(dir, &st) != 0 || !S_ISDIR(st.st_mode))
        return sl_errf(err, errlen, SL_ENOTFOUND, "%s: checkpoint directory missing (not created, or aborted)", dir);
    int has = has_metadata(s, id, err, errlen);
    if (has < 0) return has;
    if (has) return sl_errf(err, errlen, SL_EINVAL, "%s: checkpoint %" PRId64 " is already complete", fin, id);
    char e[400];
    if ((rc = sl_ckpt_metadata_validate(md, e, sizeof e)))
        return sl_errf(err, errlen, rc, "%s: refusing to commit invalid checkpoint metadata: %s", fin, e);

    /* The names of the state files must be durable before _metadata. */
    if ((rc = fsync_dir(dir, err, errlen))) return rc;
    for (int sc = SL_CKPT_SCOPE_SHARED; sc <= SL_CKPT_SCOPE_TASKOWNED; sc++) {
        fs_location(s, id, (sl_ckpt_scope_t)sc, NULL, loc, sizeof loc);
        if ((rc = fsync_dir(loc, err, errlen))) return rc;
    }

    sl_ckpt_out_t *out;
    if ((rc = sl_ckpt_out_open_file(tmp, true, &out, err, errlen))) return rc;
    if ((rc = sl_ckpt_metadata_write(md, out, err, errlen))) return rc; /* the stream removed tmp */
    if (rename(tmp, fin) != 0) {
        rc = sl_errf(err, errlen, SL_EIO, "%s: cannot rename to %s: %s", tmp, SL_CKPT_METADATA_NAME, strerror(errno));
        unlink(tmp);
        return rc;
    }
    return fsync_dir(dir, err, errlen);
}

static int fs_load(sl_ckpt_storage_t *s, int64_t id, sl_ckpt_metadata_t **mdp, char *err, size_t errlen) {
    char dir[PATH_MAX], p[PATH_MAX];
    *mdp = NULL;
    int rc;
    if ((rc = chk_path(s, id, NULL, dir, err, errlen)) || (rc = chk_path(s, id, SL_CKPT_METADATA_NAME, p, err, errlen)))
        return rc;
    struct stat st;
    if (stat(dir, &st) != 0)
        return sl_errf(err, errlen, errno_rc(errno), "%s: checkpoint %" PRId64 " not found: %s", dir, id,
                       strerror(errno));
    sl_ckpt_in_t *in;
    rc = sl_ckpt_in_open_file(p, &in, err, errlen);
    if (rc == SL_ENOTFOUND)
        return sl_errf(err, errlen, SL_ENOTFOUND, "%s: missing: checkpoint %" PRId64 " is incomplete (never committed)",
                       p, id);
    if (rc) return rc;
    sl_ckpt_metadata_t *md;
    if ((rc = sl_ckpt_metadata_read(in, &md, err, errlen))) return rc;
    if (md->checkpoint_id != id)
        rc = sl_errf(err, errlen, SL_EFORMAT, "%s: describes checkpoint %" PRId64 " but lies in chk-%" PRId64, p,
                     md->checkpoint_id, id);
    else if (strcmp(md->job_id, s->job_id) != 0)
        rc = sl_errf(err, errlen, SL_EFORMAT, "%s: belongs to job '%s', not '%s'", p, md->job_id, s->job_id);
    else if (md->type != SL_CKPT_CHECKPOINT)
        rc = sl_errf(err, errlen, SL_EFORMAT, "%s: is a savepoint's metadata, not a checkpoint's", p);
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

static int fs_list(sl_ckpt_storage_t *s, sl_ckpt_entry_t **entries, int *np, char *err, size_t errlen) {
    *entries = NULL;
    *np = 0;
    const char *jd = FS(s)->job_dir;
    DIR *d = opendir(jd);
    if (!d) return sl_errf(err, errlen, errno_rc(errno), "%s: cannot list: %s", jd, strerror(errno));
    int dfd = dirfd(d);
    sl_ckpt_entry_t *v = NULL;
    int n = 0, cap = 0, rc = 0;
    struct dirent *e;
    for (errno = 0; (e = readdir(d)); errno = 0) {
        int64_t id = parse_chk_name(e->d_name);
        if (id < 1) continue;
        struct stat st;
        if (fstatat(dfd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode)) continue;
        char mp[NAME_MAX + 16];
        snprintf(mp, sizeof mp, "%s/%s", e->d_name, SL_CKPT_METADATA_NAME);
        bool complete = fstatat(dfd, mp, &st, AT_SYMLINK_NOFOLLOW) == 0;
        if (!complete && errno != ENOENT) {
            rc = sl_errf(err, errlen, SL_EIO, "%s/%s: cannot stat: %s", jd, mp, strerror(errno));
            break;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            v = sl_realloc(v, (size_t)cap * sizeof *v);
        }
        v[n++] = (sl_ckpt_entry_t){id, complete};
    }
    if (!rc && errno) rc = sl_errf(err, errlen, SL_EIO, "%s: cannot list: %s", jd, strerror(errno));
    closedir(d);
    if (rc) {
        sl_free(v);
        return rc;
    }
    if (n > 1) qsort(v, (size_t)n, sizeof *v, cmp_entry);
    *entries = v;
    *np = n;
    return 0;
}

static int fs_discard(sl_ckpt_storage_t *s, int64_t id, char *err, size_t errlen) {
    return remove_checkpoint_dir(s, id, err, errlen);
}

static int fs_abort_pending(sl_ckpt_storage_t *s, int64_t id, char *err, size_t errlen) {
    int has = has_metadata(s, id, err, errlen);
    if (has < 0) return has;
    if (has) {
        char p[PATH_MAX];
        chk_path(s, id, NULL, p, err, errlen);
        return sl_errf(err, errlen, SL_EINVAL, "%s: checkpoint %" PRId64 " is complete; discard it instead of aborting",
                       p, id);
    }
    return remove_checkpoint_dir(s, id, err, errlen);
}

static int fs_remove_file(sl_ckpt_storage_t *s, sl_ckpt_scope_t scope, const char *name, char *err, size_t errlen) {
    if (scope == SL_CKPT_SCOPE_EXCLUSIVE || !sl_ckpt_valid_file_name(name))
        return sl_errf(err, errlen, SL_EINVAL, "remove_file: '%s' is not a shared or task-owned file name", name);
    char p[PATH_MAX];
    int rc = s->ops->location(s, 0, scope, name, p, sizeof p);
    if (rc) return sl_errf(err, errlen, rc, "remove_file: path of '%s' too long", name);
    if (unlink(p) != 0)
        return errno == ENOENT ? SL_ENOTFOUND : sl_errf(err, errlen, SL_EIO, "%s: cannot remove: %s", p, strerror(errno));
    return 0;
}

static int fs_list_files(sl_ckpt_storage_t *s, sl_ckpt_scope_t scope, char ***names, int *np, char *err,
                         size_t errlen) {
    *names = NULL;
    *np = 0;
    if (scope == SL_CKPT_SCOPE_EXCLUSIVE) return sl_errf(err, errlen, SL_EINVAL, "list_files: not for a checkpoint's own files");
    char p[PATH_MAX];
    if (s->ops->location(s, 0, scope, NULL, p, sizeof p)) return sl_errf(err, errlen, SL_EINVAL, "list_files: path too long");
    DIR *d = opendir(p);
    if (!d) return errno == ENOENT ? 0 : sl_errf(err, errlen, SL_EIO, "%s: cannot list: %s", p, strerror(errno));
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        *names = sl_realloc(*names, (size_t)(*np + 1) * sizeof **names);
        (*names)[(*np)++] = sl_strdup(e->d_name);
    }
    closedir(d);
    return 0;
}

static int fs_discard_all(sl_ckpt_storage_t *s, char *err, size_t errlen) {
    sl_ckpt_entry_t *v;
    int n, rc = fs_list(s, &v, &n, err, errlen);
    if (rc) return rc;
    /* First make every checkpoint incomplete, so no crash can leave a
     * _metadata whose files are gone. */
    for (int i = 0; i < n && !rc; i++) {
        if (!v[i].complete) continue;
        char p[PATH_MAX], dir[PATH_MAX];
        if ((rc = chk_path(s, v[i].id, SL_CKPT_METADATA_NAME, p, err, errlen)) ||
            (rc = chk_path(s, v[i].id, NULL, dir, err, errlen)))
            break;
        if (unlink(p) != 0 && errno != ENOENT)
            rc = sl_errf(err, errlen, SL_EIO, "%s: cannot remove: %s", p, strerror(errno));
        else
            rc = fsync_dir(dir, err, errlen);
    }
    sl_free(v);
    if (rc) return rc;
    const char *jd = FS(s)->job_dir;
    int dfd = open(jd, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) return sl_errf(err, errlen, errno_rc(errno), "%s: cannot open directory: %s", jd, strerror(errno));
    rc = remove_contents(dfd, jd, err, errlen);
    close(dfd);
    if (rc) return rc;
    if (rmdir(jd) != 0) return sl_errf(err, errlen, SL_EIO, "%s: cannot remove directory: %s", jd, strerror(errno));
    char parent[PATH_MAX];
    snprintf(parent, sizeof parent, "%s", jd);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = 0;
        return fsync_dir(parent, err, errlen);
    }
    return fsync_dir(slash ? "/" : ".", err, errlen);
}

static void fs_destroy(sl_ckpt_storage_t *s) {
    if (!s) return;
    sl_free(FS(s)->job_dir);
    sl_free(s->job_id);
    sl_free(s);
}

/* Moves the files of directory from into the new directory to (another
 * filesystem: rename gives EXDEV), each copied and fsync'ed, then removes
 * from.  A savepoint's directory is flat. */
static int copy_dir(const char *from, const char *to, char *err, size_t errlen) {
    if (mkdir(to, 0755) != 0) return sl_errf(err, errlen, SL_EIO, "%s: cannot create directory: %s", to, strerror(errno));
    DIR *d = opendir(from);
    if (!d) return sl_errf(err, errlen, SL_EIO, "%s: cannot list: %s", from, strerror(errno));
    int rc = 0;
    struct dirent *e;
    char buf[1 << 16];
    while (rc == 0 && (e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        char a[PATH_MAX], b[PATH_MAX];
        if (snprintf(a, sizeof a, "%s/%s", from, e->d_name) >= (int)sizeof a ||
            snprintf(b, sizeof b, "%s/%s", to, e->d_name) >= (int)sizeof b) {
            rc = sl_errf(err, errlen, SL_EINVAL, "%s/%s: path too long", to, e->d_name);
            break;
        }
        int in = open(a, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
        if (in < 0) {
            rc = sl_errf(err, errlen, SL_EIO, "%s: cannot open: %s", a, strerror(errno));
            break;
        }
        int out = open(b, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
        if (out < 0) rc = sl_errf(err, errlen, SL_EIO, "%s: cannot create: %s", b, strerror(errno));
        for (ssize_t r; rc == 0 && (r = read(in, buf, sizeof buf)) != 0;) {
            if (r < 0) {
                if (errno == EINTR) continue;
                rc = sl_errf(err, errlen, SL_EIO, "%s: cannot read: %s", a, strerror(errno));
                break;
            }
            for (ssize_t w = 0; w < r && rc == 0;) {
                ssize_t k = write(out, buf + w, (size_t)(r - w));
                if (k < 0 && errno == EINTR) continue;
                if (k < 0) rc = sl_errf(err, errlen, SL_EIO, "%s: cannot write: %s", b, strerror(errno));
                else w += k;
            }
        }
        if (rc == 0 && fsync(out) != 0) rc = sl_errf(err, errlen, SL_EIO, "%s: cannot fsync: %s", b, strerror(errno));
        if (out >= 0) close(out);
        close(in);
    }
    closedir(d);
    if (rc == 0) rc = fsync_dir(to, err, errlen);
    if (rc) return rc;
    int dfd = open(from, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd >= 0) {
        remove_contents(dfd, from, err, errlen);
        close(dfd);
        rmdir(from);
    }
    return 0;
}

static int write_metadata_in(const char *dir, const sl_ckpt_metadata_t *md, char *err, size_t errlen) {
    char tmp[PATH_MAX], fin[PATH_MAX];
    if (snprintf(tmp, sizeof tmp, "%s/%s", dir, SL_CKPT_METADATA_TMP_NAME) >= (int)sizeof tmp ||
        snprintf(fin, sizeof fin, "%s/%s", dir, SL_CKPT_METADATA_NAME) >= (int)sizeof fin)
        return sl_errf(err, errlen, SL_EINVAL, "%s: path too long", dir);
    sl_ckpt_out_t *out;
    int rc;
    if ((rc = sl_ckpt_out_open_file(tmp, true, &out, err, errlen))) return rc;
    if ((rc = sl_ckpt_metadata_write(md, out, err, errlen))) return rc; /* the stream removed tmp */
    if (rename(tmp, fin) != 0) {
        rc = sl_errf(err, errlen, SL_EIO, "%s: cannot rename to %s: %s", tmp, SL_CKPT_METADATA_NAME, strerror(errno));
        unlink(tmp);
        return rc;
    }
    return fsync_dir(dir, err, errlen);
}

static int fs_commit_savepoint(sl_ckpt_storage_t *s, const sl_ckpt_metadata_t *md, const char *parent, char *location,
                               size_t cap, char *err, size_t errlen) {
    char dir[PATH_MAX], target[PATH_MAX];
    int rc;
    if (md->type != SL_CKPT_SAVEPOINT)
        return sl_errf(err, errlen, SL_EINVAL, "commit_savepoint: checkpoint %" PRId64 " is not a savepoint",
                       md->checkpoint_id);
    if (!parent || parent[0] != '/')
        return sl_errf(err, errlen, SL_EINVAL, "savepoint directory '%s' is not an absolute path", parent ? parent : "");
    char e[400];
    if ((rc = sl_ckpt_metadata_validate(md, e, sizeof e)))
        return sl_errf(err, errlen, rc, "refusing to write an invalid savepoint: %s", e);
    if ((rc = chk_path(s, md->checkpoint_id, NULL, dir, err, errlen))) return rc;
    if ((rc = mkdir_p(parent, err, errlen))) return rc;
    uint8_t rnd[6];
    if (getentropy(rnd, sizeof rnd) != 0) return sl_errf(err, errlen, SL_EIO, "no randomness for the savepoint's name");
    size_t pl = strlen(parent);
    while (pl > 1 && parent[pl - 1] == '/') pl--;
    int n = snprintf(target, sizeof target, "%.*s/savepoint-%.6s-%02x%02x%02x%02x%02x%02x", (int)pl, parent, s->job_id,
                     rnd[0], rnd[1], rnd[2], rnd[3], rnd[4], rnd[5]);
    if (n < 0 || (size_t)n >= sizeof target || (size_t)n >= cap)
        return sl_errf(err, errlen, SL_EINVAL, "%s: savepoint path too long", parent);
    if ((rc = fsync_dir(dir, err, errlen))) return rc;
    if (rename(dir, target) != 0) {
        if (errno != EXDEV) return sl_errf(err, errlen, SL_EIO, "%s: cannot move to %s: %s", dir, target, strerror(errno));
        if ((rc = copy_dir(dir, target, err, errlen))) return rc;
    }
    char pdir[PATH_MAX];
    snprintf(pdir, sizeof pdir, "%.*s", (int)pl, parent);
    if ((rc = fsync_dir(pdir, err, errlen)) || (rc = fsync_dir(FS(s)->job_dir, err, errlen))) return rc;
    sl_fault_point("savepoint.moved-before-metadata");
    if ((rc = write_metadata_in(target, md, err, errlen))) return rc;
    snprintf(location, cap, "%s", target);
    return 0;
}

int sl_ckpt_savepoint_dispose(const char *path, char *err, size_t errlen) {
    char mp[PATH_MAX];
    if (!path || !path[0]) return sl_errf(err, errlen, SL_EINVAL, "dispose: no savepoint path given");
    if (strncmp(path, "s3://", 5) == 0) return sl_ckpt_s3_savepoint_dispose(path, err, errlen);
    snprintf(mp, sizeof mp, "%s/%s", path, SL_CKPT_METADATA_NAME);
    sl_ckpt_metadata_t *md = NULL;
    int rc = sl_ckpt_metadata_read_file(mp, &md, err, errlen);
    if (rc < 0) return rc;
    bool sp = md->type == SL_CKPT_SAVEPOINT;
    sl_ckpt_metadata_free(md);
    if (!sp) return sl_errf(err, errlen, SL_EINVAL, "%s: is a checkpoint's metadata, not a savepoint's: not disposed", mp);
    int dfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0) return sl_errf(err, errlen, errno_rc(errno), "%s: cannot open directory: %s", path, strerror(errno));
    if (unlinkat(dfd, SL_CKPT_METADATA_NAME, 0) != 0)
        rc = sl_errf(err, errlen, SL_EIO, "%s: cannot remove: %s", mp, strerror(errno));
    if (!rc) rc = fsync_fd(dfd, path, err, errlen);
    if (!rc) rc = remove_contents(dfd, path, err, errlen);
    close(dfd);
    if (!rc && rmdir(path) != 0) rc = sl_errf(err, errlen, SL_EIO, "%s: cannot remove directory: %s", path, strerror(errno));
    return rc;
}

static const sl_ckpt_storage_ops_t fs_ops = {
    .name = "filesystem",
    .create_checkpoint = fs_create_checkpoint,
    .location = fs_location,
    .open_output = fs_open_output,
    .open_input = fs_open_input,
    .commit = fs_commit,
    .load = fs_load,
    .list = fs_list,
    .discard = fs_discard,
    .abort_pending = fs_abort_pending,
    .discard_all = fs_discard_all,
    .remove_file = fs_remove_file,
    .list_files = fs_list_files,
    .commit_savepoint = fs_commit_savepoint,
    .destroy = fs_destroy,
};

int sl_ckpt_storage_fs_open(const char *base_dir, const char *job_id, sl_ckpt_storage_t **sp, char *err,
                            size_t errlen) {
    *sp = NULL;
    if (!base_dir || !base_dir[0]) return sl_errf(err, errlen, SL_EINVAL, "checkpoint storage: no directory given");
    if (!sl_ckpt_valid_file_name(job_id))
        return sl_errf(err, errlen, SL_EINVAL, "%s: job id '%s' is not a plain file name", base_dir,
                       job_id ? job_id : "(null)");
    char jd[PATH_MAX], sub[PATH_MAX];
    size_t bl = strlen(base_dir);
    while (bl > 1 && base_dir[bl - 1] == '/') bl--;
    int n = snprintf(jd, sizeof jd, "%.*s/%s", (int)bl, base_dir, job_id);
    if (n < 0 || (size_t)n + 32 >= sizeof jd) return sl_errf(err, errlen, SL_EINVAL, "%s: path too long", base_dir);
    int rc = mkdir_p(jd, err, errlen);
    static const char *const subs[] = {"shared", "taskowned"};
    for (size_t i = 0; i < SL_ARRAY_LEN(subs) && !rc; i++) {
        if (snprintf(sub, sizeof sub, "%s/%s", jd, subs[i]) >= (int)sizeof sub)
            return sl_errf(err, errlen, SL_EINVAL, "%s: path too long", jd);
        rc = mkdir_p(sub, err, errlen);
    }
    if (rc) return rc;
    fs_storage_t *s = sl_calloc(1, sizeof *s);
    s->base.ops = &fs_ops;
    s->base.job_id = sl_strdup(job_id);
    s->job_dir = sl_strdup(jd);
    *sp = &s->base;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Generic functions over the ops. */

int sl_ckpt_storage_list_completed(sl_ckpt_storage_t *s, int64_t **ids, int *np, char *err, size_t errlen) {
    sl_ckpt_entry_t *v;
    int n;
    *ids = NULL;
    *np = 0;
    int rc = s->ops->list(s, &v, &n, err, errlen);
    if (rc) return rc;
    int64_t *out = sl_malloc((size_t)n * sizeof *out + 1);
    int k = 0;
    for (int i = 0; i < n; i++)
        if (v[i].complete) out[k++] = v[i].id;
    sl_free(v);
    *ids = out;
    *np = k;
    return 0;
}

int sl_ckpt_storage_latest_complete_id(sl_ckpt_storage_t *s, int64_t *id, char *err, size_t errlen) {
    int64_t *ids;
    int n;
    *id = 0;
    int rc = sl_ckpt_storage_list_completed(s, &ids, &n, err, errlen);
    if (rc) return rc;
    if (n > 0) *id = ids[n - 1];
    sl_free(ids);
    if (n == 0) {
        char loc[PATH_MAX];
        s->ops->location(s, 0, SL_CKPT_SCOPE_SHARED, NULL, loc, sizeof loc);
        char *slash = strrchr(loc, '/'); /* the job's directory: drop "/shared" */
        if (slash) *slash = 0;
        return sl_errf(err, errlen, SL_ENOTFOUND, "%s: no completed checkpoint", loc);
    }
    return 0;
}

int sl_ckpt_storage_load_latest(sl_ckpt_storage_t *s, sl_ckpt_metadata_t **md, char *err, size_t errlen) {
    int64_t id;
    *md = NULL;
    int rc = sl_ckpt_storage_latest_complete_id(s, &id, err, errlen);
    if (rc) return rc;
    /* No fallback to an older checkpoint when this one is damaged (see
     * storage.h). */
    return s->ops->load(s, id, md, err, errlen);
}

/* Appends the shared-scope file names md refers to (copies). */
static void collect_shared(const sl_ckpt_metadata_t *md, char ***v, int *n) {
    for (int o = 0; o < md->noperators; o++)
        for (int q = 0; q < md->operators[o].parallelism; q++) {
            const sl_ckpt_subtask_t *st = &md->operators[o].subtasks[q];
            for (int h = 0; h < st->nhandles; h++) {
                if (st->handles[h].scope != SL_CKPT_SCOPE_SHARED) continue;
                *v = sl_realloc(*v, (size_t)(*n + 1) * sizeof **v);
                (*v)[(*n)++] = sl_strdup(st->handles[h].path);
            }
        }
}

int sl_ckpt_storage_retain(sl_ckpt_storage_t *s, int num_retained, char *err, size_t errlen) {
    if (num_retained < 1)
        return sl_errf(err, errlen, SL_EINVAL, "checkpoint retention: num-retained %d must be at least 1",
                       num_retained);
    int64_t *ids;
    int n;
    int rc = sl_ckpt_storage_list_completed(s, &ids, &n, err, errlen);
    if (rc) return rc;
    /* shared files the discarded checkpoints refer to */
    char **gone = NULL;
    int ngone = 0;
    for (int i = 0; i < n - num_retained; i++) {
        sl_ckpt_metadata_t *md = NULL;
        if (s->ops->load(s, ids[i], &md, NULL, 0) == 0) collect_shared(md, &gone, &ngone);
        sl_ckpt_metadata_free(md);
        int r = s->ops->discard(s, ids[i], rc ? NULL : err, rc ? 0 : errlen);
        if (r && !rc) rc = r;
    }
    if (ngone && s->ops->remove_file) {
        char **keep = NULL;
        int nkeep = 0;
        bool complete_view = true;
        for (int i = n - num_retained < 0 ? 0 : n - num_retained; i < n; i++) {
            sl_ckpt_metadata_t *md = NULL;
            if (s->ops->load(s, ids[i], &md, NULL, 0) == 0)
                collect_shared(md, &keep, &nkeep);
            else
                complete_view = false; /* cannot tell what it needs: delete nothing */
            sl_ckpt_metadata_free(md);
        }
        for (int i = 0; i < ngone && complete_view; i++) {
            bool needed = false;
            for (int j = 0; j < nkeep && !needed; j++) needed = strcmp(gone[i], keep[j]) == 0;
            if (needed) continue;
            int r = s->ops->remove_file(s, SL_CKPT_SCOPE_SHARED, gone[i], NULL, 0);
            if (r && r != SL_ENOTFOUND && !rc) rc = sl_errf(err, errlen, r, "cannot delete shared file %s", gone[i]);
        }
        for (int j = 0; j < nkeep; j++) sl_free(keep[j]);
        sl_free(keep);
    }
    for (int i = 0; i < ngone; i++) sl_free(gone[i]);
    sl_free(gone);
    sl_free(ids);
    return rc;
}

int sl_ckpt_storage_gc_shared(sl_ckpt_storage_t *s, char *err, size_t errlen) {
    if (!s->ops->list_files || !s->ops->remove_file) return 0;
    char **files;
    int nf;
    int rc = s->ops->list_files(s, SL_CKPT_SCOPE_SHARED, &files, &nf, err, errlen);
    if (rc || !nf) return rc;
    int64_t *ids = NULL;
    int n = 0;
    char **keep = NULL;
    int nkeep = 0;
    rc = sl_ckpt_storage_list_completed(s, &ids, &n, err, errlen);
    for (int i = 0; i < n && rc == 0; i++) {
        sl_ckpt_metadata_t *md = NULL;
        rc = s->ops->load(s, ids[i], &md, err, errlen);
        if (rc == 0) collect_shared(md, &keep, &nkeep);
        sl_ckpt_metadata_free(md);
    }
    for (int i = 0; i < nf && rc == 0; i++) {
        bool needed = false;
        for (int j = 0; j < nkeep && !needed; j++) needed = strcmp(files[i], keep[j]) == 0;
        if (!needed) s->ops->remove_file(s, SL_CKPT_SCOPE_SHARED, files[i], NULL, 0);
    }
    for (int i = 0; i < nf; i++) sl_free(files[i]);
    sl_free(files);
    for (int j = 0; j < nkeep; j++) sl_free(keep[j]);
    sl_free(keep);
    sl_free(ids);
    return rc;
}

int sl_ckpt_storage_abort_all_pending(sl_ckpt_storage_t *s, char *err, size_t errlen) {
    sl_ckpt_entry_t *v;
    int n;
    int rc = s->ops->list(s, &v, &n, err, errlen);
    if (rc) return rc;
    for (int i = 0; i < n; i++) {
        if (v[i].complete) continue;
        int r = s->ops->abort_pending(s, v[i].id, rc ? NULL : err, rc ? 0 : errlen);
        if (r && r != SL_ENOTFOUND && !rc) rc = r;
    }
    sl_free(v);
    return rc;
}

int sl_ckpt_storage_open_state(sl_ckpt_storage_t *s, int64_t id, const sl_ckpt_state_handle_t *h, int flags,
                               sl_state_file_reader_t **rp, char *err, size_t errlen) {
    *rp = NULL;
    sl_ckpt_in_t *in;
    int rc = s->ops->open_input(s, id, (sl_ckpt_scope_t)h->scope, h->path, &in, err, errlen);
    if (rc) return rc;
    sl_state_file_reader_t *r;
    if ((rc = sl_sf_reader_new(in, h->kind, flags, &r, err, errlen))) return rc;
    const char *name = sl_sf_reader_name(r);
    if (sl_sf_reader_size(r) != h->size || sl_sf_reader_checksum(r) != h->checksum) {
        rc = sl_errf(err, errlen, SL_EFORMAT,
                     "%s: not the file the checkpoint's metadata describes (size %" PRIu64 ", checksum %016" PRIx64
                     "; expected size %" PRIu64 ", checksum %016" PRIx64 "): replaced or damaged",
                     name, sl_sf_reader_size(r), sl_sf_reader_checksum(r), h->size, h->checksum);
    } else if (sl_sf_reader_section_count(r) != h->nsections) {
        rc = sl_errf(err, errlen, SL_EFORMAT, "%s: has %d sections, the checkpoint's metadata lists %d", name,
                     sl_sf_reader_section_count(r), h->nsections);
    } else {
        for (int i = 0; i < h->nsections && !rc; i++) {
            const sl_sf_section_t *a = sl_sf_reader_section_at(r, i), *b = &h->sections[i];
            if (a->id != b->id || a->offset != b->offset || a->length != b->length || a->checksum != b->checksum)
                rc = sl_errf(err, errlen, SL_EFORMAT,
                             "%s: section %" PRIu64 " differs from the checkpoint's metadata", name, b->id);
        }
    }
    if (rc) {
        sl_sf_reader_close(r);
        return rc;
    }
    *rp = r;
    return 0;
}
