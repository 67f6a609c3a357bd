/*
 * test_state_read.c — `sluice state read` against a reference.
 *
 * Jobs built here keep value ("last"), list ("seen") and map ("m") keyed
 * state under a random script of puts, appends, map puts and removes, and
 * clears, with keys, user keys and values that are ASCII, multi-byte UTF-8,
 * raw bytes (NULs, invalid UTF-8) or empty.  Each job ends after a
 * checkpoint that covers the whole input has completed (the source waits
 * for it), on the heap backend and on RocksDB (full and incremental
 * checkpoints), at parallelism 1 and 3, and once more after a failure and a
 * restore at another parallelism.  The real `sluice` binary then reads the
 * retained checkpoint, and every line it prints is parsed with jansson and
 * compared with what the script says each key's state must be (computed
 * here by replaying it on plain arrays): the set of entries, each value,
 * the key group, the encoding asked for (auto / hex / base64 / utf8) and
 * the order.  Then the refusals: unknown uid or state (exit 3, listing what
 * is there), bad arguments (1), and a truncated, corrupted or missing state
 * file, a damaged _metadata and a path with no checkpoint (2, the file
 * named).
 */
#include <dirent.h>
#include <jansson.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "checkpoint/metadata.h"
#include "checkpoint/storage.h"
#include "pipeline_util.h"
#include "state/key_group.h"
#include "test.h"

/* ------------------------------------------------------------------ */
/* The script and its reference. */

#define MAXB 16 /* bytes of a key, user key or value */

typedef struct bytes {
    uint8_t b[MAXB];
    uint32_t n;
} bytes_t;

enum { OP_PUT, OP_ADD, OP_MAP_PUT, OP_MAP_REMOVE, OP_CLEAR_LIST, OP_CLEAR_VALUE };

typedef struct rec {
    int key; /* index into the key pool */
    int op;
    bytes_t uk, v;
} rec_t;

/* what the state of one key must be */
typedef struct ref_key {
    bytes_t key;
    bool has_value;
    bytes_t value;
    bytes_t *list;
    int nlist;
    bytes_t *mk, *mv; /* map, unordered */
    int nmap;
} ref_key_t;

static rec_t *g_rec;
static int g_n;
static bytes_t *g_keys;
static int g_nkeys;

static uint64_t rng_next(uint64_t *s) {
    *s += 0x9e3779b97f4a7c15ull;
    uint64_t z = *s;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Random bytes of one of four kinds: ASCII, multi-byte UTF-8, raw, empty
 * (text_only: no raw bytes). */
static void rand_bytes(uint64_t *s, bytes_t *out, bool text_only, bool allow_empty) {
    static const char *const UTF8[] = {"\xc3\xa9", "\xe2\x82\xac", "\xf0\x9f\x98\x80", "\xd0\xb6", "a", "\xe6\x97\xa5"};
    int kind = (int)(rng_next(s) % 10);
    if (text_only && kind >= 7) kind = (int)(rng_next(s) % 7);
    out->n = 0;
    if (kind < 4) { /* ASCII, "card-<n>"-like */
        int l = snprintf((char *)out->b, MAXB, "k-%u", (unsigned)(rng_next(s) % 100000));
        out->n = (uint32_t)l;
    } else if (kind < 7) { /* UTF-8 */
        int parts = 1 + (int)(rng_next(s) % 3);
        for (int i = 0; i < parts; i++) {
            const char *u = UTF8[rng_next(s) % 6];
            size_t l = strlen(u);
            if (out->n + l > MAXB) break;
            memcpy(out->b + out->n, u, l);
            out->n += (uint32_t)l;
        }
    } else if (kind < 9 || !allow_empty) { /* raw: any byte, NUL and 0xff included */
        out->n = 1 + (uint32_t)(rng_next(s) % (MAXB - 1));
        for (uint32_t i = 0; i < out->n; i++) out->b[i] = (uint8_t)rng_next(s);
        if (rng_next(s) % 3 == 0) out->b[rng_next(s) % out->n] = 0;
    }
}

static bool bytes_eq(const bytes_t *a, const uint8_t *p, size_t n) { return a->n == n && memcmp(a->b, p, n) == 0; }

static int cmp_raw(const uint8_t *a, size_t al, const uint8_t *b, size_t bl) {
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : al < bl ? -1 : al > bl ? 1 : 0;
}

/* The script: nkeys distinct keys, n records. */
static void make_script(uint64_t seed, int n, int nkeys, bool text_only) {
    uint64_t s = seed;
    free(g_keys);
    free(g_rec);
    g_keys = calloc((size_t)nkeys, sizeof *g_keys);
    g_nkeys = 0;
    while (g_nkeys < nkeys) {
        bytes_t k;
        rand_bytes(&s, &k, text_only, false);
        bool dup = false;
        for (int i = 0; i < g_nkeys && !dup; i++) dup = bytes_eq(&g_keys[i], k.b, k.n);
        if (!dup) g_keys[g_nkeys++] = k;
    }
    bytes_t uks[12];
    for (int i = 0; i < 12; i++) rand_bytes(&s, &uks[i], text_only, true);
    g_rec = calloc((size_t)n, sizeof *g_rec);
    g_n = n;
    for (int i = 0; i < n; i++) {
        rec_t *r = &g_rec[i];
        r->key = (int)(rng_next(&s) % (uint64_t)nkeys);
        int w = (int)(rng_next(&s) % 100);
        r->op = w < 30 ? OP_PUT : w < 60 ? OP_ADD : w < 85 ? OP_MAP_PUT : w < 93 ? OP_MAP_REMOVE : w < 97 ? OP_CLEAR_LIST
                                                                                                        : OP_CLEAR_VALUE;
        r->uk = uks[rng_next(&s) % 12];
        rand_bytes(&s, &r->v, text_only, true);
    }
}

/* Replays the script on plain arrays. */
static ref_key_t *reference(void) {
    ref_key_t *ref = calloc((size_t)g_nkeys, sizeof *ref);
    for (int k = 0; k < g_nkeys; k++) ref[k].key = g_keys[k];
    for (int i = 0; i < g_n; i++) {
        const rec_t *r = &g_rec[i];
        ref_key_t *e = &ref[r->key];
        int j;
        switch (r->op) {
        case OP_PUT:
            e->has_value = true;
            e->value = r->v;
            break;
        case OP_ADD:
            e->list = realloc(e->list, (size_t)(e->nlist + 1) * sizeof *e->list);
            e->list[e->nlist++] = r->v;
            break;
        case OP_MAP_PUT:
        case OP_MAP_REMOVE:
            for (j = 0; j < e->nmap && !bytes_eq(&e->mk[j], r->uk.b, r->uk.n); j++) {
            }
            if (r->op == OP_MAP_PUT && j == e->nmap) {
                e->mk = realloc(e->mk, (size_t)(e->nmap + 1) * sizeof *e->mk);
                e->mv = realloc(e->mv, (size_t)(e->nmap + 1) * sizeof *e->mv);
                e->mk[e->nmap++] = r->uk;
            }
            if (r->op == OP_MAP_PUT) e->mv[j] = r->v;
            else if (j < e->nmap) {
                e->mk[j] = e->mk[e->nmap - 1];
                e->mv[j] = e->mv[e->nmap - 1];
                e->nmap--;
            }
            break;
        case OP_CLEAR_LIST: e->nlist = 0; break;
        case OP_CLEAR_VALUE: e->has_value = false; break;
        }
    }
    return ref;
}

static void reference_free(ref_key_t *ref) {
    for (int k = 0; k < g_nkeys; k++) {
        free(ref[k].list);
        free(ref[k].mk);
        free(ref[k].mv);
    }
    free(ref);
}

/* RFC 3629 UTF-8 (no overlong forms, no surrogates, at most U+10FFFF). */
static bool utf8_valid(const uint8_t *p, size_t n) {
    for (size_t i = 0; i < n;) {
        uint8_t c = p[i];
        size_t len;
        uint32_t cp;
        if (c < 0x80) {
            i++;
            continue;
        } else if (c >= 0xc2 && c <= 0xdf) len = 2, cp = c & 0x1f;
        else if (c >= 0xe0 && c <= 0xef) len = 3, cp = c & 0x0f;
        else if (c >= 0xf0 && c <= 0xf4) len = 4, cp = c & 0x07;
        else return false;
        if (i + len > n) return false;
        for (size_t j = 1; j < len; j++) {
            if ((p[i + j] & 0xc0) != 0x80) return false;
            cp = cp << 6 | (p[i + j] & 0x3f);
        }
        if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10ffff)) || (cp >= 0xd800 && cp <= 0xdfff))
            return false;
        i += len;
    }
    return true;
}

