/*
 * metadata.c — the checkpoint metadata: builders, validation, and its
 * encoding as a state file (see metadata.h for the sections).
 *
 * Decoding trusts nothing: the state-file reader has checked every
 * checksum before a byte is decoded, every count is bounded by the bytes
 * left in its section (sl_sf_get_count) before anything is allocated, and
 * the decoded metadata must pass the same validation as one about to be
 * written.  A file that fails any of this is SL_EFORMAT naming the file.
 */
#include "checkpoint/metadata.h"

#include <inttypes.h>
#include <limits.h>
#include <stdio.h>

#include "common/common.h"

enum {
    SEC_CHECKPOINT = 1,
    SEC_OPERATORS = 2,
    SEC_PROPS = 3,
};

#define GROW(arr, n)                                                                                               \
    do {                                                                                                           \
        (arr) = sl_realloc((arr), ((size_t)(n) + 1) * sizeof *(arr));                                              \
        memset(&(arr)[(n)], 0, sizeof *(arr));                                                                     \
    } while (0)

/* ------------------------------------------------------------------ */
/* Building and freeing. */

void sl_ckpt_metadata_set_str(char **field, const char *s) {
    sl_free(*field);
    *field = sl_strdup(s ? s : "");
}

sl_ckpt_metadata_t *sl_ckpt_metadata_new(int64_t checkpoint_id, const char *job_id, const char *job_name,
                                         int max_parallelism) {
    sl_ckpt_metadata_t *md = sl_calloc(1, sizeof *md);
    md->checkpoint_id = checkpoint_id;
    md->type = SL_CKPT_CHECKPOINT;
    md->format = SL_CKPT_FORMAT_NATIVE;
    sl_ckpt_metadata_set_str(&md->job_id, job_id);
    sl_ckpt_metadata_set_str(&md->job_name, job_name);
    sl_ckpt_metadata_set_str(&md->backend, "");
    md->max_parallelism = max_parallelism;
    return md;
}

static void blobs_free(sl_ckpt_blob_t *b, int n) {
    for (int i = 0; i < n; i++) {
        sl_free(b[i].name);
        sl_free(b[i].data);
    }
    sl_free(b);
}

static void subtask_free(sl_ckpt_subtask_t *st) {
    for (int i = 0; i < st->nhandles; i++) {
        sl_free(st->handles[i].path);
        sl_free(st->handles[i].sections);
    }
    sl_free(st->handles);
    blobs_free(st->blobs, st->nblobs);
}

void sl_ckpt_subtask_clear(sl_ckpt_subtask_t *st) {
    subtask_free(st);
    int index = st->index;
    sl_kg_range_t range = st->range;
    memset(st, 0, sizeof *st);
    st->index = index;
    st->range = range;
}

void sl_ckpt_subtask_move(sl_ckpt_subtask_t *dst, sl_ckpt_subtask_t *src) {
    if (src->nhandles) {
        dst->handles = sl_realloc(dst->handles, (size_t)(dst->nhandles + src->nhandles) * sizeof *dst->handles);
        memcpy(dst->handles + dst->nhandles, src->handles, (size_t)src->nhandles * sizeof *src->handles);
        dst->nhandles += src->nhandles;
    }
    if (src->nblobs) {
        dst->blobs = sl_realloc(dst->blobs, (size_t)(dst->nblobs + src->nblobs) * sizeof *dst->blobs);
        memcpy(dst->blobs + dst->nblobs, src->blobs, (size_t)src->nblobs * sizeof *src->blobs);
        dst->nblobs += src->nblobs;
    }
    sl_free(src->handles);
    sl_free(src->blobs);
    src->handles = NULL;
    src->blobs = NULL;
    src->nhandles = src->nblobs = 0;
}

void sl_ckpt_metadata_free(sl_ckpt_metadata_t *md) {
    if (!md) return;
    for (int i = 0; i < md->noperators; i++) {
        sl_ckpt_operator_t *op = &md->operators[i];
        if (op->subtasks)
            for (int s = 0; s < op->parallelism; s++) subtask_free(&op->subtasks[s]);
        sl_free(op->subtasks);
        blobs_free(op->blobs, op->nblobs);
        sl_free(op->uid);
    }
    sl_free(md->operators);
    for (int i = 0; i < md->nprops; i++) {
        sl_free(md->props[i].key);
        sl_free(md->props[i].value);
    }
    sl_free(md->props);
    sl_free(md->job_id);
    sl_free(md->job_name);
    sl_free(md->backend);
    sl_free(md);
}

