/*
 * savepoint_util.h — the job of the savepoint tests (test_savepoint.c,
 * test_savepoint_compat.c): a gated source (values v = 0..N-1 over 4
 * splits, ts = 10 v ms, key v % 7; it emits only v < gate, so a test knows
 * exactly what a run read before its savepoint) -> tumbling 1 s event-time
 * windows of count and sum per key -> a transactional collecting sink
 * (rows count only once the checkpoint or savepoint that covers them told
 * the sink to commit); versions of it (a new stateful operator, the window
 * removed), a brute-force reference, and a run on a thread.
 */
#ifndef SL_TEST_SAVEPOINT_UTIL_H
#define SL_TEST_SAVEPOINT_UTIL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "pipeline_util.h"
#include "sluice/sluice.h"

#define N 6000
#define SPLITS 4
#define KEYS 7
#define WIN_MS 1000

/* ---- the gated source ---- */

typedef struct gate_src {
    atomic_llong gate;     /* values below it may be emitted */
    atomic_llong emitted;  /* over every reader of the current run */
    sl_schema_t *schema;
} gate_src_t;

/* The counter source's reader (pipeline_util.h), so that its position
 * snapshot and restore serve here too; src is the gate. */
typedef struct gate_reader {
    counter_reader_t base;
    gate_src_t *src;
} gate_reader_t;

static int gate_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    gate_reader_t *g = calloc(1, sizeof *g);
    counter_reader_t *r = &g->base;
    g->src = ctx;
    for (int k = subtask; k < SPLITS; k += p) r->nsplits++;
    r->first = subtask;
    r->stride = p;
    r->next = calloc((size_t)(r->nsplits ? r->nsplits : 1), sizeof(int64_t));
    for (int i = 0; i < r->nsplits; i++) r->next[i] = subtask + (int64_t)i * p;
    *reader = g;
    *nsplits = r->nsplits;
    return 0;
}

static int gate_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    gate_reader_t *g = reader;
    counter_reader_t *r = &g->base;
    int64_t gate = atomic_load(&g->src->gate);
    int emitted = 0, done = 0;
    for (int i = 0; i < r->nsplits; i++) {
        while (emitted < max && r->next[i] >= 0 && r->next[i] < gate) {
            int64_t v = r->next[i];
            if (v >= N) break;
            sl_row_writer_t *w = sl_src_row(out);
            sl_rw_set_i64(w, 0, v % KEYS);
            sl_rw_set_i64(w, 1, v);
            sl_rw_set_i64(w, 2, v * 10);
            sl_src_emit(out, i, v * 10);
            r->next[i] = v + SPLITS;
            emitted++;
        }
        if (r->next[i] >= N) {
            r->next[i] = -1;
            sl_src_split_finished(out, i);
        }
        done += r->next[i] < 0;
    }
    atomic_fetch_add(&g->src->emitted, emitted);
    if (done == r->nsplits) return SL_SRC_END;
    return emitted ? SL_SRC_MORE : SL_SRC_IDLE;
}

static void gate_destroy_reader(void *reader) {
    gate_reader_t *g = reader;
    free(g->base.next);
    free(g);
}

static void gate_destroy(void *ctx) { (void)ctx; /* owned by the test */ }

/* Positions: the counter source's format (its functions read the base). */
static int gate_snapshot(void *reader, int64_t id, void (*put)(void *, const void *, size_t), void *pc) {
    return counter_snapshot(&((gate_reader_t *)reader)->base, id, put, pc);
}

static int gate_restore(void *reader, const void *state, size_t len, char *err, size_t el) {
    return counter_restore(&((gate_reader_t *)reader)->base, state, len, err, el);
}

static const sl_source_ops_t gate_ops = {.name = "gated",
                                         .create_reader = gate_create,
                                         .poll = gate_poll,
                                         .destroy_reader = gate_destroy_reader,
                                         .destroy = gate_destroy,
                                         .snapshot = gate_snapshot,
                                         .restore = gate_restore};

