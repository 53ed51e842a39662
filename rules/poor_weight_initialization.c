/*
 * poor_weight_initialization.c - PoorWeightInitialization (DEBUG_RULES.md
 * §4.15).
 *
 * Evaluated only over the first `steps` global steps (default 10). At a
 * step it fires when any of:
 *  1. the activation inputs (names matching activation_inputs_regex,
 *     default `.*relu_input`, or collection `relu_input`) have variances
 *     whose max / min > threshold (default 10);
 *  2. some gradient (collection `gradients` or `gradient/...`) has p95 -
 *     p5 < distribution_range (default 0.001);
 *  3. the loss (the `losses` collection, or (?i)loss) has not gone below
 *     its best for `patience` (default 5) saved steps.
 *
 * Decisions (README "Debugging rules"):
 *  - variances are the hook's population variances (float64); a zero
 *    minimum variance with a positive maximum counts as an infinite
 *    ratio;
 *  - gradient quantiles come from the hook's p5/p95 (published only
 *    during these first steps); a gradient without them is not checked;
 *  - condition 3 counts saved steps of each loss (and mode) since its
 *    last new best; any decrease is a new best;
 *  - stop_at_first_fire default true (§8.3 item 6).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbg_rule.h"

enum { P_REGEX = 0, P_THRESHOLD, P_RANGE, P_PATIENCE, P_STEPS, P_OWN };

static const tw_param_spec pwi_params[] = {
    {"activation_inputs_regex", TW_PARAM_STRING, ".*relu_input", 0, 0,
     "Python regex of the activation inputs' names"},
    {"threshold", TW_PARAM_DOUBLE, "10.0", 0, 1e300,
     "largest allowed ratio of the largest to the smallest activation-input "
     "variance"},
    {"distribution_range", TW_PARAM_DOUBLE, "0.001", 0, 1e300,
     "smallest allowed p95 - p5 of a gradient"},
    {"patience", TW_PARAM_INT, "5", 1, 9.0e15,
     "saved steps the loss may go without a new best"},
    {"steps", TW_PARAM_INT, "10", 1, 9.0e15,
     "the first global steps evaluated"},
    DBG_COMMON_PARAMS,
};

typedef struct pwi_state {
    double threshold, range;
    int64_t patience, steps;
    pcre2_code *act, *loss;
    pcre2_match_data *amd, *lmd;
    dbg_map best; /* per loss and mode: [0] best, [1] seen, [2] since */
} pwi_state;

static void pwi_destroy(void *impl)
{
    pwi_state *s = impl;
    if (s == NULL)
        return;
    pcre2_code_free(s->act);
    pcre2_code_free(s->loss);
    pcre2_match_data_free(s->amd);
    pcre2_match_data_free(s->lmd);
    dbg_map_free(&s->best);
    free(s);
}

static int pwi_create(const tw_param_value *v, void **impl, char *err,
                      size_t errlen)
{
    pwi_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "PoorWeightInitialization: out of memory");
        return TW_ERR;
    }
    s->threshold = v[P_THRESHOLD].d;
    s->range = v[P_RANGE].d;
    s->patience = v[P_PATIENCE].i;
    s->steps = v[P_STEPS].i;
    dbg_map_init(&s->best, 3);
    char why[256];
    const char *re = v[P_REGEX].is_none ? ".*relu_input" : v[P_REGEX].s;
    if ((s->act = tw_tensor_regex_compile(re, why, sizeof(why))) == NULL ||
        (s->loss = tw_tensor_regex_compile("(?i)loss", why, sizeof(why))) ==
            NULL) {
        snprintf(err, errlen, "PoorWeightInitialization: %s", why);
        pwi_destroy(s);
        return TW_ERR;
    }
    s->amd = pcre2_match_data_create_from_pattern(s->act, NULL);
    s->lmd = pcre2_match_data_create_from_pattern(s->loss, NULL);
    if (s->amd == NULL || s->lmd == NULL) {
        snprintf(err, errlen, "PoorWeightInitialization: out of memory");
        pwi_destroy(s);
        return TW_ERR;
    }
    *impl = s;
    return TW_OK;
}

enum { K_NONE, K_ACT, K_GRAD, K_LOSS };

static int pwi_kind(const pwi_state *s, const tw_tensor *t)
{
    if (tw_tensor_in_collection(t, "gradients") ||
        strncmp(t->name, "gradient/", 9) == 0)
        return K_GRAD;
    if (tw_tensor_in_collection(t, "relu_input") ||
        tw_tensor_regex_search(s->act, s->amd, t->name))
        return K_ACT;
    if (tw_tensor_in_collection(t, "losses") ||
        tw_tensor_regex_search(s->loss, s->lmd, t->name))
        return K_LOSS;
    return K_NONE;
}

