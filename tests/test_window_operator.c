/*
 * test_window_operator.c — the window operator driven directly: records in
 * through vt->process, watermarks through sl_op_watermark, processing
 * time through sl_op_test_set_now + vt->on_processing_time; every emitted
 * result and late record is captured and checked.
 */
#include "test.h"
#include "common/common.h"
#include "windowing/window.h"

static sl_schema_t *g_in;       /* card BIGINT NOT NULL, amount DOUBLE */
static sl_schema_t *g_in_str;   /* card BIGINT NOT NULL, name VARCHAR, amount DOUBLE */
static sl_schema_t *g_agg_out;  /* card, wstart, wend, cnt, sum */
static sl_schema_t *g_proc_out; /* card, n, sum, digits, first_ts */

/* ---- capturing output ---- */

typedef struct cap_rec {
    int tag;
    int64_t ts;
    uint8_t *data;
    uint32_t len;
    const sl_schema_t *schema;
} cap_rec_t;

typedef struct cap {
    sl_op_output_t out; /* first */
    cap_rec_t recs[512];
    int n;
    int64_t wms[64];
    int wm_after[64]; /* number of records captured before this watermark */
    int nwm;
} cap_t;

static void cap_record(sl_op_output_t *o, int tag, const sl_record_t *rec) {
    cap_t *c = (cap_t *)o;
    if (c->n == 512) abort();
    cap_rec_t *r = &c->recs[c->n++];
    r->tag = tag;
    r->ts = rec->ts;
    r->len = rec->row.len;
    r->data = malloc(rec->row.len ? rec->row.len : 1);
    memcpy(r->data, rec->row.data, rec->row.len);
    r->schema = rec->row.schema;
}

static void cap_watermark(sl_op_output_t *o, int64_t wm) {
    cap_t *c = (cap_t *)o;
    if (c->nwm == 64) abort();
    c->wm_after[c->nwm] = c->n;
    c->wms[c->nwm++] = wm;
}

static void cap_status(sl_op_output_t *o, bool idle) { (void)o, (void)idle; }

static sl_row_t row_of(const cap_rec_t *r) {
    sl_row_t row = {r->data, r->len, r->schema};
    return row;
}

/* ---- harness ---- */

typedef struct h {
    cap_t out;
    sl_key_selector_t ks;
    sl_tag_t tagv[2];
    sl_tag_table_t tags;
    sl_op_init_t init;
    sl_window_spec_t *spec;
    sl_operator_t *op;
    sl_row_writer_t w;
    const sl_schema_t *in;
} h_t;

static h_t H; /* one per test */

static int h_open(sl_window_spec_t *spec, const sl_schema_t *in, const sl_schema_t *out) {
    memset(&H, 0, sizeof H);
    H.out.out.record = cap_record;
    H.out.out.watermark = cap_watermark;
    H.out.out.status = cap_status;
    H.ks.field = 0;
    H.tagv[1].name = (char *)"late";
    H.tagv[1].schema = (sl_schema_t *)in;
    H.tags.tags = H.tagv;
    H.tags.n = 2;
    H.init.subtask = 0;
    H.init.parallelism = 1;
    H.init.max_parallelism = 128;
    H.init.ninputs = 1;
    H.init.key[0] = &H.ks;
    H.init.in_schema[0] = in;
    H.init.out_schema = out;
    H.init.tags = &H.tags;
    H.init.name = "Window(test)";
    H.init.ctx = NULL;
    H.spec = spec;
    H.in = in;
    H.op = sl_window_op_create(spec, &H.init);
    H.op->out = &H.out.out;
    sl_rw_init(&H.w);
    return H.op->vt->open(H.op);
}

static void h_close(void) {
    H.op->vt->destroy(H.op);
    sl_window_spec_free(H.spec);
    for (int i = 0; i < H.out.n; i++) free(H.out.recs[i].data);
    sl_rw_free(&H.w);
}

static int feed(int64_t card, double amount, int64_t ts) {
    sl_rw_begin(&H.w, g_in);
    sl_rw_set_i64(&H.w, 0, card);
    sl_rw_set_f64(&H.w, 1, amount);
    sl_record_t rec = {sl_rw_row(&H.w), ts};
    return H.op->vt->process(H.op, 0, &rec);
}

static int feed_str(int64_t card, const char *name, double amount, int64_t ts) {
    sl_rw_begin(&H.w, g_in_str);
    sl_rw_set_i64(&H.w, 0, card);
    sl_rw_set_str(&H.w, 1, name, (uint32_t)strlen(name));
    sl_rw_set_f64(&H.w, 2, amount);
    sl_record_t rec = {sl_rw_row(&H.w), ts};
    return H.op->vt->process(H.op, 0, &rec);
}

static int wm(int64_t w) { return sl_op_watermark(H.op, 0, w); }

static int nmain(void) {
    int n = 0;
    for (int i = 0; i < H.out.n; i++) n += H.out.recs[i].tag == 0;
    return n;
}

static int nlate(void) {
    int n = 0;
    for (int i = 0; i < H.out.n; i++) n += H.out.recs[i].tag == 1;
    return n;
}

/* Entries over every state of the operator's backend. */
static int64_t state_entries(void) {
    int64_t n = 0;
    for (int sid = 0; sid < 8; sid++) {
        int64_t c = H.op->kb->ops->count(H.op->kb, sid);
        if (c > 0) n += c;
    }
    return n;
}

static int64_t ntimers(void) { return sl_window_op_pending_timers(H.op); }

/* ---- functions ---- */

typedef struct acc {
    int64_t cnt;
    double sum;
} acc_t;

static void agg_init(void *ctx, void *a) {
    acc_t x = {0, 0.0};
    memcpy(a, &x, sizeof x);
}

static int agg_add(void *ctx, void *a, const sl_record_t *in) {
    double amt = sl_row_f64(&in->row, sl_schema_field_count(in->row.schema) - 1);
    if (amt < 0) return SL_EUSER;
    acc_t x;
    memcpy(&x, a, sizeof x);
    x.cnt++;
    x.sum += amt;
    memcpy(a, &x, sizeof x);
    return 0;
}

static void agg_merge(void *ctx, void *a, const void *b) {
    acc_t x, y;
    memcpy(&x, a, sizeof x);
    memcpy(&y, b, sizeof y);
    x.cnt += y.cnt;
    x.sum += y.sum;
    memcpy(a, &x, sizeof x);
}

