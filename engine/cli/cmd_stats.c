/*
 * cmd_stats.c - `trainwatch stats DIR`: job, step, utilization, device
 * usage and training-phase statistics of a profiler-output folder
 * (engine/tools/job_statistics.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_options.h"
#include "cli_ranges.h"
#include "commands.h"
#include "job_statistics.h"
#include "trainwatch/plugin.h"

enum {
    OPT_JSON = 1,
    OPT_CSV,
    OPT_BY,
    OPT_BY_STEP,
    OPT_TIME,
    OPT_PER_PHASE,
    OPT_RANGES,
    OPT_QUIET
};

static const tw_cli_option stats_options[] = {
    {"json", 0, NULL, "print one JSON object instead of the text report",
     OPT_JSON},
    {"csv", 0, NULL, "print long-form CSV: table,group,node,phase,stat,value",
     OPT_CSV},
    {"by", 0, "GROUPING",
     "step durations grouped by training_phase (default: the Step:ModeKeys "
     "events), framework_metric (every event with a step, by name) or "
     "process (by the event's phase)",
     OPT_BY},
    {"by-step", 0, "A:B",
     "only what lies within TRAIN/GLOBAL steps A to B (the first one's start "
     "to the last one's end)",
     OPT_BY_STEP},
    {"time", 0, "T1:T2",
     "only what lies within [T1, T2], epoch seconds (fractions allowed)",
     OPT_TIME},
    {"per-phase", 0, NULL, "utilization also per training-phase interval",
     OPT_PER_PHASE},
    {"ranges", 0, "LIST",
     "device usage ranges, percent, tested in order, ends inclusive "
     "(default: 90:100,10:90,0:10)",
     OPT_RANGES},
    {"quiet", 0, NULL, "no bad-input messages on stderr", OPT_QUIET},
    {NULL, 0, NULL, NULL, 0}};

static const tw_cli_command stats_command = {
    .name = "stats",
    .synopsis = "DIR [--json|--csv] [--by-step A:B | --time T1:T2] [options]",
    .description =
        "Statistics of a profiler-output folder: the job (start, end, "
        "training loop,\ninitialization, finalization), step durations "
        "(mean, min, max, p50, p95,\np99), system utilization per metric "
        "and node, CPU/GPU usage buckets and the\ntraining-phase intervals. "
        "README.md (\"Job statistics\") defines each number.\n",
    .options = stats_options,
    .epilogue = "Exit status: 0 printed, 1 on an error, 2 on bad usage.\n",
};

/* "a:b,c:d,..." -> ranges. 0 or -1. */
static int parse_ranges(const char *s, tw_stats_opts *o)
{
    o->nranges = 0;
    while (*s != '\0') {
        if (o->nranges == TW_STATS_MAX_RANGES)
            return -1;
        char *end;
        double a = strtod(s, &end);
        if (end == s || *end != ':')
            return -1;
        s = end + 1;
        double b = strtod(s, &end);
        if (end == s || (*end != ',' && *end != '\0') || a > b)
            return -1;
        o->ranges[o->nranges++] = (tw_stats_range){a, b};
        s = *end == ',' ? end + 1 : end;
    }
    return o->nranges > 0 ? 0 : -1;
}

int tw_cmd_stats(int argc, char **argv)
{
    tw_stats_opts o;
    memset(&o, 0, sizeof(o));
    tw_stats_format fmt = TW_STATS_TEXT;
    tw_cli_parser p;
    tw_cli_begin(&p, &stats_command, argc, argv);
    for (int id; (id = tw_cli_next(&p)) != TW_CLI_END;) {
        switch (id) {
        case TW_CLI_HELP:
            return 0;
        case TW_CLI_USAGE:
            return 2;
        case OPT_JSON:
            fmt = TW_STATS_JSON;
            break;
        case OPT_CSV:
            fmt = TW_STATS_CSV;
            break;
        case OPT_BY:
            if (strcmp(p.arg, "training_phase") == 0)
                o.by = TW_STATS_BY_PHASE;
            else if (strcmp(p.arg, "framework_metric") == 0)
                o.by = TW_STATS_BY_METRIC;
            else if (strcmp(p.arg, "process") == 0)
                o.by = TW_STATS_BY_PROCESS;
            else
                return tw_cli_usage_error(&stats_command,
                                          "--by: '%s' is not training_phase, "
                                          "framework_metric or process",
                                          p.arg);
            break;
        case OPT_BY_STEP:
            if (tw_cli_parse_step_range(p.arg, &o.step_a, &o.step_b) != 0)
                return tw_cli_usage_error(&stats_command,
                                          "--by-step: '%s' is not A:B with "
                                          "integers A <= B",
                                          p.arg);
            o.has_steps = 1;
            break;
        case OPT_TIME:
            if (tw_cli_parse_time_range(p.arg, &o.from_us, &o.to_us) != 0)
                return tw_cli_usage_error(&stats_command,
                                          "--time: '%s' is not T1:T2 in "
                                          "epoch seconds with T1 <= T2",
                                          p.arg);
            o.has_time = 1;
            break;
        case OPT_PER_PHASE:
            o.per_phase = 1;
            break;
        case OPT_RANGES:
            if (parse_ranges(p.arg, &o) != 0)
                return tw_cli_usage_error(
                    &stats_command,
                    "--ranges: '%s' is not a list of FROM:TO (FROM <= TO, at "
                    "most %d)",
                    p.arg, TW_STATS_MAX_RANGES);
            break;
        case OPT_QUIET:
            o.quiet = 1;
            break;
        }
    }
    if (argc - p.optind != 1)
        return tw_cli_usage_error(&stats_command, "expects one folder DIR");
    char err[1024] = "";
    tw_statistics *s = NULL;
    if (tw_statistics_compute(argv[p.optind], &o, &s, err, sizeof(err)) !=
        TW_OK) {
        fprintf(stderr, "trainwatch stats: %s: %s\n", argv[p.optind], err);
        return 1;
    }
    int rc = tw_statistics_write(s, fmt, stdout);
    tw_statistics_free(s);
    if (rc != TW_OK || fflush(stdout) != 0) {
        fprintf(stderr, "trainwatch stats: writing the output failed\n");
        return 1;
    }
    return 0;
}
