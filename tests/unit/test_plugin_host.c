/* test_plugin_host.c - loading plugins, ABI and parameter validation,
 * rule status transitions. Uses the example custom rule and the fixture
 * plugins under tests/plugins/. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "json_writer.h"
#include "plugin_host.h"
#include "windows.h"

static char path_buf[1024];

static const char *build_path(const char *rel)
{
    const char *b = getenv("TW_BUILD_DIR");
    snprintf(path_buf, sizeof(path_buf), "%s/%s", b ? b : ".", rel);
    return path_buf;
}

static void test_load_errors(void **st)
{
    (void)st;
    tw_registry *reg = tw_registry_new();
    const tw_plugin *p;
    char err[512];

    assert_int_equal(tw_registry_load(reg, "/nonexistent/rule.so", NULL, &p,
                                      err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "/nonexistent/rule.so"));
    assert_non_null(strstr(err, "No such file"));

    /* The example exports gpu_memory_ceiling_rule, not the default name. */
    const char *ex = build_path("plugins/example/gpu_memory_ceiling.so");
    assert_int_equal(tw_registry_load(reg, ex, NULL, &p, err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "entry symbol 'trainwatch_rule' not found"));

    assert_int_equal(tw_registry_load(reg, build_path("tests/plugins/bad_abi.so"),
                                      NULL, &p, err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "ABI version 2"));
    assert_non_null(strstr(err, "bad_abi.so"));

    /* Not a shared object at all. */
    char tmp[] = "/tmp/tw_notso_XXXXXX";
    int fd = mkstemp(tmp);
    assert_true(fd >= 0);
    assert_int_equal(write(fd, "hello", 5), 5);
    close(fd);
    assert_int_equal(tw_registry_load(reg, tmp, NULL, &p, err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "cannot load"));
    unlink(tmp);

    assert_int_equal(tw_registry_find(reg, "NoSuchRule", &p, err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "unknown rule 'NoSuchRule'"));
    tw_registry_free(reg);
}

static void test_params(void **st)
{
    (void)st;
    tw_registry *reg = tw_registry_new();
    tw_windows *w = tw_windows_new();
    tw_host_ctx *h = tw_host_ctx_new(reg, w, "job-1");
    const tw_plugin *p;
    char err[512];
    const char *ex = build_path("plugins/example/gpu_memory_ceiling.so");
    assert_int_equal(tw_registry_load(reg, ex, "gpu_memory_ceiling_rule", &p,
                                      err, sizeof(err)),
                     TW_OK);
    tw_rule *r;
    const char *k1[] = {"celing"};
    const char *v1[] = {"90"};
    assert_int_equal(tw_rule_create(p, NULL, k1, v1, 1, TW_SEMANTICS_FIXED, h,
                                    &r, err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "unknown parameter 'celing'"));
    assert_non_null(strstr(err, "ceiling patience"));

    const char *k2[] = {"ceiling"};
    const char *v2[] = {"101"};
    assert_int_equal(tw_rule_create(p, NULL, k2, v2, 1, TW_SEMANTICS_FIXED, h,
                                    &r, err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "'ceiling' = 101 is out of range [0.0, 100.0]"));

    const char *k3[] = {"patience"};
    const char *v3[] = {"ten"};
    assert_int_equal(tw_rule_create(p, NULL, k3, v3, 1, TW_SEMANTICS_FIXED, h,
                                    &r, err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "'patience' = 'ten' is not an integer"));

    const char *k4[] = {"ceiling", "patience"};
    const char *v4[] = {"90.5", "2"};
    assert_int_equal(tw_rule_create(p, "Ceiling", k4, v4, 2, TW_SEMANTICS_FIXED,
                                    h, &r, err, sizeof(err)),
                     TW_OK);
    const tw_params *pp = tw_rule_params(r);
    assert_string_equal(pp->values[0].text, "90.5");
    assert_string_equal(pp->values[1].text, "2");
    assert_int_equal(pp->values[1].i, 2);
    assert_string_equal(tw_rule_name(r), "Ceiling");

    /* Drive it: 3 samples above 90.5 with patience 2 -> one violation. */
    tw_series s = {0, 0, TW_METRIC_GPU_MEM, "gpu", "gpu0",
                   "GPUMemoryUtilization"};
    const char *nodes[] = {"algo-1"};
    tw_sample x[] = {{100.0, 95, 0, 0}, {100.5, 96, 0, 0}, {101.0, 97, 0, 0}};
    tw_scan sc = {0};
    sc.series = &s;
    sc.nseries = 1;
    sc.nodes = nodes;
    sc.nnodes = 1;
    sc.samples = x;
    sc.nsamples = 3;
    sc.windows = w;
    assert_int_equal(tw_windows_feed_scan(w, &sc), TW_OK);
    assert_int_equal(tw_rule_scan(r, &sc), TW_OK);
    assert_int_equal(tw_rule_get_status(r), TW_STATUS_ISSUES_FOUND);
    assert_int_equal(tw_rule_last_result(r)->violations, 1);
    assert_int_equal(tw_rule_last_result(r)->datapoints, 3);
    tw_json *j = tw_json_new();
    assert_int_equal(tw_rule_report(r, j), TW_OK);
    assert_non_null(strstr(tw_json_str(j), "\"Violations\": 1"));
    tw_json_free(j);
    tw_rule_destroy(r);
    tw_host_ctx_free(h);
    tw_windows_free(w);
    tw_registry_free(reg);
}

