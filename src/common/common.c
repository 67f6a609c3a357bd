/* common.c — allocation, error formatting, hashing and clocks. */
#define _POSIX_C_SOURCE 200809L
#include "common.h"

#include <stdio.h>
#include <stdlib.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#define XXH_INLINE_ALL
#include <xxhash.h>

static void oom(size_t n) {
    fprintf(stderr, "sluice: out of memory allocating %zu bytes\n", n);
    abort();
}

void *sl_malloc(size_t n) {
    void *p = malloc(n ? n : 1);
    if (!p) oom(n);
    return p;
}

void *sl_calloc(size_t n, size_t size) {
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p) oom(n * size);
    return p;
}

void *sl_realloc(void *p, size_t n) {
    void *q = realloc(p, n ? n : 1);
    if (!q) oom(n);
    return q;
}

char *sl_strdup(const char *s) { return s ? sl_strndup(s, strlen(s)) : NULL; }

char *sl_strndup(const char *s, size_t n) {
    char *p = sl_malloc(n + 1);
    memcpy(p, s, n);
    p[n] = 0;
    return p;
}

void sl_free(void *p) { free(p); }

int sl_errf(char *err, size_t cap, int rc, const char *fmt, ...) {
    if (err && cap) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, cap, fmt, ap);
        va_end(ap);
    }
    return rc;
}

uint64_t sl_hash_bytes(const void *p, size_t n) { return XXH3_64bits(p, n); }

int64_t sl_wall_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t sl_mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

void sl_buf_reserve(sl_buf_t *b, size_t extra) {
    if (b->len + extra <= b->cap) return;
    size_t nc = b->cap ? b->cap * 2 : 64;
    while (nc < b->len + extra) nc *= 2;
    b->p = sl_realloc(b->p, nc);
    b->cap = nc;
}

void sl_buf_append(sl_buf_t *b, const void *p, size_t n) {
    if (!n) return;
    sl_buf_reserve(b, n);
    memcpy(b->p + b->len, p, n);
    b->len += n;
}

void sl_buf_free(sl_buf_t *b) {
    sl_free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

const char *sl_strerror(int rc) {
    switch (rc) {
    case SL_OK: return "ok";
    case SL_EINVAL: return "invalid argument";
    case SL_ENOMEM: return "out of memory";
    case SL_EIO: return "I/O error";
    case SL_EFORMAT: return "malformed input";
    case SL_ESTATE: return "state backend error";
    case SL_EUSER: return "user function failed";
    case SL_ECANCELED: return "canceled";
    case SL_ENOTFOUND: return "not found";
    default: return "unknown error";
    }
}

bool sl_err_retriable(int rc) { return rc == SL_EIO || rc == SL_ESTATE || rc == SL_EUSER; }

static atomic_int fault_state; /* 0 unknown, 1 off, 2 on */
static char fault_name[128];
static atomic_long fault_left;

static pthread_once_t fault_once = PTHREAD_ONCE_INIT;

static void fault_init(void) { /* once, even when task threads arrive together */
    const char *v = getenv("SLUICE_FAULT_AT");
    const char *colon = v ? strrchr(v, ':') : NULL;
    if (!v || !colon || (size_t)(colon - v) >= sizeof fault_name) {
        atomic_store(&fault_state, 1);
        return;
    }
    memcpy(fault_name, v, (size_t)(colon - v));
    fault_name[colon - v] = 0;
    atomic_store(&fault_left, atol(colon + 1));
    atomic_store(&fault_state, 2);
}

void sl_fault_point(const char *name) {
    int st = atomic_load_explicit(&fault_state, memory_order_acquire);
    if (st == 1) return;
    if (st == 0) {
        pthread_once(&fault_once, fault_init);
        if (atomic_load(&fault_state) == 1) return;
    }
    if (strcmp(name, fault_name) != 0) return;
    if (atomic_fetch_sub(&fault_left, 1) == 1) {
        fprintf(stderr, "sluice: fault injected at %s\n", name);
        kill(getpid(), SIGKILL);
    }
}

int sl_write_all(int fd, const void *p, size_t n) {
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(fd, (const uint8_t *)p + off, n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w < 0) return errno;
        off += (size_t)w;
    }
    return 0;
}
