/* test_broadcast_state.c — broadcast state against a brute-force reference.
 *
 * A random script interleaves card transactions with rule changes: set the
 * threshold of a category (card mod C), or delete it.  One scripted source
 * (one split) emits the script; a filter sends transactions keyed by card
 * to input 1 and rules broadcast to input 2 of the broadcast process
 * operator (parallelism P).  The function keeps a running sum per card in
 * keyed state and alerts when it exceeds the card's category threshold
 * (broadcast state "thresholds"); a rule change counts changes per category
 * (broadcast state "changes") and, through apply_to_keyed_state, emits and
 * clears the sums of the category's cards on this subtask.
 *
 * "Arrival" is made deterministic: the source holds the next element back
 * whenever the script switches between transactions and rules until every
 * element emitted so far has been processed (each rule by all P subtasks),
 * so every subtask sees the script's order and a rule takes effect for
 * every key from its position on.  The reference runs the script
 * sequentially.  Heap and RocksDB; parallelism 1..4; with checkpoints, a
 * failure after N transactions and a restore at another parallelism (and
 * the other backend), where the committed output of both runs must equal
 * the reference exactly.  Also: build-time refusals by name, the read-only
 * view in process_element, and an unknown state name at run time.
 *
 * SLUICE_BCAST_SEEDS=n runs n random cases per group (default 6). */
#include <stdatomic.h>
#include <time.h>

#include "pipeline_util.h"
#include "sluice/broadcast.h"
#include "test.h"

static uint64_t rng_state;
static uint64_t rnd(void) {
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}
static int64_t rnd_in(int64_t lo, int64_t hi) { return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1)); }

enum { EV_TXN = 0, EV_SET = 1, EV_DEL = 2 };

typedef struct ev {
    int kind;
    int64_t card, amount, cat, thr;
} ev_t;

typedef struct bcase {
    int ncat;
    ev_t *ev;
    int n;
} bcase_t;

static void gen_case(bcase_t *c, int cards, int ncat, int n) {
    c->ncat = ncat;
    c->ev = calloc((size_t)n + 1, sizeof *c->ev);
    c->n = n;
    int rule_every = (int)rnd_in(3, 40);
    for (int i = 0; i < n; i++) {
        ev_t *e = &c->ev[i];
        if (rnd() % (uint64_t)rule_every == 0) {
            e->kind = rnd() % 4 == 0 ? EV_DEL : EV_SET;
            e->cat = rnd_in(0, ncat - 1);
            e->thr = rnd_in(0, 300);
        } else {
            e->kind = EV_TXN;
            e->card = rnd_in(0, cards - 1);
            e->amount = rnd_in(1, 100);
        }
    }
}

/* ---- the reference ---- */

typedef struct line {
    char s[96];
} line_t;

static int cmp_line(const void *a, const void *b) { return strcmp(((const line_t *)a)->s, ((const line_t *)b)->s); }

static void fmt(line_t *l, int64_t type, int64_t card, int64_t a, int64_t b, int64_t seq) {
    snprintf(l->s, sizeof l->s, "%lld|%lld|%lld|%lld|%lld", (long long)type, (long long)card, (long long)a, (long long)b,
             (long long)seq);
}

static line_t *reference(const bcase_t *c, int cards, int *nout) {
    int64_t *sum = calloc((size_t)cards, sizeof *sum);
    bool *has_sum = calloc((size_t)cards, sizeof *has_sum);
    int64_t *thr = calloc((size_t)c->ncat, sizeof *thr);
    bool *has_thr = calloc((size_t)c->ncat, sizeof *has_thr);
    int64_t *changes = calloc((size_t)c->ncat, sizeof *changes);
    line_t *out = NULL;
    int n = 0, cap = 0;
    for (int i = 0; i < c->n; i++) {
        const ev_t *e = &c->ev[i];
        if (n + cards + 1 > cap) {
            cap = (n + cards + 1) * 2;
            out = realloc(out, (size_t)cap * sizeof *out);
        }
        if (e->kind == EV_TXN) {
            sum[e->card] += e->amount;
            has_sum[e->card] = true;
            int64_t cat = e->card % c->ncat;
            if (has_thr[cat] && sum[e->card] > thr[cat]) fmt(&out[n++], 0, e->card, sum[e->card], thr[cat], i);
        } else {
            if (e->kind == EV_SET) {
                thr[e->cat] = e->thr;
                has_thr[e->cat] = true;
            } else {
                has_thr[e->cat] = false;
            }
            changes[e->cat]++;
            for (int k = 0; k < cards; k++)
                if (has_sum[k] && k % c->ncat == e->cat) {
                    fmt(&out[n++], 1, k, sum[k], changes[e->cat], i);
                    sum[k] = 0;
                    has_sum[k] = false;
                }
        }
    }
    free(sum);
    free(has_sum);
    free(thr);
    free(has_thr);
    free(changes);
    qsort(out, (size_t)n, sizeof *out, cmp_line);
    *nout = n;
    return out;
}

