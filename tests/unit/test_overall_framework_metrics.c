/* Unit tests of the OverallFrameworkMetrics rule (RULES.md §3.11): the
 * worked example with its exact numbers, the "others" formula in reference
 * vs fixed semantics, step events without step_num, Details key order over
 * scans, checkpoints and parameters. */
#include "rule_test_util.h"

#define B 1596668220000000LL

static tw_arg step0 = {"step_num", "0", TW_ARG_STRING};
static tw_arg step1 = {"step_num", "1", TW_ARG_STRING};
static tw_arg step2 = {"step_num", "2", TW_ARG_STRING};

static tw_fw_event ev_with(const char *name, const char *phase, double s,
                           double e, tw_source src, tw_arg *arg)
{
    tw_fw_event x =
        rt_event(name, phase, "algo-1-0", B + (int64_t)(s * 1e6 + 0.5),
                 B + (int64_t)(e * 1e6 + 0.5), src);
    if (arg) {
        x.args = arg;
        x.nargs = 1;
    }
    return x;
}

#define TRAIN "Step:ModeKeys.TRAIN"
#define PY TW_SOURCE_PYTHONTIMELINE

static size_t worked_events(tw_fw_event *ev)
{
    size_t n = 0;
    ev[n++] = ev_with(TRAIN, TRAIN, 1.0, 1.4, PY, &step0);
    ev[n++] = ev_with(TRAIN, TRAIN, 1.5, 1.9, PY, &step1);
    ev[n++] = ev_with("aten::conv2d", "cpu_functions", 1.0, 1.1, PY, NULL);
    ev[n++] = ev_with("aten::relu", "cpu_functions", 1.1, 1.101, PY, NULL);
    ev[n++] = ev_with("volta_gemm", "gpu_functions-dev:0", 1.0, 1.3, PY, NULL);
    ev[n++] =
        ev_with("layer1", "Forward-SubModuleInternal", 1.0, 1.1, PY, NULL);
    ev[n++] =
        ev_with("layer1", "Backward-SubModuleInternal", 1.1, 1.4, PY, NULL);
    ev[n++] = ev_with("DataLoaderIter", "DataLoaderIter", 1.0, 1.05, PY, NULL);
    ev[n++] =
        ev_with("allreduce", "ALLREDUCE", 1.2, 1.26, TW_SOURCE_HOROVOD, NULL);
    ev[n++] =
        ev_with("negotiate", "NEGOTIATE", 1.3, 1.301, TW_SOURCE_HOROVOD, NULL);
    return n;
}

static const tw_scan_result *run(rt_env *e, rt_job *job, uint64_t k,
                                 const tw_fw_event *ev, size_t n)
{
    tw_scan sc = rt_job_scan(job, k, B + (int64_t)k * 60000000,
                             B + (int64_t)(k + 1) * 60000000, NULL, 0, ev, n);
    return rt_run(e, &sc);
}

static void test_worked_example(void **state)
{
    (void)state;
    tw_fw_event ev[16];
    size_t n = worked_events(ev);
    for (int sem = 0; sem < 2; sem++) {
        rt_env *e = rt_env_new();
        assert_int_equal(
            rt_create(e, "OverallFrameworkMetrics", (tw_semantics)sem, NULL),
            TW_OK);
        rt_job job;
        rt_job_init(&job);
        const tw_scan_result *r = run(e, &job, 0, ev, n);
        assert_false(r->condition_met);
        assert_int_equal(r->datapoints, 0);
        assert_int_equal(r->rule_triggered, 0);
        const char *text = rt_report_text(e);
        assert_string_equal(
            text, "{\"RuleTriggered\": 0, \"Violations\": 0, \"Details\": {"
                  "\"ratio\": {\"gpu_functions-dev:0\": 74.81296758104739, "
                  "\"cpu_functions\": 25.187032418952622}, "
                  "\"CPU\": {\"aten::conv2d\": 100.0}, "
                  "\"CPU_total\": {\"aten::conv2d\": 100000}, "
                  "\"GPU\": {\"volta_gemm\": 100.0}, "
                  "\"GPU_total\": {\"volta_gemm\": 300000}, "
                  "\"phase\": {\"Step:ModeKeys.TRAIN\": 88.88888888888889, "
                  "\"others\": 11.11111111111111}, \"phase_time\": {}, "
                  "\"general\": {\"DataLoaderIter\": 100.0}, "
                  "\"forward_backward\": {\"Forward pass\": 25.0, \"Backward "
                  "pass\": 75.0}, "
                  "\"horovod\": {\"allreduce\": 100.0}}, "
                  "\"Datapoints\": 0, \"RuleParameters\": \"\"}");
        rt_env_free(e);
    }
}

