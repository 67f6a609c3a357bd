/*
 * test_rest_checkpoints.c — the REST API's checkpoint, job configuration,
 * exception and savepoint/checkpoint-trigger paths (src/jobmanager/rest.c,
 * rest_shapes.c) against a fake provider written here.
 *
 * Each round fills the fake with random jobs: vertices, a shuffled history
 * of checkpoints with random per-subtask figures, counts, a restore, a
 * checkpoint configuration, a job configuration and failures.  Every
 * answer is checked twice: its shape against the schema tables below
 * (field names and JSON types written from Flink's rest_v1_dispatcher.yml,
 * no values), and its values against a brute-force reference computed here
 * from the fake's figures (sums over subtasks, newest-first order, the
 * percentiles by their definition).  Then the bad inputs: unknown paths
 * and ids, wrong methods, malformed JSON, wrong types, huge bodies,
 * relative and ".." savepoint directories, and 64 concurrent clients.
 */
#include <arpa/inet.h>
#include <jansson.h>
#include <math.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/socket.h>

#include "common/common.h"
#include "jobmanager/rest.h"
#include "jobmanager/rest_shapes.h"
#include "http_util.h"
#include "test.h"

static uint64_t rng_next(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}
static uint64_t seed = 0xc4ec4;
static int rnd(int n) { return (int)(rng_next(&seed) % (uint64_t)n); }
static uint64_t fseed = 99; /* the fake's own, used on the server's thread under F.mu */
static int frnd(int n) { return (int)(rng_next(&fseed) % (uint64_t)n); }

/* ---- the fake ---------------------------------------------------------------- */

#define NJOBS 4
#define MAXV 4
#define MAXH 14
#define MAXT (MAXV * 4)

typedef struct fjob {
    char id[33];
    bool ckpt_enabled;
    sl_rest_vertex_t v[MAXV];
    int nv, ntasks;
    sl_rest_checkpoint_t h[MAXH];
    sl_rest_ckpt_subtask_t sub[MAXH][MAXT];
    int nh;
    int64_t total, completed, failed, in_progress, restored;
    bool has_restored;
    int64_t restored_id, restore_ts;
    sl_rest_ckpt_config_t cc;
    sl_rest_job_config_t jc;
    sl_rest_kv_t kv[4];
    sl_rest_exception_t exc[6];
    int nexc;
} fjob_t;

typedef struct fop {
    char tid[65];
    char job[33];
    sl_rest_operation_t op;
} fop_t;

static struct {
    pthread_mutex_t mu;
    fjob_t jobs[NJOBS];
    fop_t ops[64];
    int nops;
    sl_rest_savepoint_req_t last_sp; /* the last savepoint request (target copied) */
    char last_target[4096];
    bool last_target_null;
    int nsavepoints, ncheckpoints;
} F = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void hex(char *out, int n) {
    for (int i = 0; i < n; i++) out[i] = "0123456789abcdef"[rnd(16)];
    out[n] = 0;
}

static void fill_job(fjob_t *j, bool enabled) {
    memset(j, 0, sizeof *j);
    hex(j->id, 32);
    j->ckpt_enabled = enabled;
    j->nv = 1 + rnd(MAXV);
    for (int v = 0; v < j->nv; v++) {
        hex(j->v[v].id, 32);
        snprintf(j->v[v].name, sizeof j->v[v].name, "vertex %d", v);
        j->v[v].parallelism = 1 + rnd(4);
        j->ntasks += j->v[v].parallelism;
    }
    j->nh = rnd(MAXH + 1);
    int64_t id = 1 + rnd(5), now = sl_wall_ms();
    for (int i = 0; i < j->nh; i++, id += 1 + rnd(3)) {
        sl_rest_checkpoint_t *c = &j->h[i];
        c->id = id;
        int st = rnd(4);
        snprintf(c->status, sizeof c->status, "%s", st <= 1 ? "COMPLETED" : st == 2 ? "FAILED" : "IN_PROGRESS");
        c->is_savepoint = st <= 1 && rnd(4) == 0;
        snprintf(c->type, sizeof c->type, "%s", c->is_savepoint ? "SAVEPOINT" : rnd(3) ? "CHECKPOINT" : "UNALIGNED_CHECKPOINT");
        c->trigger_timestamp = now - 100000 + id * 1000;
        c->end_to_end_duration = st <= 1 && rnd(2) ? rnd(5000) : -1;
        if (st <= 1 && rnd(3)) snprintf(c->external_path, sizeof c->external_path, "/ckpt/job/chk-%lld", (long long)id);
        c->discarded = st <= 1 && rnd(2);
        if (st == 2) {
            c->failure_timestamp = c->trigger_timestamp + rnd(900);
            if (rnd(2)) snprintf(c->failure_message, sizeof c->failure_message, "declined by task %d", rnd(9));
        }
        for (int t = 0; t < j->ntasks; t++) {
            sl_rest_ckpt_subtask_t *s = &j->sub[i][t];
            s->acked = st <= 1 || rnd(2);
            s->ack_timestamp = c->trigger_timestamp + rnd(3000);
            s->sync_ms = rnd(50);
            s->async_ms = rnd(500);
            s->align_ms = rnd(100);
            s->start_delay_ms = rnd(20);
            s->state_size = rnd(1 << 20);
            s->checkpointed_size = rnd(1 << 16);
            s->processed_data = rnd(4096);
            s->persisted_data = rnd(4096);
            s->unaligned = rnd(2);
        }
    }
    j->total = j->nh + rnd(20);
    j->completed = rnd(50);
    j->failed = rnd(9);
    j->in_progress = rnd(2);
    j->restored = rnd(3);
    j->has_restored = j->restored > 0;
    j->restored_id = 1 + rnd(99);
    j->restore_ts = now - rnd(99999);
    sl_rest_ckpt_config_t *cc = &j->cc;
    cc->exactly_once = rnd(2);
    cc->interval = rnd(100000);
    cc->timeout = rnd(600000);
    cc->min_pause = rnd(1000);
    cc->aligned_checkpoint_timeout = rnd(1000);
    cc->max_concurrent = 1 + rnd(3);
    cc->tolerable_failed = rnd(4);
    cc->externalized = rnd(2);
    cc->delete_on_cancellation = rnd(2);
    cc->unaligned = rnd(2);
    cc->after_tasks_finish = rnd(2);
    snprintf(cc->state_backend, sizeof cc->state_backend, "%s", rnd(2) ? "HashMapStateBackend" : "EmbeddedRocksDBStateBackend");
    snprintf(cc->checkpoint_storage, sizeof cc->checkpoint_storage, "%s",
             rnd(2) ? "FileSystemCheckpointStorage" : "JobManagerCheckpointStorage");
    snprintf(j->jc.name, sizeof j->jc.name, "job %d", rnd(1000));
    snprintf(j->jc.execution_mode, sizeof j->jc.execution_mode, "PIPELINED");
    snprintf(j->jc.restart_strategy, sizeof j->jc.restart_strategy, "Restart with fixed delay (%d ms).", rnd(999));
    j->jc.parallelism = 1 + rnd(8);
    j->jc.object_reuse = rnd(2);
    int nkv = rnd(4);
    for (int k = 0; k < nkv; k++) {
        snprintf(j->kv[k].key, sizeof j->kv[k].key, "key%d", k);
        snprintf(j->kv[k].value, sizeof j->kv[k].value, "value %d", rnd(100));
    }
    j->jc.nuser_config = nkv;
    j->nexc = rnd(7);
    for (int k = 0; k < j->nexc; k++) {
        sl_rest_exception_t *e = &j->exc[k];
        snprintf(e->name, sizeof e->name, "sluice.TaskException");
        snprintf(e->stacktrace, sizeof e->stacktrace, "sluice.TaskException: failure %d", k);
        e->timestamp = now - 10000 + k * 100;
        if (rnd(2)) snprintf(e->task_name, sizeof e->task_name, "vertex 0 (1/2)");
        if (rnd(2)) snprintf(e->location, sizeof e->location, "127.0.0.1:%d", 1000 + rnd(9000));
        if (rnd(2)) snprintf(e->tm_id, sizeof e->tm_id, "tm-%d", rnd(4));
    }
}

