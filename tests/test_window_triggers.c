/* test_window_triggers.c — triggers against a mock trigger context. */
#include "test.h"
#include "common/common.h"
#include "windowing/window.h"

typedef struct timer_ev {
    bool reg; /* else delete */
    sl_time_domain_t d;
    int64_t ts;
    sl_window_t w;
} timer_ev_t;

typedef struct st_ent {
    int slot;
    sl_window_t w;
    int64_t v;
    bool used;
} st_ent_t;

typedef struct mock {
    sl_trigger_ctx_t c; /* first */
    int64_t now;
    timer_ev_t ev[64];
    int nev;
    st_ent_t st[16];
} mock_t;

static void m_timer(sl_trigger_ctx_t *c, sl_time_domain_t d, int64_t ts, bool reg) {
    mock_t *m = (mock_t *)c;
    if (m->nev < 64) m->ev[m->nev++] = (timer_ev_t){reg, d, ts, c->window};
}
static void m_reg(sl_trigger_ctx_t *c, sl_time_domain_t d, int64_t ts) { m_timer(c, d, ts, true); }
static void m_del(sl_trigger_ctx_t *c, sl_time_domain_t d, int64_t ts) { m_timer(c, d, ts, false); }
static int64_t m_now(sl_trigger_ctx_t *c) { return ((mock_t *)c)->now; }

static st_ent_t *m_find(mock_t *m, int slot, const sl_window_t *w) {
    for (int i = 0; i < 16; i++)
        if (m->st[i].used && m->st[i].slot == slot && sl_window_eq(&m->st[i].w, w)) return &m->st[i];
    return NULL;
}
static bool m_get(sl_trigger_ctx_t *c, int slot, const sl_window_t *w, int64_t *v) {
    st_ent_t *e = m_find((mock_t *)c, slot, w);
    if (e) *v = e->v;
    return e != NULL;
}
static int64_t m_add(sl_trigger_ctx_t *c, int slot, const sl_window_t *w, int64_t d) {
    mock_t *m = (mock_t *)c;
    st_ent_t *e = m_find(m, slot, w);
    for (int i = 0; !e && i < 16; i++)
        if (!m->st[i].used) {
            e = &m->st[i];
            *e = (st_ent_t){slot, *w, 0, true};
        }
    e->v += d;
    return e->v;
}
static void m_clear(sl_trigger_ctx_t *c, int slot, const sl_window_t *w) {
    st_ent_t *e = m_find((mock_t *)c, slot, w);
    if (e) e->used = false;
}
static int m_nstate(mock_t *m) {
    int n = 0;
    for (int i = 0; i < 16; i++) n += m->st[i].used;
    return n;
}

static const sl_trigger_ctx_ops_t mock_ops = {m_reg, m_del, m_now, m_get, m_add, m_clear};

static void mock_init(mock_t *m, int64_t start, int64_t end, int64_t wm) {
    memset(m, 0, sizeof *m);
    m->c.ops = &mock_ops;
    m->c.window.start = start;
    m->c.window.end = end;
    m->c.watermark = wm;
}

TEST(event_time_trigger) {
    sl_trigger_t *t = sl_trigger_event_time();
    mock_t m;
    mock_init(&m, 0, 10, 5);
    /* ahead of the watermark: a timer at the max timestamp */
    CHECK_EQ(sl_trigger_on_element(t, &m.c, 3), SL_TRIGGER_CONTINUE);
    CHECK_EQ(m.nev, 1);
    CHECK(m.ev[0].reg);
    CHECK_EQ(m.ev[0].d, SL_TIME_EVENT);
    CHECK_EQ(m.ev[0].ts, 9);
    CHECK_EQ(m.ev[0].w.end, 10);
    /* the watermark reached the max timestamp: fire at once, no timer */
    m.c.watermark = 9;
    CHECK_EQ(sl_trigger_on_element(t, &m.c, 3), SL_TRIGGER_FIRE);
    CHECK_EQ(m.nev, 1);
    m.c.watermark = 100;
    CHECK_EQ(sl_trigger_on_element(t, &m.c, 3), SL_TRIGGER_FIRE);
    /* timers: only the max timestamp fires it */
    CHECK_EQ(sl_trigger_on_event_time(t, &m.c, 9), SL_TRIGGER_FIRE);
    CHECK_EQ(sl_trigger_on_event_time(t, &m.c, 14), SL_TRIGGER_CONTINUE);
    CHECK_EQ(sl_trigger_on_event_time(t, &m.c, 8), SL_TRIGGER_CONTINUE);
    CHECK_EQ(sl_trigger_on_processing_time(t, &m.c, 9), SL_TRIGGER_CONTINUE);
    /* clear deletes the timer */
    m.nev = 0;
    sl_trigger_clear(t, &m.c);
    CHECK_EQ(m.nev, 1);
    CHECK(!m.ev[0].reg);
    CHECK_EQ(m.ev[0].d, SL_TIME_EVENT);
    CHECK_EQ(m.ev[0].ts, 9);
    /* merge: a timer only when still ahead of the watermark */
    sl_window_t merged[2] = {{0, 5}, {6, 10}};
    m.nev = 0;
    m.c.watermark = 8;
    sl_trigger_on_merge(t, &m.c, merged, 2);
    CHECK_EQ(m.nev, 1);
    CHECK(m.ev[0].reg);
    CHECK_EQ(m.ev[0].ts, 9);
    m.nev = 0;
    m.c.watermark = 9;
    sl_trigger_on_merge(t, &m.c, merged, 2);
    CHECK_EQ(m.nev, 0);
    sl_trigger_free(t);
}

