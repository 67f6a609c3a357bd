/* mailbox.c — see mailbox.h. */
#include "taskmanager/mailbox.h"

#include "common/common.h"

void sl_mailbox_init(sl_mailbox_t *m, sl_waker_t *waker) {
    pthread_mutex_init(&m->mu, NULL);
    m->head = m->tail = NULL;
    atomic_init(&m->n, 0);
    m->waker = waker;
}

void sl_mailbox_destroy(sl_mailbox_t *m) {
    sl_mail_t *p = m->head;
    while (p) {
        sl_mail_t *n = p->next;
        if (p->owns_arg) sl_free(p->arg);
        sl_free(p);
        p = n;
    }
    m->head = m->tail = NULL;
    pthread_mutex_destroy(&m->mu);
}

static void post(sl_mailbox_t *m, sl_mail_fn fn, void *arg, bool owns) {
    sl_mail_t *mail = sl_malloc(sizeof *mail);
    mail->fn = fn;
    mail->arg = arg;
    mail->owns_arg = owns;
    mail->next = NULL;
    pthread_mutex_lock(&m->mu);
    if (m->tail)
        m->tail->next = mail;
    else
        m->head = mail;
    m->tail = mail;
    atomic_fetch_add(&m->n, 1);
    pthread_mutex_unlock(&m->mu);
    if (m->waker) sl_waker_signal(m->waker);
}

void sl_mailbox_post(sl_mailbox_t *m, sl_mail_fn fn, void *arg) { post(m, fn, arg, false); }
void sl_mailbox_post_owned(sl_mailbox_t *m, sl_mail_fn fn, void *arg) { post(m, fn, arg, true); }

int sl_mailbox_drain(sl_mailbox_t *m, void *owner) {
    if (atomic_load_explicit(&m->n, memory_order_acquire) == 0) return 0;
    pthread_mutex_lock(&m->mu);
    sl_mail_t *p = m->head;
    m->head = m->tail = NULL;
    pthread_mutex_unlock(&m->mu);
    int ran = 0;
    while (p) {
        sl_mail_t *n = p->next;
        atomic_fetch_sub(&m->n, 1);
        p->fn(owner, p->arg);
        sl_free(p);
        p = n;
        ran++;
    }
    return ran;
}
