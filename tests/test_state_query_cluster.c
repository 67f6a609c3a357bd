/*
 * test_state_query_cluster.c — looking up a running job's keyed state by
 * key on a real cluster: a `sluice jobmanager` and two `sluice
 * taskmanager`s of one slot each (so the two subtasks of every keyed
 * operator run in different processes), the job of
 * tools/sq_counter_job.h submitted with `sluice run` at parallelism 2,
 * queried through REST (GET /jobs/:jobid/state) and through `sluice state
 * query`, on the heap backend and on RocksDB.
 *
 * The job's records are known, so what every key holds is computed here
 * (state_query_ref.h) and each answer is compared with it: every card's
 * count (both subtasks, both TaskManagers, so both routes of a query),
 * random cards with all their states or one, composite keys as JSON
 * arrays, BIGINT keys.  Then the errors, by status and message: a key
 * with no value and an unknown uid or state (404), keys that do not parse
 * (400), an unknown job (404), a missing parameter (400); and after the
 * job is cancelled, 409.
 */
#include <jansson.h>

#include "cluster_util.h"
#include "state_query_ref.h"

/* GET path: the status, and the body parsed (*j, may be NULL). */
static long get(cluster_t *c, const char *path, json_t **j, char **text) {
    *j = NULL;
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)c->rest_port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        close(fd);
        return -1;
    }
    char req[4096];
    int n = snprintf(req, sizeof req, "GET %s HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n", path);
    if (write(fd, req, (size_t)n) != n) {
        close(fd);
        return -1;
    }
    sl_buf_t b = {0};
    char chunk[4096];
    ssize_t r;
    while ((r = read(fd, chunk, sizeof chunk)) > 0) sl_buf_append(&b, chunk, (size_t)r);
    close(fd);
    sl_buf_append(&b, "", 1);
    long status = -1;
    sscanf((const char *)b.p, "HTTP/1.%*d %ld", &status);
    char *body = strstr((char *)b.p, "\r\n\r\n");
    if (body) *j = json_loads(body + 4, 0, NULL);
    if (text) *text = strdup(body ? body + 4 : "");
    sl_buf_free(&b);
    return status;
}

/* Percent-encodes s (everything but unreserved characters) into out. */
static void pct(const char *s, char *out, size_t cap) {
    size_t o = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p && o + 4 < cap; p++) {
        if ((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || strchr("-_.~", *p))
            out[o++] = (char)*p;
        else
            o += (size_t)snprintf(out + o, cap - o, "%%%02X", *p);
    }
    out[o] = 0;
}

/* GET /jobs/<id>/state?uid=..&key=..[&state=..] */
static long sq(cluster_t *c, const char *id, const char *uid, const char *state, const char *key, json_t **j,
               char **text) {
    char k[600], path[1400];
    pct(key, k, sizeof k);
    snprintf(path, sizeof path, "/jobs/%s/state?uid=%s&key=%s%s%s", id, uid, k, state ? "&state=" : "",
             state ? state : "");
    return get(c, path, j, text);
}

static const char *err0(json_t *j) {
    json_t *e = j ? json_array_get(json_object_get(j, "errors"), 0) : NULL;
    return e ? json_string_value(e) : "(no error)";
}

static bool same_entries(long status, json_t *j, char *text, json_t *want) {
    json_t *got = j ? json_object_get(j, "entries") : NULL;
    bool ok = status == 200 && got && json_equal(got, want);
    if (!ok) {
        char *w = json_dumps(want, JSON_COMPACT);
        fprintf(stderr, "  status %ld\n  got:  %s\n  want: %s\n", status, text, w);
        free(w);
    }
    json_decref(want);
    json_decref(j);
    free(text);
    return ok;
}

/* Every card's count answers its reference (all records are in). */
static bool settled(cluster_t *c, const char *id) {
    for (int tries = 0; tries < 300; tries++) {
        int ok = 0;
        for (int i = 0; i < g_ncards; i++) {
            json_t *j;
            long st = sq(c, id, "counter", "count", g_cards[i].card, &j, NULL);
            json_t *v = j ? json_object_get(json_array_get(json_object_get(j, "entries"), 0), "value") : NULL;
            json_t *want = i64_json(g_cards[i].count);
            ok += st == 200 && v && json_equal(v, want);
            json_decref(want);
            json_decref(j);
        }
        if (ok == g_ncards) return true;
        cl_sleep_ms(100);
    }
    return false;
}

