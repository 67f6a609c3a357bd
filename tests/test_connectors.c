/* test_connectors.c — file source, file/print/counting sinks and datagen,
 * driven through their ops tables with the runtime's capture output. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <sys/stat.h>

#include "connectors/connectors.h"
#include "formats/format.h"
#include "operators/source_op.h"
#include "sluice/sluice.h"
#include "test.h"

static sl_schema_t *parse(const char *ddl) {
    char err[256];
    sl_schema_t *s = sl_schema_parse(ddl, err, sizeof err);
    if (!s) {
        fprintf(stderr, "schema: %s\n", err);
        abort();
    }
    return s;
}

static const char *tmp_path(const char *name) {
    static char buf[8][600];
    static int k;
    char *p = buf[k++ % 8];
    snprintf(p, 600, "%s/%s", sl_test_tmpdir(), name);
    return p;
}

static void write_file_n(const char *path, const char *text, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(text, 1, n, f) != n) abort();
    fclose(f);
}
static void write_file(const char *path, const char *text) { write_file_n(path, text, strlen(text)); }

/* Creates a reader and polls it to the end (or an error) with polls of
 * `max`.  Returns the last poll's result (SL_SRC_END or an error); err gets
 * the message. */
static int drain(const sl_source_t *src, int subtask, int p, int max, sl_source_output_t *out, int *nsplits,
                 char *err, size_t errlen) {
    void *reader = NULL;
    int n = -1;
    err[0] = 0;
    int rc = src->ops->create_reader(src->ctx, subtask, p, &reader, &n, err, errlen);
    if (rc < 0) return rc;
    if (nsplits) *nsplits = n;
    for (int guard = 0; guard < 10000000; guard++) {
        rc = src->ops->poll(reader, out, max, err, errlen);
        if (rc != SL_SRC_MORE) break;
    }
    src->ops->destroy_reader(reader);
    return rc;
}

static void source_free(sl_source_t *src) {
    src->ops->destroy(src->ctx);
    sl_schema_unref(src->schema);
}

#define TX_DDL "card_id BIGINT NOT NULL, amount DOUBLE NOT NULL, ts TIMESTAMP(3)"

/* Writes n JSON lines "card_id = base + i" into path. */
static void write_json_lines(const char *path, int base, int n) {
    FILE *f = fopen(path, "wb");
    for (int i = 0; i < n; i++)
        fprintf(f, "{\"card_id\": %d, \"amount\": %d.25, \"ts\": %d}\n", base + i, i, 1000 + i);
    fclose(f);
}

/* ---- file source ------------------------------------------------------- */

TEST(file_source_splits_and_interleaving) {
    const char *f0 = tmp_path("fs0.json"), *f1 = tmp_path("fs1.json"), *f2 = tmp_path("fs2.json");
    write_json_lines(f0, 0, 200);
    write_json_lines(f1, 10000, 150);
    write_json_lines(f2, 20000, 100);
    char paths[2048];
    snprintf(paths, sizeof paths, "%s, %s,%s", f0, f1, f2);
    sl_schema_t *s = parse(TX_DDL);
    sl_source_t src = sl_file_source(paths, SL_FMT_JSON, s, SL_ON_ERROR_FAIL);
    CHECK(sl_schema_equal(src.schema, s));
    char err[1024];

    /* parallelism 1: three splits, read in batches of 64 in turn */
    sl_source_output_t *out = sl_src_output_test_new(s);
    int nsplits;
    CHECK_EQ(drain(&src, 0, 1, 1000, out, &nsplits, err, sizeof err), SL_SRC_END);
    CHECK_EQ(nsplits, 3);
    CHECK_EQ(sl_src_output_test_count(out), 450);
    for (int j = 0; j < 3; j++) CHECK(sl_src_output_test_finished(out, j));
    for (int i = 0; i < 64; i++) CHECK_EQ(sl_src_output_test_split(out, i), 0);
    for (int i = 64; i < 128; i++) CHECK_EQ(sl_src_output_test_split(out, i), 1);
    for (int i = 128; i < 192; i++) CHECK_EQ(sl_src_output_test_split(out, i), 2);
    CHECK_EQ(sl_src_output_test_split(out, 192), 0);
    int64_t next[3] = {0, 10000, 20000};
    for (int64_t i = 0; i < 450; i++) {
        sl_record_t r = sl_src_output_test_get(out, i);
        int sp = sl_src_output_test_split(out, i);
        CHECK_EQ(r.ts, SL_NO_TIMESTAMP);
        CHECK_EQ(sl_row_validate(&r.row), 0);
        CHECK_EQ(sl_row_i64(&r.row, 0), next[sp]); /* in file order within a split */
        CHECK(sl_row_f64(&r.row, 1) == (double)(next[sp] % 10000) + 0.25);
        next[sp]++;
    }
    sl_src_output_test_free(out);

    /* parallelism 2: subtask 0 reads files 0 and 2, subtask 1 file 1 */
    out = sl_src_output_test_new(s);
    CHECK_EQ(drain(&src, 0, 2, 7, out, &nsplits, err, sizeof err), SL_SRC_END);
    CHECK_EQ(nsplits, 2);
    CHECK_EQ(sl_src_output_test_count(out), 300);
    sl_record_t r = sl_src_output_test_get(out, 7);
    CHECK_EQ(sl_row_i64(&r.row, 0), 20000); /* max 7 per poll, then the next split */
    sl_src_output_test_clear(out);
    CHECK_EQ(drain(&src, 1, 2, 1000, out, &nsplits, err, sizeof err), SL_SRC_END);
    CHECK_EQ(nsplits, 1);
    CHECK_EQ(sl_src_output_test_count(out), 150);
    r = sl_src_output_test_get(out, 0);
    CHECK_EQ(sl_row_i64(&r.row, 0), 10000);
    sl_src_output_test_free(out);

    /* more subtasks than files: the extra ones end at once */
    out = sl_src_output_test_new(s);
    CHECK_EQ(drain(&src, 4, 5, 100, out, &nsplits, err, sizeof err), SL_SRC_END);
    CHECK_EQ(nsplits, 0);
    CHECK_EQ(sl_src_output_test_count(out), 0);
    sl_src_output_test_free(out);
    source_free(&src);
    sl_schema_unref(s);
}

