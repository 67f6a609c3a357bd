/*
 * suggest.c — edit distance and the closest known name (see suggest.h).
 */
#include "config/suggest.h"

#include <limits.h>
#include <string.h>

#include "common/common.h"

static char fold(char c, bool nocase) { return nocase && c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c; }

int sl_edit_distance(const char *a, const char *b, bool nocase) {
    size_t la = strlen(a), lb = strlen(b);
    if (la > 127 || lb > 127) return INT_MAX;
    int row[128];
    for (size_t j = 0; j <= lb; j++) row[j] = (int)j;
    for (size_t i = 1; i <= la; i++) {
        int diag = row[0];
        row[0] = (int)i;
        for (size_t j = 1; j <= lb; j++) {
            int up = row[j];
            int best = diag + (fold(a[i - 1], nocase) != fold(b[j - 1], nocase));
            best = SL_MIN(best, up + 1);
            best = SL_MIN(best, row[j - 1] + 1);
            row[j] = best;
            diag = up;
        }
    }
    return row[lb];
}

int sl_suggest_limit(size_t n) { return SL_MAX(2, (int)(n / 5)); }

const char *sl_suggest(const char *word, const char *const *candidates, int n, bool nocase) {
    size_t wl = strlen(word);
    int limit = sl_suggest_limit(wl);
    const char *best = NULL;
    int best_d = INT_MAX;
    for (int i = 0; i < n; i++) {
        if (!candidates[i]) continue;
        size_t m = strlen(candidates[i]);
        if ((wl > m ? wl - m : m - wl) > (size_t)limit) continue; /* the distance is at least that */
        int d = sl_edit_distance(word, candidates[i], nocase);
        if (d < best_d) {
            best_d = d;
            best = candidates[i];
        }
    }
    return best && best_d <= limit ? best : NULL;
}
