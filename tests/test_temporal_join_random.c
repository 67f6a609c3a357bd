/* test_temporal_join_random.c — the event-time temporal join against a
 * brute-force reference.
 *
 * Random cases: keys, a changelog of versions per key (upserts, deletes,
 * NULL values, out of order within the watermark bound) and probe rows
 * (out of order within the bound) spread over several splits; inner and
 * left outer joins; parallelism 1..4; heap and RocksDB.  The reference
 * joins each probe row (k, t) with the version of k with the largest
 * timestamp <= t, none when that one is a delete.  The job's output is
 * compared as a multiset.  State cleanup: when the job ends, the join's
 * state holds exactly one version per key whose newest version is not a
 * delete, and no probe row.
 *
 * With restores: checkpoints every 20 ms into a directory (retained), the
 * sources pause half-way until a checkpoint completed, a map after the join
 * fails after N output rows (restart none), and a second job restores from
 * the checkpoint at another parallelism; the exactly-once collecting sink's
 * committed output of both runs is exactly the reference.
 *
 * SLUICE_TJ_SEEDS=n runs n random cases per group (default 6). */
#include <stdatomic.h>
#include <time.h>

#include "pipeline_util.h"
#include "sluice/temporal_join.h"
#include "test.h"

#define B 20 /* bounded out-of-orderness of both sources (ms) */

static uint64_t rng_state;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static int64_t rnd_in(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }

/* ---- the case ---- */

typedef struct ver {
    int64_t k, ts, val;
    bool del, val_null;
} ver_t;

typedef struct probe {
    int64_t k, pid, ts;
} probe_t;

typedef struct tcase {
    int keys, splits;
    ver_t *v;
    int nv;
    probe_t *p;
    int np;
    /* per split: indexes into v / p in emission order */
    int **vsplit, *nvsplit, **psplit, *npsplit;
} tcase_t;

/* Times: split-local base times increase; each element is at most B behind
 * the split's newest, so nothing is late for a bounded(B) generator. */
static void gen_case(tcase_t *c, int keys, int splits, int nv, int np) {
    memset(c, 0, sizeof *c);
    c->keys = keys;
    c->splits = splits;
    c->v = calloc((size_t)nv + 1, sizeof *c->v);
    c->p = calloc((size_t)np + 1, sizeof *c->p);
    c->vsplit = calloc((size_t)splits, sizeof *c->vsplit);
    c->psplit = calloc((size_t)splits, sizeof *c->psplit);
    c->nvsplit = calloc((size_t)splits, sizeof *c->nvsplit);
    c->npsplit = calloc((size_t)splits, sizeof *c->npsplit);
    for (int s = 0; s < splits; s++) {
        c->vsplit[s] = calloc((size_t)nv + 1, sizeof(int));
        c->psplit[s] = calloc((size_t)np + 1, sizeof(int));
    }
    int64_t span = (int64_t)(nv + np) * 3 + 50;
    /* versions: key k lives in split k % splits; timestamps unique per key */
    int64_t *base = calloc((size_t)splits, sizeof *base);
    for (int i = 0; i < nv; i++) {
        int k = (int)rnd_in(0, keys - 1), s = k % splits;
        base[s] += rnd_in(0, 2 * span / (nv + 1) + 1);
        int64_t ts = base[s] - rnd_in(0, B);
        bool dup = false;
        for (int j = 0; j < c->nv && !dup; j++) dup = c->v[j].k == k && c->v[j].ts == ts;
        if (dup) continue;
        ver_t *v = &c->v[c->nv];
        v->k = k;
        v->ts = ts;
        v->del = rnd() % 5 == 0;
        v->val_null = !v->del && rnd() % 9 == 0;
        v->val = (int64_t)(rnd() % 1000);
        c->vsplit[s][c->nvsplit[s]++] = c->nv++;
    }
    memset(base, 0, (size_t)splits * sizeof *base);
    for (int i = 0; i < np; i++) {
        int s = (int)rnd_in(0, splits - 1);
        base[s] += rnd_in(0, 2 * span / (np + 1) + 1);
        probe_t *p = &c->p[c->np];
        p->k = rnd_in(0, keys); /* keys == `keys` never has a version */
        p->pid = c->np;
        p->ts = base[s] - rnd_in(0, B) - 10; /* some before every version */
        c->psplit[s][c->npsplit[s]++] = c->np++;
    }
    free(base);
}