static fjob_t *fjob(const char *id) {
    for (int i = 0; i < NJOBS; i++)
        if (!strcmp(F.jobs[i].id, id)) return &F.jobs[i];
    return NULL;
}

static int p_checkpoints(void *ud, const char *id, sl_rest_checkpoints_t *o, char *err, size_t el) {
    SL_UNUSED(ud);
    pthread_mutex_lock(&F.mu);
    fjob_t *j = fjob(id);
    int rc = !j ? sl_errf(err, el, SL_ENOTFOUND, "Job %s not found", id)
             : !j->ckpt_enabled ? sl_errf(err, el, SL_ESTATE, "Checkpointing is not enabled for job %s", id) : 0;
    if (rc == 0) {
        o->vertices = malloc(sizeof j->v);
        memcpy(o->vertices, j->v, sizeof j->v);
        o->nvertices = j->nv;
        o->history = calloc(MAXH, sizeof *o->history);
        o->nhistory = j->nh;
        int perm[MAXH];
        for (int i = 0; i < j->nh; i++) perm[i] = i;
        for (int i = j->nh - 1; i > 0; i--) { /* the provider's order is any order */
            int k = frnd(i + 1), t = perm[i];
            perm[i] = perm[k];
            perm[k] = t;
        }
        for (int i = 0; i < j->nh; i++) {
            o->history[i] = j->h[perm[i]];
            o->history[i].subtasks = malloc(MAXT * sizeof(sl_rest_ckpt_subtask_t));
            memcpy(o->history[i].subtasks, j->sub[perm[i]], MAXT * sizeof(sl_rest_ckpt_subtask_t));
        }
        o->total = j->total, o->completed = j->completed, o->failed = j->failed;
        o->in_progress = j->in_progress, o->restored = j->restored;
        o->has_restored = j->has_restored, o->restored_id = j->restored_id, o->restore_timestamp = j->restore_ts;
        snprintf(o->restored_path, sizeof o->restored_path, "/ckpt/job/chk-%lld", (long long)j->restored_id);
    }
    pthread_mutex_unlock(&F.mu);
    return rc;
}

static int p_ckpt_config(void *ud, const char *id, sl_rest_ckpt_config_t *o, char *err, size_t el) {
    SL_UNUSED(ud);
    pthread_mutex_lock(&F.mu);
    fjob_t *j = fjob(id);
    int rc = !j ? sl_errf(err, el, SL_ENOTFOUND, "Job %s not found", id)
             : !j->ckpt_enabled ? sl_errf(err, el, SL_ESTATE, "Checkpointing is not enabled for job %s", id) : 0;
    if (!rc) *o = j->cc;
    pthread_mutex_unlock(&F.mu);
    return rc;
}

static int p_job_config(void *ud, const char *id, sl_rest_job_config_t *o, char *err, size_t el) {
    SL_UNUSED(ud);
    pthread_mutex_lock(&F.mu);
    fjob_t *j = fjob(id);
    if (j) {
        *o = j->jc;
        o->user_config = malloc(sizeof j->kv);
        memcpy(o->user_config, j->kv, sizeof j->kv);
    }
    pthread_mutex_unlock(&F.mu);
    return j ? 0 : sl_errf(err, el, SL_ENOTFOUND, "Job %s not found", id);
}

static int p_exceptions(void *ud, const char *id, sl_rest_exception_t **out, int *n, char *err, size_t el) {
    SL_UNUSED(ud);
    pthread_mutex_lock(&F.mu);
    fjob_t *j = fjob(id);
    if (j) {
        *out = malloc(sizeof j->exc);
        memcpy(*out, j->exc, sizeof j->exc);
        *n = j->nexc;
    }
    pthread_mutex_unlock(&F.mu);
    return j ? 0 : sl_errf(err, el, SL_ENOTFOUND, "Job %s not found", id);
}

static int new_op(const char *job, char *tid, size_t cap) {
    if (F.nops == 64) F.nops = 0;
    fop_t *o = &F.ops[F.nops++];
    memset(o, 0, sizeof *o);
    for (int i = 0; i < 32; i++) o->tid[i] = "0123456789abcdef"[frnd(16)];
    snprintf(o->job, sizeof o->job, "%s", job);
    snprintf(tid, cap, "%s", o->tid);
    return 0;
}

static int p_savepoint(void *ud, const char *id, const sl_rest_savepoint_req_t *rq, char *tid, size_t cap, char *err,
                       size_t el) {
    SL_UNUSED(ud);
    pthread_mutex_lock(&F.mu);
    fjob_t *j = fjob(id);
    int rc = j ? 0 : sl_errf(err, el, SL_ENOTFOUND, "Job %s not found", id);
    if (j) {
        F.last_sp = *rq;
        F.last_target_null = !rq->target_dir;
        snprintf(F.last_target, sizeof F.last_target, "%s", rq->target_dir ? rq->target_dir : "");
        F.nsavepoints++;
        if (!j->ckpt_enabled) rc = sl_errf(err, el, SL_ESTATE, "Job %s is not running", id);
        else new_op(id, tid, cap);
    }
    pthread_mutex_unlock(&F.mu);
    return rc;
}

static int p_checkpoint(void *ud, const char *id, char *tid, size_t cap, char *err, size_t el) {
    SL_UNUSED(ud);
    pthread_mutex_lock(&F.mu);
    fjob_t *j = fjob(id);
    int rc = j ? 0 : sl_errf(err, el, SL_ENOTFOUND, "Job %s not found", id);
    if (j) {
        F.ncheckpoints++;
        new_op(id, tid, cap);
    }
    pthread_mutex_unlock(&F.mu);
    return rc;
}

static int p_operation(void *ud, const char *id, const char *tid, sl_rest_operation_t *out, char *err, size_t el) {
    SL_UNUSED(ud);
    pthread_mutex_lock(&F.mu);
    fop_t *o = NULL;
    for (int i = 0; i < F.nops; i++)
        if (!strcmp(F.ops[i].tid, tid) && !strcmp(F.ops[i].job, id)) o = &F.ops[i];
    if (o) *out = o->op;
    pthread_mutex_unlock(&F.mu);
    return o ? 0 : sl_errf(err, el, SL_ENOTFOUND, "Operation not found under key: %s", tid);
}

/* ---- HTTP --------------------------------------------------------------------- */

static int port;

typedef http_resp_t resp_t;
static void resp_free(resp_t *r) { http_resp_free(r); }

/* One request (Connection: close); the answer parsed. */
static void http(const char *method, const char *path, const char *body, size_t blen, resp_t *r) {
    http_do(port, method, path, body, blen, NULL, r);
}

static void get(const char *path, resp_t *r) { http("GET", path, NULL, 0, r); }
static void post(const char *path, const char *body, resp_t *r) { http("POST", path, body, body ? strlen(body) : 0, r); }

static const char *error_of(const resp_t *r) {
    json_t *e = r->json ? json_object_get(r->json, "errors") : NULL;
    return json_is_array(e) && json_array_size(e) == 1 ? json_string_value(json_array_get(e, 0)) : NULL;
}

/* ---- the schemas (names and JSON types from rest_v1_dispatcher.yml) -------- */

