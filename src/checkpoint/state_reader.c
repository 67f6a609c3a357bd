/*
 * state_reader.c — a checkpoint's keyed state read from outside a job: the
 * checkpoint a path names, and one operator's canonical keyed-state blocks
 * key group by key group, from its state files or from a keyed backend.
 * See state_reader.h.
 *
 * The file side follows what a restore does (deployment.c, restore_keyed):
 * key group kg lives in the SL_SF_KIND_KEYED file of the old subtask whose
 * range holds kg, in the section whose id is kg.  Unlike a restore, which
 * opens files lazily to read a few key groups, a reader reads every key
 * group and so verifies each file whole when it opens it.
 */
#include "checkpoint/state_reader.h"

#include "checkpoint/spilled_blob.h"

#include <errno.h>
#include <jansson.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/state_file.h"
#include "checkpoint/storage.h"
#include "common/common.h"

static bool is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

/* The latest complete checkpoint of job in the storage at base. */
static int open_latest(const char *path, const char *base, const char *job, sl_ckpt_metadata_t **md, char *dir,
                       size_t cap, char *err, size_t errlen) {
    sl_ckpt_storage_t *s = NULL;
    int rc = sl_ckpt_storage_open(base, job, &s, err, errlen);
    if (rc < 0) return rc;
    int64_t id = 0;
    rc = sl_ckpt_storage_latest_complete_id(s, &id, err, errlen);
    if (rc == SL_ENOTFOUND)
        sl_errf(err, errlen, rc, "%s: no complete checkpoint (no chk-<n>/%s)", path, SL_CKPT_METADATA_NAME);
    /* the latest, with no fallback to an older one when it is damaged (storage.h) */
    if (rc == 0) rc = s->ops->load(s, id, md, err, errlen);
    if (rc == 0) rc = s->ops->location(s, (*md)->checkpoint_id, SL_CKPT_SCOPE_EXCLUSIVE, NULL, dir, cap);
    s->ops->destroy(s);
    if (rc < 0 && *md) {
        sl_ckpt_metadata_free(*md);
        *md = NULL;
    }
    return rc;
}

/* An s3:// path: a chk-<n> or savepoint "directory" (has _metadata), or a
 * job's directory (its latest complete checkpoint). */
static int open_s3_path(const char *path, sl_ckpt_metadata_t **md, char *dir, size_t cap, char *err, size_t errlen) {
    char p[4200], mpath[4300];
    snprintf(p, sizeof p, "%s", path);
    size_t l = strlen(p);
    while (l > 5 && p[l - 1] == '/') p[--l] = 0;
    snprintf(mpath, sizeof mpath, "%s/%s", p, SL_CKPT_METADATA_NAME);
    int rc = sl_ckpt_metadata_read_file(mpath, md, err, errlen);
    if (rc != SL_ENOTFOUND) {
        if (rc == 0 && (size_t)snprintf(dir, cap, "%s", p) >= cap) {
            sl_ckpt_metadata_free(*md);
            *md = NULL;
            return sl_errf(err, errlen, SL_EINVAL, "%s: path too long", path);
        }
        return rc;
    }
    char *slash = strrchr(p, '/');
    const char *name = slash ? slash + 1 : p;
    if (!slash || slash < p + 5 || !strchr(p + 5, '/') || !strncmp(name, "chk-", 4))
        return sl_errf(err, errlen, SL_ENOTFOUND, "%s: missing: no checkpoint or savepoint here", mpath);
    *slash = 0;
    return open_latest(path, p, slash + 1, md, dir, cap, err, errlen);
}

