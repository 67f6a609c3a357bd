/*
 * test_s3_storage.c — checkpoint storage in S3 (src/checkpoint/s3_storage.c,
 * s3_client.c) against a real S3 server: S3Proxy with signature checking
 * on, started by scripts/s3proxy.sh (the ctest fixture "s3").  A test that
 * cannot reach it fails and says why.
 *
 * - random sequences of storage operations checked against a model kept
 *   in the test (which checkpoints exist, which are complete, every file's
 *   bytes), reading back through random ranged reads;
 * - _metadata last: a checkpoint without it is never listed complete, and
 *   commit refuses when a state file it names is missing;
 * - a 20 MB file with 5 MB parts goes up as a parallel multipart upload and
 *   round-trips byte-exact;
 * - retention and GC of shared/ against a reference computed from which
 *   checkpoints refer to which files;
 * - savepoints (moved, read back, disposed) and the state reader on s3://;
 * - errors: a wrong secret key, a missing credential, a bad URI;
 * - a fault-injecting HTTP proxy (a thread on loopback between the client
 *   and S3Proxy) that answers 503 SlowDown, resets the connection or
 *   stalls: retries with backoff succeed; a persistent failure fails the
 *   upload with a message and leaves no complete checkpoint.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <strings.h>
#include <sys/socket.h>

#include "checkpoint/s3_client.h"
#include "checkpoint/state_reader.h"
#include "checkpoint/storage.h"
#include "common/common.h"
#include "test.h"
#include "test_s3_util.h"

static char err[2048];
static bool server_ok;

static uint64_t rng_state = 0x1234567887654321ULL;
static uint64_t rnd(void) { return rng_state = sl_mix64(rng_state + 0x9e3779b97f4a7c15ULL); }

static void uri_of(char *buf, size_t cap, const char *sub) {
    snprintf(buf, cap, "s3://%s/%s/%s", bucket, run_prefix, sub);
}

static sl_s3_config_t base_cfg(void) {
    sl_s3_config_t c;
    memset(&c, 0, sizeof c);
    c.path_style = -1;
    char e[300];
    if (sl_s3_config_resolve(&c, e, sizeof e)) fprintf(stderr, "  config: %s\n", e);
    return c;
}

/* ------------------------------------------------------------------ */
/* Writing and reading files through the storage. */

static int put_file(sl_ckpt_storage_t *s, int64_t id, sl_ckpt_scope_t scope, const char *name, const uint8_t *p,
                    size_t n) {
    sl_ckpt_out_t *out;
    int rc = s->ops->open_output(s, id, scope, name, &out, err, sizeof err);
    if (rc) return rc;
    for (size_t at = 0; at < n;) { /* random write sizes */
        size_t want = (size_t)(rnd() % 300000) + 1, k = SL_MIN(n - at, want);
        if ((rc = out->ops->write(out, p + at, k, err, sizeof err))) {
            out->ops->abort(out);
            return rc;
        }
        at += k;
    }
    return out->ops->finish(out, err, sizeof err);
}

/* Reads the file back whole and in random ranges; 0 when every byte equals p. */
static int check_file(sl_ckpt_storage_t *s, int64_t id, sl_ckpt_scope_t scope, const char *name, const uint8_t *p,
                      size_t n) {
    sl_ckpt_in_t *in;
    int rc = s->ops->open_input(s, id, scope, name, &in, err, sizeof err);
    if (rc) return rc;
    if (in->size != n) {
        fprintf(stderr, "  %s: size %llu, wrote %zu\n", in->name, (unsigned long long)in->size, n);
        in->ops->close(in);
        return -100;
    }
    uint8_t *buf = sl_malloc(n + 1);
    for (int i = 0; i < 8 && rc == 0 && n > 0; i++) { /* small reads first (no cache yet), some at the very end */
        size_t want = (size_t)(rnd() % 4096) + 1, len = SL_MIN(n, want);
        uint64_t off = i % 2 ? n - len : rnd() % (n - len + 1);
        rc = in->ops->read_at(in, off, buf, len, err, sizeof err);
        if (rc == 0 && memcmp(buf, p + off, len) != 0) rc = -104;
    }
    if (rc == 0) rc = in->ops->read_at(in, 0, buf, n, err, sizeof err);
    if (rc == 0 && memcmp(buf, p, n) != 0) rc = -101;
    for (int i = 0; i < 8 && rc == 0 && n > 0; i++) {
        uint64_t off = rnd() % n;
        size_t len = (size_t)(rnd() % (n - off)) + 1;
        rc = in->ops->read_at(in, off, buf, len, err, sizeof err);
        if (rc == 0 && memcmp(buf, p + off, len) != 0) rc = -102;
    }
    if (rc == 0 && in->ops->read_at(in, n, buf, 1, err, sizeof err) != SL_EFORMAT) rc = -103; /* past the end */
    sl_free(buf);
    in->ops->close(in);
    return rc;
}

static uint8_t *random_bytes(size_t n) {
    uint8_t *p = sl_malloc(n + 1);
    for (size_t i = 0; i < n; i++) p[i] = (uint8_t)rnd();
    return p;
}

/* ------------------------------------------------------------------ */
/* The model: checkpoints and their files. */

#define MAXCK 12
#define MAXF 4
typedef struct mfile {
    char name[32];
    uint8_t *p;
    size_t n;
} mfile_t;
typedef struct mck {
    bool exists, complete;
    int nf;
    mfile_t f[MAXF];
} mck_t;

static void mck_clear(mck_t *c) {
    for (int i = 0; i < c->nf; i++) sl_free(c->f[i].p);
    memset(c, 0, sizeof *c);
}

static sl_ckpt_metadata_t *metadata_of(sl_ckpt_storage_t *s, int64_t id, const mck_t *c) {
    sl_ckpt_metadata_t *md = sl_ckpt_metadata_new(id, s->job_id, "s3 test", 16);
    md->trigger_ts = id * 1000;
    md->completion_ts = id * 1000 + 7;
    sl_ckpt_metadata_set_str(&md->backend, "heap");
    sl_ckpt_operator_t *op = sl_ckpt_metadata_add_operator(md, "op", 1, 1, 16);
    for (int i = 0; i < c->nf; i++) {
        sl_sf_info_t info;
        memset(&info, 0, sizeof info);
        info.kind = SL_SF_KIND_FOREIGN;
        info.size = c->f[i].n;
        info.checksum = c->f[i].p ? sl_hash_bytes(c->f[i].p, c->f[i].n) : 0;
        sl_ckpt_subtask_add_file(&op->subtasks[0], SL_CKPT_SCOPE_EXCLUSIVE, c->f[i].name, &info);
    }
    return md;
}

