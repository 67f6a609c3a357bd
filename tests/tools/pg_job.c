/*
 * pg_job — a checkpointed job for the PostgreSQL kill tests: generator
 * (4 splits, seed 7, rate-limited) -> map -> exactly-once PostgreSQL sink
 * (two-phase commit), checkpoints every 40 ms.
 *
 *   pg_job CONNINFO TABLE CKPT_DIR EVENTS [--restore] [--p=N] [--job=ID]
 *
 * The table is created by the sink (card_id BIGINT, amount DOUBLE,
 * ts TIMESTAMP(3)).  With --restore it resumes from the latest complete
 * checkpoint in CKPT_DIR (if there is one), as `sluice run
 * --from-checkpoint` does.  Exit 0 when the job finished, 1 when it failed.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "sluice/postgres.h"
#include "sluice/sluice.h"

static int copy_row(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    sl_rw_copy_row(out, &in->row);
    return 0;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: pg_job CONNINFO TABLE CKPT_DIR EVENTS [--restore] [--p=N] [--job=ID]\n");
        return 2;
    }
    const char *conninfo = argv[1], *table = argv[2], *ckpt = argv[3];
    long long n = atoll(argv[4]);
    bool restore = false;
    int par = 2;
    const char *job_id = "pgjob";
    for (int i = 5; i < argc; i++) {
        restore = restore || strcmp(argv[i], "--restore") == 0;
        if (strncmp(argv[i], "--p=", 4) == 0) par = atoi(argv[i] + 4);
        if (strncmp(argv[i], "--job=", 6) == 0) job_id = argv[i] + 6;
    }
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, par);
    sl_env_enable_checkpointing(env, 40, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, ckpt);
    sl_env_set_checkpoints_retained(env, 2);
    sl_env_set_restart_fixed_delay(env, 0, 0); /* a failure ends the process; the test restarts it */
    if (restore) {
        char job[4096], meta[4200];
        snprintf(job, sizeof job, "%s/pg-kill", ckpt);
        struct stat st;
        bool any = false;
        for (int i = 1; i < 100000 && !any; i++) {
            snprintf(meta, sizeof meta, "%s/chk-%d/_metadata", job, i);
            any = stat(meta, &st) == 0;
        }
        if (any && sl_env_restore_from(env, job) != 0) {
            fprintf(stderr, "pg_job: %s\n", sl_env_error(env));
            return 1;
        }
    }
    sl_datagen_opts_t g = sl_datagen_defaults();
    g.seed = 7;
    g.count = n;
    g.splits = 4;
    g.rate = 100000;
    sl_stream_t *s = sl_uid(sl_from_source(env, sl_datagen_source(g), sl_wm_none(), "gen"), "gen");
    s = sl_uid(sl_map(s, copy_row, NULL, sl_datagen_schema()), "copy");
    sl_pg_sink_opts_t o = sl_pg_sink_defaults();
    o.conninfo = conninfo;
    o.table = table;
    o.job_id = job_id;
    o.create_table = true;
    o.batch_bytes = 64 * 1024;
    sl_uid(sl_sink_to(sl_rebalance(s), sl_pg_sink(&o), "postgres"), "postgres");
    int rc = sl_env_execute(env, "pg-kill");
    if (rc != 0) fprintf(stderr, "pg_job: %s\n", sl_env_error(env));
    sl_env_destroy(env);
    return rc == 0 ? 0 : 1;
}
