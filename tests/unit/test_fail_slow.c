/* FailSlow: a rank whose TRAIN steps slow down persistently is named with
 * its onset, medians and slowdown; in a synchronous job (every rank's step
 * slows, only one rank's forward pass) only that rank is named and the
 * others are "waiting"; a job-wide slowdown without forward events names
 * nobody; evaluation passes and checkpoint-long steps raise nothing; steps
 * delivered again in a later scan are not counted twice; a checkpoint
 * restores the same state. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <math.h>

#include "rule_test_util.h"

#define RULE "FailSlow"
#define RANKS 3
#define STEPS 400
#define T0 100000000LL /* 100 s after the epoch */

static const char *const NODES[RANKS] = {"algo-1-0", "algo-1-1", "algo-1-2"};

/* The events of one job: per rank STEPS TRAIN steps (and optional forward
 * passes and EVAL steps), built by fs_job_fill. */
typedef struct fs_job {
    rt_job job;
    char nums[STEPS][8];
    tw_arg args[RANKS * STEPS * 2];
    tw_fw_event ev[RANKS * STEPS * 3];
    size_t n;
} fs_job;

typedef struct fs_shape {
    int slow_rank; /* -1: none                                   */
    double factor; /* its compute's slowdown from `onset`        */
    int onset;
    int sync;       /* every rank's step lasts the slowest's       */
    int forward;    /* forward events                              */
    int all_slow;   /* every rank slows by `factor` (job-wide)    */
    int eval_every; /* EVAL steps (5) every this many; 0: none     */
    int ckpt_every; /* a 20x step every this many; 0: none         */
} fs_shape;

/* A fixed small jitter (+-2 %), different per rank and step. */
static double jitter(int r, int k)
{
    return 1.0 + 0.02 * sin(1.7 * k + 2.3 * r) * cos(0.37 * k);
}

static void fs_job_fill(fs_job *j, const fs_shape *sh)
{
    memset(j, 0, sizeof(*j));
    rt_job_init(&j->job);
    int64_t t[RANKS];
    size_t na = 0;
    for (int r = 0; r < RANKS; r++)
        t[r] = T0;
    for (int k = 0; k < STEPS; k++) {
        snprintf(j->nums[k], sizeof(j->nums[k]), "%d", k);
        double comp[RANKS], slowest = 0;
        for (int r = 0; r < RANKS; r++) {
            comp[r] = 0.1 * jitter(r, k);
            if (k >= sh->onset && (r == sh->slow_rank || sh->all_slow))
                comp[r] *= sh->factor;
            if (sh->ckpt_every && k && k % sh->ckpt_every == 0)
                comp[r] *= 20;
            slowest = comp[r] > slowest ? comp[r] : slowest;
        }
        for (int r = 0; r < RANKS; r++) {
            if (sh->eval_every && k && k % sh->eval_every == 0)
                for (int e = 0; e < 5; e++) {
                    j->ev[j->n++] = rt_event(
                        "Step:ModeKeys.EVAL", "Step:ModeKeys.EVAL", NODES[r],
                        t[r], t[r] + 40000, TW_SOURCE_PYTHONTIMELINE);
                    t[r] += 40000;
                }
            double d = sh->sync ? slowest * 1.05 : comp[r];
            int64_t end = t[r] + (int64_t)(d * 1e6);
            j->args[na] = (tw_arg){"step_num", j->nums[k], TW_ARG_STRING};
            tw_fw_event *e = &j->ev[j->n++];
            *e = rt_event("Step:ModeKeys.TRAIN", "Step:ModeKeys.TRAIN",
                          NODES[r], t[r], end, TW_SOURCE_PYTHONTIMELINE);
            e->args = &j->args[na++];
            e->nargs = 1;
            if (sh->forward)
                j->ev[j->n++] =
                    rt_event("Net", "Forward-SubModuleInternal", NODES[r], t[r],
                             t[r] + (int64_t)(0.4 * comp[r] * 1e6),
                             TW_SOURCE_PYTHONTIMELINE);
            t[r] = end;
        }
    }
}

/* persist 2 s: the test's steps are 0.1 s */
static const char *const KV[] = {"persist", "2", NULL};

/* Runs the events in scans of `scan_s` seconds (an event overlapping a
 * boundary goes to both, flagged TW_EVENT_REPEAT in the later one, as the
 * host delivers them); returns the last scan's result. */
