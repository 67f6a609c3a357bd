/*
 * test_state_ttl.c — state time-to-live (Flink's StateTtlConfig, processing
 * time) through the keyed-state functions of sluice.h on the heap backend,
 * with a manual clock.
 *
 * What is expected always comes from the rule itself, written here: an item
 * written (or, with OnReadAndWrite, read) at ts is visible until
 * ts + ttl <= now.  Snapshots are read back with the format parser and
 * compared with the items the test wrote, not with what the library says.
 */
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "common/common.h"
#include "operators/operator.h"
#include "pipeline_util.h"
#include "state/state_backend.h"
#include "state/ttl.h"

#define MAXP 128
#define OPS(b) ((b)->ops)

/* ------------------------------------------------------------------ */
/* a keyed operator without a job: a backend, a manual clock, sl_rt_t   */

typedef struct fx {
    sl_operator_t op;
    sl_rt_t rt;
    int64_t now;
} fx_t;

static int64_t manual_clock(void *ctx) { return *(const int64_t *)ctx; }

static fx_t *fx_new(void) {
    fx_t *f = calloc(1, sizeof *f);
    f->op.name = "ttl-test";
    f->op.kb = sl_heap_backend_new(MAXP, (sl_kg_range_t){0, MAXP});
    sl_kb_set_clock(f->op.kb, manual_clock, &f->now);
    f->rt.op = &f->op;
    f->now = 1000;
    return f;
}

static void fx_free(fx_t *f) {
    sl_op_base_free(&f->op);
    free(f);
}

static void key(fx_t *f, uint64_t k) { sl_kb_set_key(f->op.kb, &k, sizeof k); }

/* No incremental cleanup: what these tests count is what reads remove. */
static sl_state_ttl_t ttl_cfg(int64_t ms, sl_ttl_update_type_t up) {
    sl_state_ttl_t t = sl_state_ttl(ms);
    t.update_type = up;
    t.cleanup_size = -1;
    return t;
}

static int64_t value_i64(sl_state_t *st) {
    uint32_t len = 0;
    const void *p = sl_value_get(st, &len);
    if (!p) return -1;
    if (len != 8) return -2;
    int64_t v;
    memcpy(&v, p, 8);
    return v;
}

static void put_i64(sl_state_t *st, int64_t v) { sl_value_put(st, &v, sizeof v); }

/* Stored timestamp of the current key's value (raw backend), -1: none. */
static int64_t raw_ts(fx_t *f, sl_state_t *st) {
    uint32_t l;
    const uint8_t *p = OPS(f->op.kb)->get(f->op.kb, st->sid, "", 0, &l);
    return p && l >= 8 ? (int64_t)sl_ld64(p) : -1;
}

/* ------------------------------------------------------------------ */
/* value                                                               */

TEST(value_on_create_and_write) {
    fx_t *f = fx_new();
    sl_state_t *st = sl_state_value_ttl(&f->rt, "v", ttl_cfg(100, SL_TTL_UPDATE_ON_CREATE_AND_WRITE));
    CHECK(st);
    key(f, 1);
    CHECK_EQ(value_i64(st), -1);
    put_i64(st, 7); /* at 1000: visible while 1000 + 100 > now */
    CHECK_EQ(raw_ts(f, st), 1000);
    f->now = 1099;
    CHECK_EQ(value_i64(st), 7);
    CHECK_EQ(raw_ts(f, st), 1000); /* a read does not refresh */
    f->now = 1100;
    CHECK_EQ(OPS(f->op.kb)->count(f->op.kb, st->sid), 1);
    CHECK_EQ(value_i64(st), -1);                           /* expired exactly at ts + ttl */
    CHECK_EQ(OPS(f->op.kb)->count(f->op.kb, st->sid), 0); /* and the read removed it */

    /* A write refreshes. */
    put_i64(st, 8);
    f->now = 1150;
    put_i64(st, 9);
    f->now = 1249;
    CHECK_EQ(value_i64(st), 9);
    f->now = 1250;
    CHECK_EQ(value_i64(st), -1);

    /* Keys are independent; clear removes. */
    key(f, 2);
    put_i64(st, 20);
    key(f, 3);
    put_i64(st, 30);
    sl_state_clear(st);
    CHECK_EQ(value_i64(st), -1);
    key(f, 2);
    CHECK_EQ(value_i64(st), 20);

    /* Writing back what a read returned (same state) works. */
    uint32_t len;
    const void *p = sl_value_get(st, &len);
    CHECK(p && len == 8);
    f->now = 1300;
    CHECK_EQ(sl_value_put(st, p, len), 0);
    CHECK_EQ(value_i64(st), 20);
    CHECK_EQ(raw_ts(f, st), 1300);
    fx_free(f);
}

TEST(value_on_read_and_write) {
    fx_t *f = fx_new();
    sl_state_t *st = sl_state_value_ttl(&f->rt, "v", ttl_cfg(100, SL_TTL_UPDATE_ON_READ_AND_WRITE));
    CHECK(st);
    key(f, 1);
    put_i64(st, 5); /* 1000 */
    f->now = 1090;
    CHECK_EQ(value_i64(st), 5); /* refreshed to 1090 */
    CHECK_EQ(raw_ts(f, st), 1090);
    f->now = 1189;
    CHECK_EQ(value_i64(st), 5); /* 1090 + 100 > 1189; refreshed to 1189 */
    f->now = 1288;
    CHECK_EQ(value_i64(st), 5);
    f->now = 1388; /* 1288 + 100 <= 1388 */
    CHECK_EQ(value_i64(st), -1);
    CHECK_EQ(OPS(f->op.kb)->count(f->op.kb, st->sid), 0);
    fx_free(f);
}

/* ------------------------------------------------------------------ */
/* list                                                                */

typedef struct lcol {
    int64_t v[64];
    int n;
} lcol_t;

static void lcol_cb(void *c, const void *v, uint32_t len) {
    lcol_t *l = c;
    if (len == 8 && l->n < 64) memcpy(&l->v[l->n], v, 8);
    l->n += len == 8 ? 1 : 1000; /* a wrong length shows up in n */
}

static int list_read(sl_state_t *st, lcol_t *l) {
    memset(l, 0, sizeof *l);
    return sl_list_foreach(st, lcol_cb, l);
}

/* Elements stored (raw backend, expired or not) and their timestamps. */
typedef struct rawl {
    int n;
    int64_t ts[64];
} rawl_t;
static int rawl_cb(void *c, const void *v, uint32_t len) {
    rawl_t *r = c;
    if (r->n < 64) r->ts[r->n] = len >= 8 ? (int64_t)sl_ld64(v) : -1;
    r->n++;
    return 0;
}
static rawl_t raw_list(fx_t *f, sl_state_t *st) {
    rawl_t r = {0};
    OPS(f->op.kb)->list_foreach(f->op.kb, st->sid, "", 0, rawl_cb, &r);
    return r;
}

static void add_i64(sl_state_t *st, int64_t v) { sl_list_add(st, &v, sizeof v); }

TEST(list_on_create_and_write) {
    fx_t *f = fx_new();
    sl_state_t *st = sl_state_list_ttl(&f->rt, "l", ttl_cfg(100, SL_TTL_UPDATE_ON_CREATE_AND_WRITE));
    CHECK(st);
    key(f, 1);
    lcol_t l;
    CHECK_EQ(list_read(st, &l), 0);
    add_i64(st, 1); /* 1000 */
    f->now = 1050;
    add_i64(st, 2);
    f->now = 1090;
    add_i64(st, 3);
    f->now = 1099;
    CHECK_EQ(list_read(st, &l), 3);
    CHECK(l.v[0] == 1 && l.v[1] == 2 && l.v[2] == 3);
    f->now = 1100; /* the first expires: each element has its own timestamp */
    CHECK_EQ(list_read(st, &l), 2);
    CHECK(l.v[0] == 2 && l.v[1] == 3);
    rawl_t r = raw_list(f, st); /* the read rewrote the list without it, timestamps kept */
    CHECK_EQ(r.n, 2);
    CHECK(r.ts[0] == 1050 && r.ts[1] == 1090);
    CHECK_EQ(sl_list_foreach(st, NULL, NULL), 2); /* counting without a callback */
    f->now = 1150;
    CHECK_EQ(list_read(st, &l), 1);
    CHECK_EQ(l.v[0], 3);
    f->now = 1190;
    CHECK_EQ(list_read(st, &l), 0);
    CHECK_EQ(OPS(f->op.kb)->count(f->op.kb, st->sid), 0); /* an empty list is no entry */
    add_i64(st, 4);
    CHECK_EQ(list_read(st, &l), 1);
    CHECK_EQ(l.v[0], 4);
    fx_free(f);
}

