/* LowGPUUtilization (RULES.md §3.1): worked example, thresholds, patience,
 * window 0, multiple nodes/GPUs, CPU-only job, reset, checkpoints, bad
 * parameters. */
#include "rule_test_util.h"

#define RULE "LowGPUUtilization"
#define SCAN_US 60000000LL
#define T0_US 100000000LL /* scan 0 starts at 100 s */

static const char *const EX_KV[] = {"init_grace", "0", "window", "4",
                                    "patience",   "3", NULL};

/* Runs scan k of `job` with samples stamped inside it. */
static const tw_scan_result *run_k(rt_env *e, rt_job *job, uint64_t k,
                                   const tw_sample *s, size_t n)
{
    tw_scan sc = rt_job_scan(job, k, T0_US + (int64_t)k * SCAN_US,
                             T0_US + (int64_t)(k + 1) * SCAN_US, s, n, NULL, 0);
    return rt_run(e, &sc);
}

static void worked_example(tw_semantics sem)
{
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, sem, EX_KV), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t g0 =
        rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
    tw_sample s1[] = {rt_sample(101, 0, g0), rt_sample(102, 80, g0),
                      rt_sample(103, 90, g0), rt_sample(104, 5, g0)};
    const tw_scan_result *r = run_k(e, &job, 0, s1, 4);
    assert_true(r->condition_met);
    assert_int_equal(r->rule_triggered, 1);
    assert_int_equal(r->violations, 1);
    assert_int_equal(r->datapoints, 4);
    const char *want =
        "{\"RuleTriggered\": 1, \"Violations\": 1, \"Details\": {\"algo-1\": "
        "{\"gpu0\": {\"gpu_max\": 90.0, \"gpu_95\": 88.5, \"gpu_5\": "
        "0.7500000000000001, \"p25\": 3.75, \"p50\": 42.5, \"p75\": 82.5, "
        "\"p95\": 88.5, \"upper\": 90.0, \"lower\": 0.0}}, \"last_timestamp\": "
        "100000000}, \"Datapoints\": 4, \"RuleParameters\": "
        "\"threshold_p95:70\\nthreshold_p5:10\\nwindow:4\\npatience:3\"}";
    assert_string_equal(rt_report_text(e), want);

    tw_sample s2[] = {rt_sample(161, 85, g0), rt_sample(162, 95, g0),
                      rt_sample(163, 100, g0)};
    r = run_k(e, &job, 1, s2, 3);
    /* window 5, 85, 95, 100: w95 99.25, w5 17: no violation, Details kept,
     * still true (cumulative) */
    assert_true(r->condition_met);
    assert_int_equal(r->rule_triggered, 1);
    assert_int_equal(r->datapoints, 7);
    json_t *rep = rt_report(e);
    rt_assert_bits(rt_jnum(rep, "Details", "algo-1", "gpu0", "gpu_5"),
                   0.7500000000000001);
    rt_assert_bits(rt_jnum(rep, "Details", "last_timestamp"), 100000000.0);
    rt_assert_bits(rt_jnum(rep, "Datapoints"), 7);
    json_decref(rep);
    rt_env_free(e);
}

static void test_worked_example_reference(void **st)
{
    (void)st;
    worked_example(TW_SEMANTICS_REFERENCE);
}

static void test_worked_example_fixed(void **st)
{
    (void)st;
    worked_example(TW_SEMANTICS_FIXED); /* no quirk differs for this rule */
}

/* n samples of `v` for one GPU, then the scan result. */
static const tw_scan_result *run_const(rt_env *e, rt_job *job, uint32_t sid,
                                       double v, size_t n)
{
    tw_sample *s = calloc(n, sizeof(*s));
    assert_non_null(s);
    for (size_t i = 0; i < n; i++)
        s[i] = rt_sample(101.0 + (double)i * 0.5, v, sid);
    const tw_scan_result *r = run_k(e, job, 0, s, n);
    free(s);
    return r;
}

