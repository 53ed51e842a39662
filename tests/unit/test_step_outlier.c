/* Unit tests of the StepOutlier rule (rules/step_outlier.c, RULES.md §3.6):
 * the worked example with its exact numbers in reference semantics, the
 * 100/101-duration and n_outliers boundaries, the `mode` quirk and its
 * fixed-mode correction, history re-counting, skipped events, step-number
 * types, one slot per node, summary mode, checkpoints (and their compact
 * form) and parameters. */
#include <math.h>

#include "rule_test_util.h"
#include "trainwatch/countmap.h"

#define T0 1596668220000000LL
#define MAXEV 4096

/* A stream of events with their step_num args. */
typedef struct stream {
    tw_fw_event ev[MAXEV];
    tw_arg args[MAXEV];
    char text[MAXEV][24];
    size_t n;
    int64_t t; /* end of the last step */
} stream;

static void st_init(stream *s)
{
    memset(s, 0, sizeof(*s));
    s->t = T0;
}

/* Appends a step event of `dur_us` right after the previous one. `kind`:
 * 's' string step_num, 'n' number, '-' no step_num arg, '0' no args. */
static void st_step(stream *s, const char *name, const char *node,
                    int64_t dur_us, long step, char kind)
{
    assert_true(s->n < MAXEV);
    size_t i = s->n++;
    s->ev[i] = rt_event(name, name, node, s->t, s->t + dur_us,
                        TW_SOURCE_PYTHONTIMELINE);
    s->t += dur_us;
    snprintf(s->text[i], sizeof(s->text[i]), "%ld", step);
    s->args[i].key = kind == '-' ? "other" : "step_num";
    s->args[i].value = s->text[i];
    s->args[i].kind = kind == 'n' ? TW_ARG_NUMBER : TW_ARG_STRING;
    if (kind != '0') {
        s->ev[i].args = &s->args[i];
        s->ev[i].nargs = 1;
    }
}

/* The worked example: 103 TRAIN steps of 0.1 s, steps 50 and 80 of 1 s. */
static void st_example(stream *s, char kind)
{
    for (long k = 0; k < 103; k++)
        st_step(s, "Step:ModeKeys.TRAIN", "algo-1-0",
                (k == 50 || k == 80) ? 1000000 : 100000, k, kind);
}

static const tw_scan_result *run_stream(rt_env *e, rt_job *job, uint64_t k,
                                        const tw_fw_event *ev, size_t n)
{
    tw_scan sc = rt_job_scan(job, k, T0 + (int64_t)k * 60000000,
                             T0 + (int64_t)(k + 1) * 60000000, NULL, 0, ev, n);
    return rt_run(e, &sc);
}

static void test_worked_example_reference(void **state)
{
    (void)state;
    static stream s;
    st_init(&s);
    st_example(&s, 's');
    rt_env *e = rt_env_new();
    const char *kv[] = {"n_outliers", "1", NULL};
    assert_int_equal(rt_create(e, "StepOutlier", TW_SEMANTICS_REFERENCE, kv),
                     TW_OK);
    rt_job job;
    rt_job_init(&job);
    const tw_scan_result *r = run_stream(e, &job, 0, s.ev, s.n);
    assert_true(r->condition_met);
    assert_int_equal(r->rule_triggered, 1);
    assert_int_equal(r->violations, 2);
    assert_int_equal(r->datapoints, 103);

    json_t *rep = rt_report(e);
    json_t *d = rt_jget(rep, "Details", "step_details", "algo-1-0", NULL);
    assert_non_null(d);
    rt_assert_bits(rt_jnum(d, "step_stats", "mean"), 0.11747572815533978);
    rt_assert_bits(rt_jnum(d, "step_stats", "max"), 1.0);
    rt_assert_bits(rt_jnum(d, "step_stats", "p99"), 0.9820000000000035);
    rt_assert_bits(rt_jnum(d, "step_stats", "p95"), 0.1);
    rt_assert_bits(rt_jnum(d, "step_stats", "p50"), 0.1);
    rt_assert_bits(rt_jnum(d, "step_stats", "min"), 0.1);
    rt_assert_bits(rt_jnum(d, "stddev"), 0.12);
    assert_int_equal((int)rt_jnum(d, "number_of_outliers"), 2);
    assert_string_equal(json_string_value(json_object_get(d, "phase")),
                        "Step:ModeKeys.TRAIN");
    json_t *probs = json_object_get(d, "probs");
    json_t *edges = json_object_get(d, "binedges");
    assert_int_equal(json_array_size(probs), 100);
    assert_int_equal(json_array_size(edges), 101);
    assert_int_equal(json_integer_value(json_array_get(probs, 50)), 101);
    rt_assert_bits(json_number_value(json_array_get(edges, 0)), 0.1 - 0.5);
    rt_assert_bits(json_number_value(json_array_get(edges, 100)), 0.1 + 0.5);
    json_t *steps = json_object_get(d, "step_numbers");
    assert_int_equal(json_array_size(steps), 2);
    assert_string_equal(json_string_value(json_array_get(steps, 0)), "50");
    assert_string_equal(json_string_value(json_array_get(steps, 1)), "80");

    char keys[256];
    assert_string_equal(
        rt_jkeys(rt_jget(rep, "Details", NULL), keys, sizeof(keys)),
        "step_details,ratio,phase,phase_time");
    json_t *phase = rt_jget(rep, "Details", "phase", NULL);
    assert_string_equal(rt_jkeys(phase, keys, sizeof(keys)),
                        "Step:ModeKeys.TRAIN");
    rt_assert_bits(rt_jnum(phase, "Step:ModeKeys.TRAIN"), 100.0);
    json_decref(rep);

    const char *text = rt_report_text(e);
    assert_non_null(strstr(text,
                           "\"RuleParameters\": \"threshold:3\\nmode:None\\n"
                           "n_outliers:1\\nstddev:3\""));
    assert_non_null(strstr(text, "\"binedges\": [-0.4, "));
    assert_non_null(strstr(text, ", 0.6]"));
    rt_env_free(e);
}

