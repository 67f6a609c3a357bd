/*
 * test_savepoint.c — savepoints and upgrades on the embedded runtime
 * (scenario S5's mechanics): an intermediate savepoint commits nothing and
 * a job restored from it commits everything exactly once; stop with a
 * savepoint, with and without --drain, at another parallelism and across
 * state backends (heap -> RocksDB -> heap); the state of a removed operator
 * is refused unless allowed; a changed max parallelism is refused; a
 * damaged savepoint is refused by name; dispose.
 *
 * The job and its reference: savepoint_util.h.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "checkpoint/storage.h"
#include "savepoint_util.h"
#include "test.h"

/* ---- tests ---- */

/* An intermediate savepoint commits nothing (Flink 1.15+); the job goes
 * on; a job restored from it (at another parallelism) commits what it
 * covered and then the rest, exactly once. */
TEST(intermediate_savepoint_then_restore) {
    const int64_t G = 2400;
    txn_collected_t *t = txn_collected_new();
    sl_schema_t *os = out_schema();
    job_opts_t o = opts(2, SL_STATE_BACKEND_HASHMAP);
    sl_env_t *env = build(&o, t);
    run_t r;
    start(&r, env, G);
    CHECK(wait_emitted(G));
    char sp[4300] = "", spdir[700];
    snprintf(spdir, sizeof spdir, "%s/sp-intermediate", sl_test_tmpdir());
    CHECK_EQ(sl_env_trigger_savepoint(env, spdir, sp, sizeof sp), 0);
    CHECK(has_metadata(sp));
    CHECK(strstr(sp, "/savepoint-") != NULL);
    pthread_mutex_lock(&t->mu);
    int64_t delivered = t->out->n, staged = t->nstaged;
    pthread_mutex_unlock(&t->mu);
    CHECK_EQ(delivered, 0);  /* nothing committed by an intermediate savepoint */
    CHECK(staged > 0);       /* but the windows that fired are pre-committed in it */
    /* a second savepoint while the job runs works too */
    char sp2[4300] = "";
    CHECK_EQ(sl_env_trigger_savepoint(env, spdir, sp2, sizeof sp2), 0);
    CHECK(strcmp(sp, sp2) != 0);
    sl_env_cancel(env);
    CHECK_EQ(finish(&r), SL_ECANCELED);
    sl_env_destroy(env);

    /* version 2 from the first savepoint at parallelism 3 on RocksDB */
    job_opts_t o2 = opts(3, SL_STATE_BACKEND_ROCKSDB);
    o2.restore = sp;
    env = build(&o2, t);
    start(&r, env, N);
    CHECK_EQ(finish(&r), 0);
    if (r.rc) fprintf(stderr, "  %s\n", sl_env_error(env));
    sl_env_destroy(env);
    static win_row_t got[20000], want[20000];
    int ng = committed(t, os, got, 20000), nw = reference(0, N, want, 0);
    CHECK(same_rows(got, ng, want, nw));
    sl_schema_unref(os);
    txn_collected_free(t);
}

/* Stop with a savepoint, no drain: nothing pending afterwards; windows open
 * at the stop travel in the savepoint and fire after the upgrade with the
 * counts of both versions' input (heap -> RocksDB, parallelism 2 -> 3, a new
 * operator with state of its own). */
TEST(stop_without_drain_upgrade) {
    const int64_t G = 3001;
    txn_collected_t *t = txn_collected_new();
    sl_schema_t *os = out_schema();
    job_opts_t o = opts(2, SL_STATE_BACKEND_HASHMAP);
    sl_env_t *env = build(&o, t);
    run_t r;
    start(&r, env, G);
    CHECK(wait_emitted(G));
    char sp[4300] = "", spdir[700];
    snprintf(spdir, sizeof spdir, "%s/sp-stop", sl_test_tmpdir());
    CHECK_EQ(sl_env_stop_with_savepoint(env, spdir, false, sp, sizeof sp), 0);
    CHECK_EQ(finish(&r), 0); /* a stopped job finished */
    sl_env_destroy(env);
    pthread_mutex_lock(&t->mu);
    int64_t staged = t->nstaged, delivered = t->out->n;
    pthread_mutex_unlock(&t->mu);
    CHECK_EQ(staged, 0);     /* the stop's savepoint committed its transactions */
    CHECK(delivered > 0);
    /* no --drain: what was delivered are only windows the watermark passed */
    static win_row_t got[20000], want[20000];
    int ng = committed(t, os, got, 20000);
    for (int i = 0; i < ng; i++) CHECK(got[i].start + WIN_MS <= G * 10);

    job_opts_t o2 = opts(3, SL_STATE_BACKEND_ROCKSDB);
    o2.restore = sp;
    o2.extra_operator = true;
    atomic_store(&extra_seen, 0);
    env = build(&o2, t);
    start(&r, env, N);
    CHECK_EQ(finish(&r), 0);
    if (r.rc) fprintf(stderr, "  %s\n", sl_env_error(env));
    sl_env_destroy(env);
    CHECK_EQ(atomic_load(&extra_seen), N - G); /* the new operator starts empty, sees version 2's input */
    ng = committed(t, os, got, 20000);
    int nw = reference(0, N, want, 0);
    CHECK(same_rows(got, ng, want, nw));
    sl_schema_unref(os);
    txn_collected_free(t);
}

