/* Unit tests of the ProfilerReport plugin (RULES.md §3.12, §6.3): the
 * embedded sub-reports equal the stand-alone rules' reports on the same
 * scans (both semantics), the frozen sub-rule clock of `reference`
 * (MaxInitializationTime, BatchSize), overrides reaching the sub-rule,
 * parameter specs mirroring the sub-rules', bad overrides rejected,
 * a failing sub-rule, the trigger_all preset, the condition/status logic
 * and checkpoint equivalence. */
#include <limits.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "rule_test_util.h"

#define RULE "ProfilerReport"
#define F_US 1000000000LL /* the job's first timestamp: 1000 s */
#define MIN_US 60000000LL
#define ROUNDS 120 /* sampling rounds per scan (every 0.5 s) */
#define MAX_SCANS 10
#define PER_ROUND 9
#define EV_PER_ROUND 3

static const char *const subs[] = {
    "CPUBottleneck",           "IOBottleneck",
    "LowGPUUtilization",       "StepOutlier",
    "GPUMemoryIncrease",       "BatchSize",
    "MaxInitializationTime",   "LoadBalancing",
    "OverallSystemUsage",      "Dataloader",
    "OverallFrameworkMetrics", "Straggler",
};
#define NSUB (sizeof(subs) / sizeof(subs[0]))
/* The reference's eleven; Straggler runs in fixed semantics only. */
#define NSUB_REFERENCE 11u
#define NSUB_OF(sem) ((sem) == TW_SEMANTICS_FIXED ? NSUB : NSUB_REFERENCE)

/* ---- a crafted job: one node, two cores, two GPUs ------------------------ */

typedef struct stream {
    rt_job job;
    uint32_t c0, c1, io0, g0u, g1u, g0m, g1m, mem;
    size_t nscans;
    tw_sample s[MAX_SCANS][ROUNDS * PER_ROUND];
    size_t ns[MAX_SCANS];
    tw_fw_event ev[MAX_SCANS][ROUNDS * EV_PER_ROUND];
    size_t nev[MAX_SCANS];
    tw_arg step_arg[MAX_SCANS * ROUNDS];
    tw_arg pid_arg[2];
    char num[MAX_SCANS * ROUNDS][16];
} stream;

/* healthy: busy GPUs and moderate CPUs (no default rule fires); otherwise
 * periodic bottleneck rounds, a low GPU, rising GPU memory and slow
 * steps. with_steps = 0 leaves out every framework event. */
