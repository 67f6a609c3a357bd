/*
 * test_savepoint_compat.c — a savepoint written by an earlier build stays
 * readable: tests/data/savepoints/window-v1 was taken by this file's
 * writer (SLUICE_WRITE_COMPAT_SAVEPOINT=DIR build/test_savepoint_compat,
 * at commit f667eab: metadata version 1, keyed-state format version 1)
 * from the job of savepoint_util.h — heap state, parallelism 2, the source
 * emitting no watermark before its end, stopped without drain after the
 * first 2500 values — so every window is still open in it.  This build
 * restores it into the heap at parallelism 3 and into RocksDB at
 * parallelism 1; the windows then fire with the counts of the values
 * before and after the savepoint, exactly once, as the brute force counts
 * them.  A later change that makes old savepoints unreadable fails here;
 * one that changes the format on purpose must keep reading this one (or
 * bump the version and refuse it by name).
 */
#include <libgen.h>

#include "checkpoint/metadata.h"
#include "savepoint_util.h"
#include "test.h"

#define COMPAT_GATE 2500

static void data_dir(char *out, size_t cap) {
    char f[1024];
    snprintf(f, sizeof f, "%s", __FILE__);
    snprintf(out, cap, "%s/data/savepoints/window-v1", dirname(f));
}

/* Writes the savepoint (the writer; run by hand when the data is made). */
static int write_compat(const char *dest) {
    txn_collected_t *t = txn_collected_new();
    job_opts_t o = opts(2, SL_STATE_BACKEND_HASHMAP);
    o.no_watermarks = true;
    sl_env_t *env = build(&o, t);
    run_t r;
    start(&r, env, COMPAT_GATE);
    if (!wait_emitted(COMPAT_GATE)) return 1;
    char sp[4300], spdir[700], cmd[9000];
    snprintf(spdir, sizeof spdir, "%s/sp-compat", sl_test_tmpdir());
    int rc = sl_env_stop_with_savepoint(env, spdir, false, sp, sizeof sp);
    finish(&r);
    sl_env_destroy(env);
    txn_collected_free(t);
    if (rc) return 1;
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s' && cp '%s'/* '%s'/", dest, dest, sp, dest);
    fprintf(stderr, "savepoint %s -> %s\n", sp, dest);
    return system(cmd) != 0;
}

static void restore_case(int p, int backend) {
    char src[1100], copy[1200], cmd[4000];
    data_dir(src, sizeof src);
    snprintf(copy, sizeof copy, "%s/compat-%d-%d", sl_test_tmpdir(), p, backend);
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", copy, src, copy);
    CHECK_EQ(system(cmd), 0);
    txn_collected_t *t = txn_collected_new();
    job_opts_t o = opts(p, backend);
    o.no_watermarks = true;
    o.restore = copy;
    sl_env_t *env = build(&o, t);
    atomic_store(&GS.gate, N);
    int rc = sl_env_execute(env, "savepoint-job");
    if (rc) fprintf(stderr, "  %s\n", sl_env_error(env));
    CHECK_EQ(rc, 0);
    sl_env_destroy(env);
    sl_schema_t *os = out_schema();
    static win_row_t got[20000], want[20000];
    int ng = committed(t, os, got, 20000), nw = reference(0, N, want, 0);
    CHECK(same_rows(got, ng, want, nw));
    sl_schema_unref(os);
    txn_collected_free(t);
}

/* The committed savepoint is what it says: a canonical savepoint of the
 * window job, with the source's and the windows' state. */
TEST(committed_savepoint_is_canonical_v1) {
    char dir[1100], path[1300], err[600];
    data_dir(dir, sizeof dir);
    snprintf(path, sizeof path, "%s/_metadata", dir);
    sl_ckpt_metadata_t *md = NULL;
    CHECK_EQ(sl_ckpt_metadata_read_file(path, &md, err, sizeof err), 0);
    if (!md) {
        fprintf(stderr, "  %s\n", err);
        return;
    }
    CHECK_EQ(md->type, SL_CKPT_SAVEPOINT);
    CHECK_EQ(md->format, SL_CKPT_FORMAT_CANONICAL);
    CHECK(sl_ckpt_metadata_find_operator(md, "windows") != NULL);
    CHECK(sl_ckpt_metadata_find_operator(md, "source") != NULL);
    sl_ckpt_metadata_free(md);
}

TEST(restores_into_heap_at_3) { restore_case(3, SL_STATE_BACKEND_HASHMAP); }
TEST(restores_into_rocksdb_at_1) { restore_case(1, SL_STATE_BACKEND_ROCKSDB); }

int main(void) {
    GS.schema = sl_schema_parse("k BIGINT NOT NULL, v BIGINT NOT NULL, ts TIMESTAMP NOT NULL", NULL, 0);
    snprintf(CK, sizeof CK, "%s/ckpt", sl_test_tmpdir());
    const char *w = getenv("SLUICE_WRITE_COMPAT_SAVEPOINT");
    if (w) return write_compat(w);
    RUN(committed_savepoint_is_canonical_v1);
    RUN(restores_into_heap_at_3);
    RUN(restores_into_rocksdb_at_1);
    sl_schema_unref(GS.schema);
    TEST_MAIN_END();
}
