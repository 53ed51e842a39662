/* test_plugin_host.c - loading plugins, ABI and parameter validation,
 * rule status transitions. Uses the example custom rule and the fixture
 * plugins under tests/plugins/. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
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

    assert_int_equal(tw_registry_load(reg,
                                      build_path("tests/plugins/bad_abi.so"),
                                      NULL, &p, err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "ABI version 3"));
    assert_non_null(strstr(err, "bad_abi.so"));

    /* ABI 2 without details: refused at load, naming the member. */
    assert_int_equal(tw_registry_load(reg,
                                      build_path("tests/plugins/no_details.so"),
                                      NULL, &p, err, sizeof(err)),
                     TW_ERR);
    assert_non_null(strstr(err, "no_details.so"));
    assert_non_null(strstr(err, "has no 'details"));

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
    assert_non_null(
        strstr(err, "'ceiling' = 101 is out of range [0.0, 100.0]"));

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
    tw_series s = {0,     0,      TW_METRIC_GPU_MEM,
                   "gpu", "gpu0", "GPUMemoryUtilization"};
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
    assert_int_equal(
        tw_registry_load(reg, build_path("tests/plugins/failing_rule.so"),
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

/* A rule stopped by the guard (a custom plugin, isolated by default) is
 * in Error with the signal as the reason, saves without plugin bytes, and
 * that checkpoint restores into a fresh instance as Error. */
static void test_stopped_rule_checkpoint(void **st)
{
    (void)st;
    tw_registry *reg = tw_registry_new();
    tw_windows *w = tw_windows_new();
    tw_host_ctx *h = tw_host_ctx_new(reg, w, "job-iso");
    const tw_plugin *p;
    char err[512];
    assert_int_equal(
        tw_registry_load(reg, build_path("tests/plugins/misbehaving.so"),
                         "misbehaving", &p, err, sizeof(err)),
        TW_OK);
    const char *keys[] = {"mode", "at_scan"}, *values[] = {"segv", "1"};
    tw_rule *r, *c;
    assert_int_equal(tw_rule_create(p, NULL, keys, values, 2,
                                    TW_SEMANTICS_FIXED, h, &r, err,
                                    sizeof(err)),
                     TW_OK);
    assert_true(tw_rule_isolated(r));
    tw_scan sc = {0};
    sc.windows = w;
    assert_int_equal(tw_rule_scan(r, &sc), TW_OK);
    sc.index = 1;
    assert_int_equal(tw_rule_scan(r, &sc), TW_ERR);
    assert_int_equal(tw_rule_get_status(r), TW_STATUS_ERROR);
    assert_non_null(strstr(tw_rule_error(r), "scan 1: the plugin was stopped "
                                             "by signal 11"));
    tw_buf *b = tw_buf_new();
    assert_int_equal(tw_rule_save(r, b), TW_OK);
    assert_int_equal(tw_rule_create(p, NULL, keys, values, 2,
                                    TW_SEMANTICS_FIXED, h, &c, err,
                                    sizeof(err)),
                     TW_OK);
    assert_int_equal(
        tw_rule_restore(c, tw_buf_data(b), tw_buf_len(b), err, sizeof(err)),
        TW_OK);
    assert_int_equal(tw_rule_get_status(c), TW_STATUS_ERROR);
    assert_int_equal(tw_rule_scans(c), 1);
    tw_buf_free(b);
    tw_rule_destroy(c);
    tw_rule_destroy(r);
    tw_host_ctx_free(h);
    tw_windows_free(w);
    tw_registry_free(reg);
}

/* A rule of `sem` from the built-in `name`, or the failing_rule fixture
 * (no <entry>_inputs export: any input counts) when name is NULL. */
static tw_rule *no_data_rule(tw_registry *reg, tw_host_ctx *h, const char *name,
                             tw_semantics sem)
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
    if (tw_rule_create(p, NULL, name ? NULL : k, name ? NULL : v, name ? 0 : 1,
                       sem, h, &r, err, sizeof(err)) != TW_OK)
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

/* ---- ABI 2: findings, checkpoint duty, host size ------------------------ */

static tw_rule *load_rule(tw_registry *reg, tw_host_ctx *h, const char *rel,
                          const char *entry, const char *const *k,
                          const char *const *v, size_t n)
{
    const tw_plugin *p;
    char err[512];
    if (tw_registry_load(reg, build_path(rel), entry, &p, err, sizeof(err)) !=
        TW_OK)
        fail_msg("load %s: %s", rel, err);
    tw_rule *r;
    if (tw_rule_create(p, NULL, k, v, n, TW_SEMANTICS_FIXED, h, &r, err,
                       sizeof(err)) != TW_OK)
        fail_msg("create %s: %s", rel, err);
    return r;
}

/* An ABI 1 plugin still runs and gets a generic finding from its counters
 * and the windows of the scans whose condition was met; without
 * save/restore it is not checkpointable, and the sentence says which rule
 * and what it lacks. A stateless ABI 2 rule and the example are. */
static void test_abi1_and_checkpoint_duty(void **st)
{
    (void)st;
    tw_registry *reg = tw_registry_new();
    tw_windows *w = tw_windows_new();
    tw_host_ctx *h = tw_host_ctx_new(reg, w, "job-abi");
    const tw_host *host = tw_host_ctx_host(h);
    assert_int_equal(host->abi_version, 2);
    assert_int_equal(host->size, sizeof(tw_host));
    assert_true(TW_HOST_HAS(host, buf_len));
    tw_host old = *host;
    old.size = 0; /* what an ABI 1 host leaves in the padding */
    assert_false(TW_HOST_HAS(&old, buf_len));

    static const char *const k[] = {"limit"};
    static const char *const v[] = {"1"};
    tw_rule *r = load_rule(reg, h, "tests/plugins/abi1_counter.so",
                           "abi1_counter", k, v, 1);
    tw_series s = {0, 0, TW_METRIC_GPU_UTIL, "gpu", "gpu0", "GPUUtilization"};
    const char *nodes[] = {"algo-1"};
    tw_sample x[] = {{100.0, 1, 0, 0}, {100.5, 2, 0, 0}};
    tw_scan sc = {0};
    sc.series = &s;
    sc.nseries = 1;
    sc.nodes = nodes;
    sc.nnodes = 1;
    sc.windows = w;
    tw_finding f;
    for (int i = 0; i < 4; i++) {
        sc.index = (uint64_t)i;
        sc.start_us = 1000000 * (int64_t)i;
        sc.end_us = sc.start_us + 1000000;
        sc.samples = x;
        sc.nsamples = i == 1 || i == 2 ? 2 : 1; /* met in scans 1 and 2 */
        assert_int_equal(tw_rule_scan(r, &sc), TW_OK);
        if (i == 0)
            assert_int_equal(tw_rule_finding(r, &f), TW_ERR); /* nothing */
    }
    assert_int_equal(tw_rule_finding(r, &f), TW_OK);
    assert_non_null(strstr(f.summary, "Abi1Counter found 2 violation(s) in 6 "
                                      "datapoints"));
    assert_non_null(strstr(f.magnitude, "held in 2 of 4 scans"));
    assert_int_equal(f.first_us, 1000000); /* scan 1's start */
    assert_int_equal(f.last_us, 3000000);  /* scan 2's end */
    assert_string_equal(f.parameters, "limit 1");
    assert_int_equal(f.nnames, 0);
    assert_true(f.recommendation[0] != '\0');
    /* the met window survives a checkpoint (host header) */
    tw_buf *b = tw_buf_new();
    assert_int_equal(tw_rule_save(r, b), TW_OK);
    tw_rule *c = load_rule(reg, h, "tests/plugins/abi1_counter.so",
                           "abi1_counter", k, v, 1);
    char err[512];
    assert_int_equal(
        tw_rule_restore(c, tw_buf_data(b), tw_buf_len(b), err, sizeof(err)),
        TW_OK);
    tw_finding g;
    assert_int_equal(tw_rule_finding(c, &g), TW_OK);
    assert_int_equal(g.first_us, 1000000);
    assert_int_equal(g.last_us, 3000000);
    tw_buf_free(b);
    tw_rule_destroy(c);

    assert_int_equal(tw_rule_checkpointable(r, err, sizeof(err)), TW_ERR);
    assert_non_null(strstr(err, "rule Abi1Counter"));
    assert_non_null(strstr(err, "abi1_counter.so"));
    assert_non_null(strstr(err, "save() nor restore()"));
    assert_non_null(strstr(err, "TW_RULE_STATELESS"));
    tw_rule_destroy(r);

    r = load_rule(reg, h, "tests/plugins/stateless_rule.so", "stateless_rule",
                  NULL, NULL, 0);
    assert_int_equal(tw_rule_checkpointable(r, err, sizeof(err)), TW_OK);
    tw_rule_destroy(r);
    r = load_rule(reg, h, "plugins/example/gpu_memory_ceiling.so",
                  "gpu_memory_ceiling_rule", NULL, NULL, 0);
    assert_int_equal(tw_rule_checkpointable(r, err, sizeof(err)), TW_OK);
    tw_rule_destroy(r);
    tw_host_ctx_free(h);
    tw_windows_free(w);
    tw_registry_free(reg);
}

/* The example's scans, one per row; -1 ends a row. */
static const double ceiling_rows[][6] = {
    {50, 95, 96, 97, -1}, {96, 40, -1}, {91, 92, 93, 94, 99, -1}, {10, -1},
    {98, 98, 98, -1},
};
#define CEILING_ROWS (sizeof(ceiling_rows) / sizeof(ceiling_rows[0]))

static void ceiling_scan(tw_rule *r, tw_windows *w, size_t k)
{
    static tw_series s = {0,     0,      TW_METRIC_GPU_MEM,
                          "gpu", "gpu0", "GPUMemoryUtilization"};
    static const char *nodes[] = {"algo-1"};
    tw_sample x[6];
    size_t n = 0;
    for (; ceiling_rows[k][n] >= 0; n++)
        x[n] = (tw_sample){1000.0 + 10.0 * (double)k + (double)n,
                           ceiling_rows[k][n], 0, 0};
    tw_scan sc = {0};
    sc.index = k;
    sc.start_us = (int64_t)(1000 + 10 * k) * 1000000;
    sc.end_us = sc.start_us + 10000000;
    sc.series = &s;
    sc.nseries = 1;
    sc.nodes = nodes;
    sc.nnodes = 1;
    sc.samples = x;
    sc.nsamples = n;
    sc.windows = w;
    assert_int_equal(tw_rule_scan(r, &sc), TW_OK);
}

static char *report_text(tw_rule *r)
{
    tw_json *j = tw_json_new();
    assert_int_equal(tw_rule_report(r, j), TW_OK);
    char *t = strdup(tw_json_str(j));
    tw_json_free(j);
    return t;
}

/* The example plugin checkpoints exactly: saved, destroyed, recreated and
 * restored before every scan it reports what an uninterrupted instance
 * reports, finding included; its finding names the GPU, the first and
 * last violation and the longest streak. */
static void test_example_roundtrip_and_finding(void **st)
{
    (void)st;
    tw_registry *reg = tw_registry_new();
    tw_windows *w = tw_windows_new();
    tw_host_ctx *h = tw_host_ctx_new(reg, w, "job-ex");
    static const char *const k[] = {"ceiling", "patience"};
    static const char *const v[] = {"90", "2"};
    const char *so = "plugins/example/gpu_memory_ceiling.so";
    const char *entry = "gpu_memory_ceiling_rule";
    tw_rule *a = load_rule(reg, h, so, entry, k, v, 2);
    tw_rule *b = load_rule(reg, h, so, entry, k, v, 2);
    char err[512];
    for (size_t i = 0; i < CEILING_ROWS; i++) {
        tw_buf *buf = tw_buf_new();
        assert_int_equal(tw_rule_save(b, buf), TW_OK);
        tw_rule_destroy(b);
        b = load_rule(reg, h, so, entry, k, v, 2);
        if (tw_rule_restore(b, tw_buf_data(buf), tw_buf_len(buf), err,
                            sizeof(err)) != TW_OK)
            fail_msg("restore before scan %zu: %s", i, err);
        tw_buf_free(buf);
        ceiling_scan(a, w, i);
        ceiling_scan(b, w, i);
        char *ta = report_text(a), *tb = report_text(b);
        assert_string_equal(ta, tb);
        free(ta);
        free(tb);
    }
    /* violations: the 3rd sample above 90 in a row: 97 (scan 0, ts 1003),
     * 93 (scan 2, ts 1022), 98 (scan 4, ts 1042) */
    assert_int_equal(tw_rule_last_result(a)->violations, 3);
    /* The host writes the envelope from the last scan's counters (3
     * scans met, 15 samples) and the parameters in descriptor order; the
     * example writes Details only. */
    char *rep = report_text(a);
    assert_string_equal(rep,
                        "{\"RuleTriggered\": 3, \"Violations\": 3, "
                        "\"Details\": {\"longest_run\": 5, \"gpu\": "
                        "\"gpu0\"}, \"Datapoints\": 15, "
                        "\"RuleParameters\": \"ceiling:90\\npatience:2\"}");
    free(rep);
    tw_finding fa, fb;
    assert_int_equal(tw_rule_finding(a, &fa), TW_OK);
    assert_int_equal(tw_rule_finding(b, &fb), TW_OK);
    assert_memory_equal(&fa, &fb, sizeof(fa));
    assert_int_equal(fa.nnames, 1);
    assert_string_equal(fa.names[0], "algo-1/gpu0");
    assert_int_equal(fa.first_us, 1003000000);
    assert_int_equal(fa.last_us, 1042000000);
    assert_true(fa.value == 5 && fa.limit == 2); /* 91..99: 5 in a row */
    assert_string_equal(fa.unit, "samples");
    assert_non_null(strstr(fa.magnitude, "5 consecutive samples on "
                                         "algo-1/gpu0"));
    assert_non_null(strstr(fa.parameters, "ceiling 90 %, patience 2"));
    tw_rule_destroy(a);
    tw_rule_destroy(b);
    tw_host_ctx_free(h);
    tw_windows_free(w);
    tw_registry_free(reg);
}

/* Checkpoints of builds before findings have no finding trailer (and the
 * TWR1 host header): they still restore, and a trailer that is cut short
 * is refused. The trailer sizes are those the rules append. */
static void test_checkpoints_without_finding_trailer(void **st)
{
    (void)st;
    static const struct {
        const char *rule;
        size_t trailer;
    } cases[] = {{"LowGPUUtilization", 34}, /* finding 16 + phase 18 */
                 {"Dataloader", 32},
                 {"GPUMemoryIncrease", 24},
                 {"BatchSize", 58},      /* finding 40 + phase 18 */
                 {"LoadBalancing", 34}}; /* finding 16 + phase 18 */
    tw_registry *reg = tw_registry_new();
    tw_windows *w = tw_windows_new();
    tw_host_ctx *h = tw_host_ctx_new(reg, w, "job-old");
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const tw_plugin *p;
        char err[512];
        assert_int_equal(
            tw_registry_find(reg, cases[i].rule, &p, err, sizeof(err)), TW_OK);
        tw_rule *r, *c;
        assert_int_equal(tw_rule_create(p, NULL, NULL, NULL, 0,
                                        TW_SEMANTICS_FIXED, h, &r, err,
                                        sizeof(err)),
                         TW_OK);
        tw_buf *b = tw_buf_new();
        assert_int_equal(tw_rule_save(r, b), TW_OK);
        /* an older build: "TWR1" header (56 bytes), no trailer */
        size_t n = tw_buf_len(b), v2 = 72, v1 = 56;
        uint8_t *old = malloc(n);
        assert_non_null(old);
        memcpy(old, tw_buf_data(b), v1);
        memcpy(old, "1RWT", 4); /* little-endian 0x54575231 */
        memcpy(old + v1, tw_buf_data(b) + v2, n - v2 - cases[i].trailer);
        size_t oldn = v1 + n - v2 - cases[i].trailer;
        assert_int_equal(tw_rule_create(p, NULL, NULL, NULL, 0,
                                        TW_SEMANTICS_FIXED, h, &c, err,
                                        sizeof(err)),
                         TW_OK);
        if (tw_rule_restore(c, old, oldn, err, sizeof(err)) != TW_OK)
            fail_msg("%s: old checkpoint refused: %s", cases[i].rule, err);
        tw_rule_destroy(c);
        /* a trailer cut in half is corrupt */
        assert_int_equal(tw_rule_create(p, NULL, NULL, NULL, 0,
                                        TW_SEMANTICS_FIXED, h, &c, err,
                                        sizeof(err)),
                         TW_OK);
        assert_int_equal(tw_rule_restore(c, tw_buf_data(b),
                                         n - cases[i].trailer / 2, err,
                                         sizeof(err)),
                         TW_ERR);
        tw_rule_destroy(c);
        free(old);
        tw_buf_free(b);
        tw_rule_destroy(r);
    }
    tw_host_ctx_free(h);
    tw_windows_free(w);
    tw_registry_free(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_checkpoints_without_finding_trailer),
        cmocka_unit_test(test_abi1_and_checkpoint_duty),
        cmocka_unit_test(test_example_roundtrip_and_finding),
        cmocka_unit_test(test_load_errors),
        cmocka_unit_test(test_params),
        cmocka_unit_test(test_failing_rule_status),
        cmocka_unit_test(test_stopped_rule_checkpoint),
        cmocka_unit_test(test_no_data_status),
        cmocka_unit_test(test_windows),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
