/* run_metrics.c - the daemon's metrics and /jobs snapshot (run_metrics.h). */
#include "run_metrics.h"

#include <inttypes.h>
#include <jansson.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grow.h"
#include "tw_assert.h"

/* Upper bounds in seconds; wide enough for a Redis transaction over a
 * network and a scan of many rules. */
static const double tw_buckets[] = {0.0005, 0.001, 0.0025, 0.005, 0.01,
                                    0.025,  0.05,  0.1,    0.25,  0.5,
                                    1,      2.5,   5,      10};
#define TW_NBUCKETS (sizeof(tw_buckets) / sizeof(tw_buckets[0]))

/* Upper bounds in bytes of one checkpoint: 2 MB is the incremental
 * checkpoint's goal for a 1000-node job (README "State"). */
static const double tw_byte_buckets[] = {1e3, 1e4, 1e5, 1e6, 2e6,
                                         1e7, 1e8, 1e9, 1e10};
#define TW_NBYTE_BUCKETS (sizeof(tw_byte_buckets) / sizeof(tw_byte_buckets[0]))

typedef struct tw_hist {
    const double *bounds; /* tw_buckets or tw_byte_buckets */
    size_t nbounds;
    uint64_t count[TW_NBUCKETS + 1]; /* the last: above every bound */
    uint64_t n;
    double sum;
} tw_hist;

typedef struct tw_mrule {
    char *rule;
    char *parent; /* "" for a configured rule */
    tw_rule_status status;
    uint64_t findings;
    int64_t violations, datapoints;
} tw_mrule;

typedef struct tw_mjob {
    char *id;
    int64_t started_us, finished_us; /* finished_us 0: active */
    tw_mrule *rules;
    size_t nrules, caprules;
} tw_mjob;

typedef struct tw_rule_errors {
    char *rule;
    uint64_t n;
} tw_rule_errors;

struct tw_run_metrics {
    int64_t ttl_us;
    size_t max_jobs;
    tw_mjob *jobs;
    size_t njobs, capjobs;
    uint64_t untracked; /* jobs not tracked: max_jobs active ones */
    uint64_t expired;   /* jobs dropped after their TTL */
    tw_rule_errors *errors;
    size_t nerrors, caperrors;
    tw_hist hist[TW_LATENCY_COUNT];
    tw_hist checkpoint_bytes;
};

tw_run_metrics *tw_run_metrics_new(int64_t ttl_us, size_t max_jobs)
{
    tw_run_metrics *m = calloc(1, sizeof(*m));
    if (m != NULL) {
        m->ttl_us = ttl_us;
        m->max_jobs = max_jobs > 0 ? max_jobs : 1;
        for (size_t k = 0; k < TW_LATENCY_COUNT; k++)
            m->hist[k] =
                (tw_hist){.bounds = tw_buckets, .nbounds = TW_NBUCKETS};
        m->checkpoint_bytes =
            (tw_hist){.bounds = tw_byte_buckets, .nbounds = TW_NBYTE_BUCKETS};
    }
    return m;
}

static void tw_mjob_release(tw_mjob *j)
{
    for (size_t i = 0; i < j->nrules; i++) {
        free(j->rules[i].rule);
        free(j->rules[i].parent);
    }
    free(j->rules);
    free(j->id);
}

void tw_run_metrics_free(tw_run_metrics *m)
{
    if (m == NULL)
        return;
    for (size_t i = 0; i < m->njobs; i++)
        tw_mjob_release(&m->jobs[i]);
    for (size_t i = 0; i < m->nerrors; i++)
        free(m->errors[i].rule);
    free(m->errors);
    free(m->jobs);
    free(m);
}

static void tw_run_metrics_drop(tw_run_metrics *m, size_t i)
{
    TW_ASSERT(i < m->njobs);
    tw_mjob_release(&m->jobs[i]);
    m->jobs[i] = m->jobs[--m->njobs];
}

static tw_mjob *tw_run_metrics_find(tw_run_metrics *m, const char *job)
{
    for (size_t i = 0; i < m->njobs; i++)
        if (strcmp(m->jobs[i].id, job) == 0)
            return &m->jobs[i];
    return NULL;
}

/* The job's entry, made when there is room: NULL when not tracked (or
 * out of memory, *oom set). */
