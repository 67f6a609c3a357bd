/*
 * metadata.h — what a completed checkpoint (or savepoint) is: the
 * in-memory form of its `_metadata` file, and that file's encoding.
 *
 * The metadata lists, per operator (matched by uid, as Flink does) and per
 * subtask, the key-group range the subtask owned and the state it wrote:
 * handles to state files (with each file's size, checksum and section
 * table, so a restore at another parallelism reads only the key groups it
 * needs) and small inline blobs (operator state such as source offsets or
 * a sink's pending transactions).  Everything else goes into free-form
 * key/value properties.
 *
 * Savepoints reuse this structure: `type` says checkpoint or savepoint,
 * `format` says native (the backend's own files) or canonical (a
 * backend-independent encoding), and every file path is relative, so a
 * savepoint directory can be moved.  A savepoint must be self-contained:
 * it may not reference shared/ or taskowned/ files.
 *
 * Encoding: a state file of kind SL_SF_KIND_METADATA (state_file.h) with
 * three sections — 1: checkpoint (ids, times, job), 2: operators,
 * 3: properties.  A reader ignores sections it does not know, so later
 * versions can add information in new sections; a change that older
 * readers must not misread bumps SL_CKPT_MD_VERSION.
 *
 * Ownership: everything reachable from an sl_ckpt_metadata_t is owned by
 * it and freed by sl_ckpt_metadata_free.  The add_* builders copy their
 * arguments and return a pointer into the metadata that stays valid until
 * the next add_* on the same parent.
 */
#ifndef SL_CKPT_METADATA_H
#define SL_CKPT_METADATA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "checkpoint/state_file.h"
#include "state/key_group.h"

#define SL_CKPT_MD_VERSION 1u
/* Flink's upper bound for max parallelism (the number of key groups). */
#define SL_CKPT_MAX_PARALLELISM 32768

typedef enum sl_ckpt_type {
    SL_CKPT_CHECKPOINT = 0,
    SL_CKPT_SAVEPOINT = 1,
} sl_ckpt_type_t;

typedef enum sl_ckpt_format {
    SL_CKPT_FORMAT_NATIVE = 0,    /* the state backend's own files */
    SL_CKPT_FORMAT_CANONICAL = 1, /* backend-independent (savepoints) */
} sl_ckpt_format_t;

/* Where a handle's path is relative to (Flink's CheckpointedStateScope). */
typedef enum sl_ckpt_scope {
    SL_CKPT_SCOPE_EXCLUSIVE = 0, /* the checkpoint's own directory (chk-<n>/) */
    SL_CKPT_SCOPE_SHARED = 1,    /* <job>/shared/, referenced by several checkpoints */
    SL_CKPT_SCOPE_TASKOWNED = 2, /* <job>/taskowned/, owned by the tasks */
} sl_ckpt_scope_t;

/* How operator state is redistributed when parallelism changes. */
typedef enum sl_ckpt_distribution {
    SL_CKPT_DIST_SPLIT = 0,     /* the union of all subtasks' items, split evenly */
    SL_CKPT_DIST_UNION = 1,     /* every new subtask gets every item */
    SL_CKPT_DIST_BROADCAST = 2, /* identical on every subtask; any one copy */
} sl_ckpt_distribution_t;

/* A file holding state. */
typedef struct sl_ckpt_state_handle {
    char *path;          /* one file name, relative to the scope's directory */
    uint8_t scope;       /* sl_ckpt_scope_t */
    uint32_t kind;       /* SL_SF_KIND_* of the file */
    uint64_t size;       /* bytes */
    uint64_t checksum;   /* the file checksum from its trailer */
    int nsections;
    sl_sf_section_t *sections; /* ascending id; for keyed state, id = key group */
} sl_ckpt_state_handle_t;

/* Small state stored in the metadata itself. */
typedef struct sl_ckpt_blob {
    char *name;          /* e.g. "source-offsets"; unique within its owner */
    uint8_t distribution; /* sl_ckpt_distribution_t */
    uint8_t *data;
    size_t len;
} sl_ckpt_blob_t;

typedef struct sl_ckpt_subtask {
    int index;           /* 0 .. parallelism-1 */
    sl_kg_range_t range; /* key groups it owned (empty for non-keyed operators) */
    int nhandles;
    sl_ckpt_state_handle_t *handles;
    int nblobs;
    sl_ckpt_blob_t *blobs;
} sl_ckpt_subtask_t;

typedef struct sl_ckpt_operator {
    char *uid;           /* the stable identity state is matched by */
    int index;           /* operator index in the job graph at checkpoint time */
    int parallelism;     /* subtasks at checkpoint time */
    int max_parallelism; /* its number of key groups */
    sl_ckpt_subtask_t *subtasks; /* parallelism of them, by index */
    int nblobs;          /* coordinator-side state of the operator (e.g. split enumerator) */
    sl_ckpt_blob_t *blobs;
} sl_ckpt_operator_t;

typedef struct sl_ckpt_prop {
    char *key, *value;
} sl_ckpt_prop_t;

