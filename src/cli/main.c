/*
 * main.c — the `sluice` command.
 *
 *   sluice                      runs the S1 fraud job on the built-in generator
 *   sluice run [fraud] [opts]   the same, with options (see --help)
 *   sluice state read PATH ...  a checkpoint's keyed state as JSON lines (state_read.c)
 *   sluice state query JOBID .. a running job's keyed state for one key (state_query.c)
 *
 * The cluster verbs Flink users know (run, list, cancel, savepoint, stop)
 * are in client.c.
 */
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/client.h"
#include "cli/cluster.h"
#include "cli/state_read.h"
#include "config/config.h"
#include "config/suggest.h"
#include "fraud_job.h"

#define SLUICE_VERSION "0.1.0"

/* sql_cmd.c: `sluice sql ...` and `sluice run PLAN.json` */
int sl_sql_cli_main(int argc, char **argv);
int sl_sql_cli_run_plan(int argc, char **argv);
int sl_sql_cli_is_plan(const char *arg);

static void usage(FILE *f) {
    fprintf(f,
            "usage: sluice [run [fraud]] [options]\n"
            "\n"
            "Runs the S1 fraud pipeline: card transactions -> event time (5 s bounded\n"
            "out-of-orderness) -> key_by(card_id) -> 5-minute tumbling windows (count,\n"
            "sum) -> results file; late events -> their own file.\n"
            "\n"
            "input:\n"
            "  --input FILE[,FILE...]   read transactions from files instead of the generator\n"
            "  --format json|csv        format of --input (default json)\n"
            "  --on-error fail|skip     malformed input: fail the job (default) or skip and count\n"
            "generator:\n"
            "  --events N               number of transactions (default 1000000; -1 = unbounded)\n"
            "  --cards N                distinct cards (default 10000)\n"
            "  --splits N               generator splits (default 4)\n"
            "  --rate R                 events per second, 0 = as fast as possible (default 0)\n"
            "  --seed S                 generator seed (default 42)\n"
            "  --late-fraction F        share of late events (default 0.001)\n"
            "job:\n"
            "  -p, --parallelism P      parallelism (default 2)\n"
            "  --allowed-lateness MS    allowed lateness of windows (default 0)\n"
            "  --idle-timeout MS        split idleness timeout (default 60000)\n"
            "  --output FILE            window results, JSON lines (default fraud-windows.jsonl)\n"
            "  --late-output FILE       late events, JSON lines (default fraud-late.jsonl)\n"
            "  --print                  also print every window result\n"
            "checkpoints:\n"
            "  --checkpoint-interval MS exactly-once checkpoints every MS (default: off)\n"
            "  --checkpoint-dir DIR     write checkpoints to DIR/fraud-detection/chk-<n>\n"
            "  --from-checkpoint PATH   restore from a chk-<n> directory, or the latest in a\n"
            "                           job's checkpoint directory (Flink's run -s PATH)\n"
            "  --exactly-once-output DIR  window results through the exactly-once file sink\n"
            "  --config FILE            a config.yaml with Flink's keys (execution.checkpointing.*,\n"
            "                           restart-strategy.*, parallelism.default, ...)\n"
            "  -D key=value             one configuration key (overrides the file)\n"
            "  --help-config            every configuration key: type, default, allowed values\n"
            "  -h, --help               this text\n"
            "  --version                sluice's version\n"
            "a cluster (Flink's commands; README, \"Running a cluster\"):\n"
            "  sluice jobmanager [--config FILE] [-D key=value]           the JobManager, in the foreground\n"
            "  sluice taskmanager [--config FILE] [-D key=value] [--id ID] a TaskManager\n"
            "  sluice run [-d] [-s PATH [-n]] [-m host:port] JOB.so [args...]  submit a job (-s: from a\n"
            "                                                             savepoint; -n: drop state of\n"
            "                                                             operators no longer there)\n"
            "  sluice run -t local JOB [args...]                          run a job (file, or built-in: fraud,\n"
            "                                                             nexmark) in this process\n"
            "  sluice list [-r] [-s] [-a] [-m host:port]                  the jobs\n"
            "  sluice cancel [-m host:port] JOBID\n"
            "  sluice savepoint [-m host:port] JOBID [DIR]                take a savepoint, print its path\n"
            "  sluice savepoint -d PATH                                   dispose of a savepoint\n"
            "  sluice stop [-m host:port] [-p DIR] [-d] JOBID             stop with a savepoint (-d: drain)\n"
            "  sluice info [-c NAME] JOB [args...]                        the job's plan, not run\n"
            "SQL (README, \"SQL\"):\n"
            "  sluice sql --compile FILE.sql... -o PLAN.json [-D NAME=VALUE]  Flink's planner compiles the script\n"
            "  sluice sql -f FILE.sql... [-p N]                           compile and run\n"
            "  sluice run PLAN.json [-p N] [--collect FILE]               run a compiled plan (no JVM)\n"
            "state (README, \"Reading state\"):\n"
            "  sluice state read PATH --uid UID [--state NAME] [--bytes auto|utf8|hex|base64]\n"
            "                           an operator's keyed state in a checkpoint, as JSON lines\n"
            "  sluice state query JOBID --uid UID --key K [--state NAME] [-m host:port]\n"
            "                           a running job's keyed state for one key, as JSON lines\n");
}

