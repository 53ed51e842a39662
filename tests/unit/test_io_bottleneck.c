/* IOBottleneck (RULES.md §3.3): I/O wait instead of CPU utilisation, the
 * "CPUs" key, the else-if structure, and the §4 aggregation keys that the
 * CPUBottleneck example does not reach (forward_backward, horovod, the 2 %
 * operator filter, key order when keys appear late). */
#include "rule_test_util.h"

#define RULE "IOBottleneck"
#define SCAN_US 60000000LL

static const tw_scan_result *run(rt_env *e, rt_job *job, uint64_t k,
                                 const tw_sample *s, size_t n,
                                 const tw_fw_event *ev, size_t nev)
{
    tw_scan sc = rt_job_scan(job, k, (int64_t)k * SCAN_US,
                             (int64_t)(k + 1) * SCAN_US, s, n, ev, nev);
    return rt_run(e, &sc);
}

static void test_io_wait_not_cpu(void **st)
{
    (void)st;
    const char *kv[] = {"init_grace", "0", "patience", "0", NULL};
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_REFERENCE, kv), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t g = rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
    uint32_t cu =
        rt_job_series(&job, "algo-1", "cpu", "cpu0", "CPUUtilization");
    uint32_t io0 =
        rt_job_series(&job, "algo-1", "cpu", "cpu0", "I/OWaitPercentage");
    uint32_t io1 =
        rt_job_series(&job, "algo-1", "cpu", "cpu1", "I/OWaitPercentage");
    /* round 1: high CPU util only (ignored); round 2: two cores with high
     * I/O wait; round 3: I/O wait exactly 50 (not > 50) */
    tw_sample s[] = {rt_sample(10.0, 1, g),    rt_sample(10.0, 99, cu),
                     rt_sample(11.0, 1, g),    rt_sample(11.0, 60, io0),
                     rt_sample(11.0, 70, io1), rt_sample(12.0, 1, g),
                     rt_sample(12.0, 50, io0)};
    const tw_scan_result *r = run(e, &job, 0, s, 7, NULL, 0);
    assert_int_equal(r->violations, 1);
    assert_int_equal(r->datapoints, 3);
    assert_false(r->condition_met); /* 33.3 % <= 50 */
    assert_string_equal(
        rt_report_text(e),
        "{\"RuleTriggered\": 0, \"Violations\": 1, \"Details\": "
        "{\"low_gpu_utilization\": 3, \"bottlenecks\": {\"11.0\": {\"GPUs\": "
        "1, "
        "\"CPUs\": 2}}}, \"Datapoints\": 3, \"RuleParameters\": "
        "\"threshold:50\\nio_threshold:50\\ngpu_threshold:10\\npatience:0\"}");
    rt_env_free(e);
}

/* Appendix A style: gpu 100, io 0, patience 0 -> every snapshot with a
 * GPU sample < 100 and an I/O wait sample > 0 is a bottleneck. */
static void test_permissive_thresholds_fire(void **st)
{
    (void)st;
    const char *kv[] = {"init_grace",
                        "0",
                        "gpu_threshold",
                        "100",
                        "io_threshold",
                        "0",
                        "patience",
                        "0",
                        NULL};
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t g = rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
    uint32_t io =
        rt_job_series(&job, "algo-1", "cpu", "cpu0", "I/OWaitPercentage");
    tw_sample s[] = {rt_sample(10.0, 99, g), rt_sample(10.01, 0.5, io),
                     rt_sample(10.5, 99, g), rt_sample(10.51, 0.5, io)};
    const tw_scan_result *r = run(e, &job, 0, s, 4, NULL, 0);
    assert_true(r->condition_met);
    assert_int_equal(r->violations, 2);
    assert_int_equal(r->rule_triggered, 1);
    /* no framework events: the aggregation still sets ratio, phase,
     * phase_time (empty) */
    json_t *rep = rt_report(e);
    char keys[256];
    assert_string_equal(
        rt_jkeys(rt_jget(rep, "Details", NULL), keys, sizeof(keys)),
        "bottlenecks,low_gpu_utilization,ratio,phase,phase_time");
    assert_int_equal(json_object_size(rt_jget(rep, "Details", "ratio", NULL)),
                     0);
    json_decref(rep);
    rt_env_free(e);
}

