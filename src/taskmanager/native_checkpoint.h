/*
 * native_checkpoint.h — incremental checkpoints of RocksDB state: the
 * native snapshot (task thread), its upload with shared files referred to
 * instead of uploaded again (writer thread), and the restore.  See
 * native_checkpoint.c.
 */
#ifndef SL_NATIVE_CHECKPOINT_H
#define SL_NATIVE_CHECKPOINT_H

#include <stdatomic.h>
#include <stdbool.h>

#include "checkpoint/metadata.h"
#include "checkpoint/storage.h"
#include "state/rocksdb_backend.h"

typedef struct sl_native_snap {
    char dir[1200];            /* the local native checkpoint (hard links) */
    sl_rocksdb_files_t files;
} sl_native_snap_t;

/* Shared files of one backend instance already in storage. */
typedef struct sl_native_upload {
    char *name;
    uint64_t size, checksum;
} sl_native_upload_t;

typedef struct sl_native_uploads {
    char instance[33];
    sl_native_upload_t *v;
    int n;
} sl_native_uploads_t;

/* Incremental checkpoints are on and kb is a RocksDB backend. */
bool sl_native_wanted(bool incremental, const sl_keyed_backend_t *kb);
/* The synchronous phase: a native checkpoint of kb under base_dir.  tag
 * names it (plain characters). */
int sl_native_snapshot(sl_keyed_backend_t *kb, const char *base_dir, const char *tag, sl_native_snap_t **out,
                       char *err, size_t errlen);
/* Removes the local directory and frees. */
void sl_native_snap_free(sl_native_snap_t *n);
/* The asynchronous phase: uploads what storage lacks, adds the handles and
 * the file list to sub; *bytes grows by the bytes uploaded.  private_prefix
 * names the checkpoint's own copies of MANIFEST, CURRENT and OPTIONS.
 * uploaded NULL (a native savepoint): every file, SST files too, is
 * copied into the checkpoint's own directory, so it needs nothing else. */
int sl_native_persist(sl_ckpt_storage_t *st, int64_t id, const sl_native_snap_t *n, const char *private_prefix,
                      sl_native_uploads_t *uploaded, sl_ckpt_subtask_t *sub, int64_t *bytes, char *err,
                      size_t errlen);
void sl_native_uploads_free(sl_native_uploads_t *u);
/* Moves the handles and blobs that sl_native_persist put into a scratch
 * subtask (filled without the metadata's lock) into dst (NULL: drops
 * them), and frees tmp's. */
void sl_native_move(sl_ckpt_subtask_t *dst, sl_ckpt_subtask_t *tmp);
/* Whether operator mo's state in a checkpoint is native RocksDB files. */
bool sl_native_present(const sl_ckpt_operator_t *mo);
/* A RocksDB backend for key groups `range` from the native files of mo in
 * the checkpoint at chk_path (its chk-<n> directory). */
int sl_native_restore(const char *chk_path, const sl_ckpt_operator_t *mo, int max_parallelism, sl_kg_range_t range,
                      const char *base_dir, const sl_rocksdb_opts_t *opts, sl_keyed_backend_t **out, char *err,
                      size_t errlen);
void sl_native_rm_rf(const char *dir);

#endif
