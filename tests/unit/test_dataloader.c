/* Unit tests of the Dataloader rule (RULES.md §3.9): the worked example
 * with its exact numbers, the patience boundary, both directions, cores
 * frozen after the first CPU scan, the prefetch flag, events without args,
 * the fixed-mode bound on the data-loading times, checkpoints, parameters. */
#include <math.h>

#include "rule_test_util.h"

#define B 1596668220000000LL
#define SEC 1000000LL

typedef struct dl_job {
    rt_job job;
    uint32_t cpu[16];
} dl_job;

static void dj_init(dl_job *d, int cores)
{
    static const char *names[16] = {
        "cpu0", "cpu1", "cpu2",  "cpu3",  "cpu4",  "cpu5",  "cpu6",  "cpu7",
        "cpu8", "cpu9", "cpu10", "cpu11", "cpu12", "cpu13", "cpu14", "cpu15"};
    rt_job_init(&d->job);
    for (int i = 0; i < cores; i++)
        d->cpu[i] =
            rt_job_series(&d->job, "algo-1", "cpu", names[i], "CPUUtilization");
}

static tw_arg pid11 = {"pid", "11", TW_ARG_NUMBER};
static tw_arg pid12 = {"pid", "12", TW_ARG_NUMBER};
static tw_arg pid13 = {"pid", "13", TW_ARG_NUMBER};
static tw_arg init_args[2] = {{"pin_memory", "false", TW_ARG_BOOL},
                              {"num_workers", "2", TW_ARG_NUMBER}};

static tw_fw_event worker(int64_t start, int64_t dur, tw_arg *pid)
{
    tw_fw_event e = rt_event("DataLoaderWorker", "DataLoaderWorker", "algo-1-0",
                             start, start + dur, TW_SOURCE_PYTHONTIMELINE);
    if (pid) {
        e.args = pid;
        e.nargs = 1;
    }
    return e;
}

static const tw_scan_result *run(rt_env *e, dl_job *d, uint64_t k, int ncores,
                                 const tw_fw_event *ev, size_t n)
{
    tw_sample smp[16];
    for (int i = 0; i < ncores; i++)
        smp[i] = rt_sample((double)(B + (int64_t)k * 60 * SEC) / 1e6 + 1, 10,
                           d->cpu[i]);
    tw_scan sc = rt_job_scan(&d->job, k, B + (int64_t)k * 60 * SEC,
                             B + (int64_t)(k + 1) * 60 * SEC, smp,
                             (size_t)ncores, ev, n);
    return rt_run(e, &sc);
}

/* The worked example: 8 cores, two pids in each of three seconds. */
static size_t example_events(tw_fw_event *ev)
{
    size_t n = 0;
    ev[n] = rt_event("DataLoaderIterInitialize", "DataLoaderIterInitialize",
                     "algo-1-0", B, B + 10, TW_SOURCE_PYTHONTIMELINE);
    ev[n].args = init_args;
    ev[n++].nargs = 2;
    for (int s = 0; s < 3; s++) {
        ev[n++] = worker(B + (1 + s) * SEC, 250000, &pid11);
        ev[n++] = worker(B + (1 + s) * SEC + 500000, 250000, &pid12);
    }
    return n;
}

static void test_worked_example(void **state)
{
    (void)state;
    tw_fw_event ev[8];
    size_t n = example_events(ev);
    dl_job d;
    dj_init(&d, 8);
    for (int sem = 0; sem < 2; sem++) {
        rt_env *e = rt_env_new();
        const char *kv[] = {"patience", "1", NULL};
        assert_int_equal(rt_create(e, "Dataloader", (tw_semantics)sem, kv),
                         TW_OK);
        const tw_scan_result *r = run(e, &d, 0, 8, ev, n);
        assert_true(r->condition_met);
        assert_int_equal(r->violations, 1);
        assert_int_equal(r->rule_triggered, 1);
        assert_int_equal(r->datapoints, 6);
        json_t *rep = rt_report(e);
        json_t *det = rt_jget(rep, "Details", NULL);
        char keys[256];
        assert_string_equal(
            rt_jkeys(det, keys, sizeof(keys)),
            "pin_memory,num_workers,cores,dataloaders,dataloading_time");
        assert_true(json_is_false(json_object_get(det, "pin_memory")));
        assert_int_equal(
            json_integer_value(json_object_get(det, "num_workers")), 2);
        assert_int_equal(json_integer_value(json_object_get(det, "cores")), 8);
        assert_int_equal(
            json_integer_value(json_object_get(det, "dataloaders")), 2);
        rt_assert_bits(rt_jnum(det, "dataloading_time", "p25"), 0.25);
        rt_assert_bits(rt_jnum(det, "dataloading_time", "p50"), 0.25);
        rt_assert_bits(rt_jnum(det, "dataloading_time", "p95"), 0.25);
        json_t *probs = rt_jget(det, "dataloading_time", "probs", NULL);
        json_t *edges = rt_jget(det, "dataloading_time", "binedges", NULL);
        assert_int_equal(json_integer_value(json_array_get(probs, 50)), 6);
        rt_assert_bits(json_number_value(json_array_get(edges, 0)), -0.25);
        rt_assert_bits(json_number_value(json_array_get(edges, 100)), 0.75);
        json_decref(rep);
        assert_non_null(strstr(
            rt_report_text(e),
            "\"RuleParameters\": \"min_threshold:70\\nmax_threshold:200\""));
        rt_env_free(e);
    }
}

