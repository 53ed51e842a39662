/* 1531 - hardening issue 15, fuzzing: a partition checkpoint's offset
 * value with bytes after a NUL was taken for a valid offset.
 *
 * How it showed: fuzz_checkpoint's check that an accepted offset is what
 * the store holds (decimal digits only): tw_checkpoint_load parsed the
 * value with strtoll and accepted it when parsing stopped at a NUL, so a
 * corrupt or hostile value "12\0garbage" resumed the partition at offset
 * 12 with no error.
 *
 * Asserts: "12\0x", "12 " and "" are refused with an error naming the
 * offset key; "12" still loads as offset 12. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <string.h>

#include "checkpoint.h"
#include "config.h"

static int no_parts(void *ud, const char *job, const char *part,
                    const uint8_t *data, size_t len)
{
    (void)ud;
    (void)job;
    (void)part;
    (void)data;
    (void)len;
    return 0;
}

/* Loads partition 0 of topic "t" from a memory store whose offset key
 * holds value[0..len); *next gets the offset. */
static int load_offset(const char *value, size_t len, int64_t *next, char *err,
                       size_t errlen)
{
    tw_setting items[] = {{"store", "memory", 2}};
    tw_settings state = {"regress.yaml", "state", 1, items, 1};
    tw_store *s = NULL;
    assert_int_equal(tw_store_open(&state, &s, err, errlen), TW_OK);
    char key[256];
    assert_int_equal(
        tw_checkpoint_key_partition(key, sizeof(key), "t", 0, "offset"), TW_OK);
    tw_store_txn_begin(s);
    assert_int_equal(tw_store_txn_put(s, key, value, len), TW_OK);
    assert_int_equal(tw_store_txn_commit(s, err, errlen), TW_OK);
    err[0] = '\0';
    int rc = tw_checkpoint_load(s, "t", 0, next, no_parts, NULL, err, errlen);
    tw_store_close(s);
    return rc;
}

static void offset_with_trailing_bytes_refused(void **state)
{
    (void)state;
    static const struct {
        const char *v;
        size_t n;
    } bad[] = {{"12\0x", 4}, {"12\0", 3}, {"12 ", 3}, {"", 0}};
    char err[512];
    for (size_t i = 0; i < sizeof(bad) / sizeof(*bad); i++) {
        int64_t next = 0;
        assert_int_equal(
            load_offset(bad[i].v, bad[i].n, &next, err, sizeof(err)), TW_ERR);
        assert_non_null(strstr(err, "does not hold an offset"));
        assert_non_null(strstr(err, "offset"));
    }
    int64_t next = 0;
    assert_int_equal(load_offset("12", 2, &next, err, sizeof(err)), TW_OK);
    assert_int_equal(next, 12);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(offset_with_trailing_bytes_refused)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
