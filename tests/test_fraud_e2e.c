/* test_fraud_e2e.c — scenarios S1 to S4 end to end, against the real Kafka
 * broker and PostgreSQL server of the ctest fixtures.  The fraud pipeline
 * (examples/fraud_kafka, run as a separate `fraud_kafka` process) reads
 * seeded card transactions from a 12-partition topic (one partition empty,
 * 1% late events a day behind), keeps count and sum per card in 5-minute
 * event-time windows, and writes every window row with its fraud flag to a
 * Kafka topic (exactly-once) and a PostgreSQL table (two-phase commit), late
 * events to a second topic.
 *
 * The expected output is computed here, independently, from the records
 * read back from the input topic: per card and window the count and sum of
 * the transactions that are not late by the watermark rule, flagged as the
 * thresholds given to the job say; the late ones as the late set.
 *
 *   random_kills              kill -9 at random moments, restore from the
 *                             latest checkpoint, over and over, until the
 *                             bounded input is done; outputs compared exactly
 *                             (SLUICE_FRAUD_KILLS=N for a soak: more kills,
 *                             input scaled to match; SLUICE_FRAUD_SEED)
 *   kill_in_each_2pc_window   a fault point in each window of the two-phase
 *                             commit, restore (once at another parallelism)
 *   nothing_visible_before_completion
 *                             read_committed topic and table, watched while
 *                             the job runs, never show more than the commits
 *                             of completed checkpoints
 *   idle_partition_does_not_stall
 *                             unbounded job, one partition without records:
 *                             windows come out; with idleness off they don't
 *   poison_records            skip / dead-letter / fail, with counts that add
 *                             up: records out + skipped + dead-lettered = in
 *   cluster_kills             the same on a cluster of processes (a JobManager,
 *                             TaskManagers with the seeds' placement), kill -9
 *                             of random TaskManagers with replacements
 *                             (SLUICE_FRAUD_CLUSTER_KILLS, default 10)
 *   cluster_kills_s3          the same with the checkpoints in S3 (S3Proxy of the
 *                             `s3` fixture; SLUICE_FRAUD_S3_KILLS, default 3)
 *   ha_jobmanager_and_taskmanager_kills
 *                             three JobManagers with ZooKeeper HA (`zookeeper`
 *                             fixture): kill -9 of a TaskManager after a
 *                             completed checkpoint, then of the leader after
 *                             the next, three times (SLUICE_FRAUD_HA_KILLS);
 *                             output exact, checkpoint ids grow across leaders
 *   cluster_kill_sinks_in_each_2pc_window
 *                             the same fault points in the sinks' TaskManager
 *                             of a cluster: it dies there, a replacement comes
 *   savepoint_upgrade         S5 on a cluster: stop with a savepoint (with and
 *                             without --drain), version 2 with a new stateful
 *                             operator from it at another parallelism
 *
 * Speed: the job is throttled (at most R records/s per source subtask), so
 * "the input cannot be finished before the last kill" is an upper bound on
 * progress that a slow machine only makes safer.  Kills after the end of the
 * bounded input are tested at two fault points (kill_in_each_2pc_window):
 * before the final checkpoint and after it committed. */
#include <dirent.h>
#include <jansson.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>

#include "cluster_util.h"
#include "ha_util.h"
#include "test.h"
#include "test_kafka_util.h"
#include "test_postgres_util.h"

#define WINDOW_MS (5 * 60 * 1000LL)
#define BOUND_MS 5000LL      /* bounded out-of-orderness of the job */
#define COUNT_THRESHOLD 8    /* given to the job explicitly */
#define SUM_THRESHOLD 2500.0
#define PARTITIONS 12
#define IDLE_PARTITION 11
/* A record this deep into its partition is read after every partition has
 * delivered its first records: the Kafka source takes an equal share of
 * each of its partitions per poll (however librdkafka's fetches arrive), so
 * a partition cannot be FIRST_CHUNKS records ahead of one that has not
 * delivered yet unless that one's first fetch is late by the seconds the
 * throttled job needs to read that far.  (Before the source polled its
 * partitions in turn, a fetch arriving a few rounds late let another
 * partition's late transactions in before the watermark had moved.) */
#define FIRST_CHUNKS 400

/* ---- the input, read back, and what it must give ---- */

typedef struct txn {
    int64_t card, ts;
    double amount;
} txn_t;

typedef struct dec {
    int64_t ws, card, count;
    double sum;
    bool flagged;
} dec_t;

typedef struct expect {
    int64_t records;  /* in the topic, poison included */
    int64_t poison;   /* records that are not transactions */
    dec_t *dec;       /* sorted by (ws, card) */
    int64_t ndec;
    txn_t *late;      /* sorted */
    int64_t nlate;
    int64_t max_wm;   /* the watermark once every record is read (non-empty partitions, unbounded) */
    int64_t first_ws; /* the first window of the regular (not late) transactions */
    char **poison_values;
} expect_t;

static const char *bootstrap;
static const char *events;     /* the main input topic */
static expect_t want;          /* of `events` */
static int64_t N = 40000;      /* transactions in `events` */

static int cmp_dec(const void *a, const void *b) {
    const dec_t *x = a, *y = b;
    if (x->ws != y->ws) return x->ws < y->ws ? -1 : 1;
    if (x->card != y->card) return x->card < y->card ? -1 : 1;
    return 0;
}

static int cmp_txn(const void *a, const void *b) {
    const txn_t *x = a, *y = b;
    if (x->ts != y->ts) return x->ts < y->ts ? -1 : 1;
    if (x->card != y->card) return x->card < y->card ? -1 : 1;
    return x->amount < y->amount ? -1 : x->amount > y->amount;
}

static int64_t floor_window(int64_t ts) {
    int64_t r = ts % WINDOW_MS;
    return ts - (r < 0 ? r + WINDOW_MS : r);
}

/* A transaction value as the producer writes it: exactly three fields of
 * the right types. */
static bool parse_txn(const char *v, txn_t *t) {
    json_error_t e;
    json_t *j = json_loads(v, 0, &e);
    bool ok = j && json_is_object(j) && json_object_size(j) == 3 && json_is_integer(json_object_get(j, "card_id")) &&
              json_is_number(json_object_get(j, "amount")) && json_is_integer(json_object_get(j, "ts"));
    if (ok) {
        t->card = json_integer_value(json_object_get(j, "card_id"));
        t->amount = json_number_value(json_object_get(j, "amount"));
        t->ts = json_integer_value(json_object_get(j, "ts"));
    }
    json_decref(j);
    return ok;
}

static void expect_free(expect_t *x) {
    free(x->dec);
    free(x->late);
    for (int64_t i = 0; i < x->poison; i++) free(x->poison_values[i]);
    free(x->poison_values);
    memset(x, 0, sizeof *x);
}

/* Computes what the job must output for `topic`, from its records.  Every
 * transaction must be unambiguous under the watermark rule (the watermark
 * is the minimum over partitions of max_ts - 5 s - 1):
 *   on time  — its window's last millisecond is after max_ts - 5 s - 1 of
 *              its own partition before it (which bounds the watermark
 *              while the partition is active), or
 *   late     — its window ended at or before L = min over the non-empty
 *              partitions of (their first ts - 5 s - 1), which every
 *              partition's watermark has passed once it delivered a record,
 *              and it lies FIRST_CHUNKS deep into its partition.
 * Returns false (and says why) for an input that is neither. */
