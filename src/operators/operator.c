/*
 * operator.c — what all operators share: watermark and idleness bookkeeping
 * per input, failure reporting, processing time, keys, the collector and
 * the user-facing keyed state and timer functions.
 */
#include "operators/operator.h"

#include <stdio.h>

#include "common/common.h"
#include "state/ttl.h"

static int64_t test_now;
static _Thread_local char test_err[1024];

void sl_op_test_set_now(int64_t now) { test_now = now; }
const char *sl_op_test_last_error(void) { return test_err; }

void sl_op_base_init(sl_operator_t *op, const sl_operator_vt_t *vt, const sl_op_init_t *init) {
    op->vt = vt;
    op->ctx = init->ctx;
    op->tags = init->tags;
    op->name = init->name ? init->name : vt->kind;
    op->uid = init->uid;
    op->subtask = init->subtask;
    op->parallelism = init->parallelism;
    op->max_parallelism = init->max_parallelism;
    op->ninputs = init->ninputs;
    op->final_checkpoint = init->final_checkpoint;
    for (int i = 0; i < 2; i++) {
        op->in_wm[i] = SL_MIN_WATERMARK;
        op->in_idle[i] = false;
        op->in_ended[i] = false;
        op->in_schema[i] = init->in_schema[i];
        op->key[i] = init->key[i];
    }
    op->wm = SL_MIN_WATERMARK;
    op->out_schema = init->out_schema;
    if (init->key[0] || init->key[1]) {
        op->kg_range = sl_kg_range_for(init->max_parallelism, init->parallelism, init->subtask);
        char scratch[512];
        op->kb = !init->make_backend ? sl_heap_backend_new(init->max_parallelism, op->kg_range)
                                     : init->make_backend(init->make_backend_ctx, init, op->kg_range,
                                                          init->backend_err ? init->backend_err : scratch, 512);
        if (!op->kb) /* reported by the creator (backend_err); never leave a keyed operator without one */
            op->kb = sl_heap_backend_new(init->max_parallelism, op->kg_range);
        op->timers = sl_timer_service_new(init->max_parallelism, op->kg_range);
        /* the TTL clock: the job's processing time (its clock context
         * outlives the backend's views) */
        if (init->ctx) sl_kb_set_clock(op->kb, init->ctx->clock, init->ctx->clock_ctx);
    }
}

void sl_op_base_free(sl_operator_t *op) {
    if (op->kb) op->kb->ops->destroy(op->kb);
    if (op->timers) sl_timer_service_destroy(op->timers);
    for (int i = 0; i < op->nstates; i++) {
        sl_ttl_state_free(op->states[i]->ttl);
        sl_free(op->states[i]->name);
        sl_free(op->states[i]);
    }
    sl_free(op->states);
    for (int i = 0; i < op->ntyped; i++) {
        sl_free(op->typed_names[i]);
        sl_schema_unref(op->typed_schemas[i]);
    }
    sl_free(op->typed_names);
    sl_free(op->typed_schemas);
    sl_free(op->typed_ttl);
    op->typed_ttl = NULL;
    op->typed_names = NULL;
    op->typed_schemas = NULL;
    op->ntyped = 0;
    op->kb = NULL;
    op->timers = NULL;
    op->states = NULL;
    op->nstates = 0;
}

int sl_op_fail(sl_operator_t *op, int rc, const char *fmt, ...) {
    char msg[1024];
    int n = snprintf(msg, sizeof msg, "%s: ", op->name ? op->name : "operator");
    va_list ap;
    va_start(ap, fmt);
    if (n > 0 && (size_t)n < sizeof msg) vsnprintf(msg + n, sizeof msg - (size_t)n, fmt, ap);
    va_end(ap);
    if (op->ctx)
        op->ctx->fail(op->ctx->owner, rc, msg);
    else
        snprintf(test_err, sizeof test_err, "%s", msg);
    return rc;
}

void sl_op_emit_watermark(sl_operator_t *op, int64_t wm) { op->out->watermark(op->out, wm); }