static int pwi_select(void *impl, const tw_tensor *t)
{
    pwi_state *s = impl;
    return t->step < s->steps && pwi_kind(s, t) != K_NONE;
}

static int pwi_step(void *impl, const dbg_step *st, dbg_hit *hit, char *err,
                    size_t errlen)
{
    pwi_state *s = impl;
    const tw_tensor *vmax_t = NULL, *vmin_t = NULL;
    double vmax = 0, vmin = 0;
    int fired = 0;
    for (size_t i = 0; i < st->ntensors; i++) {
        const tw_tensor *t = st->tensors[i];
        double v, p5, p95;
        switch (pwi_kind(s, t)) {
        case K_ACT:
            if (!tw_tensor_get(t, "variance", &v) || isnan(v))
                break;
            if (vmax_t == NULL || v > vmax)
                vmax = v, vmax_t = t;
            if (vmin_t == NULL || v < vmin)
                vmin = v, vmin_t = t;
            break;
        case K_GRAD:
            if (!fired && tw_tensor_get(t, "p5", &p5) &&
                tw_tensor_get(t, "p95", &p95) && p95 - p5 < s->range) {
                dbg_hit_set(hit, t, p95 - p5, s->range,
                            "gradient p95 - p5 = %.3g < distribution_range "
                            "%g",
                            p95 - p5, s->range);
                fired = 1;
            }
            break;
        case K_LOSS: {
            if (!dbg_scalar(t, &v) || !isfinite(v))
                break;
            uint64_t *p = dbg_map_get(&s->best, t->name, t->mode, 1);
            if (p == NULL) {
                snprintf(err, errlen,
                         "PoorWeightInitialization: out of memory");
                return TW_ERR;
            }
            double best;
            memcpy(&best, &p[0], sizeof(best));
            if (!p[1] || v < best) {
                memcpy(&p[0], &v, sizeof(v));
                p[1] = 1;
                p[2] = 0;
            } else if ((int64_t)++p[2] >= s->patience && !fired) {
                dbg_hit_set(hit, t, (double)p[2], (double)s->patience,
                            "the loss has not gone below %.4g for %llu "
                            "saved steps in the first %lld steps",
                            best, (unsigned long long)p[2],
                            (long long)s->steps);
                fired = 1;
            }
            break;
        }
        default:
            break;
        }
    }
    if (!fired && vmax_t != NULL && vmax_t != vmin_t && vmax > 0 &&
        (vmin == 0 || vmax / vmin > s->threshold)) {
        double ratio = vmin == 0 ? INFINITY : vmax / vmin;
        dbg_hit_set(hit, vmin_t, ratio, s->threshold,
                    "activation-input variances from %.3g (%s) to %.3g: "
                    "ratio %.3g > %g",
                    vmin, vmin_t->name, vmax, ratio, s->threshold);
        fired = 1;
    }
    return fired;
}

static void pwi_save(void *impl, tw_ser *w)
{
    dbg_map_save(&((pwi_state *)impl)->best, w);
}

static int pwi_restore(void *impl, tw_deser *d)
{
    return dbg_map_restore(&((pwi_state *)impl)->best, d);
}

static const dbg_rule_ops pwi_ops = {
    .name = "PoorWeightInitialization",
    .nown = P_OWN,
    .select_extra = pwi_select,
    .create = pwi_create,
    .step = pwi_step,
    .save = pwi_save,
    .restore = pwi_restore,
    .destroy = pwi_destroy,
    .condition = "The weights look poorly initialized",
    .recommendation =
        "Use an initialization scaled to the layer (Kaiming/He for ReLU, "
        "Xavier/Glorot for tanh/sigmoid) instead of constants or a fixed "
        "standard deviation, and check custom init code.",
};

DBG_RULE_DEFINE(pwi_ops, pwi_params, "PoorWeightInitialization",
                "In the first `steps` steps, flags activation-input "
                "variances spread by more than `threshold`, gradients "
                "narrower than `distribution_range`, or a loss that does "
                "not improve for `patience` saved steps.",
                "Activations shrink or grow across layers, gradients are "
                "all alike, or the loss does not move at the start: the "
                "weights were initialized badly. Use Kaiming/Xavier "
                "initialization and check custom init code.")
