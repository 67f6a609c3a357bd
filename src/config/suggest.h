/*
 * suggest.h — "did you mean" for names a user typed: the edit distance
 * (Levenshtein) of two short strings and the closest of a list of known
 * names.  One implementation for config keys, `sluice` options and DDL type
 * names, so that every message suggests the same way.
 *
 * Pure functions on the caller's strings; callable from any thread.
 */
#ifndef SL_SUGGEST_H
#define SL_SUGGEST_H

#include <stdbool.h>
#include <stddef.h>

/* Edit distance (insertions, deletions, substitutions) of a and b, compared
 * byte by byte (nocase: ASCII letters compare without case); INT_MAX when
 * either is longer than 127 bytes. */
int sl_edit_distance(const char *a, const char *b, bool nocase);

/* The largest distance at which a name of length n still gets a
 * suggestion: max(2, n / 5). */
int sl_suggest_limit(size_t n);

/* The candidate (of n, NULL entries skipped) closest to word, or NULL when
 * none is within sl_suggest_limit(strlen(word)).  Ties: the first. */
const char *sl_suggest(const char *word, const char *const *candidates, int n, bool nocase);

#endif
