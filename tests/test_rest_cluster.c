/*
 * test_rest_cluster.c — the REST API's checkpoint, configuration and
 * exception paths on a real cluster: `sluice jobmanager` and `sluice
 * taskmanager` processes (cluster_util.h) running tests/tools/cluster_job.c,
 * which checkpoints every 50 ms.
 *
 *   - checkpoints_live: /checkpoints counts grow and agree with the history
 *     (newest first, latest.completed the newest completed one); a completed
 *     checkpoint's details are the sums of its vertices', each vertex's the
 *     sums of its subtasks' (the vertices those of /jobs/:jobid); POST
 *     .../checkpoints completes with an id that then is in the history as
 *     COMPLETED; /checkpoints/config reports the job's 50 ms, /config its
 *     name and restart strategy; 64 clients x 50 requests get the right
 *     status codes while it runs; a cancelled job's checkpoints stay.
 *   - failure_in_exceptions: the TaskManager that runs the job kills itself
 *     at its sink's 6th pre-commit (SLUICE_FAULT_AT); /exceptions names it
 *     (exception, TaskManager id, task, location), the job restarts on the
 *     other TaskManager from a checkpoint (counts.restored, latest.restored)
 *     and the checkpoint that was pending counts as failed.
 */
#include <arpa/inet.h>
#include <poll.h>
#include <pthread.h>

#include "cluster_util.h"
#include "http_util.h"

typedef http_resp_t resp_t;

/* One request to the JobManager's REST port; the answer parsed. */
static void http(int port, const char *method, const char *path, const char *body, resp_t *r) {
    http_do(port, method, path, body, body ? strlen(body) : 0, NULL, r);
}
static void resp_free(resp_t *r) { http_resp_free(r); }

#define GI(o, k) json_integer_value(json_object_get(o, k))
#define GS(o, k) json_string_value(json_object_get(o, k))

static void cl_submit(cluster_t *c, const char *args, char *id, size_t cap) {
    cl_submit_job(c, SLUICE_CLUSTER_JOB, "", args, id, cap);
}

/* GET /jobs/ID/checkpoints until counts.completed >= n (ms at most). */
static json_t *wait_completed(cluster_t *c, const char *id, int n, int ms) {
    char path[200];
    snprintf(path, sizeof path, "/jobs/%s/checkpoints", id);
    int64_t end = cl_now_ms() + ms;
    while (cl_now_ms() < end) {
        resp_t r;
        http(c->rest_port, "GET", path, NULL, &r);
        if (r.status == 200 && GI(json_object_get(r.json, "counts"), "completed") >= n) {
            free(r.body); /* the caller owns the JSON only */
            return r.json;
        }
        resp_free(&r);
        cl_sleep_ms(100);
    }
    return NULL;
}

/* The statistics answer is consistent in itself. */
static bool stats_consistent(const json_t *o) {
    json_t *cn = json_object_get(o, "counts"), *h = json_object_get(o, "history");
    int64_t total = GI(cn, "total"), completed = GI(cn, "completed"), failed = GI(cn, "failed"),
            inp = GI(cn, "in_progress");
    if (total != completed + failed + inp || (size_t)total < json_array_size(h)) {
        fprintf(stderr, "  counts %lld = %lld + %lld + %lld, history %zu\n", (long long)total, (long long)completed,
                (long long)failed, (long long)inp, json_array_size(h));
        return false;
    }
    int64_t hc = 0, hf = 0, hp = 0, prev = INT64_MAX, newest_completed = -1;
    for (size_t i = 0; i < json_array_size(h); i++) {
        json_t *x = json_array_get(h, i);
        int64_t id = GI(x, "id");
        if (id >= prev) {
            fprintf(stderr, "  history not newest first: %lld after %lld\n", (long long)id, (long long)prev);
            return false;
        }
        prev = id;
        const char *st = GS(x, "status");
        hc += !strcmp(st, "COMPLETED"), hf += !strcmp(st, "FAILED"), hp += !strcmp(st, "IN_PROGRESS");
        if (!strcmp(st, "COMPLETED") && newest_completed < 0) newest_completed = id;
        if (!strcmp(st, "COMPLETED") && GI(x, "num_acknowledged_subtasks") != GI(x, "num_subtasks")) {
            fprintf(stderr, "  completed checkpoint %lld with %lld of %lld subtasks\n", (long long)id,
                    (long long)GI(x, "num_acknowledged_subtasks"), (long long)GI(x, "num_subtasks"));
            return false;
        }
    }
    if (hc > completed || hf > failed || hp != inp) {
        fprintf(stderr, "  history has %lld/%lld/%lld, counts %lld/%lld/%lld\n", (long long)hc, (long long)hf,
                (long long)hp, (long long)completed, (long long)failed, (long long)inp);
        return false;
    }
    json_t *lc = json_object_get(json_object_get(o, "latest"), "completed");
    if (newest_completed >= 0 && GI(lc, "id") != newest_completed) {
        fprintf(stderr, "  latest.completed %lld, newest completed in the history %lld\n", (long long)GI(lc, "id"),
                (long long)newest_completed);
        return false;
    }
    return true;
}