static void test_failing_rule_status(void **st)
{
    (void)st;
    tw_registry *reg = tw_registry_new();
    tw_windows *w = tw_windows_new();
    tw_host_ctx *h = tw_host_ctx_new(reg, w, "job-2");
    const tw_plugin *p;
    char err[512];
    assert_int_equal(tw_registry_load(reg,
                                      build_path("tests/plugins/failing_rule.so"),
                                      "failing_rule", &p, err, sizeof(err)),
                     TW_OK);
    tw_rule *r;
    assert_int_equal(tw_rule_create(p, NULL, NULL, NULL, 0, TW_SEMANTICS_FIXED,
                                    h, &r, err, sizeof(err)),
                     TW_OK);
    tw_scan sc = {0};
    sc.windows = w;
    assert_int_equal(tw_rule_scan(r, &sc), TW_OK);
    assert_int_equal(tw_rule_get_status(r), TW_STATUS_IN_PROGRESS);
    sc.index = 1;
    assert_int_equal(tw_rule_scan(r, &sc), TW_ERR);
    assert_int_equal(tw_rule_get_status(r), TW_STATUS_ERROR);
    assert_non_null(strstr(tw_rule_error(r), "deliberate failure at scan 1"));
    /* Later scans are skipped, the status stays Error after finish. */
    sc.index = 2;
    assert_int_equal(tw_rule_scan(r, &sc), TW_ERR);
    assert_int_equal(tw_rule_scans(r), 1);
    tw_rule_finish(r);
    assert_string_equal(tw_rule_status_name(tw_rule_get_status(r)), "Error");
    tw_rule_destroy(r);
    tw_host_ctx_free(h);
    tw_windows_free(w);
    tw_registry_free(reg);
}

/* A rule of `sem` from the built-in `name`, or the failing_rule fixture
 * (no <entry>_inputs export: any input counts) when name is NULL. */
static tw_rule *no_data_rule(tw_registry *reg, tw_host_ctx *h,
                             const char *name, tw_semantics sem)
{
    const tw_plugin *p;
    char err[512];
    static const char *const k[] = {"fail_at_scan"};
    static const char *const v[] = {"1000"};
    if (name != NULL)
        assert_int_equal(tw_registry_find(reg, name, &p, err, sizeof(err)),
                         TW_OK);
    else
        assert_int_equal(
            tw_registry_load(reg, build_path("tests/plugins/failing_rule.so"),
                             "failing_rule", &p, err, sizeof(err)),
            TW_OK);
    tw_rule *r;
    if (tw_rule_create(p, NULL, name ? NULL : k, name ? NULL : v,
                       name ? 0 : 1, sem, h, &r, err, sizeof(err)) != TW_OK)
        fail_msg("create: %s", err);
    return r;
}

/* A copy of r through a checkpoint (save, restore into a fresh rule). */
static tw_rule *no_data_reload(tw_registry *reg, tw_host_ctx *h, tw_rule *r,
                               const char *name)
{
    tw_buf *b = tw_buf_new();
    assert_non_null(b);
    assert_int_equal(tw_rule_save(r, b), TW_OK);
    tw_rule *c = no_data_rule(reg, h, name, tw_rule_semantics(r));
    char err[256];
    if (tw_rule_restore(c, tw_buf_data(b), tw_buf_len(b), err, sizeof(err)) !=
        TW_OK)
        fail_msg("restore: %s", err);
    tw_buf_free(b);
    tw_rule_destroy(r);
    return c;
}

/* No data is not healthy: a rule never handed input of a kind it reads
 * ends NoData in fixed semantics, NoIssuesFound in reference, and the
 * "received" flag survives a checkpoint. StepOutlier reads framework
 * events only, so scans of system samples are no input for it. */