static gate_src_t GS;

/* ---- the job, in versions ---- */

typedef struct job_opts {
    int parallelism;
    int backend;              /* SL_STATE_BACKEND_* */
    bool incremental;
    int max_parallelism;      /* 0: default */
    bool with_window;         /* false: version "without the window operator" */
    bool extra_operator;      /* version 2: a new keyed operator with state of its own */
    const char *restore;      /* savepoint to start from */
    bool allow_nrs;
    bool no_watermarks;       /* the source emits none until its end: no window fires before it */
    const char *ckpt_dir;
} job_opts_t;

static atomic_llong extra_seen; /* records the new operator counted (its state: a per-key count) */

typedef struct extra_fn {
    sl_state_t *seen;
} extra_fn_t;

static void *extra_clone(const void *ctx) { return calloc(1, sizeof(extra_fn_t)); }
static void extra_free(void *ctx) { free(ctx); }

static int extra_open(void *ctx, sl_rt_t *rt) {
    extra_fn_t *f = ctx;
    f->seen = sl_state_value(rt, "seen");
    return f->seen ? 0 : SL_EINVAL;
}

static int extra_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    extra_fn_t *f = ctx;
    uint32_t len;
    const int64_t *v = sl_value_get(f->seen, &len);
    int64_t n = v ? *v + 1 : 1;
    sl_value_put(f->seen, &n, sizeof n);
    atomic_fetch_add(&extra_seen, 1);
    sl_rw_copy_row(sl_out_row(out), &in->row);
    sl_out_set_timestamp(out, in->ts);
    sl_emit(out);
    return 0;
}

static int keep_all(void *ctx, const sl_record_t *in) { return 1; }

static sl_env_t *build(const job_opts_t *o, txn_collected_t *sink) {
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, o->parallelism);
    if (o->max_parallelism) sl_env_set_max_parallelism(env, o->max_parallelism);
    sl_env_enable_checkpointing(env, 3600 * 1000, SL_CHECKPOINT_EXACTLY_ONCE); /* savepoints only */
    sl_env_set_checkpoint_dir(env, o->ckpt_dir);
    sl_env_set_state_backend(env, (sl_state_backend_kind_t)o->backend);
    sl_env_set_incremental_checkpoints(env, o->incremental);
    sl_env_set_restart_none(env);
    if (o->restore) sl_env_restore_from(env, o->restore);
    sl_env_set_allow_non_restored_state(env, o->allow_nrs);
    sl_source_t src = {&gate_ops, &GS, sl_schema_ref(GS.schema)};
    sl_stream_t *s =
        sl_uid(sl_from_source(env, src, o->no_watermarks ? sl_wm_none() : sl_wm_bounded("ts", 0), "gated"), "source");
    if (o->extra_operator) {
        sl_process_fn_t fn = {.open = extra_open, .process = extra_process, .opts = {NULL, extra_clone, extra_free}};
        s = sl_uid(sl_keyed_process(sl_key_by(s, "k"), fn, sl_schema_ref(GS.schema)), "extra");
    }
    if (o->with_window) {
        s = sl_uid(sl_window_agg(sl_window(sl_key_by(s, "k"), sl_tumbling_event_time(WIN_MS, 0)),
                                 "count(*) AS c, sum(v) AS s"),
                   "windows");
    } else {
        s = sl_uid(sl_filter(s, keep_all, NULL), "passthrough");
    }
    sl_uid(sl_sink_to(s, txn_collect_sink(sink), "out"), "sink");
    return env;
}

/* ---- the reference and the comparison ---- */

typedef struct win_row {
    int64_t k, start, c, s;
} win_row_t;

static int cmp_row(const void *a, const void *b) {
    const win_row_t *x = a, *y = b;
    if (x->k != y->k) return x->k < y->k ? -1 : 1;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    if (x->c != y->c) return x->c < y->c ? -1 : 1;
    return x->s < y->s ? -1 : x->s > y->s;
}

