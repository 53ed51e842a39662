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
 * once the folder is writable again the next tw_router_expire after the
 * backoff writes the file (results_retries counted, nothing pending). Tests run
 * as root, which ignores permission bits, so "read-only" is not used. */
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

typedef struct folder {
    char dir[64];
    int mounted, mount_errno; /* the tmpfs case */
} folder;

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
    /* after its backoff (100 ms), still broken: tried, counted, no second
     * WARN (that nothing is tried before the backoff is in
     * test_results_file, with a clock of its own) */
    usleep(150000);
    assert_int_equal(tw_router_expire(x.r, 1000000), 0);
    s = rr_stats(&x);
    assert_int_equal(s.results_failures, 2);
    assert_int_equal(s.results_retries, 1);
    assert_int_equal(s.results_pending, 1);
    assert_int_equal(log_lines(log, "WARN  job job-7: results not written"), 1);
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
    const folder *f = *state;
    held_then_written(f->dir, replace_by_file, put_back);
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
    const folder *f = *state;
    if (!f->mounted) {
        fprintf(stderr, "0701: skipped the full-folder case: mount tmpfs: %s\n",
                strerror(f->mount_errno));
        skip();
    }
    held_then_written(f->dir, fill, make_room);
}

/* ---- fixtures: a fresh folder, removed (and unmounted) even when a check
 * failed ------------------------------------------------------------------ */

static int folder_setup(void **state)
{
    folder *f = calloc(1, sizeof(*f));
    assert_non_null(f);
    snprintf(f->dir, sizeof(f->dir), "/tmp/tw_0701_XXXXXX");
    assert_non_null(mkdtemp(f->dir));
    *state = f;
    return 0;
}

static int tmpfs_setup(void **state)
{
    folder_setup(state);
    folder *f = *state;
    f->mounted = mount("tmpfs", f->dir, "tmpfs", 0, "size=64k") == 0;
    f->mount_errno = errno;
    return 0;
}

static int folder_teardown(void **state)
{
    folder *f = *state;
    tw_log_set_stream(NULL);
    if (f->mounted && umount2(f->dir, MNT_DETACH) != 0)
        fprintf(stderr, "0701: umount %s: %s\n", f->dir, strerror(errno));
    char cmd[160];
    snprintf(cmd, sizeof(cmd), "rm -rf %s %s.away", f->dir, f->dir);
    int rc = system(cmd);
    free(f);
    return rc == 0 ? 0 : -1;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(folder_gone, folder_setup,
                                        folder_teardown),
        cmocka_unit_test_setup_teardown(folder_full, tmpfs_setup,
                                        folder_teardown)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
