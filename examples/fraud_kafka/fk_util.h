/*
 * fk_util.h — the few helpers the fraud_kafka example needs besides
 * sluice's public API (clocks, a message formatter, a hash mixer, a full
 * write), written here so that the example, like a user's job, compiles
 * against include/ alone.
 */
#ifndef FK_UTIL_H
#define FK_UTIL_H

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

/* Formats into err (cap bytes) and returns rc (for `return fk_errf(...)`). */
static inline int fk_errf(char *err, size_t cap, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static inline int fk_errf(char *err, size_t cap, int rc, const char *fmt, ...) {
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return rc;
}

static inline int64_t fk_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline int64_t fk_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* A 64-bit finalizer (MurmurHash3's fmix64): the generator's randomness. */
static inline uint64_t fk_mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

/* Writes all n bytes to fd (retrying short writes and EINTR); 0 or errno. */
static inline int fk_write_all(int fd, const void *p, size_t n) {
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, (const char *)p + off, n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return errno;
        off += (size_t)w;
    }
    return 0;
}

#endif