static void test_aggregation_keys(void **st)
{
    (void)st;
    const char *kv[] = {"init_grace",
                        "0",
                        "gpu_threshold",
                        "100",
                        "io_threshold",
                        "0",
                        "patience",
                        "0",
                        NULL};
    for (int sem = 0; sem < 2; sem++) {
        rt_env *e = rt_env_new();
        assert_int_equal(rt_create(e, RULE, (tw_semantics)sem, kv), TW_OK);
        rt_job job;
        rt_job_init(&job);
        uint32_t g =
            rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
        uint32_t io =
            rt_job_series(&job, "algo-1", "cpu", "cpu0", "I/OWaitPercentage");
        /* scan 0: instant 10.0 s; only GPU ops, a general phase and
         * Horovod events */
        tw_sample s1[] = {rt_sample(10.0, 1, g), rt_sample(10.0, 1, io)};
        tw_fw_event ev1[] = {
            rt_event("volta_gemm", "gpu_functions-dev:0", "n", 9000000,
                     11000000, TW_SOURCE_MODEL_TIMELINE),
            rt_event("allreduce", "hvd", "n", 9900000, 10060000,
                     TW_SOURCE_HOROVOD),
            rt_event("negotiate", "hvd", "n", 9999000, 10002000,
                     TW_SOURCE_HOROVOD),
            /* touches the instant without containing it: not selected */
            rt_event("late", "DataIterator", "n", 10000000, 10500000,
                     TW_SOURCE_PYTHONTIMELINE),
            rt_event("op", "/device:GPU:0 Compute", "n", 9000000, 11000000,
                     TW_SOURCE_TF_PROFILER),
            rt_event("it", "DataIterator", "n", 9500000, 10500000,
                     TW_SOURCE_PYTHONTIMELINE),
        };
        run(e, &job, 0, s1, 2, ev1, 6);
        /* scan 1: instant 70.0 s; CPU ops (one below 2 %), forward and
         * backward */
        tw_sample s2[] = {rt_sample(70.0, 1, g), rt_sample(70.0, 1, io)};
        tw_fw_event ev2[] = {
            rt_event("aten::conv2d", "cpu_functions", "n", 69900000, 70000001,
                     TW_SOURCE_MODEL_TIMELINE),
            rt_event("aten::relu", "cpu_functions", "n", 69999000, 70000010,
                     TW_SOURCE_MODEL_TIMELINE),
            rt_event("layer1", "Forward-SubModuleInternal", "n", 69900000,
                     70000100, TW_SOURCE_PYTHONTIMELINE),
            rt_event("layer1", "Backward-SubModuleInternal", "n", 69700000,
                     70000100, TW_SOURCE_PYTHONTIMELINE),
        };
        run(e, &job, 1, s2, 2, ev2, 4);
        json_t *rep = rt_report(e);
        char keys[512];
        /* CPU keys first appear in scan 1: after those set in scan 0 */
        assert_string_equal(
            rt_jkeys(rt_jget(rep, "Details", NULL), keys, sizeof(keys)),
            "bottlenecks,low_gpu_utilization,ratio,GPU,GPU_total,phase,"
            "phase_time,general,horovod,CPU,CPU_total,forward_backward");
        /* horovod: negotiate is 3000 / 163000 = 1.8 % <= 2 % -> dropped */
        assert_string_equal(rt_jkeys(rt_jget(rep, "Details", "horovod", NULL),
                                     keys, sizeof(keys)),
                            "allreduce");
        rt_assert_bits(rt_jnum(rep, "Details", "horovod", "allreduce"), 100.0);
        /* general: TF device phases (":GPU") are excluded */
        assert_string_equal(rt_jkeys(rt_jget(rep, "Details", "general", NULL),
                                     keys, sizeof(keys)),
                            "DataIterator");
        /* CPU: relu = 1010 / 101011 < 2 % dropped; conv2d renormalised */
        assert_string_equal(
            rt_jkeys(rt_jget(rep, "Details", "CPU", NULL), keys, sizeof(keys)),
            "aten::conv2d");
        rt_assert_bits(rt_jnum(rep, "Details", "CPU", "aten::conv2d"), 100.0);
        rt_assert_bits(rt_jnum(rep, "Details", "CPU_total", "aten::conv2d"),
                       100001.0);
        /* GPU: volta_gemm 2 s plus the TF compute op (phase contains "GPU"
         * lower-cased -> gpu_ops) */
        rt_assert_bits(rt_jnum(rep, "Details", "GPU_total", "volta_gemm"),
                       2000000.0);
        rt_assert_bits(rt_jnum(rep, "Details", "GPU", "volta_gemm"), 50.0);
        /* forward 100100 vs backward 300100 */
        rt_assert_bits(
            rt_jnum(rep, "Details", "forward_backward", "Forward pass"),
            100100.0 / 400200.0 * 100.0);
        /* ratio: CPU phase 101011 µs, GPU phases 4 000 000 µs in two
         * phases; labels cpu_functions, gpu_functions-dev:0,
         * /device:GPU:0 Compute */
        double tot = 101011.0 + 4000000.0;
        double cpu = 101011.0 / tot * 100.0, gpu = 2000000.0 / tot * 100.0;
        if (sem == TW_SEMANTICS_REFERENCE) {
            /* sizes GPU-first: label i gets the i-th of (gpu, gpu, cpu) */
            rt_assert_bits(rt_jnum(rep, "Details", "ratio", "cpu_functions"),
                           gpu);
            rt_assert_bits(
                rt_jnum(rep, "Details", "ratio", "/device:GPU:0 Compute"), cpu);
        } else {
            rt_assert_bits(rt_jnum(rep, "Details", "ratio", "cpu_functions"),
                           cpu);
            rt_assert_bits(
                rt_jnum(rep, "Details", "ratio", "/device:GPU:0 Compute"), gpu);
        }
        json_decref(rep);
        rt_env_free(e);
    }
}

