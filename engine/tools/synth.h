/*
 * synth.h - writes realistic profiler-output folders in the agent's exact
 * on-disk layout (RULES.md §1.1), with planted pathologies, deterministic
 * by seed. Used by the demo, the tests and the benchmarks.
 *
 * Layout written under out_dir:
 *   system/incremental/<YYYYMMDDHH>/<minute_s>.algo-<n>.json   JSON lines
 *   framework/pevents/<YYYYMMDDHH>/<end_us>_<rank>-algo-<n>_pythontimeline.json
 *   system/training_job_end.ts, framework/training_job_end.ts   (epoch s)
 * docs/synth.md describes every preset, the numbers it plants and which
 * rules fire on it.
 *
 * Ownership: every pointer in tw_synth_opts is owned by the caller and only
 * read during the call; the generator keeps nothing after it returns. The
 * strings returned by tw_synth_presets()/tw_synth_preset_help() are static.
 */
#ifndef TW_SYNTH_H
#define TW_SYNTH_H

#include <stddef.h>
#include <stdint.h>

/* For nodes/cores/gpus: "use the preset's default" (tw_synth_opts_resolve). */
#define TW_SYNTH_AUTO UINT32_MAX

typedef struct tw_synth_stats {
    uint64_t files;   /* files written (system, trace, end markers)      */
    uint64_t samples; /* system metric lines                             */
    uint64_t events;  /* framework trace events of phase "X"             */
    uint64_t bytes;   /* bytes written in all files                      */
} tw_synth_stats;

/* Progress report: fraction done in [0, 1] and the counts so far. Called
 * from the writing thread about once per written minute of system data
 * and once per trace file; it must not call back into the generator. */
typedef void (*tw_synth_progress_fn)(void *ctx, double fraction,
                                     const tw_synth_stats *so_far);

typedef struct tw_synth_opts {
    const char *out_dir;  /* created if missing; must be empty       */
    const char *preset;   /* "healthy", "low_gpu", "gpu_fluctuation",
                             "cpu_bottleneck", ... (tw_synth_presets) */
    uint32_t nodes;       /* algo-1 .. algo-N; TW_SYNTH_AUTO = preset */
    uint32_t cores;       /* per node; TW_SYNTH_AUTO = preset        */
    uint32_t gpus;        /* per node; 0 = CPU-only job;
                             TW_SYNTH_AUTO = preset                  */
    double duration_s;    /* of event time; 0 = the preset's default,
                             long enough for its rule's patience     */
    uint32_t interval_ms; /* sampling interval (agent default 500);
                             one of 100, 200, 500, 1000, 5000, 60000 */
    uint64_t seed;
    int64_t start_us; /* job start, epoch µs (a fixed default)   */
    int framework;    /* also write framework/pevents traces     */
    /* Shapes for differential testing (docs/synth.md, "Shapes"):      */
    uint32_t ranks_per_node; /* trace writers per node (1..8; default 1) */
    int pids_per_rank;       /* 0: every rank of every node uses the same
                                pids; 1: rank r's pids are offset         */
    double step_s;           /* TRAIN step length; 0 = the preset's      */
    uint32_t eval_every;     /* TRAIN steps between EVAL passes; 0 = none;
                                default 600                             */
    double rotate_s;         /* a trace file spans this much event-end time
                                (default 60, the agent's close interval) */
    int aligned_samples;     /* rounds exactly on the interval grid from
                                the minute start: samples on scan bounds */
    int missing_gpu_series;  /* algo-1 writes no GPUUtilization for its
                                last GPU                                */
    uint32_t detailed_steps; /* TRAIN steps 5 .. 5+N-1 also get detailed
                                profiling events (cpu_functions,
                                gpu_functions-dev:0); 0 = none        */
    int horovod;             /* also Horovod timelines: B/E pairs of
                                two tensors' allreduces per TRAIN step */
    double final_s;          /* a finalization phase: the job's last
                                final_s seconds have no steps and idle
                                GPUs (saving the model); 0 = none      */
    tw_synth_progress_fn progress; /* optional, NULL = silent            */
    void *progress_ctx;            /* passed to progress                 */
} tw_synth_opts;

/* Defaults: preset "healthy", nodes/cores/gpus TW_SYNTH_AUTO (1 node,
 * 4 cores, 1 GPU for most presets), duration 0 (600 s for healthy, 720 s
 * for most planted presets at 500 ms), 500 ms, seed 1, start
 * 1700000000 s (2023-11-14T22:13:20Z, deliberately not minute-aligned),
 * framework on, no progress callback. out_dir is NULL. */
void tw_synth_opts_default(tw_synth_opts *o);

/* NULL-terminated list of preset names. */
const char *const *tw_synth_presets(void);
/* What the preset plants and which rules should fire on it (defaults of
 * RULES.md); NULL for an unknown name. */
const char *tw_synth_preset_help(const char *preset);

/* 1 if ms is a sampling interval the agent accepts, else 0. */
int tw_synth_interval_valid(uint32_t ms);

/* Validates o (preset known, ranges, interval, start so that file names
 * keep 10-digit epoch seconds, preset requirements such as "needs GPUs")
 * and replaces TW_SYNTH_AUTO / duration 0 by the preset's defaults.
 * Returns 0, or -1 with a sentence naming the option and value in err.
 * out_dir is not checked here. */
int tw_synth_opts_resolve(tw_synth_opts *o, char *err, size_t errlen);

/* Writes the folder. out_dir must not exist or be an empty directory.
 * stats (optional) receives the totals. Returns 0, or -1 with a sentence
 * naming what failed (option, path, errno text) in err. A failed run may
 * leave a partial folder behind. */
int tw_synth_write(const tw_synth_opts *o, tw_synth_stats *stats, char *err,
                   size_t errlen);

#endif /* TW_SYNTH_H */
