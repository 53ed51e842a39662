/* test_report_html.c - the HTML report (report_html.h, report_svg.h) and
 * the file `run` writes (report_file.h): every section in order from a
 * results object, text escaped (a rule name with markup never becomes
 * markup), a pie of nothing says so instead of an empty <svg>, rules
 * sorted by times triggered, results that are not an object with "rules"
 * refused with a sentence, members of the wrong type rendered as absent;
 * report_file writes <name>.html under the results file's name (an id with '/'
 * escaped), leaves no temporary file, and names the path when the folder is
 * missing or the JSON is bad. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <dirent.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "plugin_host.h"
#include "report_file.h"
#include "report_html.h"
#include "report_svg.h"

static const char results_text[] =
    "{\"job\":\"j<1>\",\"first_timestamp_us\":1700000000000000,"
    "\"latest_timestamp_us\":1700000600000000,\"input\":{\"files\":2},"
    "\"rules\":[{\"name\":\"ProfilerReport\",\"status\":\"IssuesFound\"},"
    "{\"name\":\"Quiet\",\"parent\":\"ProfilerReport\",\"status\":"
    "\"NoIssuesFound\",\"rule_triggered\":0},"
    "{\"name\":\"<b>Loud</b>\",\"parent\":\"ProfilerReport\",\"status\":"
    "\"IssuesFound\",\"rule_triggered\":7,\"finding\":{\"summary\":\"a & b\","
    "\"time_range\":{\"first_us\":1700000060000000,\"last_us\":"
    "1700000120000000},\"recommendation\":\"try c\"}},"
    "{\"name\":\"OverallFrameworkMetrics\",\"parent\":\"ProfilerReport\","
    "\"status\":\"NoIssuesFound\",\"report\":{\"Details\":{\"phase\":"
    "{\"TRAIN\":90,\"EVAL\":10}}}}]}";

/* The page of results_text as a string (caller frees). */
static char *render(const char *text)
{
    json_error_t je;
    json_t *r = json_loads(text, 0, &je);
    assert_non_null(r);
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    assert_non_null(m);
    tw_report_input in = {.results = r};
    char err[256];
    assert_int_equal(tw_report_html_write(m, &in, err, sizeof(err)), TW_OK);
    assert_int_equal(fclose(m), 0);
    json_decref(r);
    return buf;
}

static void sections_in_order(void **state)
{
    (void)state;
    char *page = render(results_text);
    const char *at = page;
    for (size_t i = 0; tw_report_sections[i] != NULL; i++) {
        char want[64];
        snprintf(want, sizeof(want), "<section id=\"%s\">",
                 tw_report_sections[i]);
        const char *p = strstr(at, want);
        assert_non_null(p);
        at = p;
    }
    assert_non_null(strstr(page, "default-src 'none'"));
    /* markup in data is escaped; the loud rule is sorted first */
    assert_null(strstr(page, "<b>Loud"));
    assert_non_null(strstr(page, "&lt;b&gt;Loud"));
    assert_non_null(strstr(page, "j&lt;1&gt;"));
    assert_non_null(strstr(page, "a &amp; b"));
    const char *loud = strstr(page, "<td>&lt;b&gt;Loud");
    const char *quiet = strstr(page, "<td>Quiet</td>");
    assert_non_null(loud);
    assert_non_null(quiet);
    assert_true(loud < quiet);
    /* the phase pie from the framework metrics: two slices */
    assert_non_null(strstr(page, "TRAIN (90.0 %)"));
    free(page);
}

/* Members of the wrong type or missing render as "absent", never crash. */
static void odd_values_render(void **state)
{
    (void)state;
    char *page =
        render("{\"rules\":[{\"name\":\"A\",\"parent\":\"P\",\"finding\":"
               "{\"time_range\":{\"first_us\":\"x\",\"last_us\":1e300}},"
               "\"report\":{\"Details\":{\"step_details\":7}}},"
               "{\"name\":\"OverallSystemUsage\",\"report\":{\"Details\":"
               "{\"GPU\":[1]}}}]}");
    assert_non_null(strstr(page, "<section id=\"timeline\">"));
    free(page);
}

static void empty_pie_is_a_sentence(void **state)
{
    (void)state;
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    assert_non_null(m);
    const char *labels[] = {"a", "b"};
    double zero[] = {0, -1};
    tw_svg_pie(m, "Nothing", labels, zero, 2);
    assert_int_equal(fclose(m), 0);
    assert_null(strstr(buf, "<svg"));
    assert_non_null(strstr(buf, "Nothing: no data"));
    free(buf);
}

static void bad_results_refused(void **state)
{
    (void)state;
    json_t *r = json_pack("{s:s}", "job", "x");
    FILE *f = fopen("/dev/null", "w");
    assert_non_null(f);
    tw_report_input in = {.results = r};
    char err[256] = "";
    assert_int_equal(tw_report_html_write(f, &in, err, sizeof(err)), TW_ERR);
    assert_non_null(strstr(err, "\"rules\""));
    fclose(f);
    json_decref(r);
}

static void file_next_to_results(void **state)
{
    (void)state;
    char dir[] = "/tmp/tw_report_XXXXXX";
    assert_non_null(mkdtemp(dir));
    tw_registry *reg = tw_registry_new();
    assert_non_null(reg);
    char err[1024];
    assert_int_equal(
        tw_report_file_write(dir, "col/x", results_text, reg, err, sizeof(err)),
        TW_OK);
    char path[512];
    snprintf(path, sizeof(path), "%s/col%%2Fx.html", dir);
    assert_int_equal(access(path, R_OK), 0);
    /* nothing else in the folder: the temporary file was renamed */
    DIR *d = opendir(dir);
    assert_non_null(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0)
            n++;
    closedir(d);
    assert_int_equal(n, 1);
    /* bad JSON and a missing folder: errors naming the file */
    assert_int_equal(tw_report_file_write(dir, "y", "{", reg, err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "y.html"));
    char gone[600];
    snprintf(gone, sizeof(gone), "%s/gone", dir);
    assert_int_equal(
        tw_report_file_write(gone, "z", results_text, reg, err, sizeof(err)),
        TW_ERR);
    assert_non_null(strstr(err, "gone/z.html"));
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
    tw_registry_free(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(sections_in_order),
        cmocka_unit_test(odd_values_render),
        cmocka_unit_test(empty_pie_is_a_sentence),
        cmocka_unit_test(bad_results_refused),
        cmocka_unit_test(file_next_to_results),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
