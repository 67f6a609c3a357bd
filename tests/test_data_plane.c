/*
 * test_data_plane.c — the network data plane (taskmanager/net) between real
 * processes (fork; every data plane is created after the fork, so no child
 * inherits a running loop thread):
 *   - ordering and integrity of random buffers, 4 channels on one connection
 *     in both directions, checked against the sequence regenerated from the
 *     seed (byte for byte and an xxhash of the whole stream);
 *   - backpressure: buffers not yet consumed never exceed producer + consumer
 *     buffers (shared-memory counters across the processes), the producer blocks;
 *   - a priority event overtakes queued buffers when the consumer has no credit;
 *   - a wrong secret, kill -9 of the producer, a request that times out;
 *   - bad frames from a raw socket (and a raw producer that sends beyond its
 *     credit): logged, that connection closed, others keep working;
 *   - a mutation fuzzer of sl_frame_parse against a reference decoder
 *     (SLUICE_FUZZ_ITERS, default 200,000).
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "common/auth.h"
#include "common/common.h"
#include "taskmanager/channel.h"
#include "taskmanager/net/data_plane.h"
#include "taskmanager/net/frames.h"
#include "test.h"

#define SECRET "test-secret"
#define BUFSZ 4096

static uint64_t splitmix(uint64_t *s) {
    uint64_t z = (*s += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Buffer i of the stream of `seed` (n buffers, the last one is 'E'). */
static uint32_t gen_buf(uint64_t seed, int i, int n, uint8_t *out) {
    if (i == n - 1) {
        out[0] = SL_EL_END;
        return 1;
    }
    uint64_t s = seed * 1000003u + (uint64_t)i;
    uint32_t len = 1 + (uint32_t)(splitmix(&s) % BUFSZ);
    for (uint32_t k = 0; k < len; k++) out[k] = (uint8_t)splitmix(&s);
    return len;
}

static uint64_t stream_hash(uint64_t seed, int n) {
    sl_buf_t all = {0};
    uint8_t tmp[BUFSZ];
    for (int i = 0; i < n; i++) sl_buf_append(&all, tmp, gen_buf(seed, i, n, tmp));
    uint64_t h = sl_hash_bytes(all.p, all.len);
    sl_buf_free(&all);
    return h;
}

/* ---- failure callback record ---- */
typedef struct {
    pthread_mutex_t mu;
    int n;
    uint64_t id;
    char msg[512];
    int64_t at_ns;
} fails_t;

static void on_fail(void *ctx, uint64_t id, const char *m) {
    fails_t *f = ctx;
    pthread_mutex_lock(&f->mu);
    if (f->n++ == 0) {
        f->id = id;
        snprintf(f->msg, sizeof f->msg, "%s", m);
        f->at_ns = sl_mono_ns();
    }
    pthread_mutex_unlock(&f->mu);
}
static int fails_n(fails_t *f) {
    pthread_mutex_lock(&f->mu);
    int n = f->n;
    pthread_mutex_unlock(&f->mu);
    return n;
}

static int handshake_ms; /* 0: the default (10 s) */

static sl_data_plane_t *mk_dp(const char *secret, int timeout_ms, fails_t *f) {
    sl_data_plane_config_t cfg = {.secret = secret, .request_timeout_ms = timeout_ms, .handshake_timeout_ms = handshake_ms,
                                  .on_channel_failed = on_fail, .ctx = f};
    sl_data_plane_t *dp = NULL;
    char err[256];
    if (sl_data_plane_new(&cfg, &dp, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        abort();
    }
    return dp;
}

/* ---- pipes between the processes ---- */
static void put_int(int fd, int v) {
    if (write(fd, &v, sizeof v) != sizeof v) abort();
}
static int get_int(int fd, int timeout_ms) {
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) != 1) return -1;
    int v;
    return read(fd, &v, sizeof v) == sizeof v ? v : -1;
}

/* ---- producer / consumer of one channel ---- */
typedef struct {
    sl_channel_t *ch;
    uint64_t seed;
    int n;
    int slow_us;             /* a random pause up to this between buffers */
    atomic_int *consumed;    /* backpressure: buffers the consumer took (shared memory) */
    int bound;               /* ... and the most that may be unconsumed */
    int worst;               /* the most seen unconsumed */
    int rc;                  /* 0 ok */
    int waker_ok;            /* consumer */
    sl_waker_t *waker;
    int max_held;            /* consumer: received but not recycled */
    char why[200];
    atomic_bool done;
} flow_t;

static void *produce(void *arg) {
    flow_t *f = arg;
    uint64_t r = f->seed ^ 0x55;
    for (int i = 0; i < f->n; i++) {
        sl_nbuf_t *b = sl_channel_acquire(f->ch, BUFSZ);
        if (!b) {
            f->rc = 1;
            snprintf(f->why, sizeof f->why, "acquire canceled at %d", i);
            atomic_store(&f->done, true);
            return NULL;
        }
        if (f->consumed) {
            int unconsumed = i + 1 - atomic_load(f->consumed);
            if (unconsumed > f->worst) f->worst = unconsumed;
        }
        b->len = gen_buf(f->seed, i, f->n, b->data);
        sl_channel_send(f->ch, b);
        if (f->slow_us && splitmix(&r) % 4 == 0) usleep((useconds_t)(splitmix(&r) % (uint64_t)f->slow_us));
    }
    int64_t deadline = sl_mono_ns() + 20000000000LL;
    while (sl_channel_in_flight(f->ch) > 0 && sl_mono_ns() < deadline) usleep(1000); /* all written */
    if (sl_channel_in_flight(f->ch) > 0) {
        f->rc = 1;
        snprintf(f->why, sizeof f->why, "never drained");
    }
    atomic_store(&f->done, true);
    return NULL;
}

