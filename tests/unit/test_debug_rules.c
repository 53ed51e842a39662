/* test_debug_rules.c - the built-in debugging rules (DEBUG_RULES.md §4) on
 * hand-built scans of tensors: each condition fires and does not fire,
 * and each decision a rule's header documents (DEBUG_RULES.md §8.3) is
 * pinned here; plus trainwatch/tensor.h (Python re.search semantics, CSV
 * lists, modes) and the shared driver (step range, mode filter, stop at
 * first fire or keep evaluating, checkpoint round trip). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <math.h>

#include "rule_test_util.h"
#include "trainwatch/tensor.h"

/* ---- building tensors ---------------------------------------------------- */

#define MAXT 64

typedef struct tset {
    tw_tensor t[MAXT];
    tw_tensor_reduction red[MAXT][4];
    const char *coll[MAXT][1];
    size_t n;
} tset;

/* A tensor of node "w0" at global step `step` (mode step = step) with up
 * to two reductions (op2 NULL for one), in collection `coll` (or none). */
static tw_tensor *add(tset *s, const char *name, const char *coll, tw_mode mode,
                      int64_t step, const char *op1, double v1, const char *op2,
                      double v2)
{
    assert_true(s->n < MAXT);
    tw_tensor *t = &s->t[s->n];
    memset(t, 0, sizeof(*t));
    t->node = "w0";
    t->name = name;
    t->mode = mode;
    t->step = step;
    t->mode_step = step;
    t->wall_us = 1700000000000000 + step * 1000000;
    t->prev_step = -1;
    t->dtype = "float32";
    t->numel = 100;
    if (coll != NULL) {
        s->coll[s->n][0] = coll;
        t->collections = s->coll[s->n];
        t->ncollections = 1;
    }
    t->reductions = s->red[s->n];
    if (op1 != NULL)
        s->red[s->n][t->nreductions++] = (tw_tensor_reduction){op1, v1};
    if (op2 != NULL)
        s->red[s->n][t->nreductions++] = (tw_tensor_reduction){op2, v2};
    s->n++;
    return t;
}

static tw_tensor *loss(tset *s, tw_mode mode, int64_t step, double v)
{
    return add(s, "CrossEntropyLoss_output_0", "losses", mode, step, "value", v,
               NULL, 0);
}

/* Runs the tensors of s (in the order added: node, step, name) as scan k. */
static const tw_scan_result *run(rt_env *e, tset *s, uint64_t k)
{
    tw_scan sc;
    memset(&sc, 0, sizeof(sc));
    sc.index = k;
    sc.start_us = 1700000000000000 + (int64_t)k * 60000000;
    sc.end_us = sc.start_us + 60000000;
    sc.first_timestamp_us = 1700000000000000;
    sc.rule_clock_us = sc.start_us;
    sc.tensors = s->t;
    sc.ntensors = s->n;
    return rt_run(e, &sc);
}

static rt_env *make(const char *rule, const char *const *kv)
{
    rt_env *e = rt_env_new();
    if (rt_create(e, rule, TW_SEMANTICS_FIXED, kv) != TW_OK)
        fail_msg("%s: %s", rule, e->err);
    return e;
}

static void finding_of(rt_env *e, tw_finding *f)
{
    memset(f, 0, sizeof(*f));
    assert_int_equal(tw_rule_finding(e->rule, f), TW_OK);
}

/* ---- trainwatch/tensor.h ------------------------------------------------- */

static int search(const char *pattern, const char *name)
{
    char err[200];
    pcre2_code *re = tw_tensor_regex_compile(pattern, err, sizeof(err));
    if (re == NULL)
        fail_msg("%s", err);
    pcre2_match_data *md = pcre2_match_data_create_from_pattern(re, NULL);
    int m = tw_tensor_regex_search(re, md, name);
    pcre2_match_data_free(md);
    pcre2_code_free(re);
    return m;
}

static void test_tensor_header(void **st)
{
    (void)st;
    /* re.search: anywhere in the name; the PyTorch default collections'
     * look-aheads (DEBUG_RULES.md §5.4) */
    assert_true(search("relu_output", "features.relu_output_0"));
    assert_true(search("^(?!gradient).*weight", "Net_fc1.weight"));
    assert_false(search("^(?!gradient).*weight", "gradient/Net_fc1.weight"));
    assert_true(
        search("[Ll]oss_(?!input).*output", "CrossEntropyLoss_output_0"));
    assert_false(search("[Ll]oss_(?!input).*output", "MSELoss_input_0"));
    assert_true(search("(?P<n>fc\\d)\\.weight$", "Net_fc1.weight"));
    assert_true(search("\\x41", "A")); /* \xhh as Python */
    char err[200];
    assert_null(tw_tensor_regex_compile("(unclosed", err, sizeof(err)));
    assert_non_null(strstr(err, "(unclosed"));

    /* lists: split on ",", blanks stripped, empty items dropped */
    tw_tensor_select sel;
    assert_int_equal(tw_tensor_select_init(&sel, " gradients , weights,,",
                                           "fc1, ^conv", err, sizeof(err)),
                     TW_OK);
    assert_int_equal(sel.ncollections, 2);
    assert_string_equal(sel.collections[1], "weights");
    assert_int_equal(sel.nregexes, 2);
    tset s = {0};
    tw_tensor *a =
        add(&s, "Net_fc2.bias", "weights", TW_MODE_TRAIN, 0, NULL, 0, NULL, 0);
    tw_tensor *b =
        add(&s, "conv1.weight", NULL, TW_MODE_TRAIN, 0, NULL, 0, NULL, 0);
    tw_tensor *c =
        add(&s, "Net_fc3.bias", NULL, TW_MODE_TRAIN, 0, NULL, 0, NULL, 0);
    tw_tensor *hb =
        add(&s, "heartbeat", "weights", TW_MODE_TRAIN, 0, NULL, 0, NULL, 0);
    assert_true(tw_tensor_select_match(&sel, a, 0));  /* collection */
    assert_true(tw_tensor_select_match(&sel, b, 0));  /* regex */
    assert_false(tw_tensor_select_match(&sel, c, 0)); /* neither */
    assert_false(tw_tensor_select_match(&sel, hb, 1));
    tw_tensor_select_free(&sel);
    assert_int_equal(tw_tensor_select_init(&sel, NULL, "", err, sizeof(err)),
                     TW_OK);
    assert_true(tw_tensor_select_match(&sel, c, 1));
    assert_false(tw_tensor_select_match(&sel, c, 0));
    tw_tensor_select_free(&sel);

    tw_mode m;
    assert_int_equal(tw_tensor_mode_parse("eval", &m), TW_OK);
    assert_int_equal(m, TW_MODE_EVAL);
    assert_int_equal(tw_tensor_mode_parse("Train", &m), TW_OK);
    assert_int_equal(m, TW_MODE_TRAIN);
    assert_int_equal(tw_tensor_mode_parse("TRAINING", &m), TW_ERR);
    tw_tensor_steps r = {5, 8, TW_MODE_TRAIN};
    assert_false(tw_tensor_steps_admit(&r, 4, TW_MODE_TRAIN));
    assert_true(tw_tensor_steps_admit(&r, 5, TW_MODE_TRAIN));
    assert_false(tw_tensor_steps_admit(&r, 8, TW_MODE_TRAIN)); /* exclusive */
    assert_false(tw_tensor_steps_admit(&r, 6, TW_MODE_EVAL));
    double v;
    tw_tensor *d = add(&s, "x", NULL, TW_MODE_TRAIN, 0, "l2", 1, "l2", 2);
    assert_true(tw_tensor_get(d, "l2", &v));
    assert_true(v == 2); /* the last one wins */
    assert_false(tw_tensor_get(d, "abs_mean", &v));
}

