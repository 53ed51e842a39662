/*
 * countmap.h - an exact multiset of doubles (value -> count) giving the
 * count, min, max and numpy-exact quantiles of every value ever added, in
 * memory proportional to the number of DISTINCT values, independent of the
 * insertion order. This is how whole-history box plots and maxima stay
 * bounded (RULES.md §7): utilisation percentages with two decimals have at
 * most 10 001 distinct values per series.
 *
 * Quantiles: Q(v, q) of RULES.md §3.0 (numpy "linear"): with n values,
 * h = (n-1)*q; if h >= n-1 the answer is the maximum, otherwise i = floor(h),
 * t = h - i and the answer is numpy's _lerp of the i-th and (i+1)-th
 * smallest values (a + (b-a)*t if t < 0.5 else b - (b-a)*(1-t)). The sorted
 * view of the distinct keys and their cumulative counts is rebuilt lazily
 * (O(K log K) after new keys, O(K) after new counts), then each quantile
 * is a binary search. Results are bit-identical to numpy over the list.
 *
 * Cap (`max_keys`, 0 = none). With a cap, when an insertion would exceed
 * it the map is coarsened: every key (present and future) is rounded to a
 * multiple of a quantum, first 0.01 (rint(v*100)/100), then doubled
 * (0.02, 0.04, ...) each time the cap is hit again, merging counts. From
 * then on quantiles are approximate (error <= quantum/2 per order
 * statistic) but min, max and count stay exact (the extremes of the order
 * statistics are served from the exact min/max). Rules use no cap in
 * `reference` semantics and a cap in `fixed` (TW_COUNTMAP_DEFAULT_CAP).
 *
 * NaN values are counted apart: while any NaN was added, quantiles, min
 * and max are NaN (numpy propagates NaN).
 *
 * Memory: tw_countmap_memory(); about 24-48 bytes per distinct key in the
 * map plus 16 bytes per distinct key for the sorted view, i.e. <= ~0.7 MB
 * for the default cap.
 *
 * Ownership: the struct is embedded by its user; tw_countmap_free()
 * releases its arrays.
 */
#ifndef TW_RULES_COUNTMAP_H
#define TW_RULES_COUNTMAP_H

#include <stddef.h>
#include <stdint.h>

#include "dmap.h"
#include "ser.h"
#include "trainwatch/plugin.h"

/* Distinct keys kept in `fixed` semantics before coarsening: all values
 * 0.00 .. 100.00 of a percentage with two decimals fit. */
#define TW_COUNTMAP_DEFAULT_CAP 10001u

typedef struct tw_countmap {
    tw_dmap map; /* key -> count                                     */
    uint64_t n;  /* values added (NaNs excluded)                     */
    uint64_t nnan;
    double min, max; /* exact, even after coarsening                     */
    size_t max_keys; /* 0 = no cap                                       */
    double quantum;  /* 0 = exact keys; else keys are multiples of it    */
    /* lazily rebuilt sorted view */
    double *skeys;
    uint64_t *cum; /* cum[i] = number of values <= skeys[i]            */
    size_t scap;
    size_t sn;
    int keys_dirty;   /* a key was added since the view was built         */
    int counts_dirty; /* a count changed since the view was built         */
} tw_countmap;

/* The BOX record of RULES.md §3.0. */
typedef struct tw_box {
    double p25, p50, p75, p95, upper, lower;
} tw_box;

void tw_countmap_init(tw_countmap *m, size_t max_keys);
void tw_countmap_free(tw_countmap *m);
/* Forget every value (keeps the cap and the memory). */
void tw_countmap_clear(tw_countmap *m);

/* Add `count` copies of v. TW_OK, or TW_ERR when memory runs out (the
 * value is then not counted). */
int tw_countmap_add_n(tw_countmap *m, double v, uint64_t count);
int tw_countmap_add(tw_countmap *m, double v);

uint64_t tw_countmap_count(const tw_countmap *m); /* NaNs included */
size_t tw_countmap_distinct(const tw_countmap *m);
/* Non-zero while no coarsening happened (all answers exact). */
int tw_countmap_exact(const tw_countmap *m);
/* NaN when empty. */
double tw_countmap_min(const tw_countmap *m);
double tw_countmap_max(const tw_countmap *m);

/* Q(v, q) into *out. TW_ERR when empty or out of memory. */
int tw_countmap_quantile(tw_countmap *m, double q, double *out);
/* BOX(v): p25, p50, p75, p95, upper = min(p75 + 1.5*iqr, max),
 * lower = max(p25 - 1.5*iqr, min). TW_ERR when empty or out of memory. */
int tw_countmap_box(tw_countmap *m, tw_box *out);

/* Bytes held by the map and its sorted view. */
size_t tw_countmap_memory(const tw_countmap *m);

/* Checkpoint: the distinct keys with their counts, the exact min/max and
 * the coarsening state. restore() replaces the content of an initialised
 * map (its cap is kept). */
void tw_countmap_save(const tw_countmap *m, tw_ser *s);
int tw_countmap_restore(tw_countmap *m, tw_deser *d);

#endif /* TW_RULES_COUNTMAP_H */
