/*
 * all_zero.c - AllZero (DEBUG_RULES.md §4.5).
 *
 * Condition: at a step, a selected tensor has at least `threshold` percent
 * (default 100) of its elements equal to zero (-0.0 counts). Needs
 * collection_names or tensor_regex.
 *
 * Decisions (README "Debugging rules"):
 *  - >= threshold (the guide's "percentage that needs to be zero");
 *  - the zero share comes from the hook's zero_fraction (x 100), else
 *    zero_count / numel, else the raw values; with threshold 100 alone,
 *    min == max == 0 also decides; a tensor with none of these is not
 *    evaluated;
 *  - stop_at_first_fire default true (§8.3 item 6).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "dbg_rule.h"

enum { P_THRESHOLD = 0, P_OWN };

static const tw_param_spec az_params[] = {
    {"threshold", TW_PARAM_DOUBLE, "100", 0, 100,
     "percent of a tensor's elements that must be zero to fire"},
    DBG_SELECT_PARAMS,
    DBG_COMMON_PARAMS,
};

static int az_create(const tw_param_value *v, void **impl, char *err,
                     size_t errlen)
{
    double *thr = malloc(sizeof(double));
    if (thr == NULL) {
        snprintf(err, errlen, "AllZero: out of memory");
        return TW_ERR;
    }
    *thr = v[P_THRESHOLD].d;
    *impl = thr;
    return TW_OK;
}

/* Percent of zero elements of t; 0 when nothing tells. */
static int az_zero_percent(const tw_tensor *t, double thr, double *out)
{
    double v;
    if (tw_tensor_get(t, "zero_fraction", &v)) {
        *out = 100.0 * v;
        return 1;
    }
    if (tw_tensor_get(t, "zero_count", &v) && t->numel > 0) {
        *out = 100.0 * v / (double)t->numel;
        return 1;
    }
    if (t->nraw > 0) {
        size_t z = 0;
        for (uint32_t i = 0; i < t->nraw; i++)
            z += t->raw[i] == 0;
        *out = 100.0 * (double)z / t->nraw;
        return 1;
    }
    double mn, mx;
    if (thr >= 100 && tw_tensor_get(t, "min", &mn) &&
        tw_tensor_get(t, "max", &mx)) {
        *out = mn == 0 && mx == 0 ? 100 : 0;
        return 1;
    }
    return 0;
}

static int az_step(void *impl, const dbg_step *st, dbg_hit *hit, char *err,
                   size_t errlen)
{
    double thr = *(double *)impl;
    (void)err, (void)errlen;
    for (size_t i = 0; i < st->ntensors; i++) {
        double z;
        if (!az_zero_percent(st->tensors[i], thr, &z) || !(z >= thr))
            continue;
        dbg_hit_set(hit, st->tensors[i], z, thr,
                    "%.4g %% of %lld elements are zero (threshold %g %%)", z,
                    (long long)st->tensors[i]->numel, thr);
        return 1;
    }
    return 0;
}

static const dbg_rule_ops az_ops = {
    .name = "AllZero",
    .nown = P_OWN,
    .select = 1,
    .require_selection = 1,
    .create = az_create,
    .step = az_step,
    .destroy = free,
    .condition = "A tensor is (almost) all zeros",
    .recommendation =
        "Check the initialization of that tensor (zero-initialized weights "
        "never break symmetry), that it is updated, and masks or ReLU "
        "layers that zero everything.",
};

DBG_RULE_DEFINE(az_ops, az_params, "AllZero",
                "Flags a step at which a selected tensor has at least "
                "`threshold` percent zeros.",
                "A tensor is all (or mostly) zeros: a zero initialization, "
                "a parameter never updated, a mask gone wrong or dead "
                "activations. Check how it is initialized and updated.")
