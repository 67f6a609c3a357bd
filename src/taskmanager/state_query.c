/*
 * state_query.c — the TaskManager side of a query of a running job's keyed
 * state (state_query.h): the request goes to the task's mailbox, and the
 * task's thread looks the key up in its operator's backend and answers.
 *
 * The answer's block is the canonical keyed-state format (state_backend.h)
 * of the key's key group, holding the queried states (sorted by name) with
 * this key's entries: the one in the queried namespace, or without a
 * namespace every namespace the key has (a window operator's state per
 * window), found by walking the key's key group of each state in the
 * backend (foreach_entry_kg: one key group's share of the operator's state
 * per query, which bounds the time the task spends on it).  A state with
 * TTL answers its live values without their timestamps, and nothing for
 * an expired one (as a read through the state would).
 *
 * The lookup sets the backend's current key; the key the operator had set
 * is put back before the mail returns, so a query between two records
 * changes nothing the operator sees.
 */
#include "taskmanager/state_query.h"

#include <stdio.h>
#include <stdlib.h>

#include "common/common.h"
#include "state/state_backend.h"
#include "taskmanager/task_int.h"

/* An answer must fit a control frame; leave room for the rest. */
#define MAX_BLOCK (SL_MSG_MAX_FRAME - (64u << 10))

/* The request as mail: one allocation (freed with sl_free if never run). */
typedef struct sq_mail {
    void (*send)(void *ctx, sl_msg_t *m);
    void *send_ctx;
    char *job_id, *uid, *state; /* into data */
    int32_t attempt;
    sl_msg_task_ref_t task;
    uint64_t request_id;
    uint8_t *key, *ns;
    uint32_t klen, nslen;
    bool has_ns;
    char data[];
} sq_mail_t;

static sl_msg_t *result(const char *job, int32_t attempt, sl_msg_task_ref_t task, uint64_t id, int status,
                        const char *why) {
    sl_msg_t *m = sl_msg_new(SL_MSG_STATE_QUERY_RESULT);
    sl_msg_state_query_result_t *r = &m->u.state_query_result;
    r->job_id = sl_strdup(job);
    r->attempt = attempt;
    r->task = task;
    r->request_id = id;
    r->status = status;
    r->message = sl_strdup(why ? why : "");
    return m;
}

/* ---- one state's entry for the current key ---- */

typedef struct item {
    const uint8_t *uk, *v;
    uint32_t uklen, vlen;
} item_t;

typedef struct items {
    sl_buf_t bytes;    /* copies of the items' bytes */
    size_t *off;       /* per item: uk offset, uk len, v offset, v len */
    size_t n, cap;
    int64_t ttl_ms, now;
    bool over;         /* more bytes than an answer can hold */
} items_t;

/* Keeps (uk, v), dropping an expired TTL value and its timestamp. */
static void items_add(items_t *it, const void *uk, uint32_t uklen, const void *v, uint32_t vlen) {
    if (it->ttl_ms > 0) {
        if (vlen < SL_TTL_TS_BYTES) return; /* not a TTL value: nothing a read would return */
        int64_t ts = (int64_t)sl_ld64(v);
        if (ts + it->ttl_ms <= it->now) return; /* expired */
        v = (const uint8_t *)v + SL_TTL_TS_BYTES;
        vlen -= SL_TTL_TS_BYTES;
    }
    if (it->bytes.len + uklen + vlen > MAX_BLOCK) {
        it->over = true;
        return;
    }
    if (it->n == it->cap) {
        it->cap = it->cap ? it->cap * 2 : 8;
        it->off = sl_realloc(it->off, it->cap * 4 * sizeof *it->off);
    }
    size_t *o = &it->off[it->n++ * 4];
    o[0] = it->bytes.len;
    o[1] = uklen;
    if (uklen) sl_buf_append(&it->bytes, uk, uklen);
    o[2] = it->bytes.len;
    o[3] = vlen;
    if (vlen) sl_buf_append(&it->bytes, v, vlen);
}

static int on_list(void *c, const void *v, uint32_t len) {
    items_add(c, NULL, 0, v, len);
    return 0;
}

static int on_map(void *c, const void *k, uint32_t klen, const void *v, uint32_t vlen) {
    items_add(c, k, klen, v, vlen);
    return 0;
}