static void test_patience_boundary(void **st)
{
    (void)st;
    const char *kv[] = {"init_grace", "0", "window", "10",
                        "patience",   "5", NULL};
    /* exactly `patience` samples: not evaluated */
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_REFERENCE, kv), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t g0 =
        rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
    const tw_scan_result *r = run_const(e, &job, g0, 1.0, 5);
    assert_false(r->condition_met);
    assert_int_equal(r->rule_triggered, 0);
    assert_int_equal(r->datapoints, 5);
    rt_env_free(e);
    /* one more: evaluated and low */
    e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_REFERENCE, kv), TW_OK);
    r = run_const(e, &job, g0, 1.0, 6);
    assert_true(r->condition_met);
    assert_int_equal(r->rule_triggered, 1);
    rt_env_free(e);
}

static void test_threshold_equality_never_violation(void **st)
{
    (void)st;
    const char *kv[] = {
        "init_grace",    "0",  "window",       "10", "patience", "0",
        "threshold_p95", "70", "threshold_p5", "10", NULL};
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_REFERENCE, kv), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t g0 =
        rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
    /* all 70: w95 == 70 (not <, not >) and w5 == 70 */
    const tw_scan_result *r = run_const(e, &job, g0, 70.0, 3);
    assert_false(r->condition_met);
    /* p95 == 0 thresholds with zeros: strict comparisons, never fires
     * (Appendix A: LowGPUUtilization(p95 0, p5 0, patience 0)) */
    const char *kv0[] = {"init_grace",
                         "0",
                         "threshold_p95",
                         "0",
                         "threshold_p5",
                         "0",
                         "patience",
                         "0",
                         NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_REFERENCE, kv0), TW_OK);
    rt_job job2;
    rt_job_init(&job2);
    uint32_t h0 =
        rt_job_series(&job2, "algo-1", "gpu", "gpu0", "GPUUtilization");
    r = run_const(e, &job2, h0, 0.0, 20);
    assert_false(r->condition_met);
    assert_int_equal(r->violations, 0);
    rt_env_free(e);
}

static void test_fluctuation_branch_needs_p95_above(void **st)
{
    (void)st;
    /* 19 x 100 and 1 x 0 over window 20: w95 = 100 > 70, w5 =
     * Q(.05) = 0 + (100-0)*0.95 = 95 (h = 0.95) -> not < 10: no fire.
     * With 2 zeros: h = 0.95 -> s[0]=0,s[1]=0 -> 0 < 10: fire. */
    const char *kv[] = {"init_grace", "0", "window", "20",
                        "patience",   "0", NULL};
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_REFERENCE, kv), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t g0 =
        rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
    tw_sample s[20];
    for (int i = 0; i < 20; i++)
        s[i] = rt_sample(101 + i, i == 3 ? 0 : 100, g0);
    const tw_scan_result *r = run_k(e, &job, 0, s, 20);
    assert_false(r->condition_met);
    s[7].value = 0;
    rt_env *e2 = rt_env_new();
    assert_int_equal(rt_create(e2, RULE, TW_SEMANTICS_REFERENCE, kv), TW_OK);
    r = run_k(e2, &job, 0, s, 20);
    assert_true(r->condition_met);
    json_t *rep = rt_report(e2);
    rt_assert_bits(rt_jnum(rep, "Details", "algo-1", "gpu0", "gpu_5"), 0.0);
    rt_assert_bits(rt_jnum(rep, "Details", "algo-1", "gpu0", "gpu_95"), 100.0);
    /* hand-computed box over the whole history (18 x 100, 2 x 0):
     * p25 = 100 (h = 4.75), p50 = 100, lower = max(100 - 0, 0) = 100 */
    rt_assert_bits(rt_jnum(rep, "Details", "algo-1", "gpu0", "p25"), 100.0);
    rt_assert_bits(rt_jnum(rep, "Details", "algo-1", "gpu0", "lower"), 100.0);
    json_decref(rep);
    rt_env_free(e);
    rt_env_free(e2);
}

