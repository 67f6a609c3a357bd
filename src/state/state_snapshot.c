/*
 * state_snapshot.c — the canonical keyed-state format (described in
 * state_backend.h): writing helpers, a bounds-checked reader, the block
 * parser every backend's restore uses, and the dispatch of a snapshot view
 * to its backend.
 *
 * Nothing here trusts its input: every length is checked against the bytes
 * that remain before it is used, counts never size an allocation (a count
 * is only a loop bound, and each iteration consumes at least one byte), and
 * every error says what was being read and at which byte of the block.
 */
#include <inttypes.h>
#include <stdio.h>

#include "common/common.h"
#include "state/state_backend.h"
#include "types/row_migration.h"

#define KBF_MAGIC "SLKS"
#define KBF_HDR_MIN 7u /* magic, version, two one-byte varints */
#define KBF_SUM 8u

/* ------------------------------------------------------------------ */
/* dispatch                                                            */

int sl_kb_snapshot_write(const sl_kb_snapshot_t *s, int kg, sl_buf_t *out) {
    if (!s || !out) return SL_EINVAL;
    return s->ops->snapshot_write(s, kg, out);
}

void sl_kb_snapshot_release(sl_kb_snapshot_t *s) {
    if (s) s->ops->snapshot_release(s);
}

/* ------------------------------------------------------------------ */
/* writing                                                             */

void sl_kbf_varint(sl_buf_t *out, uint64_t v) {
    uint8_t b[10];
    int n = 0;
    do {
        uint8_t x = v & 0x7f;
        v >>= 7;
        b[n++] = x | (v ? 0x80 : 0);
    } while (v);
    sl_buf_append(out, b, (size_t)n);
}

void sl_kbf_bytes(sl_buf_t *out, const void *p, uint32_t n) {
    sl_kbf_varint(out, n);
    sl_buf_append(out, p, n);
}

static size_t kbf_begin_v(sl_buf_t *out, const char magic[4], uint8_t version, int max_parallelism, int kg) {
    size_t start = out->len;
    sl_buf_append(out, magic, 4);
    sl_kbf_u8(out, version);
    sl_kbf_varint(out, (uint64_t)max_parallelism);
    sl_kbf_varint(out, (uint64_t)kg);
    return start;
}

/* The other block kinds (timers) did not change: still version 1. */
size_t sl_kbf_begin_magic(sl_buf_t *out, const char magic[4], int max_parallelism, int kg) {
    return kbf_begin_v(out, magic, 1, max_parallelism, kg);
}

size_t sl_kbf_begin(sl_buf_t *out, int max_parallelism, int kg, uint32_t nstates) {
    size_t start = kbf_begin_v(out, KBF_MAGIC, SL_KB_FORMAT_VERSION, max_parallelism, kg);
    sl_kbf_varint(out, nstates);
    return start;
}

void sl_kbf_state(sl_buf_t *out, const char *name, uint32_t namelen, sl_state_kind_t kind, int ttl,
                  uint32_t nentries) {
    sl_kbf_bytes(out, name, namelen);
    sl_kbf_u8(out, sl_kbf_kind_byte(kind, ttl));
    sl_kbf_varint(out, nentries);
}

void sl_kbf_end(sl_buf_t *out, size_t start) {
    uint8_t sum[8];
    sl_st64(sum, sl_hash_bytes(out->p + start, out->len - start));
    sl_buf_append(out, sum, sizeof sum);
}

/* ------------------------------------------------------------------ */
/* reading                                                             */

/* Minimal LEB128 of at most 32 bits. */
bool sl_kbf_rd_varint32(sl_kbf_reader_t *r, uint32_t *v) {
    uint64_t x = 0;
    for (int i = 0; i < 5; i++) {
        if (r->p >= r->end) return false;
        uint8_t b = *r->p++;
        x |= (uint64_t)(b & 0x7f) << (7 * i);
        if (!(b & 0x80)) {
            if (i > 0 && b == 0) return false; /* not minimal */
            if (x > UINT32_MAX) return false;
            *v = (uint32_t)x;
            return true;
        }
    }
    return false;
}

