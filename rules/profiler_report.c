/*
 * profiler_report.c - ProfilerReport (RULES.md §3.12).
 *
 * Runs the eleven built-in profiler rules, in the reference's fixed order,
 * on the scans the host delivers to ProfilerReport, and reports all their
 * reports at once; in `fixed` semantics also Straggler (a trainwatch rule,
 * docs/rules.md), after them. Each sub-rule is an ordinary rule instance
 * created through host->subrule_create with ProfilerReport's semantics.
 *
 * Parameters (extensions; the reference's ProfilerReport takes only
 * scan_interval_us and nb_path, and the tick is the engine's):
 *  - `<RuleName>_<parameter>` overrides, as the managed service's client
 *    passes them (e.g. `CPUBottleneck_threshold: 40`). There is one spec
 *    per (sub-rule, parameter) pair with the sub-rule's own type and
 *    bounds; its help names the sub-rule's default. The override specs
 *    default to None, and only overrides the user set are passed on, so
 *    every other parameter keeps the sub-rule's own default.
 *  - `trigger_all` (default false): RULES.md §6.3's TRIGGER_ALL preset,
 *    which the reference builds but never uses. Here it really applies
 *    those parameters (a test/demo preset that makes every section of the
 *    report appear); explicit overrides still win over it.
 *  - `opt_out_telemetry`: accepted so the client's configuration loads;
 *    ignored (trainwatch sends no telemetry).
 *
 * Per scan every sub-rule sees the same tw_scan. A sub-rule that fails
 * gets status Error, keeps its last report, contributes false, and is not
 * scanned again; the others go on (quirk 2, fixed in both semantics).
 *
 * Semantics:
 *  - differ: quirk 1, the sub-rule clock. `reference` gives every sub-rule
 *    rule_clock_us = F (the frozen clocks: MaxInitializationTime never
 *    fires, BatchSize reports F as last_timestamp); `fixed` gives the scan
 *    start. Quirk 3, when the condition is reported: `reference` reports
 *    condition_met only on the job's final scan (scan->final), and only if
 *    some sub-rule's condition was met in some scan, as the reference's
 *    end-of-rule signal; a job cut off before its final scan therefore
 *    never reaches IssuesFound. `fixed` reports condition_met on every scan
 *    in which some sub-rule's condition is met, so IssuesFound (and any
 *    action) comes as soon as it is known.
 *  - same: quirk 2's fix; the notebook rendering (quirk 4) is not part of
 *    the rule (the HTML report is built from this rule's report).
 *
 * Report: RuleTriggered, Violations and Datapoints are the sums of the
 * sub-rules' counters (each sub-rule's own counters are in its report;
 * the reference has no report for ProfilerReport itself). Details maps
 * each sub-rule's name, in the fixed order, to
 *     {"status": "InProgress"|"IssuesFound"|"NoIssuesFound"|"Error",
 *      ["error": "<reason>",] "report": {<the sub-rule's report>}}
 * where "report" is exactly what <RuleName>.json holds (RULES.md §2.3,
 * §6.1). Sub-rule status: InProgress until the final scan, IssuesFound
 * once its condition was met at least once, NoIssuesFound after the final
 * scan otherwise, Error once it failed. RuleParameters lists trigger_all
 * and the overrides the user set, as `name:value` lines.
 *
 * Checkpoint: own flags, per sub-rule status, counters and error text,
 * then each sub-rule's checkpoint (host->subrule_save) followed by its
 * byte length (host->buf_len measures it); restore reads the framed
 * blobs back from the end.
 *
 * Memory: the sum of the eleven sub-rules' (each file's header gives its
 * bound in both semantics) plus ~1 KB here (statuses, counters, the
 * parameters text and error texts of failed sub-rules).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trainwatch/plugin.h"
#include "trainwatch/ser.h"

#define PR_NAME "ProfilerReport"

/* Override spec: `<rule>_<name>`, default None, the sub-rule's type and
 * bounds; the help names the sub-rule's own default literal. */
#define OV(rule, name, type, def, lo, hi, help)                                \
    {                                                                          \
        rule "_" name, type, NULL, lo, hi, rule ": " help " (default " def ")" \
    }

