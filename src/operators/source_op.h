/*
 * source_op.h — the source operator (head of a source task: polls a
 * connector's reader, assigns timestamps, generates watermarks per split
 * and combines them) and the timestamps/watermarks operator used by
 * sl_assign_timestamps.
 */
#ifndef SL_SOURCE_OP_H
#define SL_SOURCE_OP_H

#include "operators/operator.h"

void *sl_source_spec_new(const sl_source_t *src, sl_watermark_strategy_t ws);
void sl_source_spec_free(void *spec);
sl_operator_t *sl_source_op_create(const void *spec, const sl_op_init_t *init);
/* Runs the reader for up to max records (they go down the chain).  Returns
 * SL_SRC_MORE, SL_SRC_IDLE, SL_SRC_END or < 0 (the task has the message).
 * On SL_SRC_END the maximum watermark has been emitted. */
int sl_source_op_poll(sl_operator_t *op, int max);
/* The next processing time at which the source wants to run its periodic
 * watermark emission (INT64_MAX when none). */
int64_t sl_source_op_next_tick(sl_operator_t *op);
/* The CLOCK_MONOTONIC time the reader asked to be polled again at, from the
 * last poll that returned SL_SRC_IDLE (0: it did not say). */
int64_t sl_source_op_idle_until_ns(sl_operator_t *o);
int64_t sl_source_op_skipped(sl_operator_t *op);
/* The reader's pendingRecords (sl_source_ops_t.pending_records): -1 unknown, 0 once ended. */
int64_t sl_source_op_pending(sl_operator_t *op);
/* Stop with --drain: emits the maximum watermark down the chain (as at the
 * end of input) without ending the reader, and emits no watermark after. */
void sl_source_op_drain(sl_operator_t *op);

void *sl_timestamps_spec_new(const sl_schema_t *schema, sl_watermark_strategy_t ws);
void sl_timestamps_spec_free(void *spec);
sl_operator_t *sl_timestamps_op_create(const void *spec, const sl_op_init_t *init);

/* A source output that captures what a reader emits, for connector unit
 * tests (no job, no operator). */
sl_source_output_t *sl_src_output_test_new(const sl_schema_t *schema);
int64_t sl_src_output_test_count(const sl_source_output_t *o);
/* The i-th captured record (row bytes owned by the capture). */
sl_record_t sl_src_output_test_get(const sl_source_output_t *o, int64_t i);
int sl_src_output_test_split(const sl_source_output_t *o, int64_t i);
bool sl_src_output_test_finished(const sl_source_output_t *o, int split);
int64_t sl_src_output_test_skipped(const sl_source_output_t *o);
/* Forgets the captured records (keeps counters of finished splits). */
void sl_src_output_test_clear(sl_source_output_t *o);
void sl_src_output_test_free(sl_source_output_t *o);

#endif