static void test_window_zero_is_whole_history(void **st)
{
    (void)st;
    /* History 0 x 10 then 100 x 10. Window 10 sees only 100s (no
     * violation); window 0 sees all 20 values: w95 = 100, w5 = 0 -> fires. */
    rt_job job;
    rt_job_init(&job);
    uint32_t g0 =
        rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
    tw_sample s[20];
    for (int i = 0; i < 20; i++)
        s[i] = rt_sample(101 + i, i < 10 ? 0 : 100, g0);
    for (int w = 0; w < 2; w++) {
        const char *kv[] = {"init_grace", "0", "window", w ? "10" : "0",
                            "patience",   "0", NULL};
        for (int sem = 0; sem < 2; sem++) {
            rt_env *e = rt_env_new();
            assert_int_equal(rt_create(e, RULE, (tw_semantics)sem, kv), TW_OK);
            const tw_scan_result *r = run_k(e, &job, 0, s, 20);
            assert_int_equal(r->condition_met, w == 0);
            if (w == 0) {
                json_t *rep = rt_report(e);
                rt_assert_bits(
                    rt_jnum(rep, "Details", "algo-1", "gpu0", "gpu_5"), 0.0);
                /* Q(.5) of ten 0s and ten 100s: h = 9.5 -> 100 - 100*0.5 */
                rt_assert_bits(rt_jnum(rep, "Details", "algo-1", "gpu0", "p50"),
                               50.0);
                json_decref(rep);
            }
            rt_env_free(e);
        }
    }
}

static void test_multiple_nodes_and_gpus(void **st)
{
    (void)st;
    const char *kv[] = {"init_grace", "0", "window", "5",
                        "patience",   "2", NULL};
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_REFERENCE, kv), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t a0 =
        rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
    uint32_t a1 =
        rt_job_series(&job, "algo-1", "gpu", "gpu1", "GPUUtilization");
    uint32_t m0 =
        rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUMemoryUtilization");
    uint32_t b0 =
        rt_job_series(&job, "algo-2", "gpu", "gpu0", "GPUUtilization");
    /* scan 0: algo-1 gpu1 low (3 samples), gpu0 busy, algo-2 gpu0 busy
     * with 4 samples (visited last -> Datapoints 4) */
    tw_sample s1[] = {
        rt_sample(101, 95, a0), rt_sample(101, 5, a1),  rt_sample(101, 1, m0),
        rt_sample(102, 96, a0), rt_sample(102, 6, a1),  rt_sample(103, 97, a0),
        rt_sample(103, 7, a1),  rt_sample(101, 90, b0), rt_sample(102, 91, b0),
        rt_sample(103, 92, b0), rt_sample(104, 93, b0)};
    const tw_scan_result *r = run_k(e, &job, 0, s1, 11);
    assert_int_equal(r->rule_triggered, 1);
    assert_int_equal(r->datapoints, 4);
    /* scan 1: algo-2 gpu0 goes low too; algo-1 gpu1 still low */
    tw_sample s2[] = {rt_sample(161, 5, a1), rt_sample(161, 1, b0),
                      rt_sample(162, 1, b0), rt_sample(163, 1, b0),
                      rt_sample(164, 1, b0), rt_sample(165, 1, b0)};
    r = run_k(e, &job, 1, s2, 6);
    assert_int_equal(r->rule_triggered, 3); /* a1 again + b0 */
    assert_int_equal(r->violations, 3);
    assert_int_equal(r->datapoints, 9);
    json_t *rep = rt_report(e);
    char keys[256];
    /* node order = first violation, last_timestamp after the first node */
    assert_string_equal(
        rt_jkeys(rt_jget(rep, "Details", NULL), keys, sizeof(keys)),
        "algo-1,last_timestamp,algo-2");
    assert_string_equal(
        rt_jkeys(rt_jget(rep, "Details", "algo-1", NULL), keys, sizeof(keys)),
        "gpu1");
    rt_assert_bits(rt_jnum(rep, "Details", "last_timestamp"),
                   (double)(T0_US + SCAN_US));
    rt_assert_bits(rt_jnum(rep, "Details", "algo-1", "gpu1", "gpu_max"), 7.0);
    json_decref(rep);
    rt_env_free(e);
}

