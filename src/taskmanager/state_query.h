/*
 * state_query.h — the TaskManager side of a query of a running job's keyed
 * state (Flink's removed queryable state, KvStateServer): a STATE_QUERY
 * message names a subtask, an operator uid, a state (or every state) and a
 * key in its serialized form; the answer is a STATE_QUERY_RESULT
 * (protocol/messages.h) with the key's entries as one canonical
 * keyed-state block, which the JobManager turns into JSON.
 *
 * The lookup runs on the task's own thread, as mail between two records:
 * the backend is never touched by another thread, and the task is held up
 * by one lookup per state (value: get, list/map: one foreach of the key's
 * entry), never by a scan.  A task that does not read its mail (blocked on
 * backpressure, finished) answers nothing; the JobManager times out.
 */
#ifndef SL_TM_STATE_QUERY_H
#define SL_TM_STATE_QUERY_H

#include "protocol/messages.h"
#include "taskmanager/deployment.h"

/* A STATE_QUERY for dep's job attempt (dep NULL: that attempt does not run
 * here, answered at once as not running).  Posts the lookup to the task's
 * mailbox; the answer goes out through send(send_ctx, ...) from the task's
 * thread.  Takes ownership of m.  The TaskManager's handling thread. */
void sl_tm_state_query(sl_deployment_t *dep, const char *tm_id, sl_msg_t *m, void (*send)(void *ctx, sl_msg_t *m),
                       void *send_ctx);

#endif
