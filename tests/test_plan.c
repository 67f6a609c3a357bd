/*
 * test_plan.c — the job plan as data, and the JobManager/TaskManager split
 * around it:
 *   - a plan built from an environment encodes, decodes and re-encodes to
 *     the same bytes; the decoded plan has the builder's topology (checked
 *     against the job graph the test describes), and its fingerprint moves
 *     with every setting that changes what runs;
 *   - slot sharing groups: explicit, inherited from the inputs, "default"
 *     when the inputs disagree, and never chained across;
 *   - the decoder refuses a wrong version, dangling node references, a
 *     chain that crosses vertices, and survives random mutations;
 *   - the JobManager's scheduler refuses a job that needs more slots than
 *     the TaskManagers offer, naming both numbers, and places a job's slot
 *     sharing groups on different TaskManagers (checked in the DEPLOY
 *     messages it sends to fake TaskManagers);
 *   - the shared-secret handshake (common/auth.h).
 */
#include <pthread.h>

#include "api/plan_build.h"
#include "common/auth.h"
#include "jobmanager/job_master.h"
#include "pipeline_util.h"
#include "test.h"

static int noop_map(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    (void)ctx;
    sl_rw_copy_row(out, &in->row);
    return 1;
}

/* source(p1) -> map(p2) -> key_by -> window-less process -> sink; with
 * optional slot sharing groups. */
static sl_env_t *build(int p_map, const char *uid, const char *g_src, const char *g_sink) {
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 2);
    collected_t *c = collected_new();
    sl_env_own(env, c, (void (*)(void *))collected_free);
    sl_stream_t *s = sl_from_source(env, counter_source(100, 1), sl_wm_none(), "seq");
    s = sl_parallelism(s, 1);
    if (g_src) sl_slot_sharing_group(s, g_src);
    sl_stream_t *m = sl_map(s, noop_map, NULL, NULL);
    sl_parallelism(m, p_map);
    if (uid) sl_uid(m, uid);
    sl_stream_t *f = sl_map(m, noop_map, NULL, NULL); /* chained to m when groups agree */
    sl_stream_t *k = sl_rebalance(f);
    sl_stream_t *out = sl_sink_to(k, collect_sink(c), "sink");
    if (g_sink) sl_slot_sharing_group(out, g_sink);
    return env;
}

static sl_plan_t *plan_of(sl_env_t *env, sl_job_code_t *code) {
    char err[512];
    sl_plan_t *p = NULL;
    int rc = sl_plan_build(env, "plan-test", &p, code, err, sizeof err);
    if (rc < 0) fprintf(stderr, "plan_build: %s\n", err);
    return p;
}

static void encode(const sl_plan_t *p, sl_buf_t *b) {
    char err[256];
    b->len = 0;
    if (sl_plan_encode(p, b, err, sizeof err) < 0) fprintf(stderr, "encode: %s\n", err);
}

TEST(round_trip_and_topology) {
    sl_env_t *env = build(2, "the-map", NULL, NULL);
    sl_job_code_t code;
    sl_plan_t *p = plan_of(env, &code);
    CHECK(p);
    /* nodes: seq, map, map, sink; vertices: [seq] [map -> map] [sink] */
    CHECK_EQ(p->nnodes, 4);
    CHECK_EQ(p->nvertices, 3);
    CHECK_EQ(p->vertices[1].nnodes, 2);
    CHECK_EQ(p->vertices[0].parallelism, 1);
    CHECK_EQ(p->vertices[1].parallelism, 2);
    CHECK_EQ(p->ntasks, 1 + 2 + 2);
    CHECK_EQ(p->first_task[2], 3);
    CHECK(strcmp(p->nodes[1].uid, "the-map") == 0 && p->nodes[1].has_user_uid);
    CHECK(!p->nodes[2].has_user_uid && strncmp(p->nodes[2].uid, "map-", 4) == 0 && strlen(p->nodes[2].uid) == 20);
    int chained = 0, rebalance = 0;
    for (int e = 0; e < p->nedges; e++) {
        chained += p->edges[e].chained;
        rebalance += p->edges[e].part == SL_PLAN_REBALANCE;
    }
    CHECK_EQ(chained, 1);
    CHECK_EQ(rebalance, 2); /* seq(1) -> map(2) and the explicit rebalance */
    int s;
    CHECK_EQ(sl_plan_task_vertex(p, 4, &s), 2);
    CHECK_EQ(s, 1);
    CHECK_EQ(sl_plan_task_vertex(p, 5, &s), -1);
    CHECK_EQ(code.nnodes, 4);

    sl_buf_t a = {0}, b = {0};
    encode(p, &a);
    char err[512];
    sl_plan_t *q = NULL;
    CHECK_EQ(sl_plan_decode(a.p, a.len, &q, err, sizeof err), 0);
    encode(q, &b);
    CHECK_EQ(a.len, b.len);
    CHECK(memcmp(a.p, b.p, a.len) == 0);
    CHECK(sl_plan_fingerprint(p) == sl_plan_fingerprint(q));
    CHECK_EQ(q->ntasks, p->ntasks);
    CHECK_EQ(q->vertex_of[2], 1);
    CHECK_EQ(q->index_in_vertex[2], 1);
    sl_plan_free(q);
    sl_free(q);
    sl_buf_free(&a);
    sl_buf_free(&b);
    sl_plan_free(p);
    sl_free(p);
    sl_job_code_free(&code);
    sl_env_destroy(env);
}

