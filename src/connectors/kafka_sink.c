/*
 * kafka_sink.c — the Kafka sink (Flink's KafkaSink) on librdkafka.
 *
 * NONE and AT_LEAST_ONCE produce every record as it comes (idempotent
 * producer for AT_LEAST_ONCE); AT_LEAST_ONCE's pre-commit flushes and waits
 * for every delivery report, and any delivery error fails the task.
 *
 * EXACTLY_ONCE.  librdkafka 2.0.2's rd_kafka_init_transactions() aborts a
 * pending transaction of the same transactional.id, so a transaction left
 * open across a crash cannot be committed afterwards.  This sink therefore
 * opens a transaction only when it can be committed at once:
 *
 *   write        the encoded record is appended to the open epoch (memory)
 *   pre_commit n the open epoch becomes pending epoch n of this writer's
 *                incarnation (a random 64-bit id per open)
 *   snapshot n   every pending epoch — records included — goes into
 *                checkpoint n (the sink writer's state)
 *   commit n     one Kafka transaction: a commit marker
 *                ("<prefix>/<incarnation>" -> "<n> <transactional.id>") to
 *                the marker topic, then every record of the pending epochs
 *                <= n; commit_transaction; the epochs are dropped
 *   finish       (end of a bounded input) the same for everything left,
 *                with the marker epoch INT64_MAX
 *
 * A writer commits its epochs in order and each transaction carries the
 * marker of its newest epoch, so "epoch e of incarnation I is committed" is
 * exactly "the marker topic holds, read_committed, a marker of I with an
 * epoch >= e".  The marker topic is compacted by key: only the newest marker
 * per incarnation needs to stay.
 *
 * Recovery.  recover runs once per process before that process's writers
 * open — on a cluster once per TaskManager, possibly while another
 * TaskManager's writers of the same run already commit — so it fences
 * nothing itself: it collects (read_uncommitted: any transaction starts
 * with its marker, so even one left open by a crash shows) every
 * transactional.id that ever wrote a marker of this prefix.  Each writer,
 * as it opens, settles the ids it owns: its own ("<prefix>-<subtask>",
 * initialised by its producer, which fences the old one and aborts or
 * completes its transaction) and those of subtasks that no longer exist
 * ("<prefix>-<n>", n >= parallelism, owned by writer n % parallelism;
 * an id of any other shape by writer 0), each initialised once more.  No
 * writer of a run ever initialises an id another writer of the run uses.
 * Then the first writer of the process to get there reads the markers
 * with read_committed; the read waits (at most KK_SCAN_MS) until every
 * transaction left open before it was settled, by whichever process owns
 * its id.  restore gives each writer its share of the
 * restored checkpoint's pending epochs; those whose marker is missing are
 * re-sent in one transaction per old incarnation, with that incarnation's
 * marker, before the writer takes any new record.  A crash between the
 * completion of checkpoint n and its commit thus ends with n's records
 * committed exactly once, and read_committed consumers never see a record
 * before the checkpoint that covers it completed.
 *
 * The price: a checkpoint holds the sink's output since the previous one
 * (in the metadata up to 1 MiB per writer, else in a state file of its own:
 * checkpoint/spilled_blob.h), and the commit sends it, on the task's
 * thread, when the checkpoint completes.
 *
 * transaction.timeout.ms must be at least twice the checkpoint interval and
 * at most the broker's transaction.max.timeout.ms; a producer that is
 * fenced, or whose transaction failed or timed out, fails the task loudly
 * (retriable: a restart recovers from the latest checkpoint).
 *
 * SLUICE_KAFKA_DEBUG=1 in the environment logs pre-commits, commits and
 * restored epochs to stderr.
 *
 * Threads: a writer runs on its sink task's thread (delivery callbacks
 * too: they are served by rd_kafka_poll/flush there); recover runs on the
 * job's thread before any writer of the process exists; writers open on
 * their own threads at once and share the marker read (marks_mu).
 */
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "connectors/kafka_common.h"
#include "formats/format.h"

#define KK_MAGIC 0x534b4c53u /* "SLKS" */
#define KK_VERSION 1u
#define KK_DEFAULT_MARKER_TOPIC "__sluice_kafka_sink_commits"
#define KK_NULL_KEY 0xffffffffu
#define KK_TXN_CALL_MS 60000
#define KK_SCAN_MS 120000

typedef struct kk_mark {
    uint64_t inc;
    int64_t epoch; /* newest committed epoch of the incarnation */
} kk_mark_t;

typedef struct kk_ctx {
    char *bootstrap, *topic, *key_field, *prefix, *marker_topic;
    sl_kafka_format_t fmt;
    sl_delivery_t delivery;
    int64_t interval_ms, timeout_ms;
    int64_t eff_timeout_ms; /* resolved by recover (or open) */
    char **props;
    char opt_err[512];
    /* filled by recover before any writer opens, read-only afterwards */
    char **ids; /* every transactional.id that wrote a marker of this prefix */
    int nids;
    bool recovered;
    /* the committed markers: read once, by the first writer that opens
     * after settling its ids (under marks_mu) */
    pthread_mutex_t marks_mu;
    bool marks_read;
    int marks_rc;
    char marks_err[560];
    kk_mark_t *marks;
    int nmarks;
} kk_ctx_t;

typedef struct kk_epoch {
    uint64_t inc;
    int64_t id;
    int64_t n;
    sl_buf_t recs; /* [u32 klen | KK_NULL_KEY][key][u32 vlen][value][i64 ts] ... */
} kk_epoch_t;

typedef struct kk_writer {
    kk_ctx_t *ctx;
    int subtask, parallelism;
    rd_kafka_t *rk;
    rd_kafka_topic_t *rkt, *mkt;
    char txn_id[300];
    uint64_t inc;
    int key_idx, value_idx;
    sl_buf_t enc, key;
    kk_epoch_t cur;
    kk_epoch_t *pending;
    int npending;
    int64_t writes;
    /* first delivery error (set by the delivery callback on this thread) */
    int dr_failed;
    char dr_msg[512];
} kk_writer_t;

