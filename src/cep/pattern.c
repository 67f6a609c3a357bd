/*
 * pattern.c — the CEP pattern builder (sl_pattern_*, Flink's Pattern) and
 * its compilation into the definition the NFA runs (cep_def_t).
 *
 * The builder never fails loudly: the first mistake is kept in the pattern
 * and sl_cep refuses the job with it, naming the stage (as every builder
 * mistake in sluice is reported when the job is built).
 */
#include <stdio.h>

#include "cep/cep_int.h"

typedef struct pstage {
    cep_stage_t s;
    bool quantified; /* a quantifier was given */
    bool looping;    /* times / times_range / one_or_more / times_or_more */
    bool inner_set;  /* consecutive / allow_combinations */
} pstage_t;

struct sl_pattern {
    pstage_t st[CEP_MAX_STAGES];
    int n;
    int64_t within;
    bool within_set;
    sl_cep_skip_t skip;
    char *skip_stage;
    bool cur_neg; /* the last thing added is a negated stage: conditions go to it */
    char err[256];
};

static void perr(sl_pattern_t *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void perr(sl_pattern_t *p, const char *fmt, ...) {
    if (!p || p->err[0]) return;
    va_list ap;
    va_start(ap, fmt);
    int k = snprintf(p->err, sizeof p->err, "CEP: ");
    vsnprintf(p->err + k, sizeof p->err - (size_t)k, fmt, ap);
    va_end(ap);
}

static const char *last_name(const sl_pattern_t *p) { return p->n ? p->st[p->n - 1].s.name : "?"; }

static sl_pattern_t *add_stage(sl_pattern_t *p, const char *name, cep_contig_t c) {
    if (!p) return NULL;
    if (!name || !*name) {
        perr(p, "a stage needs a name (after stage '%s')", last_name(p));
        return p;
    }
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->st[i].s.name, name) == 0 || (p->st[i].s.neg_name && strcmp(p->st[i].s.neg_name, name) == 0)) {
            perr(p, "stage name '%s' is used twice", name);
            return p;
        }
    p->cur_neg = false;
    if (p->n == CEP_MAX_STAGES) {
        perr(p, "stage '%s': a pattern has at most %d stages", name, CEP_MAX_STAGES);
        return p;
    }
    pstage_t *s = &p->st[p->n++];
    memset(s, 0, sizeof *s);
    s->s.name = sl_strdup(name);
    s->s.outer = c;
    s->s.inner = CEP_RELAXED; /* Flink's default inner contiguity of looping stages */
    s->s.min = s->s.max = 1;
    return p;
}

sl_pattern_t *sl_pattern_begin(const char *name) {
    sl_pattern_t *p = sl_calloc(1, sizeof *p);
    p->skip = SL_CEP_NO_SKIP;
    return add_stage(p, name, CEP_RELAXED);
}

sl_pattern_t *sl_pattern_next(sl_pattern_t *p, const char *name) { return add_stage(p, name, CEP_STRICT); }
sl_pattern_t *sl_pattern_followed_by(sl_pattern_t *p, const char *name) { return add_stage(p, name, CEP_RELAXED); }
sl_pattern_t *sl_pattern_followed_by_any(sl_pattern_t *p, const char *name) { return add_stage(p, name, CEP_ANY); }

static sl_pattern_t *add_neg(sl_pattern_t *p, const char *name, int kind) {
    if (!p || !p->n) return p;
    const char *what = kind == CEP_NEG_NOT_NEXT ? "not_next" : "not_followed_by";
    if (!name || !*name) {
        perr(p, "%s needs a name (after stage '%s')", what, last_name(p));
        return p;
    }
    if (p->cur_neg) {
        perr(p, "%s ('%s') right after another negated stage is not supported", what, name);
        return p;
    }
    for (int i = 0; i < p->n; i++)
        if (strcmp(p->st[i].s.name, name) == 0) {
            perr(p, "stage name '%s' is used twice", name);
            return p;
        }
    cep_stage_t *s = &p->st[p->n - 1].s;
    s->neg = kind;
    s->neg_name = sl_strdup(name);
    p->cur_neg = true;
    return p;
}

