/* cli_ranges.c - time and step range arguments (cli_ranges.h). */
#include "cli_ranges.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

/* A finite number of seconds within what an int64 of us holds. */
static int seconds_to_us(const char *s, const char *end_expected, int64_t *us)
{
    char *end;
    errno = 0;
    double x = strtod(s, &end);
    if (end == s || end != end_expected || errno != 0 || !isfinite(x) ||
        fabs(x) > 9.2e12)
        return -1;
    *us = llround(x * 1e6);
    return 0;
}

int tw_cli_parse_time(const char *s, int64_t *us)
{
    return seconds_to_us(s, s + strlen(s), us);
}

int tw_cli_parse_time_range(const char *s, int64_t *from_us, int64_t *to_us)
{
    const char *colon = strchr(s, ':');
    if (colon == NULL || seconds_to_us(s, colon, from_us) != 0 ||
        tw_cli_parse_time(colon + 1, to_us) != 0 || *from_us > *to_us)
        return -1;
    return 0;
}

int tw_cli_parse_step_range(const char *s, int64_t *a, int64_t *b)
{
    char *end;
    errno = 0;
    long long x = strtoll(s, &end, 10);
    if (end == s || *end != ':' || errno != 0)
        return -1;
    const char *t = end + 1;
    long long y = strtoll(t, &end, 10);
    if (end == t || *end != '\0' || errno != 0 || x > y)
        return -1;
    *a = x;
    *b = y;
    return 0;
}
