/*
 * cmd_pystats.c - `trainwatch pystats DIR|FILE|--job J`: the Python
 * profiles (cProfile statistics) of a profiler-output folder, one pstats
 * file, or job J on the metrics topic (engine/tools/pystats_job.h),
 * selected and aggregated (engine/tools/pystats.h).
 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli_options.h"
#include "cli_ranges.h"
#include "commands.h"
#include "config.h"
#include "config_schema.h"
#include "pystats.h"
#include "pystats_job.h"
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
    OPT_QUIET,
    OPT_JOB,
    OPT_BROKERS,
    OPT_TOPIC,
    OPT_CONFIG,
    OPT_TIMEOUT
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
    {"job", 0, "J",
     "instead of DIR: job J's Python profiles on the metrics topic (every "
     "partition from its start up to the end found when starting; joins "
     "no consumer group, commits nothing)",
     OPT_JOB},
    {"brokers", 0, "B",
     "with --job: bootstrap servers; overrides "
     "kafka.brokers",
     OPT_BROKERS},
    {"topic", 0, "T",
     "with --job: the metrics topic; overrides kafka.metrics_topic (default "
     "trainwatch.metrics)",
     OPT_TOPIC},
    {"config", 0, "FILE",
     "with --job: the configuration `run` uses; its kafka: section gives "
     "brokers, metrics_topic and properties.*",
     OPT_CONFIG},
    {"timeout", 0, "DURATION",
     "with --job: how long to wait for the brokers' answers (default 10s)",
     OPT_TIMEOUT},
    {NULL, 0, NULL, NULL, 0}};

static const tw_cli_command pystats_command = {
    .name = "pystats",
    .synopsis = "DIR|FILE|--job J [--by-step A:B [--mode M] | --time T1:T2 "
                "| --between-modes M1:M2 | --before-step0 | --after-close] "
                "[options]",
    .description =
        "Python-profile analysis: the cProfile statistics the hook writes "
        "under\nDIR/framework/pytorch/cprofile/<node>/<interval>/"
        "python_stats (or one pstats\nfile), summed per function over the "
        "selected intervals, top functions in\npstats' row format. With "
        "--job J, the same from the PythonProfile tables\nthe hook "
        "published for job J on the metrics topic (progress on stderr).\n"
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

/* --job and the options that go with it */
typedef struct job_args {
    const char *job, *brokers, *topic, *config;
    int64_t timeout_us;
} job_args;

#define JOB_MAX_PROPS 64

/* The kafka: section's properties.* as librdkafka properties; each
 * `where` (FILE:LINE) is malloc'd into wheres. */
static int kafka_props(const tw_settings *k, tw_source_prop *props,
                       char **wheres, size_t *n, char *err, size_t errlen)
{
    *n = 0;
    for (size_t i = 0; i < k->n; i++) {
        const tw_setting *it = &k->items[i];
        if (strncmp(it->key, "properties.", 11) != 0)
            continue;
        if (*n == JOB_MAX_PROPS)
            return tw_settings_error(k, it, err, errlen,
                                     "more than %d properties", JOB_MAX_PROPS);
        if (asprintf(&wheres[*n], "%s:%d: kafka: key '%s'", k->path, it->line,
                     it->key) < 0) {
            snprintf(err, errlen, "out of memory");
            return TW_ERR;
        }
        props[*n] = (tw_source_prop){
            .key = it->key + 11, .value = it->value, .where = wheres[*n]};
        (*n)++;
    }
    return TW_OK;
}

/* `pystats --job J`: brokers, topic and properties as `run` finds them
 * (--config's kafka: section, then the flags), then the read. */
