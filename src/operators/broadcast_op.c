/*
 * broadcast_op.c — broadcast state (Flink's KeyedBroadcastProcessFunction
 * and its operator, CoBroadcastWithKeyedOperator): the two-input operator
 * and the broadcast state it holds.  The builder (sl_broadcast_stream,
 * sl_connect_broadcast, sl_broadcast_process) is api/broadcast_api.c.
 *
 * Input 0 is a keyed stream (hash partitioned; the operator has a keyed
 * backend and timers for it); input 1 is broadcast (every subtask gets
 * every element).  The broadcast state is a few small map states held by
 * the operator itself: per state a sorted array of (key, value) byte
 * strings, so reads are a binary search and a checkpoint copies the entries
 * in a canonical order.  It is the operator's non-keyed state
 * (vt->snapshot_state); a restore at any parallelism gives every new
 * subtask one old subtask's copy (all copies are equal), like Flink's
 * broadcast state restore.
 *
 * Operator state blob (all integers u32 little-endian):
 *   "SLBC" version(1) nstates { namelen name n { klen key vlen value }* }*
 */
#include <stdio.h>

#include "common/common.h"
#include "operators/basic_ops.h"
#include "operators/broadcast_op.h"
#include "sluice/broadcast.h"

#define BC_MAGIC "SLBC"
#define BC_VERSION 1u

typedef sl_broadcast_spec_t bc_spec_t;

void sl_broadcast_spec_free(void *p) {
    bc_spec_t *s = p;
    for (int i = 0; i < s->nnames; i++) sl_free(s->names[i]);
    sl_free(s->names);
    sl_free(s);
}

/* ---- broadcast map state -------------------------------------------- */

typedef struct bc_entry {
    uint8_t *k, *v;
    uint32_t klen, vlen;
} bc_entry_t;

typedef struct bc_op bc_op_t;
static const sl_operator_vt_t broadcast_vt;

struct sl_bstate {
    bc_op_t *op;
    const char *name;   /* the spec's */
    bc_entry_t *e;      /* sorted bytewise by key */
    int64_t n, cap;
};

struct sl_bctx {
    bc_op_t *op;
    int64_t ts;
};

struct bc_op {
    sl_operator_t base;
    bc_spec_t spec;     /* shallow copy; names owned by the node's spec */
    void *ctx;
    sl_collector_t col;
    sl_rt_t rt;
    sl_pctx_t pc;
    sl_bctx_t bc;
    sl_bstate_t *states; /* [spec.nnames] */
    bool in_broadcast;   /* inside process_broadcast_element: writes allowed */
    bool in_apply;       /* inside apply_to_keyed_state */
    bool opened;
};

/* A function without ctx_clone shares its context between subtasks, so a
 * handle stored there by one subtask's open may be used by another: it is
 * then resolved to the same state of this thread's instance of the
 * operator (sl_op_thread_instance, as for keyed state), so each subtask
 * keeps its own. */
static inline sl_bstate_t *resolve(sl_bstate_t *st) {
    bc_op_t *cur = (bc_op_t *)sl_op_thread_instance(&st->op->base);
    if (SL_LIKELY(cur == st->op)) return st;
    return &cur->states[st - st->op->states]; /* the same node's spec: the same index */
}

static int keycmp(const void *a, uint32_t al, const void *b, uint32_t bl) {
    uint32_t n = al < bl ? al : bl;
    int c = n ? memcmp(a, b, n) : 0;
    return c ? c : (al > bl) - (al < bl);
}

/* Index of k, or -(insertion point) - 1. */
static int64_t bs_find(const sl_bstate_t *st, const void *k, uint32_t klen) {
    int64_t lo = 0, hi = st->n - 1;
    while (lo <= hi) {
        int64_t mid = lo + (hi - lo) / 2;
        int c = keycmp(st->e[mid].k, st->e[mid].klen, k, klen);
        if (c == 0) return mid;
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid - 1;
    }
    return -lo - 1;
}

static uint8_t *dup_bytes(const void *p, uint32_t n) {
    uint8_t *d = sl_malloc(n ? n : 1);
    if (n) memcpy(d, p, n);
    return d;
}

