/*
 * job_statistics_write.c - `trainwatch stats` output (job_statistics.h):
 * a text report, one JSON object (numbers as Python's json writes them, so
 * a reader gets the exact doubles back) or long-form CSV.
 */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "job_statistics.h"
#include "job_statistics_internal.h"
#include "json_writer.h"

/* ---- JSON -------------------------------------------------------------------
 */

static void json_summary(tw_json *j, const tw_stat_summary *s)
{
    tw_json_key(j, "count");
    tw_json_int(j, (int64_t)s->count);
    const char *names[] = {"mean", "min", "max", "p50", "p95", "p99"};
    double v[] = {s->mean, s->min, s->max, s->p50, s->p95, s->p99};
    for (size_t i = 0; i < 6; i++) {
        tw_json_key(j, names[i]);
        tw_json_double(j, v[i]);
    }
}

static void json_opt_int(tw_json *j, const char *key, int has, int64_t v)
{
    tw_json_key(j, key);
    if (has)
        tw_json_int(j, v);
    else
        tw_json_null(j);
}

static void json_pct(tw_json *j, const char *key, int has, int64_t part,
                     int64_t whole)
{
    tw_json_key(j, key);
    if (has && whole > 0)
        tw_json_double(j, (double)part / (double)whole * 100.0);
    else
        tw_json_null(j);
}

static void json_job(tw_json *j, const tw_statistics *s)
{
    int job = s->has_job, loop = s->has_job && s->has_loop;
    int64_t dur = s->end_us - s->start_us;
    int64_t ldur = s->loop_end_us - s->loop_start_us;
    int64_t init = s->loop_start_us - s->start_us;
    int64_t fin = s->end_us - s->loop_end_us;
    tw_json_key(j, "job");
    tw_json_object_begin(j);
    json_opt_int(j, "start_us", job, s->start_us);
    json_opt_int(j, "end_us", job, s->end_us);
    json_opt_int(j, "duration_us", job, dur);
    json_opt_int(j, "training_loop_start_us", loop, s->loop_start_us);
    json_opt_int(j, "training_loop_end_us", loop, s->loop_end_us);
    json_opt_int(j, "training_loop_duration_us", loop, ldur);
    json_opt_int(j, "initialization_us", loop, init);
    json_opt_int(j, "finalization_us", loop, fin);
    json_pct(j, "initialization_pct", loop, init, dur);
    json_pct(j, "training_loop_pct", loop, ldur, dur);
    json_pct(j, "finalization_pct", loop, fin, dur);
    tw_json_object_end(j);
}

/* "gpu_heatmap": null without GPU utilization samples. */
static void json_heatmap(tw_json *j, const tw_statistics *s)
{
    tw_json_key(j, "gpu_heatmap");
    if (s->nheat == 0) {
        tw_json_null(j);
        return;
    }
    tw_json_object_begin(j);
    tw_json_key(j, "start_us");
    tw_json_int(j, s->heat_start_us);
    tw_json_key(j, "bucket_us");
    tw_json_int(j, s->heat_bucket_us);
    tw_json_key(j, "columns");
    tw_json_int(j, (int64_t)s->heat_columns);
    tw_json_key(j, "rows");
    tw_json_array_begin(j);
    for (size_t i = 0; i < s->nheat; i++) {
        tw_json_object_begin(j);
        tw_json_key(j, "node");
        tw_json_string(j, s->heat[i].node);
        tw_json_key(j, "gpu");
        tw_json_string(j, s->heat[i].gpu);
        tw_json_key(j, "mean");
        tw_json_array_begin(j);
        for (size_t c = 0; c < s->heat_columns; c++) {
            if (isnan(s->heat[i].mean[c]))
                tw_json_null(j);
            else
                tw_json_double(j, s->heat[i].mean[c]);
        }
        tw_json_array_end(j);
        tw_json_object_end(j);
    }
    tw_json_array_end(j);
    tw_json_object_end(j);
}