/* A bug must fail the test, not hang it: a producer still blocked after
 * the deadline is cancelled (it then reports "acquire canceled"). */
static void join_bounded(pthread_t t, flow_t *f, int64_t deadline_ns) {
    while (!atomic_load(&f->done) && sl_mono_ns() < deadline_ns) usleep(1000);
    if (!atomic_load(&f->done)) sl_channel_cancel(f->ch);
    pthread_join(t, NULL);
}

static void *consume(void *arg) {
    flow_t *f = arg;
    uint8_t want[BUFSZ];
    uint64_t r = f->seed ^ 0xaa;
    sl_buf_t all = {0};
    int64_t deadline = sl_mono_ns() + 20000000000LL;
    for (int i = 0; i < f->n;) {
        sl_nbuf_t *b = sl_channel_poll(f->ch);
        if (!b) {
            if (sl_mono_ns() > deadline) {
                f->rc = 1;
                snprintf(f->why, sizeof f->why, "timeout after %d of %d buffers", i, f->n);
                break;
            }
            sl_waker_wait(f->waker, sl_mono_ns() + 5000000);
            continue;
        }
        int held = sl_channel_in_flight(f->ch);
        if (held > f->max_held) f->max_held = held;
        uint32_t len = gen_buf(f->seed, i, f->n, want);
        if (b->priority || b->len != len || memcmp(b->data, want, len) != 0) {
            f->rc = 1;
            snprintf(f->why, sizeof f->why, "buffer %d differs (len %u, want %u)", i, b->len, len);
            sl_channel_recycle(f->ch, b);
            break;
        }
        sl_buf_append(&all, b->data, b->len);
        if (f->slow_us) usleep((useconds_t)(splitmix(&r) % (uint64_t)f->slow_us));
        if (f->consumed) atomic_fetch_add(f->consumed, 1); /* before the credit exists */
        sl_channel_recycle(f->ch, b);
        i++;
    }
    if (f->rc == 0 && sl_hash_bytes(all.p, all.len) != stream_hash(f->seed, f->n)) {
        f->rc = 1;
        snprintf(f->why, sizeof f->why, "stream hash differs");
    }
    sl_buf_free(&all);
    return NULL;
}

/* The child's exit code (100 + signal when killed); a child still running
 * after 60 s is killed (every child also has an alarm). */
static int wait_child(pid_t pid) {
    int st = 0;
    int64_t dl = sl_mono_ns() + 60000000000LL;
    while (waitpid(pid, &st, WNOHANG) == 0) {
        if (sl_mono_ns() > dl) {
            kill(pid, SIGKILL);
            waitpid(pid, &st, 0);
            return 200;
        }
        usleep(2000);
    }
    return WIFEXITED(st) ? WEXITSTATUS(st) : 100 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

static pid_t fork_child(void) {
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) alarm(50);
    return pid;
}

/* ---- 1. ordering and integrity, both directions, one connection ---- */

#define NCH 4
#define NBUF_INTEG 600

/* Process role: outputs `outs`, inputs `ins`; returns the exit code. */
static int integ_side(bool is_a, int rd, int wr, uint64_t seed) {
    fails_t fl = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sl_data_plane_t *dp = mk_dp(SECRET, 10000, &fl);
    int peer_port;
    sl_waker_t wk[NCH];
    sl_channel_t *ch[NCH];
    flow_t fw[NCH];
    pthread_t th[NCH];
    memset(fw, 0, sizeof fw);
    if (!is_a) put_int(wr, sl_data_plane_port(dp)); /* B tells A its port first */
    else peer_port = get_int(rd, 10000);
    /* ids 1,2: A -> B; ids 3,4: B -> A */
    for (int c = 0; c < NCH; c++) {
        bool out = is_a ? c < 2 : c >= 2;
        sl_waker_init(&wk[c]);
        ch[c] = sl_channel_new(2 + 3 * c, BUFSZ, out ? NULL : &wk[c]); /* 2..11: credits one by one and batched */
        fw[c] = (flow_t){.ch = ch[c], .seed = seed + (uint64_t)c, .n = NBUF_INTEG, .slow_us = (c % 2) ? 300 : 0,
                         .waker = &wk[c]};
    }
    int rc = 0;
    if (is_a) { /* A requests 3 and 4 from B (connects), then registers its outputs */
        char err[256];
        for (int c = 2; c < 4; c++)
            if (sl_data_plane_add_input(dp, (uint64_t)c + 1, "127.0.0.1", peer_port, ch[c], err, sizeof err) < 0) rc = 2;
        for (int c = 0; c < 2; c++) sl_data_plane_add_output(dp, (uint64_t)c + 1, ch[c]);
        /* once a buffer of channel 3 came, B knows this connection (PEER precedes REQUEST) */
        int64_t dl = sl_mono_ns() + 10000000000LL;
        while (atomic_load(&ch[2]->queued) == 0 && sl_mono_ns() < dl) usleep(1000);
        put_int(wr, sl_data_plane_port(dp));
    } else { /* B: output 3 now, output 4 late (its request waits), then inputs 1 and 2 */
        sl_data_plane_add_output(dp, 3, ch[2]);
        for (int c = 2; c < 4; c++) pthread_create(&th[c], NULL, produce, &fw[c]);
        usleep(200000);
        sl_data_plane_add_output(dp, 4, ch[3]);
        int port = get_int(rd, 10000);
        char err[256];
        for (int c = 0; c < 2; c++)
            if (sl_data_plane_add_input(dp, (uint64_t)c + 1, "127.0.0.1", port, ch[c], err, sizeof err) < 0) rc = 2;
    }
    for (int c = 0; c < NCH; c++) {
        bool out = is_a ? c < 2 : c >= 2;
        if (!is_a && out) continue; /* already started */
        pthread_create(&th[c], NULL, out ? produce : consume, &fw[c]);
    }
    int64_t dl = sl_mono_ns() + 35000000000LL;
    for (int c = 0; c < NCH; c++)
        if (!(is_a ? c < 2 : c >= 2)) pthread_join(th[c], NULL); /* consumers end by their deadline */
    for (int c = 0; c < NCH; c++)
        if (is_a ? c < 2 : c >= 2) join_bounded(th[c], &fw[c], dl);
    for (int c = 0; c < NCH; c++)
        if (fw[c].rc) {
            fprintf(stderr, "%s channel %d: %s\n", is_a ? "A" : "B", c + 1, fw[c].why);
            rc = 3;
        }
    sl_data_plane_stats_t st;
    sl_data_plane_stats(dp, &st);
    if (st.connections != 1) {
        fprintf(stderr, "%s: %d connections, want 1\n", is_a ? "A" : "B", st.connections);
        rc = 4;
    }
    if (fails_n(&fl)) {
        fprintf(stderr, "%s: failure: %s\n", is_a ? "A" : "B", fl.msg);
        rc = 5;
    }
    put_int(wr, 1); /* done; wait for the peer before closing the connection */
    get_int(rd, 30000);
    for (int c = 0; c < NCH; c++) sl_data_plane_remove(dp, (uint64_t)c + 1);
    sl_data_plane_destroy(dp);
    for (int c = 0; c < NCH; c++) {
        sl_channel_destroy(ch[c]);
        sl_waker_destroy(&wk[c]);
    }
    return rc;
}

