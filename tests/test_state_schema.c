/*
 * test_state_schema.c — typed keyed state and its evolution (issue 11):
 *   - row migration rules against an independent reference, on random
 *     schemas and rows (fields matched by name, added nullable fields NULL,
 *     removed fields dropped, INT -> BIGINT / DOUBLE, BIGINT -> DOUBLE,
 *     VARCHAR <-> BYTES, NOT NULL -> nullable; everything else refused);
 *   - an upgrade: version 1 keeps a value state (n INT, total BIGINT,
 *     tag VARCHAR) and a list state (v INT, w INT NULL) per key, is stopped
 *     with a savepoint; version 2 declares (n BIGINT, total DOUBLE, note
 *     VARCHAR NULL) and (v BIGINT), restores at another parallelism on RocksDB and
 *     continues every key's count and sum exactly; the list's elements come
 *     back migrated;
 *   - incompatible changes (INT -> VARCHAR, a NOT NULL field added,
 *     nullable -> NOT NULL) refused before the job starts (its source never
 *     reads), naming the operator, the state, the field and both types;
 *   - a value that is not a row of the schema fails the task, naming the
 *     state; a typed state takes a TTL (on both backends), and a restore
 *     that adds or removes it (with a schema change in the same restore)
 *     migrates the stored rows (Flink 2.2's TTL migration).
 * The job's source and run helpers: savepoint_util.h.
 */
#include <jansson.h>

#include "checkpoint/state_schemas.h"
#include "sluice/state_query.h"
#pragma GCC diagnostic ignored "-Wunused-function" /* savepoint_util.h's window job is not used here */
#include "savepoint_util.h"
#include "test.h"
#include "types/row_migration.h"

/* ---- row migration against a reference ---- */

static const sl_type_t TYPES[] = {SL_BIGINT, SL_INT, SL_DOUBLE, SL_BOOLEAN, SL_VARCHAR, SL_BYTES, SL_TIMESTAMP};

/* The reference rule, written from the documentation: can a field of
 * (a, an) be read as (b, bn)? */
static bool ref_ok(sl_type_t a, bool an, sl_type_t b, bool bn) {
    if (an && !bn) return false;
    if (a == b) return true;
    if (a == SL_INT && (b == SL_BIGINT || b == SL_DOUBLE)) return true;
    if (a == SL_BIGINT && b == SL_DOUBLE) return true;
    return (a == SL_VARCHAR && b == SL_BYTES) || (a == SL_BYTES && b == SL_VARCHAR);
}

typedef struct fval {
    bool null;
    int64_t i;
    double d;
    char s[16];
    uint32_t sl;
} fval_t;

static void set_val(sl_row_writer_t *w, int f, sl_type_t t, const fval_t *v) {
    if (v->null) return sl_rw_set_null(w, f);
    switch (t) {
    case SL_BIGINT:
    case SL_TIMESTAMP: sl_rw_set_i64(w, f, v->i); break;
    case SL_INT: sl_rw_set_i32(w, f, (int32_t)v->i); break;
    case SL_DOUBLE: sl_rw_set_f64(w, f, v->d); break;
    case SL_BOOLEAN: sl_rw_set_bool(w, f, v->i & 1); break;
    case SL_VARCHAR: sl_rw_set_str(w, f, v->s, v->sl); break;
    case SL_BYTES: sl_rw_set_bytes(w, f, v->s, v->sl); break;
    }
}

