/*
 * ha_services.c — the high-availability configuration and the session of
 * a JobManager's HA services (ha_services.h).
 */
#include "ha/ha_services.h"
#include "checkpoint/s3_client.h"
#include "ha/ha_int.h"

#include <stdio.h>
#include <string.h>

struct sl_ha {
    sl_ha_config_t cfg;
    sl_zk_t *zk;
    char latch[256];             /* this process's latch znode's name ("" before join) */
    char token[33];
};

int sl_ha_config_from(const sl_config_t *cfg, bool jobmanager, sl_ha_config_t *out, char *err, size_t errlen) {
    memset(out, 0, sizeof *out);
    if (cfg->ha_type != SL_CFG_HA_ZOOKEEPER) return 0;
    out->enabled = true;
    if (!cfg->ha_quorum || !cfg->ha_quorum[0])
        return sl_errf(err, errlen, SL_EINVAL,
                       "high-availability.type is ZOOKEEPER but high-availability.zookeeper.quorum is not set "
                       "(ZooKeeper's servers, host:port[,host:port...])");
    if (jobmanager && (!cfg->ha_storage_dir || !cfg->ha_storage_dir[0]))
        return sl_errf(err, errlen, SL_EINVAL,
                       "high-availability.type is ZOOKEEPER but high-availability.storageDir is not set (a directory "
                       "every JobManager can read, where the jobs' artifacts are kept)");
    if (jobmanager && sl_s3_is_uri(cfg->ha_storage_dir)) { /* its bucket and credentials are checked now */
        char bucket[256], path[2048], e[600];
        sl_s3_config_t s3;
        if (sl_s3_parse_uri(cfg->ha_storage_dir, bucket, sizeof bucket, path, sizeof path, e, sizeof e) < 0 ||
            sl_s3_config_resolve(&s3, e, sizeof e) < 0)
            return sl_errf(err, errlen, SL_EINVAL, "high-availability.storageDir '%s': %s", cfg->ha_storage_dir, e);
    } else if (jobmanager && cfg->ha_storage_dir[0] != '/') {
        return sl_errf(err, errlen, SL_EINVAL,
                       "high-availability.storageDir '%s': an absolute path or an s3://bucket/path URI is needed",
                       cfg->ha_storage_dir);
    }
    const char *root = cfg->ha_root && cfg->ha_root[0] ? cfg->ha_root : "/sluice";
    const char *cid = cfg->ha_cluster_id && cfg->ha_cluster_id[0] ? cfg->ha_cluster_id : "/default";
    if (root[0] != '/')
        return sl_errf(err, errlen, SL_EINVAL, "high-availability.zookeeper.path.root '%s': must start with '/'", root);
    if (strstr(cid, "..") || strchr(cid + (cid[0] == '/'), '/') || !cid[cid[0] == '/'])
        return sl_errf(err, errlen, SL_EINVAL,
                       "high-availability.cluster-id '%s': one name (letters, digits, '-', '_'), optionally after '/'",
                       cid);
    snprintf(out->quorum, sizeof out->quorum, "%s", cfg->ha_quorum);
    snprintf(out->storage_dir, sizeof out->storage_dir, "%s", cfg->ha_storage_dir ? cfg->ha_storage_dir : "");
    snprintf(out->cluster_id, sizeof out->cluster_id, "%s", cid + (cid[0] == '/'));
    size_t rl = strlen(root);
    while (rl > 1 && root[rl - 1] == '/') rl--;
    snprintf(out->prefix, sizeof out->prefix, "%.*s/%s", rl == 1 ? 0 : (int)rl, root, out->cluster_id);
    out->session_ms = (int)cfg->ha_session_timeout_ms;
    out->connect_ms = (int)cfg->ha_connection_timeout_ms;
    return 0;
}

int sl_ha_open(const sl_ha_config_t *cfg, sl_ha_t **out, char *err, size_t errlen) {
    *out = NULL;
    sl_ha_t *ha = sl_calloc(1, sizeof *ha);
    ha->cfg = *cfg;
    int rc = sl_zk_open(cfg->quorum, cfg->prefix, cfg->session_ms, cfg->connect_ms, &ha->zk, err, errlen);
    if (rc < 0) {
        sl_free(ha);
        return rc;
    }
    *out = ha;
    return 0;
}

void sl_ha_close(sl_ha_t *ha) {
    if (!ha) return;
    sl_zk_close(ha->zk);
    sl_free(ha);
}

sl_zk_t *sl_ha_zk(sl_ha_t *ha) { return ha->zk; }
const sl_ha_config_t *sl_ha_cfg(const sl_ha_t *ha) { return &ha->cfg; }
bool sl_ha_lost(sl_ha_t *ha) { return sl_zk_state(ha->zk) == SL_ZK_LOST; }

char *sl_ha_latch_name_(sl_ha_t *ha) { return ha->latch; }
char *sl_ha_token_(sl_ha_t *ha) { return ha->token; }
const char *sl_ha_election_token(const sl_ha_t *ha) { return ha->token; }