TEST(list_on_read_and_write) {
    fx_t *f = fx_new();
    sl_state_t *st = sl_state_list_ttl(&f->rt, "l", ttl_cfg(100, SL_TTL_UPDATE_ON_READ_AND_WRITE));
    CHECK(st);
    key(f, 9);
    add_i64(st, 1); /* 1000 */
    f->now = 1060;
    add_i64(st, 2);
    f->now = 1099;
    lcol_t l;
    CHECK_EQ(list_read(st, &l), 2); /* both refreshed to 1099 */
    rawl_t r = raw_list(f, st);
    CHECK(r.n == 2 && r.ts[0] == 1099 && r.ts[1] == 1099);
    f->now = 1198;
    CHECK_EQ(list_read(st, &l), 2);
    CHECK(l.v[0] == 1 && l.v[1] == 2);
    f->now = 1298;
    CHECK_EQ(list_read(st, &l), 0);
    fx_free(f);
}

/* ------------------------------------------------------------------ */
/* map                                                                 */

static int64_t map_i64(sl_state_t *st, int64_t uk) {
    uint32_t len = 0;
    const void *p = sl_map_get(st, &uk, sizeof uk, &len);
    if (!p) return -1;
    if (len != 8) return -2;
    int64_t v;
    memcpy(&v, p, 8);
    return v;
}

static void mput(sl_state_t *st, int64_t uk, int64_t v) { sl_map_put(st, &uk, sizeof uk, &v, sizeof v); }

typedef struct mcol {
    int64_t uk[16], v[16];
    int n;
} mcol_t;
static void mcol_cb(void *c, const void *k, uint32_t kl, const void *v, uint32_t vl) {
    mcol_t *m = c;
    if (kl == 8 && vl == 8 && m->n < 16) {
        memcpy(&m->uk[m->n], k, 8);
        memcpy(&m->v[m->n], v, 8);
    }
    m->n += kl == 8 && vl == 8 ? 1 : 1000;
}
/* Sum of user keys seen and how many. */
static int map_read(sl_state_t *st, mcol_t *m) {
    memset(m, 0, sizeof *m);
    return sl_map_foreach(st, mcol_cb, m);
}
static int64_t mcol_v(const mcol_t *m, int64_t uk) {
    for (int i = 0; i < m->n && i < 16; i++)
        if (m->uk[i] == uk) return m->v[i];
    return -1;
}

/* User keys stored (raw backend). */
static int rawm_cb(void *c, const void *k, uint32_t kl, const void *v, uint32_t vl) {
    (*(int *)c)++;
    return 0;
}
static int raw_map_n(fx_t *f, sl_state_t *st) {
    int n = 0;
    OPS(f->op.kb)->map_foreach(f->op.kb, st->sid, "", 0, rawm_cb, &n);
    return n;
}

TEST(map_on_create_and_write) {
    fx_t *f = fx_new();
    sl_state_t *st = sl_state_map_ttl(&f->rt, "m", ttl_cfg(100, SL_TTL_UPDATE_ON_CREATE_AND_WRITE));
    CHECK(st);
    key(f, 4);
    mput(st, 1, 10); /* 1000 */
    f->now = 1060;
    mput(st, 2, 20);
    mput(st, 3, 30);
    f->now = 1099;
    CHECK_EQ(map_i64(st, 1), 10);
    f->now = 1100;
    CHECK_EQ(map_i64(st, 1), -1); /* expired: gone, and removed */
    CHECK_EQ(raw_map_n(f, st), 2);
    CHECK_EQ(map_i64(st, 2), 20);
    mcol_t m;
    CHECK_EQ(map_read(st, &m), 2);
    CHECK(mcol_v(&m, 2) == 20 && mcol_v(&m, 3) == 30);
    /* remove: 1 for a live user key, 0 for an expired one (removed all the same) */
    CHECK_EQ(sl_map_remove(st, &(int64_t){2}, 8), 1);
    f->now = 1160;
    CHECK_EQ(sl_map_remove(st, &(int64_t){3}, 8), 0);
    CHECK_EQ(raw_map_n(f, st), 0);
    CHECK_EQ(OPS(f->op.kb)->count(f->op.kb, st->sid), 0);

    /* foreach skips expired user keys and removes them */
    mput(st, 5, 50); /* 1160 */
    f->now = 1200;
    mput(st, 6, 60);
    f->now = 1260;
    CHECK_EQ(map_read(st, &m), 1);
    CHECK_EQ(mcol_v(&m, 6), 60);
    CHECK_EQ(raw_map_n(f, st), 1);
    fx_free(f);
}

TEST(map_on_read_and_write) {
    fx_t *f = fx_new();
    sl_state_t *st = sl_state_map_ttl(&f->rt, "m", ttl_cfg(100, SL_TTL_UPDATE_ON_READ_AND_WRITE));
    CHECK(st);
    key(f, 4);
    mput(st, 1, 10); /* 1000 */
    mput(st, 2, 20);
    f->now = 1080;
    CHECK_EQ(map_i64(st, 1), 10); /* refreshes user key 1 only */
    /* Two reads in a row: the first pointer is still good after the second. */
    uint32_t l1, l2;
    const int64_t *p1 = sl_map_get(st, &(int64_t){1}, 8, &l1);
    const int64_t *p2 = sl_map_get(st, &(int64_t){2}, 8, &l2);
    CHECK(p1 && p2 && *p2 == 20);
    CHECK_EQ(*p1, 10);
    f->now = 1179; /* key 2 was last touched at 1080 too (by the read above) */
    mcol_t m;
    CHECK_EQ(map_read(st, &m), 2); /* refreshes both to 1179 */
    f->now = 1278;
    CHECK_EQ(map_i64(st, 2), 20);
    f->now = 1279 + 100; /* key 1: 1179 + 100 <= now; key 2: 1278 + 100 <= now */
    CHECK_EQ(map_read(st, &m), 0);
    CHECK_EQ(OPS(f->op.kb)->count(f->op.kb, st->sid), 0);
    fx_free(f);
}

/* ------------------------------------------------------------------ */
/* reducing and aggregating                                            */

static void sum_fn(void *ctx, void *acc, const void *v) {
    int64_t a, x;
    memcpy(&a, acc, 8);
    memcpy(&x, v, 8);
    a += x;
    memcpy(acc, &a, 8);
}

typedef struct avg_acc {
    int64_t sum, n, inits;
} avg_acc_t;
static int inits_seen;
static void avg_init(void *ctx, void *acc) {
    avg_acc_t *a = acc;
    a->inits = ++inits_seen;
}
static void avg_add(void *ctx, void *acc, const void *v) {
    avg_acc_t *a = acc;
    int64_t x;
    memcpy(&x, v, 8);
    a->sum += x;
    a->n++;
}

static int64_t fold_i64(sl_state_t *st) {
    const void *p = sl_fold_get(st);
    if (!p) return -1;
    int64_t v;
    memcpy(&v, p, 8);
    return v;
}

