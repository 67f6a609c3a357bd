/*
 * metrics.h — live metrics of a running job, with Apache Flink's names.
 *
 * Every subtask publishes, per chained operator, numRecordsIn,
 * numRecordsOut, currentInputWatermark, currentOutputWatermark and
 * numLateRecordsDropped (window operators), and per task the time shares
 * busyTimeMsPerSecond, backPressuredTimeMsPerSecond and idleTimeMsPerSecond
 * (milliseconds per second over the last reporting interval; together
 * about 1000).  The TaskManager reports them to the JobManager every 200 ms
 * and once more when a subtask ends, so the last values a listener sees
 * for a subtask are its final ones.
 *
 * Embedded mode: install a listener before sl_env_execute.
 */
#ifndef SLUICE_METRICS_H
#define SLUICE_METRICS_H

#include <stdint.h>

#include "sluice.h"

/* One operator of one subtask, as of the latest report.  Strings are valid
 * during the listener call only. */
typedef struct sl_operator_metrics {
    const char *operator_name;   /* the operator's name ("window", "Source: numbers") */
    const char *operator_uid;    /* its uid (user's or derived) */
    const char *task_name;       /* the task (chain) it runs in */
    int vertex;                  /* the job vertex (index in the plan) */
    int subtask_index;
    int chain_index;             /* position in the chain, 0 = head */
    int64_t num_records_in, num_records_out;
    int64_t current_input_watermark, current_output_watermark; /* ms; INT64_MIN: none yet */
    int64_t num_late_records_dropped;
    int64_t pending_records;     /* sources that know it (Kafka: the lag over its partitions); -1 otherwise */
    /* the task's (the same for every operator of its chain): bytes of the
     * network buffers it read from its inputs and handed to its outputs
     * (numBytesIn / numBytesOut; 0 for a task without them) */
    int64_t num_bytes_in, num_bytes_out;
    /* the task's time shares over the last interval (-1 until two reports) */
    double busy_time_ms_per_second, back_pressured_time_ms_per_second, idle_time_ms_per_second;
    /* the job's attempt (0, +1 per restart): a restarted subtask counts
     * from 0 again, as in Flink */
    int attempt;
    /* Keyed operators: stateMemoryBytes, the bytes its keyed state holds in
     * memory (-1: no keyed state).  Heap backend: tables, cells and
     * out-of-line values of live state, counted at allocation (copies a
     * running checkpoint still holds are not counted).  RocksDB: memtables
     * + table readers + the value cache (+ the block cache when it is the
     * backend's own).  Flink has no such metric for its heap backend. */
    int64_t state_memory_bytes;
    /* RocksDB only (-1 otherwise), Flink's RocksDB native metrics: the
     * properties rocksdb.cur-size-all-mem-tables,
     * rocksdb.estimate-table-readers-mem, rocksdb.block-cache-usage (the
     * whole cache when shared) and rocksdb.estimate-live-data-size
     * (bytes of live data in SST files, on disk).  Read every 50 ms at most. */
    int64_t rocksdb_cur_size_all_mem_tables, rocksdb_estimate_table_readers_mem;
    int64_t rocksdb_block_cache_usage, rocksdb_estimate_live_data_size;
} sl_operator_metrics_t;

/* Called by the JobManager each time a subtask's report arrives, with
 * one entry per chained operator of that subtask (n entries).  Runs on the
 * JobManager's message thread: keep it short, do not call back into the
 * environment.  ctx is the caller's. */
typedef void (*sl_metrics_listener_fn)(void *ctx, const sl_operator_metrics_t *ops, int n);

/* Installs (fn) or removes (NULL) the listener of the next sl_env_execute.
 * Call from the thread that owns env, before sl_env_execute. */
SL_API void sl_env_set_metrics_listener(sl_env_t *env, sl_metrics_listener_fn fn, void *ctx);

#endif
