/* 0701 - edge-case issue, defect 7: results lost for good when the
 * results folder could not be written at the time the job finished.
 *
 * How it showed: a results folder that was full, read-only or gone when a
 * job ended gave one ERROR "cannot write ...", and nothing else: no retry,
 * no counter, the results were dropped although the job counted as
 * finished.
 *
 * Asserts, for a folder replaced by a file and for a full tmpfs (skipped
 * when mounting is not permitted): the job's results file is not written,
 * the failure is counted (results_failures) and the results held
 * (results_pending); one WARN names the job however often the write fails;
 * a retry before its backoff does not try; once the folder is writable
 * again the next tw_router_expire after the backoff writes the file
 * (results_retries counted, nothing pending). Tests run as root, which
 * ignores permission bits, so "read-only" is not used. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <sys/mount.h>
#include <unistd.h>

#include "log.h"
#include "results_router_util.h"

static tw_router_stats rr_stats(const rr *x)
{
    tw_router_stats s;
    tw_router_get_stats(x->r, &s);
    return s;
}

/* How many lines of the log file f hold `what`. */
static int log_lines(FILE *f, const char *what)
{
    fflush(f);
    rewind(f);
    char line[8192];
    int n = 0;
    while (fgets(line, sizeof(line), f) != NULL)
        n += strstr(line, what) != NULL;
    fseek(f, 0, SEEK_END);
    return n;
}

/* The job ends while `dir` cannot take its results; break_dir() did that,
 * fix_dir() undoes it. */
static void held_then_written(const char *dir, void (*break_dir)(const char *),
                              void (*fix_dir)(const char *))
{
    FILE *log = tmpfile();
    assert_non_null(log);
    tw_log_set_stream(log);
    rr x;
    rr_open(&x, dir);
    break_dir(dir);
    rr_job(&x, "job-7");
    tw_router_stats s = rr_stats(&x);
    assert_int_equal(s.jobs_finished, 1);
    assert_int_equal(s.results_written, 0);
    assert_int_equal(s.results_failures, 1);
    assert_int_equal(s.results_pending, 1);
    /* before its backoff (100 ms): not tried */
    assert_int_equal(tw_router_expire(x.r, 1000000), 0);
    assert_int_equal(rr_stats(&x).results_failures, 1);
    /* after it, still broken: tried, counted, no second WARN */
    usleep(150000);
    assert_int_equal(tw_router_expire(x.r, 1000000), 0);
    s = rr_stats(&x);
    assert_int_equal(s.results_failures, 2);
    assert_int_equal(s.results_retries, 1);
    assert_int_equal(s.results_pending, 1);
    assert_int_equal(log_lines(log, "WARN  job job-7: results not written"),
                     1);
    fix_dir(dir);
    usleep(250000); /* the backoff doubled: 200 ms */
    assert_int_equal(tw_router_expire(x.r, 1000000), 0);
    s = rr_stats(&x);
    assert_int_equal(s.results_written, 1);
    assert_int_equal(s.results_retries, 2);
    assert_int_equal(s.results_pending, 0);
    assert_int_equal(log_lines(log, "results written to"), 1);
    rr_close(&x);
    tw_log_set_stream(NULL);
    fclose(log);
    assert_int_equal(rr_json_files(dir, NULL, 0), 1);
    assert_true(rr_results_of(dir, "job-7"));
}

/* ---- the folder replaced by a file -------------------------------------- */

static void away_path(const char *dir, char *out, size_t len)
{
    snprintf(out, len, "%s.away", dir);
}

static void replace_by_file(const char *dir)
{
    char away[256];
    away_path(dir, away, sizeof(away));
    assert_int_equal(rename(dir, away), 0);
    int fd = open(dir, O_WRONLY | O_CREAT | O_EXCL, 0644);
    assert_true(fd >= 0);
    close(fd);
}

static void put_back(const char *dir)
{
    char away[256];
    away_path(dir, away, sizeof(away));
    assert_int_equal(unlink(dir), 0);
    assert_int_equal(rename(away, dir), 0);
}

static void folder_gone(void **state)
{
    (void)state;
    char dir[] = "/tmp/tw_0701_XXXXXX";
    assert_non_null(mkdtemp(dir));
    held_then_written(dir, replace_by_file, put_back);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    assert_int_equal(system(cmd), 0);
}

/* ---- a full file system ------------------------------------------------- */

static void fill(const char *dir)
{
    char path[256], block[4096];
    snprintf(path, sizeof(path), "%s/filler", dir);
    memset(block, 'x', sizeof(block));
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    assert_true(fd >= 0);
    while (write(fd, block, sizeof(block)) > 0)
        ;
    assert_int_equal(errno, ENOSPC);
    /* the last partial block too */
    while (write(fd, block, 1) > 0)
        ;
    close(fd);
}

static void make_room(const char *dir)
{
    char path[256];
    snprintf(path, sizeof(path), "%s/filler", dir);
    assert_int_equal(unlink(path), 0);
}

static void folder_full(void **state)
{
    (void)state;
    char dir[] = "/tmp/tw_0701_full_XXXXXX";
    assert_non_null(mkdtemp(dir));
    if (mount("tmpfs", dir, "tmpfs", 0, "size=64k") != 0) {
        fprintf(stderr, "0701: skipped the full-folder case: mount tmpfs: %s\n",
                strerror(errno));
        rmdir(dir);
        skip();
    }
    held_then_written(dir, fill, make_room);
    assert_int_equal(umount2(dir, MNT_DETACH), 0);
    assert_int_equal(rmdir(dir), 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {cmocka_unit_test(folder_gone),
                                       cmocka_unit_test(folder_full)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
