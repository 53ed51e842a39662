/* 0402 - edge-case issue, defect 4 (file-name part): a job id of more
 * than ~250 bytes could not be written, and its results were lost.
 *
 * How it showed: the results file's name was the id itself (cut at 255
 * bytes) plus ".json", past the file system's 255-byte name limit: one
 * ERROR "File name too long", no file.
 *
 * Asserts: a job with a 250-byte id (ids past 256 bytes are now refused at
 * decode, dead-lettered as id_too_long: see 0201) leaves one results file
 * holding the full id, its name at most 200 bytes before ".json" and
 * ending with "~h" and 16 hex digits (the hash of the whole id); a second
 * 250-byte id that differs only in its last byte gets a file of its own. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <ctype.h>
#include <unistd.h>

#include "results_router_util.h"

static void long_id_written_with_hash(void **state)
{
    const char *dir = *state;
    char id[251], id2[251];
    for (size_t i = 0; i < 250; i++)
        id[i] = (char)('a' + i % 26);
    id[250] = '\0';
    memcpy(id2, id, sizeof(id));
    id2[249] = '#';
    rr x;
    rr_open(&x, dir);
    rr_job(&x, id);
    rr_close(&x);
    char name[512];
    assert_int_equal(rr_json_files(dir, name, sizeof(name)), 1);
    assert_true(rr_results_of(dir, id));
    size_t len = strlen(name) - 5; /* without ".json" */
    assert_true(len <= 200);
    assert_true(len > 18);
    assert_memory_equal(name + len - 18, "~h", 2);
    for (size_t i = len - 16; i < len; i++)
        assert_true(isxdigit((unsigned char)name[i]));
    assert_memory_equal(name, id, 20); /* readable: the id's start */

    rr_open(&x, dir);
    rr_job(&x, id2);
    rr_close(&x);
    assert_int_equal(rr_json_files(dir, NULL, 0), 2);
    assert_true(rr_results_of(dir, id2));
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test_setup_teardown(
        long_id_written_with_hash, rr_dir_setup, rr_dir_teardown)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
