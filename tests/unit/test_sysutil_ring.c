/* test_sysutil_ring.c - the checkpoint forms of the ring of doubles
 * (rules/common/sysutil.c): averages over D cores of percentages with two
 * decimals (BatchSize's CPU points) saved in a few bytes each and restored
 * bit for bit; rings that are not such averages (other divisors, pi,
 * negatives, -0.0, NaN) fall back to a lossless form; hundredths keep
 * their form; noisy hundredths are bit-packed and a ring of few distinct
 * runs is saved as runs, both smaller than the varint form; truncated and
 * inconsistent input is rejected. */
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
#include "../../rules/common/sysutil.c"
#include "byte_sink.h"

#define W 500

static uint64_t lcg(uint64_t *x)
{
    *x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
    return *x >> 33;
}

/* The average over `cores` random hundredths in [lo, lo + 40), summed in
 * order as BatchSize does. */
static double cpu_average(uint64_t *seed, uint32_t cores, double lo)
{
    double sum = 0.0;
    for (uint32_t c = 0; c < cores; c++)
        sum += lo + (double)(lcg(seed) % 4000) / 100.0;
    return sum / (double)cores;
}

/* Save r (divisor D), restore into a fresh ring; every value bit for bit.
 * Returns the saved size. */
static size_t round_trip(const tw_dring *r, uint32_t divisor)
{
    tw_host host = sink_host();
    tw_buf buf = {0};
    tw_ser s;
    tw_ser_init(&s, &host, &buf);
    tw_dring_save_avg(r, &s, divisor);
    assert_true(tw_ser_ok(&s));
    tw_dring back;
    assert_int_equal(tw_dring_init(&back, r->cap), TW_OK);
    tw_deser d;
    tw_deser_init(&d, buf.p, buf.n);
    assert_int_equal(tw_dring_load(&back, &d), TW_OK);
    assert_true(tw_deser_done(&d));
    assert_int_equal(back.len, r->len);
    double a[W], b[W];
    size_t n = tw_dring_copy(r, 0, W, a);
    assert_int_equal(tw_dring_copy(&back, 0, W, b), n);
    assert_memory_equal(a, b, n * sizeof(double));
    /* a truncated save is rejected */
    if (buf.n > 6) {
        tw_deser_init(&d, buf.p, buf.n - 1);
        assert_false(tw_dring_load(&back, &d) == TW_OK && tw_deser_done(&d));
    }
    tw_dring_free(&back);
    free(buf.p);
    return buf.n;
}

static void test_cpu_averages_compact_and_exact(void **state)
{
    (void)state;
    const uint32_t cores[3] = {2, 96, 192};
    for (int k = 0; k < 3; k++) {
        tw_dring r;
        assert_int_equal(tw_dring_init(&r, W), TW_OK);
        uint64_t seed = 42 + (uint64_t)k;
        /* more than W: the ring wraps */
        for (int i = 0; i < W + 77; i++)
            tw_dring_push(&r, cpu_average(&seed, cores[k], 30.0 + i % 7));
        size_t compact = round_trip(&r, cores[k]);
        size_t plain = round_trip(&r, 1); /* not hundredths: f64 bits */
        assert_true(plain >= 8 * W);
        /* h as a varint delta (<= 3 bytes) and the ulps (1-2 bytes) */
        assert_true(compact < 5 * W);
        assert_true(compact * 2 < plain);
        tw_dring_free(&r);
    }
}