static tw_mjob *tw_run_metrics_job(tw_run_metrics *m, const char *job,
                                   int64_t now_us, int *oom)
{
    tw_mjob *j = tw_run_metrics_find(m, job);
    if (j != NULL)
        return j;
    if (m->njobs >= m->max_jobs) {
        size_t oldest = m->njobs;
        for (size_t i = 0; i < m->njobs; i++)
            if (m->jobs[i].finished_us != 0 &&
                (oldest == m->njobs ||
                 m->jobs[i].finished_us < m->jobs[oldest].finished_us))
                oldest = i;
        if (oldest == m->njobs) {
            m->untracked++;
            return NULL;
        }
        tw_run_metrics_drop(m, oldest);
    }
    if (tw_grow((void **)&m->jobs, &m->capjobs, m->njobs + 1, sizeof(*m->jobs),
                16) != TW_OK) {
        *oom = 1;
        return NULL;
    }
    j = &m->jobs[m->njobs];
    memset(j, 0, sizeof(*j));
    j->id = strdup(job);
    if (j->id == NULL) {
        *oom = 1;
        return NULL;
    }
    j->started_us = now_us;
    m->njobs++;
    return j;
}

static tw_mrule *tw_mjob_rule(tw_mjob *j, const char *rule, const char *parent)
{
    for (size_t i = 0; i < j->nrules; i++)
        if (strcmp(j->rules[i].rule, rule) == 0 &&
            strcmp(j->rules[i].parent, parent) == 0)
            return &j->rules[i];
    if (tw_grow((void **)&j->rules, &j->caprules, j->nrules + 1,
                sizeof(*j->rules), 8) != TW_OK)
        return NULL;
    tw_mrule *r = &j->rules[j->nrules];
    memset(r, 0, sizeof(*r));
    r->rule = strdup(rule);
    r->parent = strdup(parent);
    if (r->rule == NULL || r->parent == NULL) {
        free(r->rule);
        free(r->parent);
        return NULL;
    }
    j->nrules++;
    return r;
}

/* Plugin errors by rule (bounded by the configuration's rules). */
static int tw_run_metrics_error(tw_run_metrics *m, const char *rule)
{
    for (size_t i = 0; i < m->nerrors; i++)
        if (strcmp(m->errors[i].rule, rule) == 0) {
            m->errors[i].n++;
            return TW_OK;
        }
    if (tw_grow((void **)&m->errors, &m->caperrors, m->nerrors + 1,
                sizeof(*m->errors), 8) != TW_OK)
        return TW_ERR;
    m->errors[m->nerrors].rule = strdup(rule);
    if (m->errors[m->nerrors].rule == NULL)
        return TW_ERR;
    m->errors[m->nerrors++].n = 1;
    return TW_OK;
}

int tw_run_metrics_alert(tw_run_metrics *m, const char *job,
                         const tw_alert_facts *f, int64_t now_us)
{
    int oom = 0;
    const char *rule = f->rule != NULL ? f->rule : "?";
    if (f->kind == TW_ALERT_STATUS && f->status == TW_STATUS_ERROR &&
        tw_run_metrics_error(m, rule) != TW_OK)
        return TW_ERR;
    tw_mjob *j = tw_run_metrics_job(m, job, now_us, &oom);
    if (j == NULL)
        return oom ? TW_ERR : TW_OK;
    tw_mrule *r = tw_mjob_rule(j, rule, f->parent ? f->parent : "");
    if (r == NULL)
        return TW_ERR;
    r->status = f->status;
    r->violations = f->violations;
    r->datapoints = f->datapoints;
    if (f->kind == TW_ALERT_FINDING)
        r->findings++;
    return TW_OK;
}

void tw_run_metrics_job_finished(tw_run_metrics *m, const char *job,
                                 int64_t now_us)
{
    if (m == NULL)
        return;
    int oom = 0;
    tw_mjob *j = tw_run_metrics_job(m, job, now_us, &oom);
    if (j != NULL)
        j->finished_us = now_us > 0 ? now_us : 1;
}

static void tw_hist_add(tw_hist *h, double v)
{
    TW_ASSERT(h->nbounds <= TW_NBUCKETS);
    size_t b = 0;
    while (b < h->nbounds && v > h->bounds[b])
        b++;
    h->count[b]++;
    h->n++;
    h->sum += v;
}