/* Every option, for "did you mean" (keep in step with usage() and main()). */
static const char *const OPTIONS[] = {
    "--input", "--format", "--on-error", "--events", "--cards", "--splits", "--rate", "--seed",
    "--late-fraction", "-p", "--parallelism", "--allowed-lateness", "--idle-timeout", "--output",
    "--late-output", "--print", "--checkpoint-interval", "--checkpoint-dir", "--from-checkpoint",
    "--exactly-once-output", "--config", "-D", "--help-config", "-h", "--help", "--version",
};

/* What an integer option accepts. */
typedef enum {
    INT_POSITIVE,     /* 1 .. max */
    INT_NON_NEGATIVE, /* 0 .. max */
    INT_UNBOUNDED,    /* -1 (unbounded) or 1 .. max */
    INT_ANY,          /* any 64-bit integer (a seed) */
} int_kind_t;

static const char *int_kind_text(int_kind_t k) {
    switch (k) {
    case INT_POSITIVE: return "a positive integer";
    case INT_NON_NEGATIVE: return "a non-negative integer";
    case INT_UNBOUNDED: return "an integer >= 1, or -1 (unbounded)";
    case INT_ANY: return "an integer";
    }
    return "an integer";
}

/* Parses s as the value of integer option opt: decimal digits with an
 * optional sign, in the range of kind and at most max.  On error prints
 * "sluice: OPT: expected ..., got 'S'" and returns -1. */
static int parse_int_opt(const char *opt, const char *s, int_kind_t kind, int64_t max, int64_t *out) {
    char *end;
    errno = 0;
    long long v = s && *s ? strtoll(s, &end, 10) : 0;
    bool ok = s && *s && (*s == '-' || *s == '+' || (*s >= '0' && *s <= '9')) && !*end && errno == 0;
    if (ok) {
        switch (kind) {
        case INT_POSITIVE: ok = v >= 1; break;
        case INT_NON_NEGATIVE: ok = v >= 0; break;
        case INT_UNBOUNDED: ok = v >= 1 || v == -1; break;
        case INT_ANY: break;
        }
        if (v > max) ok = false;
    }
    if (!ok) {
        if (!s) fprintf(stderr, "sluice: %s: expected %s, got nothing\n", opt, int_kind_text(kind));
        else if (errno == 0 && s[0] && !*end && v > max && kind != INT_ANY)
            fprintf(stderr, "sluice: %s: expected %s of at most %lld, got '%s'\n", opt, int_kind_text(kind),
                    (long long)max, s);
        else fprintf(stderr, "sluice: %s: expected %s, got '%s'\n", opt, int_kind_text(kind), s);
        return -1;
    }
    *out = v;
    return 0;
}

/* A finite number from lo to hi. */
static int parse_num_opt(const char *opt, const char *s, double lo, double hi, const char *what, double *out) {
    char *end;
    errno = 0;
    double v = s && *s ? strtod(s, &end) : 0;
    if (!s || !*s || *end || errno || !isfinite(v) || v < lo || v > hi) {
        fprintf(stderr, "sluice: %s: expected %s, got '%s'\n", opt, what, s ? s : "");
        return -1;
    }
    *out = v;
    return 0;
}

