/*
 * test_config_api.c — the public configuration API (sluice/config.h), as a
 * job uses it, against a reference kept here:
 *
 *   - random config files: the job's own keys under random namespaces and
 *     a random subset of engine keys, written flat, nested or mixed, with
 *     values the test writes in Flink's syntax from numbers it chose
 *     (durations in a random unit that divides them, memory sizes in kb/mb/
 *     bytes, booleans in random case, integers with a sign); then random
 *     `-D key=value` overrides (sl_config_set_arg).  Every key read back
 *     with its getter equals the reference's last value; a value read as a
 *     type it is not fails naming file:line (or -D), the key and the value;
 *     keys never set give SL_ENOTFOUND (a "did you mean" for a near miss);
 *     an engine key read with the wrong getter is refused; the effective
 *     configuration written out and loaded again is equal.
 *   - mistakes: an unknown key outside the namespaces, a namespace inside
 *     the engine's key space, a duplicate of a job key, "-D key" without
 *     "=" are errors naming the key and file:line.
 *   - sl_env_configure: checkpointing from config.yaml really runs (a job
 *     completes checkpoints; the same job without it takes none), and a
 *     broken rule becomes the environment's error, so execute fails naming
 *     both keys and where they were set.
 *
 * Environment: SLUICE_RAND_SEED=s changes the base seed.
 */
#include <inttypes.h>
#include <limits.h>

#include "config/config.h" /* sl_config_format / sl_config_equal for the round trip */
#include "sluice/config.h"
#include "sluice/sluice.h"
#include "test.h"

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static int rnd(uint64_t *s, int n) { return (int)(rng_next(s) % (uint64_t)n); }

static char ERR[4096];

/* ---- the reference ---- */

typedef enum { T_INT, T_BOOL, T_DURATION, T_MEMORY, T_STRING, NTYPES } vtype_t;

typedef struct {
    char key[96];
    vtype_t type;
    int64_t i;        /* int / bool / ms / bytes */
    char s[64];       /* string */
    char text[96];    /* as written */
    char where[64];   /* "t.yaml:<line>" or "-D" */
    bool set, nested;
} ref_key_t;

/* Writes r's value in Flink's syntax, a random spelling each time. */
static void write_value(uint64_t *g, ref_key_t *r) {
    switch (r->type) {
    case T_INT: snprintf(r->text, sizeof r->text, "%s%" PRId64, r->i >= 0 && rnd(g, 4) == 0 ? "+" : "", r->i); break;
    case T_BOOL: {
        const char *t = r->i ? (rnd(g, 2) ? "true" : "TRUE") : (rnd(g, 2) ? "false" : "False");
        snprintf(r->text, sizeof r->text, "%s", t);
        break;
    }
    case T_DURATION: {
        static const struct { int64_t ms; const char *u[3]; } U[] = {
            {86400000, {"d", "day", "days"}}, {3600000, {"h", "hour", "hours"}}, {60000, {"min", "m", "minutes"}},
            {1000, {"s", "sec", "seconds"}},  {1, {"ms", "millis", ""}}};
        int k = rnd(g, 5);
        while (r->i % U[k].ms) k++;
        const char *u = U[k].u[rnd(g, 3)];
        snprintf(r->text, sizeof r->text, "%" PRId64 "%s%s", r->i / U[k].ms, rnd(g, 2) ? " " : "", u);
        if (!*u) snprintf(r->text, sizeof r->text, "%" PRId64, r->i); /* a bare number is ms */
        break;
    }
    case T_MEMORY: {
        static const struct { int64_t b; const char *u[3]; } U[] = {
            {1 << 30, {"g", "gb", "gibibytes"}}, {1 << 20, {"m", "mb", "MB"}}, {1 << 10, {"k", "kb", "KB"}},
            {1, {"b", "bytes", ""}}};
        int k = rnd(g, 4);
        while (r->i % U[k].b) k++;
        const char *u = U[k].u[rnd(g, 3)];
        snprintf(r->text, sizeof r->text, "%" PRId64 "%s%s", r->i / U[k].b, rnd(g, 2) ? " " : "", u);
        if (!*u) snprintf(r->text, sizeof r->text, "%" PRId64, r->i);
        break;
    }
    default: snprintf(r->text, sizeof r->text, "%s", r->s); break;
    }
}

