/*
 * leader_election.c — leader election among JobManagers (Flink's
 * LeaderElection over a Curator LeaderLatch): each JobManager creates an
 * ephemeral sequential znode /leaderlatch/latch-<seq>; the one with the
 * lowest sequence leads.  When the leader's session ends (it died, or was
 * cut off from ZooKeeper for longer than the session timeout) ZooKeeper
 * deletes its latch and its /leader with it, and the next one leads.
 *
 * The leader's fencing token is a random 128-bit value made at join; it is
 * published with the leader's addresses and sent to each TaskManager in
 * REGISTERED, so a TaskManager that follows the new leader refuses every
 * other JobManager.
 */
#include <openssl/rand.h>
#include <stdio.h>
#include <string.h>

#include "ha/ha_int.h"

int sl_ha_election_join(sl_ha_t *ha, char *err, size_t errlen) {
    char *latch = sl_ha_latch_name_(ha), *token = sl_ha_token_(ha);
    uint8_t rnd[16];
    if (RAND_bytes(rnd, sizeof rnd) != 1) return sl_errf(err, errlen, SL_EIO, "no randomness for the fencing token");
    for (int i = 0; i < 16; i++) snprintf(token + 2 * i, 3, "%02x", rnd[i]);
    int rc = sl_zk_ensure(sl_ha_zk(ha), "/leaderlatch", err, errlen);
    if (rc == 0)
        rc = sl_zk_create(sl_ha_zk(ha), "/leaderlatch/latch-", token, 32, SL_ZK_EPHEMERAL | SL_ZK_SEQUENTIAL, latch,
                          256, err, errlen);
    return rc;
}

/* Sequential names end in 10 digits: "latch-0000000007". */
int sl_ha_election_leading(sl_ha_t *ha, char *err, size_t errlen) {
    const char *latch = sl_ha_latch_name_(ha);
    if (!latch[0]) return sl_errf(err, errlen, SL_ESTATE, "this JobManager has not joined the election");
    char **names;
    int n;
    int rc = sl_zk_children(sl_ha_zk(ha), "/leaderlatch", &names, &n, err, errlen);
    if (rc < 0) return rc;
    const char *lowest = NULL, *lowest_seq = NULL;
    bool mine = false;
    for (int i = 0; i < n; i++) {
        size_t len = strlen(names[i]);
        const char *seq = len >= 10 ? names[i] + len - 10 : names[i];
        if (!strcmp(names[i], latch)) mine = true;
        if (!lowest || strcmp(seq, lowest_seq) < 0) lowest = names[i], lowest_seq = seq;
    }
    rc = !mine ? sl_errf(err, errlen, SL_EIO, "this JobManager's latch %s is gone", latch)
               : !strcmp(lowest, latch) ? 1 : 0;
    sl_zk_free_names(names, n);
    return rc;
}

int sl_ha_election_publish(sl_ha_t *ha, const char *rpc_host, int rpc_port, const char *rest_url, char *err,
                           size_t errlen) {
    char data[1200];
    int len = snprintf(data, sizeof data, "%s %s:%d %s", sl_ha_token_(ha), rpc_host, rpc_port, rest_url);
    int rc = sl_ha_election_leading(ha, err, errlen);
    if (rc == 0) return sl_errf(err, errlen, SL_ESTATE, "not the leader: another JobManager's latch is lower");
    if (rc < 0) return rc;
    return sl_zk_create(sl_ha_zk(ha), "/leader", data, (size_t)len, SL_ZK_EPHEMERAL, NULL, 0, err, errlen);
}