TEST(processing_time_trigger) {
    sl_trigger_t *t = sl_trigger_processing_time();
    mock_t m;
    mock_init(&m, 100, 200, 1000000);
    m.now = 150;
    CHECK_EQ(sl_trigger_on_element(t, &m.c, SL_NO_TIMESTAMP), SL_TRIGGER_CONTINUE);
    CHECK_EQ(m.nev, 1);
    CHECK(m.ev[0].reg);
    CHECK_EQ(m.ev[0].d, SL_TIME_PROCESSING);
    CHECK_EQ(m.ev[0].ts, 199);
    CHECK_EQ(sl_trigger_on_processing_time(t, &m.c, 199), SL_TRIGGER_FIRE);
    CHECK_EQ(sl_trigger_on_event_time(t, &m.c, 199), SL_TRIGGER_CONTINUE);
    m.nev = 0;
    sl_trigger_clear(t, &m.c);
    CHECK_EQ(m.nev, 1);
    CHECK(!m.ev[0].reg);
    CHECK_EQ(m.ev[0].d, SL_TIME_PROCESSING);
    m.nev = 0;
    sl_trigger_on_merge(t, &m.c, NULL, 0);
    CHECK_EQ(m.nev, 1);
    CHECK_EQ(m.ev[0].ts, 199);
    m.nev = 0;
    m.now = 199;
    sl_trigger_on_merge(t, &m.c, NULL, 0);
    CHECK_EQ(m.nev, 0);
    sl_trigger_free(t);
}

TEST(count_trigger) {
    sl_trigger_t *t = sl_trigger_count(3);
    CHECK_EQ(sl_trigger_assign_slots(t, 0), 1);
    CHECK_EQ(t->slot, 0);
    mock_t m;
    mock_init(&m, 0, 10, SL_MIN_WATERMARK);
    CHECK_EQ(sl_trigger_on_element(t, &m.c, 1), SL_TRIGGER_CONTINUE);
    CHECK_EQ(sl_trigger_on_element(t, &m.c, 2), SL_TRIGGER_CONTINUE);
    int64_t v = 0;
    CHECK(m_get(&m.c, 0, &m.c.window, &v));
    CHECK_EQ(v, 2);
    CHECK_EQ(sl_trigger_on_element(t, &m.c, 3), SL_TRIGGER_FIRE);
    CHECK_EQ(m_nstate(&m), 0); /* reset at n */
    CHECK_EQ(sl_trigger_on_element(t, &m.c, 4), SL_TRIGGER_CONTINUE);
    CHECK_EQ(m.nev, 0); /* no timers */
    CHECK_EQ(sl_trigger_on_event_time(t, &m.c, 9), SL_TRIGGER_CONTINUE);
    CHECK_EQ(sl_trigger_on_processing_time(t, &m.c, 9), SL_TRIGGER_CONTINUE);
    /* counts are per window */
    sl_trigger_ctx_t saved = m.c;
    m.c.window.start = 10;
    m.c.window.end = 20;
    CHECK_EQ(sl_trigger_on_element(t, &m.c, 11), SL_TRIGGER_CONTINUE);
    CHECK_EQ(m_nstate(&m), 2);
    sl_trigger_clear(t, &m.c);
    CHECK_EQ(m_nstate(&m), 1);
    m.c = saved;
    sl_trigger_clear(t, &m.c);
    CHECK_EQ(m_nstate(&m), 0);
    sl_trigger_free(t);
}

TEST(count_trigger_merge_sums) {
    sl_trigger_t *t = sl_trigger_count(4);
    sl_trigger_assign_slots(t, 0);
    mock_t m;
    mock_init(&m, 0, 10, SL_MIN_WATERMARK);
    sl_window_t a = {0, 10}, b = {12, 22}, r = {0, 22};
    m.c.window = a;
    sl_trigger_on_element(t, &m.c, 1);
    m.c.window = b;
    sl_trigger_on_element(t, &m.c, 12);
    sl_trigger_on_element(t, &m.c, 13);
    sl_window_t merged[2] = {a, b};
    m.c.window = r;
    sl_trigger_on_merge(t, &m.c, merged, 2);
    int64_t v = 0;
    CHECK(m_get(&m.c, 0, &r, &v));
    CHECK_EQ(v, 3);
    CHECK(!m_get(&m.c, 0, &a, &v));
    CHECK(!m_get(&m.c, 0, &b, &v));
    CHECK_EQ(sl_trigger_on_element(t, &m.c, 5), SL_TRIGGER_FIRE);
    /* merging windows without counts creates nothing */
    sl_window_t none[1] = {{50, 60}};
    sl_trigger_on_merge(t, &m.c, none, 1);
    CHECK_EQ(m_nstate(&m), 0);
    sl_trigger_free(t);
}

