/*
 * test.h — the tiny test harness: each tests/test_*.c is one executable
 * (one ctest entry) with a list of TEST functions.  A failed CHECK prints
 * both sides with file and line and fails the binary.
 */
#ifndef SL_TEST_H
#define SL_TEST_H

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int sl_test_failures;
static const char *sl_test_current;

#define CHECK(c)                                                                                   \
    do {                                                                                           \
        if (!(c)) {                                                                                \
            fprintf(stderr, "%s:%d: %s: CHECK(%s) failed\n", __FILE__, __LINE__, sl_test_current, #c); \
            sl_test_failures++;                                                                    \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define CHECK_EQ(a, b)                                                                             \
    do {                                                                                           \
        long long _a = (long long)(a), _b = (long long)(b);                                        \
        if (_a != _b) {                                                                            \
            fprintf(stderr, "%s:%d: %s: CHECK_EQ(%s, %s) failed: %lld != %lld\n", __FILE__, __LINE__, \
                    sl_test_current, #a, #b, _a, _b);                                              \
            sl_test_failures++;                                                                    \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define CHECK_DBL(a, b)                                                                            \
    do {                                                                                           \
        double _a = (a), _b = (b);                                                                 \
        double _d = _a - _b;                                                                       \
        if (_d < 0) _d = -_d;                                                                      \
        if (_d > 1e-9 * (1 + (_a < 0 ? -_a : _a))) {                                               \
            fprintf(stderr, "%s:%d: %s: CHECK_DBL(%s, %s) failed: %.17g != %.17g\n", __FILE__,     \
                    __LINE__, sl_test_current, #a, #b, _a, _b);                                    \
            sl_test_failures++;                                                                    \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define CHECK_STR(a, b)                                                                            \
    do {                                                                                           \
        const char *_a = (a), *_b = (b);                                                           \
        if (!_a || !_b || strcmp(_a, _b) != 0) {                                                   \
            fprintf(stderr, "%s:%d: %s: CHECK_STR(%s, %s) failed: \"%s\" != \"%s\"\n", __FILE__,   \
                    __LINE__, sl_test_current, #a, #b, _a ? _a : "(null)", _b ? _b : "(null)");    \
            sl_test_failures++;                                                                    \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define CHECK_CONTAINS(hay, needle)                                                                \
    do {                                                                                           \
        const char *_h = (hay), *_n = (needle);                                                    \
        if (!_h || !strstr(_h, _n)) {                                                              \
            fprintf(stderr, "%s:%d: %s: \"%s\" does not contain \"%s\"\n", __FILE__, __LINE__,     \
                    sl_test_current, _h ? _h : "(null)", _n);                                      \
            sl_test_failures++;                                                                    \
            return;                                                                                \
        }                                                                                          \
    } while (0)

#define TEST(name) static void name(void)
#define RUN(name)                                                                                  \
    do {                                                                                           \
        int _before = sl_test_failures;                                                            \
        sl_test_current = #name;                                                                   \
        name();                                                                                    \
        fprintf(stderr, "%s %s\n", sl_test_failures == _before ? "ok  " : "FAIL", #name);          \
    } while (0)
#define TEST_MAIN_END() return sl_test_failures ? 1 : 0

/* A scratch directory for the test (created on demand). */
static inline const char *sl_test_tmpdir(void) {
    static char dir[512];
    if (!dir[0]) {
        const char *base = getenv("SLUICE_TEST_TMP");
        snprintf(dir, sizeof dir, "%s/%s.%d", base ? base : "/tmp", "sluice-test", (int)getpid());
        char cmd[600];
        snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
        if (system(cmd) != 0) abort();
    }
    return dir;
}

/* stderr into a file while a bad peer is served, so that its log line can
 * be checked: sl_test_capture_stderr(), then sl_test_captured() restores
 * stderr, echoes what was logged and returns it (a static buffer). */
static int sl_test_saved_stderr = -1;
static inline const char *sl_test_log_path(void) {
    static char path[700];
    if (!path[0]) snprintf(path, sizeof path, "%s/captured-stderr.txt", sl_test_tmpdir());
    return path;
}
static inline void sl_test_capture_stderr(void) {
    fflush(stderr);
    sl_test_saved_stderr = dup(2);
    FILE *f = fopen(sl_test_log_path(), "w");
    if (!f) abort();
    dup2(fileno(f), 2);
    fclose(f);
}
static inline const char *sl_test_captured(void) {
    static char text[16384];
    fflush(stderr);
    dup2(sl_test_saved_stderr, 2);
    close(sl_test_saved_stderr);
    FILE *f = fopen(sl_test_log_path(), "r");
    size_t n = f ? fread(text, 1, sizeof text - 1, f) : 0;
    if (f) fclose(f);
    text[n] = 0;
    fputs(text, stderr); /* keep it visible in the test output */
    return text;
}

#endif