static stream *stream_new(size_t nscans, int healthy, int with_steps)
{
    assert_true(nscans <= MAX_SCANS);
    stream *st = calloc(1, sizeof(*st));
    assert_non_null(st);
    st->nscans = nscans;
    rt_job *j = &st->job;
    rt_job_init(j);
    st->g0u = rt_job_series(j, "algo-1", "gpu", "gpu0", "GPUUtilization");
    st->g1u = rt_job_series(j, "algo-1", "gpu", "gpu1", "GPUUtilization");
    st->g0m = rt_job_series(j, "algo-1", "gpu", "gpu0", "GPUMemoryUtilization");
    st->g1m = rt_job_series(j, "algo-1", "gpu", "gpu1", "GPUMemoryUtilization");
    st->c0 = rt_job_series(j, "algo-1", "cpu", "cpu0", "CPUUtilization");
    st->c1 = rt_job_series(j, "algo-1", "cpu", "cpu1", "CPUUtilization");
    st->io0 = rt_job_series(j, "algo-1", "cpu", "cpu0", "I/OWaitPercentage");
    st->mem = rt_job_series(j, "algo-1", "memory", "MemoryUsedPercent", "");
    st->pid_arg[0] = (tw_arg){"pid", "11", TW_ARG_NUMBER};
    st->pid_arg[1] = (tw_arg){"pid", "12", TW_ARG_NUMBER};
    for (size_t k = 0; k < nscans; k++) {
        size_t n = 0, m = 0;
        for (size_t r = 0; r < ROUNDS; r++) {
            size_t i = k * ROUNDS + r;
            double ts = (double)(F_US + (int64_t)k * MIN_US) / 1e6 + 0.25 +
                        0.5 * (double)r;
            double g0 = healthy
                            ? 92 + (double)(i % 7)
                            : (i % 5 == 0 ? 3 : 60 + (double)((i * 7) % 35));
            double g1 = healthy ? 93 + (double)(i % 5) : 85 + (double)(i % 11);
            double m0 = healthy ? 40 + (double)(i % 2) : (i < 200 ? 20 : 60);
            double c0 = healthy ? 50 + (double)(i % 10)
                                : (i % 5 == 0 ? 97 : 30 + (double)(i % 20));
            double c1 = healthy ? 45 + (double)(i % 10) : 20 + (double)(i % 13);
            double io = healthy ? (double)(i % 2) : (i % 5 == 0 ? 70 : 2);
            tw_sample *s = st->s[k];
            s[n++] = rt_sample(ts + 0.001, g0, st->g0u);
            s[n++] = rt_sample(ts + 0.001, g1, st->g1u);
            s[n++] = rt_sample(ts + 0.001, m0, st->g0m);
            s[n++] = rt_sample(ts + 0.001, 30 + (double)(i % 3), st->g1m);
            s[n++] = rt_sample(ts + 0.002, c0, st->c0);
            s[n++] = rt_sample(ts + 0.002, c1, st->c1);
            s[n++] = rt_sample(ts + 0.002, io, st->io0);
            s[n++] = rt_sample(ts + 0.003, 50 + (double)(i % 4), st->mem);
            if (!with_steps)
                continue;
            int64_t start = (int64_t)(ts * 1e6 + 0.5);
            int64_t dur = !healthy && i % 23 == 0
                              ? 450000
                              : 300000 + (int64_t)(i % 5) * 1000;
            tw_fw_event *e = st->ev[k];
            e[m] = rt_event("DataLoaderIter", "DataLoaderIter", "algo-1-0",
                            start - 50000, start - 10000,
                            TW_SOURCE_PYTHONTIMELINE);
            e[m].args = &st->pid_arg[r % 2];
            e[m++].nargs = 1;
            snprintf(st->num[i], sizeof(st->num[i]), "%zu", i);
            st->step_arg[i] = (tw_arg){"step_num", st->num[i], TW_ARG_NUMBER};
            e[m] = rt_event("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN",
                            "algo-1-0", start, start + dur,
                            TW_SOURCE_PYTHONTIMELINE);
            e[m].args = &st->step_arg[i];
            e[m++].nargs = 1;
            e[m++] =
                rt_event("conv1", "cpu_functions", "algo-1-0", start + 1000,
                         start + 51000, TW_SOURCE_MODEL_TIMELINE);
        }
        st->ns[k] = n;
        st->nev[k] = m;
    }
    return st;
}

/* Scan k; final on the last one unless `cut` (a job cut off). */
static tw_scan stream_scan(const stream *st, size_t k, int cut)
{
    tw_scan sc = rt_job_scan(&st->job, k, F_US + (int64_t)k * MIN_US,
                             F_US + (int64_t)(k + 1) * MIN_US, st->s[k],
                             st->ns[k], st->ev[k], st->nev[k]);
    sc.final = !cut && k + 1 == st->nscans;
    return sc;
}

/* ---- helpers ----------------------------------------------------------------
 */

static rt_env *pr_new(tw_semantics sem, const char *const *kv)
{
    rt_env *e = rt_env_new();
    if (rt_create(e, RULE, sem, kv) != TW_OK)
        fail_msg("create failed: %s", e->err);
    return e;
}

/* Runs scans [from, to) and returns the last result. */
static const tw_scan_result *run_range(rt_env *e, const stream *st, size_t from,
                                       size_t to, int cut)
{
    const tw_scan_result *r = NULL;
    for (size_t k = from; k < to; k++) {
        tw_scan sc = stream_scan(st, k, cut);
        r = rt_run(e, &sc);
    }
    return r;
}

static json_t *sub_report(json_t *rep, const char *name)
{
    json_t *r = rt_jget(rep, "Details", name, "report", NULL);
    if (r == NULL)
        fail_msg("no Details.%s.report", name);
    return r;
}

static const char *sub_status(json_t *rep, const char *name)
{
    json_t *s = rt_jget(rep, "Details", name, "status", NULL);
    if (s == NULL || !json_is_string(s))
        fail_msg("no Details.%s.status", name);
    return json_string_value(s);
}

/* The overrides used by the equivalence test, as sub-rule parameters. */
static const char *const *sub_kv(const char *name)
{
    static const char *const cpu[] = {"threshold", "10", "patience", "50",
                                      NULL};
    static const char *const lgu[] = {"patience", "100", "window", "50", NULL};
    static const char *const so[] = {"stddev", "2", "n_outliers", "2", NULL};
    static const char *const gmi[] = {"patience", "100", NULL};
    static const char *const bs[] = {
        "gpu_threshold_p95", "100", "patience", "100", "window", "50", NULL};
    static const char *const lb[] = {"patience", "100", NULL};
    static const char *const dl[] = {"patience", "5", NULL};
    if (strcmp(name, "CPUBottleneck") == 0 || strcmp(name, "IOBottleneck") == 0)
        return cpu;
    if (strcmp(name, "LowGPUUtilization") == 0)
        return lgu;
    if (strcmp(name, "StepOutlier") == 0)
        return so;
    if (strcmp(name, "GPUMemoryIncrease") == 0)
        return gmi;
    if (strcmp(name, "BatchSize") == 0)
        return bs;
    if (strcmp(name, "LoadBalancing") == 0)
        return lb;
    if (strcmp(name, "Dataloader") == 0)
        return dl;
    return NULL;
}