/* ---- the script source: one split, gated at switches ---- */

static atomic_llong done, commits, txns_seen;
static atomic_int failed;
static int64_t fail_after;  /* transactions before the injected failure; < 0: none */
static bool pause_half;
static int bcast_p;         /* parallelism of the broadcast operator in this run */

typedef struct bsrc {
    const bcase_t *c;
    sl_schema_t *schema;
} bsrc_t;

typedef struct breader {
    bsrc_t *src;
    bool owns;
    int64_t pos, expected; /* expected: value of `done` once all emitted are processed */
    int last_class;        /* -1: nothing emitted in this run */
    int64_t waiting_since; /* ms of the wall clock, 0: not waiting at a switch */
} breader_t;

static int b_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    breader_t *r = calloc(1, sizeof *r);
    r->src = ctx;
    r->owns = subtask == 0;
    r->last_class = -1;
    *reader = r;
    *nsplits = r->owns ? 1 : 0;
    return 0;
}

static void sleep_us(int us) {
    struct timespec ts = {0, (long)us * 1000L};
    nanosleep(&ts, NULL);
}

static int b_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    breader_t *r = reader;
    if (!r->owns) return SL_SRC_END;
    const bcase_t *c = r->src->c;
    int emitted = 0;
    while (emitted < max && r->pos < c->n) {
        if (pause_half && r->pos >= c->n / 2 && atomic_load(&commits) < 1) break;
        const ev_t *e = &c->ev[r->pos];
        int cls = e->kind == EV_TXN ? 0 : 1;
        if (r->last_class >= 0 && cls != r->last_class && atomic_load(&done) != r->expected) {
            /* a lost or uncounted element would hang the test: fail instead */
            int64_t now = sl_now_ms();
            if (!r->waiting_since) r->waiting_since = now;
            if (now - r->waiting_since > 20000) {
                snprintf(err, el, "script source: elements before position %lld were not all processed (%lld of %lld)",
                         (long long)r->pos, (long long)atomic_load(&done), (long long)r->expected);
                return SL_EINVAL;
            }
            break;
        }
        r->waiting_since = 0;
        sl_row_writer_t *w = sl_src_row(out);
        sl_rw_set_i64(w, 0, e->kind);
        sl_rw_set_i64(w, 1, e->card);
        sl_rw_set_i64(w, 2, e->amount);
        sl_rw_set_i64(w, 3, e->cat);
        sl_rw_set_i64(w, 4, e->thr);
        sl_rw_set_i64(w, 5, r->pos);
        sl_src_emit(out, 0, SL_NO_TIMESTAMP);
        r->expected += cls ? bcast_p : 1;
        r->last_class = cls;
        r->pos++;
        emitted++;
    }
    if (r->pos >= c->n) {
        if (fail_after >= 0 && !atomic_load(&failed)) {
            if (atomic_load(&commits) < 1) return SL_SRC_IDLE;
            if (!atomic_exchange(&failed, 1)) {
                snprintf(err, el, "injected failure in the source");
                return SL_EUSER;
            }
        }
        sl_src_split_finished(out, 0);
        return SL_SRC_END;
    }
    if (!emitted) sleep_us(200);
    return emitted ? SL_SRC_MORE : SL_SRC_IDLE;
}

static int b_snapshot(void *reader, int64_t id, void (*put)(void *, const void *, size_t), void *pc) {
    breader_t *r = reader;
    if (r->owns) put(pc, &r->pos, sizeof r->pos);
    return 0;
}

static int b_restore(void *reader, const void *state, size_t len, char *err, size_t el) {
    breader_t *r = reader;
    const uint8_t *p = state, *end = p + len;
    while (p < end) {
        uint32_t n;
        memcpy(&n, p, 4);
        p += 4;
        if (n == 8 && r->owns) memcpy(&r->pos, p, 8);
        p += n;
    }
    return 0;
}

static void b_destroy_reader(void *r) { free(r); }
static void b_destroy(void *ctx) { free(ctx); }

