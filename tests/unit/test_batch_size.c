/* Unit tests of the BatchSize plugin (RULES.md §3.5): the worked example
 * in both semantics (memory-IQR quirk), thresholds and patience at their
 * boundaries, the rule clock as last_timestamp, the union-of-cores
 * divisor, missing GPU data (no crash), CPU-only jobs, several nodes,
 * checkpoint equivalence, parameter validation, and fixed's small
 * Details-only count maps on a long job near the thresholds (verdicts
 * equal to reference, boxes within the bound, restore bit for bit). */
#include "rule_test_util.h"

#include <math.h>

#define RULE "BatchSize"
#define MIN_US 60000000LL

typedef struct bs_job {
    rt_job job;
    uint32_t c0, c1, g0u, g0m;
} bs_job;

static void bs_job_init(bs_job *b, const char *node)
{
    rt_job_init(&b->job);
    b->c0 = rt_job_series(&b->job, node, "cpu", "cpu0", "CPUUtilization");
    b->c1 = rt_job_series(&b->job, node, "cpu", "cpu1", "CPUUtilization");
    b->g0u = rt_job_series(&b->job, node, "gpu", "gpu0", "GPUUtilization");
    b->g0m =
        rt_job_series(&b->job, node, "gpu", "gpu0", "GPUMemoryUtilization");
}

/* One sampling round at ts: both cores at cpu, gpu0 util and memory. */
static size_t round_at(const bs_job *b, tw_sample *out, double ts, double cpu,
                       double util, double mem)
{
    out[0] = rt_sample(ts, cpu, b->c0);
    out[1] = rt_sample(ts, cpu, b->c1);
    out[2] = rt_sample(ts + 0.003, util, b->g0u);
    out[3] = rt_sample(ts + 0.003, mem, b->g0m);
    return 4;
}

static const tw_scan_result *run_scan(rt_env *e, const rt_job *job, uint64_t k,
                                      tw_sample *s, size_t n)
{
    tw_scan sc = rt_job_scan(job, k, (int64_t)k * MIN_US,
                             (int64_t)(k + 1) * MIN_US, s, n, NULL, 0);
    return rt_run(e, &sc);
}

static void check_box(json_t *box, const double want[6])
{
    char keys[128];
    assert_string_equal(rt_jkeys(box, keys, sizeof(keys)),
                        "p25,p50,p75,p95,upper,lower");
    const char *k[6] = {"p25", "p50", "p75", "p95", "upper", "lower"};
    for (int i = 0; i < 6; i++)
        rt_assert_bits(rt_jnum(box, k[i]), want[i]);
}

static rt_env *worked_example(tw_semantics sem, const tw_scan_result **res)
{
    rt_env *e = rt_env_new();
    const char *kv[] = {"init_grace", "0", "patience", "2",
                        "window",     "3", NULL};
    assert_int_equal(rt_create(e, RULE, sem, kv), TW_OK);
    static bs_job b;
    bs_job_init(&b, "algo-1");
    const double cpu[] = {10, 20, 30, 40}, util[] = {5, 6, 7, 8},
                 mem[] = {50, 60, 61, 62};
    tw_sample s[16];
    size_t n = 0;
    for (int i = 0; i < 4; i++)
        n += round_at(&b, s + n, 1.0 + i, cpu[i], util[i], mem[i]);
    *res = run_scan(e, &b.job, 0, s, n);
    return e;
}

static void test_worked_example_reference(void **state)
{
    (void)state;
    const tw_scan_result *r;
    rt_env *e = worked_example(TW_SEMANTICS_REFERENCE, &r);
    assert_int_equal(r->rule_triggered, 1);
    assert_int_equal(r->violations, 1);
    assert_int_equal(r->datapoints, 4);
    assert_true(r->condition_met);
    json_t *rep = rt_report(e);
    char keys[128];
    assert_string_equal(
        rt_jkeys(rt_jget(rep, "Details", NULL), keys, sizeof(keys)),
        "algo-1,last_timestamp");
    assert_string_equal(
        rt_jkeys(rt_jget(rep, "Details", "algo-1", NULL), keys, sizeof(keys)),
        "cpu,gpu0,gpu0_memory");
    const double cpu[6] = {17.5, 25.0, 32.5, 38.5, 40.0, 10.0};
    const double gpu[6] = {5.75, 6.5, 7.25, 7.85, 8.0, 5.0};
    const double mem[6] = {57.5, 60.5, 61.25, 61.85, 62.0, 50.0};
    check_box(rt_jget(rep, "Details", "algo-1", "cpu", NULL), cpu);
    check_box(rt_jget(rep, "Details", "algo-1", "gpu0", NULL), gpu);
    check_box(rt_jget(rep, "Details", "algo-1", "gpu0_memory", NULL), mem);
    assert_int_equal((int64_t)rt_jnum(rep, "Details", "last_timestamp"), 0);
    assert_string_equal(json_string_value(rt_jget(rep, "RuleParameters", NULL)),
                        "cpu_threshold_p95:70\ngpu_threshold_p95:70\n"
                        "gpu_memory_threshold_p95:70\npatience:2\nwindow:3");
    json_decref(rep);
    rt_env_free(e);
}

