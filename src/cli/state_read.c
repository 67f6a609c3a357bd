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
 * key and value as a string in that encoding.  JSON is written by jansson.
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

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "checkpoint/metadata.h"
#include "checkpoint/state_reader.h"
#include "common/common.h"
#include "state/rocksdb_backend.h"
#include "state/state_backend.h"
#include "taskmanager/native_checkpoint.h"

#define PROG "sluice state read"

typedef enum { BYTES_AUTO, BYTES_UTF8, BYTES_HEX, BYTES_BASE64 } bytes_mode_t;

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
            "operator or state, 4 bytes that are not UTF-8 with --bytes utf8\n");
}

static int bad_usage(const char *fmt, const char *arg) {
    fprintf(stderr, PROG ": ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\nusage: sluice state read PATH --uid UID [--state NAME] [--bytes auto|utf8|hex|base64]"
                    " (sluice state --help)\n");
    return SL_STATE_READ_USAGE;
}

/* ------------------------------------------------------------------ */
/* Collecting the entries of the blocks. */

typedef struct item {
    uint8_t *uk, *v; /* uk NULL unless map */
    uint32_t uklen, vlen;
} item_t;

typedef struct entry {
    int state; /* index into names */
    int kg;
    uint8_t *key, *ns;
    uint32_t klen, nslen;
    item_t *items;
    uint32_t n;
} entry_t;

typedef struct collector {
    const char *only; /* --state, or NULL */
    char **names;     /* every state the blocks declare */
    int *kinds;
    int nnames;
    entry_t *v;
    size_t n, cap;
    int kg, cur_state; /* cur_state -1: skipped (--state) */
    entry_t *cur;
} collector_t;

static uint8_t *dup_bytes(const uint8_t *p, uint32_t n) {
    uint8_t *d = sl_malloc(n ? n : 1);
    if (n) memcpy(d, p, n);
    return d;
}

static int on_state(void *c, const char *name, uint32_t namelen, sl_state_kind_t kind, uint32_t nentries) {
    collector_t *col = c;
    int idx = -1;
    for (int i = 0; i < col->nnames && idx < 0; i++)
        if (strlen(col->names[i]) == namelen && memcmp(col->names[i], name, namelen) == 0) idx = i;
    if (idx < 0) {
        col->names = sl_realloc(col->names, (size_t)(col->nnames + 1) * sizeof *col->names);
        col->kinds = sl_realloc(col->kinds, (size_t)(col->nnames + 1) * sizeof *col->kinds);
        col->names[col->nnames] = sl_strndup(name, namelen);
        col->kinds[col->nnames] = (int)kind;
        idx = col->nnames++;
    } else if (col->kinds[idx] != (int)kind) {
        return SL_EFORMAT; /* reported by the caller with the key group */
    }
    col->cur_state = col->only && strcmp(col->only, col->names[idx]) != 0 ? -1 : idx;
    col->cur = NULL;
    return 0;
}

static int on_entry(void *c, const uint8_t *key, uint32_t klen, const uint8_t *ns, uint32_t nslen, uint32_t n) {
    collector_t *col = c;
    col->cur = NULL;
    if (col->cur_state < 0) return 0;
    if (col->n == col->cap) {
        col->cap = col->cap ? col->cap * 2 : 256;
        col->v = sl_realloc(col->v, col->cap * sizeof *col->v);
    }
    entry_t *e = &col->v[col->n++];
    memset(e, 0, sizeof *e);
    e->state = col->cur_state;
    e->kg = col->kg;
    e->key = dup_bytes(key, klen);
    e->klen = klen;
    e->ns = dup_bytes(ns, nslen);
    e->nslen = nslen;
    e->items = sl_calloc(n ? n : 1, sizeof *e->items); /* n is bounded by the block's bytes (sl_kbf_parse) */
    col->cur = e;
    return 0;
}