static int open_path(const char *path, sl_ckpt_metadata_t **md, char *dir, size_t cap, char *err, size_t errlen) {
    *md = NULL;
    if (!path || !*path) return sl_errf(err, errlen, SL_EINVAL, "no checkpoint path given");
    if (strncmp(path, "s3://", 5) == 0) return open_s3_path(path, md, dir, cap, err, errlen);
    struct stat st;
    if (stat(path, &st) != 0)
        return sl_errf(err, errlen, errno == ENOENT ? SL_ENOTFOUND : SL_EIO, "%s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return sl_errf(err, errlen, SL_EFORMAT,
                       "%s: not a directory (give a chk-<n> or savepoint directory, or a job's checkpoint directory)",
                       path);
    char mpath[4200], shared[4200], owned[4200];
    snprintf(mpath, sizeof mpath, "%s/%s", path, SL_CKPT_METADATA_NAME);
    snprintf(shared, sizeof shared, "%s/shared", path);
    snprintf(owned, sizeof owned, "%s/taskowned", path);
    if (access(mpath, F_OK) == 0) { /* chk-<n> or a savepoint */
        if ((size_t)snprintf(dir, cap, "%s", path) >= cap)
            return sl_errf(err, errlen, SL_EINVAL, "%s: path too long", path);
        return sl_ckpt_metadata_read_file(mpath, md, err, errlen);
    }
    if (!is_dir(shared) || !is_dir(owned)) {
        const char *name = strrchr(path, '/');
        name = name && name[1] ? name + 1 : path;
        if (!strncmp(name, "chk-", 4))
            return sl_errf(err, errlen, SL_ENOTFOUND, "%s: missing: checkpoint %s is incomplete (never committed)",
                           mpath, name + 4);
        return sl_errf(err, errlen, SL_ENOTFOUND,
                       "%s: no checkpoint here: no %s, and not a job's checkpoint directory (no shared/ and "
                       "taskowned/)",
                       path, mpath);
    }
    /* a job directory: base/job -> open it as storage (nothing is created:
     * its directories exist) */
    char base[4200], job[1024];
    snprintf(base, sizeof base, "%s", path);
    size_t l = strlen(base);
    while (l > 1 && base[l - 1] == '/') base[--l] = 0;
    char *slash = strrchr(base, '/');
    if (slash) {
        snprintf(job, sizeof job, "%s", slash + 1);
        *slash = 0;
        if (!base[0]) snprintf(base, sizeof base, "/");
    } else {
        snprintf(job, sizeof job, "%s", base);
        snprintf(base, sizeof base, ".");
    }
    return open_latest(path, base, job, md, dir, cap, err, errlen);
}

/* Where a handle's file is: its scope's directory relative to the
 * checkpoint's (chk-<n>/ -> ../shared, ../taskowned). */
static void handle_path(const char *dir, const sl_ckpt_state_handle_t *h, char *out, size_t cap) {
    if (h->scope == SL_CKPT_SCOPE_EXCLUSIVE) {
        snprintf(out, cap, "%s/%s", dir, h->path);
        return;
    }
    const char *slash = strrchr(dir, '/');
    int jl = slash ? (int)(slash - dir) : 0;
    snprintf(out, cap, "%.*s%s%s/%s", jl, dir, slash ? "/" : "", h->scope == SL_CKPT_SCOPE_SHARED ? "shared" : "taskowned",
             h->path);
}