static void test_worked_example_fixed_memory_iqr(void **state)
{
    (void)state;
    const tw_scan_result *r;
    rt_env *e = worked_example(TW_SEMANTICS_FIXED, &r);
    assert_int_equal(r->rule_triggered, 1);
    json_t *rep = rt_report(e);
    const double mem[6] = {57.5, 60.5, 61.25, 61.85, 62.0, 51.875};
    check_box(rt_jget(rep, "Details", "algo-1", "gpu0_memory", NULL), mem);
    json_decref(rep);
    rt_env_free(e);
}

/* cpu95 == threshold is not "below" (strict <); the same for GPU/memory. */
static void test_threshold_boundary(void **state)
{
    (void)state;
    struct {
        const char *key, *val;
        int64_t want;
    } cases[] = {
        {"cpu_threshold_p95", "50", 0},
        {"cpu_threshold_p95", "50.01", 1},
        {"gpu_threshold_p95", "20", 0},
        {"gpu_threshold_p95", "20.01", 1},
        {"gpu_memory_threshold_p95", "30", 0},
        {"gpu_memory_threshold_p95", "30.01", 1},
    };
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        rt_env *e = rt_env_new();
        const char *kv[] = {"init_grace", "0",          "patience",
                            "0",          "window",     "2",
                            cases[c].key, cases[c].val, NULL};
        assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv), TW_OK);
        bs_job b;
        bs_job_init(&b, "algo-1");
        tw_sample s[12];
        size_t n = 0;
        for (int i = 0; i < 3; i++)
            n += round_at(&b, s + n, 1.0 + i, 50, 20, 30);
        const tw_scan_result *r = run_scan(e, &b.job, 0, s, n);
        if (r->rule_triggered != cases[c].want)
            fail_msg("%s=%s: %lld", cases[c].key, cases[c].val,
                     (long long)r->rule_triggered);
        rt_env_free(e);
    }
}

/* len(c) must be more than patience and more than window. */
static void test_patience_and_window_boundary(void **state)
{
    (void)state;
    struct {
        const char *patience, *window;
        int64_t want;
    } cases[] = {{"3", "2", 0}, {"2", "2", 1}, {"0", "3", 0}, {"0", "2", 1}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        rt_env *e = rt_env_new();
        const char *kv[] = {
            "init_grace",    "0", "patience", cases[c].patience, "window",
            cases[c].window, NULL};
        assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_REFERENCE, kv), TW_OK);
        bs_job b;
        bs_job_init(&b, "algo-1");
        tw_sample s[12];
        size_t n = 0;
        for (int i = 0; i < 3; i++)
            n += round_at(&b, s + n, 1.0 + i, 10, 10, 10);
        const tw_scan_result *r = run_scan(e, &b.job, 0, s, n);
        if (r->rule_triggered != cases[c].want)
            fail_msg("case %zu: %lld", c, (long long)r->rule_triggered);
        assert_int_equal(r->datapoints, 3);
        rt_env_free(e);
    }
}

/* Quirk 2: last_timestamp is the rule's clock (F under ProfilerReport). */
static void test_last_timestamp_is_rule_clock(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    const char *kv[] = {"init_grace", "0", "patience", "0",
                        "window",     "1", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_REFERENCE, kv), TW_OK);
    bs_job b;
    bs_job_init(&b, "algo-1");
    tw_sample s[8];
    size_t n = round_at(&b, s, 61.0, 10, 10, 10);
    n += round_at(&b, s + n, 62.0, 10, 10, 10);
    tw_scan sc = rt_job_scan(&b.job, 1, MIN_US, 2 * MIN_US, s, n, NULL, 0);
    sc.rule_clock_us = 12345; /* frozen clock of a ProfilerReport sub-rule */
    const tw_scan_result *r = rt_run(e, &sc);
    assert_int_equal(r->rule_triggered, 1);
    json_t *rep = rt_report(e);
    assert_int_equal((int64_t)rt_jnum(rep, "Details", "last_timestamp"), 12345);
    json_decref(rep);
    rt_env_free(e);
}

