/*
 * ttl.c — state time-to-live, the accessor side (Flink's TtlStateFactory
 * and its Ttl*State decorators): the timestamp in front of every stored
 * item, visibility, refresh on read, and the calls into the heap backend's
 * incremental cleanup.  Works with any backend through its ops; see ttl.h
 * for the contract.
 *
 * Reads look the item up after the cleanup step (so what they return is
 * not moved by it), writes run the step after they wrote (their inputs may
 * point into the state).  What is written is first staged in t->buf with
 * its timestamp: one copy, which also makes a write from a pointer the
 * same state returned safe.
 */
#include "state/ttl.h"

#include <stdint.h>

#include "common/common.h"

#define TS SL_TTL_TS_BYTES

sl_ttl_state_t *sl_ttl_state_new(const char *name, int64_t ttl_ms, sl_ttl_update_t update, bool return_expired,
                                 int cleanup_size, bool every_record) {
    sl_ttl_state_t *t = sl_calloc(1, sizeof *t);
    t->name = sl_strdup(name ? name : "");
    t->ttl_ms = ttl_ms;
    t->update_on_read = update == SL_TTL_ON_READ_AND_WRITE;
    t->return_expired = return_expired;
    t->cleanup_size = cleanup_size > 0 ? cleanup_size : 0;
    t->every_record = every_record && t->cleanup_size > 0;
    return t;
}

void sl_ttl_state_free(sl_ttl_state_t *t) {
    if (!t) return;
    sl_free(t->name);
    sl_buf_free(&t->buf);
    sl_buf_free(&t->aux);
    sl_free(t);
}

/* One incremental cleanup step.  A backend other than the heap has its own
 * way (RocksDB: a compaction filter): the first refusal turns it off. */
static void cleanup(sl_keyed_backend_t *b, int sid, sl_ttl_state_t *t, int64_t now) {
    if (t->cleanup_size <= 0) return;
    if (sl_heap_backend_ttl_cleanup(b, sid, t->cleanup_size, now) == SL_EINVAL) {
        t->cleanup_size = 0;
        t->every_record = false;
    }
}

void sl_ttl_on_record(sl_keyed_backend_t *b, int sid, sl_ttl_state_t *t, int64_t now) { cleanup(b, sid, t, now); }

static bool inside(const sl_buf_t *buf, const void *p) {
    uintptr_t x = (uintptr_t)p, s = (uintptr_t)buf->p;
    return buf->p && x >= s && x < s + buf->cap;
}

/* buf := [ts][len bytes of v]; v may point into buf.  Returns buf->p. */
static uint8_t *stage(sl_buf_t *buf, int64_t ts, const void *v, uint32_t len) {
    size_t off = inside(buf, v) ? (size_t)((const uint8_t *)v - buf->p) : SIZE_MAX;
    buf->len = 0;
    sl_buf_reserve(buf, (size_t)TS + len);
    if (off != SIZE_MAX) v = buf->p + off;
    if (len) memmove(buf->p + TS, v, len);
    sl_ttl_set_ts(buf->p, ts);
    buf->len = (size_t)TS + len;
    return buf->p;
}

/* buf := a copy of the stored item p (len bytes, timestamp included), for
 * returning an expired item that is being removed. */
static const uint8_t *keep_copy(sl_buf_t *buf, const void *p, uint32_t len) {
    buf->len = 0;
    sl_buf_reserve(buf, len);
    memcpy(buf->p, p, len);
    buf->len = len;
    return buf->p;
}

/* ---- value ---- */