/* Minimum over inputs that are active; INT64_MIN-1 sentinel when all idle. */
static bool combined(const sl_operator_t *op, int64_t *out) {
    int n = op->ninputs > 0 ? op->ninputs : 1;
    bool any = false;
    int64_t m = SL_MAX_WATERMARK;
    for (int i = 0; i < n; i++) {
        if (op->in_idle[i]) continue;
        any = true;
        if (op->in_wm[i] < m) m = op->in_wm[i];
    }
    *out = m;
    return any;
}

static int advance(sl_operator_t *op) {
    int64_t m;
    if (!combined(op, &m) || m <= op->wm) return 0;
    op->wm = m;
    if (op->vt->advance_watermark) return op->vt->advance_watermark(op, m);
    sl_op_emit_watermark(op, m);
    return 0;
}

int sl_op_watermark(sl_operator_t *op, int input, int64_t wm) {
    if (wm <= op->in_wm[input]) return 0;
    op->in_wm[input] = wm;
    return advance(op);
}

int sl_op_status(sl_operator_t *op, int input, bool idle) {
    if (op->in_idle[input] == idle) return 0;
    op->in_idle[input] = idle;
    int n = op->ninputs > 0 ? op->ninputs : 1;
    bool all_idle = true;
    for (int i = 0; i < n; i++) all_idle = all_idle && op->in_idle[i];
    if (all_idle != op->out_idle) {
        op->out_idle = all_idle;
        op->out->status(op->out, all_idle);
    }
    return idle ? advance(op) : 0;
}

int sl_op_end_input(sl_operator_t *op, int input) {
    op->in_ended[input] = true;
    return op->vt->end_input ? op->vt->end_input(op, input) : 0;
}

int64_t sl_op_now(sl_operator_t *op) { return op->ctx ? op->ctx->clock(op->ctx->clock_ctx) : test_now; }

void sl_op_schedule_processing(sl_operator_t *op, int64_t ts) {
    if (op->ctx) op->ctx->schedule_processing(op->ctx->owner, op, ts);
}

bool sl_op_yield(sl_operator_t *op, int64_t deadline_ns) {
    return op->ctx ? op->ctx->yield(op->ctx->owner, deadline_ns) : true;
}

int sl_key_extract(const sl_key_selector_t *ks, const sl_row_t *row, uint8_t *buf, const uint8_t **key,
                   uint32_t *len) {
    if (ks->field >= 0) {
        *key = sl_row_field_key(row, ks->field, len);
        return 0;
    }
    int n = ks->fn(ks->ctx, row, buf, SL_MAX_KEY_LEN);
    if (n < 0 || n > SL_MAX_KEY_LEN) return n < 0 ? n : SL_EINVAL;
    *key = buf;
    *len = (uint32_t)n;
    return 0;
}

int sl_op_set_key_from(sl_operator_t *op, int input, const sl_row_t *row) {
    static _Thread_local uint8_t buf[SL_MAX_KEY_LEN];
    const uint8_t *k;
    uint32_t len;
    int rc = sl_key_extract(op->key[input], row, buf, &k, &len);
    if (rc < 0) return sl_op_fail(op, rc, "key selector failed (%s)", sl_strerror(rc));
    int kg = sl_kb_set_key(op->kb, k, len);
    /* TTL cleanup for every record (cleanup_every_record): a step per state. */
    int64_t now = INT64_MIN;
    for (int i = 0; i < op->nstates; i++) {
        sl_state_t *st = op->states[i];
        if (SL_LIKELY(!st->ttl || !st->ttl->every_record)) continue;
        if (now == INT64_MIN) now = sl_kb_now_ms(op->kb);
        sl_ttl_on_record(op->kb, st->sid, st->ttl, now);
    }
    return kg;
}

int sl_tag_lookup(const sl_tag_table_t *t, const char *name) {
    for (int i = 1; t && i < t->n; i++)
        if (strcmp(t->tags[i].name, name) == 0) return i;
    return SL_ENOTFOUND;
}

