/*
 * test_state_snapshot.c — snapshots and restores of keyed state (heap
 * backend) and timers, by key group.
 *
 * The expected bytes of every snapshot come from a reference model kept
 * beside the backend and an encoder written here from the format's
 * description (state_backend.h, timer_service.h), not from the library's
 * writer: a snapshot taken, then followed by heavy changes, must still
 * serialize to what the model held at the snapshot.
 */
#include "test.h"

#include <pthread.h>

#include "common/common.h"
#include "state/state_backend.h"
#include "state/timer_service.h"

#define MAXP 128
#define NK 700 /* keys of the model */
#define NNS 3  /* namespaces */
#define NUK 12 /* user keys of maps */

/* ------------------------------------------------------------------ */
/* random numbers                                                      */

static uint64_t rs = 1;
static uint64_t rnd(void) {
    rs ^= rs << 13;
    rs ^= rs >> 7;
    rs ^= rs << 17;
    return rs;
}
static uint32_t rndn(uint32_t n) { return (uint32_t)(rnd() % n); }

/* ------------------------------------------------------------------ */
/* keys, namespaces, user keys                                         */

typedef struct bs {
    uint8_t b[64];
    uint32_t n;
} bs_t;

static bs_t keys[NK], nss[NNS], uks[NUK];
static int key_kg[NK];

static void init_names(int maxp) {
    for (int i = 0; i < NK; i++) {
        bs_t *k = &keys[i];
        if (i % 3 == 0) { /* 8 bytes, like a long */
            uint64_t x = (uint64_t)i * 0x9E3779B97F4A7C15ULL;
            memcpy(k->b, &x, 8);
            k->n = 8;
        } else { /* a string of 5 to 40 bytes */
            int n = snprintf((char *)k->b, sizeof k->b, "user-%d-", i);
            while (n < 5 + i % 36) {
                k->b[n] = (uint8_t)('a' + n % 26);
                n++;
            }
            k->n = (uint32_t)n;
        }
        key_kg[i] = sl_kg_of_hash(sl_kg_key_hash(k->b, k->n), maxp);
    }
    nss[0].n = 0; /* the empty namespace */
    nss[1].n = 16; /* a window */
    for (int j = 0; j < 16; j++) nss[1].b[j] = (uint8_t)(j * 3);
    nss[2].n = 37; /* long: hashed with xxh3 */
    for (int j = 0; j < 37; j++) nss[2].b[j] = (uint8_t)(200 - j);
    for (int i = 0; i < NUK; i++) {
        uks[i].n = (uint32_t)(1 + i * 5 % 23);
        for (uint32_t j = 0; j < uks[i].n; j++) uks[i].b[j] = (uint8_t)(i + j * 7);
    }
}

static int bytes_cmp(const uint8_t *a, uint32_t an, const uint8_t *b, uint32_t bn) {
    int c = memcmp(a, b, an < bn ? an : bn);
    return c ? c : (an > bn) - (an < bn);
}

/* ------------------------------------------------------------------ */
/* the reference model                                                 */

typedef struct vb { /* a byte string */
    uint8_t *p;
    uint32_t n;
} vb_t;

static vb_t vb_dup(const void *p, uint32_t n) {
    vb_t v = {sl_malloc(n ? n : 1), n};
    if (n) memcpy(v.p, p, n);
    return v;
}

typedef struct ment {
    bool present;
    vb_t val;       /* VALUE */
    vb_t *el;       /* LIST */
    int nel, capel;
    bool mk[NUK];   /* MAP: user key i present with value mv[i] */
    vb_t mv[NUK];
} ment_t;

typedef struct mstate {
    const char *name;
    sl_state_kind_t kind;
    int sid;
    ment_t e[NK][NNS];
} mstate_t;

/* States, in the format's (name) order; "zzz" is registered, never written. */
enum { S_ACC, S_LIST, S_MAP, S_VAL, S_ZZZ, NSTATES };
static const char *snames[NSTATES] = {"acc", "list", "map", "val", "zzz"};
static const sl_state_kind_t skinds[NSTATES] = {SL_STATE_VALUE, SL_STATE_LIST, SL_STATE_MAP, SL_STATE_VALUE,
                                                SL_STATE_VALUE};

typedef struct model {
    mstate_t s[NSTATES];
} model_t;

static void ment_clear(ment_t *e) {
    sl_free(e->val.p);
    for (int i = 0; i < e->nel; i++) sl_free(e->el[i].p);
    sl_free(e->el);
    for (int i = 0; i < NUK; i++) sl_free(e->mv[i].p);
    memset(e, 0, sizeof *e);
}

static model_t *model_new(void) {
    model_t *m = sl_calloc(1, sizeof *m);
    for (int i = 0; i < NSTATES; i++) {
        m->s[i].name = snames[i];
        m->s[i].kind = skinds[i];
    }
    return m;
}

static void model_free(model_t *m) {
    for (int s = 0; s < NSTATES; s++)
        for (int k = 0; k < NK; k++)
            for (int n = 0; n < NNS; n++) ment_clear(&m->s[s].e[k][n]);
    sl_free(m);
}

static void ment_list_add(ment_t *e, const void *p, uint32_t n) {
    if (e->nel == e->capel) {
        e->capel = e->capel ? e->capel * 2 : 4;
        e->el = sl_realloc(e->el, (size_t)e->capel * sizeof *e->el);
    }
    e->el[e->nel++] = vb_dup(p, n);
    e->present = true;
}

static int ment_nmap(const ment_t *e) {
    int n = 0;
    for (int i = 0; i < NUK; i++) n += e->mk[i];
    return n;
}

/* Registers the model's states in b, in an order given by perm (or the
 * model's), recording their ids. */
static void reg_states(sl_keyed_backend_t *b, model_t *m, const int *perm) {
    for (int i = 0; i < NSTATES; i++) {
        int s = perm ? perm[i] : i;
        sl_state_desc_t d = {.name = m->s[s].name, .kind = m->s[s].kind};
        m->s[s].sid = b->ops->register_state(b, &d);
    }
}

/* ------------------------------------------------------------------ */
/* the expected bytes, from the model (an encoder of our own)          */

static void e_varint(sl_buf_t *b, uint64_t v) {
    while (v >= 0x80) {
        uint8_t x = (uint8_t)(v | 0x80);
        sl_buf_append(b, &x, 1);
        v >>= 7;
    }
    uint8_t x = (uint8_t)v;
    sl_buf_append(b, &x, 1);
}
static void e_bytes(sl_buf_t *b, const void *p, uint32_t n) {
    e_varint(b, n);
    sl_buf_append(b, p, n);
}
static void e_sum(sl_buf_t *b, size_t start) {
    uint64_t h = sl_hash_bytes(b->p + start, b->len - start);
    uint8_t x[8];
    for (int i = 0; i < 8; i++) x[i] = (uint8_t)(h >> (8 * i));
    sl_buf_append(b, x, 8);
}

typedef struct kn {
    int k, n;
} kn_t;
static int kn_cmp(const void *pa, const void *pb) {
    const kn_t *a = pa, *b = pb;
    int c = bytes_cmp(keys[a->k].b, keys[a->k].n, keys[b->k].b, keys[b->k].n);
    return c ? c : bytes_cmp(nss[a->n].b, nss[a->n].n, nss[b->n].b, nss[b->n].n);
}
static int uk_cmp(const void *pa, const void *pb) {
    int a = *(const int *)pa, b = *(const int *)pb;
    return bytes_cmp(uks[a].b, uks[a].n, uks[b].b, uks[b].n);
}

