/* select.c - quantiles by quickselect (select.h). */
#include "select.h"

#include <math.h>

static void swap(double *a, double *b)
{
    double t = *a;
    *a = *b;
    *b = t;
}

/* Rearranges v so that v[k] is the k-th smallest, smaller ones before it
 * and larger ones after (Hoare partition, median-of-three pivot). */
static void nth_element(double *v, size_t n, size_t k)
{
    size_t lo = 0, hi = n - 1;
    while (hi > lo) {
        if (hi - lo < 16) {
            for (size_t i = lo + 1; i <= hi; i++)
                for (size_t j = i; j > lo && v[j - 1] > v[j]; j--)
                    swap(&v[j - 1], &v[j]);
            return;
        }
        size_t mid = lo + (hi - lo) / 2;
        if (v[mid] < v[lo])
            swap(&v[mid], &v[lo]);
        if (v[hi] < v[lo])
            swap(&v[hi], &v[lo]);
        if (v[hi] < v[mid])
            swap(&v[hi], &v[mid]);
        double pivot = v[mid];
        size_t i = lo, j = hi;
        while (i <= j) {
            while (v[i] < pivot)
                i++;
            while (v[j] > pivot)
                j--;
            if (i <= j) {
                swap(&v[i], &v[j]);
                i++;
                if (j == 0)
                    break;
                j--;
            }
        }
        if (k <= j)
            hi = j;
        else if (k >= i)
            lo = i;
        else
            return; /* v[j+1 .. i-1] all equal the pivot */
    }
}

double tw_select_quantile(double *v, size_t n, double q)
{
    double h = (double)(n - 1) * q;
    if (h >= (double)(n - 1)) {
        double m = v[0];
        for (size_t i = 1; i < n; i++)
            if (v[i] > m)
                m = v[i];
        return m;
    }
    if (h < 0)
        h = 0;
    double fi = floor(h);
    size_t i = (size_t)fi;
    double t = h - fi;
    nth_element(v, n, i);
    double a = v[i];
    /* The (i+1)-th smallest is the minimum of everything after v[i]. */
    double b = v[i + 1];
    for (size_t k = i + 2; k < n; k++)
        if (v[k] < b)
            b = v[k];
    double d = b - a;
    return t < 0.5 ? a + d * t : b - d * (1.0 - t);
}
