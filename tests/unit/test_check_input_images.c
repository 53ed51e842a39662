/* test_check_input_images.c - CheckInputImages (DEBUG_RULES.md §4.8) on
 * hand-built tensors carrying the hook's channel reductions
 * (channel_sum/<c>, channel_count, channel_axis): the decisions its header
 * documents are pinned here (strict threshold, window reset after each
 * evaluation, images = the batch dimension, a channel axis other than 1,
 * the axis mismatch error, a restart in the middle of a window). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
/* cmocka.h needs the four above first */
#include <cmocka.h>

#include <math.h>

#include "rule_test_util.h"

#define MAXT 16
#define MAXC 4

static const char *const sum_op[MAXC] = {"channel_sum/0", "channel_sum/1",
                                         "channel_sum/2", "channel_sum/3"};
static const char *const image_coll[] = {"input_image"};

typedef struct iset {
    tw_tensor t[MAXT];
    tw_tensor_reduction red[MAXT][MAXC + 2];
    int64_t shape[MAXT][4];
    size_t n;
} iset;

/* An input batch at `step` in collection input_image: `images` images of
 * `channels` channels along `axis` (NCHW with axis 1: shape (N, C, 2, 2);
 * NHWC with axis 3: (N, 2, 2, C)), each channel's elements all equal to
 * mean[c]. */
static tw_tensor *batch(iset *s, const char *name, int64_t step, int64_t axis,
                        int64_t images, int channels, const double *mean)
{
    assert_true(s->n < MAXT && channels <= MAXC);
    tw_tensor *t = &s->t[s->n];
    memset(t, 0, sizeof(*t));
    t->node = "w0";
    t->name = name;
    t->collections = image_coll;
    t->ncollections = 1;
    t->mode = TW_MODE_TRAIN;
    t->step = step;
    t->mode_step = step;
    t->wall_us = 1700000000000000 + step * 1000000;
    t->prev_step = -1;
    t->dtype = "float32";
    int64_t *sh = s->shape[s->n];
    if (axis == 1) {
        sh[0] = images, sh[1] = channels, sh[2] = 2, sh[3] = 2;
    } else {
        sh[0] = images, sh[1] = 2, sh[2] = 2, sh[3] = channels;
    }
    t->shape = sh;
    t->nshape = 4;
    t->numel = images * channels * 4;
    double per_channel = (double)(images * 4);
    tw_tensor_reduction *r = s->red[s->n];
    for (int c = 0; c < channels; c++)
        r[c] = (tw_tensor_reduction){sum_op[c], mean[c] * per_channel};
    r[channels] = (tw_tensor_reduction){"channel_count", per_channel};
    r[channels + 1] = (tw_tensor_reduction){"channel_axis", (double)axis};
    t->reductions = r;
    t->nreductions = (uint32_t)channels + 2;
    s->n++;
    return t;
}

static const tw_scan_result *run(rt_env *e, iset *s, uint64_t k)
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

static rt_env *make(const char *const *kv)
{
    rt_env *e = rt_env_new();
    if (rt_create(e, "CheckInputImages", TW_SEMANTICS_FIXED, kv) != TW_OK)
        fail_msg("CheckInputImages: %s", e->err);
    return e;
}

static void finding_of(rt_env *e, tw_finding *f)
{
    memset(f, 0, sizeof(*f));
    assert_int_equal(tw_rule_finding(e->rule, f), TW_OK);
}

/* Un-normalized [0, 1] images (mean 0.5) fire once 500 images were seen,
 * not before; the finding names the channel, its mean and the fix. */