/* Compares the storage's listing with the model. */
static int check_listing(sl_ckpt_storage_t *s, const mck_t *m) {
    sl_ckpt_entry_t *v;
    int n;
    int rc = s->ops->list(s, &v, &n, err, sizeof err);
    if (rc) return rc;
    int k = 0;
    for (int id = 1; id < MAXCK; id++) {
        /* a created checkpoint with no file yet has no object: S3 cannot list it */
        bool listed = m[id].exists && (m[id].nf > 0 || m[id].complete);
        if (!listed) continue;
        if (k >= n || v[k].id != id || v[k].complete != m[id].complete) {
            fprintf(stderr, "  listing differs at checkpoint %d (listed %d entries)\n", id, n);
            rc = -200;
            break;
        }
        k++;
    }
    if (rc == 0 && k != n) {
        fprintf(stderr, "  listing has %d entries, the model %d\n", n, k);
        rc = -201;
    }
    sl_free(v);
    return rc;
}

/* Random create / write / commit / load / discard / abort against the model. */
TEST(s3_random_operations_against_model) {
    CHECK(server_ok);
    char uri[512];
    uri_of(uri, sizeof uri, "random");
    sl_ckpt_storage_t *s;
    sl_s3_config_t cfg = base_cfg();
    cfg.list_page_size = 2; /* every listing takes several pages (continuation tokens) */
    int orc = sl_ckpt_storage_s3_open(uri, "job-r", &cfg, &s, err, sizeof err);
    if (orc) fprintf(stderr, "  %s\n", err);
    CHECK_EQ(orc, 0);
    CHECK_STR(s->ops->name, "s3");
    mck_t m[MAXCK];
    memset(m, 0, sizeof m);
    int done[6] = {0}; /* operations that changed or read something, by kind */
    for (int step = 0; step < 250; step++) {
        int id = 1 + (int)(rnd() % (rnd() % 4 ? 4 : MAXCK - 1));
        int r = (int)(rnd() % 100); /* create 12%, write 38%, commit 15%, load 15%, discard 10%, abort 10% */
        int op = r < 12 ? 0 : r < 50 ? 1 : r < 65 ? 2 : r < 80 ? 3 : r < 90 ? 4 : 5;
        if (op == 3 && rnd() % 4) /* mostly load a complete one, when there is one */
            for (int k = 0, at = (int)(rnd() % (MAXCK - 1)); k < MAXCK - 1; k++)
                if (m[1 + (at + k) % (MAXCK - 1)].complete) {
                    id = 1 + (at + k) % (MAXCK - 1);
                    break;
                }
        mck_t *c = &m[id];
        int rc;
        if (op == 0) { /* create */
            rc = s->ops->create_checkpoint(s, id, err, sizeof err);
            if (c->complete) {
                CHECK_EQ(rc, SL_EINVAL);
            } else {
                if (rc) fprintf(stderr, "  create %d: %s\n", id, err);
                CHECK_EQ(rc, 0);
                mck_clear(c);
                c->exists = true;
                done[0]++;
            }
        } else if (op == 1 && c->exists && !c->complete && c->nf < MAXF) { /* write a file */
            mfile_t *f = &c->f[c->nf];
            snprintf(f->name, sizeof f->name, "state-%d.bin", c->nf);
            f->n = (size_t)(rnd() % 3 == 0 ? rnd() % 64 : rnd() % 200000);
            f->p = random_bytes(f->n);
            rc = put_file(s, id, SL_CKPT_SCOPE_EXCLUSIVE, f->name, f->p, f->n);
            if (rc) fprintf(stderr, "  write: %s\n", err);
            CHECK_EQ(rc, 0);
            c->nf++;
            done[1]++;
        } else if (op == 2 && c->exists && c->nf > 0) { /* commit */
            sl_ckpt_metadata_t *md = metadata_of(s, id, c);
            rc = s->ops->commit(s, md, err, sizeof err);
            sl_ckpt_metadata_free(md);
            if (c->complete) {
                CHECK_EQ(rc, SL_EINVAL);
            } else {
                if (rc) fprintf(stderr, "  commit %d: %s\n", id, err);
                CHECK_EQ(rc, 0);
                c->complete = true;
                done[2]++;
            }
        } else if (op == 3) { /* load + read every file */
            sl_ckpt_metadata_t *md = NULL;
            rc = s->ops->load(s, id, &md, err, sizeof err);
            if (!c->complete) {
                CHECK_EQ(rc, SL_ENOTFOUND);
            } else {
                CHECK_EQ(rc, 0);
                CHECK_EQ(md->operators[0].subtasks[0].nhandles, c->nf);
                for (int i = 0; i < c->nf; i++) {
                    CHECK_STR(md->operators[0].subtasks[0].handles[i].path, c->f[i].name);
                    int fr = check_file(s, id, SL_CKPT_SCOPE_EXCLUSIVE, c->f[i].name, c->f[i].p, c->f[i].n);
                    if (fr) fprintf(stderr, "  read %d/%s: %d %s\n", id, c->f[i].name, fr, err);
                    CHECK_EQ(fr, 0);
                }
                done[3]++;
            }
            sl_ckpt_metadata_free(md);
        } else if (op == 4) { /* discard */
            rc = s->ops->discard(s, id, err, sizeof err);
            bool has_objects = c->exists && (c->nf > 0 || c->complete);
            CHECK_EQ(rc, has_objects ? 0 : SL_ENOTFOUND);
            done[4] += has_objects;
            mck_clear(c);
        } else if (op == 5) { /* abort pending */
            rc = s->ops->abort_pending(s, id, err, sizeof err);
            if (c->complete) {
                CHECK_EQ(rc, SL_EINVAL);
            } else {
                CHECK_EQ(rc, c->exists && c->nf > 0 ? 0 : SL_ENOTFOUND);
                done[5] += c->exists && c->nf > 0;
                mck_clear(c);
            }
        }
        int lr = check_listing(s, m);
        if (lr) fprintf(stderr, "  after step %d (op %d on %d): %d %s\n", step, op, id, lr, err);
        CHECK_EQ(lr, 0);
    }
    fprintf(stderr, "  created %d, wrote %d, committed %d, loaded %d, discarded %d, aborted %d\n", done[0], done[1],
            done[2], done[3], done[4], done[5]);
    for (int i = 0; i < 6; i++) CHECK(done[i] > 0); /* every kind of operation was exercised */
    /* the latest complete one, by the model */
    int64_t want = 0, got = 0;
    for (int id = 1; id < MAXCK; id++)
        if (m[id].complete) want = id;
    int lrc = sl_ckpt_storage_latest_complete_id(s, &got, err, sizeof err);
    CHECK_EQ(lrc, want ? 0 : SL_ENOTFOUND);
    CHECK_EQ(got, want);
    /* discard_all leaves nothing of the job */
    CHECK_EQ(s->ops->discard_all(s, err, sizeof err), 0);
    sl_ckpt_entry_t *v;
    int n;
    CHECK_EQ(s->ops->list(s, &v, &n, err, sizeof err), 0);
    CHECK_EQ(n, 0);
    sl_free(v);
    for (int i = 0; i < MAXCK; i++) mck_clear(&m[i]);
    s->ops->destroy(s);
}

