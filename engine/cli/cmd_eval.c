/*
 * cmd_eval.c - `trainwatch eval DIR`: offline evaluation of a
 * profiler-output folder with the in-memory store. Files are fed in time
 * order through the same job pipeline the daemon uses; the watermark follows
 * the listing (listing_horizons), so memory stays bounded however long the
 * job.
 */
#include <errno.h>
#include <libgen.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli_options.h"
#include "clock.h"
#include "commands.h"
#include "config.h"
#include "eval_debug.h"
#include "eval_results.h"
#include "finding_text.h"
#include "job.h"
#include "job_results.h"
#include "json_writer.h"
#include "log.h"
#include "reader.h"
#include "reader_debug.h"
#include "reader_prefetch.h"
#include "tw_assert.h"

enum {
    OPT_RULES = 1,
    OPT_SEMANTICS,
    OPT_JSON,
    OPT_JOB,
    OPT_QUIET,
    OPT_ROUNDTRIP,
    OPT_STEPS,
    OPT_TRACE_START,
    OPT_TRIGGERED,
    OPT_THREADS
};

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
    {"roundtrip", 0, NULL,
     "checkpoint test for rule authors: evaluate twice, the second time "
     "saving, re-creating and restoring every rule after each scan; exit 1 "
     "unless both give the same results (and each restored state saves the "
     "same bytes)",
     OPT_ROUNDTRIP},
    {"steps", 0, NULL,
     "first print one line per step event read: `step NODE MODE STEP_NUM "
     "START_US END_US` (times in µs since the epoch; not with --json)",
     OPT_STEPS},
    {"trace-start", 0, "SECONDS",
     "PyTorch traces with relative times (export_chrome_trace without "
     "Kineto): their ts 0 is this time (seconds since the epoch, fraction "
     "allowed) instead of the file's mtime minus its span",
     OPT_TRACE_START},
    {"triggered", 0, "FILE",
     "also write one JSON line per rule and scan whose check held to FILE: "
     "{\"scan\", \"start_us\", \"end_us\", \"rule\", \"parent\"} (the "
     "triggered windows, for comparing with the reference's)",
     OPT_TRIGGERED},
    {"threads", 0, "N",
     "read the files on N threads, 1..256 (default: the online cores); "
     "the rules still see them in listing order, so the results do not "
     "depend on N; 1 reads on the main thread",
     OPT_THREADS},
    {NULL, 0, NULL, NULL, 0}};

static const tw_cli_command eval_command = {
    .name = "eval",
    .synopsis = "DIR|TRACE [options]",
    .description =
        "Evaluates rules offline over a profiler-output folder DIR (the "
        "agent's\nsystem/ and framework/ files, PyTorch traces named "
        "*.pt.trace.json[.gz])\nor one PyTorch profiler trace file TRACE, "
        "and prints each rule's status and\nfindings. Each finding says "
        "what was found, where (nodes, GPUs), when\n(+hh:mm:ss from the "
        "job's start and UTC), how much, what to try and which\nparameters "
        "decided. In fixed semantics a finding that another explains (a\n"
        "GPU idle for a CPU or I/O bottleneck, a data loader or a "
        "straggler;\na straggler that FailSlow finds slower than itself) "
        "is printed under its\ncause (\"caused by it:\").\n\n"
        "A legacy debug-output folder (index/, events/: the tensors the\n"
        "reference's hook saves) runs through the debugging rules: with\n"
        "--rules the configured ones, else those whose tensors are present\n"
        "(the rules skipped are named on stderr).\n",
    .options = eval_options,
    .epilogue =
        "PyTorch traces: ProfilerStep#N is step N (Step:ModeKeys.TRAIN), "
        "operators are\ncpu_functions, kernels gpu_functions-dev:<n>. "
        "Times: Kineto's\nbaseTimeNanoseconds + ts; relative ts (no "
        "Kineto): the file's mtime is the end\nof its newest event "
        "(--trace-start overrides). Node: rank-<R> from\ndistributedInfo, "
        "else the file name up to its first '.'.\n"
        "\n"
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
    int as_json, quiet, roundtrip, steps;
    const char *triggered_path;
    int has_trace_start;
    int64_t trace_start_us;
    unsigned threads;
} eval_opts;

