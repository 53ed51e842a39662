/*
 * plugin_guard.c - signal handlers and the per-thread watchdog timer that
 * stop a misbehaving plugin call (plugin_guard.h).
 *
 * Signal handlers cannot be handed a context, so the frame being guarded
 * lives in thread-local storage: each thread guards its own calls (rules
 * evaluated on several threads each get their own frame and timer).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include "plugin_guard.h"

#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

#define TICK_MS 10u
#define TICK_SIGNAL SIGALRM
/* A tick that lands outside the plugin's code (in libc, perhaps holding
 * malloc's lock) waits for a later one; after this many it stops the call
 * anyway. */
#define MAX_DEFERRED_TICKS 100u
#define ALTSTACK_SIZE (64 * 1024)

static const int fault_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT};
#define NFAULTS (sizeof(fault_signals) / sizeof(fault_signals[0]))

/* The handlers that were there before ours, to pass on faults outside a
 * plugin; written under install_lock when ours are (re)installed. */
static struct sigaction previous[NFAULTS];
static pthread_mutex_t install_lock = PTHREAD_MUTEX_INITIALIZER;

static _Thread_local tw_guard_frame *tl_current;   /* innermost frame */
static _Thread_local tw_guard_frame *tl_outermost; /* owns the timer */
static _Thread_local timer_t tl_timer;
static _Thread_local int tl_timer_state; /* 0 none, 1 made, -1 failed */
static _Thread_local uint32_t tl_ticks, tl_deferred;
static _Thread_local long tl_base_pages, tl_page_size;
static _Thread_local int tl_altstack_done;
static _Thread_local char tl_altstack[ALTSTACK_SIZE];

static void pass_on(int sig, siginfo_t *si, void *uc)
{
    for (size_t i = 0; i < NFAULTS; i++) {
        if (fault_signals[i] != sig)
            continue;
        const struct sigaction *old = &previous[i];
        if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction != NULL) {
            old->sa_sigaction(sig, si, uc);
            return;
        }
        if (old->sa_handler != SIG_DFL && old->sa_handler != SIG_IGN) {
            old->sa_handler(sig);
            return;
        }
    }
    /* the default action: a synchronous fault repeats on return */
    signal(sig, SIG_DFL);
    if (sig == SIGABRT || si == NULL || si->si_code <= 0)
        raise(sig);
}

static void on_fault(int sig, siginfo_t *si, void *uc)
{
    tw_guard_frame *f = tl_current;
    if (f == NULL) {
        pass_on(sig, si, uc);
        return;
    }
    f->stop = TW_GUARD_SIGNAL;
    f->signo = sig;
    siglongjmp(f->env, 1);
}

/* Resident pages from /proc/self/statm: open/read/close are
 * async-signal-safe, stdio is not. -1 when unreadable. */
static long resident_pages(void)
{
    int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char text[128];
    ssize_t n = read(fd, text, sizeof(text) - 1);
    close(fd);
    if (n <= 0)
        return -1;
    text[n] = '\0';
    const char *p = text;
    while (*p != '\0' && *p != ' ') /* skip the size field */
        p++;
    long pages = 0;
    while (*p == ' ')
        p++;
    while (*p >= '0' && *p <= '9')
        pages = pages * 10 + (*p++ - '0');
    return pages;
}

static uintptr_t interrupted_pc(void *uc)
{
#if defined(__x86_64__)
    return (uintptr_t)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
#elif defined(__aarch64__)
    return (uintptr_t)((ucontext_t *)uc)->uc_mcontext.pc;
#else
    (void)uc;
    return 0;
#endif
}

static int in_plugin_code(void *uc, const tw_guard_limits *lim)
{
    uintptr_t pc = interrupted_pc(uc);
    if (pc == 0 || lim->text_hi == 0)
        return 1; /* cannot tell: stop it where it is */
    return pc >= lim->text_lo && pc < lim->text_hi;
}

static void on_tick(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si;
    tw_guard_frame *f = tl_current;
    if (f == NULL || tl_outermost == NULL)
        return; /* a tick that arrived after the call ended */
    const tw_guard_limits *lim = tl_outermost->limits;
    tl_ticks++;
    tw_guard_stop stop = TW_GUARD_NONE;
    if (lim->timeout_ms != 0 && tl_ticks * TICK_MS >= lim->timeout_ms) {
        stop = TW_GUARD_TIMEOUT;
    } else if (lim->memory_mb != 0) {
        long pages = resident_pages();
        if (pages >= 0 && tl_base_pages < 0)
            tl_base_pages = pages; /* the first tick sets the baseline */
        else if (pages >= 0 && (pages - tl_base_pages) * tl_page_size >
                                   (long)lim->memory_mb * 1024 * 1024)
            stop = TW_GUARD_MEMORY;
    }
    if (stop == TW_GUARD_NONE)
        return;
    if (!in_plugin_code(uc, lim) && tl_deferred++ < MAX_DEFERRED_TICKS)
        return;
    f->stop = stop;
    f->signo = sig;
    siglongjmp(f->env, 1);
}