/* ---- ExplodingTensor ----------------------------------------------------- */

static void test_exploding_tensor(void **st)
{
    (void)st;
    rt_env *e = make("ExplodingTensor", NULL);
    tset s = {0};
    loss(&s, TW_MODE_TRAIN, 0, 2.3);
    add(&s, "gradient/Net_fc1.weight", "gradients", TW_MODE_TRAIN, 0,
        "nan_count", 0, "inf_count", 0);
    const tw_scan_result *r = run(e, &s, 0);
    assert_int_equal(r->condition_met, 0);
    assert_int_equal(r->datapoints, 1);
    /* a NaN loss (value) at step 1 fires; named in the finding */
    s.n = 0;
    loss(&s, TW_MODE_TRAIN, 1, NAN);
    r = run(e, &s, 1);
    assert_int_equal(r->condition_met, 1);
    assert_int_equal(r->violations, 1);
    tw_finding f;
    finding_of(e, &f);
    assert_non_null(strstr(f.summary, "step 1"));
    assert_non_null(strstr(f.summary, "CrossEntropyLoss_output_0"));
    assert_string_equal(f.names[0], "w0");
    assert_true(f.first_us == 1700000001000000);
    /* stop_at_first_fire (default): a later NaN is not evaluated */
    s.n = 0;
    loss(&s, TW_MODE_TRAIN, 2, NAN);
    r = run(e, &s, 2);
    assert_int_equal(r->condition_met, 0);
    assert_int_equal(r->violations, 1);
    assert_non_null(
        strstr(rt_report_text(e), "\"stopped_at_first_fire\": true"));
    rt_env_free(e);

    /* keep evaluating: fires again; Inf fires unless only_nan; min/max
     * fall-back (max +Inf) */
    const char *kv[] = {"stop_at_first_fire", "false", NULL};
    e = make("ExplodingTensor", kv);
    s.n = 0;
    add(&s, "gradient/a", "gradients", TW_MODE_TRAIN, 3, "nan_count", 0,
        "inf_count", 2);
    r = run(e, &s, 0);
    assert_int_equal(r->violations, 1);
    s.n = 0;
    add(&s, "Net_fc.weight", "weights", TW_MODE_TRAIN, 4, "min", -1, "max",
        INFINITY);
    r = run(e, &s, 1);
    assert_int_equal(r->violations, 2);
    s.n = 0;
    add(&s, "Net_fc.weight", "weights", TW_MODE_TRAIN, 5, "min", -1, "max",
        1); /* finite */
    add(&s, "Net_fc.bias", "weights", TW_MODE_TRAIN, 5, "sum", INFINITY, NULL,
        0); /* sum is never read: an overflowing sum is no alarm */
    r = run(e, &s, 2);
    assert_int_equal(r->violations, 2);
    assert_int_equal(r->datapoints, 3);
    rt_env_free(e);

    const char *only_nan[] = {"only_nan", "true", "collection_names",
                              "gradients", NULL};
    e = make("ExplodingTensor", only_nan);
    s.n = 0;
    add(&s, "gradient/a", "gradients", TW_MODE_TRAIN, 3, "nan_count", 0,
        "inf_count", 2);
    loss(&s, TW_MODE_TRAIN, 3, NAN); /* not in the selection */
    r = run(e, &s, 0);
    assert_int_equal(r->condition_met, 0);
    rt_env_free(e);
}

