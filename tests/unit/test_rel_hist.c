/* test_rel_hist.c - the relative-error histogram (rules/common/rel_hist.c):
 * every quantile within alpha of numpy's exact one on random, heavy-tailed
 * and negative data, bucket count independent of the number of values,
 * monotone bucket keys, the zero lane and NaN, and a lossless
 * save/restore that rejects truncated and inconsistent input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The helper is part of the rule plugins, not of twcore. */
#include "../../rules/common/rel_hist.c"
#include "byte_sink.h"

#define ALPHA 0.005

static uint64_t rng = 0x1234567u;

static double unif(void) /* (0, 1) */
{
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* numpy's linear quantile of sorted v. */
static double exact_q(const double *v, size_t n, double q)
{
    double pos = (double)(n - 1) * q;
    if (pos >= (double)(n - 1))
        return v[n - 1];
    size_t i = (size_t)floor(pos);
    double t = pos - (double)i, a = v[i], b = v[i + 1];
    return t < 0.5 ? a + (b - a) * t : b - (b - a) * (1.0 - t);
}

static const double qs[] = {0.0,  0.001, 0.01, 0.25,  0.5,
                            0.75, 0.95,  0.99, 0.999, 1.0};

/* Adds v[0..n) and checks every quantile against the exact one. Values of
 * one sign, so a convex mix of two answers within alpha is within alpha. */
static void check_quantiles(double *v, size_t n)
{
    tw_rel_hist h;
    tw_rel_hist_init(&h, ALPHA);
    for (size_t i = 0; i < n; i++)
        assert_int_equal(tw_rel_hist_add_n(&h, v[i], 1), TW_OK);
    qsort(v, n, sizeof(*v), cmp);
    assert_true(h.min == v[0] && h.max == v[n - 1]);
    for (size_t k = 0; k < sizeof(qs) / sizeof(qs[0]); k++) {
        double got, want = exact_q(v, n, qs[k]);
        assert_int_equal(tw_rel_hist_quantile(&h, qs[k], &got), TW_OK);
        /* a few ulps of log() at a bucket's edge on top of alpha */
        if (!(fabs(got - want) <= ALPHA * (1 + 1e-9) * fabs(want)))
            fail_msg("q %g: got %.17g want %.17g (rel %g)", qs[k], got, want,
                     fabs(got - want) / fabs(want));
    }
    tw_rel_hist_free(&h);
}

static void test_quantiles_within_alpha(void **st)
{
    (void)st;
    enum { N = 200000 };
    double *v = malloc(N * sizeof(*v));
    assert_non_null(v);
    /* step-like: 100 ms with jitter, whole µs */
    for (size_t i = 0; i < N; i++)
        v[i] = floor(1e5 * (1.0 + 0.05 * unif())) / 1e6;
    check_quantiles(v, N);
    /* log-normal over several decades */
    for (size_t i = 0; i < N; i++)
        v[i] = exp(3.0 * sqrt(-2.0 * log(unif())) * cos(6.283185307 * unif()));
    check_quantiles(v, N);
    /* heavy tail: Pareto (shape 1.1) */
    for (size_t i = 0; i < N; i++)
        v[i] = 0.1 * pow(unif(), -1.0 / 1.1);
    check_quantiles(v, N);
    /* negative values only */
    for (size_t i = 0; i < N; i++)
        v[i] = -0.5 * pow(unif(), -0.5);
    check_quantiles(v, N);
    free(v);
}

/* The bucket count follows the range, not the number of values. */
static void test_buckets_bounded(void **st)
{
    (void)st;
    tw_rel_hist h;
    tw_rel_hist_init(&h, ALPHA);
    size_t at10k = 0;
    for (size_t i = 0; i < 1000000; i++) {
        double x = 0.05 + 0.1 * unif(); /* 0.05 .. 0.15: one factor 3 */
        assert_int_equal(tw_rel_hist_add_n(&h, x, 1), TW_OK);
        if (i == 10000)
            at10k = tw_rel_hist_buckets(&h);
    }
    size_t b = tw_rel_hist_buckets(&h);
    assert_true(b <= (size_t)(log(3.0) / h.lg) + 2);
    assert_true(b <= at10k + 2);
    assert_true(h.n == 1000000);
    tw_rel_hist_free(&h);
}

static int collect(void *ctx, int64_t key, double rep, uint64_t count)
{
    int64_t *last = ctx;
    assert_true(key > *last);
    assert_true(count > 0);
    (void)rep;
    *last = key;
    return 0;
}

static void test_keys_zero_nan(void **st)
{
    (void)st;
    tw_rel_hist h;
    tw_rel_hist_init(&h, ALPHA);
    double prev = -1e12;
    int64_t pk = tw_rel_hist_key(&h, prev);
    for (int i = 0; i < 100000; i++) {
        double x = prev + (1e-6 + fabs(prev) * 1e-3 * unif());
        int64_t k = tw_rel_hist_key(&h, x);
        assert_true(k >= pk);
        pk = k;
        prev = x;
        if (x > 1e12)
            break;
    }
    assert_int_equal(tw_rel_hist_add_n(&h, 0.0, 3), TW_OK);
    assert_int_equal(tw_rel_hist_add_n(&h, 1e-12, 1), TW_OK);
    assert_int_equal(tw_rel_hist_add_n(&h, NAN, 2), TW_OK);
    assert_int_equal(tw_rel_hist_add_n(&h, 2.0, 1), TW_OK);
    assert_int_equal(tw_rel_hist_add_n(&h, -2.0, 1), TW_OK);
    assert_int_equal(tw_rel_hist_add_n(&h, 1e300, 1), TW_OK);
    assert_true(h.n == 7 && h.nnan == 2 && h.zeros == 4);
    assert_int_equal(tw_rel_hist_key(&h, 0.0), tw_rel_hist_key(&h, 1e-12));
    int64_t last = INT64_MIN;
    assert_int_equal(tw_rel_hist_each(&h, collect, &last), 0);
    double med;
    assert_int_equal(tw_rel_hist_quantile(&h, 0.5, &med), TW_OK);
    assert_true(med == 0.0);
    double top;
    assert_int_equal(tw_rel_hist_quantile(&h, 1.0, &top), TW_OK);
    assert_true(top == 1e300); /* the max is exact */
    tw_rel_hist_free(&h);
    tw_rel_hist_init(&h, ALPHA);
    assert_int_equal(tw_rel_hist_quantile(&h, 0.5, &med), TW_ERR);
    tw_rel_hist_free(&h);
}

static void test_save_restore(void **st)
{
    (void)st;
    tw_host host = sink_host();
    tw_buf buf = {0};
    tw_rel_hist a, b;
    tw_rel_hist_init(&a, ALPHA);
    tw_rel_hist_init(&b, ALPHA);
    for (int i = 0; i < 50000; i++)
        assert_int_equal(
            tw_rel_hist_add_n(&a, (i % 3 ? 1 : -1) * 0.1 * pow(unif(), -1.0),
                              1 + (uint64_t)i % 3),
            TW_OK);
    assert_int_equal(tw_rel_hist_add_n(&a, 0.0, 5), TW_OK);
    tw_ser s;
    tw_ser_init(&s, &host, &buf);
    tw_rel_hist_save(&a, &s);
    assert_true(tw_ser_ok(&s));
    /* varint gaps and counts: a few bytes a bucket */
    assert_true(buf.n < 64 + 6 * tw_rel_hist_buckets(&a));
    tw_deser d;
    tw_deser_init(&d, buf.p, buf.n);
    assert_int_equal(tw_rel_hist_restore(&b, &d), TW_OK);
    assert_true(tw_deser_done(&d));
    assert_true(a.n == b.n && a.zeros == b.zeros && a.min == b.min &&
                a.max == b.max);
    for (size_t k = 0; k < sizeof(qs) / sizeof(qs[0]); k++) {
        double qa, qb;
        assert_int_equal(tw_rel_hist_quantile(&a, qs[k], &qa), TW_OK);
        assert_int_equal(tw_rel_hist_quantile(&b, qs[k], &qb), TW_OK);
        assert_true(memcmp(&qa, &qb, sizeof(qa)) == 0);
    }
    /* truncated input is rejected and leaves an empty histogram */
    tw_deser_init(&d, buf.p, buf.n - 2);
    assert_int_equal(tw_rel_hist_restore(&b, &d), TW_ERR);
    assert_true(b.n == 0);
    /* a count that does not add up is rejected */
    buf.p[0] ^= 1;
    tw_deser_init(&d, buf.p, buf.n);
    assert_int_equal(tw_rel_hist_restore(&b, &d), TW_ERR);
    tw_rel_hist_free(&a);
    tw_rel_hist_free(&b);
    free(buf.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_quantiles_within_alpha),
        cmocka_unit_test(test_buckets_bounded),
        cmocka_unit_test(test_keys_zero_nan),
        cmocka_unit_test(test_save_restore),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
