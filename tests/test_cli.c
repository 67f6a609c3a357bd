/*
 * test_cli.c — the `sluice` command's option checking, driven from outside:
 * each case runs the built binary (SLUICE_BIN) as a separate process and
 * reads its exit code and stderr.
 *
 *   - integer and number options get random values (in range, 0, negative,
 *     -1, beyond the option's maximum, beyond 64 bits, with a sign, with
 *     junk after the digits, empty, missing); a reference written here
 *     decides whether each is valid and, if not, the exact message
 *     ("sluice: -p: expected a positive integer, got '-3'") and exit code 2.
 *     A value the reference accepts is followed by a bad --format, so the
 *     parser must get past it and complain about --format instead (the job
 *     never runs).  A few small valid runs check the values are used.
 *   - unknown options: random one-edit typos of the options listed by
 *     `sluice --help`; the expected "did you mean" is the brute-force
 *     closest option (edit distance computed here) within max(2, len/5).
 *
 * Environment: SLUICE_RAND_SEED=s changes the base seed.
 */
#include <fcntl.h>
#include <jansson.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/wait.h>

#include "test.h"

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static int rnd(uint64_t *s, int n) { return (int)(rng_next(s) % (uint64_t)n); }

/* ---- running the binary ---- */

typedef struct {
    int code; /* exit code, or 128 + signal */
    char out[8192], err[8192];
} run_t;

static void slurp(const char *path, char *buf, size_t cap) {
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, cap - 1, f) : 0;
    buf[n] = 0;
    if (f) fclose(f);
}

/* Runs SLUICE_BIN with args (NULL-terminated) in the scratch directory. */
static void run(run_t *r, const char *const *args) {
    char outp[600], errp[600];
    snprintf(outp, sizeof outp, "%s/cli.out", sl_test_tmpdir());
    snprintf(errp, sizeof errp, "%s/cli.err", sl_test_tmpdir());
    const char *argv[64];
    int n = 0;
    argv[n++] = SLUICE_BIN;
    for (int i = 0; args[i] && n < 63; i++) argv[n++] = args[i];
    argv[n] = NULL;
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (chdir(sl_test_tmpdir()) != 0) _exit(126);
        int fo = open(outp, O_WRONLY | O_CREAT | O_TRUNC, 0644), fe = open(errp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fo < 0 || fe < 0) _exit(126);
        dup2(fo, 1);
        dup2(fe, 2);
        execv(SLUICE_BIN, (char *const *)argv);
        _exit(127);
    }
    int st = 0;
    waitpid(pid, &st, 0);
    r->code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    slurp(outp, r->out, sizeof r->out);
    slurp(errp, r->err, sizeof r->err);
}

/* ---- the reference for integer options ---- */

typedef enum { K_POSITIVE, K_NON_NEGATIVE, K_UNBOUNDED, K_ANY } kind_t;

typedef struct {
    const char *name;
    kind_t kind;
    long long max; /* the field's largest value */
} int_opt_t;

/* What each integer option of `sluice --help` accepts. */
static const int_opt_t INT_OPTS[] = {
    {"--events", K_UNBOUNDED, LLONG_MAX},        {"--cards", K_POSITIVE, LLONG_MAX},
    {"--splits", K_POSITIVE, INT_MAX},           {"--seed", K_ANY, LLONG_MAX},
    {"-p", K_POSITIVE, INT_MAX},                 {"--parallelism", K_POSITIVE, INT_MAX},
    {"--allowed-lateness", K_NON_NEGATIVE, LLONG_MAX}, {"--idle-timeout", K_NON_NEGATIVE, LLONG_MAX},
    {"--checkpoint-interval", K_POSITIVE, LLONG_MAX},
};

static const char *kind_text(kind_t k) {
    switch (k) {
    case K_POSITIVE: return "a positive integer";
    case K_NON_NEGATIVE: return "a non-negative integer";
    case K_UNBOUNDED: return "an integer >= 1, or -1 (unbounded)";
    case K_ANY: return "an integer";
    }
    return "";
}

/* Decimal text -> value, by hand: optional sign, then only digits, within
 * 64 bits.  Returns false if it is not such a number. */
static bool ref_int(const char *s, long long *out) {
    bool neg = false;
    if (*s == '+' || *s == '-') neg = *s++ == '-';
    if (!*s) return false;
    unsigned long long mag = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return false;
        if (mag > (ULLONG_MAX - 9) / 10) return false;
        mag = mag * 10 + (unsigned long long)(*s - '0');
    }
    if (!neg && mag > (unsigned long long)LLONG_MAX) return false;
    if (neg && mag > (unsigned long long)LLONG_MAX + 1) return false;
    *out = neg ? (long long)(0 - mag) : (long long)mag;
    return true;
}