sl_ckpt_operator_t *sl_ckpt_metadata_add_operator(sl_ckpt_metadata_t *md, const char *uid, int index, int parallelism,
                                                  int max_parallelism) {
    GROW(md->operators, md->noperators);
    sl_ckpt_operator_t *op = &md->operators[md->noperators++];
    op->uid = sl_strdup(uid ? uid : "");
    op->index = index;
    op->parallelism = parallelism > 0 ? parallelism : 0;
    op->max_parallelism = max_parallelism;
    op->subtasks = sl_calloc((size_t)op->parallelism + 1, sizeof *op->subtasks);
    for (int i = 0; i < op->parallelism; i++) {
        op->subtasks[i].index = i;
        if (max_parallelism >= parallelism)
            op->subtasks[i].range = sl_kg_range_for(max_parallelism, parallelism, i);
    }
    return op;
}

sl_ckpt_operator_t *sl_ckpt_metadata_find_operator(const sl_ckpt_metadata_t *md, const char *uid) {
    for (int i = 0; i < md->noperators; i++)
        if (strcmp(md->operators[i].uid, uid) == 0) return &md->operators[i];
    return NULL;
}

sl_ckpt_state_handle_t *sl_ckpt_subtask_add_file(sl_ckpt_subtask_t *st, sl_ckpt_scope_t scope, const char *path,
                                                 const sl_sf_info_t *info) {
    GROW(st->handles, st->nhandles);
    sl_ckpt_state_handle_t *h = &st->handles[st->nhandles++];
    h->path = sl_strdup(path);
    h->scope = (uint8_t)scope;
    h->kind = info->kind;
    h->size = info->size;
    h->checksum = info->checksum;
    h->nsections = info->nsections;
    h->sections = sl_malloc((size_t)info->nsections * sizeof *h->sections + 1);
    if (info->nsections) memcpy(h->sections, info->sections, (size_t)info->nsections * sizeof *h->sections);
    return h;
}

static sl_ckpt_blob_t *add_blob(sl_ckpt_blob_t **blobs, int *n, const char *name, sl_ckpt_distribution_t dist,
                                const void *data, size_t len) {
    GROW(*blobs, *n);
    sl_ckpt_blob_t *b = &(*blobs)[(*n)++];
    b->name = sl_strdup(name ? name : "");
    b->distribution = (uint8_t)dist;
    b->data = sl_malloc(len);
    if (len) memcpy(b->data, data, len);
    b->len = len;
    return b;
}

sl_ckpt_blob_t *sl_ckpt_subtask_add_blob(sl_ckpt_subtask_t *st, const char *name, sl_ckpt_distribution_t dist,
                                         const void *data, size_t len) {
    return add_blob(&st->blobs, &st->nblobs, name, dist, data, len);
}

sl_ckpt_blob_t *sl_ckpt_operator_add_blob(sl_ckpt_operator_t *op, const char *name, sl_ckpt_distribution_t dist,
                                          const void *data, size_t len) {
    return add_blob(&op->blobs, &op->nblobs, name, dist, data, len);
}

const sl_ckpt_blob_t *sl_ckpt_find_blob(const sl_ckpt_blob_t *blobs, int n, const char *name) {
    for (int i = 0; i < n; i++)
        if (strcmp(blobs[i].name, name) == 0) return &blobs[i];
    return NULL;
}

void sl_ckpt_metadata_set_prop(sl_ckpt_metadata_t *md, const char *key, const char *value) {
    for (int i = 0; i < md->nprops; i++) {
        if (strcmp(md->props[i].key, key) != 0) continue;
        if (value) {
            sl_ckpt_metadata_set_str(&md->props[i].value, value);
        } else {
            sl_free(md->props[i].key);
            sl_free(md->props[i].value);
            memmove(&md->props[i], &md->props[i + 1], (size_t)(md->nprops - i - 1) * sizeof *md->props);
            md->nprops--;
        }
        return;
    }
    if (!value) return;
    GROW(md->props, md->nprops);
    md->props[md->nprops].key = sl_strdup(key);
    md->props[md->nprops].value = sl_strdup(value);
    md->nprops++;
}

