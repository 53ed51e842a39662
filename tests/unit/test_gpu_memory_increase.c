/* Unit tests of the GPUMemoryIncrease plugin (RULES.md §3.4): the worked
 * example in reference semantics with its exact diffs, the fixed-mode
 * windows and first-allocation gate, thresholds and patience at their
 * boundaries, CPU-only jobs, several nodes, the 1 000 000 reset,
 * checkpoint equivalence and parameter validation. */
#include "rule_test_util.h"

#define RULE "GPUMemoryIncrease"
#define MIN_US 60000000LL

/* One scan k of [k*60 s, (k+1)*60 s] (µs) over `n` samples. */
static const tw_scan_result *run_k(rt_env *e, rt_job *job, uint64_t k,
                                   const tw_sample *s, size_t n,
                                   const tw_fw_event *ev, size_t nev)
{
    tw_scan sc = rt_job_scan(job, k, (int64_t)k * MIN_US,
                             (int64_t)(k + 1) * MIN_US, s, n, ev, nev);
    return rt_run(e, &sc);
}

/* Samples of one series with values v[], stamped t0, t0+1, ... s. */
static void fill(tw_sample *out, uint32_t series, double t0, const double *v,
                 size_t n)
{
    for (size_t i = 0; i < n; i++)
        out[i] = rt_sample(t0 + (double)i, v[i], series);
}

static void test_worked_example_reference(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    const char *kv[] = {"increase", "5", "patience", "4", "window", "3", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_REFERENCE, kv), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t g0 =
        rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUMemoryUtilization");
    const double v[] = {10, 10, 10, 10, 30, 30, 30};
    tw_sample s[7];
    fill(s, g0, 1.0, v, 7);

    /* one sample per scan after the first four, to see each diff */
    const tw_scan_result *r = run_k(e, &job, 0, s, 5, NULL, 0);
    assert_int_equal(r->rule_triggered, 1);
    assert_true(r->condition_met);
    json_t *rep = rt_report(e);
    rt_assert_bits(rt_jnum(rep, "Details", "algo-1", "gpu0", "increase"),
                   6.666666666666668);
    json_decref(rep);

    r = run_k(e, &job, 1, s + 5, 1, NULL, 0);
    assert_int_equal(r->rule_triggered, 2);
    rep = rt_report(e);
    rt_assert_bits(rt_jnum(rep, "Details", "algo-1", "gpu0", "increase"),
                   13.333333333333332);
    json_decref(rep);

    r = run_k(e, &job, 2, s + 6, 1, NULL, 0);
    assert_int_equal(r->rule_triggered, 3);
    assert_int_equal(r->violations, 3);
    assert_int_equal(r->datapoints, 7);
    rep = rt_report(e);
    json_t *g = rt_jget(rep, "Details", "algo-1", "gpu0", NULL);
    char keys[256];
    assert_string_equal(rt_jkeys(g, keys, sizeof(keys)),
                        "increase,gpu_max,p05,p25,p50,p75,p95,upper,lower");
    rt_assert_bits(rt_jnum(g, "increase"), 10.0);
    rt_assert_bits(rt_jnum(g, "gpu_max"), 30.0);
    rt_assert_bits(rt_jnum(g, "p05"), 10.0);
    rt_assert_bits(rt_jnum(g, "p25"), 10.0);
    rt_assert_bits(rt_jnum(g, "p50"), 10.0);
    rt_assert_bits(rt_jnum(g, "p75"), 30.0);
    rt_assert_bits(rt_jnum(g, "p95"), 30.0);
    rt_assert_bits(rt_jnum(g, "upper"), 30.0);
    rt_assert_bits(rt_jnum(g, "lower"), 10.0);
    assert_int_equal((int64_t)rt_jnum(rep, "Details", "last_timestamp"),
                     2 * MIN_US);
    assert_string_equal(
        rt_jkeys(rt_jget(rep, "Details", NULL), keys, sizeof(keys)),
        "algo-1,last_timestamp");
    assert_string_equal(json_string_value(rt_jget(rep, "RuleParameters", NULL)),
                        "increase:5\npatience:4\nwindow:3");
    json_decref(rep);
    /* report key order and number format */
    const char *text = rt_report_text(e);
    assert_non_null(strstr(text, "{\"RuleTriggered\": 3, \"Violations\": 3, "
                                 "\"Details\": {\"algo-1\": {\"gpu0\": "
                                 "{\"increase\": 10.0, \"gpu_max\": 30.0"));
    assert_non_null(strstr(text, "\"Datapoints\": 7, \"RuleParameters\""));
    rt_env_free(e);
}