/* _metadata last: state files alone never make a checkpoint complete, and
 * commit refuses when a named file is missing or of another size. */
TEST(s3_metadata_last) {
    CHECK(server_ok);
    char uri[512];
    uri_of(uri, sizeof uri, "meta");
    sl_ckpt_storage_t *s;
    CHECK_EQ(sl_ckpt_storage_open(uri, "job-m", &s, err, sizeof err), 0);
    mck_t c;
    memset(&c, 0, sizeof c);
    c.exists = true;
    CHECK_EQ(s->ops->create_checkpoint(s, 3, err, sizeof err), 0);
    for (int i = 0; i < 3; i++) {
        snprintf(c.f[i].name, sizeof c.f[i].name, "f-%d", i);
        c.f[i].n = 1000 + (size_t)(rnd() % 5000);
        c.f[i].p = random_bytes(c.f[i].n);
        CHECK_EQ(put_file(s, 3, SL_CKPT_SCOPE_EXCLUSIVE, c.f[i].name, c.f[i].p, c.f[i].n), 0);
    }
    c.nf = 3;
    sl_ckpt_entry_t *v;
    int n;
    CHECK_EQ(s->ops->list(s, &v, &n, err, sizeof err), 0);
    CHECK_EQ(n, 1);
    CHECK_EQ(v[0].id, 3);
    CHECK_EQ(v[0].complete, 0);
    sl_free(v);
    int64_t id;
    CHECK_EQ(sl_ckpt_storage_latest_complete_id(s, &id, err, sizeof err), SL_ENOTFOUND);
    sl_ckpt_metadata_t *md = NULL;
    CHECK_EQ(s->ops->load(s, 3, &md, err, sizeof err), SL_ENOTFOUND);
    CHECK_CONTAINS(err, "_metadata");
    /* the metadata names a 4th file that was never uploaded: refused, still incomplete */
    c.f[3] = (mfile_t){"never-uploaded", NULL, 10};
    c.nf = 4;
    md = metadata_of(s, 3, &c);
    c.nf = 3;
    c.f[3].n = 0;
    CHECK_EQ(s->ops->commit(s, md, err, sizeof err), SL_ENOTFOUND);
    CHECK_CONTAINS(err, "never-uploaded");
    sl_ckpt_metadata_free(md);
    CHECK_EQ(sl_ckpt_storage_latest_complete_id(s, &id, err, sizeof err), SL_ENOTFOUND);
    /* a file of the wrong size: refused too */
    c.f[1].n--;
    md = metadata_of(s, 3, &c);
    c.f[1].n++;
    CHECK_EQ(s->ops->commit(s, md, err, sizeof err), SL_ENOTFOUND);
    sl_ckpt_metadata_free(md);
    /* all there: complete */
    md = metadata_of(s, 3, &c);
    CHECK_EQ(s->ops->commit(s, md, err, sizeof err), 0);
    sl_ckpt_metadata_free(md);
    CHECK_EQ(sl_ckpt_storage_latest_complete_id(s, &id, err, sizeof err), 0);
    CHECK_EQ(id, 3);
    /* the state reader finds it from the job's "directory" and from chk-3 */
    char jd[600], dir[1200];
    snprintf(jd, sizeof jd, "%s/job-m", uri);
    CHECK_EQ(sl_ckpt_open_path(jd, &md, dir, sizeof dir, err, sizeof err), 0);
    CHECK_EQ(md->checkpoint_id, 3);
    sl_ckpt_metadata_free(md);
    char want[700];
    snprintf(want, sizeof want, "%s/chk-3", jd);
    CHECK_STR(dir, want);
    CHECK_EQ(sl_ckpt_open_path(want, &md, dir, sizeof dir, err, sizeof err), 0);
    sl_ckpt_metadata_free(md);
    /* a file of it through the generic path reader (restore uses it) */
    char fp[800];
    snprintf(fp, sizeof fp, "%s/f-2", want);
    sl_ckpt_in_t *in;
    CHECK_EQ(sl_ckpt_in_open_file(fp, &in, err, sizeof err), 0);
    CHECK_EQ(in->size, c.f[2].n);
    uint8_t *b = sl_malloc(c.f[2].n);
    CHECK_EQ(in->ops->read_at(in, 0, b, c.f[2].n, err, sizeof err), 0);
    CHECK(memcmp(b, c.f[2].p, c.f[2].n) == 0);
    sl_free(b);
    in->ops->close(in);
    /* discard removes _metadata first, then the rest */
    CHECK_EQ(s->ops->discard(s, 3, err, sizeof err), 0);
    CHECK_EQ(s->ops->list(s, &v, &n, err, sizeof err), 0);
    CHECK_EQ(n, 0);
    sl_free(v);
    mck_clear(&c);
    s->ops->destroy(s);
}

/* 20 MB with 5 MB parts: a parallel multipart upload, byte-exact. */
TEST(s3_multipart_large_file) {
    CHECK(server_ok);
    char uri[512];
    uri_of(uri, sizeof uri, "multipart");
    sl_s3_config_t cfg = base_cfg();
    cfg.part_size = (int64_t)5 << 20;
    cfg.multipart_threshold = (int64_t)5 << 20;
    cfg.upload_threads = 3;
    sl_ckpt_storage_t *s;
    CHECK_EQ(sl_ckpt_storage_s3_open(uri, "job-mp", &cfg, &s, err, sizeof err), 0);
    size_t n = ((size_t)20 << 20) + (size_t)(rnd() % 100000);
    uint8_t *p = random_bytes(n);
    CHECK_EQ(s->ops->create_checkpoint(s, 1, err, sizeof err), 0);
    int rc = put_file(s, 1, SL_CKPT_SCOPE_SHARED, "big.sst", p, n);
    if (rc) fprintf(stderr, "  %s\n", err);
    CHECK_EQ(rc, 0);
    CHECK_EQ(check_file(s, 1, SL_CKPT_SCOPE_SHARED, "big.sst", p, n), 0);
    /* the object is there whole (HEAD) */
    sl_s3_client_t *c;
    CHECK_EQ(sl_s3_client_new(&cfg, bucket, &c, err, sizeof err), 0);
    char key[600];
    snprintf(key, sizeof key, "%s/multipart/job-mp/shared/big.sst", run_prefix);
    uint64_t size = 0;
    CHECK_EQ(sl_s3_head(c, key, &size, err, sizeof err), 0);
    CHECK_EQ(size, n);
    /* step by step: create, 2 parts, abort: the object never appears */
    char *uid = NULL, *etag = NULL;
    char key2[600];
    snprintf(key2, sizeof key2, "%s/multipart/aborted", run_prefix);
    CHECK_EQ(sl_s3_mpu_create(c, key2, &uid, err, sizeof err), 0);
    CHECK_EQ(sl_s3_mpu_part(c, key2, uid, 1, p, (size_t)5 << 20, &etag, err, sizeof err), 0);
    sl_free(etag);
    CHECK_EQ(sl_s3_mpu_abort(c, key2, uid, err, sizeof err), 0);
    sl_free(uid);
    CHECK_EQ(sl_s3_head(c, key2, &size, err, sizeof err), SL_ENOTFOUND);
    sl_s3_client_free(c);
    sl_free(p);
    CHECK_EQ(s->ops->discard_all(s, err, sizeof err), 0);
    s->ops->destroy(s);
}

