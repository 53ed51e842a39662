/*
 * pystats.h - Python-profile analysis (`trainwatch pystats`): the cProfile
 * statistics the hook writes in the legacy layout,
 *   DIR/framework/pytorch/cprofile/<node>/<start_us>_<START_PHASE>-<step>_
 *       <end_us>_<END_PHASE>-<step>/python_stats
 * (hooks/python/trainwatch/legacy_writer.py), or one pstats file, selected
 * by time, step range, mode or job phase, aggregated per group and printed as
 * top-N function tables in pstats' own row format.
 */
#ifndef TW_PYSTATS_H
#define TW_PYSTATS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

/* The hook's step phases, in the order they happen in a step. */
typedef enum {
    TW_PHASE_START,
    TW_PHASE_STEP_START,
    TW_PHASE_FORWARD_PASS_END,
    TW_PHASE_STEP_END,
    TW_PHASE_END,
    TW_PHASE_COUNT
} tw_step_phase;

typedef enum {
    TW_PYSTATS_SORT_TOTTIME,
    TW_PYSTATS_SORT_CUMTIME,
    TW_PYSTATS_SORT_PCALLS,
    TW_PYSTATS_SORT_NCALLS
} tw_pystats_sort;

typedef enum {
    TW_PYSTATS_GROUP_ALL,            /* one table of everything selected */
    TW_PYSTATS_GROUP_TRAINING_PHASE, /* per START_PHASE-END_PHASE pair */
    TW_PYSTATS_GROUP_JOB_PHASE       /* initialization, training loop,
                                        finalization */
} tw_pystats_group;

typedef struct tw_pystats_opts {
    int has_time; /* intervals inside [from_us, to_us] */
    int64_t from_us, to_us;
    int has_steps; /* (start_step, start_phase) >= (step_a, phase_a) and
                      (end_step, end_phase) <= (step_b, phase_b) */
    int64_t step_a, step_b;
    tw_step_phase phase_a, phase_b;
    int before_step0; /* intervals from the hook's start (START) */
    int after_close;  /* intervals up to the hook's close (END) */
    const char *node; /* only this node id; NULL: all */
    const char *mode; /* only intervals of this mode (TRAIN, EVAL...) */
    const char *between_from, *between_to; /* intervals from the first of
                                              mode `from` to the last of
                                              mode `to` (time order) */
    tw_pystats_group group;
    tw_pystats_sort sort;
    size_t top; /* rows per table; 0: all */
    int list;   /* also list the intervals */
    int json;   /* one JSON object instead of text */
    int quiet;  /* no bad-input messages on stderr */
} tw_pystats_opts;

/* "STEP_START" -> its phase; -1 when not a phase name. */
int tw_step_phase_parse(const char *name, size_t len);
const char *tw_step_phase_name(tw_step_phase p);

/* Analyses path (a profiler-output folder or one pstats file) and writes
 * the result to out. TW_OK, or TW_ERR with a sentence in err. */
int tw_pystats_run(const char *path, const tw_pystats_opts *o, FILE *out,
                   char *err, size_t errlen);

/* One profiled interval whose statistics are in memory (`pystats --job`:
 * the hook's PythonProfile tables read from the metrics topic). */
typedef struct tw_pystats_interval {
    const char *node;
    const char *where; /* where it was read, the JSON's "path" */
    const char *mode;  /* TRAIN, EVAL...; "" when none */
    int64_t start_us, end_us, start_step, end_step;
    tw_step_phase start_phase, end_phase;
    const struct tw_pstats *stats;
} tw_pystats_interval;

/* The same analysis over n intervals in memory (copied as needed; the
 * caller keeps them); `skipped` bad inputs already counted by the
 * caller are reported with the result's own. */
int tw_pystats_run_intervals(const tw_pystats_interval *iv, size_t n,
                             size_t skipped, const tw_pystats_opts *o,
                             FILE *out, char *err, size_t errlen);

#endif /* TW_PYSTATS_H */