/* The expected stderr for value s of o ("" when it is valid). */
static void ref_verdict(const int_opt_t *o, const char *s, char *msg, size_t cap) {
    long long v;
    msg[0] = 0;
    if (!s) {
        snprintf(msg, cap, "sluice: %s: expected %s, got nothing\n", o->name, kind_text(o->kind));
        return;
    }
    if (!ref_int(s, &v)) {
        snprintf(msg, cap, "sluice: %s: expected %s, got '%s'\n", o->name, kind_text(o->kind), s);
        return;
    }
    bool in_kind = o->kind == K_ANY || (o->kind == K_POSITIVE && v >= 1) || (o->kind == K_NON_NEGATIVE && v >= 0) ||
                   (o->kind == K_UNBOUNDED && (v >= 1 || v == -1));
    if (!in_kind) snprintf(msg, cap, "sluice: %s: expected %s, got '%s'\n", o->name, kind_text(o->kind), s);
    else if (v > o->max)
        snprintf(msg, cap, "sluice: %s: expected %s of at most %lld, got '%s'\n", o->name, kind_text(o->kind), o->max,
                 s);
}

static void random_value(uint64_t *r, char *buf, size_t cap) {
    static const char *junk[] = {"abc", "", " 5", "5 ", "3x", "0x10", "1e3", "--print", "1.5", "+", "-", "٣", "--"};
    static const char *edges[] = {"-1", "0", "1", "-0", "+0", "+1", "2", "-2"};
    switch (rnd(r, 10)) {
    case 9: snprintf(buf, cap, "%s", edges[rnd(r, (int)(sizeof edges / sizeof *edges))]); break;
    case 0: snprintf(buf, cap, "%d", rnd(r, 21) - 10); break;
    case 1: snprintf(buf, cap, "-%d", 1 + rnd(r, 1000)); break;
    case 2: snprintf(buf, cap, "%s", junk[rnd(r, (int)(sizeof junk / sizeof *junk))]); break;
    case 3: snprintf(buf, cap, "%lld", (long long)INT_MAX + rnd(r, 3) - 1); break;
    case 4: snprintf(buf, cap, "%s%llu", rnd(r, 2) ? "-" : "", (unsigned long long)LLONG_MAX + (unsigned)rnd(r, 3)); break;
    case 5: snprintf(buf, cap, "99999999999999999999%d", rnd(r, 10)); break;
    case 6: snprintf(buf, cap, "+%d", rnd(r, 100)); break;
    case 7: snprintf(buf, cap, "%d%c", rnd(r, 100), "x.k "[rnd(r, 4)]); break;
    default: snprintf(buf, cap, "%llu", (unsigned long long)(rng_next(r) >> rnd(r, 64))); break;
    }
}

TEST(integer_options_random) {
    uint64_t r = getenv("SLUICE_RAND_SEED") ? strtoull(getenv("SLUICE_RAND_SEED"), NULL, 0) : 0xc11;
    int valid = 0, invalid = 0;
    for (int c = 0; c < 200; c++) {
        const int_opt_t *o = &INT_OPTS[rnd(&r, (int)(sizeof INT_OPTS / sizeof *INT_OPTS))];
        char val[96], expect[256], joined[160];
        random_value(&r, val, sizeof val);
        int form = rnd(&r, 4); /* 0: --opt=value (long options), 3: value missing */
        const char *args[8];
        int n = 0;
        const char *given = val;
        if (form == 0 && o->name[1] == '-') {
            snprintf(joined, sizeof joined, "%s=%s", o->name, val);
            args[n++] = joined;
        } else if (form == 3) {
            args[n++] = o->name; /* the last argument: no value */
            given = NULL;
        } else {
            args[n++] = o->name;
            args[n++] = val;
        }
        if (given) {
            args[n++] = "--format"; /* reached only when the value was accepted */
            args[n++] = "xml";
        }
        args[n] = NULL;
        ref_verdict(o, given, expect, sizeof expect);
        if (!expect[0]) {
            snprintf(expect, sizeof expect, "sluice: --format: expected json or csv, got 'xml'\n");
            valid++;
        } else invalid++;
        run_t res;
        run(&res, args);
        if (res.code != 2 || strcmp(res.err, expect) != 0)
            fprintf(stderr, "case %d: %s %s -> exit %d\n", c, args[0], args[1] ? args[1] : "", res.code);
        CHECK_EQ(res.code, 2);
        CHECK_STR(res.err, expect);
        CHECK_STR(res.out, ""); /* no job started */
    }
    CHECK(valid > 20 && invalid > 40);
}

