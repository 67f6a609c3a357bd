/*
 * async_op.c — the async I/O operator (Flink's AsyncWaitOperator; API in
 * include/sluice/async.h).
 *
 * Each input record becomes an entry of a FIFO queue with a copy of the
 * record and a result handle; the user's invoke starts the request and any
 * thread completes the handle later.  Handles and the operator meet only in
 * a small hub (one mutex): a completion marks its handle, and posts mail to
 * the task once until the task next collects; the task (mail, a wait for
 * capacity, a timer, a watermark) collects marked handles, times out
 * overdue ones and emits what may go:
 *   ordered:   the head while it is complete (or a watermark);
 *   unordered: any complete record before the first watermark in the queue;
 *              a watermark once everything before it is out.
 * So a watermark never overtakes the results of the records before it.
 *
 * Checkpoint: the input records of the entries not yet emitted are written
 * into an internal split list of the operator's operator state
 * (operator_state.c), next to the user's lists; a restore invokes them
 * again, each in exactly one subtask at any parallelism.
 *
 * Lifetimes: a handle has two references, the user's (dropped by
 * sl_async_complete / sl_async_fail) and the operator's (dropped when
 * emitted, timed out, or the operator is destroyed); the hub lives while
 * the operator or any handle does.
 *
 * The builder (sl_async_wait) is in api/async_api.c.
 */
#include <pthread.h>
#include <string.h>

#include "common/common.h"
#include "operators/basic_ops.h"
#include "sluice/async.h"

#define INFLIGHT_LIST "sluice.async.in-flight"

enum { H_PENDING = 0, H_DONE, H_FAILED, H_ABANDONED };

typedef struct hub {
    pthread_mutex_t mu;
    int refs;                /* the operator + every live handle */
    const sl_op_context_t *ctx; /* the task's, for mail; NULL once the operator is gone */
    sl_operator_t *op;
    bool mail_posted;
    sl_schema_t *schema;     /* output schema (a reference: handles may outlive the job) */
} hub_t;

struct sl_async_result {
    hub_t *hub;
    int refs;                /* under hub->mu */
    int state;               /* H_*, under hub->mu */
    const sl_schema_t *schema;
    sl_row_writer_t w;       /* the owner's (one thread at a time) */
    sl_buf_t rows;           /* u32 length + bytes per row */
    char *err;
};

typedef struct async_spec {
    sl_async_fn_t fn;
    int capacity;
    int64_t timeout_ms;
    int mode;
    sl_checkpointed_fn_t cp;
} async_spec_t;

typedef struct entry {
    bool is_wm;
    bool done, emitted;
    int64_t wm;
    int64_t ts, deadline;
    uint8_t *row;
    uint32_t len;
    sl_async_result_t *res;   /* the request's handle (operator's ref) */
    sl_async_result_t *final; /* whose rows to emit: res or the timeout's */
} entry_t;

typedef struct async_op {
    sl_operator_t base;
    async_spec_t spec;
    void *ctx;
    sl_rt_t rt;
    hub_t *hub;
    entry_t *q;               /* ring */
    int qhead, qn, qcap;
    int inflight;             /* record entries not emitted */
    bool opened;
    bool busy, again;         /* inside progress / a completion came meanwhile */
    sl_opstate_list_t *saved; /* INFLIGHT_LIST */
} async_op_t;

/* ---- handles ---- */

static sl_async_result_t *handle_new(async_op_t *op) {
    sl_async_result_t *h = sl_calloc(1, sizeof *h);
    h->hub = op->hub;
    h->refs = 2;
    h->schema = op->hub->schema;
    sl_rw_init(&h->w);
    pthread_mutex_lock(&op->hub->mu);
    op->hub->refs++;
    pthread_mutex_unlock(&op->hub->mu);
    return h;
}

static void hub_free(hub_t *hub) {
    sl_schema_unref(hub->schema);
    pthread_mutex_destroy(&hub->mu);
    sl_free(hub);
}

/* hub->mu held; returns true when the hub must be freed after unlocking. */
static bool handle_release_locked(sl_async_result_t *h) {
    if (--h->refs > 0) return false;
    hub_t *hub = h->hub;
    sl_rw_free(&h->w);
    sl_buf_free(&h->rows);
    sl_free(h->err);
    sl_free(h);
    return --hub->refs == 0;
}