/* Exactly 100 durations: not evaluated; the 101st makes it evaluated. */
static void test_hundred_vs_hundred_one(void **state)
{
    (void)state;
    static stream s;
    st_init(&s);
    for (long k = 0; k < 101; k++)
        st_step(&s, "Step:ModeKeys.TRAIN", "algo-1-0", k == 7 ? 900000 : 100000,
                k, 's');
    rt_env *e = rt_env_new();
    const char *kv[] = {"n_outliers", "0", NULL};
    assert_int_equal(rt_create(e, "StepOutlier", TW_SEMANTICS_REFERENCE, kv),
                     TW_OK);
    rt_job job;
    rt_job_init(&job);
    const tw_scan_result *r = run_stream(e, &job, 0, s.ev, 100);
    assert_false(r->condition_met);
    assert_int_equal(r->datapoints, 100);
    json_t *rep = rt_report(e);
    assert_int_equal(
        json_object_size(rt_jget(rep, "Details", "step_details", NULL)), 0);
    json_decref(rep);
    r = run_stream(e, &job, 1, s.ev + 100, 1);
    assert_true(r->condition_met);
    assert_int_equal(r->violations, 1);
    rep = rt_report(e);
    assert_int_equal((int)rt_jnum(rep, "Details", "step_details", "algo-1-0",
                                  "number_of_outliers"),
                     1);
    json_decref(rep);
    rt_env_free(e);
}

/* n_outliers is strict: 2 outliers do not trigger with n_outliers 2. */
static void test_n_outliers_strict(void **state)
{
    (void)state;
    static stream s;
    st_init(&s);
    st_example(&s, 's');
    rt_env *e = rt_env_new();
    const char *kv[] = {"n_outliers", "2", NULL};
    assert_int_equal(rt_create(e, "StepOutlier", TW_SEMANTICS_REFERENCE, kv),
                     TW_OK);
    rt_job job;
    rt_job_init(&job);
    const tw_scan_result *r = run_stream(e, &job, 0, s.ev, s.n);
    assert_false(r->condition_met);
    assert_int_equal(r->violations, 0);
    json_t *rep = rt_report(e);
    /* The slot is still filled; no aggregation happened. */
    assert_int_equal((int)rt_jnum(rep, "Details", "step_details", "algo-1-0",
                                  "number_of_outliers"),
                     2);
    assert_null(rt_jget(rep, "Details", "ratio", NULL));
    json_decref(rep);
    rt_env_free(e);
}

/* Quirk 2: every triggering scan adds the whole history's outliers. */
static void test_violations_recount_history(void **state)
{
    (void)state;
    static stream s;
    st_init(&s);
    st_example(&s, 's');
    for (int sem = 0; sem < 2; sem++) {
        rt_env *e = rt_env_new();
        const char *kv[] = {"n_outliers", "1", NULL};
        assert_int_equal(rt_create(e, "StepOutlier", (tw_semantics)sem, kv),
                         TW_OK);
        rt_job job;
        rt_job_init(&job);
        run_stream(e, &job, 0, s.ev, s.n);
        const tw_scan_result *r = run_stream(e, &job, 1, NULL, 0);
        assert_int_equal(r->violations, 4);
        assert_int_equal(r->rule_triggered, 2);
        assert_int_equal(r->datapoints, 103);
        rt_env_free(e);
    }
}

