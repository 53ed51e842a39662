/*
 * reader_prefetch.h - reads a folder listing's files on worker threads,
 * ahead of a consumer that takes them in listing order.
 *
 * Each file is read whole into its own list of batches, bad-input reports
 * and stats; the consumer (tw_prefetch_feed) replays them in feed order, so
 * what it sees - batches, reports, counts - is what tw_folder_read_file
 * called file by file would give. System files are read on any worker at
 * the same time; framework trace files share per-source state across files
 * (reader.h, tw_trace_state), so each waits until the one before it is read
 * (they still run beside the system files). Workers stay at most `window`
 * files ahead of the consumer: memory is bounded by the window, not by the
 * folder's size.
 */
#ifndef TW_READER_PREFETCH_H
#define TW_READER_PREFETCH_H

#include <stddef.h>

#include "reader.h"

typedef struct tw_prefetch tw_prefetch;

/* Starts nthreads (>= 1) workers over folder (which must outlive the
 * prefetch), reading for job `job` (copied; may be NULL) at most window
 * (>= 1) files ahead of the consumer. TW_ERR with a sentence in err when
 * memory or a thread cannot be had. */
int tw_prefetch_start(const tw_folder *folder, const char *job,
                      unsigned nthreads, size_t window, tw_prefetch **out,
                      char *err, size_t errlen);

/* Waits for file i (called for i = 0, 1, 2, ... in turn), then replays its
 * bad-input reports to on_error (may be NULL), adds its counts to stats and
 * hands its batches, in order, to sink. Returns TW_ERR when the sink fails
 * (the file's remaining batches are freed) or the read ran out of memory. */
int tw_prefetch_feed(tw_prefetch *p, size_t i, tw_batch_sink_fn sink, void *ud,
                     tw_reader_error_fn on_error, void *err_ud,
                     tw_reader_stats *stats);

/* Stops the workers (each finishes the file it reads), joins them and frees
 * every batch not fed. NULL is allowed. */
void tw_prefetch_free(tw_prefetch *p);

#endif /* TW_READER_PREFETCH_H */
