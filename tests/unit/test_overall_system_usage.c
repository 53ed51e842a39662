/* Unit tests of the OverallSystemUsage plugin (RULES.md §3.10): the
 * worked example (identical in both semantics on a stream without
 * boundary samples), rounding and quantiles, the integer 0 and Infinity
 * quirks, global divisors over several nodes, boundary timestamps summed
 * twice in reference and once in fixed, checkpoint equivalence,
 * parameter validation, and fixed's bounded count maps (256 distinct sums:
 * exact below, within the stated bound above, saved size flat, restore
 * continuing bit for bit). */
#include "rule_test_util.h"

#include <math.h>

#define RULE "OverallSystemUsage"
#define MIN_US 60000000LL

static const tw_scan_result *run_scan(rt_env *e, const rt_job *job, uint64_t k,
                                      tw_sample *s, size_t n)
{
    tw_scan sc = rt_job_scan(job, k, (int64_t)k * MIN_US,
                             (int64_t)(k + 1) * MIN_US, s, n, NULL, 0);
    return rt_run(e, &sc);
}

typedef struct ex_job {
    rt_job job;
    uint32_t c0, c1, w0, w1, gu, gm, mem, rx, tx, iops;
} ex_job;

static void ex_job_init(ex_job *x, const char *node)
{
    rt_job_init(&x->job);
    x->c0 = rt_job_series(&x->job, node, "cpu", "cpu0", "CPUUtilization");
    x->c1 = rt_job_series(&x->job, node, "cpu", "cpu1", "CPUUtilization");
    x->w0 = rt_job_series(&x->job, node, "cpu", "cpu0", "I/OWaitPercentage");
    x->w1 = rt_job_series(&x->job, node, "cpu", "cpu1", "I/OWaitPercentage");
    x->gu = rt_job_series(&x->job, node, "gpu", "gpu0", "GPUUtilization");
    x->gm = rt_job_series(&x->job, node, "gpu", "gpu0", "GPUMemoryUtilization");
    x->mem = rt_job_series(&x->job, node, "memory", "MemoryUsedPercent", "");
    x->rx = rt_job_series(&x->job, node, "network", "ReceiveBytesPerSecond",
                          "Algorithm");
    x->tx = rt_job_series(&x->job, node, "network", "TransmitBytesPerSecond",
                          "Algorithm");
    x->iops = rt_job_series(&x->job, node, "i/o", "IOPS", "");
}

/* One sampling round of the worked example; groups a few ms apart. */
static size_t ex_round(const ex_job *x, tw_sample *s, double t)
{
    size_t n = 0;
    s[n++] = rt_sample(t, 50, x->c0);
    s[n++] = rt_sample(t, 10, x->c1);
    s[n++] = rt_sample(t, 4, x->w0);
    s[n++] = rt_sample(t, 0, x->w1);
    s[n++] = rt_sample(t + 0.002, 90, x->gu);
    s[n++] = rt_sample(t + 0.002, 20, x->gm);
    s[n++] = rt_sample(t + 0.001, 33.3, x->mem);
    s[n++] = rt_sample(t + 0.004, 1000, x->rx);
    s[n++] = rt_sample(t + 0.004, 500, x->tx);
    s[n++] = rt_sample(t + 0.005, 5357.94, x->iops); /* read by nobody */
    return n;
}

static const char *const EXAMPLE_DETAILS =
    "\"Details\": {"
    "\"Network\": {\"algo-1\": {\"max\": 1500.0, \"p99\": 1500.0, "
    "\"p95\": 1500.0, \"p50\": 1500.0, \"min\": 1500.0}}, "
    "\"GPU\": {\"algo-1\": {\"max\": 90.0, \"p99\": 90.0, \"p95\": 90.0, "
    "\"p50\": 90.0, \"min\": 90.0}}, "
    "\"CPU\": {\"algo-1\": {\"max\": 30.0, \"p99\": 30.0, \"p95\": 30.0, "
    "\"p50\": 30.0, \"min\": 30.0}}, "
    "\"CPU memory\": {\"algo-1\": {\"max\": 33.3, \"p99\": 33.3, "
    "\"p95\": 33.3, \"p50\": 33.3, \"min\": 33.3}}, "
    "\"GPU memory\": {\"algo-1\": {\"max\": 20.0, \"p99\": 20.0, "
    "\"p95\": 20.0, \"p50\": 20.0, \"min\": 20.0}}, "
    "\"I/O\": {\"algo-1\": {\"max\": 2.0, \"p99\": 2.0, \"p95\": 2.0, "
    "\"p50\": 2.0, \"min\": 2.0}}}, "
    "\"Datapoints\": 2, \"RuleParameters\": \"\"}";

