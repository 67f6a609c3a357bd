/* test_fraud.c — the S1 fraud job end to end: results checked against a
 * reference computed from the generator's events; every event either in a
 * window or late, never both; file input with malformed records under
 * both error policies; the `sluice` binary's command line. */
#include <jansson.h>
#include <math.h>
#include <sys/wait.h>
#include <time.h>

#include "connectors/connectors.h"
#include "fraud_job.h"
#include "test.h"

typedef struct win {
    int64_t card, start, end, count;
    double sum;
} win_t;

static int cmp_win(const void *a, const void *b) {
    const win_t *x = a, *y = b;
    if (x->card != y->card) return x->card < y->card ? -1 : 1;
    if (x->start != y->start) return x->start < y->start ? -1 : 1;
    return 0;
}

/* Reads window results (JSON lines) into an array. */
static win_t *read_windows(const char *path, int64_t *n) {
    FILE *f = fopen(path, "r");
    if (!f) return NULL;
    win_t *w = NULL;
    int64_t cap = 0;
    *n = 0;
    char *line = NULL;
    size_t lcap = 0;
    while (getline(&line, &lcap, f) > 0) {
        json_error_t e;
        json_t *o = json_loads(line, 0, &e);
        if (!o) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 1024;
            w = realloc(w, (size_t)cap * sizeof *w);
        }
        w[*n].card = json_integer_value(json_object_get(o, "card_id"));
        w[*n].count = json_integer_value(json_object_get(o, "txn_count"));
        w[*n].sum = json_number_value(json_object_get(o, "total_amount"));
        const char *s = json_string_value(json_object_get(o, "window_start"));
        struct tm tm = {0};
        int ms = 0;
        if (s && sscanf(s, "%d-%d-%dT%d:%d:%d.%dZ", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min,
                        &tm.tm_sec, &ms) == 7) {
            tm.tm_year -= 1900;
            tm.tm_mon -= 1;
            w[*n].start = (int64_t)timegm(&tm) * 1000 + ms;
        } else {
            w[*n].start = json_integer_value(json_object_get(o, "window_start"));
        }
        (*n)++;
        json_decref(o);
    }
    free(line);
    fclose(f);
    return w;
}

static int64_t count_lines(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    int64_t n = 0;
    int c;
    while ((c = fgetc(f)) != EOF) n += c == '\n';
    fclose(f);
    return n;
}

static void paths(char *out, char *late, const char *name) {
    snprintf(out, 1024, "%s/%s-windows.jsonl", sl_test_tmpdir(), name);
    snprintf(late, 1024, "%s/%s-late.jsonl", sl_test_tmpdir(), name);
}

/* No late events possible (disorder within the bound): every (card,
 * window) result equals the brute-force aggregate of the generator. */
