/*
 * cmd_synth.c - `trainwatch synth OUT_DIR [options]`: write a generated
 * profiler-output folder (synth.h) with a planted problem.
 *
 * Exit status: 0 written, 1 the write failed, 2 usage error (bad option or
 * value, OUT_DIR not empty).
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "cli_options.h"
#include "clock.h"
#include "commands.h"
#include "synth.h"
#include "tw_assert.h"

enum {
    OPT_PRESET = 1,
    OPT_NODES,
    OPT_CORES,
    OPT_GPUS,
    OPT_DURATION,
    OPT_INTERVAL,
    OPT_SEED,
    OPT_START,
    OPT_NO_FRAMEWORK,
    OPT_RANKS_PER_NODE,
    OPT_PIDS,
    OPT_STEP_MS,
    OPT_EVAL_EVERY,
    OPT_ROTATE_S,
    OPT_ALIGNED_SAMPLES,
    OPT_MISSING_GPU_SERIES,
    OPT_DETAILED_STEPS,
    OPT_FINAL_S,
    OPT_HOROVOD,
    OPT_LIST_PRESETS
};

static const tw_cli_option tw_synth_options[] = {
    {"preset", 0, "NAME",
     "what to plant (default: healthy); see --list-presets", OPT_PRESET},
    {"nodes", 0, "N",
     "nodes algo-1..algo-N, 1..4096 (default: the preset's, 1; straggler 4)",
     OPT_NODES},
    {"cores", 0, "N",
     "CPU cores per node, 1..1024 (default: the preset's, 4; dataloader 16)",
     OPT_CORES},
    {"gpus", 0, "N",
     "GPUs per node, 0..64, 0 = CPU-only job (default: the preset's, 1; "
     "load_imbalance 4)",
     OPT_GPUS},
    {"duration", 0, "D",
     "event time to generate: seconds, or with a suffix s, m, h (e.g. 900, "
     "30m, 2h, 1.5h) (default: the preset's, long enough for its rule's "
     "patience: 600 s healthy, 720 s most, 1000 s gpu_memory_growth, 1800 s "
     "slow_init; scaled up for intervals above 500 ms)",
     OPT_DURATION},
    {"interval-ms", 0, "MS",
     "sampling interval: 100, 200, 500, 1000, 5000 or 60000 (default: 500)",
     OPT_INTERVAL},
    {"seed", 0, "N", "seed of the generator, 0..2^64-1 (default: 1)", OPT_SEED},
    {"start", 0, "EPOCH_S",
     "job start, epoch seconds (default: 1700000000 = 2023-11-14T22:13:20Z)",
     OPT_START},
    {"no-framework", 0, NULL,
     "write system metrics only (default: also framework traces)",
     OPT_NO_FRAMEWORK},
    {"ranks-per-node", 0, "N",
     "trace writers (training processes) per node, 1..8 (default: 1)",
     OPT_RANKS_PER_NODE},
    {"pids", 0, "shared|per-rank",
     "shared: every rank of every node has the same pids (default); "
     "per-rank: each rank of a node its own",
     OPT_PIDS},
    {"step-ms", 0, "MS",
     "TRAIN step length in ms, 1..600000 (default: the preset's, 250)",
     OPT_STEP_MS},
    {"eval-every", 0, "N",
     "TRAIN steps between EVAL passes of 30 steps, 0 = none (default: 600)",
     OPT_EVAL_EVERY},
    {"rotate-s", 0, "S",
     "a trace file is closed when it spans S seconds of event ends, 1..3600 "
     "(default: 60)",
     OPT_ROTATE_S},
    {"aligned-samples", 0, NULL,
     "sampling rounds exactly on the interval grid, so samples fall on "
     "minute (scan) boundaries (default: offset, never on a boundary)",
     OPT_ALIGNED_SAMPLES},
    {"missing-gpu-series", 0, NULL,
     "algo-1 writes no GPUUtilization series for its last GPU",
     OPT_MISSING_GPU_SERIES},
    {"detailed-steps", 0, "N",
     "detailed profiling of TRAIN steps 5..5+N-1: each module's operator "
     "(phase cpu_functions) and GPU kernel (gpu_functions-dev:0) (default: 0)",
     OPT_DETAILED_STEPS},
    {"horovod", 0, NULL,
     "also write each rank's Horovod timeline (*_horovod_timeline.json: B/E "
     "pairs, two tensors negotiated and all-reduced in every TRAIN step)",
     OPT_HOROVOD},
    {"final-s", 0, "S",
     "a finalization phase: the job's last S seconds have no steps and idle "
     "GPUs (the model being saved), 0..86400 (default: 0, none)",
     OPT_FINAL_S},
    {"list-presets", 0, NULL,
     "list the presets, what each plants and which rules fire, then exit",
     OPT_LIST_PRESETS},
    {NULL, 0, NULL, NULL, 0}};

static const tw_cli_command tw_synth_command = {
    .name = "synth",
    .synopsis = "OUT_DIR [options]",
    .description =
        "Writes a profiler-output folder in the agent's layout (system\n"
        "metrics as JSON lines, framework traces as Chrome trace JSON,\n"
        "end-of-job markers) with a planted problem; deterministic by seed.\n"
        "OUT_DIR must not exist or must be an empty directory.\n",
    .options = tw_synth_options,
    .epilogue = "A one-line summary goes to stderr at the end, and progress "
                "every\n~5 s for long runs.\n",
};

static void tw_synth_cmd_list(FILE *out)
{
    const char *const *names = tw_synth_presets();
    for (size_t i = 0; names[i] != NULL; i++)
        fprintf(out, "%s\n    %s\n", names[i], tw_synth_preset_help(names[i]));
}

static int tw_synth_parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    if (s == NULL || *s == '\0' || *s == '-' || *s == '+')
        return -1;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return -1;
    }
    errno = 0;
    char *end = NULL;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno != 0 || end == s || *end != '\0' || v > max)
        return -1;
    *out = v;
    return 0;
}

/* The longest job synth generates: one year of event time. */
#define TW_SYNTH_MAX_DURATION_S (365.0 * 86400.0)

