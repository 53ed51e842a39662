/* test_plugin_guard.c - the guard around plugin calls (plugin_guard.h):
 * faults, aborts, timeouts and memory growth inside a guarded call come
 * back to the caller with the reason; nested calls unwind to the frame
 * that was hit; a call that behaves is left alone. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_guard.h"

typedef void (*call_fn)(void);

static void segv(void)
{
    /* a write to read-only memory: a real SIGSEGV that valgrind does
     * not also report as an invalid write */
    static const char text[] = "read-only";
    volatile char *ro = (volatile char *)(uintptr_t)text;
    ro[0] = 1;
}

static void do_abort(void)
{
    abort();
}

static void spin(void)
{
    for (volatile uint64_t i = 0;; i++)
        ;
}

static void *volatile kept[256];

static void grow(void)
{
    for (size_t k = 0;; k = (k + 1) % 256) {
        size_t len = 8u << 20;
        volatile char *b = malloc(len);
        if (b == NULL)
            continue;
        free(kept[k]); /* kept first: a stop while touching loses none */
        kept[k] = (void *)b;
        for (size_t i = 0; i < len; i += 4096)
            b[i] = 1;
    }
}

static int behaved;
static void behave(void)
{
    behaved++;
}

/* Runs fn guarded; returns the stop kind and the reason. */
static tw_guard_stop guarded(call_fn fn, const tw_guard_limits *lim, char *why,
                             size_t n)
{
    tw_guard_frame f;
    if (TW_GUARD_TRY(&f)) {
        tw_guard_enter(&f, lim);
        fn();
        tw_guard_leave(&f);
        snprintf(why, n, "-");
        return TW_GUARD_NONE;
    }
    tw_guard_leave(&f);
    tw_guard_reason(&f, why, n);
    return (tw_guard_stop)f.stop;
}

static tw_guard_stop inner_result;
static tw_guard_limits inner_limits = {0, 0, 0, 0};
static void nested(void)
{
    char why[128];
    inner_result = guarded(segv, &inner_limits, why, sizeof(why));
    behaved++; /* the outer call goes on after the inner one was stopped */
}

static void free_kept(void)
{
    for (size_t k = 0; k < 256; k++) {
        free(kept[k]);
        kept[k] = NULL;
    }
}

/* One test function: cmocka installs its own SIGSEGV handler around each
 * test, which would hide the guard's after the first. */
static void test_guard(void **st)
{
    (void)st;
    char why[256];
    tw_guard_limits lim = {300, 0, 0, 0};

    assert_int_equal(guarded(behave, &lim, why, sizeof(why)), TW_GUARD_NONE);
    assert_int_equal(behaved, 1);

    assert_int_equal(guarded(segv, &lim, why, sizeof(why)), TW_GUARD_SIGNAL);
    assert_non_null(strstr(why, "signal 11"));

    assert_int_equal(guarded(do_abort, &lim, why, sizeof(why)),
                     TW_GUARD_SIGNAL);
    assert_non_null(strstr(why, "signal 6"));

    assert_int_equal(guarded(spin, &lim, why, sizeof(why)), TW_GUARD_TIMEOUT);
    assert_non_null(strstr(why, "timeout of 300 ms"));

    tw_guard_limits mem = {0, 64, 0, 0};
    assert_int_equal(guarded(grow, &mem, why, sizeof(why)), TW_GUARD_MEMORY);
    assert_non_null(strstr(why, "more than 64 MiB"));
    free_kept();

    /* a stopped inner call does not stop the outer one */
    assert_int_equal(guarded(nested, &lim, why, sizeof(why)), TW_GUARD_NONE);
    assert_int_equal(inner_result, TW_GUARD_SIGNAL);
    assert_int_equal(behaved, 2);

    /* after all that, the thread's timer no longer ticks into calls */
    assert_int_equal(guarded(behave, &lim, why, sizeof(why)), TW_GUARD_NONE);
    assert_int_equal(behaved, 3);

    /* the code range of a function is found */
    uintptr_t lo, hi;
    tw_guard_text_range((const void *)(uintptr_t)spin, &lo, &hi);
    assert_true(lo <= (uintptr_t)spin && (uintptr_t)spin < hi);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_guard),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
