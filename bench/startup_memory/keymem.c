/*
 * keymem.c — start-up time of a job and memory per key of keyed state, on
 * sluice (embedded, public API only), for bench/startup_memory.sh.  The
 * Flink counterparts are bench/nexmark/src/main/java/sluice/nexmark/
 * Startup.java and KeyMemory.java; every mode prints one line of key=value
 * figures (times are CLOCK_REALTIME nanoseconds, so that they compare with
 * the launcher's and the JVM's clocks).
 *
 *   keymem launch CMD [ARG...]
 *       Reads the clock, forks, execs CMD in the child and waits for it:
 *       prints launch_ns (just before the fork) and exit_ns (after wait4),
 *       the child's exit status, CPU time (user + sys, all its threads) and
 *       peak RSS, and the load average.  The child's own output goes to the same
 *       stdout, before that line.  This is the outside view of start-up: exec
 *       of the program, dynamic loading and everything until it exits.
 *
 *   keymem startup [--records N] [--backend heap|rocksdb]
 *       The trivial bounded job: a source of N (default 5) rows
 *       (k BIGINT, v BIGINT) -> key_by(k) -> a keyed process function that
 *       keeps a value state (BIGINT sum of v per key) and emits
 *       (k, sum) -> a sink that reads the clock when the first record
 *       arrives.  Prints main_ns (main entered), execute_ns (the job is
 *       built, sl_env_execute called), first_record_ns (the sink's first
 *       record) and end_ns (sl_env_execute returned).
 *
 *   keymem memory --keys N [--backend heap|rocksdb] [--rocksdb-dir DIR]
 *                 [--block-cache BYTES] [--write-buffer BYTES]
 *       The keyed-state load: a source of rows (k BIGINT, v BIGINT) with
 *       k = v = 0 .. N-1, each key once, then one marker row k = N;
 *       key_by(k); a keyed process function that keeps one value state entry
 *       per key: a BIGINT, the running sum of v (= k here, so every stored
 *       value is distinct, as in the Java version where a constant would be
 *       one shared cached Long).  On the marker (processed after every key,
 *       parallelism 1 and one channel keep the order) it writes no state and
 *       reads VmRSS and VmHWM from /proc/self/status and, with RocksDB, the
 *       size of the files under the database directory (SST files and
 *       RocksDB's small files; the write-ahead log is off, so what is still
 *       in the memtables is not on disk).  N = 0 gives the baseline: the same
 *       job and process with empty state.  Parallelism 1, the default max
 *       parallelism (128 key groups).  Checks that exactly N entries were
 *       created (every get of a new key found nothing) and fails otherwise.
 */
#include <errno.h>
#include <ftw.h>
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "sluice/sluice.h"

static int64_t real_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double cpu_s(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_usec / 1e6;
}

/* VmRSS and VmHWM of this process in KiB (-1 when unreadable). */
static void read_rss_kb(int64_t *rss, int64_t *hwm) {
    *rss = *hwm = -1;
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return;
    char line[256];
    while (fgets(line, sizeof line, f)) {
        long long v;
        if (sscanf(line, "VmRSS: %lld kB", &v) == 1) *rss = v;
        else if (sscanf(line, "VmHWM: %lld kB", &v) == 1) *hwm = v;
    }
    fclose(f);
}

/* Sizes of the regular files under a directory (nftw keeps no context). */
static int64_t du_bytes, du_alloc, du_files;
static int du_visit(const char *path, const struct stat *st, int type, struct FTW *ftw) {
    if (type == FTW_F) {
        du_bytes += st->st_size;
        du_alloc += (int64_t)st->st_blocks * 512;
        du_files++;
    }
    return 0;
}
static int dir_size(const char *dir, int64_t *bytes, int64_t *alloc, int64_t *files) {
    du_bytes = du_alloc = du_files = 0;
    int rc = nftw(dir, du_visit, 16, FTW_PHYS);
    *bytes = du_bytes;
    *alloc = du_alloc;
    *files = du_files;
    return rc;
}

