/*
 * plan.c — the job plan's encoding (JSON through jansson, keys sorted so
 * one plan has one encoding), its checked decoding, its fingerprint and
 * the derived task numbering.
 */
#include "plan/plan.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "checkpoint/metadata.h"

static const char *part_names[] = {NULL, "FORWARD", "REBALANCE", "RESCALE", "BROADCAST", "HASH"};

const char *sl_plan_part_name(int part) {
    return part >= SL_PLAN_FORWARD && part <= SL_PLAN_HASH ? part_names[part] : "?";
}

void sl_plan_free(sl_plan_t *p) {
    if (!p) return;
    sl_free(p->job_name);
    sl_free(p->job_id);
    sl_free(p->cfg.ckpt_dir);
    sl_free(p->cfg.savepoint_dir);
    sl_free(p->cfg.rocksdb_dir);
    for (int i = 0; p->nodes && i < p->nnodes; i++) {
        sl_free(p->nodes[i].name);
        sl_free(p->nodes[i].uid);
        sl_free(p->nodes[i].slot_group);
        sl_free(p->nodes[i].out_schema);
        for (int k = 0; k < p->nodes[i].nstate_schemas; k++) {
            sl_free(p->nodes[i].state_schemas[k].name);
            sl_free(p->nodes[i].state_schemas[k].schema);
        }
        sl_free(p->nodes[i].state_schemas);
        sl_free(p->nodes[i].key);
    }
    sl_free(p->nodes);
    for (int i = 0; p->vertices && i < p->nvertices; i++) {
        sl_free(p->vertices[i].name);
        sl_free(p->vertices[i].nodes);
        sl_free(p->vertices[i].slot_group);
    }
    sl_free(p->vertices);
    sl_free(p->edges);
    for (int i = 0; p->tags && i < p->ntags; i++) sl_free(p->tags[i]);
    sl_free(p->tags);
    sl_free(p->vertex_of);
    sl_free(p->index_in_vertex);
    sl_free(p->first_task);
    memset(p, 0, sizeof *p);
}

void sl_plan_index(sl_plan_t *p) {
    sl_free(p->vertex_of);
    sl_free(p->index_in_vertex);
    sl_free(p->first_task);
    p->vertex_of = sl_calloc((size_t)(p->nnodes ? p->nnodes : 1), sizeof *p->vertex_of);
    p->index_in_vertex = sl_calloc((size_t)(p->nnodes ? p->nnodes : 1), sizeof *p->index_in_vertex);
    p->first_task = sl_calloc((size_t)(p->nvertices ? p->nvertices : 1), sizeof *p->first_task);
    p->ntasks = 0;
    for (int v = 0; v < p->nvertices; v++) {
        p->first_task[v] = p->ntasks;
        p->ntasks += p->vertices[v].parallelism;
        for (int k = 0; k < p->vertices[v].nnodes; k++) {
            p->vertex_of[p->vertices[v].nodes[k]] = v;
            p->index_in_vertex[p->vertices[v].nodes[k]] = k;
        }
    }
}

int sl_plan_task_vertex(const sl_plan_t *p, int index, int *subtask) {
    for (int v = 0; v < p->nvertices; v++)
        if (index >= p->first_task[v] && index < p->first_task[v] + p->vertices[v].parallelism) {
            if (subtask) *subtask = index - p->first_task[v];
            return v;
        }
    return -1;
}

/* ---- encoding ---- */

static json_t *str(const char *s) { return json_string(s ? s : ""); }