static void test_save_restore_equivalence(void **st)
{
    (void)st;
    const char *kv[] = {"init_grace",   "0", "patience", "0",
                        "io_threshold", "5", NULL};
    rt_env *a = rt_env_new();
    assert_int_equal(rt_create(a, RULE, TW_SEMANTICS_FIXED, kv), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t g = rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
    uint32_t io =
        rt_job_series(&job, "algo-1", "cpu", "cpu0", "I/OWaitPercentage");
    tw_fw_event ev[] = {rt_event("x", "Step:ModeKeys.TRAIN", "n", 0, 200000000,
                                 TW_SOURCE_PYTHONTIMELINE)};
    tw_sample s1[] = {rt_sample(10.0, 1, g), rt_sample(10.0, 9, io)};
    run(a, &job, 0, s1, 2, ev, 1);
    rt_env *b = rt_clone_via_checkpoint(a, RULE, TW_SEMANTICS_FIXED, kv);
    tw_sample s2[] = {rt_sample(60.0, 1, g), rt_sample(60.0, 9, io),
                      rt_sample(61.0, 1, g), rt_sample(61.0, 9, io)};
    for (int k = 0; k < 2; k++)
        run(k ? b : a, &job, 1, s2, 4, ev, 1);
    char *ta = strdup(rt_report_text(a));
    assert_non_null(ta);
    assert_string_equal(ta, rt_report_text(b));
    assert_non_null(strstr(ta, "\"phase\": {\"Step:ModeKeys.TRAIN\": 100.0}"));
    free(ta);
    rt_env_free(a);
    rt_env_free(b);
}

static void test_bad_parameters(void **st)
{
    (void)st;
    rt_env *e = rt_env_new();
    /* -1 (every sample is high) is TRIGGER_ALL's value; below is refused. */
    const char *ok[] = {"io_threshold", "-1", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, ok), TW_OK);
    const char *a[] = {"io_threshold", "-1.5", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, a), TW_ERR);
    assert_non_null(strstr(e->err, "io_threshold"));
    const char *b[] = {"cpu_threshold", "90", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, b), TW_ERR);
    const char *c[] = {"patience", "1.5", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, c), TW_ERR);
    rt_env_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_io_wait_not_cpu),
        cmocka_unit_test(test_permissive_thresholds_fire),
        cmocka_unit_test(test_aggregation_keys),
        cmocka_unit_test(test_save_restore_equivalence),
        cmocka_unit_test(test_bad_parameters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