/* ---- collector ---- */

void sl_collector_init(sl_collector_t *c, sl_operator_t *op) {
    memset(c, 0, sizeof *c);
    c->op = op;
    sl_rw_init(&c->w);
    sl_rw_init(&c->side_w);
}

void sl_collector_free(sl_collector_t *c) {
    sl_rw_free(&c->w);
    sl_rw_free(&c->side_w);
}

sl_row_writer_t *sl_out_row(sl_collector_t *c) {
    sl_rw_begin(&c->w, c->op->out_schema);
    c->begun = true;
    return &c->w;
}

void sl_out_set_timestamp(sl_collector_t *c, int64_t ts) {
    c->ts = ts;
    c->ts_set = true;
}

static void emit_from(sl_collector_t *c, sl_row_writer_t *w, int tag) {
    if (w->err) {
        sl_op_fail(c->op, w->err, "bad output row (%s)", sl_strerror(w->err));
        return;
    }
    sl_record_t rec = {sl_rw_row(w), c->ts_set ? c->ts : c->in_ts};
    c->emitted++;
    sl_op_emit(c->op, tag, &rec);
}

void sl_emit(sl_collector_t *c) {
    if (!c->begun) {
        sl_op_fail(c->op, SL_EINVAL, "sl_emit without sl_out_row");
        return;
    }
    emit_from(c, &c->w, 0);
}

sl_row_writer_t *sl_side_row(sl_collector_t *c, const char *tag) {
    int id = sl_tag_lookup(c->op->tags, tag);
    if (id < 0) {
        sl_op_fail(c->op, SL_ENOTFOUND, "unknown side-output tag '%s'", tag);
        c->side_tag = -1;
        sl_rw_begin(&c->side_w, c->op->out_schema);
        return &c->side_w;
    }
    c->side_tag = id;
    sl_rw_begin(&c->side_w, c->op->tags->tags[id].schema);
    return &c->side_w;
}

void sl_emit_side(sl_collector_t *c, const char *tag) {
    if (c->side_tag <= 0 || strcmp(c->op->tags->tags[c->side_tag].name, tag) != 0) {
        sl_op_fail(c->op, SL_EINVAL, "sl_emit_side('%s') without a matching sl_side_row", tag);
        return;
    }
    emit_from(c, &c->side_w, c->side_tag);
}

/* ---- keyed state for user functions ---- */

_Static_assert(SL_TTL_UPDATE_ON_CREATE_AND_WRITE == 0 && SL_TTL_UPDATE_ON_READ_AND_WRITE == 1 &&
                   SL_TTL_NEVER_RETURN_EXPIRED == 0 && SL_TTL_RETURN_EXPIRED_IF_NOT_CLEANED_UP == 1,
               "the checks below rely on these values");

/* Flink's default of cleanupIncrementally: entries examined per access. */
#define SL_TTL_DEFAULT_CLEANUP_SIZE 5

sl_state_ttl_t sl_state_ttl(int64_t ttl_ms) { return (sl_state_ttl_t){.ttl_ms = ttl_ms}; }

void sl_op_set_state_schemas(sl_operator_t *op, int n, const char *const *names, sl_schema_t *const *schemas) {
    op->typed_names = sl_realloc(op->typed_names, (size_t)(op->ntyped + n + 1) * sizeof *op->typed_names);
    op->typed_schemas = sl_realloc(op->typed_schemas, (size_t)(op->ntyped + n + 1) * sizeof *op->typed_schemas);
    op->typed_ttl = sl_realloc(op->typed_ttl, (size_t)(op->ntyped + n + 1) * sizeof *op->typed_ttl);
    for (int i = 0; i < n; i++) {
        op->typed_names[op->ntyped] = sl_strdup(names[i]);
        op->typed_ttl[op->ntyped] = -1;
        op->typed_schemas[op->ntyped++] = sl_schema_ref(schemas[i]);
    }
}