/* Quirk 1: `mode` adds a name in reference; filters in fixed. */
static void test_mode_fixed_vs_reference(void **state)
{
    (void)state;
    static stream s;
    st_init(&s);
    st_example(&s, 's');
    for (long k = 0; k < 5; k++)
        st_step(&s, "Step:ModeKeys.EVAL", "algo-1-0", 50000, k, 's');
    st_step(&s, "ModeKeys.EVAL", "algo-1-0", 50000, 99, 's');
    const char *kv[] = {"n_outliers", "1", "mode", "ModeKeys.EVAL", NULL};

    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, "StepOutlier", TW_SEMANTICS_REFERENCE, kv),
                     TW_OK);
    rt_job job;
    rt_job_init(&job);
    const tw_scan_result *r = run_stream(e, &job, 0, s.ev, s.n);
    assert_int_equal(r->datapoints, 109); /* TRAIN + EVAL + the named event */
    assert_true(r->condition_met);
    const char *text = rt_report_text(e);
    assert_non_null(strstr(text, "mode:ModeKeys.EVAL\\n"));
    rt_env_free(e);

    e = rt_env_new();
    assert_int_equal(rt_create(e, "StepOutlier", TW_SEMANTICS_FIXED, kv),
                     TW_OK);
    rt_job_init(&job);
    r = run_stream(e, &job, 0, s.ev, s.n);
    assert_int_equal(r->datapoints,
                     6); /* only EVAL steps and the named event */
    assert_false(r->condition_met);
    rt_env_free(e);
}

/* Quirk 6 fix: events without step_num or without args are skipped. */
static void test_missing_step_num_skipped(void **state)
{
    (void)state;
    static stream s;
    st_init(&s);
    st_step(&s, "Step:ModeKeys.TRAIN", "algo-1-0", 100000, 1, '-');
    st_step(&s, "Step:ModeKeys.TRAIN", "algo-1-0", 100000, 2, '0');
    st_step(&s, "Step:ModeKeys.TRAIN", "algo-1-0", 100000, 3, 's');
    for (int sem = 0; sem < 2; sem++) {
        rt_env *e = rt_env_new();
        assert_int_equal(rt_create(e, "StepOutlier", (tw_semantics)sem, NULL),
                         TW_OK);
        rt_job job;
        rt_job_init(&job);
        const tw_scan_result *r = run_stream(e, &job, 0, s.ev, s.n);
        assert_int_equal(r->datapoints, 1);
        rt_env_free(e);
    }
}

/* Integer step numbers stay numbers; one string makes all strings. */
static void test_step_number_types(void **state)
{
    (void)state;
    static stream s;
    st_init(&s);
    st_example(&s, 'n');
    rt_env *e = rt_env_new();
    const char *kv[] = {"n_outliers", "1", NULL};
    assert_int_equal(rt_create(e, "StepOutlier", TW_SEMANTICS_REFERENCE, kv),
                     TW_OK);
    rt_job job;
    rt_job_init(&job);
    run_stream(e, &job, 0, s.ev, s.n);
    const char *text = rt_report_text(e);
    assert_non_null(strstr(text, "\"step_numbers\": [50, 80]"));
    /* Correlation still found the steps (number keys match). */
    assert_non_null(
        strstr(text, "\"phase\": {\"Step:ModeKeys.TRAIN\": 100.0}"));
    rt_env_free(e);

    st_init(&s);
    st_example(&s, 'n');
    s.args[3].kind = TW_ARG_STRING; /* step 3 written as "3" */
    e = rt_env_new();
    assert_int_equal(rt_create(e, "StepOutlier", TW_SEMANTICS_REFERENCE, kv),
                     TW_OK);
    rt_job_init(&job);
    run_stream(e, &job, 0, s.ev, s.n);
    text = rt_report_text(e);
    assert_non_null(strstr(text, "\"step_numbers\": [\"50\", \"80\"]"));
    /* numpy's conversion made them strings: the number-keyed intervals no
     * longer match, so nothing is correlated (as in the reference). */
    assert_null(strstr(text, "\"ratio\""));
    rt_env_free(e);
}

/* Quirk 3: one slot per node; the last name evaluated wins. Quirk 4:
 * a TRAIN and an EVAL step with the same number share one interval. */