static int64_t parse_count(const char *s, const char *opt) {
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    double m = 1;
    if (*end == 'K' || *end == 'k') m = 1e3, end++;
    else if (*end == 'M' || *end == 'm') m = 1e6, end++;
    else if (*end == 'G' || *end == 'g') m = 1e9, end++;
    if (errno || end == s || *end || v < 0) {
        fprintf(stderr, "keymem: %s: '%s' is not a non-negative count (e.g. 10M)\n", opt, s);
        exit(2);
    }
    return (int64_t)(v * m);
}

/* ---- launch ------------------------------------------------------------ */

static int cmd_launch(int argc, char **argv) {
    if (argc < 1) {
        fprintf(stderr, "keymem launch: a command to run is required\n");
        return 2;
    }
    fflush(stdout);
    int64_t t0 = real_ns();
    pid_t pid = fork();
    if (pid < 0) {
        fprintf(stderr, "keymem launch: fork: %s\n", strerror(errno));
        return 1;
    }
    if (pid == 0) {
        execvp(argv[0], argv);
        fprintf(stderr, "keymem launch: exec '%s': %s\n", argv[0], strerror(errno));
        _exit(127);
    }
    int status = 0;
    struct rusage ru;
    while (wait4(pid, &status, 0, &ru) < 0) {
        if (errno != EINTR) {
            fprintf(stderr, "keymem launch: wait4: %s\n", strerror(errno));
            return 1;
        }
    }
    int64_t t1 = real_ns();
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
                 (double)ru.ru_stime.tv_usec / 1e6;
    double load1 = 0;
    FILE *la = fopen("/proc/loadavg", "r");
    if (la) {
        if (fscanf(la, "%lf", &load1) != 1) load1 = 0;
        fclose(la);
    }
    printf("launch_ns=%" PRId64 " exit_ns=%" PRId64 " exit_status=%d child_cpu_s=%.3f child_max_rss_kb=%ld "
           "load1=%.2f\n",
           t0, t1, code, cpu, ru.ru_maxrss, load1);
    return code;
}

/* ---- the sequence source: (k, v) = (i, i) for i in [0, n], n = marker ---- */

typedef struct seq_src {
    int64_t n;    /* rows 0 .. n - 1, then the marker row n (when marker) */
    bool marker;
} seq_src_t;

typedef struct seq_reader {
    int64_t next, end;
} seq_reader_t;

static int seq_create(void *ctx, int subtask, int parallelism, void **reader, int *nsplits, char *err,
                      size_t errlen) {
    seq_src_t *s = ctx;
    seq_reader_t *r = calloc(1, sizeof *r);
    if (!r) return SL_ENOMEM;
    /* one split, read by subtask 0 (the jobs here run at parallelism 1) */
    r->end = subtask == 0 ? s->n + (s->marker ? 1 : 0) : 0;
    *reader = r;
    *nsplits = 1;
    return 0;
}

static int seq_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t errlen) {
    seq_reader_t *r = reader;
    int64_t stop = r->next + max < r->end ? r->next + max : r->end;
    for (int64_t i = r->next; i < stop; i++) {
        sl_row_writer_t *w = sl_src_row(out);
        sl_rw_set_i64(w, 0, i);
        sl_rw_set_i64(w, 1, i);
        sl_src_emit(out, 0, SL_NO_TIMESTAMP);
    }
    r->next = stop;
    if (r->next < r->end) return SL_SRC_MORE;
    sl_src_split_finished(out, 0);
    return SL_SRC_END;
}

static void seq_destroy_reader(void *reader) { free(reader); }
static void seq_destroy(void *ctx) { free(ctx); }

static const sl_source_ops_t seq_ops = {
    .name = "keymem-sequence",
    .create_reader = seq_create,
    .poll = seq_poll,
    .destroy_reader = seq_destroy_reader,
    .destroy = seq_destroy,
};

