/* Straggler: the node whose TRAIN steps are consistently slower than the
 * fastest node's of the same step number is named, with its relative and
 * individual scores; equal nodes raise nothing; steps seen again in a
 * later scan are not counted twice; a checkpoint restores the same state. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include "rule_test_util.h"

#define RULE "Straggler"
#define NODES 3
#define STEPS 30

/* STEPS TRAIN steps on each of NODES nodes; node 2's take `slow` x 0.25 s
 * (the others 0.25 s, +2 % on node 1). */
typedef struct sg_job {
    rt_job job;
    char nums[STEPS][8];
    tw_arg args[NODES * STEPS];
    tw_fw_event ev[NODES * STEPS];
} sg_job;

static void sg_job_fill(sg_job *j, double slow)
{
    static const char *const nodes[NODES] = {"algo-1", "algo-2", "algo-3"};
    rt_job_init(&j->job);
    for (int n = 0; n < NODES; n++)
        rt_job_node(&j->job, nodes[n]);
    for (int s = 0; s < STEPS; s++) {
        snprintf(j->nums[s], sizeof(j->nums[s]), "%d", s);
        for (int n = 0; n < NODES; n++) {
            double dur = 0.25 * (n == 2 ? slow : n == 1 ? 1.02 : 1.0);
            int64_t start = 101000000 + (int64_t)s * 1000000;
            size_t k = (size_t)(s * NODES + n);
            j->args[k] = (tw_arg){"step_num", j->nums[s], TW_ARG_STRING};
            j->ev[k] = rt_event("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN",
                                nodes[n], start, start + (int64_t)(dur * 1e6),
                                TW_SOURCE_PYTHONTIMELINE);
            j->ev[k].args = &j->args[k];
            j->ev[k].nargs = 1;
        }
    }
}

static const char *const KV[] = {"patience", "20", "window", "20", NULL};

static void test_slow_node_named(void **st)
{
    (void)st;
    sg_job *j = calloc(1, sizeof(*j));
    assert_non_null(j);
    sg_job_fill(j, 2.0);
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, KV), TW_OK);
    tw_scan sc = rt_job_scan(&j->job, 0, 100000000, 160000000, NULL, 0, j->ev,
                             NODES * STEPS);
    const tw_scan_result *r = rt_run(e, &sc);
    assert_true(r->condition_met);
    assert_int_equal(r->violations, 1); /* one straggler, one scan */
    assert_int_equal(r->datapoints, NODES * STEPS);
    json_t *rep = rt_report(e);
    assert_int_equal((int)rt_jnum(rep, "Details", "algo-3", "straggler"), 1);
    assert_int_equal((int)rt_jnum(rep, "Details", "algo-1", "straggler"), 0);
    assert_int_equal((int)rt_jnum(rep, "Details", "algo-2", "straggler"), 0);
    double rel = rt_jnum(rep, "Details", "algo-3", "relative");
    assert_true(rel > 1.99 && rel < 2.01);
    double ind = rt_jnum(rep, "Details", "algo-3", "individual");
    assert_true(ind > 0.99 && ind < 1.01); /* always slow, not slowed down */
    json_decref(rep);
    tw_finding f;
    memset(&f, 0, sizeof(f));
    assert_int_equal(tw_rule_finding(e->rule, &f), TW_OK);
    assert_int_equal(f.nnames, 1);
    assert_string_equal(f.names[0], "algo-3");
    assert_true(f.value > 1.99 && f.limit == 1.5);

    /* the same events again (a step overlapping the boundary is delivered
     * to both scans): nothing is compared twice */
    sc = rt_job_scan(&j->job, 1, 160000000, 220000000, NULL, 0, j->ev,
                     NODES * STEPS);
    r = rt_run(e, &sc);
    assert_int_equal(r->datapoints, NODES * STEPS);

    rt_env *c = rt_clone_via_checkpoint(e, RULE, TW_SEMANTICS_FIXED, KV);
    char *a = strdup(rt_report_text(e));
    assert_string_equal(a, rt_report_text(c));
    free(a);
    rt_env_free(c);
    rt_env_free(e);
    free(j);
}

static void test_equal_nodes_quiet(void **st)
{
    (void)st;
    sg_job *j = calloc(1, sizeof(*j));
    assert_non_null(j);
    sg_job_fill(j, 1.3); /* slower, but below factor 1.5 */
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, KV), TW_OK);
    tw_scan sc = rt_job_scan(&j->job, 0, 100000000, 160000000, NULL, 0, j->ev,
                             NODES * STEPS);
    const tw_scan_result *r = rt_run(e, &sc);
    assert_false(r->condition_met);
    assert_int_equal(r->violations, 0);
    rt_env_free(e);
    free(j);
}

static void test_patience(void **st)
{
    (void)st;
    sg_job *j = calloc(1, sizeof(*j));
    assert_non_null(j);
    sg_job_fill(j, 2.0);
    rt_env *e = rt_env_new();
    const char *kv[] = {"patience", "31", NULL}; /* 30 compared steps */
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv), TW_OK);
    tw_scan sc = rt_job_scan(&j->job, 0, 100000000, 160000000, NULL, 0, j->ev,
                             NODES * STEPS);
    assert_false(rt_run(e, &sc)->condition_met);
    rt_env_free(e);
    free(j);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slow_node_named),
        cmocka_unit_test(test_equal_nodes_quiet),
        cmocka_unit_test(test_patience),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
