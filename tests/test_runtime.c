/* test_runtime.c — unit tests of the runtime's parts: bounded channels,
 * the watermark valve with idleness, partitioners, key groups spread and
 * chaining decisions. */
#include <pthread.h>

#include "api/env_int.h"
#include "common/common.h"
#include "graph/job_graph.h"
#include "pipeline_util.h"
#include "taskmanager/channel.h"
#include "taskmanager/mailbox.h"
#include "taskmanager/record_writer.h"
#include "taskmanager/watermark_valve.h"
#include "test.h"

/* ---- channel ---- */

typedef struct {
    sl_channel_t *ch;
    int n;
    int64_t sum;
} prod_t;

static void *producer(void *arg) {
    prod_t *p = arg;
    for (int i = 0; i < p->n; i++) {
        sl_nbuf_t *b = sl_channel_acquire(p->ch, 8);
        if (!b) return NULL;
        sl_st64(b->data, (uint64_t)i);
        b->len = 8;
        sl_channel_send(p->ch, b);
    }
    return NULL;
}

TEST(channel_bounded_fifo) {
    sl_waker_t wk;
    sl_waker_init(&wk);
    sl_channel_t *ch = sl_channel_new(3, 64, &wk);
    prod_t p = {ch, 20000, 0};
    pthread_t th;
    pthread_create(&th, NULL, producer, &p);
    int next = 0, max_in_flight = 0;
    while (next < p.n) {
        sl_nbuf_t *b = sl_channel_poll(ch);
        if (!b) {
            sl_waker_wait(&wk, sl_mono_ns() + 1000000);
            continue;
        }
        int inflight = sl_channel_in_flight(ch);
        if (inflight > max_in_flight) max_in_flight = inflight;
        CHECK_EQ((int64_t)sl_ld64(b->data), next);
        next++;
        sl_channel_recycle(ch, b);
    }
    pthread_join(th, NULL);
    CHECK(max_in_flight <= 3);
    sl_channel_destroy(ch);
    sl_waker_destroy(&wk);
}

TEST(channel_cancel_unblocks_producer) {
    sl_waker_t wk;
    sl_waker_init(&wk);
    sl_channel_t *ch = sl_channel_new(1, 64, &wk);
    prod_t p = {ch, 100, 0};
    pthread_t th;
    pthread_create(&th, NULL, producer, &p); /* blocks after the first buffer */
    struct timespec ts = {0, 20000000};
    nanosleep(&ts, NULL);
    sl_channel_cancel(ch);
    pthread_join(th, NULL); /* returns: acquire gave NULL */
    CHECK(sl_channel_acquire(ch, 8) == NULL);
    sl_channel_destroy(ch);
    sl_waker_destroy(&wk);
}

TEST(channel_oversized_record) {
    sl_waker_t wk;
    sl_waker_init(&wk);
    sl_channel_t *ch = sl_channel_new(1, 64, &wk);
    sl_nbuf_t *b = sl_channel_acquire(ch, 1000);
    CHECK(b->cap >= 1000);
    b->len = 1000;
    sl_channel_send(ch, b);
    b = sl_channel_poll(ch);
    CHECK(b != NULL);
    sl_channel_recycle(ch, b);
    b = sl_channel_acquire(ch, 8);
    CHECK_EQ(b->cap, 64); /* shrunk back: memory stays bounded */
    sl_channel_recycle(ch, b);
    sl_channel_destroy(ch);
    sl_waker_destroy(&wk);
}

/* ---- mailbox: mail from many threads runs in order on the owner ---- */

typedef struct {
    sl_mailbox_t *m;
    int id;
} poster_t;
static int64_t mail_seen[4];
static int mail_order_ok = 1;
static pthread_t mail_owner;

static void mail_fn(void *owner, void *arg) {
    intptr_t v = (intptr_t)arg;
    int id = (int)(v >> 20), seq = (int)(v & 0xfffff);
    if (!pthread_equal(pthread_self(), mail_owner) || seq != mail_seen[id]) mail_order_ok = 0;
    mail_seen[id]++;
}

static void *poster(void *arg) {
    poster_t *p = arg;
    for (intptr_t i = 0; i < 5000; i++) sl_mailbox_post(p->m, mail_fn, (void *)(((intptr_t)p->id << 20) | i));
    return NULL;
}

