/*
 * report_html.c - the sections of the HTML report (report_html.h), in the
 * order of the reference's profiler report, then what it lacks: the
 * finding texts, the time ranges in which rules triggered and a link to
 * the merged timeline. Each section says plainly when its input is absent.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "finding_text.h"
#include "plugin_host.h"
#include "report_html.h"
#include "report_svg.h"
#include "trainwatch/plugin.h"

const char *const tw_report_sections[] = {"summary",
                                          "system-usage",
                                          "framework-metrics",
                                          "operators",
                                          "rules-summary",
                                          "findings",
                                          "rule-timeline",
                                          "step-durations",
                                          "gpu-utilization",
                                          "gpu-heatmap",
                                          "workload",
                                          "dataloading",
                                          "batch-size",
                                          "bottlenecks",
                                          "gpu-memory",
                                          "timeline",
                                          NULL};

const char *tw_report_describe_registry(void *registry, const char *rule)
{
    const tw_plugin *p = NULL;
    char err[256];
    if (tw_registry_find(registry, rule, &p, err, sizeof(err)) != TW_OK)
        return NULL;
    return tw_plugin_descriptor(p)->description;
}

/* Pies and tables name at most this many slices or rows per chart. */
#define MAX_ITEMS 64

static double num(const json_t *o, const char *key)
{
    const json_t *v = json_object_get(o, key);
    return json_is_number(v) ? json_number_value(v) : NAN;
}

/* A time in µs; 0 when absent or out of range (never an undefined cast). */
static int64_t num_us(const json_t *o, const char *key)
{
    double v = num(o, key);
    return isfinite(v) && fabs(v) < 9.2e18 ? (int64_t)v : 0;
}

static const json_t *rule_named(const json_t *rules, const char *name)
{
    size_t i;
    const json_t *r;
    json_array_foreach(rules, i, r)
    {
        const char *n = json_string_value(json_object_get(r, "name"));
        if (n != NULL && strcmp(n, name) == 0)
            return r;
    }
    return NULL;
}

static const json_t *details(const json_t *rules, const char *name)
{
    return json_object_get(json_object_get(rule_named(rules, name), "report"),
                           "Details");
}

static void section(FILE *out, const char *id, const char *title,
                    const char *intro)
{
    fprintf(out, "<section id=\"%s\"><h2>", id);
    tw_html_escape(out, title);
    fputs("</h2>\n", out);
    if (intro != NULL) {
        fputs("<p>", out);
        tw_html_escape(out, intro);
        fputs("</p>\n", out);
    }
}

static void end_section(FILE *out)
{
    fputs("</section>\n", out);
}

static void missing(FILE *out, const char *what)
{
    fputs("<p class=\"missing\">Not available: ", out);
    tw_html_escape(out, what);
    fputs("</p>\n", out);
}

static void cell_num(FILE *out, double v)
{
    if (isfinite(v))
        fprintf(out, "<td class=\"n\">%.6g</td>", v);
    else
        fputs("<td class=\"n\">&ndash;</td>", out);
}

static void cell_text(FILE *out, const char *s)
{
    fputs("<td>", out);
    tw_html_escape(out, s != NULL ? s : "\xe2\x80\x93");
    fputs("</td>", out);
}

static void time_cell(FILE *out, int64_t us)
{
    char buf[64];
    tw_format_utc(us, buf, sizeof(buf));
    cell_text(out, buf);
}

/* A pie of an object's numeric members. */
static void pie_of(FILE *out, const char *title, const json_t *obj)
{
    const char *labels[MAX_ITEMS];
    double values[MAX_ITEMS];
    size_t n = 0;
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)obj, k, v)
    {
        if (n < MAX_ITEMS && json_is_number(v)) {
            labels[n] = k;
            values[n++] = json_number_value(v);
        }
    }
    tw_svg_pie(out, title, labels, values, n);
}

/* A histogram from {"probs":[..],"binedges":[..]} (the rules' own bins). */
static void histogram_of(FILE *out, const char *title, const json_t *h,
                         const char *unit)
{
    const json_t *probs = json_object_get(h, "probs");
    const json_t *edges = json_object_get(h, "binedges");
    size_t n = json_array_size(probs);
    double *v = n > 0 ? calloc(n, sizeof(*v)) : NULL;
    if (v == NULL) {
        tw_svg_bars(out, title, NULL, 0, "", "");
        return;
    }
    for (size_t i = 0; i < n; i++)
        v[i] = json_number_value(json_array_get(probs, i));
    char first[64] = "", last[64] = "";
    size_t ne = json_array_size(edges);
    if (ne > 0) {
        snprintf(first, sizeof(first), "%.4g %s",
                 json_number_value(json_array_get(edges, 0)), unit);
        snprintf(last, sizeof(last), "%.4g %s",
                 json_number_value(json_array_get(edges, ne - 1)), unit);
    }
    tw_svg_bars(out, title, v, n, first, last);
    free(v);
}

