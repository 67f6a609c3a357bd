/*
 * window_join.c — window join and co-group of two keyed streams (Flink's
 * DataStream.join(..).where(..).equalTo(..).window(..).apply(..) and
 * coGroup(..)).
 *
 * Built the way Flink builds it (CoGroupedStreams): each input goes through
 * a map that wraps its rows into one tagged schema
 *     k BYTES (the row's key bytes), side INT (0 left, 1 right), row BYTES
 * (the original row image), the two tagged streams are united and keyed by
 * k, and one window operator (src/windowing/, with a process-window
 * function, so the window's elements are kept in its list state) collects
 * both sides.  When a window fires, the function below splits its elements
 * by side and calls the user's co-group function once, or the join
 * function for every (left, right) pair.  So windows, triggers, lateness,
 * merging of session windows, checkpoints and restores are the window
 * operator's, unchanged; every assigner works (event and processing time).
 */
#include <stdio.h>
#include <string.h>

#include "common/common.h"
#include "joins/join_int.h"
#include "windowing/window.h"

struct sl_window_join {
    sl_keyed_t *left, *right;
    sl_window_assigner_t *assigner; /* owned until the window takes it */
    int64_t allowed_lateness;
    bool bad;
};

enum { WJ_F_KEY = 0, WJ_F_SIDE = 1, WJ_F_ROW = 2 };

/* The tagging map of one side. */
typedef struct wj_tag {
    int side;
    sl_key_selector_t key;
} wj_tag_t;

typedef struct wj_spec {
    bool cogroup;
    sl_window_join_fn join;
    sl_cogroup_fn cogroup_fn;
    void *ctx;
    const sl_schema_t *schema[2]; /* of the left and right rows (held by their streams' nodes) */
} wj_spec_t;

static int wj_tag_row(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    const wj_tag_t *t = ctx;
    uint8_t buf[SL_MAX_KEY_LEN];
    const uint8_t *key;
    uint32_t klen;
    int rc = sl_key_extract(&t->key, &in->row, buf, &key, &klen);
    if (rc < 0) return rc;
    sl_rw_set_bytes(out, WJ_F_KEY, key, klen);
    sl_rw_set_i32(out, WJ_F_SIDE, t->side);
    sl_rw_set_bytes(out, WJ_F_ROW, in->row.data, in->row.len);
    return 0;
}

typedef struct wj_sides {
    sl_record_t *v[2];
    int n[2], cap[2];
} wj_sides_t;

static void sides_free(wj_sides_t *s) {
    sl_free(s->v[0]);
    sl_free(s->v[1]);
}

static int wj_window_fn(void *ctx, const uint8_t *key, uint32_t keylen, const sl_window_t *win,
                        const sl_window_elements_t *elems, sl_collector_t *out) {
    const wj_spec_t *s = ctx;
    wj_sides_t sd = {0};
    int n = sl_window_elements_count(elems);
    for (int i = 0; i < n; i++) {
        sl_record_t e = sl_window_elements_get(elems, i);
        int side = sl_row_i32(&e.row, WJ_F_SIDE);
        if (side != 0 && side != 1) {
            sides_free(&sd);
            return SL_EFORMAT;
        }
        uint32_t len;
        const uint8_t *p = sl_row_bytes(&e.row, WJ_F_ROW, &len);
        if (sd.n[side] == sd.cap[side]) {
            sd.cap[side] = sd.cap[side] ? 2 * sd.cap[side] : 16;
            sd.v[side] = sl_realloc(sd.v[side], (size_t)sd.cap[side] * sizeof *sd.v[side]);
        }
        sd.v[side][sd.n[side]++] = (sl_record_t){{p, len, s->schema[side]}, e.ts};
    }
    int rc = 0;
    int64_t ts = sl_window_max_ts(win);
    if (s->cogroup) {
        sl_collector_reset(out, ts);
        rc = s->cogroup_fn(s->ctx, key, keylen, win, sd.v[0], sd.n[0], sd.v[1], sd.n[1], out);
    } else {
        for (int i = 0; i < sd.n[0] && rc >= 0; i++)
            for (int j = 0; j < sd.n[1] && rc >= 0; j++) {
                sl_collector_reset(out, ts);
                rc = s->join(s->ctx, key, keylen, win, &sd.v[0][i], &sd.v[1][j], out);
            }
    }
    sides_free(&sd);
    return rc < 0 ? rc : 0;
}

/* ---- builder ---- */

static void wj_builder_free(void *p) {
    sl_window_join_t *j = p;
    if (j->assigner) sl_assigner_free(j->assigner);
    sl_free(j);
}

static void free_plain(void *p) { sl_free(p); }