/* step range (end exclusive) and mode filter, by the shared driver */
static void test_step_range_and_mode(void **st)
{
    (void)st;
    const char *kv[] = {"start_step", "2",     "end_step",           "4",
                        "mode",       "TRAIN", "stop_at_first_fire", "false",
                        NULL};
    rt_env *e = make("ExplodingTensor", kv);
    tset s = {0};
    for (int64_t k = 0; k < 6; k++)
        loss(&s, TW_MODE_TRAIN, k, NAN);
    loss(&s, TW_MODE_EVAL, 3, NAN); /* same step, another mode */
    const tw_scan_result *r = run(e, &s, 0);
    assert_int_equal(r->violations, 2); /* steps 2 and 3 */
    assert_int_equal(r->datapoints, 2);
    assert_int_equal(r->rule_triggered, 1); /* one scan */
    rt_env_free(e);
    const char *bad[] = {"start_step", "4", "end_step", "4", NULL};
    rt_env *x = rt_env_new();
    assert_int_equal(rt_create(x, "ExplodingTensor", TW_SEMANTICS_FIXED, bad),
                     TW_ERR);
    assert_non_null(strstr(x->err, "end_step"));
    const char *badmode[] = {"mode", "TRAINING", NULL};
    assert_int_equal(
        rt_create(x, "ExplodingTensor", TW_SEMANTICS_FIXED, badmode), TW_ERR);
    assert_non_null(strstr(x->err, "TRAINING"));
    const char *badre[] = {"tensor_regex", "(x", NULL};
    assert_int_equal(rt_create(x, "ExplodingTensor", TW_SEMANTICS_FIXED, badre),
                     TW_ERR);
    assert_non_null(strstr(x->err, "tensor_regex"));
    rt_env_free(x);
}

/* ---- VanishingGradient --------------------------------------------------- */

static void test_vanishing_gradient(void **st)
{
    (void)st;
    rt_env *e = make("VanishingGradient", NULL);
    tset s = {0};
    add(&s, "gradient/Net_fc1.weight", NULL, TW_MODE_TRAIN, 0, "abs_mean", 1e-3,
        NULL, 0);
    add(&s, "gradient/Net_fc2.weight", NULL, TW_MODE_TRAIN, 0, "abs_mean", 1e-7,
        NULL, 0); /* equal: not below (strict) */
    add(&s, "gradient/Net_fc3.weight", NULL, TW_MODE_TRAIN, 0, "abs_mean", NAN,
        NULL, 0); /* NaN: ExplodingTensor's */
    add(&s, "Net_fc1.weight", "weights", TW_MODE_TRAIN, 0, "abs_mean", 0, NULL,
        0); /* not a gradient */
    const tw_scan_result *r = run(e, &s, 0);
    assert_int_equal(r->condition_met, 0);
    s.n = 0;
    add(&s, "gradient/Net_fc1.weight", NULL, TW_MODE_TRAIN, 1, "abs_mean", 1e-3,
        NULL, 0);
    add(&s, "gradient/Net_fc2.weight", NULL, TW_MODE_TRAIN, 1, "abs_mean", 5e-9,
        NULL, 0);
    add(&s, "in_collection", "gradients", TW_MODE_TRAIN, 1, "abs_mean", 2e-9,
        NULL, 0);
    r = run(e, &s, 1);
    assert_int_equal(r->condition_met, 1);
    tw_finding f;
    finding_of(e, &f);
    /* every gradient evaluated, the smallest named */
    assert_non_null(strstr(f.summary, "in_collection"));
    assert_non_null(strstr(f.summary, "2 of 3"));
    assert_true(f.limit == 1e-7);
    rt_env_free(e);
}

/* ---- LossNotDecreasing --------------------------------------------------- */

static void lnd_feed(rt_env *e, const double *v, size_t n, int64_t every,
                     uint64_t k, int *fired_at)
{
    for (size_t i = 0; i < n; i++) {
        tset s = {0};
        loss(&s, TW_MODE_TRAIN, (int64_t)i * every, v[i]);
        if (run(e, &s, k + i)->condition_met && fired_at != NULL)
            fired_at[i] = 1;
    }
}

static void test_loss_not_decreasing(void **st)
{
    (void)st;
    /* the 2019 tests (compat_2019): 0.3, 0.33, 0.31, 0.30, 0.28 every 4
     * steps fire at 12 (equal to the baseline at 0) */
    const double t1[] = {0.3, 0.33, 0.31, 0.30, 0.28};
    const char *compat[] = {
        "compat_2019", "true", "diff_percent", "0", "stop_at_first_fire",
        "false",       NULL};
    rt_env *e = make("LossNotDecreasing", compat);
    int fired[8] = {0};
    lnd_feed(e, t1, 5, 4, 0, fired);
    assert_int_equal(fired[3], 1);
    assert_int_equal(tw_rule_last_result(e->rule)->violations, 1);
    rt_env_free(e);
    /* ... and with diff_percent 20 plus 0.2, 0.42 at 20, 24: not at 12,
     * at 24 (+40 % over the baseline 0.30 at 12) */
    const double t2[] = {0.3, 0.33, 0.31, 0.30, 0.28, 0.2, 0.42};
    const char *compat20[] = {
        "compat_2019", "true", "diff_percent", "20", "stop_at_first_fire",
        "false",       NULL};
    e = make("LossNotDecreasing", compat20);
    memset(fired, 0, sizeof(fired));
    lnd_feed(e, t2, 7, 4, 0, fired);
    assert_int_equal(fired[3], 0);
    assert_int_equal(fired[6], 1);
    assert_int_equal(tw_rule_last_result(e->rule)->violations, 1);
    rt_env_free(e);

    /* the documented formula (default): a fall under 0.1 % fires, so the
     * second series fires at 12 too (0.30 vs 0.30) */
    const char *keep[] = {"stop_at_first_fire", "false", NULL};
    e = make("LossNotDecreasing", keep);
    memset(fired, 0, sizeof(fired));
    lnd_feed(e, t2, 7, 4, 0, fired);
    assert_int_equal(fired[3], 1);
    assert_int_equal(fired[6], 1);
    tw_finding f;
    finding_of(e, &f);
    assert_non_null(strstr(f.magnitude, "increasing")); /* +40 % > 5 % */
    rt_env_free(e);

    /* a healthy loss never fires; negative losses use |L_b| */
    const double good[] = {2.0, 1.8, 1.6, 1.4, 1.2, 1.0, 0.8, 0.6};
    e = make("LossNotDecreasing", keep);
    lnd_feed(e, good, 8, 4, 0, NULL);
    assert_int_equal(tw_rule_last_result(e->rule)->violations, 0);
    assert_true(tw_rule_last_result(e->rule)->datapoints == 8);
    rt_env_free(e);
    const double neg[] = {-1.0, -1.5, -2.0, -2.5, -3.0, -3.5};
    e = make("LossNotDecreasing", keep);
    lnd_feed(e, neg, 6, 4, 0, NULL);
    assert_int_equal(tw_rule_last_result(e->rule)->violations, 0);
    rt_env_free(e);
}