static void head(FILE *out, const char *job)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n"
          "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src "
          "'none'; style-src 'unsafe-inline'\">\n<title>trainwatch report: ",
          out);
    tw_html_escape(out, job);
    fputs("</title>\n<style>\n"
          "body{font-family:sans-serif;margin:1.5em;color:#222;max-width:70em}"
          "\nh2{border-bottom:1px solid #ccc;margin-top:1.6em}"
          "\ntable{border-collapse:collapse;margin:.5em 0}"
          "\ntd,th{border:1px solid #ccc;padding:2px 6px;font-size:90%;"
          "vertical-align:top}"
          "\nth{background:#eee;text-align:left}td.n{text-align:right}"
          "\nfigure{display:inline-block;margin:.4em 1em .4em 0}"
          "\nfigcaption{font-size:85%;color:#555}svg text{font-size:11px}"
          "\n.missing,.nochart{color:#777;font-style:italic}"
          "\n.IssuesFound{color:#b00;font-weight:bold}"
          "\n@media print{body{margin:0;max-width:none}section,figure,tr"
          "{break-inside:avoid}a{color:#000}}\n</style></head><body>\n<h1>",
          out);
    fputs("Training job report: ", out);
    tw_html_escape(out, job);
    fputs("</h1>\n", out);
}

static void summary(FILE *out, const tw_report_input *in, const json_t *rules)
{
    section(out, "summary", "Job summary",
            "When the job ran, how long each part took and where the time "
            "went by training phase.");
    const json_t *job = json_object_get(in->stats, "job");
    fputs("<table>", out);
    if (job != NULL) {
        static const char *const k[][2] = {
            {"start_us", "Job start (UTC)"},
            {"end_us", "Job end (UTC)"},
            {"training_loop_start_us", "Training loop start (UTC)"},
            {"training_loop_end_us", "Training loop end (UTC)"}};
        for (size_t i = 0; i < sizeof(k) / sizeof(k[0]); i++) {
            fprintf(out, "<tr><th>%s</th>", k[i][1]);
            time_cell(out, num_us(job, k[i][0]));
            fputs("</tr>", out);
        }
        static const char *const d[][2] = {
            {"duration_us", "Job duration (s)"},
            {"training_loop_duration_us", "Training loop duration (s)"},
            {"initialization_us", "Initialization (s)"},
            {"finalization_us", "Finalization (s)"}};
        for (size_t i = 0; i < sizeof(d) / sizeof(d[0]); i++) {
            fprintf(out, "<tr><th>%s</th>", d[i][1]);
            cell_num(out, num(job, d[i][0]) / 1e6);
            fputs("</tr>", out);
        }
    } else {
        fputs("<tr><th>First data (UTC)</th>", out);
        time_cell(out, num_us(in->results, "first_timestamp_us"));
        fputs("</tr><tr><th>Latest data (UTC)</th>", out);
        time_cell(out, num_us(in->results, "latest_timestamp_us"));
        fputs("</tr>", out);
        const json_t *init = details(rules, "MaxInitializationTime");
        const json_t *steps = json_object_get(init, "step_num");
        if (steps != NULL) {
            fputs("<tr><th>Initialization (s)</th>", out);
            cell_num(out, num(steps, "first") / 1e6 - num(init, "job_start"));
            fputs("</tr>", out);
        }
    }
    fputs("</table>\n", out);
    if (job == NULL)
        missing(out, "the training-loop and finalization times need the "
                     "folder (`trainwatch report DIR`); a results file "
                     "holds only the initialization rule's numbers.");
    /* Phase pie: time per training phase, summed over nodes. */
    const json_t *phases = json_object_get(in->stats, "phases");
    if (json_array_size(phases) > 0) {
        const char *labels[MAX_ITEMS];
        double values[MAX_ITEMS];
        size_t n = 0, i;
        const json_t *p;
        json_array_foreach(phases, i, p)
        {
            const char *name = json_string_value(json_object_get(p, "phase"));
            double d = num(p, "end_us") - num(p, "start_us");
            if (name == NULL || !isfinite(d))
                continue;
            size_t j = 0;
            while (j < n && strcmp(labels[j], name) != 0)
                j++;
            if (j == n && n < MAX_ITEMS) {
                labels[n] = name;
                values[n++] = 0;
            }
            if (j < n)
                values[j] += d;
        }
        tw_svg_pie(out, "Time per training phase (all nodes)", labels, values,
                   n);
    } else {
        pie_of(out, "Time per training phase (framework events)",
               json_object_get(details(rules, "OverallFrameworkMetrics"),
                               "phase"));
    }
    const json_t *in_counts = json_object_get(in->results, "input");
    fprintf(out,
            "<p>Read %.0f files, %.0f system samples and %.0f framework "
            "events; %.0f bad lines.</p>\n",
            num(in_counts, "files"), num(in_counts, "samples"),
            num(in_counts, "events"), num(in_counts, "bad_lines"));
    end_section(out);
}