static bool compute_expected(const char *topic, expect_t *x) {
    memset(x, 0, sizeof *x);
    kt_recs_t rs = {0};
    if (kt_read_all(topic, true, 60000, &rs) != 0) return false;
    /* records arrive per partition in offset order */
    int64_t first_ts[PARTITIONS], max_ts[PARTITIONS], seen[PARTITIONS];
    for (int p = 0; p < PARTITIONS; p++) first_ts[p] = max_ts[p] = INT64_MIN, seen[p] = 0;
    txn_t *t = calloc((size_t)rs.n + 1, sizeof *t);
    int32_t *part = calloc((size_t)rs.n + 1, sizeof *part);
    int64_t *off = calloc((size_t)rs.n + 1, sizeof *off), *before = calloc((size_t)rs.n + 1, sizeof *before);
    bool *ok = calloc((size_t)rs.n + 1, sizeof *ok);
    x->poison_values = calloc((size_t)rs.n + 1, sizeof *x->poison_values);
    /* sort record indexes by (partition, offset) */
    int64_t *idx = calloc((size_t)rs.n + 1, sizeof *idx);
    int64_t k = 0;
    for (int p = 0; p < PARTITIONS; p++)
        for (int64_t i = 0; i < rs.n; i++)
            if (rs.r[i].partition == p) idx[k++] = i;
    x->records = rs.n;
    bool good = k == rs.n;
    if (!good) fprintf(stderr, "  %s: records outside partitions 0..%d\n", topic, PARTITIONS - 1);
    for (int64_t j = 0; j < k; j++) {
        const kt_rec_t *r = &rs.r[idx[j]];
        part[j] = r->partition;
        off[j] = seen[r->partition]++;
        if (!(ok[j] = parse_txn(r->value, &t[j]))) {
            x->poison_values[x->poison++] = strdup(r->value);
            continue;
        }
        int p = r->partition;
        before[j] = max_ts[p];
        if (first_ts[p] == INT64_MIN) first_ts[p] = t[j].ts;
        if (t[j].ts > max_ts[p]) max_ts[p] = t[j].ts;
    }
    int64_t L = INT64_MAX;
    x->max_wm = INT64_MAX;
    x->first_ws = INT64_MAX;
    for (int p = 0; p < PARTITIONS; p++)
        if (first_ts[p] != INT64_MIN) {
            if (floor_window(first_ts[p]) < x->first_ws) x->first_ws = floor_window(first_ts[p]);
            if (first_ts[p] - BOUND_MS - 1 < L) L = first_ts[p] - BOUND_MS - 1;
            if (max_ts[p] - BOUND_MS - 1 < x->max_wm) x->max_wm = max_ts[p] - BOUND_MS - 1;
        }
    dec_t *d = calloc((size_t)rs.n + 1, sizeof *d);
    int64_t nd = 0, ambiguous = 0;
    x->late = calloc((size_t)rs.n + 1, sizeof *x->late);
    for (int64_t j = 0; j < k; j++) {
        if (!ok[j]) continue;
        int64_t ws = floor_window(t[j].ts), wmax = ws + WINDOW_MS - 1;
        bool on_time = before[j] == INT64_MIN || wmax > before[j] - BOUND_MS - 1;
        bool late = wmax <= L && off[j] >= FIRST_CHUNKS;
        if (on_time == late) {
            if (!ambiguous++)
                fprintf(stderr, "  %s: partition %d offset %lld (ts %lld) is neither surely on time nor surely late\n",
                        topic, part[j], (long long)off[j], (long long)t[j].ts);
            continue;
        }
        if (late) {
            x->late[x->nlate++] = t[j];
            continue;
        }
        d[nd++] = (dec_t){ws, t[j].card, 1, t[j].amount, false};
    }
    /* fold per (window, card) */
    qsort(d, (size_t)nd, sizeof *d, cmp_dec);
    int64_t m = 0;
    for (int64_t i = 0; i < nd; i++) {
        if (m > 0 && cmp_dec(&d[m - 1], &d[i]) == 0) {
            d[m - 1].count++;
            d[m - 1].sum += d[i].sum;
        } else {
            d[m++] = d[i];
        }
    }
    for (int64_t i = 0; i < m; i++) d[i].flagged = d[i].count >= COUNT_THRESHOLD || d[i].sum >= SUM_THRESHOLD;
    x->dec = d;
    x->ndec = m;
    qsort(x->late, (size_t)x->nlate, sizeof *x->late, cmp_txn);
    free(t);
    free(part);
    free(off);
    free(before);
    free(ok);
    free(idx);
    kt_recs_free(&rs);
    fprintf(stderr, "  input %s: %lld records, %lld poison, %lld window rows expected, %lld late, %lld ambiguous\n",
            topic, (long long)x->records, (long long)x->poison, (long long)x->ndec, (long long)x->nlate,
            (long long)ambiguous);
    return good && ambiguous == 0;
}

/* ---- reading the outputs ---- */

static int64_t parse_iso_ms(const char *s) {
    int y, mo, d, h, mi, se, ms;
    if (!s || sscanf(s, "%d-%d-%dT%d:%d:%d.%dZ", &y, &mo, &d, &h, &mi, &se, &ms) != 7) return INT64_MIN;
    struct tm tm = {0};
    tm.tm_year = y - 1900;
    tm.tm_mon = mo - 1;
    tm.tm_mday = d;
    tm.tm_hour = h;
    tm.tm_min = mi;
    tm.tm_sec = se;
    return (int64_t)timegm(&tm) * 1000 + ms;
}

/* The decisions topic, read_committed.  -1 when unreadable; malformed
 * records count in *bad. */
static int64_t read_decisions(const char *topic, dec_t **out, int64_t *bad) {
    kt_recs_t rs = {0};
    *bad = 0;
    *out = NULL;
    if (kt_read_all(topic, true, 60000, &rs) != 0) return -1;
    dec_t *d = calloc((size_t)rs.n + 1, sizeof *d);
    int64_t n = 0;
    for (int64_t i = 0; i < rs.n; i++) {
        json_error_t e;
        json_t *j = json_loads(rs.r[i].value, 0, &e);
        dec_t v;
        v.ws = parse_iso_ms(json_string_value(json_object_get(j, "window_start")));
        int64_t we = parse_iso_ms(json_string_value(json_object_get(j, "window_end")));
        bool ok = j && v.ws != INT64_MIN && we == v.ws + WINDOW_MS && json_is_integer(json_object_get(j, "card_id")) &&
                  json_is_integer(json_object_get(j, "txn_count")) && json_is_number(json_object_get(j, "total_amount")) &&
                  json_is_boolean(json_object_get(j, "flagged"));
        if (ok) {
            v.card = json_integer_value(json_object_get(j, "card_id"));
            v.count = json_integer_value(json_object_get(j, "txn_count"));
            v.sum = json_number_value(json_object_get(j, "total_amount"));
            v.flagged = json_is_true(json_object_get(j, "flagged"));
            /* the record key is the card */
            ok = rs.r[i].key && atoll(rs.r[i].key) == v.card;
        }
        json_decref(j);
        if (ok) d[n++] = v;
        else (*bad)++;
    }
    kt_recs_free(&rs);
    qsort(d, (size_t)n, sizeof *d, cmp_dec);
    *out = d;
    return n;
}

static int64_t read_table(PGconn *c, const char *table, dec_t **out) {
    char sql[400];
    snprintf(sql, sizeof sql,
             "SELECT (extract(epoch FROM window_start) * 1000)::bigint, (extract(epoch FROM window_end) * 1000)::bigint, "
             "card_id, txn_count, total_amount::text, flagged FROM %s",
             table);
    PGresult *r = PQexec(c, sql);
    *out = NULL;
    if (PQresultStatus(r) != PGRES_TUPLES_OK) {
        fprintf(stderr, "  %s: %s", table, PQresultErrorMessage(r));
        PQclear(r);
        return -1;
    }
    int64_t n = PQntuples(r);
    dec_t *d = calloc((size_t)n + 1, sizeof *d);
    for (int64_t i = 0; i < n; i++) {
        d[i].ws = atoll(PQgetvalue(r, (int)i, 0));
        d[i].card = atoll(PQgetvalue(r, (int)i, 2));
        d[i].count = atoll(PQgetvalue(r, (int)i, 3));
        d[i].sum = strtod(PQgetvalue(r, (int)i, 4), NULL);
        d[i].flagged = PQgetvalue(r, (int)i, 5)[0] == 't';
        if (atoll(PQgetvalue(r, (int)i, 1)) != d[i].ws + WINDOW_MS) d[i].count = -1; /* a wrong window end */
    }
    PQclear(r);
    qsort(d, (size_t)n, sizeof *d, cmp_dec);
    *out = d;
    return n;
}

/* got vs want[0..nwant) (both sorted): duplicates, missing, wrong values. */
static bool same_decisions(const char *what, const dec_t *got, int64_t ngot, const dec_t *w, int64_t nwant) {
    int64_t i = 0, j = 0, dup = 0, missing = 0, extra = 0, wrong = 0;
    while (i < nwant || j < ngot) {
        if (j > 0 && j < ngot && cmp_dec(&got[j - 1], &got[j]) == 0) {
            dup++;
            j++;
            continue;
        }
        int c = i == nwant ? 1 : j == ngot ? -1 : cmp_dec(&w[i], &got[j]);
        if (c == 0) {
            if (w[i].count != got[j].count || w[i].sum != got[j].sum || w[i].flagged != got[j].flagged) {
                if (!wrong)
                    fprintf(stderr, "    %s: card %lld window %lld: %lld / %.2f / %d, expected %lld / %.2f / %d\n", what,
                            (long long)w[i].card, (long long)w[i].ws, (long long)got[j].count, got[j].sum,
                            got[j].flagged, (long long)w[i].count, w[i].sum, w[i].flagged);
                wrong++;
            }
            i++;
            j++;
        } else if (c < 0) {
            if (!missing)
                fprintf(stderr, "    %s: missing card %lld window %lld\n", what, (long long)w[i].card, (long long)w[i].ws);
            missing++;
            i++;
        } else {
            if (!extra)
                fprintf(stderr, "    %s: unexpected card %lld window %lld\n", what, (long long)got[j].card,
                        (long long)got[j].ws);
            extra++;
            j++;
        }
    }
    fprintf(stderr, "    %s: %lld rows, %lld expected: %lld duplicates, %lld missing, %lld unexpected, %lld wrong\n", what,
            (long long)ngot, (long long)nwant, (long long)dup, (long long)missing, (long long)extra, (long long)wrong);
    return !dup && !missing && !extra && !wrong;
}

/* How many rows of a (sorted, no duplicates expected) are in b (sorted)
 * with the same values; a duplicate in a counts as not contained. */
static int64_t contained(const dec_t *a, int64_t na, const dec_t *b, int64_t nb) {
    int64_t i = 0, j = 0, n = 0;
    while (i < na && j < nb) {
        int c = cmp_dec(&a[i], &b[j]);
        if (c < 0) {
            i++;
        } else if (c > 0) {
            j++;
        } else {
            if (a[i].count == b[j].count && a[i].sum == b[j].sum && a[i].flagged == b[j].flagged) n++;
            i++;
            j++;
        }
    }
    return n;
}