static const tw_scan_result *run_scans(rt_env *e, fs_job *j, double scan_s)
{
    int64_t len = (int64_t)(scan_s * 1e6);
    int64_t last = 0;
    for (size_t i = 0; i < j->n; i++)
        last = j->ev[i].end_us > last ? j->ev[i].end_us : last;
    tw_fw_event *sel = calloc(j->n, sizeof(*sel));
    assert_non_null(sel);
    const tw_scan_result *r = NULL;
    for (uint64_t k = 0; T0 + (int64_t)k * len <= last; k++) {
        int64_t a = T0 + (int64_t)k * len, b = a + len;
        size_t n = 0;
        for (size_t i = 0; i < j->n; i++)
            if (j->ev[i].end_us >= a && j->ev[i].start_us <= b) {
                sel[n] = j->ev[i];
                if (sel[n].start_us < a)
                    sel[n].flags |= TW_EVENT_REPEAT;
                n++;
            }
        tw_scan sc = rt_job_scan(&j->job, k, a, b, NULL, 0, sel, n);
        r = rt_run(e, &sc);
    }
    free(sel);
    return r;
}

static const char *verdict(json_t *rep, const char *node)
{
    json_t *v = rt_jget(rep, "Details", "ranks", node, "verdict", NULL);
    assert_non_null(v);
    return json_string_value(v);
}

static void test_slow_rank_named(void **st)
{
    (void)st;
    fs_job *j = malloc(sizeof(*j));
    assert_non_null(j);
    fs_shape sh = {.slow_rank = 2, .factor = 1.3, .onset = 200};
    fs_job_fill(j, &sh);
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, KV), TW_OK);
    const tw_scan_result *r = run_scans(e, j, 7.0);
    assert_true(r->condition_met);
    /* warm-up 20 steps per rank are not tested */
    assert_int_equal(r->datapoints, RANKS * (STEPS - 20));
    json_t *rep = rt_report(e);
    assert_string_equal(verdict(rep, "algo-1-2"), "fail-slow");
    assert_string_equal(verdict(rep, "algo-1-0"), "none");
    assert_string_equal(verdict(rep, "algo-1-1"), "none");
    double onset = rt_jnum(rep, "Details", "ranks", "algo-1-2", "onset_step");
    double det = rt_jnum(rep, "Details", "ranks", "algo-1-2", "detected_step");
    assert_true(fabs(onset - 200) <= 2);
    assert_true(det > 200 && det <= 200 + 40); /* persist 2 s = 20 steps */
    double sd = rt_jnum(rep, "Details", "ranks", "algo-1-2", "slowdown");
    assert_true(fabs(sd - 1.3) < 0.03);
    double before = rt_jnum(rep, "Details", "ranks", "algo-1-2", "before_s");
    assert_true(fabs(before - 0.1) < 0.003);
    json_decref(rep);

    tw_finding f;
    memset(&f, 0, sizeof(f));
    assert_int_equal(tw_rule_finding(e->rule, &f), TW_OK);
    assert_int_equal(f.nnames, 1);
    assert_string_equal(f.names[0], "algo-1-2");
    assert_true(fabs(f.value - 1.3) < 0.03 && f.limit == 1.1);
    assert_non_null(strstr(f.summary, "algo-1-2 became 1.3"));
    assert_non_null(strstr(f.magnitude, "rank-hours"));
    assert_true(f.first_us > T0);

    rt_env *c = rt_clone_via_checkpoint(e, RULE, TW_SEMANTICS_FIXED, KV);
    char *a = strdup(rt_report_text(e));
    assert_string_equal(a, rt_report_text(c));
    free(a);
    rt_env_free(c);
    rt_env_free(e);
    free(j);
}

/* Scans of another length deliver other overlaps: the same decisions. */
static void test_scan_length_does_not_matter(void **st)
{
    (void)st;
    fs_job *j = malloc(sizeof(*j));
    assert_non_null(j);
    fs_shape sh = {.slow_rank = 1, .factor = 1.5, .onset = 150};
    fs_job_fill(j, &sh);
    char *texts[3];
    const double lens[3] = {1.0, 7.0, 60.0};
    for (int i = 0; i < 3; i++) {
        rt_env *e = rt_env_new();
        assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, KV), TW_OK);
        run_scans(e, j, lens[i]);
        json_t *rep = rt_report(e);
        texts[i] = json_dumps(rt_jget(rep, "Details", NULL), JSON_SORT_KEYS);
        json_decref(rep);
        rt_env_free(e);
    }
    assert_string_equal(texts[0], texts[1]);
    assert_string_equal(texts[0], texts[2]);
    for (int i = 0; i < 3; i++)
        free(texts[i]);
    free(j);
}