/* A savepoint in RocksDB's own format (--type native): RocksDB's SST files
 * are in the savepoint directory itself (it needs nothing of the job's
 * checkpoint directory, which is deleted before the restore); it restores
 * into RocksDB at another parallelism with the windows that were open, and
 * a heap job refuses it by name. */
TEST(native_savepoint) {
    const int64_t G = 2500;
    txn_collected_t *t = txn_collected_new();
    sl_schema_t *os = out_schema();
    job_opts_t o = opts(2, SL_STATE_BACKEND_ROCKSDB);
    sl_env_t *env = build(&o, t);
    sl_env_set_savepoint_format(env, SL_SAVEPOINT_NATIVE);
    run_t r;
    start(&r, env, G);
    CHECK(wait_emitted(G));
    char sp[4300] = "", spdir[700];
    snprintf(spdir, sizeof spdir, "%s/sp-native", sl_test_tmpdir());
    CHECK_EQ(sl_env_stop_with_savepoint(env, spdir, false, sp, sizeof sp), 0);
    CHECK_EQ(finish(&r), 0);
    sl_env_destroy(env);
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep -c 'sst$' > '%s.n'; rm -rf '%s'", sp, sp, CK);
    CHECK_EQ(system(cmd), 0);
    char nf[4400];
    snprintf(nf, sizeof nf, "%s.n", sp);
    FILE *f = fopen(nf, "r");
    int nsst = 0;
    CHECK(f && fscanf(f, "%d", &nsst) == 1);
    if (f) fclose(f);
    fprintf(stderr, "  %d SST files in %s\n", nsst, sp);
    CHECK(nsst >= 2); /* one database per subtask at least */

    job_opts_t h = opts(2, SL_STATE_BACKEND_HASHMAP);
    h.restore = sp;
    env = build(&h, t);
    CHECK(sl_env_execute(env, "native-on-heap") < 0);
    CHECK_CONTAINS(sl_env_error(env), "RocksDB");
    CHECK_CONTAINS(sl_env_error(env), "'windows'");
    sl_env_destroy(env);

    job_opts_t o2 = opts(3, SL_STATE_BACKEND_ROCKSDB);
    o2.restore = sp;
    env = build(&o2, t);
    start(&r, env, N);
    CHECK_EQ(finish(&r), 0);
    if (r.rc) fprintf(stderr, "  %s\n", sl_env_error(env));
    sl_env_destroy(env);
    static win_row_t got[20000], want[20000];
    int ng = committed(t, os, got, 20000);
    int nw = reference(0, N, want, 0);
    CHECK(same_rows(got, ng, want, nw));
    sl_schema_unref(os);
    txn_collected_free(t);
}

/* Stop with --drain: every window fires before the savepoint (and is
 * committed by it); the next version starts with no watermark (RocksDB
 * with incremental checkpoints -> heap: the savepoint is canonical and
 * self-contained all the same), parallelism 3 -> 1. */
TEST(stop_with_drain) {
    const int64_t G = 2555;
    txn_collected_t *t = txn_collected_new();
    sl_schema_t *os = out_schema();
    job_opts_t o = opts(3, SL_STATE_BACKEND_ROCKSDB);
    o.incremental = true;
    sl_env_t *env = build(&o, t);
    run_t r;
    start(&r, env, G);
    CHECK(wait_emitted(G));
    char sp[4300] = "", spdir[700];
    snprintf(spdir, sizeof spdir, "%s/sp-drain", sl_test_tmpdir());
    CHECK_EQ(sl_env_stop_with_savepoint(env, spdir, true, sp, sizeof sp), 0);
    CHECK_EQ(finish(&r), 0);
    sl_env_destroy(env);
    static win_row_t got[20000], want[20000];
    int ng = committed(t, os, got, 20000), nw = reference(0, G, want, 0);
    CHECK(same_rows(got, ng, want, nw)); /* drained: every window of version 1 fired and committed */

    job_opts_t o2 = opts(1, SL_STATE_BACKEND_HASHMAP);
    o2.restore = sp;
    env = build(&o2, t);
    start(&r, env, N);
    CHECK_EQ(finish(&r), 0);
    if (r.rc) fprintf(stderr, "  %s\n", sl_env_error(env));
    sl_env_destroy(env);
    ng = committed(t, os, got, 20000);
    nw = reference(0, G, want, 0);
    nw = reference(G, N, want, nw); /* the window across the stop fires once per version */
    CHECK(same_rows(got, ng, want, nw));
    sl_schema_unref(os);
    txn_collected_free(t);
}