static void test_worked_example_both_modes(void **state)
{
    (void)state;
    for (int sem = 0; sem < 2; sem++) {
        rt_env *e = rt_env_new();
        assert_int_equal(rt_create(e, RULE, (tw_semantics)sem, NULL), TW_OK);
        /* before any scan there is nothing to summarise */
        assert_non_null(strstr(rt_report_text(e), "\"Details\": {}, "
                                                  "\"Datapoints\": 0"));
        ex_job x;
        ex_job_init(&x, "algo-1");
        tw_sample s[32];
        size_t n = ex_round(&x, s, 10.0);
        n += ex_round(&x, s + n, 10.5);
        const tw_scan_result *r = run_scan(e, &x.job, 0, s, n);
        assert_false(r->condition_met);
        assert_int_equal(r->rule_triggered, 0);
        assert_int_equal(r->violations, 0);
        assert_int_equal(r->datapoints, 2);
        const char *text = rt_report_text(e);
        if (strstr(text, EXAMPLE_DETAILS) == NULL)
            fail_msg("semantics %d: %s", sem, text);
        assert_non_null(strstr(text,
                               "{\"RuleTriggered\": 0, \"Violations\": 0, "
                               "\"Details\": {\"Network\""));
        rt_env_free(e);
    }
}

/* Quantiles of the per-timestamp sums, then round(x, 2). */
static void test_quantiles_and_rounding(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_REFERENCE, NULL), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t m =
        rt_job_series(&job, "algo-1", "memory", "MemoryUsedPercent", "");
    tw_sample s[3] = {rt_sample(1, 10, m), rt_sample(2, 33.333, m),
                      rt_sample(3, 20, m)};
    run_scan(e, &job, 0, s, 3);
    json_t *rep = rt_report(e);
    json_t *c = rt_jget(rep, "Details", "CPU memory", "algo-1", NULL);
    rt_assert_bits(rt_jnum(c, "max"), 33.33);
    rt_assert_bits(rt_jnum(c, "p99"), 33.07);
    rt_assert_bits(rt_jnum(c, "p95"), 32.0);
    rt_assert_bits(rt_jnum(c, "p50"), 20.0);
    rt_assert_bits(rt_jnum(c, "min"), 10.0);
    /* no CPU series: Datapoints stays 0; empty metrics are {} */
    assert_int_equal((int64_t)rt_jnum(rep, "Datapoints"), 0);
    assert_int_equal(json_object_size(rt_jget(rep, "Details", "CPU", NULL)), 0);
    json_decref(rep);
    rt_env_free(e);
}

/* Quirk 2: not > 0 is the integer 0; quirk 4: positive / 0 = Infinity,
 * 0 / 0 = NaN -> 0. */
static void test_integer_zero_and_infinity(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_REFERENCE, NULL), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t gm =
        rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUMemoryUtilization");
    uint32_t w0 =
        rt_job_series(&job, "algo-1", "cpu", "cpu0", "I/OWaitPercentage");
    uint32_t rx = rt_job_series(&job, "algo-1", "network",
                                "ReceiveBytesPerSecond", "Algorithm");
    tw_sample s[4] = {rt_sample(1, 20, gm), rt_sample(1, 0, w0),
                      rt_sample(1, 0, rx), rt_sample(2, 0.001, rx)};
    run_scan(e, &job, 0, s, 4);
    const char *text = rt_report_text(e);
    assert_non_null(strstr(text, "\"GPU memory\": {\"algo-1\": {\"max\": "
                                 "Infinity, \"p99\": Infinity, \"p95\": "
                                 "Infinity, \"p50\": Infinity, \"min\": "
                                 "Infinity}}"));
    assert_non_null(strstr(text, "\"I/O\": {\"algo-1\": {\"max\": 0, "
                                 "\"p99\": 0, \"p95\": 0, \"p50\": 0, "
                                 "\"min\": 0}}"));
    /* 0.001 rounds to 0.0 (a float: it was > 0), 0 stays the integer 0 */
    assert_non_null(strstr(text, "\"Network\": {\"algo-1\": {\"max\": 0.0, "
                                 "\"p99\": 0.0, \"p95\": 0.0, \"p50\": 0.0, "
                                 "\"min\": 0}}"));
    assert_non_null(strstr(text, "\"GPU\": {}, \"CPU\": {}"));
    rt_env_free(e);
}

