/*
 * client.c — `sluice run` / `list` / `cancel` against a JobManager's REST
 * API (see client.h), with Flink's CLI output so that scripts written for
 * `flink` read it:
 *
 *   Job has been submitted with JobID <id>
 *   Waiting for response...
 *   ------------------ Running/Restarting Jobs -------------------
 *   <dd.MM.yyyy HH:mm:ss> : <jobid> : <name> (RUNNING)
 *   --------------------------------------------------------------
 *   Cancelling job <id>.
 *   Cancelled job <id>.
 *
 * A JOB with a '/' or ".so" in it is a file, uploaded (POST /jars/upload,
 * field "jarfile") and run by its jar id; any other JOB names a built-in
 * job, run through the reserved jar id "builtin".  The job's name (entryClass) is -c NAME,
 * else the built-in name, else the file's base name without "lib" and
 * ".so...".  Without -d, `run` polls GET /jobs/<id> until the job ends and
 * exits 1 unless it FINISHED.  `run -t local` (Flink's --target local)
 * talks to no JobManager: it builds the job (file or built-in name) and
 * runs it in this process through sl_env_execute.
 */
#include "cli/client.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/env_int.h"
#include "checkpoint/storage.h"
#include "cli/cluster.h"
#include "common/common.h"
#include "config/config.h"
#include "ha/ha_services.h"
#include "runtime/job_loader.h"
#include "sluice/sluice.h"
#include "sluice/config.h"

#define POLL_MS 200
#define POLL_GIVE_UP_MS 30000 /* the JobManager unreachable this long while waiting */

typedef struct opts {
    const char *verb;
    const char *jm;                 /* -m host:port */
    bool detached, allow_nrs;       /* run: -d, -n */
    int parallelism;                /* run: -p; 0 = not given */
    const char *savepoint;          /* run: -s */
    const char *entry_class;        /* run: -c */
    bool running, scheduled, all;   /* list: -r, -s, -a */
    const char *dispose;            /* savepoint: -d PATH */
    const char *target;             /* stop: -p DIR */
    bool drain;                     /* stop: -d */
    const char *type;               /* savepoint, stop: -t canonical|native */
    bool local;                     /* run: -t local (Flink's execution.target local) */
    sl_config_t cfg;
    bool have_cfg;
    bool quiet;                     /* parse without printing (sl_cli_run_is_remote) */
    int first_pos;                  /* index of the first positional argument */
} opts_t;

static bool is(const char *a, const char *s1, const char *s2) { return !strcmp(a, s1) || (s2 && !strcmp(a, s2)); }

/* Whether JOB names a job file (to upload) rather than a built-in job: it
 * has a '/' or a ".so" in it. */
static bool names_file(const char *job) { return strchr(job, '/') || strstr(job, ".so"); }

/* Parses the options in front of the first positional argument.  0, or 2
 * after printing what was wrong. */