static void write_json_doc(tw_json *j, const tw_statistics *s)
{
    tw_json_object_begin(j);
    tw_json_key(j, "input");
    tw_json_object_begin(j);
    tw_json_key(j, "files");
    tw_json_int(j, (int64_t)s->files);
    tw_json_key(j, "bad_lines");
    tw_json_int(j, (int64_t)s->bad_lines);
    tw_json_key(j, "samples");
    tw_json_int(j, (int64_t)s->samples);
    tw_json_key(j, "events");
    tw_json_int(j, (int64_t)s->events);
    tw_json_key(j, "selected_samples");
    tw_json_int(j, (int64_t)s->selected_samples);
    tw_json_key(j, "selected_events");
    tw_json_int(j, (int64_t)s->selected_events);
    tw_json_object_end(j);
    tw_json_key(j, "selection");
    if (s->has_selection) {
        tw_json_object_begin(j);
        tw_json_key(j, "from_us");
        tw_json_int(j, s->sel_from_us);
        tw_json_key(j, "to_us");
        tw_json_int(j, s->sel_to_us);
        tw_json_object_end(j);
    } else {
        tw_json_null(j);
    }
    json_job(j, s);
    tw_json_key(j, "phases");
    tw_json_array_begin(j);
    for (size_t i = 0; i < s->nphases; i++) {
        tw_json_object_begin(j);
        tw_json_key(j, "node");
        tw_json_string(j, s->phases[i].node);
        tw_json_key(j, "phase");
        tw_json_string(j, s->phases[i].phase);
        tw_json_key(j, "start_us");
        tw_json_int(j, s->phases[i].start_us);
        tw_json_key(j, "end_us");
        tw_json_int(j, s->phases[i].end_us);
        tw_json_object_end(j);
    }
    tw_json_array_end(j);
    tw_json_key(j, "steps");
    tw_json_object_begin(j);
    tw_json_key(j, "by");
    tw_json_string(j, tw_stats_by_name(s->by));
    tw_json_key(j, "groups");
    tw_json_array_begin(j);
    for (size_t i = 0; i < s->nsteps; i++) {
        tw_json_object_begin(j);
        tw_json_key(j, "group");
        tw_json_string(j, s->steps[i].group);
        json_summary(j, &s->steps[i].s);
        tw_json_object_end(j);
    }
    tw_json_array_end(j);
    tw_json_object_end(j);
    tw_json_key(j, "utilization");
    tw_json_array_begin(j);
    for (size_t i = 0; i < s->nutil; i++) {
        const tw_util_row *u = &s->util[i];
        tw_json_object_begin(j);
        tw_json_key(j, "resource");
        tw_json_string(j, u->resource);
        tw_json_key(j, "metric");
        tw_json_string(j, u->metric);
        tw_json_key(j, "node");
        tw_json_string(j, u->node);
        tw_json_key(j, "phase");
        if (u->phase != NULL)
            tw_json_string(j, u->phase);
        else
            tw_json_null(j);
        json_summary(j, &u->s);
        tw_json_object_end(j);
    }
    tw_json_array_end(j);
    tw_json_key(j, "usage");
    tw_json_object_begin(j);
    tw_json_key(j, "ranges");
    tw_json_array_begin(j);
    for (size_t q = 0; q < s->nranges; q++) {
        tw_json_array_begin(j);
        tw_json_double(j, s->ranges[q].from);
        tw_json_double(j, s->ranges[q].to);
        tw_json_array_end(j);
    }
    tw_json_array_end(j);
    tw_json_key(j, "rows");
    tw_json_array_begin(j);
    for (size_t i = 0; i < s->nusage; i++) {
        const tw_usage_row *u = &s->usage[i];
        tw_json_object_begin(j);
        tw_json_key(j, "metric");
        tw_json_string(j, u->metric);
        tw_json_key(j, "node");
        tw_json_string(j, u->node);
        tw_json_key(j, "samples");
        tw_json_int(j, (int64_t)u->total);
        tw_json_key(j, "counts");
        tw_json_array_begin(j);
        for (size_t q = 0; q < s->nranges; q++)
            tw_json_int(j, (int64_t)u->counts[q]);
        tw_json_array_end(j);
        tw_json_object_end(j);
    }
    tw_json_array_end(j);
    tw_json_object_end(j);
    json_heatmap(j, s);
    tw_json_object_end(j);
}

static int write_json(const tw_statistics *s, FILE *out)
{
    tw_json *j = tw_json_new();
    if (j == NULL)
        return TW_ERR;
    tw_json_set_strict(j, 1);
    write_json_doc(j, s);
    int rc = tw_json_failed(j) ? TW_ERR : TW_OK;
    if (rc == TW_OK && fprintf(out, "%s\n", tw_json_str(j)) < 0)
        rc = TW_ERR;
    tw_json_free(j);
    return rc;
}

/* ---- CSV: table,group,node,phase,stat,value
 * ---------------------------------- */

/* A field quoted when it holds a comma, quote or line break. */
static void csv_field(FILE *out, const char *s)
{
    if (s == NULL)
        s = "";
    if (strpbrk(s, ",\"\r\n") == NULL) {
        fputs(s, out);
        return;
    }
    fputc('"', out);
    for (; *s; s++) {
        if (*s == '"')
            fputc('"', out);
        fputc(*s, out);
    }
    fputc('"', out);
}

static void csv_row(FILE *out, const char *table, const char *group,
                    const char *node, const char *phase, const char *stat,
                    const char *value)
{
    csv_field(out, table);
    fputc(',', out);
    csv_field(out, group);
    fputc(',', out);
    csv_field(out, node);
    fputc(',', out);
    csv_field(out, phase);
    fputc(',', out);
    csv_field(out, stat);
    fputc(',', out);
    csv_field(out, value);
    fputc('\n', out);
}

