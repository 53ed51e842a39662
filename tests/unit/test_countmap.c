/* Unit tests of the public header-only trainwatch/countmap.h: quantiles
 * bit-identical to the engine's numpy-exact tw_quantile_sorted over the
 * full sorted list, any insertion order, coarsening under a cap,
 * checkpoint round trip (trainwatch/ser.h) in the compact form, and
 * restore of the older fixed-width form. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include "byte_sink.h"
#include "numeric.h"
#include "trainwatch/countmap.h"

static int bits_eq(double a, double b)
{
    return memcmp(&a, &b, sizeof(a)) == 0;
}

static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

static const double QS[] = {0.0, 0.05, 0.25, 0.5, 0.75, 0.95, 0.99, 1.0};

static void check_against_sorted(tw_countmap *m, double *vals, size_t n)
{
    double *s = malloc(n * sizeof(double));
    assert_non_null(s);
    memcpy(s, vals, n * sizeof(double));
    tw_sort_doubles(s, n);
    for (size_t k = 0; k < sizeof(QS) / sizeof(QS[0]); k++) {
        double got;
        assert_int_equal(tw_countmap_quantile(m, QS[k], &got), TW_OK);
        double want = tw_quantile_sorted(s, n, QS[k]);
        if (!bits_eq(got, want))
            fail_msg("q=%g n=%zu got %.17g want %.17g", QS[k], n, got, want);
    }
    assert_true(bits_eq(tw_countmap_min(m), s[0]));
    assert_true(bits_eq(tw_countmap_max(m), s[n - 1]));
    free(s);
}

static void test_worked_example_box(void **st)
{
    (void)st;
    tw_countmap m;
    tw_countmap_init(&m, 0);
    const double v[] = {0, 80, 90, 5};
    for (size_t i = 0; i < 4; i++)
        assert_int_equal(tw_countmap_add(&m, v[i]), TW_OK);
    tw_box b;
    assert_int_equal(tw_countmap_box(&m, &b), TW_OK);
    /* RULES.md §3.1: p25 3.75, p50 42.5, p75 82.5, p95 88.5, upper 90,
     * lower 0 */
    assert_true(bits_eq(b.p25, 3.75));
    assert_true(bits_eq(b.p50, 42.5));
    assert_true(bits_eq(b.p75, 82.5));
    assert_true(bits_eq(b.p95, 88.5));
    assert_true(bits_eq(b.upper, 90.0));
    assert_true(bits_eq(b.lower, 0.0));
    double q5;
    assert_int_equal(tw_countmap_quantile(&m, 0.05, &q5), TW_OK);
    assert_true(bits_eq(q5, 0.7500000000000001));
    tw_countmap_free(&m);
}

static void test_random_matches_numpy(void **st)
{
    (void)st;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (int round = 0; round < 200; round++) {
        size_t n = 1 + rng_next(&seed) % 700;
        double *v = malloc(n * sizeof(double));
        assert_non_null(v);
        tw_countmap m;
        tw_countmap_init(&m, 0);
        for (size_t i = 0; i < n; i++) {
            /* utilisation-like values with ties, some with two decimals */
            uint64_t r = rng_next(&seed);
            v[i] =
                (round % 2) ? (double)(r % 101) : (double)(r % 10001) / 100.0;
            assert_int_equal(tw_countmap_add(&m, v[i]), TW_OK);
        }
        check_against_sorted(&m, v, n);
        tw_countmap_free(&m);
        free(v);
    }
}