static int typed_index(const sl_operator_t *op, const char *name) {
    for (int i = 0; name && i < op->ntyped; i++)
        if (strcmp(op->typed_names[i], name) == 0) return i;
    return -1;
}

const sl_schema_t *sl_op_state_schema(const sl_operator_t *op, const char *name) {
    int i = typed_index(op, name);
    return i < 0 ? NULL : op->typed_schemas[i];
}

/* A value written into a typed state must be a row of its schema. */
static int check_row(sl_state_t *st, const void *v, uint32_t len) {
    sl_row_t r = {v, len, st->schema};
    if (SL_LIKELY(v && sl_row_validate(&r) == 0)) return 0;
    char ddl[512];
    sl_schema_format(st->schema, ddl, sizeof ddl);
    return sl_op_fail(st->op, SL_EINVAL, "state '%s': a value of %u bytes is not a row of its schema (%s)", st->name,
                      (unsigned)len, ddl);
}

static sl_state_t *new_state(sl_rt_t *rt, const char *name, sl_state_kind_t kind, int pub_kind,
                             const sl_state_ttl_t *ttl) {
    sl_operator_t *op = rt->op;
    const char *nm = name ? name : "(null)";
    if (!op->kb) {
        sl_op_fail(op, SL_EINVAL, "keyed state '%s' used on a non-keyed stream", nm);
        return NULL;
    }
    sl_state_desc_t d = {.name = name, .kind = kind};
    const sl_schema_t *schema = sl_op_state_schema(op, name);
    if (schema && pub_kind > 2) {
        sl_op_fail(op, SL_EINVAL, "state '%s' has a row schema (sl_keyed_state_schema): a typed state is a value, "
                   "list or map state", nm);
        return NULL;
    }
    /* A restored state declared with the other TTL-ness (a typed one too:
     * op->typed_ttl holds what its record said) is migrated by the backend
     * when register_state below declares it (Flink 2.2: TtlAwareSerializer):
     * its items get or lose their timestamp (state_backend.h). */
    int ti = schema ? typed_index(op, name) : -1;
    if (ttl) {
        if (ttl->ttl_ms <= 0) {
            sl_op_fail(op, SL_EINVAL, "state '%s': TTL of %lld ms (must be > 0)", nm, (long long)ttl->ttl_ms);
            return NULL;
        }
        if ((unsigned)ttl->update_type > SL_TTL_UPDATE_ON_READ_AND_WRITE ||
            (unsigned)ttl->visibility > SL_TTL_RETURN_EXPIRED_IF_NOT_CLEANED_UP) {
            sl_op_fail(op, SL_EINVAL, "state '%s': unknown TTL update type (%d) or visibility (%d)", nm,
                       (int)ttl->update_type, (int)ttl->visibility);
            return NULL;
        }
        d.ttl_ms = ttl->ttl_ms;
        d.ttl_update = ttl->update_type == SL_TTL_UPDATE_ON_READ_AND_WRITE ? SL_TTL_ON_READ_AND_WRITE
                                                                           : SL_TTL_ON_CREATE_AND_WRITE;
    }
    int sid = op->kb->ops->register_state(op->kb, &d);
    if (sid == SL_EFORMAT) {
        sl_op_fail(op, sid, "operator '%s', state '%s': its restored items cannot be migrated %s a TTL (an item is "
                   "shorter than its timestamp)", op->uid ? op->uid : op->name, nm, ttl ? "to" : "from");
        return NULL;
    }
    if (sid < 0) {
        sl_op_fail(op, sid, "cannot register state '%s' (a name is needed, and one declared again must keep its kind "
                   "and TTL)", nm);
        return NULL;
    }
    sl_state_t *st = sl_calloc(1, sizeof *st);
    st->op = op;
    st->sid = sid;
    st->kind = pub_kind;
    st->name = sl_strdup(name);
    st->schema = schema;
    if (ti >= 0) __atomic_store_n(&op->typed_ttl[ti], ttl ? ttl->ttl_ms : 0, __ATOMIC_RELAXED);
    if (ttl)
        st->ttl = sl_ttl_state_new(name, ttl->ttl_ms, d.ttl_update,
                                   ttl->visibility == SL_TTL_RETURN_EXPIRED_IF_NOT_CLEANED_UP,
                                   ttl->cleanup_size == 0 ? SL_TTL_DEFAULT_CLEANUP_SIZE : ttl->cleanup_size,
                                   ttl->cleanup_every_record);
    op->states = sl_realloc(op->states, (size_t)(op->nstates + 1) * sizeof *op->states);
    op->states[op->nstates++] = st;
    return st;
}

