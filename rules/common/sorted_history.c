/* sorted_history.c - sorted copy of an append-only history
 * (sorted_history.h). */
#include "sorted_history.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/plugin.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int reserve(double **p, size_t *cap, size_t n)
{
    if (n <= *cap)
        return TW_OK;
    size_t c = *cap ? *cap : 64;
    while (c < n)
        c *= 2;
    double *q = realloc(*p, c * sizeof(*q));
    if (!q)
        return TW_ERR;
    *p = q;
    *cap = c;
    return TW_OK;
}

int tw_sorted_history_sync(tw_sorted_history *h, const double *d, size_t n)
{
    size_t old = h->n, k = n - old;
    if (k == 0)
        return TW_OK;
    if (reserve(&h->tail, &h->tail_cap, k) != TW_OK ||
        reserve(&h->v, &h->cap, n) != TW_OK)
        return TW_ERR;
    for (size_t i = 0; i < k; i++) {
        if (isnan(d[old + i])) {
            h->n = 0;
            return 1;
        }
        h->tail[i] = d[old + i];
    }
    qsort(h->tail, k, sizeof(double), cmp_double);
    /* merge from the back: the larger of the two ends goes last */
    size_t i = old, j = k, w = n;
    while (j > 0) {
        if (i > 0 && h->v[i - 1] > h->tail[j - 1])
            h->v[--w] = h->v[--i];
        else
            h->v[--w] = h->tail[--j];
    }
    h->n = n;
    return TW_OK;
}

size_t tw_sorted_history_below(const tw_sorted_history *h, double x)
{
    size_t lo = 0, hi = h->n; /* first index with v >= x */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (h->v[mid] < x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

size_t tw_sorted_history_above(const tw_sorted_history *h, double x)
{
    if (isnan(x))
        return 0;             /* nothing compares greater than NaN */
    size_t lo = 0, hi = h->n; /* first index with v > x */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (h->v[mid] <= x)
            lo = mid + 1;
        else
            hi = mid;
    }
    return h->n - lo;
}

void tw_sorted_history_free(tw_sorted_history *h)
{
    free(h->v);
    free(h->tail);
    memset(h, 0, sizeof(*h));
}