TEST(file_source_fail_policy) {
    const char *f0 = tmp_path("fail0.json"), *f1 = tmp_path("fail1.json");
    write_json_lines(f0, 0, 100);
    write_file(f1, "{\"card_id\": 1, \"amount\": 1}\n"
                   "\n"
                   "{\"card_id\": 2, \"amount\": \"abc\"}\n"
                   "{\"card_id\": 3, \"amount\": 3}\n");
    char paths[1300];
    snprintf(paths, sizeof paths, "%s,%s", f0, f1);
    sl_schema_t *s = parse(TX_DDL);
    sl_source_t src = sl_file_source(paths, SL_FMT_JSON, s, SL_ON_ERROR_FAIL);
    sl_source_output_t *out = sl_src_output_test_new(s);
    char err[1024], want[1400];
    int rc = drain(&src, 0, 1, 1000, out, NULL, err, sizeof err);
    CHECK_EQ(rc, SL_EFORMAT);
    snprintf(want, sizeof want, "%s: line 3, field 'amount': expected a number, got \"abc\"", f1);
    CHECK_STR(err, want);
    CHECK_EQ(sl_src_output_test_skipped(out), 0);
    sl_src_output_test_free(out);
    source_free(&src);
    sl_schema_unref(s);
}

TEST(file_source_skip_policy) {
    const char *f0 = tmp_path("skip0.json"), *f1 = tmp_path("skip1.json"), *f2 = tmp_path("skip2.csv");
    static const char f0_text[] = "{\"card_id\": 1, \"amount\": 1}\n"
                   "{\"card_id\": 2, \"amount\": \"abc\"}\n" /* wrong type */
                   "{\"card_id\": 3, \"amount\": 3} trailing\n" /* garbage */
                   "{\"amount\": 4}\n"                        /* missing NOT NULL */
                   "{\"card_id\": 5, \"amount\": 5, \"ts\": \"2026-12-01T10:00:00.123Z\"}\n"
                   "\xff\xfe\x00garbage\n"                     /* binary */
                   "{\"card_id\": 6, \"amount\": 6}";         /* no final newline */
    write_file_n(f0, f0_text, sizeof f0_text - 1);
    /* 3000 lines, every 7th bad */
    FILE *f = fopen(f1, "wb");
    int bad = 0;
    for (int i = 0; i < 3000; i++) {
        if (i % 7 == 3) {
            fprintf(f, "{\"card_id\": %d, \"amount\": %s}\n", i, i % 2 ? "\"x\"" : "1e");
            bad++;
        } else {
            fprintf(f, "{\"card_id\": %d, \"amount\": %d}\n", i, i);
        }
    }
    fclose(f);
    char paths[2000];
    snprintf(paths, sizeof paths, "%s,%s", f0, f1);
    sl_schema_t *s = parse(TX_DDL);
    sl_source_t src = sl_file_source(paths, SL_FMT_JSON, s, SL_ON_ERROR_SKIP);
    sl_source_output_t *out = sl_src_output_test_new(s);
    char err[1024];
    CHECK_EQ(drain(&src, 0, 1, 100, out, NULL, err, sizeof err), SL_SRC_END);
    CHECK_EQ(sl_src_output_test_skipped(out), 4 + bad);
    CHECK_EQ(sl_src_output_test_count(out), 3 + 3000 - bad);
    sl_src_output_test_free(out);
    source_free(&src);

    /* CSV: header, BOM, CRLF, a quoted field over two lines, blank lines, and bad records after them */
    write_file(f2, "\xef\xbb\xbf"
                   "card_id,amount,ts\r\n"
                   "1,1.5,2026-12-01T10:00:00Z\r\n"
                   "\r\n"
                   "2,\"2\n.5\",\r\n" /* line 4-5: a number with a newline: bad */
                   "3,3.5,\r\n"
                   "x,4.5,\r\n" /* line 7: bad */
                   "5,5.5,17\n");
    src = sl_file_source(f2, SL_FMT_CSV, s, SL_ON_ERROR_SKIP);
    out = sl_src_output_test_new(s);
    CHECK_EQ(drain(&src, 0, 1, 100, out, NULL, err, sizeof err), SL_SRC_END);
    CHECK_EQ(sl_src_output_test_skipped(out), 2);
    CHECK_EQ(sl_src_output_test_count(out), 3);
    sl_record_t r = sl_src_output_test_get(out, 0);
    CHECK_EQ(sl_row_i64(&r.row, 0), 1);
    CHECK_EQ(sl_row_i64(&r.row, 2), 1796119200000LL);
    r = sl_src_output_test_get(out, 2);
    CHECK_EQ(sl_row_i64(&r.row, 2), 17);
    sl_src_output_test_free(out);
    source_free(&src);
    /* the same file under FAIL: the line numbers count physical lines */
    src = sl_file_source(f2, SL_FMT_CSV, s, SL_ON_ERROR_FAIL);
    out = sl_src_output_test_new(s);
    CHECK_EQ(drain(&src, 0, 1, 100, out, NULL, err, sizeof err), SL_EFORMAT);
    CHECK_CONTAINS(err, f2);
    CHECK_CONTAINS(err, ": line 4, field 'amount': expected a number, got \"2\\x0a.5\"");
    sl_src_output_test_free(out);
    source_free(&src);
    write_file(f2, "1,1.5,\n2,2.5,\nx,4.5,\n");
    src = sl_file_source(f2, SL_FMT_CSV, s, SL_ON_ERROR_FAIL);
    out = sl_src_output_test_new(s);
    CHECK_EQ(drain(&src, 0, 1, 100, out, NULL, err, sizeof err), SL_EFORMAT);
    CHECK_CONTAINS(err, ": line 3, field 'card_id': expected an integer, got \"x\"");
    CHECK_EQ(sl_src_output_test_count(out), 2);
    sl_src_output_test_free(out);
    source_free(&src);
    sl_schema_unref(s);
}