static int on_item(void *c, const uint8_t *uk, uint32_t uklen, const uint8_t *v, uint32_t vlen) {
    collector_t *col = c;
    entry_t *e = col->cur;
    if (!e) return 0;
    item_t *it = &e->items[e->n++];
    it->uk = uk ? dup_bytes(uk, uklen) : NULL;
    it->uklen = uklen;
    it->v = dup_bytes(v, vlen);
    it->vlen = vlen;
    return 0;
}

static const sl_kbf_visitor_t VISITOR = {.state = on_state, .entry = on_entry, .item = on_item};

typedef struct block_ctx {
    collector_t *col;
    int max_parallelism;
    const char *uid;
} block_ctx_t;

static int on_block(void *c, int kg, const uint8_t *block, size_t len, char *err, size_t errlen) {
    block_ctx_t *b = c;
    b->col->kg = kg;
    b->col->cur_state = -1;
    b->col->cur = NULL;
    char perr[600] = "";
    int rc = sl_kbf_parse(block, len, b->max_parallelism, kg, &VISITOR, b->col, perr, sizeof perr);
    if (rc == SL_EFORMAT && !perr[0])
        snprintf(perr, sizeof perr, "keyed state of key group %d: a state is declared with two different kinds", kg);
    if (rc < 0) return sl_errf(err, errlen, rc, "operator '%s': %s", b->uid, perr);
    return 0;
}

static void collector_free(collector_t *col) {
    for (size_t i = 0; i < col->n; i++) {
        entry_t *e = &col->v[i];
        for (uint32_t j = 0; j < e->n; j++) {
            sl_free(e->items[j].uk);
            sl_free(e->items[j].v);
        }
        sl_free(e->items);
        sl_free(e->key);
        sl_free(e->ns);
    }
    sl_free(col->v);
    for (int i = 0; i < col->nnames; i++) sl_free(col->names[i]);
    sl_free(col->names);
    sl_free(col->kinds);
}

/* ------------------------------------------------------------------ */
/* Ordering. */

static int cmp_bytes(const uint8_t *a, uint32_t al, const uint8_t *b, uint32_t bl) {
    int c = memcmp(a, b, SL_MIN(al, bl));
    return c ? c : al < bl ? -1 : al > bl ? 1 : 0;
}

static char *const *g_names; /* qsort has no context argument */

static int cmp_entry(const void *x, const void *y) {
    const entry_t *a = x, *b = y;
    int c = strcmp(g_names[a->state], g_names[b->state]);
    if (!c) c = cmp_bytes(a->key, a->klen, b->key, b->klen);
    if (!c) c = cmp_bytes(a->ns, a->nslen, b->ns, b->nslen);
    return c;
}

static int cmp_item(const void *x, const void *y) {
    const item_t *a = x, *b = y;
    return cmp_bytes(a->uk, a->uklen, b->uk, b->uklen);
}

/* ------------------------------------------------------------------ */
/* Encoding. */

/* p as a hex (lowercase) or base64 (RFC 4648, padded) string. */
static json_t *encode_text(bool hex, const uint8_t *p, uint32_t n) {
    static const char HEX[] = "0123456789abcdef";
    static const char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    char *s;
    size_t o = 0;
    if (hex) {
        s = sl_malloc((size_t)n * 2 + 1);
        for (uint32_t i = 0; i < n; i++) {
            s[o++] = HEX[p[i] >> 4];
            s[o++] = HEX[p[i] & 15];
        }
    } else {
        s = sl_malloc(((size_t)n + 2) / 3 * 4 + 1);
        for (uint32_t i = 0; i < n; i += 3) {
            uint32_t rest = n - i;
            uint32_t v = (uint32_t)p[i] << 16 | (rest > 1 ? (uint32_t)p[i + 1] << 8 : 0) | (rest > 2 ? p[i + 2] : 0);
            s[o++] = B64[v >> 18 & 63];
            s[o++] = B64[v >> 12 & 63];
            s[o++] = rest > 1 ? B64[v >> 6 & 63] : '=';
            s[o++] = rest > 2 ? B64[v & 63] : '=';
        }
    }
    s[o] = 0;
    json_t *j = json_stringn(s, o);
    sl_free(s);
    return j;
}