TEST(row_migration_matches_the_rules) {
    srand(11);
    int compatible = 0, refused = 0, rows = 0;
    for (int round = 0; round < 400; round++) {
        int nf = 1 + rand() % 6;
        sl_schema_t *from = sl_schema_new(), *to = sl_schema_new();
        sl_type_t ft[8], tt[8];
        bool fn[8], tn[8];
        char names[8][16];
        for (int i = 0; i < nf; i++) {
            snprintf(names[i], sizeof names[i], "f%d", i);
            ft[i] = TYPES[rand() % 7];
            fn[i] = rand() % 2;
            sl_schema_add(from, names[i], ft[i], fn[i]);
        }
        /* to: a shuffled subset with changed types, plus new fields */
        int map[12], nt = 0; /* to field -> from field or -1 */
        bool expect = true;
        for (int i = 0; i < nf; i++) {
            if (rand() % 4 == 0) continue; /* removed */
            map[nt] = i;
            tt[nt] = rand() % 3 ? ft[i] : TYPES[rand() % 7];
            tn[nt] = rand() % 3 ? fn[i] : !fn[i];
            expect = expect && ref_ok(ft[i], fn[i], tt[nt], tn[nt]);
            nt++;
        }
        int added = rand() % 2;
        for (int a = 0; a < added; a++) {
            map[nt] = -1;
            tt[nt] = TYPES[rand() % 7];
            tn[nt] = rand() % 4 != 0;
            expect = expect && tn[nt];
            nt++;
        }
        if (nt == 0) {
            map[nt] = -1, tt[nt] = SL_INT, tn[nt] = true, nt++;
        }
        for (int i = nt - 1; i > 0; i--) { /* shuffle the order */
            int j = rand() % (i + 1);
            int m = map[i];
            map[i] = map[j], map[j] = m;
            sl_type_t t = tt[i];
            tt[i] = tt[j], tt[j] = t;
            bool b = tn[i];
            tn[i] = tn[j], tn[j] = b;
        }
        for (int i = 0; i < nt; i++) {
            char nm[24];
            snprintf(nm, sizeof nm, "%s", map[i] >= 0 ? names[map[i]] : i % 2 ? "new_a" : "new_b");
            if (map[i] < 0 && sl_schema_index(to, nm) >= 0) snprintf(nm, sizeof nm, "new_%d", i);
            sl_schema_add(to, nm, tt[i], tn[i]);
        }
        sl_row_migration_t *m = NULL;
        char why[600] = "";
        int rc = sl_row_migration_new(from, to, &m, why, sizeof why);
        CHECK_EQ(rc == 0, expect);
        if (rc) {
            refused++;
            CHECK_CONTAINS(why, "field '");
        } else {
            compatible++;
            sl_row_writer_t w, o;
            sl_rw_init(&w);
            sl_rw_init(&o);
            for (int r = 0; r < 20; r++, rows++) {
                fval_t v[8];
                sl_rw_begin(&w, from);
                for (int i = 0; i < nf; i++) {
                    memset(&v[i], 0, sizeof v[i]);
                    v[i].null = fn[i] && rand() % 4 == 0;
                    v[i].i = (int64_t)(rand() % 2000001) - 1000000;
                    v[i].d = (double)v[i].i / 8.0;
                    v[i].sl = (uint32_t)(rand() % 12);
                    for (uint32_t c = 0; c < v[i].sl; c++) v[i].s[c] = (char)('a' + rand() % 26);
                    set_val(&w, i, ft[i], &v[i]);
                }
                sl_row_t in = sl_rw_row(&w);
                CHECK_EQ(sl_row_migrate(m, in.data, in.len, &o, why, sizeof why), 0);
                sl_row_t out = sl_rw_row(&o);
                CHECK_EQ(sl_row_validate(&out), 0);
                for (int i = 0; i < nt; i++) {
                    int j = map[i];
                    if (j < 0 || v[j].null) {
                        CHECK(sl_row_is_null(&out, i));
                        continue;
                    }
                    CHECK(!sl_row_is_null(&out, i));
                    const fval_t *x = &v[j];
                    int64_t want_i = ft[j] == SL_INT ? (int32_t)x->i : x->i;
                    double want_d = ft[j] == SL_DOUBLE ? x->d : (double)want_i;
                    uint32_t l;
                    switch (tt[i]) {
                    case SL_BIGINT:
                    case SL_TIMESTAMP: CHECK_EQ(sl_row_i64(&out, i), want_i); break;
                    case SL_INT: CHECK_EQ(sl_row_i32(&out, i), (int32_t)x->i); break;
                    case SL_DOUBLE: CHECK(sl_row_f64(&out, i) == want_d); break;
                    case SL_BOOLEAN: CHECK_EQ(sl_row_bool(&out, i), (bool)(x->i & 1)); break;
                    case SL_VARCHAR:
                    case SL_BYTES: {
                        const uint8_t *b = sl_row_bytes(&out, i, &l);
                        CHECK_EQ(l, x->sl);
                        CHECK(l == 0 || memcmp(b, x->s, l) == 0);
                        break;
                    }
                    }
                }
            }
            /* bytes that are not a row of `from` are refused, not read */
            uint8_t junk[3] = {1, 2, 3};
            CHECK_EQ(sl_row_migrate(m, junk, sizeof junk, &o, why, sizeof why), SL_EFORMAT);
            sl_rw_free(&w);
            sl_rw_free(&o);
            sl_row_migration_free(m);
        }
        sl_schema_unref(from);
        sl_schema_unref(to);
    }
    fprintf(stderr, "  %d compatible changes (%d rows migrated), %d refused\n", compatible, rows, refused);
    CHECK(compatible > 50 && refused > 50);
}