static bool same_late(const char *topic, const expect_t *x) {
    kt_recs_t rs = {0};
    if (kt_read_all(topic, true, 60000, &rs) != 0) return false;
    txn_t *got = calloc((size_t)rs.n + 1, sizeof *got);
    int64_t n = 0, bad = 0;
    for (int64_t i = 0; i < rs.n; i++) {
        json_error_t e;
        json_t *j = json_loads(rs.r[i].value, 0, &e);
        txn_t t = {json_integer_value(json_object_get(j, "card_id")),
                   parse_iso_ms(json_string_value(json_object_get(j, "ts"))),
                   json_number_value(json_object_get(j, "amount"))};
        if (j && t.ts != INT64_MIN) got[n++] = t;
        else bad++;
        json_decref(j);
    }
    kt_recs_free(&rs);
    qsort(got, (size_t)n, sizeof *got, cmp_txn);
    bool same = n == x->nlate && !bad;
    for (int64_t i = 0; same && i < n; i++) same = cmp_txn(&got[i], &x->late[i]) == 0;
    fprintf(stderr, "    %s: %lld late transactions, %lld expected, %lld malformed: %s\n", topic, (long long)n,
            (long long)x->nlate, (long long)bad, same ? "the same" : "DIFFERENT");
    free(got);
    return same;
}

/* Both outputs and the late topic equal the expected sets; no prepared
 * transaction of the job is left. */
static bool verify_all(const char *decisions, const char *late, const char *table, const char *job, const expect_t *x) {
    dec_t *got;
    int64_t bad;
    int64_t n = read_decisions(decisions, &got, &bad);
    bool ok = n >= 0 && bad == 0 && same_decisions(decisions, got, n, x->dec, x->ndec);
    if (bad) fprintf(stderr, "    %s: %lld malformed records\n", decisions, (long long)bad);
    free(got);
    PGconn *c = pgt_connect();
    n = read_table(c, table, &got);
    ok = n >= 0 && same_decisions(table, got, n, x->dec, x->ndec) && ok;
    free(got);
    char prefix[128];
    snprintf(prefix, sizeof prefix, "sl:%s:", job);
    long long prepared = pgt_prepared(c, prefix), all = pgt_scalar(c, "SELECT count(*) FROM pg_prepared_xacts");
    fprintf(stderr, "    pg_prepared_xacts: %lld of the job, %lld in all\n", prepared, all);
    ok = ok && prepared == 0;
    PQfinish(c);
    if (late) ok = same_late(late, x) && ok;
    return ok;
}

/* ---- the job process ---- */

typedef struct run {
    char decisions[128], late[140], dlq[140], table[64], job[64], ckpt[1024], out[1100], log[1100];
    const char *input;
    int par;
    int64_t interval;
    double throttle;
    int64_t idle_timeout;
    bool bounded;
    const char *on_error;
    const char *fault;
    bool pg;
    int retain;
    const char *stderr_file; /* the job's stderr goes here (NULL: the test's) */
} run_t;

static void run_init(run_t *r, const char *name) {
    memset(r, 0, sizeof *r);
    snprintf(r->decisions, sizeof r->decisions, "%s", kt_name(name));
    snprintf(r->late, sizeof r->late, "%s-late", r->decisions);
    snprintf(r->dlq, sizeof r->dlq, "%s-dlq", r->decisions);
    snprintf(r->table, sizeof r->table, "fd_%s_%d", name, (int)getpid());
    for (char *p = r->table; *p; p++)
        if (*p == '-') *p = '_';
    snprintf(r->job, sizeof r->job, "%s-%d", name, (int)getpid());
    snprintf(r->ckpt, sizeof r->ckpt, "%s/%s-ckpt", sl_test_tmpdir(), r->job);
    snprintf(r->out, sizeof r->out, "%s/%s.out", sl_test_tmpdir(), r->job);
    snprintf(r->log, sizeof r->log, "%s/%s.commits", sl_test_tmpdir(), r->job);
    r->input = events;
    r->par = 2;
    r->interval = 1000;
    r->throttle = 2000;
    r->idle_timeout = 10000;
    r->bounded = true;
    r->on_error = "fail";
    r->pg = true;
    r->retain = 2;
    kt_create_topic(r->decisions, 3);
    kt_create_topic(r->late, 1);
    kt_create_topic(r->dlq, 1);
    PGconn *c = pgt_connect();
    pgt_exec(c, "DROP TABLE IF EXISTS %s", r->table);
    PQfinish(c);
}

static pid_t spawn(const run_t *r, bool restore) {
    char par[16], interval[32], throttle[32], idle[32], retain[16], ct[16], st[32];
    snprintf(par, sizeof par, "%d", r->par);
    snprintf(interval, sizeof interval, "%lld", (long long)r->interval);
    snprintf(throttle, sizeof throttle, "%.0f", r->throttle);
    snprintf(idle, sizeof idle, "%lld", (long long)r->idle_timeout);
    snprintf(retain, sizeof retain, "%d", r->retain);
    snprintf(ct, sizeof ct, "%d", COUNT_THRESHOLD);
    snprintf(st, sizeof st, "%.2f", SUM_THRESHOLD);
    const char *argv[64];
    int n = 0;
    const char *fixed[] = {SLUICE_FRAUD_KAFKA, "run", "--bootstrap", bootstrap, "--events-topic", r->input,
                           "--decisions-topic", r->decisions, "--late-topic", r->late, "--table", r->table,
                           "--job-id", r->job, "-p", par, "--checkpoint-interval", interval, "--checkpoint-dir",
                           r->ckpt, "--retain", retain, "--restarts", "0", "--throttle", throttle, "--fetch-kb", "8",
                           "--idle-timeout", idle, "--count-threshold", ct, "--sum-threshold", st, "--on-error",
                           r->on_error, "--commit-log", r->log, "--dead-letter-topic", r->dlq};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) argv[n++] = fixed[i];
    if (r->pg) {
        argv[n++] = "--conninfo";
        argv[n++] = pgt_conninfo();
    }
    if (r->bounded) argv[n++] = "--bounded";
    if (restore) argv[n++] = "--restore";
    argv[n] = NULL;
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        if (r->fault)
            setenv("SLUICE_FAULT_AT", r->fault, 1);
        else
            unsetenv("SLUICE_FAULT_AT");
        if (!freopen(r->out, "w", stdout)) _exit(126);
        if (r->stderr_file && !freopen(r->stderr_file, "w", stderr)) _exit(126);
        execv(SLUICE_FRAUD_KAFKA, (char *const *)argv);
        _exit(127);
    }
    return pid;
}

/* Exit status, or -9 when killed by SIGKILL. */
static int wait_for(pid_t pid) {
    int st;
    waitpid(pid, &st, 0);
    if (WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL) return -9;
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* A value from the job's summary (key=value lines on stdout); -1 if absent. */
static int64_t summary(const run_t *r, const char *key) {
    FILE *f = fopen(r->out, "r");
    if (!f) return -1;
    char line[256];
    int64_t v = -1;
    size_t kl = strlen(key);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, key, kl) == 0 && line[kl] == '=') v = atoll(line + kl + 1);
    fclose(f);
    return v;
}

static void sleep_ms(int64_t ms) { kt_sleep_ms((int)ms); }

/* The newest complete checkpoint in the job's checkpoint directory (0: none). */
static int64_t newest_checkpoint(const run_t *r) {
    char dir[1200];
    snprintf(dir, sizeof dir, "%s/fraud-kafka", r->ckpt);
    DIR *d = opendir(dir);
    if (!d) return 0;
    int64_t best = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strncmp(e->d_name, "chk-", 4) != 0) continue;
        char meta[1600];
        struct stat st;
        snprintf(meta, sizeof meta, "%s/%s/_metadata", dir, e->d_name);
        int64_t id = atoll(e->d_name + 4);
        if (stat(meta, &st) == 0 && id > best) best = id;
    }
    closedir(d);
    return best;
}

/* ---- a: random kills ---- */

TEST(random_kills) {
    run_t r;
    run_init(&r, "fraud-random");
    unsigned seed = getenv("SLUICE_FRAUD_SEED") ? (unsigned)atoi(getenv("SLUICE_FRAUD_SEED")) : (unsigned)time(NULL);
    int kills = getenv("SLUICE_FRAUD_KILLS") ? atoi(getenv("SLUICE_FRAUD_KILLS")) : 6;
    srand(seed);
    /* the job can read at most throttle records/s per source subtask, so in
     * the sum of the killed runs' times it cannot reach the end of the
     * smallest subtask's share (5 of 11 partitions at p=2): no kill lands
     * after the end of the input */
    const int min_ms = 2000, max_ms = 4000;
    r.throttle = 600;
    double budget = (double)kills * max_ms / 1000.0 * r.throttle;
    double share = (double)N * 5.0 / 11.0;
    fprintf(stderr, "  seed %u, %d kills, %.0f records per subtask at most before the last, of >= %.0f\n", seed, kills,
            budget, share);
    CHECK(budget < share * 0.9);
    int killed = 0, st = 0, restored = 0;
    int64_t t0 = sl_mono_ns();
    char resumed[1024] = "";
    for (int round = 0; round < kills + 5; round++) {
        if (round > 0) /* where this run resumes */
            snprintf(resumed + strlen(resumed), sizeof resumed - strlen(resumed), " %lld",
                     (long long)newest_checkpoint(&r));
        pid_t pid = spawn(&r, round > 0);
        if (killed < kills) {
            sleep_ms(min_ms + rand() % (max_ms - min_ms));
            kill(pid, SIGKILL);
        }
        st = wait_for(pid);
        if (st == -9) {
            killed++;
            continue;
        }
        restored = (int)summary(&r, "restored");
        break;
    }
    fprintf(stderr, "  killed %d times, then finished with status %d (restored %d) after %.1f s; restarts resumed from "
                    "checkpoints%s\n",
            killed, st, restored, (double)(sl_mono_ns() - t0) / 1e9, resumed);
    CHECK_EQ(st, 0);
    CHECK_EQ(killed, kills);
    CHECK(restored == 1); /* the last run resumed from a checkpoint */
    CHECK(verify_all(r.decisions, r.late, r.table, r.job, &want));
}

