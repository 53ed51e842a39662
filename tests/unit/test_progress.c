/* test_progress.c - the wall-clock path: the producers' last-seen record
 * (wallclock.h) and the two rules that judge on it, Progress (learned
 * timeouts, ranks behind vs waiting, budgets, one violation per episode,
 * checkpoint round trip) and StalledTrainingRule (threshold, before the
 * first step, re-arming, the checkpoint pause). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include "rule_test_util.h"
#include "wallclock.h"

#define S(x) ((int64_t)((x)*1000000.0))

static const tw_scan_result *wall(rt_env *e, const tw_wallclock *wc)
{
    assert_int_equal(tw_rule_wallclock(e->rule, wc), TW_OK);
    return tw_rule_last_result(e->rule);
}

static tw_wallclock_node rank_node(const char *node, const char *event,
                                   double end_s, int64_t step, tw_mode mode)
{
    tw_wallclock_node n;
    memset(&n, 0, sizeof(n));
    n.node = node;
    n.is_framework = event != NULL;
    n.first_arrival_us = S(1);
    n.last_arrival_us = S(end_s);
    n.last_event = event;
    n.last_event_start_us = S(end_s);
    n.last_event_end_us = S(end_s);
    n.last_event_step = step;
    n.last_event_mode = mode;
    n.last_event_arrival_us = S(end_s);
    return n;
}

static const char *role_of(json_t *rep, const char *node)
{
    json_t *ranks = rt_jget(rep, "Details", "ranks", NULL);
    size_t i;
    json_t *r;
    json_array_foreach(ranks, i, r)
    {
        if (strcmp(json_string_value(json_object_get(r, "node")), node) == 0)
            return json_string_value(json_object_get(r, "role"));
    }
    return "absent";
}

/* 1 s steps on two ranks: timeout 5 x p99 (1 s) = 5 s over the floor of
 * 2 s; rank 1 stops, rank 0 waits in a section: one violation, rank 1
 * behind, rank 0 waiting; it clears when both go on. */
static void test_progress_behind_and_waiting(void **st)
{
    (void)st;
    rt_env *e = rt_env_new();
    const char *kv[] = {"floor", "2", "warmup", "3", NULL};
    assert_int_equal(rt_create(e, "Progress", TW_SEMANTICS_FIXED, kv), TW_OK);
    rt_job job;
    rt_job_init(&job);
    tw_fw_event ev[20];
    tw_arg args[20];
    char steps[20][8];
    for (int i = 0; i < 20; i++) {
        int n = i / 2;
        ev[i] = rt_event("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN",
                         i % 2 ? "r1" : "r0", S(n), S(n + 0.9),
                         TW_SOURCE_PYTHONTIMELINE);
        snprintf(steps[i], sizeof(steps[i]), "%d", n);
        args[i] = (tw_arg){"step_num", steps[i], TW_ARG_STRING};
        ev[i].args = &args[i];
        ev[i].nargs = 1;
    }
    tw_scan sc = rt_job_scan(&job, 0, 0, S(10), NULL, 0, ev, 20);
    rt_run(e, &sc);
    tw_wallclock_node nodes[2] = {
        rank_node("r0", "Section:allreduce:begin", 10.0, 9, TW_MODE_TRAIN),
        rank_node("r1", "Step:ModeKeys.TRAIN", 9.9, 9, TW_MODE_TRAIN)};
    tw_wallclock wc = {.now_us = S(13), .nodes = nodes, .nnodes = 2};
    assert_int_equal(wall(e, &wc)->condition_met, 0);
    wc.now_us = S(15.5); /* r1 silent 5.6 s > 5 s */
    const tw_scan_result *r = wall(e, &wc);
    assert_int_equal(r->condition_met, 1);
    assert_int_equal(r->violations, 1);
    assert_int_equal(tw_rule_get_status(e->rule), TW_STATUS_ISSUES_FOUND);
    json_t *rep = rt_report(e);
    assert_string_equal(role_of(rep, "r1"), "behind");
    assert_string_equal(role_of(rep, "r0"), "waiting");
    assert_string_equal(
        json_string_value(rt_jget(rep, "Details", "kind", NULL)), "behind");
    json_decref(rep);
    tw_finding f;
    assert_int_equal(tw_rule_finding(e->rule, &f), TW_OK);
    assert_string_equal(f.names[0], "r1");
    assert_non_null(strstr(f.summary, "wait"));

    wc.now_us = S(17); /* still stalled: the same episode */
    r = wall(e, &wc);
    assert_int_equal(r->condition_met, 0);
    assert_int_equal(r->violations, 1);

    /* the round trip keeps the episode: no second violation after it */
    rt_env *c = rt_clone_via_checkpoint(e, "Progress", TW_SEMANTICS_FIXED, kv);
    wc.now_us = S(18);
    assert_int_equal(wall(c, &wc)->violations, 1);

    nodes[0] = rank_node("r0", "Step:ModeKeys.TRAIN", 18.5, 10, TW_MODE_TRAIN);
    nodes[1] = rank_node("r1", "Step:ModeKeys.TRAIN", 18.5, 10, TW_MODE_TRAIN);
    wc.now_us = S(19);
    assert_int_equal(wall(c, &wc)->condition_met, 0);
    rep = rt_report(c);
    assert_false(json_is_true(rt_jget(rep, "Details", "active", NULL)));
    assert_int_equal(
        json_integer_value(rt_jget(rep, "Details", "cleared_us", NULL)), S(19));
    json_decref(rep);
    rt_env_free(c);
    rt_env_free(e);
}

