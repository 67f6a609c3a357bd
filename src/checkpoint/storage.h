/*
 * storage.h — checkpoint storage: where checkpoints live, how one becomes
 * complete, and how completed ones are found, loaded and deleted
 * (Flink's CheckpointStorage plus its CompletedCheckpointStore's files).
 *
 * The interface is a table of function pointers (like SQLite's VFS); the
 * filesystem implementation (fs_storage.c) works on a local path or a
 * shared mount, the S3 one (s3_storage.c) on s3://bucket/prefix, with the
 * same layout as keys and the same guarantees (see s3_storage.c for how
 * they are kept without directories or rename).
 * Layout, as Flink's:
 *
 *     <base>/<job-id>/chk-<n>/            state files of checkpoint n
 *     <base>/<job-id>/chk-<n>/_metadata   written last; its presence makes n complete
 *     <base>/<job-id>/shared/             files several checkpoints reference (incremental)
 *     <base>/<job-id>/taskowned/          files the tasks own
 *
 * Completion protocol (commit): state files are durable before their
 * handles reach the coordinator (sl_sf_writer_close fsyncs them); commit
 * fsyncs the directories holding them, writes `_metadata.tmp`, fsyncs it,
 * renames it to `_metadata` and fsyncs the directory.  Only when commit
 * returns 0 may the coordinator tell the tasks that checkpoint n is
 * complete.  A crash at any point leaves either no `_metadata` (an
 * incomplete checkpoint, ignored by every lookup) or a complete one.
 * Deletion runs the other way: `_metadata` is removed (and the removal made
 * durable) before any state file, so a crash mid-deletion never leaves a
 * `_metadata` whose files are gone.
 *
 * "Complete" in listings means `_metadata` exists; it is verified only
 * when loaded.  A `_metadata` that fails verification is reported by load
 * (SL_EFORMAT naming the file), never skipped: sl_ckpt_storage_load_latest
 * does NOT fall back to an older checkpoint.  Falling back silently would
 * restore state older than what two-phase-commit sinks already committed
 * for the newer checkpoint (duplicates downstream), which is why Flink
 * fails too.  An operator who accepts that can load an older one by id.
 *
 * Errors: 0 or a negative SL_E* code with a message naming the path:
 * SL_ENOTFOUND (no such checkpoint or file), SL_EFORMAT (damaged),
 * SL_EIO (the filesystem failed; retriable), SL_EINVAL (misuse).
 *
 * Threading: open_output, open_input, location and sl_ckpt_storage_open_state
 * may be called from any thread at once (tasks write their state files in
 * parallel).  Everything else belongs to the checkpoint coordinator's
 * thread.
 */
#ifndef SL_CKPT_STORAGE_H
#define SL_CKPT_STORAGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "checkpoint/metadata.h"
#include "checkpoint/state_file.h"

#define SL_CKPT_METADATA_NAME "_metadata"
#define SL_CKPT_METADATA_TMP_NAME "_metadata.tmp"

typedef struct sl_ckpt_storage sl_ckpt_storage_t;

/* One checkpoint found in storage. */
typedef struct sl_ckpt_entry {
    int64_t id;
    bool complete; /* has _metadata (not yet verified) */
} sl_ckpt_entry_t;

