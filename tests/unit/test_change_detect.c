/* test_change_detect.c - the FailSlow detector (rules/common/change_detect.c)
 * on series with a known answer: a persistent 1.2x and 1.1x shift is
 * confirmed with the right onset and medians; healthy noise with heavy
 * spikes and bursts of them, a shift below min_shift, and a transient
 * slowdown shorter than `persist_s` are not; bad values are ignored. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The detector is part of the rule plugins, not of twcore. */
#include "../../rules/common/change_detect.c"
#include "../../rules/common/select.c"
#include "../../rules/common/sysutil.c"

/* A deterministic normal variate (splitmix64 + Box-Muller). */
typedef struct rng {
    uint64_t s;
} rng;

static double uniform(rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    return ((double)(z >> 11) + 0.5) / 9007199254740992.0;
}

static double gauss(rng *r)
{
    double u = uniform(r), v = uniform(r);
    return sqrt(-2.0 * log(u)) * cos(6.283185307179586 * v);
}

/* Feeds n steps of base seconds x exp(N(0, sigma)) x factor from step
 * `from` on (factor applies in [from, until)); returns the first step at
 * which the detector is TW_CD_SHIFTED, or -1. Times: 1 s apart / step. */
static int64_t feed(tw_cd *d, rng *r, int64_t n, double base, double sigma,
                    int64_t from, int64_t until, double factor, double spike_p)
{
    int64_t first = -1;
    for (int64_t k = 0; k < n; k++) {
        double x = base * exp(sigma * gauss(r));
        if (k >= from && k < until)
            x *= factor;
        if (uniform(r) < spike_p)
            x *= 2.0 + 8.0 * uniform(r);
        tw_cd_state st = tw_cd_feed(d, x, k * 1000000, k);
        if (st == TW_CD_SHIFTED && first < 0)
            first = k;
    }
    return first;
}

static void params(tw_cd_params *p)
{
    tw_cd_params_default(p);
    p->persist_s = 5.0; /* 5 steps of 1 s */
}

static void test_shift_confirmed(void **st)
{
    (void)st;
    static const double factors[] = {1.2, 1.1, 1.5, 2.0};
    for (size_t f = 0; f < 4; f++) {
        tw_cd_params p;
        params(&p);
        tw_cd d;
        assert_int_equal(tw_cd_init(&d, &p), TW_OK);
        rng r = {42 + f};
        int64_t at = feed(&d, &r, 600, 0.5, 0.03, 300, 600, factors[f], 0.01);
        assert_int_equal(d.state, TW_CD_SHIFTED);
        /* onset within 3 steps, confirmed within 10 of it */
        assert_true(llabs(d.onset.step - 300) <= 3);
        assert_true(at >= 300 && at <= 310);
        assert_int_equal(d.detect.step, at);
        assert_true(fabs(d.before - 0.5) < 0.01);
        assert_true(fabs(d.after / d.before - factors[f]) < 0.03);
        tw_cd_free(&d);
    }
}

static void test_noise_and_bursts_not_confirmed(void **st)
{
    (void)st;
    tw_cd_params p;
    params(&p);
    for (uint64_t seed = 1; seed <= 5; seed++) {
        tw_cd d;
        assert_int_equal(tw_cd_init(&d, &p), TW_OK);
        rng r = {seed};
        /* 10 % noise, 3 % spikes of 2-10x */
        assert_int_equal(feed(&d, &r, 4000, 0.2, 0.10, 0, 0, 1.0, 0.03), -1);
        /* a burst of 4 checkpoint-long steps, then the same level again */
        for (int k = 0; k < 4; k++)
            tw_cd_feed(&d, 20.0, (4000 + k) * 1000000LL, 4000 + k);
        feed(&d, &r, 200, 0.2, 0.10, 0, 0, 1.0, 0.0);
        assert_int_equal(d.state, TW_CD_WATCHING);
        tw_cd_free(&d);
    }
}

static void test_small_and_transient_shifts(void **st)
{
    (void)st;
    tw_cd_params p;
    params(&p);
    tw_cd d;
    assert_int_equal(tw_cd_init(&d, &p), TW_OK);
    rng r = {7};
    /* 3 %: below half of min_shift (10 %) */
    assert_int_equal(feed(&d, &r, 1500, 1.0, 0.01, 300, 1500, 1.03, 0), -1);
    tw_cd_free(&d);

    /* 1.5x for 4 steps (4 s < persist_s 5 s), then back: not persistent */
    assert_int_equal(tw_cd_init(&d, &p), TW_OK);
    assert_int_equal(feed(&d, &r, 600, 1.0, 0.01, 300, 304, 1.5, 0), -1);
    tw_cd_free(&d);
    /* the same for 8 steps is a (short-lived) shift: persist_s is what
     * separates them */
    assert_int_equal(tw_cd_init(&d, &p), TW_OK);
    assert_true(feed(&d, &r, 600, 1.0, 0.01, 300, 308, 1.5, 0) > 0);
    tw_cd_free(&d);
}

static void test_learning_and_bad_values(void **st)
{
    (void)st;
    tw_cd_params p;
    params(&p);
    tw_cd d;
    assert_int_equal(tw_cd_init(&d, &p), TW_OK);
    for (uint32_t k = 0; k + 1 < p.min_baseline; k++)
        assert_int_equal(tw_cd_feed(&d, 1.0, k, k), TW_CD_LEARNING);
    /* not durations: ignored, not counted */
    assert_int_equal(tw_cd_feed(&d, 0.0, 1, 1), TW_CD_LEARNING);
    assert_int_equal(tw_cd_feed(&d, -1.0, 1, 1), TW_CD_LEARNING);
    assert_int_equal(tw_cd_feed(&d, NAN, 1, 1), TW_CD_LEARNING);
    assert_int_equal(tw_cd_feed(&d, INFINITY, 1, 1), TW_CD_LEARNING);
    assert_int_equal(d.n, p.min_baseline - 1);
    assert_int_equal(tw_cd_feed(&d, 1.0, 99, 99), TW_CD_WATCHING);
    assert_true(fabs(tw_cd_baseline(&d) - 1.0) < 1e-12);
    assert_true(fabs(tw_cd_recent(&d, 8) - 1.0) < 1e-12);
    tw_cd_free(&d);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shift_confirmed),
        cmocka_unit_test(test_noise_and_bursts_not_confirmed),
        cmocka_unit_test(test_small_and_transient_shifts),
        cmocka_unit_test(test_learning_and_bad_values),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