static void test_order_independent(void **st)
{
    (void)st;
    double v[300];
    uint64_t seed = 42;
    for (size_t i = 0; i < 300; i++)
        v[i] = (double)(rng_next(&seed) % 1000) / 7.0;
    tw_countmap a, b;
    tw_countmap_init(&a, 0);
    tw_countmap_init(&b, 0);
    for (size_t i = 0; i < 300; i++) {
        assert_int_equal(tw_countmap_add(&a, v[i]), TW_OK);
        assert_int_equal(tw_countmap_add(&b, v[299 - i]), TW_OK);
    }
    for (size_t k = 0; k < sizeof(QS) / sizeof(QS[0]); k++) {
        double x, y;
        assert_int_equal(tw_countmap_quantile(&a, QS[k], &x), TW_OK);
        assert_int_equal(tw_countmap_quantile(&b, QS[k], &y), TW_OK);
        assert_true(bits_eq(x, y));
    }
    /* interleave queries and inserts: the lazy view must follow */
    assert_int_equal(tw_countmap_add(&a, 1e6), TW_OK);
    double top;
    assert_int_equal(tw_countmap_quantile(&a, 1.0, &top), TW_OK);
    assert_true(bits_eq(top, 1e6));
    tw_countmap_free(&a);
    tw_countmap_free(&b);
}

static void test_empty_and_nan(void **st)
{
    (void)st;
    tw_countmap m;
    tw_countmap_init(&m, 0);
    double q;
    assert_int_equal(tw_countmap_quantile(&m, 0.5, &q), TW_ERR);
    tw_box b;
    assert_int_equal(tw_countmap_box(&m, &b), TW_ERR);
    assert_int_equal(tw_countmap_add(&m, 1.0), TW_OK);
    assert_int_equal(tw_countmap_add(&m, NAN), TW_OK);
    assert_int_equal(tw_countmap_count(&m), 2);
    assert_int_equal(tw_countmap_quantile(&m, 0.5, &q), TW_OK);
    assert_true(isnan(q));
    assert_true(isnan(tw_countmap_max(&m)));
    tw_countmap_clear(&m);
    assert_int_equal(tw_countmap_count(&m), 0);
    tw_countmap_free(&m);
}

static void test_cap_coarsens_keeps_extremes(void **st)
{
    (void)st;
    tw_countmap m;
    tw_countmap_init(&m, 100);
    double v[5000];
    uint64_t seed = 7;
    for (size_t i = 0; i < 5000; i++) {
        v[i] = (double)(rng_next(&seed) % 1000000) / 1e4; /* 0 .. 99.9999 */
        assert_int_equal(tw_countmap_add(&m, v[i]), TW_OK);
    }
    assert_true(tw_countmap_distinct(&m) <= 100);
    assert_false(tw_countmap_exact(&m));
    double *s = malloc(sizeof(v));
    assert_non_null(s);
    memcpy(s, v, sizeof(v));
    tw_sort_doubles(s, 5000);
    assert_true(bits_eq(tw_countmap_max(&m), s[4999]));
    assert_true(bits_eq(tw_countmap_min(&m), s[0]));
    double q;
    assert_int_equal(tw_countmap_quantile(&m, 1.0, &q), TW_OK);
    assert_true(bits_eq(q, s[4999]));
    /* approximate median: within one quantum of the exact one */
    assert_int_equal(tw_countmap_quantile(&m, 0.5, &q), TW_OK);
    double exact = tw_quantile_sorted(s, 5000, 0.5);
    assert_true(fabs(q - exact) <= m.quantum);
    assert_int_equal(tw_countmap_count(&m), 5000);
    free(s);
    tw_countmap_free(&m);
}

static void test_save_restore(void **st)
{
    (void)st;
    tw_host host = sink_host();
    tw_buf buf = {0};
    tw_countmap a, b;
    tw_countmap_init(&a, 0);
    tw_countmap_init(&b, 0);
    double v[257];
    for (size_t i = 0; i < 257; i++) {
        v[i] = (double)((i * 37) % 101) + 0.25;
        assert_int_equal(tw_countmap_add(&a, v[i]), TW_OK);
    }
    tw_ser s;
    tw_ser_init(&s, &host, &buf);
    tw_countmap_save(&a, &s);
    assert_true(tw_ser_ok(&s));
    tw_deser d;
    tw_deser_init(&d, buf.p, buf.n);
    assert_int_equal(tw_countmap_restore(&b, &d), TW_OK);
    assert_true(tw_deser_done(&d));
    check_against_sorted(&b, v, 257);
    /* truncated input is rejected */
    tw_deser_init(&d, buf.p, buf.n - 3);
    assert_int_equal(tw_countmap_restore(&b, &d), TW_ERR);
    assert_true(tw_countmap_memory(&a) > 0);
    tw_countmap_free(&a);
    tw_countmap_free(&b);
    free(buf.p);
}

