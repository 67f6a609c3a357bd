/*
 * state_reader.c — a checkpoint's keyed state read from outside a job: the
 * checkpoint a path names, and one operator's canonical keyed-state blocks
 * key group by key group, from its state files or from a keyed backend.
 * See state_reader.h.
 *
 * The file side follows what a restore does (deployment.c, restore_keyed):
 * key group kg lives in the SL_SF_KIND_KEYED file of the old subtask whose
 * range holds kg, in the section whose id is kg.  Unlike a restore, which
 * opens files lazily to read a few key groups, a reader reads every key
 * group and so verifies each file whole when it opens it.
 */
#include "checkpoint/state_reader.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "checkpoint/state_file.h"
#include "checkpoint/storage.h"
#include "common/common.h"

static bool is_dir(const char *p) {
    struct stat st;
    return stat(p, &st) == 0 && S_ISDIR(st.st_mode);
}

int sl_ckpt_open_path(const char *path, sl_ckpt_metadata_t **md, char *dir, size_t cap, char *err, size_t errlen) {
    *md = NULL;
    if (!path || !*path) return sl_errf(err, errlen, SL_EINVAL, "no checkpoint path given");
    struct stat st;
    if (stat(path, &st) != 0)
        return sl_errf(err, errlen, errno == ENOENT ? SL_ENOTFOUND : SL_EIO, "%s: %s", path, strerror(errno));
    if (!S_ISDIR(st.st_mode))
        return sl_errf(err, errlen, SL_EFORMAT,
                       "%s: not a directory (give a chk-<n> or savepoint directory, or a job's checkpoint directory)",
                       path);
    char mpath[4200], shared[4200], owned[4200];
    snprintf(mpath, sizeof mpath, "%s/%s", path, SL_CKPT_METADATA_NAME);
    snprintf(shared, sizeof shared, "%s/shared", path);
    snprintf(owned, sizeof owned, "%s/taskowned", path);
    if (access(mpath, F_OK) == 0) { /* chk-<n> or a savepoint */
        if ((size_t)snprintf(dir, cap, "%s", path) >= cap)
            return sl_errf(err, errlen, SL_EINVAL, "%s: path too long", path);
        return sl_ckpt_metadata_read_file(mpath, md, err, errlen);
    }
    if (!is_dir(shared) || !is_dir(owned)) {
        const char *name = strrchr(path, '/');
        name = name && name[1] ? name + 1 : path;
        if (!strncmp(name, "chk-", 4))
            return sl_errf(err, errlen, SL_ENOTFOUND, "%s: missing: checkpoint %s is incomplete (never committed)",
                           mpath, name + 4);
        return sl_errf(err, errlen, SL_ENOTFOUND,
                       "%s: no checkpoint here: no %s, and not a job's checkpoint directory (no shared/ and "
                       "taskowned/)",
                       path, mpath);
    }
    /* a job directory: base/job -> open it as storage (nothing is created:
     * its directories exist) */
    char base[4200], job[1024];
    snprintf(base, sizeof base, "%s", path);
    size_t l = strlen(base);
    while (l > 1 && base[l - 1] == '/') base[--l] = 0;
    char *slash = strrchr(base, '/');
    if (slash) {
        snprintf(job, sizeof job, "%s", slash + 1);
        *slash = 0;
        if (!base[0]) snprintf(base, sizeof base, "/");
    } else {
        snprintf(job, sizeof job, "%s", base);
        snprintf(base, sizeof base, ".");
    }
    sl_ckpt_storage_t *s = NULL;
    int rc = sl_ckpt_storage_fs_open(base, job, &s, err, errlen);
    if (rc < 0) return rc;
    int64_t id = 0;
    rc = sl_ckpt_storage_latest_complete_id(s, &id, err, errlen);
    if (rc == SL_ENOTFOUND)
        sl_errf(err, errlen, rc, "%s: no complete checkpoint (no chk-<n>/%s)", path, SL_CKPT_METADATA_NAME);
    /* the latest, with no fallback to an older one when it is damaged (storage.h) */
    if (rc == 0) rc = s->ops->load(s, id, md, err, errlen);
    if (rc == 0) rc = s->ops->location(s, (*md)->checkpoint_id, SL_CKPT_SCOPE_EXCLUSIVE, NULL, dir, cap);
    s->ops->destroy(s);
    if (rc < 0 && *md) {
        sl_ckpt_metadata_free(*md);
        *md = NULL;
    }
    return rc;
}

