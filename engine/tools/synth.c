/*
 * synth.c - generator of profiler-output folders (see synth.h and
 * docs/synth.md). Everything is derived from the seed through per-node
 * xoshiro256** streams, so the same options give the same bytes.
 *
 * Writing is done with one large user-space buffer per open file and plain
 * write(2) calls; numbers and timestamps are formatted by hand (no printf
 * in the per-line path), which keeps the generator well above 100 MB/s.
 */
#include "synth.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

/* ------------------------------------------------------------------ */
/* Presets                                                            */

enum tw_synth_kind {
    TW_SYNTH_HEALTHY,
    TW_SYNTH_LOW_GPU,
    TW_SYNTH_GPU_FLUCTUATION,
    TW_SYNTH_CPU_BOTTLENECK,
    TW_SYNTH_IO_BOTTLENECK,
    TW_SYNTH_GPU_MEMORY_GROWTH,
    TW_SYNTH_SMALL_BATCH,
    TW_SYNTH_STEP_OUTLIERS,
    TW_SYNTH_LOAD_IMBALANCE,
    TW_SYNTH_SLOW_INIT,
    TW_SYNTH_DATALOADER,
    TW_SYNTH_STRAGGLER,
    TW_SYNTH_STRAGGLER_WAIT,
};

/* Requirements a preset has on the options (checked by resolve). */
#define TW_SYNTH_NEEDS_GPU 1u
#define TW_SYNTH_NEEDS_2GPUS 2u
#define TW_SYNTH_NEEDS_2NODES 4u
#define TW_SYNTH_NEEDS_FRAMEWORK 8u
#define TW_SYNTH_NEEDS_2CORES 16u

typedef struct tw_synth_preset {
    const char *name;
    enum tw_synth_kind kind;
    uint32_t nodes, cores, gpus; /* defaults for TW_SYNTH_AUTO            */
    double duration_s;           /* default duration at 500 ms            */
    int scale_with_interval;     /* duration × interval/500 when slower   */
    unsigned needs;
    const char *help;
} tw_synth_preset;

static const tw_synth_preset tw_synth_preset_table[] = {
    {"healthy", TW_SYNTH_HEALTHY, 1, 4, 1, 600, 1, 0,
     "GPU 85-97 % (1 % dips to 55-80), cores 20-60 %, I/O wait < 3 %, GPU "
     "memory flat 38-50 % after a 10 s warm-up, TRAIN steps 0.25 s +-8 % "
     "(step 0: 2.5-4 s), 30 EVAL steps every 600, one dataloader worker per "
     "core, pin_memory true. No rule fires (in either semantics)."},
    {"low_gpu", TW_SYNTH_LOW_GPU, 1, 4, 1, 720, 1, TW_SYNTH_NEEDS_GPU,
     "every GPU 20-52 % (p95 ~50), cores 10-50 %, GPU memory 73-79 % (so "
     "BatchSize stays quiet). Fires LowGPUUtilization (p95 < 70) once a GPU "
     "has > 1000 samples."},
    {"gpu_fluctuation", TW_SYNTH_GPU_FLUCTUATION, 1, 4, 1, 720, 1,
     TW_SYNTH_NEEDS_GPU,
     "GPUs alternate 4-8 s bursts at 90-99 % with 2-5 s stalls at 0-4 % "
     "(~35 % of rounds low; p95 > 70, p5 < 10), cores 20-60 %. Fires "
     "LowGPUUtilization (fluctuation branch) only: no core > 90 so no "
     "CPUBottleneck."},
    {"cpu_bottleneck", TW_SYNTH_CPU_BOTTLENECK, 1, 4, 1, 720, 1,
     TW_SYNTH_NEEDS_GPU,
     "~75 % of rounds (6-20 s bursts): all GPUs 0-6 % while 60 % of the "
     "cores (at least 1) run at 91-100 %; in between GPU 80-94 %, cores "
     "35-65 %. Fires CPUBottleneck (> 50 % of > 1000 snapshots) and "
     "LowGPUUtilization (fluctuation: p5 < 10 with p95 > 70)."},
    {"io_bottleneck", TW_SYNTH_IO_BOTTLENECK, 1, 4, 1, 720, 1,
     TW_SYNTH_NEEDS_GPU,
     "~75 % of rounds (6-20 s bursts): all GPUs 0-6 % while 60 % of the "
     "cores (at least 1) wait on I/O 55-90 % (CPU utilisation <= 45 %, IOPS "
     "3000-6000); in between GPU 80-94 %, I/O wait 1-5 %. Fires IOBottleneck "
     "and LowGPUUtilization (fluctuation); not CPUBottleneck."},
    {"gpu_memory_growth", TW_SYNTH_GPU_MEMORY_GROWTH, 1, 4, 1, 1000, 1,
     TW_SYNTH_NEEDS_GPU,
     "otherwise healthy; GPU memory starts at 12-16 % and jumps by 26-29 "
     "points in one sample at round 1050 and every 150 rounds after (back to "
     "the base when it would pass 99 %). Each jump raises the reference's "
     "overlapping moving average by > 5 on 2-3 samples (the fixed-mode "
     "windows on ~17). Fires GPUMemoryIncrease only."},
    {"small_batch", TW_SYNTH_SMALL_BATCH, 1, 4, 1, 720, 1, TW_SYNTH_NEEDS_GPU,
     "GPU 28-57 %, GPU memory 11-21 %, cores 7-37 %, short steps (0.1 s). "
     "Fires BatchSize and, unavoidably, LowGPUUtilization (both use the GPU "
     "p95 < 70 over the last 500 samples); GPU stays >= 28 so no "
     "CPUBottleneck."},
    {"step_outliers", TW_SYNTH_STEP_OUTLIERS, 1, 4, 1, 720, 1,
     TW_SYNTH_NEEDS_FRAMEWORK,
     "otherwise healthy; every 32nd TRAIN step (from step 20 on) takes 6x "
     "the normal 0.25 s (~3 % of steps, ~80 per node in 720 s, all beyond "
     "mean + 3 sigma). Fires StepOutlier only."},
    {"load_imbalance", TW_SYNTH_LOAD_IMBALANCE, 1, 4, 4, 720, 1,
     TW_SYNTH_NEEDS_GPU | TW_SYNTH_NEEDS_2GPUS,
     "gpu0 busy at 85-97 %; the other GPUs of node 1 idle (0-6 %), those of "
     "other nodes each around its own mean in 0-50 % (+-6); their memory is "
     "low. Fires LoadBalancing in fixed semantics only (never in reference "
     "semantics, RULES.md §3.7), plus LowGPUUtilization and BatchSize for "
     "the under-used GPUs."},
    {"slow_init", TW_SYNTH_SLOW_INIT, 1, 4, 1, 1800, 0, 0,
     "no framework event before 24 min: the first TRAIN step starts 1440 s "
     "after the job start (GPUs 0 %, GPU memory 0 until the model is loaded "
     "shortly before, one core busy 55-80 %); healthy afterwards. Fires "
     "MaxInitializationTime run stand-alone or in fixed semantics (scans "
     "21-23; never under ProfilerReport in reference semantics); in "
     "reference semantics also LowGPUUtilization and BatchSize during the "
     "init phase and GPUMemoryIncrease (the first-allocation quirk), which "
     "fixed semantics leaves to MaxInitializationTime."},
    {"dataloader", TW_SYNTH_DATALOADER, 1, 16, 1, 720, 1,
     TW_SYNTH_NEEDS_FRAMEWORK | TW_SYNTH_NEEDS_2CORES,
     "otherwise healthy; num_workers 0 and pin_memory false: only the main "
     "process loads data (1 DataLoader pid per second, 20-60 ms fetches) on "
     "a 16-core machine. Fires Dataloader (median 1 < 70 % of the cores)."},
    {"straggler", TW_SYNTH_STRAGGLER, 4, 4, 1, 720, 1, TW_SYNTH_NEEDS_2NODES,
     "node algo-2 is slow: steps 0.6 s instead of 0.25 s and GPU 40-62 % "
     "instead of 85-97 %; all other nodes healthy. Fires LowGPUUtilization "
     "and BatchSize for algo-2's GPUs only, and in fixed semantics "
     "Straggler naming algo-2 (also among --nodes 8 or 16)."},
    {"straggler_wait", TW_SYNTH_STRAGGLER_WAIT, 4, 4, 1, 720, 1,
     TW_SYNTH_NEEDS_2NODES,
     "synchronous data parallelism with one slow node: algo-2 computes "
     "each step in 0.6 s instead of 0.25 s with its GPUs busy (85-97 %); "
     "every other node waits for it at each step, its GPUs 30-45 %. Fires "
     "Straggler naming algo-2 (fixed semantics), and LowGPUUtilization and "
     "BatchSize for the waiting nodes' GPUs, which fixed semantics marks "
     "caused_by Straggler (also among --nodes 8 or 16; with --no-framework "
     "Straggler names algo-2 from system metrics alone)."},
};

#define TW_SYNTH_NPRESETS                                                      \
    (sizeof(tw_synth_preset_table) / sizeof(tw_synth_preset_table[0]))

static const char *const tw_synth_preset_names[] = {
    "healthy",         "low_gpu",
    "gpu_fluctuation", "cpu_bottleneck",
    "io_bottleneck",   "gpu_memory_growth",
    "small_batch",     "step_outliers",
    "load_imbalance",  "slow_init",
    "dataloader",      "straggler",
    "straggler_wait",  NULL,
};

static const tw_synth_preset *tw_synth_preset_find(const char *name)
{
    if (name == NULL)
        return NULL;
    for (size_t i = 0; i < TW_SYNTH_NPRESETS; i++) {
        if (strcmp(tw_synth_preset_table[i].name, name) == 0)
            return &tw_synth_preset_table[i];
    }
    return NULL;
}

const char *const *tw_synth_presets(void)
{
    return tw_synth_preset_names;
}

const char *tw_synth_preset_help(const char *preset)
{
    const tw_synth_preset *p = tw_synth_preset_find(preset);
    return p ? p->help : NULL;
}

int tw_synth_interval_valid(uint32_t ms)
{
    return ms == 100 || ms == 200 || ms == 500 || ms == 1000 || ms == 5000 ||
           ms == 60000;
}

