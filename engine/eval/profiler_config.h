/*
 * profiler_config.h - validation of a training job's profiling
 * configuration (ProfilerConfig / FrameworkProfile and the detailed,
 * dataloader and Python profiling configs) as the managed service
 * validates it, in the JSON form the training hook puts in its JOB_START
 * marker (hooks/python/trainwatch/profiler_config.py; the same rules, the
 * same case table: tests/data/profiler_config_cases.json).
 *
 * Rules: only known keys; system_monitor_interval_millis one of 100, 200,
 * 500, 1000, 5000, 60000; start_step an integer >= 0, num_steps an
 * integer >= 1, start_unix_time seconds >= 0, duration seconds > 0; a
 * step field and a time field in one range are an error naming both;
 * metrics_regex a POSIX extended regular expression; python_profiler
 * cprofile|pyinstrument; cprofile_timer total_time|cpu_time|off_cpu_time.
 */
#ifndef TW_PROFILER_CONFIG_H
#define TW_PROFILER_CONFIG_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Checks the JSON text json[0..len). 0 when valid; -1 when not, with a
 * sentence in err naming the offending field(s) by their dotted path
 * (e.g. "framework_profile_params.start_step and
 * framework_profile_params.duration cannot both be set ..."). */
int tw_profiler_config_check(const char *json, size_t len, char *err,
                             size_t errlen);

/* The system_monitor_interval_millis of the configuration json[0..len)
 * (checked first with tw_profiler_config_check) into *ms: 0 when set, 1
 * when absent (*ms untouched), -1 when the text is not a JSON object. */
int tw_profiler_config_interval(const char *json, size_t len, uint32_t *ms);

#ifdef __cplusplus
}
#endif

#endif /* TW_PROFILER_CONFIG_H */