static void test_one_slot_per_node_and_collisions(void **state)
{
    (void)state;
    static stream s;
    st_init(&s);
    st_example(&s, 's');
    for (long k = 0; k < 101; k++)
        st_step(&s, "Step:ModeKeys.EVAL", "algo-1-0", 20000 + (k % 3) * 1000, k,
                's');
    st_step(&s, "Step:ModeKeys.TRAIN", "algo-2-0", 100000, 1, 's');
    rt_env *e = rt_env_new();
    const char *kv[] = {"n_outliers", "1", NULL};
    assert_int_equal(rt_create(e, "StepOutlier", TW_SEMANTICS_REFERENCE, kv),
                     TW_OK);
    rt_job job;
    rt_job_init(&job);
    const tw_scan_result *r = run_stream(e, &job, 0, s.ev, s.n);
    assert_int_equal(r->datapoints, 103 + 101 + 1);
    assert_int_equal(r->violations, 2);
    json_t *rep = rt_report(e);
    json_t *sd = rt_jget(rep, "Details", "step_details", NULL);
    char keys[128];
    assert_string_equal(rt_jkeys(sd, keys, sizeof(keys)), "algo-1-0");
    assert_string_equal(
        json_string_value(rt_jget(sd, "algo-1-0", "phase", NULL)),
        "Step:ModeKeys.EVAL");
    /* TRAIN step "50" owns the interval (first event wins), so the EVAL
     * steps around it are not in the aggregation window. */
    rt_assert_bits(rt_jnum(rep, "Details", "phase", "Step:ModeKeys.TRAIN"),
                   100.0);
    json_decref(rep);
    rt_env_free(e);
}

/* Fixed summary mode past max_exact_steps: whole-history counts and order
 * statistics stay equal to reference; step numbers come from the window. */
static void test_fixed_summary_mode(void **state)
{
    (void)state;
    static stream s;
    st_init(&s);
    for (long k = 0; k < 1500; k++)
        st_step(&s, "Step:ModeKeys.TRAIN", "algo-1-0",
                (k % 100 == 37) ? 1000000 : 100000 + (k % 7) * 1000, k, 's');
    const char *kvf[] = {"n_outliers", "1", "max_exact_steps", "1000", NULL};
    rt_env *f = rt_env_new();
    assert_int_equal(rt_create(f, "StepOutlier", TW_SEMANTICS_FIXED, kvf),
                     TW_OK);
    rt_env *r = rt_env_new();
    assert_int_equal(rt_create(r, "StepOutlier", TW_SEMANTICS_REFERENCE, kvf),
                     TW_OK);
    rt_job job;
    rt_job_init(&job);
    for (uint64_t k = 0; k < 3; k++) {
        run_stream(f, &job, k, s.ev + k * 500, 500);
        run_stream(r, &job, k, s.ev + k * 500, 500);
    }
    json_t *jf = rt_report(f), *jr = rt_report(r);
    json_t *df = rt_jget(jf, "Details", "step_details", "algo-1-0", NULL);
    json_t *dr = rt_jget(jr, "Details", "step_details", "algo-1-0", NULL);
    /* the outlier count, min and max are exact, the quantiles within
     * 0.5 %, the histogram counts the same normal steps */
    assert_int_equal((int)rt_jnum(df, "number_of_outliers"), 15);
    assert_int_equal((int)rt_jnum(dr, "number_of_outliers"), 15);
    rt_assert_bits(rt_jnum(df, "step_stats", "max"),
                   rt_jnum(dr, "step_stats", "max"));
    rt_assert_bits(rt_jnum(df, "step_stats", "min"),
                   rt_jnum(dr, "step_stats", "min"));
    const char *st[] = {"p99", "p95", "p50"};
    for (int i = 0; i < 3; i++) {
        double a = rt_jnum(df, "step_stats", st[i]);
        double b = rt_jnum(dr, "step_stats", st[i]);
        assert_true(fabs(a - b) <= 0.005 * b);
    }
    assert_true(fabs(rt_jnum(df, "step_stats", "mean") -
                     rt_jnum(dr, "step_stats", "mean")) < 1e-12);
    int64_t sf = 0, sr = 0;
    for (size_t i = 0; i < 100; i++) {
        sf += (int64_t)json_integer_value(
            json_array_get(json_object_get(df, "probs"), i));
        sr += (int64_t)json_integer_value(
            json_array_get(json_object_get(dr, "probs"), i));
    }
    assert_int_equal(sf, 1485);
    assert_int_equal(sr, 1485);
    /* The window keeps the newest 500..562 steps (half of
     * max_exact_steps): outliers 1037 .. 1437 are listed in fixed, all 15
     * in reference. */
    assert_int_equal(json_array_size(json_object_get(dr, "step_numbers")), 15);
    size_t nf = json_array_size(json_object_get(df, "step_numbers"));
    assert_int_equal(nf, 5);
    assert_string_equal(json_string_value(json_array_get(
                            json_object_get(df, "step_numbers"), nf - 1)),
                        "1437");
    json_decref(jf);
    json_decref(jr);
    rt_env_free(f);
    rt_env_free(r);
}

