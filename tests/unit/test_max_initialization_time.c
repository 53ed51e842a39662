/* Unit tests of the MaxInitializationTime rule (RULES.md §3.8): the
 * reference test's threshold 0 case (two triggers in three scans), the
 * frozen ProfilerReport clock in reference vs fixed semantics, the strict
 * threshold comparison, step markers, checkpoints and parameters. */
#include "rule_test_util.h"

#define F 1596668220000000LL
#define S 60000000LL

typedef struct mit_job {
    rt_job job;
    uint32_t cpu;
} mit_job;

static void mj_init(mit_job *m)
{
    rt_job_init(&m->job);
    m->cpu = rt_job_series(&m->job, "algo-1", "cpu", "cpu0", "CPUUtilization");
}

/* Scan k with the given samples/events; `frozen` = clock stays at F. */
static const tw_scan_result *mj_run(rt_env *e, mit_job *m, uint64_t k,
                                    const tw_sample *smp, size_t ns,
                                    const tw_fw_event *ev, size_t ne,
                                    int frozen)
{
    tw_scan sc = rt_job_scan(&m->job, k, F + (int64_t)k * S,
                             F + (int64_t)(k + 1) * S, smp, ns, ev, ne);
    sc.first_timestamp_us = F;
    sc.rule_clock_us = frozen ? F : sc.start_us;
    return rt_run(e, &sc);
}

static void test_threshold_zero_triggers_twice(void **state)
{
    (void)state;
    mit_job m;
    mj_init(&m);
    tw_sample s0[] = {rt_sample(1596668240.3562295, 3, m.cpu)};
    tw_sample s2[] = {rt_sample(1596668399.9164186, 5, m.cpu)};
    for (int sem = 0; sem < 2; sem++) {
        rt_env *e = rt_env_new();
        const char *kv[] = {"threshold", "0", NULL};
        assert_int_equal(
            rt_create(e, "MaxInitializationTime", (tw_semantics)sem, kv),
            TW_OK);
        int met = 0;
        met += mj_run(e, &m, 0, s0, 1, NULL, 0, 0)->condition_met;
        met += mj_run(e, &m, 1, NULL, 0, NULL, 0, 0)->condition_met;
        const tw_scan_result *r = mj_run(e, &m, 2, s2, 1, NULL, 0, 0);
        met += r->condition_met;
        assert_int_equal(met, 2);
        assert_int_equal(r->rule_triggered, 2);
        assert_int_equal(r->violations, 2);
        assert_int_equal(r->datapoints, 0);
        const char *text = rt_report_text(e);
        assert_string_equal(
            text, "{\"RuleTriggered\": 2, \"Violations\": 2, \"Details\": "
                  "{\"step_num\": {}, \"job_start\": 1596668240.3562295, "
                  "\"job_end\": 1596668399.9164186}, \"Datapoints\": 0, "
                  "\"RuleParameters\": \"threshold:0\"}");
        rt_env_free(e);
    }
}

/* Under ProfilerReport the clock stays at F: reference never fires, fixed
 * uses the scan start. */
static void test_frozen_clock_reference_vs_fixed(void **state)
{
    (void)state;
    mit_job m;
    mj_init(&m);
    const char *kv[] = {"threshold", "0", NULL};
    rt_env *e = rt_env_new();
    assert_int_equal(
        rt_create(e, "MaxInitializationTime", TW_SEMANTICS_REFERENCE, kv),
        TW_OK);
    for (uint64_t k = 0; k < 3; k++)
        assert_false(mj_run(e, &m, k, NULL, 0, NULL, 0, 1)->condition_met);
    assert_int_equal(tw_rule_last_result(e->rule)->rule_triggered, 0);
    rt_env_free(e);

    e = rt_env_new();
    assert_int_equal(
        rt_create(e, "MaxInitializationTime", TW_SEMANTICS_FIXED, kv), TW_OK);
    int met = 0;
    for (uint64_t k = 0; k < 3; k++)
        met += mj_run(e, &m, k, NULL, 0, NULL, 0, 1)->condition_met;
    assert_int_equal(met, 2);
    rt_env_free(e);
}

/* Elapsed exactly threshold minutes is not a violation (strict). */
static void test_threshold_strict(void **state)
{
    (void)state;
    mit_job m;
    mj_init(&m);
    rt_env *e = rt_env_new();
    const char *kv[] = {"threshold", "2", NULL};
    assert_int_equal(
        rt_create(e, "MaxInitializationTime", TW_SEMANTICS_REFERENCE, kv),
        TW_OK);
    assert_false(mj_run(e, &m, 0, NULL, 0, NULL, 0, 0)->condition_met);
    assert_false(mj_run(e, &m, 1, NULL, 0, NULL, 0, 0)->condition_met);
    assert_false(
        mj_run(e, &m, 2, NULL, 0, NULL, 0, 0)->condition_met); /* = 2 min */
    assert_true(mj_run(e, &m, 3, NULL, 0, NULL, 0, 0)->condition_met);
    /* Fractional minutes print as Python floats. */
    const char *kv2[] = {"threshold", "0.5", NULL};
    assert_int_equal(
        rt_create(e, "MaxInitializationTime", TW_SEMANTICS_REFERENCE, kv2),
        TW_OK);
    assert_non_null(
        strstr(rt_report_text(e), "\"RuleParameters\": \"threshold:0.5\""));
    assert_true(mj_run(e, &m, 1, NULL, 0, NULL, 0, 0)->condition_met);
    rt_env_free(e);
}