static void test_fallbacks_are_lossless(void **state)
{
    (void)state;
    tw_dring r;
    assert_int_equal(tw_dring_init(&r, W), TW_OK);
    uint64_t seed = 7;
    for (int i = 0; i < 100; i++)
        tw_dring_push(&r, cpu_average(&seed, 96, 10.0));
    /* averages over 96 saved as if over 95: not such averages -> f64 */
    assert_true(round_trip(&r, 95) >= 8 * 100);
    /* a value of no average at all, a negative, -0.0 and NaN */
    const double odd[4] = {M_PI, -12.5, -0.0, NAN};
    for (int k = 0; k < 4; k++) {
        tw_dring_push(&r, odd[k]);
        assert_true(round_trip(&r, 96) >= 8 * r.len);
    }
    tw_dring_free(&r);
    /* exact hundredths keep their one-to-three-byte form at any divisor */
    assert_int_equal(tw_dring_init(&r, W), TW_OK);
    for (int i = 0; i < W; i++)
        tw_dring_push(&r, (double)(lcg(&seed) % 10001) / 100.0);
    assert_true(round_trip(&r, 96) < 3 * W);
    tw_dring_free(&r);
}

static void test_inconsistent_input_rejected(void **state)
{
    (void)state;
    tw_host host = sink_host();
    tw_dring r;
    assert_int_equal(tw_dring_init(&r, 8), TW_OK);
    uint64_t seed = 3;
    for (int i = 0; i < 8; i++)
        tw_dring_push(&r, cpu_average(&seed, 4, 20.0));
    tw_buf buf = {0};
    tw_ser s;
    tw_ser_init(&s, &host, &buf);
    tw_dring_save_avg(&r, &s, 4);
    assert_true(tw_ser_ok(&s));
    /* u32 length, u8 form: 8 noisy averages pack */
    assert_int_equal(buf.p[4], RING_PACKED_AVG);
    tw_dring back;
    assert_int_equal(tw_dring_init(&back, 8), TW_OK);
    tw_deser d;
    /* a divisor below 2 */
    uint8_t saved = buf.p[5];
    buf.p[5] = 1; /* u32 little end: divisor 4 -> 1 */
    tw_deser_init(&d, buf.p, buf.n);
    assert_int_equal(tw_dring_load(&back, &d), TW_ERR);
    buf.p[5] = saved;
    /* an unknown form */
    buf.p[4] = RING_RUNS + 1;
    tw_deser_init(&d, buf.p, buf.n);
    assert_int_equal(tw_dring_load(&back, &d), TW_ERR);
    buf.p[4] = RING_PACKED_AVG;
    /* a packed width past the bound (sv base is 1-3 bytes: find the u8
     * width after it by re-reading the base) */
    {
        tw_deser_init(&d, buf.p + 9, buf.n - 9);
        (void)tw_deser_sv(&d);
        size_t at = (size_t)(d.p - buf.p);
        uint8_t w = buf.p[at];
        buf.p[at] = TW_BITPACK_MAX_WIDTH + 1;
        tw_deser_init(&d, buf.p, buf.n);
        assert_int_equal(tw_dring_load(&back, &d), TW_ERR);
        buf.p[at] = w;
        tw_deser_init(&d, buf.p, buf.n);
        assert_int_equal(tw_dring_load(&back, &d), TW_OK);
    }
    /* more values than the ring holds */
    tw_dring small;
    assert_int_equal(tw_dring_init(&small, 4), TW_OK);
    tw_deser_init(&d, buf.p, buf.n);
    assert_int_equal(tw_dring_load(&small, &d), TW_ERR);
    /* an ulps distance beyond the bound */
    tw_buf bad = {0};
    tw_ser_init(&s, &host, &bad);
    tw_ser_u32(&s, 1 | RING_COMPACT);
    tw_ser_u8(&s, RING_AVG);
    tw_ser_u32(&s, 4);
    tw_ser_sv(&s, 1234);
    tw_ser_sv(&s, RING_AVG_MAX_ULPS + 1);
    assert_true(tw_ser_ok(&s));
    tw_deser_init(&d, bad.p, bad.n);
    assert_int_equal(tw_dring_load(&back, &d), TW_ERR);
    free(bad.p);
    free(buf.p);
    tw_dring_free(&small);
    tw_dring_free(&back);
    tw_dring_free(&r);
}