/* The same overrides as ProfilerReport parameters (<Rule>_<param>). */
static const char *const pr_kv[] = {"CPUBottleneck_threshold",
                                    "10",
                                    "IOBottleneck_threshold",
                                    "10",
                                    "CPUBottleneck_patience",
                                    "50",
                                    "IOBottleneck_patience",
                                    "50",
                                    "BatchSize_gpu_threshold_p95",
                                    "100",
                                    "LowGPUUtilization_patience",
                                    "100",
                                    "LowGPUUtilization_window",
                                    "50",
                                    "StepOutlier_stddev",
                                    "2",
                                    "StepOutlier_n_outliers",
                                    "2",
                                    "GPUMemoryIncrease_patience",
                                    "100",
                                    "BatchSize_patience",
                                    "100",
                                    "BatchSize_window",
                                    "50",
                                    "LoadBalancing_patience",
                                    "100",
                                    "Dataloader_patience",
                                    "5",
                                    NULL};

/* ---- tests --------------------------------------------------------------- */

/* Each embedded report is byte for byte the stand-alone rule's report on
 * the same scans, with the clock ProfilerReport gives its sub-rules (F in
 * reference, the scan start in fixed); statuses and sums match too. */
static void check_equivalence(tw_semantics sem)
{
    stream *st = stream_new(3, 0, 1);
    rt_env *pr = pr_new(sem, pr_kv);
    run_range(pr, st, 0, st->nscans, 0);
    char *pr_text = strdup(rt_report_text(pr));
    assert_non_null(pr_text);

    int64_t sum_trig = 0, sum_viol = 0, sum_dp = 0, fired = 0;
    for (size_t r = 0; r < NSUB_OF(sem); r++) {
        rt_env *e = rt_env_new();
        if (rt_create(e, subs[r], sem, sub_kv(subs[r])) != TW_OK)
            fail_msg("%s: %s", subs[r], e->err);
        for (size_t k = 0; k < st->nscans; k++) {
            tw_scan sc = stream_scan(st, k, 0);
            if (sem == TW_SEMANTICS_REFERENCE)
                sc.rule_clock_us = sc.first_timestamp_us;
            rt_run(e, &sc);
        }
        tw_rule_finish(e->rule);
        const char *text = rt_report_text(e);
        size_t len = strlen(text) + strlen(subs[r]) + 128;
        char *want = malloc(len);
        assert_non_null(want);
        snprintf(want, len, "\"%s\": {\"status\": \"%s\", \"report\": %s}",
                 subs[r], tw_rule_status_name(tw_rule_get_status(e->rule)),
                 text);
        if (strstr(pr_text, want) == NULL)
            fail_msg("%s differs:\nwant %s\nin   %s", subs[r], want, pr_text);
        free(want);
        const tw_scan_result *res = tw_rule_last_result(e->rule);
        sum_trig += res->rule_triggered;
        sum_viol += res->violations;
        sum_dp += res->datapoints;
        if (res->rule_triggered > 0)
            fired++;
        rt_env_free(e);
    }
    /* The crafted stream makes the bottlenecks, LowGPU, StepOutlier,
     * GPUMemoryIncrease and BatchSize fire (LoadBalancing too in fixed). */
    assert_true(fired >= 6);
    const tw_scan_result *pres = tw_rule_last_result(pr->rule);
    assert_int_equal(pres->rule_triggered, sum_trig);
    assert_int_equal(pres->violations, sum_viol);
    assert_int_equal(pres->datapoints, sum_dp);
    json_t *rep = rt_report(pr);
    assert_int_equal((int64_t)rt_jnum(rep, "RuleTriggered"), sum_trig);
    assert_int_equal((int64_t)rt_jnum(rep, "Violations"), sum_viol);
    assert_int_equal((int64_t)rt_jnum(rep, "Datapoints"), sum_dp);
    char keys[512];
    assert_string_equal(rt_jkeys(rep, keys, sizeof(keys)),
                        "RuleTriggered,Violations,Details,Datapoints,"
                        "RuleParameters");
    assert_string_equal(
        rt_jkeys(json_object_get(rep, "Details"), keys, sizeof(keys)),
        sem == TW_SEMANTICS_FIXED
            ? "CPUBottleneck,IOBottleneck,LowGPUUtilization,StepOutlier,"
              "GPUMemoryIncrease,BatchSize,MaxInitializationTime,LoadBalancing,"
              "OverallSystemUsage,Dataloader,OverallFrameworkMetrics,Straggler"
            : "CPUBottleneck,IOBottleneck,LowGPUUtilization,StepOutlier,"
              "GPUMemoryIncrease,BatchSize,MaxInitializationTime,LoadBalancing,"
              "OverallSystemUsage,Dataloader,OverallFrameworkMetrics");
    json_decref(rep);
    free(pr_text);
    rt_env_free(pr);
    free(st);
}