TEST(integrity_four_channels_one_connection) {
    for (int round = 0; round < 2; round++) {
        uint64_t seed = (uint64_t)time(NULL) * 31 + (uint64_t)round;
        int ab[2], ba[2];
        CHECK(pipe(ab) == 0 && pipe(ba) == 0);
        pid_t pid = fork_child();
        if (pid == 0) exit(integ_side(false, ab[0], ba[1], seed));
        int rc = integ_side(true, ba[0], ab[1], seed);
        int crc = wait_child(pid);
        close(ab[0]); close(ab[1]); close(ba[0]); close(ba[1]);
        if (rc || crc) fprintf(stderr, "seed %" PRIu64 "\n", seed);
        CHECK_EQ(rc, 0);
        CHECK_EQ(crc, 0);
    }
}

/* ---- 2. backpressure ---- */

#define P_BUFS 4
#define C_BUFS 8 /* credits go out in pairs (batch nbufs / 4) */

TEST(backpressure_bounded_in_flight) {
    atomic_int *consumed = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    CHECK(consumed != MAP_FAILED);
    atomic_init(consumed, 0);
    int p2c[2];
    CHECK(pipe(p2c) == 0);
    uint64_t seed = (uint64_t)time(NULL);
    int n = 300;
    pid_t pid = fork_child();
    if (pid == 0) { /* producer */
        fails_t fl = {.mu = PTHREAD_MUTEX_INITIALIZER};
        sl_data_plane_t *dp = mk_dp(SECRET, 10000, &fl);
        sl_channel_t *ch = sl_channel_new(P_BUFS, BUFSZ, NULL);
        sl_data_plane_add_output(dp, 42, ch);
        put_int(p2c[1], sl_data_plane_port(dp));
        flow_t f = {.ch = ch, .seed = seed, .n = n, .consumed = consumed};
        produce(&f);
        int rc = f.rc;
        if (f.worst > P_BUFS + C_BUFS) {
            fprintf(stderr, "producer: %d buffers unconsumed, bound %d\n", f.worst, P_BUFS + C_BUFS);
            rc = 2;
        }
        if (f.worst < P_BUFS + C_BUFS - 2) { /* a slow consumer fills both sides (less one batched credit) */
            fprintf(stderr, "producer: only %d buffers ever unconsumed\n", f.worst);
            rc = 3;
        }
        if (atomic_load(&ch->backpressured_ns) < 100000000LL) { /* blocked >= 0.1 s in acquire */
            fprintf(stderr, "producer: acquire blocked only %lld ns\n", (long long)atomic_load(&ch->backpressured_ns));
            rc = 4;
        }
        if (f.rc) fprintf(stderr, "producer: %s\n", f.why);
        sleep(1); /* the consumer removes first */
        sl_data_plane_remove(dp, 42);
        sl_data_plane_destroy(dp);
        sl_channel_destroy(ch);
        exit(rc);
    }
    fails_t fl = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sl_data_plane_t *dp = mk_dp(SECRET, 10000, &fl);
    sl_waker_t wk;
    sl_waker_init(&wk);
    sl_channel_t *ch = sl_channel_new(C_BUFS, BUFSZ, &wk);
    int port = get_int(p2c[0], 10000);
    char err[256];
    CHECK(sl_data_plane_add_input(dp, 42, "127.0.0.1", port, ch, err, sizeof err) == 0);
    flow_t f = {.ch = ch, .seed = seed, .n = n, .slow_us = 2000, .consumed = consumed, .waker = &wk};
    consume(&f);
    if (f.rc) fprintf(stderr, "consumer: %s\n", f.why);
    sl_data_plane_remove(dp, 42);
    int crc = wait_child(pid);
    sl_data_plane_destroy(dp);
    sl_channel_destroy(ch);
    sl_waker_destroy(&wk);
    munmap(consumed, 4096);
    close(p2c[0]);
    close(p2c[1]);
    CHECK_EQ(f.rc, 0);
    CHECK(f.max_held <= C_BUFS);
    CHECK_EQ(fails_n(&fl), 0);
    CHECK_EQ(crc, 0);
}