static int parse_opts(const char *verb, int argc, char **argv, opts_t *o, bool quiet) {
    memset(o, 0, sizeof *o);
    o->verb = verb;
    o->quiet = quiet;
    FILE *ef = quiet ? NULL : stderr;
#define fprintf(f, ...) (ef ? fprintf(ef, __VA_ARGS__) : 0)
    sl_config_defaults(&o->cfg);
    char err[2048];
    bool run = !strcmp(verb, "run"), list = !strcmp(verb, "list"), sp = !strcmp(verb, "savepoint"),
         stop = !strcmp(verb, "stop");
    int i = 0;
    for (; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--")) { i++; break; }
        if (a[0] != '-' || !a[1]) break;
#define NEED_VALUE()                                                                     \
    do {                                                                                 \
        if (!v) { fprintf(stderr, "sluice %s: %s needs a value\n", verb, a); return 2; } \
        i++;                                                                             \
    } while (0)
        if (is(a, "-m", "--jobmanager")) { NEED_VALUE(); o->jm = v; }
        else if (!strcmp(a, "--config")) {
            NEED_VALUE();
            if (sl_config_load_file(&o->cfg, v, err, sizeof err) < 0) {
                fprintf(stderr, "sluice %s: %s\n", verb, err);
                return 2;
            }
            o->have_cfg = true;
        } else if (!strncmp(a, "-D", 2)) {
            const char *kv = a[2] ? a + 2 : v;
            if (!a[2]) NEED_VALUE();
            const char *eq = strchr(kv, '=');
            char key[256];
            if (!eq || eq == kv || (size_t)(eq - kv) >= sizeof key) {
                fprintf(stderr, "sluice %s: -D needs key=value, got '%s'\n", verb, kv);
                return 2;
            }
            snprintf(key, sizeof key, "%.*s", (int)(eq - kv), kv);
            if (sl_config_set(&o->cfg, key, eq + 1, err, sizeof err) < 0) {
                fprintf(stderr, "sluice %s: %s\n", verb, err);
                return 2;
            }
            o->have_cfg = true;
        } else if (run && is(a, "-d", "--detached")) o->detached = true;
        else if (run && is(a, "-n", "--allowNonRestoredState")) o->allow_nrs = true;
        else if (run && is(a, "-s", "--fromSavepoint")) { NEED_VALUE(); o->savepoint = v; }
        else if (run && is(a, "-c", "--class")) { NEED_VALUE(); o->entry_class = v; }
        else if (run && is(a, "-t", "--target")) {
            NEED_VALUE();
            if (strcmp(v, "local") && strcmp(v, "remote")) {
                fprintf(stderr, "sluice run: --target must be local (in this process) or remote (a JobManager), got '%s'\n", v);
                return 2;
            }
            o->local = !strcmp(v, "local");
        }
        else if (run && is(a, "-p", "--parallelism")) {
            NEED_VALUE();
            char *end;
            errno = 0;
            long p = strtol(v, &end, 10);
            if (!*v || *end || errno || p < 1 || p > INT_MAX) {
                fprintf(stderr, "sluice run: %s: expected a positive integer, got '%s'\n", a, v);
                return 2;
            }
            o->parallelism = (int)p;
        } else if (list && is(a, "-r", "--running")) o->running = true;
        else if (list && is(a, "-s", "--scheduled")) o->scheduled = true;
        else if (list && is(a, "-a", "--all")) o->all = true;
        else if (sp && is(a, "-d", "--dispose")) { NEED_VALUE(); o->dispose = v; }
        else if (stop && is(a, "-p", "--savepointPath")) { NEED_VALUE(); o->target = v; }
        else if (stop && is(a, "-d", "--drain")) o->drain = true;
        else if ((sp || stop) && is(a, "-t", "--type")) {
            NEED_VALUE();
            if (strcasecmp(v, "canonical") && strcasecmp(v, "native")) {
                fprintf(stderr, "sluice %s: --type must be canonical or native, got '%s'\n", verb, v);
                return 2;
            }
            o->type = v;
        }
        else {
            fprintf(stderr, "sluice %s: unknown option '%s' (see sluice --help)\n", verb, a);
            return 2;
        }
#undef NEED_VALUE
    }
    o->first_pos = i;
    if (o->have_cfg && sl_config_validate(&o->cfg, err, sizeof err) < 0) {
        fprintf(stderr, "sluice %s: %s\n", verb, err);
        return 2;
    }
    return 0;
#undef fprintf
}

/* The JobManager's base URL, "http://host:port", into out. */
static void base_url(const opts_t *o, char *out, size_t cap) {
    if (o->jm) {
        snprintf(out, cap, "%s%s", strncmp(o->jm, "http://", 7) && strncmp(o->jm, "https://", 8) ? "http://" : "",
                 o->jm);
        return;
    }
    char host[256] = "127.0.0.1", e[256];
    char tmp[256];
    sl_ha_config_t hc;
    char herr[1024];
    if (o->cfg.ha_type == SL_CFG_HA_ZOOKEEPER) { /* the leader's REST address, as published in ZooKeeper */
        sl_ha_leader_t l;
        if (sl_ha_config_from(&o->cfg, false, &hc, herr, sizeof herr) == 0 &&
            sl_ha_leader_lookup(&hc, hc.connect_ms, &l, herr, sizeof herr) == 0) {
            snprintf(out, cap, "%s", l.rest_url);
            return;
        }
        fprintf(stderr, "sluice: high availability: %s\n", herr);
    }
    if (sl_config_get_string(&o->cfg, "rest.address", tmp, sizeof tmp, e, sizeof e) == 0 && tmp[0])
        snprintf(host, sizeof host, "%s", tmp);
    else if (sl_config_key_set(&o->cfg, "jobmanager.rpc.address") && o->cfg.jobmanager_address)
        snprintf(host, sizeof host, "%s", o->cfg.jobmanager_address); /* Flink's fallback of rest.address */
    snprintf(out, cap, "http://%s:%d", host, o->cfg.rest_port);
}