static bool is_text(const bytes_t *b) { return utf8_valid(b->b, b->n) && !memchr(b->b, 0, b->n); }

/* ------------------------------------------------------------------ */
/* The job: a one-split source of record indexes that waits, at the end of
 * its input (and in a failing run at the failure point), until a
 * checkpoint taken there has completed; a keyed process function applying
 * the records to its state. */

typedef struct run_ctl {
    int gate;             /* the source waits here for a covering checkpoint */
    int64_t cover_id;     /* the first checkpoint taken at the gate */
    int64_t completed;    /* highest checkpoint notified complete */
    int fail_at;          /* the process function fails at this record (-1: never) */
    atomic_int restored;
    sl_env_t *env;
    int cancelled;        /* the source cancelled the job at its end */
} run_ctl_t;

static run_ctl_t g_ctl;

typedef struct script_reader {
    int64_t next;
} script_reader_t;

static int script_create(void *ctx, int subtask, int p, void **reader, int *nsplits, char *err, size_t el) {
    *reader = calloc(1, sizeof(script_reader_t));
    *nsplits = 1;
    return 0;
}

static int script_poll(void *reader, sl_source_output_t *out, int max, char *err, size_t el) {
    script_reader_t *r = reader;
    int emitted = 0;
    while (r->next < g_ctl.gate && emitted < max) {
        sl_rw_set_i64(sl_src_row(out), 0, r->next);
        sl_src_emit(out, 0, SL_NO_TIMESTAMP);
        r->next++;
        emitted++;
    }
    if (emitted) return SL_SRC_MORE;
    if (!g_ctl.cover_id || g_ctl.completed < g_ctl.cover_id) return SL_SRC_IDLE; /* wait for a covering checkpoint */
    if (g_ctl.gate == g_n) { /* stop the job: a checkpoint completing after its tasks finished would carry
                              * only their operator state, not their keyed state */
        if (!g_ctl.cancelled) {
            g_ctl.cancelled = 1;
            sl_env_cancel(g_ctl.env);
        }
        return SL_SRC_IDLE;
    }
    g_ctl.gate = g_n; /* past the failure point */
    g_ctl.cover_id = 0;
    return SL_SRC_MORE;
}

static int script_snapshot(void *reader, int64_t id, void (*put)(void *, const void *, size_t), void *pc) {
    script_reader_t *r = reader;
    if (r->next == g_ctl.gate && !g_ctl.cover_id) g_ctl.cover_id = id;
    put(pc, &r->next, sizeof r->next);
    return 0;
}

static int script_restore(void *reader, const void *state, size_t len, char *err, size_t el) {
    script_reader_t *r = reader;
    uint32_t l;
    if (len != 4 + sizeof r->next) return SL_EFORMAT;
    memcpy(&l, state, 4);
    if (l != sizeof r->next) return SL_EFORMAT;
    memcpy(&r->next, (const uint8_t *)state + 4, sizeof r->next);
    atomic_fetch_add(&g_ctl.restored, 1);
    return 0;
}

static void script_notify(void *reader, int64_t id) {
    if (id > g_ctl.completed) g_ctl.completed = id;
}

static void script_destroy_reader(void *r) { free(r); }

static const sl_source_ops_t script_ops = {.name = "script",
                                           .create_reader = script_create,
                                           .poll = script_poll,
                                           .destroy_reader = script_destroy_reader,
                                           .snapshot = script_snapshot,
                                           .restore = script_restore,
                                           .notify_checkpoint_complete = script_notify};

static int key_of(void *ctx, const sl_row_t *row, uint8_t *key, int cap) {
    const bytes_t *k = &g_keys[g_rec[sl_row_i64(row, 0)].key];
    if ((int)k->n > cap) return -1;
    memcpy(key, k->b, k->n);
    return (int)k->n;
}

