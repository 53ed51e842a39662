/*
 * signals.h - stopping long-running commands (broker, replay, agent) on
 * SIGINT/SIGTERM without a signal handler or global flag.
 *
 * tw_signals_block() blocks SIGINT and SIGTERM in the calling thread; call
 * it first thing in a command, before any library starts a thread, so every
 * thread inherits the mask and the signals stay pending for the process.
 * tw_signals_wait() then takes one pending signal, waiting at most
 * timeout_ms: commands use it as their sleep, so a signal wakes them at
 * once. Nothing here allocates.
 */
#ifndef TW_SIGNALS_H
#define TW_SIGNALS_H

#include <signal.h>

/* Blocks SIGINT and SIGTERM and sets their action back to the default
 * (a shell's background job has SIGINT ignored, which would discard it);
 * *set receives the blocked set for
 * tw_signals_wait(). Returns 0, or -1 (errno set). */
int tw_signals_block(sigset_t *set);

/* Waits up to timeout_ms (0 = just look) for one of `set`. Returns the
 * signal number taken, or 0 when the time passed without one. */
int tw_signals_wait(const sigset_t *set, long timeout_ms);

/* 1 when one of `set` is pending, without taking it (a cheap check for
 * long computations; tw_signals_wait takes it afterwards). */
int tw_signals_pending(const sigset_t *set);

/* "SIGINT", "SIGTERM" or "signal". Static string. */
const char *tw_signals_name(int sig);

#endif /* TW_SIGNALS_H */