static void test_fires_after_threshold_samples(void **st)
{
    (void)st;
    static const double m[] = {0.1, 0.5, -0.05};
    rt_env *e = make(NULL);
    iset s = {0};
    for (int64_t k = 0; k < 3; k++) /* 3 x 128 = 384 images: under 500 */
        batch(&s, "Net_input_0", k * 500, 1, 128, 3, m);
    assert_int_equal(run(e, &s, 0)->condition_met, 0);
    s.n = 0;
    batch(&s, "Net_input_0", 1500, 1, 128, 3, m); /* 512 images */
    const tw_scan_result *r = run(e, &s, 1);
    assert_int_equal(r->condition_met, 1);
    assert_int_equal(r->datapoints, 4);
    tw_finding f;
    finding_of(e, &f);
    assert_non_null(strstr(f.summary, "step 1500"));
    assert_non_null(strstr(f.summary, "channel 1 has mean 0.5 (|mean| > 0.2) "
                                      "over 512 images"));
    assert_non_null(strstr(f.recommendation, "Normalize(mean, std)"));
    assert_true(fabs(f.value - 0.5) < 1e-12);
    /* stop_at_first_fire (default true): a second bad window is not
     * evaluated */
    s.n = 0;
    batch(&s, "Net_input_0", 2000, 1, 512, 3, m);
    r = run(e, &s, 2);
    assert_int_equal(r->condition_met, 0);
    assert_int_equal(r->violations, 1);
    assert_int_equal(r->datapoints, 4);
    rt_env_free(e);
}

/* |mean| exactly at threshold_mean does not fire; just above does. */
static void test_threshold_is_strict(void **st)
{
    (void)st;
    static const double at[] = {0.2, -0.2};
    static const double above[] = {0.0, -0.2000001};
    const char *kv[] = {"threshold_samples", "8", NULL};
    rt_env *e = make(kv);
    iset s = {0};
    batch(&s, "Net_input_0", 0, 1, 8, 2, at);
    assert_int_equal(run(e, &s, 0)->condition_met, 0);
    s.n = 0;
    batch(&s, "Net_input_0", 1, 1, 8, 2, above);
    assert_int_equal(run(e, &s, 1)->condition_met, 1);
    rt_env_free(e);
}

/* After an evaluation the window starts again: a normalized window
 * followed by an un-normalized one fires only on the second (a
 * cumulative mean would stay under the threshold), and the first
 * window's images do not count towards the second's gate. */
static void test_reset_after_evaluation(void **st)
{
    (void)st;
    static const double zero[] = {0.0};
    static const double high[] = {0.3};
    const char *kv[] = {"threshold_samples", "100", "stop_at_first_fire",
                        "false", NULL};
    rt_env *e = make(kv);
    iset s = {0};
    batch(&s, "Net_input_0", 0, 1, 100, 1, zero); /* window 1: mean 0 */
    assert_int_equal(run(e, &s, 0)->condition_met, 0);
    s.n = 0;
    batch(&s, "Net_input_0", 1, 1, 60, 1, high); /* 60 < 100: no verdict */
    assert_int_equal(run(e, &s, 1)->condition_met, 0);
    s.n = 0;
    batch(&s, "Net_input_0", 2, 1, 60, 1, high); /* window 2: 120, 0.3 */
    assert_int_equal(run(e, &s, 2)->condition_met, 1);
    /* keep evaluating: the next window fires again, on its own images */
    s.n = 0;
    batch(&s, "Net_input_0", 3, 1, 99, 1, high);
    assert_int_equal(run(e, &s, 3)->condition_met, 0);
    s.n = 0;
    batch(&s, "Net_input_0", 4, 1, 1, 1, high);
    const tw_scan_result *r = run(e, &s, 4);
    assert_int_equal(r->condition_met, 1);
    assert_int_equal(r->violations, 2);
    rt_env_free(e);
}

/* channel 3 (NHWC): the images are still the batch dimension; a tensor
 * summed along another axis than the rule's is a configuration error. */
