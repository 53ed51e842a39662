/* 0401 - edge-case issue, defect 4 (file-name part): job ids that differ
 * only in bytes outside [A-Za-z0-9._-] wrote the same results file.
 *
 * How it showed: every byte outside [A-Za-z0-9._-] became '_', so jobs
 * "col/x" and "col_x" both wrote <results_dir>/col_x.json; the second
 * job's results replaced the first's, silently.
 *
 * Asserts: the two jobs, routed to their end one after the other, leave
 * two results files, each holding its own job id (results_file.h escapes
 * every byte outside [A-Za-z0-9._-] as "%XX": col%2Fx, col_x). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <unistd.h>

#include "results_router_util.h"

static void two_ids_two_files(void **state)
{
    const char *dir = *state;
    rr x;
    rr_open(&x, dir);
    rr_job(&x, "col/x");
    rr_job(&x, "col_x");
    rr_close(&x);
    assert_int_equal(rr_json_files(dir, NULL, 0), 2);
    assert_true(rr_results_of(dir, "col/x"));
    assert_true(rr_results_of(dir, "col_x"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test_setup_teardown(
        two_ids_two_files, rr_dir_setup, rr_dir_teardown)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
