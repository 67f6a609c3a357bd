/*
 * eo_file_sink.c — the exactly-once file sink: two-phase commit on
 * checkpoints (Flink's FileSink with its in-progress / pending / finished
 * part files).
 *
 *   write        append to  dir/.part-<subtask>-<attempt>-<txn>.inprogress
 *   pre_commit n flush, fsync, rename to  dir/.part-<subtask>-<n>-<attempt>.pending,
 *                fsync dir; the next record opens a new in-progress file
 *   commit n     every pending file of this writer with checkpoint <= n is
 *                renamed to  dir/part-<subtask>-<n>  (visible), fsync dir;
 *                a part file that already exists was committed before: the
 *                pending copy is dropped (idempotent)
 *   finish       end of a bounded input: with checkpointing it runs after
 *                the final checkpoint (FLIP-147) committed everything;
 *                without, pending files and the rest are committed here
 *
 * Hidden names start with a dot, so readers of dir see only committed,
 * complete part files.  `attempt` is unique per run of the job, so files of
 * an earlier run are never mistaken for this run's; recover (run before a
 * job's subtasks open, by every process that runs some of them) commits
 * the earlier runs' pending files that the restored checkpoint covers, and
 * each writer, when it opens, deletes the rest of its subtask's hidden
 * files (subtask 0 also those of subtasks beyond the parallelism: a
 * restore at a lower one).  Recover deletes nothing: on a cluster the
 * TaskManagers deploy one run at their own pace, and a late one's recover
 * must not remove files that another one's subtasks of the same run have
 * already written.  Transactions without records produce no file.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"
#include "formats/format.h"

#define EO_BUF (256 * 1024)

typedef struct eo_ctx {
    char *dir;
    sl_format_t fmt;
} eo_ctx_t;

typedef struct eo_pending {
    int64_t ckpt;
    char *path;
} eo_pending_t;

typedef struct eo_writer {
    const eo_ctx_t *ctx;
    int subtask;
    uint64_t attempt;
    int64_t txn;
    int fd;            /* -1: no open transaction */
    char *inprogress;
    int64_t records;   /* in the open transaction */
    sl_buf_t buf;
    eo_pending_t *pending;
    int npending;
} eo_writer_t;

static int fsync_dir(const char *dir, char *err, size_t errlen) {
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return sl_errf(err, errlen, SL_EIO, "exactly-once file sink: cannot open '%s': %s", dir, strerror(errno));
    int rc = fsync(fd);
    int e = errno;
    close(fd);
    if (rc != 0 && e != EINVAL)
        return sl_errf(err, errlen, SL_EIO, "exactly-once file sink: cannot sync '%s': %s", dir, strerror(e));
    return 0;
}

