/* test_window_assigners.c — window assigners and the merging window set. */
#include "test.h"
#include "common/common.h"
#include "windowing/window.h"

/* The reference: SEMANTICS.md's start = t - ((t - O + S) mod S) with a
 * mathematical (non-negative) mod, in 128-bit arithmetic. */
static int64_t ref_start(int64_t t, int64_t o, int64_t s) {
    __int128 m = ((__int128)t - o + s) % s;
    if (m < 0) m += s;
    return (int64_t)((__int128)t - m);
}

static int assign(const sl_window_assigner_t *a, int64_t t, sl_window_t *out, int cap) {
    return sl_assigner_assign(a, t, out, cap);
}

TEST(tumbling_basic) {
    sl_window_assigner_t *a = sl_tumbling_event_time(10, 0);
    sl_window_t w[2];
    CHECK_EQ(assign(a, 0, w, 2), 1);
    CHECK_EQ(w[0].start, 0);
    CHECK_EQ(w[0].end, 10);
    CHECK_EQ(assign(a, 9, w, 2), 1);
    CHECK_EQ(w[0].start, 0);
    CHECK_EQ(sl_window_max_ts(&w[0]), 9);
    CHECK_EQ(assign(a, 10, w, 2), 1);
    CHECK_EQ(w[0].start, 10);
    CHECK_EQ(w[0].end, 20);
    CHECK(a->event_time);
    CHECK(!sl_assigner_is_merging(a));
    sl_assigner_free(a);
}

TEST(tumbling_negative_timestamps) {
    sl_window_assigner_t *a = sl_tumbling_event_time(10, 0);
    sl_window_t w;
    assign(a, -1, &w, 1);
    CHECK_EQ(w.start, -10);
    CHECK_EQ(w.end, 0);
    assign(a, -10, &w, 1);
    CHECK_EQ(w.start, -10);
    assign(a, -11, &w, 1);
    CHECK_EQ(w.start, -20);
    CHECK_EQ(w.end, -10);
    sl_assigner_free(a);
}

TEST(tumbling_offsets) {
    sl_window_t w;
    sl_window_assigner_t *a = sl_tumbling_event_time(10, 3);
    assign(a, 2, &w, 1);
    CHECK_EQ(w.start, -7);
    CHECK_EQ(w.end, 3);
    assign(a, 3, &w, 1);
    CHECK_EQ(w.start, 3);
    assign(a, -8, &w, 1);
    CHECK_EQ(w.start, -17);
    sl_assigner_free(a);
    a = sl_tumbling_event_time(10, -3);
    assign(a, 6, &w, 1);
    CHECK_EQ(w.start, -3);
    CHECK_EQ(w.end, 7);
    assign(a, 7, &w, 1);
    CHECK_EQ(w.start, 7);
    sl_assigner_free(a);
    /* Flink's example: hourly windows starting at a quarter past. */
    a = sl_tumbling_event_time(3600000, 900000);
    assign(a, 3600000 + 1000, &w, 1);
    CHECK_EQ(w.start, 900000);
    CHECK_EQ(w.end, 4500000);
    sl_assigner_free(a);
}