typedef struct eval_ctx {
    tw_job *job;
    int quiet, steps;
    uint64_t reported_errors;
    int failed;
} eval_ctx;

/* --steps: the step events of a batch, as read. */
static void print_steps(const tw_batch *b)
{
    static const char *const modes[] = {"NONE", "TRAIN", "EVAL", "PREDICT",
                                        "GLOBAL"};
    for (size_t i = 0; i < b->nevents; i++) {
        const tw_fw_event *ev = &b->events[i];
        if (ev->mode == TW_MODE_NONE || (size_t)ev->mode >= 5)
            continue;
        const char *num = "?";
        for (uint32_t k = 0; k < ev->nargs; k++)
            if (strcmp(ev->args[k].key, "step_num") == 0)
                num = ev->args[k].value;
        printf("step %s %s %s %lld %lld\n", ev->node, modes[ev->mode], num,
               (long long)ev->start_us, (long long)ev->end_us);
    }
}

static int sink(void *ud, tw_batch *b)
{
    eval_ctx *e = ud;
    if (e->steps)
        print_steps(b);
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
    tw_results_source src = {.folder = dir,
                             .files = rs->files,
                             .bad_files = rs->bad_files,
                             .unreadable_dirs = folder->unreadable_dirs,
                             .skipped_dirs = folder->skipped_dirs,
                             .lines = rs->lines,
                             .bad_lines = rs->bad_lines,
                             .seconds = seconds};
    tw_json *j = tw_json_new();
    /* the daemon's results files come from the same writer */
    if (j == NULL || tw_job_results_write_from(j, job, &src) != TW_OK) {
        fprintf(stderr, "eval: out of memory\n");
        tw_json_free(j);
        return;
    }
    printf("%s\n", tw_json_str(j));
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

/* The findings that `cause` explains (finding_cause.h), indented under
 * it: they are its consequences, not problems of their own. */
static void consequences(tw_job *job, const tw_rule *cause)
{
    for (size_t i = 0; i < tw_job_nrules(job); i++) {
        tw_rule *top = tw_job_rule(job, i);
        size_t n = tw_rule_nchildren(top);
        for (size_t k = 0; k < (n > 0 ? n : 1); k++) {
            tw_rule *r = n > 0 ? tw_rule_child(top, k) : top;
            tw_rule_cause c;
            tw_finding f;
            if (!tw_job_rule_cause(job, r, &c) || c.rule != cause ||
                tw_rule_finding(r, &f) != TW_OK)
                continue;
            printf("  caused by it: %s%s%s%s %s\n", tw_rule_name(r),
                   f.nnames > 0 ? " (" : "", f.nnames > 0 ? f.names[0] : "",
                   f.nnames > 0 ? "):" : ":", f.summary);
        }
    }
}

/* Findings of every rule (and sub-rule) that found issues or failed, as
 * the rule describes them (plugin.h tw_finding), a few wrapped lines each;
 * the raw report is behind --json. A finding that another explains is
 * shown under its cause instead. */
static void findings(tw_job *job, tw_rule *rule, int64_t job_start_us)
{
    tw_rule_status st = tw_rule_get_status(rule);
    if (tw_rule_nchildren(rule) > 0) {
        for (size_t i = 0; i < tw_rule_nchildren(rule); i++)
            findings(job, tw_rule_child(rule, i), job_start_us);
        return;
    }
    if (st == TW_STATUS_ERROR) {
        printf("\n%s: error: %s\n", tw_rule_name(rule), tw_rule_error(rule));
        return;
    }
    tw_finding f;
    tw_rule_cause cause;
    if (tw_rule_finding(rule, &f) != TW_OK ||
        tw_job_rule_cause(job, rule, &cause))
        return;
    const tw_scan_result *res = tw_rule_last_result(rule);
    printf("\n%s: %lld violation(s) in %lld datapoints, condition met in "
           "%llu of %llu scan(s)\n",
           tw_rule_name(rule), (long long)res->violations,
           (long long)res->datapoints,
           (unsigned long long)tw_rule_conditions_met(rule),
           (unsigned long long)tw_rule_scans(rule));
    tw_finding_print(stdout, &f, job_start_us, 78);
    consequences(job, rule);
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
    for (size_t i = 0; i < tw_job_nrules(job); i++)
        findings(job, tw_job_rule(job, i), tw_job_first_timestamp(job));
}

/* What one evaluation of the folder needs (eval_run). */
typedef struct eval_run_args {
    const char *id;
    const tw_job_config *jc;
    tw_registry *reg;
    const tw_config *cfg;
    const tw_folder *folder;
    const int64_t *horizons;
    int64_t first_us, limit_us;
    int quiet, progress, steps;
    unsigned threads; /* 1: read on the main thread */
    const char *rules_path;
    FILE *triggered; /* --triggered, or NULL */
} eval_run_args;

/* --triggered: the rules whose conditions_met grew in a scan. */
typedef struct eval_triggered_ctx {
    FILE *out;
    uint64_t *seen; /* conditions_met after the previous scan, per rule */
    size_t nseen;
    tw_json *line;
    int failed;
} eval_triggered_ctx;

static void triggered_rule(eval_triggered_ctx *t, const tw_scan *scan,
                           const tw_rule *r, const char *parent, size_t at)
{
    TW_ASSERT(at < t->nseen);
    uint64_t met = tw_rule_conditions_met(r);
    if (met == t->seen[at])
        return;
    t->seen[at] = met;
    tw_json_reset(t->line);
    tw_json_object_begin(t->line);
    tw_json_key(t->line, "scan");
    tw_json_int(t->line, (int64_t)scan->index);
    tw_json_key(t->line, "start_us");
    tw_json_int(t->line, scan->start_us);
    tw_json_key(t->line, "end_us");
    tw_json_int(t->line, scan->end_us);
    tw_json_key(t->line, "rule");
    tw_json_string(t->line, tw_rule_name(r));
    tw_json_key(t->line, "parent");
    if (parent != NULL)
        tw_json_string(t->line, parent);
    else
        tw_json_null(t->line);
    tw_json_object_end(t->line);
    if (tw_json_failed(t->line) ||
        fprintf(t->out, "%s\n", tw_json_str(t->line)) < 0)
        t->failed = 1;
}

static void on_scan_triggered(void *ud, tw_job *job, const tw_scan *scan)
{
    eval_triggered_ctx *t = ud;
    size_t n = 0;
    for (size_t i = 0; i < tw_job_nrules(job); i++)
        n += 1 + tw_rule_nchildren(tw_job_rule(job, i));
    if (n > t->nseen) {
        uint64_t *p = realloc(t->seen, n * sizeof(*p));
        if (p == NULL) {
            t->failed = 1;
            return;
        }
        memset(p + t->nseen, 0, (n - t->nseen) * sizeof(*p));
        t->seen = p;
        t->nseen = n;
    }
    size_t at = 0;
    for (size_t i = 0; i < tw_job_nrules(job); i++) {
        tw_rule *top = tw_job_rule(job, i);
        triggered_rule(t, scan, top, NULL, at++);
        for (size_t k = 0; k < tw_rule_nchildren(top); k++)
            triggered_rule(t, scan, tw_rule_child(top, k), tw_rule_name(top),
                           at++);
    }
}

/* --roundtrip: after each scan every rule goes through a checkpoint. */
typedef struct eval_roundtrip_ctx {
    uint64_t scans;
    int failed;
    char first_error[600];
} eval_roundtrip_ctx;

static void on_scan_roundtrip(void *ud, tw_job *job, const tw_scan *scan)
{
    eval_roundtrip_ctx *rt = ud;
    rt->scans++;
    for (size_t i = 0; i < tw_job_nrules(job); i++) {
        char err[512];
        if (tw_rule_roundtrip(tw_job_rule(job, i), err, sizeof(err)) == TW_OK)
            continue;
        if (!rt->failed)
            snprintf(rt->first_error, sizeof(rt->first_error), "scan %llu: %s",
                     (unsigned long long)scan->index, err);
        rt->failed = 1;
    }
}

/* Reads the whole folder into a new job and finishes it; with rt, every
 * rule is round-tripped after each scan. */
static int eval_run(const eval_run_args *a, eval_roundtrip_ctx *rt,
                    tw_reader_stats *rs, tw_job **out)
{
    char err[1024];
    tw_job *job = NULL;
    tw_prefetch *pf = NULL; /* before the first goto fail, which frees it */
    tw_trace_state *ts = tw_trace_state_new();
    memset(rs, 0, sizeof(*rs));
    if (ts == NULL) {
        fprintf(stderr, "trainwatch eval: out of memory\n");
        return TW_ERR;
    }
    if (tw_job_new(a->id, a->jc, a->reg, a->cfg->rules, a->cfg->nrules, &job,
                   err, sizeof(err)) != TW_OK) {
        fprintf(stderr, "trainwatch eval: %s%s%s\n",
                a->rules_path ? a->rules_path : "", a->rules_path ? ": " : "",
                err);
        tw_trace_state_free(ts);
        return TW_ERR;
    }
    eval_triggered_ctx trig = {.out = a->triggered};
    if (rt != NULL) {
        tw_job_on_scan(job, on_scan_roundtrip, rt);
    } else if (a->triggered != NULL) {
        if ((trig.line = tw_json_new()) == NULL) {
            fprintf(stderr, "trainwatch eval: out of memory\n");
            goto fail;
        }
        tw_json_set_compact(trig.line, 1);
        tw_job_on_scan(job, on_scan_triggered, &trig);
    }
    tw_job_set_first_timestamp(job, a->first_us);
    tw_job_set_scan_limit(job, a->limit_us);
    eval_ctx ec = {.job = job, .quiet = a->quiet, .steps = a->steps};
    /* a few files per thread ahead: enough to keep every core busy, and
     * memory bounded by the window whatever the folder's size */
    if (a->threads > 1 &&
        tw_prefetch_start(a->folder, a->id, a->threads, 8 * (size_t)a->threads,
                          &pf, err, sizeof(err)) != TW_OK) {
        fprintf(stderr, "trainwatch eval: %s\n", err);
        goto fail;
    }
    double last_progress = (tw_mono_us() / 1e6);
    for (size_t i = 0; i < a->folder->nfiles; i++) {
        const tw_agent_file *f = &a->folder->files[i];
        if (tw_job_advance(job, a->horizons[i]) != TW_OK) {
            fprintf(stderr, "trainwatch eval: out of memory\n");
            goto fail;
        }
        int rc = pf != NULL
                     ? tw_prefetch_feed(pf, i, sink, &ec, on_bad_input, &ec, rs)
                     : tw_folder_read_file(f, a->id, ts, sink, &ec,
                                           on_bad_input, &ec, rs);
        if (rc != TW_OK || ec.failed) {
            fprintf(stderr, "trainwatch eval: failed while reading %s\n",
                    f->path);
            goto fail;
        }
        double t = (tw_mono_us() / 1e6);
        if (a->progress && t - last_progress > 5.0) {
            fprintf(stderr, "eval: %zu/%zu files, %.1f MB read\n", i + 1,
                    a->folder->nfiles, (double)rs->bytes / 1e6);
            last_progress = t;
        }
    }
    tw_prefetch_free(pf);
    pf = NULL;
    if (tw_job_finish(job, a->limit_us) != TW_OK) {
        fprintf(stderr, "trainwatch eval: out of memory\n");
        goto fail;
    }
    if (trig.failed) {
        fprintf(stderr, "trainwatch eval: --triggered: writing failed (%s)\n",
                strerror(errno));
        goto fail;
    }
    tw_job_on_scan(job, NULL, NULL);
    free(trig.seen);
    tw_json_free(trig.line);
    tw_trace_state_free(ts);
    *out = job;
    return TW_OK;
fail:
    free(trig.seen);
    tw_json_free(trig.line);
    tw_prefetch_free(pf);
    tw_trace_state_free(ts);
    tw_job_free(job);
    return TW_ERR;
}

/* One rule's result as results files write it (job_results.h). */
static char *rule_result_text(tw_job *job, tw_rule *rule)
{
    tw_json *j = tw_json_new(), *scratch = tw_json_new();
    char *text = NULL;
    if (j != NULL && scratch != NULL) {
        tw_json_set_strict(j, 1);
        tw_json_set_strict(scratch, 1);
        tw_json_array_begin(j); /* the rule, then its sub-rules */
        tw_job_results_rule(j, scratch, job, rule);
        tw_json_array_end(j);
        if (!tw_json_failed(j))
            text = tw_json_take(j);
    }
    tw_json_free(j);
    tw_json_free(scratch);
    return text;
}

/* --roundtrip: evaluate again with a checkpoint round trip of every rule
 * after each scan and compare each rule's results (report, counters,
 * finding) with the uninterrupted evaluation `plain`. 0 when equal. */
static int eval_roundtrip(const eval_run_args *a, tw_job *plain)
{
    eval_roundtrip_ctx rt = {0};
    tw_reader_stats rs;
    tw_job *job = NULL;
    if (eval_run(a, &rt, &rs, &job) != TW_OK)
        return 1;
    size_t differ = 0;
    for (size_t i = 0; i < tw_job_nrules(plain); i++) {
        char *x = rule_result_text(plain, tw_job_rule(plain, i));
        char *y = rule_result_text(job, tw_job_rule(job, i));
        if (x == NULL || y == NULL || strcmp(x, y) != 0) {
            differ++;
            printf("roundtrip: rule %s: results differ from an uninterrupted "
                   "evaluation\n  uninterrupted: %.300s\n  round-tripped: "
                   "%.300s\n",
                   tw_rule_name(tw_job_rule(plain, i)), x ? x : "?",
                   y ? y : "?");
        }
        free(x);
        free(y);
    }
    if (rt.failed)
        printf("roundtrip: %s\n", rt.first_error);
    int ok = differ == 0 && !rt.failed;
    size_t nsub = 0;
    for (size_t i = 0; i < tw_job_nrules(plain); i++)
        nsub += tw_rule_nchildren(tw_job_rule(plain, i));
    printf("roundtrip: %s: %zu rule(s) (and %zu sub-rule(s)) saved, "
           "re-created and restored after each of %llu scans; %zu with "
           "results different from an uninterrupted evaluation\n",
           ok ? "ok" : "FAILED", tw_job_nrules(plain), nsub,
           (unsigned long long)rt.scans, differ);
    tw_job_free(job);
    return ok ? 0 : 1;
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
        case OPT_ROUNDTRIP:
            o->roundtrip = 1;
            break;
        case OPT_STEPS:
            o->steps = 1;
            break;
        case OPT_TRIGGERED:
            o->triggered_path = p.arg;
            break;
        case OPT_THREADS: {
            char *end;
            unsigned long v = strtoul(p.arg, &end, 10);
            if (end == p.arg || *end != '\0' || v < 1 || v > 256) {
                tw_cli_usage_error(&eval_command,
                                   "--threads must be a number of threads "
                                   "from 1 to 256, not '%s'",
                                   p.arg);
                return -1;
            }
            o->threads = (unsigned)v;
            break;
        }
        case OPT_TRACE_START:
            if (tw_cli_parse_epoch_us(p.arg, &o->trace_start_us) != 0) {
                tw_cli_usage_error(&eval_command,
                                   "--trace-start must be seconds since the "
                                   "epoch (e.g. 1700000000.25), not '%s'",
                                   p.arg);
                return -1;
            }
            o->has_trace_start = 1;
            break;
        }
    }
    if (o->steps && o->as_json) {
        tw_cli_usage_error(&eval_command, "--steps and --json exclude each "
                                          "other");
        return -1;
    }
    if (p.optind != argc - 1) {
        fprintf(stderr, "trainwatch eval: expected exactly one folder "
                        "argument\n\n");
        tw_cli_help(&eval_command, stderr);
        return -1;
    }
    o->dir = argv[p.optind];
    if (o->threads == 0) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        o->threads = n < 1 ? 1 : n > 256 ? 256 : (unsigned)n;
    }
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
/* The folder's listing, the rule configuration and the run's arguments;
 * -1 after a message. */
