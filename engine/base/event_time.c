/* event_time.c - checked double -> int64 time conversions (event_time.h). */
#include "event_time.h"

#include <math.h>

int tw_time_minute_floor_us(double ts, int64_t *out)
{
    int64_t minutes;
    if (!tw_time_to_i64_(floor(ts / 60.0), &minutes) ||
        __builtin_mul_overflow(minutes, 60 * 1000000LL, out))
        return 0;
    return 1;
}

int tw_time_s_valid(double ts)
{
    int64_t v;
    return tw_time_s_to_ns(ts, &v) && tw_time_s_to_us(ts, &v) &&
           tw_time_minute_floor_us(ts, &v);
}

int64_t tw_time_add_sat(int64_t a, int64_t b)
{
    int64_t r;
    if (!__builtin_add_overflow(a, b, &r))
        return r;
    return b > 0 ? INT64_MAX : INT64_MIN;
}
