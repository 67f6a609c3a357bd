/*
 * state_query.h — `sluice state query JOBID --uid UID --key K [--state NAME]
 * [--namespace NS] [--timeout MS] [-m host:port]`: a running job's keyed
 * state for one key, asked from the JobManager's REST API
 * (GET /jobs/:jobid/state) and printed as JSON lines, one per state, in
 * the shape `sluice state read` prints (state_query.c).
 */
#ifndef SL_CLI_STATE_QUERY_H
#define SL_CLI_STATE_QUERY_H

/* Exit codes of `sluice state query`. */
enum {
    SL_STATE_QUERY_OK = 0,
    SL_STATE_QUERY_USAGE = 1,     /* bad arguments */
    SL_STATE_QUERY_FAILED = 2,    /* no answer: JobManager unreachable, job not running, timeout, server error */
    SL_STATE_QUERY_NOT_FOUND = 3, /* no such job, operator or state, or no value for the key */
    SL_STATE_QUERY_BAD_KEY = 4,   /* the key does not parse as the operator's key type */
};

/* argv[0] is the first argument after "query".  Prints the entries to
 * stdout and errors to stderr; returns an exit code above.  Main thread. */
int sl_state_query_cli(int argc, char **argv);

#endif
