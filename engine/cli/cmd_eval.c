/*
 * cmd_eval.c - `trainwatch eval DIR`: offline evaluation of a
 * profiler-output folder with the in-memory store. Files are fed in time
 * order through the same job pipeline the daemon uses; the watermark follows
 * the listing (listing_horizons), so memory stays bounded however long the
 * job.
 */
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli_options.h"
#include "clock.h"
#include "commands.h"
#include "config.h"
#include "job.h"
#include "job_results.h"
#include "json_writer.h"
#include "log.h"
#include "reader.h"

enum { OPT_RULES = 1, OPT_SEMANTICS, OPT_JSON, OPT_JOB, OPT_QUIET };

static const tw_cli_option eval_options[] = {
    {"rules", 0, "FILE",
     "rule configuration (YAML or JSON); default: ProfilerReport, or every "
     "built-in profiler rule when ProfilerReport is absent",
     OPT_RULES},
    {"semantics", 0, "MODE",
     "fixed (default) or reference: overrides the file's default",
     OPT_SEMANTICS},
    {"json", 0, NULL,
     "print the results as JSON instead of a table (strict: NaN/Infinity "
     "become null, counted in the rule's \"nonfinite_nulls\")",
     OPT_JSON},
    {"job", 0, "NAME", "job id to report (default: DIR's base name)", OPT_JOB},
    {"quiet", 0, NULL, "no progress or bad-line messages on stderr", OPT_QUIET},
    {NULL, 0, NULL, NULL, 0}};

static const tw_cli_command eval_command = {
    .name = "eval",
    .synopsis = "DIR [options]",
    .description =
        "Evaluates rules offline over a profiler-output folder DIR (the "
        "agent's\nsystem/ and framework/ files) and prints each rule's "
        "status and findings.\n",
    .options = eval_options,
    .epilogue =
        "A rule whose input never arrived ends NoData (fixed semantics; "
        "reference keeps\nNoIssuesFound), with INPUT none. Folders that "
        "cannot be read, symbolic link\nloops and folders reached twice "
        "are named in warnings and counted.\n"
        "\n"
        "Exit status: 0 when the folder was evaluated (whatever the "
        "findings),\n1 on an error, 2 on bad usage.\n",
};

/* What the options ask for. */
typedef struct eval_opts {
    const char *dir;
    const char *rules_path, *job_name, *sem;
    tw_semantics semantics;
    int as_json, quiet;
} eval_opts;

typedef struct eval_ctx {
    tw_job *job;
    int quiet;
    uint64_t reported_errors;
    int failed;
} eval_ctx;

static int sink(void *ud, tw_batch *b)
{
    eval_ctx *e = ud;
    if (tw_job_ingest(e->job, b) != TW_OK) {
        e->failed = 1;
        return TW_ERR;
    }
    return TW_OK;
}

static void on_bad_input(void *ud, const char *path, uint64_t line,
                         const char *reason)
{
    eval_ctx *e = ud;
    e->reported_errors++;
    if (e->quiet)
        return;
    if (e->reported_errors > 50) {
        if (e->reported_errors == 51)
            fprintf(stderr, "eval: more bad input; further messages "
                            "suppressed (see the totals)\n");
        return;
    }
    if (line > 0)
        fprintf(stderr, "%s:%llu: %s\n", path, (unsigned long long)line,
                reason);
    else
        fprintf(stderr, "%s: %s\n", path, reason);
}

/* The reference reads a scan's events from every trace file whose name's
 * timestamp lies within 3 minutes of the scan (RULES.md §1.3): a trace file
 * is named after the end of its newest event, and an event is written when
 * it ends, so a file holds events that started before the previous file's
 * timestamp (those spanning a scan's end among them). */
#define TW_EVAL_TRACE_WINDOW_US (180 * 1000000LL)