/* One sentence of advice per node from its GPU and CPU percentiles. */
static const char *node_advice(double gpu_p95, double cpu_p95)
{
    if (isfinite(gpu_p95) && gpu_p95 < 70 && isfinite(cpu_p95) && cpu_p95 > 90)
        return "GPUs wait on saturated CPUs: move preprocessing off the CPU "
               "or use more data-loading workers.";
    if (isfinite(gpu_p95) && gpu_p95 < 70)
        return "GPUs are underused most of the time: a larger batch or a "
               "smaller instance type would cost less.";
    if (isfinite(cpu_p95) && cpu_p95 > 90)
        return "CPUs are saturated: check data loading and preprocessing.";
    return "No sign of under- or over-use.";
}

static void system_usage(FILE *out, const json_t *rules)
{
    section(out, "system-usage", "System usage",
            "Per node: the distribution of each resource over the whole job "
            "(percent, network in bytes per second), then one line of advice.");
    const json_t *u = details(rules, "OverallSystemUsage");
    if (json_object_size(u) == 0) {
        missing(out, "the OverallSystemUsage rule reported nothing.");
        end_section(out);
        return;
    }
    fputs("<table><tr><th>Metric</th><th>Node</th><th>min</th><th>p50</th>"
          "<th>p95</th><th>p99</th><th>max</th></tr>\n",
          out);
    const char *metric, *node;
    const json_t *per_node, *st;
    json_object_foreach((json_t *)u, metric, per_node)
    {
        json_object_foreach((json_t *)per_node, node, st)
        {
            fputs("<tr>", out);
            cell_text(out, metric);
            cell_text(out, node);
            cell_num(out, num(st, "min"));
            cell_num(out, num(st, "p50"));
            cell_num(out, num(st, "p95"));
            cell_num(out, num(st, "p99"));
            cell_num(out, num(st, "max"));
            fputs("</tr>\n", out);
        }
    }
    fputs("</table>\n<table><tr><th>Node</th><th>Advice</th></tr>\n", out);
    const json_t *cpu = json_object_get(u, "CPU");
    json_object_foreach((json_t *)cpu, node, st)
    {
        double g = num(json_object_get(json_object_get(u, "GPU"), node), "p95");
        fputs("<tr>", out);
        cell_text(out, node);
        cell_text(out, node_advice(g, num(st, "p95")));
        fputs("</tr>\n", out);
    }
    fputs("</table>\n", out);
    end_section(out);
}

typedef struct op_row {
    const char *name;
    double share, total_us;
} op_row;

static int by_share(const void *a, const void *b)
{
    const op_row *x = a, *y = b;
    if (x->share != y->share)
        return x->share < y->share ? 1 : -1;
    return strcmp(x->name, y->name);
}

/* The reference's "Overview: CPU/GPU operators": every operator above 2 %
 * of the kind's time (OverallFrameworkMetrics' `CPU`, renormalized, and
 * `CPU_total` in µs), largest first, with a pie. */
