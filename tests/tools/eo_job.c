/*
 * eo_job — a checkpointed job for the kill -9 test: generator (4 splits,
 * rate-limited) -> map -> exactly-once file sink (parallelism 2),
 * checkpoints every 30 ms.  `eo_job OUT CKPT N [--restore]`: with
 * --restore it resumes from the latest complete checkpoint in CKPT (if
 * there is one), as `sluice run --from-checkpoint` does.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sluice/sluice.h"

static int copy_row(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    sl_rw_copy_row(out, &in->row);
    return 0;
}

/* --window: count and sum (in cents) per card and 1-minute window */
typedef struct acc {
    int64_t n, cents;
} acc_t;
static void a_init(void *c, void *a) { memset(a, 0, sizeof(acc_t)); }
static int a_add(void *c, void *a, const sl_record_t *in) {
    acc_t *x = a;
    x->n++;
    x->cents += (int64_t)(sl_row_f64(&in->row, 1) * 100 + 0.5);
    return 0;
}
static void a_merge(void *c, void *a, const void *b) {
    ((acc_t *)a)->n += ((const acc_t *)b)->n;
    ((acc_t *)a)->cents += ((const acc_t *)b)->cents;
}
static int a_result(void *c, const void *a, const uint8_t *key, uint32_t kl, const sl_window_t *w, sl_row_writer_t *o) {
    const acc_t *x = a;
    int64_t card;
    memcpy(&card, key, 8);
    sl_rw_set_i64(o, 0, card);
    sl_rw_set_i64(o, 1, w->start);
    sl_rw_set_i64(o, 2, x->n);
    sl_rw_set_i64(o, 3, x->cents);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: eo_job OUT_DIR CKPT_DIR EVENTS [--restore]\n");
        return 2;
    }
    const char *out = argv[1], *ckpt = argv[2];
    long long n = atoll(argv[3]);
    bool restore = false, window = false;
    int par = 2;
    for (int i = 4; i < argc; i++) {
        restore = restore || strcmp(argv[i], "--restore") == 0;
        window = window || strcmp(argv[i], "--window") == 0;
        if (strncmp(argv[i], "--p=", 4) == 0) par = atoi(argv[i] + 4);
    }
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, par);
    sl_env_enable_checkpointing(env, 30, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, ckpt);
    sl_env_set_checkpoints_retained(env, 2);
    if (restore) {
        char job[4096], meta[4200];
        snprintf(job, sizeof job, "%s/eo-kill", ckpt);
        /* any complete checkpoint? (a kill before the first one: start fresh) */
        struct stat st;
        bool any = false;
        for (int i = 1; i < 100000 && !any; i++) {
            snprintf(meta, sizeof meta, "%s/chk-%d/_metadata", job, i);
            any = stat(meta, &st) == 0;
        }
        if (any && sl_env_restore_from(env, job) != 0) {
            fprintf(stderr, "eo_job: %s\n", sl_env_error(env));
            return 1;
        }
        if (any) fprintf(stderr, "eo_job: restored\n");
    }
    sl_datagen_opts_t g = sl_datagen_defaults();
    g.seed = 7;
    g.count = n;
    g.splits = 4;
    g.rate = 200000;
    if (window) {
        g.cards = 500;
        g.late_fraction = 0;     /* no late events: results do not depend on timing */
        g.max_disorder_ms = 2000; /* < the 5 s bound */
        g.ts_step_ms = 2;
    }
    sl_stream_t *s = sl_uid(sl_from_source(env, sl_datagen_source(g), window ? sl_wm_bounded("ts", 5000) : sl_wm_none(),
                                           "gen"),
                            "gen");
    if (window) {
        sl_aggregate_fn_t agg = {.acc_size = sizeof(acc_t), .init = a_init, .add = a_add, .merge = a_merge,
                                 .result = a_result};
        s = sl_window_aggregate(sl_window(sl_key_by(s, "card_id"), sl_tumbling_event_time(60000, 0)), agg,
                                sl_schema_parse("card BIGINT NOT NULL, start BIGINT NOT NULL, n BIGINT NOT NULL, "
                                                "cents BIGINT NOT NULL",
                                                NULL, 0));
        sl_uid(s, "windows");
    } else {
        s = sl_uid(sl_map(s, copy_row, NULL, sl_datagen_schema()), "copy");
    }
    sl_uid(sl_sink_to(sl_rebalance(s), sl_exactly_once_file_sink(out, SL_FMT_CSV), "files"), "files");
    int rc = sl_env_execute(env, "eo-kill");
    if (rc != 0) fprintf(stderr, "eo_job: %s\n", sl_env_error(env));
    sl_env_destroy(env);
    return rc == 0 ? 0 : 1;
}
