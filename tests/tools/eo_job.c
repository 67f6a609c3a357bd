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

#include "card_windows.h"
#include "sluice/sluice.h"

static int copy_row(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    sl_rw_copy_row(out, &in->row);
    return 0;
}

/* --window: count and sum per card and 1-minute window (card_windows.h) */
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
    sl_datagen_opts_t g = cw_generator(n, 200000);
    if (!window) { /* the plain job: the generator's defaults for cards and disorder */
        sl_datagen_opts_t d = sl_datagen_defaults();
        g.cards = d.cards;
        g.late_fraction = d.late_fraction;
        g.max_disorder_ms = d.max_disorder_ms;
        g.ts_step_ms = d.ts_step_ms;
    }
    sl_stream_t *s = sl_uid(sl_from_source(env, sl_datagen_source(g), window ? sl_wm_bounded("ts", 5000) : sl_wm_none(),
                                           "gen"),
                            "gen");
    if (window) {
        s = cw_windows(s);
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