/* Takes a stop-with-savepoint of the windowed job at gate G; returns its path. */
static int take_stop_savepoint(const char *name, int64_t G, char *sp, size_t cap) {
    txn_collected_t *t = txn_collected_new();
    job_opts_t o = opts(2, SL_STATE_BACKEND_HASHMAP);
    sl_env_t *env = build(&o, t);
    run_t r;
    start(&r, env, G);
    int rc = wait_emitted(G) ? 0 : -1;
    char spdir[700];
    snprintf(spdir, sizeof spdir, "%s/%s", sl_test_tmpdir(), name);
    if (rc == 0) rc = sl_env_stop_with_savepoint(env, spdir, false, sp, cap);
    if (rc) fprintf(stderr, "  %s: stop-with-savepoint: %s\n", name, sl_env_error(env));
    if (rc) sl_env_cancel(env);
    finish(&r);
    sl_env_destroy(env);
    txn_collected_free(t);
    return rc;
}

/* The window operator is gone in version 2: refused by name without -n;
 * with -n its state is dropped and the job runs. */
TEST(removed_operator_needs_allow_non_restored) {
    char sp[4300] = "";
    CHECK_EQ(take_stop_savepoint("sp-removed", 1500, sp, sizeof sp), 0);
    txn_collected_t *t = txn_collected_new();
    job_opts_t o = opts(2, SL_STATE_BACKEND_HASHMAP);
    o.with_window = false;
    o.restore = sp;
    sl_env_t *env = build(&o, t);
    atomic_store(&GS.gate, N);
    CHECK(sl_env_execute(env, "v2") < 0);
    CHECK_CONTAINS(sl_env_error(env), "'windows'");
    CHECK_CONTAINS(sl_env_error(env), "--allowNonRestoredState");
    sl_env_destroy(env);
    o.allow_nrs = true;
    env = build(&o, t);
    CHECK_EQ(sl_env_execute(env, "v2"), 0);
    sl_env_destroy(env);
    pthread_mutex_lock(&t->mu);
    CHECK_EQ(t->out->n, N - 1500); /* the source resumed where the savepoint left it */
    pthread_mutex_unlock(&t->mu);
    txn_collected_free(t);
}

/* A different max parallelism is refused with the reason, before the job starts. */
TEST(max_parallelism_change_refused) {
    char sp[4300] = "";
    CHECK_EQ(take_stop_savepoint("sp-maxp", 1200, sp, sizeof sp), 0);
    txn_collected_t *t = txn_collected_new();
    job_opts_t o = opts(2, SL_STATE_BACKEND_HASHMAP);
    o.max_parallelism = 64;
    o.restore = sp;
    sl_env_t *env = build(&o, t);
    CHECK(sl_env_execute(env, "v2") < 0);
    CHECK_CONTAINS(sl_env_error(env), "max parallelism");
    CHECK_CONTAINS(sl_env_error(env), "'windows'");
    sl_env_destroy(env);
    txn_collected_free(t);
}

static int copy_tree(const char *from, const char *to) {
    char cmd[9000];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && cp -r '%s' '%s'", to, from, to);
    return system(cmd);
}

/* The first state file of the savepoint (a keyed-* file). */
static bool state_file(const char *sp, char *out, size_t cap) {
    char cmd[4600];
    snprintf(cmd, sizeof cmd, "ls '%s' | grep '^keyed-' | head -1", sp);
    FILE *f = popen(cmd, "r");
    char name[300] = "";
    if (!f || !fgets(name, sizeof name, f)) {
        if (f) pclose(f);
        return false;
    }
    pclose(f);
    name[strcspn(name, "\n")] = 0;
    snprintf(out, cap, "%s/%s", sp, name);
    return name[0] != 0;
}

/* A savepoint whose metadata or state file is missing, truncated or has a
 * flipped byte is refused, naming the file; the savepoint it was copied
 * from still restores. */
