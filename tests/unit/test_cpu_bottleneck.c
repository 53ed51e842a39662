/* CPUBottleneck (RULES.md §3.2, §4): worked example in both semantics,
 * snapshot window, patience and threshold boundaries, boundary double
 * counting, cross-node collisions, report cap, key order, the reset at
 * 10^6 bottlenecks, checkpoints, bad parameters. */
#include "rule_test_util.h"

#define RULE "CPUBottleneck"
#define SCAN_US 60000000LL

static const char *const EX_KV[] = {"patience", "2", NULL};

typedef struct ex_job {
    rt_job job;
    uint32_t g1, c10, c11, g2, c20;
    tw_sample s[13];
    size_t ns;
    tw_fw_event ev[4];
} ex_job;

/* The worked example of §3.2: algo-1 file then algo-2 file, GPU line
 * first in each round. */
static void build_example(ex_job *x)
{
    rt_job_init(&x->job);
    x->g1 = rt_job_series(&x->job, "algo-1", "gpu", "gpu0", "GPUUtilization");
    x->c10 = rt_job_series(&x->job, "algo-1", "cpu", "cpu0", "CPUUtilization");
    x->c11 = rt_job_series(&x->job, "algo-1", "cpu", "cpu1", "CPUUtilization");
    x->g2 = rt_job_series(&x->job, "algo-2", "gpu", "gpu0", "GPUUtilization");
    x->c20 = rt_job_series(&x->job, "algo-2", "cpu", "cpu0", "CPUUtilization");
    const double r1[] = {100.0, 100.5, 101.0}, gv1[] = {5, 50, 3},
                 cv1[] = {95, 95, 99};
    size_t n = 0;
    for (int i = 0; i < 3; i++) {
        x->s[n++] = rt_sample(r1[i] + 0.010, gv1[i], x->g1);
        x->s[n++] = rt_sample(r1[i] + 0.004, cv1[i], x->c10);
        x->s[n++] = rt_sample(r1[i] + 0.004, 10, x->c11);
    }
    const double r2[] = {100.0, 100.5}, gv2[] = {2, 4}, cv2[] = {97, 20};
    for (int i = 0; i < 2; i++) {
        x->s[n++] = rt_sample(r2[i] + 0.001, gv2[i], x->g2);
        x->s[n++] = rt_sample(r2[i] + 0.002, cv2[i], x->c20);
    }
    x->ns = n;
    x->ev[0] =
        rt_event("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", "algo-1-0",
                 100000000, 102000000, TW_SOURCE_PYTHONTIMELINE);
    x->ev[1] = rt_event("conv1", "cpu_functions", "algo-1-0", 100005000,
                        100055000, TW_SOURCE_MODEL_TIMELINE);
    x->ev[2] = rt_event("kernelA", "gpu_functions-dev:0", "algo-1-0", 100006000,
                        100156000, TW_SOURCE_MODEL_TIMELINE);
    x->ev[3] = rt_event("DataLoaderIter", "DataLoaderIter", "algo-1-0",
                        99000000, 100100000, TW_SOURCE_PYTHONTIMELINE);
}

static const char *EX_HEAD =
    "{\"RuleTriggered\": 1, \"Violations\": 3, \"Details\": {\"bottlenecks\": "
    "{\"100.01\": {\"GPUs\": 1, \"CPUs\": 1}, \"101.01\": {\"GPUs\": 1, "
    "\"CPUs\": 1}, \"100.001\": {\"GPUs\": 1, \"CPUs\": 1}}, "
    "\"low_gpu_utilization\": 4, ";
static const char *EX_TAIL =
    "\"CPU\": {\"conv1\": 100.0}, \"CPU_total\": {\"conv1\": 50000}, \"GPU\": "
    "{\"kernelA\": 100.0}, \"GPU_total\": {\"kernelA\": 150000}, \"phase\": "
    "{\"Step:ModeKeys.TRAIN\": 100.0}, \"phase_time\": {}, \"general\": "
    "{\"DataLoaderIter\": 100.0}}, \"Datapoints\": 5, \"RuleParameters\": "
    "\"threshold:50\\ncpu_threshold:90\\ngpu_threshold:10\\npatience:2\"}";