/* The JSON for bytes in mode m, or NULL (utf8 mode, not UTF-8). */
static json_t *encode(bytes_mode_t m, const uint8_t *p, uint32_t n) {
    static const uint8_t empty[1];
    if (!p) p = empty;
    switch (m) {
    case BYTES_HEX: return encode_text(true, p, n);
    case BYTES_BASE64: return encode_text(false, p, n);
    case BYTES_UTF8: return json_stringn((const char *)p, n); /* NULL when not UTF-8 */
    case BYTES_AUTO: break;
    }
    json_t *s = memchr(p, 0, n) ? NULL : json_stringn((const char *)p, n);
    if (s) return s;
    return json_pack("{s:o}", "hex", encode_text(true, p, n));
}

typedef struct printer {
    bytes_mode_t mode;
    const char *what; /* what failed to encode, for the message */
} printer_t;

/* The "value" of an entry, or NULL with pr->what set (utf8 mode). */
static json_t *entry_value(printer_t *pr, int kind, entry_t *e) {
    if (kind == SL_STATE_VALUE) {
        json_t *v = e->n == 1 ? encode(pr->mode, e->items[0].v, e->items[0].vlen) : NULL;
        if (!v) pr->what = "value";
        return v;
    }
    if (kind == SL_STATE_LIST) {
        json_t *a = json_array();
        for (uint32_t i = 0; i < e->n; i++) {
            json_t *v = encode(pr->mode, e->items[i].v, e->items[i].vlen);
            if (!v) {
                pr->what = "list element";
                json_decref(a);
                return NULL;
            }
            json_array_append_new(a, v);
        }
        return a;
    }
    qsort(e->items, e->n, sizeof *e->items, cmp_item);
    json_t *obj = json_object(), *pairs = json_array();
    bool as_object = true;
    for (uint32_t i = 0; i < e->n; i++) {
        json_t *k = encode(pr->mode, e->items[i].uk, e->items[i].uklen);
        json_t *v = encode(pr->mode, e->items[i].v, e->items[i].vlen);
        if (!k || !v) {
            pr->what = !k ? "map user key" : "map value";
            json_decref(k);
            json_decref(v);
            json_decref(obj);
            json_decref(pairs);
            return NULL;
        }
        if (!json_is_string(k)) as_object = false;
        if (as_object) json_object_setn_new(obj, json_string_value(k), json_string_length(k), json_incref(v));
        json_array_append_new(pairs, json_pack("[oo]", k, v));
    }
    if (as_object) {
        json_decref(pairs);
        return obj;
    }
    json_decref(obj);
    return pairs;
}

/* The line of entry e, or NULL after printing why (utf8 mode: bytes that
 * are not UTF-8). */
static json_t *entry_line(const collector_t *col, entry_t *e, bytes_mode_t mode) {
    printer_t pr = {mode, NULL};
    int kind = col->kinds[e->state];
    const char *name = col->names[e->state];
    json_t *key = encode(mode, e->key, e->klen);
    json_t *ns = key ? encode(mode, e->ns, e->nslen) : NULL;
    json_t *val = ns ? entry_value(&pr, kind, e) : NULL;
    if (!val) {
        fprintf(stderr,
                PROG ": state '%s', key group %d: the %s of an entry is not valid UTF-8 (use --bytes auto, hex or "
                "base64)\n",
                name, e->kg, !key ? "key" : !ns ? "namespace" : pr.what);
        json_decref(key);
        json_decref(ns);
        return NULL;
    }
    return json_pack("{s:o, s:s, s:i, s:o, s:o, s:o}", "state", encode(BYTES_AUTO, (const uint8_t *)name,
                     (uint32_t)strlen(name)), "kind", sl_kbf_kind_name(kind), "key_group", e->kg, "key", key,
                     "namespace", ns, "value", val);
}

