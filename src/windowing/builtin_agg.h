/*
 * builtin_agg.h — the aggregate function behind sl_window_agg (builtin_agg.c):
 * the compiled list of aggregates that the builder (api/window_api.c) fills
 * and the sl_aggregate_fn_t that the window operator runs over it.
 */
#ifndef SL_BUILTIN_AGG_H
#define SL_BUILTIN_AGG_H

#include "windowing/window.h"

typedef enum sl_agg_kind { SL_AGG_COUNT_STAR, SL_AGG_COUNT, SL_AGG_SUM, SL_AGG_MIN, SL_AGG_MAX, SL_AGG_AVG } sl_agg_kind_t;

typedef struct sl_agg_item {
    sl_agg_kind_t kind;
    int field;        /* input field; -1 for count(*) */
    bool fp;          /* the running value is a double */
    sl_type_t in_type;
    int out;          /* output field */
} sl_agg_item_t;

#define SL_AGG_SLOT 16

typedef struct sl_builtin_agg {
    int n;
    sl_agg_item_t items[64];
    sl_key_selector_t key;  /* the keyed stream's selector (a copy) */
    const sl_schema_t *in;  /* input schema (the stream's; lives as long as the env) */
    int nkeys;
    int key_out[SL_KEY_MAX_FIELDS];
    int win_start, win_end; /* output fields */
} sl_builtin_agg_t;

/* The aggregate function over b (b is its context: it must outlive the
 * job; the environment owns it). */
sl_aggregate_fn_t sl_builtin_agg_fn(sl_builtin_agg_t *b);

#endif