/* A step (with or without step_num) stops the rule; first/last follow
 * processing order, not time. */
static void test_steps_first_last(void **state)
{
    (void)state;
    mit_job m;
    mj_init(&m);
    tw_fw_event ev[3];
    ev[0] = rt_event("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", "algo-1-0",
                     F + 5000000, F + 6000000, TW_SOURCE_PYTHONTIMELINE);
    ev[1] = rt_event("Step:ModeKeys.EVAL", "Step:ModeKeys.EVAL", "algo-1-0",
                     F + 9000000, F + 9500000, TW_SOURCE_PYTHONTIMELINE);
    ev[2] = rt_event("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", "algo-2-0",
                     F + 7000000, F + 8000000, TW_SOURCE_PYTHONTIMELINE);
    tw_fw_event other = rt_event("conv", "cpu_functions", "algo-1-0", F, F + 10,
                                 TW_SOURCE_PYTHONTIMELINE);
    rt_env *e = rt_env_new();
    const char *kv[] = {"threshold", "0", NULL};
    assert_int_equal(
        rt_create(e, "MaxInitializationTime", TW_SEMANTICS_FIXED, kv), TW_OK);
    assert_false(mj_run(e, &m, 0, NULL, 0, &other, 1, 0)->condition_met);
    const tw_scan_result *r = mj_run(e, &m, 1, NULL, 0, ev, 3, 0);
    assert_false(r->condition_met);
    assert_int_equal(r->datapoints, 3);
    assert_false(mj_run(e, &m, 2, NULL, 0, NULL, 0, 0)->condition_met);
    json_t *rep = rt_report(e);
    assert_int_equal(
        json_integer_value(rt_jget(rep, "Details", "step_num", "first", NULL)),
        F + 5000000);
    assert_int_equal(
        json_integer_value(rt_jget(rep, "Details", "step_num", "last", NULL)),
        F + 7000000);
    assert_null(rt_jget(rep, "Details", "job_start", NULL));
    json_decref(rep);
    rt_env_free(e);
}

static void test_checkpoint_equivalence(void **state)
{
    (void)state;
    mit_job m;
    mj_init(&m);
    tw_sample s0[] = {rt_sample(1596668240.5, 3, m.cpu)};
    tw_sample s1[] = {rt_sample(1596668290.25, 3, m.cpu)};
    tw_fw_event ev =
        rt_event("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", "a",
                 F + 3 * S + 5, F + 3 * S + 9, TW_SOURCE_PYTHONTIMELINE);
    const char *kv[] = {"threshold", "0", NULL};
    for (int sem = 0; sem < 2; sem++) {
        rt_env *a = rt_env_new();
        assert_int_equal(
            rt_create(a, "MaxInitializationTime", (tw_semantics)sem, kv),
            TW_OK);
        mj_run(a, &m, 0, s0, 1, NULL, 0, 0);
        mj_run(a, &m, 1, NULL, 0, NULL, 0, 0);
        rt_env *b = rt_clone_via_checkpoint(a, "MaxInitializationTime",
                                            (tw_semantics)sem, kv);
        for (uint64_t k = 2; k < 5; k++) {
            mj_run(a, &m, k, s1, 1, k == 3 ? &ev : NULL, k == 3, 0);
            mj_run(b, &m, k, s1, 1, k == 3 ? &ev : NULL, k == 3, 0);
        }
        char *ta = strdup(rt_report_text(a));
        assert_string_equal(ta, rt_report_text(b));
        assert_non_null(strstr(ta, "\"RuleTriggered\": 2"));
        free(ta);
        char err[128];
        assert_int_equal(tw_rule_restore(b->rule, "xx", 2, err, sizeof(err)),
                         TW_ERR);
        rt_env_free(a);
        rt_env_free(b);
    }
}

static void test_bad_parameters(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    const char *neg[] = {"threshold", "-1", NULL};
    assert_int_equal(
        rt_create(e, "MaxInitializationTime", TW_SEMANTICS_FIXED, neg), TW_ERR);
    assert_non_null(strstr(e->err, "threshold"));
    const char *txt[] = {"threshold", "soon", NULL};
    assert_int_equal(
        rt_create(e, "MaxInitializationTime", TW_SEMANTICS_FIXED, txt), TW_ERR);
    const char *unk[] = {"patience", "3", NULL};
    assert_int_equal(
        rt_create(e, "MaxInitializationTime", TW_SEMANTICS_FIXED, unk), TW_ERR);
    assert_int_equal(
        rt_create(e, "MaxInitializationTime", TW_SEMANTICS_FIXED, NULL), TW_OK);
    assert_non_null(
        strstr(rt_report_text(e), "\"Details\": {\"step_num\": {}}"));
    assert_non_null(strstr(rt_report_text(e), "\"threshold:20\""));
    rt_env_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_threshold_zero_triggers_twice),
        cmocka_unit_test(test_frozen_clock_reference_vs_fixed),
        cmocka_unit_test(test_threshold_strict),
        cmocka_unit_test(test_steps_first_last),
        cmocka_unit_test(test_checkpoint_equivalence),
        cmocka_unit_test(test_bad_parameters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