const char *sl_ckpt_metadata_get_prop(const sl_ckpt_metadata_t *md, const char *key) {
    for (int i = 0; i < md->nprops; i++)
        if (strcmp(md->props[i].key, key) == 0) return md->props[i].value;
    return NULL;
}

uint64_t sl_ckpt_metadata_state_size(const sl_ckpt_metadata_t *md) {
    uint64_t total = 0;
    for (int i = 0; i < md->noperators; i++) {
        const sl_ckpt_operator_t *op = &md->operators[i];
        for (int s = 0; s < op->parallelism; s++)
            for (int h = 0; h < op->subtasks[s].nhandles; h++) total += op->subtasks[s].handles[h].size;
    }
    return total;
}

/* ------------------------------------------------------------------ */
/* Validation. */

bool sl_ckpt_valid_file_name(const char *p) {
    if (!p || !p[0] || strcmp(p, ".") == 0 || strcmp(p, "..") == 0) return false;
    size_t n = 0;
    for (; p[n]; n++)
        if (p[n] == '/' || (unsigned char)p[n] < 0x20 || p[n] == 0x7f) return false;
    return n <= 255;
}

static int validate_blobs(const sl_ckpt_blob_t *b, int n, const char *where, char *err, size_t errlen) {
    for (int i = 0; i < n; i++) {
        if (!b[i].name || !b[i].name[0]) return sl_errf(err, errlen, SL_EINVAL, "%s: blob %d has no name", where, i);
        if (b[i].distribution > SL_CKPT_DIST_BROADCAST)
            return sl_errf(err, errlen, SL_EINVAL, "%s: blob '%s' has unknown distribution %u", where, b[i].name,
                           b[i].distribution);
        for (int j = 0; j < i; j++)
            if (strcmp(b[i].name, b[j].name) == 0)
                return sl_errf(err, errlen, SL_EINVAL, "%s: blob name '%s' used twice", where, b[i].name);
    }
    return 0;
}

static int validate_handle(const sl_ckpt_metadata_t *md, const sl_ckpt_state_handle_t *h, const char *where, char *err,
                           size_t errlen) {
    if (!sl_ckpt_valid_file_name(h->path))
        return sl_errf(err, errlen, SL_EINVAL, "%s: state file name '%s' is not a plain file name", where,
                       h->path ? h->path : "(null)");
    if (h->scope > SL_CKPT_SCOPE_TASKOWNED)
        return sl_errf(err, errlen, SL_EINVAL, "%s: file '%s' has unknown scope %u", where, h->path, h->scope);
    if (md->type == SL_CKPT_SAVEPOINT && h->scope != SL_CKPT_SCOPE_EXCLUSIVE)
        return sl_errf(err, errlen, SL_EINVAL,
                       "%s: file '%s' is outside the savepoint (shared/taskowned); a savepoint must be self-contained",
                       where, h->path);
    if (h->kind == SL_SF_KIND_ANY)
        return sl_errf(err, errlen, SL_EINVAL, "%s: file '%s' has no kind", where, h->path);
    if (h->kind != SL_SF_KIND_FOREIGN && h->size < SL_SF_HEADER_SIZE + SL_SF_TRAILER_SIZE)
        return sl_errf(err, errlen, SL_EINVAL, "%s: file '%s' size %" PRIu64 " is below a state file's minimum", where,
                       h->path, h->size);
    if (h->nsections < 0 || (h->nsections > 0 && !h->sections))
        return sl_errf(err, errlen, SL_EINVAL, "%s: file '%s' has a bad section list", where, h->path);
    uint64_t body_end = h->size - SL_SF_TRAILER_SIZE;
    for (int i = 0; i < h->nsections; i++) {
        const sl_sf_section_t *s = &h->sections[i];
        if (i > 0 && s->id <= h->sections[i - 1].id)
            return sl_errf(err, errlen, SL_EINVAL, "%s: file '%s': section ids not strictly ascending at %" PRIu64,
                           where, h->path, s->id);
        if (s->offset < SL_SF_HEADER_SIZE || s->offset > body_end || s->length > body_end - s->offset)
            return sl_errf(err, errlen, SL_EINVAL,
                           "%s: file '%s': section %" PRIu64 " (offset %" PRIu64 ", length %" PRIu64
                           ") lies outside the file's %" PRIu64 " bytes",
                           where, h->path, s->id, s->offset, s->length, h->size);
    }
    return 0;
}

