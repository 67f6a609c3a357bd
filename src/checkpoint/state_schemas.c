/*
 * state_schemas.c — typed keyed state's schemas in snapshots and the
 * migrations of a restore (see state_schemas.h).
 */
#include "checkpoint/state_schemas.h"

#include <stdio.h>

#include "state/state_backend.h"
#include "types/row_migration.h"

#define MAGIC2 "SLS2"

struct sl_state_migrations {
    int n;
    char **names;
    sl_row_migration_t **m;
    int64_t *ttl; /* recorded, per state (-1: none recorded) */
};

static void put32(sl_buf_t *out, uint32_t v) {
    uint8_t b[4];
    sl_st32(b, v);
    sl_buf_append(out, b, 4);
}

void sl_state_schemas_encode(int n, const char *const *names, sl_schema_t *const *schemas, const int64_t *ttls,
                             sl_buf_t *out) {
    sl_buf_append(out, MAGIC2, 4);
    put32(out, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        char ddl[4096];
        size_t dl = sl_schema_format(schemas[i], ddl, sizeof ddl);
        uint32_t nl = (uint32_t)strlen(names[i]);
        put32(out, nl);
        sl_buf_append(out, names[i], nl);
        put32(out, (uint32_t)dl);
        sl_buf_append(out, ddl, dl);
        uint8_t t[8];
        sl_st64(t, (uint64_t)(ttls ? ttls[i] : -1));
        sl_buf_append(out, t, 8);
    }
}

/* What the blob records for `name`: its DDL (copied into ddl) and TTL
 * (*ttl: ms, 0 none, -1 unknown; the first version's states have none).
 * 1 found, 0 not, SL_EFORMAT damaged. */
static int recorded(const sl_ckpt_blob_t *b, const char *name, char *ddl, size_t cap, int64_t *ttl) {
    *ttl = -1;
    if (!b) return 0;
    const uint8_t *p = b->data, *end = b->data + b->len;
    bool v2 = end - p >= 4 && memcmp(p, MAGIC2, 4) == 0;
    if (v2) p += 4;
    if (end - p < 4) return SL_EFORMAT;
    uint32_t cnt = sl_ld32(p);
    p += 4;
    for (uint32_t i = 0; i < cnt; i++) {
        uint32_t l[2];
        const uint8_t *s[2];
        for (int k = 0; k < 2; k++) {
            if (end - p < 4) return SL_EFORMAT;
            l[k] = sl_ld32(p);
            p += 4;
            if ((size_t)(end - p) < l[k]) return SL_EFORMAT;
            s[k] = p;
            p += l[k];
        }
        int64_t t = 0;
        if (v2) {
            if (end - p < 8) return SL_EFORMAT;
            t = (int64_t)sl_ld64(p);
            p += 8;
            if (t < -1) return SL_EFORMAT;
        }
        if (l[0] == strlen(name) && memcmp(s[0], name, l[0]) == 0) {
            if (l[1] >= cap) return SL_EFORMAT;
            memcpy(ddl, s[1], l[1]);
            ddl[l[1]] = 0;
            *ttl = t;
            return 1;
        }
    }
    return p == end ? 0 : SL_EFORMAT;
}

/* The schema blob of mo's first subtask that has one (all record the same
 * schemas). */
static const sl_ckpt_blob_t *first_blob(const sl_ckpt_operator_t *mo) {
    const sl_ckpt_blob_t *b = NULL;
    for (int s = 0; mo && s < mo->parallelism && !b; s++)
        b = sl_ckpt_find_blob(mo->subtasks[s].blobs, mo->subtasks[s].nblobs, SL_STATE_SCHEMAS_BLOB);
    return b;
}

/* The TTL the subtasks of mo recorded for `name`: the first that knows it
 * (a subtask that neither declared nor restored the state records -1).
 * 1 with *ttl, 0 none recorded, SL_EFORMAT. */
int sl_state_ttl_recorded(const sl_ckpt_operator_t *mo, const char *name, int64_t *ttl) {
    *ttl = -1;
    char ddl[4096];
    for (int s = 0; mo && s < mo->parallelism; s++) {
        const sl_ckpt_blob_t *b =
            sl_ckpt_find_blob(mo->subtasks[s].blobs, mo->subtasks[s].nblobs, SL_STATE_SCHEMAS_BLOB);
        int64_t t;
        int f = b ? recorded(b, name, ddl, sizeof ddl, &t) : 0;
        if (f < 0) return f;
        if (f > 0 && t >= 0) {
            *ttl = t;
            return 1;
        }
    }
    return 0;
}