static int pass_process(void *ctx, sl_pctx_t *pc, const sl_record_t *in, sl_collector_t *out) {
    (void)ctx, (void)pc, (void)in, (void)out;
    return 0;
}

/* Typed keyed states travel in the plan (names and DDL, in declaration
 * order) and are part of its fingerprint. */
static sl_plan_t *typed_plan(const char *ddl, sl_job_code_t *code, sl_env_t **envp) {
    sl_env_t *env = sl_env_new();
    sl_stream_t *s = sl_from_source(env, counter_source(10, 1), sl_wm_none(), "seq");
    sl_process_fn_t fn = {.process = pass_process};
    sl_stream_t *k = sl_keyed_process(sl_key_by(s, "id"), fn, sl_schema_ref((sl_schema_t *)sl_stream_schema(s)));
    sl_schema_t *a = sl_schema_parse(ddl, NULL, 0), *b = sl_schema_parse("v INT NOT NULL", NULL, 0);
    sl_keyed_state_schema(k, "profile", a);
    sl_keyed_state_schema(k, "seen", b);
    sl_schema_unref(a);
    sl_schema_unref(b);
    sl_sink_to(k, sl_counting_sink(NULL), "sink");
    *envp = env;
    return plan_of(env, code);
}

TEST(typed_state_schemas_in_the_plan) {
    sl_job_code_t c1, c2;
    sl_env_t *e1, *e2;
    sl_plan_t *p = typed_plan("n BIGINT NOT NULL, note VARCHAR", &c1, &e1);
    sl_plan_t *o = typed_plan("n INT NOT NULL, note VARCHAR", &c2, &e2);
    CHECK(p && o);
    const sl_plan_node_t *n = &p->nodes[1];
    CHECK_EQ(n->nstate_schemas, 2);
    CHECK_STR(n->state_schemas[0].name, "profile");
    CHECK_STR(n->state_schemas[0].schema, "n BIGINT NOT NULL, note VARCHAR");
    CHECK_STR(n->state_schemas[1].name, "seen");
    CHECK_EQ(p->nodes[0].nstate_schemas, 0);
    sl_buf_t a = {0}, b = {0};
    encode(p, &a);
    char err[512];
    sl_plan_t *q = NULL;
    CHECK_EQ(sl_plan_decode(a.p, a.len, &q, err, sizeof err), 0);
    CHECK_EQ(q->nodes[1].nstate_schemas, 2);
    CHECK_STR(q->nodes[1].state_schemas[1].schema, "v INT NOT NULL");
    encode(q, &b);
    CHECK(a.len == b.len && memcmp(a.p, b.p, a.len) == 0);
    CHECK(sl_plan_fingerprint(p) == sl_plan_fingerprint(q));
    CHECK(sl_plan_fingerprint(p) != sl_plan_fingerprint(o)); /* another schema is another job */
    sl_plan_free(q);
    sl_free(q);
    sl_buf_free(&a);
    sl_buf_free(&b);
    sl_plan_free(p);
    sl_free(p);
    sl_plan_free(o);
    sl_free(o);
    sl_job_code_free(&c1);
    sl_job_code_free(&c2);
    sl_env_destroy(e1);
    sl_env_destroy(e2);
}