typedef struct chosen {
    int sid;
    const char *name;
    sl_state_kind_t kind;
    int64_t ttl_ms;
} chosen_t;

static int cmp_chosen(const void *a, const void *b) {
    return strcmp(((const chosen_t *)a)->name, ((const chosen_t *)b)->name);
}

/* The live items of state c for the current key in namespace ns. */
static void read_items(sl_keyed_backend_t *kb, const chosen_t *c, const uint8_t *ns, uint32_t nslen, items_t *it) {
    if (c->kind == SL_STATE_VALUE) {
        uint32_t vlen = 0;
        const void *v = kb->ops->get(kb, c->sid, ns, nslen, &vlen);
        if (v) items_add(it, NULL, 0, v, vlen);
    } else if (c->kind == SL_STATE_LIST) {
        kb->ops->list_foreach(kb, c->sid, ns, nslen, on_list, it);
    } else {
        kb->ops->map_foreach(kb, c->sid, ns, nslen, on_map, it);
    }
}

/* The namespaces the queried key has in a state: copies, in one buffer
 * (each as u32 length + bytes). */
typedef struct nslist {
    const uint8_t *key;
    uint32_t klen;
    sl_buf_t b;
    size_t n;
    bool over;
} nslist_t;

static int on_entry(void *c, const void *key, uint32_t klen, const void *ns, uint32_t nslen) {
    nslist_t *l = c;
    if (klen != l->klen || (klen && memcmp(key, l->key, klen) != 0)) return 0;
    if (l->b.len + 4 + nslen > MAX_BLOCK) {
        l->over = true;
        return 1;
    }
    uint8_t len[4];
    sl_st32(len, nslen);
    sl_buf_append(&l->b, len, 4);
    if (nslen) sl_buf_append(&l->b, ns, nslen);
    l->n++;
    return 0;
}

typedef struct nsref {
    const uint8_t *p;
    uint32_t n;
} nsref_t;

static int cmp_ns(const void *a, const void *b) {
    const nsref_t *x = a, *y = b;
    int c = memcmp(x->p, y->p, x->n < y->n ? x->n : y->n);
    return c ? c : (x->n > y->n) - (x->n < y->n);
}

/* Appends state c's part of the block for the current key: its entry in
 * the queried namespace, or (no namespace asked) one entry per namespace
 * the key has, in bytewise order of namespace.  A key's namespaces are
 * found by walking its key group of the state (foreach_entry_kg: that key
 * group's share of the state, never the whole range).  0, or SL_EINVAL
 * when the answer grew too large. */
static int write_state(sl_keyed_backend_t *kb, const chosen_t *c, const sq_mail_t *q, int kg, sl_buf_t *out) {
    int64_t now = c->ttl_ms > 0 ? sl_kb_now_ms(kb) : 0;
    nsref_t one = {q->has_ns ? q->ns : (const uint8_t *)"", q->has_ns ? q->nslen : 0}, *nss = &one;
    size_t nns = 1;
    nslist_t l = {.key = q->key, .klen = q->klen};
    if (!q->has_ns) {
        if (kb->ops->foreach_entry_kg) kb->ops->foreach_entry_kg(kb, c->sid, kg, on_entry, &l);
        else kb->ops->foreach_entry(kb, c->sid, on_entry, &l);
        nns = l.n;
        nss = nns ? sl_malloc(nns * sizeof *nss) : NULL;
        const uint8_t *p = l.b.p;
        for (size_t i = 0; i < nns; i++) {
            nss[i].n = sl_ld32(p);
            nss[i].p = p + 4;
            p += 4 + nss[i].n;
        }
        if (nns > 1) qsort(nss, nns, sizeof *nss, cmp_ns);
    }
    /* the entries, apart: their count comes first */
    sl_buf_t body = {0};
    uint32_t nentries = 0;
    bool over = l.over;
    for (size_t e = 0; e < nns && !over; e++) {
        items_t it = {.ttl_ms = c->ttl_ms, .now = now};
        read_items(kb, c, nss[e].p, nss[e].n, &it);
        over = it.over || body.len > MAX_BLOCK;
        if (it.n && !over) {
            nentries++;
            sl_kbf_bytes(&body, q->key, q->klen);
            sl_kbf_bytes(&body, nss[e].p, nss[e].n);
            if (c->kind != SL_STATE_VALUE) sl_kbf_varint(&body, it.n);
            for (size_t i = 0; i < it.n; i++) {
                const size_t *o = &it.off[i * 4];
                if (c->kind == SL_STATE_MAP) sl_kbf_bytes(&body, it.bytes.p + o[0], (uint32_t)o[1]);
                sl_kbf_bytes(&body, it.bytes.p + o[2], (uint32_t)o[3]);
            }
        }
        sl_buf_free(&it.bytes);
        sl_free(it.off);
    }
    sl_kbf_bytes(out, c->name, (uint32_t)strlen(c->name));
    sl_kbf_u8(out, (uint8_t)c->kind);
    sl_kbf_varint(out, nentries);
    if (body.len) sl_buf_append(out, body.p, body.len);
    sl_buf_free(&body);
    if (nss != &one) sl_free(nss);
    sl_buf_free(&l.b);
    return over ? SL_EINVAL : 0;
}