/* "900", "900s", "30m", "2h", "1.5h" -> seconds (> 0, at most a year). */
static int tw_synth_parse_duration(const char *s, double *out)
{
    if (s == NULL || *s == '\0')
        return -1;
    errno = 0;
    char *end = NULL;
    double v = strtod(s, &end);
    if (errno != 0 || end == s || !isfinite(v) || !(v > 0))
        return -1;
    double mul = 1;
    if (*end == 's')
        end++;
    else if (*end == 'm')
        mul = 60, end++;
    else if (*end == 'h')
        mul = 3600, end++;
    if (*end != '\0')
        return -1;
    /* event times stay int64 µs (a longer job would not fit on disk) */
    if (v * mul > TW_SYNTH_MAX_DURATION_S)
        return -1;
    *out = v * mul;
    return 0;
}

/* 1 if dir exists and is not an empty directory (message in err). */
static int tw_synth_cmd_dir_unusable(const char *dir, char *err, size_t n)
{
    struct stat st;
    if (stat(dir, &st) != 0)
        return 0; /* absent (or unreachable: the writer reports it) */
    if (!S_ISDIR(st.st_mode)) {
        snprintf(err, n, "OUT_DIR '%s' exists and is not a directory", dir);
        return 1;
    }
    DIR *d = opendir(dir);
    if (d == NULL)
        return 0;
    struct dirent *e;
    int used = 0;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            used = 1;
            break;
        }
    }
    closedir(d);
    if (used)
        snprintf(err, n,
                 "OUT_DIR '%s' is not empty; give a new or empty directory",
                 dir);
    return used;
}

typedef struct tw_synth_cmd_progress {
    double t0, last;
} tw_synth_cmd_progress;