/* ---- helpers ---- */

static void dr_cb(rd_kafka_t *rk, const rd_kafka_message_t *m, void *opaque) {
    kk_writer_t *w = opaque;
    if (m->err && !w->dr_failed) {
        w->dr_failed = SL_EIO;
        snprintf(w->dr_msg, sizeof w->dr_msg, "kafka sink: delivery to topic '%s' failed: %s",
                 m->rkt ? rd_kafka_topic_name(m->rkt) : "?", rd_kafka_err2str(m->err));
    }
}

static int check_dr(kk_writer_t *w, char *err, size_t errlen) {
    return w->dr_failed ? sl_errf(err, errlen, w->dr_failed, "%s", w->dr_msg) : 0;
}

/* Produces one record, waiting while the local queue is full. */
static int produce(kk_writer_t *w, rd_kafka_topic_t *rkt, const void *key, size_t klen, const void *val, size_t vlen,
                   int64_t ts, char *err, size_t errlen) {
    for (;;) {
        rd_kafka_resp_err_t e = rd_kafka_producev(w->rk, RD_KAFKA_V_RKT(rkt), RD_KAFKA_V_MSGFLAGS(RD_KAFKA_MSG_F_COPY),
                                                  RD_KAFKA_V_KEY(key, klen), RD_KAFKA_V_VALUE((void *)val, vlen),
                                                  RD_KAFKA_V_TIMESTAMP(ts == SL_NO_TIMESTAMP || ts < 0 ? 0 : ts),
                                                  RD_KAFKA_V_END);
        if (e == RD_KAFKA_RESP_ERR__QUEUE_FULL) {
            rd_kafka_poll(w->rk, 10);
            int rc = check_dr(w, err, errlen);
            if (rc) return rc;
            continue;
        }
        if (e == RD_KAFKA_RESP_ERR__FATAL) { /* say what the fatal error was: a fence shows up here too */
            char fe[512] = "";
            rd_kafka_resp_err_t fc = rd_kafka_fatal_error(w->rk, fe, sizeof fe);
            if (fc == RD_KAFKA_RESP_ERR__FENCED || fc == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
                fc == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH)
                return sl_errf(err, errlen, SL_EIO,
                               "kafka sink: producing to topic '%s': producer '%s' was fenced — another producer with "
                               "the same transactional.id started, or the transaction outlived "
                               "transaction.timeout.ms (%" PRId64 " ms): %s",
                               rd_kafka_topic_name(rkt), w->txn_id, w->ctx->eff_timeout_ms, fe);
            return sl_errf(err, errlen, SL_EIO, "kafka sink: cannot produce to topic '%s': fatal producer error: %s",
                           rd_kafka_topic_name(rkt), fe[0] ? fe : rd_kafka_err2str(e));
        }
        if (e)
            return sl_errf(err, errlen, SL_EIO, "kafka sink: cannot produce to topic '%s': %s", rd_kafka_topic_name(rkt),
                           rd_kafka_err2str(e));
        return 0;
    }
}

/* A transactional call's error, as a message that says what it means. */
static int txn_error(kk_writer_t *w, rd_kafka_error_t *e, const char *what, char *err, size_t errlen) {
    bool fenced = rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR__FENCED ||
                  rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR_PRODUCER_FENCED ||
                  rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR_INVALID_PRODUCER_EPOCH;
    bool timeout = rd_kafka_error_code(e) == RD_KAFKA_RESP_ERR_INVALID_TRANSACTION_TIMEOUT;
    char b[512];
    snprintf(b, sizeof b, "%s", rd_kafka_error_string(e));
    int rc;
    if (fenced)
        rc = sl_errf(err, errlen, SL_EIO,
                     "kafka sink: %s: producer '%s' was fenced — another producer with the same transactional.id "
                     "started, or the transaction outlived transaction.timeout.ms (%" PRId64 " ms): %s",
                     what, w->txn_id, w->ctx->eff_timeout_ms, b);
    else if (timeout)
        rc = sl_errf(err, errlen, SL_EINVAL,
                     "kafka sink: %s: the broker refuses transaction.timeout.ms=%" PRId64
                     " (above its transaction.max.timeout.ms?): %s",
                     what, w->ctx->eff_timeout_ms, b);
    else
        rc = sl_errf(err, errlen, SL_EIO, "kafka sink: %s (transactional.id '%s'): %s%s", what, w->txn_id, b,
                     rd_kafka_error_is_fatal(e) ? " (fatal)" : "");
    rd_kafka_error_destroy(e);
    return rc;
}

static void put_u32(sl_buf_t *b, uint32_t v) {
    uint8_t x[4];
    sl_st32(x, v);
    sl_buf_append(b, x, 4);
}

static void put_u64(sl_buf_t *b, uint64_t v) {
    uint8_t x[8];
    sl_st64(x, v);
    sl_buf_append(b, x, 8);
}

/* Walks the records of an epoch buffer: 1 and the fields, 0 at the end,
 * -1 when damaged. */
static int next_rec(const sl_buf_t *b, size_t *off, const uint8_t **k, uint32_t *kl, const uint8_t **v, uint32_t *vl,
                    int64_t *ts) {
    size_t o = *off;
    if (o == b->len) return 0;
    if (b->len - o < 4) return -1;
    *kl = sl_ld32(b->p + o);
    o += 4;
    if (*kl == KK_NULL_KEY) {
        *k = NULL;
    } else {
        if (b->len - o < *kl) return -1;
        *k = b->p + o;
        o += *kl;
    }
    if (b->len - o < 4) return -1;
    *vl = sl_ld32(b->p + o);
    o += 4;
    if (b->len - o < (size_t)*vl + 8) return -1;
    *v = b->p + o;
    o += *vl;
    *ts = (int64_t)sl_ld64(b->p + o);
    o += 8;
    *off = o;
    return 1;
}

