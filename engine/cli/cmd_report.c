/*
 * cmd_report.c - `trainwatch report DIR -o FILE` (evaluates the folder,
 * computes its statistics, renders one HTML page) and `trainwatch report
 * --results JOB.json` (renders a finished job of `run` from its results
 * file). The page is engine/tools/report_html.h's.
 */
#include <jansson.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli_options.h"
#include "commands.h"
#include "eval_results.h"
#include "job_statistics.h"
#include "plugin_host.h"
#include "report_html.h"
#include "trainwatch/plugin.h"

enum { OPT_OUTPUT = 1, OPT_RESULTS, OPT_RULES, OPT_TIMELINE };

static const tw_cli_option report_options[] = {
    {"output", 'o', "FILE",
     "where to write the page (required with DIR; with --results: the "
     "results file's name with .html instead of .json)",
     OPT_OUTPUT},
    {"results", 0, "JOB.json",
     "render a finished job from its results file (what `run` writes) "
     "instead of evaluating a folder; without the folder the page lacks the "
     "job's training-loop times and phase intervals",
     OPT_RESULTS},
    {"rules", 0, "FILE",
     "rule configuration for the evaluation (as `eval --rules`)", OPT_RULES},
    {"timeline", 0, "PATH",
     "link to a merged timeline (a path relative to the page); default: "
     "JOB.timeline.json when it exists next to the page",
     OPT_TIMELINE},
    {NULL, 0, NULL, NULL, 0}};

static const tw_cli_command report_command = {
    .name = "report",
    .synopsis = "DIR -o FILE [--rules FILE] | --results JOB.json [-o FILE]",
    .description =
        "Writes one self-contained HTML page about a training job: job "
        "summary,\nsystem usage with per-node advice, framework metrics, "
        "the rules sorted by\ntimes triggered, the findings and when they "
        "happened, step durations, GPU\nutilization, workload, data "
        "loading, batch size, bottlenecks and GPU memory.\nThe page loads "
        "nothing from the network (charts are inline SVG).\n",
    .options = report_options,
    .epilogue = "Exit status: 0 written, 1 on an error, 2 on bad usage.\n",
};

/* The statistics of dir as JSON (NULL after a message). */
static json_t *stats_json(const char *dir)
{
    tw_stats_opts o = {.quiet = 1};
    tw_statistics *s = NULL;
    char err[1024] = "";
    if (tw_statistics_compute(dir, &o, &s, err, sizeof(err)) != TW_OK) {
        fprintf(stderr, "trainwatch report: statistics of %s: %s\n", dir, err);
        return NULL;
    }
    char *buf = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&buf, &len);
    json_t *j = NULL;
    if (m != NULL) {
        int rc = tw_statistics_write(s, TW_STATS_JSON, m);
        if (fclose(m) == 0 && rc == TW_OK) {
            json_error_t je;
            j = json_loadb(buf, len, 0, &je);
        }
    }
    if (j == NULL)
        fprintf(stderr, "trainwatch report: statistics of %s: out of memory\n",
                dir);
    free(buf);
    tw_statistics_free(s);
    return j;
}

/* --results X.json without -o: X.html */
static char *default_output(const char *results)
{
    size_t n = strlen(results);
    char *o = malloc(n + 6);
    if (o == NULL)
        return NULL;
    memcpy(o, results, n + 1);
    if (n > 5 && strcmp(o + n - 5, ".json") == 0)
        o[n - 5] = '\0';
    strcat(o, ".html");
    return o;
}

/* JOB.timeline.json next to the page, when present: its relative name. */
static char *find_timeline(const char *output, const char *job)
{
    char *copy = strdup(output);
    if (copy == NULL || job == NULL) {
        free(copy);
        return NULL;
    }
    const char *dir = dirname(copy);
    size_t n = strlen(dir) + strlen(job) + 32;
    char *path = malloc(n), *rel = NULL;
    if (path != NULL) {
        snprintf(path, n, "%s/%s.timeline.json", dir, job);
        if (access(path, R_OK) == 0)
            rel = strdup(path + strlen(dir) + 1);
    }
    free(path);
    free(copy);
    return rel;
}

