/*
 * trainwatch/finding.h - small helpers for filling a tw_finding (plugin.h)
 * from a rule's finding() callback. Header-only, so a custom rule needs
 * nothing beyond the two public headers.
 */
#ifndef TRAINWATCH_FINDING_H
#define TRAINWATCH_FINDING_H

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "trainwatch/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Counts `name` as involved and lists it while there is room (call the
 * worst first). A name already listed is neither listed nor counted
 * twice; names past the list are counted, the caller being the one who
 * knows they are distinct. */
static inline void tw_finding_add_name(tw_finding *f, const char *name)
{
    for (uint32_t i = 0; i < f->nnames; i++)
        if (strncmp(f->names[i], name, TW_FINDING_NAME_LEN - 1) == 0)
            return;
    if (f->nnames < TW_FINDING_MAX_NODES)
        snprintf(f->names[f->nnames++], TW_FINDING_NAME_LEN, "%s", name);
    f->ninvolved++;
}

/* printf into one of the finding's texts (summary, magnitude, ...). */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
static inline void
tw_finding_text(char out[TW_FINDING_TEXT_LEN], const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out, TW_FINDING_TEXT_LEN, fmt, ap);
    va_end(ap);
}

/* Widens [first_us, last_us] to take in t (0 = unset). */
static inline void tw_finding_time(tw_finding *f, int64_t t)
{
    if (f->first_us == 0 || t < f->first_us)
        f->first_us = t;
    if (f->last_us == 0 || t > f->last_us)
        f->last_us = t;
}

/* A duration as a person reads it: "850 ms", "42 s", "8m 32s",
 * "3h 05m"; negative durations print as 0 s. */
static inline void tw_finding_duration(double seconds, char *out, size_t n)
{
    if (!(seconds > 0)) /* NaN too */
        seconds = 0;
    if (seconds < 1 && seconds > 0)
        snprintf(out, n, "%.0f ms", seconds * 1000);
    else if (seconds < 60)
        snprintf(out, n, "%.0f s", seconds);
    else if (seconds < 3600)
        snprintf(out, n, "%dm %02ds", (int)(seconds / 60), (int)seconds % 60);
    else
        snprintf(out, n, "%lldh %02dm", (long long)(seconds / 3600),
                 (int)(seconds / 60) % 60);
}

#ifdef __cplusplus
}
#endif

#endif /* TRAINWATCH_FINDING_H */