/* save -> restore into a fresh instance -> continue == uninterrupted. */
static void test_checkpoint_equivalence(void **state)
{
    (void)state;
    static stream s;
    st_init(&s);
    st_example(&s, 's');
    st_example(&s, 'n');
    const char *kv[] = {"n_outliers", "1", "max_exact_steps", "1000", NULL};
    for (int sem = 0; sem < 2; sem++) {
        rt_env *a = rt_env_new();
        assert_int_equal(rt_create(a, "StepOutlier", (tw_semantics)sem, kv),
                         TW_OK);
        rt_job job;
        rt_job_init(&job);
        run_stream(a, &job, 0, s.ev, 150);
        rt_env *b =
            rt_clone_via_checkpoint(a, "StepOutlier", (tw_semantics)sem, kv);
        assert_string_equal(rt_report_text(a), rt_report_text(b));
        run_stream(a, &job, 1, s.ev + 150, s.n - 150);
        run_stream(b, &job, 1, s.ev + 150, s.n - 150);
        char *ta = strdup(rt_report_text(a));
        assert_string_equal(ta, rt_report_text(b));
        assert_non_null(strstr(ta, "\"ratio\""));
        free(ta);
        tw_buf *buf = tw_buf_new();
        assert_int_equal(tw_rule_save(a->rule, buf), TW_OK);
        char err[256];
        rt_env *c = rt_env_new();
        assert_int_equal(rt_create(c, "StepOutlier", (tw_semantics)sem, kv),
                         TW_OK);
        assert_int_equal(tw_rule_restore(c->rule, tw_buf_data(buf),
                                         tw_buf_len(buf) - 3, err, sizeof(err)),
                         TW_ERR);
        tw_buf_free(buf);
        rt_env_free(c);
        rt_env_free(a);
        rt_env_free(b);
    }
}

static size_t saved_bytes(rt_env *e)
{
    tw_buf *buf = tw_buf_new();
    assert_non_null(buf);
    assert_int_equal(tw_rule_save(e->rule, buf), TW_OK);
    size_t n = tw_buf_len(buf);
    tw_buf_free(buf);
    return n;
}

/* The checkpoint's per-step columns are compact (consecutive numbers one
 * byte, whole-µs durations and start deltas varints) and lossless for
 * every other kind of step number: gaps, strings, non-canonical texts. */
static void test_checkpoint_compact(void **state)
{
    (void)state;
    static stream s;
    st_init(&s);
    for (long k = 0; k < 3000; k++)
        st_step(&s, "Step:ModeKeys.TRAIN", "algo-1-0",
                k % 97 == 5 ? 1000000 : 100000 + k % 7, k < 2000 ? k : k + 3,
                k % 500 == 9 ? 's' : 'n');
    /* non-canonical numbers: leading zeros, a sign */
    snprintf(s.text[2100], sizeof(s.text[2100]), "0042");
    snprintf(s.text[2200], sizeof(s.text[2200]), "-7");
    const char *kv[] = {"n_outliers", "1", NULL};
    rt_env *a = rt_env_new();
    assert_int_equal(rt_create(a, "StepOutlier", TW_SEMANTICS_REFERENCE, kv),
                     TW_OK);
    rt_job job;
    rt_job_init(&job);
    run_stream(a, &job, 0, s.ev, 1000);
    size_t at1000 = saved_bytes(a);
    run_stream(a, &job, 1, s.ev + 1000, 1000);
    size_t at2000 = saved_bytes(a);
    /* the fixed-width form took 26 bytes a step (5 + text, 8, 8) */
    assert_true(at2000 - at1000 <= 8 * 1000);
    run_stream(a, &job, 2, s.ev + 2000, 500);
    rt_env *b =
        rt_clone_via_checkpoint(a, "StepOutlier", TW_SEMANTICS_REFERENCE, kv);
    assert_string_equal(rt_report_text(a), rt_report_text(b));
    run_stream(a, &job, 3, s.ev + 2500, 500);
    run_stream(b, &job, 3, s.ev + 2500, 500);
    char *ta = strdup(rt_report_text(a));
    assert_non_null(ta);
    assert_string_equal(ta, rt_report_text(b));
    assert_non_null(strstr(ta, "\"step_numbers\""));
    free(ta);
    rt_env_free(a);
    rt_env_free(b);
}

/* ---- long jobs: the bounded summary ------------------------------------ */

/* A deterministic duration (µs) of step k: 100 ms plus up to 5 ms of
 * jitter; kind 'p' makes every 15th step 6x slow, 's' (steady) one step
 * in 5000 1 s, 'h' draws a heavy (Pareto 1.5) tail. */
