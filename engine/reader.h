/*
 * reader.h - reads the profiler agent's on-disk output (a `profiler-output`
 * folder, RULES.md §1.1) into tw_batch objects, the same in-memory events
 * the wire decoder produces.
 *
 * Usage: tw_folder_list() finds and orders the files; tw_folder_read_file()
 * turns one file into batches handed to a sink. Files are listed in the
 * order the engine should feed them: by `feed_key_us` (system files: the
 * minute they start; framework files: their end timestamp), ties broken by
 * the reference's order (RULES.md §1.5).
 *
 * Bad input: a bad line (system JSON lines) or a bad event (trace files) is
 * reported through the error callback with the file and line number, and
 * counted; good lines of the same file still count. A file that cannot be
 * parsed at all is reported once and counted in bad_files.
 */
#ifndef TW_READER_H
#define TW_READER_H

#include <stddef.h>
#include <stdint.h>

#include "batch.h"

typedef enum tw_file_kind {
    TW_FILE_SYSTEM = 0,  /* system/incremental/.../<epoch>.algo-N.json   */
    TW_FILE_FRAMEWORK    /* framework/pevents/... or TF profiler traces  */
} tw_file_kind;

typedef struct tw_agent_file {
    char *path;         /* owned by the listing */
    tw_file_kind kind;
    tw_source source;   /* framework files only */
    int64_t file_ts_us; /* from the name (or the TF .metadata sibling) */
    int64_t feed_key_us;
    char *node;         /* node id as the reference derives it */
} tw_agent_file;

typedef struct tw_folder {
    char *root;
    tw_agent_file *files; /* in feed order */
    size_t nfiles;
    /* RULES.md §1.4, from file names: 0 when there is no such file. */
    int64_t first_system_ts_us, latest_system_ts_us;
    int64_t first_framework_ts_us, latest_framework_ts_us;
    int job_finished; /* a training_job_end.ts marker exists */
} tw_folder;

typedef struct tw_reader_stats {
    uint64_t files;
    uint64_t bad_files;
    uint64_t lines;     /* system lines / trace events looked at */
    uint64_t bad_lines;
    uint64_t samples;
    uint64_t events;
    uint64_t bytes;
} tw_reader_stats;

/* Called for every bad line / event / file. line == 0: the whole file. */
typedef void (*tw_reader_error_fn)(void *ud, const char *path, uint64_t line,
                                   const char *reason);
/* Receives ownership of each batch. Return TW_OK to go on. */
typedef int (*tw_batch_sink_fn)(void *ud, tw_batch *batch);

/* Lists `root` (a profiler-output folder). On success *out is owned by the
 * caller (tw_folder_free). Fails, with a sentence in err, when root does
 * not exist or is not a folder. An empty folder is not an error. */
int tw_folder_list(const char *root, tw_folder **out, char *err, size_t errlen);
void tw_folder_free(tw_folder *f);

/* Framework trace parsing keeps per-source state across files (the base
 * time and pid -> phase bindings, RULES.md §1.3): one tw_trace_state per
 * folder read, passed to every call. */
typedef struct tw_trace_state tw_trace_state;
tw_trace_state *tw_trace_state_new(void);
void tw_trace_state_free(tw_trace_state *s);

/* Reads one file of the listing into batches for job `job` (copied). Each
 * batch carries file_ts_us and file_path; a system file yields one batch
 * per NodeId it contains. Returns TW_ERR only when the sink fails or on
 * out-of-memory; bad input is reported through on_error and counted. */
int tw_folder_read_file(const tw_agent_file *file, const char *job,
                        tw_trace_state *ts, tw_batch_sink_fn sink, void *ud,
                        tw_reader_error_fn on_error, void *err_ud,
                        tw_reader_stats *stats);

#endif /* TW_READER_H */