/* The TW_BNECK_PARAMS_INIT specs of rules/common/bottleneck.h. */
#define OV_BNECK(rule, high, high_def, high_help)                              \
    OV(rule, "threshold", TW_PARAM_DOUBLE, "50", 0, 100,                       \
       "% of snapshots that must be bottlenecks for the rule to fire"),        \
        OV(rule, "gpu_threshold", TW_PARAM_DOUBLE, "10", 0, 100,               \
           "% - a GPU utilisation sample below this is low"),                  \
        OV(rule, high, TW_PARAM_DOUBLE, high_def, -1, 100, high_help),         \
        OV(rule, "patience", TW_PARAM_INT, "1000", 0, 1e15,                    \
           "evaluate only when more than this many snapshots were seen"),      \
        OV(rule, "max_report_entries", TW_PARAM_INT, "10000", 1, 1000000,      \
           "fixed semantics: newest bottleneck entries kept in the report "    \
           "(reference keeps all)"),                                           \
        OV(rule, "init_grace", TW_PARAM_DOUBLE, "30", 0.0, 525600.0,           \
           "trainwatch extension, fixed semantics only: minutes from the "     \
           "job's first timestamp during which samples of a job that has "     \
           "shown no step event yet count as initialization (not "             \
           "evaluated)")

enum { P_TRIGGER_ALL = 0, P_OPT_OUT_TELEMETRY, P_FIRST_OVERRIDE };