static sl_source_t seq_source(int64_t n, bool marker) {
    seq_src_t *s = calloc(1, sizeof *s);
    if (!s) abort();
    s->n = n;
    s->marker = marker;
    return (sl_source_t){&seq_ops, s, sl_schema_parse("k BIGINT NOT NULL, v BIGINT NOT NULL", NULL, 0)};
}

/* ---- the keyed process function: value state "sum" per key -------------- */

typedef struct sum_fn {
    int64_t marker;          /* key of the marker row; -1: none */
    bool emit;               /* emit (k, sum) per record */
    const char *rocks_dir;   /* measured at the marker (NULL: heap) */
    sl_state_t *sum;
    /* results, read by main after sl_env_execute (the task thread has ended) */
    int64_t created, records;
    int64_t rss_kb, hwm_kb, disk_bytes, disk_alloc, disk_files;
    int64_t load_start_ns, load_end_ns;
    bool measured;
} sum_fn_t;

static int sum_open(void *ctx, sl_rt_t *rt) {
    sum_fn_t *f = ctx;
    f->sum = sl_state_value(rt, "sum");
    return f->sum ? 0 : SL_EINVAL;
}

static int sum_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    sum_fn_t *f = ctx;
    int64_t k = sl_row_i64(&in->row, 0), v = sl_row_i64(&in->row, 1);
    if (f->records++ == 0) f->load_start_ns = mono_ns();
    if (k == f->marker) { /* every key before it has been processed */
        f->load_end_ns = mono_ns();
        read_rss_kb(&f->rss_kb, &f->hwm_kb);
        if (f->rocks_dir && dir_size(f->rocks_dir, &f->disk_bytes, &f->disk_alloc, &f->disk_files) != 0) {
            fprintf(stderr, "keymem: cannot measure the RocksDB directory '%s': %s\n", f->rocks_dir,
                    strerror(errno));
            return SL_EIO;
        }
        f->measured = true;
        return 0;
    }
    uint32_t len;
    const void *cur = sl_value_get(f->sum, &len);
    int64_t s = v;
    if (cur) {
        int64_t old;
        memcpy(&old, cur, sizeof old);
        s += old;
    } else {
        f->created++;
    }
    int rc = sl_value_put(f->sum, &s, sizeof s);
    if (rc < 0 || !f->emit) return rc;
    sl_row_writer_t *w = sl_out_row(out);
    sl_rw_set_i64(w, 0, k);
    sl_rw_set_i64(w, 1, s);
    sl_emit(out);
    return 0;
}

/* ---- sinks ------------------------------------------------------------- */

typedef struct first_sink {
    _Atomic int64_t first_ns; /* CLOCK_REALTIME of the first record; 0 before */
    _Atomic int64_t count;
} first_sink_t;

static int first_open(void *ctx, int subtask, int parallelism, const sl_schema_t *schema, void **writer, char *err,
                      size_t errlen) {
    *writer = ctx;
    return 0;
}

static int first_write(void *writer, const sl_record_t *rec, char *err, size_t errlen) {
    first_sink_t *s = writer;
    if (atomic_fetch_add(&s->count, 1) == 0) atomic_store(&s->first_ns, real_ns());
    return 0;
}

static int first_finish(void *writer, char *err, size_t errlen) { return 0; }
static void first_close(void *writer) {}
static void first_destroy(void *ctx) {}

static const sl_sink_ops_t first_ops = {
    .name = "keymem-first-record",
    .open = first_open,
    .write = first_write,
    .finish = first_finish,
    .close = first_close,
    .destroy = first_destroy,
};

/* ---- startup ----------------------------------------------------------- */