/* ---- HTTP ----------------------------------------------------------------- */

typedef struct resp {
    long status;
    sl_buf_t body;
    json_t *json; /* the body parsed, or NULL */
} resp_t;

static size_t on_body(char *p, size_t sz, size_t n, void *ud) {
    resp_t *r = ud;
    if (r->body.len + sz * n > (64u << 20)) return 0; /* no answer of ours is this big */
    sl_buf_append(&r->body, p, sz * n);
    return sz * n;
}

static void resp_free(resp_t *r) {
    sl_buf_free(&r->body);
    if (r->json) json_decref(r->json);
    memset(r, 0, sizeof *r);
}

/* One request: method on base+path with an optional JSON body or file to
 * upload as the multipart field "jarfile".  0 when an HTTP answer came
 * (any status); -1 with a message when none did. */
static int http(const char *method, const char *base, const char *path, const char *json_body, const char *file,
                resp_t *r, char *err, size_t errlen) {
    memset(r, 0, sizeof *r);
    CURL *c = curl_easy_init();
    if (!c) return sl_errf(err, errlen, -1, "cannot initialize libcurl");
    char url[4096], cerr[CURL_ERROR_SIZE] = "";
    snprintf(url, sizeof url, "%s%s", base, path);
    struct curl_slist *h = NULL;
    const char *token = getenv("SLUICE_REST_TOKEN");
    char auth[1024];
    if (token && token[0]) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        h = curl_slist_append(h, auth);
    }
    curl_mime *mime = NULL;
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, r);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (!file) curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    if (json_body) {
        h = curl_slist_append(h, "Content-Type: application/json");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, json_body);
    } else if (file) {
        mime = curl_mime_init(c);
        curl_mimepart *part = curl_mime_addpart(mime);
        curl_mime_name(part, "jarfile");
        curl_mime_filedata(part, file);
        curl_mime_type(part, "application/octet-stream");
        curl_easy_setopt(c, CURLOPT_MIMEPOST, mime);
    }
    if (h) curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &r->status);
    curl_mime_free(mime);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    if (rc != CURLE_OK) {
        resp_free(r);
        return sl_errf(err, errlen, -1, "cannot reach the JobManager at %s: %s", base,
                       cerr[0] ? cerr : curl_easy_strerror(rc));
    }
    if (r->body.len) r->json = json_loadb((const char *)r->body.p, r->body.len, 0, NULL);
    return 0;
}

/* The message of an error answer: its "errors" joined, or the status. */
static void resp_error(const resp_t *r, char *out, size_t cap) {
    json_t *e = r->json ? json_object_get(r->json, "errors") : NULL;
    size_t o = 0;
    out[0] = 0;
    for (size_t i = 0; e && json_is_array(e) && i < json_array_size(e) && o + 1 < cap; i++) {
        const char *s = json_string_value(json_array_get(e, i));
        if (s) o += (size_t)snprintf(out + o, cap - o, "%s%s", o ? "; " : "", s);
    }
    if (!out[0]) snprintf(out, cap, "HTTP %ld", r->status);
}

static int finish(opts_t *o, int rc) {
    sl_config_free(&o->cfg);
    return rc;
}

/* ---- run -------------------------------------------------------------------- */

bool sl_cli_run_is_remote(int argc, char **argv) {
    int i = 0;
    for (; i < argc; i++) {
        const char *a = argv[i];
        if (is(a, "-m", "--jobmanager") || is(a, "-d", "--detached") || is(a, "-s", "--fromSavepoint") ||
            is(a, "-n", "--allowNonRestoredState") || is(a, "-c", "--class") || is(a, "-t", "--target"))
            return true;
        if (is(a, "-p", "--parallelism") || !strcmp(a, "--config") || !strcmp(a, "-D")) {
            i++;
            continue;
        }
        if (!strncmp(a, "-D", 2)) continue;
        if (a[0] != '-' && names_file(a)) return true; /* JOB is a job file */
        break; /* a built-in job's name, or an option of the embedded run */
    }
    /* The configuration given so far, if any, decides; parsed quietly (the
     * embedded run reports its own errors). */
    opts_t o;
    bool remote = false;
    if (parse_opts("run", i < argc ? i : argc, argv, &o, true) == 0)
        remote = sl_config_key_set(&o.cfg, "rest.address") || sl_config_key_set(&o.cfg, "rest.port") ||
                 sl_config_key_set(&o.cfg, "jobmanager.rpc.address") || o.cfg.ha_type == SL_CFG_HA_ZOOKEEPER;
    sl_config_free(&o.cfg);
    return remote;
}