enum { T_INT = 1, T_REAL = 2, T_STR = 4, T_BOOL = 8, T_OBJ = 16, T_ARR = 32, T_NULL = 64 };
typedef struct field {
    const char *name;
    int types;
} field_t;

static const field_t COUNTS[] = {{"restored", T_INT}, {"total", T_INT}, {"in_progress", T_INT},
                                 {"completed", T_INT}, {"failed", T_INT}, {NULL, 0}};
static const field_t STATS_SUMMARY[] = {{"min", T_INT}, {"max", T_INT}, {"avg", T_INT}, {"p50", T_REAL},
                                        {"p90", T_REAL}, {"p95", T_REAL}, {"p99", T_REAL}, {"p999", T_REAL},
                                        {NULL, 0}};
static const char *const SUMMARY_NAMES[] = {"checkpointed_size", "state_size", "end_to_end_duration",
                                            "alignment_buffered", "processed_data", "persisted_data", NULL};
static const field_t LATEST[] = {{"completed", T_OBJ | T_NULL}, {"savepoint", T_OBJ | T_NULL},
                                 {"failed", T_OBJ | T_NULL}, {"restored", T_OBJ | T_NULL}, {NULL, 0}};
static const field_t RESTORED[] = {{"id", T_INT}, {"restore_timestamp", T_INT}, {"is_savepoint", T_BOOL},
                                   {"external_path", T_STR}, {NULL, 0}};
static const field_t CHECKPOINT[] = {
    {"className", T_STR}, {"id", T_INT}, {"status", T_STR}, {"is_savepoint", T_BOOL}, {"trigger_timestamp", T_INT},
    {"latest_ack_timestamp", T_INT}, {"checkpointed_size", T_INT}, {"state_size", T_INT},
    {"end_to_end_duration", T_INT}, {"alignment_buffered", T_INT}, {"processed_data", T_INT},
    {"persisted_data", T_INT}, {"num_subtasks", T_INT}, {"num_acknowledged_subtasks", T_INT},
    {"checkpoint_type", T_STR}, {"tasks", T_OBJ}, {NULL, 0}};
static const field_t COMPLETED_EXTRA[] = {{"external_path", T_STR}, {"discarded", T_BOOL}, {NULL, 0}};
static const field_t FAILED_EXTRA[] = {{"failure_timestamp", T_INT}, {"failure_message", T_STR | T_NULL}, {NULL, 0}};
static const field_t TASK[] = {{"id", T_INT}, {"status", T_STR}, {"latest_ack_timestamp", T_INT},
                               {"checkpointed_size", T_INT}, {"state_size", T_INT}, {"end_to_end_duration", T_INT},
                               {"alignment_buffered", T_INT}, {"processed_data", T_INT}, {"persisted_data", T_INT},
                               {"num_subtasks", T_INT}, {"num_acknowledged_subtasks", T_INT}, {NULL, 0}};
static const field_t SUBTASK_DETAILS_EXTRA[] = {{"summary", T_OBJ}, {"subtasks", T_ARR}, {NULL, 0}};
static const field_t SUBTASK_COMPLETED[] = {
    {"index", T_INT}, {"status", T_STR}, {"ack_timestamp", T_INT}, {"end_to_end_duration", T_INT},
    {"state_size", T_INT}, {"checkpoint", T_OBJ}, {"alignment", T_OBJ}, {"start_delay", T_INT},
    {"unaligned_checkpoint", T_BOOL}, {"aborted", T_BOOL}, {NULL, 0}};
static const field_t SUBTASK_PENDING[] = {{"index", T_INT}, {"status", T_STR}, {NULL, 0}};
static const field_t DURATION[] = {{"sync", T_INT}, {"async", T_INT}, {NULL, 0}};
static const field_t ALIGNMENT[] = {{"buffered", T_INT}, {"processed", T_INT}, {"persisted", T_INT},
                                    {"duration", T_INT}, {NULL, 0}};
static const field_t CKPT_CONFIG[] = {
    {"mode", T_STR}, {"interval", T_INT}, {"timeout", T_INT}, {"min_pause", T_INT}, {"max_concurrent", T_INT},
    {"externalization", T_OBJ}, {"state_backend", T_STR}, {"checkpoint_storage", T_STR},
    {"unaligned_checkpoints", T_BOOL}, {"tolerable_failed_checkpoints", T_INT},
    {"aligned_checkpoint_timeout", T_INT}, {"checkpoints_after_tasks_finish", T_BOOL}, {NULL, 0}};
static const field_t EXTERNALIZATION[] = {{"enabled", T_BOOL}, {"delete_on_cancellation", T_BOOL}, {NULL, 0}};
static const field_t JOB_CONFIG[] = {{"jid", T_STR}, {"name", T_STR}, {"execution-config", T_OBJ}, {NULL, 0}};
static const field_t EXEC_CONFIG[] = {{"execution-mode", T_STR}, {"restart-strategy", T_STR},
                                      {"job-parallelism", T_INT}, {"object-reuse-mode", T_BOOL},
                                      {"user-config", T_OBJ}, {NULL, 0}};
static const field_t EXCEPTIONS[] = {{"root-exception", T_STR | T_NULL}, {"timestamp", T_INT | T_NULL},
                                     {"all-exceptions", T_ARR}, {"truncated", T_BOOL},
                                     {"exceptionHistory", T_OBJ}, {NULL, 0}};
static const field_t HISTORY[] = {{"entries", T_ARR}, {"truncated", T_BOOL}, {NULL, 0}};
static const field_t ROOT_EXCEPTION[] = {{"exceptionName", T_STR}, {"stacktrace", T_STR}, {"timestamp", T_INT},
                                         {"taskName", T_STR | T_NULL}, {"location", T_STR | T_NULL},
                                         {"taskManagerId", T_STR | T_NULL}, {"concurrentExceptions", T_ARR},
                                         {NULL, 0}};
static const field_t ALL_EXCEPTION[] = {{"exception", T_STR}, {"task", T_STR | T_NULL}, {"location", T_STR | T_NULL},
                                        {"timestamp", T_INT}, {NULL, 0}};
static const field_t QUEUE_STATUS[] = {{"id", T_STR}, {NULL, 0}};
static const field_t TRIGGER_RESPONSE[] = {{"request-id", T_STR}, {NULL, 0}};
static const field_t FAILURE_CAUSE[] = {{"class", T_STR}, {"stack-trace", T_STR}, {NULL, 0}};

static int type_of(const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_INTEGER: return T_INT;
    case JSON_REAL: return T_REAL;
    case JSON_STRING: return T_STR;
    case JSON_TRUE: case JSON_FALSE: return T_BOOL;
    case JSON_OBJECT: return T_OBJ;
    case JSON_ARRAY: return T_ARR;
    default: return T_NULL;
    }
}

/* Every field of the table present in o with one of its types. */
static bool schema_ok(const json_t *o, const field_t *t, const char *where) {
    if (!json_is_object(o)) {
        fprintf(stderr, "  %s: not an object\n", where);
        return false;
    }
    for (; t->name; t++) {
        json_t *v = json_object_get(o, t->name);
        if (!v || !(type_of(v) & t->types)) {
            fprintf(stderr, "  %s: field '%s' %s\n", where, t->name, v ? "has the wrong JSON type" : "is missing");
            return false;
        }
    }
    return true;
}

#define GI(o, k) json_integer_value(json_object_get(o, k))
#define GS(o, k) json_string_value(json_object_get(o, k))
#define GB(o, k) json_is_true(json_object_get(o, k))
#define GR(o, k) json_real_value(json_object_get(o, k))

/* ---- the reference -------------------------------------------------------------- */

typedef struct ragg {
    int64_t latest, state, cksize, processed, persisted;
    int n, acked;
} ragg_t;

