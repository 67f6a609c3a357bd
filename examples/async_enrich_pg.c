/*
 * async_enrich_pg.c — example of async I/O (include/sluice/async.h):
 * enriches the S1 card transactions of sl_datagen_source with the card's
 * holder and country, looked up in a PostgreSQL table `cards` through
 * libpq's asynchronous API.
 *
 * The lookups run on one thread of the example's own (pg_lookup_t) that
 * owns a small pool of connections: the async function only queues a
 * request and wakes that thread; the thread sends each request on an idle
 * connection (PQsendQueryParams), waits in poll() for the sockets and
 * answers a request when its result is in (PQconsumeInput, PQisBusy,
 * PQgetResult), completing the sluice handle from its own thread.  The
 * operator keeps at most `capacity` lookups in flight per subtask and
 * emits unordered (results may reorder between watermarks only).
 *
 *   async_enrich_pg CONNINFO [COUNT] [PARALLELISM]
 *
 * creates (or replaces) the table `cards` with CARDS cards (every tenth
 * card is unknown: its holder and country come out NULL), runs the job
 * over COUNT transactions and prints a few enriched rows and the totals.
 * tests/test_postgres_async.c runs the same code against a throwaway
 * server (scripts/postgres.sh), with a failure and a restore.
 */
#include <errno.h>
#include <fcntl.h>
#include <libpq-fe.h>
#include <poll.h>
#include <stdatomic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sluice/async.h"
#include "sluice/sluice.h"

#define ENRICH_CARDS 400
#define ENRICH_OUT_DDL \
    "card_id BIGINT NOT NULL, amount DOUBLE NOT NULL, ts TIMESTAMP(3) NOT NULL, holder VARCHAR, country VARCHAR"

static const char *const enrich_countries[] = {"DE", "FR", "NL", "PL", "SE"};

/* The contents of `cards`, as a function (tests compare with it). */
static inline bool enrich_card_known(int64_t card) { return card % 10 != 3; }
static inline void enrich_card_holder(int64_t card, char *buf, size_t cap) {
    snprintf(buf, cap, "holder-%lld", (long long)card);
}
static inline const char *enrich_card_country(int64_t card) { return enrich_countries[card % 5]; }

static void enrich_quiet(void *arg, const char *msg) {}

/* Creates the table `cards` with the cards above.  0, or -1 with err. */
static int enrich_setup_cards(const char *conninfo, int ncards, char *err, size_t errlen) {
    PGconn *c = PQconnectdb(conninfo);
    if (PQstatus(c) != CONNECTION_OK) {
        snprintf(err, errlen, "connect: %s", PQerrorMessage(c));
        PQfinish(c);
        return -1;
    }
    PQsetNoticeProcessor(c, enrich_quiet, NULL);
    PGresult *r = PQexec(c, "DROP TABLE IF EXISTS cards; "
                            "CREATE TABLE cards (card_id BIGINT PRIMARY KEY, holder TEXT NOT NULL, country TEXT NOT NULL)");
    int rc = PQresultStatus(r) == PGRES_COMMAND_OK ? 0 : -1;
    if (rc) snprintf(err, errlen, "create table: %s", PQerrorMessage(c));
    PQclear(r);
    for (int64_t card = 0; card < ncards && rc == 0; card++) {
        if (!enrich_card_known(card)) continue;
        char id[32], holder[64];
        snprintf(id, sizeof id, "%lld", (long long)card);
        enrich_card_holder(card, holder, sizeof holder);
        const char *vals[3] = {id, holder, enrich_card_country(card)};
        r = PQexecParams(c, "INSERT INTO cards VALUES ($1, $2, $3)", 3, NULL, vals, NULL, NULL, 0);
        if (PQresultStatus(r) != PGRES_COMMAND_OK) {
            snprintf(err, errlen, "insert: %s", PQerrorMessage(c));
            rc = -1;
        }
        PQclear(r);
    }
    PQfinish(c);
    return rc;
}

/* ---- the lookup thread and its connection pool ---- */

typedef struct enrich_req {
    sl_async_result_t *res;
    int64_t card, ts;
    double amount;
    struct enrich_req *next;
} enrich_req_t;

typedef struct pg_lookup {
    pthread_mutex_t mu;
    enrich_req_t *head, *tail; /* waiting for a connection */
    bool stop;
    int wake[2];               /* pipe: a request was queued, or stop */
    int nconn;
    PGconn **conn;
    enrich_req_t **busy;       /* per connection: the request it serves */
    pthread_t th;
    atomic_llong lookups, errors;
} pg_lookup_t;

