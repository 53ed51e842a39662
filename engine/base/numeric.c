/*
 * numeric.c - numpy-exact statistics (see numeric.h and RULES.md §3.0).
 *
 * The reference rules use numpy; several decisions (outliers among equal
 * step durations, thresholds hit exactly) depend on the last bit, so these
 * follow numpy's algorithms operation for operation rather than the
 * textbook formulas.
 */
#include "numeric.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double tw_quantile_sorted(const double *s, size_t n, double q)
{
    if (n == 0)
        return NAN;
    double h = (double)(n - 1) * q;
    if (h >= (double)(n - 1))
        return s[n - 1];
    if (h < 0)
        h = 0;
    double fi = floor(h);
    size_t i = (size_t)fi;
    double t = h - fi;
    double a = s[i], b = s[i + 1];
    double d = b - a;
    /* numpy >= 1.22 "_lerp": the form depends on which end is nearer. */
    return t < 0.5 ? a + d * t : b - d * (1.0 - t);
}

static void swap_d(double *a, double *b)
{
    double t = *a;
    *a = *b;
    *b = t;
}

/* Quicksort of NaN-free doubles: median-of-three, insertion sort for short
 * ranges, recursion on the smaller side (O(log n) stack). Much faster than
 * qsort() with a comparison callback, and rules sort at every scan. */
static void sort_finite(double *v, size_t n)
{
    while (n > 16) {
        size_t mid = n / 2, hi = n - 1;
        if (v[mid] < v[0])
            swap_d(&v[mid], &v[0]);
        if (v[hi] < v[0])
            swap_d(&v[hi], &v[0]);
        if (v[hi] < v[mid])
            swap_d(&v[hi], &v[mid]);
        double pivot = v[mid];
        size_t i = 0, j = hi;
        for (;;) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i >= j)
                break;
            swap_d(&v[i], &v[j]);
            i++;
            j--;
        }
        /* [0, j] <= pivot <= [j+1, n) */
        size_t left = j + 1, right = n - left;
        if (left < right) {
            sort_finite(v, left);
            v += left;
            n = right;
        } else {
            sort_finite(v + left, right);
            n = left;
        }
    }
    for (size_t i = 1; i < n; i++) {
        double x = v[i];
        size_t k = i;
        while (k > 0 && v[k - 1] > x) {
            v[k] = v[k - 1];
            k--;
        }
        v[k] = x;
    }
}

void tw_sort_doubles(double *v, size_t n)
{
    /* NaNs go last, as numpy sorts them. */
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (!isnan(v[i]))
            swap_d(&v[m++], &v[i]);
    if (m > 1)
        sort_finite(v, m);
}

/* numpy's pairwise_sum for one contiguous block (n <= 8192). */
static double pairwise(const double *a, size_t n)
{
    if (n < 8) {
        double res = 0.0;
        for (size_t i = 0; i < n; i++)
            res += a[i];
        return res;
    }
    if (n <= 128) {
        double r[8];
        for (size_t j = 0; j < 8; j++)
            r[j] = a[j];
        size_t i;
        for (i = 8; i < n - (n % 8); i += 8)
            for (size_t j = 0; j < 8; j++)
                r[j] += a[i + j];
        double res =
            ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]));
        for (; i < n; i++)
            res += a[i];
        return res;
    }
    size_t n2 = n / 2;
    n2 -= n2 % 8;
    return pairwise(a, n2) + pairwise(a + n2, n - n2);
}

double tw_sum_pairwise(const double *v, size_t n)
{
    /* The ufunc reduction feeds the inner loop buffers of 8192 elements. */
    double total = 0.0;
    for (size_t off = 0; off < n; off += 8192) {
        size_t m = n - off < 8192 ? n - off : 8192;
        total += pairwise(v + off, m);
    }
    return total;
}

double tw_mean(const double *v, size_t n)
{
    if (n == 0)
        return NAN;
    return tw_sum_pairwise(v, n) / (double)n;
}

double tw_std(const double *v, size_t n)
{
    if (n == 0)
        return NAN;
    double m = tw_mean(v, n);
    double *sq = malloc(n * sizeof(double));
    if (sq == NULL)
        return NAN;
    for (size_t i = 0; i < n; i++) {
        double x = v[i] - m;
        sq[i] = x * x;
    }
    double s = tw_sum_pairwise(sq, n);
    free(sq);
    return sqrt(s / (double)n);
}

void tw_hist100(const double *v, size_t n, int64_t probs[100],
                double edges[101])
{
    const int nb = 100;
    double lo = 0.0, hi = 1.0;
    int seen = 0;
    for (size_t i = 0; i < n; i++) {
        if (isnan(v[i]))
            continue;
        if (!seen || v[i] < lo)
            lo = v[i];
        if (!seen || v[i] > hi)
            hi = v[i];
        seen = 1;
    }
    if (!seen) {
        lo = 0.0;
        hi = 1.0;
    } else if (lo == hi) {
        lo -= 0.5;
        hi += 0.5;
    }
    /* np.linspace(lo, hi, 101): step * i + lo, last edge exactly hi. */
    double step = (hi - lo) / nb;
    for (int i = 0; i < nb; i++)
        edges[i] = (double)i * step + lo;
    edges[nb] = hi;
    memset(probs, 0, sizeof(int64_t) * (size_t)nb);
    /* numpy's uniform-bin fast path, corrections included. */
    double norm = nb / (hi - lo);
    for (size_t k = 0; k < n; k++) {
        double x = v[k];
        if (isnan(x) || x < lo || x > hi)
            continue;
        /* NaN when an end is infinite (a corrupt checkpoint's ends):
         * such a value goes in no bin */
        double pos = (x - lo) * norm;
        if (!isfinite(pos))
            continue;
        long idx = (long)pos;
        if (idx == nb)
            idx--;
        if (idx > 0 && x < edges[idx])
            idx--;
        else if (idx != nb - 1 && x >= edges[idx + 1])
            idx++;
        probs[idx]++;
    }
}

double tw_round2(double x)
{
    return rint(x * 100.0) / 100.0;
}

int tw_exact_hundredths(double v, int64_t *k)
{
    if (!(v > -1e15 && v < 1e15))
        return 0;
    double scaled = v * 100.0;
    int64_t q = (int64_t)(scaled < 0 ? scaled - 0.5 : scaled + 0.5);
    double back = (double)q / 100.0;
    if (memcmp(&back, &v, sizeof(v)) != 0)
        return 0;
    *k = q;
    return 1;
}
