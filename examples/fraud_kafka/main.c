/*
 * main.c — the `fraud_kafka` program: `fraud_kafka produce ...` writes the
 * seeded transactions into the events topic, `fraud_kafka run ...` runs the
 * S1-S4 pipeline (see fraud_kafka.h).  `fraud_kafka --help` lists the
 * options.  run prints a summary as key=value lines on stdout; exit status
 * 0 when the job finished, 1 when it failed, 2 on a usage error.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>

#include "fraud_kafka.h"
#include "sluice/kafka.h"

/* `read`: prints up to max values of a topic (those containing grep), read
 * from the beginning to its end with a read_committed consumer, then the
 * total.  For the demo. */
typedef struct reader {
    int64_t total, matched, shown, max;
    const char *grep;
} reader_t;

static int show(void *ctx, const sl_kafka_record_t *m) {
    reader_t *r = ctx;
    r->total++;
    if (!m->value) return 0;
    char *v = strndup(m->value, m->value_len);
    if (!r->grep || strstr(v, r->grep)) {
        r->matched++;
        if (r->shown < r->max) {
            printf("%s\n", v);
            r->shown++;
        }
    }
    free(v);
    return 0;
}

static int read_topic(const char *bootstrap, const char *topic, int64_t max, const char *grep) {
    reader_t r = {0, 0, 0, max, grep};
    char err[512];
    if (sl_kafka_read_topic(bootstrap, topic, true, show, &r, 60000, err, sizeof err) != 0) {
        fprintf(stderr, "fraud_kafka read: %s\n", err);
        return 1;
    }
    if (grep)
        printf("(%s: %" PRId64 " records read_committed, %" PRId64 " with %s)\n", topic, r.total, r.matched, grep);
    else
        printf("(%s: %" PRId64 " records read_committed)\n", topic, r.total);
    return 0;
}

static void usage(FILE *f) {
    fprintf(f,
            "usage: fraud_kafka produce --bootstrap HOST:PORT [options]\n"
            "       fraud_kafka run --bootstrap HOST:PORT [options]\n"
            "       fraud_kafka read --bootstrap HOST:PORT --topic NAME [--max N] [--grep TEXT]\n"
            "\n"
            "produce: deterministic card transactions into the events topic (created if missing)\n"
            "  --topic NAME            events topic (default events)\n"
            "  --partitions N          partitions of the topic (default 12)\n"
            "  --events N              transactions (default 40000; with --wall-clock, -1: until killed)\n"
            "  --cards N               distinct cards (default 500)\n"
            "  --seed N                (default 42)\n"
            "  --idle-partition P      partition that gets nothing (default 11; -1 none)\n"
            "  --span-min M            event time covered per partition, minutes (default 120)\n"
            "  --start-min M           event time starts M minutes after 2026-01-01T00:00Z (default 0)\n"
            "  --late-per-mille L      late transactions, a day behind (default 10)\n"
            "  --poison N              records that are not transactions (default 0)\n"
            "  --rate R                records/s (default: as fast as possible)\n"
            "  --batch N               records per producer batch (default 100)\n"
            "  --wall-clock            event time = the wall clock when produced (latency runs)\n"
            "\n"
            "run: the fraud pipeline\n"
            "  --events-topic NAME     (default events)\n"
            "  --decisions-topic NAME  (default fraud-decisions)\n"
            "  --late-topic NAME       late transactions (default fraud-late; '' to only count them)\n"
            "  --dead-letter-topic N   with --on-error dead-letter (default fraud-dead-letters)\n"
            "  --conninfo STR          PostgreSQL connection string (decisions also go to the table)\n"
            "  --table NAME            (default fraud_decisions)\n"
            "  --no-pg                 no PostgreSQL even with --conninfo\n"
            "  --job-id ID             transactional ids, PostgreSQL gids, group (default fraud-kafka)\n"
            "  -p, --parallelism N     (default 2)\n"
            "  --checkpoint-interval MS  (default 10000)\n"
            "  --checkpoint-dir DIR    (default fraud-kafka-checkpoints)\n"
            "  --retain N              completed checkpoints kept (default 2)\n"
            "  --restore               resume from the latest complete checkpoint in DIR, if any\n"
            "  --delivery exactly-once|at-least-once   of the Kafka sinks (default exactly-once)\n"
            "  --bounded               stop at the end offsets seen at start (default: unbounded)\n"
            "  --idle-timeout MS       a partition without records this long is idle (default 10000)\n"
            "  --window-ms MS          tumbling window size (default 300000, S1's 5 minutes)\n"
            "  --count-threshold N     flag a window with at least N transactions (default 8)\n"
            "  --sum-threshold X       ... or at least this sum (default 2500)\n"
            "  --on-error fail|skip|dead-letter   records that are not transactions (default fail)\n"
            "  --restarts N            restarts inside the process (default 3; 0: a failure ends it)\n"
            "  --throttle R            at most R records/s per source subtask (default: none)\n"
            "  --fetch-kb N            max.partition.fetch.bytes in KiB (default 64; small values interleave partitions finely)\n"
            "  --commit-log FILE       sinks log their pre-commits and commits there\n"
            "  --groups                source, window and sinks in three slot sharing groups\n"
            "  --v2                    version 2 (scenario S5): a keyed operator with state of its own\n"
            "                          (card-history) between the window and the sinks; same output\n");
}