static const tw_param_spec pr_params[] = {
    {"trigger_all", TW_PARAM_BOOL, "false", 0, 0,
     "test/demo preset of RULES.md §6.3 (TRIGGER_ALL): thresholds that make "
     "every sub-rule's section appear; explicit overrides still win"},
    {"opt_out_telemetry", TW_PARAM_BOOL, "false", 0, 0,
     "accepted for the managed service's client configuration; ignored"},
    /* CPUBottleneck */
    OV_BNECK("CPUBottleneck", "cpu_threshold", "90",
             "% - a CPU core sample above this is high"),
    /* IOBottleneck */
    OV_BNECK("IOBottleneck", "io_threshold", "50",
             "% - a core's I/O wait sample above this is high"),
    /* LowGPUUtilization */
    OV("LowGPUUtilization", "threshold_p95", TW_PARAM_DOUBLE, "70", 0, 100,
       "% - a GPU whose p95 over the window is below this is under-utilised"),
    OV("LowGPUUtilization", "threshold_p5", TW_PARAM_DOUBLE, "10", 0, 100,
       "% - with p95 above threshold_p95, a p5 below this is a fluctuation"),
    OV("LowGPUUtilization", "window", TW_PARAM_INT, "500", 0, 1000000,
       "newest samples per GPU used for the p95/p5 (0 = the whole history)"),
    OV("LowGPUUtilization", "patience", TW_PARAM_INT, "1000", 0, 1e15,
       "a GPU is evaluated only when it has more than this many samples"),
    OV("LowGPUUtilization", "init_grace", TW_PARAM_DOUBLE, "30", 0.0, 525600.0,
       "trainwatch extension, fixed semantics only: minutes from the job's "
       "first timestamp during which samples of a job that has shown no "
       "step event yet count as initialization (not evaluated)"),
    /* StepOutlier */
    OV("StepOutlier", "stddev", TW_PARAM_DOUBLE, "3", 0.0, 1e6,
       "a step is an outlier when its duration exceeds mean + stddev * std"),
    OV("StepOutlier", "mode", TW_PARAM_STRING, "None", 0.0, 0.0,
       "reference: an extra event name to accept; fixed: accept only events "
       "named <mode> or Step:<mode> (e.g. ModeKeys.TRAIN)"),
    OV("StepOutlier", "n_outliers", TW_PARAM_INT, "10", 0.0, 1e12,
       "trigger only when a (node, step kind) has more outliers than this"),
    OV("StepOutlier", "max_exact_steps", TW_PARAM_INT, "2000", 1000.0, 1e9,
       "trainwatch extension, fixed semantics only: steps per (node, step "
       "kind) kept exactly before switching to bounded summaries"),
    OV("StepOutlier", "min_factor", TW_PARAM_DOUBLE, "3", 1.0, 1e6,
       "trainwatch extension, fixed semantics only: a step is an outlier only "
       "when it also takes more than min_factor x the median step"),
    OV("StepOutlier", "min_outlier_fraction", TW_PARAM_DOUBLE, "0.005", 0.0,
       1.0,
       "trainwatch extension, fixed semantics only: trigger only when the "
       "outliers are also more than this fraction of the (node, step kind)'s "
       "steps"),
    /* GPUMemoryIncrease */
    OV("GPUMemoryIncrease", "increase", TW_PARAM_DOUBLE, "5", 0.0, 100.0,
       "percentage points: trigger when the moving average of GPU memory "
       "utilisation rises by more than this"),
    OV("GPUMemoryIncrease", "patience", TW_PARAM_INT, "1000", 0.0, 1e9,
       "evaluate a GPU only when its series has more than this many samples"),
    OV("GPUMemoryIncrease", "window", TW_PARAM_INT, "10", 0.0, 100000.0,
       "moving-average length in samples"),
    /* BatchSize */
    OV("BatchSize", "cpu_threshold_p95", TW_PARAM_DOUBLE, "70", 0.0, 100.0,
       "%: the windowed p95 of the node's average CPU utilisation must be "
       "below this"),
    OV("BatchSize", "gpu_threshold_p95", TW_PARAM_DOUBLE, "70", 0.0, 100.0,
       "%: the windowed p95 of the GPU's utilisation must be below this"),
    OV("BatchSize", "gpu_memory_threshold_p95", TW_PARAM_DOUBLE, "70", 0.0,
       100.0,
       "%: the windowed p95 of the GPU's memory utilisation must be below "
       "this"),
    OV("BatchSize", "patience", TW_PARAM_INT, "1000", 0.0, 1e9,
       "evaluate a node only when it has more than this many CPU points"),
    OV("BatchSize", "window", TW_PARAM_INT, "500", 0.0, 100000.0,
       "number of most recent points for the p95s (0 = whole history)"),
    OV("BatchSize", "init_grace", TW_PARAM_DOUBLE, "30", 0.0, 525600.0,
       "trainwatch extension, fixed semantics only: minutes from the job's "
       "first timestamp during which samples of a job that has shown no "
       "step event yet count as initialization (not evaluated)"),
    /* MaxInitializationTime */
    OV("MaxInitializationTime", "threshold", TW_PARAM_DOUBLE, "20", 0.0,
       525600.0,
       "minutes after the job's first timestamp by which the first training "
       "step must have started"),
    /* LoadBalancing */
    OV("LoadBalancing", "threshold", TW_PARAM_DOUBLE, "0.2", 0.0, 1.0,
       "Jensen-Shannon distance (0-1) between two GPUs' utilisation "
       "histograms above which a node counts as imbalanced"),
    OV("LoadBalancing", "patience", TW_PARAM_INT, "1000", 0.0, 1e9,
       "compare a GPU only when its series has more than this many samples"),
    OV("LoadBalancing", "init_grace", TW_PARAM_DOUBLE, "30", 0.0, 525600.0,
       "trainwatch extension, fixed semantics only: minutes from the job's "
       "first timestamp during which samples of a job that has shown no "
       "step event yet count as initialization (not evaluated)"),
    /* OverallSystemUsage: no parameters */
    /* Dataloader */
    OV("Dataloader", "min_threshold", TW_PARAM_DOUBLE, "70", 0.0, 1e6,
       "% of the CPU cores: fewer parallel data-loader processes than this "
       "(median) is a violation"),
    OV("Dataloader", "max_threshold", TW_PARAM_DOUBLE, "200", 0.0, 1e6,
       "% of the CPU cores: more parallel data-loader processes than this "
       "(median) is a violation"),
    OV("Dataloader", "patience", TW_PARAM_INT, "10", 0.0, 1e9,
       "evaluate only when more than this many per-second points exist"),
    OV("Dataloader", "max_distinct_times", TW_PARAM_INT, "100000", 1000.0, 1e8,
       "trainwatch extension, fixed semantics only: distinct data-loading "
       "durations kept exactly before they are rounded (bounds memory)"),
    /* OverallFrameworkMetrics: no parameters */
    /* Straggler (fixed semantics only) */
    OV("Straggler", "factor", TW_PARAM_DOUBLE, "1.5", 1.0, 1e6,
       "a node's step is slow when it takes more than factor x the fastest "
       "node's step of the same number"),
    OV("Straggler", "window", TW_PARAM_INT, "50", 1.0, 100000.0,
       "newest compared steps per node that decide"),
    OV("Straggler", "patience", TW_PARAM_INT, "20", 1.0, 1e9,
       "compared steps a node needs before it is judged"),
    OV("Straggler", "min_fraction", TW_PARAM_DOUBLE, "0.5", 0.0, 1.0,
       "a node is a straggler when more than this fraction of its window's "
       "steps (or scans) are slow"),
    OV("Straggler", "sys_window", TW_PARAM_INT, "10", 1.0, 100000.0,
       "system metrics: newest compared scans per node that decide"),
    OV("Straggler", "sys_patience", TW_PARAM_INT, "3", 1.0, 1e9,
       "system metrics: compared scans a node needs before it is judged"),
    OV("Straggler", "sys_min_busy", TW_PARAM_DOUBLE, "50", 0.0, 100.0,
       "system metrics: a node's GPUs must be busy at least this much (mean "
       "%, in the scan) to be the one the others wait for"),
};

