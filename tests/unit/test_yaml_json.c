/* test_yaml_json.c - YAML files read into jansson trees (yaml_json.h):
 * shapes, scalars kept as text, and the refusals that name file and
 * line. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "yaml_json.h"

/* Writes text to a new temporary file; its path in path (to unlink). */
static void write_tmp(char *path, size_t len, const char *text)
{
    snprintf(path, len, "/tmp/test_yaml_json.XXXXXX");
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    assert_non_null(f);
    assert_int_equal(fputs(text, f) >= 0, 1);
    assert_int_equal(fclose(f), 0);
}

/* Loads text; NULL expected when want_err is set, which must be in err. */
static json_t *load(const char *text, const char *want_err)
{
    char path[64], err[512] = "";
    write_tmp(path, sizeof(path), text);
    json_t *j = tw_yaml_json_load(path, err, sizeof(err));
    unlink(path);
    if (want_err == NULL) {
        if (j == NULL)
            fail_msg("unexpected error: %s", err);
    } else {
        assert_null(j);
        if (strstr(err, want_err) == NULL || strstr(err, path) == NULL)
            fail_msg("error '%s' lacks '%s' or the path", err, want_err);
    }
    return j;
}

static void test_shapes_and_text_scalars(void **state)
{
    (void)state;
    json_t *j = load("tests:\n"
                     "  - name: a\n"
                     "    n: 007\n"
                     "    flag: yes\n"
                     "    list: [1, \"two\", {k: v}]\n",
                     NULL);
    json_t *t = json_array_get(json_object_get(j, "tests"), 0);
    assert_string_equal(json_string_value(json_object_get(t, "name")), "a");
    /* no guessing: "007" and "yes" stay as written */
    assert_string_equal(json_string_value(json_object_get(t, "n")), "007");
    assert_string_equal(json_string_value(json_object_get(t, "flag")), "yes");
    json_t *l = json_object_get(t, "list");
    assert_int_equal(json_array_size(l), 3);
    assert_string_equal(json_string_value(json_array_get(l, 1)), "two");
    assert_string_equal(
        json_string_value(json_object_get(json_array_get(l, 2), "k")), "v");
    json_decref(j);
}

static void test_refusals(void **state)
{
    (void)state;
    load("a: 1\nb: 2\na: 3\n", ":3: key 'a' appears twice");
    load("a: &x [1, 2]\nb: *x\n", "anchors and aliases");
    load("a: 1\n---\nb: 2\n", "more than one YAML document");
    load("", "empty file");
    load("a: [1, 2\nb: 3\n", ":2: did not find expected");
    load("{[1]: 2}\n", "a key must be a plain value");
}

static void test_missing_file(void **state)
{
    (void)state;
    char err[256];
    assert_null(tw_yaml_json_load("/nonexistent/x.yaml", err, sizeof(err)));
    assert_non_null(strstr(err, "/nonexistent/x.yaml: No such file"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_shapes_and_text_scalars),
        cmocka_unit_test(test_refusals),
        cmocka_unit_test(test_missing_file),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
