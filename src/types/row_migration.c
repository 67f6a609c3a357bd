/*
 * row_migration.c — rows of one schema rewritten as rows of another
 * (see row_migration.h for the rules).
 */
#include "types/row_migration.h"

#include <stdio.h>

#include "common/common.h"

typedef enum { F_NULL, F_COPY, F_I32_TO_I64, F_I32_TO_F64, F_I64_TO_F64, F_STR_BYTES } fmove_t;

struct sl_row_migration {
    sl_schema_t *from, *to; /* refs held */
    int n;                  /* fields of `to` */
    int *src;               /* per field of `to`: field of `from`, or -1 */
    fmove_t *move;
    bool identity;
    uint32_t prefix;        /* bytes in front of every stored row, kept as they are */
};

static bool widens(sl_type_t a, sl_type_t b, fmove_t *mv) {
    if (a == b) return *mv = F_COPY, true;
    if (a == SL_INT && b == SL_BIGINT) return *mv = F_I32_TO_I64, true;
    if (a == SL_INT && b == SL_DOUBLE) return *mv = F_I32_TO_F64, true;
    if (a == SL_BIGINT && b == SL_DOUBLE) return *mv = F_I64_TO_F64, true;
    if ((a == SL_VARCHAR && b == SL_BYTES) || (a == SL_BYTES && b == SL_VARCHAR)) return *mv = F_STR_BYTES, true;
    return false;
}

static const char *nn(bool nullable) { return nullable ? "" : " NOT NULL"; }

int sl_row_migration_new(const sl_schema_t *from, const sl_schema_t *to, sl_row_migration_t **out, char *why,
                         size_t cap) {
    *out = NULL;
    int n = sl_schema_field_count(to);
    sl_row_migration_t *m = sl_calloc(1, sizeof *m);
    m->n = n;
    m->src = sl_calloc((size_t)(n ? n : 1), sizeof *m->src);
    m->move = sl_calloc((size_t)(n ? n : 1), sizeof *m->move);
    m->identity = sl_schema_equal(from, to);
    int rc = 0;
    for (int i = 0; i < n && !rc; i++) {
        const char *name = sl_schema_field_name(to, i);
        sl_type_t tt = sl_schema_field_type(to, i);
        bool tnull = sl_schema_field_nullable(to, i);
        int j = sl_schema_index(from, name);
        m->src[i] = j;
        if (j < 0) {
            m->move[i] = F_NULL;
            if (!tnull)
                rc = sl_errf(why, cap, SL_EINVAL,
                             "field '%s' %s NOT NULL is new: existing state has no value for it (add it nullable)",
                             name, sl_type_name(tt));
            continue;
        }
        sl_type_t ft = sl_schema_field_type(from, j);
        bool fnull = sl_schema_field_nullable(from, j);
        if (!widens(ft, tt, &m->move[i]) || (fnull && !tnull))
            rc = sl_errf(why, cap, SL_EINVAL, "field '%s': %s%s cannot become %s%s", name, sl_type_name(ft), nn(fnull),
                         sl_type_name(tt), nn(tnull));
    }
    if (rc) {
        sl_free(m->src);
        sl_free(m->move);
        sl_free(m);
        return rc;
    }
    m->from = sl_schema_ref((sl_schema_t *)from);
    m->to = sl_schema_ref((sl_schema_t *)to);
    *out = m;
    return 0;
}

void sl_row_migration_free(sl_row_migration_t *m) {
    if (!m) return;
    sl_schema_unref(m->from);
    sl_schema_unref(m->to);
    sl_free(m->src);
    sl_free(m->move);
    sl_free(m);
}

bool sl_row_migration_identity(const sl_row_migration_t *m) { return m->identity; }
const sl_schema_t *sl_row_migration_to(const sl_row_migration_t *m) { return m->to; }
void sl_row_migration_set_prefix(sl_row_migration_t *m, uint32_t bytes) { m->prefix = bytes; }
uint32_t sl_row_migration_prefix(const sl_row_migration_t *m) { return m->prefix; }

int sl_row_migrate(const sl_row_migration_t *m, const uint8_t *p, uint32_t len, sl_row_writer_t *w, char *err,
                   size_t cap) {
    sl_row_t r = {p, len, m->from};
    if (sl_row_validate(&r) != 0) {
        char ddl[512];
        sl_schema_format(m->from, ddl, sizeof ddl);
        return sl_errf(err, cap, SL_EFORMAT, "a value of %u bytes is not a row of (%s)", (unsigned)len, ddl);
    }
    sl_rw_begin(w, m->to);
    for (int i = 0; i < m->n; i++) {
        int j = m->src[i];
        if (j < 0 || sl_row_is_null(&r, j)) {
            sl_rw_set_null(w, i);
            continue;
        }
        uint32_t l;
        switch (m->move[i]) {
        case F_NULL: sl_rw_set_null(w, i); break;
        case F_COPY: sl_rw_copy_field(w, i, &r, j); break;
        case F_I32_TO_I64: sl_rw_set_i64(w, i, sl_row_i32(&r, j)); break;
        case F_I32_TO_F64: sl_rw_set_f64(w, i, sl_row_i32(&r, j)); break;
        case F_I64_TO_F64: sl_rw_set_f64(w, i, (double)sl_row_i64(&r, j)); break;
        case F_STR_BYTES: {
            const uint8_t *b = sl_row_bytes(&r, j, &l);
            if (sl_schema_field_type(m->to, i) == SL_VARCHAR)
                sl_rw_set_str(w, i, (const char *)b, l);
            else
                sl_rw_set_bytes(w, i, b, l);
            break;
        }
        }
    }
    return w->err ? w->err : 0;
}