TEST(fingerprint_follows_what_runs) {
    sl_job_code_t code;
    sl_env_t *e1 = build(2, "the-map", NULL, NULL), *e2 = build(2, "the-map", NULL, NULL);
    sl_env_t *e3 = build(3, "the-map", NULL, NULL), *e4 = build(2, "other-uid", NULL, NULL);
    sl_env_t *e5 = build(2, "the-map", NULL, NULL);
    sl_env_enable_checkpointing(e5, 1000, SL_CHECKPOINT_EXACTLY_ONCE);
    sl_plan_t *p[5];
    sl_env_t *envs[5] = {e1, e2, e3, e4, e5};
    for (int i = 0; i < 5; i++) {
        p[i] = plan_of(envs[i], &code);
        sl_job_code_free(&code);
        CHECK(p[i]);
    }
    CHECK(sl_plan_fingerprint(p[0]) == sl_plan_fingerprint(p[1])); /* the same job built twice */
    for (int i = 2; i < 5; i++) CHECK(sl_plan_fingerprint(p[0]) != sl_plan_fingerprint(p[i]));
    for (int i = 0; i < 5; i++) {
        sl_plan_free(p[i]);
        sl_free(p[i]);
        sl_env_destroy(envs[i]);
    }
}

TEST(slot_sharing_groups) {
    sl_job_code_t code;
    /* the source in "src": the map inherits it?  No: a map takes its
     * input's group, so both maps are in "src" too; the sink is in "sinks" */
    sl_env_t *env = build(1, NULL, "src", "sinks");
    sl_plan_t *p = plan_of(env, &code);
    CHECK(p);
    CHECK(strcmp(p->nodes[0].slot_group, "src") == 0);
    CHECK(strcmp(p->nodes[1].slot_group, "src") == 0);
    CHECK(strcmp(p->nodes[2].slot_group, "src") == 0);
    CHECK(strcmp(p->nodes[3].slot_group, "sinks") == 0);
    /* source(1) and map(1) have equal parallelism and a forward edge: one
     * chain, since they share a group; the sink is in another group */
    CHECK_EQ(p->vertex_of[0], p->vertex_of[1]);
    CHECK(p->vertex_of[3] != p->vertex_of[2]);
    sl_plan_free(p);
    sl_free(p);
    sl_job_code_free(&code);
    sl_env_destroy(env);

    /* a group change breaks a chain that would otherwise form */
    env = sl_env_new();
    collected_t *c = collected_new();
    sl_stream_t *s = sl_from_source(env, counter_source(10, 1), sl_wm_none(), "seq");
    sl_stream_t *m = sl_slot_sharing_group(sl_map(s, noop_map, NULL, NULL), "other");
    sl_sink_to(m, collect_sink(c), "sink");
    p = plan_of(env, &code);
    CHECK(p);
    CHECK_EQ(p->nvertices, 2); /* [seq] [map -> sink] */
    CHECK(strcmp(p->vertices[1].slot_group, "other") == 0);
    CHECK(strcmp(p->vertices[0].slot_group, "default") == 0);
    sl_plan_free(p);
    sl_free(p);
    sl_job_code_free(&code);
    sl_env_destroy(env);
    collected_free(c);

    /* an empty group name is refused by name when the job is built */
    env = sl_env_new();
    s = sl_from_source(env, counter_source(10, 1), sl_wm_none(), "seq");
    sl_slot_sharing_group(s, "");
    CHECK(strstr(sl_env_error(env), "slot sharing group") != NULL);
    sl_env_destroy(env);
}

static sl_buf_t good_encoding(void) {
    sl_job_code_t code;
    sl_env_t *env = build(2, "the-map", "a", "b");
    sl_plan_t *p = plan_of(env, &code);
    sl_buf_t b = {0};
    encode(p, &b);
    sl_plan_free(p);
    sl_free(p);
    sl_job_code_free(&code);
    sl_env_destroy(env);
    return b;
}

/* The good encoding with one textual replacement. */
static int decode_edited(const sl_buf_t *good, const char *from, const char *to, char *err, size_t errlen) {
    char *s = sl_strndup((const char *)good->p, good->len);
    char *at = strstr(s, from);
    if (!at) {
        snprintf(err, errlen, "test: '%s' not in the encoding", from);
        sl_free(s);
        return 1;
    }
    sl_buf_t b = {0};
    sl_buf_append(&b, s, (size_t)(at - s));
    sl_buf_append(&b, to, strlen(to));
    sl_buf_append(&b, at + strlen(from), strlen(at + strlen(from)));
    sl_plan_t *p = NULL;
    int rc = sl_plan_decode(b.p, b.len, &p, err, errlen);
    if (p) {
        sl_plan_free(p);
        sl_free(p);
    }
    sl_buf_free(&b);
    sl_free(s);
    return rc;
}

