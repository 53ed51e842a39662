/* test_numeric.c - numpy-exact statistics and Python float printing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <math.h>
#include <string.h>

#include "json_writer.h"
#include "numeric.h"

static void test_quantile_worked_examples(void **st)
{
    (void)st;
    /* RULES.md §3.1: gpu0 values 0, 80, 90, 5 -> p95 88.5, p5 0.75..01 */
    double v[] = {0, 80, 90, 5};
    tw_sort_doubles(v, 4);
    assert_true(tw_quantile_sorted(v, 4, 0.95) == 88.5);
    assert_true(tw_quantile_sorted(v, 4, 0.05) == 0.7500000000000001);
    assert_true(tw_quantile_sorted(v, 4, 0.25) == 3.75);
    assert_true(tw_quantile_sorted(v, 4, 0.5) == 42.5);
    assert_true(tw_quantile_sorted(v, 4, 0.75) == 82.5);
    /* window 5, 85, 95, 100: p95 99.25, p5 17 */
    double w[] = {5, 85, 95, 100};
    assert_true(tw_quantile_sorted(w, 4, 0.95) == 99.25);
    assert_true(tw_quantile_sorted(w, 4, 0.05) == 17.0);
    /* q = 1 and a single value */
    assert_true(tw_quantile_sorted(w, 4, 1.0) == 100.0);
    double one[] = {42.0};
    assert_true(tw_quantile_sorted(one, 1, 0.95) == 42.0);
    /* the modern lerp keeps 100 for two neighbours equal to 100 */
    double h[] = {99.0, 100.0, 100.0};
    assert_true(tw_quantile_sorted(h, 3, 0.95) == 100.0);
}

static void test_pairwise_mean_std(void **st)
{
    (void)st;
    /* RULES.md §3.0: 103 copies of 0.1 */
    double v[103];
    for (int i = 0; i < 103; i++)
        v[i] = 0.1;
    assert_true(tw_mean(v, 103) == 0.09999999999999998);
    double s = tw_std(v, 103);
    assert_true(s > 2.7e-17 && s < 2.9e-17);
    /* RULES.md §3.6: 101 x 0.1 and 2 x 1.0 */
    double d[103];
    for (int i = 0; i < 103; i++)
        d[i] = 0.1;
    d[50] = 1.0;
    d[80] = 1.0;
    assert_true(tw_mean(d, 103) == 0.11747572815533978);
    assert_true(tw_std(d, 103) == 0.1241883821669583);
    assert_true(tw_round2(tw_std(d, 103)) == 0.12);
    double sorted[103];
    memcpy(sorted, d, sizeof(d));
    tw_sort_doubles(sorted, 103);
    assert_true(tw_quantile_sorted(sorted, 103, 0.99) == 0.9820000000000035);
    /* small n: left-to-right; n in [8,128]: eight accumulators */
    double small[] = {1e16, 1.0, -1e16};
    assert_true(tw_sum_pairwise(small, 3) == 0.0);
    assert_true(isnan(tw_mean(NULL, 0)));
}

static void test_hist100(void **st)
{
    (void)st;
    int64_t probs[100];
    double edges[101];
    double v[101];
    for (int i = 0; i < 101; i++)
        v[i] = 0.1;
    tw_hist100(v, 101, probs, edges);
    assert_true(edges[0] == 0.1 - 0.5);
    assert_true(edges[100] == 0.1 + 0.5);
    assert_int_equal(probs[50], 101);
    /* distinct values: max lands in the last bin */
    double w[] = {0.0, 1.0, 0.5, 0.99};
    tw_hist100(w, 4, probs, edges);
    assert_int_equal(probs[0], 1);
    assert_int_equal(probs[50], 1);
    assert_int_equal(probs[99], 2);
    /* empty: range 0..1, no counts */
    tw_hist100(NULL, 0, probs, edges);
    assert_true(edges[0] == 0.0 && edges[100] == 1.0);
    for (int i = 0; i < 100; i++)
        assert_int_equal(probs[i], 0);
    /* infinite ends (a corrupt checkpoint's, the state fuzzer found): a
     * value whose bin position is NaN goes in no bin (it was cast to a
     * bin index: undefined, on x86 bin 0 by address wrap-around) */
    double inf[][3] = {{-INFINITY, 1.0, INFINITY},
                       {-INFINITY, 2.0, 2.0},
                       {1.0, 2.0, INFINITY},
                       {-INFINITY, -INFINITY, -INFINITY}};
    const int64_t binned[] = {0, 0, 2, 0}; /* 1.0 and 2.0 of the third */
    for (size_t k = 0; k < sizeof(inf) / sizeof(inf[0]); k++) {
        tw_hist100(inf[k], 3, probs, edges);
        int64_t total = 0;
        for (int i = 0; i < 100; i++) {
            assert_true(probs[i] >= 0);
            total += probs[i];
        }
        assert_int_equal(total, binned[k]);
    }
}

