/*
 * overfit.c - Overfit (DEBUG_RULES.md §4.13).
 *
 * Condition: at the end of an evaluation phase, rho = (mean_val -
 * mean_train) / mean_train, with mean_val the mean of the EVAL losses of
 * that phase and mean_train the mean of the TRAIN losses since the
 * previous one; a counter counts consecutive phases with rho >
 * ratio_threshold and resets otherwise; the rule fires when it reaches
 * patience (default 1). Losses: the `losses` collection and scalar tensors
 * named like (?i)loss, or tensor_regex when given. Each loss name is
 * followed on its own.
 *
 * Decisions (§8.3 item 3; README "Debugging rules"):
 *  - an evaluation phase ends when the first TRAIN loss after EVAL losses
 *    arrives (streaming cannot know earlier that no EVAL step follows), so
 *    the rule fires at that TRAIN step; a phase with no TRAIN loss before
 *    it is not evaluated;
 *  - the counting unit is the evaluation phase;
 *  - start_step (common parameter) gates the losses that enter the means;
 *  - stop_at_first_fire default true (§8.3 item 6).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbg_rule.h"

enum { P_REGEX = 0, P_PATIENCE, P_RATIO, P_OWN };

static const tw_param_spec of_params[] = {
    {"tensor_regex", TW_PARAM_STRING, NULL, 0, 0,
     "comma-separated Python regexes of the losses (None: the losses "
     "collection and scalar tensors named like loss)"},
    {"patience", TW_PARAM_INT, "1", 1, 9.0e15,
     "evaluation phases in a row over ratio_threshold before firing"},
    {"ratio_threshold", TW_PARAM_DOUBLE, "0.1", 0, 1e300,
     "(validation - training loss) / training loss above this overfits"},
    DBG_COMMON_PARAMS,
};

/* Per loss name: [0] train sum, [1] train count, [2] eval sum, [3] eval
 * count, [4] in eval phase (0/1), [5] counter. */
enum { W_TSUM, W_TN, W_ESUM, W_EN, W_INEVAL, W_COUNT, W_N };

typedef struct of_state {
    int64_t patience;
    double ratio;
    tw_tensor_select sel; /* tensor_regex */
    pcre2_code *re;       /* (?i)loss */
    pcre2_match_data *md;
    dbg_map loss;
} of_state;

static void of_destroy(void *impl)
{
    of_state *s = impl;
    if (s == NULL)
        return;
    tw_tensor_select_free(&s->sel);
    pcre2_code_free(s->re);
    pcre2_match_data_free(s->md);
    dbg_map_free(&s->loss);
    free(s);
}

static int of_create(const tw_param_value *v, void **impl, char *err,
                     size_t errlen)
{
    of_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "Overfit: out of memory");
        return TW_ERR;
    }
    s->patience = v[P_PATIENCE].i;
    s->ratio = v[P_RATIO].d;
    dbg_map_init(&s->loss, W_N);
    char why[256];
    if (tw_tensor_select_init(&s->sel, NULL,
                              v[P_REGEX].is_none ? NULL : v[P_REGEX].s, why,
                              sizeof(why)) != TW_OK) {
        snprintf(err, errlen, "Overfit: tensor_regex: %s", why);
        free(s);
        return TW_ERR;
    }
    s->re = tw_tensor_regex_compile("(?i)loss", why, sizeof(why));
    s->md = s->re ? pcre2_match_data_create_from_pattern(s->re, NULL) : NULL;
    if (s->md == NULL) {
        snprintf(err, errlen, "Overfit: %s", s->re ? "out of memory" : why);
        of_destroy(s);
        return TW_ERR;
    }
    *impl = s;
    return TW_OK;
}

static int of_is_loss(void *impl, const tw_tensor *t)
{
    of_state *s = impl;
    if (!tw_tensor_select_empty(&s->sel))
        return tw_tensor_select_match(&s->sel, t, 0);
    return tw_tensor_in_collection(t, "losses") ||
           tw_tensor_regex_search(s->re, s->md, t->name);
}

static double w_get(const uint64_t *p, int i)
{
    double d;
    memcpy(&d, &p[i], sizeof(d));
    return d;
}

static void w_set(uint64_t *p, int i, double d)
{
    memcpy(&p[i], &d, sizeof(d));
}

static int of_step(void *impl, const dbg_step *st, dbg_hit *hit, char *err,
                   size_t errlen)
{
    of_state *s = impl;
    int fired = 0;
    for (size_t i = 0; i < st->ntensors; i++) {
        const tw_tensor *t = st->tensors[i];
        double v;
        if ((t->mode != TW_MODE_TRAIN && t->mode != TW_MODE_EVAL) ||
            !dbg_scalar(t, &v) || !isfinite(v))
            continue;
        uint64_t *p = dbg_map_get(&s->loss, t->name, TW_MODE_NONE, 1);
        if (p == NULL) {
            snprintf(err, errlen, "Overfit: out of memory");
            return TW_ERR;
        }
        if (t->mode == TW_MODE_EVAL) {
            w_set(p, W_ESUM, w_get(p, W_ESUM) + v);
            p[W_EN]++;
            p[W_INEVAL] = 1;
            continue;
        }
        if (p[W_INEVAL] && p[W_TN] > 0 && p[W_EN] > 0) {
            double mt = w_get(p, W_TSUM) / (double)p[W_TN];
            double mv = w_get(p, W_ESUM) / (double)p[W_EN];
            double rho = (mv - mt) / mt;
            p[W_COUNT] = rho > s->ratio ? p[W_COUNT] + 1 : 0;
            if ((int64_t)p[W_COUNT] >= s->patience && !fired) {
                dbg_hit_set(hit, t, rho, s->ratio,
                            "validation loss %.4g vs training loss %.4g: "
                            "ratio %.3g > %g for %llu evaluation phase(s)",
                            mv, mt, rho, s->ratio,
                            (unsigned long long)p[W_COUNT]);
                fired = 1;
            }
        }
        if (p[W_INEVAL]) {
            /* a new training phase: restart both means */
            w_set(p, W_TSUM, 0);
            p[W_TN] = 0;
            w_set(p, W_ESUM, 0);
            p[W_EN] = 0;
            p[W_INEVAL] = 0;
        }
        w_set(p, W_TSUM, w_get(p, W_TSUM) + v);
        p[W_TN]++;
    }
    return fired;
}

static void of_save(void *impl, tw_ser *w)
{
    dbg_map_save(&((of_state *)impl)->loss, w);
}

static int of_restore(void *impl, tw_deser *d)
{
    return dbg_map_restore(&((of_state *)impl)->loss, d);
}

static const dbg_rule_ops of_ops = {
    .name = "Overfit",
    .nown = P_OWN,
    .select_extra = of_is_loss,
    .create = of_create,
    .step = of_step,
    .save = of_save,
    .restore = of_restore,
    .destroy = of_destroy,
    .condition = "The model overfits: validation loss well above training "
                 "loss",
    .recommendation =
        "Stop at the best validation loss (early stopping), add "
        "regularization (weight decay, dropout, data augmentation) or more "
        "training data, or use a smaller model.",
};

DBG_RULE_DEFINE(of_ops, of_params, "Overfit",
                "Flags a validation loss that exceeds the training loss by "
                "more than `ratio_threshold` for `patience` evaluation "
                "phases.",
                "The validation loss is well above the training loss: the "
                "model memorizes the training set. Stop early, regularize, "
                "augment or add data, or shrink the model.")