/* mode None prefers EVAL; a checkpoint mid-way continues exactly */
static void test_loss_not_decreasing_modes_and_checkpoint(void **st)
{
    (void)st;
    const char *kv[] = {"num_steps", "2", "stop_at_first_fire", "false", NULL};
    rt_env *e = make("LossNotDecreasing", kv);
    tset s = {0};
    /* TRAIN falls, EVAL is flat: only EVAL is watched once seen */
    for (int64_t k = 0; k < 3; k++) {
        s.n = 0;
        loss(&s, TW_MODE_TRAIN, 2 * k, 1.0 - 0.1 * (double)k);
        run(e, &s, (uint64_t)(2 * k));
    }
    assert_int_equal(tw_rule_last_result(e->rule)->violations, 0);
    rt_env *c =
        rt_clone_via_checkpoint(e, "LossNotDecreasing", TW_SEMANTICS_FIXED, kv);
    for (int64_t k = 0; k < 3; k++) {
        s.n = 0;
        tw_tensor *t = loss(&s, TW_MODE_EVAL, 10 + k, 0.7);
        t->mode_step = k;
        run(e, &s, (uint64_t)(10 + k));
        run(c, &s, (uint64_t)(10 + k));
        s.n = 0;
        loss(&s, TW_MODE_TRAIN, 20 + 2 * k, 0.5 - 0.1 * (double)k)->mode_step =
            3 + k;
        run(e, &s, (uint64_t)(20 + k));
        run(c, &s, (uint64_t)(20 + k));
    }
    assert_int_equal(tw_rule_last_result(e->rule)->violations, 1);
    char a[4096];
    snprintf(a, sizeof(a), "%s", rt_report_text(e));
    assert_string_equal(a, rt_report_text(c));
    assert_non_null(strstr(a, "\"mode\": \"EVAL\""));
    rt_env_free(c);
    rt_env_free(e);
}

/* ---- UnchangedTensor ----------------------------------------------------- */

static void test_unchanged_tensor(void **st)
{
    (void)st;
    rt_env *x = rt_env_new();
    assert_int_equal(rt_create(x, "UnchangedTensor", TW_SEMANTICS_FIXED, NULL),
                     TW_ERR); /* needs a selection */
    assert_non_null(strstr(x->err, "collection_names"));
    rt_env_free(x);
    const char *kv[] = {"collection_names", "losses,weights", NULL};
    rt_env *e = make("UnchangedTensor", kv);
    tset s = {0};
    /* a constant loss (scalar, exact): fires at its 3rd saved step */
    for (int64_t k = 0; k < 3; k++) {
        s.n = 0;
        loss(&s, TW_MODE_TRAIN, k, 0.6931);
        const tw_scan_result *r = run(e, &s, (uint64_t)k);
        assert_int_equal(r->condition_met, k == 2);
    }
    rt_env_free(e);
    /* a falling loss and weights that move do not; weights whose
     * update_l2 is 0 twice in a row (3 publications) do */
    e = make("UnchangedTensor", kv);
    for (int64_t k = 0; k < 3; k++) {
        s.n = 0;
        loss(&s, TW_MODE_TRAIN, k, 1.0 - 0.1 * (double)k);
        tw_tensor *w = add(&s, "Net_fc.weight", "weights", TW_MODE_TRAIN, k,
                           "l2", 5.0, "update_l2", k == 0 ? 0 : 0.3);
        w->prev_step = k - 1;
        assert_int_equal(run(e, &s, (uint64_t)k)->condition_met, 0);
    }
    for (int64_t k = 3; k < 6; k++) {
        s.n = 0;
        tw_tensor *w = add(&s, "Net_fc.weight", "weights", TW_MODE_TRAIN, k,
                           "l2", 5.0, "update_l2", 0.0);
        w->prev_step = k - 1;
        assert_int_equal(run(e, &s, (uint64_t)k)->condition_met, k == 4);
    }
    rt_env_free(e);
}

/* ---- WeightUpdateRatio --------------------------------------------------- */

static void test_weight_update_ratio(void **st)
{
    (void)st;
    const char *kv[] = {"stop_at_first_fire", "false", NULL};
    rt_env *e = make("WeightUpdateRatio", kv);
    tset s = {0};
    add(&s, "Net_fc.weight", NULL, TW_MODE_TRAIN, 0, "l2", 10.0, NULL, 0);
    add(&s, "gradient/Net_fc.weight", NULL, TW_MODE_TRAIN, 0, "l2", 1e-20,
        "update_l2", 0); /* gradients are not weights */
    assert_int_equal(run(e, &s, 0)->datapoints, 1);
    s.n = 0;
    tw_tensor *w = add(&s, "Net_fc.weight", NULL, TW_MODE_TRAIN, 1, "l2", 10.0,
                       "update_l2", 0.01); /* ratio 1e-3: healthy */
    w->prev_step = 0;
    assert_int_equal(run(e, &s, 1)->condition_met, 0);
    s.n = 0;
    w = add(&s, "Net_fc.weight", NULL, TW_MODE_TRAIN, 2, "l2", 10.0,
            "update_l2", 0.0); /* frozen: ratio 0 < 1e-8 */
    w->prev_step = 1;
    assert_int_equal(run(e, &s, 2)->condition_met, 1);
    s.n = 0;
    w = add(&s, "Net_fc.weight", NULL, TW_MODE_TRAIN, 3, "l2", 200.0,
            "update_l2", 190.0); /* ratio 19 > 10 */
    w->prev_step = 2;
    assert_int_equal(run(e, &s, 3)->condition_met, 1);
    s.n = 0;
    w = add(&s, "Net_fc.weight", NULL, TW_MODE_TRAIN, 9, "l2", 200.0,
            "update_l2", 0.0);
    w->prev_step = 7; /* step 7 never seen: not evaluated */
    assert_int_equal(run(e, &s, 4)->condition_met, 0);
    rt_env_free(e);
}

