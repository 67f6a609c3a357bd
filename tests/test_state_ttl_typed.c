/*
 * test_state_ttl_typed.c — typed keyed state (sl_keyed_state_schema) with a
 * TTL (Flink's StateTtlConfig on a POJO/Avro state), against a reference:
 *   - the row accessors see the row without its 8-byte timestamp, writes
 *     put the timestamp in front, a value that is not a row fails by name
 *     (an operator without a job, a manual clock);
 *   - a keyed process function with a typed value state (OnCreateAndWrite),
 *     a typed list state (cleanup every record) and a typed map state
 *     (OnReadAndWrite) over skewed random keys, heap and RocksDB, at
 *     parallelism 1 and 3: every output equals the reference, which applies
 *     the TTL rule to plain C data;
 *   - checkpoints, a failure and a restore at another parallelism (heap and
 *     RocksDB): the union of committed output equals the reference, so the
 *     restored timestamps are the ones written (a restore that reset them
 *     would show items the reference has expired);
 *   - version 1 stopped with a savepoint, version 2 with migrated schemas
 *     (INT -> BIGINT, INT -> DOUBLE, a field added nullable, a field
 *     dropped) restored on RocksDB at another parallelism after processing
 *     time jumped: rows expired by then are never returned, the others come
 *     back migrated with their timestamps;
 *   - `sluice state read` prints the savepoint's typed TTL rows as objects
 *     of their fields;
 *   - declaring the state without a TTL when the savepoint has one
 *     migrates its rows (their timestamps stripped; Flink 2.2's TTL
 *     migration, checked against a reference in test_state_ttl_migration.c):
 *     every row the function reads back is a row of its schema with the tag
 *     of its id.
 * Processing time is a function of the record (each task thread's clock is
 * set from the record before state is touched), so the reference is exact
 * whatever the scheduling.
 */
#include "test.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "common/common.h"
#include "operators/operator.h"
#include "pipeline_util.h"
#include "sluice/sluice.h"
#include "state/state_backend.h"
#include "state/ttl.h"

#define N 6000
#define STEP 10 /* ms of processing time per record id */
#define TTL 300
#define T0 1000000
#define NKEYS 48

/* ------------------------------------------------------------------ */
/* the accessors, without a job                                        */

static int64_t manual_clock(void *ctx) { return *(const int64_t *)ctx; }

