/*
 * legacy_system_writer.h - the agent's system samples in the legacy
 * profiler-output layout (RULES.md §1.1, §1.2), beside the stream, so that
 * `trainwatch eval DIR` reads the same values `trainwatch run` got:
 *
 *   DIR/system/incremental/<YYYYMMDDHH>/<minute_s>.<node>.json
 *       JSON lines {"Type","Name","Dimension","Value","NodeId",
 *       "Timestamp"}, one per sample; <minute_s> is the start of the UTC
 *       minute of its samples (the stream's file_ts_us), the folder the
 *       UTC hour of that minute. A minute's file is written under
 *       DIR/system/.open/ (a name the reader ignores) and renamed into
 *       place when a sample of another minute comes, or at close. The
 *       first file, opened at the JOB_START time, is named with that time's
 *       second rounded up, not its minute's start: nothing in the folder
 *       comes before the JOB_START.
 *   DIR/framework/pevents/<hour>/<start_us>_<node>_pythontimeline.json
 *       a trace file without events named with the JOB_START time, so the
 *       folder's first timestamp (its earliest file's) is the stream's.
 *   DIR/system/training_job_end.ts   at close, when no other writer of the
 *       folder (the hook) is still open: DIR/.writers/ holds one file per
 *       open writer; each removes its own at close and the one that finds
 *       it empty afterwards writes the marker (whichever closes last).
 *
 * The node must be `algo-<digits>`: the reader accepts no other system
 * file name. Writing is bounded (max_bytes in all) and never fails the
 * caller: a sample that cannot be written (the cap, a write, open or
 * rename error) is dropped and counted, the first error of each kind
 * logged once.
 */
#ifndef TW_LEGACY_SYSTEM_WRITER_H
#define TW_LEGACY_SYSTEM_WRITER_H

#include <stddef.h>
#include <stdint.h>

#include "batch.h"

typedef struct tw_legacy_sys tw_legacy_sys;

typedef struct tw_legacy_sys_stats {
    uint64_t files;   /* files renamed into place */
    uint64_t lines;   /* samples written */
    uint64_t bytes;   /* bytes written */
    uint64_t dropped; /* samples not written (cap or error) */
    uint64_t errors;  /* failed system calls */
} tw_legacy_sys_stats;

/* 1 when node is a name the legacy reader accepts (algo-<digits>). */
int tw_legacy_sys_node_ok(const char *node);

/* Creates DIR/system/.open and DIR/.writers/agent-<pid>, and opens the
 * file of the minute of start_us. -1 with err when DIR cannot be used. */
int tw_legacy_sys_open(const char *dir, const char *node, int64_t start_us,
                       uint64_t max_bytes, tw_legacy_sys **out, char *err,
                       size_t errlen);

/* Appends n samples (series indexes into series) in their minute's file. */
void tw_legacy_sys_write(tw_legacy_sys *w, const tw_batch_series *series,
                         const tw_sample *samples, size_t n);

/* Renames the open file into place, leaves DIR/.writers and writes the
 * end marker when last; frees w. stats (may be NULL) gets the counts. */
void tw_legacy_sys_close(tw_legacy_sys *w, int64_t end_us,
                         tw_legacy_sys_stats *stats);

#endif