/* ---- 3. priority overtakes on the sending side ---- */

#define PRIO_K 5

TEST(priority_overtakes_queued_buffers) {
    int p2c[2], c2p[2];
    CHECK(pipe(p2c) == 0 && pipe(c2p) == 0);
    const char ev[] = "B-priority-event";
    pid_t pid = fork_child();
    if (pid == 0) { /* producer: 2 buffers take the consumer's 2 credits, K wait in ch */
        fails_t fl = {.mu = PTHREAD_MUTEX_INITIALIZER};
        sl_data_plane_t *dp = mk_dp(SECRET, 10000, &fl);
        sl_channel_t *ch = sl_channel_new(2 + PRIO_K + 1, BUFSZ, NULL);
        sl_data_plane_add_output(dp, 7, ch);
        put_int(p2c[1], sl_data_plane_port(dp));
        int rc = 0;
        for (int i = 0; i < 2 + PRIO_K; i++) {
            sl_nbuf_t *b = sl_channel_acquire(ch, 8);
            sl_st64(b->data, (uint64_t)i);
            b->len = 8;
            sl_channel_send(ch, b);
        }
        sl_data_plane_stats_t st;
        int64_t dl = sl_mono_ns() + 10000000000LL;
        do {
            usleep(1000);
            sl_data_plane_stats(dp, &st);
        } while ((st.buffers_sent < 2 || atomic_load(&ch->queued) != PRIO_K) && sl_mono_ns() < dl);
        usleep(100000); /* no further credit may come */
        sl_data_plane_stats(dp, &st);
        if (st.buffers_sent != 2 || atomic_load(&ch->queued) != PRIO_K) rc = 2;
        sl_buf_t cap = {0};
        sl_channel_send_priority(ch, ev, sizeof ev, &cap);
        if (cap.len != 8 * PRIO_K) rc = 3; /* the overtaken buffers are captured */
        for (int i = 0; i < PRIO_K && rc == 0; i++)
            if (sl_ld64(cap.p + 8 * i) != (uint64_t)(2 + i)) rc = 4;
        sl_buf_free(&cap);
        get_int(c2p[0], 20000); /* the consumer is done */
        sl_data_plane_remove(dp, 7);
        sl_data_plane_destroy(dp);
        sl_channel_destroy(ch);
        exit(rc);
    }
    fails_t fl = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sl_data_plane_t *dp = mk_dp(SECRET, 10000, &fl);
    sl_waker_t wk;
    sl_waker_init(&wk);
    sl_channel_t *ch = sl_channel_new(2, BUFSZ, &wk);
    int port = get_int(p2c[0], 10000);
    char err[256];
    CHECK(sl_data_plane_add_input(dp, 7, "127.0.0.1", port, ch, err, sizeof err) == 0);
    /* read nothing until the priority event is queued behind the 2 credited buffers */
    int64_t dl = sl_mono_ns() + 10000000000LL;
    while (atomic_load(&ch->queued) < 3 && sl_mono_ns() < dl) usleep(1000);
    int got_queued = atomic_load(&ch->queued);
    /* order seen by the consumer: 0, 1, the event, 2 .. K+1 */
    int order[2 + PRIO_K + 1], n = 0;
    dl = sl_mono_ns() + 10000000000LL;
    while (n < 2 + PRIO_K + 1 && sl_mono_ns() < dl) {
        sl_nbuf_t *b = sl_channel_poll(ch);
        if (!b) {
            sl_waker_wait(&wk, sl_mono_ns() + 5000000);
            continue;
        }
        if (b->priority)
            order[n++] = (b->len == sizeof ev && memcmp(b->data, ev, sizeof ev) == 0) ? -1 : -2;
        else
            order[n++] = b->len == 8 ? (int)sl_ld64(b->data) : -3;
        sl_channel_recycle(ch, b);
    }
    put_int(c2p[1], 1);
    sl_data_plane_remove(dp, 7);
    int crc = wait_child(pid);
    sl_data_plane_destroy(dp);
    sl_channel_destroy(ch);
    sl_waker_destroy(&wk);
    close(p2c[0]); close(p2c[1]); close(c2p[0]); close(c2p[1]);
    CHECK_EQ(got_queued, 3);
    CHECK_EQ(n, 2 + PRIO_K + 1);
    CHECK_EQ(order[0], 0);
    CHECK_EQ(order[1], 1);
    CHECK_EQ(order[2], -1);
    for (int i = 0; i < PRIO_K; i++) CHECK_EQ(order[3 + i], 2 + i);
    CHECK_EQ(crc, 0);
}

/* ---- 4. a wrong secret ---- */