static void free_case(tcase_t *c) {
    for (int s = 0; s < c->splits; s++) {
        free(c->vsplit[s]);
        free(c->psplit[s]);
    }
    free(c->vsplit);
    free(c->psplit);
    free(c->nvsplit);
    free(c->npsplit);
    free(c->v);
    free(c->p);
}

/* ---- the reference: quadratic and obvious ---- */

typedef struct line {
    char s[128];
} line_t;

static int cmp_line(const void *a, const void *b) { return strcmp(((const line_t *)a)->s, ((const line_t *)b)->s); }

static void fmt_out(char *buf, size_t cap, int64_t k, int64_t pid, int64_t ts, bool has, bool val_null, int64_t val,
                    bool note_null, const char *note, int64_t vts) {
    char vs[32], ns[48];
    if (!has || val_null)
        snprintf(vs, sizeof vs, "-");
    else
        snprintf(vs, sizeof vs, "%lld", (long long)val);
    snprintf(ns, sizeof ns, "%s", !has || note_null ? "-" : note);
    if (has)
        snprintf(buf, cap, "%lld|%lld|%lld|%s|%s|%lld", (long long)k, (long long)pid, (long long)ts, vs, ns, (long long)vts);
    else
        snprintf(buf, cap, "%lld|%lld|%lld|-|-|-", (long long)k, (long long)pid, (long long)ts);
}

static void note_of(const ver_t *v, char *buf, size_t cap) { snprintf(buf, cap, "n%lld-%lld", (long long)v->k, (long long)v->ts); }

/* Expected output lines (sorted); *kept: versions the state keeps at the end. */
static line_t *reference(const tcase_t *c, bool left, int *n, int64_t *kept) {
    line_t *out = calloc((size_t)c->np + 1, sizeof *out);
    *n = 0;
    for (int i = 0; i < c->np; i++) {
        const probe_t *p = &c->p[i];
        const ver_t *best = NULL;
        for (int j = 0; j < c->nv; j++)
            if (c->v[j].k == p->k && c->v[j].ts <= p->ts && (!best || c->v[j].ts > best->ts)) best = &c->v[j];
        if (best && best->del) best = NULL;
        if (!best && !left) continue;
        char note[48] = "";
        if (best) note_of(best, note, sizeof note);
        fmt_out(out[*n].s, sizeof out[*n].s, p->k, p->pid, p->ts, best != NULL, best && best->val_null,
                best ? best->val : 0, best && best->val % 3 == 0, note, best ? best->ts : 0);
        (*n)++;
    }
    qsort(out, (size_t)*n, sizeof *out, cmp_line);
    *kept = 0;
    for (int k = 0; k < c->keys; k++) {
        const ver_t *last = NULL;
        for (int j = 0; j < c->nv; j++)
            if (c->v[j].k == k && (!last || c->v[j].ts > last->ts)) last = &c->v[j];
        if (last && !last->del) (*kept)++;
    }
    return out;
}

/* ---- scripted sources: the case's rows per split, position in union state ---- */

static atomic_llong commits, emitted_out;
static atomic_int failed;
static int64_t fail_after; /* output rows before the injected failure; < 0: none */
static bool pause_half;     /* run 1 of a restore case: wait for a checkpoint half-way */

typedef struct tsrc {
    const tcase_t *c;
    bool versions;
    sl_schema_t *schema;
} tsrc_t;

typedef struct treader {
    tsrc_t *src;
    int own[16], nown;
    int64_t pos[16];
    bool fin[16];
} treader_t;

static int split_len(const tsrc_t *s, int split) { return s->versions ? s->c->nvsplit[split] : s->c->npsplit[split]; }

static int t_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    tsrc_t *s = ctx;
    treader_t *r = calloc(1, sizeof *r);
    r->src = s;
    for (int j = subtask; j < s->c->splits; j += p) r->own[r->nown++] = j;
    *reader = r;
    *nsplits = r->nown;
    return 0;
}