static int render(const char *output, const json_t *results,
                  const json_t *stats, const char *timeline)
{
    tw_registry *reg = tw_registry_new();
    if (reg == NULL) {
        fprintf(stderr, "trainwatch report: out of memory\n");
        return 1;
    }
    const char *job = json_string_value(json_object_get(results, "job"));
    char *found = timeline == NULL ? find_timeline(output, job) : NULL;
    tw_report_input in = {.results = results,
                          .stats = stats,
                          .describe = tw_report_describe_registry,
                          .describe_ud = reg,
                          .timeline_href = timeline != NULL ? timeline : found};
    char tmp[4096], err[512] = "";
    snprintf(tmp, sizeof(tmp), "%s.tmp", output);
    int status = 1;
    FILE *f = fopen(tmp, "w");
    if (f == NULL) {
        fprintf(stderr, "trainwatch report: cannot write %s: %m\n", tmp);
    } else {
        int rc = tw_report_html_write(f, &in, err, sizeof(err));
        if (fclose(f) != 0 && rc == TW_OK) {
            snprintf(err, sizeof(err), "closing the temporary file failed");
            rc = TW_ERR;
        }
        if (rc == TW_OK && rename(tmp, output) == 0)
            status = 0;
        else {
            fprintf(stderr, "trainwatch report: %s: %s\n", output,
                    err[0] != '\0' ? err : "renaming the page failed");
            unlink(tmp);
        }
    }
    free(found);
    tw_registry_free(reg);
    return status;
}

int tw_cmd_report(int argc, char **argv)
{
    const char *output = NULL, *results_path = NULL, *rules = NULL,
               *timeline = NULL;
    tw_cli_parser p;
    tw_cli_begin(&p, &report_command, argc, argv);
    for (int id; (id = tw_cli_next(&p)) != TW_CLI_END;) {
        switch (id) {
        case TW_CLI_HELP:
            return 0;
        case TW_CLI_USAGE:
            return 2;
        case OPT_OUTPUT:
            output = p.arg;
            break;
        case OPT_RESULTS:
            results_path = p.arg;
            break;
        case OPT_RULES:
            rules = p.arg;
            break;
        case OPT_TIMELINE:
            timeline = p.arg;
            break;
        }
    }
    int operands = argc - p.optind;
    if (results_path != NULL ? operands != 0 : operands != 1)
        return tw_cli_usage_error(&report_command,
                                  "expects one folder DIR or --results FILE");
    if (results_path == NULL && output == NULL)
        return tw_cli_usage_error(&report_command, "DIR needs -o FILE");
    json_t *results = NULL, *stats = NULL;
    char *out_default = NULL;
    int status = 1;
    if (results_path != NULL) {
        json_error_t je;
        results = json_load_file(results_path, 0, &je);
        if (results == NULL)
            fprintf(stderr, "trainwatch report: %s: line %d: %s\n",
                    results_path, je.line, je.text);
        if (output == NULL &&
            (output = out_default = default_output(results_path)) == NULL) {
            fprintf(stderr, "trainwatch report: out of memory\n");
            json_decref(results);
            return 1;
        }
    } else {
        const char *dir = argv[p.optind];
        char *text = NULL;
        if (tw_eval_results_json(dir, rules, &text) == 0) {
            json_error_t je;
            results = json_loads(text, 0, &je);
            if (results == NULL)
                fprintf(stderr, "trainwatch report: %s: results: %s\n", dir,
                        je.text);
            else
                stats = stats_json(dir);
        }
        free(text);
        if (stats == NULL) {
            json_decref(results);
            results = NULL;
        }
    }
    if (results != NULL)
        status = render(output, results, stats, timeline);
    json_decref(results);
    json_decref(stats);
    free(out_default);
    return status;
}