static void random_value(uint64_t *g, ref_key_t *r) {
    switch (r->type) {
    case T_INT: r->i = (int64_t)(rng_next(g) >> rnd(g, 64)) * (rnd(g, 3) ? 1 : -1); break;
    case T_BOOL: r->i = rnd(g, 2); break;
    case T_DURATION: {
        static const int64_t mul[] = {1, 1000, 60000, 3600000, 86400000};
        r->i = (int64_t)rnd(g, 5000) * mul[rnd(g, 5)];
        break;
    }
    case T_MEMORY: r->i = (int64_t)rnd(g, 4096) << (10 * rnd(g, 3)); break;
    default: {
        int n = 1 + rnd(g, 20);
        for (int k = 0; k < n; k++) r->s[k] = k ? "abcXYZ019_-/."[rnd(g, 13)] : "abcXYZ"[rnd(g, 6)]; /* not "-" */
        r->s[n] = 0;
        break;
    }
    }
    write_value(g, r);
}

/* Engine keys the random files also set, with their type and a value
 * range that is always valid. */
static const struct {
    const char *key;
    vtype_t type;
    int64_t lo, hi;
} ENGINE[] = {
    {"parallelism.default", T_INT, 1, 64},
    {"taskmanager.numberOfTaskSlots", T_INT, 1, 1000},
    {"execution.checkpointing.interval", T_DURATION, 10, 100000000},
    {"execution.checkpointing.timeout", T_DURATION, 10, 100000000},
    {"execution.checkpointing.min-pause", T_DURATION, 0, 1000000},
    {"execution.checkpointing.unaligned.enabled", T_BOOL, 0, 1},
    {"state.backend.rocksdb.block.cache-size", T_MEMORY, 1024, (int64_t)1 << 40},
    {"restart-strategy.fixed-delay.attempts", T_INT, 0, 100},
};
#define NENGINE ((int)(sizeof ENGINE / sizeof *ENGINE))

typedef struct {
    ref_key_t k[64];
    int n;
    char ns[3][32];
    int nns;
} model_t;

static ref_key_t *model_find(model_t *m, const char *key) {
    for (int i = 0; i < m->n; i++)
        if (!strcmp(m->k[i].key, key)) return &m->k[i];
    return NULL;
}

/* The text of the whole file: flat lines, or one nested mapping per
 * namespace, or a mix; each key's line recorded in its where. */
static void write_file(uint64_t *g, model_t *m, char *out, size_t cap) {
    size_t o = 0;
    int line = 1;
    o += (size_t)snprintf(out + o, cap - o, "# generated\n");
    line++;
    for (int i = 0; i < m->n; i++) {
        ref_key_t *r = &m->k[i];
        const char *dot = strrchr(r->key, '.');
        const char *quote = r->type == T_STRING && rnd(g, 2) ? "\"" : "";
        bool fresh = dot != NULL; /* a prefix may open one mapping only (YAML: no duplicate keys) */
        for (int j = 0; j < i && fresh; j++)
            fresh = !m->k[j].nested || strncmp(m->k[j].key, r->key, (size_t)(dot - r->key) + 1) != 0 ||
                    strrchr(m->k[j].key, '.') - m->k[j].key != dot - r->key;
        r->nested = fresh && rnd(g, 2);
        if (r->nested) { /* nested: "prefix:\n  leaf: value" */
            o += (size_t)snprintf(out + o, cap - o, "%.*s:\n  %s: %s%s%s\n", (int)(dot - r->key), r->key, dot + 1, quote,
                                  r->text, quote);
            snprintf(r->where, sizeof r->where, "t.yaml:%d", line + 1);
            line += 2;
        } else {
            o += (size_t)snprintf(out + o, cap - o, "%s: %s%s%s\n", r->key, quote, r->text, quote);
            snprintf(r->where, sizeof r->where, "t.yaml:%d", line);
            line++;
        }
        r->set = true;
    }
}

