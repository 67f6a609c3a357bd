/*
 * join_api.c — the builders of the three joins of include/sluice/join.h
 * (Flink's KeyedStream.intervalJoin, a regular join of two keyed streams,
 * and JoinedStreams / CoGroupedStreams): they check both inputs (keyed
 * streams of one environment whose keys can match), record what is wrong on
 * the environment, and build the join from the public API (a keyed
 * co-process function, or tagging maps, a union and a window operator) over
 * the specs and functions of src/joins/ (join_int.h).  User's thread,
 * before execution.
 */
#include <stdio.h>
#include <string.h>

#include "common/common.h"
#include "graph/stream_graph.h"
#include "joins/join_int.h"
#include "windowing/window.h"

static void free_plain(void *p) { sl_free(p); }

/* The environment of a keyed stream (NULL for NULL). */
static sl_env_t *keyed_env(sl_keyed_t *k) { return k && k->s ? k->s->env : NULL; }

/* Checks that left and right are keyed streams of one environment whose
 * keys can match: two field keys must have the same type.  Records an
 * error naming `what` on the environment and returns false otherwise. */
static bool check_keys(sl_keyed_t *left, sl_keyed_t *right, const char *what) {
    sl_env_t *env = keyed_env(left) ? keyed_env(left) : keyed_env(right);
    if (!left || !right) {
        if (env) sl_env_errorf(env, "%s: the %s input is not a keyed stream (key it with sl_key_by)", what,
                               !left ? "left" : "right");
        return false;
    }
    if (left->s->env != right->s->env) {
        sl_env_errorf(env, "%s: the two inputs belong to different environments", what);
        return false;
    }
    if (!left->s->nins || !right->s->nins || !left->s->ins[0].keyed || !right->s->ins[0].keyed) {
        sl_env_errorf(env, "%s: both inputs must be keyed streams", what);
        return false;
    }
    const sl_key_selector_t *kl = &left->s->ins[0].key, *kr = &right->s->ins[0].key;
    if (kl->field >= 0 && kr->field >= 0) {
        sl_type_t tl = sl_schema_field_type(left->s->schema, kl->field);
        sl_type_t tr = sl_schema_field_type(right->s->schema, kr->field);
        /* VARCHAR and BYTES keys are their payload bytes: they can match. */
        bool text = (tl == SL_VARCHAR || tl == SL_BYTES) && (tr == SL_VARCHAR || tr == SL_BYTES);
        /* BIGINT and TIMESTAMP share their 8-byte image; INT does not. */
        bool wide = (tl == SL_BIGINT || tl == SL_TIMESTAMP) && (tr == SL_BIGINT || tr == SL_TIMESTAMP);
        if (tl != tr && !text && !wide) {
            sl_env_errorf(env, "%s: keys are incompatible: left key '%s' is %s, right key '%s' is %s", what,
                          sl_schema_field_name(left->s->schema, kl->field), sl_type_name(tl),
                          sl_schema_field_name(right->s->schema, kr->field), sl_type_name(tr));
            return false;
        }
    }
    return true;
}

static int64_t sat_add(int64_t a, int64_t b) {
    int64_t r;
    if (__builtin_add_overflow(a, b, &r)) return b > 0 ? INT64_MAX : INT64_MIN;
    return r;
}

/* ---- interval join ---- */

struct sl_interval_join {
    sl_keyed_t *left, *right;
    int64_t lower, upper;
    bool lower_excl, upper_excl;
    char *late_tag[2];
    bool bad;
};

static void ij_builder_free(void *p) {
    sl_interval_join_t *j = p;
    sl_free(j->late_tag[0]);
    sl_free(j->late_tag[1]);
    sl_free(j);
}

