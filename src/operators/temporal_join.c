/*
 * temporal_join.c — the event-time temporal join (Flink's
 * TemporalRowTimeJoinOperator): the operator and its statistics.  Semantics
 * in include/sluice/temporal_join.h; the builder is api/temporal_join_api.c.
 *
 * Input 0 is the probe stream, input 1 the changelog of the versioned
 * table, both keyed by the join key.  Keyed state per key, all through the
 * state backend (heap or RocksDB):
 *   "tj-probe"    list of waiting probe rows: i64le timestamp, row bytes;
 *   "tj-versions" map: version timestamp (8 bytes, big-endian with the sign
 *                 bit flipped, so bytes order like numbers) -> u8 deleted,
 *                 row bytes.
 * An event-time timer per (key, timestamp) of every probe row and version:
 * when the watermark reaches it, the key's probe rows up to the watermark
 * are joined and emitted, the versions no later probe row can reach are
 * dropped, and the key's other timers up to the watermark are deleted (the
 * work is done).  A key whose state is gone has no timer left.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "common/common.h"
#include "operators/temporal_join_op.h"
#include "sluice/temporal_join.h"

typedef sl_temporal_join_spec_t tj_spec_t;

void sl_temporal_join_spec_free(void *p) {
    tj_spec_t *s = p;
    sl_free(s->vfields);
    sl_free(s);
}

/* ---- statistics (include/sluice/temporal_join.h) -------------------- */

int64_t sl_temporal_join_emitted(const sl_temporal_join_stats_t *s) { return s ? atomic_load(&s->emitted) : 0; }
int64_t sl_temporal_join_unmatched(const sl_temporal_join_stats_t *s) { return s ? atomic_load(&s->unmatched) : 0; }
int64_t sl_temporal_join_versions_dropped(const sl_temporal_join_stats_t *s) {
    return s ? atomic_load(&s->dropped) : 0;
}
int64_t sl_temporal_join_versions_at_end(const sl_temporal_join_stats_t *s) {
    return s && atomic_load(&s->ended_subtasks) >= 0 ? atomic_load(&s->versions_end) : -1;
}
int64_t sl_temporal_join_probes_at_end(const sl_temporal_join_stats_t *s) {
    return s && atomic_load(&s->ended_subtasks) >= 0 ? atomic_load(&s->probes_end) : -1;
}

/* ---- the operator --------------------------------------------------- */

typedef struct version {
    int64_t ts;
    bool deleted;
    const uint8_t *row; /* into vbytes, once collected */
    size_t off;
    uint32_t len;
} version_t;

typedef struct probe_row {
    int64_t ts;
    const uint8_t *row; /* into pbytes, once collected */
    size_t off;
    uint32_t len;
} probe_row_t;

typedef struct tj_op {
    sl_operator_t base;
    tj_spec_t spec;
    int sid_probe, sid_versions;
    sl_row_writer_t w;
    /* scratch of one timer's work: copies of the key's state */
    sl_buf_t vbytes, pbytes;
    version_t *v;
    int64_t nv, vcap;
    probe_row_t *p;
    int64_t np, pcap;
    int64_t emitted, unmatched, dropped; /* this subtask's, added to the stats at close */
} tj_op_t;

static void ts_key(int64_t ts, uint8_t k[8]) {
    uint64_t u = (uint64_t)ts ^ (1ull << 63);
    for (int i = 0; i < 8; i++) k[i] = (uint8_t)(u >> (56 - 8 * i));
}

static int64_t ts_from_key(const uint8_t k[8]) {
    uint64_t u = 0;
    for (int i = 0; i < 8; i++) u = (u << 8) | k[i];
    return (int64_t)(u ^ (1ull << 63));
}

static int tj_open(sl_operator_t *o) {
    tj_op_t *op = (tj_op_t *)o;
    sl_state_desc_t dp = {.name = "tj-probe", .kind = SL_STATE_LIST};
    sl_state_desc_t dv = {.name = "tj-versions", .kind = SL_STATE_MAP};
    op->sid_probe = o->kb->ops->register_state(o->kb, &dp);
    op->sid_versions = o->kb->ops->register_state(o->kb, &dv);
    if (op->sid_probe < 0 || op->sid_versions < 0)
        return sl_op_fail(o, SL_ESTATE, "cannot register the join's keyed state");
    return 0;
}

