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
 *
 * Which files are listed (RULES.md §1.1, with these decisions):
 *  - System files: the base name is exactly `<10 digits>.algo-<digits>.json`.
 *    The reference accepts a path matching the Python regex
 *    `.+/system/.+/(\d{10}).algo-\d+.json` with re.match (anchored at the
 *    start only, dots unescaped). Here the name is matched whole with
 *    literal dots, so a `.json.tmp` or `.json.corrupt` beside it is not
 *    read, and - an extension - the file may sit anywhere under root, also
 *    directly in it or outside a `system/` folder, so `eval` works on a
 *    folder of loose system files.
 *  - Framework "pevents" files: the path contains `pevents`, the name ends
 *    in `.json`, its `_`-separated fields are >= 3, the first is all digits
 *    (the file timestamp, µs) and the name ends in a known suffix
 *    (pythontimeline.json, model_timeline.json, horovod_timeline.json,
 *    smdataparallel_timeline.json); others are ignored. Node id = second
 *    field, `<x>-algo<y>` rewritten to `algo<y>-<x>` (at the first `-algo`
 *    with a non-empty x).
 *  - TF profiler traces: the path contains `tensorflow/detailed_profiling`
 *    and the name ends in `trace.json.gz`. Node id = the name up to its
 *    first `.`. The step folder (four levels up) is searched recursively
 *    for `<node>_<start_us>_<end_us>.metadata` (the smallest such path when
 *    there are several); it gives file_ts_us = end_us and base_time_us =
 *    start_us. Without it (has_metadata == 0) both are 0, as the reference's
 *    lookup yields; the read then reports the missing metadata once (line
 *    0, counted in incomplete_files) and reads the events with base time 0.
 *  - PyTorch profiler traces (torch.profiler / export_chrome_trace): names
 *    ending in `.pt.trace.json` or `.pt.trace.json.gz`, anywhere under
 *    root; root itself may be one such file, whatever its name. Each is
 *    read once when listed (tw_torch_describe: no events kept) to find its
 *    time base (tw_torch_anchor), the raw ts range of its X events and the
 *    node (`rank-<R>` from Kineto's distributedInfo, else the name up to
 *    its first `.`). file_ts_us = the absolute end of its newest event;
 *    it counts towards first_framework_ts_us from its oldest event. Read
 *    with source PYTHONTIMELINE, without the per-source state: only X
 *    events; ProfilerStep#N -> name and phase Step:ModeKeys.TRAIN, args
 *    {step_num: "N"}; others -> cpu_functions or gpu_functions-dev:<n>.
 *  - The whole of root is walked (the reference walks root/system and
 *    root/framework), each folder's entries in name order. Symbolic links
 *    to files and to folders are followed (an agent's hour folder may be a
 *    link to another disk). Each folder is walked once, known by device
 *    and inode: one that is an ancestor on the current path (a symbolic
 *    link loop) or was already walked through another path is skipped and
 *    recorded as a problem, so a loop ends and no file is listed twice.
 *  - Nothing is skipped silently: a folder that cannot be opened or read
 *    (EACCES, EIO, ...), a symbolic link that cannot be followed, a loop,
 *    a folder reached twice and one nested deeper than TW_LIST_MAX_DEPTH
 *    each become a tw_dir_problem of the listing (path and reason, with
 *    the errno text), counted in unreadable_dirs or skipped_dirs. The
 *    listing still succeeds: the caller reports them (WARN) and counts.
 *
 * Reading decisions:
 *  - System lines: blank lines are skipped (neither counted nor reported).
 *    Duplicate keys: the last wins, as in Python's json. Samples keep the
 *    exact double of Timestamp; Value is a double with TW_SAMPLE_INTEGRAL
 *    when written without '.', 'e', 'E'. NaN/Infinity tokens are not JSON
 *    and make the line bad.
 *  - Trace files: the top level is an array of events, or an object whose
 *    "traceEvents" member is that array (TF profiler). Events are split out
 *    one by one, so a bad event spoils only itself, and a file cut off in
 *    the middle (a writer still writing) yields its complete events and one
 *    report "truncated ..." at the line where the cut event starts (counted
 *    in incomplete_files, not in bad_files). Events without "ph" (such as
 *    the `{}` closing TF traces) are ignored silently, as the reference does.
 *  - Times: ts/dur written as integers are added exactly (int64); when
 *    either is written with a fraction (TF traces: 1159.929) start_us =
 *    base + llround(ts) and end_us = base + llround(ts + dur).
 *  - B/E pairs (per source type, per pid stack, persisting across files like
 *    the base time): the event's phase is "" and its tid is the B's tid when
 *    the E has a "tid" (else 0): the reference builds these events that way.
 *    An E with no open B, and a pair with a negative duration, are dropped
 *    and reported as bad events (the reference logs both).
 *  - pid/tid: integers, or strings holding one. An X/B/E event without a
 *    usable pid, ts (or dur for X) or name is a bad event.
 *  - seq of every batch is 0: sequence numbers are assigned by whoever
 *    publishes the batches (replay), not by the reader.
 */