/* Inserts or replaces without the write check (restore uses it too). */
static void bs_put(sl_bstate_t *st, const void *k, uint32_t klen, const void *v, uint32_t vlen) {
    int64_t i = bs_find(st, k, klen);
    if (i >= 0) {
        sl_free(st->e[i].v);
        st->e[i].v = dup_bytes(v, vlen);
        st->e[i].vlen = vlen;
        return;
    }
    i = -i - 1;
    if (st->n == st->cap) {
        st->cap = st->cap ? st->cap * 2 : 8;
        st->e = sl_realloc(st->e, (size_t)st->cap * sizeof *st->e);
    }
    memmove(&st->e[i + 1], &st->e[i], (size_t)(st->n - i) * sizeof *st->e);
    st->e[i] = (bc_entry_t){dup_bytes(k, klen), dup_bytes(v, vlen), klen, vlen};
    st->n++;
}

static void bs_clear(sl_bstate_t *st) {
    for (int64_t i = 0; i < st->n; i++) {
        sl_free(st->e[i].k);
        sl_free(st->e[i].v);
    }
    st->n = 0;
}

sl_bstate_t *sl_bstate_get_state(sl_rt_t *rt, const char *name) {
    sl_operator_t *o = rt->op;
    if (!o || o->vt != &broadcast_vt) {
        if (o) sl_op_fail(o, SL_EINVAL, "broadcast state '%s' asked for outside a broadcast process function",
                          name ? name : "(null)");
        return NULL;
    }
    bc_op_t *op = (bc_op_t *)o;
    for (int i = 0; name && i < op->spec.nnames; i++)
        if (strcmp(op->spec.names[i], name) == 0) return &op->states[i];
    char decl[512] = "";
    size_t off = 0;
    for (int i = 0; i < op->spec.nnames && off < sizeof decl; i++)
        off += (size_t)snprintf(decl + off, sizeof decl - off, "%s'%s'", i ? ", " : "", op->spec.names[i]);
    sl_op_fail(o, SL_ENOTFOUND, "unknown broadcast state '%s' (the broadcast stream declares %s)",
               name ? name : "(null)", decl);
    return NULL;
}

const void *sl_bstate_get(sl_bstate_t *st, const void *k, uint32_t klen, uint32_t *vlen) {
    st = resolve(st);
    int64_t i = bs_find(st, k, klen);
    if (i < 0) {
        if (vlen) *vlen = 0;
        return NULL;
    }
    if (vlen) *vlen = st->e[i].vlen;
    return st->e[i].v;
}

bool sl_bstate_contains(sl_bstate_t *st, const void *k, uint32_t klen) { return bs_find(resolve(st), k, klen) >= 0; }

int64_t sl_bstate_size(sl_bstate_t *st) { return resolve(st)->n; }

int64_t sl_bstate_foreach(sl_bstate_t *st, void (*fn)(void *c, const void *k, uint32_t kl, const void *v, uint32_t vl),
                          void *c) {
    st = resolve(st);
    for (int64_t i = 0; fn && i < st->n; i++) fn(c, st->e[i].k, st->e[i].klen, st->e[i].v, st->e[i].vlen);
    return st->n;
}

static int write_check(sl_bstate_t *st, const char *what) {
    if (SL_LIKELY(st->op->in_broadcast)) return 0;
    return sl_op_fail(&st->op->base, SL_EINVAL,
                      "broadcast state '%s' is read-only outside process_broadcast_element (%s)", st->name, what);
}

int sl_bstate_put(sl_bstate_t *st, const void *k, uint32_t klen, const void *v, uint32_t vlen) {
    st = resolve(st);
    int rc = write_check(st, "put");
    if (rc < 0) return rc;
    bs_put(st, k, klen, v, vlen);
    return 0;
}

int sl_bstate_remove(sl_bstate_t *st, const void *k, uint32_t klen) {
    st = resolve(st);
    int rc = write_check(st, "remove");
    if (rc < 0) return rc;
    int64_t i = bs_find(st, k, klen);
    if (i < 0) return 0;
    sl_free(st->e[i].k);
    sl_free(st->e[i].v);
    memmove(&st->e[i], &st->e[i + 1], (size_t)(st->n - i - 1) * sizeof *st->e);
    st->n--;
    return 0;
}

int sl_bstate_clear(sl_bstate_t *st) {
    st = resolve(st);
    int rc = write_check(st, "clear");
    if (rc < 0) return rc;
    bs_clear(st);
    return 0;
}