int sl_ckpt_keyed_blocks_from_files(const char *dir, const sl_ckpt_operator_t *mo, sl_ckpt_block_fn fn, void *c,
                                    char *err, size_t errlen) {
    sl_state_file_reader_t *r = NULL;
    const sl_ckpt_state_handle_t *open_h = NULL;
    int rc = 0;
    for (int kg = 0; kg < mo->max_parallelism && rc == 0; kg++) {
        const sl_ckpt_state_handle_t *h = NULL;
        for (int s = 0; s < mo->parallelism && !h; s++) {
            const sl_ckpt_subtask_t *st = &mo->subtasks[s];
            if (kg < st->range.start || kg >= st->range.end) continue;
            for (int i = 0; i < st->nhandles && !h; i++)
                if (st->handles[i].kind == SL_SF_KIND_KEYED) h = &st->handles[i];
        }
        if (!h) continue; /* no keyed state for this key group */
        if (h != open_h) {
            if (r) sl_sf_reader_close(r);
            r = NULL;
            char path[4600];
            handle_path(dir, h, path, sizeof path);
            rc = sl_sf_reader_open(path, SL_SF_KIND_KEYED, 0, &r, err, errlen);
            if (rc == SL_ENOTFOUND)
                rc = sl_errf(err, errlen, SL_ENOTFOUND,
                             "%s: missing: the checkpoint's metadata names it for operator '%s'", path, mo->uid);
            if (rc < 0) break;
            if (sl_sf_reader_size(r) != h->size || sl_sf_reader_checksum(r) != h->checksum) {
                rc = sl_errf(err, errlen, SL_EFORMAT,
                             "%s: not the file the checkpoint's metadata describes (%llu bytes with checksum %016llx, "
                             "the metadata says %llu bytes with %016llx)",
                             path, (unsigned long long)sl_sf_reader_size(r),
                             (unsigned long long)sl_sf_reader_checksum(r), (unsigned long long)h->size,
                             (unsigned long long)h->checksum);
                break;
            }
            open_h = h;
        }
        sl_sf_cursor_t cur;
        rc = sl_sf_reader_section(r, (uint64_t)kg, &cur, err, errlen);
        if (rc == SL_ENOTFOUND) {
            rc = 0;
            continue;
        }
        if (rc == 0 && cur.len) rc = fn(c, kg, cur.p, cur.len, err, errlen);
    }
    if (r) sl_sf_reader_close(r);
    return rc;
}

int sl_ckpt_keyed_blocks_from_backend(sl_keyed_backend_t *kb, sl_ckpt_block_fn fn, void *c, char *err,
                                      size_t errlen) {
    sl_kb_snapshot_t *snap = NULL;
    int rc = kb->ops->snapshot(kb, &snap);
    if (rc < 0) return sl_errf(err, errlen, rc, "snapshot of the %s state backend failed", kb->ops->name);
    sl_buf_t buf = {0};
    for (int kg = kb->range.start; kg < kb->range.end && rc == 0; kg++) {
        buf.len = 0;
        rc = sl_kb_snapshot_write(snap, kg, &buf);
        if (rc < 0) {
            sl_errf(err, errlen, rc, "writing key group %d of the %s state backend failed", kg, kb->ops->name);
            break;
        }
        if (buf.len) rc = fn(c, kg, buf.p, buf.len, err, errlen);
    }
    sl_buf_free(&buf);
    sl_kb_snapshot_release(snap);
    return rc;
}

/* ------------------------------------------------------------------ */
/* Entries of canonical blocks as JSON (state_reader.h, sl_state_entries_t):
 * collecting, ordering, encoding. */

typedef struct item {
    uint8_t *uk, *v; /* uk NULL unless map */
    uint32_t uklen, vlen;
} item_t;

typedef struct entry {
    int state; /* index into names */
    int kg;
    uint8_t *key, *ns;
    uint32_t klen, nslen;
    item_t *items;
    uint32_t n;
} entry_t;

struct sl_state_entries {
    char *only;       /* one state's name (owned), or NULL */
    char **names;     /* every state the blocks declare */
    int *kinds;
    int nnames;
    entry_t *v;
    size_t n, cap;
    int kg, cur_state; /* cur_state -1: skipped (--state) */
    entry_t *cur;
    /* typed states (sl_state_entries_set_schema): their values print as rows */
    char **typed;
    sl_schema_t **schemas;
    uint32_t *prefix; /* per typed state: bytes in front of each row (a TTL timestamp), 0 none */
    int ntyped;
};
typedef struct sl_state_entries collector_t;

static uint8_t *dup_bytes(const uint8_t *p, uint32_t n) {
    uint8_t *d = sl_malloc(n ? n : 1);
    if (n) memcpy(d, p, n);
    return d;
}

