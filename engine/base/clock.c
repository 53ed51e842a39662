/* clock.c - the engine's clocks (clock.h). */
#include "clock.h"

#include <time.h>

static int64_t tw_clock_us(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

int64_t tw_mono_us(void)
{
    return tw_clock_us(CLOCK_MONOTONIC);
}

int64_t tw_wall_us(void)
{
    return tw_clock_us(CLOCK_REALTIME);
}
