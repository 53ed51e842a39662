/*
 * cmd_timeline.c - `trainwatch timeline DIR -o merged.json`: a folder's
 * framework traces and system metrics merged into one Chrome trace-event
 * file (engine/tools/timeline.h).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_options.h"
#include "cli_ranges.h"
#include "commands.h"
#include "timeline.h"
#include "trainwatch/plugin.h"

enum {
    OPT_OUTPUT = 1,
    OPT_START,
    OPT_END,
    OPT_STEPS,
    OPT_FRAMEWORK_ONLY,
    OPT_SYSTEM_METRICS,
    OPT_BUFFER_MB,
    OPT_QUIET
};

static const tw_cli_option timeline_options[] = {
    {"output", 'o', "FILE", "where to write the merged trace (required)",
     OPT_OUTPUT},
    {"start", 0, "T",
     "only events that end at or after T (epoch seconds, fractions allowed)",
     OPT_START},
    {"end", 0, "T", "only events that start at or before T", OPT_END},
    {"steps", 0, "A:B",
     "only TRAIN/GLOBAL steps A to B: from the first one's start to the last "
     "one's end",
     OPT_STEPS},
    {"framework-only", 0, NULL, "no system metrics", OPT_FRAMEWORK_ONLY},
    {"system-metrics", 0, "LIST",
     "only these system metrics: a comma list of types (cpu, gpu, memory, "
     "i/o, network), names (gpu0, IOPS) or dimensions (GPUUtilization); "
     "default: all",
     OPT_SYSTEM_METRICS},
    {"buffer-mb", 0, "N",
     "memory for sorting, MiB (default 16); more goes through a temporary "
     "file in $TMPDIR",
     OPT_BUFFER_MB},
    {"quiet", 0, NULL, "no bad-input messages on stderr", OPT_QUIET},
    {NULL, 0, NULL, NULL, 0}};

static const tw_cli_command timeline_command = {
    .name = "timeline",
    .synopsis = "DIR -o FILE [--start T --end T | --steps A:B] "
                "[--framework-only | --system-metrics LIST]",
    .description =
        "Merges every framework trace file of a profiler-output folder and "
        "its system\nmetrics into one Chrome trace-event JSON file "
        "(Perfetto, chrome://tracing),\nin time order, with absolute times "
        "(us since the epoch). Each framework node\n(host and rank) is a "
        "process with a thread per phase; each host's system\nmetrics are "
        "counter tracks. Memory stays the same however large the folder.\n",
    .options = timeline_options,
    .epilogue = "Exit status: 0 written, 1 on an error, 2 on bad usage.\n",
};

int tw_cmd_timeline(int argc, char **argv)
{
    tw_timeline_opts o;
    memset(&o, 0, sizeof(o));
    const char *output = NULL;
    int has_start = 0, has_end = 0;
    tw_cli_parser p;
    tw_cli_begin(&p, &timeline_command, argc, argv);
    for (int id; (id = tw_cli_next(&p)) != TW_CLI_END;) {
        switch (id) {
        case TW_CLI_HELP:
            return 0;
        case TW_CLI_USAGE:
            return 2;
        case OPT_OUTPUT:
            output = p.arg;
            break;
        case OPT_START:
        case OPT_END: {
            int64_t t;
            if (tw_cli_parse_time(p.arg, &t) != 0)
                return tw_cli_usage_error(&timeline_command,
                                          "--%s: '%s' is not a time in epoch "
                                          "seconds",
                                          id == OPT_START ? "start" : "end",
                                          p.arg);
            if (id == OPT_START) {
                o.from_us = t;
                has_start = 1;
            } else {
                o.to_us = t;
                has_end = 1;
            }
            break;
        }
        case OPT_STEPS:
            if (tw_cli_parse_step_range(p.arg, &o.step_a, &o.step_b) != 0)
                return tw_cli_usage_error(&timeline_command,
                                          "--steps: '%s' is not A:B with "
                                          "integers A <= B",
                                          p.arg);
            o.has_steps = 1;
            break;
        case OPT_FRAMEWORK_ONLY:
            o.framework_only = 1;
            break;
        case OPT_SYSTEM_METRICS:
            o.system_metrics = p.arg;
            break;
        case OPT_BUFFER_MB: {
            char *end;
            unsigned long mb = strtoul(p.arg, &end, 10);
            if (end == p.arg || *end != '\0' || mb < 1 || mb > 65536)
                return tw_cli_usage_error(&timeline_command,
                                          "--buffer-mb: '%s' is not 1..65536",
                                          p.arg);
            o.buffer_bytes = (size_t)mb << 20;
            break;
        }
        case OPT_QUIET:
            o.quiet = 1;
            break;
        }
    }
    if (argc - p.optind != 1)
        return tw_cli_usage_error(&timeline_command, "expects one folder DIR");
    if (output == NULL)
        return tw_cli_usage_error(&timeline_command, "-o FILE is required");
    if (o.framework_only && o.system_metrics != NULL)
        return tw_cli_usage_error(&timeline_command,
                                  "--framework-only and --system-metrics "
                                  "exclude each other");
    if (has_start || has_end) {
        o.has_time = 1;
        if (!has_start)
            o.from_us = INT64_MIN;
        if (!has_end)
            o.to_us = INT64_MAX;
        if (o.from_us > o.to_us)
            return tw_cli_usage_error(&timeline_command,
                                      "--start is after --end");
    }
    FILE *out = strcmp(output, "-") == 0 ? stdout : fopen(output, "w");
    if (out == NULL) {
        perror(output);
        return 1;
    }
    char err[1024] = "";
    tw_timeline_counts n;
    int rc = tw_timeline_write(argv[p.optind], &o, out, &n, err, sizeof(err));
    if (out != stdout && fclose(out) != 0 && rc == TW_OK) {
        snprintf(err, sizeof(err), "closing %s failed", output);
        rc = TW_ERR;
    }
    if (rc != TW_OK) {
        fprintf(stderr, "trainwatch timeline: %s: %s\n", argv[p.optind], err);
        if (out != stdout)
            remove(output);
        return 1;
    }
    fprintf(stderr,
            "timeline: %llu files (%llu bad lines), %llu events and %llu "
            "samples written to %s (%zu sorted runs)\n",
            (unsigned long long)n.files, (unsigned long long)n.bad_lines,
            (unsigned long long)n.events, (unsigned long long)n.samples, output,
            n.runs);
    return 0;
}
