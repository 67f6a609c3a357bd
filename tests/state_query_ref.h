/*
 * state_query_ref.h — the reference of the state query tests
 * (test_state_query.c, test_state_query_cluster.c): what each key of the
 * job of tools/sq_counter_job.h must hold once its N records are in,
 * computed here from the record formula with plain arrays, and the JSON
 * entry an answer must show for it (key bytes, key group and value bytes
 * written out here, independently of the engine).
 */
#ifndef SL_TEST_STATE_QUERY_REF_H
#define SL_TEST_STATE_QUERY_REF_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "state/key_group.h"
#include "tools/sq_counter_job.h"

#define N 6000
#define NCARDS 40
#define MAXP 128

static uint64_t g_rng = 12345;
static uint64_t rnd(void) {
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}

/* ---- the reference ---- */

typedef struct ref_card {
    char card[64];
    int64_t count, sum, even, odd;
    int64_t *last;
    int nlast;
    int64_t pair[3]; /* count per grp */
} ref_card_t;

static ref_card_t g_cards[NCARDS];
static int g_ncards;
static int64_t g_amount_count[1000];

static ref_card_t *card_ref(const char *card) {
    for (int i = 0; i < g_ncards; i++)
        if (!strcmp(g_cards[i].card, card)) return &g_cards[i];
    ref_card_t *r = &g_cards[g_ncards++];
    memset(r, 0, sizeof *r);
    snprintf(r->card, sizeof r->card, "%s", card);
    return r;
}

static void build_reference(void) {
    for (int i = 0; i < g_ncards; i++) free(g_cards[i].last);
    g_ncards = 0;
    memset(g_amount_count, 0, sizeof g_amount_count);
    for (int64_t i = 0; i < N; i++) {
        char card[64];
        int64_t amount;
        int32_t grp;
        sqj_record(i, NCARDS, card, sizeof card, &amount, &grp);
        ref_card_t *r = card_ref(card);
        r->count++;
        r->sum += amount;
        if (amount % 2) r->odd++;
        else r->even++;
        if (grp == 0) {
            r->last = realloc(r->last, (size_t)(r->nlast + 1) * sizeof *r->last);
            r->last[r->nlast++] = amount;
        }
        r->pair[grp]++;
        g_amount_count[amount]++;
    }
}

/* ---- the expected JSON ---- */

static json_t *hex_of(const void *p, size_t n) {
    char s[2100];
    for (size_t i = 0; i < n; i++) snprintf(s + 2 * i, 3, "%02x", ((const uint8_t *)p)[i]);
    s[2 * n] = 0;
    return json_pack("{s:s}", "hex", s);
}

static json_t *i64_json(int64_t v) {
    uint8_t b[8];
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)((uint64_t)v >> (8 * i));
    return hex_of(b, 8);
}

/* key: the JSON the answer shows for the key bytes kb[kn] */
static json_t *entry(const char *state, const char *kind, const uint8_t *kb, size_t kn, json_t *key, json_t *value) {
    int kg = (int)(sl_kg_key_hash(kb, (uint32_t)kn) % MAXP);
    return json_pack("{s:s, s:s, s:i, s:o, s:s, s:o}", "state", state, "kind", kind, "key_group", kg, "key", key,
                     "namespace", "", "value", value);
}

static json_t *card_entry(const ref_card_t *r, const char *state) {
    const uint8_t *kb = (const uint8_t *)r->card;
    size_t kn = strlen(r->card);
    if (!strcmp(state, "count")) return entry("count", "value", kb, kn, json_string(r->card), i64_json(r->count));
    if (!strcmp(state, "sum")) return entry("sum", "value", kb, kn, json_string(r->card), i64_json(r->sum));
    if (!strcmp(state, "last")) {
        json_t *a = json_array();
        for (int i = 0; i < r->nlast; i++) json_array_append_new(a, i64_json(r->last[i]));
        return entry("last", "list", kb, kn, json_string(r->card), a);
    }
    json_t *m = json_object();
    if (r->even) json_object_set_new(m, "even", i64_json(r->even));
    if (r->odd) json_object_set_new(m, "odd", i64_json(r->odd));
    return entry("parity", "map", kb, kn, json_string(r->card), m);
}

/* Every state of a card, in the order the answer lists them (by name). */
static json_t *card_all(const ref_card_t *r) {
    json_t *a = json_array();
    json_array_append_new(a, card_entry(r, "count"));
    if (r->nlast) json_array_append_new(a, card_entry(r, "last"));
    json_array_append_new(a, card_entry(r, "parity"));
    json_array_append_new(a, card_entry(r, "sum"));
    return a;
}

/* The key bytes of sl_key_by_fields(card, grp), written out here. */
static size_t pair_key(const char *card, int32_t grp, uint8_t *out) {
    size_t n = 0, cl = strlen(card);
    out[n++] = 1;
    for (int b = 0; b < 4; b++) out[n++] = (uint8_t)(cl >> (8 * b));
    memcpy(out + n, card, cl);
    n += cl;
    out[n++] = 1;
    for (int b = 0; b < 4; b++) out[n++] = (uint8_t)((uint32_t)grp >> (8 * b));
    return n;
}

#endif