static void operator_table(FILE *out, const json_t *f, const char *kind)
{
    char key[16], title[64];
    snprintf(key, sizeof(key), "%s_total", kind);
    const json_t *share = json_object_get(f, kind);
    const json_t *total = json_object_get(f, key);
    snprintf(title, sizeof(title), "%s operators", kind);
    fprintf(out, "<h3>%s</h3>\n", title);
    size_t n = json_object_size(share);
    op_row *rows = n > 0 ? calloc(n, sizeof(*rows)) : NULL;
    if (rows == NULL) {
        fprintf(out,
                "<p>No %s operator was recorded (the job's traces hold no "
                "detailed profiling).</p>\n",
                kind);
        return;
    }
    size_t k = 0;
    const char *name;
    const json_t *v;
    json_object_foreach((json_t *)share, name, v)
    {
        const json_t *us = json_object_get(total, name);
        rows[k++] = (op_row){name, json_number_value(v),
                             json_is_number(us) ? json_number_value(us) : NAN};
    }
    qsort(rows, k, sizeof(*rows), by_share);
    fputs("<table><tr><th>% of time</th><th>Cumulative time (µs)</th>"
          "<th>Operator</th></tr>\n",
          out);
    const char **labels = malloc(k * sizeof(*labels));
    double *values = malloc(k * sizeof(*values));
    for (size_t i = 0; i < k; i++) {
        fputs("<tr>", out);
        cell_num(out, rows[i].share);
        cell_num(out, rows[i].total_us);
        cell_text(out, rows[i].name);
        fputs("</tr>\n", out);
        if (labels != NULL && values != NULL) {
            labels[i] = rows[i].name;
            values[i] = rows[i].share;
        }
    }
    fputs("</table>\n", out);
    if (labels != NULL && values != NULL)
        tw_svg_pie(out, title, labels, values, k);
    free(labels);
    free(values);
    free(rows);
}

static void framework(FILE *out, const json_t *rules)
{
    const json_t *f = details(rules, "OverallFrameworkMetrics");
    section(out, "framework-metrics", "Framework metrics",
            "Share of framework time by training phase, by kind of "
            "operation and between forward and backward passes.");
    if (f == NULL)
        missing(out, "the OverallFrameworkMetrics rule reported nothing.");
    pie_of(out, "Training phases", json_object_get(f, "phase"));
    pie_of(out, "General framework operations", json_object_get(f, "general"));
    pie_of(out, "Forward and backward passes",
           json_object_get(f, "forward_backward"));
    if (json_object_size(json_object_get(f, "ratio")) > 0)
        pie_of(out, "CPU and GPU operators", json_object_get(f, "ratio"));
    end_section(out);

    section(out, "operators", "CPU and GPU operators",
            "Time share per framework operation, as the framework-metrics "
            "rule measured it.");
    const char *groups[] = {"general", "forward_backward", "ratio"};
    fputs(
        "<table><tr><th>Group</th><th>Operation</th><th>% of time</th></tr>\n",
        out);
    for (size_t g = 0; g < 3; g++) {
        const char *k;
        const json_t *v;
        json_object_foreach(json_object_get(f, groups[g]), k, v)
        {
            fputs("<tr>", out);
            cell_text(out, groups[g]);
            cell_text(out, k);
            cell_num(out, json_number_value(v));
            fputs("</tr>\n", out);
        }
    }
    fputs("</table>\n", out);
    operator_table(out, f, "CPU");
    operator_table(out, f, "GPU");
    end_section(out);
}

static int by_triggered(const void *a, const void *b)
{
    double x = num(*(json_t *const *)a, "rule_triggered");
    double y = num(*(json_t *const *)b, "rule_triggered");
    return x < y ? 1 : x > y ? -1 : 0;
}

static int rules_summary(FILE *out, const tw_report_input *in,
                         const json_t *rules)
{
    section(out, "rules-summary", "Rules summary",
            "Every rule, most often triggered first, with what it checks and "
            "what to try when it fires.");
    size_t n = json_array_size(rules);
    const json_t **v = n > 0 ? calloc(n, sizeof(*v)) : NULL;
    if (n > 0 && v == NULL)
        return TW_ERR;
    size_t m = 0, i;
    const json_t *r;
    json_array_foreach(rules, i, r)
    {
        if (json_object_get(r, "parent") != NULL || json_array_size(rules) == 1)
            v[m++] = r;
    }
    if (m > 1) /* v is NULL when there are no rules */
        qsort(v, m, sizeof(*v), by_triggered);
    fputs("<table><tr><th>Rule</th><th>Status</th><th>Times triggered</th>"
          "<th>Violations</th><th>Datapoints</th><th>Description</th>"
          "<th>Recommendation</th></tr>\n",
          out);
    for (i = 0; i < m; i++) {
        const char *name = json_string_value(json_object_get(v[i], "name"));
        const char *status = json_string_value(json_object_get(v[i], "status"));
        const char *desc = in->describe != NULL && name != NULL
                               ? in->describe(in->describe_ud, name)
                               : NULL;
        const char *rec = json_string_value(json_object_get(
            json_object_get(v[i], "finding"), "recommendation"));
        fputs("<tr>", out);
        cell_text(out, name);
        fprintf(out, "<td class=\"%s\">", status != NULL ? status : "");
        tw_html_escape(out, status);
        fputs("</td>", out);
        cell_num(out, num(v[i], "rule_triggered"));
        cell_num(out, num(v[i], "violations"));
        cell_num(out, num(v[i], "datapoints"));
        cell_text(out, desc);
        cell_text(out, rec != NULL ? rec : "(not triggered)");
        fputs("</tr>\n", out);
    }
    fputs("</table>\n", out);
    free(v);
    end_section(out);
    return TW_OK;
}