void tw_synth_opts_default(tw_synth_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->out_dir = NULL;
    o->preset = "healthy";
    o->nodes = TW_SYNTH_AUTO;
    o->cores = TW_SYNTH_AUTO;
    o->gpus = TW_SYNTH_AUTO;
    o->duration_s = 0;
    o->interval_ms = 500;
    o->seed = 1;
    o->start_us = INT64_C(1700000000000000);
    o->framework = 1;
    o->ranks_per_node = 1;
    o->pids_per_rank = 0;
    o->step_s = 0;
    o->eval_every = 600;
    o->rotate_s = 60;
    o->aligned_samples = 0;
    o->missing_gpu_series = 0;
    o->detailed_steps = 0;
    o->final_s = 0;
    o->horovod = 0;
    o->progress = NULL;
    o->progress_ctx = NULL;
}

static void tw_synth_errf(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void tw_synth_errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

/* Upper bounds that keep a run sane (and file names short). */
#define TW_SYNTH_MAX_NODES 4096u
#define TW_SYNTH_MAX_RANKS 8u
#define TW_SYNTH_MAX_CORES 1024u
#define TW_SYNTH_MAX_GPUS 64u
#define TW_SYNTH_MAX_DURATION_S (30.0 * 86400.0)

int tw_synth_opts_resolve(tw_synth_opts *o, char *err, size_t errlen)
{
    const tw_synth_preset *p = tw_synth_preset_find(o->preset);
    if (p == NULL) {
        tw_synth_errf(err, errlen,
                      "--preset: unknown preset '%s' (--list-presets lists "
                      "them)",
                      o->preset ? o->preset : "(null)");
        return -1;
    }
    if (!tw_synth_interval_valid(o->interval_ms)) {
        tw_synth_errf(err, errlen,
                      "--interval-ms: %u is not a sampling interval of the "
                      "agent (100, 200, 500, 1000, 5000 or 60000)",
                      o->interval_ms);
        return -1;
    }
    if (o->nodes == TW_SYNTH_AUTO)
        o->nodes = p->nodes;
    if (o->cores == TW_SYNTH_AUTO)
        o->cores = p->cores;
    if (o->gpus == TW_SYNTH_AUTO)
        o->gpus = p->gpus;
    if (o->nodes < 1 || o->nodes > TW_SYNTH_MAX_NODES) {
        tw_synth_errf(err, errlen, "--nodes: %u is out of range 1..%u",
                      o->nodes, TW_SYNTH_MAX_NODES);
        return -1;
    }
    if (o->cores < 1 || o->cores > TW_SYNTH_MAX_CORES) {
        tw_synth_errf(err, errlen, "--cores: %u is out of range 1..%u",
                      o->cores, TW_SYNTH_MAX_CORES);
        return -1;
    }
    if (o->gpus > TW_SYNTH_MAX_GPUS) {
        tw_synth_errf(err, errlen, "--gpus: %u is out of range 0..%u", o->gpus,
                      TW_SYNTH_MAX_GPUS);
        return -1;
    }
    if (o->duration_s == 0) {
        double d = p->duration_s;
        if (p->scale_with_interval && o->interval_ms > 500)
            d *= o->interval_ms / 500.0;
        o->duration_s = d;
    }
    if (!(o->duration_s > 0) || o->duration_s > TW_SYNTH_MAX_DURATION_S) {
        tw_synth_errf(err, errlen,
                      "--duration: %g s is out of range (0, %.0f] seconds",
                      o->duration_s, TW_SYNTH_MAX_DURATION_S);
        return -1;
    }
    /* The system reader needs 10-digit epoch seconds in file names. */
    int64_t end_s = o->start_us / 1000000 + (int64_t)ceil(o->duration_s) + 1;
    if (o->start_us < INT64_C(1000000000) * 1000000 ||
        end_s > INT64_C(9999999999)) {
        tw_synth_errf(err, errlen,
                      "--start: %lld s gives file names outside the "
                      "10-digit epoch seconds the agent's readers accept "
                      "(start >= 1000000000, start + duration < 9999999999)",
                      (long long)(o->start_us / 1000000));
        return -1;
    }
    if (o->ranks_per_node < 1 || o->ranks_per_node > TW_SYNTH_MAX_RANKS) {
        tw_synth_errf(err, errlen, "--ranks-per-node: %u is out of range 1..%u",
                      o->ranks_per_node, TW_SYNTH_MAX_RANKS);
        return -1;
    }
    if (!(o->step_s >= 0) || o->step_s > 600) {
        tw_synth_errf(err, errlen,
                      "--step-ms: %g s is out of range (0 = the preset's, "
                      "at most 600 s)",
                      o->step_s);
        return -1;
    }
    if (!(o->final_s >= 0) || o->final_s >= o->duration_s) {
        tw_synth_errf(err, errlen,
                      "--final-s: %g s is out of range 0..%g (below the "
                      "duration)",
                      o->final_s, o->duration_s);
        return -1;
    }
    if (!(o->rotate_s >= 1) || o->rotate_s > 3600) {
        tw_synth_errf(err, errlen, "--rotate-s: %g is out of range 1..3600",
                      o->rotate_s);
        return -1;
    }
    if (o->missing_gpu_series && o->gpus == 0) {
        tw_synth_errf(err, errlen,
                      "--missing-gpu-series: needs --gpus >= 1 (a CPU-only "
                      "job has no GPU series to leave out)");
        return -1;
    }
    if ((p->needs & TW_SYNTH_NEEDS_GPU) && o->gpus == 0) {
        tw_synth_errf(err, errlen,
                      "--gpus: preset '%s' plants its problem in GPU metrics "
                      "and needs --gpus >= 1",
                      p->name);
        return -1;
    }
    if ((p->needs & TW_SYNTH_NEEDS_2GPUS) && o->gpus < 2) {
        tw_synth_errf(err, errlen,
                      "--gpus: preset '%s' compares GPUs of a node and needs "
                      "--gpus >= 2 (got %u)",
                      p->name, o->gpus);
        return -1;
    }
    if ((p->needs & TW_SYNTH_NEEDS_2NODES) && o->nodes < 2) {
        tw_synth_errf(err, errlen,
                      "--nodes: preset '%s' slows one node down and needs "
                      "--nodes >= 2 (got %u)",
                      p->name, o->nodes);
        return -1;
    }
    if ((p->needs & TW_SYNTH_NEEDS_2CORES) && o->cores < 2) {
        tw_synth_errf(err, errlen,
                      "--cores: preset '%s' needs --cores >= 2 so that one "
                      "loader process is below 70 %% of the cores (got %u)",
                      p->name, o->cores);
        return -1;
    }
    if ((p->needs & TW_SYNTH_NEEDS_FRAMEWORK) && !o->framework) {
        tw_synth_errf(err, errlen,
                      "--no-framework: preset '%s' plants its problem in the "
                      "framework traces",
                      p->name);
        return -1;
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Random numbers: splitmix64 seeds xoshiro256**.                     */

typedef struct tw_synth_rng {
    uint64_t s[4];
} tw_synth_rng;

static uint64_t tw_synth_splitmix(uint64_t *x)
{
    uint64_t z = (*x += UINT64_C(0x9e3779b97f4a7c15));
    z = (z ^ (z >> 30)) * UINT64_C(0xbf58476d1ce4e5b9);
    z = (z ^ (z >> 27)) * UINT64_C(0x94d049bb133111eb);
    return z ^ (z >> 31);
}

/* One independent stream per (seed, node, purpose). */
static void tw_synth_rng_init(tw_synth_rng *r, uint64_t seed, uint64_t node,
                              uint64_t purpose)
{
    uint64_t x = seed;
    x = tw_synth_splitmix(&x) ^ (node * UINT64_C(0xd1342543de82ef95));
    x = tw_synth_splitmix(&x) ^ (purpose * UINT64_C(0xaf251af3b0f025b5));
    for (int i = 0; i < 4; i++)
        r->s[i] = tw_synth_splitmix(&x);
}

static inline uint64_t tw_synth_rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static inline uint64_t tw_synth_next(tw_synth_rng *r)
{
    uint64_t *s = r->s;
    uint64_t result = tw_synth_rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = tw_synth_rotl(s[3], 45);
    return result;
}

/* Uniform in [0, 1). */
static inline double tw_synth_unif(tw_synth_rng *r)
{
    return (double)(tw_synth_next(r) >> 11) * 0x1.0p-53;
}

static inline double tw_synth_range(tw_synth_rng *r, double lo, double hi)
{
    return lo + (hi - lo) * tw_synth_unif(r);
}

/* Uniform integer in [0, n), n > 0 (multiply-shift, bias negligible). */
static inline uint64_t tw_synth_below(tw_synth_rng *r, uint64_t n)
{
    return (uint64_t)(((unsigned __int128)tw_synth_next(r) * n) >> 64);
}

/* ------------------------------------------------------------------ */
/* Buffered output files                                              */

#define TW_SYNTH_BUF (1u << 20)
#define TW_SYNTH_LINE_MAX 1024u /* longest line we ever append          */
#define TW_SYNTH_TRACE_MAX_BYTES (10u * 1000u * 1000u) /* agent: 10 MB  */

typedef struct tw_synth_out {
    int fd;
    char path[PATH_MAX];
    char *buf;
    size_t len;
    uint64_t written; /* bytes of this file, buffered ones included */
} tw_synth_out;

typedef struct tw_synth_job tw_synth_job;

static int tw_synth_out_flush(tw_synth_out *w, char *err, size_t errlen)
{
    size_t off = 0;
    while (off < w->len) {
        ssize_t n = write(w->fd, w->buf + off, w->len - off);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            tw_synth_errf(err, errlen, "writing %s: %s", w->path,
                          strerror(errno));
            return -1;
        }
        off += (size_t)n;
    }
    w->len = 0;
    return 0;
}

static int tw_synth_out_open(tw_synth_out *w, const char *path, char *err,
                             size_t errlen)
{
    size_t plen = strlen(path);
    if (plen >= sizeof(w->path)) {
        tw_synth_errf(err, errlen, "path too long: %s", path);
        return -1;
    }
    memcpy(w->path, path, plen + 1);
    w->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (w->fd < 0) {
        tw_synth_errf(err, errlen, "creating %s: %s", path, strerror(errno));
        return -1;
    }
    w->len = 0;
    w->written = 0;
    return 0;
}

static int tw_synth_out_close(tw_synth_out *w, char *err, size_t errlen)
{
    if (w->fd < 0)
        return 0;
    int rc = tw_synth_out_flush(w, err, errlen);
    if (close(w->fd) != 0 && rc == 0) {
        tw_synth_errf(err, errlen, "closing %s: %s", w->path, strerror(errno));
        rc = -1;
    }
    w->fd = -1;
    return rc;
}

/* Room for one more line; flushes when the buffer is nearly full. */
static inline int tw_synth_out_reserve(tw_synth_out *w, char *err,
                                       size_t errlen)
{
    if (w->len + TW_SYNTH_LINE_MAX > TW_SYNTH_BUF)
        return tw_synth_out_flush(w, err, errlen);
    return 0;
}

static inline void tw_synth_put(tw_synth_out *w, const char *s, size_t n)
{
    memcpy(w->buf + w->len, s, n);
    w->len += n;
    w->written += n;
}

#define TW_SYNTH_PUTS(w, lit) tw_synth_put((w), (lit), sizeof(lit) - 1)

static inline void tw_synth_put_u64(tw_synth_out *w, uint64_t v)
{
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v != 0);
    char *d = w->buf + w->len;
    for (int i = 0; i < n; i++)
        d[i] = tmp[n - 1 - i];
    w->len += (size_t)n;
    w->written += (uint64_t)n;
}

/* A value given in hundredths, printed like the agent: "51.1", "1.36",
 * "1" (no trailing zeros, no decimal point for whole numbers). */
static inline void tw_synth_put_hundredths(tw_synth_out *w, uint64_t h)
{
    tw_synth_put_u64(w, h / 100);
    unsigned f = (unsigned)(h % 100);
    if (f == 0)
        return;
    char t[3] = {'.', (char)('0' + f / 10), (char)('0' + f % 10)};
    tw_synth_put(w, t, f % 10 ? 3 : 2);
}

/* Epoch seconds with 7 decimals from a time in 100 ns units, trailing
 * zeros dropped but at least one decimal kept ("1591748109.2321954"). */
static size_t tw_synth_fmt_ts(char *out, int64_t t100ns)
{
    uint64_t sec = (uint64_t)(t100ns / 10000000);
    unsigned frac = (unsigned)(t100ns % 10000000);
    char tmp[24];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + sec % 10);
        sec /= 10;
    } while (sec != 0);
    size_t len = 0;
    for (int i = n - 1; i >= 0; i--)
        out[len++] = tmp[i];
    out[len++] = '.';
    char fd[7];
    for (int i = 6; i >= 0; i--) {
        fd[i] = (char)('0' + frac % 10);
        frac /= 10;
    }
    int keep = 7;
    while (keep > 1 && fd[keep - 1] == '0')
        keep--;
    memcpy(out + len, fd, (size_t)keep);
    return len + (size_t)keep;
}