/* The clock of offline evaluation: h[i] = the oldest event time that
 * files[i], files[i+1], ... may still hold, offered as the watermark before
 * files[i] is read. A system file holds the minute it is named after (its
 * feed key); a trace file may hold events from TW_EVAL_TRACE_WINDOW_US
 * before its timestamp. A file's own timestamp is no such bound: a scan
 * whose end + lateness fell just before a trace file's timestamp would
 * close without that file's events overlapping it, which the reference and
 * `run` both deliver to it. NULL on out-of-memory; the caller frees. */
static int64_t *listing_horizons(const tw_folder *folder)
{
    int64_t *h = malloc((folder->nfiles > 0 ? folder->nfiles : 1) * sizeof(*h));
    if (h == NULL)
        return NULL;
    int64_t oldest = INT64_MAX;
    for (size_t i = folder->nfiles; i-- > 0;) {
        const tw_agent_file *f = &folder->files[i];
        int64_t t = f->feed_key_us;
        if (f->kind == TW_FILE_FRAMEWORK)
            t = t > INT64_MIN + TW_EVAL_TRACE_WINDOW_US
                    ? t - TW_EVAL_TRACE_WINDOW_US
                    : INT64_MIN;
        if (t < oldest)
            oldest = t;
        h[i] = oldest;
    }
    return h;
}

static void print_json(tw_job *job, const char *dir, const tw_folder *folder,
                       const tw_reader_stats *rs, double seconds)
{
    tw_job_stats js;
    tw_job_get_stats(job, &js);
    tw_json *j = tw_json_new();
    tw_json *r = tw_json_new();
    if (j == NULL || r == NULL) {
        fprintf(stderr, "eval: out of memory\n");
        tw_json_free(j);
        tw_json_free(r);
        return;
    }
    tw_json_set_strict(j, 1); /* any JSON parser reads --json */
    tw_json_object_begin(j);
    tw_json_key(j, "job");
    tw_json_string(j, tw_job_id(job));
    tw_json_key(j, "folder");
    tw_json_string(j, dir);
    tw_json_key(j, "first_timestamp_us");
    tw_json_int(j, tw_job_first_timestamp(job));
    tw_json_key(j, "latest_timestamp_us");
    tw_json_int(j, tw_job_latest_timestamp(job));
    tw_json_key(j, "scans");
    tw_json_int(j, (int64_t)js.scans);
    tw_json_key(j, "input");
    tw_json_object_begin(j);
    tw_json_key(j, "files");
    tw_json_int(j, (int64_t)rs->files);
    tw_json_key(j, "bad_files");
    tw_json_int(j, (int64_t)rs->bad_files);
    tw_json_key(j, "unreadable_dirs");
    tw_json_int(j, (int64_t)folder->unreadable_dirs);
    tw_json_key(j, "skipped_dirs");
    tw_json_int(j, (int64_t)folder->skipped_dirs);
    tw_json_key(j, "lines");
    tw_json_int(j, (int64_t)rs->lines);
    tw_json_key(j, "bad_lines");
    tw_json_int(j, (int64_t)rs->bad_lines);
    tw_json_key(j, "samples");
    tw_json_int(j, (int64_t)js.samples);
    tw_json_key(j, "events");
    tw_json_int(j, (int64_t)js.events);
    tw_json_key(j, "late_samples");
    tw_json_int(j, (int64_t)js.late_samples);
    tw_json_key(j, "late_events");
    tw_json_int(j, (int64_t)js.late_events);
    tw_json_key(j, "seconds");
    tw_json_double(j, seconds);
    tw_json_object_end(j);
    tw_json_key(j, "rules");
    tw_job_results_rules(j, r, job); /* the daemon writes the same */
    tw_json_object_end(j);
    printf("%s\n", tw_json_str(j));
    tw_json_free(r);
    tw_json_free(j);
}