static void test_cpu_only_job(void **st)
{
    (void)st;
    rt_env *e = rt_env_new();
    const char *kv[] = {"init_grace", "0", "patience", "0", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_REFERENCE, kv), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t c0 =
        rt_job_series(&job, "algo-1", "cpu", "cpu0", "CPUUtilization");
    tw_sample s[] = {rt_sample(101, 1, c0), rt_sample(102, 2, c0)};
    const tw_scan_result *r = run_k(e, &job, 0, s, 2);
    assert_false(r->condition_met);
    assert_int_equal(r->datapoints, 0);
    assert_string_equal(
        rt_report_text(e),
        "{\"RuleTriggered\": 0, \"Violations\": 0, \"Details\": {}, "
        "\"Datapoints\": 0, \"RuleParameters\": "
        "\"threshold_p95:70\\nthreshold_p5:10\\nwindow:500\\npatience:0\"}");
    rt_env_free(e);
}

static void test_reset_after_max_datapoints(void **st)
{
    (void)st;
    /* A long generated stream: 1 000 001 samples of gpu0 in one scan (more
     * than the internal max_datapoints), plus gpu1 visited after it. The
     * scan finishes on the data in hand (gpu1 is still evaluated), then
     * all series are forgotten: the next scan starts from zero. */
    const char *kv[] = {"init_grace", "0", "window", "10",
                        "patience",   "2", NULL};
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t g0 =
        rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
    uint32_t g1 =
        rt_job_series(&job, "algo-1", "gpu", "gpu1", "GPUUtilization");
    size_t n = 1000001 + 3;
    tw_sample *s = calloc(n, sizeof(*s));
    assert_non_null(s);
    for (size_t i = 0; i < 1000001; i++)
        s[i] = rt_sample(101.0 + (double)i * 1e-5, (double)(i % 100), g0);
    for (size_t i = 1000001; i < n; i++)
        s[i] = rt_sample(150.0, 1.0, g1);
    const tw_scan_result *r = run_k(e, &job, 0, s, n);
    /* gpu0 (window 90..99) is fine, gpu1 (3 x 1.0) still evaluated: low */
    assert_int_equal(r->rule_triggered, 1);
    assert_int_equal(r->datapoints, 3);
    json_t *rep = rt_report(e);
    assert_non_null(rt_jget(rep, "Details", "algo-1", "gpu1", NULL));
    assert_null(rt_jget(rep, "Details", "algo-1", "gpu0", NULL));
    json_decref(rep);
    free(s);
    /* next scan: both series restart empty (2 samples <= patience 2) */
    tw_sample s2[] = {rt_sample(161, 1, g1), rt_sample(162, 1, g1)};
    r = run_k(e, &job, 1, s2, 2);
    assert_int_equal(r->rule_triggered, 1);
    assert_int_equal(r->datapoints, 2);
    /* Details survive the reset */
    rep = rt_report(e);
    assert_non_null(rt_jget(rep, "Details", "algo-1", "gpu1", NULL));
    json_decref(rep);
    rt_env_free(e);
}