/* Getter of type t on key; 0 / error code, value into *i or s. */
static int get(const sl_config_t *c, const char *key, vtype_t t, int64_t *i, char *s, size_t cap) {
    bool b = false;
    int rc;
    switch (t) {
    case T_INT: return sl_config_get_int(c, key, i, ERR, sizeof ERR);
    case T_BOOL:
        rc = sl_config_get_bool(c, key, &b, ERR, sizeof ERR);
        if (rc == 0) *i = b;
        return rc;
    case T_DURATION: return sl_config_get_duration(c, key, i, ERR, sizeof ERR);
    case T_MEMORY: return sl_config_get_memory(c, key, i, ERR, sizeof ERR);
    default: return sl_config_get_string(c, key, s, cap, ERR, sizeof ERR);
    }
}

/* Would text parse as type t, by the reference's rules? */
static bool ref_parses_as(const char *text, vtype_t t) {
    if (t == T_STRING) return true;
    if (t == T_BOOL) return !strcasecmp(text, "true") || !strcasecmp(text, "false");
    const char *p = text;
    if (t == T_INT && (*p == '+' || *p == '-')) p++;
    if (*p < '0' || *p > '9') return false;
    while (*p >= '0' && *p <= '9') p++;
    if (t == T_INT) return !*p;
    while (*p == ' ') p++;
    if (!*p) return true;
    static const char *dur[] = {"d", "day", "days", "h", "hour", "hours", "min", "m", "minutes", "s", "sec",
                                "seconds", "ms", "millis"};
    static const char *mem[] = {"g", "gb", "gibibytes", "m", "mb", "k", "kb", "b", "bytes"};
    const char **u = t == T_DURATION ? dur : mem;
    int n = t == T_DURATION ? 14 : 9;
    for (int k = 0; k < n; k++)
        if (!strcasecmp(p, u[k])) return true;
    return false;
}

