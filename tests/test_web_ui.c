/*
 * test_web_ui.c — the web UI (web/, embedded into the binary, served by the
 * JobManager at / and /web/...) in headless Chromium against a real
 * cluster: a JobManager, two TaskManagers and cluster_job.so.
 *
 * tests/tools/web_ui_driver.py drives Chromium over the DevTools protocol
 * (loads a page, waits, reads the DOM's ids and data- attributes, clicks);
 * this file fetches the same figures from the REST API around each read
 * and checks that the page shows what the REST API answers: for figures
 * that only grow (checkpoint counts) the page's value must lie between the
 * REST answers fetched before and after it, and a second read in the same
 * page must have grown (the auto-refresh).  Also: the files are served
 * byte for byte with their Content-Type and Cache-Control, nothing else
 * is (no path the client names is opened), the Trigger savepoint button
 * makes a savepoint whose _metadata exists, Cancel cancels, a bad token
 * shows the login box.  Without Chromium the test fails saying so.
 *
 * SLUICE_CHROMIUM=path picks the browser (default: chromium on $PATH);
 * SLUICE_WEB_SCREENSHOTS=dir writes the screenshots there (the README's
 * PNGs under docs/screenshots/), else into the test's temporary directory.
 */
#include <signal.h>
#include <sys/stat.h>

#include "cluster_util.h"

static char g_src[1024];      /* the source tree, from __FILE__ */
static char g_chromium[1024];
static char g_driver[1200];
static char g_shots[1100];
static cluster_t C;
static char J[64];            /* the running job */
static char g_base[128];      /* http://127.0.0.1:<rest port>/ */
static int g_steps;

/* ---- HTTP ---------------------------------------------------------------- */

typedef struct resp {
    int status;
    char *head;   /* the status line and headers */
    char *body;
    size_t len;
} resp_t;

static void resp_free(resp_t *r) {
    free(r->head);
    free(r->body);
    memset(r, 0, sizeof *r);
}

/* METHOD path with extra header lines ("K: V\r\n..." or NULL). */
static resp_t http(int port, const char *method, const char *path, const char *extra) {
    resp_t out = {0};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return out;
    }
    char req[2048];
    int n = snprintf(req, sizeof req, "%s %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n%s%s\r\n", method,
                     path, extra ? extra : "", !strcmp(method, "POST") ? "Content-Length: 0\r\n" : "");
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return out;
    }
    sl_buf_t b = {0};
    char chunk[8192];
    ssize_t r;
    while ((r = read(fd, chunk, sizeof chunk)) > 0) sl_buf_append(&b, chunk, (size_t)r);
    close(fd);
    sl_buf_append(&b, "", 1);
    char *p = (char *)b.p, *sep = strstr(p, "\r\n\r\n");
    if (sep && sscanf(p, "HTTP/1.%*d %d", &out.status) == 1) {
        out.head = strndup(p, (size_t)(sep - p + 2));
        out.len = b.len - 1 - (size_t)(sep + 4 - p);
        out.body = malloc(out.len + 1);
        memcpy(out.body, sep + 4, out.len + 1);
    }
    sl_buf_free(&b);
    return out;
}

/* A header's value (static buffer) or "". */
static const char *header(const resp_t *r, const char *name) {
    static char v[512];
    v[0] = 0;
    if (!r->head) return v;
    char pat[128];
    snprintf(pat, sizeof pat, "\r\n%s:", name);
    const char *h = strcasestr(r->head, pat);
    if (!h) return v;
    h += strlen(pat);
    while (*h == ' ') h++;
    size_t n = strcspn(h, "\r\n");
    snprintf(v, sizeof v, "%.*s", (int)n, h);
    return v;
}

