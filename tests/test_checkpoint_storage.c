/* test_checkpoint_storage.c — the state-file format, checkpoint metadata and
 * filesystem checkpoint storage, on real files under sl_test_tmpdir(). */
#include "test.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>

#include "checkpoint/metadata.h"
#include "checkpoint/state_file.h"
#include "checkpoint/storage.h"
#include "common/common.h"

static char err[1024];

/* ------------------------------------------------------------------ */
/* Helpers. */

static const char *tpath(const char *name) {
    static char bufs[8][1024];
    static int k;
    char *b = bufs[k++ % 8];
    snprintf(b, sizeof bufs[0], "%s/%s", sl_test_tmpdir(), name);
    return b;
}

static uint8_t *slurp(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    if (!f) return NULL;
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *p = sl_malloc((size_t)n + 1);
    size_t got = fread(p, 1, (size_t)n, f);
    fclose(f);
    *len = got;
    return p;
}

static void spit(const char *path, const void *p, size_t len) {
    unlink(path); /* a fresh file: ext4 flushes files truncated by an overwrite on close */
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (len && fwrite(p, 1, len, f) != len) abort();
    fclose(f);
}

static bool exists(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0;
}

static uint64_t file_hash(const char *path) {
    size_t n;
    uint8_t *p = slurp(path, &n);
    if (!p) return 0;
    uint64_t h = sl_hash_bytes(p, n);
    sl_free(p);
    return h;
}

static void flip_byte(const char *path, size_t pos) {
    size_t n;
    uint8_t *p = slurp(path, &n);
    if (!p || pos >= n) abort();
    p[pos] ^= 0xff;
    spit(path, p, n);
    sl_free(p);
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void) { return rng_state = sl_mix64(rng_state + 0x9e3779b97f4a7c15ULL); }

/* A small file: three sections of mixed values, ids out of order, one
 * empty.  Returns the info (caller frees). */
static int write_small(const char *path, sl_sf_info_t *info) {
    sl_state_file_writer_t *w;
    int rc = sl_sf_writer_open(path, SL_SF_KIND_KEYED, &w, err, sizeof err);
    if (rc) return rc;
    sl_sf_begin_section(w, 7);
    sl_sf_put_u32(w, 0xdeadbeef);
    sl_sf_put_varint(w, 300);
    sl_sf_put_str(w, "hello");
    sl_sf_begin_section(w, 2);
    sl_sf_put_svarint(w, -5);
    sl_sf_put_u64(w, 42);
    sl_sf_put_bytes(w, "\x00\x01\x02", 3);
    sl_sf_begin_section(w, 11); /* empty */
    sl_sf_end_section(w);
    return sl_sf_writer_close(w, info, err, sizeof err);
}

