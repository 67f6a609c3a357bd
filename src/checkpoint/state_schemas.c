/*
 * state_schemas.c — typed keyed state's schemas in snapshots and the
 * migrations of a restore (see state_schemas.h).
 */
#include "checkpoint/state_schemas.h"

#include <stdio.h>

#include "state/state_backend.h"
#include "types/row_migration.h"

struct sl_state_migrations {
    int n;
    char **names;
    sl_row_migration_t **m;
};

static void put32(sl_buf_t *out, uint32_t v) {
    uint8_t b[4];
    sl_st32(b, v);
    sl_buf_append(out, b, 4);
}

void sl_state_schemas_encode(int n, const char *const *names, sl_schema_t *const *schemas, sl_buf_t *out) {
    put32(out, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        char ddl[4096];
        size_t dl = sl_schema_format(schemas[i], ddl, sizeof ddl);
        uint32_t nl = (uint32_t)strlen(names[i]);
        put32(out, nl);
        sl_buf_append(out, names[i], nl);
        put32(out, (uint32_t)dl);
        sl_buf_append(out, ddl, dl);
    }
}

/* The DDL the blob records for `name` (copied into ddl), 1 found, 0 not,
 * SL_EFORMAT damaged. */
static int recorded(const sl_ckpt_blob_t *b, const char *name, char *ddl, size_t cap) {
    if (!b) return 0;
    const uint8_t *p = b->data, *end = b->data + b->len;
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
        if (l[0] == strlen(name) && memcmp(s[0], name, l[0]) == 0) {
            if (l[1] >= cap) return SL_EFORMAT;
            memcpy(ddl, s[1], l[1]);
            ddl[l[1]] = 0;
            return 1;
        }
    }
    return p == end ? 0 : SL_EFORMAT;
}

void sl_state_migrations_free(sl_state_migrations_t *m) {
    if (!m) return;
    for (int i = 0; i < m->n; i++) {
        sl_free(m->names[i]);
        sl_row_migration_free(m->m[i]);
    }
    sl_free(m->names);
    sl_free(m->m);
    sl_free(m);
}

int sl_state_migrations_new(const sl_ckpt_operator_t *mo, const char *uid, int n, const char *const *names,
                            sl_schema_t *const *schemas, sl_state_migrations_t **out, bool *changed, char *err,
                            size_t errlen) {
    *out = NULL;
    *changed = false;
    if (n <= 0) return 0;
    const sl_ckpt_blob_t *b = NULL;
    for (int s = 0; mo && s < mo->parallelism && !b; s++)
        b = sl_ckpt_find_blob(mo->subtasks[s].blobs, mo->subtasks[s].nblobs, SL_STATE_SCHEMAS_BLOB);
    sl_state_migrations_t *m = sl_calloc(1, sizeof *m);
    m->names = sl_calloc((size_t)n, sizeof *m->names);
    m->m = sl_calloc((size_t)n, sizeof *m->m);
    int rc = 0;
    for (int i = 0; i < n && rc == 0; i++) {
        char ddl[4096], why[600];
        int f = recorded(b, names[i], ddl, sizeof ddl);
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
        rc = sl_row_migration_new(old, schemas[i], &m->m[m->n], why, sizeof why);
        if (rc == 0) {
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
    const sl_ckpt_blob_t *b = NULL;
    for (int s = 0; mo && s < mo->parallelism && !b; s++)
        b = sl_ckpt_find_blob(mo->subtasks[s].blobs, mo->subtasks[s].nblobs, SL_STATE_SCHEMAS_BLOB);
    char ddl[4096];
    int f = recorded(b, name, ddl, sizeof ddl);
    if (f <= 0) return f;
    return (*out = sl_schema_parse(ddl, NULL, 0)) ? 1 : SL_EFORMAT;
}

static const struct sl_row_migration *lookup(void *c, const char *name, uint32_t namelen, sl_state_kind_t kind) {
    (void)kind;
    const sl_state_migrations_t *m = c;
    for (int i = 0; i < m->n; i++)
        if (strlen(m->names[i]) == namelen && memcmp(m->names[i], name, namelen) == 0) return m->m[i];
    return NULL;
}

int sl_state_migrations_apply(const sl_state_migrations_t *m, const uint8_t *block, size_t len, int max_parallelism,
                              int kg, sl_buf_t *out, char *err, size_t errlen) {
    return sl_kbf_migrate(block, len, max_parallelism, kg, lookup, (void *)m, out, err, errlen);
}