/* ---- the job: a per-key profile in typed state ---- */

enum { V1, V2, V_BAD_TYPE, V_BAD_ADDED, V_BAD_NULLABLE, V_BAD_WRITE, V_TTL };

static const char *profile_ddl(int version) {
    switch (version) {
    case V1:
    case V_BAD_WRITE:
    case V_TTL: return "n INT NOT NULL, total BIGINT NOT NULL, tag VARCHAR NOT NULL";
    case V2: return "n BIGINT NOT NULL, total DOUBLE NOT NULL, note VARCHAR";
    case V_BAD_TYPE: return "n VARCHAR NOT NULL, total BIGINT NOT NULL, tag VARCHAR NOT NULL";
    case V_BAD_ADDED: return "n INT NOT NULL, total BIGINT NOT NULL, tag VARCHAR NOT NULL, rank INT NOT NULL";
    default: return "n INT NOT NULL, total BIGINT NOT NULL, tag VARCHAR NOT NULL"; /* V_BAD_NULLABLE */
    }
}

typedef struct prof_fn {
    int version;
    sl_schema_t *profile_schema, *seen_schema; /* the job's (refs) */
    sl_state_t *profile, *seen;
    sl_row_writer_t w, lw;
} prof_fn_t;

static int VERSION;
static sl_schema_t *PROFILE, *SEEN; /* the current version's declared schemas */

static void *prof_clone(const void *ctx) {
    prof_fn_t *f = calloc(1, sizeof *f);
    f->version = VERSION;
    f->profile_schema = sl_schema_ref(PROFILE);
    f->seen_schema = sl_schema_ref(SEEN);
    sl_rw_init(&f->w);
    sl_rw_init(&f->lw);
    return f;
}

static void prof_free(void *ctx) {
    prof_fn_t *f = ctx;
    sl_rw_free(&f->w);
    sl_rw_free(&f->lw);
    sl_schema_unref(f->profile_schema);
    sl_schema_unref(f->seen_schema);
    free(f);
}

static int prof_open(void *ctx, sl_rt_t *rt) {
    prof_fn_t *f = ctx;
    f->profile = f->version == V_TTL ? sl_state_value_ttl(rt, "profile", sl_state_ttl(60000))
                                     : sl_state_value(rt, "profile");
    f->seen = sl_state_list(rt, "seen");
    return f->profile && f->seen ? 0 : SL_EINVAL;
}

typedef struct sum_ctx {
    int64_t n, sum;
    bool wide;
} sum_ctx_t;

static void sum_seen(void *c, const void *v, uint32_t len) {
    sum_ctx_t *s = c;
    sl_row_t r = {v, len, SEEN};
    s->n++;
    s->sum += s->wide ? sl_row_i64(&r, 0) : sl_row_i32(&r, 0);
}