/* ---- options ---- */

static int64_t auto_timeout(const kk_ctx_t *ctx) {
    int64_t t = 4 * ctx->interval_ms;
    return t < 60000 ? 60000 : t;
}

/* Resolves and checks transaction.timeout.ms against the interval and the
 * broker's maximum (broker_max <= 0: unknown). */
static int resolve_timeout(kk_ctx_t *ctx, int64_t broker_max, char *err, size_t errlen) {
    int64_t t = ctx->timeout_ms;
    if (t == 0) {
        t = auto_timeout(ctx);
        if (broker_max > 0 && t > broker_max) t = broker_max;
    }
    if (t < 2 * ctx->interval_ms)
        return sl_errf(err, errlen, SL_EINVAL,
                       "kafka sink: transaction.timeout.ms %" PRId64 " is below twice the checkpoint interval (2 x %" PRId64
                       " ms): a transaction could time out before its checkpoint commits; raise it to at least %" PRId64
                       "%s",
                       t, ctx->interval_ms, 2 * ctx->interval_ms,
                       broker_max > 0 && 2 * ctx->interval_ms > broker_max
                           ? " (and the broker's transaction.max.timeout.ms with it)"
                           : "");
    if (broker_max > 0 && t > broker_max)
        return sl_errf(err, errlen, SL_EINVAL,
                       "kafka sink: transaction.timeout.ms %" PRId64
                       " is above the broker's transaction.max.timeout.ms %" PRId64 " on %s",
                       t, broker_max, ctx->bootstrap);
    ctx->eff_timeout_ms = t;
    return 0;
}

/* ---- recovery ---- */

typedef struct scan_ids {
    const kk_ctx_t *ctx;
    char **ids;
    int n;
    kk_mark_t *marks;
    int nmarks;
} scan_ids_t;

/* A marker of this sink's prefix: 1 with the incarnation, epoch and
 * transactional.id (into id), 0 for another sink's, -1 when malformed. */
static int parse_marker(const kk_ctx_t *ctx, const rd_kafka_message_t *m, uint64_t *inc, int64_t *epoch, char *id,
                        size_t cap) {
    size_t pl = strlen(ctx->prefix);
    if (!m->key || m->key_len != pl + 17 || memcmp(m->key, ctx->prefix, pl) != 0 || ((const char *)m->key)[pl] != '/')
        return 0;
    char hex[17], val[400];
    memcpy(hex, (const char *)m->key + pl + 1, 16);
    hex[16] = 0;
    size_t vl = m->len < sizeof val - 1 ? m->len : sizeof val - 1;
    if (!m->payload) return -1;
    memcpy(val, m->payload, vl);
    val[vl] = 0;
    char *end;
    *inc = strtoull(hex, &end, 16);
    if (*end) return -1;
    long long e = strtoll(val, &end, 10);
    if (end == val || *end != ' ') return -1;
    *epoch = e;
    snprintf(id, cap, "%s", end + 1);
    return 1;
}

static int collect_ids(void *c, const rd_kafka_message_t *m) {
    scan_ids_t *s = c;
    uint64_t inc;
    int64_t epoch;
    char id[300];
    if (parse_marker(s->ctx, m, &inc, &epoch, id, sizeof id) != 1) return 0;
    for (int i = 0; i < s->n; i++)
        if (strcmp(s->ids[i], id) == 0) return 0;
    s->ids = sl_realloc(s->ids, (size_t)(s->n + 1) * sizeof *s->ids);
    s->ids[s->n++] = sl_strdup(id);
    return 0;
}

static int collect_marks(void *c, const rd_kafka_message_t *m) {
    scan_ids_t *s = c;
    uint64_t inc;
    int64_t epoch;
    char id[300];
    if (parse_marker(s->ctx, m, &inc, &epoch, id, sizeof id) != 1) return 0;
    for (int i = 0; i < s->nmarks; i++)
        if (s->marks[i].inc == inc) {
            if (epoch > s->marks[i].epoch) s->marks[i].epoch = epoch;
            return 0;
        }
    s->marks = sl_realloc(s->marks, (size_t)(s->nmarks + 1) * sizeof *s->marks);
    s->marks[s->nmarks++] = (kk_mark_t){inc, epoch};
    return 0;
}

/* Initialises transactional.id `id` once: fences its earlier producer and
 * settles the transaction it left (aborted, or completed if it was already
 * committing). */
static int fence(kk_ctx_t *ctx, const char *id, char *err, size_t errlen) {
    char tmo[32];
    snprintf(tmo, sizeof tmo, "%" PRId64, ctx->eff_timeout_ms);
    const char *defaults[] = {"transactional.id", id, "transaction.timeout.ms", tmo, "client.id", "sluice-sink-fence", NULL};
    rd_kafka_conf_t *conf = sl_kafka_conf_new(ctx->bootstrap, ctx->props, defaults, err, errlen);
    if (!conf) return SL_EINVAL;
    rd_kafka_t *rk = sl_kafka_client_new(RD_KAFKA_PRODUCER, conf, err, errlen);
    if (!rk) return SL_EINVAL;
    rd_kafka_error_t *e = rd_kafka_init_transactions(rk, KK_TXN_CALL_MS);
    int rc = 0;
    if (e) {
        char b[512];
        rc = sl_errf(err, errlen, SL_EIO, "kafka sink: cannot fence transactional.id '%s' of an earlier run: %s", id,
                     sl_kafka_error_text(e, b, sizeof b));
    }
    rd_kafka_destroy(rk);
    return rc;
}

static void free_ids(kk_ctx_t *ctx);