/* 64 clients x 50 requests on a running job. */
static int g_port;
static char g_job[64];
static void *client(void *arg) {
    uint64_t s = (uint64_t)(uintptr_t)arg;
    int *bad = calloc(1, sizeof *bad);
    for (int i = 0; i < 50; i++) {
        char path[256];
        const char *method = "GET", *body = NULL;
        int want = 200;
        s = s * 6364136223846793005ULL + 1442695040888963407ULL;
        switch ((s >> 33) % 7) {
        case 0: snprintf(path, sizeof path, "/jobs/%s/checkpoints", g_job); break;
        case 1: snprintf(path, sizeof path, "/jobs/%s/checkpoints/config", g_job); break;
        case 2: snprintf(path, sizeof path, "/jobs/%s/exceptions", g_job); break;
        case 3: snprintf(path, sizeof path, "/v1/jobs/%s/config", g_job); break;
        case 4: snprintf(path, sizeof path, "/jobs/%s/checkpoints/details/999999999", g_job), want = 404; break;
        case 5: snprintf(path, sizeof path, "/jobs/%s/stop", g_job), want = 405; break;
        default:
            snprintf(path, sizeof path, "/jobs/%s/savepoints", g_job), method = "POST";
            body = "{\"target-directory\": \"../escape\"}", want = 400;
            break;
        }
        resp_t r;
        http(g_port, method, path, body, &r);
        if (r.status != want) {
            if (*bad < 3) fprintf(stderr, "  %s %s: %d, expected %d\n", method, path, r.status, want);
            (*bad)++;
        }
        resp_free(&r);
    }
    return bad;
}

