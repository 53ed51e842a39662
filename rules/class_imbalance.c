/*
 * class_imbalance.c - ClassImbalance (DEBUG_RULES.md §4.12).
 *
 * Condition: counts accumulate over steps, per class c: count_c (labels
 * seen) and miss_c (samples of label c predicted otherwise). Once at least
 * `samples` labels were seen, the rule fires when max_c count_c / min_c
 * count_c > threshold_imbalance over the classes seen, or miss_c / count_c
 * > threshold_misprediction for a class. Labels and predictions are raw
 * vectors (the hook sends small tensors the user names) whose names match
 * labels_regex / predictions_regex (Python re.search); with argmax the
 * predictions are (N, K) scores reduced over the last axis.
 *
 * Decisions (README "Debugging rules"):
 *  - §8.3 item 4: cumulative with the `samples` gate (documented);
 *    evaluated at every step after the gate;
 *  - classes never seen cannot be the minority;
 *  - at most 128 classes; a label or prediction that is no class id in
 *    [0, 128) makes the step not evaluated (nothing is counted);
 *  - stop_at_first_fire default true (§8.3 item 6).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbg_rule.h"

enum {
    P_IMBALANCE = 0,
    P_MISPREDICTION,
    P_SAMPLES,
    P_ARGMAX,
    P_LABELS_RE,
    P_PREDS_RE,
    P_OWN
};

#define CI_MAX_CLASSES 128

static const tw_param_spec ci_params[] = {
    {"threshold_imbalance", TW_PARAM_DOUBLE, "10", 0, 1e300,
     "largest allowed ratio of the most to the least frequent class"},
    {"threshold_misprediction", TW_PARAM_DOUBLE, "0.7", 0, 1,
     "largest allowed share of a class's samples predicted wrongly"},
    {"samples", TW_PARAM_INT, "500", 1, 9.0e15,
     "labels to see before evaluating"},
    {"argmax", TW_PARAM_BOOL, "false", 0, 1,
     "predictions are (N, K) scores: take the argmax of the last axis"},
    {"labels_regex", TW_PARAM_STRING, ".*labels", 0, 0,
     "Python regex of the labels tensor's name"},
    {"predictions_regex", TW_PARAM_STRING, ".*predictions", 0, 0,
     "Python regex of the predictions tensor's name"},
    DBG_COMMON_PARAMS,
};

typedef struct ci_state {
    double imbalance, mispred;
    int64_t samples;
    int argmax;
    pcre2_code *lre, *pre;
    pcre2_match_data *lmd, *pmd;
    int64_t count[CI_MAX_CLASSES], miss[CI_MAX_CLASSES];
    int64_t total;
} ci_state;

static void ci_destroy(void *impl)
{
    ci_state *s = impl;
    if (s == NULL)
        return;
    pcre2_code_free(s->lre);
    pcre2_code_free(s->pre);
    pcre2_match_data_free(s->lmd);
    pcre2_match_data_free(s->pmd);
    free(s);
}

static int ci_create(const tw_param_value *v, void **impl, char *err,
                     size_t errlen)
{
    ci_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "ClassImbalance: out of memory");
        return TW_ERR;
    }
    s->imbalance = v[P_IMBALANCE].d;
    s->mispred = v[P_MISPREDICTION].d;
    s->samples = v[P_SAMPLES].i;
    s->argmax = v[P_ARGMAX].i != 0;
    char why[256];
    const char *lre = v[P_LABELS_RE].is_none ? ".*labels" : v[P_LABELS_RE].s;
    const char *pre = v[P_PREDS_RE].is_none ? ".*predictions" : v[P_PREDS_RE].s;
    if ((s->lre = tw_tensor_regex_compile(lre, why, sizeof(why))) == NULL ||
        (s->pre = tw_tensor_regex_compile(pre, why, sizeof(why))) == NULL) {
        snprintf(err, errlen, "ClassImbalance: %s", why);
        ci_destroy(s);
        return TW_ERR;
    }
    s->lmd = pcre2_match_data_create_from_pattern(s->lre, NULL);
    s->pmd = pcre2_match_data_create_from_pattern(s->pre, NULL);
    if (s->lmd == NULL || s->pmd == NULL) {
        snprintf(err, errlen, "ClassImbalance: out of memory");
        ci_destroy(s);
        return TW_ERR;
    }
    *impl = s;
    return TW_OK;
}

static int ci_select(void *impl, const tw_tensor *t)
{
    ci_state *s = impl;
    return t->nraw > 0 && (tw_tensor_regex_search(s->lre, s->lmd, t->name) ||
                           tw_tensor_regex_search(s->pre, s->pmd, t->name));
}

static int64_t class_of(double v)
{
    if (!(v >= 0) || v >= CI_MAX_CLASSES || v != floor(v))
        return -1;
    return (int64_t)v;
}

/* Prediction i as a class id (argmax over the last axis), or -1. */
static int64_t pred_of(const ci_state *s, const tw_tensor *p, uint32_t n,
                       uint32_t i)
{
    if (!s->argmax)
        return class_of(p->raw[i]);
    uint32_t k = p->nraw / n;
    const double *row = &p->raw[(size_t)i * k];
    uint32_t best = 0;
    for (uint32_t j = 1; j < k; j++)
        if (row[j] > row[best])
            best = j;
    return best < CI_MAX_CLASSES ? (int64_t)best : -1;
}