static char *slurp(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) return sl_strdup("");
    sl_buf_t b = {0};
    char tmp[4096];
    size_t n;
    while ((n = fread(tmp, 1, sizeof tmp, f)) > 0) sl_buf_append(&b, tmp, n);
    fclose(f);
    sl_buf_append(&b, "", 1);
    return (char *)b.p;
}

TEST(wrong_secret_refused) {
    char log[600];
    snprintf(log, sizeof log, "%s/wrong_secret.log", sl_test_tmpdir());
    int p2c[2], c2p[2];
    CHECK(pipe(p2c) == 0 && pipe(c2p) == 0);
    pid_t pid = fork_child();
    if (pid == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 2);
        fails_t fl = {.mu = PTHREAD_MUTEX_INITIALIZER};
        sl_data_plane_t *dp = mk_dp("right-secret", 10000, &fl);
        sl_channel_t *ch = sl_channel_new(4, BUFSZ, NULL);
        sl_data_plane_add_output(dp, 5, ch);
        for (int i = 0; i < 3; i++) { /* data that must not be delivered */
            sl_nbuf_t *b = sl_channel_acquire(ch, 8);
            memset(b->data, 'x', 8);
            b->len = 8;
            sl_channel_send(ch, b);
        }
        put_int(p2c[1], sl_data_plane_port(dp));
        get_int(c2p[0], 20000);
        sl_data_plane_stats_t st;
        sl_data_plane_stats(dp, &st);
        sl_data_plane_remove(dp, 5);
        sl_data_plane_destroy(dp);
        sl_channel_destroy(ch);
        exit(st.buffers_sent == 0 && st.bad_connections == 1 ? 0 : 1);
    }
    fails_t fl = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sl_data_plane_t *dp = mk_dp("wrong-secret", 10000, &fl);
    sl_waker_t wk;
    sl_waker_init(&wk);
    sl_channel_t *ch = sl_channel_new(4, BUFSZ, &wk);
    int port = get_int(p2c[0], 10000);
    char err[256], peer[64];
    snprintf(peer, sizeof peer, "127.0.0.1:%d", port);
    CHECK(sl_data_plane_add_input(dp, 5, "127.0.0.1", port, ch, err, sizeof err) == 0);
    int64_t dl = sl_mono_ns() + 10000000000LL;
    while (fails_n(&fl) == 0 && sl_mono_ns() < dl) usleep(1000);
    usleep(100000);
    int queued = atomic_load(&ch->queued);
    put_int(c2p[1], 1);
    int crc = wait_child(pid);
    sl_data_plane_remove(dp, 5);
    sl_data_plane_destroy(dp);
    sl_channel_destroy(ch);
    sl_waker_destroy(&wk);
    close(p2c[0]); close(p2c[1]); close(c2p[0]); close(c2p[1]);
    char *text = slurp(log);
    fprintf(stderr, "  producer logged: %s", text);
    CHECK_EQ(fails_n(&fl), 1);
    CHECK_EQ(fl.id, 5);
    CHECK_CONTAINS(fl.msg, peer);
    CHECK_CONTAINS(fl.msg, "authentication failed");
    CHECK_EQ(queued, 0);
    CHECK_CONTAINS(text, "authentication failed");
    CHECK_CONTAINS(text, "from 127.0.0.1:");
    sl_free(text);
    CHECK_EQ(crc, 0);
}

/* ---- 5. kill -9 of the producer ---- */

TEST(producer_killed) {
    int p2c[2];
    CHECK(pipe(p2c) == 0);
    uint64_t seed = 77;
    pid_t pid = fork_child();
    if (pid == 0) {
        fails_t fl = {.mu = PTHREAD_MUTEX_INITIALIZER};
        sl_data_plane_t *dp = mk_dp(SECRET, 10000, &fl);
        sl_channel_t *ch = sl_channel_new(4, BUFSZ, NULL);
        sl_data_plane_add_output(dp, 9, ch);
        put_int(p2c[1], sl_data_plane_port(dp));
        flow_t f = {.ch = ch, .seed = seed, .n = 1 << 30, .slow_us = 2000};
        produce(&f); /* until killed */
        exit(1);
    }
    fails_t fl = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sl_data_plane_t *dp = mk_dp(SECRET, 10000, &fl);
    sl_waker_t wk;
    sl_waker_init(&wk);
    sl_channel_t *ch = sl_channel_new(4, BUFSZ, &wk);
    int port = get_int(p2c[0], 10000);
    char err[256], peer[64];
    snprintf(peer, sizeof peer, "127.0.0.1:%d", port);
    CHECK(sl_data_plane_add_input(dp, 9, "127.0.0.1", port, ch, err, sizeof err) == 0);
    int got = 0;
    int64_t dl = sl_mono_ns() + 10000000000LL, killed_at = 0;
    while (sl_mono_ns() < dl && fails_n(&fl) == 0) {
        sl_nbuf_t *b = sl_channel_poll(ch);
        if (!b) {
            sl_waker_wait(&wk, sl_mono_ns() + 5000000);
            continue;
        }
        sl_channel_recycle(ch, b);
        if (++got == 20) {
            kill(pid, SIGKILL);
            killed_at = sl_mono_ns();
        }
    }
    int crc = wait_child(pid);
    sl_nbuf_t *late = sl_channel_acquire(ch, 8); /* cancelled: does not block */
    sl_data_plane_remove(dp, 9);
    sl_data_plane_destroy(dp);
    sl_channel_destroy(ch);
    sl_waker_destroy(&wk);
    close(p2c[0]);
    close(p2c[1]);
    CHECK(got >= 20);
    CHECK_EQ(crc, 100 + SIGKILL);
    CHECK_EQ(fails_n(&fl), 1);
    CHECK(fl.at_ns - killed_at < 1000000000LL);
    CHECK_CONTAINS(fl.msg, peer);
    CHECK_CONTAINS(fl.msg, "lost");
    CHECK(late == NULL);
}

