/* test_rule_memos.c - the rules' per-scan helpers (rules/common): the
 * sorted history must equal a sort of the whole history after any
 * sequence of appends, with the same counts below/above a cut-off as a
 * scan; the pointer memo must give back what was put, miss what was not,
 * forget on clear and stop keeping (not fail) when full. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The helpers are part of the rule plugins, not of twcore. */
#include "../../rules/common/ptr_memo.c"
#include "../../rules/common/sorted_history.c"

static uint64_t state = 777;

static uint64_t next(void)
{
    uint64_t z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static void test_history_equals_sort(void **st)
{
    (void)st;
    enum { MAX = 4000 };
    double *d = malloc(MAX * sizeof(double));
    double *want = malloc(MAX * sizeof(double));
    assert_non_null(d);
    assert_non_null(want);
    for (int round = 0; round < 8; round++) {
        tw_sorted_history h;
        memset(&h, 0, sizeof(h));
        size_t n = 0;
        while (n < MAX) {
            /* appends of 0..300 values, often with ties */
            size_t k = (size_t)(next() % 301);
            if (n + k > MAX)
                k = MAX - n;
            for (size_t i = 0; i < k; i++)
                d[n + i] = round % 2 ? (double)(next() % 9)
                                     : (double)(next() % 100000) / 1000.0;
            n += k;
            assert_int_equal(tw_sorted_history_sync(&h, d, n), 0);
            assert_int_equal(h.n, n);
            memcpy(want, d, n * sizeof(double));
            qsort(want, n, sizeof(double), cmp_double);
            assert_memory_equal(h.v, want, n * sizeof(double));
            double cut = n > 0 ? d[next() % n] : 1.0;
            size_t below = 0, above = 0;
            for (size_t i = 0; i < n; i++) {
                below += d[i] < cut;
                above += d[i] > cut;
            }
            assert_int_equal(tw_sorted_history_below(&h, cut), below);
            assert_int_equal(tw_sorted_history_above(&h, cut), above);
            assert_int_equal(tw_sorted_history_above(&h, NAN), 0);
            assert_int_equal(tw_sorted_history_below(&h, NAN), 0);
        }
        tw_sorted_history_free(&h);
    }
    free(d);
    free(want);
}

static void test_history_nan(void **st)
{
    (void)st;
    double d[] = {3, 1, 2, NAN, 5};
    tw_sorted_history h;
    memset(&h, 0, sizeof(h));
    assert_int_equal(tw_sorted_history_sync(&h, d, 3), 0);
    assert_true(h.v[0] == 1 && h.v[2] == 3);
    assert_int_equal(tw_sorted_history_sync(&h, d, 5), 1); /* no order */
    assert_int_equal(h.n, 0);
    tw_sorted_history_free(&h);
}

static void test_memo(void **st)
{
    (void)st;
    static char strings[TW_PTR_MEMO_SLOTS]; /* distinct pointers */
    tw_ptr_memo *m = calloc(1, sizeof(*m));
    assert_non_null(m);
    int v = -1;
    assert_int_equal(tw_ptr_memo_get(m, &strings[0], &v), 0);
    tw_ptr_memo_put(m, &strings[0], 7);
    tw_ptr_memo_put(m, &strings[1], 0);
    assert_int_equal(tw_ptr_memo_get(m, &strings[0], &v), 1);
    assert_int_equal(v, 7);
    assert_int_equal(tw_ptr_memo_get(m, &strings[1], &v), 1);
    assert_int_equal(v, 0);
    tw_ptr_memo_put(m, &strings[0], 9); /* replaces */
    assert_int_equal(tw_ptr_memo_get(m, &strings[0], &v), 1);
    assert_int_equal(v, 9);
    tw_ptr_memo_clear(m);
    assert_int_equal(tw_ptr_memo_get(m, &strings[0], &v), 0);
    /* full: the first TW_PTR_MEMO_MAX are kept, the rest miss */
    for (size_t i = 0; i < TW_PTR_MEMO_SLOTS; i++)
        tw_ptr_memo_put(m, &strings[i], (int)i);
    for (size_t i = 0; i < TW_PTR_MEMO_SLOTS; i++) {
        int got = tw_ptr_memo_get(m, &strings[i], &v);
        assert_int_equal(got, i < TW_PTR_MEMO_MAX);
        if (got)
            assert_int_equal(v, (int)i);
    }
    free(m);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_history_equals_sort),
        cmocka_unit_test(test_history_nan),
        cmocka_unit_test(test_memo),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
