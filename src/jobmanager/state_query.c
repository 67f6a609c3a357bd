/*
 * state_query.c — the JobManager side of a query of a running job's keyed
 * state (state_query.h): the key parsed by the plan's key description, the
 * owning subtask found by key group, a STATE_QUERY sent to its
 * TaskManager, and the answer waited for by request id and turned into
 * JSON with the same code as `sluice state read`.
 *
 * Pending queries live in one process-wide table (a list under a mutex):
 * an answer is routed by its request id alone, so the dispatcher and the
 * embedded transport deliver it without knowing which job master asked.
 */
#include "jobmanager/state_query.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "checkpoint/state_reader.h"
#include "sluice/row.h"
#include "state/key_group.h"

/* ---- the key ---- */

/* One field's value from text (single-field keys: the text itself). */
static int set_text(sl_row_writer_t *w, sl_type_t t, const char *name, const char *text, char *err, size_t errlen) {
    char *end = NULL;
    errno = 0;
    switch (t) {
    case SL_VARCHAR: sl_rw_set_str(w, 0, text, (uint32_t)strlen(text)); return 0;
    case SL_BYTES: sl_rw_set_bytes(w, 0, text, (uint32_t)strlen(text)); return 0;
    case SL_BOOLEAN:
        if (strcmp(text, "true") && strcmp(text, "false"))
            return sl_errf(err, errlen, SL_EINVAL, "field '%s' (BOOLEAN): '%s' is not true or false", name, text);
        sl_rw_set_bool(w, 0, text[0] == 't');
        return 0;
    case SL_DOUBLE: {
        double d = strtod(text, &end);
        if (!text[0] || *end || errno || !isfinite(d))
            return sl_errf(err, errlen, SL_EINVAL, "field '%s' (DOUBLE): '%s' is not a finite number", name, text);
        sl_rw_set_f64(w, 0, d);
        return 0;
    }
    default: {
        long long v = strtoll(text, &end, 10);
        bool ok = text[0] && text[0] != ' ' && text[0] != '+' && !*end && !errno;
        if (ok && t == SL_INT && (v < INT32_MIN || v > INT32_MAX)) ok = false;
        if (!ok)
            return sl_errf(err, errlen, SL_EINVAL, "field '%s' (%s): '%s' is not a decimal integer%s", name,
                           sl_type_name(t), text, t == SL_INT ? " of 32 bits" : "");
        if (t == SL_INT)
            sl_rw_set_i32(w, 0, (int32_t)v);
        else
            sl_rw_set_i64(w, 0, (int64_t)v);
        return 0;
    }
    }
}

/* One field's value from a JSON value (keys of several fields). */
static int set_json(sl_row_writer_t *w, int i, const sl_schema_t *s, const json_t *v, char *err, size_t errlen) {
    sl_type_t t = sl_schema_field_type(s, i);
    const char *name = sl_schema_field_name(s, i);
    if (json_is_null(v)) {
        if (!sl_schema_field_nullable(s, i))
            return sl_errf(err, errlen, SL_EINVAL, "field '%s' (%s NOT NULL): null given", name, sl_type_name(t));
        sl_rw_set_null(w, i);
        return 0;
    }
    bool ok = true;
    switch (t) {
    case SL_VARCHAR:
    case SL_BYTES:
        if (!(ok = json_is_string(v))) break;
        if (t == SL_VARCHAR)
            sl_rw_set_str(w, i, json_string_value(v), (uint32_t)json_string_length(v));
        else
            sl_rw_set_bytes(w, i, json_string_value(v), (uint32_t)json_string_length(v));
        break;
    case SL_BOOLEAN:
        if ((ok = json_is_boolean(v))) sl_rw_set_bool(w, i, json_is_true(v));
        break;
    case SL_DOUBLE:
        if ((ok = json_is_number(v))) sl_rw_set_f64(w, i, json_number_value(v));
        break;
    default:
        ok = json_is_integer(v) &&
             (t != SL_INT || (json_integer_value(v) >= INT32_MIN && json_integer_value(v) <= INT32_MAX));
        if (ok && t == SL_INT) sl_rw_set_i32(w, i, (int32_t)json_integer_value(v));
        else if (ok) sl_rw_set_i64(w, i, (int64_t)json_integer_value(v));
        break;
    }
    if (ok) return 0;
    return sl_errf(err, errlen, SL_EINVAL, "field '%s' (%s): element %d of the key is not a %s", name,
                   sl_type_name(t), i,
                   t == SL_VARCHAR || t == SL_BYTES ? "string"
                   : t == SL_BOOLEAN                ? "boolean"
                   : t == SL_DOUBLE                 ? "number"
                                                    : (t == SL_INT ? "32-bit integer" : "integer"));
}

