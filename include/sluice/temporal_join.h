/*
 * temporal_join.h — the event-time temporal join (Flink SQL's
 * `JOIN versions FOR SYSTEM_TIME AS OF probe.rowtime ON key`, the
 * TemporalRowTimeJoinOperator).
 *
 * The versioned table is built from a changelog stream keyed like the
 * probe stream.  Each changelog row is a version of its key, valid from its
 * event time (the record timestamp, from the stream's watermark strategy)
 * until the next version of that key; a version is either a value (insert
 * or update: an upsert) or a delete.  Rows carry no row kind, so the
 * changelog names a BOOLEAN field (delete_field) that is true for a delete;
 * NULL or false is an upsert.  Without delete_field every row is an upsert.
 * Two versions of one key with the same timestamp: the later one to arrive
 * replaces the earlier one.
 *
 * A probe row at time t joins the version valid at t: the latest version
 * with timestamp <= t, unless that version is a delete.  It is emitted when
 * the operator's watermark (minimum of both inputs) reaches t, so versions
 * that arrive out of order but before the watermark passes t still count.
 * Until then probe rows wait in keyed state.  Inner join: a probe row
 * without a valid version is dropped; left outer join: it is emitted with
 * NULL in every version field.  Output rows carry the probe row's
 * timestamp.
 *
 * Cleanup: when the watermark passes a key's probe rows or versions, the
 * versions no future probe row can reach — those older than the newest
 * version <= watermark, and that one too if it is a delete — are dropped.
 * A probe row that arrives behind the watermark (late) is joined, at the
 * next watermark, with the versions still kept, as in Flink.
 *
 * Output schema: every probe field, then the chosen version fields (named
 * with version_prefix in front when given; nullable in a left join).
 *
 * State (probe rows, versions, timers) is keyed state and restores at any
 * parallelism, on the heap or RocksDB backend.
 *
 * Threads: sl_temporal_join runs on the user's thread before execution;
 * the statistics are read after sl_env_execute returned.
 */
#ifndef SLUICE_TEMPORAL_JOIN_H
#define SLUICE_TEMPORAL_JOIN_H

#include "sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sl_temporal_join_kind {
    SL_TEMPORAL_INNER = 0,
    SL_TEMPORAL_LEFT = 1, /* LEFT OUTER: probe rows without a valid version get NULLs */
} sl_temporal_join_kind_t;

typedef struct sl_temporal_join_stats sl_temporal_join_stats_t;

typedef struct sl_temporal_join_opts {
    sl_temporal_join_kind_t kind;
    /* BOOLEAN field of the changelog: true = delete.  NULL: no deletes. */
    const char *delete_field;
    /* Version fields in the output, in this order.  NULL: every field of
     * the changelog except delete_field. */
    const char *const *version_fields;
    int nversion_fields;
    /* Put in front of each version field's name in the output (NULL: none).
     * A name that is then also a probe field is refused. */
    const char *version_prefix;
    /* When non-NULL, receives the join's statistics (owned by the
     * environment, valid until sl_env_destroy). */
    sl_temporal_join_stats_t **stats_out;
} sl_temporal_join_opts_t;

/* Joins the probe stream with the versioned table of the changelog stream;
 * both keyed by the join key (equal keys must give equal key bytes: when
 * both are keyed by a field, the fields must have the same type).  Default
 * name "TemporalJoin".  Mistakes (unknown or mistyped fields, name clashes,
 * an unknown kind) are recorded on the environment by name and NULL is
 * returned.  opts is read during the call only.  User's thread. */
SL_API sl_stream_t *sl_temporal_join(sl_keyed_t *probe, sl_keyed_t *versions, const sl_temporal_join_opts_t *opts);

/* Statistics of sl_env_execute, summed over subtasks (and over attempts
 * when the job restarted); read them after it returned:
 * rows emitted (joined or padded), probe rows without a valid version,
 * versions dropped by cleanup, and what the state held when the run ended
 * with both inputs finished (versions and probe rows; -1 when the run did
 * not end that way). */
SL_API int64_t sl_temporal_join_emitted(const sl_temporal_join_stats_t *s);
SL_API int64_t sl_temporal_join_unmatched(const sl_temporal_join_stats_t *s);
SL_API int64_t sl_temporal_join_versions_dropped(const sl_temporal_join_stats_t *s);
SL_API int64_t sl_temporal_join_versions_at_end(const sl_temporal_join_stats_t *s);
SL_API int64_t sl_temporal_join_probes_at_end(const sl_temporal_join_stats_t *s);

#ifdef __cplusplus
}
#endif
#endif
