/*
 * state_file.c — the checksummed state-file format (see state_file.h for
 * the layout), its bounds-checked cursor, and local-file byte streams.
 *
 * The writer keeps a 64 KiB buffer.  The file checksum is fed with the
 * buffer when it is flushed; the current section's checksum with the part
 * of the buffer that belongs to the section (sec_hashed marks how far it
 * has been fed), so a section may span any number of flushes and a buffer
 * any number of sections.
 *
 * The reader trusts nothing until the checksum that covers it has been
 * checked: it checks the magics and the version first (to tell "not a
 * state file" and "newer format" from damage), then the meta checksum over
 * header, table and trailer, then the table's shape, then (unless lazy)
 * every section's bytes and the file checksum in one pass.
 */
#include "checkpoint/state_file.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/common.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

#define SF_MAGIC 0x3145544154534c53ULL     /* "SLSTATE1" little-endian */
#define SF_END_MAGIC 0x31444e4554534c53ULL /* "SLSTEND1" */
#define SF_WBUF (64 * 1024)
#define SF_RBUF (1024 * 1024)
#define SF_MSG 512

/* Trailer field offsets. */
enum {
    TR_TABLE_OFF = 0,
    TR_COUNT = 8,
    TR_KIND = 12,
    TR_LENGTH = 16,
    TR_VERSION = 24,
    TR_RESERVED = 28,
    TR_FILE_SUM = 32,
    TR_META_SUM = 40,
    TR_MAGIC = 48,
};

static XXH3_state_t *hash_new(void) {
    XXH3_state_t *h = XXH3_createState();
    if (!h) {
        fprintf(stderr, "sluice: out of memory allocating a hash state\n");
        abort();
    }
    XXH3_64bits_reset(h);
    return h;
}

static const char *kind_name(uint32_t kind) {
    switch (kind) {
    case SL_SF_KIND_ANY: return "any";
    case SL_SF_KIND_METADATA: return "checkpoint metadata";
    case SL_SF_KIND_KEYED: return "keyed state";
    case SL_SF_KIND_OPERATOR: return "operator state";
    case SL_SF_KIND_CHANNEL: return "channel state";
    case SL_SF_KIND_RAW: return "raw data";
    case SL_SF_KIND_FOREIGN: return "foreign file";
    default: return "unknown kind";
    }
}

/* ------------------------------------------------------------------ */
/* Local-file streams. */

typedef struct file_out {
    sl_ckpt_out_t base;
    int fd;
    bool durable;
} file_out_t;

static void fout_release(file_out_t *f, bool remove) {
    if (f->fd >= 0) close(f->fd);
    if (remove) unlink(f->base.name);
    sl_free(f->base.name);
    sl_free(f);
}

static int fout_write(sl_ckpt_out_t *o, const void *p, size_t n, char *err, size_t errlen) {
    file_out_t *f = (file_out_t *)o;
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t k = write(f->fd, b, n);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return sl_errf(err, errlen, SL_EIO, "%s: cannot write: %s", o->name, strerror(errno));
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

static int fout_finish(sl_ckpt_out_t *o, char *err, size_t errlen) {
    file_out_t *f = (file_out_t *)o;
    int rc = 0;
    if (f->durable && fsync(f->fd) != 0)
        rc = sl_errf(err, errlen, SL_EIO, "%s: cannot fsync: %s", o->name, strerror(errno));
    int fd = f->fd;
    f->fd = -1;
    if (close(fd) != 0 && rc == 0)
        rc = sl_errf(err, errlen, SL_EIO, "%s: cannot close: %s", o->name, strerror(errno));
    fout_release(f, rc != 0); /* a file that may not be durable is garbage */
    return rc;
}

static void fout_abort(sl_ckpt_out_t *o) { fout_release((file_out_t *)o, true); }

static const sl_ckpt_out_ops_t file_out_ops = {fout_write, fout_finish, fout_abort};

int sl_ckpt_out_open_file(const char *path, bool durable, sl_ckpt_out_t **out, char *err, size_t errlen) {
    *out = NULL;
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        return sl_errf(err, errlen, e == ENOENT ? SL_ENOTFOUND : SL_EIO, "%s: cannot create: %s", path,
                       strerror(e));
    }
    file_out_t *f = sl_calloc(1, sizeof *f);
    f->base.ops = &file_out_ops;
    f->base.name = sl_strdup(path);
    f->fd = fd;
    f->durable = durable;
    *out = &f->base;
    return 0;
}

typedef struct file_in {
    sl_ckpt_in_t base;
    int fd;
} file_in_t;