TEST(damaged_savepoint_refused) {
    char sp[4300] = "";
    CHECK_EQ(take_stop_savepoint("sp-damage", 2000, sp, sizeof sp), 0);
    char bad[4400], f[4800];
    snprintf(bad, sizeof bad, "%s-bad", sp);
    for (int c = 0; c < 5; c++) {
        CHECK_EQ(copy_tree(sp, bad), 0);
        const char *what = "";
        if (c < 2) {
            snprintf(f, sizeof f, "%s/_metadata", bad);
            what = "_metadata";
        } else {
            CHECK(state_file(bad, f, sizeof f));
            what = strrchr(f, '/') + 1;
        }
        struct stat st;
        CHECK_EQ(stat(f, &st), 0);
        if (c == 0 || c == 2) { /* flip a byte in the middle */
            FILE *fp = fopen(f, "r+b");
            fseek(fp, st.st_size / 2, SEEK_SET);
            int ch = fgetc(fp);
            fseek(fp, st.st_size / 2, SEEK_SET);
            fputc(ch ^ 0x40, fp);
            fclose(fp);
        } else if (c == 1 || c == 3) {
            CHECK_EQ(truncate(f, st.st_size - 9), 0);
        } else {
            CHECK_EQ(unlink(f), 0);
        }
        txn_collected_t *t = txn_collected_new();
        job_opts_t o = opts(2, SL_STATE_BACKEND_HASHMAP);
        o.restore = bad;
        sl_env_t *env = build(&o, t);
        atomic_store(&GS.gate, N);
        int rc = sl_env_execute(env, "v2");
        if (rc == 0) fprintf(stderr, "  case %d (%s) restored\n", c, what);
        CHECK(rc < 0);
        CHECK_CONTAINS(sl_env_error(env), what);
        sl_env_destroy(env);
        txn_collected_free(t);
    }
    /* the original is untouched and restores */
    txn_collected_t *t = txn_collected_new();
    job_opts_t o = opts(2, SL_STATE_BACKEND_HASHMAP);
    o.restore = sp;
    sl_env_t *env = build(&o, t);
    atomic_store(&GS.gate, N);
    CHECK_EQ(sl_env_execute(env, "v2"), 0);
    sl_env_destroy(env);
    txn_collected_free(t);
}

/* Savepoints are refused with the reason when they cannot be taken. */
TEST(savepoint_errors) {
    sl_env_t *idle = sl_env_new();
    char sp[4300];
    CHECK_EQ(sl_env_trigger_savepoint(idle, "/tmp/x", sp, sizeof sp), SL_ESTATE);
    CHECK_CONTAINS(sl_env_error(idle), "no job is running");
    sl_env_destroy(idle);
    txn_collected_t *t = txn_collected_new();
    job_opts_t o = opts(1, SL_STATE_BACKEND_HASHMAP);
    sl_env_t *env = build(&o, t);
    run_t r;
    start(&r, env, 100);
    CHECK(wait_emitted(100));
    CHECK_EQ(sl_env_trigger_savepoint(env, "relative/dir", sp, sizeof sp), SL_EINVAL);
    CHECK_CONTAINS(sl_env_error(env), "not an absolute path");
    CHECK_EQ(sl_env_trigger_savepoint(env, "/tmp/a/../b", sp, sizeof sp), SL_EINVAL);
    CHECK_CONTAINS(sl_env_error(env), "'..'");
    CHECK_EQ(sl_env_trigger_savepoint(env, NULL, sp, sizeof sp), SL_EINVAL); /* no default directory */
    CHECK_CONTAINS(sl_env_error(env), "execution.checkpointing.savepoint-dir");
    sl_env_cancel(env);
    finish(&r);
    sl_env_destroy(env);
    txn_collected_free(t);
}

/* Dispose removes a savepoint and refuses a checkpoint's directory. */
TEST(dispose) {
    char sp[4300] = "", err[600];
    CHECK_EQ(take_stop_savepoint("sp-dispose", 500, sp, sizeof sp), 0);
    CHECK_EQ(sl_ckpt_savepoint_dispose(sp, err, sizeof err), 0);
    CHECK(access(sp, F_OK) != 0);
    CHECK_EQ(sl_ckpt_savepoint_dispose(sp, err, sizeof err), SL_ENOTFOUND);
    CHECK_CONTAINS(err, sp);
}

int main(void) {
    GS.schema = sl_schema_parse("k BIGINT NOT NULL, v BIGINT NOT NULL, ts TIMESTAMP NOT NULL", NULL, 0);
    snprintf(CK, sizeof CK, "%s/ckpt", sl_test_tmpdir());
    RUN(intermediate_savepoint_then_restore);
    RUN(stop_without_drain_upgrade);
    RUN(stop_with_drain);
    RUN(native_savepoint);
    RUN(removed_operator_needs_allow_non_restored);
    RUN(max_parallelism_change_refused);
    RUN(damaged_savepoint_refused);
    RUN(savepoint_errors);
    RUN(dispose);
    sl_schema_unref(GS.schema);
    TEST_MAIN_END();
}