bool sl_kbf_rd_bytes(sl_kbf_reader_t *r, const uint8_t **p, uint32_t *n) {
    uint32_t len;
    if (!sl_kbf_rd_varint32(r, &len) || (size_t)(r->end - r->p) < len) return false;
    *p = r->p;
    *n = len;
    r->p += len;
    return true;
}

bool sl_kbf_rd_u8(sl_kbf_reader_t *r, uint8_t *v) {
    if (r->p >= r->end) return false;
    *v = *r->p++;
    return true;
}

bool sl_kbf_rd_u64(sl_kbf_reader_t *r, uint64_t *v) {
    if ((size_t)(r->end - r->p) < 8) return false;
    *v = sl_ld64(r->p);
    r->p += 8;
    return true;
}

static size_t kbf_off(const sl_kbf_reader_t *r) { return (size_t)(r->p - r->base); }

int sl_kbf_open(sl_kbf_reader_t *r, const uint8_t *data, size_t len, const char magic[4], int max_parallelism,
                int kg, const char *what, char *err, size_t errlen) {
    if (!data && len) return sl_errf(err, errlen, SL_EINVAL, "%s of key group %d: no data", what, kg);
    if (len < KBF_HDR_MIN + KBF_SUM)
        return sl_errf(err, errlen, SL_EFORMAT, "%s of key group %d: block of %zu bytes is too short (truncated?)",
                       what, kg, len);
    if (memcmp(data, magic, 4) != 0)
        return sl_errf(err, errlen, SL_EFORMAT, "%s of key group %d: bad magic (not a %.4s block)", what, kg, magic);
    uint64_t stored = sl_ld64(data + len - KBF_SUM), computed = sl_hash_bytes(data, len - KBF_SUM);
    if (stored != computed)
        return sl_errf(err, errlen, SL_EFORMAT,
                       "%s of key group %d: checksum mismatch over %zu bytes (stored %016" PRIx64
                       ", computed %016" PRIx64 "): the block is corrupt or truncated",
                       what, kg, len - KBF_SUM, stored, computed);
    r->base = data;
    r->p = data + 4;
    r->end = data + len - KBF_SUM;
    uint8_t ver = 0;
    uint32_t maxp, bkg;
    int maxv = memcmp(magic, KBF_MAGIC, 4) == 0 ? SL_KB_FORMAT_VERSION : 1;
    if (!sl_kbf_rd_u8(r, &ver) || ver < 1 || ver > maxv)
        return sl_errf(err, errlen, SL_EFORMAT,
                       "%s of key group %d: unsupported format version %u (this build reads 1 to %d)", what, kg,
                       (unsigned)ver, maxv);
    if (!sl_kbf_rd_varint32(r, &maxp))
        return sl_errf(err, errlen, SL_EFORMAT, "%s of key group %d: bad max parallelism at byte %zu", what, kg,
                       kbf_off(r));
    if ((int64_t)maxp != max_parallelism)
        return sl_errf(err, errlen, SL_EFORMAT,
                       "%s of key group %d: written with max parallelism %" PRIu32
                       ", restoring with %d (keyed state cannot change max parallelism)",
                       what, kg, maxp, max_parallelism);
    if (!sl_kbf_rd_varint32(r, &bkg))
        return sl_errf(err, errlen, SL_EFORMAT, "%s of key group %d: bad key group at byte %zu", what, kg, kbf_off(r));
    if ((int64_t)bkg != kg)
        return sl_errf(err, errlen, SL_EFORMAT, "%s of key group %d: the block holds key group %" PRIu32, what, kg,
                       bkg);
    return SL_OK;
}

/* ------------------------------------------------------------------ */
/* the keyed-state block                                               */

const char *sl_kbf_kind_name(int k) {
    return k == SL_STATE_VALUE ? "value" : k == SL_STATE_LIST ? "list" : k == SL_STATE_MAP ? "map" : "?";
}