static void findings(FILE *out, const json_t *rules, int64_t start_us,
                     int64_t end_us)
{
    section(out, "findings", "Findings",
            "What each triggered rule found, in its own words.");
    size_t i, nf = 0;
    const json_t *r;
    tw_svg_range ranges[MAX_ITEMS];
    size_t nr = 0;
    json_array_foreach(rules, i, r)
    {
        const json_t *f = json_object_get(r, "finding");
        if (f == NULL)
            continue;
        nf++;
        const char *name = json_string_value(json_object_get(r, "name"));
        fputs("<h3>", out);
        tw_html_escape(out, name);
        fputs("</h3><p>", out);
        tw_html_escape(out, json_string_value(json_object_get(f, "summary")));
        fputs("</p><ul>", out);
        const char *mag = json_string_value(
            json_object_get(json_object_get(f, "magnitude"), "text"));
        if (mag != NULL) {
            fputs("<li>How much: ", out);
            tw_html_escape(out, mag);
            fputs("</li>", out);
        }
        const json_t *nodes =
            json_object_get(json_object_get(f, "nodes"), "listed");
        if (json_array_size(nodes) > 0) {
            fputs("<li>Where: ", out);
            size_t j;
            const json_t *nd;
            json_array_foreach(nodes, j, nd)
            {
                if (j > 0)
                    fputs(", ", out);
                tw_html_escape(out, json_string_value(nd));
            }
            fputs("</li>", out);
        }
        const json_t *tr = json_object_get(f, "time_range");
        if (tr != NULL) {
            char a[64], b[64];
            tw_format_utc(num_us(tr, "first_us"), a, sizeof(a));
            tw_format_utc(num_us(tr, "last_us"), b, sizeof(b));
            fputs("<li>When: ", out);
            tw_html_escape(out, a);
            fputs(" to ", out);
            tw_html_escape(out, b);
            fputs("</li>", out);
            if (nr < MAX_ITEMS && name != NULL)
                ranges[nr++] = (tw_svg_range){name, num_us(tr, "first_us"),
                                              num_us(tr, "last_us")};
        }
        const char *cause = json_string_value(
            json_object_get(json_object_get(r, "caused_by"), "rule"));
        if (cause != NULL) {
            /* fixed semantics relate findings (docs/rules.md "Root cause
             * first"): say which finding explains this one */
            fputs("<li class=\"cause\">Caused by: ", out);
            tw_html_escape(out, cause);
            fputs(" (a consequence: fix that finding first)</li>", out);
        }
        const char *par = json_string_value(json_object_get(f, "parameters"));
        if (par != NULL) {
            fputs("<li>Decided by: ", out);
            tw_html_escape(out, par);
            fputs("</li>", out);
        }
        fputs("</ul>\n", out);
    }
    if (nf == 0)
        fputs("<p>No rule found an issue.</p>\n", out);
    end_section(out);

    section(out, "rule-timeline", "When rules triggered",
            "The time range of each finding across the job.");
    if (nr == 0)
        fputs("<p>No rule triggered, so there is nothing to mark.</p>\n", out);
    else
        tw_svg_ranges(out, "Finding time ranges", ranges, nr, start_us, end_us);
    end_section(out);
}