static void test_equivalence_reference(void **state)
{
    (void)state;
    check_equivalence(TW_SEMANTICS_REFERENCE);
}

static void test_equivalence_fixed(void **state)
{
    (void)state;
    check_equivalence(TW_SEMANTICS_FIXED);
}

/* Quirk 1: under ProfilerReport in reference semantics the sub-rule clock
 * stays at F, so MaxInitializationTime (threshold 0, no steps) never
 * fires; in fixed it fires from scan 1 on, as the stand-alone rule. */
static void test_frozen_clock_max_init(void **state)
{
    (void)state;
    stream *st = stream_new(3, 1, 0);
    const char *kv[] = {"MaxInitializationTime_threshold", "0", NULL};
    rt_env *ref = pr_new(TW_SEMANTICS_REFERENCE, kv);
    rt_env *fix = pr_new(TW_SEMANTICS_FIXED, kv);
    run_range(ref, st, 0, 3, 0);
    run_range(fix, st, 0, 3, 0);
    json_t *r = rt_report(ref), *f = rt_report(fix);
    assert_int_equal((int64_t)rt_jnum(sub_report(r, "MaxInitializationTime"),
                                      "RuleTriggered"),
                     0);
    assert_string_equal(sub_status(r, "MaxInitializationTime"),
                        "NoIssuesFound");
    assert_int_equal((int64_t)rt_jnum(sub_report(f, "MaxInitializationTime"),
                                      "RuleTriggered"),
                     2);
    assert_string_equal(sub_status(f, "MaxInitializationTime"), "IssuesFound");
    assert_string_equal(
        json_string_value(rt_jget(sub_report(f, "MaxInitializationTime"),
                                  "RuleParameters", NULL)),
        "threshold:0");
    json_decref(r);
    json_decref(f);
    /* The stand-alone rule in reference semantics (own clock) fires. */
    rt_env *alone = rt_env_new();
    const char *akv[] = {"threshold", "0", NULL};
    assert_int_equal(
        rt_create(alone, "MaxInitializationTime", TW_SEMANTICS_REFERENCE, akv),
        TW_OK);
    const tw_scan_result *res = run_range(alone, st, 0, 3, 0);
    assert_int_equal(res->rule_triggered, 2);
    rt_env_free(alone);
    rt_env_free(ref);
    rt_env_free(fix);
    free(st);
}

/* Quirk 1 for BatchSize: last_timestamp is F in reference, the scan start
 * of the last triggering scan in fixed. */
static void test_frozen_clock_batch_size(void **state)
{
    (void)state;
    stream *st = stream_new(3, 0, 1);
    const char *kv[] = {"BatchSize_patience",
                        "100",
                        "BatchSize_window",
                        "50",
                        "BatchSize_gpu_threshold_p95",
                        "100",
                        NULL};
    rt_env *ref = pr_new(TW_SEMANTICS_REFERENCE, kv);
    rt_env *fix = pr_new(TW_SEMANTICS_FIXED, kv);
    run_range(ref, st, 0, 3, 0);
    run_range(fix, st, 0, 3, 0);
    json_t *r = rt_report(ref), *f = rt_report(fix);
    assert_true(rt_jnum(sub_report(r, "BatchSize"), "RuleTriggered") > 0);
    assert_int_equal((int64_t)rt_jnum(sub_report(r, "BatchSize"), "Details",
                                      "last_timestamp"),
                     F_US);
    assert_int_equal((int64_t)rt_jnum(sub_report(f, "BatchSize"), "Details",
                                      "last_timestamp"),
                     F_US + 2 * MIN_US);
    json_decref(r);
    json_decref(f);
    rt_env_free(ref);
    rt_env_free(fix);
    free(st);
}