static void worked_example(tw_semantics sem, const char *ratio)
{
    ex_job x;
    build_example(&x);
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, sem, EX_KV), TW_OK);
    tw_scan sc =
        rt_job_scan(&x.job, 0, 60000000, 120000000, x.s, x.ns, x.ev, 4);
    const tw_scan_result *r = rt_run(e, &sc);
    assert_true(r->condition_met);
    assert_int_equal(r->rule_triggered, 1);
    assert_int_equal(r->violations, 3);
    assert_int_equal(r->datapoints, 5);
    char want[2048];
    snprintf(want, sizeof(want), "%s%s%s", EX_HEAD, ratio, EX_TAIL);
    assert_string_equal(rt_report_text(e), want);
    rt_env_free(e);
}

static void test_worked_example_reference(void **st)
{
    (void)st;
    /* the swapped ratio of §4 */
    worked_example(TW_SEMANTICS_REFERENCE,
                   "\"ratio\": {\"cpu_functions\": 75.0, "
                   "\"gpu_functions-dev:0\": 25.0}, ");
}

static void test_worked_example_fixed(void **st)
{
    (void)st;
    /* labels paired with their own totals: 50 ms CPU vs 150 ms GPU */
    worked_example(TW_SEMANTICS_FIXED, "\"ratio\": {\"cpu_functions\": 25.0, "
                                       "\"gpu_functions-dev:0\": 75.0}, ");
}

/* One-node helper: rounds of (gpu, cpu) at the given times. */
static const tw_scan_result *run_rounds(rt_env *e, rt_job *job, uint64_t k,
                                        const double *ts, const double *gv,
                                        const double *cv, size_t n)
{
    uint32_t g = rt_job_series(job, "algo-1", "gpu", "gpu0", "GPUUtilization");
    uint32_t c = rt_job_series(job, "algo-1", "cpu", "cpu0", "CPUUtilization");
    tw_sample s[64];
    assert_true(2 * n <= 64);
    for (size_t i = 0; i < n; i++) {
        s[2 * i] = rt_sample(ts[i], gv[i], g);
        s[2 * i + 1] = rt_sample(ts[i] + 0.001, cv[i], c);
    }
    tw_scan sc = rt_job_scan(job, k, (int64_t)k * SCAN_US,
                             (int64_t)(k + 1) * SCAN_US, s, 2 * n, NULL, 0);
    return rt_run(e, &sc);
}

static void test_snapshot_window_20ms(void **st)
{
    (void)st;
    for (int sem = 0; sem < 2; sem++) {
        const char *kv[] = {"init_grace", "0", "patience", "0", NULL};
        rt_env *e = rt_env_new();
        assert_int_equal(rt_create(e, RULE, (tw_semantics)sem, kv), TW_OK);
        rt_job job;
        rt_job_init(&job);
        uint32_t g =
            rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
        uint32_t c =
            rt_job_series(&job, "algo-1", "cpu", "cpu0", "CPUUtilization");
        /* anchor 10.0; 10.02 joins (|10.0 - 10.02| <= 0.02 in doubles);
         * 10.0400001 starts a new snapshot (anchor not moved by 10.02) */
        tw_sample s[] = {rt_sample(10.0, 1, g), rt_sample(10.02, 99, c),
                         rt_sample(10.0400001, 99, c)};
        tw_scan sc = rt_job_scan(&job, 0, 0, SCAN_US, s, 3, NULL, 0);
        const tw_scan_result *r = rt_run(e, &sc);
        assert_int_equal(r->datapoints, 2);
        assert_int_equal(r->violations, 1);
        /* 0.0200001 s after an anchor: new snapshot */
        tw_sample s2[] = {rt_sample(70.0, 1, g), rt_sample(70.0200001, 99, c)};
        tw_scan sc2 =
            rt_job_scan(&job, 1, SCAN_US, 2 * SCAN_US, s2, 2, NULL, 0);
        r = rt_run(e, &sc2);
        assert_int_equal(r->datapoints, 4);
        assert_int_equal(r->violations, 1);
        rt_env_free(e);
    }
}

