/*
 * numeric.h - statistics that reproduce numpy 1.24 bit for bit
 * (RULES.md §3.0): type-7 quantiles, pairwise summation, population std,
 * the 100-bin histogram, numpy's round(x, 2). Pure functions; no allocation
 * except where noted.
 */
#ifndef TW_NUMERIC_H
#define TW_NUMERIC_H

#include <stddef.h>
#include <stdint.h>

/* Q(v, q) of an ascending array, numpy's default "linear" method. n > 0. */
double tw_quantile_sorted(const double *sorted, size_t n, double q);
/* Ascending sort of doubles (NaN last). */
void tw_sort_doubles(double *v, size_t n);
/* numpy's pairwise sum (blocks of 8192, 8 accumulators, split above 128). */
double tw_sum_pairwise(const double *v, size_t n);
/* sum_pairwise(v) / n; NaN for n == 0. */
double tw_mean(const double *v, size_t n);
/* sqrt(sum_pairwise((v - mean)^2) / n); NaN for n == 0. Allocates a
 * temporary of n doubles (falls back to NaN on OOM). */
double tw_std(const double *v, size_t n);
/* numpy.histogram(v, bins=100): 100 counts, 101 edges. */
void tw_hist100(const double *v, size_t n, int64_t probs[100],
                double edges[101]);
/* numpy's round(x, 2) on a float64: rint(x * 100) / 100 (half to even). */
double tw_round2(double x);

/* 1 and *k when k / 100.0 is v bit for bit (so not for -0.0, NaN or
 * |v| >= 1e15), else 0: values an agent reports in hundredths are stored
 * as small integers (checkpoints). The reader computes (double)k / 100.0. */
int tw_exact_hundredths(double v, int64_t *k);

#endif /* TW_NUMERIC_H */