int64_t sl_bctx_timestamp(sl_bctx_t *bc) { return bc->ts; }
int64_t sl_bctx_watermark(sl_bctx_t *bc) { return bc->op->base.wm; }
int64_t sl_bctx_now(sl_bctx_t *bc) { return sl_op_now(&bc->op->base); }

/* ---- apply to keyed state ------------------------------------------- */

typedef struct key_list {
    uint8_t *bytes;     /* keys back to back */
    size_t len, cap;
    uint32_t *lens;
    int64_t n, ncap;
} key_list_t;

static int collect_key(void *c, const void *key, uint32_t klen, const void *ns, uint32_t nslen) {
    key_list_t *kl = c;
    if (nslen) return 0; /* user keyed state has the empty namespace */
    if (kl->len + klen > kl->cap) {
        kl->cap = (kl->len + klen) * 2 + 64;
        kl->bytes = sl_realloc(kl->bytes, kl->cap);
    }
    if (kl->n == kl->ncap) {
        kl->ncap = kl->ncap ? kl->ncap * 2 : 64;
        kl->lens = sl_realloc(kl->lens, (size_t)kl->ncap * sizeof *kl->lens);
    }
    memcpy(kl->bytes + kl->len, key, klen);
    kl->len += klen;
    kl->lens[kl->n++] = klen;
    return 0;
}

int sl_bctx_apply_to_keyed_state(sl_bctx_t *bc, sl_state_t *st, sl_keyed_visit_fn fn, void *c) {
    bc_op_t *op = bc->op;
    sl_operator_t *o = &op->base;
    if (!op->in_broadcast || op->in_apply)
        return sl_op_fail(o, SL_EINVAL, "apply_to_keyed_state: only inside process_broadcast_element, not nested");
    if (st && st->op != o) { /* a handle of another subtask, kept in a shared context: this subtask's */
        sl_state_t *mine = NULL;
        for (int i = 0; i < o->nstates && !mine && st->name; i++)
            if (o->states[i]->kind == st->kind && o->states[i]->name && strcmp(o->states[i]->name, st->name) == 0)
                mine = o->states[i];
        if (!mine && st->op->vt != o->vt)
            return sl_op_fail(o, SL_EINVAL, "apply_to_keyed_state: state '%s' is not a keyed state of this operator",
                              st->name ? st->name : "?");
        if (!mine)
            return sl_op_fail(o, SL_EINVAL,
                              "apply_to_keyed_state: state '%s' was declared by another subtask's open() but not by "
                              "this one's",
                              st->name ? st->name : "?");
        st = mine;
    }
    if (!st || !fn)
        return sl_op_fail(o, SL_EINVAL, "apply_to_keyed_state: %s", !fn ? "no function given" : "no state given");
    /* The backend's iteration must not see changes: collect the keys first,
     * then visit each with the state scoped to it. */
    key_list_t kl = {0};
    int rc = o->kb->ops->foreach_entry(o->kb, st->sid, collect_key, &kl);
    if (rc < 0) {
        sl_free(kl.bytes);
        sl_free(kl.lens);
        return sl_op_fail(o, rc, "apply_to_keyed_state: iterating the keyed state failed (%s)", sl_strerror(rc));
    }
    op->in_apply = true;
    size_t off = 0;
    for (int64_t i = 0; i < kl.n; i++) {
        sl_kb_set_key(o->kb, kl.bytes + off, kl.lens[i]);
        rc = fn(c, o->kb->key, o->kb->keylen, st);
        off += kl.lens[i];
        if (rc != 0) break;
    }
    op->in_apply = false;
    sl_free(kl.bytes);
    sl_free(kl.lens);
    if (rc < 0) return sl_op_fail(o, rc, "apply_to_keyed_state: the function failed (%s)", sl_strerror(rc));
    return rc;
}

/* ---- snapshot and restore ------------------------------------------- */

static void put32(sl_buf_t *b, uint32_t v) { sl_buf_append(b, &v, 4); }

static int bc_snapshot(sl_operator_t *o, int64_t id, sl_buf_t *out) {
    SL_UNUSED(id);
    bc_op_t *op = (bc_op_t *)o;
    sl_buf_append(out, BC_MAGIC, 4);
    put32(out, BC_VERSION);
    put32(out, (uint32_t)op->spec.nnames);
    for (int i = 0; i < op->spec.nnames; i++) {
        const sl_bstate_t *st = &op->states[i];
        put32(out, (uint32_t)strlen(st->name));
        sl_buf_append(out, st->name, strlen(st->name));
        put32(out, (uint32_t)st->n);
        for (int64_t j = 0; j < st->n; j++) {
            put32(out, st->e[j].klen);
            sl_buf_append(out, st->e[j].k, st->e[j].klen);
            put32(out, st->e[j].vlen);
            sl_buf_append(out, st->e[j].v, st->e[j].vlen);
        }
    }
    return 0;
}