/* Quirk 1: the reference subtracts the previous "others" again. Three
 * contiguous-ish steps 0-0.4, 0.5-0.9, 1.0-1.4 s: reference others stays
 * 100 000 µs, fixed gives the real idle time 200 000 µs. */
static void test_others_reference_vs_fixed(void **state)
{
    (void)state;
    tw_fw_event ev[3] = {
        ev_with(TRAIN, TRAIN, 0.0, 0.4, PY, &step0),
        ev_with(TRAIN, TRAIN, 0.5, 0.9, PY, &step1),
        ev_with(TRAIN, TRAIN, 1.0, 1.4, PY, &step2),
    };
    rt_env *e = rt_env_new();
    assert_int_equal(
        rt_create(e, "OverallFrameworkMetrics", TW_SEMANTICS_REFERENCE, NULL),
        TW_OK);
    rt_job job;
    rt_job_init(&job);
    run(e, &job, 0, ev, 3);
    json_t *rep = rt_report(e);
    rt_assert_bits(rt_jnum(rep, "Details", "phase", "others"),
                   100000.0 / 1300000.0 * 100);
    json_decref(rep);
    rt_env_free(e);

    e = rt_env_new();
    assert_int_equal(
        rt_create(e, "OverallFrameworkMetrics", TW_SEMANTICS_FIXED, NULL),
        TW_OK);
    run(e, &job, 0, ev, 3);
    rep = rt_report(e);
    rt_assert_bits(rt_jnum(rep, "Details", "phase", "others"),
                   200000.0 / 1400000.0 * 100);
    json_decref(rep);
    rt_env_free(e);

    /* Two GPU phases: the reference divides the step sum by 2 and the
     * overlapping steps make others negative; fixed clamps at 0. */
    tw_fw_event ev2[4] = {
        ev_with("k1", "gpu_functions-dev:0", 0.0, 0.1, PY, NULL),
        ev_with("k2", "gpu_functions-dev:1", 0.0, 0.1, PY, NULL),
        ev_with(TRAIN, TRAIN, 0.0, 0.4, PY, &step0),
        ev_with(TRAIN, TRAIN, 0.0, 0.4, PY, &step1),
    };
    e = rt_env_new();
    assert_int_equal(
        rt_create(e, "OverallFrameworkMetrics", TW_SEMANTICS_REFERENCE, NULL),
        TW_OK);
    run(e, &job, 0, ev2, 4);
    rep = rt_report(e);
    /* step 0: 400000 - 400000/2 = 200000; step 1: 400000 - (800000 +
     * 200000)/2 = -100000 -> phase others = -100000/700000*100. */
    rt_assert_bits(rt_jnum(rep, "Details", "phase", "others"),
                   -100000.0 / 700000.0 * 100);
    json_decref(rep);
    rt_env_free(e);
    e = rt_env_new();
    assert_int_equal(
        rt_create(e, "OverallFrameworkMetrics", TW_SEMANTICS_FIXED, NULL),
        TW_OK);
    run(e, &job, 0, ev2, 4);
    rep = rt_report(e);
    rt_assert_bits(rt_jnum(rep, "Details", "phase", "others"), 0.0);
    json_decref(rep);
    rt_env_free(e);
}

/* Quirk 2 fix: a step-phase event without step_num (or args) before any
 * step_num event of the scan adds its time but does not set "others". */
