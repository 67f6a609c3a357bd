/*
 * test_cluster_window_random.c — the randomized window test of
 * test_window_random.c on a cluster of real processes, with TaskManager
 * kills (issue 10).
 *
 * One `sluice jobmanager` and three `sluice taskmanager`s (two slots each,
 * slots spread evenly) on loopback.  Each case is a random case of
 * window_random_gen.h, submitted with `sluice run` as the job
 * tests/tools/window_random_job.so (the scripted source paced in real time
 * so that the script takes a few seconds; tumbling / sliding / session
 * windows, allowed lateness and the late side output; count and sum per
 * (key, window); exactly-once file sinks; checkpoints every 50-200 ms; a
 * fixed-delay restart), at parallelism 2, 3 or 4, every other case on the
 * RocksDB backend.  While it runs, once the REST API
 * (GET /jobs/:id/checkpoints) shows a completed checkpoint, a TaskManager
 * that runs the job's current attempt is killed with kill -9 at a random
 * moment and a replacement started; one or two kills per case, each after
 * a checkpoint completed since the previous one.
 *
 * Then the committed output (the part files of the two exactly-once
 * sinks, in checkpoint order per subtask) is compared with the brute-force
 * reference of window_reference.h computed here from exactly the input the
 * job read (window_random_check.h): every firing — early, on time and
 * late re-firings — and every late record, as multisets; each firing's
 * timestamp end - 1; growing counts per (key, window) in commit order; the
 * accounting of every (event, window) pair.  All of it is compared, not
 * only the final firings: the source runs at parallelism 1 and each window
 * subtask reads it through one channel, so its records and watermarks
 * come in one order; the watermarks are a function of the script's
 * position and of the virtual clock the source advances, both in the
 * source's checkpointed state, and the window operator's watermark is in
 * the checkpoint too.  So a restored attempt sees the same records and
 * watermarks from the checkpoint on as the failure-free run, and with
 * exactly-once sinks the committed output is that of one failure-free run
 * (Flink's guarantee for deterministic input and watermarks).
 *
 * Also checked per case: the job finished, every kill hit a TaskManager
 * that ran part of the job and came after a completed checkpoint, the job
 * restarted at least once and its source resumed from a checkpoint at
 * least once (lines of the job in the TaskManagers' logs), no pending part
 * file is left.  Printed per case: seed, window kind, kills, restarts.
 *
 * Environment:
 *   SLUICE_SOAK_SEEDS=n   run n cases instead of 3 (soak runs)
 *   SLUICE_RAND_SEED=s    base seed (default 0xc1a57e5)
 *   SLUICE_RAND_CASE=i    run only case i (reproduce a failure)
 *   SLUICE_RAND_RUN_MS=t  real time the source's script takes (default 4000)
 *   SLUICE_CLUSTER_KEEP=1 keep the cluster's directory (logs, output)
 */
#include <dirent.h>
#include <sys/stat.h>

#include "cluster_util.h"
#include "window_random_check.h"

/* The job's shared object: SLUICE_WINDOW_RANDOM_JOB (CMakeLists.txt), else
 * window_random_job.so next to cluster_job.so. */
static const char *job_path(void) {
    static char path[1200];
#ifdef SLUICE_WINDOW_RANDOM_JOB
    snprintf(path, sizeof path, "%s", SLUICE_WINDOW_RANDOM_JOB);
#else
    snprintf(path, sizeof path, "%s", SLUICE_CLUSTER_JOB);
    char *slash = strrchr(path, '/');
    size_t at = slash ? (size_t)(slash + 1 - path) : 0;
    snprintf(path + at, sizeof path - at, "window_random_job.so");
#endif
    return path;
}

/* ---- the committed output ---- */

typedef struct part {
    char name[256];
    int subtask;
    long long ckpt; /* LLONG_MAX for part-<subtask>-end */
} part_t;

static int cmp_part(const void *a, const void *b) {
    const part_t *x = a, *y = b;
    if (x->subtask != y->subtask) return x->subtask < y->subtask ? -1 : 1;
    return x->ckpt < y->ckpt ? -1 : x->ckpt > y->ckpt;
}