/* ---- b: a kill in each window of the two-phase commit ---- */

TEST(kill_in_each_2pc_window) {
    /* fault points count passes over every sink subtask of the process:
     * 3 sinks (decisions to Kafka and PostgreSQL, late to Kafka) x 2 */
    static const struct {
        const char *name, *fault;
        int par_after;
        bool precommitted; /* a prepared transaction must be left */
    } sc[] = {
        {"before-precommit", "sink.before-precommit:19", 2, false},
        {"after-precommit", "sink.after-precommit:24", 2, true}, /* the last sink of checkpoint 4 */
        {"completed-not-committed", "checkpoint.completed-before-notify:3", 3, true}, /* restored at p=3 */
        {"during-commit", "sink.during-commit:5", 2, false},
        {"after-end-of-data", "task.after-end-of-data:1", 2, false},       /* before the final checkpoint */
        {"after-final-checkpoint", "task.after-final-checkpoint:1", 3, false}, /* committed, not ended */
    };
    const char *only = getenv("SLUICE_FRAUD_ONLY");
    for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++) {
        if (only && !strstr(sc[i].name, only)) continue;
        run_t r;
        run_init(&r, sc[i].name);
        r.fault = sc[i].fault;
        int st = wait_for(spawn(&r, false));
        PGconn *c = pgt_connect();
        char prefix[128];
        snprintf(prefix, sizeof prefix, "sl:%s:", r.job);
        long long prepared = pgt_prepared(c, prefix);
        PQfinish(c);
        fprintf(stderr, "  %s (%s): %s, %lld prepared transactions left, newest checkpoint %lld\n", sc[i].name,
                sc[i].fault, st == -9 ? "killed there" : "NOT KILLED", prepared, (long long)newest_checkpoint(&r));
        CHECK_EQ(st, -9);
        if (sc[i].precommitted) CHECK(prepared >= 1);
        r.fault = NULL;
        r.par = sc[i].par_after;
        st = wait_for(spawn(&r, true));
        CHECK_EQ(st, 0);
        CHECK_EQ(summary(&r, "restored"), 1);
        CHECK(verify_all(r.decisions, r.late, r.table, r.job, &want));
    }
}

/* ---- c: nothing visible before the checkpoint that covers it ---- */

typedef struct commits {
    int64_t written[2][64];   /* per sink (0 kafka, 1 postgres) and subtask: rows handed to the sink */
    int64_t upper[2][64];     /* rows a commit that has begun may make visible */
    int64_t lower[2][64];     /* rows of commits that returned */
    int64_t max_id;           /* newest checkpoint a commit was called for */
} commits_t;

static void read_commits(const run_t *r, commits_t *c) {
    memset(c, 0, sizeof *c);
    FILE *f = fopen(r->log, "r");
    if (!f) return;
    char sink[32], what[32];
    long long id, rows;
    int sub;
    while (fscanf(f, "%31s %31s %lld %d %lld", sink, what, &id, &sub, &rows) == 5) {
        int s = strcmp(sink, "postgres") == 0;
        if (sub < 0 || sub >= 64) continue;
        if (strcmp(what, "written") == 0 || strcmp(what, "precommit") == 0) {
            if (rows > c->written[s][sub]) c->written[s][sub] = rows;
        } else if (strcmp(what, "commit") == 0) {
            if (rows > c->upper[s][sub]) c->upper[s][sub] = rows;
            if (id > c->max_id) c->max_id = id;
        } else if (strcmp(what, "committed") == 0) {
            if (rows > c->lower[s][sub]) c->lower[s][sub] = rows;
        } else if (strcmp(what, "finish") == 0) { /* end of input: everything may become visible */
            c->upper[s][sub] = rows;
            c->max_id = INT64_MAX;
        }
    }
    fclose(f);
}

static int64_t total(const int64_t v[64]) {
    int64_t t = 0;
    for (int i = 0; i < 64; i++) t += v[i];
    return t;
}

TEST(nothing_visible_before_completion) {
    run_t r;
    run_init(&r, "fraud-visibility");
    r.interval = 2500; /* long: much is written and invisible between checkpoints */
    r.throttle = 1500;
    r.retain = 1000;
    pid_t pid = spawn(&r, false);
    PGconn *c = pgt_connect();
    int samples = 0, hidden = 0, violations = 0, grew = 0;
    int64_t last_vis = 0, newest_seen = 0;
    int st = -1;
    for (;;) {
        int wst;
        pid_t done = waitpid(pid, &wst, WNOHANG);
        commits_t before, after;
        read_commits(&r, &before);
        kt_recs_t rs = {0};
        int rc = kt_read_all(r.decisions, true, 60000, &rs);
        int64_t vk = rs.n;
        kt_recs_free(&rs);
        /* the sink creates the table when it opens */
        long long vp = pgt_scalar(c, "SELECT count(*) FROM pg_class WHERE relname = '%s'", r.table) == 1
                           ? pgt_scalar(c, "SELECT count(*) FROM %s", r.table)
                           : 0;
        read_commits(&r, &after);
        int64_t ck = newest_checkpoint(&r);
        if (ck > newest_seen) newest_seen = ck;
        samples++;
        /* visible <= what commits of completed checkpoints may show */
        if (rc != 0 || vk > total(after.upper[0]) || vp > total(after.upper[1]) ||
            (after.max_id != INT64_MAX && after.max_id > newest_seen)) {
            if (!violations++)
                fprintf(stderr, "  sample %d: topic %lld visible (commits allow %lld), table %lld (allow %lld), commit "
                                "for checkpoint %lld, newest complete checkpoint %lld\n",
                        samples, (long long)vk, (long long)total(after.upper[0]), vp,
                        (long long)total(after.upper[1]), (long long)after.max_id, (long long)newest_seen);
        }
        /* rows were handed to the sinks and not visible */
        if (total(before.written[0]) > vk && total(before.written[1]) > vp) hidden++;
        if (vk > last_vis) grew++;
        last_vis = vk;
        if (done == pid) {
            st = WIFEXITED(wst) ? WEXITSTATUS(wst) : -1;
            break;
        }
        sleep_ms(100);
    }
    PQfinish(c);
    fprintf(stderr, "  %d samples: %d violations, %d with rows pre-committed or written but invisible, visible grew %d "
                    "times, %lld checkpoints\n",
            samples, violations, hidden, grew, (long long)summary(&r, "checkpoints"));
    CHECK_EQ(st, 0);
    CHECK_EQ(violations, 0);
    CHECK(samples >= 5);
    CHECK(hidden >= 1);
    CHECK(grew >= 2); /* results became visible in steps, checkpoint by checkpoint */
    CHECK(verify_all(r.decisions, r.late, r.table, r.job, &want));
}

/* ---- d: idle partition, poison records ---- */

TEST(idle_partition_does_not_stall) {
    /* unbounded: partition 11 never gets a record.  With idleness the
     * watermark follows the other partitions and every window that ends
     * before their final watermark comes out while the job runs. */
    int64_t n_want = 0;
    for (int64_t i = 0; i < want.ndec; i++)
        if (want.dec[i].ws + WINDOW_MS - 1 <= want.max_wm) n_want++;
    dec_t *sub = calloc((size_t)n_want + 1, sizeof *sub);
    int64_t k = 0;
    for (int64_t i = 0; i < want.ndec; i++)
        if (want.dec[i].ws + WINDOW_MS - 1 <= want.max_wm) sub[k++] = want.dec[i];
    run_t r;
    run_init(&r, "fraud-idle");
    r.bounded = false;
    r.pg = false;
    r.throttle = 10000;
    r.idle_timeout = 2000;
    pid_t pid = spawn(&r, false);
    dec_t *got = NULL;
    int64_t n = 0, bad = 0, missing = n_want;
    int64_t t0 = sl_mono_ns();
    while ((sl_mono_ns() - t0) / 1000000000 < 180) {
        free(got);
        n = read_decisions(r.decisions, &got, &bad);
        missing = n_want - contained(sub, n_want, got, n);
        if (missing == 0 || waitpid(pid, NULL, WNOHANG) == pid) break;
        sleep_ms(500);
    }
    fprintf(stderr, "  with idleness: %lld window rows out after %.1f s while the job runs, %lld of the %lld that end "
                    "before the final watermark missing\n",
            (long long)n, (double)(sl_mono_ns() - t0) / 1e9, (long long)missing, (long long)n_want);
    kill(pid, SIGKILL);
    int st = wait_for(pid);
    CHECK_EQ(st, -9); /* it was still running */
    /* every row out is a complete, correct window row (windows may fire
     * beyond the final watermark once partitions that are done go idle).
     * Rows of windows before the regular ones are left out: until the
     * empty partition is idle it holds the watermark at its minimum, so
     * whether a late transaction a day behind is dropped depends on how
     * much was read in that time (lateness is checked by the other tests) */
    int64_t early = 0;
    while (early < n && got[early].ws < want.first_ws) early++;
    int64_t wrong = (n - early) - contained(got + early, n - early, want.dec, want.ndec);
    free(got);
    free(sub);
    CHECK(n_want > 1000);
    CHECK_EQ(bad, 0);
    CHECK_EQ(missing, 0);
    CHECK_EQ(wrong, 0);

    /* without idleness the empty partition holds the watermark at its
     * start: after the whole input is read and checkpointed (the group's
     * committed offsets, written at checkpoints, reach the end), nothing */
    run_t q;
    run_init(&q, "fraud-noidle");
    q.bounded = false;
    q.pg = false;
    q.throttle = 20000;
    q.idle_timeout = 0;
    pid = spawn(&q, false);
    t0 = sl_mono_ns();
    int64_t ck_all_read = -1;
    while ((sl_mono_ns() - t0) / 1000000000 < 120) {
        /* read everything: the checkpoint after the last record */
        int64_t ck = newest_checkpoint(&q);
        if (ck_all_read < 0) {
            /* committed offsets of the job's group == end offsets */
            rd_kafka_t *rk = kt_admin();
            rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(PARTITIONS);
            for (int p = 0; p < PARTITIONS; p++) rd_kafka_topic_partition_list_add(l, q.input, p);
            char errs[512];
            rd_kafka_conf_t *cc = rd_kafka_conf_new();
            rd_kafka_conf_set(cc, "bootstrap.servers", bootstrap, errs, sizeof errs);
            rd_kafka_conf_set(cc, "group.id", q.job, errs, sizeof errs);
            rd_kafka_t *cons = rd_kafka_new(RD_KAFKA_CONSUMER, cc, errs, sizeof errs);
            bool all = cons && rd_kafka_committed(cons, l, 10000) == 0;
            for (int p = 0; all && p < PARTITIONS; p++) {
                int64_t lo, hi;
                all = rd_kafka_query_watermark_offsets(cons, q.input, p, &lo, &hi, 10000) == 0 &&
                      (hi == 0 || l->elems[p].offset == hi);
            }
            if (cons) rd_kafka_destroy(cons);
            rd_kafka_topic_partition_list_destroy(l);
            rd_kafka_destroy(rk);
            if (all) ck_all_read = ck;
        }
        if (ck_all_read >= 0 && ck >= ck_all_read + 3) break;
        sleep_ms(500);
    }
    kt_recs_t rs = {0};
    int rc = kt_read_all(q.decisions, true, 60000, &rs);
    int64_t visible = rs.n;
    kt_recs_free(&rs);
    kill(pid, SIGKILL);
    st = wait_for(pid);
    fprintf(stderr, "  without idleness: all input read by checkpoint %lld, newest %lld: %lld window rows out\n",
            (long long)ck_all_read, (long long)newest_checkpoint(&q), (long long)visible);
    CHECK_EQ(st, -9);
    CHECK(ck_all_read >= 0);
    CHECK_EQ(rc, 0);
    CHECK_EQ(visible, 0);
}

