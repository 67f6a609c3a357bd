/*
 * client.h — the `sluice` command's cluster verbs, Flink's `flink run`,
 * `flink list` and `flink cancel`, talking to a JobManager's REST API
 * (src/jobmanager/rest.h) with libcurl:
 *
 *   sluice run [-d] [-p P] [-s PATH] [-n] [-c NAME] [-m host:port] JOB [args...]
 *   sluice list [-r] [-s] [-a] [-m host:port]
 *   sluice cancel [-m host:port] JOBID
 *   sluice savepoint [-m host:port] JOBID [DIR] [-t canonical]   (prints the savepoint's path)
 *   sluice savepoint -d PATH                                     (--dispose: deletes a savepoint)
 *   sluice stop [-m host:port] [-p DIR] [-d] JOBID               (stop with a savepoint; -d drains)
 *   sluice info [-c NAME] JOB [args...]                          (the plan, built locally: info.c)
 *
 * Each also takes --config FILE and -D key=value (as the embedded `sluice
 * run` does); without -m the JobManager is rest.address (when the
 * configuration knows that key), else jobmanager.rpc.address when it is
 * set, else 127.0.0.1, on rest.port (8081).  The environment variable
 * SLUICE_REST_TOKEN, when set, is sent as "Authorization: Bearer <token>".
 *
 * Each function takes the arguments after the verb and returns the
 * process's exit code: 0, 1 (the request or the job failed), 2 (usage).
 * Called from main's thread; they print to stdout / stderr.
 */
#ifndef SL_CLI_CLIENT_H
#define SL_CLI_CLIENT_H

#include <stdbool.h>

/* Whether `sluice run ARGS` is for a JobManager rather than the embedded
 * job: -m (--jobmanager) is given, or an option only a cluster run has
 * (-d, -s, -n, -c), or JOB names a file (has a '/' or ".so"), or the
 * configuration given with --config / -D sets rest.address, rest.port or jobmanager.rpc.address.
 * Otherwise `sluice run` keeps running the embedded job. */
bool sl_cli_run_is_remote(int argc, char **argv);

int sl_cli_run(int argc, char **argv);
int sl_cli_list(int argc, char **argv);
int sl_cli_cancel(int argc, char **argv);
int sl_cli_savepoint(int argc, char **argv);
int sl_cli_stop(int argc, char **argv);
/* `sluice info [-c NAME] JOB [args...]` (info.c): the job's plan, built
 * locally, not run. */
int sl_cli_info(int argc, char **argv);

#endif
