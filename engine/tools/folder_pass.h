/*
 * folder_pass.h - one pass over a profiler-output folder's files through
 * the agent-file readers (reader.h), for the offline tools that read a
 * folder more than once (`stats`, `timeline`). Each pass has its own
 * trace state (base times, pid -> phase bindings), as a fresh read does.
 *
 * Bad input is reported on stderr as `<what>: FILE:LINE: reason` (the
 * first 20 per pass, then one line saying the rest are only counted) and
 * counted in the pass's tw_reader_stats; it never stops the pass.
 */
#ifndef TW_FOLDER_PASS_H
#define TW_FOLDER_PASS_H

#include "reader.h"

/* Which files a pass reads. */
enum { TW_PASS_SYSTEM = 1, TW_PASS_FRAMEWORK = 2 };

/* Reads every file of `folder` whose kind is in `kinds`, in listing
 * order, handing each batch to sink (which owns it). `what` names the
 * command in messages; quiet: no bad-input messages. stats may be NULL.
 * TW_ERR (with a sentence in err) only when the sink fails or on
 * out-of-memory. */
int tw_folder_pass(const tw_folder *folder, unsigned kinds, const char *what,
                   int quiet, tw_batch_sink_fn sink, void *ud,
                   tw_reader_stats *stats, char *err, size_t errlen);

#endif /* TW_FOLDER_PASS_H */