TEST(row_accessors_skip_the_timestamp) {
    sl_operator_t op;
    memset(&op, 0, sizeof op);
    op.name = "typed-ttl";
    op.kb = sl_heap_backend_new(128, (sl_kg_range_t){0, 128});
    int64_t now = 5000;
    sl_kb_set_clock(op.kb, manual_clock, &now);
    sl_schema_t *sc = sl_schema_parse("n BIGINT NOT NULL, tag VARCHAR", NULL, 0);
    const char *nm[] = {"v", "l", "m"};
    sl_schema_t *scs[] = {sc, sc, sc};
    sl_op_set_state_schemas(&op, 3, nm, scs);
    sl_rt_t rt = {.op = &op};
    sl_state_t *v = sl_state_value_ttl(&rt, "v", sl_state_ttl(100));
    sl_state_t *l = sl_state_list_ttl(&rt, "l", sl_state_ttl(100));
    sl_state_t *m = sl_state_map_ttl(&rt, "m", sl_state_ttl(100));
    CHECK(v && l && m);
    CHECK(sl_state_schema(v) == sc);
    sl_row_writer_t w;
    sl_rw_init(&w);
    uint64_t rng = 7;
    for (int it = 0; it < 400; it++) {
        uint64_t k = sl_mix64(rng++) % 16;
        sl_kb_set_key(op.kb, &k, sizeof k);
        int64_t x = (int64_t)(sl_mix64(rng++) % 1000);
        sl_rw_begin(&w, sc);
        sl_rw_set_i64(&w, 0, x);
        if (x & 1)
            sl_rw_set_null(&w, 1);
        else
            sl_rw_set_str(&w, 1, "even", 4);
        sl_row_t r = sl_rw_row(&w);
        CHECK_EQ(sl_value_put_row(v, &r), 0);
        CHECK_EQ(sl_list_add(l, r.data, r.len), 0);
        CHECK_EQ(sl_map_put(m, &k, sizeof k, r.data, r.len), 0);
        /* stored: the timestamp, then exactly the row */
        uint32_t sl = 0;
        int sid = -1;
        for (int i = 0; i < op.nstates; i++)
            if (!strcmp(op.states[i]->name, "v")) sid = op.states[i]->sid;
        const uint8_t *raw = op.kb->ops->get(op.kb, sid, "", 0, &sl);
        CHECK(raw && sl == SL_TTL_TS_BYTES + r.len);
        if (raw) {
            CHECK_EQ(sl_ttl_ts(raw), now);
            CHECK(memcmp(raw + SL_TTL_TS_BYTES, r.data, r.len) == 0);
        }
        sl_row_t got;
        CHECK(sl_value_get_row(v, &got));
        CHECK(got.len == r.len && memcmp(got.data, r.data, r.len) == 0 && sl_row_i64(&got, 0) == x);
        uint32_t ml = 0;
        const void *mv = sl_map_get(m, &k, sizeof k, &ml);
        CHECK(mv && ml == r.len && memcmp(mv, r.data, r.len) == 0);
        now += (int64_t)(sl_mix64(rng++) % 60);
    }
    /* expired: never returned */
    now += 100;
    for (uint64_t k = 0; k < 16; k++) {
        sl_kb_set_key(op.kb, &k, sizeof k);
        sl_row_t got;
        CHECK(!sl_value_get_row(v, &got));
        CHECK(sl_map_get(m, &k, sizeof k, NULL) == NULL);
        CHECK_EQ(sl_list_foreach(l, NULL, NULL), 0);
    }
    /* not a row of the schema: refused naming the state (the check sees
     * the user's bytes, not the stored ones) */
    int64_t bare = 42;
    CHECK(sl_value_put(v, &bare, 3) != 0);
    CHECK_CONTAINS(sl_op_test_last_error(), "state 'v'");
    CHECK_CONTAINS(sl_op_test_last_error(), "not a row of its schema");
    CHECK(sl_list_add(l, &bare, 3) != 0);
    CHECK(sl_map_put(m, &bare, 8, &bare, 3) != 0);
    /* reducing / aggregating stay refused for a typed state */
    sl_op_set_state_schemas(&op, 1, (const char *[]){"r"}, scs);
    CHECK(sl_state_reducing_ttl(&rt, "r", 8, NULL, NULL, sl_state_ttl(100)) == NULL);
    CHECK_CONTAINS(sl_op_test_last_error(), "a typed state is a value, list or map state");
    sl_rw_free(&w);
    sl_op_base_free(&op);
    sl_schema_unref(sc);
}

/* ------------------------------------------------------------------ */
/* the job                                                             */

static _Thread_local int64_t tl_now;
static int64_t thread_clock(void *ctx) { return tl_now; }
static int64_t OFFSET;        /* processing time added in this run (version 2: the jump) */
static int64_t FAIL_AT = -1;  /* the function fails at this id (once) */
static atomic_int failed;
static atomic_llong processed;

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

enum { V1, V2, V1_NO_TTL };
static int VERSION;
static sl_schema_t *LAST, *HIST, *BYM, *OUT;

static void set_version(int v) {
    VERSION = v;
    sl_schema_unref(LAST);
    sl_schema_unref(HIST);
    sl_schema_unref(BYM);
    bool two = v == V2;
    LAST = sl_schema_parse(two ? "id BIGINT NOT NULL, tag VARCHAR NOT NULL, note VARCHAR"
                               : "id INT NOT NULL, tag VARCHAR NOT NULL",
                           NULL, 0);
    HIST = sl_schema_parse(two ? "v BIGINT NOT NULL" : "v INT NOT NULL, w INT", NULL, 0);
    BYM = sl_schema_parse(two ? "v DOUBLE NOT NULL" : "v INT NOT NULL", NULL, 0);
}