typedef struct st_fn {
    sl_state_t *last, *seen, *m;
} st_fn_t;
static void *st_clone(const void *c) { return calloc(1, sizeof(st_fn_t)); }
static void st_free(void *c) { free(c); }
static int st_open(void *ctx, sl_rt_t *rt) {
    st_fn_t *f = ctx;
    f->last = sl_state_value(rt, "last");
    f->seen = sl_state_list(rt, "seen");
    f->m = sl_state_map(rt, "m");
    return f->last && f->seen && f->m ? 0 : -1;
}
static int st_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    st_fn_t *f = ctx;
    int64_t i = sl_row_i64(&in->row, 0);
    if (i == g_ctl.fail_at) return SL_EINVAL; /* the injected failure */
    const rec_t *r = &g_rec[i];
    switch (r->op) {
    case OP_PUT: return sl_value_put(f->last, r->v.b, r->v.n);
    case OP_ADD: return sl_list_add(f->seen, r->v.b, r->v.n);
    case OP_MAP_PUT: return sl_map_put(f->m, r->uk.b, r->uk.n, r->v.b, r->v.n);
    case OP_MAP_REMOVE: return sl_map_remove(f->m, r->uk.b, r->uk.n) < 0 ? -1 : 0;
    case OP_CLEAR_LIST: sl_state_clear(f->seen); return 0;
    case OP_CLEAR_VALUE: sl_state_clear(f->last); return 0;
    }
    return 0;
}

typedef enum { BK_HEAP, BK_ROCKSDB, BK_ROCKSDB_INC } backend_t;
static const char *const BK_NAME[] = {"heap", "rocksdb", "rocksdb-incremental"};

/* Runs the job; with fail_at >= 0 it must fail there (after a checkpoint
 * covering everything before it), else the source cancels it after a
 * checkpoint covering the whole script.  0 when it ended as planned.  restore: a job
 * checkpoint directory to start from, or NULL. */
static int run_job(const char *base, const char *job, backend_t bk, int p, int maxp, int fail_at, const char *restore) {
    memset(&g_ctl, 0, sizeof g_ctl);
    g_ctl.gate = fail_at >= 0 ? fail_at : g_n;
    g_ctl.fail_at = fail_at;
    sl_env_t *env = sl_env_new();
    g_ctl.env = env;
    sl_env_set_parallelism(env, p);
    sl_env_set_max_parallelism(env, maxp);
    sl_env_enable_checkpointing(env, 10, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, base);
    sl_env_set_checkpoint_retention(env, SL_CHECKPOINTS_RETAIN_ON_CANCELLATION);
    sl_env_set_restart_none(env);
    if (bk != BK_HEAP) {
        char rdb[1200];
        snprintf(rdb, sizeof rdb, "%s/rocksdb-work", sl_test_tmpdir());
        sl_env_set_state_backend(env, SL_STATE_BACKEND_ROCKSDB);
        sl_env_set_rocksdb_options(env, rdb, 4 << 20, 4 << 20);
        sl_env_set_incremental_checkpoints(env, bk == BK_ROCKSDB_INC);
    }
    if (restore && sl_env_restore_from(env, restore) < 0) {
        fprintf(stderr, "  restore: %s\n", sl_env_error(env));
        sl_env_destroy(env);
        return -100;
    }
    sl_schema_t *schema = sl_schema_parse("i BIGINT NOT NULL", NULL, 0);
    sl_stream_t *s = sl_uid(sl_parallelism(sl_from_source(env, (sl_source_t){&script_ops, NULL, schema}, sl_wm_none(),
                                                          "script"),
                                           1),
                            "script");
    sl_process_fn_t fn = {.open = st_open, .process = st_process, .opts = {.ctx_clone = st_clone, .ctx_free = st_free}};
    s = sl_uid(sl_keyed_process(sl_key_by_fn(s, key_of, NULL), fn, sl_schema_parse("i BIGINT NOT NULL", NULL, 0)),
               "stateful");
    collected_t *c = collected_new();
    sl_uid(sl_sink_to(s, collect_sink(c), "out"), "out");
    int rc = sl_env_execute(env, job);
    bool ended = fail_at >= 0 ? rc < 0 && !g_ctl.cancelled : g_ctl.cancelled == 1; /* as planned */
    if (!ended) fprintf(stderr, "  job %s: rc %d: %s\n", job, rc, sl_env_error(env));
    if (restore && atomic_load(&g_ctl.restored) != 1) {
        fprintf(stderr, "  job %s: the source was not restored\n", job);
        ended = false;
    }
    sl_env_destroy(env);
    collected_free(c);
    return ended ? 0 : -1;
}

/* ------------------------------------------------------------------ */
/* Running the command. */

typedef struct cmd_out {
    char *out, *err;
    int code;
} cmd_out_t;

static char *slurp(const char *path) {
    FILE *f = fopen(path, "rb");
    if (!f) return strdup("");
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *s = malloc((size_t)n + 1);
    size_t got = fread(s, 1, (size_t)n, f);
    s[got] = 0;
    fclose(f);
    return s;
}

/* `sluice state ARGS` (a shell string). */
static cmd_out_t sluice_state(const char *args) {
    char cmd[8192], ef[1200];
    snprintf(ef, sizeof ef, "%s/state-read.stderr", sl_test_tmpdir());
    snprintf(cmd, sizeof cmd, "%s state %s 2>'%s'", SLUICE_BIN, args, ef);
    cmd_out_t r = {NULL, NULL, -1};
    FILE *p = popen(cmd, "r");
    if (!p) return r;
    size_t cap = 1 << 16, n = 0;
    r.out = malloc(cap);
    size_t got;
    while ((got = fread(r.out + n, 1, cap - n - 1, p)) > 0) {
        n += got;
        if (cap - n < 2) r.out = realloc(r.out, cap *= 2);
    }
    r.out[n] = 0;
    int st = pclose(p);
    r.code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
    r.err = slurp(ef);
    return r;
}

static void cmd_free(cmd_out_t *r) {
    free(r->out);
    free(r->err);
}

/* ------------------------------------------------------------------ */
/* Checking the output. */

typedef enum { M_AUTO, M_UTF8, M_HEX, M_BASE64 } mode_t_;
static const char *const MODE_NAME[] = {"auto", "utf8", "hex", "base64"};