static void unknown_option(const char *a) {
    const char *best = sl_suggest(a, OPTIONS, (int)(sizeof OPTIONS / sizeof OPTIONS[0]), false);
    if (best) fprintf(stderr, "sluice: unknown option '%s' (did you mean %s?)\n", a, best);
    else fprintf(stderr, "sluice: unknown option '%s' (see sluice --help)\n", a);
}

static void group(char *buf, size_t cap, int64_t v) {
    char tmp[32];
    snprintf(tmp, sizeof tmp, "%" PRId64, v < 0 ? -v : v);
    size_t n = strlen(tmp), o = 0;
    if (v < 0 && o + 1 < cap) buf[o++] = '-';
    for (size_t i = 0; i < n && o + 2 < cap; i++) {
        if (i && (n - i) % 3 == 0) buf[o++] = ',';
        buf[o++] = tmp[i];
    }
    buf[o] = 0;
}

static void show_head(const char *path, int lines) {
    FILE *f = fopen(path, "r");
    if (!f) return;
    char line[1024];
    for (int i = 0; i < lines && fgets(line, sizeof line, f); i++) printf("    %s", line);
    fclose(f);
}

/* Frees the configuration on every way out (sanitizer builds check leaks). */
static int finish(sl_config_t *cfg, int rc) {
    sl_config_free(cfg);
    return rc;
}