static void completion_mail(void *owner, void *arg);

/* The owner finishes the handle with `state`. */
static void handle_finish(sl_async_result_t *h, int state, const char *msg) {
    hub_t *hub = h->hub;
    pthread_mutex_lock(&hub->mu);
    if (h->state == H_PENDING) {
        h->state = state;
        if (msg) h->err = sl_strdup(msg);
        if (hub->ctx && !hub->mail_posted) {
            hub->mail_posted = true;
            hub->ctx->post(hub->ctx->owner, completion_mail, hub->op);
        }
    }
    bool free_hub = handle_release_locked(h);
    pthread_mutex_unlock(&hub->mu);
    if (free_hub) hub_free(hub);
}

sl_row_writer_t *sl_async_row(sl_async_result_t *res) {
    sl_rw_begin(&res->w, res->schema);
    return &res->w;
}

void sl_async_add(sl_async_result_t *res) {
    sl_row_t r = sl_rw_row(&res->w);
    uint32_t n = r.len;
    sl_buf_append(&res->rows, &n, 4);
    sl_buf_append(&res->rows, r.data, n);
}

void sl_async_complete(sl_async_result_t *res) { handle_finish(res, H_DONE, NULL); }

void sl_async_fail(sl_async_result_t *res, const char *msg) { handle_finish(res, H_FAILED, msg ? msg : "(no message)"); }

/* Task thread: drops the operator's reference. */
static void op_release(async_op_t *op, sl_async_result_t *h) {
    if (!h) return;
    hub_t *hub = op->hub;
    pthread_mutex_lock(&hub->mu);
    bool free_hub = handle_release_locked(h);
    pthread_mutex_unlock(&hub->mu);
    if (free_hub) hub_free(hub); /* not reached while the operator holds its ref */
}

/* ---- the queue ---- */

static entry_t *at(async_op_t *op, int i) { return &op->q[(op->qhead + i) % op->qcap]; }

static entry_t *push(async_op_t *op) {
    if (op->qn == op->qcap) {
        int ncap = op->qcap ? op->qcap * 2 : 16;
        entry_t *nq = sl_calloc((size_t)ncap, sizeof *nq);
        for (int i = 0; i < op->qn; i++) nq[i] = *at(op, i);
        sl_free(op->q);
        op->q = nq;
        op->qhead = 0;
        op->qcap = ncap;
    }
    entry_t *e = at(op, op->qn++);
    memset(e, 0, sizeof *e);
    return e;
}

static void pop(async_op_t *op) {
    entry_t *e = at(op, 0);
    sl_free(e->row);
    e->row = NULL;
    op->qhead = (op->qhead + 1) % op->qcap;
    op->qn--;
}

static int emit_entry(async_op_t *op, entry_t *e) {
    sl_operator_t *o = &op->base;
    const sl_buf_t *rows = &e->final->rows;
    for (size_t p = 0; p + 4 <= rows->len;) {
        uint32_t n;
        memcpy(&n, rows->p + p, 4);
        sl_record_t rec = {{rows->p + p + 4, n, o->out_schema}, e->ts};
        sl_op_emit(o, 0, &rec);
        p += 4 + (size_t)n;
    }
    e->emitted = true;
    op->inflight--;
    if (e->final != e->res) op_release(op, e->final);
    op_release(op, e->res);
    e->res = e->final = NULL;
    return 0;
}

/* Emits what may go now (see the file comment). */
static void emit_ready(async_op_t *op) {
    for (;;) {
        while (op->qn && !at(op, 0)->is_wm && at(op, 0)->emitted) pop(op);
        if (!op->qn) return;
        entry_t *h = at(op, 0);
        if (h->is_wm) {
            sl_op_emit_watermark(&op->base, h->wm);
            pop(op);
            continue;
        }
        if (op->spec.mode == SL_ASYNC_ORDERED) {
            if (!h->done) return;
            emit_entry(op, h);
            continue;
        }
        bool any = false; /* unordered: within the first segment */
        for (int i = 0; i < op->qn && !at(op, i)->is_wm; i++) {
            entry_t *e = at(op, i);
            if (e->done && !e->emitted) {
                emit_entry(op, e);
                any = true;
            }
        }
        if (!any && !at(op, 0)->emitted) return;
    }
}