/* Same stream in fixed: prev = mean(v[-6:-3]) once two windows are full
 * (n >= 6): n=6 (23.33 - 10) and n=7 (30 - 10) trigger, n=5 does not
 * evaluate. */
static void test_worked_example_fixed_differs(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    const char *kv[] = {"increase", "5", "patience", "4", "window", "3", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t g0 =
        rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUMemoryUtilization");
    const double v[] = {10, 10, 10, 10, 30, 30, 30};
    tw_sample s[7];
    fill(s, g0, 1.0, v, 7);
    const tw_scan_result *r = run_k(e, &job, 0, s, 7, NULL, 0);
    assert_int_equal(r->rule_triggered, 2);
    assert_int_equal(r->datapoints, 7);
    json_t *rep = rt_report(e);
    rt_assert_bits(rt_jnum(rep, "Details", "algo-1", "gpu0", "increase"), 20.0);
    json_decref(rep);
    rt_env_free(e);
}

/* diff exactly equal to `increase` never triggers (strict >). */
static void test_threshold_boundary(void **state)
{
    (void)state;
    const double v[] = {10, 10, 10, 20}; /* window 2, n=4: 15 - 10 = 5 */
    const char *incs[] = {"5", "4.999"};
    for (int i = 0; i < 2; i++) {
        rt_env *e = rt_env_new();
        const char *kv[] = {"increase", incs[i], "patience", "0",
                            "window",   "2",     NULL};
        assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_REFERENCE, kv), TW_OK);
        rt_job job;
        rt_job_init(&job);
        uint32_t g0 = rt_job_series(&job, "algo-1", "gpu", "gpu0",
                                    "GPUMemoryUtilization");
        tw_sample s[4];
        fill(s, g0, 1.0, v, 4);
        const tw_scan_result *r = run_k(e, &job, 0, s, 4, NULL, 0);
        assert_int_equal(r->rule_triggered, i == 0 ? 0 : 1);
        rt_env_free(e);
    }
}

/* len(v) must be MORE than patience: n=4 triggers with patience 3 only. */
static void test_patience_boundary(void **state)
{
    (void)state;
    const double v[] = {10, 10, 10, 20};
    const char *pats[] = {"4", "3"};
    for (int sem = 0; sem < 2; sem++) {
        for (int i = 0; i < 2; i++) {
            rt_env *e = rt_env_new();
            const char *kv[] = {"increase", "4", "patience", pats[i],
                                "window",   "2", NULL};
            assert_int_equal(
                rt_create(e, RULE,
                          sem ? TW_SEMANTICS_REFERENCE : TW_SEMANTICS_FIXED,
                          kv),
                TW_OK);
            rt_job job;
            rt_job_init(&job);
            uint32_t g0 = rt_job_series(&job, "algo-1", "gpu", "gpu0",
                                        "GPUMemoryUtilization");
            tw_sample s[4];
            fill(s, g0, 1.0, v, 4);
            /* fixed: n=4 -> 15 - mean(10,10) = 5 > 4 as well */
            const tw_scan_result *r = run_k(e, &job, 0, s, 4, NULL, 0);
            assert_int_equal(r->rule_triggered, i == 0 ? 0 : 1);
            rt_env_free(e);
        }
    }
}