TEST(reducing_and_aggregating) {
    fx_t *f = fx_new();
    sl_state_t *r = sl_state_reducing_ttl(&f->rt, "sum", 8, sum_fn, NULL, ttl_cfg(100, SL_TTL_UPDATE_ON_CREATE_AND_WRITE));
    sl_state_t *rr = sl_state_reducing_ttl(&f->rt, "sum-rw", 8, sum_fn, NULL, ttl_cfg(100, SL_TTL_UPDATE_ON_READ_AND_WRITE));
    sl_state_t *a = sl_state_aggregating_ttl(&f->rt, "avg", sizeof(avg_acc_t), avg_init, avg_add, NULL,
                                             ttl_cfg(100, SL_TTL_UPDATE_ON_CREATE_AND_WRITE));
    CHECK(r && rr && a);
    key(f, 1);
    inits_seen = 0;
    int64_t x = 5;
    CHECK_EQ(sl_fold_add(r, &x), 0);
    CHECK_EQ(sl_fold_add(rr, &x), 0);
    CHECK_EQ(sl_fold_add(a, &x), 0);
    f->now = 1050;
    x = 7;
    sl_fold_add(r, &x);
    sl_fold_add(rr, &x);
    sl_fold_add(a, &x);
    CHECK_EQ(fold_i64(r), 12);
    const avg_acc_t *av = sl_fold_get(a);
    CHECK(av && av->sum == 12 && av->n == 2 && av->inits == 1);
    f->now = 1140;
    CHECK_EQ(fold_i64(rr), 12); /* refreshed to 1140 */
    f->now = 1150;              /* the last write of r and a was at 1050 */
    CHECK_EQ(fold_i64(r), -1);
    CHECK(sl_fold_get(a) == NULL);
    CHECK_EQ(fold_i64(rr), 12);
    /* An expired accumulator starts over: reducing from the value, aggregating from init. */
    f->now = 1200;
    x = 3;
    sl_fold_add(r, &x);
    sl_fold_add(a, &x);
    CHECK_EQ(fold_i64(r), 3);
    av = sl_fold_get(a);
    CHECK(av && av->sum == 3 && av->n == 1 && av->inits == 2);
    /* Adding to a live but long-written accumulator continues it. */
    f->now = 1249;
    sl_fold_add(rr, &x); /* rr last touched at 1150 */
    CHECK_EQ(fold_i64(rr), 15);
    /* Expiry found by add itself (no read in between). */
    f->now = 1300;
    x = 1;
    sl_fold_add(r, &x);
    CHECK_EQ(fold_i64(r), 1);
    fx_free(f);
}

/* ------------------------------------------------------------------ */
/* ReturnExpiredIfNotCleanedUp                                         */

TEST(return_expired_if_not_cleaned_up) {
    fx_t *f = fx_new();
    sl_state_ttl_t t = ttl_cfg(100, SL_TTL_UPDATE_ON_CREATE_AND_WRITE);
    t.visibility = SL_TTL_RETURN_EXPIRED_IF_NOT_CLEANED_UP;
    sl_state_t *v = sl_state_value_ttl(&f->rt, "v", t);
    sl_state_t *l = sl_state_list_ttl(&f->rt, "l", t);
    sl_state_t *m = sl_state_map_ttl(&f->rt, "m", t);
    sl_state_t *r = sl_state_reducing_ttl(&f->rt, "r", 8, sum_fn, NULL, t);
    CHECK(v && l && m && r);
    key(f, 1);
    put_i64(v, 11);
    add_i64(l, 1);
    add_i64(l, 2);
    mput(m, 1, 10);
    int64_t x = 4;
    sl_fold_add(r, &x);
    f->now = 1500;
    CHECK_EQ(value_i64(v), 11); /* expired, not cleaned up yet: returned once, then removed */
    CHECK_EQ(value_i64(v), -1);
    lcol_t lc;
    CHECK_EQ(list_read(l, &lc), 2);
    CHECK_EQ(list_read(l, &lc), 0);
    CHECK_EQ(map_i64(m, 1), 10);
    CHECK_EQ(map_i64(m, 1), -1);
    /* Folding into an expired accumulator that is still there continues it
     * (Flink's TtlAggregateFunction with ReturnExpiredIfNotCleanedUp). */
    sl_fold_add(r, &x);
    CHECK_EQ(fold_i64(r), 8);
    fx_free(f);
}

/* ------------------------------------------------------------------ */
/* declarations                                                        */

TEST(declaration_errors) {
    fx_t *f = fx_new();
    CHECK(sl_state_value_ttl(&f->rt, "a", sl_state_ttl(0)) == NULL);
    CHECK_CONTAINS(sl_op_test_last_error(), "state 'a': TTL of 0 ms");
    sl_state_ttl_t bad = sl_state_ttl(10);
    bad.update_type = (sl_ttl_update_type_t)7;
    CHECK(sl_state_value_ttl(&f->rt, "a", bad) == NULL);
    CHECK_CONTAINS(sl_op_test_last_error(), "unknown TTL update type");

    sl_state_t *a = sl_state_value_ttl(&f->rt, "a", sl_state_ttl(10));
    CHECK(a);
    sl_state_t *a2 = sl_state_value_ttl(&f->rt, "a", sl_state_ttl(10)); /* same declaration: same state */
    CHECK(a2 && a2->sid == a->sid);
    CHECK(sl_state_value_ttl(&f->rt, "a", sl_state_ttl(20)) == NULL); /* another TTL */
    CHECK_CONTAINS(sl_op_test_last_error(), "cannot register state 'a'");
    CHECK(sl_state_value(&f->rt, "a") == NULL); /* without TTL */
    sl_state_t *b = sl_state_value(&f->rt, "b");
    CHECK(b);
    CHECK(sl_state_value_ttl(&f->rt, "b", sl_state_ttl(10)) == NULL); /* TTL added later */
    sl_state_ttl_t rw = sl_state_ttl(10);
    rw.update_type = SL_TTL_UPDATE_ON_READ_AND_WRITE;
    CHECK(sl_state_value_ttl(&f->rt, "a", rw) == NULL); /* another update type */
    fx_free(f);
}

/* ------------------------------------------------------------------ */
/* snapshots                                                           */

/* What a snapshot holds, read with the format parser: one row per value,
 * list element or map entry.  Keys, user keys and payloads are i64; every
 * stored item is [ts][payload]. */
typedef struct snap_item {
    char state[8];
    int64_t key, uk, ts, payload;
} snap_item_t;

typedef struct snap_items {
    snap_item_t *v;
    int n, cap;
    char state[8];
    int64_t key;
    int bad;
} snap_items_t;

static void items_push(snap_items_t *s, snap_item_t it) {
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->v = realloc(s->v, (size_t)s->cap * sizeof *s->v);
    }
    s->v[s->n++] = it;
}

static int si_state(void *c, const char *name, uint32_t namelen, sl_state_kind_t kind, int ttl, uint32_t n) {
    (void)ttl;
    snap_items_t *s = c;
    snprintf(s->state, sizeof s->state, "%.*s", (int)namelen, name);
    return 0;
}
static int si_entry(void *c, const uint8_t *k, uint32_t klen, const uint8_t *ns, uint32_t nslen, uint32_t n) {
    snap_items_t *s = c;
    s->bad += klen != 8 || nslen != 0 || n == 0;
    if (klen == 8) memcpy(&s->key, k, 8);
    return 0;
}
static int si_item(void *c, const uint8_t *uk, uint32_t uklen, const uint8_t *v, uint32_t vlen) {
    snap_items_t *s = c;
    snap_item_t it = {.key = s->key, .uk = -1};
    memcpy(it.state, s->state, sizeof it.state);
    if (uk && uklen == 8) memcpy(&it.uk, uk, 8);
    if (vlen != 16) {
        s->bad++;
        return 0;
    }
    memcpy(&it.ts, v, 8);
    memcpy(&it.payload, v + 8, 8);
    items_push(s, it);
    return 0;
}

static int item_cmp(const void *pa, const void *pb) {
    const snap_item_t *a = pa, *b = pb;
    int c = strcmp(a->state, b->state);
    if (c) return c;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    if (a->uk != b->uk) return a->uk < b->uk ? -1 : 1;
    if (a->payload != b->payload) return a->payload < b->payload ? -1 : 1;
    return (a->ts > b->ts) - (a->ts < b->ts);
}