/* ---- AllZero, TensorVariance, DeadRelu ----------------------------------- */

static void test_all_zero(void **st)
{
    (void)st;
    const char *kv[] = {"tensor_regex", "relu", "stop_at_first_fire", "false",
                        NULL};
    rt_env *e = make("AllZero", kv);
    tset s = {0};
    add(&s, "relu_output_0", NULL, TW_MODE_TRAIN, 0, "zero_fraction", 0.5, NULL,
        0);
    assert_int_equal(run(e, &s, 0)->condition_met, 0);
    s.n = 0;
    add(&s, "relu_output_0", NULL, TW_MODE_TRAIN, 1, "zero_fraction", 1.0, NULL,
        0);
    assert_int_equal(run(e, &s, 1)->condition_met, 1);
    rt_env_free(e);
    const char *half[] = {"tensor_regex", "relu", "threshold", "50", NULL};
    e = make("AllZero", half);
    s.n = 0;
    add(&s, "relu_output_0", NULL, TW_MODE_TRAIN, 0, "zero_fraction", 0.5, NULL,
        0);
    assert_int_equal(run(e, &s, 0)->condition_met, 1); /* >= threshold */
    rt_env_free(e);
}

static void test_tensor_variance(void **st)
{
    (void)st;
    const char *kv[] = {"collection_names",
                        "weights",
                        "max_threshold",
                        "4",
                        "stop_at_first_fire",
                        "false",
                        NULL};
    rt_env *e = make("TensorVariance", kv);
    tset s = {0};
    add(&s, "w", "weights", TW_MODE_TRAIN, 0, "variance", 3.9, NULL, 0);
    assert_int_equal(run(e, &s, 0)->condition_met, 0);
    s.n = 0;
    add(&s, "w", "weights", TW_MODE_TRAIN, 1, "variance", 4.5, NULL, 0);
    assert_int_equal(run(e, &s, 1)->condition_met, 1);
    /* raw fall-back: the population variance (ddof 0) of 1, 3 is 1 */
    s.n = 0;
    tw_tensor *t = add(&s, "w", "weights", TW_MODE_TRAIN, 2, NULL, 0, NULL, 0);
    static const double raw[] = {1, 3};
    t->raw = raw;
    t->nraw = 2;
    assert_int_equal(run(e, &s, 2)->condition_met, 0);
    rt_env_free(e);
    const char *minv[] = {"collection_names", "weights", "min_threshold", "1.5",
                          NULL};
    e = make("TensorVariance", minv);
    assert_int_equal(run(e, &s, 0)->condition_met, 1); /* 1 < 1.5 (ddof 0) */
    rt_env_free(e);
    const char *none[] = {"collection_names", "weights", NULL};
    e = make("TensorVariance", none); /* can never fire, as the reference */
    s.n = 0;
    add(&s, "w", "weights", TW_MODE_TRAIN, 0, "variance", 1e30, NULL, 0);
    assert_int_equal(run(e, &s, 0)->condition_met, 0);
    rt_env_free(e);
}

static void test_dead_relu(void **st)
{
    (void)st;
    rt_env *e = make("DeadRelu", NULL);
    tset s = {0};
    add(&s, "features.relu_output_0", NULL, TW_MODE_TRAIN, 0, "dead_fraction",
        0.3, NULL, 0);
    assert_int_equal(run(e, &s, 0)->condition_met, 0);
    s.n = 0;
    add(&s, "block.act", "relu_output", TW_MODE_TRAIN, 1, "dead_fraction", 0.9,
        NULL, 0);
    assert_int_equal(run(e, &s, 1)->condition_met, 1);
    rt_env_free(e);
    /* raw fall-back: batch 4 x 2 nodes, node 0 never active, node 1 once */
    e = make("DeadRelu", NULL);
    s.n = 0;
    tw_tensor *t =
        add(&s, "relu_output_0", NULL, TW_MODE_TRAIN, 0, NULL, 0, NULL, 0);
    static const double raw[] = {0, 1, 0, 0, 0, 0, 0, 0};
    static const int64_t shape[] = {4, 2};
    t->raw = raw;
    t->nraw = 8;
    t->shape = shape;
    t->nshape = 2;
    /* node 0 dead (0 %), node 1 active 25 %: 50 % dead, not > 50 */
    assert_int_equal(run(e, &s, 0)->condition_met, 0);
    rt_env_free(e);
    const char *kv[] = {"threshold_layer", "40", NULL};
    e = make("DeadRelu", kv);
    assert_int_equal(run(e, &s, 0)->condition_met, 1);
    rt_env_free(e);
}

/* ---- Overfit, Overtraining ------------------------------------------------
 */