static sl_state_t *new_fold(sl_rt_t *rt, const char *name, int pub_kind, uint32_t size,
                            void (*init)(void *ctx, void *acc), sl_reduce_bytes_fn fn, void *ctx,
                            const sl_state_ttl_t *ttl) {
    sl_state_t *st = new_state(rt, name, SL_STATE_VALUE, pub_kind, ttl);
    if (st) {
        st->size = size;
        st->fn = fn;
        st->init = init;
        st->ctx = ctx;
    }
    return st;
}

sl_state_t *sl_state_value(sl_rt_t *rt, const char *name) { return new_state(rt, name, SL_STATE_VALUE, 0, NULL); }
sl_state_t *sl_state_list(sl_rt_t *rt, const char *name) { return new_state(rt, name, SL_STATE_LIST, 1, NULL); }
sl_state_t *sl_state_map(sl_rt_t *rt, const char *name) { return new_state(rt, name, SL_STATE_MAP, 2, NULL); }

sl_state_t *sl_state_reducing(sl_rt_t *rt, const char *name, uint32_t size, sl_reduce_bytes_fn fn, void *ctx) {
    return new_fold(rt, name, 3, size, NULL, fn, ctx, NULL);
}

sl_state_t *sl_state_aggregating(sl_rt_t *rt, const char *name, uint32_t acc_size,
                                 void (*init)(void *ctx, void *acc), sl_reduce_bytes_fn add, void *ctx) {
    return new_fold(rt, name, 4, acc_size, init, add, ctx, NULL);
}

sl_state_t *sl_state_value_ttl(sl_rt_t *rt, const char *name, sl_state_ttl_t ttl) {
    return new_state(rt, name, SL_STATE_VALUE, 0, &ttl);
}
sl_state_t *sl_state_list_ttl(sl_rt_t *rt, const char *name, sl_state_ttl_t ttl) {
    return new_state(rt, name, SL_STATE_LIST, 1, &ttl);
}
sl_state_t *sl_state_map_ttl(sl_rt_t *rt, const char *name, sl_state_ttl_t ttl) {
    return new_state(rt, name, SL_STATE_MAP, 2, &ttl);
}
sl_state_t *sl_state_reducing_ttl(sl_rt_t *rt, const char *name, uint32_t size, sl_reduce_bytes_fn fn, void *ctx,
                                  sl_state_ttl_t ttl) {
    return new_fold(rt, name, 3, size, NULL, fn, ctx, &ttl);
}
sl_state_t *sl_state_aggregating_ttl(sl_rt_t *rt, const char *name, uint32_t acc_size,
                                     void (*init)(void *ctx, void *acc), sl_reduce_bytes_fn add, void *ctx,
                                     sl_state_ttl_t ttl) {
    return new_fold(rt, name, 4, acc_size, init, add, ctx, &ttl);
}

/* ---- state handles kept in a context shared by subtasks ----
 *
 * A handle belongs to one subtask's operator.  A function without
 * ctx_clone / ctx_size shares its context between subtasks, and a handle
 * stored there by one subtask's open() is then used by the others too.
 * Every access therefore checks that the handle belongs to the task
 * running on this thread (one thread-local read and a compare) and
 * otherwise uses the same-named state of this task's instance of the same
 * operator: the state stays per subtask, as the user meant. */

