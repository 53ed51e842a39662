/* test_watermark.c - the incremental watermark (watermark.h) against the
 * definition it replaces, recomputed from every producer: random
 * producers, some lagging far enough to turn idle and later catching up,
 * some never sending a time; after every update both agree. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <stdlib.h>

#include "trainwatch/plugin.h"
#include "watermark.h"

#define NPROD 64
#define IDLE 300

static uint64_t rng = 0x243F6A8885A308D3ull;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* The definition: min over producers with a time within IDLE of the
 * newest; INT64_MAX when none has a time. */
static int64_t naive(const int64_t *t, size_t n)
{
    int64_t newest = INT64_MIN, wm = INT64_MAX;
    for (size_t i = 0; i < n; i++)
        if (t[i] > newest)
            newest = t[i];
    for (size_t i = 0; i < n; i++)
        if (t[i] != 0 && newest - t[i] <= IDLE && t[i] < wm)
            wm = t[i];
    return wm;
}

static void test_matches_definition(void **st)
{
    (void)st;
    for (int round = 0; round < 20; round++) {
        int64_t t[NPROD] = {0};
        tw_watermark w;
        tw_watermark_init(&w, IDLE);
        assert_int_equal(tw_watermark_get(&w), INT64_MAX);
        for (int step = 0; step < 5000; step++) {
            size_t i = next() % NPROD;
            if (i % 9 == 8)
                continue; /* sequence-only producers: never a time */
            /* mostly small steps; sometimes a jump that leaves others
             * idle; sometimes an older time (ignored) */
            uint64_t r = next() % 100;
            int64_t step_by = r < 80   ? (int64_t)(next() % 50)
                              : r < 95 ? (int64_t)(next() % 1000)
                                       : -(int64_t)(next() % 100);
            int64_t v =
                (t[i] == 0 ? 1000 + (int64_t)(next() % 200) : t[i]) + step_by;
            if (v > t[i] && v > 0)
                t[i] = v;
            if (v > 0)
                assert_int_equal(tw_watermark_set(&w, i, v), TW_OK);
            assert_int_equal(tw_watermark_get(&w), naive(t, NPROD));
        }
        tw_watermark_free(&w);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_matches_definition),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