/* Every rank silent alike (no section, within tolerance): together; it
 * stays so while they resume one by one. */
static void test_progress_together(void **st)
{
    (void)st;
    rt_env *e = rt_env_new();
    const char *kv[] = {"floor", "2", NULL};
    assert_int_equal(rt_create(e, "Progress", TW_SEMANTICS_FIXED, kv), TW_OK);
    tw_wallclock_node nodes[3] = {
        rank_node("r0", "Step:ModeKeys.TRAIN", 10.0, 9, TW_MODE_TRAIN),
        rank_node("r1", "Step:ModeKeys.TRAIN", 10.2, 9, TW_MODE_TRAIN),
        rank_node("r2", "Forward-SubModuleInternal", 10.3, -1, TW_MODE_NONE)};
    tw_wallclock wc = {.now_us = S(13), .nodes = nodes, .nnodes = 3};
    assert_int_equal(wall(e, &wc)->condition_met, 1);
    json_t *rep = rt_report(e);
    assert_string_equal(
        json_string_value(rt_jget(rep, "Details", "kind", NULL)), "together");
    assert_string_equal(role_of(rep, "r2"), "stopped");
    json_decref(rep);

    /* they resume one by one: r0 and r2 go on while r1 is still silent;
     * the episode stays a collective hang (r1 is not behind them) */
    nodes[0] = rank_node("r0", "Step:ModeKeys.TRAIN", 14.0, 10, TW_MODE_TRAIN);
    nodes[2] = rank_node("r2", "Step:ModeKeys.TRAIN", 14.0, 10, TW_MODE_TRAIN);
    wc.now_us = S(14.2);
    assert_int_equal(wall(e, &wc)->condition_met, 0);
    rep = rt_report(e);
    assert_true(json_is_true(rt_jget(rep, "Details", "active", NULL)));
    assert_string_equal(
        json_string_value(rt_jget(rep, "Details", "kind", NULL)), "together");
    assert_string_equal(role_of(rep, "r1"), "stopped");
    json_decref(rep);
    nodes[1] = rank_node("r1", "Step:ModeKeys.TRAIN", 14.5, 10, TW_MODE_TRAIN);
    wc.now_us = S(15);
    const tw_scan_result *r = wall(e, &wc);
    assert_int_equal(r->violations, 1);
    rep = rt_report(e);
    assert_false(json_is_true(rt_jget(rep, "Details", "active", NULL)));
    assert_string_equal(
        json_string_value(rt_jget(rep, "Details", "kind", NULL)), "together");
    json_decref(rep);

    /* a new episode where only r1 stops: behind, pictured afresh */
    nodes[0] = rank_node("r0", "Step:ModeKeys.TRAIN", 20.0, 16, TW_MODE_TRAIN);
    nodes[2] = rank_node("r2", "Step:ModeKeys.TRAIN", 20.0, 16, TW_MODE_TRAIN);
    wc.now_us = S(20.2);
    r = wall(e, &wc);
    assert_int_equal(r->condition_met, 1);
    assert_int_equal(r->violations, 2);
    rep = rt_report(e);
    assert_string_equal(
        json_string_value(rt_jget(rep, "Details", "kind", NULL)), "behind");
    assert_string_equal(role_of(rep, "r1"), "behind");
    json_decref(rep);
    rt_env_free(e);
}

/* A checkpoint section has its budget; a rank that never sent an event
 * has the initialization budget; agents alone are no ranks. */