static const sl_source_ops_t b_ops = {.name = "script",
                                      .create_reader = b_create,
                                      .poll = b_poll,
                                      .destroy_reader = b_destroy_reader,
                                      .destroy = b_destroy,
                                      .snapshot = b_snapshot,
                                      .restore = b_restore};

static int is_txn(void *ctx, const sl_record_t *in) { return sl_row_i64(&in->row, 0) == EV_TXN; }
static int is_rule(void *ctx, const sl_record_t *in) { return sl_row_i64(&in->row, 0) != EV_TXN; }

/* ---- the broadcast process function ---- */

/* Handles only, so that the context may also be shared by every subtask
 * (no ctx_clone): the handles one subtask's open() stores are then used by
 * all, and must reach each subtask's own state.  Atomics: every open()
 * stores them. */
typedef struct fraud_fn {
    int ncat;
    _Atomic(sl_state_t *) sum;
    _Atomic(sl_bstate_t *) thr, changes;
} fraud_fn_t;

typedef struct reset_ctx { /* what reset_card needs during apply_to_keyed_state */
    int ncat;
    sl_collector_t *out;
    int64_t cat, nchanges, seq;
} reset_ctx_t;

static void *ff_clone(const void *ctx) {
    const fraud_fn_t *proto = ctx;
    fraud_fn_t *f = calloc(1, sizeof *f);
    f->ncat = proto->ncat;
    return f;
}
static void ff_free(void *ctx) { free(ctx); }

static int ff_open(void *ctx, sl_rt_t *rt) {
    fraud_fn_t *f = ctx;
    sl_state_t *sum = sl_state_value(rt, "sum");
    sl_bstate_t *thr = sl_bstate_get_state(rt, "thresholds"), *changes = sl_bstate_get_state(rt, "changes");
    atomic_store(&f->sum, sum);
    atomic_store(&f->thr, thr);
    atomic_store(&f->changes, changes);
    return sum && thr && changes ? 0 : SL_EINVAL;
}

static void emit5(sl_collector_t *out, int64_t type, int64_t card, int64_t a, int64_t b, int64_t seq) {
    sl_row_writer_t *w = sl_out_row(out);
    sl_rw_set_i64(w, 0, type);
    sl_rw_set_i64(w, 1, card);
    sl_rw_set_i64(w, 2, a);
    sl_rw_set_i64(w, 3, b);
    sl_rw_set_i64(w, 4, seq);
    sl_emit(out);
}

static int ff_element(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    fraud_fn_t *f = ctx;
    if (fail_after >= 0 && atomic_fetch_add(&txns_seen, 1) >= fail_after && atomic_load(&commits) >= 1 &&
        !atomic_exchange(&failed, 1))
        return SL_EUSER;
    int64_t card = sl_row_i64(&in->row, 1), amount = sl_row_i64(&in->row, 2), seq = sl_row_i64(&in->row, 5);
    uint32_t len;
    sl_state_t *sum = atomic_load(&f->sum);
    const int64_t *old = sl_value_get(sum, &len);
    int64_t s = (old ? *old : 0) + amount;
    sl_value_put(sum, &s, sizeof s);
    int64_t cat = card % f->ncat;
    const int64_t *thr = sl_bstate_get(atomic_load(&f->thr), &cat, sizeof cat, &len);
    if (thr && len == 8 && s > *thr) emit5(out, 0, card, s, *thr, seq);
    atomic_fetch_add(&done, 1);
    return 0;
}

static int reset_card(void *c, const uint8_t *key, uint32_t keylen, sl_state_t *st) {
    reset_ctx_t *f = c;
    int64_t card;
    if (keylen != 8) return SL_EINVAL;
    memcpy(&card, key, 8);
    if (card % f->ncat != f->cat) return 0;
    uint32_t len;
    const int64_t *s = sl_value_get(st, &len);
    if (!s) return SL_EINVAL; /* visited keys have a value */
    emit5(f->out, 1, card, *s, f->nchanges, f->seq);
    sl_state_clear(st);
    return 0;
}

