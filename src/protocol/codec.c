/*
 * codec.c — the control-plane wire format (messages.h): a 12-byte frame
 * header, then the message as protobuf (sluice.proto, packed and unpacked
 * by protobuf-c's generated code).
 *
 *   u32 magic "SLCM"  u16 version  u16 type  u32 payload length   (little-endian)
 *
 * Encoding converts the C message into protobuf-c structs that point into
 * it (no copy of strings or buffers), packs them and frees the scaffolding.
 * It refuses only what cannot be represented: negative counts, a count
 * without its array, more elements or bytes than a frame can hold, a string
 * that does not end within a frame's size.  It does not judge the values:
 * the receiver does.
 *
 * Decoding trusts nothing.  The header is checked first (sl_msg_frame_length),
 * then protobuf-c unpacks the payload (its allocations are bounded by the
 * payload's bytes; every sub-message has a fixed nesting depth, so there is
 * no recursion to exhaust), then the result is converted into the C message
 * (every array allocated zeroed with its count set at once, so sl_msg_free
 * can free a half-built message) and validated field by field.  Every error
 * names the connection, the message type and the field:
 *
 *   control message from tm-2 (127.0.0.1:5123): DEPLOY: placements[3].peer 7 is out of range (2 peers)
 *
 * Strings travel as protobuf `bytes` (see sluice.proto) so that an embedded
 * NUL is refused rather than cutting the string short; strings quoted in
 * errors are escaped and shortened, so a hostile peer cannot forge log lines.
 *
 * Threads: every function here may be called from any thread; they share no
 * state (protobuf-c allocates with malloc through its default allocator).
 */
#include "protocol/messages.h"

#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#include "checkpoint/ckpt_config.h"
#include "common/common.h"
#include "protocol/sluice.pb-c.h"

/* The oldest frame version this build reads. */
#define MIN_VERSION 1u

/* A repeated element costs at least two bytes on the wire (tag + length),
 * so no frame holds more elements than this; a count above it cannot be
 * encoded and is refused before anything is allocated. */
#define MAX_ELEMS (SL_MSG_MAX_FRAME / 2)

static const ProtobufCMessageDescriptor *descriptor_of(int type) {
    switch (type) {
    case SL_MSG_REGISTER: return &slctl__register__descriptor;
    case SL_MSG_REGISTERED: return &slctl__registered__descriptor;
    case SL_MSG_HEARTBEAT: return &slctl__heartbeat__descriptor;
    case SL_MSG_DEPLOY: return &slctl__deploy__descriptor;
    case SL_MSG_CANCEL: return &slctl__cancel__descriptor;
    case SL_MSG_TASK_STATE: return &slctl__task_state__descriptor;
    case SL_MSG_TRIGGER: return &slctl__trigger__descriptor;
    case SL_MSG_ACK: return &slctl__ack__descriptor;
    case SL_MSG_DECLINE: return &slctl__decline__descriptor;
    case SL_MSG_COMPLETE:
    case SL_MSG_ABORTED: return &slctl__notify__descriptor;
    case SL_MSG_METRICS: return &slctl__metrics__descriptor;
    case SL_MSG_STATE_QUERY: return &slctl__state_query__descriptor;
    case SL_MSG_STATE_QUERY_RESULT: return &slctl__state_query_result__descriptor;
    default: return NULL;
    }
}

/* ================================================================== */
/* Encoding. */

typedef struct enc {
    int type;
    char *err;
    size_t errlen;
    int rc;          /* the first error; later ones are not reported */
    size_t elems;    /* repeated elements so far (bounded by MAX_ELEMS) */
    void **allocs;   /* the scaffolding, freed after packing */
    size_t nallocs, cap;
} enc_t;

