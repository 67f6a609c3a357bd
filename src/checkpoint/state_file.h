/*
 * state_file.h — the checksummed file format of everything sluice writes
 * into checkpoint storage (state files and the checkpoint's _metadata), and
 * the byte streams it is written to and read from.
 *
 * A state file is a sequence of sections (one per key group, for example),
 * each identified by a 64-bit id, followed by a section table and a
 * fixed-size trailer.  All integers are little-endian.
 *
 *     header   16 B   u64 magic "SLSTATE1"  u32 version  u32 kind
 *     body            the sections' bytes, back to back, in write order;
 *                     every byte of the body belongs to exactly one section
 *     table  32 B × n per section, in ascending id order:
 *                     u64 id  u64 offset  u64 length  u64 xxh3(section bytes)
 *     trailer  56 B   u64 table_offset  u32 section_count  u32 kind
 *                     u64 total_length  u32 version  u32 reserved (0)
 *                     u64 file_checksum = xxh3(bytes [0, trailer + 32))
 *                     u64 meta_checksum = xxh3(header ‖ bytes [table_offset, trailer + 40))
 *                     u64 magic "SLSTEND1"
 *
 * Every byte of a file is covered: the body by the section checksums and the
 * file checksum, the header, table and trailer by the meta checksum (which
 * also covers the file checksum), and the magic by comparison.  So a reader
 * can verify the whole file (the default), or verify the header, table and
 * trailer at open and each section when it is read (SL_SF_LAZY, for a
 * restore that reads a few key groups of a large file).  In both modes no
 * byte reaches the caller before the checksum covering it has been checked.
 *
 * `kind` says what the file holds (SL_SF_KIND_*); a reader names the kind
 * it expects, so a metadata file is never read as keyed state.
 *
 * Errors: functions return 0 or a negative SL_E* code and write a message
 * that names the file and the damage into err (errlen bytes):
 *   SL_ENOTFOUND  the file (or a section) does not exist
 *   SL_EIO        the operating system failed a read or write (retriable)
 *   SL_EFORMAT    the file is damaged or not a sluice state file (fatal)
 *   SL_EINVAL     the caller broke the API's rules (a bug)
 *
 * Threading: a writer, reader or cursor belongs to one thread at a time.
 */
#ifndef SL_CKPT_STATE_FILE_H
#define SL_CKPT_STATE_FILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SL_SF_VERSION 1u
#define SL_SF_HEADER_SIZE 16u
#define SL_SF_TABLE_ENTRY_SIZE 32u
#define SL_SF_TRAILER_SIZE 56u

/* What a file holds.  New kinds may be added; numbers never change. */
enum {
    SL_SF_KIND_ANY = 0,        /* only as the expected kind of a reader: accept any */
    SL_SF_KIND_METADATA = 1,   /* a checkpoint's or savepoint's _metadata */
    SL_SF_KIND_KEYED = 2,      /* keyed state; one section per key group */
    SL_SF_KIND_OPERATOR = 3,   /* operator (non-keyed) state */
    SL_SF_KIND_CHANNEL = 4,    /* in-flight records of an unaligned checkpoint */
    SL_SF_KIND_RAW = 5,        /* anything else (tests, tools) */
    SL_SF_KIND_FOREIGN = 6,    /* not a state file: another format's file (RocksDB's SSTs, MANIFEST...) kept
                                * whole; its handle's checksum is the xxh3-64 of every byte */
};

/* ------------------------------------------------------------------ */
/* Byte streams.  A storage implementation (storage.h) hands these out; the
 * local-file ones below serve the filesystem storage and tests.  An
 * S3-compatible store implements them as a multipart upload and ranged GETs.
 */

typedef struct sl_ckpt_out sl_ckpt_out_t;
typedef struct sl_ckpt_out_ops {
    /* Appends n bytes.  On error the stream is still open: abort it. */
    int (*write)(sl_ckpt_out_t *o, const void *p, size_t n, char *err, size_t errlen);
    /* Makes every byte written durable (fsync) and releases the stream,
     * whether it succeeds or not. */
    int (*finish)(sl_ckpt_out_t *o, char *err, size_t errlen);
    /* Releases the stream and removes what was written (best effort). */
    void (*abort)(sl_ckpt_out_t *o);
} sl_ckpt_out_ops_t;
struct sl_ckpt_out {
    const sl_ckpt_out_ops_t *ops;
    char *name; /* where the bytes go (a path or URI), for messages; owned by the stream */
};

typedef struct sl_ckpt_in sl_ckpt_in_t;
typedef struct sl_ckpt_in_ops {
    /* Reads exactly n bytes at off; reading past the end is SL_EFORMAT
     * ("truncated"). */
    int (*read_at)(sl_ckpt_in_t *in, uint64_t off, void *p, size_t n, char *err, size_t errlen);
    void (*close)(sl_ckpt_in_t *in);
} sl_ckpt_in_ops_t;
struct sl_ckpt_in {
    const sl_ckpt_in_ops_t *ops;
    char *name;    /* for messages; owned by the stream */
    uint64_t size; /* the object's size when it was opened */
};

