/*
 * file_source.c — reads JSON or CSV files (comma-separated paths), one
 * split per file; split i goes to subtask i % parallelism.
 *
 * A reader opens all its files when it is created (a missing file fails the
 * job at start, naming the path) and reads them interleaved: a batch of
 * lines from each unfinished split in turn, so the runtime's per-split
 * watermarks see every file advance.  Lines are read with getline (no
 * length limit, NULs kept); a trailing "\r" is dropped, blank lines are
 * ignored (except in a one-field CSV, where a blank line is a value), a
 * UTF-8 byte-order mark at the start of a file is skipped, and a CSV header
 * (the schema's field names) on the first line is skipped.  A CSV record
 * whose quoted field spans lines is read to its closing quote.
 *
 * Bad records: SL_ON_ERROR_FAIL makes poll return SL_EFORMAT with
 * "<path>: line N, field 'f': reason"; SL_ON_ERROR_SKIP drops the record and
 * counts it with sl_src_count_skipped.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/common.h"
#include "connectors/connectors.h"
#include "formats/format.h"

#define FS_BATCH 64 /* lines per split per turn */

typedef struct fs_ctx {
    char **paths;
    int npaths;
    sl_format_t fmt;
    sl_schema_t *schema; /* ref held */
    sl_error_policy_t policy;
} fs_ctx_t;

typedef struct fs_split {
    const char *path;
    FILE *f;
    int64_t lineno; /* lines read so far */
    bool done;
} fs_split_t;

typedef struct fs_reader {
    const fs_ctx_t *ctx;
    fs_split_t *splits;
    int n, cur, live;
    char *line; /* getline's buffer */
    size_t cap;
    sl_buf_t rec; /* a CSV record that spans lines */
    sl_decoder_t dec;
    int failed; /* sticky error code */
    char failmsg[1024];
} fs_reader_t;

static void fs_destroy_reader(void *reader) {
    fs_reader_t *r = reader;
    if (!r) return;
    for (int j = 0; j < r->n; j++)
        if (r->splits[j].f) fclose(r->splits[j].f);
    sl_free(r->splits);
    free(r->line); /* from getline */
    sl_buf_free(&r->rec);
    sl_decoder_free(&r->dec);
    sl_free(r);
}

static int fs_create_reader(void *vctx, int subtask, int parallelism, void **reader, int *nsplits, char *err,
                            size_t errlen) {
    const fs_ctx_t *ctx = vctx;
    if (ctx->npaths == 0) return sl_errf(err, errlen, SL_EINVAL, "file source: no paths given");
    if (!ctx->schema || sl_schema_field_count(ctx->schema) == 0)
        return sl_errf(err, errlen, SL_EINVAL, "file source: no schema");
    if (parallelism < 1 || subtask < 0 || subtask >= parallelism)
        return sl_errf(err, errlen, SL_EINVAL, "file source: subtask %d of %d", subtask, parallelism);
    fs_reader_t *r = sl_calloc(1, sizeof *r);
    r->ctx = ctx;
    r->n = subtask < ctx->npaths ? (ctx->npaths - subtask + parallelism - 1) / parallelism : 0;
    r->live = r->n;
    r->splits = sl_calloc((size_t)(r->n ? r->n : 1), sizeof *r->splits);
    sl_decoder_init(&r->dec, ctx->fmt, ctx->schema);
    for (int j = 0; j < r->n; j++) {
        fs_split_t *sp = &r->splits[j];
        sp->path = ctx->paths[subtask + j * parallelism];
        sp->f = fopen(sp->path, "rb");
        if (!sp->f) {
            int e = errno;
            fs_destroy_reader(r);
            return sl_errf(err, errlen, e == ENOENT ? SL_ENOTFOUND : SL_EIO, "file source: cannot open '%s': %s",
                           ctx->paths[subtask + j * parallelism], strerror(e));
        }
        setvbuf(sp->f, NULL, _IOFBF, 64 * 1024);
    }
    *reader = r;
    *nsplits = r->n;
    return 0;
}

/* getline into the reader's buffer: the length, -1 at the end of the file,
 * -2 on a read error (errno set; ENOMEM for a line too big for memory). */
static ssize_t next_line(fs_reader_t *r, fs_split_t *sp) {
    errno = 0;
    ssize_t n = getline(&r->line, &r->cap, sp->f);
    if (n < 0) return ferror(sp->f) || errno ? -2 : -1;
    sp->lineno++;
    return n;
}

/* Reads the next record of split sp into (*p, *len).  Returns 1, 0 at the
 * end of the file, or SL_EIO. */
