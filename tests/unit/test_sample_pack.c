/* test_sample_pack.c - the packed sample form (sample_pack.h): what goes in
 * comes out bit for bit in both series modes, an agent's batch packs in a
 * few bytes a sample, and the checking reader refuses exactly what the
 * unpacking one refuses (a segmented job checks a restored segment once
 * and unpacks it later without checking). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "sample_pack.h"

static const double edge_values[] = {
    0.0, -0.0,     0.01,      99.99,  100.0,     12.345,       -3.5, 1e300,
    NAN, INFINITY, -INFINITY, 1e-300, 0.1 + 0.2, 123456789.01, 1e15, 7.0};

enum { NEDGE = sizeof(edge_values) / sizeof(edge_values[0]) };

static tw_buf *pack_all(const tw_sample *s, size_t n, int delta)
{
    tw_buf *b = tw_buf_new();
    assert_non_null(b);
    tw_ckw w = {b, 0};
    tw_sample_cursor c;
    tw_sample_cursor_init(&c, delta);
    for (size_t i = 0; i < n; i++)
        tw_sample_pack(&w, &c, &s[i]);
    assert_false(w.failed);
    return b;
}

static void test_round_trip(void **st)
{
    (void)st;
    enum { N = 300 };
    tw_sample in[N], out[N];
    for (size_t i = 0; i < N; i++) {
        if (i == 0)
            in[i].ts = 0.0; /* equal to the cursor's start: "same ts" */
        else
            in[i].ts = i % 7 == 0 ? 1591160699.5 + (double)i : in[i - 1].ts;
        in[i].value = edge_values[i % NEDGE];
        /* ids going up, down, far apart and repeated */
        in[i].series = i % 5 == 0 ? 4000000000u - (uint32_t)i : (uint32_t)i / 2;
        in[i].flags = i % 4 == 0 ? 0 : (i % 4 == 1 ? 1 : UINT32_MAX);
    }
    for (int delta = 0; delta <= 1; delta++) {
        tw_buf *b = pack_all(in, N, delta);
        tw_ckr r;
        tw_ckr_init(&r, tw_buf_data(b), tw_buf_len(b));
        memset(out, 0xa5, sizeof(out));
        assert_null(tw_sample_unpack_n(&r, N, delta, UINT32_MAX, out));
        assert_int_equal(tw_ckr_left(&r), 0);
        assert_memory_equal(in, out, sizeof(in)); /* NaN, -0.0: the bits */
        tw_ckr_init(&r, tw_buf_data(b), tw_buf_len(b));
        assert_null(tw_sample_unpack_n(&r, N, delta, UINT32_MAX, NULL));
        assert_int_equal(tw_ckr_left(&r), 0);
        tw_buf_free(b);
    }
}

/* 214 series of one agent batch: one timestamp, percentages in hundredths,
 * ids in order: the form the daemon keeps buffered. */
static void test_agent_batch_is_small(void **st)
{
    (void)st;
    enum { N = 214 };
    tw_sample in[N];
    for (size_t i = 0; i < N; i++)
        in[i] = (tw_sample){.ts = 1591160699.5,
                            .value = (double)((i * 37) % 10001) / 100.0,
                            .series = (uint32_t)(5000 + i),
                            .flags = 0};
    tw_buf *b = pack_all(in, N, 1);
    /* first header with the id's difference and the ts' 8 bytes, then a
     * 1-byte header and a 1-3 byte value a sample */
    assert_true(tw_buf_len(b) <= 8 + 4 * N);
    assert_true(tw_buf_len(b) * 6 < N * sizeof(tw_sample));
    tw_buf_free(b);
}

/* Every prefix of a packed run, and every run with one byte changed:
 * checking and unpacking give the same verdict and stop at the same
 * byte. */
static void test_check_agrees_with_unpack(void **st)
{
    (void)st;
    enum { N = 40 };
    tw_sample in[N], out[N];
    for (size_t i = 0; i < N; i++)
        in[i] = (tw_sample){.ts = 100.0 + (double)(i / 8),
                            .value = edge_values[i % NEDGE],
                            .series = (uint32_t)(i * 3 % 50),
                            .flags = i % 9 == 0};
    tw_buf *b = pack_all(in, N, 1);
    const uint8_t *data = tw_buf_data(b);
    size_t len = tw_buf_len(b);
    uint8_t *copy = malloc(len);
    assert_non_null(copy);
    size_t refused = 0;
    for (size_t cut = 0; cut <= len; cut++) {
        for (int flip = -1; flip < (cut == len ? 256 : 0); flip++) {
            memcpy(copy, data, len);
            if (flip >= 0)
                copy[(size_t)flip * 7 % len] ^= (uint8_t)(flip | 1);
            tw_ckr a, c;
            tw_ckr_init(&a, copy, cut);
            tw_ckr_init(&c, copy, cut);
            const char *ua = tw_sample_unpack_n(&a, N, 1, 50, out);
            const char *uc = tw_sample_unpack_n(&c, N, 1, 50, NULL);
            assert_true((ua == NULL) == (uc == NULL));
            if (ua != NULL) {
                assert_string_equal(ua, uc);
                refused++;
            }
            assert_int_equal(tw_ckr_offset(&a), tw_ckr_offset(&c));
        }
    }
    assert_true(refused >= len); /* every cut short of the end */
    free(copy);
    tw_buf_free(b);
}

static void test_refusals(void **st)
{
    (void)st;
    tw_sample s = {.ts = 1.0, .value = 2.0, .series = 9, .flags = 0};
    tw_buf *b = pack_all(&s, 1, 1);
    tw_ckr r;
    tw_ckr_init(&r, tw_buf_data(b), tw_buf_len(b));
    const char *why = tw_sample_unpack_n(&r, 1, 1, 9, NULL);
    assert_non_null(why);
    assert_non_null(strstr(why, "series the dictionary lacks"));
    tw_buf_free(b);

    /* a difference below id 0 wraps around and is refused too */
    tw_buf *neg = tw_buf_new();
    assert_non_null(neg);
    tw_ckw w = {neg, 0};
    tw_ckw_uv(&w, (uint64_t)1 << 3 | 3); /* zigzag -1, same ts, hundredths */
    tw_ckw_iv(&w, 5);
    tw_ckr_init(&r, tw_buf_data(neg), tw_buf_len(neg));
    assert_non_null(tw_sample_unpack_n(&r, 1, 1, 1000, NULL));
    tw_buf_clear(neg);
    tw_ckw_uv(&w, (uint64_t)4 << 3 | 4 | 3); /* flags follow */
    tw_ckw_iv(&w, 5);
    tw_ckw_uv(&w, (uint64_t)UINT32_MAX + 1);
    tw_ckr_init(&r, tw_buf_data(neg), tw_buf_len(neg));
    why = tw_sample_unpack_n(&r, 1, 1, 1000, NULL);
    assert_non_null(why);
    assert_non_null(strstr(why, "flags"));
    tw_buf_free(neg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_round_trip),
        cmocka_unit_test(test_agent_batch_is_small),
        cmocka_unit_test(test_check_agrees_with_unpack),
        cmocka_unit_test(test_refusals),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