#define PR_NPARAMS (sizeof(pr_params) / sizeof(pr_params[0]))

/* The sub-rules in the reference's order (RULES.md §3.12), then the
 * trainwatch rules that run in `fixed` semantics only. */
static const char *const pr_rules[] = {
    "CPUBottleneck",           "IOBottleneck",
    "LowGPUUtilization",       "StepOutlier",
    "GPUMemoryIncrease",       "BatchSize",
    "MaxInitializationTime",   "LoadBalancing",
    "OverallSystemUsage",      "Dataloader",
    "OverallFrameworkMetrics", "Straggler",
};

#define PR_NSUB (sizeof(pr_rules) / sizeof(pr_rules[0]))
#define PR_NSUB_REFERENCE 11u /* the reference's own sub-rules */

/* RULES.md §6.3's TRIGGER_ALL list (rules not listed keep defaults). */
static const struct {
    const char *rule, *key, *value;
} pr_trigger_all[] = {
    {"CPUBottleneck", "gpu_threshold", "100"},
    {"CPUBottleneck", "cpu_threshold", "0"},
    {"IOBottleneck", "gpu_threshold", "100"},
    {"IOBottleneck", "io_threshold", "-1"},
    {"LowGPUUtilization", "threshold_p95", "100"},
    {"LowGPUUtilization", "threshold_p5", "100"},
    {"StepOutlier", "stddev", "1"},
    {"StepOutlier", "n_outliers", "0"},
    {"StepOutlier", "min_factor", "1"},
    {"StepOutlier", "min_outlier_fraction", "0"},
    {"GPUMemoryIncrease", "increase", "0"},
    {"GPUMemoryIncrease", "window", "10"},
    {"BatchSize", "cpu_threshold_p95", "100"},
    {"BatchSize", "gpu_threshold_p95", "100"},
    {"BatchSize", "gpu_memory_threshold_p95", "100"},
    {"LoadBalancing", "threshold", "0"},
};

#define PR_NPRESET (sizeof(pr_trigger_all) / sizeof(pr_trigger_all[0]))

typedef enum pr_status {
    PR_IN_PROGRESS = 0,
    PR_NO_ISSUES,
    PR_ISSUES,
    PR_ERROR,
} pr_status;

static const char *const pr_status_names[] = {"InProgress", "NoIssuesFound",
                                              "IssuesFound", "Error"};

typedef struct pr_sub {
    tw_subrule *rule;
    pr_status status;
    int64_t triggered, violations, datapoints; /* after its last scan */
    char *error;                               /* set once Error        */
} pr_sub;

typedef struct pr_state {
    const tw_host *host;
    tw_semantics sem;
    pr_sub subs[PR_NSUB];
    size_t nsub; /* sub-rules run: the reference's, plus Straggler (fixed) */
    int any_met; /* some sub-rule's condition was met in some scan */
    char *params_text;
} pr_state;

static void pr_destroy(void *state)
{
    pr_state *s = state;
    if (s == NULL)
        return;
    for (size_t i = 0; i < PR_NSUB; i++) {
        if (s->subs[i].rule != NULL)
            s->host->subrule_destroy(s->subs[i].rule);
        free(s->subs[i].error);
    }
    free(s->params_text);
    free(s);
}

