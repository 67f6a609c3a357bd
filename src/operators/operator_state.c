/*
 * operator_state.c — operator (non-keyed) state of user functions: named
 * split and union lists of byte strings per subtask (Flink's
 * CheckpointedFunction, ListState, union ListState; the API is in
 * include/sluice/operator_state.h).
 *
 * The lists of an operator live in one sl_opstate_t hanging off the
 * operator (op->opstate).  On a checkpoint the function's snapshot_state
 * callback refreshes them and they are serialized as the operator's
 * operator-state blob.  On a restore the executor hands every operator the
 * union of all old subtasks' blobs (each prefixed with a u32 length); attach
 * parses all of them (refusing a malformed one by name) and computes this
 * subtask's share of each list at once:
 *   split: same parallelism — the old subtask with our index; else the
 *          concatenation in old subtask order cut into p contiguous shares
 *          (Flink's RoundRobinOperatorStateRepartitioner);
 *   union: everything.
 * Lists restored but not declared again are carried into later checkpoints
 * (a union list only by subtask 0, so that the next restore sees it once).
 *
 * Everything runs on the operator's task thread.  The builder that gives
 * an operator its callbacks (sl_checkpointed) is api/operator_state_api.c.
 */
#include <string.h>

#include "common/common.h"
#include "operators/basic_ops.h"

#define OPSTATE_VERSION 1
enum { MODE_SPLIT = 0, MODE_UNION = 1 };

struct sl_opstate_list {
    char *name;
    int mode;
    bool declared;
    sl_buf_t data;
    uint32_t *off, *len;
    int n, cap;
};

typedef struct sl_opstate {
    sl_operator_t *op;
    sl_checkpointed_fn_t cf;
    void *ctx;
    sl_rt_t rt;
    bool restored;
    sl_opstate_list_t **lists;
    int nlists;
} sl_opstate_t;

static const char *mode_name(int m) { return m == MODE_UNION ? "union list" : "split list"; }

/* ---- lists ---- */

static sl_opstate_list_t *find_list(sl_opstate_t *s, const char *name) {
    for (int i = 0; i < s->nlists; i++)
        if (strcmp(s->lists[i]->name, name) == 0) return s->lists[i];
    return NULL;
}

static sl_opstate_list_t *new_list(sl_opstate_t *s, const char *name, size_t namelen, int mode) {
    sl_opstate_list_t *l = sl_calloc(1, sizeof *l);
    l->name = sl_strndup(name, namelen);
    l->mode = mode;
    s->lists = sl_realloc(s->lists, (size_t)(s->nlists + 1) * sizeof *s->lists);
    s->lists[s->nlists++] = l;
    return l;
}

static void free_list(sl_opstate_list_t *l) {
    sl_free(l->name);
    sl_buf_free(&l->data);
    sl_free(l->off);
    sl_free(l->len);
    sl_free(l);
}

int sl_opstate_count(const sl_opstate_list_t *l) { return l ? l->n : 0; }

const void *sl_opstate_get(const sl_opstate_list_t *l, int i, uint32_t *len) {
    if (!l || i < 0 || i >= l->n) return NULL;
    if (len) *len = l->len[i];
    return l->data.p + l->off[i];
}

int sl_opstate_add(sl_opstate_list_t *l, const void *v, uint32_t len) {
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 16;
        l->off = sl_realloc(l->off, (size_t)l->cap * sizeof *l->off);
        l->len = sl_realloc(l->len, (size_t)l->cap * sizeof *l->len);
    }
    l->off[l->n] = (uint32_t)l->data.len;
    l->len[l->n] = len;
    l->n++;
    if (len) sl_buf_append(&l->data, v, len);
    return 0;
}

void sl_opstate_clear(sl_opstate_list_t *l) {
    l->n = 0;
    l->data.len = 0;
}

/* ---- the blob format (explicit little-endian) ---- */

static void put_u32(sl_buf_t *b, uint32_t v) {
    uint8_t x[4] = {(uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24)};
    sl_buf_append(b, x, 4);
}

static uint32_t get_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* A reader over one blob; every take checks the bounds. */
typedef struct rd {
    const uint8_t *p, *end;
    bool bad;
} rd_t;