static ragg_t ref_agg(const fjob_t *j, int h, int from, int to) {
    ragg_t a = {.latest = -1};
    for (int t = from; t < to; t++) {
        const sl_rest_ckpt_subtask_t *s = &j->sub[h][t];
        a.n++;
        if (!s->acked) continue;
        a.acked++;
        a.latest = s->ack_timestamp > a.latest ? s->ack_timestamp : a.latest;
        a.state += s->state_size;
        a.cksize += s->checkpointed_size;
        a.processed += s->processed_data;
        a.persisted += s->persisted_data;
    }
    return a;
}

static int64_t ref_e2e(const fjob_t *j, int h) {
    const sl_rest_checkpoint_t *c = &j->h[h];
    ragg_t a = ref_agg(j, h, 0, j->ntasks);
    if (!strcmp(c->status, "COMPLETED") && c->end_to_end_duration >= 0) return c->end_to_end_duration;
    return a.latest >= 0 ? a.latest - c->trigger_timestamp : -1;
}

/* The k-th smallest (1-based) of v[n], found by counting (no sort). */
static int64_t kth(const int64_t *v, int n, int k) {
    for (int i = 0; i < n; i++) {
        int less = 0, eq = 0;
        for (int m = 0; m < n; m++) less += v[m] < v[i], eq += v[m] == v[i];
        if (less < k && k <= less + eq) return v[i];
    }
    return 0;
}

/* Flink's (Commons Math's legacy) percentile, by its definition. */
static double ref_pct(const int64_t *v, int n, double p) {
    if (n == 0) return 0;
    double pos = p * (n + 1) / 100;
    double fl = floor(pos);
    if (pos < 1) return (double)kth(v, n, 1);
    if (pos >= n) return (double)kth(v, n, n);
    double lo = (double)kth(v, n, (int)fl), hi = (double)kth(v, n, (int)fl + 1);
    return lo + (pos - fl) * (hi - lo);
}

static bool summary_ok(const json_t *s, const int64_t *v, int n, const char *what) {
    if (!schema_ok(s, STATS_SUMMARY, what)) return false;
    int64_t mn = 0, mx = 0, sum = 0;
    for (int i = 0; i < n; i++) {
        if (i == 0 || v[i] < mn) mn = v[i];
        if (i == 0 || v[i] > mx) mx = v[i];
        sum += v[i];
    }
    bool ok = GI(s, "min") == mn && GI(s, "max") == mx && GI(s, "avg") == (n ? sum / n : 0);
    static const char *const P[] = {"p50", "p90", "p95", "p99", "p999"};
    static const double PV[] = {50, 90, 95, 99, 99.9};
    for (int i = 0; i < 5; i++) ok = ok && fabs(GR(s, P[i]) - ref_pct(v, n, PV[i])) < 1e-6;
    if (!ok) fprintf(stderr, "  %s: summary differs from the reference (n=%d)\n", what, n);
    return ok;
}

/* One CheckpointStatistics object against checkpoint h of j. */
static bool checkpoint_ok(const json_t *o, const fjob_t *j, int h, bool with_tasks) {
    const sl_rest_checkpoint_t *c = &j->h[h];
    if (!schema_ok(o, CHECKPOINT, "checkpoint")) return false;
    bool completed = !strcmp(c->status, "COMPLETED"), failed = !strcmp(c->status, "FAILED");
    if (completed && !schema_ok(o, COMPLETED_EXTRA, "completed checkpoint")) return false;
    if (failed && !schema_ok(o, FAILED_EXTRA, "failed checkpoint")) return false;
    ragg_t a = ref_agg(j, h, 0, j->ntasks);
    const char *cls = completed ? "completed" : failed ? "failed" : "in_progress";
    bool ok = GI(o, "id") == c->id && !strcmp(GS(o, "status"), c->status) && !strcmp(GS(o, "className"), cls) &&
              GB(o, "is_savepoint") == c->is_savepoint && GI(o, "trigger_timestamp") == c->trigger_timestamp &&
              GI(o, "latest_ack_timestamp") == a.latest && GI(o, "state_size") == a.state &&
              GI(o, "checkpointed_size") == a.cksize && GI(o, "processed_data") == a.processed &&
              GI(o, "persisted_data") == a.persisted && GI(o, "alignment_buffered") == 0 &&
              GI(o, "num_subtasks") == j->ntasks && GI(o, "num_acknowledged_subtasks") == a.acked &&
              GI(o, "end_to_end_duration") == ref_e2e(j, h) && !strcmp(GS(o, "checkpoint_type"), c->type);
    if (ok && completed)
        ok = !strcmp(GS(o, "external_path"), c->external_path[0] ? c->external_path
                                                                  : "<checkpoint-not-externally-addressable>") &&
             GB(o, "discarded") == c->discarded;
    if (ok && failed) {
        json_t *m = json_object_get(o, "failure_message");
        ok = GI(o, "failure_timestamp") == c->failure_timestamp &&
             (c->failure_message[0] ? json_is_string(m) && !strcmp(json_string_value(m), c->failure_message)
                                    : json_is_null(m));
    }
    json_t *tasks = json_object_get(o, "tasks");
    if (ok && !with_tasks) ok = json_object_size(tasks) == 0; /* Flink leaves them out of the history */
    for (int v = 0, from = 0; ok && with_tasks && v < j->nv; from += j->v[v++].parallelism) {
        json_t *t = json_object_get(tasks, j->v[v].id);
        if (!schema_ok(t, TASK, "task")) return false;
        ragg_t va = ref_agg(j, h, from, from + j->v[v].parallelism);
        const char *st = failed ? "FAILED" : va.acked == va.n ? "COMPLETED" : "IN_PROGRESS";
        ok = GI(t, "id") == c->id && !strcmp(GS(t, "status"), st) && GI(t, "latest_ack_timestamp") == va.latest &&
             GI(t, "state_size") == va.state && GI(t, "checkpointed_size") == va.cksize &&
             GI(t, "processed_data") == va.processed && GI(t, "persisted_data") == va.persisted &&
             GI(t, "num_subtasks") == va.n && GI(t, "num_acknowledged_subtasks") == va.acked &&
             GI(t, "end_to_end_duration") == (va.latest >= 0 ? va.latest - c->trigger_timestamp : -1);
    }
    if (ok && with_tasks) ok = (int)json_object_size(tasks) == j->nv;
    if (!ok) fprintf(stderr, "  checkpoint %lld differs from the reference\n", (long long)c->id);
    return ok;
}

/* ---- tests ------------------------------------------------------------------------ */

static void fill_all(void) {
    pthread_mutex_lock(&F.mu);
    for (int i = 0; i < NJOBS; i++) fill_job(&F.jobs[i], i != NJOBS - 1); /* the last one does not checkpoint */
    pthread_mutex_unlock(&F.mu);
}