static int kk_recover(void *vctx, int64_t restored_id, char *err, size_t errlen) {
    kk_ctx_t *ctx = vctx;
    ctx->recovered = false;
    free_ids(ctx);
    sl_free(ctx->marks);
    ctx->marks = NULL;
    ctx->nmarks = 0;
    ctx->marks_read = false;
    if (ctx->opt_err[0]) return sl_errf(err, errlen, SL_EINVAL, "%s", ctx->opt_err);
    if (ctx->delivery != SL_DELIVERY_EXACTLY_ONCE) return 0;
    const char *defaults[] = {"client.id", "sluice-sink-admin", NULL};
    rd_kafka_conf_t *conf = sl_kafka_conf_new(ctx->bootstrap, ctx->props, defaults, err, errlen);
    if (!conf) return SL_EINVAL;
    rd_kafka_t *admin = sl_kafka_client_new(RD_KAFKA_PRODUCER, conf, err, errlen);
    if (!admin) return SL_EINVAL;
    char v[64];
    int rc = sl_kafka_broker_config(admin, "transaction.max.timeout.ms", v, sizeof v, err, errlen);
    if (!rc) rc = resolve_timeout(ctx, atoll(v), err, errlen);
    static const char *const marker_cfg[] = {"cleanup.policy", "compact", NULL};
    if (!rc) rc = sl_kafka_create_topic(admin, ctx->marker_topic, 1, marker_cfg, err, errlen);
    if (!rc) {
        int n = 0;
        const char *t[1] = {ctx->topic};
        rc = sl_kafka_partition_counts(admin, t, 1, &n, SL_KAFKA_CALL_TIMEOUT_MS, err, errlen);
        if (!rc && n == 0)
            rc = sl_errf(err, errlen, SL_ENOTFOUND, "kafka sink: topic '%s' does not exist on %s", ctx->topic,
                         ctx->bootstrap);
    }
    rd_kafka_destroy(admin);
    scan_ids_t s = {ctx, NULL, 0, NULL, 0};
    char serr[512];
    if (!rc) {
        rc = sl_kafka_scan(ctx->bootstrap, ctx->props, ctx->marker_topic, false, collect_ids, &s, KK_SCAN_MS, serr,
                           sizeof serr);
        if (rc) sl_errf(err, errlen, rc, "kafka sink: reading the commit markers: %s", serr);
    }
    if (rc) {
        for (int i = 0; i < s.n; i++) sl_free(s.ids[i]);
        sl_free(s.ids);
        return rc;
    }
    ctx->ids = s.ids;
    ctx->nids = s.n;
    ctx->recovered = true;
    return 0;
}

static void free_ids(kk_ctx_t *ctx) {
    for (int i = 0; i < ctx->nids; i++) sl_free(ctx->ids[i]);
    sl_free(ctx->ids);
    ctx->ids = NULL;
    ctx->nids = 0;
}

/* Which writer settles transactional.id `id` at `parallelism`: n for
 * "<prefix>-<n>" (n % parallelism when that subtask no longer exists),
 * 0 for an id of another shape. */
static int id_owner(const kk_ctx_t *ctx, const char *id, int parallelism) {
    size_t pl = strlen(ctx->prefix);
    if (strncmp(id, ctx->prefix, pl) || id[pl] != '-' || !id[pl + 1]) return 0;
    char *end;
    long long n = strtoll(id + pl + 1, &end, 10);
    if (*end || n < 0) return 0;
    return (int)(n % parallelism);
}

/* Writer w, opening: initialises once more every recovered id it owns
 * but does not use itself (its own is initialised by its producer). */
static int settle_owned_ids(kk_writer_t *w, char *err, size_t errlen) {
    kk_ctx_t *ctx = w->ctx;
    int rc = 0;
    for (int i = 0; i < ctx->nids && !rc; i++)
        if (strcmp(ctx->ids[i], w->txn_id) && id_owner(ctx, ctx->ids[i], w->parallelism) == w->subtask)
            rc = fence(ctx, ctx->ids[i], err, errlen);
    return rc;
}

/* The committed markers, read once per process (the first writer to get
 * here reads them; the others wait for it and share its result). */
static int read_marks(kk_ctx_t *ctx, char *err, size_t errlen) {
    pthread_mutex_lock(&ctx->marks_mu);
    if (!ctx->marks_read) {
        scan_ids_t s = {ctx, NULL, 0, NULL, 0};
        char serr[512];
        serr[0] = 0;
        ctx->marks_rc = sl_kafka_scan(ctx->bootstrap, ctx->props, ctx->marker_topic, true, collect_marks, &s,
                                      KK_SCAN_MS, serr, sizeof serr);
        if (ctx->marks_rc)
            snprintf(ctx->marks_err, sizeof ctx->marks_err, "kafka sink: reading the commit markers: %s", serr);
        ctx->marks = s.marks;
        ctx->nmarks = s.nmarks;
        ctx->marks_read = true;
    }
    int rc = ctx->marks_rc;
    if (rc) sl_errf(err, errlen, rc, "%s", ctx->marks_err);
    pthread_mutex_unlock(&ctx->marks_mu);
    return rc;
}

static bool committed(const kk_ctx_t *ctx, uint64_t inc, int64_t epoch) {
    for (int i = 0; i < ctx->nmarks; i++)
        if (ctx->marks[i].inc == inc) return ctx->marks[i].epoch >= epoch;
    return false;
}

/* ---- writer ---- */

static void epoch_free(kk_epoch_t *e) { sl_buf_free(&e->recs); }

#define KK_DEBUG(...) \
    do { \
        if (getenv("SLUICE_KAFKA_DEBUG")) fprintf(stderr, __VA_ARGS__); \
    } while (0)

static void kk_close(void *writer) {
    kk_writer_t *w = writer;
    if (!w) return;
    if (w->rk) {
        /* a cancelled or failed task: what was not sent is dropped (NONE /
         * AT_LEAST_ONCE: the restored checkpoint re-sends it) */
        rd_kafka_purge(w->rk, RD_KAFKA_PURGE_F_QUEUE | RD_KAFKA_PURGE_F_INFLIGHT);
        rd_kafka_poll(w->rk, 0);
    }
    if (w->rkt) rd_kafka_topic_destroy(w->rkt);
    if (w->mkt) rd_kafka_topic_destroy(w->mkt);
    if (w->rk) rd_kafka_destroy(w->rk);
    epoch_free(&w->cur);
    for (int i = 0; i < w->npending; i++) epoch_free(&w->pending[i]);
    sl_free(w->pending);
    sl_buf_free(&w->enc);
    sl_buf_free(&w->key);
    sl_free(w);
}