typedef struct fn {
    sl_state_t *last, *hist, *bym;
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

static int fn_open(void *ctx, sl_rt_t *rt) {
    fn_t *f = ctx;
    sl_state_ttl_t t = sl_state_ttl(TTL), l = sl_state_ttl(TTL), rw = sl_state_ttl(TTL);
    l.cleanup_every_record = true;
    rw.update_type = SL_TTL_UPDATE_ON_READ_AND_WRITE;
    f->last = VERSION == V1_NO_TTL ? sl_state_value(rt, "last") : sl_state_value_ttl(rt, "last", t);
    f->hist = sl_state_list_ttl(rt, "hist", l);
    f->bym = sl_state_map_ttl(rt, "bym", rw);
    return f->last && f->hist && f->bym ? 0 : SL_EINVAL;
}

typedef struct lsum {
    int64_t n, sum;
    bool bad;
} lsum_t;
static void lsum_cb(void *c, const void *v, uint32_t len) {
    lsum_t *s = c;
    sl_row_t r = {v, len, HIST};
    if (sl_row_validate(&r) != 0) {
        s->bad = true;
        return;
    }
    int64_t x = VERSION == V2 ? sl_row_i64(&r, 0) : sl_row_i32(&r, 0);
    if (VERSION != V2 && (x & 1 ? sl_row_is_null(&r, 1) || sl_row_i32(&r, 1) != x : !sl_row_is_null(&r, 1)))
        s->bad = true;
    s->n++;
    s->sum += x;
}

static int fn_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    fn_t *f = ctx;
    int64_t id = sl_row_i64(&in->row, 0);
    if (id == FAIL_AT && !atomic_exchange(&failed, 1)) return SL_EUSER;
    tl_now = T0 + id * STEP + OFFSET;
    bool v2 = VERSION == V2;
    /* the value: id and tag "t<id>" (and version 2's note) */
    sl_row_t r;
    int64_t prev = -1, pnote = 0;
    if (sl_value_get_row(f->last, &r)) {
        if (sl_row_validate(&r) != 0) return SL_EUSER;
        prev = v2 ? sl_row_i64(&r, 0) : sl_row_i32(&r, 0);
        uint32_t tl = 0;
        const char *tag = sl_row_str(&r, 1, &tl);
        char want[32];
        int wl = snprintf(want, sizeof want, "t%lld", (long long)prev);
        if ((int)tl != wl || memcmp(tag, want, tl) != 0) return SL_EUSER;
        pnote = v2 && !sl_row_is_null(&r, 2);
    }
    lsum_t ls = {0, 0, false};
    int n = sl_list_foreach(f->hist, lsum_cb, &ls);
    if (n != ls.n || ls.bad) return SL_EUSER;
    int64_t uk = id % 3, mg = -1;
    uint32_t ml = 0;
    const void *mv = sl_map_get(f->bym, &uk, 8, &ml);
    if (mv) {
        sl_row_t mr = {mv, ml, BYM};
        if (sl_row_validate(&mr) != 0) return SL_EUSER;
        mg = v2 ? (int64_t)sl_row_f64(&mr, 0) : sl_row_i32(&mr, 0);
    }
    char tag[32];
    int tl = snprintf(tag, sizeof tag, "t%lld", (long long)id);
    if (id % 7 != 1) {
        sl_rw_begin(&f->w, LAST);
        if (v2) {
            sl_rw_set_i64(&f->w, 0, id);
            sl_rw_set_str(&f->w, 2, "v2", 2);
        } else {
            sl_rw_set_i32(&f->w, 0, (int32_t)id);
        }
        sl_rw_set_str(&f->w, 1, tag, (uint32_t)tl);
        sl_row_t nr = sl_rw_row(&f->w);
        if (sl_value_put_row(f->last, &nr) != 0) return SL_EUSER;
    }
    sl_rw_begin(&f->w, HIST);
    if (v2) {
        sl_rw_set_i64(&f->w, 0, id);
    } else {
        sl_rw_set_i32(&f->w, 0, (int32_t)id);
        if (id & 1)
            sl_rw_set_i32(&f->w, 1, (int32_t)id);
        else
            sl_rw_set_null(&f->w, 1);
    }
    sl_row_t lr = sl_rw_row(&f->w);
    if (sl_list_add(f->hist, lr.data, lr.len) != 0) return SL_EUSER;
    if (id % 5 != 0) {
        sl_rw_begin(&f->w, BYM);
        if (v2)
            sl_rw_set_f64(&f->w, 0, (double)id);
        else
            sl_rw_set_i32(&f->w, 0, (int32_t)id);
        sl_row_t mr = sl_rw_row(&f->w);
        if (sl_map_put(f->bym, &uk, 8, mr.data, mr.len) != 0) return SL_EUSER;
    }
    sl_row_writer_t *o = sl_out_row(out);
    sl_rw_set_i64(o, 0, id);
    sl_rw_set_i64(o, 1, prev);
    sl_rw_set_i64(o, 2, pnote);
    sl_rw_set_i64(o, 3, ls.n);
    sl_rw_set_i64(o, 4, ls.sum);
    sl_rw_set_i64(o, 5, mg);
    sl_emit(out);
    atomic_fetch_add(&processed, 1);
    return 0;
}