int sl_plan_encode(const sl_plan_t *p, sl_buf_t *out, char *err, size_t errlen) {
    const sl_plan_config_t *c = &p->cfg;
    json_t *cfg = json_pack(
        "{s:i, s:i, s:i, s:I, s:I, s:b, s:I, s:i, s:I, s:I, s:i, s:i, s:b, s:I, s:s, s:i, s:i, s:i, s:s, s:I, s:I, "
        "s:I, s:b}",
        "max_parallelism", c->max_parallelism, "buffer_size", c->buffer_size, "buffers_per_channel",
        c->buffers_per_channel, "buffer_timeout_ms", (json_int_t)c->buffer_timeout_ms, "watermark_interval_ms", (json_int_t)c->wm_interval_ms, "checkpointing",
        c->ckpt_enabled, "checkpoint_interval_ms", (json_int_t)c->ckpt.interval_ms, "checkpoint_mode",
        (int)c->ckpt.mode, "checkpoint_timeout_ms", (json_int_t)c->ckpt.timeout_ms, "checkpoint_min_pause_ms",
        (json_int_t)c->ckpt.min_pause_ms, "checkpoint_max_concurrent", c->ckpt.max_concurrent,
        "checkpoint_tolerable_failures", c->ckpt.tolerable_failed, "unaligned", c->ckpt.unaligned,
        "aligned_timeout_ms", (json_int_t)c->ckpt.aligned_timeout_ms, "checkpoint_dir",
        c->ckpt_dir ? c->ckpt_dir : "", "checkpoints_retained", c->ckpt_retained, "checkpoint_retention",
        c->ckpt_retention, "state_backend", c->backend, "rocksdb_dir", c->rocksdb_dir ? c->rocksdb_dir : "",
        "rocksdb_cache_bytes", (json_int_t)c->rocksdb_cache_bytes, "rocksdb_write_buffer_bytes",
        (json_int_t)c->rocksdb_write_buffer_bytes, "rocksdb_value_cache_bytes",
        (json_int_t)c->rocksdb_value_cache_bytes, "incremental", c->incremental);
    json_object_set_new(cfg, "savepoint_dir", json_string(c->savepoint_dir ? c->savepoint_dir : ""));
    const sl_restart_config_t *r = &c->restart;
    json_t *restart = json_pack("{s:i, s:i, s:I, s:I, s:I, s:f, s:I, s:f, s:i, s:i, s:I}", "kind", (int)r->kind,
                                "attempts", r->attempts, "delay_ms", (json_int_t)r->delay_ms, "initial_backoff_ms",
                                (json_int_t)r->initial_backoff_ms, "max_backoff_ms", (json_int_t)r->max_backoff_ms,
                                "multiplier", r->multiplier, "reset_threshold_ms", (json_int_t)r->reset_threshold_ms,
                                "jitter", r->jitter, "attempts_before_reset", r->attempts_before_reset,
                                "max_failures", r->max_failures, "interval_ms", (json_int_t)r->interval_ms);
    if (!cfg || !restart) {
        json_decref(cfg);
        json_decref(restart);
        return sl_errf(err, errlen, SL_EINVAL, "plan of job '%s': the configuration cannot be encoded",
                       p->job_name ? p->job_name : "");
    }
    json_object_set_new(cfg, "restart", restart);
    json_t *nodes = json_array();
    for (int i = 0; i < p->nnodes; i++) {
        const sl_plan_node_t *n = &p->nodes[i];
        json_t *jn = json_pack("{s:i, s:i, s:o, s:o, s:b, s:i, s:i, s:[b,b], s:o, s:o}", "id", n->id, "kind", n->kind,
                               "name", str(n->name), "uid", str(n->uid), "user_uid", n->has_user_uid, "parallelism",
                               n->parallelism, "inputs", n->ninputs, "keyed", n->keyed[0], n->keyed[1], "slot_group",
                               str(n->slot_group), "schema", str(n->out_schema));
        if (jn && n->nstate_schemas) { /* only when there are: plans without keep their bytes */
            json_t *ss = json_array();
            for (int k = 0; k < n->nstate_schemas; k++)
                json_array_append_new(ss, json_pack("{s:o, s:o}", "name", str(n->state_schemas[k].name), "schema",
                                                    str(n->state_schemas[k].schema)));
            json_object_set_new(jn, "state_schemas", ss);
        }
        /* only keyed nodes say how their key is made (other nodes encode as before) */
        if (jn && n->key && n->key[0]) json_object_set_new(jn, "key", str(n->key));
        json_array_append_new(nodes, jn);
    }
    json_t *vertices = json_array();
    for (int v = 0; v < p->nvertices; v++) {
        const sl_plan_vertex_t *pv = &p->vertices[v];
        json_t *chain = json_array();
        for (int k = 0; k < pv->nnodes; k++) json_array_append_new(chain, json_integer(pv->nodes[k]));
        json_array_append_new(vertices, json_pack("{s:i, s:o, s:i, s:o, s:o}", "id", pv->id, "name", str(pv->name),
                                                  "parallelism", pv->parallelism, "nodes", chain, "slot_group",
                                                  str(pv->slot_group)));
    }
    json_t *edges = json_array();
    for (int e = 0; e < p->nedges; e++) {
        const sl_plan_edge_t *pe = &p->edges[e];
        json_array_append_new(edges, json_pack("{s:i, s:i, s:i, s:i, s:s, s:b}", "src", pe->src, "dst", pe->dst, "tag",
                                               pe->tag, "input", pe->dst_input, "partitioning",
                                               sl_plan_part_name(pe->part), "chained", pe->chained));
    }
    json_t *tags = json_array();
    for (int i = 0; i < p->ntags; i++) json_array_append_new(tags, str(p->tags[i]));
    json_t *root = json_pack("{s:i, s:o, s:o, s:o, s:o, s:o, s:o, s:o}", "version", p->version, "job_name",
                             str(p->job_name), "job_id", str(p->job_id), "config", cfg, "nodes", nodes, "vertices",
                             vertices, "edges", edges, "tags", tags);
    if (!root) return sl_errf(err, errlen, SL_EINVAL, "plan of job '%s' cannot be encoded", p->job_name);
    char *s = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENSURE_ASCII);
    json_decref(root);
    if (!s) return sl_errf(err, errlen, SL_EINVAL, "plan of job '%s' cannot be encoded", p->job_name);
    sl_buf_append(out, s, strlen(s));
    free(s);
    return 0;
}

