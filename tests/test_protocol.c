/* test_protocol.c — the control-plane codec (protocol/messages.h, codec.c):
 * random round trips of every message type against an independent
 * field-by-field comparison, the frame header's refusals, every prefix of
 * valid frames, a mutation fuzzer (SLUICE_FUZZ_ITERS, default 200000), hand
 * written protobuf payloads (the wire contract of sluice.proto, checked
 * without the encoder) and hand-built bad messages refused by field name. */
#include "test.h"

#include <limits.h>

#include "common/common.h"
#include "protocol/messages.h"

static char err[1024];

static uint64_t rng_state;
static uint64_t rnd(void) { return rng_state = sl_mix64(rng_state + 0x9e3779b97f4a7c15ULL); }
static uint64_t below(uint64_t n) { return n ? rnd() % n : 0; }
static bool coin(int one_in) { return below((uint64_t)one_in) == 0; }

/* A count 0..max, mostly small. */
static int rcount(int max) { return coin(4) ? (int)below((uint64_t)max + 1) : (int)below(4 < max + 1 ? 4 : max + 1); }

static int64_t rnonneg64(void) {
    switch (below(5)) {
    case 0: return 0;
    case 1: return INT64_MAX;
    case 2: return (int64_t)below(1000);
    default: return (int64_t)(rnd() >> 1);
    }
}

static int32_t rnonneg32(void) {
    switch (below(4)) {
    case 0: return 0;
    case 1: return INT32_MAX;
    default: return (int32_t)below(100000);
    }
}

/* Random UTF-8 text: ASCII (printable and not), 2- and 3-byte sequences. */
static char *rstr(int minlen, int maxlen) {
    int n = minlen + (int)below((uint64_t)(maxlen - minlen + 1));
    char *s = sl_malloc((size_t)n * 3 + 1);
    int o = 0;
    for (int i = 0; i < n; i++) {
        switch (below(8)) {
        case 0: s[o++] = (char)(1 + below(31)); break; /* control characters, never NUL */
        case 1:
            s[o++] = (char)0xc3;
            s[o++] = (char)0xa9; /* é */
            break;
        case 2:
            s[o++] = (char)0xe6;
            s[o++] = (char)0xbc;
            s[o++] = (char)0xa2; /* 漢 */
            break;
        default: s[o++] = (char)(0x20 + below(95)); break;
        }
    }
    s[o] = 0;
    return s;
}

static char *rname(int i) {
    char *base = rstr(0, 12);
    char buf[64];
    snprintf(buf, sizeof buf, "%s#%d", base, i); /* unique by construction */
    sl_free(base);
    return sl_strdup(buf);
}

static char *rfile(int i) {
    static const char cs[] = "abcdefghijklmnopqrstuvwxyz0123456789._-";
    char buf[64];
    int n = 1 + (int)below(20), o = 0;
    for (int k = 0; k < n; k++) buf[o++] = cs[below(sizeof cs - 1)];
    o += snprintf(buf + o, sizeof buf - (size_t)o, "-%d", i); /* never "." or ".." */
    return sl_strdup(buf);
}

static uint8_t *rbytes(size_t *len, size_t max) {
    *len = (size_t)below(max + 1);
    if (!*len) return NULL;
    uint8_t *p = sl_malloc(*len);
    for (size_t i = 0; i < *len; i++) p[i] = (uint8_t)rnd();
    return p;
}

static sl_msg_task_ref_t rref(void) {
    sl_msg_task_ref_t r = {rnonneg32(), rnonneg32(), rnonneg32()};
    return r;
}

/* ------------------------------------------------------------------ */
/* Random valid messages. */

static int g_max; /* the largest count a random message uses (50 for round trips, small for the fuzzer) */

static void rsubtask(sl_ckpt_subtask_t *st, int subtask) {
    st->index = subtask;
    int a = (int)below(SL_CKPT_MAX_PARALLELISM + 1), b = (int)below(SL_CKPT_MAX_PARALLELISM + 1);
    if (coin(8)) a = b = SL_CKPT_MAX_PARALLELISM;
    st->range.start = a < b ? a : b;
    st->range.end = a < b ? b : a;
    st->nhandles = rcount(g_max);
    st->handles = st->nhandles ? sl_calloc((size_t)st->nhandles, sizeof *st->handles) : NULL;
    for (int i = 0; i < st->nhandles; i++) {
        sl_ckpt_state_handle_t *h = &st->handles[i];
        h->path = rfile(i);
        h->scope = (uint8_t)below(3);
        h->kind = coin(2) ? (uint32_t)(1 + below(6)) : (uint32_t)(1 + below(UINT32_MAX));
        h->size = coin(4) ? UINT64_MAX : below(1u << 30);
        h->checksum = rnd();
        h->nsections = rcount(g_max);
        h->sections = h->nsections ? sl_calloc((size_t)h->nsections, sizeof *h->sections) : NULL;
        uint64_t id = below(3);
        for (int k = 0; k < h->nsections; k++) {
            sl_sf_section_t *s = &h->sections[k];
            s->id = id;
            id += 1 + below(1000);
            s->length = below(h->size + 1);
            s->offset = below(h->size - s->length + 1);
            s->checksum = rnd();
        }
    }
    st->nblobs = rcount(g_max);
    st->blobs = st->nblobs ? sl_calloc((size_t)st->nblobs, sizeof *st->blobs) : NULL;
    for (int i = 0; i < st->nblobs; i++) {
        st->blobs[i].name = rname(i);
        st->blobs[i].distribution = (uint8_t)below(3);
        st->blobs[i].data = rbytes(&st->blobs[i].len, 100);
    }
}

static sl_msg_op_state_t *rops(int n, int subtask) {
    if (!n) return NULL;
    sl_msg_op_state_t *o = sl_calloc((size_t)n, sizeof *o);
    for (int i = 0; i < n; i++) {
        o[i].uid = rname(i);
        rsubtask(&o[i].st, subtask);
    }
    return o;
}

/* distinct task indexes: a random start and random positive steps */
static void distinct_indexes(sl_msg_task_ref_t *refs, size_t stride, int n) {
    int32_t ix = (int32_t)below(10);
    for (int i = 0; i < n; i++) {
        sl_msg_task_ref_t *r = (sl_msg_task_ref_t *)(void *)((char *)refs + (size_t)i * stride);
        r->index = ix;
        ix += 1 + (int32_t)below(3);
    }
    for (int i = n - 1; i > 0; i--) { /* shuffle */
        int j = (int)below((uint64_t)i + 1);
        sl_msg_task_ref_t *a = (sl_msg_task_ref_t *)(void *)((char *)refs + (size_t)i * stride);
        sl_msg_task_ref_t *b = (sl_msg_task_ref_t *)(void *)((char *)refs + (size_t)j * stride);
        int32_t t = a->index;
        a->index = b->index;
        b->index = t;
    }
}