TEST(file_source_long_lines_and_multiline_csv) {
    const char *path = tmp_path("long.csv");
    size_t big = 5u << 20;
    FILE *f = fopen(path, "wb");
    fputs("1,\"", f);
    for (size_t i = 0; i < big; i++) fputc(i % 1000 == 999 ? '\n' : 'a' + (int)(i % 26), f);
    fputs("\"\n2,short\n", f);
    fclose(f);
    sl_schema_t *s = parse("id INT NOT NULL, text VARCHAR");
    sl_source_t src = sl_file_source(path, SL_FMT_CSV, s, SL_ON_ERROR_FAIL);
    sl_source_output_t *out = sl_src_output_test_new(s);
    char err[1024];
    CHECK_EQ(drain(&src, 0, 1, 10, out, NULL, err, sizeof err), SL_SRC_END);
    CHECK_EQ(sl_src_output_test_count(out), 2);
    sl_record_t r = sl_src_output_test_get(out, 0);
    uint32_t len;
    const char *t = sl_row_str(&r.row, 1, &len);
    CHECK_EQ(len, big);
    CHECK(t[999] == '\n' && t[1000] == 'm');
    sl_src_output_test_free(out);
    source_free(&src);
    /* an unterminated quote runs to the end of the file and is one error */
    write_file(path, "1,ok\n2,\"never closed\n3,x\n4,y\n");
    src = sl_file_source(path, SL_FMT_CSV, s, SL_ON_ERROR_SKIP);
    out = sl_src_output_test_new(s);
    CHECK_EQ(drain(&src, 0, 1, 10, out, NULL, err, sizeof err), SL_SRC_END);
    CHECK_EQ(sl_src_output_test_count(out), 1);
    CHECK_EQ(sl_src_output_test_skipped(out), 1);
    sl_src_output_test_free(out);
    source_free(&src);
    sl_schema_unref(s);

    /* a one-field CSV: a blank line is a NULL value */
    s = parse("v INT");
    write_file(path, "v\n1\n\n3\n");
    src = sl_file_source(path, SL_FMT_CSV, s, SL_ON_ERROR_FAIL);
    out = sl_src_output_test_new(s);
    CHECK_EQ(drain(&src, 0, 1, 10, out, NULL, err, sizeof err), SL_SRC_END);
    CHECK_EQ(sl_src_output_test_count(out), 3);
    r = sl_src_output_test_get(out, 1);
    CHECK(sl_row_is_null(&r.row, 0));
    sl_src_output_test_free(out);
    source_free(&src);
    sl_schema_unref(s);
}

TEST(file_source_missing_file) {
    const char *f0 = tmp_path("present.json");
    write_json_lines(f0, 0, 3);
    char paths[1300];
    snprintf(paths, sizeof paths, "%s,/nonexistent/dir/events.json", f0);
    sl_schema_t *s = parse(TX_DDL);
    sl_source_t src = sl_file_source(paths, SL_FMT_JSON, s, SL_ON_ERROR_FAIL);
    void *reader = NULL;
    int n;
    char err[1024] = "";
    int rc = src.ops->create_reader(src.ctx, 0, 1, &reader, &n, err, sizeof err);
    CHECK(rc < 0);
    CHECK_STR(err, "file source: cannot open '/nonexistent/dir/events.json': No such file or directory");
    /* the subtask that does not own the missing file is fine */
    rc = src.ops->create_reader(src.ctx, 0, 2, &reader, &n, err, sizeof err);
    CHECK_EQ(rc, 0);
    src.ops->destroy_reader(reader);
    source_free(&src);
    src = sl_file_source(" , ", SL_FMT_JSON, s, SL_ON_ERROR_FAIL);
    CHECK(src.ops->create_reader(src.ctx, 0, 1, &reader, &n, err, sizeof err) < 0);
    CHECK_STR(err, "file source: no paths given");
    source_free(&src);
    sl_schema_unref(s);
}