uint64_t sl_plan_fingerprint(const sl_plan_t *p) {
    sl_buf_t b = {0};
    char err[200];
    uint64_t h = 0;
    if (sl_plan_encode(p, &b, err, sizeof err) == 0) h = sl_hash_bytes(b.p, b.len);
    sl_buf_free(&b);
    return h;
}

/* ---- decoding ---- */

typedef struct dec {
    char *err;
    size_t errlen;
    int rc;
} dec_t;

static bool bad(dec_t *d, const char *fmt, const char *a, const char *b) {
    if (d->rc == 0) {
        char what[700];
        snprintf(what, sizeof what, fmt, a, b ? b : "");
        d->rc = sl_errf(d->err, d->errlen, SL_EFORMAT, "job plan: %s", what);
    }
    return false;
}

static json_t *member(dec_t *d, json_t *o, const char *where, const char *key) {
    json_t *v = json_is_object(o) ? json_object_get(o, key) : NULL;
    if (!v) bad(d, "%s has no '%s'", where, key);
    return v;
}

static int64_t get_int(dec_t *d, json_t *o, const char *where, const char *key, int64_t min, int64_t max) {
    json_t *v = member(d, o, where, key);
    if (!v) return min;
    if (!json_is_integer(v)) return bad(d, "%s: '%s' is not an integer", where, key), min;
    int64_t x = json_integer_value(v);
    if (x < min || x > max) {
        char w[200];
        snprintf(w, sizeof w, "%s: '%s' = %lld is out of range [%lld, %lld]", where, key, (long long)x,
                 (long long)min, (long long)max);
        bad(d, "%s%s", w, "");
        return min;
    }
    return x;
}

static bool get_bool(dec_t *d, json_t *o, const char *where, const char *key) {
    json_t *v = member(d, o, where, key);
    if (v && !json_is_boolean(v)) bad(d, "%s: '%s' is not a boolean", where, key);
    return v && json_is_true(v);
}

static double get_real(dec_t *d, json_t *o, const char *where, const char *key) {
    json_t *v = member(d, o, where, key);
    if (v && !json_is_number(v)) bad(d, "%s: '%s' is not a number", where, key);
    return v ? json_number_value(v) : 0;
}

static char *get_str(dec_t *d, json_t *o, const char *where, const char *key) {
    json_t *v = member(d, o, where, key);
    if (v && !json_is_string(v)) bad(d, "%s: '%s' is not a string", where, key);
    return sl_strdup(v && json_is_string(v) ? json_string_value(v) : "");
}