static void test_overfit(void **st)
{
    (void)st;
    rt_env *e = make("Overfit", NULL);
    tset s = {0};
    int64_t step = 0;
    /* phase 1: train 1.0, eval 1.05 (ratio 0.05); phase 2: train 0.5,
     * eval 0.8 (0.6): fires when the next train loss ends the phase */
    const double tr[] = {1.0, 0.5, 0.3}, ev[] = {1.05, 0.8};
    for (int p = 0; p < 3; p++) {
        for (int i = 0; i < 2; i++) {
            s.n = 0;
            loss(&s, TW_MODE_TRAIN, step, tr[p]);
            const tw_scan_result *r = run(e, &s, (uint64_t)step);
            assert_int_equal(r->condition_met, p == 2 && i == 0);
            step++;
        }
        if (p == 2)
            break;
        s.n = 0;
        loss(&s, TW_MODE_EVAL, step, ev[p]);
        assert_int_equal(run(e, &s, (uint64_t)step)->condition_met, 0);
        step++;
    }
    tw_finding f;
    finding_of(e, &f);
    assert_non_null(strstr(f.summary, "0.8 vs training loss 0.5"));
    rt_env_free(e);
}

static void test_overtraining(void **st)
{
    (void)st;
    const char *kv[] = {"patience_train", "3", NULL};
    rt_env *e = make("Overtraining", kv);
    tset s = {0};
    const double v[] = {1.0, 0.9, 0.895, 0.9, 0.893, 0.891, 0.7};
    for (int64_t k = 0; k < 7; k++) {
        s.n = 0;
        loss(&s, TW_MODE_TRAIN, k, v[k]);
        /* best 0.9 at step 1; 0.895, 0.9, 0.893 do not beat it by > 0.01 */
        assert_int_equal(run(e, &s, (uint64_t)k)->condition_met, k == 4);
    }
    rt_env_free(e);
}

/* ---- Confusion, ClassImbalance (raw labels and predictions) -------------- */

static tw_tensor *raw_vec(tset *s, const char *name, const char *coll,
                          int64_t step, const double *v, uint32_t n)
{
    tw_tensor *t = add(s, name, coll, TW_MODE_TRAIN, step, NULL, 0, NULL, 0);
    t->raw = v;
    t->nraw = n;
    t->numel = n;
    return t;
}

static void test_confusion(void **st)
{
    (void)st;
    /* the reference's test 1: a perfect classifier over 10 classes does
     * not fire (the documented diagonal formula would: 0.1 < 0.9) */
    static double lab[10], pred[10], pred47[10];
    for (int i = 0; i < 10; i++)
        lab[i] = pred[i] = pred47[i] = i;
    pred47[4] = 7;
    rt_env *e = make("Confusion", NULL);
    tset s = {0};
    raw_vec(&s, "labels", NULL, 0, lab, 10);
    raw_vec(&s, "y_hat", "predictions", 0, pred, 10);
    assert_int_equal(run(e, &s, 0)->condition_met, 0);
    assert_int_equal(tw_rule_last_result(e->rule)->datapoints, 1);
    /* test 2: 4 predicted as 7 fires (row 4: diagonal 0 < 0.9) */
    s.n = 0;
    raw_vec(&s, "labels", NULL, 1, lab, 10);
    raw_vec(&s, "predictions", NULL, 1, pred47, 10);
    assert_int_equal(run(e, &s, 1)->condition_met, 1);
    tw_finding f;
    finding_of(e, &f);
    assert_non_null(strstr(f.summary, "class 4"));
    rt_env_free(e);
    /* test 3: min_diag 0, max_off_diag 0.01: row 4's off-diagonal only */
    const char *kv[] = {"min_diag", "0", "max_off_diag", "0.01", NULL};
    e = make("Confusion", kv);
    s.n = 0;
    raw_vec(&s, "labels", NULL, 1, lab, 10);
    raw_vec(&s, "predictions", NULL, 1, pred47, 10);
    assert_int_equal(run(e, &s, 0)->condition_met, 1);
    finding_of(e, &f);
    assert_non_null(strstr(f.summary, "class 4 predicted as 7"));
    rt_env_free(e);
    /* not class ids: the step is not evaluated */
    static const double frac[] = {0.5, 1};
    e = make("Confusion", NULL);
    s.n = 0;
    raw_vec(&s, "labels", NULL, 0, frac, 2);
    raw_vec(&s, "predictions", NULL, 0, frac, 2);
    assert_int_equal(run(e, &s, 0)->datapoints, 1);
    assert_int_equal(run(e, &s, 0)->condition_met, 0);
    rt_env_free(e);
    /* cumulative: two steps of one class each, then a confused one */
    const char *cum[] = {
        "cumulative",         "true",  "min_diag", "0.6", "max_off_diag", "0.3",
        "stop_at_first_fire", "false", NULL};
    static const double l0[] = {0, 0}, l1[] = {1, 1}, p1[] = {0, 1};
    e = make("Confusion", cum);
    s.n = 0;
    raw_vec(&s, "labels", NULL, 0, l0, 2);
    raw_vec(&s, "predictions", NULL, 0, l0, 2);
    assert_int_equal(run(e, &s, 0)->condition_met, 0);
    s.n = 0;
    raw_vec(&s, "labels", NULL, 1, l1, 2);
    raw_vec(&s, "predictions", NULL, 1, p1, 2); /* class 1: 1 of 2 */
    assert_int_equal(run(e, &s, 1)->condition_met, 1);
    /* the cumulative matrix survives a checkpoint */
    rt_env *c =
        rt_clone_via_checkpoint(e, "Confusion", TW_SEMANTICS_FIXED, cum);
    s.n = 0;
    raw_vec(&s, "labels", NULL, 2, l1, 2);
    raw_vec(&s, "predictions", NULL, 2, l1, 2); /* class 1: 3 of 4 */
    assert_int_equal(run(e, &s, 2)->condition_met, 0);
    assert_int_equal(run(c, &s, 2)->condition_met, 0);
    char a[4096];
    snprintf(a, sizeof(a), "%s", rt_report_text(e));
    assert_string_equal(a, rt_report_text(c));
    rt_env_free(c);
    rt_env_free(e);
}