/* patience counts per-second points strictly; the second scan adds the
 * 4th point and the second violation (Violations accumulate, RuleTriggered
 * stays 1). */
static void test_patience_boundary(void **state)
{
    (void)state;
    tw_fw_event ev[8];
    size_t n = example_events(ev);
    dl_job d;
    dj_init(&d, 8);
    rt_env *e = rt_env_new();
    const char *kv[] = {"patience", "3", NULL};
    assert_int_equal(rt_create(e, "Dataloader", TW_SEMANTICS_REFERENCE, kv),
                     TW_OK);
    assert_false(
        run(e, &d, 0, 8, ev, n)->condition_met); /* 3 points, not > 3 */
    tw_fw_event w = worker(B + 61 * SEC, 1000, &pid11);
    const tw_scan_result *r = run(e, &d, 1, 8, &w, 1);
    assert_true(r->condition_met);
    assert_int_equal(r->violations, 1);
    r = run(e, &d, 2, 8, &w, 1);
    assert_int_equal(r->violations, 2);
    assert_int_equal(r->rule_triggered, 1);
    rt_env_free(e);
}

/* Too many loaders: median 3 > 1 core * 200 %; and cores frozen after the
 * first scan with CPU events (a later 8-core scan changes nothing). */
static void test_too_many_and_frozen_cores(void **state)
{
    (void)state;
    dl_job d;
    dj_init(&d, 8);
    tw_fw_event ev[3] = {worker(B + SEC, 1000, &pid11),
                         worker(B + SEC, 1000, &pid12),
                         worker(B + SEC, 1000, &pid13)};
    rt_env *e = rt_env_new();
    const char *kv[] = {"patience", "0", "min_threshold", "0", NULL};
    assert_int_equal(rt_create(e, "Dataloader", TW_SEMANTICS_FIXED, kv), TW_OK);
    assert_false(
        run(e, &d, 0, 0, NULL, 0)->condition_met); /* no CPU, no loaders */
    const tw_scan_result *r = run(e, &d, 1, 1, ev, 3);
    assert_true(r->condition_met);
    assert_int_equal(r->violations, 1);
    r = run(e, &d, 2, 8, ev, 3);
    assert_int_equal(r->violations, 2);
    json_t *rep = rt_report(e);
    assert_int_equal(json_integer_value(rt_jget(rep, "Details", "cores", NULL)),
                     1);
    assert_int_equal(
        json_integer_value(rt_jget(rep, "Details", "dataloaders", NULL)), 3);
    json_decref(rep);
    rt_env_free(e);
}

/* Quirk 3: a loader event hides prefetch until a later Prefetch event;
 * quirk 4 fix: events without args count as a second with no pid. */
static void test_prefetch_and_no_args(void **state)
{
    (void)state;
    dl_job d;
    dj_init(&d, 2);
    tw_fw_event a[2] = {worker(B + SEC, 1000, NULL),
                        rt_event("PrefetchDataset", "/host:CPU", "algo-1-0",
                                 B + 2 * SEC, B + 2 * SEC + 5,
                                 TW_SOURCE_TF_PROFILER)};
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, "Dataloader", TW_SEMANTICS_REFERENCE, NULL),
                     TW_OK);
    run(e, &d, 0, 2, a, 1);
    json_t *rep = rt_report(e);
    char keys[256];
    assert_string_equal(
        rt_jkeys(rt_jget(rep, "Details", NULL), keys, sizeof(keys)),
        "cores,dataloaders,dataloading_time");
    assert_int_equal(
        json_integer_value(rt_jget(rep, "Details", "dataloaders", NULL)), 0);
    json_decref(rep);
    run(e, &d, 1, 2, a, 2); /* loader then Prefetch: prefetch true */
    rep = rt_report(e);
    assert_string_equal(
        rt_jkeys(rt_jget(rep, "Details", NULL), keys, sizeof(keys)),
        "cores,dataloaders,dataloading_time,prefetch");
    assert_true(json_is_true(rt_jget(rep, "Details", "prefetch", NULL)));
    json_decref(rep);
    run(e, &d, 2, 2, a, 1); /* hidden again: Details keeps the last value */
    rep = rt_report(e);
    assert_true(json_is_true(rt_jget(rep, "Details", "prefetch", NULL)));
    json_decref(rep);
    rt_env_free(e);

    /* Without loader events nothing is written, prefetch false not shown. */
    e = rt_env_new();
    assert_int_equal(rt_create(e, "Dataloader", TW_SEMANTICS_REFERENCE, NULL),
                     TW_OK);
    run(e, &d, 0, 2, a + 1, 1);
    assert_non_null(strstr(rt_report_text(e), "\"Details\": {}"));
    rt_env_free(e);
}