static void sleep_ms(int ms) {
    struct timespec ts = {0, (long)ms * 1000000L};
    nanosleep(&ts, NULL);
}

static int t_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    treader_t *r = reader;
    tsrc_t *s = r->src;
    int emitted = 0, done = 0;
    for (int i = 0; i < r->nown; i++) {
        int split = r->own[i], len = split_len(s, split);
        for (int k = 0; k < 4 && r->pos[i] < len; k++) {
            if (pause_half && r->pos[i] >= len / 2 && atomic_load(&commits) < 1) break;
            int idx = s->versions ? s->c->vsplit[split][r->pos[i]] : s->c->psplit[split][r->pos[i]];
            sl_row_writer_t *w = sl_src_row(out);
            if (s->versions) {
                const ver_t *v = &s->c->v[idx];
                char note[48];
                note_of(v, note, sizeof note);
                sl_rw_set_i64(w, 0, v->k);
                if (v->val_null)
                    sl_rw_set_null(w, 1);
                else
                    sl_rw_set_i64(w, 1, v->val);
                if (v->val % 3 == 0)
                    sl_rw_set_null(w, 2);
                else
                    sl_rw_set_str(w, 2, note, (uint32_t)strlen(note));
                if (v->del)
                    sl_rw_set_bool(w, 3, true);
                else if (v->ts & 1)
                    sl_rw_set_bool(w, 3, false);
                else
                    sl_rw_set_null(w, 3);
                sl_rw_set_i64(w, 4, v->ts);
            } else {
                const probe_t *p = &s->c->p[idx];
                sl_rw_set_i64(w, 0, p->k);
                sl_rw_set_i64(w, 1, p->pid);
                sl_rw_set_i64(w, 2, p->ts);
            }
            sl_src_emit(out, i, SL_NO_TIMESTAMP);
            r->pos[i]++;
            emitted++;
        }
        if (r->pos[i] >= len && !r->fin[i]) {
            r->fin[i] = true;
            sl_src_split_finished(out, i);
        }
        done += r->fin[i];
    }
    if (done == r->nown && fail_after >= 0 && !atomic_load(&failed)) {
        /* everything emitted before the map's failure came: fail here, once a
         * checkpoint completed (still a user function's failure) */
        if (atomic_load(&commits) < 1) return SL_SRC_IDLE;
        if (!atomic_exchange(&failed, 1)) {
            snprintf(err, el, "injected failure in the source");
            return SL_EUSER;
        }
    }
    if (done == r->nown) return SL_SRC_END;
    if (!emitted) sleep_ms(1);
    return emitted ? SL_SRC_MORE : SL_SRC_IDLE;
}

static int t_snapshot(void *reader, int64_t id, void (*put)(void *, const void *, size_t), void *pc) {
    treader_t *r = reader;
    for (int i = 0; i < r->nown; i++) {
        int64_t e[2] = {r->own[i], r->pos[i]};
        put(pc, e, sizeof e);
    }
    return 0;
}

static int t_restore(void *reader, const void *state, size_t len, char *err, size_t el) {
    treader_t *r = reader;
    const uint8_t *p = state, *end = p + len;
    while (p < end) {
        uint32_t n;
        memcpy(&n, p, 4);
        p += 4;
        if (n % 16 || (size_t)(end - p) < n) return SL_EFORMAT;
        for (uint32_t k = 0; k < n; k += 16) {
            int64_t e[2];
            memcpy(e, p + k, 16);
            for (int i = 0; i < r->nown; i++)
                if (r->own[i] == e[0]) r->pos[i] = e[1];
        }
        p += n;
    }
    return 0;
}

static void t_destroy_reader(void *r) { free(r); }
static void t_destroy(void *ctx) { free(ctx); }

static const sl_source_ops_t t_ops = {.name = "script",
                                      .create_reader = t_create,
                                      .poll = t_poll,
                                      .destroy_reader = t_destroy_reader,
                                      .destroy = t_destroy,
                                      .snapshot = t_snapshot,
                                      .restore = t_restore};