static void test_sync_job_names_the_cause(void **st)
{
    (void)st;
    fs_job *j = malloc(sizeof(*j));
    assert_non_null(j);
    fs_shape sh = {
        .slow_rank = 1, .factor = 1.2, .onset = 220, .sync = 1, .forward = 1};
    fs_job_fill(j, &sh);
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, KV), TW_OK);
    assert_true(run_scans(e, j, 10.0)->condition_met);
    json_t *rep = rt_report(e);
    assert_string_equal(verdict(rep, "algo-1-1"), "fail-slow");
    assert_string_equal(verdict(rep, "algo-1-0"), "waiting");
    assert_string_equal(verdict(rep, "algo-1-2"), "waiting");
    double fs =
        rt_jnum(rep, "Details", "ranks", "algo-1-1", "forward_slowdown");
    assert_true(fabs(fs - 1.2) < 0.03);
    json_decref(rep);
    tw_finding f;
    memset(&f, 0, sizeof(f));
    assert_int_equal(tw_rule_finding(e->rule, &f), TW_OK);
    assert_int_equal(f.nnames, 1);
    assert_string_equal(f.names[0], "algo-1-1");
    assert_non_null(strstr(f.summary, "its forward pass 1.2"));
    assert_non_null(strstr(f.magnitude, "the other ranks wait"));
    rt_env_free(e);

    /* without forward events every rank slowed with the others: nobody */
    sh.forward = 0;
    fs_job_fill(j, &sh);
    e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, KV), TW_OK);
    const tw_scan_result *r = run_scans(e, j, 10.0);
    assert_false(r->condition_met);
    assert_int_equal(r->violations, 0);
    rep = rt_report(e);
    assert_true(rt_jnum(rep, "Details", "job_wide") >= RANKS);
    assert_string_equal(verdict(rep, "algo-1-1"), "job-wide");
    json_decref(rep);
    rt_env_free(e);
    free(j);
}

static void test_job_wide_and_phases_quiet(void **st)
{
    (void)st;
    fs_job *j = malloc(sizeof(*j));
    assert_non_null(j);
    /* every rank's own compute slows (an input pipeline): job-wide */
    fs_shape sh = {.slow_rank = -1,
                   .factor = 1.4,
                   .onset = 200,
                   .all_slow = 1,
                   .forward = 1};
    fs_job_fill(j, &sh);
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, KV), TW_OK);
    assert_false(run_scans(e, j, 10.0)->condition_met);
    json_t *rep = rt_report(e);
    assert_true(rt_jnum(rep, "Details", "job_wide") >= 2);
    json_decref(rep);
    rt_env_free(e);

    /* healthy with evaluation passes and checkpoint-long steps */
    fs_shape healthy = {.slow_rank = -1,
                        .factor = 1.0,
                        .onset = STEPS,
                        .forward = 1,
                        .eval_every = 50,
                        .ckpt_every = 70};
    fs_job_fill(j, &healthy);
    e = rt_env_new();
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, KV), TW_OK);
    const tw_scan_result *r = run_scans(e, j, 10.0);
    assert_false(r->condition_met);
    assert_int_equal(r->rule_triggered, 0);
    /* 20 warm-up, then 3 after each of the 7 evaluation passes */
    assert_int_equal(r->datapoints, RANKS * (STEPS - 20 - 7 * 3));
    rt_env_free(e);
    free(j);
}

static void test_bad_parameters(void **st)
{
    (void)st;
    rt_env *e = rt_env_new();
    const char *kv[] = {"baseline", "40", "min_baseline", "60", NULL};
    assert_int_equal(rt_create(e, RULE, TW_SEMANTICS_FIXED, kv), TW_ERR);
    assert_non_null(strstr(e->err, "min_baseline (60) is larger than "
                                   "baseline (40)"));
    rt_env_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_slow_rank_named),
        cmocka_unit_test(test_scan_length_does_not_matter),
        cmocka_unit_test(test_sync_job_names_the_cause),
        cmocka_unit_test(test_job_wide_and_phases_quiet),
        cmocka_unit_test(test_bad_parameters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