/* One row per rule; *no_input counts the rules whose input never came. */
static void table_row(tw_rule *rule, int depth, size_t *no_input)
{
    const tw_scan_result *res = tw_rule_last_result(rule);
    char name[64];
    snprintf(name, sizeof(name), "%*s%s", depth * 2, "", tw_rule_name(rule));
    int received = tw_rule_received_input(rule);
    if (!received)
        (*no_input)++;
    printf("%-26s %-14s %10lld %10lld %10lld  %s\n", name,
           tw_rule_status_name(tw_rule_get_status(rule)),
           (long long)res->datapoints, (long long)res->violations,
           (long long)res->rule_triggered, received ? "received" : "none");
    for (size_t i = 0; i < tw_rule_nchildren(rule); i++)
        table_row(tw_rule_child(rule, i), depth + 1, no_input);
}

/* Findings of every rule (and sub-rule) that found issues or failed: the
 * report's Details, cut to a readable length. */
static void findings(tw_rule *rule, tw_json *r)
{
    tw_rule_status st = tw_rule_get_status(rule);
    if (tw_rule_nchildren(rule) > 0) {
        for (size_t i = 0; i < tw_rule_nchildren(rule); i++)
            findings(tw_rule_child(rule, i), r);
        return;
    }
    if (st == TW_STATUS_ERROR) {
        printf("\n%s: error: %s\n", tw_rule_name(rule), tw_rule_error(rule));
        return;
    }
    if (st != TW_STATUS_ISSUES_FOUND)
        return;
    tw_json_reset(r);
    if (tw_rule_report(rule, r) != TW_OK || tw_json_failed(r))
        return;
    const char *s = tw_json_str(r);
    const char *det = strstr(s, "\"Details\": ");
    const char *show = det != NULL ? det + 11 : s;
    size_t len = strlen(show);
    const tw_scan_result *res = tw_rule_last_result(rule);
    printf("\n%s: %lld violation(s), triggered %lld time(s) over %llu "
           "scan(s)\n  %.*s%s\n",
           tw_rule_name(rule), (long long)res->violations,
           (long long)res->rule_triggered,
           (unsigned long long)tw_rule_scans(rule), (int)(len > 480 ? 480 : len),
           show, len > 480 ? " ... (--json prints everything)" : "");
}

static void print_table(tw_job *job, const tw_folder *folder,
                        const tw_reader_stats *rs, double seconds)
{
    tw_job_stats js;
    tw_job_get_stats(job, &js);
    printf("job %s: %llu files (%llu bad), %llu samples, %llu framework "
           "events, %llu scans in %.2f s\n",
           tw_job_id(job), (unsigned long long)rs->files,
           (unsigned long long)rs->bad_files, (unsigned long long)js.samples,
           (unsigned long long)js.events, (unsigned long long)js.scans,
           seconds);
    if (rs->bad_lines > 0 || js.late_samples > 0 || js.late_events > 0)
        printf("bad input: %llu bad lines; late and dropped: %llu samples, "
               "%llu events\n",
               (unsigned long long)rs->bad_lines,
               (unsigned long long)js.late_samples,
               (unsigned long long)js.late_events);
    if (folder->nproblems > 0)
        printf("folders not read: %llu unreadable, %llu skipped (symbolic "
               "link loops, folders reached twice, too deep); see the "
               "warnings\n",
               (unsigned long long)folder->unreadable_dirs,
               (unsigned long long)folder->skipped_dirs);
    printf("\n%-26s %-14s %10s %10s %10s  %s\n", "RULE", "STATUS", "DATAPOINTS",
           "VIOLATIONS", "TRIGGERED", "INPUT");
    size_t no_input = 0;
    for (size_t i = 0; i < tw_job_nrules(job); i++)
        table_row(tw_job_rule(job, i), 0, &no_input);
    if (no_input > 0)
        printf("\nno data: the input of %zu rule(s) never arrived (INPUT "
               "none): nothing was judged (status NoData in fixed semantics; "
               "reference semantics keeps the reference's status)\n",
               no_input);
    tw_json *r = tw_json_new();
    for (size_t i = 0; r != NULL && i < tw_job_nrules(job); i++)
        findings(tw_job_rule(job, i), r);
    tw_json_free(r);
}

/* The options and DIR: -1 to exit with *status (0 after --help, 2 on bad
 * usage). */