TEST(random_files_and_overrides_read_back) {
    uint64_t g = getenv("SLUICE_RAND_SEED") ? strtoull(getenv("SLUICE_RAND_SEED"), NULL, 0) : 0xc0f1;
    static const char *NS[] = {"fraud", "job", "my-app.settings", "acme_2"};
    int wrong_type_checked = 0, notfound_checked = 0;
    for (int c = 0; c < 300; c++) {
        model_t m = {0};
        sl_config_t *cfg = sl_config_new();
        m.nns = 1 + rnd(&g, 3);
        for (int i = 0; i < m.nns; i++) {
            strcpy(m.ns[i], NS[(c + i) % 4]); /* all shorter than m.ns[i] */
            CHECK_EQ(sl_config_add_namespace(cfg, m.ns[i], ERR, sizeof ERR), 0);
        }
        int nuser = 1 + rnd(&g, 12);
        for (int i = 0; i < nuser; i++) {
            ref_key_t *r = &m.k[m.n];
            const char *ns = NS[(c + rnd(&g, m.nns)) % 4]; /* one of m.ns */
            snprintf(r->key, sizeof r->key, "%s.k%d%s", ns, i, rnd(&g, 2) ? ".leaf" : "");
            r->type = (vtype_t)rnd(&g, NTYPES);
            random_value(&g, r);
            m.n++;
        }
        for (int i = 0; i < NENGINE; i++) {
            if (rnd(&g, 3)) continue;
            ref_key_t *r = &m.k[m.n++];
            snprintf(r->key, sizeof r->key, "%s", ENGINE[i].key);
            r->type = ENGINE[i].type;
            r->i = ENGINE[i].lo + (int64_t)(rng_next(&g) % (uint64_t)(ENGINE[i].hi - ENGINE[i].lo + 1));
            if (r->type == T_DURATION || r->type == T_MEMORY) { /* keep it expressible in a few units */
                static const int64_t q[] = {1, 1000, 60000};
                int64_t u = r->type == T_DURATION ? q[rnd(&g, 3)] : ((int64_t)1 << (10 * rnd(&g, 3)));
                r->i = r->i / u * u;
                if (r->i < ENGINE[i].lo) r->i = ENGINE[i].lo;
            }
            write_value(&g, r);
        }
        char file[16384];
        write_file(&g, &m, file, sizeof file);
        if (sl_config_load_string(cfg, file, "t.yaml", ERR, sizeof ERR) != 0) fprintf(stderr, "%s\n---\n%s\n", file, ERR);
        CHECK_EQ(sl_config_load_string(cfg, file, "t.yaml", ERR, sizeof ERR), 0);
        /* -D overrides of some keys (same type, a new value) */
        for (int i = 0; i < m.n; i++) {
            if (rnd(&g, 4)) continue;
            ref_key_t *r = &m.k[i];
            if (strncmp(r->key, "parallelism", 11) && strncmp(r->key, "taskmanager", 11) &&
                strncmp(r->key, "execution", 9) && strncmp(r->key, "state", 5) && strncmp(r->key, "restart", 7))
                random_value(&g, r);
            else write_value(&g, r); /* engine key: same value, another spelling */
            char arg[256];
            snprintf(arg, sizeof arg, "%s%s=%s", r->key, rnd(&g, 3) ? "" : " ", r->text);
            CHECK_EQ(sl_config_set_arg(cfg, arg, ERR, sizeof ERR), 0);
            snprintf(r->where, sizeof r->where, "-D");
        }
        /* every key reads back as the reference says */
        for (int i = 0; i < m.n; i++) {
            ref_key_t *r = &m.k[i];
            int64_t v = INT64_MIN;
            char s[128];
            CHECK(sl_config_has(cfg, r->key));
            int rc = get(cfg, r->key, r->type, &v, s, sizeof s);
            if (rc) fprintf(stderr, "case %d: %s (%s): %s\n", c, r->key, r->text, ERR);
            CHECK_EQ(rc, 0);
            if (r->type == T_STRING) CHECK_STR(s, r->s);
            else CHECK_EQ(v, r->i);
            /* as text: a job key gives what was written */
            if (i < nuser) {
                CHECK_EQ(sl_config_get_string(cfg, r->key, s, sizeof s, ERR, sizeof ERR), 0);
                CHECK_STR(s, r->text);
            }
            /* another type */
            vtype_t t = (vtype_t)rnd(&g, NTYPES - 1);
            if (t == r->type) continue;
            int64_t w = 12345;
            rc = get(cfg, r->key, t, &w, s, sizeof s);
            if (i >= nuser) { /* engine keys: only their own getter */
                CHECK_EQ(rc, SL_EINVAL);
                CHECK_CONTAINS(ERR, r->key);
                CHECK_CONTAINS(ERR, "read it with sl_config_get_");
            } else if (ref_parses_as(r->text, t)) {
                CHECK_EQ(rc, 0);
            } else {
                CHECK_EQ(rc, SL_EINVAL);
                CHECK_EQ(w, 12345);
                char want[300];
                snprintf(want, sizeof want, "%s: %s: bad value \"%s\"", r->where, r->key, r->text);
                CHECK_CONTAINS(ERR, want);
                wrong_type_checked++;
            }
        }
        /* keys never set */
        for (int i = 0; i < m.nns; i++) {
            char key[128];
            snprintf(key, sizeof key, "%s.never%d", m.ns[i], rnd(&g, 100));
            int64_t v = 77;
            CHECK(!sl_config_has(cfg, key));
            CHECK_EQ(sl_config_get_int(cfg, key, &v, ERR, sizeof ERR), SL_ENOTFOUND);
            CHECK_EQ(v, 77);
            CHECK_CONTAINS(ERR, key);
            notfound_checked++;
        }
        /* a near miss of a job key: not found, with the key that was meant */
        ref_key_t *r0 = &m.k[0];
        char miss[128];
        snprintf(miss, sizeof miss, "%sx", r0->key);
        if (!model_find(&m, miss)) {
            CHECK_EQ(sl_config_get_string(cfg, miss, (char[8]){0}, 8, ERR, sizeof ERR), SL_ENOTFOUND);
            char want[300];
            snprintf(want, sizeof want, "(did you mean \"%s\", set at %s?)", r0->key, r0->where);
            CHECK_CONTAINS(ERR, want);
        }
        /* round trip through the effective configuration */
        sl_buf_t out = {0};
        sl_config_format(cfg, &out);
        sl_config_t *back = sl_config_new();
        for (int i = 0; i < m.nns; i++) CHECK_EQ(sl_config_add_namespace(back, m.ns[i], ERR, sizeof ERR), 0);
        int rc = sl_config_load_string(back, (const char *)out.p, "effective.yaml", ERR, sizeof ERR);
        if (rc) fprintf(stderr, "%s\n%s\n", (const char *)out.p, ERR);
        CHECK_EQ(rc, 0);
        CHECK(sl_config_equal(cfg, back));
        sl_buf_free(&out);
        sl_config_destroy(back);
        sl_config_destroy(cfg);
    }
    CHECK(wrong_type_checked > 100);
    CHECK(notfound_checked > 100);
}

