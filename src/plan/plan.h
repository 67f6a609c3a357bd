/*
 * plan.h — the job plan (Flink's JobGraph): what the builder hands to the
 * JobManager and what a deployment names.  It is data: no pointer, no
 * function, nothing that depends on the process that built it.  It can be
 * encoded (JSON, versioned), shipped, decoded and compared by fingerprint.
 *
 *   nodes     every operator of the stream graph: id, kind, name, uid,
 *             parallelism, inputs, slot sharing group, the row schemas of
 *             its typed keyed states
 *   vertices  chains of nodes that run in one task (job_graph.c decided the
 *             chaining); a vertex's subtasks are its parallel instances
 *   edges     between nodes: the side-output tag, the input of the
 *             destination, the resolved partitioning, chained or not
 *   config    what the JobManager and the TaskManagers need to run it:
 *             checkpointing, state backend, buffers, restart strategy
 *
 * User code is not in the plan: a node names it by its id, and the process
 * that runs a subtask gets the functions from the job's own code (job_code.h):
 * in embedded mode the environment that built the plan, in a cluster the
 * job's artifact rebuilt with the same arguments, whose plan must have the
 * same fingerprint.
 *
 * Task numbering (used by the coordinator and in messages): vertex-major,
 * index = sum of the parallelism of the vertices before it + subtask.
 */
#ifndef SL_PLAN_H
#define SL_PLAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "checkpoint/ckpt_config.h"
#include "common/common.h"
#include "plan/restart_config.h"

#define SL_PLAN_VERSION 1

typedef enum sl_plan_node_kind { SL_PLAN_SOURCE = 0, SL_PLAN_OPERATOR = 1, SL_PLAN_SINK = 2 } sl_plan_node_kind_t;

typedef enum sl_plan_part {
    SL_PLAN_FORWARD = 1,
    SL_PLAN_REBALANCE = 2,
    SL_PLAN_RESCALE = 3,
    SL_PLAN_BROADCAST = 4,
    SL_PLAN_HASH = 5,
} sl_plan_part_t;

/* A keyed state declared with a row schema (sl_keyed_state_schema). */
typedef struct sl_plan_state_schema {
    char *name;
    char *schema;          /* DDL (sl_schema_format) */
} sl_plan_state_schema_t;

typedef struct sl_plan_node {
    int id;
    int kind;              /* sl_plan_node_kind_t */
    char *name;
    char *uid;             /* the state identity: the user's uid, else one derived from the node's
                            * place in the graph ("<name>-<16 hex>", api/plan_build.c) */
    bool has_user_uid;
    int parallelism;       /* effective */
    int ninputs;
    bool keyed[2];
    char *slot_group;      /* slot sharing group ("default") */
    char *out_schema;      /* DDL of the main output, for the fingerprint and for tools */
    int nstate_schemas;    /* typed keyed states, in declaration order */
    sl_plan_state_schema_t *state_schemas;
    /* How input 0's key is made, for tools that name a key by its value
     * (queryable state, jobmanager/state_query.c): "" not keyed;
     * "field <DDL>": the one field's key bytes (sl_key_by);
     * "fields <DDL>": several fields as sl_key_by_fields encodes them, in
     * key order; "function": a key function's bytes */
    char *key;
} sl_plan_node_t;

typedef struct sl_plan_vertex {
    int id;
    char *name;            /* "Source: x -> Map -> Filter" */
    int parallelism;
    int nnodes;
    int *nodes;            /* chain members; nodes[0] is the head */
    char *slot_group;      /* the head's */
} sl_plan_vertex_t;

typedef struct sl_plan_edge {
    int src, dst;          /* node ids */
    int tag;               /* 0: main output */
    int dst_input;
    int part;              /* sl_plan_part_t, resolved */
    bool chained;
} sl_plan_edge_t;

typedef struct sl_plan_config {
    int max_parallelism;
    int buffer_size, buffers_per_channel;
    int64_t buffer_timeout_ms; /* execution.buffer-timeout.interval: longest wait of a record in a partly
                                * filled output buffer of a busy task; -1: only when full (or idle) */
    int64_t wm_interval_ms;
    bool ckpt_enabled;
    sl_ckpt_config_t ckpt;
    char *ckpt_dir;        /* "" when checkpoints are kept in memory only */
    char *savepoint_dir;   /* execution.checkpointing.savepoint-dir; "" = none */
    int ckpt_retained;
    int ckpt_retention;    /* sl_checkpoint_retention_t */
    int backend;           /* sl_state_backend_kind_t */
    char *rocksdb_dir;     /* "" = $TMPDIR or /tmp */
    int64_t rocksdb_cache_bytes, rocksdb_write_buffer_bytes, rocksdb_value_cache_bytes;
    bool incremental;
    sl_restart_config_t restart; /* the environment's, or the default it implies */
} sl_plan_config_t;

typedef struct sl_plan {
    int version;
    char *job_name;
    char *job_id;          /* the directory name under the checkpoint directory */
    sl_plan_config_t cfg;
    int nnodes;
    sl_plan_node_t *nodes; /* by id */
    int nvertices;
    sl_plan_vertex_t *vertices;
    int *vertex_of;        /* per node */
    int *index_in_vertex;  /* per node */
    int nedges;
    sl_plan_edge_t *edges;
    int ntags;             /* side-output tags, [0] = main output */
    char **tags;
    int ntasks;            /* sum of the vertices' parallelism */
    int *first_task;       /* per vertex: index of its subtask 0 */
} sl_plan_t;

void sl_plan_free(sl_plan_t *p);
/* Encodes as compact JSON with sorted keys (the same plan, the same bytes). */
int sl_plan_encode(const sl_plan_t *p, sl_buf_t *out, char *err, size_t errlen);
/* Decodes and checks an encoded plan: version, every count, id and index
 * in range, chains consistent with edges.  *out is new (sl_plan_free +
 * sl_free).  SL_EFORMAT names the field that is wrong. */
int sl_plan_decode(const void *p, size_t len, sl_plan_t **out, char *err, size_t errlen);
/* xxh64 of the encoding: two plans with the same fingerprint run the same
 * topology with the same uids, parallelism, schemas and settings. */
uint64_t sl_plan_fingerprint(const sl_plan_t *p);
/* Derived tables (vertex_of, index_in_vertex, first_task, ntasks) from
 * nodes, vertices: called by the builder and by decode. */
void sl_plan_index(sl_plan_t *p);
/* The task (vertex, subtask) of a task index, or -1. */
int sl_plan_task_vertex(const sl_plan_t *p, int index, int *subtask);
const char *sl_plan_part_name(int part);

/* The nodes likely to hold state (sources, sinks, keyed operators) whose
 * uid is derived, not the user's: "'name' (uid), ..." into buf; returns
 * how many (savepoints and restores warn about them). */
int sl_plan_derived_uids(const sl_plan_t *p, char *buf, size_t cap);

/* The plan as Flink's `flink info` prints it (the stream graph's JSON):
 * {"nodes":[{"id","type","pact","contents","parallelism",
 * "predecessors":[{"id","ship_strategy","side"}]}]}, nodes in id order,
 * pact "Data Source" / "Operator" / "Data Sink", ship_strategy FORWARD,
 * REBALANCE, RESCALE, BROADCAST or HASH.  Appended to out (no NUL). */
void sl_plan_flink_json(const sl_plan_t *p, sl_buf_t *out);

#endif