static int eval_load_options(eval_opts *o, int argc, char **argv, int *status)
{
    memset(o, 0, sizeof(*o));
    *status = 2;
    tw_cli_parser p;
    tw_cli_begin(&p, &eval_command, argc, argv);
    for (int id; (id = tw_cli_next(&p)) != TW_CLI_END;) {
        switch (id) {
        case TW_CLI_HELP:
            *status = 0;
            return -1;
        case TW_CLI_USAGE:
            return -1;
        case OPT_RULES:
            o->rules_path = p.arg;
            break;
        case OPT_SEMANTICS:
            o->sem = p.arg;
            break;
        case OPT_JSON:
            o->as_json = 1;
            break;
        case OPT_JOB:
            o->job_name = p.arg;
            break;
        case OPT_QUIET:
            o->quiet = 1;
            break;
        }
    }
    if (p.optind != argc - 1) {
        fprintf(stderr, "trainwatch eval: expected exactly one folder "
                        "argument\n\n");
        tw_cli_help(&eval_command, stderr);
        return -1;
    }
    o->dir = argv[p.optind];
    o->semantics = TW_SEMANTICS_FIXED;
    if (o->sem == NULL || strcmp(o->sem, "fixed") == 0)
        return 0;
    if (strcmp(o->sem, "reference") == 0) {
        o->semantics = TW_SEMANTICS_REFERENCE;
        return 0;
    }
    fprintf(stderr,
            "trainwatch eval: --semantics must be 'fixed' or "
            "'reference', not '%s'\n",
            o->sem);
    return -1;
}

/* What an evaluation holds, from the folder's listing to the results. */
typedef struct eval_run {
    tw_folder *folder;
    tw_config *cfg;
    tw_registry *reg;
    tw_job *job;
    tw_trace_state *ts;
    int64_t *horizons;
    const char *id; /* the job id */
    char namebuf[1024];
    int64_t last_ts_us; /* L: the scan limit */
    tw_reader_stats rs;
    double seconds;
} eval_run;

/* The folder's listing and the rule configuration. */
static int eval_load(const eval_opts *o, eval_run *e, char *err, size_t n)
{
    if (tw_folder_list(o->dir, &e->folder, err, n) != TW_OK) {
        fprintf(stderr, "trainwatch eval: %s\n", err);
        return -1;
    }
    /* Files may be missing: each folder not walked is named (the counts
     * are in the output too, also with --quiet). */
    for (size_t i = 0; i < e->folder->nproblems; i++)
        tw_log(TW_LOG_WARN, "eval: folder not read: %s: %s",
               e->folder->problems[i].path, e->folder->problems[i].reason);
    if (e->folder->nfiles == 0) {
        fprintf(stderr,
                "trainwatch eval: no agent files under '%s' (expected "
                "system/incremental/.../<epoch>.algo-N.json or "
                "framework/pevents/... files)\n",
                o->dir);
        return -1;
    }
    int rc = o->rules_path != NULL
                 ? tw_config_load(o->rules_path, &e->cfg, err, n)
                 : tw_config_default(e->reg, &e->cfg, err, n);
    if (rc == TW_OK && e->cfg->nrules == 0)
        rc = tw_config_default_rules(e->cfg, e->reg, err, n);
    if (rc != TW_OK) {
        fprintf(stderr, "trainwatch eval: %s\n", err);
        return -1;
    }
    return 0;
}