static int agg_result(void *ctx, const void *a, const uint8_t *key, uint32_t keylen, const sl_window_t *win,
                      sl_row_writer_t *out) {
    acc_t x;
    memcpy(&x, a, sizeof x);
    int64_t card;
    if (keylen != 8) return SL_EINVAL;
    memcpy(&card, key, 8);
    sl_rw_set_i64(out, 0, card);
    sl_rw_set_i64(out, 1, win->start);
    sl_rw_set_i64(out, 2, win->end);
    sl_rw_set_i64(out, 3, x.cnt);
    sl_rw_set_f64(out, 4, x.sum);
    return 0;
}

static const sl_aggregate_fn_t AGG = {sizeof(acc_t), agg_init, agg_add, agg_merge, agg_result, NULL};

typedef struct agg_res {
    int64_t card, ws, we, cnt;
    double sum;
    int64_t ts;
} agg_res_t;

static agg_res_t agg_res(const cap_rec_t *r) {
    sl_row_t row = row_of(r);
    agg_res_t x = {sl_row_i64(&row, 0), sl_row_i64(&row, 1), sl_row_i64(&row, 2),
                   sl_row_i64(&row, 3), sl_row_f64(&row, 4), r->ts};
    return x;
}

/* The nth main-output result for (card, window start), or NULL. */
static const cap_rec_t *find_agg(int64_t card, int64_t ws, int nth) {
    for (int i = 0; i < H.out.n; i++) {
        const cap_rec_t *r = &H.out.recs[i];
        if (r->tag != 0) continue;
        agg_res_t x = agg_res(r);
        if (x.card == card && x.ws == ws && nth-- == 0) return r;
    }
    return NULL;
}

/* Process function: one row per firing with count, sum, the amounts as
 * digits in element order, and the first element's timestamp. */
static int proc_fail_on_fire;

static int proc_fn(void *ctx, const uint8_t *key, uint32_t keylen, const sl_window_t *win,
                   const sl_window_elements_t *el, sl_collector_t *out) {
    if (proc_fail_on_fire) return SL_EUSER;
    int n = sl_window_elements_count(el);
    double sum = 0;
    int64_t digits = 0;
    for (int i = 0; i < n; i++) {
        sl_record_t r = sl_window_elements_get(el, i);
        double a = sl_row_f64(&r.row, 1);
        sum += a;
        digits = digits * 10 + (int64_t)a;
    }
    int64_t card;
    memcpy(&card, key, 8);
    sl_row_writer_t *w = sl_out_row(out);
    sl_rw_set_i64(w, 0, card);
    sl_rw_set_i64(w, 1, n);
    sl_rw_set_f64(w, 2, sum);
    sl_rw_set_i64(w, 3, digits);
    sl_rw_set_i64(w, 4, n ? sl_window_elements_get(el, 0).ts : -1);
    sl_emit(out);
    return 0;
}

typedef struct proc_res {
    int64_t card, n;
    double sum;
    int64_t digits, first_ts, ts;
} proc_res_t;

static proc_res_t proc_res(const cap_rec_t *r) {
    sl_row_t row = row_of(r);
    proc_res_t x = {sl_row_i64(&row, 0), sl_row_i64(&row, 1), sl_row_f64(&row, 2),
                    sl_row_i64(&row, 3), sl_row_i64(&row, 4), r->ts};
    return x;
}

static int reduce_sum(void *ctx, const sl_row_t *acc, const sl_row_t *in, sl_row_writer_t *out) {
    sl_rw_set_i64(out, 0, sl_row_i64(acc, 0));
    sl_rw_set_f64(out, 1, sl_row_f64(acc, 1) + sl_row_f64(in, 1));
    return 0;
}

static int reduce_concat(void *ctx, const sl_row_t *acc, const sl_row_t *in, sl_row_writer_t *out) {
    uint32_t la, lb;
    const char *a = sl_row_str(acc, 1, &la), *b = sl_row_str(in, 1, &lb);
    char buf[256];
    if (la + lb + 1 > sizeof buf) return SL_EINVAL;
    memcpy(buf, a, la);
    buf[la] = '+';
    memcpy(buf + la + 1, b, lb);
    sl_rw_set_i64(out, 0, sl_row_i64(acc, 0));
    sl_rw_set_str(out, 1, buf, la + lb + 1);
    sl_rw_set_f64(out, 2, sl_row_f64(acc, 2) + sl_row_f64(in, 2));
    return 0;
}

/* Spec helpers: the assigner, trigger and evictor are consumed. */
static sl_window_spec_t *spec_new(sl_window_assigner_t *a, sl_trigger_t *t, sl_evictor_t *e, int64_t lateness,
                                  const char *late) {
    sl_window_spec_t *s = sl_window_spec_new(a, t, e, lateness, late);
    sl_assigner_free(a);
    sl_trigger_free(t);
    sl_evictor_free(e);
    return s;
}

static sl_window_spec_t *spec_agg(sl_window_assigner_t *a, sl_trigger_t *t, sl_evictor_t *e, int64_t lateness,
                                  const char *late) {
    sl_window_spec_t *s = spec_new(a, t, e, lateness, late);
    s->fn_kind = SL_WINDOW_FN_AGGREGATE;
    s->agg = AGG;
    return s;
}

static sl_window_spec_t *spec_proc(sl_window_assigner_t *a, sl_trigger_t *t, sl_evictor_t *e, int64_t lateness,
                                   const char *late) {
    sl_window_spec_t *s = spec_new(a, t, e, lateness, late);
    s->fn_kind = SL_WINDOW_FN_PROCESS;
    s->process = proc_fn;
    return s;
}

/* ---- tests ---- */