/* ---- sinks -------------------------------------------------------------- */

/* Opens a sink writer or fails the test (returns NULL). */
static void *sink_open(const sl_sink_t *k, int subtask, int p, const sl_schema_t *s) {
    void *w = NULL;
    char err[512];
    if (k->ops->open(k->ctx, subtask, p, s, &w, err, sizeof err) != 0) {
        fprintf(stderr, "  open: %s\n", err);
        return NULL;
    }
    return w;
}

TEST(file_sink_round_trip) {
    sl_schema_t *s = parse("id BIGINT NOT NULL, name VARCHAR, score DOUBLE, at TIMESTAMP(3), raw BYTES, ok BOOLEAN");
    sl_row_writer_t w;
    sl_rw_init(&w);
    char err[1024];
    for (int fmt = 0; fmt < 2; fmt++) {
        for (int p = 1; p <= 3; p += 2) {
            const char *path = tmp_path(fmt ? "out.csv" : "out.json");
            sl_sink_t sink = sl_file_sink(path, (sl_format_t)fmt);
            void *wr[3];
            for (int t = 0; t < p; t++) CHECK((wr[t] = sink_open(&sink, t, p, s)) != NULL);
            int n = 5000;
            for (int i = 0; i < n; i++) {
                sl_rw_begin(&w, s);
                sl_rw_set_i64(&w, 0, i);
                char name[64];
                int nl = snprintf(name, sizeof name, "name \"%d\",\n x", i);
                if (i % 5) sl_rw_set_str(&w, 1, name, (uint32_t)nl);
                sl_rw_set_f64(&w, 2, i / 3.0);
                sl_rw_set_i64(&w, 3, 1767225600000LL + i);
                sl_rw_set_bytes(&w, 4, name, (uint32_t)(i % 7));
                sl_rw_set_bool(&w, 5, i & 1);
                sl_record_t rec = {sl_rw_row(&w), 0};
                CHECK_EQ(sink.ops->write(wr[i % p], &rec, err, sizeof err), 0);
            }
            for (int t = 0; t < p; t++) {
                CHECK_EQ(sink.ops->finish(wr[t], err, sizeof err), 0);
                sink.ops->close(wr[t]);
            }
            sink.ops->destroy(sink.ctx);
            /* read the files back */
            char paths[4000] = "", one[700];
            for (int t = 0; t < p; t++) {
                if (p == 1) snprintf(one, sizeof one, "%s", path);
                else snprintf(one, sizeof one, "%s%s.%d", t ? "," : "", path, t);
                strcat(paths, one);
            }
            sl_source_t src = sl_file_source(paths, (sl_format_t)fmt, s, SL_ON_ERROR_FAIL);
            sl_source_output_t *out = sl_src_output_test_new(s);
            CHECK_EQ(drain(&src, 0, 1, 1000, out, NULL, err, sizeof err), SL_SRC_END);
            CHECK_EQ(sl_src_output_test_count(out), n);
            bool seen[5000] = {false};
            for (int64_t k = 0; k < n; k++) {
                sl_record_t r = sl_src_output_test_get(out, k);
                int64_t id = sl_row_i64(&r.row, 0);
                CHECK(id >= 0 && id < n && !seen[id]);
                seen[id] = true;
                CHECK_EQ(sl_src_output_test_split(out, k), id % p); /* file t has ids = t mod p */
                CHECK(sl_row_f64(&r.row, 2) == id / 3.0);
                CHECK_EQ(sl_row_i64(&r.row, 3), 1767225600000LL + id);
                CHECK_EQ(sl_row_is_null(&r.row, 1), id % 5 == 0);
                uint32_t len;
                if (id % 5) {
                    const char *nm = sl_row_str(&r.row, 1, &len);
                    char name[64];
                    int nl = snprintf(name, sizeof name, "name \"%d\",\n x", (int)id);
                    CHECK(len == (uint32_t)nl && memcmp(nm, name, len) == 0);
                }
                sl_row_bytes(&r.row, 4, &len);
                CHECK_EQ(len, id % 7);
                CHECK_EQ(sl_row_bool(&r.row, 5), id & 1);
            }
            sl_src_output_test_free(out);
            source_free(&src);
        }
    }
    sl_rw_free(&w);
    sl_schema_unref(s);
}