static int unhex(char c) { return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1; }
static int unb64(char c) {
    return c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? c - 'a' + 26 : c >= '0' && c <= '9' ? c - '0' + 52
           : c == '+' ? 62 : c == '/' ? 63 : -1;
}

/* Decodes the JSON of some bytes printed in mode m into out (cap MAXB + 1
 * so a longer one is noticed); false when its form is not what m (and, for
 * auto, the bytes) require. */
static bool decode(mode_t_ m, json_t *j, uint8_t *out, size_t *n) {
    *n = 0;
    if (m == M_AUTO && json_is_object(j)) {
        json_t *h = json_object_get(j, "hex");
        if (json_object_size(j) != 1 || !json_is_string(h)) return false;
        const char *s = json_string_value(h);
        size_t l = json_string_length(h);
        if (l % 2 || l / 2 > MAXB) return false;
        for (size_t i = 0; i < l; i += 2) {
            if (unhex(s[i]) < 0 || unhex(s[i + 1]) < 0) return false;
            out[(*n)++] = (uint8_t)(unhex(s[i]) << 4 | unhex(s[i + 1]));
        }
        return !(utf8_valid(out, *n) && !memchr(out, 0, *n)); /* text must have been a string */
    }
    if (!json_is_string(j)) return false;
    const char *s = json_string_value(j);
    size_t l = json_string_length(j);
    if (m == M_AUTO || m == M_UTF8) {
        if (l > MAXB) return false;
        memcpy(out, s, l);
        *n = l;
        return m == M_UTF8 || !memchr(out, 0, l);
    }
    if (m == M_HEX) {
        if (l % 2 || l / 2 > MAXB) return false;
        for (size_t i = 0; i < l; i += 2) {
            if (unhex(s[i]) < 0 || unhex(s[i + 1]) < 0) return false;
            out[(*n)++] = (uint8_t)(unhex(s[i]) << 4 | unhex(s[i + 1]));
        }
        return true;
    }
    if (l % 4) return false;
    for (size_t i = 0; i < l; i += 4) {
        int a = unb64(s[i]), b = unb64(s[i + 1]), c = s[i + 2] == '=' ? -2 : unb64(s[i + 2]),
            d = s[i + 3] == '=' ? -2 : unb64(s[i + 3]);
        if (a < 0 || b < 0 || c == -1 || d == -1 || (c == -2 && d != -2) || ((c == -2 || d == -2) && i + 4 != l))
            return false;
        uint32_t v = (uint32_t)a << 18 | (uint32_t)b << 12 | (uint32_t)(c < 0 ? 0 : c) << 6 | (uint32_t)(d < 0 ? 0 : d);
        int bytes = c == -2 ? 1 : d == -2 ? 2 : 3;
        if (*n + (size_t)bytes > MAXB) return false;
        out[(*n)++] = (uint8_t)(v >> 16);
        if (bytes > 1) out[(*n)++] = (uint8_t)(v >> 8);
        if (bytes > 2) out[(*n)++] = (uint8_t)v;
    }
    return true;
}

static bool dec_eq(mode_t_ m, json_t *j, const bytes_t *want) {
    uint8_t b[MAXB + 1];
    size_t n;
    return decode(m, j, b, &n) && bytes_eq(want, b, n);
}

static int ref_find(const ref_key_t *ref, const uint8_t *k, size_t n) {
    for (int i = 0; i < g_nkeys; i++)
        if (bytes_eq(&ref[i].key, k, n)) return i;
    return -1;
}

/* Checks the output of `state read` in mode m (only: --state or NULL)
 * against the reference: returns the number of problems (printing the
 * first few). */