/* Retention and GC of shared/: a shared file goes when every checkpoint
 * that refers to it is discarded and no retained one does; GC deletes what
 * no complete checkpoint refers to.  The reference is computed from the
 * random reference sets. */
TEST(s3_retention_and_gc_of_shared) {
    CHECK(server_ok);
    for (int round = 0; round < 3; round++) {
        char uri[512], sub[64];
        snprintf(sub, sizeof sub, "retain-%d", round);
        uri_of(uri, sizeof uri, sub);
        sl_ckpt_storage_t *s;
        CHECK_EQ(sl_ckpt_storage_open(uri, "job", &s, err, sizeof err), 0);
        enum { NF = 8, NC = 6 };
        bool refs[NC + 1][NF], complete[NC + 1], uploaded[NF] = {0};
        int retained = 1 + (int)(rnd() % 3);
        for (int id = 1; id <= NC; id++) {
            complete[id] = id < NC ? rnd() % 4 != 0 : false; /* the last one stays pending */
            sl_ckpt_metadata_t *md = sl_ckpt_metadata_new(id, s->job_id, "t", 16);
            sl_ckpt_operator_t *op = sl_ckpt_metadata_add_operator(md, "rocks", 1, 1, 16);
            CHECK_EQ(s->ops->create_checkpoint(s, id, err, sizeof err), 0);
            for (int f = 0; f < NF; f++) {
                refs[id][f] = rnd() % 3 == 0;
                if (!refs[id][f]) continue;
                char nm[32];
                snprintf(nm, sizeof nm, "%d.sst", f);
                if (!uploaded[f]) {
                    CHECK_EQ(put_file(s, id, SL_CKPT_SCOPE_SHARED, nm, (const uint8_t *)"sst", 3), 0);
                    uploaded[f] = true;
                }
                sl_sf_info_t info;
                memset(&info, 0, sizeof info);
                info.kind = SL_SF_KIND_FOREIGN;
                info.size = 3;
                sl_ckpt_subtask_add_file(&op->subtasks[0], SL_CKPT_SCOPE_SHARED, nm, &info);
            }
            if (complete[id]) CHECK_EQ(s->ops->commit(s, md, err, sizeof err), 0);
            sl_ckpt_metadata_free(md);

        }
        CHECK_EQ(sl_ckpt_storage_retain(s, retained, err, sizeof err), 0);
        /* reference: the complete ones, newest `retained` kept */
        int ncomplete = 0;
        for (int id = 1; id <= NC; id++) ncomplete += complete[id];
        bool kept[NC + 1] = {0}, discarded[NC + 1] = {0};
        for (int id = 1, seen = 0; id <= NC; id++)
            if (complete[id]) {
                seen++;
                if (seen > ncomplete - retained) kept[id] = true;
                else discarded[id] = true;
            }
        bool want[NF];
        for (int f = 0; f < NF; f++) {
            bool by_discarded = false, by_kept = false;
            for (int id = 1; id <= NC; id++) {
                by_discarded |= discarded[id] && refs[id][f];
                by_kept |= kept[id] && refs[id][f];
            }
            want[f] = uploaded[f] && !(by_discarded && !by_kept);
        }
        char **names;
        int nn;
        CHECK_EQ(s->ops->list_files(s, SL_CKPT_SCOPE_SHARED, &names, &nn, err, sizeof err), 0);
        for (int f = 0; f < NF; f++) {
            char nm[32];
            snprintf(nm, sizeof nm, "%d.sst", f);
            bool have = false;
            for (int i = 0; i < nn; i++) have |= !strcmp(names[i], nm);
            if (have != want[f]) fprintf(stderr, "  round %d: shared %s: have %d want %d\n", round, nm, have, want[f]);
            CHECK_EQ(have, want[f]);
        }
        for (int i = 0; i < nn; i++) sl_free(names[i]);
        sl_free(names);
        /* GC once nothing is pending: what no complete (kept) checkpoint refers to goes */
        CHECK_EQ(sl_ckpt_storage_abort_all_pending(s, err, sizeof err), 0);
        CHECK_EQ(sl_ckpt_storage_gc_shared(s, err, sizeof err), 0);
        CHECK_EQ(s->ops->list_files(s, SL_CKPT_SCOPE_SHARED, &names, &nn, err, sizeof err), 0);
        for (int f = 0; f < NF; f++) {
            char nm[32];
            snprintf(nm, sizeof nm, "%d.sst", f);
            bool have = false, by_kept = false;
            for (int i = 0; i < nn; i++) have |= !strcmp(names[i], nm);
            for (int id = 1; id <= NC; id++) by_kept |= kept[id] && refs[id][f];
            CHECK_EQ(have, uploaded[f] && by_kept);
        }
        for (int i = 0; i < nn; i++) sl_free(names[i]);
        sl_free(names);
        /* retained complete ones still load */
        for (int id = 1; id <= NC; id++) {
            sl_ckpt_metadata_t *md = NULL;
            CHECK_EQ(s->ops->load(s, id, &md, err, sizeof err), kept[id] ? 0 : SL_ENOTFOUND);
            sl_ckpt_metadata_free(md);
        }
        CHECK_EQ(s->ops->discard_all(s, err, sizeof err), 0);
        s->ops->destroy(s);
    }
}

/* A savepoint moves out of the job's checkpoints into a directory of its
 * own, _metadata last; it is read back by path and disposed. */