int sl_kbf_parse(const uint8_t *data, size_t len, int max_parallelism, int kg, const sl_kbf_visitor_t *v, void *c,
                 char *err, size_t errlen) {
    sl_kbf_reader_t r;
    int rc = sl_kbf_open(&r, data, len, KBF_MAGIC, max_parallelism, kg, "keyed state", err, errlen);
    if (rc) return rc;
    const char *what = "number of states";
    uint32_t nstates, si = 0, ei = 0, ii = 0;
    const uint8_t *name = NULL;
    uint32_t namelen = 0;
    int level = 0; /* for messages: 1 in a state, 2 in an entry, 3 in an item */
    if (!sl_kbf_rd_varint32(&r, &nstates)) goto bad;
    if (nstates > SL_KB_FORMAT_MAX_STATES)
        return sl_errf(err, errlen, SL_EFORMAT, "keyed state of key group %d: %" PRIu32 " states (at most %d)", kg,
                       nstates, SL_KB_FORMAT_MAX_STATES);
    for (si = 0; si < nstates; si++) {
        level = 1;
        ei = ii = 0;
        name = NULL;
        what = "state name";
        if (!sl_kbf_rd_bytes(&r, &name, &namelen)) goto bad;
        if (namelen == 0 || memchr(name, 0, namelen)) {
            what = "state name (empty or with a NUL byte)";
            goto bad;
        }
        uint8_t kind;
        uint32_t nent;
        int ttl = SL_KBF_TTL_IS_UNKNOWN; /* version 1 does not say */
        what = "state kind";
        if (!sl_kbf_rd_u8(&r, &kind)) goto bad;
        if (data[4] >= 2) { /* the version byte, checked by sl_kbf_open */
            uint8_t f = kind & (SL_KBF_TTL | SL_KBF_TTL_UNKNOWN);
            kind &= (uint8_t)~f;
            if (f == (SL_KBF_TTL | SL_KBF_TTL_UNKNOWN)) goto bad;
            ttl = f == SL_KBF_TTL ? SL_KBF_TTL_IS_YES : f ? SL_KBF_TTL_IS_UNKNOWN : SL_KBF_TTL_IS_NO;
        }
        if (kind > SL_STATE_MAP) goto bad;
        what = "number of entries";
        if (!sl_kbf_rd_varint32(&r, &nent)) goto bad;
        if (v && v->state && (rc = v->state(c, (const char *)name, namelen, (sl_state_kind_t)kind, ttl, nent)) < 0)
            return rc;
        for (ei = 0; ei < nent; ei++) {
            level = 2;
            ii = 0;
            const uint8_t *k, *ns;
            uint32_t klen, nslen, n = 1;
            what = "key";
            if (!sl_kbf_rd_bytes(&r, &k, &klen)) goto bad;
            int kkg = sl_kg_of_hash(sl_kg_key_hash(k, klen), max_parallelism);
            if (kkg != kg) {
                return sl_errf(err, errlen, SL_EFORMAT,
                               "keyed state of key group %d: state '%.*s', entry %" PRIu32
                               ": the key belongs to key group %d (byte %zu)",
                               kg, (int)SL_MIN(namelen, 64u), (const char *)name, ei, kkg, kbf_off(&r));
            }
            what = "namespace";
            if (!sl_kbf_rd_bytes(&r, &ns, &nslen)) goto bad;
            if (kind != SL_STATE_VALUE) {
                what = kind == SL_STATE_LIST ? "number of list elements" : "number of map entries";
                if (!sl_kbf_rd_varint32(&r, &n) || n == 0) goto bad;
            }
            if (v && v->entry && (rc = v->entry(c, k, klen, ns, nslen, n)) < 0) return rc;
            for (ii = 0; ii < n; ii++) {
                level = 3;
                const uint8_t *uk = NULL, *val;
                uint32_t uklen = 0, vlen;
                if (kind == SL_STATE_MAP) {
                    what = "map user key";
                    if (!sl_kbf_rd_bytes(&r, &uk, &uklen)) goto bad;
                }
                what = kind == SL_STATE_LIST ? "list element" : kind == SL_STATE_MAP ? "map value" : "value";
                if (!sl_kbf_rd_bytes(&r, &val, &vlen)) goto bad;
                if (v && v->item && (rc = v->item(c, uk, uklen, val, vlen)) < 0) return rc;
            }
        }
    }
    if (r.p != r.end) {
        return sl_errf(err, errlen, SL_EFORMAT,
                       "keyed state of key group %d: %zu unexpected bytes after the last state", kg,
                       (size_t)(r.end - r.p));
    }
    return SL_OK;
bad: {
    char where[200] = "";
    if (level >= 1 && name)
        snprintf(where, sizeof where, " state %" PRIu32 " ('%.*s')", si, (int)SL_MIN(namelen, 64u), (const char *)name);
    else if (level >= 1)
        snprintf(where, sizeof where, " state %" PRIu32, si);
    if (level >= 2) snprintf(where + strlen(where), sizeof where - strlen(where), ", entry %" PRIu32, ei);
    if (level >= 3) snprintf(where + strlen(where), sizeof where - strlen(where), ", item %" PRIu32, ii);
    return sl_errf(err, errlen, SL_EFORMAT, "keyed state of key group %d:%s: bad or truncated %s at byte %zu", kg,
                   where, what, kbf_off(&r));
}
}