int sl_ttl_value_get(sl_keyed_backend_t *b, int sid, sl_ttl_state_t *t, const void *ns, uint32_t nslen,
                     const void **out, uint32_t *len) {
    int64_t now = sl_kb_now_ms(b);
    cleanup(b, sid, t, now);
    *out = NULL;
    if (len) *len = 0;
    uint32_t l = 0;
    const uint8_t *p = b->ops->get(b, sid, ns, nslen, &l);
    if (!p) return 0;
    if (l < TS) return SL_EFORMAT;
    if (sl_ttl_expired(sl_ttl_ts(p), t->ttl_ms, now)) {
        if (t->return_expired) p = keep_copy(&t->buf, p, l);
        int rc = b->ops->remove(b, sid, ns, nslen);
        if (rc < 0) return rc;
        if (!t->return_expired) return 0;
    } else if (t->update_on_read) {
        bool created = false;
        uint8_t *q = b->ops->get_mut(b, sid, ns, nslen, l, &created);
        if (!q) return SL_ESTATE;
        sl_ttl_set_ts(q, now);
        int rc = b->ops->put(b, sid, ns, nslen, q, l);
        if (rc < 0) return rc;
        p = q;
    }
    *out = p + TS;
    if (len) *len = l - TS;
    return 0;
}

int sl_ttl_value_put(sl_keyed_backend_t *b, int sid, sl_ttl_state_t *t, const void *ns, uint32_t nslen,
                     const void *v, uint32_t len) {
    if ((!v && len) || len > UINT32_MAX - TS) return SL_EINVAL;
    int64_t now = sl_kb_now_ms(b);
    const uint8_t *s = stage(&t->buf, now, v, len);
    int rc = b->ops->put(b, sid, ns, nslen, s, TS + len);
    cleanup(b, sid, t, now);
    return rc;
}

int sl_ttl_remove(sl_keyed_backend_t *b, int sid, sl_ttl_state_t *t, const void *ns, uint32_t nslen) {
    int rc = b->ops->remove(b, sid, ns, nslen);
    cleanup(b, sid, t, sl_kb_now_ms(b));
    return rc;
}

/* ---- list ---- */

int sl_ttl_list_add(sl_keyed_backend_t *b, int sid, sl_ttl_state_t *t, const void *ns, uint32_t nslen,
                    const void *v, uint32_t len) {
    if ((!v && len) || len > UINT32_MAX - TS) return SL_EINVAL;
    int64_t now = sl_kb_now_ms(b);
    const uint8_t *s = stage(&t->buf, now, v, len);
    int rc = b->ops->list_add(b, sid, ns, nslen, s, TS + len);
    cleanup(b, sid, t, now);
    return rc;
}

typedef struct list_visit {
    sl_ttl_state_t *t;
    int64_t now;
    sl_kb_list_cb cb;
    void *c;
    int shown;      /* elements passed to cb */
    int expired;
    int stop;       /* cb's non-zero value, when it stopped the iteration */
    bool bad;       /* an element without a timestamp */
    /* the rebuilding pass */
    bool rebuild;
    uint32_t n;
} list_visit_t;

static int list_visit(void *c, const void *v, uint32_t len) {
    list_visit_t *x = c;
    sl_ttl_state_t *t = x->t;
    if (len < TS) {
        x->bad = true;
        return SL_EFORMAT;
    }
    bool exp = sl_ttl_expired(sl_ttl_ts(v), t->ttl_ms, x->now);
    if (x->rebuild) { /* keep what has not expired, refreshed on read */
        if (!exp) {
            uint32_t l = len;
            sl_buf_append(&t->buf, &l, sizeof l);
            size_t at = t->aux.len;
            sl_buf_append(&t->aux, v, len);
            if (t->update_on_read) sl_ttl_set_ts(t->aux.p + at, x->now);
            x->n++;
        }
        return 0;
    }
    x->expired += exp;
    if (exp && !t->return_expired) return 0;
    x->shown++;
    return x->cb ? (x->stop = x->cb(x->c, (const uint8_t *)v + TS, len - TS)) : 0;
}

