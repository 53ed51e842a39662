/*
 * reader_debug.h - reads a legacy debug-output folder (the reference's
 * tensor layout, DEBUG_RULES.md §6: index/, events/, collections/,
 * training_job_end.ts) and hands each saved tensor to a callback as a
 * tw_tensor (plugins/include/trainwatch/plugin.h), with the reductions the
 * debugging rules need derived from full tensors (debug_reduce.h) and the
 * reductions the writer stored (tags `smdebug/reductions/<op>/<name>`,
 * §5.8) attached to their tensor under `<op>` (as written: the reference's
 * hook computes std/variance in torch's unbiased form).
 *
 * Streaming: index files are taken in lexical order (= step order, then
 * worker), one at a time; each names its step's event file, whose records
 * are read at the index's offsets. Per (step, worker), tensors come in the
 * order of their first index entry; the only state kept across steps is
 * the previous saved values of each (worker, tensor) for update_l2.
 *
 * Bad input never stops the read: an index, collections or event file
 * that cannot be read or parsed, a record with a bad length, CRC, varint,
 * dtype or element count is reported through `on_error` with the file and
 * the byte offset, counted, and skipped; the rest of the folder is read.
 *
 * Wiring into a job (eval/replay): one call of tw_debug_folder_read with a
 * callback that appends each tw_tensor (copying what it keeps: strings
 * and arrays are valid only during the callback) to the job's tensors.
 */
#ifndef TW_READER_DEBUG_H
#define TW_READER_DEBUG_H

#include <stddef.h>
#include <stdint.h>

#include "trainwatch/plugin.h"

typedef struct tw_debug_counts {
    uint64_t index_files;      /* index files read                       */
    uint64_t bad_files;        /* index/collections/event files rejected */
    uint64_t records;          /* event records decoded                  */
    uint64_t bad_records;      /* records rejected                       */
    uint64_t unsupported;      /* records of dtypes without reductions   */
    uint64_t tensors;          /* tw_tensor records handed out           */
    uint64_t crc_footers;      /* records with a real payload CRC footer */
    uint64_t constant_footers; /* records with the reference's constant */
} tw_debug_counts;

/* Returns non-zero to stop the read (TW_ERR from the reader). */
typedef int (*tw_debug_tensor_fn)(void *ctx, const tw_tensor *t);
/* One sentence: "<path>: offset N: what" (offset when it applies). */
typedef void (*tw_debug_error_fn)(void *ctx, const char *msg);

typedef struct tw_debug_opts {
    double threshold_inactivity; /* DeadRelu's, percent; 0: the default 1.0 */
    size_t raw_max; /* hand out raw values of tensors with at most this
                       many elements (0: none)                         */
} tw_debug_opts;

/* 1 when dir looks like a debug-output folder: it has an index/ folder
 * and an events/ or collections/ folder. */
int tw_debug_folder_detect(const char *dir);

/* Reads the folder. TW_OK when it was read (bad input inside is counted,
 * not fatal), TW_ERR with a sentence when the folder cannot be listed or
 * on_tensor stopped the read. opts may be NULL; on_error may be NULL. */
int tw_debug_folder_read(const char *dir, const tw_debug_opts *opts,
                         tw_debug_tensor_fn on_tensor,
                         tw_debug_error_fn on_error, void *ctx,
                         tw_debug_counts *counts, char *err, size_t errlen);

#endif /* TW_READER_DEBUG_H */