/* Quirk 4: the divisor is the union of core names of all nodes. Node 1
 * has cpu0+cpu1, node 2 cpu0+cpu2: |cores| = 3. */
static void test_cores_union_divisor(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    const char *kv[] = {"init_grace", "0", "patience",          "0",
                        "window",     "1", "cpu_threshold_p95", "100",
                        NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_REFERENCE, kv), TW_OK);
    bs_job b;
    bs_job_init(&b, "algo-1");
    uint32_t d0 =
        rt_job_series(&b.job, "algo-2", "cpu", "cpu0", "CPUUtilization");
    uint32_t d2 =
        rt_job_series(&b.job, "algo-2", "cpu", "cpu2", "CPUUtilization");
    tw_sample s[16];
    size_t n = 0;
    for (int i = 0; i < 2; i++)
        n += round_at(&b, s + n, 1.0 + i, 30, 10, 10);
    for (int i = 0; i < 3; i++) {
        s[n++] = rt_sample(1.0 + i, 60, d0);
        s[n++] = rt_sample(1.0 + i, 30, d2);
    }
    const tw_scan_result *r = run_scan(e, &b.job, 0, s, n);
    /* algo-1 violates; algo-2 has CPU data but no GPU: skipped, no crash */
    assert_int_equal(r->rule_triggered, 1);
    assert_int_equal(r->datapoints, 3); /* algo-2, the last CPU node */
    json_t *rep = rt_report(e);
    rt_assert_bits(rt_jnum(rep, "Details", "algo-1", "cpu", "p50"), 60.0 / 3);
    assert_null(rt_jget(rep, "Details", "algo-2", NULL));
    json_decref(rep);
    rt_env_free(e);
}

/* Quirk 3 fixed in both modes: utilisation without a memory series. */
static void test_gpu_without_memory(void **state)
{
    (void)state;
    for (int sem = 0; sem < 2; sem++) {
        rt_env *e = rt_env_new();
        const char *kv[] = {"init_grace", "0", "patience", "0",
                            "window",     "1", NULL};
        assert_int_equal(rt_create(e, RULE, (tw_semantics)sem, kv), TW_OK);
        bs_job b;
        bs_job_init(&b, "algo-1");
        uint32_t g1 =
            rt_job_series(&b.job, "algo-1", "gpu", "gpu1", "GPUUtilization");
        tw_sample s[16];
        size_t n = 0;
        for (int i = 0; i < 2; i++) {
            n += round_at(&b, s + n, 1.0 + i, 10, 10, 10);
            s[n++] = rt_sample(1.003 + i, 5, g1);
        }
        const tw_scan_result *r = run_scan(e, &b.job, 0, s, n);
        assert_int_equal(r->rule_triggered, 1); /* gpu0 only */
        json_t *rep = rt_report(e);
        char keys[128];
        assert_string_equal(rt_jkeys(rt_jget(rep, "Details", "algo-1", NULL),
                                     keys, sizeof(keys)),
                            "cpu,gpu0,gpu0_memory");
        json_decref(rep);
        rt_env_free(e);
    }
}

static void test_cpu_only_job(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    const char *kv[] = {"init_grace", "0", "patience", "0",
                        "window",     "1", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv), TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint32_t c0 =
        rt_job_series(&job, "algo-1", "cpu", "cpu0", "CPUUtilization");
    tw_sample s[3] = {rt_sample(1, 5, c0), rt_sample(2, 5, c0),
                      rt_sample(3, 5, c0)};
    const tw_scan_result *r = run_scan(e, &job, 0, s, 3);
    assert_false(r->condition_met);
    assert_int_equal(r->datapoints, 3);
    json_t *rep = rt_report(e);
    assert_int_equal(json_object_size(rt_jget(rep, "Details", NULL)), 0);
    json_decref(rep);
    rt_env_free(e);
}

/* Quirk 5: a timestamp on the scan boundary is a CPU point in both scans;
 * quirk 7: every violating GPU counts once per scan. */
static void test_boundary_points_and_per_scan_count(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    const char *kv[] = {"init_grace", "0", "patience", "0",
                        "window",     "1", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_REFERENCE, kv), TW_OK);
    bs_job b;
    bs_job_init(&b, "algo-1");
    tw_sample s[8];
    size_t n = round_at(&b, s, 30.0, 10, 10, 10);
    n += round_at(&b, s + n, 60.0, 10, 10, 10);
    run_scan(e, &b.job, 0, s, n);
    /* the boundary round again, flagged as a repeat, plus a new one */
    for (size_t i = 4; i < 8; i++) {
        s[i - 4] = s[i];
        s[i - 4].flags = TW_SAMPLE_REPEAT;
    }
    n = 4 + round_at(&b, s + 4, 61.0, 10, 10, 10);
    const tw_scan_result *r = run_scan(e, &b.job, 1, s, n);
    assert_int_equal(r->datapoints, 4);
    assert_int_equal(r->rule_triggered, 2);
    rt_env_free(e);
}