static int prof_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    prof_fn_t *f = ctx;
    int64_t v = sl_row_i64(&in->row, 1);
    sl_row_t old;
    bool have = sl_value_get_row(f->profile, &old);
    int64_t n = 0, total = 0;
    bool note_null = true;
    if (f->version == V2) {
        if (have) {
            n = sl_row_i64(&old, 0);
            total = (int64_t)sl_row_f64(&old, 1);
            note_null = sl_row_is_null(&old, 2);
        }
        sl_rw_begin(&f->w, f->profile_schema);
        sl_rw_set_i64(&f->w, 0, n + 1);
        sl_rw_set_f64(&f->w, 1, (double)(total + v));
        sl_rw_set_null(&f->w, 2);
    } else {
        if (have) {
            n = sl_row_i32(&old, 0);
            total = sl_row_i64(&old, 1);
        }
        sl_rw_begin(&f->w, f->profile_schema);
        sl_rw_set_i32(&f->w, 0, (int32_t)(n + 1));
        sl_rw_set_i64(&f->w, 1, total + v);
        sl_rw_set_str(&f->w, 2, "v1", 2);
    }
    sl_row_t nr = sl_rw_row(&f->w);
    if (f->version == V_BAD_WRITE) { /* not a row of the schema: a bare integer */
        int64_t x = n + 1;
        if (sl_value_put(f->profile, &x, sizeof x) != 0) return SL_EINVAL;
    } else if (sl_value_put_row(f->profile, &nr) != 0) {
        return SL_EINVAL;
    }
    /* the list holds every value seen; its sum must equal the profile's total */
    sum_ctx_t sc = {0, 0, f->version == V2};
    sl_list_foreach(f->seen, sum_seen, &sc);
    if (sc.n != n || sc.sum != total) {
        fprintf(stderr, "key %lld: the list has %lld values summing to %lld, the profile says %lld and %lld\n",
                (long long)(v % KEYS), (long long)sc.n, (long long)sc.sum, (long long)n, (long long)total);
        return SL_EUSER;
    }
    sl_rw_begin(&f->lw, f->seen_schema);
    if (f->version == V2)
        sl_rw_set_i64(&f->lw, 0, v);
    else
        sl_rw_set_i32(&f->lw, 0, (int32_t)v);
    sl_row_t lr = sl_rw_row(&f->lw);
    if (sl_list_add(f->seen, lr.data, lr.len) != 0) return SL_EINVAL;
    sl_row_writer_t *o = sl_out_row(out);
    sl_rw_set_i64(o, 0, v % KEYS);
    sl_rw_set_i64(o, 1, v);
    sl_rw_set_i64(o, 2, n + 1);
    sl_rw_set_i64(o, 3, total + v);
    sl_rw_set_bool(o, 4, note_null);
    sl_out_set_timestamp(out, in->ts);
    sl_emit(out);
    return 0;
}

static sl_schema_t *OUT;

static sl_env_t *build_prof(int version, int p, int backend, const char *restore, txn_collected_t *sink) {
    VERSION = version;
    sl_schema_unref(PROFILE);
    sl_schema_unref(SEEN);
    PROFILE = sl_schema_parse(profile_ddl(version), NULL, 0);
    /* version 1's list rows have a nullable w (always NULL): version 2 drops
     * it, V_BAD_NULLABLE makes it NOT NULL */
    SEEN = sl_schema_parse(version == V2               ? "v BIGINT NOT NULL"
                           : version == V_BAD_NULLABLE ? "v INT NOT NULL, w INT NOT NULL"
                                                       : "v INT NOT NULL, w INT",
                           NULL, 0);
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, p);
    sl_env_enable_checkpointing(env, 3600 * 1000, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, CK);
    sl_env_set_state_backend(env, (sl_state_backend_kind_t)backend);
    sl_env_set_restart_none(env);
    if (restore) sl_env_restore_from(env, restore);
    sl_source_t src = {&gate_ops, &GS, sl_schema_ref(GS.schema)};
    sl_stream_t *s = sl_uid(sl_from_source(env, src, sl_wm_bounded("ts", 0), "gated"), "source");
    sl_process_fn_t fn = {.open = prof_open, .process = prof_process, .opts = {NULL, prof_clone, prof_free}};
    s = sl_uid(sl_keyed_process(sl_key_by(s, "k"), fn, sl_schema_ref(OUT)), "profiles");
    sl_keyed_state_schema(s, "profile", PROFILE);
    sl_keyed_state_schema(s, "seen", SEEN);
    sl_uid(sl_sink_to(s, txn_collect_sink(sink), "out"), "sink");
    return env;
}