TEST(exact_against_reference) {
    char out[1024], late[1024];
    paths(out, late, "exact");
    fraud_opts_t o = fraud_defaults();
    o.gen.count = 200000;
    o.gen.cards = 500;
    o.gen.late_fraction = 0;
    o.gen.max_disorder_ms = 4000; /* < 5 s bound */
    o.parallelism = 3;
    o.output = out;
    o.late_output = late;
    fraud_summary_t s;
    char err[1024];
    CHECK_EQ(fraud_run(&o, &s, err, sizeof err), 0);
    CHECK_EQ(s.events_in, 200000);
    CHECK_EQ(s.late_events, 0);
    /* reference */
    int64_t W = o.window_ms, cap = 1 << 16, nref = 0;
    win_t *ref = calloc((size_t)cap, sizeof *ref);
    for (int sp = 0; sp < o.gen.splits; sp++) {
        int64_t n = sl_datagen_split_count(&o.gen, sp);
        for (int64_t i = 0; i < n; i++) {
            sl_datagen_event_t ev;
            sl_datagen_event(&o.gen, sp, i, &ev);
            int64_t start = ev.ts - (((ev.ts % W) + W) % W);
            win_t key = {ev.card_id, start, start + W, 0, 0};
            /* linear probe table keyed by (card, start) */
            uint64_t h = ((uint64_t)ev.card_id * 0x9e3779b97f4a7c15ULL) ^ (uint64_t)start;
            int64_t slot = (int64_t)(h % (uint64_t)cap);
            while (ref[slot].count && (ref[slot].card != key.card || ref[slot].start != key.start))
                slot = (slot + 1) % cap;
            if (!ref[slot].count) {
                ref[slot] = key;
                nref++;
            }
            ref[slot].count++;
            ref[slot].sum += ev.amount;
            CHECK(nref < cap / 2);
        }
    }
    int64_t ngot;
    win_t *got = read_windows(out, &ngot);
    CHECK(got != NULL);
    CHECK_EQ(ngot, nref);
    CHECK_EQ(s.windows_out, nref);
    /* compact and sort the reference */
    int64_t k = 0;
    for (int64_t i = 0; i < cap; i++)
        if (ref[i].count) ref[k++] = ref[i];
    qsort(ref, (size_t)k, sizeof *ref, cmp_win);
    qsort(got, (size_t)ngot, sizeof *got, cmp_win);
    for (int64_t i = 0; i < k; i++) {
        CHECK_EQ(got[i].card, ref[i].card);
        CHECK_EQ(got[i].start, ref[i].start);
        CHECK_EQ(got[i].count, ref[i].count);
        CHECK(fabs(got[i].sum - ref[i].sum) < 1e-6 * (1 + ref[i].sum));
    }
    free(ref);
    free(got);
}

/* With late events: each event is in exactly one place. */
TEST(every_event_once) {
    char out[1024], late[1024];
    paths(out, late, "late");
    fraud_opts_t o = fraud_defaults();
    o.gen.count = 300000;
    o.gen.late_fraction = 0.02;
    o.parallelism = 2;
    o.output = out;
    o.late_output = late;
    fraud_summary_t s;
    char err[1024];
    CHECK_EQ(fraud_run(&o, &s, err, sizeof err), 0);
    int64_t n;
    win_t *got = read_windows(out, &n);
    int64_t total = 0;
    for (int64_t i = 0; i < n; i++) total += got[i].count;
    int64_t nlate = count_lines(late);
    CHECK_EQ(nlate, s.late_events);
    CHECK(nlate > 0);
    CHECK_EQ(total + nlate, 300000);
    /* no (card, window) emitted twice without allowed lateness */
    qsort(got, (size_t)n, sizeof *got, cmp_win);
    for (int64_t i = 1; i < n; i++) CHECK(cmp_win(&got[i - 1], &got[i]) != 0);
    free(got);
}

static void write_file(const char *path, const char *text) {
    FILE *f = fopen(path, "w");
    fputs(text, f);
    fclose(f);
}