#ifndef TW_READER_H
#define TW_READER_H

#include <stddef.h>
#include <stdint.h>

#include "batch.h"

typedef enum tw_file_kind {
    TW_FILE_SYSTEM = 0, /* system/incremental/.../<epoch>.algo-N.json   */
    TW_FILE_FRAMEWORK   /* framework/pevents/... or TF profiler traces  */
} tw_file_kind;

/* How a PyTorch profiler trace's relative ts became absolute time. */
typedef enum tw_torch_anchor {
    TW_TORCH_BASE = 0, /* Kineto's baseTimeNanoseconds + ts              */
    TW_TORCH_EPOCH,    /* ts already µs since the epoch (older Kineto)   */
    TW_TORCH_MTIME,    /* relative ts: the file's mtime is the end of
                          its newest event                               */
    TW_TORCH_GIVEN     /* relative ts: ts 0 is the time given by the user
                          (tw_folder_anchor_traces, --trace-start)       */
} tw_torch_anchor;

typedef struct tw_agent_file {
    char *path; /* owned by the listing */
    tw_file_kind kind;
    tw_source source;   /* framework files only */
    int64_t file_ts_us; /* from the name (or the TF .metadata sibling) */
    int64_t feed_key_us;
    char *node; /* node id as the reference derives it */
    /* TF profiler traces only: start_us of the .metadata sibling, injected
     * as the base time before the file's first event; has_metadata == 0
     * when no usable .metadata file was found (base_time_us is then 0). */
    int64_t base_time_us;
    int has_metadata;
    /* PyTorch profiler traces (torch.profiler / export_chrome_trace), read
     * once when listed: absolute time = torch_offset_us + ts (µs), how the
     * offset was found, and the raw ts range of the X events. */
    int torch;
    tw_torch_anchor torch_anchor;
    int64_t torch_offset_us;
    int64_t torch_min_ts_us, torch_max_end_us;
    int64_t torch_mtime_us;
} tw_agent_file;

/* A folder (or link) the listing did not walk, and why. */
typedef enum tw_dir_problem_kind {
    TW_DIR_UNREADABLE = 0, /* opendir/readdir/stat failed (errno in reason) */
    TW_DIR_LOOP,           /* a symbolic link back to an ancestor folder  */
    TW_DIR_REPEAT,         /* the same folder reached through another path */
    TW_DIR_TOO_DEEP        /* nested deeper than TW_LIST_MAX_DEPTH         */
} tw_dir_problem_kind;

typedef struct tw_dir_problem {
    tw_dir_problem_kind kind;
    char *path;   /* owned by the listing */
    char *reason; /* a sentence, owned by the listing */
} tw_dir_problem;

#define TW_LIST_MAX_DEPTH 64