/* "<rule>_" prefix test: the override belongs to `rule`. */
static const char *override_key(const char *spec_name, const char *rule)
{
    size_t n = strlen(rule);
    if (strncmp(spec_name, rule, n) == 0 && spec_name[n] == '_')
        return spec_name + n + 1;
    return NULL;
}

static int build_params_text(pr_state *s, const tw_params *p)
{
    size_t len = 64;
    for (size_t i = P_FIRST_OVERRIDE; i < PR_NPARAMS; i++)
        if (!p->values[i].is_none)
            len += strlen(pr_params[i].name) + strlen(p->values[i].text) + 2;
    s->params_text = malloc(len);
    if (s->params_text == NULL)
        return TW_ERR;
    size_t o = (size_t)snprintf(s->params_text, len, "trigger_all:%s",
                                p->values[P_TRIGGER_ALL].text);
    for (size_t i = P_FIRST_OVERRIDE; i < PR_NPARAMS; i++)
        if (!p->values[i].is_none)
            o += (size_t)snprintf(s->params_text + o, len - o, "\n%s:%s",
                                  pr_params[i].name, p->values[i].text);
    return TW_OK;
}

static int pr_create(const tw_host *host, const tw_params *params, void **state,
                     char *err, size_t errlen)
{
    if (params->nvalues != PR_NPARAMS) {
        snprintf(err, errlen, PR_NAME ": expected %zu parameters, got %zu",
                 (size_t)PR_NPARAMS, params->nvalues);
        return TW_ERR;
    }
    if (host->subrule_create == NULL || host->buf_len == NULL) {
        snprintf(err, errlen, PR_NAME ": the host does not support sub-rules");
        return TW_ERR;
    }
    pr_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, PR_NAME ": out of memory");
        return TW_ERR;
    }
    s->host = host;
    s->sem = params->semantics;
    s->nsub = s->sem == TW_SEMANTICS_FIXED ? PR_NSUB : PR_NSUB_REFERENCE;
    if (build_params_text(s, params) != TW_OK) {
        snprintf(err, errlen, PR_NAME ": out of memory");
        pr_destroy(s);
        return TW_ERR;
    }
    int trigger_all = params->values[P_TRIGGER_ALL].i != 0;
    for (size_t r = 0; r < s->nsub; r++) {
        /* The preset first, then the user's overrides: the host keeps the
         * last value given for a key. */
        const char *keys[PR_NPRESET + PR_NPARAMS];
        const char *vals[PR_NPRESET + PR_NPARAMS];
        size_t n = 0;
        for (size_t k = 0; trigger_all && k < PR_NPRESET; k++)
            if (strcmp(pr_trigger_all[k].rule, pr_rules[r]) == 0) {
                keys[n] = pr_trigger_all[k].key;
                vals[n++] = pr_trigger_all[k].value;
            }
        for (size_t i = P_FIRST_OVERRIDE; i < PR_NPARAMS; i++) {
            const char *key = override_key(pr_params[i].name, pr_rules[r]);
            if (key == NULL || params->values[i].is_none)
                continue;
            const tw_param_value *v = &params->values[i];
            keys[n] = key;
            vals[n++] = v->type == TW_PARAM_STRING ? v->s : v->text;
        }
        char suberr[512];
        suberr[0] = '\0';
        s->subs[r].rule =
            host->subrule_create(host->ctx, pr_rules[r], keys, vals, n, s->sem,
                                 suberr, sizeof(suberr));
        if (s->subs[r].rule == NULL) {
            snprintf(err, errlen, PR_NAME ": sub-rule %s: %s", pr_rules[r],
                     suberr[0] ? suberr : "could not be created");
            pr_destroy(s);
            return TW_ERR;
        }
    }
    *state = s;
    return TW_OK;
}

