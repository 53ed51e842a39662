/*
 * cmd_pystats.c - `trainwatch pystats DIR|FILE`: the Python profiles
 * (cProfile statistics) of a profiler-output folder or one pstats file,
 * selected and aggregated (engine/tools/pystats.h).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_options.h"
#include "cli_ranges.h"
#include "commands.h"
#include "pystats.h"
#include "trainwatch/plugin.h"

enum {
    OPT_JSON = 1,
    OPT_TIME,
    OPT_BY_STEP,
    OPT_START_PHASE,
    OPT_END_PHASE,
    OPT_BEFORE_STEP0,
    OPT_AFTER_CLOSE,
    OPT_NODE,
    OPT_MODE,
    OPT_BETWEEN,
    OPT_BY,
    OPT_SORT,
    OPT_TOP,
    OPT_LIST,
    OPT_QUIET
};

static const tw_cli_option pystats_options[] = {
    {"json", 0, NULL, "print one JSON object instead of the text report",
     OPT_JSON},
    {"time", 0, "T1:T2",
     "only the intervals within [T1, T2], epoch seconds (fractions allowed)",
     OPT_TIME},
    {"by-step", 0, "A:B",
     "only the intervals from step A's start phase to step B's end phase "
     "(--start-phase, --end-phase)",
     OPT_BY_STEP},
    {"start-phase", 0, "PHASE",
     "with --by-step: START, STEP_START (default), FORWARD_PASS_END, "
     "STEP_END or END",
     OPT_START_PHASE},
    {"end-phase", 0, "PHASE",
     "with --by-step: as --start-phase (default "
     "STEP_END)",
     OPT_END_PHASE},
    {"before-step0", 0, NULL,
     "only the interval from the hook's start to step 0 (START)",
     OPT_BEFORE_STEP0},
    {"after-close", 0, NULL,
     "only the interval from the last step to the hook's close (END)",
     OPT_AFTER_CLOSE},
    {"node", 0, "ID", "only this node (<rank>-<host>)", OPT_NODE},
    {"mode", 0, "MODE",
     "only the intervals of this mode (TRAIN, EVAL, PREDICT, GLOBAL; step "
     "numbers count within a mode)",
     OPT_MODE},
    {"between-modes", 0, "M1:M2",
     "only the intervals from the first of mode M1 to the last of mode M2",
     OPT_BETWEEN},
    {"by", 0, "GROUPING",
     "one table per training_phase (START_PHASE-END_PHASE pair) or "
     "job_phase (initialization, training_loop, finalization); default: "
     "one table",
     OPT_BY},
    {"sort", 0, "KEY",
     "tottime (default), cumtime, pcalls (primitive calls) or ncalls (total "
     "calls)",
     OPT_SORT},
    {"top", 0, "N", "rows per table (default 20; 0: all)", OPT_TOP},
    {"list", 0, NULL, "also list the profiled intervals and node ids",
     OPT_LIST},
    {"quiet", 0, NULL, "no bad-input messages on stderr", OPT_QUIET},
    {NULL, 0, NULL, NULL, 0}};

static const tw_cli_command pystats_command = {
    .name = "pystats",
    .synopsis = "DIR|FILE [--by-step A:B [--mode M] | --time T1:T2 | "
                "--between-modes M1:M2 | --before-step0 | --after-close] "
                "[options]",
    .description =
        "Python-profile analysis: the cProfile statistics the hook writes "
        "under\nDIR/framework/pytorch/cprofile/<node>/<interval>/"
        "python_stats (or one pstats\nfile), summed per function over the "
        "selected intervals, top functions in\npstats' row format. "
        "README.md (\"Python profiles\").\n",
    .options = pystats_options,
    .epilogue = "Exit status: 0 printed, 1 on an error, 2 on bad usage.\n",
};

static int phase_arg(const char *s, tw_step_phase *out)
{
    int k = tw_step_phase_parse(s, strlen(s));
    if (k < 0)
        return -1;
    *out = (tw_step_phase)k;
    return 0;
}

static int choose(const char *s, const char *const *names, int n)
{
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    return -1;
}

int tw_cmd_pystats(int argc, char **argv)
{
    static const char *const groups[] = {"all", "training_phase", "job_phase"};
    static const char *const sorts[] = {"tottime", "cumtime", "pcalls",
                                        "ncalls"};
    tw_pystats_opts o;
    memset(&o, 0, sizeof(o));
    char between_from[32];
    o.phase_a = TW_PHASE_STEP_START;
    o.phase_b = TW_PHASE_STEP_END;
    o.top = 20;
    tw_cli_parser p;
    tw_cli_begin(&p, &pystats_command, argc, argv);
    for (int id, k; (id = tw_cli_next(&p)) != TW_CLI_END;) {
        switch (id) {
        case TW_CLI_HELP:
            return 0;
        case TW_CLI_USAGE:
            return 2;
        case OPT_JSON:
            o.json = 1;
            break;
        case OPT_TIME:
            if (tw_cli_parse_time_range(p.arg, &o.from_us, &o.to_us) != 0)
                return tw_cli_usage_error(&pystats_command,
                                          "--time: '%s' is not T1:T2 in "
                                          "epoch seconds with T1 <= T2",
                                          p.arg);
            o.has_time = 1;
            break;
        case OPT_BY_STEP:
            if (tw_cli_parse_step_range(p.arg, &o.step_a, &o.step_b) != 0)
                return tw_cli_usage_error(&pystats_command,
                                          "--by-step: '%s' is not A:B with "
                                          "integers A <= B",
                                          p.arg);
            o.has_steps = 1;
            break;
        case OPT_START_PHASE:
        case OPT_END_PHASE:
            if (phase_arg(p.arg,
                          id == OPT_START_PHASE ? &o.phase_a : &o.phase_b))
                return tw_cli_usage_error(
                    &pystats_command,
                    "--%s-phase: '%s' is not START, STEP_START, "
                    "FORWARD_PASS_END, STEP_END or END",
                    id == OPT_START_PHASE ? "start" : "end", p.arg);
            break;
        case OPT_BEFORE_STEP0:
            o.before_step0 = 1;
            break;
        case OPT_AFTER_CLOSE:
            o.after_close = 1;
            break;
        case OPT_NODE:
            o.node = p.arg;
            break;
        case OPT_MODE:
            o.mode = p.arg;
            break;
        case OPT_BETWEEN: {
            const char *colon = strchr(p.arg, ':');
            if (colon == NULL || colon == p.arg || colon[1] == '\0' ||
                colon - p.arg >= (ptrdiff_t)sizeof(between_from))
                return tw_cli_usage_error(&pystats_command,
                                          "--between-modes: '%s' is not "
                                          "M1:M2",
                                          p.arg);
            snprintf(between_from, sizeof(between_from), "%.*s",
                     (int)(colon - p.arg), p.arg);
            o.between_from = between_from;
            o.between_to = colon + 1;
            break;
        }
        case OPT_BY:
            if ((k = choose(p.arg, groups, 3)) < 0)
                return tw_cli_usage_error(&pystats_command,
                                          "--by: '%s' is not training_phase "
                                          "or job_phase",
                                          p.arg);
            o.group = (tw_pystats_group)k;
            break;
        case OPT_SORT:
            if ((k = choose(p.arg, sorts, 4)) < 0)
                return tw_cli_usage_error(&pystats_command,
                                          "--sort: '%s' is not tottime, "
                                          "cumtime, pcalls or ncalls",
                                          p.arg);
            o.sort = (tw_pystats_sort)k;
            break;
        case OPT_TOP: {
            char *end;
            long long n = strtoll(p.arg, &end, 10);
            if (end == p.arg || *end != '\0' || n < 0)
                return tw_cli_usage_error(&pystats_command,
                                          "--top: '%s' is not a count", p.arg);
            o.top = (size_t)n;
            break;
        }
        case OPT_LIST:
            o.list = 1;
            break;
        case OPT_QUIET:
            o.quiet = 1;
            break;
        }
    }
    if (argc - p.optind != 1)
        return tw_cli_usage_error(&pystats_command,
                                  "expects one folder DIR or pstats FILE");
    char err[1024] = "";
    if (tw_pystats_run(argv[p.optind], &o, stdout, err, sizeof(err)) != TW_OK ||
        fflush(stdout) != 0) {
        fprintf(stderr, "trainwatch pystats: %s: %s\n", argv[p.optind],
                err[0] ? err : "writing the output failed");
        return 1;
    }
    return 0;
}