/* ---- 6. a request whose output never comes ---- */

TEST(request_times_out) {
    fails_t f1 = {.mu = PTHREAD_MUTEX_INITIALIZER}, f2 = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sl_data_plane_t *prod = mk_dp(SECRET, 300, &f1), *cons = mk_dp(SECRET, 300, &f2);
    sl_waker_t wk;
    sl_waker_init(&wk);
    sl_channel_t *ch = sl_channel_new(2, BUFSZ, &wk);
    char err[256];
    int64_t t0 = sl_mono_ns();
    CHECK(sl_data_plane_add_input(cons, 11, "127.0.0.1", sl_data_plane_port(prod), ch, err, sizeof err) == 0);
    CHECK(sl_data_plane_add_input(cons, 11, "127.0.0.1", sl_data_plane_port(prod), ch, err, sizeof err) == SL_EINVAL);
    while (fails_n(&f2) == 0 && sl_mono_ns() - t0 < 5000000000LL) usleep(1000);
    int64_t took = sl_mono_ns() - t0;
    sl_data_plane_remove(cons, 11);
    sl_data_plane_destroy(cons);
    sl_data_plane_destroy(prod);
    sl_channel_destroy(ch);
    sl_waker_destroy(&wk);
    CHECK_EQ(fails_n(&f2), 1);
    CHECK_CONTAINS(f2.msg, "no producer registered channel 000000000000000b");
    CHECK(took >= 300000000LL && took < 2000000000LL);
    CHECK_EQ(fails_n(&f1), 0);
}

/* ---- 7. bad frames from a raw socket ---- */

static int raw_connect(int port) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    if (connect(fd, (struct sockaddr *)&a, sizeof a) < 0) abort();
    return fd;
}
static int read_full(int fd, void *p, size_t n) {
    size_t got = 0;
    while (got < n) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 5000) != 1) return -1;
        ssize_t r = read(fd, (char *)p + got, n - got);
        if (r <= 0) return -1;
        got += (size_t)r;
    }
    return 0;
}
/* The handshake as `role`; 0 when the peer accepted our proof shape. */
static int raw_handshake(int fd, int role) {
    sl_auth_hello_t mine, theirs;
    uint8_t hello[SL_AUTH_HELLO_LEN], peer[SL_AUTH_HELLO_LEN], proof[SL_AUTH_PROOF_LEN];
    char err[128];
    sl_auth_hello_make(&mine, SL_AUTH_DATA, role, hello);
    if (sl_write_all(fd, hello, sizeof hello)) return -1;
    if (read_full(fd, peer, sizeof peer) || sl_auth_hello_parse(peer, role, &theirs, err, sizeof err) < 0) return -1;
    sl_auth_proof(SECRET, &mine, &theirs, proof);
    if (sl_write_all(fd, proof, sizeof proof)) return -1;
    if (read_full(fd, proof, sizeof proof) || !sl_auth_check(SECRET, &mine, &theirs, proof)) return -1;
    return 0;
}
/* True when the server closed fd (EOF/reset) within 5 s, reading away what it sent. */
static bool closed_by_peer(int fd) {
    char tmp[4096];
    for (;;) {
        struct pollfd pf = {fd, POLLIN, 0};
        if (poll(&pf, 1, 5000) != 1) return false;
        ssize_t r = read(fd, tmp, sizeof tmp);
        if (r <= 0) return true;
    }
}
static void frame(uint8_t *out, int type, uint64_t id, uint32_t value, uint32_t len) {
    sl_frame_header(out, type, id, value, len);
}

/* A healthy channel between two data planes of this process: n buffers. */
static int healthy_transfer(sl_data_plane_t *server, sl_data_plane_t *client, uint64_t id, uint64_t seed) {
    sl_waker_t wk;
    sl_waker_init(&wk);
    sl_channel_t *out = sl_channel_new(3, BUFSZ, NULL), *in = sl_channel_new(3, BUFSZ, &wk);
    sl_data_plane_add_output(server, id, out);
    char err[256];
    sl_data_plane_add_input(client, id, "127.0.0.1", sl_data_plane_port(server), in, err, sizeof err);
    flow_t p = {.ch = out, .seed = seed, .n = 50}, c = {.ch = in, .seed = seed, .n = 50, .waker = &wk};
    pthread_t t;
    pthread_create(&t, NULL, produce, &p);
    consume(&c);
    join_bounded(t, &p, sl_mono_ns() + 5000000000LL);
    sl_data_plane_remove(client, id);
    sl_data_plane_remove(server, id);
    sl_channel_destroy(out);
    sl_channel_destroy(in);
    sl_waker_destroy(&wk);
    return p.rc || c.rc;
}