TEST(poison_records) {
    const char *input = kt_name("fraud-poison-in");
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "'%s' produce --bootstrap '%s' --topic '%s' --events 6000 --poison 9 --late-per-mille 0 --seed 7 >/dev/null",
             SLUICE_FRAUD_KAFKA, bootstrap, input);
    CHECK_EQ(system(cmd), 0);
    expect_t x;
    CHECK(compute_expected(input, &x));
    CHECK_EQ(x.poison, 9);
    CHECK_EQ(x.records, 6009);
    /* skip: counted */
    run_t r;
    run_init(&r, "fraud-skip");
    r.input = input;
    r.on_error = "skip";
    r.throttle = 0;
    CHECK_EQ(wait_for(spawn(&r, false)), 0);
    int64_t out = summary(&r, "records_out"), skipped = summary(&r, "skipped");
    fprintf(stderr, "  skip: %lld in = %lld out + %lld skipped\n", (long long)x.records, (long long)out,
            (long long)skipped);
    CHECK_EQ(out + skipped, x.records);
    CHECK_EQ(skipped, x.poison);
    CHECK(verify_all(r.decisions, r.late, r.table, r.job, &x));
    /* dead-letter: the raw records go to the dead-letter topic */
    run_t d;
    run_init(&d, "fraud-dlq");
    d.input = input;
    d.on_error = "dead-letter";
    d.throttle = 0;
    CHECK_EQ(wait_for(spawn(&d, false)), 0);
    kt_recs_t rs = {0};
    CHECK_EQ(kt_read_all(d.late, true, 60000, &rs), 0);
    int64_t late_n = rs.n;
    kt_recs_free(&rs);
    CHECK_EQ(late_n, 0); /* no late events in this input */
    CHECK_EQ(kt_read_all(d.dlq, false, 60000, &rs), 0);
    int64_t dead = rs.n, matched = 0, with_error = 0;
    for (int64_t i = 0; i < rs.n; i++) {
        for (int64_t j = 0; j < x.poison; j++)
            if (strcmp(rs.r[i].value, x.poison_values[j]) == 0) {
                matched++;
                break;
            }
        if (rs.r[i].error_header && strstr(rs.r[i].error_header, input)) with_error++;
    }
    kt_recs_free(&rs);
    out = summary(&d, "records_out");
    skipped = summary(&d, "skipped");
    fprintf(stderr, "  dead-letter: %lld in = %lld out + %lld skipped + %lld dead-lettered (%lld are the poison records, "
                    "%lld name the input)\n",
            (long long)x.records, (long long)out, (long long)skipped, (long long)dead, (long long)matched,
            (long long)with_error);
    CHECK_EQ(out + skipped + dead, x.records);
    CHECK_EQ(dead, x.poison);
    CHECK_EQ(matched, x.poison);
    CHECK_EQ(with_error, x.poison);
    CHECK(verify_all(d.decisions, NULL, d.table, d.job, &x));
    /* fail: the job stops, naming the record */
    run_t f;
    run_init(&f, "fraud-fail");
    f.input = input;
    f.throttle = 0;
    f.pg = false;
    char errfile[1200], msg[2048] = "";
    snprintf(errfile, sizeof errfile, "%s.err", f.out);
    f.stderr_file = errfile;
    CHECK_EQ(wait_for(spawn(&f, false)), 1);
    FILE *ef = fopen(errfile, "r");
    CHECK(ef != NULL);
    size_t got = fread(msg, 1, sizeof msg - 1, ef);
    msg[got] = 0;
    fclose(ef);
    fprintf(stderr, "  fail: %s", strstr(msg, "fraud_kafka:") ? strstr(msg, "fraud_kafka:") : msg);
    CHECK_CONTAINS(msg, input);
    CHECK_CONTAINS(msg, "partition");
    CHECK_CONTAINS(msg, "offset");
    expect_free(&x);
}


/* ---- f: S1-S4 on a cluster ---- */

/* The arguments of fraud_kafka_job.so for run r on a cluster: the seeds'
 * three slot sharing groups, restarts without limit. */
static void cluster_job_args(const run_t *r, char *args, size_t cap) {
    snprintf(args, cap,
             "--bootstrap '%s' --events-topic '%s' --decisions-topic '%s' --late-topic '%s' --table '%s' "
             "--job-id '%s' -p 2 --checkpoint-interval %lld --checkpoint-dir '%s' --retain 2 --restarts 1000 "
             "--throttle %.0f --fetch-kb 8 --idle-timeout %lld --count-threshold %d --sum-threshold %.2f "
             "--on-error fail --commit-log '%s' --dead-letter-topic '%s' --conninfo '%s' --bounded --groups",
             bootstrap, r->input, r->decisions, r->late, r->table, r->job, (long long)r->interval, r->ckpt,
             r->throttle, (long long)r->idle_timeout, COUNT_THRESHOLD, SUM_THRESHOLD, r->log, r->dlq, pgt_conninfo());
}

/* The S3Proxy of the ctest fixture `s3` (scripts/s3proxy.sh writes its
 * endpoint to SLUICE_S3_ENDPOINT_FILE): the AWS variables every process
 * started from here inherits point at it. */
static char s3_endpoint[256];
static const char *s3_bucket;
static const char *s3_prefix; /* cluster_kills_case checks its checkpoints are there */

static bool s3_setup(void) { return cl_s3_setup(s3_endpoint, sizeof s3_endpoint, &s3_bucket); }

/* How many objects under s3://bucket/prefix/ end in `suffix` (a signed
 * ListObjectsV2 with curl, as scripts/s3proxy.sh does); -1 on error. */
static int s3_count(const char *prefix, const char *suffix) {
    char cmd[2000];
    snprintf(cmd, sizeof cmd,
             "curl -sf --aws-sigv4 'aws:amz:us-east-1:s3' -u \"$AWS_ACCESS_KEY_ID:$AWS_SECRET_ACCESS_KEY\" "
             "-H 'x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855' " /* empty body */
             "'%s/%s/?list-type=2&prefix=%s%%2F'", /* the slash encoded, as SigV4 signs it */
             s3_endpoint, s3_bucket, prefix);
    FILE *f = popen(cmd, "r");
    if (!f) return -1;
    sl_buf_t b = {0};
    char chunk[4096];
    size_t n;
    while ((n = fread(chunk, 1, sizeof chunk, f)) > 0) sl_buf_append(&b, chunk, n);
    sl_buf_append(&b, "", 1);
    int rc = pclose(f), count = 0;
    char needle[128];
    snprintf(needle, sizeof needle, "%s</Key>", suffix);
    for (const char *p = (const char *)b.p; (p = strstr(p, needle)); p++) count++;
    sl_buf_free(&b);
    return rc == 0 ? count : -1;
}

/* The same pipeline, submitted with `sluice run` to a JobManager with four
 * TaskManagers (two slots each): the Kafka source, the window and the two
 * two-phase-commit sinks in three slot sharing groups, so three
 * TaskManagers run one each (the seeds' placement) and records cross
 * processes twice.  A random TaskManager is killed with kill -9 at random
 * moments, a replacement started each time; the JobManager notices the
 * failed connection, restarts the job from its latest checkpoint on the
 * live TaskManagers, and the outputs are exactly the expected sets, with no
 * prepared transaction left (SLUICE_FRAUD_CLUSTER_KILLS, default 10).
 * cluster_kills_case: `kills` kills, with `ntm` TaskManagers at the start
 * (3: each runs one group, so every kill fails the job; 4: one is spare);
 * checkpoints into ckpt_uri (NULL: the run's directory on the local
 * filesystem). */