typedef struct sl_ckpt_storage_ops {
    const char *name; /* "filesystem", ... */

    /* Creates the directory of checkpoint id (>= 1).  A leftover incomplete
     * directory with that id (an attempt that died) is removed first; a
     * complete one is an error (SL_EINVAL). */
    int (*create_checkpoint)(sl_ckpt_storage_t *s, int64_t id, char *err, size_t errlen);

    /* The location of a scope's directory (name NULL) or of a file in it,
     * as a path (or URI) for messages and for tools that write files
     * themselves (RocksDB's native checkpoint).  id is used by
     * SL_CKPT_SCOPE_EXCLUSIVE only.  SL_EINVAL if it does not fit in cap. */
    int (*location)(sl_ckpt_storage_t *s, int64_t id, sl_ckpt_scope_t scope, const char *name, char *buf,
                    size_t cap);

    /* A new durable output stream for file `name` (a plain file name, see
     * sl_ckpt_valid_file_name; "_metadata*" is reserved) in the scope's
     * directory; an existing file is replaced.  Usually wrapped by
     * sl_sf_writer_new. */
    int (*open_output)(sl_ckpt_storage_t *s, int64_t id, sl_ckpt_scope_t scope, const char *name,
                       sl_ckpt_out_t **out, char *err, size_t errlen);
    /* An input stream over an existing file (SL_ENOTFOUND if missing). */
    int (*open_input)(sl_ckpt_storage_t *s, int64_t id, sl_ckpt_scope_t scope, const char *name,
                      sl_ckpt_in_t **in, char *err, size_t errlen);

    /* Makes checkpoint md->checkpoint_id complete by writing md as its
     * _metadata, atomically and durably (see above).  md must be a valid
     * checkpoint (not savepoint) of this storage's job; the directory must
     * exist and not be complete yet. */
    int (*commit)(sl_ckpt_storage_t *s, const sl_ckpt_metadata_t *md, char *err, size_t errlen);

    /* Reads, verifies and validates the _metadata of checkpoint id; checks
     * that it names this id and job.  SL_ENOTFOUND when the checkpoint does
     * not exist or is incomplete; SL_EFORMAT when it is damaged.  On
     * success *md is new (sl_ckpt_metadata_free). */
    int (*load)(sl_ckpt_storage_t *s, int64_t id, sl_ckpt_metadata_t **md, char *err, size_t errlen);

    /* Every checkpoint directory, complete or not, in ascending id order.
     * *entries is new (sl_free), NULL when *n is 0. */
    int (*list)(sl_ckpt_storage_t *s, sl_ckpt_entry_t **entries, int *n, char *err, size_t errlen);

    /* Deletes checkpoint id (its _metadata first, then everything in its
     * directory).  Never touches shared/ or taskowned/.  SL_ENOTFOUND if
     * there is no such directory. */
    int (*discard)(sl_ckpt_storage_t *s, int64_t id, char *err, size_t errlen);
    /* Deletes the directory of a checkpoint that never completed (a
     * failed, timed-out or subsumed attempt).  SL_EINVAL if it is complete
     * (use discard); SL_ENOTFOUND if there is no such directory. */
    int (*abort_pending)(sl_ckpt_storage_t *s, int64_t id, char *err, size_t errlen);
    /* Deletes everything of this job, including shared/ and taskowned/
     * (the end of a job whose checkpoints are not retained).  Afterwards
     * only destroy may be called. */
    int (*discard_all)(sl_ckpt_storage_t *s, char *err, size_t errlen);
    /* Deletes one file of the shared or task-owned scope (incremental
     * checkpoints' files no retained checkpoint refers to any more).
     * SL_ENOTFOUND if it does not exist. */
    int (*remove_file)(sl_ckpt_storage_t *s, sl_ckpt_scope_t scope, const char *name, char *err, size_t errlen);
    /* The file names of the shared or task-owned scope (*names new: free
     * each and the array with sl_free). */
    int (*list_files)(sl_ckpt_storage_t *s, sl_ckpt_scope_t scope, char ***names, int *n, char *err, size_t errlen);

    /* Makes the savepoint md (type SAVEPOINT, every handle exclusive) whose
     * files were written into chk-<id> complete at a directory of its own:
     * moves chk-<id> to <parent>/savepoint-<first 6 of the job id>-<12 random
     * hex> (Flink's name; parent is created), then writes _metadata there
     * last, as commit does.  The path goes to location.  A savepoint is never
     * a checkpoint of this storage: lookups never see it. */
    int (*commit_savepoint)(sl_ckpt_storage_t *s, const sl_ckpt_metadata_t *md, const char *parent, char *location,
                            size_t cap, char *err, size_t errlen);

    void (*destroy)(sl_ckpt_storage_t *s);
} sl_ckpt_storage_ops_t;

/* The part every implementation shares; implementations embed it first. */
struct sl_ckpt_storage {
    const sl_ckpt_storage_ops_t *ops;
    char *job_id;
};

/* Deletes the savepoint at path (`sluice savepoint --dispose`): checks its
 * _metadata says savepoint (a checkpoint's directory is refused), removes
 * _metadata first (durably), then the files, then the directory.  A path
 * with no _metadata is SL_ENOTFOUND, naming it. */
int sl_ckpt_savepoint_dispose(const char *path, char *err, size_t errlen);