/* The keyed-state block of key group kg that the model describes. */
static void expect_kg(const model_t *m, int maxp, int kg, sl_buf_t *out) {
    size_t start = out->len;
    sl_buf_append(out, "SLKS", 4);
    e_varint(out, SL_KB_FORMAT_VERSION);
    e_varint(out, (uint64_t)maxp);
    e_varint(out, (uint64_t)kg);
    e_varint(out, NSTATES);
    static kn_t v[NK * NNS];
    for (int s = 0; s < NSTATES; s++) {
        const mstate_t *st = &m->s[s];
        e_bytes(out, st->name, (uint32_t)strlen(st->name));
        uint8_t kind = (uint8_t)st->kind;
        sl_buf_append(out, &kind, 1);
        int n = 0;
        for (int k = 0; k < NK; k++)
            for (int j = 0; j < NNS; j++)
                if (key_kg[k] == kg && st->e[k][j].present) v[n++] = (kn_t){k, j};
        qsort(v, (size_t)n, sizeof *v, kn_cmp);
        e_varint(out, (uint64_t)n);
        for (int i = 0; i < n; i++) {
            const ment_t *e = &st->e[v[i].k][v[i].n];
            e_bytes(out, keys[v[i].k].b, keys[v[i].k].n);
            e_bytes(out, nss[v[i].n].b, nss[v[i].n].n);
            if (st->kind == SL_STATE_VALUE) {
                e_bytes(out, e->val.p, e->val.n);
            } else if (st->kind == SL_STATE_LIST) {
                e_varint(out, (uint64_t)e->nel);
                for (int j = 0; j < e->nel; j++) e_bytes(out, e->el[j].p, e->el[j].n);
            } else {
                int u[NUK], nu = 0;
                for (int j = 0; j < NUK; j++)
                    if (e->mk[j]) u[nu++] = j;
                qsort(u, (size_t)nu, sizeof *u, uk_cmp);
                e_varint(out, (uint64_t)nu);
                for (int j = 0; j < nu; j++) {
                    e_bytes(out, uks[u[j]].b, uks[u[j]].n);
                    e_bytes(out, e->mv[u[j]].p, e->mv[u[j]].n);
                }
            }
        }
    }
    e_sum(out, start);
}

/* ------------------------------------------------------------------ */
/* changes applied to a backend and the model alike                    */

typedef struct lcol { /* list elements as the backend shows them */
    const void *p[512];
    uint32_t n[512];
    int cnt;
} lcol_t;
static int lcol_cb(void *c, const void *v, uint32_t len) {
    lcol_t *l = c;
    if (l->cnt < 512) {
        l->p[l->cnt] = v;
        l->n[l->cnt] = len;
    }
    l->cnt++;
    return 0;
}