typedef struct sl_ckpt_metadata {
    int64_t checkpoint_id;  /* >= 1 */
    int64_t trigger_ts;     /* wall-clock ms when it was triggered */
    int64_t completion_ts;  /* wall-clock ms when every task had acknowledged */
    uint8_t type;           /* sl_ckpt_type_t */
    uint8_t format;         /* sl_ckpt_format_t */
    char *job_id;
    char *job_name;
    char *backend;          /* state backend that wrote native state ("heap", "rocksdb"); may be "" */
    int max_parallelism;    /* the job's default max parallelism */
    int noperators;
    sl_ckpt_operator_t *operators;
    int nprops;
    sl_ckpt_prop_t *props;
} sl_ckpt_metadata_t;

/* A new, empty metadata (strings ""; type checkpoint, format native). */
sl_ckpt_metadata_t *sl_ckpt_metadata_new(int64_t checkpoint_id, const char *job_id, const char *job_name,
                                         int max_parallelism);
void sl_ckpt_metadata_free(sl_ckpt_metadata_t *md);
/* Replaces a string field (job_id, job_name, backend) with a copy of s. */
void sl_ckpt_metadata_set_str(char **field, const char *s);

/* Adds an operator with `parallelism` subtasks whose key-group ranges are
 * those of sl_kg_range_for(max_parallelism, parallelism, i). */
sl_ckpt_operator_t *sl_ckpt_metadata_add_operator(sl_ckpt_metadata_t *md, const char *uid, int index, int parallelism,
                                                  int max_parallelism);
/* The operator with this uid, or NULL. */
sl_ckpt_operator_t *sl_ckpt_metadata_find_operator(const sl_ckpt_metadata_t *md, const char *uid);

/* Adds a handle to a finished state file, copying its size, checksum and
 * sections from the writer's info. */
sl_ckpt_state_handle_t *sl_ckpt_subtask_add_file(sl_ckpt_subtask_t *st, sl_ckpt_scope_t scope, const char *path,
                                                 const sl_sf_info_t *info);
/* Adds inline state to a subtask, or to the operator (coordinator-side state). */
sl_ckpt_blob_t *sl_ckpt_subtask_add_blob(sl_ckpt_subtask_t *st, const char *name, sl_ckpt_distribution_t dist,
                                         const void *data, size_t len);
sl_ckpt_blob_t *sl_ckpt_operator_add_blob(sl_ckpt_operator_t *op, const char *name, sl_ckpt_distribution_t dist,
                                          const void *data, size_t len);
/* Frees a subtask's handles and blobs (keeps index and range). */
void sl_ckpt_subtask_clear(sl_ckpt_subtask_t *st);
/* Appends src's handles and blobs to dst, which takes them over; src is
 * left empty.  (How the JobManager puts an acknowledgement's state into
 * the pending checkpoint's metadata.) */
void sl_ckpt_subtask_move(sl_ckpt_subtask_t *dst, sl_ckpt_subtask_t *src);
/* The blob with this name, or NULL. */
const sl_ckpt_blob_t *sl_ckpt_find_blob(const sl_ckpt_blob_t *blobs, int n, const char *name);

/* Sets (or replaces) a property; value NULL removes it. */
void sl_ckpt_metadata_set_prop(sl_ckpt_metadata_t *md, const char *key, const char *value);
/* The value of a property, or NULL. */
const char *sl_ckpt_metadata_get_prop(const sl_ckpt_metadata_t *md, const char *key);

/* Total bytes of the state files it references (for statistics). */
uint64_t sl_ckpt_metadata_state_size(const sl_ckpt_metadata_t *md);

/* True when path is one plain file name: not empty, no '/', not "." or
 * "..", no control characters, at most 255 bytes. */
bool sl_ckpt_valid_file_name(const char *path);

/* Checks every rule a metadata must follow (ids, ranges, uniqueness of
 * uids and names, valid file names, sections inside their files,
 * savepoints self-contained).  0 or SL_EINVAL with a message naming the
 * operator/subtask/handle that breaks a rule. */
int sl_ckpt_metadata_validate(const sl_ckpt_metadata_t *md, char *err, size_t errlen);

/* Validates md and writes it as a metadata state file to out (ownership
 * of out passes, also on error; finished durably on success). */
int sl_ckpt_metadata_write(const sl_ckpt_metadata_t *md, sl_ckpt_out_t *out, char *err, size_t errlen);
/* Reads and fully verifies a metadata file from in (ownership passes),
 * then decodes and validates it.  On success *md is new (caller frees).
 * Any damage is SL_EFORMAT naming the file; nothing is returned from a
 * file that fails. */
int sl_ckpt_metadata_read(sl_ckpt_in_t *in, sl_ckpt_metadata_t **md, char *err, size_t errlen);
/* Convenience: the same on local files. */
int sl_ckpt_metadata_write_file(const sl_ckpt_metadata_t *md, const char *path, char *err, size_t errlen);
int sl_ckpt_metadata_read_file(const char *path, sl_ckpt_metadata_t **md, char *err, size_t errlen);

/* Deep comparison (for tests and for checking a re-read). */
bool sl_ckpt_metadata_equal(const sl_ckpt_metadata_t *a, const sl_ckpt_metadata_t *b);

#endif
