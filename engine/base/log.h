/*
 * log.h - one-line log records to stderr: "<time> <LEVEL> <message>".
 * The process-wide settings live in one named context (tw_log_context in
 * log.c): the minimum level and the output stream.
 */
#ifndef TW_LOG_H
#define TW_LOG_H

#include <stdarg.h>
#include <stdio.h>

#include "trainwatch/plugin.h"

void tw_log_set_level(tw_log_level min_level);
tw_log_level tw_log_get_level(void);
/* Where records go (default stderr); the caller keeps ownership. */
void tw_log_set_stream(FILE *out);

void tw_log(tw_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
void tw_logv(tw_log_level level, const char *fmt, va_list ap);

#endif /* TW_LOG_H */