TEST(mailbox_order_and_owner) {
    sl_waker_t wk;
    sl_waker_init(&wk);
    sl_mailbox_t m;
    sl_mailbox_init(&m, &wk);
    mail_owner = pthread_self();
    pthread_t th[4];
    poster_t ps[4];
    for (int i = 0; i < 4; i++) {
        ps[i].m = &m;
        ps[i].id = i;
        pthread_create(&th[i], NULL, poster, &ps[i]);
    }
    int64_t ran = 0;
    while (ran < 20000) {
        int n = sl_mailbox_drain(&m, NULL);
        if (!n) sl_waker_wait(&wk, sl_mono_ns() + 1000000);
        ran += n;
    }
    for (int i = 0; i < 4; i++) pthread_join(th[i], NULL);
    CHECK_EQ(ran, 20000);
    CHECK(mail_order_ok);
    for (int i = 0; i < 4; i++) CHECK_EQ(mail_seen[i], 5000);
    CHECK_EQ(sl_mailbox_drain(&m, NULL), 0);
    sl_mailbox_post(&m, mail_fn, NULL); /* never run: destroy frees it */
    sl_mailbox_destroy(&m);
    sl_waker_destroy(&wk);
}

/* ---- valve ---- */

typedef struct {
    int64_t wms[64];
    int nwm;
    int statuses[64];
    int nst;
} vout_t;
static void v_wm(void *c, int64_t wm) {
    vout_t *o = c;
    o->wms[o->nwm++] = wm;
}
static void v_st(void *c, bool idle) {
    vout_t *o = c;
    o->statuses[o->nst++] = idle;
}

TEST(valve_minimum) {
    vout_t o = {0};
    sl_valve_t v;
    sl_valve_init(&v, 3, v_wm, v_st, &o);
    sl_valve_watermark(&v, 0, 10);
    sl_valve_watermark(&v, 1, 5);
    CHECK_EQ(o.nwm, 0); /* channel 2 has none yet */
    sl_valve_watermark(&v, 2, 7);
    CHECK_EQ(o.nwm, 1);
    CHECK_EQ(o.wms[0], 5);
    sl_valve_watermark(&v, 1, 20);
    CHECK_EQ(o.wms[o.nwm - 1], 7);
    sl_valve_watermark(&v, 1, 15); /* backwards on a channel: ignored */
    CHECK_EQ(o.nwm, 2);
    sl_valve_watermark(&v, 2, 30);
    CHECK_EQ(o.wms[o.nwm - 1], 10);
    sl_valve_free(&v);
}

TEST(valve_idleness) {
    vout_t o = {0};
    sl_valve_t v;
    sl_valve_init(&v, 2, v_wm, v_st, &o);
    sl_valve_watermark(&v, 0, 100);
    CHECK_EQ(o.nwm, 0); /* channel 1 holds the minimum back */
    sl_valve_status(&v, 1, true);
    CHECK_EQ(o.nwm, 1); /* idle channel left out */
    CHECK_EQ(o.wms[0], 100);
    CHECK_EQ(o.nst, 0);
    sl_valve_watermark(&v, 0, 150);
    CHECK_EQ(o.wms[o.nwm - 1], 150);
    /* channel 1 comes back behind the output: it must not pull it back */
    sl_valve_status(&v, 1, false);
    sl_valve_watermark(&v, 1, 120);
    sl_valve_watermark(&v, 0, 200);
    CHECK_EQ(o.wms[o.nwm - 1], 200); /* 1 not aligned yet: only 0 counts */
    sl_valve_watermark(&v, 1, 180);
    sl_valve_watermark(&v, 0, 300);
    CHECK_EQ(o.wms[o.nwm - 1], 300);
    sl_valve_watermark(&v, 1, 250); /* caught up? 250 < 300: still not aligned */
    sl_valve_watermark(&v, 1, 310); /* now aligned: min(300, 310) = 300, no change */
    sl_valve_watermark(&v, 0, 400);
    CHECK_EQ(o.wms[o.nwm - 1], 310);
    for (int i = 1; i < o.nwm; i++) CHECK(o.wms[i] > o.wms[i - 1]); /* never decreases */
    /* all idle: emits the max seen and goes idle; active again on return */
    sl_valve_status(&v, 0, true);
    sl_valve_status(&v, 1, true);
    CHECK_EQ(o.nst, 1);
    CHECK_EQ(o.statuses[0], 1);
    CHECK_EQ(o.wms[o.nwm - 1], 400);
    sl_valve_status(&v, 0, false);
    CHECK_EQ(o.nst, 2);
    CHECK_EQ(o.statuses[1], 0);
    sl_valve_free(&v);
}

/* ---- partitioners ---- */