static sl_msg_t *rmsg(int type) {
    sl_msg_t *m = sl_msg_new(type);
    switch (type) {
    case SL_MSG_REGISTER:
        m->u.reg.tm_id = rstr(1, 20);
        m->u.reg.host = rstr(0, 20);
        m->u.reg.data_port = (int32_t)below(65536);
        m->u.reg.slots = rnonneg32();
        m->u.reg.pid = rnonneg64();
        break;
    case SL_MSG_REGISTERED:
        m->u.registered.accepted = coin(2);
        m->u.registered.reason = rstr(m->u.registered.accepted ? 0 : 1, 30);
        m->u.registered.jm_id = rstr(1, 20);
        break;
    case SL_MSG_HEARTBEAT:
        m->u.heartbeat.sender = rstr(1, 20);
        m->u.heartbeat.seq = rnonneg64();
        m->u.heartbeat.slots_total = rnonneg32();
        m->u.heartbeat.slots_free = (int32_t)below((uint64_t)m->u.heartbeat.slots_total + 1);
        break;
    case SL_MSG_DEPLOY: {
        sl_msg_deploy_t *d = &m->u.deploy;
        d->job_id = rstr(1, 30);
        d->attempt = rnonneg32();
        d->artifact = rstr(1, 30);
        d->nargs = rcount(g_max);
        d->args = d->nargs ? sl_calloc((size_t)d->nargs, sizeof *d->args) : NULL;
        for (int i = 0; i < d->nargs; i++) d->args[i] = rstr(0, 20);
        d->plan_fingerprint = rnd();
        size_t plen;
        uint8_t *plan = rbytes(&plen, 300);
        sl_buf_append(&d->plan, plan, plen);
        sl_free(plan);
        if (coin(2)) {
            d->restore_path = rstr(1, 40);
            d->restore_checkpoint = 1 + (int64_t)below(INT64_MAX - 1);
        } else {
            d->restore_path = sl_strdup("");
        }
        d->ntasks = rcount(g_max);
        d->tasks = d->ntasks ? sl_calloc((size_t)d->ntasks, sizeof *d->tasks) : NULL;
        for (int i = 0; i < d->ntasks; i++) d->tasks[i] = rref();
        distinct_indexes(d->tasks, sizeof *d->tasks, d->ntasks);
        d->npeers = rcount(g_max);
        d->peers = d->npeers ? sl_calloc((size_t)d->npeers, sizeof *d->peers) : NULL;
        for (int i = 0; i < d->npeers; i++) {
            d->peers[i].tm_id = rstr(1, 10);
            d->peers[i].host = rstr(1, 20);
            d->peers[i].data_port = 1 + (int32_t)below(65535);
        }
        d->nplacements = rcount(g_max);
        d->placements = d->nplacements ? sl_calloc((size_t)d->nplacements, sizeof *d->placements) : NULL;
        for (int i = 0; i < d->nplacements; i++) {
            d->placements[i].task = rref();
            d->placements[i].peer = (int32_t)below((uint64_t)d->npeers + 1) - 1;
        }
        if (d->nplacements) distinct_indexes(&d->placements[0].task, sizeof *d->placements, d->nplacements);
        break;
    }
    case SL_MSG_CANCEL:
        m->u.cancel.job_id = rstr(1, 30);
        m->u.cancel.attempt = rnonneg32();
        m->u.cancel.reason = rstr(0, 40);
        break;
    case SL_MSG_TASK_STATE: {
        sl_msg_task_state_t *t = &m->u.task_state;
        t->job_id = rstr(1, 30);
        t->attempt = rnonneg32();
        t->task = rref();
        t->state = (int32_t)below(5);
        t->error_code = coin(2) ? 0 : -(int32_t)below(10);
        t->message = rstr(0, 60);
        if (t->state == SL_TASK_FINISHED) {
            t->nfinal = rcount(g_max);
            t->final_state = rops(t->nfinal, t->task.subtask);
        }
        if (t->state >= SL_TASK_FINISHED) {
            t->nmetrics = rcount(g_max);
            t->metrics = t->nmetrics ? sl_calloc((size_t)t->nmetrics, sizeof *t->metrics) : NULL;
            for (int i = 0; i < t->nmetrics; i++) {
                t->metrics[i].node = rnonneg32();
                t->metrics[i].records_in = rnonneg64();
                t->metrics[i].records_out = rnonneg64();
                t->metrics[i].records_skipped = rnonneg64();
            }
        }
        t->max_sync_ns = rnonneg64();
        break;
    }
    case SL_MSG_TRIGGER:
        m->u.trigger.job_id = rstr(1, 30);
        m->u.trigger.attempt = rnonneg32();
        m->u.trigger.checkpoint_id = 1 + (int64_t)below(1000000);
        m->u.trigger.timestamp = rnonneg64();
        break;
    case SL_MSG_ACK: {
        sl_msg_ack_t *a = &m->u.ack;
        a->job_id = rstr(1, 30);
        a->attempt = rnonneg32();
        a->checkpoint_id = coin(4) ? INT64_MAX : 1 + (int64_t)below(1000000);
        a->task = rref();
        a->align_us = rnonneg64();
        a->sync_us = rnonneg64();
        a->async_us = rnonneg64();
        a->state_bytes = rnonneg64();
        a->inflight_bytes = rnonneg64();
        a->unaligned = coin(2);
        a->nops = rcount(g_max);
        a->ops = rops(a->nops, a->task.subtask);
        break;
    }
    case SL_MSG_DECLINE:
        m->u.decline.job_id = rstr(1, 30);
        m->u.decline.attempt = rnonneg32();
        m->u.decline.checkpoint_id = 1 + (int64_t)below(1000000);
        m->u.decline.task = rref();
        m->u.decline.reason = rstr(0, 40);
        break;
    case SL_MSG_COMPLETE:
    case SL_MSG_ABORTED:
        m->u.notify.job_id = rstr(1, 30);
        m->u.notify.attempt = rnonneg32();
        m->u.notify.checkpoint_id = 1 + (int64_t)below(1000000);
        m->u.notify.reason = rstr(0, 40);
        break;
    case SL_MSG_METRICS: {
        sl_msg_metrics_t *x = &m->u.metrics;
        x->job_id = rstr(1, 30);
        x->attempt = rnonneg32();
        x->tm_id = rstr(1, 20);
        x->time_ns = rnonneg64();
        x->nsubtasks = rcount(g_max);
        x->subtasks = x->nsubtasks ? sl_calloc((size_t)x->nsubtasks, sizeof *x->subtasks) : NULL;
        for (int i = 0; i < x->nsubtasks; i++) {
            sl_msg_subtask_metrics_t *st = &x->subtasks[i];
            st->task = rref();
            st->time_ns = rnonneg64();
            st->busy_ns = rnonneg64();
            st->idle_ns = rnonneg64();
            st->backpressured_ns = rnonneg64();
            st->nops = rcount(g_max);
            st->ops = st->nops ? sl_calloc((size_t)st->nops, sizeof *st->ops) : NULL;
            for (int k = 0; k < st->nops; k++) {
                sl_msg_op_metrics_t *o = &st->ops[k];
                o->node = rnonneg32();
                o->records_in = rnonneg64();
                o->records_out = rnonneg64();
                o->records_skipped = rnonneg64();
                o->in_watermark = coin(4) ? INT64_MIN : (int64_t)rnd(); /* any value, negative too */
                o->out_watermark = coin(4) ? INT64_MAX : (int64_t)rnd();
                o->late_dropped = rnonneg64();
                o->state_memory_bytes = coin(3) ? -1 : rnonneg64();
                o->rdb_mem_tables = coin(2) ? -1 : rnonneg64();
                o->rdb_table_readers = coin(2) ? -1 : rnonneg64();
                o->rdb_block_cache = coin(2) ? -1 : rnonneg64();
                o->rdb_live_data = coin(2) ? -1 : rnonneg64();
            }
        }
        if (x->nsubtasks) distinct_indexes(&x->subtasks[0].task, sizeof *x->subtasks, x->nsubtasks);
        break;
    }
    case SL_MSG_STATE_QUERY: {
        sl_msg_state_query_t *q = &m->u.state_query;
        q->job_id = rstr(1, 30);
        q->attempt = rnonneg32();
        q->task = rref();
        q->request_id = 1 + below(UINT64_MAX - 1);
        q->uid = rstr(1, 30);
        q->state = rstr(0, 20);
        size_t n;
        uint8_t *k = rbytes(&n, coin(8) ? SL_MSG_STATE_QUERY_MAX_KEY : 40);
        if (n) sl_buf_append(&q->key, k, n);
        sl_free(k);
        q->has_namespace = coin(2);
        if (q->has_namespace) {
            uint8_t *ns = rbytes(&n, 40);
            if (n) sl_buf_append(&q->ns, ns, n);
            sl_free(ns);
        }
        break;
    }
    case SL_MSG_STATE_QUERY_RESULT: {
        sl_msg_state_query_result_t *r = &m->u.state_query_result;
        r->job_id = rstr(1, 30);
        r->attempt = rnonneg32();
        r->task = rref();
        r->request_id = 1 + below(UINT64_MAX - 1);
        r->status = (int32_t)below(SL_SQ_STATUS_MAX + 1);
        if (r->status == SL_SQ_OK) {
            r->message = sl_strdup("");
            r->key_group = (int32_t)below(SL_CKPT_MAX_PARALLELISM);
            size_t n;
            uint8_t *b = NULL;
            while (!b) b = rbytes(&n, 200);
            sl_buf_append(&r->block, b, n);
            sl_free(b);
        } else {
            r->message = rstr(1, 40);
        }
        break;
    }
    }
    return m;
}

/* ------------------------------------------------------------------ */
/* An independent deep comparison (NULL strings equal ""), printing the
 * first difference. */

static bool diff(const char *what) {
    fprintf(stderr, "  messages differ at %s\n", what);
    return false;
}
#define SAME(a, b, what)                                                                                               \
    do {                                                                                                               \
        if ((a) != (b)) return diff(what);                                                                             \
    } while (0)

static bool same_str(const char *a, const char *b) { return strcmp(a ? a : "", b ? b : "") == 0; }
#define SAME_STR(a, b, what)                                                                                           \
    do {                                                                                                               \
        if (!same_str((a), (b))) return diff(what);                                                                    \
    } while (0)