static int cmd_startup(int argc, char **argv, int64_t main_ns) {
    int64_t records = 5;
    const char *backend = "heap";
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--records") && i + 1 < argc) records = parse_count(argv[++i], "--records");
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc) backend = argv[++i];
        else {
            fprintf(stderr, "keymem startup: unknown or incomplete argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (strcmp(backend, "heap") && strcmp(backend, "rocksdb")) {
        fprintf(stderr, "keymem startup: --backend: '%s' is not heap or rocksdb\n", backend);
        return 2;
    }
    if (records < 1) {
        fprintf(stderr, "keymem startup: --records must be at least 1 (the first record is what is timed)\n");
        return 2;
    }
    sum_fn_t fn = {.marker = -1, .emit = true};
    first_sink_t sink;
    atomic_init(&sink.first_ns, 0);
    atomic_init(&sink.count, 0);

    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 1);
    if (!strcmp(backend, "rocksdb")) sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);
    sl_stream_t *src = sl_uid(sl_from_source(env, seq_source(records, false), sl_wm_none(), "numbers"), "numbers");
    sl_process_fn_t pf = {.open = sum_open, .process = sum_process, .opts = {.ctx = &fn}};
    sl_stream_t *sums = sl_uid(sl_keyed_process(sl_key_by(src, "k"), pf,
                                                sl_schema_parse("k BIGINT NOT NULL, sum BIGINT NOT NULL", NULL, 0)),
                               "sum");
    sl_uid(sl_sink_to(sums, (sl_sink_t){&first_ops, &sink}, "first-record"), "first-record");
    int64_t execute_ns = real_ns();
    int rc = sl_env_execute(env, "startup");
    int64_t end_ns = real_ns();
    if (rc < 0) {
        fprintf(stderr, "keymem startup: %s\n", sl_env_error(env));
        sl_env_destroy(env);
        return 1;
    }
    sl_env_destroy(env);
    int64_t out = atomic_load(&sink.count);
    if (out != records) {
        fprintf(stderr, "keymem startup: the sink got %" PRId64 " records, expected %" PRId64 "\n", out, records);
        return 1;
    }
    printf("engine=sluice mode=startup backend=%s records=%" PRId64 " out=%" PRId64 " main_ns=%" PRId64
           " execute_ns=%" PRId64 " first_record_ns=%" PRId64 " end_ns=%" PRId64 "\n",
           backend, records, out, main_ns, execute_ns, atomic_load(&sink.first_ns), end_ns);
    return 0;
}

/* ---- memory ------------------------------------------------------------ */