TEST(bad_frames_close_only_that_connection) {
    char log[600];
    snprintf(log, sizeof log, "%s/bad_frames.log", sl_test_tmpdir());
    fflush(stderr);
    int saved = dup(2), lfd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(lfd, 2);
    fails_t f1 = {.mu = PTHREAD_MUTEX_INITIALIZER}, f2 = {.mu = PTHREAD_MUTEX_INITIALIZER};
    handshake_ms = 500;
    sl_data_plane_t *dp = mk_dp(SECRET, 10000, &f1);
    handshake_ms = 0;
    sl_data_plane_t *other = mk_dp(SECRET, 10000, &f2);
    int port = sl_data_plane_port(dp);
    int healthy_before = healthy_transfer(dp, other, 100, 1);
    uint8_t buf[256];
    bool closed[6] = {false};
    /* f: a client that connects and stays silent is dropped after the handshake timeout */
    int fd = raw_connect(port);
    int64_t t_silent = sl_mono_ns();
    {
        uint8_t hello[SL_AUTH_HELLO_LEN];
        closed[5] = read_full(fd, hello, sizeof hello) == 0 && closed_by_peer(fd);
    }
    t_silent = sl_mono_ns() - t_silent;
    close(fd);
    /* a: garbage after the handshake */
    fd = raw_connect(port);
    if (raw_handshake(fd, 0) == 0) {
        memset(buf, 0xEE, 64);
        sl_write_all(fd, buf, 64);
        closed[0] = closed_by_peer(fd);
    }
    close(fd);
    /* b: a truncated frame, then the client goes away */
    fd = raw_connect(port);
    if (raw_handshake(fd, 0) == 0) {
        frame(buf, SL_FRAME_BUFFER, 1, 0, 100);
        sl_write_all(fd, buf, SL_FRAME_HEADER + 10);
        shutdown(fd, SHUT_WR);
        closed[1] = closed_by_peer(fd);
    }
    close(fd);
    /* c: an oversized frame */
    fd = raw_connect(port);
    if (raw_handshake(fd, 0) == 0) {
        frame(buf, SL_FRAME_BUFFER, 1, 0, SL_FRAME_MAX_PAYLOAD + 1);
        sl_write_all(fd, buf, SL_FRAME_HEADER);
        closed[2] = closed_by_peer(fd);
    }
    close(fd);
    /* d: a BUFFER nobody gave credit for */
    fd = raw_connect(port);
    if (raw_handshake(fd, 0) == 0) {
        frame(buf, SL_FRAME_BUFFER, 100, 0, 4);
        memcpy(buf + SL_FRAME_HEADER, "abcd", 4);
        sl_write_all(fd, buf, SL_FRAME_HEADER + 4);
        closed[3] = closed_by_peer(fd);
    }
    close(fd);
    /* e: a raw producer that sends one BUFFER beyond the credit of dp's input */
    int lsock = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    socklen_t alen = sizeof a;
    bind(lsock, (struct sockaddr *)&a, sizeof a);
    listen(lsock, 4);
    getsockname(lsock, (struct sockaddr *)&a, &alen);
    sl_waker_t wk;
    sl_waker_init(&wk);
    sl_channel_t *in = sl_channel_new(3, BUFSZ, &wk);
    char err[256];
    sl_data_plane_add_input(dp, 200, "127.0.0.1", ntohs(a.sin_port), in, err, sizeof err);
    fd = accept(lsock, NULL, NULL);
    uint32_t credit = 0;
    if (raw_handshake(fd, 1) == 0) {
        uint8_t h[SL_FRAME_HEADER + 4];
        if (read_full(fd, h, SL_FRAME_HEADER) == 0 && h[0] == SL_FRAME_PEER &&
            read_full(fd, h, SL_FRAME_HEADER + 4) == 0 && h[0] == SL_FRAME_REQUEST && sl_ld64(h + 1) == 200)
            credit = sl_ld32(h + 9);
        for (uint32_t i = 0; i <= credit && credit > 0; i++) {
            frame(buf, SL_FRAME_BUFFER, 200, 0, 4);
            memcpy(buf + SL_FRAME_HEADER, "wxyz", 4);
            sl_write_all(fd, buf, SL_FRAME_HEADER + 4);
        }
        closed[4] = closed_by_peer(fd);
    }
    close(fd);
    close(lsock);
    int64_t dl = sl_mono_ns() + 5000000000LL;
    while (fails_n(&f1) == 0 && sl_mono_ns() < dl) usleep(1000);
    int delivered = atomic_load(&in->queued);
    sl_data_plane_remove(dp, 200);
    sl_channel_destroy(in);
    sl_waker_destroy(&wk);
    int healthy_after = healthy_transfer(dp, other, 101, 2);
    sl_data_plane_stats_t st;
    sl_data_plane_stats(dp, &st);
    sl_data_plane_destroy(other);
    sl_data_plane_destroy(dp);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    close(lfd);
    char *text = slurp(log);
    fprintf(stderr, "  logged:\n%s", text);
    CHECK_EQ(healthy_before, 0);
    for (int i = 0; i < 6; i++) CHECK(closed[i]);
    CHECK(t_silent >= 400000000LL && t_silent < 3000000000LL);
    CHECK_EQ(credit, 3);
    CHECK_EQ(delivered, 3);
    CHECK_EQ(fails_n(&f1), 1);
    CHECK_EQ(f1.id, 200);
    CHECK_CONTAINS(f1.msg, "BUFFER without credit");
    CHECK_EQ(fails_n(&f2), 0);
    CHECK_EQ(healthy_after, 0);
    CHECK_EQ(st.bad_connections, 6);
    CHECK_CONTAINS(text, "no handshake within 500 ms");
    CHECK_CONTAINS(text, "unknown type 238");
    CHECK_CONTAINS(text, "truncated frame (27 bytes, then end of file)");
    CHECK_CONTAINS(text, "more than the cap");
    CHECK_CONTAINS(text, "not requested");
    CHECK_CONTAINS(text, "BUFFER without credit");
    sl_free(text);
}

