/* signals.c - SIGINT/SIGTERM as pending signals, taken synchronously
 * (signals.h). */
#include "signals.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <string.h>
#include <time.h>

int tw_signals_block(sigset_t *set)
{
    /* A shell starts background commands with SIGINT ignored, and an
     * ignored signal is discarded even while blocked: restore the default
     * action so it stays pending for tw_signals_wait(). */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof(dfl));
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigemptyset(set);
    sigaddset(set, SIGINT);
    sigaddset(set, SIGTERM);
    int rc = pthread_sigmask(SIG_BLOCK, set, NULL);
    if (rc != 0) {
        errno = rc;
        return -1;
    }
    if (sigaction(SIGINT, &dfl, NULL) != 0 ||
        sigaction(SIGTERM, &dfl, NULL) != 0)
        return -1;
    return 0;
}

int tw_signals_wait(const sigset_t *set, long timeout_ms)
{
    if (timeout_ms < 0)
        timeout_ms = 0;
    struct timespec ts;
    ts.tv_sec = timeout_ms / 1000;
    ts.tv_nsec = (timeout_ms % 1000) * 1000000L;
    struct timespec start;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        int sig = sigtimedwait(set, NULL, &ts);
        if (sig > 0)
            return sig;
        if (errno != EINTR)
            return 0;
        /* Interrupted by another signal: wait for what is left. */
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long spent = (long)((now.tv_sec - start.tv_sec) * 1000 +
                            (now.tv_nsec - start.tv_nsec) / 1000000L);
        long left = timeout_ms - spent;
        if (left <= 0)
            return 0;
        ts.tv_sec = left / 1000;
        ts.tv_nsec = (left % 1000) * 1000000L;
    }
}

int tw_signals_pending(const sigset_t *set)
{
    sigset_t pending;
    if (sigpending(&pending) != 0)
        return 0;
    static const int sigs[] = {SIGINT, SIGTERM};
    for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++)
        if (sigismember(set, sigs[i]) == 1 &&
            sigismember(&pending, sigs[i]) == 1)
            return 1;
    return 0;
}

const char *tw_signals_name(int sig)
{
    switch (sig) {
    case SIGINT:
        return "SIGINT";
    case SIGTERM:
        return "SIGTERM";
    default:
        return "signal";
    }
}