/* Reads the committed part files of dir in (subtask, checkpoint) order:
 * every line's ncol integers into *vals (ncol per line), the subtask of
 * each line into *sub.  Counts hidden (pending / in-progress) files and
 * lines that do not parse.  Returns the number of lines, -1 when dir
 * cannot be read. */
static int64_t read_parts(const char *dir, int ncol, int64_t **vals, int **sub, int *hidden, int *bad) {
    *vals = NULL;
    *sub = NULL;
    *hidden = *bad = 0;
    DIR *d = opendir(dir);
    if (!d) return -1;
    part_t *parts = NULL;
    int np = 0, cp = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (e->d_name[0] == '.') {
            (*hidden)++;
            continue;
        }
        part_t p = {.ckpt = 0};
        snprintf(p.name, sizeof p.name, "%s", e->d_name);
        char tail[64] = "";
        if (sscanf(e->d_name, "part-%d-%63s", &p.subtask, tail) != 2) {
            fprintf(stderr, "    %s: unexpected file %s\n", dir, e->d_name);
            (*bad)++;
            continue;
        }
        p.ckpt = !strcmp(tail, "end") ? INT64_MAX : atoll(tail);
        if (np == cp) parts = realloc(parts, (size_t)(cp = cp ? 2 * cp : 16) * sizeof *parts);
        parts[np++] = p;
    }
    closedir(d);
    if (np > 0) qsort(parts, (size_t)np, sizeof *parts, cmp_part);
    int64_t n = 0, cap = 0;
    char *line = NULL;
    size_t lcap = 0;
    for (int i = 0; i < np; i++) {
        char path[2400];
        snprintf(path, sizeof path, "%s/%s", dir, parts[i].name);
        FILE *f = fopen(path, "r");
        ssize_t l;
        while (f && (l = getline(&line, &lcap, f)) > 0) {
            if (line[l - 1] == '\n') line[--l] = 0;
            if (l == 0) continue;
            if (n == cap) {
                cap = cap ? 2 * cap : 1024;
                *vals = realloc(*vals, (size_t)cap * (size_t)ncol * sizeof **vals);
                *sub = realloc(*sub, (size_t)cap * sizeof **sub);
            }
            char *p = line, *end;
            int k = 0;
            for (; k < ncol; k++) {
                (*vals)[n * ncol + k] = strtoll(p, &end, 10);
                if (end == p || (k + 1 < ncol && *end != ',') || (k + 1 == ncol && *end != 0)) break;
                p = end + 1;
            }
            if (k != ncol) {
                if ((*bad)++ < 3) fprintf(stderr, "    %s: line '%s' is not %d integers\n", path, line, ncol);
                continue;
            }
            (*sub)[n++] = parts[i].subtask;
        }
        if (f) fclose(f);
    }
    free(line);
    free(parts);
    return n;
}

/* ---- the cluster ---- */

/* The checkpoints the REST API shows as completed (-1: no answer). */
static int completed_checkpoints(cluster_t *c, const char *id) {
    char path[200];
    snprintf(path, sizeof path, "/jobs/%s/checkpoints", id);
    char *s = cl_http_get(c->rest_port, path);
    json_t *j = s ? json_loads(s, 0, NULL) : NULL;
    free(s);
    json_t *n = j ? json_object_get(json_object_get(j, "counts"), "completed") : NULL;
    int v = n ? (int)json_integer_value(n) : -1;
    json_decref(j);
    return v;
}

/* The TaskManagers (indexes into c->tm, alive) whose logs say they deploy
 * the latest attempt of the job named name; returns how many. */
static int tms_of_latest_attempt(cluster_t *c, const char *name, int *out) {
    int best = -1, n = 0;
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < c->ntm; i++) {
            if (c->tm[i].pid <= 0) continue;
            char *log = cl_slurp(c->tm[i].log);
            char needle[128];
            snprintf(needle, sizeof needle, "deploying job '%s' attempt ", name);
            int latest = -1;
            for (const char *p = log; (p = strstr(p, needle)); p++) {
                int a = atoi(p + strlen(needle));
                if (a > latest) latest = a;
            }
            free(log);
            if (pass == 0 && latest > best) best = latest;
            if (pass == 1 && latest == best && best >= 0) out[n++] = i;
        }
    return n;
}