/* ---- the task's thread ---- */

/* The answer to q from task t (its thread). */
static sl_msg_t *answer(sl_task_t *t, const sq_mail_t *q) {
    char why[1200];
    sl_operator_t *op = NULL;
    for (int k = 0; k < t->nops && !op; k++)
        if (t->ops[k]->uid && strcmp(t->ops[k]->uid, q->uid) == 0) op = t->ops[k];
    if (!op) {
        snprintf(why, sizeof why, "%s has no operator with uid '%s'", t->name, q->uid);
        return result(q->job_id, q->attempt, q->task, q->request_id, SL_SQ_NO_OPERATOR, why);
    }
    sl_keyed_backend_t *kb = op->kb;
    if (!kb) {
        snprintf(why, sizeof why, "operator '%s' in %s is not keyed: it has no keyed state", q->uid, t->name);
        return result(q->job_id, q->attempt, q->task, q->request_id, SL_SQ_NO_OPERATOR, why);
    }
    if (!kb->ops->state_info) {
        snprintf(why, sizeof why, "the %s state backend of operator '%s' cannot be queried (it cannot list its states)",
                 kb->ops->name, q->uid);
        return result(q->job_id, q->attempt, q->task, q->request_id, SL_SQ_FAILED, why);
    }
    int kg = sl_kg_of_hash(sl_kg_key_hash(q->key, q->klen), kb->max_parallelism);
    if (kg < kb->range.start || kg >= kb->range.end) {
        snprintf(why, sizeof why, "%s does not own key group %d (it has [%d, %d)): the query went to the wrong subtask",
                 t->name, kg, kb->range.start, kb->range.end);
        return result(q->job_id, q->attempt, q->task, q->request_id, SL_SQ_FAILED, why);
    }
    /* the states to answer: one by name, or all, sorted by name */
    chosen_t *cs = NULL;
    int n = 0, cap = 0;
    for (int sid = 0;; sid++) {
        chosen_t c = {.sid = sid};
        if (kb->ops->state_info(kb, sid, &c.name, &c.kind, &c.ttl_ms) < 0) break;
        if (q->state[0] && strcmp(q->state, c.name) != 0) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 8;
            cs = sl_realloc(cs, (size_t)cap * sizeof *cs);
        }
        cs[n++] = c;
    }
    if (q->state[0] && !n) { /* name the states there are, sorted */
        for (int sid = 0;; sid++) {
            chosen_t c = {.sid = sid};
            if (kb->ops->state_info(kb, sid, &c.name, &c.kind, &c.ttl_ms) < 0) break;
            if (n == cap) {
                cap = cap ? cap * 2 : 8;
                cs = sl_realloc(cs, (size_t)cap * sizeof *cs);
            }
            cs[n++] = c;
        }
        if (n > 1) qsort(cs, (size_t)n, sizeof *cs, cmp_chosen);
        size_t o = (size_t)snprintf(why, sizeof why, "operator '%s' has no keyed state '%s'; its states:", q->uid,
                                    q->state);
        for (int i = 0; i < n && o < sizeof why; i++)
            o += (size_t)snprintf(why + o, sizeof why - o, "%s '%s'", i ? "," : "", cs[i].name);
        if (!n && o < sizeof why) snprintf(why + o, sizeof why - o, " (none)");
        sl_free(cs);
        return result(q->job_id, q->attempt, q->task, q->request_id, SL_SQ_NO_STATE, why);
    }
    if (n > 1) qsort(cs, (size_t)n, sizeof *cs, cmp_chosen);
    /* the operator's current key, put back afterwards */
    uint8_t *saved = NULL;
    uint32_t savedlen = kb->keylen;
    uint64_t savedhash = kb->keyhash;
    int savedkg = sl_kg_of_hash(savedhash, kb->max_parallelism);
    /* a backend that never had a current key has none to put back (its
     * hash may name a key group outside its range) */
    bool had_key = kb->key != NULL && savedkg >= kb->range.start && savedkg < kb->range.end;
    if (had_key) {
        saved = sl_malloc(savedlen ? savedlen : 1);
        if (savedlen) memcpy(saved, kb->key, savedlen);
    }
    sl_kb_set_key(kb, q->key, q->klen);
    sl_buf_t block = {0};
    size_t start = sl_kbf_begin(&block, kb->max_parallelism, kg, (uint32_t)n);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) rc = write_state(kb, &cs[i], q, kg, &block);
    sl_kbf_end(&block, start);
    if (had_key) sl_kb_set_key_hashed(kb, saved, savedlen, savedhash);
    sl_free(saved);
    sl_free(cs);
    if (rc == 0 && block.len > MAX_BLOCK) rc = SL_EINVAL;
    if (rc < 0) {
        snprintf(why, sizeof why, "the state of this key in operator '%s' is over %u bytes, more than an answer holds",
                 q->uid, MAX_BLOCK);
        sl_buf_free(&block);
        return result(q->job_id, q->attempt, q->task, q->request_id, SL_SQ_FAILED, why);
    }
    sl_msg_t *m = result(q->job_id, q->attempt, q->task, q->request_id, SL_SQ_OK, "");
    m->u.state_query_result.key_group = kg;
    m->u.state_query_result.block = block;
    return m;
}