/* One random change to key k (whose key group must be in b's range). */
static int random_change(sl_keyed_backend_t *b, model_t *m, int k) {
    const sl_keyed_backend_ops_t *o = b->ops;
    int j = (int)rndn(NNS);
    const void *ns = nss[j].n ? nss[j].b : NULL;
    uint32_t nsl = nss[j].n;
    sl_kb_set_key(b, keys[k].b, keys[k].n);
    uint32_t what = rndn(100), len;
    uint8_t buf[400];
    if (what < 30) { /* the hot path: an 8-byte accumulator */
        mstate_t *st = &m->s[S_ACC];
        ment_t *e = &st->e[k][j];
        bool created;
        uint64_t *acc = o->get_mut(b, st->sid, ns, nsl, 8, &created);
        if (!acc || created != !e->present) return -1;
        *acc += 1 + (uint64_t)k;
        if (!e->present) {
            e->val = vb_dup(acc, 8);
            e->present = true;
        } else {
            memcpy(e->val.p, acc, 8);
        }
    } else if (what < 50) { /* values of any size: inline, spilled, resized, copied from the table */
        mstate_t *st = &m->s[S_VAL];
        ment_t *e = &st->e[k][j];
        uint32_t sub = rndn(10);
        if (sub < 5) {
            uint32_t n = rndn(5) == 0 ? 150 + rndn(250) : rndn(40);
            for (uint32_t i = 0; i < n; i++) buf[i] = (uint8_t)rnd();
            if (o->put(b, st->sid, ns, nsl, buf, n) != 0) return -1;
            sl_free(e->val.p);
            e->val = vb_dup(buf, n);
            e->present = true;
        } else if (sub < 7) { /* get_mut with another length: prefix kept, zero-filled */
            uint32_t n = rndn(3) == 0 ? 200 : 8 * (1 + rndn(4));
            uint8_t *p = o->get_mut(b, st->sid, ns, nsl, n, NULL);
            if (!p) return -1;
            vb_t nv = {sl_calloc(n ? n : 1, 1), n};
            if (e->present) memcpy(nv.p, e->val.p, SL_MIN(n, e->val.n));
            if (n) p[0] = nv.p[0] = (uint8_t)(nv.p[0] + 1);
            sl_free(e->val.p);
            e->val = nv;
            e->present = true;
        } else if (sub < 8) { /* put another namespace's value, straight from the table */
            int j2 = (j + 1) % NNS;
            const void *src = o->get(b, st->sid, nss[j2].n ? nss[j2].b : NULL, nss[j2].n, &len);
            if (!src) return 0;
            vb_t nv = vb_dup(src, len);
            if (o->put(b, st->sid, ns, nsl, src, len) != 0) return -1;
            sl_free(e->val.p);
            e->val = nv;
            e->present = true;
        } else {
            if (o->remove(b, st->sid, ns, nsl) != (e->present ? 1 : 0)) return -1;
            ment_clear(e);
        }
    } else if (what < 75) { /* lists */
        mstate_t *st = &m->s[S_LIST];
        ment_t *e = &st->e[k][j];
        uint32_t sub = rndn(10);
        if (sub < 6 && e->nel < 200) {
            uint32_t n = rndn(8) == 0 ? 100 + rndn(100) : rndn(24);
            for (uint32_t i = 0; i < n; i++) buf[i] = (uint8_t)rnd();
            if (o->list_add(b, st->sid, ns, nsl, buf, n) != 0) return -1;
            ment_list_add(e, buf, n);
        } else if (sub < 9) { /* replace by a selection of its own elements, passed from the table */
            static lcol_t lc;
            lc.cnt = 0;
            if (o->list_foreach(b, st->sid, ns, nsl, lcol_cb, &lc) != e->nel || lc.cnt > 512) return -1;
            int n = e->nel ? (int)rndn(5) : 0;
            const void *vals[5];
            uint32_t lens[5];
            vb_t nl[5];
            for (int i = 0; i < n; i++) {
                int x = (int)rndn((uint32_t)e->nel);
                vals[i] = lc.p[x];
                lens[i] = lc.n[x];
                nl[i] = vb_dup(e->el[x].p, e->el[x].n);
            }
            if (o->list_replace(b, st->sid, ns, nsl, n, vals, lens) != 0) return -1;
            ment_clear(e);
            for (int i = 0; i < n; i++) {
                ment_list_add(e, nl[i].p, nl[i].n);
                sl_free(nl[i].p);
            }
        } else {
            if (o->remove(b, st->sid, ns, nsl) != (e->present ? 1 : 0)) return -1;
            ment_clear(e);
        }
    } else { /* maps */
        mstate_t *st = &m->s[S_MAP];
        ment_t *e = &st->e[k][j];
        int u = (int)rndn(NUK);
        uint32_t sub = rndn(10);
        if (sub < 6) {
            uint32_t n = rndn(6) == 0 ? 100 + rndn(100) : rndn(20);
            for (uint32_t i = 0; i < n; i++) buf[i] = (uint8_t)rnd();
            const void *src = buf;
            int u2 = (int)rndn(NUK);
            if (e->present && e->mk[u2] && rndn(3) == 0) { /* from another user key of the map */
                src = o->map_get(b, st->sid, ns, nsl, uks[u2].b, uks[u2].n, &n);
                if (!src) return -1;
            }
            vb_t nv = vb_dup(src, n);
            if (o->map_put(b, st->sid, ns, nsl, uks[u].b, uks[u].n, src, n) != 0) return -1;
            sl_free(e->mv[u].p);
            e->mv[u] = nv;
            e->mk[u] = true;
            e->present = true;
        } else if (sub < 9) {
            if (o->map_remove(b, st->sid, ns, nsl, uks[u].b, uks[u].n) != (e->mk[u] ? 1 : 0)) return -1;
            if (e->mk[u]) {
                e->mk[u] = false;
                sl_free(e->mv[u].p);
                e->mv[u] = (vb_t){NULL, 0};
                if (!ment_nmap(e)) ment_clear(e);
            }
        } else {
            if (o->remove(b, st->sid, ns, nsl) != (e->present ? 1 : 0)) return -1;
            ment_clear(e);
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* comparing a backend with the model, entry by entry                  */

typedef struct mcol {
    const ment_t *e;
    int n;
    bool bad;
} mcol_t;
static int mcol_cb(void *c, const void *k, uint32_t klen, const void *v, uint32_t vlen) {
    mcol_t *x = c;
    x->n++;
    for (int i = 0; i < NUK; i++)
        if (uks[i].n == klen && memcmp(uks[i].b, k, klen) == 0) {
            if (!x->e->mk[i] || x->e->mv[i].n != vlen || (vlen && memcmp(x->e->mv[i].p, v, vlen))) x->bad = true;
            return 0;
        }
    x->bad = true;
    return 0;
}

/* 0 when every entry of the model's keys inside range r is in b as the
 * model says, and b holds nothing else. */
static int compare_backend(sl_keyed_backend_t *b, const model_t *m, sl_kg_range_t r) {
    const sl_keyed_backend_ops_t *o = b->ops;
    for (int s = 0; s < NSTATES; s++) {
        const mstate_t *st = &m->s[s];
        int64_t want = 0;
        for (int k = 0; k < NK; k++) {
            if (key_kg[k] < r.start || key_kg[k] >= r.end) continue;
            sl_kb_set_key(b, keys[k].b, keys[k].n);
            for (int j = 0; j < NNS; j++) {
                const ment_t *e = &st->e[k][j];
                const void *ns = nss[j].n ? nss[j].b : NULL;
                want += e->present;
                if (st->kind == SL_STATE_VALUE) {
                    uint32_t len;
                    const void *p = o->get(b, st->sid, ns, nss[j].n, &len);
                    if (!e->present != !p) goto bad;
                    if (p && (len != e->val.n || (len && memcmp(p, e->val.p, len)))) goto bad;
                } else if (st->kind == SL_STATE_LIST) {
                    static lcol_t lc;
                    lc.cnt = 0;
                    if (o->list_foreach(b, st->sid, ns, nss[j].n, lcol_cb, &lc) != e->nel) goto bad;
                    for (int i = 0; i < e->nel && i < 512; i++)
                        if (lc.n[i] != e->el[i].n || (lc.n[i] && memcmp(lc.p[i], e->el[i].p, lc.n[i]))) goto bad;
                } else {
                    mcol_t mc = {e, 0, false};
                    if (o->map_foreach(b, st->sid, ns, nss[j].n, mcol_cb, &mc) != ment_nmap(e) || mc.bad) goto bad;
                }
                continue;
            bad:
                fprintf(stderr, "compare_backend: state %s, key %d (kg %d), ns %d differs\n", st->name, k, key_kg[k],
                        j);
                return -1;
            }
        }
        if (o->count(b, st->sid) != want) {
            fprintf(stderr, "compare_backend: state %s has %lld entries, the model %lld\n", st->name,
                    (long long)o->count(b, st->sid), (long long)want);
            return -1;
        }
    }
    return 0;
}

/* A backend of range r and the model, populated with random changes to
 * the model's keys that fall in r. */
static void populate(sl_keyed_backend_t *b, model_t *m, sl_kg_range_t r, int nchanges) {
    for (int i = 0; i < nchanges; i++) {
        int k;
        do k = (int)rndn(NK);
        while (key_kg[k] < r.start || key_kg[k] >= r.end);
        if (random_change(b, m, k) != 0) {
            fprintf(stderr, "populate: change %d failed\n", i);
            abort();
        }
    }
}

/* Every key group of range r of snapshot s, as written. */
static sl_buf_t *write_all(const sl_kb_snapshot_t *s, sl_kg_range_t r) {
    sl_buf_t *v = sl_calloc(MAXP, sizeof *v);
    for (int kg = r.start; kg < r.end; kg++)
        if (sl_kb_snapshot_write(s, kg, &v[kg]) != 0) abort();
    return v;
}
static sl_buf_t *expect_all(const model_t *m, sl_kg_range_t r) {
    sl_buf_t *v = sl_calloc(MAXP, sizeof *v);
    for (int kg = r.start; kg < r.end; kg++) expect_kg(m, MAXP, kg, &v[kg]);
    return v;
}
static void free_all(sl_buf_t *v) {
    for (int i = 0; i < MAXP; i++) sl_buf_free(&v[i]);
    sl_free(v);
}
/* -1 and a message at the first key group whose bytes differ. */
static int same_all(const sl_buf_t *a, const sl_buf_t *b, sl_kg_range_t r, const char *what) {
    for (int kg = r.start; kg < r.end; kg++)
        if (a[kg].len != b[kg].len || memcmp(a[kg].p, b[kg].p, a[kg].len) != 0) {
            fprintf(stderr, "%s: key group %d differs (%zu vs %zu bytes)\n", what, kg, a[kg].len, b[kg].len);
            return -1;
        }
    return 0;
}

static const sl_kg_range_t FULL = {0, MAXP};

/* ------------------------------------------------------------------ */
/* tests                                                               */

/* The writer's bytes for a small state, spelled out by hand: the format
 * is what state_backend.h says. */
TEST(format_by_hand) {
    sl_keyed_backend_t *b = sl_heap_backend_new(MAXP, FULL);
    sl_state_desc_t dv = {.name = "v", .kind = SL_STATE_VALUE}, dl = {.name = "l", .kind = SL_STATE_LIST};
    int sv = b->ops->register_state(b, &dv), sl = b->ops->register_state(b, &dl);
    int kg = sl_kb_set_key(b, "k", 1);
    CHECK_EQ(b->ops->put(b, sv, "n", 1, "xy", 2), 0);
    CHECK_EQ(b->ops->list_add(b, sl, NULL, 0, "a", 1), 0);
    CHECK_EQ(b->ops->list_add(b, sl, NULL, 0, "", 0), 0);
    sl_kb_snapshot_t *s;
    CHECK_EQ(b->ops->snapshot(b, &s), 0);
    sl_buf_t out = {0};
    CHECK_EQ(sl_kb_snapshot_write(s, kg, &out), 0);
    uint8_t want[64];
    size_t n = 0;
    memcpy(want, "SLKS", 4);
    n = 4;
    want[n++] = 2;                       /* version */
    want[n++] = 0x80;                    /* max parallelism 128 = varint 80 01 */
    want[n++] = 0x01;
    want[n++] = (uint8_t)kg;             /* < 128: one byte */
    want[n++] = 2;                       /* states */
    want[n++] = 1; want[n++] = 'l';      /* "l" sorts before "v" */
    want[n++] = 1;                       /* list */
    want[n++] = 1;                       /* one entry */
    want[n++] = 1; want[n++] = 'k';      /* key */
    want[n++] = 0;                       /* empty namespace */
    want[n++] = 2;                       /* two elements */
    want[n++] = 1; want[n++] = 'a';
    want[n++] = 0;
    want[n++] = 1; want[n++] = 'v';
    want[n++] = 0;                       /* value */
    want[n++] = 1;
    want[n++] = 1; want[n++] = 'k';
    want[n++] = 1; want[n++] = 'n';
    want[n++] = 2; want[n++] = 'x'; want[n++] = 'y';
    uint64_t h = sl_hash_bytes(want, n);
    for (int i = 0; i < 8; i++) want[n++] = (uint8_t)(h >> (8 * i));
    CHECK_EQ(out.len, n);
    CHECK(memcmp(out.p, want, n) == 0);
    /* An empty key group still lists the states. */
    int other = (kg + 1) % MAXP;
    sl_buf_t e = {0};
    CHECK_EQ(sl_kb_snapshot_write(s, other, &e), 0);
    CHECK_EQ(e.len, 4 + 1 + 2 + 1 + 1 + (2 + 1 + 1) * 2 + 8);
    CHECK(sl_kb_snapshot_write(s, MAXP, &e) < 0);
    CHECK(sl_kb_snapshot_write(s, -1, &e) < 0);
    sl_kb_snapshot_release(s);
    sl_buf_free(&out);
    sl_buf_free(&e);
    b->ops->destroy(b);
}

/* Snapshot, then change everything: the snapshot shows the instant it was
 * taken; the backend shows the changes. */
TEST(snapshot_then_mutate) {
    rs = 0x1234567;
    init_names(MAXP);
    model_t *m = model_new();
    sl_keyed_backend_t *b = sl_heap_backend_new(MAXP, FULL);
    reg_states(b, m, NULL);
    populate(b, m, FULL, 20000);
    CHECK_EQ(compare_backend(b, m, FULL), 0);

    sl_heap_cow_stats_t st0, st1;
    sl_heap_backend_cow_stats(b, &st0);
    sl_kb_snapshot_t *s;
    CHECK_EQ(b->ops->snapshot(b, &s), 0);
    sl_heap_backend_cow_stats(b, &st1);
    CHECK_EQ(st1.snapshots - st0.snapshots, 1);
    CHECK_EQ(st1.sync_cells, 0);
    CHECK_EQ(st1.sync_tables - st0.sync_tables, NSTATES * MAXP);
    CHECK_EQ(st1.cow_copies, 0);
    sl_buf_t *want = expect_all(m, FULL);

    /* Heavy changes: every kind of call, and growth: a burst of new
     * entries in every key group. */
    populate(b, m, FULL, 40000);
    sl_heap_backend_cow_stats(b, &st1);
    CHECK(st1.cow_copies > 0);
    CHECK(st1.cow_copies <= (uint64_t)(NSTATES - 1) * MAXP); /* at most once per table */
    CHECK(st1.cow_bytes > 0);

    sl_buf_t *got = write_all(s, FULL);
    CHECK_EQ(same_all(got, want, FULL, "snapshot after changes"), 0);
    CHECK_EQ(compare_backend(b, m, FULL), 0);
    free_all(got);
    free_all(want);

    /* A second snapshot while the first is still out; changes; both hold. */
    sl_buf_t *want2 = expect_all(m, FULL);
    sl_kb_snapshot_t *s2;
    CHECK_EQ(b->ops->snapshot(b, &s2), 0);
    populate(b, m, FULL, 20000);
    got = write_all(s2, FULL);
    CHECK_EQ(same_all(got, want2, FULL, "second snapshot"), 0);
    free_all(got);
    sl_kb_snapshot_release(s);
    got = write_all(s2, FULL);
    CHECK_EQ(same_all(got, want2, FULL, "second snapshot after the first was released"), 0);
    free_all(got);
    free_all(want2);

    /* A snapshot that nobody changes after it is written twice the same. */
    sl_kb_snapshot_release(s2);
    CHECK_EQ(compare_backend(b, m, FULL), 0);
    b->ops->destroy(b);
    model_free(m);
}

/* A snapshot released before any change costs no copy: tables take their
 * storage back. */
TEST(release_before_changes_reclaims) {
    rs = 99;
    init_names(MAXP);
    model_t *m = model_new();
    sl_keyed_backend_t *b = sl_heap_backend_new(MAXP, FULL);
    reg_states(b, m, NULL);
    populate(b, m, FULL, 8000);
    sl_kb_snapshot_t *s;
    CHECK_EQ(b->ops->snapshot(b, &s), 0);
    sl_buf_t *got = write_all(s, FULL);
    sl_buf_t *want = expect_all(m, FULL);
    CHECK_EQ(same_all(got, want, FULL, "snapshot"), 0);
    free_all(got);
    free_all(want);
    sl_kb_snapshot_release(s);
    populate(b, m, FULL, 8000);
    sl_heap_cow_stats_t st;
    sl_heap_backend_cow_stats(b, &st);
    CHECK_EQ(st.cow_copies, 0);
    CHECK(st.cow_reclaimed > 0);
    CHECK_EQ(compare_backend(b, m, FULL), 0);

    /* And a snapshot may outlive its backend. */
    want = expect_all(m, FULL);
    CHECK_EQ(b->ops->snapshot(b, &s), 0);
    populate(b, m, FULL, 2000); /* some tables copied, some still shared */
    b->ops->destroy(b);
    got = write_all(s, FULL);
    CHECK_EQ(same_all(got, want, FULL, "snapshot after destroy"), 0);
    sl_kb_snapshot_release(s);
    free_all(got);
    free_all(want);
    model_free(m);
}

/* Restore every key group into a fresh backend: every entry is back, and
 * its snapshot writes the same bytes. */
TEST(restore_roundtrip) {
    rs = 4242;
    init_names(MAXP);
    model_t *m = model_new();
    sl_keyed_backend_t *b = sl_heap_backend_new(MAXP, FULL);
    reg_states(b, m, NULL);
    populate(b, m, FULL, 30000);
    sl_kb_snapshot_t *s;
    CHECK_EQ(b->ops->snapshot(b, &s), 0);
    sl_buf_t *blocks = write_all(s, FULL);
    sl_kb_snapshot_release(s);

    /* (a) states registered first, in another order: other ids. */
    static const int perm[NSTATES] = {4, 2, 0, 3, 1};
    sl_keyed_backend_t *r = sl_heap_backend_new(MAXP, FULL);
    reg_states(r, m, perm);
    char err[256];
    sl_kb_set_key(r, "current", 7);
    for (int kg = 0; kg < MAXP; kg++) {
        int rc = r->ops->restore(r, kg, blocks[kg].p, blocks[kg].len, err, sizeof err);
        if (rc) fprintf(stderr, "restore: %s\n", err);
        CHECK_EQ(rc, 0);
    }
    CHECK_EQ(r->keylen, 7); /* the current key is the caller's */
    CHECK(memcmp(r->key, "current", 7) == 0);
    CHECK_EQ(compare_backend(r, m, FULL), 0);
    CHECK_EQ(r->ops->snapshot(r, &s), 0);
    sl_buf_t *again = write_all(s, FULL);
    sl_kb_snapshot_release(s);
    CHECK_EQ(same_all(again, blocks, FULL, "re-snapshot"), 0);
    free_all(again);
    /* Restoring a key group twice is refused (it holds state now). */
    int kg = key_kg[1];
    CHECK(r->ops->restore(r, kg, blocks[kg].p, blocks[kg].len, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "already has entries");
    r->ops->destroy(r);

    /* (b) nothing registered: states are registered on the fly; the
     * operator's later registration gets the same ids. */
    r = sl_heap_backend_new(MAXP, FULL);
    for (int g = 0; g < MAXP; g++) CHECK_EQ(r->ops->restore(r, g, blocks[g].p, blocks[g].len, err, sizeof err), 0);
    model_t *m2 = m; /* same model, ids of r */
    int ids[NSTATES];
    for (int i = 0; i < NSTATES; i++) ids[i] = m->s[i].sid;
    reg_states(r, m2, NULL);
    CHECK_EQ(compare_backend(r, m2, FULL), 0);
    /* A kind other than the snapshot's is an error. */
    sl_state_desc_t bad = {.name = "list", .kind = SL_STATE_MAP};
    CHECK(r->ops->register_state(r, &bad) < 0);
    r->ops->destroy(r);
    for (int i = 0; i < NSTATES; i++) m->s[i].sid = ids[i];

    /* (c) a state registered with another kind before the restore. */
    r = sl_heap_backend_new(MAXP, FULL);
    sl_state_desc_t wrong = {.name = "map", .kind = SL_STATE_LIST};
    r->ops->register_state(r, &wrong);
    kg = -1;
    for (int k = 0; k < NK && kg < 0; k++)
        for (int j = 0; j < NNS; j++)
            if (m->s[S_MAP].e[k][j].present) kg = key_kg[k];
    CHECK(kg >= 0);
    CHECK(r->ops->restore(r, kg, blocks[kg].p, blocks[kg].len, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "'map' is a map state in the checkpoint but registered as a list state");
    CHECK_EQ(r->ops->count(r, 0), 0);
    r->ops->destroy(r);

    free_all(blocks);
    b->ops->destroy(b);
    model_free(m);
}

/* Parallelism 2 -> 3 and 2 -> 1 (max parallelism 128): each new subtask
 * restores the key groups of its range from whichever old subtask wrote
 * them; every key lands where key_group.h says, with its state. */
TEST(rescale) {
    rs = 777;
    init_names(MAXP);
    model_t *m = model_new();
    sl_keyed_backend_t *old[2];
    sl_timer_service_t *oldt[2];
    sl_buf_t blocks[MAXP], tblocks[MAXP];
    memset(blocks, 0, sizeof blocks);
    memset(tblocks, 0, sizeof tblocks);
    for (int i = 0; i < 2; i++) {
        sl_kg_range_t r = sl_kg_range_for(MAXP, 2, i);
        old[i] = sl_heap_backend_new(MAXP, r);
        reg_states(old[i], m, NULL);
        populate(old[i], m, r, 15000);
        oldt[i] = sl_timer_service_new(MAXP, r);
        for (int k = 0; k < NK; k++) /* one timer per key, at ts = k, namespace = the key's number */
            if (key_kg[k] >= r.start && key_kg[k] < r.end)
                CHECK_EQ(sl_timers_register(oldt[i], (sl_time_domain_t)(k & 1), key_kg[k], keys[k].b, keys[k].n, &k,
                                            sizeof k, k),
                         1);
        sl_kb_snapshot_t *s;
        sl_timers_snapshot_t *ts;
        CHECK_EQ(old[i]->ops->snapshot(old[i], &s), 0);
        CHECK_EQ(sl_timers_snapshot(oldt[i], &ts), 0);
        for (int kg = r.start; kg < r.end; kg++) {
            CHECK_EQ(sl_kb_snapshot_write(s, kg, &blocks[kg]), 0);
            CHECK_EQ(sl_timers_snapshot_write_kg(ts, kg, &tblocks[kg]), 0);
        }
        sl_kb_snapshot_release(s);
        sl_timers_snapshot_release(ts);
        /* A key group outside the range is not in this snapshot. */
        old[i]->ops->destroy(old[i]);
        sl_timer_service_destroy(oldt[i]);
    }
    char err[256];
    static const int pars[] = {3, 1};
    for (size_t pi = 0; pi < 2; pi++) {
        int p = pars[pi];
        int64_t total = 0;
        for (int i = 0; i < p; i++) {
            sl_kg_range_t r = sl_kg_range_for(MAXP, p, i);
            sl_keyed_backend_t *nb = sl_heap_backend_new(MAXP, r);
            sl_timer_service_t *nt = sl_timer_service_new(MAXP, r);
            for (int kg = r.start; kg < r.end; kg++) {
                CHECK_EQ(sl_kg_operator_index(kg, MAXP, p), i);
                CHECK_EQ(nb->ops->restore(nb, kg, blocks[kg].p, blocks[kg].len, err, sizeof err), 0);
                CHECK_EQ(sl_timers_restore_kg(nt, kg, tblocks[kg].p, tblocks[kg].len, err, sizeof err), 0);
            }
            /* A key group of another subtask is refused. */
            int outside = r.end < MAXP ? r.end : r.start - 1;
            if (p > 1) {
                CHECK(nb->ops->restore(nb, outside, blocks[outside].p, blocks[outside].len, err, sizeof err) < 0);
                CHECK_CONTAINS(err, "outside this backend's range");
                CHECK(sl_timers_restore_kg(nt, outside, tblocks[outside].p, tblocks[outside].len, err, sizeof err) <
                      0);
            }
            reg_states(nb, m, NULL);
            CHECK_EQ(compare_backend(nb, m, r), 0);
            /* Timers: exactly the keys of the range, each once. */
            int64_t want = 0;
            for (int k = 0; k < NK; k++)
                if (key_kg[k] >= r.start && key_kg[k] < r.end) {
                    want++;
                    CHECK_EQ(sl_timers_delete(nt, (sl_time_domain_t)(k & 1), key_kg[k], keys[k].b, keys[k].n, &k,
                                              sizeof k, k),
                             1);
                }
            CHECK_EQ(sl_timers_count(nt, SL_TIME_EVENT) + sl_timers_count(nt, SL_TIME_PROCESSING), 0);
            total += want;
            nb->ops->destroy(nb);
            sl_timer_service_destroy(nt);
        }
        CHECK_EQ(total, NK);
    }
    for (int kg = 0; kg < MAXP; kg++) {
        sl_buf_free(&blocks[kg]);
        sl_buf_free(&tblocks[kg]);
    }
    model_free(m);
}

/* snapshot() does work proportional to states x key groups, never to
 * entries: it copies no cell at 10K or at 1M entries, and its time does
 * not grow with them. */
static double snap_cost_ns(sl_keyed_backend_t *b, int sid, const uint8_t *ns, uint64_t *tables, uint64_t *cells) {
    double best = 1e18;
    for (int rep = 0; rep < 5; rep++) {
        sl_heap_cow_stats_t a, z;
        sl_heap_backend_cow_stats(b, &a);
        sl_kb_snapshot_t *s;
        int64_t t0 = sl_mono_ns();
        if (b->ops->snapshot(b, &s) != 0) abort();
        double dt = (double)(sl_mono_ns() - t0);
        sl_heap_backend_cow_stats(b, &z);
        *tables = z.sync_tables - a.sync_tables;
        *cells = z.sync_cells - a.sync_cells;
        if (dt < best) best = dt;
        sl_kb_snapshot_release(s);
        /* One write per key group takes each table back (no copy), so the
         * next snapshot starts from unshared tables again. */
        for (uint64_t k = 0; k < 3000; k++) {
            sl_kb_set_key(b, &k, 8);
            if (b->ops->get_mut(b, sid, ns, 16, 8, NULL) == NULL) abort();
        }
    }
    return best;
}

TEST(sync_phase_independent_of_size) {
    sl_keyed_backend_t *small = sl_heap_backend_new(MAXP, FULL), *big = sl_heap_backend_new(MAXP, FULL);
    sl_state_desc_t d = {.name = "acc", .kind = SL_STATE_VALUE};
    int s1 = small->ops->register_state(small, &d), s2 = big->ops->register_state(big, &d);
    uint8_t ns[16] = {1};
    for (uint64_t k = 0; k < 1000000; k++) {
        if (k < 10000) {
            sl_kb_set_key(small, &k, 8);
            *(uint64_t *)small->ops->get_mut(small, s1, ns, 16, 8, NULL) = k;
        }
        sl_kb_set_key(big, &k, 8);
        *(uint64_t *)big->ops->get_mut(big, s2, ns, 16, 8, NULL) = k;
    }
    CHECK_EQ(big->ops->count(big, s2), 1000000);
    uint64_t tab_s, cells_s, tab_b, cells_b;
    double ts = snap_cost_ns(small, s1, ns, &tab_s, &cells_s), tb = snap_cost_ns(big, s2, ns, &tab_b, &cells_b);
    fprintf(stderr, "  snapshot(): %.1f us at 10K entries, %.1f us at 1M entries\n", ts / 1e3, tb / 1e3);
    /* The work, counted: the same at both sizes, and no cell copied. */
    CHECK_EQ(tab_s, MAXP);
    CHECK_EQ(tab_b, MAXP);
    CHECK_EQ(cells_s, 0);
    CHECK_EQ(cells_b, 0);
    /* The time: 100x the entries, not 10x the time (with a floor for
     * clock noise). */
    CHECK(tb < 10 * ts + 200000);

    /* The writes after it pay for one key group at a time. */
    sl_kb_snapshot_t *s;
    CHECK_EQ(big->ops->snapshot(big, &s), 0);
    uint64_t k = 1;
    sl_kb_set_key(big, &k, 8);
    sl_heap_cow_stats_t a, z;
    sl_heap_backend_cow_stats(big, &a);
    (void)big->ops->get_mut(big, s2, ns, 16, 8, NULL);
    sl_heap_backend_cow_stats(big, &z);
    CHECK_EQ(z.cow_copies - a.cow_copies, 1);
    CHECK(z.cow_bytes - a.cow_bytes < (uint64_t)1000000 * 64 / MAXP * 4); /* about one key group's share */
    sl_kb_snapshot_release(s);
    small->ops->destroy(small);
    big->ops->destroy(big);
}

/* Corrupt or truncated input, at every byte: an error that says what is
 * wrong, never a crash, and nothing half-restored. */
TEST(corrupt_input) {
    rs = 31337;
    init_names(MAXP);
    model_t *m = model_new();
    sl_keyed_backend_t *b = sl_heap_backend_new(MAXP, FULL);
    reg_states(b, m, NULL);
    populate(b, m, FULL, 3000);
    /* The key group with the most bytes (but keep it small). */
    sl_kb_snapshot_t *s;
    CHECK_EQ(b->ops->snapshot(b, &s), 0);
    sl_buf_t *blocks = write_all(s, FULL);
    sl_kb_snapshot_release(s);
    int kg = 0;
    for (int g = 0; g < MAXP; g++)
        if (blocks[g].len > blocks[kg].len && blocks[g].len < 4000) kg = g;
    const sl_buf_t *blk = &blocks[kg];
    CHECK(blk->len > 200);
    char err[512];
    uint8_t *cp = sl_malloc(blk->len);
    sl_keyed_backend_t *r = sl_heap_backend_new(MAXP, FULL);
    for (size_t i = 0; i < blk->len; i++) {
        for (int flip = 0; flip < 2; flip++) {
            memcpy(cp, blk->p, blk->len);
            cp[i] ^= flip ? 0xff : 0x01;
            err[0] = 0;
            int rc = r->ops->restore(r, kg, cp, blk->len, err, sizeof err);
            CHECK(rc < 0);
            CHECK(err[0] != 0);
        }
        err[0] = 0;
        CHECK(r->ops->restore(r, kg, blk->p, i, err, sizeof err) < 0); /* truncated */
        CHECK(err[0] != 0);
    }
    /* Nothing was loaded (the key group is still empty): the intact block loads. */
    CHECK_EQ(r->ops->restore(r, kg, blk->p, blk->len, err, sizeof err), 0);
    r->ops->destroy(r);

    /* Structural damage behind a valid checksum (an adversarial or buggy
     * writer): an error or a clean load, never a crash; after an error the
     * key group is empty. */
    for (size_t i = 4; i < blk->len - 8; i++) {
        for (int t = 0; t < 3; t++) {
            memcpy(cp, blk->p, blk->len);
            cp[i] = t == 0 ? (uint8_t)(cp[i] + 1) : t == 1 ? 0xff : 0x00;
            uint64_t h = sl_hash_bytes(cp, blk->len - 8);
            sl_st64(cp + blk->len - 8, h);
            r = sl_heap_backend_new(MAXP, FULL);
            int rc = r->ops->restore(r, kg, cp, blk->len, err, sizeof err);
            if (rc < 0) {
                CHECK(err[0] != 0);
                sl_state_desc_t d = {.name = "val", .kind = SL_STATE_VALUE};
                int id = r->ops->register_state(r, &d);
                if (id >= 0) CHECK_EQ(r->ops->count(r, id), 0);
            }
            r->ops->destroy(r);
        }
    }

    /* Specific errors name what is wrong. */
    r = sl_heap_backend_new(MAXP, FULL);
    CHECK(r->ops->restore(r, kg, blk->p, blk->len - 1, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "checksum");
    CHECK(r->ops->restore(r, (kg + 1) % MAXP, blk->p, blk->len, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "the block holds key group");
    CHECK(r->ops->restore(r, MAXP, blk->p, blk->len, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "outside");
    CHECK(r->ops->restore(r, kg, (const uint8_t *)"SLTM", 4, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "too short");
    r->ops->destroy(r);
    r = sl_heap_backend_new(256, (sl_kg_range_t){0, 256});
    CHECK(r->ops->restore(r, kg, blk->p, blk->len, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "max parallelism 128");
    r->ops->destroy(r);

    /* Hand-made blocks: a duplicate entry (loaded then undone), a key of
     * another key group, trailing bytes, a non-minimal varint. */
    const char *key = "dup";
    int dkg = sl_kg_of_hash(sl_kg_key_hash(key, 3), MAXP);
    char okk[16], ok2[16], far[16]; /* two keys of dkg, a key of another key group */
    uint32_t okn = 0, ok2n = 0, farn = 0;
    for (int i = 0; !okn || !ok2n || !farn; i++) {
        char t[16];
        uint32_t n = (uint32_t)snprintf(t, sizeof t, "k%d", i);
        bool in = sl_kg_of_hash(sl_kg_key_hash(t, n), MAXP) == dkg;
        if (in && okn && !ok2n) memcpy(ok2, t, (ok2n = n));
        if (in && !okn) memcpy(okk, t, (okn = n));
        if (!in && !farn) memcpy(far, t, (farn = n));
    }
    for (int variant = 0; variant < 5; variant++) {
        sl_buf_t x = {0};
        sl_buf_append(&x, "SLKS", 4);
        e_varint(&x, 1);
        e_varint(&x, MAXP);
        e_varint(&x, (uint64_t)dkg);
        e_varint(&x, variant == 4 ? 2 : 1);
        e_bytes(&x, "s", 1);
        e_varint(&x, SL_STATE_VALUE);
        e_varint(&x, 3);
        e_bytes(&x, okk, okn); /* some key of dkg first, so that the undo has work */
        e_bytes(&x, "", 0);
        e_bytes(&x, "1", 1);
        e_bytes(&x, key, 3);
        e_bytes(&x, "", 0);
        e_bytes(&x, "v", 1);
        if (variant == 0) e_bytes(&x, key, 3); /* the same entry again */
        else if (variant == 1) e_bytes(&x, far, farn);
        else e_bytes(&x, ok2, ok2n);
        e_bytes(&x, "", 0);
        e_bytes(&x, "w", 1);
        if (variant == 2) e_varint(&x, 7);
        if (variant == 3) {
            x.len -= 2; /* the last value's length as 0x81 0x00 */
            uint8_t nm[3] = {0x81, 0x00, 'w'};
            sl_buf_append(&x, nm, 3);
        }
        if (variant == 4) { /* the same state twice */
            e_bytes(&x, "s", 1);
            e_varint(&x, SL_STATE_VALUE);
            e_varint(&x, 0);
        }
        e_sum(&x, 0);
        r = sl_heap_backend_new(MAXP, FULL);
        err[0] = 0;
        int rc = r->ops->restore(r, dkg, x.p, x.len, err, sizeof err);
        CHECK(rc < 0);
        static const char *why[] = {"same (key, namespace) twice", "belongs to key group", "unexpected bytes",
                                    "bad or truncated value", "appears twice"};
        CHECK_CONTAINS(err, why[variant]);
        sl_state_desc_t d = {.name = "s", .kind = SL_STATE_VALUE};
        int id = r->ops->register_state(r, &d);
        CHECK_EQ(r->ops->count(r, id), 0);
        r->ops->destroy(r);
        sl_buf_free(&x);
    }
    /* A block with no state at all is valid (a backend with nothing
     * registered wrote it). */
    {
        sl_keyed_backend_t *e = sl_heap_backend_new(MAXP, FULL);
        sl_kb_snapshot_t *es;
        CHECK_EQ(e->ops->snapshot(e, &es), 0);
        sl_buf_t x = {0};
        CHECK_EQ(sl_kb_snapshot_write(es, 7, &x), 0);
        sl_kb_snapshot_release(es);
        CHECK_EQ(x.len, 4 + 1 + 2 + 1 + 1 + 8);
        r = sl_heap_backend_new(MAXP, FULL);
        CHECK_EQ(r->ops->restore(r, 7, x.p, x.len, err, sizeof err), 0);
        r->ops->destroy(r);
        e->ops->destroy(e);
        sl_buf_free(&x);
    }
    sl_free(cp);
    free_all(blocks);
    b->ops->destroy(b);
    model_free(m);
}

/* ------------------------------------------------------------------ */
/* timers                                                              */

typedef struct mtimer {
    int d, k, n; /* domain, key, namespace */
    int64_t ts;
} mtimer_t;

typedef struct tmodel {
    mtimer_t *v;
    int n, cap;
} tmodel_t;

static int tm_find(const tmodel_t *m, int d, int k, int n, int64_t ts) {
    for (int i = 0; i < m->n; i++)
        if (m->v[i].d == d && m->v[i].k == k && m->v[i].n == n && m->v[i].ts == ts) return i;
    return -1;
}

static int mt_cmp(const void *pa, const void *pb) {
    const mtimer_t *a = pa, *b = pb;
    if (a->ts != b->ts) return a->ts < b->ts ? -1 : 1;
    int c = bytes_cmp(keys[a->k].b, keys[a->k].n, keys[b->k].b, keys[b->k].n);
    return c ? c : bytes_cmp(nss[a->n].b, nss[a->n].n, nss[b->n].b, nss[b->n].n);
}

static void expect_timers(const tmodel_t *m, int kg, sl_buf_t *out) {
    size_t start = out->len;
    sl_buf_append(out, "SLTM", 4);
    e_varint(out, 1);
    e_varint(out, MAXP);
    e_varint(out, (uint64_t)kg);
    mtimer_t *v = sl_malloc((size_t)(m->n + 1) * sizeof *v);
    for (int d = 0; d < 2; d++) {
        int n = 0;
        for (int i = 0; i < m->n; i++)
            if (m->v[i].d == d && key_kg[m->v[i].k] == kg) v[n++] = m->v[i];
        qsort(v, (size_t)n, sizeof *v, mt_cmp);
        e_varint(out, (uint64_t)n);
        for (int i = 0; i < n; i++) {
            uint8_t x[8];
            for (int j = 0; j < 8; j++) x[j] = (uint8_t)((uint64_t)v[i].ts >> (8 * j));
            sl_buf_append(out, x, 8);
            e_bytes(out, keys[v[i].k].b, keys[v[i].k].n);
            e_bytes(out, nss[v[i].n].b, nss[v[i].n].n);
        }
    }
    sl_free(v);
    e_sum(out, start);
}

/* One random register / delete / pop, on the service and the model. */
static int timer_change(sl_timer_service_t *s, tmodel_t *m, int64_t *wm) {
    uint32_t what = rndn(10);
    int d = (int)rndn(2);
    if (what < 6) {
        int k = (int)rndn(NK), n = (int)rndn(NNS);
        int64_t ts = *wm + (int64_t)rndn(3000);
        int rc = sl_timers_register(s, (sl_time_domain_t)d, key_kg[k], keys[k].b, keys[k].n, nss[n].b, nss[n].n, ts);
        if (rc != (tm_find(m, d, k, n, ts) < 0 ? 1 : 0)) return -1;
        if (rc == 1) {
            if (m->n == m->cap) {
                m->cap = m->cap ? 2 * m->cap : 64;
                m->v = sl_realloc(m->v, (size_t)m->cap * sizeof *m->v);
            }
            m->v[m->n++] = (mtimer_t){d, k, n, ts};
        }
    } else if (what < 8) {
        if (!m->n) return 0;
        int i = (int)rndn((uint32_t)m->n);
        mtimer_t t = m->v[i];
        if (sl_timers_delete(s, (sl_time_domain_t)t.d, key_kg[t.k], keys[t.k].b, keys[t.k].n, nss[t.n].b, nss[t.n].n,
                             t.ts) != 1)
            return -1;
        m->v[i] = m->v[--m->n];
    } else {
        *wm += 2;
        sl_timer_t t;
        while (sl_timers_pop(s, (sl_time_domain_t)d, *wm, &t)) {
            int found = -1;
            for (int i = 0; i < m->n && found < 0; i++) {
                const mtimer_t *x = &m->v[i];
                if (x->d == d && x->ts == t.ts && keys[x->k].n == t.keylen &&
                    memcmp(keys[x->k].b, t.key, t.keylen) == 0 && nss[x->n].n == t.nslen &&
                    (t.nslen == 0 || memcmp(nss[x->n].b, t.ns, t.nslen) == 0))
                    found = i;
            }
            if (found < 0) return -1;
            for (int i = 0; i < m->n; i++)
                if (m->v[i].d == d && m->v[i].ts < t.ts) return -1; /* not the earliest */
            m->v[found] = m->v[--m->n];
        }
    }
    return 0;
}

TEST(timers_snapshot_restore) {
    rs = 5150;
    init_names(MAXP);
    tmodel_t m = {0};
    int64_t wm = -1000;
    sl_timer_service_t *s = sl_timer_service_new(MAXP, FULL);
    for (int i = 0; i < 6000; i++) CHECK_EQ(timer_change(s, &m, &wm), 0);
    CHECK(m.n > 500);
    sl_timers_cow_stats_t a, z;
    sl_timers_cow_stats(s, &a);
    sl_timers_snapshot_t *sn;
    CHECK_EQ(sl_timers_snapshot(s, &sn), 0);
    sl_timers_cow_stats(s, &z);
    CHECK_EQ(z.sync_kgs - a.sync_kgs, 2 * MAXP);
    CHECK_EQ(z.cow_copies, 0);
    sl_buf_t want[MAXP], sync[MAXP];
    memset(want, 0, sizeof want);
    memset(sync, 0, sizeof sync);
    for (int kg = 0; kg < MAXP; kg++) {
        expect_timers(&m, kg, &want[kg]);
        CHECK_EQ(sl_timers_snapshot_kg(s, kg, &sync[kg]), 0);
        CHECK(sync[kg].len == want[kg].len && memcmp(sync[kg].p, want[kg].p, want[kg].len) == 0);
    }
    for (int i = 0; i < 6000; i++) CHECK_EQ(timer_change(s, &m, &wm), 0);
    sl_timers_cow_stats(s, &z);
    CHECK(z.cow_copies > 0);
    for (int kg = 0; kg < MAXP; kg++) {
        sl_buf_t got = {0};
        CHECK_EQ(sl_timers_snapshot_write_kg(sn, kg, &got), 0);
        CHECK(got.len == want[kg].len && memcmp(got.p, want[kg].p, got.len) == 0);
        sl_buf_free(&got);
    }
    CHECK(sl_timers_snapshot_write_kg(sn, MAXP, &sync[0]) < 0);
    sl_timers_snapshot_release(sn);

    /* Restore the snapshot's blocks into a fresh service: the same timers
     * pop in the same order as from a service that never went away. */
    sl_timer_service_t *r = sl_timer_service_new(MAXP, FULL), *ref = sl_timer_service_new(MAXP, FULL);
    char err[256];
    for (int kg = 0; kg < MAXP; kg++) {
        CHECK_EQ(sl_timers_restore_kg(r, kg, want[kg].p, want[kg].len, err, sizeof err), 0);
        CHECK_EQ(sl_timers_restore_kg(ref, kg, sync[kg].p, sync[kg].len, err, sizeof err), 0);
    }
    {
        int full = key_kg[m.v[0].k]; /* a key group with timers: a second restore is refused */
        CHECK(sl_timers_restore_kg(r, full, want[full].p, want[full].len, err, sizeof err) < 0);
        CHECK_CONTAINS(err, "has timers");
    }
    for (int d = 0; d < 2; d++) {
        sl_timer_t t;
        int n = 0;
        int64_t last = INT64_MIN;
        while (sl_timers_pop(r, (sl_time_domain_t)d, INT64_MAX, &t)) {
            CHECK(t.ts >= last);
            last = t.ts;
            CHECK(sl_timers_delete(ref, (sl_time_domain_t)d, t.kg, t.key, t.keylen, t.ns, t.nslen, t.ts) == 1);
            n++;
        }
        CHECK(n > 0);
        CHECK_EQ(sl_timers_count(ref, (sl_time_domain_t)d), 0);
    }
    sl_timer_service_destroy(r);
    sl_timer_service_destroy(ref);

    /* Corruption at every byte of a block, and truncation: an error; the
     * key group stays empty. */
    int kg = 0;
    for (int g = 0; g < MAXP; g++)
        if (want[g].len > want[kg].len) kg = g;
    sl_buf_t *blk = &want[kg];
    uint8_t *cp = sl_malloc(blk->len);
    r = sl_timer_service_new(MAXP, FULL);
    for (size_t i = 0; i < blk->len; i++) {
        memcpy(cp, blk->p, blk->len);
        cp[i] ^= 0x20;
        err[0] = 0;
        CHECK(sl_timers_restore_kg(r, kg, cp, blk->len, err, sizeof err) < 0);
        CHECK(err[0]);
        CHECK(sl_timers_restore_kg(r, kg, blk->p, i, err, sizeof err) < 0);
        if (i >= 4 && i < blk->len - 8) { /* behind a valid checksum */
            cp[i] = 0xff;
            sl_st64(cp + blk->len - 8, sl_hash_bytes(cp, blk->len - 8));
            if (sl_timers_restore_kg(r, kg, cp, blk->len, err, sizeof err) == 0) {
                sl_timer_service_destroy(r);
                r = sl_timer_service_new(MAXP, FULL);
            }
        }
        CHECK_EQ(sl_timers_count(r, SL_TIME_EVENT) + sl_timers_count(r, SL_TIME_PROCESSING), 0);
    }
    /* A duplicate timer (behind a valid checksum) is loaded, then undone. */
    {
        sl_buf_t x = {0};
        int k = 1;
        sl_buf_append(&x, "SLTM", 4);
        e_varint(&x, 1);
        e_varint(&x, MAXP);
        e_varint(&x, (uint64_t)key_kg[k]);
        e_varint(&x, 2);
        for (int i = 0; i < 2; i++) {
            uint8_t z8[8] = {5};
            sl_buf_append(&x, z8, 8);
            e_bytes(&x, keys[k].b, keys[k].n);
            e_bytes(&x, "", 0);
        }
        e_varint(&x, 0);
        e_sum(&x, 0);
        CHECK(sl_timers_restore_kg(r, key_kg[k], x.p, x.len, err, sizeof err) < 0);
        CHECK_CONTAINS(err, "appears twice");
        CHECK_EQ(sl_timers_count(r, SL_TIME_EVENT), 0);
        CHECK_EQ(sl_timers_peek(r, SL_TIME_EVENT), INT64_MAX);
        sl_buf_free(&x);
    }
    sl_timer_service_destroy(r);
    sl_free(cp);

    /* A snapshot released before changes: no copy.  One outliving its
     * service: still readable. */
    CHECK_EQ(sl_timers_snapshot(s, &sn), 0);
    sl_timers_snapshot_release(sn);
    sl_timers_cow_stats(s, &a);
    for (int i = 0; i < 2000; i++) CHECK_EQ(timer_change(s, &m, &wm), 0);
    sl_timers_cow_stats(s, &z);
    CHECK_EQ(z.cow_copies, a.cow_copies);
    CHECK(z.cow_reclaimed > a.cow_reclaimed);
    sl_buf_t w2 = {0}, g2 = {0};
    expect_timers(&m, kg, &w2);
    CHECK_EQ(sl_timers_snapshot(s, &sn), 0);
    for (int i = 0; i < 2000; i++) CHECK_EQ(timer_change(s, &m, &wm), 0);
    sl_timer_service_destroy(s);
    CHECK_EQ(sl_timers_snapshot_write_kg(sn, kg, &g2), 0);
    CHECK(g2.len == w2.len && memcmp(g2.p, w2.p, g2.len) == 0);
    sl_timers_snapshot_release(sn);
    sl_buf_free(&w2);
    sl_buf_free(&g2);
    for (int g = 0; g < MAXP; g++) {
        sl_buf_free(&want[g]);
        sl_buf_free(&sync[g]);
    }
    sl_free(m.v);
}

/* ------------------------------------------------------------------ */
/* concurrency: the asynchronous phase on another thread               */

typedef struct wjob {
    sl_kb_snapshot_t *s;
    sl_timers_snapshot_t *ts;
    sl_buf_t *out, *tout; /* [MAXP] */
    int rc;
} wjob_t;

static void *writer(void *arg) {
    wjob_t *j = arg;
    for (int kg = 0; kg < MAXP; kg++) {
        if (sl_kb_snapshot_write(j->s, kg, &j->out[kg]) != 0) j->rc = -1;
        if (sl_timers_snapshot_write_kg(j->ts, kg, &j->tout[kg]) != 0) j->rc = -1;
    }
    /* Released here, on the writer's thread, as a checkpoint writer would. */
    sl_kb_snapshot_release(j->s);
    sl_timers_snapshot_release(j->ts);
    return NULL;
}

TEST(concurrent_writer) {
    rs = 8080;
    init_names(MAXP);
    model_t *m = model_new();
    tmodel_t tm = {0};
    int64_t wm = -1000;
    sl_keyed_backend_t *b = sl_heap_backend_new(MAXP, FULL);
    sl_timer_service_t *ts = sl_timer_service_new(MAXP, FULL);
    reg_states(b, m, NULL);
    populate(b, m, FULL, 10000);
    for (int i = 0; i < 3000; i++) CHECK_EQ(timer_change(ts, &tm, &wm), 0);
    for (int round = 0; round < 4; round++) {
        /* Two overlapping snapshots in round 1; destroy before join in the last. */
        int nsnap = round == 1 ? 2 : 1;
        wjob_t jobs[2];
        pthread_t th[2];
        sl_buf_t *want[2], *twant[2];
        for (int i = 0; i < nsnap; i++) {
            memset(&jobs[i], 0, sizeof jobs[i]);
            CHECK_EQ(b->ops->snapshot(b, &jobs[i].s), 0);
            CHECK_EQ(sl_timers_snapshot(ts, &jobs[i].ts), 0);
            jobs[i].out = sl_calloc(MAXP, sizeof(sl_buf_t));
            jobs[i].tout = sl_calloc(MAXP, sizeof(sl_buf_t));
            want[i] = expect_all(m, FULL);
            twant[i] = sl_calloc(MAXP, sizeof(sl_buf_t));
            for (int kg = 0; kg < MAXP; kg++) expect_timers(&tm, kg, &twant[i][kg]);
            CHECK_EQ(pthread_create(&th[i], NULL, writer, &jobs[i]), 0);
            for (int c = 0; c < 3000; c++) { /* changes while the writer runs */
                CHECK_EQ(random_change(b, m, (int)rndn(NK)), 0);
                if (c % 3 == 0) CHECK_EQ(timer_change(ts, &tm, &wm), 0);
            }
        }
        for (int c = 0; c < 5000; c++) {
            CHECK_EQ(random_change(b, m, (int)rndn(NK)), 0);
            if (c % 3 == 0) CHECK_EQ(timer_change(ts, &tm, &wm), 0);
        }
        if (round == 3) {
            b->ops->destroy(b);
            sl_timer_service_destroy(ts);
        }
        for (int i = 0; i < nsnap; i++) {
            CHECK_EQ(pthread_join(th[i], NULL), 0);
            CHECK_EQ(jobs[i].rc, 0);
            CHECK_EQ(same_all(jobs[i].out, want[i], FULL, "concurrent snapshot"), 0);
            CHECK_EQ(same_all(jobs[i].tout, twant[i], FULL, "concurrent timers snapshot"), 0);
            free_all(jobs[i].out);
            free_all(jobs[i].tout);
            free_all(want[i]);
            free_all(twant[i]);
        }
        if (round < 3) CHECK_EQ(compare_backend(b, m, FULL), 0);
    }
    sl_free(tm.v);
    model_free(m);
}

int main(void) {
    RUN(format_by_hand);
    RUN(snapshot_then_mutate);
    RUN(release_before_changes_reclaims);
    RUN(restore_roundtrip);
    RUN(rescale);
    RUN(sync_phase_independent_of_size);
    RUN(corrupt_input);
    RUN(timers_snapshot_restore);
    RUN(concurrent_writer);
    TEST_MAIN_END();
}