/* An override reaches its sub-rule: LowGPUUtilization_threshold_p95 100
 * makes it fire on a healthy stream, and its RuleParameters show it. */
static void test_override_reaches_subrule(void **state)
{
    (void)state;
    stream *st = stream_new(3, 1, 1);
    rt_env *plain = pr_new(TW_SEMANTICS_FIXED, NULL);
    const char *kv[] = {"LowGPUUtilization_threshold_p95", "100",
                        "LowGPUUtilization_patience", "100", NULL};
    rt_env *over = pr_new(TW_SEMANTICS_FIXED, kv);
    run_range(plain, st, 0, 3, 0);
    run_range(over, st, 0, 3, 0);
    json_t *p = rt_report(plain), *o = rt_report(over);
    assert_int_equal(
        (int64_t)rt_jnum(sub_report(p, "LowGPUUtilization"), "RuleTriggered"),
        0);
    assert_true(rt_jnum(sub_report(o, "LowGPUUtilization"), "RuleTriggered") >
                0);
    assert_string_equal(sub_status(o, "LowGPUUtilization"), "IssuesFound");
    assert_string_equal(sub_status(p, "LowGPUUtilization"), "NoIssuesFound");
    assert_string_equal(
        json_string_value(rt_jget(sub_report(o, "LowGPUUtilization"),
                                  "RuleParameters", NULL)),
        "threshold_p95:100\nthreshold_p5:10\nwindow:500\npatience:100");
    /* Unset overrides keep the sub-rule's defaults. */
    assert_string_equal(
        json_string_value(rt_jget(sub_report(p, "LowGPUUtilization"),
                                  "RuleParameters", NULL)),
        "threshold_p95:70\nthreshold_p5:10\nwindow:500\npatience:1000");
    /* ProfilerReport's own RuleParameters list only what was set. */
    assert_string_equal(json_string_value(json_object_get(p, "RuleParameters")),
                        "trigger_all:False");
    assert_string_equal(json_string_value(json_object_get(o, "RuleParameters")),
                        "trigger_all:False\nLowGPUUtilization_threshold_p95:100"
                        "\nLowGPUUtilization_patience:100");
    json_decref(p);
    json_decref(o);
    rt_env_free(plain);
    rt_env_free(over);
    free(st);
}

/* Every (sub-rule, parameter) pair has an override spec with the same type
 * and bounds, default None, help "<Rule>: ... (default <literal>)"; and
 * nothing else but trigger_all and opt_out_telemetry. */
static void test_param_specs_mirror_subrules(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    const tw_plugin *p;
    assert_int_equal(tw_registry_find(e->reg, RULE, &p, e->err, sizeof(e->err)),
                     TW_OK);
    const tw_rule_descriptor *pd = tw_plugin_descriptor(p);
    size_t expected = 2;
    for (size_t r = 0; r < NSUB; r++) {
        const tw_plugin *sp;
        assert_int_equal(
            tw_registry_find(e->reg, subs[r], &sp, e->err, sizeof(e->err)),
            TW_OK);
        const tw_rule_descriptor *sd = tw_plugin_descriptor(sp);
        for (size_t i = 0; i < sd->nparams; i++) {
            const tw_param_spec *want = &sd->params[i];
            char name[128], tail[160];
            snprintf(name, sizeof(name), "%s_%s", subs[r], want->name);
            snprintf(tail, sizeof(tail), "(default %s)",
                     want->default_value ? want->default_value : "None");
            const tw_param_spec *got = NULL;
            for (size_t k = 0; k < pd->nparams; k++)
                if (strcmp(pd->params[k].name, name) == 0)
                    got = &pd->params[k];
            if (got == NULL)
                fail_msg("no override spec %s", name);
            assert_int_equal(got->type, want->type);
            rt_assert_bits(got->min, want->min);
            rt_assert_bits(got->max, want->max);
            assert_null(got->default_value);
            assert_int_equal(strncmp(got->help, subs[r], strlen(subs[r])), 0);
            size_t hl = strlen(got->help), tl = strlen(tail);
            if (hl < tl || strcmp(got->help + hl - tl, tail) != 0)
                fail_msg("%s: help '%s' does not end with '%s'", name,
                         got->help, tail);
            expected++;
        }
    }
    assert_int_equal(pd->nparams, expected);
    rt_env_free(e);
}