int sl_ttl_list_foreach(sl_keyed_backend_t *b, int sid, sl_ttl_state_t *t, const void *ns, uint32_t nslen,
                        sl_kb_list_cb cb, void *c) {
    list_visit_t x = {.t = t, .now = sl_kb_now_ms(b), .cb = cb, .c = c};
    cleanup(b, sid, t, x.now);
    int rc = b->ops->list_foreach(b, sid, ns, nslen, list_visit, &x);
    if (x.bad) return SL_EFORMAT;
    if (rc < 0 && !x.stop) return rc;
    /* Rewrite the list without its expired elements (and, on read, with
     * fresh timestamps) once the callbacks are done with it. */
    if (x.expired || (t->update_on_read && x.shown)) {
        x.rebuild = true;
        t->buf.len = t->aux.len = 0;
        int r2 = b->ops->list_foreach(b, sid, ns, nslen, list_visit, &x);
        if (x.bad) return SL_EFORMAT;
        if (r2 < 0) return r2;
        const void **vals = sl_malloc((size_t)SL_MAX(x.n, 1) * sizeof *vals);
        const uint32_t *lens = (const uint32_t *)(const void *)t->buf.p;
        size_t off = 0;
        for (uint32_t i = 0; i < x.n; i++) {
            vals[i] = t->aux.p + off;
            off += lens[i];
        }
        r2 = b->ops->list_replace(b, sid, ns, nslen, (int)x.n, vals, lens);
        sl_free(vals);
        if (r2 < 0) return r2;
    }
    return x.stop ? x.stop : x.shown;
}

/* ---- map ---- */

int sl_ttl_map_get(sl_keyed_backend_t *b, int sid, sl_ttl_state_t *t, const void *ns, uint32_t nslen,
                   const void *uk, uint32_t uklen, const void **out, uint32_t *len) {
    int64_t now = sl_kb_now_ms(b);
    cleanup(b, sid, t, now);
    *out = NULL;
    if (len) *len = 0;
    uint32_t l = 0;
    const uint8_t *p = b->ops->map_get(b, sid, ns, nslen, uk, uklen, &l);
    if (!p) return 0;
    if (l < TS) return SL_EFORMAT;
    if (sl_ttl_expired(sl_ttl_ts(p), t->ttl_ms, now)) {
        if (t->return_expired) p = keep_copy(&t->buf, p, l);
        int rc = b->ops->map_remove(b, sid, ns, nslen, uk, uklen);
        if (rc < 0) return rc;
        if (!t->return_expired) return 0;
    } else if (t->update_on_read) {
        const uint8_t *s = stage(&t->buf, now, p + TS, l - TS);
        int rc = b->ops->map_put(b, sid, ns, nslen, uk, uklen, s, l);
        if (rc < 0) return rc;
        p = b->ops->map_get(b, sid, ns, nslen, uk, uklen, &l); /* where it lives now */
        if (!p || l < TS) return SL_ESTATE;
    }
    *out = p + TS;
    if (len) *len = l - TS;
    return 0;
}

int sl_ttl_map_put(sl_keyed_backend_t *b, int sid, sl_ttl_state_t *t, const void *ns, uint32_t nslen,
                   const void *uk, uint32_t uklen, const void *v, uint32_t len) {
    if ((!v && len) || len > UINT32_MAX - TS) return SL_EINVAL;
    int64_t now = sl_kb_now_ms(b);
    const uint8_t *s = stage(&t->buf, now, v, len);
    int rc = b->ops->map_put(b, sid, ns, nslen, uk, uklen, s, TS + len);
    cleanup(b, sid, t, now);
    return rc;
}

int sl_ttl_map_remove(sl_keyed_backend_t *b, int sid, sl_ttl_state_t *t, const void *ns, uint32_t nslen,
                      const void *uk, uint32_t uklen) {
    int64_t now = sl_kb_now_ms(b);
    uint32_t l = 0;
    const uint8_t *p = b->ops->map_get(b, sid, ns, nslen, uk, uklen, &l);
    int rc = 0;
    if (p) {
        bool exp = sl_ttl_item_expired(p, l, t->ttl_ms, now);
        rc = b->ops->map_remove(b, sid, ns, nslen, uk, uklen);
        if (rc > 0 && exp) rc = 0; /* it was gone already, as far as readers could tell */
    }
    cleanup(b, sid, t, now);
    return rc;
}

/* The rebuilding pass of a map records, in t->aux, one entry per user key
 * to change: [u32 uklen][u32 vlen][u8 expired][uk][value with its new
 * timestamp] (value empty when expired). */
typedef struct map_visit {
    sl_ttl_state_t *t;
    int64_t now;
    sl_kb_map_cb cb;
    void *c;
    int shown, expired;
    int stop; /* cb's non-zero value, when it stopped the iteration */
    bool bad, rebuild;
    uint32_t n;
} map_visit_t;