static void step_durations(FILE *out, const json_t *rules)
{
    section(out, "step-durations", "Step duration per node",
            "How long training steps took on each node (seconds), from the "
            "step-outlier rule's histogram; the table keeps the exact "
            "statistics.");
    const json_t *sd =
        json_object_get(details(rules, "StepOutlier"), "step_details");
    if (json_object_size(sd) == 0)
        missing(out, "no step events were read.");
    fputs("<table><tr><th>Node</th><th>Phase</th><th>mean</th><th>p50</th>"
          "<th>p95</th><th>p99</th><th>max</th><th>Outliers</th></tr>\n",
          out);
    const char *node;
    const json_t *d;
    json_object_foreach((json_t *)sd, node, d)
    {
        const json_t *s = json_object_get(d, "step_stats");
        fputs("<tr>", out);
        cell_text(out, node);
        cell_text(out, json_string_value(json_object_get(d, "phase")));
        cell_num(out, num(s, "mean"));
        cell_num(out, num(s, "p50"));
        cell_num(out, num(s, "p95"));
        cell_num(out, num(s, "p99"));
        cell_num(out, num(s, "max"));
        cell_num(out, num(d, "number_of_outliers"));
        fputs("</tr>\n", out);
    }
    fputs("</table>\n", out);
    json_object_foreach((json_t *)sd, node, d)
    {
        char title[256];
        snprintf(title, sizeof(title), "Step durations on %s", node);
        histogram_of(out, title, d, "s");
    }
    end_section(out);
}

static size_t usage_boxes(const json_t *usage, const char *metric,
                          tw_svg_box *b, char (*labels)[96], size_t max);

static void gpu_boxes(FILE *out, const json_t *rules)
{
    section(out, "gpu-utilization", "GPU utilization per GPU",
            "Box plots of each GPU's utilization (percent): whiskers min to "
            "max, box p25 to p75, line at the median.");
    const json_t *low = details(rules, "LowGPUUtilization");
    tw_svg_box b[MAX_ITEMS];
    char labels[MAX_ITEMS][96];
    size_t n = 0;
    const char *node, *gpu;
    const json_t *gpus, *s;
    json_object_foreach((json_t *)low, node, gpus)
    {
        json_object_foreach((json_t *)gpus, gpu, s)
        {
            if (n == MAX_ITEMS || !json_is_object(s))
                continue;
            snprintf(labels[n], sizeof(labels[n]), "%s/%s", node, gpu);
            b[n] =
                (tw_svg_box){labels[n],     num(s, "gpu_5"), num(s, "p25"),
                             num(s, "p50"), num(s, "p75"),   num(s, "gpu_max")};
            if (!isfinite(b[n].min))
                b[n].min = num(s, "lower");
            n++;
        }
    }
    if (n > 0) {
        tw_svg_boxes(out, "GPU utilization per GPU (p5 to max)", b, n, "%");
    } else {
        /* The rule keeps per-GPU quartiles only once it has a window of
         * samples; per node from the usage summary until then. */
        n = usage_boxes(details(rules, "OverallSystemUsage"), "GPU", b, labels,
                        MAX_ITEMS);
        fputs("<p>Per-GPU quartiles are not in the results (the "
              "LowGPUUtilization rule had not filled its window); per node "
              "instead, box p50 to p95.</p>\n",
              out);
        tw_svg_boxes(out, "GPU utilization per node (min to max)", b, n, "%");
    }
    end_section(out);
}

/* The statistics' gpu_heatmap: one row per node and GPU over time. */
static void gpu_heatmap(FILE *out, const json_t *stats)
{
    section(out, "gpu-heatmap", "GPU utilization over time",
            "The mean utilization of every GPU of every node per slice of "
            "time: a row that stays pale while the others are dark is a GPU "
            "that waits or was left idle.");
    const json_t *hm = json_object_get(stats, "gpu_heatmap");
    const json_t *rows = json_object_get(hm, "rows");
    double cols = num(hm, "columns"); /* NAN when absent */
    size_t ncols = cols >= 1 && cols <= 1000 ? (size_t)cols : 0;
    size_t nrows = json_array_size(rows);
    if (stats == NULL || !json_is_object(hm) || nrows == 0 || ncols == 0) {
        missing(out, stats == NULL ? "The heat map needs the job's folder "
                                     "(trainwatch report DIR)"
                                   : "No GPU utilization samples");
        end_section(out);
        return;
    }
    double *values = malloc(nrows * ncols * sizeof(double));
    char(*labels)[96] = malloc(nrows * sizeof(*labels));
    const char **names = malloc(nrows * sizeof(*names));
    if (values == NULL || labels == NULL || names == NULL) {
        missing(out, "Out of memory drawing the heat map");
    } else {
        for (size_t r = 0; r < nrows; r++) {
            const json_t *row = json_array_get(rows, r);
            const char *node = json_string_value(json_object_get(row, "node"));
            const char *gpu = json_string_value(json_object_get(row, "gpu"));
            snprintf(labels[r], sizeof(labels[r]), "%s/%s", node ? node : "?",
                     gpu ? gpu : "?");
            names[r] = labels[r];
            const json_t *mean = json_object_get(row, "mean");
            for (size_t c = 0; c < ncols; c++) {
                const json_t *v = json_array_get(mean, c);
                values[r * ncols + c] =
                    json_is_number(v) ? json_number_value(v) : NAN;
            }
        }
        double span_s = num(hm, "bucket_us") * (double)ncols / 1e6;
        tw_svg_heatmap(out, "GPU utilization over time per GPU", names, values,
                       nrows, ncols, span_s);
    }
    free(values);
    free(labels);
    free(names);
    end_section(out);
}