static int pr_scan(void *state, const tw_scan *scan, tw_scan_result *out,
                   char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    pr_state *s = state;
    const tw_host *h = s->host;
    tw_scan sub = *scan;
    sub.rule_clock_us = s->sem == TW_SEMANTICS_REFERENCE
                            ? scan->first_timestamp_us
                            : scan->start_us;
    int met = 0;
    for (size_t r = 0; r < s->nsub; r++) {
        pr_sub *u = &s->subs[r];
        if (u->status == PR_ERROR)
            continue;
        tw_scan_result res;
        memset(&res, 0, sizeof(res));
        res.rule_triggered = u->triggered;
        res.violations = u->violations;
        res.datapoints = u->datapoints;
        char suberr[512];
        suberr[0] = '\0';
        if (h->subrule_scan(u->rule, &sub, &res, suberr, sizeof(suberr)) !=
            TW_OK) {
            u->status = PR_ERROR;
            free(u->error);
            u->error = strdup(suberr[0] ? suberr : "the sub-rule failed");
            h->log(h->ctx, TW_LOG_WARN,
                   PR_NAME ": sub-rule %s failed (%s); the others go on",
                   pr_rules[r], suberr[0] ? suberr : "no reason given");
            continue;
        }
        u->triggered = res.rule_triggered;
        u->violations = res.violations;
        u->datapoints = res.datapoints;
        if (res.condition_met) {
            met = 1;
            u->status = PR_ISSUES;
        }
    }
    s->any_met |= met;
    if (scan->final)
        for (size_t r = 0; r < s->nsub; r++)
            if (s->subs[r].status == PR_IN_PROGRESS)
                s->subs[r].status = PR_NO_ISSUES;
    out->condition_met =
        s->sem == TW_SEMANTICS_REFERENCE ? (scan->final && s->any_met) : met;
    out->rule_triggered = out->violations = out->datapoints = 0;
    for (size_t r = 0; r < s->nsub; r++) {
        out->rule_triggered += s->subs[r].triggered;
        out->violations += s->subs[r].violations;
        out->datapoints += s->subs[r].datapoints;
    }
    return TW_OK;
}

/* trigger_all and the overrides the user set (the sub-rules' defaults
 * are None here, so the host's list would be the same; kept explicit). */
static const char *pr_parameters_text(void *state)
{
    return ((const pr_state *)state)->params_text;
}

static int pr_details(void *state, tw_json *j)
{
    pr_state *s = state;
    const tw_host *h = s->host;
    h->json_object_begin(j);
    for (size_t r = 0; r < s->nsub; r++) {
        const pr_sub *u = &s->subs[r];
        h->json_key(j, pr_rules[r]);
        h->json_object_begin(j);
        h->json_key(j, "status");
        h->json_string(j, pr_status_names[u->status]);
        if (u->status == PR_ERROR) {
            h->json_key(j, "error");
            h->json_string(j, u->error != NULL ? u->error : "");
        }
        h->json_key(j, "report");
        if (h->subrule_report(u->rule, j) != TW_OK)
            return TW_ERR;
        h->json_object_end(j);
    }
    h->json_object_end(j);
    return TW_OK;
}

/* Checkpoint: magic, version, sub-rule count, any_met; per sub-rule its
 * status, counters and error text (tw_ser); then per sub-rule its
 * checkpoint bytes followed by their length (u64 LE). */
#define PR_MAGIC 0x50524550u /* "PERP" */
#define PR_VERSION 1u

static int pr_save(void *state, tw_buf *out)
{
    pr_state *s = state;
    const tw_host *h = s->host;
    tw_ser w;
    tw_ser_init(&w, h, out);
    tw_ser_u32(&w, PR_MAGIC);
    tw_ser_u32(&w, PR_VERSION);
    tw_ser_u32(&w, (uint32_t)s->nsub);
    tw_ser_u8(&w, (uint8_t)s->any_met);
    for (size_t r = 0; r < s->nsub; r++) {
        const pr_sub *u = &s->subs[r];
        tw_ser_u8(&w, (uint8_t)u->status);
        tw_ser_i64(&w, u->triggered);
        tw_ser_i64(&w, u->violations);
        tw_ser_i64(&w, u->datapoints);
        tw_ser_str(&w, u->status == PR_ERROR ? u->error : NULL);
    }
    if (!tw_ser_ok(&w))
        return TW_ERR;
    for (size_t r = 0; r < s->nsub; r++) {
        size_t before = h->buf_len(out);
        if (h->subrule_save(s->subs[r].rule, out) != TW_OK)
            return TW_ERR;
        tw_ser_u64(&w, (uint64_t)(h->buf_len(out) - before));
        if (!tw_ser_ok(&w))
            return TW_ERR;
    }
    return TW_OK;
}

static uint64_t read_u64_le(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--)
        v = (v << 8) | p[i];
    return v;
}