static void test_patience_and_threshold_boundaries(void **st)
{
    (void)st;
    const double ts[] = {10.0, 10.5, 11.0, 11.5};
    const double low[] = {1, 1, 1, 1}, high[] = {99, 99, 99, 99};
    const double mixed_g[] = {1, 50, 1, 50};
    /* 4 snapshots, all bottlenecks: patience 4 -> not evaluated (4 > 4
     * false); patience 3 -> fires */
    for (int p = 3; p <= 4; p++) {
        char pv[8];
        snprintf(pv, sizeof(pv), "%d", p);
        const char *kv[] = {"init_grace", "0", "patience", pv, NULL};
        rt_env *e = rt_env_new();
        assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_REFERENCE, kv), TW_OK);
        rt_job job;
        rt_job_init(&job);
        const tw_scan_result *r = run_rounds(e, &job, 0, ts, low, high, 4);
        assert_int_equal(r->condition_met, p == 3);
        assert_int_equal(r->violations, 4);
        assert_int_equal(r->datapoints, 4);
        rt_env_free(e);
    }
    /* 2 of 4 = 50 %: threshold 50 -> no (strict), 49.9 -> fires */
    const char *t50[] = {"init_grace", "0",  "patience", "0",
                         "threshold",  "50", NULL};
    const char *t49[] = {"init_grace", "0",    "patience", "0",
                         "threshold",  "49.9", NULL};
    for (int i = 0; i < 2; i++) {
        rt_env *e = rt_env_new();
        assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, i ? t49 : t50),
                         TW_OK);
        rt_job job;
        rt_job_init(&job);
        const tw_scan_result *r = run_rounds(e, &job, 0, ts, mixed_g, high, 4);
        assert_int_equal(r->violations, 2);
        assert_int_equal(r->condition_met, i == 1);
        if (i == 1)
            assert_non_null(strstr(rt_report_text(e), "threshold:49.9\\n"));
        rt_env_free(e);
    }
    /* gpu == gpu_threshold is not low; cpu == cpu_threshold not high */
    const double g10[] = {10, 10}, c90[] = {90, 90}, c99[] = {99, 99};
    const double g9[] = {9.99, 9.99};
    const char *kv0[] = {"init_grace", "0", "patience", "0", NULL};
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv0), TW_OK);
    rt_job job;
    rt_job_init(&job);
    assert_int_equal(run_rounds(e, &job, 0, ts, g10, c99, 2)->violations, 0);
    assert_int_equal(run_rounds(e, &job, 1, ts, g9, c90, 2)->violations, 0);
    rt_env_free(e);
}

static void test_not_triggered_key_order_and_details(void **st)
{
    (void)st;
    const double ts[] = {10.0, 10.5, 11.0};
    const double g[] = {1, 50, 50}, c[] = {99, 99, 99};
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_REFERENCE, NULL), TW_OK);
    rt_job job;
    rt_job_init(&job);
    const tw_scan_result *r = run_rounds(e, &job, 0, ts, g, c, 3);
    assert_false(r->condition_met);
    assert_string_equal(
        rt_report_text(e),
        "{\"RuleTriggered\": 0, \"Violations\": 1, \"Details\": "
        "{\"low_gpu_utilization\": 1, \"bottlenecks\": {\"10.0\": {\"GPUs\": "
        "1, "
        "\"CPUs\": 1}}}, \"Datapoints\": 3, \"RuleParameters\": "
        "\"threshold:50\\ncpu_threshold:90\\ngpu_threshold:10\\npatience:"
        "1000\"}");
    rt_env_free(e);
}