TEST(checkpoints_live) {
    cluster_t c;
    cl_cluster_init(&c, "rest-ckpt");
    cl_start_jm(&c);
    cl_start_tm(&c, 1, 2, NULL, NULL);
    cl_start_tm(&c, 2, 2, NULL, NULL);
    CHECK(cl_wait_tms(&c, 2, 10000));
    char args[3000], id[64], st[32], path[300];
    snprintf(args, sizeof args, "%s/out %s/ck 3000000 --rate=20000", c.dir, c.dir);
    cl_submit(&c, args, id, sizeof id);
    CHECK(id[0]);
    bool ok = cl_wait_state(&c, id, "RUNNING", 30000, st, sizeof st);
    if (!ok) cl_dump_logs(&c);
    CHECK(ok);
    json_t *s1 = wait_completed(&c, id, 3, 30000);
    if (!s1) cl_dump_logs(&c);
    CHECK(s1);
    CHECK(stats_consistent(s1));
    cl_sleep_ms(700);
    json_t *s2 = wait_completed(&c, id, 1, 10000);
    CHECK(s2);
    CHECK(stats_consistent(s2));
    json_t *c1 = json_object_get(s1, "counts"), *c2 = json_object_get(s2, "counts");
    CHECK(GI(c2, "completed") > GI(c1, "completed")); /* every 50 ms: it grew */
    CHECK(GI(c2, "total") > GI(c1, "total"));
    json_decref(s1);

    /* the job's vertices */
    resp_t r;
    snprintf(path, sizeof path, "/jobs/%s", id);
    http(c.rest_port, "GET", path, NULL, &r);
    CHECK_EQ(r.status, 200);
    json_t *verts = json_incref(json_object_get(r.json, "vertices"));
    resp_free(&r);
    int64_t nsub = 0;
    for (size_t v = 0; v < json_array_size(verts); v++) nsub += GI(json_array_get(verts, v), "parallelism");
    CHECK(nsub > 0);

    /* the newest completed checkpoint: its details sum up, down to the subtasks */
    int64_t cid = GI(json_object_get(json_object_get(s2, "latest"), "completed"), "id");
    json_decref(s2);
    snprintf(path, sizeof path, "/jobs/%s/checkpoints/details/%lld", id, (long long)cid);
    http(c.rest_port, "GET", path, NULL, &r);
    CHECK_EQ(r.status, 200);
    json_t *d = r.json, *tasks = json_object_get(d, "tasks");
    CHECK_STR(GS(d, "status"), "COMPLETED");
    CHECK_EQ(GI(d, "num_subtasks"), nsub);
    CHECK_EQ(json_object_size(tasks), json_array_size(verts));
    int64_t sum_state = 0, sum_acked = 0, sum_sub = 0, max_ack = -1;
    for (size_t v = 0; v < json_array_size(verts); v++) {
        const char *vid = GS(json_array_get(verts, v), "id");
        json_t *t = json_object_get(tasks, vid);
        CHECK(t);
        CHECK_EQ(GI(t, "num_subtasks"), GI(json_array_get(verts, v), "parallelism"));
        sum_state += GI(t, "state_size");
        sum_acked += GI(t, "num_acknowledged_subtasks");
        sum_sub += GI(t, "num_subtasks");
        if (GI(t, "latest_ack_timestamp") > max_ack) max_ack = GI(t, "latest_ack_timestamp");
        /* per subtask */
        char sp[400];
        snprintf(sp, sizeof sp, "/jobs/%s/checkpoints/details/%lld/subtasks/%s", id, (long long)cid, vid);
        resp_t rs;
        http(c.rest_port, "GET", sp, NULL, &rs);
        CHECK_EQ(rs.status, 200);
        json_t *subs = json_object_get(rs.json, "subtasks");
        CHECK_EQ(json_array_size(subs), GI(t, "num_subtasks"));
        int64_t ss = 0, acked = 0, latest = -1, max_sync = -1;
        for (size_t k = 0; k < json_array_size(subs); k++) {
            json_t *x = json_array_get(subs, k);
            CHECK_EQ(GI(x, "index"), (int64_t)k);
            if (strcmp(GS(x, "status"), "completed")) continue;
            acked++;
            ss += GI(x, "state_size");
            if (GI(x, "ack_timestamp") > latest) latest = GI(x, "ack_timestamp");
            int64_t sy = GI(json_object_get(x, "checkpoint"), "sync");
            if (sy > max_sync) max_sync = sy;
        }
        CHECK_EQ(ss, GI(t, "state_size"));
        CHECK_EQ(acked, GI(t, "num_acknowledged_subtasks"));
        CHECK_EQ(latest, GI(t, "latest_ack_timestamp"));
        CHECK_EQ(GI(json_object_get(json_object_get(json_object_get(rs.json, "summary"), "checkpoint_duration"), "sync"),
                    "max"),
                 max_sync);
        resp_free(&rs);
    }
    CHECK_EQ(sum_state, GI(d, "state_size"));
    CHECK(sum_state > 0); /* the window's keyed state and the sink's pending files */
    CHECK_EQ(sum_acked, GI(d, "num_acknowledged_subtasks"));
    CHECK_EQ(sum_acked, nsub);
    CHECK_EQ(sum_sub, nsub);
    CHECK_EQ(max_ack, GI(d, "latest_ack_timestamp"));
    resp_free(&r);
    json_decref(verts);

    /* a triggered checkpoint completes and is then in the history */
    snprintf(path, sizeof path, "/jobs/%s/checkpoints", id);
    http(c.rest_port, "POST", path, NULL, &r);
    CHECK_EQ(r.status, 202);
    char tid[80];
    snprintf(tid, sizeof tid, "%s", GS(r.json, "request-id") ? GS(r.json, "request-id") : "");
    resp_free(&r);
    CHECK_EQ(strlen(tid), 32);
    snprintf(path, sizeof path, "/jobs/%s/checkpoints/%s", id, tid);
    int64_t got = -1, end = cl_now_ms() + 30000;
    while (got < 0 && cl_now_ms() < end) {
        http(c.rest_port, "GET", path, NULL, &r);
        CHECK_EQ(r.status, 200);
        json_t *stt = json_object_get(r.json, "status"), *op = json_object_get(r.json, "operation");
        if (!strcmp(GS(stt, "id"), "COMPLETED")) {
            if (json_object_get(op, "failure-cause"))
                fprintf(stderr, "  trigger failed: %s\n", GS(json_object_get(op, "failure-cause"), "stack-trace"));
            CHECK(json_is_integer(json_object_get(op, "checkpointId")));
            got = GI(op, "checkpointId");
        }
        resp_free(&r);
        if (got < 0) cl_sleep_ms(50);
    }
    CHECK(got > cid);
    snprintf(path, sizeof path, "/jobs/%s/checkpoints/details/%lld", id, (long long)got);
    http(c.rest_port, "GET", path, NULL, &r);
    CHECK_EQ(r.status, 200);
    CHECK_STR(GS(r.json, "status"), "COMPLETED");
    resp_free(&r);
    json_t *s3 = wait_completed(&c, id, 1, 5000);
    CHECK(s3);
    bool in_history = false;
    json_t *h = json_object_get(s3, "history");
    for (size_t i = 0; i < json_array_size(h); i++)
        in_history |= GI(json_array_get(h, i), "id") == got && !strcmp(GS(json_array_get(h, i), "status"), "COMPLETED");
    CHECK(stats_consistent(s3));
    json_decref(s3);
    CHECK(in_history);

    /* the configurations */
    snprintf(path, sizeof path, "/jobs/%s/checkpoints/config", id);
    http(c.rest_port, "GET", path, NULL, &r);
    CHECK_EQ(r.status, 200);
    CHECK_EQ(GI(r.json, "interval"), 50);
    CHECK_STR(GS(r.json, "mode"), "exactly_once");
    CHECK_EQ(GI(r.json, "max_concurrent"), 1);
    CHECK_STR(GS(r.json, "checkpoint_storage"), "FileSystemCheckpointStorage");
    CHECK_STR(GS(r.json, "state_backend"), "HashMapStateBackend");
    resp_free(&r);
    snprintf(path, sizeof path, "/jobs/%s/config", id);
    http(c.rest_port, "GET", path, NULL, &r);
    CHECK_EQ(r.status, 200);
    CHECK_STR(GS(r.json, "jid"), id);
    CHECK_STR(GS(r.json, "name"), "cluster-job");
    json_t *ec = json_object_get(r.json, "execution-config");
    CHECK(GS(ec, "restart-strategy") && strstr(GS(ec, "restart-strategy"), "fixed delay (200 ms)") &&
          strstr(GS(ec, "restart-strategy"), "#1000"));
    CHECK_EQ(GI(ec, "job-parallelism"), 2);
    resp_free(&r);
    snprintf(path, sizeof path, "/jobs/%s/exceptions", id);
    http(c.rest_port, "GET", path, NULL, &r);
    CHECK_EQ(r.status, 200);
    CHECK_EQ(json_array_size(json_object_get(json_object_get(r.json, "exceptionHistory"), "entries")), 0);
    CHECK(json_is_null(json_object_get(r.json, "root-exception")));
    resp_free(&r);

    /* many clients at once */
    g_port = c.rest_port;
    snprintf(g_job, sizeof g_job, "%s", id);
    pthread_t t[64];
    for (int i = 0; i < 64; i++) CHECK(pthread_create(&t[i], NULL, client, (void *)(uintptr_t)(i + 1)) == 0);
    int bad = 0;
    for (int i = 0; i < 64; i++) {
        void *res;
        pthread_join(t[i], &res);
        bad += *(int *)res;
        free(res);
    }
    CHECK_EQ(bad, 0);
    cl_job_state(&c, id, st, sizeof st);
    CHECK_STR(st, "RUNNING");

    /* cancelled: its checkpoints stay readable, none pending */
    snprintf(path, sizeof path, "/jobs/%s?mode=cancel", id);
    http(c.rest_port, "PATCH", path, NULL, &r);
    CHECK_EQ(r.status, 202);
    resp_free(&r);
    CHECK(cl_wait_state(&c, id, "CANCELED", 30000, st, sizeof st));
    json_t *s4 = wait_completed(&c, id, 1, 5000);
    CHECK(s4);
    CHECK(stats_consistent(s4));
    CHECK_EQ(GI(json_object_get(s4, "counts"), "in_progress"), 0);
    json_decref(s4);
    snprintf(path, sizeof path, "/jobs/%s/checkpoints", id);
    http(c.rest_port, "POST", path, NULL, &r);
    CHECK_EQ(r.status, 409); /* ended: nothing to trigger */
    resp_free(&r);
    cl_cluster_stop(&c);
}

