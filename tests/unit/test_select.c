/* test_select.c - the fast paths must equal the plain ones bit for bit:
 * tw_sort_doubles vs qsort, tw_select_quantile (rules/common) vs sorting
 * and tw_quantile_sorted, on random inputs with many ties. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "numeric.h"
/* The helper is part of the rule plugins, not of twcore. */
#include "../../rules/common/select.c"

static uint64_t state = 12345;

static uint64_t next(void)
{
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void fill(double *v, size_t n, int ties)
{
    for (size_t i = 0; i < n; i++)
        v[i] = ties ? (double)(next() % 7) : (double)(next() % 100000) / 100.0;
}

static void test_sort_matches_qsort(void **st)
{
    (void)st;
    double a[3000], b[3000];
    for (int round = 0; round < 300; round++) {
        size_t n = (size_t)(next() % 3000);
        fill(a, n, round % 3 == 0);
        if (round % 5 == 0)
            for (size_t i = 0; i < n; i++)
                a[i] = (double)i; /* already sorted */
        memcpy(b, a, n * sizeof(double));
        tw_sort_doubles(a, n);
        qsort(b, n, sizeof(double), cmp);
        assert_memory_equal(a, b, n * sizeof(double));
    }
    double nan_first[] = {NAN, 3, 1, NAN, 2};
    tw_sort_doubles(nan_first, 5);
    assert_true(nan_first[0] == 1 && nan_first[2] == 3);
    assert_true(isnan(nan_first[3]) && isnan(nan_first[4]));
}

static void test_select_matches_sort(void **st)
{
    (void)st;
    static const double qs[] = {0, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1};
    double a[600], b[600];
    for (int round = 0; round < 2000; round++) {
        size_t n = 1 + (size_t)(next() % 600);
        fill(a, n, round % 2 == 0);
        memcpy(b, a, n * sizeof(double));
        tw_sort_doubles(b, n);
        for (size_t k = 0; k < sizeof(qs) / sizeof(qs[0]); k++) {
            double want = tw_quantile_sorted(b, n, qs[k]);
            double got = tw_select_quantile(a, n, qs[k]);
            if (memcmp(&want, &got, sizeof(double)) != 0)
                fail_msg("n=%zu q=%g: %.17g != %.17g", n, qs[k], got, want);
        }
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sort_matches_qsort),
        cmocka_unit_test(test_select_matches_sort),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
