/*
 * cep_int.h — the inside of CEP (include/sluice/cep.h): the compiled
 * pattern, the NFA and its serialized form.
 *
 *   pattern.c  the builder (sl_pattern_*), checks, compilation to cep_def_t
 *   nfa.c      the NFA over one key: partial matches, completed matches
 *              waiting for the skip strategy, timeouts; (de)serialization
 *   cep_op.c   the keyed operator: event buffer in keyed state, event-time
 *              driving of the NFA, matches materialized for user functions
 *
 * The NFA.  A partial match is the list of events it took (each as a
 * reference (ts, seq) into the key's event buffer, with its stage), the
 * stage of its last event and how many events that stage has, and a bit
 * set of the *options* still open: bit 0 "one more event of this stage",
 * bit d "the first event of stage stage+d" (stages in between optional).
 * An option has the contiguity of the transition it stands for (inner
 * contiguity of the stage for bit 0, the target stage's own otherwise):
 * on each event an open option whose target's condition holds takes the
 * event (a new partial match); afterwards a strict option closes, a relaxed
 * one closes if it could take the event, a non-deterministic one stays.  A
 * partial match with no open option is gone.  This is Flink's NFA with its
 * ignore/proceed edges folded into one state per partial match (Flink may
 * keep two branches with the same events; here there is one).
 */
#ifndef SL_CEP_INT_H
#define SL_CEP_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/common.h"
#include "sluice/cep.h"

#define CEP_MAX_STAGES 16
#define CEP_INF INT_MAX

typedef enum cep_contig { CEP_STRICT = 0, CEP_RELAXED = 1, CEP_ANY = 2 } cep_contig_t;

typedef struct cep_cond {
    sl_cep_cond_fn fn;
    sl_cep_iter_cond_fn ifn; /* iterative (fn NULL) */
    void *ctx;
    bool is_or; /* ORed with what came before (else ANDed) */
} cep_cond_t;

typedef struct cep_stage {
    char *name;
    cep_contig_t outer; /* to the stage before (ignored for the first) */
    cep_contig_t inner; /* between events of this stage (looping stages) */
    int min, max;       /* events when present (max CEP_INF: unbounded) */
    bool optional;      /* may also have no event */
    cep_cond_t *conds;
    int nconds;
    bool iterative;          /* some condition is iterative */
    sl_cep_cond_fn until;    /* stop condition (looping stages); NULL: none */
    void *until_ctx;
    /* a negated stage between this stage and the next (simple conditions) */
    int neg;                 /* CEP_NEG_* */
    char *neg_name;
    cep_cond_t *neg_conds;
    int nneg;
} cep_stage_t;

enum { CEP_NEG_NONE = 0, CEP_NEG_NOT_NEXT = 1, CEP_NEG_NOT_FOLLOWED_BY = 2 };

/* A compiled pattern; immutable once built, shared by every subtask. */
typedef struct cep_def {
    cep_stage_t st[CEP_MAX_STAGES];
    int n;
    int64_t within;     /* 0: none */
    sl_cep_skip_t skip;
    int skip_stage;     /* TO_FIRST / TO_LAST: the stage; else -1 */
} cep_def_t;

/* Builds the definition of p or returns NULL with a message in err.
 * Does not take p. */
cep_def_t *cep_compile(const sl_pattern_t *p, char *err, size_t errlen);
void cep_def_free(cep_def_t *d);
/* 1, 0 or < 0: the stage's condition on the event; so_far is the partial
 * match for iterative conditions (may be NULL when the stage has none). */
int cep_stage_eval(const cep_stage_t *s, const sl_row_t *ev, int64_t ts, const sl_cep_match_t *so_far);
/* Same for the negated stage after s (always 0 when there is none). */
int cep_neg_eval(const cep_stage_t *s, const sl_row_t *ev, int64_t ts);

/* ---- the NFA of one key ---- */

/* An event of the key's buffer: processing order is (ts, seq). */
typedef struct cep_evid {
    int64_t ts;
    uint64_t seq;
} cep_evid_t;

static inline int cep_evid_cmp(cep_evid_t a, cep_evid_t b) {
    if (a.ts != b.ts) return a.ts < b.ts ? -1 : 1;
    if (a.seq != b.seq) return a.seq < b.seq ? -1 : 1;
    return 0;
}

typedef struct cep_pm {
    int stage, count;
    uint32_t opts;
    bool fresh;    /* no event since its last one (not_next looks at the next) */
    int n;
    cep_evid_t *ev;
    uint8_t *evst; /* stage of each event */
} cep_pm_t;

typedef struct cep_nfa {
    cep_pm_t *pm;       /* partial matches */
    int npm, cappm;
    cep_pm_t *done;     /* completed matches the skip strategy holds back */
    int ndone, capdone;
} cep_nfa_t;

/* What the NFA hands out: a match, or a timed-out partial match. */
typedef int (*cep_emit_fn)(void *c, const cep_pm_t *m, bool timed_out, int64_t ts);

void cep_nfa_init(cep_nfa_t *a);
void cep_nfa_clear(cep_nfa_t *a);
bool cep_nfa_empty(const cep_nfa_t *a);
/* What the NFA knows about the event it is fed: bit s of `simple` is the
 * condition of stage s when the stage has no iterative condition (bit s of
 * `iter` clear), else eval answers it for a partial match (NULL: the match
 * would start with the event).  Bit s of `until`: stage s's stop
 * condition holds; of `neg`: the negated stage after stage s matches. */
typedef struct cep_evctx {
    uint32_t simple, until, iter, neg;
    int (*eval)(void *c, const cep_pm_t *so_far, int stage);
    void *c;
} cep_evctx_t;

/* Feeds one event.  Matches go to emit (with ts) as the skip strategy
 * releases them.  0 or < 0 (a condition or emit failed). */
int cep_nfa_step(const cep_def_t *d, cep_nfa_t *a, cep_evid_t e, const cep_evctx_t *x, cep_emit_fn emit, void *c);
/* The earliest time a partial match times out, or INT64_MAX. */
int64_t cep_nfa_next_deadline(const cep_def_t *d, const cep_nfa_t *a);
/* Times out the partial matches whose deadline is <= t (timeout_fn gets
 * them), then releases what the skip strategy can. */
int cep_nfa_advance(const cep_def_t *d, cep_nfa_t *a, int64_t t, cep_emit_fn emit, void *c);

/* Serialized form (the keyed value state), versioned. */
void cep_nfa_write(const cep_nfa_t *a, sl_buf_t *out);
int cep_nfa_read(cep_nfa_t *a, const uint8_t *p, size_t n);
/* Every event some partial or completed match refers to, sorted, unique;
 * *n set.  Caller frees. */
cep_evid_t *cep_nfa_refs(const cep_nfa_t *a, int *n);

/* For tests: keys that still have CEP state (events, NFA, key state),
 * summed over the operators closed since the last reset (every subtask
 * counts its backend when it closes). */
void sl_cep_test_state_left(int64_t *events, int64_t *nfa, int64_t *key);
void sl_cep_test_state_reset(void);

/* ---- the operator (cep_op.c) and what its builder (api/cep_api.c) hands it ---- */

/* The compiled pattern and the user's functions, shared read-only by every
 * subtask (owned by the environment: cep_od_free). */
typedef struct cep_od {
    cep_def_t *def;
    sl_cep_fn_t fn;
    char *late_tag;
} cep_od_t;
void cep_od_free(void *od);
/* The keyed process function that runs the pattern over od. */
sl_process_fn_t cep_process_fn(cep_od_t *od);

#endif