static void tw_synth_cmd_on_progress(void *ctx, double frac,
                                     const tw_synth_stats *s)
{
    tw_synth_cmd_progress *p = ctx;
    double now = (tw_mono_us() / 1e6);
    if (now - p->last < 5.0)
        return;
    p->last = now;
    fprintf(stderr,
            "synth: %3.0f%%  %" PRIu64 " files, %.1f MB, %.1f s elapsed\n",
            frac * 100, s->files, s->bytes / 1e6, now - p->t0);
}

/* --preset NAME: one of the presets (listed on stderr if not). */
static int tw_synth_cmd_preset(tw_synth_opts *o, const char *val)
{
    o->preset = val;
    if (tw_synth_preset_help(val) != NULL)
        return 0;
    fprintf(stderr,
            "trainwatch synth: --preset: unknown preset '%s'; one of:", val);
    const char *const *names = tw_synth_presets();
    for (size_t k = 0; names[k]; k++)
        fprintf(stderr, " %s", names[k]);
    fprintf(stderr, "\n");
    return -1;
}

/* One option with a value into o; -1 on a bad value (said on stderr). */
static int tw_synth_cmd_option(tw_synth_opts *o, int id, const char *val)
{
    uint64_t u = 0;
    int bad = 0;
    const char *want = NULL;
    switch (id) {
    case OPT_PRESET:
        return tw_synth_cmd_preset(o, val);
    case OPT_NO_FRAMEWORK:
        o->framework = 0;
        return 0;
    case OPT_ALIGNED_SAMPLES:
        o->aligned_samples = 1;
        return 0;
    case OPT_MISSING_GPU_SERIES:
        o->missing_gpu_series = 1;
        return 0;
    case OPT_HOROVOD:
        o->horovod = 1;
        return 0;
    case OPT_RANKS_PER_NODE:
        bad = tw_synth_parse_u64(val, 8, &u) || u < 1;
        o->ranks_per_node = (uint32_t)u;
        want = "an integer 1..8";
        break;
    case OPT_PIDS:
        bad = strcmp(val, "shared") != 0 && strcmp(val, "per-rank") != 0;
        o->pids_per_rank = strcmp(val, "per-rank") == 0;
        want = "shared or per-rank";
        break;
    case OPT_STEP_MS:
        bad = tw_synth_parse_u64(val, 600000, &u) || u < 1;
        o->step_s = (double)u / 1000.0;
        want = "an integer 1..600000";
        break;
    case OPT_EVAL_EVERY:
        bad = tw_synth_parse_u64(val, UINT32_MAX, &u);
        o->eval_every = (uint32_t)u;
        want = "an integer 0..4294967295";
        break;
    case OPT_DETAILED_STEPS:
        bad = tw_synth_parse_u64(val, UINT32_MAX, &u);
        o->detailed_steps = (uint32_t)u;
        want = "an integer 0..4294967295";
        break;
    case OPT_FINAL_S:
        bad = tw_synth_parse_u64(val, 86400, &u);
        o->final_s = (double)u;
        want = "an integer 0..86400";
        break;
    case OPT_ROTATE_S:
        bad = tw_synth_parse_u64(val, 3600, &u) || u < 1;
        o->rotate_s = (double)u;
        want = "an integer 1..3600";
        break;
    case OPT_NODES:
        bad = tw_synth_parse_u64(val, 4096, &u) || u < 1;
        o->nodes = (uint32_t)u;
        want = "an integer 1..4096";
        break;
    case OPT_CORES:
        bad = tw_synth_parse_u64(val, 1024, &u) || u < 1;
        o->cores = (uint32_t)u;
        want = "an integer 1..1024";
        break;
    case OPT_GPUS:
        bad = tw_synth_parse_u64(val, 64, &u);
        o->gpus = (uint32_t)u;
        want = "an integer 0..64";
        break;
    case OPT_DURATION:
        bad = tw_synth_parse_duration(val, &o->duration_s);
        want = "a positive duration up to a year: seconds or N[s|m|h]";
        break;
    case OPT_INTERVAL:
        bad = tw_synth_parse_u64(val, UINT32_MAX, &u) ||
              !tw_synth_interval_valid((uint32_t)u);
        o->interval_ms = (uint32_t)u;
        want = "one of 100, 200, 500, 1000, 5000, 60000";
        break;
    case OPT_SEED:
        bad = tw_synth_parse_u64(val, UINT64_MAX, &u);
        o->seed = u;
        want = "an integer 0..18446744073709551615";
        break;
    case OPT_START:
        bad = tw_synth_parse_u64(val, INT64_C(9999999999), &u) ||
              u < UINT64_C(1000000000);
        o->start_us = (int64_t)u * 1000000;
        want = "epoch seconds with 10 digits (1000000000..9999999999)";
        break;
    }
    if (bad) {
        TW_ASSERT(tw_synth_options[id - 1].id == id); /* enum = table order */
        fprintf(stderr,
                "trainwatch synth: --%s: invalid value '%s' (expected %s)\n",
                tw_synth_options[id - 1].name, val, want);
        return -1;
    }
    return 0;
}

