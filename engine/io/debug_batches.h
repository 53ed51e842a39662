/*
 * debug_batches.h - a legacy debug-output folder (reader_debug.h) as the
 * engine's batches: one tw_batch per (worker, step), in the folder's
 * order, its tensors deep-copied into the batch's arena, node = the
 * worker, seq counting from 1 per folder. `eval` feeds them to a job and
 * `replay` sends them, as the training hook sends its records.
 *
 * Ownership: each batch is the sink's (tw_batch_free), also when the sink
 * fails.
 */
#ifndef TW_DEBUG_BATCHES_H
#define TW_DEBUG_BATCHES_H

#include <stdint.h>

#include "batch.h"
#include "reader.h"
#include "reader_debug.h"

/* What the folder held, for choosing rules and markers. */
typedef struct tw_debug_summary {
    int losses, eval_losses, gradients, weights, relu_output, update_l2;
    int input_images;          /* tensors of input_image with channel sums */
    int64_t first_us, last_us; /* tensors' wall times; 0 when none */
    uint64_t batches;
    tw_debug_counts counts;
} tw_debug_summary;

/* Reads dir and hands each batch to sink (job = the batches' job id).
 * TW_ERR with a sentence in err when the folder cannot be read, on
 * out-of-memory, or when the sink returned non-zero. */
int tw_debug_folder_batches(const char *dir, const char *job,
                            tw_batch_sink_fn sink, void *ud,
                            tw_debug_error_fn on_error, void *errud,
                            tw_debug_summary *out, char *err, size_t errlen);

#endif /* TW_DEBUG_BATCHES_H */