/* The windows over the values [from, to), brute force, appended to out. */
static int reference(int64_t from, int64_t to, win_row_t *out, int n) {
    for (int64_t k = 0; k < KEYS; k++)
        for (int64_t w = 0; w * WIN_MS < N * 10; w++) {
            win_row_t r = {k, w * WIN_MS, 0, 0};
            for (int64_t v = from; v < to; v++)
                if (v % KEYS == k && v * 10 / WIN_MS == w) {
                    r.c++;
                    r.s += v;
                }
            if (r.c) out[n++] = r;
        }
    return n;
}

/* The committed rows of the sink (schema: k, window_start, window_end, c, s). */
static int committed(txn_collected_t *t, const sl_schema_t *schema, win_row_t *out, int cap) {
    pthread_mutex_lock(&t->mu);
    int n = 0;
    for (int64_t i = 0; i < t->out->n && n < cap; i++) {
        sl_row_t r = {t->out->rows[i], t->out->lens[i], schema};
        out[n++] = (win_row_t){sl_row_i64(&r, 0), sl_row_i64(&r, 1), sl_row_i64(&r, 3), sl_row_i64(&r, 4)};
    }
    pthread_mutex_unlock(&t->mu);
    return n;
}

static bool same_rows(win_row_t *a, int na, win_row_t *b, int nb) {
    qsort(a, (size_t)na, sizeof *a, cmp_row);
    qsort(b, (size_t)nb, sizeof *b, cmp_row);
    if (na != nb) {
        fprintf(stderr, "  %d committed rows, %d expected\n", na, nb);
        return false;
    }
    for (int i = 0; i < na; i++)
        if (cmp_row(&a[i], &b[i])) {
            fprintf(stderr, "  row %d: key %lld window %lld count %lld sum %lld, expected %lld %lld %lld %lld\n", i,
                    (long long)a[i].k, (long long)a[i].start, (long long)a[i].c, (long long)a[i].s,
                    (long long)b[i].k, (long long)b[i].start, (long long)b[i].c, (long long)b[i].s);
            return false;
        }
    return true;
}

static sl_schema_t *out_schema(void) {
    return sl_schema_parse("k BIGINT NOT NULL, window_start TIMESTAMP NOT NULL, window_end TIMESTAMP NOT NULL, "
                           "c BIGINT NOT NULL, s BIGINT",
                           NULL, 0);
}

/* ---- running a version on a thread, and acting on it ---- */

typedef struct run {
    sl_env_t *env;
    pthread_t th;
    int rc;
} run_t;

static void *run_main(void *arg) {
    run_t *r = arg;
    r->rc = sl_env_execute(r->env, "savepoint-job");
    return NULL;
}

static void start(run_t *r, sl_env_t *env, int64_t gate) {
    atomic_store(&GS.gate, gate);
    atomic_store(&GS.emitted, 0);
    r->env = env;
    r->rc = 1;
    pthread_create(&r->th, NULL, run_main, r);
}

/* Waits until the run's sources emitted `want` records (the gate holds
 * them there), so a savepoint now covers exactly those. */
static bool wait_emitted(int64_t want) {
    for (int i = 0; i < 3000; i++) {
        if (atomic_load(&GS.emitted) >= want) return atomic_load(&GS.emitted) == want;
        struct timespec ts = {0, 10 * 1000000L};
        nanosleep(&ts, NULL);
    }
    return false;
}

static int finish(run_t *r) {
    pthread_join(r->th, NULL);
    return r->rc;
}

static char CK[600];

static job_opts_t opts(int p, int backend) {
    job_opts_t o = {.parallelism = p, .backend = backend, .with_window = true, .ckpt_dir = CK};
    return o;
}

static inline bool has_metadata(const char *dir) {
    char p[4300];
    snprintf(p, sizeof p, "%s/_metadata", dir);
    return access(p, F_OK) == 0;
}

#endif
