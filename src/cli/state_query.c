/*
 * state_query.c — `sluice state query JOBID --uid UID --key K [--state NAME]
 * [--namespace NS] [--timeout MS] [-m host:port]` (state_query.h): asks
 * the JobManager's REST API for one key's keyed state in a running job
 * (GET /jobs/:jobid/state, jobmanager/state_query.h) with libcurl, and
 * prints each entry of the answer as one JSON line:
 *
 *   {"state":"count","kind":"value","key_group":17,"key":"card-7","namespace":"","value":{"hex":"0500000000000000"}}
 *
 * Without -m the JobManager is 127.0.0.1:8081; SLUICE_REST_TOKEN, when
 * set, is sent as "Authorization: Bearer <token>" (as client.c does).
 * An error answer's message goes to stderr after "sluice state query: ".
 */
#include "cli/state_query.h"

#include <curl/curl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/common.h"

#define PROG "sluice state query"
#define USAGE "usage: sluice state query JOBID --uid UID --key K [--state NAME] [--namespace NS] [--timeout MS] " \
              "[-m host:port]"

static void usage(FILE *f) {
    fprintf(f,
            USAGE "\n"
            "\n"
            "Prints the keyed state that key K has now in the operator with uid UID of\n"
            "the running job JOBID, one JSON object per state, as `sluice state read`\n"
            "prints an entry.\n"
            "\n"
            "  --uid UID        the operator (sl_uid)\n"
            "  --key K          the key, as the operator's key type reads it: a VARCHAR\n"
            "                   as is, INT/BIGINT/TIMESTAMP as an integer, DOUBLE as a\n"
            "                   number, BOOLEAN as true/false; a key of several fields as\n"
            "                   a JSON array, e.g. '[\"card-7\",3]'\n"
            "  --state NAME     only this state (default: every state of the operator)\n"
            "  --namespace NS   the namespace's bytes (default: every namespace of the key)\n"
            "  --timeout MS     how long the subtask may take to answer (default 5000)\n"
            "  -m host:port     the JobManager's REST address (default 127.0.0.1:8081)\n"
            "exit codes: 0 ok, 1 bad arguments, 2 no answer (JobManager unreachable, job\n"
            "not running, timeout), 3 no such job, operator or state, or no value for the\n"
            "key, 4 the key does not parse as the operator's key type\n");
}

static int bad_usage(const char *fmt, const char *arg) {
    fprintf(stderr, PROG ": ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n" USAGE "\n");
    return SL_STATE_QUERY_USAGE;
}

static size_t on_body(char *p, size_t sz, size_t n, void *ud) {
    sl_buf_t *b = ud;
    if (b->len + sz * n > (64u << 20)) return 0;
    sl_buf_append(b, p, sz * n);
    return sz * n;
}

/* Appends "&name=<value escaped>" (or "?name=" first). */
static void add_arg(CURL *c, sl_buf_t *url, const char *name, const char *value) {
    if (!value) return;
    char *esc = curl_easy_escape(c, value, (int)strlen(value));
    bool first = !memchr(url->p, '?', url->len);
    sl_buf_append(url, first ? "?" : "&", 1);
    sl_buf_append(url, name, strlen(name));
    sl_buf_append(url, "=", 1);
    sl_buf_append(url, esc, strlen(esc));
    curl_free(esc);
}

