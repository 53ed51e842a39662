/* Unit tests of the LoadBalancing plugin (RULES.md §3.7): the 49-bin
 * workloads (values above 98 invisible), the reference never triggering
 * (even with threshold 0), the fixed pairwise Jensen-Shannon comparison
 * (fires for very different GPUs, not for similar ones, strict threshold,
 * patience, per node), CPU-only jobs, checkpoint equivalence and
 * parameter validation. */
#include <math.h>

#include "rule_test_util.h"

#define RULE "LoadBalancing"
#define MIN_US 60000000LL

static const tw_scan_result *run_scan(rt_env *e, const rt_job *job, uint64_t k,
                                      tw_sample *s, size_t n)
{
    tw_scan sc = rt_job_scan(job, k, (int64_t)k * MIN_US,
                             (int64_t)(k + 1) * MIN_US, s, n, NULL, 0);
    return rt_run(e, &sc);
}

/* n samples for each of two series: a at va, b at vb. */
static size_t two_gpus(tw_sample *s, uint32_t a, double va, uint32_t b,
                       double vb, size_t n, double t0)
{
    for (size_t i = 0; i < n; i++) {
        s[2 * i] = rt_sample(t0 + (double)i, va, a);
        s[2 * i + 1] = rt_sample(t0 + (double)i, vb, b);
    }
    return 2 * n;
}

static void test_reference_never_triggers(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    const char *kv[] = {"init_grace", "0", "threshold", "0",
                        "patience",   "0", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_REFERENCE, kv), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t g0 =
        rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
    uint32_t g1 =
        rt_job_series(&job, "algo-1", "gpu", "gpu1", "GPUUtilization");
    tw_sample s[16];
    size_t n = two_gpus(s, g0, 1.0, g1, 97.0, 4, 1.0);
    s[n++] = rt_sample(9, 98.0, g0);  /* last bin is closed */
    s[n++] = rt_sample(9, 99.0, g0);  /* invisible */
    s[n++] = rt_sample(9, 100.0, g0); /* invisible */
    s[n++] = rt_sample(9, -1.0, g0);  /* invisible */
    s[n++] = rt_sample(9, 2.0, g1);   /* left edge belongs to bin 1 */
    const tw_scan_result *r = run_scan(e, &job, 0, s, n);
    assert_int_equal(r->rule_triggered, 0);
    assert_int_equal(r->violations, 0);
    assert_false(r->condition_met);
    assert_int_equal(r->datapoints, 5); /* gpu1, the last sample's series */
    json_t *rep = rt_report(e);
    json_t *w0 = rt_jget(rep, "Details", "algo-1", "workloads", "gpu0", NULL);
    json_t *w1 = rt_jget(rep, "Details", "algo-1", "workloads", "gpu1", NULL);
    assert_int_equal(json_array_size(w0), 49);
    assert_int_equal(json_integer_value(json_array_get(w0, 0)), 4);
    assert_int_equal(json_integer_value(json_array_get(w0, 48)), 1);
    assert_int_equal(json_integer_value(json_array_get(w1, 48)), 4);
    assert_int_equal(json_integer_value(json_array_get(w1, 1)), 1);
    char keys[128];
    assert_string_equal(
        rt_jkeys(rt_jget(rep, "Details", "algo-1", NULL), keys, sizeof(keys)),
        "workloads");
    assert_string_equal(json_string_value(rt_jget(rep, "RuleParameters", NULL)),
                        "threshold:0\npatience:0");
    json_decref(rep);
    assert_non_null(strstr(rt_report_text(e),
                           "\"gpu0\": [4, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, "));
    rt_env_free(e);
}