/* Every key group of the view, parsed. */
static int read_snapshot(const sl_kb_snapshot_t *sn, snap_items_t *out) {
    memset(out, 0, sizeof *out);
    static const sl_kbf_visitor_t vis = {si_state, si_entry, si_item};
    for (int kg = sn->range.start; kg < sn->range.end; kg++) {
        sl_buf_t b = {0};
        if (sl_kb_snapshot_write(sn, kg, &b) != 0) return -1;
        char err[256];
        int rc = sl_kbf_parse(b.p, b.len, sn->max_parallelism, kg, &vis, out, err, sizeof err);
        sl_buf_free(&b);
        if (rc) {
            fprintf(stderr, "parse: %s\n", err);
            return -1;
        }
    }
    qsort(out->v, (size_t)out->n, sizeof *out->v, item_cmp);
    return out->bad ? -1 : 0;
}

/* read_snapshot on another thread. */
typedef struct snap_writer {
    const sl_kb_snapshot_t *sn;
    snap_items_t got;
    int rc;
} snap_writer_t;
static void *snap_writer_main(void *p) {
    snap_writer_t *w = p;
    w->rc = read_snapshot(w->sn, &w->got);
    return NULL;
}

/* The test's own record of what it wrote. */
typedef struct model {
    snap_item_t v[4096];
    int n;
} model_t;

static void model_add(model_t *m, const char *state, int64_t k, int64_t uk, int64_t ts, int64_t payload) {
    snap_item_t it = {.key = k, .uk = uk, .ts = ts, .payload = payload};
    snprintf(it.state, sizeof it.state, "%s", state);
    m->v[m->n++] = it;
}

/* Items of m still visible at now (ttl_ms: for states named with 't'),
 * sorted like read_snapshot's. */
static int model_visible(const model_t *m, int64_t ttl_ms, int64_t now, snap_item_t *out) {
    int n = 0;
    for (int i = 0; i < m->n; i++)
        if (m->v[i].state[0] != 't' || m->v[i].ts + ttl_ms > now) out[n++] = m->v[i];
    qsort(out, (size_t)n, sizeof *out, item_cmp);
    return n;
}

static bool items_equal(const snap_items_t *got, const snap_item_t *want, int n) {
    if (got->n != n) {
        fprintf(stderr, "  snapshot holds %d items, expected %d\n", got->n, n);
        return false;
    }
    for (int i = 0; i < n; i++)
        if (item_cmp(&got->v[i], &want[i]) != 0) {
            fprintf(stderr, "  item %d: got %s k=%lld uk=%lld ts=%lld v=%lld, expected %s k=%lld uk=%lld ts=%lld v=%lld\n",
                    i, got->v[i].state, (long long)got->v[i].key, (long long)got->v[i].uk, (long long)got->v[i].ts,
                    (long long)got->v[i].payload, want[i].state, (long long)want[i].key, (long long)want[i].uk,
                    (long long)want[i].ts, (long long)want[i].payload);
            return false;
        }
    return true;
}

/* 300 keys; for each, TTL value/list/map items written at times spread
 * over 1000..1600, and a plain value ("plain") that never expires. */
static void fill_for_snapshot(fx_t *f, sl_state_t *tv, sl_state_t *tl, sl_state_t *tm, sl_state_t *pv, model_t *m) {
    m->n = 0;
    uint64_t r = 42;
    for (int64_t t = 1000; t < 1600; t += 2) {
        f->now = t;
        r = r * 6364136223846793005ULL + 1442695040888963407ULL;
        int64_t k = (int64_t)(r >> 33) % 300, what = (int64_t)(r >> 20) % 3, payload = t * 10;
        key(f, (uint64_t)k);
        if (what == 0) {
            /* a value replaces the older one */
            for (int i = 0; i < m->n; i++)
                if (!strcmp(m->v[i].state, "tv") && m->v[i].key == k) m->v[i] = m->v[--m->n];
            put_i64(tv, payload);
            model_add(m, "tv", k, -1, t, payload);
        } else if (what == 1) {
            add_i64(tl, payload);
            model_add(m, "tl", k, -1, t, payload);
        } else {
            int64_t uk = (int64_t)(r >> 40) % 4;
            for (int i = 0; i < m->n; i++)
                if (!strcmp(m->v[i].state, "tm") && m->v[i].key == k && m->v[i].uk == uk) m->v[i] = m->v[--m->n];
            mput(tm, uk, payload);
            model_add(m, "tm", k, uk, t, payload);
        }
        /* the plain state: 8-byte timestamp-free value; stored as [t][payload]
         * by hand so that read_snapshot can parse it like the others */
        int64_t both[2] = {t, payload};
        for (int i = 0; i < m->n; i++)
            if (!strcmp(m->v[i].state, "pv") && m->v[i].key == k) m->v[i] = m->v[--m->n];
        sl_value_put(pv, both, sizeof both);
        model_add(m, "pv", k, -1, t, payload);
    }
}

TEST(snapshot_leaves_out_expired) {
    fx_t *f = fx_new();
    sl_state_ttl_t t = ttl_cfg(200, SL_TTL_UPDATE_ON_CREATE_AND_WRITE);
    sl_state_t *tv = sl_state_value_ttl(&f->rt, "tv", t), *tl = sl_state_list_ttl(&f->rt, "tl", t),
               *tm = sl_state_map_ttl(&f->rt, "tm", t), *pv = sl_state_value(&f->rt, "pv");
    CHECK(tv && tl && tm && pv);
    static model_t m;
    static snap_item_t want[4096];
    fill_for_snapshot(f, tv, tl, tm, pv, &m);
    sl_keyed_backend_t *kb = f->op.kb;

    /* Snapshot at 1700: what was written before 1500 has expired. */
    f->now = 1700;
    sl_kb_snapshot_t *s1;
    CHECK_EQ(OPS(kb)->snapshot(kb, &s1), 0);
    /* Time goes on before the asynchronous phase writes it: the view keeps
     * the time it was taken at. */
    f->now = 5000;
    snap_items_t got;
    CHECK_EQ(read_snapshot(s1, &got), 0);
    int n = model_visible(&m, 200, 1700, want);
    int ttl_written = 0, ttl_kept = 0;
    for (int i = 0; i < m.n; i++) ttl_written += m.v[i].state[0] == 't';
    for (int i = 0; i < n; i++) ttl_kept += want[i].state[0] == 't';
    CHECK(ttl_kept >= 40 && ttl_written - ttl_kept >= 100); /* the case has both */
    CHECK(items_equal(&got, want, n));
    free(got.v);

    /* Incremental cleanup now removes everything of the TTL states while s1
     * is still out, and while another thread writes s1 (the checkpoint
     * writer's part); the view must not change (copy-on-write). */
    snap_writer_t sw = {.sn = s1};
    pthread_t th;
    CHECK_EQ(pthread_create(&th, NULL, snap_writer_main, &sw), 0);
    for (int i = 0; i < 100000 && (OPS(kb)->count(kb, tv->sid) || OPS(kb)->count(kb, tl->sid) ||
                                    OPS(kb)->count(kb, tm->sid));
         i++) {
        sl_heap_backend_ttl_cleanup(kb, tv->sid, 5, f->now);
        sl_heap_backend_ttl_cleanup(kb, tl->sid, 5, f->now);
        sl_heap_backend_ttl_cleanup(kb, tm->sid, 5, f->now);
    }
    pthread_join(th, NULL);
    CHECK_EQ(sw.rc, 0);
    CHECK(items_equal(&sw.got, want, n));
    free(sw.got.v);
    CHECK_EQ(OPS(kb)->count(kb, tv->sid), 0);
    CHECK_EQ(OPS(kb)->count(kb, tl->sid), 0);
    CHECK_EQ(OPS(kb)->count(kb, tm->sid), 0);
    CHECK(OPS(kb)->count(kb, pv->sid) > 0); /* a state without TTL is never cleaned up */
    sl_heap_cow_stats_t cs;
    sl_heap_backend_cow_stats(kb, &cs);
    CHECK(cs.cow_copies > 0); /* the cleanup copied the shared tables before removing */
    CHECK_EQ(read_snapshot(s1, &got), 0);
    CHECK(items_equal(&got, want, n));
    free(got.v);
    sl_kb_snapshot_release(s1);

    /* A snapshot of the cleaned backend: only the plain state. */
    sl_kb_snapshot_t *s2;
    CHECK_EQ(OPS(kb)->snapshot(kb, &s2), 0);
    CHECK_EQ(read_snapshot(s2, &got), 0);
    n = model_visible(&m, 200, 5000, want);
    CHECK(items_equal(&got, want, n));
    for (int i = 0; i < got.n; i++) CHECK(!strcmp(got.v[i].state, "pv"));
    free(got.v);
    sl_kb_snapshot_release(s2);
    fx_free(f);
}