TEST(tumbling_aggregate) {
    CHECK_EQ(h_open(spec_agg(sl_tumbling_event_time(10, 0), NULL, NULL, 0, NULL), g_in, g_agg_out), 0);
    CHECK_EQ(feed(1, 1.0, 1), 0);
    CHECK_EQ(feed(1, 2.0, 5), 0);
    CHECK_EQ(feed(2, 10.0, 3), 0);
    CHECK_EQ(feed(1, 4.0, 12), 0);
    CHECK_EQ(wm(8), 0);
    CHECK_EQ(H.out.n, 0);
    CHECK_EQ(H.out.nwm, 1);
    CHECK_EQ(H.out.wms[0], 8);
    CHECK_EQ(wm(9), 0);
    CHECK_EQ(nmain(), 2);
    /* results go out before the watermark that fired them */
    CHECK_EQ(H.out.nwm, 2);
    CHECK_EQ(H.out.wms[1], 9);
    CHECK_EQ(H.out.wm_after[1], 2);
    const cap_rec_t *r = find_agg(1, 0, 0);
    CHECK(r != NULL);
    agg_res_t x = agg_res(r);
    CHECK_EQ(x.we, 10);
    CHECK_EQ(x.cnt, 2);
    CHECK_DBL(x.sum, 3.0);
    CHECK_EQ(x.ts, 9); /* window max timestamp */
    x = agg_res(find_agg(2, 0, 0));
    CHECK_EQ(x.cnt, 1);
    CHECK_DBL(x.sum, 10.0);
    CHECK(find_agg(1, 10, 0) == NULL);
    CHECK_EQ(wm(100), 0);
    CHECK_EQ(nmain(), 3);
    x = agg_res(find_agg(1, 10, 0));
    CHECK_EQ(x.cnt, 1);
    CHECK_EQ(x.ts, 19);
    CHECK(find_agg(1, 0, 1) == NULL); /* fired once */
    CHECK_EQ(state_entries(), 0);
    CHECK_EQ(ntimers(), 0);
    CHECK_EQ(sl_window_op_late_dropped(H.op), 0);
    h_close();
}

TEST(tumbling_offset_negative_time) {
    CHECK_EQ(h_open(spec_agg(sl_tumbling_event_time(10, 3), NULL, NULL, 0, NULL), g_in, g_agg_out), 0);
    CHECK_EQ(feed(7, 1.5, -5), 0);
    CHECK_EQ(feed(7, 1.5, -7), 0);
    CHECK_EQ(feed(7, 1.0, -8), 0);
    CHECK_EQ(wm(1), 0);
    CHECK_EQ(nmain(), 1); /* [-17,-7) */
    agg_res_t x = agg_res(find_agg(7, -17, 0));
    CHECK_EQ(x.we, -7);
    CHECK_EQ(x.ts, -8);
    CHECK_EQ(x.cnt, 1);
    CHECK_EQ(wm(2), 0);
    CHECK_EQ(nmain(), 2);
    x = agg_res(find_agg(7, -7, 0));
    CHECK_EQ(x.we, 3);
    CHECK_EQ(x.cnt, 2);
    CHECK_DBL(x.sum, 3.0);
    CHECK_EQ(x.ts, 2);
    h_close();
}

TEST(sliding_aggregate) {
    CHECK_EQ(h_open(spec_agg(sl_sliding_event_time(10, 5, 0), NULL, NULL, 0, NULL), g_in, g_agg_out), 0);
    CHECK_EQ(feed(1, 1.0, 7), 0);  /* [0,10) [5,15) */
    CHECK_EQ(feed(1, 2.0, 12), 0); /* [5,15) [10,20) */
    CHECK_EQ(wm(9), 0);
    CHECK_EQ(nmain(), 1);
    agg_res_t x = agg_res(find_agg(1, 0, 0));
    CHECK_EQ(x.cnt, 1);
    CHECK_EQ(wm(14), 0);
    CHECK_EQ(nmain(), 2);
    x = agg_res(find_agg(1, 5, 0));
    CHECK_EQ(x.cnt, 2);
    CHECK_DBL(x.sum, 3.0);
    CHECK_EQ(x.ts, 14);
    CHECK_EQ(wm(19), 0);
    CHECK_EQ(nmain(), 3);
    x = agg_res(find_agg(1, 10, 0));
    CHECK_EQ(x.cnt, 1);
    CHECK_DBL(x.sum, 2.0);
    CHECK_EQ(state_entries(), 0);
    CHECK_EQ(ntimers(), 0);
    h_close();
}

TEST(sliding_partly_late_element) {
    /* One of the element's windows is cleaned up, the other is kept: the
     * element updates the kept one and is not late. */
    CHECK_EQ(h_open(spec_agg(sl_sliding_event_time(10, 5, 0), NULL, NULL, 0, "late"), g_in, g_agg_out), 0);
    CHECK_EQ(feed(1, 1.0, 3), 0); /* [-5,5) [0,10) */
    CHECK_EQ(wm(12), 0);
    CHECK_EQ(nmain(), 2);
    CHECK_EQ(feed(1, 5.0, 7), 0); /* [0,10) late, [5,15) kept */
    CHECK_EQ(nlate(), 0);
    CHECK_EQ(nmain(), 2);
    CHECK_EQ(wm(14), 0);
    CHECK_EQ(nmain(), 3);
    agg_res_t x = agg_res(find_agg(1, 5, 0));
    CHECK_EQ(x.cnt, 1);
    CHECK_DBL(x.sum, 5.0);
    CHECK(find_agg(1, 0, 1) == NULL);
    /* now every window of t=7 is gone: late */
    CHECK_EQ(feed(1, 6.0, 7), 0);
    CHECK_EQ(nlate(), 1);
    h_close();
}

TEST(session_merge_bridge) {
    CHECK_EQ(h_open(spec_agg(sl_session_event_time(10), NULL, NULL, 0, NULL), g_in, g_agg_out), 0);
    CHECK_EQ(feed(1, 1.0, 0), 0);  /* [0,10) */
    CHECK_EQ(feed(1, 2.0, 30), 0); /* [30,40) */
    CHECK_EQ(feed(2, 100.0, 5), 0); /* another key: [5,15) */
    CHECK_EQ(wm(5), 0);
    CHECK_EQ(feed(1, 4.0, 10), 0); /* touches [0,10): [0,20) */
    CHECK_EQ(feed(1, 8.0, 20), 0); /* bridges [0,20) and [30,40): [0,40) */
    CHECK_EQ(wm(14), 0);
    CHECK_EQ(nmain(), 1); /* only key 2 */
    agg_res_t x = agg_res(find_agg(2, 5, 0));
    CHECK_EQ(x.we, 15);
    CHECK_EQ(x.cnt, 1);
    /* the timers of the merged-away windows (9, 19) must not fire */
    CHECK_EQ(wm(38), 0);
    CHECK_EQ(nmain(), 1);
    CHECK_EQ(wm(39), 0);
    CHECK_EQ(nmain(), 2);
    x = agg_res(find_agg(1, 0, 0));
    CHECK_EQ(x.we, 40);
    CHECK_EQ(x.cnt, 4);
    CHECK_DBL(x.sum, 15.0);
    CHECK_EQ(x.ts, 39);
    CHECK_EQ(state_entries(), 0); /* contents and merging set gone */
    CHECK_EQ(ntimers(), 0);
    h_close();
}