/* The job, its first timestamp and scan limit, and the listing's clock. */
static int eval_open(const eval_opts *o, eval_run *e, char *err, size_t n)
{
    tw_config *cfg = e->cfg;
    tw_job_config jc = cfg->job;
    jc.external_watermark = 1;
    if (o->sem != NULL) {
        jc.semantics = o->semantics;
        for (size_t i = 0; i < cfg->nrules; i++)
            cfg->rules[i].has_semantics = 0;
    }
    snprintf(e->namebuf, sizeof(e->namebuf), "%s", o->dir);
    size_t nl = strlen(e->namebuf);
    while (nl > 1 && e->namebuf[nl - 1] == '/')
        e->namebuf[--nl] = '\0';
    e->id = o->job_name != NULL ? o->job_name : basename(e->namebuf);
    if (tw_job_new(e->id, &jc, e->reg, cfg->rules, cfg->nrules, &e->job, err,
                   n) != TW_OK) {
        fprintf(stderr, "trainwatch eval: %s%s%s\n",
                o->rules_path ? o->rules_path : "", o->rules_path ? ": " : "",
                err);
        return -1;
    }
    /* F and L from the file names, as the reference derives them (§1.4). */
    const tw_folder *folder = e->folder;
    int64_t F = folder->first_system_ts_us;
    if (folder->first_framework_ts_us != 0 &&
        (F == 0 || folder->first_framework_ts_us < F))
        F = folder->first_framework_ts_us;
    int64_t L = folder->latest_system_ts_us;
    if (L == 0 || (folder->latest_framework_ts_us != 0 &&
                   folder->latest_framework_ts_us < L))
        L = folder->latest_framework_ts_us;
    tw_job_set_first_timestamp(e->job, F);
    tw_job_set_scan_limit(e->job, L);
    e->last_ts_us = L;
    e->horizons = listing_horizons(folder);
    if (e->horizons == NULL) {
        fprintf(stderr, "trainwatch eval: out of memory\n");
        return -1;
    }
    return 0;
}

/* Every file in time order through the job, then the job's end. */
static int eval_feed(const eval_opts *o, eval_run *e)
{
    eval_ctx ec = {.job = e->job, .quiet = o->quiet};
    const tw_folder *folder = e->folder;
    double t0 = (tw_mono_us() / 1e6), last_progress = t0;
    for (size_t i = 0; i < folder->nfiles; i++) {
        const tw_agent_file *f = &folder->files[i];
        if (tw_job_advance(e->job, e->horizons[i]) != TW_OK) {
            fprintf(stderr, "trainwatch eval: out of memory\n");
            return -1;
        }
        if (tw_folder_read_file(f, e->id, e->ts, sink, &ec, on_bad_input, &ec,
                                &e->rs) != TW_OK ||
            ec.failed) {
            fprintf(stderr, "trainwatch eval: failed while reading %s\n",
                    f->path);
            return -1;
        }
        double t = (tw_mono_us() / 1e6);
        if (!o->quiet && !o->as_json && t - last_progress > 5.0) {
            fprintf(stderr, "eval: %zu/%zu files, %.1f MB read\n", i + 1,
                    folder->nfiles, (double)e->rs.bytes / 1e6);
            last_progress = t;
        }
    }
    if (tw_job_finish(e->job, e->last_ts_us) != TW_OK) {
        fprintf(stderr, "trainwatch eval: out of memory\n");
        return -1;
    }
    e->seconds = (tw_mono_us() / 1e6) - t0;
    return 0;
}

int tw_cmd_eval(int argc, char **argv)
{
    eval_opts o;
    int status;
    if (eval_load_options(&o, argc, argv, &status) != 0)
        return status;
    char err[1024];
    eval_run e;
    memset(&e, 0, sizeof(e));
    status = 1;
    e.reg = tw_registry_new();
    e.ts = tw_trace_state_new();
    if (e.reg == NULL || e.ts == NULL) {
        fprintf(stderr, "trainwatch eval: out of memory\n");
        goto out;
    }
    tw_log_set_level(o.quiet ? TW_LOG_ERROR : TW_LOG_WARN);
    if (eval_load(&o, &e, err, sizeof(err)) != 0 ||
        eval_open(&o, &e, err, sizeof(err)) != 0 || eval_feed(&o, &e) != 0)
        goto out;
    if (o.as_json)
        print_json(e.job, o.dir, e.folder, &e.rs, e.seconds);
    else
        print_table(e.job, e.folder, &e.rs, e.seconds);
    status = 0;
out:
    free(e.horizons);
    tw_job_free(e.job);
    tw_config_free(e.cfg);
    tw_trace_state_free(e.ts);
    tw_folder_free(e.folder);
    tw_registry_free(e.reg);
    return status;
}