static void test_step_without_step_num(void **state)
{
    (void)state;
    tw_arg other = {"pid", "5", TW_ARG_NUMBER};
    tw_fw_event ev[3] = {
        ev_with(TRAIN, TRAIN, 0.0, 0.4, PY, NULL),
        ev_with(TRAIN, TRAIN, 0.5, 0.9, PY, &other),
        ev_with(TRAIN, TRAIN, 1.0, 1.2, PY, &step2),
    };
    for (int sem = 0; sem < 2; sem++) {
        rt_env *e = rt_env_new();
        assert_int_equal(
            rt_create(e, "OverallFrameworkMetrics", (tw_semantics)sem, NULL),
            TW_OK);
        rt_job job;
        rt_job_init(&job);
        run(e, &job, 0, ev, 2);
        json_t *rep = rt_report(e);
        char keys[128];
        assert_string_equal(rt_jkeys(rt_jget(rep, "Details", "phase", NULL),
                                     keys, sizeof(keys)),
                            TRAIN);
        json_decref(rep);
        run(e, &job, 1, ev + 2, 1);
        rep = rt_report(e);
        assert_string_equal(rt_jkeys(rt_jget(rep, "Details", "phase", NULL),
                                     keys, sizeof(keys)),
                            TRAIN ",others");
        json_decref(rep);
        rt_env_free(e);
    }
}

/* Details keys keep the position of their first appearance. */
static void test_key_order_over_scans(void **state)
{
    (void)state;
    tw_fw_event s1[1] = {ev_with(TRAIN, TRAIN, 0.0, 0.4, PY, &step0)};
    tw_fw_event s2[2] = {
        ev_with("op", "cpu_functions", 60.0, 60.1, PY, NULL),
        ev_with("allreduce", "ALLREDUCE", 60.0, 60.1, TW_SOURCE_HOROVOD, NULL),
    };
    rt_env *e = rt_env_new();
    assert_int_equal(
        rt_create(e, "OverallFrameworkMetrics", TW_SEMANTICS_REFERENCE, NULL),
        TW_OK);
    assert_string_equal(
        rt_report_text(e),
        "{\"RuleTriggered\": 0, \"Violations\": 0, \"Details\": {}, "
        "\"Datapoints\": 0, \"RuleParameters\": \"\"}");
    rt_job job;
    rt_job_init(&job);
    run(e, &job, 0, s1, 1);
    run(e, &job, 1, s2, 2);
    json_t *rep = rt_report(e);
    char keys[256];
    assert_string_equal(
        rt_jkeys(rt_jget(rep, "Details", NULL), keys, sizeof(keys)),
        "ratio,phase,phase_time,CPU,CPU_total,horovod");
    rt_assert_bits(rt_jnum(rep, "Details", "ratio", "cpu_functions"), 100.0);
    json_decref(rep);
    rt_env_free(e);
}

/* "general" lists its names largest share first, then by name, whatever
 * order the events came in (a live stream batches them unlike the agent's
 * files: hook_legacy saw DataLoaderWorker first in one, second in the
 * other). The same events in two orders give the same text. */
static void test_general_order_canonical(void **state)
{
    (void)state;
    tw_fw_event a[4] = {
        ev_with(TRAIN, TRAIN, 1.0, 1.4, PY, &step0),
        ev_with("DataLoaderIterInitialize", "DataLoaderIterInitialize", 1.0,
                1.01, PY, NULL),
        ev_with("DataLoaderWorker", "DataLoaderWorker", 1.0, 1.03, PY, NULL),
        ev_with("DataLoaderIter", "DataLoaderIter", 1.0, 1.01, PY, NULL),
    };
    tw_fw_event b[4] = {a[0], a[2], a[3], a[1]};
    char *text[2];
    for (int k = 0; k < 2; k++) {
        rt_env *e = rt_env_new();
        assert_int_equal(
            rt_create(e, "OverallFrameworkMetrics", TW_SEMANTICS_FIXED, NULL),
            TW_OK);
        rt_job job;
        rt_job_init(&job);
        run(e, &job, 0, k == 0 ? a : b, 4);
        text[k] = strdup(rt_report_text(e));
        assert_non_null(text[k]);
        rt_env_free(e);
    }
    assert_string_equal(text[0], text[1]);
    assert_non_null(strstr(text[0], "\"general\": {\"DataLoaderWorker\": 60.0, "
                                    "\"DataLoaderIter\": 20.0, "
                                    "\"DataLoaderIterInitialize\": 20.0}"));
    free(text[0]);
    free(text[1]);
}

