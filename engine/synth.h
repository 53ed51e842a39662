/*
 * synth.h - writes realistic profiler-output folders in the agent's exact
 * on-disk layout (RULES.md §1.1), with planted pathologies, deterministic
 * by seed. Used by the demo, the tests and the benchmarks.
 */
#ifndef TW_SYNTH_H
#define TW_SYNTH_H

#include <stddef.h>
#include <stdint.h>

typedef struct tw_synth_opts {
    const char *out_dir;      /* created if missing; must be empty       */
    const char *preset;       /* "healthy", "low_gpu", "gpu_fluctuation",
                                 "cpu_bottleneck", ... (tw_synth_presets) */
    uint32_t nodes;           /* algo-1 .. algo-N                        */
    uint32_t cores;           /* per node                                */
    uint32_t gpus;            /* per node; 0 = CPU-only job              */
    double duration_s;        /* of event time                           */
    uint32_t interval_ms;     /* sampling interval (agent default 500)   */
    uint64_t seed;
    int64_t start_us;         /* job start, epoch µs (a fixed default)   */
    int framework;            /* also write framework/pevents traces     */
} tw_synth_opts;

/* Defaults: 1 node, 4 cores, 1 GPU, 600 s, 500 ms, seed 1, framework on. */
void tw_synth_opts_default(tw_synth_opts *o);

/* NULL-terminated list of preset names and a one-line description each. */
const char *const *tw_synth_presets(void);
const char *tw_synth_preset_help(const char *preset);

typedef struct tw_synth_stats {
    uint64_t files;
    uint64_t samples;
    uint64_t events;
    uint64_t bytes;
} tw_synth_stats;

int tw_synth_write(const tw_synth_opts *o, tw_synth_stats *stats, char *err,
                   size_t errlen);

#endif /* TW_SYNTH_H */
