/*
 * vanishing_gradient.c - VanishingGradient (DEBUG_RULES.md §4.1).
 *
 * Condition: at a step, the mean absolute value of any gradient tensor is
 * strictly below `threshold` (default 1e-7). Gradients are the tensors of
 * the `gradients` collection and those named "gradient/..." (the PyTorch
 * hook's names, §5.3).
 *
 * Decisions (README "Debugging rules"):
 *  - reads the hook's abs_mean reduction; without it, mean |x| of the raw
 *    values; a gradient with neither is not evaluated;
 *  - every gradient is evaluated (the reference documentation's simplified
 *    rule returns after the first tensor: a documentation bug); the
 *    finding names the smallest one;
 *  - a NaN abs_mean does not fire (it is ExplodingTensor's);
 *  - stop_at_first_fire default true (§8.3 item 6).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbg_rule.h"

enum { P_THRESHOLD = 0, P_OWN };

static const tw_param_spec vg_params[] = {
    {"threshold", TW_PARAM_DOUBLE, "1e-7", 0, 1e300,
     "a gradient whose mean |g| is below this has vanished"},
    DBG_COMMON_PARAMS,
};

typedef struct vg_state {
    double threshold;
} vg_state;

static int vg_create(const tw_param_value *v, void **impl, char *err,
                     size_t errlen)
{
    vg_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "VanishingGradient: out of memory");
        return TW_ERR;
    }
    s->threshold = v[P_THRESHOLD].d;
    *impl = s;
    return TW_OK;
}

static int vg_is_gradient(void *impl, const tw_tensor *t)
{
    (void)impl;
    return tw_tensor_in_collection(t, "gradients") ||
           strncmp(t->name, "gradient/", 9) == 0;
}

static int vg_abs_mean(const tw_tensor *t, double *out)
{
    if (tw_tensor_get(t, "abs_mean", out))
        return 1;
    if (t->nraw == 0)
        return 0;
    double sum = 0;
    for (uint32_t i = 0; i < t->nraw; i++)
        sum += fabs(t->raw[i]);
    *out = sum / t->nraw;
    return 1;
}

static int vg_step(void *impl, const dbg_step *st, dbg_hit *hit, char *err,
                   size_t errlen)
{
    vg_state *s = impl;
    (void)err, (void)errlen;
    const tw_tensor *low = NULL;
    double lowv = 0;
    size_t below = 0;
    for (size_t i = 0; i < st->ntensors; i++) {
        double m;
        if (!vg_abs_mean(st->tensors[i], &m) || !(m < s->threshold))
            continue;
        below++;
        if (low == NULL || m < lowv) {
            low = st->tensors[i];
            lowv = m;
        }
    }
    if (low == NULL)
        return 0;
    dbg_hit_set(hit, low, lowv, s->threshold,
                "mean |gradient| %.3g < threshold %.3g (%zu of %zu gradient "
                "tensor(s) below)",
                lowv, s->threshold, below, st->ntensors);
    return 1;
}

static void vg_destroy(void *impl)
{
    free(impl);
}

static const dbg_rule_ops vg_ops = {
    .name = "VanishingGradient",
    .nown = P_OWN,
    .select_extra = vg_is_gradient,
    .create = vg_create,
    .step = vg_step,
    .destroy = vg_destroy,
    .condition = "A gradient has vanished",
    .recommendation =
        "Check that the parameter takes part in the loss (no .detach() or "
        "torch.no_grad() on its path, no unused layer); for deep "
        "sigmoid/tanh stacks use ReLU-family activations, residual "
        "connections, normalization or a better initialization.",
};

DBG_RULE_DEFINE(vg_ops, vg_params, "VanishingGradient",
                "Flags a step at which a gradient's mean absolute value is "
                "below `threshold`.",
                "A gradient is (nearly) zero, so its parameters no longer "
                "learn: a detached graph, an unused parameter, a dead layer "
                "or saturating activations in a deep network. Fix the graph, "
                "or use ReLU-family activations, residual connections and "
                "normalization.")
