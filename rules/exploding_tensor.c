/*
 * exploding_tensor.c - ExplodingTensor (DEBUG_RULES.md §4.2).
 *
 * Condition: at a step, any selected tensor holds a NaN, or (only_nan
 * false) a +Inf or -Inf. Selection: collection_names ∪ tensor_regex; with
 * neither, every tensor the hook publishes (the managed service's
 * default, which on PyTorch sees the losses only).
 *
 * Decisions (no public reference code settles them; README "Debugging
 * rules"):
 *  - streamed from the hook's reductions, not full tensors: nan_count and
 *    inf_count first; without them min/max (a NaN min or max means a NaN;
 *    max +Inf or min -Inf an Inf); without those a scalar value, then the
 *    raw values. sum or mean are never used (an overflowing sum would be a
 *    false alarm). A tensor with none of these is not evaluated (the
 *    reference skips a step whose tensors lack the data it reads);
 *  - the finding names the first tensor (in name order) that holds NaN or
 *    Inf, and how many elements;
 *  - every worker is evaluated (dbg_rule.h), stop_at_first_fire default
 *    true (§8.3 item 6).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "dbg_rule.h"

enum { P_ONLY_NAN = 0, P_OWN };

static const tw_param_spec et_params[] = {
    {"only_nan", TW_PARAM_BOOL, "false", 0, 1,
     "true: only NaN fires; false: +Inf and -Inf fire too"},
    DBG_SELECT_PARAMS,
    DBG_COMMON_PARAMS,
};

typedef struct et_state {
    int only_nan;
} et_state;

static int et_create(const tw_param_value *v, void **impl, char *err,
                     size_t errlen)
{
    et_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "ExplodingTensor: out of memory");
        return TW_ERR;
    }
    s->only_nan = v[P_ONLY_NAN].is_none ? 0 : v[P_ONLY_NAN].i != 0;
    *impl = s;
    return TW_OK;
}

/* NaN and Inf element counts of t; 0 when t carries nothing to tell. */
static int et_counts(const tw_tensor *t, double *nan, double *inf)
{
    int have_nan, have_inf;
    *nan = dbg_get(t, "nan_count", &have_nan);
    *inf = dbg_get(t, "inf_count", &have_inf);
    if (have_nan || have_inf) {
        if (!have_nan)
            *nan = 0;
        if (!have_inf)
            *inf = 0;
        return 1;
    }
    int have_min, have_max;
    double mn = dbg_get(t, "min", &have_min), mx = dbg_get(t, "max", &have_max);
    if (have_min || have_max) {
        *nan = (have_min && isnan(mn)) || (have_max && isnan(mx));
        *inf = (have_max && isinf(mx) && mx > 0) ||
               (have_min && isinf(mn) && mn < 0);
        return 1;
    }
    double v;
    if (t->nraw != 1 && dbg_scalar(t, &v)) {
        *nan = isnan(v);
        *inf = isinf(v);
        return 1;
    }
    if (t->nraw > 0) {
        *nan = *inf = 0;
        for (uint32_t i = 0; i < t->nraw; i++) {
            *nan += isnan(t->raw[i]);
            *inf += isinf(t->raw[i]);
        }
        return 1;
    }
    return 0;
}

static int et_step(void *impl, const dbg_step *st, dbg_hit *hit, char *err,
                   size_t errlen)
{
    et_state *s = impl;
    (void)err, (void)errlen;
    size_t affected = 0;
    const tw_tensor *worst = NULL;
    double wnan = 0, winf = 0;
    for (size_t i = 0; i < st->ntensors; i++) {
        double nan, inf;
        if (!et_counts(st->tensors[i], &nan, &inf))
            continue;
        if (nan > 0 || (!s->only_nan && inf > 0)) {
            if (worst == NULL) {
                worst = st->tensors[i];
                wnan = nan;
                winf = inf;
            }
            affected++;
        }
    }
    if (worst == NULL)
        return 0;
    dbg_hit_set(hit, worst, wnan + (s->only_nan ? 0 : winf), 0,
                "%.0f NaN and %.0f Inf of %lld elements (%zu tensor(s) "
                "affected at this step)",
                wnan, winf, (long long)worst->numel, affected);
    return 1;
}

static void et_destroy(void *impl)
{
    free(impl);
}

static const dbg_rule_ops et_ops = {
    .name = "ExplodingTensor",
    .nown = P_OWN,
    .select = 1,
    .all_if_empty = 1,
    .create = et_create,
    .step = et_step,
    .destroy = et_destroy,
    .condition = "A tensor holds NaN or infinite values",
    .recommendation =
        "Lower the learning rate (or add warm-up / gradient clipping); with "
        "fp16/AMP use a loss scaler; look for log(0), division by zero or "
        "sqrt of a negative in the loss; check the batch of that step for "
        "bad inputs.",
};

DBG_RULE_DEFINE(et_ops, et_params, "ExplodingTensor",
                "Flags a step at which a tensor (loss, gradient, weight) "
                "holds NaN or +-Inf.",
                "A tensor went NaN or infinite: training has diverged or "
                "overflowed. Lower the learning rate, clip gradients, use a "
                "loss scaler with fp16, and check the loss for log(0) or "
                "division by zero and the data for bad values.")