/* Reads every section of an open reader; returns the first error. */
static int read_all_sections(sl_state_file_reader_t *r) {
    for (int i = 0; i < sl_sf_reader_section_count(r); i++) {
        sl_sf_cursor_t c;
        int rc = sl_sf_reader_section(r, sl_sf_reader_section_at(r, i)->id, &c, err, sizeof err);
        if (rc) return rc;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* State files. */

TEST(sf_round_trip) {
    const char *path = tpath("rt.state");
    sl_state_file_writer_t *w;
    CHECK_EQ(sl_sf_writer_open(path, SL_SF_KIND_KEYED, &w, err, sizeof err), 0);
    /* A big section (spans many 64 KiB buffers), then 200 small ones in
     * descending id order, then values of every kind. */
    enum { BIG = 300 * 1000 + 17 };
    uint8_t *big = sl_malloc(BIG);
    for (size_t i = 0; i < BIG; i++) big[i] = (uint8_t)rnd();
    CHECK_EQ(sl_sf_begin_section(w, 1000), 0);
    for (size_t off = 0; off < BIG;) {
        size_t want = (size_t)(rnd() % 5000) + 1;
        size_t n = SL_MIN(want, (size_t)BIG - off);
        CHECK_EQ(sl_sf_put_raw(w, big + off, n), 0);
        off += n;
    }
    for (int kg = 199; kg >= 0; kg--) {
        sl_sf_begin_section(w, (uint64_t)kg);
        for (int j = 0; j < kg % 5; j++) sl_sf_put_varint(w, (uint64_t)kg * 1000 + (uint64_t)j);
    }
    sl_sf_begin_section(w, UINT64_MAX);
    sl_sf_put_u8(w, 0xab);
    sl_sf_put_u32(w, 0x01020304);
    sl_sf_put_u64(w, 0x0102030405060708ULL);
    sl_sf_put_i64(w, INT64_MIN);
    static const uint64_t vs[] = {0, 1, 127, 128, 16383, 16384, UINT32_MAX, UINT64_MAX};
    for (size_t i = 0; i < SL_ARRAY_LEN(vs); i++) sl_sf_put_varint(w, vs[i]);
    static const int64_t ss[] = {0, -1, 1, -64, 64, INT64_MIN, INT64_MAX};
    for (size_t i = 0; i < SL_ARRAY_LEN(ss); i++) sl_sf_put_svarint(w, ss[i]);
    sl_sf_put_bytes(w, "", 0);
    sl_sf_put_str(w, "key group ü");
    sl_sf_put_str(w, NULL);
    CHECK_EQ(sl_sf_writer_error(w), 0);
    sl_sf_info_t info;
    CHECK_EQ(sl_sf_writer_close(w, &info, err, sizeof err), 0);
    CHECK_EQ(info.nsections, 202);
    CHECK_EQ(info.kind, SL_SF_KIND_KEYED);
    struct stat st;
    CHECK_EQ(stat(path, &st), 0);
    CHECK_EQ(info.size, st.st_size);
    for (int i = 1; i < info.nsections; i++) CHECK(info.sections[i].id > info.sections[i - 1].id);

    for (int lazy = 0; lazy <= 1; lazy++) {
        sl_state_file_reader_t *r;
        int orc = sl_sf_reader_open(path, SL_SF_KIND_KEYED, lazy ? SL_SF_LAZY : 0, &r, err, sizeof err);
        if (orc) fprintf(stderr, "%s\n", err);
        CHECK_EQ(orc, 0);
        CHECK_EQ(sl_sf_reader_size(r), info.size);
        CHECK(sl_sf_reader_checksum(r) == info.checksum);
        CHECK_EQ(sl_sf_reader_section_count(r), 202);
        for (int i = 0; i < info.nsections; i++) {
            const sl_sf_section_t *a = sl_sf_reader_section_at(r, i), *b = &info.sections[i];
            CHECK(a->id == b->id && a->offset == b->offset && a->length == b->length && a->checksum == b->checksum);
        }
        sl_sf_cursor_t c;
        /* Key groups read selectively, in any order. */
        for (int kg = 0; kg < 200; kg += 7) {
            CHECK_EQ(sl_sf_reader_section(r, (uint64_t)kg, &c, err, sizeof err), 0);
            for (int j = 0; j < kg % 5; j++) {
                uint64_t v;
                CHECK_EQ(sl_sf_get_varint(&c, &v), 0);
                CHECK(v == (uint64_t)kg * 1000 + (uint64_t)j);
            }
            CHECK(sl_sf_cursor_eof(&c));
        }
        CHECK_EQ(sl_sf_reader_section(r, 1000, &c, err, sizeof err), 0);
        CHECK_EQ(c.len, BIG);
        CHECK(memcmp(c.p, big, BIG) == 0);
        CHECK_EQ(sl_sf_reader_section(r, UINT64_MAX, &c, err, sizeof err), 0);
        uint8_t u8;
        uint32_t u32;
        uint64_t u64;
        int64_t i64;
        CHECK_EQ(sl_sf_get_u8(&c, &u8), 0);
        CHECK_EQ(u8, 0xab);
        CHECK_EQ(sl_sf_get_u32(&c, &u32), 0);
        CHECK_EQ(u32, 0x01020304);
        CHECK_EQ(sl_sf_get_u64(&c, &u64), 0);
        CHECK(u64 == 0x0102030405060708ULL);
        CHECK_EQ(sl_sf_get_i64(&c, &i64), 0);
        CHECK(i64 == INT64_MIN);
        for (size_t i = 0; i < SL_ARRAY_LEN(vs); i++) {
            CHECK_EQ(sl_sf_get_varint(&c, &u64), 0);
            CHECK(u64 == vs[i]);
        }
        for (size_t i = 0; i < SL_ARRAY_LEN(ss); i++) {
            CHECK_EQ(sl_sf_get_svarint(&c, &i64), 0);
            CHECK(i64 == ss[i]);
        }
        const void *p;
        size_t n;
        CHECK_EQ(sl_sf_get_bytes(&c, &p, &n), 0);
        CHECK_EQ(n, 0);
        char *s;
        CHECK_EQ(sl_sf_get_str(&c, &s), 0);
        CHECK_STR(s, "key group ü");
        sl_free(s);
        CHECK_EQ(sl_sf_get_str(&c, &s), 0);
        CHECK_STR(s, "");
        sl_free(s);
        CHECK(sl_sf_cursor_eof(&c));
        /* Reading past the end is an error, not a crash. */
        CHECK_EQ(sl_sf_get_u8(&c, &u8), SL_EFORMAT);
        CHECK_EQ(sl_sf_cursor_error(&c, err, sizeof err), SL_EFORMAT);
        CHECK_CONTAINS(err, path);
        CHECK_CONTAINS(err, "past the end");
        /* An unknown section. */
        CHECK_EQ(sl_sf_reader_section(r, 5000, &c, err, sizeof err), SL_ENOTFOUND);
        CHECK_CONTAINS(err, "has no section 5000");
        CHECK(sl_sf_reader_find(r, 5000) == NULL);
        sl_sf_reader_close(r);
    }
    sl_sf_info_free(&info);
    sl_free(big);
}

TEST(sf_empty_file_and_kinds) {
    const char *path = tpath("empty.state");
    sl_state_file_writer_t *w;
    CHECK_EQ(sl_sf_writer_open(path, SL_SF_KIND_OPERATOR, &w, err, sizeof err), 0);
    sl_sf_info_t info;
    CHECK_EQ(sl_sf_writer_close(w, &info, err, sizeof err), 0);
    CHECK_EQ(info.nsections, 0);
    CHECK_EQ(info.size, SL_SF_HEADER_SIZE + SL_SF_TRAILER_SIZE);
    sl_state_file_reader_t *r;
    CHECK_EQ(sl_sf_reader_open(path, SL_SF_KIND_ANY, 0, &r, err, sizeof err), 0);
    CHECK_EQ(sl_sf_reader_kind(r), SL_SF_KIND_OPERATOR);
    CHECK_EQ(sl_sf_reader_section_count(r), 0);
    sl_sf_reader_close(r);
    /* The wrong kind is refused, naming the file and both kinds. */
    CHECK_EQ(sl_sf_reader_open(path, SL_SF_KIND_METADATA, 0, &r, err, sizeof err), SL_EFORMAT);
    CHECK_CONTAINS(err, path);
    CHECK_CONTAINS(err, "holds operator state");
    CHECK_CONTAINS(err, "expected checkpoint metadata");
    sl_sf_info_free(&info);
}

TEST(sf_writer_misuse) {
    const char *path = tpath("misuse.state");
    sl_state_file_writer_t *w;
    /* Bytes outside a section. */
    CHECK_EQ(sl_sf_writer_open(path, SL_SF_KIND_RAW, &w, err, sizeof err), 0);
    CHECK_EQ(sl_sf_put_u32(w, 1), SL_EINVAL);
    CHECK_EQ(sl_sf_begin_section(w, 1), SL_EINVAL); /* sticky */
    CHECK_EQ(sl_sf_writer_close(w, NULL, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, path);
    CHECK_CONTAINS(err, "outside a section");
    CHECK(!exists(path)); /* a failed file is removed */
    /* A section id twice. */
    CHECK_EQ(sl_sf_writer_open(path, SL_SF_KIND_RAW, &w, err, sizeof err), 0);
    sl_sf_begin_section(w, 3);
    sl_sf_put_u8(w, 1);
    sl_sf_begin_section(w, 3);
    CHECK_EQ(sl_sf_writer_close(w, NULL, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "section id 3 written twice");
    CHECK(!exists(path));
    /* After end_section, puts fail. */
    CHECK_EQ(sl_sf_writer_open(path, SL_SF_KIND_RAW, &w, err, sizeof err), 0);
    sl_sf_begin_section(w, 1);
    sl_sf_end_section(w);
    CHECK_EQ(sl_sf_put_u8(w, 1), SL_EINVAL);
    sl_sf_writer_abort(w);
    CHECK(!exists(path));
    /* A directory that does not exist. */
    const char *bad = tpath("no/such/dir/x.state");
    CHECK_EQ(sl_sf_writer_open(bad, SL_SF_KIND_RAW, &w, err, sizeof err), SL_ENOTFOUND);
    CHECK_CONTAINS(err, bad);
    CHECK(w == NULL);
}

TEST(sf_flip_every_byte) {
    const char *good = tpath("flip-good.state"), *bad = tpath("flip-bad.state");
    sl_sf_info_t info;
    CHECK_EQ(write_small(good, &info), 0);
    size_t n;
    uint8_t *orig = slurp(good, &n);
    CHECK(orig != NULL);
    CHECK_EQ(n, info.size);
    static const uint8_t masks[] = {0x01, 0x80, 0xff};
    int detected = 0;
    for (size_t pos = 0; pos < n; pos++) {
        for (size_t m = 0; m < SL_ARRAY_LEN(masks); m++) {
            orig[pos] ^= masks[m];
            spit(bad, orig, n);
            orig[pos] ^= masks[m];
            sl_state_file_reader_t *r;
            /* Full verification: refused at open. */
            int rc = sl_sf_reader_open(bad, SL_SF_KIND_KEYED, 0, &r, err, sizeof err);
            if (rc != SL_EFORMAT || !strstr(err, bad)) {
                fprintf(stderr, "flip at %zu mask %02x: rc %d: %s\n", pos, masks[m], rc, err);
                CHECK_EQ(rc, SL_EFORMAT);
                CHECK_CONTAINS(err, bad);
            }
            /* Lazy: refused at open or when the damaged section is read. */
            rc = sl_sf_reader_open(bad, SL_SF_KIND_KEYED, SL_SF_LAZY, &r, err, sizeof err);
            if (rc == 0) {
                rc = read_all_sections(r);
                sl_sf_reader_close(r);
            }
            if (rc != SL_EFORMAT || !strstr(err, bad)) {
                fprintf(stderr, "lazy flip at %zu mask %02x: rc %d: %s\n", pos, masks[m], rc, err);
                CHECK_EQ(rc, SL_EFORMAT);
            }
            detected++;
        }
    }
    CHECK_EQ(detected, (int)(n * SL_ARRAY_LEN(masks)));
    /* And the undamaged file still reads. */
    spit(bad, orig, n);
    sl_state_file_reader_t *r;
    CHECK_EQ(sl_sf_reader_open(bad, SL_SF_KIND_KEYED, 0, &r, err, sizeof err), 0);
    CHECK_EQ(read_all_sections(r), 0);
    sl_sf_reader_close(r);
    sl_free(orig);
    sl_sf_info_free(&info);
}

TEST(sf_truncate_and_extend) {
    const char *good = tpath("trunc-good.state"), *bad = tpath("trunc-bad.state");
    sl_sf_info_t info;
    CHECK_EQ(write_small(good, &info), 0);
    size_t n;
    uint8_t *orig = slurp(good, &n);
    for (size_t len = 0; len < n; len++) {
        spit(bad, orig, len);
        sl_state_file_reader_t *r;
        for (int lazy = 0; lazy <= 1; lazy++) {
            int rc = sl_sf_reader_open(bad, SL_SF_KIND_KEYED, lazy ? SL_SF_LAZY : 0, &r, err, sizeof err);
            if (rc != SL_EFORMAT || !strstr(err, bad) || !strstr(err, "truncated"))
                fprintf(stderr, "truncated to %zu: rc %d: %s\n", len, rc, err);
            CHECK_EQ(rc, SL_EFORMAT);
            CHECK_CONTAINS(err, bad);
            CHECK_CONTAINS(err, "truncated");
        }
    }
    /* Bytes appended after the trailer. */
    uint8_t *longer = sl_malloc(n + 100);
    memcpy(longer, orig, n);
    for (size_t extra = 1; extra <= 100; extra++) {
        memset(longer + n, (int)extra, extra);
        spit(bad, longer, n + extra);
        sl_state_file_reader_t *r;
        CHECK_EQ(sl_sf_reader_open(bad, SL_SF_KIND_KEYED, 0, &r, err, sizeof err), SL_EFORMAT);
        CHECK_CONTAINS(err, bad);
    }
    /* The original file followed by a copy of its own trailer: the
     * trailer's length disagrees with the file's. */
    memcpy(longer + n, orig + n - SL_SF_TRAILER_SIZE, SL_SF_TRAILER_SIZE);
    spit(bad, longer, n + SL_SF_TRAILER_SIZE);
    sl_state_file_reader_t *r;
    CHECK_EQ(sl_sf_reader_open(bad, SL_SF_KIND_KEYED, SL_SF_LAZY, &r, err, sizeof err), SL_EFORMAT);
    CHECK_CONTAINS(err, "the trailer says");
    sl_free(longer);
    sl_free(orig);
    sl_sf_info_free(&info);
}

TEST(sf_wrong_magic_version_missing) {
    const char *bad = tpath("magic.state");
    sl_state_file_reader_t *r;
    const char *text = "this is a text file, not a sluice state file at all; it is long enough to have a trailer.";
    spit(bad, text, strlen(text));
    CHECK_EQ(sl_sf_reader_open(bad, SL_SF_KIND_ANY, 0, &r, err, sizeof err), SL_EFORMAT);
    CHECK_CONTAINS(err, bad);
    CHECK_CONTAINS(err, "not a sluice state file");

    /* A well-formed file of a future format version (checksums recomputed)
     * is reported as such, not as damage. */
    const char *good = tpath("version.state");
    sl_sf_info_t info;
    CHECK_EQ(write_small(good, &info), 0);
    size_t n;
    uint8_t *p = slurp(good, &n);
    size_t t = n - SL_SF_TRAILER_SIZE;
    sl_st32(p + 8, 2);
    sl_st32(p + t + 24, 2);
    sl_st64(p + t + 32, sl_hash_bytes(p, t + 32));
    uint64_t table_off = sl_ld64(p + t);
    size_t ml = SL_SF_HEADER_SIZE + (t + 40 - table_off);
    uint8_t *m = sl_malloc(ml);
    memcpy(m, p, SL_SF_HEADER_SIZE);
    memcpy(m + SL_SF_HEADER_SIZE, p + table_off, t + 40 - table_off);
    sl_st64(p + t + 40, sl_hash_bytes(m, ml));
    spit(bad, p, n);
    CHECK_EQ(sl_sf_reader_open(bad, SL_SF_KIND_ANY, 0, &r, err, sizeof err), SL_EFORMAT);
    CHECK_CONTAINS(err, bad);
    CHECK_CONTAINS(err, "unsupported state file format version 2");
    /* Only one of the two version fields changed: damage. */
    sl_st32(p + 8, 1);
    spit(bad, p, n);
    CHECK_EQ(sl_sf_reader_open(bad, SL_SF_KIND_ANY, 0, &r, err, sizeof err), SL_EFORMAT);
    CHECK_CONTAINS(err, "corrupt: format version 1 in the header but 2 in the trailer");
    sl_free(m);
    sl_free(p);
    sl_sf_info_free(&info);

    const char *missing = tpath("does-not-exist.state");
    CHECK_EQ(sl_sf_reader_open(missing, SL_SF_KIND_ANY, 0, &r, err, sizeof err), SL_ENOTFOUND);
    CHECK_CONTAINS(err, missing);
    CHECK_CONTAINS(err, "missing");
    CHECK(r == NULL);
    /* A directory is not a state file. */
    CHECK_EQ(sl_sf_reader_open(sl_test_tmpdir(), SL_SF_KIND_ANY, 0, &r, err, sizeof err), SL_EFORMAT);
    CHECK_CONTAINS(err, "not a regular file");
}

/* Streams in memory, as another storage (an object store) would provide
 * them; they can fail on demand. */
typedef struct mem_out {
    sl_ckpt_out_t base;
    size_t budget; /* bytes it accepts before failing */
    sl_buf_t data;
    bool finished, aborted;
} mem_out_t;

static int mem_write(sl_ckpt_out_t *o, const void *p, size_t n, char *e, size_t elen) {
    mem_out_t *m = (mem_out_t *)o;
    if (n > m->budget) return sl_errf(e, elen, SL_EIO, "%s: upload failed (simulated)", o->name);
    m->budget -= n;
    sl_buf_append(&m->data, p, n);
    return 0;
}
static int mem_finish(sl_ckpt_out_t *o, char *e, size_t elen) {
    ((mem_out_t *)o)->finished = true;
    return 0;
}
static void mem_abort(sl_ckpt_out_t *o) { ((mem_out_t *)o)->aborted = true; }
static const sl_ckpt_out_ops_t mem_out_ops = {mem_write, mem_finish, mem_abort};

typedef struct mem_in {
    sl_ckpt_in_t base;
    const uint8_t *p;
    uint64_t fail_from, fail_to; /* reads touching bytes in [fail_from, fail_to) fail */
    bool closed;
} mem_in_t;

static int mem_read_at(sl_ckpt_in_t *in, uint64_t off, void *p, size_t n, char *e, size_t elen) {
    mem_in_t *m = (mem_in_t *)in;
    if (off < m->fail_to && off + n > m->fail_from) return sl_errf(e, elen, SL_EIO, "%s: GET failed (simulated)", in->name);
    if (off > in->size || n > in->size - off) return sl_errf(e, elen, SL_EFORMAT, "%s: truncated", in->name);
    memcpy(p, m->p + off, n);
    return 0;
}
static void mem_close(sl_ckpt_in_t *in) { ((mem_in_t *)in)->closed = true; }
static const sl_ckpt_in_ops_t mem_in_ops = {mem_read_at, mem_close};

TEST(sf_other_streams_and_io_errors) {
    char name[] = "s3://bucket/job/chk-1/x";
    /* A write that fails: the writer reports it and aborts the stream. */
    mem_out_t mo = {.base = {&mem_out_ops, name}, .budget = 1000};
    sl_state_file_writer_t *w;
    CHECK_EQ(sl_sf_writer_new(&mo.base, SL_SF_KIND_RAW, &w, err, sizeof err), 0);
    sl_sf_begin_section(w, 1);
    for (int i = 0; i < 100000; i++) sl_sf_put_u64(w, (uint64_t)i);
    CHECK_EQ(sl_sf_writer_error(w), SL_EIO);
    CHECK_EQ(sl_sf_writer_close(w, NULL, err, sizeof err), SL_EIO);
    CHECK_STR(err, "s3://bucket/job/chk-1/x: upload failed (simulated)");
    CHECK(mo.aborted && !mo.finished);
    sl_buf_free(&mo.data);

    /* A good one, then read back through an in-memory input. */
    mo = (mem_out_t){.base = {&mem_out_ops, name}, .budget = SIZE_MAX};
    CHECK_EQ(sl_sf_writer_new(&mo.base, SL_SF_KIND_RAW, &w, err, sizeof err), 0);
    for (int s = 0; s < 4; s++) {
        sl_sf_begin_section(w, (uint64_t)s);
        for (int i = 0; i < 1000; i++) sl_sf_put_varint(w, (uint64_t)(s * 1000 + i));
    }
    sl_sf_info_t info;
    CHECK_EQ(sl_sf_writer_close(w, &info, err, sizeof err), 0);
    CHECK(mo.finished && !mo.aborted);
    CHECK_EQ(info.size, mo.data.len);
    mem_in_t mi = {.base = {&mem_in_ops, name, mo.data.len}, .p = mo.data.p};
    sl_state_file_reader_t *r;
    CHECK_EQ(sl_sf_reader_new(&mi.base, SL_SF_KIND_RAW, 0, &r, err, sizeof err), 0);
    sl_sf_cursor_t c;
    CHECK_EQ(sl_sf_reader_section(r, 3, &c, err, sizeof err), 0);
    uint64_t v;
    CHECK_EQ(sl_sf_get_varint(&c, &v), 0);
    CHECK_EQ(v, 3000);
    sl_sf_reader_close(r);
    CHECK(mi.closed);
    /* A read that fails is an I/O error (retriable), not damage. */
    mi = (mem_in_t){.base = {&mem_in_ops, name, mo.data.len}, .p = mo.data.p,
                     .fail_from = info.sections[2].offset, .fail_to = info.sections[2].offset + 1};
    CHECK_EQ(sl_sf_reader_new(&mi.base, SL_SF_KIND_RAW, 0, &r, err, sizeof err), SL_EIO);
    CHECK_CONTAINS(err, "GET failed");
    CHECK(mi.closed);
    mi = (mem_in_t){.base = {&mem_in_ops, name, mo.data.len}, .p = mo.data.p,
                     .fail_from = info.sections[2].offset, .fail_to = info.sections[2].offset + 1};
    CHECK_EQ(sl_sf_reader_new(&mi.base, SL_SF_KIND_RAW, SL_SF_LAZY, &r, err, sizeof err), 0);
    CHECK_EQ(sl_sf_reader_section(r, 1, &c, err, sizeof err), 0);
    CHECK_EQ(sl_sf_reader_section(r, 2, &c, err, sizeof err), SL_EIO);
    sl_sf_reader_close(r);
    sl_sf_info_free(&info);
    sl_buf_free(&mo.data);
}

TEST(cursor_malformed) {
    sl_sf_cursor_t c;
    uint64_t v;
    /* Overlong varint (0x80 0x00 encodes 0 in two bytes). */
    sl_sf_cursor_init(&c, "\x80\x00", 2, "f", 4);
    CHECK_EQ(sl_sf_get_varint(&c, &v), SL_EFORMAT);
    CHECK_EQ(sl_sf_cursor_error(&c, err, sizeof err), SL_EFORMAT);
    CHECK_STR(err, "f: section 4: overlong varint at byte 0");
    /* More than 64 bits. */
    sl_sf_cursor_init(&c, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02", 10, "f", 0);
    CHECK_EQ(sl_sf_get_varint(&c, &v), SL_EFORMAT);
    sl_sf_cursor_init(&c, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 11, "f", 0);
    CHECK_EQ(sl_sf_get_varint(&c, &v), SL_EFORMAT);
    sl_sf_cursor_init(&c, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01", 10, "f", 0);
    CHECK_EQ(sl_sf_get_varint(&c, &v), 0);
    CHECK(v == UINT64_MAX);
    /* A varint cut off by the end of the section. */
    sl_sf_cursor_init(&c, "\x01\x80", 2, "f", 0);
    CHECK_EQ(sl_sf_get_varint(&c, &v), 0);
    CHECK_EQ(sl_sf_get_varint(&c, &v), SL_EFORMAT);
    sl_sf_cursor_error(&c, err, sizeof err);
    CHECK_CONTAINS(err, "runs past the end of the section at byte 1");
    /* Sticky: later gets fail and zero their output. */
    uint32_t u = 7;
    CHECK_EQ(sl_sf_get_u32(&c, &u), SL_EFORMAT);
    CHECK_EQ(u, 0);
    /* Byte string longer than what is left. */
    const void *p;
    size_t n;
    sl_sf_cursor_init(&c, "\x05" "abc", 4, "f", 0);
    CHECK_EQ(sl_sf_get_bytes(&c, &p, &n), SL_EFORMAT);
    CHECK(p == NULL && n == 0);
    /* A huge count is refused before anyone allocates for it. */
    sl_sf_cursor_init(&c, "\xff\xff\xff\xff\x0f" "abcd", 9, "f", 0);
    CHECK_EQ(sl_sf_get_count(&c, 1, &n), SL_EFORMAT);
    sl_sf_cursor_init(&c, "\x03" "abcdef", 7, "f", 0);
    CHECK_EQ(sl_sf_get_count(&c, 3, &n), SL_EFORMAT); /* 3 × 3 > 6 */
    sl_sf_cursor_init(&c, "\x02" "abcdef", 7, "f", 0);
    CHECK_EQ(sl_sf_get_count(&c, 3, &n), 0);
    CHECK_EQ(n, 2);
    /* Strings with a NUL inside. */
    char *s;
    sl_sf_cursor_init(&c, "\x03" "a\0b", 4, "f", 0);
    CHECK_EQ(sl_sf_get_str(&c, &s), SL_EFORMAT);
    CHECK(s == NULL);
    /* Range-checked ints. */
    sl_sf_cursor_init(&c, "\x81\x01", 2, "f", 0);
    CHECK_EQ(sl_sf_get_varint_max(&c, 129, &v), 0); /* 1 + 1 * 128 */
    CHECK_EQ(v, 129);
    sl_sf_cursor_init(&c, "\x81\x01", 2, "f", 0);
    CHECK_EQ(sl_sf_get_varint_max(&c, 128, &v), SL_EFORMAT);
    CHECK_EQ(v, 0);
    sl_sf_cursor_error(&c, err, sizeof err);
    CHECK_CONTAINS(err, "value out of range at byte 0");
}

/* Random bytes through every getter: only errors, never a crash (ASan). */
TEST(cursor_fuzz) {
    uint8_t buf[64];
    for (int iter = 0; iter < 200000; iter++) {
        size_t len = rnd() % sizeof buf;
        for (size_t i = 0; i < len; i++) buf[i] = (uint8_t)(rnd() % 4 == 0 ? 0x80 | rnd() : rnd());
        sl_sf_cursor_t c;
        sl_sf_cursor_init(&c, buf, len, "fuzz", 0);
        for (int k = 0; k < 12 && !c.rc; k++) {
            uint64_t v;
            int64_t i64;
            uint32_t u32;
            uint8_t u8;
            const void *p;
            size_t n;
            char *s = NULL;
            switch (rnd() % 9) {
            case 0: sl_sf_get_varint(&c, &v); break;
            case 1: sl_sf_get_svarint(&c, &i64); break;
            case 2: sl_sf_get_u32(&c, &u32); break;
            case 3: sl_sf_get_u64(&c, &v); break;
            case 4: sl_sf_get_u8(&c, &u8); break;
            case 5: sl_sf_get_bytes(&c, &p, &n); if (!c.rc && n) CHECK(((const uint8_t *)p)[n - 1] == buf[c.pos - 1]); break;
            case 6: sl_sf_get_str(&c, &s); sl_free(s); break;
            case 7: sl_sf_get_count(&c, 4, &n); if (!c.rc) CHECK(n * 4 <= sl_sf_cursor_left(&c)); break;
            case 8: sl_sf_get_varint_max(&c, 1000, &v); if (!c.rc) CHECK(v <= 1000); break;
            }
            CHECK(c.pos <= c.len);
        }
    }
}

/* ------------------------------------------------------------------ */
/* Metadata. */

static sl_ckpt_metadata_t *sample_metadata(int64_t id, const char *job) {
    sl_ckpt_metadata_t *md = sl_ckpt_metadata_new(id, job, "fraud pipeline", 128);
    md->trigger_ts = 1700000000000LL + id * 10000;
    md->completion_ts = md->trigger_ts + 1234;
    sl_ckpt_metadata_set_str(&md->backend, "heap");

    sl_ckpt_operator_t *src = sl_ckpt_metadata_add_operator(md, "kafka-source", 0, 2, 128);
    for (int s = 0; s < 2; s++) {
        char off[64];
        int n = snprintf(off, sizeof off, "events-%d:%" PRId64, s, id * 100 + s);
        sl_ckpt_subtask_add_blob(&src->subtasks[s], "source-offsets", SL_CKPT_DIST_SPLIT, off, (size_t)n);
    }
    sl_ckpt_operator_add_blob(src, "enumerator", SL_CKPT_DIST_BROADCAST, "\x01\x02\x03", 3);

    sl_ckpt_operator_t *win = sl_ckpt_metadata_add_operator(md, "window-5m", 3, 4, 128);
    for (int s = 0; s < 4; s++) {
        sl_ckpt_subtask_t *st = &win->subtasks[s];
        sl_sf_info_t info = {0};
        info.kind = SL_SF_KIND_KEYED;
        info.nsections = st->range.end - st->range.start;
        info.sections = sl_calloc((size_t)info.nsections + 1, sizeof *info.sections);
        uint64_t off = SL_SF_HEADER_SIZE;
        for (int i = 0; i < info.nsections; i++) {
            info.sections[i] = (sl_sf_section_t){(uint64_t)(st->range.start + i), off, (uint64_t)(i * 3),
                                                 rnd()};
            off += (uint64_t)(i * 3);
        }
        info.size = off + (uint64_t)info.nsections * 32 + SL_SF_TRAILER_SIZE;
        info.checksum = rnd();
        char name[64];
        snprintf(name, sizeof name, "window-5m-%d.keyed", s);
        sl_ckpt_subtask_add_file(st, SL_CKPT_SCOPE_EXCLUSIVE, name, &info);
        if (s == 1) {
            snprintf(name, sizeof name, "sst-%d-000012.sst", s);
            sl_ckpt_subtask_add_file(st, SL_CKPT_SCOPE_SHARED, name, &info);
        }
        sl_sf_info_free(&info);
    }
    sl_ckpt_operator_t *sink = sl_ckpt_metadata_add_operator(md, "file-sink", 7, 1, 1);
    sl_ckpt_subtask_add_blob(&sink->subtasks[0], "pending-transactions", SL_CKPT_DIST_UNION, "", 0);
    sl_ckpt_metadata_set_prop(md, "execution.checkpointing.mode", "EXACTLY_ONCE");
    sl_ckpt_metadata_set_prop(md, "sluice.version", "0.1");
    sl_ckpt_metadata_set_prop(md, "removed", "x");
    sl_ckpt_metadata_set_prop(md, "removed", NULL);
    return md;
}

TEST(metadata_round_trip) {
    sl_ckpt_metadata_t *md = sample_metadata(42, "job-a");
    CHECK_EQ(sl_ckpt_metadata_validate(md, err, sizeof err), 0);
    CHECK_EQ(md->nprops, 2);
    CHECK_STR(sl_ckpt_metadata_get_prop(md, "sluice.version"), "0.1");
    const char *path = tpath("md-roundtrip");
    CHECK_EQ(sl_ckpt_metadata_write_file(md, path, err, sizeof err), 0);
    sl_ckpt_metadata_t *back;
    CHECK_EQ(sl_ckpt_metadata_read_file(path, &back, err, sizeof err), 0);
    CHECK(sl_ckpt_metadata_equal(md, back));
    CHECK_EQ(back->checkpoint_id, 42);
    CHECK_STR(back->job_name, "fraud pipeline");
    CHECK_STR(back->backend, "heap");
    CHECK_EQ(back->noperators, 3);
    const sl_ckpt_operator_t *win = sl_ckpt_metadata_find_operator(back, "window-5m");
    CHECK(win != NULL);
    CHECK_EQ(win->index, 3);
    CHECK_EQ(win->parallelism, 4);
    CHECK_EQ(win->subtasks[2].range.start, 64);
    CHECK_EQ(win->subtasks[2].range.end, 96);
    CHECK_EQ(win->subtasks[1].nhandles, 2);
    CHECK_EQ(win->subtasks[1].handles[1].scope, SL_CKPT_SCOPE_SHARED);
    CHECK_EQ(win->subtasks[3].handles[0].nsections, 32);
    const sl_ckpt_operator_t *src = sl_ckpt_metadata_find_operator(back, "kafka-source");
    const sl_ckpt_blob_t *b = sl_ckpt_find_blob(src->subtasks[1].blobs, src->subtasks[1].nblobs, "source-offsets");
    CHECK(b != NULL);
    CHECK_EQ(b->len, strlen("events-1:4201"));
    CHECK(memcmp(b->data, "events-1:4201", b->len) == 0);
    CHECK(sl_ckpt_find_blob(src->blobs, src->nblobs, "enumerator") != NULL);
    CHECK(sl_ckpt_metadata_find_operator(back, "nope") == NULL);
    CHECK(sl_ckpt_metadata_state_size(back) == sl_ckpt_metadata_state_size(md));
    /* Equality is deep. */
    back->operators[2].subtasks[0].blobs[0].distribution = SL_CKPT_DIST_SPLIT;
    CHECK(!sl_ckpt_metadata_equal(md, back));
    sl_ckpt_metadata_free(back);

    /* A savepoint: self-contained, canonical. */
    md->type = SL_CKPT_SAVEPOINT;
    md->format = SL_CKPT_FORMAT_CANONICAL;
    CHECK_EQ(sl_ckpt_metadata_validate(md, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "operator 'window-5m' subtask 1: file 'sst-1-000012.sst' is outside the savepoint");
    sl_ckpt_subtask_t *st1 = &md->operators[1].subtasks[1];
    st1->handles[1].scope = SL_CKPT_SCOPE_EXCLUSIVE;
    CHECK_EQ(sl_ckpt_metadata_write_file(md, path, err, sizeof err), 0);
    CHECK_EQ(sl_ckpt_metadata_read_file(path, &back, err, sizeof err), 0);
    CHECK(sl_ckpt_metadata_equal(md, back));
    CHECK_EQ(back->type, SL_CKPT_SAVEPOINT);
    sl_ckpt_metadata_free(back);
    sl_ckpt_metadata_free(md);
}

TEST(metadata_validation) {
    sl_ckpt_metadata_t *md;
#define EXPECT_INVALID(mutate, msg)                                                                                \
    do {                                                                                                           \
        md = sample_metadata(5, "job-v");                                                                          \
        mutate;                                                                                                    \
        CHECK_EQ(sl_ckpt_metadata_validate(md, err, sizeof err), SL_EINVAL);                                       \
        CHECK_CONTAINS(err, msg);                                                                                  \
        /* Writing it is refused too, and leaves no file. */                                                       \
        CHECK_EQ(sl_ckpt_metadata_write_file(md, tpath("md-invalid"), err, sizeof err), SL_EINVAL);                \
        CHECK_CONTAINS(err, "refusing to write invalid checkpoint metadata");                                      \
        CHECK(!exists(tpath("md-invalid")));                                                                       \
        sl_ckpt_metadata_free(md);                                                                                 \
    } while (0)
    EXPECT_INVALID(md->checkpoint_id = 0, "checkpoint id 0");
    EXPECT_INVALID(md->max_parallelism = 0, "max parallelism 0");
    EXPECT_INVALID(sl_ckpt_metadata_set_str(&md->job_id, ""), "no job id");
    EXPECT_INVALID(sl_ckpt_metadata_set_str(&md->operators[2].uid, "window-5m"),
                   "operator 'window-5m': uid used by two operators");
    EXPECT_INVALID(md->operators[2].index = 3, "operator index 3 also used by 'window-5m'");
    EXPECT_INVALID(md->operators[1].subtasks[3].range.end = 129, "subtask 3: key-group range [96, 129) outside [0, 128)");
    EXPECT_INVALID(md->operators[1].subtasks[2].range.start = 10, "subtask 2: key-group range [10, 96) overlaps");
    EXPECT_INVALID(sl_ckpt_metadata_set_str(&md->operators[1].subtasks[0].handles[0].path, "../../etc/passwd"),
                   "'../../etc/passwd' is not a plain file name");
    EXPECT_INVALID(sl_ckpt_metadata_set_str(&md->operators[1].subtasks[0].handles[0].path, ".."),
                   "is not a plain file name");
    EXPECT_INVALID(md->operators[1].subtasks[0].handles[0].sections[3].length = 1u << 20, "lies outside the file");
    EXPECT_INVALID(md->operators[1].subtasks[0].handles[0].sections[3].id = 0, "not strictly ascending");
    EXPECT_INVALID(md->operators[1].subtasks[0].handles[0].scope = 9, "unknown scope 9");
    EXPECT_INVALID(sl_ckpt_operator_add_blob(&md->operators[0], "enumerator", SL_CKPT_DIST_SPLIT, "", 0),
                   "blob name 'enumerator' used twice");
    EXPECT_INVALID(md->operators[1].max_parallelism = 2, "operator 'window-5m': parallelism 4 outside 1..2");
#undef EXPECT_INVALID
    CHECK(sl_ckpt_valid_file_name("chk-1.state"));
    CHECK(!sl_ckpt_valid_file_name("a/b"));
    CHECK(!sl_ckpt_valid_file_name(""));
    CHECK(!sl_ckpt_valid_file_name("."));
    CHECK(!sl_ckpt_valid_file_name("a\nb"));
}

TEST(metadata_flip_every_byte) {
    sl_ckpt_metadata_t *md = sample_metadata(3, "job-f");
    const char *good = tpath("md-flip-good"), *bad = tpath("md-flip-bad");
    CHECK_EQ(sl_ckpt_metadata_write_file(md, good, err, sizeof err), 0);
    size_t n;
    uint8_t *p = slurp(good, &n);
    for (size_t pos = 0; pos < n; pos++) {
        p[pos] ^= 0x10;
        spit(bad, p, n);
        p[pos] ^= 0x10;
        sl_ckpt_metadata_t *back = NULL;
        int rc = sl_ckpt_metadata_read_file(bad, &back, err, sizeof err);
        if (rc != SL_EFORMAT) fprintf(stderr, "metadata flip at %zu: rc %d\n", pos, rc);
        CHECK_EQ(rc, SL_EFORMAT);
        CHECK_CONTAINS(err, bad);
        CHECK(back == NULL);
    }
    for (size_t len = 0; len < n; len += 3) {
        spit(bad, p, len);
        sl_ckpt_metadata_t *back = NULL;
        CHECK_EQ(sl_ckpt_metadata_read_file(bad, &back, err, sizeof err), SL_EFORMAT);
        CHECK_CONTAINS(err, bad);
    }
    sl_free(p);
    sl_ckpt_metadata_free(md);
}

/* The decoder behind the checksums: mutated section bodies written with
 * valid checksums (in memory streams) must be refused or decode to valid
 * metadata, never crash or leak. */
TEST(metadata_decoder_fuzz) {
    sl_ckpt_metadata_t *md = sample_metadata(9, "job-z");
    const char *good = tpath("md-fuzz-good");
    char name[] = "mem://md-fuzz";
    CHECK_EQ(sl_ckpt_metadata_write_file(md, good, err, sizeof err), 0);
    sl_state_file_reader_t *r;
    CHECK_EQ(sl_sf_reader_open(good, SL_SF_KIND_METADATA, 0, &r, err, sizeof err), 0);
    sl_buf_t secs[3] = {{0}};
    for (int i = 0; i < 3; i++) {
        sl_sf_cursor_t c;
        CHECK_EQ(sl_sf_reader_section(r, (uint64_t)i + 1, &c, err, sizeof err), 0);
        sl_buf_append(&secs[i], c.p, c.len);
    }
    sl_sf_reader_close(r);
    int accepted = 0, refused = 0;
    for (int iter = 0; iter < 3000; iter++) {
        int which = (int)(rnd() % 3);
        sl_buf_t m = {0};
        sl_buf_append(&m, secs[which].p, secs[which].len);
        int edits = 1 + (int)(rnd() % 3);
        for (int e = 0; e < edits && m.len; e++) {
            switch (rnd() % 4) {
            case 0: m.p[rnd() % m.len] ^= (uint8_t)(1u << (rnd() % 8)); break;
            case 1: m.p[rnd() % m.len] = (uint8_t)rnd(); break;
            case 2: m.len = rnd() % m.len; break;
            case 3: m.p[rnd() % m.len] = 0xff; break;
            }
        }
        mem_out_t mo = {.base = {&mem_out_ops, name}, .budget = SIZE_MAX};
        sl_state_file_writer_t *w;
        CHECK_EQ(sl_sf_writer_new(&mo.base, SL_SF_KIND_METADATA, &w, err, sizeof err), 0);
        for (int i = 0; i < 3; i++) {
            if (i == which && rnd() % 20 == 0) continue; /* sometimes drop a section */
            sl_sf_begin_section(w, (uint64_t)i + 1);
            if (i == which) sl_sf_put_raw(w, m.p, m.len);
            else sl_sf_put_raw(w, secs[i].p, secs[i].len);
        }
        CHECK_EQ(sl_sf_writer_close(w, NULL, err, sizeof err), 0);
        sl_buf_free(&m);
        sl_ckpt_metadata_t *back = NULL;
        mem_in_t mi = {.base = {&mem_in_ops, name, mo.data.len}, .p = mo.data.p};
        int rc = sl_ckpt_metadata_read(&mi.base, &back, err, sizeof err);
        sl_buf_free(&mo.data);
        if (rc == 0) {
            CHECK_EQ(sl_ckpt_metadata_validate(back, err, sizeof err), 0);
            sl_ckpt_metadata_free(back);
            accepted++;
        } else {
            CHECK_EQ(rc, SL_EFORMAT);
            CHECK_CONTAINS(err, name);
            CHECK(back == NULL);
            refused++;
        }
    }
    fprintf(stderr, "metadata_decoder_fuzz: %d refused, %d accepted\n", refused, accepted);
    CHECK(refused > 1000);
    for (int i = 0; i < 3; i++) sl_buf_free(&secs[i]);
    sl_ckpt_metadata_free(md);
}

/* ------------------------------------------------------------------ */
/* Storage. */

static const char *base_dir(const char *name) { return tpath(name); }

/* Writes one keyed state file per subtask of a 2-subtask operator into
 * checkpoint id (key groups as sections; each section holds id and kg),
 * plus a shared file, and returns the metadata describing them. */
static sl_ckpt_metadata_t *write_checkpoint(sl_ckpt_storage_t *s, int64_t id) {
    sl_ckpt_metadata_t *md = sl_ckpt_metadata_new(id, s->job_id, "test job", 16);
    md->trigger_ts = id * 1000;
    md->completion_ts = id * 1000 + 5;
    sl_ckpt_metadata_set_str(&md->backend, "heap");
    sl_ckpt_operator_t *op = sl_ckpt_metadata_add_operator(md, "counter", 1, 2, 16);
    if (s->ops->create_checkpoint(s, id, err, sizeof err)) return md;
    for (int st = 0; st < 2; st++) {
        char name[64];
        snprintf(name, sizeof name, "counter-%d.keyed", st);
        sl_ckpt_out_t *out;
        if (s->ops->open_output(s, id, SL_CKPT_SCOPE_EXCLUSIVE, name, &out, err, sizeof err)) return md;
        sl_state_file_writer_t *w;
        if (sl_sf_writer_new(out, SL_SF_KIND_KEYED, &w, err, sizeof err)) return md;
        sl_kg_range_t r = op->subtasks[st].range;
        for (int kg = r.start; kg < r.end; kg++) {
            sl_sf_begin_section(w, (uint64_t)kg);
            sl_sf_put_svarint(w, id);
            sl_sf_put_varint(w, (uint64_t)kg);
        }
        sl_sf_info_t info;
        if (sl_sf_writer_close(w, &info, err, sizeof err)) return md;
        sl_ckpt_subtask_add_file(&op->subtasks[st], SL_CKPT_SCOPE_EXCLUSIVE, name, &info);
        sl_sf_info_free(&info);
        char off[32];
        int n = snprintf(off, sizeof off, "offset=%" PRId64, id * 10 + st);
        sl_ckpt_subtask_add_blob(&op->subtasks[st], "offsets", SL_CKPT_DIST_SPLIT, off, (size_t)n);
    }
    /* A shared file (as an incremental checkpoint would reference). */
    char name[64];
    snprintf(name, sizeof name, "shared-%" PRId64 ".sst", id);
    sl_ckpt_out_t *out;
    if (s->ops->open_output(s, id, SL_CKPT_SCOPE_SHARED, name, &out, err, sizeof err)) return md;
    sl_state_file_writer_t *w;
    if (sl_sf_writer_new(out, SL_SF_KIND_RAW, &w, err, sizeof err)) return md;
    sl_sf_begin_section(w, 0);
    sl_sf_put_str(w, "sst bytes");
    sl_sf_info_t info;
    if (sl_sf_writer_close(w, &info, err, sizeof err)) return md;
    sl_ckpt_subtask_add_file(&op->subtasks[0], SL_CKPT_SCOPE_SHARED, name, &info);
    sl_sf_info_free(&info);
    return md;
}

/* Reads back every state file of md through the storage and checks its
 * contents. */
static int check_state(sl_ckpt_storage_t *s, const sl_ckpt_metadata_t *md) {
    const sl_ckpt_operator_t *op = &md->operators[0];
    for (int st = 0; st < op->parallelism; st++) {
        const sl_ckpt_state_handle_t *h = &op->subtasks[st].handles[0];
        sl_state_file_reader_t *r;
        int rc = sl_ckpt_storage_open_state(s, md->checkpoint_id, h, 0, &r, err, sizeof err);
        if (rc) return rc;
        for (int kg = op->subtasks[st].range.start; kg < op->subtasks[st].range.end; kg++) {
            sl_sf_cursor_t c;
            int64_t id;
            uint64_t k;
            if ((rc = sl_sf_reader_section(r, (uint64_t)kg, &c, err, sizeof err))) break;
            sl_sf_get_svarint(&c, &id);
            sl_sf_get_varint(&c, &k);
            if (c.rc || id != md->checkpoint_id || k != (uint64_t)kg || !sl_sf_cursor_eof(&c)) {
                rc = SL_EFORMAT;
                break;
            }
        }
        sl_sf_reader_close(r);
        if (rc) return rc;
    }
    return 0;
}

/* A checkpoint that refers to the shared files names[0..n) (uploaded
 * here when missing), as incremental checkpoints do. */
static int commit_sharing(sl_ckpt_storage_t *s, int64_t id, const char *const *names, int n, bool complete) {
    sl_ckpt_metadata_t *md = sl_ckpt_metadata_new(id, s->job_id, "test job", 16);
    sl_ckpt_operator_t *op = sl_ckpt_metadata_add_operator(md, "rocks", 1, 1, 16);
    int rc = s->ops->create_checkpoint(s, id, err, sizeof err);
    for (int i = 0; i < n && rc == 0; i++) {
        char loc[1024];
        s->ops->location(s, id, SL_CKPT_SCOPE_SHARED, names[i], loc, sizeof loc);
        sl_sf_info_t info;
        memset(&info, 0, sizeof info);
        info.kind = SL_SF_KIND_FOREIGN;
        info.size = 3;
        if (!exists(loc)) {
            sl_ckpt_out_t *out;
            if ((rc = s->ops->open_output(s, id, SL_CKPT_SCOPE_SHARED, names[i], &out, err, sizeof err))) break;
            out->ops->write(out, "sst", 3, err, sizeof err);
            rc = out->ops->finish(out, err, sizeof err);
        }
        sl_ckpt_subtask_add_file(&op->subtasks[0], SL_CKPT_SCOPE_SHARED, names[i], &info);
    }
    if (rc == 0 && complete) rc = s->ops->commit(s, md, err, sizeof err);
    sl_ckpt_metadata_free(md);
    return rc;
}

/* Retention deletes a shared file only when no retained checkpoint refers
 * to it, and never one that only a pending checkpoint has uploaded. */
TEST(retention_of_shared_files) {
    sl_ckpt_storage_t *s;
    const char *base = base_dir("store-shared");
    CHECK_EQ(sl_ckpt_storage_fs_open(base, "job", &s, err, sizeof err), 0);
    const char *c1[] = {"a.sst", "b.sst"}, *c2[] = {"b.sst", "c.sst"}, *c3[] = {"c.sst", "d.sst"};
    int crc = commit_sharing(s, 1, c1, 2, true);
    if (crc) fprintf(stderr, "  %s\n", err);
    CHECK_EQ(crc, 0);
    CHECK_EQ(commit_sharing(s, 2, c2, 2, true), 0);
    CHECK_EQ(commit_sharing(s, 3, c3, 2, false), 0); /* pending: uploaded d.sst, no _metadata yet */
    CHECK_EQ(sl_ckpt_storage_retain(s, 1, err, sizeof err), 0);
    char p[1024];
    const char *all[] = {"a.sst", "b.sst", "c.sst", "d.sst"};
    bool want[] = {false, true, true, true};
    for (int i = 0; i < 4; i++) {
        snprintf(p, sizeof p, "%s/job/shared/%s", base, all[i]);
        CHECK_EQ(exists(p), want[i]);
    }
    s->ops->destroy(s);
}

static int commit_one(sl_ckpt_storage_t *s, int64_t id) {
    sl_ckpt_metadata_t *md = write_checkpoint(s, id);
    int rc = s->ops->commit(s, md, err, sizeof err);
    sl_ckpt_metadata_free(md);
    return rc;
}

TEST(storage_layout_and_round_trip) {
    sl_ckpt_storage_t *s;
    const char *base = base_dir("store1/nested/base");
    CHECK_EQ(sl_ckpt_storage_fs_open(base, "job-1", &s, err, sizeof err), 0);
    CHECK_STR(s->ops->name, "filesystem");
    char loc[1024], want[1024];
    snprintf(want, sizeof want, "%s/job-1/shared", base);
    CHECK(exists(want));
    snprintf(want, sizeof want, "%s/job-1/taskowned", base);
    CHECK(exists(want));
    CHECK_EQ(s->ops->location(s, 4, SL_CKPT_SCOPE_EXCLUSIVE, NULL, loc, sizeof loc), 0);
    snprintf(want, sizeof want, "%s/job-1/chk-4", base);
    CHECK_STR(loc, want);
    CHECK_EQ(s->ops->location(s, 4, SL_CKPT_SCOPE_SHARED, "x.sst", loc, sizeof loc), 0);
    snprintf(want, sizeof want, "%s/job-1/shared/x.sst", base);
    CHECK_STR(loc, want);
    CHECK_EQ(s->ops->location(s, 4, SL_CKPT_SCOPE_EXCLUSIVE, "f", loc, 8), SL_EINVAL);

    /* Nothing yet. */
    int64_t id;
    CHECK_EQ(sl_ckpt_storage_latest_complete_id(s, &id, err, sizeof err), SL_ENOTFOUND);
    CHECK_CONTAINS(err, "no completed checkpoint");
    sl_ckpt_metadata_t *md;
    CHECK_EQ(sl_ckpt_storage_load_latest(s, &md, err, sizeof err), SL_ENOTFOUND);

    sl_ckpt_metadata_t *w = write_checkpoint(s, 1);
    CHECK_EQ(s->ops->commit(s, w, err, sizeof err), 0);
    snprintf(want, sizeof want, "%s/job-1/chk-1/_metadata", base);
    CHECK(exists(want));
    snprintf(want, sizeof want, "%s/job-1/chk-1/_metadata.tmp", base);
    CHECK(!exists(want));
    CHECK_EQ(sl_ckpt_storage_latest_complete_id(s, &id, err, sizeof err), 0);
    CHECK_EQ(id, 1);
    CHECK_EQ(sl_ckpt_storage_load_latest(s, &md, err, sizeof err), 0);
    CHECK(sl_ckpt_metadata_equal(md, w));
    CHECK_EQ(check_state(s, md), 0);
    sl_ckpt_metadata_free(md);
    /* Lazy open of a handle, then one key group. */
    sl_state_file_reader_t *r;
    CHECK_EQ(sl_ckpt_storage_open_state(s, 1, &w->operators[0].subtasks[1].handles[0], SL_SF_LAZY, &r, err,
                                        sizeof err), 0);
    sl_sf_cursor_t c;
    CHECK_EQ(sl_sf_reader_section(r, 12, &c, err, sizeof err), 0);
    sl_sf_reader_close(r);
    /* The shared handle resolves under shared/. */
    CHECK_EQ(sl_ckpt_storage_open_state(s, 1, &w->operators[0].subtasks[0].handles[1], 0, &r, err, sizeof err), 0);
    sl_sf_reader_close(r);

    /* Committing the same checkpoint again is refused. */
    CHECK_EQ(s->ops->commit(s, w, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "already complete");
    /* So is re-creating it. */
    CHECK_EQ(s->ops->create_checkpoint(s, 1, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "exists and is complete");
    /* Metadata of another job, or a savepoint, is not committed here. */
    sl_ckpt_metadata_set_str(&w->job_id, "job-2");
    CHECK_EQ(s->ops->commit(s, w, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "job 'job-2'");
    sl_ckpt_metadata_free(w);
    /* Invalid metadata is refused before anything is written. */
    CHECK_EQ(s->ops->create_checkpoint(s, 5, err, sizeof err), 0);
    w = sl_ckpt_metadata_new(5, "job-1", "j", 16);
    sl_ckpt_metadata_add_operator(w, "", 0, 1, 16);
    CHECK_EQ(s->ops->commit(s, w, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "chk-5/_metadata: refusing to commit invalid checkpoint metadata: operator 0 has no uid");
    snprintf(want, sizeof want, "%s/job-1/chk-5/_metadata", base);
    CHECK(!exists(want));
    snprintf(want, sizeof want, "%s/job-1/chk-5/_metadata.tmp", base);
    CHECK(!exists(want));
    sl_ckpt_metadata_free(w);
    /* Commit without a directory. */
    w = sl_ckpt_metadata_new(77, "job-1", "j", 16);
    CHECK_EQ(s->ops->commit(s, w, err, sizeof err), SL_ENOTFOUND);
    CHECK_CONTAINS(err, "chk-77");
    sl_ckpt_metadata_free(w);
    /* Bad file names. */
    sl_ckpt_out_t *out;
    CHECK_EQ(s->ops->create_checkpoint(s, 2, err, sizeof err), 0);
    static const char *const bad[] = {"../escape", "a/b", "", "..", "_metadata", "_metadata.tmp"};
    for (size_t i = 0; i < SL_ARRAY_LEN(bad); i++) {
        CHECK_EQ(s->ops->open_output(s, 2, SL_CKPT_SCOPE_EXCLUSIVE, bad[i], &out, err, sizeof err), SL_EINVAL);
        CHECK(out == NULL);
    }
    CHECK_EQ(s->ops->open_output(s, 99, SL_CKPT_SCOPE_EXCLUSIVE, "x", &out, err, sizeof err), SL_ENOTFOUND);
    CHECK_CONTAINS(err, "chk-99/x");
    CHECK_EQ(s->ops->create_checkpoint(s, 0, err, sizeof err), SL_EINVAL);
    /* A bad job id. */
    sl_ckpt_storage_t *s2;
    CHECK_EQ(sl_ckpt_storage_fs_open(base, "../x", &s2, err, sizeof err), SL_EINVAL);
    s->ops->destroy(s);
}

TEST(storage_commit_atomicity) {
    sl_ckpt_storage_t *s;
    const char *base = base_dir("store2");
    CHECK_EQ(sl_ckpt_storage_fs_open(base, "job", &s, err, sizeof err), 0);
    CHECK_EQ(commit_one(s, 1), 0);
    CHECK_EQ(commit_one(s, 2), 0);
    /* Checkpoint 3: every state file written, and even a complete
     * _metadata.tmp, but the process "dies" before the rename. */
    sl_ckpt_metadata_t *md3 = write_checkpoint(s, 3);
    char tmp[1024], fin[1024];
    snprintf(tmp, sizeof tmp, "%s/job/chk-3/_metadata.tmp", base);
    snprintf(fin, sizeof fin, "%s/job/chk-3/_metadata", base);
    CHECK_EQ(sl_ckpt_metadata_write_file(md3, tmp, err, sizeof err), 0);
    CHECK(!exists(fin));
    /* Checkpoint 4: a directory and nothing else. */
    CHECK_EQ(s->ops->create_checkpoint(s, 4, err, sizeof err), 0);

    int64_t id;
    CHECK_EQ(sl_ckpt_storage_latest_complete_id(s, &id, err, sizeof err), 0);
    CHECK_EQ(id, 2);
    sl_ckpt_metadata_t *md;
    CHECK_EQ(sl_ckpt_storage_load_latest(s, &md, err, sizeof err), 0);
    CHECK_EQ(md->checkpoint_id, 2);
    CHECK_EQ(check_state(s, md), 0);
    sl_ckpt_metadata_free(md);
    CHECK_EQ(s->ops->load(s, 3, &md, err, sizeof err), SL_ENOTFOUND);
    CHECK_CONTAINS(err, fin);
    CHECK_CONTAINS(err, "incomplete");
    CHECK_EQ(s->ops->load(s, 5, &md, err, sizeof err), SL_ENOTFOUND);
    CHECK_CONTAINS(err, "chk-5");

    sl_ckpt_entry_t *v;
    int n;
    CHECK_EQ(s->ops->list(s, &v, &n, err, sizeof err), 0);
    CHECK_EQ(n, 4);
    CHECK(v[0].id == 1 && v[0].complete && v[1].id == 2 && v[1].complete);
    CHECK(v[2].id == 3 && !v[2].complete && v[3].id == 4 && !v[3].complete);
    sl_free(v);

    /* Aborting: a pending one goes, a complete one is refused. */
    CHECK_EQ(s->ops->abort_pending(s, 2, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "is complete");
    CHECK_EQ(s->ops->abort_pending(s, 3, err, sizeof err), 0);
    CHECK(!exists(tmp));
    snprintf(tmp, sizeof tmp, "%s/job/chk-3", base);
    CHECK(!exists(tmp));
    CHECK_EQ(s->ops->abort_pending(s, 3, err, sizeof err), SL_ENOTFOUND);

    /* Re-creating a leftover incomplete directory starts it clean. */
    snprintf(tmp, sizeof tmp, "%s/job/chk-4/stale.keyed", base);
    spit(tmp, "junk", 4);
    CHECK_EQ(s->ops->create_checkpoint(s, 4, err, sizeof err), 0);
    CHECK(!exists(tmp));
    /* Leftovers are cleared at startup. */
    CHECK_EQ(s->ops->create_checkpoint(s, 6, err, sizeof err), 0);
    CHECK_EQ(sl_ckpt_storage_abort_all_pending(s, err, sizeof err), 0);
    int64_t *ids;
    CHECK_EQ(s->ops->list(s, &v, &n, err, sizeof err), 0);
    CHECK_EQ(n, 2);
    sl_free(v);
    CHECK_EQ(sl_ckpt_storage_list_completed(s, &ids, &n, err, sizeof err), 0);
    CHECK_EQ(n, 2);
    sl_free(ids);

    /* Checkpoint 3 can now be committed properly (after a restart). */
    sl_ckpt_metadata_free(md3);
    CHECK_EQ(commit_one(s, 3), 0);
    CHECK_EQ(sl_ckpt_storage_latest_complete_id(s, &id, err, sizeof err), 0);
    CHECK_EQ(id, 3);

    /* Names that are not checkpoints are ignored by the listing. */
    static const char *const junk[] = {"chk-01", "chk-x", "chk-0", "chk-", "chk-99999999999999999999", "other"};
    for (size_t i = 0; i < SL_ARRAY_LEN(junk); i++) {
        snprintf(tmp, sizeof tmp, "%s/job/%s", base, junk[i]);
        CHECK_EQ(mkdir(tmp, 0755), 0);
    }
    snprintf(tmp, sizeof tmp, "%s/job/chk-50", base); /* a file, not a directory */
    spit(tmp, "x", 1);
    CHECK_EQ(s->ops->list(s, &v, &n, err, sizeof err), 0);
    CHECK_EQ(n, 3);
    CHECK(v[0].id == 1 && v[1].id == 2 && v[2].id == 3);
    sl_free(v);
    s->ops->destroy(s);
}

TEST(storage_retention) {
    sl_ckpt_storage_t *s;
    const char *base = base_dir("store3");
    CHECK_EQ(sl_ckpt_storage_fs_open(base, "job", &s, err, sizeof err), 0);
    for (int64_t i = 1; i <= 7; i++) CHECK_EQ(commit_one(s, i), 0);
    CHECK_EQ(s->ops->create_checkpoint(s, 8, err, sizeof err), 0); /* pending */
    CHECK_EQ(sl_ckpt_storage_retain(s, 0, err, sizeof err), SL_EINVAL);
    CHECK_EQ(sl_ckpt_storage_retain(s, 10, err, sizeof err), 0);
    int64_t *ids;
    int n;
    CHECK_EQ(sl_ckpt_storage_list_completed(s, &ids, &n, err, sizeof err), 0);
    CHECK_EQ(n, 7);
    sl_free(ids);

    CHECK_EQ(sl_ckpt_storage_retain(s, 3, err, sizeof err), 0);
    CHECK_EQ(sl_ckpt_storage_list_completed(s, &ids, &n, err, sizeof err), 0);
    CHECK_EQ(n, 3);
    CHECK(ids[0] == 5 && ids[1] == 6 && ids[2] == 7);
    sl_free(ids);
    char p[1024];
    for (int i = 1; i <= 4; i++) {
        snprintf(p, sizeof p, "%s/job/chk-%d", base, i);
        CHECK(!exists(p));
    }
    for (int i = 5; i <= 8; i++) {
        snprintf(p, sizeof p, "%s/job/chk-%d", base, i);
        CHECK(exists(p));
    }
    /* shared files of the discarded checkpoints went with them; those of
     * the retained ones stay */
    for (int i = 1; i <= 7; i++) {
        snprintf(p, sizeof p, "%s/job/shared/shared-%d.sst", base, i);
        CHECK(exists(p) == (i >= 5));
    }
    /* The retained ones still load and their state reads. */
    for (int64_t i = 5; i <= 7; i++) {
        sl_ckpt_metadata_t *md;
        CHECK_EQ(s->ops->load(s, i, &md, err, sizeof err), 0);
        CHECK_EQ(check_state(s, md), 0);
        sl_ckpt_metadata_free(md);
    }
    CHECK_EQ(sl_ckpt_storage_retain(s, 1, err, sizeof err), 0);
    CHECK_EQ(sl_ckpt_storage_list_completed(s, &ids, &n, err, sizeof err), 0);
    CHECK_EQ(n, 1);
    CHECK_EQ(ids[0], 7);
    sl_free(ids);
    /* Discard. */
    CHECK_EQ(s->ops->discard(s, 7, err, sizeof err), 0);
    CHECK_EQ(s->ops->discard(s, 7, err, sizeof err), SL_ENOTFOUND);
    CHECK_CONTAINS(err, "chk-7");
    /* Everything. */
    CHECK_EQ(s->ops->discard_all(s, err, sizeof err), 0);
    snprintf(p, sizeof p, "%s/job", base);
    CHECK(!exists(p));
    CHECK(exists(base));
    s->ops->destroy(s);
}

/* Hashes of every file of a checkpoint directory, to show it untouched. */
static uint64_t dir_fingerprint(const char *base, int64_t id) {
    char p[1024];
    uint64_t h = 0;
    static const char *const names[] = {"_metadata", "counter-0.keyed", "counter-1.keyed"};
    for (size_t i = 0; i < SL_ARRAY_LEN(names); i++) {
        snprintf(p, sizeof p, "%s/job/chk-%" PRId64 "/%s", base, id, names[i]);
        h = sl_mix64(h ^ file_hash(p));
    }
    return h;
}

TEST(storage_corrupt_latest) {
    sl_ckpt_storage_t *s;
    const char *base = base_dir("store4");
    CHECK_EQ(sl_ckpt_storage_fs_open(base, "job", &s, err, sizeof err), 0);
    for (int64_t i = 1; i <= 3; i++) CHECK_EQ(commit_one(s, i), 0);
    uint64_t fp1 = dir_fingerprint(base, 1), fp2 = dir_fingerprint(base, 2);
    sl_ckpt_metadata_t *orig1, *orig2, *md;
    CHECK_EQ(s->ops->load(s, 1, &orig1, err, sizeof err), 0);
    CHECK_EQ(s->ops->load(s, 2, &orig2, err, sizeof err), 0);

    char meta3[1024];
    snprintf(meta3, sizeof meta3, "%s/job/chk-3/_metadata", base);
    size_t n;
    uint8_t *saved = slurp(meta3, &n);
    flip_byte(meta3, n / 2);

    /* The latest is reported, naming the file; no silent fallback. */
    CHECK_EQ(sl_ckpt_storage_load_latest(s, &md, err, sizeof err), SL_EFORMAT);
    CHECK(md == NULL);
    CHECK_CONTAINS(err, meta3);
    CHECK_CONTAINS(err, "corrupt");
    int64_t id;
    CHECK_EQ(sl_ckpt_storage_latest_complete_id(s, &id, err, sizeof err), 0);
    CHECK_EQ(id, 3);
    /* Older retained checkpoints are untouched and load by id. */
    CHECK_EQ(dir_fingerprint(base, 1), fp1);
    CHECK_EQ(dir_fingerprint(base, 2), fp2);
    CHECK_EQ(s->ops->load(s, 2, &md, err, sizeof err), 0);
    CHECK(sl_ckpt_metadata_equal(md, orig2));
    CHECK_EQ(check_state(s, md), 0);
    sl_ckpt_metadata_free(md);
    CHECK_EQ(s->ops->load(s, 1, &md, err, sizeof err), 0);
    CHECK(sl_ckpt_metadata_equal(md, orig1));
    sl_ckpt_metadata_free(md);

    /* A truncated _metadata likewise. */
    spit(meta3, saved, n - 1);
    CHECK_EQ(sl_ckpt_storage_load_latest(s, &md, err, sizeof err), SL_EFORMAT);
    CHECK_CONTAINS(err, meta3);
    CHECK_CONTAINS(err, "truncated");
    spit(meta3, saved, n);
    CHECK_EQ(sl_ckpt_storage_load_latest(s, &md, err, sizeof err), 0);

    /* A damaged state file of the latest checkpoint: reported by name when
     * the restore opens it. */
    char state3[1024];
    snprintf(state3, sizeof state3, "%s/job/chk-3/counter-1.keyed", base);
    size_t sn;
    uint8_t *ssaved = slurp(state3, &sn);
    flip_byte(state3, 20);
    CHECK_EQ(check_state(s, md), SL_EFORMAT);
    CHECK_CONTAINS(err, state3);
    CHECK_CONTAINS(err, "checksum mismatch in section");
    /* A missing one. */
    unlink(state3);
    CHECK_EQ(check_state(s, md), SL_ENOTFOUND);
    CHECK_CONTAINS(err, state3);
    /* A valid state file that is not the one the metadata describes (the
     * one of checkpoint 2, copied over). */
    char state2[1024];
    snprintf(state2, sizeof state2, "%s/job/chk-2/counter-1.keyed", base);
    size_t n2;
    uint8_t *other = slurp(state2, &n2);
    spit(state3, other, n2);
    CHECK_EQ(check_state(s, md), SL_EFORMAT);
    CHECK_CONTAINS(err, state3);
    CHECK_CONTAINS(err, "not the file the checkpoint's metadata describes");
    spit(state3, ssaved, sn);
    CHECK_EQ(check_state(s, md), 0);
    sl_ckpt_metadata_free(md);

    /* _metadata of another checkpoint placed in chk-9. */
    CHECK_EQ(s->ops->create_checkpoint(s, 9, err, sizeof err), 0);
    char meta9[1024], meta1[1024];
    snprintf(meta9, sizeof meta9, "%s/job/chk-9/_metadata", base);
    snprintf(meta1, sizeof meta1, "%s/job/chk-1/_metadata", base);
    size_t n1;
    uint8_t *m1 = slurp(meta1, &n1);
    spit(meta9, m1, n1);
    CHECK_EQ(s->ops->load(s, 9, &md, err, sizeof err), SL_EFORMAT);
    CHECK_CONTAINS(err, meta9);
    CHECK_CONTAINS(err, "describes checkpoint 1 but lies in chk-9");
    /* A state file where _metadata should be. */
    spit(meta9, ssaved, sn);
    CHECK_EQ(s->ops->load(s, 9, &md, err, sizeof err), SL_EFORMAT);
    CHECK_CONTAINS(err, "holds keyed state");

    sl_free(m1);
    sl_free(other);
    sl_free(ssaved);
    sl_free(saved);
    sl_ckpt_metadata_free(orig1);
    sl_ckpt_metadata_free(orig2);
    s->ops->destroy(s);
}

int main(void) {
    RUN(sf_round_trip);
    RUN(sf_empty_file_and_kinds);
    RUN(sf_writer_misuse);
    RUN(sf_flip_every_byte);
    RUN(sf_truncate_and_extend);
    RUN(sf_wrong_magic_version_missing);
    RUN(sf_other_streams_and_io_errors);
    RUN(cursor_malformed);
    RUN(cursor_fuzz);
    RUN(metadata_round_trip);
    RUN(metadata_validation);
    RUN(metadata_flip_every_byte);
    RUN(metadata_decoder_fuzz);
    RUN(storage_layout_and_round_trip);
    RUN(storage_commit_atomicity);
    RUN(storage_retention);
    RUN(retention_of_shared_files);
    RUN(storage_corrupt_latest);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", sl_test_tmpdir());
    if (!sl_test_failures && system(cmd) != 0) fprintf(stderr, "could not remove %s\n", sl_test_tmpdir());
    TEST_MAIN_END();
}