static void lookup_answer(pg_lookup_t *pl, int i) {
    enrich_req_t *q = pl->busy[i];
    PGresult *r, *first = NULL;
    while ((r = PQgetResult(pl->conn[i])) != NULL) { /* until NULL: the connection is free again */
        if (!first)
            first = r;
        else
            PQclear(r);
    }
    pl->busy[i] = NULL;
    if (!first || PQresultStatus(first) != PGRES_TUPLES_OK) {
        char msg[300];
        snprintf(msg, sizeof msg, "card lookup failed: %s", PQerrorMessage(pl->conn[i]));
        pl->errors++;
        sl_async_fail(q->res, msg);
    } else {
        sl_row_writer_t *w = sl_async_row(q->res);
        sl_rw_set_i64(w, 0, q->card);
        sl_rw_set_f64(w, 1, q->amount);
        sl_rw_set_i64(w, 2, q->ts);
        if (PQntuples(first) == 1) {
            sl_rw_set_str(w, 3, PQgetvalue(first, 0, 0), (uint32_t)PQgetlength(first, 0, 0));
            sl_rw_set_str(w, 4, PQgetvalue(first, 0, 1), (uint32_t)PQgetlength(first, 0, 1));
        } else { /* unknown card */
            sl_rw_set_null(w, 3);
            sl_rw_set_null(w, 4);
        }
        sl_async_add(q->res);
        pl->lookups++;
        sl_async_complete(q->res);
    }
    if (first) PQclear(first);
    free(q);
}

static void *lookup_main(void *arg) {
    pg_lookup_t *pl = arg;
    struct pollfd *fds = calloc((size_t)pl->nconn + 1, sizeof *fds);
    int *which = calloc((size_t)pl->nconn + 1, sizeof *which);
    for (;;) {
        /* hand waiting requests to idle connections */
        pthread_mutex_lock(&pl->mu);
        bool stop = pl->stop;
        for (int i = 0; i < pl->nconn && pl->head; i++) {
            if (pl->busy[i]) continue;
            enrich_req_t *q = pl->head;
            pl->head = q->next;
            if (!pl->head) pl->tail = NULL;
            char id[32];
            snprintf(id, sizeof id, "%lld", (long long)q->card);
            const char *vals[1] = {id};
            if (!PQsendQueryParams(pl->conn[i], "SELECT holder, country FROM cards WHERE card_id = $1", 1, NULL, vals,
                                   NULL, NULL, 0)) {
                char msg[300];
                snprintf(msg, sizeof msg, "card lookup could not be sent: %s", PQerrorMessage(pl->conn[i]));
                sl_async_fail(q->res, msg);
                free(q);
                continue;
            }
            PQflush(pl->conn[i]);
            pl->busy[i] = q;
        }
        pthread_mutex_unlock(&pl->mu);
        if (stop) break;
        /* wait for answers or new requests */
        int n = 0;
        fds[n] = (struct pollfd){.fd = pl->wake[0], .events = POLLIN};
        which[n++] = -1;
        for (int i = 0; i < pl->nconn; i++)
            if (pl->busy[i]) {
                fds[n] = (struct pollfd){.fd = PQsocket(pl->conn[i]), .events = POLLIN};
                which[n++] = i;
            }
        if (poll(fds, (nfds_t)n, 100) < 0 && errno != EINTR) break;
        if (fds[0].revents & POLLIN) {
            char buf[64];
            while (read(pl->wake[0], buf, sizeof buf) > 0) {
            }
        }
        for (int k = 1; k < n; k++) {
            int i = which[k];
            if (!(fds[k].revents & (POLLIN | POLLERR | POLLHUP))) continue;
            if (!PQconsumeInput(pl->conn[i]) || !PQisBusy(pl->conn[i])) lookup_answer(pl, i);
        }
    }
    /* stopping: requests still open are failed (their jobs are gone) */
    for (int i = 0; i < pl->nconn; i++)
        if (pl->busy[i]) {
            sl_async_fail(pl->busy[i]->res, "lookup service stopped");
            free(pl->busy[i]);
            pl->busy[i] = NULL;
        }
    pthread_mutex_lock(&pl->mu);
    while (pl->head) {
        enrich_req_t *q = pl->head;
        pl->head = q->next;
        sl_async_fail(q->res, "lookup service stopped");
        free(q);
    }
    pthread_mutex_unlock(&pl->mu);
    free(fds);
    free(which);
    return NULL;
}

static void pg_lookup_destroy(pg_lookup_t *pl) {
    if (!pl) return;
    if (pl->th) {
        pthread_mutex_lock(&pl->mu);
        pl->stop = true;
        pthread_mutex_unlock(&pl->mu);
        if (write(pl->wake[1], "x", 1) < 0) { /* the thread also wakes every 100 ms */
        }
        pthread_join(pl->th, NULL);
    }
    for (int i = 0; i < pl->nconn; i++)
        if (pl->conn[i]) PQfinish(pl->conn[i]);
    if (pl->wake[0] >= 0) close(pl->wake[0]);
    if (pl->wake[1] >= 0) close(pl->wake[1]);
    pthread_mutex_destroy(&pl->mu);
    free(pl->conn);
    free(pl->busy);
    free(pl);
}