int sl_sq_parse_key(const char *desc, const char *text, sl_buf_t *out, char *err, size_t errlen) {
    out->len = 0;
    if (!desc || !desc[0]) return sl_errf(err, errlen, SL_EINVAL, "the operator is not keyed");
    if (!strcmp(desc, "function")) { /* a key function's bytes: the text is the key */
        sl_buf_append(out, text, strlen(text));
        return 0;
    }
    bool one = !strncmp(desc, "field ", 6);
    if (!one && strncmp(desc, "fields ", 7))
        return sl_errf(err, errlen, SL_EINVAL, "the plan describes the key as '%s', which this build does not know", desc);
    char perr[256];
    sl_schema_t *s = sl_schema_parse(desc + (one ? 6 : 7), perr, sizeof perr);
    if (!s) return sl_errf(err, errlen, SL_EINVAL, "the plan's key schema '%s' does not parse: %s", desc, perr);
    int n = sl_schema_field_count(s);
    sl_row_writer_t w;
    sl_rw_init(&w);
    sl_rw_begin(&w, s);
    int rc = 0;
    json_t *arr = NULL;
    if (one) {
        rc = n == 1 ? set_text(&w, sl_schema_field_type(s, 0), sl_schema_field_name(s, 0), text, err, errlen)
                    : sl_errf(err, errlen, SL_EINVAL, "the plan's key '%s' has %d fields, not 1", desc, n);
    } else {
        json_error_t je;
        arr = json_loads(text, JSON_DECODE_ANY, &je);
        if (!arr || !json_is_array(arr) || (int)json_array_size(arr) != n) {
            char ddl[1024];
            sl_schema_format(s, ddl, sizeof ddl);
            rc = sl_errf(err, errlen, SL_EINVAL,
                         "the key has %d fields (%s): give them as a JSON array of %d values, e.g. [\"a\",1]", n, ddl,
                         n);
        }
        for (int i = 0; rc == 0 && i < n; i++) rc = set_json(&w, i, s, json_array_get(arr, (size_t)i), err, errlen);
    }
    if (rc == 0) {
        sl_row_t row = sl_rw_row(&w);
        for (int i = 0; i < n; i++) {
            uint32_t fl = 0;
            const uint8_t *p = sl_row_field_key(&row, i, &fl);
            if (one) { /* sl_key_by: the field's key bytes */
                sl_buf_append(out, p, fl);
                break;
            }
            /* sl_key_by_fields (api/fields.c): a marker (0 NULL, 1 a value),
             * for VARCHAR/BYTES a u32 little-endian length, the bytes */
            uint8_t mark = sl_row_is_null(&row, i) ? 0 : 1;
            sl_buf_append(out, &mark, 1);
            if (!mark) continue;
            sl_type_t t = sl_schema_field_type(s, i);
            if (t == SL_VARCHAR || t == SL_BYTES) {
                uint8_t l[4];
                sl_st32(l, fl);
                sl_buf_append(out, l, 4);
            }
            sl_buf_append(out, p, fl);
        }
        if (out->len > SL_MSG_STATE_QUERY_MAX_KEY)
            rc = sl_errf(err, errlen, SL_EINVAL, "the key is %zu bytes, over the maximum of %d", out->len,
                         SL_MSG_STATE_QUERY_MAX_KEY);
    }
    json_decref(arr);
    sl_rw_free(&w);
    sl_schema_unref(s);
    return rc;
}

/* ---- pending queries ---- */

typedef struct pending {
    uint64_t id;
    sl_msg_t *res;               /* the answer, once it came */
    struct pending *next;
} pending_t;

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
static pending_t *g_pending;
static uint64_t g_next_id;