static void test_class_imbalance(void **st)
{
    (void)st;
    static double lab[1000];
    for (int i = 0; i < 1000; i++)
        lab[i] = i < 990 ? 0 : 1;
    rt_env *e = make("ClassImbalance", NULL);
    tset s = {0};
    /* 400 labels: under the `samples` gate (500) */
    raw_vec(&s, "labels", NULL, 0, lab, 400);
    raw_vec(&s, "predictions", NULL, 0, lab, 400);
    assert_int_equal(run(e, &s, 0)->condition_met, 0);
    /* the reference's test: 990 of class 0, 10 of class 1 (ratio 99 > 10);
     * cumulative, so the gate is passed */
    s.n = 0;
    raw_vec(&s, "train_labels", NULL, 3, lab, 1000);
    raw_vec(&s, "train_predictions", NULL, 3, lab, 1000);
    assert_int_equal(run(e, &s, 1)->condition_met, 1);
    tw_finding f;
    finding_of(e, &f);
    assert_non_null(strstr(f.summary, "class 0 has 1390 samples, class 1 "
                                      "only 10"));
    const char *defaults[] = {NULL};
    rt_env *c = rt_clone_via_checkpoint(e, "ClassImbalance", TW_SEMANTICS_FIXED,
                                        defaults);
    s.n = 0;
    raw_vec(&s, "labels", NULL, 4, lab, 1000);
    raw_vec(&s, "predictions", NULL, 4, lab, 1000);
    run(e, &s, 2);
    run(c, &s, 2);
    char a[4096];
    snprintf(a, sizeof(a), "%s", rt_report_text(e));
    assert_string_equal(a, rt_report_text(c));
    assert_non_null(strstr(a, "\"stopped_at_first_fire\": true"));
    rt_env_free(c);
    rt_env_free(e);
    /* balanced but class 1 always mispredicted; argmax over (N, 2) */
    static const double l2[] = {0, 1, 0, 1, 0, 1};
    static const double scores[] = {0.9, 0.1, 0.8, 0.2, 0.7, 0.3,
                                    0.6, 0.4, 0.9, 0.1, 0.9, 0.1};
    const char *kv[] = {"samples", "6", "argmax", "true", NULL};
    e = make("ClassImbalance", kv);
    s.n = 0;
    raw_vec(&s, "labels", NULL, 0, l2, 6);
    tw_tensor *p = raw_vec(&s, "predictions", NULL, 0, scores, 12);
    static const int64_t shape[] = {6, 2};
    p->shape = shape;
    p->nshape = 2;
    assert_int_equal(run(e, &s, 0)->condition_met, 1);
    finding_of(e, &f);
    assert_non_null(strstr(f.summary, "class 1 mispredicted in 1"));
    rt_env_free(e);
}

/* ---- SaturatedActivation, PoorWeightInitialization ------------------------
 */

static void test_saturated_activation(void **st)
{
    (void)st;
    rt_env *e = make("SaturatedActivation", NULL);
    tset s = {0};
    add(&s, "lstm.tanh_input_0", NULL, TW_MODE_TRAIN, 0, "saturated_fraction",
        0.4, NULL, 0);
    add(&s, "gate.relu_input_0", NULL, TW_MODE_TRAIN, 0, "saturated_fraction",
        1.0, NULL, 0); /* not selected (the default regex) */
    assert_int_equal(run(e, &s, 0)->condition_met, 0);
    /* raw: sigmoid inputs of 2 samples x 2 nodes, node 0 at -30 (beyond
     * -23) in both, node 1 at 0 (inside): 50 % saturated, not > 50 */
    s.n = 0;
    tw_tensor *t = add(&s, "gate.sigmoid_input_0", NULL, TW_MODE_TRAIN, 1, NULL,
                       0, NULL, 0);
    static const double raw[] = {-30, 0, -30, 0};
    static const int64_t shape[] = {2, 2};
    t->raw = raw;
    t->nraw = 4;
    t->shape = shape;
    t->nshape = 2;
    assert_int_equal(run(e, &s, 1)->condition_met, 0);
    rt_env_free(e);
    const char *kv[] = {"threshold_layer", "40", NULL};
    e = make("SaturatedActivation", kv);
    assert_int_equal(run(e, &s, 0)->condition_met, 1);
    /* the same values under tanh bounds: -30 is saturated there too */
    rt_env_free(e);
}

static void test_poor_weight_initialization(void **st)
{
    (void)st;
    const char *kv[] = {"stop_at_first_fire", "false", NULL};
    rt_env *e = make("PoorWeightInitialization", kv);
    tset s = {0};
    add(&s, "fc1.relu_input_0", NULL, TW_MODE_TRAIN, 0, "variance", 1.0, NULL,
        0);
    add(&s, "fc2.relu_input_0", NULL, TW_MODE_TRAIN, 0, "variance", 5.0, NULL,
        0);
    add(&s, "gradient/Net_fc1.weight", NULL, TW_MODE_TRAIN, 0, "p5", -0.01,
        "p95", 0.01);
    loss(&s, TW_MODE_TRAIN, 0, 2.0);
    assert_int_equal(run(e, &s, 0)->condition_met, 0);
    /* condition 1: variances 0.01 .. 5, ratio 500 > 10 */
    s.n = 0;
    add(&s, "fc1.relu_input_0", NULL, TW_MODE_TRAIN, 1, "variance", 0.01, NULL,
        0);
    add(&s, "fc2.relu_input_0", NULL, TW_MODE_TRAIN, 1, "variance", 5.0, NULL,
        0);
    loss(&s, TW_MODE_TRAIN, 1, 1.9);
    assert_int_equal(run(e, &s, 1)->condition_met, 1);
    /* condition 2: a gradient with p95 - p5 = 1e-5 */
    s.n = 0;
    add(&s, "gradient/Net_fc1.weight", NULL, TW_MODE_TRAIN, 2, "p5", 0.0, "p95",
        1e-5);
    assert_int_equal(run(e, &s, 2)->condition_met, 1);
    /* condition 3: the loss stuck for 5 saved steps (3..7) */
    for (int64_t k = 3; k < 8; k++) {
        s.n = 0;
        loss(&s, TW_MODE_TRAIN, k, 1.95);
        assert_int_equal(run(e, &s, (uint64_t)k)->condition_met, k == 7);
    }
    /* past `steps` (10): nothing is evaluated */
    s.n = 0;
    add(&s, "gradient/Net_fc1.weight", NULL, TW_MODE_TRAIN, 10, "p5", 0.0,
        "p95", 0.0);
    const tw_scan_result *r = run(e, &s, 10);
    assert_int_equal(r->condition_met, 0);
    assert_int_equal(r->datapoints, 8);
    rt_env_free(e);
}

