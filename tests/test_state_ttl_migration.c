/*
 * test_state_ttl_migration.c — turning state TTL on or off for state that a
 * checkpoint or savepoint holds (Flink 2.2's TTL migration,
 * TtlAwareSerializer), against a reference computed here:
 *   - backends without a job (a manual clock): random values, list
 *     elements and map values written with or without TTL on the heap or
 *     RocksDB backend, snapshot, restored into two backends of another key
 *     group split (another parallelism) of either kind, declared with TTL
 *     turned on, off or with another duration.  The reference: an item
 *     that had no timestamp gets the clock of the declaration, one that had
 *     keeps it (a duration change migrates nothing), one whose TTL is
 *     turned off never expires; items that had expired at the snapshot are
 *     gone.  Every item is read back at times around its expiry;
 *   - the same restore from version-1 blocks (written before the format
 *     recorded TTL-ness, built here): they restore as before, the state's
 *     declaration deciding whether items carry a timestamp;
 *   - a job (byte and typed value, list and map states, a typed schema
 *     change in the same restore) stopped with a savepoint and resumed with
 *     the TTL toggled at another parallelism, heap -> RocksDB and RocksDB
 *     -> heap, with processing time jumped: every output equals the
 *     reference, so restored items survive, expire a TTL after the restore
 *     (TTL turned on) or never expire (TTL turned off);
 *   - the same with a checkpoint, a failure and a restore at another
 *     parallelism that toggles the TTL.
 * Processing time is a function of the record (each task thread's clock is
 * set from the record before state is touched; before the first record it
 * is RESTORE_NOW), so the reference is exact whatever the scheduling.
 */
#include "test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "common/common.h"
#include "operators/operator.h"
#include "pipeline_util.h"
#include "sluice/sluice.h"
#include "state/rocksdb_backend.h"
#include "state/state_backend.h"
#include "state/ttl.h"
#include "types/row_migration.h"

#define MAXP 128

/* ------------------------------------------------------------------ */
/* part 1: backends without a job                                      */

typedef struct fx {
    sl_operator_t op;
    sl_rt_t rt;
    int64_t now;
} fx_t;

static int64_t manual_clock(void *ctx) { return *(const int64_t *)ctx; }
static int dir_seq;

static fx_t *fx_new(bool rocksdb, sl_kg_range_t r) {
    fx_t *f = calloc(1, sizeof *f);
    f->op.name = "ttl-migration";
    if (rocksdb) {
        char dir[600], err[512] = "";
        snprintf(dir, sizeof dir, "%s/unit-db-%d", sl_test_tmpdir(), dir_seq++);
        /* a small value cache: the migration's writes go through it, some evicted */
        sl_rocksdb_opts_t o = {.dir = dir, .write_buffer_bytes = 1 << 20, .value_cache_bytes = 4096};
        f->op.kb = sl_rocksdb_backend_new(MAXP, r, &o, err, sizeof err);
        if (!f->op.kb) fprintf(stderr, "rocksdb: %s\n", err);
    } else {
        f->op.kb = sl_heap_backend_new(MAXP, r);
    }
    sl_kb_set_clock(f->op.kb, manual_clock, &f->now);
    f->rt.op = &f->op;
    f->now = 1000;
    return f;
}

static void fx_free(fx_t *f) {
    sl_op_base_free(&f->op);
    free(f);
}

#define UNK 48 /* keys */
#define UNUK 4 /* map user keys */
#define UMAXL 64
#define BIG_UNIT INT64_C(1000000000) /* a TTL under which nothing expires */

typedef struct uitem {
    bool has;
    int64_t v, ts;
} uitem_t;

typedef struct ukey {
    uitem_t val;
    uitem_t l[UMAXL];
    int nl;
    uitem_t m[UNUK];
} ukey_t;

static ukey_t UM[UNK];

static sl_state_ttl_t cfg(int64_t ttl) {
    sl_state_ttl_t t = sl_state_ttl(ttl);
    t.cleanup_size = -1; /* what reads see is the rule, not the cleanup's pace */
    return t;
}

/* The three states, declared with ttl (0: none). */
static void declare(fx_t *f, int64_t ttl, sl_state_t **v, sl_state_t **l, sl_state_t **m) {
    sl_state_ttl_t t = cfg(ttl);
    *v = ttl ? sl_state_value_ttl(&f->rt, "v", t) : sl_state_value(&f->rt, "v");
    *l = ttl ? sl_state_list_ttl(&f->rt, "l", t) : sl_state_list(&f->rt, "l");
    *m = ttl ? sl_state_map_ttl(&f->rt, "m", t) : sl_state_map(&f->rt, "m");
}

static fx_t *owner(fx_t *const *dst, const int *split, uint64_t k) {
    int kg = sl_kg_of_hash(sl_kg_key_hash(&k, sizeof k), MAXP);
    return kg < split[0] ? dst[0] : dst[1];
}

typedef struct lcoll {
    int64_t v[UMAXL + 1];
    int n;
    bool bad;
} lcoll_t;
static void lcoll_cb(void *c, const void *v, uint32_t len) {
    lcoll_t *x = c;
    if (len != 8 || x->n > UMAXL) {
        x->bad = true;
        return;
    }
    memcpy(&x->v[x->n++], v, 8);
}

static bool visible(const uitem_t *it, int64_t ttl, int64_t now) {
    return it->has && (ttl == 0 || it->ts + ttl > now);
}

/* Every key's items in the backends at time now against the model
 * (values under TTL ttl).  The number of mismatches. */
