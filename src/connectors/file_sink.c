/*
 * file_sink.c — writes rows as JSON or CSV lines to `path` (parallelism 1)
 * or `path.<subtask>` (parallelism > 1).  Each writer truncates its file on
 * open, encodes into a 256 KiB buffer and writes it out when full; finish
 * flushes and fsyncs, close flushes what is left (best effort).  Every
 * failure names the file and strerror.
 *
 * This sink gives no exactly-once guarantee: after a restart the file is
 * rewritten from the start.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <unistd.h>

#include "common/common.h"
#include "connectors/connectors.h"
#include "formats/format.h"

#define FSINK_BUF (256 * 1024)

typedef struct fsink_ctx {
    char *path;
    sl_format_t fmt;
} fsink_ctx_t;

typedef struct fsink_writer {
    char *path;
    int fd;
    sl_format_t fmt;
    sl_buf_t buf;
} fsink_writer_t;

static int fsink_open(void *vctx, int subtask, int parallelism, const sl_schema_t *schema, void **writer, char *err,
                      size_t errlen) {
    const fsink_ctx_t *ctx = vctx;
    fsink_writer_t *w = sl_calloc(1, sizeof *w);
    w->fmt = ctx->fmt;
    if (parallelism > 1) {
        size_t n = strlen(ctx->path) + 16;
        w->path = sl_malloc(n);
        snprintf(w->path, n, "%s.%d", ctx->path, subtask);
    } else {
        w->path = sl_strdup(ctx->path);
    }
    w->fd = open(w->path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        int e = errno;
        int rc = sl_errf(err, errlen, SL_EIO, "file sink: cannot open '%s': %s", w->path, strerror(e));
        sl_free(w->path);
        sl_free(w);
        return rc;
    }
    sl_buf_reserve(&w->buf, FSINK_BUF);
    *writer = w;
    return 0;
}

static int flush_buf(fsink_writer_t *w, char *err, size_t errlen) {
    int e = sl_write_all(w->fd, w->buf.p, w->buf.len);
    w->buf.len = 0; /* on failure dropped: the job fails (or restarts) anyway */
    if (e) return sl_errf(err, errlen, SL_EIO, "file sink: cannot write '%s': %s", w->path, strerror(e));
    return 0;
}

static int fsink_write(void *writer, const sl_record_t *rec, char *err, size_t errlen) {
    fsink_writer_t *w = writer;
    sl_encode_row(w->fmt, &rec->row, &w->buf);
    sl_buf_append(&w->buf, "\n", 1);
    return w->buf.len >= FSINK_BUF ? flush_buf(w, err, errlen) : 0;
}

static int fsink_finish(void *writer, char *err, size_t errlen) {
    fsink_writer_t *w = writer;
    int rc = flush_buf(w, err, errlen);
    if (rc) return rc;
    if (fsync(w->fd) != 0 && errno != EINVAL && errno != EROFS) /* EINVAL: e.g. a pipe or /dev/null */
        return sl_errf(err, errlen, SL_EIO, "file sink: cannot sync '%s': %s", w->path, strerror(errno));
    return 0;
}

static void fsink_close(void *writer) {
    fsink_writer_t *w = writer;
    if (!w) return;
    char err[8];
    flush_buf(w, err, sizeof err); /* best effort (a cancelled job); finish reports errors */
    close(w->fd);
    sl_buf_free(&w->buf);
    sl_free(w->path);
    sl_free(w);
}

static void fsink_destroy(void *vctx) {
    fsink_ctx_t *ctx = vctx;
    sl_free(ctx->path);
    sl_free(ctx);
}

static const sl_sink_ops_t file_sink_ops = {
    .name = "file",
    .open = fsink_open,
    .write = fsink_write,
    .finish = fsink_finish,
    .close = fsink_close,
    .destroy = fsink_destroy,
};

sl_sink_t sl_file_sink(const char *path, sl_format_t fmt) {
    fsink_ctx_t *ctx = sl_calloc(1, sizeof *ctx);
    ctx->path = sl_strdup(path ? path : "");
    ctx->fmt = fmt;
    sl_sink_t s = {&file_sink_ops, ctx};
    return s;
}