/* ---- the failing map and a commit-counting sink ---- */

static int fail_map(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    if (fail_after >= 0 && atomic_fetch_add(&emitted_out, 1) >= fail_after && atomic_load(&commits) >= 1 &&
        !atomic_exchange(&failed, 1))
        return SL_EUSER;
    sl_rw_copy_row(out, &in->row);
    return 0;
}

static int cs_commit(void *w, int64_t id, char *err, size_t el) {
    int rc = txn_collect_ops.commit(w, id, err, el);
    if (rc == 0) atomic_fetch_add(&commits, 1);
    return rc;
}
static sl_sink_ops_t cs_ops;
static sl_sink_t counting_txn_sink(txn_collected_t *t) {
    cs_ops = txn_collect_ops;
    cs_ops.commit = cs_commit;
    return (sl_sink_t){&cs_ops, t};
}

/* ---- the job ---- */

typedef struct run_cfg {
    int p;
    bool left, rocksdb;
    const char *ckdir;    /* checkpointing into it (retained) */
    const char *restore;  /* restore from it */
    int64_t fail_after;   /* < 0: none */
    bool pause_half;
    int tag;
} run_cfg_t;

typedef struct run_out {
    int rc;
    int64_t versions_end, probes_end, dropped, completed;
} run_out_t;

static run_out_t run_job(const tcase_t *c, const run_cfg_t *rc, txn_collected_t *sink) {
    run_out_t o = {0};
    fail_after = rc->fail_after;
    pause_half = rc->pause_half;
    atomic_store(&commits, 0);
    atomic_store(&emitted_out, 0);
    atomic_store(&failed, 0);
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, rc->p);
    sl_env_set_auto_watermark_interval(env, 0);
    if (rc->rocksdb) {
        char rdb[1024];
        snprintf(rdb, sizeof rdb, "%s/tj-rocksdb-%d", sl_test_tmpdir(), rc->tag);
        sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);
        sl_env_set_rocksdb_options(env, rdb, 8 << 20, 2 << 20);
    }
    if (rc->ckdir) {
        sl_env_enable_checkpointing(env, 20, SL_CHECKPOINT_EXACTLY_ONCE);
        sl_env_set_checkpoint_dir(env, rc->ckdir);
        sl_env_set_checkpoint_retention(env, SL_CHECKPOINTS_RETAIN_ON_CANCELLATION);
        sl_env_set_restart_none(env);
    }
    if (rc->restore && sl_env_restore_from(env, rc->restore) != 0) {
        fprintf(stderr, "  restore_from failed: %s\n", sl_env_error(env));
        o.rc = -1;
        sl_env_destroy(env);
        return o;
    }
    tsrc_t *ps = calloc(1, sizeof *ps), *vs = calloc(1, sizeof *vs);
    ps->c = vs->c = c;
    ps->schema = sl_schema_parse("k BIGINT NOT NULL, pid BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0);
    vs->versions = true;
    vs->schema = sl_schema_parse("k BIGINT NOT NULL, val BIGINT, note VARCHAR, del BOOLEAN, ts BIGINT NOT NULL", NULL, 0);
    sl_stream_t *probe = sl_uid(sl_from_source(env, (sl_source_t){&t_ops, ps, ps->schema}, sl_wm_bounded("ts", B), "probe"),
                                "probe");
    sl_stream_t *vers = sl_uid(sl_from_source(env, (sl_source_t){&t_ops, vs, vs->schema}, sl_wm_bounded("ts", B), "versions"),
                               "versions");
    const char *vf[] = {"val", "note", "ts"};
    sl_temporal_join_stats_t *stats = NULL;
    sl_temporal_join_opts_t jo = {.kind = rc->left ? SL_TEMPORAL_LEFT : SL_TEMPORAL_INNER,
                                  .delete_field = "del",
                                  .version_fields = vf,
                                  .nversion_fields = 3,
                                  .version_prefix = "v_",
                                  .stats_out = &stats};
    sl_stream_t *j = sl_uid(sl_temporal_join(sl_key_by(probe, "k"), sl_key_by(vers, "k"), &jo), "join");
    if (rc->ckdir) j = sl_uid(sl_map(j, fail_map, NULL, sl_schema_ref((sl_schema_t *)sl_stream_schema(j))), "fail");
    sl_uid(sl_sink_to(j, counting_txn_sink(sink), "out"), "out");
    o.rc = sl_env_execute(env, "temporal-join");
    if (o.rc < 0 && rc->fail_after < 0) fprintf(stderr, "  job failed: %s\n", sl_env_error(env));
    o.versions_end = sl_temporal_join_versions_at_end(stats);
    o.probes_end = sl_temporal_join_probes_at_end(stats);
    o.dropped = sl_temporal_join_versions_dropped(stats);
    o.completed = sl_env_checkpoints_completed(env);
    sl_env_destroy(env);
    return o;
}