static int check_all(fx_t *const *dst, const int *split, sl_state_t *const *sv, sl_state_t *const *sl,
                     sl_state_t *const *sm, int64_t ttl, int64_t now, int *alive) {
    int bad = 0;
    *alive = 0;
    for (uint64_t k = 0; k < UNK; k++) {
        fx_t *f = owner(dst, split, k);
        int d = f == dst[0] ? 0 : 1;
        f->now = now;
        sl_kb_set_key(f->op.kb, &k, sizeof k);
        ukey_t *u = &UM[k];
        uint32_t len = 0;
        const void *p = sl_value_get(sv[d], &len);
        bool want = visible(&u->val, ttl, now);
        int64_t got = 0;
        if (p && len == 8) memcpy(&got, p, 8);
        if ((p != NULL) != want || (p && (len != 8 || got != u->val.v))) {
            if (bad++ < 5)
                fprintf(stderr, "  key %llu value at %lld: got %s (%u bytes), expected %s\n", (unsigned long long)k,
                        (long long)now, p ? "a value" : "none", (unsigned)len, want ? "a value" : "none");
        }
        *alive += want;
        lcoll_t lc = {.n = 0};
        sl_list_foreach(sl[d], lcoll_cb, &lc);
        int j = 0;
        for (int i = 0; i < u->nl; i++) {
            if (!visible(&u->l[i], ttl, now)) continue;
            if (j >= lc.n || lc.v[j] != u->l[i].v) lc.bad = true;
            j++;
        }
        *alive += j;
        if (lc.bad || j != lc.n) {
            if (bad++ < 5)
                fprintf(stderr, "  key %llu list at %lld: %d elements, expected %d\n", (unsigned long long)k,
                        (long long)now, lc.n, j);
        }
        for (uint64_t uk = 0; uk < UNUK; uk++) {
            p = sl_map_get(sm[d], &uk, 8, &len);
            want = visible(&u->m[uk], ttl, now);
            if (p && len == 8) memcpy(&got, p, 8);
            if ((p != NULL) != want || (p && (len != 8 || got != u->m[uk].v))) {
                if (bad++ < 5)
                    fprintf(stderr, "  key %llu map %llu at %lld: got %s, expected %s\n", (unsigned long long)k,
                            (unsigned long long)uk, (long long)now, p ? "a value" : "none",
                            want ? "a value" : "none");
            }
            *alive += want;
        }
    }
    return bad;
}

/* ---- version-1 blocks: a block rewritten without the TTL flags ---- */

static void e_varint(sl_buf_t *b, uint64_t v) {
    do {
        uint8_t x = (uint8_t)(v & 0x7f);
        v >>= 7;
        if (v) x |= 0x80;
        sl_buf_append(b, &x, 1);
    } while (v);
}
static void e_bytes(sl_buf_t *b, const void *p, uint32_t n) {
    e_varint(b, n);
    sl_buf_append(b, p, n);
}

typedef struct v1w {
    sl_buf_t body;
    uint32_t nstates;
    sl_state_kind_t kind;
} v1w_t;
static int v1_state(void *c, const char *name, uint32_t namelen, sl_state_kind_t kind, int ttl, uint32_t n) {
    v1w_t *w = c;
    w->nstates++;
    w->kind = kind;
    e_bytes(&w->body, name, namelen);
    uint8_t k = (uint8_t)kind; /* version 1: the kind alone */
    sl_buf_append(&w->body, &k, 1);
    e_varint(&w->body, n);
    return 0;
}
static int v1_entry(void *c, const uint8_t *key, uint32_t klen, const uint8_t *ns, uint32_t nslen, uint32_t n) {
    v1w_t *w = c;
    e_bytes(&w->body, key, klen);
    e_bytes(&w->body, ns, nslen);
    if (w->kind != SL_STATE_VALUE) e_varint(&w->body, n);
    return 0;
}
static int v1_item(void *c, const uint8_t *uk, uint32_t uklen, const uint8_t *v, uint32_t vlen) {
    v1w_t *w = c;
    if (w->kind == SL_STATE_MAP) e_bytes(&w->body, uk, uklen);
    e_bytes(&w->body, v, vlen);
    return 0;
}

/* The version-1 block holding what block (version 2) holds. */
static void to_v1(const sl_buf_t *block, int kg, sl_buf_t *out) {
    v1w_t w = {{0}, 0, SL_STATE_VALUE};
    static const sl_kbf_visitor_t vis = {v1_state, v1_entry, v1_item};
    char err[256];
    if (sl_kbf_parse(block->p, block->len, MAXP, kg, &vis, &w, err, sizeof err) != 0) abort();
    out->len = 0;
    sl_buf_append(out, "SLKS", 4);
    uint8_t ver = 1;
    sl_buf_append(out, &ver, 1);
    e_varint(out, MAXP);
    e_varint(out, (uint64_t)kg);
    e_varint(out, w.nstates);
    sl_buf_append(out, w.body.p, w.body.len);
    uint8_t sum[8];
    sl_st64(sum, sl_hash_bytes(out->p, out->len));
    sl_buf_append(out, sum, 8);
    sl_buf_free(&w.body);
}

/* One case: items written with ttl1 on backend src_rdb, snapshot at S,
 * restored (as version-2 blocks, or as version-1 blocks when v1) into two
 * backends of kind dst_rdb splitting the key groups at split, declared
 * with ttl2 at R = S + 10.  0 when everything matched. */