/* `sluice state query ...`: exit code, stdout into out. */
static int cli(cluster_t *c, const char *args, char *out, size_t cap) {
    char cmd[2000];
    snprintf(cmd, sizeof cmd, "%s state query -m 127.0.0.1:%d %s 2>&1", SLUICE_BIN, c->rest_port, args);
    FILE *f = popen(cmd, "r");
    size_t n = f ? fread(out, 1, cap - 1, f) : 0;
    out[n] = 0;
    int st = f ? pclose(f) : -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void run_backend(cluster_t *c, const char *backend) {
    build_reference();
    char args[300], id[64], st[32];
    snprintf(args, sizeof args, "--state-query %d %d 2 %s", N, NCARDS, backend);
    cl_submit_job(c, SLUICE_CLUSTER_JOB, "", args, id, sizeof id);
    CHECK(id[0]);
    bool running = cl_wait_state(c, id, "RUNNING", 30000, st, sizeof st) && cl_wait_deployed(c, 2, 30000);
    if (!running) cl_dump_logs(c);
    CHECK(running);
    bool ok = settled(c, id);
    if (!ok) cl_dump_logs(c);
    CHECK(ok);

    for (int it = 0; it < 40; it++) {
        const ref_card_t *r = &g_cards[rnd() % (uint64_t)g_ncards];
        json_t *j;
        char *text;
        switch (rnd() % 4) {
        case 0: {
            long s = sq(c, id, "counter", NULL, r->card, &j, &text);
            CHECK(same_entries(s, j, text, card_all(r)));
            break;
        }
        case 1: {
            const char *stn = r->nlast && rnd() % 2 ? "last" : "parity";
            long s = sq(c, id, "counter", stn, r->card, &j, &text);
            json_t *want = json_array();
            json_array_append_new(want, card_entry(r, stn));
            CHECK(same_entries(s, j, text, want));
            break;
        }
        case 2: {
            int32_t grp = (int32_t)(rnd() % 3);
            json_t *arr = json_pack("[si]", r->card, grp);
            char *key = json_dumps(arr, JSON_COMPACT);
            json_decref(arr);
            long s = sq(c, id, "pair", NULL, key, &j, &text);
            free(key);
            if (!r->pair[grp]) {
                CHECK_EQ(s, 404);
                json_decref(j);
                free(text);
                break;
            }
            uint8_t kb[200];
            size_t kn = pair_key(r->card, grp, kb);
            json_t *want = json_array();
            json_array_append_new(want, entry("count", "value", kb, kn, hex_of(kb, kn), i64_json(r->pair[grp])));
            CHECK(same_entries(s, j, text, want));
            break;
        }
        default: {
            int64_t amount = (int64_t)(rnd() % 1000);
            char key[32];
            snprintf(key, sizeof key, "%lld", (long long)amount);
            long s = sq(c, id, "by_amount", "count", key, &j, &text);
            if (!g_amount_count[amount]) {
                CHECK_EQ(s, 404);
                json_decref(j);
                free(text);
                break;
            }
            uint8_t kb[8];
            for (int b = 0; b < 8; b++) kb[b] = (uint8_t)((uint64_t)amount >> (8 * b));
            json_t *want = json_array();
            json_array_append_new(want, entry("count", "value", kb, 8, hex_of(kb, 8), i64_json(g_amount_count[amount])));
            CHECK(same_entries(s, j, text, want));
            break;
        }
        }
    }

    /* the errors, by status and by name */
    json_t *j;
    CHECK_EQ(sq(c, id, "counter", NULL, "card-nope", &j, NULL), 404);
    CHECK_CONTAINS(err0(j), "operator 'counter' has no value for key 'card-nope'");
    json_decref(j);
    CHECK_EQ(sq(c, id, "by_amount", NULL, "seven", &j, NULL), 400);
    CHECK_CONTAINS(err0(j), "field 'amount' (BIGINT): 'seven' is not a decimal integer");
    json_decref(j);
    CHECK_EQ(sq(c, id, "nosuch", NULL, "card-1", &j, NULL), 404);
    CHECK_CONTAINS(err0(j), "has no operator with uid 'nosuch'");
    json_decref(j);
    CHECK_EQ(sq(c, id, "counter", "nosuch", g_cards[0].card, &j, NULL), 404);
    CHECK_CONTAINS(err0(j), "has no keyed state 'nosuch'; its states: 'count', 'last', 'parity', 'sum'");
    json_decref(j);
    CHECK_EQ(sq(c, "0123456789abcdef0123456789abcdef", "counter", NULL, "card-1", &j, NULL), 404);
    CHECK_CONTAINS(err0(j), "not found");
    json_decref(j);
    char path[300];
    snprintf(path, sizeof path, "/jobs/%s/state?key=card-1", id);
    CHECK_EQ(get(c, path, &j, NULL), 400);
    CHECK_CONTAINS(err0(j), "the query parameter 'uid'");
    json_decref(j);

    /* the CLI: the same lines, and the exit codes */
    char a[1200], out[16384];
    const ref_card_t *r = &g_cards[1];
    snprintf(a, sizeof a, "%s --uid counter --state sum --key '%s'", id, r->card);
    CHECK_EQ(cli(c, a, out, sizeof out), 0);
    json_t *line = json_loads(out, JSON_DISABLE_EOF_CHECK, NULL);
    json_t *want = card_entry(r, "sum");
    bool same = line && json_equal(line, want);
    if (!same) fprintf(stderr, "  sluice state query printed: %s\n", out);
    json_decref(line);
    json_decref(want);
    CHECK(same);
    snprintf(a, sizeof a, "%s --uid counter --key '%s'", id, r->card);
    CHECK_EQ(cli(c, a, out, sizeof out), 0);
    int lines = 0;
    for (const char *p = out; (p = strchr(p, '\n')); p++) lines++;
    CHECK_EQ(lines, r->nlast ? 4 : 3);
    snprintf(a, sizeof a, "%s --uid counter --key card-nope", id);
    CHECK_EQ(cli(c, a, out, sizeof out), 3);
    CHECK_CONTAINS(out, "sluice state query: operator 'counter' has no value for key 'card-nope'");
    snprintf(a, sizeof a, "%s --uid by_amount --key 1.5", id);
    CHECK_EQ(cli(c, a, out, sizeof out), 4);
    CHECK_CONTAINS(out, "'1.5' is not a decimal integer");
    snprintf(a, sizeof a, "%s --key x", id);
    CHECK_EQ(cli(c, a, out, sizeof out), 1);
    CHECK_CONTAINS(out, "--uid UID is required");

    /* a job that is not running any more */
    char cancel[300];
    snprintf(cancel, sizeof cancel, "%s cancel -m 127.0.0.1:%d %s >/dev/null 2>&1", SLUICE_BIN, c->rest_port, id);
    CHECK_EQ(system(cancel), 0);
    CHECK(cl_wait_state(c, id, "CANCELED", 30000, st, sizeof st) || !strcmp(st, "CANCELED"));
    CHECK_EQ(sq(c, id, "counter", NULL, r->card, &j, NULL), 409);
    CHECK_CONTAINS(err0(j), "has ended (CANCELED)");
    json_decref(j);
    snprintf(a, sizeof a, "%s --uid counter --key x", id);
    CHECK_EQ(cli(c, a, out, sizeof out), 2);
}

TEST(two_taskmanagers) {
    cluster_t c;
    cl_cluster_init(&c, "state-query");
    cl_start_jm(&c);
    for (int i = 1; i <= 2; i++) cl_start_tm(&c, i, 1, NULL, NULL);
    bool up = cl_wait_tms(&c, 2, 20000);
    if (!up) cl_dump_logs(&c);
    CHECK(up);
    run_backend(&c, "heap");
    int before = sl_test_failures;
    run_backend(&c, "rocksdb");
    if (sl_test_failures != before) cl_dump_logs(&c);
    cl_cluster_stop(&c);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    RUN(two_taskmanagers);
    for (int i = 0; i < g_ncards; i++) free(g_cards[i].last);
    return sl_test_failures ? 1 : 0;
}