/* A local file created (or truncated) at path, mode 0644.  durable: finish
 * fsyncs the file.  The caller fsyncs the directory when the name must
 * survive a crash (the storage's commit does). */
int sl_ckpt_out_open_file(const char *path, bool durable, sl_ckpt_out_t **out, char *err, size_t errlen);
/* A local file opened for reading — or, for an "s3://bucket/key" path, that
 * object (sl_ckpt_in_open_s3).  SL_ENOTFOUND when it does not exist. */
int sl_ckpt_in_open_file(const char *path, sl_ckpt_in_t **in, char *err, size_t errlen);
/* The object at "s3://bucket/key", read with ranged GETs (s3_storage.c;
 * credentials as sl_s3_config_resolve). */
int sl_ckpt_in_open_s3(const char *uri, sl_ckpt_in_t **in, char *err, size_t errlen);

/* ------------------------------------------------------------------ */
/* Writing.  An append-only writer: begin a section, put bytes, begin the
 * next (which ends the previous one), ..., close.  Bytes can only be put
 * inside a section.  Section ids must be unique within a file; they may be
 * begun in any order.
 *
 * The put functions keep the first error (sticky, like a stream's error
 * flag): after an error they do nothing and return it, and close reports
 * it.  So a caller may put many values and check once, at close.
 */

typedef struct sl_state_file_writer sl_state_file_writer_t;

/* Where one section of a finished file lives. */
typedef struct sl_sf_section {
    uint64_t id;
    uint64_t offset;
    uint64_t length;
    uint64_t checksum; /* xxh3 of the section's bytes */
} sl_sf_section_t;

/* What a finished file is: the facts a state handle records. */
typedef struct sl_sf_info {
    uint64_t size;          /* total bytes */
    uint64_t checksum;      /* the file checksum (as stored in the trailer) */
    uint32_t kind;
    int nsections;
    sl_sf_section_t *sections; /* ascending id; owned (sl_sf_info_free) */
} sl_sf_info_t;
void sl_sf_info_free(sl_sf_info_t *info);

/* A writer over out (ownership of out passes to the writer, also on
 * error).  kind: SL_SF_KIND_* (not ANY). */
int sl_sf_writer_new(sl_ckpt_out_t *out, uint32_t kind, sl_state_file_writer_t **w, char *err, size_t errlen);
/* Convenience: a writer over a new durable local file at path. */
int sl_sf_writer_open(const char *path, uint32_t kind, sl_state_file_writer_t **w, char *err, size_t errlen);

/* Ends the current section (if any) and begins section id. */
int sl_sf_begin_section(sl_state_file_writer_t *w, uint64_t id);
/* Ends the current section; later puts fail until the next begin. */
int sl_sf_end_section(sl_state_file_writer_t *w);

int sl_sf_put_raw(sl_state_file_writer_t *w, const void *p, size_t n);
int sl_sf_put_u8(sl_state_file_writer_t *w, uint8_t v);
int sl_sf_put_u32(sl_state_file_writer_t *w, uint32_t v);  /* 4 bytes LE */
int sl_sf_put_u64(sl_state_file_writer_t *w, uint64_t v);  /* 8 bytes LE */
int sl_sf_put_i64(sl_state_file_writer_t *w, int64_t v);   /* 8 bytes LE */
int sl_sf_put_varint(sl_state_file_writer_t *w, uint64_t v);  /* LEB128, 1..10 bytes */
int sl_sf_put_svarint(sl_state_file_writer_t *w, int64_t v);  /* zigzag LEB128 */
/* varint length, then the bytes. */
int sl_sf_put_bytes(sl_state_file_writer_t *w, const void *p, size_t n);
/* A string as bytes (NULL is written as ""). */
int sl_sf_put_str(sl_state_file_writer_t *w, const char *s);

/* The first error, or 0; its message (empty when none). */
int sl_sf_writer_error(const sl_state_file_writer_t *w);
const char *sl_sf_writer_message(const sl_state_file_writer_t *w);
/* Bytes written so far (the offset of the next byte). */
uint64_t sl_sf_writer_offset(const sl_state_file_writer_t *w);

/* Writes the table and trailer, finishes the stream (durable) and frees
 * the writer.  On success fills *info (may be NULL) for the state handle.
 * On any error — sticky or now — the stream is aborted (the partial file
 * removed) and the error returned with its message. */
int sl_sf_writer_close(sl_state_file_writer_t *w, sl_sf_info_t *info, char *err, size_t errlen);
/* Abandons the file: aborts the stream and frees the writer. */
void sl_sf_writer_abort(sl_state_file_writer_t *w);

/* ------------------------------------------------------------------ */
/* Reading bytes: a bounds-checked cursor over one section (or any byte
 * range).  A get never reads past the end; a malformed value (overlong
 * varint, length beyond the end) is SL_EFORMAT.  Errors are sticky: after
 * one every get returns it and zeroes its output.  sl_sf_cursor_error
 * formats the message, naming the file, the section and the offset. */

