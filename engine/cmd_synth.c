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

#include "clock.h"
#include "commands.h"
#include "synth.h"

static void tw_synth_cmd_usage(FILE *out)
{
    fprintf(
        out,
        "usage: trainwatch synth OUT_DIR [options]\n"
        "\n"
        "Writes a profiler-output folder in the agent's layout (system\n"
        "metrics as JSON lines, framework traces as Chrome trace JSON,\n"
        "end-of-job markers) with a planted problem; deterministic by "
        "seed.\n"
        "OUT_DIR must not exist or must be an empty directory.\n"
        "\n"
        "options:\n"
        "  --preset NAME       what to plant (default: healthy); see\n"
        "                      --list-presets\n"
        "  --nodes N           nodes algo-1..algo-N, 1..4096 (default: the\n"
        "                      preset's, 1; straggler 4)\n"
        "  --cores N           CPU cores per node, 1..1024 (default: the\n"
        "                      preset's, 4; dataloader 16)\n"
        "  --gpus N            GPUs per node, 0..64, 0 = CPU-only job\n"
        "                      (default: the preset's, 1; load_imbalance 4)\n"
        "  --duration D        event time to generate: seconds, or with a\n"
        "                      suffix s, m, h (e.g. 900, 30m, 2h, 1.5h)\n"
        "                      (default: the preset's, long enough for its\n"
        "                      rule's patience: 600 s healthy, 720 s most,\n"
        "                      1000 s gpu_memory_growth, 1800 s slow_init;\n"
        "                      scaled up for intervals above 500 ms)\n"
        "  --interval-ms MS    sampling interval: 100, 200, 500, 1000, 5000\n"
        "                      or 60000 (default: 500)\n"
        "  --seed N            seed of the generator, 0..2^64-1 (default: 1)\n"
        "  --start EPOCH_S     job start, epoch seconds (default:\n"
        "                      1700000000 = 2023-11-14T22:13:20Z)\n"
        "  --no-framework      write system metrics only (default: also\n"
        "                      framework traces)\n"
        "  --list-presets      list the presets, what each plants and which\n"
        "                      rules fire, then exit\n"
        "  -h, --help          this text\n"
        "\n"
        "A one-line summary goes to stderr at the end, and progress every\n"
        "~5 s for long runs.\n");
}

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