static void workload(FILE *out, const json_t *rules)
{
    section(out, "workload", "Workload balance",
            "Histograms of each GPU's utilization (samples per "
            "utilization bin, 0 to 100 %); differing shapes mean uneven "
            "work.");
    const json_t *lb = details(rules, "LoadBalancing");
    size_t drawn = 0;
    const char *node, *gpu;
    const json_t *nd, *h;
    json_object_foreach((json_t *)lb, node, nd)
    {
        json_object_foreach(json_object_get(nd, "workloads"), gpu, h)
        {
            size_t n = json_array_size(h);
            double v[256];
            if (n > 256)
                n = 256;
            for (size_t i = 0; i < n; i++)
                v[i] = json_number_value(json_array_get(h, i));
            char title[256];
            snprintf(title, sizeof(title), "Utilization histogram %s/%s", node,
                     gpu);
            tw_svg_bars(out, title, v, n, "0 %", "100 %");
            drawn++;
        }
    }
    if (drawn == 0)
        missing(out, "the LoadBalancing rule reported no GPU workloads.");
    end_section(out);
}

static void dataloading(FILE *out, const json_t *rules)
{
    section(out, "dataloading", "Data loading",
            "How long fetching a batch took (seconds) and how the data "
            "loaders were configured.");
    const json_t *d = details(rules, "Dataloader");
    if (d == NULL) {
        missing(out, "the Dataloader rule reported nothing.");
        end_section(out);
        return;
    }
    fputs("<table>", out);
    static const char *const k[] = {"dataloaders", "num_workers", "cores"};
    for (size_t i = 0; i < 3; i++) {
        fprintf(out, "<tr><th>%s</th>", k[i]);
        cell_num(out, num(d, k[i]));
        fputs("</tr>", out);
    }
    const json_t *pm = json_object_get(d, "pin_memory");
    fprintf(out, "<tr><th>pin_memory</th>");
    cell_text(out, pm == NULL ? NULL : json_is_true(pm) ? "yes" : "no");
    fputs("</tr></table>\n", out);
    histogram_of(out, "Batch fetch time",
                 json_object_get(d, "dataloading_time"), "s");
    end_section(out);
}

/* Box plots of one OverallSystemUsage metric across nodes. */
static size_t usage_boxes(const json_t *usage, const char *metric,
                          tw_svg_box *b, char (*labels)[96], size_t max)
{
    size_t n = 0;
    const char *node;
    const json_t *s;
    json_object_foreach(json_object_get(usage, metric), node, s)
    {
        if (n == max)
            break;
        snprintf(labels[n], sizeof(labels[n]), "%s %s", metric, node);
        b[n] = (tw_svg_box){labels[n],     num(s, "min"), num(s, "p50"),
                            num(s, "p50"), num(s, "p95"), num(s, "max")};
        n++;
    }
    return n;
}

static void batch_size(FILE *out, const json_t *rules)
{
    section(out, "batch-size", "Batch size",
            "A small batch leaves CPU, GPU and GPU memory idle; these box "
            "plots (box p50 to p95) show how much headroom each node had.");
    const json_t *usage = details(rules, "OverallSystemUsage");
    tw_svg_box b[MAX_ITEMS];
    char labels[MAX_ITEMS][96];
    const char *metrics[] = {"CPU", "GPU", "GPU memory"};
    for (size_t i = 0; i < 3; i++) {
        size_t n = usage_boxes(usage, metrics[i], b, labels, MAX_ITEMS);
        char title[128];
        snprintf(title, sizeof(title), "%s utilization per node", metrics[i]);
        tw_svg_boxes(out, title, b, n, "%");
    }
    const json_t *bs =
        json_object_get(rule_named(rules, "BatchSize"), "finding");
    if (bs != NULL) {
        fputs("<p>", out);
        tw_html_escape(out, json_string_value(json_object_get(bs, "summary")));
        fputs("</p>\n", out);
    }
    end_section(out);
}

