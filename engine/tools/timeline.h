/*
 * timeline.h - `trainwatch timeline`: every framework trace file of a
 * profiler-output folder and the chosen system metrics merged, in time
 * order, into one Chrome trace-event JSON object (Perfetto,
 * chrome://tracing). Events keep their absolute times (us since the
 * epoch, as the readers compute them from each file's base time); each
 * framework node (host and rank, `algo-1-0`) is a process track with one
 * thread per phase, each system node a process track of counters
 * ("ph":"C"), one per metric.
 *
 * Memory does not grow with the folder: events are rendered as they are
 * read and go through an external merge sort (sorted_spill.h) in a
 * temporary file; what stays in memory is the track tables (nodes,
 * phases, metrics, files: small) and the sort's buffer.
 *
 * Ownership: nothing is kept after tw_timeline_write() returns.
 */
#ifndef TW_TIMELINE_H
#define TW_TIMELINE_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

typedef struct tw_timeline_opts {
    int has_time; /* keep events overlapping [from_us, to_us] */
    int64_t from_us, to_us;
    int has_steps; /* the same, from TRAIN/GLOBAL steps step_a..step_b */
    int64_t step_a, step_b;
    int framework_only;         /* no system metrics */
    const char *system_metrics; /* comma list of types, names or
                                   dimensions; NULL: all */
    size_t buffer_bytes;        /* the sort's buffer; 0: 16 MiB */
    const char *tmpdir;         /* NULL: $TMPDIR or /tmp */
    int quiet;                  /* no bad-input messages */
} tw_timeline_opts;

typedef struct tw_timeline_counts {
    uint64_t files, bad_lines;
    uint64_t events, samples; /* written */
    int64_t from_us, to_us;   /* the selection (0, 0: none) */
    size_t runs;              /* sorted runs spilled to the temporary file */
} tw_timeline_counts;

/* Reads dir and writes the merged trace to out. TW_ERR with a sentence in
 * err when the folder cannot be listed, a step range matches no step, a
 * temporary file fails or out cannot be written. */
int tw_timeline_write(const char *dir, const tw_timeline_opts *o, FILE *out,
                      tw_timeline_counts *counts, char *err, size_t errlen);

#endif /* TW_TIMELINE_H */