/* window <= 1 in reference: the "prev" slice is empty (NaN). */
static void test_small_window_reference_never(void **state)
{
    (void)state;
    const double v[] = {0, 0, 50, 100, 100, 100};
    for (int w = 0; w <= 1; w++) {
        rt_env *e = rt_env_new();
        const char *kv[] = {"increase", "0",           "patience", "0",
                            "window",   w ? "1" : "0", NULL};
        assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_REFERENCE, kv), TW_OK);
        rt_job job;
        rt_job_init(&job);
        uint32_t g0 = rt_job_series(&job, "algo-1", "gpu", "gpu0",
                                    "GPUMemoryUtilization");
        tw_sample s[6];
        fill(s, g0, 1.0, v, 6);
        const tw_scan_result *r = run_k(e, &job, 0, s, 6, NULL, 0);
        assert_int_equal(r->rule_triggered, 0);
        assert_int_equal(r->datapoints, 6);
        rt_env_free(e);
    }
}

static void test_cpu_only_job(void **state)
{
    (void)state;
    for (int sem = 0; sem < 2; sem++) {
        rt_env *e = rt_env_new();
        assert_int_equal(rt_create(e, RULE, (tw_semantics)sem, NULL), TW_OK);
        rt_job job;
        rt_job_init(&job);
        uint32_t c0 =
            rt_job_series(&job, "algo-1", "cpu", "cpu0", "CPUUtilization");
        tw_sample s[3] = {rt_sample(1, 10, c0), rt_sample(2, 90, c0),
                          rt_sample(3, 10, c0)};
        const tw_scan_result *r = run_k(e, &job, 0, s, 3, NULL, 0);
        assert_false(r->condition_met);
        assert_int_equal(r->datapoints, 0);
        assert_non_null(strstr(rt_report_text(e),
                               "{\"RuleTriggered\": 0, \"Violations\": 0, "
                               "\"Details\": {}, \"Datapoints\": 0, "
                               "\"RuleParameters\": \"increase:5\\n"
                               "patience:1000\\nwindow:10\"}"));
        rt_env_free(e);
    }
}

/* Details keys: first violating node, then last_timestamp, then nodes
 * that violate later; GPUs in order of first violation. */
static void test_multiple_nodes_order(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    const char *kv[] = {"increase", "1", "patience", "0", "window", "2", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_REFERENCE, kv), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t a0 =
        rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUMemoryUtilization");
    uint32_t a1 =
        rt_job_series(&job, "algo-1", "gpu", "gpu1", "GPUMemoryUtilization");
    uint32_t b0 =
        rt_job_series(&job, "algo-2", "gpu", "gpu0", "GPUMemoryUtilization");
    const double up[] = {10, 10, 10, 20};
    const double flat[] = {10, 10, 10, 10};
    tw_sample s[12];
    fill(s, a0, 1.0, flat, 4);   /* never */
    fill(s + 4, a1, 1.0, up, 4); /* violates */
    fill(s + 8, b0, 1.0, flat, 4);
    const tw_scan_result *r = run_k(e, &job, 0, s, 12, NULL, 0);
    assert_int_equal(r->rule_triggered, 1);
    fill(s, b0, 5.0, up + 1, 3); /* algo-2: 10,10,10,10,10,10,20 */
    s[2].value = 20;
    fill(s + 3, a0, 5.0, up + 1, 3);
    s[5].value = 20;
    r = run_k(e, &job, 1, s, 6, NULL, 0);
    assert_int_equal(r->rule_triggered, 3);
    assert_int_equal(r->datapoints, 7); /* last sample's series (algo-1 gpu0) */
    json_t *rep = rt_report(e);
    char keys[256];
    assert_string_equal(
        rt_jkeys(rt_jget(rep, "Details", NULL), keys, sizeof(keys)),
        "algo-1,last_timestamp,algo-2");
    assert_string_equal(
        rt_jkeys(rt_jget(rep, "Details", "algo-1", NULL), keys, sizeof(keys)),
        "gpu1,gpu0");
    assert_int_equal((int64_t)rt_jnum(rep, "Details", "last_timestamp"),
                     MIN_US);
    json_decref(rep);
    rt_env_free(e);
}

/* First-allocation false positive (quirk 6). Memory 0 until the model is
 * loaded at t=6, training (first step) starts at t=7.5. */
