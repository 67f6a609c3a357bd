/*
 * print_sink.c — Flink's print(): one JSON line per record on stdout,
 * prefixed like Flink's PrintSinkOutputWriter: "prefix> " with
 * parallelism 1, "prefix:3> " (subtask index + 1) with parallelism > 1,
 * "3> " with no prefix, nothing with neither.
 *
 * Each line goes out with one fwrite, which stdio performs under the
 * stream's lock, so lines of parallel subtasks never interleave.
 */
#include <errno.h>
#include <stdio.h>

#include "common/common.h"
#include "connectors/connectors.h"
#include "formats/format.h"

typedef struct print_ctx {
    char *prefix; /* may be NULL */
} print_ctx_t;

typedef struct print_writer {
    sl_buf_t line;
    size_t head; /* bytes of the prefix at the start of line */
} print_writer_t;

static int print_open(void *vctx, int subtask, int parallelism, const sl_schema_t *schema, void **writer,
                      char *err, size_t errlen) {
    const print_ctx_t *ctx = vctx;
    print_writer_t *w = sl_calloc(1, sizeof *w);
    char head[256];
    const char *p = ctx->prefix ? ctx->prefix : "";
    int n;
    if (parallelism > 1) n = snprintf(head, sizeof head, "%s%s%d> ", p, *p ? ":" : "", subtask + 1);
    else n = snprintf(head, sizeof head, *p ? "%s> " : "%s", p);
    w->head = n < 0 ? 0 : SL_MIN((size_t)n, sizeof head - 1);
    sl_buf_reserve(&w->line, 256);
    memcpy(w->line.p, head, w->head);
    *writer = w;
    return 0;
}

static int print_write(void *writer, const sl_record_t *rec, char *err, size_t errlen) {
    print_writer_t *w = writer;
    w->line.len = w->head;
    sl_json_encode(&rec->row, &w->line);
    sl_buf_append(&w->line, "\n", 1);
    if (fwrite(w->line.p, 1, w->line.len, stdout) != w->line.len)
        return sl_errf(err, errlen, SL_EIO, "print sink: cannot write to stdout: %s", strerror(errno));
    return 0;
}

static int print_finish(void *writer, char *err, size_t errlen) {
    if (fflush(stdout) != 0)
        return sl_errf(err, errlen, SL_EIO, "print sink: cannot write to stdout: %s", strerror(errno));
    return 0;
}

static void print_close(void *writer) {
    print_writer_t *w = writer;
    if (!w) return;
    fflush(stdout);
    sl_buf_free(&w->line);
    sl_free(w);
}

static void print_destroy(void *vctx) {
    print_ctx_t *ctx = vctx;
    sl_free(ctx->prefix);
    sl_free(ctx);
}

static const sl_sink_ops_t print_sink_ops = {
    .name = "print",
    .open = print_open,
    .write = print_write,
    .finish = print_finish,
    .close = print_close,
    .destroy = print_destroy,
};

sl_sink_t sl_print_sink(const char *prefix) {
    print_ctx_t *ctx = sl_calloc(1, sizeof *ctx);
    ctx->prefix = prefix ? sl_strdup(prefix) : NULL;
    sl_sink_t s = {&print_sink_ops, ctx};
    return s;
}