static int unit_case(uint64_t seed, bool src_rdb, bool dst_rdb, int64_t ttl1, int64_t ttl2, bool v1) {
    uint64_t rng = seed;
    memset(UM, 0, sizeof UM);
    fx_t *f = fx_new(src_rdb, (sl_kg_range_t){0, MAXP});
    sl_state_t *v, *l, *m;
    declare(f, ttl1, &v, &l, &m);
    if (!v || !l || !m) return -1;
    for (int op = 0; op < 3000; op++) {
        f->now += (int64_t)(sl_mix64(rng++) % 4);
        uint64_t k = sl_mix64(rng++) % UNK, x = sl_mix64(rng++);
        int64_t val = (int64_t)(x >> 8);
        sl_kb_set_key(f->op.kb, &k, sizeof k);
        ukey_t *u = &UM[k];
        switch (x % 3) {
        case 0:
            sl_value_put(v, &val, 8);
            u->val = (uitem_t){true, val, f->now};
            break;
        case 1:
            if (u->nl == UMAXL) break;
            sl_list_add(l, &val, 8);
            u->l[u->nl++] = (uitem_t){true, val, f->now};
            break;
        default: {
            uint64_t uk = (x >> 3) % UNUK;
            sl_map_put(m, &uk, 8, &val, 8);
            u->m[uk] = (uitem_t){true, val, f->now};
        }
        }
    }
    int64_t S = f->now, R = S + 10;
    /* What the snapshot holds: with a TTL, what had not expired at S; and
     * the timestamps the restored items carry after the declaration: an
     * item that had none gets R, one that had keeps it. */
    for (int k = 0; k < UNK; k++) {
        ukey_t *u = &UM[k];
        uitem_t *all[1 + UMAXL + UNUK];
        int n = 0;
        all[n++] = &u->val;
        for (int i = 0; i < u->nl; i++) all[n++] = &u->l[i];
        for (int i = 0; i < UNUK; i++) all[n++] = &u->m[i];
        for (int i = 0; i < n; i++) {
            uitem_t *it = all[i];
            if (it->has && ttl1 && it->ts + ttl1 <= S) it->has = false;
            if (it->has && !ttl1) it->ts = R;
        }
    }
    sl_kb_snapshot_t *snap;
    if (f->op.kb->ops->snapshot(f->op.kb, &snap) != 0) return -1;
    int split[1] = {(int)(sl_mix64(seed) % 100) + 14};
    fx_t *dst[2] = {fx_new(dst_rdb, (sl_kg_range_t){0, split[0]}), fx_new(dst_rdb, (sl_kg_range_t){split[0], MAXP})};
    int rc = 0;
    sl_buf_t b = {0}, old = {0};
    for (int kg = 0; kg < MAXP && rc == 0; kg++) {
        b.len = 0;
        if (sl_kb_snapshot_write(snap, kg, &b) != 0) rc = -1;
        if (v1) to_v1(&b, kg, &old);
        const sl_buf_t *blk = v1 ? &old : &b;
        char err[512];
        fx_t *d = kg < split[0] ? dst[0] : dst[1];
        if (rc == 0 && d->op.kb->ops->restore(d->op.kb, kg, blk->p, blk->len, err, sizeof err) != 0) {
            fprintf(stderr, "  restore of key group %d: %s\n", kg, err);
            rc = -1;
        }
    }
    sl_buf_free(&b);
    sl_buf_free(&old);
    sl_kb_snapshot_release(snap);
    fx_free(f);
    sl_state_t *dv[2], *dl[2], *dm[2];
    for (int d = 0; d < 2 && rc == 0; d++) {
        dst[d]->now = R;
        declare(dst[d], ttl2, &dv[d], &dl[d], &dm[d]);
        if (!dv[d] || !dl[d] || !dm[d]) {
            fprintf(stderr, "  declare: %s\n", sl_op_test_last_error());
            rc = -1;
        }
    }
    /* read at times around the expiries (a read may clean an expired item
     * up: times only go forward) */
    int64_t times[6] = {R, R + 50, R + (ttl2 ? ttl2 - 1 : 1000), R + (ttl2 ? ttl2 : 5000), R + 3 * (ttl2 + 100),
                        INT64_C(1) << 50};
    int alive[6] = {0};
    for (int t = 0; t < 6 && rc == 0; t++) {
        int bad = check_all(dst, split, dv, dl, dm, ttl2, times[t], &alive[t]);
        if (bad) {
            fprintf(stderr, "  case src %s dst %s ttl %lld -> %lld%s: %d mismatches at +%lld\n", src_rdb ? "rdb" : "heap",
                    dst_rdb ? "rdb" : "heap", (long long)ttl1, (long long)ttl2, v1 ? " (v1 blocks)" : "", bad,
                    (long long)(times[t] - R));
            rc = -1;
        }
    }
    /* both sides of each rule were exercised */
    if (rc == 0 && alive[0] < 50) rc = -1;
    if (rc == 0 && ttl2 && alive[5] != 0) rc = -1;
    if (rc == 0 && !ttl2 && alive[5] != alive[0]) rc = -1;
    if (rc == 0 && ttl2 && !ttl1 && (alive[2] != alive[0] || alive[3] != 0)) rc = -1; /* all got R */
    for (int d = 0; d < 2; d++) fx_free(dst[d]);
    return rc;
}

TEST(backends_migrate_items_as_the_reference_says) {
    /* TTL on, off, a longer and a shorter duration; every backend pair */
    const int64_t cases[][2] = {{0, 300}, {400, 0}, {400, 900}, {900, 250}, {0, 0}, {400, 400}};
    int n = 0;
    for (int s = 0; s < 2; s++)
        for (int d = 0; d < 2; d++)
            for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
                int rc = unit_case(0x1234 + 97 * (uint64_t)n++, s, d, cases[c][0], cases[c][1], false);
                if (rc) fprintf(stderr, "  failed: src %d dst %d ttl %lld -> %lld\n", s, d, (long long)cases[c][0],
                                (long long)cases[c][1]);
                CHECK_EQ(rc, 0);
            }
}

/* Version-1 blocks (no TTL flags) restore as before: the declaration says
 * whether the items carry a timestamp. */
TEST(version_1_blocks_still_restore) {
    const int64_t cases[][2] = {{0, 0}, {400, 400}, {300, 700}};
    int n = 0;
    for (int s = 0; s < 2; s++)
        for (int d = 0; d < 2; d++)
            for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
                int rc = unit_case(0x777 + 31 * (uint64_t)n++, s, d, cases[c][0], cases[c][1], true);
                CHECK_EQ(rc, 0);
            }
}

/* A typed state in a version-1 block: whether its rows carry timestamps is
 * what the typed states' record says (the migration's lookup resolves it,
 * as state_schemas.c does); the rewritten block is version 2 with that
 * flag, and a declaration without TTL then strips the timestamps while the
 * rows migrate INT -> BIGINT in the same restore. */
static sl_row_migration_t *TMIG;
static int TMIG_TTL; /* what the "record" says: SL_KBF_TTL_IS_* */
static const struct sl_row_migration *tmig_fn(void *c, const char *name, uint32_t namelen, sl_state_kind_t kind,
                                              int *ttl) {
    if (namelen != 1 || name[0] != 't') return NULL;
    if (*ttl == SL_KBF_TTL_IS_UNKNOWN) *ttl = TMIG_TTL;
    return TMIG;
}