/* ------------------------------------------------------------------ */
/* schema evolution of a block                                         */

typedef struct migrate_ctx {
    sl_kbf_migration_fn fn;
    void *c;
    sl_buf_t *out;
    const sl_row_migration_t *m; /* the current state's, or NULL */
    uint32_t pre;                /* its items' timestamp bytes */
    sl_state_kind_t kind;
    char name[128];
    sl_row_writer_t w;
    char *err;
    size_t errlen;
} migrate_ctx_t;

static int mig_state(void *c, const char *name, uint32_t namelen, sl_state_kind_t kind, int ttl, uint32_t nentries) {
    migrate_ctx_t *x = c;
    x->m = x->fn(x->c, name, namelen, kind, &ttl);
    x->pre = ttl == SL_KBF_TTL_IS_YES ? SL_TTL_TS_BYTES
             : ttl == SL_KBF_TTL_IS_NO ? 0
             : x->m                    ? sl_row_migration_prefix(x->m)
                                       : 0;
    x->kind = kind;
    snprintf(x->name, sizeof x->name, "%.*s", (int)SL_MIN(namelen, 100u), name);
    sl_kbf_state(x->out, name, namelen, kind, ttl, nentries);
    return 0;
}

static int mig_entry(void *c, const uint8_t *key, uint32_t klen, const uint8_t *ns, uint32_t nslen, uint32_t n) {
    migrate_ctx_t *x = c;
    sl_kbf_bytes(x->out, key, klen);
    sl_kbf_bytes(x->out, ns, nslen);
    if (x->kind != SL_STATE_VALUE) sl_kbf_varint(x->out, n);
    return 0;
}

static int mig_item(void *c, const uint8_t *uk, uint32_t uklen, const uint8_t *v, uint32_t vlen) {
    migrate_ctx_t *x = c;
    if (x->kind == SL_STATE_MAP) sl_kbf_bytes(x->out, uk, uklen);
    if (!x->m) {
        sl_kbf_bytes(x->out, v, vlen);
        return 0;
    }
    /* A TTL state's item: its timestamp stays as it is, the row after it
     * is checked or migrated. */
    uint32_t pre = x->pre;
    if (vlen < pre)
        return sl_errf(x->err, x->errlen, SL_EFORMAT,
                       "state '%s': an item of %u bytes is shorter than its %u-byte TTL timestamp", x->name,
                       (unsigned)vlen, (unsigned)pre);
    const uint8_t *row = v + pre;
    uint32_t rlen = vlen - pre;
    if (sl_row_migration_identity(x->m)) { /* same schema: still a row of it */
        sl_row_t r = {row, rlen, sl_row_migration_to(x->m)};
        if (sl_row_validate(&r) != 0)
            return sl_errf(x->err, x->errlen, SL_EFORMAT, "state '%s': a value of %u bytes is not a row of its schema",
                           x->name, (unsigned)rlen);
        sl_kbf_bytes(x->out, v, vlen);
        return 0;
    }
    char why[700];
    int rc = sl_row_migrate(x->m, row, rlen, &x->w, why, sizeof why);
    if (rc) return sl_errf(x->err, x->errlen, rc, "state '%s': %s", x->name, why);
    sl_row_t r = sl_rw_row(&x->w);
    if (r.len > UINT32_MAX - pre)
        return sl_errf(x->err, x->errlen, SL_EFORMAT, "state '%s': a migrated row is too long", x->name);
    sl_kbf_varint(x->out, (uint64_t)pre + r.len);
    sl_buf_append(x->out, v, pre);
    sl_buf_append(x->out, r.data, r.len);
    return 0;
}