/* lines with needle in every TaskManager's log (killed ones' included) */
static int count_in_tm_logs(cluster_t *c, const char *needle) {
    int n = 0;
    DIR *d = opendir(c->dir);
    struct dirent *e;
    while (d && (e = readdir(d))) {
        if (strncmp(e->d_name, "tm-", 3) || !strstr(e->d_name, ".log")) continue;
        char path[1400];
        snprintf(path, sizeof path, "%s/%s", c->dir, e->d_name);
        n += cl_count_in(path, needle);
    }
    if (d) closedir(d);
    return n;
}

/* kill -9 of c->tm[i]; its entry is reused (the logs stay on disk) */
static void kill_tm(cluster_t *c, int i) {
    cl_stop(&c->tm[i]);
    c->tm[i] = c->tm[--c->ntm];
}

typedef struct stats {
    int cases, failed, kills, restarts, resumes;
    int64_t events, firings, late;
} stats_t;

/* Runs case idx on the cluster; returns the number of problems. */
static int run_case(cluster_t *cl, int *next_tm, int idx, uint64_t seed, int run_ms, stats_t *st) {
    int problems = 0;
    int64_t t0 = cl_now_ms();
    rcase_t *c = calloc(1, sizeof *c);
    case_generate(c, idx, seed);
    static const int Ps[3] = {2, 3, 4};
    int P = Ps[(idx + idx / 3) % 3];
    bool rocksdb = idx % 2 == 1;
    uint64_t r = seed ^ 0x6b696c6cULL; /* the kills' randomness */
    int64_t interval = (int64_t[]){50, 100, 200}[rnd(&r, 0, 2)];
    int want_kills = (int)rnd(&r, 1, 2);
    c->P = P;
    char desc[1024], jname[64];
    case_describe(c, desc, sizeof desc);
    snprintf(jname, sizeof jname, "window-random-%d", idx); /* window_random_job.c's name */

    wr_result_t ref;
    if (wr_run(&c->p, c->ev, c->nev, c->act, c->nact, &ref) < 0) {
        fprintf(stderr, "  %s\n  %s\n", desc, ref.err);
        problems++;
    }

    char dir[1400], cmd[3000];
    snprintf(dir, sizeof dir, "%s/case-%d", cl->dir, idx);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s/out'", dir, dir);
    if (system(cmd) != 0) problems++;
    /* a clean start: three live TaskManagers registered */
    if (!cl_wait_tms(cl, 3, 20000)) {
        fprintf(stderr, "  %s: the cluster has not three TaskManagers\n", desc);
        problems++;
    }
    char args[3000], id[64] = "", st_[32] = "";
    snprintf(args, sizeof args, "%s/out %s/ck 0x%" PRIx64 " %d %d %lld --run-ms=%d%s", dir, dir, seed, idx, P,
             (long long)interval, run_ms, rocksdb ? " --rocksdb" : "");
    cl_submit_job(cl, job_path(), "", args, id, sizeof id);
    int kills = 0, kills_after_ckpt = 0;
    if (!id[0]) {
        fprintf(stderr, "  %s: the job was not submitted\n", desc);
        problems++;
    } else if (!cl_wait_state(cl, id, "RUNNING", 30000, st_, sizeof st_)) {
        fprintf(stderr, "  %s: the job is %s, not RUNNING\n", desc, st_);
        problems++;
    } else {
        int ck_before = 0;
        for (int k = 0; k < want_kills; k++) {
            /* a checkpoint completed since the previous kill */
            int64_t end = cl_now_ms() + 30000;
            int done = -1;
            while (cl_now_ms() < end) {
                cl_job_state(cl, id, st_, sizeof st_);
                if (strcmp(st_, "RUNNING") && strcmp(st_, "RESTARTING") && strcmp(st_, "CREATED")) break;
                done = completed_checkpoints(cl, id);
                if (done > ck_before) break;
                cl_sleep_ms(20);
            }
            if (done <= ck_before) {
                fprintf(stderr, "  %s: kill %d: no checkpoint completed (%d, job %s)\n", desc, k + 1, done, st_);
                problems++;
                break;
            }
            cl_sleep_ms((int)rnd(&r, 0, run_ms / 4)); /* a random moment */
            done = completed_checkpoints(cl, id);
            ck_before = done; /* the next kill waits for a checkpoint of this one's restarted attempt */
            int live[MAX_PROCS], nlive = tms_of_latest_attempt(cl, jname, live);
            cl_job_state(cl, id, st_, sizeof st_);
            if (strcmp(st_, "RUNNING") || nlive == 0) {
                fprintf(stderr, "  %s: kill %d: the job is %s, %d TaskManagers run it\n", desc, k + 1, st_, nlive);
                problems++;
                break;
            }
            int v = live[rnd(&r, 0, nlive - 1)];
            fprintf(stderr, "    kill -9 %s (%d of 3 running the job, %d checkpoints completed)\n", cl->tm[v].id,
                    nlive, done);
            kill_tm(cl, v);
            kills++;
            kills_after_ckpt++;
            if (cl->ntm < MAX_PROCS) cl_start_tm(cl, (*next_tm)++, 2, NULL, NULL); /* its replacement */
            /* the next kill hits the restarted attempt */
            end = cl_now_ms() + 30000;
            while (cl_now_ms() < end) {
                char needle[160];
                snprintf(needle, sizeof needle, "job 'window-random-%d' failed", idx);
                if (cl_count_in(cl->jm.log, needle) >= kills) break;
                cl_sleep_ms(20);
            }
        }
        if (!cl_wait_state(cl, id, "FINISHED", 120000, st_, sizeof st_)) {
            fprintf(stderr, "  %s: the job is %s, not FINISHED\n", desc, st_);
            problems++;
        }
    }
    char needle[160];
    snprintf(needle, sizeof needle, "job 'window-random-%d' failed", idx);
    int restarts = cl_count_in(cl->jm.log, needle);
    snprintf(needle, sizeof needle, "window_random_job: case %d: the source resumes from a checkpoint", idx);
    int resumes = count_in_tm_logs(cl, needle);
    if (kills < want_kills || kills_after_ckpt < 1 || restarts < 1 || resumes < 1) {
        fprintf(stderr, "  %s: %d of %d kills, %d restarts, the source resumed %d times from a checkpoint\n", desc,
                kills, want_kills, restarts, resumes);
        problems++;
    }

    /* the committed output */
    char fdir[1500], ldir[1500];
    snprintf(fdir, sizeof fdir, "%s/out/fired", dir);
    snprintf(ldir, sizeof ldir, "%s/out/late", dir);
    int64_t *fv, *lv;
    int *fs, *ls, fh, fb, lh, lb;
    int64_t nf = read_parts(fdir, 6, &fv, &fs, &fh, &fb);
    int64_t nl = read_parts(ldir, 5, &lv, &ls, &lh, &lb);
    if (nf < 0 || nl < 0 || fh || lh || fb || lb) {
        fprintf(stderr, "  %s: output: fired %lld lines (%d pending files, %d bad), late %lld (%d pending, %d bad)\n",
                desc, (long long)nf, fh, fb, (long long)nl, lh, lb);
        problems++;
    }
    efire_t *eng = calloc((size_t)(nf > 0 ? nf : 0) + 1, sizeof *eng);
    for (int64_t i = 0; i < nf; i++) {
        const int64_t *v = &fv[i * 6];
        eng[i] = (efire_t){{v[0], v[1], v[2], v[3], v[4]}, v[5], fs[i], i};
    }
    elate_t *lt = calloc((size_t)(nl > 0 ? nl : 0) + 1, sizeof *lt);
    for (int64_t i = 0; i < nl; i++) {
        const int64_t *v = &lv[i * 5];
        lt[i] = (elate_t){v[0], v[1], v[2], v[3], v[4]};
    }
    if (ref.err[0] == 0) problems += compare_case(c, &ref, eng, nf > 0 ? nf : 0, lt, nl > 0 ? nl : 0, desc);
    fprintf(stderr, "  %s %s: %s checkpoints every %lld ms: %d kill(s), %d restart(s), %d resume(s); events=%d "
                    "firings=%d (committed %lld) late=%d (committed %lld), %.1f s\n",
            problems ? "FAIL" : "ok", desc, rocksdb ? "rocksdb" : "heap", (long long)interval, kills, restarts,
            resumes, c->nev, ref.nfire, (long long)nf, ref.nlate, (long long)nl, (double)(cl_now_ms() - t0) / 1000.0);
    if (problems) {
        cl_dump_logs(cl);
        fprintf(stderr, "  reproduce: SLUICE_RAND_SEED=0x%" PRIx64 " SLUICE_RAND_CASE=%d\n",
                (uint64_t)(seed - (uint64_t)idx * 0x1000193ULL), idx);
    }
    st->cases++;
    st->failed += problems ? 1 : 0;
    st->kills += kills;
    st->restarts += restarts;
    st->resumes += resumes;
    st->events += c->nev;
    st->firings += ref.nfire;
    st->late += ref.nlate;
    free(fv);
    free(fs);
    free(lv);
    free(ls);
    free(eng);
    free(lt);
    wr_free(&ref);
    case_free(c);
    free(c);
    return problems;
}