static int check_output(const char *out, const ref_key_t *ref, mode_t_ m, int maxp, const char *only) {
    static const char *const STATES[] = {"last", "m", "seen"}; /* sorted */
    static const char *const KINDS[] = {"value", "map", "list"};
    int bad = 0, lineno = 0;
    int seen_lines[3] = {0, 0, 0};
    char prev_state[16] = "";
    uint8_t prev_key[MAXB + 1];
    size_t prev_klen = 0;
    bool have_prev = false;
#define BAD(...)                                                                                                   \
    do {                                                                                                           \
        if (bad++ < 5) {                                                                                           \
            fprintf(stderr, "  line %d (%s): ", lineno, MODE_NAME[m]);                                             \
            fprintf(stderr, __VA_ARGS__);                                                                          \
            fprintf(stderr, "\n");                                                                                 \
        }                                                                                                          \
    } while (0)
    for (const char *l = out; *l;) {
        const char *nl = strchr(l, '\n');
        if (!nl) {
            lineno++;
            BAD("no newline at the end of the output");
            break;
        }
        lineno++;
        json_error_t je;
        json_t *o = json_loadb(l, (size_t)(nl - l), JSON_ALLOW_NUL, &je);
        l = nl + 1;
        if (!o || !json_is_object(o)) {
            BAD("not a JSON object: %s", je.text);
            json_decref(o);
            continue;
        }
        static const char *const FIELDS[] = {"state", "kind", "key_group", "key", "namespace", "value"};
        int fi = 0;
        bool fields_ok = json_object_size(o) == 6;
        for (void *it = json_object_iter(o); it && fields_ok; it = json_object_iter_next(o, it), fi++)
            fields_ok = strcmp(json_object_iter_key(it), FIELDS[fi]) == 0;
        if (!fields_ok) {
            BAD("fields are not state, kind, key_group, key, namespace, value");
            json_decref(o);
            continue;
        }
        const char *state = json_string_value(json_object_get(o, "state"));
        int si = -1;
        for (int i = 0; i < 3 && state; i++)
            if (!strcmp(state, STATES[i])) si = i;
        uint8_t key[MAXB + 1], ns[MAXB + 1];
        size_t klen, nslen;
        int ki = -1;
        if (si < 0 || (only && strcmp(only, state))) {
            BAD("unexpected state %s", state ? state : "(not a string)");
        } else if (!json_is_string(json_object_get(o, "kind")) ||
                   strcmp(json_string_value(json_object_get(o, "kind")), KINDS[si])) {
            BAD("state %s: kind is not %s", state, KINDS[si]);
        } else if (!decode(m, json_object_get(o, "key"), key, &klen) || (ki = ref_find(ref, key, klen)) < 0) {
            BAD("state %s: the key is not one of the script's, or wrongly encoded", state);
            ki = -1;
        } else if (!decode(m, json_object_get(o, "namespace"), ns, &nslen) || nslen != 0) {
            BAD("state %s: the namespace is not the empty one", state);
        } else if (!json_is_integer(json_object_get(o, "key_group")) ||
                   json_integer_value(json_object_get(o, "key_group")) !=
                       sl_kg_of_hash(sl_kg_key_hash(key, (uint32_t)klen), maxp)) {
            BAD("state %s: wrong key group", state);
        }
        if (si >= 0 && ki >= 0) {
            /* strictly ascending by (state, key); the namespace is always empty */
            if (have_prev) {
                int c = strcmp(prev_state, state);
                if (!c) c = cmp_raw(prev_key, prev_klen, key, klen);
                if (c >= 0) BAD("not after the line before it (order or duplicate)");
            }
            snprintf(prev_state, sizeof prev_state, "%s", state);
            memcpy(prev_key, key, klen);
            prev_klen = klen;
            have_prev = true;
            seen_lines[si]++;
            const ref_key_t *e = &ref[ki];
            json_t *v = json_object_get(o, "value");
            if (si == 0) {
                if (!e->has_value || !dec_eq(m, v, &e->value)) BAD("state last: wrong value");
            } else if (si == 2) {
                bool ok = e->nlist > 0 && json_is_array(v) && (int)json_array_size(v) == e->nlist;
                for (int i = 0; ok && i < e->nlist; i++) ok = dec_eq(m, json_array_get(v, (size_t)i), &e->list[i]);
                if (!ok) BAD("state seen: wrong list (%d elements expected)", e->nlist);
            } else {
                /* an object when every user key is text (auto) — always in
                 * the other modes —, else [user key, value] pairs; sorted
                 * by user key bytes either way */
                bool all_text = true;
                for (int i = 0; i < e->nmap; i++) all_text &= is_text(&e->mk[i]);
                bool as_obj = m != M_AUTO || all_text;
                bool ok = e->nmap > 0 && (as_obj ? json_is_object(v) && (int)json_object_size(v) == e->nmap
                                                 : json_is_array(v) && (int)json_array_size(v) == e->nmap);
                uint8_t pk[MAXB + 1];
                size_t pkl = 0;
                int idx = 0;
                void *it = as_obj && ok ? json_object_iter(v) : NULL;
                for (; ok && idx < e->nmap; idx++) {
                    uint8_t uk[MAXB + 1];
                    size_t ukl;
                    json_t *jk, *jv;
                    if (as_obj) {
                        jk = json_stringn(json_object_iter_key(it), json_object_iter_key_len(it));
                        jv = json_object_iter_value(it);
                        it = json_object_iter_next(v, it);
                    } else {
                        json_t *pair = json_array_get(v, (size_t)idx);
                        ok = json_is_array(pair) && json_array_size(pair) == 2;
                        if (!ok) break;
                        jk = json_incref(json_array_get(pair, 0));
                        jv = json_array_get(pair, 1);
                    }
                    ok = jk && decode(m, jk, uk, &ukl);
                    json_decref(jk);
                    int j = 0;
                    while (ok && j < e->nmap && !bytes_eq(&e->mk[j], uk, ukl)) j++;
                    ok = ok && j < e->nmap && dec_eq(m, jv, &e->mv[j]) && (idx == 0 || cmp_raw(pk, pkl, uk, ukl) < 0);
                    memcpy(pk, uk, ukl);
                    pkl = ukl;
                }
                if (!ok) BAD("state m: wrong map (%d entries expected, as an %s)", e->nmap, as_obj ? "object" : "array");
            }
        }
        json_decref(o);
    }
    /* every entry of the reference was printed (each line matched one, in
     * strictly ascending order, so counts settle it) */
    int want[3] = {0, 0, 0};
    for (int k = 0; k < g_nkeys; k++) {
        want[0] += ref[k].has_value;
        want[1] += ref[k].nmap > 0;
        want[2] += ref[k].nlist > 0;
    }
    for (int i = 0; i < 3; i++) {
        if (only && strcmp(only, STATES[i])) want[i] = 0;
        if (seen_lines[i] != want[i] && bad++ < 5)
            fprintf(stderr, "  (%s) state %s: %d lines, the reference has %d entries\n", MODE_NAME[m], STATES[i],
                    seen_lines[i], want[i]);
    }
    return bad;
#undef BAD
}

/* The first entry, in the reader's order, that has bytes other than text,
 * as "state 'NAME', key group N" (for --bytes utf8), or "" when all are. */
static void first_non_utf8(const ref_key_t *ref, int maxp, char *buf, size_t cap) {
    static const char *const STATES[] = {"last", "m", "seen"};
    buf[0] = 0;
    for (int si = 0; si < 3 && !buf[0]; si++) {
        int best = -1;
        for (int k = 0; k < g_nkeys; k++) {
            const ref_key_t *e = &ref[k];
            bool has = si == 0 ? e->has_value : si == 1 ? e->nmap > 0 : e->nlist > 0;
            if (!has) continue;
            bool ok = utf8_valid(e->key.b, e->key.n);
            if (si == 0) ok = ok && utf8_valid(e->value.b, e->value.n);
            for (int i = 0; si == 1 && i < e->nmap; i++)
                ok = ok && utf8_valid(e->mk[i].b, e->mk[i].n) && utf8_valid(e->mv[i].b, e->mv[i].n);
            for (int i = 0; si == 2 && i < e->nlist; i++) ok = ok && utf8_valid(e->list[i].b, e->list[i].n);
            if (!ok && (best < 0 || cmp_raw(e->key.b, e->key.n, ref[best].key.b, ref[best].key.n) < 0)) best = k;
        }
        if (best >= 0)
            snprintf(buf, cap, "state '%s', key group %d", STATES[si],
                     sl_kg_of_hash(sl_kg_key_hash(ref[best].key.b, ref[best].key.n), maxp));
    }
}