static void test_save_restore_equivalence(void **st)
{
    (void)st;
    for (int sem = 0; sem < 2; sem++) {
        rt_env *a = rt_env_new();
        assert_int_equal(rt_create(a, RULE, (tw_semantics)sem, EX_KV), TW_OK);
        rt_job job;
        rt_job_init(&job);
        uint32_t g0 =
            rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
        uint32_t g1 =
            rt_job_series(&job, "algo-2", "gpu", "gpu3", "GPUUtilization");
        tw_sample s1[] = {rt_sample(101, 0, g0), rt_sample(102, 80, g0),
                          rt_sample(103, 90, g0), rt_sample(104, 5, g0),
                          rt_sample(101, 50, g1)};
        tw_scan sc1 =
            rt_job_scan(&job, 0, T0_US, T0_US + SCAN_US, s1, 5, NULL, 0);
        rt_run(a, &sc1);
        rt_env *b = rt_clone_via_checkpoint(a, RULE, (tw_semantics)sem, EX_KV);
        /* the aggregator is job state, checkpointed by the job: rebuild */
        rt_feed_only(b, &sc1);
        tw_sample s2[] = {rt_sample(161, 85, g0),  rt_sample(162, 2, g0),
                          rt_sample(163, 100, g0), rt_sample(161, 60, g1),
                          rt_sample(162, 61, g1),  rt_sample(163, 62, g1)};
        for (int k = 0; k < 2; k++) {
            tw_scan sc2 = rt_job_scan(&job, 1, T0_US + SCAN_US,
                                      T0_US + 2 * SCAN_US, s2, 6, NULL, 0);
            rt_run(k ? b : a, &sc2);
        }
        char *ta = strdup(rt_report_text(a));
        assert_non_null(ta);
        assert_string_equal(ta, rt_report_text(b));
        assert_int_equal(tw_rule_last_result(a->rule)->rule_triggered,
                         tw_rule_last_result(b->rule)->rule_triggered);
        free(ta);
        /* a corrupt checkpoint is rejected */
        tw_buf *buf = tw_buf_new();
        assert_int_equal(tw_rule_save(a->rule, buf), TW_OK);
        char err[256];
        assert_int_equal(tw_rule_restore(b->rule, tw_buf_data(buf),
                                         tw_buf_len(buf) - 5, err, sizeof(err)),
                         TW_ERR);
        tw_buf_free(buf);
        rt_env_free(a);
        rt_env_free(b);
    }
}

static void test_bad_parameters(void **st)
{
    (void)st;
    rt_env *e = rt_env_new();
    const char *neg[] = {"window", "-1", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, neg), TW_ERR);
    assert_non_null(strstr(e->err, "window"));
    const char *big[] = {"threshold_p95", "101", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, big), TW_ERR);
    assert_non_null(strstr(e->err, "threshold_p95"));
    const char *txt[] = {"patience", "lots", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, txt), TW_ERR);
    assert_non_null(strstr(e->err, "patience"));
    const char *unk[] = {"scan_interval_us", "60000000", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, unk), TW_ERR);
    rt_env_free(e);
}

/* Phases (fixed): 20 idle samples, then the first TRAIN step, then 6 busy
 * samples, all in one scan. fixed counts only the 6 (no violation:
 * p95 95, p5 95); reference counts 26 and its window of 10 holds 4 idle
 * ones (p95 95 > 70, p5 0 < 10: a fluctuation). */
static const tw_scan_result *run_init_then_busy(rt_env *e, rt_job *job,
                                                tw_semantics sem)
{
    const char *kv[] = {"window", "10", "patience", "2", NULL};
    assert_int_equal(rt_create(e, RULE, sem, kv), TW_OK);
    uint32_t g0 = rt_job_series(job, "algo-1", "gpu", "gpu0", "GPUUtilization");
    tw_sample s[26];
    for (size_t i = 0; i < 26; i++)
        s[i] = rt_sample(101.0 + (double)i * 0.5, i < 20 ? 0.0 : 95.0, g0);
    /* the first step starts between the 20th (110.5 s) and 21st sample */
    tw_fw_event ev =
        rt_event("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", "algo-1",
                 110700000, 110900000, TW_SOURCE_PYTHONTIMELINE);
    tw_scan sc = rt_job_scan(job, 0, 100000000, 160000000, s, 26, &ev, 1);
    return rt_run(e, &sc);
}

static void test_fixed_skips_initialization(void **st)
{
    (void)st;
    rt_env *e = rt_env_new();
    rt_job job;
    rt_job_init(&job);
    const tw_scan_result *r = run_init_then_busy(e, &job, TW_SEMANTICS_FIXED);
    assert_false(r->condition_met);
    assert_int_equal(r->datapoints, 6);
    rt_env_free(e);

    e = rt_env_new();
    rt_job_init(&job);
    r = run_init_then_busy(e, &job, TW_SEMANTICS_REFERENCE);
    assert_true(r->condition_met);
    assert_int_equal(r->datapoints, 26);
    rt_env_free(e);
}