static void free_stream(void *p) {
    sl_stream_t *s = p;
    sl_free(s->ins);
    sl_free(s);
}

/* The stream under a keyed one, without its key partitioning. */
static sl_stream_t *unkeyed(sl_keyed_t *k) {
    sl_stream_t *s = k->s, *r = sl_calloc(1, sizeof *r);
    *r = *s;
    r->ins = sl_calloc((size_t)(s->nins ? s->nins : 1), sizeof *r->ins);
    memcpy(r->ins, s->ins, (size_t)s->nins * sizeof *r->ins);
    for (int i = 0; i < r->nins; i++) {
        r->ins[i].part = SL_PART_DEFAULT;
        r->ins[i].keyed = false;
    }
    r->node = -1;
    sl_env_own(s->env, r, free_stream);
    return r;
}

sl_window_join_t *sl_window_join(sl_keyed_t *left, sl_keyed_t *right, sl_window_assigner_t *a) {
    sl_env_t *env = sl_join_env(left) ? sl_join_env(left) : sl_join_env(right);
    if (!env) {
        if (a) sl_assigner_free(a);
        return NULL;
    }
    sl_window_join_t *j = sl_calloc(1, sizeof *j);
    sl_env_own(env, j, wj_builder_free);
    j->left = left;
    j->right = right;
    j->assigner = a;
    j->bad = !sl_join_check_keys(left, right, "window join");
    if (!j->bad && !a) {
        sl_env_errorf(env, "window join: no window assigner given");
        j->bad = true;
    }
    return j;
}

sl_window_join_t *sl_window_join_allowed_lateness(sl_window_join_t *j, int64_t ms) {
    if (!j || j->bad) return j;
    if (ms < 0) {
        sl_env_errorf(j->left->s->env, "window join: allowed lateness must be >= 0 (got %lld)", (long long)ms);
        j->bad = true;
        return j;
    }
    j->allowed_lateness = ms;
    return j;
}

static sl_stream_t *tagged(sl_keyed_t *k, int side) {
    wj_tag_t *t = sl_calloc(1, sizeof *t);
    t->side = side;
    t->key = k->s->ins[0].key;
    sl_env_own(k->s->env, t, free_plain);
    sl_schema_t *sc = sl_schema_parse("k BYTES NOT NULL, side INT NOT NULL, row BYTES NOT NULL", NULL, 0);
    sl_stream_t *m = sl_map(unkeyed(k), wj_tag_row, t, sc);
    return m ? sl_name(m, side == 0 ? "WindowJoin: tag left" : "WindowJoin: tag right") : NULL;
}

static sl_stream_t *build(sl_window_join_t *j, wj_spec_t *s, sl_schema_t *out_schema, const char *what) {
    if (!j || j->bad) {
        sl_free(s);
        sl_schema_unref(out_schema);
        return NULL;
    }
    sl_env_t *env = j->left->s->env;
    if ((s->cogroup ? (void *)s->cogroup_fn : (void *)s->join) == NULL || !out_schema) {
        sl_env_errorf(env, "%s: %s", what, !out_schema ? "no output schema given" : "no function given");
        sl_free(s);
        sl_schema_unref(out_schema);
        return NULL;
    }
    s->schema[0] = j->left->s->schema;
    s->schema[1] = j->right->s->schema;
    sl_env_own(env, s, free_plain);
    sl_stream_t *u = sl_union(tagged(j->left, 0), tagged(j->right, 1));
    sl_window_assigner_t *a = j->assigner;
    j->assigner = NULL; /* the window owns it now */
    sl_windowed_t *w = sl_window(sl_key_by(u, "k"), a);
    if (j->allowed_lateness) w = sl_window_allowed_lateness(w, j->allowed_lateness);
    sl_stream_t *r = sl_window_process(w, wj_window_fn, s, out_schema);
    return r ? sl_name(r, what) : NULL;
}

sl_stream_t *sl_window_join_apply(sl_window_join_t *j, sl_window_join_fn fn, void *ctx, sl_schema_t *out_schema) {
    wj_spec_t *s = sl_calloc(1, sizeof *s);
    s->join = fn;
    s->ctx = ctx;
    return build(j, s, out_schema, "WindowJoin");
}

sl_stream_t *sl_window_cogroup_apply(sl_window_join_t *j, sl_cogroup_fn fn, void *ctx, sl_schema_t *out_schema) {
    wj_spec_t *s = sl_calloc(1, sizeof *s);
    s->cogroup = true;
    s->cogroup_fn = fn;
    s->ctx = ctx;
    return build(j, s, out_schema, "WindowCoGroup");
}