/* Snapshot at one time, restore into a new backend: the timestamps come
 * along, so each item expires when it would have without the restore. */
TEST(restore_keeps_timestamps) {
    for (int order = 0; order < 2; order++) { /* declare before / after the restore */
        fx_t *f = fx_new();
        sl_state_ttl_t t = ttl_cfg(200, SL_TTL_UPDATE_ON_CREATE_AND_WRITE);
        sl_state_t *tv = sl_state_value_ttl(&f->rt, "tv", t), *tl = sl_state_list_ttl(&f->rt, "tl", t),
                   *tm = sl_state_map_ttl(&f->rt, "tm", t), *pv = sl_state_value(&f->rt, "pv");
        CHECK(tv && tl && tm && pv);
        static model_t m;
        static snap_item_t want[4096];
        fill_for_snapshot(f, tv, tl, tm, pv, &m);
        f->now = 1650;
        sl_kb_snapshot_t *s;
        CHECK_EQ(OPS(f->op.kb)->snapshot(f->op.kb, &s), 0);

        fx_t *g = fx_new();
        g->now = 1650;
        sl_state_t *gv = NULL, *gl = NULL, *gm = NULL;
        if (order == 0) {
            gv = sl_state_value_ttl(&g->rt, "tv", t);
            gl = sl_state_list_ttl(&g->rt, "tl", t);
            gm = sl_state_map_ttl(&g->rt, "tm", t);
        }
        for (int kg = 0; kg < MAXP; kg++) {
            sl_buf_t b = {0};
            CHECK_EQ(sl_kb_snapshot_write(s, kg, &b), 0);
            char err[256];
            int rc = OPS(g->op.kb)->restore(g->op.kb, kg, b.p, b.len, err, sizeof err);
            sl_buf_free(&b);
            CHECK_EQ(rc, 0);
        }
        sl_kb_snapshot_release(s);
        if (order == 1) { /* declared after: the restored states take the TTL */
            gv = sl_state_value_ttl(&g->rt, "tv", t);
            gl = sl_state_list_ttl(&g->rt, "tl", t);
            gm = sl_state_map_ttl(&g->rt, "tm", t);
        }
        CHECK(gv && gl && gm);

        /* At several later times, read every key through the accessors and
         * compare with the rule applied to the original write times. */
        for (int64_t now = 1660; now <= 1820; now += 40) {
            g->now = now;
            int n = model_visible(&m, 200, now, want);
            int64_t seen_v = 0, seen_l = 0, seen_m = 0, want_v = 0, want_l = 0, want_m = 0;
            for (int i = 0; i < n; i++) {
                want_v += !strcmp(want[i].state, "tv");
                want_l += !strcmp(want[i].state, "tl");
                want_m += !strcmp(want[i].state, "tm");
            }
            for (int64_t k = 0; k < 300; k++) {
                key(g, (uint64_t)k);
                int64_t v = value_i64(gv);
                if (v >= 0) {
                    seen_v++;
                    bool found = false;
                    for (int i = 0; i < n; i++)
                        found |= !strcmp(want[i].state, "tv") && want[i].key == k && want[i].payload == v;
                    CHECK(found);
                }
                lcol_t lc;
                seen_l += list_read(gl, &lc);
                mcol_t mc;
                seen_m += map_read(gm, &mc);
            }
            CHECK_EQ(seen_v, want_v);
            CHECK_EQ(seen_l, want_l);
            CHECK_EQ(seen_m, want_m);
        }
        fx_free(g);
        fx_free(f);
    }
}

/* A state written without TTL and declared with TTL after a restore (Flink
 * 2.2's TTL migration): its values get the clock of the declaration as
 * their timestamp, so they are read back and expire a TTL later. */
TEST(restored_without_ttl_declared_with_ttl) {
    fx_t *f = fx_new();
    sl_state_t *v = sl_state_value(&f->rt, "v");
    key(f, 1);
    sl_value_put(v, "abc", 3);
    sl_kb_snapshot_t *s;
    CHECK_EQ(OPS(f->op.kb)->snapshot(f->op.kb, &s), 0);
    fx_t *g = fx_new();
    for (int kg = 0; kg < MAXP; kg++) {
        sl_buf_t b = {0};
        CHECK_EQ(sl_kb_snapshot_write(s, kg, &b), 0);
        char err[256];
        CHECK_EQ(OPS(g->op.kb)->restore(g->op.kb, kg, b.p, b.len, err, sizeof err), 0);
        sl_buf_free(&b);
    }
    sl_kb_snapshot_release(s);
    g->now = 5000;
    sl_state_t *gv = sl_state_value_ttl(&g->rt, "v", sl_state_ttl(100));
    CHECK(gv);
    key(g, 1);
    g->now = 5099;
    uint32_t len = 0;
    const void *p = sl_value_get(gv, &len);
    CHECK(p && len == 3 && memcmp(p, "abc", 3) == 0);
    g->now = 5100;
    CHECK(sl_value_get(gv, NULL) == NULL);
    fx_free(g);
    fx_free(f);
}

/* ------------------------------------------------------------------ */
/* incremental cleanup                                                 */

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* An ever-growing key space: 1M distinct keys, 100 new keys per ms of the
 * manual clock, TTL 200 ms, each key written once and never touched again.
 * Live state is 100 x 200 = 20000 keys; with the default cleanup (5 keys
 * examined per access) the count must stay near that, and every live key
 * must still be there. */
TEST(incremental_cleanup_bounds_unbounded_keys) {
    const int64_t N = 1000000, PER_MS = 100, TTL = 200, LIVE = PER_MS * TTL;
    fx_t *f = fx_new();
    sl_state_t *st = sl_state_value_ttl(&f->rt, "seen", sl_state_ttl(TTL)); /* default cleanup */
    sl_state_ttl_t off = sl_state_ttl(TTL);
    off.cleanup_size = -1;
    sl_state_t *ctl = sl_state_value_ttl(&f->rt, "control", off); /* no incremental cleanup */
    CHECK(st && ctl);
    sl_keyed_backend_t *kb = f->op.kb;
    int64_t maxcount = 0, samples = 0;
    double t0 = now_s();
    for (int64_t i = 0; i < N; i++) {
        f->now = 1000000 + i / PER_MS;
        key(f, (uint64_t)i);
        put_i64(st, i);
        if (i % 50000 == 49999 && i > 2 * LIVE) {
            int64_t c = OPS(kb)->count(kb, st->sid);
            if (c > maxcount) maxcount = c;
            samples++;
            /* keys written less than TTL ago are live: all must be there */
            int64_t live = 0;
            for (int64_t j = i; j >= 0 && (1000000 + j / PER_MS) + TTL > f->now; j--) live++;
            CHECK(c >= live);
            for (int64_t j = i - live + 1; j <= i; j += 97) {
                uint64_t k = (uint64_t)j;
                sl_kb_set_key(kb, &k, 8);
                uint32_t l;
                CHECK(OPS(kb)->get(kb, st->sid, "", 0, &l) != NULL);
            }
        }
    }
    double dt_on = now_s() - t0;
    CHECK(samples >= 15);
    fprintf(stderr, "  1M keys, live %lld: max count %lld (%.2f x live), %.0f ns per put with cleanup\n",
            (long long)LIVE, (long long)maxcount, (double)maxcount / (double)LIVE, dt_on * 1e9 / (double)N);
    CHECK(maxcount <= LIVE * 3 / 2);

    /* The same writes without incremental cleanup keep every key. */
    int64_t end = f->now;
    t0 = now_s();
    for (int64_t i = 0; i < 200000; i++) {
        f->now = 1000000 + i / PER_MS;
        key(f, (uint64_t)i);
        put_i64(ctl, i);
    }
    double dt_off = now_s() - t0;
    CHECK_EQ(OPS(kb)->count(kb, ctl->sid), 200000);
    fprintf(stderr, "  without cleanup: 200000 keys kept, %.0f ns per put\n", dt_off * 1e9 / 200000.0);

    /* Writes stop; once everything has expired, accesses to one unrelated
     * key alone clean up the rest: the cursor walks every key group. */
    f->now = end + TTL;
    int64_t left = OPS(kb)->count(kb, st->sid), accesses = 0;
    key(f, (uint64_t)-1);
    while (OPS(kb)->count(kb, st->sid) > 0 && accesses < 10 * left) {
        CHECK_EQ(value_i64(st), -1);
        accesses++;
    }
    CHECK_EQ(OPS(kb)->count(kb, st->sid), 0);
    fprintf(stderr, "  drained %lld expired keys in %lld reads of another key\n", (long long)left, (long long)accesses);
    CHECK(accesses <= left / 5 + 2 * MAXP + 16);
    fx_free(f);
}