static json_t *get_array(dec_t *d, json_t *o, const char *where, const char *key, size_t max) {
    json_t *v = member(d, o, where, key);
    if (v && !json_is_array(v)) return bad(d, "%s: '%s' is not an array", where, key), NULL;
    if (v && json_array_size(v) > max) return bad(d, "%s: '%s' has too many entries", where, key), NULL;
    return v;
}

#define MAXN 100000
#define I32 2147483647

static void decode_config(dec_t *d, json_t *c, sl_plan_config_t *o) {
    const char *w = "config";
    o->max_parallelism = (int)get_int(d, c, w, "max_parallelism", 1, SL_CKPT_MAX_PARALLELISM);
    o->buffer_size = (int)get_int(d, c, w, "buffer_size", 64, 1 << 30);
    o->buffers_per_channel = (int)get_int(d, c, w, "buffers_per_channel", 1, 1 << 20);
    o->buffer_timeout_ms = get_int(d, c, w, "buffer_timeout_ms", -1, INT64_MAX);
    o->wm_interval_ms = get_int(d, c, w, "watermark_interval_ms", 0, INT64_MAX);
    o->ckpt_enabled = get_bool(d, c, w, "checkpointing");
    o->ckpt.interval_ms = get_int(d, c, w, "checkpoint_interval_ms", 0, INT64_MAX);
    o->ckpt.mode = (sl_ckpt_mode_t)get_int(d, c, w, "checkpoint_mode", 0, 1);
    o->ckpt.timeout_ms = get_int(d, c, w, "checkpoint_timeout_ms", 0, INT64_MAX);
    o->ckpt.min_pause_ms = get_int(d, c, w, "checkpoint_min_pause_ms", 0, INT64_MAX);
    o->ckpt.max_concurrent = (int)get_int(d, c, w, "checkpoint_max_concurrent", 0, I32);
    o->ckpt.tolerable_failed = (int)get_int(d, c, w, "checkpoint_tolerable_failures", 0, I32);
    o->ckpt.unaligned = get_bool(d, c, w, "unaligned");
    o->ckpt.aligned_timeout_ms = get_int(d, c, w, "aligned_timeout_ms", 0, INT64_MAX);
    o->ckpt_dir = get_str(d, c, w, "checkpoint_dir");
    o->savepoint_dir = get_str(d, c, w, "savepoint_dir");
    o->ckpt_retained = (int)get_int(d, c, w, "checkpoints_retained", 0, I32);
    o->ckpt_retention = (int)get_int(d, c, w, "checkpoint_retention", 0, 2);
    o->backend = (int)get_int(d, c, w, "state_backend", 0, 1);
    o->rocksdb_dir = get_str(d, c, w, "rocksdb_dir");
    o->rocksdb_cache_bytes = get_int(d, c, w, "rocksdb_cache_bytes", INT64_MIN, INT64_MAX);
    o->rocksdb_write_buffer_bytes = get_int(d, c, w, "rocksdb_write_buffer_bytes", INT64_MIN, INT64_MAX);
    o->rocksdb_value_cache_bytes = get_int(d, c, w, "rocksdb_value_cache_bytes", INT64_MIN, INT64_MAX);
    o->incremental = get_bool(d, c, w, "incremental");
    json_t *r = member(d, c, w, "restart");
    w = "config.restart";
    sl_restart_config_t *rc = &o->restart;
    rc->kind = (sl_restart_kind_t)get_int(d, r, w, "kind", 0, 3);
    rc->attempts = (int)get_int(d, r, w, "attempts", INT32_MIN, I32);
    rc->delay_ms = get_int(d, r, w, "delay_ms", INT64_MIN, INT64_MAX);
    rc->initial_backoff_ms = get_int(d, r, w, "initial_backoff_ms", INT64_MIN, INT64_MAX);
    rc->max_backoff_ms = get_int(d, r, w, "max_backoff_ms", INT64_MIN, INT64_MAX);
    rc->multiplier = get_real(d, r, w, "multiplier");
    rc->reset_threshold_ms = get_int(d, r, w, "reset_threshold_ms", INT64_MIN, INT64_MAX);
    rc->jitter = get_real(d, r, w, "jitter");
    rc->attempts_before_reset = (int)get_int(d, r, w, "attempts_before_reset", INT32_MIN, I32);
    rc->max_failures = (int)get_int(d, r, w, "max_failures", INT32_MIN, I32);
    rc->interval_ms = get_int(d, r, w, "interval_ms", INT64_MIN, INT64_MAX);
    if (d->rc == 0) {
        char verr[200];
        if (sl_restart_validate(rc, verr, sizeof verr) < 0) bad(d, "config.restart: %s%s", verr, "");
    }
}