typedef struct tw_folder {
    char *root;
    tw_agent_file *files; /* in feed order */
    size_t nfiles;
    /* RULES.md §1.4, from file names: 0 when there is no such file. */
    int64_t first_system_ts_us, latest_system_ts_us;
    int64_t first_framework_ts_us, latest_framework_ts_us;
    int job_finished; /* a training_job_end.ts marker exists */
    /* Folders not walked, in walk order; unreadable_dirs counts the
     * TW_DIR_UNREADABLE ones, skipped_dirs the others. */
    tw_dir_problem *problems;
    size_t nproblems;
    uint64_t unreadable_dirs, skipped_dirs;
} tw_folder;

/* Most samples (system) or events (trace) in one batch. */
#define TW_READER_BATCH_MAX 65536u

typedef struct tw_reader_stats {
    uint64_t files;
    uint64_t bad_files;
    uint64_t lines; /* system lines / trace events looked at */
    uint64_t bad_lines;
    uint64_t samples;
    uint64_t events;
    uint64_t bytes;            /* bytes parsed (after gzip decompression) */
    uint64_t incomplete_files; /* read in part: truncated traces, TF traces
                                  without .metadata (also reported)      */
} tw_reader_stats;

/* Called for every bad line / event / file. line == 0: the whole file. */
typedef void (*tw_reader_error_fn)(void *ud, const char *path, uint64_t line,
                                   const char *reason);
/* Receives ownership of each batch. Return TW_OK to go on. */
typedef int (*tw_batch_sink_fn)(void *ud, tw_batch *batch);

/* Lists `root` (a profiler-output folder). On success *out is owned by the
 * caller (tw_folder_free). Fails, with a sentence in err, when root does
 * not exist or is not a folder, or on out-of-memory. An empty folder is not
 * an error; folders below root that could not be walked are recorded in
 * problems (see above), root itself unreadable is one of them.
 * Feed order: feed_key_us (= file_ts_us for both kinds), then system before
 * framework, then system by path (strcmp), framework by source type then
 * path. first/latest timestamps: min/max over the listed files of each
 * kind; framework files with file_ts_us == 0 (TF traces without metadata)
 * are left out of them, as in RULES.md §1.4. job_finished: root/system/ or
 * root/framework/ holds training_job_end.ts. */
int tw_folder_list(const char *root, tw_folder **out, char *err, size_t errlen);
void tw_folder_free(tw_folder *f);

/* Anchors every PyTorch trace of the listing whose ts are relative (no
 * Kineto base time, TW_TORCH_MTIME) at start_us: ts 0 is start_us. The
 * feed order and first/latest timestamps are recomputed. */
void tw_folder_anchor_traces(tw_folder *f, int64_t start_us);

/* Framework trace parsing keeps per-source state across files (the base
 * time and pid -> phase bindings, RULES.md §1.3): one tw_trace_state per
 * folder read, passed to every call. */
typedef struct tw_trace_state tw_trace_state;
/* NULL on out-of-memory. The state owns copies of everything it keeps. */
tw_trace_state *tw_trace_state_new(void);
void tw_trace_state_free(tw_trace_state *s);

/* Reads one file of the listing into batches for job `job` (copied; may be
 * NULL). Each batch carries file_ts_us and file_path; a system file yields
 * one batch per NodeId it contains, in order of first appearance, and a
 * further batch whenever one holds TW_READER_BATCH_MAX samples; a trace
 * file yields one batch per TW_READER_BATCH_MAX events (none when it has no
 * events). The sink owns each batch it receives, also when it fails.
 * on_error may be NULL; stats may be NULL. A file that cannot be opened is
 * reported (line 0) and counted in bad_files, and is not an error of this
 * call. Returns TW_ERR only when the sink fails or on out-of-memory; bad
 * input is reported through on_error and counted. */
int tw_folder_read_file(const tw_agent_file *file, const char *job,
                        tw_trace_state *ts, tw_batch_sink_fn sink, void *ud,
                        tw_reader_error_fn on_error, void *err_ud,
                        tw_reader_stats *stats);

#endif /* TW_READER_H */
