/* test_exactly_once_sink.c — the exactly-once file sink on a checkpointed
 * job: part files appear only when a checkpoint completes, never change
 * once visible, and together hold every record exactly once. */
#include <dirent.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>

#include "pipeline_util.h"
#include "test.h"

#define MAXF 4096

static char dir[1024];
static atomic_int stop_watch;
static atomic_int violations;
static atomic_int observations;

typedef struct seen_file {
    char name[256];
    off_t size;
} seen_file_t;

/* Watches the directory: a visible part file never changes size once seen,
 * never disappears, and always ends with a complete line. */
static void *watcher(void *arg) {
    static seen_file_t seen[MAXF];
    int nseen = 0;
    while (!atomic_load(&stop_watch)) {
        DIR *d = opendir(dir);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d))) {
                if (e->d_name[0] == '.') continue;
                char p[1400];
                snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
                struct stat st;
                if (stat(p, &st) != 0) {
                    atomic_fetch_add(&violations, 1); /* vanished */
                    continue;
                }
                int k = 0;
                while (k < nseen && strcmp(seen[k].name, e->d_name) != 0) k++;
                if (k == nseen && nseen < MAXF) {
                    snprintf(seen[nseen].name, sizeof seen[nseen].name, "%s", e->d_name);
                    seen[nseen++].size = st.st_size;
                    FILE *f = fopen(p, "r");
                    if (f && st.st_size > 0) {
                        fseek(f, -1, SEEK_END);
                        if (fgetc(f) != '\n') atomic_fetch_add(&violations, 1); /* partial */
                    }
                    if (f) fclose(f);
                } else if (k < nseen && seen[k].size != st.st_size) {
                    atomic_fetch_add(&violations, 1); /* changed after it became visible */
                }
            }
            closedir(d);
            atomic_fetch_add(&observations, 1);
        }
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

/* a slow counter source so the job spans many checkpoints */
static int slow_map(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    if (sl_row_i64(&in->row, 0) % 2000 == 0) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    sl_rw_copy_row(out, &in->row);
    return 0;
}

TEST(exactly_once_files) {
    snprintf(dir, sizeof dir, "%s/eo-out", sl_test_tmpdir());
    const int64_t N = 200000;
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 2);
    sl_env_enable_checkpointing(env, 20, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_stream_t *s = sl_from_source(env, counter_source(N, 2), sl_wm_none(), "numbers");
    s = sl_map(s, slow_map, NULL, sl_schema_parse("id BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0));
    sl_sink_to(sl_rebalance(s), sl_exactly_once_file_sink(dir, SL_FMT_CSV), "files");
    pthread_t th;
    atomic_store(&stop_watch, 0);
    pthread_create(&th, NULL, watcher, NULL);
    int rc = sl_env_execute(env, "eo");
    atomic_store(&stop_watch, 1);
    pthread_join(th, NULL);
    CHECK_STR(sl_env_error(env), "");
    CHECK_EQ(rc, 0);
    int64_t completed = sl_env_checkpoints_completed(env);
    fprintf(stderr, "  %lld checkpoints completed, %d directory observations\n", (long long)completed,
            atomic_load(&observations));
    CHECK(completed >= 3);
    CHECK_EQ(atomic_load(&violations), 0);
    /* every record exactly once over the part files; no hidden file left */
    char *seen = calloc((size_t)N, 1);
    int64_t total = 0;
    int parts = 0, hidden = 0;
    DIR *d = opendir(dir);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
        if (e->d_name[0] == '.') {
            hidden++;
            continue;
        }
        parts++;
        char p[1400];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        FILE *f = fopen(p, "r");
        long long id, ts;
        while (f && fscanf(f, "%lld,%lld\n", &id, &ts) == 2) {
            CHECK(id >= 0 && id < N);
            CHECK(!seen[id]);
            seen[id] = 1;
            total++;
        }
        if (f) fclose(f);
    }
    closedir(d);
    free(seen);
    CHECK_EQ(total, N);
    CHECK_EQ(hidden, 0);
    CHECK(parts >= 3); /* one per completed checkpoint with data, per subtask */
    sl_env_destroy(env);
}

/* A user function fails once mid-stream: the job restarts from its latest
 * checkpoint (fixed-delay strategy) and the committed output still holds
 * every record exactly once. */
static atomic_int failed_once;
static int fail_once_map(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    if (sl_row_i64(&in->row, 0) == 120000 && !atomic_exchange(&failed_once, 1)) return SL_EUSER;
    return slow_map(ctx, in, out);
}

TEST(restart_after_failure) {
    char rdir[1024], ck[1024];
    snprintf(rdir, sizeof rdir, "%s/eo-restart", sl_test_tmpdir());
    snprintf(ck, sizeof ck, "%s/eo-restart-ckpt", sl_test_tmpdir());
    const int64_t N = 200000;
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 2);
    sl_env_enable_checkpointing(env, 20, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_env_set_checkpoint_dir(env, ck);
    sl_env_set_restart_fixed_delay(env, 3, 10);
    sl_stream_t *s = sl_uid(sl_from_source(env, counter_source(N, 2), sl_wm_none(), "numbers"), "numbers");
    s = sl_uid(sl_map(s, fail_once_map, NULL, sl_schema_parse("id BIGINT NOT NULL, ts BIGINT NOT NULL", NULL, 0)),
               "map");
    sl_uid(sl_sink_to(sl_rebalance(s), sl_exactly_once_file_sink(rdir, SL_FMT_CSV), "files"), "files");
    int rc = sl_env_execute(env, "restart");
    CHECK_STR(sl_env_error(env), "");
    CHECK_EQ(rc, 0);
    CHECK_EQ(sl_env_restarts(env), 1);
    CHECK(atomic_load(&failed_once));
    char *seen = calloc((size_t)N, 1);
    int64_t total = 0;
    DIR *d = opendir(rdir);
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        char p[1400];
        snprintf(p, sizeof p, "%s/%s", rdir, e->d_name);
        FILE *f = fopen(p, "r");
        long long id, ts;
        while (f && fscanf(f, "%lld,%lld\n", &id, &ts) == 2) {
            CHECK(id >= 0 && id < N);
            CHECK(!seen[id]); /* no duplicate after the restart */
            seen[id] = 1;
            total++;
        }
        if (f) fclose(f);
    }
    closedir(d);
    free(seen);
    CHECK_EQ(total, N); /* no gap */
    sl_env_destroy(env);
}

int main(void) {
    RUN(exactly_once_files);
    RUN(restart_after_failure);
    TEST_MAIN_END();
}