void tw_run_metrics_observe(tw_run_metrics *m, tw_latency_kind k,
                            int64_t micros)
{
    TW_ASSERT((unsigned)k < TW_LATENCY_COUNT);
    tw_hist_add(&m->hist[k], (double)micros / 1e6);
}

void tw_run_metrics_checkpoint_bytes(tw_run_metrics *m, uint64_t bytes)
{
    tw_hist_add(&m->checkpoint_bytes, (double)bytes);
}

/* ---- rendering ---------------------------------------------------------- */

/* A label value with \, " and newline escaped (exposition format). */
static void tw_label(FILE *o, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == '"')
            fprintf(o, "\\%c", *v);
        else if (*v == '\n')
            fputs("\\n", o);
        else
            fputc(*v, o);
    }
}

static void tw_head(FILE *o, const char *name, const char *type,
                    const char *help)
{
    fprintf(o, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

typedef struct tw_counter_row {
    const char *name; /* after trainwatch_ */
    size_t off;       /* in tw_router_stats */
    int gauge;
    const char *help;
} tw_counter_row;

#define C(f, h)                                                                \
    {                                                                          \
#f "_total", offsetof(tw_router_stats, f), 0, h                        \
    }
#define G(f, h)                                                                \
    {                                                                          \
#f, offsetof(tw_router_stats, f), 1, h                                 \
    }
/* Every counter of the progress line ("late" is split in two here). */
static const tw_counter_row tw_counter_rows[] = {
    C(batches, "decoded batches routed to a job"),
    C(samples, "system samples accepted"),
    C(events, "framework events accepted"),
    C(dead_letters, "messages sent to the dead-letter topic"),
    C(duplicates, "batches dropped as redelivered (node, sequence) pairs"),
    C(late_samples, "samples dropped: their scan had closed"),
    C(late_events, "events dropped: their scan had closed"),
    G(jobs_active, "jobs being evaluated now"),
    C(jobs_started, "jobs started"),
    C(jobs_finished, "jobs finished (end marker or idle)"),
    C(jobs_idle, "jobs finished by the idle timeout"),
    C(jobs_dropped, "jobs unfinished when their partition was revoked"),
    C(jobs_partial, "jobs finished with input known missing"),
    C(jobs_finished_before,
      "jobs met mid-stream, finished by a previous owner"),
    C(jobs_data_loss, "jobs met mid-stream whose beginning was lost"),
    C(jobs_skipped_partial, "of those, skipped (engine.on_data_loss)"),
    C(skipped_messages, "messages of skipped jobs"),
    C(after_end, "messages of jobs already finished"),
    C(offset_gaps, "offset ranges never read"),
    C(offsets_lost, "offsets in those ranges"),
    C(key_mismatches, "messages whose key is not their batch's job id"),
    C(scans, "rule evaluation scans"),
    C(alerts_sent, "alerts published"),
    C(alerts_deduped, "alerts claimed before, not sent again"),
    C(claims_unconfirmed,
      "alert/action claims whose delivery was never confirmed"),
    C(jobs_restored, "jobs restored from a checkpoint"),
    C(checkpoints, "partition checkpoints written"),
    C(checkpoint_bytes, "bytes written by checkpoints"),
    C(results_written, "results files written"),
    C(results_versions, "results files written as a version"),
    C(results_failures, "results file writes that failed"),
    C(results_retries, "results file writes retried"),
    G(results_pending, "results held in memory, not on disk yet"),
    C(checkpoints_held, "checkpoints held back by pending results"),
    C(skewed, "items refused beyond the clock-skew bound"),
    C(skewed_batches, "batches with items refused for clock skew"),
    C(python_profiles, "the hook's Python profiles received (not evaluated)"),
    C(tensors, "the hook's debugging tensors accepted"),
    C(late_tensors, "debugging tensors dropped: their scan had closed"),
    C(scan_cap_hits, "advances cut short by the scan cap"),
    C(alerts_truncated, "alerts cut to the producer's message size"),
    C(findings_held, "finding alerts held back by engine.finding_every"),
    C(jobs_quarantined, "jobs marked quarantined"),
    C(messages_quarantined, "messages quarantined"),
};
#undef C
#undef G

static void tw_render_router(FILE *o, const tw_router_stats *st)
{
    for (size_t i = 0; i < sizeof(tw_counter_rows) / sizeof(*tw_counter_rows);
         i++) {
        const tw_counter_row *row = &tw_counter_rows[i];
        uint64_t v;
        memcpy(&v, (const char *)st + row->off, sizeof(v));
        char name[96];
        snprintf(name, sizeof(name), "trainwatch_%s", row->name);
        tw_head(o, name, row->gauge ? "gauge" : "counter", row->help);
        fprintf(o, "%s %" PRIu64 "\n", name, v);
    }
}

static void tw_render_hist(FILE *o, const char *name, const char *help,
                           const tw_hist *h)
{
    tw_head(o, name, "histogram", help);
    uint64_t cum = 0;
    for (size_t b = 0; b < h->nbounds; b++) {
        cum += h->count[b];
        fprintf(o, "%s_bucket{le=\"%g\"} %" PRIu64 "\n", name, h->bounds[b],
                cum);
    }
    fprintf(o, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", name, h->n);
    fprintf(o, "%s_sum %.9f\n%s_count %" PRIu64 "\n", name, h->sum, name, h->n);
}

static void tw_render_actions(FILE *o, const tw_action_counters *c)
{
    static const struct {
        const char *outcome;
        size_t off;
    } outcomes[] = {
        {"fired", offsetof(tw_action_type_counters, fired)},
        {"attempted", offsetof(tw_action_type_counters, attempts)},
        {"succeeded", offsetof(tw_action_type_counters, succeeded)},
        {"failed", offsetof(tw_action_type_counters, failed)},
        {"retried", offsetof(tw_action_type_counters, retried)},
        {"timed_out", offsetof(tw_action_type_counters, timed_out)},
        {"deduplicated", offsetof(tw_action_type_counters, deduplicated)},
        {"skipped", offsetof(tw_action_type_counters, skipped)},
    };
    tw_head(o, "trainwatch_action_outcomes_total", "counter",
            "actions by type and outcome");
    for (int t = 0; t < TW_ACTION_NTYPES; t++)
        for (size_t k = 0; k < sizeof(outcomes) / sizeof(*outcomes); k++) {
            uint64_t v;
            memcpy(&v, (const char *)&c->type[t] + outcomes[k].off, sizeof(v));
            fprintf(o,
                    "trainwatch_action_outcomes_total{type=\"%s\",outcome="
                    "\"%s\"} %" PRIu64 "\n",
                    tw_action_type_name((tw_action_type)t), outcomes[k].outcome,
                    v);
        }
    tw_head(o, "trainwatch_actions_dropped_total", "counter",
            "actions dropped: the queue was full");
    fprintf(o, "trainwatch_actions_dropped_total %" PRIu64 "\n", c->dropped);
    tw_head(o, "trainwatch_actions_queued", "gauge",
            "actions waiting or in flight");
    fprintf(o, "trainwatch_actions_queued %" PRIu64 "\n", c->queued);
}

static void tw_rule_labels(FILE *o, const tw_mjob *j, const tw_mrule *r)
{
    fputs("{job_id=\"", o);
    tw_label(o, j->id);
    fputs("\",rule=\"", o);
    tw_label(o, r->rule);
    fputs("\",parent=\"", o);
    tw_label(o, r->parent);
    fputs("\"", o);
}

static void tw_render_jobs(FILE *o, const tw_run_metrics *m)
{
    tw_head(o, "trainwatch_rule_status", "gauge",
            "1 for the rule's current status (label status), per job");
    for (size_t i = 0; i < m->njobs; i++)
        for (size_t k = 0; k < m->jobs[i].nrules; k++) {
            const tw_mrule *r = &m->jobs[i].rules[k];
            fputs("trainwatch_rule_status", o);
            tw_rule_labels(o, &m->jobs[i], r);
            fprintf(o, ",status=\"%s\"} 1\n", tw_rule_status_name(r->status));
        }
    tw_head(o, "trainwatch_rule_findings_total", "counter",
            "finding alerts per job and rule");
    for (size_t i = 0; i < m->njobs; i++)
        for (size_t k = 0; k < m->jobs[i].nrules; k++) {
            const tw_mrule *r = &m->jobs[i].rules[k];
            fputs("trainwatch_rule_findings_total", o);
            tw_rule_labels(o, &m->jobs[i], r);
            fprintf(o, "} %" PRIu64 "\n", r->findings);
        }
    tw_head(o, "trainwatch_rule_violations", "gauge",
            "the rule's violation count in its latest alert, per job");
    for (size_t i = 0; i < m->njobs; i++)
        for (size_t k = 0; k < m->jobs[i].nrules; k++) {
            const tw_mrule *r = &m->jobs[i].rules[k];
            fputs("trainwatch_rule_violations", o);
            tw_rule_labels(o, &m->jobs[i], r);
            fprintf(o, "} %" PRId64 "\n", r->violations);
        }
    tw_head(o, "trainwatch_plugin_errors_total", "counter",
            "rules that went to status Error, by rule");
    for (size_t i = 0; i < m->nerrors; i++) {
        fputs("trainwatch_plugin_errors_total{rule=\"", o);
        tw_label(o, m->errors[i].rule);
        fprintf(o, "\"} %" PRIu64 "\n", m->errors[i].n);
    }
    tw_head(o, "trainwatch_jobs_tracked", "gauge",
            "jobs with per-rule series (active, and finished within the TTL)");
    fprintf(o, "trainwatch_jobs_tracked %zu\n", m->njobs);
    tw_head(o, "trainwatch_jobs_untracked_total", "counter",
            "jobs without per-rule series: http.max_jobs active jobs");
    fprintf(o, "trainwatch_jobs_untracked_total %" PRIu64 "\n", m->untracked);
}

static char *tw_render_metrics(const tw_run_metrics *m,
                               const tw_run_metrics_input *in)
{
    char *text = NULL;
    size_t len = 0;
    FILE *o = open_memstream(&text, &len);
    if (o == NULL)
        return NULL;
    tw_render_router(o, in->router);
    tw_render_jobs(o, m);
    tw_head(o, "trainwatch_consumer_lag", "gauge",
            "messages between the consumer's position and the partition's "
            "high watermark");
    for (size_t i = 0; i < in->npartitions; i++)
        if (in->lag[i].lag >= 0)
            fprintf(o,
                    "trainwatch_consumer_lag{partition=\"%" PRId32
                    "\"} %" PRId64 "\n",
                    in->lag[i].partition, in->lag[i].lag);
    tw_head(o, "trainwatch_partitions_assigned", "gauge",
            "partitions of the metrics topic this instance owns");
    fprintf(o, "trainwatch_partitions_assigned %zu\n", in->npartitions);
    tw_head(o, "trainwatch_paused", "gauge",
            "1 while consumption is stopped (state store unavailable)");
    fprintf(o, "trainwatch_paused %d\n", in->paused ? 1 : 0);
    tw_head(o, "trainwatch_store_round_trips_total", "counter",
            "requests to the state store (a pipelined transaction is one)");
    fprintf(o, "trainwatch_store_round_trips_total %" PRIu64 "\n",
            in->store_round_trips);
    tw_render_hist(o, "trainwatch_checkpoint_seconds",
                   "checkpoint latency: alerts claimed and delivered, state "
                   "written",
                   &m->hist[TW_LATENCY_CHECKPOINT]);
    tw_render_hist(o, "trainwatch_checkpoint_bytes",
                   "bytes of state one checkpoint wrote (the partitions "
                   "checkpointed together)",
                   &m->checkpoint_bytes);
    tw_render_hist(o, "trainwatch_alert_seconds",
                   "alert latency: metrics message polled to its alert "
                   "handed to the producer",
                   &m->hist[TW_LATENCY_ALERT]);
    if (in->actions != NULL)
        tw_render_actions(o, in->actions);
    if (in->http != NULL) {
        tw_head(o, "trainwatch_http_requests_total", "counter",
                "HTTP requests served");
        fprintf(o, "trainwatch_http_requests_total %" PRIu64 "\n",
                in->http->requests);
        tw_head(o, "trainwatch_http_snapshot_max_seconds", "gauge",
                "longest time the consuming thread spent rendering and "
                "publishing one snapshot");
        fprintf(o, "trainwatch_http_snapshot_max_seconds %.6f\n",
                (double)in->snapshot_us_max / 1e6);
        tw_head(o, "trainwatch_http_publish_wait_max_seconds", "gauge",
                "longest wait of the consuming thread for the snapshot lock");
        fprintf(o, "trainwatch_http_publish_wait_max_seconds %.9f\n",
                (double)in->http->publish_wait_ns_max / 1e9);
        tw_head(o, "trainwatch_http_unauthorized_total", "counter",
                "HTTP requests refused for a missing or wrong token");
        fprintf(o, "trainwatch_http_unauthorized_total %" PRIu64 "\n",
                in->http->unauthorized);
    }
    if (fclose(o) != 0) {
        free(text);
        return NULL;
    }
    return text;
}

static json_t *tw_job_json(const tw_mjob *j, int64_t now_us)
{
    json_t *rules = json_array();
    json_t *o =
        json_pack("{s:s, s:s, s:f, s:o}", "job", j->id, "state",
                  j->finished_us ? "finished" : "active", "seconds_since_start",
                  (double)(now_us - j->started_us) / 1e6, "rules", rules);
    if (o == NULL)
        return NULL;
    if (j->finished_us)
        json_object_set_new(o, "seconds_since_end",
                            json_real((double)(now_us - j->finished_us) / 1e6));
    for (size_t k = 0; k < j->nrules; k++) {
        const tw_mrule *r = &j->rules[k];
        json_t *e = json_pack("{s:s, s:s, s:I, s:I, s:I}", "rule", r->rule,
                              "status", tw_rule_status_name(r->status),
                              "findings", (json_int_t)r->findings, "violations",
                              (json_int_t)r->violations, "datapoints",
                              (json_int_t)r->datapoints);
        if (e == NULL || json_array_append_new(rules, e) != 0) {
            json_decref(o);
            return NULL;
        }
        if (r->parent[0])
            json_object_set_new(e, "parent", json_string(r->parent));
    }
    return o;
}

static int tw_render_jobs_json(const tw_run_metrics *m, int64_t now_us,
                               tw_http_snapshot *out)
{
    json_t *all = json_array();
    if (all == NULL)
        return TW_ERR;
    out->job = calloc(m->njobs ? m->njobs : 1, sizeof(*out->job));
    if (out->job == NULL) {
        json_decref(all);
        return TW_ERR;
    }
    for (size_t i = 0; i < m->njobs; i++) {
        json_t *j = tw_job_json(&m->jobs[i], now_us);
        char *text = j ? json_dumps(j, JSON_COMPACT) : NULL;
        out->job[i].id = strdup(m->jobs[i].id);
        out->job[i].json = text;
        out->njobs++;
        if (text == NULL || out->job[i].id == NULL ||
            json_array_append_new(all, j) != 0) {
            json_decref(all);
            return TW_ERR;
        }
    }
    json_t *doc = json_pack("{s:o, s:I}", "jobs", all, "untracked",
                            (json_int_t)m->untracked);
    out->jobs = doc ? json_dumps(doc, JSON_INDENT(1)) : NULL;
    json_decref(doc);
    return out->jobs != NULL ? TW_OK : TW_ERR;
}

int tw_run_metrics_snapshot(tw_run_metrics *m, const tw_run_metrics_input *in,
                            int64_t now_us, tw_http_snapshot *out)
{
    memset(out, 0, sizeof(*out));
    for (size_t i = 0; i < m->njobs;) {
        if (m->jobs[i].finished_us != 0 &&
            now_us - m->jobs[i].finished_us > m->ttl_us) {
            tw_run_metrics_drop(m, i);
            m->expired++;
        } else {
            i++;
        }
    }
    out->metrics = tw_render_metrics(m, in);
    int rc =
        out->metrics != NULL ? tw_render_jobs_json(m, now_us, out) : TW_ERR;
    /* Ready: partitions assigned, the store answering, consuming. */
    out->ready = !in->paused && in->npartitions > 0;
    if (in->paused)
        rc = asprintf(&out->not_ready, "not ready: paused: %s",
                      in->pause_reason ? in->pause_reason
                                       : "state store unavailable") < 0
                 ? TW_ERR
                 : rc;
    else if (in->npartitions == 0)
        out->not_ready = strdup("not ready: no partitions assigned");
    if (rc != TW_OK)
        tw_http_snapshot_release(out);
    return rc;
}
