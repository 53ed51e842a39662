/*
 * job_statistics.h - `trainwatch stats`: job, step, utilization, device
 * usage and training-phase statistics of a profiler-output folder, read
 * with the agent-file readers (two passes: step events first, then every
 * file). The definitions are in README.md ("Job statistics"); each number
 * is reproduced by tests/stats/stats_reference.py with pandas/numpy.
 *
 * Memory: the step events and the selected system samples' values are
 * kept (exact percentiles need every value), 24 bytes per sample.
 *
 * Ownership: tw_statistics_compute() returns a result owned by the caller
 * (tw_statistics_free); it owns every string in it.
 */
#ifndef TW_JOB_STATISTICS_H
#define TW_JOB_STATISTICS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* How step durations are grouped (the analysis utilities' StatsBy). */
typedef enum tw_stats_by {
    TW_STATS_BY_PHASE = 0, /* Step:ModeKeys.* events, by event name      */
    TW_STATS_BY_METRIC,    /* every event with a step, by event name      */
    TW_STATS_BY_PROCESS    /* every event with a step, by its phase       */
} tw_stats_by;

typedef enum tw_stats_format {
    TW_STATS_TEXT = 0,
    TW_STATS_JSON,
    TW_STATS_CSV
} tw_stats_format;

#define TW_STATS_MAX_RANGES 16

typedef struct tw_stats_range {
    double from, to; /* percent, both ends inclusive */
} tw_stats_range;

typedef struct tw_stats_opts {
    tw_stats_by by;
    int has_time; /* --time: keep what lies within [from_us, to_us] */
    int64_t from_us, to_us;
    int has_steps; /* --by-step: TRAIN/GLOBAL steps [step_a, step_b] */
    int64_t step_a, step_b;
    int per_phase; /* utilization also per training-phase interval */
    tw_stats_range ranges[TW_STATS_MAX_RANGES]; /* nranges == 0: default */
    size_t nranges;
    int quiet; /* no bad-input messages */
} tw_stats_opts;

typedef struct tw_statistics tw_statistics;

/* Reads DIR and computes everything. TW_ERR with a sentence in err when
 * the folder cannot be listed, a step range matches no step, or on
 * out-of-memory; bad lines are reported on stderr and counted. */
int tw_statistics_compute(const char *dir, const tw_stats_opts *o,
                          tw_statistics **out, char *err, size_t errlen);

/* Writes s as a text report, one JSON object or long-form CSV
 * (`table,group,node,phase,stat,value`). TW_ERR on out-of-memory or a
 * write error. */
int tw_statistics_write(const tw_statistics *s, tw_stats_format f, FILE *out);

void tw_statistics_free(tw_statistics *s);

#endif /* TW_JOB_STATISTICS_H */