static int run_job(const job_args *ja, const tw_pystats_opts *o)
{
    char err[1024] = "";
    tw_config *cfg = NULL;
    tw_settings none = {.path = "(default)", .what = "kafka"};
    const tw_settings *k = &none;
    tw_source_prop props[JOB_MAX_PROPS];
    char *wheres[JOB_MAX_PROPS];
    size_t nprops = 0;
    int rc = TW_OK;
    if (ja->config != NULL &&
        (rc = tw_config_load(ja->config, &cfg, err, sizeof(err))) == TW_OK)
        k = &cfg->kafka;
    if (rc == TW_OK)
        rc = tw_schema_check_settings(k, TW_SECTION_KAFKA, NULL, err,
                                      sizeof(err));
    if (rc == TW_OK)
        rc = kafka_props(k, props, wheres, &nprops, err, sizeof(err));
    tw_pystats_job_opts jo = {
        .job = ja->job,
        .brokers = ja->brokers != NULL
                       ? ja->brokers
                       : tw_schema_str(k, TW_SECTION_KAFKA, "brokers"),
        .topic = ja->topic != NULL
                     ? ja->topic
                     : tw_schema_str(k, TW_SECTION_KAFKA, "metrics_topic"),
        .props = props,
        .nprops = nprops,
        .timeout_ms = (int)(ja->timeout_us / 1000),
        .progress = stderr};
    int status = 2;
    if (rc != TW_OK) {
        fprintf(stderr, "trainwatch pystats: %s\n", err);
    } else if (jo.brokers == NULL || jo.brokers[0] == '\0') {
        fprintf(stderr, "trainwatch pystats: --job: no brokers: set "
                        "kafka.brokers in --config or give --brokers\n");
    } else if (tw_pystats_job_run(&jo, o, stdout, err, sizeof(err)) != TW_OK ||
               fflush(stdout) != 0) {
        fprintf(stderr, "trainwatch pystats: --job %s: %s\n", ja->job,
                err[0] ? err : "writing the output failed");
        status = 1;
    } else {
        status = 0;
    }
    for (size_t i = 0; i < nprops; i++)
        free(wheres[i]);
    tw_config_free(cfg);
    return status;
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
    job_args ja = {.timeout_us = 10 * 1000000LL};
    int job_only = 0; /* an option that needs --job was given */
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
        case OPT_JOB:
            ja.job = p.arg;
            break;
        case OPT_BROKERS:
        case OPT_TOPIC:
        case OPT_CONFIG:
            *(id == OPT_BROKERS ? &ja.brokers
              : id == OPT_TOPIC ? &ja.topic
                                : &ja.config) = p.arg;
            job_only = 1;
            break;
        case OPT_TIMEOUT:
            if (tw_parse_duration_us(p.arg, &ja.timeout_us) != TW_OK ||
                ja.timeout_us < 1000 || ja.timeout_us > 3600 * 1000000LL)
                return tw_cli_usage_error(&pystats_command,
                                          "--timeout: '%s' is not a duration "
                                          "from 1ms to 1h",
                                          p.arg);
            job_only = 1;
            break;
        }
    }
    if (ja.job != NULL) {
        if (argc - p.optind != 0)
            return tw_cli_usage_error(&pystats_command,
                                      "--job reads the topic: no DIR or "
                                      "FILE with it");
        if (ja.job[0] == '\0')
            return tw_cli_usage_error(&pystats_command, "--job: empty job id");
        return run_job(&ja, &o);
    }
    if (job_only)
        return tw_cli_usage_error(&pystats_command,
                                  "--brokers, --topic, --config and --timeout "
                                  "go with --job");
    if (argc - p.optind != 1)
        return tw_cli_usage_error(&pystats_command,
                                  "expects one folder DIR, pstats FILE or "
                                  "--job J");
    char err[1024] = "";
    if (tw_pystats_run(argv[p.optind], &o, stdout, err, sizeof(err)) != TW_OK ||
        fflush(stdout) != 0) {
        fprintf(stderr, "trainwatch pystats: %s: %s\n", argv[p.optind],
                err[0] ? err : "writing the output failed");
        return 1;
    }
    return 0;
}