static void test_checkpoint_equivalence(void **state)
{
    (void)state;
    for (int sem = 0; sem < 2; sem++) {
        const char *kv[] = {"init_grace", "0", "patience", "3",
                            "window",     "4", NULL};
        rt_env *a = rt_env_new();
        assert_int_equal(rt_create(a, RULE, (tw_semantics)sem, kv), TW_OK);
        bs_job b;
        bs_job_init(&b, "algo-1");
        tw_sample s1[40], s2[40];
        size_t n1 = 0, n2 = 0;
        for (int i = 0; i < 5; i++) {
            n1 += round_at(&b, s1 + n1, 1.0 + i, 3.5 * i, 2 + i % 3, 40 - i);
            n2 += round_at(&b, s2 + n2, 61.0 + i, 7 + i, 9 - i, 20 + 2.5 * i);
        }
        run_scan(a, &b.job, 0, s1, n1);
        rt_env *c = rt_clone_via_checkpoint(a, RULE, (tw_semantics)sem, kv);
        const tw_scan_result *ra = run_scan(a, &b.job, 1, s2, n2);
        const tw_scan_result *rc = run_scan(c, &b.job, 1, s2, n2);
        assert_true(ra->rule_triggered > 0);
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

/* ---- a long job near the thresholds --------------------------------- */

#define BS_CAP 256        /* TW_SYS_REPORT_CAP, rules/common/sysutil.h */
#define LONG_PER_SCAN 600 /* rounds a scan */

static uint64_t lcg(uint64_t *x)
{
    *x = *x * 6364136223846793005ULL + 1442695040888963407ULL;
    return *x >> 33;
}

/* Scan k: every value a random hundredth in [lo, lo + 10), lo = base +
 * step * (k % 4): with base 60 and step 2 the windowed p95s sit around the
 * 70 thresholds (~69.5 to ~75.5) and the verdict changes from scan to
 * scan; with base 55 and step 1 the whole history's p95 stays below. */
static size_t long_scan(const bs_job *b, uint64_t k, double base, double step,
                        tw_sample *s)
{
    uint64_t seed = 1000 + k;
    double lo = base + step * (double)(k % 4);
    size_t n = 0;
    for (size_t i = 0; i < LONG_PER_SCAN; i++) {
        double t = (double)k * 60.0 + (double)i * 0.1;
        s[n++] = rt_sample(t, lo + (double)(lcg(&seed) % 1000) / 100.0, b->c0);
        s[n++] = rt_sample(t, lo + (double)(lcg(&seed) % 1000) / 100.0, b->c1);
        s[n++] = rt_sample(t + 0.003, lo + (double)(lcg(&seed) % 1000) / 100.0,
                           b->g0u);
        s[n++] = rt_sample(t + 0.003, lo + (double)(lcg(&seed) % 1000) / 100.0,
                           b->g0m);
    }
    return n;
}

/* Scans [from, to) into every env; their verdicts must be equal. Returns
 * how many scans triggered. */
static int feed_long(rt_env **e, int nenv, const bs_job *b, uint64_t from,
                     uint64_t to, double base, double step)
{
    static tw_sample s[LONG_PER_SCAN * 4];
    int triggered = 0;
    int64_t before = 0; /* rule_triggered counts up over the job */
    for (uint64_t k = from; k < to; k++) {
        size_t n = long_scan(b, k, base, step, s);
        tw_scan_result first = {0};
        for (int i = 0; i < nenv; i++) {
            const tw_scan_result *r = run_scan(e[i], &b->job, k, s, n);
            if (i == 0) {
                first = *r;
                triggered += r->rule_triggered > before;
                before = r->rule_triggered;
                continue;
            }
            if (r->rule_triggered != first.rule_triggered ||
                r->violations != first.violations ||
                r->datapoints != first.datapoints)
                fail_msg("scan %llu env %d: triggered %lld/%lld, violations "
                         "%lld/%lld",
                         (unsigned long long)k, i, (long long)r->rule_triggered,
                         (long long)first.rule_triggered,
                         (long long)r->violations, (long long)first.violations);
        }
    }
    return triggered;
}

static void check_boxes_close(rt_env *f, rt_env *r, double bound)
{
    json_t *rf = rt_report(f), *rr = rt_report(r);
    const char *k[6] = {"p25", "p50", "p75", "p95", "upper", "lower"};
    json_t *bf[2] = {rt_jget(rf, "Details", "algo-1", "cpu", NULL),
                     rt_jget(rf, "Details", "algo-1", "gpu0", NULL)};
    json_t *br[2] = {rt_jget(rr, "Details", "algo-1", "cpu", NULL),
                     rt_jget(rr, "Details", "algo-1", "gpu0", NULL)};
    for (int b = 0; b < 2; b++)
        for (int i = 0; i < 6; i++) {
            double x = rt_jnum(bf[b], k[i]), y = rt_jnum(br[b], k[i]);
            if (fabs(x - y) > bound)
                fail_msg("box %d %s: %.17g vs %.17g (bound %g)", b, k[i], x, y,
                         bound);
        }
    json_decref(rf);
    json_decref(rr);
}

/* Default window: the verdicts read the ring (exact), so fixed's capped
 * maps change no verdict; the Details boxes (p25..p95 within R/(K-1),
 * whiskers within 4 R/(K-1), R = 16 the values' range) stay close. With
 * window 0 the verdict reads the map: fixed keeps the exact-hundredths cap
 * there and its boxes equal reference's bit for bit. */
static void test_long_job_near_thresholds(void **state)
{
    (void)state;
    for (int w0 = 0; w0 < 2; w0++) {
        const char *kv[] = {"init_grace",     "0", "patience", "0", "window",
                            w0 ? "0" : "500", NULL};
        rt_env *e[2] = {rt_env_new(), rt_env_new()};
        assert_int_equal(rt_create(e[0], RULE, TW_SEMANTICS_FIXED, kv), TW_OK);
        assert_int_equal(rt_create(e[1], RULE, TW_SEMANTICS_REFERENCE, kv),
                         TW_OK);
        bs_job b;
        bs_job_init(&b, "algo-1");
        int trig = feed_long(e, 2, &b, 0, 12, w0 ? 55 : 60, w0 ? 1 : 2);
        if (w0) {
            assert_true(trig > 0); /* so Details has boxes */
            check_boxes_close(e[0], e[1], 0.0);
        } else {
            assert_true(trig > 0 && trig < 12); /* verdicts do change */
            check_boxes_close(e[0], e[1], 4.0 * 16.0 / (BS_CAP - 1) + 1e-9);
        }
        rt_env_free(e[0]);
        rt_env_free(e[1]);
    }
}

/* Past the cap a saved and restored BatchSize continues bit for bit. */
static void test_restore_after_coarsening(void **state)
{
    (void)state;
    const char *kv[] = {"init_grace", "0", "patience", "0", NULL};
    rt_env *a = rt_env_new();
    assert_int_equal(rt_create(a, RULE, TW_SEMANTICS_FIXED, kv), TW_OK);
    bs_job b;
    bs_job_init(&b, "algo-1");
    feed_long(&a, 1, &b, 0, 4, 60, 2);
    rt_env *c = rt_clone_via_checkpoint(a, RULE, TW_SEMANTICS_FIXED, kv);
    rt_env *both[2] = {a, c};
    feed_long(both, 2, &b, 4, 8, 60, 2);
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
    const char *kv1[] = {"init_grace", "0", "window", "-1", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv1), TW_ERR);
    assert_non_null(strstr(e->err, "window"));
    const char *kv2[] = {"init_grace", "0", "cpu_threshold_p95", "101", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv2), TW_ERR);
    assert_non_null(strstr(e->err, "cpu_threshold_p95"));
    const char *kv3[] = {"init_grace", "0", "patience", "1.5", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv3), TW_ERR);
    rt_env_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worked_example_reference),
        cmocka_unit_test(test_worked_example_fixed_memory_iqr),
        cmocka_unit_test(test_threshold_boundary),
        cmocka_unit_test(test_patience_and_window_boundary),
        cmocka_unit_test(test_last_timestamp_is_rule_clock),
        cmocka_unit_test(test_cores_union_divisor),
        cmocka_unit_test(test_gpu_without_memory),
        cmocka_unit_test(test_cpu_only_job),
        cmocka_unit_test(test_boundary_points_and_per_scan_count),
        cmocka_unit_test(test_checkpoint_equivalence),
        cmocka_unit_test(test_bad_parameters),
        cmocka_unit_test(test_long_job_near_thresholds),
        cmocka_unit_test(test_restore_after_coarsening),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