/* Reads `path` in every mode and checks each against the reference. */
static int check_all_modes(const char *path, const ref_key_t *ref, int maxp) {
    int bad = 0;
    for (int m = 0; m < 4; m++) {
        char args[4600];
        snprintf(args, sizeof args, "read '%s' --uid stateful --bytes %s", path, MODE_NAME[m]);
        cmd_out_t r = sluice_state(args);
        char first[200];
        first_non_utf8(ref, maxp, first, sizeof first);
        if (m == M_UTF8 && first[0]) { /* refused, naming the first state and key group that is not UTF-8 */
            if (r.code != 4 || r.out[0] || !strstr(r.err, first)) {
                fprintf(stderr, "  utf8: exit %d, stdout %zu bytes, stderr '%s' (want 4 naming %s)\n", r.code,
                        strlen(r.out), r.err, first);
                bad++;
            }
        } else if (r.code != 0) {
            fprintf(stderr, "  %s: exit %d: %s\n", MODE_NAME[m], r.code, r.err);
            bad++;
        } else {
            bad += check_output(r.out, ref, (mode_t_)m, maxp, NULL);
        }
        cmd_free(&r);
    }
    return bad;
}

/* The latest complete checkpoint directory of base/job. */
static int64_t latest_chk(const char *base, const char *job, char *dir, size_t cap) {
    sl_ckpt_storage_t *st = NULL;
    char err[600];
    int64_t id = 0;
    if (sl_ckpt_storage_fs_open(base, job, &st, err, sizeof err) < 0) return -1;
    if (sl_ckpt_storage_latest_complete_id(st, &id, err, sizeof err) < 0) id = -1;
    st->ops->destroy(st);
    snprintf(dir, cap, "%s/%s/chk-%lld", base, job, (long long)id);
    return id;
}

/* ------------------------------------------------------------------ */
/* Tests. */

/* Every backend at parallelism 1 and 3: the whole state, in every mode,
 * read through the job directory and through its chk-<n>. */
TEST(state_read_matches_reference) {
    uint64_t seed = getenv("SEED") ? strtoull(getenv("SEED"), NULL, 10) : 20261202;
    int cases = 0;
    for (int bk = 0; bk < 3; bk++)
        for (int pi = 0; pi < 2; pi++) {
            int p = pi ? 3 : 1, maxp = pi ? 128 : 37;
            uint64_t s = seed * 31 + (uint64_t)(bk * 2 + pi);
            bool text_only = bk == 1 && pi == 0; /* one case where --bytes utf8 succeeds */
            uint64_t z = s;
            make_script(s, 1500 + (int)(rng_next(&z) % 1500), 60 + (int)(rng_next(&z) % 140), text_only);
            ref_key_t *ref = reference();
            char base[1200], job[64], jobdir[1300], chk[1400];
            snprintf(base, sizeof base, "%s/ck", sl_test_tmpdir());
            snprintf(job, sizeof job, "read-%s-p%d", BK_NAME[bk], p);
            snprintf(jobdir, sizeof jobdir, "%s/%s", base, job);
            int rc = run_job(base, job, (backend_t)bk, p, maxp, -1, NULL);
            CHECK_EQ(rc, 0);
            CHECK(latest_chk(base, job, chk, sizeof chk) > 0);
            fprintf(stderr, "  %s p=%d maxp=%d: %d records, %d keys, %s\n", BK_NAME[bk], p, maxp, g_n, g_nkeys, chk);
            CHECK_EQ(check_all_modes(jobdir, ref, maxp), 0);
            char args[1600];
            snprintf(args, sizeof args, "read '%s' --uid stateful", chk); /* the chk-<n> form */
            cmd_out_t r = sluice_state(args);
            CHECK_EQ(r.code, 0);
            CHECK_EQ(check_output(r.out, ref, M_AUTO, maxp, NULL), 0);
            cmd_free(&r);
            snprintf(args, sizeof args, "read '%s' --uid=stateful --state seen", chk);
            r = sluice_state(args);
            CHECK_EQ(r.code, 0);
            CHECK_EQ(check_output(r.out, ref, M_AUTO, maxp, "seen"), 0);
            cmd_free(&r);
            reference_free(ref);
            cases++;
        }
    CHECK_EQ(cases, 6);
}

/* A job that fails after a checkpoint, restored at another parallelism
 * and run to its end: the state it leaves is the whole script's — nothing
 * applied twice, nothing lost. */
TEST(state_read_after_restore_at_other_parallelism) {
    uint64_t seed = getenv("SEED") ? strtoull(getenv("SEED"), NULL, 10) : 20261202;
    static const struct {
        backend_t bk;
        int p1, p2;
    } CASES[] = {{BK_HEAP, 3, 1}, {BK_ROCKSDB_INC, 1, 3}, {BK_ROCKSDB, 3, 2}};
    for (int c = 0; c < 3; c++) {
        uint64_t s = seed * 97 + (uint64_t)c;
        uint64_t z = s;
        make_script(s, 2000 + (int)(rng_next(&z) % 1000), 80 + (int)(rng_next(&z) % 80), false);
        ref_key_t *ref = reference();
        char base[1200], job1[64], job2[64], dir1[1300], dir2[1300];
        snprintf(base, sizeof base, "%s/ck", sl_test_tmpdir());
        snprintf(job1, sizeof job1, "restore-%d-a", c);
        snprintf(job2, sizeof job2, "restore-%d-b", c);
        snprintf(dir1, sizeof dir1, "%s/%s", base, job1);
        snprintf(dir2, sizeof dir2, "%s/%s", base, job2);
        int fail_at = g_n / 3 + (int)(rng_next(&z) % (uint64_t)(g_n / 3));
        CHECK_EQ(run_job(base, job1, CASES[c].bk, CASES[c].p1, 128, fail_at, NULL), 0);
        CHECK_EQ(run_job(base, job2, CASES[c].bk, CASES[c].p2, 128, -1, dir1), 0);
        fprintf(stderr, "  %s p=%d -> p=%d: failed at record %d of %d\n", BK_NAME[CASES[c].bk], CASES[c].p1,
                CASES[c].p2, fail_at, g_n);
        char args[1600];
        snprintf(args, sizeof args, "read '%s' --uid stateful", dir2);
        cmd_out_t r = sluice_state(args);
        CHECK_EQ(r.code, 0);
        CHECK_EQ(check_output(r.out, ref, M_AUTO, 128, NULL), 0);
        cmd_free(&r);
        reference_free(ref);
    }
}