TEST(file_sink_errors) {
    sl_schema_t *s = parse("id BIGINT");
    sl_sink_t sink = sl_file_sink("/nonexistent/dir/out.json", SL_FMT_JSON);
    void *wr = NULL;
    char err[512] = "";
    CHECK(sink.ops->open(sink.ctx, 0, 1, s, &wr, err, sizeof err) < 0);
    CHECK_STR(err, "file sink: cannot open '/nonexistent/dir/out.json': No such file or directory");
    CHECK(sink.ops->open(sink.ctx, 1, 2, s, &wr, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "'/nonexistent/dir/out.json.1'");
    sink.ops->destroy(sink.ctx);
    /* a full disk */
    if (access("/dev/full", W_OK) == 0) {
        sink = sl_file_sink("/dev/full", SL_FMT_JSON);
        CHECK((wr = sink_open(&sink, 0, 1, s)) != NULL);
        sl_row_writer_t w;
        sl_rw_init(&w);
        sl_rw_begin(&w, s);
        sl_rw_set_i64(&w, 0, 1);
        sl_record_t rec = {sl_rw_row(&w), 0};
        int rc = 0;
        for (int i = 0; i < 100000 && rc == 0; i++) rc = sink.ops->write(wr, &rec, err, sizeof err);
        if (rc == 0) rc = sink.ops->finish(wr, err, sizeof err);
        CHECK_EQ(rc, SL_EIO);
        CHECK_STR(err, "file sink: cannot write '/dev/full': No space left on device");
        sink.ops->close(wr);
        sink.ops->destroy(sink.ctx);
        sl_rw_free(&w);
    }
    sl_schema_unref(s);
}

/* Runs fn with stdout redirected into path. */
static void with_stdout_to(const char *path, void (*fn)(void *), void *arg) {
    fflush(stdout);
    int saved = dup(1);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, 1);
    close(fd);
    fn(arg);
    fflush(stdout);
    dup2(saved, 1);
    close(saved);
}

typedef struct print_job {
    const sl_sink_t *sink;
    const sl_schema_t *schema;
    int subtask, parallelism, n;
    int rc;
} print_job_t;

static void *print_thread(void *arg) {
    print_job_t *j = arg;
    void *wr = NULL;
    char err[256];
    j->rc = j->sink->ops->open(j->sink->ctx, j->subtask, j->parallelism, j->schema, &wr, err, sizeof err);
    if (j->rc) return NULL;
    sl_row_writer_t w;
    sl_rw_init(&w);
    for (int i = 0; i < j->n && !j->rc; i++) {
        sl_rw_begin(&w, j->schema);
        sl_rw_set_i64(&w, 0, i);
        sl_rw_set_str(&w, 1, "some text that makes the line longer than a few bytes", 53);
        sl_record_t rec = {sl_rw_row(&w), 0};
        j->rc = j->sink->ops->write(wr, &rec, err, sizeof err);
    }
    if (!j->rc) j->rc = j->sink->ops->finish(wr, err, sizeof err);
    j->sink->ops->close(wr);
    sl_rw_free(&w);
    return NULL;
}

static void run_print_jobs(void *arg) {
    print_job_t *jobs = arg;
    pthread_t th[4];
    for (int t = 0; t < jobs[0].parallelism; t++) pthread_create(&th[t], NULL, print_thread, &jobs[t]);
    for (int t = 0; t < jobs[0].parallelism; t++) pthread_join(th[t], NULL);
}

TEST(print_sink) {
    sl_schema_t *s = parse("n BIGINT, s VARCHAR");
    const char *path = tmp_path("stdout.txt");
    /* parallelism 1 with and without prefix */
    for (int k = 0; k < 2; k++) {
        sl_sink_t sink = sl_print_sink(k ? NULL : "out");
        print_job_t job = {&sink, s, 0, 1, 2, 0};
        with_stdout_to(path, run_print_jobs, &job);
        CHECK_EQ(job.rc, 0);
        sink.ops->destroy(sink.ctx);
        FILE *f = fopen(path, "r");
        char line[256];
        CHECK(fgets(line, sizeof line, f));
        CHECK_STR(line, k ? "{\"n\":0,\"s\":\"some text that makes the line longer than a few bytes\"}\n"
                          : "out> {\"n\":0,\"s\":\"some text that makes the line longer than a few bytes\"}\n");
        fclose(f);
    }
    /* four parallel subtasks: "out:<subtask+1>> " and whole lines only */
    sl_sink_t sink = sl_print_sink("out");
    print_job_t jobs[4];
    for (int t = 0; t < 4; t++) jobs[t] = (print_job_t){&sink, s, t, 4, 20000, 0};
    with_stdout_to(path, run_print_jobs, jobs);
    for (int t = 0; t < 4; t++) CHECK_EQ(jobs[t].rc, 0);
    sink.ops->destroy(sink.ctx);
    FILE *f = fopen(path, "r");
    char line[256];
    int64_t next[4] = {0, 0, 0, 0}, lines = 0;
    while (fgets(line, sizeof line, f)) {
        int t, n;
        char tail[128];
        CHECK(sscanf(line, "out:%d> {\"n\":%d,\"s\":\"%127[^\"]\"}", &t, &n, tail) == 3);
        CHECK(t >= 1 && t <= 4);
        CHECK_EQ(n, next[t - 1]);
        next[t - 1]++;
        CHECK_STR(tail, "some text that makes the line longer than a few bytes");
        lines++;
    }
    fclose(f);
    CHECK_EQ(lines, 80000);
    /* no prefix, parallelism > 1: "3> " */
    sink = sl_print_sink(NULL);
    void *wr = sink_open(&sink, 2, 3, s);
    CHECK(wr);
    sink.ops->close(wr);
    sink.ops->destroy(sink.ctx);
    sl_schema_unref(s);
}