static int pr_restore(void *state, const void *data, size_t len, char *err,
                      size_t errlen)
{
    pr_state *s = state;
    tw_deser d;
    tw_deser_init(&d, data, len);
    uint32_t magic = tw_deser_u32(&d);
    uint32_t version = tw_deser_u32(&d);
    uint32_t nsub = tw_deser_u32(&d);
    if (!tw_deser_ok(&d) || magic != PR_MAGIC || version != PR_VERSION ||
        nsub != s->nsub) {
        snprintf(err, errlen, PR_NAME ": checkpoint is not from this rule");
        return TW_ERR;
    }
    int any_met = tw_deser_u8(&d) != 0;
    pr_sub meta[PR_NSUB];
    memset(meta, 0, sizeof(meta));
    for (size_t r = 0; r < s->nsub; r++) {
        uint8_t st = tw_deser_u8(&d);
        if (st > PR_ERROR)
            tw_deser_fail(&d);
        meta[r].status = (pr_status)st;
        meta[r].triggered = tw_deser_i64(&d);
        meta[r].violations = tw_deser_i64(&d);
        meta[r].datapoints = tw_deser_i64(&d);
        meta[r].error = tw_deser_str(&d);
        if (tw_deser_ok(&d) && meta[r].status == PR_ERROR &&
            meta[r].error == NULL)
            tw_deser_fail(&d);
    }
    int ok = tw_deser_ok(&d);
    /* The framed sub-rule checkpoints fill the rest, read from the end. */
    const uint8_t *base = (const uint8_t *)data + (len - d.left);
    size_t end = d.left;
    const uint8_t *blob[PR_NSUB];
    size_t blen[PR_NSUB];
    for (size_t r = s->nsub; ok && r-- > 0;) {
        if (end < 8) {
            ok = 0;
            break;
        }
        uint64_t n = read_u64_le(base + end - 8);
        end -= 8;
        if (n > end) {
            ok = 0;
            break;
        }
        end -= (size_t)n;
        blob[r] = base + end;
        blen[r] = (size_t)n;
    }
    if (!ok || end != 0) {
        for (size_t r = 0; r < s->nsub; r++)
            free(meta[r].error);
        snprintf(err, errlen, PR_NAME ": checkpoint is truncated or corrupt");
        return TW_ERR;
    }
    for (size_t r = 0; r < s->nsub; r++) {
        char suberr[512];
        suberr[0] = '\0';
        if (s->host->subrule_restore(s->subs[r].rule, blob[r], blen[r], suberr,
                                     sizeof(suberr)) != TW_OK) {
            for (size_t k = 0; k < s->nsub; k++)
                free(meta[k].error);
            snprintf(err, errlen, PR_NAME ": sub-rule %s: %s", pr_rules[r],
                     suberr[0] ? suberr : "restore failed");
            return TW_ERR;
        }
    }
    for (size_t r = 0; r < s->nsub; r++) {
        pr_sub *u = &s->subs[r];
        free(u->error);
        u->status = meta[r].status;
        u->triggered = meta[r].triggered;
        u->violations = meta[r].violations;
        u->datapoints = meta[r].datapoints;
        u->error = meta[r].error;
    }
    s->any_met = any_met;
    return TW_OK;
}

static const tw_rule_descriptor pr_descriptor = {
    .abi_version = TW_PLUGIN_ABI_VERSION,
    .name = PR_NAME,
    .description = "Runs the eleven profiler rules on shared scans and "
                   "reports all their reports; accepts <RuleName>_<param> "
                   "overrides and the trigger_all preset.",
    .params = pr_params,
    .nparams = PR_NPARAMS,
    .create = pr_create,
    .scan = pr_scan,
    .details = pr_details,
    .parameters_text = pr_parameters_text,
    .save = pr_save,
    .restore = pr_restore,
    .destroy = pr_destroy,
};

TW_PLUGIN_EXPORT const tw_rule_descriptor *trainwatch_rule(void)
{
    return &pr_descriptor;
}

/* What "its input arrived" means for this rule (plugin.h). */
TW_PLUGIN_EXPORT uint32_t trainwatch_rule_inputs(void)
{
    return TW_INPUT_SYSTEM | TW_INPUT_FRAMEWORK;
}
