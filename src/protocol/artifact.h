/*
 * artifact.h — job artifacts downloaded from the JobManager (Flink's
 * BlobServer): a TaskManager never reads the JobManager's files, it asks.
 *
 * A TaskManager opens a connection of kind SL_AUTH_ARTIFACT to the
 * JobManager's RPC port (the same shared-secret handshake as control
 * connections, auth.h) and sends one frame, the request:
 *   "SLAQ" u8 version (1) then the job's id (the DEPLOY message's job_id)
 * The JobManager answers with one frame and the TaskManager closes:
 *   "SLAR" u8 version (1) u8 status (0 ok, 1 refused) then
 *     ok:      32 bytes SHA-256 of the artifact, then the artifact's bytes
 *     refused: the reason (text)
 * Only the artifact of a job the JobManager runs is served, found by the
 * job's id: a request names no path.  The TaskManager checks the digest,
 * writes the bytes to its own cache (a new file, renamed into place) and
 * loads that copy.
 */
#ifndef SL_PROTOCOL_ARTIFACT_H
#define SL_PROTOCOL_ARTIFACT_H

#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "protocol/rpc.h"

#define SL_ARTIFACT_MAX_BYTES (48u << 20) /* a frame must hold it (SL_RPC_DEFAULT_MAX_FRAME) */

/* The request for job_id, appended to out. */
void sl_artifact_request_encode(const char *job_id, sl_buf_t *out);
/* The job id a request names (copied into id); SL_EFORMAT naming what is wrong. */
int sl_artifact_request_decode(const uint8_t *p, size_t n, char *id, size_t cap, char *err, size_t errlen);
/* The answer: the file at path (ok) or, when reason is non-NULL, a refusal. */
void sl_artifact_answer_encode(const uint8_t *bytes, size_t n, const char *reason, sl_buf_t *out);
/* The artifact's bytes in an answer (pointing into a), after checking its
 * digest; SL_ENOTFOUND with the JobManager's reason for a refusal,
 * SL_EFORMAT for anything malformed. */
int sl_artifact_answer_decode(const uint8_t *a, size_t n, const uint8_t **bytes, size_t *len, char *err,
                              size_t errlen);
/* Reads the file at path into out (at most SL_ARTIFACT_MAX_BYTES). */
int sl_artifact_read_file(const char *path, sl_buf_t *out, char *err, size_t errlen);

/* TaskManager side: downloads job_id's artifact from the JobManager at
 * host:port over rpc, checks it and stores it as <dir>/<job_id>.so
 * (created once; a later call finds it there).  The path is written to
 * path.  Blocks up to timeout_ms; never call it on rpc's loop thread.
 * 0, or < 0 with err saying what failed (refused, digest mismatch, I/O). */
int sl_artifact_fetch(sl_rpc_t *rpc, const char *host, int port, const char *job_id, const char *dir,
                      int timeout_ms, char *path, size_t cap, char *err, size_t errlen);

#endif