TEST(number_options) {
    static const struct {
        const char *opt, *val;
        bool ok;
    } cases[] = {
        {"--rate", "0", true},          {"--rate", "1500.5", true},   {"--rate", "-1", false},
        {"--rate", "inf", false},       {"--rate", "nan", false},     {"--rate", "fast", false},
        {"--late-fraction", "0", true}, {"--late-fraction", "1", true}, {"--late-fraction", "0.25", true},
        {"--late-fraction", "1.01", false}, {"--late-fraction", "-0.1", false}, {"--late-fraction", "", false},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *args[] = {cases[i].opt, cases[i].val, "--format", "xml", NULL};
        run_t res;
        run(&res, args);
        CHECK_EQ(res.code, 2);
        char prefix[128];
        snprintf(prefix, sizeof prefix, "sluice: %s: expected ", cases[i].ok ? "--format" : cases[i].opt);
        CHECK(strncmp(res.err, prefix, strlen(prefix)) == 0);
        char tail[128];
        snprintf(tail, sizeof tail, "got '%s'\n", cases[i].ok ? "xml" : cases[i].val);
        CHECK(strlen(res.err) >= strlen(tail) && strcmp(res.err + strlen(res.err) - strlen(tail), tail) == 0);
    }
}

/* Small valid runs: the values are taken (the banner and the summary show
 * them) and the job succeeds. */
TEST(valid_values_are_used) {
    uint64_t r = 0x7a1;
    for (int c = 0; c < 3; c++) {
        char p[16], ev[16], cards[16];
        snprintf(p, sizeof p, "%d", 1 + rnd(&r, 3));
        snprintf(ev, sizeof ev, "%d", 1 + rnd(&r, 500));
        snprintf(cards, sizeof cards, "%d", 1 + rnd(&r, 20));
        const char *args[] = {"-p", p, "--events", ev, "--cards", cards, "--splits", "1", "--late-fraction", "0",
                              "--idle-timeout=0", NULL};
        run_t res;
        run(&res, args);
        CHECK_EQ(res.code, 0);
        char banner[128];
        snprintf(banner, sizeof banner, "parallelism %s)", p);
        CHECK_CONTAINS(res.out, banner);
        char line[128];
        snprintf(line, sizeof line, "  events in     %14s", ev);
        CHECK_CONTAINS(res.out, line);
    }
}

/* ---- unknown options ---- */

static int ref_distance(const char *a, const char *b) {
    int la = (int)strlen(a), lb = (int)strlen(b);
    int d[64][64];
    for (int i = 0; i <= la; i++) d[i][0] = i;
    for (int j = 0; j <= lb; j++) d[0][j] = j;
    for (int i = 1; i <= la; i++)
        for (int j = 1; j <= lb; j++) {
            int best = d[i - 1][j - 1] + (a[i - 1] != b[j - 1]);
            if (d[i - 1][j] + 1 < best) best = d[i - 1][j] + 1;
            if (d[i][j - 1] + 1 < best) best = d[i][j - 1] + 1;
            d[i][j] = best;
        }
    return d[la][lb];
}

TEST(unknown_options_suggest_random) {
    const char *none[] = {"--help", NULL};
    run_t help;
    run(&help, none);
    CHECK_EQ(help.code, 0);
    /* the options, as --help lists them: lines "  -x, --long ARG   text" */
    char opts[64][40];
    int nopts = 0;
    for (char *line = help.out; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl) *nl = 0;
        if (line[0] == ' ' && line[1] == ' ' && line[2] == '-') {
            char *p = line + 2;
            for (;;) {
                int len = (int)strcspn(p, " ,");
                if (nopts < 64 && len < 40) snprintf(opts[nopts++], 40, "%.*s", len, p);
                if (p[len] == ',' && p[len + 1] == ' ' && p[len + 2] == '-') p += len + 2;
                else break;
            }
        }
        line = nl ? nl + 1 : NULL;
    }
    CHECK(nopts >= 20);
    uint64_t r = getenv("SLUICE_RAND_SEED") ? strtoull(getenv("SLUICE_RAND_SEED"), NULL, 0) : 0x7790;
    int suggested = 0, unsuggested = 0;
    for (int c = 0; c < 120; c++) {
        char typo[64];
        const char *base = opts[rnd(&r, nopts)];
        snprintf(typo, sizeof typo, "%s", base);
        int edits = 1 + (rnd(&r, 4) == 0) * (1 + rnd(&r, 4)); /* mostly one edit, sometimes several */
        for (int e = 0; e < edits; e++) {
            int len = (int)strlen(typo), at = rnd(&r, len + 1);
            char ch = "abcdefghijklmnopqrstuvwxyz-"[rnd(&r, 27)];
            switch (rnd(&r, 3)) {
            case 0: /* delete */
                if (at < len && len > 1) memmove(typo + at, typo + at + 1, (size_t)(len - at));
                break;
            case 1: /* insert */
                memmove(typo + at + 1, typo + at, (size_t)(len - at + 1));
                typo[at] = ch;
                break;
            default: /* substitute */
                if (at < len) typo[at] = ch;
                break;
            }
        }
        bool known = false;
        for (int i = 0; i < nopts; i++) known |= strcmp(typo, opts[i]) == 0;
        /* skip what is an option after all, -D's glued form, positional words, --x=y */
        if (known || !strncmp(typo, "-D", 2) || !strcmp(typo, "run") || !strcmp(typo, "fraud") || strchr(typo, '='))
            continue;
        int limit = (int)strlen(typo) / 5 > 2 ? (int)strlen(typo) / 5 : 2;
        const char *best = NULL;
        int best_d = INT_MAX;
        for (int i = 0; i < nopts; i++) {
            int d = ref_distance(typo, opts[i]);
            if (d < best_d) best_d = d, best = opts[i];
        }
        char expect[256];
        if (best_d <= limit) {
            snprintf(expect, sizeof expect, "sluice: unknown option '%s' (did you mean %s?)\n", typo, best);
            suggested++;
        } else {
            snprintf(expect, sizeof expect, "sluice: unknown option '%s' (see sluice --help)\n", typo);
            unsuggested++;
        }
        const char *args[] = {typo, NULL};
        run_t res;
        run(&res, args);
        CHECK_EQ(res.code, 2);
        CHECK_STR(res.err, expect);
    }
    CHECK(suggested > 40 && unsuggested > 3);
}