/* ------------------------------------------------------------------ */
/* Paths                                                              */

static int tw_synth_mkdir(const char *path, char *err, size_t errlen)
{
    if (mkdir(path, 0755) == 0 || errno == EEXIST)
        return 0;
    tw_synth_errf(err, errlen, "creating directory %s: %s", path,
                  strerror(errno));
    return -1;
}

/* Formats a path into out[PATH_MAX]; -1 with a message when too long. */
static int tw_synth_pathf(char *out, char *err, size_t errlen, const char *fmt,
                          ...) __attribute__((format(printf, 4, 5)));

static int tw_synth_pathf(char *out, char *err, size_t errlen, const char *fmt,
                          ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(out, PATH_MAX, fmt, ap);
    va_end(ap);
    if (n < 0 || n >= PATH_MAX) {
        tw_synth_errf(err, errlen, "path too long (limit %d bytes): %.200s...",
                      PATH_MAX, out);
        return -1;
    }
    return 0;
}

/* mkdir -p */
static int tw_synth_mkdirs(const char *path, char *err, size_t errlen)
{
    char tmp[PATH_MAX];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof(tmp)) {
        tw_synth_errf(err, errlen, "bad directory path '%s'", path);
        return -1;
    }
    memcpy(tmp, path, n + 1);
    for (size_t i = 1; i < n; i++) {
        if (tmp[i] == '/') {
            tmp[i] = '\0';
            if (tw_synth_mkdir(tmp, err, errlen) != 0)
                return -1;
            tmp[i] = '/';
        }
    }
    return tw_synth_mkdir(tmp, err, errlen);
}

/* out_dir must be absent or an empty directory. */
static int tw_synth_check_out_dir(const char *dir, char *err, size_t errlen)
{
    struct stat st;
    if (stat(dir, &st) != 0) {
        if (errno == ENOENT)
            return tw_synth_mkdirs(dir, err, errlen);
        tw_synth_errf(err, errlen, "OUT_DIR %s: %s", dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) {
        tw_synth_errf(err, errlen, "OUT_DIR %s exists and is not a directory",
                      dir);
        return -1;
    }
    DIR *d = opendir(dir);
    if (d == NULL) {
        tw_synth_errf(err, errlen, "OUT_DIR %s: %s", dir, strerror(errno));
        return -1;
    }
    struct dirent *e;
    int empty = 1;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0) {
            empty = 0;
            break;
        }
    }
    closedir(d);
    if (!empty) {
        tw_synth_errf(err, errlen,
                      "OUT_DIR %s is not empty (synth writes only into a new "
                      "or empty directory)",
                      dir);
        return -1;
    }
    return 0;
}

/* "YYYYMMDDHH" of an epoch second, UTC. */
static void tw_synth_hour(int64_t epoch_s, char out[11])
{
    time_t t = (time_t)epoch_s;
    struct tm tm;
    gmtime_r(&t, &tm);
    strftime(out, 11, "%Y%m%d%H", &tm);
}

/* ------------------------------------------------------------------ */
/* The job model                                                      */

/* Which group of series a timestamp belongs to. */
enum {
    TW_SYNTH_G_GPU,
    TW_SYNTH_G_CPU,
    TW_SYNTH_G_MEM,
    TW_SYNTH_G_NET,
    TW_SYNTH_G_IO,
    TW_SYNTH_NGROUPS
};

typedef struct tw_synth_node {
    uint32_t idx;     /* 0-based; NodeId algo-<idx+1>                */
    tw_synth_rng sys; /* system values                                */
    tw_synth_rng fw;  /* framework events                             */
    int64_t grid0_us; /* time of round 0 (before jitter), epoch µs    */
    uint64_t round;   /* next round to write                          */
    int64_t next_t;   /* its first timestamp, 100 ns units            */
    double init_s;    /* first TRAIN step, seconds after job start    */
    double memload_s; /* model loaded onto the GPUs                   */
    double final_at;  /* finalization from here on (s after start)    */
    int straggler;
    int waits; /* straggler_wait: a fast node that waits for the slow one */
    int bad;   /* bursty presets: in the bad regime            */
    uint64_t regime_left; /* rounds left in the current regime          */
    double *gpu_mean;     /* load_imbalance: per GPU centre               */
    int *mem_base;        /* per GPU memory level after loading           */
    int *mem_add;         /* gpu_memory_growth: added level               */
    double *core_bias;    /* per core offset of the CPU centre            */
    double host_mem;      /* MemoryUsedPercent plateau                    */
    char node_mid[64];    /* ,"NodeId":"algo-N","Timestamp":             */
    size_t node_mid_len;
} tw_synth_node;

struct tw_synth_job {
    tw_synth_opts o;
    const tw_synth_preset *p;
    int64_t start_us, end_us, interval_us;
    tw_synth_node *nodes;
    /* Line prefixes, up to and including "Value": */
    char **cpu_util_pfx, **cpu_wait_pfx, **gpu_util_pfx, **gpu_mem_pfx;
    /* Round values scratch */
    int *gv_util, *gv_mem;
    uint64_t *cv_util, *cv_wait;
    tw_synth_out sysw, fww;
    tw_synth_stats st;
    double fw_done; /* framework progress, in node-durations           */
    char *err;
    size_t errlen;
};

static char *tw_synth_strdupf(const char *fmt, ...)
    __attribute__((format(printf, 1, 2)));

static char *tw_synth_strdupf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

static void tw_synth_free_strv(char **v, size_t n)
{
    if (v == NULL)
        return;
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
}

static void tw_synth_job_free(tw_synth_job *j)
{
    if (j->nodes) {
        for (uint32_t i = 0; i < j->o.nodes; i++) {
            free(j->nodes[i].gpu_mean);
            free(j->nodes[i].mem_base);
            free(j->nodes[i].mem_add);
            free(j->nodes[i].core_bias);
        }
        free(j->nodes);
    }
    tw_synth_free_strv(j->cpu_util_pfx, j->o.cores);
    tw_synth_free_strv(j->cpu_wait_pfx, j->o.cores);
    tw_synth_free_strv(j->gpu_util_pfx, j->o.gpus);
    tw_synth_free_strv(j->gpu_mem_pfx, j->o.gpus);
    free(j->gv_util);
    free(j->gv_mem);
    free(j->cv_util);
    free(j->cv_wait);
    free(j->sysw.buf);
    free(j->fww.buf);
}