TEST(session_inside_and_late) {
    CHECK_EQ(h_open(spec_agg(sl_session_event_time(10), NULL, NULL, 5, "late"), g_in, g_agg_out), 0);
    CHECK_EQ(feed(1, 1.0, 0), 0);
    CHECK_EQ(feed(1, 1.0, 2), 0); /* [2,12): merges to [0,12) */
    CHECK_EQ(feed(1, 1.0, 1), 0); /* [1,11) inside */
    CHECK_EQ(ntimers(), 2);       /* [0,12): fire at 11, clean up at 16; [0,10)'s are gone */
    CHECK_EQ(wm(11), 0);
    CHECK_EQ(nmain(), 1);
    agg_res_t x = agg_res(find_agg(1, 0, 0));
    CHECK_EQ(x.we, 12);
    CHECK_EQ(x.cnt, 3);
    /* behind the watermark, within lateness: extends the session to
     * [0,13), whose end is ahead of the watermark again */
    CHECK_EQ(feed(1, 2.0, 3), 0);
    CHECK_EQ(nmain(), 1);
    CHECK_EQ(wm(12), 0);
    CHECK_EQ(nmain(), 2);
    x = agg_res(find_agg(1, 0, 1));
    CHECK_EQ(x.we, 13);
    CHECK_EQ(x.cnt, 4);
    CHECK_EQ(x.ts, 12);
    CHECK_EQ(wm(16), 0);
    CHECK(state_entries() > 0);
    CHECK_EQ(wm(17), 0); /* cleanup of [0,13): 12 + 5 */
    CHECK_EQ(state_entries(), 0);
    CHECK_EQ(ntimers(), 0);
    /* exactly at the boundary: [3,13) is cleaned up at 17 = watermark */
    CHECK_EQ(feed(1, 9.0, 3), 0);
    CHECK_EQ(nlate(), 1);
    CHECK_EQ(state_entries(), 0);
    /* a session [-10,0) would be late: side output */
    CHECK_EQ(feed(1, 9.0, -10), 0);
    CHECK_EQ(nlate(), 2);
    /* but a late event that merges into a kept session is not late */
    CHECK_EQ(feed(1, 1.0, 20), 0); /* [20,30) */
    CHECK_EQ(feed(1, 1.0, 10), 0); /* [10,20) touches it: [10,30) */
    CHECK_EQ(nlate(), 2);
    CHECK_EQ(wm(24), 0);
    CHECK_EQ(nmain(), 2);
    CHECK_EQ(feed(1, 1.0, 9), 0); /* [9,19): cleanup 23 <= 24 alone, but touches [10,30) */
    CHECK_EQ(nlate(), 2);
    CHECK_EQ(wm(29), 0);
    x = agg_res(find_agg(1, 9, 0));
    CHECK_EQ(x.we, 30);
    CHECK_EQ(x.cnt, 3);
    h_close();
}

TEST(allowed_lateness_refires) {
    CHECK_EQ(h_open(spec_agg(sl_tumbling_event_time(10, 0), NULL, NULL, 5, "late"), g_in, g_agg_out), 0);
    CHECK_EQ(feed(1, 1.0, 1), 0);
    CHECK_EQ(feed(1, 2.0, 2), 0);
    CHECK_EQ(wm(9), 0);
    CHECK_EQ(nmain(), 1);
    CHECK_EQ(agg_res(find_agg(1, 0, 0)).cnt, 2);
    /* behind the watermark, window kept until 14: updates and re-fires */
    CHECK_EQ(feed(1, 4.0, 3), 0);
    CHECK_EQ(nmain(), 2);
    agg_res_t x = agg_res(find_agg(1, 0, 1));
    CHECK_EQ(x.cnt, 3);
    CHECK_DBL(x.sum, 7.0);
    CHECK_EQ(x.ts, 9);
    CHECK_EQ(wm(13), 0);
    CHECK_EQ(nmain(), 2); /* the cleanup timer does not fire it */
    CHECK_EQ(feed(1, 8.0, 4), 0);
    CHECK_EQ(nmain(), 3);
    CHECK_EQ(agg_res(find_agg(1, 0, 2)).cnt, 4);
    CHECK_EQ(wm(14), 0); /* 9 + 5: cleaned up */
    CHECK_EQ(nmain(), 3);
    CHECK_EQ(state_entries(), 0);
    CHECK_EQ(ntimers(), 0);
    /* after cleanup: late, to the side output, unchanged */
    CHECK_EQ(feed(1, 16.0, 5), 0);
    CHECK_EQ(nlate(), 1);
    CHECK_EQ(nmain(), 3);
    const cap_rec_t *l = &H.out.recs[H.out.n - 1];
    CHECK_EQ(l->tag, 1);
    CHECK_EQ(l->ts, 5);
    sl_row_t lr = row_of(l);
    CHECK_EQ(sl_row_i64(&lr, 0), 1);
    CHECK_DBL(sl_row_f64(&lr, 1), 16.0);
    CHECK(l->schema == g_in);
    CHECK_EQ(state_entries(), 0); /* a late event never also updates a window */
    /* behind the watermark but its window [10,20) is open: not late */
    CHECK_EQ(feed(1, 1.0, 14), 0);
    CHECK_EQ(nlate(), 1);
    CHECK_EQ(sl_window_op_late_dropped(H.op), 0);
    CHECK_EQ(wm(19), 0);
    CHECK_EQ(agg_res(find_agg(1, 10, 0)).cnt, 1);
    h_close();
}

TEST(no_lateness_fires_once_and_drops) {
    CHECK_EQ(h_open(spec_agg(sl_tumbling_event_time(10, 0), NULL, NULL, 0, NULL), g_in, g_agg_out), 0);
    CHECK_EQ(feed(1, 1.0, 5), 0);
    CHECK_EQ(ntimers(), 1); /* trigger and cleanup timer are one */
    CHECK_EQ(wm(8), 0);
    CHECK_EQ(feed(1, 1.0, 8), 0); /* 8 > watermark: on time */
    CHECK_EQ(wm(9), 0);
    CHECK_EQ(nmain(), 1);
    CHECK_EQ(agg_res(find_agg(1, 0, 0)).cnt, 2);
    CHECK_EQ(wm(30), 0);
    CHECK_EQ(nmain(), 1);
    CHECK_EQ(feed(1, 1.0, 9), 0);
    CHECK_EQ(feed(2, 1.0, 0), 0);
    CHECK_EQ(sl_window_op_late_dropped(H.op), 2);
    CHECK_EQ(H.out.n, 0 + 1);
    CHECK_EQ(state_entries(), 0);
    /* the maximum watermark fires what is left */
    CHECK_EQ(feed(3, 2.0, 31), 0);
    CHECK_EQ(wm(SL_MAX_WATERMARK), 0);
    CHECK_EQ(agg_res(find_agg(3, 30, 0)).cnt, 1);
    CHECK_EQ(H.out.wms[H.out.nwm - 1], SL_MAX_WATERMARK);
    h_close();
}