static int64_t dur_of(long k, char kind)
{
    uint64_t z = (uint64_t)k * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z ^= z >> 27;
    double u = ((double)(z >> 11) + 0.5) / 9007199254740992.0;
    if (kind == 'h')
        return (int64_t)(50000.0 * pow(u, -1.0 / 1.5));
    int64_t d = 100000 + (int64_t)(u * 5000.0);
    if (kind == 'p' && k % 15 == 7)
        return 6 * d;
    if (kind == 's' && k % 5000 == 4321)
        return 1000000;
    return d;
}

/* Runs steps from .. to - 1 of `kind` in scans of 4000 steps. */
static void run_steps(rt_env *e, rt_job *job, uint64_t *scan, long from,
                      long to, char kind)
{
    static stream s;
    static int64_t t = T0;
    if (from == 0)
        t = T0;
    for (long k = from; k < to;) {
        st_init(&s);
        s.t = t;
        for (; k < to && s.n < 4000; k++)
            /* the steady job's step numbers are strings, as the hooks
             * write them */
            st_step(&s, "Step:ModeKeys.TRAIN", "algo-1-0", dur_of(k, kind), k,
                    kind == 's' ? 's' : 'n');
        t = s.t;
        run_stream(e, job, (*scan)++, s.ev, s.n);
    }
}

/* The saved state of a (node, name) stays under 16 KB and flat from 50 000
 * to 200 000 steps (the exact history took ~7 bytes a step: 1.4 MB). */
