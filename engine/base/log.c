/* log.c - stderr logging (log.h). */
#include "log.h"

#include <time.h>

/* The only process-wide mutable state of the logger. */
static struct tw_log_context {
    tw_log_level min_level;
    FILE *out;
} tw_log_context = {TW_LOG_INFO, NULL};

void tw_log_set_level(tw_log_level min_level)
{
    tw_log_context.min_level = min_level;
}

tw_log_level tw_log_get_level(void)
{
    return tw_log_context.min_level;
}

void tw_log_set_stream(FILE *out)
{
    tw_log_context.out = out;
}

void tw_logv(tw_log_level level, const char *fmt, va_list ap)
{
    static const char *const names[] = {"DEBUG", "INFO", "WARN", "ERROR"};
    if (level < tw_log_context.min_level)
        return;
    FILE *out = tw_log_context.out != NULL ? tw_log_context.out : stderr;
    struct timespec ts;
    struct tm tm;
    clock_gettime(CLOCK_REALTIME, &ts);
    gmtime_r(&ts.tv_sec, &tm);
    char line[2048];
    int n = vsnprintf(line, sizeof(line), fmt, ap);
    if (n < 0)
        return;
    fprintf(out, "%04d-%02d-%02dT%02d:%02d:%02d.%03ldZ %-5s %s\n",
            tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min,
            tm.tm_sec, ts.tv_nsec / 1000000L,
            names[level <= TW_LOG_ERROR ? level : TW_LOG_ERROR], line);
}

void tw_log(tw_log_level level, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tw_logv(level, fmt, ap);
    va_end(ap);
}