TEST(decoder_refusals) {
    sl_buf_t good = good_encoding();
    char err[512];
    struct {
        const char *from, *to, *words;
    } cases[] = {
        {"\"version\":1", "\"version\":2", "version 2, this build reads version 1"},
        {"\"version\":1", "\"version\":\"1\"", "'version' is not an integer"},
        {"\"nodes\":[0]", "\"nodes\":[9]", "is not a node of the plan"},
        {"\"partitioning\":\"REBALANCE\"", "\"partitioning\":\"SIDEWAYS\"", "unknown partitioning 'SIDEWAYS'"},
        {"\"max_parallelism\":128", "\"max_parallelism\":0", "'max_parallelism' = 0 is out of range"},
        {"\"chained\":false", "\"chained\":true", "a chained edge crosses vertices"},
        {"\"uid\":\"the-map\"", "\"uid\":\"\"", "has an empty uid"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        err[0] = 0;
        int rc = decode_edited(&good, cases[i].from, cases[i].to, err, sizeof err);
        if (rc == 0 || !strstr(err, cases[i].words)) {
            fprintf(stderr, "case %zu: rc=%d err='%s', expected '%s'\n", i, rc, err, cases[i].words);
            CHECK(0);
        }
    }
    sl_plan_t *p = NULL;
    CHECK_EQ(sl_plan_decode("not json", 8, &p, err, sizeof err), SL_EFORMAT);
    CHECK(strstr(err, "job plan: not JSON") != NULL);
    CHECK_EQ(sl_plan_decode("[1]", 3, &p, err, sizeof err), SL_EFORMAT);
    CHECK(strstr(err, "plan has no 'version'") != NULL);
    sl_buf_free(&good);
}

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static uint64_t rnd(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

TEST(decoder_mutation_fuzz) {
    sl_buf_t good = good_encoding();
    int iters = getenv("SLUICE_FUZZ_ITERS") ? atoi(getenv("SLUICE_FUZZ_ITERS")) / 10 : 20000;
    int refused = 0, accepted = 0;
    static const char alphabet[] = "{}[]\",:0123456789-truefalsn ";
    for (int it = 0; it < iters; it++) {
        sl_buf_t b = {0};
        sl_buf_append(&b, good.p, good.len);
        int nmut = 1 + (int)(rnd() % 3);
        for (int k = 0; k < nmut && b.len; k++) {
            size_t at = rnd() % b.len;
            switch (rnd() % 3) {
            case 0: b.p[at] = (uint8_t)alphabet[rnd() % (sizeof alphabet - 1)]; break;
            case 1: b.len = at; break;
            default: b.p[at] = (uint8_t)rnd(); break;
            }
        }
        sl_plan_t *p = NULL;
        char err[512];
        if (sl_plan_decode(b.p, b.len, &p, err, sizeof err) == 0) {
            accepted++;
            sl_buf_t again = {0};
            CHECK_EQ(sl_plan_encode(p, &again, err, sizeof err), 0);
            sl_plan_t *q = NULL;
            CHECK_EQ(sl_plan_decode(again.p, again.len, &q, err, sizeof err), 0); /* what was accepted is a plan */
            sl_plan_free(q);
            sl_free(q);
            sl_buf_free(&again);
            sl_plan_free(p);
            sl_free(p);
        } else {
            refused++;
            CHECK(strncmp(err, "job plan: ", 10) == 0);
        }
        sl_buf_free(&b);
    }
    fprintf(stderr, "  plan decoder fuzz: %d refused, %d accepted\n", refused, accepted);
    CHECK(refused > iters / 2);
    sl_buf_free(&good);
}

/* ---- the scheduler, against fake TaskManagers ---- */

typedef struct fake_tm {
    pthread_mutex_t mu;
    int deploys;
    int tasks[64]; /* task indexes deployed to it */
    int ntasks;
    int attempt;
    char job[64];
} fake_tm_t;

static sl_job_master_t *g_jm;

/* A TaskManager that "runs" each deployed task to FINISHED at once. */
static void fake_send(void *ctx, sl_msg_t *m) {
    fake_tm_t *f = ctx;
    if (m->type == SL_MSG_DEPLOY) {
        pthread_mutex_lock(&f->mu);
        f->deploys++;
        for (int i = 0; i < m->u.deploy.ntasks && f->ntasks < 64; i++) f->tasks[f->ntasks++] = m->u.deploy.tasks[i].index;
        f->attempt = m->u.deploy.attempt;
        pthread_mutex_unlock(&f->mu);
        for (int i = 0; i < m->u.deploy.ntasks; i++) {
            sl_msg_t *r = sl_msg_new(SL_MSG_TASK_STATE);
            r->u.task_state.job_id = sl_strdup(m->u.deploy.job_id);
            r->u.task_state.attempt = m->u.deploy.attempt;
            r->u.task_state.task = m->u.deploy.tasks[i];
            r->u.task_state.state = SL_TASK_FINISHED;
            r->u.task_state.message = sl_strdup("");
            sl_jm_handle(g_jm, r);
        }
    }
    sl_msg_destroy(m);
}

TEST(scheduler_places_groups_and_refuses_too_few_slots) {
    sl_job_code_t code;
    sl_env_t *env = build(2, "the-map", "source", "sinks"); /* groups: source {seq, map, map} x2, sinks x2 */
    sl_plan_t *p = plan_of(env, &code);
    CHECK(p);
    char err[512];
    /* 4 slots needed, 3 offered */
    sl_job_master_t *jm = NULL;
    sl_jm_config_t cfg = {.artifact = "test"};
    CHECK_EQ(sl_jm_new(p, &cfg, &jm, err, sizeof err), 0);
    g_jm = jm;
    fake_tm_t a = {.mu = PTHREAD_MUTEX_INITIALIZER}, b = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sl_jm_add_taskmanager(jm, &(sl_jm_taskmanager_t){.id = "tm-1", .slots = 2, .send = fake_send, .ctx = &a});
    sl_jm_add_taskmanager(jm, &(sl_jm_taskmanager_t){.id = "tm-2", .slots = 1, .send = fake_send, .ctx = &b});
    sl_job_result_t res;
    int rc = sl_jm_run(jm, &res);
    CHECK_EQ(rc, SL_EINVAL);
    CHECK(strstr(res.err, "needs 4 slots (2 slot sharing groups), the cluster has 3 on 2 TaskManagers") != NULL);
    CHECK_EQ(a.deploys + b.deploys, 0);
    sl_job_result_free(&res);
    sl_jm_destroy(jm);

    /* 2 + 2 slots: the source group fills tm-1, the sinks group tm-2 */
    CHECK_EQ(sl_jm_new(p, &cfg, &jm, err, sizeof err), 0);
    g_jm = jm;
    fake_tm_t c = {.mu = PTHREAD_MUTEX_INITIALIZER}, d = {.mu = PTHREAD_MUTEX_INITIALIZER};
    sl_jm_add_taskmanager(jm, &(sl_jm_taskmanager_t){.id = "tm-1", .slots = 2, .send = fake_send, .ctx = &c});
    sl_jm_add_taskmanager(jm, &(sl_jm_taskmanager_t){.id = "tm-2", .slots = 2, .send = fake_send, .ctx = &d});
    rc = sl_jm_run(jm, &res);
    CHECK_EQ(rc, 0);
    CHECK_EQ(c.deploys, 1);
    CHECK_EQ(d.deploys, 1);
    CHECK_EQ(c.ntasks + d.ntasks, p->ntasks);
    for (int i = 0; i < c.ntasks; i++) CHECK(strcmp(p->vertices[sl_plan_task_vertex(p, c.tasks[i], NULL)].slot_group, "source") == 0);
    for (int i = 0; i < d.ntasks; i++) CHECK(strcmp(p->vertices[sl_plan_task_vertex(p, d.tasks[i], NULL)].slot_group, "sinks") == 0);
    sl_job_result_free(&res);
    sl_jm_destroy(jm);
    sl_plan_free(p);
    sl_free(p);
    sl_job_code_free(&code);
    sl_env_destroy(env);
}

TEST(handshake) {
    sl_auth_hello_t c, s, cp, sp;
    uint8_t cw[SL_AUTH_HELLO_LEN], sw[SL_AUTH_HELLO_LEN], proof[SL_AUTH_PROOF_LEN];
    char err[256];
    CHECK_EQ(sl_auth_hello_make(&c, SL_AUTH_DATA, 0, cw), 0);
    CHECK_EQ(sl_auth_hello_make(&s, SL_AUTH_DATA, 1, sw), 0);
    CHECK_EQ(sl_auth_hello_parse(cw, 1, &cp, err, sizeof err), 0);
    CHECK_EQ(sl_auth_hello_parse(sw, 0, &sp, err, sizeof err), 0);
    sl_auth_proof("s3cret", &c, &sp, proof);                /* the client proves ... */
    CHECK(sl_auth_check("s3cret", &s, &cp, proof));        /* ... and the server accepts */
    CHECK(!sl_auth_check("other", &s, &cp, proof));        /* a wrong secret */
    uint8_t bad[SL_AUTH_PROOF_LEN];
    memcpy(bad, proof, sizeof bad);
    bad[7] ^= 1;
    CHECK(!sl_auth_check("s3cret", &s, &cp, bad));
    sl_auth_proof("s3cret", &s, &cp, proof);                /* a server's proof is not a client's */
    CHECK(!sl_auth_check("s3cret", &s, &cp, proof));
    CHECK(sl_auth_hello_parse(cw, 0, &cp, err, sizeof err) < 0); /* both claim to be clients */
    CHECK(strstr(err, "role") != NULL);
    cw[0] ^= 0xff;
    CHECK(sl_auth_hello_parse(cw, 1, &cp, err, sizeof err) < 0);
    CHECK(strstr(err, "not a sluice peer") != NULL);
    cw[0] ^= 0xff;
    cw[4] = 9;
    CHECK(sl_auth_hello_parse(cw, 1, &cp, err, sizeof err) < 0);
    CHECK(strstr(err, "version 9") != NULL);
}

/* src -> [filter] -> map -> map -> sink, and optionally a second branch
 * src -> map -> sink2 added after it; parallelism p. */
static sl_env_t *uid_job(int p, bool insert_filter, bool branch) {
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, p);
    collected_t *c = collected_new();
    sl_env_own(env, c, (void (*)(void *))collected_free);
    sl_stream_t *s = sl_from_source(env, counter_source(100, 1), sl_wm_none(), "seq");
    sl_stream_t *x = insert_filter ? sl_map(s, noop_map, NULL, NULL) : s;
    sl_stream_t *m1 = sl_map(x, noop_map, NULL, NULL), *m2 = sl_map(m1, noop_map, NULL, NULL);
    sl_sink_to(m2, collect_sink(c), "sink");
    if (branch) sl_sink_to(sl_map(s, noop_map, NULL, NULL), collect_sink(c), "sink");
    return env;
}

static void uids_of(sl_env_t *env, char out[][64], int cap) {
    sl_job_code_t code;
    sl_plan_t *p = plan_of(env, &code);
    for (int i = 0; i < p->nnodes && i < cap; i++) snprintf(out[i], 64, "%s", p->nodes[i].uid);
    sl_plan_free(p);
    sl_free(p);
    sl_job_code_free(&code);
    sl_env_destroy(env);
}

/* A derived uid depends on the node's place in the graph: not on
 * parallelism, not on a branch added elsewhere; it changes when what is
 * upstream changes; equal-looking siblings get different ones. */
TEST(derived_uids_are_stable) {
    char a[8][64], b[8][64], c[8][64];
    uids_of(uid_job(2, false, false), a, 8); /* seq, map, map, sink */
    uids_of(uid_job(4, false, true), b, 8);  /* the same, then map, sink */
    uids_of(uid_job(2, true, false), c, 8);  /* seq, map (inserted), map, map, sink */
    for (int i = 0; i < 4; i++) CHECK(strcmp(a[i], b[i]) == 0);
    CHECK(strcmp(b[4], a[1]) != 0); /* the branch's map reads seq too, like a[1]: an index tells them apart */
    CHECK(strcmp(b[5], a[3]) != 0); /* two sinks named "sink" */
    CHECK(strcmp(c[0], a[0]) == 0);
    CHECK(strcmp(c[2], a[1]) != 0 && strcmp(c[3], a[2]) != 0 && strcmp(c[4], a[3]) != 0);
    CHECK(strncmp(a[1], "map-", 4) == 0);
}

int main(void) {
    RUN(round_trip_and_topology);
    RUN(derived_uids_are_stable);
    RUN(fingerprint_follows_what_runs);
    RUN(typed_state_schemas_in_the_plan);
    RUN(slot_sharing_groups);
    RUN(decoder_refusals);
    RUN(decoder_mutation_fuzz);
    RUN(scheduler_places_groups_and_refuses_too_few_slots);
    RUN(handshake);
    return sl_test_failures ? 1 : 0;
}