/* Phases (fixed): training with busy GPUs in scan 0 (steps until 116 s),
 * then a finalization in scan 1 (no step, GPUs idle). fixed neither counts
 * the idle samples nor judges scan 1 (its window would hold them);
 * reference does, and its window of 10 idle samples is a violation. */
static const tw_scan_result *run_busy_then_final(rt_env *e, rt_job *job,
                                                 tw_semantics sem)
{
    const char *kv[] = {"window",     "10", "patience", "2",
                        "init_grace", "0",  NULL};
    assert_int_equal(rt_create(e, RULE, sem, kv), TW_OK);
    uint32_t g0 = rt_job_series(job, "algo-1", "gpu", "gpu0", "GPUUtilization");
    tw_sample s[30];
    for (size_t i = 0; i < 30; i++)
        s[i] = rt_sample(101.0 + (double)i * 0.5, 95.0, g0);
    tw_fw_event ev =
        rt_event("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", "algo-1",
                 100500000, 116000000, TW_SOURCE_PYTHONTIMELINE);
    tw_scan sc = rt_job_scan(job, 0, 100000000, 160000000, s, 30, &ev, 1);
    assert_false(rt_run(e, &sc)->condition_met);
    tw_sample f[40];
    for (size_t i = 0; i < 40; i++)
        f[i] = rt_sample(161.0 + (double)i * 0.5, 0.0, g0);
    sc = rt_job_scan(job, 1, 160000000, 220000000, f, 40, NULL, 0);
    return rt_run(e, &sc);
}

static void test_fixed_skips_finalization(void **st)
{
    (void)st;
    rt_env *e = rt_env_new();
    rt_job job;
    rt_job_init(&job);
    const tw_scan_result *r = run_busy_then_final(e, &job, TW_SEMANTICS_FIXED);
    assert_false(r->condition_met);
    assert_int_equal(r->datapoints, 30);
    rt_env_free(e);

    e = rt_env_new();
    rt_job_init(&job);
    r = run_busy_then_final(e, &job, TW_SEMANTICS_REFERENCE);
    assert_true(r->condition_met);
    assert_int_equal(r->datapoints, 70);
    rt_env_free(e);
}

/* Without any framework event, fixed counts samples only from init_grace
 * minutes after the job's first timestamp (F = 100 s here): a job without
 * the hook is evaluated after the grace. */
static void test_fixed_init_grace_without_framework(void **st)
{
    (void)st;
    rt_env *e = rt_env_new();
    const char *kv[] = {"window",     "10", "patience", "2",
                        "init_grace", "1",  NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t g0 =
        rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
    tw_sample s[8];
    for (size_t i = 0; i < 4; i++) /* 130-145 s: within the grace */
        s[i] = rt_sample(130.0 + 5.0 * (double)i, 1.0, g0);
    for (size_t i = 4; i < 8; i++) /* 160-175 s: after it */
        s[i] = rt_sample(140.0 + 5.0 * (double)i, 1.0, g0);
    tw_scan sc = rt_job_scan(&job, 0, 100000000, 200000000, s, 8, NULL, 0);
    const tw_scan_result *r = rt_run(e, &sc);
    assert_int_equal(r->datapoints, 4);
    assert_true(r->condition_met); /* 4 > patience 2, all low */
    rt_env_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worked_example_reference),
        cmocka_unit_test(test_worked_example_fixed),
        cmocka_unit_test(test_patience_boundary),
        cmocka_unit_test(test_threshold_equality_never_violation),
        cmocka_unit_test(test_fluctuation_branch_needs_p95_above),
        cmocka_unit_test(test_window_zero_is_whole_history),
        cmocka_unit_test(test_multiple_nodes_and_gpus),
        cmocka_unit_test(test_cpu_only_job),
        cmocka_unit_test(test_reset_after_max_datapoints),
        cmocka_unit_test(test_save_restore_equivalence),
        cmocka_unit_test(test_bad_parameters),
        cmocka_unit_test(test_fixed_skips_initialization),
        cmocka_unit_test(test_fixed_skips_finalization),
        cmocka_unit_test(test_fixed_init_grace_without_framework),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