TEST(checkpoint_statistics) {
    for (int round = 0; round < 25; round++) {
        fill_all();
        for (int ji = 0; ji < NJOBS - 1; ji++) {
            const fjob_t *j = &F.jobs[ji];
            char path[256];
            resp_t r;
            snprintf(path, sizeof path, "/jobs/%s/checkpoints", j->id);
            get(path, &r);
            CHECK_EQ(r.status, 200);
            json_t *o = r.json;
            CHECK(schema_ok(json_object_get(o, "counts"), COUNTS, "counts"));
            json_t *cn = json_object_get(o, "counts");
            CHECK(GI(cn, "total") == j->total && GI(cn, "completed") == j->completed && GI(cn, "failed") == j->failed &&
                  GI(cn, "in_progress") == j->in_progress && GI(cn, "restored") == j->restored);
            /* summary over the completed ones */
            int64_t vals[6][MAXH];
            int m = 0;
            for (int h = 0; h < j->nh; h++) {
                if (strcmp(j->h[h].status, "COMPLETED")) continue;
                ragg_t a = ref_agg(j, h, 0, j->ntasks);
                vals[0][m] = a.cksize, vals[1][m] = a.state, vals[2][m] = ref_e2e(j, h);
                vals[3][m] = 0, vals[4][m] = a.processed, vals[5][m] = a.persisted;
                m++;
            }
            json_t *sum = json_object_get(o, "summary");
            for (int k = 0; SUMMARY_NAMES[k]; k++) CHECK(summary_ok(json_object_get(sum, SUMMARY_NAMES[k]), vals[k], m, SUMMARY_NAMES[k]));
            /* history: every checkpoint once, newest first */
            json_t *hist = json_object_get(o, "history");
            CHECK(json_is_array(hist));
            CHECK_EQ(json_array_size(hist), j->nh);
            for (size_t i = 0; i < json_array_size(hist); i++) {
                int h = j->nh - 1 - (int)i; /* the fake's ids grow with h */
                CHECK(checkpoint_ok(json_array_get(hist, i), j, h, false));
            }
            /* latest */
            json_t *lt = json_object_get(o, "latest");
            CHECK(schema_ok(lt, LATEST, "latest"));
            int lc = -1, ls = -1, lf = -1;
            for (int h = 0; h < j->nh; h++) {
                bool done = !strcmp(j->h[h].status, "COMPLETED");
                if (done && !j->h[h].is_savepoint) lc = h;
                if (done && j->h[h].is_savepoint) ls = h;
                if (!strcmp(j->h[h].status, "FAILED")) lf = h;
            }
            const char *const names[3] = {"completed", "savepoint", "failed"};
            int want[3] = {lc, ls, lf};
            for (int k = 0; k < 3; k++) {
                json_t *x = json_object_get(lt, names[k]);
                if (want[k] < 0) CHECK(json_is_null(x));
                else CHECK(checkpoint_ok(x, j, want[k], false));
            }
            json_t *rs = json_object_get(lt, "restored");
            if (!j->has_restored) CHECK(json_is_null(rs));
            else {
                CHECK(schema_ok(rs, RESTORED, "latest.restored"));
                CHECK(GI(rs, "id") == j->restored_id && GI(rs, "restore_timestamp") == j->restore_ts);
            }
            resp_free(&r);
            /* details and subtasks of every checkpoint */
            for (int h = 0; h < j->nh; h++) {
                snprintf(path, sizeof path, "/v1/jobs/%s/checkpoints/details/%lld", j->id, (long long)j->h[h].id);
                get(path, &r);
                CHECK_EQ(r.status, 200);
                CHECK(checkpoint_ok(r.json, j, h, true));
                resp_free(&r);
                for (int v = 0, from = 0; v < j->nv; from += j->v[v++].parallelism) {
                    snprintf(path, sizeof path, "/jobs/%s/checkpoints/details/%lld/subtasks/%s", j->id,
                             (long long)j->h[h].id, j->v[v].id);
                    get(path, &r);
                    CHECK_EQ(r.status, 200);
                    o = r.json;
                    CHECK(schema_ok(o, TASK, "subtask details") && schema_ok(o, SUBTASK_DETAILS_EXTRA, "subtask details"));
                    ragg_t va = ref_agg(j, h, from, from + j->v[v].parallelism);
                    CHECK(GI(o, "state_size") == va.state && GI(o, "num_acknowledged_subtasks") == va.acked &&
                          GI(o, "num_subtasks") == va.n && GI(o, "latest_ack_timestamp") == va.latest);
                    json_t *subs = json_object_get(o, "subtasks");
                    CHECK_EQ(json_array_size(subs), j->v[v].parallelism);
                    int64_t sv[9][4];
                    int n = 0;
                    for (int s = 0; s < j->v[v].parallelism; s++) {
                        const sl_rest_ckpt_subtask_t *t = &j->sub[h][from + s];
                        json_t *x = json_array_get(subs, (size_t)s);
                        CHECK_EQ(GI(x, "index"), s);
                        if (!t->acked) {
                            CHECK(schema_ok(x, SUBTASK_PENDING, "pending subtask"));
                            CHECK_STR(GS(x, "status"), "pending_or_failed");
                            continue;
                        }
                        CHECK(schema_ok(x, SUBTASK_COMPLETED, "completed subtask"));
                        CHECK(schema_ok(json_object_get(x, "checkpoint"), DURATION, "subtask checkpoint"));
                        CHECK(schema_ok(json_object_get(x, "alignment"), ALIGNMENT, "subtask alignment"));
                        json_t *du = json_object_get(x, "checkpoint"), *al = json_object_get(x, "alignment");
                        CHECK_STR(GS(x, "status"), "completed");
                        CHECK(GI(x, "ack_timestamp") == t->ack_timestamp &&
                              GI(x, "end_to_end_duration") == t->ack_timestamp - j->h[h].trigger_timestamp &&
                              GI(x, "state_size") == t->state_size && GI(du, "sync") == t->sync_ms &&
                              GI(du, "async") == t->async_ms && GI(al, "duration") == t->align_ms &&
                              GI(al, "persisted") == t->persisted_data && GI(al, "processed") == t->processed_data &&
                              GI(x, "start_delay") == t->start_delay_ms &&
                              GB(x, "unaligned_checkpoint") == t->unaligned);
                        sv[0][n] = t->checkpointed_size, sv[1][n] = t->state_size;
                        sv[2][n] = t->ack_timestamp - j->h[h].trigger_timestamp;
                        sv[3][n] = t->sync_ms, sv[4][n] = t->async_ms, sv[5][n] = t->processed_data;
                        sv[6][n] = t->persisted_data, sv[7][n] = t->align_ms, sv[8][n] = t->start_delay_ms;
                        n++;
                    }
                    json_t *su = json_object_get(o, "summary");
                    CHECK(summary_ok(json_object_get(su, "state_size"), sv[1], n, "subtasks state_size"));
                    CHECK(summary_ok(json_object_get(su, "checkpointed_size"), sv[0], n, "subtasks checkpointed_size"));
                    CHECK(summary_ok(json_object_get(su, "end_to_end_duration"), sv[2], n, "subtasks e2e"));
                    json_t *cd = json_object_get(su, "checkpoint_duration"), *sa = json_object_get(su, "alignment");
                    CHECK(summary_ok(json_object_get(cd, "sync"), sv[3], n, "sync"));
                    CHECK(summary_ok(json_object_get(cd, "async"), sv[4], n, "async"));
                    CHECK(summary_ok(json_object_get(sa, "processed"), sv[5], n, "processed"));
                    CHECK(summary_ok(json_object_get(sa, "persisted"), sv[6], n, "persisted"));
                    CHECK(summary_ok(json_object_get(sa, "duration"), sv[7], n, "alignment duration"));
                    CHECK(summary_ok(json_object_get(su, "start_delay"), sv[8], n, "start_delay"));
                    resp_free(&r);
                }
            }
        }
    }
}

