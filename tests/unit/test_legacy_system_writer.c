/* test_legacy_system_writer.c - the agent's legacy system files
 * (legacy_system_writer.h): names, lines, minutes, the cap, the end
 * marker only from the last writer, a folder that cannot be used. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "legacy_system_writer.h"

static const tw_batch_series series[] = {
    {.type = "cpu", .name = "cpu0", .dimension = "CPUUtilization"},
    {.type = "memory", .name = "MemoryUsedPercent", .dimension = ""},
};

/* 1700000000 is 2023-11-14 22:13:20 UTC: minute 1699999980. */
static const tw_sample samples[] = {
    {.ts = 1700000000.25, .value = 51.1, .series = 0},
    {.ts = 1700000000.25, .value = 6.75, .series = 1},
    {.ts = 1700000030.5, .value = 100, .series = 0},
    /* the next minute */
    {.ts = 1700000070.0, .value = 0.5, .series = 0},
};

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return NULL;
    static char buf[8192];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    return buf;
}

static int exists(const char *root, const char *rel)
{
    char p[4096];
    snprintf(p, sizeof(p), "%s/%s", root, rel);
    struct stat st;
    return stat(p, &st) == 0;
}

static char *new_root(void)
{
    char tmpl[] = "/tmp/tw-lsw.XXXXXX";
    char *d = mkdtemp(tmpl);
    assert_non_null(d);
    return strdup(d);
}

static void remove_tree(const char *root)
{
    char cmd[4200];
    snprintf(cmd, sizeof(cmd), "rm -rf '%s'", root);
    assert_int_equal(system(cmd), 0);
}

static void test_node_names(void **state)
{
    (void)state;
    assert_true(tw_legacy_sys_node_ok("algo-1"));
    assert_true(tw_legacy_sys_node_ok("algo-12"));
    assert_false(tw_legacy_sys_node_ok("algo-"));
    assert_false(tw_legacy_sys_node_ok("algo-1x"));
    assert_false(tw_legacy_sys_node_ok("myhost"));
}

static void test_minutes_lines_marker(void **state)
{
    (void)state;
    char *root = new_root();
    char err[512];
    tw_legacy_sys *w = NULL;
    assert_int_equal(tw_legacy_sys_open(root, "algo-1", 1699999999000000LL,
                                        1000000, &w, err, sizeof(err)),
                     0);
    tw_legacy_sys_write(w, series, samples, 2);
    tw_legacy_sys_write(w, series, samples + 2, 2);
    assert_false(exists(root, "system/training_job_end.ts"));
    tw_legacy_sys_stats st;
    tw_legacy_sys_close(w, 1700000080500000LL, &st);
    assert_int_equal(st.files, 3); /* the opening framework file too */
    assert_int_equal(st.lines, 4);
    assert_int_equal(st.dropped, 0);
    assert_int_equal(st.errors, 0);

    char p[4096];
    snprintf(p, sizeof(p),
             "%s/system/incremental/2023111422/1699999999.algo-1.json", root);
    const char *text = slurp(p);
    assert_non_null(text);
    assert_string_equal(
        text, "{\"Type\":\"cpu\",\"Name\":\"cpu0\",\"Dimension\":"
              "\"CPUUtilization\",\"Value\":51.100000000000001,\"NodeId\":"
              "\"algo-1\",\"Timestamp\":1700000000.25}\n"
              "{\"Type\":\"memory\",\"Name\":\"MemoryUsedPercent\","
              "\"Dimension\":\"\",\"Value\":6.75,\"NodeId\":\"algo-1\","
              "\"Timestamp\":1700000000.25}\n"
              "{\"Type\":\"cpu\",\"Name\":\"cpu0\",\"Dimension\":"
              "\"CPUUtilization\",\"Value\":100,\"NodeId\":\"algo-1\","
              "\"Timestamp\":1700000030.5}\n");
    snprintf(p, sizeof(p),
             "%s/system/incremental/2023111422/1700000040.algo-1.json", root);
    text = slurp(p);
    assert_non_null(text);
    assert_non_null(strstr(text, "\"Value\":0.5,"));
    snprintf(p, sizeof(p), "%s/system/training_job_end.ts", root);
    text = slurp(p);
    assert_non_null(text);
    assert_string_equal(text, "1700000080.500000\n");
    assert_false(exists(root, "system/.open"));
    assert_false(exists(root, ".writers"));
    remove_tree(root);
    free(root);
}

/* The opening files hold no sample but are there; the hook still open:
 * no end marker from the agent. */
static void test_empty_start_file_and_other_writer(void **state)
{
    (void)state;
    char *root = new_root();
    char err[512], p[4096];
    tw_legacy_sys *w = NULL;
    assert_int_equal(tw_legacy_sys_open(root, "algo-2", 1700000000000000LL,
                                        1000000, &w, err, sizeof(err)),
                     0);
    snprintf(p, sizeof(p), "%s/.writers/hook-1", root);
    FILE *claim = fopen(p, "w");
    assert_non_null(claim);
    fclose(claim);
    tw_legacy_sys_stats st;
    tw_legacy_sys_close(w, 1700000001000000LL, &st);
    assert_int_equal(st.files, 2);
    assert_int_equal(st.lines, 0);
    /* named with the start second, not the minute: never before the
     * JOB_START, which the opening framework file carries */
    assert_true(
        exists(root, "system/incremental/2023111422/1700000000.algo-2.json"));
    snprintf(p, sizeof(p),
             "%s/framework/pevents/2023111422/"
             "1700000000000000_algo-2_pythontimeline.json",
             root);
    const char *text = slurp(p);
    assert_non_null(text);
    assert_non_null(
        strstr(text, "\"start_time_since_epoch_in_micros\":1700000000000000}"));
    assert_false(exists(root, "system/training_job_end.ts"));
    assert_true(exists(root, ".writers/hook-1"));
    assert_false(exists(root, ".writers/agent-0"));
    remove_tree(root);
    free(root);
}

static void test_cap_drops_and_counts(void **state)
{
    (void)state;
    char *root = new_root();
    char err[512];
    tw_legacy_sys *w = NULL;
    /* room for one line (about 120 bytes) only */
    assert_int_equal(tw_legacy_sys_open(root, "algo-1", 1700000000000000LL, 150,
                                        &w, err, sizeof(err)),
                     0);
    tw_legacy_sys_write(w, series, samples, 3);
    tw_legacy_sys_stats st;
    tw_legacy_sys_close(w, 1700000050000000LL, &st);
    assert_int_equal(st.lines, 1);
    assert_int_equal(st.dropped, 2);
    assert_true(st.bytes <= 150);
    remove_tree(root);
    free(root);
}

static void test_unusable_folder(void **state)
{
    (void)state;
    char *root = new_root();
    char err[512], p[4096];
    snprintf(p, sizeof(p), "%s/afile", root);
    FILE *f = fopen(p, "w");
    assert_non_null(f);
    fclose(f);
    snprintf(p, sizeof(p), "%s/afile/out", root);
    tw_legacy_sys *w = NULL;
    assert_int_equal(tw_legacy_sys_open(p, "algo-1", 1700000000000000LL, 1000,
                                        &w, err, sizeof(err)),
                     -1);
    assert_null(w);
    assert_non_null(strstr(err, "afile/out"));
    remove_tree(root);
    free(root);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_node_names),
        cmocka_unit_test(test_minutes_lines_marker),
        cmocka_unit_test(test_empty_start_file_and_other_writer),
        cmocka_unit_test(test_cap_drops_and_counts),
        cmocka_unit_test(test_unusable_folder),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
