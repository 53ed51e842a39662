/*
 * cli_ranges.h - parsing of the range arguments the offline tools share:
 * a time range `T1:T2` (epoch seconds, fractions allowed) and a step range
 * `A:B` (integers, both inclusive).
 */
#ifndef TW_CLI_RANGES_H
#define TW_CLI_RANGES_H

#include <stdint.h>

/* "T1:T2" in epoch seconds -> [from_us, to_us]. 0, or -1 when it is not
 * two finite numbers with T1 <= T2. */
int tw_cli_parse_time_range(const char *s, int64_t *from_us, int64_t *to_us);
/* One epoch-seconds time -> us. 0 or -1. */
int tw_cli_parse_time(const char *s, int64_t *us);
/* "A:B" -> [a, b], integers with A <= B. 0 or -1. */
int tw_cli_parse_step_range(const char *s, int64_t *a, int64_t *b);

#endif /* TW_CLI_RANGES_H */