static char *path_of(const eo_writer_t *w, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static char *path_of(const eo_writer_t *w, const char *fmt, ...) {
    char name[256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(name, sizeof name, fmt, ap);
    va_end(ap);
    size_t n = strlen(w->ctx->dir) + strlen(name) + 2;
    char *p = sl_malloc(n);
    snprintf(p, n, "%s/%s", w->ctx->dir, name);
    return p;
}

static int flush_buf(eo_writer_t *w, char *err, size_t errlen) {
    int e = sl_write_all(w->fd, w->buf.p, w->buf.len);
    w->buf.len = 0;
    if (e)
        return sl_errf(err, errlen, SL_EIO, "exactly-once file sink: cannot write '%s': %s", w->inprogress, strerror(e));
    return 0;
}

static int begin_txn(eo_writer_t *w, char *err, size_t errlen) {
    w->inprogress = path_of(w, ".part-%d-%016" PRIx64 "-%" PRId64 ".inprogress", w->subtask, w->attempt, w->txn++);
    w->fd = open(w->inprogress, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        int rc = sl_errf(err, errlen, SL_EIO, "exactly-once file sink: cannot create '%s': %s", w->inprogress,
                         strerror(errno));
        sl_free(w->inprogress);
        w->inprogress = NULL;
        return rc;
    }
    w->records = 0;
    return 0;
}

/* Closes the open transaction into `final` (durably).  No-op without one. */
static int close_txn(eo_writer_t *w, const char *final, char *err, size_t errlen) {
    if (w->fd < 0) return 0;
    int rc = flush_buf(w, err, errlen);
    if (!rc && fsync(w->fd) != 0)
        rc = sl_errf(err, errlen, SL_EIO, "exactly-once file sink: cannot sync '%s': %s", w->inprogress, strerror(errno));
    close(w->fd);
    w->fd = -1;
    if (!rc && rename(w->inprogress, final) != 0)
        rc = sl_errf(err, errlen, SL_EIO, "exactly-once file sink: cannot rename '%s' to '%s': %s", w->inprogress,
                     final, strerror(errno));
    sl_free(w->inprogress);
    w->inprogress = NULL;
    return rc;
}

/* What earlier runs left of this subtask (and, for subtask 0, of subtasks
 * >= parallelism): in-progress files and pending files that recover did
 * not commit (newer than the restored checkpoint).  This run's recover has
 * run in this process before any subtask here opens, so every pending file
 * the restored checkpoint covers is committed by now. */
static int drop_leftovers(const eo_ctx_t *ctx, int subtask, int parallelism, char *err, size_t errlen) {
    DIR *d = opendir(ctx->dir);
    if (!d) return errno == ENOENT ? 0 : sl_errf(err, errlen, SL_EIO, "exactly-once file sink: cannot list '%s': %s",
                                                 ctx->dir, strerror(errno));
    int rc = 0, sub;
    struct dirent *e;
    while ((e = readdir(d)) && !rc) {
        if (sscanf(e->d_name, ".part-%d-", &sub) != 1 || (sub != subtask && !(subtask == 0 && sub >= parallelism)))
            continue;
        size_t n = strlen(ctx->dir) + strlen(e->d_name) + 2;
        char *path = sl_malloc(n);
        snprintf(path, n, "%s/%s", ctx->dir, e->d_name);
        if (unlink(path) != 0 && errno != ENOENT)
            rc = sl_errf(err, errlen, SL_EIO, "exactly-once file sink: cannot remove '%s': %s", path, strerror(errno));
        sl_free(path);
    }
    closedir(d);
    return rc;
}

static int eo_open(void *vctx, int subtask, int parallelism, const sl_schema_t *schema, void **writer, char *err,
                   size_t errlen) {
    const eo_ctx_t *ctx = vctx;
    if (mkdir(ctx->dir, 0755) != 0 && errno != EEXIST)
        return sl_errf(err, errlen, SL_EIO, "exactly-once file sink: cannot create directory '%s': %s", ctx->dir,
                       strerror(errno));
    int rc = drop_leftovers(ctx, subtask, parallelism, err, errlen);
    if (rc) return rc;
    eo_writer_t *w = sl_calloc(1, sizeof *w);
    w->ctx = ctx;
    w->subtask = subtask;
    w->attempt = sl_mix64((uint64_t)sl_wall_ms() ^ ((uint64_t)sl_mono_ns() << 7) ^ (uint64_t)subtask);
    w->fd = -1;
    sl_buf_reserve(&w->buf, EO_BUF);
    *writer = w;
    return 0;
}

static int eo_write(void *writer, const sl_record_t *rec, char *err, size_t errlen) {
    eo_writer_t *w = writer;
    if (w->fd < 0) {
        int rc = begin_txn(w, err, errlen);
        if (rc) return rc;
    }
    sl_encode_row(w->ctx->fmt, &rec->row, &w->buf);
    sl_buf_append(&w->buf, "\n", 1);
    w->records++;
    return w->buf.len >= EO_BUF ? flush_buf(w, err, errlen) : 0;
}

static int eo_pre_commit(void *writer, int64_t id, char *err, size_t errlen) {
    eo_writer_t *w = writer;
    sl_fault_point("sink.before-precommit");
    if (w->fd < 0) return 0; /* nothing written since the last pre-commit */
    char *pending = path_of(w, ".part-%d-%" PRId64 "-%016" PRIx64 ".pending", w->subtask, id, w->attempt);
    int rc = close_txn(w, pending, err, errlen);
    if (!rc) rc = fsync_dir(w->ctx->dir, err, errlen);
    if (rc) {
        sl_free(pending);
        return rc;
    }
    w->pending = sl_realloc(w->pending, (size_t)(w->npending + 1) * sizeof *w->pending);
    w->pending[w->npending].ckpt = id;
    w->pending[w->npending].path = pending;
    w->npending++;
    sl_fault_point("sink.after-precommit");
    return 0;
}

/* Makes pending transactions up to `upto` visible. */
static int commit_upto(eo_writer_t *w, int64_t upto, char *err, size_t errlen) {
    int kept = 0, rc = 0, done = 0;
    for (int i = 0; i < w->npending; i++) {
        eo_pending_t *p = &w->pending[i];
        if (p->ckpt > upto || rc) {
            w->pending[kept++] = *p;
            continue;
        }
        char *final = path_of(w, "part-%d-%" PRId64, w->subtask, p->ckpt);
        struct stat st;
        if (stat(final, &st) == 0) { /* committed before (a repeated commit) */
            unlink(p->path);
        } else if (rename(p->path, final) != 0) {
            rc = sl_errf(err, errlen, SL_EIO, "exactly-once file sink: cannot commit '%s' as '%s': %s", p->path,
                         final, strerror(errno));
            sl_free(final);
            w->pending[kept++] = *p;
            continue;
        }
        sl_free(final);
        sl_free(p->path);
        done++;
        sl_fault_point("sink.during-commit"); /* some pending files renamed, others not yet */
    }
    w->npending = kept;
    if (!rc && done) rc = fsync_dir(w->ctx->dir, err, errlen);
    return rc;
}

static int eo_commit(void *writer, int64_t id, char *err, size_t errlen) { return commit_upto(writer, id, err, errlen); }

static int eo_finish(void *writer, char *err, size_t errlen) {
    eo_writer_t *w = writer;
    int rc = commit_upto(w, INT64_MAX, err, errlen);
    if (rc) return rc;
    char *final = path_of(w, "part-%d-end", w->subtask);
    rc = close_txn(w, final, err, errlen);
    sl_free(final);
    if (!rc) rc = fsync_dir(w->ctx->dir, err, errlen);
    return rc;
}

/* A cancelled or failed job: the open transaction and pending files stay
 * hidden (a restore decides their fate). */
static void eo_close(void *writer) {
    eo_writer_t *w = writer;
    if (!w) return;
    if (w->fd >= 0) close(w->fd);
    sl_free(w->inprogress);
    for (int i = 0; i < w->npending; i++) sl_free(w->pending[i].path);
    sl_free(w->pending);
    sl_buf_free(&w->buf);
    sl_free(w);
}

static void eo_destroy(void *vctx) {
    eo_ctx_t *ctx = vctx;
    sl_free(ctx->dir);
    sl_free(ctx);
}

/* Before a run: pending files of checkpoints up to `restored_id` are
 * committed (idempotently; another process's recover may commit the same
 * file at the same time) — whichever subtask or earlier attempt wrote them.
 * The rest is left to the writers (drop_leftovers). */
static int eo_recover(void *vctx, int64_t restored_id, char *err, size_t errlen) {
    const eo_ctx_t *ctx = vctx;
    DIR *d = opendir(ctx->dir);
    if (!d) return errno == ENOENT ? 0 : sl_errf(err, errlen, SL_EIO, "exactly-once file sink: cannot list '%s': %s",
                                                 ctx->dir, strerror(errno));
    int rc = 0;
    struct dirent *e;
    while ((e = readdir(d)) && !rc) {
        const char *nm = e->d_name;
        if (strncmp(nm, ".part-", 6) != 0) continue;
        size_t n = strlen(ctx->dir) + strlen(nm) + 2;
        char *path = sl_malloc(n);
        snprintf(path, n, "%s/%s", ctx->dir, nm);
        int sub;
        long long ckpt;
        char attempt[64];
        size_t l = strlen(nm);
        if (l > 8 && strcmp(nm + l - 8, ".pending") == 0 &&
            sscanf(nm, ".part-%d-%lld-%63[0-9a-f].pending", &sub, &ckpt, attempt) == 3 && ckpt <= restored_id) {
            char final[64];
            snprintf(final, sizeof final, "part-%d-%lld", sub, ckpt);
            size_t fn = strlen(ctx->dir) + strlen(final) + 2;
            char *fpath = sl_malloc(fn);
            snprintf(fpath, fn, "%s/%s", ctx->dir, final);
            struct stat st;
            if (stat(fpath, &st) == 0)
                unlink(path); /* committed before the crash */
            else if (rename(path, fpath) != 0 && !(errno == ENOENT && stat(fpath, &st) == 0))
                rc = sl_errf(err, errlen, SL_EIO, "exactly-once file sink: cannot commit '%s': %s", path,
                             strerror(errno));
            sl_free(fpath);
        }
        sl_free(path);
    }
    closedir(d);
    return rc ? rc : fsync_dir(ctx->dir, err, errlen);
}

static const sl_sink_ops_t eo_ops = {
    .name = "exactly-once-file",
    .open = eo_open,
    .write = eo_write,
    .finish = eo_finish,
    .close = eo_close,
    .destroy = eo_destroy,
    .pre_commit = eo_pre_commit,
    .commit = eo_commit,
    .recover = eo_recover,
};

sl_sink_t sl_exactly_once_file_sink(const char *dir, sl_format_t fmt) {
    eo_ctx_t *ctx = sl_calloc(1, sizeof *ctx);
    ctx->dir = sl_strdup(dir ? dir : ".");
    ctx->fmt = fmt;
    sl_sink_t s = {&eo_ops, ctx};
    return s;
}