static int tw_synth_job_init(tw_synth_job *j)
{
    const tw_synth_opts *o = &j->o;
    uint32_t C = o->cores, G = o->gpus;
    j->start_us = o->start_us;
    j->end_us = o->start_us + (int64_t)llround(o->duration_s * 1e6);
    j->interval_us = (int64_t)o->interval_ms * 1000;
    j->sysw.fd = -1;
    j->fww.fd = -1;
    j->sysw.buf = malloc(TW_SYNTH_BUF);
    j->fww.buf = malloc(TW_SYNTH_BUF);
    j->nodes = calloc(o->nodes, sizeof(*j->nodes));
    j->cpu_util_pfx = calloc(C, sizeof(char *));
    j->cpu_wait_pfx = calloc(C, sizeof(char *));
    j->gpu_util_pfx = calloc(G ? G : 1, sizeof(char *));
    j->gpu_mem_pfx = calloc(G ? G : 1, sizeof(char *));
    j->gv_util = calloc(G ? G : 1, sizeof(int));
    j->gv_mem = calloc(G ? G : 1, sizeof(int));
    j->cv_util = calloc(C, sizeof(uint64_t));
    j->cv_wait = calloc(C, sizeof(uint64_t));
    if (!j->sysw.buf || !j->fww.buf || !j->nodes || !j->cpu_util_pfx ||
        !j->cpu_wait_pfx || !j->gpu_util_pfx || !j->gpu_mem_pfx ||
        !j->gv_util || !j->gv_mem || !j->cv_util || !j->cv_wait)
        goto oom;
    for (uint32_t c = 0; c < C; c++) {
        j->cpu_util_pfx[c] = tw_synth_strdupf(
            "{\"Type\":\"cpu\",\"Name\":\"cpu%u\",\"Dimension\":"
            "\"CPUUtilization\",\"Value\":",
            c);
        j->cpu_wait_pfx[c] = tw_synth_strdupf(
            "{\"Type\":\"cpu\",\"Name\":\"cpu%u\",\"Dimension\":"
            "\"I/OWaitPercentage\",\"Value\":",
            c);
        if (!j->cpu_util_pfx[c] || !j->cpu_wait_pfx[c])
            goto oom;
    }
    for (uint32_t g = 0; g < G; g++) {
        j->gpu_util_pfx[g] = tw_synth_strdupf(
            "{\"Type\":\"gpu\",\"Name\":\"gpu%u\",\"Dimension\":"
            "\"GPUUtilization\",\"Value\":",
            g);
        j->gpu_mem_pfx[g] = tw_synth_strdupf(
            "{\"Type\":\"gpu\",\"Name\":\"gpu%u\",\"Dimension\":"
            "\"GPUMemoryUtilization\",\"Value\":",
            g);
        if (!j->gpu_util_pfx[g] || !j->gpu_mem_pfx[g])
            goto oom;
    }

    enum tw_synth_kind k = j->p->kind;
    double interval_s = o->interval_ms / 1000.0;
    for (uint32_t i = 0; i < o->nodes; i++) {
        tw_synth_node *n = &j->nodes[i];
        n->idx = i;
        tw_synth_rng_init(&n->sys, o->seed, i, 1);
        tw_synth_rng_init(&n->fw, o->seed, i, 2);
        tw_synth_rng setup;
        tw_synth_rng_init(&setup, o->seed, i, 3);
        n->gpu_mean = calloc(G ? G : 1, sizeof(double));
        n->mem_base = calloc(G ? G : 1, sizeof(int));
        n->mem_add = calloc(G ? G : 1, sizeof(int));
        n->core_bias = calloc(C, sizeof(double));
        if (!n->gpu_mean || !n->mem_base || !n->mem_add || !n->core_bias)
            goto oom;
        /* Rounds sit on a grid offset by 1..interval-25 ms so that one
         * round (spread < 15 ms) never straddles a minute boundary. */
        int64_t off = 1000 + (int64_t)tw_synth_below(
                                 &setup, (uint64_t)(j->interval_us - 26000));
        if (o->aligned_samples)
            off = 0; /* GPU samples exactly on the grid, so on minutes */
        int64_t base = j->start_us - (j->start_us % j->interval_us) + off;
        if (base < j->start_us)
            base += j->interval_us;
        n->grid0_us = base;
        n->round = 0;
        n->straggler =
            ((k == TW_SYNTH_STRAGGLER || k == TW_SYNTH_STRAGGLER_WAIT) &&
             i == 1);
        n->waits = k == TW_SYNTH_STRAGGLER_WAIT && i != 1;
        n->init_s = 10.0 + tw_synth_range(&setup, 0, 1.0);
        n->memload_s = n->init_s - 2.0;
        if (k == TW_SYNTH_SLOW_INIT) {
            n->init_s = 1440.0 + tw_synth_range(&setup, 0, 1.0);
            double lead = 25 * interval_s > 15 ? 25 * interval_s : 15;
            n->memload_s = n->init_s - lead;
            if (n->memload_s < n->init_s / 2)
                n->memload_s = n->init_s / 2;
        }
        n->final_at = o->duration_s - o->final_s;
        n->bad = (k == TW_SYNTH_CPU_BOTTLENECK || k == TW_SYNTH_IO_BOTTLENECK);
        n->regime_left = 0;
        for (uint32_t g = 0; g < G; g++) {
            int mb;
            switch (k) {
            case TW_SYNTH_LOW_GPU:
                mb = 74 + (int)tw_synth_below(&setup, 4);
                break;
            case TW_SYNTH_SMALL_BATCH:
                mb = 12 + (int)tw_synth_below(&setup, 8);
                break;
            case TW_SYNTH_GPU_MEMORY_GROWTH:
                mb = 12 + (int)tw_synth_below(&setup, 4);
                break;
            default:
                mb = 38 + (int)tw_synth_below(&setup, 12);
                break;
            }
            n->gpu_mean[g] = 91;
            if (k == TW_SYNTH_LOAD_IMBALANCE && g > 0) {
                n->gpu_mean[g] = i == 0 ? 3.0 : tw_synth_range(&setup, 0, 50);
                mb = 2 + (int)(n->gpu_mean[g] / 2);
            }
            n->mem_base[g] = mb;
        }
        for (uint32_t c = 0; c < C; c++)
            n->core_bias[c] = tw_synth_range(&setup, -8, 8);
        n->host_mem = tw_synth_range(&setup, 22, 34);
        int ml = snprintf(n->node_mid, sizeof(n->node_mid),
                          ",\"NodeId\":\"algo-%u\",\"Timestamp\":", i + 1);
        n->node_mid_len = (size_t)ml;
    }
    return 0;
oom:
    tw_synth_errf(j->err, j->errlen, "out of memory setting up the job");
    return -1;
}

/* ------------------------------------------------------------------ */
/* System values of one round                                         */

static inline double tw_synth_clamp(double v, double lo, double hi)
{
    return v < lo ? lo : (v > hi ? hi : v);
}

static inline uint64_t tw_synth_h(double pct)
{
    return (uint64_t)llround(tw_synth_clamp(pct, 0, 100) * 100.0);
}

static uint64_t tw_synth_secs_to_rounds(double s, double interval_s,
                                        uint64_t min)
{
    uint64_t r = (uint64_t)llround(s / interval_s);
    return r < min ? min : r;
}

/* Advance the bursty regime of a node by one round. */
static void tw_synth_regime_step(tw_synth_job *j, tw_synth_node *n)
{
    enum tw_synth_kind k = j->p->kind;
    double is = j->o.interval_ms / 1000.0;
    if (k != TW_SYNTH_GPU_FLUCTUATION && k != TW_SYNTH_CPU_BOTTLENECK &&
        k != TW_SYNTH_IO_BOTTLENECK)
        return;
    if (n->regime_left > 0) {
        n->regime_left--;
        return;
    }
    if (n->round > 0)
        n->bad = !n->bad;
    tw_synth_rng *r = &n->sys;
    if (k == TW_SYNTH_GPU_FLUCTUATION) {
        /* bad = GPU stall */
        n->regime_left =
            n->bad ? tw_synth_secs_to_rounds(tw_synth_range(r, 2, 5), is, 1)
                   : tw_synth_secs_to_rounds(tw_synth_range(r, 4, 8), is, 2);
    } else {
        n->regime_left =
            n->bad ? tw_synth_secs_to_rounds(tw_synth_range(r, 6, 20), is, 3)
                   : tw_synth_secs_to_rounds(tw_synth_range(r, 2, 6), is, 1);
    }
    n->regime_left--; /* this round is the first of the regime */
}

static void tw_synth_round_values(tw_synth_job *j, tw_synth_node *n, double t,
                                  uint64_t *mem_h, uint64_t net_h[2],
                                  uint64_t io_h[3])
{
    const tw_synth_opts *o = &j->o;
    enum tw_synth_kind k = j->p->kind;
    tw_synth_rng *r = &n->sys;
    /* before the first step and in the finalization: no training */
    int active = t >= n->init_s && t < n->final_at;
    int loaded = t >= n->memload_s;
    tw_synth_regime_step(j, n);
    int bad = active && n->bad;
    uint32_t hot = (uint32_t)ceil(o->cores * 0.6);
    if (hot < 1)
        hot = 1;

    if (k == TW_SYNTH_GPU_MEMORY_GROWTH && n->round >= 1050 &&
        (n->round - 1050) % 150 == 0) {
        for (uint32_t g = 0; g < o->gpus; g++) {
            int jump = 26 + (int)tw_synth_below(r, 4);
            if (n->mem_base[g] + n->mem_add[g] + jump + 1 > 99)
                n->mem_add[g] = 0;
            else
                n->mem_add[g] += jump;
        }
    }

    for (uint32_t g = 0; g < o->gpus; g++) {
        double u;
        if (!active) {
            u = loaded ? tw_synth_range(r, 0, 8)
                       : (tw_synth_unif(r) < 0.1 ? tw_synth_range(r, 1, 3) : 0);
        } else if (n->straggler && k == TW_SYNTH_STRAGGLER) {
            u = tw_synth_range(r, 40, 63);
        } else if (n->waits) {
            /* 0.25 s of work in each 0.6 s step: the rest is waiting */
            u = tw_synth_range(r, 30, 46);
        } else if (k == TW_SYNTH_LOAD_IMBALANCE && g > 0) {
            u = n->gpu_mean[g] + tw_synth_range(r, -6, 6);
        } else {
            switch (k) {
            case TW_SYNTH_LOW_GPU:
                u = tw_synth_range(r, 20, 53);
                break;
            case TW_SYNTH_SMALL_BATCH:
                u = tw_synth_range(r, 28, 58);
                break;
            case TW_SYNTH_GPU_FLUCTUATION:
                u = bad ? tw_synth_range(r, 0, 5) : tw_synth_range(r, 90, 100);
                break;
            case TW_SYNTH_CPU_BOTTLENECK:
            case TW_SYNTH_IO_BOTTLENECK:
                u = bad ? tw_synth_range(r, 0, 7) : tw_synth_range(r, 80, 95);
                break;
            default:
                u = tw_synth_unif(r) < 0.01 ? tw_synth_range(r, 55, 80)
                                            : tw_synth_range(r, 85, 98);
                break;
            }
        }
        j->gv_util[g] = (int)floor(tw_synth_clamp(u, 0, 100));
        int m = 0;
        if (loaded) {
            m = n->mem_base[g] + n->mem_add[g];
            double x = tw_synth_unif(r);
            if (x < 0.05)
                m -= 1;
            else if (x > 0.95)
                m += 1;
            if (m < 0)
                m = 0;
            if (m > 100)
                m = 100;
        }
        j->gv_mem[g] = m;
    }

    for (uint32_t c = 0; c < o->cores; c++) {
        double u, w = tw_synth_range(r, 0, 3);
        double b = n->core_bias[c];
        if (!active) {
            u = c == 0 ? tw_synth_range(r, 55, 80) : tw_synth_range(r, 2, 12);
            w = tw_synth_range(r, 0, 8);
        } else {
            switch (k) {
            case TW_SYNTH_LOW_GPU:
                u = 30 + b + tw_synth_range(r, -12, 12);
                break;
            case TW_SYNTH_SMALL_BATCH:
                u = 22 + b * 0.6 + tw_synth_range(r, -10, 10);
                break;
            case TW_SYNTH_CPU_BOTTLENECK:
                if (bad)
                    u = c < hot ? tw_synth_range(r, 91, 100)
                                : 55 + b + tw_synth_range(r, -10, 10);
                else
                    u = 50 + b + tw_synth_range(r, -7, 7);
                break;
            case TW_SYNTH_IO_BOTTLENECK:
                u = 25 + b + tw_synth_range(r, -10, 10);
                if (bad)
                    w = c < hot ? tw_synth_range(r, 55, 90)
                                : tw_synth_range(r, 5, 20);
                else
                    w = tw_synth_range(r, 1, 5);
                break;
            default:
                u = 40 + b + tw_synth_range(r, -12, 12);
                break;
            }
        }
        j->cv_util[c] = tw_synth_h(u);
        j->cv_wait[c] = tw_synth_h(w);
    }

    double hm = active ? n->host_mem : 8 + n->host_mem * 0.25;
    *mem_h = tw_synth_h(hm + tw_synth_range(r, -0.3, 0.3));
    double net = active ? 2.5e7 : 4e6; /* bytes/s */
    net_h[0] = (uint64_t)llround(net * tw_synth_range(r, 0.7, 1.3) * 100);
    net_h[1] = (uint64_t)llround(net * tw_synth_range(r, 0.6, 1.2) * 100);
    double iops = bad && k == TW_SYNTH_IO_BOTTLENECK
                      ? tw_synth_range(r, 3000, 6000)
                      : tw_synth_range(r, 80, 400);
    io_h[0] = (uint64_t)llround(iops * 100);
    io_h[1] = (uint64_t)llround(iops * tw_synth_range(r, 6e4, 1.3e5) * 100);
    io_h[2] = (uint64_t)llround(tw_synth_range(r, 1e5, 2e6) * 100);
}

