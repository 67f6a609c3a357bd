/*
 * fraud_job.h — scenario S1, the fraud pipeline: card transactions, event
 * time from the payload with 5 s bounded out-of-orderness, key_by(card_id),
 * 5-minute tumbling event-time windows keeping count and sum per card,
 * late events to a side output.  `sluice` runs it on the built-in
 * generator; it also reads a JSON-lines or CSV file of transactions.
 */
#ifndef SL_FRAUD_JOB_H
#define SL_FRAUD_JOB_H

#include "sluice/config.h"
#include "sluice/sluice.h"

typedef struct fraud_opts {
    const char *input;          /* NULL: the generator */
    sl_format_t input_format;
    sl_error_policy_t on_error;
    sl_datagen_opts_t gen;
    int parallelism;
    int64_t window_ms;          /* 5 minutes */
    int64_t out_of_orderness_ms;/* 5 s */
    int64_t allowed_lateness_ms;
    int64_t idle_timeout_ms;
    const char *output;         /* window results (JSON lines) */
    const char *late_output;    /* late events (JSON lines) */
    bool print;                 /* also print results to stdout */
    int64_t checkpoint_interval_ms; /* 0: no checkpoints */
    const char *checkpoint_dir;     /* execution.checkpointing.dir */
    const char *from_checkpoint;    /* restore from this chk-<n> or job directory */
    const char *exactly_once_dir;   /* results through the exactly-once file sink instead */
    const sl_config_t *config;  /* config.yaml settings, applied first (NULL: none) */
} fraud_opts_t;

typedef struct fraud_summary {
    int64_t events_in;
    int64_t windows_out;
    int64_t late_events;
    int64_t skipped;
    int64_t checkpoints;
    int64_t ckpt_last_ms, ckpt_max_ms, ckpt_max_sync_us;
    /* the last completed checkpoint, whole and per task */
    sl_checkpoint_stat_t ckpt_last;
    sl_checkpoint_task_stat_t ckpt_tasks[16];
    char ckpt_task_names[16][96];
    int ckpt_ntasks;
    double seconds;
} fraud_summary_t;

fraud_opts_t fraud_defaults(void);
/* Builds the job on env (a cluster's processes each build it, sluice/job.h);
 * on error returns < 0 with a message in err. */
int fraud_build(sl_env_t *env, const fraud_opts_t *o, char *err, size_t errlen);
/* Builds and runs the job; on error returns < 0 with a message in err. */
int fraud_run(const fraud_opts_t *o, fraud_summary_t *sum, char *err, size_t errlen);

#endif
