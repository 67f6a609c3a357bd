/*
 * bench_data_plane.c — what the network data plane costs against an
 * in-process channel.
 *
 *   bench_data_plane [--seconds S] [--runs R] [--rate N] [--bufs B] [--only inproc|remote]
 *
 * The same producer -> consumer pipeline of 64-byte records (u64 sequence,
 * i64 monotonic timestamp, 48 bytes of payload) packed into 32 KiB buffers:
 *   (a) inproc: one sl_channel_t between two threads of one process;
 *   (b) remote: a producer process and a consumer process on loopback, the
 *       buffers going through sl_data_plane_t (credit-based flow control),
 *       each side with a B-buffer channel (default 8).
 * Throughput: the producer writes as fast as it can for S seconds (default
 * 5); the consumer checks every sequence number.  records/s is the median of
 * R runs (default 5); records per CPU second (all threads of all processes
 * involved, from getrusage) is the "per core" figure.  Latency: the producer
 * writes N records/s (default 100,000) with the current time in each record,
 * flushing its buffer every millisecond or when full; the consumer takes
 * now - timestamp of every record; p50/p99 over S seconds.
 * One line per variant:
 *   variant=inproc records_per_s=... records_per_cpu_s=... p50_us=... p99_us=...
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "common/common.h"
#include "taskmanager/channel.h"
#include "taskmanager/net/data_plane.h"

#define REC 64
#define BUF (32u << 10)
#define END_SEQ UINT64_MAX

static struct {
    double seconds;
    int runs;
    int rate;
    int bufs;
    const char *only;
} O = {5, 5, 100000, 8, NULL};

static double cpu_s(int who) {
    struct rusage ru;
    getrusage(who, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
           ru.ru_stime.tv_usec / 1e6;
}

/* ---- producer and consumer loops (the same for both variants) ---- */

typedef struct {
    sl_channel_t *ch;
    bool paced;          /* latency mode: O.rate records/s, flush every ms */
    uint64_t sent;
} prod_t;

static void *producer(void *arg) {
    prod_t *p = arg;
    int64_t t0 = sl_mono_ns(), end = t0 + (int64_t)(O.seconds * 1e9), last_flush = t0;
    uint64_t seq = 0;
    sl_nbuf_t *b = NULL;
    uint8_t payload[48];
    memset(payload, 0x5a, sizeof payload);
    for (;;) {
        int64_t now = sl_mono_ns();
        if (now >= end) break;
        uint64_t due = p->paced ? (uint64_t)((double)(now - t0) * O.rate / 1e9) : seq + BUF / REC;
        while (seq < due) {
            if (!b && !(b = sl_channel_acquire(p->ch, BUF))) return NULL;
            uint8_t *r = b->data + b->len;
            sl_st64(r, seq++);
            sl_st64(r + 8, (uint64_t)now);
            memcpy(r + 16, payload, sizeof payload);
            b->len += REC;
            if (b->len + REC > b->cap) {
                sl_channel_send(p->ch, b);
                b = NULL;
                last_flush = now;
            }
        }
        if (p->paced) {
            if (b && now - last_flush >= 1000000) {
                sl_channel_send(p->ch, b);
                b = NULL;
                last_flush = now;
            }
            struct timespec ts = {0, 50000};
            nanosleep(&ts, NULL);
        }
    }
    if (!b) b = sl_channel_acquire(p->ch, BUF);
    if (!b) return NULL;
    if (b->len + REC > b->cap) { /* cannot happen: a full buffer was sent */
        sl_channel_send(p->ch, b);
        b = sl_channel_acquire(p->ch, BUF);
    }
    sl_st64(b->data + b->len, END_SEQ);
    b->len += REC;
    sl_channel_send(p->ch, b);
    p->sent = seq;
    return NULL;
}

typedef struct {
    sl_channel_t *ch;
    sl_waker_t *wk;
    bool latency;
    uint64_t got;
    int64_t first_ns, last_ns;
    int64_t *lat;        /* latency samples (ns) */
    size_t nlat, caplat;
    bool bad;
} cons_t;

static void *consumer(void *arg) {
    cons_t *c = arg;
    uint64_t next = 0;
    for (;;) {
        sl_nbuf_t *b = sl_channel_poll(c->ch);
        if (!b) {
            sl_waker_wait(c->wk, sl_mono_ns() + 100000000);
            continue;
        }
        int64_t now = sl_mono_ns();
        if (!c->first_ns) c->first_ns = now;
        bool end = false;
        for (uint32_t off = 0; off + REC <= b->len; off += REC) {
            uint64_t seq = sl_ld64(b->data + off);
            if (seq == END_SEQ) {
                end = true;
                break;
            }
            if (seq != next) c->bad = true;
            next = seq + 1;
            if (c->latency) {
                if (c->nlat == c->caplat) c->lat = sl_realloc(c->lat, (c->caplat = c->caplat ? 2 * c->caplat : 1 << 16) * sizeof *c->lat);
                c->lat[c->nlat++] = now - (int64_t)sl_ld64(b->data + off + 8);
            }
        }
        sl_channel_recycle(c->ch, b);
        if (end) break;
    }
    c->got = next;
    c->last_ns = sl_mono_ns();
    return NULL;
}

typedef struct {
    double rps, cpu;
    uint64_t got;
    double p50_us, p99_us;
    bool bad;
} result_t;