static int fin_read_at(sl_ckpt_in_t *in, uint64_t off, void *p, size_t n, char *err, size_t errlen) {
    file_in_t *f = (file_in_t *)in;
    if (off > in->size || n > in->size - off)
        return sl_errf(err, errlen, SL_EFORMAT, "%s: truncated: wanted %zu bytes at offset %" PRIu64 " of %" PRIu64,
                       in->name, n, off, in->size);
    uint8_t *b = p;
    while (n > 0) {
        ssize_t k = pread(f->fd, b, n, (off_t)off);
        if (k < 0 && errno == EINTR) continue;
        if (k < 0) return sl_errf(err, errlen, SL_EIO, "%s: cannot read: %s", in->name, strerror(errno));
        if (k == 0)
            return sl_errf(err, errlen, SL_EFORMAT, "%s: truncated while reading (file shrank to %" PRIu64 " bytes)",
                           in->name, off);
        b += k;
        n -= (size_t)k;
        off += (uint64_t)k;
    }
    return 0;
}

static void fin_close(sl_ckpt_in_t *in) {
    file_in_t *f = (file_in_t *)in;
    close(f->fd);
    sl_free(in->name);
    sl_free(f);
}

static const sl_ckpt_in_ops_t file_in_ops = {fin_read_at, fin_close};

int sl_ckpt_in_open_file(const char *path, sl_ckpt_in_t **in, char *err, size_t errlen) {
    *in = NULL;
    if (path && strncmp(path, "s3://", 5) == 0) return sl_ckpt_in_open_s3(path, in, err, errlen);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        if (e == ENOENT) return sl_errf(err, errlen, SL_ENOTFOUND, "%s: missing (no such file)", path);
        return sl_errf(err, errlen, SL_EIO, "%s: cannot open: %s", path, strerror(e));
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return sl_errf(err, errlen, SL_EIO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return sl_errf(err, errlen, SL_EFORMAT, "%s: not a regular file", path);
    }
    file_in_t *f = sl_calloc(1, sizeof *f);
    f->base.ops = &file_in_ops;
    f->base.name = sl_strdup(path);
    f->base.size = (uint64_t)st.st_size;
    f->fd = fd;
    *in = &f->base;
    return 0;
}

/* ------------------------------------------------------------------ */
/* Writer. */

struct sl_state_file_writer {
    sl_ckpt_out_t *out;
    uint32_t kind;
    uint64_t off; /* file offset of buf[0] */
    uint8_t *buf;
    size_t blen;
    XXH3_state_t *fh; /* file checksum, fed at flush */
    XXH3_state_t *sh; /* current section's checksum */
    bool in_section;
    uint64_t sec_id, sec_start, sec_hashed;
    sl_sf_section_t *secs;
    int nsecs, capsecs;
    int rc;
    char msg[SF_MSG];
};

static int wfail(sl_state_file_writer_t *w, int rc, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int wfail(sl_state_file_writer_t *w, int rc, const char *fmt, ...) {
    if (w->rc) return w->rc;
    int n = snprintf(w->msg, sizeof w->msg, "%s: ", w->out->name);
    if (n < 0 || (size_t)n >= sizeof w->msg) n = 0;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->msg + n, sizeof w->msg - (size_t)n, fmt, ap);
    va_end(ap);
    w->rc = rc;
    return rc;
}

/* Feeds the section checksum with the buffered bytes of the current section
 * that it has not seen yet. */
static void sec_feed(sl_state_file_writer_t *w) {
    if (!w->in_section) return;
    uint64_t end = w->off + w->blen;
    if (end > w->sec_hashed) {
        XXH3_64bits_update(w->sh, w->buf + (w->sec_hashed - w->off), (size_t)(end - w->sec_hashed));
        w->sec_hashed = end;
    }
}

static int wflush(sl_state_file_writer_t *w) {
    if (w->rc) return w->rc;
    if (!w->blen) return 0;
    sec_feed(w);
    XXH3_64bits_update(w->fh, w->buf, w->blen);
    char e[SF_MSG];
    int rc = w->out->ops->write(w->out, w->buf, w->blen, e, sizeof e);
    if (rc) {
        w->rc = rc;
        snprintf(w->msg, sizeof w->msg, "%s", e); /* the stream's message names the file */
        return rc;
    }
    w->off += w->blen;
    w->blen = 0;
    return 0;
}

static int emit(sl_state_file_writer_t *w, const void *p, size_t n) {
    const uint8_t *b = p;
    while (n > 0) {
        if (w->blen == SF_WBUF && wflush(w)) return w->rc;
        size_t k = SL_MIN(n, (size_t)SF_WBUF - w->blen);
        memcpy(w->buf + w->blen, b, k);
        w->blen += k;
        b += k;
        n -= k;
    }
    return 0;
}