/* Saves a, restores into a fresh map and checks that the restored map
 * holds the same keys in the same order with the same counts and stats.
 * Returns the saved bytes. */
static size_t roundtrip_same(tw_countmap *a, size_t max_keys)
{
    tw_host host = sink_host();
    tw_buf buf = {0};
    tw_ser s;
    tw_ser_init(&s, &host, &buf);
    tw_countmap_save(a, &s);
    assert_true(tw_ser_ok(&s));
    tw_countmap b;
    tw_countmap_init(&b, max_keys);
    tw_deser d;
    tw_deser_init(&d, buf.p, buf.n);
    assert_int_equal(tw_countmap_restore(&b, &d), TW_OK);
    assert_true(tw_deser_done(&d));
    assert_int_equal(b.map.n, a->map.n);
    for (size_t i = 0; i < a->map.n; i++) {
        assert_true(bits_eq(b.map.ent[i].key, a->map.ent[i].key));
        assert_int_equal(b.map.ent[i].val, a->map.ent[i].val);
    }
    assert_int_equal(b.n, a->n);
    assert_int_equal(b.nnan, a->nnan);
    assert_true(bits_eq(b.min, a->min));
    assert_true(bits_eq(b.max, a->max));
    assert_true(bits_eq(b.quantum, a->quantum));
    /* every proper prefix is refused */
    for (size_t cut = 0; cut < buf.n; cut += 1 + buf.n / 64) {
        tw_deser_init(&d, buf.p, cut);
        assert_int_equal(tw_countmap_restore(&b, &d), TW_ERR);
    }
    tw_countmap_free(&b);
    free(buf.p);
    return buf.n;
}

static void test_compact_percentages(void **st)
{
    (void)st;
    tw_countmap a;
    tw_countmap_init(&a, 0);
    uint64_t seed = 11;
    /* 20 000 utilisation readings with two decimals, 0.00 .. 100.00 */
    for (size_t i = 0; i < 20000; i++) {
        double v = (double)(rng_next(&seed) % 10001) / 100.0;
        assert_int_equal(tw_countmap_add(&a, v), TW_OK);
    }
    assert_int_equal(tw_countmap_add(&a, NAN), TW_OK);
    size_t k = tw_countmap_distinct(&a);
    size_t bytes = roundtrip_same(&a, 0);
    /* the fixed-width form took 16 bytes a key; hundredths take <= 5 */
    assert_true(bytes <= 64 + 5 * k);
    tw_countmap_free(&a);
}

static void test_compact_quanta_and_f64_keys(void **st)
{
    (void)st;
    /* coarsened past 0.01: keys are multiples of the quantum */
    tw_countmap a;
    tw_countmap_init(&a, 100);
    uint64_t seed = 5;
    for (size_t i = 0; i < 5000; i++)
        assert_int_equal(
            tw_countmap_add(&a, (double)(rng_next(&seed) % 1000000) / 1e4),
            TW_OK);
    assert_true(a.quantum > 0.01);
    size_t k = tw_countmap_distinct(&a);
    assert_true(roundtrip_same(&a, 100) <= 64 + 6 * k);
    tw_countmap_free(&a);
    /* keys that are no exact hundredths (and -0.0, +inf) keep their bits */
    tw_countmap_init(&a, 0);
    const double odd[] = {0.1 + 0.2, -0.0, 1.0 / 3.0, INFINITY, 1e300, 0.5};
    for (size_t i = 0; i < sizeof(odd) / sizeof(odd[0]); i++)
        assert_int_equal(tw_countmap_add(&a, odd[i]), TW_OK);
    roundtrip_same(&a, 0);
    tw_countmap_free(&a);
    /* an empty map */
    tw_countmap_init(&a, 0);
    roundtrip_same(&a, 0);
    tw_countmap_free(&a);
}

