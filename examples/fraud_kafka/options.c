/*
 * options.c — the options of `fraud_kafka produce` and `fraud_kafka run`,
 * shared by the program (main.c) and the cluster job (job.c), which takes
 * the same options as `run`.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fraud_kafka.h"

static bool eq(const char *a, const char *b) { return strcmp(a, b) == 0; }

int fk_parse_args(bool produce, int argc, char **argv, fk_opts_t *o, fk_produce_opts_t *po, bool *no_pg) {
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool flag = true;
        if (eq(a, "--wall-clock")) po->wall_clock = true;
        else if (eq(a, "--no-pg")) *no_pg = true;
        else if (eq(a, "--restore")) o->restore = true;
        else if (eq(a, "--bounded")) o->bounded = true;
        else if (eq(a, "--groups")) o->groups = true;
        else if (eq(a, "--v2")) o->v2 = true;
        else flag = false;
        if (flag) continue;
        if (!v) {
            fprintf(stderr, "fraud_kafka: %s needs a value\n", a);
            return 2;
        }
        i++;
        if (eq(a, "--bootstrap")) o->bootstrap = po->bootstrap = v;
        else if (produce && eq(a, "--topic")) po->topic = v;
        else if (produce && eq(a, "--partitions")) po->gen.partitions = atoi(v);
        else if (produce && eq(a, "--events")) po->gen.events = atoll(v);
        else if (produce && eq(a, "--cards")) po->gen.cards = atoll(v);
        else if (produce && eq(a, "--seed")) po->gen.seed = strtoull(v, NULL, 10);
        else if (produce && eq(a, "--idle-partition")) po->gen.idle_partition = atoi(v);
        else if (produce && eq(a, "--span-min")) po->gen.span_ms = atoll(v) * 60000;
        else if (produce && eq(a, "--start-min")) po->gen.start_ts += atoll(v) * 60000; /* after the default start */
        else if (produce && eq(a, "--late-per-mille")) po->gen.late_per_mille = atoi(v);
        else if (produce && eq(a, "--poison")) po->gen.poison = atoll(v);
        else if (produce && eq(a, "--rate")) po->rate = atof(v);
        else if (produce && eq(a, "--batch")) po->batch = atoi(v);
        else if (!produce && eq(a, "--events-topic")) o->events_topic = v;
        else if (!produce && eq(a, "--decisions-topic")) o->decisions_topic = v;
        else if (!produce && eq(a, "--late-topic")) o->late_topic = v;
        else if (!produce && eq(a, "--dead-letter-topic")) o->dead_letter_topic = v;
        else if (!produce && eq(a, "--conninfo")) o->conninfo = v;
        else if (!produce && eq(a, "--table")) o->table = v;
        else if (!produce && eq(a, "--job-id")) o->job_id = v;
        else if (!produce && (eq(a, "-p") || eq(a, "--parallelism"))) o->parallelism = atoi(v);
        else if (!produce && eq(a, "--checkpoint-interval")) o->checkpoint_interval_ms = atoll(v);
        else if (!produce && eq(a, "--checkpoint-dir")) o->checkpoint_dir = v;
        else if (!produce && eq(a, "--retain")) o->checkpoints_retained = atoi(v);
        else if (!produce && eq(a, "--idle-timeout")) o->idle_timeout_ms = atoll(v);
        else if (!produce && eq(a, "--window-ms")) o->window_ms = atoll(v);
        else if (!produce && eq(a, "--count-threshold")) o->count_threshold = atoll(v);
        else if (!produce && eq(a, "--sum-threshold")) o->sum_threshold = atof(v);
        else if (!produce && eq(a, "--restarts")) o->restarts = atoi(v);
        else if (!produce && eq(a, "--throttle")) o->throttle = atof(v);
        else if (!produce && eq(a, "--fetch-kb")) o->fetch_kb = atoi(v);
        else if (!produce && eq(a, "--commit-log")) o->commit_log = v;
        else if (!produce && eq(a, "--delivery")) {
            if (eq(v, "exactly-once")) o->delivery = SL_DELIVERY_EXACTLY_ONCE;
            else if (eq(v, "at-least-once")) o->delivery = SL_DELIVERY_AT_LEAST_ONCE;
            else {
                fprintf(stderr, "fraud_kafka: --delivery '%s' is not exactly-once or at-least-once\n", v);
                return 2;
            }
        } else if (!produce && eq(a, "--on-error")) {
            if (eq(v, "fail")) o->on_error = SL_KAFKA_ON_ERROR_FAIL;
            else if (eq(v, "skip")) o->on_error = SL_KAFKA_ON_ERROR_SKIP;
            else if (eq(v, "dead-letter")) o->on_error = SL_KAFKA_ON_ERROR_DEAD_LETTER;
            else {
                fprintf(stderr, "fraud_kafka: --on-error '%s' is not fail, skip or dead-letter\n", v);
                return 2;
            }
        } else {
            fprintf(stderr, "fraud_kafka %s: unknown option '%s' (--help lists them)\n", produce ? "produce" : "run", a);
            return 2;
        }
    }
    return 0;
}

int fk_parse_run(int argc, char **argv, fk_opts_t *o) {
    fk_produce_opts_t po;
    memset(&po, 0, sizeof po);
    bool no_pg = false;
    int rc = fk_parse_args(false, argc, argv, o, &po, &no_pg);
    if (rc == 0 && no_pg) o->conninfo = NULL;
    return rc;
}