static void test_fixed_fires_for_different_gpus(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    const char *kv[] = {"init_grace", "0", "threshold", "0.5",
                        "patience",   "3", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t g0 =
        rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
    uint32_t g1 =
        rt_job_series(&job, "algo-1", "gpu", "gpu1", "GPUUtilization");
    tw_sample s[16];
    size_t n = two_gpus(s, g0, 1.0, g1, 97.0, 4, 1.0);
    const tw_scan_result *r = run_scan(e, &job, 0, s, n);
    assert_int_equal(r->rule_triggered, 1);
    assert_true(r->condition_met);
    json_t *rep = rt_report(e);
    /* disjoint histograms: sqrt(ln 2) */
    rt_assert_bits(
        rt_jnum(rep, "Details", "algo-1", "distances", "gpu0", "gpu1"),
        sqrt(log(2.0)));
    char keys[128];
    assert_string_equal(
        rt_jkeys(rt_jget(rep, "Details", "algo-1", NULL), keys, sizeof(keys)),
        "workloads,distances");
    json_decref(rep);
    /* counted once per scan while the imbalance lasts */
    n = two_gpus(s, g0, 1.0, g1, 97.0, 1, 61.0);
    r = run_scan(e, &job, 1, s, n);
    assert_int_equal(r->rule_triggered, 2);
    assert_int_equal(r->violations, 2);
    rt_env_free(e);
}

static void test_fixed_quiet_for_similar_gpus(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    const char *kv[] = {"init_grace", "0", "threshold", "0.2",
                        "patience",   "0", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t g0 =
        rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
    uint32_t g1 =
        rt_job_series(&job, "algo-1", "gpu", "gpu1", "GPUUtilization");
    tw_sample s[64];
    size_t n = 0;
    for (int i = 0; i < 30; i++) {
        s[n++] = rt_sample(1 + i, 80 + (i % 5), g0);
        s[n++] = rt_sample(1 + i, 80 + ((i + 1) % 5), g1);
    }
    const tw_scan_result *r = run_scan(e, &job, 0, s, n);
    assert_int_equal(r->rule_triggered, 0);
    json_t *rep = rt_report(e);
    assert_null(rt_jget(rep, "Details", "algo-1", "distances", NULL));
    json_decref(rep);
    rt_env_free(e);
}

/* distance == threshold is not "above". */
static void test_threshold_boundary(void **state)
{
    (void)state;
    char exact[64], below[64];
    snprintf(exact, sizeof(exact), "%.17g", sqrt(log(2.0)));
    snprintf(below, sizeof(below), "%.17g", nextafter(sqrt(log(2.0)), 0.0));
    const char *vals[2] = {exact, below};
    for (int i = 0; i < 2; i++) {
        rt_env *e = rt_env_new();
        const char *kv[] = {"init_grace", "0", "threshold", vals[i],
                            "patience",   "0", NULL};
        assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv), TW_OK);
        rt_job job;
        rt_job_init(&job);
        uint32_t g0 =
            rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
        uint32_t g1 =
            rt_job_series(&job, "algo-1", "gpu", "gpu1", "GPUUtilization");
        tw_sample s[8];
        size_t n = two_gpus(s, g0, 10.0, g1, 50.0, 3, 1.0);
        const tw_scan_result *r = run_scan(e, &job, 0, s, n);
        assert_int_equal(r->rule_triggered, i == 0 ? 0 : 1);
        rt_env_free(e);
    }
}

/* g1's series must have more than `patience` values. */
static void test_patience_boundary(void **state)
{
    (void)state;
    const char *pats[2] = {"4", "3"};
    for (int i = 0; i < 2; i++) {
        rt_env *e = rt_env_new();
        const char *kv[] = {"init_grace", "0",     "threshold", "0.1",
                            "patience",   pats[i], NULL};
        assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv), TW_OK);
        rt_job job;
        rt_job_init(&job);
        uint32_t g0 =
            rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
        uint32_t g1 =
            rt_job_series(&job, "algo-1", "gpu", "gpu1", "GPUUtilization");
        tw_sample s[8];
        size_t n = two_gpus(s, g0, 10.0, g1, 50.0, 4, 1.0);
        const tw_scan_result *r = run_scan(e, &job, 0, s, n);
        assert_int_equal(r->rule_triggered, i == 0 ? 0 : 1);
        rt_env_free(e);
    }
}

