/* Straggler: the node whose TRAIN steps are consistently slower than the
 * fastest node's of the same step number is named, with its relative and
 * individual scores; equal nodes raise nothing; steps seen again in a
 * later scan are not counted twice; a checkpoint restores the same state.
 * Without step events, the node whose GPUs stay busy while the other
 * nodes' idle is named from system metrics (after sys_patience scans, not
 * when its GPUs are below sys_min_busy, not for a node whose own GPUs are
 * the low ones); with both, step events decide and the finding says
 * whether system metrics confirm it. */
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

/* ---- system metrics ---------------------------------------------------- */

#define SYS_NODES 4
#define SYS_PER_SCAN 60 /* one GPU sample a second */

/* SYS_NODES nodes with one GPU each; per scan SYS_PER_SCAN samples per
 * GPU: node `busy_node` at `busy` %, the others at `idle` % (+-2). */
typedef struct sys_job {
    rt_job job;
    uint32_t gpu[SYS_NODES];
    tw_sample smp[SYS_NODES * SYS_PER_SCAN];
} sys_job;

static const char *const SYS_NAMES[SYS_NODES] = {"algo-1", "algo-2", "algo-3",
                                                 "algo-4"};

static void sys_job_init(sys_job *j)
{
    rt_job_init(&j->job);
    for (int n = 0; n < SYS_NODES; n++)
        j->gpu[n] = rt_job_series(&j->job, SYS_NAMES[n], "gpu", "gpu0",
                                  "GPUUtilization");
}

/* Scan k's samples (scans of 60 s from 100 s). */
static tw_scan sys_scan(sys_job *j, uint64_t k, int busy_node, double busy,
                        double idle)
{
    size_t m = 0;
    for (int t = 0; t < SYS_PER_SCAN; t++)
        for (int n = 0; n < SYS_NODES; n++) {
            double v = (n == busy_node ? busy : idle) + (t % 3 - 1) * 2.0;
            double ts = 100.0 + 60.0 * (double)k + t + 0.5;
            j->smp[m++] = rt_sample(ts, v, j->gpu[n]);
        }
    int64_t start = 100000000 + (int64_t)k * 60000000;
    return rt_job_scan(&j->job, k, start, start + 60000000, j->smp, m, NULL, 0);
}

static void test_system_only_named(void **st)
{
    (void)st;
    sys_job *j = calloc(1, sizeof(*j));
    assert_non_null(j);
    sys_job_init(j);
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, NULL), TW_OK);
    const tw_scan_result *r = NULL;
    for (uint64_t k = 0; k < 3; k++) {
        tw_scan sc = sys_scan(j, k, 1, 91.0, 38.0);
        r = rt_run(e, &sc);
        /* sys_patience 3: judged from the third scan on */
        assert_int_equal(r->condition_met, k == 2);
    }
    assert_int_equal(r->violations, 1);
    assert_int_equal(r->datapoints, 3 * SYS_NODES);
    json_t *rep = rt_report(e);
    json_t *sys = rt_jget(rep, "Details", "system metrics", NULL);
    assert_int_equal((int)rt_jnum(sys, "algo-2", "straggler"), 1);
    assert_int_equal((int)rt_jnum(sys, "algo-1", "straggler"), 0);
    double rel = rt_jnum(sys, "algo-2", "relative");
    assert_true(rel > 91.0 / 38.0 - 0.01 && rel < 91.0 / 38.0 + 0.01);
    assert_string_equal(
        json_string_value(rt_jget(rep, "Details", "decided_by", NULL)),
        "system metrics");
    json_decref(rep);
    tw_finding f;
    memset(&f, 0, sizeof(f));
    assert_int_equal(tw_rule_finding(e->rule, &f), TW_OK);
    assert_int_equal(f.nnames, 1);
    assert_string_equal(f.names[0], "algo-2");
    assert_non_null(strstr(f.summary, "from system metrics"));

    rt_env *c = rt_clone_via_checkpoint(e, RULE, TW_SEMANTICS_FIXED, NULL);
    char *a = strdup(rt_report_text(e));
    assert_string_equal(a, rt_report_text(c));
    free(a);
    /* the restored rule goes on from the same windows */
    tw_scan sc = sys_scan(j, 3, 1, 91.0, 38.0);
    assert_int_equal(rt_run(c, &sc)->violations, 2);
    rt_env_free(c);
    rt_env_free(e);
    free(j);
}

/* Equal nodes, a busy node below sys_min_busy, a node whose own GPUs are
 * the low ones (LowGPUUtilization's finding): no straggler. */
static void test_system_quiet(void **st)
{
    (void)st;
    static const struct {
        int node;
        double busy, idle;
    } cases[] = {{1, 90.0, 90.0}, {1, 40.0, 10.0}, {1, 50.0, 91.0}};
    for (size_t c = 0; c < sizeof(cases) / sizeof(cases[0]); c++) {
        sys_job *j = calloc(1, sizeof(*j));
        assert_non_null(j);
        sys_job_init(j);
        rt_env *e = rt_env_new();
        assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, NULL), TW_OK);
        for (uint64_t k = 0; k < 6; k++) {
            tw_scan sc =
                sys_scan(j, k, cases[c].node, cases[c].busy, cases[c].idle);
            assert_false(rt_run(e, &sc)->condition_met);
        }
        rt_env_free(e);
        free(j);
    }
}

/* Step events and system metrics: steps decide (the slow rank is named by
 * its framework id), system metrics of its node confirm it. */
static void test_steps_and_system(void **st)
{
    (void)st;
    sg_job *steps = calloc(1, sizeof(*steps));
    sys_job *j = calloc(1, sizeof(*j));
    assert_non_null(steps);
    assert_non_null(j);
    sg_job_fill(steps, 2.0); /* "algo-3" slow */
    sys_job_init(j);
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, KV), TW_OK);
    const tw_scan_result *r = NULL;
    for (uint64_t k = 0; k < 3; k++) {
        /* the system metrics point at algo-2: steps must win */
        tw_scan sc = sys_scan(j, k, 1, 91.0, 38.0);
        if (k == 0) {
            sc.events = steps->ev;
            sc.nevents = NODES * STEPS;
        }
        r = rt_run(e, &sc);
        assert_true(r->condition_met);
    }
    assert_int_equal(r->violations, 3);
    tw_finding f;
    memset(&f, 0, sizeof(f));
    assert_int_equal(tw_rule_finding(e->rule, &f), TW_OK);
    assert_int_equal(f.nnames, 1);
    assert_string_equal(f.names[0], "algo-3");
    assert_non_null(strstr(f.magnitude, "system metrics do not show it"));
    rt_env_free(e);

    /* now the system metrics agree: algo-3 busy */
    sys_job_init(j);
    e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, KV), TW_OK);
    for (uint64_t k = 0; k < 3; k++) {
        tw_scan sc = sys_scan(j, k, 2, 91.0, 38.0);
        if (k == 0) {
            sc.events = steps->ev;
            sc.nevents = NODES * STEPS;
        }
        rt_run(e, &sc);
    }
    memset(&f, 0, sizeof(f));
    assert_int_equal(tw_rule_finding(e->rule, &f), TW_OK);
    assert_string_equal(f.names[0], "algo-3");
    assert_non_null(strstr(f.magnitude, "system metrics confirm it"));
    rt_env_free(e);
    free(j);
    free(steps);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slow_node_named),
        cmocka_unit_test(test_equal_nodes_quiet),
        cmocka_unit_test(test_patience),
        cmocka_unit_test(test_system_only_named),
        cmocka_unit_test(test_system_quiet),
        cmocka_unit_test(test_steps_and_system),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
