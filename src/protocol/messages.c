/*
 * messages.c — allocation, freeing and names of the control-plane messages
 * (messages.h).  The wire encoding is codec.c.
 *
 * sl_msg_free must cope with a message that a failed decode left half
 * built: codec.c allocates every array zeroed and sets its count at once,
 * so a count always covers exactly the elements allocated, and an element
 * not yet filled holds only NULL pointers.
 */
#include "protocol/messages.h"

#include "common/common.h"

const char *sl_msg_type_name(int type) {
    switch (type) {
    case SL_MSG_REGISTER: return "REGISTER";
    case SL_MSG_REGISTERED: return "REGISTERED";
    case SL_MSG_HEARTBEAT: return "HEARTBEAT";
    case SL_MSG_DEPLOY: return "DEPLOY";
    case SL_MSG_CANCEL: return "CANCEL";
    case SL_MSG_TASK_STATE: return "TASK_STATE";
    case SL_MSG_TRIGGER: return "TRIGGER";
    case SL_MSG_ACK: return "ACK";
    case SL_MSG_DECLINE: return "DECLINE";
    case SL_MSG_COMPLETE: return "COMPLETE";
    case SL_MSG_ABORTED: return "ABORTED";
    case SL_MSG_METRICS: return "METRICS";
    case SL_MSG_STATE_QUERY: return "STATE_QUERY";
    case SL_MSG_STATE_QUERY_RESULT: return "STATE_QUERY_RESULT";
    default: return "unknown";
    }
}

const char *sl_task_state_name(int state) {
    switch (state) {
    case SL_TASK_DEPLOYING: return "DEPLOYING";
    case SL_TASK_RUNNING: return "RUNNING";
    case SL_TASK_FINISHED: return "FINISHED";
    case SL_TASK_CANCELED: return "CANCELED";
    case SL_TASK_FAILED: return "FAILED";
    default: return "unknown";
    }
}

sl_msg_t *sl_msg_new(int type) {
    sl_msg_t *m = sl_calloc(1, sizeof *m);
    m->type = type;
    return m;
}

/* The subtask's handles and blobs (not st itself). */
static void subtask_free(sl_ckpt_subtask_t *st) {
    if (st->handles)
        for (int i = 0; i < st->nhandles; i++) {
            sl_free(st->handles[i].path);
            sl_free(st->handles[i].sections);
        }
    sl_free(st->handles);
    if (st->blobs)
        for (int i = 0; i < st->nblobs; i++) {
            sl_free(st->blobs[i].name);
            sl_free(st->blobs[i].data);
        }
    sl_free(st->blobs);
}

static void op_states_free(sl_msg_op_state_t *ops, int n) {
    if (ops)
        for (int i = 0; i < n; i++) {
            sl_free(ops[i].uid);
            subtask_free(&ops[i].st);
        }
    sl_free(ops);
}

static void deploy_free(sl_msg_deploy_t *d) {
    sl_free(d->job_id);
    sl_free(d->artifact);
    if (d->args)
        for (int i = 0; i < d->nargs; i++) sl_free(d->args[i]);
    sl_free(d->args);
    sl_buf_free(&d->plan);
    sl_free(d->restore_path);
    sl_free(d->tasks);
    sl_free(d->placements);
    if (d->peers)
        for (int i = 0; i < d->npeers; i++) {
            sl_free(d->peers[i].tm_id);
            sl_free(d->peers[i].host);
        }
    sl_free(d->peers);
}

void sl_msg_free(sl_msg_t *m) {
    if (!m) return;
    switch (m->type) {
    case SL_MSG_REGISTER:
        sl_free(m->u.reg.tm_id);
        sl_free(m->u.reg.host);
        break;
    case SL_MSG_REGISTERED:
        sl_free(m->u.registered.reason);
        sl_free(m->u.registered.jm_id);
        break;
    case SL_MSG_HEARTBEAT: sl_free(m->u.heartbeat.sender); break;
    case SL_MSG_DEPLOY: deploy_free(&m->u.deploy); break;
    case SL_MSG_CANCEL:
        sl_free(m->u.cancel.job_id);
        sl_free(m->u.cancel.reason);
        break;
    case SL_MSG_TASK_STATE:
        sl_free(m->u.task_state.job_id);
        sl_free(m->u.task_state.message);
        op_states_free(m->u.task_state.final_state, m->u.task_state.nfinal);
        sl_free(m->u.task_state.metrics);
        break;
    case SL_MSG_TRIGGER: sl_free(m->u.trigger.job_id); break;
    case SL_MSG_METRICS:
        sl_free(m->u.metrics.job_id);
        sl_free(m->u.metrics.tm_id);
        for (int i = 0; m->u.metrics.subtasks && i < m->u.metrics.nsubtasks; i++) sl_free(m->u.metrics.subtasks[i].ops);
        sl_free(m->u.metrics.subtasks);
        break;
    case SL_MSG_ACK:
        sl_free(m->u.ack.job_id);
        op_states_free(m->u.ack.ops, m->u.ack.nops);
        break;
    case SL_MSG_DECLINE:
        sl_free(m->u.decline.job_id);
        sl_free(m->u.decline.reason);
        break;
    case SL_MSG_COMPLETE:
    case SL_MSG_ABORTED:
        sl_free(m->u.notify.job_id);
        sl_free(m->u.notify.reason);
        break;
    case SL_MSG_STATE_QUERY:
        sl_free(m->u.state_query.job_id);
        sl_free(m->u.state_query.uid);
        sl_free(m->u.state_query.state);
        sl_buf_free(&m->u.state_query.key);
        sl_buf_free(&m->u.state_query.ns);
        break;
    case SL_MSG_STATE_QUERY_RESULT:
        sl_free(m->u.state_query_result.job_id);
        sl_free(m->u.state_query_result.message);
        sl_buf_free(&m->u.state_query_result.block);
        break;
    default: break;
    }
    int type = m->type;
    memset(m, 0, sizeof *m);
    m->type = type;
}

void sl_msg_destroy(sl_msg_t *m) {
    if (!m) return;
    sl_msg_free(m);
    sl_free(m);
}