TEST(version_1_typed_block_takes_the_recorded_ttl) {
    sl_schema_t *s1 = sl_schema_parse("v INT NOT NULL", NULL, 0), *s2 = sl_schema_parse("v BIGINT NOT NULL", NULL, 0);
    char why[256];
    CHECK_EQ(sl_row_migration_new(s1, s2, &TMIG, why, sizeof why), 0);
    sl_row_migration_set_prefix(TMIG, SL_TTL_TS_BYTES); /* as state_schemas.c does for a recorded TTL */
    for (int src_rdb = 0; src_rdb < 2; src_rdb++) {
        fx_t *f = fx_new(src_rdb == 1, (sl_kg_range_t){0, MAXP});
        sl_state_t *t = sl_state_value_ttl(&f->rt, "t", cfg(BIG_UNIT));
        sl_row_writer_t w;
        sl_rw_init(&w);
        for (uint64_t k = 0; k < UNK; k++) {
            sl_kb_set_key(f->op.kb, &k, sizeof k);
            sl_rw_begin(&w, s1);
            sl_rw_set_i32(&w, 0, (int32_t)(1000 + k));
            sl_row_t r = sl_rw_row(&w);
            CHECK_EQ(sl_value_put(t, r.data, r.len), 0);
        }
        sl_kb_snapshot_t *snap;
        CHECK_EQ(f->op.kb->ops->snapshot(f->op.kb, &snap), 0);
        fx_t *g = fx_new(false, (sl_kg_range_t){0, MAXP});
        TMIG_TTL = SL_KBF_TTL_IS_YES;
        sl_buf_t b = {0}, old = {0}, mig = {0};
        for (int kg = 0; kg < MAXP; kg++) {
            b.len = 0;
            CHECK_EQ(sl_kb_snapshot_write(snap, kg, &b), 0);
            to_v1(&b, kg, &old);
            char err[512] = "";
            int rc = sl_kbf_migrate(old.p, old.len, MAXP, kg, tmig_fn, NULL, &mig, err, sizeof err);
            if (rc) fprintf(stderr, "  migrate: %s\n", err);
            CHECK_EQ(rc, 0);
            CHECK_EQ(mig.p[4], SL_KB_FORMAT_VERSION);
            rc = g->op.kb->ops->restore(g->op.kb, kg, mig.p, mig.len, err, sizeof err);
            if (rc) fprintf(stderr, "  restore: %s\n", err);
            CHECK_EQ(rc, 0);
        }
        sl_kb_snapshot_release(snap);
        sl_state_t *gt = sl_state_value(&g->rt, "t"); /* TTL turned off */
        CHECK(gt != NULL);
        int good = 0;
        for (uint64_t k = 0; k < UNK; k++) {
            sl_kb_set_key(g->op.kb, &k, sizeof k);
            uint32_t len = 0;
            const void *p = sl_value_get(gt, &len);
            sl_row_t r = {p, len, s2};
            good += p && sl_row_validate(&r) == 0 && sl_row_i64(&r, 0) == (int64_t)(1000 + k);
        }
        CHECK_EQ(good, UNK);
        sl_buf_free(&b);
        sl_buf_free(&old);
        sl_buf_free(&mig);
        sl_rw_free(&w);
        fx_free(g);
        fx_free(f);
    }
    sl_row_migration_free(TMIG);
    sl_schema_unref(s1);
    sl_schema_unref(s2);
}