TEST(tumbling_matches_formula_everywhere) {
    const int64_t sizes[] = {1, 2, 7, 10, 1000, 300000};
    const int64_t ts[] = {INT64_MIN + 1000000, -300001, -300000, -1001, -11, -10, -9, -1, 0, 1, 9, 10, 11,
                          299999, 300000, INT64_MAX - 1000000, INT64_MAX - 1, INT64_MAX};
    for (size_t i = 0; i < SL_ARRAY_LEN(sizes); i++) {
        int64_t s = sizes[i];
        int64_t offs[] = {0, s / 2, -(s / 2), s - 1, -(s - 1)};
        for (size_t j = 0; j < SL_ARRAY_LEN(offs); j++)
            for (size_t k = 0; k < SL_ARRAY_LEN(ts); k++) {
                int64_t got = sl_window_start(ts[k], offs[j], s);
                int64_t want = ref_start(ts[k], offs[j], s);
                if (got != want)
                    fprintf(stderr, "t=%" PRId64 " o=%" PRId64 " s=%" PRId64 "\n", ts[k], offs[j], s);
                CHECK_EQ(got, want);
                CHECK(got <= ts[k] && ts[k] - got < s);
            }
    }
    /* t - offset overflows: still exact. */
    CHECK_EQ(sl_window_start(INT64_MIN + 5, 7, 10), ref_start(INT64_MIN + 5, 7, 10));
    CHECK_EQ(sl_window_start(INT64_MAX - 5, -7, 10), ref_start(INT64_MAX - 5, -7, 10));
    /* A window at the end of time: its end saturates. */
    sl_window_assigner_t *a = sl_tumbling_event_time(10, 0);
    sl_window_t w;
    assign(a, INT64_MAX, &w, 1);
    CHECK_EQ(w.start, ref_start(INT64_MAX, 0, 10));
    CHECK_EQ(w.end, INT64_MAX);
    sl_assigner_free(a);
}

TEST(sliding_window_sets) {
    sl_window_assigner_t *a = sl_sliding_event_time(10, 5, 0);
    sl_window_t w[8];
    CHECK_EQ(sl_assigner_max_windows(a), 2);
    CHECK_EQ(assign(a, 7, w, 8), 2); /* latest start first, as Flink */
    CHECK_EQ(w[0].start, 5);
    CHECK_EQ(w[0].end, 15);
    CHECK_EQ(w[1].start, 0);
    CHECK_EQ(w[1].end, 10);
    CHECK_EQ(assign(a, 5, w, 8), 2);
    CHECK_EQ(w[0].start, 5);
    CHECK_EQ(w[1].start, 0);
    CHECK_EQ(assign(a, 4, w, 8), 2);
    CHECK_EQ(w[0].start, 0);
    CHECK_EQ(w[1].start, -5);
    CHECK_EQ(assign(a, -1, w, 8), 2);
    CHECK_EQ(w[0].start, -5);
    CHECK_EQ(w[1].start, -10);
    /* cap: the count is still the full count */
    CHECK_EQ(assign(a, 7, w, 1), 2);
    CHECK_EQ(w[0].start, 5);
    sl_assigner_free(a);

    /* size not a multiple of slide */
    a = sl_sliding_event_time(10, 3, 0);
    CHECK_EQ(sl_assigner_max_windows(a), 4);
    CHECK_EQ(assign(a, 0, w, 8), 4);
    CHECK_EQ(w[0].start, 0);
    CHECK_EQ(w[3].start, -9);
    CHECK_EQ(assign(a, 1, w, 8), 3); /* [-9, 1) does not hold 1 */
    CHECK_EQ(w[2].start, -6);
    for (int64_t t = -40; t <= 40; t++) {
        int n = assign(a, t, w, 8);
        CHECK(n >= 3 && n <= 4);
        for (int i = 0; i < n; i++) {
            CHECK(w[i].start <= t && t < w[i].end);
            CHECK_EQ(w[i].end - w[i].start, 10);
            CHECK_EQ(((w[i].start % 3) + 3) % 3, 0);
        }
    }
    sl_assigner_free(a);

    /* offset */
    a = sl_sliding_event_time(10, 5, 2);
    CHECK_EQ(assign(a, 7, w, 8), 2);
    CHECK_EQ(w[0].start, 7);
    CHECK_EQ(w[1].start, 2);
    sl_assigner_free(a);

    /* slide > size: gaps that hold no window */
    a = sl_sliding_event_time(5, 10, 0);
    CHECK_EQ(assign(a, 3, w, 8), 1);
    CHECK_EQ(w[0].start, 0);
    CHECK_EQ(w[0].end, 5);
    CHECK_EQ(assign(a, 7, w, 8), 0);
    sl_assigner_free(a);
}

TEST(session_windows) {
    sl_window_assigner_t *a = sl_session_event_time(30);
    sl_window_t w;
    CHECK_EQ(assign(a, 100, &w, 1), 1);
    CHECK_EQ(w.start, 100);
    CHECK_EQ(w.end, 130);
    CHECK(sl_assigner_is_merging(a));
    sl_assigner_free(a);
    a = sl_session_processing_time(5);
    CHECK(!a->event_time);
    CHECK(sl_assigner_is_merging(a));
    sl_assigner_free(a);
}

