/*
 * spilled_blob.h — state too large for the checkpoint's metadata, in a file
 * of its own (Flink's state.storage.fs.memory-threshold: small state handles
 * are inline in the metadata, larger ones are files).
 *
 * A subtask's blobs ("operator-state", "inflight", ...) travel inline in the
 * acknowledgement to the JobManager and end up inline in `_metadata`.  A
 * 2PC sink's pending output or a backpressured unaligned checkpoint's
 * in-flight data can be far larger than a control message may be (16 MiB),
 * so a blob above SL_CKPT_INLINE_MAX is written by the TaskManager into a
 * state file (kind SL_SF_KIND_OPERATOR, or SL_SF_KIND_CHANNEL for in-flight
 * data) in the checkpoint's exclusive scope, listed among the subtask's
 * files: section 0 holds the blob's distribution (u8) and name, section 1
 * its bytes.  Whoever reads a checkpoint's blobs (a restore, `sluice state
 * read`) calls sl_ckpt_load_spilled first, which puts every spilled blob
 * back into its subtask as if it had been inline.
 */
#ifndef SL_CKPT_SPILLED_BLOB_H
#define SL_CKPT_SPILLED_BLOB_H

#include "checkpoint/metadata.h"
#include "checkpoint/storage.h"

#define SL_CKPT_INLINE_MAX ((size_t)1 << 20)

/* Adds blob `name` to st: inline if len <= SL_CKPT_INLINE_MAX (or storage
 * is NULL), else as the file `file` of checkpoint id in storage's exclusive
 * scope.  *bytes grows by the file's size.  0, or an error with a message. */
int sl_ckpt_add_blob_or_spill(sl_ckpt_storage_t *storage, int64_t id, sl_ckpt_subtask_t *st, const char *name,
                              sl_ckpt_distribution_t dist, const void *data, size_t len, const char *file,
                              int64_t *bytes, char *err, size_t errlen);

/* Reads every spilled blob of md (files relative to dir, the checkpoint's
 * directory or URL) into its subtask's blobs.  0, or SL_EFORMAT / SL_EIO
 * naming the file. */
int sl_ckpt_load_spilled(sl_ckpt_metadata_t *md, const char *dir, char *err, size_t errlen);

#endif
