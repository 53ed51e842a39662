/* test_finding_text.c - how findings read: UTC and job-offset times, the
 * node list with "+N more", the wrapped lines of eval's table, the one-line
 * form cut on a character boundary, and the JSON form's keys. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "finding_text.h"
#include "trainwatch/finding.h"

static void test_times(void **st)
{
    (void)st;
    char b[64];
    tw_format_utc(1700000000000000, b, sizeof(b));
    assert_string_equal(b, "2023-11-14T22:13:20Z");
    tw_format_utc(1700000000999999, b, sizeof(b)); /* whole seconds */
    assert_string_equal(b, "2023-11-14T22:13:20Z");
    tw_format_offset(1700000751000000, 1700000000000000, b, sizeof(b));
    assert_string_equal(b, "+00:12:31");
    tw_format_offset(1700000000000000 + 100LL * 3600 * 1000000,
                     1700000000000000, b, sizeof(b));
    assert_string_equal(b, "+100:00:00");
    tw_format_offset(1699999996000000, 1700000000000000, b, sizeof(b));
    assert_string_equal(b, "-00:00:04");
    tw_finding_duration(512, b, sizeof(b));
    assert_string_equal(b, "8m 32s");
    tw_finding_duration(0.25, b, sizeof(b));
    assert_string_equal(b, "250 ms");
    tw_finding_duration(42, b, sizeof(b));
    assert_string_equal(b, "42 s");
    tw_finding_duration(3 * 3600 + 5 * 60 + 9, b, sizeof(b));
    assert_string_equal(b, "3h 05m");
    tw_finding_duration(59.9, b, sizeof(b)); /* cut, as a clock shows */
    assert_string_equal(b, "59 s");
    tw_finding_duration(-3, b, sizeof(b));
    assert_string_equal(b, "0 s");
    tw_finding_size(512, b, sizeof(b));
    assert_string_equal(b, "512 B");
    tw_finding_size(1536, b, sizeof(b));
    assert_string_equal(b, "1.5 KiB");
    tw_finding_size(1.4 * 1024 * 1024 * 1024, b, sizeof(b));
    assert_string_equal(b, "1.4 GiB");
    tw_finding_size(1023.99 * 1024 * 1024, b, sizeof(b)); /* not "1024.0" */
    assert_string_equal(b, "1.0 GiB");
    tw_finding_size(3.0 * 1024 * 1024 * 1024 * 1024, b, sizeof(b));
    assert_string_equal(b, "3.0 TiB");
}

static tw_finding sample(void)
{
    tw_finding f;
    memset(&f, 0, sizeof(f));
    for (int i = 0; i < 11; i++) {
        char n[16];
        snprintf(n, sizeof(n), "algo-%d", i + 1);
        tw_finding_add_name(&f, n);
    }
    tw_finding_add_name(&f, "algo-1"); /* listed already: not again */
    f.first_us = 1700000031000000;
    f.last_us = 1700000751000000;
    tw_finding_text(f.summary, "The GPUs sat idle while CPU cores were "
                               "saturated: training is held back by the "
                               "CPU.");
    tw_finding_text(f.magnitude, "in %.1f %% of %d snapshots", 75.6, 4720);
    tw_finding_text(f.recommendation, "Take work off the CPU.");
    tw_finding_text(f.parameters, "threshold 50 %%");
    f.value = 75.6;
    f.limit = 50;
    snprintf(f.unit, sizeof(f.unit), "%%");
    return f;
}

static void test_nodes_and_lines(void **st)
{
    (void)st;
    tw_finding f = sample();
    assert_int_equal(f.nnames, TW_FINDING_MAX_NODES);
    assert_int_equal(f.ninvolved, 11);
    char nodes[1024];
    tw_finding_nodes_text(&f, nodes, sizeof(nodes));
    assert_string_equal(nodes, "algo-1, algo-2, algo-3, algo-4, algo-5, "
                               "algo-6, algo-7, algo-8 (+3 more)");
    tw_finding none;
    memset(&none, 0, sizeof(none));
    tw_finding_nodes_text(&none, nodes, sizeof(nodes));
    assert_string_equal(nodes, "job-wide");

    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    assert_non_null(m);
    tw_finding_print(m, &f, 1700000000000000, 60);
    assert_int_equal(fclose(m), 0);
    assert_non_null(strstr(text, "  what:         The GPUs sat idle while "
                                 "CPU cores were\n                "
                                 "saturated:"));
    assert_non_null(strstr(text, "  when:         +00:00:31 .. +00:12:31 "));
    assert_non_null(strstr(text, "(2023-11-14T22:13:51Z .."));
    assert_non_null(strstr(text, "  how much:     in 75.6 % of 4720 "
                                 "snapshots\n"));
    for (char *line = text; *line;) {
        char *nl = strchr(line, '\n');
        assert_non_null(nl);
        assert_true(nl - line <= 60 || strchr(line, ' ') > nl);
        line = nl + 1;
    }
    free(text);

    /* one line, cut on a character boundary */
    tw_finding_text(f.recommendation, "%s",
                    "\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9\xc3\xa9");
    char line[120];
    tw_finding_line(&f, 1700000000000000, line, sizeof(line));
    assert_true(strlen(line) <= 119);
    assert_memory_equal(line, "The GPUs sat idle", 17);
    /* every cut length ends on a whole character */
    for (size_t cut = 150; cut < 400; cut++) {
        char *buf = malloc(cut);
        assert_non_null(buf);
        tw_finding_line(&f, 1700000000000000, buf, cut);
        size_t n = strlen(buf);
        assert_true(n < cut);
        if (n > 0 && ((unsigned char)buf[n - 1] & 0x80) != 0)
            assert_int_equal((unsigned char)buf[n - 1], 0xa9); /* é's end */
        free(buf);
    }
    char small[600];
    tw_finding_line(&f, 1700000000000000, small, sizeof(small));
    assert_non_null(strstr(small, "Since +00:00:31 (2023-11-14T22:13:51Z)."));
}

static void test_json(void **st)
{
    (void)st;
    tw_finding f = sample();
    tw_json *j = tw_json_new();
    tw_json_set_compact(j, 1);
    tw_finding_json(j, &f);
    const char *s = tw_json_str(j);
    assert_non_null(strstr(s, "\"nodes\":{\"listed\":[\"algo-1\","));
    assert_non_null(strstr(s, "\"count\":11}"));
    assert_non_null(strstr(s, "\"time_range\":{\"first_us\":1700000031000000,"
                              "\"last_us\":1700000751000000}"));
    assert_non_null(strstr(s, "\"magnitude\":{\"text\":\"in 75.6 % of 4720 "
                              "snapshots\",\"value\":75.6,\"limit\":50.0,"
                              "\"unit\":\"%\"}"));
    tw_json_free(j);
    /* no time range: the key is left out */
    f.first_us = f.last_us = 0;
    j = tw_json_new();
    tw_finding_json(j, &f);
    assert_null(strstr(tw_json_str(j), "time_range"));
    tw_json_free(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_times),
        cmocka_unit_test(test_nodes_and_lines),
        cmocka_unit_test(test_json),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