TEST(purging_trigger) {
    sl_trigger_t *t = sl_trigger_purging(sl_trigger_count(2));
    CHECK_EQ(sl_trigger_assign_slots(t, 5), 6);
    CHECK_EQ(t->inner->slot, 5);
    mock_t m;
    mock_init(&m, 0, 10, SL_MIN_WATERMARK);
    CHECK_EQ(sl_trigger_on_element(t, &m.c, 1), SL_TRIGGER_CONTINUE);
    CHECK_EQ(sl_trigger_on_element(t, &m.c, 2), SL_TRIGGER_FIRE_AND_PURGE);
    CHECK_EQ(sl_trigger_on_element(t, &m.c, 3), SL_TRIGGER_CONTINUE);
    CHECK_EQ(m_nstate(&m), 1);
    sl_trigger_clear(t, &m.c); /* delegates */
    CHECK_EQ(m_nstate(&m), 0);
    sl_trigger_free(t);

    t = sl_trigger_purging(sl_trigger_event_time());
    mock_init(&m, 0, 10, 5);
    CHECK_EQ(sl_trigger_on_element(t, &m.c, 1), SL_TRIGGER_CONTINUE);
    CHECK_EQ(m.nev, 1);
    CHECK_EQ(sl_trigger_on_event_time(t, &m.c, 9), SL_TRIGGER_FIRE_AND_PURGE);
    CHECK_EQ(sl_trigger_on_event_time(t, &m.c, 12), SL_TRIGGER_CONTINUE);
    m.c.watermark = 12;
    CHECK_EQ(sl_trigger_on_element(t, &m.c, 1), SL_TRIGGER_FIRE_AND_PURGE);
    m.nev = 0;
    m.c.watermark = 0;
    sl_trigger_on_merge(t, &m.c, NULL, 0);
    CHECK_EQ(m.nev, 1);
    CHECK(m.ev[0].reg);
    sl_trigger_clear(t, &m.c);
    CHECK_EQ(m.nev, 2);
    CHECK(!m.ev[1].reg);
    sl_trigger_free(t);

    t = sl_trigger_purging(sl_trigger_processing_time());
    mock_init(&m, 0, 10, 0);
    CHECK_EQ(sl_trigger_on_processing_time(t, &m.c, 9), SL_TRIGGER_FIRE_AND_PURGE);
    CHECK_EQ(sl_trigger_on_event_time(t, &m.c, 9), SL_TRIGGER_CONTINUE);
    sl_trigger_free(t);
}

TEST(validate_describe_clone) {
    char err[256], buf[256];
    sl_trigger_t *t = sl_trigger_count(0);
    CHECK(sl_trigger_validate(t, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "CountTrigger(0)");
    sl_trigger_free(t);
    t = sl_trigger_purging(NULL);
    CHECK(sl_trigger_validate(t, err, sizeof err) < 0);
    CHECK_CONTAINS(err, "PurgingTrigger");
    sl_trigger_free(t);
    t = sl_trigger_purging(sl_trigger_count(-2));
    CHECK(sl_trigger_validate(t, err, sizeof err) < 0);
    sl_trigger_free(t);
    CHECK(sl_trigger_validate(NULL, err, sizeof err) < 0);

    t = sl_trigger_purging(sl_trigger_count(3));
    CHECK_EQ(sl_trigger_validate(t, err, sizeof err), 0);
    sl_trigger_describe(t, buf, sizeof buf);
    CHECK_STR(buf, "PurgingTrigger(CountTrigger(3))");
    sl_trigger_t *c = sl_trigger_clone(t);
    CHECK(c != t && c->inner != t->inner);
    CHECK_EQ(c->inner->count, 3);
    sl_trigger_free(t);
    sl_trigger_describe(c, buf, sizeof buf);
    CHECK_STR(buf, "PurgingTrigger(CountTrigger(3))");
    sl_trigger_free(c);
    t = sl_trigger_event_time();
    sl_trigger_describe(t, buf, sizeof buf);
    CHECK_STR(buf, "EventTimeTrigger");
    CHECK_EQ(sl_trigger_assign_slots(t, 0), 0);
    sl_trigger_free(t);
    t = sl_trigger_processing_time();
    sl_trigger_describe(t, buf, sizeof buf);
    CHECK_STR(buf, "ProcessingTimeTrigger");
    sl_trigger_free(t);
}

int main(void) {
    RUN(event_time_trigger);
    RUN(processing_time_trigger);
    RUN(count_trigger);
    RUN(count_trigger_merge_sums);
    RUN(purging_trigger);
    RUN(validate_describe_clone);
    TEST_MAIN_END();
}