static int kk_open(void *vctx, int subtask, int parallelism, const sl_schema_t *schema, void **writer, char *err,
                   size_t errlen) {
    kk_ctx_t *ctx = vctx;
    if (ctx->opt_err[0]) return sl_errf(err, errlen, SL_EINVAL, "%s", ctx->opt_err);
    kk_writer_t *w = sl_calloc(1, sizeof *w);
    w->ctx = ctx;
    w->subtask = subtask;
    w->parallelism = parallelism;
    w->key_idx = w->value_idx = -1;
    w->inc = sl_mix64((uint64_t)sl_wall_ms() ^ ((uint64_t)sl_mono_ns() << 11) ^ ((uint64_t)getpid() << 40) ^
                      (uint64_t)subtask * 0x9e3779b97f4a7c15ULL);
    int rc = 0;
    if (ctx->key_field && (w->key_idx = sl_schema_index(schema, ctx->key_field)) < 0)
        rc = sl_errf(err, errlen, SL_EINVAL, "kafka sink: key_field '%s' is not a field of the input", ctx->key_field);
    if (!rc && ctx->fmt == SL_KAFKA_RAW) {
        w->value_idx = sl_schema_index(schema, "value");
        if (w->value_idx < 0 || (sl_schema_field_type(schema, w->value_idx) != SL_BYTES &&
                                 sl_schema_field_type(schema, w->value_idx) != SL_VARCHAR))
            rc = sl_errf(err, errlen, SL_EINVAL, "kafka sink: RAW format needs an input field 'value' (BYTES or VARCHAR)");
    }
    if (!rc && ctx->delivery == SL_DELIVERY_EXACTLY_ONCE && !ctx->recovered) {
        /* recover did not run (a sink opened outside a job): check the
         * timeout without the broker's maximum */
        rc = resolve_timeout(ctx, 0, err, errlen);
    }
    char client[64], tmo[32];
    snprintf(client, sizeof client, "sluice-sink-%d", subtask);
    snprintf(tmo, sizeof tmo, "%" PRId64, ctx->eff_timeout_ms);
    snprintf(w->txn_id, sizeof w->txn_id, "%s-%d", ctx->prefix ? ctx->prefix : "", subtask);
    bool eo = ctx->delivery == SL_DELIVERY_EXACTLY_ONCE;
    const char *defaults[] = {"client.id", client,
                              "linger.ms", "5",
                              "partitioner", "murmur2_random",
                              "acks", ctx->delivery == SL_DELIVERY_NONE ? "1" : "all",
                              "enable.idempotence", ctx->delivery == SL_DELIVERY_NONE ? "false" : "true",
                              eo ? "transactional.id" : NULL, w->txn_id,
                              "transaction.timeout.ms", tmo,
                              NULL};
    rd_kafka_conf_t *conf = rc ? NULL : sl_kafka_conf_new(ctx->bootstrap, ctx->props, defaults, err, errlen);
    if (!rc && !conf) rc = SL_EINVAL;
    if (!rc) {
        rd_kafka_conf_set_dr_msg_cb(conf, dr_cb);
        rd_kafka_conf_set_opaque(conf, w);
        if (!(w->rk = sl_kafka_client_new(RD_KAFKA_PRODUCER, conf, err, errlen))) rc = SL_EINVAL;
    }
    if (!rc) {
        w->rkt = rd_kafka_topic_new(w->rk, ctx->topic, NULL);
        if (eo) w->mkt = rd_kafka_topic_new(w->rk, ctx->marker_topic, NULL);
    }
    if (!rc && eo && ctx->recovered) rc = settle_owned_ids(w, err, errlen);
    if (!rc && eo) {
        /* fences the previous producer of this id; aborts what it left open */
        rd_kafka_error_t *e = rd_kafka_init_transactions(w->rk, KK_TXN_CALL_MS);
        if (e) rc = txn_error(w, e, "initialising transactions", err, errlen);
    }
    if (!rc && eo && ctx->recovered) rc = read_marks(ctx, err, errlen);
    if (rc) {
        kk_close(w);
        return rc;
    }
    *writer = w;
    return 0;
}

/* Encodes a record into w->key / w->enc. */
static void encode(kk_writer_t *w, const sl_record_t *rec, bool *has_key) {
    w->enc.len = 0;
    if (w->value_idx >= 0) {
        uint32_t len = 0;
        const void *p = sl_schema_field_type(rec->row.schema, w->value_idx) == SL_VARCHAR
                            ? (const void *)sl_row_str(&rec->row, w->value_idx, &len)
                            : (const void *)sl_row_bytes(&rec->row, w->value_idx, &len);
        if (!sl_row_is_null(&rec->row, w->value_idx)) sl_buf_append(&w->enc, p, len);
    } else {
        sl_encode_row(w->ctx->fmt == SL_KAFKA_CSV ? SL_FMT_CSV : SL_FMT_JSON, &rec->row, &w->enc);
    }
    *has_key = w->key_idx >= 0 && !sl_row_is_null(&rec->row, w->key_idx);
    w->key.len = 0;
    if (!*has_key) return;
    sl_type_t t = sl_schema_field_type(rec->row.schema, w->key_idx);
    uint32_t len = 0;
    if (t == SL_VARCHAR || t == SL_BYTES) {
        const void *p = t == SL_VARCHAR ? (const void *)sl_row_str(&rec->row, w->key_idx, &len)
                                        : (const void *)sl_row_bytes(&rec->row, w->key_idx, &len);
        sl_buf_append(&w->key, p, len);
    } else {
        char b[64];
        size_t n = sl_row_format_field(&rec->row, w->key_idx, b, sizeof b);
        sl_buf_append(&w->key, b, n);
    }
}