static json_t *rest(int port, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static json_t *rest(int port, const char *fmt, ...) {
    char path[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(path, sizeof path, fmt, ap);
    va_end(ap);
    char *s = cl_http_get(port, path);
    json_t *j = s ? json_loads(s, 0, NULL) : NULL;
    free(s);
    return j;
}

static int rest_status(int port, const char *path) {
    resp_t r = http(port, "GET", path, NULL);
    int s = r.status;
    resp_free(&r);
    return s;
}

/* ---- the browser ------------------------------------------------------------- */

static bool find_chromium(void) {
    const char *e = getenv("SLUICE_CHROMIUM");
    if (e && *e) {
        snprintf(g_chromium, sizeof g_chromium, "%s", e);
        return access(g_chromium, X_OK) == 0;
    }
    const char *names[] = {"chromium", "chromium-browser", "google-chrome", NULL};
    const char *path = getenv("PATH");
    for (int i = 0; names[i]; i++) {
        char dirs[4096];
        snprintf(dirs, sizeof dirs, "%s", path ? path : "/usr/bin:/bin");
        for (char *save, *d = strtok_r(dirs, ":", &save); d; d = strtok_r(NULL, ":", &save)) {
            snprintf(g_chromium, sizeof g_chromium, "%s/%s", d, names[i]);
            if (access(g_chromium, X_OK) == 0) return true;
        }
    }
    return false;
}

static json_t *s_goto(const char *url) { return json_pack("{s:s, s:s}", "op", "goto", "url", url); }
static json_t *s_wait(const char *name, const char *js, double timeout) {
    return json_pack("{s:s, s:s, s:s, s:f}", "op", "wait", "name", name, "js", js, "timeout", timeout);
}
static json_t *s_eval(const char *name, const char *js) {
    return json_pack("{s:s, s:s, s:s}", "op", "eval", "name", name, "js", js);
}
static json_t *s_shot(const char *file) {
    char path[1300];
    snprintf(path, sizeof path, "%s/%s", g_shots, file);
    return json_pack("{s:s, s:s}", "op", "screenshot", "path", path);
}

/* Runs the steps (a JSON array, consumed) in one page: name -> {"ok","value"}. */
static json_t *drive(json_t *steps) {
    char path[1200];
    snprintf(path, sizeof path, "%s/steps-%d.json", C.dir, g_steps++);
    json_dump_file(steps, path, JSON_INDENT(1));
    json_decref(steps);
    char cmd[4096];
    snprintf(cmd, sizeof cmd, "python3 '%s' '%s' '@%s'", g_driver, g_chromium, path);
    FILE *f = popen(cmd, "r");
    json_t *out = json_object();
    char *line = NULL;
    size_t cap = 0;
    while (f && getline(&line, &cap, f) > 0) {
        json_t *o = json_loads(line, 0, NULL);
        const char *name = o ? json_string_value(json_object_get(o, "name")) : NULL;
        if (name) json_object_set(out, name, o);
        json_decref(o);
    }
    free(line);
    int rc = f ? pclose(f) : -1;
    if (rc != 0) {
        fprintf(stderr, "  web_ui_driver.py failed (%d): %s\n", rc, cmd);
        json_decref(out);
        return NULL;
    }
    return out;
}

static bool ok(json_t *res, const char *name) {
    json_t *o = json_object_get(res, name);
    if (!o || !json_is_true(json_object_get(o, "ok"))) {
        fprintf(stderr, "  step %s: %s\n", name, o ? json_dumps(o, 0) : "(no result)");
        return false;
    }
    return true;
}
static json_t *val(json_t *res, const char *name) { return json_object_get(json_object_get(res, name), "value"); }
static long long ival(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    if (json_is_integer(v)) return json_integer_value(v);
    if (json_is_string(v)) return atoll(json_string_value(v));
    return -999999;
}
static const char *sval(json_t *o, const char *key) {
    const char *s = json_string_value(json_object_get(o, key));
    return s ? s : "(none)";
}

static bool png_ok(const char *file) {
    char path[1300];
    snprintf(path, sizeof path, "%s/%s", g_shots, file);
    struct stat st;
    FILE *f = fopen(path, "rb");
    unsigned char m[8] = {0};
    bool good = f && fread(m, 1, 8, f) == 8 && !memcmp(m, "\x89PNG\r\n\x1a\n", 8) && stat(path, &st) == 0 &&
                st.st_size > 1000 && st.st_size < 200 * 1024;
    if (f) fclose(f);
    if (!good) fprintf(stderr, "  screenshot %s missing, not a PNG or not under 200 KB\n", path);
    return good;
}

/* ---- the files ----------------------------------------------------------------- */

TEST(serves_embedded_files) {
    struct { const char *url, *file, *type; } files[] = {
        {"/", "index.html", "text/html; charset=utf-8"},
        {"/web/index.html", "index.html", "text/html; charset=utf-8"},
        {"/web/app.js", "app.js", "text/javascript; charset=utf-8"},
        {"/web/style.css", "style.css", "text/css; charset=utf-8"},
    };
    size_t total = 0;
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        char path[1200];
        snprintf(path, sizeof path, "%s/web/%s", g_src, files[i].file);
        char *want = cl_slurp(path);
        CHECK(want[0]);
        resp_t r = http(C.rest_port, "GET", files[i].url, NULL);
        CHECK_EQ(r.status, 200);
        CHECK_STR(header(&r, "Content-Type"), files[i].type);
        CHECK_STR(header(&r, "Cache-Control"), "no-cache");
        CHECK_STR(header(&r, "X-Content-Type-Options"), "nosniff");
        CHECK_EQ(r.len, strlen(want));
        CHECK(!memcmp(r.body, want, r.len));
        if (i) total += r.len;
        char etag[128], inm[200];
        snprintf(etag, sizeof etag, "%s", header(&r, "ETag"));
        CHECK(etag[0] == '"');
        snprintf(inm, sizeof inm, "If-None-Match: %s\r\n", etag);
        resp_t r2 = http(C.rest_port, "GET", files[i].url, inm);
        CHECK_EQ(r2.status, 304);
        CHECK_EQ(r2.len, 0);
        resp_t r3 = http(C.rest_port, "HEAD", files[i].url, NULL);
        CHECK_EQ(r3.status, 200);
        resp_free(&r), resp_free(&r2), resp_free(&r3);
        free(want);
    }
    fprintf(stderr, "  the page: %zu bytes (index.html + app.js + style.css, uncompressed)\n", total);
    CHECK(total < 64 * 1024);
    /* only the table's names: never a file the client names */
    const char *bad[] = {"/web/../CMakeLists.txt", "/web/%2e%2e/README.md", "/web/", "/web", "/web/app.js/",
                         "/web/APP.JS", "/web//app.js", "/web/app.js%00", "/index.html", "/app.js",
                         "/web/web_assets.h", "/../web/app.js", "/web/./app.js", "/web/%2fetc%2fpasswd", NULL};
    for (int i = 0; bad[i]; i++) {
        resp_t r = http(C.rest_port, "GET", bad[i], NULL);
        if (r.status != 404) fprintf(stderr, "  %s answered %d\n", bad[i], r.status);
        CHECK_EQ(r.status, 404);
        CHECK_CONTAINS(header(&r, "Content-Type"), "application/json");
        resp_free(&r);
    }
    resp_t p = http(C.rest_port, "POST", "/", NULL);
    CHECK(p.status != 200);
    resp_free(&p);
    /* REST keeps its paths */
    resp_t j = http(C.rest_port, "GET", "/v1/jobs/overview", NULL);
    CHECK_EQ(j.status, 200);
    CHECK_CONTAINS(header(&j, "Content-Type"), "application/json");
    resp_free(&j);
}

/* ---- the pages ----------------------------------------------------------------- */

#define DV(id) "(document.getElementById('" id "')||{dataset:{}}).dataset.value"

TEST(overview_page) {
    json_t *a = rest(C.rest_port, "/overview"), *ja = rest(C.rest_port, "/jobs/overview");
    CHECK(a && ja);
    char url[256], js[2048];
    snprintf(url, sizeof url, "%s#/overview", g_base);
    snprintf(js, sizeof js, "document.querySelector(\"tr.job-row[data-job-id='%s']\")", J);
    json_t *res = drive(json_pack(
        "[o, o, o, o]", s_goto(url), s_wait("loaded", js, 20),
        s_eval("ov", "({tm: " DV("ov-taskmanagers") ", slots: " DV("ov-slots-total") ", avail: " DV(
                         "ov-slots-available") ", running: " DV("ov-jobs-running") ", finished: " DV("ov-jobs-finished")
                     ", cancelled: " DV("ov-jobs-cancelled") ", failed: " DV("ov-jobs-failed")
                     ", rows: [...document.querySelectorAll('tr.job-row')].map(e => Object.assign({}, e.dataset))})"),
        s_shot("overview.png")));
    json_t *b = rest(C.rest_port, "/overview");
    CHECK(res && b);
    CHECK(ok(res, "loaded") && ok(res, "ov"));
    json_t *ov = val(res, "ov");
    struct { const char *ui, *rest; } f[] = {{"tm", "taskmanagers"},      {"slots", "slots-total"},
                                              {"avail", "slots-available"}, {"running", "jobs-running"},
                                              {"finished", "jobs-finished"}, {"cancelled", "jobs-cancelled"},
                                              {"failed", "jobs-failed"}};
    for (size_t i = 0; i < sizeof f / sizeof f[0]; i++) {
        long long u = ival(ov, f[i].ui), x = ival(a, f[i].rest), y = ival(b, f[i].rest);
        if (u != x && u != y) fprintf(stderr, "  overview %s: page %lld, REST %lld then %lld\n", f[i].ui, u, x, y);
        CHECK(u == x || u == y);
    }
    /* every job of /jobs/overview, with its name and state */
    json_t *rows = json_object_get(ov, "rows"), *jobs = json_object_get(ja, "jobs");
    CHECK_EQ(json_array_size(rows), json_array_size(jobs));
    size_t i, k;
    json_t *jv, *rv;
    json_array_foreach(jobs, i, jv) {
        bool found = false;
        json_array_foreach(rows, k, rv) {
            if (strcmp(sval(rv, "jobId"), sval(jv, "jid"))) continue;
            found = true;
            CHECK_STR(sval(rv, "name"), sval(jv, "name"));
            CHECK_STR(sval(rv, "state"), sval(jv, "state"));
        }
        CHECK(found);
    }
    CHECK(png_ok("overview.png"));
    json_decref(a), json_decref(b), json_decref(ja), json_decref(res);
}

/* Whether GET path answers (not 404): the metric paths of another part of the REST API. */
static bool answers(const char *fmt, const char *vid) {
    char path[512];
    snprintf(path, sizeof path, fmt, J, vid);
    return rest_status(C.rest_port, path) != 404;
}

TEST(job_page) {
    json_t *a = rest(C.rest_port, "/jobs/%s", J);
    CHECK(a);
    char url[256];
    snprintf(url, sizeof url, "%s#/job/%s", g_base, J);
    json_t *res = drive(json_pack(
        "[o, o, o, o]", s_goto(url), s_wait("loaded", "document.querySelector('#graph .vbox')", 20),
        s_eval("job", "({name: " DV("job-name") ", state: " DV("job-state") ", vcount: "
                      "+document.getElementById('graph').dataset.vertexCount, "
                      "vertices: [...document.querySelectorAll('.vbox')].map(e => Object.assign({}, e.dataset)), "
                      "edges: [...document.querySelectorAll('.edge')].map(e => Object.assign({}, e.dataset)), "
                      "savepoint: !!document.getElementById('btn-savepoint'), "
                      "cancel: !!document.getElementById('btn-cancel')})"),
        s_shot("job.png")));
    json_t *b = rest(C.rest_port, "/jobs/%s", J);
    CHECK(res && b);
    CHECK(ok(res, "loaded") && ok(res, "job"));
    json_t *ui = val(res, "job");
    CHECK_STR(sval(ui, "name"), sval(a, "name"));
    CHECK(!strcmp(sval(ui, "state"), sval(a, "state")) || !strcmp(sval(ui, "state"), sval(b, "state")));
    CHECK(json_is_true(json_object_get(ui, "savepoint")) && json_is_true(json_object_get(ui, "cancel")));
    json_t *vs = json_object_get(a, "vertices"), *uv = json_object_get(ui, "vertices");
    CHECK_EQ(ival(ui, "vcount"), json_array_size(vs));
    CHECK_EQ(json_array_size(uv), json_array_size(vs));
    size_t i, k;
    json_t *v, *u;
    json_array_foreach(vs, i, v) {
        bool found = false;
        json_array_foreach(uv, k, u) {
            if (strcmp(sval(u, "vertexId"), sval(v, "id"))) continue;
            found = true;
            CHECK_STR(sval(u, "name"), sval(v, "name"));
            CHECK_EQ(ival(u, "parallelism"), ival(v, "parallelism"));
            CHECK_STR(sval(u, "status"), sval(v, "status"));
            /* a figure whose path does not answer (yet) shows a dash */
            const char *dash = "\xe2\x80\x94";
            bool bp = answers("/jobs/%s/vertices/%s/backpressure", sval(v, "id"));
            bool wm = answers("/jobs/%s/vertices/%s/watermarks", sval(v, "id"));
            bool mx = answers("/jobs/%s/vertices/%s/metrics?get=numRecordsInPerSecond", sval(v, "id"));
            CHECK_EQ(!strcmp(sval(u, "busy"), dash), !bp);
            CHECK_EQ(!strcmp(sval(u, "backpressure"), dash), !bp);
            CHECK_EQ(!strcmp(sval(u, "idle"), dash), !bp);
            if (!wm) CHECK_STR(sval(u, "watermark"), dash);
            if (!mx) CHECK_STR(sval(u, "inRate"), dash);
            if (!mx) CHECK_STR(sval(u, "outRate"), dash);
        }
        CHECK(found);
    }
    /* the edges are the plan's, and the boxes come in topological order */
    json_t *nodes = json_object_get(json_object_get(a, "plan"), "nodes"), *n, *in;
    CHECK_EQ(json_array_size(nodes), json_array_size(vs));
    size_t nedges = 0;
    json_array_foreach(nodes, i, n) {
        json_array_foreach(json_object_get(n, "inputs"), k, in) {
            nedges++;
            bool found = false;
            size_t e;
            json_t *ue;
            json_array_foreach(json_object_get(ui, "edges"), e, ue)
                found |= !strcmp(sval(ue, "edgeFrom"), sval(in, "id")) && !strcmp(sval(ue, "edgeTo"), sval(n, "id"));
            CHECK(found);
            int from = -1, to = -1;
            json_array_foreach(uv, e, u) {
                if (!strcmp(sval(u, "vertexId"), sval(in, "id"))) from = (int)e;
                if (!strcmp(sval(u, "vertexId"), sval(n, "id"))) to = (int)e;
            }
            CHECK(from >= 0 && from < to);
        }
    }
    CHECK_EQ(json_array_size(json_object_get(ui, "edges")), nedges);
    /* the plan itself, from cluster_job.c's shape: source -> key_by (HASH)
     * -> window -> rebalance (REBALANCE) -> sink, three vertices */
    CHECK_EQ(json_array_size(nodes), 3);
    const char *ship[3] = {NULL, "HASH", "REBALANCE"};
    for (int x = 0; x < 3; x++) {
        json_t *ins = json_object_get(json_array_get(nodes, (size_t)x), "inputs");
        CHECK_EQ(json_array_size(ins), x == 0 ? 0 : 1);
        if (!x) continue;
        CHECK_STR(sval(json_array_get(ins, 0), "id"), sval(json_array_get(nodes, (size_t)x - 1), "id"));
        CHECK_STR(sval(json_array_get(ins, 0), "ship_strategy"), ship[x]);
    }
    CHECK(png_ok("job.png"));
    json_decref(a), json_decref(b), json_decref(res);
}

TEST(checkpoints_page_and_refresh) {
    json_t *a = rest(C.rest_port, "/jobs/%s/checkpoints", J);
    CHECK(a);
    char url[256];
    snprintf(url, sizeof url, "%s#/job/%s/checkpoints", g_base, J);
#define CKS "({total: +" DV("ck-total") ", completed: +" DV("ck-completed") ", failed: +" DV("ck-failed") \
            ", restored: +" DV("ck-restored") ", rows: [...document.querySelectorAll('tr.ck-row')].map(e => "  \
            "Object.assign({}, e.dataset))})"
    json_t *res = drive(json_pack(
        "[o, o, o, o, o, o, o]", s_goto(url), s_wait("loaded", "document.getElementById('ck-completed')", 20),
        s_eval("v1", CKS), s_eval("mark", "window.__v1 = +" DV("ck-completed")),
        s_wait("refreshed", "+" DV("ck-completed") " > window.__v1", 8), s_eval("v2", CKS),
        s_shot("checkpoints.png")));
    json_t *b = rest(C.rest_port, "/jobs/%s/checkpoints", J);
    CHECK(res && b);
    CHECK(ok(res, "loaded") && ok(res, "v1") && ok(res, "v2"));
    CHECK(ok(res, "refreshed")); /* the page updated itself */
    json_t *v1 = val(res, "v1"), *v2 = val(res, "v2");
    json_t *ca = json_object_get(a, "counts"), *cb = json_object_get(b, "counts");
    const char *keys[] = {"total", "completed", "failed", "restored"};
    for (int i = 0; i < 4; i++) {
        long long x = ival(ca, keys[i]), p = ival(v1, keys[i]), q = ival(v2, keys[i]), y = ival(cb, keys[i]);
        if (!(x <= p && p <= q && q <= y))
            fprintf(stderr, "  %s: REST %lld, page %lld then %lld, REST %lld\n", keys[i], x, p, q, y);
        CHECK(x <= p && p <= q && q <= y);
    }
    CHECK(ival(v2, "completed") > ival(v1, "completed"));
    /* the rows of completed checkpoints are what the REST history says */
    size_t i, k;
    json_t *row, *h;
    int compared = 0;
    json_array_foreach(json_object_get(v2, "rows"), i, row) {
        if (strcmp(sval(row, "status"), "COMPLETED")) continue;
        json_array_foreach(json_object_get(b, "history"), k, h) {
            if (ival(h, "id") != ival(row, "ckId")) continue;
            CHECK_STR(sval(h, "status"), "COMPLETED");
            CHECK_EQ(ival(row, "duration"), ival(h, "end_to_end_duration"));
            CHECK_EQ(ival(row, "size"), ival(h, "checkpointed_size"));
            compared++;
        }
    }
    CHECK(compared > 0);
    CHECK(png_ok("checkpoints.png"));
    json_decref(a), json_decref(b), json_decref(res);
}

TEST(checkpoint_detail_page) {
    json_t *c = rest(C.rest_port, "/jobs/%s/checkpoints", J), *job = rest(C.rest_port, "/jobs/%s", J);
    CHECK(c && job);
    long long K = ival(json_object_get(json_object_get(c, "latest"), "completed"), "id");
    CHECK(K > 0);
    /* the reference: every vertex's subtasks of checkpoint K (a completed
     * checkpoint's figures do not change) */
    json_t *want = json_array();
    size_t i, k;
    json_t *v, *s;
    json_array_foreach(json_object_get(job, "vertices"), i, v) {
        json_t *st = rest(C.rest_port, "/jobs/%s/checkpoints/details/%lld/subtasks/%s", J, K, sval(v, "id"));
        CHECK(st);
        json_array_foreach(json_object_get(st, "subtasks"), k, s) {
            json_object_set_new(s, "vertex", json_string(sval(v, "id")));
            json_array_append(want, s);
        }
        json_decref(st);
    }
    CHECK(json_array_size(want) > 0);
    char url[256], js[512];
    snprintf(url, sizeof url, "%s#/job/%s/checkpoints/%lld", g_base, J, K);
    snprintf(js, sizeof js, "document.querySelectorAll('tr.ck-sub').length == %zu", json_array_size(want));
    json_t *res = drive(json_pack(
        "[o, o, o, o]", s_goto(url), s_wait("loaded", js, 20),
        s_eval("subs", "[...document.querySelectorAll('tr.ck-sub')].map(e => Object.assign({}, e.dataset))"),
        s_eval("id", "document.getElementById('ck-detail').dataset.ckId")));
    CHECK(res && ok(res, "loaded") && ok(res, "subs"));
    CHECK_EQ(ival(json_object_get(res, "id"), "value"), K);
    json_t *subs = val(res, "subs"), *u;
    CHECK_EQ(json_array_size(subs), json_array_size(want));
    json_array_foreach(want, i, s) {
        bool found = false;
        json_array_foreach(subs, k, u) {
            if (strcmp(sval(u, "vertexId"), sval(s, "vertex")) || ival(u, "subtask") != ival(s, "index")) continue;
            found = true;
            CHECK_STR(sval(u, "status"), sval(s, "status"));
            json_t *ck = json_object_get(s, "checkpoint"), *al = json_object_get(s, "alignment");
            CHECK(ck && al);
            CHECK_EQ(ival(u, "sync"), ival(ck, "sync"));
            CHECK_EQ(ival(u, "async"), ival(ck, "async"));
            CHECK_EQ(ival(u, "align"), ival(al, "duration"));
            CHECK_EQ(ival(u, "stateSize"), ival(s, "state_size"));
            CHECK_EQ(ival(u, "checkpointedSize"), ival(s, "checkpointed_size"));
            CHECK_EQ(ival(u, "e2e"), ival(s, "end_to_end_duration"));
            CHECK_EQ(ival(u, "startDelay"), ival(s, "start_delay"));
        }
        CHECK(found);
    }
    json_decref(want), json_decref(c), json_decref(job), json_decref(res);
}

TEST(taskmanagers_page) {
    json_t *a = rest(C.rest_port, "/taskmanagers");
    CHECK(a);
    char url[256];
    snprintf(url, sizeof url, "%s#/taskmanagers", g_base);
    json_t *res = drive(json_pack(
        "[o, o, o]", s_goto(url), s_wait("loaded", "document.querySelector('tr.tm-row')", 20),
        s_eval("tm", "({count: +" DV("tm-count") ", slots: +" DV("tm-slots") ", rows: [...document.querySelectorAll("
                     "'tr.tm-row')].map(e => Object.assign({}, e.dataset))})")));
    CHECK(res && ok(res, "tm"));
    json_t *ui = val(res, "tm"), *tms = json_object_get(a, "taskmanagers"), *t, *r;
    CHECK_EQ(ival(ui, "count"), json_array_size(tms));
    CHECK_EQ(json_array_size(json_object_get(ui, "rows")), json_array_size(tms));
    long long slots = 0;
    size_t i, k;
    json_array_foreach(tms, i, t) {
        slots += ival(t, "slotsNumber");
        bool found = false;
        json_array_foreach(json_object_get(ui, "rows"), k, r) {
            if (strcmp(sval(r, "tmId"), sval(t, "id"))) continue;
            found = true;
            CHECK_EQ(ival(r, "slots"), ival(t, "slotsNumber"));
        }
        CHECK(found);
    }
    CHECK_EQ(ival(ui, "slots"), slots);
    json_decref(a), json_decref(res);
}

/* Clicks Trigger savepoint with dir in the box: the result element's data. */
static json_t *click_savepoint(const char *dir) {
    char url[256], js[1400];
    snprintf(url, sizeof url, "%s#/job/%s", g_base, J);
    snprintf(js, sizeof js,
             "document.getElementById('btn-savepoint').click(); document.getElementById('sp-dir').value = '%s'; "
             "document.getElementById('sp-go').click(); true", dir);
    json_t *res = drive(json_pack(
        "[o, o, o, o, o]", s_goto(url), s_wait("loaded", "document.getElementById('btn-savepoint')", 20),
        s_eval("click", js),
        s_wait("done", "['COMPLETED', 'FAILED'].includes(document.getElementById('sp-result').dataset.status)", 60),
        s_eval("sp", "Object.assign({text: document.getElementById('sp-result').textContent}, "
                     "document.getElementById('sp-result').dataset)")));
    if (!res || !ok(res, "click") || !ok(res, "done")) {
        json_decref(res);
        return NULL;
    }
    json_t *sp = json_incref(val(res, "sp"));
    json_decref(res);
    return sp;
}

TEST(savepoint_button) {
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/savepoints-ui", C.dir);
    json_t *sp = click_savepoint(dir);
    CHECK(sp);
    CHECK_STR(sval(sp, "status"), "COMPLETED");
    const char *loc = sval(sp, "location");
    CHECK(!strncmp(loc, dir, strlen(dir)));
    CHECK_CONTAINS(sval(sp, "text"), loc);
    char meta[1400];
    snprintf(meta, sizeof meta, "%s/_metadata", loc);
    struct stat st;
    CHECK(stat(meta, &st) == 0 && st.st_size > 0);
    /* the REST API knows it as the latest savepoint */
    json_t *c = rest(C.rest_port, "/jobs/%s/checkpoints", J);
    CHECK(c);
    CHECK_STR(sval(json_object_get(json_object_get(c, "latest"), "savepoint"), "external_path"), loc);
    json_decref(c);
    json_decref(sp);
    /* a directory the server refuses: the failure is shown */
    json_t *bad = click_savepoint("relative/dir");
    CHECK(bad);
    CHECK_STR(sval(bad, "status"), "FAILED");
    CHECK_CONTAINS(sval(bad, "text"), "Failed");
    json_decref(bad);
}

/* The highest "deploying job '...' attempt N" in a TaskManager's log, or -1. */
static int last_attempt(const char *log) {
    char *s = cl_slurp(log);
    int best = -1;
    for (const char *p = s; (p = strstr(p, "deploying job")); p++) {
        const char *a = strstr(p, "' attempt ");
        int n;
        if (a && sscanf(a + 10, "%d", &n) == 1 && n > best) best = n;
    }
    free(s);
    return best;
}

TEST(exceptions_page) {
    /* a failure: one TaskManager dies, the job restarts on the other's slots */
    json_t *e0 = rest(C.rest_port, "/jobs/%s/exceptions", J);
    CHECK(e0);
    size_t before = json_array_size(json_object_get(json_object_get(e0, "exceptionHistory"), "entries"));
    json_decref(e0);
    int victim = last_attempt(C.tm[0].log) >= last_attempt(C.tm[1].log) ? 0 : 1; /* runs the current attempt */
    cl_stop(&C.tm[victim]);
    int64_t end = cl_now_ms() + 60000;
    json_t *e = NULL;
    char state[32] = "";
    for (;;) {
        json_decref(e);
        e = rest(C.rest_port, "/jobs/%s/exceptions", J);
        cl_job_state(&C, J, state, sizeof state);
        if (e && json_array_size(json_object_get(json_object_get(e, "exceptionHistory"), "entries")) > before &&
            !strcmp(state, "RUNNING"))
            break;
        if (cl_now_ms() > end) break;
        cl_sleep_ms(200);
    }
    CHECK_STR(state, "RUNNING");
    json_t *entries = json_object_get(json_object_get(e, "exceptionHistory"), "entries");
    CHECK(json_array_size(entries) > before);
    char url[256];
    snprintf(url, sizeof url, "%s#/job/%s/exceptions", g_base, J);
    json_t *res = drive(json_pack(
        "[o, o, o]", s_goto(url), s_wait("loaded", "document.getElementById('ex-count')", 20),
        s_eval("ex", "({count: +" DV("ex-count") ", names: [...document.querySelectorAll('tr.ex-row')].map(e => "
                     "e.dataset.name)})")));
    json_t *e2 = rest(C.rest_port, "/jobs/%s/exceptions", J);
    CHECK(res && e2 && ok(res, "ex"));
    json_t *ui = val(res, "ex");
    size_t n2 = json_array_size(json_object_get(json_object_get(e2, "exceptionHistory"), "entries"));
    CHECK(ival(ui, "count") == (long long)json_array_size(entries) || ival(ui, "count") == (long long)n2);
    size_t i;
    json_t *x;
    json_array_foreach(entries, i, x)
        CHECK_STR(json_string_value(json_array_get(json_object_get(ui, "names"), i)), sval(x, "exceptionName"));
    json_decref(e), json_decref(e2), json_decref(res);
}

TEST(cancel_button) {
    char url[256];
    snprintf(url, sizeof url, "%s#/job/%s", g_base, J);
    json_t *res = drive(json_pack(
        "[o, o, o, o, o]", s_goto(url), s_wait("loaded", "document.getElementById('btn-cancel')", 20),
        s_eval("arm", "document.getElementById('btn-cancel').click(); true"),
        s_wait("armed", "document.getElementById('btn-cancel').dataset.armed == '1'", 5),
        s_eval("fire", "document.getElementById('btn-cancel').click(); true")));
    CHECK(res && ok(res, "armed") && ok(res, "fire"));
    json_decref(res);
    char state[32];
    CHECK(cl_wait_state(&C, J, "CANCELED", 30000, state, sizeof state) || !strcmp(state, "CANCELED"));
    /* and the page shows it (a new page: the refresh is tested above) */
    res = drive(json_pack("[o, o, o]", s_goto(url), s_wait("shown", DV("job-state") " == 'CANCELED'", 20),
                          s_eval("buttons", "!!document.getElementById('btn-cancel')")));
    CHECK(res && ok(res, "shown"));
    CHECK(json_is_false(val(res, "buttons")));
    json_decref(res);
}

TEST(token_login) {
    cluster_t T;
    cl_cluster_init(&T, "web-ui-token");
    setenv("SLUICE_REST_TOKEN", "tok-3141", 1);
    cl_start_jm(&T);
    unsetenv("SLUICE_REST_TOKEN");
    int64_t end = cl_now_ms() + 20000;
    while (rest_status(T.rest_port, "/") != 200 && cl_now_ms() < end) cl_sleep_ms(50);
    CHECK_EQ(rest_status(T.rest_port, "/"), 200);            /* the page needs no token */
    CHECK_EQ(rest_status(T.rest_port, "/web/app.js"), 200);
    CHECK_EQ(rest_status(T.rest_port, "/overview"), 401);    /* REST does */
    resp_t r = http(T.rest_port, "GET", "/overview", "Authorization: Bearer tok-3141\r\n");
    CHECK_EQ(r.status, 200);
    json_t *ov = json_loads(r.body, 0, NULL);
    resp_free(&r);
    CHECK(ov);
    char url[128];
    snprintf(url, sizeof url, "http://127.0.0.1:%d/#/overview", T.rest_port);
#define LOGIN_SHOWN "!document.getElementById('login').hidden && document.getElementById('main').hidden"
#define SUBMIT(tok) "document.getElementById('login-token').value = '" tok "'; " \
                    "document.getElementById('login-form').requestSubmit(); true"
    json_t *res = drive(json_pack(
        "[o, o, o, o, o, o, o, o, o, o, o]", s_goto(url), s_wait("login", LOGIN_SHOWN, 20),
        s_eval("nodata", "!document.getElementById('ov-taskmanagers')"),
        s_eval("bad", SUBMIT("wrong-token")),
        s_wait("refused", LOGIN_SHOWN " && document.getElementById('login-error').textContent.includes('refused')", 10),
        s_eval("good", SUBMIT("tok-3141")), s_wait("in", "document.getElementById('ov-taskmanagers')", 10),
        s_eval("tm", "+" DV("ov-taskmanagers")),
        /* a token kept from before that is no longer right: the login box again */
        s_eval("stale", "sessionStorage.setItem('sluice-token', 'old'); location.reload(); true"),
        s_wait("again", LOGIN_SHOWN " && document.getElementById('login-error').textContent.includes('refused')", 20),
        s_eval("stored", "sessionStorage.getItem('sluice-token')")));
    CHECK(res);
    CHECK(ok(res, "login") && ok(res, "refused") && ok(res, "in") && ok(res, "again"));
    CHECK(json_is_true(val(res, "nodata")));
    CHECK_EQ(json_integer_value(val(res, "tm")), ival(ov, "taskmanagers"));
    CHECK_STR(json_string_value(val(res, "stored")), "old");
    json_decref(res), json_decref(ov);
    cl_cluster_stop(&T);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    snprintf(g_src, sizeof g_src, "%s", __FILE__);
    char *slash = strrchr(g_src, '/');
    if (slash) *slash = 0;                       /* .../tests */
    snprintf(g_driver, sizeof g_driver, "%s/tools/web_ui_driver.py", g_src);
    slash = strrchr(g_src, '/');
    if (slash) *slash = 0;                       /* the source tree */
    if (!find_chromium()) {
        fprintf(stderr, "FAIL: headless Chromium is not installed (apt-get install -y chromium, or set "
                        "SLUICE_CHROMIUM=/path/to/chromium): the web UI cannot be tested\n");
        return 1;
    }
    cl_cluster_init(&C, "web-ui");
    C.hb_timeout = "6 s"; /* a loaded machine must not lose a TaskManager by itself */
    const char *shots = getenv("SLUICE_WEB_SCREENSHOTS");
    snprintf(g_shots, sizeof g_shots, "%s", shots && *shots ? shots : C.dir);
    cl_start_jm(&C);
    cl_start_tm(&C, 1, 2, NULL, NULL);
    cl_start_tm(&C, 2, 2, NULL, NULL);
    if (!cl_wait_tms(&C, 2, 20000)) {
        cl_dump_logs(&C);
        return 1;
    }
    char args[3000];
    snprintf(args, sizeof args, "'%s/out' '%s/ckpt' 1000000000 --rate=2000", C.dir, C.dir);
    cl_submit_job(&C, SLUICE_CLUSTER_JOB, "", args, J, sizeof J);
    char state[32];
    if (!J[0] || !cl_wait_state(&C, J, "RUNNING", 30000, state, sizeof state) || !cl_wait_deployed(&C, 1, 30000)) {
        fprintf(stderr, "the job did not start (%s)\n", J);
        cl_dump_logs(&C);
        return 1;
    }
    /* a few completed checkpoints first */
    int64_t end = cl_now_ms() + 30000;
    for (;;) {
        json_t *c = rest(C.rest_port, "/jobs/%s/checkpoints", J);
        long long n = ival(json_object_get(c, "counts"), "completed");
        json_decref(c);
        if (n >= 3 || cl_now_ms() > end) break;
        cl_sleep_ms(100);
    }
    snprintf(g_base, sizeof g_base, "http://127.0.0.1:%d/", C.rest_port);
    fprintf(stderr, "  chromium: %s; screenshots in %s\n", g_chromium, g_shots);
    RUN(serves_embedded_files);
    RUN(overview_page);
    RUN(job_page);
    RUN(checkpoints_page_and_refresh);
    RUN(checkpoint_detail_page);
    RUN(taskmanagers_page);
    RUN(savepoint_button);
    RUN(exceptions_page);
    RUN(cancel_button);
    RUN(token_login);
    if (sl_test_failures) cl_dump_logs(&C);
    cl_cluster_stop(&C);
    TEST_MAIN_END();
}