typedef struct rd {
    const uint8_t *p, *end;
} rd_t;

static bool rd32(rd_t *r, uint32_t *v) {
    if (r->end - r->p < 4) return false;
    memcpy(v, r->p, 4);
    r->p += 4;
    return true;
}

static bool rdbytes(rd_t *r, const uint8_t **p, uint32_t *n) {
    if (!rd32(r, n) || (size_t)(r->end - r->p) < *n) return false;
    *p = r->p;
    r->p += *n;
    return true;
}

/* Loads one old subtask's copy: every subtask held the same, so one is the
 * state (Flink gives each new subtask one old copy, round robin). */
static int bc_restore(bc_op_t *op) {
    sl_operator_t *o = &op->base;
    rd_t u = {o->restored_state, o->restored_state + o->restored_len};
    int ncopies = 0;
    while (u.p < u.end) {
        const uint8_t *p;
        uint32_t n;
        if (!rdbytes(&u, &p, &n)) return sl_op_fail(o, SL_EFORMAT, "restore: malformed broadcast state (subtask list)");
        ncopies++;
    }
    if (!ncopies) return 0;
    int pick = o->subtask % ncopies;
    rd_t r = {0};
    u.p = o->restored_state;
    for (int i = 0; i <= pick; i++) {
        uint32_t n = 0;
        rdbytes(&u, &r.p, &n);
        r.end = r.p + n;
    }
    uint32_t ver, nst;
    if (r.end - r.p < 4 || memcmp(r.p, BC_MAGIC, 4) != 0)
        return sl_op_fail(o, SL_EFORMAT, "restore: the checkpoint's state of this operator is not broadcast state");
    r.p += 4;
    if (!rd32(&r, &ver) || ver != BC_VERSION || !rd32(&r, &nst))
        return sl_op_fail(o, SL_EFORMAT, "restore: broadcast state of unknown version");
    for (uint32_t s = 0; s < nst; s++) {
        const uint8_t *name;
        uint32_t namelen, n;
        if (!rdbytes(&r, &name, &namelen) || !rd32(&r, &n))
            return sl_op_fail(o, SL_EFORMAT, "restore: malformed broadcast state");
        sl_bstate_t *st = NULL;
        for (int i = 0; i < op->spec.nnames && !st; i++)
            if (strlen(op->spec.names[i]) == namelen && memcmp(op->spec.names[i], name, namelen) == 0)
                st = &op->states[i];
        if (!st)
            return sl_op_fail(o, SL_EINVAL,
                              "restore: the checkpoint holds broadcast state '%.*s', which the broadcast stream no "
                              "longer declares",
                              (int)namelen, (const char *)name);
        for (uint32_t j = 0; j < n; j++) {
            const uint8_t *k, *v;
            uint32_t kl, vl;
            if (!rdbytes(&r, &k, &kl) || !rdbytes(&r, &v, &vl))
                return sl_op_fail(o, SL_EFORMAT, "restore: malformed entry of broadcast state '%s'", st->name);
            bs_put(st, k, kl, v, vl);
        }
    }
    if (r.p != r.end) return sl_op_fail(o, SL_EFORMAT, "restore: trailing bytes after the broadcast state");
    return 0;
}

/* ---- the operator --------------------------------------------------- */

static int bc_open(sl_operator_t *o) {
    bc_op_t *op = (bc_op_t *)o;
    if (o->restored_state) {
        int rc = bc_restore(op);
        if (rc < 0) return rc;
    }
    op->opened = true;
    if (!op->spec.fn.open) return 0;
    int rc = op->spec.fn.open(op->ctx, &op->rt);
    if (rc < 0) return sl_op_fail(o, rc, "open failed (%s)", sl_strerror(rc));
    return 0;
}