static void copy_dir(const char *from, const char *to) {
    char cmd[3000];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", to, from, to);
    if (system(cmd) != 0) abort();
}

/* The first keyed-* file of a chk-<n> directory. */
static bool keyed_file(const char *dir, char *out, size_t cap) {
    DIR *d = opendir(dir);
    struct dirent *e;
    bool found = false;
    while (d && (e = readdir(d)) && !found)
        if (!strncmp(e->d_name, "keyed-", 6)) {
            snprintf(out, cap, "%s/%s", dir, e->d_name);
            found = true;
        }
    if (d) closedir(d);
    return found;
}

/* Refusals, each with its exit code and a message naming what is wrong. */
TEST(state_read_refusals) {
    make_script(7, 800, 50, false);
    ref_key_t *ref = reference();
    char base[1200], jobdir[1300], chk[1400], bad[1400], f[1700], args[4000];
    snprintf(base, sizeof base, "%s/ck", sl_test_tmpdir());
    snprintf(jobdir, sizeof jobdir, "%s/refusals", base);
    CHECK_EQ(run_job(base, "refusals", BK_HEAP, 2, 128, -1, NULL), 0);
    CHECK(latest_chk(base, "refusals", chk, sizeof chk) > 0);
    snprintf(bad, sizeof bad, "%s/damaged", sl_test_tmpdir());

    /* unknown uid: 3, listing the uids */
    snprintf(args, sizeof args, "read '%s' --uid nosuch", jobdir);
    cmd_out_t r = sluice_state(args);
    CHECK_EQ(r.code, 3);
    CHECK_STR(r.out, "");
    CHECK_CONTAINS(r.err, "'nosuch'");
    CHECK_CONTAINS(r.err, "'script'");
    CHECK_CONTAINS(r.err, "'stateful'");
    CHECK_CONTAINS(r.err, "'out'");
    cmd_free(&r);
    /* unknown state: 3, listing the states (sorted) */
    snprintf(args, sizeof args, "read '%s' --uid stateful --state nosuch", chk);
    r = sluice_state(args);
    CHECK_EQ(r.code, 3);
    CHECK_STR(r.out, "");
    CHECK_CONTAINS(r.err, "'nosuch'; its states: 'last', 'm', 'seen'");
    cmd_free(&r);
    /* an operator without keyed state prints nothing, and --state on it is 3 */
    snprintf(args, sizeof args, "read '%s' --uid script", chk);
    r = sluice_state(args);
    CHECK_EQ(r.code, 0);
    CHECK_STR(r.out, "");
    cmd_free(&r);
    snprintf(args, sizeof args, "read '%s' --uid script --state last", chk);
    r = sluice_state(args);
    CHECK_EQ(r.code, 3);
    CHECK_CONTAINS(r.err, "(none)");
    cmd_free(&r);

    /* bad arguments: 1, saying what is wrong */
    static const struct {
        const char *args, *says;
    } USAGE[] = {{"read --uid x", "no PATH"},
                 {"read /tmp", "--uid UID is required"},
                 {"read /tmp --uid", "--uid needs a value"},
                 {"read /tmp --uid x --bytes latin1", "expected auto, utf8, hex or base64"},
                 {"read /tmp --uid x --frobnicate", "unknown option '--frobnicate'"},
                 {"read /tmp /var --uid x", "one PATH only"},
                 {"write /tmp", "unknown subcommand 'write'"},
                 {"", "usage: sluice state read"}, {"read", "no PATH"}};
    for (size_t i = 0; i < sizeof USAGE / sizeof USAGE[0]; i++) {
        r = sluice_state(USAGE[i].args);
        CHECK_EQ(r.code, 1);
        CHECK_STR(r.out, "");
        CHECK_CONTAINS(r.err, USAGE[i].says);
        cmd_free(&r);
    }

    /* a path with no checkpoint, and one that does not exist: 2 */
    char empty[1300];
    snprintf(empty, sizeof empty, "%s/empty-dir", sl_test_tmpdir());
    mkdir(empty, 0755);
    snprintf(args, sizeof args, "read '%s' --uid stateful", empty);
    r = sluice_state(args);
    CHECK_EQ(r.code, 2);
    CHECK_CONTAINS(r.err, "_metadata");
    cmd_free(&r);
    struct stat sst;
    char shared[1400];
    snprintf(shared, sizeof shared, "%s/shared", empty);
    CHECK(stat(shared, &sst) != 0); /* reading created nothing */
    snprintf(args, sizeof args, "read '%s/nope' --uid stateful", empty);
    r = sluice_state(args);
    CHECK_EQ(r.code, 2);
    CHECK_CONTAINS(r.err, "nope");
    cmd_free(&r);

    /* a truncated state file: 2, the file named */
    copy_dir(chk, bad);
    CHECK(keyed_file(bad, f, sizeof f));
    CHECK(stat(f, &sst) == 0 && sst.st_size > 100);
    CHECK(truncate(f, sst.st_size - 1 - (off_t)(sst.st_size / 3)) == 0);
    snprintf(args, sizeof args, "read '%s' --uid stateful", bad);
    r = sluice_state(args);
    CHECK_EQ(r.code, 2);
    CHECK_STR(r.out, "");
    CHECK_CONTAINS(r.err, f);
    cmd_free(&r);
    /* a flipped byte anywhere in it: 2, the file named */
    for (int trial = 0; trial < 6; trial++) {
        copy_dir(chk, bad);
        CHECK(keyed_file(bad, f, sizeof f));
        CHECK(stat(f, &sst) == 0);
        FILE *fp = fopen(f, "r+b");
        CHECK(fp);
        long off = (long)((uint64_t)(trial * 7919 + 13) % (uint64_t)sst.st_size);
        fseek(fp, off, SEEK_SET);
        int ch = fgetc(fp);
        fseek(fp, off, SEEK_SET);
        fputc(ch ^ (1 << (trial % 8)), fp);
        fclose(fp);
        r = sluice_state(args);
        if (r.code != 2) fprintf(stderr, "  flipped byte %ld of %lld: exit %d\n", off, (long long)sst.st_size, r.code);
        CHECK_EQ(r.code, 2);
        CHECK_STR(r.out, "");
        CHECK_CONTAINS(r.err, f);
        cmd_free(&r);
    }
    /* a missing state file: 2, the file named */
    copy_dir(chk, bad);
    CHECK(keyed_file(bad, f, sizeof f));
    CHECK(unlink(f) == 0);
    r = sluice_state(args);
    CHECK_EQ(r.code, 2);
    CHECK_CONTAINS(r.err, f);
    CHECK_CONTAINS(r.err, "missing");
    cmd_free(&r);
    /* a state file replaced by another valid one: 2, the file named */
    copy_dir(chk, bad);
    CHECK(keyed_file(bad, f, sizeof f));
    sl_ckpt_out_t *out = NULL;
    sl_state_file_writer_t *w = NULL;
    char werr[600];
    CHECK_EQ(sl_ckpt_out_open_file(f, false, &out, werr, sizeof werr), 0);
    CHECK_EQ(sl_sf_writer_new(out, SL_SF_KIND_KEYED, &w, werr, sizeof werr), 0);
    CHECK_EQ(sl_sf_writer_close(w, NULL, werr, sizeof werr), 0);
    r = sluice_state(args);
    CHECK_EQ(r.code, 2);
    CHECK_CONTAINS(r.err, f);
    CHECK_CONTAINS(r.err, "not the file the checkpoint's metadata describes");
    cmd_free(&r);
    /* a damaged _metadata: 2, named */
    copy_dir(chk, bad);
    snprintf(f, sizeof f, "%s/_metadata", bad);
    CHECK(stat(f, &sst) == 0);
    FILE *fp = fopen(f, "r+b");
    CHECK(fp);
    fseek(fp, (long)sst.st_size / 2, SEEK_SET);
    int ch = fgetc(fp);
    fseek(fp, (long)sst.st_size / 2, SEEK_SET);
    fputc(ch ^ 0x10, fp);
    fclose(fp);
    r = sluice_state(args);
    CHECK_EQ(r.code, 2);
    CHECK_CONTAINS(r.err, f);
    cmd_free(&r);

    /* the same checkpoint as a savepoint (its _metadata's type): read alike */
    copy_dir(chk, bad);
    snprintf(f, sizeof f, "%s/_metadata", bad);
    sl_ckpt_metadata_t *md = NULL;
    char err[600];
    CHECK_EQ(sl_ckpt_metadata_read_file(f, &md, err, sizeof err), 0);
    md->type = SL_CKPT_SAVEPOINT;
    md->format = SL_CKPT_FORMAT_CANONICAL;
    CHECK_EQ(sl_ckpt_metadata_write_file(md, f, err, sizeof err), 0);
    sl_ckpt_metadata_free(md);
    r = sluice_state(args);
    CHECK_EQ(r.code, 0);
    CHECK_EQ(check_output(r.out, ref, M_AUTO, 128, NULL), 0);
    cmd_free(&r);
    reference_free(ref);
}

