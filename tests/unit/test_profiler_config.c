/* test_profiler_config.c - ProfilerConfig validation in C, on the case
 * table the Python hook's tests use (tests/data/profiler_config_cases.json):
 * every invalid case is refused with a message naming its fields, every
 * valid one accepted; plus what only the C side sees (not JSON, duplicate
 * keys, Python-only regex syntax). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiler_config.h"

static int check_text(const char *text, char *err, size_t errlen)
{
    return tw_profiler_config_check(text, strlen(text), err, errlen);
}

static void test_case_table(void **st)
{
    (void)st;
    const char *src = getenv("TW_SOURCE_DIR");
    char path[4096];
    snprintf(path, sizeof(path), "%s/tests/data/profiler_config_cases.json",
             src != NULL ? src : TW_SOURCE_DIR);
    json_error_t je;
    json_t *root = json_load_file(path, 0, &je);
    assert_non_null(root);
    json_t *cases = json_object_get(root, "cases");
    assert_true(json_array_size(cases) > 20);
    size_t i;
    json_t *c;
    json_array_foreach(cases, i, c)
    {
        const char *name = json_string_value(json_object_get(c, "name"));
        char *text = json_dumps(json_object_get(c, "config"), JSON_COMPACT);
        assert_non_null(text);
        char err[512] = "";
        int rc = check_text(text, err, sizeof(err));
        json_t *want = json_object_get(c, "error");
        if (want == NULL) {
            if (rc != 0)
                fail_msg("case '%s' (%s) refused: %s", name, text, err);
        } else {
            if (rc == 0)
                fail_msg("case '%s' (%s) accepted", name, text);
            size_t k;
            json_t *field;
            json_array_foreach(want, k, field)
            {
                if (strstr(err, json_string_value(field)) == NULL)
                    fail_msg("case '%s': message '%s' does not name %s", name,
                             err, json_string_value(field));
            }
        }
        free(text);
    }
    json_decref(root);
}

static void test_c_only(void **st)
{
    (void)st;
    char err[512];
    assert_int_equal(
        check_text("{\"system_monitor_interval_millis\":", err, sizeof(err)),
        -1);
    assert_non_null(strstr(err, "not JSON"));
    assert_int_equal(check_text("{\"system_monitor_interval_millis\":500,"
                                "\"system_monitor_interval_millis\":100}",
                                err, sizeof(err)),
                     -1);
    assert_int_equal(check_text("[]", err, sizeof(err)), -1);
    assert_non_null(strstr(err, "must be an object"));
    /* Python's re syntax that POSIX would refuse is accepted */
    assert_int_equal(
        check_text("{\"framework_profile_params\":{\"dataloader_profiling_"
                   "config\":{\"metrics_regex\":\"(?i)get\\\\d+[)(]\"}}}",
                   err, sizeof(err)),
        0);
    assert_int_equal(
        check_text("{\"framework_profile_params\":{\"dataloader_profiling_"
                   "config\":{\"metrics_regex\":\"a)(\"}}}",
                   err, sizeof(err)),
        -1);
    assert_int_equal(
        check_text("{\"framework_profile_params\":{\"dataloader_profiling_"
                   "config\":{\"metrics_regex\":\"[ab\"}}}",
                   err, sizeof(err)),
        -1);
    /* null is unset, as None in the keyword API */
    assert_int_equal(check_text("{\"framework_profile_params\":{\"start_step\":"
                                "null,\"duration\":5}}",
                                err, sizeof(err)),
                     0);
    /* an integral float is not an integer (as in Python) */
    assert_int_equal(check_text("{\"framework_profile_params\":{\"num_steps\":"
                                "2.0}}",
                                err, sizeof(err)),
                     -1);
}

static void test_interval(void **st)
{
    (void)st;
    uint32_t ms = 7;
    const char *t = "{\"system_monitor_interval_millis\":200}";
    assert_int_equal(tw_profiler_config_interval(t, strlen(t), &ms), 0);
    assert_int_equal(ms, 200);
    ms = 7;
    t = "{\"framework_profile_params\":{}}";
    assert_int_equal(tw_profiler_config_interval(t, strlen(t), &ms), 1);
    assert_int_equal(ms, 7); /* absent: untouched (the caller's default) */
    t = "[500]";
    assert_int_equal(tw_profiler_config_interval(t, strlen(t), &ms), -1);
    t = "{";
    assert_int_equal(tw_profiler_config_interval(t, strlen(t), &ms), -1);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_case_table),
        cmocka_unit_test(test_c_only),
        cmocka_unit_test(test_interval),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