static int part_of(const char *s) {
    for (int i = SL_PLAN_FORWARD; i <= SL_PLAN_HASH; i++)
        if (!strcmp(s, part_names[i])) return i;
    return 0;
}

int sl_plan_decode(const void *buf, size_t len, sl_plan_t **out, char *err, size_t errlen) {
    *out = NULL;
    json_error_t je;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return sl_errf(err, errlen, SL_EFORMAT, "job plan: not JSON (line %d, column %d: %s)", je.line, je.column,
                       je.text);
    dec_t d = {err, errlen, 0};
    sl_plan_t *p = sl_calloc(1, sizeof *p);
    p->version = (int)get_int(&d, root, "plan", "version", 0, INT32_MAX);
    if (d.rc == 0 && p->version != SL_PLAN_VERSION) {
        d.rc = sl_errf(err, errlen, SL_EFORMAT, "job plan: version %d, this build reads version %d", p->version,
                       SL_PLAN_VERSION);
    }
    p->job_name = get_str(&d, root, "plan", "job_name");
    p->job_id = get_str(&d, root, "plan", "job_id");
    if (d.rc == 0) decode_config(&d, member(&d, root, "plan", "config"), &p->cfg);
    json_t *nodes = get_array(&d, root, "plan", "nodes", MAXN);
    json_t *vertices = get_array(&d, root, "plan", "vertices", MAXN);
    json_t *edges = get_array(&d, root, "plan", "edges", 4 * MAXN);
    json_t *tags = get_array(&d, root, "plan", "tags", MAXN);
    if (d.rc == 0) {
        p->nnodes = (int)json_array_size(nodes);
        p->nodes = sl_calloc((size_t)(p->nnodes ? p->nnodes : 1), sizeof *p->nodes);
        p->nvertices = (int)json_array_size(vertices);
        p->vertices = sl_calloc((size_t)(p->nvertices ? p->nvertices : 1), sizeof *p->vertices);
        p->nedges = (int)json_array_size(edges);
        p->edges = sl_calloc((size_t)(p->nedges ? p->nedges : 1), sizeof *p->edges);
        p->ntags = (int)json_array_size(tags);
        p->tags = sl_calloc((size_t)(p->ntags ? p->ntags : 1), sizeof *p->tags);
    }
    char w[64];
    for (int i = 0; d.rc == 0 && i < p->nnodes; i++) {
        json_t *o = json_array_get(nodes, (size_t)i);
        sl_plan_node_t *n = &p->nodes[i];
        snprintf(w, sizeof w, "nodes[%d]", i);
        n->id = (int)get_int(&d, o, w, "id", i, i);
        n->kind = (int)get_int(&d, o, w, "kind", 0, 2);
        n->name = get_str(&d, o, w, "name");
        n->uid = get_str(&d, o, w, "uid");
        n->has_user_uid = get_bool(&d, o, w, "user_uid");
        n->parallelism = (int)get_int(&d, o, w, "parallelism", 1, SL_CKPT_MAX_PARALLELISM);
        n->ninputs = (int)get_int(&d, o, w, "inputs", 0, 2);
        json_t *k = member(&d, o, w, "keyed");
        if (k && (!json_is_array(k) || json_array_size(k) != 2)) bad(&d, "%s: 'keyed' is not two booleans", w, NULL);
        else if (k) {
            n->keyed[0] = json_is_true(json_array_get(k, 0));
            n->keyed[1] = json_is_true(json_array_get(k, 1));
        }
        n->slot_group = get_str(&d, o, w, "slot_group");
        n->out_schema = get_str(&d, o, w, "schema");
        json_t *ss = json_is_object(o) ? json_object_get(o, "state_schemas") : NULL; /* optional */
        if (ss && (!json_is_array(ss) || json_array_size(ss) > MAXN)) {
            bad(&d, "%s: 'state_schemas' is not an array", w, NULL);
        } else if (ss && json_array_size(ss)) {
            n->nstate_schemas = (int)json_array_size(ss);
            n->state_schemas = sl_calloc((size_t)n->nstate_schemas, sizeof *n->state_schemas);
            for (int k = 0; k < n->nstate_schemas; k++) {
                char ws[96];
                snprintf(ws, sizeof ws, "%s.state_schemas[%d]", w, k);
                n->state_schemas[k].name = get_str(&d, json_array_get(ss, (size_t)k), ws, "name");
                n->state_schemas[k].schema = get_str(&d, json_array_get(ss, (size_t)k), ws, "schema");
            }
        }
        json_t *key = json_is_object(o) ? json_object_get(o, "key") : NULL; /* optional */
        if (key && !json_is_string(key)) bad(&d, "%s: 'key' is not a string", w, NULL);
        n->key = sl_strdup(key && json_is_string(key) ? json_string_value(key) : "");
        if (d.rc == 0 && !n->uid[0]) bad(&d, "%s has an empty uid", w, NULL);
    }
    for (int v = 0; d.rc == 0 && v < p->nvertices; v++) {
        json_t *o = json_array_get(vertices, (size_t)v);
        sl_plan_vertex_t *pv = &p->vertices[v];
        snprintf(w, sizeof w, "vertices[%d]", v);
        pv->id = (int)get_int(&d, o, w, "id", v, v);
        pv->name = get_str(&d, o, w, "name");
        pv->parallelism = (int)get_int(&d, o, w, "parallelism", 1, SL_CKPT_MAX_PARALLELISM);
        pv->slot_group = get_str(&d, o, w, "slot_group");
        json_t *chain = get_array(&d, o, w, "nodes", (size_t)p->nnodes);
        if (d.rc) break;
        pv->nnodes = (int)json_array_size(chain);
        if (pv->nnodes == 0) bad(&d, "%s has no nodes", w, NULL);
        pv->nodes = sl_calloc((size_t)(pv->nnodes ? pv->nnodes : 1), sizeof *pv->nodes);
        for (int k = 0; d.rc == 0 && k < pv->nnodes; k++) {
            json_t *x = json_array_get(chain, (size_t)k);
            if (!json_is_integer(x) || json_integer_value(x) < 0 || json_integer_value(x) >= p->nnodes)
                bad(&d, "%s: node %s is not a node of the plan", w, "");
            else
                pv->nodes[k] = (int)json_integer_value(x);
            if (d.rc == 0 && p->nodes[pv->nodes[k]].parallelism != pv->parallelism)
                bad(&d, "%s: a chained node has another parallelism%s", w, "");
        }
    }
    for (int e = 0; d.rc == 0 && e < p->nedges; e++) {
        json_t *o = json_array_get(edges, (size_t)e);
        sl_plan_edge_t *pe = &p->edges[e];
        snprintf(w, sizeof w, "edges[%d]", e);
        pe->src = (int)get_int(&d, o, w, "src", 0, p->nnodes - 1);
        pe->dst = (int)get_int(&d, o, w, "dst", 0, p->nnodes - 1);
        pe->tag = (int)get_int(&d, o, w, "tag", 0, p->ntags > 0 ? p->ntags - 1 : 0);
        pe->dst_input = (int)get_int(&d, o, w, "input", 0, 1);
        char *ps = get_str(&d, o, w, "partitioning");
        pe->part = part_of(ps);
        if (d.rc == 0 && !pe->part) bad(&d, "%s: unknown partitioning '%s'", w, ps);
        sl_free(ps);
        pe->chained = get_bool(&d, o, w, "chained");
    }
    for (int i = 0; d.rc == 0 && i < p->ntags; i++) {
        json_t *x = json_array_get(tags, (size_t)i);
        if (!json_is_string(x)) bad(&d, "tags[%s] is not a string%s", "", "");
        else p->tags[i] = sl_strdup(json_string_value(x));
    }
    json_decref(root);
    if (d.rc == 0) {
        /* every node in exactly one vertex */
        int *seen = sl_calloc((size_t)(p->nnodes ? p->nnodes : 1), sizeof *seen);
        for (int v = 0; v < p->nvertices; v++)
            for (int k = 0; k < p->vertices[v].nnodes; k++) seen[p->vertices[v].nodes[k]]++;
        for (int i = 0; i < p->nnodes && d.rc == 0; i++)
            if (seen[i] != 1) {
                char id[32];
                snprintf(id, sizeof id, "%d", i);
                bad(&d, "node %s is in %s vertices, not one", id, seen[i] ? "several" : "no");
            }
        sl_free(seen);
    }
    if (d.rc == 0) {
        sl_plan_index(p);
        for (int e = 0; e < p->nedges && d.rc == 0; e++) {
            const sl_plan_edge_t *pe = &p->edges[e];
            if (pe->chained && p->vertex_of[pe->src] != p->vertex_of[pe->dst])
                bad(&d, "a chained edge crosses vertices%s%s", "", "");
            if (p->vertex_of[pe->src] > p->vertex_of[pe->dst])
                bad(&d, "an edge runs backwards (the plan is not topologically ordered)%s%s", "", "");
        }
        if (p->ntasks > 1 << 22) bad(&d, "too many subtasks%s%s", "", "");
    }
    if (d.rc) {
        sl_plan_free(p);
        sl_free(p);
        return d.rc;
    }
    *out = p;
    return 0;
}

