/* 1541 - hardening issue: a SIGKILL during a results write left its
 * temporary file in the results folder for good.
 *
 * How it showed: tests/integration/run_kill_write.sh kills `trainwatch
 * run` (strace syscall injection) at the write(), fsync() or link() of
 * ".<job>.tmp-<pid>-0", or right after the link. The restarted engine wrote
 * <job>.json correctly, but ".<job>.tmp-<old pid>-0" (empty, or a full copy)
 * stayed next to it; nothing ever removed it, so each crash at that moment
 * left one more partial or duplicate file in the folder.
 *
 * Asserts: once a job's results are placed, the temporary files of that
 * job's name left by other writers (any pid, any sequence number; empty or
 * partial) are gone, one INFO line names each, and the results file holds
 * the new bytes; files that only look alike stay: another job whose name
 * starts the same, another job whose name ends in ".tmp-<n>", a name with
 * a non-numeric tail, and the HTML report's temporary file. */
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

#include "log.h"
#include "results_file.h"

static void make_file(const char *dir, const char *name, const char *bytes)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(bytes, f);
    assert_int_equal(fclose(f), 0);
}

static int exists(const char *dir, const char *name)
{
    char path[512];
    snprintf(path, sizeof(path), "%s/%s", dir, name);
    return access(path, F_OK) == 0;
}

/* How many lines of the log file f hold `what`. */
static int log_lines(FILE *f, const char *what)
{
    fflush(f);
    rewind(f);
    char line[4096];
    int n = 0;
    while (fgets(line, sizeof(line), f) != NULL)
        n += strstr(line, what) != NULL;
    return n;
}

static void test_leftovers_removed(void **state)
{
    (void)state;
    char dir[] = "/tmp/tw_regress_1541_XXXXXX";
    assert_non_null(mkdtemp(dir));
    /* what crashed writers of job "job-15" left: empty, partial, whole */
    make_file(dir, ".job-15.tmp-4242-0", "");
    make_file(dir, ".job-15.tmp-4242-7", "{\"job\": \"job-15\", \"ru");
    make_file(dir, ".job-15.tmp-31-0", "{\"job\": \"job-15\"}\n");
    /* look-alikes that are not job-15's temporary files */
    const char *kept[] = {
        ".job-150.tmp-4242-0",      /* job "job-150"            */
        ".job-15.tmp-5.tmp-4242-0", /* job "job-15.tmp-5"       */
        ".job-15.tmp-4242-0x",      /* not <pid>-<n>            */
        ".job-15.tmp-4242",         /* not <pid>-<n>            */
        ".job-15.html.tmp",         /* the report's, run's own  */
    };
    for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
        make_file(dir, kept[i], "x");

    FILE *log = tmpfile();
    assert_non_null(log);
    tw_log_set_stream(log);
    tw_results_writer *w = NULL;
    char err[256];
    assert_int_equal(tw_results_writer_new(dir, &w, err, sizeof(err)), TW_OK);
    const char *json = "{\"job\": \"job-15\", \"rules\": []}";
    assert_int_equal(tw_results_put(w, "job-15", json, strlen(json), 0), TW_OK);

    assert_false(exists(dir, ".job-15.tmp-4242-0"));
    assert_false(exists(dir, ".job-15.tmp-4242-7"));
    assert_false(exists(dir, ".job-15.tmp-31-0"));
    assert_int_equal(log_lines(log, "left by a write that a crash"), 3);
    assert_int_equal(log_lines(log, ".job-15.tmp-4242-7, left by"), 1);
    for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++)
        if (!exists(dir, kept[i]))
            fail_msg("%s was removed", kept[i]);
    char path[512], buf[256] = "";
    snprintf(path, sizeof(path), "%s/job-15.json", dir);
    FILE *f = fopen(path, "r");
    assert_non_null(f);
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = '\0';
    assert_string_equal(buf, "{\"job\": \"job-15\", \"rules\": []}\n");
    tw_results_stats s;
    tw_results_get_stats(w, &s);
    assert_int_equal(s.written, 1);
    assert_int_equal(s.versions, 0);

    tw_results_writer_free(w);
    tw_log_set_stream(stderr);
    fclose(log);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_leftovers_removed),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
