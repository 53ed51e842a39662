/*
 * tensor_variance.c - TensorVariance (DEBUG_RULES.md §4.17).
 *
 * Condition: at a step, a selected tensor's variance v is above
 * max_threshold (when set) or below min_threshold (when set). Needs
 * collection_names or tensor_regex. With both thresholds None it can
 * never fire (as the reference; the configuration is accepted).
 *
 * Decisions (README "Debugging rules"):
 *  - §8.3 item 5: the population variance (ddof 0) in float64, from the
 *    hook's "variance" reduction, else from the raw values; it differs
 *    from the reference's torch-side (N-1) value by the factor N/(N-1);
 *  - a NaN variance fires neither bound (ExplodingTensor's job);
 *  - stop_at_first_fire default true (§8.3 item 6).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "dbg_rule.h"

enum { P_MAX = 0, P_MIN, P_OWN };

static const tw_param_spec tv_params[] = {
    {"max_threshold", TW_PARAM_DOUBLE, NULL, -1e300, 1e300,
     "fire when a variance is above this (None: no upper bound)"},
    {"min_threshold", TW_PARAM_DOUBLE, NULL, -1e300, 1e300,
     "fire when a variance is below this (None: no lower bound)"},
    DBG_SELECT_PARAMS,
    DBG_COMMON_PARAMS,
};

typedef struct tv_state {
    int has_max, has_min;
    double max, min;
} tv_state;

static int tv_create(const tw_param_value *v, void **impl, char *err,
                     size_t errlen)
{
    tv_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "TensorVariance: out of memory");
        return TW_ERR;
    }
    s->has_max = !v[P_MAX].is_none;
    s->has_min = !v[P_MIN].is_none;
    s->max = v[P_MAX].d;
    s->min = v[P_MIN].d;
    *impl = s;
    return TW_OK;
}

static int tv_step(void *impl, const dbg_step *st, dbg_hit *hit, char *err,
                   size_t errlen)
{
    tv_state *s = impl;
    (void)err, (void)errlen;
    for (size_t i = 0; i < st->ntensors; i++) {
        const tw_tensor *t = st->tensors[i];
        double v;
        if (!tw_tensor_get(t, "variance", &v)) {
            if (t->nraw == 0)
                continue;
            v = dbg_variance(t->raw, t->nraw);
        }
        if (s->has_max && v > s->max) {
            dbg_hit_set(hit, t, v, s->max, "variance %.4g > max_threshold %g",
                        v, s->max);
            return 1;
        }
        if (s->has_min && v < s->min) {
            dbg_hit_set(hit, t, v, s->min, "variance %.4g < min_threshold %g",
                        v, s->min);
            return 1;
        }
    }
    return 0;
}

static const dbg_rule_ops tv_ops = {
    .name = "TensorVariance",
    .nown = P_OWN,
    .select = 1,
    .require_selection = 1,
    .create = tv_create,
    .step = tv_step,
    .destroy = free,
    .condition = "A tensor's variance is out of bounds",
    .recommendation =
        "A variance collapsing to 0 or blowing up points at the "
        "initialization, the learning rate or a missing normalization "
        "layer: check the scale of the layer's inputs and weights.",
};

DBG_RULE_DEFINE(tv_ops, tv_params, "TensorVariance",
                "Flags a step at which a selected tensor's variance is "
                "above `max_threshold` or below `min_threshold`.",
                "The variance of a tensor left its bounds: activations or "
                "weights collapse or blow up. Check the initialization, "
                "the learning rate and normalization layers.")