/* Bad overrides are rejected at create with a sentence naming them. */
static void test_bad_overrides_rejected(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    const char *unknown[] = {"CPUBottleneck_treshold", "40", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, unknown), TW_ERR);
    assert_non_null(
        strstr(e->err, "unknown parameter 'CPUBottleneck_treshold'"));
    const char *range[] = {"LowGPUUtilization_threshold_p95", "150", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, range), TW_ERR);
    assert_non_null(strstr(e->err, "LowGPUUtilization_threshold_p95"));
    assert_non_null(strstr(e->err, "out of range"));
    const char *type[] = {"StepOutlier_n_outliers", "many", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, type), TW_ERR);
    assert_non_null(strstr(e->err, "StepOutlier_n_outliers"));
    /* No override for a rule without parameters. */
    const char *none[] = {"OverallSystemUsage_window", "5", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, none), TW_ERR);
    assert_non_null(strstr(e->err, "unknown parameter"));
    /* Accepted: the client's telemetry flag, a string override. */
    const char *ok[] = {"opt_out_telemetry",
                        "true",
                        "StepOutlier_mode",
                        "ModeKeys.TRAIN",
                        "IOBottleneck_io_threshold",
                        "-1",
                        NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, ok), TW_OK);
    json_t *rep = rt_report(e);
    assert_non_null(
        strstr(json_string_value(rt_jget(sub_report(rep, "StepOutlier"),
                                         "RuleParameters", NULL)),
               "mode:ModeKeys.TRAIN"));
    json_decref(rep);
    rt_env_free(e);
}

/* A sub-rule that fails gets Error with its reason, keeps its last report,
 * contributes false, and the others go on (quirk 2's fix). The failing
 * rule stands in for Dataloader from a directory searched first. */
static void test_failing_subrule(void **state)
{
    (void)state;
    const char *b = getenv("TW_BUILD_DIR");
    char dir[] = "/tmp/tw_pr_test_XXXXXX";
    assert_non_null(mkdtemp(dir));
    char rel[1024], target[PATH_MAX], link[1100];
    snprintf(rel, sizeof(rel), "%s/tests/plugins/failing_subrule.so",
             b ? b : ".");
    assert_non_null(realpath(rel, target));
    snprintf(link, sizeof(link), "%s/Dataloader.so", dir);
    assert_int_equal(symlink(target, link), 0);

    stream *st = stream_new(3, 0, 1);
    rt_env *e = rt_env_new();
    assert_int_equal(tw_registry_add_dir(e->reg, dir), TW_OK);
    const char *kv[] = {"LowGPUUtilization_patience", "100", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv), TW_OK);
    const tw_scan_result *r = run_range(e, st, 0, 3, 0);
    assert_int_equal(tw_rule_get_status(e->rule), TW_STATUS_ISSUES_FOUND);
    assert_true(r->condition_met);
    json_t *rep = rt_report(e);
    assert_string_equal(sub_status(rep, "Dataloader"), "Error");
    assert_non_null(strstr(
        json_string_value(rt_jget(rep, "Details", "Dataloader", "error", NULL)),
        "deliberate failure at scan 1"));
    assert_int_equal(
        (int64_t)rt_jnum(sub_report(rep, "Dataloader"), "Datapoints"), 7);
    /* Later sub-rules still ran on every scan. */
    assert_string_equal(sub_status(rep, "OverallFrameworkMetrics"),
                        "NoIssuesFound");
    assert_string_equal(sub_status(rep, "LowGPUUtilization"), "IssuesFound");
    assert_null(rt_jget(rep, "Details", "LowGPUUtilization", "error", NULL));
    json_decref(rep);

    /* The Error status and its reason survive a checkpoint. */
    tw_buf *buf = tw_buf_new();
    assert_non_null(buf);
    assert_int_equal(tw_rule_save(e->rule, buf), TW_OK);
    rt_env *c = rt_env_new();
    assert_int_equal(tw_registry_add_dir(c->reg, dir), TW_OK);
    assert_int_equal(rt_create(c, RULE, TW_SEMANTICS_FIXED, kv), TW_OK);
    assert_int_equal(tw_rule_restore(c->rule, tw_buf_data(buf), tw_buf_len(buf),
                                     c->err, sizeof(c->err)),
                     TW_OK);
    char *a = strdup(rt_report_text(e));
    assert_non_null(a);
    assert_string_equal(rt_report_text(c), a);
    free(a);
    tw_buf_free(buf);
    rt_env_free(c);
    rt_env_free(e);
    free(st);
    unlink(link);
    rmdir(dir);
}

/* trigger_all (RULES.md §6.3) makes the rules fire on a healthy stream
 * that trips nothing with the defaults; explicit overrides still win. */
