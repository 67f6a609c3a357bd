/*
 * s1_minimal.c — scenario S1 in as few lines as the C API allows: card
 * transactions with event time and a 5 s bound, key_by card, 5-minute
 * tumbling windows with count and sum, late events to a side output, both
 * written as JSON lines.  bench/loc/ holds the same job in Java and PyFlink
 * and counts the lines of all three (README, "How much code").
 *
 *   ./build/s1_minimal [events]      writes s1-windows.jsonl, s1-late.jsonl
 */
#include <stdio.h>
#include <stdlib.h>

#include "sluice/sluice.h"

int main(int argc, char **argv) {
    sl_env_t *env = sl_env_new();
    sl_datagen_opts_t gen = sl_datagen_defaults();
    gen.count = argc > 1 ? atoll(argv[1]) : 1000000;

    sl_stream_t *txns = sl_from_source(env, sl_datagen_source(gen), sl_wm_bounded("ts", 5000), "transactions");
    sl_windowed_t *w = sl_window(sl_key_by(txns, "card_id"), sl_tumbling_event_time(5 * 60 * 1000, 0));
    sl_window_late_output(w, "late");
    sl_stream_t *windows = sl_window_agg(w, "count(*) AS txn_count, sum(amount) AS total_amount");
    sl_sink_to(windows, sl_file_sink("s1-windows.jsonl", SL_FMT_JSON), "windows");
    sl_sink_to(sl_side_output(windows, "late"), sl_file_sink("s1-late.jsonl", SL_FMT_JSON), "late");

    int rc = sl_env_execute(env, "s1");
    if (rc < 0) fprintf(stderr, "s1: %s\n", sl_env_error(env));
    sl_env_destroy(env);
    return rc < 0 ? 1 : 0;
}