static bool same_bytes(const void *a, size_t alen, const void *b, size_t blen) {
    return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

static bool same_ref(const sl_msg_task_ref_t *a, const sl_msg_task_ref_t *b) {
    return a->vertex == b->vertex && a->subtask == b->subtask && a->index == b->index;
}

static bool same_subtask(const sl_ckpt_subtask_t *a, const sl_ckpt_subtask_t *b) {
    SAME(a->index, b->index, "st.index");
    SAME(a->range.start, b->range.start, "st.range.start");
    SAME(a->range.end, b->range.end, "st.range.end");
    SAME(a->nhandles, b->nhandles, "st.nhandles");
    for (int i = 0; i < a->nhandles; i++) {
        const sl_ckpt_state_handle_t *x = &a->handles[i], *y = &b->handles[i];
        SAME_STR(x->path, y->path, "handle path");
        SAME(x->scope, y->scope, "handle scope");
        SAME(x->kind, y->kind, "handle kind");
        SAME(x->size, y->size, "handle size");
        SAME(x->checksum, y->checksum, "handle checksum");
        SAME(x->nsections, y->nsections, "handle nsections");
        for (int k = 0; k < x->nsections; k++) {
            SAME(x->sections[k].id, y->sections[k].id, "section id");
            SAME(x->sections[k].offset, y->sections[k].offset, "section offset");
            SAME(x->sections[k].length, y->sections[k].length, "section length");
            SAME(x->sections[k].checksum, y->sections[k].checksum, "section checksum");
        }
    }
    SAME(a->nblobs, b->nblobs, "st.nblobs");
    for (int i = 0; i < a->nblobs; i++) {
        SAME_STR(a->blobs[i].name, b->blobs[i].name, "blob name");
        SAME(a->blobs[i].distribution, b->blobs[i].distribution, "blob distribution");
        if (!same_bytes(a->blobs[i].data, a->blobs[i].len, b->blobs[i].data, b->blobs[i].len)) return diff("blob data");
    }
    return true;
}

static bool same_ops(const sl_msg_op_state_t *a, const sl_msg_op_state_t *b, int n) {
    for (int i = 0; i < n; i++) {
        SAME_STR(a[i].uid, b[i].uid, "op uid");
        if (!same_subtask(&a[i].st, &b[i].st)) return false;
    }
    return true;
}

static bool msg_equal(const sl_msg_t *a, const sl_msg_t *b) {
    SAME(a->type, b->type, "type");
    switch (a->type) {
    case SL_MSG_REGISTER: {
        const sl_msg_register_t *x = &a->u.reg, *y = &b->u.reg;
        SAME_STR(x->tm_id, y->tm_id, "tm_id");
        SAME_STR(x->host, y->host, "host");
        SAME(x->data_port, y->data_port, "data_port");
        SAME(x->slots, y->slots, "slots");
        SAME(x->pid, y->pid, "pid");
        return true;
    }
    case SL_MSG_REGISTERED: {
        const sl_msg_registered_t *x = &a->u.registered, *y = &b->u.registered;
        SAME(x->accepted, y->accepted, "accepted");
        SAME_STR(x->reason, y->reason, "reason");
        SAME_STR(x->jm_id, y->jm_id, "jm_id");
        return true;
    }
    case SL_MSG_HEARTBEAT: {
        const sl_msg_heartbeat_t *x = &a->u.heartbeat, *y = &b->u.heartbeat;
        SAME_STR(x->sender, y->sender, "sender");
        SAME(x->seq, y->seq, "seq");
        SAME(x->slots_total, y->slots_total, "slots_total");
        SAME(x->slots_free, y->slots_free, "slots_free");
        return true;
    }
    case SL_MSG_DEPLOY: {
        const sl_msg_deploy_t *x = &a->u.deploy, *y = &b->u.deploy;
        SAME_STR(x->job_id, y->job_id, "job_id");
        SAME(x->attempt, y->attempt, "attempt");
        SAME_STR(x->artifact, y->artifact, "artifact");
        SAME(x->nargs, y->nargs, "nargs");
        for (int i = 0; i < x->nargs; i++) SAME_STR(x->args[i], y->args[i], "args[i]");
        SAME(x->plan_fingerprint, y->plan_fingerprint, "plan_fingerprint");
        if (!same_bytes(x->plan.p, x->plan.len, y->plan.p, y->plan.len)) return diff("plan");
        SAME_STR(x->restore_path, y->restore_path, "restore_path");
        SAME(x->restore_checkpoint, y->restore_checkpoint, "restore_checkpoint");
        SAME(x->ntasks, y->ntasks, "ntasks");
        for (int i = 0; i < x->ntasks; i++)
            if (!same_ref(&x->tasks[i], &y->tasks[i])) return diff("tasks[i]");
        SAME(x->nplacements, y->nplacements, "nplacements");
        for (int i = 0; i < x->nplacements; i++) {
            if (!same_ref(&x->placements[i].task, &y->placements[i].task)) return diff("placements[i].task");
            SAME(x->placements[i].peer, y->placements[i].peer, "placements[i].peer");
        }
        SAME(x->npeers, y->npeers, "npeers");
        for (int i = 0; i < x->npeers; i++) {
            SAME_STR(x->peers[i].tm_id, y->peers[i].tm_id, "peers[i].tm_id");
            SAME_STR(x->peers[i].host, y->peers[i].host, "peers[i].host");
            SAME(x->peers[i].data_port, y->peers[i].data_port, "peers[i].data_port");
        }
        return true;
    }
    case SL_MSG_CANCEL: {
        const sl_msg_cancel_t *x = &a->u.cancel, *y = &b->u.cancel;
        SAME_STR(x->job_id, y->job_id, "job_id");
        SAME(x->attempt, y->attempt, "attempt");
        SAME_STR(x->reason, y->reason, "reason");
        return true;
    }
    case SL_MSG_TASK_STATE: {
        const sl_msg_task_state_t *x = &a->u.task_state, *y = &b->u.task_state;
        SAME_STR(x->job_id, y->job_id, "job_id");
        SAME(x->attempt, y->attempt, "attempt");
        if (!same_ref(&x->task, &y->task)) return diff("task");
        SAME(x->state, y->state, "state");
        SAME(x->error_code, y->error_code, "error_code");
        SAME_STR(x->message, y->message, "message");
        SAME(x->nfinal, y->nfinal, "nfinal");
        if (!same_ops(x->final_state, y->final_state, x->nfinal)) return false;
        SAME(x->nmetrics, y->nmetrics, "nmetrics");
        for (int i = 0; i < x->nmetrics; i++) {
            SAME(x->metrics[i].node, y->metrics[i].node, "metrics node");
            SAME(x->metrics[i].records_in, y->metrics[i].records_in, "metrics records_in");
            SAME(x->metrics[i].records_out, y->metrics[i].records_out, "metrics records_out");
            SAME(x->metrics[i].records_skipped, y->metrics[i].records_skipped, "metrics records_skipped");
        }
        SAME(x->max_sync_ns, y->max_sync_ns, "max_sync_ns");
        return true;
    }
    case SL_MSG_TRIGGER: {
        const sl_msg_trigger_t *x = &a->u.trigger, *y = &b->u.trigger;
        SAME_STR(x->job_id, y->job_id, "job_id");
        SAME(x->attempt, y->attempt, "attempt");
        SAME(x->checkpoint_id, y->checkpoint_id, "checkpoint_id");
        SAME(x->timestamp, y->timestamp, "timestamp");
        return true;
    }
    case SL_MSG_ACK: {
        const sl_msg_ack_t *x = &a->u.ack, *y = &b->u.ack;
        SAME_STR(x->job_id, y->job_id, "job_id");
        SAME(x->attempt, y->attempt, "attempt");
        SAME(x->checkpoint_id, y->checkpoint_id, "checkpoint_id");
        if (!same_ref(&x->task, &y->task)) return diff("task");
        SAME(x->align_us, y->align_us, "align_us");
        SAME(x->sync_us, y->sync_us, "sync_us");
        SAME(x->async_us, y->async_us, "async_us");
        SAME(x->state_bytes, y->state_bytes, "state_bytes");
        SAME(x->inflight_bytes, y->inflight_bytes, "inflight_bytes");
        SAME(x->unaligned, y->unaligned, "unaligned");
        SAME(x->nops, y->nops, "nops");
        return same_ops(x->ops, y->ops, x->nops);
    }
    case SL_MSG_DECLINE: {
        const sl_msg_decline_t *x = &a->u.decline, *y = &b->u.decline;
        SAME_STR(x->job_id, y->job_id, "job_id");
        SAME(x->attempt, y->attempt, "attempt");
        SAME(x->checkpoint_id, y->checkpoint_id, "checkpoint_id");
        if (!same_ref(&x->task, &y->task)) return diff("task");
        SAME_STR(x->reason, y->reason, "reason");
        return true;
    }
    case SL_MSG_COMPLETE:
    case SL_MSG_ABORTED: {
        const sl_msg_notify_t *x = &a->u.notify, *y = &b->u.notify;
        SAME_STR(x->job_id, y->job_id, "job_id");
        SAME(x->attempt, y->attempt, "attempt");
        SAME(x->checkpoint_id, y->checkpoint_id, "checkpoint_id");
        SAME_STR(x->reason, y->reason, "reason");
        return true;
    }
    case SL_MSG_METRICS: {
        const sl_msg_metrics_t *x = &a->u.metrics, *y = &b->u.metrics;
        SAME_STR(x->job_id, y->job_id, "job_id");
        SAME(x->attempt, y->attempt, "attempt");
        SAME_STR(x->tm_id, y->tm_id, "tm_id");
        SAME(x->time_ns, y->time_ns, "time_ns");
        SAME(x->nsubtasks, y->nsubtasks, "nsubtasks");
        for (int i = 0; i < x->nsubtasks; i++) {
            const sl_msg_subtask_metrics_t *p = &x->subtasks[i], *q = &y->subtasks[i];
            if (!same_ref(&p->task, &q->task)) return diff("subtask task");
            SAME(p->time_ns, q->time_ns, "subtask time_ns");
            SAME(p->busy_ns, q->busy_ns, "busy_ns");
            SAME(p->idle_ns, q->idle_ns, "idle_ns");
            SAME(p->backpressured_ns, q->backpressured_ns, "backpressured_ns");
            SAME(p->nops, q->nops, "subtask nops");
            for (int k = 0; k < p->nops; k++) {
                const sl_msg_op_metrics_t *u = &p->ops[k], *v = &q->ops[k];
                SAME(u->node, v->node, "op node");
                SAME(u->records_in, v->records_in, "op records_in");
                SAME(u->records_out, v->records_out, "op records_out");
                SAME(u->records_skipped, v->records_skipped, "op records_skipped");
                SAME(u->in_watermark, v->in_watermark, "op in_watermark");
                SAME(u->out_watermark, v->out_watermark, "op out_watermark");
                SAME(u->late_dropped, v->late_dropped, "op late_dropped");
                SAME(u->state_memory_bytes, v->state_memory_bytes, "op state_memory_bytes");
                SAME(u->rdb_mem_tables, v->rdb_mem_tables, "op rdb_mem_tables");
                SAME(u->rdb_table_readers, v->rdb_table_readers, "op rdb_table_readers");
                SAME(u->rdb_block_cache, v->rdb_block_cache, "op rdb_block_cache");
                SAME(u->rdb_live_data, v->rdb_live_data, "op rdb_live_data");
            }
        }
        return true;
    }
    case SL_MSG_STATE_QUERY: {
        const sl_msg_state_query_t *x = &a->u.state_query, *y = &b->u.state_query;
        SAME_STR(x->job_id, y->job_id, "job_id");
        SAME(x->attempt, y->attempt, "attempt");
        if (!same_ref(&x->task, &y->task)) return diff("task");
        SAME(x->request_id, y->request_id, "request_id");
        SAME_STR(x->uid, y->uid, "uid");
        SAME_STR(x->state, y->state, "state");
        if (x->key.len != y->key.len || (x->key.len && memcmp(x->key.p, y->key.p, x->key.len))) return diff("key");
        SAME(x->has_namespace, y->has_namespace, "has_namespace");
        if (x->ns.len != y->ns.len || (x->ns.len && memcmp(x->ns.p, y->ns.p, x->ns.len))) return diff("ns");
        return true;
    }
    case SL_MSG_STATE_QUERY_RESULT: {
        const sl_msg_state_query_result_t *x = &a->u.state_query_result, *y = &b->u.state_query_result;
        SAME_STR(x->job_id, y->job_id, "job_id");
        SAME(x->attempt, y->attempt, "attempt");
        if (!same_ref(&x->task, &y->task)) return diff("task");
        SAME(x->request_id, y->request_id, "request_id");
        SAME(x->status, y->status, "status");
        SAME_STR(x->message, y->message, "message");
        SAME(x->key_group, y->key_group, "key_group");
        if (x->block.len != y->block.len || (x->block.len && memcmp(x->block.p, y->block.p, x->block.len)))
            return diff("block");
        return true;
    }
    default: return diff("unknown type");
    }
}

/* ------------------------------------------------------------------ */
/* Frame helpers. */

static const char *WHERE = "tm-2 (127.0.0.1:5123)";

static void put16(uint8_t *p, uint16_t v) { memcpy(p, &v, 2); }

/* A frame around a hand-written payload. */
static sl_buf_t frame_of(int version, int type, const void *payload, size_t len) {
    sl_buf_t b = {0};
    uint8_t h[SL_MSG_HEADER];
    sl_st32(h, SL_MSG_MAGIC);
    put16(h + 4, (uint16_t)version);
    put16(h + 6, (uint16_t)type);
    sl_st32(h + 8, (uint32_t)len);
    sl_buf_append(&b, h, sizeof h);
    sl_buf_append(&b, payload, len);
    return b;
}

/* Encodes m (must work) into a new buffer. */
static bool encode_ok(const sl_msg_t *m, sl_buf_t *b) {
    memset(b, 0, sizeof *b);
    int rc = sl_msg_encode(m, b, err, sizeof err);
    if (rc) fprintf(stderr, "  encode failed: %s\n", err);
    return rc == 0;
}

/* Encodes m, decodes it: refused with SL_EFORMAT, an error naming WHERE,
 * the type and containing `expect`. */
static bool refused(const sl_msg_t *m, const char *expect) {
    sl_buf_t b;
    if (!encode_ok(m, &b)) return false;
    sl_msg_t out;
    err[0] = 0;
    int rc = sl_msg_decode(b.p, b.len, WHERE, &out, err, sizeof err);
    sl_msg_free(&out);
    sl_buf_free(&b);
    char prefix[256];
    snprintf(prefix, sizeof prefix, "control message from %s: %s: ", WHERE, sl_msg_type_name(m->type));
    if (rc != SL_EFORMAT || strncmp(err, prefix, strlen(prefix)) != 0 || !strstr(err, expect)) {
        fprintf(stderr, "  expected refusal with \"%s\", got rc %d: %s\n", expect, rc, err);
        return false;
    }
    return true;
}

static bool accepted(const sl_msg_t *m) {
    sl_buf_t b;
    if (!encode_ok(m, &b)) return false;
    sl_msg_t out;
    int rc = sl_msg_decode(b.p, b.len, WHERE, &out, err, sizeof err);
    if (rc) fprintf(stderr, "  expected acceptance, got: %s\n", err);
    bool same = rc == 0 && msg_equal(m, &out);
    sl_msg_free(&out);
    sl_buf_free(&b);
    return same;
}

/* ------------------------------------------------------------------ */

TEST(names) {
    const char *names[] = {NULL,   "REGISTER", "REGISTERED", "HEARTBEAT", "DEPLOY",  "CANCEL",
                           "TASK_STATE", "TRIGGER",  "ACK",        "DECLINE",   "COMPLETE", "ABORTED", "METRICS",
                           "STATE_QUERY", "STATE_QUERY_RESULT"};
    for (int t = 1; t <= SL_MSG_TYPE_MAX; t++) CHECK_STR(sl_msg_type_name(t), names[t]);
    CHECK_STR(sl_msg_type_name(0), "unknown");
    CHECK_STR(sl_msg_type_name(SL_MSG_TYPE_MAX + 1), "unknown");
    CHECK_STR(sl_task_state_name(SL_TASK_DEPLOYING), "DEPLOYING");
    CHECK_STR(sl_task_state_name(SL_TASK_RUNNING), "RUNNING");
    CHECK_STR(sl_task_state_name(SL_TASK_FINISHED), "FINISHED");
    CHECK_STR(sl_task_state_name(SL_TASK_CANCELED), "CANCELED");
    CHECK_STR(sl_task_state_name(SL_TASK_FAILED), "FAILED");
    CHECK_STR(sl_task_state_name(5), "unknown");
    CHECK_STR(sl_task_state_name(-1), "unknown");
}

TEST(round_trip) {
    g_max = 50;
    int per_type = 60;
    for (int type = 1; type <= SL_MSG_TYPE_MAX; type++) {
        for (int it = 0; it < per_type; it++) {
            sl_msg_t *m = rmsg(type);
            /* appends after what is already in the buffer */
            sl_buf_t b = {0};
            size_t pre = (size_t)below(20);
            for (size_t i = 0; i < pre; i++) {
                uint8_t c = (uint8_t)i;
                sl_buf_append(&b, &c, 1);
            }
            CHECK_EQ(sl_msg_encode(m, &b, err, sizeof err), 0);
            for (size_t i = 0; i < pre; i++) CHECK_EQ(b.p[i], (uint8_t)i);
            const uint8_t *f = b.p + pre;
            size_t flen = b.len - pre;
            CHECK_EQ(sl_msg_frame_length(f, flen, WHERE, err, sizeof err), (int64_t)flen);
            CHECK_EQ(sl_ld32(f), SL_MSG_MAGIC);
            CHECK_EQ(f[6] | f[7] << 8, type);
            CHECK_EQ(sl_ld32(f + 8), flen - SL_MSG_HEADER);

            sl_msg_t out;
            int rc = sl_msg_decode(f, flen, WHERE, &out, err, sizeof err);
            if (rc) fprintf(stderr, "  %s: %s\n", sl_msg_type_name(type), err);
            CHECK_EQ(rc, 0);
            CHECK(msg_equal(m, &out));

            /* the decoded message encodes to the same bytes */
            sl_buf_t b2 = {0};
            CHECK_EQ(sl_msg_encode(&out, &b2, err, sizeof err), 0);
            CHECK(same_bytes(b2.p, b2.len, f, flen));

            sl_msg_t copy;
            CHECK_EQ(sl_msg_copy(m, &copy, err, sizeof err), 0);
            CHECK(msg_equal(m, &copy));
            sl_msg_free(&copy);
            sl_msg_free(&out);
            sl_buf_free(&b);
            sl_buf_free(&b2);
            sl_msg_destroy(m);
        }
    }
    /* NULL strings travel as "" (a zeroed message with its required fields) */
    sl_msg_t *m = sl_msg_new(SL_MSG_CANCEL);
    m->u.cancel.job_id = sl_strdup("job");
    sl_msg_t out;
    CHECK_EQ(sl_msg_copy(m, &out, err, sizeof err), 0);
    CHECK_STR(out.u.cancel.reason, "");
    CHECK_STR(out.u.cancel.job_id, "job");
    sl_msg_free(&out);
    sl_msg_destroy(m);
}

/* Hand-written protobuf payloads decode to the fields sluice.proto gives
 * them: the wire contract, checked without the encoder. */
TEST(wire_contract) {
    /* TRIGGER: job_id=1 "job-7", attempt=2 3, checkpoint_id=3 300, timestamp=4 1 */
    const uint8_t trig[] = {0x0a, 5, 'j', 'o', 'b', '-', '7', 0x10, 3, 0x18, 0xac, 0x02, 0x20, 1};
    sl_buf_t b = frame_of(1, SL_MSG_TRIGGER, trig, sizeof trig);
    sl_msg_t m;
    CHECK_EQ(sl_msg_decode(b.p, b.len, WHERE, &m, err, sizeof err), 0);
    CHECK_STR(m.u.trigger.job_id, "job-7");
    CHECK_EQ(m.u.trigger.attempt, 3);
    CHECK_EQ(m.u.trigger.checkpoint_id, 300);
    CHECK_EQ(m.u.trigger.timestamp, 1);
    sl_msg_free(&m);
    /* and our encoder writes exactly these bytes for it */
    sl_msg_t *t = sl_msg_new(SL_MSG_TRIGGER);
    t->u.trigger.job_id = sl_strdup("job-7");
    t->u.trigger.attempt = 3;
    t->u.trigger.checkpoint_id = 300;
    t->u.trigger.timestamp = 1;
    sl_buf_t e;
    CHECK(encode_ok(t, &e));
    CHECK(same_bytes(e.p, e.len, b.p, b.len));
    sl_buf_free(&e);
    sl_msg_destroy(t);
    sl_buf_free(&b);

    /* an unknown field (number 15, varint) is skipped: a newer peer's addition */
    const uint8_t trig2[] = {0x0a, 1, 'j', 0x18, 1, 0x78, 0x05};
    b = frame_of(1, SL_MSG_TRIGGER, trig2, sizeof trig2);
    CHECK_EQ(sl_msg_decode(b.p, b.len, WHERE, &m, err, sizeof err), 0);
    CHECK_EQ(m.u.trigger.checkpoint_id, 1);
    sl_msg_free(&m);
    sl_buf_free(&b);

    /* DECLINE without its task (field 4): refused by name */
    const uint8_t dec_ok[] = {0x0a, 1, 'j', 0x18, 1, 0x22, 0x00};
    b = frame_of(1, SL_MSG_DECLINE, dec_ok, sizeof dec_ok);
    CHECK_EQ(sl_msg_decode(b.p, b.len, WHERE, &m, err, sizeof err), 0);
    sl_msg_free(&m);
    sl_buf_free(&b);
    b = frame_of(1, SL_MSG_DECLINE, dec_ok, sizeof dec_ok - 2);
    CHECK_EQ(sl_msg_decode(b.p, b.len, WHERE, &m, err, sizeof err), SL_EFORMAT);
    CHECK_CONTAINS(err, "DECLINE: task is missing");
    sl_msg_free(&m);
    sl_buf_free(&b);

    /* ACK with ops[0] lacking st (OpState field 2) */
    const uint8_t ack[] = {0x0a, 1, 'j', 0x18, 1, 0x22, 0x00, 0x5a, 3, 0x0a, 1, 'u'};
    b = frame_of(1, SL_MSG_ACK, ack, sizeof ack);
    CHECK_EQ(sl_msg_decode(b.p, b.len, WHERE, &m, err, sizeof err), SL_EFORMAT);
    CHECK_CONTAINS(err, "ACK: ops[0].st is missing");
    sl_msg_free(&m);
    sl_buf_free(&b);

    /* a scope that does not even fit the C field (300) */
    /* ACK ops[0] = {uid "u", st = {handles = [{path "f", scope 300, kind 2}]}} */
    const uint8_t ack2[] = {0x0a, 1,    'j',  0x18, 1,    0x22, 0x00, 0x5a, 15,   0x0a, 1,   'u', 0x12,
                            10,   0x22, 8,    0x0a, 1,    'f',  0x10, 0xac, 0x02, 0x18, 0x02};
    b = frame_of(1, SL_MSG_ACK, ack2, sizeof ack2);
    CHECK_EQ(sl_msg_decode(b.p, b.len, WHERE, &m, err, sizeof err), SL_EFORMAT);
    CHECK_CONTAINS(err, "ACK: ops[0].st.handles[0].scope 300 is out of range (0..2)");
    sl_msg_free(&m);
    sl_buf_free(&b);

    /* garbage that is not protobuf (a length running past the end) */
    const uint8_t bad[] = {0x0a, 50, 'j'};
    b = frame_of(1, SL_MSG_CANCEL, bad, sizeof bad);
    CHECK_EQ(sl_msg_decode(b.p, b.len, WHERE, &m, err, sizeof err), SL_EFORMAT);
    CHECK_CONTAINS(err, "control message from tm-2 (127.0.0.1:5123): CANCEL: the payload (3 bytes) is not a valid");
    sl_msg_free(&m);
    sl_buf_free(&b);
}

TEST(header_refusals) {
    g_max = 3;
    sl_msg_t *m = rmsg(SL_MSG_DEPLOY);
    sl_buf_t b;
    CHECK(encode_ok(m, &b));
    /* fewer than 12 bytes: more is needed, whatever they are */
    for (size_t n = 0; n < SL_MSG_HEADER; n++) {
        CHECK_EQ(sl_msg_frame_length(b.p, n, WHERE, err, sizeof err), 0);
        uint8_t junk[SL_MSG_HEADER];
        for (size_t i = 0; i < n; i++) junk[i] = (uint8_t)rnd();
        CHECK_EQ(sl_msg_frame_length(junk, n, WHERE, err, sizeof err), 0);
    }
    CHECK_EQ(sl_msg_frame_length(NULL, 0, WHERE, err, sizeof err), 0);
    CHECK_EQ(sl_msg_frame_length(b.p, SL_MSG_HEADER, WHERE, err, sizeof err), (int64_t)b.len);

    struct {
        int off, width;
        uint32_t value;
        const char *expect;
    } cases[] = {
        {0, 4, 0x4d434c54u, "bad magic 0x4d434c54"},
        {0, 4, 0, "not a sluice control frame"},
        {4, 2, 3, "control message from tm-2 (127.0.0.1:5123): version 3 is newer than this build's 1: upgrade this process"},
        {4, 2, 2, "version 2 is newer than this build's 1: upgrade this process"},
        {4, 2, 65535, "version 65535 is newer"},
        {4, 2, 0, "version 0 is not a protocol version"},
        {6, 2, 0, "unknown message type 0"},
        {6, 2, SL_MSG_TYPE_MAX + 1, "unknown message type 15"},
        {6, 2, 65535, "unknown message type 65535"},
        {8, 4, SL_MSG_MAX_FRAME - SL_MSG_HEADER + 1, "DEPLOY: a frame of 16777217 bytes is over the maximum of 16777216"},
        {8, 4, UINT32_MAX, "is over the maximum"},
    };
    for (size_t c = 0; c < SL_ARRAY_LEN(cases); c++) {
        sl_buf_t x = {0};
        sl_buf_append(&x, b.p, b.len);
        if (cases[c].width == 4)
            sl_st32(x.p + cases[c].off, cases[c].value);
        else
            put16(x.p + cases[c].off, (uint16_t)cases[c].value);
        err[0] = 0;
        CHECK(sl_msg_frame_length(x.p, x.len, WHERE, err, sizeof err) < 0);
        CHECK_CONTAINS(err, cases[c].expect);
        CHECK_CONTAINS(err, "control message from tm-2 (127.0.0.1:5123): ");
        sl_msg_t out;
        err[0] = 0;
        CHECK_EQ(sl_msg_decode(x.p, x.len, WHERE, &out, err, sizeof err), SL_EFORMAT);
        CHECK_CONTAINS(err, cases[c].expect);
        sl_msg_free(&out);
        sl_buf_free(&x);
    }
    /* the largest frame allowed is allowed (by the header) */
    uint8_t h[SL_MSG_HEADER];
    memcpy(h, b.p, SL_MSG_HEADER);
    sl_st32(h + 8, SL_MSG_MAX_FRAME - SL_MSG_HEADER);
    CHECK_EQ(sl_msg_frame_length(h, sizeof h, WHERE, err, sizeof err), SL_MSG_MAX_FRAME);
    /* no `where`: still a message */
    sl_st32(h, 0);
    CHECK(sl_msg_frame_length(h, sizeof h, NULL, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "control message: bad magic");
    CHECK(sl_msg_frame_length(h, sizeof h, NULL, NULL, 0) < 0);
    sl_buf_free(&b);
    sl_msg_destroy(m);
}

TEST(encode_refusals) {
    sl_msg_t *m = sl_msg_new(SL_MSG_DEPLOY);
    m->u.deploy.job_id = sl_strdup("j");
    m->u.deploy.artifact = sl_strdup("a");
    sl_buf_t b = {0};
    /* a count larger than its (missing) array */
    m->u.deploy.nplacements = 5;
    CHECK_EQ(sl_msg_encode(m, &b, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "DEPLOY: nplacements is 5 but placements is NULL");
    CHECK_EQ(b.len, 0);
    m->u.deploy.nplacements = -1;
    CHECK_EQ(sl_msg_encode(m, &b, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "nplacements is negative");
    m->u.deploy.nplacements = 0;
    m->u.deploy.nargs = INT32_MAX;
    m->u.deploy.args = (char **)&m->u.deploy.job_id; /* never read: refused by size first */
    CHECK_EQ(sl_msg_encode(m, &b, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "nargs is 2147483647: more elements than a frame");
    m->u.deploy.nargs = 0;
    m->u.deploy.args = NULL;
    /* a plan over the frame limit, and one that has a length but no bytes */
    m->u.deploy.plan.len = (size_t)SL_MSG_MAX_FRAME + 1;
    m->u.deploy.plan.p = (uint8_t *)m->u.deploy.job_id; /* never read */
    CHECK_EQ(sl_msg_encode(m, &b, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "plan is 16777217 bytes, over the maximum frame");
    m->u.deploy.plan.p = NULL;
    m->u.deploy.plan.len = 3;
    CHECK_EQ(sl_msg_encode(m, &b, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "plan has 3 bytes but no data");
    /* a plan that fits the field but not, with its header, the frame */
    sl_buf_reserve(&m->u.deploy.plan, SL_MSG_MAX_FRAME - 16);
    memset(m->u.deploy.plan.p, 7, SL_MSG_MAX_FRAME - 16);
    m->u.deploy.plan.len = SL_MSG_MAX_FRAME - 16;
    CHECK_EQ(sl_msg_encode(m, &b, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "is over the maximum of 16777216 bytes");
    CHECK_EQ(b.len, 0);
    /* ...and one just under it is a frame the decoder takes */
    m->u.deploy.plan.len = SL_MSG_MAX_FRAME - SL_MSG_HEADER - 16;
    CHECK_EQ(sl_msg_encode(m, &b, err, sizeof err), 0);
    CHECK(b.len <= SL_MSG_MAX_FRAME);
    sl_msg_t out;
    CHECK_EQ(sl_msg_decode(b.p, b.len, WHERE, &out, err, sizeof err), 0);
    CHECK_EQ(out.u.deploy.plan.len, SL_MSG_MAX_FRAME - SL_MSG_HEADER - 16);
    sl_msg_free(&out);
    sl_buf_free(&b);
    sl_msg_destroy(m);

    /* nested counts */
    m = sl_msg_new(SL_MSG_ACK);
    m->u.ack.job_id = sl_strdup("j");
    m->u.ack.checkpoint_id = 1;
    m->u.ack.nops = 2;
    m->u.ack.ops = sl_calloc(2, sizeof *m->u.ack.ops);
    m->u.ack.ops[1].uid = sl_strdup("u");
    m->u.ack.ops[1].st.nhandles = 1;
    m->u.ack.ops[1].st.handles = sl_calloc(1, sizeof *m->u.ack.ops[1].st.handles);
    m->u.ack.ops[1].st.handles[0].path = sl_strdup("f");
    m->u.ack.ops[1].st.handles[0].nsections = 2;
    CHECK_EQ(sl_msg_encode(m, &b, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "ACK: ops[1].st.handles[0].nsections is 2 but ops[1].st.handles[0].sections is NULL");
    m->u.ack.ops[1].st.handles[0].nsections = 0;
    m->u.ack.ops[1].st.nblobs = 1;
    m->u.ack.ops[1].st.blobs = sl_calloc(1, sizeof *m->u.ack.ops[1].st.blobs);
    m->u.ack.ops[1].st.blobs[0].len = 4;
    CHECK_EQ(sl_msg_encode(m, &b, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "ops[1].st.blobs[0].data has 4 bytes but no data");
    sl_msg_destroy(m);
    m = sl_msg_new(SL_MSG_TYPE_MAX + 1);
    CHECK_EQ(sl_msg_encode(m, &b, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "unknown message type 15");
    CHECK_EQ(b.len, 0);
    sl_msg_destroy(m);
    sl_buf_free(&b);
}

/* Every prefix of valid frames is refused (or reported incomplete). */
TEST(truncation) {
    g_max = 6;
    for (int type = 1; type <= SL_MSG_TYPE_MAX; type++) {
        for (int it = 0; it < 4; it++) {
            sl_msg_t *m = rmsg(type);
            sl_buf_t b;
            CHECK(encode_ok(m, &b));
            for (size_t n = 0; n < b.len; n++) {
                uint8_t *p = sl_malloc(n ? n : 1); /* exactly n bytes: ASan sees a read past them */
                memcpy(p, b.p, n);
                int64_t fl = sl_msg_frame_length(p, n, WHERE, err, sizeof err);
                CHECK(n < SL_MSG_HEADER ? fl == 0 : fl == (int64_t)b.len);
                sl_msg_t out;
                err[0] = 0;
                CHECK_EQ(sl_msg_decode(p, n, WHERE, &out, err, sizeof err), SL_EFORMAT);
                CHECK_CONTAINS(err, n < SL_MSG_HEADER ? "truncated header" : "truncated");
                sl_msg_free(&out);
                sl_free(p);
            }
            /* a frame with trailing bytes is not one frame */
            sl_buf_append(&b, "x", 1);
            sl_msg_t out;
            CHECK_EQ(sl_msg_decode(b.p, b.len, WHERE, &out, err, sizeof err), SL_EFORMAT);
            CHECK_CONTAINS(err, "trailing bytes");
            sl_msg_free(&out);
            sl_buf_free(&b);
            sl_msg_destroy(m);
        }
    }
}

/* Random damage to valid frames of every type: decode never crashes, reads
 * out of bounds or leaks (ASan); what it accepts is a valid message that
 * re-encodes and decodes to itself. */
TEST(mutation_fuzz) {
    long iters = 200000;
    const char *env = getenv("SLUICE_FUZZ_ITERS");
    if (env && *env) iters = atol(env);
    g_max = 3;
    enum { NCORPUS = 4 * SL_MSG_TYPE_MAX };
    sl_buf_t corpus[NCORPUS];
    for (int i = 0; i < NCORPUS; i++) {
        sl_msg_t *m = rmsg(1 + i % SL_MSG_TYPE_MAX);
        CHECK(encode_ok(m, &corpus[i]));
        sl_msg_destroy(m);
    }
    long refused_n = 0, accepted_n = 0, by_header = 0, by_protobuf = 0, by_length = 0;
    uint8_t *buf = NULL;
    size_t cap = 0;
    for (long it = 0; it < iters; it++) {
        const sl_buf_t *src = &corpus[below(NCORPUS)];
        size_t len = src->len;
        if (cap < len + 64) {
            cap = len + 64;
            buf = sl_realloc(buf, cap);
        }
        memcpy(buf, src->p, len);
        int nmut = 1 + (int)below(4);
        for (int k = 0; k < nmut; k++) {
            switch (below(8)) {
            case 0:
            case 1: /* flip bits of a byte (payload-heavy) */
                if (len) buf[below(len)] ^= (uint8_t)(1 + below(255));
                break;
            case 2: /* set a byte to a boundary value */
                if (len) {
                    static const uint8_t v[] = {0, 1, 0x7f, 0x80, 0xff};
                    buf[below(len)] = v[below(sizeof v)];
                }
                break;
            case 3: { /* insert up to 8 random bytes */
                size_t n = 1 + (size_t)below(8);
                if (len + n > cap) break;
                size_t at = (size_t)below(len + 1);
                memmove(buf + at + n, buf + at, len - at);
                for (size_t i = 0; i < n; i++) buf[at + i] = (uint8_t)rnd();
                len += n;
                break;
            }
            case 4: { /* delete a range */
                if (!len) break;
                size_t at = (size_t)below(len), n = 1 + (size_t)below(SL_MIN(8, len - at));
                memmove(buf + at, buf + at + n, len - at - n);
                len -= n;
                break;
            }
            case 5: /* truncate */
                len = (size_t)below(len + 1);
                break;
            case 6: /* edit the header's length field */
                if (len >= SL_MSG_HEADER) {
                    uint32_t l = sl_ld32(buf + 8);
                    uint32_t choices[] = {l + 1, l - 1, 0, UINT32_MAX, (uint32_t)rnd(), l + (uint32_t)below(16)};
                    sl_st32(buf + 8, choices[below(SL_ARRAY_LEN(choices))]);
                }
                break;
            case 7: /* edit the type or version */
                if (len >= SL_MSG_HEADER) put16(buf + (coin(2) ? 4 : 6), (uint16_t)below(SL_MSG_TYPE_MAX + 3));
                break;
            }
        }
        /* mostly keep the header consistent, so the payload's damage reaches protobuf-c and validation */
        if (len >= SL_MSG_HEADER && !coin(4)) sl_st32(buf + 8, (uint32_t)(len - SL_MSG_HEADER));
        uint8_t *exact = sl_malloc(len ? len : 1); /* exactly len bytes, for ASan */
        memcpy(exact, buf, len);
        sl_msg_t out;
        int rc = sl_msg_decode(exact, len, WHERE, &out, err, sizeof err);
        if (rc) {
            CHECK_EQ(rc, SL_EFORMAT);
            CHECK_CONTAINS(err, "control message from tm-2 (127.0.0.1:5123): ");
            refused_n++;
            if (sl_msg_frame_length(exact, len, WHERE, NULL, 0) < 0 || len < SL_MSG_HEADER)
                by_header++;
            else if (strstr(err, "is not a valid protobuf"))
                by_protobuf++;
            else if (strstr(err, "truncated") || strstr(err, "trailing bytes"))
                by_length++;
        } else {
            accepted_n++;
            sl_msg_t again;
            sl_buf_t b;
            CHECK(encode_ok(&out, &b));
            CHECK_EQ(sl_msg_decode(b.p, b.len, WHERE, &again, err, sizeof err), 0);
            CHECK(msg_equal(&out, &again));
            sl_msg_free(&again);
            sl_buf_free(&b);
        }
        sl_msg_free(&out);
        sl_free(exact);
    }
    long by_fields = refused_n - by_header - by_protobuf - by_length;
    fprintf(stderr,
            "  fuzz: %ld iterations: %ld refused (header %ld, frame length %ld, not protobuf %ld, a field %ld), "
            "%ld accepted\n",
            iters, refused_n, by_header, by_length, by_protobuf, by_fields, accepted_n);
    CHECK(refused_n > 0);
    CHECK(accepted_n > 0);
    CHECK(by_protobuf > 0); /* the damage reaches protobuf-c */
    CHECK(by_fields > 0);   /* and the field checks after it */
    sl_free(buf);
    for (int i = 0; i < NCORPUS; i++) sl_buf_free(&corpus[i]);
}

/* A small valid ACK with one op state of one handle and two blobs. */
static sl_msg_t *small_ack(void) {
    sl_msg_t *m = sl_msg_new(SL_MSG_ACK);
    sl_msg_ack_t *a = &m->u.ack;
    a->job_id = sl_strdup("job-1");
    a->checkpoint_id = 4;
    a->task = (sl_msg_task_ref_t){1, 2, 5};
    a->nops = 2;
    a->ops = sl_calloc(2, sizeof *a->ops);
    for (int i = 0; i < 2; i++) {
        a->ops[i].uid = sl_strdup(i ? "uid-b" : "uid-a");
        sl_ckpt_subtask_t *st = &a->ops[i].st;
        st->index = 2;
        st->range = (sl_kg_range_t){64, 96};
        st->nhandles = 1;
        st->handles = sl_calloc(1, sizeof *st->handles);
        st->handles[0].path = sl_strdup("state-2.sf");
        st->handles[0].kind = 2;
        st->handles[0].size = 1000;
        st->handles[0].nsections = 2;
        st->handles[0].sections = sl_calloc(2, sizeof *st->handles[0].sections);
        st->handles[0].sections[0] = (sl_sf_section_t){64, 16, 100, 1};
        st->handles[0].sections[1] = (sl_sf_section_t){65, 116, 884, 2};
        st->nblobs = 2;
        st->blobs = sl_calloc(2, sizeof *st->blobs);
        st->blobs[0].name = sl_strdup("offsets");
        st->blobs[1].name = sl_strdup("pending");
        st->blobs[1].data = sl_malloc(3);
        memcpy(st->blobs[1].data, "\0\1\2", 3);
        st->blobs[1].len = 3;
    }
    return m;
}

static sl_msg_t *small_deploy(void) {
    sl_msg_t *m = sl_msg_new(SL_MSG_DEPLOY);
    sl_msg_deploy_t *d = &m->u.deploy;
    d->job_id = sl_strdup("job-1");
    d->artifact = sl_strdup("fraud");
    d->restore_path = sl_strdup("");
    d->npeers = 2;
    d->peers = sl_calloc(2, sizeof *d->peers);
    for (int i = 0; i < 2; i++) {
        d->peers[i].tm_id = sl_strdup(i ? "tm-3" : "tm-1");
        d->peers[i].host = sl_strdup("127.0.0.1");
        d->peers[i].data_port = 7000 + i;
    }
    d->ntasks = 2;
    d->tasks = sl_calloc(2, sizeof *d->tasks);
    d->tasks[0] = (sl_msg_task_ref_t){0, 0, 0};
    d->tasks[1] = (sl_msg_task_ref_t){1, 0, 2};
    d->nplacements = 4;
    d->placements = sl_calloc(4, sizeof *d->placements);
    for (int i = 0; i < 4; i++) {
        d->placements[i].task = (sl_msg_task_ref_t){i / 2, i % 2, i};
        d->placements[i].peer = i % 3 - 1;
    }
    return m;
}

TEST(validation) {
    sl_msg_t *m = small_ack();
    CHECK(accepted(m));
    sl_ckpt_subtask_t *st = &m->u.ack.ops[1].st;
    /* key-group ranges: start <= end <= 32768 */
    st->range = (sl_kg_range_t){10, 5};
    CHECK(refused(m, "ops[1].st.range [10, 5) is not a key-group range"));
    st->range = (sl_kg_range_t){0, SL_CKPT_MAX_PARALLELISM + 1};
    CHECK(refused(m, "ops[1].st.range [0, 32769)"));
    st->range = (sl_kg_range_t){-1, 3};
    CHECK(refused(m, "ops[1].st.range [-1, 3)"));
    st->range = (sl_kg_range_t){SL_CKPT_MAX_PARALLELISM, SL_CKPT_MAX_PARALLELISM};
    CHECK(accepted(m));
    st->range = (sl_kg_range_t){0, SL_CKPT_MAX_PARALLELISM};
    CHECK(accepted(m));
    st->range = (sl_kg_range_t){7, 7};
    CHECK(accepted(m));
    /* handle paths */
    const char *bad_paths[] = {"../x", "..", ".", "", "a/b", "/etc/passwd", "x\ny"};
    for (size_t i = 0; i < SL_ARRAY_LEN(bad_paths); i++) {
        sl_free(st->handles[0].path);
        st->handles[0].path = sl_strdup(bad_paths[i]);
        CHECK(refused(m, "ops[1].st.handles[0].path '"));
        CHECK_CONTAINS(err, "is not a plain file name");
    }
    sl_free(st->handles[0].path);
    st->handles[0].path = sl_strdup("../x");
    CHECK(refused(m, "ACK: ops[1].st.handles[0].path '../x' is not a plain file name"));
    CHECK_STR(strstr(err, "control message"), err);
    sl_free(st->handles[0].path);
    st->handles[0].path = sl_strdup("x\ny");
    CHECK(refused(m, "path 'x\\x0ay' is not a plain file name")); /* escaped in the error */
    sl_free(st->handles[0].path);
    st->handles[0].path = sl_strdup("ok.sf");
    CHECK(accepted(m));
    /* scopes, distributions, kinds */
    st->handles[0].scope = 3;
    CHECK(refused(m, "ops[1].st.handles[0].scope 3 is out of range (0..2)"));
    st->handles[0].scope = SL_CKPT_SCOPE_TASKOWNED;
    CHECK(accepted(m));
    st->handles[0].kind = 0;
    CHECK(refused(m, "ops[1].st.handles[0].kind is 0"));
    st->handles[0].kind = 2;
    st->blobs[1].distribution = 3;
    CHECK(refused(m, "ops[1].st.blobs[1].distribution 3 is out of range (0..2)"));
    st->blobs[1].distribution = SL_CKPT_DIST_BROADCAST;
    CHECK(accepted(m));
    /* sections: ascending, inside the file */
    st->handles[0].sections[1].id = 64;
    CHECK(refused(m, "ops[1].st.handles[0].sections[1].id 64 is not above the previous section's 64"));
    st->handles[0].sections[1].id = 65;
    st->handles[0].sections[1].length = 885;
    CHECK(refused(m, "ops[1].st.handles[0].sections[1] (offset 116, length 885) lies outside the file's 1000 bytes"));
    st->handles[0].sections[1].length = 884;
    st->handles[0].sections[1].offset = UINT64_MAX;
    CHECK(refused(m, "lies outside the file"));
    st->handles[0].sections[1].offset = 116;
    CHECK(accepted(m));
    /* names */
    sl_free(st->blobs[1].name);
    st->blobs[1].name = sl_strdup("offsets");
    CHECK(refused(m, "ops[1].st.blobs: name 'offsets' appears twice"));
    sl_free(st->blobs[1].name);
    st->blobs[1].name = sl_strdup("");
    CHECK(refused(m, "ops[1].st.blobs[1].name is empty"));
    sl_free(st->blobs[1].name);
    st->blobs[1].name = sl_strdup("pending");
    sl_free(m->u.ack.ops[1].uid);
    m->u.ack.ops[1].uid = sl_strdup("uid-a");
    CHECK(refused(m, "ACK: ops: uid 'uid-a' appears twice"));
    sl_free(m->u.ack.ops[1].uid);
    m->u.ack.ops[1].uid = sl_strdup("uid-b");
    /* the op state belongs to the task's subtask */
    st->index = 3;
    CHECK(refused(m, "ops[1].st.index 3 is not the task's subtask 2"));
    st->index = 2;
    m->u.ack.task.vertex = -1;
    CHECK(refused(m, "task.vertex -1 is negative"));
    m->u.ack.task.vertex = 1;
    m->u.ack.checkpoint_id = 0;
    CHECK(refused(m, "checkpoint_id 0 (ids start at 1)"));
    m->u.ack.checkpoint_id = 4;
    m->u.ack.sync_us = -5;
    CHECK(refused(m, "sync_us -5 is negative"));
    m->u.ack.sync_us = 0;
    CHECK(accepted(m));
    sl_msg_destroy(m);

    /* DEPLOY: placements, peers, tasks */
    m = small_deploy();
    CHECK(accepted(m));
    sl_msg_deploy_t *d = &m->u.deploy;
    d->placements[3].peer = 7;
    CHECK(refused(m, "placements[3].peer 7 is out of range (2 peers)"));
    CHECK_STR(err, "control message from tm-2 (127.0.0.1:5123): DEPLOY: placements[3].peer 7 is out of range (2 peers)");
    d->placements[3].peer = 2;
    CHECK(refused(m, "placements[3].peer 2 is out of range (2 peers)"));
    d->placements[3].peer = -2;
    CHECK(refused(m, "placements[3].peer -2 is out of range"));
    d->placements[3].peer = 1;
    CHECK(accepted(m));
    d->placements[3].peer = -1;
    CHECK(accepted(m));
    d->placements[2].task.index = 0;
    CHECK(refused(m, "placements: task index 0 appears twice"));
    d->placements[2].task.index = 2;
    d->placements[1].task.subtask = -4;
    CHECK(refused(m, "placements[1].task.subtask -4 is negative"));
    d->placements[1].task.subtask = 1;
    d->tasks[1].index = 0;
    CHECK(refused(m, "tasks: task index 0 appears twice"));
    d->tasks[1].index = 2;
    d->peers[1].data_port = 0;
    CHECK(refused(m, "peers[1].data_port 0 is not a port (1..65535)"));
    d->peers[1].data_port = 65536;
    CHECK(refused(m, "peers[1].data_port 65536 is not a port"));
    d->peers[1].data_port = 65535;
    sl_free(d->peers[0].host);
    d->peers[0].host = sl_strdup("");
    CHECK(refused(m, "peers[0].host is empty"));
    sl_free(d->peers[0].host);
    d->peers[0].host = sl_strdup("10.0.0.1");
    d->restore_checkpoint = 3;
    CHECK(refused(m, "restore_checkpoint 3 and restore_path empty disagree"));
    sl_free(d->restore_path);
    d->restore_path = sl_strdup("/ckpt/job-1/chk-3");
    CHECK(accepted(m));
    sl_free(d->artifact);
    d->artifact = NULL; /* travels as "" */
    CHECK(refused(m, "DEPLOY: artifact is empty"));
    d->artifact = sl_strdup("fraud");
    d->attempt = -1;
    CHECK(refused(m, "attempt -1 is negative"));
    d->attempt = 0;
    CHECK(accepted(m));
    sl_msg_destroy(m);

    /* required strings of every type */
    for (int type = 1; type <= SL_MSG_TYPE_MAX; type++) {
        g_max = 2;
        m = rmsg(type);
        char **field = NULL;
        const char *name = NULL;
        switch (type) {
        case SL_MSG_REGISTER: field = &m->u.reg.tm_id, name = "tm_id"; break;
        case SL_MSG_REGISTERED: field = &m->u.registered.jm_id, name = "jm_id"; break;
        case SL_MSG_HEARTBEAT: field = &m->u.heartbeat.sender, name = "sender"; break;
        case SL_MSG_DEPLOY: field = &m->u.deploy.job_id, name = "job_id"; break;
        case SL_MSG_CANCEL: field = &m->u.cancel.job_id, name = "job_id"; break;
        case SL_MSG_TASK_STATE: field = &m->u.task_state.job_id, name = "job_id"; break;
        case SL_MSG_TRIGGER: field = &m->u.trigger.job_id, name = "job_id"; break;
        case SL_MSG_ACK: field = &m->u.ack.job_id, name = "job_id"; break;
        case SL_MSG_DECLINE: field = &m->u.decline.job_id, name = "job_id"; break;
        case SL_MSG_METRICS: field = &m->u.metrics.job_id, name = "job_id"; break;
        case SL_MSG_STATE_QUERY: field = &m->u.state_query.job_id, name = "job_id"; break;
        case SL_MSG_STATE_QUERY_RESULT: field = &m->u.state_query_result.job_id, name = "job_id"; break;
        default: field = &m->u.notify.job_id, name = "job_id"; break;
        }
        CHECK(accepted(m));
        sl_free(*field);
        *field = sl_strdup("");
        char expect[64];
        snprintf(expect, sizeof expect, "%s: %s is empty", sl_msg_type_name(type), name);
        CHECK(refused(m, expect));
        sl_msg_destroy(m);
    }

    /* STATE_QUERY: an operator, a request id, a key within bounds, a
     * namespace only when flagged */
    g_max = 2;
    m = rmsg(SL_MSG_STATE_QUERY);
    CHECK(accepted(m));
    m->u.state_query.request_id = 0;
    CHECK(refused(m, "STATE_QUERY: request_id is 0"));
    m->u.state_query.request_id = 7;
    sl_free(m->u.state_query.uid);
    m->u.state_query.uid = sl_strdup("");
    CHECK(refused(m, "STATE_QUERY: uid is empty"));
    sl_free(m->u.state_query.uid);
    m->u.state_query.uid = sl_strdup("counter");
    m->u.state_query.key.len = 0;
    for (int i = 0; i <= SL_MSG_STATE_QUERY_MAX_KEY; i++) sl_buf_append(&m->u.state_query.key, "k", 1);
    CHECK(refused(m, "STATE_QUERY: key is 1025 bytes, over the maximum of 1024"));
    m->u.state_query.key.len = SL_MSG_STATE_QUERY_MAX_KEY;
    CHECK(accepted(m));
    m->u.state_query.has_namespace = false;
    m->u.state_query.ns.len = 0;
    sl_buf_append(&m->u.state_query.ns, "w", 1);
    CHECK(refused(m, "STATE_QUERY: ns given (1 bytes) without has_namespace"));
    m->u.state_query.has_namespace = true;
    CHECK(accepted(m));
    m->u.state_query.task.subtask = -1;
    CHECK(refused(m, "STATE_QUERY: task.subtask -1 is negative"));
    sl_msg_destroy(m);

    /* STATE_QUERY_RESULT: a known status; OK has a block and a key group,
     * a failure a message and no block */
    m = rmsg(SL_MSG_STATE_QUERY_RESULT);
    sl_msg_state_query_result_t *qr = &m->u.state_query_result;
    qr->status = SL_SQ_OK;
    sl_free(qr->message);
    qr->message = sl_strdup("");
    qr->key_group = 5;
    qr->block.len = 0;
    sl_buf_append(&qr->block, "SLKS", 4);
    CHECK(accepted(m));
    qr->key_group = SL_CKPT_MAX_PARALLELISM;
    CHECK(refused(m, "STATE_QUERY_RESULT: key_group 32768 is out of range (0..32767)"));
    qr->key_group = -1;
    CHECK(refused(m, "STATE_QUERY_RESULT: key_group -1 is out of range"));
    qr->key_group = 5;
    qr->block.len = 0;
    CHECK(refused(m, "STATE_QUERY_RESULT: status OK without a block"));
    qr->status = SL_SQ_STATUS_MAX + 1;
    CHECK(refused(m, "STATE_QUERY_RESULT: status 5 is not a state query status (0..4)"));
    qr->status = -1;
    CHECK(refused(m, "STATE_QUERY_RESULT: status -1 is not a state query status"));
    qr->status = SL_SQ_NO_STATE;
    CHECK(refused(m, "STATE_QUERY_RESULT: message is empty"));
    sl_free(qr->message);
    qr->message = sl_strdup("no state 'x'");
    CHECK(accepted(m));
    sl_buf_append(&qr->block, "SLKS", 4);
    CHECK(refused(m, "STATE_QUERY_RESULT: status 2 (not OK) with a block of 4 bytes"));
    qr->request_id = 0;
    qr->block.len = 0;
    CHECK(refused(m, "STATE_QUERY_RESULT: request_id is 0"));
    sl_msg_destroy(m);

    /* METRICS: the TaskManager is named; cumulative figures are never
     * negative; each subtask once; watermarks may be anything */
    g_max = 3;
    do {
        m = rmsg(SL_MSG_METRICS);
        if (m->u.metrics.nsubtasks >= 2 && m->u.metrics.subtasks[0].nops >= 1) break;
        sl_msg_destroy(m);
    } while (1);
    CHECK(accepted(m));
    sl_free(m->u.metrics.tm_id);
    m->u.metrics.tm_id = sl_strdup("");
    CHECK(refused(m, "METRICS: tm_id is empty"));
    sl_free(m->u.metrics.tm_id);
    m->u.metrics.tm_id = sl_strdup("tm-1");
    m->u.metrics.subtasks[1].busy_ns = -1;
    CHECK(refused(m, "subtasks[1].busy_ns -1 is negative"));
    m->u.metrics.subtasks[1].busy_ns = 5;
    m->u.metrics.subtasks[0].ops[0].late_dropped = -2;
    CHECK(refused(m, "subtasks[0].ops[0].late_dropped -2 is negative"));
    m->u.metrics.subtasks[0].ops[0].late_dropped = 0;
    m->u.metrics.subtasks[0].ops[0].state_memory_bytes = -2;
    CHECK(refused(m, "subtasks[0].ops[0].state_memory_bytes is -2"));
    m->u.metrics.subtasks[0].ops[0].state_memory_bytes = -1;
    m->u.metrics.subtasks[0].ops[0].rdb_live_data = -7;
    CHECK(refused(m, "subtasks[0].ops[0].rdb_live_data is -7"));
    m->u.metrics.subtasks[0].ops[0].rdb_live_data = 12345;
    m->u.metrics.subtasks[0].ops[0].in_watermark = INT64_MIN;
    m->u.metrics.subtasks[0].ops[0].out_watermark = -5;
    CHECK(accepted(m));
    m->u.metrics.subtasks[1].task.index = m->u.metrics.subtasks[0].task.index;
    CHECK(refused(m, "subtasks: task index"));
    sl_msg_destroy(m);

    /* other per-type rules */
    m = sl_msg_new(SL_MSG_REGISTERED);
    m->u.registered.jm_id = sl_strdup("jobmanager");
    CHECK(refused(m, "REGISTERED: a refusal without a reason"));
    m->u.registered.accepted = true;
    CHECK(accepted(m));
    sl_msg_destroy(m);
    m = sl_msg_new(SL_MSG_HEARTBEAT);
    m->u.heartbeat.sender = sl_strdup("tm-1");
    m->u.heartbeat.slots_total = 4;
    m->u.heartbeat.slots_free = 5;
    CHECK(refused(m, "slots_free 5 is outside 0..4"));
    m->u.heartbeat.slots_free = 4;
    CHECK(accepted(m));
    sl_msg_destroy(m);
    m = sl_msg_new(SL_MSG_TASK_STATE);
    sl_msg_task_state_t *t = &m->u.task_state;
    t->job_id = sl_strdup("j");
    t->state = 5;
    CHECK(refused(m, "TASK_STATE: state 5 is not a task state"));
    t->state = SL_TASK_RUNNING;
    t->nmetrics = 1;
    t->metrics = sl_calloc(1, sizeof *t->metrics);
    CHECK(refused(m, "metrics given for a task that is RUNNING"));
    t->state = SL_TASK_FAILED;
    t->error_code = 3;
    CHECK(refused(m, "error_code 3 is not an SL_E* code"));
    t->error_code = SL_EUSER;
    t->metrics[0].records_out = -1;
    CHECK(refused(m, "metrics[0].records_out -1 is negative"));
    t->metrics[0].records_out = 1;
    t->nfinal = 1;
    t->final_state = sl_calloc(1, sizeof *t->final_state);
    t->final_state[0].uid = sl_strdup("src");
    CHECK(refused(m, "final_state given for a task that is FAILED, not FINISHED"));
    t->state = SL_TASK_FINISHED;
    CHECK(accepted(m));
    sl_msg_destroy(m);
}

/* A NUL inside a string is refused by name (never silently cut short), and
 * a decode that fails deep inside a message leaves nothing leaked. */
TEST(embedded_nul_and_partial_free) {
    sl_msg_t *m = small_ack();
    sl_free(m->u.ack.ops[1].st.blobs[1].name);
    m->u.ack.ops[1].st.blobs[1].name = sl_strdup("pend#ng");
    sl_buf_t b;
    CHECK(encode_ok(m, &b));
    uint8_t *hash = memmem(b.p, b.len, "pend#ng", 7);
    CHECK(hash != NULL);
    hash[4] = 0;
    sl_msg_t out;
    CHECK_EQ(sl_msg_decode(b.p, b.len, WHERE, &out, err, sizeof err), SL_EFORMAT);
    CHECK_CONTAINS(err, "ACK: ops[1].st.blobs[1].name contains a NUL byte");
    /* half built: ops[0] complete, ops[1] partly */
    CHECK_EQ(out.type, SL_MSG_ACK);
    CHECK_EQ(out.u.ack.nops, 2);
    CHECK_STR(out.u.ack.ops[0].st.blobs[1].name, "pending");
    sl_msg_free(&out);
    sl_buf_free(&b);

    sl_free(m->u.ack.job_id);
    m->u.ack.job_id = sl_strdup("job-Q");
    CHECK(encode_ok(m, &b));
    uint8_t *q = memmem(b.p, b.len, "job-Q", 5);
    CHECK(q != NULL);
    q[4] = 0;
    CHECK_EQ(sl_msg_decode(b.p, b.len, WHERE, &out, err, sizeof err), SL_EFORMAT);
    CHECK_CONTAINS(err, "ACK: job_id contains a NUL byte");
    sl_msg_free(&out);
    sl_buf_free(&b);
    sl_msg_destroy(m);
}

int main(void) {
    const char *seed = getenv("SLUICE_TEST_SEED");
    uint64_t s = seed && *seed ? strtoull(seed, NULL, 0) : (uint64_t)sl_wall_ms();
    fprintf(stderr, "seed %" PRIu64 " (SLUICE_TEST_SEED to repeat)\n", s);
    rng_state = s;
    RUN(names);
    RUN(round_trip);
    RUN(wire_contract);
    RUN(header_refusals);
    RUN(encode_refusals);
    RUN(truncation);
    RUN(mutation_fuzz);
    RUN(validation);
    RUN(embedded_nul_and_partial_free);
    TEST_MAIN_END();
}