TEST(count_trigger) {
    CHECK_EQ(h_open(spec_agg(sl_tumbling_event_time(100, 0), sl_trigger_count(3), NULL, 0, NULL), g_in, g_agg_out),
             0);
    for (int i = 1; i <= 7; i++) CHECK_EQ(feed(1, (double)i, i), 0);
    CHECK_EQ(nmain(), 2);
    agg_res_t x = agg_res(find_agg(1, 0, 0));
    CHECK_EQ(x.cnt, 3);
    CHECK_DBL(x.sum, 6.0);
    CHECK_EQ(x.ts, 99);
    x = agg_res(find_agg(1, 0, 1));
    CHECK_EQ(x.cnt, 6); /* not purged: contents accumulate */
    CHECK_DBL(x.sum, 21.0);
    CHECK_EQ(wm(98), 0);
    CHECK_EQ(ntimers(), 1); /* the cleanup timer */
    CHECK_EQ(wm(99), 0); /* a count trigger does not fire on time */
    CHECK_EQ(nmain(), 2);
    CHECK_EQ(state_entries(), 0); /* but the window is cleaned up, count too */
    CHECK_EQ(ntimers(), 0);
    CHECK_EQ(feed(1, 1.0, 99), 0); /* its window is cleaned up at 99: late */
    CHECK_EQ(sl_window_op_late_dropped(H.op), 1);
    CHECK_EQ(state_entries(), 0);
    h_close();
}

TEST(purging_triggers) {
    CHECK_EQ(h_open(spec_agg(sl_tumbling_event_time(100, 0), sl_trigger_purging(sl_trigger_count(2)), NULL, 0, NULL),
                    g_in, g_agg_out),
             0);
    for (int i = 1; i <= 5; i++) CHECK_EQ(feed(1, (double)i, i), 0);
    CHECK_EQ(nmain(), 2);
    CHECK_DBL(agg_res(find_agg(1, 0, 0)).sum, 3.0);
    CHECK_DBL(agg_res(find_agg(1, 0, 1)).sum, 7.0);
    CHECK_EQ(agg_res(find_agg(1, 0, 1)).cnt, 2);
    CHECK_EQ(wm(99), 0);
    CHECK_EQ(nmain(), 2);
    CHECK_EQ(state_entries(), 0);
    h_close();

    /* purging event-time trigger with lateness: a late firing holds only
     * what came after the purge */
    CHECK_EQ(h_open(spec_agg(sl_tumbling_event_time(10, 0), sl_trigger_purging(sl_trigger_event_time()), NULL, 10,
                             NULL),
                    g_in, g_agg_out),
             0);
    CHECK_EQ(feed(1, 1.0, 1), 0);
    CHECK_EQ(feed(1, 2.0, 2), 0);
    CHECK_EQ(wm(9), 0);
    CHECK_EQ(agg_res(find_agg(1, 0, 0)).cnt, 2);
    CHECK_EQ(state_entries(), 0); /* purged */
    CHECK_EQ(feed(1, 5.0, 3), 0);
    CHECK_EQ(nmain(), 2);
    agg_res_t x = agg_res(find_agg(1, 0, 1));
    CHECK_EQ(x.cnt, 1);
    CHECK_DBL(x.sum, 5.0);
    CHECK_EQ(wm(19), 0); /* cleanup at 19: nothing left to fire */
    CHECK_EQ(nmain(), 2);
    CHECK_EQ(ntimers(), 0);
    h_close();
}

TEST(process_function) {
    CHECK_EQ(h_open(spec_proc(sl_tumbling_event_time(10, 0), NULL, NULL, 0, NULL), g_in, g_proc_out), 0);
    CHECK_EQ(feed(1, 3.0, 4), 0);
    CHECK_EQ(feed(1, 1.0, 2), 0);
    CHECK_EQ(feed(1, 2.0, 6), 0);
    CHECK_EQ(wm(9), 0);
    CHECK_EQ(nmain(), 1);
    proc_res_t p = proc_res(&H.out.recs[0]);
    CHECK_EQ(p.card, 1);
    CHECK_EQ(p.n, 3);
    CHECK_EQ(p.digits, 312); /* arrival order */
    CHECK_EQ(p.first_ts, 4);
    CHECK_EQ(p.ts, 9);
    CHECK(H.out.recs[0].schema == g_proc_out);
    CHECK_EQ(state_entries(), 0);
    h_close();
}

TEST(count_evictor_before) {
    CHECK_EQ(h_open(spec_proc(sl_tumbling_event_time(10, 0), NULL, sl_evictor_count(2, false), 0, NULL), g_in,
                    g_proc_out),
             0);
    for (int i = 1; i <= 4; i++) CHECK_EQ(feed(1, (double)i, i), 0);
    CHECK_EQ(wm(9), 0);
    CHECK_EQ(nmain(), 1);
    proc_res_t p = proc_res(&H.out.recs[0]);
    CHECK_EQ(p.n, 2);
    CHECK_EQ(p.digits, 34);
    CHECK_EQ(p.first_ts, 3);
    CHECK_EQ(state_entries(), 0);
    h_close();
}

TEST(count_evictor_after_with_count_trigger) {
    CHECK_EQ(h_open(spec_proc(sl_tumbling_event_time(100, 0), sl_trigger_count(3), sl_evictor_count(2, true), 0,
                              NULL),
                    g_in, g_proc_out),
             0);
    for (int i = 1; i <= 6; i++) CHECK_EQ(feed(1, (double)i, i), 0);
    CHECK_EQ(nmain(), 2);
    proc_res_t p = proc_res(&H.out.recs[0]);
    CHECK_EQ(p.n, 3); /* the function sees all, then two stay */
    CHECK_EQ(p.digits, 123);
    p = proc_res(&H.out.recs[1]);
    CHECK_EQ(p.n, 5);
    CHECK_EQ(p.digits, 23456);
    CHECK_EQ(feed(1, 7.0, 7), 0);
    CHECK_EQ(feed(1, 8.0, 8), 0);
    CHECK_EQ(feed(1, 9.0, 9), 0);
    p = proc_res(&H.out.recs[2]);
    CHECK_EQ(p.digits, 56789);
    h_close();
}