static void bottlenecks(FILE *out, const json_t *rules)
{
    section(out, "bottlenecks", "Bottlenecks",
            "Of the moments with low GPU utilization, how many had a "
            "saturated CPU or busy I/O; then where framework time went "
            "while they happened.");
    const char *names[] = {"CPUBottleneck", "IOBottleneck"};
    for (size_t i = 0; i < 2; i++) {
        const json_t *d = details(rules, names[i]);
        double low = num(d, "low_gpu_utilization");
        const json_t *bn = json_object_get(d, "bottlenecks");
        double bot = json_is_object(bn) ? (double)json_object_size(bn)
                                        : json_number_value(bn);
        const char *labels[] = {"bottleneck", "other low-GPU time"};
        double values[] = {bot, low - bot};
        char title[128];
        snprintf(title, sizeof(title), "%s: low-GPU moments", names[i]);
        tw_svg_pie(out, title, labels, values, 2);
        if (json_object_size(json_object_get(d, "phase")) > 0) {
            snprintf(title, sizeof(title), "%s: phases during bottlenecks",
                     names[i]);
            pie_of(out, title, json_object_get(d, "phase"));
        }
    }
    end_section(out);
}

static void gpu_memory(FILE *out, const json_t *rules)
{
    section(out, "gpu-memory", "GPU memory",
            "GPU memory use per node (percent; box p50 to p95).");
    tw_svg_box b[MAX_ITEMS];
    char labels[MAX_ITEMS][96];
    size_t n = usage_boxes(details(rules, "OverallSystemUsage"), "GPU memory",
                           b, labels, MAX_ITEMS);
    tw_svg_boxes(out, "GPU memory per node", b, n, "%");
    const json_t *f =
        json_object_get(rule_named(rules, "GPUMemoryIncrease"), "finding");
    if (f != NULL) {
        fputs("<p>", out);
        tw_html_escape(out, json_string_value(json_object_get(f, "summary")));
        fputs("</p>\n", out);
    }
    end_section(out);
}

int tw_report_html_write(FILE *out, const tw_report_input *in, char *err,
                         size_t errlen)
{
    const json_t *rules = json_object_get(in->results, "rules");
    if (!json_is_object(in->results) || !json_is_array(rules)) {
        snprintf(err, errlen,
                 "the results are not an object with a \"rules\" array");
        return TW_ERR;
    }
    const char *job = json_string_value(json_object_get(in->results, "job"));
    head(out, job != NULL ? job : "(unnamed)");
    summary(out, in, rules);
    system_usage(out, rules);
    framework(out, rules);
    if (rules_summary(out, in, rules) != TW_OK) {
        snprintf(err, errlen, "out of memory sorting the rules");
        return TW_ERR;
    }
    int64_t start = num_us(in->results, "first_timestamp_us");
    int64_t end = num_us(in->results, "latest_timestamp_us");
    findings(out, rules, start, end);
    step_durations(out, rules);
    gpu_boxes(out, rules);
    gpu_heatmap(out, in->stats);
    workload(out, rules);
    dataloading(out, rules);
    batch_size(out, rules);
    bottlenecks(out, rules);
    gpu_memory(out, rules);
    section(out, "timeline", "Merged timeline", NULL);
    if (in->timeline_href != NULL) {
        fputs("<p>The merged framework and system timeline: <a href=\"", out);
        tw_html_escape(out, in->timeline_href);
        fputs("\">", out);
        tw_html_escape(out, in->timeline_href);
        fputs("</a> (open it in Perfetto or chrome://tracing).</p>\n", out);
    } else {
        fputs("<p>No merged timeline file next to this report (write one "
              "with <code>trainwatch timeline DIR -o FILE</code>).</p>\n",
              out);
    }
    end_section(out);
    fputs("</body></html>\n", out);
    if (ferror(out)) {
        snprintf(err, errlen, "writing the page failed");
        return TW_ERR;
    }
    return TW_OK;
}