static uint32_t rd_u32(rd_t *r) {
    if (r->bad || r->end - r->p < 4) {
        r->bad = true;
        return 0;
    }
    uint32_t v = get_u32(r->p);
    r->p += 4;
    return v;
}

static const uint8_t *rd_bytes(rd_t *r, uint32_t n) {
    if (r->bad || (size_t)(r->end - r->p) < n) {
        r->bad = true;
        return NULL;
    }
    const uint8_t *p = r->p;
    r->p += n;
    return p;
}

int sl_opstate_union_next(const void *state, size_t len, size_t *pos, const void **blob, size_t *blob_len) {
    if (*pos >= len) return 0;
    if (len - *pos < 4) return SL_EFORMAT;
    uint32_t n = get_u32((const uint8_t *)state + *pos);
    if (len - *pos - 4 < n) return SL_EFORMAT;
    *blob = (const uint8_t *)state + *pos + 4;
    *blob_len = n;
    *pos += 4 + (size_t)n;
    return 1;
}

/* One old subtask's blob, parsed. */
typedef struct old_blob {
    uint32_t subtask, parallelism, nlists;
    const uint8_t *lists; /* start of the lists */
    size_t lists_len;
} old_blob_t;

/* Walks the lists of b: for each, calls fn with its name, mode and item
 * reader.  Returns false when malformed (why in *why). */
typedef void (*list_fn)(void *c, const char *name, uint32_t namelen, int mode, rd_t *items, uint32_t nitems);

static bool walk_lists(const old_blob_t *b, list_fn fn, void *c, const char **why) {
    rd_t r = {b->lists, b->lists + b->lists_len, false};
    for (uint32_t i = 0; i < b->nlists; i++) {
        const uint8_t *m = rd_bytes(&r, 1);
        uint32_t namelen = rd_u32(&r);
        const uint8_t *name = rd_bytes(&r, namelen);
        uint32_t nitems = rd_u32(&r);
        if (r.bad) {
            *why = "truncated list header";
            return false;
        }
        if (*m > MODE_UNION) {
            *why = "unknown list mode";
            return false;
        }
        if (namelen == 0 || memchr(name, 0, namelen)) {
            *why = "bad list name";
            return false;
        }
        rd_t items = r;
        for (uint32_t k = 0; k < nitems; k++) rd_bytes(&r, rd_u32(&r));
        if (r.bad) {
            *why = "truncated list items";
            return false;
        }
        items.end = r.p;
        if (fn) fn(c, (const char *)name, namelen, *m, &items, nitems);
    }
    if (r.p != r.end) {
        *why = "trailing bytes";
        return false;
    }
    return true;
}

/* ---- restore: this subtask's share of every list ---- */

typedef struct share_ctx {
    sl_opstate_t *s;
    const char *why;   /* conflict found (modes differ between old subtasks) */
    int pass;          /* 0: count split items per name; 1: copy */
    int64_t *total;    /* per list index: split items over all old subtasks */
    int64_t *seen;     /* per list index: split items walked so far in pass 1 */
    bool take_all;     /* same parallelism: take whole blob (this subtask's) */
    bool skip_split;   /* same parallelism: not this subtask's blob */
} share_ctx_t;

static int list_index(sl_opstate_t *s, const sl_opstate_list_t *l) {
    for (int i = 0; i < s->nlists; i++)
        if (s->lists[i] == l) return i;
    return -1;
}

static void share_list(void *c, const char *name, uint32_t namelen, int mode, rd_t *items, uint32_t nitems) {
    share_ctx_t *sc = c;
    sl_opstate_t *s = sc->s;
    sl_opstate_list_t *l = NULL;
    for (int i = 0; i < s->nlists; i++)
        if (strlen(s->lists[i]->name) == namelen && memcmp(s->lists[i]->name, name, namelen) == 0) l = s->lists[i];
    if (!l) l = new_list(s, name, namelen, mode);
    if (l->mode != mode) {
        sc->why = "a list is split in one old subtask and union in another";
        return;
    }
    int li = list_index(s, l);
    if (sc->pass == 0) {
        if (mode == MODE_SPLIT) sc->total[li] += nitems;
        return;
    }
    int p = s->op->parallelism, me = s->op->subtask;
    int64_t base = sc->total[li] / p, rem = sc->total[li] % p;
    int64_t lo = me * base + (me < rem ? me : rem), hi = lo + base + (me < rem ? 1 : 0);
    for (uint32_t k = 0; k < nitems; k++) {
        uint32_t n = rd_u32(items);
        const uint8_t *v = rd_bytes(items, n);
        bool take;
        if (mode == MODE_UNION)
            take = true;
        else if (sc->take_all || sc->skip_split)
            take = sc->take_all;
        else {
            int64_t at = sc->seen[li]++;
            take = at >= lo && at < hi;
        }
        if (take) sl_opstate_add(l, v, n);
    }
}