TEST(validation) {
    char err[256];
    struct {
        sl_window_assigner_t *a;
        int ok;
        const char *msg;
    } cases[] = {
        {sl_tumbling_event_time(10, 0), 1, NULL},
        {sl_tumbling_event_time(10, 9), 1, NULL},
        {sl_tumbling_event_time(10, -9), 1, NULL},
        {sl_tumbling_event_time(0, 0), 0, "TumblingEventTimeWindows"},
        {sl_tumbling_event_time(-5, 0), 0, "size > 0"},
        {sl_tumbling_event_time(10, 10), 0, "abs(offset) < size"},
        {sl_tumbling_event_time(10, -10), 0, "abs(offset) < size"},
        {sl_tumbling_event_time(10, INT64_MIN), 0, "abs(offset)"},
        {sl_tumbling_processing_time(0, 0), 0, "TumblingProcessingTimeWindows"},
        {sl_sliding_event_time(10, 5, 0), 1, NULL},
        {sl_sliding_event_time(5, 10, 0), 1, NULL},
        {sl_sliding_event_time(10, 0, 0), 0, "slide > 0"},
        {sl_sliding_event_time(10, -1, 0), 0, "SlidingEventTimeWindows"},
        {sl_sliding_event_time(0, 5, 0), 0, "size > 0"},
        {sl_sliding_event_time(10, 5, 5), 0, "abs(offset) < slide"},
        {sl_sliding_processing_time(10, 5, -4), 1, NULL},
        {sl_session_event_time(1), 1, NULL},
        {sl_session_event_time(0), 0, "EventTimeSessionWindows"},
        {sl_session_processing_time(-1), 0, "gap must be > 0"},
    };
    for (size_t i = 0; i < SL_ARRAY_LEN(cases); i++) {
        err[0] = 0;
        int rc = sl_assigner_validate(cases[i].a, err, sizeof err);
        if ((rc == 0) != cases[i].ok) fprintf(stderr, "case %zu: rc %d err '%s'\n", i, rc, err);
        CHECK_EQ(rc == 0, cases[i].ok);
        if (!cases[i].ok) CHECK_CONTAINS(err, cases[i].msg);
        sl_assigner_free(cases[i].a);
    }
    CHECK(sl_assigner_validate(NULL, err, sizeof err) < 0);
}

TEST(describe) {
    char buf[128];
    sl_window_assigner_t *a = sl_tumbling_event_time(300000, 0);
    sl_assigner_describe(a, buf, sizeof buf);
    CHECK_STR(buf, "TumblingEventTimeWindows(300000)");
    sl_assigner_free(a);
    a = sl_sliding_processing_time(10, 5, 0);
    sl_assigner_describe(a, buf, sizeof buf);
    CHECK_STR(buf, "SlidingProcessingTimeWindows(10, 5)");
    sl_window_assigner_t *c = sl_assigner_clone(a);
    CHECK(c != a && c->size == 10 && c->slide == 5 && !c->event_time);
    sl_assigner_free(a);
    sl_assigner_free(c);
    a = sl_session_event_time(7);
    sl_assigner_describe(a, buf, sizeof buf);
    CHECK_STR(buf, "EventTimeSessionWindows(7)");
    sl_assigner_free(a);
}

/* ---- merging window set ---- */

static sl_window_t W(int64_t s, int64_t e) {
    sl_window_t w = {s, e};
    return w;
}