TEST(time_evictor) {
    CHECK_EQ(h_open(spec_proc(sl_tumbling_event_time(10, 0), NULL, sl_evictor_time(5, false), 0, NULL), g_in,
                    g_proc_out),
             0);
    CHECK_EQ(feed(1, 1.0, 1), 0);
    CHECK_EQ(feed(1, 7.0, 7), 0);
    CHECK_EQ(feed(1, 4.0, 4), 0);
    CHECK_EQ(feed(1, 9.0, 9), 0);
    CHECK_EQ(feed(1, 5.0, 5), 0);
    CHECK_EQ(wm(9), 0);
    proc_res_t p = proc_res(&H.out.recs[0]);
    CHECK_EQ(p.n, 3); /* cutoff 9 - 5 = 4: ts <= 4 evicted */
    CHECK_EQ(p.digits, 795);
    h_close();
}

TEST(evictor_with_aggregate_and_lateness) {
    /* An evicting window keeps elements; the aggregate runs over what
     * remains at each firing. */
    CHECK_EQ(h_open(spec_agg(sl_tumbling_event_time(10, 0), NULL, sl_evictor_count(2, false), 10, NULL), g_in,
                    g_agg_out),
             0);
    CHECK_EQ(feed(1, 1.0, 1), 0);
    CHECK_EQ(feed(1, 2.0, 2), 0);
    CHECK_EQ(feed(1, 4.0, 3), 0);
    CHECK_EQ(wm(9), 0);
    agg_res_t x = agg_res(find_agg(1, 0, 0));
    CHECK_EQ(x.cnt, 2);
    CHECK_DBL(x.sum, 6.0);
    CHECK_EQ(feed(1, 8.0, 4), 0); /* late firing: last two of 2,4,8 */
    x = agg_res(find_agg(1, 0, 1));
    CHECK_EQ(x.cnt, 2);
    CHECK_DBL(x.sum, 12.0);
    CHECK_EQ(wm(19), 0);
    CHECK_EQ(state_entries(), 0);
    h_close();
}

TEST(session_process_merges_lists) {
    CHECK_EQ(h_open(spec_proc(sl_session_event_time(10), NULL, NULL, 0, NULL), g_in, g_proc_out), 0);
    CHECK_EQ(feed(1, 1.0, 0), 0);
    CHECK_EQ(feed(1, 2.0, 30), 0);
    CHECK_EQ(feed(1, 3.0, 5), 0);
    CHECK_EQ(feed(1, 4.0, 22), 0); /* [22,32) joins [30,40) */
    CHECK_EQ(feed(1, 5.0, 14), 0); /* [14,24) bridges [0,15) and [22,40) */
    CHECK_EQ(wm(39), 0);
    CHECK_EQ(nmain(), 1);
    proc_res_t p = proc_res(&H.out.recs[0]);
    CHECK_EQ(p.n, 5);
    CHECK_EQ(p.digits, 13245); /* earliest session's list first, then the other's */
    CHECK_EQ(p.ts, 39);
    CHECK_EQ(state_entries(), 0);
    CHECK_EQ(ntimers(), 0);
    h_close();
}

TEST(session_count_trigger_merges_counts) {
    CHECK_EQ(h_open(spec_agg(sl_session_event_time(10), sl_trigger_count(3), NULL, 0, NULL), g_in, g_agg_out), 0);
    CHECK_EQ(feed(1, 1.0, 0), 0);
    CHECK_EQ(feed(1, 1.0, 15), 0);
    CHECK_EQ(nmain(), 0);
    CHECK_EQ(feed(1, 1.0, 8), 0); /* bridges: 1 + 1 + this one */
    CHECK_EQ(nmain(), 1);
    agg_res_t x = agg_res(find_agg(1, 0, 0));
    CHECK_EQ(x.we, 25);
    CHECK_EQ(x.cnt, 3);
    CHECK_EQ(wm(100), 0);
    CHECK_EQ(nmain(), 1);
    CHECK_EQ(state_entries(), 0);
    CHECK_EQ(ntimers(), 0);
    h_close();
}

TEST(processing_time_windows) {
    sl_op_test_set_now(1005);
    CHECK_EQ(h_open(spec_agg(sl_tumbling_processing_time(100, 0), NULL, NULL, 0, "late"), g_in, g_agg_out), 0);
    CHECK_EQ(feed(1, 1.0, SL_NO_TIMESTAMP), 0);
    CHECK_EQ(feed(1, 2.0, 5), 0); /* the record's timestamp does not matter */
    sl_op_test_set_now(1050);
    CHECK_EQ(feed(1, 4.0, SL_NO_TIMESTAMP), 0);
    CHECK_EQ(wm(SL_MAX_WATERMARK), 0); /* event time does not fire it */
    CHECK_EQ(nmain(), 0);
    CHECK_EQ(H.op->vt->on_processing_time(H.op, 1098), 0);
    CHECK_EQ(nmain(), 0);
    CHECK_EQ(H.op->vt->on_processing_time(H.op, 1099), 0);
    CHECK_EQ(nmain(), 1);
    agg_res_t x = agg_res(find_agg(1, 1000, 0));
    CHECK_EQ(x.we, 1100);
    CHECK_EQ(x.cnt, 3);
    CHECK_DBL(x.sum, 7.0);
    CHECK_EQ(x.ts, 1099);
    CHECK_EQ(state_entries(), 0);
    CHECK_EQ(ntimers(), 0);
    sl_op_test_set_now(1100);
    CHECK_EQ(feed(1, 1.0, SL_NO_TIMESTAMP), 0);
    CHECK_EQ(H.op->vt->on_processing_time(H.op, 1250), 0);
    CHECK_EQ(nmain(), 2);
    CHECK_EQ(agg_res(find_agg(1, 1100, 0)).cnt, 1);
    CHECK_EQ(nlate(), 0);
    h_close();
}

TEST(processing_time_sessions) {
    sl_op_test_set_now(0);
    CHECK_EQ(h_open(spec_agg(sl_session_processing_time(50), NULL, NULL, 0, NULL), g_in, g_agg_out), 0);
    CHECK_EQ(feed(1, 1.0, SL_NO_TIMESTAMP), 0);
    sl_op_test_set_now(30);
    CHECK_EQ(feed(1, 2.0, SL_NO_TIMESTAMP), 0); /* [30,80) merges with [0,50) */
    CHECK_EQ(H.op->vt->on_processing_time(H.op, 49), 0);
    CHECK_EQ(nmain(), 0);
    CHECK_EQ(H.op->vt->on_processing_time(H.op, 79), 0);
    CHECK_EQ(nmain(), 1);
    agg_res_t x = agg_res(find_agg(1, 0, 0));
    CHECK_EQ(x.we, 80);
    CHECK_EQ(x.cnt, 2);
    CHECK_EQ(state_entries(), 0);
    CHECK_EQ(ntimers(), 0);
    h_close();
}