static void test_summary_bounded(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    assert_int_equal(rt_create(e, "StepOutlier", TW_SEMANTICS_FIXED, NULL),
                     TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint64_t scan = 0;
    run_steps(e, &job, &scan, 0, 50000, 's');
    size_t at50k = saved_bytes(e);
    run_steps(e, &job, &scan, 50000, 200000, 's');
    size_t at200k = saved_bytes(e);
    /* 8.4 KB at both points when written */
    assert_true(at50k <= 16384);
    assert_true(at200k <= 16384);
    assert_true(at200k <= at50k + 64);
    /* a steady job with rare spikes stays quiet */
    json_t *j = rt_report(e);
    assert_int_equal((int)rt_jnum(j, "RuleTriggered"), 0);
    json_decref(j);
    rt_env_free(e);
}

/* One job through a summary (max_exact_steps 1000) and through the exact
 * history (10^9): the outlier count and its verdict, min and max equal,
 * the quantiles within 0.5 %. */
static void compare_summary_exact(char kind, long nsteps, int must_trigger)
{
    const char *kvs[] = {"max_exact_steps", "1000", NULL};
    const char *kve[] = {"max_exact_steps", "1000000000", NULL};
    rt_env *a = rt_env_new(), *b = rt_env_new();
    assert_int_equal(rt_create(a, "StepOutlier", TW_SEMANTICS_FIXED, kvs),
                     TW_OK);
    assert_int_equal(rt_create(b, "StepOutlier", TW_SEMANTICS_FIXED, kve),
                     TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint64_t sa = 0, sb = 0;
    run_steps(a, &job, &sa, 0, nsteps, kind);
    run_steps(b, &job, &sb, 0, nsteps, kind);
    json_t *ja = rt_report(a), *jb = rt_report(b);
    assert_int_equal((int)rt_jnum(ja, "RuleTriggered") > 0, must_trigger);
    assert_int_equal((int)rt_jnum(jb, "RuleTriggered") > 0, must_trigger);
    json_t *da = rt_jget(ja, "Details", "step_details", "algo-1-0", NULL);
    json_t *db = rt_jget(jb, "Details", "step_details", "algo-1-0", NULL);
    assert_int_equal((int64_t)rt_jnum(da, "number_of_outliers"),
                     (int64_t)rt_jnum(db, "number_of_outliers"));
    if (must_trigger)
        assert_true(rt_jnum(da, "number_of_outliers") > 256);
    rt_assert_bits(rt_jnum(da, "step_stats", "max"),
                   rt_jnum(db, "step_stats", "max"));
    rt_assert_bits(rt_jnum(da, "step_stats", "min"),
                   rt_jnum(db, "step_stats", "min"));
    const char *st[] = {"p99", "p95", "p50"};
    for (int i = 0; i < 3; i++) {
        double x = rt_jnum(da, "step_stats", st[i]);
        double y = rt_jnum(db, "step_stats", st[i]);
        if (!(fabs(x - y) <= 0.005 * y))
            fail_msg("%c %s: %.17g vs exact %.17g", kind, st[i], x, y);
    }
    json_decref(ja);
    json_decref(jb);
    rt_env_free(a);
    rt_env_free(b);
}

static void test_summary_matches_exact(void **state)
{
    (void)state;
    compare_summary_exact('p', 60000, 1); /* periodic slow steps */
    compare_summary_exact('s', 60000, 0); /* steady, rare spikes */
    compare_summary_exact('h', 60000, 0); /* heavy-tailed durations */
}

/* save -> restore in summary mode -> continue == uninterrupted, byte for
 * byte (the histogram, the top-K heap and the window restore exactly). */
static void test_summary_checkpoint_continuity(void **state)
{
    (void)state;
    const char *kv[] = {"max_exact_steps", "1000", "n_outliers", "3", NULL};
    rt_env *a = rt_env_new();
    assert_int_equal(rt_create(a, "StepOutlier", TW_SEMANTICS_FIXED, kv),
                     TW_OK);
    rt_job job;
    rt_job_init(&job);
    uint64_t sc = 0;
    run_steps(a, &job, &sc, 0, 6000, 'p');
    rt_env *b =
        rt_clone_via_checkpoint(a, "StepOutlier", TW_SEMANTICS_FIXED, kv);
    assert_string_equal(rt_report_text(a), rt_report_text(b));
    uint64_t sb = sc;
    run_steps(a, &job, &sc, 6000, 12000, 'p');
    run_steps(b, &job, &sb, 6000, 12000, 'p');
    char *ta = strdup(rt_report_text(a));
    assert_non_null(ta);
    assert_string_equal(ta, rt_report_text(b));
    free(ta);
    rt_env_free(a);
    rt_env_free(b);
}

/* An SO02 checkpoint (the previous form) whose series is in summary mode
 * (a count map of every duration) restores: the count, min, max and the
 * outlier count then continue exactly, the quantiles within 0.5 %. */
static void test_summary_from_so02(void **state)
{
    (void)state;
    const char *kv[] = {"max_exact_steps", "1000", NULL};
    enum { SEEN = 1500, WIN = 1100 };
    /* the tail every save ends with: the empty §4 buffer and key order */
    rt_env *a = rt_env_new();
    assert_int_equal(rt_create(a, "StepOutlier", TW_SEMANTICS_FIXED, kv),
                     TW_OK);
    tw_buf *empty = tw_buf_new();
    assert_int_equal(tw_rule_save(a->rule, empty), TW_OK);
    const uint8_t *eb = tw_buf_data(empty);
    size_t elen = tw_buf_len(empty);
    /* the host's header comes first, then the rule's bytes ("SO04") */
    tw_buf *mb = tw_buf_new();
    tw_ser w;
    tw_ser_init(&w, tw_host_ctx_host(a->hctx), mb);
    tw_ser_u32(&w, 0x534f3034u);
    size_t hdr = 0;
    while (hdr + 4 <= elen && memcmp(eb + hdr, tw_buf_data(mb), 4) != 0)
        hdr++;
    assert_true(hdr + 4 < elen);
    tw_buf_free(mb);
    size_t agg_at = hdr + 4 + 3 * 8 + 8 + 8, agg_len = elen - 16 - agg_at;

    tw_buf *buf = tw_buf_new();
    tw_ser_init(&w, tw_host_ctx_host(a->hctx), buf);
    tw_ser_bytes(&w, eb, hdr);
    tw_ser_u32(&w, 0x534f3032u); /* "SO02" */
    tw_ser_i64(&w, 0);
    tw_ser_i64(&w, 0);
    tw_ser_i64(&w, SEEN);
    tw_ser_u64(&w, 1);
    tw_ser_str(&w, "algo-1-0");
    tw_ser_u64(&w, 1);
    tw_ser_str(&w, "Step:ModeKeys.TRAIN");
    tw_ser_uv(&w, WIN); /* the newest WIN steps */
    char num[24];
    for (long k = SEEN - WIN; k < SEEN; k++) {
        int len = snprintf(num, sizeof(num), "%ld", k);
        tw_ser_uv(&w, (uint64_t)len + 1);
        tw_ser_u8(&w, 0);
        tw_ser_bytes(&w, num, (size_t)len);
    }
    tw_ser_u8(&w, 0); /* durations as f64 */
    for (long k = SEEN - WIN; k < SEEN; k++)
        tw_ser_f64(&w, (double)dur_of(k, 'p') / 1000000.0);
    tw_ser_u64(&w, SEEN);
    tw_ser_u8(&w, 0);
    tw_ser_u8(&w, 1); /* summary */
    tw_countmap cm;
    tw_countmap_init(&cm, 4096);
    double mean = 0, m2 = 0;
    for (long k = 0; k < SEEN; k++) {
        double x = (double)dur_of(k, 'p') / 1000000.0;
        double delta = x - mean;
        mean += delta / (double)(k + 1);
        m2 += delta * (x - mean);
        assert_int_equal(tw_countmap_add(&cm, x), TW_OK);
    }
    tw_ser_f64(&w, mean);
    tw_ser_f64(&w, m2);
    tw_countmap_save(&cm, &w);
    tw_countmap_free(&cm);
    tw_ser_u8(&w, 0);  /* no report slot */
    tw_ser_u64(&w, 0); /* ndet */
    tw_ser_bytes(&w, eb + agg_at, agg_len);
    tw_ser_i64(&w, 0);
    tw_ser_i64(&w, 0);
    int64_t t = T0, prev = 0;
    for (long k = 0; k < SEEN; k++) {
        if (k >= SEEN - WIN) {
            tw_ser_sv(&w, t - prev);
            prev = t;
        }
        t += dur_of(k, 'p');
    }
    tw_ser_u64(&w, 0);
    assert_true(tw_ser_ok(&w));
    char err[256];
    rt_env *b = rt_env_new();
    assert_int_equal(rt_create(b, "StepOutlier", TW_SEMANTICS_FIXED, kv),
                     TW_OK);
    if (tw_rule_restore(b->rule, tw_buf_data(buf), tw_buf_len(buf), err,
                        sizeof(err)) != TW_OK)
        fail_msg("SO02 restore: %s", err);
    tw_buf_free(buf);
    tw_buf_free(empty);

    rt_job job;
    rt_job_init(&job);
    uint64_t sa = 0, sb = 100;
    run_steps(a, &job, &sa, 0, 3000, 'p');
    run_steps(b, &job, &sb, SEEN, 3000, 'p');
    json_t *ja = rt_report(a), *jb = rt_report(b);
    json_t *da = rt_jget(ja, "Details", "step_details", "algo-1-0", NULL);
    json_t *db = rt_jget(jb, "Details", "step_details", "algo-1-0", NULL);
    assert_int_equal((int64_t)rt_jnum(da, "number_of_outliers"), 200);
    assert_int_equal((int64_t)rt_jnum(db, "number_of_outliers"), 200);
    rt_assert_bits(rt_jnum(da, "step_stats", "max"),
                   rt_jnum(db, "step_stats", "max"));
    rt_assert_bits(rt_jnum(da, "step_stats", "min"),
                   rt_jnum(db, "step_stats", "min"));
    rt_assert_bits(rt_jnum(da, "step_stats", "mean"),
                   rt_jnum(db, "step_stats", "mean"));
    const char *st[] = {"p99", "p95", "p50"};
    for (int i = 0; i < 3; i++) {
        double x = rt_jnum(db, "step_stats", st[i]);
        double y = rt_jnum(da, "step_stats", st[i]);
        assert_true(fabs(x - y) <= 0.005 * y);
    }
    json_decref(ja);
    json_decref(jb);
    rt_env_free(a);
    rt_env_free(b);
}

static void test_bad_parameters(void **state)
{
    (void)state;
    rt_env *e = rt_env_new();
    const char *neg[] = {"stddev", "-1", NULL};
    assert_int_equal(rt_create(e, "StepOutlier", TW_SEMANTICS_FIXED, neg),
                     TW_ERR);
    assert_non_null(strstr(e->err, "stddev"));
    const char *txt[] = {"n_outliers", "many", NULL};
    assert_int_equal(rt_create(e, "StepOutlier", TW_SEMANTICS_FIXED, txt),
                     TW_ERR);
    assert_non_null(strstr(e->err, "n_outliers"));
    const char *empty[] = {"mode", "", NULL};
    assert_int_equal(rt_create(e, "StepOutlier", TW_SEMANTICS_FIXED, empty),
                     TW_ERR);
    assert_non_null(strstr(e->err, "mode"));
    const char *cap[] = {"max_exact_steps", "10", NULL};
    assert_int_equal(rt_create(e, "StepOutlier", TW_SEMANTICS_FIXED, cap),
                     TW_ERR);
    const char *unknown[] = {"scan_interval_us", "60000000", NULL};
    assert_int_equal(rt_create(e, "StepOutlier", TW_SEMANTICS_FIXED, unknown),
                     TW_ERR);
    rt_env_free(e);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worked_example_reference),
        cmocka_unit_test(test_hundred_vs_hundred_one),
        cmocka_unit_test(test_n_outliers_strict),
        cmocka_unit_test(test_violations_recount_history),
        cmocka_unit_test(test_mode_fixed_vs_reference),
        cmocka_unit_test(test_missing_step_num_skipped),
        cmocka_unit_test(test_step_number_types),
        cmocka_unit_test(test_one_slot_per_node_and_collisions),
        cmocka_unit_test(test_fixed_summary_mode),
        cmocka_unit_test(test_checkpoint_equivalence),
        cmocka_unit_test(test_checkpoint_compact),
        cmocka_unit_test(test_summary_bounded),
        cmocka_unit_test(test_summary_matches_exact),
        cmocka_unit_test(test_summary_checkpoint_continuity),
        cmocka_unit_test(test_summary_from_so02),
        cmocka_unit_test(test_bad_parameters),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