TEST(mws_merging) {
    sl_mws_t s;
    sl_mws_init(&s);
    sl_mws_merge_t m;
    sl_window_t w = W(0, 10);
    sl_mws_add(&s, &w, &m);
    CHECK(!m.merged);
    CHECK_EQ(m.result.start, 0);
    CHECK_EQ(s.n, 1);
    CHECK(s.dirty);

    w = W(30, 40);
    sl_mws_add(&s, &w, &m);
    CHECK(!m.merged);
    CHECK_EQ(s.n, 2);

    /* extends [0,10): merged, the state stays in [0,10)'s namespace */
    w = W(5, 15);
    sl_mws_add(&s, &w, &m);
    CHECK(m.merged);
    CHECK_EQ(m.result.start, 0);
    CHECK_EQ(m.result.end, 15);
    CHECK_EQ(m.nmerged, 1);
    CHECK_EQ(m.merged_windows[0].end, 10);
    CHECK_EQ(m.state_window.start, 0);
    CHECK_EQ(m.state_window.end, 10);
    CHECK_EQ(m.nmerged_states, 0);
    CHECK_EQ(s.n, 2);

    /* inside an existing window: no merge */
    w = W(1, 11);
    sl_mws_add(&s, &w, &m);
    CHECK(!m.merged);
    CHECK_EQ(m.result.start, 0);
    CHECK_EQ(m.result.end, 15);
    CHECK_EQ(s.n, 2);

    /* touching counts as intersecting (Flink): [15,25) joins [0,15) */
    w = W(15, 25);
    sl_mws_add(&s, &w, &m);
    CHECK(m.merged);
    CHECK_EQ(m.result.end, 25);

    /* a bridge: [25,35) touches [0,25) and overlaps [30,40) */
    w = W(25, 35);
    sl_mws_add(&s, &w, &m);
    CHECK(m.merged);
    CHECK_EQ(m.result.start, 0);
    CHECK_EQ(m.result.end, 40);
    CHECK_EQ(m.nmerged, 2);
    CHECK_EQ(m.merged_windows[0].start, 0);
    CHECK_EQ(m.merged_windows[0].end, 25);
    CHECK_EQ(m.merged_windows[1].start, 30);
    CHECK_EQ(m.state_window.start, 0);
    CHECK_EQ(m.state_window.end, 10);
    CHECK_EQ(m.nmerged_states, 1);
    CHECK_EQ(m.merged_states[0].start, 30);
    CHECK_EQ(m.merged_states[0].end, 40);
    CHECK_EQ(s.n, 1);

    /* a window before, one after: kept sorted */
    w = W(-50, -45);
    sl_mws_add(&s, &w, &m);
    w = W(100, 110);
    sl_mws_add(&s, &w, &m);
    CHECK_EQ(s.n, 3);
    CHECK_EQ(s.v[0].window.start, -50);
    CHECK_EQ(s.v[1].window.start, 0);
    CHECK_EQ(s.v[2].window.start, 100);

    /* store / load round trip, find, retire */
    uint8_t buf[3 * SL_MWS_ENTRY_BYTES];
    uint32_t len = sl_mws_store(&s, buf);
    CHECK_EQ(len, 3 * SL_MWS_ENTRY_BYTES);
    sl_mws_t t;
    sl_mws_init(&t);
    CHECK_EQ(sl_mws_load(&t, buf, len), 0);
    CHECK_EQ(t.n, 3);
    CHECK(!t.dirty);
    w = W(0, 40);
    const sl_mws_entry_t *e = sl_mws_find(&t, &w);
    CHECK(e != NULL);
    CHECK_EQ(e->state.start, 0);
    CHECK_EQ(e->state.end, 10);
    w = W(0, 41);
    CHECK(sl_mws_find(&t, &w) == NULL);
    w = W(0, 40);
    sl_mws_retire(&t, &w);
    CHECK_EQ(t.n, 2);
    CHECK(t.dirty);
    CHECK(sl_mws_find(&t, &w) == NULL);
    CHECK(sl_mws_load(&t, buf, 7) < 0);
    sl_mws_free(&t);
    sl_mws_free(&s);
}

int main(void) {
    RUN(tumbling_basic);
    RUN(tumbling_negative_timestamps);
    RUN(tumbling_offsets);
    RUN(tumbling_matches_formula_everywhere);
    RUN(sliding_window_sets);
    RUN(session_windows);
    RUN(validation);
    RUN(describe);
    RUN(mws_merging);
    TEST_MAIN_END();
}