static void test_progress_budgets(void **st)
{
    (void)st;
    rt_env *e = rt_env_new();
    const char *kv[] = {"floor", "2", "initialization_budget", "100", NULL};
    assert_int_equal(rt_create(e, "Progress", TW_SEMANTICS_FIXED, kv), TW_OK);
    tw_wallclock_node nodes[3] = {
        rank_node("r0", "Section:checkpoint:begin", 10.0, 9, TW_MODE_TRAIN),
        rank_node("r1", NULL, 1.0, -1, TW_MODE_NONE),
        rank_node("algo-1", NULL, 1.0, -1, TW_MODE_NONE)};
    /* the agent's JOB_START came alone first: it looked like a rank */
    tw_wallclock wc = {.now_us = S(2), .nodes = nodes, .nnodes = 3};
    assert_int_equal(wall(e, &wc)->condition_met, 0);
    nodes[2].is_system = 1;
    wc.now_us = S(90);
    assert_int_equal(wall(e, &wc)->condition_met, 0); /* 80 s < budgets */
    wc.now_us = S(102);
    assert_int_equal(wall(e, &wc)->condition_met, 1); /* r1: 101 s > 100 */
    json_t *rep = rt_report(e);
    assert_string_equal(role_of(rep, "algo-1"), "absent");
    json_decref(rep);
    tw_finding f;
    assert_int_equal(tw_rule_finding(e->rule, &f), TW_OK);
    assert_non_null(strstr(f.summary, "initialization"));
    rt_env_free(e);
}

static void test_stalled_training(void **st)
{
    (void)st;
    rt_env *e = rt_env_new();
    const char *kv[] = {"threshold", "10", NULL};
    assert_int_equal(
        rt_create(e, "StalledTrainingRule", TW_SEMANTICS_FIXED, kv), TW_OK);
    tw_wallclock wc = {.now_us = S(100)};
    assert_int_equal(wall(e, &wc)->condition_met, 0);
    wc.now_us = S(111); /* before the first step: from its first call */
    assert_int_equal(wall(e, &wc)->condition_met, 1);
    tw_wallclock_node n =
        rank_node("r0", "Step:ModeKeys.TRAIN", 112, 4, TW_MODE_TRAIN);
    wc.nodes = &n;
    wc.nnodes = 1;
    wc.now_us = S(115); /* progress: re-armed */
    assert_int_equal(wall(e, &wc)->condition_met, 0);
    wc.now_us = S(123);
    const tw_scan_result *r = wall(e, &wc);
    assert_int_equal(r->condition_met, 1);
    assert_int_equal(r->violations, 2);
    json_t *rep = rt_report(e);
    assert_int_equal(
        json_integer_value(rt_jget(rep, "Details", "fired_step", NULL)), 4);
    json_decref(rep);
    /* a declared pause: no firing however long */
    n = rank_node("r0", "Section:checkpoint:begin", 124, 5, TW_MODE_TRAIN);
    wc.now_us = S(125);
    wall(e, &wc);
    wc.now_us = S(500);
    assert_int_equal(wall(e, &wc)->condition_met, 0);
    assert_int_equal(tw_rule_last_result(e->rule)->violations, 2);
    rt_env_free(e);
}

/* The tracker keeps, per producer, arrivals and the newest event. */
static void test_tracker(void **st)
{
    (void)st;
    tw_wallclock_tracker *t = tw_wallclock_tracker_new();
    assert_non_null(t);
    tw_batch *b = tw_batch_new();
    b->node = "0-host";
    tw_fw_event ev[2] = {rt_event("Step:ModeKeys.TRAIN", "x", "0-host", S(5),
                                  S(6), TW_SOURCE_PYTHONTIMELINE),
                         rt_event("Forward-SubModuleInternal", "x", "0-host",
                                  S(4), S(4.5), TW_SOURCE_PYTHONTIMELINE)};
    tw_arg a = {"step_num", "17", TW_ARG_STRING};
    ev[0].args = &a;
    ev[0].nargs = 1;
    b->events = ev;
    b->nevents = 2;
    assert_int_equal(tw_wallclock_note_batch(t, b, S(7)), TW_OK);
    b->events = NULL;
    b->nevents = 0;
    assert_int_equal(tw_wallclock_note_batch(t, b, S(9)), TW_OK);
    tw_batch_free(b);
    const tw_wallclock *wc = tw_wallclock_view(t, S(10), 0);
    assert_int_equal(wc->nnodes, 1);
    const tw_wallclock_node *n = &wc->nodes[0];
    assert_string_equal(n->node, "0-host");
    assert_true(n->is_framework);
    assert_false(n->is_system);
    assert_int_equal(n->first_arrival_us, S(7));
    assert_int_equal(n->last_arrival_us, S(9));
    assert_string_equal(n->last_event, "Step:ModeKeys.TRAIN");
    assert_int_equal(n->last_event_step, 17);
    assert_int_equal(n->last_event_arrival_us, S(7));
    assert_int_equal(wc->last_system_arrival_us, 0);
    tw_wallclock_tracker_free(t);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_progress_behind_and_waiting),
        cmocka_unit_test(test_progress_together),
        cmocka_unit_test(test_progress_budgets),
        cmocka_unit_test(test_stalled_training),
        cmocka_unit_test(test_tracker),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
