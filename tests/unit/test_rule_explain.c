/* test_rule_explain.c - `trainwatch explain` says what the descriptors
 * say: for every built-in rule, one line per parameter with its type,
 * default and bounds, in descriptor order, and each default is one the
 * host accepts; every rule that describes its findings (finding()) also
 * explains them. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plugin_host.h"
#include "rule_explain.h"
#include "windows.h"

/* Output into a fixed buffer (fmemopen), copied out. */
static char *capture(const tw_rule_descriptor *d, const tw_param_spec *p)
{
    static char buf[1 << 16];
    memset(buf, 0, sizeof(buf));
    FILE *m = fmemopen(buf, sizeof(buf) - 1, "w");
    assert_non_null(m);
    if (d != NULL)
        tw_rule_explain(m, d);
    else
        tw_rule_explain_param(m, p);
    assert_int_equal(fclose(m), 0);
    char *copy = strdup(buf);
    assert_non_null(copy);
    return copy;
}

static char *render(const tw_rule_descriptor *d)
{
    return capture(d, NULL);
}

static char *param_line(const tw_param_spec *p)
{
    return capture(NULL, p);
}

static void test_every_builtin_rule(void **st)
{
    (void)st;
    tw_registry *reg = tw_registry_new();
    tw_windows *w = tw_windows_new();
    tw_host_ctx *h = tw_host_ctx_new(reg, w, "explain");
    const char *const *names;
    size_t n = tw_registry_list(reg, &names);
    assert_true(n >= 12);
    size_t with_findings = 0;
    for (size_t i = 0; i < n; i++) {
        const tw_plugin *p;
        char err[512];
        assert_int_equal(tw_registry_find(reg, names[i], &p, err, sizeof(err)),
                         TW_OK);
        const tw_rule_descriptor *d = tw_plugin_descriptor(p);
        char *text = render(d);
        char head[64];
        snprintf(head, sizeof(head), "Parameters (%zu):\n", d->nparams);
        assert_non_null(strstr(text, head));
        size_t at = (size_t)(strstr(text, head) - text);
        for (size_t k = 0; k < d->nparams; k++) {
            const tw_param_spec *ps = &d->params[k];
            char *line = param_line(ps);
            const char *found = strstr(text + at, line);
            if (found == NULL)
                fail_msg("%s: no line '%s'", d->name, line);
            at = (size_t)(found - text) + strlen(line); /* in order */
            char want[128];
            snprintf(want, sizeof(want), "default %s",
                     ps->default_value ? ps->default_value : "None");
            assert_non_null(strstr(line, want));
            if ((ps->type == TW_PARAM_INT || ps->type == TW_PARAM_DOUBLE) &&
                ps->min <= ps->max) {
                snprintf(want, sizeof(want), "from %g to %g", ps->min, ps->max);
                assert_non_null(strstr(line, want));
            }
            free(line);
        }
        /* the defaults shown are the ones the host accepts; the debugging
         * rules that need a tensor selection (AllZero, TensorVariance,
         * UnchangedTensor: the reference requires one) refuse none, saying
         * so, and accept the defaults plus a collection */
        tw_rule *r;
        if (tw_rule_create(p, NULL, NULL, NULL, 0, TW_SEMANTICS_FIXED, h, &r,
                           err, sizeof(err)) != TW_OK) {
            static const char *const k[] = {"collection_names"};
            static const char *const v[] = {"weights"};
            if (strstr(err, "needs collection_names or tensor_regex") == NULL)
                fail_msg("%s: defaults refused: %s", d->name, err);
            if (tw_rule_create(p, NULL, k, v, 1, TW_SEMANTICS_FIXED, h, &r, err,
                               sizeof(err)) != TW_OK)
                fail_msg("%s: defaults and a selection refused: %s", d->name,
                         err);
        }
        tw_rule_destroy(r);
        if (d->finding != NULL) {
            with_findings++;
            assert_non_null(d->finding_help);
            assert_non_null(strstr(text, "A finding, and what to try:\n"));
            assert_null(strstr(text, "gives no advice"));
        }
        free(text);
    }
    /* CPU/IO bottleneck, LowGPU, StepOutlier, MaxInit, Dataloader, GMI,
     * BatchSize, LoadBalancing, Straggler, Progress, StalledTrainingRule,
     * FailSlow; the 15 debugging rules (CheckInputImages the 15th) */
    assert_int_equal(with_findings, 13 + 15);
    tw_host_ctx_free(h);
    tw_windows_free(w);
    tw_registry_free(reg);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_builtin_rule),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