/* Marks completed handles; fails on a failed one. */
static int collect(async_op_t *op) {
    hub_t *hub = op->hub;
    char *err = NULL;
    pthread_mutex_lock(&hub->mu);
    hub->mail_posted = false;
    for (int i = 0; i < op->qn; i++) {
        entry_t *e = at(op, i);
        if (e->is_wm || e->done) continue;
        if (e->res->state == H_DONE) {
            e->done = true;
            e->final = e->res;
        } else if (e->res->state == H_FAILED && !err) {
            err = sl_strdup(e->res->err);
        }
    }
    pthread_mutex_unlock(&hub->mu);
    if (err) {
        int rc = sl_op_fail(&op->base, SL_EUSER, "async request failed: %s", err);
        sl_free(err);
        return rc;
    }
    return 0;
}

/* Times out overdue requests (processing time `now`). */
static int expire(async_op_t *op, int64_t now) {
    sl_operator_t *o = &op->base;
    for (int i = 0; i < op->qn; i++) {
        entry_t *e = at(op, i);
        if (e->is_wm || e->done || e->deadline > now) continue;
        pthread_mutex_lock(&op->hub->mu);
        int st = e->res->state;
        if (st == H_PENDING) e->res->state = H_ABANDONED; /* a late completion is ignored */
        pthread_mutex_unlock(&op->hub->mu);
        if (st == H_DONE) {
            e->done = true;
            e->final = e->res;
            continue;
        }
        if (st == H_FAILED) return collect(op);
        if (!op->spec.fn.timeout)
            return sl_op_fail(o, SL_EIO, "async request timed out after %lld ms", (long long)op->spec.timeout_ms);
        sl_async_result_t *th = handle_new(op);
        sl_record_t in = {{e->row, e->len, o->in_schema[0]}, e->ts};
        int rc = op->spec.fn.timeout(op->ctx, &in, th);
        pthread_mutex_lock(&op->hub->mu);
        st = th->state;
        if (st == H_PENDING) th->state = H_ABANDONED;
        pthread_mutex_unlock(&op->hub->mu);
        if (rc < 0 || st != H_DONE) {
            op_release(op, th);
            if (st == H_PENDING) op_release(op, th); /* the user's reference: it never completed */
            if (rc < 0) return sl_op_fail(o, rc, "async timeout callback failed (%s)", sl_strerror(rc));
            if (st == H_FAILED) return sl_op_fail(o, SL_EUSER, "async request timed out and its timeout "
                                                              "callback failed it");
            return sl_op_fail(o, SL_EIO, "async request timed out after %lld ms (the timeout callback gave no result)",
                              (long long)op->spec.timeout_ms);
        }
        e->done = true;
        e->final = th;
    }
    return 0;
}

static void schedule_next(async_op_t *op) {
    int64_t next = INT64_MAX;
    for (int i = 0; i < op->qn; i++) {
        entry_t *e = at(op, i);
        if (!e->is_wm && !e->done && e->deadline < next) next = e->deadline;
    }
    if (next != INT64_MAX) sl_op_schedule_processing(&op->base, next);
}

/* Collect, time out, emit.  Not re-entered: emitting may run a chained
 * operator that waits and runs mail, including our completion mail. */
static int progress(async_op_t *op) {
    if (op->busy) {
        op->again = true;
        return 0;
    }
    op->busy = true;
    int rc;
    do {
        op->again = false;
        rc = collect(op);
        if (rc == 0) rc = expire(op, sl_op_now(&op->base));
        if (rc < 0) break;
        emit_ready(op);
    } while (op->again);
    schedule_next(op);
    op->busy = false;
    return rc;
}

