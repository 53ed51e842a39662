/* test_strmap.c - the string map: values, overwrite, and a map reserved
 * for n keys that takes them without growing and finds them all. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "strmap.h"
#include "trainwatch/plugin.h"

static void fill_and_check(tw_strmap *m, size_t n)
{
    char key[32];
    for (size_t i = 0; i < n; i++) {
        int len = snprintf(key, sizeof(key),
                           "node-%zu\x1f"
                           "cpu",
                           i);
        assert_int_equal(tw_strmap_put(m, key, (size_t)len, (uint32_t)i),
                         TW_OK);
    }
    assert_int_equal(m->count, n);
    for (size_t i = 0; i < n; i++) {
        int len = snprintf(key, sizeof(key),
                           "node-%zu\x1f"
                           "cpu",
                           i);
        uint32_t v = UINT32_MAX;
        assert_int_equal(tw_strmap_get(m, key, (size_t)len, &v), 1);
        assert_int_equal(v, i);
        assert_string_equal(tw_strmap_key(m, key, (size_t)len), key);
    }
    uint32_t v;
    assert_int_equal(tw_strmap_get(m, "absent", 6, &v), 0);
}

static void test_put_get(void **st)
{
    (void)st;
    tw_strmap m;
    tw_strmap_init(&m);
    assert_int_equal(tw_strmap_get(&m, "a", 1, &(uint32_t){0}), 0);
    fill_and_check(&m, 5000);
    /* overwrite keeps one key */
    assert_int_equal(tw_strmap_put(&m,
                                   "node-7\x1f"
                                   "cpu",
                                   10, 99),
                     TW_OK);
    uint32_t v = 0;
    assert_int_equal(tw_strmap_get(&m,
                                   "node-7\x1f"
                                   "cpu",
                                   10, &v),
                     1);
    assert_int_equal(v, 99);
    assert_int_equal(m.count, 5000);
    tw_strmap_free(&m);
}

/* reserved for n: no growth while the n keys go in, and load stays at or
 * under three quarters; reserving less than what is there changes
 * nothing */
static void test_reserve(void **st)
{
    (void)st;
    size_t sizes[] = {1, 48, 49, 1000, 214000};
    for (size_t k = 0; k < sizeof(sizes) / sizeof(sizes[0]); k++) {
        tw_strmap m;
        tw_strmap_init(&m);
        assert_int_equal(tw_strmap_reserve(&m, sizes[k]), TW_OK);
        size_t cap = m.cap;
        assert_true(cap >= 64 && (cap & (cap - 1)) == 0);
        assert_true(sizes[k] * 4 <= cap * 3);
        assert_true(cap == 64 || sizes[k] * 4 > cap / 2 * 3);
        fill_and_check(&m, sizes[k]);
        assert_int_equal(m.cap, cap);
        assert_int_equal(tw_strmap_reserve(&m, 1), TW_OK);
        assert_int_equal(m.cap, cap);
        /* growing a filled map keeps every key */
        assert_int_equal(tw_strmap_reserve(&m, sizes[k] * 3 + 64), TW_OK);
        assert_true(m.cap > cap);
        fill_and_check(&m, sizes[k]);
        tw_strmap_free(&m);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_put_get),
        cmocka_unit_test(test_reserve),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