int tw_cmd_synth(int argc, char **argv)
{
    tw_synth_opts o;
    tw_synth_opts_default(&o);
    const char *out_dir = NULL;

    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
            tw_synth_cmd_usage(stdout);
            return 0;
        }
        if (strcmp(a, "--list-presets") == 0) {
            tw_synth_cmd_list(stdout);
            return 0;
        }
        if (strcmp(a, "--no-framework") == 0) {
            o.framework = 0;
            continue;
        }
        if (a[0] == '-' && a[1] == '-') {
            /* --name VALUE or --name=VALUE */
            char name[32];
            const char *val = NULL;
            const char *eq = strchr(a, '=');
            size_t nl = eq ? (size_t)(eq - a) : strlen(a);
            if (nl >= sizeof(name)) {
                fprintf(stderr, "trainwatch synth: unknown option '%s'\n", a);
                return 2;
            }
            memcpy(name, a, nl);
            name[nl] = '\0';
            int known =
                strcmp(name, "--preset") == 0 || strcmp(name, "--nodes") == 0 ||
                strcmp(name, "--cores") == 0 || strcmp(name, "--gpus") == 0 ||
                strcmp(name, "--duration") == 0 ||
                strcmp(name, "--interval-ms") == 0 ||
                strcmp(name, "--seed") == 0 || strcmp(name, "--start") == 0;
            if (!known) {
                fprintf(stderr,
                        "trainwatch synth: unknown option '%s' (see "
                        "--help)\n",
                        name);
                return 2;
            }
            if (eq) {
                val = eq + 1;
            } else if (i + 1 < argc) {
                val = argv[++i];
            } else {
                fprintf(stderr, "trainwatch synth: %s needs a value\n", name);
                return 2;
            }
            uint64_t u = 0;
            int bad = 0;
            if (strcmp(name, "--preset") == 0) {
                o.preset = val;
                if (tw_synth_preset_help(val) == NULL) {
                    fprintf(stderr,
                            "trainwatch synth: --preset: unknown preset "
                            "'%s'; one of:",
                            val);
                    const char *const *names = tw_synth_presets();
                    for (size_t k = 0; names[k]; k++)
                        fprintf(stderr, " %s", names[k]);
                    fprintf(stderr, "\n");
                    return 2;
                }
            } else if (strcmp(name, "--nodes") == 0) {
                bad = tw_synth_parse_u64(val, 4096, &u) || u < 1;
                o.nodes = (uint32_t)u;
            } else if (strcmp(name, "--cores") == 0) {
                bad = tw_synth_parse_u64(val, 1024, &u) || u < 1;
                o.cores = (uint32_t)u;
            } else if (strcmp(name, "--gpus") == 0) {
                bad = tw_synth_parse_u64(val, 64, &u);
                o.gpus = (uint32_t)u;
            } else if (strcmp(name, "--duration") == 0) {
                bad = tw_synth_parse_duration(val, &o.duration_s);
            } else if (strcmp(name, "--interval-ms") == 0) {
                bad = tw_synth_parse_u64(val, UINT32_MAX, &u) ||
                      !tw_synth_interval_valid((uint32_t)u);
                o.interval_ms = (uint32_t)u;
            } else if (strcmp(name, "--seed") == 0) {
                bad = tw_synth_parse_u64(val, UINT64_MAX, &u);
                o.seed = u;
            } else { /* --start */
                bad = tw_synth_parse_u64(val, INT64_C(9999999999), &u) ||
                      u < UINT64_C(1000000000);
                o.start_us = (int64_t)u * 1000000;
            }
            if (bad) {
                const char *want =
                    strcmp(name, "--nodes") == 0   ? "an integer 1..4096"
                    : strcmp(name, "--cores") == 0 ? "an integer 1..1024"
                    : strcmp(name, "--gpus") == 0  ? "an integer 0..64"
                    : strcmp(name, "--duration") == 0
                        ? "a positive duration up to a year: seconds or "
                          "N[s|m|h]"
                    : strcmp(name, "--interval-ms") == 0
                        ? "one of 100, 200, 500, 1000, 5000, 60000"
                    : strcmp(name, "--seed") == 0
                        ? "an integer 0..18446744073709551615"
                        : "epoch seconds with 10 digits "
                          "(1000000000..9999999999)";
                fprintf(stderr,
                        "trainwatch synth: %s: invalid value '%s' (expected "
                        "%s)\n",
                        name, val, want);
                return 2;
            }
            continue;
        }
        if (a[0] == '-' && a[1] != '\0') {
            fprintf(stderr,
                    "trainwatch synth: unknown option '%s' (see "
                    "--help)\n",
                    a);
            return 2;
        }
        if (out_dir != NULL) {
            fprintf(stderr,
                    "trainwatch synth: more than one OUT_DIR ('%s' and "
                    "'%s')\n",
                    out_dir, a);
            return 2;
        }
        out_dir = a;
    }
    if (out_dir == NULL) {
        fprintf(stderr, "trainwatch synth: OUT_DIR is missing\n\n");
        tw_synth_cmd_usage(stderr);
        return 2;
    }
    o.out_dir = out_dir;

    char err[512];
    if (tw_synth_cmd_dir_unusable(out_dir, err, sizeof(err))) {
        fprintf(stderr, "trainwatch synth: %s\n", err);
        return 2;
    }
    tw_synth_opts resolved = o;
    if (tw_synth_opts_resolve(&resolved, err, sizeof(err)) != 0) {
        fprintf(stderr, "trainwatch synth: %s\n", err);
        return 2;
    }

    tw_synth_cmd_progress prog;
    prog.t0 = prog.last = (tw_mono_us() / 1e6);
    resolved.progress = tw_synth_cmd_on_progress;
    resolved.progress_ctx = &prog;
    tw_synth_stats st;
    if (tw_synth_write(&resolved, &st, err, sizeof(err)) != 0) {
        fprintf(stderr, "trainwatch synth: %s\n", err);
        return 1;
    }
    double secs = (tw_mono_us() / 1e6) - prog.t0;
    fprintf(stderr,
            "synth: %s: preset %s, %u node(s) x %u cores x %u GPUs, %.0f s at "
            "%u ms, seed %" PRIu64 ": %" PRIu64 " files, %" PRIu64
            " samples, %" PRIu64 " events, %.1f MB in %.2f s (%.0f MB/s)\n",
            out_dir, resolved.preset, resolved.nodes, resolved.cores,
            resolved.gpus, resolved.duration_s, resolved.interval_ms,
            resolved.seed, st.files, st.samples, st.events, st.bytes / 1e6,
            secs, secs > 0 ? st.bytes / 1e6 / secs : 0.0);
    return 0;
}