/* Opens nconn connections and starts the lookup thread; NULL with err. */
static pg_lookup_t *pg_lookup_new(const char *conninfo, int nconn, char *err, size_t errlen) {
    pg_lookup_t *pl = calloc(1, sizeof *pl);
    pthread_mutex_init(&pl->mu, NULL);
    pl->wake[0] = pl->wake[1] = -1;
    pl->nconn = nconn;
    pl->conn = calloc((size_t)nconn, sizeof *pl->conn);
    pl->busy = calloc((size_t)nconn, sizeof *pl->busy);
    for (int i = 0; i < nconn; i++) {
        pl->conn[i] = PQconnectdb(conninfo);
        if (PQstatus(pl->conn[i]) != CONNECTION_OK) {
            snprintf(err, errlen, "connect: %s", PQerrorMessage(pl->conn[i]));
            pg_lookup_destroy(pl);
            return NULL;
        }
    }
    if (pipe(pl->wake) != 0) {
        snprintf(err, errlen, "pipe: %s", strerror(errno));
        pg_lookup_destroy(pl);
        return NULL;
    }
    fcntl(pl->wake[0], F_SETFL, O_NONBLOCK);
    fcntl(pl->wake[1], F_SETFL, O_NONBLOCK);
    if (pthread_create(&pl->th, NULL, lookup_main, pl) != 0) {
        snprintf(err, errlen, "cannot start the lookup thread");
        pl->th = 0;
        pg_lookup_destroy(pl);
        return NULL;
    }
    return pl;
}

/* ---- the async function: queue the request, wake the thread ---- */

static int enrich_invoke(void *ctx, const sl_record_t *in, sl_async_result_t *res) {
    pg_lookup_t *pl = ctx;
    enrich_req_t *q = calloc(1, sizeof *q);
    q->res = res;
    q->card = sl_row_i64(&in->row, 0);
    q->amount = sl_row_f64(&in->row, 1);
    q->ts = sl_row_i64(&in->row, 2);
    pthread_mutex_lock(&pl->mu);
    if (pl->tail)
        pl->tail->next = q;
    else
        pl->head = q;
    pl->tail = q;
    pthread_mutex_unlock(&pl->mu);
    if (write(pl->wake[1], "x", 1) < 0) { /* full pipe: the thread is awake anyway */
    }
    return 0;
}

/* txns (sl_datagen_schema) -> enriched (ENRICH_OUT_DDL). */
static sl_stream_t *enrich_with_cards(sl_stream_t *txns, pg_lookup_t *pl, int capacity, int64_t timeout_ms) {
    sl_async_fn_t fn = {.invoke = enrich_invoke, .opts = {.ctx = pl}};
    return sl_uid(sl_async_wait(txns, fn, capacity, timeout_ms, SL_ASYNC_UNORDERED,
                                sl_schema_parse(ENRICH_OUT_DDL, NULL, 0)),
                  "enrich-cards");
}

#ifndef ASYNC_ENRICH_PG_NO_MAIN
int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: %s CONNINFO [COUNT] [PARALLELISM]\n", argv[0]);
        return 2;
    }
    const char *conninfo = argv[1];
    int64_t count = argc > 2 ? atoll(argv[2]) : 10000;
    int p = argc > 3 ? atoi(argv[3]) : 2;
    char err[512];
    if (enrich_setup_cards(conninfo, ENRICH_CARDS, err, sizeof err) < 0) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    pg_lookup_t *pl = pg_lookup_new(conninfo, 4, err, sizeof err);
    if (!pl) {
        fprintf(stderr, "%s\n", err);
        return 1;
    }
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, p);
    sl_datagen_opts_t o = sl_datagen_defaults();
    o.count = count;
    o.cards = ENRICH_CARDS;
    sl_stream_t *s = sl_uid(sl_from_source(env, sl_datagen_source(o), sl_wm_bounded("ts", 100), "transactions"),
                            "transactions");
    s = enrich_with_cards(s, pl, 32, 10000);
    sl_counting_sink_stats_t *stats = NULL;
    sl_sink_to(s, sl_counting_sink(&stats), "count");
    int rc = sl_env_execute(env, "async-enrich-pg");
    if (rc < 0)
        fprintf(stderr, "job failed: %s\n", sl_env_error(env));
    else
        printf("%lld transactions enriched with %lld lookups on 4 connections\n",
               (long long)sl_counting_sink_count(stats), (long long)atomic_load(&pl->lookups));
    sl_env_destroy(env);
    pg_lookup_destroy(pl);
    return rc < 0 ? 1 : 0;
}
#endif