/* ---- the reference: the same function on plain C data ---- */

#define NF 6
typedef struct mkey {
    bool has_v, v_v2, counted;
    int64_t v, v_ts;
    int64_t *l, *l_ts;
    int nl, capl;
    bool has_m[3];
    int64_t m[3], m_ts[3];
} mkey_t;

static mkey_t MK[NKEYS];

static void model_reset(void) {
    for (int i = 0; i < NKEYS; i++) {
        free(MK[i].l);
        free(MK[i].l_ts);
    }
    memset(MK, 0, sizeof MK);
}

static bool alive(int64_t ts, int64_t now) { return ts + TTL > now; }

/* version 2's first read of a key whose value version 1 wrote: seen, or
 * expired by then */
static int restored_seen, restored_expired;

/* ids [from, to) of version v with processing time offset off */
static void model_run(int64_t from, int64_t to, int v, int64_t off, int64_t (*out)[NF]) {
    for (int64_t id = from; id < to; id++) {
        mkey_t *k = &MK[key_of(id)];
        int64_t now = T0 + id * STEP + off, *o = out[id];
        o[0] = id;
        bool va = k->has_v && alive(k->v_ts, now);
        if (v == V2 && k->has_v && !k->v_v2 && !k->counted) {
            k->counted = true;
            restored_seen += va;
            restored_expired += !va;
        }
        o[1] = va ? k->v : -1;
        o[2] = va && k->v_v2;
        int j = 0;
        o[3] = o[4] = 0;
        for (int i = 0; i < k->nl; i++)
            if (alive(k->l_ts[i], now)) {
                o[3]++;
                o[4] += k->l[i];
                k->l[j] = k->l[i];
                k->l_ts[j++] = k->l_ts[i];
            }
        k->nl = j;
        int64_t uk = id % 3;
        bool ma = k->has_m[uk] && alive(k->m_ts[uk], now);
        o[5] = ma ? k->m[uk] : -1;
        if (ma) k->m_ts[uk] = now; /* OnReadAndWrite */
        if (id % 7 != 1) k->has_v = true, k->v = id, k->v_ts = now, k->v_v2 = v == V2;
        if (k->nl == k->capl) {
            k->capl = k->capl ? 2 * k->capl : 8;
            k->l = realloc(k->l, (size_t)k->capl * sizeof *k->l);
            k->l_ts = realloc(k->l_ts, (size_t)k->capl * sizeof *k->l_ts);
        }
        k->l[k->nl] = id;
        k->l_ts[k->nl++] = now;
        if (id % 5 != 0) k->has_m[uk] = true, k->m[uk] = id, k->m_ts[uk] = now;
    }
}

/* ---- the source: ids in order on one reader; a gate, a pause ---- */

static atomic_llong GATE;     /* ids below it may be emitted */
static int64_t PAUSE_AT = -1; /* waits here until a checkpoint committed */
static txn_collected_t *PAUSE_T;

/* A checkpoint with some of the records before the pause has committed
 * (a checkpoint before the first record commits nothing). */
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
    int version, p, backend;
    const char *ckpt, *restore, *rdb;
    int64_t ckpt_interval; /* 0: savepoints only */
} jopt_t;

static sl_env_t *build(const jopt_t *o, txn_collected_t *sink) {
    set_version(o->version);
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
    }
    if (o->restore) sl_env_restore_from(env, o->restore);
    sl_source_t src = {&src_ops, NULL, sl_schema_parse("id BIGINT NOT NULL", NULL, 0)};
    sl_stream_t *s = sl_uid(sl_parallelism(sl_from_source(env, src, sl_wm_none(), "ids"), 1), "ids");
    sl_process_fn_t fn = {.open = fn_open, .process = fn_process, .opts = {NULL, fn_clone, fn_free}};
    s = sl_uid(sl_keyed_process(sl_key_by_fn(s, key_fn, NULL), fn, sl_schema_ref(OUT)), "typed-ttl");
    sl_keyed_state_schema(s, "last", LAST);
    sl_keyed_state_schema(s, "hist", HIST);
    sl_keyed_state_schema(s, "bym", BYM);
    sl_uid(sl_sink_to(s, txn_collect_sink(sink), "out"), "sink");
    return env;
}

