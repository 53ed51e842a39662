/* test_assert.c - TW_ASSERT (tw_assert.h): a broken invariant aborts with
 * the condition, file and line, also in release builds (NDEBUG). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "tw_assert.h"

static int holds(int x)
{
    TW_ASSERT(x > 0);
    return x;
}

static void test_true_is_silent(void **state)
{
    (void)state;
    assert_int_equal(holds(3), 3);
}

static void test_false_aborts_naming_where(void **state)
{
    (void)state;
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        dup2(fds[1], 2);
        signal(SIGABRT, SIG_DFL);
        holds(0);
        _exit(0); /* not reached */
    }
    close(fds[1]);
    char buf[1024] = {0};
    size_t n = 0;
    ssize_t k;
    while ((k = read(fds[0], buf + n, sizeof(buf) - 1 - n)) > 0)
        n += (size_t)k;
    close(fds[0]);
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFSIGNALED(status));
    assert_int_equal(WTERMSIG(status), SIGABRT);
    assert_non_null(strstr(buf, "assertion 'x > 0' failed"));
    assert_non_null(strstr(buf, "test_assert.c:"));
    assert_non_null(strstr(buf, "holds()"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_true_is_silent),
        cmocka_unit_test(test_false_aborts_naming_where),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