int sl_sf_writer_new(sl_ckpt_out_t *out, uint32_t kind, sl_state_file_writer_t **wp, char *err, size_t errlen) {
    *wp = NULL;
    if (kind == SL_SF_KIND_ANY) {
        int rc = sl_errf(err, errlen, SL_EINVAL, "%s: a state file needs a kind", out->name);
        out->ops->abort(out);
        return rc;
    }
    sl_state_file_writer_t *w = sl_calloc(1, sizeof *w);
    w->out = out;
    w->kind = kind;
    w->buf = sl_malloc(SF_WBUF);
    w->fh = hash_new();
    w->sh = hash_new();
    uint8_t h[SL_SF_HEADER_SIZE];
    sl_st64(h, SF_MAGIC);
    sl_st32(h + 8, SL_SF_VERSION);
    sl_st32(h + 12, kind);
    emit(w, h, sizeof h);
    *wp = w;
    return 0;
}

int sl_sf_writer_open(const char *path, uint32_t kind, sl_state_file_writer_t **w, char *err, size_t errlen) {
    sl_ckpt_out_t *out;
    *w = NULL;
    int rc = sl_ckpt_out_open_file(path, true, &out, err, errlen);
    if (rc) return rc;
    return sl_sf_writer_new(out, kind, w, err, errlen);
}

int sl_sf_end_section(sl_state_file_writer_t *w) {
    if (w->rc || !w->in_section) return w->rc;
    sec_feed(w);
    if (w->nsecs == w->capsecs) {
        w->capsecs = w->capsecs ? w->capsecs * 2 : 16;
        w->secs = sl_realloc(w->secs, (size_t)w->capsecs * sizeof *w->secs);
    }
    uint64_t end = w->off + w->blen;
    w->secs[w->nsecs++] = (sl_sf_section_t){w->sec_id, w->sec_start, end - w->sec_start, XXH3_64bits_digest(w->sh)};
    w->in_section = false;
    return 0;
}

int sl_sf_begin_section(sl_state_file_writer_t *w, uint64_t id) {
    if (sl_sf_end_section(w)) return w->rc;
    if (w->nsecs >= INT32_MAX / 2) return wfail(w, SL_EINVAL, "too many sections");
    w->in_section = true;
    w->sec_id = id;
    w->sec_start = w->sec_hashed = w->off + w->blen;
    XXH3_64bits_reset(w->sh);
    return 0;
}

int sl_sf_put_raw(sl_state_file_writer_t *w, const void *p, size_t n) {
    if (w->rc) return w->rc;
    if (!w->in_section) return wfail(w, SL_EINVAL, "bytes put outside a section (call sl_sf_begin_section first)");
    return emit(w, p, n);
}

int sl_sf_put_u8(sl_state_file_writer_t *w, uint8_t v) { return sl_sf_put_raw(w, &v, 1); }

int sl_sf_put_u32(sl_state_file_writer_t *w, uint32_t v) {
    uint8_t b[4];
    sl_st32(b, v);
    return sl_sf_put_raw(w, b, 4);
}

int sl_sf_put_u64(sl_state_file_writer_t *w, uint64_t v) {
    uint8_t b[8];
    sl_st64(b, v);
    return sl_sf_put_raw(w, b, 8);
}

int sl_sf_put_i64(sl_state_file_writer_t *w, int64_t v) { return sl_sf_put_u64(w, (uint64_t)v); }