/* Per-timestamp sums of hundredths (OverallSystemUsage's keys) are often
 * a few ulps off a hundredth: written as the hundredth plus the ulps. */
static void test_compact_near_hundredths(void **st)
{
    (void)st;
    tw_countmap a;
    tw_countmap_init(&a, 0);
    uint64_t seed = 3;
    size_t off = 0;
    for (size_t i = 0; i < 5000; i++) {
        double sum = 0.0;
        for (int c = 0; c < 96; c++)
            sum += (double)(rng_next(&seed) % 10001) / 100.0;
        int ok;
        tw_countmap_key_int_(sum, TW_COUNTMAP_KEYS_HUNDREDTHS, 0.0, &ok);
        off += !ok;
        assert_int_equal(tw_countmap_add(&a, sum), TW_OK);
    }
    assert_true(off > 0); /* some sums are no exact hundredths */
    /* keys whose nearest hundredth has the other sign: the largest
     * residuals (-0.0 against +0.0 is INT64_MIN) */
    assert_int_equal(tw_countmap_add(&a, -0.0), TW_OK);
    assert_int_equal(tw_countmap_add(&a, -0.001), TW_OK);
    size_t k = tw_countmap_distinct(&a);
    assert_int_equal(tw_countmap_key_mode_(&a),
                     TW_COUNTMAP_KEYS_NEAR_HUNDREDTHS);
    assert_true(roundtrip_same(&a, 0) <= 64 + 6 * k);
    tw_countmap_free(&a);
    /* tiny values (their ulps are far below a hundredth) keep their bits */
    tw_countmap_init(&a, 0);
    for (size_t i = 0; i < 1000; i++)
        assert_int_equal(tw_countmap_add(&a, (double)i * 1e-7 + 1e-9), TW_OK);
    assert_int_equal(tw_countmap_key_mode_(&a), TW_COUNTMAP_KEYS_F64);
    roundtrip_same(&a, 0);
    tw_countmap_free(&a);
}

/* A checkpoint of the older fixed-width form ("CMAP") is still read. */
static void test_restore_fixed_width_form(void **st)
{
    (void)st;
    tw_host host = sink_host();
    tw_buf buf = {0};
    tw_ser s;
    tw_ser_init(&s, &host, &buf);
    tw_ser_u32(&s, COUNTMAP_TAG);
    tw_ser_u64(&s, 3);    /* n */
    tw_ser_u64(&s, 0);    /* nnan */
    tw_ser_f64(&s, 1.5);  /* min */
    tw_ser_f64(&s, 42.0); /* max */
    tw_ser_f64(&s, 0.0);  /* quantum */
    tw_ser_u64(&s, 2);    /* keys */
    tw_ser_f64(&s, 42.0);
    tw_ser_u64(&s, 1);
    tw_ser_f64(&s, 1.5);
    tw_ser_u64(&s, 2);
    assert_true(tw_ser_ok(&s));
    tw_countmap m;
    tw_countmap_init(&m, 0);
    tw_deser d;
    tw_deser_init(&d, buf.p, buf.n);
    assert_int_equal(tw_countmap_restore(&m, &d), TW_OK);
    assert_true(tw_deser_done(&d));
    double q;
    assert_int_equal(tw_countmap_quantile(&m, 0.5, &q), TW_OK);
    assert_true(bits_eq(q, 1.5));
    assert_int_equal(tw_countmap_count(&m), 3);
    tw_countmap_free(&m);
    free(buf.p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worked_example_box),
        cmocka_unit_test(test_random_matches_numpy),
        cmocka_unit_test(test_order_independent),
        cmocka_unit_test(test_empty_and_nan),
        cmocka_unit_test(test_cap_coarsens_keeps_extremes),
        cmocka_unit_test(test_save_restore),
        cmocka_unit_test(test_compact_percentages),
        cmocka_unit_test(test_compact_quanta_and_f64_keys),
        cmocka_unit_test(test_compact_near_hundredths),
        cmocka_unit_test(test_restore_fixed_width_form),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
