/*
 * mailbox.h — the task's mailbox (Flink's TaskMailbox): other threads post
 * mail (a function and its argument); only the task's own thread runs it,
 * between records, so mail never races with the operators.  Cancellation
 * arrives this way now; checkpoint triggers and completion notifications
 * will too.
 */
#ifndef SL_MAILBOX_H
#define SL_MAILBOX_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "taskmanager/channel.h"

typedef void (*sl_mail_fn)(void *owner, void *arg);

typedef struct sl_mail {
    sl_mail_fn fn;
    void *arg;
    bool owns_arg; /* arg is sl_malloc'ed: freed if the mail never runs */
    struct sl_mail *next;
} sl_mail_t;

typedef struct sl_mailbox {
    pthread_mutex_t mu;
    sl_mail_t *head, *tail;
    atomic_int n;
    sl_waker_t *waker; /* woken on every post */
} sl_mailbox_t;

void sl_mailbox_init(sl_mailbox_t *m, sl_waker_t *waker);
/* Frees mail that was never run (without running it). */
void sl_mailbox_destroy(sl_mailbox_t *m);
/* Any thread. */
void sl_mailbox_post(sl_mailbox_t *m, sl_mail_fn fn, void *arg);
/* Same; arg (from sl_malloc) belongs to the mail: fn frees it when it
 * runs, sl_mailbox_destroy when it never did. */
void sl_mailbox_post_owned(sl_mailbox_t *m, sl_mail_fn fn, void *arg);
/* The owner's thread: runs every mail posted so far, in order; returns how
 * many ran.  Cheap when empty (one atomic load). */
int sl_mailbox_drain(sl_mailbox_t *m, void *owner);

#endif
