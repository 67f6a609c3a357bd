/*
 * state_reader.h — reading a completed checkpoint's (or savepoint's) keyed
 * state from outside a job: find the checkpoint a path names, then walk one
 * operator's keyed state key group by key group as canonical keyed-state
 * blocks (the "SLKS" format of state_backend.h), which the caller parses
 * with sl_kbf_parse.  `sluice state read` (src/cli/state_read.c) is built
 * on it; so can any tool that inspects or migrates state.
 *
 * Two sources of blocks, one shape for the caller:
 *   - state files in the canonical format (heap checkpoints, full RocksDB
 *     checkpoints, savepoints): each key group's block is the section of
 *     that id in the SL_SF_KIND_KEYED file of the old subtask that owned
 *     the key group.  Every file is verified whole (all checksums) and
 *     against its handle (size, checksum) before a byte is used.
 *   - a keyed backend (e.g. one rebuilt from an incremental checkpoint's
 *     native RocksDB files by sl_native_restore): its snapshot is written
 *     key group by key group through the backend's own snapshot_write.
 *
 * Nothing here writes to the checkpoint or creates anything next to it.
 * Errors: 0 or a negative SL_E* code with a message naming the path or
 * file: SL_ENOTFOUND (no checkpoint, a missing file), SL_EFORMAT (damaged,
 * not a checkpoint), SL_EIO (the filesystem failed).
 *
 * The entries of blocks become JSON here too (sl_state_entries_t, below),
 * for `sluice state read` and for queries of a running job's state.
 *
 * Threading: no shared state; one call at a time per argument.
 */
#ifndef SL_CKPT_STATE_READER_H
#define SL_CKPT_STATE_READER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "checkpoint/metadata.h"
#include "state/state_backend.h"

/* Opens the checkpoint that path names: a chk-<n> or savepoint directory
 * (it holds _metadata), or a job's checkpoint directory (it holds shared/
 * and taskowned/; its latest complete chk-<n>, without fallback to an
 * older one when that one is damaged).  On success *md is new (the caller
 * frees it with sl_ckpt_metadata_free) and dir (cap bytes) is the
 * directory its state files' exclusive paths are relative to.  Never
 * creates a file or directory. */
int sl_ckpt_open_path(const char *path, sl_ckpt_metadata_t **md, char *dir, size_t cap, char *err,
                      size_t errlen);

/* Receives key group kg's canonical block (len >= 1 bytes, valid during
 * the call only).  Returns 0 to go on, or < 0 to stop (that code is
 * returned; the callback writes err). */
typedef int (*sl_ckpt_block_fn)(void *c, int kg, const uint8_t *block, size_t len, char *err, size_t errlen);

/* Calls fn for every key group of operator mo (0 .. max_parallelism-1,
 * ascending) that has a non-empty block in the canonical state files of
 * the checkpoint in dir (as sl_ckpt_open_path returned it).  A key group
 * with no file, or an empty section, has no state and is skipped.  A
 * missing, truncated, corrupt or replaced file is an error naming it. */
int sl_ckpt_keyed_blocks_from_files(const char *dir, const sl_ckpt_operator_t *mo, sl_ckpt_block_fn fn, void *c,
                                    char *err, size_t errlen);

/* Calls fn for every key group of kb's range, ascending, with the block
 * kb's snapshot writes for it.  kb is not changed (a snapshot is taken and
 * released).  The backend's thread. */
int sl_ckpt_keyed_blocks_from_backend(sl_keyed_backend_t *kb, sl_ckpt_block_fn fn, void *c, char *err,
                                      size_t errlen);

/* ------------------------------------------------------------------ */
/* Keyed-state entries as JSON: what `sluice state read` prints per line
 * and what a running job's state query answers (jobmanager/state_query.c),
 * so both print the same shape:
 *
 *   {"state":"seen","kind":"list","key_group":17,"key":"card-17","namespace":"","value":["a","b"]}
 *
 * A value is a string (value state), an array (list state, in list order)
 * or, for map state, an object of user key -> value sorted by user key (an
 * array of [user key, value] pairs when a user key cannot be an object
 * key).  Bytes are encoded per sl_state_bytes_t.  Threads: a collection
 * belongs to one thread at a time; different threads may each use their
 * own at once (sorting keeps its context per thread). */

typedef enum sl_state_bytes {
    SL_STATE_BYTES_AUTO = 0, /* a JSON string when UTF-8 without NUL, else {"hex":"..."} */
    SL_STATE_BYTES_UTF8,     /* strings; bytes that are not UTF-8 are an error */
    SL_STATE_BYTES_HEX,      /* every key, namespace, user key and value as lowercase hex */
    SL_STATE_BYTES_BASE64,   /* ... as base64 (RFC 4648, padded) */
} sl_state_bytes_t;

typedef struct sl_state_entries sl_state_entries_t;
struct json_t;

/* A new, empty collection; only (copied) keeps just that state's entries
 * (every state's name is still recorded), NULL keeps all. */
sl_state_entries_t *sl_state_entries_new(const char *only);
/* Parses key group kg's canonical block (sl_kbf_parse: checked whole) of
 * operator uid and adds its entries.  0, or < 0 with err naming the
 * operator and what is wrong. */
int sl_state_entries_add_block(sl_state_entries_t *e, int max_parallelism, const char *uid, int kg,
                               const uint8_t *block, size_t len, char *err, size_t errlen);
/* Entries collected; states the blocks declared (in first-seen order,
 * bytewise order after sort), and whether one is called name. */
size_t sl_state_entries_count(const sl_state_entries_t *e);
int sl_state_entries_nstates(const sl_state_entries_t *e);
const char *sl_state_entries_state(const sl_state_entries_t *e, int i);
bool sl_state_entries_declares(const sl_state_entries_t *e, const char *name);
/* Orders entries by state name, key bytes, namespace bytes, and the state
 * names bytewise. */
void sl_state_entries_sort(sl_state_entries_t *e);
/* Entry i as a JSON object (the caller owns the reference), or NULL with
 * err saying which bytes are not UTF-8 (SL_STATE_BYTES_UTF8 only). */
struct json_t *sl_state_entries_json(sl_state_entries_t *e, size_t i, sl_state_bytes_t mode, char *err,
                                     size_t errlen);
/* State `state` is typed (sl_keyed_state_schema): its values, list
 * elements and map values print as objects of the schema's fields (SQL
 * NULL as null; bytes that are not such a row print as bytes).  Takes a
 * reference. */
void sl_state_entries_set_schema(sl_state_entries_t *e, const char *state, sl_schema_t *schema);
/* Typed state `state` (set_schema first) has a TTL: each stored row comes
 * after its 8-byte timestamp, which the printed object leaves out (as a
 * running job's query does).  A snapshot holds no item that had expired
 * when it was taken; items that expired since print as they are. */
void sl_state_entries_set_ttl(sl_state_entries_t *e, const char *state);
void sl_state_entries_free(sl_state_entries_t *e);

#endif