static void test_boundary_snapshot_counted_twice(void **st)
{
    (void)st;
    /* A snapshot at exactly the scan boundary (60 s) is delivered to both
     * scans: low_gpu counts it twice, the bottleneck entry is replaced
     * (counted once) with the second scan's counts. Same in both. */
    for (int sem = 0; sem < 2; sem++) {
        const char *kv[] = {"init_grace", "0", "patience", "0", NULL};
        rt_env *e = rt_env_new();
        assert_int_equal(rt_create(e, RULE, (tw_semantics)sem, kv), TW_OK);
        rt_job job;
        rt_job_init(&job);
        uint32_t g =
            rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
        uint32_t c =
            rt_job_series(&job, "algo-1", "cpu", "cpu0", "CPUUtilization");
        uint32_t c1 =
            rt_job_series(&job, "algo-1", "cpu", "cpu1", "CPUUtilization");
        tw_sample s1[] = {rt_sample(59.0, 50, g), rt_sample(60.0, 1, g),
                          rt_sample(60.0, 99, c)};
        tw_scan sc1 = rt_job_scan(&job, 0, 0, SCAN_US, s1, 3, NULL, 0);
        rt_run(e, &sc1);
        tw_sample s2[] = {rt_sample(60.0, 1, g), rt_sample(60.0, 99, c),
                          rt_sample(60.0, 99, c1), rt_sample(61.0, 50, g)};
        tw_scan sc2 =
            rt_job_scan(&job, 1, SCAN_US, 2 * SCAN_US, s2, 4, NULL, 0);
        const tw_scan_result *r = rt_run(e, &sc2);
        assert_int_equal(r->violations, 1);
        assert_int_equal(r->datapoints, 3);
        json_t *rep = rt_report(e);
        rt_assert_bits(rt_jnum(rep, "Details", "low_gpu_utilization"), 2);
        rt_assert_bits(rt_jnum(rep, "Details", "bottlenecks", "60.0", "CPUs"),
                       2);
        json_decref(rep);
        rt_env_free(e);
    }
}

static void test_cross_node_identical_anchor(void **st)
{
    (void)st;
    /* Two nodes with identical timestamps: node 2's rounds restart the
     * anchors at the same values; the bottleneck map merges them. */
    for (int sem = 0; sem < 2; sem++) {
        const char *kv[] = {"init_grace", "0", "patience", "0", NULL};
        rt_env *e = rt_env_new();
        assert_int_equal(rt_create(e, RULE, (tw_semantics)sem, kv), TW_OK);
        rt_job job;
        rt_job_init(&job);
        uint32_t g1 =
            rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
        uint32_t c1 =
            rt_job_series(&job, "algo-1", "cpu", "cpu0", "CPUUtilization");
        uint32_t g2 =
            rt_job_series(&job, "algo-2", "gpu", "gpu0", "GPUUtilization");
        uint32_t c2 =
            rt_job_series(&job, "algo-2", "cpu", "cpu0", "CPUUtilization");
        tw_sample s[] = {rt_sample(10.0, 1, g1), rt_sample(10.0, 99, c1),
                         rt_sample(10.5, 1, g1), rt_sample(10.5, 99, c1),
                         rt_sample(10.0, 1, g2), rt_sample(10.0, 99, c2),
                         rt_sample(10.5, 1, g2), rt_sample(10.5, 99, c2)};
        tw_scan sc = rt_job_scan(&job, 0, 0, SCAN_US, s, 8, NULL, 0);
        const tw_scan_result *r = rt_run(e, &sc);
        assert_int_equal(r->datapoints, 4);
        assert_int_equal(r->violations, 2);
        json_t *rep = rt_report(e);
        rt_assert_bits(rt_jnum(rep, "Details", "bottlenecks", "10.0", "GPUs"),
                       2);
        rt_assert_bits(rt_jnum(rep, "Details", "low_gpu_utilization"), 2);
        json_decref(rep);
        rt_env_free(e);
    }
}