/* ---- 8. fuzzing sl_frame_parse against a reference decoder ---- */

/* The rules of frames.h, written out plainly: -1 bad, 0 more, else size. */
static long ref_parse(const uint8_t *p, size_t n, uint32_t cap) {
    if (n == 0) return 0;
    int t = p[0];
    if (t < 1 || t > 7) return -1;
    if (n < 17) return 0;
    uint32_t v = (uint32_t)p[9] | (uint32_t)p[10] << 8 | (uint32_t)p[11] << 16 | (uint32_t)p[12] << 24;
    uint32_t l = (uint32_t)p[13] | (uint32_t)p[14] << 8 | (uint32_t)p[15] << 16 | (uint32_t)p[16] << 24;
    if (cap > SL_FRAME_MAX_PAYLOAD) cap = SL_FRAME_MAX_PAYLOAD;
    if ((t == SL_FRAME_PEER || t == SL_FRAME_CREDIT || t == SL_FRAME_CLOSE) && l != 0) return -1;
    if (t == SL_FRAME_CREDIT && v == 0) return -1;
    if (t == SL_FRAME_PEER && (v == 0 || v > 65535)) return -1;
    if (t == SL_FRAME_REQUEST && l != 4) return -1;
    if (t == SL_FRAME_ERROR && l > SL_FRAME_MAX_ERROR) return -1;
    if ((t == SL_FRAME_BUFFER || t == SL_FRAME_PRIORITY) && l > cap) return -1;
    if (n - 17 < l) return 0;
    return 17 + (long)l;
}

TEST(fuzz_frame_parse) {
    const char *e = getenv("SLUICE_FUZZ_ITERS");
    long iters = e ? atol(e) : 200000;
    uint64_t s = (uint64_t)time(NULL);
    uint8_t *m = sl_malloc(1 << 16);
    long ok = 0, bad = 0, more = 0;
    for (long it = 0; it < iters; it++) {
        /* a valid frame (or two back to back), then mutations */
        size_t n = 0;
        for (int k = 0; k < 2; k++) {
            int t = 1 + (int)(splitmix(&s) % 7);
            uint32_t len = t == SL_FRAME_REQUEST ? 4 : (t == SL_FRAME_BUFFER || t == SL_FRAME_PRIORITY || t == SL_FRAME_ERROR) ? (uint32_t)(splitmix(&s) % 300) : 0;
            uint32_t v = t == SL_FRAME_PEER ? 1 + (uint32_t)(splitmix(&s) % 65535) : 1 + (uint32_t)(splitmix(&s) % 100);
            sl_frame_header(m + n, t, splitmix(&s), v, len);
            for (uint32_t i = 0; i < len; i++) m[n + 17 + i] = (uint8_t)splitmix(&s);
            n += 17 + len;
        }
        int muts = (int)(splitmix(&s) % 4);
        for (int k = 0; k < muts; k++) {
            uint64_t r = splitmix(&s);
            switch (r % 5) {
            case 0: m[(r >> 8) % n] ^= (uint8_t)(1u << ((r >> 40) % 8)); break;
            case 1: m[(r >> 8) % n] = (uint8_t)(r >> 32); break;
            case 2: n = (r >> 8) % (n + 1); break;                            /* truncate */
            case 3: sl_st32(m + 13, (uint32_t)(r >> 16)); break;              /* any length */
            case 4: m[0] = (uint8_t)(r >> 16); break;                         /* any type */
            }
            if (n == 0) break;
        }
        uint32_t cap = splitmix(&s) % 2 ? SL_FRAME_MAX_PAYLOAD : (uint32_t)(splitmix(&s) % 400);
        /* parse from a copy of exactly n bytes so ASan sees any overread */
        uint8_t *cp = sl_malloc(n ? n : 1);
        memcpy(cp, m, n);
        sl_frame_t f;
        char err[200] = "";
        long got = sl_frame_parse(cp, n, cap, &f, err, sizeof err);
        long want = ref_parse(cp, n, cap);
        if ((got < 0 ? -1 : got) != want) {
            fprintf(stderr, "iteration %ld: parse %ld, reference %ld (%s)\n", it, got, want, err);
            sl_free(cp);
            sl_free(m);
            CHECK(false);
        }
        if (got > 0) {
            ok++;
            CHECK(f.payload == cp + 17 && f.len == (uint32_t)(got - 17) && f.type == cp[0]);
        } else if (got < 0) {
            bad++;
            CHECK(strncmp(err, "bad frame", 9) == 0);
        } else {
            more++;
        }
        sl_free(cp);
    }
    sl_free(m);
    fprintf(stderr, "  fuzz: %ld iterations: %ld frames, %ld bad, %ld need more\n", iters, ok, bad, more);
    CHECK(iters < 1000 || (ok > 0 && bad > 0 && more > 0));
}

int main(void) {
    signal(SIGPIPE, SIG_IGN);
    RUN(fuzz_frame_parse);
    RUN(integrity_four_channels_one_connection);
    RUN(backpressure_bounded_in_flight);
    RUN(priority_overtakes_queued_buffers);
    RUN(wrong_secret_refused);
    RUN(producer_killed);
    RUN(request_times_out);
    RUN(bad_frames_close_only_that_connection);
    TEST_MAIN_END();
}