static void query_mail(void *owner, void *arg) {
    sl_task_t *t = owner;
    sq_mail_t *q = arg;
    q->send(q->send_ctx, answer(t, q));
    sl_free(q);
}

/* ---- the TaskManager's handling thread ---- */

void sl_tm_state_query(sl_deployment_t *dep, const char *tm_id, sl_msg_t *m, void (*send)(void *ctx, sl_msg_t *m),
                       void *send_ctx) {
    const sl_msg_state_query_t *q = &m->u.state_query;
    sl_task_t *t = dep ? sl_deployment_local_task(dep, q->task.vertex, q->task.subtask) : NULL;
    if (!t) {
        char why[600];
        snprintf(why, sizeof why, "TaskManager %s does not run subtask %d of vertex %d of attempt %d of job '%s'",
                 tm_id, q->task.subtask, q->task.vertex, q->attempt, q->job_id);
        send(send_ctx, result(q->job_id, q->attempt, q->task, q->request_id, SL_SQ_NOT_RUNNING, why));
        sl_msg_destroy(m);
        return;
    }
    size_t jl = strlen(q->job_id) + 1, ul = strlen(q->uid) + 1, sl = strlen(q->state) + 1;
    sq_mail_t *a = sl_malloc(sizeof *a + jl + ul + sl + q->key.len + q->ns.len);
    char *p = a->data;
    a->send = send;
    a->send_ctx = send_ctx;
    a->job_id = memcpy(p, q->job_id, jl);
    p += jl;
    a->uid = memcpy(p, q->uid, ul);
    p += ul;
    a->state = memcpy(p, q->state, sl);
    p += sl;
    a->key = (uint8_t *)p;
    if (q->key.len) memcpy(p, q->key.p, q->key.len);
    p += q->key.len;
    a->ns = (uint8_t *)p;
    if (q->ns.len) memcpy(p, q->ns.p, q->ns.len);
    a->klen = (uint32_t)q->key.len;
    a->nslen = (uint32_t)q->ns.len;
    a->has_ns = q->has_namespace;
    a->attempt = q->attempt;
    a->task = q->task;
    a->request_id = q->request_id;
    sl_msg_destroy(m);
    sl_mailbox_post_owned(&t->mailbox, query_mail, a);
}