static void test_round2(void **st)
{
    (void)st;
    /* 2.675 * 100 is exactly 267.5 in doubles: numpy gives 2.68 where
     * Python's correctly rounded round() gives 2.67. */
    assert_true(tw_round2(2.675) == 2.68);
    assert_true(tw_round2(0.125) == 0.12); /* half to even */
    assert_true(tw_round2(6.456) == 6.46);
}

static void expect_repr(double v, const char *want)
{
    char buf[64];
    tw_py_float_repr(v, buf, sizeof(buf));
    assert_string_equal(buf, want);
}

static void test_py_float_repr(void **st)
{
    (void)st;
    expect_repr(5.0, "5.0");
    expect_repr(0.1, "0.1");
    expect_repr(0.7500000000000001, "0.7500000000000001");
    expect_repr(0.022222222222222143, "0.022222222222222143");
    expect_repr(1596668240.3562295, "1596668240.3562295");
    expect_repr(1e-05, "1e-05");
    expect_repr(0.0001, "0.0001");
    expect_repr(1e16, "1e+16");
    expect_repr(1234567890123456.0, "1234567890123456.0");
    expect_repr(-2.5, "-2.5");
    expect_repr(0.0, "0.0");
    expect_repr(-0.0, "-0.0");
    expect_repr(1.5e300, "1.5e+300");
}

static void test_json_writer(void **st)
{
    (void)st;
    tw_json *j = tw_json_new();
    tw_json_object_begin(j);
    tw_json_key(j, "a");
    tw_json_double(j, 90.0);
    tw_json_key_double(j, 100.01);
    tw_json_array_begin(j);
    tw_json_int(j, 1);
    tw_json_double(j, NAN);
    tw_json_double(j, -INFINITY);
    tw_json_string(j, "q\"\n\xc3\xa9");
    tw_json_array_end(j);
    tw_json_key(j, "e");
    tw_json_object_begin(j);
    tw_json_object_end(j);
    tw_json_object_end(j);
    assert_false(tw_json_failed(j));
    assert_string_equal(tw_json_str(j),
                        "{\"a\": 90.0, \"100.01\": [1, NaN, -Infinity, "
                        "\"q\\\"\\n\\u00e9\"], \"e\": {}}");
    tw_json_reset(j);
    tw_json_set_compact(j, 1);
    tw_json_array_begin(j);
    tw_json_bool(j, 1);
    tw_json_null(j);
    tw_json_array_end(j);
    assert_string_equal(tw_json_str(j), "[true,null]");
    /* strict output (alerts) has no NaN/Infinity tokens */
    tw_json_reset(j);
    tw_json_set_strict(j, 1);
    tw_json_array_begin(j);
    tw_json_double(j, NAN);
    tw_json_double(j, INFINITY);
    tw_json_double(j, 2.5);
    tw_json_array_end(j);
    assert_string_equal(tw_json_str(j), "[null,null,2.5]");
    assert_int_equal(tw_json_nonfinite(j), 2); /* for the results' flag */
    tw_json_reset(j);
    assert_int_equal(tw_json_nonfinite(j), 0);
    tw_json_set_strict(j, 0);
    /* unbalanced output is reported */
    tw_json_reset(j);
    tw_json_object_begin(j);
    assert_true(tw_json_failed(j));
    tw_json_free(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantile_worked_examples),
        cmocka_unit_test(test_pairwise_mean_std),
        cmocka_unit_test(test_hist100),
        cmocka_unit_test(test_round2),
        cmocka_unit_test(test_py_float_repr),
        cmocka_unit_test(test_json_writer),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
