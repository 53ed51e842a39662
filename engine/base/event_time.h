/*
 * event_time.h - checked conversions of event times (seconds since the
 * epoch as doubles, as the agent's files and the wire carry them) to the
 * engine's integer microseconds and nanoseconds.
 *
 * A double past the int64 range of the target unit (about year 2262 in
 * nanoseconds), NaN or ±Inf has no integer value: converting it with a
 * cast is undefined behaviour. These helpers refuse such values (return
 * 0, *out untouched) so callers count and drop them. Pure functions.
 */
#ifndef TW_EVENT_TIME_H
#define TW_EVENT_TIME_H

#include <stdint.h>

/* 2^63 is exact in a double; v converts to int64 iff -2^63 <= v < 2^63
 * (NaN fails both comparisons). Inline: it runs once per sample. */
static inline int tw_time_to_i64_(double v, int64_t *out)
{
    if (!(v >= -9223372036854775808.0 && v < 9223372036854775808.0))
        return 0;
    *out = (int64_t)v;
    return 1;
}

/* The reference's selection time: ((ts * 1000) * 1000) * 1000 truncated
 * toward zero, in ns. 1 when representable, else 0. */
static inline int tw_time_s_to_ns(double ts, int64_t *out)
{
    return tw_time_to_i64_(((ts * 1000.0) * 1000.0) * 1000.0, out);
}

/* ts * 1e6 truncated toward zero, in µs. 1 when representable, else 0. */
static inline int tw_time_s_to_us(double ts, int64_t *out)
{
    return tw_time_to_i64_(ts * 1e6, out);
}

/* floor(ts / 60) minutes, in µs (the minute a sample falls in). 1 when
 * representable, else 0. */
int tw_time_minute_floor_us(double ts, int64_t *out);

/* 1 when a seconds value converts in every unit above (the check a
 * reader applies before handing a timestamp to the engine). */
int tw_time_s_valid(double ts);

/* a + b, saturated at INT64_MIN / INT64_MAX (time bounds never wrap). */
int64_t tw_time_add_sat(int64_t a, int64_t b);

#endif /* TW_EVENT_TIME_H */
