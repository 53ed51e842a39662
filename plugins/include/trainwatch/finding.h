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

/* A duration as a person reads it: "250 ms", "42 s", "8m 32s",
 * "3h 05m" (whole seconds and minutes cut, not rounded, as a clock
 * shows them); negative durations (and NaN) print as "0 s". Integer
 * arithmetic only, so no locale can change it. */
static inline void tw_finding_duration(double seconds, char *out, size_t n)
{
    if (!(seconds > 0)) /* NaN too */
        seconds = 0;
    if (seconds > 0 && seconds < 1) {
        snprintf(out, n, "%lld ms", (long long)(seconds * 1000 + 0.5));
        return;
    }
    long long s = (long long)seconds; /* whole seconds, as a clock shows */
    if (s < 60)
        snprintf(out, n, "%lld s", s);
    else if (s < 3600)
        snprintf(out, n, "%lldm %02llds", s / 60, s % 60);
    else
        snprintf(out, n, "%lldh %02lldm", s / 3600, s / 60 % 60);
}

/* A size in bytes as a person reads it, in binary units with one decimal
 * from KiB on: "512 B", "1.4 KiB", "1.4 GiB", "3.0 TiB"; negative or NaN
 * sizes print as "0 B". Integer arithmetic for the digits, so no locale
 * can turn the point into a comma. */
static inline void tw_finding_size(double bytes, char *out, size_t n)
{
    static const char *const units[] = {"B",   "KiB", "MiB", "GiB",
                                        "TiB", "PiB", "EiB"};
    if (!(bytes > 0))
        bytes = 0;
    size_t u = 0;
    while (bytes >= 1023.95 && u + 1 < sizeof(units) / sizeof(units[0])) {
        bytes /= 1024;
        u++;
    }
    if (u == 0) {
        snprintf(out, n, "%lld B", (long long)(bytes + 0.5));
        return;
    }
    long long tenths = (long long)(bytes * 10 + 0.5);
    snprintf(out, n, "%lld.%lld %s", tenths / 10, tenths % 10, units[u]);
}

#ifdef __cplusplus
}
#endif

#endif /* TRAINWATCH_FINDING_H */