static void test_report_cap_fixed_only(void **st)
{
    (void)st;
    const double ts[] = {10.0, 10.5, 11.0, 11.5, 12.0};
    const double g[] = {1, 1, 1, 1, 1}, c[] = {99, 99, 99, 99, 99};
    const char *kv[] = {"init_grace",         "0", "patience", "0",
                        "max_report_entries", "2", NULL};
    char keys[256];
    for (int sem = 0; sem < 2; sem++) {
        rt_env *e = rt_env_new();
        assert_int_equal(rt_create(e, RULE, (tw_semantics)sem, kv), TW_OK);
        rt_job job;
        rt_job_init(&job);
        const tw_scan_result *r = run_rounds(e, &job, 0, ts, g, c, 3);
        assert_int_equal(r->violations, 3);
        r = run_rounds(e, &job, 1, ts + 3, g, c, 2);
        assert_int_equal(r->violations, 5);
        json_t *rep = rt_report(e);
        rt_jkeys(rt_jget(rep, "Details", "bottlenecks", NULL), keys,
                 sizeof(keys));
        if (sem == TW_SEMANTICS_FIXED)
            assert_string_equal(keys, "11.5,12.0"); /* the most recent */
        else
            assert_string_equal(keys, "10.0,10.5,11.0,11.5,12.0");
        rt_assert_bits(rt_jnum(rep, "Violations"), 5);
        json_decref(rep);
        /* the cap does not appear in RuleParameters */
        assert_null(strstr(rt_report_text(e), "max_report"));
        rt_env_free(e);
    }
}

static void test_reset_at_max_datapoints(void **st)
{
    (void)st;
    /* A long generated stream: 1 000 001 bottleneck snapshots in one scan
     * (more than the internal max_datapoints). The next scan clears the
     * map first: Violations restarts, Datapoints does not. */
    const char *kv[] = {"init_grace",         "0", "patience", "0",
                        "max_report_entries", "3", NULL};
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t g = rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
    uint32_t c = rt_job_series(&job, "algo-1", "cpu", "cpu0", "CPUUtilization");
    size_t rounds = 1000001;
    tw_sample *s = calloc(2 * rounds, sizeof(*s));
    assert_non_null(s);
    for (size_t i = 0; i < rounds; i++) {
        double t = 1000.0 + (double)i * 0.05;
        s[2 * i] = rt_sample(t, 1, g);
        s[2 * i + 1] = rt_sample(t, 99, c);
    }
    tw_scan sc =
        rt_job_scan(&job, 0, 0, 100000 * 1000000LL, s, 2 * rounds, NULL, 0);
    const tw_scan_result *r = rt_run(e, &sc);
    assert_int_equal(r->violations, 1000001);
    assert_int_equal(r->datapoints, 1000001);
    free(s);
    tw_sample s2[] = {rt_sample(200000.0, 1, g), rt_sample(200000.0, 99, c)};
    tw_scan sc2 = rt_job_scan(&job, 1, 100000 * 1000000LL, 200000 * 1000000LL,
                              s2, 2, NULL, 0);
    r = rt_run(e, &sc2);
    assert_int_equal(r->violations, 1);
    assert_int_equal(r->datapoints, 1000002);
    assert_false(r->condition_met); /* 1 / 1000002 */
    json_t *rep = rt_report(e);
    char keys[128];
    assert_string_equal(rt_jkeys(rt_jget(rep, "Details", "bottlenecks", NULL),
                                 keys, sizeof(keys)),
                        "200000.0");
    json_decref(rep);
    rt_env_free(e);
}

