/* test_window_evictors.c — CountEvictor and TimeEvictor, before and after. */
#include "test.h"
#include "common/common.h"
#include "windowing/window.h"

/* Elements whose data pointer encodes their index (never dereferenced). */
static int make(sl_window_elem_t *v, const int64_t *ts, int n) {
    for (int i = 0; i < n; i++) {
        v[i].ts = ts[i];
        v[i].data = (const uint8_t *)(uintptr_t)(0x1000 + i);
        v[i].len = (uint32_t)i;
    }
    return n;
}
static int idx(const sl_window_elem_t *e) { return (int)((uintptr_t)e->data - 0x1000); }

TEST(count_before) {
    sl_evictor_t *e = sl_evictor_count(2, false);
    sl_window_elem_t v[8];
    int64_t ts[] = {1, 2, 3, 4};
    int n = make(v, ts, 4);
    CHECK_EQ(sl_evictor_evict_after(e, v, n), 4); /* acts before only */
    n = sl_evictor_evict_before(e, v, n);
    CHECK_EQ(n, 2);
    CHECK_EQ(idx(&v[0]), 2);
    CHECK_EQ(idx(&v[1]), 3);
    CHECK_EQ(v[0].ts, 3);
    /* at or under the count: nothing */
    n = make(v, ts, 2);
    CHECK_EQ(sl_evictor_evict_before(e, v, n), 2);
    CHECK_EQ(idx(&v[0]), 0);
    CHECK_EQ(sl_evictor_evict_before(e, v, 0), 0);
    sl_evictor_free(e);

    e = sl_evictor_count(0, false);
    n = make(v, ts, 4);
    CHECK_EQ(sl_evictor_evict_before(e, v, n), 0);
    sl_evictor_free(e);
}

TEST(count_after) {
    sl_evictor_t *e = sl_evictor_count(3, true);
    sl_window_elem_t v[8];
    int64_t ts[] = {10, 20, 30, 40, 50};
    int n = make(v, ts, 5);
    CHECK_EQ(sl_evictor_evict_before(e, v, n), 5);
    n = sl_evictor_evict_after(e, v, n);
    CHECK_EQ(n, 3);
    CHECK_EQ(idx(&v[0]), 2);
    CHECK_EQ(idx(&v[2]), 4);
    CHECK_EQ(sl_evictor_evict_after(NULL, v, n), 3);
    sl_evictor_free(e);
}

TEST(time_before) {
    sl_evictor_t *e = sl_evictor_time(5, false);
    sl_window_elem_t v[8];
    /* out of order; max 9, cutoff 4: Flink evicts timestamp <= cutoff */
    int64_t ts[] = {1, 7, 4, 9, 5, 3};
    int n = make(v, ts, 6);
    CHECK_EQ(sl_evictor_evict_after(e, v, n), 6);
    n = sl_evictor_evict_before(e, v, n);
    CHECK_EQ(n, 3);
    CHECK_EQ(v[0].ts, 7);
    CHECK_EQ(v[1].ts, 9);
    CHECK_EQ(v[2].ts, 5);
    CHECK_EQ(idx(&v[2]), 4); /* order kept */
    sl_evictor_free(e);

    /* keep 1: only the newest timestamp stays; keep 0 evicts everything
     * (the newest element too sits at the cutoff, as in Flink) */
    e = sl_evictor_time(1, false);
    int64_t ts2[] = {5, 9, 9, 2};
    n = make(v, ts2, 4);
    n = sl_evictor_evict_before(e, v, n);
    CHECK_EQ(n, 2);
    CHECK_EQ(idx(&v[0]), 1);
    CHECK_EQ(idx(&v[1]), 2);
    sl_evictor_free(e);
    e = sl_evictor_time(0, false);
    n = make(v, ts2, 4);
    CHECK_EQ(sl_evictor_evict_before(e, v, n), 0);
    sl_evictor_free(e);
}

TEST(time_after_and_no_timestamps) {
    sl_evictor_t *e = sl_evictor_time(10, true);
    sl_window_elem_t v[8];
    int64_t ts[] = {100, 95, 89, 90};
    int n = make(v, ts, 4);
    CHECK_EQ(sl_evictor_evict_before(e, v, n), 4);
    n = sl_evictor_evict_after(e, v, n);
    CHECK_EQ(n, 2); /* cutoff 90: 89 and 90 go */
    CHECK_EQ(v[0].ts, 100);
    CHECK_EQ(v[1].ts, 95);
    /* no timestamp on the first element: nothing is evicted (Flink) */
    int64_t ts2[] = {SL_NO_TIMESTAMP, 1, 1000};
    n = make(v, ts2, 3);
    CHECK_EQ(sl_evictor_evict_after(e, v, n), 3);
    sl_evictor_free(e);
    /* near the bottom of time: no overflow */
    e = sl_evictor_time(INT64_MAX, false);
    int64_t ts3[] = {INT64_MIN + 1, -5};
    n = make(v, ts3, 2);
    CHECK_EQ(sl_evictor_evict_before(e, v, n), 2);
    sl_evictor_free(e);
}

TEST(validate_describe) {
    char err[256], buf[64];
    sl_evictor_t *e = sl_evictor_count(-1, false);
    CHECK(sl_evictor_validate(e, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "CountEvictor(-1)");
    sl_evictor_free(e);
    e = sl_evictor_time(-1, true);
    CHECK(sl_evictor_validate(e, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "TimeEvictor(-1)");
    sl_evictor_free(e);
    CHECK(sl_evictor_validate(NULL, err, sizeof err) < 0);
    e = sl_evictor_count(3, true);
    CHECK_EQ(sl_evictor_validate(e, err, sizeof err), 0);
    sl_evictor_describe(e, buf, sizeof buf);
    CHECK_STR(buf, "CountEvictor(3, after)");
    sl_evictor_t *c = sl_evictor_clone(e);
    CHECK(c != e && c->n == 3 && c->after);
    sl_evictor_free(c);
    sl_evictor_free(e);
    e = sl_evictor_time(1000, false);
    sl_evictor_describe(e, buf, sizeof buf);
    CHECK_STR(buf, "TimeEvictor(1000)");
    sl_evictor_free(e);
}

int main(void) {
    RUN(count_before);
    RUN(count_after);
    RUN(time_before);
    RUN(time_after_and_no_timestamps);
    RUN(validate_describe);
    TEST_MAIN_END();
}