static void test_first_allocation(void **state)
{
    (void)state;
    const double v[] = {0, 0, 0, 0, 0, 50, 50, 50};
    tw_fw_event step =
        rt_event("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", "algo-1-0",
                 7500000, 7600000, TW_SOURCE_PYTHONTIMELINE);
    tw_fw_event early = step;
    early.start_us = 0;
    early.end_us = 100000;
    tw_fw_event other =
        rt_event("forward", "Forward-SubModuleInternal", "algo-1-0", 1000000,
                 1100000, TW_SOURCE_PYTHONTIMELINE);
    struct {
        tw_semantics sem;
        const tw_fw_event *ev;
        int64_t want;
    } cases[] = {
        {TW_SEMANTICS_REFERENCE, NULL, 2}, /* the jump at load counts */
        {TW_SEMANTICS_FIXED, NULL, 0},     /* patience from first non-zero */
        {TW_SEMANTICS_FIXED, &step, 1},    /* only t=8 is after the step */
        {TW_SEMANTICS_FIXED, &early, 3},   /* steps from the start: n=6,7,8 */
        {TW_SEMANTICS_FIXED, &other, 0},   /* framework events, no step yet */
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        rt_env *e = rt_env_new();
        const char *kv[] = {"increase", "5", "patience", "3",
                            "window",   "2", NULL};
        assert_int_equal(rt_create(e, RULE, cases[c].sem, kv), TW_OK);
        rt_job job;
        rt_job_init(&job);
        uint32_t g0 = rt_job_series(&job, "algo-1", "gpu", "gpu0",
                                    "GPUMemoryUtilization");
        tw_sample s[8];
        fill(s, g0, 1.0, v, 8);
        const tw_scan_result *r =
            run_k(e, &job, 0, s, 8, cases[c].ev, cases[c].ev ? 1 : 0);
        if (r->rule_triggered != cases[c].want)
            fail_msg("case %zu: %lld triggers, want %lld", c,
                     (long long)r->rule_triggered, (long long)cases[c].want);
        rt_env_free(e);
    }
}