TEST(s3_savepoint_commit_read_dispose) {
    CHECK(server_ok);
    char uri[512], parent[512];
    uri_of(uri, sizeof uri, "sp-ckpts");
    uri_of(parent, sizeof parent, "savepoints");
    sl_ckpt_storage_t *s;
    CHECK_EQ(sl_ckpt_storage_open(uri, "abcdef0123", &s, err, sizeof err), 0);
    mck_t c;
    memset(&c, 0, sizeof c);
    CHECK_EQ(s->ops->create_checkpoint(s, 5, err, sizeof err), 0);
    for (int i = 0; i < 2; i++) {
        snprintf(c.f[i].name, sizeof c.f[i].name, "sp-%d", i);
        c.f[i].n = (size_t)(rnd() % 100000) + 1;
        c.f[i].p = random_bytes(c.f[i].n);
        CHECK_EQ(put_file(s, 5, SL_CKPT_SCOPE_EXCLUSIVE, c.f[i].name, c.f[i].p, c.f[i].n), 0);
    }
    c.nf = 2;
    sl_ckpt_metadata_t *md = metadata_of(s, 5, &c);
    md->type = SL_CKPT_SAVEPOINT;
    char loc[1024];
    CHECK_EQ(s->ops->commit_savepoint(s, md, "/local/path", loc, sizeof loc, err, sizeof err), SL_EINVAL);
    int rc = s->ops->commit_savepoint(s, md, parent, loc, sizeof loc, err, sizeof err);
    if (rc) fprintf(stderr, "  %s\n", err);
    CHECK_EQ(rc, 0);
    sl_ckpt_metadata_free(md);
    char want[600];
    snprintf(want, sizeof want, "%s/savepoint-abcdef-", parent);
    CHECK(strncmp(loc, want, strlen(want)) == 0);
    sl_ckpt_entry_t *v;
    int n;
    CHECK_EQ(s->ops->list(s, &v, &n, err, sizeof err), 0);
    CHECK_EQ(n, 0); /* moved away: not a checkpoint of the job */
    sl_free(v);
    char dir[1200];
    CHECK_EQ(sl_ckpt_open_path(loc, &md, dir, sizeof dir, err, sizeof err), 0);
    CHECK_EQ(md->type, SL_CKPT_SAVEPOINT);
    sl_ckpt_metadata_free(md);
    for (int i = 0; i < 2; i++) {
        char fp[1400];
        snprintf(fp, sizeof fp, "%s/%s", loc, c.f[i].name);
        sl_ckpt_in_t *in;
        CHECK_EQ(sl_ckpt_in_open_file(fp, &in, err, sizeof err), 0);
        uint8_t *b = sl_malloc(c.f[i].n);
        CHECK_EQ(in->ops->read_at(in, 0, b, c.f[i].n, err, sizeof err), 0);
        CHECK(memcmp(b, c.f[i].p, c.f[i].n) == 0);
        sl_free(b);
        in->ops->close(in);
    }
    /* a checkpoint is not disposed as a savepoint */
    CHECK_EQ(s->ops->create_checkpoint(s, 6, err, sizeof err), 0);
    CHECK_EQ(put_file(s, 6, SL_CKPT_SCOPE_EXCLUSIVE, c.f[0].name, c.f[0].p, c.f[0].n), 0);
    c.nf = 1;
    md = metadata_of(s, 6, &c);
    CHECK_EQ(s->ops->commit(s, md, err, sizeof err), 0);
    sl_ckpt_metadata_free(md);
    char chk6[700];
    snprintf(chk6, sizeof chk6, "%s/abcdef0123/chk-6", uri);
    CHECK_EQ(sl_ckpt_savepoint_dispose(chk6, err, sizeof err), SL_EINVAL);
    /* `sluice savepoint --dispose s3://...` (credentials from the environment) */
    char cmd[2400];
    snprintf(cmd, sizeof cmd, "%s savepoint --dispose '%s' >/dev/null", SLUICE_BIN, loc);
    CHECK_EQ(system(cmd), 0);
    CHECK_EQ(sl_ckpt_open_path(loc, &md, dir, sizeof dir, err, sizeof err), SL_ENOTFOUND);
    CHECK_EQ(sl_ckpt_savepoint_dispose(loc, err, sizeof err), SL_ENOTFOUND);
    c.nf = 2;
    mck_clear(&c);
    CHECK_EQ(s->ops->discard_all(s, err, sizeof err), 0);
    s->ops->destroy(s);
}