static void test_no_data_status(void **st)
{
    (void)st;
    tw_registry *reg = tw_registry_new();
    tw_windows *w = tw_windows_new();
    tw_host_ctx *h = tw_host_ctx_new(reg, w, "job-nd");
    assert_non_null(reg);
    assert_non_null(w);
    assert_non_null(h);
    tw_series s = {0, 0, TW_METRIC_GPU_UTIL, "gpu", "gpu0", "GPUUtilization"};
    const char *nodes[] = {"algo-1"};
    tw_sample x[] = {{100.0, 95, 0, 0}, {100.5, 96, 0, 0}};
    tw_scan full = {0}, empty = {0};
    full.series = &s;
    full.nseries = 1;
    full.nodes = nodes;
    full.nnodes = 1;
    full.samples = x;
    full.nsamples = 2;
    full.windows = w;
    empty.windows = w;
    assert_int_equal(tw_windows_feed_scan(w, &full), TW_OK);

    struct {
        const char *rule;
        tw_semantics sem;
        const tw_scan *scan;
        int received;
        tw_rule_status final;
    } cases[] = {
        {"StepOutlier", TW_SEMANTICS_FIXED, &full, 0, TW_STATUS_NO_DATA},
        {"StepOutlier", TW_SEMANTICS_REFERENCE, &full, 0,
         TW_STATUS_NO_ISSUES_FOUND},
        {NULL, TW_SEMANTICS_FIXED, &full, 1, TW_STATUS_NO_ISSUES_FOUND},
        {NULL, TW_SEMANTICS_FIXED, &empty, 0, TW_STATUS_NO_DATA},
        {NULL, TW_SEMANTICS_REFERENCE, &empty, 0, TW_STATUS_NO_ISSUES_FOUND},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(*cases); i++) {
        tw_rule *r = no_data_rule(reg, h, cases[i].rule, cases[i].sem);
        assert_int_equal(tw_rule_received_input(r), 0);
        assert_int_equal(tw_rule_scan(r, cases[i].scan), TW_OK);
        assert_int_equal(tw_rule_get_status(r), TW_STATUS_IN_PROGRESS);
        r = no_data_reload(reg, h, r, cases[i].rule);
        assert_int_equal(tw_rule_received_input(r), cases[i].received);
        tw_rule_finish(r);
        assert_int_equal(tw_rule_get_status(r), cases[i].final);
        r = no_data_reload(reg, h, r, cases[i].rule);
        assert_int_equal(tw_rule_get_status(r), cases[i].final);
        tw_rule_destroy(r);
    }
    assert_string_equal(tw_rule_status_name(TW_STATUS_NO_DATA), "NoData");
    tw_host_ctx_free(h);
    tw_windows_free(w);
    tw_registry_free(reg);
}

static void test_windows(void **st)
{
    (void)st;
    tw_windows *w = tw_windows_new();
    assert_int_equal(tw_windows_request(w, TW_METRIC_GPU_UTIL, 3), TW_OK);
    assert_int_equal(tw_windows_add_series(w, 0, TW_METRIC_GPU_UTIL), TW_OK);
    assert_int_equal(tw_windows_add_series(w, 1, TW_METRIC_CPU_UTIL), TW_OK);
    assert_int_equal(tw_windows_add_series(w, 5, TW_METRIC_CPU_UTIL), TW_ERR);
    assert_int_equal(tw_windows_read(w, 0, (double[1]){0}, 1), 0);
    for (int i = 1; i <= 5; i++) {
        tw_windows_push(w, 0, i);
        tw_windows_push(w, 1, 10 * i);
    }
    double out[8];
    assert_int_equal(tw_windows_read(w, 0, out, 8), 3);
    assert_true(out[0] == 3 && out[1] == 4 && out[2] == 5);
    assert_int_equal(tw_windows_read(w, 0, out, 2), 2);
    assert_true(out[0] == 4 && out[1] == 5);
    assert_int_equal(tw_windows_read(w, 1, out, 8), 0); /* not windowed */
    tw_series_stats s;
    assert_int_equal(tw_windows_stats(w, 1, &s), TW_OK);
    assert_int_equal(s.count, 5);
    assert_true(s.mean == 30.0 && s.min == 10.0 && s.max == 50.0);
    assert_true(s.std > 14.142 && s.std < 14.143); /* sqrt(200) */
    /* Growing the request keeps the newest values. */
    assert_int_equal(tw_windows_request(w, TW_METRIC_GPU_UTIL, 5), TW_OK);
    tw_windows_push(w, 0, 6);
    assert_int_equal(tw_windows_read(w, 0, out, 8), 4);
    assert_true(out[0] == 3 && out[3] == 6);
    assert_true(tw_windows_memory(w) >= 5 * sizeof(double));
    tw_windows_free(w);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_failing_rule_status),
        cmocka_unit_test(test_no_data_status),
        cmocka_unit_test(test_windows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