static int kk_write(void *writer, const sl_record_t *rec, char *err, size_t errlen) {
    kk_writer_t *w = writer;
    bool has_key;
    encode(w, rec, &has_key);
    if (w->ctx->delivery == SL_DELIVERY_EXACTLY_ONCE) {
        sl_buf_t *b = &w->cur.recs;
        put_u32(b, has_key ? (uint32_t)w->key.len : KK_NULL_KEY);
        if (has_key) sl_buf_append(b, w->key.p, w->key.len);
        put_u32(b, (uint32_t)w->enc.len);
        sl_buf_append(b, w->enc.p, w->enc.len);
        put_u64(b, (uint64_t)rec->ts);
        w->cur.n++;
        return 0;
    }
    int rc = produce(w, w->rkt, has_key ? w->key.p : NULL, has_key ? w->key.len : 0, w->enc.p, w->enc.len, rec->ts, err,
                     errlen);
    if (rc) return rc;
    if ((++w->writes & 1023) == 0) rd_kafka_poll(w->rk, 0); /* delivery reports */
    return check_dr(w, err, errlen);
}

/* Waits until every record produced so far is acknowledged. */
static int flush_all(kk_writer_t *w, char *err, size_t errlen) {
    rd_kafka_resp_err_t e = rd_kafka_flush(w->rk, KK_TXN_CALL_MS);
    int rc = check_dr(w, err, errlen);
    if (rc) return rc;
    if (e)
        return sl_errf(err, errlen, SL_EIO, "kafka sink: %d records to topic '%s' not acknowledged within %d ms: %s",
                       rd_kafka_outq_len(w->rk), w->ctx->topic, KK_TXN_CALL_MS, rd_kafka_err2str(e));
    return 0;
}

/* One transaction: the marker (inc, epoch), then the records of epochs
 * es[0..n), committed. */
static int run_txn(kk_writer_t *w, uint64_t inc, int64_t epoch, kk_epoch_t *const *es, int n, char *err,
                   size_t errlen) {
    rd_kafka_error_t *e = rd_kafka_begin_transaction(w->rk);
    if (e) return txn_error(w, e, "beginning a transaction", err, errlen);
    char key[400], val[400];
    int kl = snprintf(key, sizeof key, "%s/%016" PRIx64, w->ctx->prefix, inc);
    int vl = snprintf(val, sizeof val, "%" PRId64 " %s", epoch, w->txn_id);
    int rc = produce(w, w->mkt, key, (size_t)kl, val, (size_t)vl, SL_NO_TIMESTAMP, err, errlen);
    for (int i = 0; !rc && i < n; i++) {
        size_t off = 0;
        const uint8_t *k, *v;
        uint32_t klen, vlen;
        int64_t ts;
        int got;
        while (!rc && (got = next_rec(&es[i]->recs, &off, &k, &klen, &v, &vlen, &ts)) == 1)
            rc = produce(w, w->rkt, k, k ? klen : 0, v, vlen, ts, err, errlen);
        if (!rc && got < 0)
            rc = sl_errf(err, errlen, SL_EFORMAT, "kafka sink: the records of checkpoint %" PRId64 " are damaged",
                         es[i]->id);
    }
    if (!rc) sl_fault_point("sink.during-commit"); /* sent, not committed */
    if (!rc) {
        for (int attempt = 0;; attempt++) {
            e = rd_kafka_commit_transaction(w->rk, KK_TXN_CALL_MS);
            if (!e) break;
            if (rd_kafka_error_is_retriable(e) && attempt < 5) {
                rd_kafka_error_destroy(e);
                continue;
            }
            if (rd_kafka_error_txn_requires_abort(e)) {
                char what[128];
                snprintf(what, sizeof what, "committing checkpoint %" PRId64 " (transaction aborted)", epoch);
                rc = txn_error(w, e, what, err, errlen);
                rd_kafka_error_t *ae = rd_kafka_abort_transaction(w->rk, KK_TXN_CALL_MS);
                if (ae) rd_kafka_error_destroy(ae);
            } else {
                char what[128];
                snprintf(what, sizeof what, "committing checkpoint %" PRId64, epoch);
                rc = txn_error(w, e, what, err, errlen);
            }
            return rc;
        }
        return check_dr(w, err, errlen);
    }
    /* producing failed: abort so read_committed consumers are not held up */
    rd_kafka_error_t *ae = rd_kafka_abort_transaction(w->rk, KK_TXN_CALL_MS);
    if (ae) rd_kafka_error_destroy(ae);
    return rc;
}

/* Commits this writer's pending epochs up to `upto` in one transaction
 * whose marker says `marker_epoch`. */
static int commit_upto(kk_writer_t *w, int64_t upto, int64_t marker_epoch, char *err, size_t errlen) {
    int n = 0;
    while (n < w->npending && w->pending[n].id <= upto) n++;
    if (n == 0) return 0;
    kk_epoch_t **es = sl_malloc((size_t)n * sizeof *es);
    for (int i = 0; i < n; i++) es[i] = &w->pending[i];
    int rc = run_txn(w, w->inc, marker_epoch ? marker_epoch : w->pending[n - 1].id, es, n, err, errlen);
    for (int i = 0; i < n; i++)
        KK_DEBUG("[%d] commit(%lld) inc %016llx epoch %lld n %lld rc %d\n", getpid(), (long long)upto,
                 (unsigned long long)w->inc, (long long)es[i]->id, (long long)es[i]->n, rc);
    sl_free(es);
    if (rc) return rc;
    for (int i = 0; i < n; i++) epoch_free(&w->pending[i]);
    memmove(w->pending, w->pending + n, (size_t)(w->npending - n) * sizeof *w->pending);
    w->npending -= n;
    return 0;
}