void sl_state_migrations_free(sl_state_migrations_t *m) {
    if (!m) return;
    for (int i = 0; i < m->n; i++) {
        sl_free(m->names[i]);
        sl_row_migration_free(m->m[i]);
    }
    sl_free(m->names);
    sl_free(m->m);
    sl_free(m->ttl);
    sl_free(m);
}

int64_t sl_state_migrations_ttl(const sl_state_migrations_t *m, int i) {
    return m && i >= 0 && i < m->n ? m->ttl[i] : -1;
}

int sl_state_migrations_new(const sl_ckpt_operator_t *mo, const char *uid, int n, const char *const *names,
                            sl_schema_t *const *schemas, sl_state_migrations_t **out, bool *changed, char *err,
                            size_t errlen) {
    *out = NULL;
    *changed = false;
    if (n <= 0) return 0;
    const sl_ckpt_blob_t *b = first_blob(mo);
    sl_state_migrations_t *m = sl_calloc(1, sizeof *m);
    m->names = sl_calloc((size_t)n, sizeof *m->names);
    m->m = sl_calloc((size_t)n, sizeof *m->m);
    m->ttl = sl_calloc((size_t)n, sizeof *m->ttl);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        char ddl[4096], why[600];
        int64_t ttl = -1;
        int f = recorded(b, names[i], ddl, sizeof ddl, &ttl);
        if (f > 0 && ttl < 0 && sl_state_ttl_recorded(mo, names[i], &ttl) < 0) f = SL_EFORMAT;
        if (f < 0) {
            rc = sl_errf(err, errlen, SL_EFORMAT, "restore: operator '%s': its '%s' blob is damaged", uid,
                         SL_STATE_SCHEMAS_BLOB);
            break;
        }
        sl_schema_t *old = f ? sl_schema_parse(ddl, why, sizeof why) : sl_schema_ref(schemas[i]);
        if (!old) {
            rc = sl_errf(err, errlen, SL_EFORMAT, "restore: operator '%s', state '%s': recorded schema '%s': %s", uid,
                         names[i], ddl, why);
            break;
        }
        m->names[m->n] = sl_strdup(names[i]);
        m->ttl[m->n] = f ? ttl : -1;
        rc = sl_row_migration_new(old, schemas[i], &m->m[m->n], why, sizeof why);
        if (rc == 0) {
            /* a TTL state's items carry their timestamp in front of the row */
            if (ttl > 0) sl_row_migration_set_prefix(m->m[m->n], SL_TTL_TS_BYTES);
            if (!sl_row_migration_identity(m->m[m->n])) *changed = true;
        } else {
            char now[4096];
            sl_schema_format(schemas[i], now, sizeof now);
            rc = sl_errf(err, errlen, SL_EINVAL,
                         "restore: operator '%s', state '%s': the state's schema changed incompatibly: %s (was (%s), "
                         "now (%s))",
                         uid, names[i], why, ddl, now);
        }
        m->n++;
        sl_schema_unref(old);
    }
    if (rc) {
        sl_state_migrations_free(m);
        return rc;
    }
    *out = m;
    return 0;
}

int sl_state_schema_recorded(const sl_ckpt_operator_t *mo, const char *name, sl_schema_t **out) {
    *out = NULL;
    const sl_ckpt_blob_t *b = first_blob(mo);
    char ddl[4096];
    int64_t ttl;
    int f = recorded(b, name, ddl, sizeof ddl, &ttl);
    if (f <= 0) return f;
    return (*out = sl_schema_parse(ddl, NULL, 0)) ? 1 : SL_EFORMAT;
}

/* A typed state's migration; a version-1 block does not say whether its
 * items carry timestamps: the TTL the typed states' record holds does. */
static const struct sl_row_migration *lookup(void *c, const char *name, uint32_t namelen, sl_state_kind_t kind,
                                             int *ttl) {
    (void)kind;
    const sl_state_migrations_t *m = c;
    for (int i = 0; i < m->n; i++)
        if (strlen(m->names[i]) == namelen && memcmp(m->names[i], name, namelen) == 0) {
            if (*ttl == SL_KBF_TTL_IS_UNKNOWN && m->ttl[i] >= 0)
                *ttl = m->ttl[i] > 0 ? SL_KBF_TTL_IS_YES : SL_KBF_TTL_IS_NO;
            return m->m[i];
        }
    return NULL;
}

int sl_state_migrations_apply(const sl_state_migrations_t *m, const uint8_t *block, size_t len, int max_parallelism,
                              int kg, sl_buf_t *out, char *err, size_t errlen) {
    return sl_kbf_migrate(block, len, max_parallelism, kg, lookup, (void *)m, out, err, errlen);
}
