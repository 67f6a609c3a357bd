/*
 * state_read.h — `sluice state read`: an operator's keyed state in a
 * checkpoint or savepoint, printed as JSON lines (state_read.c).
 */
#ifndef SL_CLI_STATE_READ_H
#define SL_CLI_STATE_READ_H

/* Exit codes of `sluice state ...`. */
enum {
    SL_STATE_READ_OK = 0,
    SL_STATE_READ_USAGE = 1,        /* bad arguments */
    SL_STATE_READ_BAD_CHECKPOINT = 2, /* not a readable checkpoint: missing, truncated, corrupt */
    SL_STATE_READ_NOT_FOUND = 3,    /* no operator with that uid, or no state with that name */
    SL_STATE_READ_NOT_UTF8 = 4,     /* --bytes utf8 met bytes that are not UTF-8 */
};

/* `sluice state SUBCOMMAND ...`: argv[0] is the subcommand ("read").
 * Prints to stdout (the state) and stderr (errors); returns the exit code
 * above.  Main thread. */
int sl_state_cli_main(int argc, char **argv);

#endif