static int cmp_i64(const void *a, const void *b) {
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

static void finish(cons_t *c, double cpu, result_t *r) {
    double secs = (double)(c->last_ns - c->first_ns) / 1e9;
    r->rps = secs > 0 ? (double)c->got / secs : 0;
    r->cpu = cpu;
    r->got = c->got;
    r->bad = c->bad;
    if (c->nlat) {
        qsort(c->lat, c->nlat, sizeof *c->lat, cmp_i64);
        r->p50_us = (double)c->lat[c->nlat / 2] / 1e3;
        r->p99_us = (double)c->lat[(size_t)((double)c->nlat * 0.99)] / 1e3;
    }
    sl_free(c->lat);
}

/* ---- (a) in-process ---- */

static result_t run_inproc(bool latency) {
    sl_waker_t wk;
    sl_waker_init(&wk);
    sl_channel_t *ch = sl_channel_new(O.bufs, BUF, &wk);
    prod_t p = {.ch = ch, .paced = latency};
    cons_t c = {.ch = ch, .wk = &wk, .latency = latency};
    double cpu0 = cpu_s(RUSAGE_SELF);
    pthread_t tp, tc;
    pthread_create(&tc, NULL, consumer, &c);
    pthread_create(&tp, NULL, producer, &p);
    pthread_join(tp, NULL);
    pthread_join(tc, NULL);
    result_t r = {0};
    finish(&c, cpu_s(RUSAGE_SELF) - cpu0, &r);
    sl_channel_destroy(ch);
    sl_waker_destroy(&wk);
    return r;
}

/* ---- (b) two processes through the data plane ---- */

static void die(const char *m) {
    fprintf(stderr, "bench_data_plane: %s\n", m);
    exit(1);
}

static result_t run_remote(bool latency) {
    int p2c[2], c2p[2];
    if (pipe(p2c) || pipe(c2p)) die("pipe");
    double cpu0 = cpu_s(RUSAGE_SELF), ccpu0 = cpu_s(RUSAGE_CHILDREN);
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) { /* producer process */
        sl_data_plane_config_t cfg = {.secret = "bench"};
        sl_data_plane_t *dp;
        char err[256];
        if (sl_data_plane_new(&cfg, &dp, err, sizeof err) < 0) die(err);
        sl_channel_t *ch = sl_channel_new(O.bufs, BUF, NULL);
        sl_data_plane_add_output(dp, 1, ch);
        int port = sl_data_plane_port(dp);
        if (write(p2c[1], &port, sizeof port) != sizeof port) die("write");
        char go;
        if (read(c2p[0], &go, 1) != 1) die("read"); /* the consumer is connected */
        prod_t p = {.ch = ch, .paced = latency};
        producer(&p);
        if (read(c2p[0], &go, 1) != 1) die("read"); /* everything arrived */
        sl_data_plane_remove(dp, 1);
        sl_data_plane_destroy(dp);
        sl_channel_destroy(ch);
        _exit(0);
    }
    sl_data_plane_config_t cfg = {.secret = "bench"};
    sl_data_plane_t *dp;
    char err[256];
    if (sl_data_plane_new(&cfg, &dp, err, sizeof err) < 0) die(err);
    sl_waker_t wk;
    sl_waker_init(&wk);
    sl_channel_t *ch = sl_channel_new(O.bufs, BUF, &wk);
    int port;
    if (read(p2c[0], &port, sizeof port) != sizeof port) die("read port");
    if (sl_data_plane_add_input(dp, 1, "127.0.0.1", port, ch, err, sizeof err) < 0) die(err);
    cons_t c = {.ch = ch, .wk = &wk, .latency = latency};
    pthread_t tc;
    pthread_create(&tc, NULL, consumer, &c);
    if (write(c2p[1], "g", 1) != 1) die("write");
    pthread_join(tc, NULL);
    sl_data_plane_remove(dp, 1); /* released before the producer goes away */
    if (write(c2p[1], "d", 1) != 1) die("write");
    int st;
    waitpid(pid, &st, 0);
    sl_data_plane_destroy(dp);
    result_t r = {0};
    finish(&c, (cpu_s(RUSAGE_SELF) - cpu0) + (cpu_s(RUSAGE_CHILDREN) - ccpu0), &r);
    sl_channel_destroy(ch);
    sl_waker_destroy(&wk);
    close(p2c[0]); close(p2c[1]); close(c2p[0]); close(c2p[1]);
    return r;
}

static int cmp_dbl(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void bench(const char *name, result_t (*run)(bool)) {
    double rps[64], per_cpu[64];
    bool bad = false;
    for (int i = 0; i < O.runs; i++) {
        result_t r = run(false);
        rps[i] = r.rps;
        per_cpu[i] = r.cpu > 0 ? (double)r.got / r.cpu : 0;
        bad |= r.bad;
    }
    qsort(rps, (size_t)O.runs, sizeof *rps, cmp_dbl);
    qsort(per_cpu, (size_t)O.runs, sizeof *per_cpu, cmp_dbl);
    result_t l = run(true);
    bad |= l.bad;
    printf("variant=%s records_per_s=%.0f records_per_cpu_s=%.0f p50_us=%.0f p99_us=%.0f rate=%d runs=%d seconds=%g%s\n",
           name, rps[O.runs / 2], per_cpu[O.runs / 2], l.p50_us, l.p99_us, O.rate, O.runs, O.seconds,
           bad ? " SEQUENCE_ERROR" : "");
    fflush(stdout);
}

int main(int argc, char **argv) {
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--seconds")) O.seconds = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--runs")) O.runs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--rate")) O.rate = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bufs")) O.bufs = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--only")) O.only = argv[i + 1];
        else {
            fprintf(stderr, "usage: bench_data_plane [--seconds S] [--runs R] [--rate N] [--bufs B] [--only inproc|remote]\n");
            return 2;
        }
    }
    if (O.runs < 1 || O.runs > 64) O.runs = 5;
    if (!O.only || !strcmp(O.only, "inproc")) bench("inproc", run_inproc);
    if (!O.only || !strcmp(O.only, "remote")) bench("remote", run_remote);
    return 0;
}