typedef struct count_job {
    sl_sink_t *sink;
    const sl_schema_t *schema;
    int subtask, n;
} count_job_t;

static void *count_thread(void *arg) {
    count_job_t *j = arg;
    void *wr = sink_open(j->sink, j->subtask, 4, j->schema);
    sl_row_writer_t w;
    sl_rw_init(&w);
    char err[64];
    for (int i = 0; i < j->n; i++) {
        sl_rw_begin(&w, j->schema);
        sl_rw_set_i64(&w, 0, j->subtask * 1000000 + i);
        sl_record_t rec = {sl_rw_row(&w), 0};
        j->sink->ops->write(wr, &rec, err, sizeof err);
    }
    j->sink->ops->finish(wr, err, sizeof err);
    j->sink->ops->close(wr);
    sl_rw_free(&w);
    return NULL;
}

TEST(counting_sink) {
    sl_schema_t *s = parse("id BIGINT NOT NULL");
    uint64_t sums[2];
    for (int run = 0; run < 2; run++) {
        sl_counting_sink_stats_t *stats = NULL;
        sl_sink_t sink = sl_counting_sink(&stats);
        CHECK(stats);
        CHECK_EQ(sl_counting_sink_count(stats), 0);
        count_job_t jobs[4];
        pthread_t th[4];
        for (int t = 0; t < 4; t++) {
            jobs[t] = (count_job_t){&sink, s, run ? 3 - t : t, 100000};
            pthread_create(&th[t], NULL, count_thread, &jobs[t]);
        }
        for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
        sink.ops->destroy(sink.ctx); /* the stats outlive the sink */
        CHECK_EQ(sl_counting_sink_count(stats), 400000);
        sums[run] = sl_counting_sink_checksum(stats);
        sl_counting_sink_stats_free(stats);
    }
    CHECK(sums[0] == sums[1] && sums[0] != 0);
    /* without stats_out the sink frees them itself */
    sl_sink_t sink = sl_counting_sink(NULL);
    sink.ops->destroy(sink.ctx);
    CHECK_EQ(sl_counting_sink_count(NULL), 0);
    sl_schema_unref(s);
}

/* ---- datagen ------------------------------------------------------------ */

/* Runs all subtasks of a datagen source at parallelism p and checks every
 * emitted record against sl_datagen_event(split, index). */
static int datagen_matches_function(const sl_datagen_opts_t *o, int p, int max) {
    sl_source_t src = sl_datagen_source(*o);
    int64_t total = 0;
    char err[256];
    int ok = 1;
    for (int t = 0; t < p && ok; t++) {
        sl_source_output_t *out = sl_src_output_test_new(src.schema);
        int nsplits;
        int rc = drain(&src, t, p, max, out, &nsplits, err, sizeof err);
        if (rc != SL_SRC_END) {
            fprintf(stderr, "  drain: %d %s\n", rc, err);
            ok = 0;
        }
        int64_t next[64] = {0};
        for (int64_t i = 0; ok && i < sl_src_output_test_count(out); i++) {
            sl_record_t r = sl_src_output_test_get(out, i);
            int local = sl_src_output_test_split(out, i);
            int split = t + local * p;
            sl_datagen_event_t ev;
            sl_datagen_event(o, split, next[local]++, &ev);
            if (sl_row_i64(&r.row, 0) != ev.card_id || sl_row_f64(&r.row, 1) != ev.amount ||
                sl_row_i64(&r.row, 2) != ev.ts || r.ts != ev.ts) {
                fprintf(stderr, "  p=%d split %d event %" PRId64 " differs\n", p, split, next[local] - 1);
                ok = 0;
            }
        }
        for (int j = 0; ok && j < nsplits; j++) {
            int split = t + j * p;
            if (next[j] != sl_datagen_split_count(o, split) || !sl_src_output_test_finished(out, j)) {
                fprintf(stderr, "  p=%d split %d: %" PRId64 " events, want %" PRId64 "\n", p, split, next[j],
                        sl_datagen_split_count(o, split));
                ok = 0;
            }
        }
        total += sl_src_output_test_count(out);
        sl_src_output_test_free(out);
    }
    if (ok && total != o->count) {
        fprintf(stderr, "  p=%d: %" PRId64 " events, want %" PRId64 "\n", p, total, o->count);
        ok = 0;
    }
    source_free(&src);
    return ok;
}