static _Thread_local const sl_op_context_t *thread_ctx;
static _Thread_local sl_operator_t *const *thread_ops;
static _Thread_local int thread_nops;

void sl_op_bind_thread(const sl_op_context_t *ctx, sl_operator_t *const *ops, int nops) {
    thread_ctx = ctx;
    thread_ops = ops;
    thread_nops = nops;
}

sl_operator_t *sl_op_thread_instance_slow(sl_operator_t *owner) {
    for (int i = 0; i < thread_nops; i++) {
        sl_operator_t *op = thread_ops[i];
        if (op->chain_index != owner->chain_index || op->vt != owner->vt) continue;
        if ((op->name == NULL) != (owner->name == NULL) || (op->name && strcmp(op->name, owner->name) != 0)) continue;
        return op;
    }
    return owner; /* not an operator of this thread's task (a unit test or a helper thread): use it as it is */
}

bool sl_op_thread_is(const sl_operator_t *op) { return op->ctx == thread_ctx || !thread_ctx; }

static sl_state_t *resolve_slow(sl_state_t *st) {
    sl_operator_t *op = sl_op_thread_instance_slow(st->op);
    if (op == st->op) return st;
    for (int j = 0; j < op->nstates; j++)
        if (op->states[j]->kind == st->kind && strcmp(op->states[j]->name, st->name) == 0) return op->states[j];
    sl_op_fail(op, SL_EINVAL,
               "state '%s' was declared by another subtask's open() but not by this one's (declare the same "
               "states in every subtask)",
               st->name);
    return NULL;
}

static inline sl_state_t *resolve(sl_state_t *st) {
    if (SL_LIKELY(sl_op_thread_is(st->op))) return st;
    return resolve_slow(st);
}

#define KB(st) ((st)->op->kb)

/* A TTL accessor failed (a stored item without its timestamp, or the
 * backend): the task fails with the state's name. */
static int ttl_fail(sl_state_t *st, int rc) {
    if (rc == SL_EFORMAT)
        return sl_op_fail(st->op, rc,
                          "state '%s': a stored item is shorter than its TTL timestamp (was the state written "
                          "without TTL?)",
                          st->ttl->name);
    return sl_op_fail(st->op, rc, "state '%s': %s", st->ttl->name, sl_strerror(rc));
}

static const void *ttl_value_get(sl_state_t *st, uint32_t *len) {
    const void *v = NULL;
    uint32_t l = 0;
    int rc = sl_ttl_value_get(KB(st), st->sid, st->ttl, "", 0, &v, &l);
    if (rc < 0) {
        ttl_fail(st, rc);
        v = NULL;
        l = 0;
    }
    if (len) *len = l;
    return v;
}

const void *sl_value_get(sl_state_t *st, uint32_t *len) {
    if (!(st = resolve(st))) return NULL;
    if (st->ttl) return ttl_value_get(st, len);
    uint32_t l = 0;
    const void *v = KB(st)->ops->get(KB(st), st->sid, "", 0, &l);
    if (len) *len = l;
    return v;
}

int sl_value_put(sl_state_t *st, const void *v, uint32_t len) {
    if (!(st = resolve(st))) return SL_EINVAL;
    if (st->schema && check_row(st, v, len)) return SL_EINVAL;
    if (st->ttl) return sl_ttl_value_put(KB(st), st->sid, st->ttl, "", 0, v, len);
    return KB(st)->ops->put(KB(st), st->sid, "", 0, v, len);
}

const sl_schema_t *sl_state_schema(sl_state_t *st) { return (st = resolve(st)) ? st->schema : NULL; }

bool sl_value_get_row(sl_state_t *st, sl_row_t *out) {
    uint32_t len = 0;
    const void *v = sl_value_get(st, &len);
    if (!v || !(st = resolve(st)) || !st->schema) return false;
    *out = (sl_row_t){v, len, st->schema};
    return true;
}