typedef struct sl_sf_cursor {
    const uint8_t *p;
    size_t len, pos;
    int rc;              /* first error, or 0 */
    const char *why;     /* what was wrong (static string) */
    size_t why_at;       /* offset within the section where it was found */
    const char *name;    /* file name for messages (not owned; may be NULL) */
    uint64_t section;    /* section id for messages */
} sl_sf_cursor_t;

/* A cursor over len bytes at p (not copied; must outlive the cursor). */
void sl_sf_cursor_init(sl_sf_cursor_t *c, const void *p, size_t len, const char *name, uint64_t section);

int sl_sf_get_raw(sl_sf_cursor_t *c, void *dst, size_t n);
/* Points *p at the next n bytes inside the section (no copy). */
int sl_sf_get_view(sl_sf_cursor_t *c, const void **p, size_t n);
int sl_sf_get_u8(sl_sf_cursor_t *c, uint8_t *v);
int sl_sf_get_u32(sl_sf_cursor_t *c, uint32_t *v);
int sl_sf_get_u64(sl_sf_cursor_t *c, uint64_t *v);
int sl_sf_get_i64(sl_sf_cursor_t *c, int64_t *v);
int sl_sf_get_varint(sl_sf_cursor_t *c, uint64_t *v);
int sl_sf_get_svarint(sl_sf_cursor_t *c, int64_t *v);
/* A varint that must be <= max (for ints, enum values ...). */
int sl_sf_get_varint_max(sl_sf_cursor_t *c, uint64_t max, uint64_t *v);
/* A count of elements that take at least min_elem_size (>= 1) bytes each:
 * a count larger than the bytes left could hold is malformed, so a caller
 * may allocate count elements without trusting the file. */
int sl_sf_get_count(sl_sf_cursor_t *c, size_t min_elem_size, size_t *n);
/* Bytes written by sl_sf_put_bytes: a view into the section. */
int sl_sf_get_bytes(sl_sf_cursor_t *c, const void **p, size_t *n);
/* A string written by sl_sf_put_str, copied into a new NUL-terminated
 * allocation (caller frees with sl_free).  Embedded NULs are malformed. */
int sl_sf_get_str(sl_sf_cursor_t *c, char **s);

/* Records a semantic error found by the caller (e.g. "key-group range out
 * of bounds") at the current offset; returns SL_EFORMAT.  Keeps an earlier
 * error. */
int sl_sf_cursor_fail(sl_sf_cursor_t *c, const char *why);
static inline bool sl_sf_cursor_eof(const sl_sf_cursor_t *c) { return c->pos >= c->len; }
static inline size_t sl_sf_cursor_left(const sl_sf_cursor_t *c) { return c->len - c->pos; }
/* Formats "<file>: section <id>: <why> at byte <n>" into err; returns
 * the cursor's error code (0 when there was none). */
int sl_sf_cursor_error(const sl_sf_cursor_t *c, char *err, size_t errlen);

/* ------------------------------------------------------------------ */
/* Reading files. */

typedef struct sl_state_file_reader sl_state_file_reader_t;

enum {
    /* Verify header, table and trailer at open, and each section's
     * checksum when it is opened, instead of the whole file at open. */
    SL_SF_LAZY = 1,
};

/* Opens a state file over in (ownership passes, also on error) and
 * verifies it: magic, version, length, kind (unless expect_kind is
 * SL_SF_KIND_ANY), table, and — unless SL_SF_LAZY — every checksum.  No
 * data is returned by a file that fails. */
int sl_sf_reader_new(sl_ckpt_in_t *in, uint32_t expect_kind, int flags, sl_state_file_reader_t **r, char *err,
                     size_t errlen);
/* Convenience: the same over a local file. */
int sl_sf_reader_open(const char *path, uint32_t expect_kind, int flags, sl_state_file_reader_t **r, char *err,
                      size_t errlen);
void sl_sf_reader_close(sl_state_file_reader_t *r);

const char *sl_sf_reader_name(const sl_state_file_reader_t *r);
uint32_t sl_sf_reader_kind(const sl_state_file_reader_t *r);
uint64_t sl_sf_reader_size(const sl_state_file_reader_t *r);
uint64_t sl_sf_reader_checksum(const sl_state_file_reader_t *r);
int sl_sf_reader_section_count(const sl_state_file_reader_t *r);
/* The i-th section (ascending id order), 0 <= i < count. */
const sl_sf_section_t *sl_sf_reader_section_at(const sl_state_file_reader_t *r, int i);
/* The section with this id, or NULL. */
const sl_sf_section_t *sl_sf_reader_find(const sl_state_file_reader_t *r, uint64_t id);

/* Loads section id (verifying its checksum) and points a cursor at its
 * bytes, which the reader owns until it is closed.  SL_ENOTFOUND if the
 * file has no such section. */
int sl_sf_reader_section(sl_state_file_reader_t *r, uint64_t id, sl_sf_cursor_t *c, char *err, size_t errlen);

#endif