int sl_sf_put_varint(sl_state_file_writer_t *w, uint64_t v) {
    uint8_t b[10];
    size_t n = 0;
    while (v >= 0x80) {
        b[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    b[n++] = (uint8_t)v;
    return sl_sf_put_raw(w, b, n);
}

int sl_sf_put_svarint(sl_state_file_writer_t *w, int64_t v) {
    return sl_sf_put_varint(w, ((uint64_t)v << 1) ^ (uint64_t)(v >> 63));
}

int sl_sf_put_bytes(sl_state_file_writer_t *w, const void *p, size_t n) {
    if (sl_sf_put_varint(w, n)) return w->rc;
    return sl_sf_put_raw(w, p, n);
}

int sl_sf_put_str(sl_state_file_writer_t *w, const char *s) {
    return sl_sf_put_bytes(w, s ? s : "", s ? strlen(s) : 0);
}

int sl_sf_writer_error(const sl_state_file_writer_t *w) { return w->rc; }
const char *sl_sf_writer_message(const sl_state_file_writer_t *w) { return w->msg; }
uint64_t sl_sf_writer_offset(const sl_state_file_writer_t *w) { return w->off + w->blen; }

static int cmp_section_id(const void *a, const void *b) {
    uint64_t x = ((const sl_sf_section_t *)a)->id, y = ((const sl_sf_section_t *)b)->id;
    return x < y ? -1 : x > y;
}

static void writer_free(sl_state_file_writer_t *w) {
    XXH3_freeState(w->fh);
    XXH3_freeState(w->sh);
    sl_free(w->buf);
    sl_free(w->secs);
    sl_free(w);
}

void sl_sf_writer_abort(sl_state_file_writer_t *w) {
    if (!w) return;
    w->out->ops->abort(w->out);
    writer_free(w);
}

int sl_sf_writer_close(sl_state_file_writer_t *w, sl_sf_info_t *info, char *err, size_t errlen) {
    if (info) memset(info, 0, sizeof *info);
    sl_sf_end_section(w);
    if (!w->rc && w->nsecs > 1) {
        qsort(w->secs, (size_t)w->nsecs, sizeof *w->secs, cmp_section_id);
        for (int i = 1; i < w->nsecs; i++)
            if (w->secs[i].id == w->secs[i - 1].id) {
                wfail(w, SL_EINVAL, "section id %" PRIu64 " written twice", w->secs[i].id);
                break;
            }
    }
    if (w->rc) goto fail;

    /* Table and the first part of the trailer, then the file checksum over
     * everything so far. */
    uint64_t table_off = w->off + w->blen;
    sl_buf_t tail = {0};
    sl_buf_reserve(&tail, (size_t)w->nsecs * SL_SF_TABLE_ENTRY_SIZE + SL_SF_TRAILER_SIZE);
    for (int i = 0; i < w->nsecs; i++) {
        uint8_t *e = tail.p + tail.len;
        sl_st64(e, w->secs[i].id);
        sl_st64(e + 8, w->secs[i].offset);
        sl_st64(e + 16, w->secs[i].length);
        sl_st64(e + 24, w->secs[i].checksum);
        tail.len += SL_SF_TABLE_ENTRY_SIZE;
    }
    uint64_t trailer_off = table_off + tail.len;
    uint8_t *t = tail.p + tail.len;
    memset(t, 0, SL_SF_TRAILER_SIZE);
    sl_st64(t + TR_TABLE_OFF, table_off);
    sl_st32(t + TR_COUNT, (uint32_t)w->nsecs);
    sl_st32(t + TR_KIND, w->kind);
    sl_st64(t + TR_LENGTH, trailer_off + SL_SF_TRAILER_SIZE);
    sl_st32(t + TR_VERSION, SL_SF_VERSION);
    sl_st32(t + TR_RESERVED, 0);
    emit(w, tail.p, tail.len + TR_FILE_SUM);
    wflush(w);
    uint64_t file_sum = XXH3_64bits_digest(w->fh);
    sl_st64(t + TR_FILE_SUM, file_sum);

    uint8_t h[SL_SF_HEADER_SIZE];
    sl_st64(h, SF_MAGIC);
    sl_st32(h + 8, SL_SF_VERSION);
    sl_st32(h + 12, w->kind);
    XXH3_64bits_reset(w->sh);
    XXH3_64bits_update(w->sh, h, sizeof h);
    XXH3_64bits_update(w->sh, tail.p, tail.len + TR_META_SUM);
    sl_st64(t + TR_META_SUM, XXH3_64bits_digest(w->sh));
    sl_st64(t + TR_MAGIC, SF_END_MAGIC);
    emit(w, t + TR_FILE_SUM, SL_SF_TRAILER_SIZE - TR_FILE_SUM);
    wflush(w);
    sl_buf_free(&tail);
    if (w->rc) goto fail;

    char e[SF_MSG];
    int rc = w->out->ops->finish(w->out, e, sizeof e);
    if (rc) {
        sl_errf(err, errlen, rc, "%s", e);
        writer_free(w);
        return rc;
    }
    if (info) {
        info->size = trailer_off + SL_SF_TRAILER_SIZE;
        info->checksum = file_sum;
        info->kind = w->kind;
        info->nsections = w->nsecs;
        info->sections = w->secs; /* ownership moves */
        w->secs = NULL;
    }
    writer_free(w);
    return 0;

fail:;
    int frc = sl_errf(err, errlen, w->rc, "%s", w->msg);
    sl_sf_writer_abort(w);
    return frc;
}

void sl_sf_info_free(sl_sf_info_t *info) {
    if (!info) return;
    sl_free(info->sections);
    info->sections = NULL;
    info->nsections = 0;
}

/* ------------------------------------------------------------------ */
/* Cursor. */

void sl_sf_cursor_init(sl_sf_cursor_t *c, const void *p, size_t len, const char *name, uint64_t section) {
    memset(c, 0, sizeof *c);
    c->p = p;
    c->len = len;
    c->name = name;
    c->section = section;
}

int sl_sf_cursor_fail(sl_sf_cursor_t *c, const char *why) {
    if (c->rc) return c->rc;
    c->rc = SL_EFORMAT;
    c->why = why;
    c->why_at = c->pos;
    return c->rc;
}

int sl_sf_cursor_error(const sl_sf_cursor_t *c, char *err, size_t errlen) {
    if (!c->rc) return 0;
    return sl_errf(err, errlen, c->rc, "%s: section %" PRIu64 ": %s at byte %zu", c->name ? c->name : "(memory)",
                   c->section, c->why, c->why_at);
}

int sl_sf_get_view(sl_sf_cursor_t *c, const void **p, size_t n) {
    *p = NULL;
    if (c->rc) return c->rc;
    if (n > c->len - c->pos) return sl_sf_cursor_fail(c, "value runs past the end of the section");
    *p = c->p + c->pos;
    c->pos += n;
    return 0;
}

int sl_sf_get_raw(sl_sf_cursor_t *c, void *dst, size_t n) {
    const void *p;
    if (sl_sf_get_view(c, &p, n)) {
        if (n) memset(dst, 0, n);
        return c->rc;
    }
    if (n) memcpy(dst, p, n);
    return 0;
}

int sl_sf_get_u8(sl_sf_cursor_t *c, uint8_t *v) { return sl_sf_get_raw(c, v, 1); }

int sl_sf_get_u32(sl_sf_cursor_t *c, uint32_t *v) {
    uint8_t b[4];
    int rc = sl_sf_get_raw(c, b, 4);
    *v = sl_ld32(b);
    return rc;
}

int sl_sf_get_u64(sl_sf_cursor_t *c, uint64_t *v) {
    uint8_t b[8];
    int rc = sl_sf_get_raw(c, b, 8);
    *v = sl_ld64(b);
    return rc;
}

int sl_sf_get_i64(sl_sf_cursor_t *c, int64_t *v) {
    uint64_t u;
    int rc = sl_sf_get_u64(c, &u);
    *v = (int64_t)u;
    return rc;
}

int sl_sf_get_varint(sl_sf_cursor_t *c, uint64_t *v) {
    *v = 0;
    if (c->rc) return c->rc;
    uint64_t x = 0;
    size_t start = c->pos;
    for (int i = 0; i < 10; i++) {
        if (c->pos >= c->len) {
            c->pos = start;
            return sl_sf_cursor_fail(c, "varint runs past the end of the section");
        }
        uint8_t b = c->p[c->pos++];
        if (i == 9 && b > 1) {
            c->pos = start;
            return sl_sf_cursor_fail(c, "varint larger than 64 bits");
        }
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            if (b == 0 && i > 0) {
                c->pos = start;
                return sl_sf_cursor_fail(c, "overlong varint");
            }
            *v = x;
            return 0;
        }
    }
    c->pos = start;
    return sl_sf_cursor_fail(c, "varint larger than 64 bits");
}

int sl_sf_get_svarint(sl_sf_cursor_t *c, int64_t *v) {
    uint64_t u;
    int rc = sl_sf_get_varint(c, &u);
    *v = (int64_t)(u >> 1) ^ -(int64_t)(u & 1);
    return rc;
}

int sl_sf_get_varint_max(sl_sf_cursor_t *c, uint64_t max, uint64_t *v) {
    size_t at = c->pos;
    if (sl_sf_get_varint(c, v)) return c->rc;
    if (*v > max) {
        *v = 0;
        c->pos = at;
        return sl_sf_cursor_fail(c, "value out of range");
    }
    return 0;
}

int sl_sf_get_count(sl_sf_cursor_t *c, size_t min_elem_size, size_t *n) {
    uint64_t v;
    *n = 0;
    size_t at = c->pos;
    if (sl_sf_get_varint(c, &v)) return c->rc;
    if (min_elem_size == 0) min_elem_size = 1;
    if (v > (uint64_t)(sl_sf_cursor_left(c) / min_elem_size)) {
        c->pos = at;
        return sl_sf_cursor_fail(c, "element count larger than the section can hold");
    }
    *n = (size_t)v;
    return 0;
}

int sl_sf_get_bytes(sl_sf_cursor_t *c, const void **p, size_t *n) {
    uint64_t v;
    *p = NULL;
    *n = 0;
    size_t at = c->pos;
    if (sl_sf_get_varint(c, &v)) return c->rc;
    if (v > sl_sf_cursor_left(c)) {
        c->pos = at;
        return sl_sf_cursor_fail(c, "byte string length runs past the end of the section");
    }
    *n = (size_t)v;
    return sl_sf_get_view(c, p, (size_t)v);
}

int sl_sf_get_str(sl_sf_cursor_t *c, char **s) {
    const void *p;
    size_t n;
    *s = NULL;
    size_t at = c->pos;
    if (sl_sf_get_bytes(c, &p, &n)) return c->rc;
    if (n && memchr(p, 0, n)) {
        c->pos = at;
        return sl_sf_cursor_fail(c, "string contains a NUL byte");
    }
    *s = sl_strndup(n ? p : "", n);
    return 0;
}

/* ------------------------------------------------------------------ */
/* Reader. */

struct sl_state_file_reader {
    sl_ckpt_in_t *in;
    uint32_t kind;
    uint64_t size, checksum;
    int nsecs;
    sl_sf_section_t *secs; /* ascending id */
    uint8_t **data;        /* loaded section bytes, by index; NULL until loaded */
};

static void reader_free(sl_state_file_reader_t *r) {
    if (!r) return;
    if (r->data)
        for (int i = 0; i < r->nsecs; i++) sl_free(r->data[i]);
    sl_free(r->data);
    sl_free(r->secs);
    if (r->in) r->in->ops->close(r->in);
    sl_free(r);
}

void sl_sf_reader_close(sl_state_file_reader_t *r) { reader_free(r); }

/* By offset; an empty section sorts before a non-empty one at its offset. */
static int cmp_section_off(const void *a, const void *b) {
    const sl_sf_section_t *x = a, *y = b;
    if (x->offset != y->offset) return x->offset < y->offset ? -1 : 1;
    return x->length < y->length ? -1 : x->length > y->length;
}

/* Reads sections (in offset order) and checks their checksums, feeding the
 * file checksum on the way; then compares the file checksum. */
static int verify_body(sl_state_file_reader_t *r, const uint8_t *header, const uint8_t *tail, size_t tail_len,
                       uint64_t stored_sum, char *err, size_t errlen) {
    const char *name = r->in->name;
    sl_sf_section_t *by_off = sl_malloc((size_t)r->nsecs * sizeof *by_off + 1);
    if (r->nsecs) memcpy(by_off, r->secs, (size_t)r->nsecs * sizeof *by_off);
    qsort(by_off, (size_t)r->nsecs, sizeof *by_off, cmp_section_off);
    uint8_t *buf = sl_malloc(SF_RBUF);
    XXH3_state_t *fh = hash_new(), *sh = hash_new();
    XXH3_64bits_update(fh, header, SL_SF_HEADER_SIZE);
    int rc = 0;
    for (int i = 0; i < r->nsecs && !rc; i++) {
        const sl_sf_section_t *s = &by_off[i];
        XXH3_64bits_reset(sh);
        for (uint64_t done = 0; done < s->length && !rc;) {
            size_t n = (size_t)SL_MIN(s->length - done, (uint64_t)SF_RBUF);
            rc = r->in->ops->read_at(r->in, s->offset + done, buf, n, err, errlen);
            XXH3_64bits_update(sh, buf, n);
            XXH3_64bits_update(fh, buf, n);
            done += n;
        }
        if (!rc && XXH3_64bits_digest(sh) != s->checksum)
            rc = sl_errf(err, errlen, SL_EFORMAT,
                         "%s: corrupt: checksum mismatch in section %" PRIu64 " (bytes %" PRIu64 "..%" PRIu64 ")", name,
                         s->id, s->offset, s->offset + s->length);
    }
    if (!rc) {
        XXH3_64bits_update(fh, tail, tail_len);
        uint64_t got = XXH3_64bits_digest(fh);
        if (got != stored_sum)
            rc = sl_errf(err, errlen, SL_EFORMAT,
                         "%s: corrupt: file checksum mismatch (stored %016" PRIx64 ", computed %016" PRIx64 ")", name,
                         stored_sum, got);
    }
    XXH3_freeState(fh);
    XXH3_freeState(sh);
    sl_free(buf);
    sl_free(by_off);
    return rc;
}

/* Parses and checks the section table (already covered by the meta
 * checksum, so a failure here means a writer bug or a forged file). */
static int parse_table(sl_state_file_reader_t *r, const uint8_t *tab, uint64_t table_off, char *err, size_t errlen) {
    const char *name = r->in->name;
    r->secs = sl_malloc((size_t)r->nsecs * sizeof *r->secs + 1);
    r->data = sl_calloc((size_t)r->nsecs + 1, sizeof *r->data);
    for (int i = 0; i < r->nsecs; i++) {
        const uint8_t *e = tab + (size_t)i * SL_SF_TABLE_ENTRY_SIZE;
        sl_sf_section_t *s = &r->secs[i];
        s->id = sl_ld64(e);
        s->offset = sl_ld64(e + 8);
        s->length = sl_ld64(e + 16);
        s->checksum = sl_ld64(e + 24);
        if (i > 0 && s->id <= r->secs[i - 1].id)
            return sl_errf(err, errlen, SL_EFORMAT, "%s: corrupt: section table not in ascending id order at entry %d",
                           name, i);
    }
    /* The sections must tile the body exactly. */
    sl_sf_section_t *by_off = sl_malloc((size_t)r->nsecs * sizeof *by_off + 1);
    if (r->nsecs) memcpy(by_off, r->secs, (size_t)r->nsecs * sizeof *by_off);
    qsort(by_off, (size_t)r->nsecs, sizeof *by_off, cmp_section_off);
    uint64_t at = SL_SF_HEADER_SIZE;
    int rc = 0;
    for (int i = 0; i < r->nsecs; i++) {
        const sl_sf_section_t *s = &by_off[i];
        if (s->offset != at || s->length > table_off - at) {
            rc = sl_errf(err, errlen, SL_EFORMAT,
                         "%s: corrupt: section %" PRIu64 " at %" PRIu64 " length %" PRIu64
                         " does not fit the body (expected offset %" PRIu64 ", body ends at %" PRIu64 ")",
                         name, s->id, s->offset, s->length, at, table_off);
            break;
        }
        at += s->length;
    }
    if (!rc && at != table_off)
        rc = sl_errf(err, errlen, SL_EFORMAT, "%s: corrupt: sections end at %" PRIu64 " but the table starts at %" PRIu64,
                     name, at, table_off);
    sl_free(by_off);
    return rc;
}

int sl_sf_reader_new(sl_ckpt_in_t *in, uint32_t expect_kind, int flags, sl_state_file_reader_t **rp, char *err,
                     size_t errlen) {
    *rp = NULL;
    sl_state_file_reader_t *r = sl_calloc(1, sizeof *r);
    r->in = in;
    const char *name = in->name;
    uint64_t size = in->size;
    uint8_t header[SL_SF_HEADER_SIZE], *tail = NULL;
    int rc;
    const uint64_t min_size = SL_SF_HEADER_SIZE + SL_SF_TRAILER_SIZE;

    if (size < SL_SF_HEADER_SIZE) {
        rc = sl_errf(err, errlen, SL_EFORMAT,
                     "%s: truncated or not a sluice state file: %" PRIu64 " bytes (a state file has at least %" PRIu64
                     ")",
                     name, size, min_size);
        goto fail;
    }
    if ((rc = in->ops->read_at(in, 0, header, sizeof header, err, errlen))) goto fail;
    if (sl_ld64(header) != SF_MAGIC) {
        rc = sl_errf(err, errlen, SL_EFORMAT, "%s: not a sluice state file (bad magic at start)", name);
        goto fail;
    }
    if (size < min_size) {
        rc = sl_errf(err, errlen, SL_EFORMAT,
                     "%s: truncated: %" PRIu64 " bytes, a state file has at least %" PRIu64, name, size, min_size);
        goto fail;
    }
    uint8_t t[SL_SF_TRAILER_SIZE];
    uint64_t trailer_off = size - SL_SF_TRAILER_SIZE;
    if ((rc = in->ops->read_at(in, trailer_off, t, sizeof t, err, errlen))) goto fail;
    if (sl_ld64(t + TR_MAGIC) != SF_END_MAGIC) {
        rc = sl_errf(err, errlen, SL_EFORMAT,
                     "%s: truncated, extended or damaged: no valid trailer at the end of its %" PRIu64
                     " bytes (bad end magic)",
                     name, size);
        goto fail;
    }
    uint32_t hver = sl_ld32(header + 8), tver = sl_ld32(t + TR_VERSION);
    if (hver != tver) {
        rc = sl_errf(err, errlen, SL_EFORMAT, "%s: corrupt: format version %u in the header but %u in the trailer", name,
                     hver, tver);
        goto fail;
    }
    if (hver != SL_SF_VERSION) {
        rc = sl_errf(err, errlen, SL_EFORMAT, "%s: unsupported state file format version %u (this build reads %u)",
                     name, hver, SL_SF_VERSION);
        goto fail;
    }
    uint64_t length = sl_ld64(t + TR_LENGTH);
    if (length != size) {
        rc = sl_errf(err, errlen, SL_EFORMAT,
                     "%s: corrupt: the trailer says %" PRIu64 " bytes but the file has %" PRIu64
                     " (truncated, extended or damaged)",
                     name, length, size);
        goto fail;
    }
    uint64_t table_off = sl_ld64(t + TR_TABLE_OFF);
    uint32_t count = sl_ld32(t + TR_COUNT);
    if (table_off < SL_SF_HEADER_SIZE || table_off > trailer_off ||
        (trailer_off - table_off) != (uint64_t)count * SL_SF_TABLE_ENTRY_SIZE || count > INT32_MAX / 2) {
        rc = sl_errf(err, errlen, SL_EFORMAT,
                     "%s: corrupt: trailer describes a section table (offset %" PRIu64 ", %u entries) that does not fit",
                     name, table_off, count);
        goto fail;
    }
    size_t tail_len = (size_t)(size - table_off);
    tail = sl_malloc(tail_len);
    if ((rc = in->ops->read_at(in, table_off, tail, tail_len, err, errlen))) goto fail;
    if (memcmp(tail + (tail_len - SL_SF_TRAILER_SIZE), t, SL_SF_TRAILER_SIZE) != 0) {
        rc = sl_errf(err, errlen, SL_EIO, "%s: changed while being read", name);
        goto fail;
    }
    XXH3_state_t *mh = hash_new();
    XXH3_64bits_update(mh, header, sizeof header);
    XXH3_64bits_update(mh, tail, tail_len - SL_SF_TRAILER_SIZE + TR_META_SUM);
    uint64_t meta = XXH3_64bits_digest(mh);
    XXH3_freeState(mh);
    if (meta != sl_ld64(t + TR_META_SUM)) {
        rc = sl_errf(err, errlen, SL_EFORMAT,
                     "%s: corrupt: checksum mismatch in the header, section table or trailer (stored %016" PRIx64
                     ", computed %016" PRIx64 ")",
                     name, sl_ld64(t + TR_META_SUM), meta);
        goto fail;
    }
    /* From here on the header, table and trailer are what the writer wrote. */
    uint32_t kind = sl_ld32(header + 12);
    if (kind != sl_ld32(t + TR_KIND) || sl_ld32(t + TR_RESERVED) != 0) {
        rc = sl_errf(err, errlen, SL_EFORMAT, "%s: corrupt: header and trailer disagree", name);
        goto fail;
    }
    if (expect_kind != SL_SF_KIND_ANY && kind != expect_kind) {
        rc = sl_errf(err, errlen, SL_EFORMAT, "%s: holds %s (kind %u), expected %s", name, kind_name(kind), kind,
                     kind_name(expect_kind));
        goto fail;
    }
    r->kind = kind;
    r->size = size;
    r->checksum = sl_ld64(t + TR_FILE_SUM);
    r->nsecs = (int)count;
    if ((rc = parse_table(r, tail, table_off, err, errlen))) goto fail;
    if (!(flags & SL_SF_LAZY) &&
        (rc = verify_body(r, header, tail, tail_len - SL_SF_TRAILER_SIZE + TR_FILE_SUM, r->checksum, err, errlen)))
        goto fail;
    sl_free(tail);
    *rp = r;
    return 0;

fail:
    sl_free(tail);
    reader_free(r);
    return rc;
}

int sl_sf_reader_open(const char *path, uint32_t expect_kind, int flags, sl_state_file_reader_t **r, char *err,
                      size_t errlen) {
    sl_ckpt_in_t *in;
    *r = NULL;
    int rc = sl_ckpt_in_open_file(path, &in, err, errlen);
    if (rc) return rc;
    return sl_sf_reader_new(in, expect_kind, flags, r, err, errlen);
}

const char *sl_sf_reader_name(const sl_state_file_reader_t *r) { return r->in->name; }
uint32_t sl_sf_reader_kind(const sl_state_file_reader_t *r) { return r->kind; }
uint64_t sl_sf_reader_size(const sl_state_file_reader_t *r) { return r->size; }
uint64_t sl_sf_reader_checksum(const sl_state_file_reader_t *r) { return r->checksum; }
int sl_sf_reader_section_count(const sl_state_file_reader_t *r) { return r->nsecs; }

const sl_sf_section_t *sl_sf_reader_section_at(const sl_state_file_reader_t *r, int i) {
    return i >= 0 && i < r->nsecs ? &r->secs[i] : NULL;
}

static int find_index(const sl_state_file_reader_t *r, uint64_t id) {
    int lo = 0, hi = r->nsecs;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (r->secs[mid].id < id) lo = mid + 1;
        else hi = mid;
    }
    return lo < r->nsecs && r->secs[lo].id == id ? lo : -1;
}