static int tj_process(sl_operator_t *o, int input, const sl_record_t *rec) {
    tj_op_t *op = (tj_op_t *)o;
    if (SL_UNLIKELY(rec->ts == SL_NO_TIMESTAMP))
        return sl_op_fail(o, SL_EINVAL,
                          "a %s row has no event timestamp (give that stream a watermark strategy with timestamps)",
                          input == 0 ? "probe" : "changelog");
    int kg = sl_op_set_key_from(o, input, &rec->row);
    if (kg < 0) return kg;
    sl_keyed_backend_t *kb = o->kb;
    int rc;
    if (input == 0) {
        sl_buf_t *b = &op->pbytes;
        b->len = 0;
        sl_buf_append(b, &rec->ts, 8);
        sl_buf_append(b, rec->row.data, rec->row.len);
        rc = kb->ops->list_add(kb, op->sid_probe, "", 0, b->p, (uint32_t)b->len);
    } else {
        const sl_row_t *r = &rec->row;
        uint8_t deleted = op->spec.delete_field >= 0 && !sl_row_is_null(r, op->spec.delete_field) &&
                          sl_row_bool(r, op->spec.delete_field);
        uint8_t k[8];
        ts_key(rec->ts, k);
        sl_buf_t *b = &op->vbytes;
        b->len = 0;
        sl_buf_append(b, &deleted, 1);
        sl_buf_append(b, r->data, r->len);
        rc = kb->ops->map_put(kb, op->sid_versions, "", 0, k, 8, b->p, (uint32_t)b->len);
    }
    if (rc < 0) return sl_op_fail(o, rc, "keyed state write failed (%s)", sl_strerror(rc));
    sl_timers_register(o->timers, SL_TIME_EVENT, kb->kg, kb->key, kb->keylen, "", 0, rec->ts);
    return 0;
}

static int collect_version(void *c, const void *k, uint32_t kl, const void *v, uint32_t vl) {
    tj_op_t *op = c;
    if (kl != 8 || vl < 1) return SL_EFORMAT;
    if (op->nv == op->vcap) {
        op->vcap = op->vcap ? op->vcap * 2 : 16;
        op->v = sl_realloc(op->v, (size_t)op->vcap * sizeof *op->v);
    }
    /* the buffer may move while collecting: keep the offset for now */
    size_t off = op->vbytes.len;
    sl_buf_append(&op->vbytes, v, vl);
    op->v[op->nv++] = (version_t){ts_from_key(k), ((const uint8_t *)v)[0] != 0, NULL, off + 1, vl - 1};
    return 0;
}

static int collect_probe(void *c, const void *v, uint32_t len) {
    tj_op_t *op = c;
    if (len < 8) return SL_EFORMAT;
    if (op->np == op->pcap) {
        op->pcap = op->pcap ? op->pcap * 2 : 16;
        op->p = sl_realloc(op->p, (size_t)op->pcap * sizeof *op->p);
    }
    size_t off = op->pbytes.len;
    sl_buf_append(&op->pbytes, v, len);
    int64_t ts;
    memcpy(&ts, v, 8);
    op->p[op->np++] = (probe_row_t){ts, NULL, off + 8, len - 8};
    return 0;
}

static int cmp_version(const void *a, const void *b) {
    int64_t x = ((const version_t *)a)->ts, y = ((const version_t *)b)->ts;
    return (x > y) - (x < y);
}

static int cmp_probe(const void *a, const void *b) {
    int64_t x = ((const probe_row_t *)a)->ts, y = ((const probe_row_t *)b)->ts;
    return (x > y) - (x < y);
}