/* A block's flag is checked: an unknown flag combination is refused. */
TEST(bad_flags_refused) {
    fx_t *f = fx_new(false, (sl_kg_range_t){0, MAXP});
    sl_state_t *v, *l, *m;
    declare(f, 100, &v, &l, &m);
    uint64_t k = 5;
    int kg = sl_kb_set_key(f->op.kb, &k, sizeof k);
    sl_value_put(v, "abcdefgh", 8);
    sl_kb_snapshot_t *snap;
    CHECK_EQ(f->op.kb->ops->snapshot(f->op.kb, &snap), 0);
    sl_buf_t b = {0};
    CHECK_EQ(sl_kb_snapshot_write(snap, kg, &b), 0);
    sl_kb_snapshot_release(snap);
    /* "SLKS", version, max parallelism (2 bytes), key group, 3 states;
     * "l" sorts first: its name at bytes 9-10, its kind byte at 11 */
    CHECK_EQ(b.p[4], SL_KB_FORMAT_VERSION);
    CHECK_EQ(b.p[11], SL_STATE_LIST | SL_KBF_TTL);
    b.p[11] = SL_STATE_LIST | SL_KBF_TTL | SL_KBF_TTL_UNKNOWN;
    sl_st64(b.p + b.len - 8, sl_hash_bytes(b.p, b.len - 8));
    fx_t *g = fx_new(false, (sl_kg_range_t){0, MAXP});
    char err[512] = "";
    CHECK(g->op.kb->ops->restore(g->op.kb, kg, b.p, b.len, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "state kind");
    sl_buf_free(&b);
    fx_free(g);
    fx_free(f);
}

/* ------------------------------------------------------------------ */
/* part 2: a job, savepoints and checkpoints                           */

#define N 4000
#define STEP 10 /* ms of processing time per record id */
#define T0 1000000
#define NKEYS 48
#define BIG INT64_C(1000000000) /* a TTL under which nothing expires in a run */

static _Thread_local int64_t tl_now;
static atomic_llong RESTORE_NOW; /* the clock before a task's first record */
static int64_t thread_clock(void *ctx) { return tl_now ? tl_now : (int64_t)atomic_load(&RESTORE_NOW); }
static int64_t OFFSET;       /* processing time added in this run */
static int64_t FAIL_AT = -1; /* the function fails at this id (once) */
static atomic_int failed;
static atomic_llong processed;
static atomic_llong FIRST_ID; /* the least id processed in this run */

static uint64_t mix(uint64_t x) { return sl_mix64(x + 0x9E3779B97F4A7C15ULL); }
static int64_t key_of(int64_t id) { /* skewed: low keys often, high keys rarely */
    double u = (double)(mix((uint64_t)id) >> 11) * 0x1p-53;
    return (int64_t)(NKEYS * u * u);
}
static int key_fn(void *ctx, const sl_row_t *row, uint8_t *k, int cap) {
    int64_t key = key_of(sl_row_i64(row, 0));
    memcpy(k, &key, 8);
    return 8;
}

/* the run's TTL (0: none) and typed schema version (1: INT, 2: BIGINT) */
static int64_t TTL_RUN;
static int SCHEMA;
static sl_schema_t *TROW, *OUT;

static void set_run(int64_t ttl, int schema) {
    TTL_RUN = ttl;
    SCHEMA = schema;
    sl_schema_unref(TROW);
    TROW = sl_schema_parse(schema == 2 ? "v BIGINT NOT NULL" : "v INT NOT NULL", NULL, 0);
}

typedef struct fn {
    sl_state_t *s[6]; /* byte value, list, map; typed value, list, map */
    sl_row_writer_t w;
} fn_t;

static void *fn_clone(const void *ctx) {
    fn_t *f = calloc(1, sizeof *f);
    sl_rw_init(&f->w);
    return f;
}
static void fn_free(void *ctx) {
    fn_t *f = ctx;
    sl_rw_free(&f->w);
    free(f);
}

static const char *const SNAMES[6] = {"bv", "bl", "bm", "tv", "tl", "tm"};

static int fn_open(void *ctx, sl_rt_t *rt) {
    fn_t *f = ctx;
    tl_now = 0; /* the declarations (and so the migration) see RESTORE_NOW */
    sl_state_ttl_t t = sl_state_ttl(TTL_RUN);
    for (int i = 0; i < 6; i++) {
        int kind = i % 3;
        if (TTL_RUN)
            f->s[i] = kind == 0   ? sl_state_value_ttl(rt, SNAMES[i], t)
                      : kind == 1 ? sl_state_list_ttl(rt, SNAMES[i], t)
                                  : sl_state_map_ttl(rt, SNAMES[i], t);
        else
            f->s[i] = kind == 0   ? sl_state_value(rt, SNAMES[i])
                      : kind == 1 ? sl_state_list(rt, SNAMES[i])
                                  : sl_state_map(rt, SNAMES[i]);
        if (!f->s[i]) return SL_EINVAL;
    }
    return 0;
}

/* A stored item's number: 8 bytes (byte states) or a row of TROW. */
static bool item_val(bool typed, const void *v, uint32_t len, int64_t *out) {
    if (!typed) {
        if (len != 8) return false;
        memcpy(out, v, 8);
        return true;
    }
    sl_row_t r = {v, len, TROW};
    if (sl_row_validate(&r) != 0) return false;
    *out = SCHEMA == 2 ? sl_row_i64(&r, 0) : sl_row_i32(&r, 0);
    return true;
}

typedef struct lsum {
    bool typed, bad;
    int64_t n, sum;
} lsum_t;
static void lsum_cb(void *c, const void *v, uint32_t len) {
    lsum_t *s = c;
    int64_t x;
    if (!item_val(s->typed, v, len, &x)) {
        s->bad = true;
        return;
    }
    s->n++;
    s->sum += x;
}

/* v as an item of a state (typed: a row) into f->w / buf. */
static const void *item_of(fn_t *f, bool typed, int64_t v, uint8_t buf[8], uint32_t *len) {
    if (!typed) {
        memcpy(buf, &v, 8);
        *len = 8;
        return buf;
    }
    sl_rw_begin(&f->w, TROW);
    if (SCHEMA == 2)
        sl_rw_set_i64(&f->w, 0, v);
    else
        sl_rw_set_i32(&f->w, 0, (int32_t)v);
    sl_row_t r = sl_rw_row(&f->w);
    *len = r.len;
    return r.data;
}

#define NF 9 /* id, then per byte/typed: value, list count, list sum, map value */

static int fn_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    fn_t *f = ctx;
    int64_t id = sl_row_i64(&in->row, 0);
    if (id == FAIL_AT && !atomic_exchange(&failed, 1)) return SL_EUSER;
    tl_now = T0 + id * STEP + OFFSET;
    for (long long f0 = atomic_load(&FIRST_ID); id < f0 && !atomic_compare_exchange_weak(&FIRST_ID, &f0, id);) {
    }
    int64_t o[NF];
    o[0] = id;
    int64_t uk = id % 3;
    for (int t = 0; t < 2; t++) {
        bool typed = t == 1;
        sl_state_t *sv = f->s[3 * t], *sl = f->s[3 * t + 1], *sm = f->s[3 * t + 2];
        uint32_t len = 0;
        const void *p = sl_value_get(sv, &len);
        int64_t x = -1;
        if (p && !item_val(typed, p, len, &x)) return SL_EUSER;
        o[1 + 4 * t] = x;
        lsum_t ls = {.typed = typed};
        int n = sl_list_foreach(sl, lsum_cb, &ls);
        if (ls.bad || n != ls.n) return SL_EUSER;
        o[2 + 4 * t] = ls.n;
        o[3 + 4 * t] = ls.sum;
        x = -1;
        p = sl_map_get(sm, &uk, 8, &len);
        if (p && !item_val(typed, p, len, &x)) return SL_EUSER;
        o[4 + 4 * t] = x;
        uint8_t buf[8];
        const void *it;
        if (id % 7 != 1) {
            it = item_of(f, typed, id, buf, &len);
            if (sl_value_put(sv, it, len) != 0) return SL_EUSER;
        }
        it = item_of(f, typed, id + 1, buf, &len);
        if (sl_list_add(sl, it, len) != 0) return SL_EUSER;
        if (id % 5 != 0) {
            it = item_of(f, typed, id + 2, buf, &len);
            if (sl_map_put(sm, &uk, 8, it, len) != 0) return SL_EUSER;
        }
    }
    sl_row_writer_t *w = sl_out_row(out);
    for (int i = 0; i < NF; i++) sl_rw_set_i64(w, i, o[i]);
    sl_emit(out);
    atomic_fetch_add(&processed, 1);
    return 0;
}

/* ---- the reference: the same function on plain C data ---- */

typedef struct mkey {
    bool has_v;
    int64_t v, v_ts;
    int64_t *l, *l_ts;
    int nl, capl;
    bool has_m[3];
    int64_t m[3], m_ts[3];
} mkey_t;

static mkey_t MK[NKEYS];
static int restored_seen, restored_expired;

static void model_reset(void) {
    for (int i = 0; i < NKEYS; i++) {
        free(MK[i].l);
        free(MK[i].l_ts);
    }
    memset(MK, 0, sizeof MK);
}

static bool alive(int64_t ts, int64_t ttl, int64_t now) { return ttl == 0 || ts + ttl > now; }

