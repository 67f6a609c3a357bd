/*
 * join_common.c — the counters the joins share (join_int.h).
 */
#include "joins/join_int.h"
#include "operators/operator.h"

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