int main(int argc, char **argv) {
    /* The cluster verbs (src/cli/client.c): list, cancel, and run when it
     * is for a JobManager (-m, a cluster-only option, a job file, or a
     * configured JobManager address); otherwise `run` is the embedded job. */
    if (argc > 1 && !strcmp(argv[1], "jobmanager")) return sl_cli_jobmanager(argc - 2, argv + 2);
    if (argc > 1 && !strcmp(argv[1], "taskmanager")) return sl_cli_taskmanager(argc - 2, argv + 2);
    if (argc > 1 && !strcmp(argv[1], "list")) return sl_cli_list(argc - 2, argv + 2);
    if (argc > 1 && !strcmp(argv[1], "cancel")) return sl_cli_cancel(argc - 2, argv + 2);
    if (argc > 1 && !strcmp(argv[1], "savepoint")) return sl_cli_savepoint(argc - 2, argv + 2);
    if (argc > 1 && !strcmp(argv[1], "stop")) return sl_cli_stop(argc - 2, argv + 2);
    if (argc > 1 && !strcmp(argv[1], "info")) return sl_cli_info(argc - 2, argv + 2);
    if (argc > 1 && !strcmp(argv[1], "state")) return sl_state_cli_main(argc - 2, argv + 2);
    if (argc > 1 && !strcmp(argv[1], "sql")) return sl_sql_cli_main(argc - 2, argv + 2);
    if (argc > 2 && !strcmp(argv[1], "run") && sl_sql_cli_is_plan(argv[2])) return sl_sql_cli_run_plan(argc - 2, argv + 2);
    if (argc > 1 && !strcmp(argv[1], "run") && sl_cli_run_is_remote(argc - 2, argv + 2))
        return sl_cli_run(argc - 2, argv + 2);
    fraud_opts_t o = fraud_defaults();
    sl_config_t cfg;
    sl_config_defaults(&cfg);
    bool have_cfg = false, explicit_p = false;
    char cerr[2048];
    int i = 1;
    if (i < argc && strcmp(argv[i], "run") == 0) i++;
    if (i < argc && strcmp(argv[i], "fraud") == 0) i++;
    char optbuf[64];
    for (; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool inline_v = false; /* --opt=value */
        const char *eqp = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        if (eqp && (size_t)(eqp - a) < sizeof optbuf) {
            snprintf(optbuf, sizeof optbuf, "%.*s", (int)(eqp - a), a);
            a = optbuf;
            v = eqp + 1;
            inline_v = true;
        }
        int64_t n;
        double d;
#define NEXT_INT(dst, kind, max)                                               \
    do {                                                                       \
        if (parse_int_opt(a, v, kind, max, &n) < 0) return finish(&cfg, 2);   \
        dst = n;                                                               \
        i += !inline_v;                                                        \
    } while (0)
        if (inline_v && (!strcmp(a, "--help") || !strcmp(a, "--help-config") || !strcmp(a, "--version") ||
                         !strcmp(a, "--print"))) {
            fprintf(stderr, "sluice: %s takes no value, got '%s'\n", a, v);
            return finish(&cfg, 2);
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return finish(&cfg, 0);
        } else if (!strcmp(a, "--help-config")) {
            sl_buf_t b = {0};
            sl_config_help(&b);
            fputs((const char *)b.p, stdout);
            sl_buf_free(&b);
            return finish(&cfg, 0);
        } else if (!strcmp(a, "--version")) {
            printf("sluice %s\n", SLUICE_VERSION);
            return finish(&cfg, 0);
        } else if (!strcmp(a, "--input")) {
            if (!v) { fprintf(stderr, "sluice: --input needs a file\n"); return finish(&cfg, 2); }
            o.input = v;
            i += !inline_v;
        } else if (!strcmp(a, "--format")) {
            if (v && !strcmp(v, "json")) o.input_format = SL_FMT_JSON;
            else if (v && !strcmp(v, "csv")) o.input_format = SL_FMT_CSV;
            else { fprintf(stderr, "sluice: --format: expected json or csv, got '%s'\n", v ? v : ""); return finish(&cfg, 2); }
            i += !inline_v;
        } else if (!strcmp(a, "--on-error")) {
            if (v && !strcmp(v, "fail")) o.on_error = SL_ON_ERROR_FAIL;
            else if (v && !strcmp(v, "skip")) o.on_error = SL_ON_ERROR_SKIP;
            else { fprintf(stderr, "sluice: --on-error: expected fail or skip, got '%s'\n", v ? v : ""); return finish(&cfg, 2); }
            i += !inline_v;
        } else if (!strcmp(a, "--config")) {
            if (!v) { fprintf(stderr, "sluice: --config needs a file\n"); return finish(&cfg, 2); }
            if (sl_config_load_file(&cfg, v, cerr, sizeof cerr) < 0) {
                fprintf(stderr, "sluice: %s\n", cerr);
                return finish(&cfg, 2);
            }
            have_cfg = true;
            i += !inline_v;
        } else if (!strncmp(a, "-D", 2)) {
            const char *kv = a[2] ? a + 2 : v;
            const char *eq = kv ? strchr(kv, '=') : NULL;
            if (!eq) { fprintf(stderr, "sluice: -D needs key=value, got '%s'\n", kv ? kv : ""); return finish(&cfg, 2); }
            char key[256];
            snprintf(key, sizeof key, "%.*s", (int)(eq - kv), kv);
            if (sl_config_set(&cfg, key, eq + 1, cerr, sizeof cerr) < 0) {
                fprintf(stderr, "sluice: %s\n", cerr);
                return finish(&cfg, 2);
            }
            have_cfg = true;
            if (!a[2]) i++;
        } else if (!strcmp(a, "--events")) NEXT_INT(o.gen.count, INT_UNBOUNDED, INT64_MAX);
        else if (!strcmp(a, "--cards")) NEXT_INT(o.gen.cards, INT_POSITIVE, INT64_MAX);
        else if (!strcmp(a, "--splits")) NEXT_INT(o.gen.splits, INT_POSITIVE, INT_MAX);
        else if (!strcmp(a, "--seed")) NEXT_INT(o.gen.seed, INT_ANY, INT64_MAX);
        else if (!strcmp(a, "-p") || !strcmp(a, "--parallelism")) {
            NEXT_INT(o.parallelism, INT_POSITIVE, INT_MAX);
            explicit_p = true;
        }
        else if (!strcmp(a, "--allowed-lateness")) NEXT_INT(o.allowed_lateness_ms, INT_NON_NEGATIVE, INT64_MAX);
        else if (!strcmp(a, "--idle-timeout")) NEXT_INT(o.idle_timeout_ms, INT_NON_NEGATIVE, INT64_MAX);
        else if (!strcmp(a, "--rate")) {
            if (parse_num_opt(a, v, 0, INFINITY, "a number >= 0 (events per second)", &d) < 0) return finish(&cfg, 2);
            o.gen.rate = d;
            i += !inline_v;
        } else if (!strcmp(a, "--late-fraction")) {
            if (parse_num_opt(a, v, 0, 1, "a number from 0 to 1", &d) < 0) return finish(&cfg, 2);
            o.gen.late_fraction = d;
            i += !inline_v;
        } else if (!strcmp(a, "--output")) {
            if (!v) { fprintf(stderr, "sluice: --output needs a file\n"); return finish(&cfg, 2); }
            o.output = v;
            i += !inline_v;
        } else if (!strcmp(a, "--late-output")) {
            if (!v) { fprintf(stderr, "sluice: --late-output needs a file\n"); return finish(&cfg, 2); }
            o.late_output = v;
            i += !inline_v;
        } else if (!strcmp(a, "--print")) {
            o.print = true;
        } else if (!strcmp(a, "--checkpoint-interval")) {
            NEXT_INT(o.checkpoint_interval_ms, INT_POSITIVE, INT64_MAX);
        } else if (!strcmp(a, "--checkpoint-dir") || !strcmp(a, "--from-checkpoint") ||
                   !strcmp(a, "--exactly-once-output")) {
            if (!v) { fprintf(stderr, "sluice: %s needs a path\n", a); return finish(&cfg, 2); }
            if (!strcmp(a, "--checkpoint-dir")) o.checkpoint_dir = v;
            else if (!strcmp(a, "--from-checkpoint")) o.from_checkpoint = v;
            else o.exactly_once_dir = v;
            i += !inline_v;
        } else {
            unknown_option(argv[i]);
            return finish(&cfg, 2);
        }
    }
    if (have_cfg) {
        if (sl_config_validate(&cfg, cerr, sizeof cerr) < 0) {
            fprintf(stderr, "sluice: %s\n", cerr);
            return finish(&cfg, 2);
        }
        o.config = &cfg;
        if (!explicit_p) o.parallelism = cfg.parallelism;
        if (!o.checkpoint_dir && cfg.checkpoint_dir) o.checkpoint_dir = cfg.checkpoint_dir;
    }
    printf("sluice %s: running fraud-detection (%s, parallelism %d)\n", SLUICE_VERSION,
           o.input ? o.input : "built-in generator", o.parallelism);
    fflush(stdout);
    fraud_summary_t s;
    char err[1024] = "";
    int rc = fraud_run(&o, &s, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "sluice: job failed: %s\n", err[0] ? err : "unknown error");
        return finish(&cfg, 1);
    }
    char a[32], b[32], c[32], d2[32], e[32];
    group(a, sizeof a, s.events_in);
    group(b, sizeof b, s.windows_out);
    group(c, sizeof c, s.late_events);
    group(d2, sizeof d2, s.skipped);
    group(e, sizeof e, s.seconds > 0 ? (int64_t)((double)s.events_in / s.seconds) : 0);
    printf("fraud-detection finished in %.2f s\n", s.seconds);
    printf("  events in     %14s  (%s events/s)\n", a, e);
    printf("  windows out   %14s  -> %s\n", b, o.exactly_once_dir ? o.exactly_once_dir : o.output);
    printf("  late events   %14s  -> %s\n", c, o.late_output);
    if (s.checkpoints) {
        printf("  checkpoints   %14lld  -> %s\n", (long long)s.checkpoints,
               o.checkpoint_dir ? o.checkpoint_dir : "(not persisted)");
        printf("                end to end: last %lld ms, max %lld ms; synchronous phase max %lld us\n",
               (long long)s.ckpt_last_ms, (long long)s.ckpt_max_ms, (long long)s.ckpt_max_sync_us);
        if (s.ckpt_last.id > 0) {
            printf("                last taken while running (chk-%lld): %lld bytes persisted, %lld in flight; per task:\n",
                   (long long)s.ckpt_last.id, (long long)s.ckpt_last.state_bytes,
                   (long long)s.ckpt_last.inflight_bytes);
            printf("                  %-44s %10s %10s %10s %12s\n", "task", "align us", "sync us", "async us",
                   "bytes");
            for (int i = 0; i < s.ckpt_ntasks; i++)
                printf("                  %-44.44s %10lld %10lld %10lld %12lld%s\n", s.ckpt_tasks[i].task,
                       (long long)s.ckpt_tasks[i].align_us, (long long)s.ckpt_tasks[i].sync_us,
                       (long long)s.ckpt_tasks[i].async_us, (long long)s.ckpt_tasks[i].state_bytes,
                       s.ckpt_tasks[i].unaligned ? " unaligned" : "");
        }
    }
    if (s.skipped) printf("  skipped       %14s  (malformed input)\n", d2);
    if (!o.exactly_once_dir) {
        printf("  first results:\n");
        show_head(o.output, 3);
    }
    return finish(&cfg, 0);
}