/* ------------------------------------------------------------------ */
/* System files                                                       */

static inline void tw_synth_line(tw_synth_out *w, const tw_synth_node *n,
                                 const char *pfx, size_t pfxlen,
                                 uint64_t hundredths, const char *ts,
                                 size_t tslen)
{
    tw_synth_put(w, pfx, pfxlen);
    tw_synth_put_hundredths(w, hundredths);
    tw_synth_put(w, n->node_mid, n->node_mid_len);
    tw_synth_put(w, ts, tslen);
    TW_SYNTH_PUTS(w, "}\n");
}

#define TW_SYNTH_FIXED_LINE(w, n, lit, v, ts, tslen)                           \
    tw_synth_line((w), (n), (lit), sizeof(lit) - 1, (v), (ts), (tslen))

static int tw_synth_write_round(tw_synth_job *j, tw_synth_node *n,
                                int64_t t0_100ns)
{
    tw_synth_out *w = &j->sysw;
    char *err = j->err;
    size_t el = j->errlen;
    const tw_synth_opts *o = &j->o;
    tw_synth_rng *r = &n->sys;
    double t = (double)(t0_100ns / 10 - j->start_us) / 1e6;
    uint64_t mem_h, net_h[2], io_h[3];
    tw_synth_round_values(j, n, t, &mem_h, net_h, io_h);

    /* Group timestamps: GPU first, the others a few ms later (< 15 ms). */
    int64_t tg[TW_SYNTH_NGROUPS];
    tg[TW_SYNTH_G_GPU] = t0_100ns;
    tg[TW_SYNTH_G_CPU] = tg[0] + 30000 + (int64_t)tw_synth_below(r, 30000);
    tg[TW_SYNTH_G_MEM] = tg[1] + 3000 + (int64_t)tw_synth_below(r, 7000);
    tg[TW_SYNTH_G_NET] = tg[2] + 10000 + (int64_t)tw_synth_below(r, 20000);
    tg[TW_SYNTH_G_IO] = tg[3] + 10000 + (int64_t)tw_synth_below(r, 20000);
    char ts[TW_SYNTH_NGROUPS][32];
    size_t tl[TW_SYNTH_NGROUPS];
    for (int g = 0; g < TW_SYNTH_NGROUPS; g++)
        tl[g] = tw_synth_fmt_ts(ts[g], tg[g]);

    uint32_t util_gpus = o->gpus;
    if (o->missing_gpu_series && n->idx == 0)
        util_gpus--; /* algo-1's last GPU has no utilisation series */
    for (uint32_t g = 0; g < util_gpus; g++) {
        if (tw_synth_out_reserve(w, err, el) != 0)
            return -1;
        tw_synth_line(w, n, j->gpu_util_pfx[g], strlen(j->gpu_util_pfx[g]),
                      (uint64_t)j->gv_util[g] * 100, ts[0], tl[0]);
    }
    for (uint32_t g = 0; g < o->gpus; g++) {
        if (tw_synth_out_reserve(w, err, el) != 0)
            return -1;
        tw_synth_line(w, n, j->gpu_mem_pfx[g], strlen(j->gpu_mem_pfx[g]),
                      (uint64_t)j->gv_mem[g] * 100, ts[0], tl[0]);
    }
    for (uint32_t c = 0; c < o->cores; c++) {
        if (tw_synth_out_reserve(w, err, el) != 0)
            return -1;
        tw_synth_line(w, n, j->cpu_util_pfx[c], strlen(j->cpu_util_pfx[c]),
                      j->cv_util[c], ts[1], tl[1]);
    }
    for (uint32_t c = 0; c < o->cores; c++) {
        if (tw_synth_out_reserve(w, err, el) != 0)
            return -1;
        tw_synth_line(w, n, j->cpu_wait_pfx[c], strlen(j->cpu_wait_pfx[c]),
                      j->cv_wait[c], ts[1], tl[1]);
    }
    if (tw_synth_out_reserve(w, err, el) != 0)
        return -1;
    TW_SYNTH_FIXED_LINE(w, n,
                        "{\"Type\":\"memory\",\"Name\":\"MemoryUsedPercent\","
                        "\"Dimension\":\"\",\"Value\":",
                        mem_h, ts[2], tl[2]);
    TW_SYNTH_FIXED_LINE(w, n,
                        "{\"Type\":\"network\",\"Name\":"
                        "\"ReceiveBytesPerSecond\",\"Dimension\":"
                        "\"Algorithm\",\"Value\":",
                        net_h[0], ts[3], tl[3]);
    if (tw_synth_out_reserve(w, err, el) != 0)
        return -1;
    TW_SYNTH_FIXED_LINE(w, n,
                        "{\"Type\":\"network\",\"Name\":"
                        "\"TransmitBytesPerSecond\",\"Dimension\":"
                        "\"Algorithm\",\"Value\":",
                        net_h[1], ts[3], tl[3]);
    TW_SYNTH_FIXED_LINE(w, n,
                        "{\"Type\":\"i/o\",\"Name\":\"IOPS\",\"Dimension\":"
                        "\"\",\"Value\":",
                        io_h[0], ts[4], tl[4]);
    if (tw_synth_out_reserve(w, err, el) != 0)
        return -1;
    TW_SYNTH_FIXED_LINE(w, n,
                        "{\"Type\":\"i/o\",\"Name\":"
                        "\"ReadThroughputInBytesPerSecond\",\"Dimension\":"
                        "\"\",\"Value\":",
                        io_h[1], ts[4], tl[4]);
    TW_SYNTH_FIXED_LINE(w, n,
                        "{\"Type\":\"i/o\",\"Name\":"
                        "\"WriteThroughputInBytesPerSecond\",\"Dimension\":"
                        "\"\",\"Value\":",
                        io_h[2], ts[4], tl[4]);
    j->st.samples += util_gpus + o->gpus + 2u * o->cores + 6u;
    return 0;
}

/* Sets n->next_t for round n->round: the grid point plus 0-0.8 ms. */
static void tw_synth_next_round_t(const tw_synth_job *j, tw_synth_node *n)
{
    int64_t jit = (int64_t)tw_synth_below(&n->sys, 8000);
    if (j->o.aligned_samples)
        jit = 0;
    n->next_t = (n->grid0_us + (int64_t)n->round * j->interval_us) * 10 + jit;
}

static void tw_synth_report(tw_synth_job *j, double frac)
{
    if (j->o.progress)
        j->o.progress(j->o.progress_ctx, frac > 1 ? 1 : frac, &j->st);
}

/* System files are written first (the first half of the work when
 * traces follow), then the traces node by node. */
static double tw_synth_frac(const tw_synth_job *j, double sys_frac)
{
    return j->o.framework ? 0.5 * sys_frac : sys_frac;
}

/* part = fraction of the current node's trace written. */
static void tw_synth_report_fw(tw_synth_job *j, double part)
{
    if (part > 1)
        part = 1;
    tw_synth_report(j, 0.5 + 0.5 * (j->fw_done + part) / (double)j->o.nodes);
}

static int tw_synth_write_system(tw_synth_job *j)
{
    const tw_synth_opts *o = &j->o;
    char dir[PATH_MAX], path[PATH_MAX], hour[11], made_hour[11] = "";
    int64_t first_min = (j->start_us / 1000000) / 60 * 60;
    int64_t end_s = (j->end_us + 999999) / 1000000;
    uint64_t minutes = (uint64_t)((end_s - first_min + 59) / 60);
    uint64_t mdone = 0;
    for (uint32_t i = 0; i < o->nodes; i++)
        tw_synth_next_round_t(j, &j->nodes[i]);
    for (int64_t m = first_min; m < end_s; m += 60, mdone++) {
        int64_t m_end_100ns = (m + 60) * 10000000;
        for (uint32_t i = 0; i < o->nodes; i++) {
            tw_synth_node *n = &j->nodes[i];
            if (n->next_t >= m_end_100ns || n->next_t / 10 >= j->end_us)
                continue;
            tw_synth_hour(m, hour);
            if (strcmp(hour, made_hour) != 0) {
                if (tw_synth_pathf(dir, j->err, j->errlen,
                                   "%s/system/incremental/%s", o->out_dir,
                                   hour) != 0 ||
                    tw_synth_mkdirs(dir, j->err, j->errlen) != 0)
                    return -1;
                memcpy(made_hour, hour, sizeof(hour));
            }
            if (tw_synth_pathf(path, j->err, j->errlen, "%s/%lld.algo-%u.json",
                               dir, (long long)m, i + 1) != 0)
                return -1;
            if (tw_synth_out_open(&j->sysw, path, j->err, j->errlen) != 0)
                return -1;
            while (n->next_t < m_end_100ns && n->next_t / 10 < j->end_us) {
                if (tw_synth_write_round(j, n, n->next_t) != 0) {
                    tw_synth_out_close(&j->sysw, NULL, 0);
                    return -1;
                }
                n->round++;
                tw_synth_next_round_t(j, n);
            }
            j->st.bytes += j->sysw.written;
            j->st.files++;
            if (tw_synth_out_close(&j->sysw, j->err, j->errlen) != 0)
                return -1;
        }
        tw_synth_report(
            j, tw_synth_frac(j, (double)(mdone + 1) / (double)minutes));
    }
    return 0;
}