TEST(cluster_windows_match_reference_with_kills) {
    int n = 3;
    const char *soak = getenv("SLUICE_SOAK_SEEDS");
    if (soak && atoi(soak) > 0) n = atoi(soak);
    uint64_t base = 0xc1a57e5; /* the 3 default cases: two with allowed lateness, one periodic watermark */
    const char *bs = getenv("SLUICE_RAND_SEED");
    if (bs) base = strtoull(bs, NULL, 0);
    int only = getenv("SLUICE_RAND_CASE") ? atoi(getenv("SLUICE_RAND_CASE")) : -1;
    int run_ms = getenv("SLUICE_RAND_RUN_MS") ? atoi(getenv("SLUICE_RAND_RUN_MS")) : 4000;
    CHECK(access(job_path(), R_OK) == 0); /* built next to cluster_job.so */
    cluster_t c;
    cl_cluster_init(&c, "window-random");
    c.evenly = true; /* the job's subtasks on every TaskManager */
    cl_start_jm(&c);
    int next = 1;
    for (int i = 0; i < 3; i++) cl_start_tm(&c, next++, 2, NULL, NULL);
    bool up = cl_wait_tms(&c, 3, 20000);
    if (!up) cl_dump_logs(&c);
    CHECK(up); /* no cluster: a failure, never a pass */
    stats_t st = {0};
    int64_t t0 = cl_now_ms();
    for (int i = 0; i < n || (only >= 0 && i <= only); i++)
        if (only < 0 || i == only) run_case(&c, &next, i, base + (uint64_t)i * 0x1000193ULL, run_ms, &st);
    fprintf(stderr, "  %d case(s) on the cluster, %d failed, %.1f s: %d TaskManagers killed, %d restarts, %d resumes "
                    "from a checkpoint, %lld events, %lld firings, %lld late records\n",
            st.cases, st.failed, (double)(cl_now_ms() - t0) / 1000.0, st.kills, st.restarts, st.resumes,
            (long long)st.events, (long long)st.firings, (long long)st.late);
    cl_cluster_stop(&c);
    cl_kill_all();
    if (!getenv("SLUICE_CLUSTER_KEEP")) { /* the cluster's directory and the processes' scratch files */
        char cmd[1200];
        snprintf(cmd, sizeof cmd, "rm -rf '%s'", sl_test_tmpdir());
        if (system(cmd) != 0) fprintf(stderr, "  could not remove %s\n", sl_test_tmpdir());
    }
    CHECK(st.cases > 0);
    CHECK_EQ(st.failed, 0);
}

int main(void) {
    RUN(cluster_windows_match_reference_with_kills);
    TEST_MAIN_END();
}