static void cluster_kills_case(const char *name, int kills, int ntm, const char *ckpt_uri) {
    run_t r;
    run_init(&r, name);
    if (ckpt_uri) snprintf(r.ckpt, sizeof r.ckpt, "%s", ckpt_uri);
    const int min_ms = 1000, max_ms = 2000;
    r.throttle = 600;
    double budget = (double)kills * max_ms / 1000.0 * r.throttle, share = (double)N * 5.0 / 11.0;
    CHECK(budget < share * 0.9); /* no kill after the end of the input */
    cluster_t c;
    cl_cluster_init(&c, name);
    cl_start_jm(&c);
    int next = 1;
    for (int i = 0; i < ntm; i++) cl_start_tm(&c, next++, 2, NULL, NULL);
    CHECK(cl_wait_tms(&c, ntm, 10000));
    char args[6000], id[64], st[32];
    cluster_job_args(&r, args, sizeof args);
    cl_submit_job(&c, SLUICE_FRAUD_KAFKA_JOB, "", args, id, sizeof id);
    CHECK(id[0]);
    CHECK(cl_wait_state(&c, id, "RUNNING", 20000, st, sizeof st));
    /* the seeds' placement: each group on its own TaskManager */
    CHECK(cl_wait_deployed(&c, 3, 30000));
    int with_source = 0, with_window = 0, with_sinks = 0;
    for (int i = 0; i < c.ntm; i++) {
        with_source += cl_count_in(c.tm[i].log, "Source: events") > 0;
        with_window += cl_count_in(c.tm[i].log, "count-sum-decide") > 0;
        with_sinks += cl_count_in(c.tm[i].log, "decisions-to-kafka") > 0;
        CHECK(cl_count_in(c.tm[i].log, "deploying job") <= 1);
    }
    CHECK(with_source == 1 && with_window == 1 && with_sinks == 1);
    if (s3_prefix) { /* the checkpoints go to S3: one is complete there before the first kill */
        int n = 0;
        for (int64_t end = cl_now_ms() + 30000; cl_now_ms() < end && (n = s3_count(s3_prefix, "/_metadata")) <= 0;)
            cl_sleep_ms(100);
        fprintf(stderr, "  %d checkpoint _metadata objects in s3://%s/%s/ before the first kill\n", n, s3_bucket,
                s3_prefix);
        CHECK(n > 0);
    }
    int killed = 0;
    for (int k = 0; k < kills; k++) {
        cl_sleep_ms(min_ms + rand() % (max_ms - min_ms));
        cl_job_state(&c, id, st, sizeof st);
        if (!strcmp(st, "FINISHED") || !strcmp(st, "FAILED")) break;
        int live[MAX_PROCS], nlive = 0;
        for (int i = 0; i < c.ntm; i++)
            if (c.tm[i].pid > 0) live[nlive++] = i;
        cl_stop(&c.tm[live[rand() % nlive]]);
        killed++;
        if (c.ntm < MAX_PROCS) cl_start_tm(&c, next++, 2, NULL, NULL);
        else { /* reuse a dead slot for the replacement */
            for (int i = 0; i < c.ntm; i++)
                if (c.tm[i].pid <= 0) {
                    int n = c.ntm;
                    c.ntm = i;
                    cl_start_tm(&c, next++, 2, NULL, NULL);
                    c.ntm = n;
                    break;
                }
        }
    }
    bool ok = cl_wait_state(&c, id, "FINISHED", 600000, st, sizeof st);
    if (!ok) cl_dump_logs(&c);
    fprintf(stderr, "  %d TaskManagers killed, job %s, %d restarts\n", killed, st,
            cl_count_in(c.jm.log, "restarting from the latest checkpoint"));
    CHECK(ok);
    CHECK_EQ(killed, kills);
    if (ntm == 3) /* no spare TaskManager: the job restored from its checkpoints */
        CHECK(cl_count_in(c.jm.log, "restarting from the latest checkpoint") >= 1);
    CHECK(verify_all(r.decisions, r.late, r.table, r.job, &want));
    cl_cluster_stop(&c);
}

TEST(cluster_kills) {
    int kills = getenv("SLUICE_FRAUD_CLUSTER_KILLS") ? atoi(getenv("SLUICE_FRAUD_CLUSTER_KILLS")) : 10;
    cluster_kills_case("fraud-cluster", kills, 4, NULL);
}

/* ---- g: the same on a cluster with checkpoints in S3 ---- */

/* cluster_kills with execution.checkpointing.dir s3://bucket/<prefix>
 * against S3Proxy: every checkpoint's state and _metadata go to S3 (seen
 * there while the job runs), and each kill -9 of a TaskManager (three,
 * each running part of the job) is followed by a restore that reads them
 * back from S3; output exact
 * (SLUICE_FRAUD_S3_KILLS, default 3). */
TEST(cluster_kills_s3) {
    CHECK(s3_setup());
    int kills = getenv("SLUICE_FRAUD_S3_KILLS") ? atoi(getenv("SLUICE_FRAUD_S3_KILLS")) : 3;
    char prefix[128], uri[512];
    snprintf(prefix, sizeof prefix, "fraud-s3-%d-%lld", (int)getpid(), (long long)sl_wall_ms());
    snprintf(uri, sizeof uri, "s3://%s/%s", s3_bucket, prefix);
    s3_prefix = prefix;
    cluster_kills_case("fraud-s3", kills, 3, uri);
    s3_prefix = NULL;
}

/* ---- h: HA — JobManager and TaskManager kills ---- */

/* In the spirit of Flink's test_ha_datastream: three JobManagers with
 * ZooKeeper HA (one leads, two stand by) and three TaskManagers with two
 * slots each, all of which the job's three slot sharing groups (at p=2)
 * use, so every TaskManager killed runs part of the job; the checkpointed
 * S1 job (Kafka -> window -> Kafka + PostgreSQL, two-phase commit) is
 * submitted through ZooKeeper.  Three times (SLUICE_FRAUD_HA_KILLS): once
 * a checkpoint completed under the leader, kill -9 of a random TaskManager
 * (a replacement starts); once the job restarted and completed another
 * checkpoint, kill -9 of the leading JobManager (a new standby starts in
 * its place); a standby takes over, recovers the job (same id) from the
 * latest checkpoint in ZooKeeper and runs it again.  Each kill lands while
 * the bounded input is not finished.  At the end: the committed output —
 * read_committed topic, table, late topic — equals the expected sets
 * exactly, no prepared transaction is left, and the checkpoint ids each
 * leader completed lie strictly above every earlier leader's. */
TEST(ha_jobmanager_and_taskmanager_kills) {
    int jm_kills = getenv("SLUICE_FRAUD_HA_KILLS") ? atoi(getenv("SLUICE_FRAUD_HA_KILLS")) : 3;
    run_t r;
    run_init(&r, "fraud-ha");
    r.throttle = 200; /* >= 90 s for the smallest source share: every kill lands before the end */
    ha_cluster_t h;
    CHECK(ha_init(&h, "fraud-ha"));
    for (int k = 0; k < HA_NJM; k++) {
        ha_start_jm(&h, k);
        cl_sleep_ms(150); /* the first one leads, the others stand by */
    }
    char token[64] = "", prev[64] = "", args[6000], id[64] = "", st[32];
    int L = ha_wait_leader(&h, NULL, token, sizeof token, 20000);
    if (L < 0) ha_dump(&h);
    CHECK(L >= 0);
    int next = 1;
    for (int i = 0; i < 3; i++) ha_start_tm(&h, next++, 2);
    CHECK(cl_wait_tms(&h.c, 3, 15000));
    cluster_job_args(&r, args, sizeof args);
    ha_submit(&h, SLUICE_FRAUD_KAFKA_JOB, args, id, sizeof id);
    CHECK(id[0]);
    bool ok = ha_wait_state(&h, id, "RUNNING", 30000, st, sizeof st);
    if (!ok) ha_dump(&h);
    CHECK(ok);
    int term = 0, tm_killed = 0;
    int64_t newest = 0, t0 = cl_now_ms();
    for (int kill = 0; kill < jm_kills; kill++) {
        /* a checkpoint under this leader; then a TaskManager dies */
        newest = ha_wait_checkpoint(&h, id, term, newest, 60000);
        if (newest < 0) ha_dump(&h);
        CHECK(newest > 0);
        L = ha_wait_leader(&h, NULL, token, sizeof token, 30000); /* the leader now (see ha_job_state) */
        CHECK(L >= 0);
        int restarts = cl_count_in(h.jm[L].log, "restarting from the latest checkpoint");
        int live[MAX_PROCS], nlive = 0;
        for (int i = 0; i < h.c.ntm; i++)
            if (h.c.tm[i].pid > 0) live[nlive++] = i;
        int victim = live[rand() % nlive];
        fprintf(stderr, "  %.1f s: kill -9 of %s (checkpoint %" PRId64 " completed under jm-%d)\n",
                (double)(cl_now_ms() - t0) / 1000.0, h.c.tm[victim].id, newest, L);
        cl_stop(&h.c.tm[victim]);
        tm_killed++;
        ha_start_tm(&h, next++, 2); /* the replacement */
        /* the leader restarts the job; a checkpoint of the restarted job completes */
        int64_t end = cl_now_ms() + 60000;
        while (cl_now_ms() < end && cl_count_in(h.jm[L].log, "restarting from the latest checkpoint") == restarts)
            cl_sleep_ms(20);
        CHECK(cl_count_in(h.jm[L].log, "restarting from the latest checkpoint") > restarts);
        newest = ha_wait_checkpoint(&h, id, term, ha_observe(&h, id, term), 60000);
        if (newest < 0) ha_dump(&h);
        CHECK(newest > 0);
        /* then kill -9 of the leader, with the input not yet finished */
        ha_job_state(&h, id, st, sizeof st);
        CHECK_STR(st, "RUNNING");
        fprintf(stderr, "  %.1f s: kill -9 of leader jm-%d (checkpoint %" PRId64 " completed after the restart)\n",
                (double)(cl_now_ms() - t0) / 1000.0, L, newest);
        snprintf(prev, sizeof prev, "%s", token);
        cl_stop(&h.jm[L]);
        int dead = L;
        L = ha_wait_leader(&h, prev, token, sizeof token, 30000);
        if (L < 0) ha_dump(&h);
        CHECK(L >= 0);
        term++;
        ha_start_jm(&h, dead); /* a new standby in its place */
        ok = ha_wait_state(&h, id, "RUNNING", 60000, st, sizeof st);
        if (!ok) ha_dump(&h);
        CHECK(ok); /* the same job id, run again by the new leader */
        CHECK_EQ(cl_count_in(h.jm[L].log, "recovered 1 job"), 1);
        newest = ha_wait_checkpoint(&h, id, term, newest, 60000); /* and it checkpoints */
        if (newest < 0) ha_dump(&h);
        CHECK(newest > 0);
        fprintf(stderr, "  %.1f s: jm-%d leads, checkpoint %" PRId64 " completed under it\n",
                (double)(cl_now_ms() - t0) / 1000.0, L, newest);
    }
    ok = ha_wait_state(&h, id, "FINISHED", 600000, st, sizeof st);
    if (!ok) ha_dump(&h);
    fprintf(stderr, "  %d leader kills, %d TaskManager kills, job %s after %.1f s\n", jm_kills, tm_killed, st,
            (double)(cl_now_ms() - t0) / 1000.0);
    CHECK(ok);
    ha_observe(&h, id, term);
    CHECK_EQ(ha_terms_growing(term), jm_kills + 1); /* every leader completed checkpoints, above the last one's */
    CHECK(verify_all(r.decisions, r.late, r.table, r.job, &want));
    ha_stop(&h);
}