static void test_save_restore_equivalence(void **st)
{
    (void)st;
    for (int sem = 0; sem < 2; sem++) {
        const char *kv[] = {"init_grace",         "0", "patience", "2",
                            "max_report_entries", "2", NULL};
        ex_job x;
        build_example(&x);
        rt_env *a = rt_env_new();
        assert_int_equal(rt_create(a, RULE, (tw_semantics)sem, kv), TW_OK);
        /* scan 0: the first 6 samples, scan 1: the rest (boundary at the
         * example's own times is irrelevant to the rule) */
        tw_scan sc1 =
            rt_job_scan(&x.job, 0, 60000000, 120000000, x.s, 6, x.ev, 4);
        rt_run(a, &sc1);
        rt_env *b = rt_clone_via_checkpoint(a, RULE, (tw_semantics)sem, kv);
        for (int k = 0; k < 2; k++) {
            tw_scan sc2 = rt_job_scan(&x.job, 1, 120000000, 180000000, x.s + 6,
                                      x.ns - 6, x.ev, 4);
            rt_run(k ? b : a, &sc2);
        }
        char *ta = strdup(rt_report_text(a));
        assert_non_null(ta);
        assert_string_equal(ta, rt_report_text(b));
        assert_non_null(strstr(ta, "\"ratio\""));
        free(ta);
        /* a third identical scan: replacement via the restored index */
        for (int k = 0; k < 2; k++) {
            tw_scan sc3 = rt_job_scan(&x.job, 2, 180000000, 240000000, x.s + 6,
                                      x.ns - 6, x.ev, 4);
            rt_run(k ? b : a, &sc3);
        }
        ta = strdup(rt_report_text(a));
        assert_string_equal(ta, rt_report_text(b));
        free(ta);
        tw_buf *buf = tw_buf_new();
        assert_int_equal(tw_rule_save(a->rule, buf), TW_OK);
        char err[256];
        assert_int_equal(tw_rule_restore(b->rule, tw_buf_data(buf),
                                         tw_buf_len(buf) - 1, err, sizeof(err)),
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
    const char *a[] = {"threshold", "150", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, a), TW_ERR);
    assert_non_null(strstr(e->err, "threshold"));
    const char *b[] = {"max_report_entries", "0", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, b), TW_ERR);
    const char *c[] = {"cpu_threshold", "x", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, c), TW_ERR);
    const char *d[] = {"io_threshold", "50", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, d), TW_ERR);
    rt_env_free(e);
}

/* Phases (fixed): 4 loading rounds before the first step (GPU idle, CPU
 * busy: bottleneck snapshots to the reference), then 4 training rounds
 * (GPU busy). fixed makes no snapshot of the loading: 4 datapoints, no
 * bottleneck; reference: 8 datapoints, 4 bottlenecks, fires. */
static void test_fixed_skips_initialization(void **st)
{
    (void)st;
    const double ts[] = {10.0, 10.5, 11.0, 11.5, 12.0, 12.5, 13.0, 13.5};
    const double gv[] = {1, 1, 1, 1, 90, 90, 90, 90};
    const double cv[] = {99, 99, 99, 99, 50, 50, 50, 50};
    for (int sem = 0; sem < 2; sem++) {
        /* 4 of 8 is 50 %: threshold 40 makes the reference fire */
        const char *kv[] = {"patience", "0", "threshold", "40", NULL};
        rt_env *e = rt_env_new();
        assert_int_equal(rt_create(e, RULE, (tw_semantics)sem, kv), TW_OK);
        rt_job job;
        rt_job_init(&job);
        uint32_t g =
            rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
        uint32_t c =
            rt_job_series(&job, "algo-1", "cpu", "cpu0", "CPUUtilization");
        tw_sample s[16];
        for (size_t i = 0; i < 8; i++) {
            s[2 * i] = rt_sample(ts[i], gv[i], g);
            s[2 * i + 1] = rt_sample(ts[i] + 0.001, cv[i], c);
        }
        tw_fw_event ev =
            rt_event("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN", "algo-1",
                     11900000, 12100000, TW_SOURCE_PYTHONTIMELINE);
        tw_scan sc = rt_job_scan(&job, 0, 0, SCAN_US, s, 16, &ev, 1);
        const tw_scan_result *r = rt_run(e, &sc);
        int fixed = sem == TW_SEMANTICS_FIXED;
        assert_int_equal(r->datapoints, fixed ? 4 : 8);
        assert_int_equal(r->violations, fixed ? 0 : 4);
        assert_int_equal(r->condition_met, !fixed);
        rt_env_free(e);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worked_example_reference),
        cmocka_unit_test(test_worked_example_fixed),
        cmocka_unit_test(test_snapshot_window_20ms),
        cmocka_unit_test(test_patience_and_threshold_boundaries),
        cmocka_unit_test(test_not_triggered_key_order_and_details),
        cmocka_unit_test(test_boundary_snapshot_counted_twice),
        cmocka_unit_test(test_cross_node_identical_anchor),
        cmocka_unit_test(test_report_cap_fixed_only),
        cmocka_unit_test(test_reset_at_max_datapoints),
        cmocka_unit_test(test_save_restore_equivalence),
        cmocka_unit_test(test_bad_parameters),
        cmocka_unit_test(test_fixed_skips_initialization),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