static int query(const char *jm, const char *job, const char *uid, const char *state, const char *key,
                 const char *ns, const char *timeout) {
    CURL *c = curl_easy_init();
    if (!c) {
        fprintf(stderr, PROG ": cannot initialize libcurl\n");
        return SL_STATE_QUERY_FAILED;
    }
    sl_buf_t url = {0}, body = {0};
    const char *scheme = strncmp(jm, "http://", 7) && strncmp(jm, "https://", 8) ? "http://" : "";
    sl_buf_append(&url, scheme, strlen(scheme));
    sl_buf_append(&url, jm, strlen(jm));
    char *ej = curl_easy_escape(c, job, (int)strlen(job));
    sl_buf_append(&url, "/jobs/", 6);
    sl_buf_append(&url, ej, strlen(ej));
    sl_buf_append(&url, "/state", 6);
    curl_free(ej);
    add_arg(c, &url, "uid", uid);
    add_arg(c, &url, "key", key);
    add_arg(c, &url, "state", state);
    add_arg(c, &url, "namespace", ns);
    add_arg(c, &url, "timeout", timeout);
    sl_buf_append(&url, "", 1);
    struct curl_slist *h = NULL;
    const char *token = getenv("SLUICE_REST_TOKEN");
    char auth[1024];
    if (token && token[0]) {
        snprintf(auth, sizeof auth, "Authorization: Bearer %s", token);
        h = curl_slist_append(h, auth);
    }
    char cerr[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(c, CURLOPT_URL, (const char *)url.p);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, &body);
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, cerr);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT, 10L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    if (h) curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    long status = 0;
    CURLcode rc = curl_easy_perform(c);
    if (rc == CURLE_OK) curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    curl_easy_cleanup(c);
    int code = SL_STATE_QUERY_FAILED;
    json_t *j = rc == CURLE_OK && body.len ? json_loadb((const char *)body.p, body.len, 0, NULL) : NULL;
    if (rc != CURLE_OK) {
        fprintf(stderr, PROG ": cannot reach the JobManager at %s: %s\n", jm, cerr[0] ? cerr : curl_easy_strerror(rc));
    } else if (status == 200 && j && json_is_array(json_object_get(j, "entries"))) {
        json_t *e = json_object_get(j, "entries");
        for (size_t i = 0; i < json_array_size(e); i++) {
            char *s = json_dumps(json_array_get(e, i), JSON_COMPACT | JSON_PRESERVE_ORDER);
            if (s) puts(s);
            free(s);
        }
        code = SL_STATE_QUERY_OK;
    } else {
        json_t *errs = j ? json_object_get(j, "errors") : NULL;
        fprintf(stderr, PROG ": ");
        for (size_t i = 0; errs && i < json_array_size(errs); i++)
            fprintf(stderr, "%s%s", i ? "; " : "", json_string_value(json_array_get(errs, i)));
        if (!errs || !json_array_size(errs)) fprintf(stderr, "HTTP %ld", status);
        fprintf(stderr, "\n");
        code = status == 404 ? SL_STATE_QUERY_NOT_FOUND : status == 400 ? SL_STATE_QUERY_BAD_KEY
                                                                        : SL_STATE_QUERY_FAILED;
    }
    json_decref(j);
    sl_buf_free(&url);
    sl_buf_free(&body);
    if (fflush(stdout) != 0 && code == SL_STATE_QUERY_OK) code = SL_STATE_QUERY_FAILED;
    return code;
}

int sl_state_query_cli(int argc, char **argv) {
    const char *job = NULL, *uid = NULL, *state = NULL, *key = NULL, *ns = NULL, *timeout = NULL;
    const char *jm = "127.0.0.1:8081";
    char opt[64];
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool inline_v = false;
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        if (eq && (size_t)(eq - a) < sizeof opt) { /* --opt=value */
            snprintf(opt, sizeof opt, "%.*s", (int)(eq - a), a);
            a = opt;
            v = eq + 1;
            inline_v = true;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return SL_STATE_QUERY_OK;
        }
        const char **dst = !strcmp(a, "--uid")                            ? &uid
                           : !strcmp(a, "--state")                        ? &state
                           : !strcmp(a, "--key")                          ? &key
                           : !strcmp(a, "--namespace")                    ? &ns
                           : !strcmp(a, "--timeout")                      ? &timeout
                           : !strcmp(a, "-m") || !strcmp(a, "--jobmanager") ? &jm
                                                                          : NULL;
        if (dst) {
            if (!v) return bad_usage("%s needs a value", a);
            if (!*v && dst != &key && dst != &ns) return bad_usage("%s needs a non-empty value", a);
            *dst = v;
            i += !inline_v;
        } else if (a[0] == '-' && a[1]) {
            return bad_usage("unknown option '%s'", argv[i]);
        } else if (job) {
            return bad_usage("one JOBID only (got a second: '%s')", a);
        } else {
            job = a;
        }
    }
    if (!job) return bad_usage("%s", "no JOBID given (sluice list shows the running jobs)");
    if (!uid) return bad_usage("%s", "--uid UID is required (the operator whose state to query)");
    if (!key) return bad_usage("%s", "--key K is required");
    curl_global_init(CURL_GLOBAL_DEFAULT);
    int rc = query(jm, job, uid, state, key, ns, timeout);
    curl_global_cleanup();
    return rc;
}
