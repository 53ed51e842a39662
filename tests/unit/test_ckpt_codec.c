/* test_ckpt_codec.c - the checkpoint codec's varint reader: its fast path
 * (far from the end, no bounds check per byte) reads exactly what the
 * checked path reads, values, positions and errors alike. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "ckpt_codec.h"

/* Every length of varint, each read near the end (checked path) and far
 * from it (fast path). */
static void test_uv_roundtrip(void **st)
{
    (void)st;
    uint64_t values[] = {0,
                         1,
                         127,
                         128,
                         300,
                         16383,
                         16384,
                         (1ULL << 21) - 1,
                         1ULL << 21,
                         (1ULL << 35) + 5,
                         (1ULL << 56) - 1,
                         1ULL << 56,
                         (1ULL << 63) - 1,
                         1ULL << 63,
                         UINT64_MAX};
    for (size_t i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
        for (size_t pad = 0; pad <= 12; pad += 12) {
            tw_buf *b = tw_buf_new();
            assert_non_null(b);
            tw_ckw w = {b, 0};
            tw_ckw_uv(&w, values[i]);
            tw_ckw_iv(&w, -(int64_t)(values[i] >> 1) - 1);
            size_t body = tw_buf_len(b);
            for (size_t k = 0; k < pad; k++)
                tw_ckw_u8(&w, 0xff);
            tw_ckr r;
            assert_int_equal(w.failed, 0);
            tw_ckr_init(&r, tw_buf_data(b), tw_buf_len(b));
            assert_true(tw_ckr_uv(&r) == values[i]);
            assert_true(tw_ckr_iv(&r) == -(int64_t)(values[i] >> 1) - 1);
            assert_null(r.why);
            assert_int_equal(tw_ckr_offset(&r), body);
            tw_buf_free(b);
        }
    }
}

/* Random bytes, mostly continuation bits: the fast reader and the checked
 * one agree on every value, every position and every error. */
static void test_uv_agrees_with_checked(void **st)
{
    (void)st;
    uint64_t x = 88172645463325252ULL;
    uint8_t buf[40];
    for (int round = 0; round < 200000; round++) {
        size_t len = 0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        len = (size_t)(x % sizeof(buf));
        for (size_t i = 0; i < len; i++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            /* 7 in 8 bytes continue: long and overlong varints */
            buf[i] =
                (uint8_t)((x & 7) != 0 ? (x >> 8) | 0x80 : (x >> 8) & 0x7f);
        }
        tw_ckr a, b;
        tw_ckr_init(&a, buf, len);
        tw_ckr_init(&b, buf, len);
        while (a.why == NULL && tw_ckr_left(&a) > 0) {
            uint64_t va = tw_ckr_uv(&a), vb = tw_ckr_uv_checked(&b);
            assert_true(va == vb);
            assert_int_equal(tw_ckr_offset(&a), tw_ckr_offset(&b));
            assert_ptr_equal(a.why, b.why);
        }
        assert_ptr_equal(a.why, b.why);
    }
}

/* The errors, each also far from the end. */
static void test_uv_errors(void **st)
{
    (void)st;
    uint8_t over[24], longer[24], cut[1] = {0x80};
    memset(over, 0xff, sizeof(over)); /* the tenth byte sets bits past 64 */
    memset(longer, 0x80, sizeof(longer));
    tw_ckr r;
    tw_ckr_init(&r, over, sizeof(over));
    assert_true(tw_ckr_uv(&r) == 0);
    assert_string_equal(r.why, "varint overflows 64 bits");
    tw_ckr_init(&r, longer, sizeof(longer));
    assert_true(tw_ckr_uv(&r) == 0);
    assert_string_equal(r.why, "varint longer than 10 bytes");
    tw_ckr_init(&r, cut, sizeof(cut));
    assert_true(tw_ckr_uv(&r) == 0);
    assert_string_equal(r.why, "truncated");
    /* a reader that failed reads nothing more */
    tw_ckr_init(&r, over, sizeof(over));
    tw_ckr_fail(&r, "earlier");
    assert_true(tw_ckr_uv(&r) == 0);
    assert_int_equal(tw_ckr_offset(&r), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uv_roundtrip),
        cmocka_unit_test(test_uv_agrees_with_checked),
        cmocka_unit_test(test_uv_errors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