static void emit(tj_op_t *op, const probe_row_t *p, const version_t *v) {
    sl_operator_t *o = &op->base;
    sl_row_t pr = {p->row, p->len, o->in_schema[0]};
    sl_rw_begin(&op->w, o->out_schema);
    for (int i = 0; i < op->spec.nprobe; i++) sl_rw_copy_field(&op->w, i, &pr, i);
    if (v) {
        sl_row_t vr = {v->row, v->len, o->in_schema[1]};
        for (int j = 0; j < op->spec.nv; j++) sl_rw_copy_field(&op->w, op->spec.nprobe + j, &vr, op->spec.vfields[j]);
    } else {
        for (int j = 0; j < op->spec.nv; j++) sl_rw_set_null(&op->w, op->spec.nprobe + j);
    }
    if (op->w.err) {
        sl_op_fail(o, op->w.err, "bad output row (%s)", sl_strerror(op->w.err));
        return;
    }
    sl_record_t rec = {sl_rw_row(&op->w), p->ts};
    op->emitted++;
    sl_op_emit(o, 0, &rec);
}

/* The watermark reached wm and a timer of the current key fired: join and
 * emit its probe rows <= wm, drop unreachable versions, delete the key's
 * other timers <= wm. */
static int join_key(tj_op_t *op, int64_t wm) {
    sl_operator_t *o = &op->base;
    sl_keyed_backend_t *kb = o->kb;
    op->vbytes.len = op->pbytes.len = 0;
    op->nv = op->np = 0;
    int rc = kb->ops->map_foreach(kb, op->sid_versions, "", 0, collect_version, op);
    if (rc >= 0) rc = kb->ops->list_foreach(kb, op->sid_probe, "", 0, collect_probe, op);
    if (rc < 0) return sl_op_fail(o, rc, "reading the join's keyed state failed (%s)", sl_strerror(rc));
    for (int64_t i = 0; i < op->nv; i++) op->v[i].row = op->vbytes.p + op->v[i].off;
    for (int64_t i = 0; i < op->np; i++) op->p[i].row = op->pbytes.p + op->p[i].off;
    if (op->nv > 1) qsort(op->v, (size_t)op->nv, sizeof *op->v, cmp_version);
    if (op->np > 1) qsort(op->p, (size_t)op->np, sizeof *op->p, cmp_probe);

    /* probe rows in time order; j walks to the latest version <= the row */
    int64_t j = -1, nkeep = 0;
    for (int64_t i = 0; i < op->np; i++) {
        const probe_row_t *p = &op->p[i];
        if (p->ts > wm) {
            op->p[nkeep++] = *p;
            continue;
        }
        while (j + 1 < op->nv && op->v[j + 1].ts <= p->ts) j++;
        const version_t *v = j >= 0 && !op->v[j].deleted ? &op->v[j] : NULL;
        if (v || op->spec.kind == SL_TEMPORAL_LEFT) emit(op, p, v);
        if (!v) op->unmatched++;
        sl_timers_delete(o->timers, SL_TIME_EVENT, kb->kg, kb->key, kb->keylen, "", 0, p->ts);
    }
    if (nkeep != op->np) {
        const void **vals = sl_calloc((size_t)(nkeep ? nkeep : 1), sizeof *vals);
        uint32_t *lens = sl_calloc((size_t)(nkeep ? nkeep : 1), sizeof *lens);
        for (int64_t i = 0; i < nkeep; i++) { /* the stored element starts 8 bytes before the row */
            vals[i] = op->p[i].row - 8;
            lens[i] = op->p[i].len + 8;
        }
        rc = kb->ops->list_replace(kb, op->sid_probe, "", 0, (int)nkeep, vals, lens);
        sl_free(vals);
        sl_free(lens);
        if (rc < 0) return sl_op_fail(o, rc, "writing the join's keyed state failed (%s)", sl_strerror(rc));
    }
    /* versions: keep the newest <= wm (unless a delete) and every later one */
    int64_t last = -1;
    for (int64_t i = 0; i < op->nv && op->v[i].ts <= wm; i++) last = i;
    int64_t upto = last >= 0 && op->v[last].deleted ? last + 1 : last; /* drop [0, upto) */
    for (int64_t i = 0; i < upto; i++) {
        uint8_t k[8];
        ts_key(op->v[i].ts, k);
        rc = kb->ops->map_remove(kb, op->sid_versions, "", 0, k, 8);
        if (rc < 0) return sl_op_fail(o, rc, "writing the join's keyed state failed (%s)", sl_strerror(rc));
        op->dropped++;
    }
    for (int64_t i = 0; i <= last; i++)
        sl_timers_delete(o->timers, SL_TIME_EVENT, kb->kg, kb->key, kb->keylen, "", 0, op->v[i].ts);
    return 0;
}