static int ff_broadcast(void *ctx, sl_bctx_t *bc, const sl_record_t *in, sl_collector_t *out) {
    fraud_fn_t *f = ctx;
    int64_t kind = sl_row_i64(&in->row, 0), cat = sl_row_i64(&in->row, 3), thr = sl_row_i64(&in->row, 4);
    sl_bstate_t *thresholds = atomic_load(&f->thr), *changes = atomic_load(&f->changes);
    int rc = kind == EV_SET ? sl_bstate_put(thresholds, &cat, sizeof cat, &thr, sizeof thr)
                            : sl_bstate_remove(thresholds, &cat, sizeof cat);
    if (rc < 0) return rc;
    uint32_t len;
    const int64_t *ch = sl_bstate_get(changes, &cat, sizeof cat, &len);
    int64_t n = (ch ? *ch : 0) + 1;
    if ((rc = sl_bstate_put(changes, &cat, sizeof cat, &n, sizeof n)) < 0) return rc;
    reset_ctx_t r = {f->ncat, out, cat, n, sl_row_i64(&in->row, 5)};
    rc = sl_bctx_apply_to_keyed_state(bc, atomic_load(&f->sum), reset_card, &r);
    atomic_fetch_add(&done, 1);
    return rc < 0 ? rc : 0;
}

/* ---- commit-counting transactional sink ---- */

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

static sl_schema_t *script_schema(void) {
    return sl_schema_parse("kind BIGINT NOT NULL, card BIGINT NOT NULL, amount BIGINT NOT NULL, cat BIGINT NOT NULL, "
                           "thr BIGINT NOT NULL, seq BIGINT NOT NULL",
                           NULL, 0);
}
static sl_schema_t *out_schema(void) {
    return sl_schema_parse("type BIGINT NOT NULL, card BIGINT NOT NULL, a BIGINT NOT NULL, b BIGINT NOT NULL, "
                           "seq BIGINT NOT NULL",
                           NULL, 0);
}

typedef struct run_cfg {
    int p;
    bool rocksdb;
    const char *ckdir, *restore;
    int64_t fail_after;
    bool pause_half;
    bool shared_ctx;  /* one function context for every subtask */
    int tag;
    /* variations for the error tests */
    int (*element)(void *, sl_pctx_t *, const sl_record_t *, sl_collector_t *);
    int (*open)(void *, sl_rt_t *);
} run_cfg_t;

static int run_job(const bcase_t *c, const run_cfg_t *rc, txn_collected_t *sink, sl_env_t **keep_env) {
    fail_after = rc->fail_after;
    pause_half = rc->pause_half;
    bcast_p = rc->p;
    atomic_store(&done, 0);
    atomic_store(&commits, 0);
    atomic_store(&txns_seen, 0);
    atomic_store(&failed, 0);
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, rc->p);
    if (rc->rocksdb) {
        char rdb[1024];
        snprintf(rdb, sizeof rdb, "%s/bc-rocksdb-%d", sl_test_tmpdir(), rc->tag);
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
        sl_env_destroy(env);
        return -1;
    }
    bsrc_t *src = calloc(1, sizeof *src);
    src->c = c;
    src->schema = script_schema();
    sl_stream_t *s =
        sl_uid(sl_parallelism(sl_from_source(env, (sl_source_t){&b_ops, src, src->schema}, sl_wm_none(), "script"), 1),
               "script");
    sl_stream_t *txns = sl_uid(sl_parallelism(sl_filter(s, is_txn, NULL), 1), "txns");
    sl_stream_t *rules = sl_uid(sl_parallelism(sl_filter(s, is_rule, NULL), 1), "rules");
    const char *names[] = {"thresholds", "changes"};
    fraud_fn_t proto = {.ncat = c->ncat};
    sl_broadcast_process_fn_t fn = {.open = rc->open ? rc->open : ff_open,
                                    .process_element = rc->element ? rc->element : ff_element,
                                    .process_broadcast_element = ff_broadcast,
                                    .opts = {.ctx = &proto, .ctx_clone = ff_clone, .ctx_free = ff_free}};
    if (rc->shared_ctx) fn.opts = (sl_fn_opts_t){.ctx = &proto};
    sl_stream_t *o = sl_uid(sl_broadcast_process(sl_connect_broadcast(sl_key_by(txns, "card"),
                                                                      sl_broadcast_stream(rules, names, 2)),
                                                 fn, out_schema()),
                            "fraud");
    sl_name(o, "fraud");
    sl_uid(sl_sink_to(o, counting_txn_sink(sink), "out"), "out");
    int r = sl_env_execute(env, "broadcast");
    if (keep_env)
        *keep_env = env;
    else {
        if (r < 0 && rc->fail_after < 0) fprintf(stderr, "  job failed: %s\n", sl_env_error(env));
        sl_env_destroy(env);
    }
    return r;
}