int sl_ckpt_metadata_validate(const sl_ckpt_metadata_t *md, char *err, size_t errlen) {
    if (md->checkpoint_id < 1)
        return sl_errf(err, errlen, SL_EINVAL, "checkpoint id %" PRId64 " (ids start at 1)", md->checkpoint_id);
    if (md->type > SL_CKPT_SAVEPOINT) return sl_errf(err, errlen, SL_EINVAL, "unknown checkpoint type %u", md->type);
    if (md->format > SL_CKPT_FORMAT_CANONICAL)
        return sl_errf(err, errlen, SL_EINVAL, "unknown snapshot format %u", md->format);
    if (!md->job_id || !md->job_id[0]) return sl_errf(err, errlen, SL_EINVAL, "no job id");
    if (!md->job_name || !md->backend) return sl_errf(err, errlen, SL_EINVAL, "missing job name or backend string");
    if (md->max_parallelism < 1 || md->max_parallelism > SL_CKPT_MAX_PARALLELISM)
        return sl_errf(err, errlen, SL_EINVAL, "max parallelism %d outside 1..%d", md->max_parallelism,
                       SL_CKPT_MAX_PARALLELISM);
    char where[400];
    for (int i = 0; i < md->noperators; i++) {
        const sl_ckpt_operator_t *op = &md->operators[i];
        if (!op->uid || !op->uid[0]) return sl_errf(err, errlen, SL_EINVAL, "operator %d has no uid", i);
        snprintf(where, sizeof where, "operator '%.200s'", op->uid);
        for (int j = 0; j < i; j++) {
            if (strcmp(op->uid, md->operators[j].uid) == 0)
                return sl_errf(err, errlen, SL_EINVAL, "%s: uid used by two operators", where);
            if (op->index == md->operators[j].index)
                return sl_errf(err, errlen, SL_EINVAL, "%s: operator index %d also used by '%s'", where, op->index,
                               md->operators[j].uid);
        }
        if (op->index < 0) return sl_errf(err, errlen, SL_EINVAL, "%s: negative operator index %d", where, op->index);
        if (op->max_parallelism < 1 || op->max_parallelism > SL_CKPT_MAX_PARALLELISM)
            return sl_errf(err, errlen, SL_EINVAL, "%s: max parallelism %d outside 1..%d", where, op->max_parallelism,
                           SL_CKPT_MAX_PARALLELISM);
        if (op->parallelism < 1 || op->parallelism > op->max_parallelism)
            return sl_errf(err, errlen, SL_EINVAL, "%s: parallelism %d outside 1..%d (its max parallelism)", where,
                           op->parallelism, op->max_parallelism);
        int rc = validate_blobs(op->blobs, op->nblobs, where, err, errlen);
        if (rc) return rc;
        int prev_end = 0;
        for (int s = 0; s < op->parallelism; s++) {
            const sl_ckpt_subtask_t *st = &op->subtasks[s];
            snprintf(where, sizeof where, "operator '%.200s' subtask %d", op->uid, s);
            if (st->index != s) return sl_errf(err, errlen, SL_EINVAL, "%s: has index %d", where, st->index);
            sl_kg_range_t r = st->range;
            if (r.start < 0 || r.end < r.start || r.end > op->max_parallelism)
                return sl_errf(err, errlen, SL_EINVAL, "%s: key-group range [%d, %d) outside [0, %d)", where, r.start,
                               r.end, op->max_parallelism);
            if (r.end > r.start) {
                if (r.start < prev_end)
                    return sl_errf(err, errlen, SL_EINVAL,
                                   "%s: key-group range [%d, %d) overlaps or precedes the previous subtask's", where,
                                   r.start, r.end);
                prev_end = r.end;
            }
            if (st->nhandles < 0 || st->nblobs < 0)
                return sl_errf(err, errlen, SL_EINVAL, "%s: negative handle or blob count", where);
            for (int h = 0; h < st->nhandles; h++)
                if ((rc = validate_handle(md, &st->handles[h], where, err, errlen))) return rc;
            if ((rc = validate_blobs(st->blobs, st->nblobs, where, err, errlen))) return rc;
        }
    }
    for (int i = 0; i < md->nprops; i++) {
        if (!md->props[i].key || !md->props[i].key[0] || !md->props[i].value)
            return sl_errf(err, errlen, SL_EINVAL, "property %d has no key or value", i);
        for (int j = 0; j < i; j++)
            if (strcmp(md->props[i].key, md->props[j].key) == 0)
                return sl_errf(err, errlen, SL_EINVAL, "property '%s' set twice", md->props[i].key);
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Encoding. */

static void put_blobs(sl_state_file_writer_t *w, const sl_ckpt_blob_t *b, int n) {
    sl_sf_put_varint(w, (uint64_t)n);
    for (int i = 0; i < n; i++) {
        sl_sf_put_str(w, b[i].name);
        sl_sf_put_u8(w, b[i].distribution);
        sl_sf_put_bytes(w, b[i].data, b[i].len);
    }
}

static void put_handle(sl_state_file_writer_t *w, const sl_ckpt_state_handle_t *h) {
    sl_sf_put_str(w, h->path);
    sl_sf_put_u8(w, h->scope);
    sl_sf_put_varint(w, h->kind);
    sl_sf_put_varint(w, h->size);
    sl_sf_put_u64(w, h->checksum);
    sl_sf_put_varint(w, (uint64_t)h->nsections);
    for (int i = 0; i < h->nsections; i++) {
        sl_sf_put_varint(w, h->sections[i].id);
        sl_sf_put_varint(w, h->sections[i].offset);
        sl_sf_put_varint(w, h->sections[i].length);
        sl_sf_put_u64(w, h->sections[i].checksum);
    }
}

int sl_ckpt_metadata_write(const sl_ckpt_metadata_t *md, sl_ckpt_out_t *out, char *err, size_t errlen) {
    char e[400];
    int rc = sl_ckpt_metadata_validate(md, e, sizeof e);
    if (rc) {
        rc = sl_errf(err, errlen, rc, "%s: refusing to write invalid checkpoint metadata: %s", out->name, e);
        out->ops->abort(out);
        return rc;
    }
    sl_state_file_writer_t *w;
    if ((rc = sl_sf_writer_new(out, SL_SF_KIND_METADATA, &w, err, errlen))) return rc;

    sl_sf_begin_section(w, SEC_CHECKPOINT);
    sl_sf_put_varint(w, SL_CKPT_MD_VERSION);
    sl_sf_put_svarint(w, md->checkpoint_id);
    sl_sf_put_i64(w, md->trigger_ts);
    sl_sf_put_i64(w, md->completion_ts);
    sl_sf_put_u8(w, md->type);
    sl_sf_put_u8(w, md->format);
    sl_sf_put_str(w, md->job_id);
    sl_sf_put_str(w, md->job_name);
    sl_sf_put_str(w, md->backend);
    sl_sf_put_varint(w, (uint64_t)md->max_parallelism);

    sl_sf_begin_section(w, SEC_OPERATORS);
    sl_sf_put_varint(w, (uint64_t)md->noperators);
    for (int i = 0; i < md->noperators; i++) {
        const sl_ckpt_operator_t *op = &md->operators[i];
        sl_sf_put_str(w, op->uid);
        sl_sf_put_varint(w, (uint64_t)op->index);
        sl_sf_put_varint(w, (uint64_t)op->parallelism);
        sl_sf_put_varint(w, (uint64_t)op->max_parallelism);
        put_blobs(w, op->blobs, op->nblobs);
        for (int s = 0; s < op->parallelism; s++) {
            const sl_ckpt_subtask_t *st = &op->subtasks[s];
            sl_sf_put_varint(w, (uint64_t)st->range.start);
            sl_sf_put_varint(w, (uint64_t)st->range.end);
            sl_sf_put_varint(w, (uint64_t)st->nhandles);
            for (int h = 0; h < st->nhandles; h++) put_handle(w, &st->handles[h]);
            put_blobs(w, st->blobs, st->nblobs);
        }
    }

    sl_sf_begin_section(w, SEC_PROPS);
    sl_sf_put_varint(w, (uint64_t)md->nprops);
    for (int i = 0; i < md->nprops; i++) {
        sl_sf_put_str(w, md->props[i].key);
        sl_sf_put_str(w, md->props[i].value);
    }
    return sl_sf_writer_close(w, NULL, err, errlen);
}

int sl_ckpt_metadata_write_file(const sl_ckpt_metadata_t *md, const char *path, char *err, size_t errlen) {
    sl_ckpt_out_t *out;
    int rc = sl_ckpt_out_open_file(path, true, &out, err, errlen);
    if (rc) return rc;
    return sl_ckpt_metadata_write(md, out, err, errlen);
}

/* ------------------------------------------------------------------ */
/* Decoding.  Each get_* returns the cursor's sticky error. */

static int get_int(sl_sf_cursor_t *c, int max, int *v) {
    uint64_t u;
    int rc = sl_sf_get_varint_max(c, (uint64_t)max, &u);
    *v = (int)u;
    return rc;
}

static int get_blobs(sl_sf_cursor_t *c, sl_ckpt_blob_t **blobs, int *n) {
    size_t cnt;
    /* name (>= 1), distribution (1), data length (>= 1) */
    if (sl_sf_get_count(c, 3, &cnt) || cnt > INT_MAX / 2) return sl_sf_cursor_fail(c, "blob count out of range");
    *blobs = sl_calloc(cnt + 1, sizeof **blobs);
    for (size_t i = 0; i < cnt; i++) {
        sl_ckpt_blob_t *b = &(*blobs)[i];
        const void *p;
        size_t len;
        *n = (int)i + 1; /* owned from here on, for freeing */
        if (sl_sf_get_str(c, &b->name) || sl_sf_get_u8(c, &b->distribution) || sl_sf_get_bytes(c, &p, &len))
            return c->rc;
        b->data = sl_malloc(len);
        if (len) memcpy(b->data, p, len);
        b->len = len;
    }
    return 0;
}

static int get_handle(sl_sf_cursor_t *c, sl_ckpt_state_handle_t *h) {
    uint64_t kind;
    size_t n;
    if (sl_sf_get_str(c, &h->path) || sl_sf_get_u8(c, &h->scope) || sl_sf_get_varint_max(c, UINT32_MAX, &kind) ||
        sl_sf_get_varint(c, &h->size) || sl_sf_get_u64(c, &h->checksum))
        return c->rc;
    h->kind = (uint32_t)kind;
    /* id, offset, length (>= 1 each), checksum (8) */
    if (sl_sf_get_count(c, 11, &n) || n > INT_MAX / 2) return sl_sf_cursor_fail(c, "section count out of range");
    h->sections = sl_calloc(n + 1, sizeof *h->sections);
    h->nsections = (int)n;
    for (size_t i = 0; i < n; i++) {
        sl_sf_section_t *s = &h->sections[i];
        if (sl_sf_get_varint(c, &s->id) || sl_sf_get_varint(c, &s->offset) || sl_sf_get_varint(c, &s->length) ||
            sl_sf_get_u64(c, &s->checksum))
            return c->rc;
    }
    return 0;
}

static int get_operator(sl_sf_cursor_t *c, sl_ckpt_operator_t *op) {
    if (sl_sf_get_str(c, &op->uid) || get_int(c, INT_MAX, &op->index)) return c->rc;
    int p, maxp;
    if (get_int(c, SL_CKPT_MAX_PARALLELISM, &p) || get_int(c, SL_CKPT_MAX_PARALLELISM, &maxp)) return c->rc;
    if (p < 1) return sl_sf_cursor_fail(c, "operator parallelism is 0");
    /* Each subtask takes at least 4 bytes: bound the allocation by the file. */
    if ((size_t)p > sl_sf_cursor_left(c) / 4)
        return sl_sf_cursor_fail(c, "operator parallelism larger than the section can hold");
    op->max_parallelism = maxp;
    if (get_blobs(c, &op->blobs, &op->nblobs)) return c->rc;
    op->subtasks = sl_calloc((size_t)p + 1, sizeof *op->subtasks);
    op->parallelism = p;
    for (int s = 0; s < p; s++) {
        sl_ckpt_subtask_t *st = &op->subtasks[s];
        st->index = s;
        size_t nh;
        if (get_int(c, SL_CKPT_MAX_PARALLELISM, &st->range.start) ||
            get_int(c, SL_CKPT_MAX_PARALLELISM, &st->range.end))
            return c->rc;
        /* path (>= 1), scope, kind, size (>= 1), checksum (8), count (>= 1) */
        if (sl_sf_get_count(c, 13, &nh) || nh > INT_MAX / 2) return sl_sf_cursor_fail(c, "handle count out of range");
        st->handles = sl_calloc(nh + 1, sizeof *st->handles);
        for (size_t h = 0; h < nh; h++) {
            st->nhandles = (int)h + 1;
            if (get_handle(c, &st->handles[h])) return c->rc;
        }
        if (get_blobs(c, &st->blobs, &st->nblobs)) return c->rc;
    }
    return 0;
}

/* Formats a cursor error, or the "section not fully read" error, with the
 * file name; returns rc. */
static int cursor_done(sl_sf_cursor_t *c, char *err, size_t errlen) {
    if (!c->rc && !sl_sf_cursor_eof(c)) sl_sf_cursor_fail(c, "unexpected bytes after the end of the data");
    return sl_sf_cursor_error(c, err, errlen);
}

static int decode(sl_state_file_reader_t *r, sl_ckpt_metadata_t *md, char *err, size_t errlen) {
    const char *name = sl_sf_reader_name(r);
    sl_sf_cursor_t c;
    int rc;
    if (!sl_sf_reader_find(r, SEC_CHECKPOINT) || !sl_sf_reader_find(r, SEC_OPERATORS))
        return sl_errf(err, errlen, SL_EFORMAT, "%s: corrupt: checkpoint metadata without its %s section", name,
                       sl_sf_reader_find(r, SEC_CHECKPOINT) ? "operators" : "checkpoint");

    if ((rc = sl_sf_reader_section(r, SEC_CHECKPOINT, &c, err, errlen))) return rc;
    uint64_t ver;
    if (sl_sf_get_varint(&c, &ver)) return cursor_done(&c, err, errlen);
    if (ver == 0 || ver > SL_CKPT_MD_VERSION)
        return sl_errf(err, errlen, SL_EFORMAT,
                       "%s: checkpoint metadata version %" PRIu64 " (this build reads 1..%u; written by a newer sluice?)",
                       name, ver, SL_CKPT_MD_VERSION);
    sl_sf_get_svarint(&c, &md->checkpoint_id);
    sl_sf_get_i64(&c, &md->trigger_ts);
    sl_sf_get_i64(&c, &md->completion_ts);
    sl_sf_get_u8(&c, &md->type); /* type, format: ranges checked by validate */
    sl_sf_get_u8(&c, &md->format);
    sl_sf_get_str(&c, &md->job_id);
    sl_sf_get_str(&c, &md->job_name);
    sl_sf_get_str(&c, &md->backend);
    get_int(&c, SL_CKPT_MAX_PARALLELISM, &md->max_parallelism);
    if ((rc = cursor_done(&c, err, errlen))) return rc;

    if ((rc = sl_sf_reader_section(r, SEC_OPERATORS, &c, err, errlen))) return rc;
    size_t nops;
    /* uid, index, parallelism, max parallelism, blob count: >= 5 bytes */
    if (!sl_sf_get_count(&c, 5, &nops) && nops <= INT_MAX / 2) {
        md->operators = sl_calloc(nops + 1, sizeof *md->operators);
        for (size_t i = 0; i < nops; i++) {
            md->noperators = (int)i + 1;
            if (get_operator(&c, &md->operators[i])) break;
        }
    } else {
        sl_sf_cursor_fail(&c, "operator count out of range");
    }
    if ((rc = cursor_done(&c, err, errlen))) return rc;

    if (sl_sf_reader_find(r, SEC_PROPS)) {
        if ((rc = sl_sf_reader_section(r, SEC_PROPS, &c, err, errlen))) return rc;
        size_t np;
        if (!sl_sf_get_count(&c, 2, &np)) {
            md->props = sl_calloc(np + 1, sizeof *md->props);
            for (size_t i = 0; i < np; i++) {
                md->nprops = (int)i + 1;
                if (sl_sf_get_str(&c, &md->props[i].key) || sl_sf_get_str(&c, &md->props[i].value)) break;
            }
        }
        if ((rc = cursor_done(&c, err, errlen))) return rc;
    }

    char e[400];
    if ((rc = sl_ckpt_metadata_validate(md, e, sizeof e)))
        return sl_errf(err, errlen, SL_EFORMAT, "%s: invalid checkpoint metadata: %s", name, e);
    return 0;
}

int sl_ckpt_metadata_read(sl_ckpt_in_t *in, sl_ckpt_metadata_t **mdp, char *err, size_t errlen) {
    *mdp = NULL;
    sl_state_file_reader_t *r;
    int rc = sl_sf_reader_new(in, SL_SF_KIND_METADATA, 0, &r, err, errlen);
    if (rc) return rc;
    sl_ckpt_metadata_t *md = sl_calloc(1, sizeof *md);
    rc = decode(r, md, err, errlen);
    /* A partly decoded metadata may have NULL strings where decoding
     * stopped; free copes with that. */
    sl_sf_reader_close(r);
    if (rc) {
        sl_ckpt_metadata_free(md);
        return rc;
    }
    *mdp = md;
    return 0;
}

int sl_ckpt_metadata_read_file(const char *path, sl_ckpt_metadata_t **md, char *err, size_t errlen) {
    sl_ckpt_in_t *in;
    *md = NULL;
    int rc = sl_ckpt_in_open_file(path, &in, err, errlen);
    if (rc) return rc;
    return sl_ckpt_metadata_read(in, md, err, errlen);
}

/* ------------------------------------------------------------------ */
/* Comparison. */

static bool str_eq(const char *a, const char *b) { return strcmp(a ? a : "", b ? b : "") == 0; }

static bool blobs_eq(const sl_ckpt_blob_t *a, int na, const sl_ckpt_blob_t *b, int nb) {
    if (na != nb) return false;
    for (int i = 0; i < na; i++)
        if (!str_eq(a[i].name, b[i].name) || a[i].distribution != b[i].distribution || a[i].len != b[i].len ||
            (a[i].len && memcmp(a[i].data, b[i].data, a[i].len) != 0))
            return false;
    return true;
}

static bool handle_eq(const sl_ckpt_state_handle_t *a, const sl_ckpt_state_handle_t *b) {
    if (!str_eq(a->path, b->path) || a->scope != b->scope || a->kind != b->kind || a->size != b->size ||
        a->checksum != b->checksum || a->nsections != b->nsections)
        return false;
    for (int i = 0; i < a->nsections; i++) {
        const sl_sf_section_t *x = &a->sections[i], *y = &b->sections[i];
        if (x->id != y->id || x->offset != y->offset || x->length != y->length || x->checksum != y->checksum)
            return false;
    }
    return true;
}

bool sl_ckpt_metadata_equal(const sl_ckpt_metadata_t *a, const sl_ckpt_metadata_t *b) {
    if (a->checkpoint_id != b->checkpoint_id || a->trigger_ts != b->trigger_ts ||
        a->completion_ts != b->completion_ts || a->type != b->type || a->format != b->format ||
        !str_eq(a->job_id, b->job_id) || !str_eq(a->job_name, b->job_name) || !str_eq(a->backend, b->backend) ||
        a->max_parallelism != b->max_parallelism || a->noperators != b->noperators || a->nprops != b->nprops)
        return false;
    for (int i = 0; i < a->noperators; i++) {
        const sl_ckpt_operator_t *x = &a->operators[i], *y = &b->operators[i];
        if (!str_eq(x->uid, y->uid) || x->index != y->index || x->parallelism != y->parallelism ||
            x->max_parallelism != y->max_parallelism || !blobs_eq(x->blobs, x->nblobs, y->blobs, y->nblobs))
            return false;
        for (int s = 0; s < x->parallelism; s++) {
            const sl_ckpt_subtask_t *p = &x->subtasks[s], *q = &y->subtasks[s];
            if (p->index != q->index || p->range.start != q->range.start || p->range.end != q->range.end ||
                p->nhandles != q->nhandles || !blobs_eq(p->blobs, p->nblobs, q->blobs, q->nblobs))
                return false;
            for (int h = 0; h < p->nhandles; h++)
                if (!handle_eq(&p->handles[h], &q->handles[h])) return false;
        }
    }
    for (int i = 0; i < a->nprops; i++)
        if (!str_eq(a->props[i].key, b->props[i].key) || !str_eq(a->props[i].value, b->props[i].value)) return false;
    return true;
}