void sl_sq_deliver(sl_msg_t *m) {
    pthread_mutex_lock(&g_mu);
    pending_t *p = g_pending;
    while (p && p->id != m->u.state_query_result.request_id) p = p->next;
    if (p && !p->res) {
        p->res = m;
        m = NULL;
        pthread_cond_broadcast(&g_cv);
    }
    pthread_mutex_unlock(&g_mu);
    sl_msg_destroy(m); /* nobody waits for it (any more) */
}

/* ---- answers ---- */

static void answer_json(sl_sq_answer_t *out, int http, json_t *j) {
    char *s = json_dumps(j, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(j);
    out->http = http;
    out->body = sl_strdup(s ? s : "{}");
    free(s);
}

static void answer_error(sl_sq_answer_t *out, int http, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void answer_error(sl_sq_answer_t *out, int http, const char *fmt, ...) {
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    json_t *e = json_array();
    json_array_append_new(e, json_string(msg)); /* NULL (not UTF-8: a key's bytes quoted) is dropped */
    if (!json_array_size(e)) json_array_append_new(e, json_string("state query refused"));
    answer_json(out, http, json_pack("{s:o}", "errors", e));
}

/* The uids of the plan's keyed nodes, for "no such operator". */
static void keyed_uids(const sl_plan_t *p, char *buf, size_t cap) {
    size_t o = 0;
    buf[0] = 0;
    for (int i = 0; i < p->nnodes && o < cap; i++)
        if (p->nodes[i].key && p->nodes[i].key[0])
            o += (size_t)snprintf(buf + o, cap - o, "%s'%s'", o ? ", " : "", p->nodes[i].uid);
    if (!o) snprintf(buf, cap, "(none)");
}

/* The key as it came, for messages (a few bytes of it). */
static const char *shown(const char *key) {
    return strlen(key) > 80 ? "(the key given)" : key;
}

static int status_http(int st) {
    switch (st) {
    case SL_SQ_NO_OPERATOR:
    case SL_SQ_NO_STATE: return 404;
    case SL_SQ_NOT_RUNNING: return 409;
    default: return 500;
    }
}

void sl_sq_query(sl_job_master_t *jm, const sl_sq_request_t *rq, sl_sq_answer_t *out) {
    memset(out, 0, sizeof *out);
    const sl_plan_t *p = sl_jm_plan(jm);
    const char *state = rq->state && rq->state[0] ? rq->state : NULL;
    char err[1500];
    if (!rq->uid || !rq->uid[0]) return answer_error(out, 400, "no operator uid given (uid=...)");
    if (!rq->key) return answer_error(out, 400, "no key given (key=...)");
    int node = -1;
    for (int i = 0; i < p->nnodes && node < 0; i++)
        if (!strcmp(p->nodes[i].uid, rq->uid)) node = i;
    if (node < 0) {
        keyed_uids(p, err, sizeof err);
        return answer_error(out, 404, "job '%s' has no operator with uid '%s'; operators with keyed state: %s",
                            p->job_name, rq->uid, err);
    }
    const sl_plan_node_t *pn = &p->nodes[node];
    if (!pn->key || !pn->key[0]) {
        keyed_uids(p, err, sizeof err);
        return answer_error(out, 404, "operator '%s' of job '%s' is not keyed: it has no keyed state (keyed: %s)",
                            rq->uid, p->job_name, err);
    }
    sl_buf_t key = {0};
    if (sl_sq_parse_key(pn->key, rq->key, &key, err, sizeof err) < 0) {
        sl_buf_free(&key);
        return answer_error(out, 400, "key '%s' of operator '%s': %s", shown(rq->key), rq->uid, err);
    }
    /* the subtask that owns the key's key group */
    int maxp = p->cfg.max_parallelism;
    int kg = sl_kg_of_hash(sl_kg_key_hash(key.p, (uint32_t)key.len), maxp);
    int v = p->vertex_of[node];
    const sl_plan_vertex_t *pv = &p->vertices[v];
    int subtask = sl_kg_operator_index(kg, maxp, pv->parallelism);
    char task_name[600];
    snprintf(task_name, sizeof task_name, "%s (%d/%d)", pv->name, subtask + 1, pv->parallelism);
    sl_jm_taskmanager_t gw;
    int attempt = 0;
    char tm_id[128] = "";
    if (sl_jm_task_gateway(jm, p->first_task[v] + subtask, &gw, &attempt, tm_id, sizeof tm_id, err, sizeof err) < 0) {
        sl_buf_free(&key);
        return answer_error(out, 409, "cannot query subtask %s of job '%s': %s", task_name, p->job_name, err);
    }
    pending_t *me = sl_calloc(1, sizeof *me); /* on the heap: a stale one would be a use after free */
    pthread_mutex_lock(&g_mu);
    me->id = ++g_next_id;
    me->next = g_pending;
    g_pending = me;
    pthread_mutex_unlock(&g_mu);

    sl_msg_t *m = sl_msg_new(SL_MSG_STATE_QUERY);
    sl_msg_state_query_t *q = &m->u.state_query;
    q->job_id = sl_strdup(p->job_id);
    q->attempt = attempt;
    int q_index = p->first_task[v] + subtask;
    q->task = (sl_msg_task_ref_t){v, subtask, q_index};
    q->request_id = me->id;
    q->uid = sl_strdup(rq->uid);
    q->state = sl_strdup(state ? state : "");
    q->key = key; /* moved */
    q->has_namespace = rq->ns != NULL;
    if (rq->ns) sl_buf_append(&q->ns, rq->ns, strlen(rq->ns));
    gw.send(gw.ctx, m);

    int64_t timeout = rq->timeout_ms > 0 ? rq->timeout_ms : SL_SQ_DEFAULT_TIMEOUT_MS;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += timeout / 1000;
    dl.tv_nsec += (timeout % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) {
        dl.tv_sec++;
        dl.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&g_mu);
    while (!me->res && pthread_cond_timedwait(&g_cv, &g_mu, &dl) == 0) {
    }
    for (pending_t **pp = &g_pending; *pp; pp = &(*pp)->next)
        if (*pp == me) {
            *pp = me->next;
            break;
        }
    sl_msg_t *res = me->res;
    pthread_mutex_unlock(&g_mu);
    sl_free(me);
    if (!res)
        return answer_error(out, 504, "subtask %s of job '%s' (on TaskManager %s) did not answer within %lld ms",
                            task_name, p->job_name, tm_id, (long long)timeout);
    const sl_msg_state_query_result_t *r = &res->u.state_query_result;
    if (r->task.index != q_index || r->attempt != attempt || strcmp(r->job_id, p->job_id) != 0) {
        answer_error(out, 502, "TaskManager %s answered for task %d of attempt %d of job '%s', not the subtask %s asked",
                     tm_id, r->task.index, r->attempt, r->job_id, task_name);
        sl_msg_destroy(res);
        return;
    }
    if (r->status != SL_SQ_OK) {
        answer_error(out, status_http(r->status), "%s", r->message);
        sl_msg_destroy(res);
        return;
    }
    sl_state_entries_t *col = sl_state_entries_new(state);
    for (int q = 0; q < pn->nstate_schemas; q++) { /* typed states answer their rows' fields */
        sl_schema_t *sch = sl_schema_parse(pn->state_schemas[q].schema, NULL, 0);
        if (sch) sl_state_entries_set_schema(col, pn->state_schemas[q].name, sch);
        sl_schema_unref(sch);
    }
    int rc = sl_state_entries_add_block(col, maxp, rq->uid, r->key_group, r->block.p, r->block.len, err, sizeof err);
    if (rc == 0 && r->key_group != kg)
        rc = sl_errf(err, sizeof err, SL_EFORMAT, "the answer is for key group %d, the key's is %d", r->key_group, kg);
    if (rc < 0) {
        answer_error(out, 502, "subtask %s on TaskManager %s gave a bad answer: %s", task_name, tm_id, err);
    } else if (!sl_state_entries_count(col)) {
        if (state)
            answer_error(out, 404, "operator '%s' has no value for key '%s' in state '%s'", rq->uid, shown(rq->key),
                         state);
        else
            answer_error(out, 404, "operator '%s' has no value for key '%s' in any of its %d keyed states", rq->uid,
                         shown(rq->key), sl_state_entries_nstates(col));
    } else {
        sl_state_entries_sort(col);
        json_t *entries = json_array();
        for (size_t i = 0; i < sl_state_entries_count(col); i++)
            json_array_append_new(entries, sl_state_entries_json(col, i, SL_STATE_BYTES_AUTO, err, sizeof err));
        answer_json(out, 200, json_pack("{s:o}", "entries", entries));
    }
    sl_state_entries_free(col);
    sl_msg_destroy(res);
}
