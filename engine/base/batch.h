/*
 * batch.h - the in-memory form of one batch of events from one node of one
 * job: what the wire decoder (wire.h) and the agent-file readers (reader.h)
 * both produce, and what the job pipeline (job.h) consumes.
 *
 * Ownership: a tw_batch owns everything it points to through its arena.
 * tw_batch_free() releases all of it; nothing inside may be freed alone.
 */
#ifndef TW_BATCH_H
#define TW_BATCH_H

#include <stddef.h>
#include <stdint.h>

#include "arena.h"
#include "trainwatch/plugin.h"

#ifdef __cplusplus
extern "C" {
#endif

/* One entry of the batch's series dictionary. Samples refer to it by
 * index (tw_sample.series is a batch-local index here). */
typedef struct tw_batch_series {
    const char *type;
    const char *name; /* NULL when the agent wrote null */
    const char *dimension;
} tw_batch_series;

typedef enum tw_marker_kind {
    TW_MARKER_NONE = 0,
    TW_MARKER_JOB_START, /* with the profiler configuration        */
    TW_MARKER_JOB_END    /* job finished / hook closed             */
} tw_marker_kind;

typedef struct tw_marker {
    tw_marker_kind kind;
    int64_t time_us;               /* when it happened                 */
    uint32_t sampling_interval_ms; /* JOB_START: the agent's interval  */
    int64_t latest_us; /* JOB_END: the job's latest timestamp L (RULES.md
                          §1.4) as the file listing gives it; 0 = unknown
                          (the engine then derives L from the data)      */
    const char *profiler_config; /* JOB_START from the training hook: its
                          ProfilerConfig as JSON (profiler_config.h);
                          NULL when absent                               */
} tw_marker;

typedef struct tw_batch {
    tw_arena arena; /* owns every pointer below */

    const char *job;
    const char *node;      /* node id of the producer (system or framework) */
    uint64_t seq;          /* per (job, node), strictly increasing           */
    int64_t file_ts_us;    /* timestamp of the agent file these events came
                              from (0 = unknown); orders batches as the
                              reference orders files (RULES.md §1.5)        */
    const char *file_path; /* the agent file's path, or NULL               */

    tw_batch_series *series;
    size_t nseries;

    tw_sample *samples; /* .series indexes this->series */
    size_t nsamples;

    tw_fw_event *events; /* .node points into the arena too */
    size_t nevents;

    tw_marker *markers;
    size_t nmarkers;

    /* The hook's Python profiles (metrics.fbs PythonProfile): verified
     * and counted, not decoded, since no rule reads them yet. */
    size_t npython_profiles;

    /* The hook's debugging tensors (metrics.fbs TensorRecord), in wire
     * order; node is the batch's node, every string and array is in the
     * arena. NULL/0 when the batch has none. */
    tw_tensor *tensors;
    size_t ntensors;
} tw_batch;

/* An empty batch with a fresh arena. Never fails except on OOM (NULL). */
tw_batch *tw_batch_new(void);
void tw_batch_free(tw_batch *b);

/* A copy of a batch that holds only samples (no events, markers, tensors
 * or Python profiles): job, node, seq, file_ts_us, file_path and the
 * samples, in one block of exactly their size, without the series
 * dictionary. For buffering once the job has mapped the samples' series to
 * its own ids: the dictionary is then dead weight, and most of a decoded
 * agent batch. NULL when b holds anything else, or on out-of-memory (keep
 * b then). */
tw_batch *tw_batch_samples_copy(const tw_batch *b);

/* As tw_batch_samples_copy, but instead of the samples `extra` bytes of
 * the arena's one block are left for the caller (nsamples 0): a packed
 * form of the samples (sample_pack.h). *extra_at receives them (NULL when
 * extra is 0). */
tw_batch *tw_batch_shell_copy(const tw_batch *b, size_t extra,
                              uint8_t **extra_at);

#ifdef __cplusplus
}
#endif

#endif /* TW_BATCH_H */