static void test_channel_last_and_axis_mismatch(void **st)
{
    (void)st;
    static const double m[] = {0.0, 0.0, 0.9};
    const char *nhwc[] = {"channel", "3", "threshold_samples", "10", NULL};
    rt_env *e = make(nhwc);
    iset s = {0};
    batch(&s, "Net_input_0", 0, 3, 10, 3, m);
    assert_int_equal(run(e, &s, 0)->condition_met, 1);
    tw_finding f;
    finding_of(e, &f);
    assert_non_null(strstr(f.summary, "channel 2 has mean 0.9"));
    assert_non_null(strstr(f.summary, "over 10 images"));
    rt_env_free(e);
    /* the hook summed along 1, the rule says 3 */
    e = make(nhwc);
    s.n = 0;
    batch(&s, "Net_input_0", 0, 1, 10, 3, m);
    tw_scan sc;
    memset(&sc, 0, sizeof(sc));
    sc.start_us = 1700000000000000;
    sc.end_us = sc.start_us + 60000000;
    sc.first_timestamp_us = sc.start_us;
    sc.rule_clock_us = sc.start_us;
    sc.tensors = s.t;
    sc.ntensors = s.n;
    rt_feed_only(e, &sc);
    assert_int_not_equal(tw_rule_scan(e->rule, &sc), TW_OK);
    assert_non_null(strstr(tw_rule_error(e->rule),
                           "Net_input_0: its channel sums are along axis 1, "
                           "the rule's channel is 3"));
    rt_env_free(e);
}

/* Selection: the collection input_image or the regex; a tensor without
 * channel sums (e.g. a module input of another collection) is not
 * evaluated. */
static void test_selection(void **st)
{
    (void)st;
    static const double m[] = {0.7};
    const char *kv[] = {"threshold_samples", "4", NULL};
    rt_env *e = make(kv);
    iset s = {0};
    tw_tensor *t = batch(&s, "conv1_input_0", 0, 1, 4, 1, m);
    t->ncollections = 0; /* neither the collection nor the regex */
    const tw_scan_result *r = run(e, &s, 0);
    assert_int_equal(r->datapoints, 0);
    rt_env_free(e);
    const char *re[] = {"threshold_samples", "4", "regex", "conv1_input_0",
                        NULL};
    e = make(re);
    assert_int_equal(run(e, &s, 0)->condition_met, 1);
    rt_env_free(e);
}

/* A restart (checkpoint and restore) in the middle of a window gives the
 * same verdict, at the same step, as the uninterrupted run. */
static void test_restart_mid_window(void **st)
{
    (void)st;
    static const double m[] = {0.25, 0.1};
    const char *kv[] = {"stop_at_first_fire", "false", NULL};
    rt_env *whole = make(kv);
    rt_env *cut = make(kv);
    iset s = {0};
    for (uint64_t k = 0; k < 12; k++) {
        s.n = 0;
        batch(&s, "Net_input_0", (int64_t)k * 10, 1, 64, 2, m);
        const tw_scan_result *a = run(whole, &s, k);
        int met = a->condition_met;
        const tw_scan_result *b = run(cut, &s, k);
        assert_int_equal(met, b->condition_met);
        /* 64-image batches: windows close at the 8th and 16th batch */
        assert_int_equal(met, k == 7);
        rt_env *c = rt_clone_via_checkpoint(cut, "CheckInputImages",
                                            TW_SEMANTICS_FIXED, kv);
        rt_env_free(cut);
        cut = c;
    }
    char text[8192];
    snprintf(text, sizeof(text), "%s", rt_report_text(whole));
    assert_string_equal(text, rt_report_text(cut));
    assert_non_null(strstr(text, "\"step\": 70"));
    rt_env_free(whole);
    rt_env_free(cut);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fires_after_threshold_samples),
        cmocka_unit_test(test_threshold_is_strict),
        cmocka_unit_test(test_reset_after_evaluation),
        cmocka_unit_test(test_channel_last_and_axis_mismatch),
        cmocka_unit_test(test_selection),
        cmocka_unit_test(test_restart_mid_window),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