/* An incremental RocksDB checkpoint whose shared SST file is missing or
 * has a flipped byte: 2, the file named. */
TEST(state_read_refuses_damaged_native_files) {
    make_script(11, 900, 60, false);
    char base[1200], jobdir[1300], chk[1400], copy[1300], f[2000], args[1600], err[600];
    snprintf(base, sizeof base, "%s/ck", sl_test_tmpdir());
    snprintf(jobdir, sizeof jobdir, "%s/native-refusals", base);
    snprintf(copy, sizeof copy, "%s/native-copy", sl_test_tmpdir()); /* a job directory keeps its job's name */
    mkdir(copy, 0755);
    snprintf(copy + strlen(copy), sizeof copy - strlen(copy), "/native-refusals");
    CHECK_EQ(run_job(base, "native-refusals", BK_ROCKSDB_INC, 2, 128, -1, NULL), 0);
    CHECK(latest_chk(base, "native-refusals", chk, sizeof chk) > 0);
    snprintf(f, sizeof f, "%s/_metadata", chk);
    sl_ckpt_metadata_t *md = NULL;
    CHECK_EQ(sl_ckpt_metadata_read_file(f, &md, err, sizeof err), 0);
    const sl_ckpt_operator_t *op = sl_ckpt_metadata_find_operator(md, "stateful");
    CHECK(op);
    char sst[600] = "";
    for (int q = 0; q < op->parallelism && !sst[0]; q++)
        for (int h = 0; h < op->subtasks[q].nhandles && !sst[0]; h++)
            if (op->subtasks[q].handles[h].scope == SL_CKPT_SCOPE_SHARED)
                snprintf(sst, sizeof sst, "%s", op->subtasks[q].handles[h].path);
    sl_ckpt_metadata_free(md);
    CHECK(sst[0]);
    snprintf(args, sizeof args, "read '%s' --uid stateful", copy);
    snprintf(f, sizeof f, "%s/shared/%s", copy, sst);
    for (int damage = 0; damage < 2; damage++) {
        copy_dir(jobdir, copy);
        struct stat sst_st;
        CHECK(stat(f, &sst_st) == 0 && sst_st.st_size > 0);
        if (damage == 0) {
            CHECK(unlink(f) == 0);
        } else {
            FILE *fp = fopen(f, "r+b");
            CHECK(fp);
            fseek(fp, (long)sst_st.st_size / 2, SEEK_SET);
            int ch = fgetc(fp);
            fseek(fp, (long)sst_st.st_size / 2, SEEK_SET);
            fputc(ch ^ 0x40, fp);
            fclose(fp);
        }
        cmd_out_t r = sluice_state(args);
        CHECK_EQ(r.code, 2);
        CHECK_STR(r.out, "");
        CHECK_CONTAINS(r.err, f);
        CHECK_CONTAINS(r.err, damage == 0 ? "No such file" : "corrupt");
        cmd_free(&r);
    }
    /* undamaged, the copy reads like the original */
    copy_dir(jobdir, copy);
    ref_key_t *ref = reference();
    cmd_out_t r = sluice_state(args);
    CHECK_EQ(r.code, 0);
    CHECK_EQ(check_output(r.out, ref, M_AUTO, 128, NULL), 0);
    cmd_free(&r);
    reference_free(ref);
}

int main(void) {
    RUN(state_read_matches_reference);
    RUN(state_read_after_restore_at_other_parallelism);
    RUN(state_read_refusals);
    RUN(state_read_refuses_damaged_native_files);
    free(g_rec);
    free(g_keys);
    TEST_MAIN_END();
}