static int on_state(void *c, const char *name, uint32_t namelen, sl_state_kind_t kind, int ttl, uint32_t nentries) {
    SL_UNUSED(ttl); /* typed rows: the prefix comes from the recorded TTL (sl_state_entries_set_ttl) */
    collector_t *col = c;
    int idx = -1;
    for (int i = 0; i < col->nnames && idx < 0; i++)
        if (strlen(col->names[i]) == namelen && memcmp(col->names[i], name, namelen) == 0) idx = i;
    if (idx < 0) {
        col->names = sl_realloc(col->names, (size_t)(col->nnames + 1) * sizeof *col->names);
        col->kinds = sl_realloc(col->kinds, (size_t)(col->nnames + 1) * sizeof *col->kinds);
        col->names[col->nnames] = sl_strndup(name, namelen);
        col->kinds[col->nnames] = (int)kind;
        idx = col->nnames++;
    } else if (col->kinds[idx] != (int)kind) {
        return SL_EFORMAT; /* reported by the caller with the key group */
    }
    col->cur_state = col->only && strcmp(col->only, col->names[idx]) != 0 ? -1 : idx;
    col->cur = NULL;
    return 0;
}

static int on_entry(void *c, const uint8_t *key, uint32_t klen, const uint8_t *ns, uint32_t nslen, uint32_t n) {
    collector_t *col = c;
    col->cur = NULL;
    if (col->cur_state < 0) return 0;
    if (col->n == col->cap) {
        col->cap = col->cap ? col->cap * 2 : 256;
        col->v = sl_realloc(col->v, col->cap * sizeof *col->v);
    }
    entry_t *e = &col->v[col->n++];
    memset(e, 0, sizeof *e);
    e->state = col->cur_state;
    e->kg = col->kg;
    e->key = dup_bytes(key, klen);
    e->klen = klen;
    e->ns = dup_bytes(ns, nslen);
    e->nslen = nslen;
    e->items = sl_calloc(n ? n : 1, sizeof *e->items); /* n is bounded by the block's bytes (sl_kbf_parse) */
    col->cur = e;
    return 0;
}

static int on_item(void *c, const uint8_t *uk, uint32_t uklen, const uint8_t *v, uint32_t vlen) {
    collector_t *col = c;
    entry_t *e = col->cur;
    if (!e) return 0;
    item_t *it = &e->items[e->n++];
    it->uk = uk ? dup_bytes(uk, uklen) : NULL;
    it->uklen = uklen;
    it->v = dup_bytes(v, vlen);
    it->vlen = vlen;
    return 0;
}

static const sl_kbf_visitor_t VISITOR = {.state = on_state, .entry = on_entry, .item = on_item};

int sl_state_entries_add_block(sl_state_entries_t *col, int max_parallelism, const char *uid, int kg,
                               const uint8_t *block, size_t len, char *err, size_t errlen) {
    col->kg = kg;
    col->cur_state = -1;
    col->cur = NULL;
    char perr[600] = "";
    int rc = sl_kbf_parse(block, len, max_parallelism, kg, &VISITOR, col, perr, sizeof perr);
    if (rc == SL_EFORMAT && !perr[0])
        snprintf(perr, sizeof perr, "keyed state of key group %d: a state is declared with two different kinds", kg);
    if (rc < 0) return sl_errf(err, errlen, rc, "operator '%s': %s", uid, perr);
    return 0;
}

void sl_state_entries_free(sl_state_entries_t *col) {
    if (!col) return;
    for (size_t i = 0; i < col->n; i++) {
        entry_t *e = &col->v[i];
        for (uint32_t j = 0; j < e->n; j++) {
            sl_free(e->items[j].uk);
            sl_free(e->items[j].v);
        }
        sl_free(e->items);
        sl_free(e->key);
        sl_free(e->ns);
    }
    sl_free(col->v);
    for (int i = 0; i < col->ntyped; i++) {
        sl_free(col->typed[i]);
        sl_schema_unref(col->schemas[i]);
    }
    sl_free(col->typed);
    sl_free(col->schemas);
    sl_free(col->prefix);
    for (int i = 0; i < col->nnames; i++) sl_free(col->names[i]);
    sl_free(col->names);
    sl_free(col->kinds);
    sl_free(col->only);
    sl_free(col);
}

