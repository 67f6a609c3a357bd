/*
 * sluice/sql.h — Flink SQL on sluice: running Flink's compiled plans.
 *
 * Flink's own planner compiles a SQL script into Flink's compiled-plan JSON
 * (FLIP-190, TableEnvironment.compilePlanSql; `sluice sql --compile` runs it
 * through sql/compiler's jar), and sluice executes that plan natively: no
 * JVM while the job runs.  It runs table source scans of the 'nexmark'
 * connector, calc (projection and filter over Flink's expressions),
 * watermark assigners, forward / hash / singleton exchanges, unions, group
 * aggregates (non-windowed GROUP BY with COUNT, SUM, AVG, MIN, MAX,
 * DISTINCT and FILTER; their changelog of +I / -U / +U / -D rows flows to
 * the sinks) and sinks ('blackhole', 'print').  Anything else in a plan — a node, a node version,
 * a function, a type, a connector or an option — is refused by
 * sl_sql_plan_parse, naming it (and the statement's file and line when the
 * plan came from `sluice sql --compile`), before a job is built.
 */
#ifndef SLUICE_SQL_H
#define SLUICE_SQL_H

#include "sluice.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct sl_sql_plan sl_sql_plan_t;

/* Parses and checks a compiled plan (len bytes of JSON).  Returns the plan,
 * or NULL with a message in err naming the unsupported or malformed part
 * (with the JSON path of a bad field).  Takes no ownership of json.  Any
 * thread. */
SL_API sl_sql_plan_t *sl_sql_plan_parse(const char *json, size_t len, char *err, size_t errlen);
/* The same, reading the plan from the file at path. */
SL_API sl_sql_plan_t *sl_sql_plan_load(const char *path, char *err, size_t errlen);
/* Releases the caller's reference (a job built from the plan keeps its own
 * until its environment is destroyed).  Any thread. */
SL_API void sl_sql_plan_free(sl_sql_plan_t *plan);
/* Number of nodes of the plan, and a one-line description of node i
 * ("3 stream-exec-calc_1 Calc(select=[...])") for `sluice info`. */
SL_API int sl_sql_plan_node_count(const sl_sql_plan_t *plan);
SL_API const char *sl_sql_plan_node_desc(const sl_sql_plan_t *plan, int i);

typedef struct sl_sql_opts {
    /* If set, every sink of the plan is replaced by one that appends each
     * row, in sluice's canonical text form (the sql/compiler jar's `run`
     * prints the same form), one line per row, to this file. */
    const char *collect_path;
    /* If >= 0, overrides every nexmark source's 'events.num'. */
    int64_t nexmark_events;
    /* If set (and collect_path is not), every sink of the plan is the sink
     * this returns for it (sink_index counts the plan's sinks in order),
     * over rows of `schema`: the sink's columns flattened, and for an
     * updating input a trailing INT field "$rowkind" holding Flink's
     * RowKind byte (0 +I, 1 -U, 2 +U, 3 -D).  Called from the builder
     * thread by sl_sql_plan_build; the sink is owned by the job. */
    sl_sink_t (*sink_override)(void *ctx, int sink_index, const sl_schema_t *schema);
    void *sink_ctx;
    /* If > 0, every nexmark source reads this many splits (whatever its
     * parallelism), so a checkpoint restores at another parallelism
     * (sl_nexmark_opts_t.splits); 0: one per subtask. */
    int nexmark_splits;
} sl_sql_opts_t;

/* Options with nothing overridden. */
SL_API sl_sql_opts_t sl_sql_opts_default(void);
/* Adds the plan's job to env (sources, operators, sinks) with env's
 * parallelism; then run it with sl_env_execute.  Returns 0, or SL_EINVAL
 * with the message in sl_env_error(env).  The environment takes its own
 * reference to the plan.  Builder thread (the one that owns env). */
SL_API int sl_sql_plan_build(sl_env_t *env, sl_sql_plan_t *plan, const sl_sql_opts_t *opts);

#ifdef __cplusplus
}
#endif
#endif