sl_pattern_t *sl_pattern_not_next(sl_pattern_t *p, const char *name) { return add_neg(p, name, CEP_NEG_NOT_NEXT); }
sl_pattern_t *sl_pattern_not_followed_by(sl_pattern_t *p, const char *name) {
    return add_neg(p, name, CEP_NEG_NOT_FOLLOWED_BY);
}

/* Refuses what does not apply to a negated stage; true when refused. */
static bool neg_refuses(sl_pattern_t *p, const char *what) {
    if (!p || !p->cur_neg) return false;
    perr(p, "negated stage '%s': %s does not apply to a negated stage", p->st[p->n - 1].s.neg_name, what);
    return true;
}

static sl_pattern_t *add_cond(sl_pattern_t *p, sl_cep_cond_fn fn, sl_cep_iter_cond_fn ifn, void *ctx, bool is_or,
                              const char *what) {
    if (!p || !p->n) return p;
    cep_stage_t *s = &p->st[p->n - 1].s;
    if (p->cur_neg) {
        if (ifn) {
            perr(p, "negated stage '%s': iterative conditions are not supported there", s->neg_name);
            return p;
        }
        if (!fn || (is_or && !s->nneg)) {
            perr(p, "negated stage '%s': %s", s->neg_name, !fn ? "a condition without a function" : "or() before any where()");
            return p;
        }
        s->neg_conds = sl_realloc(s->neg_conds, (size_t)(s->nneg + 1) * sizeof *s->neg_conds);
        s->neg_conds[s->nneg++] = (cep_cond_t){.fn = fn, .ctx = ctx, .is_or = is_or};
        return p;
    }
    if (!fn && !ifn) {
        perr(p, "stage '%s': %s without a condition function", s->name, what);
        return p;
    }
    if (is_or && !s->nconds) {
        perr(p, "stage '%s': or() before any where()", s->name);
        return p;
    }
    s->conds = sl_realloc(s->conds, (size_t)(s->nconds + 1) * sizeof *s->conds);
    s->conds[s->nconds++] = (cep_cond_t){.fn = fn, .ifn = ifn, .ctx = ctx, .is_or = is_or};
    if (ifn) s->iterative = true;
    return p;
}

sl_pattern_t *sl_pattern_where(sl_pattern_t *p, sl_cep_cond_fn fn, void *ctx) {
    return add_cond(p, fn, NULL, ctx, false, "where");
}
sl_pattern_t *sl_pattern_or(sl_pattern_t *p, sl_cep_cond_fn fn, void *ctx) { return add_cond(p, fn, NULL, ctx, true, "or"); }
sl_pattern_t *sl_pattern_where_iterative(sl_pattern_t *p, sl_cep_iter_cond_fn fn, void *ctx) {
    return add_cond(p, NULL, fn, ctx, false, "where_iterative");
}
sl_pattern_t *sl_pattern_or_iterative(sl_pattern_t *p, sl_cep_iter_cond_fn fn, void *ctx) {
    return add_cond(p, NULL, fn, ctx, true, "or_iterative");
}

sl_pattern_t *sl_pattern_until(sl_pattern_t *p, sl_cep_cond_fn fn, void *ctx) {
    if (!p || !p->n || neg_refuses(p, "until")) return p;
    pstage_t *s = &p->st[p->n - 1];
    if (!fn) {
        perr(p, "stage '%s': until without a condition function", s->s.name);
        return p;
    }
    if (!s->looping || s->s.max != CEP_INF) {
        perr(p, "stage '%s': until applies only to one_or_more / times_or_more (give the quantifier first)",
             s->s.name);
        return p;
    }
    if (s->s.until) {
        perr(p, "stage '%s': until given twice", s->s.name);
        return p;
    }
    s->s.until = fn;
    s->s.until_ctx = ctx;
    return p;
}

static pstage_t *quant(sl_pattern_t *p, const char *what) {
    if (!p || !p->n || neg_refuses(p, what)) return NULL;
    pstage_t *s = &p->st[p->n - 1];
    if (s->quantified) {
        perr(p, "stage '%s': %s after another quantifier", s->s.name, what);
        return NULL;
    }
    s->quantified = true;
    s->looping = true;
    return s;
}

