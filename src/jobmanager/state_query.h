/*
 * state_query.h — the JobManager side of a query of a running job's keyed
 * state by key (what Flink's removed queryable state gave, and what
 * `GET /jobs/:jobid/state`, `sluice state query` and sl_env_query_state
 * answer):
 *
 *   1. the operator is found in the plan by uid, and the key text is turned
 *      into the key's serialized form as the job's key_by produces it, from
 *      the plan's description of the key (plan.h, sl_plan_node_t.key);
 *   2. its key group names the subtask that owns it (key_group.h), and the
 *      job master the TaskManager that runs that subtask;
 *   3. a STATE_QUERY goes there; the task's own thread looks the key up
 *      (taskmanager/state_query.c) and a STATE_QUERY_RESULT comes back,
 *      delivered here by request id (sl_sq_deliver) by whoever receives
 *      the TaskManagers' messages (the dispatcher, or runtime/local.c);
 *   4. its block is parsed and printed as `sluice state read` prints an
 *      entry (checkpoint/state_reader.h, sl_state_entries_json).
 *
 * Answers carry an HTTP status and a JSON body: 200 {"entries":[...]}; 400
 * a key that does not parse as the key's type; 404 no such operator,
 * state, or no value for the key; 409 the job (or that subtask) is not
 * running; 504 the subtask did not answer in time; errors as
 * {"errors":["..."]} (Flink's REST error shape), the text naming what.
 *
 * Threads: sl_sq_query blocks its caller (a REST or user thread) until
 * the answer or the timeout; sl_sq_deliver may be called from any thread.
 */
#ifndef SL_JM_STATE_QUERY_H
#define SL_JM_STATE_QUERY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"
#include "jobmanager/job_master.h"
#include "protocol/messages.h"

/* How long a query waits for its subtask by default. */
#define SL_SQ_DEFAULT_TIMEOUT_MS 5000

typedef struct sl_sq_request {
    const char *uid;             /* the operator (required) */
    const char *state;           /* one state, or NULL / "": every state of the operator */
    const char *key;             /* the key as text (see sl_sq_parse_key) */
    const char *ns;              /* the namespace's bytes as text, or NULL: every namespace of the key */
    int64_t timeout_ms;          /* 0: SL_SQ_DEFAULT_TIMEOUT_MS */
} sl_sq_request_t;

typedef struct sl_sq_answer {
    int http;                    /* 200, 400, 404, 409, 500, 502, 504 */
    char *body;                  /* JSON text (sl_malloc'ed; free with sl_free) */
} sl_sq_answer_t;

/* Runs the query against jm's running attempt; always fills *out (also
 * for errors).  Any thread but the ones that deliver results. */
void sl_sq_query(sl_job_master_t *jm, const sl_sq_request_t *rq, sl_sq_answer_t *out);

/* A STATE_QUERY_RESULT from a TaskManager: hands it to the query waiting
 * for its request id (a late one, whose query timed out, is dropped).
 * Takes ownership of m.  Any thread. */
void sl_sq_deliver(sl_msg_t *m);

/* The key text as the serialized key of a node whose plan describes its
 * key as `desc` (sl_plan_node_t.key):
 *   "field <DDL>"   the text as that field's value: VARCHAR and BYTES as
 *                   its bytes, INT / BIGINT / TIMESTAMP (ms) as a decimal
 *                   integer, DOUBLE as a number, BOOLEAN as true / false;
 *   "fields <DDL>"  a JSON array with one value per field (strings,
 *                   numbers, booleans, null), encoded as sl_key_by_fields
 *                   does;
 *   "function"      the text's bytes as they are.
 * 0, or SL_EINVAL with err naming the field, its type and what is wrong. */
int sl_sq_parse_key(const char *desc, const char *text, sl_buf_t *out, char *err, size_t errlen);

#endif