/* The storage for job_id under uri, chosen by its scheme: "s3://bucket/prefix"
 * is S3 storage (s3_storage.c; endpoint and credentials from the s3.* keys
 * of this process's configuration or the AWS environment variables, see
 * checkpoint/s3_client.h), anything without a scheme a filesystem path
 * (sl_ckpt_storage_fs_open).  Opening S3 storage lists the bucket once, so
 * a missing credential, a bad URI or an unreachable bucket is reported here,
 * naming it, when the job starts. */
int sl_ckpt_storage_open(const char *uri, const char *job_id, sl_ckpt_storage_t **s, char *err, size_t errlen);

/* S3 storage for job_id under "s3://bucket/prefix": keys
 * <prefix>/<job-id>/chk-<n>/..., shared/..., taskowned/... .  cfg NULL:
 * sl_s3_config_resolve's (s3_client.h).  Nothing is created (S3 has no
 * directories); the bucket must exist. */
struct sl_s3_config;
int sl_ckpt_storage_s3_open(const char *uri, const char *job_id, const struct sl_s3_config *cfg,
                            sl_ckpt_storage_t **s, char *err, size_t errlen);
/* sl_ckpt_savepoint_dispose for an s3:// savepoint (it calls this). */
int sl_ckpt_s3_savepoint_dispose(const char *uri, char *err, size_t errlen);

/* Filesystem storage for job_id under base_dir: creates base_dir (and its
 * parents), <job-id>/, shared/ and taskowned/ when missing, durably.
 * job_id must be a plain file name. */
int sl_ckpt_storage_fs_open(const char *base_dir, const char *job_id, sl_ckpt_storage_t **s, char *err,
                            size_t errlen);

/* ------------------------------------------------------------------ */
/* Built on the ops, for every implementation. */

/* Ids of complete checkpoints, ascending.  *ids is new (sl_free). */
int sl_ckpt_storage_list_completed(sl_ckpt_storage_t *s, int64_t **ids, int *n, char *err, size_t errlen);
/* The highest id that has _metadata (not verified).  SL_ENOTFOUND (and
 * *id = 0) when there is none. */
int sl_ckpt_storage_latest_complete_id(sl_ckpt_storage_t *s, int64_t *id, char *err, size_t errlen);
/* Loads the latest complete checkpoint.  Incomplete directories are
 * skipped silently; a damaged latest _metadata is an error naming the
 * file — no fallback (see the top of this file).  SL_ENOTFOUND when there
 * is no complete checkpoint. */
int sl_ckpt_storage_load_latest(sl_ckpt_storage_t *s, sl_ckpt_metadata_t **md, char *err, size_t errlen);
/* Keeps the num_retained (>= 1) newest complete checkpoints and discards
 * the older complete ones, then deletes the shared files that a discarded
 * checkpoint referred to and no retained one does (Flink's
 * SharedStateRegistry: a file uploaded for a checkpoint still pending is
 * referred to by no discarded one, so it stays).  Incomplete directories
 * are left alone.  Tries every deletion; returns the first error. */
int sl_ckpt_storage_retain(sl_ckpt_storage_t *s, int num_retained, char *err, size_t errlen);
/* Deletes the shared files that no complete checkpoint refers to: what
 * checkpoints that never completed had uploaded.  Only while no checkpoint
 * is pending (at the start and the end of a run).  When a complete
 * checkpoint cannot be read, nothing is deleted. */
int sl_ckpt_storage_gc_shared(sl_ckpt_storage_t *s, char *err, size_t errlen);
/* Removes every incomplete checkpoint directory (at startup, before the
 * coordinator triggers anything: never while checkpoints are pending). */
int sl_ckpt_storage_abort_all_pending(sl_ckpt_storage_t *s, char *err, size_t errlen);
/* Opens the state file of a handle of checkpoint id and checks that it is
 * the file the metadata describes (kind, size, checksum, sections); a file
 * that was replaced or damaged is SL_EFORMAT naming it.  flags: as
 * sl_sf_reader_new (0 verifies the whole file now; SL_SF_LAZY each
 * section when it is read). */
int sl_ckpt_storage_open_state(sl_ckpt_storage_t *s, int64_t id, const sl_ckpt_state_handle_t *h, int flags,
                               sl_state_file_reader_t **r, char *err, size_t errlen);

#endif