/* The form byte of r saved with divisor 1. */
static uint8_t saved_form(const tw_dring *r)
{
    tw_host host = sink_host();
    tw_buf buf = {0};
    tw_ser s;
    tw_ser_init(&s, &host, &buf);
    tw_dring_save(r, &s);
    assert_true(tw_ser_ok(&s));
    uint8_t form = buf.p[4];
    free(buf.p);
    return form;
}

static void test_packed_and_runs_forms(void **state)
{
    (void)state;
    uint64_t seed = 11;
    tw_dring r;
    assert_int_equal(tw_dring_init(&r, W), TW_OK);
    /* GPU utilisation in an 85-97 % band with two decimals: 11 bits each
     * packed instead of a 2-3 byte varint delta */
    for (int i = 0; i < W + 13; i++)
        tw_dring_push(&r, (double)(8500 + (int)(lcg(&seed) % 1201)) / 100.0);
    assert_int_equal(saved_form(&r), RING_PACKED);
    size_t packed = round_trip(&r, 1);
    assert_true(packed <= 4 + 1 + 3 + 1 + (W * 11 + 7) / 8);
    /* negative hundredths pack too (the base is signed) */
    tw_dring_clear(&r);
    for (int i = 0; i < W; i++)
        tw_dring_push(&r, (double)(-500 + (int)(lcg(&seed) % 300)) / 100.0);
    assert_int_equal(saved_form(&r), RING_PACKED);
    round_trip(&r, 1);
    /* GPU memory: flat with three jumps; runs of equal values */
    tw_dring_clear(&r);
    for (int i = 0; i < W; i++)
        tw_dring_push(&r, i < 100   ? 12.5
                          : i < 300 ? 38.75
                          : i < 301 ? 0.0
                                    : 40.0);
    assert_int_equal(saved_form(&r), RING_RUNS);
    assert_true(round_trip(&r, 1) < 24);
    /* one value throughout: packed at width 0, no block at all */
    tw_dring_clear(&r);
    for (int i = 0; i < W; i++)
        tw_dring_push(&r, 3.0);
    assert_int_equal(saved_form(&r), RING_PACKED);
    assert_int_equal(round_trip(&r, 1), 4 + 1 + 2 + 1);
    /* a smooth ramp keeps the varint deltas (one byte each) */
    tw_dring_clear(&r);
    for (int i = 0; i < W; i++)
        tw_dring_push(&r, (double)(100000 + 37 * i) / 100.0);
    assert_int_equal(saved_form(&r), RING_HUNDREDTHS);
    round_trip(&r, 1);
    /* an empty ring */
    tw_dring_clear(&r);
    round_trip(&r, 1);
    tw_dring_free(&r);
}

static void test_runs_inconsistent_rejected(void **state)
{
    (void)state;
    tw_host host = sink_host();
    tw_dring back;
    assert_int_equal(tw_dring_init(&back, 8), TW_OK);
    /* runs adding up to more (5 + 4), or to fewer (3 + 4), values than
     * the length 8 */
    const uint64_t first[2] = {5, 3};
    for (int k = 0; k < 2; k++) {
        tw_buf buf = {0};
        tw_ser s;
        tw_ser_init(&s, &host, &buf);
        tw_ser_u32(&s, 8 | RING_COMPACT);
        tw_ser_u8(&s, RING_RUNS);
        tw_ser_uv(&s, 2);
        tw_ser_sv(&s, 100);
        tw_ser_uv(&s, first[k] - 1);
        tw_ser_sv(&s, 5);
        tw_ser_uv(&s, 4 - 1);
        assert_true(tw_ser_ok(&s));
        tw_deser d;
        tw_deser_init(&d, buf.p, buf.n);
        assert_int_equal(tw_dring_load(&back, &d), TW_ERR);
        free(buf.p);
    }
    tw_dring_free(&back);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_cpu_averages_compact_and_exact),
        cmocka_unit_test(test_fallbacks_are_lossless),
        cmocka_unit_test(test_inconsistent_input_rejected),
        cmocka_unit_test(test_packed_and_runs_forms),
        cmocka_unit_test(test_runs_inconsistent_rejected),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
