/* spilled_blob.c — blobs too large for the metadata, in files (see spilled_blob.h). */
#include "checkpoint/spilled_blob.h"

#include <stdio.h>

#include "checkpoint/state_file.h"
#include "common/common.h"

int sl_ckpt_add_blob_or_spill(sl_ckpt_storage_t *storage, int64_t id, sl_ckpt_subtask_t *st, const char *name,
                              sl_ckpt_distribution_t dist, const void *data, size_t len, const char *file,
                              int64_t *bytes, char *err, size_t errlen) {
    if (!storage || len <= SL_CKPT_INLINE_MAX) {
        sl_ckpt_subtask_add_blob(st, name, dist, data, len);
        return 0;
    }
    uint32_t kind = strcmp(name, "inflight") == 0 ? SL_SF_KIND_CHANNEL : SL_SF_KIND_OPERATOR;
    sl_ckpt_out_t *out = NULL;
    int rc = storage->ops->open_output(storage, id, SL_CKPT_SCOPE_EXCLUSIVE, file, &out, err, errlen);
    if (rc < 0) return rc;
    sl_state_file_writer_t *w = NULL;
    rc = sl_sf_writer_new(out, kind, &w, err, errlen);
    if (rc < 0) return rc;
    uint8_t d = (uint8_t)dist;
    rc = sl_sf_begin_section(w, 0);
    if (rc == 0) rc = sl_sf_put_raw(w, &d, 1);
    if (rc == 0) rc = sl_sf_put_raw(w, name, strlen(name));
    if (rc == 0) rc = sl_sf_end_section(w);
    if (rc == 0) rc = sl_sf_begin_section(w, 1);
    if (rc == 0) rc = sl_sf_put_raw(w, data, len);
    if (rc == 0) rc = sl_sf_end_section(w);
    if (rc < 0) {
        sl_errf(err, errlen, rc, "writing %s: %s", file, sl_sf_writer_message(w));
        sl_sf_writer_abort(w);
        return rc;
    }
    sl_sf_info_t info;
    memset(&info, 0, sizeof info);
    rc = sl_sf_writer_close(w, &info, err, errlen);
    if (rc == 0) {
        sl_ckpt_subtask_add_file(st, SL_CKPT_SCOPE_EXCLUSIVE, file, &info);
        *bytes += (int64_t)info.size;
    }
    sl_sf_info_free(&info);
    return rc;
}

static int load_one(sl_ckpt_subtask_t *st, const sl_ckpt_state_handle_t *h, const char *dir, const char *uid,
                    int64_t ckpt, char *err, size_t errlen) {
    char path[4600];
    snprintf(path, sizeof path, "%s/%s", dir, h->path);
    sl_state_file_reader_t *r = NULL;
    int rc = sl_sf_reader_open(path, h->kind, 0, &r, err, errlen);
    if (rc < 0) return rc;
    if (sl_sf_reader_size(r) != h->size || sl_sf_reader_checksum(r) != h->checksum) {
        sl_sf_reader_close(r);
        return sl_errf(err, errlen, SL_EFORMAT, "checkpoint %lld, operator '%s': %s is not the file its metadata describes",
                       (long long)ckpt, uid, path);
    }
    sl_sf_cursor_t c0, c1;
    rc = sl_sf_reader_section(r, 0, &c0, err, errlen);
    if (rc == 0) rc = sl_sf_reader_section(r, 1, &c1, err, errlen);
    if (rc == 0 && (c0.len < 2 || c0.len > 256 || c0.p[0] > SL_CKPT_DIST_BROADCAST)) {
        rc = sl_errf(err, errlen, SL_EFORMAT, "checkpoint %lld, operator '%s': %s does not hold a state blob",
                     (long long)ckpt, uid, path);
    }
    if (rc == 0) {
        char name[260];
        memcpy(name, c0.p + 1, c0.len - 1);
        name[c0.len - 1] = 0;
        if (sl_ckpt_find_blob(st->blobs, st->nblobs, name))
            rc = sl_errf(err, errlen, SL_EFORMAT, "checkpoint %lld, operator '%s' (%d): blob '%s' is both inline and in %s",
                         (long long)ckpt, uid, st->index + 1, name, path);
        else
            sl_ckpt_subtask_add_blob(st, name, (sl_ckpt_distribution_t)c0.p[0], c1.p, c1.len);
    }
    sl_sf_reader_close(r);
    return rc;
}

int sl_ckpt_load_spilled(sl_ckpt_metadata_t *md, const char *dir, char *err, size_t errlen) {
    for (int i = 0; i < md->noperators; i++) {
        sl_ckpt_operator_t *op = &md->operators[i];
        for (int s = 0; s < op->parallelism; s++) {
            sl_ckpt_subtask_t *st = &op->subtasks[s];
            for (int h = 0; h < st->nhandles; h++) {
                uint32_t k = st->handles[h].kind;
                if (k != SL_SF_KIND_OPERATOR && k != SL_SF_KIND_CHANNEL) continue;
                int rc = load_one(st, &st->handles[h], dir, op->uid, md->checkpoint_id, err, errlen);
                if (rc < 0) return rc;
            }
        }
    }
    return 0;
}