static int ci_step(void *impl, const dbg_step *st, dbg_hit *hit, char *err,
                   size_t errlen)
{
    ci_state *s = impl;
    (void)err, (void)errlen;
    const tw_tensor *lab = NULL, *pred = NULL;
    for (size_t i = 0; i < st->ntensors; i++) {
        const tw_tensor *t = st->tensors[i];
        if (lab == NULL && tw_tensor_regex_search(s->lre, s->lmd, t->name))
            lab = t;
        else if (pred == NULL &&
                 tw_tensor_regex_search(s->pre, s->pmd, t->name))
            pred = t;
    }
    if (lab == NULL || pred == NULL)
        return 0;
    uint32_t n = lab->nraw;
    if (s->argmax ? pred->nraw % n != 0 || pred->nraw < n : pred->nraw != n)
        return 0;
    for (uint32_t i = 0; i < n; i++)
        if (class_of(lab->raw[i]) < 0 || pred_of(s, pred, n, i) < 0)
            return 0;
    for (uint32_t i = 0; i < n; i++) {
        int64_t c = class_of(lab->raw[i]);
        s->count[c]++;
        s->miss[c] += pred_of(s, pred, n, i) != c;
    }
    s->total += n;
    if (s->total < s->samples)
        return 0;
    int64_t most = -1, least = -1;
    for (int64_t c = 0; c < CI_MAX_CLASSES; c++) {
        if (s->count[c] == 0)
            continue;
        if (most < 0 || s->count[c] > s->count[most])
            most = c;
        if (least < 0 || s->count[c] < s->count[least])
            least = c;
        double m = (double)s->miss[c] / (double)s->count[c];
        if (m > s->mispred) {
            dbg_hit_set(hit, lab, m, s->mispred,
                        "class %lld mispredicted in %.3g of its %lld samples "
                        "(> %g)",
                        (long long)c, m, (long long)s->count[c], s->mispred);
            return 1;
        }
    }
    double ratio = (double)s->count[most] / (double)s->count[least];
    if (ratio > s->imbalance) {
        dbg_hit_set(hit, lab, ratio, s->imbalance,
                    "class %lld has %lld samples, class %lld only %lld: "
                    "ratio %.3g > %g over %lld labels",
                    (long long)most, (long long)s->count[most],
                    (long long)least, (long long)s->count[least], ratio,
                    s->imbalance, (long long)s->total);
        return 1;
    }
    return 0;
}

static void ci_save(void *impl, tw_ser *w)
{
    ci_state *s = impl;
    tw_ser_i64(w, s->total);
    for (int c = 0; c < CI_MAX_CLASSES; c++) {
        tw_ser_i64(w, s->count[c]);
        tw_ser_i64(w, s->miss[c]);
    }
}

static int ci_restore(void *impl, tw_deser *d)
{
    ci_state *s = impl;
    s->total = tw_deser_i64(d);
    for (int c = 0; c < CI_MAX_CLASSES; c++) {
        s->count[c] = tw_deser_i64(d);
        s->miss[c] = tw_deser_i64(d);
    }
    return tw_deser_ok(d) ? TW_OK : TW_ERR;
}

static const dbg_rule_ops ci_ops = {
    .name = "ClassImbalance",
    .nown = P_OWN,
    .select_extra = ci_select,
    .create = ci_create,
    .step = ci_step,
    .save = ci_save,
    .restore = ci_restore,
    .destroy = ci_destroy,
    .condition = "The classes are imbalanced or one is mostly mispredicted",
    .recommendation =
        "Rebalance the sampling (a weighted sampler, over/under-sampling), "
        "weight the loss per class, or collect more samples of the rare "
        "class; check the labels of a class that is mostly mispredicted.",
};

DBG_RULE_DEFINE(ci_ops, ci_params, "ClassImbalance",
                "Flags labels whose most and least frequent classes differ "
                "by more than `threshold_imbalance`, or a class "
                "mispredicted more than `threshold_misprediction`.",
                "The training data is skewed towards some classes, or one "
                "class is mostly predicted wrong. Rebalance the sampling, "
                "weight the loss, or check that class's labels.")
