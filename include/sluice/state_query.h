/*
 * state_query.h — looking up a running job's keyed state by key (what
 * Flink's removed queryable state gave): the value(s) one key has in one
 * operator's keyed state right now, without stopping the job.
 *
 * The operator is named by its uid (sl_uid), the key by its value as text,
 * parsed by the type of the operator's key (sl_key_by's field: VARCHAR as
 * is, INT / BIGINT / TIMESTAMP as a decimal integer, DOUBLE as a number,
 * BOOLEAN as true/false; sl_key_by_fields: a JSON array of one value per
 * field, e.g. ["card-7",3]; a key function: the text's bytes).  The key's
 * key group names the subtask that owns it; that subtask's own thread
 * reads its state between two records and answers.
 *
 * The answer is JSON, each entry shaped as `sluice state read` prints it:
 *
 *   {"entries":[{"state":"count","kind":"value","key_group":17,
 *                "key":"card-7","namespace":"","value":{"hex":"0500000000000000"}}]}
 *
 * Bytes that are UTF-8 without NUL print as strings, others as
 * {"hex":"..."}; values are the state's stored bytes (without the TTL
 * timestamp; an expired value is absent).  A cluster answers the same
 * through REST (GET /jobs/:jobid/state?uid=UID&state=NAME&key=K) and
 * `sluice state query JOBID --uid UID --key K`.
 */
#ifndef SLUICE_STATE_QUERY_H
#define SLUICE_STATE_QUERY_H

#include <stdint.h>

#include "sluice.h"

/* Looks up key in the keyed state of operator uid of the job env is
 * executing (embedded mode).  state: one state's name, or NULL for every
 * state of the operator; ns: the namespace's bytes as text, or NULL for
 * every namespace the key has — the empty one of a process function's
 * state, each window of a window operator's (one entry per namespace, the
 * namespace printed like the key).  The namespaces of a key are found by
 * walking the key's key group of each state in the subtask's backend: one
 * key group's share of the operator's state, not all of it, between two
 * records of the task.
 *
 * Returns 0 with *json = {"entries":[...]}; otherwise *json is
 * {"errors":["..."]} naming what went wrong and the return says what:
 * SL_EINVAL the key does not parse as the key's type (or no uid/key),
 * SL_ENOTFOUND no such operator, state, or no value for the key,
 * SL_ESTATE no job is running (or the subtask is not) or the subtask did
 * not answer within timeout_ms (0: 5000), SL_EFORMAT a damaged answer.
 * *http (may be NULL) is the status the REST API gives for the same
 * answer (200, 400, 404, 409, 500, 502, 504).  *json is malloc'ed: the
 * caller frees it with free().
 *
 * Any thread while sl_env_execute runs.  It blocks until the answer or
 * the timeout; queries of one environment run one at a time, and
 * sl_env_execute does not return (nor sl_env_cancel act) while one runs.
 * Takes ownership of nothing; the strings are only read during the call. */
SL_API int sl_env_query_state(sl_env_t *env, const char *uid, const char *state, const char *key, const char *ns,
                              int64_t timeout_ms, char **json, int *http);

#endif