static int map_visit(void *c, const void *k, uint32_t klen, const void *v, uint32_t vlen) {
    map_visit_t *x = c;
    sl_ttl_state_t *t = x->t;
    if (vlen < TS) {
        x->bad = true;
        return SL_EFORMAT;
    }
    bool exp = sl_ttl_expired(sl_ttl_ts(v), t->ttl_ms, x->now);
    if (x->rebuild) {
        if (!exp && !t->update_on_read) return 0;
        uint32_t keep = exp ? 0 : vlen;
        uint8_t flag = exp;
        sl_buf_append(&t->aux, &klen, sizeof klen);
        sl_buf_append(&t->aux, &keep, sizeof keep);
        sl_buf_append(&t->aux, &flag, 1);
        sl_buf_append(&t->aux, k, klen);
        if (keep) {
            size_t at = t->aux.len;
            sl_buf_append(&t->aux, v, vlen);
            sl_ttl_set_ts(t->aux.p + at, x->now);
        }
        x->n++;
        return 0;
    }
    x->expired += exp;
    if (exp && !t->return_expired) return 0;
    x->shown++;
    return x->cb ? (x->stop = x->cb(x->c, k, klen, (const uint8_t *)v + TS, vlen - TS)) : 0;
}

int sl_ttl_map_foreach(sl_keyed_backend_t *b, int sid, sl_ttl_state_t *t, const void *ns, uint32_t nslen,
                       sl_kb_map_cb cb, void *c) {
    map_visit_t x = {.t = t, .now = sl_kb_now_ms(b), .cb = cb, .c = c};
    cleanup(b, sid, t, x.now);
    int rc = b->ops->map_foreach(b, sid, ns, nslen, map_visit, &x);
    if (x.bad) return SL_EFORMAT;
    if (rc < 0 && !x.stop) return rc;
    if (x.expired || (t->update_on_read && x.shown)) {
        x.rebuild = true;
        t->aux.len = 0;
        int r2 = b->ops->map_foreach(b, sid, ns, nslen, map_visit, &x);
        if (x.bad) return SL_EFORMAT;
        if (r2 < 0) return r2;
        const uint8_t *p = t->aux.p;
        for (uint32_t i = 0; i < x.n; i++) {
            uint32_t klen = sl_ld32(p), vlen = sl_ld32(p + 4);
            bool exp = p[8] != 0;
            const uint8_t *k = p + 9, *v = k + klen;
            r2 = exp ? b->ops->map_remove(b, sid, ns, nslen, k, klen)
                     : b->ops->map_put(b, sid, ns, nslen, k, klen, v, vlen);
            if (r2 < 0) return r2;
            p = v + vlen;
        }
    }
    return x.stop ? x.stop : x.shown;
}

/* ---- reducing / aggregating ---- */

int sl_ttl_fold(sl_keyed_backend_t *b, int sid, sl_ttl_state_t *t, const void *ns, uint32_t nslen, uint32_t size,
                bool reducing, void (*init)(void *ctx, void *acc), void (*fn)(void *ctx, void *acc, const void *value),
                void *ctx, const void *value) {
    if (size > UINT32_MAX - TS) return SL_EINVAL;
    int64_t now = sl_kb_now_ms(b);
    bool created = false;
    uint8_t *acc = b->ops->get_mut(b, sid, ns, nslen, TS + size, &created);
    if (!acc) return SL_ESTATE;
    uint8_t *a = acc + TS;
    bool fresh = created || (!t->return_expired && sl_ttl_expired(sl_ttl_ts(acc), t->ttl_ms, now));
    if (fresh && reducing) {
        memmove(a, value, size);
    } else {
        if (fresh) {
            memset(a, 0, size);
            if (init) init(ctx, a);
        }
        fn(ctx, a, value);
    }
    sl_ttl_set_ts(acc, now);
    int rc = b->ops->put(b, sid, ns, nslen, acc, TS + size);
    cleanup(b, sid, t, now);
    return rc;
}
