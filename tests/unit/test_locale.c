/* test_locale.c - what a person or a parser reads keeps its decimal point
 * when the process runs under a comma-decimal locale (de_DE.UTF-8): the
 * JSON writer's doubles, the finding helpers' durations and sizes, and a
 * rule's finding and report, which the host produces in the C locale
 * (c_locale.h) even after something called setlocale().
 *
 * The locale: the system's de_DE.UTF-8 if installed; otherwise compiled
 * with localedef into a temporary LOCPATH (Debian's `locales` sources);
 * without either the test is skipped, saying so. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "c_locale.h"
#include "json_writer.h"
#include "plugin_host.h"
#include "trainwatch/finding.h"
#include "windows.h"

static char locdir[] = "/tmp/tw_locale_XXXXXX";

/* Switches the whole process to a comma-decimal locale; 0 when none can
 * be had. */
static int comma_locale(void)
{
    if (setlocale(LC_ALL, "de_DE.UTF-8") != NULL)
        return 1;
    if (access("/usr/share/i18n/locales/de_DE", R_OK) != 0 ||
        mkdtemp(locdir) == NULL)
        return 0;
    char cmd[256];
    snprintf(cmd, sizeof(cmd),
             "localedef -i de_DE -f UTF-8 %s/de_DE.UTF-8 >/dev/null 2>&1",
             locdir);
    if (system(cmd) != 0)
        return 0;
    setenv("LOCPATH", locdir, 1);
    return setlocale(LC_ALL, "de_DE.UTF-8") != NULL;
}

static void back_to_c(void)
{
    setlocale(LC_ALL, "C");
    if (locdir[sizeof(locdir) - 2] != 'X') { /* mkdtemp filled it in */
        char cmd[128];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", locdir);
        assert_int_equal(system(cmd), 0);
    }
}

static void test_comma_locale_keeps_points(void **st)
{
    (void)st;
    /* the rule runs its scans before the locale changes (parameters are
     * parsed in the engine's C locale) */
    tw_registry *reg = tw_registry_new();
    tw_windows *w = tw_windows_new();
    tw_host_ctx *h = tw_host_ctx_new(reg, w, "job-locale");
    const tw_plugin *p;
    char err[512], so[1024];
    const char *b = getenv("TW_BUILD_DIR");
    snprintf(so, sizeof(so), "%s/plugins/example/gpu_memory_ceiling.so",
             b ? b : ".");
    assert_int_equal(tw_registry_load(reg, so, "gpu_memory_ceiling_rule", &p,
                                      err, sizeof(err)),
                     TW_OK);
    static const char *const k[] = {"ceiling", "patience"};
    static const char *const v[] = {"90.5", "1"};
    tw_rule *r;
    assert_int_equal(tw_rule_create(p, NULL, k, v, 2, TW_SEMANTICS_FIXED, h, &r,
                                    err, sizeof(err)),
                     TW_OK);
    tw_series s = {0,     0,      TW_METRIC_GPU_MEM,
                   "gpu", "gpu0", "GPUMemoryUtilization"};
    const char *nodes[] = {"algo-1"};
    tw_sample x[] = {{100.25, 95, 0, 0}, {100.75, 96, 0, 0}};
    tw_scan sc = {0};
    sc.series = &s;
    sc.nseries = 1;
    sc.nodes = nodes;
    sc.nnodes = 1;
    sc.windows = w;
    sc.samples = x;
    sc.nsamples = 2;
    sc.end_us = 1000000;
    assert_int_equal(tw_rule_scan(r, &sc), TW_OK);

    if (!comma_locale()) {
        print_message("no de_DE locale and no localedef sources: skipped\n");
        tw_rule_destroy(r);
        tw_host_ctx_free(h);
        tw_windows_free(w);
        tw_registry_free(reg);
        skip();
    }
    char t[64];
    snprintf(t, sizeof(t), "%.1f", 1.5); /* the locale really has commas */
    assert_string_equal(t, "1,5");

    tw_c_locale loc; /* the scope switches this thread only, and back */
    tw_c_locale_enter(&loc);
    snprintf(t, sizeof(t), "%.1f", 1.5);
    assert_string_equal(t, "1.5");
    tw_c_locale_leave(&loc);
    snprintf(t, sizeof(t), "%.1f", 1.5);
    assert_string_equal(t, "1,5");

    tw_json *j = tw_json_new(); /* doubles: digits only, never a comma */
    tw_json_array_begin(j);
    tw_json_double(j, 1.5);
    tw_json_double(j, 1e-7);
    tw_json_double(j, 1700000000.1577463);
    tw_json_array_end(j);
    assert_string_equal(tw_json_str(j), "[1.5, 1e-07, 1700000000.1577463]");
    tw_json_free(j);

    tw_finding_size(1.4 * 1024 * 1024 * 1024, t, sizeof(t));
    assert_string_equal(t, "1.4 GiB");
    tw_finding_duration(0.25, t, sizeof(t));
    assert_string_equal(t, "250 ms");

    /* the rule's finding (its own %g of 90.5) and report (the host's) */
    tw_finding f;
    assert_int_equal(tw_rule_finding(r, &f), TW_OK);
    assert_non_null(strstr(f.parameters, "ceiling 90.5 %"));
    assert_non_null(strstr(f.summary, "above 90.5 %"));
    j = tw_json_new();
    assert_int_equal(tw_rule_report(r, j), TW_OK);
    assert_non_null(strstr(tw_json_str(j), "\"ceiling:90.5\\npatience:1\""));
    tw_json_free(j);
    back_to_c();

    tw_rule_destroy(r);
    tw_host_ctx_free(h);
    tw_windows_free(w);
    tw_registry_free(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_comma_locale_keeps_points),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