const sl_sf_section_t *sl_sf_reader_find(const sl_state_file_reader_t *r, uint64_t id) {
    int i = find_index(r, id);
    return i < 0 ? NULL : &r->secs[i];
}

int sl_sf_reader_section(sl_state_file_reader_t *r, uint64_t id, sl_sf_cursor_t *c, char *err, size_t errlen) {
    sl_sf_cursor_init(c, NULL, 0, r->in->name, id);
    int i = find_index(r, id);
    if (i < 0) return sl_errf(err, errlen, SL_ENOTFOUND, "%s: has no section %" PRIu64, r->in->name, id);
    const sl_sf_section_t *s = &r->secs[i];
    if (!r->data[i]) {
        if (s->length > SIZE_MAX - 1)
            return sl_errf(err, errlen, SL_EINVAL, "%s: section %" PRIu64 " too large for memory", r->in->name, id);
        uint8_t *d = sl_malloc((size_t)s->length);
        int rc = r->in->ops->read_at(r->in, s->offset, d, (size_t)s->length, err, errlen);
        /* Checked again even after a full verification: the bytes handed out
         * are exactly the bytes checked. */
        if (!rc && sl_hash_bytes(d, (size_t)s->length) != s->checksum)
            rc = sl_errf(err, errlen, SL_EFORMAT,
                         "%s: corrupt: checksum mismatch in section %" PRIu64 " (bytes %" PRIu64 "..%" PRIu64 ")",
                         r->in->name, id, s->offset, s->offset + s->length);
        if (rc) {
            sl_free(d);
            return rc;
        }
        r->data[i] = d;
    }
    sl_sf_cursor_init(c, r->data[i], (size_t)s->length, r->in->name, id);
    return 0;
}