TEST(checkpoint_errors) {
    fill_all();
    const fjob_t *j = &F.jobs[0];
    char path[512];
    resp_t r;
    /* an id no longer kept */
    int64_t gone = j->nh ? j->h[j->nh - 1].id + 1000 : 77;
    snprintf(path, sizeof path, "/jobs/%s/checkpoints/details/%lld", j->id, (long long)gone);
    get(path, &r);
    CHECK_EQ(r.status, 404);
    CHECK(error_of(&r) && strstr(error_of(&r), "Could not find checkpointing statistics for checkpoint"));
    resp_free(&r);
    snprintf(path, sizeof path, "/jobs/%s/checkpoints/details/12x", j->id);
    get(path, &r);
    CHECK_EQ(r.status, 400);
    CHECK(error_of(&r) && strstr(error_of(&r), "checkpointid"));
    resp_free(&r);
    snprintf(path, sizeof path, "/jobs/%s/checkpoints/details/-3", j->id);
    get(path, &r);
    CHECK_EQ(r.status, 400);
    resp_free(&r);
    if (j->nh) {
        snprintf(path, sizeof path, "/jobs/%s/checkpoints/details/%lld/subtasks/%s", j->id, (long long)j->h[0].id,
                 "00000000000000000000000000000000");
        get(path, &r);
        CHECK_EQ(r.status, 404);
        resp_free(&r);
    }
    /* unknown job; a job that does not checkpoint */
    get("/jobs/0123456789abcdef0123456789abcdef/checkpoints", &r);
    CHECK_EQ(r.status, 404);
    CHECK(error_of(&r) && strstr(error_of(&r), "not found"));
    resp_free(&r);
    snprintf(path, sizeof path, "/jobs/%s/checkpoints", F.jobs[NJOBS - 1].id);
    get(path, &r);
    CHECK_EQ(r.status, 404);
    CHECK(error_of(&r) && strstr(error_of(&r), "not enabled"));
    resp_free(&r);
    snprintf(path, sizeof path, "/jobs/%s/checkpoints/config", F.jobs[NJOBS - 1].id);
    get(path, &r);
    CHECK_EQ(r.status, 404);
    resp_free(&r);
    /* paths that are not routes */
    static const char *const bad[] = {"/jobs/%s/checkpoints/details", "/jobs/%s/checkpoints/details/1/subtasks",
                                      "/jobs/%s/checkpoints/details/1/tasks/x", "/jobs/%s/checkpoints/config/x",
                                      "/jobs/%s/exceptions/1", "/jobs/%s/checkpoints/", "/jobs/%s/nothing",
                                      "/jobs/%s/checkpoints/details/1/subtasks/x/y"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(path, sizeof path, bad[i], j->id);
        get(path, &r);
        CHECK_EQ(r.status, 404);
        CHECK(error_of(&r) != NULL);
        resp_free(&r);
    }
}

TEST(configs_and_exceptions) {
    for (int round = 0; round < 10; round++) {
        fill_all();
        for (int ji = 0; ji < NJOBS; ji++) {
            const fjob_t *j = &F.jobs[ji];
            char path[256];
            resp_t r;
            if (j->ckpt_enabled) {
                snprintf(path, sizeof path, "/jobs/%s/checkpoints/config", j->id);
                get(path, &r);
                CHECK_EQ(r.status, 200);
                json_t *o = r.json;
                CHECK(schema_ok(o, CKPT_CONFIG, "checkpoint config"));
                json_t *ex = json_object_get(o, "externalization");
                CHECK(schema_ok(ex, EXTERNALIZATION, "externalization"));
                const sl_rest_ckpt_config_t *c = &j->cc;
                CHECK_STR(GS(o, "mode"), c->exactly_once ? "exactly_once" : "at_least_once");
                CHECK(GI(o, "interval") == c->interval && GI(o, "timeout") == c->timeout &&
                      GI(o, "min_pause") == c->min_pause && GI(o, "max_concurrent") == c->max_concurrent &&
                      GB(ex, "enabled") == c->externalized && GB(ex, "delete_on_cancellation") == c->delete_on_cancellation &&
                      GB(o, "unaligned_checkpoints") == c->unaligned &&
                      GI(o, "tolerable_failed_checkpoints") == c->tolerable_failed &&
                      GI(o, "aligned_checkpoint_timeout") == c->aligned_checkpoint_timeout &&
                      GB(o, "checkpoints_after_tasks_finish") == c->after_tasks_finish);
                CHECK_STR(GS(o, "state_backend"), c->state_backend);
                CHECK_STR(GS(o, "checkpoint_storage"), c->checkpoint_storage);
                resp_free(&r);
            }
            snprintf(path, sizeof path, "/jobs/%s/config", j->id);
            get(path, &r);
            CHECK_EQ(r.status, 200);
            CHECK(schema_ok(r.json, JOB_CONFIG, "job config"));
            json_t *ec = json_object_get(r.json, "execution-config");
            CHECK(schema_ok(ec, EXEC_CONFIG, "execution-config"));
            CHECK_STR(GS(r.json, "jid"), j->id);
            CHECK_STR(GS(r.json, "name"), j->jc.name);
            CHECK_STR(GS(ec, "restart-strategy"), j->jc.restart_strategy);
            CHECK_STR(GS(ec, "execution-mode"), "PIPELINED");
            CHECK(GI(ec, "job-parallelism") == j->jc.parallelism && GB(ec, "object-reuse-mode") == j->jc.object_reuse);
            json_t *uc = json_object_get(ec, "user-config");
            CHECK_EQ(json_object_size(uc), j->jc.nuser_config);
            for (int k = 0; k < j->jc.nuser_config; k++) CHECK_STR(GS(uc, j->kv[k].key), j->kv[k].value);
            resp_free(&r);
            /* exceptions, whole and truncated */
            for (int max = -1; max <= j->nexc + 1; max++) {
                if (max < 0) snprintf(path, sizeof path, "/jobs/%s/exceptions", j->id);
                else snprintf(path, sizeof path, "/jobs/%s/exceptions?maxExceptions=%d", j->id, max);
                get(path, &r);
                CHECK_EQ(r.status, 200);
                json_t *o = r.json;
                CHECK(schema_ok(o, EXCEPTIONS, "exceptions"));
                json_t *eh = json_object_get(o, "exceptionHistory");
                CHECK(schema_ok(eh, HISTORY, "exceptionHistory"));
                int keep = max >= 0 && max < j->nexc ? max : j->nexc;
                json_t *en = json_object_get(eh, "entries");
                CHECK_EQ(json_array_size(en), keep);
                CHECK(GB(eh, "truncated") == (keep < j->nexc));
                for (int k = 0; k < keep; k++) { /* newest first */
                    const sl_rest_exception_t *e = &j->exc[j->nexc - 1 - k];
                    json_t *x = json_array_get(en, (size_t)k);
                    CHECK(schema_ok(x, ROOT_EXCEPTION, "exception entry"));
                    CHECK_STR(GS(x, "exceptionName"), e->name);
                    CHECK_STR(GS(x, "stacktrace"), e->stacktrace);
                    CHECK_EQ(GI(x, "timestamp"), e->timestamp);
                    const char *want[3] = {e->task_name, e->location, e->tm_id};
                    const char *keys[3] = {"taskName", "location", "taskManagerId"};
                    for (int f = 0; f < 3; f++) {
                        json_t *v = json_object_get(x, keys[f]);
                        if (want[f][0]) CHECK(json_is_string(v) && !strcmp(json_string_value(v), want[f]));
                        else CHECK(json_is_null(v));
                    }
                }
                json_t *all = json_object_get(o, "all-exceptions");
                if (j->nexc == 0) {
                    CHECK(json_is_null(json_object_get(o, "root-exception")));
                    CHECK_EQ(json_array_size(all), 0);
                } else {
                    CHECK_STR(GS(o, "root-exception"), j->exc[j->nexc - 1].stacktrace);
                    CHECK_EQ(GI(o, "timestamp"), j->exc[j->nexc - 1].timestamp);
                    CHECK(schema_ok(json_array_get(all, 0), ALL_EXCEPTION, "all-exceptions"));
                }
                resp_free(&r);
            }
        }
    }
    resp_t r;
    char path[256];
    snprintf(path, sizeof path, "/jobs/%s/exceptions?maxExceptions=-1", F.jobs[0].id);
    get(path, &r);
    CHECK_EQ(r.status, 400);
    CHECK(error_of(&r) && strstr(error_of(&r), "maxExceptions"));
    resp_free(&r);
    snprintf(path, sizeof path, "/jobs/%s/exceptions?maxExceptions=x", F.jobs[0].id);
    get(path, &r);
    CHECK_EQ(r.status, 400);
    resp_free(&r);
    get("/jobs/ffffffffffffffffffffffffffffffff/config", &r);
    CHECK_EQ(r.status, 404);
    resp_free(&r);
    get("/jobs/ffffffffffffffffffffffffffffffff/exceptions", &r);
    CHECK_EQ(r.status, 404);
    resp_free(&r);
}

