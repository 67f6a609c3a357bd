/*
 * stream_graph.h — the logical job as the API builds it (Flink's
 * StreamGraph): nodes are operators, edges say how records move between
 * them.  job_graph.c turns it into chained vertices, and the executor into
 * parallel subtasks.
 *
 * Everything here is owned by the environment and built on the user's
 * thread before execution; during execution it is read-only.
 */
#ifndef SL_STREAM_GRAPH_H
#define SL_STREAM_GRAPH_H

#include "operators/operator.h"
#include "sluice/sluice.h"

typedef enum sl_partitioning {
    SL_PART_DEFAULT = 0, /* forward if parallelism matches, else rebalance */
    SL_PART_FORWARD,
    SL_PART_REBALANCE,
    SL_PART_RESCALE,
    SL_PART_BROADCAST,
    SL_PART_HASH,        /* by key group of the key selector */
} sl_partitioning_t;

typedef enum sl_node_kind { SL_NODE_SOURCE, SL_NODE_OPERATOR, SL_NODE_SINK } sl_node_kind_t;


typedef struct sl_node {
    int id;
    sl_node_kind_t kind;
    char *name;
    char *uid;
    int parallelism;            /* 0: the environment's default */
    bool new_chain;
    char *slot_group;           /* sl_slot_sharing_group; NULL: inherited from the inputs */
    int ninputs;                /* number of logical inputs (0, 1, 2) */
    bool keyed[2];
    sl_key_selector_t key[2];
    sl_schema_t *out_schema;    /* main output (ref held) */
    const sl_schema_t *in_schema[2];
    int nstate_schemas;         /* typed keyed states (sl_keyed_state_schema) */
    char **state_names;         /* owned */
    sl_schema_t **state_schemas; /* refs held */
    sl_op_create_fn create;
    void *spec;
    void (*free_spec)(void *spec);
    /* sources */
    sl_source_t source;
    sl_watermark_strategy_t wm;
    /* totals over all subtasks of the last run */
    int64_t records_in, records_out, records_skipped;
} sl_node_t;

typedef struct sl_edge {
    int src;                    /* node id */
    int tag;                    /* 0: main output, else side-output tag */
    int dst;
    int dst_input;              /* 0 or 1 */
    sl_partitioning_t part;
    sl_key_selector_t key;      /* for SL_PART_HASH */
} sl_edge_t;

/* One upstream of a stream handle (a union has several). */
typedef struct sl_stream_input {
    int node;
    int tag;
    sl_partitioning_t part;
    sl_key_selector_t key;
    bool keyed;
} sl_stream_input_t;

struct sl_stream {
    sl_env_t *env;
    int node;                   /* the node this handle configures (-1 for a union) */
    sl_stream_input_t *ins;
    int nins;
    const sl_schema_t *schema;
};

struct sl_keyed {
    sl_stream_t *s;             /* with part = HASH and the selector set */
};

/* Adds an operator node fed by `in` (input 0) and optionally `in2`
 * (input 1).  keyed: the input(s) are keyed streams (their key selectors
 * go to the operator).  Takes a reference on out_schema (may be NULL to
 * mean "same as input").  Returns the new node's stream, or NULL after
 * recording an error on the environment. */
sl_stream_t *sl_graph_add_operator(sl_stream_t *in, sl_stream_t *in2, bool keyed, const char *default_name,
                                   sl_op_create_fn create, void *spec, void (*free_spec)(void *),
                                   const sl_schema_t *out_schema);
/* The environment frees p with free_fn when it is destroyed (for handles
 * such as windowed streams that the API hands out). */
void sl_env_own(sl_env_t *env, void *p, void (*free_fn)(void *));
/* Records a builder error on the environment (the first one wins). */
void sl_env_errorf(sl_env_t *env, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Declares (or finds) a side-output tag; returns its id or < 0. */
int sl_env_tag(sl_env_t *env, const char *name, const sl_schema_t *schema);

#endif