/* Pairs are formed within a node only; nodes keep first-seen order. */
static void test_multiple_nodes(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    const char *kv[] = {"init_grace", "0", "threshold", "0.2",
                        "patience",   "0", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t b0 =
        rt_job_series(&job, "algo-2", "gpu", "gpu0", "GPUUtilization");
    uint32_t a0 =
        rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
    uint32_t a1 =
        rt_job_series(&job, "algo-1", "gpu", "gpu1", "GPUUtilization");
    uint32_t a2 =
        rt_job_series(&job, "algo-1", "gpu", "gpu2", "GPUUtilization");
    tw_sample s[32];
    size_t n = 0;
    for (int i = 0; i < 3; i++) {
        s[n++] = rt_sample(1 + i, 90, b0); /* alone on its node */
        s[n++] = rt_sample(1 + i, 10, a0);
        s[n++] = rt_sample(1 + i, 11, a1); /* same bin as gpu0 */
        s[n++] = rt_sample(1 + i, 90, a2);
    }
    const tw_scan_result *r = run_scan(e, &job, 0, s, n);
    assert_int_equal(r->rule_triggered, 2); /* (gpu0,gpu2), (gpu1,gpu2) */
    json_t *rep = rt_report(e);
    char keys[128];
    assert_string_equal(
        rt_jkeys(rt_jget(rep, "Details", NULL), keys, sizeof(keys)),
        "algo-2,algo-1");
    assert_string_equal(
        rt_jkeys(rt_jget(rep, "Details", "algo-1", "distances", NULL), keys,
                 sizeof(keys)),
        "gpu0,gpu1");
    assert_null(rt_jget(rep, "Details", "algo-2", "distances", NULL));
    assert_null(
        rt_jget(rep, "Details", "algo-1", "distances", "gpu0", "gpu1", NULL));
    json_decref(rep);
    rt_env_free(e);
}

/* All samples above 98: empty histograms give NaN, never a violation. */
static void test_invisible_gpus_nan(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    const char *kv[] = {"init_grace", "0", "threshold", "0",
                        "patience",   "0", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t g0 =
        rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
    uint32_t g1 =
        rt_job_series(&job, "algo-1", "gpu", "gpu1", "GPUUtilization");
    tw_sample s[8];
    size_t n = two_gpus(s, g0, 100.0, g1, 10.0, 3, 1.0);
    const tw_scan_result *r = run_scan(e, &job, 0, s, n);
    assert_int_equal(r->rule_triggered, 0);
    rt_env_free(e);
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
        tw_sample s[2] = {rt_sample(1, 5, c0), rt_sample(2, 95, c0)};
        const tw_scan_result *r = run_scan(e, &job, 0, s, 2);
        assert_int_equal(r->rule_triggered, 0);
        assert_int_equal(r->datapoints, 0);
        assert_non_null(strstr(rt_report_text(e),
                               "\"Details\": {}, \"Datapoints\": 0, "
                               "\"RuleParameters\": \"threshold:0.2\\n"
                               "patience:1000\"}"));
        rt_env_free(e);
    }
}

static void test_checkpoint_equivalence(void **state)
{
    (void)state;
    for (int sem = 0; sem < 2; sem++) {
        const char *kv[] = {"init_grace", "0", "threshold", "0.3",
                            "patience",   "2", NULL};
        rt_env *a = rt_env_new();
        assert_int_equal(rt_create(a, RULE, (tw_semantics)sem, kv), TW_OK);
        rt_job job;
        rt_job_init(&job);
        uint32_t g0 =
            rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
        uint32_t g1 =
            rt_job_series(&job, "algo-1", "gpu", "gpu1", "GPUUtilization");
        tw_sample s1[16], s2[16];
        size_t n1 = two_gpus(s1, g0, 12.5, g1, 13.0, 4, 1.0);
        size_t n2 = two_gpus(s2, g0, 20.0, g1, 77.0, 6, 61.0);
        run_scan(a, &job, 0, s1, n1);
        rt_env *c = rt_clone_via_checkpoint(a, RULE, (tw_semantics)sem, kv);
        const tw_scan_result *ra = run_scan(a, &job, 1, s2, n2);
        const tw_scan_result *rc = run_scan(c, &job, 1, s2, n2);
        assert_int_equal(ra->rule_triggered, sem ? 0 : 1);
        assert_int_equal(ra->rule_triggered, rc->rule_triggered);
        assert_int_equal(ra->datapoints, rc->datapoints);
        char *ta = strdup(rt_report_text(a));
        assert_non_null(ta);
        assert_string_equal(ta, rt_report_text(c));
        free(ta);
        rt_env_free(a);
        rt_env_free(c);
    }
}

static void test_bad_parameters(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    const char *kv1[] = {"threshold", "1.5", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv1), TW_ERR);
    assert_non_null(strstr(e->err, "threshold"));
    const char *kv2[] = {"patience", "-3", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv2), TW_ERR);
    assert_non_null(strstr(e->err, "patience"));
    rt_env_free(e);
}