/* Quirk 1: divisors are global name counts; nodes in first-seen order. */
static void test_multiple_nodes_global_divisors(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, NULL), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t b0 =
        rt_job_series(&job, "algo-2", "gpu", "gpu1", "GPUUtilization");
    uint32_t a0 =
        rt_job_series(&job, "algo-1", "gpu", "gpu0", "GPUUtilization");
    uint32_t ac =
        rt_job_series(&job, "algo-1", "cpu", "cpu0", "CPUUtilization");
    uint32_t bc =
        rt_job_series(&job, "algo-2", "cpu", "cpu0", "CPUUtilization");
    tw_sample s[8] = {rt_sample(1, 30, b0), rt_sample(1, 90, a0),
                      rt_sample(1, 40, bc), rt_sample(2, 40, bc),
                      rt_sample(2, 40, bc), rt_sample(1, 80, ac)};
    const tw_scan_result *r = run_scan(e, &job, 0, s, 6);
    /* first node of the CPU map is algo-2 (its CPU came first): 2 stamps */
    assert_int_equal(r->datapoints, 2);
    json_t *rep = rt_report(e);
    char keys[64];
    assert_string_equal(
        rt_jkeys(rt_jget(rep, "Details", "GPU", NULL), keys, sizeof(keys)),
        "algo-2,algo-1");
    rt_assert_bits(rt_jnum(rep, "Details", "GPU", "algo-1", "max"), 45.0);
    rt_assert_bits(rt_jnum(rep, "Details", "GPU", "algo-2", "max"), 15.0);
    /* core names are shared: |core_ids| = 1; ts 2 holds 40 + 40 */
    rt_assert_bits(rt_jnum(rep, "Details", "CPU", "algo-2", "max"), 80.0);
    rt_assert_bits(rt_jnum(rep, "Details", "CPU", "algo-2", "min"), 40.0);
    json_decref(rep);
    rt_env_free(e);
}

/* Quirk 3: a sample on the scan boundary is delivered twice; reference
 * sums it twice into its timestamp, fixed counts it once. */
static void test_boundary_timestamp(void **state)
{
    (void)state;
    for (int sem = 0; sem < 2; sem++) {
        rt_env *e = rt_env_new();
        assert_int_equal(rt_create(e, RULE, (tw_semantics)sem, NULL), TW_OK);
        rt_job job;
        rt_job_init(&job);
        uint32_t c =
            rt_job_series(&job, "algo-1", "cpu", "cpu0", "CPUUtilization");
        tw_sample s0[2] = {rt_sample(10, 20, c), rt_sample(60, 40, c)};
        run_scan(e, &job, 0, s0, 2);
        tw_sample s1[2] = {rt_sample(60, 40, c), rt_sample(70, 30, c)};
        s1[0].flags = TW_SAMPLE_REPEAT;
        const tw_scan_result *r = run_scan(e, &job, 1, s1, 2);
        assert_int_equal(r->datapoints, 3);
        json_t *rep = rt_report(e);
        rt_assert_bits(rt_jnum(rep, "Details", "CPU", "algo-1", "max"),
                       sem == TW_SEMANTICS_REFERENCE ? 80.0 : 40.0);
        rt_assert_bits(rt_jnum(rep, "Details", "CPU", "algo-1", "min"), 20.0);
        json_decref(rep);
        rt_env_free(e);
    }
}

static void test_checkpoint_equivalence(void **state)
{
    (void)state;
    for (int sem = 0; sem < 2; sem++) {
        rt_env *a = rt_env_new();
        assert_int_equal(rt_create(a, RULE, (tw_semantics)sem, NULL), TW_OK);
        ex_job x;
        ex_job_init(&x, "algo-1");
        uint32_t other =
            rt_job_series(&x.job, "algo-2", "cpu", "cpu3", "CPUUtilization");
        tw_sample s1[32], s2[32];
        size_t n1 = ex_round(&x, s1, 10.0);
        n1 += ex_round(&x, s1 + n1, 60.0);
        s1[n1++] = rt_sample(30, 12.5, other);
        size_t n2 = 0;
        for (size_t i = n1 - 11; i < n1 - 1; i++) { /* the boundary round */
            s2[n2] = s1[i];
            s2[n2++].flags = TW_SAMPLE_REPEAT;
        }
        n2 += ex_round(&x, s2 + n2, 61.0);
        s2[n2++] = rt_sample(62, 7.25, other);
        run_scan(a, &x.job, 0, s1, n1);
        rt_env *c = rt_clone_via_checkpoint(a, RULE, (tw_semantics)sem, NULL);
        const tw_scan_result *ra = run_scan(a, &x.job, 1, s2, n2);
        const tw_scan_result *rc = run_scan(c, &x.job, 1, s2, n2);
        assert_int_equal(ra->datapoints, 3);
        assert_int_equal(ra->datapoints, rc->datapoints);
        char *ta = strdup(rt_report_text(a));
        assert_non_null(ta);
        assert_string_equal(ta, rt_report_text(c));
        free(ta);
        rt_env_free(a);
        rt_env_free(c);
    }
}

