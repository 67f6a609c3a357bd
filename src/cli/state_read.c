/*
 * state_read.c — `sluice state read PATH --uid UID [--state NAME]
 * [--bytes auto|utf8|hex|base64]`: every entry of one operator's keyed
 * state in a checkpoint or savepoint, one JSON object per line on stdout
 * (what Flink's removed queryable state and its State Processor API give
 * users, for a stopped job):
 *
 *   {"state":"seen","kind":"list","key_group":17,"key":"card-17","namespace":"","value":["a","b"]}
 *
 * Lines are ordered by state name, then key bytes, then namespace bytes
 * (each bytewise), so equal state prints equal text whichever backend or
 * parallelism wrote it.  A value is a string (value state), an array (list
 * state, in list order) or, for map state, an object of user key -> value
 * sorted by user key — or, when a user key cannot be an object key (--bytes
 * auto and bytes that are not UTF-8), an array of [user key, value] pairs.
 *
 * Bytes: auto prints a JSON string when the bytes are valid UTF-8 without
 * NUL, else {"hex":"..."}; utf8 requires UTF-8 (exit 4 naming the state and
 * key group otherwise); hex and base64 print every key, namespace, user
 * key and value as a string in that encoding.  JSON is written by jansson;
 * the entries' JSON is built by sl_state_entries_json (state_reader.h),
 * which queries of a running job's state share.
 *
 * How the state is found (src/checkpoint/state_reader.h): canonical state
 * files are parsed with the backends' own block parser (sl_kbf_parse);
 * incremental RocksDB checkpoints hold RocksDB's files, which are restored
 * into a temporary database under $TMPDIR through the restore code
 * (sl_native_restore) and written out as canonical blocks by the backend's
 * snapshot.  Everything is read and checked before a line is printed: a
 * damaged checkpoint prints nothing.  The whole state of the operator (or
 * of --state) is held in memory to sort it.
 */
#include "cli/state_read.h"
#include "cli/state_query.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/metadata.h"
#include "checkpoint/state_reader.h"
#include "checkpoint/state_schemas.h"
#include "common/common.h"
#include "state/rocksdb_backend.h"
#include "state/state_backend.h"
#include "taskmanager/native_checkpoint.h"

#define PROG "sluice state read"


static void usage(FILE *f) {
    fprintf(f,
            "usage: sluice state read PATH --uid UID [--state NAME] [--bytes auto|utf8|hex|base64]\n"
            "\n"
            "Prints every entry of the keyed state of the operator with uid UID, one JSON\n"
            "object per line, ordered by state name, key and namespace:\n"
            "  {\"state\":\"seen\",\"kind\":\"list\",\"key_group\":17,\"key\":\"card-17\",\"namespace\":\"\",\"value\":[...]}\n"
            "\n"
            "  PATH             a chk-<n> directory, a savepoint directory, or a job's\n"
            "                   checkpoint directory (its latest completed checkpoint)\n"
            "  --uid UID        the operator (sl_uid); an unknown uid lists the uids there\n"
            "  --state NAME     only this state\n"
            "  --bytes MODE     keys, namespaces and values: auto (default: a string when\n"
            "                   UTF-8 without NUL, else {\"hex\":...}), utf8 (fail on other\n"
            "                   bytes), hex, base64\n"
            "exit codes: 0 ok, 1 bad arguments, 2 not a readable checkpoint, 3 no such\n"
            "operator or state, 4 bytes that are not UTF-8 with --bytes utf8\n"
            "\n"
            "       sluice state query JOBID --uid UID --key K [--state NAME] [-m host:port]\n"
            "a running job's keyed state for one key (sluice state query --help)\n");
}

static int bad_usage(const char *fmt, const char *arg) {
    fprintf(stderr, PROG ": ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nusage: sluice state read PATH --uid UID [--state NAME] [--bytes auto|utf8|hex|base64]"
                    " (sluice state --help)\n");
    return SL_STATE_READ_USAGE;
}

typedef struct block_ctx {
    sl_state_entries_t *col;
    int max_parallelism;
    const char *uid;
} block_ctx_t;

static int on_block(void *c, int kg, const uint8_t *block, size_t len, char *err, size_t errlen) {
    block_ctx_t *b = c;
    return sl_state_entries_add_block(b->col, b->max_parallelism, b->uid, kg, block, len, err, errlen);
}