TEST(reduce_fixed_rows) {
    sl_window_spec_t *s = spec_new(sl_tumbling_event_time(10, 0), NULL, NULL, 0, NULL);
    s->fn_kind = SL_WINDOW_FN_REDUCE;
    s->reduce = reduce_sum;
    CHECK_EQ(h_open(s, g_in, g_in), 0);
    CHECK_EQ(feed(1, 1.0, 1), 0);
    CHECK_EQ(feed(2, 5.0, 1), 0);
    CHECK_EQ(feed(1, 2.0, 2), 0);
    CHECK_EQ(feed(1, 4.0, 3), 0);
    CHECK_EQ(wm(9), 0);
    CHECK_EQ(nmain(), 2);
    double s1 = 0, s2 = 0;
    for (int i = 0; i < H.out.n; i++) {
        sl_row_t r = row_of(&H.out.recs[i]);
        CHECK_EQ(H.out.recs[i].ts, 9);
        CHECK(r.schema == g_in);
        if (sl_row_i64(&r, 0) == 1) s1 = sl_row_f64(&r, 1);
        if (sl_row_i64(&r, 0) == 2) s2 = sl_row_f64(&r, 1);
    }
    CHECK_DBL(s1, 7.0);
    CHECK_DBL(s2, 5.0);
    h_close();
}

TEST(reduce_variable_rows_sessions) {
    sl_window_spec_t *s = spec_new(sl_session_event_time(10), NULL, NULL, 0, NULL);
    s->fn_kind = SL_WINDOW_FN_REDUCE;
    s->reduce = reduce_concat;
    CHECK_EQ(h_open(s, g_in_str, g_in_str), 0);
    CHECK_EQ(feed_str(1, "a", 1.0, 0), 0);
    CHECK_EQ(feed_str(1, "bb", 2.0, 3), 0);
    CHECK_EQ(feed_str(1, "c", 4.0, 20), 0);
    CHECK_EQ(feed_str(1, "dddd", 8.0, 13), 0); /* bridges [0,13) and [20,30) */
    CHECK_EQ(wm(28), 0);
    CHECK_EQ(nmain(), 0);
    CHECK_EQ(wm(29), 0);
    CHECK_EQ(nmain(), 1);
    sl_row_t r = row_of(&H.out.recs[0]);
    uint32_t len;
    const char *name = sl_row_str(&r, 1, &len);
    CHECK_EQ(len, 11);
    CHECK(memcmp(name, "a+bb+c+dddd", 11) == 0);
    CHECK_DBL(sl_row_f64(&r, 2), 15.0);
    CHECK_EQ(state_entries(), 0);
    h_close();
}

TEST(user_function_failures) {
    CHECK_EQ(h_open(spec_agg(sl_tumbling_event_time(10, 0), NULL, NULL, 0, NULL), g_in, g_agg_out), 0);
    CHECK_EQ(feed(1, 1.0, 1), 0);
    CHECK(feed(1, -1.0, 2) < 0);
    CHECK_CONTAINS(sl_op_test_last_error(), "Window(test)");
    CHECK_CONTAINS(sl_op_test_last_error(), "aggregate add");
    h_close();

    CHECK_EQ(h_open(spec_proc(sl_tumbling_event_time(10, 0), NULL, NULL, 0, NULL), g_in, g_proc_out), 0);
    CHECK_EQ(feed(1, 1.0, 1), 0);
    proc_fail_on_fire = 1;
    CHECK(wm(9) < 0);
    proc_fail_on_fire = 0;
    CHECK_CONTAINS(sl_op_test_last_error(), "window process function failed");
    CHECK_EQ(nmain(), 0);
    CHECK_EQ(H.out.nwm, 0); /* the watermark did not pass a failed firing */
    h_close();

    /* an event-time window needs timestamps */
    CHECK_EQ(h_open(spec_agg(sl_tumbling_event_time(10, 0), NULL, NULL, 0, NULL), g_in, g_agg_out), 0);
    CHECK(feed(1, 1.0, SL_NO_TIMESTAMP) < 0);
    CHECK_CONTAINS(sl_op_test_last_error(), "no timestamp");
    h_close();

    /* an undeclared late tag fails at open */
    CHECK(h_open(spec_agg(sl_tumbling_event_time(10, 0), NULL, NULL, 0, "nope"), g_in, g_agg_out) < 0);
    CHECK_CONTAINS(sl_op_test_last_error(), "nope");
    h_close();
}

TEST(every_event_in_a_window_or_late) {
    /* Random-ish disorder against a watermark: every event is counted in
     * exactly one emitted tumbling result or is late, never both. */
    CHECK_EQ(h_open(spec_agg(sl_tumbling_event_time(10, 0), NULL, NULL, 3, "late"), g_in, g_agg_out), 0);
    uint64_t x = 42;
    int64_t maxts = 0, total = 0;
    for (int i = 0; i < 300; i++) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        int64_t ts = (int64_t)(i / 2) - (int64_t)((x >> 33) % 20);
        CHECK_EQ(feed((int64_t)((x >> 20) % 3), 1.0, ts), 0);
        total++;
        if (ts > maxts) maxts = ts;
        if (i % 7 == 0) CHECK_EQ(wm(maxts - 6), 0);
    }
    CHECK_EQ(wm(SL_MAX_WATERMARK), 0);
    /* re-firings repeat a window's count: take the last result per window */
    int64_t in_windows = 0;
    for (int i = 0; i < H.out.n; i++) {
        if (H.out.recs[i].tag != 0) continue;
        agg_res_t a = agg_res(&H.out.recs[i]);
        bool last = true;
        for (int j = i + 1; j < H.out.n; j++) {
            if (H.out.recs[j].tag != 0) continue;
            agg_res_t b = agg_res(&H.out.recs[j]);
            if (b.card == a.card && b.ws == a.ws) last = false;
        }
        if (last) in_windows += a.cnt;
    }
    CHECK(nlate() > 0);
    CHECK_EQ(in_windows + nlate(), total);
    h_close();
}


/* ---- the public API: builder errors and handles ---- */

static sl_keyed_t *keyed_source(sl_env_t *env, sl_stream_t **src) {
    sl_stream_t *s = sl_from_source(env, sl_datagen_source(sl_datagen_defaults()), sl_wm_bounded("ts", 5000), "gen");
    if (src) *src = s;
    return sl_key_by(s, "card_id");
}