TEST(datagen_deterministic_across_parallelism) {
    sl_datagen_opts_t o = sl_datagen_defaults();
    CHECK_EQ(o.seed, 42);
    CHECK_EQ(o.count, 1000000);
    CHECK_EQ(o.splits, 4);
    CHECK_EQ(o.start_ts, 1767225600000LL);
    o.count = 20003;
    o.splits = 7;
    for (int p = 1; p <= 9; p++) CHECK(datagen_matches_function(&o, p, p % 2 ? 1000 : 37));
    o.count = 3; /* fewer events than splits */
    CHECK(datagen_matches_function(&o, 2, 10));
    o.count = 0;
    CHECK(datagen_matches_function(&o, 3, 10));
    /* the schema */
    sl_schema_t *s = sl_datagen_schema(), *want = parse("card_id BIGINT NOT NULL, amount DOUBLE NOT NULL, ts TIMESTAMP(3) NOT NULL");
    CHECK(sl_schema_equal(s, want));
    sl_schema_unref(s);
    sl_schema_unref(want);
    /* a different seed gives different events, the same seed the same */
    sl_datagen_opts_t a = sl_datagen_defaults(), b = a;
    b.seed = 43;
    int same = 0;
    for (int i = 0; i < 1000; i++) {
        sl_datagen_event_t ea, eb, ea2;
        sl_datagen_event(&a, 1, i, &ea);
        sl_datagen_event(&b, 1, i, &eb);
        sl_datagen_event(&a, 1, i, &ea2);
        CHECK(ea.card_id == ea2.card_id && ea.amount == ea2.amount && ea.ts == ea2.ts);
        same += ea.card_id == eb.card_id;
    }
    CHECK(same < 10);
}

TEST(datagen_distribution_and_disorder) {
    sl_datagen_opts_t o = sl_datagen_defaults();
    sl_source_t src = sl_datagen_source(o);
    sl_source_output_t *out = sl_src_output_test_new(src.schema);
    void *reader;
    int n;
    char err[256];
    CHECK_EQ(src.ops->create_reader(src.ctx, 0, 1, &reader, &n, err, sizeof err), 0);
    CHECK_EQ(n, 4);
    int64_t index[4] = {0}, late = 0, total = 0, min_card = INT64_MAX, max_card = -1;
    double min_amount = 1e9, max_amount = 0, sum_amount = 0;
    int rc;
    while ((rc = src.ops->poll(reader, out, 10000, err, sizeof err)) == SL_SRC_MORE || rc == SL_SRC_END) {
        for (int64_t i = 0; i < sl_src_output_test_count(out); i++) {
            sl_record_t r = sl_src_output_test_get(out, i);
            int sp = sl_src_output_test_split(out, i);
            int64_t base = o.start_ts + (int64_t)((double)index[sp]++ * o.ts_step_ms);
            int64_t ts = sl_row_i64(&r.row, 2);
            int64_t behind = base - ts;
            if (behind > o.max_disorder_ms) { /* must be a late event */
                behind -= o.late_by_ms;
                late++;
            }
            CHECK(behind >= 0 && behind <= o.max_disorder_ms);
            int64_t card = sl_row_i64(&r.row, 0);
            double amount = sl_row_f64(&r.row, 1);
            min_card = SL_MIN(min_card, card);
            max_card = SL_MAX(max_card, card);
            min_amount = SL_MIN(min_amount, amount);
            max_amount = SL_MAX(max_amount, amount);
            sum_amount += amount;
            CHECK(round(amount * 100) / 100 == amount); /* whole cents */
        }
        total += sl_src_output_test_count(out);
        sl_src_output_test_clear(out);
        if (rc == SL_SRC_END) break;
    }
    CHECK_EQ(rc, SL_SRC_END);
    CHECK_EQ(total, 1000000);
    CHECK_EQ(index[0], 250000);
    CHECK(min_card == 0 && max_card == o.cards - 1);
    CHECK(min_amount == 1.0 && max_amount == 500.0);
    CHECK(fabs(sum_amount / total - 250.5) < 1.0);
    /* 0.1% late: 1000 expected, sigma ~32 */
    fprintf(stderr, "  late events: %" PRId64 " of %" PRId64 "\n", late, total);
    CHECK(late > 850 && late < 1150);
    src.ops->destroy_reader(reader);
    sl_src_output_test_free(out);
    source_free(&src);

    /* the event function agrees: late flags and 30% late */
    o.late_fraction = 0.3;
    int64_t flagged = 0;
    for (int64_t i = 0; i < 100000; i++) {
        sl_datagen_event_t ev;
        sl_datagen_event(&o, 2, i, &ev);
        int64_t behind = o.start_ts + i - ev.ts - (ev.late ? o.late_by_ms : 0);
        CHECK(behind >= 0 && behind <= o.max_disorder_ms);
        flagged += ev.late;
    }
    CHECK(flagged > 29000 && flagged < 31000);
    o.late_fraction = 0;
    o.max_disorder_ms = 0; /* in order */
    for (int64_t i = 0; i < 1000; i++) {
        sl_datagen_event_t ev;
        sl_datagen_event(&o, 0, i, &ev);
        CHECK(!ev.late && ev.ts == o.start_ts + i);
    }
}

