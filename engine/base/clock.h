/*
 * clock.h - the engine's two clocks, in microseconds: monotonic (intervals,
 * timeouts, backoff) and wall (timestamps of events the engine makes, e.g.
 * the agent's samples, tombstones). One definition for every module.
 */
#ifndef TW_CLOCK_H
#define TW_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC: never jumps; meaningless across processes. */
int64_t tw_mono_us(void);
/* CLOCK_REALTIME: microseconds since the Unix epoch. */
int64_t tw_wall_us(void);

#endif /* TW_CLOCK_H */
