/*
 * leader_retrieval.c — finding the leading JobManager (Flink's
 * LeaderRetrievalService): /leader holds "<token> <host>:<port> <rest url>".
 * A TaskManager keeps a follower running (its own thread and session,
 * polling every 200 ms and opening a new session whenever one is lost); the
 * client looks once.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ha/ha_int.h"

#define POLL_MS 200

int sl_ha_leader_read(sl_zk_t *z, sl_ha_leader_t *out, char *err, size_t errlen) {
    sl_buf_t b = {0};
    int rc = sl_zk_get(z, "/leader", &b, NULL, err, errlen);
    if (rc == 0) {
        memset(out, 0, sizeof *out);
        char addr[300] = "";
        const char *colon;
        if (sscanf((const char *)b.p, "%63s %299s %511s", out->token, addr, out->rest_url) != 3 ||
            !(colon = strrchr(addr, ':')) || (out->rpc_port = atoi(colon + 1)) <= 0)
            rc = sl_errf(err, errlen, SL_EFORMAT, "ZooKeeper's /leader is not \"<token> <host>:<port> <rest url>\": %s",
                         (const char *)b.p);
        else
            snprintf(out->rpc_host, sizeof out->rpc_host, "%.*s", (int)(colon - addr), addr);
    }
    sl_buf_free(&b);
    return rc;
}

struct sl_leader_retrieval {
    sl_ha_config_t cfg;
    pthread_t thread;
    pthread_mutex_t mu;
    bool stop, known;
    sl_ha_leader_t leader;
};

static void *follow(void *arg) {
    sl_leader_retrieval_t *r = arg;
    sl_zk_t *z = NULL;
    char err[512];
    for (;;) {
        pthread_mutex_lock(&r->mu);
        bool stop = r->stop;
        pthread_mutex_unlock(&r->mu);
        if (stop) break;
        if (z && sl_zk_state(z) == SL_ZK_LOST) {
            sl_zk_close(z);
            z = NULL;
        }
        if (!z && sl_zk_open(r->cfg.quorum, r->cfg.prefix, r->cfg.session_ms, 2000, &z, err, sizeof err) < 0) z = NULL;
        sl_ha_leader_t l;
        int rc = z && sl_zk_state(z) == SL_ZK_CONNECTED ? sl_ha_leader_read(z, &l, err, sizeof err) : SL_EIO;
        pthread_mutex_lock(&r->mu);
        if (rc == 0) {
            r->leader = l;
            r->known = true;
        } else if (rc == SL_ENOTFOUND || rc == SL_EFORMAT) {
            r->known = false; /* no leader now; while ZooKeeper cannot say, the last one stays */
        }
        pthread_mutex_unlock(&r->mu);
        usleep(POLL_MS * 1000);
    }
    sl_zk_close(z);
    return NULL;
}

int sl_leader_retrieval_start(const sl_ha_config_t *cfg, sl_leader_retrieval_t **out, char *err, size_t errlen) {
    sl_leader_retrieval_t *r = sl_calloc(1, sizeof *r);
    r->cfg = *cfg;
    pthread_mutex_init(&r->mu, NULL);
    if (pthread_create(&r->thread, NULL, follow, r) != 0) {
        pthread_mutex_destroy(&r->mu);
        sl_free(r);
        return sl_errf(err, errlen, SL_EIO, "cannot start the leader retrieval thread");
    }
    *out = r;
    return 0;
}

bool sl_leader_retrieval_current(sl_leader_retrieval_t *r, sl_ha_leader_t *out) {
    pthread_mutex_lock(&r->mu);
    bool k = r->known;
    if (k) *out = r->leader;
    pthread_mutex_unlock(&r->mu);
    return k;
}

void sl_leader_retrieval_stop(sl_leader_retrieval_t *r) {
    if (!r) return;
    pthread_mutex_lock(&r->mu);
    r->stop = true;
    pthread_mutex_unlock(&r->mu);
    pthread_join(r->thread, NULL);
    pthread_mutex_destroy(&r->mu);
    sl_free(r);
}

int sl_ha_leader_lookup(const sl_ha_config_t *cfg, int wait_ms, sl_ha_leader_t *out, char *err, size_t errlen) {
    sl_zk_t *z = NULL;
    int rc = sl_zk_open(cfg->quorum, cfg->prefix, cfg->session_ms, cfg->connect_ms, &z, err, errlen);
    int64_t deadline = sl_mono_ns() + (int64_t)wait_ms * 1000000;
    while (rc == 0 || rc == SL_ENOTFOUND) {
        rc = sl_ha_leader_read(z, out, err, errlen);
        if (rc != SL_ENOTFOUND || sl_mono_ns() >= deadline) break;
        usleep(POLL_MS * 1000);
    }
    if (rc == SL_ENOTFOUND)
        sl_errf(err, errlen, rc, "no JobManager leads cluster '%s' in ZooKeeper at %s (waited %d ms)", cfg->cluster_id,
                cfg->quorum, wait_ms);
    sl_zk_close(z);
    return rc;
}