static int parse_restored(sl_opstate_t *s) {
    sl_operator_t *op = s->op;
    const char *why = NULL;
    int nb = 0, cap = 0;
    old_blob_t *bs = NULL;
    size_t pos = 0;
    const void *blob;
    size_t blen;
    int rc;
    while ((rc = sl_opstate_union_next(op->restored_state, op->restored_len, &pos, &blob, &blen)) == 1) {
        rd_t r = {blob, (const uint8_t *)blob + blen, false};
        const uint8_t *ver = rd_bytes(&r, 1);
        old_blob_t b = {0};
        b.subtask = rd_u32(&r);
        b.parallelism = rd_u32(&r);
        b.nlists = rd_u32(&r);
        if (r.bad) {
            why = "truncated header";
            break;
        }
        if (*ver != OPSTATE_VERSION) {
            why = "unknown version";
            break;
        }
        if (b.parallelism == 0 || b.subtask >= b.parallelism || (nb && b.parallelism != bs[0].parallelism)) {
            why = "inconsistent subtask numbers";
            break;
        }
        for (int i = 0; i < nb; i++)
            if (bs[i].subtask == b.subtask) why = "two blobs of one old subtask";
        if (why) break;
        b.lists = r.p;
        b.lists_len = (size_t)(r.end - r.p);
        if (!walk_lists(&b, NULL, NULL, &why)) break;
        if (nb == cap) {
            cap = cap ? cap * 2 : 8;
            bs = sl_realloc(bs, (size_t)cap * sizeof *bs);
        }
        bs[nb++] = b;
    }
    if (rc < 0 && !why) why = "truncated union of subtasks";
    if (!why) {
        /* old subtask order, whatever order the union came in */
        for (int i = 1; i < nb; i++)
            for (int j = i; j > 0 && bs[j - 1].subtask > bs[j].subtask; j--) {
                old_blob_t t = bs[j];
                bs[j] = bs[j - 1];
                bs[j - 1] = t;
            }
        bool same = nb && (int)bs[0].parallelism == op->parallelism;
        share_ctx_t sc = {.s = s};
        for (int pass = 0; pass < 2 && !sc.why; pass++) {
            sc.pass = pass;
            for (int i = 0; i < nb && !sc.why; i++) {
                /* lists may be created while walking: grow the counters first */
                int need = s->nlists + (int)bs[i].nlists + 1;
                sc.total = sl_realloc(sc.total, (size_t)need * sizeof *sc.total);
                sc.seen = sl_realloc(sc.seen, (size_t)need * sizeof *sc.seen);
                if (pass == 0 && i == 0) {
                    memset(sc.total, 0, (size_t)need * sizeof *sc.total);
                    memset(sc.seen, 0, (size_t)need * sizeof *sc.seen);
                } else if (pass == 0) {
                    int had = s->nlists;
                    memset(sc.total + had, 0, (size_t)(need - had) * sizeof *sc.total);
                    memset(sc.seen + had, 0, (size_t)(need - had) * sizeof *sc.seen);
                }
                sc.take_all = same && (int)bs[i].subtask == op->subtask;
                sc.skip_split = same && !sc.take_all;
                const char *w = NULL;
                walk_lists(&bs[i], share_list, &sc, &w);
            }
        }
        why = sc.why;
        sl_free(sc.total);
        sl_free(sc.seen);
    }
    sl_free(bs);
    if (why)
        return sl_op_fail(op, SL_EFORMAT, "operator state of '%s' in the checkpoint is malformed (%s)",
                          op->uid ? op->uid : op->name, why);
    s->restored = true;
    return 0;
}

/* ---- attach / declare / snapshot ---- */