static sl_schema_t *agg_schema(void) { return sl_schema_ref(g_agg_out); }

TEST(api_builder_errors) {
    struct {
        int what;
        const char *msg;
    } cases[] = {
        {0, "TumblingEventTimeWindows"}, {1, "abs(offset) < slide"}, {2, "CountTrigger(0)"},
        {3, "CountEvictor(-1)"},         {4, "allowed lateness"},    {5, "merge is required"},
        {6, "no reduce function"},       {7, "ProcessingTimeSessionWindows"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        sl_env_t *env = sl_env_new();
        sl_keyed_t *k = keyed_source(env, NULL);
        CHECK(k != NULL);
        sl_windowed_t *w = NULL;
        sl_stream_t *r = NULL;
        sl_aggregate_fn_t agg = AGG;
        switch (cases[i].what) {
        case 0: w = sl_window(k, sl_tumbling_event_time(0, 0)); break;
        case 1: w = sl_window(k, sl_sliding_event_time(10, 5, 5)); break;
        case 2: w = sl_window_trigger(sl_window(k, sl_tumbling_event_time(10, 0)), sl_trigger_count(0)); break;
        case 3: w = sl_window_evictor(sl_window(k, sl_tumbling_event_time(10, 0)), sl_evictor_count(-1, false)); break;
        case 4: w = sl_window_allowed_lateness(sl_window(k, sl_tumbling_event_time(10, 0)), -1); break;
        case 5: w = sl_window(k, sl_session_event_time(10)); agg.merge = NULL; break;
        case 6: w = sl_window(k, sl_tumbling_event_time(10, 0)); break;
        case 7: w = sl_window(k, sl_session_processing_time(0)); break;
        }
        CHECK(w != NULL); /* chaining goes on; the error is on the environment */
        if (cases[i].what == 6)
            r = sl_window_reduce(w, NULL, NULL);
        else
            r = sl_window_aggregate(w, agg, agg_schema());
        CHECK(r == NULL);
        CHECK_CONTAINS(sl_env_error(env), cases[i].msg);
        CHECK(sl_env_execute(env, "bad") < 0);
        sl_env_destroy(env);
    }
    /* NULL in, NULL out; ownership is still taken */
    CHECK(sl_window(NULL, sl_tumbling_event_time(10, 0)) == NULL);
    CHECK(sl_window_trigger(NULL, sl_trigger_purging(sl_trigger_count(2))) == NULL);
    CHECK(sl_window_evictor(NULL, sl_evictor_time(5, true)) == NULL);
    CHECK(sl_window_allowed_lateness(NULL, 5) == NULL);
    CHECK(sl_window_late_output(NULL, "late") == NULL);
    CHECK(sl_window_aggregate(NULL, AGG, agg_schema()) == NULL);
    CHECK(sl_window_process(NULL, proc_fn, NULL, sl_schema_ref(g_proc_out)) == NULL);
}

TEST(api_streams) {
    sl_env_t *env = sl_env_new();
    sl_stream_t *src;
    sl_keyed_t *k = keyed_source(env, &src);
    sl_windowed_t *w = sl_window(k, sl_tumbling_event_time(300000, 0));
    w = sl_window_late_output(sl_window_allowed_lateness(w, 1000), "late");
    w = sl_window_trigger(w, sl_trigger_purging(sl_trigger_event_time()));
    sl_stream_t *agg = sl_window_aggregate(w, AGG, agg_schema());
    CHECK(agg != NULL);
    CHECK_STR(sl_env_error(env), "");
    CHECK(sl_schema_equal(sl_stream_schema(agg), g_agg_out));
    sl_stream_t *late = sl_side_output(agg, "late");
    CHECK(late != NULL);
    CHECK(sl_schema_equal(sl_stream_schema(late), sl_stream_schema(src)));
    /* the same windowed stream feeds another function; its settings stay */
    sl_stream_t *red = sl_window_reduce(w, reduce_sum, NULL);
    CHECK(red != NULL);
    CHECK(sl_schema_equal(sl_stream_schema(red), sl_stream_schema(src)));
    CHECK(sl_side_output(red, "late") != NULL);
    sl_windowed_t *w2 = sl_window_evictor(sl_window(k, sl_session_event_time(1000)), sl_evictor_count(3, true));
    CHECK(sl_window_process(w2, proc_fn, NULL, sl_schema_ref(g_proc_out)) != NULL);
    CHECK_STR(sl_env_error(env), "");
    sl_env_destroy(env);
}

int main(void) {
    g_in = sl_schema_parse("card BIGINT NOT NULL, amount DOUBLE", NULL, 0);
    g_in_str = sl_schema_parse("card BIGINT NOT NULL, name VARCHAR, amount DOUBLE", NULL, 0);
    g_agg_out = sl_schema_parse("card BIGINT, wstart BIGINT, wend BIGINT, cnt BIGINT, sum DOUBLE", NULL, 0);
    g_proc_out = sl_schema_parse("card BIGINT, n BIGINT, sum DOUBLE, digits BIGINT, first_ts BIGINT", NULL, 0);
    if (!g_in || !g_in_str || !g_agg_out || !g_proc_out) {
        fprintf(stderr, "schema parse failed\n");
        return 1;
    }
    RUN(tumbling_aggregate);
    RUN(tumbling_offset_negative_time);
    RUN(sliding_aggregate);
    RUN(sliding_partly_late_element);
    RUN(session_merge_bridge);
    RUN(session_inside_and_late);
    RUN(allowed_lateness_refires);
    RUN(no_lateness_fires_once_and_drops);
    RUN(count_trigger);
    RUN(purging_triggers);
    RUN(process_function);
    RUN(count_evictor_before);
    RUN(count_evictor_after_with_count_trigger);
    RUN(time_evictor);
    RUN(evictor_with_aggregate_and_lateness);
    RUN(session_process_merges_lists);
    RUN(session_count_trigger_merges_counts);
    RUN(processing_time_windows);
    RUN(processing_time_sessions);
    RUN(reduce_fixed_rows);
    RUN(reduce_variable_rows_sessions);
    RUN(user_function_failures);
    RUN(every_event_in_a_window_or_late);
    RUN(api_builder_errors);
    RUN(api_streams);
    sl_schema_unref(g_in);
    sl_schema_unref(g_in_str);
    sl_schema_unref(g_agg_out);
    sl_schema_unref(g_proc_out);
    TEST_MAIN_END();
}