TEST(datagen_rate_limit) {
    sl_datagen_opts_t o = sl_datagen_defaults();
    o.count = -1;
    o.rate = 2000; /* over 4 splits; this reader owns 2 of them: 1000/s */
    sl_source_t src = sl_datagen_source(o);
    sl_source_output_t *out = sl_src_output_test_new(src.schema);
    void *reader;
    int n;
    char err[256];
    CHECK_EQ(src.ops->create_reader(src.ctx, 1, 2, &reader, &n, err, sizeof err), 0);
    CHECK_EQ(n, 2);
    int64_t t0 = sl_mono_ns();
    int idle = 0, more = 0;
    while (sl_mono_ns() - t0 < 300000000LL) {
        int rc = src.ops->poll(reader, out, 10000, err, sizeof err);
        CHECK(rc == SL_SRC_MORE || rc == SL_SRC_IDLE);
        if (rc == SL_SRC_IDLE) {
            idle++;
            usleep(1000);
        } else {
            more++;
        }
        /* never ahead of the schedule (plus the first event) */
        double elapsed = (double)(sl_mono_ns() - t0) / 1e9;
        CHECK(sl_src_output_test_count(out) <= (int64_t)(elapsed * 1000) + 2);
    }
    int64_t got = sl_src_output_test_count(out);
    fprintf(stderr, "  rate 1000/s for 0.3 s: %" PRId64 " events, %d idle polls\n", got, idle);
    CHECK(idle > 10);
    CHECK(got >= 200 && got <= 302);
    /* the reader's events are the splits' 1 and 3 */
    int64_t next[2] = {0, 0};
    for (int64_t i = 0; i < got; i++) {
        sl_record_t r = sl_src_output_test_get(out, i);
        int local = sl_src_output_test_split(out, i);
        sl_datagen_event_t ev;
        sl_datagen_event(&o, 1 + 2 * local, next[local]++, &ev);
        CHECK_EQ(sl_row_i64(&r.row, 0), ev.card_id);
    }
    src.ops->destroy_reader(reader);
    sl_src_output_test_free(out);
    source_free(&src);
}

TEST(datagen_bad_options) {
    sl_datagen_opts_t o = sl_datagen_defaults();
    char err[256];
    o.splits = 0;
    CHECK_EQ(sl_datagen_check(&o, err, sizeof err), SL_EINVAL);
    CHECK_STR(err, "datagen: splits must be >= 1");
    o = sl_datagen_defaults();
    o.late_fraction = 1.5;
    CHECK_EQ(sl_datagen_check(&o, err, sizeof err), SL_EINVAL);
    CHECK_STR(err, "datagen: late_fraction must be in [0, 1]");
    o = sl_datagen_defaults();
    o.rate = NAN;
    CHECK_EQ(sl_datagen_check(&o, err, sizeof err), SL_EINVAL);
    o = sl_datagen_defaults();
    o.count = -5;
    sl_source_t src = sl_datagen_source(o);
    void *reader;
    int n;
    CHECK_EQ(src.ops->create_reader(src.ctx, 0, 1, &reader, &n, err, sizeof err), SL_EINVAL);
    CHECK_STR(err, "datagen: count must be >= 0, or -1 for unbounded");
    source_free(&src);
    o = sl_datagen_defaults();
    o.cards = 0;
    CHECK_EQ(sl_datagen_check(&o, err, sizeof err), SL_EINVAL);
    CHECK_EQ(sl_datagen_check(&(sl_datagen_opts_t){.splits = 1, .cards = 1}, err, sizeof err), 0);
}

TEST(datagen_speed) {
    /* best of 5 runs: the machine may be busy */
    sl_datagen_opts_t o = sl_datagen_defaults();
    double fn_ns = 1e9, poll_ns = 1e9;
    for (int run = 0; run < 5; run++) {
        int64_t n = 2000000;
        volatile int64_t sink = 0;
        int64_t t0 = sl_mono_ns();
        for (int64_t i = 0; i < n; i++) {
            sl_datagen_event_t ev;
            sl_datagen_event(&o, (int)(i & 3), i >> 2, &ev);
            sink += ev.card_id + ev.ts + (int64_t)ev.amount;
        }
        fn_ns = SL_MIN(fn_ns, (double)(sl_mono_ns() - t0) / (double)n);
        /* through the reader, with the test capture copying each row */
        o.count = n;
        sl_source_t src = sl_datagen_source(o);
        sl_source_output_t *out = sl_src_output_test_new(src.schema);
        void *reader;
        int ns;
        char err[256];
        CHECK_EQ(src.ops->create_reader(src.ctx, 0, 1, &reader, &ns, err, sizeof err), 0);
        t0 = sl_mono_ns();
        int rc;
        while ((rc = src.ops->poll(reader, out, 4096, err, sizeof err)) == SL_SRC_MORE) sl_src_output_test_clear(out);
        poll_ns = SL_MIN(poll_ns, (double)(sl_mono_ns() - t0) / (double)o.count);
        CHECK_EQ(rc, SL_SRC_END);
        src.ops->destroy_reader(reader);
        sl_src_output_test_free(out);
        source_free(&src);
    }
    fprintf(stderr, "  datagen: %.1f ns/event (event function), %.1f ns/event (poll into the test capture)\n", fn_ns,
            poll_ns);
}

int main(void) {
    RUN(file_source_splits_and_interleaving);
    RUN(file_source_fail_policy);
    RUN(file_source_skip_policy);
    RUN(file_source_long_lines_and_multiline_csv);
    RUN(file_source_missing_file);
    RUN(file_sink_round_trip);
    RUN(file_sink_errors);
    RUN(print_sink);
    RUN(counting_sink);
    RUN(datagen_deterministic_across_parallelism);
    RUN(datagen_distribution_and_disorder);
    RUN(datagen_rate_limit);
    RUN(datagen_bad_options);
    RUN(datagen_speed);
    char cmd[700];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", sl_test_tmpdir());
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", sl_test_tmpdir());
    TEST_MAIN_END();
}
