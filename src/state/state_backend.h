/*
 * state_backend.h — the keyed state backend interface.
 *
 * One backend instance serves one keyed operator in one subtask and holds
 * the key groups of that subtask's range.  Every entry is addressed by
 * (state id, key group, key bytes, namespace bytes): the namespace is what
 * Flink calls the state's namespace — the window for window state, empty
 * for a process function.  Values are opaque bytes.
 *
 * The operator sets the current key (sl_kb_set_key) before it touches
 * state; every call below works on the current key.  The interface is a
 * table of function pointers (like SQLite's VFS) so that a RocksDB backend
 * can implement it with the key group as the key prefix.
 *
 * Threading: a backend is owned by its task's thread; no locking.
 *
 * Pointers returned by get/get_mut stay valid until the next call that
 * modifies the same state (put, get_mut creating an entry, append, remove,
 * clear) — callers copy what they keep.
 */
#ifndef SL_STATE_BACKEND_H
#define SL_STATE_BACKEND_H

#include <stdbool.h>
#include <stdint.h>

#include "state/key_group.h"

typedef enum sl_state_kind {
    SL_STATE_VALUE = 0,  /* one value per (key, ns) */
    SL_STATE_LIST,       /* list of byte strings per (key, ns) */
    SL_STATE_MAP,        /* user-key -> value per (key, ns) */
} sl_state_kind_t;

typedef struct sl_state_desc {
    const char *name;    /* unique within the operator */
    sl_state_kind_t kind;
} sl_state_desc_t;

typedef struct sl_keyed_backend sl_keyed_backend_t;

/* Iteration callbacks return 0 to go on, non-zero to stop (that value is
 * returned by the iterating call). */
typedef int (*sl_kb_list_cb)(void *c, const void *v, uint32_t len);
typedef int (*sl_kb_map_cb)(void *c, const void *k, uint32_t klen, const void *v, uint32_t vlen);
typedef int (*sl_kb_entry_cb)(void *c, const void *key, uint32_t klen, const void *ns, uint32_t nslen);

typedef struct sl_keyed_backend_ops {
    const char *name;
    /* Registers a state; returns its id (>= 0) or < 0.  Registering the
     * same name twice returns the same id. */
    int (*register_state)(sl_keyed_backend_t *b, const sl_state_desc_t *d);

    /* VALUE: NULL when absent. */
    const void *(*get)(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, uint32_t *vlen);
    /* VALUE: a writable value of exactly vlen bytes; when absent it is
     * created zero-filled and *created set.  After changing it call put
     * with the same pointer (a no-op for the heap backend). */
    void *(*get_mut)(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, uint32_t vlen,
                     bool *created);
    int (*put)(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, const void *v, uint32_t vlen);
    /* Removes the (key, ns) entry of any kind. */
    int (*remove)(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen);

    /* LIST */
    int (*list_add)(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, const void *v, uint32_t vlen);
    /* Calls cb for each element in insertion order; returns the number of
     * elements (or the callback's non-zero value). */
    int (*list_foreach)(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, sl_kb_list_cb cb, void *c);
    /* Replaces the list with n elements (vals[i], lens[i]); n = 0 removes. */
    int (*list_replace)(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, int n,
                        const void *const *vals, const uint32_t *lens);

    /* MAP */
    const void *(*map_get)(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, const void *uk,
                           uint32_t uklen, uint32_t *vlen);
    int (*map_put)(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, const void *uk, uint32_t uklen,
                   const void *v, uint32_t vlen);
    int (*map_remove)(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, const void *uk,
                      uint32_t uklen);
    int (*map_foreach)(sl_keyed_backend_t *b, int sid, const void *ns, uint32_t nslen, sl_kb_map_cb cb, void *c);

    /* Every (key, ns) that has state `sid`, across all key groups (for
     * tests, queryable state and "apply to all keys").  The callback must
     * not modify the state it iterates. */
    int (*foreach_entry)(sl_keyed_backend_t *b, int sid, sl_kb_entry_cb cb, void *c);
    /* Number of (key, ns) entries of state sid. */
    int64_t (*count)(sl_keyed_backend_t *b, int sid);

    /* Optional: starts loading the memory that a later access of (key with
     * this hash in key group kg, ns) of state sid will touch.  A hint: no
     * effect on results. */
    void (*prefetch)(sl_keyed_backend_t *b, int sid, int kg, uint64_t keyhash, const void *ns, uint32_t nslen);

    void (*destroy)(sl_keyed_backend_t *b);
} sl_keyed_backend_ops_t;

/* The part every backend shares; backends embed it first. */
struct sl_keyed_backend {
    const sl_keyed_backend_ops_t *ops;
    int max_parallelism;
    sl_kg_range_t range;
    /* current key (set by sl_kb_set_key; bytes owned by the backend) */
    uint8_t *key;
    uint32_t keylen, keycap;
    uint64_t keyhash;
    int kg;
};

/* The heap backend: a hash table per (state, key group). */
sl_keyed_backend_t *sl_heap_backend_new(int max_parallelism, sl_kg_range_t range);

/* Sets the current key; computes its hash and key group.  Returns the key
 * group (asserted to be inside the backend's range). */
int sl_kb_set_key(sl_keyed_backend_t *b, const void *key, uint32_t len);
/* Same, when the caller already knows the hash. */
int sl_kb_set_key_hashed(sl_keyed_backend_t *b, const void *key, uint32_t len, uint64_t hash);
void sl_kb_base_init(sl_keyed_backend_t *b, const sl_keyed_backend_ops_t *ops, int maxp, sl_kg_range_t r);
void sl_kb_base_free(sl_keyed_backend_t *b);

#endif