static int cmd_memory(int argc, char **argv) {
    int64_t keys = -1;
    int64_t cache = 0, wbuf = 0;
    const char *backend = "heap", *rdir = NULL;
    for (int i = 0; i < argc; i++) {
        if (!strcmp(argv[i], "--keys") && i + 1 < argc) keys = parse_count(argv[++i], "--keys");
        else if (!strcmp(argv[i], "--block-cache") && i + 1 < argc) cache = parse_count(argv[++i], "--block-cache");
        else if (!strcmp(argv[i], "--write-buffer") && i + 1 < argc) wbuf = parse_count(argv[++i], "--write-buffer");
        else if (!strcmp(argv[i], "--backend") && i + 1 < argc) backend = argv[++i];
        else if (!strcmp(argv[i], "--rocksdb-dir") && i + 1 < argc) rdir = argv[++i];
        else {
            fprintf(stderr, "keymem memory: unknown or incomplete argument '%s'\n", argv[i]);
            return 2;
        }
    }
    if (keys < 0) {
        fprintf(stderr, "keymem memory: --keys N is required\n");
        return 2;
    }
    bool rocks = !strcmp(backend, "rocksdb");
    if (!rocks && strcmp(backend, "heap")) {
        fprintf(stderr, "keymem memory: --backend: '%s' is not heap or rocksdb\n", backend);
        return 2;
    }
    char tmpl[] = "/tmp/keymem-rocksdb.XXXXXX";
    bool own_dir = false;
    if (rocks && !rdir) {
        if (!mkdtemp(tmpl)) {
            fprintf(stderr, "keymem memory: mkdtemp '%s': %s\n", tmpl, strerror(errno));
            return 1;
        }
        rdir = tmpl;
        own_dir = true;
    }
    int64_t rss0, hwm0;
    read_rss_kb(&rss0, &hwm0);

    sum_fn_t fn = {.marker = keys, .emit = false, .rocks_dir = rocks ? rdir : NULL};
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 1);
    if (rocks) {
        sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);
        sl_env_set_rocksdb_options(env, rdir, cache, wbuf); /* 0: the defaults, 64 MiB each */
    }
    sl_stream_t *src = sl_uid(sl_from_source(env, seq_source(keys, true), sl_wm_none(), "keys"), "keys");
    sl_process_fn_t pf = {.open = sum_open, .process = sum_process, .opts = {.ctx = &fn}};
    sl_stream_t *none = sl_uid(sl_keyed_process(sl_key_by(src, "k"), pf,
                                                sl_schema_parse("k BIGINT NOT NULL, sum BIGINT NOT NULL", NULL, 0)),
                               "sum");
    sl_uid(sl_sink_to(none, sl_counting_sink(NULL), "discard"), "discard");
    double c0 = cpu_s();
    int64_t t0 = mono_ns();
    int rc = sl_env_execute(env, "keymem");
    int64_t t1 = mono_ns();
    double c1 = cpu_s();
    if (rc < 0) {
        fprintf(stderr, "keymem memory: %s\n", sl_env_error(env));
        sl_env_destroy(env);
        if (own_dir) rmdir(tmpl);
        return 1;
    }
    sl_env_destroy(env);
    if (own_dir) rmdir(tmpl); /* the backend removed its own directory inside */
    if (!fn.measured || fn.created != keys) {
        fprintf(stderr, "keymem memory: %s: %" PRId64 " state entries created for %" PRId64 " keys (marker %s)\n",
                backend, fn.created, keys, fn.measured ? "seen" : "never seen");
        return 1;
    }
    int64_t rss_end, hwm_end;
    read_rss_kb(&rss_end, &hwm_end);
    printf("engine=sluice mode=memory backend=%s keys=%" PRId64 " value=BIGINT key=BIGINT block_cache=%" PRId64
           " write_buffer=%" PRId64 " rss_kb=%" PRId64
           " hwm_kb=%" PRId64 " rss_start_kb=%" PRId64 " rss_after_job_kb=%" PRId64 " disk_bytes=%" PRId64
           " disk_alloc_bytes=%" PRId64 " disk_files=%" PRId64 " load_s=%.3f job_s=%.3f cpu_s=%.3f\n",
           backend, keys, rocks ? (cache ? cache : 64 << 20) : 0, rocks ? (wbuf ? wbuf : 64 << 20) : 0, fn.rss_kb, fn.hwm_kb, rss0, rss_end, rocks ? fn.disk_bytes : 0, rocks ? fn.disk_alloc : 0,
           rocks ? fn.disk_files : 0, (double)(fn.load_end_ns - fn.load_start_ns) / 1e9, (double)(t1 - t0) / 1e9,
           c1 - c0);
    return 0;
}

int main(int argc, char **argv) {
    int64_t main_ns = real_ns();
    if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help")) {
        fprintf(stderr, "usage: keymem launch CMD [ARG...]\n"
                        "       keymem startup [--records N] [--backend heap|rocksdb]\n"
                        "       keymem memory --keys N [--backend heap|rocksdb] [--rocksdb-dir DIR]\n"
                        "                     [--block-cache BYTES] [--write-buffer BYTES]   (e.g. 64M, 4M)\n");
        return argc < 2 ? 2 : 0;
    }
    if (!strcmp(argv[1], "launch")) return cmd_launch(argc - 2, argv + 2);
    if (!strcmp(argv[1], "startup")) return cmd_startup(argc - 2, argv + 2, main_ns);
    if (!strcmp(argv[1], "memory")) return cmd_memory(argc - 2, argv + 2);
    fprintf(stderr, "keymem: unknown mode '%s' (launch, startup, memory)\n", argv[1]);
    return 2;
}