static int kk_pre_commit(void *writer, int64_t id, char *err, size_t errlen) {
    kk_writer_t *w = writer;
    sl_fault_point("sink.before-precommit");
    if (w->ctx->delivery == SL_DELIVERY_AT_LEAST_ONCE) {
        int rc = flush_all(w, err, errlen);
        if (rc) return rc;
    } else if (w->ctx->delivery == SL_DELIVERY_EXACTLY_ONCE && id > 0 && w->cur.n > 0) {
        w->pending = sl_realloc(w->pending, (size_t)(w->npending + 1) * sizeof *w->pending);
        kk_epoch_t *e = &w->pending[w->npending++];
        *e = w->cur;
        e->inc = w->inc;
        e->id = id;
        memset(&w->cur, 0, sizeof w->cur);
        KK_DEBUG("[%d] precommit inc %016llx epoch %lld n %lld\n", getpid(), (unsigned long long)w->inc, (long long)id,
                 (long long)e->n);
    }
    sl_fault_point("sink.after-precommit");
    return 0;
}

static int kk_commit(void *writer, int64_t id, char *err, size_t errlen) {
    kk_writer_t *w = writer;
    if (w->ctx->delivery != SL_DELIVERY_EXACTLY_ONCE) return 0;
    return commit_upto(w, id, 0, err, errlen);
}

static int kk_finish(void *writer, char *err, size_t errlen) {
    kk_writer_t *w = writer;
    if (w->ctx->delivery != SL_DELIVERY_EXACTLY_ONCE) return flush_all(w, err, errlen);
    if (w->cur.n > 0) { /* the rest, as a last epoch */
        w->pending = sl_realloc(w->pending, (size_t)(w->npending + 1) * sizeof *w->pending);
        kk_epoch_t *e = &w->pending[w->npending++];
        *e = w->cur;
        e->inc = w->inc;
        e->id = INT64_MAX;
        memset(&w->cur, 0, sizeof w->cur);
    }
    return commit_upto(w, INT64_MAX, INT64_MAX, err, errlen);
}

/* State: the pending epochs, records included. */
static int kk_snapshot(void *writer, int64_t id, void (*put)(void *, const void *, size_t), void *pc) {
    kk_writer_t *w = writer;
    if (w->ctx->delivery != SL_DELIVERY_EXACTLY_ONCE || w->npending == 0) return 0;
    sl_buf_t h = {0};
    put_u32(&h, KK_MAGIC);
    put_u32(&h, KK_VERSION);
    put_u32(&h, (uint32_t)w->npending);
    put(pc, h.p, h.len);
    for (int i = 0; i < w->npending; i++) {
        const kk_epoch_t *e = &w->pending[i];
        h.len = 0;
        put_u64(&h, e->inc);
        put_u64(&h, (uint64_t)e->id);
        put_u64(&h, (uint64_t)e->n);
        put_u64(&h, (uint64_t)e->recs.len);
        put(pc, h.p, h.len);
        put(pc, e->recs.p, e->recs.len);
    }
    sl_buf_free(&h);
    return 0;
}

/* Restore: this writer's share of the old writers' pending epochs; those
 * not committed are re-sent now, one transaction per old incarnation. */
static int kk_restore(void *writer, const void *state, size_t len, char *err, size_t errlen) {
    kk_writer_t *w = writer;
    kk_ctx_t *ctx = w->ctx;
    if (ctx->delivery != SL_DELIVERY_EXACTLY_ONCE) return 0;
    if (!ctx->recovered)
        return sl_errf(err, errlen, SL_EINVAL, "kafka sink: restore without recover (the commit markers were not read)");
    /* every writer sees the same union: chunk k is writer k % parallelism's */
    typedef struct group {
        uint64_t inc;
        int64_t max;
        kk_epoch_t **es;
        int n;
    } group_t;
    group_t *gs = NULL;
    int ng = 0, rc = 0;
    kk_epoch_t *views = NULL; /* borrowed record bytes (no copy) */
    int nviews = 0;
    const uint8_t *p = state, *end = p + len;
    for (int k = 0; p < end && !rc; k++) {
        if (end - p < 4) goto bad;
        uint32_t n = sl_ld32(p);
        p += 4;
        if ((size_t)(end - p) < n) goto bad;
        const uint8_t *q = p, *qe = p + n;
        p += n;
        if (k % w->parallelism != w->subtask || n == 0) continue;
        if (n < 12 || sl_ld32(q) != KK_MAGIC) goto bad;
        if (sl_ld32(q + 4) != KK_VERSION)
            return sl_errf(err, errlen, SL_EINVAL, "kafka sink: checkpoint state of version %u, expected %u",
                           sl_ld32(q + 4), KK_VERSION);
        uint32_t cnt = sl_ld32(q + 8);
        q += 12;
        for (uint32_t i = 0; i < cnt; i++) {
            if (qe - q < 32) goto bad;
            kk_epoch_t e;
            memset(&e, 0, sizeof e);
            e.inc = sl_ld64(q);
            e.id = (int64_t)sl_ld64(q + 8);
            e.n = (int64_t)sl_ld64(q + 16);
            uint64_t bytes = sl_ld64(q + 24);
            q += 32;
            if ((uint64_t)(qe - q) < bytes) goto bad;
            e.recs.p = (uint8_t *)q; /* borrowed from the restored state */
            e.recs.len = e.recs.cap = (size_t)bytes;
            q += bytes;
            KK_DEBUG("[%d] restore: inc %016llx epoch %lld n %lld committed %d\n", getpid(), (unsigned long long)e.inc,
                     (long long)e.id, (long long)e.n, committed(ctx, e.inc, e.id));
            if (committed(ctx, e.inc, e.id)) continue;
            views = sl_realloc(views, (size_t)(nviews + 1) * sizeof *views);
            views[nviews++] = e;
        }
        if (q != qe) goto bad;
    }
    /* group by incarnation, epochs in order (a writer's were kept in order) */
    for (int i = 0; i < nviews; i++) {
        int g = 0;
        while (g < ng && gs[g].inc != views[i].inc) g++;
        if (g == ng) {
            gs = sl_realloc(gs, (size_t)(ng + 1) * sizeof *gs);
            gs[ng++] = (group_t){views[i].inc, INT64_MIN, NULL, 0};
        }
        gs[g].es = sl_realloc(gs[g].es, (size_t)(gs[g].n + 1) * sizeof *gs[g].es);
        gs[g].es[gs[g].n++] = &views[i];
        if (views[i].id > gs[g].max) gs[g].max = views[i].id;
    }
    for (int g = 0; g < ng && !rc; g++) {
        fprintf(stderr, "sluice: kafka sink %s: re-sending %d uncommitted checkpoint(s) up to %" PRId64
                        " of an earlier run\n", w->txn_id, gs[g].n, gs[g].max);
        rc = run_txn(w, gs[g].inc, gs[g].max, gs[g].es, gs[g].n, err, errlen);
    }
    for (int g = 0; g < ng; g++) sl_free(gs[g].es);
    sl_free(gs);
    sl_free(views);
    return rc;
bad:
    for (int g = 0; g < ng; g++) sl_free(gs[g].es);
    sl_free(gs);
    sl_free(views);
    return sl_errf(err, errlen, SL_EFORMAT, "kafka sink: the checkpoint's sink state is damaged");
}

