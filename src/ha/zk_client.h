/*
 * zk_client.h — a thin wrapper over ZooKeeper's C client (libzookeeper_mt,
 * Debian's libzookeeper-mt-dev) for the HA services (ha_services.h): one
 * session, every path under a prefix (high-availability.zookeeper.path.root
 * + high-availability.cluster-id, created on open, like Curator's
 * namespace in Flink), and synchronous create / get / set / delete /
 * children.  Nothing here knows what the znodes mean.
 *
 * Session state (Flink's ConnectionState): CONNECTED; SUSPENDED while the
 * connection is lost and ZooKeeper's client tries the quorum again (the
 * session and its ephemeral znodes may still be alive); LOST once the
 * server said the session expired, or when the connection stayed lost for
 * longer than the session timeout (the server has expired it by then, even
 * if this process cannot hear so).  LOST is final: a new session needs a
 * new sl_zk_t.
 *
 * Errors: 0, SL_ENOTFOUND (no such znode), SL_ESTATE (exists already, or a
 * version that does not match: somebody else changed it), SL_EIO (the
 * connection or the session is gone; err says which), with a message
 * naming the path.
 *
 * Threads: any thread may call any function; callbacks of ZooKeeper's own
 * threads only update the state kept here.
 */
#ifndef SL_ZK_CLIENT_H
#define SL_ZK_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/common.h"

typedef struct sl_zk sl_zk_t;

typedef enum { SL_ZK_CONNECTED = 0, SL_ZK_SUSPENDED = 1, SL_ZK_LOST = 2 } sl_zk_state_t;

enum { SL_ZK_EPHEMERAL = 1, SL_ZK_SEQUENTIAL = 2 };

/* Connects to quorum ("host:port[,host:port...]") with a session of
 * session_ms and waits up to connect_ms for it; every path is then under
 * prefix ("/sluice/default"; created, with its parents, when missing). */
int sl_zk_open(const char *quorum, const char *prefix, int session_ms, int connect_ms, sl_zk_t **out, char *err,
               size_t errlen);
void sl_zk_close(sl_zk_t *z);
sl_zk_state_t sl_zk_state(sl_zk_t *z);
/* The session's id (0 before it is established). */
int64_t sl_zk_session_id(sl_zk_t *z);
/* The session timeout the server granted, in ms. */
int sl_zk_session_timeout(sl_zk_t *z);
/* Creates path (relative to the prefix, starting with '/') with data; a
 * sequential znode's actual name (its last component) into created. */
int sl_zk_create(sl_zk_t *z, const char *path, const void *data, size_t len, int flags, char *created, size_t cap,
                 char *err, size_t errlen);
/* Creates path and its parents as persistent empty znodes where missing. */
int sl_zk_ensure(sl_zk_t *z, const char *path, char *err, size_t errlen);
/* The data of path into *data (appended; NUL-terminated, the NUL not
 * counted) and its version into *version (NULL: not wanted). */
int sl_zk_get(sl_zk_t *z, const char *path, sl_buf_t *data, int *version, char *err, size_t errlen);
/* Sets path's data if its version is `version` (-1: any). */
int sl_zk_set(sl_zk_t *z, const char *path, const void *data, size_t len, int version, char *err, size_t errlen);
/* Deletes path if its version is `version` (-1: any); a missing znode is SL_ENOTFOUND. */
int sl_zk_delete(sl_zk_t *z, const char *path, int version, char *err, size_t errlen);
/* Deletes path and everything under it (missing: 0). */
int sl_zk_delete_tree(sl_zk_t *z, const char *path, char *err, size_t errlen);
/* The names of path's children, sorted (strcmp), into *names (sl_free
 * each and the array); *n how many. */
int sl_zk_children(sl_zk_t *z, const char *path, char ***names, int *n, char *err, size_t errlen);
void sl_zk_free_names(char **names, int n);

#endif
