/* test_key_group.c — key-group assignment (Flink's KeyGroupRangeAssignment). */
#include "test.h"

#include "state/key_group.h"

TEST(default_max_parallelism) {
    /* parallelism + parallelism/2, rounded up to a power of two, in [128, 32768] */
    CHECK_EQ(sl_kg_default_max_parallelism(1), 128);
    CHECK_EQ(sl_kg_default_max_parallelism(2), 128);
    CHECK_EQ(sl_kg_default_max_parallelism(85), 128);  /* 85 + 42 = 127 */
    CHECK_EQ(sl_kg_default_max_parallelism(86), 256);  /* 86 + 43 = 129 */
    CHECK_EQ(sl_kg_default_max_parallelism(100), 256); /* 150 */
    CHECK_EQ(sl_kg_default_max_parallelism(171), 256); /* 256 exactly */
    CHECK_EQ(sl_kg_default_max_parallelism(172), 512); /* 258 */
    CHECK_EQ(sl_kg_default_max_parallelism(1000), 2048);
    CHECK_EQ(sl_kg_default_max_parallelism(20000), 32768);
    CHECK_EQ(sl_kg_default_max_parallelism(21846), 32768); /* 32769 -> capped */
    CHECK_EQ(sl_kg_default_max_parallelism(100000), 32768);
}

/* For one (maxp, p): the ranges of indexes 0..p-1 are non-empty, contiguous,
 * in order, cover [0, maxp) exactly once, and operator_index(kg) names the
 * index whose range holds kg. */
static int check_ranges(int maxp, int p) {
    int next = 0;
    for (int idx = 0; idx < p; idx++) {
        sl_kg_range_t r = sl_kg_range_for(maxp, p, idx);
        if (r.start != next || r.end <= r.start || r.end > maxp) {
            fprintf(stderr, "maxp=%d p=%d idx=%d: range [%d, %d), expected start %d\n", maxp, p, idx, r.start,
                    r.end, next);
            return 0;
        }
        for (int kg = r.start; kg < r.end; kg++) {
            if (sl_kg_operator_index(kg, maxp, p) != idx) {
                fprintf(stderr, "maxp=%d p=%d kg=%d: operator_index %d, range says %d\n", maxp, p, kg,
                        sl_kg_operator_index(kg, maxp, p), idx);
                return 0;
            }
        }
        next = r.end;
    }
    if (next != maxp) {
        fprintf(stderr, "maxp=%d p=%d: ranges end at %d\n", maxp, p, next);
        return 0;
    }
    return 1;
}

TEST(ranges_exhaustive_small) {
    for (int maxp = 1; maxp <= 160; maxp++)
        for (int p = 1; p <= maxp; p++) CHECK(check_ranges(maxp, p));
}

TEST(ranges_large) {
    static const int cases[][2] = {{128, 1},     {128, 3},      {128, 128},  {256, 100},  {256, 7},
                                   {32768, 1},   {32768, 3},    {32768, 999}, {32768, 20000}, {32768, 32768},
                                   {1000, 999}, {12345, 6789}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) CHECK(check_ranges(cases[i][0], cases[i][1]));
}

TEST(ranges_known_values) {
    /* Flink: maxp 128, p 3 -> [0,43) [43,86) [86,128) */
    sl_kg_range_t r0 = sl_kg_range_for(128, 3, 0), r1 = sl_kg_range_for(128, 3, 1), r2 = sl_kg_range_for(128, 3, 2);
    CHECK_EQ(r0.start, 0);
    CHECK_EQ(r0.end, 43);
    CHECK_EQ(r1.start, 43);
    CHECK_EQ(r1.end, 86);
    CHECK_EQ(r2.start, 86);
    CHECK_EQ(r2.end, 128);
    CHECK_EQ(sl_kg_operator_index(42, 128, 3), 0);
    CHECK_EQ(sl_kg_operator_index(43, 128, 3), 1);
    CHECK_EQ(sl_kg_operator_index(127, 128, 3), 2);
}

TEST(key_hash_is_pinned) {
    /* Where state lives depends on this hash: it must never change.  These
     * values were taken from the implementation when it was written. */
    CHECK(sl_kg_key_hash("", 0) == 0x0e9ebeff1ebd5806ULL);
    CHECK(sl_kg_key_hash("a", 1) == 0x06eac7df0e31bbf5ULL);
    CHECK(sl_kg_key_hash("hello", 5) == 0xe254f015a478ad1eULL);
    CHECK(sl_kg_key_hash("user-42", 7) == 0x9a8aaeecf38cb4dbULL);
    CHECK_EQ(sl_kg_of_hash(sl_kg_key_hash("hello", 5), 128), 30);
    CHECK_EQ(sl_kg_of_hash(sl_kg_key_hash("user-42", 7), 128), 91);
}

TEST(key_groups_spread_evenly) {
    /* 128 * 1000 small integer keys over 128 key groups: every group gets
     * roughly its share (the finalizer must spread sequential keys). */
    enum { MAXP = 128, PER = 1000 };
    static int cnt[MAXP];
    memset(cnt, 0, sizeof cnt);
    for (uint64_t k = 0; k < (uint64_t)MAXP * PER; k++) {
        int kg = sl_kg_of_hash(sl_kg_key_hash(&k, sizeof k), MAXP);
        CHECK(kg >= 0 && kg < MAXP);
        cnt[kg]++;
    }
    for (int g = 0; g < MAXP; g++) {
        if (cnt[g] < PER * 8 / 10 || cnt[g] > PER * 12 / 10) fprintf(stderr, "kg %d has %d keys\n", g, cnt[g]);
        CHECK(cnt[g] >= PER * 8 / 10 && cnt[g] <= PER * 12 / 10);
    }
    /* Non-power-of-two max parallelism too. */
    CHECK_EQ(sl_kg_of_hash(UINT64_MAX, 100), (int)(UINT64_MAX % 100));
}

int main(void) {
    RUN(default_max_parallelism);
    RUN(ranges_exhaustive_small);
    RUN(ranges_large);
    RUN(ranges_known_values);
    RUN(key_hash_is_pinned);
    RUN(key_groups_spread_evenly);
    TEST_MAIN_END();
}