/* A restore from a run with TTL ttl1 at time S into one with ttl2 at
 * time R: without TTL before, items get R; expired at S under ttl1: gone
 * (the snapshot left them out, or they were never visible again). */
static void model_restore(int64_t ttl1, int64_t S, int64_t R) {
    for (int k = 0; k < NKEYS; k++) {
        mkey_t *m = &MK[k];
        if (m->has_v && ttl1 && m->v_ts + ttl1 <= S) m->has_v = false;
        if (!ttl1) m->v_ts = R;
        int j = 0;
        for (int i = 0; i < m->nl; i++)
            if (!ttl1 || m->l_ts[i] + ttl1 > S) {
                m->l[j] = m->l[i];
                m->l_ts[j++] = ttl1 ? m->l_ts[i] : R;
            }
        m->nl = j;
        for (int u = 0; u < 3; u++) {
            if (m->has_m[u] && ttl1 && m->m_ts[u] + ttl1 <= S) m->has_m[u] = false;
            if (!ttl1) m->m_ts[u] = R;
        }
    }
}

/* ids [from, to) with TTL ttl and processing time offset off; the output
 * of each id into out.  first: count restored values seen / expired. */
static void model_run(int64_t from, int64_t to, int64_t ttl, int64_t off, int64_t (*out)[NF], bool first) {
    static bool counted[NKEYS];
    if (first) memset(counted, 0, sizeof counted);
    for (int64_t id = from; id < to; id++) {
        mkey_t *k = &MK[key_of(id)];
        int64_t now = T0 + id * STEP + off, *o = out[id];
        o[0] = id;
        bool va = k->has_v && alive(k->v_ts, ttl, now);
        if (first && !counted[key_of(id)] && k->has_v) {
            counted[key_of(id)] = true;
            restored_seen += va;
            restored_expired += !va;
        }
        int64_t ls = 0, ln = 0;
        int j = 0;
        for (int i = 0; i < k->nl; i++)
            if (alive(k->l_ts[i], ttl, now)) {
                ln++;
                ls += k->l[i];
                k->l[j] = k->l[i];
                k->l_ts[j++] = k->l_ts[i];
            }
        k->nl = j;
        int64_t uk = id % 3;
        bool ma = k->has_m[uk] && alive(k->m_ts[uk], ttl, now);
        /* byte and typed states hold the same numbers */
        for (int t = 0; t < 2; t++) {
            o[1 + 4 * t] = va ? k->v : -1;
            o[2 + 4 * t] = ln;
            o[3 + 4 * t] = ls;
            o[4 + 4 * t] = ma ? k->m[uk] : -1;
        }
        if (!va) k->has_v = false;
        if (!ma) k->has_m[uk] = false;
        if (id % 7 != 1) k->has_v = true, k->v = id, k->v_ts = now;
        if (k->nl == k->capl) {
            k->capl = k->capl ? 2 * k->capl : 8;
            k->l = realloc(k->l, (size_t)k->capl * sizeof *k->l);
            k->l_ts = realloc(k->l_ts, (size_t)k->capl * sizeof *k->l_ts);
        }
        k->l[k->nl] = id + 1;
        k->l_ts[k->nl++] = now;
        if (id % 5 != 0) k->has_m[uk] = true, k->m[uk] = id + 2, k->m_ts[uk] = now;
    }
}

/* ---- the source: ids in order on one reader; a gate, a pause ---- */

static atomic_llong GATE;     /* ids below it may be emitted */
static int64_t PAUSE_AT = -1; /* waits here until a checkpoint committed */
static txn_collected_t *PAUSE_T;

/* A checkpoint with some of the records before the pause has committed. */
static bool committed(void) {
    pthread_mutex_lock(&PAUSE_T->mu);
    bool c = PAUSE_T->commits > 0 && PAUSE_T->out->n > 0;
    pthread_mutex_unlock(&PAUSE_T->mu);
    return c;
}

static int src_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    *reader = calloc(1, sizeof(int64_t));
    *nsplits = 1;
    return 0;
}
static int src_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    int64_t *next = reader;
    for (int i = 0; i < max; i++) {
        if (*next >= N) {
            sl_src_split_finished(out, 0);
            return SL_SRC_END;
        }
        if (*next >= atomic_load(&GATE) || (*next == PAUSE_AT && !committed())) return i ? SL_SRC_MORE : SL_SRC_IDLE;
        sl_row_writer_t *w = sl_src_row(out);
        sl_rw_set_i64(w, 0, *next);
        sl_src_emit(out, 0, *next);
        (*next)++;
    }
    return SL_SRC_MORE;
}
static void src_destroy_reader(void *reader) { free(reader); }
static void src_destroy(void *ctx) {}
static int src_snapshot(void *reader, int64_t id, void (*put)(void *, const void *, size_t), void *pc) {
    put(pc, reader, 8);
    return 0;
}
static int src_restore(void *reader, const void *state, size_t len, char *err, size_t el) {
    uint32_t blen;
    if (len != 12 || (memcpy(&blen, state, 4), blen != 8)) return SL_EFORMAT;
    memcpy(reader, (const uint8_t *)state + 4, 8);
    return 0;
}
static const sl_source_ops_t src_ops = {.name = "ids",
                                        .create_reader = src_create,
                                        .poll = src_poll,
                                        .destroy_reader = src_destroy_reader,
                                        .destroy = src_destroy,
                                        .snapshot = src_snapshot,
                                        .restore = src_restore};

typedef struct jopt {
    int64_t ttl;
    int schema, p, backend;
    const char *ckpt, *restore, *rdb;
    int64_t ckpt_interval; /* 0: savepoints only */
    bool incremental;      /* RocksDB's own files in checkpoints */
} jopt_t;