static void kk_destroy(void *vctx) {
    kk_ctx_t *ctx = vctx;
    sl_free(ctx->bootstrap);
    sl_free(ctx->topic);
    sl_free(ctx->key_field);
    sl_free(ctx->prefix);
    sl_free(ctx->marker_topic);
    sl_kafka_props_free(ctx->props);
    free_ids(ctx);
    sl_free(ctx->marks);
    pthread_mutex_destroy(&ctx->marks_mu);
    sl_free(ctx);
}

static const sl_sink_ops_t kafka_sink_ops = {
    .name = "kafka",
    .open = kk_open,
    .write = kk_write,
    .finish = kk_finish,
    .close = kk_close,
    .destroy = kk_destroy,
    .pre_commit = kk_pre_commit,
    .commit = kk_commit,
    .recover = kk_recover,
    .snapshot = kk_snapshot,
    .restore = kk_restore,
};

sl_kafka_sink_opts_t sl_kafka_sink_defaults(void) {
    sl_kafka_sink_opts_t o;
    memset(&o, 0, sizeof o);
    o.format = SL_KAFKA_JSON;
    o.delivery = SL_DELIVERY_AT_LEAST_ONCE;
    return o;
}

sl_sink_t sl_kafka_sink(const sl_kafka_sink_opts_t *o) {
    kk_ctx_t *ctx = sl_calloc(1, sizeof *ctx);
    pthread_mutex_init(&ctx->marks_mu, NULL);
    sl_kafka_sink_opts_t d = sl_kafka_sink_defaults();
    if (!o) o = &d;
    ctx->bootstrap = sl_strdup(o->bootstrap_servers ? o->bootstrap_servers : "");
    ctx->topic = sl_strdup(o->topic ? o->topic : "");
    ctx->key_field = o->key_field ? sl_strdup(o->key_field) : NULL;
    ctx->prefix = o->transactional_id_prefix ? sl_strdup(o->transactional_id_prefix) : NULL;
    ctx->marker_topic = sl_strdup(o->marker_topic && *o->marker_topic ? o->marker_topic : KK_DEFAULT_MARKER_TOPIC);
    ctx->fmt = o->format;
    ctx->delivery = o->delivery;
    ctx->interval_ms = o->checkpoint_interval_ms;
    ctx->timeout_ms = o->transaction_timeout_ms;
    ctx->props = sl_kafka_props_copy(o->properties);
    char *e = ctx->opt_err;
    size_t n = sizeof ctx->opt_err;
    if (!*ctx->bootstrap)
        snprintf(e, n, "kafka sink: bootstrap_servers is required");
    else if (!*ctx->topic)
        snprintf(e, n, "kafka sink: a topic is required");
    else if (o->format != SL_KAFKA_JSON && o->format != SL_KAFKA_CSV && o->format != SL_KAFKA_RAW)
        snprintf(e, n, "kafka sink: format %d is not JSON, CSV or RAW", (int)o->format);
    else if ((unsigned)o->delivery > SL_DELIVERY_EXACTLY_ONCE)
        snprintf(e, n, "kafka sink: delivery %d is not NONE, AT_LEAST_ONCE or EXACTLY_ONCE", (int)o->delivery);
    else if (o->delivery == SL_DELIVERY_EXACTLY_ONCE && (!ctx->prefix || !*ctx->prefix))
        snprintf(e, n, "kafka sink: EXACTLY_ONCE needs a transactional_id_prefix (unique per sink and job)");
    else if (o->delivery == SL_DELIVERY_EXACTLY_ONCE && (strchr(ctx->prefix, '/') || strchr(ctx->prefix, ' ')))
        snprintf(e, n, "kafka sink: transactional_id_prefix '%s' must not contain '/' or spaces", ctx->prefix);
    else if (o->delivery == SL_DELIVERY_EXACTLY_ONCE && strlen(ctx->prefix) > 200)
        snprintf(e, n, "kafka sink: transactional_id_prefix is longer than 200 characters");
    else if (o->delivery == SL_DELIVERY_EXACTLY_ONCE && o->checkpoint_interval_ms <= 0)
        snprintf(e, n, "kafka sink: EXACTLY_ONCE needs checkpoint_interval_ms (the job's checkpoint interval), got %" PRId64,
                 o->checkpoint_interval_ms);
    else if (o->delivery == SL_DELIVERY_EXACTLY_ONCE && o->transaction_timeout_ms < 0)
        snprintf(e, n, "kafka sink: transaction_timeout_ms %" PRId64 " is negative", o->transaction_timeout_ms);
    sl_sink_t s = {&kafka_sink_ops, ctx};
    return s;
}
