/*
 * fraud_rules.c — the broadcast-state pattern on the S1 transactions: card
 * transactions (the datagen source) keyed by card, and a stream of rules —
 * a spending threshold per category of card (card_id mod 16) — broadcast to
 * every subtask and changed while the job runs.  In Flink:
 *
 *   MapStateDescriptor<Long, Double> thresholds = ...;
 *   BroadcastStream<Rule> rules = ruleStream.broadcast(thresholds);
 *   transactions.keyBy(t -> t.cardId).connect(rules)
 *       .process(new KeyedBroadcastProcessFunction<...>() { ... });
 *
 * The function keeps, per card, the sum spent in the current period of
 * event time (one minute, by the transaction's timestamp) and raises an
 * alert the first time in a period that the sum exceeds the threshold of
 * the card's category.  A rule applies to the transactions that reach a
 * subtask after it (as in Flink: the two inputs have no order between
 * them).  When a threshold is lowered, process_broadcast_element visits
 * every card of this subtask (apply_to_keyed_state) and alerts at once for
 * those of that category already above the new threshold.
 *
 *   fraud_rules [--count N] [--rate EVENTS_PER_S] [--parallelism P] [--print]
 *
 * Output: alerts {card_id, category, period_start, spent, threshold,
 * reason} (reason 0: a transaction, 1: a lowered rule); the number of
 * alerts is printed at the end, and each alert with --print.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sluice/broadcast.h"
#include "sluice/sluice.h"

#define CATEGORIES 16
#define PERIOD_MS 60000

/* ---- the rule source: every interval_ms of wall time, a new threshold
 * for one category (deterministic sequence), nrules in all ---- */

typedef struct rules_src {
    int nrules;
    int64_t interval_ms;
    sl_schema_t *schema; /* category BIGINT, threshold DOUBLE */
} rules_src_t;

typedef struct rules_reader {
    rules_src_t *src;
    bool owns;
    int next;
    int64_t due_ns;
} rules_reader_t;

static int64_t mono_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static int rules_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    rules_reader_t *r = calloc(1, sizeof *r);
    r->src = ctx;
    r->owns = subtask == 0;
    r->due_ns = mono_ns();
    *reader = r;
    *nsplits = r->owns ? 1 : 0;
    return 0;
}

static int rules_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    rules_reader_t *r = reader;
    if (!r->owns || r->next >= r->src->nrules) {
        if (r->owns) sl_src_split_finished(out, 0);
        return SL_SRC_END;
    }
    if (mono_ns() < r->due_ns) {
        sl_src_idle_until(out, r->due_ns);
        return SL_SRC_IDLE;
    }
    /* the first 16 rules set every category; later ones move one up or down */
    int i = r->next++;
    int64_t cat = i % CATEGORIES;
    double thr = i < CATEGORIES ? 2000.0 : 500.0 + (double)((i * 7919) % 40) * 100.0;
    sl_row_writer_t *w = sl_src_row(out);
    sl_rw_set_i64(w, 0, cat);
    sl_rw_set_f64(w, 1, thr);
    sl_src_emit(out, 0, SL_NO_TIMESTAMP);
    r->due_ns += r->src->interval_ms * 1000000LL;
    return SL_SRC_MORE;
}

static void rules_destroy_reader(void *r) { free(r); }
static void rules_destroy(void *ctx) { free(ctx); }

static const sl_source_ops_t rules_ops = {.name = "rules",
                                          .create_reader = rules_create,
                                          .poll = rules_poll,
                                          .destroy_reader = rules_destroy_reader,
                                          .destroy = rules_destroy};

/* ---- the broadcast process function ---- */

typedef struct period {
    int64_t start;  /* period start (event time) */
    double spent;
    bool alerted;
} period_t;

typedef struct rules_fn {
    sl_state_t *period;       /* keyed: period_t per card */
    sl_bstate_t *thresholds;  /* broadcast: category (i64) -> threshold (double) */
    /* during apply_to_keyed_state */
    sl_collector_t *out;
    int64_t cat;
    double thr;
} rules_fn_t;

static void *fn_clone(const void *ctx) { return calloc(1, sizeof(rules_fn_t)); }
static void fn_free(void *ctx) { free(ctx); }

static int fn_open(void *ctx, sl_rt_t *rt) {
    rules_fn_t *f = ctx;
    f->period = sl_state_value(rt, "period");
    f->thresholds = sl_bstate_get_state(rt, "thresholds");
    return f->period && f->thresholds ? 0 : SL_EINVAL;
}

static void alert(sl_collector_t *out, int64_t card, const period_t *p, double thr, int64_t reason) {
    sl_row_writer_t *w = sl_out_row(out);
    sl_rw_set_i64(w, 0, card);
    sl_rw_set_i64(w, 1, card % CATEGORIES);
    sl_rw_set_i64(w, 2, p->start);
    sl_rw_set_f64(w, 3, p->spent);
    sl_rw_set_f64(w, 4, thr);
    sl_rw_set_i64(w, 5, reason);
    sl_emit(out);
}