/* ------------------------------------------------------------------ */
/* Ordering. */

static int cmp_bytes(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl) {
    int c = memcmp(a, b, SL_MIN(al, bl));
    return c ? c : al < bl ? -1 : al > bl ? 1 : 0;
}

static _Thread_local char *const *g_names; /* qsort has no context argument (one sort per thread at a time) */

static int cmp_entry(const void *x, const void *y) {
    const entry_t *a = x, *b = y;
    int c = strcmp(g_names[a->state], g_names[b->state]);
    if (!c) c = cmp_bytes(a->key, a->klen, b->key, b->klen);
    if (!c) c = cmp_bytes(a->ns, a->nslen, b->ns, b->nslen);
    return c;
}

static int cmp_item(const void *x, const void *y) {
    const item_t *a = x, *b = y;
    return cmp_bytes(a->uk, a->uklen, b->uk, b->uklen);
}

/* ------------------------------------------------------------------ */
/* Encoding. */

/* p as a hex (lowercase) or base64 (RFC 4648, padded) string. */
static json_t *encode_text(bool hex, const uint8_t *p, uint32_t n) {
    static const char HEX[] = "0123456789abcdef";
    static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *s;
    size_t o = 0;
    if (hex) {
        s = sl_malloc((size_t)n * 2 + 1);
        for (uint32_t i = 0; i < n; i++) {
            s[o++] = HEX[p[i] >> 4];
            s[o++] = HEX[p[i] & 15];
        }
    } else {
        s = sl_malloc(((size_t)n + 2) / 3 * 4 + 1);
        for (uint32_t i = 0; i < n; i += 3) {
            uint32_t rest = n - i;
            uint32_t v = (uint32_t)p[i] << 16 | (rest > 1 ? (uint32_t)p[i + 1] << 8 : 0) | (rest > 2 ? p[i + 2] : 0);
            s[o++] = B64[v >> 18 & 63];
            s[o++] = B64[v >> 12 & 63];
            s[o++] = rest > 1 ? B64[v >> 6 & 63] : '=';
            s[o++] = rest > 2 ? B64[v & 63] : '=';
        }
    }
    s[o] = 0;
    json_t *j = json_stringn(s, o);
    sl_free(s);
    return j;
}

/* The JSON for bytes in mode m, or NULL (utf8 mode, not UTF-8). */
static json_t *encode(sl_state_bytes_t m, const uint8_t *p, uint32_t n) {
    static const uint8_t empty[1];
    if (!p) p = empty;
    switch (m) {
    case SL_STATE_BYTES_HEX: return encode_text(true, p, n);
    case SL_STATE_BYTES_BASE64: return encode_text(false, p, n);
    case SL_STATE_BYTES_UTF8: return json_stringn((const char *)p, n); /* NULL when not UTF-8 */
    case SL_STATE_BYTES_AUTO: break;
    }
    json_t *s = memchr(p, 0, n) ? NULL : json_stringn((const char *)p, n);
    if (s) return s;
    return json_pack("{s:o}", "hex", encode_text(true, p, n));
}

typedef struct printer {
    sl_state_bytes_t mode;
    const char *what; /* what failed to encode, for the message */
    const sl_schema_t *schema; /* the state's rows (typed state), or NULL */
    uint32_t prefix;           /* bytes in front of each row (a TTL state's timestamp) */
} printer_t;

/* A value of a typed state as an object of its fields (SQL NULL as null),
 * after its TTL timestamp when it has one; bytes that are not a row of the
 * schema print as bytes (all of them). */