static sl_env_t *build(const jopt_t *o, txn_collected_t *sink) {
    set_run(o->ttl, o->schema);
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, o->p);
    sl_env_set_clock(env, thread_clock, NULL);
    sl_env_enable_checkpointing(env, o->ckpt_interval ? o->ckpt_interval : 3600 * 1000, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, o->ckpt);
    sl_env_set_checkpoint_retention(env, SL_CHECKPOINTS_RETAIN_ON_CANCELLATION);
    sl_env_set_restart_none(env);
    if (o->backend == SL_STATE_BACKEND_ROCKSDB) {
        sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);
        sl_env_set_rocksdb_options(env, o->rdb, 4 << 20, 1 << 20);
        if (o->incremental) sl_env_set_incremental_checkpoints(env, true);
    }
    if (o->restore) sl_env_restore_from(env, o->restore);
    sl_source_t src = {&src_ops, NULL, sl_schema_parse("id BIGINT NOT NULL", NULL, 0)};
    sl_stream_t *s = sl_uid(sl_parallelism(sl_from_source(env, src, sl_wm_none(), "ids"), 1), "ids");
    sl_process_fn_t fn = {.open = fn_open, .process = fn_process, .opts = {NULL, fn_clone, fn_free}};
    s = sl_uid(sl_keyed_process(sl_key_by_fn(s, key_fn, NULL), fn, sl_schema_ref(OUT)), "ttl-mig");
    for (int i = 3; i < 6; i++) sl_keyed_state_schema(s, SNAMES[i], TROW);
    sl_uid(sl_sink_to(s, txn_collect_sink(sink), "out"), "sink");
    return env;
}

/* Committed rows of t for ids [from, to) against want: each once, equal. */
static int compare(txn_collected_t *t, int64_t (*want)[NF], int64_t from, int64_t to, int *seen, const char *what) {
    int bad = 0;
    pthread_mutex_lock(&t->mu);
    for (int64_t i = 0; i < t->out->n; i++) {
        sl_row_t r = {t->out->rows[i], t->out->lens[i], OUT};
        int64_t id = sl_row_i64(&r, 0);
        if (id < from || id >= to || seen[id]++) {
            if (bad++ < 5) fprintf(stderr, "  %s: id %lld unexpected or twice\n", what, (long long)id);
            continue;
        }
        for (int j = 0; j < NF; j++)
            if (sl_row_i64(&r, j) != want[id][j] && bad++ < 5)
                fprintf(stderr, "  %s: id %lld field %d: got %lld, expected %lld\n", what, (long long)id, j,
                        (long long)sl_row_i64(&r, j), (long long)want[id][j]);
    }
    pthread_mutex_unlock(&t->mu);
    return bad;
}

static int64_t (*WANT)[NF];
static int *SEEN;

typedef struct run {
    pthread_t th;
    sl_env_t *env;
    int rc;
} run_t;
static void *run_main(void *p) {
    run_t *r = p;
    r->rc = sl_env_execute(r->env, "v1");
    return NULL;
}

/* Version 1 (TTL ttl, schema 1) up to G on backend be at parallelism p,
 * stopped with a savepoint into sp. */