/* ---- every rule: a checkpoint after each scan changes nothing ---------- */

/* A 30-step stream with something for every rule: falling then flat
 * losses in TRAIN and EVAL, gradients that vanish, weights that freeze,
 * ReLU outputs that die, a NaN late. */
static void stream_scan(tset *s, int scan)
{
    s->n = 0;
    for (int64_t k = scan * 3; k < scan * 3 + 3; k++) {
        double l = k < 15 ? 2.0 - 0.1 * (double)k : 0.5;
        int eval = k % 5 == 4;
        if (eval && k > 10)
            l *= 1.5; /* validation well above training: overfitting */
        loss(s, eval ? TW_MODE_EVAL : TW_MODE_TRAIN, k, k == 27 ? NAN : l);
        add(s, "gradient/Net_fc.weight", "gradients", TW_MODE_TRAIN, k,
            "abs_mean", k > 20 ? 1e-10 : 1e-3, "nan_count", 0);
        tw_tensor *w = add(s, "Net_fc.weight", "weights", TW_MODE_TRAIN, k,
                           "l2", 3.0, "update_l2", k > 18 ? 0.0 : 0.01);
        w->prev_step = k - 1;
        add(s, "relu_output_0", "relu_output", TW_MODE_TRAIN, k,
            "dead_fraction", k > 24 ? 0.8 : 0.1, "zero_fraction",
            k > 24 ? 1.0 : 0.2);
    }
}

static void test_checkpoint_every_scan(void **st)
{
    (void)st;
    static const char *const keep[] = {"stop_at_first_fire", "false",
                                       "collection_names",
                                       "losses,weights,relu_output", NULL};
    static const char *const keep_nosel[] = {"stop_at_first_fire", "false",
                                             NULL};
    static const char *const lnd[] = {"stop_at_first_fire", "false",
                                      "num_steps", "5", NULL};
    static const char *const pwi[] = {
        "stop_at_first_fire", "false", "steps", "30", "patience", "3", NULL};
    static const struct {
        const char *rule;
        const char *const *kv;
    } rules[] = {
        {"ExplodingTensor", keep_nosel},   {"LossNotDecreasing", lnd},
        {"VanishingGradient", keep_nosel}, {"UnchangedTensor", keep},
        {"WeightUpdateRatio", keep_nosel}, {"AllZero", keep},
        {"TensorVariance", keep},          {"DeadRelu", keep_nosel},
        {"Overfit", keep_nosel},           {"Overtraining", keep_nosel},
        {"PoorWeightInitialization", pwi},
    };
    for (size_t r = 0; r < sizeof(rules) / sizeof(rules[0]); r++) {
        rt_env *whole = make(rules[r].rule, rules[r].kv);
        rt_env *cut = make(rules[r].rule, rules[r].kv);
        tset s = {0};
        for (int k = 0; k < 10; k++) {
            stream_scan(&s, k);
            run(whole, &s, (uint64_t)k);
            run(cut, &s, (uint64_t)k);
            rt_env *c = rt_clone_via_checkpoint(
                cut, rules[r].rule, TW_SEMANTICS_FIXED, rules[r].kv);
            rt_env_free(cut);
            cut = c;
        }
        /* the clone's counters come from its (restored) last scan */
        stream_scan(&s, 9);
        s.n = 0;
        const tw_scan_result *a = run(whole, &s, 10);
        const tw_scan_result *b = run(cut, &s, 10);
        assert_int_equal(a->violations, b->violations);
        assert_int_equal(a->datapoints, b->datapoints);
        char text[8192];
        snprintf(text, sizeof(text), "%s", rt_report_text(whole));
        if (strcmp(text, rt_report_text(cut)) != 0)
            fail_msg("%s: report after restores differs:\n%s\n%s",
                     rules[r].rule, text, rt_report_text(cut));
        /* every rule finds its planted problem in this stream, except
         * TensorVariance (no thresholds: never) */
        int want = strcmp(rules[r].rule, "TensorVariance") != 0;
        if ((a->violations > 0) != want)
            fail_msg("%s: %lld violation(s)", rules[r].rule,
                     (long long)a->violations);
        rt_env_free(whole);
        rt_env_free(cut);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tensor_header),
        cmocka_unit_test(test_exploding_tensor),
        cmocka_unit_test(test_step_range_and_mode),
        cmocka_unit_test(test_vanishing_gradient),
        cmocka_unit_test(test_loss_not_decreasing),
        cmocka_unit_test(test_loss_not_decreasing_modes_and_checkpoint),
        cmocka_unit_test(test_unchanged_tensor),
        cmocka_unit_test(test_weight_update_ratio),
        cmocka_unit_test(test_all_zero),
        cmocka_unit_test(test_tensor_variance),
        cmocka_unit_test(test_dead_relu),
        cmocka_unit_test(test_overfit),
        cmocka_unit_test(test_overtraining),
        cmocka_unit_test(test_confusion),
        cmocka_unit_test(test_class_imbalance),
        cmocka_unit_test(test_saturated_activation),
        cmocka_unit_test(test_poor_weight_initialization),
        cmocka_unit_test(test_checkpoint_every_scan),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