/* Where a handle's file is: its scope's directory relative to the
 * checkpoint's (chk-<n>/ -> ../shared, ../taskowned). */
static void handle_path(const char *dir, const sl_ckpt_state_handle_t *h, char *out, size_t cap) {
    if (h->scope == SL_CKPT_SCOPE_EXCLUSIVE) {
        snprintf(out, cap, "%s/%s", dir, h->path);
        return;
    }
    const char *slash = strrchr(dir, '/');
    int jl = slash ? (int)(slash - dir) : 0;
    snprintf(out, cap, "%.*s%s%s/%s", jl, dir, slash ? "/" : "", h->scope == SL_CKPT_SCOPE_SHARED ? "shared" : "taskowned",
             h->path);
}

int sl_ckpt_keyed_blocks_from_files(const char *dir, const sl_ckpt_operator_t *mo, sl_ckpt_block_fn fn, void *c,
                                    char *err, size_t errlen) {
    sl_state_file_reader_t *r = NULL;
    const sl_ckpt_state_handle_t *open_h = NULL;
    int rc = 0;
    for (int kg = 0; kg < mo->max_parallelism && rc == 0; kg++) {
        const sl_ckpt_state_handle_t *h = NULL;
        for (int s = 0; s < mo->parallelism && !h; s++) {
            const sl_ckpt_subtask_t *st = &mo->subtasks[s];
            if (kg < st->range.start || kg >= st->range.end) continue;
            for (int i = 0; i < st->nhandles && !h; i++)
                if (st->handles[i].kind == SL_SF_KIND_KEYED) h = &st->handles[i];
        }
        if (!h) continue; /* no keyed state for this key group */
        if (h != open_h) {
            if (r) sl_sf_reader_close(r);
            r = NULL;
            char path[4600];
            handle_path(dir, h, path, sizeof path);
            rc = sl_sf_reader_open(path, SL_SF_KIND_KEYED, 0, &r, err, errlen);
            if (rc == SL_ENOTFOUND)
                rc = sl_errf(err, errlen, SL_ENOTFOUND,
                             "%s: missing: the checkpoint's metadata names it for operator '%s'", path, mo->uid);
            if (rc < 0) break;
            if (sl_sf_reader_size(r) != h->size || sl_sf_reader_checksum(r) != h->checksum) {
                rc = sl_errf(err, errlen, SL_EFORMAT,
                             "%s: not the file the checkpoint's metadata describes (%llu bytes with checksum %016llx, "
                             "the metadata says %llu bytes with %016llx)",
                             path, (unsigned long long)sl_sf_reader_size(r),
                             (unsigned long long)sl_sf_reader_checksum(r), (unsigned long long)h->size,
                             (unsigned long long)h->checksum);
                break;
            }
            open_h = h;
        }
        sl_sf_cursor_t cur;
        rc = sl_sf_reader_section(r, (uint64_t)kg, &cur, err, errlen);
        if (rc == SL_ENOTFOUND) {
            rc = 0;
            continue;
        }
        if (rc == 0 && cur.len) rc = fn(c, kg, cur.p, cur.len, err, errlen);
    }
    if (r) sl_sf_reader_close(r);
    return rc;
}

int sl_ckpt_keyed_blocks_from_backend(sl_keyed_backend_t *kb, sl_ckpt_block_fn fn, void *c, char *err,
                                      size_t errlen) {
    sl_kb_snapshot_t *snap = NULL;
    int rc = kb->ops->snapshot(kb, &snap);
    if (rc < 0) return sl_errf(err, errlen, rc, "snapshot of the %s state backend failed", kb->ops->name);
    sl_buf_t buf = {0};
    for (int kg = kb->range.start; kg < kb->range.end && rc == 0; kg++) {
        buf.len = 0;
        rc = sl_kb_snapshot_write(snap, kg, &buf);
        if (rc < 0) {
            sl_errf(err, errlen, rc, "writing key group %d of the %s state backend failed", kg, kb->ops->name);
            break;
        }
        if (buf.len) rc = fn(c, kg, buf.p, buf.len, err, errlen);
    }
    sl_buf_free(&buf);
    sl_kb_snapshot_release(snap);
    return rc;
}
