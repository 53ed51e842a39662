/*
 * saturated_activation.c - SaturatedActivation (DEBUG_RULES.md §4.16).
 *
 * Condition: at a step, more than threshold_layer percent (default 50) of
 * a tanh or sigmoid layer's nodes are saturated, a node being saturated
 * when its pre-activation input lies strictly inside (min, max) in fewer
 * than threshold_inactivity percent (default 1) of the batch's samples;
 * (min, max) is (threshold_tanh_min, threshold_tanh_max) for a tensor
 * whose name contains "tanh", (threshold_sigmoid_min,
 * threshold_sigmoid_max) for "sigmoid". Selection: collection_names ∪
 * tensor_regex (default `.*tanh_input|.*sigmoid_input`).
 *
 * Decisions (README "Debugging rules"):
 *  - the function is told by the tensor name (contains tanh or sigmoid;
 *    neither: not evaluated);
 *  - per node as DeadRelu (axis 0 the batch);
 *  - streamed from the hook's saturated_fraction (share of saturated
 *    nodes, with the hook configured with these bounds), else the raw
 *    values with their shape; strictly greater than threshold_layer;
 *  - stop_at_first_fire default true (§8.3 item 6).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbg_rule.h"

enum {
    P_TANH_MIN = 0,
    P_TANH_MAX,
    P_SIG_MIN,
    P_SIG_MAX,
    P_INACTIVITY,
    P_LAYER,
    P_OWN
};

static const tw_param_spec sa_params[] = {
    {"threshold_tanh_min", TW_PARAM_DOUBLE, "-9.4999", -1e300, 1e300,
     "tanh inputs at or below this are saturated"},
    {"threshold_tanh_max", TW_PARAM_DOUBLE, "9.4999", -1e300, 1e300,
     "tanh inputs at or above this are saturated"},
    {"threshold_sigmoid_min", TW_PARAM_DOUBLE, "-23", -1e300, 1e300,
     "sigmoid inputs at or below this are saturated"},
    {"threshold_sigmoid_max", TW_PARAM_DOUBLE, "16.99999", -1e300, 1e300,
     "sigmoid inputs at or above this are saturated"},
    {"threshold_inactivity", TW_PARAM_DOUBLE, "1.0", 0, 100,
     "a node unsaturated in fewer than this percent of samples is "
     "saturated"},
    {"threshold_layer", TW_PARAM_DOUBLE, "50.0", 0, 100,
     "a layer with more than this percent of saturated nodes fires"},
    {"collection_names", TW_PARAM_STRING, NULL, 0, 0,
     "comma-separated collections whose tensors are checked"},
    {"tensor_regex", TW_PARAM_STRING, ".*tanh_input|.*sigmoid_input", 0, 0,
     "comma-separated Python regexes of the pre-activation inputs"},
    DBG_COMMON_PARAMS,
};

typedef struct sa_state {
    double tmin, tmax, smin, smax, inactivity, layer;
} sa_state;

static int sa_create(const tw_param_value *v, void **impl, char *err,
                     size_t errlen)
{
    sa_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "SaturatedActivation: out of memory");
        return TW_ERR;
    }
    s->tmin = v[P_TANH_MIN].d;
    s->tmax = v[P_TANH_MAX].d;
    s->smin = v[P_SIG_MIN].d;
    s->smax = v[P_SIG_MAX].d;
    s->inactivity = v[P_INACTIVITY].d;
    s->layer = v[P_LAYER].d;
    *impl = s;
    return TW_OK;
}

/* Percent of saturated nodes from raw values shaped (N, ...); -1 = cannot. */
static double sa_from_raw(const sa_state *s, const tw_tensor *t, double lo,
                          double hi)
{
    if (t->nshape < 1 || t->shape[0] <= 0 || t->nraw == 0)
        return -1;
    size_t n = (size_t)t->shape[0];
    if (t->nraw % n != 0)
        return -1;
    size_t nodes = t->nraw / n, sat = 0;
    for (size_t j = 0; j < nodes; j++) {
        size_t inside = 0;
        for (size_t b = 0; b < n; b++) {
            double x = t->raw[b * nodes + j];
            inside += x > lo && x < hi;
        }
        if (100.0 * (double)inside / (double)n < s->inactivity)
            sat++;
    }
    return nodes ? 100.0 * (double)sat / (double)nodes : -1;
}

static int sa_step(void *impl, const dbg_step *st, dbg_hit *hit, char *err,
                   size_t errlen)
{
    sa_state *s = impl;
    (void)err, (void)errlen;
    for (size_t i = 0; i < st->ntensors; i++) {
        const tw_tensor *t = st->tensors[i];
        int tanh_ = strstr(t->name, "tanh") != NULL;
        int sig = strstr(t->name, "sigmoid") != NULL;
        if (!tanh_ && !sig)
            continue;
        double lo = tanh_ ? s->tmin : s->smin, hi = tanh_ ? s->tmax : s->smax;
        double f, p;
        if (tw_tensor_get(t, "saturated_fraction", &f))
            p = 100.0 * f;
        else if ((p = sa_from_raw(s, t, lo, hi)) < 0)
            continue;
        if (p > s->layer) {
            dbg_hit_set(hit, t, p, s->layer,
                        "%.3g %% of its nodes are saturated (> %g %%; inputs "
                        "outside (%g, %g) in > %g %% of the batch)",
                        p, s->layer, lo, hi, 100 - s->inactivity);
            return 1;
        }
    }
    return 0;
}

static const dbg_rule_ops sa_ops = {
    .name = "SaturatedActivation",
    .nown = P_OWN,
    .select = 1,
    .create = sa_create,
    .step = sa_step,
    .destroy = free,
    .condition = "A tanh or sigmoid layer is saturated",
    .recommendation =
        "Scale the layer's inputs down (normalization before the "
        "activation, a smaller initialization or learning rate), or use a "
        "non-saturating activation.",
};

DBG_RULE_DEFINE(sa_ops, sa_params, "SaturatedActivation",
                "Flags a step at which more than `threshold_layer` percent "
                "of a tanh or sigmoid layer's nodes are saturated.",
                "The inputs of a tanh or sigmoid layer sit in its flat "
                "tails, so its gradients vanish. Normalize the inputs, "
                "shrink the initialization or learning rate, or change the "
                "activation.")