/* Prints every entry, sorted; 0, or SL_STATE_READ_NOT_UTF8 after the
 * message (then nothing was printed: with --bytes utf8 a first pass checks
 * every entry before the second prints). */
static int print_entries(collector_t *col, bytes_mode_t mode) {
    g_names = col->names;
    if (col->n > 1) qsort(col->v, col->n, sizeof *col->v, cmp_entry);
    for (int pass = mode == BYTES_UTF8 ? 0 : 1; pass < 2; pass++) {
        for (size_t i = 0; i < col->n; i++) {
            json_t *line = entry_line(col, &col->v[i], mode);
            if (!line) return SL_STATE_READ_NOT_UTF8;
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
static int collect(const char *dir, const sl_ckpt_operator_t *mo, collector_t *col, char *err, size_t errlen) {
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

static int state_read(const char *path, const char *uid, const char *only, bytes_mode_t mode) {
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
    collector_t col;
    memset(&col, 0, sizeof col);
    col.only = only;
    rc = collect(dir, mo, &col, err, sizeof err);
    int code = SL_STATE_READ_OK;
    if (rc < 0) {
        fprintf(stderr, PROG ": %s: not a readable checkpoint: %s\n", path, err[0] ? err : sl_strerror(rc));
        code = SL_STATE_READ_BAD_CHECKPOINT;
    } else if (only && !col.n) {
        bool known = false;
        for (int i = 0; i < col.nnames; i++) known |= strcmp(col.names[i], only) == 0;
        if (!known) {
            /* sorted, so the list reads the same every time */
            for (int i = 1; i < col.nnames; i++)
                for (int j = i; j > 0 && strcmp(col.names[j - 1], col.names[j]) > 0; j--) {
                    char *t = col.names[j];
                    col.names[j] = col.names[j - 1];
                    col.names[j - 1] = t;
                }
            fprintf(stderr, PROG ": operator '%s' in %s %lld has no keyed state '%s'; its states:", uid, what,
                    (long long)md->checkpoint_id, only);
            for (int i = 0; i < col.nnames; i++) fprintf(stderr, "%s '%s'", i ? "," : "", col.names[i]);
            fprintf(stderr, "%s\n", col.nnames ? "" : " (none)");
            code = SL_STATE_READ_NOT_FOUND;
        }
    } else if (!col.nnames) {
        fprintf(stderr, PROG ": operator '%s' has no keyed state in %s %lld\n", uid, what,
                (long long)md->checkpoint_id);
    }
    if (code == SL_STATE_READ_OK) code = print_entries(&col, mode);
    if (fflush(stdout) != 0 && code == SL_STATE_READ_OK) {
        fprintf(stderr, PROG ": writing the output failed: %s\n", strerror(errno));
        code = SL_STATE_READ_BAD_CHECKPOINT;
    }
    collector_free(&col);
    sl_ckpt_metadata_free(md);
    return code;
}

int sl_state_cli_main(int argc, char **argv) {
    if (argc < 1 || !strcmp(argv[0], "-h") || !strcmp(argv[0], "--help")) {
        usage(argc < 1 ? stderr : stdout);
        return argc < 1 ? SL_STATE_READ_USAGE : SL_STATE_READ_OK;
    }
    if (strcmp(argv[0], "read") != 0) return bad_usage("unknown subcommand '%s' (sluice state has: read)", argv[0]);
    const char *path = NULL, *uid = NULL, *only = NULL;
    bytes_mode_t mode = BYTES_AUTO;
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
            else if (!strcmp(v, "auto")) mode = BYTES_AUTO;
            else if (!strcmp(v, "utf8")) mode = BYTES_UTF8;
            else if (!strcmp(v, "hex")) mode = BYTES_HEX;
            else if (!strcmp(v, "base64")) mode = BYTES_BASE64;
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
