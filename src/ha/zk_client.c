/*
 * zk_client.c — the ZooKeeper session and its synchronous calls
 * (zk_client.h) over libzookeeper_mt.
 */
#include "ha/zk_client.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
/* the synchronous calls exist in the multi-threaded client only */
#ifndef THREADED
#define THREADED
#endif
#include <zookeeper/zookeeper.h>

struct sl_zk {
    zhandle_t *zh;
    char *prefix;                /* "" or "/sluice/default" (no trailing '/') */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool connected, lost;
    bool ever_connected;
    int64_t suspended_since_ns;  /* 0 while connected */
    int session_ms;
};

/* ZooKeeper's completion thread: session events only. */
static void on_watch(zhandle_t *zh, int type, int state, const char *path, void *ctx) {
    (void)zh, (void)path;
    sl_zk_t *z = ctx;
    if (type != ZOO_SESSION_EVENT) return;
    pthread_mutex_lock(&z->mu);
    if (state == ZOO_CONNECTED_STATE) {
        z->connected = z->ever_connected = true;
        z->suspended_since_ns = 0;
        int t = zoo_recv_timeout(zh);
        if (t > 0) z->session_ms = t;
    } else if (state == ZOO_EXPIRED_SESSION_STATE || state == ZOO_AUTH_FAILED_STATE) {
        z->connected = false;
        z->lost = true;
    } else { /* connecting: suspended */
        if (z->connected) z->suspended_since_ns = sl_mono_ns();
        z->connected = false;
    }
    pthread_cond_broadcast(&z->cv);
    pthread_mutex_unlock(&z->mu);
}

/* ZooKeeper's client logs to stderr, a line per reconnection attempt while
 * the server is away: silent (0) unless SLUICE_ZK_DEBUG is set, since every
 * failed call is reported here by path and zerror() text. */
static void set_log_level(void) { zoo_set_debug_level(getenv("SLUICE_ZK_DEBUG") ? ZOO_LOG_LEVEL_DEBUG : (ZooLogLevel)0); }

static void log_once(void) {
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, set_log_level);
}

/* z->mu held. */
static sl_zk_state_t state_locked(sl_zk_t *z) {
    if (z->lost) return SL_ZK_LOST;
    if (z->connected) return SL_ZK_CONNECTED;
    if (z->suspended_since_ns && sl_mono_ns() - z->suspended_since_ns > (int64_t)z->session_ms * 1000000) {
        z->lost = true; /* the server has expired the session by now */
        return SL_ZK_LOST;
    }
    return SL_ZK_SUSPENDED;
}

sl_zk_state_t sl_zk_state(sl_zk_t *z) {
    pthread_mutex_lock(&z->mu);
    sl_zk_state_t s = state_locked(z);
    pthread_mutex_unlock(&z->mu);
    return s;
}

int64_t sl_zk_session_id(sl_zk_t *z) {
    const clientid_t *c = zoo_client_id(z->zh);
    return c ? c->client_id : 0;
}

int sl_zk_session_timeout(sl_zk_t *z) {
    pthread_mutex_lock(&z->mu);
    int t = z->session_ms;
    pthread_mutex_unlock(&z->mu);
    return t;
}

static void full_path(const sl_zk_t *z, const char *path, char *out, size_t cap) {
    if (!path || !strcmp(path, "/") || !path[0]) snprintf(out, cap, "%s", z->prefix[0] ? z->prefix : "/");
    else snprintf(out, cap, "%s%s", z->prefix, path);
}

/* A ZooKeeper return code as ours, with the message. */
static int zk_err(int zrc, const char *op, const char *path, char *err, size_t errlen) {
    int rc = SL_EIO;
    switch (zrc) {
    case ZOK: return 0;
    case ZNONODE: rc = SL_ENOTFOUND; break;
    case ZNODEEXISTS:
    case ZBADVERSION:
    case ZNOTEMPTY: rc = SL_ESTATE; break;
    default: break;
    }
    return sl_errf(err, errlen, rc, "ZooKeeper %s %s: %s", op, path, zerror(zrc));
}

/* Calls are refused at once unless the session is connected: nothing is
 * queued to run later on a connection that may come back too late. */