static char SP[4300];
static bool QUERIED; /* the running version 1 answered a query by key with its row's fields */

/* Version 1 (or `version`) up to gate G, stopped with a savepoint (SP). */
static int version_savepoint(int version, int64_t G) {
    txn_collected_t *t = txn_collected_new();
    sl_env_t *env = build_prof(version, 2, SL_STATE_BACKEND_HASHMAP, NULL, t);
    run_t r;
    start(&r, env, G);
    int rc = wait_emitted(G) ? 0 : -1;
    /* the running job's key 3: its profile as a row of its fields */
    char *json = NULL;
    int http = 0;
    int64_t n3 = 0, s3 = 0;
    for (int64_t v = 0; v < G; v++)
        if (v % KEYS == 3) n3++, s3 += v;
    for (int tries = 0; rc == 0 && tries < 200; tries++) { /* until the records before the gate are processed */
        free(json);
        json = NULL;
        if (sl_env_query_state(env, "profiles", "profile", "3", NULL, 5000, &json, &http) == 0 && json) {
            json_t *j = json_loads(json, 0, NULL);
            json_t *val = json_object_get(json_array_get(json_object_get(j, "entries"), 0), "value");
            bool done = json_integer_value(json_object_get(val, "n")) == n3 &&
                        json_integer_value(json_object_get(val, "total")) == s3 &&
                        json_is_string(json_object_get(val, "tag"));
            json_decref(j);
            if (done) {
                QUERIED = true;
                break;
            }
        }
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    if (!QUERIED) fprintf(stderr, "  query answer: %s\n", json ? json : "(none)");
    free(json);
    char dir[700];
    snprintf(dir, sizeof dir, "%s/sp-typed", sl_test_tmpdir());
    if (rc == 0) rc = sl_env_stop_with_savepoint(env, dir, false, SP, sizeof SP);
    if (rc) {
        fprintf(stderr, "  v1: %s\n", sl_env_error(env));
        sl_env_cancel(env);
    }
    finish(&r);
    sl_env_destroy(env);
    txn_collected_free(t);
    return rc;
}

static int v1_savepoint(int64_t G) { return version_savepoint(V1, G); }

TEST(upgrade_migrates_typed_state) {
    const int64_t G = 2100;
    QUERIED = false;
    CHECK_EQ(v1_savepoint(G), 0);
    CHECK(QUERIED);
    txn_collected_t *t = txn_collected_new();
    sl_env_t *env = build_prof(V2, 3, SL_STATE_BACKEND_ROCKSDB, SP, t);
    atomic_store(&GS.gate, N);
    atomic_store(&GS.emitted, 0);
    int rc = sl_env_execute(env, "v2");
    CHECK_STR(sl_env_error(env), "");
    CHECK_EQ(rc, 0);
    sl_env_destroy(env);
    /* version 2 saw the values [G, N); for each key its counts continue
     * from version 1's (1 + how many values below G the key had) and its
     * largest count carries the sum over all N values */
    int64_t cnt_before[KEYS] = {0}, cnt_all[KEYS] = {0}, sum_all[KEYS] = {0};
    for (int64_t v = 0; v < N; v++) {
        if (v < G) cnt_before[v % KEYS]++;
        cnt_all[v % KEYS]++;
        sum_all[v % KEYS] += v;
    }
    char *seen_n = calloc((size_t)KEYS * (N + 1), 1);
    int64_t best_n[KEYS] = {0}, best_total[KEYS] = {0}, rows = 0, restored_note = 0;
    pthread_mutex_lock(&t->mu);
    for (int64_t i = 0; i < t->out->n; i++) {
        sl_row_t r = {t->out->rows[i], t->out->lens[i], OUT};
        int64_t k = sl_row_i64(&r, 0), v = sl_row_i64(&r, 1), n = sl_row_i64(&r, 2), tot = sl_row_i64(&r, 3);
        CHECK(k >= 0 && k < KEYS && v >= G && v < N && n >= 1 && n <= N);
        CHECK(!seen_n[k * (N + 1) + n]); /* every count once */
        seen_n[k * (N + 1) + n] = 1;
        if (n > best_n[k]) best_n[k] = n, best_total[k] = tot;
        if (n == cnt_before[k] + 1) restored_note += sl_row_bool(&r, 4); /* note: NULL after the migration */
        rows++;
    }
    pthread_mutex_unlock(&t->mu);
    CHECK_EQ(rows, N - G);
    for (int k = 0; k < KEYS; k++) {
        for (int64_t n = cnt_before[k] + 1; n <= cnt_all[k]; n++) CHECK(seen_n[k * (N + 1) + n]);
        CHECK_EQ(best_n[k], cnt_all[k]);
        CHECK_EQ(best_total[k], sum_all[k]);
    }
    CHECK_EQ(restored_note, KEYS);
    free(seen_n);
    txn_collected_free(t);
}

/* `sluice state read` prints a typed state's values as objects of its
 * fields: each key's profile and its list of values, against the
 * reference of the values below the gate. */
TEST(state_read_prints_typed_rows) {
    const int64_t G = 1400;
    CHECK_EQ(v1_savepoint(G), 0);
    int64_t cnt[KEYS] = {0}, sum[KEYS] = {0};
    for (int64_t v = 0; v < G; v++) cnt[v % KEYS]++, sum[v % KEYS] += v;
    bool matched[KEYS] = {false};
    char cmd[9000], line[1 << 16];
    snprintf(cmd, sizeof cmd, "'%s' state read '%s' --uid profiles", SLUICE_BIN, SP);
    FILE *f = popen(cmd, "r");
    int profiles = 0, lists = 0;
    while (f && fgets(line, sizeof line, f)) {
        json_error_t je;
        json_t *j = json_loads(line, 0, &je);
        CHECK(j != NULL);
        const char *st = json_string_value(json_object_get(j, "state"));
        json_t *val = json_object_get(j, "value");
        if (st && !strcmp(st, "profile")) {
            profiles++;
            CHECK(json_is_object(val));
            int64_t n = json_integer_value(json_object_get(val, "n")), tot = json_integer_value(json_object_get(val, "total"));
            CHECK_STR(json_string_value(json_object_get(val, "tag")), "v1");
            int k = -1;
            for (int q = 0; q < KEYS; q++)
                if (!matched[q] && cnt[q] == n && sum[q] == tot) k = q;
            CHECK(k >= 0);
            if (k >= 0) matched[k] = true;
        } else if (st && !strcmp(st, "seen")) {
            lists++;
            CHECK(json_is_array(val) && json_array_size(val) > 0);
            json_t *e0 = json_array_get(val, 0);
            CHECK(json_is_object(e0) && json_is_integer(json_object_get(e0, "v")) && json_is_null(json_object_get(e0, "w")));
        }
        json_decref(j);
    }
    CHECK(f && pclose(f) == 0);
    CHECK_EQ(profiles, KEYS);
    CHECK_EQ(lists, KEYS);
}

/* An incompatible change: refused before the job starts, with names. */
static void refused(int version, const char *state, const char *field, const char *was, const char *now) {
    txn_collected_t *t = txn_collected_new();
    sl_env_t *env = build_prof(version, 2, SL_STATE_BACKEND_HASHMAP, SP, t);
    atomic_store(&GS.gate, N);
    atomic_store(&GS.emitted, 0);
    CHECK(sl_env_execute(env, "bad") < 0);
    const char *e = sl_env_error(env);
    fprintf(stderr, "  %s\n", e);
    CHECK_CONTAINS(e, "'profiles'");
    CHECK_CONTAINS(e, state);
    CHECK_CONTAINS(e, field);
    CHECK_CONTAINS(e, was);
    if (now) CHECK_CONTAINS(e, now);
    CHECK_EQ(atomic_load(&GS.emitted), 0); /* nothing ran */
    sl_env_destroy(env);
    txn_collected_free(t);
}

TEST(incompatible_changes_refused_before_start) {
    CHECK_EQ(v1_savepoint(1000), 0);
    refused(V_BAD_TYPE, "state 'profile'", "field 'n'", "INT NOT NULL", "VARCHAR NOT NULL");
    refused(V_BAD_ADDED, "state 'profile'", "field 'rank'", "NOT NULL", NULL);
    refused(V_BAD_NULLABLE, "state 'seen'", "field 'w'", "INT cannot become INT NOT NULL", NULL);
}

TEST(bad_value_fails_the_task) {
    txn_collected_t *t = txn_collected_new();
    sl_env_t *env = build_prof(V_BAD_WRITE, 1, SL_STATE_BACKEND_HASHMAP, NULL, t);
    atomic_store(&GS.gate, N);
    CHECK(sl_env_execute(env, "bad-write") < 0);
    CHECK_CONTAINS(sl_env_error(env), "state 'profile'");
    CHECK_CONTAINS(sl_env_error(env), "not a row of its schema");
    sl_env_destroy(env);
    txn_collected_free(t);
}

/* The savepoint SP restored into `version`, whose "profile" has the other
 * TTL-ness (Flink 2.2's TTL migration; test_state_ttl_migration.c checks
 * its rules), at parallelism 3 on backend be: the job runs to the end, the
 * function checking for every record that the profile and the list agree,
 * and every key's largest count is the number of its values over both
 * versions (the restored profiles came back, with or without their
 * timestamp, and went on). */
static void ttl_migrated(int version, int be) {
    txn_collected_t *t = txn_collected_new();
    sl_env_t *env = build_prof(version, 3, be, SP, t);
    atomic_store(&GS.gate, N);
    atomic_store(&GS.emitted, 0);
    int rc = sl_env_execute(env, "ttl-changed");
    CHECK_STR(sl_env_error(env), "");
    CHECK_EQ(rc, 0);
    int64_t cnt[KEYS] = {0}, best[KEYS] = {0};
    for (int64_t v = 0; v < N; v++) cnt[v % KEYS]++;
    pthread_mutex_lock(&t->mu);
    for (int64_t i = 0; i < t->out->n; i++) {
        sl_row_t r = {t->out->rows[i], t->out->lens[i], OUT};
        int64_t k = sl_row_i64(&r, 0), n = sl_row_i64(&r, 2);
        CHECK(k >= 0 && k < KEYS);
        if (k >= 0 && k < KEYS && n > best[k]) best[k] = n;
    }
    pthread_mutex_unlock(&t->mu);
    for (int k = 0; k < KEYS; k++) CHECK_EQ(best[k], cnt[k]);
    sl_env_destroy(env);
    txn_collected_free(t);
}

/* A typed state takes a TTL (test_state_ttl_typed.c checks its rules):
 * the job with a TTL on the profile runs to the end on both backends, the
 * profile and the list agreeing for every record (the function checks it),
 * every key's counts 1..n once.  A running job's query answers a typed TTL
 * row's fields.  A savepoint restored into a version that removes the TTL
 * (with a schema change in the same restore) or adds one migrates the
 * stored rows (ttl_migrated). */
TEST(typed_state_with_ttl) {
    for (int b = 0; b < 2; b++) {
        txn_collected_t *t = txn_collected_new();
        sl_env_t *env = build_prof(V_TTL, 2, b ? SL_STATE_BACKEND_ROCKSDB : SL_STATE_BACKEND_HASHMAP, NULL, t);
        atomic_store(&GS.gate, N);
        atomic_store(&GS.emitted, 0);
        int rc = sl_env_execute(env, "ttl");
        CHECK_STR(sl_env_error(env), "");
        CHECK_EQ(rc, 0);
        int64_t cnt[KEYS] = {0}, best[KEYS] = {0}, rows = 0;
        for (int64_t v = 0; v < N; v++) cnt[v % KEYS]++;
        pthread_mutex_lock(&t->mu);
        for (int64_t i = 0; i < t->out->n; i++, rows++) {
            sl_row_t r = {t->out->rows[i], t->out->lens[i], OUT};
            int64_t k = sl_row_i64(&r, 0), n = sl_row_i64(&r, 2);
            CHECK(k >= 0 && k < KEYS);
            if (k >= 0 && k < KEYS && n > best[k]) best[k] = n;
        }
        pthread_mutex_unlock(&t->mu);
        CHECK_EQ(rows, N);
        for (int k = 0; k < KEYS; k++) CHECK_EQ(best[k], cnt[k]);
        sl_env_destroy(env);
        txn_collected_free(t);
    }
    /* the running job answers a query by key with the row's fields (the
     * timestamp left out); its savepoint restored into version 2 (the TTL
     * removed and the schema changed in the same restore) on RocksDB, and
     * into version 1 (the TTL removed) on the heap */
    QUERIED = false;
    CHECK_EQ(version_savepoint(V_TTL, 1000), 0);
    CHECK(QUERIED);
    ttl_migrated(V2, SL_STATE_BACKEND_ROCKSDB);
    ttl_migrated(V1, SL_STATE_BACKEND_HASHMAP);
    /* and version 1's savepoint (no TTL) restored into the TTL version */
    CHECK_EQ(v1_savepoint(1000), 0);
    ttl_migrated(V_TTL, SL_STATE_BACKEND_ROCKSDB);
}

/* Declaring a schema on an operator that is not keyed, twice, or empty:
 * reported by name when the job is built. */
TEST(declaration_errors) {
    sl_env_t *env = sl_env_new();
    sl_source_t src = {&gate_ops, &GS, sl_schema_ref(GS.schema)};
    sl_stream_t *s = sl_from_source(env, src, sl_wm_none(), "gated");
    sl_keyed_state_schema(s, "x", GS.schema);
    CHECK_CONTAINS(sl_env_error(env), "not keyed");
    sl_env_destroy(env);
}

int main(void) {
    GS.schema = sl_schema_parse("k BIGINT NOT NULL, v BIGINT NOT NULL, ts TIMESTAMP NOT NULL", NULL, 0);
    OUT = sl_schema_parse("k BIGINT NOT NULL, v BIGINT NOT NULL, n BIGINT NOT NULL, total BIGINT NOT NULL, "
                          "note_null BOOLEAN NOT NULL",
                          NULL, 0);
    snprintf(CK, sizeof CK, "%s/ckpt", sl_test_tmpdir());
    RUN(row_migration_matches_the_rules);
    RUN(upgrade_migrates_typed_state);
    RUN(incompatible_changes_refused_before_start);
    RUN(state_read_prints_typed_rows);
    RUN(bad_value_fails_the_task);
    RUN(typed_state_with_ttl);
    RUN(declaration_errors);
    sl_schema_unref(PROFILE);
    sl_schema_unref(SEEN);
    sl_schema_unref(OUT);
    sl_schema_unref(GS.schema);
    TEST_MAIN_END();
}