/* Prints every entry, sorted; 0, or SL_STATE_READ_NOT_UTF8 after the
 * message (then nothing was printed: with --bytes utf8 a first pass checks
 * every entry before the second prints). */
static int print_entries(sl_state_entries_t *col, sl_state_bytes_t mode) {
    sl_state_entries_sort(col);
    size_t n = sl_state_entries_count(col);
    char err[1024];
    for (int pass = mode == SL_STATE_BYTES_UTF8 ? 0 : 1; pass < 2; pass++) {
        for (size_t i = 0; i < n; i++) {
            json_t *line = sl_state_entries_json(col, i, mode, err, sizeof err);
            if (!line) {
                fprintf(stderr, PROG ": %s (use --bytes auto, hex or base64)\n", err);
                return SL_STATE_READ_NOT_UTF8;
            }
            if (pass == 1) {
                char *s = json_dumps(line, JSON_COMPACT | JSON_PRESERVE_ORDER);
                fputs(s, stdout);
                fputc('\n', stdout);
                free(s);
            }
            json_decref(line);
        }
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* The command. */

/* Fills col with operator mo's keyed state. */
static int collect(const char *dir, const sl_ckpt_operator_t *mo, sl_state_entries_t *col, char *err,
                   size_t errlen) {
    block_ctx_t b = {col, mo->max_parallelism, mo->uid};
    if (!sl_native_present(mo)) return sl_ckpt_keyed_blocks_from_files(dir, mo, on_block, &b, err, errlen);
    /* RocksDB's own files (an incremental checkpoint): restore them into a
     * temporary database through the restore code, then let it write
     * canonical blocks. */
    const char *tmp = getenv("TMPDIR");
    char root[1200], db[1300];
    snprintf(root, sizeof root, "%s/sluice-state-read-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(root)) return sl_errf(err, errlen, SL_EIO, "%s: cannot create: %s", root, strerror(errno));
    snprintf(db, sizeof db, "%s/db", root);
    sl_rocksdb_opts_t o = {.dir = db};
    sl_keyed_backend_t *kb = NULL;
    sl_kg_range_t all = {0, mo->max_parallelism};
    int rc = sl_native_restore(dir, mo, mo->max_parallelism, all, root, &o, &kb, err, errlen);
    if (rc == 0) {
        rc = sl_ckpt_keyed_blocks_from_backend(kb, on_block, &b, err, errlen);
        kb->ops->destroy(kb);
    }
    sl_native_rm_rf(root);
    return rc;
}

static int state_read(const char *path, const char *uid, const char *only, sl_state_bytes_t mode) {
    char err[2048] = "", dir[4200];
    sl_ckpt_metadata_t *md = NULL;
    int rc = sl_ckpt_open_path(path, &md, dir, sizeof dir, err, sizeof err);
    if (rc < 0) {
        fprintf(stderr, PROG ": %s: not a readable checkpoint: %s\n", path, err[0] ? err : sl_strerror(rc));
        return SL_STATE_READ_BAD_CHECKPOINT;
    }
    const sl_ckpt_operator_t *mo = sl_ckpt_metadata_find_operator(md, uid);
    const char *what = md->type == SL_CKPT_SAVEPOINT ? "savepoint" : "checkpoint";
    if (!mo) {
        fprintf(stderr, PROG ": %s %lld (%s) has no operator with uid '%s'; its uids:", what,
                (long long)md->checkpoint_id, dir, uid);
        for (int i = 0; i < md->noperators; i++) fprintf(stderr, "%s '%s'", i ? "," : "", md->operators[i].uid);
        fprintf(stderr, "%s\n", md->noperators ? "" : " (none)");
        sl_ckpt_metadata_free(md);
        return SL_STATE_READ_NOT_FOUND;
    }
    sl_state_entries_t *col = sl_state_entries_new(only);
    rc = collect(dir, mo, col, err, sizeof err);
    int code = SL_STATE_READ_OK;
    int nnames = sl_state_entries_nstates(col);
    for (int i = 0; rc == 0 && i < nnames; i++) { /* typed states print their rows' fields */
        sl_schema_t *sch = NULL;
        int64_t ttl = 0;
        if (sl_state_schema_recorded(mo, sl_state_entries_state(col, i), &sch) == 1) {
            sl_state_entries_set_schema(col, sl_state_entries_state(col, i), sch);
            if (sl_state_ttl_recorded(mo, sl_state_entries_state(col, i), &ttl) == 1 && ttl > 0)
                sl_state_entries_set_ttl(col, sl_state_entries_state(col, i)); /* rows after their timestamp */
        }
        sl_schema_unref(sch);
    }
    if (rc < 0) {
        fprintf(stderr, PROG ": %s: not a readable checkpoint: %s\n", path, err[0] ? err : sl_strerror(rc));
        code = SL_STATE_READ_BAD_CHECKPOINT;
    } else if (only && !sl_state_entries_count(col) && !sl_state_entries_declares(col, only)) {
        sl_state_entries_sort(col); /* so the list reads the same every time */
        fprintf(stderr, PROG ": operator '%s' in %s %lld has no keyed state '%s'; its states:", uid, what,
                (long long)md->checkpoint_id, only);
        for (int i = 0; i < nnames; i++) fprintf(stderr, "%s '%s'", i ? "," : "", sl_state_entries_state(col, i));
        fprintf(stderr, "%s\n", nnames ? "" : " (none)");
        code = SL_STATE_READ_NOT_FOUND;
    } else if (!nnames) {
        fprintf(stderr, PROG ": operator '%s' has no keyed state in %s %lld\n", uid, what,
                (long long)md->checkpoint_id);
    }
    if (code == SL_STATE_READ_OK) code = print_entries(col, mode);
    if (fflush(stdout) != 0 && code == SL_STATE_READ_OK) {
        fprintf(stderr, PROG ": writing the output failed: %s\n", strerror(errno));
        code = SL_STATE_READ_BAD_CHECKPOINT;
    }
    sl_state_entries_free(col);
    sl_ckpt_metadata_free(md);
    return code;
}

int sl_state_cli_main(int argc, char **argv) {
    if (argc < 1 || !strcmp(argv[0], "-h") || !strcmp(argv[0], "--help")) {
        usage(argc < 1 ? stderr : stdout);
        return argc < 1 ? SL_STATE_READ_USAGE : SL_STATE_READ_OK;
    }
    if (!strcmp(argv[0], "query")) return sl_state_query_cli(argc - 1, argv + 1); /* a running job's (state_query.c) */
    if (strcmp(argv[0], "read") != 0)
        return bad_usage("unknown subcommand '%s' (sluice state has: read, query)", argv[0]);
    const char *path = NULL, *uid = NULL, *only = NULL;
    sl_state_bytes_t mode = SL_STATE_BYTES_AUTO;
    char opt[64];
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        bool inline_v = false;
        const char *eq = strncmp(a, "--", 2) == 0 ? strchr(a, '=') : NULL;
        if (eq && (size_t)(eq - a) < sizeof opt) { /* --opt=value */
            snprintf(opt, sizeof opt, "%.*s", (int)(eq - a), a);
            a = opt;
            v = eq + 1;
            inline_v = true;
        }
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            usage(stdout);
            return SL_STATE_READ_OK;
        } else if (!strcmp(a, "--uid") || !strcmp(a, "--state") || !strcmp(a, "--bytes")) {
            if (!v || (!inline_v && !*v)) return bad_usage("%s needs a value", a);
            if (!*v) return bad_usage("%s needs a non-empty value", a);
            if (!strcmp(a, "--uid")) uid = v;
            else if (!strcmp(a, "--state")) only = v;
            else if (!strcmp(v, "auto")) mode = SL_STATE_BYTES_AUTO;
            else if (!strcmp(v, "utf8")) mode = SL_STATE_BYTES_UTF8;
            else if (!strcmp(v, "hex")) mode = SL_STATE_BYTES_HEX;
            else if (!strcmp(v, "base64")) mode = SL_STATE_BYTES_BASE64;
            else return bad_usage("--bytes: expected auto, utf8, hex or base64, got '%s'", v);
            i += !inline_v;
        } else if (a[0] == '-' && a[1]) {
            return bad_usage("unknown option '%s'", argv[i]);
        } else if (path) {
            return bad_usage("one PATH only (got a second: '%s')", a);
        } else {
            path = a;
        }
    }
    if (!path) return bad_usage("%s", "no PATH given (a chk-<n>, savepoint or job checkpoint directory)");
    if (!uid) return bad_usage("%s", "--uid UID is required (the operator whose state to read)");
    return state_read(path, uid, only, mode);
}