sl_interval_join_t *sl_interval_join(sl_keyed_t *left, sl_keyed_t *right, int64_t lower_ms, int64_t upper_ms) {
    sl_env_t *env = keyed_env(left) ? keyed_env(left) : keyed_env(right);
    if (!env) return NULL;
    sl_interval_join_t *j = sl_calloc(1, sizeof *j);
    sl_env_own(env, j, ij_builder_free);
    j->left = left;
    j->right = right;
    j->lower = lower_ms;
    j->upper = upper_ms;
    j->bad = !check_keys(left, right, "interval join");
    return j;
}

sl_interval_join_t *sl_interval_join_lower_exclusive(sl_interval_join_t *j) {
    if (j) j->lower_excl = true;
    return j;
}

sl_interval_join_t *sl_interval_join_upper_exclusive(sl_interval_join_t *j) {
    if (j) j->upper_excl = true;
    return j;
}

sl_interval_join_t *sl_interval_join_late_outputs(sl_interval_join_t *j, const char *left_tag,
                                                  const char *right_tag) {
    if (!j || j->bad) return j;
    const char *tags[2] = {left_tag, right_tag};
    sl_keyed_t *ins[2] = {j->left, j->right};
    for (int i = 0; i < 2; i++) {
        if (!tags[i]) continue;
        if (!*tags[i] || sl_env_tag(ins[i]->s->env, tags[i], ins[i]->s->schema) < 0) {
            if (!*tags[i]) sl_env_errorf(ins[i]->s->env, "interval join: an empty late-output tag name");
            j->bad = true;
            return j;
        }
        sl_free(j->late_tag[i]);
        j->late_tag[i] = sl_strdup(tags[i]);
    }
    return j;
}

sl_stream_t *sl_interval_join_process(sl_interval_join_t *j, sl_join_fn_t fn, sl_schema_t *out_schema) {
    if (!j || j->bad) {
        sl_schema_unref(out_schema);
        return NULL;
    }
    sl_env_t *env = j->left->s->env;
    int64_t lower = j->lower, upper = j->upper;
    if (j->lower_excl) lower = sat_add(lower, 1);
    if (j->upper_excl) upper = sat_add(upper, -1);
    const char *problem = !fn.join ? "no join function given" : !out_schema ? "no output schema given" : NULL;
    if (problem) {
        sl_env_errorf(env, "interval join: %s", problem);
        sl_schema_unref(out_schema);
        return NULL;
    }
    if (lower > upper) {
        sl_env_errorf(env,
                      "interval join: the lower bound %lld%s is above the upper bound %lld%s: no row could ever "
                      "join",
                      (long long)j->lower, j->lower_excl ? " (exclusive)" : "", (long long)j->upper,
                      j->upper_excl ? " (exclusive)" : "");
        sl_schema_unref(out_schema);
        return NULL;
    }
    sl_interval_join_spec_t *s = sl_calloc(1, sizeof *s);
    s->lower = lower;
    s->upper = upper;
    s->fn = fn;
    for (int i = 0; i < 2; i++) s->late_tag[i] = j->late_tag[i] ? sl_strdup(j->late_tag[i]) : NULL;
    snprintf(s->name, sizeof s->name, "IntervalJoin[%lld, %lld]", (long long)lower, (long long)upper);
    sl_env_own(env, s, sl_interval_join_spec_free);
    sl_stream_t *r = sl_co_process(sl_connect_keyed(j->left, j->right), sl_interval_join_fn(s), out_schema);
    return r ? sl_name(r, s->name) : NULL;
}

/* ---- regular join ---- */

struct sl_regular_join {
    sl_keyed_t *left, *right;
    bool has_ttl;
    sl_state_ttl_t ttl;
    bool bad;
};

sl_regular_join_t *sl_regular_join(sl_keyed_t *left, sl_keyed_t *right) {
    sl_env_t *env = keyed_env(left) ? keyed_env(left) : keyed_env(right);
    if (!env) return NULL;
    sl_regular_join_t *j = sl_calloc(1, sizeof *j);
    sl_env_own(env, j, free_plain);
    j->left = left;
    j->right = right;
    j->bad = !check_keys(left, right, "regular join");
    return j;
}