/* The operation of trigger tid, as the fake will answer it. */
static void set_op(const char *tid, bool done, int64_t id, const char *loc, const char *fail) {
    pthread_mutex_lock(&F.mu);
    for (int i = 0; i < F.nops; i++)
        if (!strcmp(F.ops[i].tid, tid)) {
            F.ops[i].op.done = done;
            F.ops[i].op.checkpoint_id = id;
            snprintf(F.ops[i].op.location, sizeof F.ops[i].op.location, "%s", loc ? loc : "");
            snprintf(F.ops[i].op.failure, sizeof F.ops[i].op.failure, "%s", fail ? fail : "");
        }
    pthread_mutex_unlock(&F.mu);
}

/* The operation's answer against what was set. */
static bool operation_ok(const json_t *o, bool done, bool savepoint, int64_t id, const char *loc, const char *fail) {
    json_t *st = json_object_get(o, "status");
    if (!schema_ok(st, QUEUE_STATUS, "status")) return false;
    if (!done) return !strcmp(GS(st, "id"), "IN_PROGRESS") && !json_object_get(o, "operation");
    json_t *op = json_object_get(o, "operation");
    if (strcmp(GS(st, "id"), "COMPLETED") || !json_is_object(op)) return false;
    if (fail) {
        json_t *fc = json_object_get(op, "failure-cause");
        return schema_ok(fc, FAILURE_CAUSE, "failure-cause") && strstr(GS(fc, "stack-trace"), fail) &&
               !json_object_get(op, "location");
    }
    if (savepoint) return json_is_string(json_object_get(op, "location")) && !strcmp(GS(op, "location"), loc);
    return json_is_integer(json_object_get(op, "checkpointId")) && GI(op, "checkpointId") == id;
}

TEST(triggers_and_operations) {
    fill_all();
    const fjob_t *j = &F.jobs[0];
    char path[512], tid[65];
    resp_t r;
    for (int round = 0; round < 30; round++) {
        int kind = rnd(3); /* checkpoint, savepoint, stop */
        const char *what = kind == 0 ? "checkpoints" : kind == 1 ? "savepoints" : "stop";
        char body[1024] = "";
        bool cancel = rnd(2), drain = rnd(2), native = rnd(2), has_dir = rnd(2);
        char dirname[256];
        snprintf(dirname, sizeof dirname, "/tmp/savepoints/sp-%d", rnd(1000));
        if (kind == 1)
            snprintf(body, sizeof body, "{\"cancel-job\": %s, \"formatType\": \"%s\"%s%s%s}", cancel ? "true" : "false",
                     native ? "NATIVE" : "CANONICAL", has_dir ? ", \"target-directory\": \"" : "", has_dir ? dirname : "",
                     has_dir ? "\"" : "");
        else if (kind == 2)
            snprintf(body, sizeof body, "{\"drain\": %s%s%s%s%s}", drain ? "true" : "false",
                     has_dir ? ", \"targetDirectory\": \"" : "", has_dir ? dirname : "", has_dir ? "\"" : "",
                     native ? ", \"formatType\": \"NATIVE\"" : "");
        else if (rnd(2)) snprintf(body, sizeof body, "{\"checkpointType\": \"FULL\"}");
        snprintf(path, sizeof path, "/jobs/%s/%s", j->id, what);
        post(path, body[0] ? body : NULL, &r);
        CHECK_EQ(r.status, 202);
        CHECK(schema_ok(r.json, TRIGGER_RESPONSE, "trigger response"));
        snprintf(tid, sizeof tid, "%s", GS(r.json, "request-id"));
        resp_free(&r);
        if (kind) {
            pthread_mutex_lock(&F.mu);
            sl_rest_savepoint_req_t sp = F.last_sp;
            bool null_target = F.last_target_null;
            char target[4096];
            snprintf(target, sizeof target, "%s", F.last_target);
            pthread_mutex_unlock(&F.mu);
            CHECK(sp.stop == (kind == 2) && sp.native == native);
            CHECK(kind == 2 ? sp.drain == drain && !sp.cancel_job : sp.cancel_job == cancel && !sp.drain);
            CHECK(null_target == !has_dir);
            if (has_dir) CHECK_STR(target, dirname);
        }
        const char *opath = kind == 0 ? "checkpoints" : "savepoints";
        snprintf(path, sizeof path, "/jobs/%s/%s/%s", j->id, opath, tid);
        get(path, &r);
        CHECK_EQ(r.status, 200);
        CHECK(operation_ok(r.json, false, kind != 0, 0, NULL, NULL));
        resp_free(&r);
        bool fail = rnd(3) == 0;
        int64_t cid = 1 + rnd(1000);
        set_op(tid, true, cid, kind ? dirname : NULL, fail ? "checkpoint 7 expired before completing" : NULL);
        get(path, &r);
        CHECK_EQ(r.status, 200);
        CHECK(operation_ok(r.json, true, kind != 0, cid, dirname, fail ? "expired before completing" : NULL));
        resp_free(&r);
        /* the trigger id under another job is unknown */
        snprintf(path, sizeof path, "/jobs/%s/%s/%s", F.jobs[1].id, opath, tid);
        get(path, &r);
        CHECK_EQ(r.status, 404);
        resp_free(&r);
    }
    snprintf(path, sizeof path, "/jobs/%s/savepoints/0123456789abcdef0123456789abcdef", j->id);
    get(path, &r);
    CHECK_EQ(r.status, 404);
    resp_free(&r);
    snprintf(path, sizeof path, "/jobs/%s/checkpoints/..%%2f..", j->id);
    get(path, &r);
    CHECK_EQ(r.status, 404);
    resp_free(&r);
    /* a job that is not running: 409 */
    snprintf(path, sizeof path, "/jobs/%s/savepoints", F.jobs[NJOBS - 1].id);
    post(path, "{}", &r);
    CHECK_EQ(r.status, 409);
    resp_free(&r);
    post("/jobs/0123456789abcdef0123456789abcdef/checkpoints", NULL, &r);
    CHECK_EQ(r.status, 404);
    resp_free(&r);
}