static bool eq(const char *a, const char *b) { return strcmp(a, b) == 0; }

int main(int argc, char **argv) {
    if (argc < 2 || eq(argv[1], "--help") || eq(argv[1], "-h")) {
        usage(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    bool produce = eq(argv[1], "produce"), readcmd = eq(argv[1], "read");
    if (!produce && !readcmd && !eq(argv[1], "run")) {
        fprintf(stderr, "fraud_kafka: unknown command '%s' (produce, run or read)\n", argv[1]);
        return 2;
    }
    if (readcmd) {
        const char *bootstrap = NULL, *topic = NULL, *grep = NULL;
        int64_t max = 10;
        for (int i = 2; i + 1 < argc; i += 2) {
            if (eq(argv[i], "--bootstrap")) bootstrap = argv[i + 1];
            else if (eq(argv[i], "--topic")) topic = argv[i + 1];
            else if (eq(argv[i], "--max")) max = atoll(argv[i + 1]);
            else if (eq(argv[i], "--grep")) grep = argv[i + 1];
            else {
                fprintf(stderr, "fraud_kafka read: unknown option '%s'\n", argv[i]);
                return 2;
            }
        }
        if (!bootstrap || !topic) {
            fprintf(stderr, "fraud_kafka read: --bootstrap and --topic are required\n");
            return 2;
        }
        return read_topic(bootstrap, topic, max, grep);
    }
    fk_opts_t o = fk_defaults();
    fk_produce_opts_t po;
    memset(&po, 0, sizeof po);
    po.topic = "events";
    po.gen = fk_gen_defaults();
    bool no_pg = false;
    if (fk_parse_args(produce, argc - 2, argv + 2, &o, &po, &no_pg)) return 2;
    if (no_pg) o.conninfo = NULL;
    char err[2048];
    if (produce) {
        int64_t n = 0;
        int rc = fk_produce(&po, &n, err, sizeof err);
        if (rc) {
            fprintf(stderr, "fraud_kafka: %s\n", err);
            return 1;
        }
        printf("produced=%" PRId64 "\n", n);
        return 0;
    }
    fk_summary_t s;
    int rc = fk_run(&o, &s, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, "fraud_kafka: %s\n", err);
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 + (double)ru.ru_stime.tv_sec +
                 (double)ru.ru_stime.tv_usec / 1e6;
    printf("restored=%d\nrecords_out=%" PRId64 "\nskipped=%" PRId64 "\ndecisions=%" PRId64 "\nlate=%" PRId64
           "\ncheckpoints=%" PRId64 "\nseconds=%.3f\ncpu_seconds=%.3f\n",
           s.restored ? 1 : 0, s.records_out, s.skipped, s.decisions, s.late, s.checkpoints, s.seconds, cpu);
    return 0;
}