/* The step gate also works when the step arrives in a later scan. */
static void test_step_in_later_scan(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    const char *kv[] = {"increase", "5", "patience", "3", "window", "2", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t g0 =
        rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUMemoryUtilization");
    tw_fw_event init =
        rt_event("DataLoaderIterInitialize", "DataLoaderIter", "algo-1-0",
                 1000000, 1100000, TW_SOURCE_PYTHONTIMELINE);
    const double v1[] = {0, 0, 0, 0, 0, 50, 50, 50};
    tw_sample s[8];
    fill(s, g0, 1.0, v1, 8);
    const tw_scan_result *r = run_k(e, &job, 0, s, 8, &init, 1);
    assert_int_equal(r->rule_triggered, 0);
    tw_fw_event step =
        rt_event("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", "algo-1-0",
                 61000000, 61100000, TW_SOURCE_PYTHONTIMELINE);
    const double v2[] = {80, 80};
    fill(s, g0, 62.0, v2, 2); /* n=9: cur 65, prev 50 -> 15; n=10: 30 */
    r = run_k(e, &job, 1, s, 2, &step, 1);
    assert_int_equal(r->rule_triggered, 2);
    rt_env_free(e);
}

/* Reset at 1 000 000 values (quirk 3, fixed in both modes): the series
 * starts again with the current sample. */
static void test_reset_at_one_million(void **state)
{
    (void)state;
    for (int sem = 0; sem < 2; sem++) {
        rt_env *e = rt_env_new();
        const char *kv[] = {"increase", "5", "patience", "0",
                            "window",   "2", NULL};
        assert_int_equal(rt_create(e, RULE, (tw_semantics)sem, kv), TW_OK);
        rt_job job;
        rt_job_init(&job);
        uint32_t g0 = rt_job_series(&job, "algo-1", "gpu", "gpu0",
                                    "GPUMemoryUtilization");
        uint32_t g1 = rt_job_series(&job, "algo-1", "gpu", "gpu1",
                                    "GPUMemoryUtilization");
        size_t n = 1000001;
        tw_sample *s = malloc((n + 1) * sizeof(*s));
        assert_non_null(s);
        s[0] = rt_sample(0.5, 7, g1);
        for (size_t i = 0; i < n; i++)
            s[i + 1] = rt_sample(1.0 + (double)i * 1e-5, 40, g0);
        const tw_scan_result *r = run_k(e, &job, 0, s, n + 1, NULL, 0);
        assert_int_equal(r->datapoints, 1);
        assert_int_equal(r->rule_triggered, 0);
        /* both series were cleared: a new jump needs fresh history */
        tw_sample t[3] = {rt_sample(61, 40, g0), rt_sample(62, 40, g0),
                          rt_sample(63, 90, g0)};
        r = run_k(e, &job, 1, t, 3, NULL, 0);
        assert_int_equal(r->datapoints, 4);
        assert_int_equal(r->rule_triggered, 1);
        json_t *rep = rt_report(e);
        rt_assert_bits(rt_jnum(rep, "Details", "algo-1", "gpu0", "gpu_max"),
                       90.0);
        rt_assert_bits(rt_jnum(rep, "Details", "algo-1", "gpu0", "lower"),
                       40.0);
        json_decref(rep);
        free(s);
        rt_env_free(e);
    }
}

/* save -> restore into a fresh instance -> continue == uninterrupted. */
static void test_checkpoint_equivalence(void **state)
{
    (void)state;
    for (int sem = 0; sem < 2; sem++) {
        const char *kv[] = {"increase", "2", "patience", "3",
                            "window",   "3", NULL};
        rt_env *a = rt_env_new();
        assert_int_equal(rt_create(a, RULE, (tw_semantics)sem, kv), TW_OK);
        rt_job job;
        rt_job_init(&job);
        uint32_t g0 = rt_job_series(&job, "algo-1", "gpu", "gpu0",
                                    "GPUMemoryUtilization");
        uint32_t g1 = rt_job_series(&job, "algo-2", "gpu", "gpu1",
                                    "GPUMemoryUtilization");
        tw_fw_event step =
            rt_event("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", "algo-1-0",
                     2000000, 2100000, TW_SOURCE_PYTHONTIMELINE);
        tw_sample s1[16], s2[16];
        for (int i = 0; i < 16; i++) {
            s1[i] = rt_sample(1 + i, (i % 5) * 7.25 + i, i % 2 ? g0 : g1);
            s2[i] = rt_sample(61 + i, (i % 3) * 11.5 + 2 * i, i % 2 ? g1 : g0);
        }
        run_k(a, &job, 0, s1, 16, &step, 1);
        rt_env *b = rt_clone_via_checkpoint(a, RULE, (tw_semantics)sem, kv);
        const tw_scan_result *ra = run_k(a, &job, 1, s2, 16, NULL, 0);
        const tw_scan_result *rb = run_k(b, &job, 1, s2, 16, NULL, 0);
        assert_true(ra->rule_triggered > 0);
        assert_int_equal(ra->rule_triggered, rb->rule_triggered);
        assert_int_equal(ra->datapoints, rb->datapoints);
        char *ta = strdup(rt_report_text(a));
        assert_non_null(ta);
        assert_string_equal(ta, rt_report_text(b));
        free(ta);
        rt_env_free(a);
        rt_env_free(b);
    }
}

static void test_bad_parameters(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    const char *kv1[] = {"window", "-1", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv1), TW_ERR);
    assert_non_null(strstr(e->err, "window"));
    const char *kv2[] = {"increase", "lots", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv2), TW_ERR);
    assert_non_null(strstr(e->err, "increase"));
    const char *kv3[] = {"scan_interval_us", "60000000", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv3), TW_ERR);
    rt_env_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worked_example_reference),
        cmocka_unit_test(test_worked_example_fixed_differs),
        cmocka_unit_test(test_threshold_boundary),
        cmocka_unit_test(test_patience_boundary),
        cmocka_unit_test(test_small_window_reference_never),
        cmocka_unit_test(test_cpu_only_job),
        cmocka_unit_test(test_multiple_nodes_order),
        cmocka_unit_test(test_first_allocation),
        cmocka_unit_test(test_step_in_later_scan),
        cmocka_unit_test(test_reset_at_one_million),
        cmocka_unit_test(test_checkpoint_equivalence),
        cmocka_unit_test(test_bad_parameters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