/* The CPU operator list and horovod's, like 'general': by share, then
 * name, whatever order the events came in (integration_hook_legacy's run
 * and eval once differed in the CPU list's order only). */
static void test_op_lists_order_canonical(void **state)
{
    (void)state;
    tw_fw_event a[6] = {
        ev_with(TRAIN, TRAIN, 1.0, 1.4, PY, &step0),
        ev_with("aten::mul", "cpu_functions", 1.0, 1.01, PY, NULL),
        ev_with("aten::mm", "cpu_functions", 1.0, 1.05, PY, NULL),
        ev_with("aten::tanh", "cpu_functions", 1.0, 1.01, PY, NULL),
        ev_with("negotiate", "NEGOTIATE", 1.3, 1.31, TW_SOURCE_HOROVOD, NULL),
        ev_with("allreduce", "ALLREDUCE", 1.2, 1.26, TW_SOURCE_HOROVOD, NULL),
    };
    tw_fw_event b[6] = {a[0], a[3], a[2], a[1], a[5], a[4]};
    char *text[2];
    for (int k = 0; k < 2; k++) {
        rt_env *e = rt_env_new();
        assert_int_equal(
            rt_create(e, "OverallFrameworkMetrics", TW_SEMANTICS_FIXED, NULL),
            TW_OK);
        rt_job job;
        rt_job_init(&job);
        run(e, &job, 0, k == 0 ? a : b, 6);
        text[k] = strdup(rt_report_text(e));
        assert_non_null(text[k]);
        rt_env_free(e);
    }
    assert_string_equal(text[0], text[1]);
    const char *cpu = strstr(text[0], "\"CPU\": {");
    assert_non_null(cpu);
    const char *mm = strstr(cpu, "aten::mm"), *mul = strstr(cpu, "aten::mul"),
               *tanh_ = strstr(cpu, "aten::tanh");
    assert_true(mm != NULL && mul != NULL && tanh_ != NULL);
    assert_true(mm < mul && mul < tanh_);
    const char *hvd = strstr(text[0], "\"horovod\": {");
    assert_non_null(hvd);
    const char *ar = strstr(hvd, "allreduce"), *ng = strstr(hvd, "negotiate");
    assert_true(ar != NULL && ng != NULL && ar < ng);
    free(text[0]);
    free(text[1]);
}

static void test_checkpoint_equivalence(void **state)
{
    (void)state;
    tw_fw_event ev[16];
    size_t n = worked_events(ev);
    for (int sem = 0; sem < 2; sem++) {
        rt_env *a = rt_env_new();
        assert_int_equal(
            rt_create(a, "OverallFrameworkMetrics", (tw_semantics)sem, NULL),
            TW_OK);
        rt_job job;
        rt_job_init(&job);
        run(a, &job, 0, ev, 4);
        rt_env *b = rt_clone_via_checkpoint(a, "OverallFrameworkMetrics",
                                            (tw_semantics)sem, NULL);
        run(a, &job, 1, ev + 4, n - 4);
        run(b, &job, 1, ev + 4, n - 4);
        run(a, &job, 2, ev, n);
        run(b, &job, 2, ev, n);
        char *ta = strdup(rt_report_text(a));
        assert_string_equal(ta, rt_report_text(b));
        free(ta);
        char err[128];
        assert_int_equal(tw_rule_restore(b->rule, "junk", 4, err, sizeof(err)),
                         TW_ERR);
        rt_env_free(a);
        rt_env_free(b);
    }
}

static void test_bad_parameters(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    const char *kv[] = {"threshold", "3", NULL};
    assert_int_equal(
        rt_create(e, "OverallFrameworkMetrics", TW_SEMANTICS_FIXED, kv),
        TW_ERR);
    assert_non_null(strstr(e->err, "threshold"));
    rt_env_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worked_example),
        cmocka_unit_test(test_others_reference_vs_fixed),
        cmocka_unit_test(test_step_without_step_num),
        cmocka_unit_test(test_key_order_over_scans),
        cmocka_unit_test(test_general_order_canonical),
        cmocka_unit_test(test_op_lists_order_canonical),
        cmocka_unit_test(test_checkpoint_equivalence),
        cmocka_unit_test(test_bad_parameters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