/* A bounded key space kept fresh: cleanup finds nothing to do (and skips
 * until something may have expired); when half the keys stop being
 * written, they are cleaned up soon after they expire, the others stay. */
TEST(cleanup_after_writes_stop) {
    fx_t *f = fx_new();
    sl_state_t *st = sl_state_value_ttl(&f->rt, "v", sl_state_ttl(200));
    CHECK(st);
    sl_keyed_backend_t *kb = f->op.kb;
    int64_t next = 0;
    /* 10000 keys, 100 written per ms in turn: each every 100 ms */
    for (int ms = 0; ms < 1000; ms++, f->now++)
        for (int j = 0; j < 100; j++, next++) {
            key(f, (uint64_t)(next % 10000));
            put_i64(st, next);
        }
    CHECK_EQ(OPS(kb)->count(kb, st->sid), 10000);
    /* now only keys 0..4999, 50 per ms: each every 100 ms still */
    int64_t gone_at = -1;
    for (int ms = 0; ms < 1000; ms++, f->now++) {
        for (int j = 0; j < 50; j++, next++) {
            key(f, (uint64_t)(next % 5000));
            put_i64(st, next);
        }
        int64_t c = OPS(kb)->count(kb, st->sid);
        CHECK(c >= 5000);
        if (c == 5000 && gone_at < 0) gone_at = ms;
    }
    /* keys 5000.. were last written in the ms before the switch: they
     * expire 200 ms later; a round of the cursor over ~10000 entries at 5
     * per access and 50 accesses per ms takes ~40 ms, and it may wait up to
     * a round's age of the floor (<= 100 ms here) */
    fprintf(stderr, "  the keys no longer written were gone %lld ms after the switch (they expire at 200)\n",
            (long long)gone_at);
    CHECK(gone_at >= 199 && gone_at <= 200 + 100 + 2 * 40);
    for (int64_t k = 0; k < 5000; k++) {
        key(f, (uint64_t)k);
        CHECK(value_i64(st) >= 0);
    }
    fx_free(f);
}

/* Cleanup per record: records whose function never touches the state still
 * clean it up (sl_op_set_key_from), and only when asked to. */
static int64_t rec_key;
static int key_from_counter(void *ctx, const sl_row_t *row, uint8_t *k, int cap) {
    memcpy(k, &rec_key, 8);
    return 8;
}

TEST(cleanup_every_record) {
    for (int every = 0; every < 2; every++) {
        fx_t *f = fx_new();
        sl_key_selector_t ks = {.field = -1, .fn = key_from_counter};
        f->op.key[0] = &ks;
        sl_state_ttl_t t = sl_state_ttl(100);
        t.cleanup_every_record = every;
        sl_state_t *st = sl_state_value_ttl(&f->rt, "v", t);
        CHECK(st);
        for (int64_t i = 0; i < 20000; i++) {
            key(f, (uint64_t)i);
            put_i64(st, i);
        }
        int64_t before = OPS(f->op.kb)->count(f->op.kb, st->sid);
        /* cleanup on writes cannot remove anything yet: nothing has expired */
        CHECK_EQ(before, 20000);
        f->now += 100;
        sl_row_t row = {0};
        for (int64_t i = 0; i < 20000; i++) {
            rec_key = 1000000 + i;
            CHECK(sl_op_set_key_from(&f->op, 0, &row) >= 0);
        }
        int64_t after = OPS(f->op.kb)->count(f->op.kb, st->sid);
        fprintf(stderr, "  every_record=%d: %lld -> %lld entries after 20000 records not touching the state\n", every,
                (long long)before, (long long)after);
        if (every)
            CHECK_EQ(after, 0);
        else
            CHECK_EQ(after, 20000);
        fx_free(f);
    }
}

/* Lists and maps under incremental cleanup: expired elements and user keys
 * go, live ones stay, in order. */
TEST(incremental_cleanup_lists_and_maps) {
    fx_t *f = fx_new();
    sl_state_ttl_t t = sl_state_ttl(100);
    t.cleanup_size = 3;
    sl_state_t *l = sl_state_list_ttl(&f->rt, "l", t), *m = sl_state_map_ttl(&f->rt, "m", t);
    CHECK(l && m);
    sl_keyed_backend_t *kb = f->op.kb;
    /* keys 0..999: elements / user keys at 1000 (even) and 1060 (odd) */
    for (int pass = 0; pass < 2; pass++) {
        f->now = pass ? 1060 : 1000;
        for (int64_t k = 0; k < 1000; k++) {
            key(f, (uint64_t)k);
            add_i64(l, k * 10 + pass);
            if (k % 2 == 0 || pass == 1) mput(m, pass, k * 10 + pass); /* odd keys: only user key 1 */
        }
    }
    f->now = 1100; /* the first pass expired */
    int steps = 0;
    for (; steps < 100000; steps++) {
        int a = sl_heap_backend_ttl_cleanup(kb, l->sid, 3, f->now), b = sl_heap_backend_ttl_cleanup(kb, m->sid, 3, f->now);
        CHECK(a >= 0 && b >= 0);
        /* done when no stored list has 2 elements and no map has user key 0 */
        bool done = true;
        for (int64_t k = 0; k < 1000 && done; k += 1) {
            uint64_t kk = (uint64_t)k;
            sl_kb_set_key(kb, &kk, 8);
            rawl_t r = {0};
            OPS(kb)->list_foreach(kb, l->sid, "", 0, rawl_cb, &r);
            int64_t uk = 0;
            done = r.n == 1 && !OPS(kb)->map_get(kb, m->sid, "", 0, &uk, 8, NULL);
        }
        if (done) break;
    }
    CHECK(steps < 100000);
    for (int64_t k = 0; k < 1000; k++) {
        key(f, (uint64_t)k);
        lcol_t lc;
        CHECK_EQ(list_read(l, &lc), 1);
        CHECK_EQ(lc.v[0], k * 10 + 1);
        CHECK_EQ(map_i64(m, 1), k * 10 + 1);
        CHECK_EQ(map_i64(m, 0), -1);
    }
    CHECK_EQ(OPS(kb)->count(kb, l->sid), 1000);
    CHECK_EQ(OPS(kb)->count(kb, m->sid), 1000);
    f->now = 1160; /* everything */
    for (steps = 0; steps < 100000 && (OPS(kb)->count(kb, l->sid) || OPS(kb)->count(kb, m->sid)); steps++) {
        sl_heap_backend_ttl_cleanup(kb, l->sid, 3, f->now);
        sl_heap_backend_ttl_cleanup(kb, m->sid, 3, f->now);
    }
    CHECK_EQ(OPS(kb)->count(kb, l->sid), 0);
    CHECK_EQ(OPS(kb)->count(kb, m->sid), 0);
    /* a state without TTL, or another backend's call, is refused or a no-op */
    sl_state_t *plain = sl_state_value(&f->rt, "plain");
    CHECK_EQ(sl_heap_backend_ttl_cleanup(kb, plain->sid, 5, f->now), 0);
    CHECK_EQ(sl_heap_backend_ttl_cleanup(kb, 99, 5, f->now), SL_EINVAL);
    fx_free(f);
}

/* ------------------------------------------------------------------ */
/* a keyed process function job, end to end                           */