static void test_trigger_all(void **state)
{
    (void)state;
    stream *st = stream_new(9, 1, 1); /* 1080 rounds > default patience */
    rt_env *plain = pr_new(TW_SEMANTICS_FIXED, NULL);
    const char *kv[] = {"trigger_all", "true", NULL};
    rt_env *all = pr_new(TW_SEMANTICS_FIXED, kv);
    const char *kv2[] = {"trigger_all", "true", "CPUBottleneck_cpu_threshold",
                         "100", NULL};
    rt_env *won = pr_new(TW_SEMANTICS_FIXED, kv2);
    const tw_scan_result *rp = run_range(plain, st, 0, 9, 0);
    run_range(all, st, 0, 9, 0);
    run_range(won, st, 0, 9, 0);
    assert_int_equal(rp->rule_triggered, 0);
    tw_rule_finish(plain->rule);
    tw_rule_finish(all->rule);
    assert_int_equal(tw_rule_get_status(plain->rule),
                     TW_STATUS_NO_ISSUES_FOUND);
    assert_int_equal(tw_rule_get_status(all->rule), TW_STATUS_ISSUES_FOUND);
    json_t *p = rt_report(plain), *a = rt_report(all), *w = rt_report(won);
    static const char *const fire[] = {"CPUBottleneck",     "IOBottleneck",
                                       "LowGPUUtilization", "StepOutlier",
                                       "GPUMemoryIncrease", "BatchSize"};
    for (size_t i = 0; i < sizeof(fire) / sizeof(fire[0]); i++) {
        if (rt_jnum(sub_report(a, fire[i]), "RuleTriggered") <= 0)
            fail_msg("%s did not fire under trigger_all", fire[i]);
        assert_string_equal(sub_status(a, fire[i]), "IssuesFound");
        assert_int_equal(
            (int64_t)rt_jnum(sub_report(p, fire[i]), "RuleTriggered"), 0);
    }
    assert_string_equal(
        json_string_value(
            rt_jget(sub_report(a, "IOBottleneck"), "RuleParameters", NULL)),
        "threshold:50\nio_threshold:-1\ngpu_threshold:100\npatience:1000");
    assert_string_equal(
        json_string_value(
            rt_jget(sub_report(a, "LoadBalancing"), "RuleParameters", NULL)),
        "threshold:0\npatience:1000");
    /* The explicit override beats the preset: no core is above 100 %. */
    assert_non_null(
        strstr(json_string_value(rt_jget(sub_report(w, "CPUBottleneck"),
                                         "RuleParameters", NULL)),
               "cpu_threshold:100"));
    assert_int_equal(
        (int64_t)rt_jnum(sub_report(w, "CPUBottleneck"), "RuleTriggered"), 0);
    assert_string_equal(json_string_value(json_object_get(a, "RuleParameters")),
                        "trigger_all:True");
    json_decref(p);
    json_decref(a);
    json_decref(w);
    rt_env_free(plain);
    rt_env_free(all);
    rt_env_free(won);
    free(st);
}

/* Condition and statuses: fixed raises condition_met on every scan where a
 * sub-rule's condition holds; reference only on the final scan. A job
 * cut off before its final scan stays InProgress in reference. */
static void test_condition_and_status(void **state)
{
    (void)state;
    stream *st = stream_new(3, 0, 1);
    for (int sem = 0; sem < 2; sem++) {
        int ref = sem == TW_SEMANTICS_REFERENCE;
        rt_env *e = pr_new((tw_semantics)sem, pr_kv);
        for (size_t k = 0; k < 3; k++) {
            tw_scan sc = stream_scan(st, k, 0);
            const tw_scan_result *r = rt_run(e, &sc);
            json_t *rep = rt_report(e);
            if (k < 2) {
                assert_string_equal(sub_status(rep, "OverallSystemUsage"),
                                    "InProgress");
                assert_int_equal(r->condition_met, ref ? 0 : 1);
                assert_int_equal(tw_rule_get_status(e->rule),
                                 ref ? TW_STATUS_IN_PROGRESS
                                     : TW_STATUS_ISSUES_FOUND);
            } else {
                assert_string_equal(sub_status(rep, "OverallSystemUsage"),
                                    "NoIssuesFound");
                assert_int_equal(r->condition_met, 1);
                assert_int_equal(tw_rule_get_status(e->rule),
                                 TW_STATUS_ISSUES_FOUND);
            }
            /* The bottleneck fires from scan 0 (patience 50). */
            assert_string_equal(sub_status(rep, "CPUBottleneck"),
                                "IssuesFound");
            json_decref(rep);
        }
        assert_int_equal(tw_rule_conditions_met(e->rule), ref ? 1 : 3);
        rt_env_free(e);

        /* Cut off: no final scan. */
        e = pr_new((tw_semantics)sem, pr_kv);
        run_range(e, st, 0, 3, 1);
        tw_rule_finish(e->rule);
        assert_int_equal(tw_rule_get_status(e->rule),
                         ref ? TW_STATUS_NO_ISSUES_FOUND
                             : TW_STATUS_ISSUES_FOUND);
        rt_env_free(e);

        /* A healthy job: never a condition, NoIssuesFound at the end. */
        stream *h = stream_new(2, 1, 1);
        e = pr_new((tw_semantics)sem, NULL);
        const tw_scan_result *r = run_range(e, h, 0, 2, 0);
        assert_int_equal(r->condition_met, 0);
        tw_rule_finish(e->rule);
        assert_int_equal(tw_rule_get_status(e->rule),
                         TW_STATUS_NO_ISSUES_FOUND);
        json_t *rep = rt_report(e);
        for (size_t i = 0; i < NSUB_OF((tw_semantics)sem); i++)
            assert_string_equal(sub_status(rep, subs[i]), "NoIssuesFound");
        json_decref(rep);
        rt_env_free(e);
        free(h);
    }
    free(st);
}