TEST(bad_requests) {
    fill_all();
    const fjob_t *j = &F.jobs[0];
    char path[512];
    resp_t r;
    int before;
    pthread_mutex_lock(&F.mu);
    before = F.nsavepoints + F.ncheckpoints;
    pthread_mutex_unlock(&F.mu);
    /* bodies that are refused, naming the field */
    static const struct {
        const char *what, *body, *field;
    } bad[] = {
        {"savepoints", "{\"target-directory\": \"relative/dir\"}", "target-directory"},
        {"savepoints", "{\"target-directory\": \"/a/../b\"}", "target-directory"},
        {"savepoints", "{\"target-directory\": \"/a/..\"}", "target-directory"},
        {"savepoints", "{\"target-directory\": \"\"}", "target-directory"},
        {"savepoints", "{\"target-directory\": 7}", "target-directory"},
        {"savepoints", "{\"cancel-job\": \"yes\"}", "cancel-job"},
        {"savepoints", "{\"formatType\": \"BINARY\"}", "formatType"},
        {"savepoints", "{\"formatType\": 1}", "formatType"},
        {"savepoints", "{\"triggerId\": 12}", "triggerId"},
        {"stop", "{\"targetDirectory\": \"../up\"}", "targetDirectory"},
        {"stop", "{\"targetDirectory\": \"/x/../../etc\"}", "targetDirectory"},
        {"stop", "{\"targetDirectory\": [\"/x\"]}", "targetDirectory"},
        {"stop", "{\"drain\": 1}", "drain"},
        {"checkpoints", "{\"checkpointType\": \"SOMETIMES\"}", "checkpointType"},
        {"checkpoints", "{\"checkpointType\": false}", "checkpointType"},
        {"savepoints", "{\"target-directory\": \"/x\"", "JSON"},
        {"stop", "[1, 2]", "JSON object"},
        {"checkpoints", "nonsense", "JSON"},
        {"savepoints", "{\"cancel-job\": true, \"cancel-job\": false}", "JSON"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        snprintf(path, sizeof path, "/jobs/%s/%s", j->id, bad[i].what);
        post(path, bad[i].body, &r);
        CHECK_EQ(r.status, 400);
        CHECK(error_of(&r) && strstr(error_of(&r), bad[i].field));
        resp_free(&r);
    }
    /* directories that are fine: ".." only as a whole component is refused */
    snprintf(path, sizeof path, "/jobs/%s/savepoints", j->id);
    post(path, "{\"target-directory\": \"/sp/a..b/..c/d..\"}", &r);
    CHECK_EQ(r.status, 202);
    resp_free(&r);
    pthread_mutex_lock(&F.mu);
    int after = F.nsavepoints + F.ncheckpoints;
    pthread_mutex_unlock(&F.mu);
    CHECK_EQ(after, before + 1); /* no refused request reached the provider */
    /* wrong methods */
    static const struct {
        const char *method, *fmt;
    } wrong[] = {{"GET", "/jobs/%s/savepoints"}, {"GET", "/jobs/%s/stop"}, {"DELETE", "/jobs/%s/checkpoints"},
                 {"PUT", "/jobs/%s/checkpoints"}, {"POST", "/jobs/%s/checkpoints/config"},
                 {"POST", "/jobs/%s/exceptions"}, {"POST", "/jobs/%s/config"}, {"PATCH", "/jobs/%s/stop"},
                 {"POST", "/jobs/%s/savepoints/0123"}, {"DELETE", "/jobs/%s/checkpoints/details/1"}};
    for (size_t i = 0; i < sizeof wrong / sizeof *wrong; i++) {
        snprintf(path, sizeof path, wrong[i].fmt, j->id);
        http(wrong[i].method, path, NULL, 0, &r);
        CHECK_EQ(r.status, 405);
        CHECK(error_of(&r) != NULL);
        resp_free(&r);
    }
    /* a huge body */
    size_t big = (1 << 20) + 100;
    char *huge = malloc(big + 1);
    memset(huge, ' ', big);
    huge[0] = '{';
    huge[big - 1] = '}';
    huge[big] = 0;
    snprintf(path, sizeof path, "/jobs/%s/savepoints", j->id);
    post(path, huge, &r);
    free(huge);
    CHECK_EQ(r.status, 413);
    resp_free(&r);
    /* a job id that is not one */
    post("/jobs/..%2f..%2fetc/savepoints", "{}", &r);
    CHECK_EQ(r.status, 404);
    resp_free(&r);
}

/* 64 clients x 50 requests, each a random path of this file with its
 * expected status. */
static const fjob_t *cj;
static void *client(void *arg) {
    uint64_t s = (uint64_t)(uintptr_t)arg * 7919;
    int *bad = sl_calloc(1, sizeof *bad);
    for (int i = 0; i < 50; i++) {
        char path[512];
        int want;
        resp_t r;
        switch (rng_next(&s) % 6) {
        case 0: snprintf(path, sizeof path, "/jobs/%s/checkpoints", cj->id), want = 200; get(path, &r); break;
        case 1: snprintf(path, sizeof path, "/jobs/%s/checkpoints/config", cj->id), want = 200; get(path, &r); break;
        case 2: snprintf(path, sizeof path, "/jobs/%s/exceptions", cj->id), want = 200; get(path, &r); break;
        case 3: snprintf(path, sizeof path, "/jobs/%s/checkpoints", cj->id), want = 202; post(path, NULL, &r); break;
        case 4: snprintf(path, sizeof path, "/jobs/%s/savepoints", cj->id), want = 400; post(path, "{\"target-directory\":\"x\"}", &r); break;
        default: snprintf(path, sizeof path, "/jobs/%s/checkpoints/details/999999", cj->id), want = 404; get(path, &r); break;
        }
        if (r.status != want) (*bad)++;
        resp_free(&r);
    }
    return bad;
}

TEST(concurrent_clients) {
    fill_all();
    cj = &F.jobs[0];
    pthread_t t[64];
    for (int i = 0; i < 64; i++) CHECK(pthread_create(&t[i], NULL, client, (void *)(uintptr_t)(i + 1)) == 0);
    int bad = 0;
    for (int i = 0; i < 64; i++) {
        void *res;
        pthread_join(t[i], &res);
        bad += *(int *)res;
        sl_free(res);
    }
    CHECK_EQ(bad, 0);
    resp_t r;
    get("/jobs/overview", &r); /* still answering */
    CHECK(r.status == 200 || r.status == 500);
    resp_free(&r);
}

TEST(percentile_definition) {
    for (int round = 0; round < 200; round++) {
        int n = rnd(30);
        int64_t v[30], s[30];
        for (int i = 0; i < n; i++) v[i] = rnd(1000) - 300;
        memcpy(s, v, sizeof s);
        for (int i = 1; i < n; i++) /* insertion sort */
            for (int k = i; k > 0 && s[k - 1] > s[k]; k--) {
                int64_t t = s[k];
                s[k] = s[k - 1];
                s[k - 1] = t;
            }
        static const double P[] = {1, 25, 50, 90, 95, 99, 99.9};
        for (int k = 0; k < 7; k++) {
            CHECK_DBL(sl_rest_percentile(s, n, P[k]), ref_pct(v, n, P[k]));
        }
    }
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    const char *s = getenv("SLUICE_TEST_SEED");
    if (s) seed = strtoull(s, NULL, 10);
    fprintf(stderr, "seed %llu\n", (unsigned long long)seed);
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/artifacts", sl_test_tmpdir());
    sl_rest_config_t c;
    sl_rest_config_defaults(&c);
    c.port = 0;
    c.artifact_dir = dir;
    sl_rest_provider_t p = {.checkpoints = p_checkpoints,
                            .checkpoint_config = p_ckpt_config,
                            .job_config = p_job_config,
                            .exceptions = p_exceptions,
                            .savepoint = p_savepoint,
                            .checkpoint = p_checkpoint,
                            .operation = p_operation};
    sl_rest_t *srv = NULL;
    char err[512];
    if (sl_rest_new(&c, &p, &srv, err, sizeof err)) {
        fprintf(stderr, "cannot start the server: %s\n", err);
        return 1;
    }
    port = sl_rest_port(srv);
    RUN(percentile_definition);
    RUN(checkpoint_statistics);
    RUN(checkpoint_errors);
    RUN(configs_and_exceptions);
    RUN(triggers_and_operations);
    RUN(bad_requests);
    RUN(concurrent_clients);
    sl_rest_destroy(srv);
    TEST_MAIN_END();
}