int sl_value_put_row(sl_state_t *st, const sl_row_t *row) {
    if (!(st = resolve(st))) return SL_EINVAL;
    if (!st->schema || !row || !sl_schema_equal(row->schema, st->schema))
        return sl_op_fail(st->op, SL_EINVAL, "state '%s': %s", st->name,
                          st->schema ? "the row is not of the state's schema" : "the state has no row schema");
    return sl_value_put(st, row->data, row->len);
}

void sl_state_clear(sl_state_t *st) {
    if (!(st = resolve(st))) return;
    if (st->ttl)
        sl_ttl_remove(KB(st), st->sid, st->ttl, "", 0);
    else
        KB(st)->ops->remove(KB(st), st->sid, "", 0);
}

int sl_list_add(sl_state_t *st, const void *v, uint32_t len) {
    if (!(st = resolve(st))) return SL_EINVAL;
    if (st->schema && check_row(st, v, len)) return SL_EINVAL;
    if (st->ttl) return sl_ttl_list_add(KB(st), st->sid, st->ttl, "", 0, v, len);
    return KB(st)->ops->list_add(KB(st), st->sid, "", 0, v, len);
}

typedef struct {
    void (*fn)(void *c, const void *v, uint32_t len);
    void *c;
} list_visit_t;

static int list_cb(void *c, const void *v, uint32_t len) {
    list_visit_t *lv = c;
    if (lv->fn) lv->fn(lv->c, v, len);
    return 0;
}

int sl_list_foreach(sl_state_t *st, void (*fn)(void *c, const void *v, uint32_t len), void *c) {
    if (!(st = resolve(st))) return SL_EINVAL;
    list_visit_t lv = {fn, c};
    if (st->ttl) {
        int rc = sl_ttl_list_foreach(KB(st), st->sid, st->ttl, "", 0, list_cb, &lv);
        return rc < 0 ? ttl_fail(st, rc) : rc;
    }
    return KB(st)->ops->list_foreach(KB(st), st->sid, "", 0, list_cb, &lv);
}

const void *sl_map_get(sl_state_t *st, const void *k, uint32_t klen, uint32_t *vlen) {
    if (!(st = resolve(st))) return NULL;
    if (st->ttl) {
        const void *v = NULL;
        uint32_t l = 0;
        int rc = sl_ttl_map_get(KB(st), st->sid, st->ttl, "", 0, k, klen, &v, &l);
        if (rc < 0) {
            ttl_fail(st, rc);
            return NULL;
        }
        if (vlen) *vlen = l;
        return v;
    }
    return KB(st)->ops->map_get(KB(st), st->sid, "", 0, k, klen, vlen);
}

int sl_map_put(sl_state_t *st, const void *k, uint32_t klen, const void *v, uint32_t vlen) {
    if (!(st = resolve(st))) return SL_EINVAL;
    if (st->schema && check_row(st, v, vlen)) return SL_EINVAL;
    if (st->ttl) return sl_ttl_map_put(KB(st), st->sid, st->ttl, "", 0, k, klen, v, vlen);
    return KB(st)->ops->map_put(KB(st), st->sid, "", 0, k, klen, v, vlen);
}

int sl_map_remove(sl_state_t *st, const void *k, uint32_t klen) {
    if (!(st = resolve(st))) return SL_EINVAL;
    if (st->ttl) return sl_ttl_map_remove(KB(st), st->sid, st->ttl, "", 0, k, klen);
    return KB(st)->ops->map_remove(KB(st), st->sid, "", 0, k, klen);
}

typedef struct {
    void (*fn)(void *c, const void *k, uint32_t kl, const void *v, uint32_t vl);
    void *c;
} map_visit_t;

static int map_cb(void *c, const void *k, uint32_t kl, const void *v, uint32_t vl) {
    map_visit_t *mv = c;
    mv->fn(mv->c, k, kl, v, vl);
    return 0;
}