static int v1_savepoint(int64_t ttl, int be, int p, int64_t G, const char *tag, char *sp, size_t cap) {
    char ck[600], rdb[700], dir[700];
    snprintf(ck, sizeof ck, "%s/sp-ck-%s", sl_test_tmpdir(), tag);
    snprintf(rdb, sizeof rdb, "%s-rdb", ck);
    snprintf(dir, sizeof dir, "%s/sp-%s", sl_test_tmpdir(), tag);
    OFFSET = 0;
    atomic_store(&RESTORE_NOW, T0);
    FAIL_AT = PAUSE_AT = -1;
    atomic_store(&GATE, G);
    atomic_store(&processed, 0);
    txn_collected_t *t = txn_collected_new();
    jopt_t o = {ttl, 1, p, be, ck, NULL, rdb, 0, false};
    sl_env_t *env = build(&o, t);
    run_t r = {.env = env};
    pthread_create(&r.th, NULL, run_main, &r);
    int rc = 0;
    for (int i = 0; atomic_load(&processed) < G && i < 30000; i++) {
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
    if (atomic_load(&processed) != G) rc = -1;
    if (rc == 0) rc = sl_env_stop_with_savepoint(env, dir, false, sp, cap);
    if (rc) fprintf(stderr, "  v1: %s\n", sl_env_error(env));
    if (rc) sl_env_cancel(env);
    pthread_join(r.th, NULL);
    memset(SEEN, 0, N * sizeof *SEEN);
    int bad = compare(t, WANT, 0, G, SEEN, "v1");
    if (bad || t->out->n != G) rc = -1;
    sl_env_destroy(env);
    txn_collected_free(t);
    return rc;
}

/* Version 1 stopped with a savepoint at G; version 2 with the TTL
 * toggled (and the typed rows' INT widened to BIGINT) restored at another
 * parallelism on the other backend after processing time jumped. */
TEST(savepoint_toggles_ttl) {
    const int64_t G = 2000;
    /* {ttl v1, ttl v2, jump}: on, off, a duration change */
    const int64_t cases[][3] = {{0, 300, 60}, {BIG, 0, 3 * BIG}, {BIG, 300, 60}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (int dir = 0; dir < 2; dir++) {
            int64_t ttl1 = cases[c][0], ttl2 = cases[c][1], jump = cases[c][2];
            int be1 = dir ? SL_STATE_BACKEND_ROCKSDB : SL_STATE_BACKEND_HASHMAP;
            int be2 = dir ? SL_STATE_BACKEND_HASHMAP : SL_STATE_BACKEND_ROCKSDB;
            int p1 = dir ? 3 : 2, p2 = dir ? 1 : 3;
            char tag[64], sp[4300];
            snprintf(tag, sizeof tag, "c%zu-d%d", c, dir);
            model_reset();
            model_run(0, G, ttl1, 0, WANT, false);
            CHECK_EQ(v1_savepoint(ttl1, be1, p1, G, tag, sp, sizeof sp), 0);
            int64_t first = T0 + G * STEP + jump, R = first - 100;
            /* the savepoint's time: each subtask's last record, before G */
            model_restore(ttl1, T0 + (G - 1) * STEP, R);
            restored_seen = restored_expired = 0;
            model_run(G, N, ttl2, jump, WANT, true);
            fprintf(stderr, "  ttl %lld -> %lld, %s -> %s: first reads of restored values: %d seen, %d expired\n",
                    (long long)ttl1, (long long)ttl2, dir ? "rocksdb" : "heap", dir ? "heap" : "rocksdb",
                    restored_seen, restored_expired);
            CHECK(restored_seen >= 3);
            if (ttl2) CHECK(restored_expired >= 5); /* both sides of the rule */
            char ck[600], rdb[700];
            snprintf(ck, sizeof ck, "%s/v2-%s", sl_test_tmpdir(), tag);
            snprintf(rdb, sizeof rdb, "%s-rdb", ck);
            OFFSET = jump;
            atomic_store(&RESTORE_NOW, R);
            atomic_store(&GATE, N);
            txn_collected_t *t = txn_collected_new();
            jopt_t o = {ttl2, 2, p2, be2, ck, sp, rdb, 0, false};
            sl_env_t *env = build(&o, t);
            int rc = sl_env_execute(env, "v2");
            if (rc) fprintf(stderr, "  v2: %s\n", sl_env_error(env));
            CHECK_EQ(rc, 0);
            memset(SEEN, 0, N * sizeof *SEEN);
            int bad = compare(t, WANT, G, N, SEEN, tag);
            CHECK_EQ(bad, 0);
            CHECK_EQ(t->out->n, N - G);
            sl_env_destroy(env);
            txn_collected_free(t);
        }
}

/* Run 1 (TTL ttl1, parallelism 2) checkpoints and fails after a checkpoint
 * completed; run 2 restores the latest checkpoint at parallelism 3 with the
 * TTL toggled.  The union of committed output = the reference, each id
 * once.  The checkpoint's time is not known to the reference, so run 1
 * keeps everything (no TTL, or one under which nothing expires). */
TEST(checkpoint_failure_restore_toggles_ttl) {
    const int64_t cases[][2] = {{0, 300}, {BIG, 0}};
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++)
        for (int b = 0; b < 3; b++) { /* heap, RocksDB, RocksDB with incremental checkpoints */
            int64_t ttl1 = cases[c][0], ttl2 = cases[c][1];
            int be = b ? SL_STATE_BACKEND_ROCKSDB : SL_STATE_BACKEND_HASHMAP;
            char ck[600], rdb1[700], rdb2[700];
            snprintf(ck, sizeof ck, "%s/restart-%zu-%d", sl_test_tmpdir(), c, b);
            snprintf(rdb1, sizeof rdb1, "%s-rdb1", ck);
            snprintf(rdb2, sizeof rdb2, "%s-rdb2", ck);
            OFFSET = 0;
            atomic_store(&RESTORE_NOW, T0);
            atomic_store(&GATE, N);
            atomic_store(&failed, 0);
            txn_collected_t *t = txn_collected_new();
            PAUSE_AT = 1500;
            PAUSE_T = t;
            FAIL_AT = 2800;
            jopt_t o1 = {ttl1, 1, 2, be, ck, NULL, rdb1, 10, b == 2};
            sl_env_t *env = build(&o1, t);
            CHECK(sl_env_execute(env, "run1") < 0);
            CHECK(atomic_load(&failed));
            CHECK(t->commits > 0);
            sl_env_destroy(env);
            /* where run 2 starts: after the last id run 1 committed */
            int64_t C = 0;
            pthread_mutex_lock(&t->mu);
            for (int64_t i = 0; i < t->out->n; i++) {
                sl_row_t r = {t->out->rows[i], t->out->lens[i], OUT};
                C = SL_MAX(C, sl_row_i64(&r, 0) + 1);
            }
            int64_t after1 = t->out->n;
            pthread_mutex_unlock(&t->mu);
            int64_t R = T0 + C * STEP + 100; /* run 2 starts at or after C */
            PAUSE_AT = -1;
            FAIL_AT = -1;
            atomic_store(&RESTORE_NOW, R);
            atomic_store(&FIRST_ID, INT64_MAX);
            char from[700];
            snprintf(from, sizeof from, "%s/run1", ck);
            jopt_t o2 = {ttl2, 1, 3, be, ck, from, rdb2, 10, b == 2};
            env = build(&o2, t);
            int rc = sl_env_execute(env, "run2");
            if (rc) fprintf(stderr, "  run 2: %s\n", sl_env_error(env));
            CHECK_EQ(rc, 0);
            /* the reference: run 1 up to the checkpoint's position P (the
             * first id run 2 processed), the restore, run 2 from P */
            int64_t P = atomic_load(&FIRST_ID);
            CHECK(P >= C && P < N);
            model_reset();
            model_run(0, P, ttl1, 0, WANT, false);
            model_restore(ttl1, T0 + P * STEP, R);
            model_run(P, N, ttl2, 0, WANT, false);
            memset(SEEN, 0, N * sizeof *SEEN);
            int bad = compare(t, WANT, 0, N, SEEN, "runs 1 and 2");
            CHECK_EQ(bad, 0);
            int64_t gaps = 0;
            for (int64_t id = 0; id < N; id++) gaps += SEEN[id] != 1;
            CHECK_EQ(gaps, 0);
            const char *bn = b == 2 ? "rocksdb incremental" : b ? "rocksdb" : "heap";
            fprintf(stderr, "  ttl %lld -> %lld, %s: run 1 committed %lld rows (up to id %lld), run 2 from id %lld\n",
                    (long long)ttl1, (long long)ttl2, bn, (long long)after1, (long long)C, (long long)P);
            CHECK(after1 > 0 && after1 < N);
            sl_env_destroy(env);
            txn_collected_free(t);
        }
}

int main(void) {
    OUT = sl_schema_parse("id BIGINT NOT NULL, bv BIGINT NOT NULL, bln BIGINT NOT NULL, bls BIGINT NOT NULL, "
                          "bm BIGINT NOT NULL, tv BIGINT NOT NULL, tln BIGINT NOT NULL, tls BIGINT NOT NULL, "
                          "tm BIGINT NOT NULL",
                          NULL, 0);
    WANT = calloc(N, sizeof *WANT);
    SEEN = calloc(N, sizeof *SEEN);
    RUN(backends_migrate_items_as_the_reference_says);
    RUN(version_1_blocks_still_restore);
    RUN(version_1_typed_block_takes_the_recorded_ttl);
    RUN(bad_flags_refused);
    RUN(savepoint_toggles_ttl);
    RUN(checkpoint_failure_restore_toggles_ttl);
    model_reset();
    free(WANT);
    free(SEEN);
    sl_schema_unref(TROW);
    sl_schema_unref(OUT);
    TEST_MAIN_END();
}