static int usable(sl_zk_t *z, const char *op, const char *path, char *err, size_t errlen) {
    sl_zk_state_t s = sl_zk_state(z);
    if (s == SL_ZK_CONNECTED) return 0;
    return sl_errf(err, errlen, SL_EIO, "ZooKeeper %s %s: %s", op, path,
                   s == SL_ZK_LOST ? "the session is lost (expired)" : "not connected (the session is suspended)");
}

int sl_zk_open(const char *quorum, const char *prefix, int session_ms, int connect_ms, sl_zk_t **out, char *err,
               size_t errlen) {
    *out = NULL;
    if (!quorum || !quorum[0]) return sl_errf(err, errlen, SL_EINVAL, "no ZooKeeper quorum given");
    log_once();
    sl_zk_t *z = sl_calloc(1, sizeof *z);
    char pre[1024];
    snprintf(pre, sizeof pre, "%s", prefix ? prefix : "");
    size_t n = strlen(pre);
    while (n > 0 && pre[n - 1] == '/') pre[--n] = 0;
    z->prefix = sl_strdup(pre);
    z->session_ms = session_ms;
    pthread_mutex_init(&z->mu, NULL);
    pthread_cond_init(&z->cv, NULL);
    z->zh = zookeeper_init(quorum, on_watch, session_ms, NULL, z, 0);
    if (!z->zh) {
        sl_zk_close(z);
        return sl_errf(err, errlen, SL_EIO, "cannot start a ZooKeeper client for %s", quorum);
    }
    int64_t deadline = sl_mono_ns() + (int64_t)connect_ms * 1000000;
    pthread_mutex_lock(&z->mu);
    while (!z->connected && !z->lost && sl_mono_ns() < deadline) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000000;
        if (ts.tv_nsec >= 1000000000) ts.tv_sec++, ts.tv_nsec -= 1000000000;
        pthread_cond_timedwait(&z->cv, &z->mu, &ts);
    }
    bool ok = z->connected;
    pthread_mutex_unlock(&z->mu);
    if (!ok) {
        sl_zk_close(z);
        return sl_errf(err, errlen, SL_EIO, "cannot connect to ZooKeeper at %s within %d ms", quorum, connect_ms);
    }
    int rc = sl_zk_ensure(z, "/", err, errlen);
    if (rc < 0) {
        sl_zk_close(z);
        return rc;
    }
    *out = z;
    return 0;
}

void sl_zk_close(sl_zk_t *z) {
    if (!z) return;
    if (z->zh) zookeeper_close(z->zh); /* ends the session: its ephemeral znodes go at once */
    pthread_mutex_destroy(&z->mu);
    pthread_cond_destroy(&z->cv);
    sl_free(z->prefix);
    sl_free(z);
}

int sl_zk_create(sl_zk_t *z, const char *path, const void *data, size_t len, int flags, char *created, size_t cap,
                 char *err, size_t errlen) {
    char p[2048], got[2048] = "";
    full_path(z, path, p, sizeof p);
    int rc = usable(z, "create", p, err, errlen);
    if (rc < 0) return rc;
    int zf = ((flags & SL_ZK_EPHEMERAL) ? ZOO_EPHEMERAL : 0) | ((flags & SL_ZK_SEQUENTIAL) ? ZOO_SEQUENCE : 0);
    int zrc = zoo_create(z->zh, p, data, data ? (int)len : -1, &ZOO_OPEN_ACL_UNSAFE, zf, got, sizeof got);
    if (zrc != ZOK) return zk_err(zrc, "create", p, err, errlen);
    if (created && cap) {
        const char *slash = strrchr(got, '/');
        snprintf(created, cap, "%s", slash ? slash + 1 : got);
    }
    return 0;
}

int sl_zk_ensure(sl_zk_t *z, const char *path, char *err, size_t errlen) {
    char p[2048];
    full_path(z, path, p, sizeof p);
    int rc = usable(z, "create", p, err, errlen);
    if (rc < 0) return rc;
    for (char *s = p + 1;; s++) { /* each prefix of the path, then the path */
        if (*s && *s != '/') continue;
        char c = *s;
        *s = 0;
        int zrc = zoo_create(z->zh, p, NULL, -1, &ZOO_OPEN_ACL_UNSAFE, 0, NULL, 0);
        *s = c;
        if (zrc != ZOK && zrc != ZNODEEXISTS) {
            *s = 0;
            return zk_err(zrc, "create", p, err, errlen);
        }
        if (!c) break;
    }
    return 0;
}