typedef struct eval_setup {
    int debug; /* a legacy debug-output folder (eval_debug.h) */
    tw_folder *folder;
    tw_config *cfg;
    tw_registry *reg;
    tw_job_config jc;
    int64_t *horizons;
    char namebuf[1024];
    eval_run_args ra;
} eval_setup;

static int eval_load(const eval_opts *o, eval_setup *e)
{
    char err[1024];
    if ((e->reg = tw_registry_new()) == NULL) {
        fprintf(stderr, "trainwatch eval: out of memory\n");
        return -1;
    }
    if (tw_folder_list(o->dir, &e->folder, err, sizeof(err)) != TW_OK) {
        fprintf(stderr, "trainwatch eval: %s\n", err);
        return -1;
    }
    /* Files may be missing: each folder not walked is named (the counts
     * are in the output too, also with --quiet). */
    for (size_t i = 0; i < e->folder->nproblems; i++)
        tw_log(TW_LOG_WARN, "eval: folder not read: %s: %s",
               e->folder->problems[i].path, e->folder->problems[i].reason);
    e->debug = e->folder->nfiles == 0 && tw_debug_folder_detect(o->dir);
    if (e->folder->nfiles == 0 && !e->debug) {
        fprintf(stderr,
                "trainwatch eval: no agent files under '%s' (expected "
                "system/incremental/.../<epoch>.algo-N.json, "
                "framework/pevents/... or *.pt.trace.json files)\n",
                o->dir);
        return -1;
    }
    if (o->has_trace_start)
        tw_folder_anchor_traces(e->folder, o->trace_start_us);
    int rc = tw_config_load_or_default(o->rules_path, e->reg, &e->cfg, err,
                                       sizeof(err));
    if (rc != TW_OK) {
        fprintf(stderr, "trainwatch eval: %s\n", err);
        return -1;
    }
    e->jc = e->cfg->job;
    e->jc.external_watermark = 1;
    if (o->sem != NULL) {
        e->jc.semantics = o->semantics;
        for (size_t i = 0; i < e->cfg->nrules; i++)
            e->cfg->rules[i].has_semantics = 0;
    }
    snprintf(e->namebuf, sizeof(e->namebuf), "%s", o->dir);
    size_t nl = strlen(e->namebuf);
    while (nl > 1 && e->namebuf[nl - 1] == '/')
        e->namebuf[--nl] = '\0';
    const tw_folder *folder = e->folder;
    /* F and L from the file names, as the reference derives them. */
    int64_t F = folder->first_system_ts_us;
    if (folder->first_framework_ts_us != 0 &&
        (F == 0 || folder->first_framework_ts_us < F))
        F = folder->first_framework_ts_us;
    int64_t L = folder->latest_system_ts_us;
    if (L == 0 || (folder->latest_framework_ts_us != 0 &&
                   folder->latest_framework_ts_us < L))
        L = folder->latest_framework_ts_us;
    if ((e->horizons = listing_horizons(folder)) == NULL) {
        fprintf(stderr, "trainwatch eval: out of memory\n");
        return -1;
    }
    e->ra = (eval_run_args){.id = o->job_name != NULL ? o->job_name
                                                      : basename(e->namebuf),
                            .jc = &e->jc,
                            .reg = e->reg,
                            .cfg = e->cfg,
                            .folder = folder,
                            .horizons = e->horizons,
                            .first_us = F,
                            .limit_us = L,
                            .quiet = o->quiet,
                            .progress = !o->quiet && !o->as_json,
                            .steps = o->steps,
                            .threads = o->threads,
                            .rules_path = o->rules_path};
    return 0;
}