static int fn_element(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    rules_fn_t *f = ctx;
    int64_t card = sl_row_i64(&in->row, 0), ts = sl_row_i64(&in->row, 2);
    double amount = sl_row_f64(&in->row, 1);
    uint32_t len;
    const period_t *old = sl_value_get(f->period, &len);
    period_t p = {ts - ts % PERIOD_MS, 0, false};
    if (old && len == sizeof p && old->start == p.start) p = *old;
    if (old && old->start > p.start) return 0; /* a late transaction of an earlier period */
    p.spent += amount;
    int64_t cat = card % CATEGORIES;
    const double *thr = sl_bstate_get(f->thresholds, &cat, sizeof cat, &len);
    if (thr && !p.alerted && p.spent > *thr) {
        p.alerted = true;
        alert(out, card, &p, *thr, 0);
    }
    return sl_value_put(f->period, &p, sizeof p);
}

static int recheck(void *c, const uint8_t *key, uint32_t keylen, sl_state_t *st) {
    rules_fn_t *f = c;
    int64_t card;
    memcpy(&card, key, sizeof card);
    if (card % CATEGORIES != f->cat) return 0;
    uint32_t len;
    const period_t *old = sl_value_get(st, &len);
    if (!old || len != sizeof *old || old->alerted || old->spent <= f->thr) return 0;
    period_t p = *old;
    p.alerted = true;
    alert(f->out, card, &p, f->thr, 1);
    return sl_value_put(st, &p, sizeof p);
}

static int fn_broadcast(void *ctx, sl_bctx_t *bc, const sl_record_t *in, sl_collector_t *out) {
    rules_fn_t *f = ctx;
    int64_t cat = sl_row_i64(&in->row, 0);
    double thr = sl_row_f64(&in->row, 1);
    uint32_t len;
    const double *old = sl_bstate_get(f->thresholds, &cat, sizeof cat, &len);
    bool lowered = old && thr < *old;
    int rc = sl_bstate_put(f->thresholds, &cat, sizeof cat, &thr, sizeof thr);
    if (rc < 0 || !lowered) return rc;
    f->out = out;
    f->cat = cat;
    f->thr = thr;
    rc = sl_bctx_apply_to_keyed_state(bc, f->period, recheck, f);
    return rc < 0 ? rc : 0;
}

int main(int argc, char **argv) {
    sl_datagen_opts_t g = sl_datagen_defaults();
    g.count = 400000;
    g.cards = 2000;
    g.rate = 100000;
    g.late_fraction = 0;
    int p = 2;
    bool print = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--count") && i + 1 < argc)
            g.count = atoll(argv[++i]);
        else if (!strcmp(argv[i], "--rate") && i + 1 < argc)
            g.rate = atof(argv[++i]);
        else if (!strcmp(argv[i], "--parallelism") && i + 1 < argc)
            p = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--print"))
            print = true;
        else {
            fprintf(stderr, "usage: %s [--count N] [--rate EVENTS_PER_S] [--parallelism P] [--print]\n", argv[0]);
            return 2;
        }
    }
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, p);
    sl_stream_t *txns = sl_uid(sl_from_source(env, sl_datagen_source(g), sl_wm_bounded("ts", 5000), "transactions"),
                               "transactions");
    rules_src_t *rs = calloc(1, sizeof *rs);
    /* rules keep coming over the run: about one every 1/40 of it */
    rs->nrules = 56;
    rs->interval_ms = g.rate > 0 ? (int64_t)(g.count / g.rate * 1000.0 / 40.0) + 1 : 10;
    rs->schema = sl_schema_parse("category BIGINT NOT NULL, threshold DOUBLE NOT NULL", NULL, 0);
    sl_stream_t *rules = sl_uid(sl_parallelism(sl_from_source(env, (sl_source_t){&rules_ops, rs, rs->schema},
                                                              sl_wm_none(), "rules"),
                                               1),
                                "rules");
    const char *names[] = {"thresholds"};
    sl_broadcast_process_fn_t fn = {.open = fn_open,
                                    .process_element = fn_element,
                                    .process_broadcast_element = fn_broadcast,
                                    .opts = {.ctx = NULL, .ctx_clone = fn_clone, .ctx_free = fn_free}};
    sl_stream_t *alerts = sl_broadcast_process(
        sl_connect_broadcast(sl_key_by(txns, "card_id"), sl_broadcast_stream(rules, names, 1)), fn,
        sl_schema_parse("card_id BIGINT NOT NULL, category BIGINT NOT NULL, period_start TIMESTAMP(3) NOT NULL, "
                        "spent DOUBLE NOT NULL, threshold DOUBLE NOT NULL, reason BIGINT NOT NULL",
                        NULL, 0));
    alerts = sl_name(sl_uid(alerts, "rules-check"), "rules-check");
    sl_counting_sink_stats_t *stats = NULL;
    if (print) sl_sink_to(alerts, sl_print_sink("ALERT "), "print");
    sl_sink_to(alerts, sl_counting_sink(&stats), "count");
    int rc = sl_env_execute(env, "fraud-rules");
    if (rc < 0) {
        fprintf(stderr, "fraud_rules: %s\n", sl_env_error(env));
        sl_counting_sink_stats_free(stats);
        sl_env_destroy(env);
        return 1;
    }
    printf("%lld transactions, %d rule changes, %lld alerts\n", (long long)g.count, rs->nrules,
           (long long)sl_counting_sink_count(stats));
    sl_counting_sink_stats_free(stats);
    sl_env_destroy(env);
    return 0;
}