static int read_record(fs_reader_t *r, fs_split_t *sp, const char **p, size_t *len) {
    ssize_t n = next_line(r, sp);
    if (n < 0) return n == -2 ? SL_EIO : 0;
    const char *s = r->line;
    size_t l = (size_t)n;
    if (sp->lineno == 1 && l >= 3 && memcmp(s, "\xef\xbb\xbf", 3) == 0) s += 3, l -= 3;
    if (r->ctx->fmt == SL_FMT_CSV && sl_csv_record_open(s, l, false)) {
        /* a quoted field continues on the next line(s); the decoder reports
         * one that never closes */
        r->rec.len = 0;
        sl_buf_append(&r->rec, s, l);
        bool open = true;
        while (open && r->rec.len <= SL_FORMAT_MAX_RECORD && (n = next_line(r, sp)) >= 0) {
            sl_buf_append(&r->rec, r->line, (size_t)n);
            open = sl_csv_record_open(r->line, (size_t)n, true);
        }
        if (n == -2) return SL_EIO;
        s = (const char *)r->rec.p;
        l = r->rec.len;
    }
    if (l && s[l - 1] == '\n') l--;
    if (l && s[l - 1] == '\r') l--;
    *p = s;
    *len = l;
    return 1;
}

/* Reads up to `budget` records of split j.  Returns the number of records
 * read, or < 0 on a fatal error (message in r->failmsg). */
static int read_batch(fs_reader_t *r, int j, int budget, sl_source_output_t *out) {
    fs_split_t *sp = &r->splits[j];
    const fs_ctx_t *ctx = r->ctx;
    bool one_field_csv = ctx->fmt == SL_FMT_CSV && sl_schema_field_count(ctx->schema) == 1;
    char msg[768];
    int done = 0;
    while (done < budget) {
        const char *p;
        size_t len;
        int64_t first = sp->lineno + 1;
        int rc = read_record(r, sp, &p, &len);
        if (rc < 0)
            return sl_errf(r->failmsg, sizeof r->failmsg, SL_EIO, "%s: read error after line %" PRId64 ": %s",
                           sp->path, sp->lineno, strerror(errno));
        if (rc == 0) {
            sp->done = true;
            r->live--;
            sl_src_split_finished(out, j);
            break;
        }
        done++;
        if (len == 0 && !one_field_csv) continue;
        if (first == 1 && ctx->fmt == SL_FMT_CSV && sl_csv_is_header(ctx->schema, p, len)) continue;
        sl_row_writer_t *w = sl_src_row(out);
        if (sl_decode_line(&r->dec, p, len, first, w, msg, sizeof msg) != 0) {
            if (ctx->policy == SL_ON_ERROR_SKIP) {
                sl_src_count_skipped(out, 1);
                continue;
            }
            return sl_errf(r->failmsg, sizeof r->failmsg, SL_EFORMAT, "%s: %s", sp->path, msg);
        }
        sl_src_emit(out, j, SL_NO_TIMESTAMP);
    }
    return done;
}

static int fs_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t errlen) {
    fs_reader_t *r = reader;
    if (r->failed) return sl_errf(err, errlen, r->failed, "%s", r->failmsg);
    int budget = max > 0 ? max : 1;
    while (budget > 0 && r->live > 0) {
        if (!r->splits[r->cur].done) {
            int got = read_batch(r, r->cur, SL_MIN(budget, FS_BATCH), out);
            if (got < 0) {
                r->failed = got;
                return sl_errf(err, errlen, got, "%s", r->failmsg);
            }
            budget -= got;
        }
        r->cur = (r->cur + 1) % r->n;
    }
    return r->live ? SL_SRC_MORE : SL_SRC_END;
}

static void fs_destroy(void *vctx) {
    fs_ctx_t *ctx = vctx;
    for (int i = 0; i < ctx->npaths; i++) sl_free(ctx->paths[i]);
    sl_free(ctx->paths);
    sl_schema_unref(ctx->schema);
    sl_free(ctx);
}

static const sl_source_ops_t file_source_ops = {
    .name = "file",
    .create_reader = fs_create_reader,
    .poll = fs_poll,
    .destroy_reader = fs_destroy_reader,
    .destroy = fs_destroy,
};

sl_source_t sl_file_source(const char *paths, sl_format_t fmt, sl_schema_t *schema, sl_error_policy_t policy) {
    fs_ctx_t *ctx = sl_calloc(1, sizeof *ctx);
    ctx->fmt = fmt;
    ctx->policy = policy;
    ctx->schema = sl_schema_ref(schema);
    for (const char *p = paths ? paths : ""; *p;) {
        const char *c = strchr(p, ',');
        const char *e = c ? c : p + strlen(p);
        const char *b = p;
        while (b < e && (*b == ' ' || *b == '\t')) b++;
        const char *t = e;
        while (t > b && (t[-1] == ' ' || t[-1] == '\t')) t--;
        if (t > b) {
            ctx->paths = sl_realloc(ctx->paths, (size_t)(ctx->npaths + 1) * sizeof *ctx->paths);
            ctx->paths[ctx->npaths++] = sl_strndup(b, (size_t)(t - b));
        }
        p = c ? c + 1 : e;
    }
    sl_source_t s = {&file_source_ops, ctx, sl_schema_ref(schema)};
    return s;
}