static void eval_free(eval_setup *e)
{
    free(e->horizons);
    tw_config_free(e->cfg);
    tw_folder_free(e->folder);
    tw_registry_free(e->reg);
}

int tw_cmd_eval(int argc, char **argv)
{
    eval_opts o;
    int status;
    if (eval_load_options(&o, argc, argv, &status) != 0)
        return status;
    tw_log_set_level(o.quiet ? TW_LOG_ERROR : TW_LOG_WARN);
    eval_setup e;
    memset(&e, 0, sizeof(e));
    tw_job *job = NULL;
    tw_reader_stats rs;
    status = 1;
    double t0 = (tw_mono_us() / 1e6);
    FILE *trig = NULL;
    if (o.triggered_path != NULL &&
        (trig = fopen(o.triggered_path, "w")) == NULL) {
        fprintf(stderr, "trainwatch eval: --triggered: cannot write %s: %s\n",
                o.triggered_path, strerror(errno));
        return 1;
    }
    int loaded = eval_load(&o, &e) == 0;
    e.ra.triggered = trig;
    if (loaded && e.debug && (o.roundtrip || trig != NULL)) {
        fprintf(stderr, "trainwatch eval: --roundtrip and --triggered are "
                        "for profiler folders, not debug-output folders\n");
        loaded = 0;
    }
    int ran = 0;
    if (loaded && e.debug) {
        tw_eval_debug_args da = {.dir = o.dir,
                                 .id = e.ra.id,
                                 .reg = e.reg,
                                 .jc = &e.jc,
                                 .have_rules_file = o.rules_path != NULL,
                                 .rules = e.cfg->rules,
                                 .nrules = e.cfg->nrules,
                                 .quiet = o.quiet};
        ran = tw_eval_debug_job(&da, &job, &rs) == TW_OK;
    } else if (loaded) {
        ran = eval_run(&e.ra, NULL, &rs, &job) == TW_OK;
    }
    if (ran) {
        if (o.roundtrip) {
            status = eval_roundtrip(&e.ra, job);
        } else {
            if (o.as_json)
                print_json(job, o.dir, e.folder, &rs,
                           (tw_mono_us() / 1e6) - t0);
            else
                print_table(job, e.folder, &rs, (tw_mono_us() / 1e6) - t0);
            status = 0;
        }
    }
    if (trig != NULL && fclose(trig) != 0 && status == 0) {
        fprintf(stderr, "trainwatch eval: --triggered: writing %s: %s\n",
                o.triggered_path, strerror(errno));
        status = 1;
    }
    tw_job_free(job);
    eval_free(&e);
    return status;
}