/* The cap of fixed's count maps (TW_SYS_REPORT_CAP, rules/common/sysutil.h)
 * and how many distinct sums a long job below gives. */
#define OSU_CAP 256
#define LONG_SCANS 10
#define LONG_PER_SCAN 600 /* sampling rounds a scan (two a second) */

static uint64_t lcg(uint64_t *x)
{
    *x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
    return *x >> 33;
}

/* Scan k of a long job: LONG_PER_SCAN rounds, both cores, the GPU and its
 * memory, the host memory at random hundredths in [lo, lo + 10). Only the
 * first `rounds` rounds are used. */
static size_t long_scan(const ex_job *x, uint64_t k, size_t rounds,
                        uint64_t *seed, tw_sample *s)
{
    size_t n = 0;
    const uint32_t ids[5] = {x->c0, x->c1, x->gu, x->gm, x->mem};
    const double lo[5] = {60, 64, 70, 30, 55};
    for (size_t i = 0; i < rounds; i++) {
        double t = (double)k * 60.0 + (double)i * 0.1;
        for (int m = 0; m < 5; m++)
            s[n++] = rt_sample(t, lo[m] + (double)(lcg(seed) % 1000) / 100.0,
                               ids[m]);
    }
    return n;
}

static json_t *details_of(rt_env *e)
{
    json_t *rep = rt_report(e);
    json_t *d = json_incref(rt_jget(rep, "Details", NULL));
    json_decref(rep);
    return d;
}

/* Feed scans [from, to) of the long job to every env in envs. */
static void feed_long(rt_env **envs, int nenv, const ex_job *x, uint64_t from,
                      uint64_t to, size_t rounds, uint64_t seed)
{
    static tw_sample s[LONG_PER_SCAN * 5];
    for (uint64_t k = from; k < to; k++) {
        uint64_t sd = seed + k;
        size_t n = long_scan(x, k, rounds, &sd, s);
        for (int i = 0; i < nenv; i++) {
            const tw_scan_result *r = run_scan(envs[i], &x->job, k, s, n);
            assert_int_equal(r->rule_triggered, 0); /* never triggers */
        }
    }
}

static size_t saved_bytes(rt_env *e)
{
    tw_buf *b = tw_buf_new();
    assert_non_null(b);
    assert_int_equal(tw_rule_save(e->rule, b), TW_OK);
    size_t len = tw_buf_len(b);
    tw_buf_free(b);
    return len;
}

/* Fewer distinct sums than the cap: fixed is reference byte for byte. */
static void test_fixed_exact_below_cap(void **state)
{
    (void)state;
    rt_env *e[2] = {rt_env_new(), rt_env_new()};
    for (int sem = 0; sem < 2; sem++)
        assert_int_equal(rt_create(e[sem], RULE, (tw_semantics)sem, NULL),
                         TW_OK);
    ex_job x;
    ex_job_init(&x, "algo-1");
    /* 2 scans x 128 rounds = 256 timestamps <= 256 distinct sums */
    feed_long(e, 2, &x, 0, 2, OSU_CAP / 2, 7);
    json_t *d0 = details_of(e[0]), *d1 = details_of(e[1]);
    char *a = json_dumps(d0, JSON_SORT_KEYS);
    char *b = json_dumps(d1, JSON_SORT_KEYS);
    assert_non_null(strstr(a, "\"CPU\": {\"algo-1\""));
    assert_string_equal(a, b);
    free(a);
    free(b);
    json_decref(d0);
    json_decref(d1);
    rt_env_free(e[0]);
    rt_env_free(e[1]);
}

/* Past the cap: max, min and Datapoints exact, the quantiles within
 * R / (K - 1) of the divided sums (R their range) plus the two round(x, 2)
 * of the report; the fixed checkpoint stays small while reference grows. */