/* ------------------------------------------------------------------ */
/* Framework traces                                                   */

enum tw_synth_phase {
    TW_SYNTH_PH_TRAIN,
    TW_SYNTH_PH_EVAL,
    TW_SYNTH_PH_FWD,
    TW_SYNTH_PH_BWD,
    TW_SYNTH_PH_ITER,
    TW_SYNTH_PH_WORKER,
    TW_SYNTH_PH_INIT,
    TW_SYNTH_PH_CPUF, /* detailed profiling: operators  */
    TW_SYNTH_PH_GPUF, /* detailed profiling: kernels    */
    TW_SYNTH_PH_HVD0, /* Horovod: one tensor's ops      */
    TW_SYNTH_PH_HVD1,
    TW_SYNTH_NPHASES
};

static const char *const tw_synth_phase_name[TW_SYNTH_NPHASES] = {
    "Step:ModeKeys.TRAIN",
    "Step:ModeKeys.EVAL",
    "Forward-SubModuleInternal",
    "Backward-SubModuleInternal",
    "DataLoaderIter",
    "DataLoaderWorker",
    "DataLoaderIterInitialize",
    "cpu_functions",
    "gpu_functions-dev:0",
    "Adam_Allreduce/HorovodAllreduce_grad_fc_weight_0",
    "Adam_Allreduce/HorovodAllreduce_grad_conv1_weight_0",
};

/* Modules of the model: forward in this order, backward reversed; each
 * with its share of the forward/backward time. */
static const char *const tw_synth_module[] = {"conv1", "layer1", "layer2",
                                              "fc"};
static const double tw_synth_module_share[] = {0.15, 0.35, 0.40, 0.10};
#define TW_SYNTH_NMODULES 4
/* Detailed profiling: per module its operator (forward, backward) and the
 * GPU kernel it launches. */
static const char *const tw_synth_op_fwd[] = {
    "aten::conv2d", "aten::batch_norm", "aten::addmm", "aten::linear"};
static const char *const tw_synth_op_bwd[] = {
    "aten::convolution_backward", "aten::native_batch_norm_backward",
    "aten::mm", "aten::mm"};
static const char *const tw_synth_kernel[] = {
    "implicit_convolve_sgemm", "bn_fw_tr_1C11_kernel_NCHW",
    "volta_sgemm_128x64_nn", "volta_sgemm_32x32_sliced1x4_nn"};
/* Detailed profiling covers TRAIN steps from this one on. */
#define TW_SYNTH_DETAILED_FROM 5

typedef enum {
    TW_SYNTH_ARGS_STEP,    /* {"pid": P, "step_num": "N"} */
    TW_SYNTH_ARGS_STEPNUM, /* {"step_num": "N"}          */
    TW_SYNTH_ARGS_PID,     /* {"pid": P}                  */
    TW_SYNTH_ARGS_INIT,    /* {"pin_memory": b, "num_workers": n} */
} tw_synth_args;

typedef struct tw_synth_trace {
    tw_synth_job *j;
    tw_synth_node *n;
    tw_synth_out *w;
    int64_t base_us; /* start_time_since_epoch_in_micros            */
    int open;
    int64_t min_end;    /* earliest event end in the open file         */
    int64_t max_end;    /* latest event end: the file's name           */
    int64_t hour_key;   /* UTC hour (epoch s / 3600) of the open file  */
    int64_t rotate_us;  /* span of event ends that closes a file       */
    uint32_t rank;      /* global rank: node × ranks_per_node + r      */
    const char *suffix; /* file name end: pythontimeline, horovod_timeline */
    int nevents;        /* trace events in the open file               */
    int phase_pid[TW_SYNTH_NPHASES];
    int next_pid;
    char tmp_path[PATH_MAX];
    char made_hour[11];
} tw_synth_trace;

static int tw_synth_trace_close(tw_synth_trace *tr)
{
    tw_synth_job *j = tr->j;
    if (!tr->open)
        return 0;
    tw_synth_out *w = tr->w;
    if (tw_synth_out_reserve(w, j->err, j->errlen) != 0)
        return -1;
    TW_SYNTH_PUTS(w, "\n]\n");
    j->st.bytes += w->written;
    j->st.files++;
    if (tw_synth_out_close(w, j->err, j->errlen) != 0)
        return -1;
    tr->open = 0;
    char hour[11], dir[PATH_MAX], path[PATH_MAX];
    tw_synth_hour(tr->max_end / 1000000, hour);
    if (tw_synth_pathf(dir, j->err, j->errlen, "%s/framework/pevents/%s",
                       j->o.out_dir, hour) != 0)
        return -1;
    if (strcmp(hour, tr->made_hour) != 0) {
        if (tw_synth_mkdirs(dir, j->err, j->errlen) != 0)
            return -1;
        memcpy(tr->made_hour, hour, sizeof(hour));
    }
    if (tw_synth_pathf(path, j->err, j->errlen, "%s/%lld_%u-algo-%u_%s.json",
                       dir, (long long)tr->max_end, tr->rank, tr->n->idx + 1,
                       tr->suffix) != 0)
        return -1;
    if (access(path, F_OK) == 0) {
        tw_synth_errf(j->err, j->errlen,
                      "trace file %s already exists (two files with one "
                      "end time)",
                      path);
        return -1;
    }
    if (rename(tr->tmp_path, path) != 0) {
        tw_synth_errf(j->err, j->errlen, "renaming %s to %s: %s", tr->tmp_path,
                      path, strerror(errno));
        return -1;
    }
    double node_s = (double)(j->end_us - j->start_us);
    double part = (double)(tr->max_end - j->start_us) / node_s;
    tw_synth_report_fw(j, part);
    return 0;
}

static int tw_synth_trace_open(tw_synth_trace *tr, int64_t first_end)
{
    tw_synth_job *j = tr->j;
    if (tw_synth_out_open(tr->w, tr->tmp_path, j->err, j->errlen) != 0)
        return -1;
    tr->open = 1;
    tr->min_end = first_end;
    tr->max_end = first_end;
    tr->hour_key = first_end / 1000000 / 3600;
    tr->nevents = 0;
    for (int p = 0; p < TW_SYNTH_NPHASES; p++)
        tr->phase_pid[p] = 0;
    tr->next_pid = 1;
    tw_synth_out *w = tr->w;
    TW_SYNTH_PUTS(w, "[\n{\"name\": \"process_name\", \"ph\": \"M\", "
                     "\"pid\": 0, \"args\": "
                     "{\"start_time_since_epoch_in_micros\": ");
    tw_synth_put_u64(w, (uint64_t)tr->base_us);
    TW_SYNTH_PUTS(w, "}},\n{\"name\": \"process_sort_index\", \"ph\": "
                     "\"M\", \"pid\": 0, \"args\": {\"sort_index\": 0}}");
    return 0;
}

static inline void tw_synth_put_str(tw_synth_out *w, const char *s)
{
    tw_synth_put(w, s, strlen(s));
}

/* Writes one X event, rotating the file first when needed: when the file
 * would span 60 s of event ends or more (the agent's close interval;
 * events are written roughly in completion order, so the span is taken
 * over all event ends of the file), at a new UTC hour, or at 10 MB. */
static int tw_synth_trace_prepare(tw_synth_trace *tr, enum tw_synth_phase ph,
                                  int64_t end_us, int may_rotate)
{
    tw_synth_job *j = tr->j;
    if (tr->open && may_rotate &&
        ((end_us > tr->max_end ? end_us : tr->max_end) -
                 (end_us < tr->min_end ? end_us : tr->min_end) >=
             tr->rotate_us ||
         end_us / 1000000 / 3600 != tr->hour_key ||
         tr->w->written >= TW_SYNTH_TRACE_MAX_BYTES)) {
        if (tw_synth_trace_close(tr) != 0)
            return -1;
    }
    if (!tr->open && tw_synth_trace_open(tr, end_us) != 0)
        return -1;
    tw_synth_out *w = tr->w;
    if (tw_synth_out_reserve(w, j->err, j->errlen) != 0)
        return -1;
    if (tr->phase_pid[ph] == 0) {
        int pid = tr->next_pid++;
        tr->phase_pid[ph] = pid;
        TW_SYNTH_PUTS(w, ",\n{\"name\": \"process_name\", \"ph\": \"M\", "
                         "\"pid\": ");
        tw_synth_put_u64(w, (uint64_t)pid);
        TW_SYNTH_PUTS(w, ", \"args\": {\"name\": \"");
        tw_synth_put_str(w, tw_synth_phase_name[ph]);
        TW_SYNTH_PUTS(w, "\"}},\n{\"name\": \"process_sort_index\", \"ph\": "
                         "\"M\", \"pid\": ");
        tw_synth_put_u64(w, (uint64_t)pid);
        TW_SYNTH_PUTS(w, ", \"args\": {\"sort_index\": ");
        tw_synth_put_u64(w, (uint64_t)pid);
        TW_SYNTH_PUTS(w, "}}");
    }
    return 0;
}

/* An event ending at end_us was written; `counts`: it is a whole event
 * (an X event, or the B of a B/E pair) for the statistics. */
static void tw_synth_trace_noted(tw_synth_trace *tr, int64_t end_us, int counts)
{
    if (end_us > tr->max_end)
        tr->max_end = end_us;
    if (end_us < tr->min_end)
        tr->min_end = end_us;
    tr->nevents++;
    tr->j->st.events += (uint64_t)counts;
}

/* Writes one B event (name) or E event (name NULL: written as "", as the
 * reference's rotation of Horovod's timeline does) of phase ph at ts_us;
 * a file rotates on B events' times as on X events' ends, never between a
 * B and its E: the reference crashes on a pair split over two files
 * (tests/diff/README.md). */
