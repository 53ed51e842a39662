/*
 * sorted_history.h - a sorted copy of an append-only array of doubles,
 * brought up to date by merging in what was appended since the last call.
 *
 * A rule that asks for order statistics of a whole history at every scan
 * (StepOutlier: min, max, p50/p95/p99, the values below a cut-off) pays
 * O(new * log(new) + n) per scan instead of a selection over all n values,
 * and the answers are the same values a sort of the history gives.
 *
 * Ownership: the struct owns its arrays (tw_sorted_history_free). Start
 * from a zeroed struct. Memory: 8 bytes per value, plus the largest tail
 * merged at once.
 */
#ifndef TW_RULES_SORTED_HISTORY_H
#define TW_RULES_SORTED_HISTORY_H

#include <stddef.h>

typedef struct tw_sorted_history {
    double *v; /* v[0..n) sorted ascending: d[0..n) of the last sync */
    size_t n, cap;
    double *tail; /* scratch for the values being merged */
    size_t tail_cap;
} tw_sorted_history;

/* Makes v the sorted d[0..n), where d[0..h->n) is unchanged since the
 * last call (n >= h->n). TW_OK; TW_ERR on out-of-memory; 1 when a new
 * value is NaN (no order: the history is then emptied, the caller sorts
 * by other means). */
int tw_sorted_history_sync(tw_sorted_history *h, const double *d, size_t n);
/* How many values are < x, and how many are > x. */
size_t tw_sorted_history_below(const tw_sorted_history *h, double x);
size_t tw_sorted_history_above(const tw_sorted_history *h, double x);
void tw_sorted_history_free(tw_sorted_history *h);

#endif /* TW_RULES_SORTED_HISTORY_H */