/* Phases (fixed): during the initialization gpu0 idles at 1 while gpu1
 * loads at 97 (very different); from the first step on both run at 90.
 * fixed judges only the samples from the first step on: balanced. With
 * the first step before every sample, the same data is imbalanced. */
static const tw_scan_result *run_steps(rt_env *e, rt_job *job, int64_t step_us,
                                       int64_t end_us)
{
    const char *kv[] = {"threshold", "0.2", "patience", "0", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv), TW_OK);
    uint32_t g0 = rt_job_series(job, "algo-1", "gpu", "gpu0", "GPUUtilization");
    uint32_t g1 = rt_job_series(job, "algo-1", "gpu", "gpu1", "GPUUtilization");
    tw_sample s[16];
    size_t n = two_gpus(s, g0, 1.0, g1, 97.0, 4, 1.0); /* 1-4 s */
    n += two_gpus(s + n, g0, 90.0, g1, 90.0, 4, 10.0); /* 10-13 s */
    tw_fw_event ev =
        rt_event("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", "algo-1",
                 step_us, end_us, TW_SOURCE_PYTHONTIMELINE);
    tw_scan sc = rt_job_scan(job, 0, 0, MIN_US, s, n, &ev, 1);
    return rt_run(e, &sc);
}

/* The training runs until 14 s (one long step): no finalization. */
static const tw_scan_result *run_init(rt_env *e, rt_job *job, int64_t step_us)
{
    return run_steps(e, job, step_us, 14000000);
}

static void test_fixed_skips_initialization(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    rt_job job;
    rt_job_init(&job);
    const tw_scan_result *r = run_init(e, &job, 9000000); /* step at 9 s */
    assert_false(r->condition_met);
    assert_int_equal(r->datapoints, 4);
    rt_env_free(e);

    e = rt_env_new();
    rt_job_init(&job);
    r = run_init(e, &job, 500000); /* step at 0.5 s: nothing is init */
    assert_true(r->condition_met);
    assert_int_equal(r->datapoints, 8);
    rt_env_free(e);
}

/* The last step ends at 0.6 s: the samples of 11-13 s lie more than 10 s
 * after it, in the finalization, and are not taken in; those of 1-4 s
 * (imbalanced) and 10 s (within the gap) are. */
static void test_fixed_skips_finalization(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    rt_job job;
    rt_job_init(&job);
    const tw_scan_result *r = run_steps(e, &job, 500000, 600000);
    assert_true(r->condition_met);
    assert_int_equal(r->datapoints, 5);
    rt_env_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fixed_skips_initialization),
        cmocka_unit_test(test_fixed_skips_finalization),
        cmocka_unit_test(test_reference_never_triggers),
        cmocka_unit_test(test_fixed_fires_for_different_gpus),
        cmocka_unit_test(test_fixed_quiet_for_similar_gpus),
        cmocka_unit_test(test_threshold_boundary),
        cmocka_unit_test(test_patience_boundary),
        cmocka_unit_test(test_multiple_nodes),
        cmocka_unit_test(test_invisible_gpus_nan),
        cmocka_unit_test(test_cpu_only_job),
        cmocka_unit_test(test_checkpoint_equivalence),
        cmocka_unit_test(test_bad_parameters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
