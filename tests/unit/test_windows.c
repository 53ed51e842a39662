/* test_windows.c - the aggregator windows' checkpoint (engine/eval/
 * windows.c): a ring of noisy utilisations with two decimals is saved
 * bit-packed (smaller than the varint form), a smooth one keeps varints,
 * values that are not hundredths keep their f64 bits; every form restores
 * the same ring and statistics bit for bit; a truncated blob, a packed
 * width past the bound and an unknown form are refused and leave the
 * windows untouched. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "trainwatch/bitpack.h"
#include "windows.h"

#define W 500

static uint64_t lcg(uint64_t *x)
{
    *x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
    return *x >> 33;
}

/* Windows of three GPU series (window W) and one CPU series (no ring). */
static tw_windows *make(void)
{
    tw_windows *w = tw_windows_new();
    assert_non_null(w);
    assert_int_equal(tw_windows_request(w, TW_METRIC_GPU_UTIL, W), TW_OK);
    assert_int_equal(tw_windows_add_series(w, 0, TW_METRIC_GPU_UTIL), TW_OK);
    assert_int_equal(tw_windows_add_series(w, 1, TW_METRIC_GPU_UTIL), TW_OK);
    assert_int_equal(tw_windows_add_series(w, 2, TW_METRIC_GPU_UTIL), TW_OK);
    assert_int_equal(tw_windows_add_series(w, 3, TW_METRIC_CPU_UTIL), TW_OK);
    return w;
}

/* Series 0: 85-97 % noise (packs); 1: a ramp of 0.01 steps (varints);
 * 2: thirds (f64); 3: noise without a ring. More than W each: wraps. */
static void fill(tw_windows *w, int n)
{
    uint64_t seed = 5;
    for (int i = 0; i < n; i++) {
        tw_windows_push(w, 0,
                        (double)(8500 + (int)(lcg(&seed) % 1201)) / 100.0);
        tw_windows_push(w, 1, (double)(2000 + i % 3000) / 100.0);
        tw_windows_push(w, 2, (double)i / 3.0);
        tw_windows_push(w, 3, (double)(lcg(&seed) % 10001) / 100.0);
    }
}

static void assert_same(const tw_windows *a, const tw_windows *b)
{
    double va[W], vb[W];
    for (uint32_t s = 0; s < 4; s++) {
        size_t n = tw_windows_read(a, s, va, W);
        assert_int_equal(tw_windows_read(b, s, vb, W), n);
        assert_memory_equal(va, vb, n * sizeof(double));
        tw_series_stats sa, sb;
        assert_int_equal(tw_windows_stats(a, s, &sa), TW_OK);
        assert_int_equal(tw_windows_stats(b, s, &sb), TW_OK);
        assert_memory_equal(&sa, &sb, sizeof(sa));
    }
}

static size_t save(const tw_windows *w, tw_buf *out, int compact)
{
    assert_int_equal(tw_windows_save(w, out, compact), TW_OK);
    return tw_buf_len(out);
}

static void test_forms_round_trip(void **state)
{
    (void)state;
    tw_windows *a = make();
    fill(a, W + 123);
    for (int compact = 0; compact <= 1; compact++) {
        tw_buf *buf = tw_buf_new();
        save(a, buf, compact);
        tw_windows *b = make();
        char err[256];
        assert_int_equal(tw_windows_restore(b, tw_buf_data(buf),
                                            tw_buf_len(buf), compact, err,
                                            sizeof(err)),
                         TW_OK);
        assert_same(a, b);
        /* restored windows go on as the original */
        tw_windows_push(a, 0, 90.5);
        tw_windows_push(b, 0, 90.5);
        assert_same(a, b);
        tw_windows_free(b);
        tw_buf_free(buf);
    }
    tw_windows_free(a);
}

/* Only series 0's ring of noise: packed is ~11 bits a value. */
static void test_noisy_ring_packs(void **state)
{
    (void)state;
    tw_windows *w = tw_windows_new();
    assert_non_null(w);
    assert_int_equal(tw_windows_request(w, TW_METRIC_GPU_UTIL, W), TW_OK);
    assert_int_equal(tw_windows_add_series(w, 0, TW_METRIC_GPU_UTIL), TW_OK);
    uint64_t seed = 9;
    for (int i = 0; i < W; i++)
        tw_windows_push(w, 0,
                        (double)(8500 + (int)(lcg(&seed) % 1201)) / 100.0);
    tw_buf *buf = tw_buf_new();
    size_t n = save(w, buf, 1);
    /* header (~30 bytes) and 500 x 11 bits; the varint form took 3 bytes
     * a value (zigzag hundredths of 85-97 %) */
    assert_true(n <= 40 + tw_bitpack_bytes(W, 11));
    assert_true(n < 2 * W);
    tw_buf_free(buf);
    tw_windows_free(w);
}

/* The offset of series 0's packed width byte in a compact save of `a`. */
static size_t width_offset(const uint8_t *p)
{
    /* nseries (1), metric (1), count (2: 623), form (1), mean, m2 (16),
     * min, max (3 each: zigzag 17000-19400), nvalues (2: 500), base (3) */
    size_t at = 1 + 1 + 2;
    assert_int_equal(p[at], 2); /* the packed form */
    return at + 1 + 16 + 3 + 3 + 2 + 3;
}

static void test_bad_blobs_refused(void **state)
{
    (void)state;
    tw_windows *a = make();
    fill(a, W + 123);
    tw_buf *buf = tw_buf_new();
    size_t len = save(a, buf, 1);
    uint8_t *p = malloc(len);
    assert_non_null(p);
    memcpy(p, tw_buf_data(buf), len);
    char err[256];
    tw_windows *b = make();
    /* every truncation is refused and leaves b empty */
    for (size_t cut = 0; cut < len; cut += 7) {
        assert_int_equal(tw_windows_restore(b, p, cut, 1, err, sizeof(err)),
                         TW_ERR);
        tw_series_stats st;
        assert_int_equal(tw_windows_stats(b, 0, &st), TW_OK);
        assert_int_equal(st.count, 0);
    }
    /* a packed width past the bound */
    size_t at = width_offset(p);
    assert_true(p[at] >= 10 && p[at] <= 12);
    uint8_t keep = p[at];
    p[at] = TW_BITPACK_MAX_WIDTH + 1;
    assert_int_equal(tw_windows_restore(b, p, len, 1, err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "bad packed values"));
    p[at] = keep;
    /* an unknown form */
    p[4] = 3;
    assert_int_equal(tw_windows_restore(b, p, len, 1, err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "unknown value form"));
    p[4] = 2;
    /* trailing bytes */
    uint8_t *q = malloc(len + 1);
    assert_non_null(q);
    memcpy(q, p, len);
    q[len] = 0;
    assert_int_equal(tw_windows_restore(b, q, len + 1, 1, err, sizeof(err)),
                     TW_ERR);
    free(q);
    /* and the intact blob still restores */
    assert_int_equal(tw_windows_restore(b, p, len, 1, err, sizeof(err)), TW_OK);
    assert_same(a, b);
    free(p);
    tw_windows_free(b);
    tw_buf_free(buf);
    tw_windows_free(a);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_forms_round_trip),
        cmocka_unit_test(test_noisy_ring_packs),
        cmocka_unit_test(test_bad_blobs_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