int sl_zk_get(sl_zk_t *z, const char *path, sl_buf_t *data, int *version, char *err, size_t errlen) {
    char p[2048];
    full_path(z, path, p, sizeof p);
    int rc = usable(z, "get", p, err, errlen);
    if (rc < 0) return rc;
    int cap = 64 * 1024;
    for (;;) {
        char *buf = sl_malloc((size_t)cap);
        int len = cap;
        struct Stat st;
        int zrc = zoo_get(z->zh, p, 0, buf, &len, &st);
        if (zrc != ZOK) {
            sl_free(buf);
            return zk_err(zrc, "get", p, err, errlen);
        }
        if (st.dataLength > cap) { /* bigger than the buffer: again with room for it */
            sl_free(buf);
            cap = st.dataLength;
            continue;
        }
        if (len > 0) sl_buf_append(data, buf, (size_t)len);
        sl_buf_reserve(data, 1);
        data->p[data->len] = 0;
        sl_free(buf);
        if (version) *version = st.version;
        return 0;
    }
}

int sl_zk_set(sl_zk_t *z, const char *path, const void *data, size_t len, int version, char *err, size_t errlen) {
    char p[2048];
    full_path(z, path, p, sizeof p);
    int rc = usable(z, "set", p, err, errlen);
    if (rc < 0) return rc;
    return zk_err(zoo_set(z->zh, p, data, (int)len, version), "set", p, err, errlen);
}

int sl_zk_delete(sl_zk_t *z, const char *path, int version, char *err, size_t errlen) {
    char p[2048];
    full_path(z, path, p, sizeof p);
    int rc = usable(z, "delete", p, err, errlen);
    if (rc < 0) return rc;
    return zk_err(zoo_delete(z->zh, p, version), "delete", p, err, errlen);
}

int sl_zk_children(sl_zk_t *z, const char *path, char ***names, int *n, char *err, size_t errlen) {
    *names = NULL;
    *n = 0;
    char p[2048];
    full_path(z, path, p, sizeof p);
    int rc = usable(z, "list", p, err, errlen);
    if (rc < 0) return rc;
    struct String_vector sv = {0, NULL};
    int zrc = zoo_get_children(z->zh, p, 0, &sv);
    if (zrc != ZOK) return zk_err(zrc, "list", p, err, errlen);
    *names = sl_calloc((size_t)(sv.count ? sv.count : 1), sizeof **names);
    for (int i = 0; i < sv.count; i++) (*names)[i] = sl_strdup(sv.data[i]);
    *n = sv.count;
    deallocate_String_vector(&sv);
    for (int i = 1; i < *n; i++) /* insertion sort: a handful of names */
        for (int j = i; j > 0 && strcmp((*names)[j - 1], (*names)[j]) > 0; j--) {
            char *t = (*names)[j];
            (*names)[j] = (*names)[j - 1];
            (*names)[j - 1] = t;
        }
    return 0;
}

void sl_zk_free_names(char **names, int n) {
    for (int i = 0; i < n; i++) sl_free(names[i]);
    sl_free(names);
}

int sl_zk_delete_tree(sl_zk_t *z, const char *path, char *err, size_t errlen) {
    char **names;
    int n;
    int rc = sl_zk_children(z, path, &names, &n, err, errlen);
    if (rc == SL_ENOTFOUND) return 0;
    if (rc < 0) return rc;
    for (int i = 0; i < n && rc == 0; i++) {
        char child[2048];
        snprintf(child, sizeof child, "%s/%s", strcmp(path, "/") ? path : "", names[i]);
        rc = sl_zk_delete_tree(z, child, err, errlen);
    }
    sl_zk_free_names(names, n);
    if (rc < 0) return rc;
    rc = sl_zk_delete(z, path, -1, err, errlen);
    return rc == SL_ENOTFOUND ? 0 : rc;
}