sl_regular_join_t *sl_regular_join_ttl(sl_regular_join_t *j, sl_state_ttl_t ttl) {
    if (!j || j->bad) return j;
    if (ttl.ttl_ms <= 0) {
        sl_env_errorf(j->left->s->env, "regular join: the state TTL must be > 0 ms (got %lld)", (long long)ttl.ttl_ms);
        j->bad = true;
        return j;
    }
    j->has_ttl = true;
    j->ttl = ttl;
    return j;
}

sl_stream_t *sl_regular_join_process(sl_regular_join_t *j, sl_join_fn_t fn, sl_schema_t *out_schema) {
    if (!j || j->bad) {
        sl_schema_unref(out_schema);
        return NULL;
    }
    sl_env_t *env = j->left->s->env;
    if (!fn.join || !out_schema) {
        sl_env_errorf(env, "regular join: %s", !fn.join ? "no join function given" : "no output schema given");
        sl_schema_unref(out_schema);
        return NULL;
    }
    sl_regular_join_spec_t *s = sl_calloc(1, sizeof *s);
    s->has_ttl = j->has_ttl;
    s->ttl = j->ttl;
    s->fn = fn;
    sl_env_own(env, s, free_plain);
    sl_stream_t *r = sl_co_process(sl_connect_keyed(j->left, j->right), sl_regular_join_fn(s), out_schema);
    return r ? sl_name(r, "RegularJoin") : NULL;
}

/* ---- window join and co-group ---- */

struct sl_window_join {
    sl_keyed_t *left, *right;
    sl_window_assigner_t *assigner; /* owned until the window takes it */
    int64_t allowed_lateness;
    bool bad;
};

static void wj_builder_free(void *p) {
    sl_window_join_t *j = p;
    if (j->assigner) sl_assigner_free(j->assigner);
    sl_free(j);
}

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
    sl_env_t *env = keyed_env(left) ? keyed_env(left) : keyed_env(right);
    if (!env) {
        if (a) sl_assigner_free(a);
        return NULL;
    }
    sl_window_join_t *j = sl_calloc(1, sizeof *j);
    sl_env_own(env, j, wj_builder_free);
    j->left = left;
    j->right = right;
    j->assigner = a;
    j->bad = !check_keys(left, right, "window join");
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
    sl_window_join_tag_t *t = sl_calloc(1, sizeof *t);
    t->side = side;
    t->key = k->s->ins[0].key;
    sl_env_own(k->s->env, t, free_plain);
    sl_schema_t *sc = sl_schema_parse("k BYTES NOT NULL, side INT NOT NULL, row BYTES NOT NULL", NULL, 0);
    sl_stream_t *m = sl_map(unkeyed(k), sl_window_join_tag_row, t, sc);
    return m ? sl_name(m, side == 0 ? "WindowJoin: tag left" : "WindowJoin: tag right") : NULL;
}

static sl_stream_t *build(sl_window_join_t *j, sl_window_join_spec_t *s, sl_schema_t *out_schema, const char *what) {
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
    sl_stream_t *r = sl_window_process(w, sl_window_join_window_fn, s, out_schema);
    return r ? sl_name(r, what) : NULL;
}

sl_stream_t *sl_window_join_apply(sl_window_join_t *j, sl_window_join_fn fn, void *ctx, sl_schema_t *out_schema) {
    sl_window_join_spec_t *s = sl_calloc(1, sizeof *s);
    s->join = fn;
    s->ctx = ctx;
    return build(j, s, out_schema, "WindowJoin");
}

sl_stream_t *sl_window_cogroup_apply(sl_window_join_t *j, sl_cogroup_fn fn, void *ctx, sl_schema_t *out_schema) {
    sl_window_join_spec_t *s = sl_calloc(1, sizeof *s);
    s->cogroup = true;
    s->cogroup_fn = fn;
    s->ctx = ctx;
    return build(j, s, out_schema, "WindowCoGroup");
}