static void install_handlers(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sigemptyset(&sa.sa_mask);
    /* NODEFER: a jump out of the handler leaves nothing blocked */
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_ONSTACK;
    sa.sa_sigaction = on_fault;
    for (size_t i = 0; i < NFAULTS; i++)
        sigaction(fault_signals[i], &sa, &previous[i]);
    sa.sa_sigaction = on_tick;
    sa.sa_flags |= SA_RESTART;
    sigaction(TICK_SIGNAL, &sa, NULL);
}

/* A stack for the handlers, so a plugin that overflowed its own stack
 * can still be stopped; kept if the thread already has one. */
static void ensure_altstack(void)
{
    if (tl_altstack_done)
        return;
    tl_altstack_done = 1;
    stack_t cur;
    if (sigaltstack(NULL, &cur) == 0 && !(cur.ss_flags & SS_DISABLE))
        return;
    stack_t ss = {.ss_sp = tl_altstack, .ss_size = sizeof(tl_altstack)};
    sigaltstack(&ss, NULL);
}

static void timer_set(uint32_t ms)
{
    if (tl_timer_state == 0) {
        struct sigevent sev;
        memset(&sev, 0, sizeof(sev));
        sev.sigev_notify = SIGEV_THREAD_ID;
        sev.sigev_signo = TICK_SIGNAL;
        sev.sigev_notify_thread_id = (pid_t)gettid();
        tl_timer_state =
            timer_create(CLOCK_MONOTONIC, &sev, &tl_timer) == 0 ? 1 : -1;
    }
    if (tl_timer_state != 1)
        return;
    struct itimerspec its;
    memset(&its, 0, sizeof(its));
    its.it_value.tv_nsec = (long)ms * 1000000L;
    its.it_interval = its.it_value;
    timer_settime(tl_timer, 0, &its, NULL);
}

/* Installs the handlers unless they are in place: a library (a test
 * framework, a sanitizer) may have replaced them since. */
static void ensure_handlers(void)
{
    struct sigaction cur;
    if (sigaction(SIGSEGV, NULL, &cur) == 0 && (cur.sa_flags & SA_SIGINFO) &&
        cur.sa_sigaction == on_fault)
        return;
    pthread_mutex_lock(&install_lock);
    if (sigaction(SIGSEGV, NULL, &cur) != 0 || !(cur.sa_flags & SA_SIGINFO) ||
        cur.sa_sigaction != on_fault)
        install_handlers();
    pthread_mutex_unlock(&install_lock);
}

void tw_guard_enter(tw_guard_frame *f, const tw_guard_limits *limits)
{
    ensure_altstack();
    f->limits = limits;
    f->stop = TW_GUARD_NONE;
    f->signo = 0;
    f->outer = tl_current;
    f->armed = 0;
    if (tl_outermost == NULL) {
        ensure_handlers();
        tl_ticks = 0;
        tl_deferred = 0;
        tl_base_pages = -1;
        if (tl_page_size == 0)
            tl_page_size = sysconf(_SC_PAGESIZE);
        tl_outermost = f;
        f->armed = 1;
        if (limits->timeout_ms != 0 || limits->memory_mb != 0)
            timer_set(TICK_MS);
    }
    tl_current = f;
}

void tw_guard_leave(tw_guard_frame *f)
{
    if (f->armed) {
        timer_set(0);
        tl_outermost = NULL;
    }
    /* a jump from an inner call lands here with inner frames still
     * recorded: unwind to this frame's outer one */
    tl_current = f->outer;
}

void tw_guard_reason(const tw_guard_frame *f, char *out, size_t n)
{
    switch ((tw_guard_stop)f->stop) {
    case TW_GUARD_SIGNAL:
        snprintf(out, n, "the plugin was stopped by signal %d (%s)",
                 (int)f->signo, strsignal((int)f->signo));
        return;
    case TW_GUARD_TIMEOUT:
        snprintf(out, n,
                 "the plugin ran past its timeout of %u ms "
                 "(plugin_timeout) and was stopped",
                 f->limits->timeout_ms);
        return;
    case TW_GUARD_MEMORY:
        snprintf(out, n,
                 "the plugin grew the engine's memory by more than %u MiB "
                 "in one call (plugin_memory_mb) and was stopped",
                 f->limits->memory_mb);
        return;
    case TW_GUARD_NONE:
        break;
    }
    snprintf(out, n, "the plugin was not stopped");
}

typedef struct text_search {
    uintptr_t addr, lo, hi;
} text_search;

static int find_segment(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    text_search *s = arg;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X))
            continue;
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (s->addr >= lo && s->addr < lo + ph->p_memsz) {
            s->lo = lo;
            s->hi = lo + ph->p_memsz;
            return 1;
        }
    }
    return 0;
}

void tw_guard_text_range(const void *addr, uintptr_t *lo, uintptr_t *hi)
{
    text_search s = {(uintptr_t)addr, 0, 0};
    dl_iterate_phdr(find_segment, &s);
    *lo = s.lo;
    *hi = s.hi;
}