/* Committed rows of t for ids [from, to) against want: each once, equal.
 * Marks seen ids in seen (ids outside [from, to) are an error). */
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

static void path(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", sl_test_tmpdir(), name); }

static int64_t (*WANT)[NF];
static int *SEEN;

TEST(typed_ttl_job_matches_reference) {
    model_reset();
    model_run(0, N, V1, 0, WANT);
    int hidden = 0, shown = 0;
    for (int64_t id = 0; id < N; id++) hidden += WANT[id][1] < 0, shown += WANT[id][1] >= 0;
    CHECK(hidden > N / 10 && shown > N / 10); /* both sides of the rule */
    for (int b = 0; b < 2; b++)
        for (int p = 1; p <= 3; p += 2) {
            char ck[600], rdb[700];
            snprintf(ck, sizeof ck, "%s/plain-%d-%d", sl_test_tmpdir(), b, p);
            snprintf(rdb, sizeof rdb, "%s-rdb", ck);
            jopt_t o = {V1, p, b ? SL_STATE_BACKEND_ROCKSDB : SL_STATE_BACKEND_HASHMAP, ck, NULL, rdb, 0};
            OFFSET = 0;
            FAIL_AT = -1;
            PAUSE_AT = -1;
            atomic_store(&GATE, N);
            txn_collected_t *t = txn_collected_new();
            sl_env_t *env = build(&o, t);
            int rc = sl_env_execute(env, "typed-ttl");
            if (rc) fprintf(stderr, "  job: %s\n", sl_env_error(env));
            CHECK_EQ(rc, 0);
            memset(SEEN, 0, N * sizeof *SEEN);
            char what[64];
            snprintf(what, sizeof what, "%s p=%d", b ? "rocksdb" : "heap", p);
            int bad = compare(t, WANT, 0, N, SEEN, what);
            CHECK_EQ(bad, 0);
            CHECK_EQ(t->out->n, N);
            sl_env_destroy(env);
            txn_collected_free(t);
        }
}

/* Run 1 at parallelism 2 checkpoints, fails after a checkpoint completed;
 * run 2 restores the latest at parallelism 3.  Committed output of both =
 * the reference, each id once. */
TEST(checkpoint_failure_restore_other_parallelism) {
    model_reset();
    model_run(0, N, V1, 0, WANT);
    for (int b = 0; b < 2; b++) {
        int be = b ? SL_STATE_BACKEND_ROCKSDB : SL_STATE_BACKEND_HASHMAP;
        char ck[600], rdb1[700], rdb2[700];
        snprintf(ck, sizeof ck, "%s/restart-%d", sl_test_tmpdir(), b);
        snprintf(rdb1, sizeof rdb1, "%s-rdb1", ck);
        snprintf(rdb2, sizeof rdb2, "%s-rdb2", ck);
        OFFSET = 0;
        atomic_store(&GATE, N);
        atomic_store(&failed, 0);
        /* one sink for both runs: run 2's recovery commits what run 1
         * pre-committed for the checkpoint it restores */
        txn_collected_t *t = txn_collected_new();
        PAUSE_AT = 2500;
        PAUSE_T = t;
        FAIL_AT = 4000;
        jopt_t o1 = {V1, 2, be, ck, NULL, rdb1, 10};
        sl_env_t *env = build(&o1, t);
        CHECK(sl_env_execute(env, "run1") < 0);
        CHECK(atomic_load(&failed));
        CHECK(t->commits > 0);
        int64_t after1 = t->out->n;
        sl_env_destroy(env);
        PAUSE_AT = -1;
        FAIL_AT = -1;
        char from[700];
        snprintf(from, sizeof from, "%s/run1", ck); /* the job's checkpoint directory */
        jopt_t o2 = {V1, 3, be, ck, from, rdb2, 10};
        env = build(&o2, t);
        int rc = sl_env_execute(env, "run2");
        if (rc) fprintf(stderr, "  run 2: %s\n", sl_env_error(env));
        CHECK_EQ(rc, 0);
        CHECK(t->recovered > 0);
        memset(SEEN, 0, N * sizeof *SEEN);
        int bad = compare(t, WANT, 0, N, SEEN, "runs 1 and 2");
        CHECK_EQ(bad, 0);
        int64_t gaps = 0;
        for (int64_t id = 0; id < N; id++) gaps += SEEN[id] != 1;
        CHECK_EQ(gaps, 0);
        fprintf(stderr, "  %s: %lld rows committed by run 1, %lld in all\n", b ? "rocksdb" : "heap", (long long)after1,
                (long long)t->out->n);
        CHECK(after1 > 0 && after1 < N); /* the restore did not start from scratch, nor after the end */
        sl_env_destroy(env);
        txn_collected_free(t);
    }
}

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

/* Version 1 at parallelism 2 (heap) up to G, stopped with a savepoint. */
static int v1_savepoint(int64_t G, char *sp, size_t cap) {
    char ck[600], rdb[700], dir[700];
    path(ck, sizeof ck, "sp-ck");
    snprintf(rdb, sizeof rdb, "%s-rdb", ck);
    snprintf(dir, sizeof dir, "%s/sp-typed-ttl", sl_test_tmpdir());
    OFFSET = 0;
    FAIL_AT = PAUSE_AT = -1;
    atomic_store(&GATE, G);
    atomic_store(&processed, 0);
    txn_collected_t *t = txn_collected_new();
    jopt_t o = {V1, 2, SL_STATE_BACKEND_HASHMAP, ck, NULL, rdb, 0};
    sl_env_t *env = build(&o, t);
    run_t r = {.env = env};
    pthread_create(&r.th, NULL, run_main, &r);
    int rc = 0;
    for (int i = 0; rc == 0 && atomic_load(&processed) < G && i < 30000; i++) {
        struct timespec ts = {0, 1000000L};
        nanosleep(&ts, NULL);
    }
    if (rc == 0 && atomic_load(&processed) != G) rc = -1;
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

/* `sluice state read` of the savepoint prints each key's "last" as an
 * object of its fields (the timestamp left out): every row printed is the
 * reference's last value of its key, and at least every key's value still
 * alive at the last record is there (the savepoint leaves out what had
 * expired when it was taken). */
static void check_state_read(const char *sp, int64_t G) {
    bool known[N] = {false};
    int alive_at_end = 0, with_value = 0;
    for (int k = 0; k < NKEYS; k++)
        if (MK[k].has_v) {
            known[MK[k].v] = true;
            with_value++;
            alive_at_end += alive(MK[k].v_ts, T0 + (G - 1) * STEP);
        }
    char cmd[9000], line[1 << 16];
    snprintf(cmd, sizeof cmd, "'%s' state read '%s' --uid typed-ttl --state last", SLUICE_BIN, sp);
    FILE *f = popen(cmd, "r");
    int rows = 0, bad = 0;
    while (f && fgets(line, sizeof line, f)) {
        json_t *j = json_loads(line, 0, NULL);
        json_t *val = json_object_get(j, "value");
        json_int_t id = json_integer_value(json_object_get(val, "id"));
        char want[32];
        snprintf(want, sizeof want, "t%lld", (long long)id);
        const char *tag = json_string_value(json_object_get(val, "tag"));
        if (!json_is_object(val) || id < 0 || id >= G || !known[id] || !tag || strcmp(tag, want) != 0) {
            if (bad++ < 3) fprintf(stderr, "  state read: unexpected %s", line);
        }
        rows++;
        json_decref(j);
    }
    CHECK(f && pclose(f) == 0);
    CHECK_EQ(bad, 0);
    CHECK(rows >= alive_at_end && rows <= with_value);
    CHECK(alive_at_end > 0);
}

TEST(savepoint_migration_after_expiry) {
    const int64_t G = 3000, JUMP = 60; /* rows older than TTL - JUMP ms at the savepoint are gone */
    static char sp[4300];
    model_reset();
    model_run(0, G, V1, 0, WANT);
    CHECK_EQ(v1_savepoint(G, sp, sizeof sp), 0);
    check_state_read(sp, G);
    /* the case exercises both sides: restored rows seen and restored rows expired */
    restored_seen = restored_expired = 0;
    model_run(G, N, V2, JUMP, WANT);
    fprintf(stderr, "  version 2's first reads: %d restored values seen, %d expired\n", restored_seen,
            restored_expired);
    CHECK(restored_seen >= 3 && restored_expired >= 10);
    for (int b = 0; b < 2; b++) {
        char ck[600], rdb[700];
        snprintf(ck, sizeof ck, "%s/v2-%d", sl_test_tmpdir(), b);
        snprintf(rdb, sizeof rdb, "%s-rdb", ck);
        OFFSET = JUMP;
        atomic_store(&GATE, N);
        txn_collected_t *t = txn_collected_new();
        jopt_t o = {V2, b ? 3 : 1, b ? SL_STATE_BACKEND_ROCKSDB : SL_STATE_BACKEND_HASHMAP, ck, sp, rdb, 0};
        sl_env_t *env = build(&o, t);
        int rc = sl_env_execute(env, "v2");
        if (rc) fprintf(stderr, "  v2: %s\n", sl_env_error(env));
        CHECK_EQ(rc, 0);
        memset(SEEN, 0, N * sizeof *SEEN);
        int bad = compare(t, WANT, G, N, SEEN, b ? "v2 rocksdb p=3" : "v2 heap p=1");
        CHECK_EQ(bad, 0);
        CHECK_EQ(t->out->n, N - G);
        sl_env_destroy(env);
        txn_collected_free(t);
    }
    /* version 1 again, but "last" without its TTL: its rows lose their
     * timestamp (a row still carrying it would fail the function's checks),
     * and the job runs to the end; processing time jumped by 10 TTLs */
    model_reset();
    model_run(0, G, V1, 0, WANT);
    char ck[600];
    path(ck, sizeof ck, "v1-nottl");
    txn_collected_t *t = txn_collected_new();
    jopt_t o = {V1_NO_TTL, 2, SL_STATE_BACKEND_HASHMAP, ck, sp, ck, 0};
    OFFSET = 10 * TTL;
    atomic_store(&GATE, N);
    sl_env_t *env = build(&o, t);
    int rc = sl_env_execute(env, "no-ttl");
    CHECK_STR(sl_env_error(env), "");
    CHECK_EQ(rc, 0);
    CHECK_EQ(t->out->n, N - G);
    /* without the TTL the restored values never expire: every key whose
     * value was alive when version 1 ended shows it at its first record */
    int64_t first[NKEYS], prev[NKEYS];
    for (int k = 0; k < NKEYS; k++) first[k] = INT64_MAX, prev[k] = -2;
    pthread_mutex_lock(&t->mu);
    for (int64_t i = 0; i < t->out->n; i++) {
        sl_row_t r = {t->out->rows[i], t->out->lens[i], OUT};
        int64_t id = sl_row_i64(&r, 0), k = key_of(id);
        if (id < first[k]) first[k] = id, prev[k] = sl_row_i64(&r, 1);
    }
    pthread_mutex_unlock(&t->mu);
    int kept = 0;
    for (int k = 0; k < NKEYS; k++)
        if (MK[k].has_v && alive(MK[k].v_ts, T0 + (G - 1) * STEP) && first[k] != INT64_MAX) {
            CHECK_EQ(prev[k], MK[k].v);
            kept++;
        }
    CHECK(kept >= 3);
    sl_env_destroy(env);
    txn_collected_free(t);
}

int main(void) {
    OUT = sl_schema_parse("id BIGINT NOT NULL, prev BIGINT NOT NULL, pnote BIGINT NOT NULL, nlist BIGINT NOT NULL, "
                          "lsum BIGINT NOT NULL, mg BIGINT NOT NULL",
                          NULL, 0);
    WANT = calloc(N, sizeof *WANT);
    SEEN = calloc(N, sizeof *SEEN);
    RUN(row_accessors_skip_the_timestamp);
    RUN(typed_ttl_job_matches_reference);
    RUN(checkpoint_failure_restore_other_parallelism);
    RUN(savepoint_migration_after_expiry);
    model_reset();
    free(WANT);
    free(SEEN);
    sl_schema_unref(LAST);
    sl_schema_unref(HIST);
    sl_schema_unref(BYM);
    sl_schema_unref(OUT);
    TEST_MAIN_END();
}