int sl_map_foreach(sl_state_t *st, void (*fn)(void *c, const void *k, uint32_t kl, const void *v, uint32_t vl),
                   void *c) {
    if (!(st = resolve(st))) return SL_EINVAL;
    map_visit_t mv = {fn, c};
    if (st->ttl) {
        int rc = sl_ttl_map_foreach(KB(st), st->sid, st->ttl, "", 0, fn ? map_cb : NULL, &mv);
        return rc < 0 ? ttl_fail(st, rc) : rc;
    }
    return KB(st)->ops->map_foreach(KB(st), st->sid, "", 0, map_cb, &mv);
}

int sl_fold_add(sl_state_t *st, const void *value) {
    if (!(st = resolve(st))) return SL_EINVAL;
    if (st->kind != 3 && st->kind != 4) return SL_EINVAL;
    if (st->ttl) {
        int rc = sl_ttl_fold(KB(st), st->sid, st->ttl, "", 0, st->size, st->kind == 3, st->kind == 4 ? st->init : NULL,
                             st->fn, st->ctx, value);
        return rc < 0 ? ttl_fail(st, rc) : rc;
    }
    bool created = false;
    void *acc = KB(st)->ops->get_mut(KB(st), st->sid, "", 0, st->size, &created);
    if (!acc) return SL_ESTATE;
    if (st->kind == 3) {
        if (created)
            memcpy(acc, value, st->size);
        else
            st->fn(st->ctx, acc, value);
    } else {
        if (created && st->init) st->init(st->ctx, acc);
        st->fn(st->ctx, acc, value);
    }
    return KB(st)->ops->put(KB(st), st->sid, "", 0, acc, st->size);
}

const void *sl_fold_get(sl_state_t *st) {
    if (!(st = resolve(st))) return NULL;
    uint32_t len;
    if (st->ttl) return ttl_value_get(st, &len);
    return KB(st)->ops->get(KB(st), st->sid, "", 0, &len);
}

/* ---- process-function context ---- */

const uint8_t *sl_pctx_key(sl_pctx_t *pc, uint32_t *len) {
    *len = pc->op->kb ? pc->op->kb->keylen : 0;
    return pc->op->kb ? pc->op->kb->key : NULL;
}

int64_t sl_pctx_timestamp(sl_pctx_t *pc) { return pc->ts; }
int64_t sl_pctx_watermark(sl_pctx_t *pc) { return pc->op->wm; }
int64_t sl_pctx_now(sl_pctx_t *pc) { return sl_op_now(pc->op); }

static void timer_op(sl_pctx_t *pc, sl_time_domain_t d, int64_t ts, bool del) {
    sl_operator_t *op = pc->op;
    if (!op->timers) {
        sl_op_fail(op, SL_EINVAL, "timers need a keyed stream");
        return;
    }
    sl_keyed_backend_t *kb = op->kb;
    if (del) /* the backend's keyhash is its current key's sl_kg_key_hash: no second hash */
        sl_timers_delete_hashed(op->timers, d, kb->kg, kb->keyhash, kb->key, kb->keylen, "", 0, ts);
    else if (sl_timers_register_hashed(op->timers, d, kb->kg, kb->keyhash, kb->key, kb->keylen, "", 0, ts) > 0 &&
             d == SL_TIME_PROCESSING)
        sl_op_schedule_processing(op, ts);
}

void sl_timer_event(sl_pctx_t *pc, int64_t ts) { timer_op(pc, SL_TIME_EVENT, ts, false); }
void sl_timer_processing(sl_pctx_t *pc, int64_t ts) { timer_op(pc, SL_TIME_PROCESSING, ts, false); }
void sl_timer_delete_event(sl_pctx_t *pc, int64_t ts) { timer_op(pc, SL_TIME_EVENT, ts, true); }
void sl_timer_delete_processing(sl_pctx_t *pc, int64_t ts) { timer_op(pc, SL_TIME_PROCESSING, ts, true); }

int sl_rt_subtask(sl_rt_t *rt) { return rt->op->subtask; }
int sl_rt_parallelism(sl_rt_t *rt) { return rt->op->parallelism; }