static json_t *encode_value(const printer_t *pr, const uint8_t *p, uint32_t n) {
    if (!pr->schema || !p || n < pr->prefix) return encode(pr->mode, p, n);
    sl_row_t r = {p + pr->prefix, n - pr->prefix, pr->schema};
    if (sl_row_validate(&r) != 0) return encode(pr->mode, p, n);
    json_t *o = json_object();
    for (int i = 0; i < sl_schema_field_count(pr->schema); i++) {
        json_t *v = NULL;
        uint32_t l = 0;
        if (sl_row_is_null(&r, i)) {
            v = json_null();
        } else {
            switch (sl_schema_field_type(pr->schema, i)) {
            case SL_BIGINT:
            case SL_TIMESTAMP: v = json_integer((json_int_t)sl_row_i64(&r, i)); break;
            case SL_INT: v = json_integer(sl_row_i32(&r, i)); break;
            case SL_DOUBLE: v = json_real(sl_row_f64(&r, i)); break;
            case SL_BOOLEAN: v = json_boolean(sl_row_bool(&r, i)); break;
            case SL_VARCHAR:
            case SL_BYTES: {
                const uint8_t *b = sl_row_bytes(&r, i, &l);
                v = sl_schema_field_type(pr->schema, i) == SL_VARCHAR && pr->mode == SL_STATE_BYTES_AUTO
                        ? json_stringn((const char *)b, l)
                        : NULL;
                if (!v) v = encode(pr->mode, b, l);
                break;
            }
            }
        }
        if (!v) {
            json_decref(o);
            return NULL;
        }
        json_object_set_new(o, sl_schema_field_name(pr->schema, i), v);
    }
    return o;
}

void sl_state_entries_set_schema(sl_state_entries_t *col, const char *state, sl_schema_t *schema) {
    col->typed = sl_realloc(col->typed, (size_t)(col->ntyped + 1) * sizeof *col->typed);
    col->schemas = sl_realloc(col->schemas, (size_t)(col->ntyped + 1) * sizeof *col->schemas);
    col->prefix = sl_realloc(col->prefix, (size_t)(col->ntyped + 1) * sizeof *col->prefix);
    col->typed[col->ntyped] = sl_strdup(state);
    col->prefix[col->ntyped] = 0;
    col->schemas[col->ntyped++] = sl_schema_ref(schema);
}

void sl_state_entries_set_ttl(sl_state_entries_t *col, const char *state) {
    for (int i = 0; i < col->ntyped; i++)
        if (!strcmp(col->typed[i], state)) col->prefix[i] = SL_TTL_TS_BYTES;
}

static uint32_t prefix_of(const sl_state_entries_t *col, const char *state) {
    for (int i = 0; i < col->ntyped; i++)
        if (!strcmp(col->typed[i], state)) return col->prefix[i];
    return 0;
}

static const sl_schema_t *schema_of(const sl_state_entries_t *col, const char *state) {
    for (int i = 0; i < col->ntyped; i++)
        if (!strcmp(col->typed[i], state)) return col->schemas[i];
    return NULL;
}

/* The "value" of an entry, or NULL with pr->what set (utf8 mode). */
static json_t *entry_value(printer_t *pr, int kind, entry_t *e) {
    if (kind == SL_STATE_VALUE) {
        json_t *v = e->n == 1 ? encode_value(pr, e->items[0].v, e->items[0].vlen) : NULL;
        if (!v) pr->what = "value";
        return v;
    }
    if (kind == SL_STATE_LIST) {
        json_t *a = json_array();
        for (uint32_t i = 0; i < e->n; i++) {
            json_t *v = encode_value(pr, e->items[i].v, e->items[i].vlen);
            if (!v) {
                pr->what = "list element";
                json_decref(a);
                return NULL;
            }
            json_array_append_new(a, v);
        }
        return a;
    }
    qsort(e->items, e->n, sizeof *e->items, cmp_item);
    json_t *obj = json_object(), *pairs = json_array();
    bool as_object = true;
    for (uint32_t i = 0; i < e->n; i++) {
        json_t *k = encode(pr->mode, e->items[i].uk, e->items[i].uklen);
        json_t *v = encode_value(pr, e->items[i].v, e->items[i].vlen);
        if (!k || !v) {
            pr->what = !k ? "map user key" : "map value";
            json_decref(k);
            json_decref(v);
            json_decref(obj);
            json_decref(pairs);
            return NULL;
        }
        if (!json_is_string(k)) as_object = false;
        if (as_object) json_object_setn_new(obj, json_string_value(k), json_string_length(k), json_incref(v));
        json_array_append_new(pairs, json_pack("[oo]", k, v));
    }
    if (as_object) {
        json_decref(pairs);
        return obj;
    }
    json_decref(obj);
    return pairs;
}