/* The committed output as sorted lines. */
static line_t *output_lines(txn_collected_t *t, int *n) {
    collected_t *c = t->out;
    line_t *out = calloc((size_t)c->n + 1, sizeof *out);
    sl_schema_t *s = sl_schema_parse("k BIGINT NOT NULL, pid BIGINT NOT NULL, ts BIGINT NOT NULL, v_val BIGINT, "
                                     "v_note VARCHAR, v_ts BIGINT",
                                     NULL, 0);
    for (int64_t i = 0; i < c->n; i++) {
        sl_row_t r = collected_row(c, i, s);
        bool has = !sl_row_is_null(&r, 5);
        char note[64] = "";
        uint32_t nl = 0;
        if (!sl_row_is_null(&r, 4)) {
            const char *p = sl_row_str(&r, 4, &nl);
            snprintf(note, sizeof note, "%.*s", (int)nl, p);
        }
        fmt_out(out[i].s, sizeof out[i].s, sl_row_i64(&r, 0), sl_row_i64(&r, 1), sl_row_i64(&r, 2), has,
                sl_row_is_null(&r, 3), has ? sl_row_i64(&r, 3) : 0, sl_row_is_null(&r, 4), note,
                has ? sl_row_i64(&r, 5) : 0);
    }
    sl_schema_unref(s);
    *n = (int)c->n;
    qsort(out, (size_t)*n, sizeof *out, cmp_line);
    return out;
}

static bool same_lines(const line_t *a, int na, const line_t *b, int nb, const char *desc) {
    int i = 0, j = 0, shown = 0;
    bool ok = na == nb;
    while (i < na || j < nb) {
        int c = i >= na ? 1 : j >= nb ? -1 : strcmp(a[i].s, b[j].s);
        if (c == 0) {
            i++;
            j++;
            continue;
        }
        ok = false;
        if (shown++ < 6) fprintf(stderr, "  %s: %s %s\n", desc, c < 0 ? "unexpected" : "missing", c < 0 ? a[i].s : b[j].s);
        if (c < 0)
            i++;
        else
            j++;
    }
    if (!ok) fprintf(stderr, "  %s: got %d rows, expected %d\n", desc, na, nb);
    return ok;
}

static int nseeds(void) {
    const char *e = getenv("SLUICE_TJ_SEEDS");
    return e ? atoi(e) : 6;
}

static int64_t total_rows, run1_rows, dropped_total;