/* Waits until at most `limit` records are in flight. */
static int wait_until(async_op_t *op, int limit) {
    for (;;) {
        int rc = progress(op);
        if (rc < 0) return rc;
        if (op->inflight <= limit) return 0;
        if (!op->base.ctx) return sl_op_fail(&op->base, SL_EINVAL, "async operator needs a task to wait");
        int64_t wait_ms = 10; /* at most until the next deadline */
        int64_t now = sl_op_now(&op->base);
        for (int i = 0; i < op->qn; i++) {
            entry_t *e = at(op, i);
            if (!e->is_wm && !e->done && e->deadline - now < wait_ms) wait_ms = e->deadline - now;
        }
        if (wait_ms < 0) wait_ms = 0;
        if (sl_op_yield(&op->base, sl_mono_ns() + wait_ms * 1000000LL + 100000))
            return SL_ECANCELED;
    }
}

static void completion_mail(void *owner, void *arg) {
    async_op_t *op = arg;
    if (op->opened) progress(op);
}

/* Starts the request of one record (there is room). */
static int start(async_op_t *op, const uint8_t *row, uint32_t len, int64_t ts) {
    sl_operator_t *o = &op->base;
    entry_t *e = push(op);
    e->row = sl_malloc(len ? len : 1);
    memcpy(e->row, row, len);
    e->len = len;
    e->ts = ts;
    e->deadline = sl_op_now(o) + op->spec.timeout_ms;
    e->res = handle_new(op);
    op->inflight++;
    sl_record_t in = {{e->row, len, o->in_schema[0]}, ts};
    int rc = op->spec.fn.invoke(op->ctx, &in, e->res);
    if (rc < 0) return sl_op_fail(o, rc, "async invoke failed (%s)", sl_strerror(rc));
    sl_op_schedule_processing(o, e->deadline);
    return 0;
}

/* ---- operator ---- */

static int a_open(sl_operator_t *o) {
    async_op_t *op = (async_op_t *)o;
    op->opened = true;
    int rc = sl_opstate_attach(o, &op->spec.cp, op->ctx);
    if (rc < 0) return rc;
    op->saved = sl_opstate_declare(o, INFLIGHT_LIST, 0);
    if (!op->saved) return SL_EINVAL;
    if (op->spec.fn.open) {
        rc = op->spec.fn.open(op->ctx, &op->rt);
        if (rc < 0) return sl_op_fail(o, rc, "open failed (%s)", sl_strerror(rc));
    }
    /* requests in flight at the checkpoint: send them again, in order */
    int n = sl_opstate_count(op->saved);
    for (int i = 0; i < n; i++) {
        uint32_t len;
        const uint8_t *p = sl_opstate_get(op->saved, i, &len);
        if (len < 8) return sl_op_fail(o, SL_EFORMAT, "operator state of '%s': bad request in flight",
                                       o->uid ? o->uid : o->name);
        uint64_t u = 0;
        for (int k = 0; k < 8; k++) u |= (uint64_t)p[k] << (8 * k);
        int64_t ts = (int64_t)u;
        uint8_t *copy = sl_malloc(len); /* the list may move while we wait */
        memcpy(copy, p, len);
        rc = wait_until(op, op->spec.capacity - 1);
        if (rc == 0) rc = start(op, copy + 8, len - 8, ts);
        sl_free(copy);
        if (rc < 0) return rc;
    }
    sl_opstate_clear(op->saved);
    return 0;
}

static int a_process(sl_operator_t *o, int input, const sl_record_t *rec) {
    async_op_t *op = (async_op_t *)o;
    int rc = wait_until(op, op->spec.capacity - 1);
    if (rc < 0) return rc;
    rc = start(op, rec->row.data, rec->row.len, rec->ts);
    if (rc < 0) return rc;
    return progress(op);
}

static int a_watermark(sl_operator_t *o, int64_t wm) {
    async_op_t *op = (async_op_t *)o;
    int rc = progress(op);
    if (rc < 0) return rc;
    if (!op->qn) {
        sl_op_emit_watermark(o, wm);
        return 0;
    }
    entry_t *tail = at(op, op->qn - 1);
    if (tail->is_wm) { /* a newer watermark replaces a queued one */
        tail->wm = wm;
        return 0;
    }
    entry_t *e = push(op);
    e->is_wm = true;
    e->wm = wm;
    return 0;
}