int tw_eval_results_json(const char *dir, const char *rules_path, char **json)
{
    eval_opts o = {.dir = dir, .rules_path = rules_path, .quiet = 1};
    eval_setup e;
    memset(&e, 0, sizeof(e));
    tw_job *job = NULL;
    tw_reader_stats rs;
    int status = -1;
    double t0 = (tw_mono_us() / 1e6);
    *json = NULL;
    if (eval_load(&o, &e) == 0 && eval_run(&e.ra, NULL, &rs, &job) == TW_OK) {
        tw_results_source src = {.folder = dir,
                                 .files = rs.files,
                                 .bad_files = rs.bad_files,
                                 .unreadable_dirs = e.folder->unreadable_dirs,
                                 .skipped_dirs = e.folder->skipped_dirs,
                                 .lines = rs.lines,
                                 .bad_lines = rs.bad_lines,
                                 .seconds = (tw_mono_us() / 1e6) - t0};
        tw_json *j = tw_json_new();
        if (j != NULL && tw_job_results_write_from(j, job, &src) == TW_OK &&
            (*json = strdup(tw_json_str(j))) != NULL)
            status = 0;
        else
            fprintf(stderr, "trainwatch: evaluating %s: out of memory\n", dir);
        tw_json_free(j);
    }
    tw_job_free(job);
    eval_free(&e);
    return status;
}