TEST(partitioners) {
    sl_schema_t *s = sl_schema_parse("k BIGINT NOT NULL", NULL, 0);
    sl_row_writer_t w;
    sl_rw_init(&w);
    uint8_t keybuf[SL_MAX_KEY_LEN];
    sl_key_selector_t ks = {0, NULL, NULL};
    int rr = 0;
    int counts[4] = {0};
    for (int64_t k = 0; k < 40000; k++) {
        sl_rw_begin(&w, s);
        sl_rw_set_i64(&w, 0, k % 1000);
        sl_row_t r = sl_rw_row(&w);
        int c = sl_partition_select(SL_PLAN_HASH, &ks, 128, 4, &r, &rr, keybuf);
        CHECK(c >= 0 && c < 4);
        /* the same key always goes to the same channel, and that channel
         * owns the key's key group */
        uint32_t len;
        const uint8_t *kb = sl_row_field_key(&r, 0, &len);
        int kg = sl_kg_of_hash(sl_kg_key_hash(kb, len), 128);
        sl_kg_range_t range = sl_kg_range_for(128, 4, c);
        CHECK(kg >= range.start && kg < range.end);
        counts[c]++;
    }
    for (int i = 0; i < 4; i++) CHECK(counts[i] > 6000); /* roughly even */
    rr = 1;
    sl_row_t r = sl_rw_row(&w);
    CHECK_EQ(sl_partition_select(SL_PLAN_REBALANCE, &ks, 128, 3, &r, &rr, keybuf), 1);
    CHECK_EQ(sl_partition_select(SL_PLAN_REBALANCE, &ks, 128, 3, &r, &rr, keybuf), 2);
    CHECK_EQ(sl_partition_select(SL_PLAN_REBALANCE, &ks, 128, 3, &r, &rr, keybuf), 0);
    CHECK_EQ(sl_partition_select(SL_PLAN_BROADCAST, &ks, 128, 3, &r, &rr, keybuf), -1);
    CHECK_EQ(sl_partition_select(SL_PLAN_FORWARD, &ks, 128, 1, &r, &rr, keybuf), 0);
    sl_rw_free(&w);
    sl_schema_unref(s);
}

/* ---- chaining ---- */

static int id_map(void *ctx, const sl_record_t *in, sl_row_writer_t *out) {
    sl_rw_copy_row(out, &in->row);
    return 0;
}

TEST(chaining_rules) {
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 2);
    sl_stream_t *s = sl_from_source(env, counter_source(10, 1), sl_wm_none(), "src");
    sl_stream_t *m1 = sl_map(s, id_map, NULL, NULL);                    /* chains to source */
    sl_stream_t *m2 = sl_map(sl_rebalance(m1), id_map, NULL, NULL);     /* new vertex */
    sl_stream_t *m3 = sl_parallelism(sl_map(m2, id_map, NULL, NULL), 3); /* parallelism differs */
    sl_stream_t *m4 = sl_start_new_chain(sl_map(m3, id_map, NULL, NULL));
    sl_stream_t *k = sl_keyed_process(sl_key_by(m4, "id"), (sl_process_fn_t){.process = NULL}, NULL);
    CHECK(k == NULL); /* no process callback: builder error */
    sl_sink_to(m4, collect_sink(NULL), "sink");                          /* chains to m4 */
    sl_job_graph_t jg;
    char err[256];
    CHECK_EQ(sl_job_graph_build(env, &jg, err, sizeof err), 0);
    CHECK_EQ(jg.nv, 4);
    CHECK_STR(jg.v[0].name, "Source: src -> Map");
    CHECK_EQ(jg.v[2].parallelism, 3);
    CHECK_STR(jg.v[3].name, "Map -> Sink: sink");
    sl_job_graph_free(&jg);
    sl_env_destroy(env);
}

TEST(max_parallelism_default) {
    sl_env_t *env = sl_env_new();
    sl_env_set_parallelism(env, 200);
    sl_from_source(env, counter_source(10, 1), sl_wm_none(), "src");
    CHECK_EQ(sl_env_max_parallelism(env), 512); /* 200 + 100 -> 512 */
    sl_env_set_max_parallelism(env, 100);
    sl_job_graph_t jg;
    char err[256];
    CHECK(sl_job_graph_build(env, &jg, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "exceeds the max parallelism 100");
    sl_job_graph_free(&jg);
    sl_env_destroy(env);
}

int main(void) {
    RUN(channel_bounded_fifo);
    RUN(channel_cancel_unblocks_producer);
    RUN(channel_oversized_record);
    RUN(mailbox_order_and_owner);
    RUN(valve_minimum);
    RUN(valve_idleness);
    RUN(partitioners);
    RUN(chaining_rules);
    RUN(max_parallelism_default);
    TEST_MAIN_END();
}