static void one_case(uint64_t seed, bool restore, int *fails) {
    rng_state = seed * 0x9E3779B97F4A7C15ULL + 1;
    tcase_t c;
    int keys = (int)rnd_in(1, 40), splits = (int)rnd_in(1, 5);
    gen_case(&c, keys, splits, (int)rnd_in(0, 400), (int)rnd_in(1, 600));
    bool left = rnd() % 2, rocksdb = rnd() % 3 == 0;
    int p1 = (int)rnd_in(1, 4), p2 = 1 + (p1 + (int)rnd_in(0, 2)) % 4;
    int nref;
    int64_t kept;
    line_t *ref = reference(&c, left, &nref, &kept);
    char desc[200];
    snprintf(desc, sizeof desc, "seed %llu: %d keys, %d versions, %d probes, %d splits, %s, %s, p=%d",
             (unsigned long long)seed, keys, c.nv, c.np, splits, left ? "left" : "inner", rocksdb ? "rocksdb" : "heap", p1);
    txn_collected_t *sink = txn_collected_new();
    bool ok = true;
    run_out_t o;
    if (!restore) {
        run_cfg_t rc = {.p = p1, .left = left, .rocksdb = rocksdb, .fail_after = -1, .tag = (int)seed};
        o = run_job(&c, &rc, sink);
        ok = o.rc == 0;
    } else {
        char ck[1024], cmd[1200];
        snprintf(ck, sizeof ck, "%s/tj-ck-%llu", sl_test_tmpdir(), (unsigned long long)seed);
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", ck);
        if (system(cmd) != 0) abort();
        run_cfg_t r1 = {.p = p1, .left = left, .rocksdb = rocksdb, .ckdir = ck, .fail_after = rnd_in(0, nref / 2 + 1),
                        .pause_half = true, .tag = (int)seed};
        run_out_t o1 = run_job(&c, &r1, sink);
        run1_rows += sink->out->n;
        dropped_total += o1.dropped;
        if (o1.rc == 0 || o1.completed < 1) {
            fprintf(stderr, "  %s: run 1 should fail after a checkpoint (rc %d, %lld completed)\n", desc, o1.rc,
                    (long long)o1.completed);
            ok = false;
        }
        char ck2[1100], from[1100];
        snprintf(ck2, sizeof ck2, "%s-2", ck);
        snprintf(from, sizeof from, "%s/temporal-join", ck);
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", ck2);
        if (system(cmd) != 0) abort();
        run_cfg_t r2 = {.p = p2, .left = left, .rocksdb = !rocksdb, .ckdir = ck2, .restore = from, .fail_after = -1,
                        .tag = (int)seed + 100000};
        o = run_job(&c, &r2, sink);
        ok = ok && o.rc == 0;
        snprintf(desc + strlen(desc), sizeof desc - strlen(desc), " -> restored at p=%d on %s", p2,
                 !rocksdb ? "rocksdb" : "heap");
    }
    int nout;
    line_t *got = output_lines(sink, &nout);
    total_rows += nout;
    dropped_total += o.dropped;
    ok = same_lines(got, nout, ref, nref, desc) && ok;
    if (o.versions_end != kept || o.probes_end != 0) {
        fprintf(stderr, "  %s: state at the end holds %lld versions (expected %lld) and %lld probe rows (expected 0)\n",
                desc, (long long)o.versions_end, (long long)kept, (long long)o.probes_end);
        ok = false;
    }
    if (!ok) {
        fprintf(stderr, "FAILED %s\n", desc);
        (*fails)++;
    }
    free(got);
    free(ref);
    txn_collected_free(sink);
    free_case(&c);
}

TEST(temporal_join_matches_reference) {
    int fails = 0, n = nseeds();
    total_rows = run1_rows = dropped_total = 0;
    for (int i = 0; i < n; i++) one_case(1000 + (uint64_t)i, false, &fails);
    fprintf(stderr, "  %d cases, %lld output rows, %lld versions dropped by cleanup\n", n, (long long)total_rows,
            (long long)dropped_total);
    CHECK(dropped_total > 0);
    CHECK_EQ(fails, 0);
}

TEST(temporal_join_restores_at_another_parallelism) {
    int fails = 0, n = nseeds();
    total_rows = run1_rows = dropped_total = 0;
    for (int i = 0; i < n; i++) one_case(5000 + (uint64_t)i, true, &fails);
    fprintf(stderr, "  %d cases, %lld output rows, %lld of them committed by the failed first runs, %lld versions "
            "dropped\n", n, (long long)total_rows, (long long)run1_rows, (long long)dropped_total);
    CHECK(run1_rows > 0);
    CHECK_EQ(fails, 0);
}