/* Processing time of each task thread: the process function sets it from
 * the record before touching state, so TTL decisions are reproducible
 * whatever the thread scheduling (the job's clock is the TTL clock). */
static _Thread_local int64_t tl_now;
static int64_t thread_clock(void *ctx) { return tl_now; }

#define E2E_N 20000
#define E2E_STEP 10 /* ms of processing time per record id */
#define E2E_TTL 300
#define E2E_T0 1000000

static uint64_t mix(uint64_t x) { return sl_mix64(x + 0x9E3779B97F4A7C15ULL); }
/* Skewed keys: low keys often (short gaps), high keys rarely (long gaps). */
static int64_t e2e_key(int64_t id) {
    double u = (double)(mix((uint64_t)id) >> 11) * 0x1p-53;
    return (int64_t)(64.0 * u * u * u);
}
static int e2e_key_fn(void *ctx, const sl_row_t *row, uint8_t *k, int cap) {
    int64_t key = e2e_key(sl_row_i64(row, 0));
    memcpy(k, &key, 8);
    return 8;
}

typedef struct e2e_fn {
    sl_state_t *last, *hist, *bym, *sum;
} e2e_fn_t;

static void *e2e_clone(const void *ctx) { return calloc(1, sizeof(e2e_fn_t)); }
static void e2e_free(void *ctx) { free(ctx); }

static int e2e_open(void *ctx, sl_rt_t *rt) {
    e2e_fn_t *f = ctx;
    sl_state_ttl_t t = sl_state_ttl(E2E_TTL), rw = sl_state_ttl(E2E_TTL);
    rw.update_type = SL_TTL_UPDATE_ON_READ_AND_WRITE;
    f->last = sl_state_value_ttl(rt, "last", t);
    f->hist = sl_state_list_ttl(rt, "hist", t);
    f->bym = sl_state_map_ttl(rt, "by_mod3", t);
    f->sum = sl_state_reducing_ttl(rt, "sum", 8, sum_fn, NULL, rw);
    return f->last && f->hist && f->bym && f->sum ? 0 : SL_EINVAL;
}

typedef struct lsum {
    int64_t n, sum;
} lsum_t;
static void lsum_cb(void *c, const void *v, uint32_t len) {
    lsum_t *s = c;
    int64_t x;
    memcpy(&x, v, 8);
    s->n++;
    s->sum += x;
}

static int e2e_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    e2e_fn_t *f = ctx;
    int64_t id = sl_row_i64(&in->row, 0);
    tl_now = E2E_T0 + id * E2E_STEP;
    if (sl_pctx_now(pc) != tl_now) return SL_EINVAL;
    const int64_t *p = sl_value_get(f->last, NULL);
    int64_t prev = p ? *p : -1;
    lsum_t ls = {0, 0};
    int n = sl_list_foreach(f->hist, lsum_cb, &ls);
    if (n != ls.n) return SL_EINVAL;
    int64_t uk = id % 3;
    p = sl_map_get(f->bym, &uk, 8, NULL);
    int64_t mg = p ? *p : -1;
    int64_t fsum;
    if (id % 7 == 0) { /* read only: refreshes (OnReadAndWrite) */
        p = sl_fold_get(f->sum);
        fsum = p ? *p : -1;
    } else {
        sl_fold_add(f->sum, &id);
        p = sl_fold_get(f->sum);
        fsum = p ? *p : -2;
    }
    if (id % 7 != 1) sl_value_put(f->last, &id, 8);
    sl_list_add(f->hist, &id, 8);
    sl_map_put(f->bym, &uk, 8, &id, 8);
    sl_row_writer_t *w = sl_out_row(out);
    sl_rw_set_i64(w, 0, id);
    sl_rw_set_i64(w, 1, prev);
    sl_rw_set_i64(w, 2, ls.n);
    sl_rw_set_i64(w, 3, ls.sum);
    sl_rw_set_i64(w, 4, mg);
    sl_rw_set_i64(w, 5, fsum);
    sl_emit(out);
    return 0;
}

/* The reference: the same function on plain C data and the TTL rule. */
typedef struct e2e_model_key {
    bool has_v;
    int64_t v, v_ts;
    int64_t *l, *l_ts;
    int nl, capl;
    bool has_m[3];
    int64_t m[3], m_ts[3];
    bool has_s;
    int64_t s, s_ts;
} e2e_mk_t;

static bool alive(int64_t ts, int64_t now) { return ts + E2E_TTL > now; }

static void e2e_model(int64_t out[][6]) {
    static e2e_mk_t keys[64];
    memset(keys, 0, sizeof keys);
    for (int64_t id = 0; id < E2E_N; id++) {
        e2e_mk_t *k = &keys[e2e_key(id)];
        int64_t now = E2E_T0 + id * E2E_STEP;
        int64_t *o = out[id];
        o[0] = id;
        o[1] = k->has_v && alive(k->v_ts, now) ? k->v : -1;
        int j = 0;
        o[2] = o[3] = 0;
        for (int i = 0; i < k->nl; i++)
            if (alive(k->l_ts[i], now)) {
                o[2]++;
                o[3] += k->l[i];
                k->l[j] = k->l[i];
                k->l_ts[j++] = k->l_ts[i];
            }
        k->nl = j;
        int64_t uk = id % 3;
        o[4] = k->has_m[uk] && alive(k->m_ts[uk], now) ? k->m[uk] : -1;
        bool s_alive = k->has_s && alive(k->s_ts, now);
        if (id % 7 == 0) {
            o[5] = s_alive ? k->s : -1;
            if (s_alive) k->s_ts = now;
        } else {
            k->s = s_alive ? k->s + id : id;
            k->has_s = true;
            k->s_ts = now;
            o[5] = k->s;
        }
        if (id % 7 != 1) {
            k->has_v = true;
            k->v = id;
            k->v_ts = now;
        }
        if (k->nl == k->capl) {
            k->capl = k->capl ? 2 * k->capl : 8;
            k->l = realloc(k->l, (size_t)k->capl * sizeof *k->l);
            k->l_ts = realloc(k->l_ts, (size_t)k->capl * sizeof *k->l_ts);
        }
        k->l[k->nl] = id;
        k->l_ts[k->nl++] = now;
        k->has_m[uk] = true;
        k->m[uk] = id;
        k->m_ts[uk] = now;
    }
    for (int i = 0; i < 64; i++) {
        free(keys[i].l);
        free(keys[i].l_ts);
    }
}

TEST(keyed_process_job_with_ttl) {
    static int64_t want[E2E_N][6], got[E2E_N][6];
    e2e_model(want);
    /* the case exercises both sides of the rule */
    int hidden = 0, shown = 0;
    for (int64_t id = 0; id < E2E_N; id++) {
        hidden += want[id][1] < 0;
        shown += want[id][1] >= 0;
    }
    CHECK(hidden > E2E_N / 10 && shown > E2E_N / 10);

    const char *osc = "id BIGINT NOT NULL, prev BIGINT NOT NULL, nlist BIGINT NOT NULL, lsum BIGINT NOT NULL, "
                      "mg BIGINT NOT NULL, fsum BIGINT NOT NULL";
    for (int p = 1; p <= 3; p += 2) {
        sl_env_t *env = sl_env_new();
        sl_env_set_parallelism(env, p);
        sl_env_set_clock(env, thread_clock, NULL);
        collected_t *c = collected_new();
        sl_stream_t *s = sl_parallelism(sl_from_source(env, counter_source(E2E_N, 1), sl_wm_none(), "ids"), 1);
        sl_process_fn_t fn = {.open = e2e_open, .process = e2e_process, .opts = {NULL, e2e_clone, e2e_free}};
        sl_stream_t *o = sl_keyed_process(sl_key_by_fn(s, e2e_key_fn, NULL), fn, sl_schema_parse(osc, NULL, 0));
        sl_sink_to(o, collect_sink(c), "collect");
        int rc = sl_env_execute(env, "ttl");
        if (rc) fprintf(stderr, "  job: %s\n", sl_env_error(env));
        CHECK_EQ(rc, 0);
        CHECK_EQ(c->n, E2E_N);
        memset(got, 0xff, sizeof got);
        sl_schema_t *sc = sl_schema_parse(osc, NULL, 0);
        int bad = 0;
        for (int64_t i = 0; i < c->n; i++) {
            sl_row_t r = collected_row(c, i, sc);
            int64_t id = sl_row_i64(&r, 0);
            CHECK(id >= 0 && id < E2E_N);
            CHECK(got[id][0] == -1); /* once */
            for (int j = 0; j < 6; j++) got[id][j] = sl_row_i64(&r, j);
        }
        for (int64_t id = 0; id < E2E_N; id++)
            for (int j = 0; j < 6; j++)
                if (got[id][j] != want[id][j] && bad++ < 5)
                    fprintf(stderr, "  p=%d id %lld field %d: got %lld, expected %lld\n", p, (long long)id, j,
                            (long long)got[id][j], (long long)want[id][j]);
        CHECK_EQ(bad, 0);
        sl_schema_unref(sc);
        collected_free(c);
        sl_env_destroy(env);
    }
}

