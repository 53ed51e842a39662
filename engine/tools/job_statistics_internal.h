/*
 * job_statistics_internal.h - the computed statistics (job_statistics.h),
 * shared by the computation (job_statistics.c) and the writers
 * (job_statistics_write.c). Not a public interface.
 */
#ifndef TW_JOB_STATISTICS_INTERNAL_H
#define TW_JOB_STATISTICS_INTERNAL_H

#include "job_statistics.h"

/* count, mean, min, max and numpy "linear" p50/p95/p99 of a set. */
typedef struct tw_stat_summary {
    uint64_t count;
    double mean, min, max, p50, p95, p99;
} tw_stat_summary;

typedef struct tw_phase_interval {
    char *node;  /* the framework node whose step events make it */
    char *phase; /* "Step:ModeKeys.TRAIN", "Before ...", "Between ..." */
    int64_t start_us, end_us;
} tw_phase_interval;

typedef struct tw_step_group {
    char *group; /* event name or phase */
    tw_stat_summary s;
} tw_step_group;

typedef struct tw_util_row {
    char *resource, *metric, *node;
    char *phase; /* NULL: the whole selection */
    tw_stat_summary s;
} tw_util_row;

typedef struct tw_usage_row {
    char *metric, *node;
    uint64_t total;
    uint64_t counts[TW_STATS_MAX_RANGES];
} tw_usage_row;

/* Mean GPUUtilization of one GPU per column of the heat map; NAN where
 * the column holds no sample. */
typedef struct tw_heat_row {
    char *node, *gpu;
    double *mean; /* tw_statistics.heat_columns values */
} tw_heat_row;

/* At most this many columns: the page draws one cell per column. */
#define TW_STATS_HEAT_MAX_COLUMNS 120

struct tw_statistics {
    tw_stats_by by;
    int has_selection;
    int64_t sel_from_us, sel_to_us;
    tw_stats_range ranges[TW_STATS_MAX_RANGES];
    size_t nranges;

    uint64_t files, bad_lines, samples, events; /* read (before selection) */
    uint64_t selected_samples, selected_events;

    int has_job; /* any selected sample or event */
    int64_t start_us, end_us;
    int has_loop; /* a selected TRAIN/GLOBAL step event */
    int64_t loop_start_us, loop_end_us;

    tw_phase_interval *phases;
    size_t nphases;
    tw_step_group *steps;
    size_t nsteps;
    tw_util_row *util;
    size_t nutil;
    tw_usage_row *usage;
    size_t nusage;
    /* column c covers [heat_start_us + c * heat_bucket_us, + heat_bucket_us) */
    int64_t heat_start_us, heat_bucket_us;
    size_t heat_columns;
    tw_heat_row *heat;
    size_t nheat;
};

const char *tw_stats_by_name(tw_stats_by by);

#endif /* TW_JOB_STATISTICS_INTERNAL_H */