/* The job's name for an uploaded file: its base name without "lib" and ".so..." */
static void name_of_file(const char *path, char *out, size_t cap) {
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    if (!strncmp(b, "lib", 3) && b[3]) b += 3;
    snprintf(out, cap, "%s", b);
    char *so = strstr(out, ".so");
    if (so && so != out) *so = 0;
}

static bool terminal(const char *state) {
    return !strcmp(state, "FINISHED") || !strcmp(state, "FAILED") || !strcmp(state, "CANCELED");
}

static void sleep_ms(int ms) {
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

/* Polls the job until it ends; the exit code. */
static int wait_for(const char *base, const char *jobid) {
    char path[512], err[1024];
    char *esc = curl_easy_escape(NULL, jobid, 0);
    snprintf(path, sizeof path, "/jobs/%s", esc);
    curl_free(esc);
    int64_t failing_since = 0;
    for (;;) {
        resp_t r;
        if (http("GET", base, path, NULL, NULL, &r, err, sizeof err) == 0 && r.status == 200) {
            failing_since = 0;
            const char *state = json_string_value(json_object_get(r.json, "state"));
            if (state && terminal(state)) {
                int rc = 1;
                long long dur = (long long)json_integer_value(json_object_get(r.json, "duration"));
                if (!strcmp(state, "FINISHED")) {
                    printf("Program execution finished\nJob with JobID %s has finished.\nJob Runtime: %lld ms\n", jobid,
                           dur);
                    rc = 0;
                } else if (!strcmp(state, "CANCELED"))
                    fprintf(stderr, "sluice run: job %s was cancelled (after %lld ms)\n", jobid, dur);
                else fprintf(stderr, "sluice run: job %s FAILED (after %lld ms)\n", jobid, dur);
                resp_free(&r);
                return rc;
            }
        } else if (r.status == 404) {
            fprintf(stderr, "sluice run: job %s is no longer known to the JobManager\n", jobid);
            resp_free(&r);
            return 1;
        } else {
            int64_t now = sl_mono_ns() / 1000000;
            if (!failing_since) failing_since = now;
            if (now - failing_since > POLL_GIVE_UP_MS) {
                if (r.status) resp_error(&r, err, sizeof err);
                fprintf(stderr, "sluice run: lost the JobManager while waiting for job %s: %s\n", jobid, err);
                resp_free(&r);
                return 1;
            }
        }
        resp_free(&r);
        fflush(stdout);
        sleep_ms(POLL_MS);
    }
}

/* `sluice run -t local JOB [args]`: builds JOB (a file or a built-in
 * name) on a fresh environment configured by --config / -D, and runs it
 * in this process (sl_env_execute: a JobManager and a TaskManager over the
 * in-memory transport), printing what the remote run prints. */
static int run_local(opts_t *o, int argc, char **argv) {
    const char *job = argv[o->first_pos];
    char artifact[4200], err[2048];
    if (names_file(job)) {
        if (strlen(job) >= sizeof artifact) {
            fprintf(stderr, "sluice run: job path too long\n");
            return 2;
        }
        snprintf(artifact, sizeof artifact, "%s", job);
    } else {
        snprintf(artifact, sizeof artifact, "builtin:%.256s", job);
    }
    if (o->parallelism) {
        fprintf(stderr, "sluice run: -p %d: a job's parallelism is set by the job itself (sl_env_set_parallelism); pass it "
                        "as one of the job's arguments, or -D parallelism.default=N\n", o->parallelism);
        return 2;
    }
    sl_job_main_fn fn;
    void *dl;
    const char *name;
    sl_cli_register_builtin_jobs();
    if (sl_job_entry(artifact, &fn, &dl, &name, err, sizeof err) < 0) {
        fprintf(stderr, "sluice run: %s\n", err);
        return 2;
    }
    char jobname[256];
    name_of_file(name, jobname, sizeof jobname);
    sl_env_t *env = sl_env_new();
    int rc = 0;
    if (o->have_cfg) rc = sl_env_configure(env, &o->cfg);
    if (rc == 0 && o->savepoint) rc = sl_env_restore_from(env, o->savepoint);
    if (rc == 0 && o->allow_nrs) sl_env_set_allow_non_restored_state(env, true);
    int nargs = argc - o->first_pos;
    char **jargv = sl_calloc((size_t)nargs + 1, sizeof *jargv);
    char *jargv0 = o->entry_class ? (char *)o->entry_class : jobname;
    jargv[0] = jargv0;
    for (int i = 1; i < nargs; i++) jargv[i] = argv[o->first_pos + i];
    if (rc == 0) rc = fn(env, nargs, jargv);
    sl_free(jargv);
    int exit_code = 1;
    if (rc < 0 || sl_env_error(env)[0]) {
        fprintf(stderr, "sluice run: job '%s' could not be built: %s\n", jobname,
                sl_env_error(env)[0] ? sl_env_error(env) : sl_strerror(rc));
    } else {
        /* the name the cluster would give it (job_loader.c): the job's own, else -c, else the file's */
        const char *run_name = env->job_name ? env->job_name : jargv0;
        int64_t t0 = sl_mono_ns();
        rc = sl_env_execute(env, run_name);
        long long ms = (long long)((sl_mono_ns() - t0) / 1000000);
        if (rc == 0) {
            printf("Program execution finished\nJob has finished (local).\nJob Runtime: %lld ms\n", ms);
            exit_code = 0;
        } else {
            fprintf(stderr, "sluice run: job '%s' FAILED (after %lld ms): %s\n", jobname, ms,
                    sl_env_error(env)[0] ? sl_env_error(env) : sl_strerror(rc));
        }
    }
    sl_env_destroy(env);
    if (dl) dlclose(dl);
    return exit_code;
}

int sl_cli_run(int argc, char **argv) {
    opts_t o;
    if (parse_opts("run", argc, argv, &o, false)) return finish(&o, 2);
    if (o.first_pos >= argc) {
        fprintf(stderr, "sluice run: no job given (a built-in job's name or a job's shared object)\n");
        return finish(&o, 2);
    }
    if (o.local) return finish(&o, run_local(&o, argc, argv));
    const char *job = argv[o.first_pos];
    char base[512], err[2048], jarid[512], name[256];
    base_url(&o, base, sizeof base);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    struct stat st;
    int rc = 1;
    if (names_file(job) && (stat(job, &st) != 0 || !S_ISREG(st.st_mode))) {
        fprintf(stderr, "sluice run: %s: no such file\n", job);
        rc = 2;
        goto out;
    }
    if (names_file(job)) {
        resp_t r;
        if (http("POST", base, "/jars/upload", NULL, job, &r, err, sizeof err)) {
            fprintf(stderr, "sluice run: %s\n", err);
            goto out;
        }
        const char *fn = json_string_value(json_object_get(r.json, "filename"));
        if (r.status != 200 || !fn) {
            resp_error(&r, err, sizeof err);
            fprintf(stderr, "sluice run: could not upload %s: %s\n", job, err);
            resp_free(&r);
            goto out;
        }
        const char *slash = strrchr(fn, '/');
        snprintf(jarid, sizeof jarid, "%s", slash ? slash + 1 : fn);
        resp_free(&r);
        name_of_file(job, name, sizeof name);
    } else {
        snprintf(jarid, sizeof jarid, "builtin");
        snprintf(name, sizeof name, "%s", job);
    }
    json_t *args = json_array();
    for (int i = o.first_pos + 1; i < argc; i++) json_array_append_new(args, json_string(argv[i]));
    json_t *req = json_pack("{s:s, s:o}", "entryClass", o.entry_class ? o.entry_class : name, "programArgsList", args);
    if (!req) {
        fprintf(stderr, "sluice run: the job's name or arguments are not UTF-8\n");
        rc = 2;
        goto out;
    }
    if (o.parallelism) json_object_set_new(req, "parallelism", json_integer(o.parallelism));
    if (o.savepoint) json_object_set_new(req, "savepointPath", json_string(o.savepoint));
    if (o.allow_nrs) json_object_set_new(req, "allowNonRestoredState", json_true());
    char *body = json_dumps(req, JSON_COMPACT);
    json_decref(req);
    char path[1024];
    char *esc = curl_easy_escape(NULL, jarid, 0);
    snprintf(path, sizeof path, "/jars/%s/run", esc);
    curl_free(esc);
    resp_t r;
    int hr = http("POST", base, path, body, NULL, &r, err, sizeof err);
    free(body);
    if (hr) {
        fprintf(stderr, "sluice run: %s\n", err);
        goto out;
    }
    const char *jobid = json_string_value(json_object_get(r.json, "jobid"));
    if (r.status != 200 || !jobid) {
        resp_error(&r, err, sizeof err);
        fprintf(stderr, "sluice run: could not run %s: %s\n", job, err);
        resp_free(&r);
        goto out;
    }
    char id[256];
    snprintf(id, sizeof id, "%s", jobid);
    resp_free(&r);
    printf("Job has been submitted with JobID %s\n", id);
    fflush(stdout);
    rc = o.detached ? 0 : wait_for(base, id);
out:
    curl_global_cleanup();
    return finish(&o, rc);
}

/* ---- list, cancel ------------------------------------------------------------- */

typedef struct row {
    int64_t start;
    const char *id, *name, *state;
} row_t;

static int by_start(const void *a, const void *b) {
    const row_t *x = a, *y = b;
    return (x->start > y->start) - (x->start < y->start);
}

static void print_rows(row_t *rows, int n) {
    qsort(rows, (size_t)n, sizeof *rows, by_start);
    for (int i = 0; i < n; i++) {
        time_t t = (time_t)(rows[i].start / 1000);
        struct tm tm;
        localtime_r(&t, &tm);
        char date[32];
        strftime(date, sizeof date, "%d.%m.%Y %H:%M:%S", &tm);
        printf("%s : %s : %s (%s)\n", date, rows[i].id, rows[i].name, rows[i].state);
    }
}

int sl_cli_list(int argc, char **argv) {
    opts_t o;
    if (parse_opts("list", argc, argv, &o, false)) return finish(&o, 2);
    if (o.first_pos < argc) {
        fprintf(stderr, "sluice list: unexpected argument '%s'\n", argv[o.first_pos]);
        return finish(&o, 2);
    }
    if (!o.running && !o.scheduled && !o.all) o.running = o.scheduled = true; /* as Flink */
    char base[512], err[2048];
    base_url(&o, base, sizeof base);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    printf("Waiting for response...\n");
    fflush(stdout);
    resp_t r;
    int rc = 1;
    if (http("GET", base, "/jobs/overview", NULL, NULL, &r, err, sizeof err)) {
        fprintf(stderr, "sluice list: %s\n", err);
        goto out;
    }
    json_t *jobs = json_object_get(r.json, "jobs");
    if (r.status != 200 || !json_is_array(jobs)) {
        resp_error(&r, err, sizeof err);
        fprintf(stderr, "sluice list: could not list the jobs: %s\n", err);
        resp_free(&r);
        goto out;
    }
    size_t n = json_array_size(jobs);
    row_t *run = sl_calloc(n + 1, sizeof *run), *sched = sl_calloc(n + 1, sizeof *sched),
          *term = sl_calloc(n + 1, sizeof *term);
    int nr = 0, ns = 0, nt = 0;
    for (size_t i = 0; i < n; i++) {
        json_t *j = json_array_get(jobs, i);
        row_t w = {json_integer_value(json_object_get(j, "start-time")),
                   json_string_value(json_object_get(j, "jid")), json_string_value(json_object_get(j, "name")),
                   json_string_value(json_object_get(j, "state"))};
        if (!w.id || !w.state) continue;
        if (!w.name) w.name = "";
        if (!strcmp(w.state, "CREATED")) sched[ns++] = w;
        else if (!terminal(w.state)) run[nr++] = w;
        else term[nt++] = w;
    }
    const char *rule = "--------------------------------------------------------------";
    if (o.running || o.all) {
        if (!nr) printf("No running jobs.\n");
        else {
            printf("------------------ Running/Restarting Jobs -------------------\n");
            print_rows(run, nr);
            printf("%s\n", rule);
        }
    }
    if (o.scheduled || o.all) {
        if (!ns) printf("No scheduled jobs.\n");
        else {
            printf("----------------------- Scheduled Jobs -----------------------\n");
            print_rows(sched, ns);
            printf("%s\n", rule);
        }
    }
    if (o.all && nt) {
        printf("---------------------- Terminated Jobs -----------------------\n");
        print_rows(term, nt);
        printf("%s\n", rule);
    }
    sl_free(run);
    sl_free(sched);
    sl_free(term);
    resp_free(&r);
    rc = 0;
out:
    curl_global_cleanup();
    return finish(&o, rc);
}

int sl_cli_cancel(int argc, char **argv) {
    opts_t o;
    if (parse_opts("cancel", argc, argv, &o, false)) return finish(&o, 2);
    if (o.first_pos >= argc) {
        fprintf(stderr, "sluice cancel: no job id given\n");
        return finish(&o, 2);
    }
    if (o.first_pos + 1 < argc) {
        fprintf(stderr, "sluice cancel: unexpected argument '%s'\n", argv[o.first_pos + 1]);
        return finish(&o, 2);
    }
    const char *jobid = argv[o.first_pos];
    char base[512], err[2048], path[1024];
    base_url(&o, base, sizeof base);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    printf("Cancelling job %s.\n", jobid);
    fflush(stdout);
    char *esc = curl_easy_escape(NULL, jobid, 0);
    snprintf(path, sizeof path, "/jobs/%s?mode=cancel", esc);
    curl_free(esc);
    resp_t r;
    int rc = 1;
    if (http("PATCH", base, path, NULL, NULL, &r, err, sizeof err)) fprintf(stderr, "sluice cancel: %s\n", err);
    else if (r.status != 202 && r.status != 200) {
        resp_error(&r, err, sizeof err);
        fprintf(stderr, "sluice cancel: could not cancel job %s: %s\n", jobid, err);
    } else {
        printf("Cancelled job %s.\n", jobid);
        rc = 0;
    }
    resp_free(&r);
    curl_global_cleanup();
    return finish(&o, rc);
}

/* ---- savepoint, stop -------------------------------------------------------- */

/* Polls GET /jobs/<id>/savepoints/<trigger> until the savepoint ended; its
 * location into loc.  0, or 1 after printing why it failed. */
static int wait_savepoint(const char *verb, const char *base, const char *jobid, const char *trigger, char *loc,
                          size_t cap) {
    char path[1024], err[2048];
    char *ej = curl_easy_escape(NULL, jobid, 0), *et = curl_easy_escape(NULL, trigger, 0);
    snprintf(path, sizeof path, "/jobs/%s/savepoints/%s", ej, et);
    curl_free(ej);
    curl_free(et);
    int64_t failing_since = 0;
    for (;;) {
        resp_t r;
        if (http("GET", base, path, NULL, NULL, &r, err, sizeof err) == 0 && r.status == 200) {
            failing_since = 0;
            const char *st = json_string_value(json_object_get(json_object_get(r.json, "status"), "id"));
            json_t *op = json_object_get(r.json, "operation");
            if (st && !strcmp(st, "COMPLETED")) {
                const char *l = json_string_value(json_object_get(op, "location"));
                json_t *fc = json_object_get(op, "failure-cause");
                const char *why = json_string_value(json_object_get(fc, "stack-trace"));
                int rc = 0;
                if (l) snprintf(loc, cap, "%s", l);
                else {
                    fprintf(stderr, "sluice %s: the savepoint of job %s failed: %s\n", verb, jobid,
                            why ? why : "no reason given");
                    rc = 1;
                }
                resp_free(&r);
                return rc;
            }
        } else if (r.status == 404) {
            resp_error(&r, err, sizeof err);
            fprintf(stderr, "sluice %s: %s\n", verb, err);
            resp_free(&r);
            return 1;
        } else {
            int64_t now = sl_mono_ns() / 1000000;
            if (!failing_since) failing_since = now;
            if (now - failing_since > POLL_GIVE_UP_MS) {
                if (r.status) resp_error(&r, err, sizeof err);
                fprintf(stderr, "sluice %s: lost the JobManager while waiting for the savepoint of job %s: %s\n",
                        verb, jobid, err);
                resp_free(&r);
                return 1;
            }
        }
        resp_free(&r);
        sleep_ms(POLL_MS);
    }
}

/* POST body to /jobs/<id>/<what> (savepoints or stop); the trigger id into
 * trigger.  0, or 1 after printing why. */
static int trigger_savepoint(const char *verb, const char *base, const char *jobid, const char *what, json_t *body,
                             char *trigger, size_t cap) {
    char path[1024], err[2048];
    char *ej = curl_easy_escape(NULL, jobid, 0);
    snprintf(path, sizeof path, "/jobs/%s/%s", ej, what);
    curl_free(ej);
    char *b = json_dumps(body, JSON_COMPACT);
    resp_t r;
    int hr = http("POST", base, path, b, NULL, &r, err, sizeof err);
    free(b);
    if (hr) {
        fprintf(stderr, "sluice %s: %s\n", verb, err);
        return 1;
    }
    const char *t = json_string_value(json_object_get(r.json, "request-id"));
    if ((r.status != 202 && r.status != 200) || !t) {
        resp_error(&r, err, sizeof err);
        fprintf(stderr, "sluice %s: could not take a savepoint of job %s: %s\n", verb, jobid, err);
        resp_free(&r);
        return 1;
    }
    snprintf(trigger, cap, "%s", t);
    resp_free(&r);
    return 0;
}

static int dispose(const char *path) {
    char err[2048];
    printf("Disposing savepoint '%s'.\n", path);
    if (sl_ckpt_savepoint_dispose(path, err, sizeof err) < 0) {
        fprintf(stderr, "sluice savepoint: could not dispose of '%s': %s\n", path, err);
        return 1;
    }
    printf("Savepoint '%s' disposed.\n", path);
    return 0;
}

int sl_cli_savepoint(int argc, char **argv) {
    opts_t o;
    if (parse_opts("savepoint", argc, argv, &o, false)) return finish(&o, 2);
    if (o.dispose) {
        if (o.first_pos < argc) {
            fprintf(stderr, "sluice savepoint: --dispose takes no job id ('%s')\n", argv[o.first_pos]);
            return finish(&o, 2);
        }
        return finish(&o, dispose(o.dispose));
    }
    if (o.first_pos >= argc) {
        fprintf(stderr, "sluice savepoint: no job id given (sluice savepoint JOBID [DIR], or --dispose PATH)\n");
        return finish(&o, 2);
    }
    if (o.first_pos + 2 < argc) {
        fprintf(stderr, "sluice savepoint: unexpected argument '%s'\n", argv[o.first_pos + 2]);
        return finish(&o, 2);
    }
    const char *jobid = argv[o.first_pos], *dir = o.first_pos + 1 < argc ? argv[o.first_pos + 1] : NULL;
    char base[512], trigger[128], loc[4200];
    base_url(&o, base, sizeof base);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    printf("Triggering savepoint for job %s.\n", jobid);
    printf("Waiting for response...\n");
    fflush(stdout);
    const char *fmt = o.type && !strcasecmp(o.type, "native") ? "NATIVE" : "CANONICAL";
    json_t *body = json_pack("{s:b, s:s}", "cancel-job", 0, "formatType", fmt);
    if (dir) json_object_set_new(body, "target-directory", json_string(dir));
    int rc = trigger_savepoint("savepoint", base, jobid, "savepoints", body, trigger, sizeof trigger);
    json_decref(body);
    if (rc == 0) rc = wait_savepoint("savepoint", base, jobid, trigger, loc, sizeof loc);
    if (rc == 0) {
        printf("Savepoint completed. Path: file:%s\n", loc);
        printf("You can resume your program from this savepoint with the run command.\n");
    }
    curl_global_cleanup();
    return finish(&o, rc);
}

int sl_cli_stop(int argc, char **argv) {
    opts_t o;
    if (parse_opts("stop", argc, argv, &o, false)) return finish(&o, 2);
    if (o.first_pos >= argc) {
        fprintf(stderr, "sluice stop: no job id given (sluice stop [-p DIR] [-d] JOBID)\n");
        return finish(&o, 2);
    }
    if (o.first_pos + 1 < argc) {
        fprintf(stderr, "sluice stop: unexpected argument '%s'\n", argv[o.first_pos + 1]);
        return finish(&o, 2);
    }
    const char *jobid = argv[o.first_pos];
    char base[512], trigger[128], loc[4200];
    base_url(&o, base, sizeof base);
    curl_global_init(CURL_GLOBAL_DEFAULT);
    printf("Suspending job \"%s\" with a savepoint%s.\n", jobid, o.drain ? " (draining)" : "");
    fflush(stdout);
    const char *fmt = o.type && !strcasecmp(o.type, "native") ? "NATIVE" : "CANONICAL";
    json_t *body = json_pack("{s:b, s:s}", "drain", o.drain, "formatType", fmt);
    if (o.target) json_object_set_new(body, "targetDirectory", json_string(o.target));
    int rc = trigger_savepoint("stop", base, jobid, "stop", body, trigger, sizeof trigger);
    json_decref(body);
    if (rc == 0) rc = wait_savepoint("stop", base, jobid, trigger, loc, sizeof loc);
    if (rc == 0) printf("Savepoint completed. Path: file:%s\n", loc);
    curl_global_cleanup();
    return finish(&o, rc);
}