TEST(file_input_policies) {
    char in[1024], out[1024], late[1024];
    snprintf(in, sizeof in, "%s/txns.jsonl", sl_test_tmpdir());
    paths(out, late, "file");
    write_file(in,
               "{\"card_id\": 1, \"amount\": 10.5, \"ts\": 1767225600000}\n"
               "{\"card_id\": 2, \"amount\": 20.0, \"ts\": 1767225601000}\n"
               "{\"card_id\": 1, \"amount\": \"lots\", \"ts\": 1767225602000}\n"
               "{\"card_id\": 1, \"amount\": 5.0, \"ts\": \"2026-01-01T00:01:00.000Z\"}\n"
               "{\"card_id\": 3, \"amount\": 1.0, \"ts\": 1767225900000}\n");
    fraud_opts_t o = fraud_defaults();
    o.input = in;
    o.output = out;
    o.late_output = late;
    fraud_summary_t s;
    char err[1024] = "";
    CHECK(fraud_run(&o, &s, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "txns.jsonl");
    CHECK_CONTAINS(err, "line 3");
    CHECK_CONTAINS(err, "amount");
    o.on_error = SL_ON_ERROR_SKIP;
    CHECK_EQ(fraud_run(&o, &s, err, sizeof err), 0);
    CHECK_EQ(s.skipped, 1);
    CHECK_EQ(s.events_in, 4);
    int64_t n;
    win_t *got = read_windows(out, &n);
    CHECK_EQ(n, 3); /* card 1 and 2 in [00:00, 00:05), card 3 in [00:05, 00:10) */
    qsort(got, (size_t)n, sizeof *got, cmp_win);
    CHECK_EQ(got[0].card, 1);
    CHECK_EQ(got[0].count, 2);
    CHECK_DBL(got[0].sum, 15.5);
    CHECK_EQ(got[2].card, 3);
    CHECK_EQ(got[2].start, 1767225900000LL);
    free(got);
    /* CSV */
    snprintf(in, sizeof in, "%s/txns.csv", sl_test_tmpdir());
    write_file(in, "7,1.25,1767225600000\n7,2.75,1767225600500\n");
    o.input = in;
    o.input_format = SL_FMT_CSV;
    CHECK_EQ(fraud_run(&o, &s, err, sizeof err), 0);
    got = read_windows(out, &n);
    CHECK_EQ(n, 1);
    CHECK_EQ(got[0].count, 2);
    CHECK_DBL(got[0].sum, 4.0);
    free(got);
    /* a missing file is named */
    o.input = "/nonexistent/txns.csv";
    CHECK(fraud_run(&o, &s, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "/nonexistent/txns.csv");
}

static int run_cli(const char *args, char *out, size_t cap) {
    char cmd[1024];
    snprintf(cmd, sizeof cmd, "cd '%s' && '%s' %s 2>&1", sl_test_tmpdir(), SLUICE_BIN, args);
    FILE *p = popen(cmd, "r");
    size_t n = fread(out, 1, cap - 1, p);
    out[n] = 0;
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

TEST(cli) {
    char out[8192];
    CHECK_EQ(run_cli("--events 20000 --cards 100", out, sizeof out), 0);
    CHECK_CONTAINS(out, "events in");
    CHECK_CONTAINS(out, "20,000");
    CHECK_CONTAINS(out, "windows out");
    CHECK_EQ(run_cli("--bogus", out, sizeof out), 2);
    CHECK_CONTAINS(out, "unknown option '--bogus'");
    CHECK_EQ(run_cli("--events ten", out, sizeof out), 2);
    CHECK_CONTAINS(out, "--events: expected an integer");
    CHECK_EQ(run_cli("--input /nonexistent.jsonl", out, sizeof out), 1);
    CHECK_CONTAINS(out, "/nonexistent.jsonl");
    CHECK_EQ(run_cli("--help", out, sizeof out), 0);
    CHECK_CONTAINS(out, "usage: sluice");
    /* config.yaml with Flink's keys */
    char cfgp[1024];
    snprintf(cfgp, sizeof cfgp, "%s/config.yaml", sl_test_tmpdir());
    FILE *f = fopen(cfgp, "w");
    fputs("execution:\n  checkpointing:\n    interval: 20 ms\n    dir: ckpts\nparallelism.default: 1\n", f);
    fclose(f);
    char args[1200];
    snprintf(args, sizeof args, "--events 100000 --rate 400000 --config '%s'", cfgp);
    CHECK_EQ(run_cli(args, out, sizeof out), 0);
    CHECK_CONTAINS(out, "parallelism 1");
    CHECK_CONTAINS(out, "checkpoints");
    CHECK_CONTAINS(out, "synchronous phase max");
    CHECK_CONTAINS(out, "per task:");            /* the last checkpoint's figures per task */
    CHECK_CONTAINS(out, "count-and-sum");
    CHECK_EQ(run_cli("-D execution.checkpointing.intervall=10s", out, sizeof out), 2);
    CHECK_CONTAINS(out, "execution.checkpointing.interval"); /* did you mean */
    /* a setting sluice does not have is refused by name */
    CHECK_EQ(run_cli("-Dexecution.checkpointing.incremental=true --events 10", out, sizeof out), 1);
    CHECK_CONTAINS(out, "execution.checkpointing.incremental: true needs state.backend.type rocksdb");
}

int main(void) {
    RUN(exact_against_reference);
    RUN(every_event_once);
    RUN(file_input_policies);
    RUN(cli);
    TEST_MAIN_END();
}