static int a_proc_time(sl_operator_t *o, int64_t now) { return progress((async_op_t *)o); }

static int a_end_input(sl_operator_t *o, int input) {
    async_op_t *op = (async_op_t *)o;
    int rc = wait_until(op, 0);
    if (rc < 0) return rc;
    emit_ready(op); /* trailing watermarks */
    return 0;
}

static int a_snapshot(sl_operator_t *o, int64_t id, sl_buf_t *out) {
    async_op_t *op = (async_op_t *)o;
    if (!o->opstate) return 0;
    sl_opstate_clear(op->saved);
    sl_buf_t b = {0};
    for (int i = 0; i < op->qn; i++) {
        entry_t *e = at(op, i);
        if (e->is_wm || e->emitted) continue;
        b.len = 0;
        uint8_t le[8]; /* the timestamp, little-endian, then the row */
        for (int k = 0; k < 8; k++) le[k] = (uint8_t)((uint64_t)e->ts >> (8 * k));
        sl_buf_append(&b, le, 8);
        sl_buf_append(&b, e->row, e->len);
        sl_opstate_add(op->saved, b.p, (uint32_t)b.len);
    }
    sl_buf_free(&b);
    return sl_opstate_snapshot(o, id, out);
}

static void a_close(sl_operator_t *o) {
    async_op_t *op = (async_op_t *)o;
    if (op->opened && op->spec.fn.close) op->spec.fn.close(op->ctx);
    op->opened = false;
}

static void a_destroy(sl_operator_t *o) {
    async_op_t *op = (async_op_t *)o;
    a_close(o);
    hub_t *hub = op->hub;
    pthread_mutex_lock(&hub->mu);
    hub->ctx = NULL; /* completions from now on post nothing */
    pthread_mutex_unlock(&hub->mu);
    while (op->qn) {
        entry_t *e = at(op, 0);
        if (!e->is_wm && !e->emitted) {
            if (e->final && e->final != e->res) op_release(op, e->final);
            op_release(op, e->res);
        }
        pop(op);
    }
    sl_free(op->q);
    pthread_mutex_lock(&hub->mu);
    bool free_hub = --hub->refs == 0;
    pthread_mutex_unlock(&hub->mu);
    if (free_hub) hub_free(hub);
    sl_opstate_free(o);
    sl_fn_ctx_release(&op->spec.fn.opts, op->ctx);
    sl_op_base_free(o);
    sl_free(op);
}

static const sl_operator_vt_t async_vt = {.kind = "AsyncWait",
                                          .open = a_open,
                                          .process = a_process,
                                          .advance_watermark = a_watermark,
                                          .on_processing_time = a_proc_time,
                                          .end_input = a_end_input,
                                          .close = a_close,
                                          .destroy = a_destroy,
                                          .snapshot_state = a_snapshot};

sl_operator_t *sl_async_op_create(const void *spec, const sl_op_init_t *init) {
    const async_spec_t *s = spec;
    async_op_t *op = sl_calloc(1, sizeof *op);
    op->spec = *s;
    sl_op_base_init(&op->base, &async_vt, init);
    op->ctx = sl_fn_ctx_acquire(&op->spec.fn.opts);
    op->rt.op = &op->base;
    op->hub = sl_calloc(1, sizeof *op->hub);
    pthread_mutex_init(&op->hub->mu, NULL);
    op->hub->refs = 1;
    op->hub->ctx = init->ctx;
    op->hub->op = &op->base;
    op->hub->schema = sl_schema_ref((sl_schema_t *)init->out_schema);
    return &op->base;
}

sl_checkpointed_fn_t *sl_async_spec_cp(void *spec) { return &((async_spec_t *)spec)->cp; }

void *sl_async_spec_new(sl_async_fn_t fn, int capacity, int64_t timeout_ms, int mode) {
    async_spec_t *spec = sl_calloc(1, sizeof *spec);
    spec->fn = fn;
    spec->capacity = capacity;
    spec->timeout_ms = timeout_ms;
    spec->mode = mode;
    return spec;
}

void sl_async_spec_free(void *spec) { sl_free(spec); }