/* Configuration mistakes are reported by name. */
TEST(s3_configuration_errors) {
    CHECK(server_ok);
    char uri[512];
    uri_of(uri, sizeof uri, "errors");
    sl_s3_config_t cfg = base_cfg();
    snprintf(cfg.secret_key, sizeof cfg.secret_key, "not-the-secret");
    sl_ckpt_storage_t *s = NULL;
    CHECK_EQ(sl_ckpt_storage_s3_open(uri, "job", &cfg, &s, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, bucket);
    CHECK_CONTAINS(err, "SignatureDoesNotMatch");
    CHECK_CONTAINS(err, "403");
    /* a bucket that does not exist */
    cfg = base_cfg();
    CHECK(sl_ckpt_storage_s3_open("s3://no-such-bucket-here/x", "job", &cfg, &s, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "no-such-bucket-here");
    /* bad URIs */
    CHECK_EQ(sl_ckpt_storage_open("s3://Bad_Bucket/x", "job", &s, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "s3://Bad_Bucket/x");
    CHECK_EQ(sl_ckpt_storage_open("s3://", "job", &s, err, sizeof err), SL_EINVAL);
    char bk[64], pf[256];
    CHECK_EQ(sl_s3_parse_uri("s3://my.bucket-1//a///b/", bk, sizeof bk, pf, sizeof pf, err, sizeof err), 0);
    CHECK_STR(bk, "my.bucket-1");
    CHECK_STR(pf, "a/b");
    CHECK_EQ(sl_s3_parse_uri("s3://bucket", bk, sizeof bk, pf, sizeof pf, err, sizeof err), 0);
    CHECK_STR(pf, "");
    CHECK_EQ(sl_s3_parse_uri("s3://ab/x", bk, sizeof bk, pf, sizeof pf, err, sizeof err), SL_EINVAL);
    CHECK_EQ(sl_ckpt_storage_open("gs://b/x", "job", &s, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "unknown scheme");
    /* no credentials at all */
    char *ak = sl_strdup(getenv("AWS_ACCESS_KEY_ID"));
    unsetenv("AWS_ACCESS_KEY_ID");
    int rc = sl_ckpt_storage_open(uri, "job", &s, err, sizeof err);
    setenv("AWS_ACCESS_KEY_ID", ak, 1);
    sl_free(ak);
    CHECK_EQ(rc, SL_EINVAL);
    CHECK_CONTAINS(err, "AWS_ACCESS_KEY_ID");
    CHECK_CONTAINS(err, "s3.access-key");
    char *sk = sl_strdup(getenv("AWS_SECRET_ACCESS_KEY"));
    unsetenv("AWS_SECRET_ACCESS_KEY");
    rc = sl_ckpt_storage_open(uri, "job", &s, err, sizeof err);
    setenv("AWS_SECRET_ACCESS_KEY", sk, 1);
    sl_free(sk);
    CHECK_EQ(rc, SL_EINVAL);
    CHECK_CONTAINS(err, "AWS_SECRET_ACCESS_KEY");
    /* the process defaults (the s3.* keys) win over the environment */
    sl_s3_set_defaults(NULL, NULL, "from-config", NULL, -1);
    sl_s3_config_t r;
    memset(&r, 0, sizeof r);
    CHECK_EQ(sl_s3_config_resolve(&r, err, sizeof err), 0);
    CHECK_STR(r.secret_key, "from-config");
    CHECK_EQ(r.path_style, 1); /* an endpoint is set: path style */
    /* and a wrong one is reported when storage opens */
    CHECK_EQ(sl_ckpt_storage_open(uri, "job", &s, err, sizeof err), SL_EINVAL);
    CHECK_CONTAINS(err, "SignatureDoesNotMatch");
    sl_s3_set_defaults(NULL, NULL, env_or("SLUICE_S3_SECRET_KEY", "sluice-secret"), NULL, -1);
    CHECK_EQ(sl_ckpt_storage_open(uri, "job", &s, err, sizeof err), 0);
    s->ops->destroy(s);
}

static sl_s3_config_t proxy_cfg(const proxy_t *px) {
    sl_s3_config_t c = base_cfg();
    snprintf(c.endpoint, sizeof c.endpoint, "http://127.0.0.1:%d", px->port);
    c.path_style = 1;
    c.max_attempts = 5;
    c.backoff_base_ms = 40;
    c.backoff_max_ms = 400;
    c.request_timeout_ms = 1000;
    c.part_size = (int64_t)5 << 20;
    c.multipart_threshold = (int64_t)5 << 20;
    c.upload_threads = 3;
    return c;
}

/* A discard cut short by a store that fails half-way never leaves a
 * _metadata whose files are gone: _metadata goes first. */
TEST(s3_interrupted_discard_leaves_no_broken_checkpoint) {
    CHECK(server_ok);
    proxy_t px;
    CHECK(proxy_start(&px));
    char uri[512];
    uri_of(uri, sizeof uri, "discard");
    sl_s3_config_t cfg = proxy_cfg(&px);
    cfg.max_attempts = 1;
    sl_ckpt_storage_t *s, *direct;
    CHECK_EQ(sl_ckpt_storage_s3_open(uri, "job", &cfg, &s, err, sizeof err), 0);
    CHECK_EQ(sl_ckpt_storage_open(uri, "job", &direct, err, sizeof err), 0);
    for (int cut = 2; cut <= 5; cut++) { /* the store fails from the cut-th request of the discard on */
        mck_t c;
        memset(&c, 0, sizeof c);
        CHECK_EQ(direct->ops->create_checkpoint(direct, cut, err, sizeof err), 0);
        for (int i = 0; i < 4; i++) {
            /* names that sort before "_metadata", so deleting in listing order would delete it last */
            snprintf(c.f[i].name, sizeof c.f[i].name, "0state-%d", i);
            c.f[i].n = 100 + (size_t)i;
            c.f[i].p = random_bytes(c.f[i].n);
            CHECK_EQ(put_file(direct, cut, SL_CKPT_SCOPE_EXCLUSIVE, c.f[i].name, c.f[i].p, c.f[i].n), 0);
        }
        c.nf = 4;
        sl_ckpt_metadata_t *md = metadata_of(direct, cut, &c);
        CHECK_EQ(direct->ops->commit(direct, md, err, sizeof err), 0);
        sl_ckpt_metadata_free(md);
        atomic_store(&px.fault_kind, F_503);
        atomic_store(&px.fail_after, atomic_load(&px.requests) + cut - 1);
        CHECK(s->ops->discard(s, cut, err, sizeof err) < 0);
        atomic_store(&px.fail_after, 0);
        /* either gone whole or incomplete; never complete with files missing */
        sl_ckpt_metadata_t *got = NULL;
        int rc = direct->ops->load(direct, cut, &got, err, sizeof err);
        if (rc == 0) {
            for (int i = 0; i < 4 && rc == 0; i++) {
                sl_ckpt_in_t *in;
                rc = direct->ops->open_input(direct, cut, SL_CKPT_SCOPE_EXCLUSIVE, c.f[i].name, &in, err, sizeof err);
                if (rc == 0) in->ops->close(in);
            }
            if (rc) fprintf(stderr, "  cut %d: complete checkpoint with a file gone: %s\n", cut, err);
            CHECK_EQ(rc, 0);
            sl_ckpt_metadata_free(got);
        } else {
            CHECK_EQ(rc, SL_ENOTFOUND);
        }
        mck_clear(&c);
    }
    CHECK_EQ(direct->ops->discard_all(direct, err, sizeof err), 0);
    s->ops->destroy(s);
    direct->ops->destroy(direct);
    proxy_stop(&px);
}

/* Transient faults (503 SlowDown, reset, stall) are retried with backoff. */
TEST(s3_retries_transient_faults) {
    CHECK(server_ok);
    proxy_t px;
    CHECK(proxy_start(&px));
    sl_s3_config_t cfg = proxy_cfg(&px);
    sl_s3_client_t *c;
    CHECK_EQ(sl_s3_client_new(&cfg, bucket, &c, err, sizeof err), 0);
    const int kinds[] = {F_503, F_RESET, F_STALL};
    for (int k = 0; k < 3; k++) {
        int nf = kinds[k] == F_STALL ? 1 : 1 + (int)(rnd() % 3);
        atomic_store(&px.fault_kind, kinds[k]);
        atomic_store(&px.faults_left, nf);
        int64_t r0;
        sl_s3_client_stats(c, NULL, &r0);
        char key[300];
        snprintf(key, sizeof key, "%s/retry/obj-%d", run_prefix, k);
        size_t n = 1000 + (size_t)(rnd() % 100000);
        uint8_t *p = random_bytes(n);
        int64_t t0 = sl_mono_ns();
        int rc = sl_s3_put(c, key, p, n, err, sizeof err);
        int64_t ms = (sl_mono_ns() - t0) / 1000000;
        if (rc) fprintf(stderr, "  kind %d: %s\n", kinds[k], err);
        CHECK_EQ(rc, 0);
        int64_t r1;
        sl_s3_client_stats(c, NULL, &r1);
        CHECK_EQ(r1 - r0, nf); /* one retry per fault */
        /* equal jitter: at least half of each capped bound (20, 40, 80 ms) */
        int64_t floor_ms = 0;
        for (int i = 0, cap = 40; i < nf; i++, cap = SL_MIN(cap * 2, 400)) floor_ms += cap / 2;
        CHECK(ms >= floor_ms);
        sl_buf_t got = {0};
        CHECK_EQ(sl_s3_get(c, key, &got, err, sizeof err), 0);
        CHECK_EQ(got.len, n);
        CHECK(memcmp(got.p, p, n) == 0);
        sl_buf_free(&got);
        sl_free(p);
    }
    /* a multipart upload with faults in the middle of its parts still arrives whole */
    atomic_store(&px.fault_kind, F_503);
    atomic_store(&px.faults_left, 0);
    atomic_store(&px.fault_every, 3);
    size_t n = ((size_t)16 << 20) + 12345;
    uint8_t *p = random_bytes(n);
    char tmpl[] = "/tmp/s3-test-XXXXXX";
    int fd = mkstemp(tmpl);
    CHECK(fd >= 0);
    unlink(tmpl);
    CHECK_EQ(sl_write_all(fd, p, n), 0);
    char key[300];
    snprintf(key, sizeof key, "%s/retry/big", run_prefix);
    int rc = sl_s3_put_fd(c, key, fd, n, err, sizeof err);
    if (rc) fprintf(stderr, "  multipart: %s\n", err);
    CHECK_EQ(rc, 0);
    close(fd);
    atomic_store(&px.fault_every, 0);
    CHECK(atomic_load(&px.faulted) > 3);
    sl_buf_t got = {0};
    CHECK_EQ(sl_s3_get(c, key, &got, err, sizeof err), 0);
    CHECK_EQ(got.len, n);
    CHECK(memcmp(got.p, p, n) == 0);
    sl_buf_free(&got);
    sl_free(p);
    sl_s3_client_free(c);
    proxy_stop(&px);
}

/* A failure that stays fails the upload with a message naming the bucket
 * and key and S3's error, and no complete checkpoint is left. */
TEST(s3_persistent_failure_fails_the_checkpoint) {
    CHECK(server_ok);
    proxy_t px;
    CHECK(proxy_start(&px));
    char uri[512];
    uri_of(uri, sizeof uri, "persistent");
    sl_s3_config_t cfg = proxy_cfg(&px);
    sl_ckpt_storage_t *s, *direct;
    CHECK_EQ(sl_ckpt_storage_s3_open(uri, "job", &cfg, &s, err, sizeof err), 0);
    CHECK_EQ(sl_ckpt_storage_open(uri, "job", &direct, err, sizeof err), 0);
    CHECK_EQ(s->ops->create_checkpoint(s, 1, err, sizeof err), 0);
    mck_t c;
    memset(&c, 0, sizeof c);
    snprintf(c.f[0].name, sizeof c.f[0].name, "ok-file");
    c.f[0].n = 5000;
    c.f[0].p = random_bytes(c.f[0].n);
    CHECK_EQ(put_file(s, 1, SL_CKPT_SCOPE_EXCLUSIVE, c.f[0].name, c.f[0].p, c.f[0].n), 0);
    c.nf = 1;
    const int kinds[] = {F_503, F_RESET};
    for (int k = 0; k < 2; k++) {
        atomic_store(&px.fault_kind, kinds[k]);
        atomic_store(&px.faults_left, -1);
        int before = atomic_load(&px.requests);
        /* a small file (one PUT) and a large one (multipart) */
        size_t sizes[] = {3000, ((size_t)6 << 20) + 7};
        for (int i = 0; i < 2; i++) {
            uint8_t *p = random_bytes(sizes[i]);
            char nm[32];
            snprintf(nm, sizeof nm, "failing-%d-%d", k, i);
            int rc = put_file(s, 1, SL_CKPT_SCOPE_EXCLUSIVE, nm, p, sizes[i]);
            sl_free(p);
            CHECK(rc < 0);
            CHECK_CONTAINS(err, bucket);
            CHECK_CONTAINS(err, "gave up after 5 attempts");
            if (i == 0) CHECK_CONTAINS(err, nm);
            if (kinds[k] == F_503) CHECK_CONTAINS(err, "SlowDown");
        }
        CHECK(atomic_load(&px.requests) - before >= 10); /* 5 attempts each */
        /* commit cannot succeed either: no complete checkpoint */
        sl_ckpt_metadata_t *md = metadata_of(s, 1, &c);
        CHECK(s->ops->commit(s, md, err, sizeof err) < 0);
        sl_ckpt_metadata_free(md);
    }
    atomic_store(&px.faults_left, 0);
    int64_t id;
    CHECK_EQ(sl_ckpt_storage_latest_complete_id(direct, &id, err, sizeof err), SL_ENOTFOUND);
    sl_ckpt_entry_t *v;
    int n;
    CHECK_EQ(direct->ops->list(direct, &v, &n, err, sizeof err), 0);
    CHECK_EQ(n, 1);
    CHECK_EQ(v[0].complete, 0);
    sl_free(v);
    /* no failed file appeared, whole or in part */
    for (int k = 0; k < 2; k++)
        for (int i = 0; i < 2; i++) {
            char nm[32];
            snprintf(nm, sizeof nm, "failing-%d-%d", k, i);
            sl_ckpt_in_t *in;
            CHECK_EQ(direct->ops->open_input(direct, 1, SL_CKPT_SCOPE_EXCLUSIVE, nm, &in, err, sizeof err),
                     SL_ENOTFOUND);
        }
    /* once the store is back, the next checkpoint completes */
    CHECK_EQ(s->ops->create_checkpoint(s, 2, err, sizeof err), 0);
    CHECK_EQ(put_file(s, 2, SL_CKPT_SCOPE_EXCLUSIVE, c.f[0].name, c.f[0].p, c.f[0].n), 0);
    sl_ckpt_metadata_t *md = metadata_of(s, 2, &c);
    CHECK_EQ(s->ops->commit(s, md, err, sizeof err), 0);
    sl_ckpt_metadata_free(md);
    CHECK_EQ(sl_ckpt_storage_latest_complete_id(direct, &id, err, sizeof err), 0);
    CHECK_EQ(id, 2);
    mck_clear(&c);
    CHECK_EQ(direct->ops->discard_all(direct, err, sizeof err), 0);
    s->ops->destroy(s);
    direct->ops->destroy(direct);
    proxy_stop(&px);
}

/* Virtual-host addressing (s3.path.style.access: false): a second S3Proxy
 * in virtual-host mode (scripts/s3proxy.sh with SLUICE_S3PROXY_VHOST, so it
 * answers bucket.localhost:PORT and not path-style requests) takes a whole
 * checkpoint — files, _metadata last, listing, ranged reads, discard —
 * from a client with path_style 0; the same client against the
 * path-style server of the other tests fails (its requests went by host). */
static const char *source_dir(void) { /* the repository: __FILE__ is .../tests/test_s3_storage.c */
    static char d[1024];
    snprintf(d, sizeof d, "%s", __FILE__);
    char *t = strstr(d, "/tests/test_s3_storage.c");
    if (t) *t = 0;
    return d;
}

TEST(s3_virtual_host_addressing) {
    char dir[1200], cmd[3000], ep[256] = "";
    snprintf(dir, sizeof dir, "%s/s3proxy-vhost", sl_test_tmpdir());
    snprintf(cmd, sizeof cmd,
             "SLUICE_S3PROXY_DIR='%s' SLUICE_S3PROXY_VHOST=localhost SLUICE_S3_ENDPOINT_FILE='%s/endpoint' "
             "'%s/scripts/s3proxy.sh' start >/dev/null",
             dir, dir, source_dir());
    int started = system(cmd);
    CHECK_EQ(started, 0);
    char path[1300];
    snprintf(path, sizeof path, "%s/endpoint", dir);
    FILE *f = fopen(path, "r");
    if (f) {
        if (!fgets(ep, sizeof ep, f)) ep[0] = 0;
        fclose(f);
    }
    ep[strcspn(ep, "\n")] = 0;
    CHECK(!strncmp(ep, "http://localhost:", 17));
    if (started == 0 && ep[0]) {
        sl_s3_config_t c = base_cfg();
        snprintf(c.endpoint, sizeof c.endpoint, "%s", ep);
        c.path_style = 0;
        char uri[512];
        snprintf(uri, sizeof uri, "s3://%s/vhost-%d", bucket, (int)getpid());
        sl_ckpt_storage_t *s = NULL;
        CHECK_EQ(sl_ckpt_storage_s3_open(uri, "job-v", &c, &s, err, sizeof err), 0);
        mck_t m;
        memset(&m, 0, sizeof m);
        m.exists = true;
        CHECK_EQ(s->ops->create_checkpoint(s, 1, err, sizeof err), 0);
        for (int i = 0; i < 2; i++) {
            snprintf(m.f[i].name, sizeof m.f[i].name, "v-%d", i);
            m.f[i].n = 1000 + (size_t)(rnd() % 9000);
            m.f[i].p = random_bytes(m.f[i].n);
            CHECK_EQ(put_file(s, 1, SL_CKPT_SCOPE_EXCLUSIVE, m.f[i].name, m.f[i].p, m.f[i].n), 0);
        }
        m.nf = 2;
        sl_ckpt_metadata_t *md = metadata_of(s, 1, &m);
        CHECK_EQ(s->ops->commit(s, md, err, sizeof err), 0);
        sl_ckpt_metadata_free(md);
        int64_t id = 0;
        CHECK_EQ(sl_ckpt_storage_latest_complete_id(s, &id, err, sizeof err), 0);
        CHECK_EQ(id, 1);
        for (int i = 0; i < 2; i++)
            CHECK_EQ(check_file(s, 1, SL_CKPT_SCOPE_EXCLUSIVE, m.f[i].name, m.f[i].p, m.f[i].n), 0);
        /* the path-style server of the other tests: a checkpoint written there by a path-style
         * client is found by path and not by host (the host names the bucket, which that server
         * does not read), so the requests above really went by host */
        sl_ckpt_storage_t *ps = NULL;
        CHECK_EQ(sl_ckpt_storage_open(uri, "job-v", &ps, err, sizeof err), 0);
        mck_t pm;
        memset(&pm, 0, sizeof pm);
        pm.exists = true;
        pm.nf = 1;
        snprintf(pm.f[0].name, sizeof pm.f[0].name, "p-0");
        pm.f[0].n = 2000;
        pm.f[0].p = random_bytes(pm.f[0].n);
        CHECK_EQ(ps->ops->create_checkpoint(ps, 7, err, sizeof err), 0);
        CHECK_EQ(put_file(ps, 7, SL_CKPT_SCOPE_EXCLUSIVE, pm.f[0].name, pm.f[0].p, pm.f[0].n), 0);
        md = metadata_of(ps, 7, &pm);
        CHECK_EQ(ps->ops->commit(ps, md, err, sizeof err), 0);
        sl_ckpt_metadata_free(md);
        CHECK_EQ(sl_ckpt_storage_latest_complete_id(ps, &id, err, sizeof err), 0);
        CHECK_EQ(id, 7);
        sl_s3_config_t vc = c;
        const char *port = strrchr(endpoint, ':');
        snprintf(vc.endpoint, sizeof vc.endpoint, "http://localhost%s", port ? port : "");
        sl_ckpt_storage_t *vs = NULL;
        int64_t vid = -1;
        int prc = sl_ckpt_storage_s3_open(uri, "job-v", &vc, &vs, err, sizeof err);
        if (prc == 0) {
            prc = sl_ckpt_storage_latest_complete_id(vs, &vid, err, sizeof err);
            vs->ops->destroy(vs);
        }
        fprintf(stderr, "  by host on the path-style server: %d (%s)\n", prc, prc ? err : "found");
        CHECK(prc != 0 || vid != 7);
        CHECK_EQ(ps->ops->discard(ps, 7, err, sizeof err), 0);
        mck_clear(&pm);
        ps->ops->destroy(ps);
        CHECK_EQ(s->ops->discard(s, 1, err, sizeof err), 0);
        sl_ckpt_entry_t *v;
        int n = -1;
        CHECK_EQ(s->ops->list(s, &v, &n, err, sizeof err), 0);
        CHECK_EQ(n, 0);
        if (n >= 0) sl_free(v);
        mck_clear(&m);
        s->ops->destroy(s);
    }
    /* its own endpoint file: stop removes it (not the fixture's, named by the test's environment) */
    snprintf(cmd, sizeof cmd,
             "SLUICE_S3PROXY_DIR='%s' SLUICE_S3_ENDPOINT_FILE='%s/endpoint' '%s/scripts/s3proxy.sh' stop >/dev/null 2>&1",
             dir, dir, source_dir());
    CHECK_EQ(system(cmd), 0);
}

int main(void) {
    server_ok = setup_server("storage");
    if (!server_ok) return 1;
    RUN(s3_random_operations_against_model);
    RUN(s3_metadata_last);
    RUN(s3_multipart_large_file);
    RUN(s3_retention_and_gc_of_shared);
    RUN(s3_savepoint_commit_read_dispose);
    RUN(s3_configuration_errors);
    RUN(s3_interrupted_discard_leaves_no_broken_checkpoint);
    RUN(s3_retries_transient_faults);
    RUN(s3_persistent_failure_fails_the_checkpoint);
    RUN(s3_virtual_host_addressing);
    return sl_test_failures ? 1 : 0;
}
