/*
 * dead_relu.c - DeadRelu (DEBUG_RULES.md §4.10).
 *
 * Condition: at a step, a ReLU layer has more than threshold_layer percent
 * (default 50) of dead nodes, a node being dead when it is active (> 0) in
 * fewer than threshold_inactivity percent (default 1) of the batch's
 * samples. ReLU outputs: the `relu_output` collection, names matching
 * `.*relu_output` (the reference's default regex), tensors carrying a
 * dead_fraction reduction, ∪ collection_names ∪ tensor_regex.
 *
 * Decisions (README "Debugging rules"):
 *  - axis 0 is the batch, every other position a node (§4.10);
 *  - streamed: the hook's dead_fraction (the share of dead nodes at its
 *    own threshold_inactivity, which the hook must be configured with)
 *    decides; without it, the raw values with their shape; a layer with
 *    neither is not evaluated. zero_fraction alone is not used: it does
 *    not separate nodes;
 *  - > threshold_layer, strictly (the guide's wording);
 *  - stop_at_first_fire default true (§8.3 item 6).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dbg_rule.h"

enum { P_INACTIVITY = 0, P_LAYER, P_OWN };

static const tw_param_spec dr_params[] = {
    {"threshold_inactivity", TW_PARAM_DOUBLE, "1.0", 0, 100,
     "a node active (> 0) in fewer than this percent of samples is dead"},
    {"threshold_layer", TW_PARAM_DOUBLE, "50.0", 0, 100,
     "a layer with more than this percent of dead nodes fires"},
    DBG_SELECT_PARAMS,
    DBG_COMMON_PARAMS,
};

typedef struct dr_state {
    double inactivity, layer;
    pcre2_code *re;
    pcre2_match_data *md;
} dr_state;

static void dr_destroy(void *impl)
{
    dr_state *s = impl;
    if (s == NULL)
        return;
    pcre2_code_free(s->re);
    pcre2_match_data_free(s->md);
    free(s);
}

static int dr_create(const tw_param_value *v, void **impl, char *err,
                     size_t errlen)
{
    dr_state *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        snprintf(err, errlen, "DeadRelu: out of memory");
        return TW_ERR;
    }
    s->inactivity = v[P_INACTIVITY].d;
    s->layer = v[P_LAYER].d;
    char why[200];
    s->re = tw_tensor_regex_compile(".*relu_output", why, sizeof(why));
    s->md = s->re ? pcre2_match_data_create_from_pattern(s->re, NULL) : NULL;
    if (s->md == NULL) {
        snprintf(err, errlen, "DeadRelu: %s", s->re ? "out of memory" : why);
        dr_destroy(s);
        return TW_ERR;
    }
    *impl = s;
    return TW_OK;
}

static int dr_is_relu(void *impl, const tw_tensor *t)
{
    dr_state *s = impl;
    return tw_tensor_in_collection(t, "relu_output") ||
           tw_tensor_reduction_find(t, "dead_fraction") != NULL ||
           tw_tensor_regex_search(s->re, s->md, t->name);
}

/* Percent of dead nodes from raw values shaped (N, ...); -1 = cannot. */
static double dr_dead_from_raw(const dr_state *s, const tw_tensor *t)
{
    if (t->nshape < 1 || t->shape[0] <= 0 || t->nraw == 0)
        return -1;
    size_t n = (size_t)t->shape[0];
    if (t->nraw % n != 0)
        return -1;
    size_t nodes = t->nraw / n, dead = 0;
    for (size_t j = 0; j < nodes; j++) {
        size_t active = 0;
        for (size_t b = 0; b < n; b++)
            active += t->raw[b * nodes + j] > 0;
        if (100.0 * (double)active / (double)n < s->inactivity)
            dead++;
    }
    return nodes ? 100.0 * (double)dead / (double)nodes : -1;
}

static int dr_step(void *impl, const dbg_step *st, dbg_hit *hit, char *err,
                   size_t errlen)
{
    dr_state *s = impl;
    (void)err, (void)errlen;
    for (size_t i = 0; i < st->ntensors; i++) {
        const tw_tensor *t = st->tensors[i];
        double f, d;
        if (tw_tensor_get(t, "dead_fraction", &f))
            d = 100.0 * f;
        else if ((d = dr_dead_from_raw(s, t)) < 0)
            continue;
        if (d > s->layer) {
            dbg_hit_set(hit, t, d, s->layer,
                        "%.3g %% of its nodes are dead (> %g %%; a node is "
                        "dead when active in < %g %% of the batch)",
                        d, s->layer, s->inactivity);
            return 1;
        }
    }
    return 0;
}

static const dbg_rule_ops dr_ops = {
    .name = "DeadRelu",
    .nown = P_OWN,
    .select = 1,
    .select_extra = dr_is_relu,
    .create = dr_create,
    .step = dr_step,
    .destroy = dr_destroy,
    .condition = "A ReLU layer is mostly dead",
    .recommendation =
        "Lower the learning rate, check the bias initialization of the "
        "layer before the ReLU (large negative biases kill it), or use "
        "LeakyReLU/ELU; batch normalization before the ReLU also helps.",
};

DBG_RULE_DEFINE(dr_ops, dr_params, "DeadRelu",
                "Flags a step at which more than `threshold_layer` percent "
                "of a ReLU layer's nodes are inactive.",
                "Most units of a ReLU layer output 0 for every sample and no "
                "longer learn: too high a learning rate, a bad (negative) "
                "bias initialization. Lower the learning rate, fix the "
                "initialization or use LeakyReLU.")