static void test_fixed_bounded_long_job(void **state)
{
    (void)state;
    rt_env *e[2] = {rt_env_new(), rt_env_new()};
    for (int sem = 0; sem < 2; sem++)
        assert_int_equal(rt_create(e[sem], RULE, (tw_semantics)sem, NULL),
                         TW_OK);
    ex_job x;
    ex_job_init(&x, "algo-1");
    feed_long(e, 2, &x, 0, LONG_SCANS / 2, LONG_PER_SCAN, 11);
    size_t half = saved_bytes(e[0]);
    feed_long(e, 2, &x, LONG_SCANS / 2, LONG_SCANS, LONG_PER_SCAN, 11);
    size_t full = saved_bytes(e[0]), ref = saved_bytes(e[1]);
    /* 4 metrics with data, <= 256 keys of ~2-4 bytes each */
    assert_true(full < 4 * OSU_CAP * 4 + 1024);
    assert_true(full < half + 512); /* flat: only counts grow */
    assert_true(ref > 8 * full);    /* reference keeps every timestamp */
    json_t *df = details_of(e[0]), *dr = details_of(e[1]);
    static const char *const metrics[4] = {"GPU", "CPU", "CPU memory",
                                           "GPU memory"};
    /* every divided sum spans 9.99 at most: values in [lo, lo + 9.99], the
     * CPU's two cores' sum halved */
    static const char *const st[5] = {"max", "p99", "p95", "p50", "min"};
    for (int m = 0; m < 4; m++) {
        json_t *f = rt_jget(df, metrics[m], "algo-1", NULL);
        json_t *r = rt_jget(dr, metrics[m], "algo-1", NULL);
        double bound = 9.99 / (OSU_CAP - 1) + 0.01 + 1e-9;
        for (int i = 0; i < 5; i++) {
            double a = rt_jnum(f, st[i]), b = rt_jnum(r, st[i]);
            if (i == 0 || i == 4)
                rt_assert_bits(a, b); /* extremes stay exact */
            else if (fabs(a - b) > bound)
                fail_msg("%s %s: fixed %.17g, reference %.17g, bound %g",
                         metrics[m], st[i], a, b, bound);
        }
    }
    json_decref(df);
    json_decref(dr);
    json_t *rf = rt_report(e[0]), *rr = rt_report(e[1]);
    assert_int_equal((int64_t)rt_jnum(rf, "Datapoints"),
                     LONG_SCANS * LONG_PER_SCAN);
    assert_int_equal((int64_t)rt_jnum(rr, "Datapoints"),
                     LONG_SCANS * LONG_PER_SCAN);
    json_decref(rf);
    json_decref(rr);
    rt_env_free(e[0]);
    rt_env_free(e[1]);
}

/* A coarsened map saved and restored continues bit for bit. */
static void test_fixed_restore_after_coarsening(void **state)
{
    (void)state;
    rt_env *a = rt_env_new();
    assert_int_equal(rt_create(a, RULE, TW_SEMANTICS_FIXED, NULL), TW_OK);
    ex_job x;
    ex_job_init(&x, "algo-1");
    feed_long(&a, 1, &x, 0, 3, LONG_PER_SCAN, 5);
    rt_env *c = rt_clone_via_checkpoint(a, RULE, TW_SEMANTICS_FIXED, NULL);
    rt_env *both[2] = {a, c};
    feed_long(both, 2, &x, 3, 6, LONG_PER_SCAN, 5);
    char *ta = strdup(rt_report_text(a));
    assert_non_null(ta);
    assert_string_equal(ta, rt_report_text(c));
    free(ta);
    rt_env_free(a);
    rt_env_free(c);
}

static void test_bad_parameters(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    const char *kv[] = {"window", "3", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv), TW_ERR);
    assert_non_null(strstr(e->err, "window"));
    rt_env_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worked_example_both_modes),
        cmocka_unit_test(test_quantiles_and_rounding),
        cmocka_unit_test(test_integer_zero_and_infinity),
        cmocka_unit_test(test_multiple_nodes_global_divisors),
        cmocka_unit_test(test_boundary_timestamp),
        cmocka_unit_test(test_checkpoint_equivalence),
        cmocka_unit_test(test_bad_parameters),
        cmocka_unit_test(test_fixed_exact_below_cap),
        cmocka_unit_test(test_fixed_bounded_long_job),
        cmocka_unit_test(test_fixed_restore_after_coarsening),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