static int tj_watermark(sl_operator_t *o, int64_t wm) {
    tj_op_t *op = (tj_op_t *)o;
    sl_timer_t t;
    while (sl_timers_pop(o->timers, SL_TIME_EVENT, wm, &t)) {
        sl_kb_set_key(o->kb, t.key, t.keylen);
        int rc = join_key(op, wm);
        if (rc < 0) return rc;
    }
    sl_op_emit_watermark(o, wm);
    return 0;
}

/* ---- what the state holds at the end (statistics) ---- */

typedef struct keys {
    sl_buf_t bytes;
    uint32_t *lens;
    int64_t n, cap;
} keys_t;

static int add_key(void *c, const void *key, uint32_t klen, const void *ns, uint32_t nslen) {
    keys_t *k = c;
    if (k->n == k->cap) {
        k->cap = k->cap ? k->cap * 2 : 64;
        k->lens = sl_realloc(k->lens, (size_t)k->cap * sizeof *k->lens);
    }
    sl_buf_append(&k->bytes, key, klen);
    k->lens[k->n++] = klen;
    return 0;
}

static int count_item(void *c, const void *k, uint32_t kl, const void *v, uint32_t vl) {
    (*(int64_t *)c)++;
    return 0;
}

static int count_elem(void *c, const void *v, uint32_t len) {
    (*(int64_t *)c)++;
    return 0;
}

static int64_t count_state(tj_op_t *op, int sid, bool map) {
    sl_keyed_backend_t *kb = op->base.kb;
    keys_t k = {0};
    kb->ops->foreach_entry(kb, sid, add_key, &k);
    int64_t n = 0;
    size_t off = 0;
    for (int64_t i = 0; i < k.n; i++) {
        sl_kb_set_key(kb, k.bytes.p + off, k.lens[i]);
        off += k.lens[i];
        if (map)
            kb->ops->map_foreach(kb, sid, "", 0, count_item, &n);
        else
            kb->ops->list_foreach(kb, sid, "", 0, count_elem, &n);
    }
    sl_buf_free(&k.bytes);
    sl_free(k.lens);
    return n;
}

static void tj_close(sl_operator_t *o) {
    tj_op_t *op = (tj_op_t *)o;
    sl_temporal_join_stats_t *s = op->spec.stats;
    if (!s) return;
    atomic_fetch_add(&s->emitted, op->emitted);
    atomic_fetch_add(&s->unmatched, op->unmatched);
    atomic_fetch_add(&s->dropped, op->dropped);
    op->emitted = op->unmatched = op->dropped = 0;
    if (o->in_ended[0] && o->in_ended[1] && op->sid_probe >= 0) {
        atomic_fetch_add(&s->versions_end, count_state(op, op->sid_versions, true));
        atomic_fetch_add(&s->probes_end, count_state(op, op->sid_probe, false));
    } else {
        atomic_store(&s->ended_subtasks, -1); /* this run did not end with its input */
    }
    op->spec.stats = NULL; /* once */
}

static void tj_destroy(sl_operator_t *o) {
    tj_op_t *op = (tj_op_t *)o;
    sl_rw_free(&op->w);
    sl_buf_free(&op->vbytes);
    sl_buf_free(&op->pbytes);
    sl_free(op->v);
    sl_free(op->p);
    sl_op_base_free(o);
    sl_free(op);
}

static const sl_operator_vt_t temporal_join_vt = {.kind = "TemporalJoin",
                                                  .open = tj_open,
                                                  .process = tj_process,
                                                  .advance_watermark = tj_watermark,
                                                  .close = tj_close,
                                                  .destroy = tj_destroy};

sl_operator_t *sl_temporal_join_op_create(const void *spec, const sl_op_init_t *init) {
    tj_op_t *op = sl_calloc(1, sizeof *op);
    op->spec = *(const tj_spec_t *)spec;
    op->sid_probe = op->sid_versions = -1;
    sl_op_base_init(&op->base, &temporal_join_vt, init);
    sl_rw_init(&op->w);
    return &op->base;
}