static int tw_synth_trace_be(tw_synth_trace *tr, enum tw_synth_phase ph,
                             const char *name, int64_t ts_us)
{
    if (tw_synth_trace_prepare(tr, ph, ts_us, name != NULL) != 0)
        return -1;
    tw_synth_out *w = tr->w;
    TW_SYNTH_PUTS(w, ",\n{\"name\": \"");
    tw_synth_put_str(w, name ? name : "");
    TW_SYNTH_PUTS(w, "\", \"pid\": ");
    tw_synth_put_u64(w, (uint64_t)tr->phase_pid[ph]);
    if (name)
        TW_SYNTH_PUTS(w, ", \"ph\": \"B\", \"ts\": ");
    else
        TW_SYNTH_PUTS(w, ", \"ph\": \"E\", \"ts\": ");
    tw_synth_put_u64(w, (uint64_t)(ts_us - tr->base_us));
    TW_SYNTH_PUTS(w, "}");
    tw_synth_trace_noted(tr, ts_us, name != NULL);
    return 0;
}

static int tw_synth_trace_event(tw_synth_trace *tr, enum tw_synth_phase ph,
                                const char *name, int64_t start_us,
                                int64_t dur_us, tw_synth_args ak, uint64_t a1,
                                uint64_t a2)
{
    int64_t end_us = start_us + dur_us;
    if (tw_synth_trace_prepare(tr, ph, end_us, 1) != 0)
        return -1;
    tw_synth_out *w = tr->w;
    TW_SYNTH_PUTS(w, ",\n{\"name\": \"");
    tw_synth_put_str(w, name);
    TW_SYNTH_PUTS(w, "\", \"pid\": ");
    tw_synth_put_u64(w, (uint64_t)tr->phase_pid[ph]);
    TW_SYNTH_PUTS(w, ", \"ph\": \"X\", \"ts\": ");
    tw_synth_put_u64(w, (uint64_t)(start_us - tr->base_us));
    TW_SYNTH_PUTS(w, ", \"dur\": ");
    tw_synth_put_u64(w, (uint64_t)dur_us);
    TW_SYNTH_PUTS(w, ", \"args\": {");
    switch (ak) {
    case TW_SYNTH_ARGS_STEP:
        TW_SYNTH_PUTS(w, "\"pid\": ");
        tw_synth_put_u64(w, a1);
        TW_SYNTH_PUTS(w, ", \"step_num\": \"");
        tw_synth_put_u64(w, a2);
        TW_SYNTH_PUTS(w, "\"");
        break;
    case TW_SYNTH_ARGS_STEPNUM:
        TW_SYNTH_PUTS(w, "\"step_num\": \"");
        tw_synth_put_u64(w, a1);
        TW_SYNTH_PUTS(w, "\"");
        break;
    case TW_SYNTH_ARGS_PID:
        TW_SYNTH_PUTS(w, "\"pid\": ");
        tw_synth_put_u64(w, a1);
        break;
    case TW_SYNTH_ARGS_INIT:
        if (a1)
            TW_SYNTH_PUTS(w, "\"pin_memory\": true, \"num_workers\": ");
        else
            TW_SYNTH_PUTS(w, "\"pin_memory\": false, \"num_workers\": ");
        tw_synth_put_u64(w, a2);
        break;
    }
    TW_SYNTH_PUTS(w, "}}");
    tw_synth_trace_noted(tr, end_us, 1);
    return 0;
}

/* Data-loader worker processes: back-to-back fetches of 0.3-0.85 s with
 * 5-50 ms gaps, so every worker starts at least one event per second. */
typedef struct tw_synth_worker {
    int64_t start, dur;
    uint64_t pid;
} tw_synth_worker;

static void tw_synth_worker_next(tw_synth_rng *r, tw_synth_worker *wk)
{
    wk->start += wk->dur + 5000 + (int64_t)tw_synth_below(r, 45000);
    wk->dur = 300000 + (int64_t)tw_synth_below(r, 550000);
}

/* Emit the worker events that end by `until`. */
static int tw_synth_flush_workers(tw_synth_trace *tr, tw_synth_worker *wk,
                                  uint32_t nw, int64_t until)
{
    for (uint32_t k = 0; k < nw; k++) {
        while (wk[k].start + wk[k].dur <= until) {
            if (tw_synth_trace_event(tr, TW_SYNTH_PH_WORKER, "DataLoaderWorker",
                                     wk[k].start, wk[k].dur, TW_SYNTH_ARGS_PID,
                                     wk[k].pid, 0) != 0)
                return -1;
            tw_synth_worker_next(&tr->n->fw, &wk[k]);
        }
    }
    return 0;
}

static int64_t tw_synth_jitter_dur(tw_synth_rng *r, double base_s)
{
    return (int64_t)llround(base_s * tw_synth_range(r, 0.92, 1.08) * 1e6);
}

/* Detailed profiling of one module event [t, t + d): the operator on the
 * CPU, then the kernel it launches on the GPU. */
static int tw_synth_detailed(tw_synth_trace *tr, const char *op,
                             const char *kernel, int64_t t, int64_t d,
                             uint64_t step_num)
{
    if (tw_synth_trace_event(tr, TW_SYNTH_PH_CPUF, op, t + d / 20, d * 3 / 10,
                             TW_SYNTH_ARGS_STEPNUM, step_num, 0) != 0)
        return -1;
    return tw_synth_trace_event(tr, TW_SYNTH_PH_GPUF, kernel, t + d * 3 / 10,
                                d * 6 / 10, TW_SYNTH_ARGS_STEPNUM, step_num, 0);
}

/* One step: loader fetch, forward modules, backward modules (TRAIN only),
 * the step event itself; with `detailed`, each module's operator and
 * kernel too. Returns the step's end through *cursor. */
static int tw_synth_step(tw_synth_trace *tr, int eval, uint64_t step_num,
                         int64_t dur, int64_t fetch_us, uint64_t main_pid,
                         const char *iter_name, int detailed, int64_t *cursor)
{
    tw_synth_rng *r = &tr->n->fw;
    int64_t f0 = *cursor + 100 + (int64_t)tw_synth_below(r, 300);
    if (tw_synth_trace_event(tr, TW_SYNTH_PH_ITER, iter_name, f0, fetch_us,
                             TW_SYNTH_ARGS_PID, main_pid, 0) != 0)
        return -1;
    int64_t s0 = f0 + fetch_us + 50 + (int64_t)tw_synth_below(r, 150);
    int64_t t = s0 + 200;
    double fwd_share = eval ? 0.85 : 0.35;
    for (int m = 0; m < TW_SYNTH_NMODULES; m++) {
        int64_t d = (int64_t)(dur * fwd_share * tw_synth_module_share[m]);
        if (tw_synth_trace_event(tr, TW_SYNTH_PH_FWD, tw_synth_module[m], t, d,
                                 TW_SYNTH_ARGS_STEPNUM, step_num, 0) != 0)
            return -1;
        if (detailed &&
            tw_synth_detailed(tr, tw_synth_op_fwd[m], tw_synth_kernel[m], t, d,
                              step_num) != 0)
            return -1;
        t += d;
    }
    if (!eval) {
        t += 100;
        for (int m = TW_SYNTH_NMODULES - 1; m >= 0; m--) {
            int64_t d = (int64_t)(dur * 0.55 * tw_synth_module_share[m]);
            if (tw_synth_trace_event(tr, TW_SYNTH_PH_BWD, tw_synth_module[m], t,
                                     d, TW_SYNTH_ARGS_STEPNUM, step_num,
                                     0) != 0)
                return -1;
            if (detailed &&
                tw_synth_detailed(tr, tw_synth_op_bwd[m], tw_synth_kernel[m], t,
                                  d, step_num) != 0)
                return -1;
            t += d;
        }
    }
    enum tw_synth_phase ph = eval ? TW_SYNTH_PH_EVAL : TW_SYNTH_PH_TRAIN;
    if (tw_synth_trace_event(tr, ph, tw_synth_phase_name[ph], s0, dur,
                             TW_SYNTH_ARGS_STEP, main_pid, step_num) != 0)
        return -1;
    *cursor = s0 + dur;
    return 0;
}

#define TW_SYNTH_EVAL_STEPS 30

/* --horovod: the TRAIN steps of a rank (end, duration), kept while its
 * pythontimeline trace is written, then written as Horovod allreduces. */
typedef struct tw_synth_hvd_steps {
    int64_t *end_us; /* pairs: end, duration */
    size_t n, cap;
} tw_synth_hvd_steps;

static int tw_synth_note_step(tw_synth_hvd_steps *h, int64_t end_us,
                              int64_t dur_us)
{
    if (h->n == h->cap) {
        size_t cap = h->cap ? 2 * h->cap : 1024;
        int64_t *p = realloc(h->end_us, cap * 2 * sizeof(*p));
        if (p == NULL)
            return -1;
        h->end_us = p;
        h->cap = cap;
    }
    h->end_us[2 * h->n] = end_us;
    h->end_us[2 * h->n + 1] = dur_us;
    h->n++;
    return 0;
}

/* The rank's Horovod timeline, as the reference's hook rotates Horovod's
 * own timeline into framework/pevents (`*_horovod_timeline.json`, B/E
 * pairs, the E events named ""): in the last 30 % of every TRAIN step
 * (its backward pass), each of two gradient tensors is negotiated and
 * then all-reduced, one after the other. Written after the rank's
 * pythontimeline trace, with the same start time and rotation. */
static int tw_synth_write_horovod(tw_synth_job *j, tw_synth_node *n,
                                  const tw_synth_trace *py,
                                  const tw_synth_hvd_steps *h)
{
    tw_synth_trace hv;
    memset(&hv, 0, sizeof(hv));
    hv.j = j;
    hv.n = n;
    hv.w = py->w;
    hv.rank = py->rank;
    hv.suffix = "horovod_timeline";
    hv.rotate_us = py->rotate_us;
    hv.base_us = py->base_us;
    if (tw_synth_pathf(hv.tmp_path, j->err, j->errlen,
                       "%s/framework/pevents/.%u-algo-%u.hvd.tmp", j->o.out_dir,
                       hv.rank, n->idx + 1) != 0)
        return -1;
    static const enum tw_synth_phase tensor[2] = {TW_SYNTH_PH_HVD0,
                                                  TW_SYNTH_PH_HVD1};
    int rc = 0;
    for (size_t i = 0; i < h->n && rc == 0; i++) {
        int64_t end = h->end_us[2 * i], dur = h->end_us[2 * i + 1];
        int64_t t = end - dur * 3 / 10;
        for (int k = 0; k < 2 && rc == 0; k++) {
            int64_t neg = dur / 50 + 1, red = dur / 10 + 1;
            rc = tw_synth_trace_be(&hv, tensor[k], "NEGOTIATE_ALLREDUCE", t) ||
                 tw_synth_trace_be(&hv, tensor[k], NULL, t + neg) ||
                 tw_synth_trace_be(&hv, tensor[k], "ALLREDUCE", t + neg) ||
                 tw_synth_trace_be(&hv, tensor[k], NULL, t + neg + red);
            t += neg + red;
        }
    }
    if (rc == 0)
        rc = tw_synth_trace_close(&hv);
    if (rc != 0 && hv.open) {
        tw_synth_out_close(hv.w, NULL, 0);
        unlink(hv.tmp_path);
    }
    return rc != 0 ? -1 : 0;
}

