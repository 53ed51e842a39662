/*
 * max_initialization_time.c - MaxInitializationTime (RULES.md §3.8).
 *
 * Flags a job whose first training step has not appeared within
 * `threshold` minutes of the job's first timestamp, and records the job's
 * system start/end (seconds) and the first/last processed step start (µs)
 * for the report.
 *
 * Semantics:
 *  - differ: quirk 1, the clock. `reference` measures the elapsed time on
 *    the rule's own clock (scan->rule_clock_us), which the host freezes at
 *    the first timestamp for ProfilerReport's sub-rules, so that instance
 *    never fires; `fixed` always uses the scan start.
 *  - same: quirk 2 (the elapsed time is taken at the scan start, one
 *    interval of lag), quirk 4 (`first`/`last` follow processing order over
 *    all nodes and modes), and the crash fix of quirk 3 (a step event with
 *    a missing or non-numeric step_num is accepted; the reference only
 *    needed it for a log line).
 *
 * Memory: O(1) in both semantics (a few counters and timestamps).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/finding.h"
#include "trainwatch/plugin.h"

enum { P_THRESHOLD = 0, P_COUNT };

static const tw_param_spec mit_params[P_COUNT] = {
    {"threshold", TW_PARAM_DOUBLE, "20", 0.0, 525600.0,
     "minutes after the job's first timestamp by which the first training "
     "step must have started"},
};

typedef struct mit_state {
    const tw_host *host;
    tw_semantics semantics;
    double threshold; /* minutes */
    char *params_text;

    int64_t triggered;
    int64_t violations;
    int64_t datapoints;

    int have_system;     /* job_start/job_end are in Details */
    double system_start; /* min system timestamp, seconds */
    double system_end;   /* max system timestamp, seconds */
    int have_first;
    int have_last;
    int64_t first_us;
    int64_t last_us;
} mit_state;

static int mit_create(const tw_host *host, const tw_params *params,
                      void **state, char *err, size_t errlen)
{
    if (params->nvalues != P_COUNT) {
        snprintf(err, errlen,
                 "MaxInitializationTime: expected %d parameter(s), got %zu",
                 P_COUNT, params->nvalues);
        return TW_ERR;
    }
    const tw_param_value *thr = &params->values[P_THRESHOLD];
    if (thr->is_none || !isfinite(thr->d) || thr->d < 0) {
        snprintf(err, errlen,
                 "MaxInitializationTime: threshold must be a number of minutes "
                 ">= 0");
        return TW_ERR;
    }
    mit_state *s = calloc(1, sizeof(*s));
    if (!s) {
        snprintf(err, errlen, "MaxInitializationTime: out of memory");
        return TW_ERR;
    }
    s->host = host;
    s->semantics = params->semantics;
    s->threshold = thr->d;
    const char *txt = thr->text ? thr->text : "None";
    size_t len = strlen("threshold:") + strlen(txt) + 1;
    s->params_text = malloc(len);
    if (!s->params_text) {
        free(s);
        snprintf(err, errlen, "MaxInitializationTime: out of memory");
        return TW_ERR;
    }
    snprintf(s->params_text, len, "threshold:%s", txt);
    s->system_start = INFINITY;
    s->system_end = 0.0;
    *state = s;
    return TW_OK;
}

static void mit_destroy(void *state)
{
    mit_state *s = state;
    if (!s)
        return;
    free(s->params_text);
    free(s);
}

static int mit_scan(void *state, const tw_scan *scan, tw_scan_result *out,
                    char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    mit_state *s = state;

    for (size_t i = 0; i < scan->nsamples; i++) {
        double ts = scan->samples[i].ts;
        if (ts < s->system_start)
            s->system_start = ts;
        if (ts > s->system_end)
            s->system_end = ts;
        s->have_system = 1;
    }

    for (size_t i = 0; i < scan->nevents; i++) {
        const tw_fw_event *e = &scan->events[i];
        if (!e->name || !strstr(e->name, "Step:ModeKeys"))
            continue;
        s->datapoints++;
        if (!s->have_first) {
            s->first_us = e->start_us;
            s->have_first = 1;
        } else {
            s->last_us = e->start_us;
            s->have_last = 1;
        }
    }

    /* The reference compares its own clock (frozen at F under
     * ProfilerReport) with F; fixed mode uses the scan start. */
    int64_t clock = s->semantics == TW_SEMANTICS_REFERENCE ? scan->rule_clock_us
                                                           : scan->start_us;
    double elapsed = (double)(clock - scan->first_timestamp_us);
    double limit =
        s->threshold * 60000000.0; /* one product, as the reference */
    int met = 0;
    if (elapsed > limit && !s->have_first) {
        s->violations++;
        s->triggered++;
        met = 1;
    }
    out->condition_met = met;
    out->rule_triggered = s->triggered;
    out->violations = s->violations;
    out->datapoints = s->datapoints;
    return TW_OK;
}

static int mit_details(void *state, tw_json *j)
{
    mit_state *s = state;
    const tw_host *h = s->host;
    h->json_object_begin(j);
    /* step_num exists from construction; job_start/job_end from the first
     * system event. */
    h->json_key(j, "step_num");
    h->json_object_begin(j);
    if (s->have_first) {
        h->json_key(j, "first");
        h->json_int(j, s->first_us);
    }
    if (s->have_last) {
        h->json_key(j, "last");
        h->json_int(j, s->last_us);
    }
    h->json_object_end(j);
    if (s->have_system) {
        h->json_key(j, "job_start");
        h->json_double(j, s->system_start);
        h->json_key(j, "job_end");
        h->json_double(j, s->system_end);
    }
    h->json_object_end(j);
    return TW_OK;
}