static int bc_process(sl_operator_t *o, int input, const sl_record_t *rec) {
    bc_op_t *op = (bc_op_t *)o;
    sl_collector_reset(&op->col, rec->ts);
    int rc;
    if (input == 0) {
        int kg = sl_op_set_key_from(o, 0, &rec->row);
        if (kg < 0) return kg;
        op->pc.key = o->kb->key;
        op->pc.keylen = o->kb->keylen;
        op->pc.ts = rec->ts;
        rc = op->spec.fn.process_element(op->ctx, &op->pc, rec, &op->col);
        if (SL_UNLIKELY(rc < 0)) return sl_op_fail(o, rc, "process_element failed (%s)", sl_strerror(rc));
        return 0;
    }
    op->bc.ts = rec->ts;
    op->in_broadcast = true;
    rc = op->spec.fn.process_broadcast_element(op->ctx, &op->bc, rec, &op->col);
    op->in_broadcast = false;
    if (SL_UNLIKELY(rc < 0)) return sl_op_fail(o, rc, "process_broadcast_element failed (%s)", sl_strerror(rc));
    return 0;
}

static int fire(bc_op_t *op, sl_time_domain_t d, int64_t upto) {
    sl_operator_t *o = &op->base;
    sl_timer_t t;
    while (sl_timers_pop(o->timers, d, upto, &t)) {
        sl_kb_set_key(o->kb, t.key, t.keylen);
        op->pc.key = o->kb->key;
        op->pc.keylen = o->kb->keylen;
        op->pc.ts = t.ts;
        sl_collector_reset(&op->col, d == SL_TIME_EVENT ? t.ts : SL_NO_TIMESTAMP);
        if (op->spec.fn.on_timer) {
            int rc = op->spec.fn.on_timer(op->ctx, &op->pc, t.ts, d, &op->col);
            if (rc < 0) return sl_op_fail(o, rc, "on_timer failed (%s)", sl_strerror(rc));
        }
    }
    return 0;
}

static int bc_watermark(sl_operator_t *o, int64_t wm) {
    bc_op_t *op = (bc_op_t *)o;
    int rc = fire(op, SL_TIME_EVENT, wm);
    if (rc < 0) return rc;
    sl_op_emit_watermark(o, wm);
    return 0;
}

static int bc_proc_time(sl_operator_t *o, int64_t now) {
    bc_op_t *op = (bc_op_t *)o;
    int rc = fire(op, SL_TIME_PROCESSING, now);
    int64_t next = sl_timers_peek(o->timers, SL_TIME_PROCESSING);
    if (next != INT64_MAX) sl_op_schedule_processing(o, next);
    return rc;
}

static void bc_close(sl_operator_t *o) {
    bc_op_t *op = (bc_op_t *)o;
    if (op->opened && op->spec.fn.close) {
        op->spec.fn.close(op->ctx);
    }
    op->opened = false;
}

static void bc_destroy(sl_operator_t *o) {
    bc_op_t *op = (bc_op_t *)o;
    bc_close(o);
    for (int i = 0; i < op->spec.nnames; i++) {
        bs_clear(&op->states[i]);
        sl_free(op->states[i].e);
    }
    sl_free(op->states);
    sl_fn_ctx_release(&op->spec.fn.opts, op->ctx);
    sl_collector_free(&op->col);
    sl_op_base_free(o);
    sl_free(op);
}

static const sl_operator_vt_t broadcast_vt = {.kind = "KeyedBroadcastProcess",
                                              .open = bc_open,
                                              .process = bc_process,
                                              .advance_watermark = bc_watermark,
                                              .on_processing_time = bc_proc_time,
                                              .close = bc_close,
                                              .destroy = bc_destroy,
                                              .snapshot_state = bc_snapshot};

sl_operator_t *sl_broadcast_op_create(const void *spec, const sl_op_init_t *init) {
    const bc_spec_t *s = spec;
    bc_op_t *op = sl_calloc(1, sizeof *op);
    op->spec = *s;
    sl_op_base_init(&op->base, &broadcast_vt, init);
    op->states = sl_calloc((size_t)s->nnames, sizeof *op->states);
    for (int i = 0; i < s->nnames; i++) {
        op->states[i].op = op;
        op->states[i].name = s->names[i];
    }
    op->ctx = sl_fn_ctx_acquire(&op->spec.fn.opts);
    sl_collector_init(&op->col, &op->base);
    op->rt.op = &op->base;
    op->pc.op = &op->base;
    op->bc.op = op;
    return &op->base;
}