static void csv_int(FILE *out, const char *table, const char *group,
                    const char *node, const char *phase, const char *stat,
                    int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%" PRId64, v);
    csv_row(out, table, group, node, phase, stat, buf);
}

static void csv_double(FILE *out, const char *table, const char *group,
                       const char *node, const char *phase, const char *stat,
                       double v)
{
    char buf[48];
    if (isfinite(v))
        tw_py_float_repr(v, buf, sizeof(buf));
    else
        buf[0] = '\0';
    csv_row(out, table, group, node, phase, stat, buf);
}

static void csv_summary(FILE *out, const char *table, const char *group,
                        const char *node, const char *phase,
                        const tw_stat_summary *s)
{
    csv_int(out, table, group, node, phase, "count", (int64_t)s->count);
    const char *names[] = {"mean", "min", "max", "p50", "p95", "p99"};
    double v[] = {s->mean, s->min, s->max, s->p50, s->p95, s->p99};
    for (size_t i = 0; i < 6; i++)
        csv_double(out, table, group, node, phase, names[i], v[i]);
}

static int write_csv(const tw_statistics *s, FILE *out)
{
    fputs("table,group,node,phase,stat,value\n", out);
    if (s->has_job) {
        int64_t dur = s->end_us - s->start_us;
        csv_int(out, "job", "", "", "", "start_us", s->start_us);
        csv_int(out, "job", "", "", "", "end_us", s->end_us);
        csv_int(out, "job", "", "", "", "duration_us", dur);
        if (s->has_loop) {
            int64_t ldur = s->loop_end_us - s->loop_start_us;
            int64_t init = s->loop_start_us - s->start_us;
            int64_t fin = s->end_us - s->loop_end_us;
            csv_int(out, "job", "", "", "", "training_loop_start_us",
                    s->loop_start_us);
            csv_int(out, "job", "", "", "", "training_loop_end_us",
                    s->loop_end_us);
            csv_int(out, "job", "", "", "", "training_loop_duration_us", ldur);
            csv_int(out, "job", "", "", "", "initialization_us", init);
            csv_int(out, "job", "", "", "", "finalization_us", fin);
        }
    }
    for (size_t i = 0; i < s->nphases; i++) {
        /* a node may pass through one phase several times: numbered */
        char group[600];
        snprintf(group, sizeof(group), "%zu %s", i, s->phases[i].phase);
        csv_int(out, "phases", group, s->phases[i].node, "", "start_us",
                s->phases[i].start_us);
        csv_int(out, "phases", group, s->phases[i].node, "", "end_us",
                s->phases[i].end_us);
    }
    char table[64];
    snprintf(table, sizeof(table), "steps_by_%s", tw_stats_by_name(s->by));
    for (size_t i = 0; i < s->nsteps; i++)
        csv_summary(out, table, s->steps[i].group, "", "", &s->steps[i].s);
    for (size_t i = 0; i < s->nutil; i++) {
        const tw_util_row *u = &s->util[i];
        char group[512];
        snprintf(group, sizeof(group), "%s/%s", u->resource, u->metric);
        csv_summary(out, "utilization", group, u->node, u->phase, &u->s);
    }
    for (size_t i = 0; i < s->nusage; i++) {
        const tw_usage_row *u = &s->usage[i];
        csv_int(out, "usage", u->metric, u->node, "", "samples",
                (int64_t)u->total);
        for (size_t q = 0; q < s->nranges; q++) {
            char stat[96], a[48], b[48];
            tw_py_float_repr(s->ranges[q].from, a, sizeof(a));
            tw_py_float_repr(s->ranges[q].to, b, sizeof(b));
            snprintf(stat, sizeof(stat), "%s-%s", a, b);
            csv_int(out, "usage", u->metric, u->node, "", stat,
                    (int64_t)u->counts[q]);
        }
    }
    /* heat map: group = GPU, phase = the column's start (us) */
    for (size_t i = 0; i < s->nheat; i++) {
        for (size_t c = 0; c < s->heat_columns; c++) {
            if (isnan(s->heat[i].mean[c]))
                continue;
            char col[32];
            snprintf(col, sizeof(col), "%" PRId64,
                     s->heat_start_us + (int64_t)c * s->heat_bucket_us);
            csv_double(out, "gpu_heatmap", s->heat[i].gpu, s->heat[i].node, col,
                       "mean", s->heat[i].mean[c]);
        }
    }
    return ferror(out) ? TW_ERR : TW_OK;
}

/* ---- text -------------------------------------------------------------------
 */