/* The sinks' TaskManager killed in each window of the two-phase commit, on
 * a cluster: tm-1 and tm-2 register first and take the source and window
 * groups (slots are filled in registration order), tm-3 takes the sinks
 * and carries the fault point, so it is the one that dies (SIGKILL at the
 * point, as kill -9).  While it is dead the job waits for slots (4 left,
 * 6 needed), which is when the prepared transactions are counted; then a
 * replacement TaskManager comes and the job recovers from its latest
 * checkpoint.  The fault points are those of kill_in_each_2pc_window that
 * run in a TaskManager (checkpoint.completed-before-notify runs in the
 * JobManager). */
TEST(cluster_kill_sinks_in_each_2pc_window) {
    static const struct {
        const char *name, *fault;
        bool precommitted; /* a prepared transaction must be left */
    } sc[] = {
        {"before-precommit", "SLUICE_FAULT_AT=sink.before-precommit:19", false},
        {"after-precommit", "SLUICE_FAULT_AT=sink.after-precommit:24", true},
        {"during-commit", "SLUICE_FAULT_AT=sink.during-commit:5", false},
        {"after-end-of-data", "SLUICE_FAULT_AT=task.after-end-of-data:1", false},
        {"after-final-checkpoint", "SLUICE_FAULT_AT=task.after-final-checkpoint:1", false},
    };
    const char *only = getenv("SLUICE_FRAUD_ONLY");
    for (size_t i = 0; i < sizeof sc / sizeof sc[0]; i++) {
        if (only && !strstr(sc[i].name, only)) continue;
        char name[64];
        snprintf(name, sizeof name, "cl-%s", sc[i].name);
        run_t r;
        run_init(&r, name);
        cluster_t c;
        cl_cluster_init(&c, name);
        cl_start_jm(&c);
        for (int t = 1; t <= 2; t++) {
            cl_start_tm(&c, t, 2, NULL, NULL);
            CHECK(cl_wait_tms(&c, t, 10000));
        }
        static char fault_env[128]; /* putenv keeps the pointer until cl_start_tm unsets it */
        snprintf(fault_env, sizeof fault_env, "%s", sc[i].fault);
        proc_t *sinks = cl_start_tm(&c, 3, 2, NULL, fault_env);
        CHECK(cl_wait_tms(&c, 3, 10000));
        char args[6000], id[64] = "", st[32];
        cluster_job_args(&r, args, sizeof args);
        cl_submit_job(&c, SLUICE_FRAUD_KAFKA_JOB, "", args, id, sizeof id);
        CHECK(id[0]);
        CHECK(cl_wait_deployed(&c, 3, 30000));
        CHECK(cl_count_in(sinks->log, "decisions-to-kafka") > 0); /* the sinks run on tm-3 */
        CHECK_EQ(cl_count_in(sinks->log, "count-sum-decide"), 0);
        int ws = 0;
        pid_t got = 0;
        for (int64_t end = cl_now_ms() + 240000; cl_now_ms() < end && got == 0;) {
            got = waitpid(sinks->pid, &ws, WNOHANG);
            if (got == 0) cl_sleep_ms(20);
        }
        bool killed = got == sinks->pid && WIFSIGNALED(ws) && WTERMSIG(ws) == SIGKILL;
        if (got == sinks->pid) {
            for (int k = 0; k < cl_npids; k++) /* reaped: never signal its pid again */
                if (cl_pids[k] == sinks->pid) cl_pids[k--] = cl_pids[--cl_npids];
            sinks->pid = 0;
        }
        PGconn *pc = pgt_connect();
        char prefix[128];
        snprintf(prefix, sizeof prefix, "sl:%s:", r.job);
        long long prepared = pgt_prepared(pc, prefix);
        PQfinish(pc);
        cl_job_state(&c, id, st, sizeof st);
        fprintf(stderr, "  %s (%s on tm-3): %s, %lld prepared transactions left, job %s\n", sc[i].name,
                sc[i].fault + strlen("SLUICE_FAULT_AT="), killed ? "killed there" : "NOT KILLED", prepared, st);
        CHECK(killed);
        if (sc[i].precommitted) CHECK(prepared >= 1);
        cl_start_tm(&c, 4, 2, NULL, NULL); /* the replacement, without the fault */
        bool ok = cl_wait_state(&c, id, "FINISHED", 240000, st, sizeof st);
        if (!ok) cl_dump_logs(&c);
        CHECK(ok);
        CHECK(cl_count_in(c.jm.log, "restarting from the latest checkpoint") >= 1);
        CHECK(verify_all(r.decisions, r.late, r.table, r.job, &want));
        cl_cluster_stop(&c);
    }
}

/* ---- S5: stop with a savepoint, upgrade, restore ---- */

/* Records of topic not yet covered by the consumer group's committed
 * offsets (the Kafka source commits its checkpointed positions there). */
static int64_t group_lag(const char *group, const char *topic) {
    char err[512];
    rd_kafka_conf_t *conf = rd_kafka_conf_new();
    rd_kafka_conf_set(conf, "bootstrap.servers", bootstrap, err, sizeof err);
    rd_kafka_conf_set(conf, "group.id", group, err, sizeof err);
    rd_kafka_t *rk = rd_kafka_new(RD_KAFKA_CONSUMER, conf, err, sizeof err);
    if (!rk) return -1;
    rd_kafka_topic_partition_list_t *l = rd_kafka_topic_partition_list_new(PARTITIONS);
    for (int p = 0; p < PARTITIONS; p++) rd_kafka_topic_partition_list_add(l, topic, p);
    int64_t lag = -1;
    if (rd_kafka_committed(rk, l, 10000) == RD_KAFKA_RESP_ERR_NO_ERROR) {
        lag = 0;
        for (int p = 0; p < PARTITIONS; p++) {
            int64_t lo = 0, hi = 0;
            if (rd_kafka_query_watermark_offsets(rk, topic, p, &lo, &hi, 10000)) {
                lag = -1;
                break;
            }
            int64_t c = l->elems[p].offset;
            lag += hi - (c >= 0 ? c : lo);
        }
    }
    rd_kafka_topic_partition_list_destroy(l);
    rd_kafka_destroy(rk);
    return lag;
}

/* fraud_kafka produce into topic: n transactions, no late ones, event time
 * from start_min minutes after the default start over span_min minutes. */
static bool produce_part(const char *topic, long long n, int seed, int start_min, int span_min) {
    char cmd[1600];
    snprintf(cmd, sizeof cmd,
             "'%s' produce --bootstrap '%s' --topic '%s' --events %lld --seed %d --late-per-mille 0 --start-min %d "
             "--span-min %d >/dev/null",
             SLUICE_FRAUD_KAFKA, bootstrap, topic, n, seed, start_min, span_min);
    return system(cmd) == 0;
}

/* The committed decisions (topic and table) so far. */
static int64_t committed_decisions(const run_t *r, dec_t **topic_rows, dec_t **table_rows, int64_t *ntable) {
    int64_t bad = 0;
    int64_t n = read_decisions(r->decisions, topic_rows, &bad);
    PGconn *c = pgt_connect();
    *ntable = read_table(c, r->table, table_rows);
    PQfinish(c);
    return bad ? -1 : n;
}