json_t *sl_state_entries_json(sl_state_entries_t *col, size_t i, sl_state_bytes_t mode, char *err,
                              size_t errlen) {
    entry_t *e = &col->v[i];
    int kind = col->kinds[e->state];
    const char *name = col->names[e->state];
    printer_t pr = {mode, NULL, schema_of(col, name), prefix_of(col, name)};
    json_t *key = encode(mode, e->key, e->klen);
    json_t *ns = key ? encode(mode, e->ns, e->nslen) : NULL;
    json_t *val = ns ? entry_value(&pr, kind, e) : NULL;
    if (!val) {
        snprintf(err, errlen, "state '%s', key group %d: the %s of an entry is not valid UTF-8", name, e->kg,
                 !key ? "key" : !ns ? "namespace" : pr.what);
        json_decref(key);
        json_decref(ns);
        return NULL;
    }
    return json_pack("{s:o, s:s, s:i, s:o, s:o, s:o}", "state", encode(SL_STATE_BYTES_AUTO, (const uint8_t *)name,
                     (uint32_t)strlen(name)), "kind", sl_kbf_kind_name(kind), "key_group", e->kg, "key", key,
                     "namespace", ns, "value", val);
}

sl_state_entries_t *sl_state_entries_new(const char *only) {
    sl_state_entries_t *col = sl_calloc(1, sizeof *col);
    col->only = only ? sl_strdup(only) : NULL;
    return col;
}

size_t sl_state_entries_count(const sl_state_entries_t *col) { return col->n; }

int sl_state_entries_nstates(const sl_state_entries_t *col) { return col->nnames; }

const char *sl_state_entries_state(const sl_state_entries_t *col, int i) { return col->names[i]; }

bool sl_state_entries_declares(const sl_state_entries_t *col, const char *name) {
    for (int i = 0; i < col->nnames; i++)
        if (strcmp(col->names[i], name) == 0) return true;
    return false;
}

void sl_state_entries_sort(sl_state_entries_t *col) {
    g_names = col->names;
    if (col->n > 1) qsort(col->v, col->n, sizeof *col->v, cmp_entry);
    for (int i = 1; i < col->nnames; i++) /* insertion sort of the names, keeping kinds alongside */
        for (int j = i; j > 0 && strcmp(col->names[j - 1], col->names[j]) > 0; j--) {
            char *t = col->names[j];
            col->names[j] = col->names[j - 1];
            col->names[j - 1] = t;
            int k = col->kinds[j];
            col->kinds[j] = col->kinds[j - 1];
            col->kinds[j - 1] = k;
            for (size_t x = 0; x < col->n; x++) /* entries refer to names by index */
                col->v[x].state = col->v[x].state == j ? j - 1 : col->v[x].state == j - 1 ? j : col->v[x].state;
        }
}

int sl_ckpt_open_path(const char *path, sl_ckpt_metadata_t **md, char *dir, size_t cap, char *err, size_t errlen) {
    int rc = open_path(path, md, dir, cap, err, errlen);
    if (rc == 0) rc = sl_ckpt_load_spilled(*md, dir, err, errlen); /* blobs too large for the metadata */
    if (rc < 0 && *md) {
        sl_ckpt_metadata_free(*md);
        *md = NULL;
    }
    return rc;
}