static void text_time(FILE *out, const char *label, int64_t us)
{
    time_t t = (time_t)(us / 1000000);
    struct tm tm;
    char buf[32] = "?";
    if (gmtime_r(&t, &tm) != NULL)
        strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    fprintf(out, "  %-24s %s.%06lldZ (%" PRId64 " us)\n", label, buf,
            (long long)(us % 1000000), us);
}

static void text_duration(FILE *out, const char *label, int64_t us,
                          int64_t whole)
{
    fprintf(out, "  %-24s %.3f s", label, (double)us / 1e6);
    if (whole > 0)
        fprintf(out, " (%.2f %%)", (double)us / (double)whole * 100.0);
    fputc('\n', out);
}

static void text_summary_head(FILE *out, const char *first, int width)
{
    fprintf(out, "  %-*s %8s %12s %12s %12s %12s %12s %12s\n", width, first,
            "COUNT", "MEAN", "MIN", "MAX", "P50", "P95", "P99");
}

static void text_summary(FILE *out, const char *first, int width,
                         const tw_stat_summary *s, double scale)
{
    fprintf(out,
            "  %-*s %8" PRIu64 " %12.4f %12.4f %12.4f %12.4f %12.4f %12.4f\n",
            width, first, s->count, s->mean * scale, s->min * scale,
            s->max * scale, s->p50 * scale, s->p95 * scale, s->p99 * scale);
}

static int write_text(const tw_statistics *s, FILE *out)
{
    fprintf(out,
            "%" PRIu64 " files, %" PRIu64 " bad lines; %" PRIu64 " of %" PRIu64
            " samples and %" PRIu64 " of %" PRIu64
            " framework events selected\n",
            s->files, s->bad_lines, s->selected_samples, s->samples,
            s->selected_events, s->events);
    if (s->has_selection)
        fprintf(out, "selection: %" PRId64 " .. %" PRId64 " us\n",
                s->sel_from_us, s->sel_to_us);
    fprintf(out, "\njob\n");
    if (!s->has_job) {
        fprintf(out, "  no samples or events\n");
    } else {
        int64_t dur = s->end_us - s->start_us;
        text_time(out, "start", s->start_us);
        text_time(out, "end", s->end_us);
        text_duration(out, "duration", dur, 0);
        if (s->has_loop) {
            text_time(out, "training loop start", s->loop_start_us);
            text_time(out, "training loop end", s->loop_end_us);
            text_duration(out, "training loop",
                          s->loop_end_us - s->loop_start_us, dur);
            text_duration(out, "initialization", s->loop_start_us - s->start_us,
                          dur);
            text_duration(out, "finalization", s->end_us - s->loop_end_us, dur);
        } else {
            fprintf(out, "  no TRAIN or GLOBAL step event: no training loop\n");
        }
    }
    fprintf(out, "\ntraining phases\n");
    for (size_t i = 0; i < s->nphases; i++)
        fprintf(out, "  %-12s %-50s %" PRId64 " .. %" PRId64 " (%.3f s)\n",
                s->phases[i].node, s->phases[i].phase, s->phases[i].start_us,
                s->phases[i].end_us,
                (double)(s->phases[i].end_us - s->phases[i].start_us) / 1e6);
    fprintf(out, "\nstep duration (ms) by %s\n", tw_stats_by_name(s->by));
    text_summary_head(out, "GROUP", 40);
    for (size_t i = 0; i < s->nsteps; i++)
        text_summary(out, s->steps[i].group, 40, &s->steps[i].s, 1e-3);
    fprintf(out, "\nutilization\n");
    text_summary_head(out, "RESOURCE/METRIC NODE [PHASE]", 56);
    for (size_t i = 0; i < s->nutil; i++) {
        const tw_util_row *u = &s->util[i];
        char first[512];
        snprintf(first, sizeof(first), "%s/%s %s%s%s", u->resource, u->metric,
                 u->node, u->phase ? " " : "", u->phase ? u->phase : "");
        text_summary(out, first, 56, &u->s, 1.0);
    }
    fprintf(out, "\ndevice usage (samples per range, %%)\n");
    for (size_t i = 0; i < s->nusage; i++) {
        const tw_usage_row *u = &s->usage[i];
        fprintf(out, "  %-16s %-12s", u->metric, u->node);
        for (size_t q = 0; q < s->nranges; q++)
            fprintf(out, "  [%g,%g]: %" PRIu64 " (%.1f)", s->ranges[q].from,
                    s->ranges[q].to, u->counts[q],
                    u->total ? (double)u->counts[q] / (double)u->total * 100.0
                             : 0.0);
        fputc('\n', out);
    }
    return ferror(out) ? TW_ERR : TW_OK;
}

int tw_statistics_write(const tw_statistics *s, tw_stats_format f, FILE *out)
{
    switch (f) {
    case TW_STATS_JSON:
        return write_json(s, out);
    case TW_STATS_CSV:
        return write_csv(s, out);
    default:
        return write_text(s, out);
    }
}