/* The trace of rank `lr` (0-based within the node) of node n. */
static int tw_synth_write_node_trace(tw_synth_job *j, tw_synth_node *n,
                                     uint32_t lr)
{
    enum tw_synth_kind k = j->p->kind;
    tw_synth_rng *r = &n->fw;
    if (lr > 0) /* own stream per extra rank; rank 0 keeps the default bytes */
        tw_synth_rng_init(r, j->o.seed, n->idx, 100 + lr);
    tw_synth_trace tr;
    memset(&tr, 0, sizeof(tr));
    tw_synth_hvd_steps hv = {NULL, 0, 0};
    tr.j = j;
    tr.n = n;
    tr.w = &j->fww;
    tr.rank = n->idx * j->o.ranks_per_node + lr;
    tr.suffix = "pythontimeline";
    tr.rotate_us = (int64_t)llround(j->o.rotate_s * 1e6);
    tr.base_us = j->start_us + 200000 + (int64_t)tw_synth_below(r, 1300000);
    if (tw_synth_pathf(tr.tmp_path, j->err, j->errlen,
                       "%s/framework/pevents/.%u-algo-%u.tmp", j->o.out_dir,
                       tr.rank, n->idx + 1) != 0)
        return -1;

    /* The same pids on every node, as in containers that start their
     * processes in the same order; distinct pids per node would add up
     * in the Dataloader rule, which counts pids over all nodes against
     * the cores of one (RULES.md §3.9). */
    tw_synth_rng pid_rng;
    tw_synth_rng_init(&pid_rng, j->o.seed, UINT64_MAX, 4);
    uint64_t main_pid = 1000 + tw_synth_below(&pid_rng, 30000);
    uint32_t nw = k == TW_SYNTH_DATALOADER ? 0 : j->o.cores;
    if (j->o.pids_per_rank)
        main_pid += (uint64_t)lr * (nw + 1);
    int pin = k != TW_SYNTH_DATALOADER;
    const char *iter_name =
        nw ? "_MultiProcessingDataLoaderIter.DataLoaderIter::GetNext"
           : "_SingleProcessDataLoaderIter.DataLoaderIter::GetNext";
    double step_s = 0.25;
    if (k == TW_SYNTH_SMALL_BATCH)
        step_s = 0.1;
    else if (n->straggler)
        step_s = 0.6;
    else if (k == TW_SYNTH_LOW_GPU)
        step_s = 0.3;
    else if (k == TW_SYNTH_CPU_BOTTLENECK || k == TW_SYNTH_IO_BOTTLENECK)
        step_s = 0.45;
    if (j->o.step_s > 0)
        step_s = j->o.step_s * (n->straggler ? 2.4 : 1.0);
    uint32_t eval_every = j->o.eval_every;
    uint64_t outlier_off = 5 + n->idx % 20;

    int64_t cursor = j->start_us + (int64_t)llround(n->init_s * 1e6);
    int64_t init_at = cursor - 300000;
    tw_synth_worker *wk = NULL;
    if (nw) {
        wk = calloc(nw, sizeof(*wk));
        if (wk == NULL) {
            tw_synth_errf(j->err, j->errlen, "out of memory (workers)");
            return -1;
        }
        for (uint32_t q = 0; q < nw; q++) {
            wk[q].pid = main_pid + 1 + q;
            wk[q].start = init_at + 20000;
            wk[q].dur = 0;
            tw_synth_worker_next(r, &wk[q]);
        }
    }
    int rc = -1;
    if (init_at >= j->end_us) {
        rc = 0; /* the job ends before training starts */
        goto done;
    }
    if (tw_synth_trace_event(&tr, TW_SYNTH_PH_INIT, "DataLoaderIterInitialize",
                             init_at, 2000 + (int64_t)tw_synth_below(r, 8000),
                             TW_SYNTH_ARGS_INIT, (uint64_t)pin, nw) != 0)
        goto done;

    uint64_t train_step = 0, eval_step = 0;
    double node_s = (double)(j->end_us - j->start_us);
    int64_t final_us = (int64_t)llround(j->o.final_s * 1e6);
    for (;;) {
        int eval_now =
            eval_every > 0 && train_step > 0 && train_step % eval_every == 0 &&
            eval_step < (train_step / eval_every) * TW_SYNTH_EVAL_STEPS;
        int64_t dur;
        if (eval_now) {
            dur = tw_synth_jitter_dur(r, step_s * 0.4);
        } else if (train_step == 0) {
            dur = (int64_t)llround(tw_synth_range(r, 2.5, 4.0) * 1e6);
        } else {
            dur = tw_synth_jitter_dur(r, step_s);
            if (k == TW_SYNTH_STEP_OUTLIERS && train_step >= 20 &&
                train_step % 32 == outlier_off)
                dur *= 6;
        }
        int64_t fetch = nw ? 1000 + (int64_t)tw_synth_below(r, 3000)
                           : 20000 + (int64_t)tw_synth_below(r, 40000);
        if (cursor + 1000 + fetch + dur > j->end_us - final_us)
            break;
        if (nw && tw_synth_flush_workers(&tr, wk, nw, cursor) != 0)
            goto done;
        if (eval_now) {
            if (eval_step % TW_SYNTH_EVAL_STEPS == 0 &&
                tw_synth_trace_event(
                    &tr, TW_SYNTH_PH_INIT, "DataLoaderIterInitialize", cursor,
                    1500, TW_SYNTH_ARGS_INIT, (uint64_t)pin, nw) != 0)
                goto done;
            if (eval_step % TW_SYNTH_EVAL_STEPS == 0)
                cursor += 2000;
            if (tw_synth_step(&tr, 1, eval_step, dur, fetch, main_pid,
                              iter_name, 0, &cursor) != 0)
                goto done;
            eval_step++;
        } else {
            int detailed =
                train_step >= TW_SYNTH_DETAILED_FROM &&
                train_step - TW_SYNTH_DETAILED_FROM < j->o.detailed_steps;
            if (tw_synth_step(&tr, 0, train_step, dur, fetch, main_pid,
                              iter_name, detailed, &cursor) != 0)
                goto done;
            if (j->o.horovod && tw_synth_note_step(&hv, cursor, dur) != 0)
                goto done;
            train_step++;
        }
        if ((train_step & 1023) == 0 && !eval_now)
            tw_synth_report_fw(j, (double)(cursor - j->start_us) / node_s);
    }
    if (nw && tw_synth_flush_workers(&tr, wk, nw, cursor) != 0)
        goto done;
    rc = tw_synth_trace_close(&tr);
    if (rc == 0 && j->o.horovod)
        rc = tw_synth_write_horovod(j, n, &tr, &hv);
done:
    if (rc != 0 && tr.open) {
        tw_synth_out_close(tr.w, NULL, 0);
        unlink(tr.tmp_path);
    }
    free(hv.end_us);
    free(wk);
    return rc;
}

static int tw_synth_write_framework(tw_synth_job *j)
{
    char dir[PATH_MAX];
    if (tw_synth_pathf(dir, j->err, j->errlen, "%s/framework/pevents",
                       j->o.out_dir) != 0 ||
        tw_synth_mkdirs(dir, j->err, j->errlen) != 0)
        return -1;
    for (uint32_t i = 0; i < j->o.nodes; i++) {
        for (uint32_t lr = 0; lr < j->o.ranks_per_node; lr++) {
            if (tw_synth_write_node_trace(j, &j->nodes[i], lr) != 0)
                return -1;
        }
        j->fw_done = i + 1;
    }
    return 0;
}

static int tw_synth_write_end_marker(tw_synth_job *j, const char *sub)
{
    char dir[PATH_MAX], path[PATH_MAX];
    if (tw_synth_pathf(dir, j->err, j->errlen, "%s/%s", j->o.out_dir, sub) !=
            0 ||
        tw_synth_mkdirs(dir, j->err, j->errlen) != 0 ||
        tw_synth_pathf(path, j->err, j->errlen, "%s/training_job_end.ts",
                       dir) != 0)
        return -1;
    if (tw_synth_out_open(&j->sysw, path, j->err, j->errlen) != 0)
        return -1;
    tw_synth_put_u64(&j->sysw, (uint64_t)((j->end_us + 999999) / 1000000));
    TW_SYNTH_PUTS(&j->sysw, "\n");
    j->st.bytes += j->sysw.written;
    j->st.files++;
    return tw_synth_out_close(&j->sysw, j->err, j->errlen);
}

int tw_synth_write(const tw_synth_opts *opts, tw_synth_stats *stats, char *err,
                   size_t errlen)
{
    if (stats)
        memset(stats, 0, sizeof(*stats));
    if (opts == NULL || opts->out_dir == NULL || opts->out_dir[0] == '\0') {
        tw_synth_errf(err, errlen, "OUT_DIR is missing");
        return -1;
    }
    tw_synth_job j;
    memset(&j, 0, sizeof(j));
    j.o = *opts;
    j.err = err;
    j.errlen = errlen;
    if (tw_synth_opts_resolve(&j.o, err, errlen) != 0)
        return -1;
    j.p = tw_synth_preset_find(j.o.preset);
    if (tw_synth_check_out_dir(j.o.out_dir, err, errlen) != 0)
        return -1;
    int rc = -1;
    if (tw_synth_job_init(&j) != 0)
        goto out;
    if (tw_synth_write_system(&j) != 0)
        goto out;
    if (j.o.framework && tw_synth_write_framework(&j) != 0)
        goto out;
    if (tw_synth_write_end_marker(&j, "system") != 0)
        goto out;
    if (j.o.framework && tw_synth_write_end_marker(&j, "framework") != 0)
        goto out;
    tw_synth_report(&j, 1.0);
    rc = 0;
out:
    if (stats)
        *stats = j.st;
    tw_synth_job_free(&j);
    return rc;
}