sl_pattern_t *sl_pattern_times(sl_pattern_t *p, int n) {
    pstage_t *s = quant(p, "times");
    if (!s) return p;
    if (n < 1) perr(p, "stage '%s': times(%d) must be at least 1 (use optional for none)", s->s.name, n);
    s->s.min = s->s.max = n;
    return p;
}

sl_pattern_t *sl_pattern_times_range(sl_pattern_t *p, int n, int m) {
    pstage_t *s = quant(p, "times");
    if (!s) return p;
    if (n < 1 || m < n)
        perr(p, "stage '%s': times(%d, %d) needs 1 <= from <= to (use optional for none)", s->s.name, n, m);
    s->s.min = n;
    s->s.max = m;
    return p;
}

sl_pattern_t *sl_pattern_one_or_more(sl_pattern_t *p) { return sl_pattern_times_or_more(p, 1); }

sl_pattern_t *sl_pattern_times_or_more(sl_pattern_t *p, int n) {
    pstage_t *s = quant(p, "times_or_more");
    if (!s) return p;
    if (n < 1) perr(p, "stage '%s': times_or_more(%d) must be at least 1", s->s.name, n);
    s->s.min = n;
    s->s.max = CEP_INF;
    return p;
}

sl_pattern_t *sl_pattern_optional(sl_pattern_t *p) {
    if (neg_refuses(p, "optional")) return p;
    if (p && p->n) p->st[p->n - 1].s.optional = true;
    return p;
}

static sl_pattern_t *inner(sl_pattern_t *p, cep_contig_t c, const char *what) {
    if (!p || !p->n || neg_refuses(p, what)) return p;
    pstage_t *s = &p->st[p->n - 1];
    if (!s->looping) {
        perr(p, "stage '%s': %s applies only to a looping stage (times, one_or_more, times_or_more)", s->s.name, what);
        return p;
    }
    if (s->inner_set) {
        perr(p, "stage '%s': consecutive and allow_combinations exclude each other", s->s.name);
        return p;
    }
    s->inner_set = true;
    s->s.inner = c;
    return p;
}

sl_pattern_t *sl_pattern_consecutive(sl_pattern_t *p) { return inner(p, CEP_STRICT, "consecutive"); }
sl_pattern_t *sl_pattern_allow_combinations(sl_pattern_t *p) { return inner(p, CEP_ANY, "allow_combinations"); }

sl_pattern_t *sl_pattern_greedy(sl_pattern_t *p) {
    if (neg_refuses(p, "greedy")) return p;
    if (p) perr(p, "greedy on stage '%s' is not supported", last_name(p));
    return p;
}

sl_pattern_t *sl_pattern_within(sl_pattern_t *p, int64_t ms) {
    if (!p) return p;
    if (ms <= 0) perr(p, "within(%lld) must be > 0 ms", (long long)ms);
    p->within = ms;
    p->within_set = true;
    return p;
}

sl_pattern_t *sl_pattern_skip(sl_pattern_t *p, sl_cep_skip_t strategy, const char *stage) {
    if (!p) return p;
    if ((int)strategy < SL_CEP_NO_SKIP || strategy > SL_CEP_SKIP_TO_LAST) {
        perr(p, "unknown after-match skip strategy %d", (int)strategy);
        return p;
    }
    p->skip = strategy;
    sl_free(p->skip_stage);
    p->skip_stage = stage ? sl_strdup(stage) : NULL;
    return p;
}

void sl_pattern_free(sl_pattern_t *p) {
    if (!p) return;
    for (int i = 0; i < p->n; i++) {
        sl_free(p->st[i].s.name);
        sl_free(p->st[i].s.conds);
        sl_free(p->st[i].s.neg_name);
        sl_free(p->st[i].s.neg_conds);
    }
    sl_free(p->skip_stage);
    sl_free(p);
}

/* ---- compilation ---- */