/* Checkpoint layout: magic, then the fields below in order. */
#define MIT_MAGIC 0x4d495431u /* "MIT1" */

typedef struct mit_wire {
    uint32_t magic;
    int32_t have_system, have_first, have_last;
    int64_t triggered, violations, datapoints;
    double system_start, system_end;
    int64_t first_us, last_us;
} mit_wire;

static int mit_save(void *state, tw_buf *out)
{
    mit_state *s = state;
    mit_wire w;
    memset(&w, 0, sizeof(w));
    w.magic = MIT_MAGIC;
    w.have_system = s->have_system;
    w.have_first = s->have_first;
    w.have_last = s->have_last;
    w.triggered = s->triggered;
    w.violations = s->violations;
    w.datapoints = s->datapoints;
    w.system_start = s->system_start;
    w.system_end = s->system_end;
    w.first_us = s->first_us;
    w.last_us = s->last_us;
    return s->host->buf_write(out, &w, sizeof(w));
}

static int mit_restore(void *state, const void *data, size_t len, char *err,
                       size_t errlen)
{
    mit_state *s = state;
    mit_wire w;
    if (len != sizeof(w)) {
        snprintf(
            err, errlen,
            "MaxInitializationTime: checkpoint has %zu bytes, expected %zu",
            len, sizeof(w));
        return TW_ERR;
    }
    memcpy(&w, data, sizeof(w));
    if (w.magic != MIT_MAGIC) {
        snprintf(err, errlen,
                 "MaxInitializationTime: checkpoint is not from this rule");
        return TW_ERR;
    }
    s->have_system = w.have_system != 0;
    s->have_first = w.have_first != 0;
    s->have_last = w.have_last != 0;
    s->triggered = w.triggered;
    s->violations = w.violations;
    s->datapoints = w.datapoints;
    s->system_start = w.system_start;
    s->system_end = w.system_end;
    s->first_us = w.first_us;
    s->last_us = w.last_us;
    return TW_OK;
}

/* The whole job waited: every system node is involved. */
static int mit_finding(void *state, const tw_finding_ctx *ctx, tw_finding *f,
                       char *err, size_t errlen)
{
    mit_state *s = state;
    (void)err, (void)errlen;
    for (size_t i = 0; i < ctx->nnodes; i++)
        tw_finding_add_name(f, ctx->nodes[i]);
    int64_t start = ctx->first_timestamp_us;
    int64_t end = s->have_first    ? s->first_us
                  : s->have_system ? (int64_t)(s->system_end * 1e6)
                                   : start;
    f->first_us = start;
    f->last_us = end;
    double waited = (double)(end - start) / 1e6;
    char took[32], limit[32];
    tw_finding_duration(waited, took, sizeof(took));
    tw_finding_duration(s->threshold * 60, limit, sizeof(limit));
    f->value = waited;
    f->limit = s->threshold * 60;
    snprintf(f->unit, sizeof(f->unit), "s");
    if (s->have_first)
        tw_finding_text(f->summary,
                        "The first training step started %s after the job "
                        "did: initialization took longer than the %s "
                        "allowed.",
                        took, limit);
    else
        tw_finding_text(f->summary,
                        "No training step had started %s into the job (more "
                        "than the %s allowed).",
                        took, limit);
    tw_finding_text(f->magnitude,
                    "initialization %s%s > %s (threshold %g minutes), "
                    "judged late at %lld scan(s)",
                    s->have_first ? "" : "at least ", took, limit, s->threshold,
                    (long long)s->violations);
    tw_finding_text(f->recommendation,
                    "Find what runs before the first step: downloading or "
                    "copying the data set (stream it, or use a fast file "
                    "system), building the model or compiling graphs, "
                    "loading a large checkpoint; and check that the job "
                    "is not waiting on a distributed rendezvous.");
    tw_finding_text(f->parameters,
                    "threshold %g minutes from the job's first timestamp to "
                    "the first training step",
                    s->threshold);
    return TW_OK;
}

static const tw_rule_descriptor mit_descriptor = {
    .abi_version = TW_PLUGIN_ABI_VERSION,
    .name = "MaxInitializationTime",
    .description = "Flags a training loop that has not started within "
                   "`threshold` minutes; records job and loop start/end.",
    .params = mit_params,
    .nparams = P_COUNT,
    .create = mit_create,
    .scan = mit_scan,
    .details = mit_details,
    .save = mit_save,
    .restore = mit_restore,
    .destroy = mit_destroy,
    .finding = mit_finding,
    .finding_help =
        "The first training step started late (or not yet) after the job did. "
        "Look at what runs first: data download or copy (stream it instead), "
        "model construction or graph compilation, a large checkpoint to "
        "load, or ranks waiting for each other at start-up.",
};

TW_PLUGIN_EXPORT const tw_rule_descriptor *trainwatch_rule(void)
{
    return &mit_descriptor;
}

/* System timestamps alone can trigger it (no step seen in time). */
TW_PLUGIN_EXPORT uint32_t trainwatch_rule_inputs(void)
{
    return TW_INPUT_SYSTEM | TW_INPUT_FRAMEWORK;
}
