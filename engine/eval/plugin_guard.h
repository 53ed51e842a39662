/*
 * plugin_guard.h - runs a plugin callback so that a crash, a hang or a
 * runaway allocation inside it stops the call instead of the engine.
 *
 * In-process containment (see README "Plugin isolation" for why not a
 * worker process): SIGSEGV, SIGBUS, SIGFPE, SIGILL and SIGABRT raised in
 * the call jump back to the caller; a per-thread timer ticking every 10 ms
 * stops a call that runs past its timeout or grows the process's resident
 * memory past its cap. A stopped call's plugin state is abandoned (its
 * memory is not freed: it may be inconsistent).
 *
 * Use:
 *     tw_guard_frame f;
 *     if (TW_GUARD_TRY(&f)) {
 *         tw_guard_enter(&f, &limits);
 *         rc = plugin_call(...);
 *         tw_guard_leave(&f);
 *     } else {
 *         tw_guard_leave(&f);  // stopped: tw_guard_reason(&f, ...)
 *     }
 */
#ifndef TW_PLUGIN_GUARD_H
#define TW_PLUGIN_GUARD_H

#include <setjmp.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>

typedef struct tw_guard_limits {
    uint32_t timeout_ms; /* wall time per call; 0 = none */
    uint32_t memory_mb;  /* resident growth during one call; 0 = none */
    uintptr_t text_lo;   /* the plugin's code: timeouts stop a call only */
    uintptr_t text_hi;   /* while it runs here (not inside libc's locks) */
} tw_guard_limits;

typedef enum tw_guard_stop {
    TW_GUARD_NONE = 0,
    TW_GUARD_SIGNAL,
    TW_GUARD_TIMEOUT,
    TW_GUARD_MEMORY
} tw_guard_stop;

typedef struct tw_guard_frame {
    sigjmp_buf env;
    const tw_guard_limits *limits;
    struct tw_guard_frame *outer; /* nested calls (sub-rules) */
    volatile sig_atomic_t stop;   /* tw_guard_stop */
    volatile sig_atomic_t signo;
    int armed; /* this frame started the thread's timer */
} tw_guard_frame;

/* Mask not saved: the handlers run with SA_NODEFER, so nothing stays
 * blocked after a jump, and a call costs no sigprocmask. */
#define TW_GUARD_TRY(f) (sigsetjmp((f)->env, 0) == 0)

/* Installs the handlers (once per process) and starts the thread's timer
 * when `f` is the outermost frame. */
void tw_guard_enter(tw_guard_frame *f, const tw_guard_limits *limits);
void tw_guard_leave(tw_guard_frame *f);

/* "signal 11 (Segmentation fault)", "timeout: ran past 500 ms", ... */
void tw_guard_reason(const tw_guard_frame *f, char *out, size_t n);

/* The executable segment holding `addr` (a plugin's function), for
 * tw_guard_limits.text_lo/hi; 0 and 0 when not found. */
void tw_guard_text_range(const void *addr, uintptr_t *lo, uintptr_t *hi);

#endif /* TW_PLUGIN_GUARD_H */