cep_def_t *cep_compile(const sl_pattern_t *p, char *err, size_t errlen) {
    if (!p) {
        snprintf(err, errlen, "CEP: no pattern");
        return NULL;
    }
    if (p->err[0]) {
        snprintf(err, errlen, "%s", p->err);
        return NULL;
    }
    bool all_optional = true;
    for (int i = 0; i < p->n; i++) all_optional &= p->st[i].s.optional;
    if (all_optional) {
        snprintf(err, errlen, "CEP: every stage of the pattern is optional: it would match nothing");
        return NULL;
    }
    for (int i = 0; i < p->n; i++) {
        const cep_stage_t *s = &p->st[i].s;
        if (!s->neg) continue;
        const char *what = s->neg == CEP_NEG_NOT_NEXT ? "not_next" : "not_followed_by";
        if (i == p->n - 1) {
            snprintf(err, errlen, "CEP: %s ('%s') as the last stage is not supported", what, s->neg_name);
            return NULL;
        }
        if (s->optional || p->st[i + 1].s.optional) {
            snprintf(err, errlen, "CEP: %s ('%s') next to an optional stage ('%s') is not supported", what, s->neg_name,
                     s->optional ? s->name : p->st[i + 1].s.name);
            return NULL;
        }
    }
    int skip_stage = -1;
    if (p->skip == SL_CEP_SKIP_TO_FIRST || p->skip == SL_CEP_SKIP_TO_LAST) {
        for (int i = 0; i < p->n && p->skip_stage; i++)
            if (strcmp(p->st[i].s.name, p->skip_stage) == 0) skip_stage = i;
        if (skip_stage < 0) {
            snprintf(err, errlen, "CEP: the skip strategy's stage '%s' is not in the pattern",
                     p->skip_stage ? p->skip_stage : "(none given)");
            return NULL;
        }
    }
    cep_def_t *d = sl_calloc(1, sizeof *d);
    d->n = p->n;
    d->within = p->within;
    d->skip = p->skip;
    d->skip_stage = skip_stage;
    for (int i = 0; i < p->n; i++) {
        d->st[i] = p->st[i].s;
        d->st[i].name = sl_strdup(p->st[i].s.name);
        if (d->st[i].nconds) {
            d->st[i].conds = sl_malloc((size_t)d->st[i].nconds * sizeof(cep_cond_t));
            memcpy(d->st[i].conds, p->st[i].s.conds, (size_t)d->st[i].nconds * sizeof(cep_cond_t));
        }
        d->st[i].neg_name = p->st[i].s.neg_name ? sl_strdup(p->st[i].s.neg_name) : NULL;
        if (d->st[i].nneg) {
            d->st[i].neg_conds = sl_malloc((size_t)d->st[i].nneg * sizeof(cep_cond_t));
            memcpy(d->st[i].neg_conds, p->st[i].s.neg_conds, (size_t)d->st[i].nneg * sizeof(cep_cond_t));
        }
    }
    return d;
}

void cep_def_free(cep_def_t *d) {
    if (!d) return;
    for (int i = 0; i < d->n; i++) {
        sl_free(d->st[i].name);
        sl_free(d->st[i].conds);
        sl_free(d->st[i].neg_name);
        sl_free(d->st[i].neg_conds);
    }
    sl_free(d);
}

static int conds_eval(const cep_cond_t *cs, int n, const sl_row_t *ev, int64_t ts, const sl_cep_match_t *so_far) {
    if (!n) return 1;
    int v = 0;
    for (int i = 0; i < n; i++) {
        const cep_cond_t *c = &cs[i];
        /* short-circuit like Flink's RichAndCondition / RichOrCondition */
        if (i > 0 && (c->is_or ? v : !v)) continue;
        int r = c->fn ? c->fn(c->ctx, ev, ts) : c->ifn(c->ctx, ev, ts, so_far);
        if (r < 0) return r;
        v = r != 0;
    }
    return v;
}

int cep_stage_eval(const cep_stage_t *s, const sl_row_t *ev, int64_t ts, const sl_cep_match_t *so_far) {
    return conds_eval(s->conds, s->nconds, ev, ts, so_far);
}

int cep_neg_eval(const cep_stage_t *s, const sl_row_t *ev, int64_t ts) {
    return s->neg ? conds_eval(s->neg_conds, s->nneg, ev, ts, NULL) : 0;
}
