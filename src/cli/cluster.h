/* cluster.h — `sluice jobmanager` (jobmanager_cmd.c), `sluice taskmanager`
 * (taskmanager_cmd.c) and what they share (cluster.c). */
#ifndef SL_CLI_CLUSTER_H
#define SL_CLI_CLUSTER_H

#include "config/config.h"

int sl_cli_jobmanager(int argc, char **argv);
int sl_cli_taskmanager(int argc, char **argv);
/* --config FILE, -D key=value and (id != NULL) --id ID into cfg, then
 * validated; 0, or 2 after a message naming the command. */
int sl_cli_cluster_parse(const char *cmd, int argc, char **argv, sl_config_t *cfg, const char **id);
/* "localhost" as an address to bind or connect to: 127.0.0.1. */
const char *sl_cli_host(const char *h);
/* Registers the jobs compiled into `sluice` (builtin_jobs.c). */
void sl_cli_register_builtin_jobs(void);
/* Returns when SIGTERM or SIGINT arrives. */
void sl_cli_wait_for_signal(void);

#endif
