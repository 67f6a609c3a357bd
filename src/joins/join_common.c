/*
 * join_common.c — the checks and counters the joins share (join_int.h).
 */
#include <stdio.h>

#include "joins/join_int.h"
#include "operators/operator.h"

bool sl_join_check_keys(sl_keyed_t *left, sl_keyed_t *right, const char *what) {
    sl_env_t *env = sl_join_env(left) ? sl_join_env(left) : sl_join_env(right);
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

static _Atomic int64_t state_left;
static atomic_bool counting;

void sl_join_test_state_enable(bool on) { atomic_store(&counting, on); }
bool sl_join_test_state_enabled(void) { return atomic_load(&counting); }

int64_t sl_join_test_state_left(void) { return atomic_load(&state_left); }
void sl_join_test_state_reset(void) { atomic_store(&state_left, 0); }
void sl_join_test_state_add(int64_t entries) { atomic_fetch_add(&state_left, entries); }

int64_t sl_join_state_entries(sl_state_t *st) {
    if (!st || !st->op || !st->op->kb) return 0;
    sl_keyed_backend_t *kb = st->op->kb;
    int64_t n = kb->ops->count(kb, st->sid);
    return n < 0 ? 0 : n;
}