static bool efail(enc_t *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static bool efail(enc_t *e, const char *fmt, ...) {
    if (e->rc) return false;
    e->rc = SL_EINVAL;
    if (e->err && e->errlen) {
        int n = snprintf(e->err, e->errlen, "cannot encode %s: ", sl_msg_type_name(e->type));
        if (n >= 0 && (size_t)n < e->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(e->err + n, e->errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return false;
}

/* n zeroed elements (n <= MAX_ELEMS, checked by ecount), kept until the end
 * of the encode; NULL for none. */
static void *ealloc(enc_t *e, size_t n, size_t size) {
    if (!n) return NULL;
    void *p = sl_calloc(n, size);
    if (e->nallocs == e->cap) {
        e->cap = e->cap ? e->cap * 2 : 16;
        e->allocs = sl_realloc(e->allocs, e->cap * sizeof *e->allocs);
    }
    e->allocs[e->nallocs++] = p;
    return p;
}

/* A count and its array: non-negative, an array when non-zero, and (over
 * the whole message) no more elements than a frame can hold. */
static bool ecount(enc_t *e, const char *prefix, const char *cname, const char *aname, int n, const void *arr) {
    if (n < 0) return efail(e, "%s%s is negative (%d)", prefix, cname, n);
    if (n > 0 && !arr) return efail(e, "%s%s is %d but %s%s is NULL", prefix, cname, n, prefix, aname);
    e->elems += (size_t)n;
    if (e->elems > MAX_ELEMS)
        return efail(e, "%s%s is %d: more elements than a frame of %u bytes can hold", prefix, cname, n,
                     SL_MSG_MAX_FRAME);
    return true;
}

/* A string as protobuf bytes pointing into it; NULL is "".  pathfmt names
 * the field (formatted only on error). */
static ProtobufCBinaryData estr(enc_t *e, const char *s, const char *pathfmt, ...)
    __attribute__((format(printf, 3, 4)));
static ProtobufCBinaryData estr(enc_t *e, const char *s, const char *pathfmt, ...) {
    ProtobufCBinaryData b = {0, NULL};
    if (!s) return b;
    size_t n = strnlen(s, SL_MSG_MAX_FRAME);
    if (n == SL_MSG_MAX_FRAME) {
        char path[256];
        va_list ap;
        va_start(ap, pathfmt);
        vsnprintf(path, sizeof path, pathfmt, ap);
        va_end(ap);
        efail(e, "%s is not NUL-terminated within %u bytes", path, SL_MSG_MAX_FRAME);
        return b;
    }
    b.len = n;
    b.data = (uint8_t *)(uintptr_t)s; /* packing only reads it */
    return b;
}

static ProtobufCBinaryData ebytes(enc_t *e, const void *p, size_t len, const char *path) {
    ProtobufCBinaryData b = {0, NULL};
    if (len > 0 && !p) {
        efail(e, "%s has %zu bytes but no data", path, len);
        return b;
    }
    if (len > SL_MSG_MAX_FRAME) {
        efail(e, "%s is %zu bytes, over the maximum frame of %u bytes", path, len, SL_MSG_MAX_FRAME);
        return b;
    }
    b.len = len;
    b.data = (uint8_t *)(uintptr_t)p;
    return b;
}

static Slctl__TaskRef *eref(const sl_msg_task_ref_t *r, Slctl__TaskRef *into) {
    slctl__task_ref__init(into);
    into->vertex = r->vertex;
    into->subtask = r->subtask;
    into->index = r->index;
    return into;
}

static void esubtask(enc_t *e, const sl_ckpt_subtask_t *st, Slctl__Subtask *out, const char *prefix) {
    slctl__subtask__init(out);
    out->index = st->index;
    out->kg_start = st->range.start;
    out->kg_end = st->range.end;
    char path[320];
    if (ecount(e, prefix, "nhandles", "handles", st->nhandles, st->handles) && st->nhandles > 0) {
        size_t n = (size_t)st->nhandles;
        Slctl__Handle *h = ealloc(e, n, sizeof *h);
        out->handles = ealloc(e, n, sizeof *out->handles);
        out->n_handles = n;
        for (size_t i = 0; i < n; i++) {
            const sl_ckpt_state_handle_t *sh = &st->handles[i];
            slctl__handle__init(&h[i]);
            out->handles[i] = &h[i];
            h[i].path = estr(e, sh->path, "%shandles[%zu].path", prefix, i);
            h[i].scope = sh->scope;
            h[i].kind = sh->kind;
            h[i].size = sh->size;
            h[i].checksum = sh->checksum;
            snprintf(path, sizeof path, "%shandles[%zu].", prefix, i);
            if (!ecount(e, path, "nsections", "sections", sh->nsections, sh->sections) || sh->nsections == 0)
                continue;
            size_t ns = (size_t)sh->nsections;
            Slctl__Section *s = ealloc(e, ns, sizeof *s);
            h[i].sections = ealloc(e, ns, sizeof *h[i].sections);
            h[i].n_sections = ns;
            for (size_t k = 0; k < ns; k++) {
                slctl__section__init(&s[k]);
                s[k].id = sh->sections[k].id;
                s[k].offset = sh->sections[k].offset;
                s[k].length = sh->sections[k].length;
                s[k].checksum = sh->sections[k].checksum;
                h[i].sections[k] = &s[k];
            }
        }
    }
    if (ecount(e, prefix, "nblobs", "blobs", st->nblobs, st->blobs) && st->nblobs > 0) {
        size_t n = (size_t)st->nblobs;
        Slctl__Blob *b = ealloc(e, n, sizeof *b);
        out->blobs = ealloc(e, n, sizeof *out->blobs);
        out->n_blobs = n;
        for (size_t i = 0; i < n; i++) {
            slctl__blob__init(&b[i]);
            out->blobs[i] = &b[i];
            b[i].name = estr(e, st->blobs[i].name, "%sblobs[%zu].name", prefix, i);
            b[i].distribution = st->blobs[i].distribution;
            snprintf(path, sizeof path, "%sblobs[%zu].data", prefix, i);
            b[i].data = ebytes(e, st->blobs[i].data, st->blobs[i].len, path);
        }
    }
}

/* ops[n] -> OpState pointers; *count set. */
static Slctl__OpState **eops(enc_t *e, const sl_msg_op_state_t *ops, int n, const char *cname, const char *aname,
                             size_t *count) {
    *count = 0;
    if (!ecount(e, "", cname, aname, n, ops) || n == 0) return NULL;
    size_t k = (size_t)n;
    Slctl__OpState *o = ealloc(e, k, sizeof *o);
    Slctl__Subtask *st = ealloc(e, k, sizeof *st);
    Slctl__OpState **pp = ealloc(e, k, sizeof *pp);
    char prefix[96];
    for (size_t i = 0; i < k; i++) {
        slctl__op_state__init(&o[i]);
        o[i].uid = estr(e, ops[i].uid, "%s[%zu].uid", aname, i);
        snprintf(prefix, sizeof prefix, "%s[%zu].st.", aname, i);
        esubtask(e, &ops[i].st, &st[i], prefix);
        o[i].st = &st[i];
        pp[i] = &o[i];
    }
    *count = k;
    return pp;
}

/* Every top-level protobuf message, to pack one through its base. */
typedef union pbmsg {
    ProtobufCMessage base;
    Slctl__Register reg;
    Slctl__Registered registered;
    Slctl__Heartbeat heartbeat;
    Slctl__Deploy deploy;
    Slctl__Cancel cancel;
    Slctl__TaskState task_state;
    Slctl__Trigger trigger;
    Slctl__Ack ack;
    Slctl__Decline decline;
    Slctl__Notify notify;
    Slctl__Metrics metrics;
    Slctl__StateQuery state_query;
    Slctl__StateQueryResult state_query_result;
} pbmsg_t;

static void edeploy(enc_t *e, const sl_msg_deploy_t *d, Slctl__Deploy *p) {
    slctl__deploy__init(p);
    p->job_id = estr(e, d->job_id, "job_id");
    p->attempt = d->attempt;
    p->artifact = estr(e, d->artifact, "artifact");
    if (ecount(e, "", "nargs", "args", d->nargs, d->args) && d->nargs > 0) {
        p->n_args = (size_t)d->nargs;
        p->args = ealloc(e, p->n_args, sizeof *p->args);
        for (size_t i = 0; i < p->n_args; i++) p->args[i] = estr(e, d->args[i], "args[%zu]", i);
    }
    p->plan_fingerprint = d->plan_fingerprint;
    p->plan = ebytes(e, d->plan.p, d->plan.len, "plan");
    p->restore_path = estr(e, d->restore_path, "restore_path");
    p->restore_checkpoint = d->restore_checkpoint;
    if (ecount(e, "", "ntasks", "tasks", d->ntasks, d->tasks) && d->ntasks > 0) {
        size_t n = (size_t)d->ntasks;
        Slctl__TaskRef *r = ealloc(e, n, sizeof *r);
        p->tasks = ealloc(e, n, sizeof *p->tasks);
        p->n_tasks = n;
        for (size_t i = 0; i < n; i++) p->tasks[i] = eref(&d->tasks[i], &r[i]);
    }
    if (ecount(e, "", "nplacements", "placements", d->nplacements, d->placements) && d->nplacements > 0) {
        size_t n = (size_t)d->nplacements;
        Slctl__Placement *pl = ealloc(e, n, sizeof *pl);
        Slctl__TaskRef *r = ealloc(e, n, sizeof *r);
        p->placements = ealloc(e, n, sizeof *p->placements);
        p->n_placements = n;
        for (size_t i = 0; i < n; i++) {
            slctl__placement__init(&pl[i]);
            pl[i].task = eref(&d->placements[i].task, &r[i]);
            pl[i].peer = d->placements[i].peer;
            p->placements[i] = &pl[i];
        }
    }
    if (ecount(e, "", "npeers", "peers", d->npeers, d->peers) && d->npeers > 0) {
        size_t n = (size_t)d->npeers;
        Slctl__Peer *pe = ealloc(e, n, sizeof *pe);
        p->peers = ealloc(e, n, sizeof *p->peers);
        p->n_peers = n;
        for (size_t i = 0; i < n; i++) {
            slctl__peer__init(&pe[i]);
            pe[i].tm_id = estr(e, d->peers[i].tm_id, "peers[%zu].tm_id", i);
            pe[i].host = estr(e, d->peers[i].host, "peers[%zu].host", i);
            pe[i].data_port = d->peers[i].data_port;
            p->peers[i] = &pe[i];
        }
    }
}

static void etask_state(enc_t *e, const sl_msg_task_state_t *t, Slctl__TaskState *p, Slctl__TaskRef *ref) {
    slctl__task_state__init(p);
    p->job_id = estr(e, t->job_id, "job_id");
    p->attempt = t->attempt;
    p->task = eref(&t->task, ref);
    p->state = t->state;
    p->error_code = t->error_code;
    p->message = estr(e, t->message, "message");
    p->final_state = eops(e, t->final_state, t->nfinal, "nfinal", "final_state", &p->n_final_state);
    if (ecount(e, "", "nmetrics", "metrics", t->nmetrics, t->metrics) && t->nmetrics > 0) {
        size_t n = (size_t)t->nmetrics;
        Slctl__OpMetrics *om = ealloc(e, n, sizeof *om);
        p->metrics = ealloc(e, n, sizeof *p->metrics);
        p->n_metrics = n;
        for (size_t i = 0; i < n; i++) {
            slctl__op_metrics__init(&om[i]);
            om[i].node = t->metrics[i].node;
            om[i].records_in = t->metrics[i].records_in;
            om[i].records_out = t->metrics[i].records_out;
            om[i].records_skipped = t->metrics[i].records_skipped;
            p->metrics[i] = &om[i];
        }
    }
    p->max_sync_ns = t->max_sync_ns;
    p->end_of_data = t->end_of_data;
}

static void eack(enc_t *e, const sl_msg_ack_t *a, Slctl__Ack *p, Slctl__TaskRef *ref) {
    slctl__ack__init(p);
    p->job_id = estr(e, a->job_id, "job_id");
    p->attempt = a->attempt;
    p->checkpoint_id = a->checkpoint_id;
    p->task = eref(&a->task, ref);
    p->align_us = a->align_us;
    p->sync_us = a->sync_us;
    p->async_us = a->async_us;
    p->state_bytes = a->state_bytes;
    p->inflight_bytes = a->inflight_bytes;
    p->unaligned = a->unaligned;
    p->ops = eops(e, a->ops, a->nops, "nops", "ops", &p->n_ops);
}

static Slctl__OpMetrics **eop_metrics(enc_t *e, const sl_msg_op_metrics_t *ms, int n, const char *prefix,
                                      size_t *count) {
    *count = 0;
    if (!ecount(e, prefix, "nops", "ops", n, ms) || n == 0) return NULL;
    Slctl__OpMetrics *om = ealloc(e, (size_t)n, sizeof *om);
    Slctl__OpMetrics **pp = ealloc(e, (size_t)n, sizeof *pp);
    for (int i = 0; i < n; i++) {
        slctl__op_metrics__init(&om[i]);
        om[i].node = ms[i].node;
        om[i].records_in = ms[i].records_in;
        om[i].records_out = ms[i].records_out;
        om[i].records_skipped = ms[i].records_skipped;
        om[i].in_watermark = ms[i].in_watermark;
        om[i].out_watermark = ms[i].out_watermark;
        om[i].late_dropped = ms[i].late_dropped;
        om[i].pending_records = ms[i].pending_records;
        om[i].state_memory_bytes = ms[i].state_memory_bytes;
        om[i].rdb_mem_tables = ms[i].rdb_mem_tables;
        om[i].rdb_table_readers = ms[i].rdb_table_readers;
        om[i].rdb_block_cache = ms[i].rdb_block_cache;
        om[i].rdb_live_data = ms[i].rdb_live_data;
        pp[i] = &om[i];
    }
    *count = (size_t)n;
    return pp;
}

static void emetrics(enc_t *e, const sl_msg_metrics_t *m, Slctl__Metrics *p) {
    slctl__metrics__init(p);
    p->job_id = estr(e, m->job_id, "job_id");
    p->attempt = m->attempt;
    p->tm_id = estr(e, m->tm_id, "tm_id");
    p->time_ns = m->time_ns;
    if (!ecount(e, "", "nsubtasks", "subtasks", m->nsubtasks, m->subtasks) || m->nsubtasks == 0) return;
    size_t n = (size_t)m->nsubtasks;
    Slctl__SubtaskMetrics *sm = ealloc(e, n, sizeof *sm);
    Slctl__TaskRef *refs = ealloc(e, n, sizeof *refs);
    p->subtasks = ealloc(e, n, sizeof *p->subtasks);
    p->n_subtasks = n;
    for (size_t i = 0; i < n; i++) {
        const sl_msg_subtask_metrics_t *st = &m->subtasks[i];
        char prefix[48];
        snprintf(prefix, sizeof prefix, "subtasks[%zu].", i);
        slctl__subtask_metrics__init(&sm[i]);
        sm[i].task = eref(&st->task, &refs[i]);
        sm[i].time_ns = st->time_ns;
        sm[i].busy_ns = st->busy_ns;
        sm[i].idle_ns = st->idle_ns;
        sm[i].backpressured_ns = st->backpressured_ns;
        sm[i].bytes_in = st->bytes_in;
        sm[i].bytes_out = st->bytes_out;
        sm[i].ops = eop_metrics(e, st->ops, st->nops, prefix, &sm[i].n_ops);
        p->subtasks[i] = &sm[i];
    }
}

/* Fills *p from m (pointing into m); e->rc says whether it worked. */
static void epayload(enc_t *e, const sl_msg_t *m, pbmsg_t *p, Slctl__TaskRef *ref) {
    switch (m->type) {
    case SL_MSG_REGISTER: {
        const sl_msg_register_t *r = &m->u.reg;
        slctl__register__init(&p->reg);
        p->reg.tm_id = estr(e, r->tm_id, "tm_id");
        p->reg.host = estr(e, r->host, "host");
        p->reg.data_port = r->data_port;
        p->reg.slots = r->slots;
        p->reg.pid = r->pid;
        break;
    }
    case SL_MSG_REGISTERED: {
        const sl_msg_registered_t *r = &m->u.registered;
        slctl__registered__init(&p->registered);
        p->registered.accepted = r->accepted;
        p->registered.reason = estr(e, r->reason, "reason");
        p->registered.jm_id = estr(e, r->jm_id, "jm_id");
        break;
    }
    case SL_MSG_HEARTBEAT: {
        const sl_msg_heartbeat_t *h = &m->u.heartbeat;
        slctl__heartbeat__init(&p->heartbeat);
        p->heartbeat.sender = estr(e, h->sender, "sender");
        p->heartbeat.seq = h->seq;
        p->heartbeat.slots_total = h->slots_total;
        p->heartbeat.rss_bytes = h->rss_bytes;
        p->heartbeat.cpu_ns = h->cpu_ns;
        p->heartbeat.threads = h->threads;
        p->heartbeat.slots_free = h->slots_free;
        break;
    }
    case SL_MSG_DEPLOY: edeploy(e, &m->u.deploy, &p->deploy); break;
    case SL_MSG_CANCEL: {
        const sl_msg_cancel_t *c = &m->u.cancel;
        slctl__cancel__init(&p->cancel);
        p->cancel.job_id = estr(e, c->job_id, "job_id");
        p->cancel.attempt = c->attempt;
        p->cancel.reason = estr(e, c->reason, "reason");
        break;
    }
    case SL_MSG_TASK_STATE: etask_state(e, &m->u.task_state, &p->task_state, ref); break;
    case SL_MSG_TRIGGER: {
        const sl_msg_trigger_t *t = &m->u.trigger;
        slctl__trigger__init(&p->trigger);
        p->trigger.job_id = estr(e, t->job_id, "job_id");
        p->trigger.attempt = t->attempt;
        p->trigger.checkpoint_id = t->checkpoint_id;
        p->trigger.timestamp = t->timestamp;
        p->trigger.kind = t->kind;
        break;
    }
    case SL_MSG_ACK: eack(e, &m->u.ack, &p->ack, ref); break;
    case SL_MSG_DECLINE: {
        const sl_msg_decline_t *d = &m->u.decline;
        slctl__decline__init(&p->decline);
        p->decline.job_id = estr(e, d->job_id, "job_id");
        p->decline.attempt = d->attempt;
        p->decline.checkpoint_id = d->checkpoint_id;
        p->decline.task = eref(&d->task, ref);
        p->decline.reason = estr(e, d->reason, "reason");
        break;
    }
    case SL_MSG_COMPLETE:
    case SL_MSG_ABORTED: {
        const sl_msg_notify_t *n = &m->u.notify;
        slctl__notify__init(&p->notify);
        p->notify.job_id = estr(e, n->job_id, "job_id");
        p->notify.attempt = n->attempt;
        p->notify.checkpoint_id = n->checkpoint_id;
        p->notify.reason = estr(e, n->reason, "reason");
        break;
    }
    case SL_MSG_METRICS: emetrics(e, &m->u.metrics, &p->metrics); break;
    case SL_MSG_STATE_QUERY: {
        const sl_msg_state_query_t *q = &m->u.state_query;
        slctl__state_query__init(&p->state_query);
        p->state_query.job_id = estr(e, q->job_id, "job_id");
        p->state_query.attempt = q->attempt;
        p->state_query.task = eref(&q->task, ref);
        p->state_query.request_id = q->request_id;
        p->state_query.uid = estr(e, q->uid, "uid");
        p->state_query.state = estr(e, q->state, "state");
        p->state_query.key = ebytes(e, q->key.p, q->key.len, "key");
        p->state_query.has_namespace = q->has_namespace;
        p->state_query.ns = ebytes(e, q->ns.p, q->ns.len, "ns");
        break;
    }
    case SL_MSG_STATE_QUERY_RESULT: {
        const sl_msg_state_query_result_t *r = &m->u.state_query_result;
        slctl__state_query_result__init(&p->state_query_result);
        p->state_query_result.job_id = estr(e, r->job_id, "job_id");
        p->state_query_result.attempt = r->attempt;
        p->state_query_result.task = eref(&r->task, ref);
        p->state_query_result.request_id = r->request_id;
        p->state_query_result.status = r->status;
        p->state_query_result.message = estr(e, r->message, "message");
        p->state_query_result.key_group = r->key_group;
        p->state_query_result.block = ebytes(e, r->block.p, r->block.len, "block");
        break;
    }
    default: efail(e, "unknown message type %d", m->type); break;
    }
}

int sl_msg_encode(const sl_msg_t *m, sl_buf_t *out, char *err, size_t errlen) {
    enc_t e = {.type = m->type, .err = err, .errlen = errlen};
    pbmsg_t p;
    Slctl__TaskRef ref;
    memset(&p, 0, sizeof p);
    epayload(&e, m, &p, &ref);
    if (!e.rc) {
        size_t size = protobuf_c_message_get_packed_size(&p.base);
        if (size > SL_MSG_MAX_FRAME - SL_MSG_HEADER) {
            efail(&e, "a frame of %zu bytes is over the maximum of %u bytes", size + SL_MSG_HEADER,
                  SL_MSG_MAX_FRAME);
        } else {
            sl_buf_reserve(out, SL_MSG_HEADER + size);
            uint8_t *h = out->p + out->len;
            sl_st32(h, SL_MSG_MAGIC);
            uint16_t version = SL_PROTOCOL_VERSION, type = (uint16_t)m->type;
            memcpy(h + 4, &version, 2);
            memcpy(h + 6, &type, 2);
            sl_st32(h + 8, (uint32_t)size);
            size_t packed = protobuf_c_message_pack(&p.base, h + SL_MSG_HEADER);
            if (packed != size) /* protobuf-c disagreeing with itself */
                efail(&e, "protobuf-c packed %zu bytes of %zu", packed, size);
            else
                out->len += SL_MSG_HEADER + size;
        }
    }
    for (size_t i = 0; i < e.nallocs; i++) sl_free(e.allocs[i]);
    sl_free(e.allocs);
    return e.rc;
}

/* ================================================================== */
/* The header. */

static uint16_t ld16(const uint8_t *p) {
    uint16_t v;
    memcpy(&v, p, 2);
    return v;
}

static int hfail(const char *where, char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int hfail(const char *where, char *err, size_t errlen, const char *fmt, ...) {
    if (err && errlen) {
        int n = where ? snprintf(err, errlen, "control message from %s: ", where)
                      : snprintf(err, errlen, "control message: ");
        if (n >= 0 && (size_t)n < errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(err + n, errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return SL_EFORMAT;
}

int64_t sl_msg_frame_length(const uint8_t *p, size_t len, const char *where, char *err, size_t errlen) {
    if (len < SL_MSG_HEADER) return 0;
    uint32_t magic = sl_ld32(p);
    if (magic != SL_MSG_MAGIC)
        return hfail(where, err, errlen, "bad magic 0x%08" PRIx32 " (expected 0x%08x, \"SLCM\"): not a sluice control frame",
                     magic, SL_MSG_MAGIC);
    unsigned version = ld16(p + 4), type = ld16(p + 6);
    if (version > SL_PROTOCOL_VERSION)
        return hfail(where, err, errlen, "version %u is newer than this build's %u: upgrade this process", version,
                     SL_PROTOCOL_VERSION);
    if (version < MIN_VERSION)
        return hfail(where, err, errlen, "version %u is not a protocol version (this build reads %u..%u)", version,
                     MIN_VERSION, SL_PROTOCOL_VERSION);
    if (!descriptor_of((int)type)) return hfail(where, err, errlen, "unknown message type %u", type);
    uint64_t total = (uint64_t)SL_MSG_HEADER + sl_ld32(p + 8);
    if (total > SL_MSG_MAX_FRAME)
        return hfail(where, err, errlen, "%s: a frame of %" PRIu64 " bytes is over the maximum of %u bytes",
                     sl_msg_type_name((int)type), total, SL_MSG_MAX_FRAME);
    return (int64_t)total;
}

/* ================================================================== */
/* Decoding: protobuf-c structs -> the C message (representation only). */

typedef struct dec {
    const char *where;
    int type;
    char *err;
    size_t errlen;
} dec_t;

static int dfail(dec_t *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int dfail(dec_t *d, const char *fmt, ...) {
    if (d->err && d->errlen) {
        int n = d->where ? snprintf(d->err, d->errlen, "control message from %s: %s: ", d->where,
                                    sl_msg_type_name(d->type))
                         : snprintf(d->err, d->errlen, "control message: %s: ", sl_msg_type_name(d->type));
        if (n >= 0 && (size_t)n < d->errlen) {
            va_list ap;
            va_start(ap, fmt);
            vsnprintf(d->err + n, d->errlen - (size_t)n, fmt, ap);
            va_end(ap);
        }
    }
    return SL_EFORMAT;
}

/* s quoted for an error message: at most 48 bytes of it, anything but
 * printable ASCII as \xNN. */
static const char *quote(char *buf, size_t cap, const char *s) {
    size_t o = 0;
    buf[o++] = '\'';
    size_t i = 0;
    for (; s[i] && i < 48 && o + 6 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x20 && c < 0x7f && c != '\\' && c != '\'')
            buf[o++] = (char)c;
        else
            o += (size_t)snprintf(buf + o, cap - o, "\\x%02x", c);
    }
    if (s[i] && o + 5 < cap) {
        memcpy(buf + o, "...", 3);
        o += 3;
    }
    buf[o++] = '\'';
    buf[o] = 0;
    return buf;
}

/* A string field: refused when it holds a NUL; always allocated. */
static int dstr(dec_t *d, char **out, ProtobufCBinaryData b, const char *pathfmt, ...)
    __attribute__((format(printf, 4, 5)));
static int dstr(dec_t *d, char **out, ProtobufCBinaryData b, const char *pathfmt, ...) {
    if (b.len && memchr(b.data, 0, b.len)) {
        char path[256];
        va_list ap;
        va_start(ap, pathfmt);
        vsnprintf(path, sizeof path, pathfmt, ap);
        va_end(ap);
        return dfail(d, "%s contains a NUL byte", path);
    }
    *out = sl_malloc(b.len + 1);
    if (b.len) memcpy(*out, b.data, b.len);
    (*out)[b.len] = 0;
    return 0;
}

/* A repeated field's length as a C count (it is bounded by the frame). */
static int dcount(dec_t *d, size_t n, const char *path, int *out) {
    if (n > INT32_MAX) return dfail(d, "%s has %zu elements", path, n);
    *out = (int)n;
    return 0;
}

static int dref(dec_t *d, const Slctl__TaskRef *r, sl_msg_task_ref_t *out, const char *path) {
    if (!r) return dfail(d, "%s is missing", path);
    out->vertex = r->vertex;
    out->subtask = r->subtask;
    out->index = r->index;
    return 0;
}

static int dsubtask(dec_t *d, const Slctl__Subtask *p, sl_ckpt_subtask_t *st, const char *prefix) {
    int rc;
    char path[320];
    st->index = p->index;
    st->range.start = p->kg_start;
    st->range.end = p->kg_end;
    snprintf(path, sizeof path, "%shandles", prefix);
    if ((rc = dcount(d, p->n_handles, path, &st->nhandles))) return rc;
    st->handles = st->nhandles ? sl_calloc((size_t)st->nhandles, sizeof *st->handles) : NULL;
    for (int i = 0; i < st->nhandles; i++) {
        const Slctl__Handle *ph = p->handles[i];
        sl_ckpt_state_handle_t *h = &st->handles[i];
        if ((rc = dstr(d, &h->path, ph->path, "%shandles[%d].path", prefix, i))) return rc;
        if (ph->scope > UINT8_MAX)
            return dfail(d, "%shandles[%d].scope %" PRIu32 " is out of range (0..%d)", prefix, i, ph->scope,
                         SL_CKPT_SCOPE_TASKOWNED);
        h->scope = (uint8_t)ph->scope;
        h->kind = ph->kind;
        h->size = ph->size;
        h->checksum = ph->checksum;
        snprintf(path, sizeof path, "%shandles[%d].sections", prefix, i);
        if ((rc = dcount(d, ph->n_sections, path, &h->nsections))) return rc;
        h->sections = h->nsections ? sl_calloc((size_t)h->nsections, sizeof *h->sections) : NULL;
        for (int k = 0; k < h->nsections; k++) {
            h->sections[k].id = ph->sections[k]->id;
            h->sections[k].offset = ph->sections[k]->offset;
            h->sections[k].length = ph->sections[k]->length;
            h->sections[k].checksum = ph->sections[k]->checksum;
        }
    }
    snprintf(path, sizeof path, "%sblobs", prefix);
    if ((rc = dcount(d, p->n_blobs, path, &st->nblobs))) return rc;
    st->blobs = st->nblobs ? sl_calloc((size_t)st->nblobs, sizeof *st->blobs) : NULL;
    for (int i = 0; i < st->nblobs; i++) {
        const Slctl__Blob *pb = p->blobs[i];
        sl_ckpt_blob_t *b = &st->blobs[i];
        if ((rc = dstr(d, &b->name, pb->name, "%sblobs[%d].name", prefix, i))) return rc;
        if (pb->distribution > UINT8_MAX)
            return dfail(d, "%sblobs[%d].distribution %" PRIu32 " is out of range (0..%d)", prefix, i,
                         pb->distribution, SL_CKPT_DIST_BROADCAST);
        b->distribution = (uint8_t)pb->distribution;
        b->len = pb->data.len;
        if (b->len) {
            b->data = sl_malloc(b->len);
            memcpy(b->data, pb->data.data, b->len);
        }
    }
    return 0;
}

static int dops(dec_t *d, Slctl__OpState *const *p, size_t n, const char *aname, int *count, sl_msg_op_state_t **out) {
    int rc;
    if ((rc = dcount(d, n, aname, count))) return rc;
    *out = *count ? sl_calloc((size_t)*count, sizeof **out) : NULL;
    char prefix[96];
    for (int i = 0; i < *count; i++) {
        if ((rc = dstr(d, &(*out)[i].uid, p[i]->uid, "%s[%d].uid", aname, i))) return rc;
        snprintf(prefix, sizeof prefix, "%s[%d].st", aname, i);
        if (!p[i]->st) return dfail(d, "%s is missing", prefix);
        snprintf(prefix, sizeof prefix, "%s[%d].st.", aname, i);
        if ((rc = dsubtask(d, p[i]->st, &(*out)[i].st, prefix))) return rc;
    }
    return 0;
}

static int ddeploy(dec_t *d, const Slctl__Deploy *p, sl_msg_deploy_t *o) {
    int rc;
    if ((rc = dstr(d, &o->job_id, p->job_id, "job_id"))) return rc;
    o->attempt = p->attempt;
    if ((rc = dstr(d, &o->artifact, p->artifact, "artifact"))) return rc;
    if ((rc = dcount(d, p->n_args, "args", &o->nargs))) return rc;
    o->args = o->nargs ? sl_calloc((size_t)o->nargs, sizeof *o->args) : NULL;
    for (int i = 0; i < o->nargs; i++)
        if ((rc = dstr(d, &o->args[i], p->args[i], "args[%d]", i))) return rc;
    o->plan_fingerprint = p->plan_fingerprint;
    if (p->plan.len) sl_buf_append(&o->plan, p->plan.data, p->plan.len);
    if ((rc = dstr(d, &o->restore_path, p->restore_path, "restore_path"))) return rc;
    o->restore_checkpoint = p->restore_checkpoint;
    char path[64];
    if ((rc = dcount(d, p->n_tasks, "tasks", &o->ntasks))) return rc;
    o->tasks = o->ntasks ? sl_calloc((size_t)o->ntasks, sizeof *o->tasks) : NULL;
    for (int i = 0; i < o->ntasks; i++) {
        snprintf(path, sizeof path, "tasks[%d]", i);
        if ((rc = dref(d, p->tasks[i], &o->tasks[i], path))) return rc;
    }
    if ((rc = dcount(d, p->n_placements, "placements", &o->nplacements))) return rc;
    o->placements = o->nplacements ? sl_calloc((size_t)o->nplacements, sizeof *o->placements) : NULL;
    for (int i = 0; i < o->nplacements; i++) {
        snprintf(path, sizeof path, "placements[%d].task", i);
        if ((rc = dref(d, p->placements[i]->task, &o->placements[i].task, path))) return rc;
        o->placements[i].peer = p->placements[i]->peer;
    }
    if ((rc = dcount(d, p->n_peers, "peers", &o->npeers))) return rc;
    o->peers = o->npeers ? sl_calloc((size_t)o->npeers, sizeof *o->peers) : NULL;
    for (int i = 0; i < o->npeers; i++) {
        if ((rc = dstr(d, &o->peers[i].tm_id, p->peers[i]->tm_id, "peers[%d].tm_id", i))) return rc;
        if ((rc = dstr(d, &o->peers[i].host, p->peers[i]->host, "peers[%d].host", i))) return rc;
        o->peers[i].data_port = p->peers[i]->data_port;
    }
    return 0;
}

static int dtask_state(dec_t *d, const Slctl__TaskState *p, sl_msg_task_state_t *o) {
    int rc;
    if ((rc = dstr(d, &o->job_id, p->job_id, "job_id"))) return rc;
    o->attempt = p->attempt;
    if ((rc = dref(d, p->task, &o->task, "task"))) return rc;
    o->state = p->state;
    o->error_code = p->error_code;
    if ((rc = dstr(d, &o->message, p->message, "message"))) return rc;
    if ((rc = dops(d, p->final_state, p->n_final_state, "final_state", &o->nfinal, &o->final_state))) return rc;
    if ((rc = dcount(d, p->n_metrics, "metrics", &o->nmetrics))) return rc;
    o->metrics = o->nmetrics ? sl_calloc((size_t)o->nmetrics, sizeof *o->metrics) : NULL;
    for (int i = 0; i < o->nmetrics; i++) {
        o->metrics[i].node = p->metrics[i]->node;
        o->metrics[i].records_in = p->metrics[i]->records_in;
        o->metrics[i].records_out = p->metrics[i]->records_out;
        o->metrics[i].records_skipped = p->metrics[i]->records_skipped;
    }
    o->max_sync_ns = p->max_sync_ns;
    o->end_of_data = p->end_of_data;
    return 0;
}

static int dack(dec_t *d, const Slctl__Ack *p, sl_msg_ack_t *o) {
    int rc;
    if ((rc = dstr(d, &o->job_id, p->job_id, "job_id"))) return rc;
    o->attempt = p->attempt;
    o->checkpoint_id = p->checkpoint_id;
    if ((rc = dref(d, p->task, &o->task, "task"))) return rc;
    o->align_us = p->align_us;
    o->sync_us = p->sync_us;
    o->async_us = p->async_us;
    o->state_bytes = p->state_bytes;
    o->inflight_bytes = p->inflight_bytes;
    o->unaligned = p->unaligned != 0;
    return dops(d, p->ops, p->n_ops, "ops", &o->nops, &o->ops);
}

static int dmetrics(dec_t *d, const Slctl__Metrics *p, sl_msg_metrics_t *o) {
    int rc;
    char path[64];
    if ((rc = dstr(d, &o->job_id, p->job_id, "job_id"))) return rc;
    o->attempt = p->attempt;
    if ((rc = dstr(d, &o->tm_id, p->tm_id, "tm_id"))) return rc;
    o->time_ns = p->time_ns;
    if ((rc = dcount(d, p->n_subtasks, "subtasks", &o->nsubtasks))) return rc;
    o->subtasks = o->nsubtasks ? sl_calloc((size_t)o->nsubtasks, sizeof *o->subtasks) : NULL;
    for (int i = 0; i < o->nsubtasks; i++) {
        const Slctl__SubtaskMetrics *ps = p->subtasks[i];
        sl_msg_subtask_metrics_t *st = &o->subtasks[i];
        snprintf(path, sizeof path, "subtasks[%d].task", i);
        if ((rc = dref(d, ps->task, &st->task, path))) return rc;
        st->time_ns = ps->time_ns;
        st->busy_ns = ps->busy_ns;
        st->idle_ns = ps->idle_ns;
        st->backpressured_ns = ps->backpressured_ns;
        st->bytes_in = ps->bytes_in;
        st->bytes_out = ps->bytes_out;
        snprintf(path, sizeof path, "subtasks[%d].ops", i);
        if ((rc = dcount(d, ps->n_ops, path, &st->nops))) return rc;
        st->ops = st->nops ? sl_calloc((size_t)st->nops, sizeof *st->ops) : NULL;
        for (int k = 0; k < st->nops; k++) {
            const Slctl__OpMetrics *pm = ps->ops[k];
            st->ops[k] = (sl_msg_op_metrics_t){pm->node,         pm->records_in,    pm->records_out,
                                               pm->records_skipped, pm->in_watermark, pm->out_watermark,
                                               pm->late_dropped, pm->pending_records,
                                               pm->state_memory_bytes, pm->rdb_mem_tables,
                                               pm->rdb_table_readers, pm->rdb_block_cache,
                                               pm->rdb_live_data};
            if (st->ops[k].pending_records < -1) return dfail(d, "subtasks[%d].ops[%d].pending_records is %lld", i, k,
                                                              (long long)st->ops[k].pending_records);
            const int64_t mem[5] = {pm->state_memory_bytes, pm->rdb_mem_tables, pm->rdb_table_readers,
                                    pm->rdb_block_cache, pm->rdb_live_data};
            static const char *const mem_names[5] = {"state_memory_bytes", "rdb_mem_tables", "rdb_table_readers",
                                                     "rdb_block_cache", "rdb_live_data"};
            for (int f = 0; f < 5; f++)
                if (mem[f] < -1)
                    return dfail(d, "subtasks[%d].ops[%d].%s is %lld", i, k, mem_names[f], (long long)mem[f]);
        }
    }
    return 0;
}

static int dpayload(dec_t *d, const ProtobufCMessage *pbm, sl_msg_t *m) {
    const pbmsg_t *p = (const pbmsg_t *)pbm;
    int rc;
    switch (m->type) {
    case SL_MSG_REGISTER: {
        sl_msg_register_t *o = &m->u.reg;
        if ((rc = dstr(d, &o->tm_id, p->reg.tm_id, "tm_id"))) return rc;
        if ((rc = dstr(d, &o->host, p->reg.host, "host"))) return rc;
        o->data_port = p->reg.data_port;
        o->slots = p->reg.slots;
        o->pid = p->reg.pid;
        return 0;
    }
    case SL_MSG_REGISTERED: {
        sl_msg_registered_t *o = &m->u.registered;
        o->accepted = p->registered.accepted != 0;
        if ((rc = dstr(d, &o->reason, p->registered.reason, "reason"))) return rc;
        return dstr(d, &o->jm_id, p->registered.jm_id, "jm_id");
    }
    case SL_MSG_HEARTBEAT: {
        sl_msg_heartbeat_t *o = &m->u.heartbeat;
        if ((rc = dstr(d, &o->sender, p->heartbeat.sender, "sender"))) return rc;
        o->seq = p->heartbeat.seq;
        o->slots_total = p->heartbeat.slots_total;
        o->slots_free = p->heartbeat.slots_free;
        o->rss_bytes = p->heartbeat.rss_bytes;
        o->cpu_ns = p->heartbeat.cpu_ns;
        o->threads = p->heartbeat.threads;
        return 0;
    }
    case SL_MSG_DEPLOY: return ddeploy(d, &p->deploy, &m->u.deploy);
    case SL_MSG_CANCEL: {
        sl_msg_cancel_t *o = &m->u.cancel;
        if ((rc = dstr(d, &o->job_id, p->cancel.job_id, "job_id"))) return rc;
        o->attempt = p->cancel.attempt;
        return dstr(d, &o->reason, p->cancel.reason, "reason");
    }
    case SL_MSG_TASK_STATE: return dtask_state(d, &p->task_state, &m->u.task_state);
    case SL_MSG_TRIGGER: {
        sl_msg_trigger_t *o = &m->u.trigger;
        if ((rc = dstr(d, &o->job_id, p->trigger.job_id, "job_id"))) return rc;
        o->attempt = p->trigger.attempt;
        o->checkpoint_id = p->trigger.checkpoint_id;
        o->timestamp = p->trigger.timestamp;
        o->kind = p->trigger.kind;
        return 0;
    }
    case SL_MSG_ACK: return dack(d, &p->ack, &m->u.ack);
    case SL_MSG_DECLINE: {
        sl_msg_decline_t *o = &m->u.decline;
        if ((rc = dstr(d, &o->job_id, p->decline.job_id, "job_id"))) return rc;
        o->attempt = p->decline.attempt;
        o->checkpoint_id = p->decline.checkpoint_id;
        if ((rc = dref(d, p->decline.task, &o->task, "task"))) return rc;
        return dstr(d, &o->reason, p->decline.reason, "reason");
    }
    case SL_MSG_COMPLETE:
    case SL_MSG_ABORTED: {
        sl_msg_notify_t *o = &m->u.notify;
        if ((rc = dstr(d, &o->job_id, p->notify.job_id, "job_id"))) return rc;
        o->attempt = p->notify.attempt;
        o->checkpoint_id = p->notify.checkpoint_id;
        return dstr(d, &o->reason, p->notify.reason, "reason");
    }
    case SL_MSG_METRICS: return dmetrics(d, &p->metrics, &m->u.metrics);
    case SL_MSG_STATE_QUERY: {
        const Slctl__StateQuery *q = &p->state_query;
        sl_msg_state_query_t *o = &m->u.state_query;
        if ((rc = dstr(d, &o->job_id, q->job_id, "job_id"))) return rc;
        o->attempt = q->attempt;
        if ((rc = dref(d, q->task, &o->task, "task"))) return rc;
        o->request_id = q->request_id;
        if ((rc = dstr(d, &o->uid, q->uid, "uid"))) return rc;
        if ((rc = dstr(d, &o->state, q->state, "state"))) return rc;
        if (q->key.len) sl_buf_append(&o->key, q->key.data, q->key.len);
        o->has_namespace = q->has_namespace != 0;
        if (q->ns.len) sl_buf_append(&o->ns, q->ns.data, q->ns.len);
        return 0;
    }
    case SL_MSG_STATE_QUERY_RESULT: {
        const Slctl__StateQueryResult *q = &p->state_query_result;
        sl_msg_state_query_result_t *o = &m->u.state_query_result;
        if ((rc = dstr(d, &o->job_id, q->job_id, "job_id"))) return rc;
        o->attempt = q->attempt;
        if ((rc = dref(d, q->task, &o->task, "task"))) return rc;
        o->request_id = q->request_id;
        o->status = q->status;
        if ((rc = dstr(d, &o->message, q->message, "message"))) return rc;
        o->key_group = q->key_group;
        if (q->block.len) sl_buf_append(&o->block, q->block.data, q->block.len);
        return 0;
    }
    default: return dfail(d, "unknown message type");
    }
}

/* ================================================================== */
/* Validation of a decoded message: the rules its receiver relies on. */

static int vnonempty(dec_t *d, const char *s, const char *path) {
    return s[0] ? 0 : dfail(d, "%s is empty", path);
}

static int vnonneg(dec_t *d, int64_t v, const char *path) {
    return v >= 0 ? 0 : dfail(d, "%s %" PRId64 " is negative", path, v);
}

static int vref(dec_t *d, const sl_msg_task_ref_t *r, const char *path) {
    if (r->vertex < 0) return dfail(d, "%s.vertex %d is negative", path, r->vertex);
    if (r->subtask < 0) return dfail(d, "%s.subtask %d is negative", path, r->subtask);
    if (r->index < 0) return dfail(d, "%s.index %d is negative", path, r->index);
    return 0;
}

static int cmp_int(const void *a, const void *b) {
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

static int cmp_str(const void *a, const void *b) { return strcmp(*(const char *const *)a, *(const char *const *)b); }

/* The task indexes of n refs (stride bytes apart) are distinct (sorted
 * copy, so a large DEPLOY costs n log n, not n^2). */
static int vunique_refs(dec_t *d, const void *base, size_t stride, int n, const char *path) {
    if (n < 2) return 0;
    int *ix = sl_malloc((size_t)n * sizeof *ix);
    for (int i = 0; i < n; i++)
        ix[i] = ((const sl_msg_task_ref_t *)(const void *)((const char *)base + (size_t)i * stride))->index;
    qsort(ix, (size_t)n, sizeof *ix, cmp_int);
    int rc = 0;
    for (int i = 1; i < n && !rc; i++)
        if (ix[i] == ix[i - 1]) rc = dfail(d, "%s: task index %d appears twice", path, ix[i]);
    sl_free(ix);
    return rc;
}

/* The n strings (stride bytes apart, each a char * at the start of its
 * element) are distinct. */
static int vunique_names(dec_t *d, const void *base, size_t stride, int n, const char *path, const char *what) {
    if (n < 2) return 0;
    const char **s = sl_malloc((size_t)n * sizeof *s);
    for (int i = 0; i < n; i++) s[i] = *(char *const *)(const void *)((const char *)base + (size_t)i * stride);
    qsort(s, (size_t)n, sizeof *s, cmp_str);
    int rc = 0;
    char q[256];
    for (int i = 1; i < n && !rc; i++)
        if (strcmp(s[i], s[i - 1]) == 0) rc = dfail(d, "%s: %s %s appears twice", path, what, quote(q, sizeof q, s[i]));
    sl_free(s);
    return rc;
}

static int vsubtask(dec_t *d, const sl_ckpt_subtask_t *st, const char *prefix) {
    char q[256];
    if (st->index < 0) return dfail(d, "%sindex %d is negative", prefix, st->index);
    sl_kg_range_t r = st->range;
    if (r.start < 0 || r.start > r.end || r.end > SL_CKPT_MAX_PARALLELISM)
        return dfail(d, "%srange [%d, %d) is not a key-group range (0 <= start <= end <= %d)", prefix, r.start, r.end,
                     SL_CKPT_MAX_PARALLELISM);
    for (int i = 0; i < st->nhandles; i++) {
        const sl_ckpt_state_handle_t *h = &st->handles[i];
        if (!sl_ckpt_valid_file_name(h->path))
            return dfail(d, "%shandles[%d].path %s is not a plain file name", prefix, i, quote(q, sizeof q, h->path));
        if (h->scope > SL_CKPT_SCOPE_TASKOWNED)
            return dfail(d, "%shandles[%d].scope %u is out of range (0..%d)", prefix, i, h->scope,
                         SL_CKPT_SCOPE_TASKOWNED);
        if (h->kind == SL_SF_KIND_ANY) return dfail(d, "%shandles[%d].kind is 0 (no kind)", prefix, i);
        for (int k = 0; k < h->nsections; k++) {
            const sl_sf_section_t *s = &h->sections[k];
            if (k > 0 && s->id <= h->sections[k - 1].id)
                return dfail(d, "%shandles[%d].sections[%d].id %" PRIu64 " is not above the previous section's %" PRIu64,
                             prefix, i, k, s->id, h->sections[k - 1].id);
            if (s->length > h->size || s->offset > h->size - s->length)
                return dfail(d,
                             "%shandles[%d].sections[%d] (offset %" PRIu64 ", length %" PRIu64
                             ") lies outside the file's %" PRIu64 " bytes",
                             prefix, i, k, s->offset, s->length, h->size);
        }
    }
    for (int i = 0; i < st->nblobs; i++) {
        const sl_ckpt_blob_t *b = &st->blobs[i];
        if (!b->name[0]) return dfail(d, "%sblobs[%d].name is empty", prefix, i);
        if (b->distribution > SL_CKPT_DIST_BROADCAST)
            return dfail(d, "%sblobs[%d].distribution %u is out of range (0..%d)", prefix, i, b->distribution,
                         SL_CKPT_DIST_BROADCAST);
    }
    char path[128];
    snprintf(path, sizeof path, "%sblobs", prefix);
    return vunique_names(d, st->blobs, sizeof *st->blobs, st->nblobs, path, "name");
}

/* Op states of the subtask `task`: st.index is its subtask index. */
static int vops(dec_t *d, const sl_msg_op_state_t *ops, int n, const char *aname, const sl_msg_task_ref_t *task) {
    char prefix[96];
    int rc;
    for (int i = 0; i < n; i++) {
        snprintf(prefix, sizeof prefix, "%s[%d].uid", aname, i);
        if ((rc = vnonempty(d, ops[i].uid, prefix))) return rc;
        snprintf(prefix, sizeof prefix, "%s[%d].st.", aname, i);
        if ((rc = vsubtask(d, &ops[i].st, prefix))) return rc;
        if (ops[i].st.index != task->subtask)
            return dfail(d, "%s[%d].st.index %d is not the task's subtask %d", aname, i, ops[i].st.index,
                         task->subtask);
    }
    return vunique_names(d, ops, sizeof *ops, n, aname, "uid");
}

static int vjob(dec_t *d, const char *job_id, int32_t attempt) {
    int rc = vnonempty(d, job_id, "job_id");
    return rc ? rc : vnonneg(d, attempt, "attempt");
}

static int vcheckpoint(dec_t *d, int64_t id) {
    return id >= 1 ? 0 : dfail(d, "checkpoint_id %" PRId64 " (ids start at 1)", id);
}

static int vport(dec_t *d, int32_t port, int min, const char *path) {
    return port >= min && port <= 65535 ? 0 : dfail(d, "%s %d is not a port (%d..65535)", path, port, min);
}

static int vdeploy(dec_t *d, const sl_msg_deploy_t *o) {
    int rc;
    char path[64];
    if ((rc = vjob(d, o->job_id, o->attempt))) return rc;
    if ((rc = vnonempty(d, o->artifact, "artifact"))) return rc;
    if ((rc = vnonneg(d, o->restore_checkpoint, "restore_checkpoint"))) return rc;
    if ((o->restore_checkpoint == 0) != (o->restore_path[0] == 0))
        return dfail(d, "restore_checkpoint %" PRId64 " and restore_path %s disagree (both set, or neither)",
                     o->restore_checkpoint, o->restore_path[0] ? "set" : "empty");
    for (int i = 0; i < o->ntasks; i++) {
        snprintf(path, sizeof path, "tasks[%d]", i);
        if ((rc = vref(d, &o->tasks[i], path))) return rc;
    }
    if ((rc = vunique_refs(d, o->tasks, sizeof *o->tasks, o->ntasks, "tasks"))) return rc;
    for (int i = 0; i < o->npeers; i++) {
        snprintf(path, sizeof path, "peers[%d].tm_id", i);
        if ((rc = vnonempty(d, o->peers[i].tm_id, path))) return rc;
        snprintf(path, sizeof path, "peers[%d].host", i);
        if ((rc = vnonempty(d, o->peers[i].host, path))) return rc;
        snprintf(path, sizeof path, "peers[%d].data_port", i);
        if ((rc = vport(d, o->peers[i].data_port, 1, path))) return rc;
    }
    for (int i = 0; i < o->nplacements; i++) {
        snprintf(path, sizeof path, "placements[%d].task", i);
        if ((rc = vref(d, &o->placements[i].task, path))) return rc;
        int32_t peer = o->placements[i].peer;
        if (peer < -1 || peer >= o->npeers)
            return dfail(d, "placements[%d].peer %d is out of range (%d peer%s)", i, peer, o->npeers,
                         o->npeers == 1 ? "" : "s");
    }
    return vunique_refs(d, o->placements, sizeof *o->placements, o->nplacements, "placements");
}

static int vtask_state(dec_t *d, const sl_msg_task_state_t *o) {
    int rc;
    if ((rc = vjob(d, o->job_id, o->attempt))) return rc;
    if ((rc = vref(d, &o->task, "task"))) return rc;
    if (o->state < SL_TASK_DEPLOYING || o->state > SL_TASK_FAILED)
        return dfail(d, "state %d is not a task state (0..%d)", o->state, SL_TASK_FAILED);
    if (o->error_code > 0) return dfail(d, "error_code %d is not an SL_E* code (0 or negative)", o->error_code);
    if (o->nfinal > 0 && o->state != SL_TASK_FINISHED)
        return dfail(d, "final_state given for a task that is %s, not FINISHED", sl_task_state_name(o->state));
    bool terminal = o->state == SL_TASK_FINISHED || o->state == SL_TASK_CANCELED || o->state == SL_TASK_FAILED;
    if (o->nmetrics > 0 && !terminal)
        return dfail(d, "metrics given for a task that is %s (only terminal states report them)",
                     sl_task_state_name(o->state));
    if (o->end_of_data && o->state != SL_TASK_RUNNING)
        return dfail(d, "end_of_data given for a task that is %s (only RUNNING reports it)",
                     sl_task_state_name(o->state));
    if ((rc = vops(d, o->final_state, o->nfinal, "final_state", &o->task))) return rc;
    char path[64];
    for (int i = 0; i < o->nmetrics; i++) {
        const sl_msg_op_metrics_t *mt = &o->metrics[i];
        snprintf(path, sizeof path, "metrics[%d].node", i);
        if ((rc = vnonneg(d, mt->node, path))) return rc;
        snprintf(path, sizeof path, "metrics[%d].records_in", i);
        if ((rc = vnonneg(d, mt->records_in, path))) return rc;
        snprintf(path, sizeof path, "metrics[%d].records_out", i);
        if ((rc = vnonneg(d, mt->records_out, path))) return rc;
        snprintf(path, sizeof path, "metrics[%d].records_skipped", i);
        if ((rc = vnonneg(d, mt->records_skipped, path))) return rc;
    }
    return vnonneg(d, o->max_sync_ns, "max_sync_ns");
}

static int vack(dec_t *d, const sl_msg_ack_t *o) {
    int rc;
    if ((rc = vjob(d, o->job_id, o->attempt))) return rc;
    if ((rc = vcheckpoint(d, o->checkpoint_id))) return rc;
    if ((rc = vref(d, &o->task, "task"))) return rc;
    if ((rc = vnonneg(d, o->align_us, "align_us")) || (rc = vnonneg(d, o->sync_us, "sync_us")) ||
        (rc = vnonneg(d, o->async_us, "async_us")) || (rc = vnonneg(d, o->state_bytes, "state_bytes")) ||
        (rc = vnonneg(d, o->inflight_bytes, "inflight_bytes")))
        return rc;
    return vops(d, o->ops, o->nops, "ops", &o->task);
}

/* METRICS: cumulative figures are never negative; each subtask appears
 * once; watermarks are any value (INT64_MIN: none yet). */
static int vmetrics(dec_t *d, const sl_msg_metrics_t *o) {
    int rc;
    char path[80];
    if ((rc = vjob(d, o->job_id, o->attempt))) return rc;
    if ((rc = vnonempty(d, o->tm_id, "tm_id"))) return rc;
    if ((rc = vnonneg(d, o->time_ns, "time_ns"))) return rc;
    for (int i = 0; i < o->nsubtasks; i++) {
        const sl_msg_subtask_metrics_t *st = &o->subtasks[i];
        snprintf(path, sizeof path, "subtasks[%d].task", i);
        if ((rc = vref(d, &st->task, path))) return rc;
        snprintf(path, sizeof path, "subtasks[%d].time_ns", i);
        if ((rc = vnonneg(d, st->time_ns, path))) return rc;
        snprintf(path, sizeof path, "subtasks[%d].busy_ns", i);
        if ((rc = vnonneg(d, st->busy_ns, path))) return rc;
        snprintf(path, sizeof path, "subtasks[%d].idle_ns", i);
        if ((rc = vnonneg(d, st->idle_ns, path))) return rc;
        snprintf(path, sizeof path, "subtasks[%d].backpressured_ns", i);
        if ((rc = vnonneg(d, st->backpressured_ns, path))) return rc;
        snprintf(path, sizeof path, "subtasks[%d].bytes_in", i);
        if ((rc = vnonneg(d, st->bytes_in, path))) return rc;
        snprintf(path, sizeof path, "subtasks[%d].bytes_out", i);
        if ((rc = vnonneg(d, st->bytes_out, path))) return rc;
        for (int k = 0; k < st->nops; k++) {
            const sl_msg_op_metrics_t *mt = &st->ops[k];
            const int64_t v[5] = {mt->node, mt->records_in, mt->records_out, mt->records_skipped, mt->late_dropped};
            static const char *const names[5] = {"node", "records_in", "records_out", "records_skipped",
                                                 "late_dropped"};
            for (int f = 0; f < 5; f++) {
                snprintf(path, sizeof path, "subtasks[%d].ops[%d].%s", i, k, names[f]);
                if ((rc = vnonneg(d, v[f], path))) return rc;
            }
        }
    }
    return vunique_refs(d, o->subtasks, sizeof *o->subtasks, o->nsubtasks, "subtasks");
}

/* STATE_QUERY: a request id to answer to, an operator, a key of at most
 * the operators' key length, a namespace only when flagged. */
static int vstate_query(dec_t *d, const sl_msg_state_query_t *o) {
    int rc;
    if ((rc = vjob(d, o->job_id, o->attempt))) return rc;
    if ((rc = vref(d, &o->task, "task"))) return rc;
    if (o->request_id == 0) return dfail(d, "request_id is 0 (ids start at 1)");
    if ((rc = vnonempty(d, o->uid, "uid"))) return rc;
    if (o->key.len > SL_MSG_STATE_QUERY_MAX_KEY)
        return dfail(d, "key is %zu bytes, over the maximum of %d", o->key.len, SL_MSG_STATE_QUERY_MAX_KEY);
    if (!o->has_namespace && o->ns.len) return dfail(d, "ns given (%zu bytes) without has_namespace", o->ns.len);
    if (o->ns.len > SL_MSG_STATE_QUERY_MAX_NS)
        return dfail(d, "ns is %zu bytes, over the maximum of %d", o->ns.len, SL_MSG_STATE_QUERY_MAX_NS);
    return 0;
}

/* STATE_QUERY_RESULT: a known status; OK carries a block and a key group,
 * anything else a message and no block. */
static int vstate_query_result(dec_t *d, const sl_msg_state_query_result_t *o) {
    int rc;
    if ((rc = vjob(d, o->job_id, o->attempt))) return rc;
    if ((rc = vref(d, &o->task, "task"))) return rc;
    if (o->request_id == 0) return dfail(d, "request_id is 0 (ids start at 1)");
    if (o->status < SL_SQ_OK || o->status > SL_SQ_STATUS_MAX)
        return dfail(d, "status %d is not a state query status (0..%d)", o->status, SL_SQ_STATUS_MAX);
    if (o->status == SL_SQ_OK) {
        if (o->key_group < 0 || o->key_group >= SL_CKPT_MAX_PARALLELISM)
            return dfail(d, "key_group %d is out of range (0..%d)", o->key_group, SL_CKPT_MAX_PARALLELISM - 1);
        if (!o->block.len) return dfail(d, "status OK without a block");
        if (o->message[0]) return dfail(d, "status OK with a message");
        return 0;
    }
    if (o->block.len) return dfail(d, "status %d (not OK) with a block of %zu bytes", o->status, o->block.len);
    return vnonempty(d, o->message, "message");
}

static int validate(dec_t *d, const sl_msg_t *m) {
    int rc;
    switch (m->type) {
    case SL_MSG_REGISTER: {
        const sl_msg_register_t *o = &m->u.reg;
        if ((rc = vnonempty(d, o->tm_id, "tm_id"))) return rc;
        if ((rc = vport(d, o->data_port, 0, "data_port"))) return rc;
        if ((rc = vnonneg(d, o->slots, "slots"))) return rc;
        return vnonneg(d, o->pid, "pid");
    }
    case SL_MSG_REGISTERED: {
        const sl_msg_registered_t *o = &m->u.registered;
        if ((rc = vnonempty(d, o->jm_id, "jm_id"))) return rc;
        if (!o->accepted && !o->reason[0]) return dfail(d, "a refusal without a reason");
        return 0;
    }
    case SL_MSG_HEARTBEAT: {
        const sl_msg_heartbeat_t *o = &m->u.heartbeat;
        if ((rc = vnonempty(d, o->sender, "sender"))) return rc;
        if ((rc = vnonneg(d, o->seq, "seq"))) return rc;
        if ((rc = vnonneg(d, o->slots_total, "slots_total"))) return rc;
        if ((rc = vnonneg(d, o->rss_bytes, "rss_bytes"))) return rc;
        if ((rc = vnonneg(d, o->cpu_ns, "cpu_ns"))) return rc;
        if ((rc = vnonneg(d, o->threads, "threads"))) return rc;
        if (o->slots_free < 0 || o->slots_free > o->slots_total)
            return dfail(d, "slots_free %d is outside 0..%d (slots_total)", o->slots_free, o->slots_total);
        return 0;
    }
    case SL_MSG_DEPLOY: return vdeploy(d, &m->u.deploy);
    case SL_MSG_CANCEL: return vjob(d, m->u.cancel.job_id, m->u.cancel.attempt);
    case SL_MSG_TASK_STATE: return vtask_state(d, &m->u.task_state);
    case SL_MSG_TRIGGER: {
        const sl_msg_trigger_t *o = &m->u.trigger;
        if ((rc = vjob(d, o->job_id, o->attempt))) return rc;
        if ((rc = vcheckpoint(d, o->checkpoint_id))) return rc;
        if (!sl_snap_kind_valid(o->kind))
            return dfail(d, "kind %d is not a snapshot kind (0..%d, savepoints optionally | 0x%x native)", o->kind,
                         SL_SNAP_KIND_MAX, SL_SNAP_NATIVE);
        return vnonneg(d, o->timestamp, "timestamp");
    }
    case SL_MSG_ACK: return vack(d, &m->u.ack);
    case SL_MSG_DECLINE: {
        const sl_msg_decline_t *o = &m->u.decline;
        if ((rc = vjob(d, o->job_id, o->attempt))) return rc;
        if ((rc = vcheckpoint(d, o->checkpoint_id))) return rc;
        return vref(d, &o->task, "task");
    }
    case SL_MSG_COMPLETE:
    case SL_MSG_ABORTED: {
        const sl_msg_notify_t *o = &m->u.notify;
        if ((rc = vjob(d, o->job_id, o->attempt))) return rc;
        return vcheckpoint(d, o->checkpoint_id);
    }
    case SL_MSG_METRICS: return vmetrics(d, &m->u.metrics);
    case SL_MSG_STATE_QUERY: return vstate_query(d, &m->u.state_query);
    case SL_MSG_STATE_QUERY_RESULT: return vstate_query_result(d, &m->u.state_query_result);
    default: return dfail(d, "unknown message type");
    }
}

/* ================================================================== */

int sl_msg_decode(const uint8_t *p, size_t len, const char *where, sl_msg_t *m, char *err, size_t errlen) {
    memset(m, 0, sizeof *m);
    int64_t total = sl_msg_frame_length(p, len, where, err, errlen);
    if (total < 0) return (int)total;
    if (total == 0) return hfail(where, err, errlen, "truncated header: %zu of %d bytes", len, SL_MSG_HEADER);
    dec_t d = {.where = where, .type = ld16(p + 6), .err = err, .errlen = errlen};
    if ((uint64_t)total != len)
        return dfail(&d, "the frame is %" PRId64 " bytes but %zu were given (%s)", total, len,
                     (uint64_t)total > len ? "truncated" : "trailing bytes");
    m->type = d.type;
    size_t plen = (size_t)total - SL_MSG_HEADER;
    ProtobufCMessage *pb = protobuf_c_message_unpack(descriptor_of(d.type), NULL, plen, p + SL_MSG_HEADER);
    if (!pb) return dfail(&d, "the payload (%zu bytes) is not a valid protobuf %s", plen, descriptor_of(d.type)->name);
    int rc = dpayload(&d, pb, m);
    protobuf_c_message_free_unpacked(pb, NULL);
    if (rc) return rc;
    return validate(&d, m);
}

int sl_msg_copy(const sl_msg_t *m, sl_msg_t *out, char *err, size_t errlen) {
    sl_buf_t b = {0};
    int rc = sl_msg_encode(m, &b, err, errlen);
    if (rc) {
        memset(out, 0, sizeof *out);
    } else {
        rc = sl_msg_decode(b.p, b.len, "this process (sl_msg_copy)", out, err, errlen);
    }
    sl_buf_free(&b);
    return rc;
}