TEST(failure_in_exceptions) {
    cluster_t c;
    cl_cluster_init(&c, "rest-exc");
    cl_start_jm(&c);
    /* tm-1 registers first and gets every subtask; it dies at its sinks' 6th pre-commit */
    cl_start_tm(&c, 1, 2, NULL, "SLUICE_FAULT_AT=sink.before-precommit:6");
    CHECK(cl_wait_tms(&c, 1, 10000));
    char args[3000], id[64], st[32], path[300];
    snprintf(args, sizeof args, "%s/out %s/ck 3000000 --rate=20000", c.dir, c.dir);
    cl_submit(&c, args, id, sizeof id);
    CHECK(id[0]);
    CHECK(cl_wait_deployed(&c, 1, 30000));
    cl_start_tm(&c, 2, 2, NULL, NULL); /* where the job restarts (tm-1 may be gone already) */
    snprintf(path, sizeof path, "/jobs/%s/exceptions", id);
    resp_t r = {0};
    json_t *entry = NULL;
    int64_t end = cl_now_ms() + 60000;
    while (!entry && cl_now_ms() < end) {
        http(c.rest_port, "GET", path, NULL, &r);
        CHECK_EQ(r.status, 200);
        json_t *en = json_object_get(json_object_get(r.json, "exceptionHistory"), "entries");
        if (json_array_size(en)) entry = json_incref(json_array_get(en, 0));
        else cl_sleep_ms(100);
        if (!entry) resp_free(&r);
    }
    if (!entry) cl_dump_logs(&c);
    CHECK(entry);
    fprintf(stderr, "  exception: %s | %s | %s | %s\n", GS(entry, "exceptionName"), GS(entry, "stacktrace"),
            GS(entry, "taskName") ? GS(entry, "taskName") : "null", GS(entry, "location") ? GS(entry, "location") : "null");
    CHECK_STR(GS(entry, "exceptionName"), "sluice.TaskManagerLostException");
    CHECK(strstr(GS(entry, "stacktrace"), "lost TaskManager tm-1"));
    CHECK_STR(GS(entry, "taskManagerId"), "tm-1");
    CHECK(GS(entry, "taskName") && strstr(GS(entry, "taskName"), "/2)"));
    CHECK(GS(entry, "location") && !strncmp(GS(entry, "location"), "127.0.0.1:", 10));
    CHECK_STR(GS(r.json, "root-exception"), GS(entry, "stacktrace"));
    CHECK_EQ(GI(r.json, "timestamp"), GI(entry, "timestamp"));
    json_decref(entry);
    resp_free(&r);

    /* restarted from a checkpoint on tm-2; what was pending failed */
    snprintf(path, sizeof path, "/jobs/%s/checkpoints", id);
    json_t *s = NULL;
    end = cl_now_ms() + 60000;
    while (cl_now_ms() < end) {
        http(c.rest_port, "GET", path, NULL, &r);
        CHECK_EQ(r.status, 200);
        json_t *cn = json_object_get(r.json, "counts");
        if (GI(cn, "restored") >= 1 && GI(cn, "completed") >= 4) {
            s = json_incref(r.json);
            resp_free(&r);
            break;
        }
        resp_free(&r);
        cl_sleep_ms(100);
    }
    if (!s) cl_dump_logs(&c);
    CHECK(s);
    CHECK(stats_consistent(s));
    json_t *cn = json_object_get(s, "counts"), *rs = json_object_get(json_object_get(s, "latest"), "restored");
    CHECK(GI(cn, "failed") >= 1);
    CHECK(json_is_object(rs));
    CHECK(GI(rs, "id") >= 1);
    char want[1400];
    snprintf(want, sizeof want, "/chk-%lld", (long long)GI(rs, "id"));
    CHECK(GS(rs, "external_path") && strstr(GS(rs, "external_path"), want));
    /* the history holds the new attempt's numbering: the pending checkpoint
     * that failed with tm-1 had an id the new attempt gives again, so it
     * is only counted, and the restored id is the newest before the new ones */
    json_t *h = json_object_get(s, "history");
    bool restored_in_history = false;
    for (size_t i = 0; i < json_array_size(h); i++)
        restored_in_history |= GI(json_array_get(h, i), "id") == GI(rs, "id") &&
                               !strcmp(GS(json_array_get(h, i), "status"), "COMPLETED");
    CHECK(restored_in_history);
    json_decref(s);
    cl_job_state(&c, id, st, sizeof st);
    CHECK(!strcmp(st, "RUNNING") || !strcmp(st, "FINISHED"));
    cl_cluster_stop(&c);
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    RUN(checkpoints_live);
    RUN(failure_in_exceptions);
    TEST_MAIN_END();
}