int sl_kbf_migrate(const uint8_t *data, size_t len, int max_parallelism, int kg, sl_kbf_migration_fn fn, void *c,
                   sl_buf_t *out, char *err, size_t errlen) {
    sl_kbf_reader_t r = {0};
    int rc = sl_kbf_open(&r, data, len, KBF_MAGIC, max_parallelism, kg, "keyed state", err, errlen);
    uint32_t nstates = 0;
    if (!rc && !sl_kbf_rd_varint32(&r, &nstates))
        rc = sl_errf(err, errlen, SL_EFORMAT, "keyed state of key group %d: bad number of states", kg);
    if (rc) return rc;
    out->len = 0;
    size_t start = sl_kbf_begin(out, max_parallelism, kg, nstates);
    migrate_ctx_t x = {.fn = fn, .c = c, .out = out, .err = err, .errlen = errlen};
    sl_rw_init(&x.w);
    const sl_kbf_visitor_t v = {mig_state, mig_entry, mig_item};
    rc = sl_kbf_parse(data, len, max_parallelism, kg, &v, &x, err, errlen);
    sl_rw_free(&x.w);
    if (rc) return rc;
    sl_kbf_end(out, start);
    return 0;
}

/* ------------------------------------------------------------------ */
/* TTL migration of a registered state (Flink 2.2's TtlAwareSerializer) */

/* (key, ns) pairs, each as u32 klen, key, u32 nslen, ns. */
typedef struct ttlm_entries {
    sl_buf_t b;
    size_t n;
} ttlm_entries_t;

static int ttlm_entry(void *c, const void *key, uint32_t klen, const void *ns, uint32_t nslen) {
    ttlm_entries_t *e = c;
    uint8_t l[4];
    sl_st32(l, klen);
    sl_buf_append(&e->b, l, 4);
    sl_buf_append(&e->b, key, klen);
    sl_st32(l, nslen);
    sl_buf_append(&e->b, l, 4);
    sl_buf_append(&e->b, ns, nslen);
    e->n++;
    return 0;
}

/* Copies of one entry's items: list elements, or map (user key, value)s;
 * each as u32 uklen, uk, u32 vlen, v (already converted). */
typedef struct ttlm_items {
    sl_buf_t b;
    int n;
    bool add, bad;
    uint8_t ts[SL_TTL_TS_BYTES];
} ttlm_items_t;

static void ttlm_put(ttlm_items_t *it, const void *uk, uint32_t uklen, const void *v, uint32_t vlen) {
    uint8_t l[4];
    if (!it->add && vlen < SL_TTL_TS_BYTES) {
        it->bad = true;
        return;
    }
    sl_st32(l, uklen);
    sl_buf_append(&it->b, l, 4);
    if (uklen) sl_buf_append(&it->b, uk, uklen);
    sl_st32(l, it->add ? vlen + SL_TTL_TS_BYTES : vlen - SL_TTL_TS_BYTES);
    sl_buf_append(&it->b, l, 4);
    if (it->add) {
        sl_buf_append(&it->b, it->ts, SL_TTL_TS_BYTES);
        if (vlen) sl_buf_append(&it->b, v, vlen);
    } else if (vlen > SL_TTL_TS_BYTES) {
        sl_buf_append(&it->b, (const uint8_t *)v + SL_TTL_TS_BYTES, vlen - SL_TTL_TS_BYTES);
    }
    it->n++;
}

static int ttlm_list_cb(void *c, const void *v, uint32_t len) {
    ttlm_put(c, NULL, 0, v, len);
    return 0;
}

static int ttlm_map_cb(void *c, const void *k, uint32_t klen, const void *v, uint32_t vlen) {
    ttlm_put(c, k, klen, v, vlen);
    return 0;
}