/* Fixed mode bounds the distinct durations; reference keeps them all. */
static void test_fixed_bound_on_times(void **state)
{
    (void)state;
    enum { N = 3000 };
    static tw_fw_event ev[N];
    for (int i = 0; i < N; i++)
        ev[i] = worker(B + (i % 50) * SEC, 1000 + i * 7, &pid11);
    dl_job d;
    dj_init(&d, 4);
    const char *kv[] = {"max_distinct_times", "1000", NULL};
    rt_env *f = rt_env_new(), *r = rt_env_new();
    assert_int_equal(rt_create(f, "Dataloader", TW_SEMANTICS_FIXED, kv), TW_OK);
    assert_int_equal(rt_create(r, "Dataloader", TW_SEMANTICS_REFERENCE, kv),
                     TW_OK);
    run(f, &d, 0, 4, ev, N);
    run(r, &d, 0, 4, ev, N);
    json_t *jf = rt_report(f), *jr = rt_report(r);
    /* Reference: exact numpy quantile of 0.001 + i*7e-6. */
    double p50r = rt_jnum(jr, "Details", "dataloading_time", "p50");
    assert_true(fabs(p50r - (0.001 + 1499.5 * 7e-6)) < 1e-12);
    double p50f = rt_jnum(jf, "Details", "dataloading_time", "p50");
    assert_false(rt_bits_eq(p50f, p50r));   /* coarsened ... */
    assert_true(fabs(p50f - p50r) <= 0.01); /* ... within a quantum */
    /* Histogram extremes and total count stay exact. */
    json_t *ef = rt_jget(jf, "Details", "dataloading_time", "binedges", NULL);
    json_t *er = rt_jget(jr, "Details", "dataloading_time", "binedges", NULL);
    long long total = 0;
    json_t *pf = rt_jget(jf, "Details", "dataloading_time", "probs", NULL);
    for (size_t i = 0; i < 100; i++)
        total += json_integer_value(json_array_get(pf, i));
    assert_int_equal(total, N);
    (void)ef;
    (void)er;
    json_decref(jf);
    json_decref(jr);
    rt_env_free(f);
    rt_env_free(r);
}

static void test_checkpoint_equivalence(void **state)
{
    (void)state;
    tw_fw_event ev[8];
    size_t n = example_events(ev);
    dl_job d;
    dj_init(&d, 8);
    const char *kv[] = {"patience", "1", NULL};
    for (int sem = 0; sem < 2; sem++) {
        rt_env *a = rt_env_new();
        assert_int_equal(rt_create(a, "Dataloader", (tw_semantics)sem, kv),
                         TW_OK);
        run(a, &d, 0, 8, ev, 3);
        rt_env *b =
            rt_clone_via_checkpoint(a, "Dataloader", (tw_semantics)sem, kv);
        run(a, &d, 1, 8, ev + 3, n - 3);
        run(b, &d, 1, 8, ev + 3, n - 3);
        run(a, &d, 2, 8, ev, n);
        run(b, &d, 2, 8, ev, n);
        char *ta = strdup(rt_report_text(a));
        assert_string_equal(ta, rt_report_text(b));
        assert_int_equal(tw_rule_last_result(a->rule)->violations,
                         tw_rule_last_result(b->rule)->violations);
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
    const char *a[] = {"min_threshold", "-5", NULL};
    assert_int_equal(rt_create(e, "Dataloader", TW_SEMANTICS_FIXED, a), TW_ERR);
    assert_non_null(strstr(e->err, "min_threshold"));
    const char *b[] = {"patience", "1.5", NULL};
    assert_int_equal(rt_create(e, "Dataloader", TW_SEMANTICS_FIXED, b), TW_ERR);
    assert_non_null(strstr(e->err, "patience"));
    const char *c[] = {"max_distinct_times", "3", NULL};
    assert_int_equal(rt_create(e, "Dataloader", TW_SEMANTICS_FIXED, c), TW_ERR);
    rt_env_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worked_example),
        cmocka_unit_test(test_patience_boundary),
        cmocka_unit_test(test_too_many_and_frozen_cores),
        cmocka_unit_test(test_prefetch_and_no_args),
        cmocka_unit_test(test_fixed_bound_on_times),
        cmocka_unit_test(test_checkpoint_equivalence),
        cmocka_unit_test(test_bad_parameters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