/* Save after scan 1, restore into a fresh instance, continue: identical
 * report and results to an uninterrupted run (both semantics). */
static void test_checkpoint_equivalence(void **state)
{
    (void)state;
    stream *st = stream_new(3, 0, 1);
    for (int sem = 0; sem < 2; sem++) {
        rt_env *a = pr_new((tw_semantics)sem, pr_kv);
        const tw_scan_result *ra = run_range(a, st, 0, 3, 0);
        tw_scan_result want = *ra;

        rt_env *b = pr_new((tw_semantics)sem, pr_kv);
        run_range(b, st, 0, 2, 0);
        rt_env *c = rt_clone_via_checkpoint(b, RULE, (tw_semantics)sem, pr_kv);
        /* The job checkpoints its aggregator windows apart from the rule:
         * rebuild them for the fresh env. */
        for (size_t k = 0; k < 2; k++) {
            tw_scan sc = stream_scan(st, k, 0);
            rt_feed_only(c, &sc);
        }
        assert_string_equal(rt_report_text(c), rt_report_text(b));
        const tw_scan_result *rc = run_range(c, st, 2, 3, 0);
        assert_int_equal(rc->condition_met, want.condition_met);
        assert_int_equal(rc->rule_triggered, want.rule_triggered);
        assert_int_equal(rc->violations, want.violations);
        assert_int_equal(rc->datapoints, want.datapoints);
        char *ta = strdup(rt_report_text(a));
        assert_non_null(ta);
        assert_string_equal(rt_report_text(c), ta);
        free(ta);
        assert_int_equal(tw_rule_get_status(c->rule),
                         tw_rule_get_status(a->rule));
        rt_env_free(a);
        rt_env_free(b);
        rt_env_free(c);
    }
    free(st);
}

/* A corrupt or truncated checkpoint is refused with a clear error. */
static void test_checkpoint_corrupt(void **state)
{
    (void)state;
    stream *st = stream_new(1, 0, 1);
    rt_env *a = pr_new(TW_SEMANTICS_FIXED, NULL);
    run_range(a, st, 0, 1, 0);
    tw_buf *buf = tw_buf_new();
    assert_non_null(buf);
    assert_int_equal(tw_rule_save(a->rule, buf), TW_OK);
    rt_env *c = pr_new(TW_SEMANTICS_FIXED, NULL);
    assert_int_equal(tw_rule_restore(c->rule, tw_buf_data(buf),
                                     tw_buf_len(buf) - 3, c->err,
                                     sizeof(c->err)),
                     TW_ERR);
    assert_non_null(strstr(c->err, "ProfilerReport"));
    tw_buf_free(buf);
    rt_env_free(a);
    rt_env_free(c);
    free(st);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equivalence_reference),
        cmocka_unit_test(test_equivalence_fixed),
        cmocka_unit_test(test_frozen_clock_max_init),
        cmocka_unit_test(test_frozen_clock_batch_size),
        cmocka_unit_test(test_override_reaches_subrule),
        cmocka_unit_test(test_param_specs_mirror_subrules),
        cmocka_unit_test(test_bad_overrides_rejected),
        cmocka_unit_test(test_failing_subrule),
        cmocka_unit_test(test_trigger_all),
        cmocka_unit_test(test_condition_and_status),
        cmocka_unit_test(test_checkpoint_equivalence),
        cmocka_unit_test(test_checkpoint_corrupt),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
