/*
 * completed_checkpoint_store.c — the completed checkpoints of each job in
 * ZooKeeper (Flink's DefaultCompletedCheckpointStore on a
 * ZooKeeperStateHandleStore): /checkpoints/<job>/<id, 19 digits> holds the
 * checkpoint's directory, added only after its _metadata was written.  The
 * newest `retain` are kept (execution.checkpointing.num-retained); a new
 * leader restores the newest.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ha/ha_int.h"

int sl_ha_checkpoint_ids(sl_ha_t *ha, const char *job, int64_t *ids, int cap, char *err, size_t errlen) {
    char path[300];
    snprintf(path, sizeof path, "/checkpoints/%s", job);
    char **names;
    int n;
    int rc = sl_zk_children(sl_ha_zk(ha), path, &names, &n, err, errlen);
    if (rc == SL_ENOTFOUND) return 0;
    if (rc < 0) return rc;
    int k = 0;
    for (int i = 0; i < n && k < cap; i++) { /* zero-padded: sorted by name is sorted by id */
        char *end;
        long long v = strtoll(names[i], &end, 10);
        if (*end == 0 && v > 0) ids[k++] = v;
    }
    sl_zk_free_names(names, n);
    return k;
}

int sl_ha_checkpoint_add(sl_ha_t *ha, const char *job, int64_t id, const char *path, int retain, char *err,
                         size_t errlen) {
    char dir[300], node[340];
    snprintf(dir, sizeof dir, "/checkpoints/%s", job);
    snprintf(node, sizeof node, "%s/%019" PRId64, dir, id);
    int rc = sl_zk_ensure(sl_ha_zk(ha), dir, err, errlen);
    if (rc == 0) rc = sl_zk_create(sl_ha_zk(ha), node, path, strlen(path), 0, NULL, 0, err, errlen);
    if (rc < 0) return rc;
    int64_t ids[256];
    int n = sl_ha_checkpoint_ids(ha, job, ids, 256, err, errlen);
    char e2[256];
    for (int i = 0; i < n - (retain < 1 ? 1 : retain); i++) { /* the oldest beyond retain; best effort */
        snprintf(node, sizeof node, "%s/%019" PRId64, dir, ids[i]);
        sl_zk_delete(sl_ha_zk(ha), node, -1, e2, sizeof e2);
    }
    return 0;
}

int sl_ha_checkpoint_latest(sl_ha_t *ha, const char *job, int64_t *id, char *path, size_t cap, char *err,
                            size_t errlen) {
    int64_t ids[256];
    int n = sl_ha_checkpoint_ids(ha, job, ids, 256, err, errlen);
    if (n < 0) return n;
    if (n == 0) return sl_errf(err, errlen, SL_ENOTFOUND, "job %s has no completed checkpoint in ZooKeeper", job);
    char node[340];
    snprintf(node, sizeof node, "/checkpoints/%s/%019" PRId64, job, ids[n - 1]);
    sl_buf_t b = {0};
    int rc = sl_zk_get(sl_ha_zk(ha), node, &b, NULL, err, errlen);
    if (rc == 0) {
        *id = ids[n - 1];
        snprintf(path, cap, "%s", b.p ? (const char *)b.p : "");
    }
    sl_buf_free(&b);
    return rc;
}