int sl_plan_derived_uids(const sl_plan_t *p, char *buf, size_t cap) {
    int n = 0;
    size_t o = 0;
    if (cap) buf[0] = 0;
    for (int i = 0; i < p->nnodes; i++) {
        const sl_plan_node_t *nd = &p->nodes[i];
        bool stateful = nd->kind != SL_PLAN_OPERATOR || nd->keyed[0] || nd->keyed[1];
        if (nd->has_user_uid || !stateful) continue;
        if (o + 1 < cap) {
            int w = snprintf(buf + o, cap - o, "%s'%s' (%s)", n ? ", " : "", nd->name, nd->uid);
            o = w > 0 ? SL_MIN(cap - 1, o + (size_t)w) : o;
        }
        n++;
    }
    return n;
}

void sl_plan_flink_json(const sl_plan_t *p, sl_buf_t *out) {
    static const char *const pact[] = {"Data Source", "Operator", "Data Sink"};
    static const char *const ship[] = {"", "FORWARD", "REBALANCE", "RESCALE", "BROADCAST", "HASH"};
    json_t *nodes = json_array();
    for (int i = 0; i < p->nnodes; i++) {
        const sl_plan_node_t *n = &p->nodes[i];
        json_t *pred = json_array();
        for (int e = 0; e < p->nedges; e++) {
            const sl_plan_edge_t *ed = &p->edges[e];
            if (ed->dst != n->id) continue;
            json_t *x = json_pack("{s:i, s:s, s:s}", "id", ed->src, "ship_strategy",
                                  ed->part >= 1 && ed->part <= 5 ? ship[ed->part] : "UNKNOWN", "side",
                                  ed->dst_input ? "second" : "first");
            json_array_append_new(pred, x);
        }
        int k = n->kind >= 0 && n->kind <= 2 ? n->kind : 1;
        json_t *o = json_pack("{s:i, s:s, s:s, s:s, s:i, s:s, s:o}", "id", n->id, "type", n->name ? n->name : "",
                              "pact", pact[k], "contents", n->name ? n->name : "", "parallelism", n->parallelism, "uid",
                              n->uid ? n->uid : "", "predecessors", pred);
        if (o) json_array_append_new(nodes, o);
    }
    json_t *root = json_pack("{s:o}", "nodes", nodes);
    char *txt = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    if (txt) sl_buf_append(out, txt, strlen(txt));
    free(txt);
    json_decref(root);
}