TEST(help_config_lists_the_keys) {
    const char *args[] = {"--help-config", NULL};
    run_t res;
    run(&res, args);
    CHECK_EQ(res.code, 0);
    CHECK_CONTAINS(res.out, "\nexecution.checkpointing.interval\n    duration, default: not set");
    CHECK_CONTAINS(res.out, "\nparallelism.default\n");
    const char *bad[] = {"--help-config=x", NULL};
    run(&res, bad);
    CHECK_EQ(res.code, 2);
    CHECK_STR(res.err, "sluice: --help-config takes no value, got 'x'\n");
}

/* `sluice info JOB args` prints the plan of the job it builds (Flink's
 * execution-plan JSON): the cluster test job's three operators with their
 * uids, parallelism and how each is fed, and nothing runs. */
TEST(info_prints_the_plan) {
    char o[700], c[700];
    snprintf(o, sizeof o, "%s/info-out", sl_test_tmpdir());
    snprintf(c, sizeof c, "%s/info-ck", sl_test_tmpdir());
    const char *args[] = {"info", SLUICE_CLUSTER_JOB, o, c, "1000", "--p=3", NULL};
    run_t res;
    run(&res, args);
    CHECK_EQ(res.code, 0);
    const char *a = strstr(res.out, "Execution Plan -----------------------\n"), *b = a ? strstr(a, "\n---") : NULL;
    CHECK(a && b);
    if (!a || !b) return;
    a = strchr(a, '\n') + 1;
    json_t *j = json_loadb(a, (size_t)(b - a), 0, NULL);
    json_t *nodes = json_object_get(j, "nodes");
    CHECK(json_is_array(nodes) && json_array_size(nodes) == 3);
    int hash = 0, sources = 0;
    for (size_t i = 0; i < json_array_size(nodes); i++) {
        json_t *n = json_array_get(nodes, i);
        CHECK_EQ(json_integer_value(json_object_get(n, "parallelism")), 3);
        CHECK(json_is_string(json_object_get(n, "uid")));
        sources += !strcmp(json_string_value(json_object_get(n, "pact")), "Data Source");
        json_t *pred = json_object_get(n, "predecessors");
        for (size_t k = 0; k < json_array_size(pred); k++)
            hash += !strcmp(json_string_value(json_object_get(json_array_get(pred, k), "ship_strategy")), "HASH");
    }
    json_decref(j);
    CHECK_EQ(sources, 1);
    CHECK_EQ(hash, 1); /* the window is fed by key */
    CHECK_CONTAINS(res.out, "3 operators in 3 tasks, 9 subtasks");
    CHECK(access(o, F_OK) != 0); /* nothing ran */
    const char *bad[] = {"info", "no-such-job", NULL};
    run(&res, bad);
    CHECK_EQ(res.code, 1);
    CHECK_CONTAINS(res.err, "no-such-job");
    const char *none[] = {"info", NULL};
    run(&res, none);
    CHECK_EQ(res.code, 2);
}

int main(void) {
    RUN(integer_options_random);
    RUN(info_prints_the_plan);
    RUN(help_config_lists_the_keys);
    RUN(number_options);
    RUN(valid_values_are_used);
    RUN(unknown_options_suggest_random);
    TEST_MAIN_END();
}