static line_t *output_lines(txn_collected_t *t, int *n) {
    collected_t *c = t->out;
    line_t *out = calloc((size_t)c->n + 1, sizeof *out);
    sl_schema_t *s = out_schema();
    for (int64_t i = 0; i < c->n; i++) {
        sl_row_t r = collected_row(c, i, s);
        fmt(&out[i], sl_row_i64(&r, 0), sl_row_i64(&r, 1), sl_row_i64(&r, 2), sl_row_i64(&r, 3), sl_row_i64(&r, 4));
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
    const char *e = getenv("SLUICE_BCAST_SEEDS");
    return e ? atoi(e) : 6;
}

static int64_t total_rows, restored_rows;

static void one_case(uint64_t seed, bool restore, int *fails) {
    rng_state = seed * 0x9E3779B97F4A7C15ULL + 7;
    bcase_t c;
    int cards = (int)rnd_in(1, 60), ncat = (int)rnd_in(1, 16);
    gen_case(&c, cards, ncat, (int)rnd_in(1, 1500));
    bool rocksdb = rnd() % 3 == 0, shared = rnd() % 3 == 0;
    int p1 = (int)rnd_in(1, 4), p2 = 1 + (p1 + (int)rnd_in(0, 2)) % 4;
    int nref;
    line_t *ref = reference(&c, cards, &nref);
    char desc[200];
    snprintf(desc, sizeof desc, "seed %llu: %d events, %d cards, %d categories, %s, %s context, p=%d",
             (unsigned long long)seed, c.n, cards, ncat, rocksdb ? "rocksdb" : "heap", shared ? "shared" : "cloned", p1);
    txn_collected_t *sink = txn_collected_new();
    bool ok = true;
    if (!restore) {
        run_cfg_t rc = {.p = p1, .rocksdb = rocksdb, .fail_after = -1, .shared_ctx = shared, .tag = (int)seed};
        ok = run_job(&c, &rc, sink, NULL) == 0;
    } else {
        char ck[1024], ck2[1100], from[1100], cmd[2400];
        snprintf(ck, sizeof ck, "%s/bc-ck-%llu", sl_test_tmpdir(), (unsigned long long)seed);
        snprintf(ck2, sizeof ck2, "%s-2", ck);
        snprintf(from, sizeof from, "%s/broadcast", ck);
        snprintf(cmd, sizeof cmd, "rm -rf '%s' '%s'", ck, ck2);
        if (system(cmd) != 0) abort();
        int ntx = 0;
        for (int i = 0; i < c.n; i++) ntx += c.ev[i].kind == EV_TXN;
        run_cfg_t r1 = {.p = p1, .rocksdb = rocksdb, .ckdir = ck, .fail_after = rnd_in(0, ntx / 2 + 1),
                        .pause_half = true, .shared_ctx = shared, .tag = (int)seed};
        if (run_job(&c, &r1, sink, NULL) == 0) {
            fprintf(stderr, "  %s: run 1 did not fail\n", desc);
            ok = false;
        }
        restored_rows += sink->out->n;
        run_cfg_t r2 = {.p = p2, .rocksdb = !rocksdb, .ckdir = ck2, .restore = from, .fail_after = -1,
                        .shared_ctx = !shared, .tag = (int)seed + 100000};
        ok = run_job(&c, &r2, sink, NULL) == 0 && ok;
        snprintf(desc + strlen(desc), sizeof desc - strlen(desc), " -> restored at p=%d on %s", p2,
                 !rocksdb ? "rocksdb" : "heap");
    }
    int nout;
    line_t *got = output_lines(sink, &nout);
    total_rows += nout;
    ok = same_lines(got, nout, ref, nref, desc) && ok;
    if (!ok) {
        fprintf(stderr, "FAILED %s\n", desc);
        (*fails)++;
    }
    free(got);
    free(ref);
    free(c.ev);
    txn_collected_free(sink);
}

TEST(broadcast_matches_reference) {
    int fails = 0, n = nseeds();
    total_rows = 0;
    for (int i = 0; i < n; i++) one_case(100 + (uint64_t)i, false, &fails);
    fprintf(stderr, "  %d cases, %lld output rows\n", n, (long long)total_rows);
    CHECK_EQ(fails, 0);
}

TEST(broadcast_restores_at_another_parallelism) {
    int fails = 0, n = nseeds();
    total_rows = restored_rows = 0;
    for (int i = 0; i < n; i++) one_case(900 + (uint64_t)i, true, &fails);
    fprintf(stderr, "  %d cases, %lld output rows, %lld of them committed by the failed first runs\n", n,
            (long long)total_rows, (long long)restored_rows);
    CHECK_EQ(fails, 0);
    CHECK(restored_rows > 0);
}

/* ---- mistakes ---- */

static int write_in_element(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    fraud_fn_t *f = ctx;
    int64_t k = 1;
    atomic_fetch_add(&done, 1);
    return sl_bstate_put(atomic_load(&f->thr), &k, 8, &k, 8);
}

static int open_unknown(void *ctx, sl_rt_t *rt) {
    fraud_fn_t *f = ctx;
    atomic_store(&f->sum, sl_state_value(rt, "sum"));
    atomic_store(&f->thr, sl_bstate_get_state(rt, "thresholdz"));
    return atomic_load(&f->thr) ? 0 : SL_EINVAL;
}

TEST(broadcast_runtime_errors) {
    bcase_t c = {.ncat = 2, .n = 4};
    ev_t ev[4] = {{EV_SET, 0, 0, 1, 10}, {EV_TXN, 1, 5, 0, 0}, {EV_TXN, 2, 5, 0, 0}, {EV_SET, 0, 0, 0, 3}};
    c.ev = ev;
    txn_collected_t *sink = txn_collected_new();
    sl_env_t *env = NULL;
    run_cfg_t rc = {.p = 2, .fail_after = -1, .element = write_in_element};
    CHECK(run_job(&c, &rc, sink, &env) < 0);
    CHECK_CONTAINS(sl_env_error(env), "broadcast state 'thresholds' is read-only outside process_broadcast_element");
    CHECK_CONTAINS(sl_env_error(env), "fraud");
    sl_env_destroy(env);
    run_cfg_t rc2 = {.p = 2, .fail_after = -1, .open = open_unknown};
    CHECK(run_job(&c, &rc2, sink, &env) < 0);
    CHECK_CONTAINS(sl_env_error(env), "unknown broadcast state 'thresholdz'");
    CHECK_CONTAINS(sl_env_error(env), "'thresholds', 'changes'");
    sl_env_destroy(env);
    txn_collected_free(sink);
}

TEST(broadcast_build_errors) {
    const char *dup[] = {"a", "a"}, *empty[] = {""}, *ok[] = {"a"};
    struct {
        const char *const *names;
        int n;
        bool no_bcast_fn;
        const char *expect;
    } cases[] = {
        {dup, 2, false, "broadcast state 'a' is declared twice"},
        {empty, 1, false, "broadcast state name 1 is empty"},
        {ok, 0, false, "at least one broadcast state name"},
        {ok, 1, true, "process_broadcast_element is required"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sl_env_t *env = sl_env_new();
        bsrc_t *src = calloc(1, sizeof *src);
        src->schema = script_schema();
        sl_stream_t *s = sl_from_source(env, (sl_source_t){&b_ops, src, src->schema}, sl_wm_none(), "script");
        sl_broadcast_process_fn_t fn = {.process_element = ff_element,
                                        .process_broadcast_element = cases[i].no_bcast_fn ? NULL : ff_broadcast};
        CHECK(sl_broadcast_process(sl_connect_broadcast(sl_key_by(s, "card"), sl_broadcast_stream(s, cases[i].names,
                                                                                                   cases[i].n)),
                                   fn, out_schema()) == NULL);
        CHECK(sl_env_execute(env, "bad") < 0);
        CHECK_CONTAINS(sl_env_error(env), cases[i].expect);
        sl_env_destroy(env);
    }
    /* a side lost to an earlier mistake is named, not dereferenced */
    sl_env_t *env = sl_env_new();
    bsrc_t *src = calloc(1, sizeof *src);
    src->schema = script_schema();
    sl_stream_t *s = sl_from_source(env, (sl_source_t){&b_ops, src, src->schema}, sl_wm_none(), "script");
    CHECK(sl_connect_broadcast(NULL, sl_broadcast_stream(s, ok, 1)) == NULL);
    CHECK_CONTAINS(sl_env_error(env), "connect_broadcast: the keyed side is missing");
    sl_env_destroy(env);
}

int main(void) {
    RUN(broadcast_build_errors);
    RUN(broadcast_runtime_errors);
    RUN(broadcast_matches_reference);
    RUN(broadcast_restores_at_another_parallelism);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", sl_test_tmpdir());
    if (system(cmd) != 0) return 1;
    TEST_MAIN_END();
}
