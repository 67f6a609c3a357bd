/*
 * common.h — small things every module uses: allocation, errors with
 * messages, hashing, time.
 *
 * Allocation: sl_malloc and friends abort the process on out-of-memory
 * (like Redis' zmalloc).  An engine that cannot allocate a network buffer
 * has no sane way to continue; recovery belongs to the restart strategy of
 * the process that supervises it.
 */
#ifndef SL_COMMON_H
#define SL_COMMON_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "sluice/row.h"

#define SL_UNUSED(x) ((void)(x))
#define SL_LIKELY(x) __builtin_expect(!!(x), 1)
#define SL_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define SL_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define SL_MIN(a, b) ((a) < (b) ? (a) : (b))
#define SL_MAX(a, b) ((a) > (b) ? (a) : (b))

void *sl_malloc(size_t n);
void *sl_calloc(size_t n, size_t size);
void *sl_realloc(void *p, size_t n);
char *sl_strdup(const char *s);
char *sl_strndup(const char *s, size_t n);
void sl_free(void *p);

/* Formats into err (cap bytes) and returns rc (for `return sl_errf(...)`). */
int sl_errf(char *err, size_t cap, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* 64-bit hash of bytes (xxh3). */
uint64_t sl_hash_bytes(const void *p, size_t n);
static inline uint64_t sl_mix64(uint64_t x) {
    x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ULL; x ^= x >> 33;
    return x;
}

/* Wall-clock milliseconds and a monotonic nanosecond counter. */
int64_t sl_wall_ms(void);
int64_t sl_mono_ns(void);

/* Unaligned little-endian loads and stores. */
static inline uint32_t sl_ld32(const void *p) { uint32_t v; memcpy(&v, p, 4); return v; }
static inline uint64_t sl_ld64(const void *p) { uint64_t v; memcpy(&v, p, 8); return v; }
static inline void sl_st32(void *p, uint32_t v) { memcpy(p, &v, 4); }
static inline void sl_st64(void *p, uint64_t v) { memcpy(p, &v, 8); }

/* Writes all n bytes to fd (retrying short writes and EINTR); 0, or the
 * errno of the failure. */
int sl_write_all(int fd, const void *p, size_t n);

/* A growable byte buffer. */
typedef struct sl_buf {
    uint8_t *p;
    size_t len, cap;
} sl_buf_t;
void sl_buf_reserve(sl_buf_t *b, size_t extra);
void sl_buf_append(sl_buf_t *b, const void *p, size_t n);
void sl_buf_free(sl_buf_t *b);


/* Fault injection for crash tests: when the environment variable
 * SLUICE_FAULT_AT is "<name>:<n>", the n-th time the process passes the
 * point called <name> it kills itself with SIGKILL (as kill -9 would).
 * Costs one relaxed atomic load when unset. */
void sl_fault_point(const char *name);
#endif