/* Rewrites the entries collected in e (current key set to each). */
static int ttlm_rewrite(sl_keyed_backend_t *b, int sid, sl_state_kind_t kind, ttlm_items_t *it,
                        const ttlm_entries_t *e) {
    const sl_keyed_backend_ops_t *o = b->ops;
    const uint8_t *p = e->b.p;
    const void **vals = NULL;
    uint32_t *lens = NULL;
    int cap = 0, rc = 0;
    for (size_t i = 0; i < e->n && rc == 0; i++) {
        uint32_t klen = sl_ld32(p);
        const uint8_t *key = p + 4;
        uint32_t nslen = sl_ld32(key + klen);
        const uint8_t *ns = key + klen + 4;
        p = ns + nslen;
        sl_kb_set_key(b, key, klen);
        it->b.len = 0;
        it->n = 0;
        it->bad = false;
        if (kind == SL_STATE_VALUE) {
            uint32_t vlen = 0;
            const void *v = o->get(b, sid, ns, nslen, &vlen);
            if (!v) continue;
            ttlm_put(it, NULL, 0, v, vlen);
        } else if (kind == SL_STATE_LIST) {
            rc = o->list_foreach(b, sid, ns, nslen, ttlm_list_cb, it);
            if (rc > 0) rc = 0;
        } else {
            rc = o->map_foreach(b, sid, ns, nslen, ttlm_map_cb, it);
            if (rc > 0) rc = 0;
        }
        if (rc < 0) break;
        if (it->bad) {
            rc = SL_EFORMAT; /* an item shorter than the timestamp it should have */
            break;
        }
        if (it->n > cap) {
            cap = it->n * 2;
            vals = sl_realloc(vals, (size_t)cap * sizeof *vals);
            lens = sl_realloc(lens, (size_t)cap * sizeof *lens);
        }
        const uint8_t *q = it->b.p;
        for (int j = 0; j < it->n && rc == 0; j++) {
            uint32_t uklen = sl_ld32(q);
            const uint8_t *uk = q + 4;
            uint32_t vlen = sl_ld32(uk + uklen);
            const uint8_t *v = uk + uklen + 4;
            q = v + vlen;
            vals[j] = v;
            lens[j] = vlen;
            if (kind == SL_STATE_VALUE) rc = o->put(b, sid, ns, nslen, v, vlen);
            else if (kind == SL_STATE_MAP) rc = o->map_put(b, sid, ns, nslen, uk, uklen, v, vlen);
        }
        if (rc == 0 && kind == SL_STATE_LIST && it->n) rc = o->list_replace(b, sid, ns, nslen, it->n, vals, lens);
    }
    sl_free(vals);
    sl_free(lens);
    return rc < 0 ? rc : 0;
}

int sl_kb_ttl_migrate(sl_keyed_backend_t *b, int sid, sl_state_kind_t kind, bool add, int64_t ts) {
    if (!b || sid < 0 || (int)kind < SL_STATE_VALUE || kind > SL_STATE_MAP) return SL_EINVAL;
    /* the current key, put back afterwards */
    bool had_key = b->key && b->kg >= b->range.start && b->kg < b->range.end;
    uint32_t savedlen = b->keylen;
    uint64_t savedhash = b->keyhash;
    uint8_t *saved = had_key ? sl_malloc(savedlen ? savedlen : 1) : NULL;
    if (had_key && savedlen) memcpy(saved, b->key, savedlen);
    ttlm_items_t it = {.add = add};
    sl_st64(it.ts, (uint64_t)ts);
    ttlm_entries_t e = {0};
    int rc = 0;
    if (b->ops->foreach_entry_kg) { /* a key group at a time: bounded memory */
        for (int kg = b->range.start; kg < b->range.end && rc == 0; kg++) {
            e.b.len = 0;
            e.n = 0;
            rc = b->ops->foreach_entry_kg(b, sid, kg, ttlm_entry, &e);
            if (rc == 0) rc = ttlm_rewrite(b, sid, kind, &it, &e);
        }
    } else {
        rc = b->ops->foreach_entry(b, sid, ttlm_entry, &e);
        if (rc == 0) rc = ttlm_rewrite(b, sid, kind, &it, &e);
    }
    if (had_key) sl_kb_set_key_hashed(b, saved, savedlen, savedhash);
    sl_free(saved);
    sl_buf_free(&e.b);
    sl_buf_free(&it.b);
    return rc < 0 ? rc : 0;
}
