/*
 * window_output.h — the reference for the kill tests' windowed job (eo_job
 * --window, tests/tools/cluster_job.c): the generator's events (seed 7, 4
 * splits, 500 cards, no late events) counted and summed per card and
 * 1-minute window by brute force, and the committed output read back from
 * the exactly-once file sink's directory.  Used by test_kill9.c and
 * test_cluster.c.
 */
#ifndef SL_TEST_WINDOW_OUTPUT_H
#define SL_TEST_WINDOW_OUTPUT_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "connectors/connectors.h" /* the generator's events by split and index */
#include "sluice/sluice.h"

static int wo_cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Every committed line of the files in dir (hidden files, i.e. pending or
 * in-progress parts, are counted in *hidden, not read).  Returns the
 * number of lines, or -1 when dir cannot be read. */
static long long wo_read_lines(const char *dir, char **lines, long long cap, int *hidden) {
    long long n = 0;
    *hidden = 0;
    DIR *d = opendir(dir);
    if (!d) return -1;
    struct dirent *e;
    char *buf = NULL;
    size_t bcap = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') {
            if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) (*hidden)++;
            continue;
        }
        char p[1400];
        snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
        FILE *f = fopen(p, "r");
        ssize_t l;
        while (f && (l = getline(&buf, &bcap, f)) > 0 && n < cap) {
            if (buf[l - 1] == '\n') buf[--l] = 0;
            lines[n++] = strdup(buf);
        }
        if (f) fclose(f);
    }
    free(buf);
    closedir(d);
    return n;
}

/* The expected lines "card,start,n,cents" of n events, sorted; *nw set. */
static char **wo_expected(long long n_events, long long *nw_out) {
    sl_datagen_opts_t g = sl_datagen_defaults();
    g.seed = 7;
    g.count = n_events;
    g.splits = 4;
    g.cards = 500;
    g.late_fraction = 0;
    g.max_disorder_ms = 2000;
    g.ts_step_ms = 2;
    typedef struct { int64_t card, start, n, cents; } win_t;
    int64_t cap = 1 << 20, nw = 0;
    win_t *tab = calloc((size_t)cap, sizeof *tab);
    for (int sp = 0; sp < 4; sp++)
        for (int64_t i = 0; i < sl_datagen_split_count(&g, sp); i++) {
            sl_datagen_event_t ev;
            sl_datagen_event(&g, sp, i, &ev);
            int64_t start = ev.ts - (((ev.ts % 60000) + 60000) % 60000);
            uint64_t h = ((uint64_t)ev.card_id * 0x9e3779b97f4a7c15ULL) ^ (uint64_t)start * 31;
            int64_t slot = (int64_t)(h % (uint64_t)cap);
            while (tab[slot].n && (tab[slot].card != ev.card_id || tab[slot].start != start)) slot = (slot + 1) % cap;
            if (!tab[slot].n) {
                tab[slot].card = ev.card_id;
                tab[slot].start = start;
                nw++;
            }
            tab[slot].n++;
            tab[slot].cents += (int64_t)(ev.amount * 100 + 0.5);
        }
    char **want = calloc((size_t)(nw ? nw : 1), sizeof *want);
    int64_t k = 0;
    for (int64_t i = 0; i < cap; i++)
        if (tab[i].n) {
            char b[128];
            snprintf(b, sizeof b, "%lld,%lld,%lld,%lld", (long long)tab[i].card, (long long)tab[i].start,
                     (long long)tab[i].n, (long long)tab[i].cents);
            want[k++] = strdup(b);
        }
    free(tab);
    qsort(want, (size_t)nw, sizeof *want, wo_cmp_str);
    *nw_out = nw;
    return want;
}

/* Compares dir's committed output with the reference for n events: 0 when
 * equal (each window exactly once, nothing pending), else prints the first
 * difference and returns -1. */
static int wo_check(const char *dir, long long n_events) {
    long long nw;
    char **want = wo_expected(n_events, &nw);
    char **got = calloc((size_t)nw + 16, sizeof *got);
    int hidden;
    long long ng = wo_read_lines(dir, got, nw + 16, &hidden);
    int rc = 0;
    if (hidden || ng != nw) {
        fprintf(stderr, "  output %s: %lld lines (expected %lld), %d pending files\n", dir, ng, nw, hidden);
        rc = -1;
    }
    if (ng > 0) qsort(got, (size_t)ng, sizeof *got, wo_cmp_str);
    for (long long i = 0; rc == 0 && i < nw; i++)
        if (strcmp(got[i], want[i]) != 0) {
            fprintf(stderr, "  output %s: line %lld is '%s', expected '%s'\n", dir, i, got[i], want[i]);
            rc = -1;
        }
    for (long long i = 0; i < nw; i++) free(want[i]);
    for (long long i = 0; i < ng; i++) free(got[i]);
    free(want);
    free(got);
    return rc;
}

#endif