/* The same job, checkpointed, fails once mid-stream and restarts from its
 * latest checkpoint (keyed state restored, the source rewound).  Records
 * replayed after the restore must give what the reference gives: the
 * restored items keep the times they were written at (and what had expired
 * when the checkpoint was taken is not brought back). */
static atomic_int e2e_ckpt_done, e2e_failed;
#define E2E_PAUSE_AT 8000
#define E2E_FAIL_AT 12000

typedef struct pause_reader {
    int64_t next;
} pause_reader_t;

static int pause_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    *reader = calloc(1, sizeof(pause_reader_t));
    *nsplits = 1;
    return 0;
}

/* ids 0..E2E_N-1; waits at E2E_PAUSE_AT until a checkpoint has completed */
static int pause_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    pause_reader_t *r = reader;
    for (int i = 0; i < max; i++) {
        if (r->next >= E2E_N) {
            sl_src_split_finished(out, 0);
            return SL_SRC_END;
        }
        if (r->next == E2E_PAUSE_AT && !atomic_load(&e2e_ckpt_done)) return i ? SL_SRC_MORE : SL_SRC_IDLE;
        sl_row_writer_t *w = sl_src_row(out);
        sl_rw_set_i64(w, 0, r->next);
        sl_rw_set_i64(w, 1, r->next);
        sl_src_emit(out, 0, r->next);
        r->next++;
    }
    return SL_SRC_MORE;
}

static void pause_destroy_reader(void *reader) { free(reader); }
static void pause_destroy(void *ctx) {}

static int pause_snapshot(void *reader, int64_t id, void (*put)(void *, const void *, size_t), void *pc) {
    put(pc, &((pause_reader_t *)reader)->next, 8);
    return 0;
}

static int pause_restore(void *reader, const void *state, size_t len, char *err, size_t el) {
    uint32_t blen;
    if (len != 12 || (memcpy(&blen, state, 4), blen != 8)) return SL_EFORMAT;
    memcpy(&((pause_reader_t *)reader)->next, (const uint8_t *)state + 4, 8);
    return 0;
}

static const sl_source_ops_t pause_ops = {.name = "ids",
                                          .create_reader = pause_create,
                                          .poll = pause_poll,
                                          .destroy_reader = pause_destroy_reader,
                                          .destroy = pause_destroy,
                                          .snapshot = pause_snapshot,
                                          .restore = pause_restore};

static int note_pre_commit(void *w, int64_t id, char *err, size_t el) { return 0; }
static int note_commit(void *w, int64_t id, char *err, size_t el) {
    atomic_store(&e2e_ckpt_done, 1);
    return 0;
}
static const sl_sink_ops_t note_ops = {.name = "collect",
                                       .open = collect_open,
                                       .write = collect_write,
                                       .finish = collect_finish,
                                       .close = collect_close,
                                       .pre_commit = note_pre_commit,
                                       .commit = note_commit};

static int e2e_process_fail_once(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    if (sl_row_i64(&in->row, 0) == E2E_FAIL_AT && !atomic_exchange(&e2e_failed, 1)) return SL_EUSER;
    return e2e_process(ctx, pc, in, out);
}

TEST(keyed_process_job_with_ttl_restarts) {
    static int64_t want[E2E_N][6];
    static int seen[E2E_N];
    e2e_model(want);
    const char *osc = "id BIGINT NOT NULL, prev BIGINT NOT NULL, nlist BIGINT NOT NULL, lsum BIGINT NOT NULL, "
                      "mg BIGINT NOT NULL, fsum BIGINT NOT NULL";
    atomic_store(&e2e_ckpt_done, 0);
    atomic_store(&e2e_failed, 0);
    char ck[600];
    snprintf(ck, sizeof ck, "%s/ttl-restart-ckpt", sl_test_tmpdir());
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 2);
    sl_env_set_clock(env, thread_clock, NULL);
    sl_env_enable_checkpointing(env, 10, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, ck);
    sl_env_set_restart_fixed_delay(env, 3, 10);
    collected_t *c = collected_new();
    sl_source_t src = {&pause_ops, NULL, sl_schema_parse("id BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0)};
    sl_stream_t *s = sl_uid(sl_parallelism(sl_from_source(env, src, sl_wm_none(), "ids"), 1), "ids");
    sl_process_fn_t fn = {.open = e2e_open, .process = e2e_process_fail_once, .opts = {NULL, e2e_clone, e2e_free}};
    sl_stream_t *o = sl_uid(sl_keyed_process(sl_key_by_fn(s, e2e_key_fn, NULL), fn, sl_schema_parse(osc, NULL, 0)),
                            "ttl-fn");
    sl_uid(sl_sink_to(o, (sl_sink_t){&note_ops, c}, "collect"), "collect");
    int rc = sl_env_execute(env, "ttl-restart");
    if (rc) fprintf(stderr, "  job: %s\n", sl_env_error(env));
    CHECK_EQ(rc, 0);
    CHECK_EQ(sl_env_restarts(env), 1);
    /* a checkpoint completed before the failure (the count of the last
     * attempt may be 0: its replay can end before the next one) */
    CHECK(atomic_load(&e2e_ckpt_done));
    sl_schema_t *sc = sl_schema_parse(osc, NULL, 0);
    memset(seen, 0, sizeof seen);
    int bad = 0;
    int64_t replayed = 0;
    for (int64_t i = 0; i < c->n; i++) {
        sl_row_t r = collected_row(c, i, sc);
        int64_t id = sl_row_i64(&r, 0);
        CHECK(id >= 0 && id < E2E_N);
        replayed += seen[id]++ > 0;
        for (int j = 0; j < 6; j++)
            if (sl_row_i64(&r, j) != want[id][j] && bad++ < 5)
                fprintf(stderr, "  id %lld field %d: got %lld, expected %lld\n", (long long)id, j,
                        (long long)sl_row_i64(&r, j), (long long)want[id][j]);
    }
    for (int64_t id = 0; id < E2E_N; id++) CHECK(seen[id] >= 1);
    fprintf(stderr, "  %lld records processed again after the restore\n", (long long)replayed);
    CHECK(replayed > 0); /* the restore did go back: state was restored, not rebuilt */
    CHECK_EQ(bad, 0);
    sl_schema_unref(sc);
    collected_free(c);
    sl_env_destroy(env);
}

int main(void) {
    RUN(value_on_create_and_write);
    RUN(value_on_read_and_write);
    RUN(list_on_create_and_write);
    RUN(list_on_read_and_write);
    RUN(map_on_create_and_write);
    RUN(map_on_read_and_write);
    RUN(reducing_and_aggregating);
    RUN(return_expired_if_not_cleaned_up);
    RUN(declaration_errors);
    RUN(snapshot_leaves_out_expired);
    RUN(restore_keeps_timestamps);
    RUN(restored_without_ttl_declared_with_ttl);
    RUN(incremental_cleanup_bounds_unbounded_keys);
    RUN(cleanup_after_writes_stop);
    RUN(cleanup_every_record);
    RUN(incremental_cleanup_lists_and_maps);
    RUN(keyed_process_job_with_ttl);
    RUN(keyed_process_job_with_ttl_restarts);
    TEST_MAIN_END();
}