/* Defaults, the options and OUT_DIR, resolved against the preset: -1 to
 * exit with *status (0 after --help or --list-presets, 2 on bad usage). */
static int tw_synth_cmd_load(tw_synth_opts *resolved, int argc, char **argv,
                             int *status)
{
    tw_synth_opts o;
    tw_synth_opts_default(&o);
    *status = 2;
    tw_cli_parser p;
    tw_cli_begin(&p, &tw_synth_command, argc, argv);
    for (int id; (id = tw_cli_next(&p)) != TW_CLI_END;) {
        if (id == TW_CLI_HELP || id == OPT_LIST_PRESETS) {
            if (id == OPT_LIST_PRESETS)
                tw_synth_cmd_list(stdout);
            *status = 0;
            return -1;
        }
        if (id == TW_CLI_USAGE || tw_synth_cmd_option(&o, id, p.arg) != 0)
            return -1;
    }
    if (p.optind == argc) {
        fprintf(stderr, "trainwatch synth: OUT_DIR is missing\n\n");
        tw_cli_help(&tw_synth_command, stderr);
        return -1;
    }
    if (argc - p.optind > 1) {
        fprintf(stderr,
                "trainwatch synth: more than one OUT_DIR ('%s' and '%s')\n",
                argv[p.optind], argv[p.optind + 1]);
        return -1;
    }
    o.out_dir = argv[p.optind];
    char err[512];
    if (tw_synth_cmd_dir_unusable(o.out_dir, err, sizeof(err))) {
        fprintf(stderr, "trainwatch synth: %s\n", err);
        return -1;
    }
    *resolved = o;
    if (tw_synth_opts_resolve(resolved, err, sizeof(err)) != 0) {
        fprintf(stderr, "trainwatch synth: %s\n", err);
        return -1;
    }
    return 0;
}

int tw_cmd_synth(int argc, char **argv)
{
    tw_synth_opts o;
    int status;
    if (tw_synth_cmd_load(&o, argc, argv, &status) != 0)
        return status;
    tw_synth_cmd_progress prog;
    prog.t0 = prog.last = (tw_mono_us() / 1e6);
    o.progress = tw_synth_cmd_on_progress;
    o.progress_ctx = &prog;
    tw_synth_stats st;
    char err[512];
    if (tw_synth_write(&o, &st, err, sizeof(err)) != 0) {
        fprintf(stderr, "trainwatch synth: %s\n", err);
        return 1;
    }
    double secs = (tw_mono_us() / 1e6) - prog.t0;
    fprintf(stderr,
            "synth: %s: preset %s, %u node(s) x %u cores x %u GPUs, %.0f s at "
            "%u ms, seed %" PRIu64 ": %" PRIu64 " files, %" PRIu64
            " samples, %" PRIu64 " events, %.1f MB in %.2f s (%.0f MB/s)\n",
            o.out_dir, o.preset, o.nodes, o.cores, o.gpus, o.duration_s,
            o.interval_ms, o.seed, st.files, st.samples, st.events,
            st.bytes / 1e6, secs, secs > 0 ? st.bytes / 1e6 / secs : 0.0);
    return 0;
}
