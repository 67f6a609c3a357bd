/*
 * checkpoint_id_counter.c — the checkpoint id counter of each job in
 * ZooKeeper (Flink's ZooKeeperCheckpointIDCounter): /checkpoint-counter/<job>
 * holds the next id as decimal text.  Issuing id n is a versioned set from
 * a value <= n to n + 1, so an id is issued once across every JobManager
 * that ever leads: a new leader's checkpoints start above the last one
 * issued, and a deposed leader cannot issue one again.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ha/ha_int.h"

static void counter_path(const char *job, char *out, size_t cap) { snprintf(out, cap, "/checkpoint-counter/%s", job); }

/* The counter's value and version, created at 1 when missing. */
static int read_counter(sl_ha_t *ha, const char *job, int64_t *next, int *version, char *err, size_t errlen) {
    char path[300];
    counter_path(job, path, sizeof path);
    for (int tries = 0; tries < 3; tries++) {
        sl_buf_t b = {0};
        int rc = sl_zk_get(sl_ha_zk(ha), path, &b, version, err, errlen);
        if (rc == 0) {
            char *end = NULL;
            long long v = b.p ? strtoll((const char *)b.p, &end, 10) : 0;
            bool ok = b.p && end != (char *)b.p && *end == 0 && v >= 1;
            if (!ok) rc = sl_errf(err, errlen, SL_EFORMAT, "ZooKeeper %s: not a checkpoint id: '%s'", path,
                                  b.p ? (const char *)b.p : "");
            sl_buf_free(&b);
            *next = v;
            return rc;
        }
        sl_buf_free(&b);
        if (rc != SL_ENOTFOUND) return rc;
        rc = sl_zk_ensure(sl_ha_zk(ha), "/checkpoint-counter", err, errlen);
        if (rc == 0) rc = sl_zk_create(sl_ha_zk(ha), path, "1", 1, 0, NULL, 0, err, errlen);
        if (rc < 0 && rc != SL_ESTATE) return rc; /* SL_ESTATE: created by another meanwhile: read it */
    }
    return sl_errf(err, errlen, SL_EIO, "ZooKeeper %s: cannot read or create the checkpoint id counter", path);
}

int sl_ha_counter_get(sl_ha_t *ha, const char *job, int64_t *next, char *err, size_t errlen) {
    int version;
    return read_counter(ha, job, next, &version, err, errlen);
}

int sl_ha_counter_issue(sl_ha_t *ha, const char *job, int64_t id, char *err, size_t errlen) {
    int64_t next;
    int version;
    int rc = read_counter(ha, job, &next, &version, err, errlen);
    if (rc < 0) return rc;
    if (next > id)
        return sl_errf(err, errlen, SL_ESTATE,
                       "checkpoint id %" PRId64 " of job %s was issued already (the counter in ZooKeeper is at %" PRId64
                       "): another JobManager runs this job",
                       id, job, next);
    char path[300], v[32];
    counter_path(job, path, sizeof path);
    int len = snprintf(v, sizeof v, "%" PRId64, id + 1);
    rc = sl_zk_set(sl_ha_zk(ha), path, v, (size_t)len, version, err, errlen);
    if (rc == SL_ESTATE)
        return sl_errf(err, errlen, SL_ESTATE,
                       "checkpoint id %" PRId64 " of job %s: the counter in ZooKeeper changed meanwhile (another "
                       "JobManager runs this job)",
                       id, job);
    return rc;
}