/* Scenario S5 on a cluster against the real Kafka and PostgreSQL: version 1
 * of the fraud job runs unbounded over the first half of the input; once it
 * has checkpointed all of it, `sluice stop --savepointPath DIR [--drain]`;
 * the second half is produced; version 2 — a new keyed operator with state
 * of its own between the window and the sinks — starts from the savepoint
 * with `sluice run -s` at parallelism 3 and runs to the end.  The committed
 * output over both versions must equal the expected set of the whole input,
 * with no duplicate and no gap, and nothing may be left prepared.
 *   drain: the halves are an hour apart; right after the stop the output is
 *     exactly the expected set of the first half (every window fired).
 *   no drain: the second half continues the first's last window; right after the
 *     stop only windows the watermark passed are out, and after the upgrade
 *     windows open at the stop hold both versions' transactions. */
static void savepoint_case(bool drain) {
    run_t r;
    run_init(&r, drain ? "s5-drain" : "s5-nodrain");
    char topic[160], t1[170];
    snprintf(topic, sizeof topic, "%s-in", r.decisions);
    snprintf(t1, sizeof t1, "%s-in1", r.decisions);
    const long long N1 = 12000, N2 = 12000;
    /* no drain: the second half starts two minutes before the first ends, so the
     * windows open at the stop ([55, 60) min) get transactions of both versions */
    const int span = 60, start2 = drain ? span + 60 : span - 2;
    CHECK(kt_create_topic(topic, PARTITIONS) == 0);
    CHECK(kt_create_topic(t1, PARTITIONS) == 0);
    CHECK(produce_part(topic, N1, 7, 0, span));
    CHECK(produce_part(t1, N1, 7, 0, span)); /* the same records: the first half's expected set */
    expect_t e1;
    CHECK(compute_expected(t1, &e1));
    r.input = topic;
    cluster_t c;
    cl_cluster_init(&c, drain ? "s5-drain" : "s5-nodrain");
    cl_start_jm(&c);
    for (int i = 1; i <= 2; i++) cl_start_tm(&c, i, 4, NULL, NULL);
    CHECK(cl_wait_tms(&c, 2, 10000));
    char common[6000], args[6400], id[64], st[32], spdir[1200];
    snprintf(spdir, sizeof spdir, "%s/%s-savepoints", sl_test_tmpdir(), r.job);
    snprintf(common, sizeof common,
             "--bootstrap '%s' --events-topic '%s' --decisions-topic '%s' --late-topic '%s' --table '%s' "
             "--job-id '%s' --checkpoint-interval 300 --checkpoint-dir '%s' --retain 2 --restarts 0 "
             "--fetch-kb 8 --idle-timeout 1000 --count-threshold %d --sum-threshold %.2f --on-error fail "
             "--conninfo '%s'",
             bootstrap, r.input, r.decisions, r.late, r.table, r.job, r.ckpt, COUNT_THRESHOLD, SUM_THRESHOLD,
             pgt_conninfo());
    snprintf(args, sizeof args, "%s -p 2", common); /* version 1, unbounded */
    cl_submit_job(&c, SLUICE_FRAUD_KAFKA_JOB, "", args, id, sizeof id);
    CHECK(id[0]);
    CHECK(cl_wait_state(&c, id, "RUNNING", 20000, st, sizeof st));
    int64_t lag = -1;
    for (int i = 0; i < 1200 && lag != 0; i++) { /* until a checkpoint covers the whole first half */
        cl_sleep_ms(100);
        lag = group_lag(r.job, topic);
    }
    CHECK_EQ(lag, 0);
    if (!drain) { /* and until windows the watermark passed are out (once the idle partition is idle) */
        int64_t n = 0;
        for (int i = 0; i < 300 && n <= 0; i++) {
            cl_sleep_ms(100);
            dec_t *kt0 = NULL;
            int64_t bad = 0;
            n = read_decisions(r.decisions, &kt0, &bad);
            free(kt0);
        }
        CHECK(n > 0);
    }

    char cmd[3000], line[5000], sp[4300] = "";
    snprintf(cmd, sizeof cmd, "%s stop -m 127.0.0.1:%d --savepointPath '%s' %s %s 2>&1", SLUICE_BIN, c.rest_port, spdir,
             drain ? "--drain" : "", id);
    FILE *f = popen(cmd, "r");
    while (f && fgets(line, sizeof line, f)) {
        fprintf(stderr, "  sluice stop: %s", line);
        const char *at = strstr(line, "Path: file:");
        if (at) sscanf(at + 11, "%4299s", sp);
    }
    int stop_rc = f ? pclose(f) : -1;
    CHECK_EQ(stop_rc, 0);
    CHECK(sp[0] == '/');
    CHECK(cl_wait_state(&c, id, "FINISHED", 30000, st, sizeof st)); /* a stopped job finished */
    PGconn *pg = pgt_connect();
    char prefix[128];
    snprintf(prefix, sizeof prefix, "sl:%s:", r.job);
    CHECK_EQ(pgt_prepared(pg, prefix), 0); /* the stop committed the savepoint's transactions */
    PQfinish(pg);
    dec_t *kt = NULL, *tb = NULL;
    int64_t ntb = 0, nkt = committed_decisions(&r, &kt, &tb, &ntb);
    fprintf(stderr, "  after the stop: %lld rows in the topic, %lld in the table, %lld in the first half's set\n",
            (long long)nkt, (long long)ntb, (long long)e1.ndec);
    if (drain) {
        CHECK(same_decisions("drained topic", kt, nkt, e1.dec, e1.ndec));
        CHECK(same_decisions("drained table", tb, ntb, e1.dec, e1.ndec));
    } else { /* only what the watermark passed, and nothing that is not in the first half's set */
        CHECK(nkt > 0 && nkt < e1.ndec);
        CHECK_EQ(contained(kt, nkt, e1.dec, e1.ndec), nkt);
        CHECK_EQ(contained(tb, ntb, e1.dec, e1.ndec), ntb);
    }
    free(kt);
    free(tb);

    CHECK(produce_part(topic, N2, 8, start2, span));
    expect_t all;
    CHECK(compute_expected(topic, &all));
    snprintf(args, sizeof args, "%s -p 3 --bounded --v2", common); /* version 2 */
    char opts[4400];
    snprintf(opts, sizeof opts, "-s '%s'", sp);
    cl_submit_job(&c, SLUICE_FRAUD_KAFKA_JOB, opts, args, id, sizeof id);
    CHECK(id[0]);
    bool ok = cl_wait_state(&c, id, "FINISHED", 300000, st, sizeof st);
    if (!ok) cl_dump_logs(&c);
    CHECK(ok);
    CHECK(verify_all(r.decisions, r.late, r.table, r.job, &all));
    if (!drain) { /* some windows hold transactions of both versions */
        int64_t both = 0;
        for (int64_t i = 0, j = 0; i < e1.ndec && j < all.ndec;) {
            int cmp = cmp_dec(&e1.dec[i], &all.dec[j]);
            if (cmp == 0) both += all.dec[j].count > e1.dec[i].count;
            if (cmp <= 0) i++;
            if (cmp >= 0) j++;
        }
        fprintf(stderr, "  %lld windows counted transactions of both versions\n", (long long)both);
        CHECK(both > 0);
    }
    CHECK(cl_count_in(c.tm[0].log, "card-history") + cl_count_in(c.tm[1].log, "card-history") > 0);
    expect_free(&all);
    expect_free(&e1);
    cl_cluster_stop(&c);
}

TEST(savepoint_upgrade) {
    savepoint_case(true);
    savepoint_case(false);
}

int main(void) {
    bootstrap = kt_bootstrap();
    pgt_conninfo();
    int kills = getenv("SLUICE_FRAUD_KILLS") ? atoi(getenv("SLUICE_FRAUD_KILLS")) : 6;
    if (kills > 6) N = (int64_t)(N * (double)kills / 6.0); /* the soak: enough input for the kills */
    events = kt_name("fraud-events");
    char cmd[1200];
    snprintf(cmd, sizeof cmd, "'%s' produce --bootstrap '%s' --topic '%s' --events %lld --seed %d >/dev/null",
             SLUICE_FRAUD_KAFKA, bootstrap, events, (long long)N, 42);
    if (system(cmd) != 0) {
        fprintf(stderr, "cannot produce the input: %s\n", cmd);
        return 1;
    }
    if (!compute_expected(events, &want) || want.records != N || want.nlate < 10) {
        fprintf(stderr, "the input is not what the tests need\n");
        return 1;
    }
    const char *only = getenv("SLUICE_FRAUD_TESTS");
    if (!only || strstr(only, "random")) RUN(random_kills);
    if (!only || strstr(only, "2pc")) RUN(kill_in_each_2pc_window);
    if (!only || strstr(only, "visible")) RUN(nothing_visible_before_completion);
    if (!only || strstr(only, "idle")) RUN(idle_partition_does_not_stall);
    if (!only || strstr(only, "poison")) RUN(poison_records);
    if (!only || strstr(only, "cluster")) RUN(cluster_kills);
    if (!only || strstr(only, "s3")) RUN(cluster_kills_s3);
    if (!only || strstr(only, "ha")) RUN(ha_jobmanager_and_taskmanager_kills);
    if (!only || strstr(only, "cluster") || strstr(only, "2pc")) RUN(cluster_kill_sinks_in_each_2pc_window);
    if (!only || strstr(only, "savepoint")) RUN(savepoint_upgrade);
    expect_free(&want);
    TEST_MAIN_END();
}
