/* test_sorted_spill.c - the external merge sort behind `trainwatch
 * timeline`: order by key then arrival, the same whether everything fits
 * in the buffer or goes through many runs, long records, no records. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sorted_spill.h"
#include "trainwatch/plugin.h"

typedef struct collected {
    int64_t *keys;
    char **recs;
    size_t n, cap;
} collected;

static int collect(void *ud, int64_t key, const char *bytes, size_t len)
{
    collected *c = ud;
    if (c->n == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 64;
        c->keys = realloc(c->keys, c->cap * sizeof(*c->keys));
        c->recs = realloc(c->recs, c->cap * sizeof(*c->recs));
        assert_non_null(c->keys);
        assert_non_null(c->recs);
    }
    c->keys[c->n] = key;
    c->recs[c->n] = strndup(bytes, len);
    assert_non_null(c->recs[c->n]);
    c->n++;
    return TW_OK;
}

static void collected_free(collected *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->recs[i]);
    free(c->keys);
    free(c->recs);
}

/* n records with keys from a small range (many ties), record text
 * "<key>/<arrival>", some long; sorted through a buffer of buffer bytes. */
static size_t sort_through(size_t buffer, size_t n, collected *out)
{
    tw_spill *s = tw_spill_new(buffer, NULL);
    assert_non_null(s);
    char err[256];
    uint64_t x = 88172645463325252ull;
    char *big = malloc(70000);
    assert_non_null(big);
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        int64_t key = (int64_t)(x % 97) - 40;
        int len = snprintf(big, 70000, "%lld/%zu", (long long)key, i);
        if (i % 500 == 7) { /* longer than a run's 16 KiB read buffer */
            memset(big + len, 'x', 60000);
            len += 60000;
        }
        assert_int_equal(
            tw_spill_add(s, key, big, (size_t)len, err, sizeof(err)), TW_OK);
    }
    free(big);
    size_t runs = tw_spill_runs(s);
    assert_int_equal(tw_spill_finish(s, collect, out, err, sizeof(err)), TW_OK);
    tw_spill_free(s);
    return runs;
}

static void check_order(const collected *c, size_t n)
{
    assert_int_equal(c->n, n);
    for (size_t i = 1; i < c->n; i++) {
        assert_true(c->keys[i - 1] <= c->keys[i]);
        if (c->keys[i - 1] == c->keys[i]) { /* ties: arrival order */
            size_t a = strtoull(strchr(c->recs[i - 1], '/') + 1, NULL, 10);
            size_t b = strtoull(strchr(c->recs[i], '/') + 1, NULL, 10);
            assert_true(a < b);
        }
        assert_int_equal(strtoll(c->recs[i], NULL, 10), c->keys[i]);
    }
}

static void test_in_memory_and_spilled_agree(void **st)
{
    (void)st;
    collected mem = {0}, disk = {0};
    assert_int_equal(sort_through(64u << 20, 20000, &mem), 0);
    size_t runs = sort_through(64u << 10, 20000, &disk);
    assert_true(runs > 20);
    check_order(&mem, 20000);
    check_order(&disk, 20000);
    for (size_t i = 0; i < mem.n; i++)
        assert_string_equal(mem.recs[i], disk.recs[i]);
    collected_free(&mem);
    collected_free(&disk);
}

static void test_empty(void **st)
{
    (void)st;
    collected c = {0};
    assert_int_equal(sort_through(1024, 0, &c), 0);
    assert_int_equal(c.n, 0);
    collected_free(&c);
}

static int fail_out(void *ud, int64_t key, const char *bytes, size_t len)
{
    (void)ud, (void)key, (void)bytes, (void)len;
    return TW_ERR;
}

static void test_output_failure_is_reported(void **st)
{
    (void)st;
    tw_spill *s = tw_spill_new(128, NULL);
    assert_non_null(s);
    char err[256] = "";
    for (int i = 0; i < 100; i++)
        assert_int_equal(
            tw_spill_add(s, 100 - i, "abcdefgh", 8, err, sizeof(err)), TW_OK);
    assert_true(tw_spill_runs(s) > 1);
    assert_int_equal(tw_spill_finish(s, fail_out, NULL, err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "output"));
    tw_spill_free(s);
}

static void test_bad_tmpdir_is_reported(void **st)
{
    (void)st;
    tw_spill *s = tw_spill_new(64, "/nonexistent/dir");
    assert_non_null(s);
    char err[256] = "";
    int rc = TW_OK;
    for (int i = 0; i < 10 && rc == TW_OK; i++)
        rc = tw_spill_add(s, i, "0123456789abcdef", 16, err, sizeof(err));
    assert_int_equal(rc, TW_ERR);
    assert_non_null(strstr(err, "/nonexistent/dir"));
    tw_spill_free(s);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_in_memory_and_spilled_agree),
        cmocka_unit_test(test_empty),
        cmocka_unit_test(test_output_failure_is_reported),
        cmocka_unit_test(test_bad_tmpdir_is_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