TEST(mistakes_are_named) {
    sl_config_t *c = sl_config_new();
    CHECK_EQ(sl_config_add_namespace(c, "fraud", ERR, sizeof ERR), 0);
    /* outside the namespaces: still strict */
    CHECK_EQ(sl_config_load_string(c, "fraud.threshold: 10\nfrad.window: 5 min\n", "job.yaml", ERR, sizeof ERR),
             SL_EINVAL);
    CHECK_CONTAINS(ERR, "job.yaml:2: unknown key \"frad.window\"");
    CHECK(!sl_config_has(c, "fraud.threshold")); /* a failed load changes nothing */
    CHECK_EQ(sl_config_load_string(c, "execution.checkpointing.intervall: 10 s\n", "job.yaml", ERR, sizeof ERR),
             SL_EINVAL);
    CHECK_CONTAINS(ERR, "job.yaml:1: unknown key \"execution.checkpointing.intervall\" (did you mean "
                        "\"execution.checkpointing.interval\"?)");
    /* a job key twice, flat and nested */
    CHECK_EQ(sl_config_load_string(c, "fraud.threshold: 10\nfraud:\n  threshold: 11\n", "job.yaml", ERR, sizeof ERR),
             SL_EINVAL);
    CHECK_CONTAINS(ERR, "job.yaml:3: duplicate key \"fraud.threshold\" (already set at job.yaml:1)");
    CHECK_EQ(sl_config_load_string(c, "fraud.threshold:\n", "job.yaml", ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "job.yaml:1: fraud.threshold: no value given");
    CHECK_EQ(sl_config_load_string(c, "fraud.threshold: [1, 2]\n", "job.yaml", ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "expects a single value, not a list");
    /* namespaces inside the engine's key space, or malformed */
    const char *bad_ns[] = {"execution", "state.mine", "pipeline", "parallelism", "restart-strategy", "", ".x", "a..b",
                            "a b"};
    for (size_t i = 0; i < sizeof bad_ns / sizeof *bad_ns; i++) {
        CHECK_EQ(sl_config_add_namespace(c, bad_ns[i], ERR, sizeof ERR), SL_EINVAL);
        CHECK_CONTAINS(ERR, "config namespace");
    }
    /* -D */
    CHECK_EQ(sl_config_set_arg(c, "fraud.threshold", ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "-D: expected key=value, got \"fraud.threshold\"");
    CHECK_EQ(sl_config_set_arg(c, "parallelism.default=0", ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "-D: parallelism.default: bad value \"0\"");
    CHECK_EQ(sl_config_set_arg(c, "fraud.threshold=abc", ERR, sizeof ERR), 0);
    int64_t v = 5;
    CHECK_EQ(sl_config_get_int(c, "fraud.threshold", &v, ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "-D: fraud.threshold: bad value \"abc\": not an integer; allowed: an integer");
    CHECK_EQ(v, 5);
    /* unknown keys at the getters */
    CHECK_EQ(sl_config_get_int(c, "paralelism.default", &v, ERR, sizeof ERR), SL_EINVAL);
    CHECK_CONTAINS(ERR, "unknown key \"paralelism.default\" (did you mean \"parallelism.default\"?)");
    CHECK_EQ(sl_config_get_duration(c, "execution.checkpointing.interval", &v, ERR, sizeof ERR), SL_ENOTFOUND);
    CHECK_CONTAINS(ERR, "execution.checkpointing.interval: not set (checkpointing is off)");
    /* a missing file names the file */
    CHECK_EQ(sl_config_load_file(c, "/nonexistent/config.yaml", ERR, sizeof ERR), SL_EIO);
    CHECK_CONTAINS(ERR, "/nonexistent/config.yaml");
    sl_config_destroy(c);
    sl_config_destroy(NULL);
}

/* ---- sl_env_configure on a real job ---- */

static int ident(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    sl_rw_copy_row(out, &in->row);
    return 0;
}

/* datagen -> map -> sink, paced so that 20 ms checkpoints have time to run. */
static int run_job(const sl_config_t *cfg, int64_t *checkpoints, char *err, size_t cap) {
    sl_env_t *env = sl_env_new();
    if (cfg) sl_env_configure(env, cfg);
    sl_datagen_opts_t g = sl_datagen_defaults();
    g.count = 6000;
    g.rate = 20000;
    g.splits = 1;
    sl_stream_t *s = sl_from_source(env, sl_datagen_source(g), sl_wm_bounded("ts", 0), "gen");
    s = sl_map(s, ident, NULL, NULL);
    sl_sink_to(s, sl_counting_sink(NULL), "count");
    int rc = sl_env_execute(env, "configured");
    *checkpoints = sl_env_checkpoints_completed(env);
    snprintf(err, cap, "%s", sl_env_error(env));
    sl_env_destroy(env);
    return rc;
}

TEST(env_configure_applies_and_reports) {
    char path[600], e[2048];
    snprintf(path, sizeof path, "%s/config.yaml", sl_test_tmpdir());
    FILE *f = fopen(path, "w");
    CHECK(f);
    fputs("execution:\n  checkpointing:\n    interval: 20 ms\nparallelism.default: 2\n", f);
    fclose(f);
    sl_config_t *c = sl_config_new();
    CHECK_EQ(sl_config_load_file(c, path, ERR, sizeof ERR), 0);
    int64_t n = -1;
    CHECK_EQ(run_job(c, &n, e, sizeof e), 0);
    CHECK(n > 0);
    CHECK_EQ(run_job(NULL, &n, e, sizeof e), 0);
    CHECK_EQ(n, 0);
    /* a broken rule: the job does not run, and says why and where */
    CHECK_EQ(sl_config_set_arg(c, "pipeline.max-parallelism=1", ERR, sizeof ERR), 0);
    CHECK(run_job(c, &n, e, sizeof e) < 0);
    char want[800];
    snprintf(want, sizeof want, "%s:4: parallelism.default 2 is greater than pipeline.max-parallelism 1 (set at -D)",
             path);
    CHECK_CONTAINS(e, want);
    sl_config_destroy(c);
}

int main(void) {
    RUN(random_files_and_overrides_read_back);
    RUN(mistakes_are_named);
    RUN(env_configure_applies_and_reports);
    TEST_MAIN_END();
}