bool sl_opstate_wanted(const sl_operator_t *op, const sl_checkpointed_fn_t *cf) {
    return op->restored_state || (cf && (cf->initialize_state || cf->snapshot_state));
}

int sl_opstate_attach(sl_operator_t *op, const sl_checkpointed_fn_t *cf, void *ctx) {
    if (op->opstate) return 0;
    sl_opstate_t *s = sl_calloc(1, sizeof *s);
    s->op = op;
    if (cf) s->cf = *cf;
    s->ctx = ctx;
    s->rt.op = op;
    op->opstate = s;
    if (op->restored_state) {
        int rc = parse_restored(s);
        if (rc < 0) return rc;
    }
    if (s->cf.initialize_state) {
        int rc = s->cf.initialize_state(ctx, &s->rt);
        if (rc < 0) return sl_op_fail(op, rc, "initialize_state failed (%s)", sl_strerror(rc));
    }
    return 0;
}

sl_opstate_list_t *sl_opstate_declare(sl_operator_t *op, const char *name, int mode) {
    if (!name || !name[0]) {
        sl_op_fail(op, SL_EINVAL, "operator state: a list needs a name");
        return NULL;
    }
    if (!op->opstate) {
        int rc = sl_opstate_attach(op, NULL, NULL);
        if (rc < 0) return NULL;
    }
    sl_opstate_list_t *l = find_list(op->opstate, name);
    if (!l) l = new_list(op->opstate, name, strlen(name), mode);
    if (l->mode != mode) {
        sl_op_fail(op, SL_EINVAL, "operator state '%s' is declared as %s state but %s as %s state", name,
                   mode_name(mode), l->declared ? "was declared before" : "the checkpoint holds it",
                   mode_name(l->mode));
        return NULL;
    }
    l->declared = true;
    return l;
}

sl_opstate_list_t *sl_opstate_list(sl_rt_t *rt, const char *name) {
    return sl_opstate_declare(rt->op, name, MODE_SPLIT);
}

sl_opstate_list_t *sl_opstate_union_list(sl_rt_t *rt, const char *name) {
    return sl_opstate_declare(rt->op, name, MODE_UNION);
}

bool sl_opstate_is_restored(sl_rt_t *rt) { return rt->op->restored_state != NULL; }

int sl_opstate_snapshot(sl_operator_t *op, int64_t id, sl_buf_t *out) {
    sl_opstate_t *s = op->opstate;
    if (!s) return 0;
    if (s->cf.snapshot_state) {
        int rc = s->cf.snapshot_state(s->ctx, &s->rt, id);
        if (rc < 0) return sl_op_fail(op, rc, "snapshot_state of checkpoint %lld failed (%s)", (long long)id,
                                      sl_strerror(rc));
    }
    uint8_t ver = OPSTATE_VERSION;
    sl_buf_append(out, &ver, 1);
    put_u32(out, (uint32_t)op->subtask);
    put_u32(out, (uint32_t)op->parallelism);
    int n = 0;
    for (int i = 0; i < s->nlists; i++) {
        sl_opstate_list_t *l = s->lists[i];
        /* carried union lists: subtask 0 writes the one copy */
        n += l->declared || l->mode == MODE_SPLIT || op->subtask == 0;
    }
    put_u32(out, (uint32_t)n);
    for (int i = 0; i < s->nlists; i++) {
        sl_opstate_list_t *l = s->lists[i];
        if (!(l->declared || l->mode == MODE_SPLIT || op->subtask == 0)) continue;
        uint8_t m = (uint8_t)l->mode;
        sl_buf_append(out, &m, 1);
        uint32_t nl = (uint32_t)strlen(l->name);
        put_u32(out, nl);
        sl_buf_append(out, l->name, nl);
        put_u32(out, (uint32_t)l->n);
        for (int k = 0; k < l->n; k++) {
            put_u32(out, l->len[k]);
            sl_buf_append(out, l->data.p + l->off[k], l->len[k]);
        }
    }
    return 0;
}

void sl_opstate_free(sl_operator_t *op) {
    sl_opstate_t *s = op->opstate;
    if (!s) return;
    for (int i = 0; i < s->nlists; i++) free_list(s->lists[i]);
    sl_free(s->lists);
    sl_free(s);
    op->opstate = NULL;
}