/* Mistakes are refused by name when the job is built. */
TEST(temporal_join_build_errors) {
    struct {
        const char *del;
        const char *field;
        const char *prefix;
        const char *expect;
    } cases[] = {
        {"nope", "val", "v_", "delete field 'nope'"},
        {"val", "val", "v_", "must be BOOLEAN"},
        {"del", "missing", "v_", "version field 'missing'"},
        {"del", "ts", NULL, "output field 'ts' would appear twice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sl_env_t *env = sl_env_new();
        sl_schema_t *ps = sl_schema_parse("k BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0);
        sl_schema_t *vs = sl_schema_parse("k BIGINT NOT NULL, val BIGINT, del BOOLEAN, ts BIGINT NOT NULL", NULL, 0);
        tsrc_t *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
        sl_stream_t *p = sl_from_source(env, (sl_source_t){&t_ops, a, ps}, sl_wm_bounded("ts", 0), "p");
        sl_stream_t *v = sl_from_source(env, (sl_source_t){&t_ops, b, vs}, sl_wm_bounded("ts", 0), "v");
        const char *vf[] = {cases[i].field};
        sl_temporal_join_opts_t o = {.delete_field = cases[i].del, .version_fields = vf, .nversion_fields = 1,
                                     .version_prefix = cases[i].prefix};
        CHECK(sl_temporal_join(sl_key_by(p, "k"), sl_key_by(v, "k"), &o) == NULL);
        CHECK(sl_env_execute(env, "bad") < 0);
        CHECK_CONTAINS(sl_env_error(env), cases[i].expect);
        sl_env_destroy(env);
    }
    /* keys of different types */
    sl_env_t *env = sl_env_new();
    sl_schema_t *ps = sl_schema_parse("k INT NOT NULL, ts BIGINT NOT NULL", NULL, 0);
    sl_schema_t *vs = sl_schema_parse("k BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0);
    tsrc_t *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    sl_stream_t *p = sl_from_source(env, (sl_source_t){&t_ops, a, ps}, sl_wm_bounded("ts", 0), "p");
    sl_stream_t *v = sl_from_source(env, (sl_source_t){&t_ops, b, vs}, sl_wm_bounded("ts", 0), "v");
    CHECK(sl_temporal_join(sl_key_by(p, "k"), sl_key_by(v, "k"), NULL) == NULL);
    CHECK_CONTAINS(sl_env_error(env), "probe key 'k' is INT but the versions key 'k' is BIGINT");
    sl_env_destroy(env);
    /* rows without event time fail the task, naming the operator and the side */
    rng_state = 77;
    tcase_t c;
    gen_case(&c, 2, 1, 3, 3);
    env = sl_env_new();
    tsrc_t *pa = calloc(1, sizeof *pa), *va = calloc(1, sizeof *va);
    pa->c = va->c = &c;
    va->versions = true;
    pa->schema = sl_schema_parse("k BIGINT NOT NULL, pid BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0);
    va->schema = sl_schema_parse("k BIGINT NOT NULL, val BIGINT, note VARCHAR, del BOOLEAN, ts BIGINT NOT NULL", NULL, 0);
    fail_after = -1;
    pause_half = false;
    p = sl_from_source(env, (sl_source_t){&t_ops, pa, pa->schema}, sl_wm_none(), "p");
    v = sl_from_source(env, (sl_source_t){&t_ops, va, va->schema}, sl_wm_bounded("ts", 0), "v");
    sl_temporal_join_opts_t jo = {.delete_field = "del", .version_prefix = "v_"};
    sl_stream_t *j = sl_temporal_join(sl_key_by(p, "k"), sl_key_by(v, "k"), &jo);
    sl_name(j, "rates-join");
    collected_t *col = collected_new();
    sl_sink_to(j, collect_sink(col), "out");
    CHECK(sl_env_execute(env, "no-time") < 0);
    CHECK_CONTAINS(sl_env_error(env), "rates-join");
    CHECK_CONTAINS(sl_env_error(env), "a probe row has no event timestamp");
    sl_env_destroy(env);
    collected_free(col);
    free_case(&c);
}

int main(void) {
    RUN(temporal_join_build_errors);
    RUN(temporal_join_matches_reference);
    RUN(temporal_join_restores_at_another_parallelism);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", sl_test_tmpdir());
    if (system(cmd) != 0) return 1;
    TEST_MAIN_END();
}
